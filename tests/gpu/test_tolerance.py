#!/usr/bin/env python3
"""tests/gpu/test_tolerance.py - the comparison of tests/gpu/tolerance.py
(used by check_examples.py and gpu_bench.py on the GPU machine) on
synthetic arrays, with no GPU: a 1024 x 1024 x 1024 float16 gemm with a
float32 accumulator computed in other orders (exactly, then rounded; in
16-wide k steps like mma.sync; with every add truncated like the tensor
cores) must pass; one wrong 8 x 8 tile (the last 32-wide k block left
out), one element past its bound, an unwritten (NaN) element and a bfloat16
output off in one tile must fail; a float8 gemm whose adds keep 14 bits
passes the float8 bound (and not the float32 one), and a wrong tile fails
it; packed codes compare exactly.  It also shows that the former check
(relative error of the norm within 1e-2) let the wrong tile through.

Prints one line per check; exit 0 when all passed, 1 otherwise.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tolerance  # noqa: E402

failures = 0


def check(ok, what, detail=""):
    global failures
    print("%s: %s%s" % ("ok" if ok else "FAIL", what, (" (%s)" % detail) if detail else ""))
    failures += not ok


def to_bf16(x):
    """float32 -> the nearest bfloat16 (ties to even), as float32."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def to_fp8(x):
    """x rounded to 4 significant bits (float8_e4m3's significand; the
    values used stay inside its exponent range), as float64."""
    mant, e = np.frexp(np.asarray(x, np.float64))
    return np.ldexp(np.round(mant * 16) / 16, e)


def trunc_bits(x, p):
    """x truncated (toward zero) to p significant bits."""
    mant, e = np.frexp(x)
    return np.ldexp(np.trunc(mant * 2.0 ** p) / 2.0 ** p, e)


def truncating_sum(a, b, step):
    """a @ b in float32, k in steps of `step` (one mma's k), each step's sum
    added to the accumulator rounding toward zero (the tensor cores')."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(0, a.shape[1], step):
        part = a[:, k:k + step].astype(np.float64) @ b[k:k + step, :].astype(np.float64)
        s = acc.astype(np.float64) + part
        r = s.astype(np.float32)  # nearest; step back toward zero where that rounded away
        away = np.abs(r.astype(np.float64)) > np.abs(s)
        r[away] = np.nextafter(r[away], np.float32(0))
        acc = r
    return acc


def main():
    rng = np.random.default_rng(1)
    n = 1024
    A = rng.standard_normal((n, n)).astype(np.float16)
    B = rng.standard_normal((n, n)).astype(np.float16)
    A32, B32 = A.astype(np.float32), B.astype(np.float32)
    ref = (A32 @ B32).astype(np.float16)  # the reference: float32 sums, rounded
    absref = np.abs(A32).astype(np.float64) @ np.abs(B32).astype(np.float64)

    def cmp(dev, what, want):
        good, msg = tolerance.compare(dev, ref, "float16", L=n, absref=absref)
        check(good == want, what, msg)

    exact = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float16)
    cmp(exact, "exact sums rounded once pass", True)
    steps = np.zeros((n, n), np.float32)
    for k in range(0, n, 16):
        steps += A32[:, k:k + 16] @ B32[k:k + 16, :]
    cmp(steps.astype(np.float16), "float32 sums in 16-wide k steps pass", True)
    cmp(truncating_sum(A, B, 16).astype(np.float16), "sums truncated at every step pass", True)
    d = np.abs(exact.astype(np.float64) - ref.astype(np.float64))
    print("measured: exact vs float32 reference: %d elements differ, the largest difference is "
          "%.2f of its bound" % (int((d != 0).sum()), np.max(d / tolerance.bound(ref, "float16", n, absref))))

    wrong = exact.copy()
    wrong[512:520, 256:264] = (A32[512:520, :n - 32] @ B32[:n - 32, 256:264]).astype(np.float16)
    cmp(wrong, "a wrong 8x8 tile (its last k block left out) fails", False)
    rel = np.linalg.norm(wrong.astype(np.float64) - ref) / np.linalg.norm(ref.astype(np.float64))
    check(rel <= 1e-2, "the former check (norm within 1e-2) let that tile through",
          "relative error of the norm %.2e" % rel)

    one = exact.copy().astype(np.float64)
    tol = tolerance.bound(ref, "float16", n, absref)
    one[3, 5] = ref[3, 5] + 2 * tol[3, 5]
    cmp(one.astype(np.float16), "one element at twice its bound fails", False)
    unwritten = exact.copy()
    unwritten[1023, 1023] = np.nan
    cmp(unwritten, "an unwritten (NaN) element fails", False)
    cmp(exact[:512], "a wrong shape fails", False)

    # bfloat16 output of float32 sums, 256 x 256 x 512
    m, k = 256, 512
    a = to_bf16(rng.standard_normal((m, k)))
    b = to_bf16(rng.standard_normal((k, m)))
    bref = to_bf16(a @ b)
    babs = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    good, msg = tolerance.compare(to_bf16((a.astype(np.float64) @ b).astype(np.float32)), bref, "bfloat16",
                                  L=k, absref=babs)
    check(good, "bfloat16: exact sums rounded once pass", msg)
    bad = bref.copy()
    bad[8:16, 8:16] = to_bf16(a[8:16, :k - 32] @ b[:k - 32, 8:16])
    good, msg = tolerance.compare(bad, bref, "bfloat16", L=k, absref=babs)
    check(not good, "bfloat16: a wrong 8x8 tile fails", msg)

    # float8 operands, float32 output: a Hopper float8 tensor core keeps about
    # 14 bits while it accumulates (tolerance.U_DEV_FP8); modelled here as
    # every add truncated to 14 significant bits, K = 336
    m, k = 128, 336
    a8, b8 = to_fp8(rng.standard_normal((m, k)) * 4), to_fp8(rng.standard_normal((k, m)) * 4)
    fref = (a8.astype(np.float64) @ b8).astype(np.float32)
    fabs = np.abs(a8) @ np.abs(b8)
    acc = np.zeros((m, m))
    for i in range(k):
        acc = trunc_bits(acc + np.outer(a8[:, i], b8[i, :]), 14)
    fdev = acc.astype(np.float32)
    good, msg = tolerance.compare(fdev, fref, "float32", L=k, absref=fabs, u_dev=tolerance.U_DEV_FP8)
    check(good, "float8: sums truncated to 14 bits at every add pass the float8 bound", msg)
    good, msg = tolerance.compare(fdev, fref, "float32", L=k, absref=fabs)
    check(not good, "float8: the same sums are past the float32 accumulation bound", msg)
    bad = fdev.copy()
    bad[8:16, 8:16] = -bad[8:16, 8:16]
    bad[20, 20] = 0.0 if fref[20, 20] != 0 else 1.0
    good, msg = tolerance.compare(bad, fref, "float32", L=k, absref=fabs, u_dev=tolerance.U_DEV_FP8)
    check(not good, "float8: a tile of the wrong sign fails the float8 bound", msg)

    ints = np.arange(100, dtype=np.int32)
    check(tolerance.compare(ints.copy(), ints, "int32")[0], "equal integers pass")
    off = ints.copy()
    off[7] += 1
    check(not tolerance.compare(off, ints, "int32")[0], "integers off by one fail")
    codes = rng.integers(0, 16, 64).astype(np.uint8)  # e.g. float4_e2m1 or uint4 outputs, one per byte
    check(tolerance.compare(codes.copy(), codes, "float4_e2m1")[0], "equal packed codes pass")
    off = codes.copy()
    off[3] ^= 1
    check(not tolerance.compare(off, codes, "float8_e5m2")[0], "packed codes off in one bit fail")
    c = tolerance.sum_coefficient(1024)
    check(abs(c / (3 * 1024 * 2.0 ** -24) - 1) < 1e-3, "the sum coefficient for L = 1024 is about 3 L u",
          "%.4g" % c)

    print("test_tolerance.py: %s" % ("all passed" if not failures else "%d failed" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
