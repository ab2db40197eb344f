#!/bin/sh
# tests/sh/server_attacks.sh - what an attacker, a slow network and a bad
# client can do to tlserverd: runs tests/attacks/http_attacks.py (ambiguous
# framing, slow clients, slow heads and slow bodies from several addresses
# filling --max-connections, bodies holding --max-body-total at or under
# --min-body-rate, bodies in flight, processes left by a timed-out AMD
# compile, one address's compiles holding the workers, a program of
# 10,000 statements) against servers on free
# loopback ports with small limits, each attack bounded in time and count,
# each checked to get its status while a normal client (from 127.0.0.2)
# still gets 200 from /healthz.
#
# Arguments: the groups of http_attacks.py to run (default: framing slow
# pressure slowbodies budget bodies orphans share size); tests/sh/server_ready.sh runs the "ready" group.
#
# Exit status: 0 pass, 1 fail, 77 skipped (no python3, or a check that cannot
# run here, such as orphans without clang: the last line on stderr says which).

cd "$(dirname "$0")/../.." || exit 1
TL_BUILD=${TL_BUILD:-build}
SERVER=$TL_BUILD/bin/tlserverd
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || { echo "server_attacks.sh: skipped: no python3" >&2; exit 77; }
[ -x "$SERVER" ] || { echo "server_attacks.sh: FAIL: $SERVER not built" >&2; exit 1; }

[ $# -gt 0 ] || set -- framing slow pressure slowbodies budget bodies orphans share size
exec "$PY" tests/attacks/http_attacks.py "$SERVER" "$@"
