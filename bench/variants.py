#!/usr/bin/env python3
"""bench/variants.py - the same kernels under several compiler settings, in
one run on one GPU: for tuning the back end, not for the record (the record
is bench/gpu_bench.py).

    python3 bench/variants.py [--tlc build/bin/tlc] [--out DIR]
                              [--variant NAME:VAR=VALUE,VAR=VALUE]... [--quick]

Each variant runs `tlc` with those environment variables set.  For each:
FlashAttention forward (batch 4, heads 32, seq 4096, dim 128; full and
causal) and GEMM float16 8192^3 (bench/programs/gemm_raster.json,
block_K=64): time per launch, TFLOP/s, relative error against torch on the
same inputs, registers and spills (ptxas), and the SASS instruction mix of
the flash kernel (cuobjdump: instructions per HMMA, the commonest opcodes).
"""
import argparse, collections, json, os, re, subprocess, sys, tempfile
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench import ours  # noqa: E402


def sass_mix(tlc, prog, defs, env, work):
    cub = f"{work}/k.cubin"
    cmd = [tlc, "compile", prog, "--target", "sm_90a"]
    for k, v in defs.items():
        cmd += ["-D", f"{k}={v}"]
    r = subprocess.run(cmd + ["-o", cub], capture_output=True, text=True, env=env)
    if r.returncode:
        return {"error": r.stderr.strip()}
    meta = subprocess.run(cmd + ["--emit", "meta"], capture_output=True, text=True, env=env).stdout
    regs = re.search(r"Used (\d+) registers", meta)
    spill = re.search(r"(\d+) bytes spill stores", meta)
    try:
        sass = subprocess.run(["cuobjdump", "-sass", cub], capture_output=True, text=True).stdout
    except FileNotFoundError:
        sass = ""
    ops = collections.Counter()
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            ops[m.group(2).split(".")[0]] += 1
    total = sum(ops.values())
    return {"regs": int(regs.group(1)) if regs else None, "spill_bytes": int(spill.group(1)) if spill else None,
            "static_instructions": total, "static_per_hmma": round(total / ops["HMMA"], 2) if ops["HMMA"] else None,
            "top": ops.most_common(14)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tlc", default="build/bin/tlc")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-gemm", action="store_true")
    ap.add_argument("--no-flash", action="store_true")
    ap.add_argument("--gemm-defs", action="append", default=None,
                    help="-D settings of bench/programs/gemm_raster.json (default: block_K=64)")
    ap.add_argument("--flash-defs", action="append", default=None,
                    help="-D settings of the flash example, e.g. block_N=64,threads=128 (default: as written)")
    a = ap.parse_args()
    a.flash_defs = [] if a.no_flash else (a.flash_defs or [""])
    a.gemm_defs = a.gemm_defs or ["block_K=64"]
    variants = [("base", {})]
    for v in a.variant:
        name, _, kv = v.partition(":")
        variants.append((name, dict(x.split("=", 1) for x in kv.split(",") if x)))
    work = tempfile.mkdtemp(prefix="tlvar-")
    torch.manual_seed(0)
    res = {"device": torch.cuda.get_device_name(), "variants": []}
    Bz, H, S, D = (4, 32, 4096, 128) if not a.quick else (1, 8, 2048, 128)
    q, k, v = (torch.randn(Bz, S, H, D, device="cuda", dtype=torch.float16) for _ in range(3))
    for name, t in (("Q", q), ("K", k), ("V", v)):
        np.save(f"{work}/{name}.npy", t.cpu().numpy())
    refs = {}
    for causal in (False, True):
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        refs[causal] = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2).float()
    n = 8192 if not a.quick else 4096
    A = torch.randn(n, n, device="cuda", dtype=torch.float16)
    B = torch.randn(n, n, device="cuda", dtype=torch.float16)
    np.save(f"{work}/A.npy", A.cpu().numpy())
    np.save(f"{work}/B.npy", B.cpu().numpy())
    gref = A.float() @ B.float()
    for vname, venv in variants:
        env = dict(os.environ, **venv)
        old = dict(os.environ)
        os.environ.update(venv)
        row = {"variant": vname, "env": venv}
        try:
            for (fc, causal) in [(fc, c) for fc in a.flash_defs for c in (False, True)]:
                extra = dict(x.split("=", 1) for x in fc.split(",") if x)
                tag = ("causal" if causal else "full") + (f"[{fc}]" if fc else "")
                defs = dict({"batch": Bz, "heads": H, "seq_len": S, "dim": D, "is_causal": "true" if causal else "false"},
                            **extra)
                flops = 4 * Bz * H * S * S * D // (2 if causal else 1)
                try:
                    ms = ours(a.tlc, "examples/flash_attention.json", defs,
                              {"Q": f"{work}/Q.npy", "K": f"{work}/K.npy", "V": f"{work}/V.npy"},
                              {"Output": f"{work}/O.npy"}, 5)
                    O = torch.from_numpy(np.load(f"{work}/O.npy")).cuda().float()
                    err = (torch.linalg.norm(O - refs[causal]) / torch.linalg.norm(refs[causal])).item()
                    row[tag] = {"ms": ms, "tflops": flops / ms / 1e9, "rel_err": err}
                except Exception as ex:
                    row[tag] = {"error": str(ex)[-400:]}
                if not causal:
                    row["flash_sass" + (f"[{fc}]" if fc else "")] = sass_mix(
                        a.tlc, "examples/flash_attention.json",
                        dict({"batch": Bz, "heads": H, "seq_len": S, "dim": D}, **extra), env, work)
            for gc in ([] if a.no_gemm else a.gemm_defs):
                defs = dict({"M": n, "N": n, "K": n}, **dict(x.split("=", 1) for x in gc.split(",") if x))
                tag = f"gemm[{gc}]"
                try:
                    ms = ours(a.tlc, "bench/programs/gemm_raster.json", defs, {"A": f"{work}/A.npy", "B": f"{work}/B.npy"},
                              {"C": f"{work}/C.npy"}, 10)
                    C = torch.from_numpy(np.load(f"{work}/C.npy")).cuda().float()
                    err = (torch.linalg.norm(C - gref) / torch.linalg.norm(gref)).item()
                    row[tag] = {"n": n, "ms": ms, "tflops": 2 * n ** 3 / ms / 1e9, "rel_err": err}
                except Exception as ex:
                    row[tag] = {"error": str(ex)[-400:]}
                row["gemm_sass" + tag[4:]] = sass_mix(a.tlc, "bench/programs/gemm_raster.json", defs, env, work)
        finally:
            os.environ.clear()
            os.environ.update(old)
        res["variants"].append(row)
        print(json.dumps(row), flush=True)
    print("# summary (TFLOP/s, rel err): variant, case; registers, spilled bytes, static instructions per HMMA")
    for r in res["variants"]:
        for key, val in r.items():
            if isinstance(val, dict) and ("tflops" in val or "error" in val):
                br = key[key.index("["):] if "[" in key else ""
                sk = ("gemm_sass" if key.startswith("gemm") else "flash_sass") + br
                fs = r.get(sk, {})
                t = f"{val['tflops']:7.1f} {val['rel_err']:.1e}" if "tflops" in val else "   FAIL"
                print(f"{r['variant']:14s} {key:40s} {t}  regs {fs.get('regs')} spill {fs.get('spill_bytes')} "
                      f"instr/hmma {fs.get('static_per_hmma')}")
    with open(os.path.join(a.out, "variants.json"), "w") as fp:
        json.dump(res, fp, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
