#!/bin/bash
# bench/gpu_session.sh - a GPU session's checks and benchmarks in one call,
# each step under a time-out (a hung kernel fails its step instead of the
# call), every output under $OUT in at most 8 files.
#
#   OUT=DIR bench/gpu_session.sh checks            # every GPU check
#   OUT=DIR bench/gpu_session.sh bench WHAT...     # WHAT: gemm flash w4a16 lowp compile
#
# Run from the repository root on the GPU machine, with the binaries built
# (build/bin, or TL_BIN=DIR) and /opt/torch/.venv/bin/python (or TL_PY).
# `checks` runs tests/gpu/check_examples.py in six parallel parts (the
# parts of session 9's record: gemm examples; W4A16; the gemm programs of
# tests/gpu/programs; its other programs; every other example; the gemm
# examples on the CUDA back end), tests/gpu/ptx_fuzz.py -n 30 beside
# them, then tests/gpu/bundle_tune.sh 2048; it writes $OUT/check.log with
# a summary at its end and exits 1 when any part failed.  `bench` runs
# bench/gpu_bench.py's parts (and bench/compile_bench.py) one after
# another, each into $OUT/bench-WHAT.log and .json.  TL_CHECK_LIMIT and
# TL_BENCH_LIMIT (seconds; 420 and 280) bound each part.
# `compile` starts tlserverd: on a machine without libmicrohttpd and
# libhiredis, unpack Debian's libmicrohttpd12 and libhiredis0.14 (apt-get
# download, dpkg -x DIR) and put DIR/usr/lib/x86_64-linux-gnu on
# LD_LIBRARY_PATH first.
set -u
BIN=${TL_BIN:-build/bin}
PY=${TL_PY:-/opt/torch/.venv/bin/python}
OUT=${OUT:?set OUT to the folder for the results}
mkdir -p "$OUT" || exit 2
[ -x "$BIN/tlc" ] || { echo "gpu_session.sh: $BIN/tlc not built" >&2; exit 2; }
TMP=$(mktemp -d) || exit 2
trap 'rm -rf "$TMP"' EXIT

checks() {
  local L=$OUT/check.log lim=${TL_CHECK_LIMIT:-420} i=0 bad=0
  { date -u; nvidia-smi -L 2>/dev/null; git rev-parse --short HEAD 2>/dev/null || cat COMMIT 2>/dev/null; } >"$L"
  local parts=('^gemm(?!_w4a16)' '^gemm_w4a16' '^[.][.]/tests/gpu/programs/gemm'
               '^[.][.](?!/tests/gpu/programs/gemm)' '^(?!gemm|[.][.])')
  for p in "${parts[@]}"; do
    i=$((i + 1))
    timeout "$lim" "$PY" tests/gpu/check_examples.py --tlc "$BIN/tlc" --timeout 30 --only "$p" >"$TMP/part$i.log" 2>&1 &
  done
  timeout "$lim" "$PY" tests/gpu/check_examples.py --tlc "$BIN/tlc" --timeout 30 --backends cuda \
    --only '^gemm(_fp8|_int8)?$' >"$TMP/part6.log" 2>&1 &
  timeout 300 "$PY" tests/gpu/ptx_fuzz.py --tlc "$BIN/tlc" -n 30 >"$TMP/fuzz.log" 2>&1
  echo "ptx_fuzz exit $?" >>"$TMP/fuzz.log"
  wait
  parts+=('--backends cuda ^gemm(_fp8|_int8)?$')
  for j in 1 2 3 4 5 6; do
    { echo "## part $j: ${parts[$((j - 1))]}"; cat "$TMP/part$j.log"; } >>"$L"
    tail -1 "$TMP/part$j.log" | grep -q ' 0 failed' || bad=1
  done
  { echo "## ptx_fuzz"; tail -5 "$TMP/fuzz.log"; } >>"$L"
  grep -q 'ptx_fuzz exit 0' "$TMP/fuzz.log" || bad=1
  echo "## bundle_tune" >>"$L"
  OUT= TL_BUILD=${BIN%/bin} timeout 200 bash tests/gpu/bundle_tune.sh 2048 >>"$L" 2>&1 || bad=1
  { echo "## summary (exit $bad)"; grep -h -E '^[0-9]+ passed' "$TMP"/part*.log; date -u; } >>"$L"
  return $bad
}

bench() {
  local lim=${TL_BENCH_LIMIT:-280} bad=0 w
  for w in "$@"; do
    case $w in gemm|flash|w4a16|lowp|compile) ;;
      *) echo "gpu_session.sh: unknown bench $w (gemm flash w4a16 lowp compile)" >&2; return 2 ;;
    esac
  done
  for w in "$@"; do
    mkdir -p "$TMP/$w"
    case $w in
      gemm) timeout "$lim" "$PY" bench/gpu_bench.py --tlc "$BIN/tlc" --out "$TMP/$w" --gemm-only ;;
      flash) timeout "$lim" "$PY" bench/gpu_bench.py --tlc "$BIN/tlc" --out "$TMP/$w" --flash-only ;;
      w4a16) timeout "$lim" "$PY" bench/gpu_bench.py --tlc "$BIN/tlc" --out "$TMP/$w" --w4a16-only ;;
      lowp) timeout "$lim" "$PY" bench/gpu_bench.py --tlc "$BIN/tlc" --out "$TMP/$w" --lowp-only ;;
      compile) timeout "$lim" "$PY" bench/compile_bench.py "$TMP/$w" --tlc "$BIN/tlc" --tlserverd "$BIN/tlserverd" \
                 -n 3 --python "$PY" ;;
    esac >"$OUT/bench-$w.log" 2>&1
    local rc=$?
    echo "exit $rc" >>"$OUT/bench-$w.log"
    [ $rc -eq 0 ] || bad=1
    local j
    j=$(ls "$TMP/$w"/*.json 2>/dev/null | head -1)
    [ -n "$j" ] && cp "$j" "$OUT/bench-$w.json"
  done
  return $bad
}

case ${1:-} in
  checks) checks ;;
  bench) shift; bench "$@" ;;
  *) echo "usage: OUT=DIR $0 checks | bench gemm|flash|w4a16|lowp|compile..." >&2; exit 2 ;;
esac
