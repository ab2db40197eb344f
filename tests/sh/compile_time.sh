#!/bin/sh
# tests/sh/compile_time.sh - compile time grows linearly with the program:
# a 2000-statement program (bench/long_program.py: copies, gemms, parallel
# loops, reductions, lets, serial loops, ifs) goes through `tlc check` and
# `tlc compile --emit cuda` (and `--emit hip` where an AMD toolchain is
# found) each within a generous bound, TL_COMPILE_TIME_LIMIT seconds
# (default 10; 0.1-0.2 s on the development machine, bench/compile.md),
# and the source is complete (one kernel, every statement emitted).
# `--emit cuda` stops before NVRTC, so the bound is on our own passes.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here; or no AMD toolchain, after
# the CUDA half passed: the HIP half was not timed).
TLC=${TL_BUILD:-build}/bin/tlc
LIMIT=${TL_COMPILE_TIME_LIMIT:-10}
if ! "$TLC" targets 2>/dev/null | grep -q '^sm_80 '; then # NVRTC, not just an AMD toolchain
  echo "no NVRTC here: tlc compile cannot run" >&2
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
python3 bench/long_program.py 2000 "$tmp/long.json" || fail "bench/long_program.py did not write the program"
# timed NAME COMMAND...: runs COMMAND, fails when it fails or takes more than LIMIT seconds
timed() {
  name=$1
  shift
  t0=$(date +%s.%N)
  "$@" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; fail "$name failed"; }
  t1=$(date +%s.%N)
  s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  echo "$name: $s s (limit $LIMIT s)"
  awk -v s="$s" -v l="$LIMIT" 'BEGIN { exit !(s <= l) }' || fail "$name took $s s, more than $LIMIT s"
}
timed "tlc check, 2000 statements" "$TLC" check "$tmp/long.json"
timed "tlc compile --emit cuda, 2000 statements" "$TLC" compile "$tmp/long.json" --target sm_80 --emit cuda
[ "$(grep -c '__global__' "$tmp/out")" = 1 ] || fail "the source does not hold one kernel"
# every gemm of the program lowers to one mma.sync loop
gemms=$(grep -c '"op": "gemm"' "$tmp/long.json")
[ "$gemms" -gt 100 ] || fail "the program has $gemms gemms"
n=$(grep -c 'mma.sync.aligned.m16n8k16' "$tmp/out")
[ "$n" = "$gemms" ] || fail "the source has $n mma.sync loops, not $gemms"
if "$TLC" targets 2>/dev/null | grep -q '^gfx942 .*[^ ]'; then
  timed "tlc compile --emit hip, 2000 statements" "$TLC" compile "$tmp/long.json" --target gfx942 --emit hip
  n=$(grep -c '__builtin_amdgcn_mfma_f32_16x16x16f16' "$tmp/out")
  [ "$n" = "$gemms" ] || fail "the HIP source has $n MFMA loops, not $gemms"
else
  echo "compile_time.sh: no AMD toolchain offers gfx942 here: the CUDA half passed, --emit hip was not timed" >&2
  exit 77
fi
exit 0
