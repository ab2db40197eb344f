#!/usr/bin/env python3
"""tests/gpu/ptx_fuzz.py - a differential fuzz of the direct PTX back end
(compiler/emit_ptx.c, issue 10): random element-wise programs of its
subset through both back ends on the GPU, against the interpreter.

Each program: a dynamic size n, two float inputs and an int32 input (their
dtypes drawn from float32, float16, bfloat16), one output of a drawn dtype
(float32, float16, bfloat16, int32), and a body that is either a register
fragment loaded, updated by a parallel loop and stored, or a cooperative
parallel loop reading and writing the tensors; the updates are random
expression trees of the operations the subset takes (+ - * / min max abs
sqrt floor ceil trunc clamp if_then_else comparisons, casts through
float16 and bfloat16, int32 + - * & | ^ // % ceildiv (odd divisors: the
interpreter reports a division by zero as an error; -1 included) and float
to int32 truncation).
No fma or exp2: the interpreter's fma rounds twice and exp2 is approximate
on the GPU, and both would make exact comparison unsound.  Every operation
the generator draws is exactly rounded in IEEE arithmetic (one rounding to
float32, then to the 16-bit type where the type says), so the PTX back
end, which never contracts, must give the interpreter's values exactly
(NaNs alike; a zero's sign is not compared); the CUDA back end (NVRTC contracts a * b + c into an fma) is
compared within 2 ulps only as information.

    python3 tests/gpu/ptx_fuzz.py [--tlc build/bin/tlc] [-n 30] [--seed S] [--timeout S]
    python3 tests/gpu/ptx_fuzz.py --no-device ...   (no GPU: every program must be
                                                     built by the PTX back end and assemble)

Prints one line per program and a last line "N passed, N failed"; exits 1
if any failed, 77 without a GPU (unless --no-device).
"""
import argparse, json, os, random, subprocess, sys, tempfile
import numpy as np

FLOATS = ["float32", "float16", "bfloat16"]


class Gen:
    def __init__(self, rng, frag):
        self.rng = rng
        self.frag = frag  # the loop owns fragment fa (a's tile) or reads the tensors

    def leaf_f(self):
        r = self.rng.random()
        g = "bx * block_n + i"
        if r < 0.35:
            return "fa[i]" if self.frag else f"float32(a[{g}])"
        if r < 0.6:
            return f"float32(b[{g}])"
        if r < 0.75:
            return f"float32(c[{g}])"
        return repr(round(self.rng.uniform(-4, 4), 3))

    def leaf_i(self):
        r = self.rng.random()
        if r < 0.5:
            return "c[bx * block_n + i]"
        if r < 0.7:
            return "i"
        return str(self.rng.choice([0, -1, 1, self.rng.randint(-50, 50)]))

    def f(self, d):
        if d <= 0 or self.rng.random() < 0.2:
            return self.leaf_f()
        k = self.rng.randrange(12)
        x = lambda: self.f(d - 1)
        if k < 4:
            return f"({x()} {'+-*/'[k]} {x()})"
        if k == 4:
            return f"{self.rng.choice(['min', 'max'])}({x()}, {x()})"
        if k == 5:
            return f"{self.rng.choice(['abs', 'floor', 'ceil', 'trunc'])}({x()})"
        if k == 6:
            return f"sqrt(abs({x()}))"
        if k == 7:
            return f"float32({self.rng.choice(['float16', 'bfloat16'])}({x()}))"
        if k == 8:
            return f"if_then_else({x()} {self.rng.choice(['<', '<=', '==', '!='])} {x()}, {x()}, {x()})"
        if k == 9:
            return f"clamp({x()}, -2.0, 3.0)"
        if k == 10:
            return f"float32({self.i(d - 1)})"
        return f"(-{x()})"

    def i(self, d):
        if d <= 0 or self.rng.random() < 0.3:
            return self.leaf_i()
        k = self.rng.randrange(5)
        if k < 3:  # a divisor is odd (x | 1): never 0, which the interpreter reports as an error; -1 stays
            op = self.rng.choice(['+', '-', '*', '&', '|', '^', '//', '%'])
            return f"({self.i(d - 1)} {op} {self.i(d - 1) if op not in ('//', '%') else f'({self.i(d - 1)} | 1)'})"
        if k == 3:
            return f"ceildiv({self.i(d - 1)}, ({self.i(d - 1)} | 1))"
        return f"int32(clamp({self.f(d - 1)}, -1000.0, 1000.0))"


def program(rng, idx):
    frag = rng.random() < 0.6
    ta, tb, to = rng.choice(FLOATS), rng.choice(FLOATS), rng.choice(FLOATS + ["int32"])
    block_n = rng.choice([64, 128, 200, 256, 512])
    g = Gen(rng, frag)
    val = g.i(3) if to == "int32" else g.f(4)
    body = []
    if frag:
        body += [{"op": "alloc_fragment", "name": "fa", "shape": ["block_n"], "dtype": "float32"},
                 {"op": "copy", "src": "a[bx * block_n]", "dst": "fa"},
                 {"op": "parallel", "vars": ["i"], "extents": ["block_n"], "body": [
                     f"o[bx * block_n + i] = {val}"]}]
    else:
        body += [{"op": "parallel", "vars": ["i"], "extents": ["block_n"], "body": [
            f"o[bx * block_n + i] = {val}"]}]
    return {
        "tlir": 1, "name": f"ptx_fuzz_{idx}", "constants": {"block_n": block_n},
        "params": [{"name": "n", "kind": "scalar", "dtype": "int32"},
                   {"name": "a", "kind": "tensor", "dtype": ta, "shape": ["n"]},
                   {"name": "b", "kind": "tensor", "dtype": tb, "shape": ["n"]},
                   {"name": "c", "kind": "tensor", "dtype": "int32", "shape": ["n"]},
                   {"name": "o", "kind": "tensor", "dtype": to, "shape": ["n"]}],
        "kernel": {"grid": ["ceildiv(n, block_n)"], "threads": rng.choice([64, 128, 256]), "block_vars": ["bx"],
                   "body": body}}


def run(cmd, timeout):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", f"timed out after {timeout} s")


def as_f32(x, dt):
    if dt == "bfloat16":
        return np.left_shift(x.astype(np.uint32), 16).view(np.float32)
    return x.astype(np.float32) if dt != "int32" else x


def same_bits(x, y, dt):
    if dt == "int32":
        return np.array_equal(x, y)
    # values, NaN equal to NaN; the sign of a zero is not compared: the GPU negates 0 to -0 on both
    # back ends (IEEE neg), where the interpreter may give +0 (the H100 round of 2026-11-25)
    return np.array_equal(as_f32(x, dt), as_f32(y, dt), equal_nan=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tlc", default="build/bin/tlc")
    ap.add_argument("-n", type=int, default=30, help="programs")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--no-device", action="store_true", help="no GPU: check the PTX back end builds every program")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"# seed {seed} (--seed {seed} repeats it)")
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    work = tempfile.mkdtemp(prefix="tlptxfuzz-")
    if not a.no_device:
        probe = run([a.tlc, "run", "examples/tilus_add_one.json", "--device", "cuda", "--arg", "n=1"], a.timeout)
        if "no CUDA" in probe.stderr:
            print(f"SKIP: no GPU here: {probe.stderr.strip()}", file=sys.stderr)
            return 77
    passed = failed = 0
    for k in range(a.n):
        prog = program(rng, k)
        path = os.path.join(work, f"p{k}.json")
        with open(path, "w") as f:
            json.dump(prog, f)
        val = prog["kernel"]["body"][-1]["body"][0]
        to = prog["params"][4]["dtype"]
        label = f"#{k} ({to}) {val[:140]}"
        if a.no_device:
            bad = []
            for tgt in ("sm_80", "sm_90a"):
                r = run([a.tlc, "compile", path, "--target", tgt, "--backend", "ptx", "-o", os.path.join(work, "x.cubin")],
                        a.timeout)
                if r.returncode:
                    bad.append(f"{tgt}: {r.stderr.strip()[-400:]}")
            print(f"{'FAIL' if bad else 'ok  '} {label}{': ' + '; '.join(bad) if bad else ''}")
            passed += not bad
            failed += bool(bad)
            continue
        n = rng.choice([1, 63, 1000, 4097, 100003])
        ins = []
        for p in prog["params"][1:4]:
            if p["dtype"] == "int32":
                x = nrng.integers(-100, 100, size=n).astype(np.int32)
            else:
                x = (nrng.standard_normal(n) * 3).astype(np.float16 if p["dtype"] == "float16" else np.float32)
            fn = os.path.join(work, f"{p['name']}.npy")
            np.save(fn, x)
            ins += ["--in", f"{p['name']}={fn}"]
        outs = {}
        for how in ("interpret", "ptx", "cuda"):
            fn = os.path.join(work, f"o.{how}.npy")
            if os.path.exists(fn):
                os.remove(fn)
            mode = ["--interpret"] if how == "interpret" else ["--device", "cuda", "--backend", how]
            r = run([a.tlc, "run", path] + mode + ["--arg", f"n={n}"] + ins + ["--out", f"o={fn}"], a.timeout)
            if r.returncode:
                outs[how] = f"rc={r.returncode} {r.stderr.strip()[-400:]}"
            else:
                outs[how] = np.load(fn)
        bad = [f"{h}: {v}" for h, v in outs.items() if isinstance(v, str)]
        if not bad and not same_bits(outs["ptx"], outs["interpret"], to):
            d = np.flatnonzero(as_f32(outs["ptx"], to) != as_f32(outs["interpret"], to))
            i = int(d[0]) if len(d) else 0
            bad.append(f"ptx differs from the interpreter at {len(d)} elements (first {i}: "
                       f"{as_f32(outs['ptx'], to)[i]!r} vs {as_f32(outs['interpret'], to)[i]!r})")
        note = ""
        if not bad and not same_bits(outs["cuda"], outs["interpret"], to):
            note = " (cuda: not bit-exact, as NVRTC contracts)"
        print(f"{'FAIL' if bad else 'ok  '} {label} n={n}{': ' + '; '.join(bad) if bad else note}")
        if bad:
            print(f"     program: {json.dumps(prog)}")
        passed += not bad
        failed += bool(bad)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
