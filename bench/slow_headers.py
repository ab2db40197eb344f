#!/usr/bin/env python3
"""bench/slow_headers.py - the slow-header attack of issue 16, measured:
N connections (default 1,100) each sending a request line and then one
header line every 10 s, re-opened as soon as the server closes them, while
a normal client asks GET /healthz every 0.1 s from another address; prints
the /healthz latencies before and during the attack and how many attack
connections the server held.  With --body, the slow-body attack instead:
each connection sends a whole head (POST /v1/compile, Content-Length:
1000) and then one byte of the body every 10 s.

Usage: bench/slow_headers.py [--server PATH] [--connections N] [--seconds S]
                             [--addresses K] [--body] [-- TLSERVERD_FLAG...]

The server (default build/bin/tlserverd) runs with its default limits
(--max-connections 1024, --max-connections-per-ip 64, --header-timeout 10)
plus the flags after --.  The attack comes from K loopback addresses
(127.0.1.1 ...; default 1, as in the issue; with K = 20 the per-address
limit no longer stops it and only --max-connections and the header
deadline do); the normal client from 127.0.0.2.  A /healthz that gets no
answer within 5 s counts as failed.
"""
import argparse
import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "attacks"))
import tlprocs  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--server", default=os.path.join(ROOT, "build", "bin", "tlserverd"))
ap.add_argument("--connections", type=int, default=1100)
ap.add_argument("--seconds", type=float, default=60)
ap.add_argument("--addresses", type=int, default=1)
ap.add_argument("--body", action="store_true")
ap.add_argument("flags", nargs="*")
args = ap.parse_args()


def healthz(port):
    t0 = time.time()
    try:
        out = tlprocs.http_get(port, "/healthz", "127.0.0.2")
        return (time.time() - t0) if out.startswith(b"HTTP/1.1 200") else None
    except OSError:
        return None


def probe(port, seconds, out):
    end = time.time() + seconds
    while time.time() < end:
        out.append(healthz(port))
        time.sleep(0.1)


def summary(name, lat):
    ok = sorted(x for x in lat if x is not None)
    failed = len(lat) - len(ok)
    if not ok:
        return "%s: %d requests, all failed" % (name, len(lat))
    q = lambda p: ok[min(len(ok) - 1, int(p * len(ok)))] * 1000
    return ("%s: %d requests, %d failed; latency ms p50 %.1f, p99 %.1f, max %.1f"
            % (name, len(lat), failed, q(0.5), q(0.99), ok[-1] * 1000))


def attack(port, n, seconds, stats):
    sel = selectors.DefaultSelector()
    socks = {}  # sock -> (next send time, connected)
    addrs = ["127.0.1.%d" % (1 + i) for i in range(args.addresses)]
    k = 0

    def open_one():
        nonlocal k
        s = socket.socket()
        s.setblocking(False)
        s.bind((addrs[k % len(addrs)], 0))
        k += 1
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            stats["connect_errors"] += 1
            return
        socks[s] = [time.time(), False]
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
        stats["opened"] += 1

    def drop(s):
        sel.unregister(s)
        s.close()
        del socks[s]
        stats["closed_by_server"] += 1

    end = time.time() + seconds
    next_sample = time.time()
    while time.time() < end:
        for _ in range(min(100, n - len(socks))):  # at most 100 new connections per turn (~0.2 s)
            open_one()
        for key, ev in sel.select(timeout=0.2):
            s = key.fileobj
            if s not in socks:
                continue
            if ev & selectors.EVENT_READ:
                try:
                    if not s.recv(4096):
                        drop(s)
                        continue
                except OSError:
                    drop(s)
                    continue
            if ev & selectors.EVENT_WRITE and not socks[s][1]:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    drop(s)
                    continue
                socks[s][1] = True
                sel.modify(s, selectors.EVENT_READ)
                try:
                    s.send(FIRST)
                except OSError:
                    drop(s)
                    continue
                socks[s][0] = time.time() + 10
        now = time.time()
        for s, st in list(socks.items()):
            if st[1] and now >= st[0]:
                try:
                    s.send(NEXT)
                    st[0] = now + 10
                except OSError:
                    drop(s)
        if now >= next_sample:
            stats["held"].append(sum(1 for st in socks.values() if st[1]))
            next_sample = now + 1
    for s in list(socks):
        s.close()


if args.body:
    FIRST = (b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             b"Content-Length: 1000\r\n\r\n{")
    NEXT = b" "
else:
    FIRST = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    NEXT = b"X-Slow: 1\r\n"


def main():
    tmp = tempfile.mkdtemp(prefix="tl-slow-")
    port_file = os.path.join(tmp, "port")
    srv = subprocess.Popen([args.server, "--listen", "127.0.0.1:0", "--port-file", port_file, "--db",
                            os.path.join(tmp, "cache.db"), "--workers", "1", "--log-format", "off"]
                           + args.flags, stderr=open(os.path.join(tmp, "server.log"), "w"))
    for _ in range(1500):
        if os.path.exists(port_file):
            break
        time.sleep(0.02)
    port = int(open(port_file).read())
    try:
        before = []
        probe(port, 10, before)
        stats = {"opened": 0, "closed_by_server": 0, "connect_errors": 0, "held": []}
        during = []
        t = threading.Thread(target=attack, args=(port, args.connections, args.seconds, stats))
        t.start()
        time.sleep(2)
        probe(port, args.seconds - 4, during)
        t.join()
        fds = len(os.listdir("/proc/%d/fd" % srv.pid))
        after = []
        probe(port, 5, after)
        print("tlserverd %s; attack: %d connections from %d address(es), %s every 10 s, "
              "re-opened when closed, for %g s" % (" ".join(args.flags) or "(default limits)",
                                                    args.connections, args.addresses,
                                                    "a byte of the body" if args.body else "a header line",
                                                    args.seconds))
        held = stats["held"]
        print("attack connections the server kept open (sampled each second): median %d, max %d; "
              "opened %d, closed by the server %d, connect errors %d"
              % (statistics.median(held) if held else 0, max(held) if held else 0, stats["opened"],
                 stats["closed_by_server"], stats["connect_errors"]))
        print(summary("/healthz before", before))
        print(summary("/healthz during", during))
        print(summary("/healthz after", after))
        print("server descriptors right after the attack: %d" % fds)
        return 0 if all(x is not None for x in during + after) else 1
    finally:
        srv.terminate()
        srv.wait(30)


if __name__ == "__main__":
    sys.exit(main())
