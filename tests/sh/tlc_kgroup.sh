#!/bin/sh
# tests/sh/tlc_kgroup.sh - several consecutive K tiles a pipeline stage
# (compiler/pass_kgroup.c) without a GPU: examples/gemm.json as written
# (K tiles of 32 float16, rows of 64 bytes) holds 2 tiles a stage on
# sm_90a: one box of 64 columns of A and B's two 128-byte panels per stage
# in the 128-byte swizzle, one expect-tx and mbarrier per stage, the
# wgmma K steps of both tiles in one group (the PTX has the bulk tensor
# copies and 8 wgmma instructions: 4 k16 steps x 2 m64 halves); a dynamic
# K runs the last tile that does not fill a group after the loop, on
# buffers of the program's shape; "k_group": 1, a float16 C and a
# schedule too large for shared memory keep one tile a stage, and
# `--emit ir` says why; on sm_80 nothing changes and nothing is said.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here).
cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
tl_init tlc_kgroup.sh
tl_need_target sm_90a "tlc compile cannot run"
TLC=$TL_BUILD/bin/tlc
G="examples/gemm.json -D M=4096 -D N=4096 -D K=4096"
ir=$("$TLC" compile $G --target sm_90a --emit ir) || tl_fail "--emit ir"
for want in "[K tiles grouped: 2 consecutive tiles a stage, one box and mbarrier per stage, one wgmma group over them (the compiler's choice: the tiles were under 128 bytes in K)]" \
            "loop pipelined k in range(0, +64, step 1)" \
            "copy A[(by * 128)+:128 (inside), ((k * 2) * 32)+:64 (inside)] -> A_shared[0+:128, 0+:64]" \
            "alloc A_shared: shared float16[128, 64]" "alloc B_shared: shared float16[64, 128]"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || tl_fail "--emit ir lacks: $want"
done
printf '%s\n' "$ir" | grep -q "_last" && tl_fail "a constant extent of whole groups has no loop of the last tiles"
"$TLC" compile $G --target sm_90a --emit meta > "$TMP/m.json" || tl_fail "--emit meta"
python3 - "$TMP/m.json" <<'PY' || tl_fail "the metadata"
import json, sys
m = json.load(open(sys.argv[1]))
maps = [(t["param"], t["box"], t["swizzle"]) for t in m["tensor_maps"]]
assert maps == [("A", [64, 128], "128B"), ("B", [64, 64], "128B")], maps
assert m["resources"]["spill_store_bytes"] == 0, m["resources"]
PY
"$TLC" compile $G --target sm_90a --emit cuda > "$TMP/k.cu" || tl_fail "--emit cuda"
grep -qF 'asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(tl_mb), "r"(32768u) : "memory");' \
  "$TMP/k.cu" || tl_fail "not one expect-tx of both tiles (32 KiB) a stage"
"$TLC" compile $G --target sm_90a --emit ptx -o "$TMP/k.ptx" 2>/dev/null || tl_fail "--emit ptx"
[ "$(grep -c 'cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes' "$TMP/k.ptx")" = 3 ] ||
  tl_fail "not 3 bulk tensor copies a stage (A's box, B's two panels)"
[ "$(grep -c 'wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16' "$TMP/k.ptx")" = 8 ] ||
  tl_fail "not 8 wgmma instructions a stage (4 k16 steps of 2 tiles, 2 m64 halves)"
for want in "mbarrier.try_wait.parity.shared::cta.b64" "wgmma.commit_group.sync.aligned" "wgmma.wait_group.sync.aligned 1" \
            "mbarrier.arrive.shared::cta.b64"; do
  grep -qF -- "$want" "$TMP/k.ptx" || tl_fail "the sm_90a PTX lacks: $want"
done
# a dynamic K: the loop over groups, then the last tile (ceildiv(K, 32) odd) one at a time
D=tests/gpu/programs/gemm_dyn_k.json
ir=$("$TLC" compile $D --target sm_90a --emit ir) || tl_fail "--emit ir of gemm_dyn_k"
for want in "loop pipelined k in range(0, +(max(ceildiv(K, 32), 0) // 2), step 1)" \
            "[the last K tiles that do not fill a group of 2, one at a time]" \
            "copy B[(k_last * 32)+:32 (guard), (bx * 128)+:128 (inside)] -> B_shared_last[0+:32, 0+:128]" \
            "gemm A_shared_last x B_shared_last -> C_local [wgmma m64nNk16]"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || tl_fail "--emit ir of gemm_dyn_k lacks: $want"
done
"$TLC" compile $D --target sm_90a --emit ptx -o "$TMP/d.ptx" 2>/dev/null || tl_fail "--emit ptx of gemm_dyn_k"
grep -q 'wgmma.mma_async' "$TMP/d.ptx" || tl_fail "gemm_dyn_k's PTX has no wgmma"
# forced 4 a stage; then the refusals
"$TLC" compile $D -D threads=256 -D num_stages=2 -D k_group=4 --target sm_90a --emit ir |
  grep -qF "[K tiles grouped: 4 consecutive tiles a stage, one box and mbarrier per stage, one wgmma group over them (the loop's \"k_group\"); the last tiles after the loop]" ||
  tl_fail "k_group=4"
"$TLC" compile $D -D k_group=1 --target sm_90a --emit ir | grep -qF '[K tiles not grouped: the loop says "k_group": 1]' ||
  tl_fail "k_group=1"
"$TLC" compile $D -D block_N=256 -D threads=256 -D k_group=4 --target sm_90a --emit ir |
  grep -qF "[K tiles not grouped: 4 stages of 4 K tiles would take 419840 bytes of shared memory, over the 232448 a block has]" ||
  tl_fail "k_group=4 past the shared memory"
"$TLC" compile examples/gemm.json --target sm_80 --emit ir | grep -q "K tiles\|alloc A_shared: shared float16\[128, 64\]" &&
  tl_fail "sm_80 (no wgmma, no TMA): K tiles grouped, or said to be not"
"$TLC" compile examples/gemm_nt.json --target sm_90a --emit ir |
  grep -qF "[K tiles not grouped: its gemm's C is float16, rounded after each K tile's gemm]" || tl_fail "a float16 C"
"$TLC" check $D -D k_group=9 2>&1 | grep -qF "error: 'k_group' is 9; it must be from 0 to 8" || tl_fail "k_group=9 accepted"
"$TLC" compile $G --target sm_90a --emit cuda --dump kgroup 2>&1 >/dev/null | grep -qF "# IR after kgroup" || tl_fail "--dump kgroup"
echo "tlc_kgroup: ok"
