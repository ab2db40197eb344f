# tests/sh/lib/cluster.sh - what the tests of the shared tier with real Redis
# processes share (sourced by tests/sh/cluster_*.sh, never run alone): the
# checks' counters, the skip when Redis, curl or NVRTC is missing, free
# ports, waiting, and a temporary folder whose processes end with the test.
#
# The sourcing test sets NAME (its file name, for messages) first; after
# it: TMP (removed at exit), PIDS (killed at exit: add every process
# started), ok/bad/check/has, free_port, until_ok, server, body, post, key,
# cached and finish.

TL_BUILD=${TL_BUILD:-build}
for tool in curl redis-server redis-cli python3; do
  command -v $tool >/dev/null 2>&1 || { echo "$NAME: skipped: no $tool" >&2; exit 77; }
done
if ! "$TL_BUILD/bin/tlc" targets 2>/dev/null | grep -q '^sm_80 '; then # NVRTC, not just an AMD toolchain
  echo "$NAME: skipped: no NVRTC here, the server cannot compile" >&2
  exit 77
fi

TMP=$(mktemp -d) || exit 1
PIDS=
cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null; done
  for p in $PIDS; do wait "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT

npass=0
nfail=0
ok() { npass=$((npass + 1)); }
bad() { nfail=$((nfail + 1)); echo "FAIL: $*" >&2; }
check() { if [ "$2" = "$3" ]; then ok; else bad "$1: got '$2', expected '$3'"; fi; }
has() { if grep -qF -- "$2" "$1"; then ok; else bad "$3: no '$2' in: $(head -c 800 "$1")"; fi; }
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
until_ok() { # until_ok SECONDS COMMAND...: true once COMMAND succeeds, tried every 0.1 s
  _n=$(($1 * 10))
  shift
  while ! "$@" >/dev/null 2>&1; do
    _n=$((_n - 1))
    [ $_n -gt 0 ] || return 1
    sleep 0.1
  done
}
# server NAME FLAG...: a tlserverd on a free loopback port with its own
# database $TMP/NAME.db, one worker, its log in $TMP/NAME.log; sets PORT and
# LAST (its pid)
server() {
  _name=$1
  shift
  "$TL_BUILD/bin/tlserverd" --listen 127.0.0.1:0 --port-file "$TMP/$_name.port" --db "$TMP/$_name.db" \
    --workers 1 --log-format off "$@" </dev/null 2>>"$TMP/$_name.log" &
  LAST=$!
  PIDS="$PIDS $LAST"
  until_ok 30 test -s "$TMP/$_name.port" || { cat "$TMP/$_name.log" >&2; bad "server $_name did not start"; exit 1; }
  PORT=$(cat "$TMP/$_name.port")
}
# body NAME: a compile request (tilus_add_one renamed NAME, for sm_80) in $TMP/NAME.req
body() {
  python3 -c "import json,sys; p=json.load(open('examples/tilus_add_one.json')); p['name']=sys.argv[1]; print(json.dumps({'program': p, 'targets': ['sm_80']}))" "$1" >"$TMP/$1.req"
}
# post PORT NAME: compiles NAME; prints the HTTP status, the answer in $TMP/NAME.json
post() {
  curl -s -o "$TMP/$2.json" -w '%{http_code}' -XPOST -H 'Content-Type: application/json' \
    --data-binary "@$TMP/$2.req" "http://127.0.0.1:$1/v1/compile"
}
# key NAME, cached NAME: the build key and "cached" of NAME's answer
key() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][0]['key'])" "$TMP/$1.json"; }
cached() { python3 -c "import json,sys; print(str(json.load(open(sys.argv[1]))['results'][0]['cached']).lower())" "$TMP/$1.json"; }
# the end of every test: the counts, and the exit status
finish() {
  echo "$NAME: $npass checks passed, $nfail failed"
  [ $nfail -eq 0 ]
}
