#!/bin/sh
# tests/sh/tlc_lang.sh - the language features added for TileLang's kernels
# (issue 13) through both back ends: tests/gpu/programs/math_fns.json (erf,
# sin, cos, tan, log1p, expm1, log10, trunc, clamp, isnan, isinf) and
# atomics.json (element atomic add, max and min on global and shared
# memory, with the previous value) and scans.json (bitand, bitor and bitxor
# reductions, cummax and cummin) compile to cubin for sm_90a and sm_80
# with no spills and, where clang or hiprtc is here, to HSACO for gfx90a
# and gfx1100 (the HIP prelude's own float64 math functions and atomics, as
# the AMD toolchain has no device library here); the PTX of atomics.json
# holds the atomic instructions (atom.global.add, atom.global.min, a CAS
# loop for the float max, atom.shared.add); print and device_assert in the
# interpreter (one line per thread or iteration, a failed assertion's
# error) and in the PTX (vprintf, trap), and refused by AMD targets.
# The interpreter's results are checked against NumPy by
# gpu_programs_interp.sh.  Exit 0 pass, 1 fail, 77 skip (no NVRTC here).
TLC=${TL_BUILD:-build}/bin/tlc
if ! "$TLC" targets 2>/dev/null | grep -q '^sm_80 '; then
  echo "no NVRTC here: tlc compile cannot run" >&2
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT

for prog in tests/gpu/programs/math_fns.json tests/gpu/programs/atomics.json tests/gpu/programs/scans.json; do
  for t in sm_90a sm_80; do
    "$TLC" compile "$prog" --target "$t" --emit ptx -o "$tmp/k.ptx" 2>"$tmp/err" || fail "$prog $t: $(cat "$tmp/err")"
    case $prog in *atomics*)
      for want in atom.global.add atom.global.min atom.global.cas atom.shared.add; do
        grep -q "$want" "$tmp/k.ptx" || fail "$prog $t: the PTX lacks $want"
      done ;;
    esac
    meta=$("$TLC" compile "$prog" --target "$t" --emit meta) || fail "$prog $t: --emit meta"
    spills=$(printf '%s\n' "$meta" | python3 -c 'import json, sys; r = json.load(sys.stdin)["resources"]; print(r["spill_store_bytes"] + r["spill_load_bytes"])')
    [ "$spills" = 0 ] || fail "$prog $t: $spills bytes of spills"
    echo "ok $prog $t"
  done
  for t in gfx90a gfx1100; do
    if ! "$TLC" targets 2>/dev/null | grep -q "^$t "; then
      echo "SKIP  $prog $t: no AMD toolchain here"
      continue
    fi
    "$TLC" compile "$prog" --target "$t" -o "$tmp/k.hsaco" 2>"$tmp/err" || fail "$prog $t: $(cat "$tmp/err")"
    echo "ok $prog $t"
  done
done
# print and device_assert: the interpreter prints one line per thread or
# iteration and stops at a failed assertion (exit 1, the statement's
# pointer); the PTX calls vprintf and traps; the AMD code object has
# clang's buffered printf: the hidden printf buffer argument and the formats
# (amdhsa.printf) for the HIP runtime, which prints them after the kernel
cat > "$tmp/pa.json" <<'EOF2'
{"tlir": 1, "name": "pa", "params": [
  {"name": "X", "kind": "tensor", "dtype": "int32", "shape": [8]},
  {"name": "lim", "kind": "scalar", "dtype": "int32"}],
 "kernel": {"grid": [2], "threads": 4, "block_vars": ["bx"], "body": [
  {"op": "parallel", "vars": ["i"], "extents": [4], "body": [
    {"op": "print", "value": "X[bx * 4 + i] * 10", "msg": "x*10 ="},
    {"op": "device_assert", "cond": "X[bx * 4 + i] < lim", "msg": "x below lim"}]}]}}
EOF2
python3 -c 'import struct, sys; sys.stdout.buffer.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", 118) + b"{\x27descr\x27: \x27<i4\x27, \x27fortran_order\x27: False, \x27shape\x27: (8,), }".ljust(117) + b"\n" + struct.pack("<8i", *range(8)))' > "$tmp/x.npy"
out=$("$TLC" run "$tmp/pa.json" --interpret --in X="$tmp/x.npy" --arg lim=100 2>&1) || fail "print: $out"
[ "$(printf '%s\n' "$out" | grep -c '^print at /kernel/body/0/body/0; in block')" = 8 ] || fail "print: not 8 lines: $out"
printf '%s\n' "$out" | grep -qF 'in block (1, 0, 0), iteration (i=3) of the parallel loop at /kernel/body/0: x*10 = 70' ||
  fail "print: no line for block 1, i = 3: $out"
out=$("$TLC" run "$tmp/pa.json" --interpret --in X="$tmp/x.npy" --arg lim=5 2>&1) && fail "a failed device_assert exits 0"
printf '%s\n' "$out" | grep -qF "pa.json:/kernel/body/0/body/1/cond:1: error: device_assert failed: x below lim; in block (1, 0, 0), iteration (i=1)" ||
  fail "device_assert: $out"
"$TLC" compile "$tmp/pa.json" --target sm_80 --emit ptx -o "$tmp/pa.ptx" || fail "print: sm_80"
grep -q vprintf "$tmp/pa.ptx" && grep -q 'trap;' "$tmp/pa.ptx" || fail "print: the PTX lacks vprintf or trap"
if "$TLC" targets 2>/dev/null | grep -q "^gfx90a "; then
  "$TLC" compile "$tmp/pa.json" --target gfx90a -o "$tmp/pa.hsaco" || fail "print: gfx90a"
  grep -aq hidden_printf_buffer "$tmp/pa.hsaco" && grep -aq amdhsa.printf "$tmp/pa.hsaco" ||
    fail "print: the gfx90a code object has no printf buffer argument or formats"
  grep -aqF '[block (%d, %d, %d), thread (%d, %d, %d)]: x*10 = %lld' "$tmp/pa.hsaco" ||
    fail "print: the gfx90a code object lacks the print's format"
  grep -aqF 'device_assert failed at /kernel/body/0/body/1 [block' "$tmp/pa.hsaco" ||
    fail "print: the gfx90a code object lacks the device_assert's format"
fi
echo "ok print and device_assert"
echo "tlc_lang: ok"
