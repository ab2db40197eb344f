#!/usr/bin/env python3
"""bench/compile_bench.py - compile latency: ours against Triton's first call,
side by side in one run on one machine.

    python3 bench/compile_bench.py OUTDIR [--tlc build/bin/tlc] [--tlserverd build/bin/tlserverd]
                                   [--target sm_90a] [-n N] [--python PY] [--no-triton]
                                   [--multi-targets T,T,...] [--only-multi] [--backends-only]

Measures, for examples/gemm.json, examples/flash_attention.json and
examples/tilus_add_one.json (the targets of bench/compile.md):

  (a) `tlc compile PROGRAM --target T` as a fresh process: wall time, median
      of N runs (process start, NVRTC load, front end, NVRTC, ptxas), and
      the process's CPU time (user + system, from wait4), the steadier
      figure on a machine shared with other work;
  (b0) the first and the second compile of examples/tilus_add_one.json in a
      fresh worker (N fresh servers): the compile_ms the server returns for
      each, so that what the first request pays for the toolchain's start shows;
  (b) a cold compile in a warm tlserverd worker: tlserverd is started with an
      empty --db on a free loopback port and one worker, warmed with one
      compile of an unrelated program (examples/gemm_nt.json), then each
      example is POSTed to /v1/compile N times, each time with a fresh
      constant `bench_nonce` added to the program (the code generated is the
      same, the build key is new: a cache miss).  Reported: the compile_ms the
      server returns (the worker's tl_compile) and the wall time of the POST;
      medians of N.  Every answer's metadata must hold ptxas's spill figures
      (a compile that skipped ptxas, as NVRTC's own cache did, has none: the
      run stops saying so);
  (b64) the same with --worker-memory 64G instead of the default 4 GiB
      address-space limit (bench/compile.md: the limit used to slow the
      worker 2-3x through NVRTC's cache starting the CUDA driver; with that
      cache off, (b) and (b64) should agree);
  (m) one request for several targets (--multi-targets, default sm_90a,
      sm_80, sm_89): examples/gemm.json with a fresh nonce POSTed N times
      to a server with one worker and to one with a worker per target
      (each warmed by one such request of examples/gemm_nt.json): the wall
      time of the POST, medians of N, and each target's compile_ms; the
      targets are one pool job each, so with enough workers (and cores)
      they compile at once;
  (c) Triton's first-call compile of a matmul (gpu_bench.py's triton_matmul:
      the standard tutorial kernel, float16, 128x256x64 tiles, 8 warps, 3
      stages): each measurement is a fresh Python process with a fresh
      TRITON_CACHE_DIR, torch and the CUDA context initialised first; the
      time of the first call (compile, load, launch) minus that of a warm
      call.  Two numbers:
      `cold` (the matmul is the process's first Triton kernel, so Triton's
      own driver helpers are built in that call too) and `warm` (an
      unrelated Triton kernel ran first, so the matmul's call pays only its
      own compile); medians of N.  Needs torch and triton: --python names the
      interpreter that has them (default: /opt/torch/.venv/bin/python when it
      exists, else this one); --no-triton skips (c).

  (p) the direct PTX back end against the CUDA one (compiler/emit_ptx.c,
      nvJitLink; issue 10), for the programs of its subset (PTX_PROGRAMS:
      tilus_add_one, the element-wise test programs, top-k and the int32
      row reductions in a serial loop, and on sm_90a the wgmma gemms:
      examples/gemm.json, bfloat16 with dynamic M, the rasterized one with
      two consumer warpgroups, and flash attention, both with setmaxnreg,
      which ptxas assembles as a process): `tlc compile
      --backend ptx` and `--backend cuda` as fresh processes (wall and CPU
      medians, interleaved), and cold compiles in a warm worker with the
      options {"backend": "ptx"} and {"backend": "cuda"} (compile_ms
      medians; a fresh nonce each).  --backends-only runs this part alone.

Prints a table with the ratios to Triton's first call and writes
OUTDIR/compile-bench.json and OUTDIR/compile-bench.log.
"""
import argparse, json, os, shutil, socket, statistics, subprocess, sys, tempfile, time, urllib.request

EXAMPLES = ["gemm", "flash_attention", "tilus_add_one"]
# (p): programs the PTX back end builds (paths from the repository's root)
PTX_PROGRAMS = ["examples/tilus_add_one.json", "tests/golden/scale_add.json", "tests/gpu/programs/ptx_elementwise.json",
                "tests/gpu/programs/ptx_guard.json", "tests/gpu/programs/topk.json",
                "tests/gpu/programs/serial_int_reduce.json", "examples/gemm.json",
                "tests/gpu/programs/gemm_dyn_m_bf16.json", "bench/programs/gemm_raster.json",
                "examples/flash_attention.json"]
WARM_PROGRAM = "gemm_nt"
# Targets of bench/compile.md: a cold compile in a warm worker at most this
# fraction of Triton's first call; `tlc compile` as a fresh process at most 0.3x.
WORKER_TARGET = {"gemm": 0.10, "flash_attention": 0.15}
FRESH_TARGET = 0.30

LOG = []


def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    LOG.append(s)


def median(xs):
    return statistics.median(xs) if xs else None


def program_with_nonce(root, name, nonce):
    with open(os.path.join(root, name if name.endswith(".json") else os.path.join("examples", name + ".json"))) as f:
        prog = json.load(f)
    prog.setdefault("constants", {})["bench_nonce"] = nonce
    return prog


# ---- (a) tlc compile as a fresh process ------------------------------------------------
def fresh_tlc(tlc, root, name, target, n, tmp, extra=()):
    """Wall and CPU milliseconds of N fresh `tlc compile` processes."""
    times, cpu = [], []
    path = os.path.join(root, name if name.endswith(".json") else os.path.join("examples", name + ".json"))
    for i in range(n):
        out = os.path.join(tmp, "%s.%d.bin" % (os.path.basename(name), i))
        t0 = time.perf_counter()
        p = subprocess.Popen([tlc, "compile", path, "--target", target, "-o", out] + list(extra),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = p.stderr.read()
        p.stderr.close()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        dt = (time.perf_counter() - t0) * 1e3
        if p.returncode != 0:
            raise SystemExit("tlc compile %s failed: %s" % (name, err.decode(errors="replace").strip()))
        times.append(dt)
        cpu.append((ru.ru_utime + ru.ru_stime) * 1e3)
    return times, cpu


# ---- (b) a cold compile in a warm tlserverd worker ---------------------------------------
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body):
    req = urllib.request.Request("http://127.0.0.1:%d/v1/compile" % port, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            doc = json.load(r)
    except urllib.error.HTTPError as e:
        raise SystemExit("POST /v1/compile failed (%d): %s" % (e.code, e.read()[:800].decode(errors="replace")))
    return doc, (time.perf_counter() - t0) * 1e3


def start_server(tlserverd, tmp, worker_memory=None, workers=1):
    """A tlserverd with an empty --db and `workers` workers (with
    --worker-memory worker_memory when given), ready: (process, port, log file)."""
    port = free_port()
    db = tempfile.mkdtemp(prefix="db-", dir=tmp)
    logf = open(os.path.join(tmp, "tlserverd.log"), "w")
    extra = ["--worker-memory", worker_memory] if worker_memory else []
    srv = subprocess.Popen([tlserverd, "--listen", "127.0.0.1:%d" % port, "--db", os.path.join(db, "cache.db"),
                            "--workers", str(workers),
                            # one client measuring: all its targets at once, as before the share
                            "--max-compiles-per-client", "0"] + extra, stdout=logf, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while True:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=2) as r:
                if json.load(r).get("workers_running", 0) >= workers:
                    return srv, port, logf
        except Exception:
            pass
        if srv.poll() is not None or time.time() > deadline:
            stop_server(srv, logf)
            raise SystemExit("tlserverd did not become ready (see %s)" % logf.name)
        time.sleep(0.05)


def stop_server(srv, logf):
    srv.terminate()
    try:
        srv.wait(10)
    except subprocess.TimeoutExpired:
        srv.kill()
    logf.close()


def first_compiles(tlserverd, root, target, n, tmp):
    """(b0) The first and the second compile of examples/tilus_add_one.json in
    a fresh worker (a fresh server each time): the worker's compile_ms of
    each; the difference is what the first request pays for a toolchain
    not yet warm."""
    first, second = [], []
    for i in range(n):
        srv, port, logf = start_server(tlserverd, tmp)
        try:
            for out, nonce in ((first, 2 * i), (second, 2 * i + 1)):
                doc, _ = post(port, {"program": program_with_nonce(root, "tilus_add_one", nonce), "targets": [target]})
                out.append(doc["results"][0]["compile_ms"])
        finally:
            stop_server(srv, logf)
    return first, second


def check_ptxas_ran(name, r0):
    """A cubin's metadata holds ptxas's spill figures; one without them was
    not compiled by ptxas (an answer from NVRTC's own cache)."""
    res = (r0.get("meta") or {}).get("resources") or {}
    if "registers" in res and "spill_store_bytes" not in res:
        raise SystemExit("the compile of %s has no spill figures in its metadata: ptxas did not run "
                         "(NVRTC's own cache answered?)" % name)


def server_compiles(tlserverd, root, target, n, tmp, worker_memory=None, programs=EXAMPLES, options=None):
    srv, port, logf = start_server(tlserverd, tmp, worker_memory)
    res = {}
    extra = {"options": options} if options else {}
    try:
        doc, wall = post(port, {"program": program_with_nonce(root, WARM_PROGRAM, 0), "targets": [target]})
        log("  warm-up: %s %s, server %.1f ms, wall %.1f ms" % (WARM_PROGRAM, target,
                                                              doc["results"][0]["compile_ms"], wall))
        nonce = 1
        for name in programs:
            server_ms, wall_ms = [], []
            for _ in range(n):
                doc, wall = post(port, dict(extra, program=program_with_nonce(root, name, nonce), targets=[target]))
                nonce += 1
                r0 = doc["results"][0]
                if r0.get("cached"):
                    raise SystemExit("a compile of %s was a cache hit; the nonce did not change the key" % name)
                check_ptxas_ran(name, r0)
                server_ms.append(r0["compile_ms"])
                wall_ms.append(wall)
            res[name] = {"server_ms": server_ms, "wall_ms": wall_ms}
    finally:
        stop_server(srv, logf)
    return res


def multi_target(tlserverd, root, targets, n, tmp, workers):
    """(m) The wall time of a POST of examples/gemm.json for several targets
    at once (a fresh nonce each time: every target a miss) to a server with
    `workers` workers, warmed by one such request of another program; and
    the compile_ms of each target.  With as many workers as targets the
    targets compile in parallel (one pool job each, server/api.c)."""
    srv, port, logf = start_server(tlserverd, tmp, workers=workers)
    walls, per_target = [], []
    try:
        post(port, {"program": program_with_nonce(root, WARM_PROGRAM, 0), "targets": targets})
        for i in range(n):
            doc, wall = post(port, {"program": program_with_nonce(root, "gemm", 1000 + i), "targets": targets})
            for r in doc["results"]:
                if r.get("cached") or "compile_ms" not in r:
                    raise SystemExit("a multi-target compile was not a fresh compile: %s" % json.dumps(r)[:300])
            walls.append(wall)
            per_target.append([r["compile_ms"] for r in doc["results"]])
    finally:
        stop_server(srv, logf)
    return walls, per_target


# ---- (c) Triton's first-call compile ----------------------------------------------------
TRITON_CHILD = r'''
import json, sys, time
import torch
import triton
import triton.language as tl

@triton.jit
def add_one(x, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(x + o, tl.load(x + o, mask=o < n) + 1, mask=o < n)

sys.path.insert(0, sys.argv[2])
from gpu_bench import triton_matmul  # the matmul gpu_bench.py times: the same kernel
run = triton_matmul()

a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
c = torch.empty(1024, 1024, device="cuda", dtype=torch.float16)
torch.cuda.synchronize()
if sys.argv[1] == "warm":
    x = torch.zeros(4096, device="cuda")
    add_one[(4,)](x, 4096, B=1024)
    torch.cuda.synchronize()
t0 = time.perf_counter(); run(a, b, c); torch.cuda.synchronize(); first = time.perf_counter() - t0
t0 = time.perf_counter(); run(a, b, c); torch.cuda.synchronize(); again = time.perf_counter() - t0
print(json.dumps({"first_ms": first * 1e3, "warm_call_ms": again * 1e3, "triton": triton.__version__}))
'''


def triton_first_call(py, mode, n, tmp):
    script = os.path.join(tmp, "triton_child.py")
    with open(script, "w") as f:
        f.write(TRITON_CHILD)
    out, version = [], None
    for i in range(n):
        cache = tempfile.mkdtemp(prefix="triton-cache-", dir=tmp)
        env = dict(os.environ, TRITON_CACHE_DIR=cache)
        r = subprocess.run([py, script, mode, os.path.dirname(os.path.abspath(__file__))], capture_output=True,
                           text=True, env=env)
        shutil.rmtree(cache, ignore_errors=True)
        if r.returncode != 0:
            raise SystemExit("the Triton measurement failed:\n" + r.stderr[-2000:])
        d = json.loads(r.stdout.strip().splitlines()[-1])
        version = d["triton"]
        out.append(d["first_ms"] - d["warm_call_ms"])
    return out, version


# ---- the report ----------------------------------------------------------------------
def ratio(x, y):
    return "%.3f" % (x / y) if x is not None and y else "-"


def backends_part(a, root, tmp, res):
    """(p) The PTX back end against the CUDA one: fresh tlc and warm worker."""
    log("(p) the PTX back end (emit_ptx.c + nvJitLink) against the CUDA one (emit_cuda.c + NVRTC), %s" % a.target)
    out = res.setdefault("backends", {})
    for name in PTX_PROGRAMS:
        e = out.setdefault(name, {})
        for i in range(a.n):  # interleaved, one run of each at a time
            for b in ("ptx", "cuda"):
                t, cpu = fresh_tlc(a.tlc, root, name, a.target, 1, tmp, ["--backend", b])
                e.setdefault("fresh_tlc_ms_" + b, []).extend(t)
                e.setdefault("fresh_tlc_cpu_ms_" + b, []).extend(cpu)
    for b in ("ptx", "cuda"):
        srv = server_compiles(a.tlserverd, root, a.target, a.n, tmp, programs=PTX_PROGRAMS, options={"backend": b})
        for name in PTX_PROGRAMS:
            out[name]["server_ms_" + b] = srv[name]["server_ms"]
            out[name]["wall_ms_" + b] = srv[name]["wall_ms"]
    log("%-40s %12s %12s %12s %12s %12s %12s" % ("program (medians, ms)", "fresh ptx", "fresh cuda", "cpu ptx",
                                                "cpu cuda", "worker ptx", "worker cuda"))
    for name in PTX_PROGRAMS:
        e = out[name]
        log("%-40s %12.1f %12.1f %12.1f %12.1f %12.1f %12.1f" % (
            name, median(e["fresh_tlc_ms_ptx"]), median(e["fresh_tlc_ms_cuda"]), median(e["fresh_tlc_cpu_ms_ptx"]),
            median(e["fresh_tlc_cpu_ms_cuda"]), median(e["server_ms_ptx"]), median(e["server_ms_cuda"])))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--tlc", default=os.path.join(root, "build/bin/tlc"))
    ap.add_argument("--tlserverd", default=os.path.join(root, "build/bin/tlserverd"))
    ap.add_argument("--target", default="sm_90a")
    ap.add_argument("-n", type=int, default=5, help="measurements per figure (median taken; default 5)")
    venv = "/opt/torch/.venv/bin/python"
    ap.add_argument("--python", default=venv if os.path.exists(venv) else sys.executable,
                    help="the Python that has torch and triton, for (c)")
    ap.add_argument("--no-triton", action="store_true", help="skip Triton's first-call compile")
    ap.add_argument("--multi-targets", default="sm_90a,sm_80,sm_89",
                    help="the targets of part (m), a request for several at once (comma-separated; '' skips it)")
    ap.add_argument("--only-multi", action="store_true", help="only part (m)")
    ap.add_argument("--backends-only", action="store_true", help="only part (p): the PTX back end against the CUDA one")
    a = ap.parse_args()
    if a.n < 1:
        ap.error("-n must be at least 1")
    for exe in (a.tlc, a.tlserverd):
        if not os.access(exe, os.X_OK):
            raise SystemExit("%s is not an executable; run make" % exe)
    os.makedirs(a.outdir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="compile-bench-")
    try:
        host = socket.gethostname()
        log("compile_bench: %s, %d CPUs, target %s, N=%d, %s" % (host, os.cpu_count(), a.target, a.n,
                                                                   time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                                                 time.gmtime())))
        ver = subprocess.run([a.tlc, "--version"], capture_output=True, text=True).stdout.strip()
        log("tlc: %s" % ver)
        res = {"host": host, "cpus": os.cpu_count(), "target": a.target, "n": a.n, "tlc_version": ver,
               "examples": {}}
        if a.backends_only:
            backends_part(a, root, tmp, res)
            with open(os.path.join(a.outdir, "compile-bench.json"), "w") as f:
                json.dump(res, f, indent=1)
            with open(os.path.join(a.outdir, "compile-bench.log"), "w") as f:
                f.write("\n".join(LOG) + "\n")
            return
        mt = [t for t in a.multi_targets.split(",") if t]
        if mt:
            log("(m) examples/gemm.json for %s in one request: one worker, then %d" % (",".join(mt), len(mt)))
            for w in (1, len(mt)):
                walls, per = multi_target(a.tlserverd, root, mt, a.n, tmp, w)
                res.setdefault("multi_target", {})[str(w)] = {"targets": mt, "wall_ms": walls, "compile_ms": per}
                log("  --workers %d: wall median %7.1f ms  (%s); compile_ms per target, first request: %s" % (
                    w, median(walls), " ".join("%.0f" % x for x in walls), " ".join("%.0f" % x for x in per[0])))
        if a.only_multi:
            with open(os.path.join(a.outdir, "compile-bench.json"), "w") as f:
                json.dump(res, f, indent=1)
            with open(os.path.join(a.outdir, "compile-bench.log"), "w") as f:
                f.write("\n".join(LOG) + "\n")
            return
        log("(a) tlc compile as a fresh process")
        for name in EXAMPLES:
            t, cpu = fresh_tlc(a.tlc, root, name, a.target, a.n, tmp)
            res["examples"].setdefault(name, {})["fresh_tlc_ms"] = t
            res["examples"][name]["fresh_tlc_cpu_ms"] = cpu
            log("  %-16s median %7.1f ms, CPU median %7.1f ms  (%s)" % (name, median(t), median(cpu),
                                                                        " ".join("%.0f" % x for x in t)))
        log("(b0) the first and second compile in a fresh tlserverd worker (tilus_add_one)")
        f1, f2 = first_compiles(a.tlserverd, root, a.target, a.n, tmp)
        res["first_in_worker_ms"], res["second_in_worker_ms"] = f1, f2
        log("  first  median %7.1f ms  (%s)" % (median(f1), " ".join("%.0f" % x for x in f1)))
        log("  second median %7.1f ms  (%s)" % (median(f2), " ".join("%.0f" % x for x in f2)))
        log("(b) cold compiles in a warm tlserverd worker")
        srv = server_compiles(a.tlserverd, root, a.target, a.n, tmp)
        for name in EXAMPLES:
            res["examples"][name].update(srv[name])
            log("  %-16s server median %7.1f ms, wall median %7.1f ms  (server: %s)" % (
                name, median(srv[name]["server_ms"]), median(srv[name]["wall_ms"]),
                " ".join("%.0f" % x for x in srv[name]["server_ms"])))
        log("(b64) the same with --worker-memory 64G")
        srv = server_compiles(a.tlserverd, root, a.target, a.n, tmp, "64G")
        for name in EXAMPLES:
            res["examples"][name]["server_ms_64g"] = srv[name]["server_ms"]
            res["examples"][name]["wall_ms_64g"] = srv[name]["wall_ms"]
            log("  %-16s server median %7.1f ms, wall median %7.1f ms  (server: %s)" % (
                name, median(srv[name]["server_ms"]), median(srv[name]["wall_ms"]),
                " ".join("%.0f" % x for x in srv[name]["server_ms"])))
        backends_part(a, root, tmp, res)
        tri = {}
        if not a.no_triton:
            log("(c) Triton's first-call compile of a matmul (%s)" % a.python)
            for mode in ("cold", "warm"):
                t, version = triton_first_call(a.python, mode, a.n, tmp)
                tri[mode] = t
                res["triton_version"] = version
                log("  %-5s median %7.1f ms  (%s)" % (mode, median(t), " ".join("%.0f" % x for x in t)))
        res["triton_first_call_ms"] = tri
        tc, tw = median(tri.get("cold")), median(tri.get("warm"))
        log("")
        log("medians, ms; ratios to Triton's first call of a matmul (cold = its first kernel in the process,")
        log("warm = after another Triton kernel); targets: worker gemm <= %.2fx, flash <= %.2fx, fresh tlc <= %.2fx"
            % (WORKER_TARGET["gemm"], WORKER_TARGET["flash_attention"], FRESH_TARGET))
        log("%-16s %10s %10s %10s %10s %12s %12s %12s %12s" % ("program", "fresh tlc", "worker", "worker wall",
                                                                "worker 64G", "fresh/cold", "fresh/warm",
                                                                "worker/cold", "worker/warm"))
        for name in EXAMPLES:
            e = res["examples"][name]
            f, w, ww = median(e["fresh_tlc_ms"]), median(e["server_ms"]), median(e["wall_ms"])
            w64 = median(e["server_ms_64g"])
            log("%-16s %10.1f %10.1f %10.1f %10.1f %12s %12s %12s %12s" % (
                name, f, w, ww, w64, ratio(f, tc), ratio(f, tw), ratio(w, tc), ratio(w, tw)))
        if tri:
            log("%-16s cold %.1f ms, warm %.1f ms" % ("triton matmul", tc, tw))
        with open(os.path.join(a.outdir, "compile-bench.json"), "w") as f:
            json.dump(res, f, indent=1)
        with open(os.path.join(a.outdir, "compile-bench.log"), "w") as f:
            f.write("\n".join(LOG) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
