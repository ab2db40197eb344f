"""tlir.autotuner - TileLang's @autotune, without the tuning.

`@autotune(configs=...)` over a @tilelang.jit function passes every call
through: tuning (timing each config on a GPU) is not done by tlir, so a
tuned parameter left out of the call takes its default from the function's
signature (which changes speed, never results), and one without a default
is an error naming it.
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
            try:
                defaults = {k for k, p in inspect.signature(f).parameters.items()
                            if p.default is not inspect.Parameter.empty}
            except (TypeError, ValueError):
                defaults = set()
            no_default = [k for k in missing if k not in defaults]
            if no_default:
                raise TlirError("autotuning is not done by tlir: give %s" % ", ".join(no_default))
            return f(*args, **kw)  # tuned parameters left out take their defaults
        return wrapper
    return deco


class AutoTuner:
    def __init__(self, *a, **kw):
        raise TlirError("tilelang.autotuner.AutoTuner: autotuning is not done by tlir")
