#!/bin/sh
# tests/sh/tune.sh - tuning shared by the cluster, with a fake timer (no
# GPU): `tlclient tune` with TL_TUNE_FAKE_TIMES against a real tlserverd on
# loopback, the records it leaves (POST/GET /v1/tunings), and clients that
# pick the recorded variant (tl_client_set_tuning: the example application
# with TL_CLIENT_TUNING, from a fresh local cache).
#
#  1. gemm.json, space block_M x block_N, shape M=N=K=128, check shape 64:
#     every variant compiled through the server and checked in the
#     interpreter; the fake-fastest wins; its record is on the server
#     (GET /v1/tunings/KEY: the constants, the device "fake timer (sm_80)");
#     a new fake timer with another fastest replaces the record
#  2. a client with tuning on (a fresh local cache) gets the winner's build:
#     the same artifact as a compile with the winner's constants; a shape of
#     the same class (M=N=K=100) gets the winner's constants too; without
#     tuning, the program's own constants
#  3. a variant that changes results (a constant k added to the output) is
#     refused by the check even when its fake time is the fastest; a
#     variant that does not compile (block_n=0) is out with the server's
#     error; a variant the fake timer lacks is out, saying so
#  4. the endpoint: a record whose key is not its fields' hash is 400, an
#     unknown key 404, a malformed one 400, a read-only token cannot record
#     (403), a record over 4 KiB is 413
#  5. with --tier (when redis-server can start here): a record posted to one
#     replica is answered by another with its own empty database
#
# Exit status: 0 pass, 1 fail, 77 skipped (no NVRTC: the server cannot
# compile; no curl or python3; or, after everything else passed, no
# redis-server for 5.).

cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
CLIENT=$TL_BUILD/bin/tlclient
APP=$TL_BUILD/bin/tl-example-app
tl_init tune.sh
tl_need curl python3
tl_built "$CLIENT" "$APP" "$TL_BUILD/bin/tlc" "$TL_BUILD/bin/tlserverd"
tl_need_nvrtc "the server cannot compile"
PARTIAL=

WRITER=writer-token-0123456789abcdef
READER=reader-token-0123456789abcdef
printf '%s compile\n%s read\n' "$WRITER" "$READER" >"$TMP/tokens"
chmod 600 "$TMP/tokens"
# start NAME [ARGS...]: a server on its own database; sets URL and PID
start() {
  _n=$1
  shift
  tl_server "$_n" --workers 2 --tokens "$TMP/tokens" "$@"
}
unset TL_CLIENT_TUNING TL_CLIENT_BUNDLE TL_NVRTC
start a
export TL_SERVER=$URL TL_TOKEN=$WRITER TL_CLIENT_CACHE="$TMP/tuner.db"
SHAPE="--shape M=128 --shape N=128 --shape K=128 --check-shape M=64 --check-shape N=64 --check-shape K=64"
DEVICE="fake timer (sm_80)"

# ---- 1. tune with a fake timer ---------------------------------------------------------------------
cat >"$TMP/times1.json" <<'EOF'
{"block_M=64,block_N=64": 3.0, "block_M=64,block_N=128": 1.25, "block_M=128,block_N=64": 2.5, "block_M=128,block_N=128": 1.5}
EOF
TL_TUNE_FAKE_TIMES="$TMP/times1.json" "$CLIENT" tune examples/gemm.json --target sm_80 --space block_M=64,128 \
  --space block_N=64,128 $SHAPE >"$TMP/out" 2>"$TMP/err" && ok || bad "tune: $(cat "$TMP/out" "$TMP/err")"
has "$TMP/err" "tune: examples/gemm.json: 4 variants compiled or found" "tune compiles every variant"
[ "$(grep -c ' ms$' "$TMP/out")" = 4 ] && ok || bad "tune timed other than 4 variants: $(cat "$TMP/out")"
has "$TMP/out" "winner: block_M=64,block_N=128 (1.2500 ms," "the fake-fastest wins"
has "$TMP/out" "on $DEVICE; recorded on $URL as tuning " "the record is on the server"
KEY=$(sed -n 's/.* as tuning \([0-9a-f]*\)$/\1/p' "$TMP/out")
curl -s -H "Authorization: Bearer $READER" "$URL/v1/tunings/$KEY" >"$TMP/rec"
python3 - "$TMP/rec" "$KEY" "$DEVICE" <<'EOF' && ok || bad "the record: $(cat "$TMP/rec")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["key"] == sys.argv[2] and d["device"] == sys.argv[3], d
assert d["constants"] == {"block_M": 64, "block_N": 128} and d["ms"] == 1.25, d
assert d["shape"] == {"K": 128, "M": 128, "N": 128}, d
assert len(d["candidates"]) == 4 and all(c["status"] == "ok" for c in d["candidates"]), d
EOF
cat >"$TMP/times2.json" <<'EOF'
{"block_M=64,block_N=64": 0.5, "block_M=64,block_N=128": 1.25, "block_M=128,block_N=64": 2.5, "block_M=128,block_N=128": 1.5}
EOF
TL_TUNE_FAKE_TIMES="$TMP/times2.json" "$CLIENT" tune examples/gemm.json --target sm_80 --space block_M=64,128 \
  --space block_N=64,128 $SHAPE >"$TMP/out" 2>"$TMP/err" && ok || bad "tune again: $(cat "$TMP/out" "$TMP/err")"
has "$TMP/out" "winner: block_M=64,block_N=64 (0.5000 ms," "a new tuning wins"
has "$TMP/out" "as tuning $KEY" "the same program, shape class and device: the same key"

# ---- 2. clients pick the recorded variant ------------------------------------------------------------
"$CLIENT" compile examples/gemm.json --target sm_80 -D M=128 -D N=128 -D K=128 -D block_M=64 -D block_N=64 >"$TMP/c1" 2>&1
"$CLIENT" compile examples/gemm.json --target sm_80 -D M=100 -D N=100 -D K=100 -D block_M=64 -D block_N=64 >"$TMP/c2" 2>&1
"$CLIENT" compile examples/gemm.json --target sm_80 -D M=128 -D N=128 -D K=128 >"$TMP/c3" 2>&1
ART1=$(awk '{print $6}' "$TMP/c1")
ART2=$(awk '{print $6}' "$TMP/c2")
ART3=$(awk '{print $6}' "$TMP/c3")
[ -n "$ART1" ] && [ "$ART1" != "$ART3" ] && ok || bad "the winner and the default build are one: $(cat "$TMP/c1" "$TMP/c3")"
TL_CLIENT_CACHE="$TMP/node1.db" TL_TOKEN=$WRITER TL_CLIENT_TUNING="$DEVICE" "$APP" --arch 80 --size 128 >"$TMP/app" 2>&1 && ok ||
  bad "the app with tuning: $(cat "$TMP/app")"
has "$TMP/app" "artifact $ART1)" "a node with tuning on gets the winner's build"
TL_CLIENT_CACHE="$TMP/node2.db" TL_TOKEN=$WRITER TL_CLIENT_TUNING="$DEVICE" "$APP" --arch 80 --size 100 >"$TMP/app" 2>&1 && ok ||
  bad "the app with tuning at 100: $(cat "$TMP/app")"
has "$TMP/app" "artifact $ART2)" "a shape of the same class gets the winner's constants"
TL_CLIENT_CACHE="$TMP/node3.db" TL_TOKEN=$WRITER "$APP" --arch 80 --size 128 >"$TMP/app" 2>&1 && ok ||
  bad "the app without tuning: $(cat "$TMP/app")"
has "$TMP/app" "artifact $ART3)" "without tuning: the program's own constants"
TL_CLIENT_CACHE="$TMP/node4.db" TL_TOKEN=$WRITER TL_CLIENT_TUNING="another device (sm_80)" "$APP" --arch 80 --size 128 \
  >"$TMP/app" 2>&1 && ok || bad "the app with an untuned device: $(cat "$TMP/app")"
has "$TMP/app" "artifact $ART3)" "a device without a record: the request as it is"

# ---- 3. variants that are out -------------------------------------------------------------------------------
cat >"$TMP/add_k.json" <<'EOF'
{
  "tlir": 1,
  "name": "add_k",
  "constants": {"block_n": 128, "k": 1},
  "params": [
    {"name": "n", "kind": "scalar", "dtype": "int32"},
    {"name": "a", "kind": "tensor", "dtype": "float32", "shape": ["n"]},
    {"name": "b", "kind": "tensor", "dtype": "float32", "shape": ["n"]}
  ],
  "kernel": {
    "grid": ["ceildiv(n, block_n)"],
    "threads": 128,
    "block_vars": ["bx"],
    "body": [
      {"op": "alloc_fragment", "name": "a_reg", "shape": ["block_n"], "dtype": "float32"},
      {"op": "copy", "src": "a[bx * block_n]", "dst": "a_reg"},
      {"op": "parallel", "vars": ["i"], "extents": ["block_n"], "body": ["a_reg[i] = a_reg[i] + k"]},
      {"op": "copy", "src": "a_reg", "dst": "b[bx * block_n]"}
    ]
  }
}
EOF
cat >"$TMP/times3.json" <<'EOF'
{"k=1,block_n=0": 0.1, "k=1,block_n=64": 2.0, "k=1,block_n=256": 1.0, "k=2,block_n=0": 0.1, "k=2,block_n=64": 0.2}
EOF
TL_TUNE_FAKE_TIMES="$TMP/times3.json" "$CLIENT" tune "$TMP/add_k.json" --target sm_80 --space k=1,2 \
  --space block_n=0,64,256 --arg n=1000 >"$TMP/out" 2>"$TMP/err" && ok || bad "tune add_k: $(cat "$TMP/out" "$TMP/err")"
has "$TMP/out" "winner: k=1,block_n=256 (1.0000 ms," "the fastest sound variant wins"
grep "k=2,block_n=64 " "$TMP/out" >"$TMP/line"
has "$TMP/line" "wrong: tensor b differs from the program's own constants' in the interpreter" "a variant that changes results is out"
grep "k=1,block_n=0 " "$TMP/out" >"$TMP/line"
has "$TMP/line" "compile: " "a variant that does not compile is out"
has "$TMP/line" "a buffer dimension is 0" "with the server's diagnostic"
grep "k=2,block_n=256 " "$TMP/out" >"$TMP/line"
has "$TMP/line" "wrong: " "checked before the fake timer is asked"
echo '{"block_n=64": 2.0}' >"$TMP/times4.json"
TL_TUNE_FAKE_TIMES="$TMP/times4.json" "$CLIENT" tune "$TMP/add_k.json" --target sm_80 --space block_n=64,256 \
  --arg n=1000 >"$TMP/out" 2>"$TMP/err" && ok || bad "tune with a partial fake timer: $(cat "$TMP/out" "$TMP/err")"
has "$TMP/out" "TL_TUNE_FAKE_TIMES has no time for block_n=256" "a variant the fake timer lacks is out, saying so"
TL_TUNE_FAKE_TIMES="$TMP/times4.json" "$CLIENT" tune "$TMP/add_k.json" --target sm_80 --space block_n=0 --arg n=1000 \
  >"$TMP/out" 2>"$TMP/err" && bad "a tune with no sound variant succeeded" || ok
has "$TMP/err" "no variant compiled, passed its check and ran" "no sound variant: exit 1, saying so"
"$CLIENT" tune "$TMP/add_k.json" --space block_n=64 --shape block_n=64 >"$TMP/out" 2>&1; [ $? = 2 ] && ok ||
  bad "a constant both tuned and shape: not a usage error"
TL_TUNE_FAKE_TIMES="$TMP/times4.json" "$CLIENT" tune "$TMP/add_k.json" --space block_n=64 >"$TMP/out" 2>&1; [ $? = 2 ] && ok ||
  bad "the fake timer without --target: not a usage error"

# ---- 4. the endpoint --------------------------------------------------------------------------------------
post() { # BODY TOKEN: the status; the answer in $TMP/post
  curl -s -o "$TMP/post" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -H "Authorization: Bearer $2" --data-binary "$1" "$URL/v1/tunings"
}
REC=$(cat "$TMP/rec")
[ "$(post "$REC" "$READER")" = 403 ] && ok || bad "a read token recorded a tuning: $(cat "$TMP/post")"
[ "$(post "$REC" "$WRITER")" = 200 ] && ok || bad "a sound record: $(cat "$TMP/post")"
BADKEY=$(echo "$REC" | python3 -c 'import json,sys; d=json.load(sys.stdin); d["device"]="other"; print(json.dumps(d))')
[ "$(post "$BADKEY" "$WRITER")" = 400 ] && ok || bad "a record whose key is not its fields' hash: $(cat "$TMP/post")"
has "$TMP/post" "the key is not the SHA-256 of the record's program, shape and device" "why"
[ "$(post '{"key": 1}' "$WRITER")" = 400 ] && ok || bad "a malformed record: $(cat "$TMP/post")"
[ "$(post '{' "$WRITER")" = 400 ] && ok || bad "not JSON: $(cat "$TMP/post")"
BIG=$(echo "$REC" | python3 -c '
import hashlib, json, sys
d = json.load(sys.stdin)
d["candidates"] = [{"variant": "x" * 100, "status": "ok", "ms": 1.0}] * 60
print(json.dumps(d))')
[ "$(post "$BIG" "$WRITER")" = 413 ] && ok || bad "a record over 4 KiB: $(cat "$TMP/post")"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $READER" "$URL/v1/tunings/$(echo "$KEY" | tr 0-9a-f a-f0-9)")
[ "$code" = 404 ] && ok || bad "an unknown tuning: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $READER" "$URL/v1/tunings/xyz")
[ "$code" = 400 ] && ok || bad "a malformed tuning key: $code"

# ---- 5. the Redis tier ---------------------------------------------------------------------------------------
if command -v redis-server >/dev/null 2>&1; then
  RP=$(tl_free_port)
  redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no >"$TMP/redis.log" 2>&1 &
  tl_track $!
  i=0
  until redis-cli -p "$RP" ping >/dev/null 2>&1 || [ $i -gt 250 ]; do i=$((i + 1)); sleep 0.02; done
  if redis-cli -p "$RP" ping >/dev/null 2>&1; then
    start t1 --tier "redis://127.0.0.1:$RP"
    U1=$URL
    start t2 --tier "redis://127.0.0.1:$RP"
    URL=$U1
    [ "$(post "$REC" "$WRITER")" = 200 ] && ok || bad "a record on replica 1: $(cat "$TMP/post")"
    has "$TMP/post" '"tier": true' "the record went to the tier"
    curl -s -H "Authorization: Bearer $READER" "$URL/v1/tunings/$KEY" >/dev/null
    URL2=http://127.0.0.1:$(cat "$TMP/t2.port")
    curl -s -o "$TMP/rec2" -w '%{http_code}' -H "Authorization: Bearer $READER" "$URL2/v1/tunings/$KEY" >"$TMP/code"
    [ "$(cat "$TMP/code")" = 200 ] && cmp -s "$TMP/rec" "$TMP/rec2" && ok ||
      bad "replica 2 does not answer replica 1's record: $(cat "$TMP/code" "$TMP/rec2")"
  else
    PARTIAL="redis-server did not start: the tier's records are not checked"
  fi
else
  PARTIAL="no redis-server: the tier's records are not checked"
fi

tl_done || exit 1
[ -z "$PARTIAL" ] || tl_skip "in part: $PARTIAL"
