#!/usr/bin/env python3
"""bench/compile_compare.py - what a change of the code generator does to
the compile and to the code, without a GPU: two builds of tlc (or one build
under two option sets) side by side on the same programs.

    python3 bench/compile_compare.py --base OLD/tlc [--tlc build/bin/tlc] [--target sm_90a] [-n 5]
                                     [--opt NVRTC_OPTION]... [--base-opt NVRTC_OPTION]... [PROGRAM.json...]

For each program (default: examples/*.json): the CUDA C of `tlc compile
--emit cuda` from each build, compiled in this process through NVRTC
(ctypes; the options compiler/nvrtc.c uses, plus --opt for the new side and
--base-opt for the base side) N times each, interleaved, to PTX
(compute_XX: the front end and NVVM) and to a cubin (sm_XX: and ptxas).
Prints, for base and new: the CPU milliseconds of each (medians; NVRTC
compiles on the calling thread, so CPU time is the steady figure on a
shared machine), the PTX's size, ptxas's registers, spill bytes and stack
frame (local arrays: a fragment that left the registers), the
SASS instruction count (the kernel's .text sections, 16 bytes an
instruction) and whether the two builds' SASS is identical (the .text
bytes: identical SASS runs identically, a different one needs the GPU).
"""
import argparse, ctypes, glob, hashlib, os, re, statistics, struct, subprocess, sys, time


def nvrtc(lib, src, opts):
    """(CPU ms, PTX or cubin bytes, log) of one compile."""
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None):
        sys.exit("nvrtcCreateProgram failed")
    arr = (ctypes.c_char_p * len(opts))(*opts)
    c0 = time.process_time()
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    cpu = (time.process_time() - c0) * 1e3
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    if rc:
        sys.exit("nvrtcCompileProgram failed (%d):\n%s" % (rc, log.value.decode(errors="replace")[:2000]))
    cubin = any(o.startswith(b"--gpu-architecture=sm_") for o in opts)
    (lib.nvrtcGetCUBINSize if cubin else lib.nvrtcGetPTXSize)(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    (lib.nvrtcGetCUBIN if cubin else lib.nvrtcGetPTX)(prog, buf)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return cpu, buf.raw, log.value.decode(errors="replace")


def sass_text(elf):
    """The bytes of a cubin's .text.* sections (its kernels' SASS)."""
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3a)
    secs = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    strtab = secs[shstrndx][4]
    out = b""
    for sec in secs:
        name = elf[strtab + sec[0]:elf.index(b"\0", strtab + sec[0])]
        if name.startswith(b".text."):
            out += elf[sec[4]:sec[4] + sec[5]]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("programs", nargs="*")
    ap.add_argument("--base", required=True, help="the tlc to compare with (or the same one, with --opt)")
    ap.add_argument("--tlc", default="build/bin/tlc")
    ap.add_argument("--target", default="sm_90a")
    ap.add_argument("--nvrtc", default="/usr/local/cuda/lib64/libnvrtc.so")
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--opt", action="append", default=[], help="one more NVRTC option for the new side")
    ap.add_argument("--base-opt", action="append", default=[], help="one more NVRTC option for the base side")
    a = ap.parse_args()
    progs = a.programs or sorted(glob.glob("examples/*.json"))
    lib = ctypes.CDLL(a.nvrtc)
    num = a.target.split("_", 1)[1]
    common = [b"--std=c++17", b"-default-device", b"--no-cache", b"--diag-suppress=177"]
    nvrtc(lib, b"__global__ void w() {}", [b"--gpu-architecture=compute_" + num.encode(), b"--no-cache"])  # load
    print("target %s, %d interleaved compiles of each side; base %s %s, new %s %s; CPU ms medians" % (
        a.target, a.n, a.base, " ".join(a.base_opt), a.tlc, " ".join(a.opt)))
    print("%-28s %-4s %8s %8s %8s %5s %7s %6s %6s  %s" % ("program", "side", "PTX CPU", "cubin CPU", "PTX B", "regs",
                                                         "spills", "stack", "SASS", "SASS vs base"))
    tot = {"base": [0.0, 0.0], "new": [0.0, 0.0]}
    for prog in progs:
        sides = {}
        for side, tlc, extra in (("base", a.base, a.base_opt), ("new", a.tlc, a.opt)):
            r = subprocess.run([tlc, "compile", prog, "--target", a.target, "--emit", "cuda"], capture_output=True)
            if r.returncode:
                print("%-28s %-4s does not compile: %s" % (os.path.basename(prog), side,
                                                          r.stderr.decode(errors="replace").strip()[:200]))
                break
            sides[side] = (r.stdout, [o.encode() for o in extra])
        if len(sides) < 2:
            continue
        cpu = {s: ([], []) for s in sides}
        out = {}
        for i in range(a.n):
            for side in (("base", "new") if i % 2 == 0 else ("new", "base")):
                src, extra = sides[side]
                c, ptx, _ = nvrtc(lib, src, [b"--gpu-architecture=compute_" + num.encode()] + common + extra)
                cpu[side][0].append(c)
                c, cub, log = nvrtc(lib, src, [b"--gpu-architecture=sm_" + num.encode(), b"--ptxas-options=--verbose"]
                                    + common + extra)
                cpu[side][1].append(c)
                out[side] = (ptx.rstrip(b"\0"), cub, log)
        text = {s: sass_text(out[s][1]) for s in out}
        for side in ("base", "new"):
            ptx, cub, log = out[side]
            regs = ",".join(re.findall(r"Used (\d+) registers", log))
            spills = ",".join(re.findall(r"(\d+) bytes spill stores", log))
            stack = ",".join(re.findall(r"(\d+) bytes stack frame", log))
            same = ("identical" if text["new"] == text["base"] else "differs (%s)" %
                    hashlib.sha1(text[side]).hexdigest()[:8]) if side == "new" else ""
            pc, cc = statistics.median(cpu[side][0]), statistics.median(cpu[side][1])
            tot[side][0] += pc
            tot[side][1] += cc
            print("%-28s %-4s %8.1f %8.1f %8d %5s %7s %6s %6d  %s" % (os.path.basename(prog)[:-5], side, pc, cc,
                                                                     len(ptx), regs, spills, stack, len(text[side]) // 16,
                                                                     same), flush=True)
    print("%-28s %-4s %8.1f %8.1f" % ("(sum)", "base", *tot["base"]))
    print("%-28s %-4s %8.1f %8.1f" % ("(sum)", "new", *tot["new"]))


if __name__ == "__main__":
    main()
