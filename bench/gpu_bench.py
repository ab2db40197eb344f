#!/usr/bin/env python3
"""bench/gpu_bench.py - our kernels against cuBLAS, Triton and PyTorch's
flash attention, side by side in one run on one GPU.

    python3 bench/gpu_bench.py [--tlc build/bin/tlc] [--out DIR] [--quick] [--gemm-only] [--gemm-filter REGEX]
                               [--gemm-sizes N,N|MxNxK,...]

GEMM float16 and bfloat16 (M = N = K = 4096 and 8192, or the shapes
--gemm-sizes names, e.g. 1024,128x8192x8192; float32
accumulation): ours (examples/gemm.json as written first, then tile
choices through -D; bfloat16 through tests/gpu/programs/gemm_dyn_m_bf16.json,
the same program in bfloat16 with M a scalar argument, and
bench/programs/gemm_raster_bf16.json, bench/programs/gemm_raster.json in
bfloat16 with every size static; each through `tlc
run --device --time`; the table's row is the fastest, and every
configuration's time is printed and kept in bench.json; `--gemm-filter
REGEX` keeps the configurations whose printed tag matches, e.g.
'block_N=256.*threads=256' for one tile with and without warp
specialization), torch.matmul
(cuBLAS) and Triton's matmul, float16 and bfloat16, the fastest of a handful of its
usual configurations (TRITON_CONFIGS, each checked first).  FlashAttention forward (batch 4, heads 32,
seq 4096, dim 128, causal and not): ours (examples/flash_attention.json)
and torch's scaled_dot_product_attention with the flash backend, and the
same at head dim 64, at seq 1024 (batch 16) and at seq 16384 (batch 1, head
dims 128 and 64): FLASH_SHAPES; `--flash-only [--flash-shapes B,H,S,D;...]` runs just these
rows and writes bench-flash.json (`--flash-program P` and `--flash-defs
N=V,...` time another program of the same parameters, or other tiles;
`--flash-defs 'A;B'` times each set of constants against one torch time;
`--flash-backends ptx,cuda` each on those back ends, tlc --backend, default auto;
`--flash-causal full|causal` only one of the two).  Each of
ours is first checked against torch on the same inputs, element by element
with the bound of tests/gpu/tolerance.py (2 ulps of float16 plus the float32
sums' error for the reduction length: K for a GEMM, 2 seq_len and float16
rounding of the probabilities for attention, as tests/gpu/check_examples.py
derives); a configuration whose result is wrong, or whose run fails, prints
a FAIL line and its time is never reported (nor taken as the best), and the
run exits 1 after the table.  bfloat16 GEMMs have the same bound in
bfloat16's ulps (bfloat16 products are exact in float32 too).  Compile
time: `tlc compile` of the GEMM example for sm_90a, and Triton's
first-call compile of its matmul (empty cache).  W4A16 (issue 12:
examples/gemm_w4a16.json, uint4 weights with float16 scales per 128 along
K; M = 1, 16, 64, 4096 with N = K = 8192; examples/gemm_w4a16_narrow.json and
examples/gemm_w4a16_splitk.json at M up to 64 (and their relatives: W4A16_CONFIGS),
examples/gemm_w4a16_t_gn.json and gemm_w4a16_t.json above; gemm_w4a16_t_gn and
gemm_w4a16_sliced and _il take their scales one row per group, St.npy; gemm_w4a16_splitk_tiled,
gemm_w4a16_sliced and _il their weights tile by tile for the configuration's
block_N x block_K, Bq_tiled_*.npy, the same weights, _il's interleaved in each
tile: Bq_tiled_*_il.npy) against torch.matmul of float16
A and the dequantized float16 weight of the same shape, each of ours checked
first against that product with the GEMM's bound, both then timed with a
cold L2 (`tlc run --time N --flush-l2`, cuda_time_cold: each launch timed
alone after 256 MiB written, since the 32 MiB of packed weights would
otherwise stay in the H100's 50 MB L2 between launches; and again with
`--flush-l2=clean`, the 256 MiB then read back by a kernel, so that the
launch writes back none of the flush's lines: `--w4a16-flush`), each row with the
bytes it must move (packed weights, scales, A and C once) per second and
that as a fraction of the H100's 3.35 TB/s: the kernel's dequantized
weight (q - 8) * s is one float16 rounding of a product exact in float32,
the same weight torch multiplies by, so the products are exact in float32
and only the K float32 sums differ (`--w4a16-only` runs just these rows;
`--w4a16-m M,M...` only those M, `--w4a16-filter REGEX` only the
configurations whose printed tag matches, `--w4a16-config
[M@]PROGRAM:NAME=V,...` (repeatable) those configurations instead); every row gives float16 cuBLAS's time
for the same shape and how many times faster ours is, the issue's targets
being 2.5x at M = 1 to 64 and 0.9x at M = 4096.
Low precision (issue 12): int8 x int8 -> int32 (M = N = K = 8192; examples/gemm_int8.json)
against torch._int_mm, checked exactly; float8_e4m3 with DeepGEMM's
per-128 block scales (M = N = K = 4096 and 8192;
examples/gemm_fp8_blockscaled.json, float16 out, and
bench/programs/gemm_fp8_blockscaled_early.json, the same with the scales
read before the gemm, and bench/programs/gemm_fp8_blockscaled_raster.json,
the same with block rasterization) against torch._scaled_mm
with per-tensor scales (the same float8 FLOPs; cuBLAS has no per-128 block
scales there), checked element by element against a float32 reference of
the same float8 inputs within the bound of float32 accumulation plus the
float16 rounding of the output (fp8_bound); --lowp-only runs just these,
--fp8-only only the float8 ones (with --quick: at 4096 only; --fp8-sizes
N,N... at those sizes; --fp8-filter REGEX only the configurations whose
printed tag matches).  The float8_e4m3 gemm with per-tensor scales
(examples/gemm_fp8.json and bench/programs/gemm_fp8_raster.json, float16
out: torch._scaled_mm's own operation) against torch._scaled_mm with the
same scales, by default (use_fast_accum=False) and with use_fast_accum=True
(one accumulator over all of K, as ours), checked within fp8_bound with
one K-long block (--fp8-kinds plain or blockscaled: only that kind).
Prints a table and writes bench.json under --out.
"""
import argparse, json, os, re, subprocess, sys, tempfile, time
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
import tolerance  # noqa: E402

U16 = 2.0 ** -11
failures = []


def checked(what, dev, ref, L, absref, extra=0.0, dtype="float16"):
    """Compares our output (dtype: float16 or bfloat16, passed as float32
    or float16 tensors) with torch's (tolerance.py); prints and records a
    FAIL line when it is wrong.  True when right."""
    good, why = tolerance.compare(dev.float().cpu().numpy(), ref.float().cpu().numpy(), dtype, L,
                                  absref.cpu().numpy(), extra)
    if not good:
        failures.append(f"FAIL {what}: {why}")
        print(failures[-1])
    return good

# tile configurations tried: examples/gemm.json as written (128 threads: wgmma on sm_90a, two m64n128
# instructions per k16 step), then through -D
# (as written: 2 K tiles of 32 a stage, compiler/pass_kgroup.c; gemm_raster with k_group=1 is the same kernel with one
# tile a stage, num_stages=2 the grouped one with a stage less)
GEMM_CONFIGS = [("examples/gemm.json", {}), ("bench/programs/gemm_raster.json", {"k_group": 1}),
                ("examples/gemm.json", {"num_stages": 2}), ("examples/gemm.json", {"block_K": 64}),
                ("examples/gemm.json", {"block_K": 32, "num_stages": 4}),
                ("examples/gemm.json", {"block_K": 64, "num_stages": 4}),
                ("examples/gemm.json", {"block_N": 256, "block_K": 64}),
                ("bench/programs/gemm_raster.json", {"block_K": 64}),
                ("bench/programs/gemm_raster.json", {"block_K": 64, "num_stages": 4}),
                ("bench/programs/gemm_raster.json", {"block_K": 64, "threads": 256}),
                ("bench/programs/gemm_raster.json", {"block_K": 64, "threads": 256, "use_tma": "false"}),
                ("bench/programs/gemm_raster.json", {"block_K": 32, "num_stages": 4, "threads": 256}),
                ("bench/programs/gemm_raster.json", {"block_N": 256, "block_K": 64, "threads": 256}),
                ("bench/programs/gemm_raster.json", {"block_N": 256, "block_K": 64, "threads": 256, "use_tma": "false"}),
                ("bench/programs/gemm_raster.json", {"block_N": 256, "block_K": 64, "threads": 256,
                                                     "warp_specialize": "false"}),
                ("bench/programs/gemm_raster.json", {"block_N": 256, "block_K": 64, "threads": 256,
                                                     "persistent": "false"}),
                ("bench/programs/gemm_raster.json", {"block_M": 256, "block_K": 64, "threads": 256,
                                                     "warp_specialize": "false"}),
                ("bench/programs/gemm_raster.json", {"block_M": 256, "block_K": 64, "threads": 256,
                                                     "persistent": "false"}),
                ("bench/programs/gemm_raster.json", {"block_M": 256, "block_K": 64, "threads": 256}),
                ("bench/programs/gemm_raster.json", {"block_M": 256, "block_K": 64, "threads": 512}),
                # thread-block clusters (compiler/pass_cluster.c): A's tile multicast across 2 blocks along N
                # (cluster_x), B's across 2 along M (cluster_y); with and without the producer warpgroup
                ("bench/programs/gemm_raster.json", {"block_N": 256, "block_K": 64, "threads": 256, "cluster_x": 2}),
                ("bench/programs/gemm_raster.json", {"block_N": 256, "block_K": 64, "threads": 256, "cluster_y": 2}),
                ("bench/programs/gemm_raster.json", {"block_N": 256, "block_K": 64, "threads": 256, "cluster_x": 2,
                                                     "warp_specialize": "false"}),
                ("bench/programs/gemm_raster.json", {"block_N": 256, "block_K": 64, "threads": 256, "cluster_y": 2,
                                                     "warp_specialize": "false"}),
                ("bench/programs/gemm_raster.json", {"block_M": 256, "block_K": 64, "threads": 256, "cluster_x": 2}),
                ("bench/programs/gemm_raster.json", {"block_M": 256, "block_K": 64, "threads": 256, "cluster_y": 2}),
                ("bench/programs/gemm_raster.json", {"block_M": 256, "block_K": 64, "threads": 512, "cluster_x": 2}),
                # the epilogue through shared memory and TMA stores (compiler/pass_store.c), without and with clusters
                ("bench/programs/gemm_raster.json", {"block_N": 256, "block_K": 64, "threads": 256, "tma_store": "true"}),
                ("bench/programs/gemm_raster.json", {"block_N": 256, "block_K": 64, "threads": 256, "cluster_x": 2,
                                                     "tma_store": "true"})]
# bfloat16: the same kernel with bfloat16 operands and C, M its scalar argument (BF16_PROG), and
# bench/programs/gemm_raster.json in bfloat16 (BF16_RASTER, every size static: the float16 rows' kernel)
BF16_PROG, BF16_RASTER = "tests/gpu/programs/gemm_dyn_m_bf16.json", "bench/programs/gemm_raster_bf16.json"
GEMM_BF16_CONFIGS = [(BF16_PROG, {}), (BF16_PROG, {"block_K": 64}), (BF16_PROG, {"block_K": 64, "num_stages": 4}),
                     (BF16_PROG, {"block_N": 256, "block_K": 64, "threads": 256}),
                     (BF16_PROG, {"block_M": 256, "block_K": 64, "threads": 256}),
                     (BF16_PROG, {"block_N": 256, "block_K": 64, "threads": 256, "tma_store": "true"}),
                     (BF16_RASTER, {"block_N": 256, "block_K": 64, "threads": 256}),
                     (BF16_RASTER, {"block_N": 256, "block_K": 64, "threads": 256, "tma_store": "true"}),
                     (BF16_RASTER, {"block_N": 256, "block_K": 64, "threads": 256, "tma_store": "true", "panel_size": 4}),
                     (BF16_RASTER, {"block_N": 256, "block_K": 64, "threads": 256, "tma_store": "true", "panel_size": 16}),
                     (BF16_RASTER, {"block_N": 256, "block_K": 64, "threads": 256, "tma_store": "true", "cluster_x": 2}),
                     (BF16_RASTER, {"block_N": 256, "block_K": 64, "threads": 256, "tma_store": "true", "cluster_y": 2})]


FLUSH_BYTES = 256 << 20  # what `tlc run --time N --flush-l2` writes before each timed launch (compiler/tlc.c)


def cuda_time_cold(fn, reps=20, flush="dirty"):
    """fn's mean time with a cold L2, timed as `tlc run --time N
    --flush-l2=FLUSH` times ours: each call alone between two events, after
    FLUSH_BYTES of device memory written (not timed) on the same stream,
    so that it finds none of its data in the L2 (the H100's 50 MB would
    otherwise keep the 32 MB of an 8192^2 float16 weight between calls);
    flush "clean": those bytes then read back by a kernel (queued after
    the write, as tlc does), so that the L2 holds clean lines and the call
    pays no write-back of the flush's lines."""
    buf = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    words = buf.view(torch.int32)
    fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for i, (s, e) in enumerate(ev):
        buf.fill_(i & 0xff)
        if flush == "clean":
            words.sum()  # reads the 256 MiB
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return sum(s.elapsed_time(e) for s, e in ev) / reps


def cuda_time(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / reps

def triton_matmul():
    import triton
    import triton.language as tl

    @triton.jit
    def mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr):
        pid = tl.program_id(0)
        npm, npn = tl.cdiv(M, BM), tl.cdiv(N, BN)
        group = pid // (G * npn)
        first = group * G
        gs = min(npm - first, G)
        pm = first + (pid % (G * npn)) % gs
        pn = (pid % (G * npn)) // gs
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        ap = a + rm[:, None] * sam + rk[None, :] * sak
        bp = b + rk[:, None] * sbk + rn[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            x = tl.load(ap, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0.0)
            y = tl.load(bp, mask=(rk[:, None] < K - k * BK) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(x, y, acc)
            ap += BK * sak
            bp += BK * sbk
        cp = c + rm[:, None] * scm + rn[None, :] * scn
        tl.store(cp, acc.to(c.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))

    def run(a, b, c, cfg=TRITON_CONFIGS[0]):
        M, K = a.shape
        N = b.shape[1]
        bm, bn, bk, w, st = cfg
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        mm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                 BM=bm, BN=bn, BK=bk, G=8, num_warps=w, num_stages=st)
    return run

# Triton's matmul autotuned by hand over its usual Hopper configurations (BM, BN, BK, warps, stages), as
# its tutorial's autotune list: each checked against torch before it is timed, the fastest kept
TRITON_CONFIGS = [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 128, 128, 8, 3),
                  (128, 256, 32, 8, 4), (64, 256, 64, 4, 4)]


def triton_best(tri, lbl, A, B, ref, absref, dtype):
    """Triton's time: the fastest of TRITON_CONFIGS whose result is right (a wrong one is a FAIL)."""
    best = None
    Ct = torch.empty(A.shape[0], B.shape[1], device="cuda", dtype=A.dtype)
    for cfg in TRITON_CONFIGS:
        try:
            Ct.zero_()
            tri(A, B, Ct, cfg)
            torch.cuda.synchronize()
        except Exception as ex:  # a configuration this Triton cannot build (shared memory): say so, go on
            print(f"  triton {dtype} {lbl} {cfg}: not built: {str(ex).splitlines()[0][:120]}")
            continue
        if not checked(f"triton {dtype} {lbl} {cfg}", Ct, ref, A.shape[1], absref, dtype=dtype):
            continue
        ms = cuda_time(lambda: tri(A, B, Ct, cfg))
        print(f"  triton {dtype} {lbl} {cfg}: {ms:.3f} ms, {2 * A.shape[0] * A.shape[1] * B.shape[1] / ms / 1e9:.1f} "
              "TFLOP/s")
        if best is None or ms < best:
            best = ms
    return best

LOWP_INT8_CONFIGS = [{}, {"block_N": 256}, {"num_stages": 4}, {"threads": 128}, {"block_K": 256, "num_stages": 2}]
# (program, -D values): the example, bench/programs' copy of it that reads each K block's scales before the gemm,
# and the one with block rasterization (use_swizzle in stripes of `panel` block rows)
FP8_PROG, FP8_EARLY = "examples/gemm_fp8_blockscaled.json", "bench/programs/gemm_fp8_blockscaled_early.json"
FP8_RASTER = "bench/programs/gemm_fp8_blockscaled_raster.json"
# (with warp_specialize false, persistent false, late false: the loop without a producer warpgroup, one block
# per tile, the promotion in place instead of one iteration late; tma_store true: the epilogue through TMA stores)
LOWP_FP8_CONFIGS = [(FP8_PROG, {}), (FP8_PROG, {"num_stages": 4}), (FP8_RASTER, {}), (FP8_RASTER, {"panel": 16}),
                    (FP8_RASTER, {"num_stages": 4}), (FP8_RASTER, {"num_stages": 5}),
                    (FP8_RASTER, {"warp_specialize": "false"}), (FP8_RASTER, {"persistent": "false"}),
                    (FP8_RASTER, {"late": "false"}), (FP8_RASTER, {"late": "false", "num_stages": 4}), (FP8_EARLY, {}),
                    (FP8_RASTER, {"tma_store": "true"}), (FP8_RASTER, {"tma_store": "true", "panel": 16})]
FP8_TAGS = {FP8_EARLY: "early scales:", FP8_RASTER: "raster:"}
# the float8 gemm with per-tensor scales (torch._scaled_mm's operation, one float32 accumulator): the example
# as written (128 x 128 tiles, two consumer warpgroups of 64 x 128), 128 x 256 (two of 64 x 256: 128 float32
# accumulators a thread), and bench/programs' copy with its choices as constants: the epilogue through TMA
# stores (C's tile staged in shared memory, 128 bytes of columns at a time: the fastest on the H100, 1351 and
# 1399 TFLOP/s at 4096^3 and 8192^3 against 1163 and 1286 with plain stores,
# bench/gpu-bench-2026-11-25-h100-fp8-pertensor-r1.log), in 128 x 256 and 256 x 128 tiles and in stripes of
# 16 block rows (clusters of two with TMA multicast ran at half the speed there, 608 against 1163 at 4096^3,
# as the float16 gemm's do: not timed here; -D cluster_y=2 or cluster_x=2 on the raster program tries them)
FP8_PLAIN, FP8_PLAIN_RASTER = "examples/gemm_fp8.json", "bench/programs/gemm_fp8_raster.json"
LOWP_FP8_PLAIN_CONFIGS = [(FP8_PLAIN, {}), (FP8_PLAIN, {"block_N": 256}),
                          (FP8_PLAIN_RASTER, {"block_N": 256, "tma_store": "true"}),
                          (FP8_PLAIN_RASTER, {"block_M": 256, "tma_store": "true"}),
                          (FP8_PLAIN_RASTER, {"block_N": 256, "tma_store": "true", "panel": 16})]
FP8_PLAIN_TAGS = {FP8_PLAIN: "", FP8_PLAIN_RASTER: "raster:"}


def fp8_bound(S, absref, K, u_block=2.0 ** -24, block=128):
    """The largest |ours - ref| the arithmetic allows, per element: both
    sides sum each `block`-long K block of exact float8 products (at most
    `block` roundings of u_block each: float32's 2^-24) and then add
    ceildiv(K, block) scaled block sums in float32 (ceildiv(K, block) + 2
    roundings of 2^-24: the adds and the scales' products), each relative to
    S, the sum of the absolute scaled products, on each side; ours then
    rounds to float16 (half an ulp: 2^-11 relative, or 2^-25 absolute below
    float16's normal range).  DeepGEMM's block scales: block = 128; the
    per-tensor scales of examples/gemm_fp8.json: block = K (one K-long sum
    scaled once).  Hopper's float8 tensor cores are reported (DeepGEMM) to
    keep about 14 bits while they accumulate: with u_block = 2^-13 (14 bits,
    and a factor 2) the bound allows that too."""
    per_side = block * u_block + (-(-K // block) + 2) * 2.0 ** -24
    return 2 * per_side * S + torch.maximum(absref * 2.0 ** -11, torch.full_like(absref, 2.0 ** -25))


def lowp_rows(a, work, rows, res):
    """int8 and float8 gemms against torch._int_mm and torch._scaled_mm
    (only the float8 ones with --fp8-only)."""
    if not a.fp8_only:
        int8_rows(a, work, rows, res)
    fp8_rows(a, work, rows, res)


def int8_rows(a, work, rows, res):
    n = 8192
    A = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
    B = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)  # [N, K]
    np.save(f"{work}/A8.npy", A.cpu().numpy())
    np.save(f"{work}/B8.npy", B.cpu().numpy())
    ref = torch._int_mm(A, B.t())
    ops = 2 * n ** 3
    best = None
    for cfg in LOWP_INT8_CONFIGS:
        defs = dict({"M": n, "N": n, "K": n}, **cfg)
        try:
            ms = ours(a.tlc, "examples/gemm_int8.json", defs, {"A": f"{work}/A8.npy", "B": f"{work}/B8.npy"},
                      {"C": f"{work}/C8.npy"}, 10)
        except RuntimeError as ex:  # one configuration that does not run does not stop the others
            print(f"  int8 gemm {n} {cfg}: FAIL: {str(ex).strip()[-400:]}")
            continue
        C = torch.from_numpy(np.load(f"{work}/C8.npy")).cuda()
        wrong = int((C != ref).sum().item())
        tag = ",".join(f"{k}={v}" for k, v in cfg.items()) or "as written"
        print(f"  int8 gemm {n} [{tag}]: {ms:.3f} ms, {ops / ms / 1e9:.1f} TOP/s, {wrong} elements differ from _int_mm")
        res.setdefault("lowp_configs", []).append({"case": "int8", "n": n, "config": tag, "ms": ms, "wrong": wrong})
        if wrong:
            continue  # checked before timed: a wrong result is no speed
        if best is None or ms < best[0]:
            best = (ms, tag)
    ms_ref = cuda_time(lambda: torch._int_mm(A, B.t()))
    tf = lambda ms: ops / ms / 1e9 if ms else None
    rows.append((f"gemm int8 {n} [{best[1] if best else 'WRONG'}]", best and best[0], ms_ref, None,
                 tf(best and best[0]), tf(ms_ref), None, 0.0 if best else float("nan")))
    del A, B, ref


def fp8_rows(a, work, rows, res):
    sizes = [int(x) for x in a.fp8_sizes.split(",")] if a.fp8_sizes else [4096] if a.quick else [4096, 8192]
    kinds = a.fp8_kinds.split(",")
    for n in sizes:
        A = (torch.randn(n, n, device="cuda") * 4).to(torch.float8_e4m3fn)
        B = (torch.randn(n, n, device="cuda") * 4).to(torch.float8_e4m3fn)  # [N, K]
        if "plain" in kinds:
            fp8_plain_rows(a, work, rows, res, n, A, B)
        if "blockscaled" not in kinds:
            continue
        kb = n // 128
        sa = torch.rand(n, kb, device="cuda") * 1.5 + 0.5
        sb = torch.rand(kb, kb, device="cuda") * 1.5 + 0.5
        for name, t in (("Af", A.view(torch.uint8)), ("Bf", B.view(torch.uint8)), ("sa", sa), ("sb", sb)):
            np.save(f"{work}/{name}.npy", t.cpu().numpy())
        # the float32 reference of the same float8 inputs, and S, the sum of |scaled products|
        Af, Bf = A.float(), B.float()
        ref = torch.zeros(n, n, device="cuda")
        S = torch.zeros(n, n, device="cuda")
        for b in range(kb):
            blk = slice(b * 128, b * 128 + 128)
            scale = sa[:, b:b + 1] * sb[:, b].repeat_interleave(128)[None, :]
            ref += (Af[:, blk] @ Bf[:, blk].t()) * scale
            S += (Af[:, blk].abs() @ Bf[:, blk].abs().t()) * scale.abs()
        bound = fp8_bound(S, ref.abs(), n)
        bound14 = fp8_bound(S, ref.abs(), n, 2.0 ** -13)
        del S
        flops = 2 * n ** 3
        best = None
        for prog, cfg in LOWP_FP8_CONFIGS:
            tag = FP8_TAGS.get(prog, "") + (",".join(f"{k}={v}" for k, v in cfg.items()) or "as written")
            if a.fp8_filter and not re.search(a.fp8_filter, tag):
                continue
            defs = dict({"M": n, "N": n, "K": n}, **cfg)
            try:
                ms = ours(a.tlc, prog, defs,
                          {"A": f"{work}/Af.npy", "B": f"{work}/Bf.npy", "scale_a": f"{work}/sa.npy",
                           "scale_b": f"{work}/sb.npy"}, {"C": f"{work}/Cf.npy"}, 10)
            except RuntimeError as ex:
                print(f"  fp8 gemm {n} {prog} {cfg}: FAIL: {str(ex).strip()[-400:]}")
                continue
            C = torch.from_numpy(np.load(f"{work}/Cf.npy")).cuda().float()
            worst, worst14, e_, verdict = fp8_check(C, ref, bound, bound14)
            print(f"  fp8 gemm {n} [{tag}]: {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s, rel err {e_:.2e}, "
                  f"worst |err| / bound {worst:.3f} (14-bit: {worst14:.3f}): {verdict}")
            res.setdefault("lowp_configs", []).append({"case": "fp8", "n": n, "config": tag, "ms": ms, "rel_err": e_,
                                                       "err_over_bound": worst, "err_over_bound_14bit": worst14})
            if worst14 > 1:
                continue
            if best is None or ms < best[0]:
                best = (ms, e_, tag)
        one = torch.ones((), device="cuda")
        ms_ref = cuda_time(lambda: torch._scaled_mm(A, B.t(), scale_a=one, scale_b=one, out_dtype=torch.float16))
        tf = lambda ms: flops / ms / 1e9 if ms else None
        rows.append((f"gemm fp8 e4m3 blockscaled {n} [{best[2] if best else 'WRONG'}]", best and best[0], ms_ref, None,
                     tf(best and best[0]), tf(ms_ref), None, best[1] if best else float("nan")))
        del A, B, Af, Bf, ref, bound, bound14


def fp8_check(C, ref, bound, bound14):
    """(worst |C - ref| / bound, the same with the 14-bit bound, the relative
    error, the verdict) of a float8 gemm's output C."""
    worst = (torch.abs(C - ref) / bound).max().item()
    worst14 = (torch.abs(C - ref) / bound14).max().item()
    e_ = (torch.linalg.norm(C - ref) / torch.linalg.norm(ref)).item()
    verdict = ("within the float32 bound" if worst <= 1 else
               "past the float32 bound, within the 14-bit accumulation one" if worst14 <= 1 else
               "FAIL: past both bounds (not timed)")
    return worst, worst14, e_, verdict


def fp8_plain_rows(a, work, rows, res, n, A, B):
    """examples/gemm_fp8.json (per-tensor scales, one float32 accumulator
    over all of K, float16 out) against torch._scaled_mm with the same
    scales, both its default (use_fast_accum=False: cuBLASLt promotes its
    sums) and use_fast_accum=True (the tensor cores' accumulator over all of
    K, as ours); each checked first against the float32 product of the same
    float8 inputs within fp8_bound with one K-long block (and cuBLAS's two
    outputs' errors printed beside, for comparison)."""
    sa, sb = 0.5 + torch.rand((), device="cuda"), 0.5 + torch.rand((), device="cuda")
    for name, t in (("Af", A.view(torch.uint8)), ("Bf", B.view(torch.uint8)), ("sa1", sa.reshape(1)),
                    ("sb1", sb.reshape(1))):
        np.save(f"{work}/{name}.npy", t.cpu().numpy())
    Af, Bf = A.float(), B.float()
    ref = (Af @ Bf.t()) * (sa * sb)
    S = (Af.abs() @ Bf.abs().t()) * (sa * sb)
    bound, bound14 = fp8_bound(S, ref.abs(), n, block=n), fp8_bound(S, ref.abs(), n, 2.0 ** -13, block=n)
    del S, Af, Bf
    flops = 2 * n ** 3
    mm = lambda fast: torch._scaled_mm(A, B.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float16,
                                       use_fast_accum=fast)
    for fast in (False, True):
        w, w14, e_, verdict = fp8_check(mm(fast).float(), ref, bound, bound14)
        print(f"  fp8 per-tensor {n} [torch._scaled_mm use_fast_accum={fast}]: rel err {e_:.2e}, "
              f"worst |err| / bound {w:.3f} (14-bit: {w14:.3f}): {verdict}")
    best = None
    for prog, cfg in LOWP_FP8_PLAIN_CONFIGS:
        tag = "per-tensor:" + FP8_PLAIN_TAGS[prog] + (",".join(f"{k}={v}" for k, v in cfg.items()) or "as written")
        if a.fp8_filter and not re.search(a.fp8_filter, tag):
            continue
        defs = dict({"M": n, "N": n, "K": n}, **cfg)
        try:
            ms = ours(a.tlc, prog, defs, {"A": f"{work}/Af.npy", "B": f"{work}/Bf.npy", "scale_a": f"{work}/sa1.npy",
                                          "scale_b": f"{work}/sb1.npy"}, {"C": f"{work}/Cf.npy"}, 10)
        except RuntimeError as ex:
            print(f"  fp8 gemm {n} {prog} {cfg}: FAIL: {str(ex).strip()[-400:]}")
            continue
        w, w14, e_, verdict = fp8_check(torch.from_numpy(np.load(f"{work}/Cf.npy")).cuda().float(), ref, bound, bound14)
        print(f"  fp8 gemm {n} [{tag}]: {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s, rel err {e_:.2e}, "
              f"worst |err| / bound {w:.3f} (14-bit: {w14:.3f}): {verdict}")
        res.setdefault("lowp_configs", []).append({"case": "fp8 per-tensor", "n": n, "config": tag, "ms": ms,
                                                   "rel_err": e_, "err_over_bound": w, "err_over_bound_14bit": w14})
        if w14 > 1:
            failures.append(f"FAIL fp8 gemm {n} [{tag}]: worst |err| / 14-bit bound {w14:.3f}")
            continue
        if best is None or ms < best[0]:
            best = (ms, e_, tag)
    tf = lambda ms: flops / ms / 1e9 if ms else None
    for fast in (False, True):
        ms_ref = cuda_time(lambda: mm(fast))
        rows.append((f"gemm fp8 e4m3 {n} [{best[2] if best else 'WRONG'}] vs _scaled_mm"
                     f"{' fast_accum' if fast else ''}", best and best[0], ms_ref, None,
                     tf(best and best[0]), tf(ms_ref), None, best[1] if best else float("nan")))
    del ref, bound, bound14


RUN_TIMEOUT = float(os.environ.get("TL_RUN_TIMEOUT", 120))  # seconds for one `tlc run --device` (compile, copies, runs)


def W4A16_CONFIGS(M):
    """(program, tile choices) tried at M: up to M = 64
    examples/gemm_w4a16.json as written, examples/gemm_w4a16_narrow.json
    (N tiles of 64: 128 blocks for N = 8192; the block's scales copied
    once) with 64 rows on wgmma, examples/gemm_w4a16_splitk.json (the
    narrow program with K split in 4 or 8 runs, then a kernel adding the
    runs' float32 sums) and examples/gemm_w4a16_splitk_t.json (the same
    computing C^T: the dequantized weights wgmma's 64-row operand from
    registers, the activations 8 to 64 columns), also in one kernel
    (_last.json: the last block of each tile adds the runs' sums), and with the runs of a tile the blocks of one
    thread-block cluster (gemm_w4a16_cluster.json: cluster_reduce adds them); for large M (over 64) only
    examples/gemm_w4a16_t_gn.json and gemm_w4a16_t.json (Machete's form)
    with 128 x 256 tiles on two warpgroups (gemm_w4a16.json's and the narrow
    program's tiles were slower there: bench/README.md)."""
    W, NW = "examples/gemm_w4a16.json", "examples/gemm_w4a16_narrow.json"
    SK, ST = "examples/gemm_w4a16_splitk.json", "examples/gemm_w4a16_splitk_t.json"
    STL = "examples/gemm_w4a16_splitk_t_last.json"  # in one kernel, the last block of each tile adding the runs' sums
    TT = "examples/gemm_w4a16_splitk_tiled.json"  # gemm_w4a16_splitk_t with the weights stored tile by tile
    CL = "tests/gpu/programs/gemm_w4a16_cluster.json"  # in one kernel, the runs of a tile one cluster (cluster_reduce)
    # small M: the programs without a split (gemm_w4a16.json 0.6-0.8x cuBLAS, the narrow program 1.1-1.5x in
    # session 11's run, bench/gpu-bench-2026-11-25-h100-s11-w4a16.log) once each, the split ones (split along K,
    # wider N tiles: each warp's A fragments serve more columns of weights), then C^T with K tiles of 128 (one
    # scale group a tile) in 3 or 4 runs, its group no longer left in flight (C narrower than 128 columns:
    # pass_pipeline.c), the best in session 12's sweep (bench/README.md, "W4A16: no pending group"), and in one
    # kernel (_last.json); --w4a16-config times the others
    if M <= 64:
        cfgs = [(W, {}), (NW, {"block_M": 64})]
        if M <= 16:
            cfgs += [(SK, {"block_N": 128, "block_K": 64, "num_stages": 4, "split_k": 8})]
        else:
            cfgs += [(SK, {"block_M": 64, "block_N": 128, "block_K": 64, "num_stages": 4, "split_k": 4})]
        # C^T: the activations' columns rounded up to 8, 16, 32 or 64
        bm = {"block_M": next(b for b in (8, 16, 32, 64) if b >= M)}
        # the adding kernel's tiles: 16 rows (512 blocks for N = 8192, not 128) of 16 or 64 columns (3-5% faster)
        red = {"red_N": 16} if M <= 16 else {"red_N": 16, "red_M": 64}
        cfgs += [(ST, dict(bm, block_K=64, num_stages=4, split_k=8)),
                 (ST, dict(bm, block_K=128, num_stages=4, split_k=4, **red)), (ST, dict(bm, block_K=128, num_stages=4, split_k=3, **red)),
                 (STL, dict(bm, block_K=128, num_stages=4, split_k=4)), (STL, dict(bm, block_K=128, num_stages=4, split_k=3))]
        # the weights stored tile by tile (each K tile of a block one contiguous 4 KB copy; 3% faster in session 14)
        cfgs += [(TT, dict(bm, block_K=128, num_stages=4, split_k=4, **red)), (TT, dict(bm, block_K=128, num_stages=4, split_k=3, **red))]
        if M > 16:
            cfgs += [(ST, dict(bm, block_K=128, num_stages=3, split_k=3, **red)),
                     (TT, dict(bm, block_K=128, num_stages=3, split_k=3, **red))]
        # in one kernel: the K loop in slices of the block's threads (one warpgroup each), their sums added in
        # shared memory (no workspace, no second kernel), its scales one row per group (St): 3 slices of 3
        # stages, and up to M = 16 (a 4 KB activations tile) 4 slices of 3 stages; each slice's stages its own
        # (session 16's sweep, bench/README.md)
        SL = "examples/gemm_w4a16_sliced.json"
        cfgs += [(SL, dict(bm, num_stages=9))] + ([(SL, dict(bm, num_stages=12, slices=4))] if M <= 16 else [])
        # the same with its weights interleaved as its threads read them (each thread's pairs of a row one 16-byte
        # load, converted by lop3 alone: 0.0264 -> 0.0255 ms at M = 64 in session 17)
        IL = "examples/gemm_w4a16_il.json"
        cfgs += [(IL, dict(bm, num_stages=9))] + ([(IL, dict(bm, num_stages=12, slices=4))] if M <= 16 else [])
        # the runs of a tile as the blocks of one thread-block cluster, added by cluster_reduce through
        # distributed shared memory (no workspace, no second kernel): 5-23% slower on the H100 in session 13
        # (bench/README.md, "W4A16 in clusters"), timed beside the others for the record
        cfgs += [(CL, dict(bm, block_K=128, num_stages=4, split_k=4)), (CL, dict(bm, block_K=128, num_stages=4, split_k=3))]
    else:  # large M: C^T with the dequantized weights wgmma's A from registers (Machete's form), 128 rows of
        # weights by 256 columns of activations on two warpgroups; first with the scales one row per group
        # (Machete's layout: every copy a bulk tensor copy, no block barrier in the loop), then as gemm_w4a16_t
        # has them (a column of scales through registers). Not by default (slower on the H100, and the run's
        # time limit cut these rows before): gemm_w4a16_narrow's and gemm_w4a16's tiles (1.0-1.3 ms), other
        # gemm_w4a16_t tiles (0.87-1.44 ms), clusters of 2 along N (cluster_n=2: 1.52 ms, a cluster barrier
        # every K tile; bench/README.md); --w4a16-config times them
        cfgs = []
        T, TG = "examples/gemm_w4a16_t.json", "examples/gemm_w4a16_t_gn.json"
        T2 = {"block_N": 128, "threads": 256, "block_M": 256}
        cfgs += [(TG, T2), (TG, dict(T2, num_stages=2)), (T, T2)]
    return cfgs


# the programs whose weights are interleaved in each tile as their threads read them: column j of a tile at p(j)
W4A16_INTERLEAVED = {"gemm_w4a16_il.json"}


def w4a16_il_order(bk):
    """examples/gemm_w4a16_il.json's order (its x-source): p(j) for the columns j of a K tile of bk."""
    return [(j % 8) // 2 * (bk // 4) + j // 32 * 8 + j // 8 % 4 + j % 2 * 4 for j in range(bk)]


def w4a16_given(specs, M):
    """--w4a16-config's configurations for M: [M@]PROGRAM:NAME=V,... (PROGRAM
    the name of an example, examples/PROGRAM.json; values kept as text)."""
    out = []
    for spec in specs:
        at, _, rest = spec.rpartition("@")
        if at and int(at) != M:
            continue
        prog, _, kv = rest.partition(":")
        cfg = dict(x.split("=", 1) for x in kv.split(",") if x)
        out.append((f"examples/{prog}.json", {k: int(v) if v.lstrip("-").isdigit() else v for k, v in cfg.items()}))
    return out


def ours(tlc, prog, defs, ins, outs, reps, args=None, flush=None, backend="auto"):
    """ours timed by `tlc run --time reps`, with flush ("dirty" or "clean") `--flush-l2=flush`."""
    cmd = [tlc, "run", prog, "--device", "cuda", "--time", str(reps)] + ([f"--flush-l2={flush}"] if flush else []) + \
        ([] if backend == "auto" else ["--backend", backend])
    for k, v in defs.items():
        cmd += ["-D", f"{k}={v}"]
    for k, v in (args or {}).items():
        cmd += ["--arg", f"{k}={v}"]
    for k, v in ins.items():
        cmd += ["--in", f"{k}={v}"]
    for k, v in outs.items():
        cmd += ["--out", f"{k}={v}"]
    try:  # a kernel that hangs fails its row, and the run goes on
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{' '.join(cmd[:3])} ran past {RUN_TIMEOUT} s")
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd[:3])} exited {r.returncode}: {r.stderr.strip()[-600:]}")
    for w in [l for l in r.stderr.splitlines() if ": warning: " in l][:2]:  # e.g. C too large for registers
        print(f"  {w}")
    line = [l for l in r.stdout.splitlines() if l.startswith("time:")][0]
    return float(line.split()[1])

def ours_or_fail(what, *a, **kw):
    """ours(...), or None with a FAIL line recorded when the run fails."""
    try:
        return ours(*a, **kw)
    except RuntimeError as ex:
        failures.append(f"FAIL {what}: {str(ex)[-600:]}")
        print(failures[-1])
        return None


# flash attention shapes (batch, heads, seq_len, dim), each causal and not: the day's figure first, then
# head dim 64, a short and a long sequence with the batch adjusted, the long one at both head dims
# (--quick: b1 h8 s2048 d128 alone)
FLASH_SHAPES = [(4, 32, 4096, 128), (4, 32, 4096, 64), (16, 32, 1024, 128), (1, 32, 16384, 128),
                (1, 32, 16384, 64)]


def flash_rows(a, work, rows, shapes):
    """examples/flash_attention.json against torch's flash backend for each shape, causal and not: ours
    checked first (its time is dropped when wrong), then both timed."""
    from torch.nn.attention import sdpa_kernel, SDPBackend
    for Bz, H, S, D in shapes:
        q, k, v = (torch.randn(Bz, S, H, D, device="cuda", dtype=torch.float16) for _ in range(3))
        for name, t in (("Q", q), ("K", k), ("V", v)):
            np.save(f"{work}/{name}.npy", t.cpu().numpy())
        for causal in {"both": (False, True), "full": (False,), "causal": (True,)}[a.flash_causal]:
            flops = 4 * Bz * H * S * S * D // (2 if causal else 1)
            base = f"flash fwd {'causal' if causal else 'full'} b{Bz} h{H} s{S} d{D}"
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                ms_torch = cuda_time(lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt,
                                                                                              is_causal=causal))
                ref = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)
                absref = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt.abs(),
                                                                          is_causal=causal).transpose(1, 2)
            tf = lambda ms: flops / ms / 1e9 if ms else None
            variants = a.flash_defs.split(";")  # each checked and timed against the same torch time
            backends = a.flash_backends.split(",")  # each variant on each back end, side by side
            for var, backend in ((v, b) for v in variants for b in backends):
                defs = {"batch": Bz, "heads": H, "seq_len": S, "dim": D, "is_causal": "true" if causal else "false"}
                defs.update(dict(kv.split("=", 1) for kv in var.split(",") if kv))
                what = base + (f" [{var or 'as written'}]" if len(variants) > 1 else "") + \
                    (f" [{backend}]" if backends != ["auto"] else "")
                ms_ours = ours_or_fail(what, a.tlc, a.flash_program, defs,
                                       {"Q": f"{work}/Q.npy", "K": f"{work}/K.npy", "V": f"{work}/V.npy"},
                                       {"Output": f"{work}/O.npy"}, 5, backend=backend)
                err = float("nan")
                if ms_ours is not None:
                    O = torch.from_numpy(np.load(f"{work}/O.npy")).cuda()
                    err = (torch.linalg.norm(O.float() - ref.float()) / torch.linalg.norm(ref.float())).item()
                    # the bound of check_examples.py's FLASH: sums of 2 seq_len terms, P rounded to float16
                    if not checked(what, O, ref, 2 * S, absref.float(), 2 * U16):
                        ms_ours = None
                rows.append((what, ms_ours, ms_torch, None, tf(ms_ours), tf(ms_torch), None, err))
                if a.flash_only:
                    print(f"{what:42s} ours {tf(ms_ours) or 0:.1f} TF, torch flash {tf(ms_torch):.1f} TF, "
                          f"ratio {(tf(ms_ours) or 0) / tf(ms_torch):.3f}, rel err {err:.2e}", flush=True)
        del q, k, v, ref, absref


def finish(a, res, rows, name):
    """Writes the rows and failures to NAME under --out, prints the failures; the exit status."""
    res["rows"] = [dict(zip(["case", "ms_ours", "ms_ref", "ms_triton", "tflops_ours", "tflops_ref",
                             "tflops_triton", "rel_err"], r)) for r in rows]
    res["failures"] = failures
    with open(os.path.join(a.out, name), "w") as fp:
        json.dump(res, fp, indent=1)
    for f in failures:
        print(f)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tlc", default="build/bin/tlc")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--gemm-only", action="store_true", help="only the GEMM rows (for comparing builds)")
    ap.add_argument("--lowp-only", action="store_true", help="only the int8 and float8 rows (issue 12)")
    ap.add_argument("--w4a16-only", action="store_true", help="only the W4A16 rows (issue 12)")
    ap.add_argument("--w4a16-m", default="", metavar="M,M", help="the W4A16 rows' M (default 1,16,64,4096)")
    ap.add_argument("--w4a16-config", action="append", default=[], metavar="[M@]PROGRAM:NAME=V,...",
                    help="time this configuration (examples/PROGRAM.json with those -D values; with M@, only at that "
                         "M) instead of the built-in list; repeatable")
    ap.add_argument("--w4a16-flush", default="both", choices=("dirty", "clean", "both"),
                    help="the W4A16 rows' cold L2: after 256 MiB written (dirty), after them read back too (clean), "
                         "or both, each row with cuBLAS timed the same way (default both)")
    ap.add_argument("--w4a16-filter", default=None, metavar="REGEX",
                    help="only the W4A16 configurations whose tag (program:constants, as printed) matches")
    ap.add_argument("--fp8-only", action="store_true", help="only the float8 rows (issue 12; --quick: 4096 only)")
    ap.add_argument("--fp8-kinds", default="plain,blockscaled", metavar="KIND,KIND",
                    help="the float8 gemms timed: plain (examples/gemm_fp8.json, per-tensor scales), blockscaled")
    ap.add_argument("--fp8-sizes", default="", metavar="N,N", help="the float8 rows' sizes (M = N = K), e.g. 8192")
    ap.add_argument("--fp8-filter", default=None, metavar="REGEX",
                    help="only the float8 configurations whose tag (as printed, e.g. 'raster:num_stages=4') matches")
    ap.add_argument("--gemm-sizes", default=None, metavar="N,N",
                    help="only these GEMM sizes: N for M = N = K, or MxNxK (e.g. 128x8192x8192); "
                         "default 4096,8192, --quick 4096")
    ap.add_argument("--gemm-filter", default=None, metavar="REGEX",
                    help="only the GEMM configurations whose tag (program:constants, as printed) matches")
    ap.add_argument("--flash-only", action="store_true", help="only the flash attention rows (issue 11)")
    ap.add_argument("--flash-shapes", default="",
                    help="with --flash-only: the shapes B,H,S,D;B,H,S,D... instead of FLASH_SHAPES")
    ap.add_argument("--flash-causal", default="both", choices=("both", "full", "causal"),
                    help="the flash rows: causal and not (default), only full or only causal attention")
    ap.add_argument("--flash-program", default="examples/flash_attention.json",
                    help="the flash attention program timed (the same parameters and constants)")
    ap.add_argument("--flash-backends", default="auto", metavar="B,B",
                    help="the back ends (tlc --backend: auto, cuda, ptx) each flash configuration is checked and "
                         "timed on, e.g. ptx,cuda to compare them in one run (default auto)")
    ap.add_argument("--flash-defs", default="",
                    help="more constants for it: NAME=VALUE,NAME=VALUE...; several such sets separated by ';' "
                         "(an empty one: as written) are each checked and timed, against one torch time")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # the references sum in float32
    dev = torch.cuda.get_device_name()
    work = tempfile.mkdtemp(prefix="tlbench-")
    rows, res = [], {"date": time.strftime("%Y-%m-%d"), "device": dev, "torch": torch.__version__}
    torch.manual_seed(0)
    if a.flash_only:
        shapes = [tuple(int(x) for x in t.split(",")) for t in a.flash_shapes.split(";") if t] or FLASH_SHAPES
        flash_rows(a, work, rows, shapes)
        return finish(a, res, rows, "bench-flash.json")
    if a.lowp_only or a.fp8_only:
        lowp_rows(a, work, rows, res)
        for r in rows:
            f = lambda x: f"{x:.1f}" if x is not None else "-"
            print(f"{r[0]:48s} ours {f(r[1] and r[1] * 1000)} us {f(r[4])} T, torch {f(r[5])} T, "
                  f"ratio {r[4] / r[5] if r[4] else float('nan'):.3f}")
        with open(os.path.join(a.out, "bench-lowp.json"), "w") as fp:
            json.dump(dict(res, rows=[list(r) for r in rows]), fp, indent=1)
        return 0
    # ---- GEMM
    tri = None
    try:
        import triton
        res["triton"] = triton.__version__
        tri = triton_matmul()
    except Exception as ex:  # Triton missing: say so
        print(f"triton unavailable: {ex}")
    sizes = a.gemm_sizes.split(",") if a.gemm_sizes else ["4096"] if a.quick else ["4096", "8192"]
    for size in ([] if a.w4a16_only else sizes):
        # N (M = N = K: its rows labelled N, as before) or MxNxK
        m, n, k = (int(x) for x in size.split("x")) if "x" in size else (int(size),) * 3
        lbl = size if "x" in size else n
        A = torch.randn(m, k, device="cuda", dtype=torch.float16)
        B = torch.randn(k, n, device="cuda", dtype=torch.float16)
        np.save(f"{work}/A.npy", A.cpu().numpy())
        np.save(f"{work}/B.npy", B.cpu().numpy())
        flops = 2 * m * n * k
        ref = (A.float() @ B.float()).half()  # float32 sums, rounded like ours
        absref = A.float().abs() @ B.float().abs()
        best = written = None
        for prog, cfg in GEMM_CONFIGS:  # the example as written first, then tile choices through -D
            defs = dict({"M": m, "N": n, "K": k}, **cfg)
            tag = os.path.basename(prog)[:-5] + ":" + (",".join(f"{c}={v}" for c, v in cfg.items()) or "as written")
            if a.gemm_filter and not re.search(a.gemm_filter, tag):
                continue
            ms = ours_or_fail(f"gemm {lbl} [{tag}]", a.tlc, prog, defs, {"A": f"{work}/A.npy", "B": f"{work}/B.npy"},
                              {"C": f"{work}/C.npy"}, 10)
            if ms is None:
                continue
            C = torch.from_numpy(np.load(f"{work}/C.npy")).cuda()
            e_ = (torch.linalg.norm(C.float() - ref.float()) / torch.linalg.norm(ref.float())).item()
            if not checked(f"gemm {lbl} [{tag}]", C, ref, k, absref):
                res.setdefault("gemm_configs", []).append({"n": lbl, "config": tag, "wrong": True})
                continue
            print(f"  gemm {lbl} [{tag}]: {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s, rel err {e_:.2e}")
            res.setdefault("gemm_configs", []).append({"n": lbl, "config": tag, "ms": ms, "rel_err": e_})
            if best is None or ms < best[0]:
                best = (ms, e_, tag)
            if not cfg and prog == "examples/gemm.json":
                written = (ms, e_, tag)
        if written is None:
            written = (None, float("nan"), "examples/gemm.json as written FAILED")
        if best is None:
            best = (None, float("nan"), "every configuration FAILED")
        ms_ours, err = best[0], best[1]
        ms_cublas = cuda_time(lambda: torch.matmul(A, B))
        print(f"  cuBLAS {lbl}: {ms_cublas:.3f} ms, {flops / ms_cublas / 1e9:.1f} TFLOP/s")  # beside ours, as it goes
        ms_tri = triton_best(tri, lbl, A, B, ref, absref, "float16") if tri else None
        tf = lambda ms: flops / ms / 1e9 if ms else None
        rows.append((f"gemm f16 {lbl} [{best[2]}]", ms_ours, ms_cublas, ms_tri, tf(ms_ours), tf(ms_cublas), tf(ms_tri), err))
        filtered = a.gemm_filter and not re.search(a.gemm_filter, "gemm:as written")
        if written[2] != best[2] and not filtered:  # examples/gemm.json as written has its own row (unless not run)
            rows.append((f"gemm f16 {lbl} [{written[2]}]", written[0], ms_cublas, ms_tri, tf(written[0]), tf(ms_cublas),
                         tf(ms_tri), written[1]))
        # bfloat16: inputs as float32 files of bfloat16 values (exact), C back as uint16 bit patterns
        Ab, Bb = A.to(torch.bfloat16), B.to(torch.bfloat16)
        np.save(f"{work}/Ab.npy", Ab.float().cpu().numpy())
        np.save(f"{work}/Bb.npy", Bb.float().cpu().numpy())
        refb = Ab.float() @ Bb.float()
        absrefb = Ab.float().abs() @ Bb.float().abs()
        best = None
        for prog, cfg in GEMM_BF16_CONFIGS:  # M an argument of BF16_PROG, a constant of the others
            dyn = prog == BF16_PROG
            defs = dict({"N": n, "K": k} if dyn else {"M": m, "N": n, "K": k}, **cfg)
            tag = os.path.basename(prog)[:-5] + ":" + (",".join(f"{c}={v}" for c, v in cfg.items()) or "as written")
            if a.gemm_filter and not re.search(a.gemm_filter, tag):
                continue
            ms = ours_or_fail(f"gemm bf16 {lbl} [{tag}]", a.tlc, prog, defs, {"A": f"{work}/Ab.npy", "B": f"{work}/Bb.npy"},
                              {"C": f"{work}/Cb.npy"}, 10, {"M": m} if dyn else {})
            if ms is None:
                continue
            C = torch.from_numpy(np.load(f"{work}/Cb.npy").view(np.int16)).view(torch.bfloat16).cuda().float()
            e_ = (torch.linalg.norm(C - refb) / torch.linalg.norm(refb)).item()
            # bfloat16 products are exact in float32: the GEMM's bound in bfloat16's ulps
            if not checked(f"gemm bf16 {lbl} [{tag}]", C, refb, k, absrefb, dtype="bfloat16"):
                res.setdefault("gemm_configs", []).append({"n": lbl, "dtype": "bfloat16", "config": tag, "wrong": True})
                continue
            print(f"  gemm bf16 {lbl} [{tag}]: {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s, rel err {e_:.2e}")
            res.setdefault("gemm_configs", []).append({"n": lbl, "dtype": "bfloat16", "config": tag, "ms": ms, "rel_err": e_})
            if best is None or ms < best[0]:
                best = (ms, e_, tag)
        if best is None:
            best = (None, float("nan"), "every configuration FAILED")
        ms_cublas = cuda_time(lambda: torch.matmul(Ab, Bb))
        print(f"  cuBLAS bf16 {lbl}: {ms_cublas:.3f} ms, {flops / ms_cublas / 1e9:.1f} TFLOP/s")
        ms_tri = triton_best(tri, lbl, Ab, Bb, refb, absrefb, "bfloat16") if tri else None
        rows.append((f"gemm bf16 {lbl} [{best[2]}]", best[0], ms_cublas, ms_tri, tf(best[0]), tf(ms_cublas), tf(ms_tri),
                     best[1]))
    # ---- W4A16: uint4 weights (.npy: one weight per byte), float16 scales per group of 128 along K
    N = K = 8192
    G = 128
    Bq = torch.randint(0, 16, (N, K), device="cuda", dtype=torch.uint8)
    Sc = (torch.rand(N, K // G, device="cuda") * 0.02 + 0.005).half()
    W = ((Bq.float() - 8) * Sc.float().repeat_interleave(G, dim=1)).half()  # what the kernel multiplies by
    np.save(f"{work}/Bq.npy", Bq.cpu().numpy())
    np.save(f"{work}/Sc.npy", Sc.cpu().numpy())
    np.save(f"{work}/St.npy", Sc.t().contiguous().cpu().numpy())  # one row per group (gemm_w4a16_t_gn's St)
    for M in ([] if a.gemm_only else [int(x) for x in a.w4a16_m.split(",")] if a.w4a16_m else [1, 16, 64, 4096]):
        A = torch.randn(M, K, device="cuda", dtype=torch.float16)
        np.save(f"{work}/Aw.npy", A.cpu().numpy())
        ref = A.float() @ W.float().t()
        absref = A.float().abs() @ W.float().abs().t()
        flops = 2 * M * N * K
        # float16 cuBLAS, the same shape, with a cold L2 as ours: each row's ratio, for each way of flushing
        flushes = ["dirty", "clean"] if a.w4a16_flush == "both" else [a.w4a16_flush]
        torch_ms = {f: cuda_time_cold(lambda: torch.matmul(A, W.t()), flush=f) for f in flushes}
        best = {f: None for f in flushes}
        for prog, cfg in (w4a16_given(a.w4a16_config, M) if a.w4a16_config else W4A16_CONFIGS(M)):
            tag = os.path.basename(prog)[:-5] + ":" + (",".join(f"{k}={v}" for k, v in cfg.items()) or "as written")
            if a.w4a16_filter and not re.search(a.w4a16_filter, tag):
                continue
            defs = dict({"M": M, "N": N, "K": K, "group_size": G}, **cfg)
            pj = json.load(open(prog))
            scales = "St" if any(q["name"] == "St" for q in pj["params"]) else "S"
            bfile = f"{work}/Bq.npy"
            if len(next(q for q in pj["params"] if q["name"] == "B")["shape"]) == 4:
                # stored tile by tile (gemm_w4a16_splitk_tiled): B[n // bn, k // bk, n % bn, k % bk] = Bq[n, k], for the
                # tile this configuration compiles with; the parts of tiles past N and K hold zeros
                bn, bk = (int(cfg.get(x, pj["constants"][x])) for x in ("block_N", "block_K"))
                il = os.path.basename(prog) in W4A16_INTERLEAVED
                bfile = f"{work}/Bq_tiled_{bn}x{bk}{'_il' if il else ''}.npy"
                if not os.path.exists(bfile):
                    nb, kb = -(-N // bn), -(-K // bk)
                    Bp = torch.zeros(nb * bn, kb * bk, device="cuda", dtype=torch.uint8)
                    Bp[:N, :K] = Bq
                    Bt = Bp.view(nb, bn, kb, bk).permute(0, 2, 1, 3).contiguous()
                    if il:  # each tile's column j at p(j): Bi[..., p(j)] = Bt[..., j]
                        Bi = torch.empty_like(Bt)
                        Bi[..., torch.tensor(w4a16_il_order(bk), device="cuda")] = Bt
                        Bt = Bi
                    np.save(bfile, Bt.cpu().numpy())
            for flush in flushes:  # each run checked, then timed
                ms_torch = torch_ms[flush]
                ms = ours_or_fail(f"w4a16 M={M} [{cfg}] {flush}", a.tlc, prog, defs,
                                  {"A": f"{work}/Aw.npy", "B": bfile,
                                   scales: f"{work}/{'St' if scales == 'St' else 'Sc'}.npy"},
                                  {"C": f"{work}/Cw.npy"}, 20, flush=flush)
                if ms is None:
                    continue
                C = torch.from_numpy(np.load(f"{work}/Cw.npy")).cuda().float()
                e_ = (torch.linalg.norm(C - ref) / torch.linalg.norm(ref)).item()
                # checked before it counts: float16 products of the same float16 weights, exact in float32; K
                # float32 sums; a float16 output
                ok = checked(f"w4a16 M={M} [{tag}]", C, ref, K, absref)
                # the bytes a W4A16 GEMM must move at least: packed weights, scales, A and C once each
                tbs = (N * K // 2 + N * (K // G) * 2 + M * K * 2 + M * N * 2) / (ms * 1e-3) / 1e12
                tbs_torch = (N * K * 2 + M * K * 2 + M * N * 2) / (ms_torch * 1e-3) / 1e12  # its float16 weight
                print(f"  w4a16 M={M} N={N} K={K} [{tag}] L2 {flush}: {ms:.4f} ms, {tbs:.2f} TB/s ({tbs / 3.35:.0%} of "
                      f"the H100's 3.35), cuBLAS float16 {ms_torch:.4f} ms ({tbs_torch:.2f} TB/s), {ms_torch / ms:.2f}x "
                      f"it, rel err {e_:.2e} {'ok' if ok else 'FAIL'}")
                res.setdefault("w4a16_configs", []).append({"M": M, "config": tag, "flush": flush, "ms": ms,
                                                            "rel_err": e_, "ok": ok, "tb_per_s": tbs,
                                                            "cublas_ms": ms_torch, "speedup": ms_torch / ms})
                if ok and (best[flush] is None or ms < best[flush][0]):
                    best[flush] = (ms, e_, tag)
        tf = lambda ms: flops / ms / 1e9 if ms else None
        for flush in flushes:
            b, ms_torch = best[flush], torch_ms[flush]
            if b:
                rows.append((f"w4a16 M={M} N=K={K} L2 {flush} [{b[2]}]", b[0], ms_torch, None, tf(b[0]), tf(ms_torch),
                             None, b[1]))
            else:
                rows.append((f"w4a16 M={M} N=K={K} L2 {flush} [no config passed]", None, ms_torch, None, None,
                             tf(ms_torch), None, float("nan")))
    if not (a.gemm_only or a.w4a16_only):
        lowp_rows(a, work, rows, res)
    # ---- flash attention
    if a.gemm_only or a.w4a16_only:
        for r in rows:
            if r[1] is None:
                print(f"{r[0]:42s} ours FAILED, torch {r[2]:.3f} ms")
                continue
            print(f"{r[0]:42s} ours {r[1]:.3f} ms {r[4]:.1f} TF, torch/cuBLAS {r[2]:.3f} ms {r[5]:.1f} TF, "
                  f"ratio {r[4] / r[5]:.3f}, rel err {r[7]:.2e}")
        return finish(a, res, rows, "bench.json")
    flash_rows(a, work, rows, [(1, 8, 2048, 128)] if a.quick else FLASH_SHAPES)
    # ---- compile time
    t0 = time.time()
    r = subprocess.run([a.tlc, "compile", "examples/gemm.json", "--target", "sm_90a", "-o", f"{work}/g.cubin"],
                       capture_output=True, text=True)
    res["tlc_compile_gemm_sm90a_s"] = time.time() - t0
    if tri:
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="tcache-")
        tri2 = triton_matmul()
        A = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
        Ct = torch.empty_like(A)
        torch.cuda.synchronize()
        t0 = time.time()
        tri2(A, A, Ct)
        torch.cuda.synchronize()
        res["triton_first_call_matmul_s"] = time.time() - t0
    res["rows"] = [dict(zip(["case", "ms_ours", "ms_ref", "ms_triton", "tflops_ours", "tflops_ref", "tflops_triton",
                             "rel_err"], r)) for r in rows]
    print(f"# {dev}, torch {torch.__version__}, {res.get('triton', 'no triton')}")
    print(f"{'case':42s} {'ours ms':>9s} {'ref ms':>9s} {'triton ms':>9s} {'ours TF':>8s} {'ref TF':>8s} "
          f"{'tri TF':>8s} {'ours/ref':>8s} {'rel err':>9s}")
    for c, mo, mr, mt, to, tr, tt, err in rows:
        f = lambda x, w, p: f"{x:{w}.{p}f}" if x is not None else " " * (w - 1) + "-"
        print(f"{c:42s} {f(mo,9,3)} {f(mr,9,3)} {f(mt,9,3)} {f(to,8,1)} {f(tr,8,1)} {f(tt,8,1)} "
              f"{f(to / tr if to and tr else None,8,3)} {err:9.2e}")
    print(f"compile: tlc gemm sm_90a {res['tlc_compile_gemm_sm90a_s']:.2f} s; "
          f"triton first call {res.get('triton_first_call_matmul_s', float('nan')):.2f} s")
    res["failures"] = failures
    with open(os.path.join(a.out, "bench.json"), "w") as fp:
        json.dump(res, fp, indent=1)
    for f in failures:
        print(f)
    if failures:
        print(f"gpu_bench.py: {len(failures)} FAILED: a wrong or failed kernel's time is not reported")
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())
