#!/usr/bin/env python3
"""bench/long_program.py - writes a long tile program for compile-time tests.

    python3 bench/long_program.py N [OUT.json]

N statements (every statement counts, nested ones too) of the kinds real
programs use, repeated in a fixed cycle: lets, tile copies between a tensor,
shared memory and register fragments, parallel loops, gemms, row
reductions, fills, serial loops with a body, ifs, alloc_var and scalar
assignments, atomic adds.  The program is valid (tlc check accepts it) and
deterministic, so compile times for different N compare.  It writes to
standard output when OUT is not given.
"""
import json
import sys


def program(n):
    body = [
        {"op": "alloc_shared", "name": "A_s", "shape": ["bm", "bk"], "dtype": "float16"},
        {"op": "alloc_shared", "name": "B_s", "shape": ["bk", "bn"], "dtype": "float16"},
        {"op": "alloc_fragment", "name": "C_f", "shape": ["bm", "bn"], "dtype": "float32"},
        {"op": "alloc_fragment", "name": "row", "shape": ["bm"], "dtype": "float32"},
        {"op": "alloc_var", "name": "acc", "dtype": "float32", "init": "0.0"},
    ]
    count = len(body)
    i = 0
    while count < n:
        k = i % 10
        t = i  # a unique suffix
        if k == 0:
            body.append({"op": "let", "name": f"o{t}", "value": f"(by * bm + {t % 7}) % M"})
            count += 1
        elif k == 1:
            body.append({"op": "copy", "src": f"A[by * bm, {t % 4} * bk]", "dst": "A_s"})
            count += 1
        elif k == 2:
            body.append({"op": "copy", "src": f"B[{t % 4} * bk, bx * bn]", "dst": "B_s"})
            count += 1
        elif k == 3:
            body.append({"op": "gemm", "A": "A_s", "B": "B_s", "C": "C_f"})
            count += 1
        elif k == 4:
            body.append({"op": "parallel", "vars": ["i", "j"], "extents": ["bm", "bn"],
                         "body": [f"C_f[i, j] = C_f[i, j] * 0.5 + {t % 3}.0"]})
            count += 2
        elif k == 5:
            body.append({"op": "reduce", "type": "max", "src": "C_f", "dst": "row", "dim": 1})
            count += 1
        elif k == 6:
            body.append({"op": "serial", "var": f"s{t}", "extent": "4", "body": [
                {"op": "let", "name": f"w{t}", "value": f"s{t} * 2 + bx"},
                f"acc = acc + float32(w{t})"]})
            count += 3
        elif k == 7:
            body.append({"op": "if", "cond": f"bx % 2 == {t % 2}", "then": [
                {"op": "fill", "dst": "C_f", "value": "0.0"}]})
            count += 2
        elif k == 8:
            body.append({"op": "parallel", "vars": ["i"], "extents": ["bm"],
                         "body": ["row[i] = row[i] + acc"]})
            count += 2
        else:
            body.append({"op": "copy", "src": "C_f", "dst": "C[by * bm, bx * bn]"})
            count += 1
        i += 1
    return {
        "tlir": 1,
        "name": f"long_{n}",
        "x-purpose": "compile time versus program size (bench/long_program.py)",
        "constants": {"M": 1024, "N": 1024, "K": 1024, "bm": 64, "bn": 64, "bk": 32},
        "params": [
            {"name": "A", "kind": "tensor", "dtype": "float16", "shape": ["M", "K"]},
            {"name": "B", "kind": "tensor", "dtype": "float16", "shape": ["K", "N"]},
            {"name": "C", "kind": "tensor", "dtype": "float32", "shape": ["M", "N"]},
        ],
        "kernel": {"grid": ["ceildiv(N, bn)", "ceildiv(M, bm)"], "threads": 128,
                   "block_vars": ["bx", "by"], "body": body},
    }


def main():
    if len(sys.argv) not in (2, 3) or not sys.argv[1].isdigit():
        sys.exit("usage: long_program.py N [OUT.json]")
    text = json.dumps(program(int(sys.argv[1])), indent=1) + "\n"
    if len(sys.argv) == 3:
        with open(sys.argv[2], "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
