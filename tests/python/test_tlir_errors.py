#!/usr/bin/env python3
"""tests/python/test_tlir_errors.py - bad TileLang programs and the exact
error tlir gives for each, at the Python line of the construct.

Each case is a small module (written to a temporary .py file) whose
function `k()` returns a prim_func (or raises while translating it); the
line marked `# <-` is where the error must point.  Errors the translator
finds are checked by tilelang.compile (which also runs `tlc check`, whose
diagnostics are reported at the Python line of the statement their JSON
Pointer names, with the pointer in parentheses).  Prints one line per case
and "N passed, N failed"; exit 1 on a failure, 77 without tlc.
"""
import os
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
import tlir  # noqa: E402

try:
    tlir.find_tlc()
except tlir.TlirError as e:
    sys.stderr.write("%s\n" % e)
    sys.exit(77)

HEAD = """\
import tlir as tilelang
import tlir.language as T


def k(M=64, N=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
            x = T.alloc_fragment((32, N), "float32")
            s = T.alloc_shared((32, N), "float32")
            T.copy(A[bx * 32, 0], x)
"""
TAIL = """\
            T.copy(x, B[bx * 32, 0])
    return main
"""

# (name, body lines appended to HEAD (indented 12), expected message).
# A body of None means: the whole module is the text given as message[0].
CASES = [
    ("math function Tile IR lacks",
     "for i, j in T.Parallel(32, N):\n    x[i, j] = T.atan(x[i, j])  # <-",
     "T.atan: Tile IR v1 has no function atan"),
    ("unknown T name",
     "T.no_such_thing(x)  # <-",
     "T.no_such_thing is not part of tlir.language (Tile IR v1 cannot say it)"),
    ("power operator",
     "for i, j in T.Parallel(32, N):\n    x[i, j] = x[i, j] ** 2  # <-",
     "'**' has no Tile IR form; use T.pow(a, b)"),
    ("Python builtin max on tile values",
     "for i, j in T.Parallel(32, N):\n    x[i, j] = max(x[i, j], 0.0)  # <-",
     "the truth of a tile value ('x[i, j] < 0.0') is not known while the program is translated: "
     "a Python 'if', 'while', 'and', 'or', 'not', chained comparison or builtin min/max on it; "
     "use T.if_then_else, T.min/T.max, or a Tile IR 'if' (a plain 'if' statement in the kernel)"),
    ("while on a tile value",
     "while x[0, 0] > 0:  # <-\n    T.clear(x)",
     "the truth of a tile value ('x[0, 0] > 0') is not known while the program is translated: "
     "a Python 'if', 'while', 'and', 'or', 'not', chained comparison or builtin min/max on it; "
     "use T.if_then_else, T.min/T.max, or a Tile IR 'if' (a plain 'if' statement in the kernel)"),
    ("chained comparison",
     "for i, j in T.Parallel(32, N):\n    x[i, j] = T.if_then_else(0 < x[i, j] < 1, 1, 0)  # <-",
     "the truth of a tile value ('x[i, j] > 0') is not known while the program is translated: "
     "a Python 'if', 'while', 'and', 'or', 'not', chained comparison or builtin min/max on it; "
     "use T.if_then_else, T.min/T.max, or a Tile IR 'if' (a plain 'if' statement in the kernel)"),
    ("a kernel inside a kernel",
     "with T.Kernel(1, threads=128) as b2:  # <-\n    pass",
     "T.Kernel inside T.Kernel: a program's kernels run one after another, not nested"),
    ("slice with a step",
     "T.copy(A[0:32:2, 0:N], x)  # <-",
     "a slice with a step ('A[a:b:c]') has no Tile IR form"),
    ("wrong number of indices",
     "T.copy(A[bx * 32], x)  # <-",
     "'A' has 2 dimensions but 1 indices were given"),
    ("unknown dtype",
     "y = T.alloc_fragment((32, N), 'float17')  # <-",
     "unknown dtype 'float17' (Tile IR v1 has bool, int8, int16, int32, int64, uint8, uint16, "
     "uint32, uint64, float16, bfloat16, float32, float64, float8_e4m3, float8_e5m2, int4, uint4, int2, uint2, "
     "int1, float4_e2m1, float8_e8m0)"),
    ("gemm on a slice",
     "c = T.alloc_fragment((32, 32), 'float32')\nT.gemm(s[0:32, 0:32], s[0:32, 0:32], c)  # <-",
     "T.gemm A must be a whole buffer in Tile IR v1 (gemm operands are not regions); "
     "allocate a tile of the operand's shape"),
    ("local buffer as a tile operand",
     "l = T.alloc_local((4,), 'float32')\nT.copy(l, s)  # <-",
     "T.copy source: a local buffer ('l') cannot be a tile operator's operand"),
    ("infinite Python float",
     "T.fill(x, float('-inf'))  # <-",
     "the Python float -inf has no Tile IR literal; use T.infinity(dtype)"),
    ("T.Pipelined(sync=...)",
     "for kk in T.Pipelined(4, sync=[[0, 1]]):  # <-\n    T.clear(x)",
     "T.Pipelined(sync=..., group=...): Tile IR v1 has 'order' and 'stage' only"),
    ("a Python error in the body",
     "T.copy(A[bx * 32, 0], undefined_name)  # <-",
     "NameError: name 'undefined_name' is not defined"),
    ("layout on a global tensor that is not one-to-one",
     "T.annotate_layout({A: T.Layout((M, N), lambda i, j: (i, j // 2))})  # <-",
     "T.annotate_layout: the layout of the global tensor 'A' is not one-to-one, so ignoring it would change "
     "what its readers see"),
    ("swizzle on a global tensor",
     "T.annotate_layout({A: T.make_swizzled_layout(A)})  # <-",
     "T.annotate_layout: 'A' is a global tensor; it takes a T.Layout index map (recorded and ignored by "
     "Tile IR v1), not a swizzle"),
    # errors that tlc check finds, at the Python line of the statement
    ("an element atomic on a fragment (tlc check)",
     "for i, j in T.Parallel(32, N):\n    T.atomic_max(x[i, j], 2.0)  # <-",
     "'atomic' updates global or shared memory; 'x' is a fragment"),
    ("atomic_max of a region",
     "T.atomic_max(B[bx * 32, 0], x)  # <-",
     "T.atomic_max of a region: Tile IR has element atomic max only; write it as a T.Parallel loop of "
     "element T.atomic_max calls"),
    ("if on a gemm accumulator's value (tlc check)",
     "c = T.alloc_fragment((32, 32), 'float32')\nt = T.alloc_shared((32, 32), 'float16')\nT.gemm(t, t, c)\n"
     "if c[0, 0] > 0:  # <-\n    T.clear(s)",
     "fragment 'c' is read by thread-level code; fragments are only read and written by tile "
     "operators and parallel loops (each element lives in one thread's registers); test it in a parallel loop, or "
     "copy it to a shared buffer and read that"),
    ("T.Parallel inside a T.Parallel body whose let reads what the body then writes",
     "for i in T.Parallel(32):  # <-\n    v = s[i, 0]\n    s[i, 0] = 1\n    for j in T.Parallel(N):\n"
     "        x[i, j] = v",
     "a T.Parallel loop inside a T.Parallel loop with more in its body: the let 'v' reads 's', which the "
     "outer body writes before a later inner loop uses the let; read it again in the inner loop"),
    ("T.gemm(wg_wait=1)",
     "c = T.alloc_fragment((32, 32), 'float32')\nt = T.alloc_shared((32, 32), 'float16')\n"
     "T.gemm(t, t, c, wg_wait=1)  # <-",
     "T.gemm(wg_wait=1): Tile IR's compiler chooses how many wgmma groups stay in flight (its statements see the "
     "gemm's results as written); wg_wait 0 and -1 are accepted"),
    ("T.use_swizzle(num_xcds=8)",
     "T.use_swizzle(10, num_xcds=8)  # <-",
     "T.use_swizzle(num_xcds=8): Tile IR's use_swizzle has no chiplet (XCD) remapping"),
    ("T.copy(coalesced_width=3)",
     "T.copy(A[bx * 32, 0], s, coalesced_width=3)  # <-",
     "T.copy(coalesced_width=3): a power of two"),
    ("T.copy(eviction_policy='evict_soon')",
     "T.copy(A[bx * 32, 0], s, eviction_policy='evict_soon')  # <-",
     "T.copy(eviction_policy='evict_soon'): one of evict_normal, evict_first, evict_last"),
    ("T.sync_threads(fence=1)",
     "T.sync_threads(fence=1)  # <-",
     "T.sync_threads(fence=1): True or False"),
    ("T.alloc_global(zeroed='yes')",
     "w = T.alloc_global((4,), 'int32', zeroed='yes')  # <-",
     "T.alloc_global(zeroed='yes'): True or False"),
    ("T.view of a fragment",
     "v = T.view(x, dtype='int32')  # <-",
     "T.view: 'x' is a fragment buffer; Tile IR views alias global tensors and shared buffers only "
     "(fragment and local elements live in registers)"),
    ("T.view inside a loop of a buffer allocated in that loop",
     "for kk in T.serial(2):\n    t = T.alloc_shared((32, N), 'float32')\n    v = T.view(t, dtype='int32')  # <-",
     "T.view of 't' inside a loop or if: 't' is allocated there too; Tile IR views stand in the kernel's "
     "body, so allocate 't' at the kernel's top level"),
    ("T.reshape inside a loop with a shape of the loop's variable",
     "for kk in T.serial(2):\n    v = T.reshape(A, (M * N // (kk + 1), kk + 1))  # <-",
     "T.reshape inside a loop or if: its shape uses 'kk', a value of that loop or if; a view's shape is fixed "
     "for the whole kernel"),
    ("a view as a gemm operand (tlc check)",
     "h = T.alloc_shared((32 * 32,), 'float16')\nt = T.reshape(h, (32, 32))\n"
     "c = T.alloc_fragment((32, 32), 'float32')\nT.gemm(t, t, c)  # <-",
     "gemm's A 't' is a view; a gemm operand is laid out in shared memory as the gemm chooses, so it cannot "
     "share its memory with a view"),
    ("an alloc_var a region uses, assigned in per-thread code (tlc check)",
     "v = T.alloc_var('int32')\ntx = T.get_thread_binding()\nif tx == 0:\n    v = 1  # <-\nT.copy(A[v * 32, 0], x)",
     "'parallel' sits under the if at /kernel/body/5 whose condition depends on the thread; tile operators, "
     "parallel loops, shared/fragment allocations and sync_threads need the same control path in every thread "
     "(tlir: T.alloc_var in shared memory: a tile operator's region uses it, so it must be the same in every "
     "thread; each assignment is a parallel loop of one iteration)"),
    ("T.reshape that changes the size (tlc check)",
     "v = T.reshape(s, (32, 32))  # <-",
     "the view 'v' is float32[32, 32], 4096 bytes, but 's' is float32[32, 64], 8192 bytes; a view keeps the "
     "size of what it views"),
    ("T.Parallel inside an if inside a T.Parallel (tlc check)",
     "for i in T.Parallel(32):\n    if i > 0:\n        for j in T.Parallel(N):  # <-\n            x[i, j] = 0",
     "'parallel' is not allowed inside a parallel loop (the loop at /kernel/body/3); a parallel "
     "body holds assignments, atomic, let, if, print, device_assert and serial/unroll/vectorized loops"),
]

# Whole modules: errors outside the kernel body.
MODULES = [
    ("parameter without annotation", """\
import tlir.language as T


def k():
    @T.prim_func  # <-
    def main(A):
        with T.Kernel(1, threads=128) as bx:
            pass
    return main
""", "parameter 'A' needs an annotation: T.Tensor(shape, dtype) or a scalar dtype such as T.int32"),
    ("statement before T.Kernel", """\
import tlir.language as T


def k():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        x = T.alloc_shared((64,), "float32")  # <-
        with T.Kernel(1, threads=128) as bx:
            pass
    return main
""", "statements must be inside 'with T.Kernel(...)'"),
    ("T.Kernel(prelude=...)", """\
import tlir.language as T


def k():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128, prelude="#include <x.h>") as bx:  # <-
            pass
    return main
""", "T.Kernel(prelude=...): Tile IR v1 has no inline C source"),
    ("strided tensor", """\
import tlir.language as T


def k():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32", strides=(128, 1))):  # <-
        with T.Kernel(1, threads=128) as bx:
            pass
    return main
""", "T.Tensor(strides=...): Tile IR tensors are dense and row-major"),
    ("no kernel", """\
import tlir.language as T


def k():
    @T.prim_func  # <-
    def main(A: T.Tensor((64,), "float32")):
        pass
    return main
""", "the prim_func has no 'with T.Kernel(...)'"),
    ("out_idx out of range", """\
import tlir as tilelang
import tlir.language as T


@tilelang.jit(out_idx=[5])
def k():
    @T.prim_func  # <-
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.clear(A)
    return main
""", "out_idx 5 does not name a tensor parameter (the prim_func has 1 parameters)"),
]


def run(name, text, want, d):
    path = os.path.join(d, "case_%d.py" % abs(hash(name)))
    with open(path, "w") as f:
        f.write(text)
    line = next(i + 1 for i, l in enumerate(text.split("\n")) if "# <-" in l)
    ns = {"__name__": "case", "__file__": path}
    try:
        exec(compile(text, path, "exec"), ns)
        r = ns["k"]()
        if not isinstance(r, tlir.JITKernel):
            tlir.compile(r)
        return "no error (wanted %s:%d: error: %s)" % (path, line, want)
    except tlir.TlirError as e:
        got = "%s:%s: error: %s" % (e.file, e.line, e.message)
        exp = "%s:%d: error: %s" % (path, line, want)
        return None if got == exp else "got\n    %s\nwanted\n    %s" % (got, exp)


def main():
    npass = nfail = 0
    with tempfile.TemporaryDirectory(prefix="tlir-errors-") as d:
        table = [(n, HEAD + textwrap.indent(body, " " * 12) + "\n" + TAIL, want) for n, body, want in CASES]
        for name, text, want in table + MODULES:
            problem = run(name, text, want, d)
            if problem is None:
                npass += 1
                print("PASS  %s" % name)
            else:
                nfail += 1
                print("FAIL  %s: %s" % (name, problem))
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
