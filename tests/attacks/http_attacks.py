#!/usr/bin/env python3
"""tests/attacks/http_attacks.py - attacks on a running tlserverd, each with
the answer it must get, and a check that the server keeps serving a normal
client during and after each one.

Usage: http_attacks.py TLSERVERD GROUP...   (GROUP: framing, slow, bodies)

Each group starts its own server (TLSERVERD, with the group's limits) on a
free port of 127.0.0.1, with its cache in a temporary folder, and stops it
afterwards.  Attackers connect from 127.0.0.1;
the "normal client" connects from 127.0.0.2 (another loopback address, so a
per-client limit on the attacker's address does not apply to it).  Every
socket has a time-out, every attack a bounded count of connections, so a
server that does not answer fails the test instead of hanging it.

Prints one line per check; exit status 0 when every check passed, 1 when
any failed.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SERVER = sys.argv[1]
GROUPS = sys.argv[2:]
PORT = 0
failures = 0


class Server:
    """A tlserverd on a free loopback port: `with Server(args):` sets PORT."""

    def __init__(self, *args):
        self.args = list(args)

    def __enter__(self):
        global PORT
        self.tmp = tempfile.mkdtemp()
        port_file = os.path.join(self.tmp, "port")
        self.log = open(os.path.join(self.tmp, "server.log"), "w+")
        self.proc = subprocess.Popen(
            [SERVER, "--listen", "127.0.0.1:0", "--port-file", port_file, "--db",
             os.path.join(self.tmp, "cache.db"), "--workers", "1", "--log-format", "off"]
            + self.args, stderr=self.log)
        for _ in range(1500):
            if os.path.exists(port_file) or self.proc.poll() is not None:
                break
            time.sleep(0.02)
        if not os.path.exists(port_file):
            self.log.seek(0)
            raise SystemExit("http_attacks.py: the server did not start:\n" + self.log.read())
        PORT = int(open(port_file).read())
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if failures:
            self.log.seek(0)
            sys.stdout.write("---- server log ----\n" + self.log.read()[-4000:])
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


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
    codes = []
    for part in out.split(b"HTTP/1.1 ")[1:]:
        if part[:3].isdigit():
            codes.append(int(part[:3]))
    return codes, closed, time.time() - t0


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


def main():
    for g in GROUPS:
        {"framing": framing}[g]()
    print("http_attacks.py: %s" % ("all passed" if not failures else "%d failed" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
