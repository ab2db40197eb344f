"""tlir.testing - tilelang.testing.set_random_seed."""

import random


def set_random_seed(seed=42):
    random.seed(seed)
    try:
        import numpy
        numpy.random.seed(seed)
    except ImportError:
        pass
    try:
        import torch
        torch.manual_seed(seed)
    except ImportError:
        pass


def requires_package(*names):
    """A decorator: the function runs only where every package is importable;
    elsewhere calling it raises ImportError naming the missing one."""
    import functools
    import importlib.util

    def deco(f):
        missing = [n for n in names if importlib.util.find_spec(n) is None]
        if not missing:
            return f

        @functools.wraps(f)
        def skipped(*a, **kw):
            raise ImportError("%s needs the package(s) %s" % (f.__name__, ", ".join(missing)))
        return skipped
    return deco


def main():
    """tilelang.testing.main(): runs nothing (tlir has no pytest driver)."""
