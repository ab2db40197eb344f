"""_torch.py - runs a translated kernel on PyTorch tensors on the GPU.

Needs: PyTorch (imported only when a kernel is called with torch tensors;
nothing of it at build time) and libtlclient.so (TL_LIBTLCLIENT, else the
source tree's build/lib/libtlclient.so.0, else the loader's search path),
opened with ctypes.  The binary comes from a tlserverd when TL_SERVER is
set (tl_client_get_for_device: the server's cache and the per-user local
cache, TL_TOKEN for its token), else from the local tlc (`tlc compile
--target sm_XX[a]` and `--emit meta`, loaded with tl_kernel_load_binary).
Produces: launch(kernel, args): outputs named by out_idx allocated with
torch.empty on the inputs' device (shapes from the program, dynamic sizes
from the inputs' shapes), one tl_kernel_launch on the current stream of
that device (asynchronous, as TileLang's kernels are), the outputs
returned.
Keeps: one tl_device per GPU ordinal and one loaded tl_kernel per kernel
and GPU, for the life of the process.
"""

import ctypes
import ctypes.util
import os
import tempfile

from ._ir import TlirError

_HERE = os.path.dirname(os.path.abspath(__file__))


class _Err(ctypes.Structure):
    # proto/tl_error.h: TL_ERROR_POINTER_MAX 512, TL_ERROR_MESSAGE_MAX 1024
    _fields_ = [("code", ctypes.c_int), ("column", ctypes.c_int),
                ("pointer", ctypes.c_char * 512), ("message", ctypes.c_char * 1024)]


class _Arg(ctypes.Structure):
    # tl_kernel_arg of client/include/tl/tlclient.h
    _fields_ = [("kind", ctypes.c_int), ("ptr", ctypes.c_uint64), ("i", ctypes.c_int64),
                ("f", ctypes.c_double)]


class _Request(ctypes.Structure):
    _fields_ = [("program", ctypes.c_char_p), ("program_len", ctypes.c_size_t),
                ("name", ctypes.c_char_p), ("defines", ctypes.c_void_p), ("ndefines", ctypes.c_int),
                ("options_json", ctypes.c_char_p)]


ARG_TENSOR, ARG_INT, ARG_FLOAT = 1, 2, 3
_lib = None
_devices = {}
_client = None


def lib():
    global _lib
    if _lib is not None:
        return _lib
    cands = []
    if os.environ.get("TL_LIBTLCLIENT"):
        cands.append(os.environ["TL_LIBTLCLIENT"])
    cands.append(os.path.normpath(os.path.join(_HERE, "..", "..", "..", "build", "lib", "libtlclient.so.0")))
    found = ctypes.util.find_library("tlclient")
    if found:
        cands.append(found)
    errors = []
    for c in cands:
        try:
            L = ctypes.CDLL(c)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        raise TlirError("libtlclient not found (set TL_LIBTLCLIENT, or build the source tree): "
                        + "; ".join(errors or ["no candidate"]))
    vp, e = ctypes.c_void_p, ctypes.POINTER(_Err)
    sigs = {
        "tl_device_open": ([ctypes.c_int, ctypes.POINTER(vp), e], ctypes.c_int),
        "tl_device_arch": ([vp], ctypes.c_int),
        "tl_device_arch_name": ([vp], ctypes.c_char_p),
        "tl_device_get_api": ([vp], ctypes.c_int),
        "tl_kernel_load_binary": ([vp, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                   ctypes.POINTER(vp), e], ctypes.c_int),
        "tl_kernel_load": ([vp, vp, ctypes.POINTER(vp), e], ctypes.c_int),
        "tl_kernel_launch": ([vp, ctypes.POINTER(_Arg), ctypes.c_int, vp, e], ctypes.c_int),
        "tl_client_new": ([ctypes.POINTER(vp), e], ctypes.c_int),
        "tl_client_set_server": ([vp, ctypes.c_char_p, e], ctypes.c_int),
        "tl_client_set_token": ([vp, ctypes.c_char_p, e], ctypes.c_int),
        "tl_client_get_for_device": ([vp, ctypes.POINTER(_Request), vp, ctypes.POINTER(vp), e], ctypes.c_int),
        "tl_artifact_target": ([vp], ctypes.c_char_p),
        "tl_artifact_free": ([vp], None),
    }
    for name, (argt, rest) in sigs.items():
        f = getattr(L, name)
        f.argtypes, f.restype = argt, rest
    _lib = L
    return L


def _check(st, err, what):
    if st != 0:
        raise TlirError("%s: %s" % (what, err.message.decode(errors="replace")))


def device(ordinal):
    if ordinal not in _devices:
        L, err, d = lib(), _Err(), ctypes.c_void_p()
        _check(L.tl_device_open(ordinal, ctypes.byref(d), ctypes.byref(err)), err,
               "opening GPU %d" % ordinal)
        _devices[ordinal] = d
    return _devices[ordinal]


def _target(d):
    """The target tlc builds for this GPU: sm_XXa where the architecture has
    one (sm_90 and newer: wgmma), as `tlc run --device` picks."""
    L = lib()
    if L.tl_device_get_api(d) != 1:
        return L.tl_device_arch_name(d).decode()
    arch = L.tl_device_arch(d)
    return ("sm_%da" if arch >= 90 else "sm_%d") % arch


def _load(kernel, d, ordinal):
    from ._runtime import TlcError, _run_tlc, _write_doc
    L, err, k = lib(), _Err(), ctypes.c_void_p()
    text = kernel.func.script().encode()
    server = os.environ.get("TL_SERVER")
    if server:
        global _client
        if _client is None:
            c = ctypes.c_void_p()
            _check(L.tl_client_new(ctypes.byref(c), ctypes.byref(err)), err, "tl_client_new")
            _check(L.tl_client_set_server(c, server.encode(), ctypes.byref(err)), err, "TL_SERVER")
            if os.environ.get("TL_TOKEN"):
                _check(L.tl_client_set_token(c, os.environ["TL_TOKEN"].encode(), ctypes.byref(err)), err,
                       "TL_TOKEN")
            _client = c
        req = _Request(text, len(text), kernel.func.name.encode(), None, 0, None)
        a = ctypes.c_void_p()
        _check(L.tl_client_get_for_device(_client, ctypes.byref(req), d, ctypes.byref(a), ctypes.byref(err)),
               err, "compiling '%s' through %s" % (kernel.func.name, server))
        try:
            _check(L.tl_kernel_load(d, a, ctypes.byref(k), ctypes.byref(err)), err, "loading the kernel")
        finally:
            L.tl_artifact_free(a)
        return k
    target = _target(d)
    with tempfile.TemporaryDirectory(prefix="tlir-") as tmp:
        path = _write_doc(kernel.func, tmp)
        out = os.path.join(tmp, "k.bin")
        r = _run_tlc(["compile", path, "--target", target, "-o", out])
        if r.returncode != 0:
            raise TlcError(kernel.func, r.stderr, path, "tlc compile --target " + target)
        m = _run_tlc(["compile", path, "--target", target, "--emit", "meta"])
        if m.returncode != 0:
            raise TlcError(kernel.func, m.stderr, path, "tlc compile --emit meta")
        data = open(out, "rb").read()
    _check(L.tl_kernel_load_binary(d, target.encode(), data, len(data), m.stdout.encode(), ctypes.byref(k),
                                   ctypes.byref(err)), err, "loading '%s' (%s) on GPU %d" % (
                                       kernel.func.name, target, ordinal))
    return k


_TORCH_DTYPES = {"bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
                 "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
                 "float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
                 "float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}


def torch_dtype(dtype):
    """The torch dtype of a Tile IR dtype."""
    import torch
    return getattr(torch, _TORCH_DTYPES[dtype])


def _dims(kernel, i, dyn):
    out = []
    for d in kernel.func.doc["params"][i]["shape"]:
        if isinstance(d, int):
            out.append(d)
        elif d in dyn:
            out.append(dyn[d])
        else:
            raise TlirError("output '%s': dimension '%s' is not known from the inputs"
                            % (kernel.func.params[i]["py"], d))
    return out


def launch(kernel, args):
    import torch
    bound = kernel._bind(args)
    params = kernel.func.params
    dev = None
    dyn = {}
    for i, a in bound.items():
        p = params[i]
        if p["kind"] != "tensor":
            continue
        if not isinstance(a, torch.Tensor) or not a.is_cuda:
            raise TlirError("'%s' must be a CUDA tensor (all tensors of one call on one GPU)" % p["py"])
        if dev is not None and a.device != dev:
            raise TlirError("'%s' is on %s, the other tensors on %s" % (p["py"], a.device, dev))
        dev = a.device
        want = torch_dtype(p["dtype"])
        if a.dtype != want:
            raise TlirError("'%s' is %s; the kernel's '%s' is %s" % (p["py"], a.dtype, p["name"], p["dtype"]))
        if not a.is_contiguous():
            raise TlirError("'%s' is not contiguous; Tile IR tensors are dense row-major (use .contiguous())"
                            % p["py"])
        shape = kernel.func.doc["params"][i]["shape"]
        if a.dim() != len(shape):
            raise TlirError("'%s' has %d dimensions, the kernel's '%s' %d" % (p["py"], a.dim(), p["name"], len(shape)))
        for d, s in zip(shape, a.shape):
            if isinstance(d, str) and d in kernel.func.dynamic:
                if dyn.setdefault(d, int(s)) != int(s):
                    raise TlirError("dynamic '%s' is %d from one tensor and %d from '%s'" % (d, dyn[d], s, p["py"]))
            elif isinstance(d, int) and d != s:
                raise TlirError("'%s' has shape %s; the kernel's '%s' is %s" % (p["py"], tuple(a.shape), p["name"], shape))
    if dev is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    ordinal = dev.index if dev.index is not None else torch.cuda.current_device()
    outs = {}
    for i in kernel.out_idx:
        p = params[i]
        outs[i] = torch.empty(_dims(kernel, i, dyn), dtype=torch_dtype(p["dtype"]), device=dev)
    d = device(ordinal)
    cache = kernel.__dict__.setdefault("_gpu_kernels", {})
    if ordinal not in cache:
        cache[ordinal] = _load(kernel, d, ordinal)
    k = cache[ordinal]
    cargs = []
    for i, q in enumerate(kernel.func.doc["params"]):
        if q["kind"] == "tensor":
            t = outs[i] if i in outs else bound[i]
            cargs.append(_Arg(ARG_TENSOR, t.data_ptr(), 0, 0.0))
        elif q["name"] in dyn:
            cargs.append(_Arg(ARG_INT, 0, dyn[q["name"]], 0.0))
        elif i < len(params):
            v = bound[i]
            if q["dtype"] == "float32":
                cargs.append(_Arg(ARG_FLOAT, 0, 0, float(v)))
            else:
                cargs.append(_Arg(ARG_INT, 0, int(v), 0.0))
        else:
            raise TlirError("dynamic '%s' is not the size of any input tensor's dimension" % q["name"])
    arr = (_Arg * len(cargs))(*cargs)
    stream = torch.cuda.current_stream(dev).cuda_stream
    err = _Err()
    _check(lib().tl_kernel_launch(k, arr, len(cargs), ctypes.c_void_p(stream), ctypes.byref(err)), err,
           "launching '%s'" % kernel.func.name)
    got = [outs[i] for i in kernel.out_idx]
    if not got:
        return None
    return got[0] if len(got) == 1 else got

