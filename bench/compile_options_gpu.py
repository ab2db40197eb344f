#!/usr/bin/env python3
"""bench/compile_options_gpu.py - kernel speed of every example under other
compile options, side by side with the default build, on the local GPU: for
deciding a default such as `fast_compile` (NVRTC's --Ofast-compile), which
makes compiles cheaper and the code different (bench/compile.md).

    python3 bench/compile_options_gpu.py [--tlc build/bin/tlc] [--only REGEX] [--reps 50]
        [--variant NAME=OPTIONS_JSON]... [--compile-times REGEX] [-n 3]

For each example (examples/*.json at its own constants): random inputs
(the parameters' shapes and dtypes from `tlc compile --emit meta`; every
scalar parameter 4096, as a size), then per
variant (first `default`, no options; by default also fast_compile min, mid
and max) one `tlc run --device cuda --time REPS --options JSON` that writes
every tensor back; the variant's tensors are compared with the default
build's (the largest difference over the largest magnitude: other code may
round differently, a wrong kernel shows as a large one), and its time per
launch, its ratio to the default's and its registers and spills are
printed, with the wall and CPU time of its `tlc compile` (a fresh
process; for the examples matching --compile-times, the median of -n),
the compile-speed side of the same decision.  Exits 1 when a run
fails or a variant's results differ by more than 1e-2 of the largest
magnitude.
"""
import argparse, glob, json, os, re, resource, statistics, subprocess, sys, tempfile, time
import numpy as np

SCALAR_SIZE = 4096  # the value of every scalar parameter (tilus_add_one's n, tilus_matmul's m_size)
DEFAULT_VARIANTS = [("min", '{"fast_compile": "min"}'), ("mid", '{"fast_compile": "mid"}'),
                    ("max", '{"fast_compile": "max"}')]


def rand_input(dtype, shape, rng):
    """An array tlc run --in accepts for a tensor of this dtype (README:
    bfloat16 and float8 from float32, packed types one element a byte)."""
    if dtype == "float16":
        return rng.uniform(-1, 1, shape).astype(np.float16)
    if dtype in ("float32", "float64"):
        return rng.uniform(-1, 1, shape).astype(dtype)
    if dtype == "bfloat16" or dtype.startswith("float8_e4") or dtype.startswith("float8_e5"):
        return rng.uniform(-1, 1, shape).astype(np.float32)
    if dtype == "float8_e8m0":  # scales: powers of two
        return np.exp2(rng.integers(-2, 3, shape)).astype(np.float32)
    if dtype in ("uint4", "float4_e2m1"):
        return rng.integers(0, 16, shape, dtype=np.uint8)
    if dtype == "int4":
        return rng.integers(-8, 8, shape, dtype=np.int8)
    if dtype in ("uint2", "int2", "uint1", "int1"):
        lo = -(1 << (int(dtype[-1]) - 1)) if dtype[0] == "i" else 0
        return rng.integers(lo, lo + (1 << int(dtype[-1])), shape).astype(np.int8 if lo else np.uint8)
    if dtype in ("int8", "uint8", "int16", "uint16", "int32", "uint32"):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -8), min(info.max, 8) + 1, shape, dtype=dtype)
    raise ValueError("no random inputs for dtype " + dtype)


def meta_of(tlc, prog, options):
    """The metadata of a compile for sm_90a, and the wall and CPU
    milliseconds of that `tlc compile` (a fresh process, as the child's
    rusage gives it)."""
    cmd = [tlc, "compile", prog, "--target", "sm_90a", "--emit", "meta"] + (["--options", options] if options else [])
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    t1 = time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode:
        raise RuntimeError(r.stderr.strip()[-400:])
    return json.loads(r.stdout), (t1 - t0) * 1e3, (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1e3


def run(tlc, prog, options, ins, args, outdir, names, reps):
    cmd = [tlc, "run", prog, "--device", "cuda", "--time", str(reps)]
    for n, v in args.items():
        cmd += ["--arg", f"{n}={v}"]
    if options:
        cmd += ["--options", options]
    for n, f in ins.items():
        cmd += ["--in", f"{n}={f}"]
    for n in names:
        cmd += ["--out", f"{n}={outdir}/{n}.npy"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise RuntimeError(r.stderr.strip()[-400:])
    m = re.search(r"time: ([0-9.]+) ms per launch", r.stdout + r.stderr)
    if not m:
        raise RuntimeError("no time in: " + (r.stdout + r.stderr)[-300:])
    return float(m.group(1)), {n: np.load(f"{outdir}/{n}.npy") for n in names}


def difference(a, b):
    """The largest |a - b| over the largest |a| of every tensor, as floats."""
    worst = 0.0
    for n in a:
        x, y = a[n].astype(np.float64), b[n].astype(np.float64)
        both_nan = np.isnan(x) & np.isnan(y)
        d = np.where(both_nan, 0.0, np.abs(x - y))
        scale = max(float(np.nanmax(np.abs(x))) if x.size else 0.0, 1e-30)
        worst = max(worst, float(np.nanmax(d)) / scale if d.size else 0.0)
        if np.isnan(d).any():
            worst = float("inf")
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tlc", default="build/bin/tlc")
    ap.add_argument("--only", default=None, help="only the examples whose name matches this regex")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--variant", action="append", default=[], help="NAME=OPTIONS_JSON (default: fast_compile min, mid, max)")
    ap.add_argument("--compile-times", default=None, metavar="REGEX")
    ap.add_argument("-n", type=int, default=3)
    a = ap.parse_args()
    variants = [("default", None)] + ([tuple(v.split("=", 1)) for v in a.variant] or DEFAULT_VARIANTS)
    rng = np.random.default_rng(int(os.environ.get("TL_SEED", "1")))
    work = tempfile.mkdtemp(prefix="tlopts-")
    failed = False
    print("variants: " + "; ".join(f"{n} {o or '{}'}" for n, o in variants))
    for prog in sorted(glob.glob("examples/*.json")):
        name = os.path.basename(prog)[:-5]
        if a.only and not re.search(a.only, name):
            continue
        try:
            meta = meta_of(a.tlc, prog, None)[0]
            ins, names, args = {}, [], {}
            for p in meta["params"]:  # scalars first: a shape may name one
                if p["kind"] != "tensor":
                    args[p["name"]] = SCALAR_SIZE
            for p in meta["params"]:
                if p["kind"] != "tensor":
                    continue
                shape = [args.get(d, d) for d in p["shape"]]
                if not all(isinstance(d, int) for d in shape):
                    raise RuntimeError(f"parameter {p['name']} has a shape {p['shape']} that is not a scalar's")
                names.append(p["name"])
                ins[p["name"]] = f"{work}/{name}.{p['name']}.in.npy"
                np.save(ins[p["name"]], rand_input(p["dtype"], shape, rng))
        except Exception as e:  # noqa: BLE001
            print(f"FAIL {name}: {e}")
            failed = True
            continue
        base = None
        for vname, opts in variants:
            outdir = f"{work}/{name}.{vname}"
            os.makedirs(outdir, exist_ok=True)
            try:
                times = [meta_of(a.tlc, prog, opts) for _ in range(a.n if a.compile_times and re.search(a.compile_times, name) else 1)]
                res = times[0][0].get("resources", {})
                ms, outs = run(a.tlc, prog, opts, ins, args, outdir, names, a.reps)
            except Exception as e:  # noqa: BLE001
                print(f"FAIL {name} [{vname}]: {e}")
                failed = True
                continue
            line = (f"{name:28s} {vname:8s} {ms * 1e3:10.1f} us  regs {res.get('registers')} "
                    f"spills {res.get('spill_store_bytes')}/{res.get('spill_load_bytes')} B "
                    f"stack {res.get('stack_frame_bytes')} B")
            if base is None and vname == "default":
                base = (ms, outs)
            elif base is not None:
                diff = difference(base[1], outs)
                bad = not diff <= 1e-2
                failed |= bad
                line += f"  time {ms / base[0]:5.2f}x the default's, results differ by {diff:.2e} of the largest" + (
                    "  FAIL" if bad else "")
            line += "  compile %.0f ms wall, %.0f ms CPU (median of %d)" % (
                statistics.median(t[1] for t in times), statistics.median(t[2] for t in times), len(times))
            print(line, flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
