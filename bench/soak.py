#!/usr/bin/env python3
"""bench/soak.py - a soak test of tlserverd: mixed traffic with faults for a
fixed time against a real server, sampling the daemon's memory, descriptors
and threads over time, and failing when they grow.

Usage: bench/soak.py [--minutes M] [--server PATH] [--target T] [--sample S]
                     [--round S] [--json FILE] [--disk-size SIZE]
                     [--fault-hold S] [--no-disk-fault] [--no-redis-fault]

It starts TLSERVERD (default build/bin/tlserverd) on a free loopback port
with its cache in a temporary folder, small limits (--workers 2,
--compile-timeout 4, --max-body 1M, --max-body-total 8M, --header-timeout 2,
--body-timeout 3, --memory-cache 4M: a bound on the in-memory artifact
cache, which this traffic fills by about 160 KiB a minute;
--max-compiles-per-client 0: every client here is one address)
and its test hooks on, and runs these clients at once,
each in its own thread, for M minutes (default 20):

  compile   cold compiles: tilus_add_one.json under a new name each time
            (a new build key), for TARGET (default sm_80); each artifact
            is fetched and re-hashed against its id
  hits      compiles of the names already built (cache hits), GETs of
            their artifacts (whole, Range, If-None-Match), kernels,
            /v1/info, /metrics, /readyz and, where the server has it,
            /status and a build's status page
  bad       invalid programs (422), malformed JSON (400), a Content-Length
            over --max-body (413), a chunked body over --max-body (413),
            ambiguous framing (400)
  slow      connections that trickle their headers or body (cut at the
            header and body deadlines), half-closed requests
  churn     short connections: one /healthz each, then close
  faults    every 15 s the next of: kill -9 of a compile worker (the
            server starts another), a compile whose worker aborts (test
            hook TL_TEST_CRASH_ON), a compile that hangs past
            --compile-timeout (TL_TEST_HANG_ON), a full disk, the Redis
            tier stopped (see below)

The full disk: the database's folder is a tmpfs of --disk-size (default
256m) in a mount namespace of the server's own (unshare -m, as
tests/sh/server_ready.sh does); the fault fills it to the last byte
through /proc/PID/root, holds it full for --fault-hold seconds (default
8) and empties it.  Meanwhile a cold compile must get 500 (io_error: the
build compiled but could not be stored) or 200, /readyz 503 or 200, and
every other request its usual answer (cache hits are reads).  A cold
compile that got 500 is sent again once the disk has room: it must get 200.
The Redis tier: a redis-server on a free port (no persistence) is the
server's --tier; the fault stops it (SIGTERM) for --fault-hold seconds and
starts it again, empty, on the same port.  Meanwhile every request must
get its usual answer: the server degrades to its local cache and compiles
locally.  Without unshare (or a mount namespace) or redis-server, that
fault is left out and the run says so.  An answer allowed only because a
fault was on is counted under "KIND@FAULT STATUS" (errors by kind); a
request overlaps a fault from the fault's start until 3 s after its end
(the readiness probe runs once a second).

Time is cut into rounds (default 60 s): the clients run for the round, then
stop and every connection is closed for a few seconds, and a quiet sample is
taken (RSS, descriptors, threads of the daemon, its live workers).  Samples
under load are taken every S seconds (default 10) too.  The verdict compares
the quiet samples after the warm-up (the first quarter of the run, at least
two rounds) with the last ones: the run FAILS when the daemon's RSS grew by
more than 10% + 16 MiB, its descriptors by more than 4, its threads by more
than 2, or when a worker was not replaced; and when any client saw an
answer it should not have (every status is checked against what its request
must get; a faulted compile must get 500 or 504 and its retry 200), or an
artifact whose bytes do not hash to its id.

Prints one line per sample and a summary (requests and errors by kind, the
samples' first and last values, and the Redis tier's errors and publishes
from /metrics); --json FILE writes everything as JSON.
Exit 0 pass, 1 fail, 77 when the server offers no NVIDIA target (no NVRTC).
"""
import argparse
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "attacks"))
import tlprocs  # noqa: E402
PROGRAM = json.load(open(os.path.join(ROOT, "examples", "tilus_add_one.json")))

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--minutes", type=float, default=20.0)
ap.add_argument("--server", default=os.path.join(ROOT, "build", "bin", "tlserverd"))
ap.add_argument("--target", default="sm_80")
ap.add_argument("--sample", type=float, default=10.0)
ap.add_argument("--round", type=float, default=60.0)
ap.add_argument("--json", default=None)
ap.add_argument("--disk-size", default="256m")
ap.add_argument("--fault-hold", type=float, default=8.0)
ap.add_argument("--no-disk-fault", action="store_true")
ap.add_argument("--no-redis-fault", action="store_true")
args = ap.parse_args()

PORT = 0
lock = threading.Lock()
counts = Counter()      # "kind status" -> n
unexpected = Counter()  # "kind: what" -> n
examples_bad = {}       # one example answer per unexpected kind
built = []              # (name, key, artifact) built so far
stop_round = threading.Event()
stop_all = threading.Event()
here = threading.local()  # here.t0: when this thread's last request started
windows = []              # the faults held so far: [kind, start, end or None while on]
FAULT_MARGIN = 3.0
# what a request may get besides its usual answer while a fault is on
DURING = {"disk-full": {"compile": (500,), "/readyz": (503,)}, "redis-down": {}}


def fault_on(t0, t1):
    """The kinds of the faults that overlap the time from t0 to t1."""
    with lock:
        return [k for k, a, b in windows if a <= t1 and (b is None or b + FAULT_MARGIN >= t0)]


def count(kind, status):
    with lock:
        counts["%s %s" % (kind, status)] += 1


def wrong(kind, what, detail=""):
    with lock:
        unexpected["%s: %s" % (kind, what)] += 1
        examples_bad.setdefault("%s: %s" % (kind, what), detail[:300])


def request(method, path, body=None, headers=None, timeout=30.0):
    """One request on its own connection: (status, headers, body) or
    (0, {}, error text) when the connection failed."""
    here.t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    try:
        h = {"Connection": "close"}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    except (OSError, http.client.HTTPException) as e:
        return 0, {}, repr(e).encode()
    finally:
        c.close()


def compile_req(name, program=None, target=None):
    prog = dict(program or PROGRAM, name=name)
    body = json.dumps({"program": prog, "targets": [target or args.target]})
    return request("POST", "/v1/compile", body, {"Content-Type": "application/json"}, 60.0)


def expect(kind, got, want, detail=b""):
    if got not in want:
        for f in fault_on(getattr(here, "t0", 0), time.time()):
            if got in DURING[f].get(kind, ()):
                count("%s@%s" % (kind, f), got)
                return False
    count(kind, got)
    if got not in want:
        wrong(kind, "status %s, expected %s" % (got, "/".join(map(str, want))),
              detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail))
        return False
    return True


def fetch_and_check(kind, artifact):
    st, _, data = request("GET", "/v1/artifacts/" + artifact)
    if expect(kind + "-artifact", st, (200,), data) and hashlib.sha256(data).hexdigest() != artifact:
        wrong(kind + "-artifact", "bytes do not hash to the artifact id")


def sleep_round(s):
    stop_round.wait(s)


# ---- the clients ---------------------------------------------------------------------

def client_compile():
    n = 0
    while not stop_round.is_set():
        n += 1
        name = "soak_%d_%d" % (os.getpid(), int(time.time() * 1000) % 10**9 * 100 + n % 100)
        st, _, data = compile_req(name)
        if st == 500 and "disk-full" in fault_on(here.t0, time.time()):
            expect("compile", st, (200,), data)  # counted under compile@disk-full
            while fault_on(time.time(), time.time()) and not stop_round.is_set():
                time.sleep(0.5)  # again once the disk has room
            st, _, data = compile_req(name)
        elif st == 500 or st == 504:  # a worker killed under it by the faults client
            count("compile-faulted", st)
            st, _, data = compile_req(name)
        if expect("compile", st, (200,), data):
            res = json.loads(data)["results"][0]
            fetch_and_check("compile", res["artifact"])
            with lock:
                built.append((name, res["key"], res["artifact"]))
        sleep_round(1.0)


def client_hits():
    i = 0
    while not stop_round.is_set():
        with lock:
            b = built[i % len(built)] if built else None
        i += 1
        if not b:
            sleep_round(0.5)
            continue
        name, key, art = b
        st, _, data = compile_req(name)
        if expect("hit", st, (200,), data) and not json.loads(data)["results"][0]["cached"]:
            wrong("hit", "not cached")
        fetch_and_check("hit", art)
        st, h, data = request("GET", "/v1/artifacts/" + art, headers={"Range": "bytes=0-99"})
        expect("range", st, (206,), data)
        st, _, _ = request("GET", "/v1/artifacts/" + art, headers={"If-None-Match": '"%s"' % art})
        expect("not-modified", st, (304,))
        st, _, data = request("GET", "/v1/kernels/" + key)
        expect("kernel", st, (200,), data)
        for path in ("/v1/info", "/metrics", "/readyz"):
            st, _, data = request("GET", path)
            expect(path, st, (200,), data)
        if HAVE_STATUS:
            st, _, data = request("GET", "/status")
            expect("/status", st, (200,), data)
            st, _, data = request("GET", "/status/builds/" + key)
            expect("/status/builds", st, (200,), data)
        sleep_round(0.2)


def raw(data, timeout=5.0):
    """Sends bytes on a new connection; returns the status of the first answer (0: none)."""
    here.t0 = time.time()
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while b"\r\n" not in out:
            c = s.recv(4096)
            if not c:
                break
            out += c
        return int(out[9:12]) if out[9:12].isdigit() else 0
    except OSError:
        return 0
    finally:
        s.close()


def client_bad():
    big = 2 << 20
    while not stop_round.is_set():
        bad = dict(PROGRAM, name="soak_bad")
        bad = dict(bad, kernel=dict(bad["kernel"], threads="nope"))
        st, _, data = request("POST", "/v1/compile", json.dumps({"program": bad, "targets": [args.target]}),
                              {"Content-Type": "application/json"})
        expect("invalid-program", st, (422,), data)
        st, _, data = request("POST", "/v1/compile", b'{"program": {', {"Content-Type": "application/json"})
        expect("malformed-json", st, (400,), data)
        st = raw(b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % big)
        expect("oversized-content-length", st, (413,))
        # a chunked body past --max-body, sent whole
        chunk = b"x" * 65536
        body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(big // len(chunk) + 1))
        st = raw(b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + body + b"0\r\n\r\n", 20.0)
        expect("oversized-chunked", st, (413,))
        st = raw(b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        expect("ambiguous-framing", st, (400,))
        sleep_round(1.0)


def client_slow():
    while not stop_round.is_set():
        socks = []
        for i in range(20):
            try:
                s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
                if i % 3 == 0:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                elif i % 3 == 1:
                    s.sendall(b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: "
                              b"application/json\r\nContent-Length: 1000\r\n\r\n{")
                else:
                    s.sendall(b"GET /hea")
                    s.shutdown(socket.SHUT_WR)
                socks.append(s)
            except OSError as e:
                wrong("slow", "cannot connect", repr(e))
        t0 = time.time()
        while socks and time.time() - t0 < 8 and not stop_round.is_set():
            still = []
            for s in socks:
                s.setblocking(False)
                try:
                    if s.recv(4096) == b"":
                        s.close()
                        continue
                    still.append(s)
                except BlockingIOError:
                    try:
                        s.sendall(b"X-Slow: 1\r\n")
                        still.append(s)
                    except OSError:
                        s.close()
                except OSError:
                    s.close()
            socks = still
            stop_round.wait(0.5)
        if stop_round.is_set():
            for s in socks:
                s.close()
            return
        count("slow-cut-in-time", len(socks) == 0)
        if socks:
            wrong("slow", "%d of 20 slow connections still open after 8 s" % len(socks))
        for s in socks:
            s.close()


def client_churn():
    while not stop_round.is_set():
        st, _, data = request("GET", "/healthz", timeout=5.0)
        expect("/healthz", st, (200,), data)
        sleep_round(0.05)


workers = tlprocs.workers


FAULTS = [0]  # faults injected so far, over every round (each round goes on with the next kind)


def hold_fault(kind, start, stop):
    """Runs start(), keeps the fault on for --fault-hold seconds (or until
    the round ends), runs stop(); the window is recorded for expect()."""
    with lock:
        w = [kind, time.time(), None]
        windows.append(w)
    try:
        start()
        stop_round.wait(args.fault_hold)
    finally:
        stop()
        with lock:
            w[2] = time.time()
    count("fault", kind)


def client_faults(pid):
    kinds = ["kill-9-worker", "crash", "hang"] + [k for k in ("disk-full", "redis-down") if FAULTS_ON[k]]
    while not stop_round.is_set():
        sleep_round(15.0)
        if stop_round.is_set():
            return
        kind = kinds[FAULTS[0] % len(kinds)]
        FAULTS[0] += 1
        if kind == "kill-9-worker":
            w = workers(pid)
            if w:
                os.kill(w[0], signal.SIGKILL)
                count("fault", "kill-9-worker")
        elif kind == "crash":
            st, _, data = compile_req("soak_crash")
            expect("fault-crash", st, (500,), data)
        elif kind == "hang":
            st, _, data = compile_req("soak_hang")
            expect("fault-hang", st, (504,), data)
        elif kind == "disk-full":
            path = tlprocs.tmpfs_path(pid, DB_DIR, "fill")
            filled = [0]

            def start():
                filled[0] = tlprocs.fill(path)

            hold_fault(kind, start, lambda: os.unlink(path))
            with lock:
                DISK_FILLS.append(filled[0])
        else:
            hold_fault(kind, REDIS.stop, REDIS.start)


class Redis:
    """A redis-server on a free loopback port, without persistence."""

    def __init__(self, tmp):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.tmp = tmp
        self.proc = None
        self.starts = 0

    def ping(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as c:
                c.sendall(b"PING\r\n")
                return c.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.tmp, "--logfile", os.path.join(self.tmp, "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.starts += 1
        for _ in range(200):
            if self.ping():
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start on port %d" % self.port)

    def stop(self):
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


FAULTS_ON = {"disk-full": False, "redis-down": False}
DISK_FILLS = []  # bytes written by each fill
DB_DIR = ""
REDIS = None


# ---- the samples ---------------------------------------------------------------------

def proc_sample(pid):
    rss = threads = 0
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    fds = len(os.listdir("/proc/%d/fd" % pid))
    ws = workers(pid)
    wrss = 0
    for w in ws:
        try:
            for line in open("/proc/%d/status" % w):
                if line.startswith("VmRSS:"):
                    wrss += int(line.split()[1])
        except OSError:
            pass
    return {"t": round(time.time() - T0, 1), "rss_kib": rss, "fds": fds, "threads": threads,
            "workers": len(ws), "workers_rss_kib": wrss}


def main():
    global PORT, T0, HAVE_STATUS, DB_DIR, REDIS
    tmp = tempfile.mkdtemp(prefix="tl-soak-")
    port_file = os.path.join(tmp, "port")
    log = open(os.path.join(tmp, "server.log"), "w+")
    env = dict(os.environ, TL_TEST_CRASH_ON="soak_crash", TL_TEST_HANG_ON="soak_hang")
    DB_DIR = os.path.join(tmp, "db")
    os.mkdir(DB_DIR)
    wrap, tier, left_out = [], [], []
    why = "--no-disk-fault" if args.no_disk_fault else tlprocs.tmpfs_unavailable()
    if why:
        left_out.append("full disk (%s)" % why)
    else:
        wrap = tlprocs.tmpfs_wrap(DB_DIR, args.disk_size)
        FAULTS_ON["disk-full"] = True
    why = "--no-redis-fault" if args.no_redis_fault else (
        None if shutil.which("redis-server") else "no redis-server")
    if why:
        left_out.append("Redis tier (%s)" % why)
    else:
        REDIS = Redis(tmp)
        REDIS.start()
        tier = ["--tier", "redis://127.0.0.1:%d" % REDIS.port]
        FAULTS_ON["redis-down"] = True
    cmd = wrap + [args.server, "--listen", "127.0.0.1:0", "--port-file", port_file, "--db",
                  os.path.join(DB_DIR, "cache.db"), "--workers", "2", "--compile-timeout", "4",
                  "--max-body", "1M", "--max-body-total", "8M", "--header-timeout", "2",
                  "--body-timeout", "3", "--memory-cache", "4M", "--log-format", "off",
                  # every client here is 127.0.0.1: no per-address share of the workers
                  "--max-compiles-per-client", "0", "--test-hooks"] + tier
    srv = subprocess.Popen(cmd, stderr=log, env=env)
    for _ in range(1500):
        if os.path.exists(port_file) or srv.poll() is not None:
            break
        time.sleep(0.02)
    if not os.path.exists(port_file):
        log.seek(0)
        sys.exit("soak.py: the server did not start:\n" + log.read())
    PORT = int(open(port_file).read())
    T0 = time.time()
    rc = 0
    try:
        st, _, info = request("GET", "/v1/info")
        if st != 200 or args.target not in json.loads(info).get("targets", []):
            print("soak.py: the server does not offer %s (no NVRTC here?)" % args.target, file=sys.stderr)
            return 77
        HAVE_STATUS = request("GET", "/status")[0] == 200
        print("soak.py: tlserverd pid %d on port %d, %g minutes, rounds of %g s, target %s%s"
              % (srv.pid, PORT, args.minutes, args.round, args.target,
                 "" if HAVE_STATUS else " (no /status on this server)"), flush=True)
        print("soak.py: faults: kill -9 of a worker, worker abort, compile time-out%s%s%s"
              % (", full disk (a %s tmpfs)" % args.disk_size if FAULTS_ON["disk-full"] else "",
                 ", Redis tier down (port %d)" % REDIS.port if FAULTS_ON["redis-down"] else "",
                 "; left out: " + ", ".join(left_out) if left_out else ""), flush=True)
        rc = run(srv)
    finally:
        srv.terminate()
        try:
            srv.wait(30)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
        log.seek(0)
        tail = log.read()[-2000:]
        if rc == 1:
            print("server log (tail):\n" + tail)
        if REDIS:
            REDIS.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return rc


def run(srv):
    pid = srv.pid
    end = T0 + args.minutes * 60
    load, quiet = [], []
    base = proc_sample(pid)
    print("start: %s" % json.dumps(base), flush=True)
    while time.time() < end and srv.poll() is None:
        stop_round.clear()
        ts = [threading.Thread(target=f, daemon=True) for f in
              (client_compile, client_hits, client_bad, client_slow, client_churn)]
        ts.append(threading.Thread(target=client_faults, args=(pid,), daemon=True))
        for t in ts:
            t.start()
        r_end = min(end, time.time() + args.round)
        while time.time() < r_end and srv.poll() is None:
            time.sleep(min(args.sample, max(0.0, r_end - time.time())))
            s = proc_sample(pid)
            load.append(s)
            print("load  t=%6.0fs rss=%7d KiB fds=%4d threads=%3d workers=%d (%d KiB)"
                  % (s["t"], s["rss_kib"], s["fds"], s["threads"], s["workers"], s["workers_rss_kib"]),
                  flush=True)
        stop_round.set()
        for t in ts:
            t.join(90)
        time.sleep(4)  # the server closes what the clients left
        s = proc_sample(pid)
        st, _, text = request("GET", "/metrics")
        for line in text.decode("utf-8", "replace").splitlines() if st == 200 else []:
            for name in ("tlserverd_memory_cache_bytes", "tlserverd_cache_builds",
                         "tlserverd_tier_errors_total", "tlserverd_tier_publishes_total"):
                if line.startswith(name + " "):
                    s[name[10:]] = int(float(line.split()[1]))
        quiet.append(s)
        with lock:
            nreq, nbad = sum(counts.values()), sum(unexpected.values())
        print("quiet t=%6.0fs rss=%7d KiB fds=%4d threads=%3d workers=%d  memory cache %d KiB, "
              "builds %d; requests=%d unexpected=%d"
              % (s["t"], s["rss_kib"], s["fds"], s["threads"], s["workers"],
                 s.get("memory_cache_bytes", -1024) // 1024, s.get("cache_builds", -1), nreq, nbad),
              flush=True)
    return verdict(srv, base, load, quiet)


def verdict(srv, base, load, quiet):
    fails = []
    if srv.poll() is not None:
        fails.append("the server exited (status %s)" % srv.returncode)
    warm = max(2, len(quiet) // 4)
    if len(quiet) < warm + 2:
        fails.append("too short a run to judge growth: %d rounds (at least %d)" % (len(quiet), warm + 2))
    else:
        ref, last = quiet[warm:warm + 2], quiet[-2:]
        r0 = statistics.median(x["rss_kib"] for x in ref)
        r1 = statistics.median(x["rss_kib"] for x in last)
        if r1 > r0 * 1.10 + 16 * 1024:
            fails.append("RSS grew from %d to %d KiB (more than 10%% + 16 MiB)" % (r0, r1))
        f0, f1 = max(x["fds"] for x in ref), max(x["fds"] for x in last)
        if f1 > f0 + 4:
            fails.append("descriptors grew from %d to %d" % (f0, f1))
        t0, t1 = max(x["threads"] for x in ref), max(x["threads"] for x in last)
        if t1 > t0 + 2:
            fails.append("threads grew from %d to %d" % (t0, t1))
    if any(q["workers"] < 2 for q in quiet[1:]):
        fails.append("a killed worker was not replaced (workers in quiet samples: %s)"
                     % [q["workers"] for q in quiet])
    if unexpected:
        fails.append("%d unexpected answers" % sum(unexpected.values()))
    for kind in ("compile 200", "hit 200", "fault kill-9-worker", "fault-crash 500",
                 "fault-hang 504", "oversized-chunked 413", "slow-cut-in-time True") + tuple(
                     "fault " + k for k in FAULTS_ON if FAULTS_ON[k]):
        if counts[kind] == 0:
            fails.append("no '%s' happened: the mix did not run" % kind)

    print("\nrequests and outcomes (kind status: count):")
    for k in sorted(counts):
        print("  %-40s %d" % (k, counts[k]))
    if unexpected:
        print("unexpected:")
        for k in sorted(unexpected):
            print("  %-60s %d  e.g. %s" % (k, unexpected[k], examples_bad.get(k, "")))
    print("\nquiet samples (after each round): t rss_kib fds threads workers memory_cache_kib builds")
    for q in quiet:
        print("  %6.0f %7d %4d %3d %d %7d %6d" % (q["t"], q["rss_kib"], q["fds"], q["threads"], q["workers"],
                                                q.get("memory_cache_bytes", -1024) // 1024,
                                                q.get("cache_builds", -1)))
    peak = max(load, key=lambda x: x["rss_kib"]) if load else base
    print("under load: peak RSS %d KiB at t=%.0f s, peak fds %d, peak threads %d"
          % (peak["rss_kib"], peak["t"], max((x["fds"] for x in load), default=0),
             max((x["threads"] for x in load), default=0)))
    print("builds compiled: %d; requests: %d; unexpected: %d"
          % (len(built), sum(counts.values()), sum(unexpected.values())))
    for f in FAULTS_ON:
        if FAULTS_ON[f]:
            held = [b - a for k, a, b in windows if k == f and b is not None]
            print("fault %s: %d times, held %.1f s in all; answers it allowed: %s"
                  % (f, len(held), sum(held), ", ".join("%s %d" % (k, counts[k]) for k in sorted(counts)
                                                         if "@" + f in k) or "none"))
    if DISK_FILLS:
        print("full disk: %d fills of %.0f MiB on average" % (len(DISK_FILLS),
                                                              statistics.mean(DISK_FILLS) / 2**20))
    if REDIS and quiet:
        print("Redis tier: started %d times; at the last quiet sample %d errors, %d publishes (/metrics)"
              % (REDIS.starts, quiet[-1].get("tier_errors_total", -1),
                 quiet[-1].get("tier_publishes_total", -1)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"minutes": args.minutes, "target": args.target, "start": base, "load": load,
                       "faults": [list(w) for w in windows], "disk_fills": DISK_FILLS,
                       "quiet": quiet, "counts": dict(counts), "unexpected": dict(unexpected),
                       "examples": examples_bad, "fails": fails}, f, indent=1)
    print("\n" + ("PASS" if not fails else "FAIL: " + "; ".join(fails)))
    return 1 if fails else 0


T0 = time.time()
HAVE_STATUS = False
if __name__ == "__main__":
    sys.exit(main())
