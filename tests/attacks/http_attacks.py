#!/usr/bin/env python3
"""tests/attacks/http_attacks.py - attacks on a running tlserverd, and faults
of its machine, each with the answer it must get, and a check that the
server keeps serving a normal client during and after each one.

Usage: http_attacks.py TLSERVERD GROUP...
  GROUP: framing, slow, pressure, slowbodies, budget, bodies, orphans, share, size (attacks); ready (/readyz without a
  toolchain, with a read-only database folder, on a full disk)

Each group starts its own server (TLSERVERD, with the group's limits) on a
free port of 127.0.0.1, with its cache in a temporary folder, and stops it
afterwards.  Attackers connect from 127.0.0.1;
the "normal client" connects from 127.0.0.2 (another loopback address, so a
per-client limit on the attacker's address does not apply to it).  Every
socket has a time-out, every attack a bounded count of connections, so a
server that does not answer fails the test instead of hanging it.

Prints one line per check; exit status 0 when every check passed, 1 when
any failed, 77 when none failed but some could not run here (each says why
on a "skipped:" line; the last line on stderr lists them).
"""
import json
import os
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tlprocs  # noqa: E402

# one line at a time into the log, so that a run cut short shows where it stopped
sys.stdout.reconfigure(line_buffering=True)
SERVER = sys.argv[1]
GROUPS = sys.argv[2:]
PORT = 0
failures = 0
skips = []


class Server:
    """A tlserverd on a free loopback port: `with Server(args):` sets PORT.
    env: extra environment; prepare(tmp): called with the server's
    temporary folder before it starts, returns (the command line's prefix,
    e.g. ["unshare", ...], the database's path)."""

    def __init__(self, *args, env=None, prepare=None):
        self.args = list(args)
        self.env = env
        self.prepare = prepare

    def __enter__(self):
        global PORT
        self.tmp = tempfile.mkdtemp()
        wrap, self.db = ([], os.path.join(self.tmp, "cache.db"))
        if self.prepare:
            wrap, self.db = self.prepare(self.tmp)
        self.proc, PORT, self.log = tlprocs.start_server(
            SERVER, self.tmp, "server", ["--workers", "1", "--log-format", "off"] + self.args,
            env=dict(os.environ, **(self.env or {})), wrap=wrap, db=self.db)
        return self

    def __exit__(self, *exc):
        tlprocs.stop(self.proc)
        if failures:
            self.log.seek(0)
            sys.stdout.write("---- server log ----\n" + self.log.read()[-4000:])
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def skip(what, why):
    print("skipped: %s: %s" % (what, why))
    skips.append("%s (%s)" % (what, why))


def check(ok, what, detail=""):
    global failures
    print("%s: %s%s" % ("ok" if ok else "FAIL", what, (" (%s)" % detail) if detail else ""))
    if not ok:
        failures += 1


def connect(src="127.0.0.1", timeout=5.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", PORT))
    return s


def exchange(data, timeout=5.0, src="127.0.0.1"):
    """Sends data, reads until the server closes or the time-out.  Returns
    (list of status codes seen, closed by the server?, seconds)."""
    out, closed, secs = talk(data, timeout, src)
    codes = []
    for part in out.split(b"HTTP/1.1 ")[1:]:
        if part[:3].isdigit():
            codes.append(int(part[:3]))
    return codes, closed, secs


def talk(data, timeout=5.0, src="127.0.0.1"):
    """Sends data, reads until the server closes or the time-out: (the bytes
    read, closed by the server?, seconds)."""
    t0 = time.time()
    s = connect(src, timeout)
    s.sendall(data)
    out, closed = b"", False
    try:
        while True:
            c = s.recv(65536)
            if not c:
                closed = True
                break
            out += c
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    return out, closed, time.time() - t0


def get(path):
    """A normal client's GET path from 127.0.0.2: (status or 0, body bytes)."""
    try:
        out, _, _ = talk(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                         % path.encode(), 5.0, "127.0.0.2")
    except OSError:
        return 0, b""
    head, _, body = out.partition(b"\r\n\r\n")
    return (int(head[9:12]) if head[9:12].isdigit() else 0), body


def healthz(timeout=3.0):
    """A normal client's GET /healthz from 127.0.0.2: the status, or 0."""
    try:
        codes, _, _ = exchange(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                               timeout, "127.0.0.2")
        return codes[0] if codes else 0
    except OSError:
        return 0


def framing():
    with Server("--max-body", "1M"):
        framing_attacks()


def framing_attacks():
    """Ambiguous framing gets 400 (or 413) before any handler runs, and the
    connection is closed: what follows is never run as a second request."""
    H = b"Host: x\r\n"
    J = b"Content-Type: application/json\r\n"
    table = [
        ("Transfer-Encoding and Content-Length (smuggling)", [400],
         b"POST /v1/compile HTTP/1.1\r\n" + H + J + b"Content-Length: 5\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /metrics HTTP/1.1\r\n" + H + b"\r\n"),
        ("Content-Length then Transfer-Encoding", [400],
         b"POST /v1/compile HTTP/1.1\r\n" + H + J + b"Transfer-Encoding: chunked\r\n"
         b"Content-Length: 5\r\n\r\n0\r\n\r\nGET /metrics HTTP/1.1\r\n" + H + b"\r\n"),
        ("two different Content-Length", [400],
         b"GET /healthz HTTP/1.1\r\n" + H + b"Content-Length: 0\r\nContent-Length: 5\r\n\r\n"
         b"GET /metrics HTTP/1.1\r\n" + H + b"\r\n"),
        ("two equal Content-Length", [400],
         b"GET /healthz HTTP/1.1\r\n" + H + b"Content-Length: 0\r\nContent-Length: 0\r\n\r\n"),
        ("Transfer-Encoding gzip", [400],
         b"POST /v1/compile HTTP/1.1\r\n" + H + J + b"Transfer-Encoding: gzip\r\n\r\n{}"),
        ("Transfer-Encoding twice", [400],
         b"POST /v1/compile HTTP/1.1\r\n" + H + J + b"Transfer-Encoding: chunked\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("HTTP/1.1 without Host", [400], b"GET /healthz HTTP/1.1\r\n\r\n"),
        ("two Host headers", [400], b"GET /healthz HTTP/1.1\r\n" + H + H + b"\r\n"),
        ("%00 in the path", [400], b"GET /metrics%00junk HTTP/1.1\r\n" + H + b"\r\n"),
        ("%0a in the path", [400], b"GET /healthz%0a HTTP/1.1\r\n" + H + b"\r\n"),
        ("Content-Length 2^63 on GET", [413],
         b"GET /healthz HTTP/1.1\r\n" + H + b"Content-Length: 9223372036854775808\r\n\r\n"),
        ("Content-Length 2^63 on compile", [413],
         b"POST /v1/compile HTTP/1.1\r\n" + H + J + b"Content-Length: 9223372036854775808\r\n\r\n"),
        # libmicrohttpd answers this one itself (0.9.75 sends its head twice: only the
        # first status is compared, "+")
        ("Content-Length 2^64 (libmicrohttpd's own 413)", [413, "+"],
         b"GET /healthz HTTP/1.1\r\n" + H + b"Content-Length: 18446744073709551616\r\n\r\n"),
        ("garbage request line with spaces", [400], b"\x01\x02 garbage here\r\n\r\n"),
        ("garbage request line without a space (closed, no answer)", [],
         b"GARBAGE\r\n\r\n"),
    ]
    for what, want, data in table:
        codes, closed, secs = exchange(data)
        if want[-1:] == ["+"]:
            want = want[:-1]
            codes = codes[:len(want)]
        check(codes == want and closed, what,
              "got %s, closed %s after %.1f s; want %s and closed" % (codes, closed, secs, want))
    # a good request on the same footing still works (no false positive)
    codes, _, _ = exchange(b"GET /healthz HTTP/1.0\r\n\r\n")
    check(codes == [] or codes == [200], "HTTP/1.0 without Host is fine")
    codes, _, _ = exchange(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                           b"Connection: close\r\n\r\n")
    check(codes == [200], "one Content-Length: 0 is fine", str(codes))
    check(healthz() == 200, "healthz after the framing attacks")


def closed_within(socks, seconds, trickle=None):
    """Waits until the server has closed every socket of socks (a read sees
    the end or a reset), sending trickle(sock) every half second to the
    ones still open.  Returns how many are still open after `seconds`."""
    deadline = time.time() + seconds
    open_ = list(socks)
    while open_ and time.time() < deadline:
        still = []
        for s in open_:
            s.setblocking(False)
            try:
                if s.recv(65536) == b"":
                    continue  # closed
                still.append(s)  # an answer: keep reading
            except BlockingIOError:
                still.append(s)
                if trickle:
                    try:
                        trickle(s)
                    except OSError:
                        still.pop()
            except OSError:
                pass  # reset
        open_ = still
        if open_:
            time.sleep(0.5)
    for s in socks:
        s.close()
    return len(open_)


def slow():
    # Limits small enough for a test: 100 connections, 40 per client address,
    # 2 s for a request's head, 3 s for its body.
    with Server("--max-connections", "100", "--max-connections-per-ip", "40",
                "--header-timeout", "2", "--body-timeout", "3", "--idle-timeout", "30"):
        slow_attacks()


def slow_attacks():
    """Slow clients are cut at their deadline, one address cannot take every
    connection, and a normal client is served all along."""
    # 1. half-closed connections: the client sends part of a request and
    #    shuts its side; the server closes them within a second or so
    socks = []
    for part in (b"GET /hea", b"GET /healthz HTTP/1.1\r\nHost: x\r\n",
                 b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{"):
        s = connect()
        s.sendall(part)
        s.shutdown(socket.SHUT_WR)
        socks.append(s)
    left = closed_within(socks, 1.5)
    check(left == 0, "half-closed connections closed at once", "%d of 3 still open" % left)

    # 2. 150 connections (more than --max-connections) each sending one header
    #    line a second: those over the per-address limit are closed at once,
    #    the others at the header deadline; /healthz answers meanwhile.
    socks = []
    for _ in range(150):
        try:
            s = connect(timeout=2)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        except OSError:
            pass
    time.sleep(0.5)
    check(healthz() == 200, "healthz while 150 slow-header connections are open")
    left = closed_within(socks, 4.0, lambda s: s.sendall(b"X-Slow: 1\r\n"))
    check(left == 0, "slow-header connections closed within the header time-out",
          "%d of %d still open after 4 s" % (left, len(socks)))
    check(healthz() == 200, "healthz after the slow-header attack")

    # 3. a request line trickled a byte at a time
    s = connect()
    s.sendall(b"G")
    left = closed_within([s], 4.0, lambda s: s.sendall(b"E"))
    check(left == 0, "a trickled request line is closed within the header time-out")

    # 4. bodies trickled a byte every half second, on 20 connections
    socks = []
    for _ in range(20):
        s = connect()
        s.sendall(b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{")
        socks.append(s)
    check(healthz() == 200, "healthz while 20 bodies trickle")
    left = closed_within(socks, 5.0, lambda s: s.sendall(b" "))
    check(left == 0, "trickled bodies closed within the body time-out",
          "%d of 20 still open after 5 s" % left)

    # 5. a kept-alive connection between requests is not cut by the head deadline
    s = connect()
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    first = s.recv(65536)
    time.sleep(3)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    second = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            second += c
    except OSError:
        pass
    s.close()
    check(first.startswith(b"HTTP/1.1 200") and second.startswith(b"HTTP/1.1 200"),
          "a kept-alive connection idle for 3 s still serves its next request")
    check(healthz() == 200, "healthz after the slow-client attacks")


def pressure():
    # 40 connections at most, 20 per address, 10 s for a request's head: the
    # pressure limit (1 s in HEAD or IDLE) applies from 30 open connections.
    with Server("--max-connections", "40", "--max-connections-per-ip", "20",
                "--header-timeout", "10", "--idle-timeout", "30"):
        pressure_attacks()


def still_open(socks):
    """How many of socks the server has not closed (a read would block)."""
    n = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(65536, socket.MSG_PEEK) != b"":
                n += 1
        except BlockingIOError:
            n += 1
        except OSError:
            pass
    return n


def pressure_attacks():
    """A slow-header attack from several addresses, each under the
    per-address limit: below 3/4 of --max-connections the header time-out
    holds (10 s); from there every connection still sending its head after
    a second is cut, and a normal client is served."""
    def slow(src, n):
        out = []
        for _ in range(n):
            s = connect(src, timeout=2)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            out.append(s)
        return out
    first = slow("127.0.1.1", 20)  # 20 of 40: no pressure
    time.sleep(2.5)
    left = still_open(first)
    check(left == 20, "below 3/4 of --max-connections, slow heads are kept until the header "
          "time-out", "%d of 20 open after 2.5 s" % left)
    more = slow("127.0.1.2", 12)  # 32 of 40: pressure
    t0 = time.time()
    left = closed_within(first, 4.0, lambda s: s.sendall(b"X-Slow: 1\r\n"))
    check(left == 0 and time.time() - t0 < 3.0, "from 3/4 of --max-connections, the slow heads "
          "older than a second are cut at once (the header time-out is 10 s)",
          "%d of 20 still open after %.1f s" % (left, time.time() - t0))
    for s in more:
        s.close()
    check(healthz() == 200, "healthz after the attack")
    time.sleep(1)
    after = slow("127.0.1.3", 5)  # the pressure is over: the header time-out holds again
    time.sleep(2)
    left = still_open(after)
    check(left == 5, "once under 3/4 again, slow heads keep the header time-out", "%d of 5 open" % left)
    for s in after:
        s.close()
    # a normal client's kept-alive connection is not cut while there is no pressure
    s = connect()
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    first_answer = s.recv(65536)
    time.sleep(2)
    check(first_answer.startswith(b"HTTP/1.1 200") and still_open([s]) == 1,
          "without pressure an idle kept-alive connection stays open past a second")
    s.close()


def slowbodies():
    # 40 connections at most, 20 per address, 30 s for a body, a floor of
    # 4 KiB/s: the pressure limits apply from 30 open connections;
    # --pressure-timeout at its default (1 s).
    with Server("--max-connections", "40", "--max-connections-per-ip", "20",
                "--header-timeout", "10", "--body-timeout", "30", "--idle-timeout", "30",
                "--min-body-rate", "4K"):
        slowbodies_attacks()


def slowbodies_attacks():
    """Bodies trickled from several addresses, each under the per-address
    limit: below 3/4 of --max-connections the body time-out holds (30 s);
    from there a body that has come in for more than --pressure-timeout at
    less than --min-body-rate on average is cut, while bodies sent at 4
    times the floor are kept (and keep the pressure on) and answered."""
    head = (b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n")

    def slow(src, n):
        out = []
        for _ in range(n):
            s = connect(src, timeout=2)
            s.sendall(head % 1000 + b"{")
            out.append(s)
        return out

    def trickle(socks, seconds, fast=()):
        """Sends a byte to each of socks every 0.25 s, and 4 KiB to each of
        fast (16 KiB/s), for `seconds` or until socks are all closed (and
        fast is empty).  Returns (the socks still open, seconds until the
        last of socks was closed, or until the end, the bytes sent on each
        of fast: counted, not reckoned from the time, since on a loaded
        machine a round takes longer than its 0.25 s)."""
        t0 = time.time()
        gone = None
        sent = 0
        while time.time() - t0 < seconds:
            for s in socks:
                try:
                    s.sendall(b" ")
                except OSError:
                    pass
            for s in fast:
                s.sendall(b" " * 4096)  # blocking: a cut one raises, and fails the test
            sent += 4096 if fast else 0
            time.sleep(0.25)
            socks = [s for s in socks if still_open([s])]
            for s in socks:
                s.settimeout(2)  # still_open made it non-blocking
            if not socks and gone is None:
                gone = time.time() - t0
            if not socks and not fast:
                break
        return socks, gone if gone is not None else time.time() - t0, sent

    first = slow("127.0.1.1", 8)  # 8 of 40: no pressure
    left, _, _ = trickle(first, 2.5)
    check(len(left) == 8, "below 3/4 of --max-connections, trickled bodies are kept until the "
          "body time-out", "%d of 8 open after 2.5 s" % len(left))
    # 30 bodies at 16 KiB/s, 4 times the floor, from two addresses: 38 of 40 open,
    # pressure, and still 30 once the slow ones are cut
    total = 128 << 10
    fast = []
    for src in ("127.0.1.3", "127.0.1.4"):
        for _ in range(15):
            s = connect(src, timeout=10)
            s.sendall(head % total)
            fast.append(s)
    sent = 0
    try:
        left, secs, n = trickle(first, 4.0, fast)
        sent += n
        check(not left and secs < 2.5, "from 3/4 of --max-connections, bodies slower than --min-body-rate for "
              "over --pressure-timeout are cut (the body time-out is 30 s)",
              "%d of 8 open; the last closed after %.1f s" % (len(left), secs))
        check(healthz() == 200, "healthz during the slow-body attack")
        late = slow("127.0.1.5", 1)  # a new slow body while the pressure holds
        left, secs, n = trickle(late, 2.5, fast)
        sent += n
        check(not left, "a slow body that starts under pressure is cut after --pressure-timeout",
              "%s after %.1f s" % ("open" if left else "closed", secs))
        open_fast = still_open(fast)
        check(open_fast == 30, "bodies at 4 times --min-body-rate are kept under pressure",
              "%d of 30 open, %d KiB sent on each" % (open_fast, sent >> 10))
    except OSError as e:
        check(False, "bodies at 4 times --min-body-rate are kept under pressure", repr(e))
    answers = 0
    for s in fast:
        s.settimeout(10)
        try:
            s.sendall(b" " * (total - sent))
            answers += s.recv(65536).startswith(b"HTTP/1.1 400")
        except OSError:
            pass
        s.close()
    check(answers == 30, "the fast bodies are read whole and answered (400: not JSON)",
          "%d of 30" % answers)
    cut = metric('tlserverd_connections_cut_total{reason="body_rate"}')
    check(cut == 9, "/metrics counts the 9 cut bodies under body_rate", str(cut))
    # the pressure is over: a trickled body keeps the body time-out again
    after = slow("127.0.1.6", 5)
    left, _, _ = trickle(after, 2.5)
    check(len(left) == 5, "once under 3/4 again, trickled bodies keep the body time-out",
          "%d of 5 open" % len(left))
    for s in after + first:
        s.close()


def budget():
    # 1 MiB bodies, 4 MiB for all of them (under pressure from 3 MiB held), a
    # floor of 16 KiB/s, 30 s for a body; few connections, so only the body
    # budget can put the server under pressure.
    with Server("--max-body", "1M", "--max-body-total", "4M", "--min-body-rate", "16K",
                "--body-timeout", "30", "--header-timeout", "10", "--idle-timeout", "30"):
        budget_attacks()


class Sender:
    """Sends body bytes on socks from a thread: rates[i] bytes a second on
    socks[i], in ticks of 0.125 s, until stop() or the socket is cut."""

    def __init__(self, socks, rates):
        import threading
        self.socks, self.rates, self.sent = socks, rates, [0] * len(socks)
        self.cut = [False] * len(socks)
        self.done = threading.Event()
        self.t0 = time.time()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done.wait(0.125):
            t = time.time() - self.t0
            for i, s in enumerate(self.socks):
                n = int(self.rates[i] * t) - self.sent[i]  # keep to the rate on average
                if self.cut[i] or n <= 0:
                    continue
                try:
                    s.sendall(b" " * n)
                    self.sent[i] += n
                except OSError:
                    self.cut[i] = True

    def stop(self):
        self.done.set()
        self.thread.join()
        for i, s in enumerate(self.socks):
            if not self.cut[i] and not still_open([s]):
                self.cut[i] = True
            s.close()
        return self.cut


def budget_attacks():
    """Bodies that hold --max-body-total without putting --max-connections
    under pressure: trickled ones are cut by --min-body-rate once they hold
    more than 3/4 of it, and ones sent at or above the floor are cut,
    slowest first, as soon as another request is refused room, so that
    its retry fits; a normal client is served meanwhile."""
    L = 1000000  # 4 of them hold 95% of 4 MiB; a 5th does not fit
    head = (b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n")

    def open_bodies(rates):
        socks = []
        for i in range(len(rates)):
            s = connect("127.0.2.%d" % (i + 1), timeout=5)
            s.sendall(head % L)
            socks.append(s)
        return Sender(socks, rates)

    def upload(size):
        """A normal client's compile request of size bytes (not JSON: 400 when read
        whole), from 127.0.0.2: its status."""
        try:
            codes, _, _ = exchange(head % size + b" " * size, 10.0, "127.0.0.2")
        except OSError:
            return 0
        return codes[0] if codes else 0

    # 1. four bodies trickled at 8 bytes a second: over 3/4 of the budget, so
    #    the floor applies although only 4 connections are open
    att = open_bodies([8, 8, 8, 8])
    time.sleep(0.3)
    check(upload(500000) == 503, "a body that does not fit next to the trickled ones gets 503")
    check(healthz() == 200, "healthz while trickled bodies hold the body budget")
    # the server's sweep cuts them after --pressure-timeout; on a loaded machine (a sanitizer build beside
    # other jobs) a little later: wait for its count, up to 10 s (the body time-out is 30 s), so that the
    # next upload does not make room itself by cutting the slowest
    t0 = time.time()
    time.sleep(2.7)
    while time.time() - t0 < 10 and metric('tlserverd_connections_cut_total{reason="body_rate"}') != 4:
        time.sleep(0.25)
    secs = time.time() - t0
    status = upload(500000)  # the attackers' sockets are still open
    cut = att.stop()
    check(all(cut), "trickled bodies holding over 3/4 of --max-body-total are cut by --min-body-rate "
          "(the body time-out is 30 s)", "%d of 4 cut after %.1f s" % (sum(cut), secs))
    check(status == 400, "the budget is free again once the trickled bodies were cut", str(status))
    check(metric('tlserverd_connections_cut_total{reason="body_rate"}') == 4,
          "/metrics counts the 4 trickled bodies under body_rate")

    # 2. four bodies at 2 to 5 times the floor: the floor keeps them all
    #    (a sender stalled by a loaded machine catches up); a request refused
    #    room makes the slowest be cut, and its retry fits
    floor = 16 << 10
    att = open_bodies([floor * 2, floor * 3, floor * 4, floor * 5])
    time.sleep(1.5)  # past --pressure-timeout: they may be cut from now on
    first = upload(500000)
    check(first == 503, "a body that does not fit next to bodies at the floor gets 503 (Retry-After)",
          str(first))
    time.sleep(1.0)  # the client waits its Retry-After
    retry = upload(500000)
    check(retry == 400, "its retry is read whole: the slowest body was cut to make room", str(retry))
    check(healthz() == 200, "healthz while bodies at the floor hold the budget")
    cut = att.stop()
    check(cut == [True, False, False, False], "only the slowest body was cut (one was enough)",
          str(cut))
    check(metric('tlserverd_connections_cut_total{reason="body_budget"}') == 1,
          "/metrics counts it under body_budget")

    # 3. without a request waiting for room nothing is cut for it (once the
    #    bodies of 2. are released: a new one refused room would ask for it)
    deadline = time.time() + 5
    while metric("tlserverd_request_body_bytes") != 0 and time.time() < deadline:
        time.sleep(0.1)
    att = open_bodies([floor * 3] * 4)
    time.sleep(2.5)
    cut = att.stop()
    check(not any(cut), "bodies at the floor that nobody waits behind are kept", str(cut))
    check(metric('tlserverd_connections_cut_total{reason="body_budget"}') == 1,
          "/metrics: no more cut under body_budget")


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def bodies():
    with Server("--max-body", "1M", "--max-body-total", "4M") as srv:
        bodies_attacks(srv.proc.pid)


def bodies_attacks(pid):
    """Unfinished bodies cannot take the server's memory: past
    --max-body-total a request with a body gets 503 (Retry-After) at once,
    the memory stays bounded, and other requests are served."""
    head = (b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1048576\r\n\r\n")
    before = rss_kib(pid)
    socks, cut, refused = [], set(), 0
    for i in range(40):
        s = connect()
        try:
            s.sendall(head + b" " * (512 * 1024))
        except (BrokenPipeError, ConnectionResetError):
            cut.add(i)  # the server answered 503 and closed before the half body was sent
        socks.append(s)
    time.sleep(1.0)
    during = rss_kib(pid)
    for i, s in enumerate(socks):
        s.settimeout(0.2)
        try:
            if s.recv(65536).startswith(b"HTTP/1.1 503"):
                cut.add(i)
        except OSError:
            pass
    refused = len(cut)
    # 3 bodies of 1 MiB fit in 4 MiB; the 37 others are refused
    check(refused >= 36, "bodies past --max-body-total get 503", "%d of 40 refused" % refused)
    grew = during - before
    check(grew < 16 * 1024, "memory stays bounded with 40 unfinished 1 MiB bodies",
          "RSS %d KiB -> %d KiB" % (before, during))
    print("measured: RSS %d KiB before, %d KiB with 40 unfinished bodies (+%d KiB)"
          % (before, during, grew))
    check(healthz() == 200, "healthz while the bodies are held")
    # a small compile request still fits in what is left
    codes, _, _ = exchange(b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: "
                           b"application/json\r\nContent-Length: 2\r\nConnection: close\r\n"
                           b"\r\n[]", src="127.0.0.2")
    check(codes == [400], "a small compile request is still read", str(codes))
    for s in socks:
        s.close()
    # once the server has seen them go (the bodies' bytes back to 0 in /metrics: on a loaded
    # machine that may take longer than a moment), the budget is free again: a chunked 900 KiB
    # body is read whole
    held = wait_metric("tlserverd_request_body_bytes", 0, 10.0)
    check(held == 0, "the closed bodies' bytes are released", str(held))
    chunk = b" " * (300 * 1024)
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(3)) + b"0\r\n\r\n"
    codes, _, _ = exchange(b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: "
                           b"application/json\r\nTransfer-Encoding: chunked\r\n"
                           b"Connection: close\r\n\r\n" + body, src="127.0.0.2")
    check(codes == [400], "the budget is free again after the bodies went", str(codes))
    check(healthz() == 200, "healthz after the body attack")


def children():
    """This process's children other than servers: (pid, command name)."""
    return [(pid, name) for pid, name, _ in tlprocs.children(os.getpid())]


def post(path, body, timeout=60.0):
    data = (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (path.encode(), len(body))) + body
    codes, _, _ = exchange(data, timeout, "127.0.0.2")
    return codes[0] if codes else 0


def post_and_look(srv, body):
    """Posts a compile and, once answered, looks for what it left running:
    (the status, [(pid, name)] of the live processes re-parented to this
    one, a subreaper).  The server answers 504 after what it killed has
    died (a zombie here, not listed); what was not killed runs on, and is
    killed and reaped after being listed."""
    status = post("/v1/compile", body)
    left = [c for c in children() if c[0] != srv.proc.pid]
    for pid, _ in left:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return status, left


def orphans():
    """A compile that times out while clang runs (an AMD target) leaves no
    process behind.  This process becomes a child subreaper, so whatever the
    server's workers leave running is re-parented to it and can be seen."""
    import ctypes
    PR_SET_CHILD_SUBREAPER = 36
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        check(False, "prctl(PR_SET_CHILD_SUBREAPER)")
        return
    # clang-19 takes 0.3 s or more on it (plus 0.15 s of probes), so a
    # 0.15 s time-out falls while clang runs
    prog = open("examples/gemm.json").read()
    body = ('{"program": %s, "targets": ["gfx90a"]}' % prog).encode()
    with Server("--compile-timeout", "0.15") as srv:
        time.sleep(1)  # the worker has loaded its toolchain: the time-out falls in clang
        srv.log.seek(0)
        if "clang " not in srv.log.read():  # the start-up line names the toolchains found
            skip("orphans", "the server found no clang, so no AMD compile runs clang to be "
                 "killed (apt-get install clang-19 lld-19)")
            return
        status, left = post_and_look(srv, body)
        check(status == 504, "an AMD compile past --compile-timeout gets 504", str(status))
        check(not left, "no process of the timed-out compile is left running", str(left))
        check(healthz() == 200, "healthz after the compile time-out")
    orphans_slow_death(body)


# TL_CLANG for orphans_slow_death: clang itself for its probes (--version,
# -fsyntax-only); for a compile (-c), a tool that starts a child holding
# SIZE bytes of memory, says so in READY and hangs.  A process of 768 MiB
# takes 0.1 to 0.3 s to die after SIGKILL (its memory is freed first).
HANG_TOOL = r"""#!%(python)s
import os, sys, time
if "-c" not in sys.argv[1:]:
    os.execv(%(clang)r, [%(clang)r] + sys.argv[1:])
r, w = os.pipe()
if os.fork() == 0:
    x = bytearray(%(size)d)
    x[::4096] = b"\1" * len(x[::4096])  # every page resident
    os.write(w, b"r")
    time.sleep(600)
    os._exit(0)
os.close(w)
if os.read(r, 1) == b"r":
    open(%(ready)r, "w").close()
time.sleep(600)
"""


def orphans_slow_death(body):
    """The processes of a timed-out compile are dead, not only signalled,
    when the 504 is sent: a tool's child that takes a while to die (768 MiB
    to free) is waited for."""
    clang = None
    for name in ("clang-19", "clang-20", "clang-18", "clang"):
        clang = shutil.which(name)
        if clang:
            break
    tmp = tempfile.mkdtemp()
    tool, ready = os.path.join(tmp, "clang"), os.path.join(tmp, "ready")
    with open(tool, "w") as f:
        f.write(HANG_TOOL % {"python": sys.executable, "clang": clang, "size": 768 << 20, "ready": ready})
    os.chmod(tool, 0o755)
    try:
        with Server("--compile-timeout", "3", env={"TL_CLANG": tool}) as srv:
            status, left = post_and_look(srv, body)
            if not os.path.exists(ready):
                check(False, "a tool's child holding 768 MiB was started before the time-out",
                      "the machine is too slow for 3 s: %d" % status)
            check(status == 504, "a compile whose tool hangs gets 504", str(status))
            check(not left, "a killed tool's child that takes a while to die is dead before the 504",
                  str(left))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- a client's share of the compile workers, and the program-size limit -------------

def info():
    """GET /v1/info from the normal client: the JSON body, or {}."""
    _, body = get("/v1/info")
    try:
        return json.loads(body)
    except ValueError:
        return {}


def compile_body(prog, targets):
    return json.dumps({"program": prog, "targets": targets}).encode()


def post_from(src, body, timeout):
    """POSTs a compile request from address src and reads the answer: (status
    or 0 when none came within the time-out, headers as a lower-case dict,
    the JSON body or {}, the socket, still open when no answer came)."""
    s = connect(src, timeout)
    s.sendall(b"POST /v1/compile HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    out = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
    except (socket.timeout, ConnectionResetError):
        pass
    head, _, rest = out.partition(b"\r\n\r\n")
    if not head[9:12].isdigit():
        return 0, {}, {}, s
    s.close()
    hdrs = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        hdrs[k.strip().lower().decode()] = v.strip().decode()
    try:
        doc = json.loads(rest)
    except ValueError:
        doc = {}
    return int(head[9:12]), hdrs, doc, None


def wait_metric(name, want, seconds=15.0):
    """Polls /metrics until series `name` is `want`; returns its last value."""
    deadline = time.time() + seconds
    while True:
        v = metric(name)
        if v == want or time.time() > deadline:
            return v
        time.sleep(0.2)


def share():
    """One client address cannot hold every compile worker: with --workers 3
    (so --max-compiles-per-client defaults to 2) and --queue 4 (half of it:
    2 may wait), compiles that never end (the test hook TL_TEST_HANG_ON, as
    a 10,000-statement program holds a worker for NVRTC's minutes) from one
    address run at most 2 at a time, another client's compile is answered
    meanwhile, and a request that would make more than 2 wait gets 429 with
    Retry-After and an error naming the limits."""
    prog = json.load(open("examples/tilus_add_one.json"))
    hang = dict(prog, name="hang")
    socks = []
    with Server("--workers", "3", "--queue", "4", "--compile-timeout", "60", "--shutdown-grace", "1",
                "--test-hooks", env={"TL_TEST_HANG_ON": "hang"}):
        doc = info()
        limits = doc.get("limits", {})
        check(limits.get("max_compiles_per_client") == 2 and limits.get("max_queued_per_client") == 2,
              "/v1/info: limits.max_compiles_per_client is --workers less one, max_queued_per_client "
              "half of --queue", json.dumps(limits))
        t = doc.get("targets", [])
        if len(t) < 7:
            skip("share", "the server offers %d targets, 7 are needed (no NVRTC here?)" % len(t))
            return
        # (who, targets of a hanging program, the answer it must get: 0 = none within 1.5 s,
        # the compile queued or running)
        table = [
            ("127.0.0.3", [t[0], t[1], t[2]], 0, "a request of 3 compiles: 2 run, 1 waits"),
            ("127.0.0.3", [t[3], t[4]], 429, "2 more would make 3 of that client's wait"),
            ("127.0.0.3", [t[3]], 0, "1 more makes 2 wait: its share of the queue"),
            ("127.0.0.3", [t[4]], 429, "past its share of the queue"),
            ("127.0.0.3", [t[0]], 0, "joining a compile in flight costs no share"),
            ("127.0.0.1", [t[5]], 0, "another client's first compile"),
            ("127.0.0.1", [t[6]], 0, "and its second"),
        ]
        for i, (src, targets, want, what) in enumerate(table):
            status, hdrs, body, sock = post_from(src, compile_body(hang, targets), 1.5)
            if sock:
                socks.append(sock)
            err = body.get("error", {})
            if want == 429:
                check(status == 429 and hdrs.get("retry-after") == "1" and err.get("code") == "too_many_requests"
                      and "--max-compiles-per-client" in err.get("message", "") and "--queue" in err.get("message", "")
                      and src in err.get("message", ""),
                      "%s: 429, Retry-After: 1, too_many_requests naming the limit and the client" % what,
                      "%d %s %s" % (status, hdrs.get("retry-after"), json.dumps(err)[:300]))
            else:
                check(status == 0, "%s: queued or running (no answer)" % what, "%d %s" % (status, json.dumps(err)[:300]))
            if i == 0:
                running = wait_metric("tlserverd_compiles_running", 2)
                time.sleep(1)  # a third would have started by now
                running = metric("tlserverd_compiles_running")
                check(running == 2 and metric("tlserverd_compile_queue_depth") == 1,
                      "its 3 compiles: 2 run, 1 waits, one worker is left for the others",
                      "running %s, queued %s" % (running, metric("tlserverd_compile_queue_depth")))
                t0 = time.time()
                status, _, body, sock = post_from("127.0.0.2", compile_body(prog, [t[0]]), 25)
                check(status == 200, "meanwhile another client's compile is answered",
                      "%d in %.1f s %s" % (status, time.time() - t0, json.dumps(body)[:300]))
        check(metric("tlserverd_client_limited_total") == 2, "/metrics: tlserverd_client_limited_total 2",
              str(metric("tlserverd_client_limited_total")))
        check(healthz() == 200, "healthz while one client holds its share")
    for sock in socks:
        sock.close()


def size():
    """A program past --max-program-statements is refused with 413 before it
    is compiled (bench/long_program.py: every statement counts, nested ones
    too), and /v1/info says the limit."""
    sys.path.insert(0, "bench")
    import long_program
    with Server("--max-program-statements", "50"):
        doc = info()
        check(doc.get("limits", {}).get("max_program_statements") == 50,
              "/v1/info: limits.max_program_statements 50", json.dumps(doc.get("limits", {})))
        t = doc.get("targets", [])
        if not t:
            skip("size", "the server offers no target (no toolchain here)")
            return
        table = [(51, 413, "51 statements"), (50, 200, "50 statements")]
        for n, want, what in table:
            status, _, body, _ = post_from("127.0.0.2", compile_body(long_program.program(n), [t[0]]), 60)
            err = body.get("error", {})
            if want == 413:
                check(status == 413 and err.get("code") == "too_large" and
                      "has %d statements" % n in err.get("message", "") and "at most 50" in err.get("message", "")
                      and "--max-program-statements" in err.get("message", ""),
                      "%s with a limit of 50: 413 too_large naming the limit" % what,
                      "%d %s" % (status, json.dumps(err)[:300]))
            else:
                check(status == want, "%s with a limit of 50: %d" % (what, want), "%d %s" % (status, json.dumps(err)[:300]))
    with Server():
        check(info().get("limits", {}).get("max_program_statements") == 2000,
              "/v1/info: limits.max_program_statements defaults to 2000")
        t0 = time.time()
        status, _, body, _ = post_from("127.0.0.2", compile_body(long_program.program(10000), [t[0]]), 60)
        secs = time.time() - t0
        msg = body.get("error", {}).get("message", "")
        check(status == 413 and "at most 2000 are compiled" in msg and secs < 10,
              "10,000 statements (NVRTC: over 300 s) at the defaults: 413 at once, no worker held",
              "%d in %.1f s %s" % (status, secs, json.dumps(body.get("error", {}))[:300]))
        check(healthz() == 200, "healthz after the refused program")


def readyz():
    """GET /readyz: (status, the JSON body or {})."""
    status, body = get("/readyz")
    try:
        return status, json.loads(body)
    except ValueError:
        return status, {}


def wait_check(name, want, seconds=6.0):
    """Polls /readyz until check `name` is `want` (the probe runs once a
    second).  Returns (status, body) of the last answer."""
    deadline = time.time() + seconds
    while True:
        status, body = readyz()
        ok = body.get("checks", {}).get(name, {}).get("ok")
        if ok == want or time.time() > deadline:
            return status, body
        time.sleep(0.2)


def metric(name):
    """The value of one series of /metrics, or None."""
    _, body = get("/metrics")
    for line in body.decode(errors="replace").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def check_readyz(status, body, name, ok, what):
    """/readyz agrees with itself: check `name` is `ok`, 503 with a reason
    when any check failed, 200 when all passed."""
    checks = body.get("checks", {})
    all_ok = bool(checks) and all(c.get("ok") for c in checks.values())
    reason = checks.get(name, {}).get("reason", "")
    good = (checks.get(name, {}).get("ok") == ok and status == (200 if all_ok else 503)
            and (ok or (reason and reason in body.get("error", {}).get("message", ""))))
    check(good, what, "%d %s" % (status, json.dumps(body)[:600]))
    return good


def ready():
    """/readyz says 503, with the reason, when the server cannot do its work,
    /metrics shows it, and it recovers when the cause goes."""
    hidden = {"TL_NVRTC": "/nonexistent", "TL_CLANG": "/nonexistent", "TL_HIPRTC": "/nonexistent"}
    with Server(env=hidden):
        status, body = readyz()
        check_readyz(status, body, "toolchain", False, "no toolchain: /readyz answers 503")
        check("no toolchain can compile" in body.get("error", {}).get("message", ""),
              "no toolchain: the reason says so", json.dumps(body)[:300])
        check(metric("tlserverd_ready") == 0 and
              metric('tlserverd_ready_check{check="toolchain"}') == 0,
              "no toolchain: /metrics shows tlserverd_ready 0 and the failed check")
        check(healthz() == 200, "healthz without a toolchain (the server lives)")
    with Server():
        status, body = readyz()
        check(body.get("checks", {}).get("database", {}).get("ok") is True and
              body.get("checks", {}).get("disk", {}).get("ok") is True,
              "a healthy database and disk pass their checks", json.dumps(body)[:300])
        ok = status == 200 and metric("tlserverd_ready") == 1
        if body.get("checks", {}).get("toolchain", {}).get("ok"):
            check(ok, "with a toolchain: /readyz 200, tlserverd_ready 1", "%d" % status)
        else:
            skip("ready with a toolchain", "no NVRTC or clang here")
    ready_readonly_dir()
    ready_full_disk()


def ready_readonly_dir():
    """The database's folder made read-only while the server runs.  Root
    writes anywhere, so as root the server runs as nobody (setpriv)."""
    wrap = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if not setpriv:
            skip("read-only database folder", "running as root and setpriv is missing")
            return
        wrap = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]

    def prepare(tmp):
        d = os.path.join(tmp, "db")
        os.mkdir(d)
        os.chmod(tmp, 0o777)  # the port file, written by nobody
        os.chmod(d, 0o777)
        return wrap, os.path.join(d, "cache.db")

    with Server(prepare=prepare) as srv:
        d = os.path.dirname(srv.db)
        status, body = wait_check("disk", True)
        check_readyz(status, body, "disk", True, "read-only folder: ready before")
        os.chmod(d, 0o555)
        try:
            status, body = wait_check("disk", False)
            check_readyz(status, body, "disk", False, "read-only folder: /readyz 503 with the reason")
            check(metric('tlserverd_ready_check{check="disk"}') == 0,
                  "read-only folder: /metrics shows the failed check")
        finally:
            os.chmod(d, 0o777)
        status, body = wait_check("disk", True)
        check_readyz(status, body, "disk", True, "read-only folder: ready again once writable")

        # A probe's own file left in the folder: the folder made read-only
        # between a probe's creating its file and removing it.  Writing into a
        # file that exists needs no right on the folder, so a probe that
        # reused it would pass in a read-only folder (then "read-only folder:
        # /readyz 503" above fails, when the chmod falls in that window).  As root the file is made after the chmod (root writes into a
        # read-only folder), owned by the server's user, so every probe meets
        # it; otherwise just before (a probe in between removes it, and the
        # rows check the plain read-only folder).
        left = "%s.probe-%d" % (srv.db, srv.proc.pid)

        def leave_probe_file():
            with open(left, "wb") as f:
                f.write(b"\0" * 4096)
            if wrap:
                os.chown(left, 65534, 65534)
        if not wrap:
            leave_probe_file()
        os.chmod(d, 0o555)
        try:
            if wrap:
                leave_probe_file()
            status, body = wait_check("disk", False)
            check_readyz(status, body, "disk", False,
                         "read-only folder with a probe's file left in it: /readyz 503 with the reason")
            # and it stays so: the next probes (one a second) meet the file too
            passed, t0 = None, time.time()
            while time.time() - t0 < 2.5 and passed is None:
                st, b = readyz()
                if b.get("checks", {}).get("disk", {}).get("ok") is True:
                    passed = "%d after %.1f s: %s" % (st, time.time() - t0, json.dumps(b)[:300])
                time.sleep(0.25)
            check(passed is None, "read-only folder with a probe's file left in it: the disk check fails "
                  "at the next probes too", passed or "")
        finally:
            os.chmod(d, 0o777)
        status, body = wait_check("disk", True)
        check_readyz(status, body, "disk", True,
                     "read-only folder with a probe's file left in it: ready again once writable")
        check(not os.path.exists(left), "the probe removed the file left in the folder", left)


def ready_full_disk():
    """The database on a small tmpfs (its own mount namespace, through
    unshare) that the test fills through /proc/PID/root and empties."""
    why = tlprocs.tmpfs_unavailable()
    if why:
        skip("full disk", why)
        return

    def prepare(tmp):
        d = os.path.join(tmp, "db")
        os.mkdir(d)
        return tlprocs.tmpfs_wrap(d, "8m"), os.path.join(d, "cache.db")

    with Server(prepare=prepare) as srv:
        status, body = wait_check("disk", True)
        check_readyz(status, body, "disk", True, "full disk: ready before")
        fill = tlprocs.tmpfs_path(srv.proc.pid, os.path.dirname(srv.db), "fill")
        try:
            tlprocs.fill(fill)
        except OSError as e:
            check(False, "full disk: filling the tmpfs", str(e))
            return
        status, body = wait_check("disk", False)
        check_readyz(status, body, "disk", False, "full disk: /readyz 503 with the reason")
        check("No space left" in body.get("checks", {}).get("disk", {}).get("reason", ""),
              "full disk: the reason says no space is left")
        os.unlink(fill)
        status, body = wait_check("disk", True)
        check_readyz(status, body, "disk", True, "full disk: ready again once space is free")
        check(healthz() == 200, "healthz after the full disk")


def main():
    for g in GROUPS:
        {"framing": framing, "slow": slow, "pressure": pressure, "slowbodies": slowbodies,
         "budget": budget, "bodies": bodies,
         "orphans": orphans, "share": share, "size": size, "ready": ready}[g]()
    print("http_attacks.py: %s" % ("%d failed" % failures if failures else
                                   "all passed, %d skipped" % len(skips) if skips else
                                   "all passed"))
    if failures:
        return 1
    if skips:
        sys.stderr.write("skipped: %s\n" % "; ".join(skips))
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
