#!/bin/sh
# tests/sh/tlc_cluster.sh - thread-block clusters and TMA multicast
# (compiler/pass_cluster.c) without a GPU: a pipelined loop's "cluster"
# launches the kernel in clusters (__cluster_dims__, launch.cluster) and
# multicasts each bulk tensor copy that every block of a cluster makes
# alike (A's tile across blocks along N, B's along M), each block copying
# its part of the box (a tensor map of half the rows) into every block;
# with a producer warpgroup every consumer warp frees the stage in every
# block (mapa + a remote mbarrier arrival, the "free" mbarriers expecting
# twice the arrivals), without one each iteration's barrier is a cluster
# barrier; the block variables follow the clusters' raster order; a grid
# that is not whole clusters, sm_80 and a kernel whose loop says [1] keep
# their copies unicast, and `--emit ir` says why.  cluster_reduce: a
# fragment combined across a cluster's blocks into rank 0 through
# distributed shared memory, a no-op for a cluster of one block.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here).
cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
tl_init tlc_cluster.sh
tl_need_target sm_90a "tlc compile cannot run"
TLC=$TL_BUILD/bin/tlc
G="tests/gpu/programs/gemm_cluster.json -D M=1000 -D N=1000 -D K=200"
src=$("$TLC" compile $G --target sm_90a --emit cuda) || tl_fail "--emit cuda for sm_90a"
for want in "__cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)" \
            'unsigned tl_crank; asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(tl_crank));' \
            "const int v_bx = (int)(tl_rem / tl_rows) * 2 + (int)(blockIdx.x % 2u);" \
            "const unsigned tl_lin = (blockIdx.x / 2u) + blockIdx.y * (gridDim.x / 2u);" \
            "mbarrier.init.shared::cta.b64 [%0], 16;" \
            'mapa.shared::cluster.u32 tl_ra, %0, %1;\nmbarrier.arrive.shared::cluster.b64 _, [tl_ra];' \
            'bytes.multicast::cluster [%0], [%1, {%4, %5}], [%2], %3;" :: "r"(tl_smem_addr(s_A_shared) + 0u + tl_crank * 8192u)' \
            '"h"((unsigned short)0x3), "r"((int)(((int)(v_k * ((int)64LL))))), "r"((int)((((int)(v_by * ((int)128LL)))) + (int)tl_crank * 64))'; do
  printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "the sm_90a source lacks: $want"
done
# B (its source uses bx) is unicast: 4 panels, each a plain bulk tensor copy
[ "$(printf '%s\n' "$src" | grep -c 'multicast::cluster')" = 1 ] || tl_fail "not one multicast copy (A's)"
# a cluster barrier after the mbarriers' init, in the producer before it returns and at the kernel's end
[ "$(printf '%s\n' "$src" | grep -c 'barrier.cluster.arrive.release')" = 3 ] || tl_fail "not 3 cluster barriers"
printf '%s\n' "$src" | grep -q "tl_tile" && tl_fail "a clustered kernel is persistent"
"$TLC" compile $G --target sm_90a --emit ptx -o "$TMP/k.ptx" 2>/dev/null || tl_fail "--emit ptx for sm_90a"
for want in "multicast::cluster" "barrier.cluster.arrive.release" "barrier.cluster.wait.acquire" "mapa.shared::cluster.u32" \
            "%cluster_ctarank" ".explicitcluster" ".reqnctapercluster 2, 1, 1" ".maxntid 384, 1, 1" "wgmma.mma_async"; do
  grep -qF -- "$want" "$TMP/k.ptx" || tl_fail "the sm_90a PTX lacks: $want"
done
"$TLC" compile $G --target sm_90a --emit meta > "$TMP/m.json" || tl_fail "--emit meta"
"$TLC" compile $G -D cluster_x=1 -D cluster_y=2 -D M=900 --target sm_90a --emit meta > "$TMP/my.json" ||
  tl_fail "--emit meta, cluster_y=2"
python3 - "$TMP/m.json" "$TMP/my.json" <<'PY' || tl_fail "the metadata of the clustered kernels"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["launch"]["cluster"] == [2] and m["launch"]["grid"] == [4, 8] and "persistent" not in m["launch"], m["launch"]
boxes = [(t["param"], t["box"]) for t in m["tensor_maps"]]
assert boxes == [("A", [64, 64]), ("B", [64, 64])], boxes  # A's half box: 64 of its 128 rows
assert m["resources"]["spill_store_bytes"] == 0, m["resources"]
m = json.load(open(sys.argv[2]))
assert m["launch"]["cluster"] == [1, 2] and m["launch"]["grid"] == [4, 8], m["launch"]
boxes = [(t["param"], t["box"]) for t in m["tensor_maps"]]
assert boxes == [("A", [64, 128]), ("B", [64, 32])], boxes  # B's half box: 32 of its 64 K rows
PY
ir=$("$TLC" compile $G --target sm_90a --emit ir) || tl_fail "--emit ir"
for want in "[thread-block cluster 2x1x1: copies multicast, each stage freed in every block]" \
            "[multicast: each block of a cluster of 2 copies 1/2 of the box into every block]" \
            "[not multicast: its source depends on bx, which differs between the blocks of a cluster]"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || tl_fail "--emit ir lacks: $want"
done
"$TLC" compile $G --target sm_90a --emit cuda --dump cluster 2>&1 >/dev/null | grep -qF "# IR after cluster" ||
  tl_fail "--dump cluster"
# without the producer warpgroup: every iteration opens with a cluster barrier, and the loop is between two
src=$("$TLC" compile $G -D warp_specialize=false --target sm_90a --emit cuda) || tl_fail "warp_specialize=false"
printf '%s\n' "$src" | grep -A2 -F 'for (long long tl_c0 = 0; tl_c0 < tl_n0; tl_c0++) {' |
  grep -qF 'barrier.cluster.arrive.release' || tl_fail "warp_specialize=false: the iteration's barrier is not the cluster's"
[ "$(printf '%s\n' "$src" | grep -c 'barrier.cluster.arrive.release')" = 5 ] ||
  tl_fail "warp_specialize=false: not 5 cluster barriers (init, before, in and after the loop, the end)"
# four blocks along N: a quarter of A's rows each
"$TLC" compile $G -D cluster_x=4 --target sm_90a --emit cuda | grep -qF '"h"((unsigned short)0xf)' ||
  tl_fail "cluster_x=4: not a mask of 4 blocks"
# refusals: 5 blocks along N (no whole clusters), sm_80 (no TMA), a kernel's cluster that the loop declines
ir=$("$TLC" compile tests/gpu/programs/gemm_cluster.json -D M=1000 -D N=1100 -D K=200 --target sm_90a --emit ir) ||
  tl_fail "N=1100: --emit ir"
printf '%s\n' "$ir" | grep -qF "[no multicast across a cluster: grid dimension 0 is not a constant multiple of 2 (the launch could not form whole clusters)]" ||
  tl_fail "N=1100: the refusal"
"$TLC" compile tests/gpu/programs/gemm_cluster.json -D M=1000 -D N=1100 -D K=200 --target sm_90a --emit meta |
  python3 -c 'import json, sys; l = json.load(sys.stdin)["launch"]; assert "cluster" not in l and l["persistent"] == 1, l' ||
  tl_fail "N=1100: a cluster in the metadata, or not persistent again"
"$TLC" compile $G --target sm_80 --emit ir | grep -qF "[no multicast across a cluster: the target has no Tensor Memory Accelerator (sm_90 and later)]" ||
  tl_fail "sm_80: the refusal"
"$TLC" compile $G --target sm_80 --emit cuda | grep -q "__cluster_dims__" && tl_fail "sm_80: a cluster"
python3 - tests/gpu/programs/gemm_cluster.json "$TMP/k.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["kernel"]["cluster"] = [2, 1]
for s in p["kernel"]["body"]:
    if isinstance(s, dict) and s.get("op") == "pipelined":
        s["cluster"] = [1]
json.dump(p, open(sys.argv[2], "w"))
PY
out=$("$TLC" compile "$TMP/k.json" -D M=1000 -D N=1000 -D K=200 --target sm_90a --emit ir) || tl_fail "kernel cluster: --emit ir"
printf '%s\n' "$out" | grep -qF '[no multicast across a cluster: its "cluster" is one block (its copies stay unicast)]' ||
  tl_fail "kernel cluster, loop [1]: the refusal"
src=$("$TLC" compile "$TMP/k.json" -D M=1000 -D N=1000 -D K=200 --target sm_90a --emit cuda) || tl_fail "kernel cluster: cuda"
printf '%s\n' "$src" | grep -qF "__cluster_dims__(2, 1, 1)" || tl_fail "kernel cluster: not launched in clusters"
printf '%s\n' "$src" | grep -q "multicast" && tl_fail "kernel cluster, loop [1]: a multicast copy"
# cluster_reduce (proto/tile-ir-v1.md 5.6): the kernel's cluster given by constants; each block lays its
# register fragment out in the scratch (a fragment in shared memory as it is), a cluster barrier, rank 0 reads
# the others' copies through distributed shared memory and combines them in rank order, a second cluster barrier
R=tests/gpu/programs/cluster_reduce.json
src=$("$TLC" compile $R --target sm_90a --emit cuda) || tl_fail "cluster_reduce: --emit cuda"
for want in "__cluster_dims__(2, 2, 1)" "tl_cs[tl_r * 128 + tl_tid] = r_F[tl_r];" "float *const tl_cs = (float *)s_Q;" \
            'asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(tl_crk));' "if (tl_crk == 0) {" \
            "for (unsigned tl_q = 1; tl_q < 4u; tl_q++) {" \
            'asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(tl_ra) : "r"(tl_cb), "r"(tl_q));' \
            'asm volatile("ld.shared::cluster.b32 %0, [%1];"' "r_F[tl_r] = tl_a + tl_b;" "r_G[tl_r] = fmaxf(tl_a, tl_b);" \
            "r_H[tl_r] = fminf(tl_a, tl_b);" "r_I[tl_r] = (int)((unsigned)tl_a + (unsigned)tl_b);" \
            "tl_cs[tl_e] = tl_a + tl_b;"; do
  printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "cluster_reduce: the sm_90a source lacks: $want"
done
# two cluster barriers per cluster_reduce (5 of them), none else: no multicast, no barrier at the end
[ "$(printf '%s\n' "$src" | grep -c 'barrier.cluster.arrive.release')" = 10 ] || tl_fail "cluster_reduce: not 10 cluster barriers"
"$TLC" compile $R -D cx=4 -D cy=1 -D gx=8 --target sm_90a --emit meta |
  python3 -c 'import json, sys; l = json.load(sys.stdin); assert l["launch"]["cluster"] == [4, 1] and l["backend"] == "cuda", l' ||
  tl_fail "cluster_reduce cx=4: the launch's cluster"
"$TLC" compile $R --target sm_90a --emit ir | grep -qF "cluster_reduce max G[0+:32, 0+:64] [into the block of rank 0 of the cluster, in rank order]" ||
  tl_fail "cluster_reduce: --emit ir"
# a cluster of one block: nothing to combine, on sm_80 too (no clusters there), and on the PTX back end
src=$("$TLC" compile $R -D cx=1 -D cy=1 --target sm_80 --emit cuda) || tl_fail "cluster_reduce, one block, sm_80"
printf '%s\n' "$src" | grep -qF "/* cluster_reduce F: a cluster of one block */" || tl_fail "cluster_reduce, one block: not a no-op"
printf '%s\n' "$src" | grep -q "barrier.cluster" && tl_fail "cluster_reduce, one block: a cluster barrier"
"$TLC" compile $R -D cx=1 -D cy=1 --target sm_90a --backend ptx --emit ptx -o "$TMP/one.ptx" || tl_fail "cluster_reduce, one block, PTX"
"$TLC" compile $R --target sm_80 --emit cuda 2>"$TMP/err" && tl_fail "cluster_reduce, a cluster of 4 on sm_80: built"
grep -qF "thread-block clusters need sm_90 or later" "$TMP/err" || tl_fail "cluster_reduce on sm_80: $(cat "$TMP/err")"
# the interpreter: a dynamic grid not a multiple of the cluster is a launch error; clusters of 2 along x, rank 0
# (the even block) gets its pair's sum, rank 1 keeps its own
cat > "$TMP/dyn.json" <<'EOF'
{"tlir": 1, "name": "dyn", "params": [{"name": "n", "kind": "scalar", "dtype": "int32"},
  {"name": "Y", "kind": "tensor", "dtype": "float32", "shape": ["n", 32]}],
 "kernel": {"grid": ["n"], "threads": 32, "block_vars": ["bx"], "cluster": [2], "body": [
  {"op": "alloc_fragment", "name": "F", "shape": [32], "dtype": "float32"},
  {"op": "parallel", "vars": ["i"], "extents": [32], "body": ["F[i] = float32(bx * 32 + i)"]},
  {"op": "cluster_reduce", "type": "sum", "dst": "F"},
  {"op": "copy", "src": "F", "dst": "Y[bx, 0]"}]}}
EOF
"$TLC" run "$TMP/dyn.json" --interpret --arg n=3 --out Y="$TMP/y.npy" 2>"$TMP/err" && tl_fail "n=3: ran"
grep -qF "error: grid dimension 0 is 3, which is not a multiple of the cluster's 2" "$TMP/err" || tl_fail "n=3: $(cat "$TMP/err")"
"$TLC" run "$TMP/dyn.json" --interpret --arg n=4 --out Y="$TMP/y.npy" || tl_fail "n=4: the interpreter"
python3 - "$TMP/y.npy" <<'PY' || tl_fail "n=4: the interpreter's sums"
import struct, sys
raw = open(sys.argv[1], "rb").read()
hl = struct.unpack("<H", raw[8:10])[0]
y = struct.unpack("<128f", raw[10 + hl:])
for b in range(4):
    for i in range(32):
        want = (64 * b + 32 + 2 * i) if b % 2 == 0 else 32 * b + i  # rank 0: its own and block b + 1's
        assert y[32 * b + i] == want, (b, i, y[32 * b + i], want)
PY
# the W4A16 GEMM with its split-K runs one cluster: no workspace, one kernel
"$TLC" compile tests/gpu/programs/gemm_w4a16_cluster.json --target sm_90a --emit meta |
  python3 -c 'import json, sys; m = json.load(sys.stdin); assert "kernels" not in m and not m.get("workspaces") and m["launch"]["cluster"] == [1, 1, 4], m["launch"]' ||
  tl_fail "gemm_w4a16_cluster: the metadata"
exit 0
