#!/bin/sh
# tests/sh/tlc_ir.sh - `tlc compile --emit ir` and `--dump STAGE` show what
# the passes decided: the GEMM example's gemm on the matrix cores, its tile
# copies as cp.async prefetched by a software-pipelined loop, its fragment
# in registers; and a wrong stage name is a usage error.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here).
TLC=${TL_BUILD:-build}/bin/tlc
if ! "$TLC" targets >/dev/null 2>&1; then
  echo "no NVRTC here: tlc compile cannot run" >&2
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
ir=$("$TLC" compile examples/gemm.json --target sm_90a --emit ir) || fail "tlc compile --emit ir"
for want in "gemm A_shared x B_shared -> C_local [mma.sync m16n8k16]" \
            "[cp.async, prefetched]" "[software pipelined]" \
            "alloc C_local: fragment float32[128, 128] in registers, mma layout" \
            "alloc A_shared: shared float16[128, 32] in shared memory at 0, 3 stages, swizzled"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || fail "--emit ir lacks: $want"
done
dump=$("$TLC" compile examples/gemm.json --target sm_80 --dump place -o /dev/null 2>&1 >/dev/null) || fail "--dump place"
printf '%s\n' "$dump" | grep -qF "# IR after place" || fail "--dump place printed no IR"
printf '%s\n' "$dump" | grep -qF "[cp.async" && fail "--dump place shows cp.async (decided by the later pipeline stage)"
"$TLC" compile examples/gemm.json --target sm_80 --dump lowering >/dev/null 2>&1
[ $? -eq 2 ] || fail "--dump with an unknown stage must exit 2"
echo "tlc_ir: ok"
