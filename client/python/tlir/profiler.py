"""tlir.profiler - do_bench: milliseconds per call of fn() (wall time on
the host; for a kernel run by the interpreter that is the interpreter's
time, not a GPU's)."""

import time


def do_bench(fn, warmup=0, rep=1, **kwargs):
    for _ in range(max(0, int(warmup))):
        fn()
    n = max(1, int(rep))
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) * 1e3 / n
