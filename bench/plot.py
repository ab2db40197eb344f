#!/usr/bin/env python3
"""bench/plot.py - a bar chart (PNG) of TFLOP/s per case from the JSON files
that bench/gpu_bench.py writes: ours, the vendor reference (cuBLAS through
torch.matmul, PyTorch's flash backend, torch._int_mm, torch._scaled_mm) and
Triton where it ran, side by side, with our ratio to the reference above
each group.

    python3 bench/plot.py OUT.png BENCH.json [BENCH.json...]

A row whose result was wrong has no time (gpu_bench.py never times a wrong
result), so it shows as a missing bar marked "wrong", never as a speed.
Needs matplotlib (Debian: python3-matplotlib).
"""
import json, sys

COLS = ["case", "ms_ours", "ms_ref", "ms_triton", "tflops_ours", "tflops_ref", "tflops_triton", "rel_err"]


def rows_of(path):
    """The rows of one bench JSON file, as dicts (gpu_bench.py writes dicts,
    --lowp-only lists in COLS order)."""
    doc = json.load(open(path))
    out = []
    for r in doc.get("rows", []):
        out.append(r if isinstance(r, dict) else dict(zip(COLS, r)))
    return doc, out


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[5].strip(), file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    png, rows, title = argv[0], [], None
    for path in argv[1:]:
        doc, r = rows_of(path)
        rows += r
        title = title or "%s, %s, torch %s" % (doc.get("date", "?"), doc.get("device", "?"), doc.get("torch", "?"))
    if not rows:
        print("plot.py: no rows in %s" % ", ".join(argv[1:]), file=sys.stderr)
        return 1
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(rows)), 5.5))
    w = 0.27
    for i, r in enumerate(rows):
        bars = [("ours", r.get("tflops_ours"), "#1f77b4"), ("reference", r.get("tflops_ref"), "#7f7f7f"),
                ("Triton", r.get("tflops_triton"), "#ff7f0e")]
        for j, (name, v, color) in enumerate(bars):
            if v:
                ax.bar(i + (j - 1) * w, v, w, color=color, label=name if i == 0 or name == "Triton" else None)
        if r.get("tflops_ours") and r.get("tflops_ref"):
            top = max(v for _, v, _ in bars if v)
            ax.text(i, top * 1.02, "%.2fx" % (r["tflops_ours"] / r["tflops_ref"]), ha="center", fontsize=8)
        elif not r.get("tflops_ours"):
            ax.text(i - w, (r.get("tflops_ref") or 1) * 0.05, "wrong", ha="center", fontsize=8, color="red",
                    rotation=90)
    handles, labels = ax.get_legend_handles_labels()
    seen = {}
    for h, l in zip(handles, labels):
        seen.setdefault(l, h)
    ax.legend(seen.values(), seen.keys(), loc="upper left")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["case"].split(" [")[0] + (" (as written)" if "as written]" in r["case"] else "")
                        for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s (TOP/s for int8)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print("plot.py: wrote %s (%d cases)" % (png, len(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
