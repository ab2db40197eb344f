"""tlir - TileLang programs as Tile IR.

`import tlir as tilelang` and `import tlir.language as T` in place of
TileLang's imports: @T.prim_func functions are translated to Tile IR v1
(proto/tile-ir-v1.md) and run through `tlc` (the reference interpreter on
numpy arrays).  `python3 -m tlir emit FILE.py FUNCTION [NAME=VALUE]...`
prints a program's Tile IR.
"""

import functools

from . import _options, language  # noqa: F401
from ._ir import TlirError
from ._runtime import JITKernel, Profiler, TlcError, check, find_tlc  # noqa: F401
from ._trace import PrimFunc

from . import autotuner, intrinsics, layout, testing, tvm, utils  # noqa: F401
from .utils.tensor import TensorSupplyType  # noqa: F401
from .autotuner import autotune  # noqa: F401

__version__ = "0.1.0"


def cdiv(a, b):
    """tilelang.cdiv: ceiling division of Python integers."""
    return -(-a // b)


def compile(func, out_idx=None, target="auto", execution_backend=None, target_host=None,
            verbose=False, pass_configs=None, compile_flags=None):  # noqa: A001
    """tilelang.compile: a JITKernel of a prim_func (translated, checked by tlc)."""
    if isinstance(func, JITKernel):
        func = func.func
    return JITKernel(_options.apply_pass_configs(func, pass_configs, compile_flags), out_idx=out_idx, target=target)


def jit(func=None, *, out_idx=None, target="auto", execution_backend=None, target_host=None,
        verbose=False, pass_configs=None, debug_root_path=None, compile_flags=None):
    """@tilelang.jit / @tilelang.jit(out_idx=...): on a function that returns a
    prim_func, calling it returns the JITKernel (one per argument tuple); on a
    prim_func, the JITKernel itself."""
    _options.pass_config_fields(pass_configs, compile_flags)  # refused ones fail at the decorator

    def deco(f):
        if isinstance(f, PrimFunc):
            return JITKernel(_options.apply_pass_configs(f, pass_configs, compile_flags), out_idx=out_idx,
                             target=target)
        cache = {}

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            key = (args, tuple(sorted(kwargs.items())))
            try:
                hash(key)
            except TypeError:
                key = None
            if key is not None and key in cache:
                return cache[key]
            pf = f(*args, **kwargs)
            if not isinstance(pf, PrimFunc):
                raise TlirError("@tilelang.jit: '%s' returned %s, not a @T.prim_func"
                                % (f.__name__, type(pf).__name__))
            k = JITKernel(_options.apply_pass_configs(pf, pass_configs, compile_flags), out_idx=out_idx, target=target)
            if key is not None:
                cache[key] = k
            return k
        wrapper.get_tir = lambda *a, **kw: f(*a, **kw)
        return wrapper
    if func is not None:
        return deco(func)
    return deco


def lower(func, target="auto", target_host=None, runtime_only=False):
    """tilelang.lower of the seeds: (rt_mod, params); rt_mod runs and gives
    its source (rt_mod.imported_modules[0].get_source())."""
    k = JITKernel(func, target=target)
    return k, k.params


def disable_cache():
    """TileLang's kernel cache switch; tlir keeps no kernel cache."""


class PassConfigKey:
    """TileLang's pass config names; what Tile IR makes of each: _options.PASS_CONFIGS."""
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_DYNAMIC_ALIGNMENT = "tl.dynamic_alignment"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_DISABLE_DYNAMIC_TAIL_SPLIT = "tl.disable_dynamic_tail_split"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"

