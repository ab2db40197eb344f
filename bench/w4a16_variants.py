#!/usr/bin/env python3
"""bench/w4a16_variants.py - timing-only variants of the small-M W4A16 programs, to see where their time goes
(bench/README.md, "W4A16: no pending group"; bench/gpu-w4a16-2026-11-26-h100-s12-sweeps.log).

    python3 bench/w4a16_variants.py OUTDIR

writes, for examples/gemm_w4a16_splitk_t.json (C^T, the dequantized weights wgmma's A from registers) and
examples/gemm_w4a16_splitk.json (the weights dequantized into shared memory):
  NAME_const.json    the dequantized tile is 1.0 (no dequantization at all: the copy pipeline and the gemm alone)
  NAME_cvt.json      float16(B) (the conversion without the offset and the scale)
  NAME_noscale.json  float16(B) - 8.0 (without the scale)
which compute something else (only their times mean anything), and for gemm_w4a16_splitk_t.json
  gemm_w4a16_splitk_tt.json, gemm_w4a16_splitk_tt_const.json
the weights stored tile by tile, B [ceildiv(N, block_N), ceildiv(K, block_K), block_N, block_K], so that
each K tile of a block's rows is one contiguous copy (the same results for B4[n // bn, k // bk, n % bn,
k % bk] = W[n, k]: the session-12 run checked them against numpy); time each with
`tlc run FILE --device cuda --time N --flush-l2 -D ...`.
"""
import json
import os
import sys


def walk(body, f):
    for s in body:
        if not isinstance(s, dict):
            continue
        f(s)
        if isinstance(s.get("body"), list):
            walk(s["body"], f)


def variant(src, name, dequant=None, tiled=False):
    d = json.load(open(src))
    d["name"] = name
    if tiled:
        for p in d["params"]:
            if p["name"] == "B":
                p["shape"] = ["ceildiv(N, block_N)", "ceildiv(K, block_K)", "block_N", "block_K"]

    def f(s):
        if tiled and s.get("op") == "copy" and s["src"].startswith("B["):
            s["src"] = "B[bx, bz * tiles + k, 0:block_N, 0:block_K]"
        if dequant and s.get("op") == "parallel" and s["body"][0].startswith(("B_frag", "B_dequant")):
            s["body"][0] = s["body"][0].split("=")[0] + "= " + dequant
    for k in d["kernels"]:
        walk(k["body"], f)
    return d


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 bench/w4a16_variants.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    made = []
    for prog in ("gemm_w4a16_splitk_t", "gemm_w4a16_splitk"):
        for tag, body in (("const", "float16(1.0)"), ("cvt", "float16(B_shared[i, j])"),
                          ("noscale", "float16(B_shared[i, j]) - 8.0")):
            made.append((f"{prog}_{tag}", variant(f"examples/{prog}.json", f"{prog}_{tag}", dequant=body)))
    made.append(("gemm_w4a16_splitk_tt", variant("examples/gemm_w4a16_splitk_t.json", "gemm_w4a16_splitk_tt", tiled=True)))
    made.append(("gemm_w4a16_splitk_tt_const", variant("examples/gemm_w4a16_splitk_t.json", "gemm_w4a16_splitk_tt_const",
                                                       dequant="float16(1.0)", tiled=True)))
    for name, d in made:
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(d, f, indent=1)
        print("wrote", os.path.join(out, name + ".json"))


if __name__ == "__main__":
    main()
