#!/bin/sh
# tests/sh/tlc_store.sh - the epilogue through shared memory and TMA
# stores (compiler/pass_store.c) without a GPU: a copy of a gemm's
# register fragment to a tensor that says "tma": true is staged, one
# 128-byte panel of columns at a time, in the 128-byte swizzle in a buffer
# after the mbarriers (never a pipeline stage's memory), each panel stored
# by one bulk tensor copy through a tensor map of its own (the box: 64
# float16 columns by the tile's rows); two panels staged where they fit
# (each filled once the store two panels back has read it; the kernel's
# last statement does not wait for its stores, the kernel does before it
# exits), else one (the next panel after the last has been read, the
# statement done when the last is complete); without
# "tma": true, on sm_80, and for rows that are not whole panels the copy
# stays as it was, and `--emit ir` says why.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here).
cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
tl_init tlc_store.sh
tl_need_target sm_90a "tlc compile cannot run"
TLC=$TL_BUILD/bin/tlc
# one tile a block (persistent=false): the stores in the tile's epilogue (a persistent kernel's are deferred: below)
G="tests/gpu/programs/gemm_cluster.json -D M=1000 -D N=1000 -D K=200 -D cluster_x=1 -D tma_store=true -D persistent=false"
src=$("$TLC" compile $G --target sm_90a --emit cuda) || tl_fail "--emit cuda for sm_90a"
for want in "const unsigned tl_stg0 = tl_smem_addr(tl_smem + 197632);" \
            "const unsigned tl_stg = tl_stg0 + (tl_epi & 1u) * 16384u;" "unsigned tl_epi = 0; (void)tl_epi;" \
            "const int tl_y0 = (int)(((int)(v_by * ((int)128LL)))), tl_x0 = (int)(((int)(v_bx * ((int)256LL))));" \
            "if (tl_col / 64u == 3u) {" \
            "const unsigned tl_a = tl_stg + tl_row * 128u + (((tl_b / 16u) ^ (tl_row % 8u)) * 16u) + tl_b % 16u;" \
            'asm volatile("st.shared.b32 [%0], %1;" :: "r"(tl_a), "r"((unsigned)(tl_f2h2(r_C_local[tl_r], r_C_local[tl_r + 1]))) : "memory");' \
            '"l"((unsigned long long)&tl_tmap2), "r"(tl_x0 + 192), "r"(tl_y0), "r"(tl_stg) : "memory");' \
            'if (tl_tid == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");'; do
  printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "the sm_90a source lacks: $want"
done
[ "$(printf '%s\n' "$src" | grep -c 'cp.async.bulk.tensor.2d.global.shared::cta.bulk_group')" = 4 ] ||
  tl_fail "not 4 panel stores (256 float16 columns)"
[ "$(printf '%s\n' "$src" | grep -c 'cp.async.bulk.wait_group.read 1;')" = 4 ] || tl_fail "not 4 waits for a staged half"
[ "$(printf '%s\n' "$src" | grep -c 'cp.async.bulk.wait_group 0;')" = 1 ] || tl_fail "not one wait for the stores at the end"
# that wait is the kernel's last statement, after the tile loop
printf '%s\n' "$src" | awk '/cp.async.bulk.wait_group 0;/ {w = NR} END {exit !(w && NR - w <= 3)}' ||
  tl_fail "the wait for the stores is not at the kernel's end"
"$TLC" compile $G --target sm_90a --emit ptx -o "$TMP/k.ptx" 2>/dev/null || tl_fail "--emit ptx"
for want in "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" "cp.async.bulk.commit_group" \
            "cp.async.bulk.wait_group.read 1" "cp.async.bulk.wait_group 0" "st.shared.b32"; do
  grep -qF -- "$want" "$TMP/k.ptx" || tl_fail "the sm_90a PTX lacks: $want"
done
# bfloat16: each pair of accumulators rounded by one cvt.rn.bf16x2.f32 (tl_f2bf2), not element by element
B="tests/gpu/programs/gemm_dyn_m_bf16.json -D N=2048 -D K=136 -D block_N=256 -D block_K=64 -D threads=256 -D tma_store=true"
"$TLC" compile $B --target sm_90a --emit cuda | grep -qF 'tl_f2bf2(r_C_local[tl_r], r_C_local[tl_r + 1])' ||
  tl_fail "bfloat16: the staged pairs are not converted by tl_f2bf2"
"$TLC" compile $B --target sm_90a --emit ptx -o "$TMP/b.ptx" 2>/dev/null || tl_fail "bfloat16: --emit ptx"
[ "$(grep -c 'cvt.rn.bf16x2.f32' "$TMP/b.ptx")" = 64 ] || tl_fail "bfloat16: not 64 cvt.rn.bf16x2.f32 (128 accumulators a thread)"
grep -q 'cvt.rn.bf16.f32' "$TMP/b.ptx" && tl_fail "bfloat16: an element converted alone"
"$TLC" compile $G --target sm_90a --emit meta > "$TMP/m.json" || tl_fail "--emit meta"
python3 - "$TMP/m.json" <<'PY' || tl_fail "the metadata"
import json, sys
m = json.load(open(sys.argv[1]))
maps = [(t["param"], t["box"], t["swizzle"]) for t in m["tensor_maps"]]
assert maps == [("A", [64, 128], "128B"), ("B", [64, 64], "128B"), ("C", [64, 128], "128B")], maps
# the stages (4 x 48 KiB), 8 mbarriers, then the staging buffer at the next KiB: two panels of 128 rows of 128 bytes
assert m["launch"]["dynamic_shared_bytes"] == 197632 + 2 * 128 * 128, m["launch"]
assert m["resources"]["spill_store_bytes"] == 0, m["resources"]
PY
ir=$("$TLC" compile $G --target sm_90a --emit ir) || tl_fail "--emit ir"
printf '%s\n' "$ir" | grep -qF "[TMA store: staged in shared memory, 128-byte panels, each a bulk tensor copy through tensor map 2, two panels staged, one filled while the other is stored, the last ones not waited for (the kernel's last statement: its threads go on to the next tile)]" ||
  tl_fail "--emit ir lacks the TMA store"
# 256 x 256 tiles in 3 stages of 64 KiB: room for one staged panel of 256 rows, not two: each panel waits for
# the one before to be read, and the statement for its stores
G1="$G -D block_M=256 -D threads=512 -D num_stages=2"
src=$("$TLC" compile $G1 --target sm_90a --emit cuda) || tl_fail "one panel: --emit cuda"
printf '%s\n' "$src" | grep -q "tl_epi" && tl_fail "one panel: a count of staged halves"
[ "$(printf '%s\n' "$src" | grep -c 'cp.async.bulk.wait_group.read 0;')" = 3 ] || tl_fail "one panel: not 3 waits between panels"
[ "$(printf '%s\n' "$src" | grep -c 'cp.async.bulk.wait_group 0;')" = 1 ] || tl_fail "one panel: not one wait for the stores"
"$TLC" compile $G1 --target sm_90a --emit ir | grep -qF "[TMA store: staged in shared memory, 128-byte panels, each a bulk tensor copy through tensor map 2]" ||
  tl_fail "one panel: --emit ir"
printf '%s\n' "$ir" | grep -qF "[not deferred: the kernel is not persistent" || tl_fail "persistent=false: --emit ir, not deferred"
# persistent: deferred (pass_store.c store_defer): the pairs converted at the tile's end, each panel p staged and
# stored in the next tile's loop after iteration p issued its gemm, the rest after that loop, the last tile's at the end
GD="tests/gpu/programs/gemm_cluster.json -D M=1000 -D N=1000 -D K=200 -D cluster_x=1 -D tma_store=true"
"$TLC" compile $GD --target sm_90a --emit ir | grep -qF "[deferred: converted to pairs in registers at the tile's end; panel p staged and stored once the next tile's loop has issued the gemm of its iteration p, the rest after that loop, the last tile's after the walk]" ||
  tl_fail "deferred: --emit ir"
src=$("$TLC" compile $GD --target sm_90a --emit cuda) || tl_fail "deferred: --emit cuda"
for want in "unsigned tl_pend[64]; int tl_pend_on = 0, tl_py0 = 0, tl_px0 = 0;" \
            "for (int tl_r = 0; tl_r < 128; tl_r += 2) tl_pend[tl_r / 2] = tl_f2h2(r_C_local[tl_r], r_C_local[tl_r + 1]);" \
            "tl_py0 = (int)(((int)(v_by * ((int)128LL)))); tl_px0 = (int)(((int)(v_bx * ((int)256LL)))); tl_pend_on = 1;" \
            "if (tl_c0 == 3)" "if (tl_n0 <= 3)" "tl_pend_on = 0;" "const int tl_y0 = tl_py0, tl_x0 = tl_px0;" \
            'asm volatile("st.shared.b32 [%0], %1;" :: "r"(tl_a), "r"((unsigned)(tl_pend[tl_r / 2])) : "memory");'; do
  printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "deferred: the sm_90a source lacks: $want"
done
# 4 panels in the loop, 4 after it, 4 after the walk; no fragment element staged directly
[ "$(printf '%s\n' "$src" | grep -c 'cp.async.bulk.tensor.2d.global.shared::cta.bulk_group')" = 12 ] ||
  tl_fail "deferred: not 3 x 4 panel stores"
printf '%s\n' "$src" | grep -q 'st.shared.b32.*r_C_local' && tl_fail "deferred: a panel staged from the accumulators"
"$TLC" compile $GD --target sm_90a --emit meta > "$TMP/md.json" || tl_fail "deferred: --emit meta"
python3 -c "import json,sys; r = json.load(open(sys.argv[1]))['resources']; assert r['spill_store_bytes'] == 0, r" \
  "$TMP/md.json" || tl_fail "deferred: spills"
# refused: two blocks an SM (setmaxnreg 216), 128 accumulators a thread, their 64 pairs and 40 more would not fit
"$TLC" compile bench/programs/gemm_raster.json -D M=1024 -D N=1024 -D K=512 -D tma_store=true -D num_stages=2 \
  --target sm_90a --emit ir |
  grep -qF "[not deferred: its converted pairs would not fit in registers beside the fragments]" ||
  tl_fail "deferred: the refusal for registers"
"$TLC" compile $G --target sm_90a --emit cuda --dump store 2>&1 >/dev/null | grep -qF "# IR after store" || tl_fail "--dump store"
# not asked; sm_80; rows of 64 bytes (block_N = 32)
"$TLC" compile $G -D tma_store=false --target sm_90a --emit cuda | grep -q "bulk_group" && tl_fail "tma_store=false: a TMA store"
"$TLC" compile $G --target sm_80 --emit cuda | grep -q "bulk_group" && tl_fail "sm_80: a TMA store"
"$TLC" compile $G -D block_N=32 --target sm_90a --emit ir |
  grep -qF "[not a TMA store: its rows of 64 bytes are not whole 128-byte panels]" || tl_fail "block_N=32: the refusal"

# a copy from shared memory into a tensor stores whole vectors (emit_cuda.c's store_vec_bytes): 16 bytes
# where the tensor's rows hold whole 16-byte vectors, 4 where they hold only whole 4-byte ones, element by
# element where not even those
T="examples/gemm_w4a16_t.json -D M=300 -D K=256"
store() { "$TLC" compile $T -D N=$1 --target $2 --emit cuda | grep 'g_C\[' || tl_fail "N=$1 $2: no store of C"; }
for t in sm_90a sm_80; do
  store 200 $t | grep -qF '*(tl_v16 *)&g_C[' || tl_fail "N=200 $t: not 16-byte stores"
  store 202 $t | grep -qF '*(tl_v4 *)&g_C[' || tl_fail "N=202 $t: not 4-byte stores"
  store 201 $t | grep -q 'tl_v[0-9]* \*)&g_C\[' && tl_fail "N=201 $t: vectors on rows of 201 elements"
done
exit 0
