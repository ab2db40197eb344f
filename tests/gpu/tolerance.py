"""tests/gpu/tolerance.py - how far a GPU's output may be from the
reference, element by element, from the arithmetic (used by
tests/gpu/check_examples.py and bench/gpu_bench.py; tested on synthetic
arrays by tests/gpu/test_tolerance.py in `make test`).

The bound for one output element y (reference r, computed on both sides as
a float32 sum of L terms x_1..x_L, then rounded to the output dtype):

  |y_dev - y_ref| <= ULPS * ulp(r) + (gamma(L, u) + gamma(L, u_dev)) * A + extra * A

where u = 2^-24 is float32's unit roundoff, gamma(n, v) = n v / (1 - n v),
A = sum |x_i| (the same computation on the absolute values of the inputs
that enter the sum: the caller supplies it, e.g. |A| @ |B| for a gemm), and

* the sums: the products of float16 or bfloat16 inputs are exact in float32
  (11 + 11 and 8 + 8 significant bits fit in 24), so the only errors are
  the L - 1 additions.  Recursive summation in round-to-nearest is within
  gamma(L - 1, u) * A of the exact sum in any order (Higham, Accuracy and
  Stability of Numerical Algorithms, 2nd ed., section 4.2): that is the
  interpreter's side.  The tensor cores' adds round toward zero and
  align without a guard bit (Fasi, Higham, Mikaitis, Pranesh, "Numerical
  behavior of NVIDIA tensor cores", PeerJ CS 2021), an error of at most
  2u per add: gamma(L, 2u) * A on the GPU's side (u_dev = 2u).  The two
  sums are then within the sum of the two bounds of each other.
* float8 operands (e4m3, e5m2) on Hopper's tensor cores (wgmma, and
  mma.sync m16n8k32): their products are exact too (4 + 4 significant bits
  at most), but the tensor cores keep only about 14 significant bits in the
  accumulator while they add (DeepSeek-V3 technical report, section 3.3.2;
  DeepGEMM promotes to float32 every 128 products for that reason; an
  H100 run of a float8 gemm measured errors 1.46 times the float32 bound
  above).  An add that truncates to 14 bits is off by at most 2^-13 of its
  result, the same model as the float32 adds with 2u = 2^-13, so the GPU's
  side is within gamma(L, U_DEV_FP8) * A, U_DEV_FP8 = 2^-13, for a chain
  of L such adds (no assumption on how the hardware groups them: every
  product may be its own add).  A kernel that promotes its sums to float32
  every B products (a block-scaled float8 gemm) passes L = B here and
  accounts for its K / B float32 adds of the scaled block sums on top.
  The bound is wide (gamma(336, 2^-13) = 4.3% of A), but an unwritten,
  NaN or garbage element still fails, and integer and packed outputs stay
  exact.
* the rounding to the output dtype: each side rounds its float32 sum to
  nearest, within half an ulp of the output dtype, so two sums within d of
  each other round to values within d + 1 ulp.  The ulp is taken at |r|;
  when the two straddle a power of two the larger one's ulp is twice r's,
  hence ULPS = 2.
* extra: a relative term a computation adds beyond its sums, derived where
  a case declares it (flash attention rounds its probabilities to float16
  for the second gemm: check_examples.py says why it adds one float16 unit
  roundoff).

A wrong element is off by about the element's own size, which for float16
is 2^10 ulps; rounding differences and summation order stay within a few.
Integers, and the packed sub-byte and float8 code outputs (any dtype
without an entry in EPS), compare exactly; NaN must be NaN on both sides
(outputs start poisoned with NaN, so an element the kernel never writes
shows).
"""
import numpy as np

U32 = 2.0 ** -24
ULPS = 2
U_DEV_FP8 = 2.0 ** -13  # Hopper's float8 tensor cores: about 14 significant bits while accumulating
# machine epsilon (the ulp of 1.0) and the smallest normal number per dtype
EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}
MIN_NORMAL = {"float16": 2.0 ** -14, "bfloat16": 2.0 ** -126, "float32": 2.0 ** -126,
              "float64": 2.0 ** -1022}


def gamma(n, u):
    """Higham's gamma_n = n u / (1 - n u) (n u < 1)."""
    nu = n * u
    if nu >= 1:
        raise ValueError("gamma(%d, %g): n u >= 1, no bound" % (n, u))
    return nu / (1 - nu)


def ulp(x, dtype):
    """The spacing of dtype's numbers at |x| (elementwise; subnormals have
    the spacing of the smallest normal binade)."""
    a = np.maximum(np.abs(np.asarray(x, np.float64)), MIN_NORMAL[dtype])
    return np.exp2(np.floor(np.log2(a))) * EPS[dtype]


def sum_coefficient(L, u_dev=2 * U32):
    """(gamma(L, u) + gamma(L, u_dev)): the interpreter's float32 sums of L
    terms and the GPU's (adds of unit roundoff u_dev / 2 that truncate:
    2u for float32 tensor-core sums, U_DEV_FP8 for float8 operands),
    relative to the sum of the terms' absolute values."""
    return gamma(L, U32) + gamma(L, u_dev) if L > 1 else 0.0


def bound(ref, dtype, L=0, absref=None, extra=0.0, u_dev=2 * U32):
    """The largest |dev - ref| allowed per element (float64 array)."""
    tol = ULPS * ulp(ref, dtype)
    if absref is not None:
        a = np.abs(np.asarray(absref, np.float64))
        tol = tol + (sum_coefficient(L, u_dev) + extra) * a
    return tol


def compare(dev, ref, dtype, L=0, absref=None, extra=0.0, u_dev=2 * U32):
    """Compares dev with ref element by element.  Returns (good, message):
    good is False when any element is outside bound(...), when NaNs differ
    in place, or when shapes differ; the message says how many and the
    worst one (index, values, bound)."""
    dev = np.asarray(dev)
    ref = np.asarray(ref)
    if dev.shape != ref.shape:
        return False, "shape %s, want %s" % (dev.shape, ref.shape)
    if dtype not in EPS:  # integers and bool: exactly
        bad = dev != ref
        n = int(bad.sum())
        if not n:
            return True, "exact"
        i = np.unravel_index(np.argmax(bad), bad.shape)
        return False, "%d elements differ (first at %s: %s, want %s)" % (n, i, dev[i], ref[i])
    d = dev.astype(np.float64)
    r = ref.astype(np.float64)
    nan_d, nan_r = np.isnan(d), np.isnan(r)
    nan_bad = int((nan_d != nan_r).sum())
    tol = bound(np.nan_to_num(r), dtype, L, absref, extra, u_dev)
    diff = np.abs(np.nan_to_num(d) - np.nan_to_num(r))
    diff[nan_d & nan_r] = 0
    inf_bad = np.isinf(d) != np.isinf(r)
    over = (diff > tol) | inf_bad
    over[nan_d != nan_r] = True
    n = int(over.sum())
    if not over.size:
        return True, "empty"
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(tol > 0, diff / tol, 0.0)
    key = np.where(over, np.inf, ratio)  # the first element outside, else the closest to it
    k = np.unravel_index(int(np.argmax(key)), key.shape)
    where = "worst at %s: %.6g, want %.6g, |diff| %.3g, bound %.3g (%.2f of it)" % (
        tuple(int(i) for i in k), d[k], r[k], diff[k], tol[k], ratio[k])
    if n:
        return False, "%d of %d elements outside the bound (%d NaN where the reference has none " \
                      "or the reverse); %s" % (n, over.size, nan_bad, where)
    return True, "every element within the bound; %s" % where
