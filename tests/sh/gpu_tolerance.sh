#!/bin/sh
# tests/sh/gpu_tolerance.sh - the element-by-element comparison that
# tests/gpu/check_examples.py and bench/gpu_bench.py apply on the GPU
# machine (tests/gpu/tolerance.py), checked here on synthetic arrays with
# no GPU: tests/gpu/test_tolerance.py (a float16 gemm summed in other
# orders passes; a wrong 8x8 tile, one element past its bound, an unwritten
# element fail).
#
# Exit status: 0 pass, 1 fail, 77 skipped (no /usr/bin/python3 with numpy).

cd "$(dirname "$0")/../.." || exit 1
PY=/usr/bin/python3
if ! "$PY" -c 'import numpy' 2>/dev/null; then
  echo "gpu_tolerance.sh: skipped: $PY with numpy is missing (apt-get install python3-numpy)" >&2
  exit 77
fi
exec "$PY" tests/gpu/test_tolerance.py
