#!/bin/sh
# tests/sh/client_cli.sh - the tlclient command and the example application
# end to end, against a real tlserverd on a free loopback port with a
# temporary database, with real compiles (NVRTC) and curl as a second client.
#
#  1. --help for every command, usage errors (exit 2), TL_SERVER/--server
#  2. info (and --json)
#  3. compile -o DIR: binaries and metadata written, hashing to the ids the
#     server gave and equal to what curl fetches; failures name the program,
#     the target and the server
#  4. fetch by key, by id, with key:/artifact: prefixes, --meta, to stdout
#  5. prebuild of every example for three targets (--target repeated and as
#     a list): all built, then all hits on the second run; plain lines when
#     not on a terminal, a progress bar on one (through script(1)); a bad
#     program fails the run (exit 1) and is named
#  6. tokens (TL_TOKEN) and HTTPS with --cacert
#  7. the example application fetching its GEMM kernel (--arch: no GPU here)
#  8. the server stopped: fetch, the example application and cache ls work
#     from the local cache; compile fails naming the server
#  9. a damaged local entry: cache verify finds it (exit 1); the next start
#     fetches it again once the server is back; cache gc empties the cache
# 10. run: clean failure without a GPU ("no CUDA driver"), argument errors
#
# Exit status: 0 pass, 1 fail, 77 skipped (no toolchain, curl or sha256sum).

cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
CLIENT=$TL_BUILD/bin/tlclient
SERVER=$TL_BUILD/bin/tlserverd
APP=$TL_BUILD/bin/tl-example-app
TLC=$TL_BUILD/bin/tlc
tl_init client_cli.sh
tl_need curl sha256sum
tl_built "$CLIENT" "$SERVER" "$APP" "$TLC"
tl_need_nvrtc "the server cannot compile"

# start NAME FLAGS...: starts a server; sets PORT and PID (URL is kept)
start() {
  _n=$1
  _u=${URL:-}
  shift
  tl_server "$_n" --workers 2 "$@"
  URL=$_u
}

start main
URL=http://127.0.0.1:$PORT
MAIN_PID=$PID
export TL_CLIENT_CACHE="$TMP/local.db"
unset TL_TOKEN
export TL_SERVER="$URL"

# ---- 1. help and usage ------------------------------------------------------------
for cmd in info compile fetch prebuild run cache; do
  run_client 0 "$cmd --help" "$cmd" --help
  has "$TMP/out" "usage: tlclient $cmd" "$cmd --help"
done
run_client 0 "help run" help run
has "$TMP/out" "--check" "help run"
run_client 0 "--help" --help
has "$TMP/out" "prebuild PATTERN..." "--help"
run_client 2 "no command"
run_client 2 "unknown command" frobnicate
has "$TMP/err" "unknown command 'frobnicate'" "unknown command"
run_client 2 "unknown option" info --frob
run_client 2 "compile without --target" compile examples/gemm.json
has "$TMP/err" "needs --target" "compile without --target"
run_client 2 "fetch takes --target?" fetch --target sm_90 0000
run_client 2 "bad --retries" --retries 99 info
run_client 2 "bad server URL" --server ftp://x info
has "$TMP/err" "http://" "bad server URL"
run_client 2 "bad -D" compile examples/gemm.json --target sm_90 -D M

# ---- 2. info -------------------------------------------------------------------------
run_client 0 "info" info
has "$TMP/out" "$URL" "info names the server"
has "$TMP/out" "NVRTC" "info shows the toolchain"
has "$TMP/out" "local cache  $TMP/local.db" "info shows the local cache"
has "$TMP/out" "device" "info shows the device"
run_client 0 "info --json" info --json
has "$TMP/out" '"name": "tlserverd"' "info --json"
run_client 1 "info, server elsewhere" --server http://127.0.0.1:1 --retries 0 info
has "$TMP/err" "127.0.0.1:1" "info failure names the server"

# ---- 3. compile ----------------------------------------------------------------------
run_client 0 "compile -o" compile examples/tilus_add_one.json --target sm_80,compute_80 -o "$TMP/bin"
has "$TMP/out" "compiled" "the first compile compiles"
for t in sm_80 compute_80; do
  ext=cubin
  [ $t = compute_80 ] && ext=ptx
  f=$TMP/bin/add_one.$t.$ext
  art=$(awk -v t=$t '$1 == t { for (i = 1; i < NF; i++) if ($i == "artifact") print $(i + 1) }' "$TMP/out")
  [ -s "$f" ] && ok || bad "compile -o did not write $f"
  [ "$(sha256sum <"$f" | cut -d' ' -f1)" = "$art" ] && ok || bad "$f does not hash to the artifact id '$art'"
  curl -s -o "$TMP/curl.bin" "$URL/v1/artifacts/$art"
  cmp -s "$TMP/curl.bin" "$f" && ok || bad "$f differs from what curl fetches"
  has "$TMP/bin/add_one.$t.json" '"entry":"add_one"' "metadata of $t"
done
KEY=$(awk '$1 == "sm_80" { print $4 }' "$TMP/out")
ART=$(awk '$1 == "sm_80" { print $6 }' "$TMP/out")
run_client 0 "compile again" compile examples/tilus_add_one.json --target sm_80 --target compute_80
[ "$(grep -c ' hit ' "$TMP/out")" = 2 ] && ok || bad "the second compile was not two hits: $(cat "$TMP/out")"
printf '{"tlir": 1, "name": "broken", "params": [], "kernel": {"grid": ["zz"], "threads": 32, "block_vars": ["bx"], "body": []}}' >"$TMP/broken.json"
run_client 1 "compile an invalid program" compile "$TMP/broken.json" --target sm_90
has "$TMP/err" "broken.json" "the error names the program"
has "$TMP/err" "sm_90" "the error names the target"
has "$TMP/err" "$URL" "the error names the server"
has "$TMP/err" "/program/kernel/grid/0" "the error carries the diagnostic"
run_client 1 "compile for an unknown target" compile examples/tilus_add_one.json --target sm_999
has "$TMP/err" "not offered" "unknown target"
printf '{"tlir": 1,' >"$TMP/notjson.json"
run_client 1 "compile malformed JSON" compile "$TMP/notjson.json" --target sm_90
has "$TMP/err" "not valid JSON" "malformed JSON is refused locally"

# ---- 4. fetch ------------------------------------------------------------------------
run_client 0 "fetch by key" fetch "$KEY" -o "$TMP/k.bin" --meta "$TMP/k.json"
[ "$(sha256sum <"$TMP/k.bin" | cut -d' ' -f1)" = "$ART" ] && ok || bad "fetch by key: wrong bytes"
has "$TMP/k.json" '"target":"sm_80"' "fetch --meta"
run_client 0 "fetch by artifact id" fetch "$ART" -o "$TMP/a.bin"
cmp -s "$TMP/a.bin" "$TMP/k.bin" && ok || bad "fetch by id differs from fetch by key"
run_client 0 "fetch key:" fetch "key:$KEY" -o "$TMP/k2.bin"
run_client 1 "fetch key: with an id" fetch "key:$ART"
run_client 0 "fetch artifact:" fetch "artifact:$ART" -o "$TMP/a2.bin"
"$CLIENT" fetch "$ART" >"$TMP/stdout.bin" 2>"$TMP/err" && cmp -s "$TMP/stdout.bin" "$TMP/k.bin" && ok ||
  bad "fetch to standard output"
run_client 1 "fetch unknown" fetch 1111111111111111111111111111111111111111111111111111111111111111 -o "$TMP/x"
has "$TMP/err" "neither the local cache nor the server" "fetch unknown"
run_client 2 "fetch a bad id" fetch 12345 -o "$TMP/x"

# ---- 5. prebuild ---------------------------------------------------------------------
NEX=$(ls examples/*.json | wc -l)
run_client 0 "prebuild" prebuild examples --target sm_80 --target sm_90,compute_80 --jobs 4
N=$((NEX * 3))
has "$TMP/out" "prebuild: $N builds ($NEX programs x 3 targets)" "prebuild summary"
[ "$(grep -c '^ok ' "$TMP/out")" = "$N" ] && ok || bad "prebuild did not print $N ok lines: $(cat "$TMP/out")"
run_client 0 "prebuild again" prebuild examples --target sm_80,sm_90,compute_80
has "$TMP/out" "$N hits, 0 compiled, 0 failed" "the second prebuild is all hits"
mkdir -p "$TMP/tree/sub"
cp examples/tilus_add_one.json "$TMP/tree/sub/"
cp "$TMP/broken.json" "$TMP/tree/"
echo "not a program" >"$TMP/tree/README.md"
run_client 1 "prebuild with a bad program" prebuild "$TMP/tree" --target sm_80,sm_90
has "$TMP/out" "2 hits, 0 compiled, 2 failed" "prebuild counts the failures"
has "$TMP/out" "broken.json" "prebuild names the failed program"
if command -v script >/dev/null 2>&1; then
  script -qc "'$CLIENT' prebuild examples/gemm.json examples/gemm_nt.json --target sm_80,sm_90" "$TMP/tty.log" \
    >/dev/null 2>&1 </dev/null
  has "$TMP/tty.log" "[##############################] 4/4" "the progress bar on a terminal"
  has "$TMP/tty.log" "4 hits, 0 compiled, 0 failed" "the summary on a terminal"
fi

# ---- 6. tokens and HTTPS ------------------------------------------------------------------
cat >"$TMP/tokens" <<EOF
read-token-0123456789abcdef read
compile-token-0123456789abcdef compile
EOF
chmod 600 "$TMP/tokens" # the server refuses tokens others can read
TLS=0
if command -v openssl >/dev/null 2>&1 &&
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$TMP/key.pem" \
    -out "$TMP/cert.pem" -days 2 -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    >"$TMP/openssl.log" 2>&1; then
  TLS=1
  start auth --tokens "$TMP/tokens" --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem"
  AURL=https://localhost:$PORT
  CA="--cacert $TMP/cert.pem"
else
  start auth --tokens "$TMP/tokens"
  AURL=http://127.0.0.1:$PORT
  CA=
fi
AUTH_PID=$PID
TL_SERVER=$AURL run_client 1 "no token" $CA --cache none compile examples/tilus_add_one.json --target sm_80
has "$TMP/err" "token" "no token"
TL_SERVER=$AURL TL_TOKEN=wrong-token-0123456789abcdef run_client 1 "wrong token" $CA --cache none \
  compile examples/tilus_add_one.json --target sm_80
has "$TMP/err" "token" "wrong token"
TL_SERVER=$AURL TL_TOKEN=read-token-0123456789abcdef run_client 1 "read token compiling" $CA --cache none \
  compile examples/tilus_add_one.json --target sm_80
has "$TMP/err" "scope" "a read token cannot compile"
TL_SERVER=$AURL TL_TOKEN=compile-token-0123456789abcdef run_client 0 "compile token" $CA --cache none \
  compile examples/tilus_add_one.json --target sm_80
run_client 0 "--token beats TL_TOKEN" --server "$AURL" $CA --token read-token-0123456789abcdef --cache none info
if [ $TLS = 1 ]; then
  run_client 1 "an untrusted certificate" --server "$AURL" --token read-token-0123456789abcdef --retries 0 info
  has "$TMP/err" "$AURL" "the TLS failure names the server"
fi
tl_stop "$AUTH_PID"

# ---- 7. the example application -------------------------------------------------------
"$APP" --arch 90 --size 128 >"$TMP/app.out" 2>"$TMP/app.err" && ok || bad "example app: $(cat "$TMP/app.err")"
has "$TMP/app.out" "kernel matmul for sm_90a" "example app target (sm_90a on a 9.0 GPU: wgmma)"
has "$TMP/app.out" "from compiled" "example app, first start"
"$APP" --arch 90 --size 128 >"$TMP/app.out" 2>"$TMP/app.err" && ok || bad "example app again: $(cat "$TMP/app.err")"
has "$TMP/app.out" "from local" "example app, warm start"
TL_CLIENT_CACHE=$TMP/other.db "$APP" --arch 90 --size 128 >"$TMP/app.out" 2>&1 && ok || bad "example app, other cache"
has "$TMP/app.out" "from server-cache" "example app, cold local cache, warm server"
"$APP" >"$TMP/app.out" 2>"$TMP/app.err"
rc=$?
if grep -q "no CUDA" "$TMP/app.err"; then
  [ $rc = 1 ] && ok || bad "example app without a GPU: exit $rc"
fi

# ---- 8. the server stopped --------------------------------------------------------------
tl_stop "$MAIN_PID"
run_client 0 "fetch offline" --retries 0 fetch "$KEY" -o "$TMP/k3.bin"
cmp -s "$TMP/k3.bin" "$TMP/k.bin" && ok || bad "offline fetch: wrong bytes"
has "$TMP/err" "local cache" "offline fetch says where from"
run_client 0 "fetch an artifact id offline" --retries 0 fetch "$ART" -o "$TMP/a3.bin"
cmp -s "$TMP/a3.bin" "$TMP/k.bin" && ok || bad "offline fetch by id: wrong bytes"
run_client 1 "fetch unknown offline" --retries 0 fetch 2222222222222222222222222222222222222222222222222222222222222222 -o "$TMP/x"
has "$TMP/err" "cannot reach the server" "fetch unknown offline says the server is away"
"$APP" --arch 90 --size 128 >"$TMP/app.out" 2>"$TMP/app.err" && ok || bad "offline app: $(cat "$TMP/app.err")"
has "$TMP/app.out" "from local" "the example app starts offline"
run_client 1 "compile offline" --retries 1 compile examples/gemm.json --target sm_90
has "$TMP/err" "cannot reach the server" "compile offline"
has "$TMP/err" "$URL" "compile offline names the server"
run_client 1 "--offline" --offline compile examples/gemm.json --target sm_90
has "$TMP/err" "offline" "--offline"
run_client 0 "cache ls offline" cache ls
has "$TMP/out" "$KEY" "cache ls lists the build"
has "$TMP/out" "request" "cache ls shows request entries"
has "$TMP/out" "matmul" "cache ls names kernels"
run_client 0 "cache verify" cache verify
has "$TMP/out" "0 damaged" "cache verify on a sound cache"

# ---- 9. a damaged entry -------------------------------------------------------------------
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
"$PY" - "$TMP/local.db" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
# every binary (the application's GEMM among them): same size, other bytes
n = db.execute("UPDATE artifacts SET bytes = zeroblob(size)").rowcount
db.commit()
sys.exit(0 if n > 0 else 1)
EOF
[ $? = 0 ] && ok || bad "could not damage the local cache"
run_client 1 "cache verify finds the damage" cache verify
has "$TMP/out" "damaged (deleted with their entries)" "cache verify"
start main2
export TL_SERVER=http://127.0.0.1:$PORT
# the damaged entries are gone: the app fetches its kernel again, from the server (its database is new: compiled)
"$APP" --arch 90 --size 128 >"$TMP/app.out" 2>"$TMP/app.err" && ok || bad "app after damage: $(cat "$TMP/app.err")"
has "$TMP/app.out" "from compiled" "the damaged kernel is fetched again"
"$APP" --arch 90 --size 128 >"$TMP/app.out" 2>&1 && ok || bad "app, healed"
has "$TMP/app.out" "from local" "healed"
run_client 0 "cache gc" cache gc --max-bytes 0
has "$TMP/out" "0 entries" "cache gc --max-bytes 0 empties the cache"
run_client 2 "cache gc bad size" cache gc --max-bytes 12X
run_client 2 "cache bad sub-command" cache frob

# ---- 10. run ---------------------------------------------------------------------------------
run_client 2 "run without a scalar" run examples/tilus_add_one.json
has "$TMP/err" "--arg n=VALUE" "run names the missing scalar"
run_client 2 "run with a misspelt scalar" run examples/tilus_matmul.json --arg m_sise=4
has "$TMP/err" "did you mean 'm_size'" "run suggests the name"
run_client 2 "run with a tensor as a scalar" run examples/tilus_add_one.json --arg n=4 --arg a=1
has "$TMP/err" "is a tensor" "run: a tensor given as a scalar"
run_client 2 "run with two targets" run examples/tilus_add_one.json --arg n=4 --target sm_80,sm_90
"$CLIENT" run examples/tilus_add_one.json --arg n=1000 --check >"$TMP/out" 2>"$TMP/err"
rc=$?
if grep -q "no CUDA" "$TMP/err"; then
  [ $rc = 1 ] && ok || bad "run without a GPU: exit $rc"
  has "$TMP/err" "tilus_add_one.json" "run names the program"
elif [ $rc = 0 ]; then
  has "$TMP/out" "check: passed" "run --check on the GPU here"
else
  bad "run --check: exit $rc: $(cat "$TMP/err")"
fi

tl_done
