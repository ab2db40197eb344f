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
# loop for the float max, atom.shared.add).
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
echo "tlc_lang: ok"
