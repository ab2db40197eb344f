"""_runtime.py - runs a translated kernel.

Needs: the `tlc` binary (TL_TLC, else the source tree's build/bin/tlc, else
PATH) and, for running, numpy.
Produces: JITKernel (what tilelang.compile and @tilelang.jit return),
Profiler, and check(), which runs `tlc check` and reports its diagnostics
at the Python lines of the statements they point into.
How: `kernel(a, b)` on numpy arrays writes the tensors as .npy files in a
temporary directory and runs `tlc run --interpret` (the reference
interpreter, proto/tile-ir-v1.md 9.6); dynamic symbols take their values
from the shapes of the tensors passed; outputs named by out_idx are
allocated (dtype and shape from the program) and returned, as TileLang does.
"""

import os
import shutil
import subprocess
import tempfile
import time

from ._ir import TlirError
from ._trace import PrimFunc
from .utils.tensor import TensorSupplyType, make_array

_HERE = os.path.dirname(os.path.abspath(__file__))


def find_tlc():
    p = os.environ.get("TL_TLC")
    if p:
        if not os.access(p, os.X_OK):
            raise TlirError("TL_TLC=%s is not an executable" % p)
        return p
    tree = os.path.normpath(os.path.join(_HERE, "..", "..", "..", "build", "bin", "tlc"))
    if os.access(tree, os.X_OK):
        return tree
    p = shutil.which("tlc")
    if p:
        return p
    raise TlirError("tlc not found: set TL_TLC, build the source tree (make), or put tlc on PATH")


def _run_tlc(args, timeout=None):
    return subprocess.run([find_tlc()] + args, capture_output=True, text=True, timeout=timeout)


class TlcError(TlirError):
    """tlc's diagnostics, each at the Python line of the statement its JSON
    Pointer names: FILE:LINE: error: MESSAGE (Tile IR POINTER[, column C]).
    file, line and message are the first diagnostic's."""
    def __init__(self, func, stderr, path, what):
        self.lines = []
        first = None
        for ln in stderr.splitlines():
            ptr, sep, msg = ln[len(path) + 1:].partition(": error: ")
            if not ln.startswith(path + ":") or not sep:
                if ln.strip():
                    self.lines.append(ln)
                continue
            col = ""
            if ":" in ptr:
                ptr, col = ptr.rsplit(":", 1)
            file, line = func.locate(ptr)
            note = func.note(ptr)
            if note:
                msg = "%s (tlir: %s)" % (msg, note)
            first = first or (file, line, msg)
            self.lines.append("%s:%s: error: %s (Tile IR %s%s)" % (
                file, line, msg, ptr or "/", (", column " + col) if col else ""))
        if first is None:
            first = (func.file, func.line, "%s failed: %s" % (what, " ".join(self.lines)))
        super().__init__(first[2], first[0], first[1])

    def __str__(self):
        return "\n".join(self.lines) if self.lines else super().__str__()


def _write_doc(func, d):
    path = os.path.join(d, func.name + ".json")
    with open(path, "w") as f:
        f.write(func.script())
    return path


def check(func):
    """Runs `tlc check`; raises TlirError with the diagnostics at Python lines."""
    with tempfile.TemporaryDirectory(prefix="tlir-") as d:
        path = _write_doc(func, d)
        r = _run_tlc(["check", path])
        if r.returncode != 0:
            raise TlcError(func, r.stderr, path, "tlc check")


# numpy dtypes of Tile IR dtypes in .npy files (9.6)
_NP = {"bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
       "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
       "float16": "float16", "float32": "float32", "float64": "float64",
       "bfloat16": "uint16", "float8_e4m3": "uint8", "float8_e5m2": "uint8",
       # packed types: one element per byte (9.6), float4_e2m1 and float8_e8m0 as codes
       "int4": "int8", "uint4": "uint8", "int2": "int8", "uint2": "uint8", "int1": "int8",
       "float4_e2m1": "uint8", "float8_e8m0": "uint8"}


def _is_torch(x):
    return type(x).__module__.split(".")[0] == "torch"


class JITKernel:
    """A compiled (translated and checked) kernel.  Call it with the
    tensors that are not outputs (out_idx); it returns the outputs (one
    array, or a list when there are several), or None without out_idx."""

    def __init__(self, func, out_idx=None, target="auto", verify=True):
        if not isinstance(func, PrimFunc):
            raise TlirError("tilelang.compile needs a @T.prim_func, not %s" % type(func).__name__)
        self.func = func
        self.target = target
        n = len(func.params)
        if out_idx is None:
            out_idx = []
        elif isinstance(out_idx, int):
            out_idx = [out_idx]
        self.out_idx = []
        for i in out_idx:
            j = i + n if i < 0 else i
            if not 0 <= j < n or func.params[j]["kind"] != "tensor":
                raise TlirError("out_idx %d does not name a tensor parameter (the prim_func has %d "
                                "parameters)" % (i, n), func.file, func.line)
            self.out_idx.append(j)
        if verify:
            check(func)

    @property
    def params(self):
        return self.func.params

    def get_kernel_source(self, target=None):
        """The CUDA C (or HIP C for gfx targets) that tlc generates."""
        t = target or (self.target if self.target not in (None, "auto", "cuda") else
                       os.environ.get("TL_TARGET", "sm_90a"))
        with tempfile.TemporaryDirectory(prefix="tlir-") as d:
            path = _write_doc(self.func, d)
            emit = "hip" if t.startswith("gfx") else "cuda"
            r = _run_tlc(["compile", path, "--target", t, "--emit", emit])
            if r.returncode != 0:
                raise TlcError(self.func, r.stderr, path, "tlc compile")
            return r.stdout

    def get_source(self):
        return self.get_kernel_source()

    @property
    def imported_modules(self):
        return [self]

    def get_profiler(self, tensor_supply_type=None):
        return Profiler(self, self.func.params, self.out_idx, tensor_supply_type)

    def script(self):
        return self.func.script()

    def _bind(self, args):
        ins = [i for i in range(len(self.func.params)) if i not in self.out_idx]
        if len(args) != len(ins):
            raise TlirError("kernel '%s' takes %d arguments (%s), %d given"
                            % (self.func.name, len(ins),
                               ", ".join(self.func.params[i]["py"] for i in ins), len(args)))
        return dict(zip(ins, args))

    def __call__(self, *args, timeout=None):
        if any(_is_torch(a) for a in args):
            from . import _torch
            return _torch.launch(self, args)
        return self.run_interpreter(*args, timeout=timeout)

    def run_interpreter(self, *args, timeout=None):
        import numpy as np
        bound = self._bind(args)
        params = self.func.params
        dyn = {}

        def bind_dim(expr, size, pname):
            if isinstance(expr, str) and expr in self.func.dynamic:
                if dyn.setdefault(expr, size) != size:
                    raise TlirError("dynamic '%s' is %d from one tensor and %d from '%s'"
                                    % (expr, dyn[expr], size, pname))
        for i, a in bound.items():
            p = params[i]
            if p["kind"] == "tensor":
                a = np.asarray(a)
                shape = self.func.doc["params"][i]["shape"]
                if a.ndim != len(shape):
                    raise TlirError("'%s' has %d dimensions, the kernel's '%s' %d"
                                    % (p["py"], a.ndim, p["name"], len(shape)))
                for d, s in zip(shape, a.shape):
                    bind_dim(d, s, p["py"])
        for n in self.func.dynamic:
            if n not in dyn:
                raise TlirError("dynamic '%s' is not the size of any input tensor's dimension" % n)
        with tempfile.TemporaryDirectory(prefix="tlir-") as d:
            path = _write_doc(self.func, d)
            cmd = ["run", path, "--interpret"]
            for n, v in dyn.items():
                cmd += ["--arg", "%s=%d" % (n, v)]
            outs = {}
            for i, p in enumerate(params):
                if p["kind"] == "scalar":
                    v = bound[i]
                    v = ("true" if v else "false") if p["dtype"] == "bool" else repr(v)
                    cmd += ["--arg", "%s=%s" % (p["name"], v)]
                    continue
                f = os.path.join(d, "p%d.npy" % i)
                if i in bound:
                    a = np.asarray(bound[i])
                    if p["dtype"] in ("bfloat16", "float8_e4m3", "float8_e5m2") and a.dtype.kind == "f":
                        a = a.astype(np.float64)
                    else:
                        a = a.astype(_NP[p["dtype"]], copy=False)
                    np.save(f, np.ascontiguousarray(a))
                    cmd += ["--in", "%s=%s" % (p["name"], f)]
                cmd += ["--out", "%s=%s" % (p["name"], f + ".out.npy")]
                outs[i] = f + ".out.npy"
            r = _run_tlc(cmd, timeout=timeout)
            if r.returncode != 0:
                raise TlcError(self.func, r.stderr, path, "tlc run --interpret")
            results = {i: np.load(f) for i, f in outs.items()}
        for i, a in bound.items():  # tensors passed in are updated in place
            if params[i]["kind"] == "tensor" and isinstance(a, np.ndarray) and a.flags.writeable:
                a[...] = _from_npy(results[i], params[i]["dtype"], a.dtype)
        got = [_from_npy(results[i], params[i]["dtype"]) for i in self.out_idx]
        if not got:
            return None
        return got[0] if len(got) == 1 else got


def _from_npy(a, dtype, want=None):
    """bfloat16 bit patterns become float32 (float8 stay bit patterns)."""
    import numpy as np
    if dtype == "bfloat16":
        a = (a.astype(np.uint32) << 16).view(np.float32)
    if want is not None and a.dtype != want:
        if dtype in ("bfloat16",) or want.kind == a.dtype.kind or want.kind == "f":
            a = a.astype(want)
    return a


def _cuda_torch():
    """torch when it is installed and sees a CUDA GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _np64(x):
    import numpy as np
    if _is_torch(x):
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


class Profiler:
    """Profiler(rt_mod, params, result_idx=[...]) of the seeds, and
    kernel.get_profiler(): runs the kernel on random inputs, as TileLang's
    does: CUDA tensors where PyTorch sees a GPU (the kernel runs there),
    else NumPy arrays (the kernel runs in the interpreter)."""

    def __init__(self, mod, params=None, result_idx=None, supply_type=None):
        if isinstance(mod, JITKernel):
            k = mod
            if result_idx is not None and sorted(result_idx) != sorted(k.out_idx):
                k = JITKernel(k.func, result_idx, k.target, verify=False)
        else:
            k = JITKernel(mod, result_idx)
        self.kernel = k
        self.supply_type = supply_type if supply_type is not None else TensorSupplyType.Auto

    def __call__(self, *args):
        return self.kernel(*args)

    def _inputs(self, seed=0):
        import numpy as np
        rng = np.random.default_rng(seed)
        torch = _cuda_torch()
        f = self.kernel.func
        args = []
        for i, p in enumerate(f.params):
            if i in self.kernel.out_idx:
                continue
            if p["kind"] == "scalar":
                raise TlirError("the profiler cannot make scalar argument '%s'" % p["py"])
            shape = []
            for d in f.doc["params"][i]["shape"]:
                if not isinstance(d, int):
                    raise TlirError("the profiler needs constant shapes; '%s' has '%s'" % (p["py"], d))
                shape.append(d)
            dt = p["dtype"]
            a = make_array(shape, dt, self.supply_type, rng)
            if torch is not None:
                from ._torch import torch_dtype
                a = torch.from_numpy(a).to(torch_dtype(dt)).cuda()
            args.append(a)
        return args

    def run_once(self, func=None):
        return (func or self.kernel)(*self._inputs())

    def assert_allclose(self, reference_program, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01,
                        seed=0):
        import numpy as np
        args = self._inputs(seed)
        got = self.kernel(*[a.clone() if _is_torch(a) else a.copy() for a in args])
        ref = reference_program(*args)
        got = got if isinstance(got, list) else [got]
        ref = list(ref) if isinstance(ref, (list, tuple)) else [ref]
        for g, r in zip(got, ref):
            g, r = _np64(g), _np64(r)
            bad = ~np.isclose(g, r, rtol=rtol, atol=atol)
            if bad.mean() > max_mismatched_ratio:
                raise AssertionError("%d of %d elements differ beyond rtol=%g atol=%g (max |diff| %g)"
                                     % (bad.sum(), bad.size, rtol, atol, np.nanmax(np.abs(g - r))))

    def do_bench(self, func=None, warmup=25, rep=100, backend=None, **kwargs):
        """Milliseconds per call of func (default: the kernel) on random
        inputs.  On a GPU: CUDA events around as many calls as fill about
        `rep` milliseconds, after about `warmup` milliseconds of calls (the
        time-based meaning TileLang gives them); `backend` ("event",
        "cupti") is accepted, events are always used.  Without a GPU: the
        wall time of one call, which through the interpreter is the
        interpreter's time, not a GPU's."""
        args = self._inputs()
        f = func or self.kernel
        torch = _cuda_torch()
        if torch is None:
            t = time.perf_counter()
            f(*args)
            return (time.perf_counter() - t) * 1e3
        f(*args)
        torch.cuda.synchronize()
        t = time.perf_counter()
        f(*args)
        torch.cuda.synchronize()
        once = max((time.perf_counter() - t) * 1e3, 1e-3)
        for _ in range(max(1, min(1000, int(warmup / once)))):
            f(*args)
        n = max(1, min(1000, int(rep / once)))
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n):
            f(*args)
        e1.record()
        torch.cuda.synchronize()
        return e0.elapsed_time(e1) / n
