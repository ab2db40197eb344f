#!/usr/bin/env python3
"""tests/python/test_tlir_emit.py - `python3 -m tlir emit` and the seeds'
style of running a kernel.

* The TileLang README's GEMM (examples/tilelang/gemm.py, through @jit)
  emitted at 256^3 passes `tlc check`, and the interpreter gives exactly
  (bit for bit) what the hand-written examples/gemm.json gives with
  -D M=N=K=256 on the same inputs: both are the same tile program.
* FUNCTION may be a prim_func itself (no NAME=VALUE then); NAME=VALUE values
  are Python literals or strings; a wrong command line exits 2 with the
  usage, a translation error exits 1 with FILE:LINE: error: MESSAGE.
* The seeds' style: tilelang.lower(func) -> (rt_mod, params),
  Profiler(rt_mod, params, result_idx=[2]), profiler(a, b), and
  rt_mod.imported_modules[0].get_source() (CUDA C from tlc, no GPU needed);
  T.dynamic sizes bound from the arrays' shapes; T.macro; Python-level
  `if` and `for` over Python values (metaprogramming) and a Tile IR `if`
  from an `if` on a tile value.
* `pip install --no-index ./client/python` (offline) gives a tlir that emits.
* libtlclient through ctypes (the PyTorch path's launcher; running on a
  GPU is tests/gpu/tlir_torch.py): it loads, and its errors read back.
Prints one line per check and "N passed, N failed"; exit 77 without
NumPy or tlc.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYDIR = os.path.join(ROOT, "client", "python")
sys.path.insert(0, PYDIR)
try:
    import numpy as np
except ImportError:
    sys.stderr.write("no NumPy for %s (apt-get install python3-numpy)\n" % sys.executable)
    sys.exit(77)
import tlir  # noqa: E402

try:
    TLC = tlir.find_tlc()
except tlir.TlirError as e:
    sys.stderr.write("%s\n" % e)
    sys.exit(77)

results = []


def check(name, cond, detail=""):
    results.append(bool(cond))
    print("%s  %s%s" % ("PASS" if cond else "FAIL", name, "" if cond else ": " + detail))


def emit(*args, env_extra=None):
    env = dict(os.environ, PYTHONPATH=PYDIR, **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "tlir", "emit"] + list(args),
                          capture_output=True, text=True, env=env, cwd=ROOT)


def tlc(*args):
    return subprocess.run([TLC] + list(args), capture_output=True, text=True)


def main():
    d = tempfile.mkdtemp(prefix="tlir-emit-")
    sys.path.insert(0, d)  # removed at the end (see the bottom of the file)
    # 1. emit the README GEMM and compare with examples/gemm.json
    r = emit("examples/tilelang/gemm.py", "matmul", "M=256", "N=256", "K=256",
             "block_M=128", "block_N=128", "block_K=32")
    check("emit gemm.py matmul exits 0", r.returncode == 0, r.stderr)
    doc = json.loads(r.stdout)
    check("the document is Tile IR v1 named after the prim_func",
          doc["tlir"] == 1 and doc["name"] == "gemm" and [p["name"] for p in doc["params"]] == ["A", "B", "C"],
          r.stdout[:200])
    prog = os.path.join(d, "gemm.json")
    with open(prog, "w") as f:
        f.write(r.stdout)
    c = tlc("check", prog)
    check("tlc check accepts it", c.returncode == 0, c.stderr)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((256, 256)).astype(np.float16)
    b = rng.standard_normal((256, 256)).astype(np.float16)
    np.save(os.path.join(d, "a.npy"), a)
    np.save(os.path.join(d, "b.npy"), b)
    outs = []
    for p, extra in ((prog, []), (os.path.join(ROOT, "examples", "gemm.json"),
                                  ["-D", "M=256", "-D", "N=256", "-D", "K=256"])):
        o = os.path.join(d, "c%d.npy" % len(outs))
        rr = tlc("run", p, "--interpret", *extra, "--in", "A=" + os.path.join(d, "a.npy"),
                 "--in", "B=" + os.path.join(d, "b.npy"), "--out", "C=" + o)
        check("tlc run --interpret %s" % os.path.basename(p), rr.returncode == 0, rr.stderr)
        outs.append(np.load(o))
    check("emitted GEMM == examples/gemm.json bit for bit", np.array_equal(outs[0], outs[1]),
          "max diff %g" % np.abs(outs[0].astype(float) - outs[1]).max())

    r = emit("examples/tilelang/flash_attention_fwd.py", "flashattn", "batch=1", "heads=2", "seq_len=100",
             "dim=64", "is_causal=True", "block_M=64", "block_N=64", "num_stages=1", "threads=128",
             env_extra={"TL_TLC": os.path.join(d, "no-such-tlc")})
    check("emit of an @autotune @jit function compiles nothing (no tlc needed)",
          r.returncode == 0 and json.loads(r.stdout)["kernel"]["grid"] == [2, 2, 1], r.stderr)

    # 2. FUNCTION is a prim_func; literal parsing; errors
    mod = os.path.join(d, "mod.py")
    with open(mod, "w") as f:
        f.write('''import tlir.language as T

N = 64


@T.prim_func
def add_one(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(N):
            B[i] = A[i] + 1.0


def scaled(n, scale, dtype, flag):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(n):
                A[i] = A[i] * scale if flag else A[i]
    return main


def broken(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            A[0] = T.atan(A[1])
    return main
''')
    r = emit(mod, "add_one")
    check("emit of a module-level prim_func", r.returncode == 0 and
          json.loads(r.stdout)["kernel"]["body"][0]["body"] == ["B[i] = A[i] + 1.0"], r.stdout + r.stderr)
    r = emit(mod, "scaled", "n=16", "scale=0.5", "dtype=float16", "flag=True")
    ok = r.returncode == 0 and json.loads(r.stdout)["params"][0]["dtype"] == "float16" and \
        json.loads(r.stdout)["kernel"]["body"][0]["body"] == ["A[i] = A[i] * 0.5"]
    check("NAME=VALUE: int, float, bare string, bool", ok, r.stdout + r.stderr)
    r = emit(mod, "broken", "n=8")
    line = next(i + 1 for i, l in enumerate(open(mod).read().split("\n")) if "T.atan" in l)
    check("translation error: exit 1, FILE:LINE: error:", r.returncode == 1 and
          r.stderr.strip() == "%s:%d: error: T.atan: Tile IR v1 has no function atan" % (mod, line), r.stderr)
    r = emit(mod, "nope")
    check("unknown function: exit 1", r.returncode == 1 and "has no function 'nope'" in r.stderr, r.stderr)
    r = emit(mod, "scaled", "n")
    check("an argument without '=': exit 2", r.returncode == 2 and "is not NAME=VALUE" in r.stderr, r.stderr)
    r = emit(os.path.join(d, "missing.py"), "f")
    check("a file that cannot be read: exit 2", r.returncode == 2 and "cannot read" in r.stderr, r.stderr)
    r = subprocess.run([sys.executable, "-m", "tlir"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=PYDIR))
    check("no command: exit 2 with the usage", r.returncode == 2 and r.stderr.startswith("usage:"), r.stderr)

    # 3. the seeds' style, T.dynamic, T.macro, Python-level metaprogramming
    with open(os.path.join(d, "seed.py"), "w") as f:
        f.write('''import tlir as tilelang
from tlir import Profiler
import tlir.language as T


def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def main(
        A: T.Buffer((M, K), dtype),
        B: T.Buffer((K, N), dtype),
        C: T.Buffer((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local  = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


def matmul_evict(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    """matmul with T.copy's eviction_policy: B streamed (evict_first), A kept (evict_last), one copy between
    shared buffers (no tensor read: Tile IR drops the hint), one evict_normal (no field)."""
    @T.prim_func
    def main(
        A: T.Buffer((M, K), dtype),
        B: T.Buffer((K, N), dtype),
        C: T.Buffer((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_shared = T.alloc_shared((block_M, block_N), dtype)
            C_local  = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared, eviction_policy="evict_last")
                T.copy(B[k * block_K, bx * block_N], B_shared, eviction_policy="evict_first")
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C_shared, eviction_policy="evict_first")
            T.copy(C_shared, C[by * block_M, bx * block_N], eviction_policy="evict_normal")
    return main


@tilelang.jit(out_idx=[1])
def scale_rows(block, relu, unroll):
    m = T.dynamic("m")

    @T.macro
    def body(X, Y, r):
        for i in T.Parallel(block):
            v = X[r * block + i] * 2
            if relu:  # Python-level: decided while translating
                Y[r * block + i] = T.max(v, 0)
            else:
                Y[r * block + i] = v

    @T.prim_func
    def main(X: T.Tensor((m,), "float32"), Y: T.Tensor((m,), "float32")):
        with T.Kernel(T.ceildiv(m, block * unroll), threads=128) as bx:
            for u in range(unroll):  # a T.serial loop inside the kernel
                body(X, Y, bx * unroll + u)
            if bx == 0:  # a Tile IR if: bx is a tile value
                Y[0] = -1.0
    return main


@tilelang.jit(out_idx=[1])
def branches(n):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(n):
                if X[i] > 1 and not X[i] > 2:
                    Y[i] = 1.5
                elif X[i] < -1 or i == 0:
                    Y[i] = -1.0 if n > 4 else -2.0  # Python-level: n is a Python int
                else:
                    Y[i] = X[i] * 2 if i % 2 == 0 else X[i]  # if_then_else
    return main


@tilelang.jit(out_idx=[1, 2])
def if_values(m, n, bm=32):
    @T.prim_func
    def main(X: T.Tensor((m, n), "float32"), Y: T.Tensor((m, n), "float32"), L: T.Tensor((m,), "float32")):
        with T.Kernel(T.ceildiv(m, bm), threads=64) as bx:
            acc = T.alloc_fragment((bm, n), "float32")
            x_local = T.alloc_local((1,), "float32")
            cnt = T.alloc_var("int32")
            T.copy(X[bx * bm, 0], acc)
            for i, j in T.Parallel(bm, n):
                if acc[i, j] > 0:  # on a fragment element, per iteration
                    acc[i, j] = acc[i, j] * 2
                elif acc[i, j] < -1:
                    acc[i, j] = -1
            T.copy(acc, Y[bx * bm, 0])
            tx = T.get_thread_binding()
            if tx < bm:
                x_local[0] = X[bx * bm + tx, 0]
                cnt = 0
                for j in T.serial(n):
                    if X[bx * bm + tx, j] > x_local[0]:  # on a local value, per thread
                        cnt += 1
                if x_local[0] > 0 and cnt > 1:
                    L[bx * bm + tx] = x_local[0]
                else:
                    L[bx * bm + tx] = T.Cast("float32", cnt)
    return main


@tilelang.jit(out_idx=[2, 3])
def views(m):
    @T.prim_func
    def main(X: T.Tensor((m, 64), "int8"), W: T.Tensor((16, 8), "uint8"), Y: T.Tensor((m, 16), "int32"),
             Z: T.Tensor((16, 16), "float32")):
        with T.Kernel(T.ceildiv(m, 16), threads=64) as bx:
            X32 = T.view(X, (m, 16), dtype="int32")  # the bytes of X as int32 words
            W4 = T.view(W, (16, 16), dtype="uint4")  # uint8 weights as packed uint4
            s = T.alloc_shared((16, 16), "float32")
            s1 = T.reshape(s, (256,))
            T.copy(X32[bx * 16:bx * 16 + 16, 0:16], Y[bx * 16, 0])
            for i in T.Parallel(256):
                s1[i] = T.Cast("float32", W4[i // 16, i % 16]) + i
            if bx == 0:
                T.copy(s, Z)
    return main


@tilelang.jit(out_idx=[1])
def local_fills(n):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            tx = T.get_thread_binding()
            acc = T.alloc_local((2, 3), "float32")
            cnt = T.alloc_var("int32")
            T.fill(acc, 0.5)  # every element, in every thread
            T.clear(cnt)
            for i in T.serial(2):
                for j in T.serial(3):
                    acc[i, j] += X[bx * 64 + tx]
                    cnt += 1
            Y[bx * 64 + tx] = acc[1, 2] + cnt.astype("float32")
    return main


@tilelang.jit(out_idx=[1, 2])
def views_in_loops(m):
    @T.prim_func
    def main(X: T.Tensor((m, 32), "float32"), Y: T.Tensor((m, 32), "float32"), Z: T.Tensor((m, 32), "int32")):
        with T.Kernel(T.ceildiv(m, 16), threads=64) as bx:
            s = T.alloc_shared((16, 32), "float32")
            T.copy(X[bx * 16, 0], s)
            for kk in T.serial(3):
                flat = T.reshape(s, (512,))  # a view inside a loop: recorded in the kernel's body
                for i in T.Parallel(512):
                    flat[i] = flat[i] * 2 + kk
            T.copy(s, Y[bx * 16, 0])
            for i, j in T.Parallel(16, 32):
                bits = T.view(X, (m, 32), dtype="int32")  # ... and inside a parallel loop
                Z[bx * 16 + i, j] = bits[bx * 16 + i, j]
    return main


@tilelang.jit(out_idx=[2, 3])
def frag_reads(m, n, bm=16):
    @T.prim_func
    def main(X: T.Tensor((m, n), "float32"), F: T.Tensor((m,), "int32"), Y: T.Tensor((m, n), "float32"),
             C: T.Tensor((T.ceildiv(m, bm),), "int32")):
        with T.Kernel(T.ceildiv(m, bm), threads=64) as bx:
            flags = T.alloc_fragment((bm,), "int32")  # read by thread-level code: held in shared memory
            tile = T.alloc_shared((1, n), "float32")
            total = T.alloc_var("int32")
            T.copy(F[bx * bm], flags)
            first = T.alloc_var("int32", init=flags[0])  # ... read by an alloc_var's init
            total = 0
            for r in T.serial(bm):
                total += flags[r]  # a fragment element read in a serial loop
                if flags[r] != 0:  # ... and in an if that holds tile operators
                    T.copy(X[bx * bm + r, 0], tile)
                else:
                    T.fill(tile, -1.0)
                T.copy(tile, Y[bx * bm + r, 0])
            tx = T.get_thread_binding()
            if tx == 0:
                C[bx] = total + 100 * first
    return main


@tilelang.jit(out_idx=[1])
def var_regions(m, n=16):
    @T.prim_func
    def main(X: T.Tensor((m, n), "float32"), Y: T.Tensor((16, n), "float32"), R: T.Tensor((2,), "int32")):
        with T.Kernel(2, threads=64) as bx:
            row = T.alloc_var("int32", init=bx * 8)
            s = T.alloc_shared((8, n), "float32")
            for k in T.serial(2):
                row += R[k]  # assignments in a block-level loop
            T.copy(X[row, 0], s)  # a region uses the alloc_var: held in shared memory
            T.copy(s, Y[bx * 8, 0])
    return main


@tilelang.jit(out_idx=[1])
def var_fill(m=64):
    @T.prim_func
    def main(X: T.Tensor((m,), "float32"), Y: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            v = T.alloc_var("float32")
            v = X[0] * 2
            f = T.alloc_fragment((m,), "float32")
            T.fill(f, v)  # a tile operator's value: the alloc_var is held in shared memory
            T.copy(f, Y)
    return main


@tilelang.jit(out_idx=[1])
def frag_too_big(m=256, n=256):
    @T.prim_func
    def main(A: T.Tensor((m, n), "float32"), B: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((m, n), "float32")  # 256 KiB once held in shared memory
            T.copy(A, x)
            if x[0, 0] > 0:
                T.copy(A[0, 0:m], B)
    return main


@tilelang.jit(out_idx=[2])
def nested(m, n):
    @T.prim_func
    def main(X: T.Tensor((m, n), "float32"), S: T.Tensor((m, n), "float32"), Y: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(m):
                for j in T.Parallel(n):  # nested: one parallel loop over (i, j)
                    Y[i, j] = X[i, j] + 1
            for i in T.Parallel(m):
                for j in T.Parallel(n):  # element atomics over (i, j): one tile atomic_add
                    T.atomic_add(S[i, j], X[i, j])
    return main


@tilelang.jit(out_idx=[1])
def math_fns(n):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((4, n), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(n):
                Y[0, i] = T.erf(X[i]) + T.sin(X[i]) * T.cos(X[i])
                Y[1, i] = T.clamp(X[i], -0.5, 0.5) + T.trunc(X[i] * 4)
                Y[2, i] = T.log1p(T.abs(X[i])) + T.expm1(X[i]) + T.log10(T.abs(X[i])) + T.tan(X[i])
                Y[3, i] = T.if_then_else(T.isnan(T.log(X[i])), 1.0, 0.0) + T.isinf(X[i])
    return main


@tilelang.jit(out_idx=[1, 2])
def nested_more(m, n):
    @T.prim_func
    def main(X: T.Tensor((m, n), "float32"), Y: T.Tensor((m, n), "float32"), R: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            acc = T.alloc_fragment((m,), "float32")
            for i in T.Parallel(m):  # TileLang's nested loops: statements around the inner loops
                s = X[i, 0] * 2
                acc[i] = s
                for j in T.Parallel(n):
                    Y[i, j] = X[i, j] + s
                R[i] = acc[i] + 1
                for j in T.Parallel(n):
                    T.atomic_add(R[i], Y[i, j])
    return main


@tilelang.jit(out_idx=[2, 3, 4])
def scans(m, n):
    @T.prim_func
    def main(X: T.Tensor((m, n), "int32"), F: T.Tensor((m, n), "float32"), O: T.Tensor((m,), "int32"),
             A: T.Tensor((m,), "int32"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=64) as bx:
            x = T.alloc_fragment((m, n), "int32")
            f = T.alloc_fragment((m, n), "float32")
            r = T.alloc_fragment((m,), "int32")
            r2 = T.alloc_fragment((m,), "int32")
            T.copy(X, x)
            T.copy(F, f)
            T.reduce_bitor(x, r, dim=1)
            T.reduce_bitand(x, r2, dim=1)
            T.cummax(f, dim=1)
            T.copy(r, O)
            T.copy(r2, A)
            T.copy(f, C)
    return main


@tilelang.jit(out_idx=[1])
def cluster_sums(n, split=4):
    """T.cluster_reduce: each block of a cluster of `split` along x sums its slice of X's columns; the block of
    rank 0 gets the cluster's sum of them and stores it."""
    @T.prim_func
    def main(X: T.Tensor((n, split * 32), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(split, threads=32, cluster_dims=(split,)) as bx:
            f = T.alloc_fragment((n, 32), "float32")
            r = T.alloc_fragment((n,), "float32")
            T.copy(X[0:n, bx * 32:(bx + 1) * 32], f)
            T.reduce_sum(f, r, dim=1)
            T.cluster_reduce(r, "sum")
            if bx == 0:
                T.copy(r, Y)
    return main


@tilelang.jit(out_idx=[1])
def printing(n):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(n):
                T.device_assert(X[i] < 100, "x below 100")
                if i == 1:
                    T.print(X[i], msg="x[1] =")
                Y[i] = X[i]
    return main


@tilelang.jit(out_idx=[5])
def atomics(n, bins, block=128):
    @T.prim_func
    def main(K: T.Tensor((n,), "int32"), X: T.Tensor((n,), "float32"), H: T.Tensor((bins,), "int32"),
             M: T.Tensor((bins,), "float32"), A: T.Tensor((n,), "float32"), P: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            for i in T.Parallel(block):
                j = bx * block + i
                if j < n:  # element atomics that are not one tile atomic_add
                    T.atomic_add(H[K[j] % bins], 1)
                    T.atomic_max(M[K[j] % bins], X[j])
                    old = T.atomic_add(A[j], 1.5, return_prev=True)
                    P[j] = old
    return main


def splitk_last(M, N, K, block_M, block_N, block_K, split_k, fence=True, dtype="float16", accum_dtype="float"):
    """C = A . B^T with K split in split_k runs, each block leaving its run's sums in P; the last block of a tile
    (counted in the zeroed Cnt between two fencing barriers) adds them in order and sets the count back: the
    handover of examples/gemm_w4a16_splitk_last.json (proto/tile-ir-v1.md 3.1, 5.7, 9.1)."""
    tiles = -(-(-(-K // block_K)) // split_k)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        P = T.alloc_global((split_k, M, N), accum_dtype)
        Cnt = T.alloc_global((T.ceildiv(M, block_M), T.ceildiv(N, block_N)), "int32", zeroed=True)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            arrived = T.alloc_shared((1,), "int32")
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(tiles, num_stages=2):
                T.copy(A[by * block_M, (bz * tiles + k) * block_K], A_shared)
                T.copy(B[bx * block_N, (bz * tiles + k) * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, P[bz, by * block_M, bx * block_N])
            T.sync_threads(fence=fence)
            for i in T.Parallel(1):
                arrived[i] = T.atomic_add(Cnt[by, bx], 1, return_prev=True)
            T.sync_threads(fence=fence)
            if arrived[0] == split_k - 1:
                for i in T.Parallel(1):
                    Cnt[by, bx] = 0
                T.clear(C_local)
                for s in T.unroll(split_k):
                    for i, j in T.Parallel(block_M, block_N):
                        C_local[i, j] += P[s, by * block_M + i, bx * block_N + j]
                T.copy(C_local, C[by * block_M, bx * block_N])
    return main


@tilelang.jit(out_idx=[2])
def axpy_strided(n, step):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), alpha: T.float32, Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            T.fill(Y, 0)
            for i in T.serial(1, n, step):  # every step-th element from 1
                Y[i] = alpha * X[i]
    return main
''')
    import seed
    rt_mod, params = tlir.lower(seed.matmul(96, 80, 64, 64, 64, 32))
    prof = seed.Profiler(rt_mod, params, result_idx=[2])
    a = rng.standard_normal((96, 64)).astype(np.float16)
    b = rng.standard_normal((64, 80)).astype(np.float16)
    c = prof(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    check("lower + Profiler(result_idx=[2]) on numpy arrays",
          c.dtype == np.float16 and np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-2)
    prof.assert_allclose(lambda a, b: a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2, atol=1e-2)
    try:
        prof.assert_allclose(lambda a, b: a.astype(np.float64) @ b.astype(np.float64) + 1, rtol=1e-2, atol=1e-2)
        wrong = "no error"
    except AssertionError as e:
        wrong = None if "elements differ beyond" in str(e) else str(e)
    check("Profiler.assert_allclose: passes the right reference, fails a wrong one", wrong is None, wrong)
    ms = prof.do_bench()
    check("Profiler.do_bench gives milliseconds", isinstance(ms, float) and ms > 0, repr(ms))
    try:
        src = rt_mod.imported_modules[0].get_source()
        check("get_source() is tlc's CUDA C", "__global__" in src and "generated by tlc" in src, src[:200])
    except tlir.TlirError as e:  # tlc compile needs NVRTC; a SKIP line makes tests/run.sh count a skip
        if "NVRTC is not available" not in str(e):
            raise
        print("SKIP  get_source() (no NVRTC here: %s)" % str(e).strip().splitlines()[-1][-160:])
    k = seed.scale_rows(16, True, 2)
    doc = k.func.doc
    check("T.dynamic is a scalar parameter", doc["params"][-1] == {"name": "m", "kind": "scalar", "dtype": "int32"},
          json.dumps(doc["params"]))
    x = rng.standard_normal(77).astype(np.float32)
    y = k(x)
    ref = np.maximum(2 * x, 0)
    ref[0] = -1
    check("T.dynamic bound from the shape (m=77), T.macro, range() loop, Tile IR if",
          y.shape == (77,) and np.array_equal(y, ref.astype(np.float32)), "%s" % (y[:4],))
    kc = tlir.compile(k, out_idx=[1])  # a kernel again: its prim_func is compiled anew
    check("tilelang.compile of a kernel", kc.func is k.func and np.array_equal(kc(x), y))
    k2 = seed.scale_rows(16, False, 1)
    x = rng.standard_normal(40).astype(np.float32)
    ref = 2 * x
    ref[0] = -1
    check("Python-level if picks the other branch", np.array_equal(k2(x), ref.astype(np.float32)))

    # 4. `pip install ./client/python` works offline (the in-tree build
    # backend, no setuptools), and the installed copy translates
    target = os.path.join(d, "site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--quiet",
                        "--target", target, PYDIR], capture_output=True, text=True)
    if r.returncode != 0 and "No module named pip" in r.stderr:
        print("SKIP  pip install (no pip for %s)" % sys.executable)
    else:
        ok = r.returncode == 0 and os.path.isfile(os.path.join(target, "tlir", "_trace.py"))
        check("pip install --no-index ./client/python", ok, r.stderr)
        env = dict(os.environ, PYTHONPATH=target, TL_TLC=TLC)
        r = subprocess.run([sys.executable, "-m", "tlir", "emit", mod, "add_one"], capture_output=True,
                           text=True, env=env, cwd=d)
        check("the installed tlir emits", r.returncode == 0 and '"name": "add_one"' in r.stdout, r.stderr)

    # 5. the GPU path's bindings of libtlclient (ctypes), as far as a machine
    # without a GPU goes: the library loads with every signature, and its
    # errors come back as messages
    import ctypes
    from tlir import _torch
    L = _torch.lib()
    e, kp = _torch._Err(), ctypes.c_void_p(1)
    st = L.tl_kernel_load_binary(None, b"sm_90a", b"x", 1, b"{}", ctypes.byref(kp), ctypes.byref(e))
    check("tl_kernel_load_binary through ctypes refuses a NULL device",
          st != 0 and kp.value is None and b"tl_kernel_load_binary: NULL argument" in e.message, e.message)
    try:
        _torch.device(0)
        check("tl_device_open through ctypes (a GPU is here)", True)
    except tlir.TlirError as ex:
        check("tl_device_open without a GPU says why", "no CUDA driver" in ex.message
              or "no CUDA device" in ex.message, ex.message)
    kb = seed.branches(50)
    x = (rng.standard_normal(50) * 2).astype(np.float32)
    i = np.arange(50)
    ref = np.where((x > 1) & ~(x > 2), 1.5, np.where((x < -1) | (i == 0), -1.0, np.where(i % 2 == 0, x * 2, x)))
    check("if/elif/else, and/or/not and 'a if c else b' on tile values",
          np.array_equal(kb(x), ref.astype(np.float32)), json.dumps(kb.func.doc["kernel"]["body"]))
    kv = seed.if_values(50, 16)
    x = (rng.standard_normal((50, 16)) * 2).astype(np.float32)
    yv, lv = kv(x)
    cnt = (x > x[:, :1]).sum(1)
    check("if on fragment elements in T.Parallel and on local values in thread code",
          np.array_equal(yv, np.where(x > 0, x * 2, np.where(x < -1, -1, x)).astype(np.float32))
          and np.array_equal(lv, np.where((x[:, 0] > 0) & (cnt > 1), x[:, 0], cnt).astype(np.float32)),
          json.dumps(kv.func.doc["kernel"]["body"]))
    kl = seed.local_fills(100)
    xl = rng.standard_normal(100).astype(np.float32)
    check("T.fill / T.clear of a local buffer and of an alloc_var: per-thread assignments; .astype",
          np.array_equal(kl(xl), xl + np.float32(0.5) + np.float32(6)), json.dumps(kl.func.doc["kernel"]["body"]))
    kvl = seed.views_in_loops(40)
    xv = rng.standard_normal((40, 32)).astype(np.float32)
    yv, zv = kvl(xv)
    body = kvl.func.doc["kernel"]["body"]
    check("T.reshape inside a serial loop and T.view inside a T.Parallel loop stand in the kernel's body",
          [st["op"] for st in body if isinstance(st, dict) and st["op"] == "view"] == ["view", "view"]
          and np.array_equal(yv, ((xv * 2 + 0) * 2 + 1) * 2 + 2) and np.array_equal(zv, xv.view(np.int32)),
          json.dumps(body))
    kf = seed.frag_reads(40, 24)
    xf = rng.standard_normal((40, 24)).astype(np.float32)
    ff = rng.integers(0, 2, 40).astype(np.int32)
    yf, cf = kf(xf, ff)
    alloc = [st for st in kf.func.doc["kernel"]["body"] if isinstance(st, dict) and st.get("name") == "flags"]
    check("a fragment read by thread-level code (a serial loop, an if holding tile operators) is held in "
          "shared memory", alloc and alloc[0]["op"] == "alloc_shared" and "x-tlir" in alloc[0]
          and np.array_equal(yf, np.where(ff[:, None] != 0, xf, -1).astype(np.float32))
          and np.array_equal(cf, np.add.reduceat(ff, np.arange(0, 40, 16)) + 100 * ff[0:40:16]),
          json.dumps(kf.func.doc["kernel"]["body"][:3]))
    kr = seed.var_regions(40)
    xr = rng.standard_normal((40, 16)).astype(np.float32)
    yr = kr(xr, np.array([3, 5], np.int32))
    vr = [st for st in kr.func.doc["kernel"]["body"] if isinstance(st, dict) and st.get("name") == "row"]
    check("an alloc_var that a tile operator's region uses is held in shared memory (its init and assignments "
          "parallel loops of one iteration)", vr and vr[0]["op"] == "alloc_shared" and "init" not in vr[0]
          and np.array_equal(yr, np.concatenate([xr[8:16], xr[16:24]])), json.dumps(kr.func.doc["kernel"]["body"]))
    xf2 = rng.standard_normal(64).astype(np.float32)
    check("an alloc_var as T.fill's value is held in shared memory", np.array_equal(seed.var_fill()(xf2),
                                                                                 np.full(64, xf2[0] * 2, np.float32)))
    try:
        seed.frag_too_big().get_kernel_source("sm_90a")
        check("a fragment too big for shared memory once moved there: the error says why it is there", False,
              "no error")
    except tlir.TlirError as ex:
        check("a fragment too big for shared memory once moved there: the error says why it is there",
              ex.message.startswith("the kernel needs 262144 bytes of shared memory per block")
              and ex.message.endswith("(tlir: T.alloc_fragment in shared memory: thread-level code (outside "
                                      "T.Parallel) reads its elements)"), ex.message)
    kw = seed.views(40)
    xi = rng.integers(-128, 128, (40, 64)).astype(np.int8)
    wi = rng.integers(0, 256, (16, 8)).astype(np.uint8)
    yw, zw = kw(xi, wi)
    w4 = np.stack([wi & 15, wi >> 4], axis=-1).reshape(16, 16).astype(np.float32)
    check("T.view (int8 as int32, uint8 as packed uint4) and T.reshape of a shared buffer",
          np.array_equal(yw, xi.view(np.int32)) and np.array_equal(zw, w4 + np.arange(256).reshape(16, 16)),
          json.dumps(kw.func.doc["kernel"]["body"][:4]))
    # TileLang's option names (proto/tile-ir-v1.md appendix C)
    mm = seed.matmul(96, 80, 64, 64, 64, 32)
    k1 = tlir.compile(mm, pass_configs={tlir.PassConfigKey.TL_DISABLE_TMA_LOWER: True,
                                        tlir.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,
                                        tlir.PassConfigKey.TL_ENABLE_FAST_MATH: True})
    pipe = [st for st in k1.func.doc["kernel"]["body"] if st.get("op") == "pipelined"]
    check("pass configs tl.disable_tma_lower / tl.disable_warp_specialized map to every pipelined loop",
          len(pipe) == 1 and pipe[0].get("tma") is False and pipe[0].get("warp_specialize") is False
          and "tma" not in [st for st in mm.doc["kernel"]["body"] if st.get("op") == "pipelined"][0],
          json.dumps(pipe))
    # split-K with the last block adding the runs (T.sync_threads(fence=True), T.alloc_global(zeroed=True)): its
    # JSON has the example's zeroed workspace and fencing barriers, and the interpreter gives A . B^T; without the
    # fences the interpreter stops at the last block's first read of another block's sums (9.1)
    ks = tlir.compile(seed.splitk_last(40, 72, 200, 32, 64, 32, 3), out_idx=[2])
    ws = ks.func.doc["workspaces"]
    body = ks.func.doc["kernel"]["body"]
    ex = json.load(open(os.path.join(ROOT, "examples", "gemm_w4a16_splitk_last.json")))
    check("T.alloc_global(zeroed=True) and T.sync_threads(fence=True) write the example's zeroed workspace and fences",
          [w.get("zeroed", False) for w in ws] == [w.get("zeroed", False) for w in ex["workspaces"]] == [False, True]
          and [st for st in body if st.get("op") == "sync_threads"] == [st for st in (ex["kernel"] if "kernel" in ex else ex["kernels"][0])["body"]
                                                                      if st.get("op") == "sync_threads"]
          == [{"op": "sync_threads", "fence": True}] * 2, json.dumps(ws) + json.dumps(body))
    a = rng.standard_normal((40, 200)).astype(np.float16)
    b = rng.standard_normal((72, 200)).astype(np.float16)
    c = ks(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    check("split-K with the last block adding the runs runs on the interpreter",
          c.dtype == np.float16 and np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3,
          str(np.linalg.norm(c - ref) / np.linalg.norm(ref)))
    try:
        tlir.compile(seed.splitk_last(40, 72, 200, 32, 64, 32, 3, fence=False), out_idx=[2])(a, b)
        nofence = "ran"
    except tlir.TlcError as e:
        nofence = None if "reads P[0, 0, 0], which block (0, 0, 0) wrote, without the handover of 9.1: block (0, 0, 0) " \
                          "ran no fencing sync_threads after its store" in str(e) else str(e)
    check("without the fences the interpreter reports the handover 9.1 needs", nofence is None, nofence)
    ev = [st.get("eviction_policy") for st in
          [x for x in seed.matmul_evict(96, 80, 64, 64, 64, 32).doc["kernel"]["body"] if x.get("op") == "pipelined"][0]["body"]
          + seed.matmul_evict(96, 80, 64, 64, 64, 32).doc["kernel"]["body"] if st.get("op") == "copy"]
    check("T.copy(eviction_policy=) on a tensor's copy maps to eviction_policy; elsewhere, and evict_normal, no field",
          ev == ["evict_last", "evict_first", None, None], json.dumps(ev))
    refused = []
    for cfg, flags, want in [({"tl.device_compile_flags": ["-DX=1"]}, None, "tlc chooses the toolchain's flags"),
                             ({"tl.dynamic_alignment": 8}, None, "only 16 has that meaning"),
                             ({"tl.no_such_key": 1}, None, "pass config 'tl.no_such_key' is unknown to tlir"),
                             (None, ["--use_fast_math"], "compile_flags=['--use_fast_math']")]:
        try:
            tlir.compile(mm, pass_configs=cfg, compile_flags=flags)
            refused.append("accepted %r %r" % (cfg, flags))
        except tlir.TlirError as ex:
            if want not in ex.message:
                refused.append(ex.message)
    check("refused pass configs and compile flags say why", not refused, "; ".join(refused))
    kn = seed.nested(4, 8)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    acc = np.ones((4, 8), np.float32)
    yn = kn(x, acc)
    body = kn.func.doc["kernel"]["body"]
    check("nested T.Parallel loops merge into one",
          body[0]["vars"] == ["i", "j"] and np.array_equal(yn, x + 1), json.dumps(body))
    check("element atomic_adds in (merged) T.Parallel loops become one tile atomic_add",
          body[1] == {"op": "atomic_add", "dst": "S[0:4, 0:8]", "src": "X[0:4, 0:8]"}
          and np.array_equal(acc, x + np.float32(1)), json.dumps(body[1]))
    km = seed.math_fns(40)
    x = (rng.standard_normal(40) * 2).astype(np.float32)
    x64 = x.astype(np.float64)
    import math
    f32 = lambda v: np.asarray(v).astype(np.float32)
    erf = np.array([math.erf(v) for v in x64])
    with np.errstate(all="ignore"):
        ref = np.stack([
            f32(f32(erf) + f32(f32(np.sin(x64)) * f32(np.cos(x64)))),
            f32(f32(np.clip(x, -0.5, 0.5)) + np.trunc(x * np.float32(4))),
            f32(f32(f32(f32(np.log1p(np.abs(x64))) + f32(np.expm1(x64))) + f32(np.log10(np.abs(x64))))
                + f32(np.tan(x64))),
            f32(np.where(x < 0, 1.0, 0.0))])
    ym = km(x)
    check("T.erf, sin, cos, tan, log1p, expm1, log10, trunc, clamp, isnan, isinf",
          np.allclose(ym, ref, rtol=1e-6, atol=1e-6) and "erf(X[i])" in json.dumps(km.func.doc),
          "%s\n%s" % (ym, ref))
    kn2 = seed.nested_more(4, 8)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    y, r = kn2(x)
    s2 = x[:, 0] * np.float32(2)
    loops = [(st["vars"], len(st["body"])) for st in kn2.func.doc["kernel"]["body"] if st["op"] == "parallel"]
    check("T.Parallel nested in one with more in its body: one loop per part, the let repeated",
          loops == [(["i"], 2), (["i", "j"], 2), (["i"], 1), (["i", "j"], 1)] and np.array_equal(y, x + s2[:, None])
          and np.allclose(r, s2 + 1 + (x + s2[:, None]).sum(1), rtol=1e-5), "%s %s" % (loops, r))
    ks = seed.scans(8, 16)
    xi = rng.integers(-1000, 1000, (8, 16)).astype(np.int32)
    xf = rng.standard_normal((8, 16)).astype(np.float32)
    o, a, cm = ks(xi, xf)
    check("T.reduce_bitor, T.reduce_bitand and T.cummax",
          np.array_equal(o, np.bitwise_or.reduce(xi, axis=1)) and np.array_equal(a, np.bitwise_and.reduce(xi, axis=1))
          and np.array_equal(cm, np.maximum.accumulate(xf, axis=1)), "%s %s" % (o, a))
    kc = seed.cluster_sums(8)
    x = rng.standard_normal((8, 128)).astype(np.float32)
    y = kc(x)
    parts = [x[:, 32 * b:32 * (b + 1)].astype(np.float64).sum(1) for b in range(4)]
    body = kc.func.doc["kernel"]
    check("T.cluster_reduce and T.Kernel(cluster_dims=...) are Tile IR's cluster_reduce and cluster",
          body["cluster"] == [4] and {"op": "cluster_reduce", "type": "sum", "dst": "r"} in body["body"]
          and np.allclose(y, sum(parts), rtol=1e-5, atol=1e-5), "%s\n%s" % (y, sum(parts)))
    kp = seed.printing(4)
    doc = json.dumps(kp.func.doc["kernel"]["body"])
    x = np.array([1, 2.5, 3, 4], np.float32)
    y = kp(x)
    check("T.print and T.device_assert are Tile IR print and device_assert",
          '"op": "device_assert", "cond": "X[i] < 100", "msg": "x below 100"' in doc
          and '"op": "print", "value": "X[i]", "msg": "x[1] ="' in doc and np.array_equal(y, x), doc)
    try:
        kp(np.array([1, 2, 300, 4], np.float32))
        failed = "no error"
    except tlir.TlirError as e:
        failed = None if "device_assert failed: x below 100" in str(e) else str(e)
    check("a failing T.device_assert is an error of the interpreter's run", failed is None, failed)
    ka = seed.atomics(300, 8)
    kk = rng.integers(0, 100, 300).astype(np.int32)
    x = rng.standard_normal(300).astype(np.float32)
    h, m, a = np.zeros(8, np.int32), np.full(8, -np.inf, np.float32), rng.standard_normal(300).astype(np.float32)
    a0 = a.copy()
    p = ka(kk, x, h, m, a)
    want_m = np.array([x[kk % 8 == b].max() for b in range(8)], np.float32)
    ops = [st.get("type") for st in ka.func.doc["kernel"]["body"][0]["body"][1]["then"] if isinstance(st, dict)]
    check("element T.atomic_add / atomic_max / return_prev in T.Parallel: Tile IR atomic statements",
          ops == ["add", "max", "add"] and np.array_equal(h, np.bincount(kk % 8, minlength=8))
          and np.array_equal(m, want_m) and np.array_equal(p, a0) and np.array_equal(a, a0 + np.float32(1.5)),
          "%s %s %s" % (ops, h, m))
    k3 = seed.axpy_strided(20, 3)
    x = rng.standard_normal(20).astype(np.float32)
    ref = np.zeros(20, np.float32)
    ref[1::3] = np.float32(2.5) * x[1::3]
    y = k3(x, 2.5)
    loop = k3.func.doc["kernel"]["body"][1]
    check("a scalar parameter (T.float32) and T.serial(start, stop, step)",
          np.array_equal(y, ref) and loop["start"] == 1 and loop["extent"] == 7 and loop["step"] == 3,
          "%s %s" % (y, loop))
    print("%d passed, %d failed" % (sum(results), len(results) - sum(results)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    import shutil
    try:
        rc = main()
    finally:
        for p in list(sys.path):
            if os.path.basename(p).startswith("tlir-emit-"):
                shutil.rmtree(p, ignore_errors=True)
    sys.exit(rc)
