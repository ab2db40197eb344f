#!/usr/bin/env python3
"""bench/nvrtc_trace.py - where NVRTC's time goes for one program: its own
`--fdevice-time-trace` split of the front end (parsing and semantic analysis
of the CUDA C, template instantiation, Clang-style code generation to NVVM
IR) against NVVM (the LLVM optimizer and the PTX back end), and ptxas.

    python3 bench/nvrtc_trace.py PROGRAM.json [--target sm_90a] [--tlc build/bin/tlc]
                                 [--nvrtc /usr/local/cuda/lib64/libnvrtc.so] [-n 3] [-D NAME=VALUE]...

Generates the CUDA C with `tlc compile --emit cuda`, then compiles it N times
through NVRTC (loaded with ctypes) with the options compiler/nvrtc.c uses
(--gpu-architecture, --std=c++17, -default-device, --no-cache,
--diag-suppress=177; NVRTC 13.0's: older ones refuse the two before last) plus
--fdevice-time-trace=FILE, once to PTX (compute_XX) and once to a cubin
(sm_XX, which adds ptxas).  Prints, per run, the wall time of
nvrtcCompileProgram and the trace's top-level events (the Chrome trace
format: "ph": "X" with "dur" in microseconds), summed by name, and the medians.
"""
import argparse, ctypes, json, os, statistics, subprocess, sys, tempfile, time
from collections import defaultdict


def nvrtc_compile(lib, src, opts):
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None)
    if rc:
        sys.exit("nvrtcCreateProgram: %d" % rc)
    arr = (ctypes.c_char_p * len(opts))(*opts)
    t0 = time.perf_counter()
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    dt = time.perf_counter() - t0
    if rc:
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetProgramLog(prog, buf)
        sys.exit("nvrtcCompileProgram: %d\n%s" % (rc, buf.value.decode(errors="replace")))
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return dt * 1e3


# The phases worth naming, as NVRTC 13.0's trace calls them (nested events
# under the top-level "CUDA C++ Front-End", "LibNVVM" and "Total PTXAS Time").
PHASES = ["Processing Header File", "Wrapping up translation unit", "NVVM Module Linker", "NVVM Optimizer",
          "NVVM CodeGen"]


def compile_code(lib, src, opts):
    """(wall milliseconds, CPU milliseconds of the process, the PTX or
    cubin) of one compile.  CPU time is the steadier figure on a shared
    machine: NVRTC 13.0 compiles on the calling thread."""
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None):
        sys.exit("nvrtcCreateProgram failed")
    arr = (ctypes.c_char_p * len(opts))(*opts)
    t0, c0 = time.perf_counter(), time.process_time()
    if lib.nvrtcCompileProgram(prog, len(opts), arr):
        sys.exit("nvrtcCompileProgram failed with %s" % b" ".join(opts).decode())
    dt, cpu = (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3
    cubin = any(o.startswith(b"--gpu-architecture=sm_") for o in opts)
    n = ctypes.c_size_t()
    (lib.nvrtcGetCUBINSize if cubin else lib.nvrtcGetPTXSize)(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    (lib.nvrtcGetCUBIN if cubin else lib.nvrtcGetPTX)(prog, buf)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return dt, cpu, buf.raw


def compare(lib, src, num, a):
    extra = [o.encode() for o in a.opt]
    for arch in ("compute_" + num, "sm_" + num):
        base = [("--gpu-architecture=" + arch).encode(), b"--std=c++17", b"-default-device", b"--no-cache",
                b"--diag-suppress=177"]
        t = {False: [], True: []}
        cpu = {False: [], True: []}
        same = True
        for i in range(a.n):
            for with_opt in ((False, True) if i % 2 == 0 else (True, False)):
                dt, c, code = compile_code(lib, src, base + (extra if with_opt else []))
                t[with_opt].append(dt)
                cpu[with_opt].append(c)
                if i == 0 and with_opt:
                    same = code == compile_code(lib, src, base)[2]
        print("  %-12s without: min %.0f median %.0f ms (CPU median %.0f); with %s: min %.0f median %.0f ms "
              "(CPU median %.0f); output %s" % (
                  arch, min(t[False]), statistics.median(t[False]), statistics.median(cpu[False]), " ".join(a.opt),
                  min(t[True]), statistics.median(t[True]), statistics.median(cpu[True]),
                  "identical" if same else "DIFFERENT"))


def trace_summary(path):
    """The top-level events of a Chrome trace and the PHASES: the sum of
    their durations (ms) by name (a phase is shown as "  name")."""
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    xs = [e for e in events if e.get("ph") == "X" and "dur" in e]
    by_tid = defaultdict(list)
    for e in xs:
        by_tid[e.get("tid")].append(e)
    out = defaultdict(float)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        end = -1
        for e in evs:  # an event inside the one before is not top level
            if e["ts"] >= end:
                out[e["name"]] += e["dur"] / 1e3
                end = e["ts"] + e["dur"]
            elif e["name"] in PHASES:
                out["  " + e["name"]] += e["dur"] / 1e3
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("program")
    ap.add_argument("--target", default="sm_90a")
    ap.add_argument("--tlc", default="build/bin/tlc")
    ap.add_argument("--nvrtc", default="/usr/local/cuda/lib64/libnvrtc.so")
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("-D", action="append", default=[])
    ap.add_argument("--opt", action="append", default=[], help="one more NVRTC option (e.g. --Ofast-compile=min)")
    ap.add_argument("--compare", action="store_true",
                    help="no trace: time N interleaved compiles without and with the --opt options, "
                         "and check that they give the same PTX or cubin")
    a = ap.parse_args()
    defs = sum((["-D", d] for d in a.D), [])
    src = subprocess.run([a.tlc, "compile", a.program, "--target", a.target, "--emit", "cuda"] + defs,
                         check=True, capture_output=True).stdout
    lib = ctypes.CDLL(a.nvrtc)
    num = a.target.split("_", 1)[1]
    tmp = tempfile.mkdtemp()
    nvrtc_compile(lib, b"__global__ void w() {}", [b"--gpu-architecture=compute_" + num.encode(), b"--no-cache"])  # load, warm
    print("%s for %s: %d bytes of CUDA C" % (a.program, a.target, len(src)))
    if a.compare:
        return compare(lib, src, num, a)
    for arch in ("compute_" + num, "sm_" + num):
        rows = []
        for i in range(a.n):
            tr = os.path.join(tmp, "%s-%d" % (arch, i))  # NVRTC adds ".json"
            opts = [("--gpu-architecture=" + arch).encode(), b"--std=c++17", b"-default-device", b"--no-cache",
                    b"--diag-suppress=177", ("--fdevice-time-trace=" + tr).encode()] + [o.encode() for o in a.opt]
            wall = nvrtc_compile(lib, src, opts)
            s = trace_summary(tr + ".json")
            rows.append((wall, s))
            print("  %-12s run %d: nvrtcCompileProgram %.0f ms; %s" % (
                arch, i, wall, ", ".join("%s %.0f ms" % (k, v) for k, v in sorted(s.items(), key=lambda kv: -kv[1])[:12])))
        names = set().union(*(r[1].keys() for r in rows))
        med = {k: statistics.median(r[1].get(k, 0.0) for r in rows) for k in names}
        print("  %-12s median: nvrtcCompileProgram %.0f ms; %s" % (
            arch, statistics.median(r[0] for r in rows),
            ", ".join("%s %.0f ms" % (k, v) for k, v in sorted(med.items(), key=lambda kv: -kv[1])[:12])))


if __name__ == "__main__":
    main()
