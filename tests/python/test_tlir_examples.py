#!/usr/bin/env python3
"""tests/python/test_tlir_examples.py - every TileLang example ported to
examples/tilelang/ (only the imports changed) is translated by tlir, passes
`tlc check`, and gives NumPy's results through the reference interpreter
(`tlc run --interpret`) at a small and a ragged size (sizes that are not
multiples of the block sizes, where the example allows them).  The kernels
that need what Tile IR v1 lacks are checked to fail with the error that
names it, at the example's line.

Errors are measured as ||got - ref|| / ||ref|| with a bound per output
dtype: float32 1e-4 (the interpreter rounds each operation once, the
references compute in float64), float16 1e-2 and bfloat16 2e-2 (one
rounding of the output, 2^-11 and 2^-8, plus float16 intermediates that the
kernels round to: P in flash attention, S and Q*scale in linear attention);
integers exactly.

Prints one line per case and "N passed, N failed"; exit 1 on a failure, 77
when NumPy or tlc is missing.
"""
import importlib.util
import os
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
try:
    import numpy as np
except ImportError:
    sys.stderr.write("no NumPy for %s (apt-get install python3-numpy)\n" % sys.executable)
    sys.exit(77)
import tlir  # noqa: E402

try:
    tlir.find_tlc()
except tlir.TlirError as e:
    sys.stderr.write("%s\n" % e)
    sys.exit(77)

EX = os.path.join(ROOT, "examples", "tilelang")
TOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2}
rng = np.random.default_rng(20261124)


def load(name):
    spec = importlib.util.spec_from_file_location("tl_example_" + name, os.path.join(EX, name + ".py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def close(name, got, ref, dtype):
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    assert got.shape == ref.shape, "%s: shape %s, expected %s" % (name, got.shape, ref.shape)
    assert not np.isnan(got).any(), "%s: %d NaN elements (never written?)" % (name, np.isnan(got).sum())
    if dtype not in TOL:
        assert np.array_equal(got, ref), "%s: %d elements differ" % (name, (got != ref).sum())
        return 0.0
    err = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)
    assert err <= TOL[dtype], "%s: relative error %.3g > %g" % (name, err, TOL[dtype])
    return err


def f16(*shape):
    return rng.standard_normal(shape).astype(np.float16)


def bf16_round(x):
    """float32 -> the nearest bfloat16 (ties to even), as float32."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32)


# ---- the cases -------------------------------------------------------------

def gemm(M, N, K, bm, bn, bk):
    k = load("gemm").matmul(M, N, K, bm, bn, bk)
    a, b = f16(M, K), f16(K, N)
    c = k(a, b)
    return close("C", c, a.astype(np.float64) @ b.astype(np.float64), "float16")


def gemm_swizzle(M, N, K, bm, bn, bk):
    """The README's annotated GEMM: a plain function returning a prim_func,
    compiled with tilelang.compile(out_idx=...)."""
    k = tlir.compile(load("gemm_swizzle").matmul(M, N, K, bm, bn, bk), out_idx=[2])
    a, b = f16(M, K), f16(K, N)
    c = k(a, b)
    return close("C", c, a.astype(np.float64) @ b.astype(np.float64), "float16")


def rms_norm(M, N, blk_m, blk_k):
    m = load("rms_norm")
    a = rng.standard_normal((M, N)).astype(np.float32)
    ref = a / np.sqrt((a.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-12)
    e1 = close("B", m.rms_norm(M, N, blk_m)(a), ref, "float32")
    # the split-K variant has no out_idx: B is passed and written in place
    b = np.full((M, N), np.nan, np.float32)
    k = tlir.compile(m.rms_norm_splitk(M, N, blk_m, blk_k))
    k(a, b)
    return max(e1, close("B (split k)", b, ref, "float32"))


def layer_norm(N, D, blk_m):
    k = load("layer_norm")._layernorm_fwd(N, D, blk_m=blk_m)
    x, g, be = (rng.standard_normal(s).astype(np.float32) for s in ((N, D), (D,), (D,)))
    y, mean, rstd = k(x, g, be)
    x64, g64, b64 = (bf16_round(v).astype(np.float64) for v in (x, g, be))
    mu = x64.mean(-1)
    rs = 1 / np.sqrt((x64 ** 2).mean(-1) - mu ** 2 + 1e-5)
    ref = (x64 - mu[:, None]) * rs[:, None] * g64 + b64
    return max(close("Y", y, ref, "bfloat16"), close("Mean", mean, mu, "float32"),
               close("Rstd", rstd, rs, "float32"))


def layer_norm_bwd(N, D, blk_m):
    """The backward kernel: DX returned, DGamma and DBeta accumulated (its
    element atomic_adds inside T.Parallel become one tile atomic_add each)."""
    k = load("layer_norm")._layernorm_bwd(N, D, blk_m=blk_m)
    dy, x, g = (bf16_round(rng.standard_normal(s).astype(np.float32)) for s in ((N, D), (N, D), (D,)))
    x64, dy64, g64 = x.astype(np.float64), dy.astype(np.float64), g.astype(np.float64)
    mean = x64.mean(-1)
    rstd = 1 / np.sqrt(x64.var(-1) + 1e-5)
    dgamma, dbeta = np.zeros(D, np.float32), np.zeros(D, np.float32)
    dx = k(dy, x, g, mean.astype(np.float32), rstd.astype(np.float32), dgamma, dbeta)
    m32, r32 = mean.astype(np.float32).astype(np.float64), rstd.astype(np.float32).astype(np.float64)
    xh = (x64 - m32[:, None]) * r32[:, None]
    dxh = dy64 * g64
    ref_dx = r32[:, None] * (dxh - dxh.mean(-1, keepdims=True) - xh * (dxh * xh).mean(-1, keepdims=True))
    return max(close("DX", dx, ref_dx, "bfloat16"), close("DGamma", dgamma, (dy64 * xh).sum(0), "float32"),
               close("DBeta", dbeta, dy64.sum(0), "float32"))


def attention_ref(q, k, v, causal):
    """softmax(Q K^T / sqrt(d)) V and log2-sum-exp2 of the scaled scores;
    q, k, v are [batch, seq, heads, dim]."""
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    d = q.shape[-1]
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d)
    if causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    mx = s.max(-1, keepdims=True)
    p = np.exp(s - mx)
    o = np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)
    lse = (np.log(p.sum(-1)) + mx[..., 0]) / np.log(2)
    return o, lse


def flash_fwd(batch, heads, seq, dim, causal, bm, bn):
    k = load("flash_attention_fwd").flashattn(batch, heads, seq, dim, causal, block_M=bm, block_N=bn,
                                              num_stages=1, threads=128)
    q, kk, v = f16(batch, seq, heads, dim), f16(batch, seq, heads, dim), f16(batch, seq, heads, dim)
    o = k(q, kk, v)
    return close("Output", o, attention_ref(q, kk, v, causal)[0], "float16")


def flash_bwd_parts(batch, heads, seq, dim, causal, bm, bn):
    """The forward (with the log-sum-exp) and the preprocess kernel of the
    backward example, each checked on its own (flash_bwd runs them all)."""
    m = load("flash_attention_bwd")
    q, kk, v = f16(batch, seq, heads, dim), f16(batch, seq, heads, dim), f16(batch, seq, heads, dim)
    o, lse = m.flashattn_fwd(batch, heads, seq, dim, causal, bm, bn)(q, kk, v)
    ro, rlse = attention_ref(q, kk, v, causal)
    e = max(close("Output", o, ro, "float16"), close("lse", lse, rlse, "float32"))
    do = f16(batch, seq, heads, dim)
    delta = m.flashattn_bwd_preprocess(batch, heads, seq, dim)(o, do)
    # the kernel multiplies in float16 (o and do are float16 fragments), then sums in float32
    rd = np.einsum("bshd->bhs", (o * do).astype(np.float64))
    return max(e, close("Delta", delta, rd, "float32"))


def flash_decoding(batch, heads, seq_q, seq_kv, dim, bm, bn):
    """Split-KV flash decoding: two kernels in one prim_func (split, then
    combine) sharing two T.alloc_global workspaces.  The example reads K
    and V in num_split (4) slices of seq_kv // 4 rows, so seq_kv is a
    multiple of 4 * bn (it has no mask); seq_q may be ragged."""
    k = load("flash_decoding").flashattn(batch, heads, seq_q, seq_kv, dim, False, bm, bn)
    q, kk, v = f16(batch, seq_q, heads, dim), f16(batch, seq_kv, heads, dim), f16(batch, seq_kv, heads, dim)
    o = k(q, kk, v)
    return close("Output", o, attention_ref(q, kk, v, False)[0], "float16")


def attention_bwd_ref(q, k, v, do, causal):
    """dQ, dK, dV of softmax(Q K^T / sqrt(d)) V in float64; [batch, seq, heads, dim]."""
    q, k, v, do = (t.astype(np.float64) for t in (q, k, v, do))
    sm = 1 / np.sqrt(q.shape[-1])
    s = np.einsum("bqhd,bkhd->bhqk", q, k) * sm
    if causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = np.einsum("bhqk,bkhd->bqhd", p, v)
    dv = np.einsum("bhqk,bqhd->bkhd", p, do)
    dp = np.einsum("bqhd,bkhd->bhqk", do, v)
    ds = p * (dp - np.einsum("bqhd,bqhd->bhq", do, o)[..., None]) * sm
    return np.einsum("bhqk,bkhd->bqhd", ds, k), np.einsum("bhqk,bqhd->bkhd", ds, q), dv


def flash_bwd(batch, heads, seq, dim, causal, bm, bn):
    """The whole backward example: the forward (lse), the preprocess
    (Delta), flashattn_bwd (dK, dV, and dQ atomically added into a float32
    tensor that T.annotate_layout lays out: a layout on global memory,
    recorded and ignored) and flashattn_bwd_postprocess (dQ to float16,
    read through the same layout).  dQ, dK and dV come from float16
    intermediates (P and dS are rounded to float16 before their gemms), so
    all three are held to the float16 bound."""
    m = load("flash_attention_bwd")
    q, kk, v, do = (f16(batch, seq, heads, dim) for _ in range(4))
    o, lse = m.flashattn_fwd(batch, heads, seq, dim, causal, bm, bn)(q, kk, v)
    delta = m.flashattn_bwd_preprocess(batch, heads, seq, dim)(o, do)
    dq = np.zeros((batch, seq, heads, dim), np.float32)  # atomically added to, as the example's caller zeroes it
    dk = np.full((batch, seq, heads, dim), np.nan, np.float16)
    dv = np.full((batch, seq, heads, dim), np.nan, np.float16)
    m.flashattn_bwd(batch, heads, seq, dim, causal, bm, bn)(q, kk, v, do, lse, delta, dq, dk, dv)
    dq16 = m.flashattn_bwd_postprocess(batch, heads, seq, dim)(dq)
    rq, rk, rv = attention_bwd_ref(q, kk, v, do, causal)
    return max(close("dQ (float32)", dq, rq, "float16"), close("dQ_out", dq16, rq, "float16"),
               close("dK", dk, rk, "float16"), close("dV", dv, rv, "float16"))


def topk(M, N, K, blk_m):
    k = load("topk").tl_topk(M=M, N=N, topk=K, blk_m=blk_m, threads=128)
    x = rng.random((M, N)).astype(np.float32)
    gates, idx = k(x)
    order = np.argsort(-x, axis=1, kind="stable")[:, :K]
    return max(close("topk_gates", gates, np.take_along_axis(x, order, 1), "float32"),
               close("topk_indices", idx, order, "int32"))


def dequant_gemm(M, N, K):
    k = load("dequant_gemm").matmul(M, N, K, 64, 64, 32, "float16", "float16", "float32", 2, 128)
    a = f16(M, K)
    b = rng.integers(-128, 128, (N, K // 2)).astype(np.int8)
    u = b.view(np.uint8).astype(np.int64)
    bd = np.empty((N, K)); bd[:, 0::2] = u & 15; bd[:, 1::2] = u >> 4
    c = k(a, b)
    return close("C", c, a.astype(np.float64) @ bd.T, "float16")


def linear_attention(B, S, H, D):
    k = load("linear_attention_fwd").tl_fused_chunk_fwd_kernel(B, S, H, D, D)
    q, kk, v = (rng.standard_normal((B, S, H, D)).astype(np.float16) * np.float16(0.5) for _ in range(3))
    o = np.zeros((B, S, H, D), np.float32)  # atomically added to, in place
    state = k(q, kk, v, o)
    q64 = (q.astype(np.float32) * np.float32(D ** -0.5)).astype(np.float16).astype(np.float64)
    k64, v64 = kk.astype(np.float64), v.astype(np.float64)
    s = np.einsum("bihd,bjhd->bhij", q64, k64) * np.tril(np.ones((S, S)))
    ref_o = np.einsum("bhij,bjhd->bihd", s, v64)
    ref_state = np.einsum("bshk,bshv->bhkv", k64, v64)
    return max(close("O", o, ref_o, "float16"), close("final_state", state, ref_state, "float32"))


def mamba_chunk_scan(batch, seqlen, chunk, ngroups, nheads, headdim, dstate):
    k = load("mamba_chunk_scan").chunk_scan_fwd(batch, seqlen, chunk, ngroups, nheads, headdim, dstate,
                                                64, 64, 64, dstate, 2, 128)
    nch = -(-seqlen // chunk)
    h = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float16)
    cb, x, dt = h(batch, nch, ngroups, chunk, chunk), h(batch, seqlen, nheads, headdim), h(batch, nheads, nch, chunk)
    dA, C, prev, D = (h(batch, nheads, nch, chunk), h(batch, seqlen, ngroups, dstate),
                      h(batch, nch, nheads, headdim, dstate), h(nheads))
    out = k(cb, x, dt, dA, C, prev, D)
    # the example's ref_program in NumPy, float64; x and C padded with zeros
    # to whole chunks (the kernel reads zeros past seqlen)
    pad = lambda a: np.concatenate([a, np.zeros((a.shape[0], nch * chunk - seqlen) + a.shape[2:], a.dtype)], 1)
    x64, C64 = pad(x).astype(np.float64), pad(C).astype(np.float64)
    rep = nheads // ngroups
    ref = np.zeros((batch, nch * chunk, nheads, headdim))
    mask = np.tril(np.ones((chunk, chunk)))
    for b in range(batch):
        for c in range(nch):
            rows = slice(c * chunk, (c + 1) * chunk)
            for hh in range(nheads):
                g = hh // rep
                a = dA[b, hh, c].astype(np.float64)
                scores = cb[b, c, g].astype(np.float64) * np.exp(a[:, None] - a[None, :]) * mask
                o = (scores * dt[b, hh, c].astype(np.float64)[None, :]) @ x64[b, rows, hh]
                o += (C64[b, rows, g] @ prev[b, c, hh].astype(np.float64).T) * np.exp(a)[:, None]
                ref[b, rows, hh] = o + x64[b, rows, hh] * float(D[hh])
    return close("Output", out, ref[:, :seqlen], "float16")



def block_sparse_attn(B, H, S, D, causal):
    """Flash attention over the key blocks a mask keeps (the mask read in a
    `T.Pipelined` loop's thread-level `if`, from a fragment tlir holds in
    shared memory); the example's mask: the top 2 blocks of each row of
    random scores, block 0 always among them, lower-triangular."""
    ds = -(-S // 64)
    k = load("block_sparse_attn").blocksparse_flashattn(B, H, S, D, ds, is_causal=causal)
    q, kk, v = f16(B, H, S, D), f16(B, H, S, D), f16(B, H, S, D)
    x = rng.standard_normal((B, H, ds, ds))
    x[..., 0] = 100
    mask = np.zeros((B, H, ds, ds), bool)
    np.put_along_axis(mask, np.argsort(-x, -1)[..., :2], True, -1)
    mask = np.tril(mask)
    o = k(q, kk, v, mask)
    full = np.kron(mask.astype(np.float64), np.ones((64, 64)))[..., :S, :S] > 0
    if causal:
        full &= np.tril(np.ones((S, S), bool))
    s = np.einsum("bhsd,bhtd->bhst", q.astype(np.float64), kk.astype(np.float64)) / np.sqrt(D)
    s = np.where(full, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = np.einsum("bhst,bhtd->bhsd", p / p.sum(-1, keepdims=True), v.astype(np.float64))
    return close("Output", o, ref, "float16")


def convolution(N, C, H, W, F, K, S, D, P, bm, bn, bk, hopper):
    """The implicit-GEMM convolution: with hopper, its `T.c2d_im2col` (TMA's
    im2col load in TileLang), else its own T.Parallel im2col loop; the
    filter read through `T.Tensor(shape, dtype, kernel.data)` (a view)."""
    m = load("convolution")
    m.check_hopper = lambda: hopper  # the example asks PyTorch which GPU it runs on
    k = m.convolution(N, C, H, W, F, K, S, D, P, bm, bn, bk, 2, 128)
    a, b = f16(N, H, W, C), f16(K, K, C, F)
    out = k(a, b)
    OH, OW = (H + 2 * P - D * (K - 1) - 1) // S + 1, (W + 2 * P - D * (K - 1) - 1) // S + 1
    ap = np.zeros((N, H + 2 * P, W + 2 * P, C))
    ap[:, P:P + H, P:P + W] = a
    ref = np.zeros((N, OH, OW, F))
    for kh in range(K):
        for kw in range(K):
            ref += ap[:, kh * D: kh * D + S * (OH - 1) + 1: S, kw * D: kw * D + S * (OW - 1) + 1: S] @ b[kh, kw]
    return close("out", out, ref, "float16")


def blocksparse_gemm(M, N, K, bm, bn, bk):
    """C = A B over the K blocks a boolean mask of (M // bm, N // bn, K // bk)
    keeps (a global element read in a thread-level `if` around the
    pipelined loop's copies and gemm); a block row or column past the mask
    reads false (a global element outside its tensor reads as 0) and stays 0."""
    k = load("blocksparse_gemm").blocksparse_matmul(M, N, K, bm, bn, bk, 2, 128, True)
    a, b = f16(M, K), f16(K, N)
    mask = rng.random((M // bm, N // bn, K // bk)) > 0.5
    c = k(a, b, mask)
    ref = np.zeros((M, N))
    for i, j, kb in zip(*np.nonzero(mask)):
        ref[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] += (a[i * bm:(i + 1) * bm, kb * bk:(kb + 1) * bk].astype(np.float64)
                                                          @ b[kb * bk:(kb + 1) * bk, j * bn:(j + 1) * bn])
    return close("C", c, ref, "float16")


def gemv(fn, N, K, *blocks):
    """A GEMV (C = B A) written as thread-level code: each thread's products
    in a local buffer (T.clear of it, .astype), the split-K variants'
    partial sums added into a shared buffer by every thread
    (T.atomic_add(C_shared[tn], C_accum[0]): an element atomic each)."""
    k = getattr(load("gemv"), fn)(N, K, *blocks)
    a, b = f16(K), f16(N, K)
    return close("C", k(a, b), b.astype(np.float64) @ a.astype(np.float64), "float16")


def mla_decode(B, H, S, dim, pe, bn, bh, splits):
    """DeepSeek MLA decoding (one KV head shared by all query heads; its
    split form is two kernels and two workspaces): the slices
    `kv_start:kv_end` of two lets, whose extent tlc check folds once tlir
    writes the lets' values there."""
    scale = (dim + pe) ** -0.5
    k = load("mla_decode").flashattn(B, H, 1, S, dim, pe, bn, bh, splits, scale)
    q, q_pe, kv, k_pe = f16(B, H, dim), f16(B, H, pe), f16(B, S, 1, dim), f16(B, S, 1, pe)
    o = k(q, q_pe, kv, k_pe)
    s = (np.einsum("bhd,bsd->bhs", q.astype(np.float64), kv[:, :, 0].astype(np.float64))
         + np.einsum("bhd,bsd->bhs", q_pe.astype(np.float64), k_pe[:, :, 0].astype(np.float64))) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = np.einsum("bhs,bsd->bhd", p / p.sum(-1, keepdims=True), kv[:, :, 0].astype(np.float64))
    return close("Output", o, ref, "float16")


def grouped_gemm(sizes, K, N, bm, bn, bk):
    """C_g = A_g B_g for groups of rows of A (MoE-style); each block finds
    its group by a loop of assignments to a T.alloc_var that its copies'
    regions then use: tlir holds that variable in shared memory (one value
    for the block).  Group sizes not multiples of block_M."""
    import math
    k = load("grouped_gemm_fwd").grouped_gemm(tuple(sizes), K, N, bm, bn, bk)
    offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
    padded = np.concatenate([[0], np.cumsum([math.ceil(n / bm) * bm for n in sizes])[:-1]]).astype(np.int32)
    a, b = f16(sum(sizes), K), f16(len(sizes), K, N)
    c = k(a, b, np.array(sizes, np.int32), offs, padded)
    ref = np.concatenate([a[o:o + n].astype(np.float64) @ b[g].astype(np.float64)
                          for g, (o, n) in enumerate(zip(offs, sizes))])
    return close("C", c, ref, "float16")


CASES = [
    ("gemm 128x128x64", gemm, (128, 128, 64, 64, 64, 32)),
    ("gemm ragged 100x72x40", gemm, (100, 72, 40, 64, 64, 32)),
    ("gemm_swizzle 128x128x64", gemm_swizzle, (128, 128, 64, 64, 64, 32)),
    ("gemm_swizzle ragged 100x72x40", gemm_swizzle, (100, 72, 40, 64, 64, 32)),
    ("rms_norm 64x64", rms_norm, (64, 64, 8, 32)),
    ("rms_norm ragged 37x50", rms_norm, (37, 50, 8, 32)),
    ("layer_norm 64x64", layer_norm, (64, 64, 8)),
    ("layer_norm ragged 37x48", layer_norm, (37, 48, 8)),
    ("layer_norm backward 64x64", layer_norm_bwd, (64, 64, 32)),
    ("layer_norm backward 96x48 (blk_m 32, D not a power of 2)", layer_norm_bwd, (96, 48, 32)),
    ("flash_attention_fwd 1x2x128x64", flash_fwd, (1, 2, 128, 64, False, 64, 64)),
    ("flash_attention_fwd causal 1x2x128x64", flash_fwd, (1, 2, 128, 64, True, 64, 64)),
    ("flash_attention_fwd ragged seq 100", flash_fwd, (1, 2, 100, 64, False, 64, 64)),
    ("flash_attention_fwd causal ragged seq 100", flash_fwd, (1, 1, 100, 32, True, 64, 32)),
    ("flash_attention_bwd fwd+preprocess 1x2x128x64", flash_bwd_parts, (1, 2, 128, 64, False, 64, 64)),
    ("flash_attention_bwd fwd+preprocess causal ragged 100", flash_bwd_parts, (1, 1, 100, 32, True, 64, 32)),
    ("flash_decoding 1x2 q64 kv512 d64 (two kernels, workspaces)", flash_decoding, (1, 2, 64, 512, 64, 64, 64)),
    ("flash_decoding ragged q100 kv256 d32, bn 32", flash_decoding, (2, 1, 100, 256, 32, 64, 32)),
    ("flash_attention_bwd backward 1x2x128x64 (dQ laid out in global memory)", flash_bwd,
     (1, 2, 128, 64, False, 64, 64)),
    ("flash_attention_bwd backward causal ragged 1x1x100x32", flash_bwd, (1, 1, 100, 32, True, 64, 32)),
    ("topk 64x32 k=4", topk, (64, 32, 4, 16)),
    ("topk ragged 37x40 k=6", topk, (37, 40, 6, 16)),
    ("dequant_gemm 64x64x64", dequant_gemm, (64, 64, 64)),
    ("dequant_gemm ragged 100x72x64", dequant_gemm, (100, 72, 64)),
    ("linear_attention_fwd 1x128x2x64", linear_attention, (1, 128, 2, 64)),
    ("mamba_chunk_scan 1x128 (2 chunks), 2 heads", mamba_chunk_scan, (1, 128, 64, 1, 2, 64, 64)),
    ("mamba_chunk_scan ragged seqlen 100, 2 groups", mamba_chunk_scan, (1, 100, 64, 2, 4, 64, 64)),
    ("block_sparse_attn causal 1x2x128x64", block_sparse_attn, (1, 2, 128, 64, True)),
    ("block_sparse_attn 1x1x192x32", block_sparse_attn, (1, 1, 192, 32, False)),
    ("block_sparse_attn causal ragged seq 100", block_sparse_attn, (1, 1, 100, 64, True)),
    ("convolution 1x8x8x16 -> 16, 3x3 (T.Parallel im2col)", convolution, (1, 16, 8, 8, 16, 3, 1, 1, 1, 64, 64, 32, False)),
    ("convolution ragged 2x7x9x8 -> 24, stride 2 (T.c2d_im2col)", convolution,
     (2, 8, 7, 9, 24, 3, 2, 1, 1, 32, 64, 32, True)),
    ("convolution ragged 1x6x5x24 -> 40, dilation 2, pad 2 (T.c2d_im2col)", convolution,
     (1, 24, 6, 5, 40, 3, 1, 2, 2, 64, 32, 32, True)),
    ("gemv naive_gemv 256x256", gemv, ("naive_gemv", 256, 256, 128, 128)),
    ("gemv naive_gemv ragged 200x300", gemv, ("naive_gemv", 200, 300, 128, 128)),
    ("gemv naive_splitk_gemv ragged 100x300", gemv, ("naive_splitk_gemv", 100, 300, 32, 32)),
    ("gemv splitk_gemv ragged 100x300", gemv, ("splitk_gemv", 100, 300, 32, 32, 4)),
    ("gemv splitk_gemv_vectorized ragged 100x320", gemv, ("splitk_gemv_vectorized", 100, 320, 32, 8)),
    ("mla_decode 1x16 heads, kv 256, d64+32 (one kernel)", mla_decode, (1, 16, 256, 64, 32, 32, 16, 1)),
    ("mla_decode 2x32 heads, kv 256, d64+32, 2 splits (two kernels, workspaces)", mla_decode,
     (2, 32, 256, 64, 32, 32, 16, 2)),
    ("grouped_gemm_fwd groups 64, 128 (whole blocks)", grouped_gemm, ((64, 128), 64, 64, 64, 64, 32)),
    ("grouped_gemm_fwd ragged groups 10, 130, 1; N 72, K 40", grouped_gemm, ((10, 130, 1), 40, 72, 64, 32, 32)),
    ("blocksparse_gemm 128x128x128", blocksparse_gemm, (128, 128, 128, 64, 64, 32)),
    ("blocksparse_gemm ragged 100x72x96 (past the mask: zero)", blocksparse_gemm, (100, 72, 96, 64, 32, 32)),
]

# Kernels of the ported examples that need what Tile IR v1 lacks: (example,
# function, arguments, the error's line in the example, the message).
BAD = [
    ("gemv", "splitk_gemv_vectorized_tvm", (64, 64, 32, 8), "with T.attr(",
     "T.attr: Tile IR v1 has no TVM attributes (T.attr; with T.tvm_thread_allreduce, a sum across threads: add "
     "the threads' values into a shared buffer with T.atomic_add instead)"),
    ("gemv", "get_autotuned_kernel", (64, 64, 32, 8), "with T.attr(",
     "T.attr: Tile IR v1 has no TVM attributes (T.attr; with T.tvm_thread_allreduce, a sum across threads: add "
     "the threads' values into a shared buffer with T.atomic_add instead)"),
    ("gemv", "gemv_alloc_reducer", (64, 64), "o_reducer = T.alloc_reducer(",
     "T.alloc_reducer: Tile IR v1 has no reducer buffers"),
]


def main():
    npass = nfail = 0
    for name, fn, args in CASES:
        t = time.time()
        try:
            err = fn(*args)
            npass += 1
            print("PASS  %s  (rel err %.2g, %.1fs)" % (name, err, time.time() - t))
        except Exception:  # noqa: BLE001
            nfail += 1
            print("FAIL  %s" % name)
            traceback.print_exc(file=sys.stdout)
    for ex, fn, args, line_text, msg in BAD:
        name = "%s.%s is refused" % (ex, fn)
        path = os.path.join(EX, ex + ".py")
        # the line is found by its text, so that the test follows the file
        lines = open(path).read().split("\n")
        want_line = None
        try:
            getattr(load(ex), fn)(*args)
            problem = "no error"
        except tlir.TlirError as e:
            # the error is at the statement's line (in a multi-line call,
            # Python reports one of its lines: the call's first or last)
            hits = [i + 1 for i, l in enumerate(lines) if line_text in l]
            ok_line = e.file == path and any(h <= e.line <= h + 4 for h in hits)
            want_line = hits
            problem = None if (e.message == msg and ok_line) else "got %s" % e
        if problem is None:
            npass += 1
            print("PASS  %s" % name)
        else:
            nfail += 1
            print("FAIL  %s: %s (wanted '%s' at %s:%s)" % (name, problem, msg, path, want_line))
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
