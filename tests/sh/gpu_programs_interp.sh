#!/bin/sh
# tests/sh/gpu_programs_interp.sh - the interpreter half of the GPU checks
# of top-k and its relatives (tests/gpu/programs/topk.json,
# serial_int_reduce.json, serial_chunk_reduce.json; issue 10) and of the
# math functions, element atomics, bitwise reductions and scans, and if on
# fragment and local values, views (math_fns.json, atomics.json, scans.json,
# if_values.json, views.json; issue
# 13), integer // and % (int_divmod.json, Python's rounding), and
# cluster_reduce across the blocks of clusters of 4, 2 and 1 (cluster_reduce.json,
# the interpreter running each cluster's blocks with rank 0 last), with no GPU:
#   /usr/bin/python3 tests/gpu/check_examples.py --interpret-only --only ...
# runs every such case of tests/gpu/check_examples.py through
# `tlc run --interpret` and compares the outputs with the NumPy references
# there, exactly (values, indices, wrapped int32 sums, TileLang's ties).
# The GPU half runs on a GPU machine (tests/sh/gpu_examples.sh).
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here for the metadata, or no
# NumPy for /usr/bin/python3).
cd "$(dirname "$0")/../.." || exit 1
TLC=${TL_BUILD:-build}/bin/tlc
PY=/usr/bin/python3
if ! "$TLC" targets 2>/dev/null | grep -q '^sm_80 '; then # NVRTC, not just an AMD toolchain
  echo "no NVRTC here: tlc compile --emit meta cannot run" >&2
  exit 77
fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then
  echo "no NumPy for $PY (apt-get install python3-numpy)" >&2
  exit 77
fi
out=$("$PY" tests/gpu/check_examples.py --tlc "$TLC" --interpret-only --only 'tests/gpu/programs/(topk|serial_|math_fns|atomics|scans|if_values|views|int_divmod|cluster_reduce)' 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || { echo "FAIL: check_examples.py --interpret-only exited $rc"; exit 1; }
n=$(printf '%s\n' "$out" | grep -c '^ok .*NumPy reference')
[ "$n" -ge 175 ] || { echo "FAIL: only $n outputs were checked against a NumPy reference (expected at least 175)"; exit 1; }
echo "gpu_programs_interp: ok ($n outputs equal their NumPy references)"
