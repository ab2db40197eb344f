#!/bin/sh
# tests/sh/client_timeout.sh - tlclient --timeout N bounds every wait of a
# request, the server's Retry-After included.  A small HTTP server on a free
# loopback port (Python's http.server; it stands for a tlserverd that stays
# overloaded) answers every request with 503, Retry-After: 60 and an
# "overloaded" error.  tlclient info and tlclient compile with --timeout 2
# (and the default 4 retries) must give up within 2 s plus a margin of
# 1.5 s, exit 1, and say that the next try would be past the time-out; with
# --timeout 90 the same client waits the 60 s (checked only in its message:
# it is stopped after 3 s).  With several servers (--server A,B: the
# client fails over) the time-out bounds the request across all of them:
# a server that accepts and never answers followed by the 503 server, and
# a closed port followed by it, must give up within the same 3.5 s.
#
# Exit status: 0 pass, 1 fail, 77 skipped (no python3).

cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
CLIENT=$TL_BUILD/bin/tlclient
tl_init client_timeout.sh
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || tl_skip "no python3"
tl_built "$CLIENT"

"$PY" - "$TMP/port" >"$TMP/server.log" 2>&1 <<'PYEOF' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        body = b'{"error": {"code": "overloaded", "message": "busy for a minute"}}\n'
        self.send_response(503)
        self.send_header("Retry-After", "60")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_HEAD = answer
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
import socket
hang = socket.socket()  # accepts connections (the backlog) and never answers
hang.bind(("127.0.0.1", 0))
hang.listen(64)
dead = socket.socket()  # a port that was free: nothing listens there
dead.bind(("127.0.0.1", 0))
open(sys.argv[1] + ".tmp", "w").write("%d %d %d\n" % (srv.server_address[1], hang.getsockname()[1],
                                                      dead.getsockname()[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
PYEOF
tl_track $!
tl_wait_port "$TMP/port" $! "the 503 server" "$TMP/server.log"
read -r PORT HANG DEAD <"$TMP/port"
URL=http://127.0.0.1:$PORT

# within NAME ARGS...: tlclient --timeout 2 ARGS must fail (exit 1) within
# 3.5 s, saying the time-out stopped the retries (SERVERS: --server's list;
# WANT: what the message must say)
SERVERS=$URL
WANT="past the client's time-out of 2.0 s"
within() {
  name=$1
  shift
  t0=$(date +%s.%N)
  timeout -k 5 30 "$CLIENT" --server "$SERVERS" --cache none --timeout 2 "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  echo "$name: exit $rc after $secs s: $(tail -n 1 "$TMP/err")"
  if [ "$rc" -ne 1 ]; then
    bad "$name: exit $rc, want 1 (after $secs s)"
  elif awk -v s="$secs" 'BEGIN { exit !(s > 3.5) }'; then
    bad "$name: took $secs s with --timeout 2 (at most 3.5 s)"
  elif ! grep -q "$WANT" "$TMP/err"; then
    bad "$name: the message does not say the time-out stopped it: $(cat "$TMP/err")"
  else
    ok
  fi
}

within "info" info
within "compile" compile examples/tilus_add_one.json --target sm_80
within "fetch" fetch 0000000000000000000000000000000000000000000000000000000000000000
# several servers: the time-out is the whole request's, across them all
SERVERS=http://127.0.0.1:$DEAD,$URL
within "compile, a closed port then the 503 one" compile examples/tilus_add_one.json --target sm_80
SERVERS=$URL,http://127.0.0.1:$DEAD,$URL
within "info, the 503 one, a closed port, the 503 one" info
# a server that took the request and stays silent gets what is left of the
# time-out, not a time-out of its own (and is not tried again: it may be
# compiling)
SERVERS=$URL,http://127.0.0.1:$HANG
WANT="no answer within the time-out"
within "info, the 503 one then a silent server" info

# with a time-out longer than the Retry-After, the client does wait for it
timeout -k 2 3 "$CLIENT" --server "$URL" --cache none --timeout 90 -v info >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ "$rc" -eq 124 ] && grep -q "in 6[0-9.]* s (the server said Retry-After)" "$TMP/err"; then
  ok
else
  bad "--timeout 90: want a wait of Retry-After's 60 s (stopped after 3 s): exit $rc: $(cat "$TMP/err")"
fi

tl_done
