#!/usr/bin/env python3
"""tests/gpu/check_examples.py - every example on the GPU against the
reference interpreter.

For each example and each size below: fresh random inputs (never zeros;
the seed is printed), `tlc run --interpret` gives the reference outputs,
`tlc run --device cuda` the GPU's (outputs start poisoned: NaN or 0xA5
bytes, so an element the kernel never writes shows), and the two are
compared relative to the reference's norm with a bound per dtype
(float32 1e-4, float16 1e-2, bfloat16 2e-2).  Prints one line per case and
a last line "N passed, N failed"; exits 1 if any failed, 77 if there is no
GPU.

    python3 tests/gpu/check_examples.py [--tlc build/bin/tlc] [--out DIR] [--sanitize]
        [--only NAME] [--target T]   (T: e.g. compute_75, the portable paths of sm_75)
"""
import argparse, json, os, subprocess, sys, tempfile, time
import numpy as np

TOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2, "float64": 1e-10}

# (example, -D overrides, --arg values, outputs)
FA = {"batch": 1, "heads": 2}
CASES = [
    ("tilus_add_one", {}, {"n": 1}, ["b"]),
    ("tilus_add_one", {}, {"n": 129}, ["b"]),
    ("tilus_add_one", {}, {"n": 1 << 20}, ["b"]),
    ("gemm", {"M": 256, "N": 256, "K": 256}, {}, ["C"]),
    ("gemm", {"M": 200, "N": 136, "K": 72}, {}, ["C"]),
    ("gemm", {"M": 1024, "N": 1024, "K": 1024}, {}, ["C"]),
    ("gemm_nt", {"M": 256, "N": 256, "K": 256}, {}, ["C"]),
    ("gemm_nt", {"M": 130, "N": 257, "K": 33}, {}, ["C"]),
    ("gemm_swizzle", {"M": 256, "N": 256, "K": 256}, {}, ["C"]),
    ("gemm_swizzle", {"M": 200, "N": 136, "K": 72}, {}, ["C"]),
    ("../bench/programs/gemm_raster", {"M": 1000, "N": 1100, "K": 200}, {}, ["C"]),
    # wgmma on sm_90a (8 warps, 64-wide K tiles): B N-major in panels, N = 128 and 256; B K-major
    ("../bench/programs/gemm_raster", {"M": 1000, "N": 1100, "K": 200, "block_K": 64, "threads": 256}, {}, ["C"]),
    ("../bench/programs/gemm_raster", {"M": 512, "N": 768, "K": 320, "block_K": 64, "block_N": 256, "threads": 256},
     {}, ["C"]),
    ("../tests/gpu/programs/gemm_bt", {"M": 1000, "N": 1100, "K": 200}, {}, ["C"]),
    ("../tests/gpu/programs/gemm_bt", {"M": 256, "N": 256, "K": 1024, "block_N": 64}, {}, ["C"]),
    ("dequant_gemm", {"M": 256, "N": 256, "K": 256}, {}, ["Ct"]),
    ("dequant_gemm", {"M": 136, "N": 200, "K": 72}, {}, ["Ct"]),
    ("dequant_gemm_threads", {"M": 256, "N": 256, "K": 256}, {}, ["C"]),
    ("tilus_matmul", {"n_size": 256, "k_size": 256}, {"m_size": 1}, ["c"]),
    ("tilus_matmul", {"n_size": 256, "k_size": 256}, {"m_size": 7}, ["c"]),
    ("tilus_matmul", {"n_size": 256, "k_size": 256}, {"m_size": 300}, ["c"]),
    ("tilus_matmul", {"n_size": 256, "k_size": 256}, {"m_size": 4096}, ["c"]),
    ("flash_attention", dict(FA, seq_len=256, dim=128), {}, ["Output"]),
    ("flash_attention", dict(FA, seq_len=256, dim=128, is_causal="true"), {}, ["Output"]),
    ("flash_attention", dict(FA, seq_len=100, dim=64, block_M=64, block_N=64, threads=128), {}, ["Output"]),
    ("flash_attention", dict(FA, seq_len=100, dim=64, block_M=64, block_N=64, threads=128, is_causal="true"), {},
     ["Output"]),
]


def run(cmd, timeout=600):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tlc", default="build/bin/tlc")
    ap.add_argument("--out", default=None)
    ap.add_argument("--sanitize", action="store_true", help="run the device side under compute-sanitizer")
    ap.add_argument("--only", default=None)
    ap.add_argument("--target", default=None,
                    help="build for this target instead of the GPU's own (e.g. compute_75: sm_75's portable paths)")
    a = ap.parse_args()
    probe = subprocess.run([a.tlc, "run", "examples/tilus_add_one.json", "--device", "cuda", "--arg", "n=1"],
                           capture_output=True, text=True)
    if "no CUDA" in probe.stderr:
        print(f"SKIP: no GPU here: {probe.stderr.strip()}", file=sys.stderr)
        return 77
    seed = int(os.environ.get("TL_SEED", time.time_ns() % (1 << 31)))
    print(f"# seed {seed} (TL_SEED={seed} repeats it)")
    rng = np.random.default_rng(seed)
    work = tempfile.mkdtemp(prefix="tlgpu-")
    passed = failed = 0
    for name, defs, args, outs in CASES:
        if a.only and a.only not in name:
            continue
        prog = f"examples/{name}.json"
        dflags = sum([["-D", f"{k}={v}"] for k, v in defs.items()], [])
        aflags = sum([["--arg", f"{k}={v}"] for k, v in args.items()], [])
        # shapes and dtypes from the metadata of a compile at these constants
        r, _ = run([a.tlc, "compile", prog, "--target", "compute_80", "--emit", "meta"] + dflags)
        if r.returncode:
            print(f"FAIL {name} {defs} {args}: compile: {r.stderr.strip()[:500]}")
            failed += 1
            continue
        meta = json.loads(r.stdout)
        env = dict(defs)
        env.update(args)
        inflags, ok = [], True
        for p in meta["params"]:
            if p["kind"] != "tensor" or p["name"] in outs:
                continue
            shape = [int(eval(str(d), {"__builtins__": {}}, env)) if isinstance(d, str) else d for d in p["shape"]]
            dt = p["dtype"]
            if dt == "int8":
                x = rng.integers(-128, 128, size=shape, dtype=np.int8)
            else:
                x = rng.standard_normal(shape)
                x = np.where(np.abs(x) < 1e-3, 0.5, x)  # never zeros
                x = x.astype(np.float16 if dt == "float16" else np.float32)
            path = os.path.join(work, f"{os.path.basename(name)}.{p['name']}.npy")
            np.save(path, x)
            inflags += ["--in", f"{p['name']}={path}"]
        base = os.path.basename(name)
        ref_out = [f"{o}={work}/{base}.{o}.ref.npy" for o in outs]
        dev_out = [f"{o}={work}/{base}.{o}.dev.npy" for o in outs]
        r1, t1 = run([a.tlc, "run", prog, "--interpret"] + dflags + aflags + inflags + sum([["--out", o] for o in ref_out], []))
        dev_cmd = [a.tlc, "run", prog, "--device", "cuda"] + (["--target", a.target] if a.target else []) + dflags + aflags + inflags + sum([["--out", o] for o in dev_out], [])
        if a.sanitize:
            dev_cmd = ["compute-sanitizer", "--error-exitcode", "3", "--tool", "memcheck"] + dev_cmd
        r2, t2 = run(dev_cmd)
        label = f"{name} {' '.join(f'{k}={v}' for k, v in {**defs, **args}.items())}"
        if r1.returncode or r2.returncode:
            print(f"FAIL {label}: interpret rc={r1.returncode} {r1.stderr.strip()[:300]} | device rc={r2.returncode} {r2.stderr.strip()[-600:]}")
            failed += 1
            continue
        for o in outs:
            ref = np.load(f"{work}/{base}.{o}.ref.npy").astype(np.float64)
            dev = np.load(f"{work}/{base}.{o}.dev.npy").astype(np.float64)
            dt = [p["dtype"] for p in meta["params"] if p["name"] == o][0]
            nan = int(np.isnan(dev).sum()) - int(np.isnan(ref).sum())
            err = float(np.linalg.norm(np.nan_to_num(dev - ref)) / max(np.linalg.norm(np.nan_to_num(ref)), 1e-30))
            good = nan == 0 and err <= TOL[dt]
            print(f"{'ok  ' if good else 'FAIL'} {label} {o}: rel err {err:.2e} (bound {TOL[dt]:g}), "
                  f"unwritten {nan}, interp {t1:.2f}s, device {t2:.2f}s")
            passed += good
            failed += not good
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
