#!/bin/sh
# tests/gpu/bundle_tune.sh - bundles and tuning on a real GPU (the CI halves
# are tests/sh/bundle.sh and tests/sh/tune.sh, without a GPU and with a fake
# timer).  Needs build/bin (tlserverd, tlclient, tl-example-app) built on
# the machine that built the tree, NVRTC and a CUDA GPU.
#
#   sh tests/gpu/bundle_tune.sh [SIZE]      (default 2048: the GEMM's M = N = K)
#
#  1. a server on loopback; `tlclient bundle create` of examples/gemm.json
#     for the GPU's targets at SIZE; the server stopped and NVRTC hidden, the
#     example application starts from the bundle alone (no local cache), runs
#     the kernel on random inputs and checks it against its CPU loop
#  2. the server again; `tlclient tune` of the GEMM's block_M x block_N x
#     num_stages at SIZE (checked at 256 against the interpreter and on the
#     GPU, timed through the launcher), which records the winner; then
#     `tlclient --tuning auto run --check` from a fresh local cache gets the
#     winner's build (-v says "tuning: the record ... adds 3 constants") and
#     checks it against the interpreter
#
# Output on stdout (and $OUT/bundle_tune.log when OUT is set).  Exit status:
# 0 passed, 1 failed, 77 skipped (no GPU or no NVRTC).

ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
cd "$ROOT" || exit 1
B=${TL_BUILD:-build}/bin
SIZE=${1:-2048}
LOG=${OUT:+$OUT/bundle_tune.log}
TMP=$(mktemp -d) || exit 1
PID=
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
say() { echo "$*"; [ -n "$LOG" ] && echo "$*" >>"$LOG"; }
STEP_TIMEOUT=${TL_GPU_STEP_TIMEOUT:-180} # seconds for one step: a hung kernel or server fails it
run() { # a command whose output goes to the log too
  say "\$ $*"
  timeout -k 5 "$STEP_TIMEOUT" "$@" >"$TMP/cmd.out" 2>&1
  rc=$?
  [ $rc -eq 124 ] && say "(killed after $STEP_TIMEOUT s)"
  cat "$TMP/cmd.out"
  [ -n "$LOG" ] && cat "$TMP/cmd.out" >>"$LOG"
  return $rc
}
"$B/tlc" targets >/dev/null 2>&1 || { echo "bundle_tune.sh: skipped: no NVRTC" >&2; exit 77; }
TL_CLIENT_CACHE=none timeout -k 5 "$STEP_TIMEOUT" "$B/tl-example-app" --offline --size 1 >"$TMP/probe" 2>&1
grep -q -e "no GPU here" -e "GPU: no " "$TMP/probe" && { echo "bundle_tune.sh: skipped: $(head -c 300 "$TMP/probe")" >&2; exit 77; }
start() {
  rm -f "$TMP/port"
  "$B/tlserverd" --listen 127.0.0.1:0 --port-file "$TMP/port" --db "$TMP/server.db" --workers 8 2>>"$TMP/server.log" &
  PID=$!
  i=0
  while [ ! -s "$TMP/port" ]; do
    i=$((i + 1))
    [ $i -gt 3000 ] && { echo "bundle_tune.sh: FAIL: the server did not start" >&2; cat "$TMP/server.log" >&2; exit 1; }
    sleep 0.02
  done
  export TL_SERVER=http://127.0.0.1:$(cat "$TMP/port")
}
fail=0

# ---- 1. an offline start from a bundle --------------------------------------------------------------
start
export TL_CLIENT_CACHE="$TMP/build.db"
run "$B/tlclient" bundle create "$TMP/k.tlb" examples/gemm.json --target sm_90a,sm_90,sm_80 \
  -D M=$SIZE -D N=$SIZE -D K=$SIZE || fail=1
run "$B/tlclient" bundle verify "$TMP/k.tlb" || fail=1
kill "$PID"; wait "$PID" 2>/dev/null; PID=
if ! TL_NVRTC=/nonexistent TL_CLIENT_CACHE=none run "$B/tl-example-app" --bundle "$TMP/k.tlb" --offline --size $SIZE; then
  say "FAIL: the application did not start from the bundle" ; fail=1
elif ! grep -q "from bundle" "$TMP/cmd.out"; then
  say "FAIL: the kernel did not come from the bundle"; fail=1
fi

# ---- 2. tune for real, then use the record --------------------------------------------------------------
start
export TL_CLIENT_CACHE="$TMP/tuner.db"
run "$B/tlclient" tune examples/gemm.json --space block_M=64,128 --space block_N=64,128,256 --space num_stages=2,3 \
  --shape M=$SIZE --shape N=$SIZE --shape K=$SIZE --check-shape M=256 --check-shape N=256 --check-shape K=256 || fail=1
grep -q "^winner: " "$TMP/cmd.out" || { say "FAIL: tune recorded no winner"; fail=1; }
export TL_CLIENT_CACHE="$TMP/node.db"
run "$B/tlclient" -v --tuning auto run examples/gemm.json -D M=$SIZE -D N=$SIZE -D K=$SIZE --check || fail=1
grep -q "tuning: the record for examples/gemm.json on .* adds 3 constants" "$TMP/cmd.out" ||
  { say "FAIL: the node did not apply the tuning record"; fail=1; }
say "bundle_tune.sh: $([ $fail = 0 ] && echo passed || echo FAILED)"
exit $fail
