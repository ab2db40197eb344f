#!/usr/bin/env python3
"""tests/gpu/tlir_torch.py - tlir's kernels on PyTorch tensors on the GPU,
against the same kernels through the reference interpreter.

For every TileLang example ported to examples/tilelang/ that tlir runs, at
a small and a ragged size: fresh random inputs (the seed is printed), the
kernel run once on NumPy arrays through `tlc run --interpret` and once on
CUDA tensors (compiled by the local tlc for the GPU's own target, or by the
tlserverd of TL_SERVER; loaded and launched through libtlclient with
ctypes, on the current stream; out_idx outputs allocated with
torch.empty), and every output and in-place tensor compared relative to the
reference's norm: float32 1e-4 (1e-3 for outputs computed from float16
intermediates that the GPU may round differently, linear attention's O, and for
sums of atomic adds in another order, layer norm backward's DGamma, DBeta),
float16 1e-2, bfloat16 2e-2 (proto/tile-ir-v1.md 8.3: fast exp2/rsqrt,
any summation order), integers exactly.  Then: a program of two kernels
sharing a workspace with a T.dynamic shape, launched through one kernel
handle at growing and shrinking sizes (its workspace grown and reused) and
on a side stream; a T.dynamic kernel at three
sizes from one compile, a launch on a side stream, the argument checks
(CPU tensor, wrong dtype, not contiguous), get_kernel_source(), and the
time of a 4096^3 float16 GEMM against torch.matmul (CUDA events, mean of
20 after 3 warm-ups), and TileLang's examples as programs, with their own
main() (PyTorch references, torch.testing.assert_close, do_bench).  With
--server the same cases run again through a
tlserverd started on a free loopback port (build/bin/tlserverd, a
temporary database).

    /opt/torch/.venv/bin/python tests/gpu/tlir_torch.py [--only REGEX] [--server] [--seed N]

(--only: the cases and the examples' mains whose names match REGEX; no
other checks, no timing.)

Needs build/bin/tlc and build/lib/libtlclient.so.0 (or TL_TLC,
TL_LIBTLCLIENT).  Prints one line per case and "N passed, N failed"; exits
1 if any failed, 77 without a GPU or PyTorch.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

try:
    import numpy as np
    import torch
except ImportError as e:
    sys.stderr.write("tlir_torch.py: %s\n" % e)
    sys.exit(77)
if not torch.cuda.is_available():
    sys.stderr.write("tlir_torch.py: no CUDA GPU for PyTorch\n")
    sys.exit(77)

import tlir  # noqa: E402
import tlir.language as T  # noqa: E402
from test_tlir_examples import load  # noqa: E402
from test_tlir_readme import load_quickstart  # noqa: E402

_quickstart = []


def grouped(sizes, K, N, block_M, *rest):
    """examples/tilelang/grouped_gemm_fwd.py's kernel, with its group sizes,
    offsets and offsets padded to block_M (construct_inputs)."""
    k = load("grouped_gemm_fwd").grouped_gemm(tuple(sizes), K, N, block_M, *rest)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
    padded = np.concatenate([[0], np.cumsum([-(-n // block_M) * block_M for n in sizes])[:-1]]).astype(np.int32)
    return k, {"batch_sizes": np.array(sizes, np.int32), "batch_offsets": offsets, "batch_padded_offsets": padded}


def readme():
    """The README's Python quick start, run once (its own NumPy check through
    the interpreter included); its matmul_splitk is then run on the GPU."""
    if not _quickstart:
        d = tempfile.mkdtemp(prefix="tlir-readme-")
        _quickstart.append(load_quickstart(d))
    return _quickstart[0]


TOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2}

# (name, kernel maker, tolerance overrides by output name)
CASES = [
    ("gemm 256x256x128", lambda: load("gemm").matmul(256, 256, 128, 128, 128, 32), {}),
    ("gemm ragged 300x200x136", lambda: load("gemm").matmul(300, 200, 136, 128, 128, 32), {}),
    ("gemm_swizzle 256x256x128",
     lambda: tlir.compile(load("gemm_swizzle").matmul(256, 256, 128, 128, 128, 32), out_idx=[2]), {}),
    ("gemm_swizzle ragged 300x200x136",
     lambda: tlir.compile(load("gemm_swizzle").matmul(300, 200, 136, 128, 128, 32), out_idx=[2]), {}),
    ("dequant_gemm 256x256x256",
     lambda: load("dequant_gemm").matmul(256, 256, 256, 128, 128, 32, "float16", "float16", "float32", 2, 128), {}),
    ("dequant_gemm ragged 200x136x256",
     lambda: load("dequant_gemm").matmul(200, 136, 256, 128, 128, 32, "float16", "float16", "float32", 2, 128), {}),
    ("flash_attention_fwd 2x4x256x64",
     lambda: load("flash_attention_fwd").flashattn(2, 4, 256, 64, False, block_M=64, block_N=64,
                                                   num_stages=1, threads=128), {}),
    ("flash_attention_fwd causal 2x4x256x128",
     lambda: load("flash_attention_fwd").flashattn(2, 4, 256, 128, True, block_M=128, block_N=128,
                                                   num_stages=1, threads=128), {}),
    ("flash_attention_fwd ragged seq 200",
     lambda: load("flash_attention_fwd").flashattn(1, 2, 200, 64, False, block_M=64, block_N=64,
                                                   num_stages=1, threads=128), {}),
    ("flash_attention_fwd causal ragged seq 200",
     lambda: load("flash_attention_fwd").flashattn(1, 2, 200, 64, True, block_M=64, block_N=64,
                                                   num_stages=1, threads=128), {}),
    ("flash_attention_bwd.flashattn_fwd causal 1x2x256x64",
     lambda: load("flash_attention_bwd").flashattn_fwd(1, 2, 256, 64, True, 64, 64), {}),
    ("flash_attention_bwd.flashattn_bwd_preprocess ragged 1x2x200x64",
     lambda: load("flash_attention_bwd").flashattn_bwd_preprocess(1, 2, 200, 64), {}),
    # dQ atomically added into a float32 tensor laid out by T.annotate_layout (a layout on global memory:
    # recorded and ignored), then read by the postprocess through the same layout; dS and P are float16
    # before their gemms, so dQ is held to 1e-3 (one float16 rounding, 2^-11, of some terms, twice over)
    ("flash_attention_bwd.flashattn_bwd 1x2x256x64",
     lambda: load("flash_attention_bwd").flashattn_bwd(1, 2, 256, 64, False, 64, 64), {"dQ": 1e-3}),
    ("flash_attention_bwd.flashattn_bwd causal ragged 1x2x200x64",
     lambda: load("flash_attention_bwd").flashattn_bwd(1, 2, 200, 64, True, 64, 64), {"dQ": 1e-3}),
    ("flash_attention_bwd.flashattn_bwd_postprocess ragged 1x2x200x64",
     lambda: load("flash_attention_bwd").flashattn_bwd_postprocess(1, 2, 200, 64), {}),
    # two kernels (split, then combine) sharing two workspaces (T.alloc_global)
    ("flash_decoding 1x4 q128 kv1024 d128",
     lambda: load("flash_decoding").flashattn(1, 4, 128, 1024, 128, False, 128, 64), {}),
    ("flash_decoding ragged q100 kv1024 d64, 2x4",
     lambda: load("flash_decoding").flashattn(2, 4, 100, 1024, 64, False, 64, 64), {}),
    ("rms_norm 256x512", lambda: load("rms_norm").rms_norm(256, 512, 1), {}),
    ("rms_norm ragged 100x300", lambda: load("rms_norm").rms_norm(100, 300, 4), {}),
    ("rms_norm_splitk 256x512", lambda: tlir.compile(load("rms_norm").rms_norm_splitk(256, 512, 1, 128)), {}),
    ("layer_norm 256x512", lambda: load("layer_norm")._layernorm_fwd(256, 512), {}),
    ("layer_norm ragged 100x320", lambda: load("layer_norm")._layernorm_fwd(100, 320, blk_m=4), {}),
    ("layer_norm backward 256x512", lambda: load("layer_norm")._layernorm_bwd(256, 512), {"DGamma": 1e-3, "DBeta": 1e-3}),
    ("layer_norm backward 96x320", lambda: load("layer_norm")._layernorm_bwd(96, 320), {"DGamma": 1e-3, "DBeta": 1e-3}),
    ("topk 320x128 k=6", lambda: load("topk").tl_topk(M=320, N=128, topk=6, blk_m=64, threads=128), {}),
    ("topk ragged 300x96 k=4", lambda: load("topk").tl_topk(M=300, N=96, topk=4, blk_m=64, threads=128), {}),
    ("linear_attention_fwd 2x256x4x64",
     lambda: load("linear_attention_fwd").tl_fused_chunk_fwd_kernel(2, 256, 4, 64, 64), {"O": 1e-3}),
    ("mamba_chunk_scan 2x512, 4 heads",
     lambda: load("mamba_chunk_scan").chunk_scan_fwd(2, 512, 256, 1, 4, 64, 128, 64, 64, 64, 128, 2, 128), {}),
    ("mamba_chunk_scan ragged seqlen 300, 2 groups",
     lambda: load("mamba_chunk_scan").chunk_scan_fwd(1, 300, 64, 2, 4, 64, 64, 64, 64, 64, 64, 2, 128), {}),
    # the block mask read in the pipelined loop's `if` (a fragment tlir holds in shared memory); random
    # masks: a row without a kept block is 0/0 = NaN in both
    ("block_sparse_attn causal 2x4x256x64",
     lambda: load("block_sparse_attn").blocksparse_flashattn(2, 4, 256, 64, 4, is_causal=True), {}),
    ("block_sparse_attn 1x2x512x128", lambda: load("block_sparse_attn").blocksparse_flashattn(1, 2, 512, 128, 8, False), {}),
    ("block_sparse_attn causal ragged seq 200",
     lambda: load("block_sparse_attn").blocksparse_flashattn(1, 2, 200, 64, 4, is_causal=True), {}),
    # on an H100 check_hopper() is true: T.c2d_im2col (tlir's parallel loop); the filter through a view
    ("convolution 2x16x16x64 -> 128, 3x3",
     lambda: load("convolution").convolution(2, 64, 16, 16, 128, 3, 1, 1, 1, 64, 128, 32, 3, 256), {}),
    ("convolution ragged 3x9x7x24 -> 40, stride 2, dilation 2",
     lambda: load("convolution").convolution(3, 24, 9, 7, 40, 3, 2, 2, 1, 64, 64, 32, 2, 128), {}),
    # MLA decoding: one KV head for 64 query heads; the split form is two kernels with two workspaces
    ("mla_decode 2x64 heads, kv 512, d256+64", lambda: load("mla_decode").flashattn(2, 64, 1, 512, 256, 64, 64, 64, 1,
                                                                                  (256 + 64) ** -0.5), {}),
    ("mla_decode 2x64 heads, kv 1024, d256+64, 4 splits",
     lambda: load("mla_decode").flashattn(2, 64, 1, 1024, 256, 64, 64, 64, 4, (256 + 64) ** -0.5), {}),
    # grouped GEMM: the block's group found by a loop of assignments to a T.alloc_var (held in shared memory);
    # the group sizes and offsets are the example's, not random
    ("grouped_gemm_fwd groups 64, 128, 256", lambda: grouped((64, 128, 256), 512, 512, 64, 64, 64), {}),
    ("grouped_gemm_fwd ragged groups 63, 1, 200", lambda: grouped((63, 1, 200), 520, 200, 64, 128, 64, 2, 256), {}),
    # GEMV as thread-level code: local buffers, shared partial sums added by every thread (element atomics)
    ("gemv naive_gemv 1024x1024", lambda: load("gemv").naive_gemv(1024, 1024, 128, 128), {}),
    ("gemv naive_splitk_gemv ragged 1000x1000", lambda: load("gemv").naive_splitk_gemv(1000, 1000, 32, 32), {}),
    ("gemv splitk_gemv ragged 1000x1000", lambda: load("gemv").splitk_gemv(1000, 1000, 32, 32, 4), {}),
    ("gemv splitk_gemv_vectorized 1024x2048", lambda: load("gemv").splitk_gemv_vectorized(1024, 2048, 32, 8), {}),
    # the README's Python quick start: a split-K GEMM, two kernels sharing a float32 workspace
    ("README split-K GEMM 512x384x1024, 4 splits", lambda: readme().matmul_splitk(512, 384, 1024, 128, 128, 32, 4), {}),
    ("README split-K GEMM ragged 300x200x1000, 3 splits",
     lambda: readme().matmul_splitk(300, 200, 1000, 128, 128, 32, 3), {}),
    ("blocksparse_gemm 512x512x512",
     lambda: load("blocksparse_gemm").blocksparse_matmul(512, 512, 512, 128, 128, 32, 2, 128, True), {}),
    ("blocksparse_gemm ragged 200x136x96",
     lambda: load("blocksparse_gemm").blocksparse_matmul(200, 136, 96, 64, 64, 32, 2, 128, False), {}),
]

TORCH_DT = {"bool": torch.bool, "int8": torch.int8, "int32": torch.int32, "int64": torch.int64,
            "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
            "float64": torch.float64, "uint8": torch.uint8}


def inputs(kernel, rng, given=None):
    """One (numpy, torch) pair per non-output parameter: the same values
    (random, or given[name] for the parameters a case gives)."""
    out = []
    for i, p in enumerate(kernel.func.params):
        if i in kernel.out_idx:
            continue
        if p["kind"] != "tensor":
            raise ValueError("scalar parameter '%s': the cases here have tensors only" % p["name"])
        shape = kernel.func.doc["params"][i]["shape"]
        dt = p["dtype"]
        if given and p["name"] in given:
            n = given[p["name"]]
            t = torch.from_numpy(n.copy())
        elif dt.startswith("float") or dt == "bfloat16":
            x = rng.standard_normal(shape).astype(np.float32) * 0.5
            t = torch.from_numpy(x).to(TORCH_DT[dt])
            n = t.float().numpy() if dt == "bfloat16" else t.numpy().copy()
        elif dt == "bool":
            n = rng.integers(0, 2, shape).astype(bool)
            t = torch.from_numpy(n.copy())
        else:
            info = np.iinfo(dt)
            n = rng.integers(max(info.min, -128), min(info.max, 127) + 1, shape).astype(dt)
            t = torch.from_numpy(n.copy())
        out.append((n, t.cuda()))
    return out


def compare(name, got, ref, dtype, tol):
    g = got.float().cpu().numpy().astype(np.float64) if dtype != "int32" else got.cpu().numpy()
    r = np.asarray(ref, np.float64) if dtype != "int32" else np.asarray(ref)
    if g.shape != r.shape:
        return "%s: shape %s, expected %s" % (name, g.shape, r.shape)
    if dtype not in TOL:
        bad = int((g != r).sum())
        return None if bad == 0 else "%s: %d elements differ" % (name, bad)
    if np.isnan(g).any() != np.isnan(r).any():
        return "%s: NaN in %s" % (name, "the GPU's output" if np.isnan(g).any() else "the reference")
    err = np.linalg.norm(np.nan_to_num(g - r)) / max(np.linalg.norm(np.nan_to_num(r)), 1e-30)
    return None if err <= tol else "%s: relative error %.3g > %g" % (name, err, tol)


def run_case(name, make, tols, rng):
    k = make()
    given = None
    if isinstance(k, tuple):  # (kernel, {parameter: the values it must have})
        k, given = k
    pairs = inputs(k, rng, given)
    ref = k(*[n for n, _ in pairs])  # interpreter; in-place params updated in the numpy arrays
    got = k(*[t for _, t in pairs])
    torch.cuda.synchronize()
    ref = ref if isinstance(ref, list) else ([] if ref is None else [ref])
    got = got if isinstance(got, list) else ([] if got is None else [got])
    problems = []
    for j, i in enumerate(k.out_idx):
        p = k.func.params[i]
        problems.append(compare(p["name"], got[j], ref[j], p["dtype"], tols.get(p["name"], TOL.get(p["dtype"], 0))))
    ins = [i for i in range(len(k.func.params)) if i not in k.out_idx]
    for (n, t), i in zip(pairs, ins):  # in-place tensors (and inputs, which must be unchanged)
        p = k.func.params[i]
        if p["kind"] == "tensor":
            problems.append(compare(p["name"] + " (in place)", t, n, p["dtype"],
                                    tols.get(p["name"], TOL.get(p["dtype"], 0))))
    return [x for x in problems if x]


DYN_N = 16


@tlir.jit(out_idx=[1])
def _dyn_kernel(block):
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, DYN_N), "float32"), Y: T.Tensor((m, DYN_N), "float32")):
        with T.Kernel(T.ceildiv(m, block), threads=128) as bx:
            for i, j in T.Parallel(block, DYN_N):
                Y[bx * block + i, j] = X[bx * block + i, j] * 2 + 1
    return main


@tlir.jit(out_idx=[1])
def _split_sum_kernel(block):
    """Two kernels sharing a workspace whose rows follow T.dynamic m: the
    row sums of X in two column halves, then their sum."""
    m = T.dynamic("m")

    @T.prim_func
    def main(X: T.Tensor((m, 2 * DYN_N), "float32"), Y: T.Tensor((m,), "float32")):
        W = T.alloc_global((2, m), "float32")
        with T.Kernel(T.ceildiv(m, block), 2, threads=128) as (bx, h):
            x = T.alloc_fragment((block, DYN_N), "float32")
            s = T.alloc_fragment((block,), "float32")
            T.copy(X[bx * block, h * DYN_N], x)
            T.reduce_sum(x, s, dim=1)
            T.copy(s, W[h, bx * block])
        with T.Kernel(T.ceildiv(m, block), threads=128) as bx:
            w = T.alloc_fragment((2, block), "float32")
            y = T.alloc_fragment((block,), "float32")
            T.copy(W[0, bx * block], w)
            T.reduce_sum(w, y, dim=0)
            T.copy(y, Y[bx * block])
    return main


def workspace_checks():
    """One kernel handle launched at growing and shrinking sizes: its
    workspace allocation is kept, grown (after the device is done with the
    old one) and reused; on a side stream too."""
    out = []
    k = _split_sum_kernel(64)
    for m in (10, 1000, 100000, 7, 300000):
        x = torch.randn(m, 2 * DYN_N, device="cuda")
        y = k(x)
        torch.cuda.synchronize()
        ok = y.shape == (m,) and torch.allclose(y, x.sum(1), rtol=1e-5, atol=1e-4)
        out.append(("two kernels, a workspace of 2 x %d (one handle)" % m, None if ok else "wrong result"))
    s = torch.cuda.Stream()
    x = torch.randn(5000, 2 * DYN_N, device="cuda")
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = k(x)
    s.synchronize()
    ok = torch.allclose(y, x.sum(1), rtol=1e-5, atol=1e-4)
    out.append(("two kernels and a workspace on a side stream", None if ok else "wrong result"))
    return out


def extra_checks(rng):
    """(name, problem or None) of the checks beyond the examples."""
    out = workspace_checks()
    k = _dyn_kernel(64)
    for m in (1, 100, 1000):
        x = torch.randn(m, DYN_N, device="cuda")
        y = k(x)
        torch.cuda.synchronize()
        ok = y.shape == (m, DYN_N) and torch.allclose(y, x * 2 + 1)
        out.append(("T.dynamic m=%d (one compile)" % m, None if ok else "wrong result"))
    s = torch.cuda.Stream()
    x = torch.randn(4096, DYN_N, device="cuda")
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = k(x)
    s.synchronize()
    out.append(("launch on a side stream", None if torch.allclose(y, x * 2 + 1) else "wrong result"))
    for name, arg, want in (("a CPU tensor is refused", torch.randn(8, DYN_N), "must be a CUDA tensor"),
                            ("a float16 tensor for float32 is refused",
                             torch.randn(8, DYN_N, device="cuda").half(), "is torch.float16"),
                            ("a non-contiguous tensor is refused",
                             torch.randn(DYN_N, 8, device="cuda").t(), "not contiguous")):
        try:
            k(arg)
            out.append((name, "no error"))
        except tlir.TlirError as e:
            out.append((name, None if want in e.message else e.message))
    src = load("gemm").matmul(256, 256, 128, 128, 128, 32).get_kernel_source()
    out.append(("get_kernel_source", None if "__global__" in src else src[:100]))
    return out


def bench():
    n = 4096
    k = load("gemm").matmul(n, n, n, 128, 128, 32)
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    res = {}
    for name, f in (("tlir", lambda: k(a, b)), ("torch.matmul", lambda: a @ b)):
        for _ in range(3):
            f()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(20):
            f()
        e1.record()
        torch.cuda.synchronize()
        res[name] = e0.elapsed_time(e1) / 20
    c = k(a, b)
    ref = a.float() @ b.float()
    err = ((c.float() - ref).norm() / ref.norm()).item()
    x = torch.randn(8, DYN_N, device="cuda")
    kd = _dyn_kernel(64)
    kd(x)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(200):
        kd(x)
    torch.cuda.synchronize()
    host_us = (time.perf_counter() - t) / 200 * 1e6
    print("BENCH gemm 4096^3 float16: tlir %.3f ms (%.0f TFLOPS), torch.matmul %.3f ms (%.0f TFLOPS), "
          "rel err %.2g; a small kernel's call from Python: %.1f us"
          % (res["tlir"], 2 * n ** 3 / res["tlir"] * 1e-9, res["torch.matmul"],
             2 * n ** 3 / res["torch.matmul"] * 1e-9, err, host_us))


# TileLang's examples run as programs, with their own main(): PyTorch
# inputs, torch.testing.assert_close or profiler.assert_allclose against
# their PyTorch references, get_kernel_source(), do_bench.
EXAMPLE_MAINS = [
    ["gemm.py"],
    ["rms_norm.py"],
    ["flash_attention_fwd.py", "--batch", "2", "--heads", "8", "--seq_len", "1024", "--dim", "128"],
    ["flash_attention_fwd.py", "--batch", "2", "--heads", "8", "--seq_len", "1024", "--dim", "128", "--is_causal"],
    ["topk.py"],
    ["flash_decoding.py"],
    ["flash_attention_bwd.py", "--batch", "2", "--h", "8", "--n_ctx", "1024"],
    ["block_sparse_attn.py"],
    ["convolution.py"],
    ["blocksparse_gemm.py"],
    ["grouped_gemm_fwd.py"],
]


def run_example_mains(only=""):
    out = []
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "client", "python"))
    for argv in EXAMPLE_MAINS:
        if not re.search(only, " ".join(argv)):
            continue
        name = "examples/tilelang/" + " ".join(argv) + " (its own main)"
        t = time.time()
        try:
            r = subprocess.run([sys.executable] + argv, cwd=os.path.join(ROOT, "examples", "tilelang"), env=env,
                               capture_output=True, text=True, timeout=600)
            tail = "\n".join((r.stdout + r.stderr).strip().split("\n")[-6:])
            problem = None if r.returncode == 0 else "exit %d:\n%s" % (r.returncode, tail)
            if problem is None and "\u274c" in r.stdout:  # some examples print a red cross and exit 0
                problem = "it printed a failure:\n%s" % tail
            if problem is None:
                print("      %s: %s" % (argv[0], " | ".join(l for l in r.stdout.split("\n")
                                                          if "ms" in l or "TFlops" in l or "pass" in l.lower())[:300]))
        except subprocess.TimeoutExpired:
            problem = "timed out after 600 s"
        out.append((name + "  (%.0fs)" % (time.time() - t), problem))
    return out


def start_server():
    d = tempfile.mkdtemp(prefix="tlir-server-")
    port_file = os.path.join(d, "port")
    srv = subprocess.Popen([os.path.join(ROOT, "build", "bin", "tlserverd"), "--listen", "127.0.0.1:0",
                            "--port-file", port_file, "--db", os.path.join(d, "cache.db")],
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "server.log"), "w"))
    deadline = time.time() + 90  # every worker opens and warms its toolchains before the port is written
    while not (os.path.exists(port_file) and open(port_file).read().strip()):
        if srv.poll() is not None or time.time() > deadline:
            srv.kill()
            raise SystemExit("tlserverd did not start (%s): %s" % (
                "exit %s" % srv.returncode if srv.returncode is not None else "no port after 90 s",
                open(os.path.join(d, "server.log")).read()[-2000:]))
        time.sleep(0.05)
    url = "http://127.0.0.1:%s" % open(port_file).read().strip()
    urllib.request.urlopen(url + "/healthz", timeout=10).read()
    return srv, url


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--server", action="store_true")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--no-bench", action="store_true")
    o = ap.parse_args()
    print("seed %d, %s" % (o.seed, torch.cuda.get_device_name()))
    rng = np.random.default_rng(o.seed)
    npass = nfail = 0
    rounds = [("local tlc", None)]
    srv = None
    if o.server:
        srv, url = start_server()
        rounds.append(("tlserverd", url))
    try:
        for label, url in rounds:
            if url:
                os.environ["TL_SERVER"] = url
            for name, make, tols in CASES:
                if not re.search(o.only, name):
                    continue
                t = time.time()
                try:
                    problems = run_case(name, make, tols, rng)
                except Exception:  # noqa: BLE001
                    problems = [traceback.format_exc()]
                if problems:
                    nfail += 1
                    print("FAIL  [%s] %s: %s" % (label, name, "; ".join(problems)))
                else:
                    npass += 1
                    print("PASS  [%s] %s  (%.1fs)" % (label, name, time.time() - t))
        # with --only: the example mains whose command line matches it, and no more
        for name, problem in (extra_checks(rng) if not o.only else []) + run_example_mains(o.only):
            if problem:
                nfail += 1
                print("FAIL  %s: %s" % (name, problem))
            else:
                npass += 1
                print("PASS  %s" % name)
        if not o.only and not o.no_bench:
            bench()
    finally:
        if srv:
            srv.terminate()
            srv.wait()
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
