#!/usr/bin/env python3
"""bench/w4a16_floor.py - what streaming W4A16's weights costs at the least, timed the way
bench/gpu_bench.py times W4A16 (CUDA events around one launch, 256 MiB of device memory written
before each, so that the L2 holds none of the data and is full of dirty lines): cuBLAS's float16
GEMV of a [8192, 2048] float16 matrix, the 32 MiB that N = K = 8192 weights of 4 bits take, at
M = 1 and 16, and torch's sum and copy of 32 MiB.  Needs torch and a GPU.

    /opt/torch/.venv/bin/python bench/w4a16_floor.py
"""
import torch
flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
def t(f, n=200):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True); ts = []
    f(); torch.cuda.synchronize()
    for _ in range(n):
        flush.fill_(1); s.record(); f(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); return sum(ts) / n, ts[0]
W = torch.randn(8192, 2048, dtype=torch.float16, device="cuda"); x = torch.randn(2048, 1, dtype=torch.float16, device="cuda")
X16 = torch.randn(2048, 16, dtype=torch.float16, device="cuda")
B = torch.randint(0, 255, (32 * 1024 * 1024,), dtype=torch.uint8, device="cuda").view(torch.int32)


def check(name, got, want, bound):
    """Every result is checked before it is timed: float16 products of 2048 terms against float64 sums
    (bound: sums of 2048 terms each rounded to float16, 2048 * 2^-11 of the sum of |w||x|, and the output's
    own rounding), the sum and the copy exactly (bound None)."""
    if bound is None:
        if not torch.equal(got, want):
            raise SystemExit(f"FAIL {name}: not exact")
        return
    err = (got.double() - want).abs().max().item()
    if not err <= bound:
        raise SystemExit(f"FAIL {name}: max error {err:g} over the bound {bound:g}")


Wd, xd, X16d = W.double(), x.double(), X16.double()
gemv_bound = lambda ref: float((Wd.abs() @ (xd if ref.shape[1] == 1 else X16d).abs()).max()) * 2048 * 2.0 ** -11 + \
    float(ref.abs().max()) * 2.0 ** -11
cases = (("cuBLAS f16 [8192,2048] x [2048,1] (32 MiB)", lambda: W @ x, Wd @ xd),
         ("cuBLAS f16 [8192,2048] x [2048,16]", lambda: W @ X16, Wd @ X16d),
         ("torch sum of 32 MiB int32", lambda: B.sum(), B.cpu().long().sum().cuda()),
         ("torch copy 32 MiB -> 32 MiB", lambda: B.clone(), B.cpu().cuda()))
for name, f, want in cases:
    check(name, f(), want, gemv_bound(want) if name.startswith("cuBLAS") else None)
    m, l = t(f); print(f"{name}: mean {m*1000:.1f} us, least {l*1000:.1f} us")
