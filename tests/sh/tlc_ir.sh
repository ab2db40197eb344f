#!/bin/sh
# tests/sh/tlc_ir.sh - `tlc compile --emit ir` and `--dump STAGE` show what
# the passes decided (every stage of `tlc compile --help` dumps; range shows
# the ranges and each tensor guard kept or proven, barrier the barriers,
# raster the blocks' order): the GEMM example's gemm on the matrix cores, its tile
# copies as cp.async prefetched by a software-pipelined loop, its fragment
# in registers; wgmma on sm_90a for gemm.json as written and every float16/
# bfloat16 tile shape it serves, with one wgmma-group in flight across K
# tiles (mma.sync elsewhere), and why not where it cannot;
# FlashAttention's P packed in registers; a program of several kernels
# printed kernel by kernel (one module, an entry point each), and a layout
# on a global tensor shown ignored; and a
# wrong stage name and run --target without --device are usage errors.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here).
TLC=${TL_BUILD:-build}/bin/tlc
if ! "$TLC" targets 2>/dev/null | grep -q '^sm_80 '; then # NVRTC, not just an AMD toolchain
  echo "no NVRTC here: tlc compile cannot run" >&2
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
ir=$("$TLC" compile examples/gemm.json --target sm_80 --emit ir) || fail "tlc compile --emit ir"
for want in "gemm A_shared x B_shared -> C_local [mma.sync m16n8k16]" \
            "[cp.async, prefetched]" "[software pipelined] [3 stages, copies 2 ahead]" \
            "alloc C_local: fragment float32[128, 128] in registers, mma layout" \
            "alloc A_shared: shared float16[128, 32] in shared memory at 0, 3 stages, swizzled"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || fail "--emit ir lacks: $want"
done
# examples/gemm.json as written (4 warps, 128 x 128 x 32) on wgmma on sm_90a: two m64n128 instructions per
# warpgroup and k16 step (a warp holds rows of both: the row tiles interleave), A's 32-wide rows in the 64-byte
# swizzle (a TMA copy too) with one K tile a stage (k_group 1: bench/programs/gemm_raster.json; as written the
# stage holds two, tests/sh/tlc_kgroup.sh), one wgmma-group left in flight across K tiles (one stage more,
# copies still 2 ahead), drained at the end
ir=$("$TLC" compile bench/programs/gemm_raster.json -D k_group=1 --target sm_90a --emit ir) ||
  fail "tlc compile gemm.json sm_90a --emit ir"
for want in "gemm A_shared x B_shared -> C_local [wgmma m64nNk16] [2 x m64n128 per warpgroup and k16 step, wait_group 1" \
            "[software pipelined] [4 stages, copies 2 ahead, wgmma groups drained at the end]" \
            "alloc C_local: fragment float32[128, 128] in registers, mma layout, 128 per thread (warps 4x1, tiles 2x16, row tiles interleaved)" \
            "alloc A_shared: shared float16[128, 32] in shared memory at 0, 4 stages, swizzled"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || fail "gemm.json on sm_90a: --emit ir lacks: $want"
done
src=$("$TLC" compile bench/programs/gemm_raster.json -D k_group=1 --target sm_90a --emit cuda) ||
  fail "tlc compile gemm.json sm_90a --emit cuda"
for want in "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" "wgmma.commit_group.sync.aligned;\n\twgmma.wait_group.sync.aligned 1;" \
            "wgmma.wait_group.sync.aligned 0;" "wgmma.fence.sync.aligned;" \
            "tl_da0 = tl_wgdesc(tl_sa + (tl_wr) * 64u + (unsigned)(0) * 32u, 16u, 512u, 2u)" \
            "tl_da = tl_da0 + (unsigned long long)(((64u) * 64u + (unsigned)(tl_k) * 32u) >> 4)" \
            "tl_db0 = tl_wgdesc(tl_sb, 4096u, 1024u, 1u)" "tl_db = tl_db0 + (unsigned long long)((tl_k * 2048u) >> 4)" \
            "cp.async.bulk.tensor.2d"; do
  printf '%s\n' "$src" | grep -qF -- "$want" || fail "gemm.json's wgmma source lacks: $want"
done
# the wait for 0 comes after the K loop, before its barrier, and nowhere inside it
printf '%s\n' "$src" | awk '/wgmma.wait_group.sync.aligned 0;/{z=NR} /wgmma.wait_group.sync.aligned 1;/{o=NR} END{exit !(o && z > o)}' ||
  fail "gemm.json: wait_group 0 is not after the K loop's wait_group 1"
# persistent and warp-specialized: no block barrier after the K loop or between tiles (pass_barrier.c), and
# the epilogue in 8-byte chunks, lane pairs exchanging halves (whole 32-byte sectors a quad)
printf '%s\n' "$src" | grep -q "bar.sync" && fail "gemm_raster: a block barrier after the K loop or between tiles"
printf '%s\n' "$src" | grep -qF "__shfl_xor_sync(0xffffffffu, tl_s, 1);" || fail "gemm_raster: no lane-pair exchange"
printf '%s\n' "$src" | grep -qF "if (true) *(uint2 *)&tl_gp[" || fail "gemm_raster: the epilogue stores no 8-byte chunks"
meta=$("$TLC" compile examples/gemm.json --target sm_90a --emit meta) || fail "gemm.json does not build for sm_90a"
printf '%s\n' "$meta" | grep -q "serialized" && fail "ptxas serializes gemm.json's wgmma: $(printf '%s\n' "$meta" | grep -o 'C75[^\\]*')"
printf '%s\n' "$meta" | grep -q '"spill_store_bytes": 0' || fail "gemm.json spills on sm_90a"
# mma.sync where the target has no wgmma; sm_90 and compute_90 name the variant that has it, sm_80 says nothing of it
for t in sm_90 compute_90 sm_80; do
  ir=$("$TLC" compile examples/gemm.json --target $t --emit ir) || fail "tlc compile gemm.json for $t"
  printf '%s\n' "$ir" | grep -qF -- "gemm A_shared x B_shared -> C_local [mma.sync m16n8k16]" || fail "$t: gemm.json is not on mma.sync"
done
printf '%s\n' "$ir" | grep -q "wgmma" && fail "sm_80 mentions wgmma"
for t in sm_90 compute_90; do
  "$TLC" compile examples/gemm.json --target $t --emit ir | grep -qF -- "[not wgmma: this target has none; ${t}a has]" ||
    fail "$t does not say that ${t}a has wgmma"
done
# every float16/bfloat16 tile shape wgmma serves: 64 x 64, 128 x 128 (4 warps), 128 x 256 (8 warps; N = 256),
# 64 x 256 and 256 x 128; K tiles of 16, 32, 64, 128 (32-, 64-, 128-byte swizzle, panels of 64); B N-major and K-major;
# one K tile a stage (k_group 1: compiler/pass_kgroup.c would hold the narrow ones 2 or 4 a stage)
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
for p in gemm_dyn_m gemm_dyn_m_bt gemm_dyn_m_bf16 gemm_dyn_m_bf16_bt; do
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
for s in d["kernel"]["body"]:
    if s["op"] == "pipelined": s["k_group"] = 1
json.dump(d, open(sys.argv[2], "w"))' tests/gpu/programs/$p.json "$tmp/$p.json" || fail "$p: k_group 1"
done
for p in gemm_dyn_m gemm_dyn_m_bt gemm_dyn_m_bf16 gemm_dyn_m_bf16_bt; do
  ty=f16; case $p in *bf16*) ty=bf16;; esac
  for c in "64 64 32 128 2" "128 128 32 128 2" "128 128 64 128 1" "128 256 64 256 1" "128 128 16 128 3" \
           "128 128 128 256 1" "64 256 32 128 2" "256 128 32 256 2"; do
    set -- $c
    d="-D block_M=$1 -D block_N=$2 -D block_K=$3 -D threads=$4"
    ir=$("$TLC" compile "$tmp/$p.json" $d --target sm_90a --emit ir) || fail "$p $c: --emit ir"
    mi=$(( $1 / ($4 / 2) ))
    printf '%s\n' "$ir" | grep -qF -- "[wgmma m64nNk16] [$mi x m64n$2 per warpgroup and k16 step, wait_group 1:" ||
      fail "$p $c: not on wgmma with a group in flight: $(printf '%s\n' "$ir" | grep 'gemm A_')"
    src=$("$TLC" compile "$tmp/$p.json" $d --target sm_90a --emit cuda) || fail "$p $c: --emit cuda"
    for want in "wgmma.mma_async.sync.aligned.m64n$2k16.f32.$ty.$ty" "wgmma.wait_group.sync.aligned 1;" \
                "wgmma.wait_group.sync.aligned 0;" "u, $5u);"; do
      printf '%s\n' "$src" | grep -qF -- "$want" || fail "$p $c: the source lacks: $want"
    done
  done
  # ptxas keeps the groups asynchronous (no C7514 serialization) and spills nothing, at N = 256
  meta=$("$TLC" compile tests/gpu/programs/$p.json -D block_N=256 -D block_K=64 -D threads=256 --target sm_90a --emit meta) ||
    fail "$p 128 x 256 does not build for sm_90a"
  printf '%s\n' "$meta" | grep -q "serialized" && fail "ptxas serializes $p's wgmma"
  printf '%s\n' "$meta" | grep -q '"spill_store_bytes": 0' || fail "$p spills at 128 x 256"
done
# and says why not where it cannot (a program that names a thread keeps its 128 threads: pass_threads.c)
sed '0,/"body": \[/s||"body": [{"op": "let", "name": "tx", "value": "thread_binding(0)"}, |' \
  tests/gpu/programs/gemm_dyn_m.json > "$tmp/dyn_tx.json"
for c in "examples/gemm_nt.json|C is not a float32 fragment in registers" \
         "$tmp/dyn_tx.json -D block_N=256|C would take 256 accumulators per thread" \
         "tests/gpu/programs/gemm_dyn_m.json -D threads=64 -D block_M=64 -D block_N=64|the block is not whole warpgroups" \
         "tests/gpu/programs/gemm_dyn_m.json -D block_N=32|an N-major B ([K, N]) is stored as panels of 64 columns" \
         "tests/gpu/programs/gemm_dyn_m.json -D block_K=48|the K tile is 48"; do
  args=${c%%|*}; why=${c#*|}
  ir=$("$TLC" compile $args --target sm_90a --emit ir) || fail "$args: --emit ir"
  printf '%s\n' "$ir" | grep -qF -- "[not wgmma: $why" || fail "$args: --emit ir does not say: $why"
done
# a gemm whose C another statement of the K loop touches waits for 0: its accumulator is read
python3 - "$tmp/touch.json" <<'PY' || fail "could not write the variant whose loop reads C"
import json, sys
p = json.load(open("tests/gpu/programs/gemm_dyn_m.json"))
loop = p["kernel"]["body"][4]
loop["body"].append({"op": "parallel", "vars": ["i", "j"], "extents": ["block_M", "block_N"],
                     "body": ["C_local[i, j] = C_local[i, j] * 0.5"]})
json.dump(p, open(sys.argv[1], "w"))
PY
ir=$("$TLC" compile "$tmp/touch.json" --target sm_90a --emit ir) || fail "the variant whose loop reads C: --emit ir"
printf '%s\n' "$ir" | grep -qF -- "k16 step, wait_group 0]" || fail "a gemm whose C the loop reads keeps a group in flight"
printf '%s\n' "$ir" | grep -q "drained" && fail "a loop whose gemm waits for 0 drains"
# 8 warps, 64-wide K tiles (bench/programs/gemm_raster.json): one m64n128 per warpgroup, B N-major in panels
src=$("$TLC" compile bench/programs/gemm_raster.json -D block_K=64 -D threads=256 --target sm_90a --emit cuda) ||
  fail "tlc compile gemm_raster --emit cuda"
for want in "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" "wgmma.wait_group.sync.aligned 1;" \
            "tl_db0 = tl_wgdesc(tl_sb, 8192u, 1024u, 1u)"; do
  printf '%s\n' "$src" | grep -qF -- "$want" || fail "the wgmma source lacks: $want"
done
"$TLC" compile bench/programs/gemm_raster.json -D block_K=64 -D threads=256 --target sm_90a -o "${TMPDIR:-/tmp}/tlc_ir_wg.$$.cubin" 2>/dev/null ||
  fail "the wgmma kernel does not build for sm_90a"
rm -f "${TMPDIR:-/tmp}/tlc_ir_wg.$$.cubin"
# more stages than fit (8 x 32 KiB on sm_80's 163 KiB): the loop rotates
# through the 5 laid out, not the 8 asked for
ir=$("$TLC" compile bench/programs/gemm_raster.json -D block_K=64 -D threads=256 -D num_stages=8 --target sm_80 --emit ir) ||
  fail "tlc compile gemm_raster with 8 stages"
printf '%s\n' "$ir" | grep -qF "alloc A_shared: shared float16[128, 64] in shared memory at 0, 5 stages" || fail "not 5 stages laid out"
printf '%s\n' "$ir" | grep -qF "num_stages 8 [software pipelined] [5 stages, copies 4 ahead]" || fail "the loop does not rotate through the 5 stages"
src=$("$TLC" compile bench/programs/gemm_raster.json -D block_K=64 -D threads=256 -D num_stages=8 --target sm_80 --emit cuda) ||
  fail "tlc compile gemm_raster with 8 stages --emit cuda"
printf '%s\n' "$src" | grep -qF "tl_f % 8" && fail "the source rotates through 8 stages"
printf '%s\n' "$src" | grep -qF "tl_f % 5" || fail "the source does not rotate through 5 stages"
# FlashAttention's P: packed pairs of halves in registers, the second gemm's A
ir=$("$TLC" compile examples/flash_attention.json --target sm_90a --emit ir) || fail "tlc compile flash --emit ir"
for want in "alloc acc_s_cast: fragment float16[128, 128] in registers, mma layout, 64 per thread (warps 8x1, tiles 1x16), packed in pairs" \
            "gemm acc_s_cast x V_shared -> acc_o [wgmma m64nNk16] [A in registers]" \
            "copy V[bz+:1 (inside), (k * 128)+:128 (inside), by+:1 (inside), 0+:128 (inside)] -> V_shared[0+:128, 0+:128] [TMA"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || fail "flash --emit ir lacks: $want"
done
# pass_overlap.c: P V issued one iteration late, right after Q K^T, with a third stage for V; the softmax
# moves before O's rescale and P's new values, before which P V is waited for.  Asked for with the loop's
# "overlap": true; not by default
python3 - "$tmp/ovt.json" "$tmp/ovf.json" <<'PY' || fail "could not write the overlap variants"
import json, sys
for path, v in zip(sys.argv[1:], (True, False)):
    p = json.load(open("examples/flash_attention.json"))
    p["kernel"]["body"][17]["overlap"] = v
    json.dump(p, open(path, "w"))
PY
ir=$("$TLC" compile "$tmp/ovt.json" --target sm_90a --emit ir) || fail "flash with overlap true --emit ir"
for want in "[3 stages, copies 1 ahead, a gemm issued one iteration late (the last after the loop)] [late gemm waited for before /kernel/body/17/body/7]" \
            "gemm Q_shared x K_shared^T -> acc_s [wgmma m64nNk16] [1 x m64n128 per warpgroup and k16 step, then the previous iteration's gemm into acc_o issued, wait_group 1]" \
            "[A in registers] [1 x m64n128 per warpgroup and k16 step, issued in the next iteration after the loop's other gemm on wgmma"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || fail "flash with overlap true --emit ir lacks: $want"
done
order=$(printf '%s\n' "$ir" | grep -oE "# /kernel/body/17/body/[0-9]+$" | sed 's|.*/||' | tr '\n' ' ')
[ "$order" = "0 1 2 3 4 5 6 8 11 12 7 9 10 " ] || fail "flash's loop body is not reordered for the overlap: $order"
src=$("$TLC" compile "$tmp/ovt.json" --target sm_90a --emit cuda) || fail "flash with overlap true --emit cuda"
for want in "if (tl_c0 > 0)" "asm volatile(\"wgmma.wait_group.sync.aligned 1;\" ::: \"memory\");" "if (tl_n0 > 0) {" \
            "tl_base_V_shared + (long long)((tl_g - 1) % 3) * 16384LL" \
            "tl_base_V_shared + (long long)((tl_cit + (unsigned)(tl_n0 - 1)) % 3) * 16384LL"; do
  printf '%s\n' "$src" | grep -qF -- "$want" || fail "the overlapped flash source lacks: $want"
done
# warp-specialized too (the stages go on from tile to tile: the late gemm's is tl_g - 1's), each stage freed
# one iteration later, the last after the loop's last late gemm; without the producer, the loop's own count
printf '%s\n' "$ir" | grep -qF "[warp-specialized: a producer warpgroup issues the copies; stages freed on mbarriers 3..5, 1 iteration later]" ||
  fail "flash with overlap true: not warp-specialized with stages freed 1 iteration later"
printf '%s\n' "$src" | awk '/if \(tl_n0 > 0\) \{/ {l = 1} l && /wgmma.wait_group.sync.aligned 0/ {w = 1}
                            w && /tl_j < tl_n0/ {ok = 1} END {exit !ok}' ||
  fail "flash with overlap true: the last stage freed before the last late gemm is done"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["kernel"]["body"][17]["warp_specialize"]=False; json.dump(p, open(sys.argv[2], "w"))' \
  "$tmp/ovt.json" "$tmp/ovn.json"
"$TLC" compile "$tmp/ovn.json" --target sm_90a --emit cuda | grep -qF "tl_base_V_shared + (long long)((tl_c0 - 1) % 3) * 16384LL" ||
  fail "flash with overlap true, no producer: the late gemm's stage"
# the example asks for it (its constant overlap, true); a loop that does not say is not overlapped
"$TLC" compile examples/flash_attention.json --target sm_90a --emit ir | grep -q "one iteration late" ||
  fail "flash as written does not issue P V late"
python3 -c 'import json,sys; p=json.load(open("examples/flash_attention.json")); del p["kernel"]["body"][17]["overlap"]; json.dump(p, open(sys.argv[1], "w"))' "$tmp/ovd.json"
"$TLC" compile "$tmp/ovd.json" --target sm_90a --emit ir | grep -q "one iteration late" &&
  fail "flash with 8 warps issues P V late without being asked"
"$TLC" compile "$tmp/ovd.json" -D threads=128 -D block_M=64 --target sm_90a --emit ir |
  grep -q "one iteration late" && fail "flash with one warpgroup issues P V late without being asked"
"$TLC" compile "$tmp/ovt.json" -D threads=128 -D block_M=64 --target sm_90a --emit ir | grep -q "one iteration late" ||
  fail "flash with one warpgroup and overlap true does not issue P V late"
"$TLC" compile "$tmp/ovf.json" -D threads=128 -D block_M=64 --target sm_90a --emit ir | grep -q "one iteration late" &&
  fail "flash with overlap false issues P V late"
python3 -c 'import json,sys; p=json.load(open("examples/flash_attention.json")); p["kernel"]["body"][17]["overlap"]="1"; json.dump(p, open(sys.argv[1], "w"))' "$tmp/ovbad.json"
out=$("$TLC" check "$tmp/ovbad.json" 2>&1) && fail "overlap \"1\" was accepted"
printf '%s\n' "$out" | grep -qF "'overlap' must be true or false" || fail "overlap \"1\": $out"
# O touched before Q K^T: P V cannot move after it, and nothing is reordered
python3 - "$tmp/ov.json" <<'PY' || fail "could not write the variant that touches O first"
import json, sys
p = json.load(open("examples/flash_attention.json"))
p["kernel"]["body"][17]["overlap"] = True
p["kernel"]["body"][17]["body"].insert(1, {"op": "parallel", "vars": ["i", "j"], "extents": ["block_M", "dim"],
                                           "body": ["acc_o[i, j] = acc_o[i, j] * 1.0"]})
json.dump(p, open(sys.argv[1], "w"))
PY
ir=$("$TLC" compile "$tmp/ov.json" --target sm_90a --emit ir) || fail "the variant that touches O first: --emit ir"
printf '%s\n' "$ir" | grep -q "one iteration late" && fail "P V issued late past a statement that touches O"
printf '%s\n' "$ir" | grep -qF "[2 stages, copies 1 ahead]" || fail "the variant without the overlap took a third stage"
# pass_uniform.c: the causal mask compares per element only on the tiles the diagonal crosses: the
# comparison at (i, j) = (0, 127), where it is hardest to hold, and at (127, 0), where it is easiest
src=$("$TLC" compile examples/flash_attention.json -D is_causal=true --target sm_90a --emit cuda) || fail "causal flash --emit cuda"
for want in "bool tl_uni[2];" "const int v_i = 0; (void)v_i;" "const int v_j = 127; (void)v_j;" "} else if (tl_uni[1]) {" \
            "tl_uni[1] = !((((int)(((int)(v_bx * ((int)128LL))) + v_i)) >= ((int)(((int)(v_k * ((int)128LL))) + v_j))));"; do
  printf '%s\n' "$src" | grep -qF -- "$want" || fail "the causal flash source lacks: $want"
done
"$TLC" compile examples/flash_attention.json -D is_causal=true --target sm_80 -o "$tmp/c.cubin" 2>/dev/null ||
  fail "causal flash does not build for sm_80"
# pass_raster.c: the causal loop's extent grows with bx, so the blocks take bx in reverse (heaviest first)
printf '%s\n' "$src" | grep -qF -e "const int v_bx = (int)(gridDim.x - 1u - blockIdx.x);" \
  -e "const int v_bx = (int)((unsigned)tl_tg0 - 1u - tl_b0);" || fail "causal flash: bx not reversed"
# persistent (pass_wspec.c) and growing with x: the tiles numbered x slowest in groups of (y, z) pairs that fill
# whole pairs of rounds, walked in rounds of the blocks started, every other round in reverse (emit_cuda.c's
# open_tiles); not growing: the grid order, every (blocks started)-th tile
for want in "if (tl_ga > 0 && 2 * tl_nbk / tl_ga < tl_grp) tl_grp = 2 * tl_nbk / tl_ga;" \
            "const long long tl_tile = tl_rnd * tl_nbk + ((tl_rnd & 1) ? tl_nbk - 1 - tl_bl : tl_bl);" \
            "if (tl_tile >= tl_ntiles) break;" "tl_b0 = (unsigned)(tl_gl / tl_gn)" \
            "tl_yz = tl_gi * tl_grp + tl_gl % tl_gn;"; do
  printf '%s\n' "$src" | grep -qF -- "$want" || fail "causal flash: the persistent tiles' walk lacks: $want"
done
"$TLC" compile examples/flash_attention.json --target sm_90a --emit cuda | grep -qF "tl_tile += (long long)gridDim.x" ||
  fail "flash (not causal): the persistent tiles are not walked in grid order"
"$TLC" compile examples/flash_attention.json -D is_causal=true --target sm_90a --emit ir | grep -qF "blocks: x in reverse" ||
  fail "causal flash --emit ir: not x in reverse"
"$TLC" compile examples/flash_attention.json --target sm_90a --emit ir | grep -qF "blocks: in grid order" ||
  fail "flash (not causal, every block the same loop) --emit ir: not in grid order"
# not affine in i and j (a product of both): compared per element everywhere
python3 - "$tmp/na.json" <<'PY' || fail "could not write the non-affine mask"
import json, sys
p = json.load(open("examples/flash_attention.json"))
par = p["kernel"]["body"][17]["body"][1]["then"][0]
par["body"] = ["acc_s[i, j] = if_then_else(bx * block_M + i * j >= k * block_N + j, 0, -infinity(float32))"]
json.dump(p, open(sys.argv[1], "w"))
PY
src=$("$TLC" compile "$tmp/na.json" -D is_causal=true --target sm_90a --emit cuda) || fail "the non-affine mask: --emit cuda"
printf '%s\n' "$src" | grep -qF "tl_uni" && fail "a mask not affine in i and j is decided per tile"
# on sm_80 the same P is mma.sync's A in registers
ir=$("$TLC" compile examples/flash_attention.json --target sm_80 -D num_stages=1 --emit ir) || fail "tlc compile flash sm_80 --emit ir"
printf '%s\n' "$ir" | grep -qF -- "gemm acc_s_cast x V_shared -> acc_o [mma.sync m16n8k16] [A in registers]" ||
  fail "flash on sm_80: P is not mma.sync's A in registers"
# the RS form of wgmma in the PTX: A from four registers, B through its descriptor, B transposed (N-major V)
# (NVVM's, through the CUDA back end, and the PTX back end's, P's packed registers themselves)
"$TLC" compile examples/flash_attention.json --target compute_90a --backend cuda -o "$tmp/fa.ptx" 2>/dev/null ||
  fail "flash for compute_90a"
grep -qE 'wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16 *\{[^}]*\}, *\{%r[0-9]+, *%r[0-9]+, *%r[0-9]+, *%r[0-9]+\}, *%rd[0-9]+, *p, *1, *1, *1;' "$tmp/fa.ptx" ||
  fail "the PTX of flash for sm_90a lacks wgmma with A from registers"
"$TLC" compile examples/flash_attention.json --target compute_90a --backend ptx -o "$tmp/fp.ptx" 2>/dev/null ||
  fail "flash for compute_90a --backend ptx"
grep -qE 'wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16 \{[^}]*\}, \{%fr[0-9]+_[0-9]+,%fr[0-9]+_[0-9]+,%fr[0-9]+_[0-9]+,%fr[0-9]+_[0-9]+\}, %rd[0-9]+, %p[0-9]+, 1, 1, 1;' "$tmp/fp.ptx" ||
  fail "the PTX back end's flash lacks wgmma with A from registers"
src=$("$TLC" compile examples/flash_attention.json --target sm_90a --emit cuda) || fail "tlc compile flash --emit cuda"
printf '%s\n' "$src" | grep -qF "unsigned r_acc_s_cast[32]; /* pairs of float16 */" || fail "P is not declared as 32 pairs"
printf '%s\n' "$src" | grep -qF "r_acc_s_cast[tl_r / 2] = tl_pair;" || fail "the copy into P does not write pairs"
# P read by a parallel loop as well is not packed (kept as one value per register)
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
printf '%s\n' "$ir" | grep -qF "gemm acc_s_cast x V_shared -> acc_o [wgmma m64nNk16] [A in registers]" ||
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
[ "$(echo $stages)" = "check threads kgroup place pipeline overlap tma cluster wspec store range uniform barrier raster split emit" ] || fail "tlc compile --help lists: $(echo $stages)"
dumps=$(for s in $stages; do "$TLC" compile examples/gemm_swizzle.json --target sm_80 --emit cuda --dump $s 2>&1 >/dev/null |
        head -1; done)
[ "$dumps" = "$(for s in $stages; do echo "# IR after $s"; done)" ] || fail "not every stage dumps: $dumps"
# range: the variables' ranges, and each guard of a tensor access kept or proven
dump=$("$TLC" compile examples/gemm_swizzle.json --target sm_80 --emit cuda --dump range 2>&1 >/dev/null)
for want in "block var bx in [0, 31]" "loop pipelined k in range(0, +128, step 1) num_stages 3 [software pipelined] [3 stages, copies 2 ahead] in [0, 127]" \
            "copy A[(by * 128)+:128 (inside), (k * 32)+:32 (inside)] -> A_shared"; do
  printf '%s\n' "$dump" | grep -qF -- "$want" || fail "--dump range lacks: $want"
done
printf '%s\n' "$dump" | grep -q "^ *barrier" && fail "--dump range shows barriers (decided by the later barrier stage)"
dump=$("$TLC" compile tests/golden/scale_add.json --target sm_80 --emit cuda --dump range 2>&1 >/dev/null)
printf '%s\n' "$dump" | grep -qF "copy x[(bx * 256)+:256 (guard)] -> xr" || fail "a guard of a dynamic shape is not kept"
# an assignment's elements of tensors: the split sums P[s, bx * 16 + i, by * 64 + j] inside P [3, 8192, 64], no
# guard in the code; at M = 13 (P [3, 200, 13], blocks of 64 x 16) the guards stay
sk="examples/gemm_w4a16_splitk_t.json --target sm_90a -D N=8192 -D K=8192 -D block_M=64 -D red_N=16 -D red_M=64 -D split_k=3"
printf '%s\n' "$("$TLC" compile $sk -D M=64 --emit ir)" | grep -F 'assign acc[i, j] = (acc[i, j] + P[' | grep -qF '(P inside)' ||
  fail "the split sums' reads are not proven inside P"
"$TLC" compile $sk -D M=64 --emit cuda | grep -F 'r_acc[tl_r] = (r_acc[tl_r] +' | grep -qF '< (unsigned long long)g_P_d' &&
  fail "a read proven inside P keeps its guard"
dump=$("$TLC" compile examples/gemm_w4a16_splitk_t.json --target sm_90a -D M=13 -D N=200 -D K=650 -D block_M=16 --emit ir)
printf '%s\n' "$dump" | grep -F 'assign acc[i, j]' | grep -qF '(P guard)' || fail "P's guard at M=13 is not kept"
printf '%s\n' "$dump" | grep -F 'assign C[' | grep -qF '(C guard)' || fail "C's guard at M=13 is not kept"
# the adding kernel reads a thread's 4 neighbouring sums as one 16-byte vector (pass_place.c's vec_read_of) where
# P's rows are a multiple of 4 long (M = 64, 20), not where they are not (M = 13)
for m in 64 20; do
  "$TLC" compile $sk -D M=$m --emit ir | grep -F 'parallel (i < 16, j < 64)' |
    grep -qF '[4 at a time: P read as 16-byte vectors (the CUDA back end)]' || fail "M=$m: the sums are not read as vectors"
  "$TLC" compile $sk -D M=$m --emit cuda | grep -qF '*(const float4 *)&g_P[' || fail "M=$m: no float4 read of P"
done
printf '%s\n' "$dump" | grep -q 'read as 16-byte vectors' && fail "M=13: P's rows of 13 read as vectors"
bv=tests/gpu/programs/blocked_vec_read.json
[ "$("$TLC" compile $bv --target sm_90a -D N=132 --emit ir | grep -cF 'read as 16-byte vectors (the CUDA back end)]')" = 2 ] ||
  fail "$bv N=132: its int32 and float32 reads are not both vectors"
"$TLC" compile $bv --target sm_90a -D N=130 --emit ir | grep -q 'read as 16-byte vectors' && fail "$bv N=130: rows of 130 as vectors"
"$TLC" compile $bv --target gfx942 -D N=132 --emit ir | grep -q 'read as 16-byte vectors' && fail "$bv gfx942: vectors on HIP"
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
dump=$("$TLC" compile examples/gemm.json -D M=4096 -D N=4096 --target sm_80 --emit cuda --dump raster 2>&1 >/dev/null)
printf '%s\n' "$dump" | grep -qF "blocks: rasterized in stripes of 8 block rows (the compiler's choice: a gemm's A and B tiles are copied by different block variables, and no use_swizzle is given)" ||
  fail "--dump raster of gemm.json: not the compiler's stripes (its gemm's tiles by by and bx, no use_swizzle)"
# at 1024 x 1024 its 64 blocks run in one wave: no stripes; a dynamic M (gemm_dyn) keeps them
"$TLC" compile examples/gemm.json --target sm_80 --emit ir |
  grep -qF "blocks: in grid order (the compiler's choice: a constant grid of 64 blocks, at most the 132 of one wave)" ||
  fail "gemm.json at 1024: stripes for one wave"
"$TLC" compile tests/gpu/programs/gemm_dyn.json -D N=256 --target sm_80 --emit ir | grep -qF "blocks: rasterized in stripes of 8" ||
  fail "gemm_dyn (dynamic M): no stripes"
python3 -c 'import json, sys; d = json.load(open("examples/gemm.json")); d["kernel"]["body"].insert(3, {"op": "use_swizzle", "panel_size": 8, "enable": False}); json.dump(d, open(sys.argv[1], "w"))' "$tmp/noswz.json"
"$TLC" compile "$tmp/noswz.json" --target sm_80 --emit ir | grep -qF "blocks: in grid order" ||
  fail "a use_swizzle with enable false does not keep the grid order"
dump=$("$TLC" compile examples/flash_attention.json --target sm_80 --emit cuda --dump raster 2>&1 >/dev/null)
printf '%s\n' "$dump" | grep -qF "blocks: in grid order" || fail "--dump raster of flash_attention.json is not the grid order"
"$TLC" compile examples/gemm.json --target sm_80 --dump lowering 2>&1 >/dev/null | grep -qF "the stages are check, threads, kgroup, place, pipeline, overlap, tma, cluster, wspec, store, range, uniform, barrier, raster, split and emit" ||
  fail "a wrong --dump does not list the stages"
# a kernel named like a C++ word (TileLang names its kernels main) is built
# under the symbol tl_k_NAME, and the metadata's entry says so
for nm in main delete threadIdx tl_x; do
  python3 -c 'import json,sys; d=json.load(open("examples/tilus_add_one.json")); d["name"]=sys.argv[1]; json.dump(d, open(sys.argv[2], "w"))' \
    "$nm" "${TMPDIR:-/tmp}/tlc_ir_name.$$.json"
  for t in sm_80 gfx942; do
    meta=$("$TLC" compile "${TMPDIR:-/tmp}/tlc_ir_name.$$.json" --target $t --emit meta 2>&1) || { "$TLC" targets | grep -q "^$t" || continue; fail "a kernel named $nm does not build for $t: $meta"; }
    printf '%s\n' "$meta" | grep -qF "\"entry\": \"tl_k_$nm\"" || fail "a kernel named $nm: entry is not tl_k_$nm for $t"
  done
done
rm -f "${TMPDIR:-/tmp}/tlc_ir_name.$$.json"
# several kernels (proto/tile-ir-v1.md 4.1): each printed in turn with its entry, the workspace among the
# params; one module with both entry points; a layout on a global tensor is shown ignored
prog=tests/gpu/programs/split_rowsum.json
ir=$("$TLC" compile $prog --target sm_80 --emit ir) || fail "tlc compile split_rowsum --emit ir"
for want in "kernel 1 of 2 (/kernels/0, entry split_rowsum_0," "kernel 2 of 2 (/kernels/1, entry split_rowsum_1," \
            "workspace W: float32 tensor [4, m] align 256 (global memory the launch allocates, not zeroed" \
            "copy acc[0+:64] -> W[by+:1" "# /kernels/1/body/2"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || fail "split_rowsum --emit ir lacks: $want"
done
src=$("$TLC" compile $prog --target sm_80 --emit cuda) || fail "tlc compile split_rowsum --emit cuda"
[ "$(printf '%s\n' "$src" | grep -c '__global__')" = 2 ] || fail "split_rowsum: not two entry points in one module"
printf '%s\n' "$src" | grep -q griddepcontrol && fail "split_rowsum: griddepcontrol on sm_80 (no programmatic launch there)"
# from sm_90 (proto/tile-ir-v1.md 4.1): kernel 2 waits for kernel 1 first thing (kernel 1 triggers nothing
# early: kernel 2's blocks would wait beside it), and only kernel 2's metadata says launch.programmatic
src=$("$TLC" compile $prog --target sm_90a --emit cuda) || fail "tlc compile split_rowsum --target sm_90a --emit cuda"
printf '%s\n' "$src" | awk '/__global__/ {k++} /griddepcontrol/ {print k ": " $0}' > "${TMPDIR:-/tmp}/tlc_ir_pdl.$$"
got=$(cat "${TMPDIR:-/tmp}/tlc_ir_pdl.$$"); rm -f "${TMPDIR:-/tmp}/tlc_ir_pdl.$$"
[ "$got" = '2:   asm volatile("griddepcontrol.wait;" ::: "memory");' ] || fail "split_rowsum on sm_90a: griddepcontrol lines: $got"
printf '%s\n' "$src" | awk '/__global__.*split_rowsum_1/ {getline; getline; getline; print}' | grep -qF 'griddepcontrol.wait' ||
  fail "split_rowsum on sm_90a: the second kernel does not wait first thing"
"$TLC" compile $prog --target sm_90a --emit meta | python3 -c 'import json,sys; m=json.load(sys.stdin)
assert [k["launch"].get("programmatic") for k in m["kernels"]] == [None, True], m["kernels"]' ||
  fail "split_rowsum on sm_90a: launch.programmatic not on the second kernel alone"
"$TLC" compile $prog --target sm_90a --emit ir | grep -qF "(/kernels/1, entry split_rowsum_1, launched after the one before it on the same stream; starts early, waits first for the one before it (programmatic launch))" ||
  fail "split_rowsum on sm_90a: --emit ir does not say that kernel 2 starts early"
"$TLC" compile $prog --target gfx942 --emit hip 2>/dev/null | grep -q griddepcontrol && fail "griddepcontrol in HIP C"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["kernels"][1]["body"].insert(0, {"op": "annotate_layout", "layouts": {"X": {"vars": ["i", "j"], "index": ["j", "i"]}}}); d["kernels"][0]["body"].insert(0, {"op": "annotate_layout", "layouts": {"X": {"vars": ["a", "b"], "index": ["b", "a"]}}}); json.dump(d, open(sys.argv[2], "w"))' \
  $prog "${TMPDIR:-/tmp}/tlc_ir_lay.$$.json"
ir=$("$TLC" compile "${TMPDIR:-/tmp}/tlc_ir_lay.$$.json" --target sm_80 --emit ir) || fail "a layout on a global tensor"
rm -f "${TMPDIR:-/tmp}/tlc_ir_lay.$$.json"
printf '%s\n' "$ir" | grep -qF "annotate_layout X [ignored: a layout on global memory; the tensor stays dense row-major]" ||
  fail "--emit ir does not show the global layout ignored"
# tlc targets names the PTX back end's assembler next to the toolchains, or says that it is missing
"$TLC" targets | grep -qE '^# (nvJitLink [0-9]+\.[0-9]+ \(.*\): assembles the PTX|no nvJitLink: )' ||
  fail "tlc targets does not say whether nvJitLink is here: $("$TLC" targets | head -n 3)"
TL_NVJITLINK=/nonexistent/libnvJitLink.so "$TLC" targets | grep -qF '# no nvJitLink: the PTX back end makes PTX (compute_ targets) only: nvJitLink is not available: tried /nonexistent/libnvJitLink.so' ||
  fail "tlc targets does not say that nvJitLink is missing"
echo "tlc_ir: ok"
