"""tlir.autotuner - TileLang's @autotune, without the tuning.

`@autotune(configs=...)` over a @tilelang.jit function passes every call
through when the call names every parameter the configs set; tuning (timing
each config on a GPU) is not done by tlir, so a call that leaves a tuned
parameter out is an error naming it.
"""

import functools
import inspect

from ._ir import TlirError

__all__ = ["autotune", "AutoTuner"]


def autotune(configs=None, warmup=25, rep=100, timeout=100, **kwargs):
    def deco(f):
        keys = set()
        cfgs = configs() if callable(configs) else (configs or [])
        for c in cfgs:
            keys |= set(c)

        @functools.wraps(f)
        def wrapper(*args, **kw):
            try:
                sig = inspect.signature(f)
                bound = sig.bind_partial(*args, **kw)
                given = set(bound.arguments)
            except (TypeError, ValueError):
                given = set(kw)
            missing = sorted(keys - given)
            if missing:
                raise TlirError("autotuning is not done by tlir: give %s" % ", ".join(missing))
            return f(*args, **kw)
        return wrapper
    return deco


class AutoTuner:
    def __init__(self, *a, **kw):
        raise TlirError("tilelang.autotuner.AutoTuner: autotuning is not done by tlir")
