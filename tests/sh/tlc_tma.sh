#!/bin/sh
# tests/sh/tlc_tma.sh - bulk tensor copies (TMA) with mbarrier pipelines
# (compiler/pass_tma.c) without a GPU: on sm_90a the wgmma GEMMs' tile
# copies are cp.async.bulk.tensor into the 128-byte swizzle, completing on
# per-stage mbarriers (arrive.expect_tx, try_wait.parity) in the CUDA C and
# the PTX; the metadata (format 2) lists each tensor map, its tensor,
# dimensions, strides, box and swizzle, at the parameter offsets the
# cubin's EIATTR_KPARAM_INFO gives; `--emit ir` says which copies are TMA
# and why the others are not; sm_80 and sm_75 keep cp.async (or plain
# copies), as does a loop with "tma": false; a dynamic dimension enters a
# map as an expression over the scalar parameters.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here).
cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
tl_init tlc_tma.sh
tl_need_target sm_90a "tlc compile cannot run"
TLC=$TL_BUILD/bin/tlc
DYN=tests/gpu/programs/gemm_dyn.json
# the GEMMs on wgmma: the example at 64 x 64 tiles of 4 warps, the bench
# program and the dynamic-M program at 8 warps, B K-major (gemm_bt)
set -- "examples/gemm.json -D block_M=64 -D block_K=64" \
       "bench/programs/gemm_raster.json -D block_K=64 -D threads=256" \
       "$DYN" "tests/gpu/programs/gemm_bt.json"
for g in "$@"; do
  src=$("$TLC" compile $g --target sm_90a --emit cuda) || tl_fail "$g: --emit cuda for sm_90a"
  for want in "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" \
              "mbarrier.try_wait.parity.shared::cta.b64" "mbarrier.arrive.expect_tx.shared::cta.b64" \
              "mbarrier.init.shared::cta.b64" "const __grid_constant__ tl_tensor_map tl_tmap0"; do
    printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "$g: the sm_90a source lacks: $want"
  done
  "$TLC" compile $g --target sm_90a --emit ptx -o "$TMP/k.ptx" 2>/dev/null || tl_fail "$g: --emit ptx for sm_90a"
  for want in "cp.async.bulk.tensor.2d" "mbarrier.try_wait.parity" ".param .align 64 .b8"; do
    grep -qF -- "$want" "$TMP/k.ptx" || tl_fail "$g: the sm_90a PTX lacks: $want"
  done
  for t in sm_80 sm_75; do
    src=$("$TLC" compile $g --target $t --emit cuda) || tl_fail "$g: --emit cuda for $t"
    printf '%s\n' "$src" | grep -q "cp.async.bulk\|mbarrier\|tl_tensor_map" && tl_fail "$g: $t uses TMA"
    [ $t = sm_80 ] && { printf '%s\n' "$src" | grep -qF "cp.async.cg.shared.global" || tl_fail "$g: sm_80 lost cp.async"; }
  done
done
# the metadata: format 2, each map as the compiler decided it, at the
# offsets of the cubin (checked against the PTX's parameter list too)
"$TLC" compile $DYN --target sm_90a -D N=136 -D K=72 --emit meta > "$TMP/m.json" || tl_fail "--emit meta for sm_90a"
python3 - "$TMP/m.json" <<'PY' || tl_fail "the metadata's tensor maps"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["format"] == 2, m["format"]
maps = m["tensor_maps"]
assert [t["param"] for t in maps] == ["A", "B"], maps
a, b = maps
assert a["global_dims"] == [72, "M"] and a["global_strides"] == [144] and a["box"] == [64, 128], a
assert b["global_dims"] == [136, 72] and b["global_strides"] == [272] and b["box"] == [64, 64], b
for t in maps:
    assert t["rank"] == 2 and t["dtype"] == "float16" and t["swizzle"] == "128B" and t["oob_fill"] == "zero", t
    assert t["interleave"] == "none" and t["element_strides"] == [1, 1], t
offs = m["resources"]["param_offsets"]
assert len(offs) == len(m["params"]) + 2, offs
assert [t["offset"] for t in maps] == offs[-2:], (maps, offs)
assert all(o % 16 == 0 for o in offs[-2:]) and offs[-1] - offs[-2] == 128, offs
PY
"$TLC" compile $DYN --target compute_90a --emit meta > "$TMP/p.json" || tl_fail "--emit meta for compute_90a"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); t=m["tensor_maps"]; assert m["format"] == 2 and len(t) == 2 and all("offset" not in x for x in t), t' \
  "$TMP/p.json" || tl_fail "PTX metadata: the maps, without offsets (the driver lays PTX parameters out)"
"$TLC" compile $DYN --target sm_80 --emit meta > "$TMP/q.json" || tl_fail "--emit meta for sm_80"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["format"] == 1 and "tensor_maps" not in m' "$TMP/q.json" ||
  tl_fail "sm_80 metadata is not format 1 without tensor maps"
# --emit ir: which copies, which maps, which mbarriers (4 full, and 4 empty
# ones of the warp-specialized loop: tests/sh/tlc_wspec.sh), and why not
ir=$("$TLC" compile $DYN --target sm_90a --emit ir) || tl_fail "--emit ir"
for want in "tensor map 0: A, box [64, 128] (innermost first), swizzle 128B, out of bounds reads zero" \
            "tensor map 1: B, box [64, 64] (innermost first), swizzle 128B" "mbarriers: 8 at " \
            "[software pipelined] [4 stages, copies 2 ahead, wgmma groups drained at the end] [mbarriers 0..3]" \
            "-> A_shared[0+:128, 0+:64] [TMA: cp.async.bulk.tensor, tensor map 0, prefetched]"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || tl_fail "--emit ir lacks: $want"
done
ir=$("$TLC" compile $DYN -D use_tma=false --target sm_90a --emit ir) || tl_fail "--emit ir with use_tma=false"
printf '%s\n' "$ir" | grep -qF '[cp.async, prefetched] [not TMA: its pipelined loop says "tma": false]' ||
  tl_fail "\"tma\": false does not keep cp.async"
printf '%s\n' "$ir" | grep -q "tensor map" && tl_fail "\"tma\": false still has tensor maps"
src=$("$TLC" compile $DYN -D use_tma=false --target sm_90a --emit cuda) || tl_fail "--emit cuda with use_tma=false"
printf '%s\n' "$src" | grep -q "cp.async.bulk\|mbarrier" && tl_fail "\"tma\": false still uses TMA"
# sm_90 (no wgmma): mma.sync reads A's 128-byte rows in the same swizzle, so A is TMA; B's 256-byte rows are not
ir=$("$TLC" compile $DYN --target sm_90 --emit ir) || tl_fail "--emit ir for sm_90"
printf '%s\n' "$ir" | grep -qF -- "-> A_shared[0+:128, 0+:64] [TMA" || tl_fail "sm_90: A is not TMA"
printf '%s\n' "$ir" | grep -qF "[not TMA: the buffer's swizzle (rows of 256 bytes) is not one a tensor map writes]" ||
  tl_fail "sm_90: B's reason is missing"
# a row-major buffer (read by a parallel loop, float32): a map without swizzle
ir=$("$TLC" compile tests/gpu/programs/tma_colsum.json -D K=200 --target sm_90a --emit ir) || tl_fail "--emit ir of tma_colsum"
for want in "tensor map 0: X, box [64, 32] (innermost first), swizzle none" \
            "-> X_shared[0+:32, 0+:64] [TMA: cp.async.bulk.tensor, tensor map 0, prefetched]"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || tl_fail "tma_colsum: --emit ir lacks: $want"
done
"$TLC" compile tests/gpu/programs/tma_colsum.json -D K=200 --target sm_90a --emit meta > "$TMP/c.json" || tl_fail "tma_colsum meta"
python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["tensor_maps"][0]; assert (t["dtype"], t["swizzle"], t["global_strides"]) == ("float32", "none", [800]), t' \
  "$TMP/c.json" || tl_fail "tma_colsum: the map is not float32, unswizzled, 800-byte rows"
# a dynamic K: A's innermost dimension is dynamic (no cp.async, so no
# TMA: its row pitch is unknown), B's row pitch N * 2 is fixed; its map
# takes K from the arguments
python3 - "$DYN" "$TMP/k.json" <<'PY' || tl_fail "could not write the dynamic-K variant"
import json, sys
p = json.load(open(sys.argv[1]))
del p["constants"]["K"]
p["params"].insert(1, {"name": "K", "kind": "scalar", "dtype": "int32"})
json.dump(p, open(sys.argv[2], "w"))
PY
ir=$("$TLC" compile "$TMP/k.json" --target sm_90a --emit ir) || tl_fail "--emit ir of the dynamic-K variant"
printf '%s\n' "$ir" | grep -qF -- "-> A_shared[0+:128, 0+:64] (block)" || tl_fail "dynamic K: A is not a plain copy"
printf '%s\n' "$ir" | grep -qF -- "-> B_shared[0+:64, 0+:128] [TMA" || tl_fail "dynamic K: B is not TMA"
"$TLC" compile "$TMP/k.json" --target sm_90a --emit meta > "$TMP/k.meta" || tl_fail "--emit meta of the dynamic-K variant"
python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["tensor_maps"]; assert [(x["param"], x["global_dims"]) for x in t] == [("B", [1024, "K"])], t' \
  "$TMP/k.meta" || tl_fail "dynamic K: B's map does not take K from the arguments"
# packed sub-byte tiles (uint4 weights) move as bytes: the map's innermost
# dimension and box count bytes (K = 512 uint4 are 256 bytes, 64 a box row
# 32), the copy's coordinate is the element's divided by 2, and a stage's
# expected bytes are the packed tile's (128 x 64 uint4: 4096, with A's 16384)
ir=$("$TLC" compile examples/gemm_w4a16.json --target sm_90a --emit ir) || tl_fail "--emit ir of gemm_w4a16"
printf '%s\n' "$ir" | grep -F -- "-> B_shared" | grep -qF "[TMA" || tl_fail "gemm_w4a16: the uint4 tile is not TMA"
printf '%s\n' "$ir" | grep -qF "tensor map 1: B, box [32, 128] (innermost first), swizzle none" ||
  tl_fail "gemm_w4a16: the uint4 map's box does not count bytes"
printf '%s\n' "$ir" | grep -F -- "-> A_shared" | grep -qF "[TMA" || tl_fail "gemm_w4a16: the float16 tile is not TMA"
"$TLC" compile examples/gemm_w4a16.json --target sm_90a --emit meta > "$TMP/w4.meta" || tl_fail "--emit meta of gemm_w4a16"
python3 - "$TMP/w4.meta" <<'PY' || tl_fail "gemm_w4a16: the uint4 map's dimensions or pitch are not in bytes"
import json, sys
m = [t for t in json.load(open(sys.argv[1]))["tensor_maps"] if t["param"] == "B"][0]
assert m["dtype"] == "uint4" and m["global_dims"] == [256, 256] and m["global_strides"] == [256], m
assert m["box"] == [32, 128] and m["swizzle"] == "none", m
PY
src=$("$TLC" compile examples/gemm_w4a16.json --target sm_90a --emit cuda) || tl_fail "--emit cuda of gemm_w4a16"
printf '%s\n' "$src" | grep -F "&tl_tmap1)" | grep -qF ")))) / 2)" || tl_fail "gemm_w4a16: the uint4 coordinate is not in bytes"
printf '%s\n' "$src" | grep -qF '"r"(20480u)' || tl_fail "gemm_w4a16: a stage's expected bytes are not A's and the packed B's"
# every packed dtype: int4 and float4_e2m1 2 to a byte, uint2 4, uint1 8 (a box row of 128 elements: 64, 32
# and 16 bytes), the coordinates divided so, and a stage's bytes the four packed tiles' (2048 + 1024 + 512 + 2048)
P=tests/gpu/programs/packed_tma.json
ir=$("$TLC" compile $P --target sm_90a --emit ir) || tl_fail "--emit ir of $P"
for m in "0: W4, box [64, 32]" "1: W2, box [32, 32]" "2: W1, box [16, 32]" "3: F, box [64, 32]"; do
  printf '%s\n' "$ir" | grep -qF "tensor map $m (innermost first), swizzle none" || tl_fail "$P: no tensor map $m"
done
src=$("$TLC" compile $P --target sm_90a --emit cuda) || tl_fail "--emit cuda of $P"
for m in "0 2" "1 4" "2 8" "3 2"; do
  set -- $m
  printf '%s\n' "$src" | grep -F "&tl_tmap$1)" | grep -qF "(v_k * ((int)128LL)))) / $2)" ||
    tl_fail "$P: map $1's coordinate is not the element's divided by $2"
done
printf '%s\n' "$src" | grep -qF '"r"(5632u)' || tl_fail "$P: a stage's expected bytes are not the packed tiles'"
# a packed tile takes TMA only where the loop's other prefetched copies do too (gemm_w4a16_splitk's activations
# stay on cp.async, and so do its weights); gemm_w4a16_t's weights and activations are both bulk tensor copies
"$TLC" compile examples/gemm_w4a16_splitk.json --target sm_90a --emit ir | grep -qF "[not TMA: packed uint4 elements take TMA only where every copy the loop prefetches does (the copy into A_shared keeps cp.async)]" ||
  tl_fail "gemm_w4a16_splitk: its uint4 tile is not kept on cp.async beside the activations"
"$TLC" compile examples/gemm_w4a16_t.json --target sm_90a --emit ir | grep -qF "[warp-specialized: a producer warpgroup issues the copies" ||
  tl_fail "gemm_w4a16_t: its uint4 tile does not take TMA (no producer warpgroup)"
# a copy's "eviction_policy" (an L2 hint): the split-K C^T program's weights evict_first, by TMA with a producer
# warpgroup, by TMA without one, and by cp.async; the GEMM's B evict_last on the PTX back end; --emit ir says so
sed 's|"dst": "B_shared"}|"dst": "B_shared", "eviction_policy": "evict_first"}|' examples/gemm_w4a16_splitk_t.json >"$TMP/ev.json"
grep -qF '"eviction_policy": "evict_first"' "$TMP/ev.json" || tl_fail "eviction_policy: the sed found no copy into B_shared"
E="-D M=1 -D N=8192 -D K=8192 -D block_M=8 -D block_K=64 -D num_stages=4 -D split_k=8"
for o in "" "-D ws=false" "-D tma=false"; do
  "$TLC" compile "$TMP/ev.json" --target sm_90a $E $o --emit ir | grep -F -- "-> B_shared" | grep -qF "[L2 evict_first]" ||
    tl_fail "eviction_policy $o: --emit ir does not mark the copy"
  src=$("$TLC" compile "$TMP/ev.json" --target sm_90a $E $o --emit cuda) || tl_fail "eviction_policy $o: --emit cuda"
  printf '%s\n' "$src" | grep -qF 'asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(tl_pol));' ||
    tl_fail "eviction_policy $o: no createpolicy"
  case $o in
    *tma=false*) want='cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;' ;;
    *) want='cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%3, %4}], [%2], %5;' ;;
  esac
  printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "eviction_policy $o: the copy takes no cache hint"
  printf '%s\n' "$src" | grep 'cache_hint' | grep -vqF 's_B_shared' && tl_fail "eviction_policy $o: a copy other than B's takes a hint"
  "$TLC" compile "$TMP/ev.json" --target sm_90a $E $o -o "$TMP/ev.cubin" >/dev/null 2>&1 || tl_fail "eviction_policy $o: no cubin"
done
sed 's|"dst": "B_shared"}|"dst": "B_shared", "eviction_policy": "evict_last"}|' examples/gemm.json >"$TMP/gev.json"
"$TLC" compile "$TMP/gev.json" --target sm_90a --backend ptx --emit ptx -o "$TMP/gev.ptx" >/dev/null 2>&1 || tl_fail "evict_last: --emit ptx"
grep -qE '^\s*createpolicy.fractional.L2::evict_last.b64 %rd[0-9]+, 1.0;' "$TMP/gev.ptx" || tl_fail "evict_last: the PTX has no createpolicy"
grep -qE 'complete_tx::bytes.L2::cache_hint \[.*\], %rd[0-9]+;' "$TMP/gev.ptx" || tl_fail "evict_last: the PTX's TMA copy takes no hint"
"$TLC" compile "$TMP/gev.json" --target sm_90a --backend ptx -o "$TMP/gev.cubin" >/dev/null 2>&1 || tl_fail "evict_last: no cubin"
# and errors: an unknown policy; a policy on a copy that reads no tensor
sed 's|"dst": "B_shared"}|"dst": "B_shared", "eviction_policy": "evict_soon"}|' examples/gemm.json >"$TMP/bad.json"
"$TLC" check "$TMP/bad.json" 2>&1 | grep -qF "/eviction_policy: error: unknown eviction policy 'evict_soon'; it is \"evict_normal\", \"evict_first\" or \"evict_last\"" ||
  tl_fail "an unknown eviction policy is not refused"
sed 's|"src": "C_local", "dst": "C\[by \* block_M, bx \* block_N\]"}|"src": "C_local", "dst": "C[by * block_M, bx * block_N]", "eviction_policy": "evict_first"}|' \
  examples/gemm.json >"$TMP/bad2.json"
grep -qF evict_first "$TMP/bad2.json" || tl_fail "eviction_policy: the sed found no copy of C_local"
"$TLC" check "$TMP/bad2.json" 2>&1 | grep -qF "error: an eviction policy is for a copy that reads a tensor (global memory), not a fragment 'C_local'" ||
  tl_fail "an eviction policy on a copy from a fragment is not refused"
echo "tlc_tma: ok"
