#!/usr/bin/env python3
"""bench/body_budget.py - the body-budget attack at the rate floor, measured:
N connections (default 40, each from its own loopback address, so the
per-address limit does not bind) each announce a body of --min-body-rate x
--body-timeout bytes (3.75 MiB at the server's defaults) and send it at
--factor times the floor (default 1.1: just above it, so the floor alone
never cuts them), opening another as soon as the server closes one; 34 such
bodies hold the default 128 MiB --max-body-total.  Meanwhile a normal client
posts a 1 MiB compile request every 0.5 s from 127.0.0.2 and, like tlclient,
sends it again after the Retry-After of a 503, for 10 s at most.  Prints
what the normal client got (first answers, answers after its retries,
latencies), the budget the bodies held (/metrics), and the connections the
server cut and why.

Usage: bench/body_budget.py [--server PATH] [--connections N] [--seconds S]
                            [--factor F] [-- TLSERVERD_FLAG...]

The server (default build/bin/tlserverd) runs with its default limits
(--max-body 8M, --max-body-total 128M, --min-body-rate 64K, --body-timeout
60) plus the flags after --.
"""
import argparse
import os
import socket
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "attacks"))
import tlprocs  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--server", default=os.path.join(ROOT, "build", "bin", "tlserverd"))
ap.add_argument("--connections", type=int, default=40)
ap.add_argument("--seconds", type=float, default=60)
ap.add_argument("--factor", type=float, default=1.1)
ap.add_argument("flags", nargs="*")
args = ap.parse_args()

FLOOR, BODY_TIMEOUT = 64 << 10, 60
LENGTH = FLOOR * BODY_TIMEOUT
HEAD = (b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n")
port = 0
stop = threading.Event()
opened = [0]


def attacker(i):
    """One attack slot: a body at FACTOR x the floor, opened again when cut."""
    rate = FLOOR * args.factor
    while not stop.is_set():
        try:
            s = socket.socket()
            s.settimeout(5)
            s.bind(("127.0.3.%d" % (i + 1), 0))
            s.connect(("127.0.0.1", port))
            s.sendall(HEAD % LENGTH)
            opened[0] += 1
            t0, sent = time.time(), 0
            while not stop.is_set() and sent < LENGTH:
                n = min(LENGTH - sent, int(rate * (time.time() - t0)) - sent)
                if n > 0:
                    s.sendall(b" " * n)
                    sent += n
                time.sleep(0.1)
        except OSError:
            pass
        try:
            s.close()
        except OSError:
            pass
        time.sleep(0.05)


def post(size):
    """A normal client's compile request of size bytes: its status (0: none)."""
    try:
        s = socket.socket()
        s.settimeout(10)
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", port))
        s.sendall(HEAD % size)
        try:
            s.sendall(b" " * size)
        except OSError:
            pass  # refused at its head: the answer may still be there to read
        out = b""
        while not out.startswith(b"HTTP/1.1 ") or len(out) < 12:
            c = s.recv(4096)
            if not c:
                break
            out += c
        s.close()
        return int(out[9:12]) if out[9:12].isdigit() else 0
    except OSError:
        return 0


def client(results):
    """Every 0.5 s a 1 MiB body (not JSON: 400 once read whole), sent again
    after 1 s (the Retry-After) while it gets 503 (or no answer: a refused
    body's connection may be reset before its 503 is read), for 10 s at most."""
    while not stop.is_set():
        t0 = time.time()
        first = status = post(1 << 20)
        tries = 1
        while status in (0, 503) and time.time() - t0 < 10:
            time.sleep(1)
            status = post(1 << 20)
            tries += 1
        results.append((first, status, tries, time.time() - t0))
        time.sleep(max(0, 0.5 - (time.time() - t0)))


def metric(name):
    try:
        out = tlprocs.http_get(port, "/metrics")
    except OSError:
        return None
    for line in out.decode(errors="replace").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def main():
    global port
    tmp = tempfile.mkdtemp()
    proc, port, log = tlprocs.start_server(args.server, tmp, "server",
                                           ["--workers", "1", "--log-format", "off"] + args.flags)
    try:
        before = []
        stop.clear()
        t = threading.Thread(target=client, args=(before,))
        t.start()
        time.sleep(5)
        stop.set()
        t.join()
        stop.clear()
        threads = [threading.Thread(target=attacker, args=(i,), daemon=True)
                   for i in range(args.connections)]
        for a in threads:
            a.start()
        time.sleep(3)  # the attack fills the budget first
        during, held = [], []
        t = threading.Thread(target=client, args=(during,))
        t.start()
        t_end = time.time() + args.seconds
        while time.time() < t_end:
            held.append(metric("tlserverd_request_body_bytes") or 0)
            time.sleep(1)
        stop.set()
        t.join()
        for a in threads:
            a.join(6)
        cuts = {r: metric('tlserverd_connections_cut_total{reason="%s"}' % r)
                for r in ("body", "body_rate", "body_budget")}
        refused = metric("tlserverd_request_bodies_refused_total")
    finally:
        tlprocs.stop(proc)
        log.close()
    print("server: %s %s" % (args.server, " ".join(args.flags)))
    print("attack: %d connections, bodies of %d bytes at %.2f x %d B/s, %d opened in %.0f s"
          % (args.connections, LENGTH, args.factor, FLOOR, opened[0], args.seconds + 3))
    for name, res in (("before the attack", before), ("during the attack", during)):
        if not res:
            continue
        firsts = sum(1 for r in res if r[0] not in (0, 503))
        served = sum(1 for r in res if r[1] not in (0, 503))
        lat = sorted(r[3] for r in res)
        print("normal client %s: %d requests of 1 MiB; answered at the first try %d, after its retries "
              "%d, never (503 or nothing for 10 s) %d; time to the answer p50 %.2f s, max %.2f s"
              % (name, len(res), firsts, served, len(res) - served, statistics.median(lat), lat[-1]))
    if held:
        print("body budget held during the attack (MiB, once a second): median %.1f, max %.1f, of 128"
              % (statistics.median(held) / 2**20, max(held) / 2**20))
    print("connections cut: %s; requests refused room: %s" % (cuts, refused))


if __name__ == "__main__":
    main()
