#!/bin/sh
# bench/interp-gemm.sh - times the reference interpreter on the README GEMM:
#
#   build/bin/tlc run examples/gemm.json --interpret -D M=256 -D N=256 -D K=256
#
# with random float16 inputs A [M, K] and B [K, N] (made with /usr/bin/python3
# and numpy, seed 1), over RUNS runs (default 7), and prints every run's
# wall time, then the minimum and the median.  The first run also checks
# the result against numpy (relative error of C, float16 tolerance 1e-2).
# Nothing is written outside a temporary directory.
#
#   sh bench/interp-gemm.sh [RUNS]          (from anywhere; needs `make build/bin/tlc`)
#
# Environment: TL_BUILD (default build), M, N, K (default 256 each).
# Exit status: 0 success, 1 failure, 77 skipped (no /usr/bin/python3 with numpy).

PY=/usr/bin/python3
cd "$(dirname "$0")/.." || exit 1
TLC=${TL_BUILD:-build}/bin/tlc
RUNS=${1:-7}
M=${M:-256}
N=${N:-256}
K=${K:-256}

if [ ! -x "$TLC" ]; then
  echo "interp-gemm.sh: $TLC not built (make $TLC)" >&2
  exit 1
fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then
  echo "interp-gemm.sh: skipped: $PY with numpy not found" >&2
  exit 77
fi
case "$RUNS" in
  '' | *[!0-9]* | 0) echo "interp-gemm.sh: RUNS must be a positive integer" >&2; exit 1 ;;
esac

TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM

"$PY" - "$TMP" "$M" "$N" "$K" <<'EOF' || exit 1
import sys
import numpy as np
d, m, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(1)
np.save(d + "/A.npy", rng.uniform(-1, 1, (m, k)).astype(np.float16))
np.save(d + "/B.npy", rng.uniform(-1, 1, (k, n)).astype(np.float16))
EOF

i=0
: >"$TMP/times"
while [ "$i" -lt "$RUNS" ]; do
  start=$("$PY" -c 'import time; print(time.perf_counter_ns())')
  if ! "$TLC" run examples/gemm.json --interpret -D "M=$M" -D "N=$N" -D "K=$K" \
      --in "A=$TMP/A.npy" --in "B=$TMP/B.npy" --out "C=$TMP/C.npy"; then
    echo "interp-gemm.sh: tlc failed" >&2
    exit 1
  fi
  end=$("$PY" -c 'import time; print(time.perf_counter_ns())')
  echo $(( (end - start) / 1000 )) >>"$TMP/times"
  if [ "$i" -eq 0 ]; then
    "$PY" - "$TMP" <<'EOF' || { echo "interp-gemm.sh: wrong result" >&2; exit 1; }
import sys
import numpy as np
d = sys.argv[1]
a = np.load(d + "/A.npy").astype(np.float64)
b = np.load(d + "/B.npy").astype(np.float64)
c = np.load(d + "/C.npy").astype(np.float64)
ref = (a @ b).astype(np.float16).astype(np.float64)
err = np.linalg.norm(c - ref) / np.linalg.norm(ref)
print("check: relative error %.3g" % err)
sys.exit(0 if err < 1e-2 else 1)
EOF
  fi
  i=$((i + 1))
done

"$PY" - "$TMP/times" "$M" "$N" "$K" <<'EOF'
import sys
t = sorted(int(x) / 1e6 for x in open(sys.argv[1]).read().split())
print("runs (s): " + " ".join("%.3f" % x for x in t))
med = t[len(t) // 2] if len(t) % 2 else (t[len(t) // 2 - 1] + t[len(t) // 2]) / 2
print("interp gemm M=%s N=%s K=%s: min %.3f s, median %.3f s over %d runs" % (sys.argv[2], sys.argv[3], sys.argv[4], t[0], med, len(t)))
EOF
