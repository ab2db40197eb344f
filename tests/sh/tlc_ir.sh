#!/bin/sh
# tests/sh/tlc_ir.sh - `tlc compile --emit ir` and `--dump STAGE` show what
# the passes decided (every stage of `tlc compile --help` dumps; range shows
# the ranges and each tensor guard kept or proven, barrier the barriers,
# raster the blocks' order): the GEMM example's gemm on the matrix cores, its tile
# copies as cp.async prefetched by a software-pipelined loop, its fragment
# in registers; wgmma for a gemm of 8 warps and 64-wide K tiles on sm_90a
# (mma.sync elsewhere); FlashAttention's P packed in registers; and a
# wrong stage name and run --target without --device are usage errors.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here).
TLC=${TL_BUILD:-build}/bin/tlc
if ! "$TLC" targets 2>/dev/null | grep -q '^sm_80 '; then # NVRTC, not just an AMD toolchain
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
# wgmma on sm_90a (8 warps, 64-wide K tiles), mma.sync elsewhere
for t in sm_90a sm_90 sm_80; do
  want="[mma.sync m16n8k16]"; [ $t = sm_90a ] && want="[wgmma m64nNk16]"
  ir=$("$TLC" compile bench/programs/gemm_raster.json -D block_K=64 -D threads=256 --target $t --emit ir) ||
    fail "tlc compile gemm_raster for $t"
  printf '%s\n' "$ir" | grep -qF -- "gemm A_shared x B_shared -> C_local $want" || fail "$t: the gemm is not on $want"
done
printf '%s\n' "$ir" | grep -q "wgmma" && fail "sm_80 mentions wgmma"
src=$("$TLC" compile bench/programs/gemm_raster.json -D block_K=64 -D threads=256 --target sm_90a --emit cuda) ||
  fail "tlc compile gemm_raster --emit cuda"
for want in "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" "wgmma.wait_group.sync.aligned 0" \
            "fence.proxy.async.shared::cta" "tl_wgdesc(tl_sb + tl_k * 2048u, 8192u, 1024u)"; do
  printf '%s\n' "$src" | grep -qF -- "$want" || fail "the wgmma source lacks: $want"
done
"$TLC" compile bench/programs/gemm_raster.json -D block_K=64 -D threads=256 --target sm_90a -o "${TMPDIR:-/tmp}/tlc_ir_wg.$$.cubin" 2>/dev/null ||
  fail "the wgmma kernel does not build for sm_90a"
rm -f "${TMPDIR:-/tmp}/tlc_ir_wg.$$.cubin"
# FlashAttention's P: packed pairs of halves in registers, the second gemm's A
ir=$("$TLC" compile examples/flash_attention.json --target sm_90a --emit ir) || fail "tlc compile flash --emit ir"
for want in "alloc acc_s_cast: fragment float16[128, 128] in registers, mma layout, 64 per thread (warps 8x1, tiles 1x16), packed in pairs" \
            "gemm acc_s_cast x V_shared -> acc_o [mma.sync m16n8k16] [A in registers]"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || fail "flash --emit ir lacks: $want"
done
src=$("$TLC" compile examples/flash_attention.json --target sm_90a --emit cuda) || fail "tlc compile flash --emit cuda"
printf '%s\n' "$src" | grep -qF "unsigned r_acc_s_cast[32]; /* pairs of float16 */" || fail "P is not declared as 32 pairs"
printf '%s\n' "$src" | grep -qF "r_acc_s_cast[tl_r / 2] = tl_pair;" || fail "the copy into P does not write pairs"
# P read by a parallel loop as well is not packed (kept as one value per register)
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp/p.json" <<'PY' || fail "could not write the unpacked variant"
import json, sys
p = json.load(open("examples/flash_attention.json"))
body = p["kernel"]["body"][17]["body"]
body.insert(12, {"op": "parallel", "vars": ["i", "j"], "extents": ["block_M", "block_N"],
                 "body": ["acc_s[i, j] = acc_s[i, j] + acc_s_cast[i, j]"]})
json.dump(p, open(sys.argv[1], "w"))
PY
ir=$("$TLC" compile "$tmp/p.json" -D block_N=64 --target sm_90a --emit ir) || fail "tlc compile of the unpacked variant"
printf '%s\n' "$ir" | grep -q "alloc acc_s_cast: .*packed" && fail "P read by a parallel loop was packed"
printf '%s\n' "$ir" | grep -q "alloc acc_s_cast: fragment float16\[128, 64\] in registers" || fail "P left the registers"
printf '%s\n' "$ir" | grep -qF "gemm acc_s_cast x V_shared -> acc_o [mma.sync m16n8k16] [A in registers]" ||
  fail "the unpacked P is not the gemm's A in registers"
dump=$("$TLC" compile examples/gemm.json --target sm_80 --dump place -o /dev/null 2>&1 >/dev/null) || fail "--dump place"
printf '%s\n' "$dump" | grep -qF "# IR after place" || fail "--dump place printed no IR"
printf '%s\n' "$dump" | grep -qF "[cp.async" && fail "--dump place shows cp.async (decided by the later pipeline stage)"
"$TLC" compile examples/gemm.json --target sm_80 --dump lowering >/dev/null 2>&1
[ $? -eq 2 ] || fail "--dump with an unknown stage must exit 2"
"$TLC" run examples/gemm.json --interpret --target sm_75 >/dev/null 2>&1
[ $? -eq 2 ] || fail "run --target without --device must exit 2"
# every stage `tlc compile --help` lists can be dumped, in pipeline order
stages=$("$TLC" compile --help | awk '/^  [a-z]+ /{print $1}')
[ "$(echo $stages)" = "check place pipeline range barrier raster" ] || fail "tlc compile --help lists: $(echo $stages)"
dumps=$(for s in $stages; do "$TLC" compile examples/gemm_swizzle.json --target sm_80 --emit cuda --dump $s 2>&1 >/dev/null |
        head -1; done)
[ "$dumps" = "$(for s in $stages; do echo "# IR after $s"; done)" ] || fail "not every stage dumps: $dumps"
# range: the variables' ranges, and each guard of a tensor access kept or proven
dump=$("$TLC" compile examples/gemm_swizzle.json --target sm_80 --emit cuda --dump range 2>&1 >/dev/null)
for want in "block var bx in [0, 31]" "loop pipelined k in range(0, +128, step 1) num_stages 3 [software pipelined] in [0, 127]" \
            "copy A[(by * 128)+:128 (inside), (k * 32)+:32 (inside)] -> A_shared"; do
  printf '%s\n' "$dump" | grep -qF -- "$want" || fail "--dump range lacks: $want"
done
printf '%s\n' "$dump" | grep -q "^ *barrier" && fail "--dump range shows barriers (decided by the later barrier stage)"
dump=$("$TLC" compile tests/golden/scale_add.json --target sm_80 --emit cuda --dump range 2>&1 >/dev/null)
printf '%s\n' "$dump" | grep -qF "copy x[(bx * 256)+:256 (guard)] -> xr" || fail "a guard of a dynamic shape is not kept"
# barrier: before the gemm that reads B_shared written by the parallel loop
dump=$("$TLC" compile examples/gemm_swizzle.json --target sm_80 --emit cuda --dump barrier 2>&1 >/dev/null)
printf '%s\n' "$dump" | grep -B1 "gemm A_shared x B_shared" | head -1 | grep -q "^ *barrier$" ||
  fail "--dump barrier shows no barrier before the gemm"
printf '%s\n' "$dump" | grep -qF "blocks: " && fail "--dump barrier shows the raster (decided later)"
dump=$("$TLC" compile bench/programs/gemm_raster.json -D block_K=64 -D threads=256 --target sm_90a --emit cuda --dump barrier 2>&1 >/dev/null)
printf '%s\n' "$dump" | grep -qF "barriers: marked 'barrier' below, each after fence.proxy.async" || fail "wgmma's fence is not shown"
# raster: use_swizzle's stripes, or the grid order
dump=$("$TLC" compile examples/gemm_swizzle.json --target sm_80 --emit cuda --dump raster 2>&1 >/dev/null)
printf '%s\n' "$dump" | grep -qF "blocks: rasterized in stripes of 10 block rows" || fail "--dump raster lacks the stripes"
dump=$("$TLC" compile examples/gemm.json --target sm_80 --emit cuda --dump raster 2>&1 >/dev/null)
printf '%s\n' "$dump" | grep -qF "blocks: in grid order" || fail "--dump raster of gemm.json is not the grid order"
"$TLC" compile examples/gemm.json --target sm_80 --dump lowering 2>&1 >/dev/null | grep -qF "the stages are check, place, pipeline, range, barrier and raster" ||
  fail "a wrong --dump does not list the stages"
echo "tlc_ir: ok"
