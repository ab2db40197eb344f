#!/bin/bash
# bench/tune_requests.sh - what `tlclient tune` spends on HTTP, one request
# per variant, against what it spends compiling: the measure behind its
# not having a batched endpoint (bench/server.md, "Tuning: one request per
# variant").
#
#   bench/tune_requests.sh [RUNS]   (default 3 runs of the warm cases; one cold)
#
# A fresh tlserverd on loopback (2 workers) and `tlclient tune` of
# examples/gemm.json over block_M=64,128 x block_N=64,128 x num_stages=2,3,4
# (12 variants, each built at the shape and at the check shape: 24 builds)
# with the fake timer (TL_TUNE_FAKE_TIMES, --target sm_80), so that only
# the compile phase and the interpreter's checks run:
#   cold         the server's cache and the client's empty: 24 compiles
#   server-warm  the server has every build, the client's cache is empty:
#                24 compile requests answered from the server's cache (and
#                24 artifact GETs), no compile: all that a batch could save
#   client-warm  the client's cache has every build: no request at all
# Prints each case's wall time, the tuner's compile-phase time, and the
# requests and server-side seconds from /metrics.  Needs NVRTC and a built
# tree (make).

set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
RUNS=${1:-3}
B=${TL_BUILD:-build}
T=$(mktemp -d)
trap 'kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
"$B/bin/tlserverd" --listen 127.0.0.1:0 --port-file "$T/port" --db "$T/server.db" --workers 2 \
  --max-compiles-per-client 0 --log-format off 2>"$T/server.log" &
PID=$!
for _ in $(seq 1 600); do [ -s "$T/port" ] && break; sleep 0.05; done
URL=http://127.0.0.1:$(cat "$T/port")
python3 -c '
import itertools, json
print(json.dumps({"block_M=%d,block_N=%d,num_stages=%d" % v: 1 + v[0] / 100 + v[1] / 1000 + v[2] / 1e4
                  for v in itertools.product([64, 128], [64, 128], [2, 3, 4])}))' >"$T/times.json"

metric() { # metric NAME{LABELS}: its value on the server now
  curl -s "$URL/metrics" | awk -v m="$1" '$1 == m { print $2 }'
}
tune() { # tune CACHE: one tune with the client cache CACHE; prints "wall compile-phase"
  local t0 t1
  t0=$(date +%s.%N)
  TL_SERVER=$URL TL_CLIENT_CACHE=$1 TL_TUNE_FAKE_TIMES=$T/times.json "$B/bin/tlclient" tune examples/gemm.json \
    --target sm_80 --space block_M=64,128 --space block_N=64,128 --space num_stages=2,3,4 \
    --shape M=128 --shape N=128 --shape K=128 --check-shape M=64 --check-shape N=64 --check-shape K=64 \
    >"$T/out" 2>"$T/err"
  t1=$(date +%s.%N)
  echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" \
    "$(sed -n 's/.* compiled or found in \([0-9.]*\) s .*/\1/p' "$T/err")"
}
printf '%-12s %4s %8s %14s %9s %9s %12s %12s\n' case run "wall s" "compile-phase" compiles requests \
  "compile-route" "artifact-route"
row() { # row CASE RUN CACHE
  local c0 r0 s0 a0 res c1 r1 s1 a1
  c0=$(metric 'tlserverd_compiles_total{outcome="ok"}')
  r0=$(metric 'tlserverd_requests_total{route="compile",code="200"}')
  s0=$(metric 'tlserverd_request_seconds_total{route="compile"}')
  a0=$(metric 'tlserverd_request_seconds_total{route="artifacts"}')
  res=$(tune "$3")
  c1=$(metric 'tlserverd_compiles_total{outcome="ok"}')
  r1=$(metric 'tlserverd_requests_total{route="compile",code="200"}')
  s1=$(metric 'tlserverd_request_seconds_total{route="compile"}')
  a1=$(metric 'tlserverd_request_seconds_total{route="artifacts"}')
  # shellcheck disable=SC2086
  set -- "$1" "$2" $res
  printf '%-12s %4s %8s %14s %9s %9s %11.3fs %11.3fs\n' "$1" "$2" "$3" "$4" $((${c1:-0} - ${c0:-0})) \
    $((${r1:-0} - ${r0:-0})) "$(awk "BEGIN { print ${s1:-0} - ${s0:-0} }")" \
    "$(awk "BEGIN { print ${a1:-0} - ${a0:-0} }")"
}
for r in $(seq 1 "$RUNS"); do
  [ "$r" = 1 ] && row cold "$r" "$T/c-cold-$r.db"
  row server-warm "$r" "$T/c-fresh-$r.db"
  row client-warm "$r" "$T/c-fresh-$r.db"
done
