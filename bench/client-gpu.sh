#!/bin/bash
# bench/client-gpu.sh - the GPU part of issue 5 (libtlclient and tlclient),
# run on a machine with a GPU, NVRTC and the runtime libraries of libcurl,
# jansson and SQLite.  The binaries may be built elsewhere and carried
# (build/bin and build/lib: tl-example-app finds libtlclient.so.0 in
# ../lib).
#
#   bench/client-gpu.sh [--runs N] [--out FILE.md] [--only NAME]
#
#  1. starts tlserverd on a free loopback port with a temporary database;
#  2. `tlclient run EXAMPLE --check` for every example at the sizes of
#     tests/gpu/check_examples.py, through that server: the kernel comes
#     from the server (the exact cubin for this GPU), is launched through
#     libtlclient, and every tensor is compared with the reference
#     interpreter on the same random inputs;
#  3. the example application's start-up, N runs of each (default 5): the
#     time from process start (the wall clock taken by this script just
#     before it starts the process) to the return of the first kernel
#     launch, with
#       both cold    a new server database and a new local cache (the server compiles),
#       warm server  a new local cache, the server already has the build,
#       warm local   the local cache has it (no network);
#     each run also checks the GEMM against the CPU loop.
# Prints a Markdown report (also to FILE with --out) and one log line per
# step; exits 1 if any check failed.
#
# Environment: TL_BUILD (default build).

set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
B=${TL_BUILD:-build}
CLIENT=$B/bin/tlclient
SERVER=$B/bin/tlserverd
APP=$B/bin/tl-example-app
RUNS=5
OUT=
ONLY=
while (($#)); do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    *) echo "usage: bench/client-gpu.sh [--runs N] [--out FILE.md] [--only NAME]" >&2; exit 2 ;;
  esac
done
for b in "$CLIENT" "$SERVER" "$APP"; do
  [[ -x $b ]] || { echo "client-gpu.sh: $b is not built (make)" >&2; exit 2; }
done

WORK=$(mktemp -d)
SPID=
trap '[[ -n $SPID ]] && kill $SPID 2>/dev/null; rm -rf "$WORK"' EXIT
REPORT=$WORK/report.md
nfail=0

start_server() { # start_server DB
  [[ -n $SPID ]] && { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; }
  rm -f "$WORK/port"
  "$SERVER" --listen 127.0.0.1:0 --port-file "$WORK/port" --db "$1" 2>>"$WORK/server.log" &
  SPID=$!
  for _ in $(seq 1500); do
    [[ -s $WORK/port ]] && break
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.02
  done
  [[ -s $WORK/port ]] || { echo "client-gpu.sh: tlserverd did not start:" >&2; cat "$WORK/server.log" >&2; exit 2; }
  export TL_SERVER=http://127.0.0.1:$(cat "$WORK/port")
}

start_server "$WORK/server.db"
GPU=$("$CLIENT" info 2>/dev/null | sed -n 's/^device *//p')
{
  echo "## libtlclient on the GPU: $(date -u +%Y-%m-%d), $GPU"
  echo
  echo "tlclient $("$CLIENT" --version | cut -d' ' -f2), server $TL_SERVER on this machine ($("$CLIENT" info 2>/dev/null | sed -n 's/^toolchain *//p'))."
  echo
  echo "### tlclient run --check (every example against the reference interpreter)"
  echo
  echo "| example | sizes | target | result | worst relative error | get + run |"
  echo "|---|---|---|---|---|---|"
} >"$REPORT"

# example, -D/--arg flags (as tests/gpu/check_examples.py)
FA="-D batch=1 -D heads=2"
CASES=(
  "tilus_add_one|--arg n=1"
  "tilus_add_one|--arg n=129"
  "tilus_add_one|--arg n=1048576"
  "gemm|-D M=256 -D N=256 -D K=256"
  "gemm|-D M=200 -D N=136 -D K=72"
  "gemm|-D M=1024 -D N=1024 -D K=1024"
  "gemm_nt|-D M=256 -D N=256 -D K=256"
  "gemm_nt|-D M=130 -D N=257 -D K=33"
  "gemm_swizzle|-D M=256 -D N=256 -D K=256"
  "gemm_swizzle|-D M=200 -D N=136 -D K=72"
  "dequant_gemm|-D M=256 -D N=256 -D K=256"
  "dequant_gemm|-D M=136 -D N=200 -D K=72"
  "dequant_gemm_threads|-D M=256 -D N=256 -D K=256"
  "tilus_matmul|-D n_size=256 -D k_size=256 --arg m_size=1"
  "tilus_matmul|-D n_size=256 -D k_size=256 --arg m_size=7"
  "tilus_matmul|-D n_size=256 -D k_size=256 --arg m_size=300"
  "tilus_matmul|-D n_size=256 -D k_size=256 --arg m_size=4096"
  "flash_attention|$FA -D seq_len=256 -D dim=128"
  "flash_attention|$FA -D seq_len=256 -D dim=128 -D is_causal=true"
  "flash_attention|$FA -D seq_len=100 -D dim=64 -D block_M=64 -D block_N=64 -D threads=128"
  "flash_attention|$FA -D seq_len=100 -D dim=64 -D block_M=64 -D block_N=64 -D threads=128 -D is_causal=true"
)
echo "== tlclient run --check through $TL_SERVER"
export TL_CLIENT_CACHE=$WORK/run-cache.db
seed=1
for c in "${CASES[@]}"; do
  name=${c%%|*}
  flags=${c#*|}
  [[ -n $ONLY && $name != *$ONLY* ]] && continue
  seed=$((seed + 1))
  # shellcheck disable=SC2086
  "$CLIENT" run "examples/$name.json" $flags --check --seed $seed >"$WORK/run.out" 2>"$WORK/run.err"
  rc=$?
  target=$(sed -n 's/.*, \(sm_[0-9a-z]*\|compute_[0-9a-z]*\) from .*/\1/p' "$WORK/run.err" | head -n 1)
  times=$(sed -n 's/.* from [a-z-]* in \([0-9.]*\) ms) on .* in \([0-9.]*\) ms$/\1 ms + \2 ms/p' "$WORK/run.err" | head -n 1)
  worst=$(sed -n 's/.*rel err \([0-9.e+-]*\).*/\1/p' "$WORK/run.out" | sort -g | tail -n 1)
  if ((rc == 0)) && grep -q "check: passed" "$WORK/run.out"; then
    result=ok
  else
    result="FAIL (exit $rc)"
    nfail=$((nfail + 1))
    { echo "---- $name $flags"; cat "$WORK/run.err" "$WORK/run.out"; } >>"$WORK/failures.log"
  fi
  printf '  %-5s %-22s %-60s %s\n' "${result%% *}" "$name" "$flags" "${target:-?} ${worst:+rel err $worst}"
  echo "| $name | \`$flags\` | ${target:-?} | $result | ${worst:--} | ${times:--} |" >>"$REPORT"
done

# ---- start-up of the example application -------------------------------------------------
echo "== tl-example-app start-up, $RUNS runs per case"
app() { # app CACHE LABEL: one start; appends "LABEL MS SOURCE" to $WORK/startup
  TL_CLIENT_CACHE=$1 TL_START_US=${EPOCHREALTIME/./} "$APP" >"$WORK/app.out" 2>"$WORK/app.err"
  local rc=$? ms src
  ms=$(sed -n 's/^startup_ms=\([0-9.]*\) .*/\1/p' "$WORK/app.out")
  src=$(sed -n 's/^startup_ms=[0-9.]* source=\([a-z-]*\) .*/\1/p' "$WORK/app.out")
  if ((rc != 0)) || [[ -z $ms ]] || ! grep -q "^check: .*: ok$" "$WORK/app.out"; then
    nfail=$((nfail + 1))
    { echo "---- app $2"; cat "$WORK/app.out" "$WORK/app.err"; } >>"$WORK/failures.log"
    echo "  FAIL  $2 (exit $rc)"
    return
  fi
  echo "$2 $ms $src" >>"$WORK/startup"
  printf '  ok    %-12s %8.1f ms  (%s)  %s\n' "$2" "$ms" "$src" "$(sed -n 's/^start-up: [0-9.]* ms from process start to the first launch ([^)]*): //p' "$WORK/app.out")"
}
: >"$WORK/startup"
for r in $(seq "$RUNS"); do
  start_server "$WORK/startup-server-$r.db"   # a new, empty server database
  app "$WORK/local-a-$r.db" "both-cold"       # the server compiles
  app "$WORK/local-b-$r.db" "warm-server"     # a new local cache, the server has the build
  app "$WORK/local-b-$r.db" "warm-local"      # the local cache has it
done
{
  echo
  echo "### tl-example-app start-up (GEMM 1024³ float16; process start to the return of the first launch)"
  echo
  echo "| case | kernel from | runs | median ms | min ms | max ms |"
  echo "|---|---|---|---|---|---|"
  for label in warm-local warm-server both-cold; do
    awk -v l=$label '$1 == l { print $2, $3 }' "$WORK/startup" | sort -g >"$WORK/s.txt"
    n=$(wc -l <"$WORK/s.txt")
    ((n == 0)) && continue
    src=$(awk '{ print $2 }' "$WORK/s.txt" | sort -u | tr '\n' ' ')
    awk -v l=$label -v n="$n" -v src="$src" '{ v[NR] = $1 } END {
      med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
      printf "| %s | %s| %d | %.1f | %.1f | %.1f |\n", l, src, n, med, v[1], v[n] }' "$WORK/s.txt"
  done
  echo
  echo "Each run also checked C = A B against a CPU loop (bound 1e-2 relative)."
} >>"$REPORT"

echo
cat "$REPORT"
[[ -n $OUT ]] && cp "$REPORT" "$OUT"
if ((nfail)); then
  echo
  echo "client-gpu.sh: $nfail failed:"
  cat "$WORK/failures.log"
  exit 1
fi
exit 0
