#!/usr/bin/env python3
"""bench/sass_stalls.py - where a kernel's warps wait, by SASS instruction: ncu's source page as CSV, summed by
opcode (share of the warp-stall samples and of the executed warp instructions) and the 25 instructions with the
most stall samples (bench/gpu-w4a16-2026-11-26-h100-s14-experiments.log, call 4).

    ncu --section SourceCounters -k regex:_0$ -c 1 -o REP tlc run PROG --device cuda -D ...
    ncu --import REP.ncu-rep --page source --csv --print-source sass > REP.csv
    python3 bench/sass_stalls.py REP.csv
"""
import collections
import csv
import re
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def rows_of(path):
    """(SASS text, stall samples, executed warp instructions) of each instruction."""
    rows = list(csv.reader(open(path, errors="replace")))
    top = next((i for i, r in enumerate(rows) if any(c.strip() == "Source" for c in r)), None)
    if top is None:
        sys.exit(f"{path}: no 'Source' column: not ncu's --page source --csv output")
    head = [c.strip() for c in rows[top]]

    def col(prefix):
        return next((i for i, c in enumerate(head) if c.startswith(prefix)), None)
    src, stall, done = head.index("Source"), col("Warp Stall Sampling (All"), col("Instructions Executed")
    if stall is None or done is None:
        sys.exit(f"{path}: no stall-sampling or executed-instruction column (collect --section SourceCounters)")
    return [(r[src].strip(), number(r[stall]), number(r[done])) for r in rows[top + 1:] if len(r) > max(src, stall, done)]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 bench/sass_stalls.py REP.csv")
    data = rows_of(sys.argv[1])
    stalls = sum(d[1] for d in data) or 1
    done = sum(d[2] for d in data) or 1
    ops = collections.defaultdict(lambda: [0.0, 0.0])
    for text, s, n in data:
        m = re.match(r"(@!?U?P\w+\s+)?([A-Z0-9_]+)", text)
        op = ops[m.group(2) if m else text[:10]]
        op[0] += s
        op[1] += n
    print(f"total stall samples {stalls:.0f}, warp instructions {done:.0f}")
    for name, (s, n) in sorted(ops.items(), key=lambda x: -x[1][0])[:18]:
        print(f"  {name:12s} stall {100 * s / stalls:5.1f}%  instr {100 * n / done:5.1f}%")
    print("top instructions by stall samples:")
    for text, s, _ in sorted(data, key=lambda d: -d[1])[:25]:
        print(f"  {100 * s / stalls:5.1f}%  {text[:110]}")


if __name__ == "__main__":
    main()
