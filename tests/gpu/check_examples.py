#!/usr/bin/env python3
"""tests/gpu/check_examples.py - every example on the GPU against the
reference interpreter.

For each example and each size below: fresh random inputs (never zeros;
the seed is printed), `tlc run --interpret` gives the reference outputs,
`tlc run --device cuda` the GPU's (outputs start poisoned: NaN or 0xA5
bytes, so an element the kernel never writes shows), and the two are
compared element by element (tests/gpu/tolerance.py derives the bound):
an output that is a float32 sum of L terms (a case's "acc": every gemm,
flash attention, the goldens' reductions) may differ by 2 ulps of its
dtype plus (gamma(L, u) + gamma(L, 2u)) times the same sum over the
absolute values of the terms, which the interpreter computes in a second
run with the inputs named in "acc" replaced by their absolute values (or
NumPy, for gemm_w4a16's dequantized weights); float8 operands' sums on
Hopper's tensor cores have 14-bit adds in place of 2u (FP8_GEMM,
tolerance.U_DEV_FP8).  Integers and the packed sub-byte and float8 codes
compare exactly.  Cases without "acc" (elementwise programs and the
NumPy-referenced ones) compare element by element to 2 ulps.  Cases with
a NumPy reference (top-k and its relatives, issue 10) also compare the
interpreter's outputs with it, exactly.  Every `tlc` call runs under a time
limit (--timeout for the GPU, --interp-timeout for the interpreter and the
compiles): a kernel that hangs fails its case and the run goes on.  Prints
one line per case and a last line "N passed, N failed" (and ", N skipped" where --backends ptx
skips cases outside the PTX back end, each on a "skip" line with the reason); exits 1 if any
failed, 77 if there is no GPU.

    python3 tests/gpu/check_examples.py [--tlc build/bin/tlc] [--only REGEX] [--only-case REGEX] [--sanitize [--sanitize-tool T]]
                                        [--timeout S] [--interp-timeout S] [--interpret-only]
                                        [--target T]   (T: e.g. compute_75, the portable paths of sm_75)
                                        [--backends auto,cuda,ptx] [--options JSON]

--options passes compiler options to each case's device build (tlc run
--options), e.g. '{"split_statements": 2}' to run every program with its
top level cut into noinline regions (compiler/pass_split.c), as kernels of
1024 statements and more are.

--backends runs each case's device side once per back end named (tlc
--backend; default auto): ptx only for the cases the PTX back end builds
(compiler/emit_ptx.c's subset: `tlc compile --backend ptx` succeeds, also
where mode auto would take the CUDA back end), so
`--backends ptx,cuda` compares both back ends with the interpreter.

--interpret-only needs no GPU (NVRTC only, for the metadata): it runs the
interpreter half of every selected case and checks it against the NumPy
reference where the case has one (tests/sh/gpu_programs_interp.sh runs it
in `make test`).
"""
import argparse, json, os, re, signal, subprocess, sys, tempfile, time
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tolerance  # noqa: E402

# The packed dtypes' .npy inputs (proto/tile-ir-v1.md 9.6): one element per
# byte, values in range; float4_e2m1 as its 16 codes, float8_e8m0 as codes
# of 2^-12 .. 2^8 (scales).
PACKED_IN = {"int4": (-8, 8, np.int8), "uint4": (0, 16, np.uint8), "int2": (-2, 2, np.int8),
             "uint2": (0, 4, np.uint8), "int1": (-1, 1, np.int8), "uint1": (0, 2, np.uint8),
             "float4_e2m1": (0, 16, np.uint8), "float8_e8m0": (120, 136, np.uint8)}
E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])  # the OCP MX FP4 table


def to_e2m1(x):
    """Codes of x rounded to float4_e2m1: nearest, ties to the even code, saturating."""
    a = np.minimum(np.abs(x), 6.0)
    grid = E2M1[:8]
    d = np.abs(a[..., None] - grid)
    best = d.min(axis=-1, keepdims=True)
    cand = np.where(d == best, np.arange(8), 99)
    code = np.where((cand % 2 == 0) & (cand < 99), cand, 99).min(axis=-1)  # an even code among the nearest
    code = np.where(code == 99, cand.min(axis=-1), code)
    return (code | np.where(np.signbit(x), 8, 0)).astype(np.uint8)  # -0 keeps its sign (code 8)


def to_e8m0(x):
    """Codes of x > 0 rounded to a power of two (1.5 * 2^k up); 0 gives 2^-127."""
    m, k = np.frexp(x)
    e = np.where(m >= 0.75, k, k - 1)
    return np.where(x > 0, e + 127, 0).astype(np.uint8)


def packed_types_ref(x, c):
    """tests/gpu/programs/packed_types.json in NumPy, from the codes."""
    W, I, T, B = (x[n].astype(np.int64) for n in "WITB")
    F = E2M1[x["F"]]
    S = np.ldexp(1.0, x["S"].astype(np.int64) - 127)[:, None]
    f32 = np.float32
    O = ((W - 8).astype(f32) * S.astype(f32) + F.astype(f32) + (I * 16).astype(f32) + (T * 2).astype(f32)
         + B.astype(f32) + (W * 1024).astype(f32)).astype(f32)
    P = (((W + I) & 15) ^ 8) - 8
    R = np.clip(np.trunc(T * 1.5 - B * 4.0), 0, 3)
    M, N, bm, bn = W.shape[0], W.shape[1], c["block_M"], c["block_N"]
    Z = np.ones((M, N), np.int64)  # unwritten: the poison byte 0xA5, whose low bits read 1
    for j0 in range(0, N, bn):
        for q in range(4):
            if j0 + q < N:
                L = ((I[:, j0 + q] + 2) & 3) - 2  # to int2 (wraps)
                Z[:, j0 + q] = ((L + 1 + 2) & 3) - 2
    h = W.astype(np.float16).view(np.uint16).astype(np.int64)  # float8_e5m2: float16's top byte, rounded to even
    G = (h + 0x7F + ((h >> 8) & 1)) >> 8
    return {"O": O, "Wc": x["W"], "P": P.astype(np.int8), "Q": to_e2m1(F * 3.0), "R": R.astype(np.uint8),
            "E": to_e8m0(W * S), "Z": Z.astype(np.int8), "G": G.astype(np.uint8)}


def topk_ref(x, c):
    """TileLang's tl_topk: topk rounds of a row max; the index is the largest
    column holding the max, and every element equal to it becomes -10000
    (tied values leave together)."""
    x = x["logits"].astype(np.float32).copy()
    cols = np.arange(x.shape[1], dtype=np.int32)
    gates = np.empty((x.shape[0], c["topk"]), np.float32)
    idx = np.empty((x.shape[0], c["topk"]), np.int32)
    for k in range(c["topk"]):
        mx = x.max(axis=1)
        eq = x == mx[:, None]
        gates[:, k] = mx
        idx[:, k] = np.where(eq, cols, -1).max(axis=1)
        x = np.where(eq, np.float32(-10000.0), x)
    return {"topk_gates": gates, "topk_indices": idx}


def serial_int_reduce_ref(x, c):
    """Per round: int32 row max, min, sum (wrapping), a running sum; then the
    row's maxima become its minimum - 1 (wrapping)."""
    v = x["X"].astype(np.int64)
    M, R = v.shape[0], c["rounds"]
    wrap = lambda a: ((a + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)
    out = {n: np.empty((M, R), np.int32) for n in ("row_max", "row_min", "row_sum")}
    run = np.zeros(M, np.int64)
    for k in range(R):
        mx, mn, sm = v.max(axis=1), v.min(axis=1), v.sum(axis=1)
        run += sm
        out["row_max"][:, k], out["row_min"][:, k], out["row_sum"][:, k] = mx, mn, wrap(sm)
        v = np.where(v == mx[:, None], wrap(mn - 1).astype(np.int64)[:, None], v)
    out["run_sum"] = wrap(run)
    return out


def serial_chunk_reduce_ref(x, c):
    """Running row max of float32 chunks and running row min of
    int32(floor(8 * x)) + k; columns past N read as 0."""
    v = x["X"].astype(np.float32)
    M, N, bn = v.shape[0], v.shape[1], c["blk_n"]
    nk = -(-N // bn)
    pad = np.zeros((M, nk * bn), np.float32)
    pad[:, :N] = v
    rmax = np.full(M, -np.inf, np.float32)
    rmin = np.full(M, np.iinfo(np.int32).max, np.int64)
    out = {"run_max": np.empty((M, nk), np.float32), "run_min": np.empty((M, nk), np.int32)}
    for k in range(nk):
        t = pad[:, k * bn:(k + 1) * bn]
        q = np.floor(t * np.float32(8.0)).astype(np.int64) + k
        rmax = np.maximum(rmax, t.max(axis=1))
        rmin = np.minimum(rmin, q.min(axis=1))
        out["run_max"][:, k], out["run_min"][:, k] = rmax, rmin
    return out


# (example, -D overrides, --arg values, outputs[, options]); options:
#   "ref": f(inputs, constants) -> {output: array}, a NumPy reference the
#          interpreter's outputs must equal exactly;
#   "acc": (L, inputs, extra[, u_dev]): the outputs are float32 sums of L
#          terms (L: an expression over the constants and arguments) that
#          are products of the named inputs (tolerance.py: their absolute
#          values give the bound's sum of |terms|), or of terms whose
#          absolute values a function f(inputs, constants) -> {output: sum
#          of |terms|} gives in place of the names; extra: a relative term
#          the computation adds beyond its sums (0 for a gemm; a string is
#          an expression over the constants, with gamma and ceildiv); u_dev: the
#          GPU's adds (tolerance.sum_coefficient; default float32 tensor
#          cores, FP8_GEMM's for float8 operands);
#   "gen": "ties" (float inputs drawn from the integers -4..3, so rows hold
#          ties) or "wide" (integer inputs over the whole int32 range, so sums
#          wrap); default: normal floats without zeros, integers in -1000..999;
#   "target": build for this target instead of the GPU's own (or --target's).
FA = {"batch": 1, "heads": 2}
GEMM = {"acc": ("K", ["A", "B"], 0.0)}
# A float16 accumulator (gemm_nt's C_local): beyond GEMM's float32 sums, the
# GPU rounds the accumulator to float16 after every mma instruction (k = 16
# for m16n8k16 and wgmma, 8 for sm_75's m16n8k8: ceildiv(K, 8) roundings at
# most, each within 2^-10 of the partial sum, truncation included), and the
# interpreter after every gemm call (one per K tile: ceildiv(K, block_K)
# roundings to nearest, 2^-11 each); every partial sum is within the sum of
# the |terms|, so the two add gamma(ceildiv(K, 8), 2^-10) + gamma(ceildiv(K,
# block_K), 2^-11) of it (an expression over the case's constants)
GEMM_F16ACC = {"acc": ("K", ["A", "B"],
                       "gamma(ceildiv(K, 8), 2.0 ** -10) + gamma(ceildiv(K, block_K), 2.0 ** -11)")}
DEQ = {"acc": ("K", ["A"], 0.0)}  # B's 4-bit values are 0..15: their products with A's are exact
MATMUL = {"acc": ("k_size", ["a", "b"], 0.0)}
# tma_colsum: Y[i, j] = sum over the K tiles of X[i, k * block_K + j], float32 adds on both sides
COLSUM = {"acc": ("(K + block_K - 1) // block_K", ["X"], 0.0)}
# split_rowsum: Y[i] = the sum of a row of X (N terms), in S column slices written to a workspace by one
# kernel and added by the next (several kernels, proto/tile-ir-v1.md 4.1)
ROWSUM = {"acc": ("N", ["X"], 0.0)}


def math_fns_ref(x, c):
    """tests/gpu/programs/math_fns.json in NumPy: each function in float64
    (math.erf for erf), rounded to float32 (and float16)."""
    import math
    v = x["x"].astype(np.float32).astype(np.float64)
    k = x["k"].astype(np.int64)
    erf = np.vectorize(math.erf)
    with np.errstate(all="ignore"):
        f = lambda d, t: np.stack([erf(d), np.sin(d), np.cos(d), np.tan(d), np.log1p(np.abs(d)), np.expm1(d),
                                   np.log10(np.abs(d)), np.trunc(d * 4)]).astype(np.float32).astype(t)
        return {"F16": f(v, np.float16), "F32": f(v, np.float32),
                "C": np.stack([np.clip(v, -0.5, 0.5), np.clip(v * 3, -1, 2)]).astype(np.float32),
                "I": np.stack([np.clip(k, -3, 7), v < 0,
                               np.exp((v * 1000).astype(np.float32).astype(np.float64)) > np.finfo(np.float32).max,
                               np.zeros_like(k)]).astype(np.int32)}


def atomics_ref(x, c):
    """tests/gpu/programs/atomics.json in NumPy: the outputs start as the
    poison (0xA5 bytes, NaN), which the integer sums carry and fmax skips."""
    k, v, A = x["k"].astype(np.int64), x["x"].astype(np.float32), x["A"].astype(np.float32)
    n, bins, bn = k.shape[0], c["bins"], c["block_n"]
    b = k % bins
    cnt = np.bincount(b, minlength=bins)
    poison32, poison64 = np.int64(np.uint32(0xA5A5A5A5).view(np.int32)), np.uint64(0xA5A5A5A5A5A5A5A5).view(np.int64)
    wrap32 = lambda a: ((a + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)
    mx = np.array([v[b == i].max() if cnt[i] else np.nan for i in range(bins)], np.float32)
    mn = np.array([min(0xA5A5A5A5, int((k[b == i] + 1000).min()) if cnt[i] else 0xA5A5A5A5) for i in range(bins)],
                  np.uint32)
    s64 = np.array([int(poison64) + int((k[b == i] * 1000000007).sum()) for i in range(bins)], dtype=object)
    s64 = np.array([(int(t) + (1 << 63)) % (1 << 64) - (1 << 63) for t in s64], np.int64)
    nb = -(-n // bn)
    f16 = np.zeros((nb, bins), np.float16)
    for blk in range(nb):
        f16[blk] = (np.bincount(b[blk * bn:(blk + 1) * bn], minlength=bins) * 0.5).astype(np.float16)
    a1 = (A + np.float32(1.5)).astype(np.float32)
    return {"H": wrap32(poison32 + cnt), "Mx": mx, "Mn": mn, "S64": s64, "Hs": wrap32(poison32 + cnt), "F16": f16,
            "P": np.stack([A, a1]), "T": wrap32(poison32 + np.full(4, 32 * nb))}


def bf16_bits(v):
    """bfloat16 bit patterns (uint16) of float32 values, rounded to nearest even."""
    u = np.asarray(v, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def atomics16_ref(x, c):
    """tests/gpu/programs/atomics16.json in NumPy: maxima and minima of
    values rounded once to float16 / bfloat16 (so exact); a bin no element
    falls in keeps its start (NaN poison, +inf, -inf)."""
    k, v = x["k"].astype(np.int64), x["x"].astype(np.float32)
    n, bins, bn = k.shape[0], c["bins"], c["block_n"]
    b, nb = k % bins, -(-n // bn)
    h = v.astype(np.float16)
    G = np.array([h[b == i].max() if (b == i).any() else np.nan for i in range(bins)], np.float16)
    R = np.full((nb, bins), 0x7f80, np.uint16)
    S = np.full((nb, bins), -np.inf, np.float16)
    vb = bf16_bits(v)
    for blk in range(nb):
        sl = slice(blk * bn, (blk + 1) * bn)
        for i in range(bins):
            m = b[sl] == i
            if m.any():
                R[blk, i] = vb[sl][m][np.argmin(bf16_value(vb[sl][m]))]
                S[blk, i] = h[sl][m].max()
    A, B = x["A16"].astype(np.float16), bf16_bits(x["B16"])
    half = bf16_bits(v * np.float32(0.5))
    Bn = np.where(bf16_value(half) > bf16_value(B), half, B)
    return {"G16": G, "R16": R, "S16": S, "O16": np.stack([A, np.minimum(A, h)]), "OB": np.stack([B, Bn])}


def scans_ref(x, c):
    """tests/gpu/programs/scans.json in NumPy: rows past M read as 0 (the
    bitand of a block's last, partial tile of columns sees them)."""
    X, F = x["X"].astype(np.int64), x["F"].astype(np.float32)
    M, N, bm = X.shape[0], c["N"], c["blk_m"]
    nb = -(-M // bm)
    Xp = np.zeros((nb * bm, N), np.int64)
    Xp[:M] = X
    ba, bo, bxr = (np.bitwise_and.reduce(X, axis=1), np.bitwise_or.reduce(X, axis=1),
                   np.bitwise_xor.reduce(X, axis=1))
    co = np.bitwise_or.reduce(Xp.reshape(nb, bm, N), axis=1)
    cn = np.minimum.accumulate(X[:, ::-1], axis=1)[:, ::-1]
    return {"BA": ba.astype(np.int32), "BO": bo.astype(np.int32), "BX": (ba ^ bxr).astype(np.int32),
            "CO": co.astype(np.int32), "CM": np.maximum.accumulate(F, axis=1), "CN": cn.astype(np.int32)}


def if_values_ref(x, c):
    """tests/gpu/programs/if_values.json in NumPy: the gemm's sums of float16
    products are exact in float64 (products of 22 bits, |x| > 1e-3) and
    rounded once to float32, as the interpreter does."""
    f32 = np.float32
    acc = (x["A"].astype(np.float64) @ x["B"].astype(np.float64)).astype(f32)
    X = x["X"].astype(f32)
    rm, t = X.max(axis=1, keepdims=True), X * f32(3)
    R = np.where((X > 1) & (rm > 2), rm - X, np.where(X < -1, f32(-1), np.where(t > rm, t, X)))
    cnt = (X > X[:, :1]).sum(axis=1).astype(f32)
    return {"C": np.where(acc < 0, acc * f32(0.25), acc), "R": R.astype(f32),
            "L": np.where(X[:, 0] > X[:, 1], X[:, 0], cnt).astype(f32),
            "L2": np.where(cnt > 0, cnt + X[:, 1], f32(-7)).astype(f32)}


def views_ref(x, c):
    """tests/gpu/programs/views.json in NumPy: the views as NumPy views of
    the same bytes (uint4: element 2k in the low bits of byte k)."""
    X, W, F = x["X"].astype(np.int8), x["W"].astype(np.uint8), x["F"].astype(np.float32)
    n, blk = X.shape[0], c["blk"]
    nb = -(-n // blk)
    w4 = np.stack([W & 15, W >> 4], axis=-1).reshape(16, 64).astype(np.float32)
    F3 = F.reshape(4, 16, 64)
    Z = np.stack([F3[b % 4] + w4 for b in range(nb)]).astype(np.float32)
    Z = (Z.view(np.uint32) ^ np.uint32(0x80000000)).view(np.float32)
    acc = np.zeros((16, 64), np.float32)
    for k in range(4):  # acc += p, rounded to float32 each iteration
        acc = (acc + F3[k]).astype(np.float32)
    S = np.tile(acc.astype(np.float64).sum(axis=0).astype(np.float32), (nb, 1))  # one rounding per sum
    return {"Y": X.view(np.int32), "Z": Z, "S": S}


def cluster_reduce_ref(x, c):
    """tests/gpu/programs/cluster_reduce.json in NumPy: the block of rank 0
    of each cx x cy cluster (rank = bx % cx + cx * (by % cy)) gets its
    cluster's tiles combined in rank order (float32 adds one at a time,
    int32 sums wrapping), the others keep their own."""
    R, N, cx, cy, gx, gy = (c[k] for k in ("R", "N", "cx", "cy", "gx", "gy"))
    X = x["X"].astype(np.float32)
    XI = x["XI"].astype(np.int32)
    tile = lambda a, bx, by: a[by * R:(by + 1) * R, bx * N:(bx + 1) * N]
    out = {"Ysum": X.copy(), "Ymax": X.copy(), "Ymin": X.copy(), "Yi": XI.copy(), "Ysh": X * np.float32(2)}
    with np.errstate(over="ignore"):
        for ox in range(0, gx, cx):
            for oy in range(0, gy, cy):
                blocks = [(ox + r % cx, oy + r // cx) for r in range(cx * cy)]  # in rank order
                s, q = tile(X, *blocks[0]).copy(), tile(X, *blocks[0]) * np.float32(2)
                mx, mn, si = s.copy(), s.copy(), tile(XI, *blocks[0]).copy()
                for b in blocks[1:]:
                    s = s + tile(X, *b)
                    q = q + tile(X, *b) * np.float32(2)
                    mx, mn = np.maximum(mx, tile(X, *b)), np.minimum(mn, tile(X, *b))
                    si = si + tile(XI, *b)
                for k, v in (("Ysum", s), ("Ymax", mx), ("Ymin", mn), ("Yi", si), ("Ysh", q)):
                    tile(out[k], *blocks[0])[...] = v
    return out


def int_divmod_ref(x, c):
    """tests/gpu/programs/int_divmod.json in NumPy: // and % are Python's
    (floor_divide and mod: the quotient rounded down, the remainder of the
    divisor's sign); int32 sums wrap, int64 ones too (y is J * 1000003)."""
    with np.errstate(over="ignore"):
        xi = x["I"].astype(np.int32)
        y = x["J"].astype(np.int64) * np.int64(1000003)
        g = np.arange(xi.shape[0], dtype=np.int32)
        w = lambda v: v.astype(np.int64).astype(np.int32)  # int32 wrap of exact int64 sums
        x64 = xi.astype(np.int64)
        Q = w(x64 // 8 - x64 // 1024 * 3 + x64 * 7 + x64 // 2 * 11)
        R = w(x64 % 16 + x64 % 2 * 100 + x64 % 1024 * 1000)
        big = np.int64(4611686018427387904)
        Q64 = y // 4096 + y // 2 * 3 + y // big
        R64 = y % 64 + y % big
        g64 = g.astype(np.int64)
        U = w(g64 // 3 + g64 % 7 * 1000 + (g64 + 5) // 10 * 100000)
    return {"Q": Q, "R": R, "Q64": Q64, "R64": R64, "U": U}


def w4a16_abs(x, c, order=None, offset=8):
    """gemm_w4a16's sums of |terms|: |A| @ |W|^T with W[n, k] = float16((B[n, k]
    - 8) * S[n, k // group_size]), the dequantized weight both sides multiply
    by (one float16 rounding of a product exact in float32, so the same
    weight on both; its products with A's float16 values are exact in
    float32, and only the K float32 sums differ: GEMM's bound).  order:
    where a tile's column j is stored (order(block_K)[j]: the interleaved
    programs); offset: what the program subtracts from a code (0 for int4)."""
    g = c["group_size"]
    S = x["S"] if "S" in x else x["St"].T  # St: one row per group (gemm_w4a16_t_gn)
    B = x["B"]
    if B.ndim == 4:  # stored tile by tile (gemm_w4a16_splitk_tiled): B[n // bn, k // bk, n % bn, k % bk] = W[n, k]
        if order is not None:  # B[n // bn, k // bk, n % bn, order[k % bk]] = W[n, k]
            B = B[..., order(B.shape[3])]
        B = B.transpose(0, 2, 1, 3).reshape(B.shape[0] * B.shape[2], B.shape[1] * B.shape[3])
        B = B[:S.shape[0], :x["A"].shape[1]]
    S = np.repeat(S.astype(np.float32), g, axis=1)[:, :B.shape[1]]
    W = ((B.astype(np.float32) - offset) * S).astype(np.float16)
    return {"C": np.abs(x["A"].astype(np.float64)) @ np.abs(W.astype(np.float64)).T}


def il_order(bk):
    """examples/gemm_w4a16_il.json's order: column j of a tile at p(j)."""
    return np.array([(j % 8) // 2 * (bk // 4) + j // 32 * 8 + j // 8 % 4 + j % 2 * 4 for j in range(bk)])


def il_bytes_order(bk):
    """tests/gpu/programs/gemm_il_bytes.json's order: each pair in one byte."""
    return np.array([(j % 8) // 2 * (bk // 4) + j // 8 * 2 + j % 2 for j in range(bk)])


W4A16 = {"acc": ("K", w4a16_abs, 0.0)}
W4A16_IL = {"acc": ("K", lambda x, c: w4a16_abs(x, c, il_order), 0.0)}
W4A16_IL_BYTES = {"acc": ("K", lambda x, c: w4a16_abs(x, c, il_bytes_order), 0.0)}
W4A16_IL_INT4 = {"acc": ("K", lambda x, c: w4a16_abs(x, c, il_order, 0), 0.0)}
W4A16C = dict(W4A16, target="sm_90a")  # a kernel in clusters: sm_90 and later
# float8 operands (issue 12's float8 gemms): exact products, but Hopper's
# float8 tensor cores keep about 14 bits while they accumulate
# (tolerance.U_DEV_FP8 derives the bound); for a program whose A and B are
# float8 and whose sums the tensor cores keep over all of K
FP8_GEMM = {"acc": ("K", ["A", "B"], 0.0, tolerance.U_DEV_FP8)}
# DeepGEMM's block scales: each K block's 128 float8 products summed by the
# tensor cores (14 bits), scaled by scale_a * scale_b and added in float32;
# L = K with the 14-bit unit covers both kinds of sums (it is looser than
# 128 products plus K / 128 float32 adds), and the sums of |terms| come
# from |A|, |B| and |scales|
FP8_SCALED = {"acc": ("K", ["A", "B", "scale_a", "scale_b"], 0.0, tolerance.U_DEV_FP8)}
# per-tensor scales (examples/gemm_fp8.json, torch._scaled_mm's operation): one K-long sum on the tensor
# cores (14 bits), then two float32 roundings on each side (scale_a * scale_b, and the sum times that):
# L = K + 2 covers them
FP8_PER_TENSOR = {"acc": ("K + 2", ["A", "B", "scale_a", "scale_b"], 0.0, tolerance.U_DEV_FP8)}
# Flash attention: Output = sum_j P_ij V_j / l_i with P = exp2(s - max) in
# float32, rounded to float16 for the P @ V gemm (acc_s_cast).  Its sums:
# seq_len products P V, seq_len / block_N rescales of the accumulator and
# the row sum l (each as long as the first): L = 2 seq_len covers them.
# Beyond its sums: P's rounding to float16 (the GPU and the interpreter
# may round a P that differs in its last float32 bits to neighbouring
# float16 values), at most u16 = 2^-11 of each P, so u16 times
# sum_j P_ij |V_j| / l_i (the interpreter's Output with |V|); and the
# scores' own float32 sums of dim products, whose error e moves P by a
# factor 2^e: |e| <= 3 dim u sum|q k| scale, with standard normal inputs
# and dim <= 128 about 3 * 128 * 2^-24 * (0.64 * 128) * 0.128 = 2.4e-4,
# i.e. P by 1.7e-4 < u16.  extra = 2 u16.
# Every output is finite ("finite": the interpreter's are checked, as a NaN on both sides would pass).
FLASH = {"acc": ("2 * seq_len", ["V"], 2 * 2.0 ** -11), "finite": True}
# the same in bfloat16 (tests/gpu/programs/flash_attention_bf16.json): P rounded to bfloat16, u = 2^-8
FLASH_BF16 = {"acc": ("2 * seq_len", ["V"], 2 * 2.0 ** -8), "finite": True}
CASES = [
    ("tilus_add_one", {}, {"n": 1}, ["b"]),
    ("tilus_add_one", {}, {"n": 129}, ["b"]),
    ("tilus_add_one", {}, {"n": 1 << 20}, ["b"]),
    ("gemm", {"M": 256, "N": 256, "K": 256}, {}, ["C"], GEMM),
    ("gemm", {"M": 200, "N": 136, "K": 72}, {}, ["C"], GEMM),
    ("gemm", {"M": 1024, "N": 1024, "K": 1024}, {}, ["C"], GEMM),
    ("gemm_nt", {"M": 256, "N": 256, "K": 256}, {}, ["C"], GEMM_F16ACC),
    ("gemm_nt", {"M": 130, "N": 257, "K": 33}, {}, ["C"], GEMM_F16ACC),
    ("gemm_swizzle", {"M": 256, "N": 256, "K": 256}, {}, ["C"], GEMM),
    ("gemm_swizzle", {"M": 200, "N": 136, "K": 72}, {}, ["C"], GEMM),
    ("../bench/programs/gemm_raster", {"M": 1000, "N": 1100, "K": 200}, {}, ["C"], GEMM),
    # wgmma on sm_90a (8 warps, 64-wide K tiles): B N-major in panels, N = 128 and 256; B K-major
    ("../bench/programs/gemm_raster", {"M": 1000, "N": 1100, "K": 200, "block_K": 64, "threads": 256}, {}, ["C"], GEMM),
    ("../bench/programs/gemm_raster", {"M": 512, "N": 768, "K": 320, "block_K": 64, "block_N": 256, "threads": 256},
     {}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_bt", {"M": 1000, "N": 1100, "K": 200}, {}, ["C"], GEMM),
    # warp specialization on sm_90a (compiler/pass_wspec.c): a producer warpgroup issues the TMA copies; the
    # same tile without it; 512 threads (104 registers after setmaxnreg); A's row a let the producer evaluates
    ("../bench/programs/gemm_raster", {"M": 512, "N": 768, "K": 320, "block_K": 64, "block_N": 256, "threads": 256,
                                       "warp_specialize": "false"}, {}, ["C"], GEMM),
    ("../bench/programs/gemm_raster", {"M": 1000, "N": 1100, "K": 200, "block_K": 64, "block_M": 256, "threads": 512},
     {}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_wspec_let", {"M": 1000, "N": 1100, "K": 1000}, {}, ["C"], GEMM),
    # a K loop in slices, its gemm's group in flight (a stage freed slices iterations later): slice 0 starts
    # from D, the others from zero; ragged, fewer K tiles than slices, two warpgroups a slice
    ("../tests/gpu/programs/gemm_sliced", {"M": 300, "N": 264, "K": 1000}, {}, ["C"],
     {"acc": ("K + 1", ["A", "B", "D"], 0.0)}),
    ("../tests/gpu/programs/gemm_sliced", {"M": 130, "N": 248, "K": 72, "slices": 4, "num_stages": 7}, {}, ["C"],
     {"acc": ("K + 1", ["A", "B", "D"], 0.0)}),
    ("../tests/gpu/programs/gemm_sliced", {"M": 200, "N": 296, "K": 520, "slices": 2, "block_M": 128,
                                            "threads": 256, "num_stages": 3}, {}, ["C"],
     {"acc": ("K + 1", ["A", "B", "D"], 0.0)}),
    # the gemm under an if in the loop: every K tile's, and the first 5 only (slices whose tiles add nothing)
    ("../tests/gpu/programs/gemm_sliced_if", {"M": 300, "N": 264, "K": 1000}, {}, ["C"],
     {"acc": ("K + 1", ["A", "B", "D"], 0.0)}),
    ("../tests/gpu/programs/gemm_sliced_if", {"M": 130, "N": 256, "K": 1000, "until": 5}, {}, ["C"],
     {"acc": ("K + 1", ["A", "B", "D"], 0.0)}),
    ("../tests/gpu/programs/gemm_sliced_int8", {"M": 300, "N": 264, "K": 1008}, {}, ["C"]),
    ("../tests/gpu/programs/gemm_sliced_int8", {"M": 64, "N": 128, "K": 128, "slices": 4, "num_stages": 7}, {},
     ["C"]),
    # a bias tile copied before the loop by the producer too (pass_wspec.c's pre copies, two copies of its
    # buffer), read element by element after it (each thread frees its copy): ragged, 9 tiles on 4 blocks, 15 tiles
    ("../tests/gpu/programs/gemm_bias_pre", {"M": 300, "N": 264, "K": 200}, {}, ["C"],
     {"acc": ("K + 1", ["A", "B", "Bias"], 0.0), "env": {"TL_PERSISTENT_BLOCKS": "4"}}),
    ("../tests/gpu/programs/gemm_bias_pre", {"M": 300, "N": 264, "K": 200, "block_N": 64, "num_stages": 2}, {},
     ["C"], {"acc": ("K + 1", ["A", "B", "Bias"], 0.0)}),
    # more tiles than the persistent launch starts blocks (132 SMs on an H100): each block runs two or more
    # tiles, its warpgroups on into the next tile apart (no barrier between tiles: pass_barrier.c)
    ("../bench/programs/gemm_raster", {"M": 3000, "N": 2000, "K": 136, "block_K": 64, "block_N": 256,
                                       "threads": 256}, {}, ["C"], GEMM),
    ("../bench/programs/gemm_raster", {"M": 2000, "N": 2100, "K": 200, "block_K": 64, "threads": 256}, {}, ["C"],
     GEMM),
    # the same with TMA stores: two staged panels, the last tile's stores not waited for before the next tile
    ("../bench/programs/gemm_raster", {"M": 3000, "N": 2000, "K": 136, "block_K": 64, "block_N": 256,
                                       "threads": 256, "tma_store": "true"}, {}, ["C"], GEMM),
    ("gemm", {"M": 2000, "N": 2100, "K": 72}, {}, ["C"], GEMM),
    # block_N=256 at the example's 128 threads: 256 accumulators a thread, so pass_threads.c runs the block on
    # 256 (two warpgroups of m64n256 on sm_90a, 8 warps of mma.sync elsewhere)
    ("gemm", {"M": 1000, "N": 1100, "K": 200, "block_N": 256, "block_K": 64}, {}, ["C"], GEMM),
    # thread-block clusters with TMA multicast (compiler/pass_cluster.c): A's tile multicast across 2 (4) blocks
    # along N, B's across 2 along M; with the producer warpgroup (each stage freed in every block of the cluster)
    # and without (a cluster barrier each iteration); ragged M and K (a block's half of A's box wholly past M at
    # M = 900), a long K wrapping the mbarriers' phases; N = 1100 is 5 blocks along N, no whole clusters: the
    # cluster is refused and the kernel runs without
    ("../tests/gpu/programs/gemm_cluster", {"M": 1000, "N": 1000, "K": 200}, {}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_cluster", {"M": 2000, "N": 2000, "K": 136, "block_N": 128, "cluster_x": 1,
                                            "cluster_y": 2}, {}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_cluster", {"M": 900, "N": 1000, "K": 200, "cluster_x": 1, "cluster_y": 2}, {}, ["C"],
     GEMM),
    ("../tests/gpu/programs/gemm_cluster", {"M": 900, "N": 1000, "K": 200, "cluster_x": 4}, {}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_cluster", {"M": 1000, "N": 1000, "K": 200, "warp_specialize": "false"}, {}, ["C"],
     GEMM),
    ("../tests/gpu/programs/gemm_cluster", {"M": 900, "N": 1000, "K": 200, "cluster_x": 1, "cluster_y": 2,
                                            "warp_specialize": "false"}, {}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_cluster", {"M": 256, "N": 512, "K": 2048, "block_N": 128, "num_stages": 4}, {},
     ["C"], GEMM),
    ("../tests/gpu/programs/gemm_cluster", {"M": 1000, "N": 1100, "K": 200}, {}, ["C"], GEMM),
    # the epilogue through shared memory and TMA stores (compiler/pass_store.c): with clusters, persistent and
    # not, without the producer warpgroup, without clusters; ragged M and N (boxes past the tensor, clipped)
    ("../tests/gpu/programs/gemm_cluster", {"M": 1000, "N": 1000, "K": 200, "tma_store": "true"}, {}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_cluster", {"M": 900, "N": 1000, "K": 200, "tma_store": "true", "persistent": "false",
                                            "cluster_x": 1, "cluster_y": 2}, {}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_cluster", {"M": 1000, "N": 1000, "K": 200, "tma_store": "true",
                                            "warp_specialize": "false"}, {}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_cluster", {"M": 1000, "N": 1100, "K": 200, "tma_store": "true", "cluster_x": 1,
                                            "block_N": 128}, {}, ["C"], GEMM),
    # TMA on sm_90 and later (compiler/pass_tma.c): bulk tensor copies into the
    # 128-byte swizzle with per-stage mbarriers.  gemm_dyn's M is a scalar
    # parameter, so its tensor maps are built at each launch; ragged M, N and
    # K make boxes run past the tensors (read as zeros), wholly past them on
    # the last block column of N = 136; a long K wraps the mbarriers' phases
    # many times; 8 stages are more than fit (7 are laid out); use_tma=false
    # is the same loop on cp.async; gemm at 64 x 64 tiles runs 4 warps
    ("../tests/gpu/programs/gemm_dyn", {"K": 200}, {"M": 1000}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn", {"N": 136, "K": 72}, {"M": 1}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn", {"N": 136, "K": 72}, {"M": 300}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn", {"N": 256, "K": 2048, "num_stages": 4}, {"M": 128}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn", {"N": 512, "K": 1024, "num_stages": 8}, {"M": 384}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn", {"K": 200, "use_tma": "false"}, {"M": 1000}, ["C"], GEMM),
    ("gemm", {"M": 200, "N": 136, "K": 72, "block_M": 64, "block_K": 64}, {}, ["C"], GEMM),
    # several K tiles a stage (compiler/pass_kgroup.c): gemm_dyn_k's K is a scalar, so the loop over groups
    # of 2 tiles is followed by a serial loop of the last tile when ceildiv(K, 32) is odd (1050: 33 tiles,
    # the last ragged; 16: no group at all; 1000: 32 tiles, the last ragged one inside a group, its box
    # past K read as zeros); k_group 1 keeps one tile a stage; examples/gemm.json at K = 72 has 3 tiles (a
    # constant extent: one group and one last tile), int8 at K = 416 with 32-wide tiles groups 4 (13 tiles)
    ("../tests/gpu/programs/gemm_dyn_k", {"M": 1000, "N": 1100}, {"K": 1050}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_k", {"M": 300, "N": 136}, {"K": 1000}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_k", {"M": 200, "N": 256}, {"K": 16}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_k", {"M": 257, "N": 300, "threads": 256}, {"K": 4000}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_k", {"M": 1000, "N": 1100, "k_group": 1}, {"K": 1050}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_k", {"M": 256, "N": 512, "threads": 256, "num_stages": 2, "k_group": 4},
     {"K": 2080}, ["C"], GEMM),
    ("gemm", {"M": 1000, "N": 1100, "K": 72}, {}, ["C"], GEMM),
    ("gemm", {"M": 300, "N": 136, "K": 1000}, {}, ["C"], GEMM),
    # mma.sync (4 warps) reading A's 128-byte rows, brought by TMA in the same swizzle; B on cp.async
    ("../bench/programs/gemm_raster", {"M": 1000, "N": 1024, "K": 200, "block_K": 64}, {}, ["C"], GEMM),
    # TMA without swizzle: float32 tiles read by a parallel loop, ragged M and K
    ("../tests/gpu/programs/tma_colsum", {"K": 200}, {"M": 100}, ["Y"], COLSUM),
    ("../tests/gpu/programs/tma_colsum", {"K": 1024, "num_stages": 4}, {"M": 1000}, ["Y"], COLSUM),
    # two kernels in order sharing a workspace whose shape follows a scalar (m): ragged m, a second size that
    # grows the kernel handle's workspace; N = 1024 in 8 slices
    ("../tests/gpu/programs/split_rowsum", {}, {"m": 1000}, ["Y"], ROWSUM),
    ("../tests/gpu/programs/split_rowsum", {"N": 1024, "S": 8}, {"m": 77}, ["Y"], ROWSUM),
    ("../tests/gpu/programs/gemm_bt", {"M": 256, "N": 256, "K": 1024, "block_N": 64}, {}, ["C"], GEMM),
    # int8 / uint8 -> int32 and float8 gemms on the tensor cores (issue 12): wgmma m64nNk32 on sm_90a, with
    # K tiles of 32, 64 (32- and 64-byte swizzle), 128 and 256 (panels of 128) and 4-warp tiles (two m64
    # instructions per warpgroup, row tiles interleaved, DeepGEMM's row scales following them); int8 keeps
    # one wgmma group in flight across K tiles; block_K=96 and A stored [K, M] take mma.sync m16n8k32
    ("gemm_int8", {"M": 256, "N": 256, "K": 256}, {}, ["C"]),
    ("gemm_int8", {"M": 1000, "N": 1100, "K": 200}, {}, ["C"]),
    ("gemm_int8", {"M": 130, "N": 257, "K": 336}, {}, ["C"]),
    ("gemm_int8", {"M": 1000, "N": 1100, "K": 208, "block_K": 64}, {}, ["C"]),
    ("gemm_int8", {"M": 300, "N": 500, "K": 384, "block_N": 48}, {}, ["C"]),
    ("gemm_int8", {"M": 300, "N": 500, "K": 416, "block_K": 32}, {}, ["C"]),
    ("gemm_int8", {"M": 300, "N": 260, "K": 768, "block_K": 256}, {}, ["C"]),
    ("gemm_int8", {"M": 200, "N": 300, "K": 480, "block_K": 96}, {}, ["C"]),
    ("gemm_int8", {"M": 1000, "N": 1100, "K": 416, "threads": 128}, {}, ["C"]),
    ("../tests/gpu/programs/gemm_uint8", {"M": 1000, "N": 1100, "K": 208}, {}, ["C"]),
    ("../tests/gpu/programs/gemm_uint8", {"M": 130, "N": 257, "K": 336, "block_K": 64}, {}, ["C"]),
    # A stored [K, M] and B [K, N]: mma.sync with operands packed byte by byte
    ("../tests/gpu/programs/gemm_int8_kmkn", {"M": 1000, "N": 1100, "K": 208}, {}, ["C"]),
    ("../tests/gpu/programs/gemm_int8_kmkn", {"M": 130, "N": 257, "K": 336, "block_K": 64}, {}, ["C"]),
    # float8 with per-tensor scales: 128 x 128 tiles as written, 128 x 256 and 256 x 128 (two consumer
    # warpgroups of 64 x 256 / 128 x 128), one warpgroup, K tiles of 64 and ragged M, N, K (K not a multiple
    # of the K tile: TMA's zero fill), bfloat16 and float32 C, and bench/programs' copy with TMA stores,
    # without persistent blocks, without the producer warpgroup, with cp.async copies and in clusters of two
    # (B's tile multicast along M, A's along N; an odd count of block rows and columns)
    ("gemm_fp8", {"M": 256, "N": 256, "K": 256}, {}, ["C"], FP8_PER_TENSOR),
    ("gemm_fp8", {"M": 1000, "N": 1100, "K": 200}, {}, ["C"], FP8_PER_TENSOR),
    ("gemm_fp8", {"M": 1000, "N": 1100, "K": 336, "block_N": 256}, {}, ["C"], FP8_PER_TENSOR),
    ("gemm_fp8", {"M": 520, "N": 300, "K": 640, "block_M": 256}, {}, ["C"], FP8_PER_TENSOR),
    ("gemm_fp8", {"M": 130, "N": 257, "K": 1024, "threads": 128, "block_N": 64}, {}, ["C"], FP8_PER_TENSOR),
    ("gemm_fp8", {"M": 300, "N": 200, "K": 416, "block_K": 64, "num_stages": 4}, {}, ["C"], FP8_PER_TENSOR),
    # one consumer warpgroup and no setmaxnreg: the PTX back end's 8-bit wgmma (--backends ptx,cuda)
    ("gemm_fp8", {"M": 1000, "N": 1100, "K": 200, "threads": 128}, {}, ["C"], FP8_PER_TENSOR),
    ("../tests/gpu/programs/gemm_fp8_f32out", {"M": 300, "N": 500, "K": 208, "threads": 128}, {}, ["C"],
     FP8_PER_TENSOR),
    ("../tests/gpu/programs/gemm_uint8", {"M": 1000, "N": 1100, "K": 208, "threads": 128}, {}, ["C"]),
    ("../tests/gpu/programs/gemm_fp8_bf16out", {"M": 1000, "N": 1100, "K": 336, "block_N": 256}, {}, ["C"],
     FP8_PER_TENSOR),
    ("../tests/gpu/programs/gemm_fp8_f32out", {"M": 300, "N": 500, "K": 208}, {}, ["C"], FP8_PER_TENSOR),
    ("../bench/programs/gemm_fp8_raster", {"M": 1000, "N": 1100, "K": 336, "block_N": 256, "tma_store": "true"}, {},
     ["C"], FP8_PER_TENSOR),
    ("../bench/programs/gemm_fp8_raster", {"M": 1800, "N": 1500, "K": 384, "block_N": 256, "persistent": "false"},
     {}, ["C"], FP8_PER_TENSOR),
    ("../bench/programs/gemm_fp8_raster", {"M": 1000, "N": 1100, "K": 200, "block_N": 256,
                                           "warp_specialize": "false"}, {}, ["C"], FP8_PER_TENSOR),
    ("../bench/programs/gemm_fp8_raster", {"M": 1000, "N": 1100, "K": 200, "use_tma": "false"}, {}, ["C"],
     FP8_PER_TENSOR),
    ("../bench/programs/gemm_fp8_raster", {"M": 1000, "N": 1100, "K": 336, "block_M": 256, "threads": 512}, {}, ["C"],
     FP8_PER_TENSOR),
    ("../bench/programs/gemm_fp8_raster", {"M": 1000, "N": 1100, "K": 336, "block_N": 256, "cluster_y": 2}, {}, ["C"],
     FP8_PER_TENSOR),
    ("../bench/programs/gemm_fp8_raster", {"M": 900, "N": 1100, "K": 200, "cluster_x": 2}, {}, ["C"], FP8_PER_TENSOR),
    # the fastest on the H100: TMA stores of C's tile, with persistent blocks walking 120 tiles (their staging
    # reused from tile to tile), 256 x 128 tiles, and K not a multiple of the K tile
    ("../bench/programs/gemm_fp8_raster", {"M": 1800, "N": 1500, "K": 384, "block_N": 256, "tma_store": "true"}, {},
     ["C"], FP8_PER_TENSOR),
    ("../bench/programs/gemm_fp8_raster", {"M": 1000, "N": 700, "K": 200, "block_M": 256, "tma_store": "true",
                                           "panel": 16}, {}, ["C"], FP8_PER_TENSOR),
    # TMA stores where the rows are whole 16-byte chunks (N = 2048: the cases above have none), 144 tiles, so
    # that 12 blocks of the H100's 132 run two
    ("../bench/programs/gemm_fp8_raster", {"M": 2200, "N": 2048, "K": 256, "block_N": 256, "tma_store": "true"}, {},
     ["C"], FP8_PER_TENSOR),
    ("gemm_fp8_blockscaled", {"M": 256, "N": 256, "K": 256}, {}, ["C"], FP8_SCALED),
    ("gemm_fp8_blockscaled", {"M": 1000, "N": 1100, "K": 200}, {}, ["C"], FP8_SCALED),
    ("gemm_fp8_blockscaled", {"M": 130, "N": 257, "K": 1024}, {}, ["C"], FP8_SCALED),
    ("gemm_fp8_blockscaled", {"M": 1000, "N": 1100, "K": 336, "threads": 128, "block_N": 64}, {}, ["C"], FP8_SCALED),
    # the promotion one iteration late (pass_pipeline.c's lag_gemm) in trips of 4 K blocks: 1, 5, 12 and 14
    # blocks (a trip cut short after each of its iterations, and whole trips), block_K 64 (two per scale block)
    ("gemm_fp8_blockscaled", {"M": 200, "N": 136, "K": 128}, {}, ["C"], FP8_SCALED),
    ("gemm_fp8_blockscaled", {"M": 256, "N": 264, "K": 640}, {}, ["C"], FP8_SCALED),
    ("gemm_fp8_blockscaled", {"M": 300, "N": 200, "K": 1536, "num_stages": 4}, {}, ["C"], FP8_SCALED),
    ("gemm_fp8_blockscaled", {"M": 520, "N": 384, "K": 896, "block_K": 64}, {}, ["C"], FP8_SCALED),
    # the same with the K tiles' count a run-time value (kblocks): trips cut short after each of their
    # iterations, whole trips, and no K tile at all
    ("../tests/gpu/programs/gemm_fp8_blockscaled_dyn_k", {"M": 300, "N": 200, "K": 1024}, {"kblocks": 5}, ["C"], FP8_SCALED),
    ("../tests/gpu/programs/gemm_fp8_blockscaled_dyn_k", {"M": 300, "N": 200, "K": 1024}, {"kblocks": 6}, ["C"], FP8_SCALED),
    ("../tests/gpu/programs/gemm_fp8_blockscaled_dyn_k", {"M": 200, "N": 264, "K": 896, "block_K": 64}, {"kblocks": 7},
     ["C"], FP8_SCALED),
    ("../tests/gpu/programs/gemm_fp8_blockscaled_dyn_k", {"M": 256, "N": 128, "K": 1024}, {"kblocks": 8}, ["C"], FP8_SCALED),
    ("../tests/gpu/programs/gemm_fp8_blockscaled_dyn_k", {"M": 130, "N": 136, "K": 512}, {"kblocks": 0}, ["C"], FP8_SCALED),
    # the same with the scales read before the gemm (bench/gpu_bench.py times both)
    ("../bench/programs/gemm_fp8_blockscaled_early", {"M": 1000, "N": 1100, "K": 200}, {}, ["C"], FP8_SCALED),
    ("../bench/programs/gemm_fp8_blockscaled_early", {"M": 256, "N": 256, "K": 1024}, {}, ["C"], FP8_SCALED),
    ("../bench/programs/gemm_fp8_blockscaled_raster", {"M": 1000, "N": 1100, "K": 640, "panel": 4}, {}, ["C"], FP8_SCALED),
    # the late promotion with its scales loaded an iteration early, on a producer warpgroup (pass_wspec.c) and
    # without one; persistent blocks walking 180 tiles of 3 K blocks each (the stages' mbarrier phases go on
    # from tile to tile), and 9 K blocks (two trips and one more)
    ("../bench/programs/gemm_fp8_blockscaled_raster", {"M": 1000, "N": 1100, "K": 640, "panel": 4,
                                                       "warp_specialize": "false"}, {}, ["C"], FP8_SCALED),
    ("../bench/programs/gemm_fp8_blockscaled_raster", {"M": 1800, "N": 1500, "K": 384, "panel": 4}, {}, ["C"],
     FP8_SCALED),
    ("../bench/programs/gemm_fp8_blockscaled_raster", {"M": 1800, "N": 1500, "K": 384, "persistent": "false"}, {},
     ["C"], FP8_SCALED),
    # its epilogue through TMA stores (persistent blocks reusing the staging from tile to tile)
    ("../bench/programs/gemm_fp8_blockscaled_raster", {"M": 1800, "N": 1500, "K": 384, "tma_store": "true"}, {},
     ["C"], FP8_SCALED),
    ("../bench/programs/gemm_fp8_blockscaled_raster", {"M": 1000, "N": 1100, "K": 640, "panel": 4, "tma_store": "true"},
     {}, ["C"], FP8_SCALED),
    ("../bench/programs/gemm_fp8_blockscaled_raster", {"M": 1000, "N": 1100, "K": 640, "late": "false"}, {}, ["C"],
     FP8_SCALED),
    ("gemm_fp8_blockscaled", {"M": 300, "N": 200, "K": 1152}, {}, ["C"], FP8_SCALED),
    ("gemm_fp8_blockscaled", {"M": 300, "N": 200, "K": 1152, "num_stages": 5}, {}, ["C"], FP8_SCALED),
    ("../tests/gpu/programs/gemm_e5m2", {"M": 1000, "N": 1100, "K": 208}, {}, ["C"], FP8_GEMM),
    ("../tests/gpu/programs/gemm_e5m2", {"M": 130, "N": 257, "K": 336, "block_K": 64}, {}, ["C"], FP8_GEMM),
    # wgmma on sm_90a (issue 11): 4-warp tiles (two m64 instructions per warpgroup, the rows of both in each warp),
    # N up to 256, K tiles of 16, 32, 64 and 128 (32-, 64-, 128-byte swizzle, panels), B N-major and K-major,
    # float16 and bfloat16, M dynamic (a scalar argument), ragged sizes; one wgmma-group stays in flight across K
    # tiles (a K of one tile and of many); N = 130 has no cp.async for B, so its gemm waits for 0
    ("../tests/gpu/programs/gemm_dyn_m", {"N": 256, "K": 160}, {"M": 300}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m", {"N": 136, "K": 72}, {"M": 200}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m", {"N": 130, "K": 64}, {"M": 129}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m", {"N": 192, "K": 96, "block_M": 64, "block_N": 64}, {"M": 100}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m", {"N": 512, "K": 64, "block_N": 256, "threads": 256}, {"M": 257}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m", {"N": 256, "K": 32, "block_M": 64, "block_N": 256}, {"M": 64}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m", {"N": 136, "K": 48, "block_K": 16}, {"M": 130}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m", {"N": 256, "K": 384, "block_K": 128, "threads": 256}, {"M": 256}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m", {"N": 384, "K": 96, "block_M": 256, "threads": 256}, {"M": 300}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m", {"N": 1024, "K": 1024, "block_K": 64}, {"M": 1000}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m_bt", {"N": 256, "K": 160}, {"M": 300}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m_bt", {"N": 200, "K": 96, "block_K": 64}, {"M": 77}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m_bt", {"N": 512, "K": 64, "block_N": 256, "threads": 256}, {"M": 257}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m_bt", {"N": 136, "K": 48, "block_K": 16}, {"M": 130}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m_bt", {"N": 256, "K": 384, "block_K": 128, "threads": 256}, {"M": 256}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m_bf16", {"N": 256, "K": 160}, {"M": 300}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m_bf16", {"N": 512, "K": 64, "block_N": 256, "threads": 256}, {"M": 257}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m_bf16", {"N": 192, "K": 96, "block_M": 64, "block_N": 64}, {"M": 100}, ["C"], GEMM),
    # bfloat16 with more tiles than an H100's persistent launch has blocks (two or more tiles a block)
    ("../tests/gpu/programs/gemm_dyn_m_bf16", {"N": 2048, "K": 136, "block_N": 256, "block_K": 64, "threads": 256},
     {"M": 2500}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m_bf16", {"N": 2048, "K": 136, "block_N": 256, "block_K": 64, "threads": 256,
                                               "tma_store": "true"}, {"M": 2500}, ["C"], GEMM),
    # bench/programs/gemm_raster_bf16 with TMA stores, K of 5 tiles (more than the 4 panels of a 256-column
    # tile), two or more tiles a block, ragged M; and K of one tile, 512 tiles (3 or 4 a block on 132 SMs)
    ("../bench/programs/gemm_raster_bf16", {"M": 3000, "N": 2048, "K": 264, "block_N": 256, "block_K": 64,
                                            "threads": 256, "tma_store": "true"}, {}, ["C"], GEMM),
    ("../bench/programs/gemm_raster_bf16", {"M": 4096, "N": 4096, "K": 64, "block_N": 256, "block_K": 64,
                                            "threads": 256, "tma_store": "true"}, {}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m_bf16_bt", {"N": 256, "K": 160}, {"M": 300}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m_bf16_bt", {"N": 136, "K": 48, "block_K": 16}, {"M": 130}, ["C"], GEMM),
    ("../tests/gpu/programs/gemm_dyn_m_bf16_bt", {"N": 256, "K": 384, "block_K": 128, "threads": 256}, {"M": 256},
     ["C"], GEMM),
    ("dequant_gemm", {"M": 256, "N": 256, "K": 256}, {}, ["Ct"], DEQ),
    ("dequant_gemm", {"M": 136, "N": 200, "K": 72}, {}, ["Ct"], DEQ),
    ("dequant_gemm_threads", {"M": 256, "N": 256, "K": 256}, {}, ["C"], DEQ),
    # the same with B declared uint4 (issue 12): K = 74 copies the uint4 tiles a byte at a time
    ("dequant_gemm_uint4", {"M": 256, "N": 256, "K": 256}, {}, ["Ct"], DEQ),
    ("dequant_gemm_uint4", {"M": 136, "N": 200, "K": 74}, {}, ["Ct"], DEQ),
    ("dequant_gemm_threads_uint4", {"M": 256, "N": 256, "K": 256}, {}, ["C"], DEQ),
    ("dequant_gemm_threads_uint4", {"M": 136, "N": 200, "K": 74}, {}, ["C"], DEQ),
    # W4A16: uint4 weights, float16 scales per 128 (or 64) weights along K; ragged M, N, K; M = 1
    ("gemm_w4a16", {"M": 256, "N": 256, "K": 512}, {}, ["C"], W4A16),
    # int8 weights: B by TMA, a producer warpgroup, the dequantized tile rotating through two copies; 144
    # persistent tiles
    ("../tests/gpu/programs/gemm_w8a16", {"M": 256, "N": 256, "K": 1024}, {}, ["C"], W4A16),
    ("../tests/gpu/programs/gemm_w8a16", {"M": 1000, "N": 2200, "K": 336}, {}, ["C"], W4A16),
    ("gemm_w4a16", {"M": 200, "N": 136, "K": 202}, {}, ["C"], W4A16),
    ("gemm_w4a16", {"M": 1, "N": 512, "K": 1024}, {}, ["C"], W4A16),
    ("gemm_w4a16", {"M": 100, "N": 300, "K": 384, "group_size": 64}, {}, ["C"], W4A16),
    # the small-M tiles of bench/gpu_bench.py: mma.sync with 16 rows, wgmma with 64; K tiles of 128
    ("gemm_w4a16", {"M": 1, "N": 512, "K": 1024, "block_M": 16, "block_N": 64, "block_K": 128, "threads": 128,
                    "num_stages": 4}, {}, ["C"], W4A16),
    ("gemm_w4a16", {"M": 70, "N": 200, "K": 640, "block_M": 64, "block_N": 64, "block_K": 128, "threads": 128,
                    "num_stages": 4}, {}, ["C"], W4A16),
    # 256 rows on two warpgroups (each dequantized tile serves them all), ragged M, N and K
    ("gemm_w4a16", {"M": 300, "N": 200, "K": 640, "block_M": 256, "threads": 256}, {}, ["C"], W4A16),
    # small M with the block's scales copied once (M = 1 on mma.sync, 64 rows on wgmma with the dequantized
    # tile rotating, ragged N and K, a scale group of 64)
    ("gemm_w4a16_narrow", {"M": 1, "N": 512, "K": 1024}, {}, ["C"], W4A16),
    ("gemm_w4a16_narrow", {"M": 13, "N": 200, "K": 650}, {}, ["C"], W4A16),
    ("gemm_w4a16_narrow", {"M": 64, "N": 256, "K": 1024, "block_M": 64}, {}, ["C"], W4A16),
    ("gemm_w4a16_narrow", {"M": 100, "N": 136, "K": 384, "block_M": 64, "block_K": 64, "group_size": 64}, {}, ["C"],
     W4A16),
    # K tiles spanning several scale groups (the scale read per 8 elements of j), ragged K; 1 and 2 warps
    ("gemm_w4a16_narrow", {"M": 5, "N": 256, "K": 1030, "block_K": 256, "block_N": 32, "threads": 64}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_narrow", {"M": 3, "N": 160, "K": 512, "block_K": 256, "block_N": 16, "threads": 32,
                           "group_size": 64}, {}, ["C"], W4A16),
    ("gemm_w4a16_narrow", {"M": 64, "N": 128, "K": 768, "block_M": 64, "block_N": 32, "block_K": 256,
                           "num_stages": 3}, {}, ["C"], W4A16),
    # split along K, then the runs' float32 sums added by a second kernel: ragged N and K, runs wholly past K
    # (split_k 8 of 9 K tiles), runs starting inside a scale group (group_size 80), 64 rows on wgmma
    ("gemm_w4a16_splitk", {"M": 1, "N": 512, "K": 1024}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk", {"M": 13, "N": 200, "K": 650, "split_k": 3}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk", {"M": 3, "N": 160, "K": 1030, "split_k": 8}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk", {"M": 5, "N": 136, "K": 650, "block_K": 64, "group_size": 80, "split_k": 3}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_splitk", {"M": 64, "N": 256, "K": 1024, "block_M": 64, "num_stages": 2}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk", {"M": 20, "N": 96, "K": 768, "block_N": 32, "threads": 64, "block_K": 256,
                           "num_stages": 3, "split_k": 2}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk", {"M": 2, "N": 300, "K": 1000, "block_N": 128, "block_K": 64, "split_k": 8}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_splitk", {"M": 7, "N": 300, "K": 1000, "block_N": 128, "threads": 256, "num_stages": 3,
                           "split_k": 8}, {}, ["C"], W4A16),
    # the same computing C^T (the dequantized weights wgmma's 64-row operand, the activations 8 to 64 columns),
    # the second kernel turning the sums through shared memory: ragged M, N and K, runs past K and inside a group
    ("gemm_w4a16_splitk_t", {"M": 1, "N": 512, "K": 1024}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_t", {"M": 13, "N": 200, "K": 650, "block_M": 16, "split_k": 3}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_t", {"M": 3, "N": 160, "K": 1030, "block_M": 8, "split_k": 8}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_t", {"M": 5, "N": 136, "K": 650, "block_K": 64, "group_size": 80, "split_k": 3}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_splitk_t", {"M": 64, "N": 256, "K": 1024, "block_M": 64, "block_K": 64, "num_stages": 4}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_splitk_t", {"M": 20, "N": 300, "K": 1000, "block_M": 32, "block_N": 128, "block_K": 64,
                             "num_stages": 4, "split_k": 8}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_t", {"M": 40, "N": 300, "K": 1000, "block_M": 64, "block_N": 128, "threads": 256,
                             "block_K": 64, "num_stages": 3, "split_k": 4}, {}, ["C"], W4A16),
    # the same with the weights stored tile by tile (a block's K tile one contiguous copy): ragged N, K and M, K
    # runs that start inside a scale group, K tiles past K in the last run, 4 KB and 8 KB tiles
    ("gemm_w4a16_splitk_tiled", {"M": 1, "N": 512, "K": 1024}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_tiled", {"M": 13, "N": 200, "K": 650, "block_M": 16, "split_k": 3}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_tiled", {"M": 3, "N": 160, "K": 1030, "block_M": 8, "split_k": 8}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_tiled", {"M": 5, "N": 136, "K": 650, "block_K": 64, "group_size": 80, "split_k": 3}, {},
     ["C"], W4A16),
    ("gemm_w4a16_splitk_tiled", {"M": 64, "N": 256, "K": 1024, "block_M": 64, "num_stages": 3, "split_k": 3}, {},
     ["C"], W4A16),
    ("gemm_w4a16_splitk_tiled", {"M": 40, "N": 300, "K": 1000, "block_M": 64, "block_N": 128, "threads": 256,
                                 "block_K": 64, "num_stages": 3, "split_k": 4}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_tiled", {"M": 16, "N": 192, "K": 2048, "block_M": 16, "split_k": 3, "ws": False}, {}, ["C"],
     W4A16),
    # in one kernel, the K loop in slices of the block's threads (proto/tile-ir-v1.md 5.7), their sums added in
    # shared memory (K rows of whole 16 bytes, so that every copy is the producer's): ragged N, K and M, fewer K tiles than slices, 2 to 4 slices, scale groups across K tiles,
    # two warpgroups a slice
    ("gemm_w4a16_sliced", {"M": 1, "N": 512, "K": 1024}, {}, ["C"], W4A16),
    ("gemm_w4a16_sliced", {"M": 13, "N": 200, "K": 648, "block_M": 16}, {}, ["C"], W4A16),
    ("gemm_w4a16_sliced", {"M": 3, "N": 160, "K": 1032, "block_M": 8, "slices": 2}, {}, ["C"], W4A16),
    ("gemm_w4a16_sliced", {"M": 5, "N": 136, "K": 656, "block_K": 64, "group_size": 80, "slices": 4, "num_stages": 8}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_sliced", {"M": 8, "N": 64, "K": 96, "block_M": 8}, {}, ["C"], W4A16),
    ("gemm_w4a16_sliced", {"M": 64, "N": 256, "K": 1024, "block_M": 64, "num_stages": 9}, {}, ["C"], W4A16),
    ("gemm_w4a16_sliced", {"M": 40, "N": 296, "K": 1000, "block_M": 64, "block_N": 128, "threads": 256,
                           "block_K": 64, "num_stages": 4, "slices": 2}, {}, ["C"], W4A16),
    # the same with the weights interleaved as the threads read them (tl_pair_map: each thread's pairs one 16-byte
    # load a row at block_K 128, 8 bytes at 64; each pair 16 bits apart in a word, no byte permute)
    ("gemm_w4a16_il", {"M": 1, "N": 512, "K": 1024}, {}, ["C"], W4A16_IL),
    ("gemm_w4a16_il", {"M": 13, "N": 200, "K": 648, "block_M": 16}, {}, ["C"], W4A16_IL),
    ("gemm_w4a16_il", {"M": 5, "N": 136, "K": 656, "block_K": 64, "group_size": 80, "slices": 4, "num_stages": 8}, {}, ["C"],
     W4A16_IL),
    ("gemm_w4a16_il", {"M": 64, "N": 256, "K": 1024, "block_M": 64, "num_stages": 9}, {}, ["C"], W4A16_IL),
    ("gemm_w4a16_il", {"M": 40, "N": 296, "K": 1000, "block_M": 64, "block_N": 128, "threads": 256,
                       "block_K": 64, "num_stages": 4, "slices": 2}, {}, ["C"], W4A16_IL),
    ("gemm_w4a16_il", {"M": 24, "N": 192, "K": 1280, "block_M": 32, "block_K": 256, "num_stages": 4, "slices": 2}, {},
     ["C"], W4A16_IL),
    # on mma.sync (sm_90 without wgmma: A from registers, the map proven for every warp of the fragment's layout)
    ("gemm_w4a16_il", {"M": 13, "N": 200, "K": 648, "block_M": 16}, {}, ["C"], dict(W4A16_IL, target="sm_90")),
    ("gemm_w4a16_il", {"M": 40, "N": 296, "K": 1000, "block_M": 64, "block_N": 128, "threads": 256,
                       "block_K": 64, "num_stages": 4}, {}, ["C"], dict(W4A16_IL, target="sm_90")),
    # the pair maps' byte form (each pair in one byte, selected by prmt) and signed codes (int4, no offset)
    ("../tests/gpu/programs/gemm_il_bytes", {"M": 13, "N": 200, "K": 648, "block_M": 16}, {}, ["C"], W4A16_IL_BYTES),
    ("../tests/gpu/programs/gemm_il_bytes", {"M": 40, "N": 296, "K": 1000, "block_M": 64, "block_N": 128,
                                             "threads": 256, "block_K": 64, "num_stages": 4, "slices": 2}, {}, ["C"],
     W4A16_IL_BYTES),
    ("../tests/gpu/programs/gemm_il_int4", {"M": 13, "N": 200, "K": 648, "block_M": 16}, {}, ["C"], W4A16_IL_INT4),
    ("../tests/gpu/programs/gemm_il_int4", {"M": 64, "N": 256, "K": 1024, "block_M": 64, "num_stages": 9}, {}, ["C"],
     W4A16_IL_INT4),
    # the two in one kernel, the last block of each tile adding the runs' sums (a zeroed counter workspace, reset
    # by that block: tlc run fails a launch that leaves it nonzero): the same ragged cases, one run, runs past K
    ("gemm_w4a16_splitk_last", {"M": 1, "N": 512, "K": 1024}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_last", {"M": 13, "N": 200, "K": 650, "split_k": 3}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_last", {"M": 3, "N": 160, "K": 1030, "split_k": 8}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_last", {"M": 5, "N": 136, "K": 650, "block_K": 64, "group_size": 80, "split_k": 3}, {},
     ["C"], W4A16),
    ("gemm_w4a16_splitk_last", {"M": 64, "N": 256, "K": 1024, "block_M": 64, "num_stages": 2, "split_k": 1}, {},
     ["C"], W4A16),
    ("gemm_w4a16_splitk_last", {"M": 7, "N": 300, "K": 1000, "block_N": 128, "block_K": 64, "num_stages": 3,
                                "split_k": 8}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_t_last", {"M": 1, "N": 512, "K": 1024}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_t_last", {"M": 13, "N": 200, "K": 650, "block_M": 16, "split_k": 3}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_t_last", {"M": 3, "N": 160, "K": 1030, "block_M": 8, "split_k": 8}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_t_last", {"M": 5, "N": 136, "K": 650, "block_K": 64, "group_size": 80, "split_k": 3}, {},
     ["C"], W4A16),
    ("gemm_w4a16_splitk_t_last", {"M": 20, "N": 300, "K": 1000, "block_M": 32, "block_N": 128, "block_K": 64,
                                  "num_stages": 4, "split_k": 8}, {}, ["C"], W4A16),
    ("gemm_w4a16_splitk_t_last", {"M": 40, "N": 300, "K": 1000, "block_M": 64, "block_N": 128, "threads": 256,
                                  "block_K": 64, "num_stages": 3, "split_k": 4}, {}, ["C"], W4A16),
    # C^T with the dequantized weights wgmma's A from registers, each thread dequantizing its own pairs: ragged
    # M, N and K, a scale group of 64, 128 columns, one warpgroup, K tiles of 128, 256 rows (two m64 row tiles
    # per warpgroup, interleaved)
    ("gemm_w4a16_t", {"M": 256, "N": 256, "K": 512}, {}, ["C"], W4A16),
    ("gemm_w4a16_t", {"M": 300, "N": 200, "K": 640, "block_M": 256, "block_N": 128, "threads": 256}, {}, ["C"], W4A16),
    ("gemm_w4a16_t", {"M": 70, "N": 136, "K": 202}, {}, ["C"], W4A16),
    ("gemm_w4a16_t", {"M": 100, "N": 300, "K": 384, "group_size": 64, "block_N": 128, "threads": 256}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_t", {"M": 200, "N": 256, "K": 512, "block_N": 128, "threads": 256}, {}, ["C"], W4A16),
    ("gemm_w4a16_t", {"M": 130, "N": 200, "K": 384, "block_M": 256}, {}, ["C"], W4A16),
    ("gemm_w4a16_t", {"M": 256, "N": 256, "K": 1024, "block_N": 128, "threads": 256, "block_K": 128}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_t", {"M": 256, "N": 520, "K": 512, "block_N": 256, "threads": 256}, {}, ["C"], W4A16),
    # K tiles 7 and 9 (the last even and odd: the loop's body for each parity, emit_cuda.c's held_a); clusters of
    # 2 along N with the activations multicast, and 3 blocks along N (not a multiple: run without)
    ("gemm_w4a16_t", {"M": 136, "N": 256, "K": 448, "block_N": 128, "threads": 256}, {}, ["C"], W4A16),
    ("gemm_w4a16_t", {"M": 136, "N": 128, "K": 576, "block_M": 256, "block_N": 128, "threads": 256}, {}, ["C"], W4A16),
    ("gemm_w4a16_t", {"M": 300, "N": 512, "K": 640, "block_M": 256, "block_N": 128, "threads": 256, "cluster_n": 2}, {},
     ["C"], W4A16),
    ("gemm_w4a16_t", {"M": 200, "N": 300, "K": 384, "block_N": 128, "threads": 256, "cluster_n": 2}, {}, ["C"], W4A16),
    # the uint4 weights by TMA (their bytes), so a producer warpgroup and persistent blocks: more tiles than an
    # H100's persistent launch starts blocks (each block walks two or more, the scales' copy through registers
    # and the stages' phases going on from tile to tile), ragged M, N and K, the M = 4096 tile and the default
    ("gemm_w4a16_t", {"M": 1300, "N": 3000, "K": 224, "block_M": 256, "block_N": 128, "threads": 256}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_t", {"M": 1100, "N": 2000, "K": 224}, {}, ["C"], W4A16),
    ("gemm_w4a16", {"M": 1000, "N": 2200, "K": 224}, {}, ["C"], W4A16),
    # the scales one row per group: a bulk tensor copy where N is a multiple of 8 (no block barrier in the loop),
    # else through registers; ragged M, N and K; K tiles 7 and 9; the M = 4096 tile with more tiles than blocks
    ("gemm_w4a16_t_gn", {"M": 256, "N": 256, "K": 512}, {}, ["C"], W4A16),
    ("gemm_w4a16_t_gn", {"M": 300, "N": 200, "K": 640, "block_M": 256, "block_N": 128, "threads": 256}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_t_gn", {"M": 70, "N": 300, "K": 384, "group_size": 64, "block_N": 128, "threads": 256}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_t_gn", {"M": 136, "N": 256, "K": 448, "block_N": 128, "threads": 256}, {}, ["C"], W4A16),
    ("gemm_w4a16_t_gn", {"M": 136, "N": 136, "K": 576, "block_M": 256, "block_N": 128, "threads": 256}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_t_gn", {"M": 1300, "N": 3000, "K": 224, "block_M": 256, "block_N": 128, "threads": 256}, {}, ["C"],
     W4A16),
    ("gemm_w4a16_t_gn", {"M": 1100, "N": 2000, "K": 224}, {}, ["C"], W4A16),
    ("gemm_w4a16_t_gn", {"M": 200, "N": 512, "K": 384, "block_N": 128, "threads": 256, "cluster_n": 2}, {}, ["C"],
     W4A16),
    ("tilus_matmul", {"n_size": 256, "k_size": 256}, {"m_size": 1}, ["c"], MATMUL),
    ("tilus_matmul", {"n_size": 256, "k_size": 256}, {"m_size": 7}, ["c"], MATMUL),
    ("tilus_matmul", {"n_size": 256, "k_size": 256}, {"m_size": 300}, ["c"], MATMUL),
    ("tilus_matmul", {"n_size": 256, "k_size": 256}, {"m_size": 4096}, ["c"], MATMUL),
    ("flash_attention", dict(FA, seq_len=256, dim=128), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=256, dim=128, is_causal="true"), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=100, dim=64, block_M=64, block_N=64, threads=128), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=100, dim=64, block_M=64, block_N=64, threads=128, is_causal="true"), {},
     ["Output"], FLASH),
    # P.V on wgmma with A (P) from registers (issue 11): head dim 64 (N = 64) with 128 x 128 tiles, 64-wide K
    # tiles (K of P.V = 64), a ragged causal one, 4 warps of 64 rows, bfloat16 (P rounded to bfloat16); dim 256
    # with 64-wide K tiles keeps P.V on mma.sync (P cannot stay in registers)
    ("flash_attention", dict(FA, seq_len=300, dim=64), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=256, dim=128, block_N=64), {}, ["Output"], FLASH),
    # more tiles than the persistent launch starts blocks on an H100 (132 SMs, one block each): no barrier
    # after the warp-specialized loop, one between tiles (pass_barrier.c)
    ("flash_attention", dict(FA, heads=70, seq_len=256, dim=64), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=300, dim=128, block_N=64, is_causal="true"), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=200, dim=128, block_M=64, threads=128, is_causal="true"), {}, ["Output"],
     FLASH),
    ("flash_attention", dict(FA, seq_len=256, dim=256, block_N=64), {}, ["Output"], FLASH),
    # warpgroups taking turns at their gemms (pass_wspec.c's ping-pong) with three of them, ragged
    ("flash_attention", dict(FA, seq_len=300, dim=64, block_M=192, block_N=64, threads=384), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=333, dim=64, block_M=192, block_N=64, threads=384, is_causal="true"), {},
     ["Output"], FLASH),
    # P V issued one iteration late (pass_overlap.c) in the warp-specialized loop: stages freed one iteration on
    ("flash_attention", dict(FA, seq_len=300, dim=64, overlap="true"), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=333, dim=128, overlap="true", is_causal="true"), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=300, dim=64, block_M=192, block_N=64, threads=384, overlap="true",
                             is_causal="true"), {}, ["Output"], FLASH),
    # three warpgroups of 64 x 128 at head dim 64: the producer on pass_wspec.c's tight register budget
    ("flash_attention", dict(FA, seq_len=300, dim=64, block_M=192, threads=384), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=333, dim=64, block_M=192, threads=384, overlap="true", is_causal="true"), {},
     ["Output"], FLASH),
    # the defaults at head dim 64, causal (192 x 128 on three warpgroups: blocks of 192 rows whose every row is
    # masked in one K block, which needs the running maximum), and long enough at both head dims that the mask
    # runs only on the K blocks crossing the diagonal
    ("flash_attention", dict(FA, seq_len=333, dim=64, is_causal="true"), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=777, dim=64, is_causal="true"), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=700, dim=128, is_causal="true"), {}, ["Output"], FLASH),
    ("flash_attention", dict(FA, seq_len=640, dim=64, block_N=64, is_causal="true"), {}, ["Output"], FLASH),
    # a persistent causal kernel with few blocks started (TL_PERSISTENT_BLOCKS): the tiles walked x slowest in
    # groups of (y, z) pairs (emit_cuda.c's open_tiles): 4 x-blocks on 8 blocks, groups of 4 and 6 pairs; 6
    # x-blocks (ragged) on 6 blocks, five groups of 2; on 5 blocks, two groups of 5
    ("flash_attention", dict(FA, batch=2, heads=5, seq_len=256, dim=64, block_M=64, block_N=64, threads=128,
                             is_causal="true"), {}, ["Output"], dict(FLASH, env={"TL_PERSISTENT_BLOCKS": "8"})),
    ("flash_attention", dict(FA, batch=2, heads=5, seq_len=350, dim=64, block_M=64, block_N=64, threads=128,
                             is_causal="true"), {}, ["Output"], dict(FLASH, env={"TL_PERSISTENT_BLOCKS": "6"})),
    ("flash_attention", dict(FA, batch=2, heads=5, seq_len=350, dim=64, block_M=64, block_N=64, threads=128,
                             is_causal="true"), {}, ["Output"], dict(FLASH, env={"TL_PERSISTENT_BLOCKS": "5"})),
    ("../tests/gpu/programs/flash_attention_bf16", dict(FA, seq_len=256, dim=128), {}, ["Output"], FLASH_BF16),
    ("../tests/gpu/programs/flash_attention_bf16", dict(FA, seq_len=300, dim=64, is_causal="true"), {}, ["Output"],
     FLASH_BF16),
    # three stages asked, two fit compute_80's shared memory: the loop must rotate through two
    ("flash_attention", dict(FA, seq_len=512, dim=128, num_stages=3), {}, ["Output"], dict(FLASH, target="compute_80")),
]

# top-k (TileLang's example_topk.py, issue 10) and its relatives: tile
# operators inside serial loops, int32 fragment reductions, if_then_else
# rewrites of fragments, a column of the outputs written per iteration; M
# dynamic, ragged sizes M x N.
TOPK, TOPK_OUT = "../tests/gpu/programs/topk", ["topk_gates", "topk_indices"]
INTR, INTR_OUT = "../tests/gpu/programs/serial_int_reduce", ["row_max", "row_min", "row_sum", "run_sum"]
CHUNK, CHUNK_OUT = "../tests/gpu/programs/serial_chunk_reduce", ["run_max", "run_min"]
RAGGED = [(64, 128), (100, 64), (1, 7), (300, 33)]
CASES += [(TOPK, {"N": n}, {"M": m}, TOPK_OUT, {"ref": topk_ref}) for m, n in RAGGED]
CASES += [
    (TOPK, {"N": 128, "blk_m": 128, "threads": 256}, {"M": 320}, TOPK_OUT, {"ref": topk_ref}),
    (TOPK, {"N": 64, "threads": 32}, {"M": 100}, TOPK_OUT, {"ref": topk_ref}),
    (TOPK, {"N": 128}, {"M": 300}, TOPK_OUT, {"ref": topk_ref, "gen": "ties"}),
    (TOPK, {"N": 16, "topk": 20}, {"M": 100}, TOPK_OUT, {"ref": topk_ref}),
]
CASES += [(INTR, {"N": n}, {"M": m}, INTR_OUT, {"ref": serial_int_reduce_ref}) for m, n in RAGGED]
CASES += [(INTR, {"N": 64}, {"M": 100}, INTR_OUT, {"ref": serial_int_reduce_ref, "gen": "wide"}),
          (INTR, {"N": 128, "threads": 256}, {"M": 100}, INTR_OUT, {"ref": serial_int_reduce_ref})]
CASES += [(CHUNK, {"N": n}, {"M": m}, CHUNK_OUT, {"ref": serial_chunk_reduce_ref}) for m, n in RAGGED]

# the golden programs of tests/golden/ (their CUDA is compared byte for byte
# in test_golden.c; here they run): a pipelined float16 gemm, row max / sum
# / prefix sums (float32 sums of `cols` terms), a transpose through shared
# memory (a copy), and alpha * x + y with relu (a sum of 2 terms; alpha > 0)
GOLD = "../tests/golden/"
CASES += [
    (GOLD + "gemm_small", {}, {}, ["C"], GEMM),
    (GOLD + "gemm_small", {"M": 128, "N": 192, "K": 512}, {}, ["C"], GEMM),
    (GOLD + "row_stats", {}, {}, ["row_max", "row_sum", "prefix"], {"acc": ("cols", ["X"], 0.0)}),
    (GOLD + "thread_transpose", {}, {}, ["dst"]),
    (GOLD + "scale_add", {}, {"n": 1000, "alpha": 1.5, "relu": "true"}, ["out"], {"acc": ("2", ["x", "y"], 0.0)}),
    (GOLD + "scale_add", {}, {"n": 256, "alpha": 0.25, "relu": "false"}, ["out"], {"acc": ("2", ["x", "y"], 0.0)}),
    # packed int4 / int2 dequantized 8 at a time on float16 pairs (pass_place.c: dequant_loop); every
    # operation rounds to float16 on both sides, so the outputs agree exactly
    (GOLD + "dequant_pairs", {}, {"m": 100}, ["O1", "O2", "O3", "O4"]),
    (GOLD + "dequant_pairs", {}, {"m": 16}, ["O1", "O2", "O3", "O4"]),
]

# the packed sub-byte dtypes and float8_e8m0 (issue 12): element loads and
# stores, tiles of bytes (16- and 4-byte vectors: N = 256, 200, 72), M
# dynamic and ragged; every output exact, and the interpreter's equal to
# NumPy's from the codes
PACKED, PACKED_OUT = "../tests/gpu/programs/packed_types", ["O", "Wc", "P", "Q", "R", "E", "Z", "G"]
CASES += [(PACKED, {"N": n}, {"M": m}, PACKED_OUT, {"ref": packed_types_ref})
          for m, n in [(64, 256), (100, 200), (1, 64), (7, 72)]]
# a parallel loop over a blocked fragment reading a tensor 4 elements at a time (pass_place.c's vec_read_of):
# rows of 132 and 256 as 16-byte vectors, 130 one at a time; M and N ragged; every output exact
CASES += [("../tests/gpu/programs/blocked_vec_read", {"M": m, "N": n}, {}, ["Y", "G"])
          for m, n in [(50, 132), (64, 256), (7, 130)]]
# tiles of int4, uint2, uint1 and float4_e2m1 prefetched by a pipelined loop: on sm_90 bulk tensor copies of
# their bytes, by a producer warpgroup; ragged rows, the last K tile half past K (read as zero), 3 stages
CASES += [("../tests/gpu/programs/packed_tma", {"K": 640}, {"M": 100}, ["O", "R"]),
          ("../tests/gpu/programs/packed_tma", {"K": 384, "block_K": 256, "num_stages": 3}, {"M": 33}, ["O", "R"])]


# the math functions of issue 13 (erf .. trunc, clamp, isnan, isinf): n
# dynamic and ragged; every output against NumPy (exactly, in the
# interpreter) and against the interpreter within 2 ulps (float32 math
# stored as float16, float64 math as float32)
MATH_OUT = ["F16", "F32", "C", "I"]
CASES += [("../tests/gpu/programs/math_fns", {}, {"n": n}, MATH_OUT, {"ref": math_fns_ref}) for n in (1, 300, 4096)]

# element atomics (issue 13): add, max, min on global and shared elements
# inside a parallel loop and in thread-level code, across blocks; n ragged
ATOM_OUT = ["H", "Mx", "Mn", "S64", "Hs", "F16", "P", "T"]
CASES += [("../tests/gpu/programs/atomics", {}, {"n": n}, ATOM_OUT, {"ref": atomics_ref}) for n in (1, 600, 5000)]

# float16 and bfloat16 atomic max and min (issue 13): neighbours race on the
# halves of one word, across blocks and in shared memory; n ragged
A16_OUT = ["G16", "R16", "S16", "O16", "OB"]
CASES += [("../tests/gpu/programs/atomics16", {}, {"n": n}, A16_OUT, {"ref": atomics16_ref}) for n in (1, 600, 5000)]

# bitwise reductions, cummax and cummin (issue 13): M dynamic and ragged
SCANS_OUT = ["BA", "BO", "BX", "CO", "CM", "CN"]
CASES += [("../tests/gpu/programs/scans", {}, {"M": m}, SCANS_OUT, {"ref": scans_ref}) for m in (1, 100, 300)]
CASES += [("../tests/gpu/programs/scans", {"N": 128, "threads": 256}, {"M": 77}, SCANS_OUT, {"ref": scans_ref})]

# atomics from an mma-rows fragment (the same rows in 4 lanes): once per row;
# sums of 32 * 64 products
CASES += [("../tests/gpu/programs/atomic_rows", {}, {}, ["G", "G2"], {"acc": ("2048", ["A", "B"], 0.0)})]

# if on fragment and local values (issue 13): per element of a gemm's
# accumulator (sums of K products), of a copied and a reduced fragment, and
# per thread on an alloc_local and an alloc_var; M dynamic and ragged
CASES += [("../tests/gpu/programs/if_values", {}, {"M": m}, ["C", "R", "L", "L2"],
           dict(GEMM, ref=if_values_ref)) for m in (1, 100, 300)]

# views and reshapes (issue 13): an int8 tensor as int32, uint8 as uint4, a
# 1-D tensor as 2-D and 3-D (copied by cp.async in a pipelined loop), a
# shared tile through a 1-D and a uint32 view; n ragged.  S sums 64 terms
CASES += [("../tests/gpu/programs/views", {}, {"n": n}, ["Y", "Z", "S"], {"ref": views_ref, "acc": ("64", ["F"], 0.0)})
          for n in (1, 37, 300)]

# the direct PTX back end (compiler/emit_ptx.c, issue 10): programs of its subset, ragged sizes; with
# --backends ptx,cuda each runs on both back ends against the interpreter
CASES += [("../tests/gpu/programs/ptx_elementwise", {}, {"M": m, "N": n, "alpha": al, "flag": fl}, ["O", "P", "Q", "H"])
          for m, n, al, fl in ((1, 1, 1.5, "true"), (37, 100, -0.75, "false"), (300, 1000, 2.0, "true"))]
CASES += [("../tests/gpu/programs/ptx_guard", {}, {"n": n, "off": 0}, ["y", "z"]) for n in (1, 199, 201, 5000)]

# cluster_reduce (sm_90 and later): clusters of 2 x 2, 4 x 1, 1 x 2 and of one block (nothing to combine); int32
# sums over the whole int32 range, so they wrap
CRED_OUT = ["Ysum", "Ymax", "Ymin", "Yi", "Ysh"]
CASES += [("../tests/gpu/programs/cluster_reduce", d, {}, CRED_OUT, {"ref": cluster_reduce_ref, "gen": "wide",
                                                                       "target": "sm_90a"})
          for d in ({}, {"cx": 4, "cy": 1, "gx": 8}, {"cx": 1, "cy": 2, "gy": 4, "threads": 256}, {"cx": 1, "cy": 1})]
# gemm_w4a16_splitk_t's program with the runs of a tile the blocks of one thread-block cluster (sm_90 and later),
# added by cluster_reduce into the block of rank 0, which stores C: ragged M, N and K, runs past K and inside a
# group, clusters of 1 to 8 blocks, with and without the producer warpgroup
CASES += [("../tests/gpu/programs/gemm_w4a16_cluster", d, {}, ["C"], W4A16C)
          for d in ({"M": 1, "N": 512, "K": 1024}, {"M": 13, "N": 200, "K": 650, "block_M": 16, "split_k": 3},
                    {"M": 3, "N": 160, "K": 1030, "block_M": 8, "split_k": 8},
                    {"M": 5, "N": 136, "K": 650, "block_K": 64, "group_size": 80, "split_k": 3},
                    {"M": 64, "N": 256, "K": 1024, "block_M": 64, "block_K": 64, "num_stages": 4},
                    {"M": 40, "N": 300, "K": 1000, "block_M": 64, "block_N": 128, "threads": 256, "block_K": 64,
                     "num_stages": 3, "split_k": 2},
                    {"M": 20, "N": 200, "K": 512, "split_k": 1, "ws": False})]
# integer // and % by powers of two (a shift and a mask) and, of dividends that cannot be negative, by other
# constants (C's / and %), against the interpreter exactly; negative dividends, n ragged
CASES += [("../tests/gpu/programs/int_divmod", {}, {"n": n}, ["Q", "R", "Q64", "R64", "U"], {"ref": int_divmod_ref})
          for n in (1, 300, 5000)]

# print and device_assert on the GPU: the assertion holds, one line is printed
# (NVIDIA: this script runs CUDA only; AMD targets compile print with buffered printf)
CASES += [("../tests/gpu/nvidia/print_assert", {}, {"n": n}, ["Y"]) for n in (1, 1000)]


def constants(prog, defs):
    """The program's literal constants with the -D overrides applied."""
    c = {k: v for k, v in json.load(open(prog)).get("constants", {}).items() if not isinstance(v, str)}
    for k, v in defs.items():
        c[k] = {"true": True, "false": False}.get(v, v) if isinstance(v, str) else v
    return c


def make_input(rng, dt, shape, gen):
    if dt in PACKED_IN:
        lo, hi, t = PACKED_IN[dt]
        return rng.integers(lo, hi, size=shape).astype(t)
    if dt == "int8":
        return rng.integers(-128, 128, size=shape, dtype=np.int8)
    if dt.startswith("int") or dt.startswith("uint"):
        info = np.iinfo(np.dtype(dt))
        lo, hi = (info.min, int(info.max) + 1) if gen == "wide" else (max(-1000, info.min), 1000)
        return rng.integers(lo, hi, size=shape, dtype=np.int64).astype(dt)
    if gen == "ties":
        x = rng.integers(-4, 4, size=shape).astype(np.float64)
    else:
        x = rng.standard_normal(shape)
        x = np.where(np.abs(x) < 1e-3, 0.5, x)  # never zeros
    return x.astype(np.float16 if dt == "float16" else np.float32)


def run(cmd, timeout, env=None):
    """Runs cmd (with env added to the environment) for at most timeout
    seconds; a command that runs past it is killed with all its children
    (its own process group: compute-sanitizer starts tlc as a child) and
    reads as status 124 with a message saying so."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env=dict(os.environ, **env) if env else None)
    try:
        out, err = p.communicate(timeout=timeout)
        r = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        r = subprocess.CompletedProcess(cmd, 124, out, f"timed out after {timeout:g} s (killed): {' '.join(cmd[:3])}")
    return r, time.time() - t0


def device_target():
    """The target `tlc run --device cuda` builds for on this machine's GPU (sm_90a on
    compute capability 9.0, else sm_XY), or None where nvidia-smi cannot say."""
    try:
        cc = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                            capture_output=True, text=True, timeout=30).stdout.split()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
    t = "sm_" + cc.replace(".", "")
    return t + "a" if t == "sm_90" else t


def ptx_meta(a, prog, target, dflags):
    """The metadata of a compile with --backend ptx for the target the device side runs
    (whether the PTX back end takes the case there: the lowering, so the subset, depends
    on it; asked of the back end itself, so that a kernel mode auto leaves to the CUDA one
    for speed is still compared), or {"backend_why_not_ptx": its error} where it does not."""
    t = target or a.device_target or "compute_80"
    r, _ = run([a.tlc, "compile", prog, "--target", t, "--emit", "meta", "--backend", "ptx"] + dflags +
               (["--options", a.options] if a.options else []), a.interp_timeout)
    if r.returncode:
        return {"backend_why_not_ptx": (r.stderr.strip().splitlines() or ["no metadata"])[-1]}
    return json.loads(r.stdout)


def device_case(a, prog, target, backend, dflags, aflags, inflags, dev_out, outs, work, base, meta, absrefs, opts,
                acc_L, cenv, label, t1):
    """The device side of one case on one back end: (passed, failed) counts."""
    passed = failed = 0
    for f in (f.split("=", 1)[1] for f in dev_out):
        if os.path.exists(f):
            os.remove(f)
    dev_cmd = [a.tlc, "run", prog, "--device", "cuda"] + (["--target", target] if target else []) + \
        ([] if backend == "auto" else ["--backend", backend]) + (["--options", a.options] if a.options else []) + \
        dflags + aflags + inflags + \
        sum([["--out", o] for o in dev_out], [])
    if a.sanitize:
        dev_cmd = ["compute-sanitizer", "--error-exitcode", "3", "--tool", a.sanitize_tool] + dev_cmd
    r2, t2 = run(dev_cmd, a.timeout * (10 if a.sanitize else 1), opts.get("env"))
    if r2.returncode:
        print(f"FAIL {label}: device rc={r2.returncode} {r2.stderr.strip()[-600:]}")
        return 0, 1
    for o in outs:
        ref = np.load(f"{work}/{base}.{o}.ref.npy")
        dev = np.load(f"{work}/{base}.{o}.dev.npy")
        dt = [p["dtype"] for p in meta["params"] if p["name"] == o][0]
        absref = absrefs.get(o)
        if dt == "bfloat16":  # .npy holds the bit patterns (an absref from NumPy is float64 already)
            ref, dev, absref = (x if x is None or x.dtype.kind not in "ui" else
                                np.left_shift(x.astype(np.uint32), 16).view(np.float32) for x in (ref, dev, absref))
        extra = opts["acc"][2] if "acc" in opts else 0.0
        if isinstance(extra, str):  # an expression over the constants (GEMM_F16ACC)
            extra = float(eval(extra, {"__builtins__": {}, "gamma": tolerance.gamma,
                                       "ceildiv": lambda a, b: -(-a // b)}, cenv))
        u_dev = opts["acc"][3] if len(opts.get("acc", ())) > 3 else 2 * tolerance.U32
        good, why = tolerance.compare(dev, ref, dt, acc_L, absref, extra, u_dev)
        print(f"{'ok  ' if good else 'FAIL'} {label} {o}: {why}"
              f"{f' (sums of {acc_L} terms)' if acc_L else ''}, interp {t1:.2f}s, device {t2:.2f}s")
        passed += good
        failed += not good
    return passed, failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tlc", default="build/bin/tlc")
    ap.add_argument("--out", default=None)
    ap.add_argument("--sanitize", action="store_true", help="run the device side under compute-sanitizer")
    ap.add_argument("--sanitize-tool", default="memcheck", choices=["memcheck", "racecheck", "synccheck", "initcheck"],
                    help="compute-sanitizer's tool for --sanitize (default memcheck)")
    ap.add_argument("--only", default=None, help="run only the cases whose example name matches this regex")
    ap.add_argument("--only-case", default=None, metavar="REGEX",
                    help="only the cases whose printed label (name and constants, e.g. 'gemm_fp8 M=256 N=256 K=256') "
                         "matches")
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds each GPU run (tlc run --device) may take before it is killed and fails its case")
    ap.add_argument("--interp-timeout", type=float, default=900,
                    help="seconds each interpreter run and each metadata compile may take")
    ap.add_argument("--interpret-only", action="store_true",
                    help="no GPU: run the interpreter half and the NumPy references only")
    ap.add_argument("--target", default=None,
                    help="build for this target instead of the GPU's own (e.g. compute_75: sm_75's portable paths)")
    ap.add_argument("--backends", default="auto",
                    help="comma-separated back ends to run each case's device side on (auto, cuda, ptx: "
                         "tlc --backend); ptx skips the cases outside the PTX back end's subset")
    ap.add_argument("--options", default=None, metavar="JSON",
                    help="compiler options for the device builds (tlc run --options), e.g. '{\"split_statements\": 2}'")
    a = ap.parse_args()
    backends = [b for b in a.backends.split(",") if b]
    a.device_target = device_target() if "ptx" in backends else None
    if any(b not in ("auto", "cuda", "ptx") for b in backends):
        ap.error(f"--backends {a.backends}: the back ends are auto, cuda and ptx")
    if not a.interpret_only:
        probe, _ = run([a.tlc, "run", "examples/tilus_add_one.json", "--device", "cuda", "--arg", "n=1"], a.timeout)
        if "no CUDA" in probe.stderr:
            print(f"SKIP: no GPU here: {probe.stderr.strip()}", file=sys.stderr)
            return 77
        if probe.returncode:
            print(f"FAIL the GPU probe (tilus_add_one n=1): rc={probe.returncode} {probe.stderr.strip()[-600:]}")
            return 1
    seed = int(os.environ.get("TL_SEED", time.time_ns() % (1 << 31)))
    print(f"# seed {seed} (TL_SEED={seed} repeats it)")
    rng = np.random.default_rng(seed)
    work = tempfile.mkdtemp(prefix="tlgpu-")
    passed = failed = skipped = 0
    for case in CASES:
        name, defs, args, outs = case[:4]
        opts = case[4] if len(case) > 4 else {}
        if a.only and not re.search(a.only, name):
            continue
        prog = f"examples/{name}.json"
        dflags = sum([["-D", f"{k}={v}"] for k, v in defs.items()], [])
        aflags = sum([["--arg", f"{k}={v}"] for k, v in args.items()], [])
        label = f"{name} {' '.join(f'{k}={v}' for k, v in {**defs, **args, **opts.get('env', {})}.items())}"
        if a.only_case and not re.search(a.only_case, label):
            continue
        # shapes and dtypes from the metadata of a compile at these constants
        meta_target = opts.get("target", "compute_80")  # a kernel in clusters: sm_90 and later
        r, _ = run([a.tlc, "compile", prog, "--target", meta_target, "--emit", "meta"] + dflags, a.interp_timeout)
        if r.returncode:
            print(f"FAIL {label}: compile: {r.stderr.strip()[:500]}")
            failed += 1
            continue
        meta = json.loads(r.stdout)
        env = dict(defs)
        env.update(args)
        inflags, inputs = [], {}
        for p in meta["params"]:
            if p["kind"] != "tensor" or p["name"] in outs:
                continue
            shape = [int(eval(str(d), {"__builtins__": {}}, env)) if isinstance(d, str) else d for d in p["shape"]]
            x = make_input(rng, p["dtype"], shape, opts.get("gen"))
            path = os.path.join(work, f"{os.path.basename(name)}.{p['name']}.npy")
            np.save(path, x)
            inputs[p["name"]] = x
            inflags += ["--in", f"{p['name']}={path}"]
        base = os.path.basename(name)
        ref_out = [f"{o}={work}/{base}.{o}.ref.npy" for o in outs]
        dev_out = [f"{o}={work}/{base}.{o}.dev.npy" for o in outs]
        for f in (f.split("=", 1)[1] for f in ref_out + dev_out):
            if os.path.exists(f):
                os.remove(f)
        r1, t1 = run([a.tlc, "run", prog, "--interpret"] + dflags + aflags + inflags + sum([["--out", o] for o in ref_out], []),
                     a.interp_timeout)
        if r1.returncode:
            print(f"FAIL {label}: interpret rc={r1.returncode} {r1.stderr.strip()[-600:]}")
            failed += 1
            continue
        if opts.get("finite"):  # a NaN or inf in the interpreter's outputs is the program's defect, even
            # where the GPU agrees (compare() passes NaN against NaN)
            nf = {o: int(np.sum(~np.isfinite(np.load(f"{work}/{base}.{o}.ref.npy")))) for o in outs}
            if any(nf.values()):
                print(f"FAIL {label}: the interpreter's outputs are not all finite: {nf}")
                failed += 1
                continue
        if "ref" in opts:
            want = opts["ref"](inputs, constants(prog, defs))
            for o in outs:
                got = np.load(f"{work}/{base}.{o}.ref.npy")
                good = got.shape == want[o].shape and got.dtype == want[o].dtype and \
                    np.array_equal(got, want[o], equal_nan=got.dtype.kind == "f")
                bad = "" if good else f": {int(np.sum(got != want[o])) if got.shape == want[o].shape else 'shape'} elements differ"
                print(f"{'ok  ' if good else 'FAIL'} {label} {o}: interpreter vs NumPy reference{bad}, interp {t1:.2f}s")
                passed += good
                failed += not good
        elif a.interpret_only:
            print(f"ok   {label}: the interpreter ran (no NumPy reference), interp {t1:.2f}s")
            passed += 1
        if a.interpret_only:
            continue
        # the bound's sums of |terms|: the interpreter again, on |inputs| of "acc"
        acc_L, absrefs = 0, {}
        if "acc" in opts and callable(opts["acc"][1]):
            cenv = dict(constants(prog, defs), **args)
            acc_L = int(eval(str(opts["acc"][0]), {"__builtins__": {}}, cenv))
            absrefs = opts["acc"][1](inputs, cenv)
        elif "acc" in opts:
            lexpr, abs_names = opts["acc"][:2]
            cenv = dict(constants(prog, defs), **args)
            acc_L = int(eval(str(lexpr), {"__builtins__": {}}, cenv))
            absflags = []
            for nm, x in inputs.items():
                path = os.path.join(work, f"{base}.{nm}.npy")
                if nm in abs_names:
                    path = os.path.join(work, f"{base}.{nm}.abs.npy")
                    np.save(path, np.abs(x))
                absflags += ["--in", f"{nm}={path}"]
            abs_out = [f"{o}={work}/{base}.{o}.absref.npy" for o in outs]
            r3, _ = run([a.tlc, "run", prog, "--interpret"] + dflags + aflags + absflags +
                        sum([["--out", o] for o in abs_out], []), a.interp_timeout)
            if r3.returncode:
                print(f"FAIL {label}: interpret on |inputs| rc={r3.returncode} {r3.stderr.strip()[-600:]}")
                failed += 1
                continue
            absrefs = {o: np.load(f"{work}/{base}.{o}.absref.npy") for o in outs}
        target = opts.get("target", a.target)
        for backend in backends:
            if backend == "ptx":
                pm = ptx_meta(a, prog, target, dflags)
                if pm.get("backend") != "ptx":  # outside the PTX back end's subset on this target
                    print(f"skip {label} [ptx]: {pm.get('backend_why_not_ptx', 'no metadata')}")
                    skipped += 1
                    continue
            blabel = label if backends == ["auto"] else f"{label} [{backend}]"
            ok, bad = device_case(a, prog, target, backend, dflags, aflags, inflags, dev_out, outs, work, base,
                                  meta, absrefs, opts, acc_L, cenv if "acc" in opts else {}, blabel, t1)
            passed += ok
            failed += bad
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped (outside the PTX back end)" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
