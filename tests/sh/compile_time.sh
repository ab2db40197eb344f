#!/bin/sh
# tests/sh/compile_time.sh - compile time grows linearly with the program:
# a 2000-statement program (bench/long_program.py: copies, gemms, parallel
# loops, reductions, lets, serial loops, ifs) goes through `tlc check` and
# `tlc compile --emit cuda` (and `--emit hip` where an AMD toolchain is
# found) each within a generous bound, TL_COMPILE_TIME_LIMIT seconds
# (default 10; 0.1-0.2 s on the development machine, bench/compile.md),
# and the source is complete (one kernel, every statement emitted).
# `--emit cuda` stops before NVRTC, so the bound is on our own passes.
# The whole compile of it to a cubin for sm_80 (NVRTC, ptxas) stays within
# TL_COMPILE_TIME_LIMIT_FULL seconds of CPU (default 120; about 20 on the
# development machine, where one kernel of it took 30 s and 4000
# statements 250 s before pass_split.c cut long kernels into regions):
# its metadata says the regions, and the CUDA source has one noinline
# function per region.  Programs cut into regions of two statements (the
# option split_statements) still build.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here; or no AMD toolchain, after
# the CUDA half passed: the HIP half was not timed).
TLC=${TL_BUILD:-build}/bin/tlc
LIMIT=${TL_COMPILE_TIME_LIMIT:-10}
FULL_LIMIT=${TL_COMPILE_TIME_LIMIT_FULL:-120}
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
regions=$(grep -c 'auto tl_region = \[&\]() __noinline__' "$tmp/out")
[ "$regions" -gt 10 ] || fail "the source of 2000 statements has $regions regions (pass_split.c)"
# the whole compile, timed in CPU seconds (the machine is shared: its wall time says little)
python3 - "$TLC" "$tmp/long.json" "$tmp/long.meta" "$FULL_LIMIT" "$regions" <<'PY' || fail "the full compile"
import json, resource, subprocess, sys
tlc, prog, meta, limit, regions = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
r = subprocess.run([tlc, "compile", prog, "--target", "sm_80", "--emit", "meta", "-o", meta], capture_output=True, text=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = ru.ru_utime + ru.ru_stime
if r.returncode != 0:
    sys.exit("tlc compile --target sm_80 of 2000 statements failed: " + r.stderr[-2000:])
print(f"tlc compile --target sm_80, 2000 statements: {cpu:.1f} s of CPU (limit {limit:g} s)")
m = json.load(open(meta))
reg = m.get("regions") or {}
if reg.get("count") != regions or reg.get("statements", 0) < 2000:
    sys.exit(f"the metadata's regions are {m.get('regions')}, not {regions} regions of 2000 statements or more")
if m["backend"] != "cuda":
    sys.exit(f"built by the back end {m['backend']}, not cuda")
if cpu > limit:
    sys.exit(f"the compile took {cpu:.1f} s of CPU, more than {limit:g}")
PY
# the regions' code on real programs (FlashAttention's fragments, views, ifs) cut into regions of two statements
for ex in examples/flash_attention.json tests/gpu/programs/views.json tests/gpu/programs/if_values.json; do
  "$TLC" compile $ex --target sm_80 --options '{"split_statements": 2}' --emit meta -o "$tmp/ex.meta" \
    2>"$tmp/err" || { cat "$tmp/err"; fail "$ex cut into regions does not build"; }
  python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); sys.exit(0 if m.get("regions", {}).get("count", 0) >= 1 else "no regions: %s" % m.get("regions"))' \
    "$tmp/ex.meta" || fail "$ex with split_statements 2 has no regions"
done
"$TLC" compile examples/gemm.json --target sm_80 --options '{"split_statements": 1}' --emit cuda >/dev/null 2>"$tmp/err" &&
  fail "split_statements 1 was accepted"
grep -qF "split_statements is an integer from 2 to 1000000" "$tmp/err" || fail "split_statements 1: $(cat "$tmp/err")"
if "$TLC" targets 2>/dev/null | grep -q '^gfx942 .*[^ ]'; then
  timed "tlc compile --emit hip, 2000 statements" "$TLC" compile "$tmp/long.json" --target gfx942 --emit hip
  n=$(grep -c '__builtin_amdgcn_mfma_f32_16x16x16f16' "$tmp/out")
  [ "$n" = "$gemms" ] || fail "the HIP source has $n MFMA loops, not $gemms"
else
  echo "compile_time.sh: no AMD toolchain offers gfx942 here: the CUDA half passed, --emit hip was not timed" >&2
  exit 77
fi
exit 0
