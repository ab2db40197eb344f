#!/bin/sh
# tests/sh/tlc_lowp.sh - 8-bit gemms on the tensor cores (issue 12): the
# int8 and float8 examples compile to the tensor-core instructions of each
# target, shown by `--emit ir` and found in the PTX: wgmma m64nNk32 on
# sm_90a, mma.sync m16n8k32 on sm_89 (and int8 on sm_80), with the
# accumulators (DeepGEMM's two of the float8 example included) in registers
# in the mma layout and no spills; uint8 and float8_e5m2 take their own
# instruction types; a target without the instruction takes the
# per-element path and the ir says why; wgmma takes the 16-bit shapes
# counted in bytes (K tiles of 32, 64, 128 and panels of 128 columns,
# 4-warp tiles); its shape limits, and operands that are not K-major, fall
# back to mma.sync with the reason (mma.sync packs such operands byte by
# byte).
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here).
TLC=${TL_BUILD:-build}/bin/tlc
if ! "$TLC" targets 2>/dev/null | grep -q '^sm_80 '; then # NVRTC, not just an AMD toolchain
  echo "no NVRTC here: tlc compile cannot run" >&2
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT

# expect PROGRAM TARGET IR-TEXT PTX-TEXT [-D ...]: the ir shows IR-TEXT, the PTX
# holds PTX-TEXT ("-" for none: then it holds no mma at all), the cubin builds
# without spills
expect() {
  prog=$1 t=$2 want_ir=$3 want_ptx=$4
  shift 4
  ir=$("$TLC" compile "$prog" --target "$t" --emit ir "$@") || fail "$prog $t: --emit ir"
  printf '%s\n' "$ir" | grep -qF -- "$want_ir" || fail "$prog $t $*: the ir lacks '$want_ir':
$(printf '%s\n' "$ir" | grep gemm)"
  "$TLC" compile "$prog" --target "$t" --emit ptx -o "$tmp/k.ptx" "$@" 2>/dev/null || fail "$prog $t: --emit ptx"
  if [ "$want_ptx" = - ]; then
    grep -q "mma" "$tmp/k.ptx" && fail "$prog $t $*: the per-element path has an mma in its PTX"
  else
    grep -qF -- "$want_ptx" "$tmp/k.ptx" || fail "$prog $t $*: the PTX lacks $want_ptx"
  fi
  meta=$("$TLC" compile "$prog" --target "$t" --emit meta "$@") || fail "$prog $t: --emit meta"
  if [ "$want_ptx" != - ]; then
    spills=$(printf '%s\n' "$meta" | python3 -c 'import json, sys; r = json.load(sys.stdin)["resources"]; print(r["spill_store_bytes"] + r["spill_load_bytes"])')
    [ "$spills" = 0 ] || fail "$prog $t $*: $spills bytes of spills"
  fi
  echo "ok   $prog $t $* -> $want_ir"
}

i8=examples/gemm_int8.json f8=examples/gemm_fp8_blockscaled.json
expect $i8 sm_90a "gemm A_shared x B_shared^T -> C_local [wgmma m64nNk32 s32.s8.s8]" \
  "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8"
for t in sm_89 sm_80 sm_120; do
  expect $i8 $t "gemm A_shared x B_shared^T -> C_local [mma.sync m16n8k32 s32.s8.s8]" \
    "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
done
expect $i8 sm_75 "[per-element: the target has no matrix instructions (mma.sync from sm_80)]" -
ir=$("$TLC" compile $i8 --target sm_80 --emit ir)
printf '%s\n' "$ir" | grep -qF "alloc C_local: fragment int32[128, 128] in registers, mma layout" || fail "int8's C is not in the mma layout"
printf '%s\n' "$ir" | grep -qF "alloc B_shared: shared int8[128, 128] in shared memory at 49152, 3 stages, swizzled" ||
  fail "int8's B is not swizzled"

expect $f8 sm_90a "gemm A_shared x B_shared^T -> C_partial [wgmma m64nNk32 f32.e4m3.e4m3]" \
  "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
# (not sm_90 here: under AddressSanitizer, `tlc compile` of this program for
# sm_90 to PTX ends with LeakSanitizer's tracer crashing on a bogus dynamic
# TLS range after NVRTC ran, a failure of the sanitizer, not of the code)
for t in sm_89 sm_120; do
  expect $f8 $t "gemm A_shared x B_shared^T -> C_partial [mma.sync m16n8k32 f32.e4m3.e4m3]" \
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
done
expect $f8 sm_86 "[per-element: the target has no mma.sync with float8 operands (sm_89 and later)]" -
# the float8 gemm with per-tensor scales (torch._scaled_mm's operation): one
# accumulator, in 128 x 128 tiles as written and 128 x 256 ones (two consumer
# warpgroups of m64n256, 128 float32 accumulators a thread, no spills), the
# bfloat16 and float32 outputs, and the bench's copy with TMA stores
pt=examples/gemm_fp8.json
expect $pt sm_90a "gemm A_shared x B_shared^T -> C_local [wgmma m64nNk32 f32.e4m3.e4m3]" \
  "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
expect $pt sm_90a "[1 x m64n256 per warpgroup and k32 step" "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" \
  -D block_N=256
expect $pt sm_89 "gemm A_shared x B_shared^T -> C_local [mma.sync m16n8k32 f32.e4m3.e4m3]" \
  "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
for out in bf16out f32out; do
  expect tests/gpu/programs/gemm_fp8_$out.json sm_90a "[1 x m64n256 per warpgroup and k32 step" \
    "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" -D block_N=256
done
expect bench/programs/gemm_fp8_raster.json sm_90a "[TMA store: staged in shared memory" \
  "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" -D block_N=256 -D tma_store=true
"$TLC" compile $pt --target sm_90a --emit ir -D block_N=256 |
  grep -qF "alloc C_local: fragment float32[128, 256] in registers, mma layout, 128 per thread" ||
  fail "$pt block_N=256: C is not 128 registers a thread in the mma layout"
# DeepGEMM's promotion: both accumulators in registers, in the mma layout, with
# scale_a's rows as a row vector (in registers under wgmma's one warp along N),
# or read from the tensor element by element in the loop
python3 - "$f8" "$tmp/direct.json" <<'PY' || fail "could not write the direct-read variant"
import json, sys
p = json.load(open(sys.argv[1]))
body = p["kernel"]["body"]
del body[4]  # sa
pl = body[5]["body"]
del pl[3]  # the copy into sa
pl[4]["body"] = ["C_acc[i, j] = C_acc[i, j] + C_partial[i, j] * (scale_a[by * block_M + i, k * block_K // 128] * sb)"]
json.dump(p, open(sys.argv[2], "w"))
PY
expect "$tmp/direct.json" sm_90a "[wgmma m64nNk32 f32.e4m3.e4m3]" "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
for prog in $f8 "$tmp/direct.json"; do
  for t in sm_90a sm_89; do
    ir=$("$TLC" compile "$prog" --target $t --emit ir)
    for f in C_partial C_acc; do
      printf '%s\n' "$ir" | grep -qF "alloc $f: fragment float32[128, 128] in registers, mma layout, 64 per thread" ||
        fail "$prog $t: $f is not in registers in the mma layout"
    done
  done
done
"$TLC" compile $f8 --target sm_90a --emit ir | grep -qF "alloc sa: fragment float32[128] in registers, mma-rows layout" ||
  fail "scale_a's rows are not a row vector in registers under wgmma"

# 8-bit tiles in the 128-byte swizzle (rows of 128 bytes, or wgmma's panels of
# 128 columns) are TMA copies from sm_90: int8-typed maps with 128-element boxes,
# one bulk copy per panel; a 64-wide K tile in the 64-byte swizzle, one copy
for prog in $i8 $f8; do
  ir=$("$TLC" compile $prog --target sm_90a --emit ir)
  for op in A B; do
    printf '%s\n' "$ir" | grep -F -- "-> ${op}_shared" | grep -qF "[TMA: cp.async.bulk.tensor, tensor map" ||
      fail "$prog: $op's 8-bit tile is not a TMA copy"
  done
done
"$TLC" compile $i8 --target sm_90a --emit meta -D block_K=256 | python3 -c '
import json, sys
maps = json.load(sys.stdin)["tensor_maps"]
assert [(m["param"], m["dtype"], m["box"], m["swizzle"]) for m in maps] == \
    [("A", "int8", [128, 128], "128B"), ("B", "int8", [128, 128], "128B")], maps' ||
  fail "int8's tensor maps are not int8 boxes of 128 x 128 in the 128-byte swizzle"
"$TLC" compile $i8 --target sm_90a --emit cuda -D block_K=256 -o "$tmp/k256.cu" || fail "--emit cuda, block_K=256"
# the second panel: 128 x 128 bytes on in shared memory, 128 columns on in the tensor
grep -F "tl_smem_addr(s_A_shared) + 16384u" "$tmp/k256.cu" | grep -qF "256LL)))) + 128))" ||
  fail "block_K=256: no bulk copy of A's second 128-column panel"
# (k_group 1: one K tile of 64 bytes a stage, where compiler/pass_kgroup.c would hold two)
python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))
for s in p["kernel"]["body"]:
    if s["op"] == "pipelined": s["k_group"] = 1
json.dump(p, open(sys.argv[2], "w"))' $i8 "$tmp/i8_k1.json" || fail "k_group 1"
"$TLC" compile "$tmp/i8_k1.json" --target sm_90a --emit meta -D block_K=64 | python3 -c '
import json, sys
maps = json.load(sys.stdin)["tensor_maps"]
assert [(m["param"], m["box"], m["swizzle"]) for m in maps] == [("A", [64, 128], "64B"), ("B", [64, 128], "64B")], maps' ||
  fail "block_K=64: the 64-byte rows are not TMA copies in the 64-byte swizzle"

# uint8 and float8_e5m2 take their own types
sed 's/"int8"/"uint8"/g' $i8 >"$tmp/u8.json"
expect "$tmp/u8.json" sm_90a "[wgmma m64nNk32 s32.u8.u8]" "wgmma.mma_async.sync.aligned.m64n128k32.s32.u8.u8"
expect "$tmp/u8.json" sm_80 "[mma.sync m16n8k32 s32.u8.u8]" "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32"
sed 's/float8_e4m3/float8_e5m2/g' $f8 >"$tmp/e5.json"
expect "$tmp/e5.json" sm_90a "[wgmma m64nNk32 f32.e5m2.e5m2]" "wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e5m2"
expect "$tmp/e5.json" sm_89 "[mma.sync m16n8k32 f32.e5m2.e5m2]" "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32"

# wgmma's shapes as for 16-bit operands, counted in bytes: K tiles of 32 and 64
# take the 32- and 64-byte swizzle, wider ones panels of 128 columns; 4 warps
# issue two m64 instructions per warpgroup (row tiles interleaved); a K tile
# that is none of those falls back to mma.sync, saying why
expect $i8 sm_90a "[wgmma m64nNk32 s32.s8.s8] [1 x m64n128 per warpgroup and k32 step, wait_group 1" \
  "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8" -D block_K=32
expect $i8 sm_90a "[wgmma m64nNk32 s32.s8.s8] [1 x m64n128 per warpgroup and k32 step, wait_group 1" \
  "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8" -D block_K=64
expect $i8 sm_90a "[wgmma m64nNk32 s32.s8.s8] [1 x m64n128 per warpgroup and k32 step, wait_group 1" \
  "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8" -D block_K=256
expect $i8 sm_90a "[mma.sync m16n8k32 s32.s8.s8] [not wgmma: the K tile is 96: a K-major operand is stored in the 32-, 64- or 128-byte swizzle (K tile 32, 64 or 128) or as panels of 128 (a multiple of 128)]" \
  "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" -D block_K=96
expect $f8 sm_90a "[wgmma m64nNk32 f32.e4m3.e4m3] [2 x m64n64 per warpgroup and k32 step, wait_group 1" \
  "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3" -D threads=128 -D block_N=64
"$TLC" compile $f8 --target sm_90a --emit ir -D threads=128 -D block_N=64 |
  grep -qF "alloc sa: fragment float32[128] in registers, mma-rows layout, 4 per thread (warps 4x1, tiles 2x8, row tiles interleaved)" ||
  fail "scale_a's rows do not follow C's interleaved row tiles under 4-warp wgmma"
# DeepGEMM's promotion reads C_partial after every gemm: it runs one iteration
# late (pass_pipeline.c's lag_gemm), after the next K block's gemm is issued,
# on the other of two register copies of C_partial; trips of 4 K blocks end
# with wait_group 0, so ptxas serializes no wgmma (C7514/C7517 in its log),
# and nothing spills, for 8 and 4 warps and K tiles of 128 and 64
for d in "" "-D threads=128 -D block_N=64" "-D block_K=64" "-D num_stages=4"; do
  ir=$("$TLC" compile $f8 --target sm_90a --emit ir $d) || fail "$f8 $d: --emit ir"
  printf '%s\n' "$ir" | grep -qF "[tail one iteration late: it runs after the next iteration's gemm is issued; trips of 4]" ||
    fail "$f8 $d: the promotion does not run one iteration late"
  printf '%s\n' "$ir" | grep -qF "alloc C_partial: fragment float32[128, " ||
    fail "$f8 $d: no C_partial"
  printf '%s\n' "$ir" | grep "alloc C_partial" | grep -qF ", 2 copies (one per iteration parity)" ||
    fail "$f8 $d: C_partial has not two copies"
  log=$("$TLC" compile $f8 --target sm_90a --emit meta -D M=4096 -D N=4096 -D K=4096 $d) || fail "$f8 $d: --emit meta"
  printf '%s\n' "$log" | grep -qE "C751[0-9]|serialized|injected" && fail "$f8 $d: ptxas serializes the wgmma: $log"
  printf '%s\n' "$log" | grep -qF '0 bytes spill stores' || fail "$f8 $d: spills"
done
"$TLC" compile $f8 --target sm_90a --emit cuda -o "$tmp/lag.cu" || fail "$f8: --emit cuda"
grep -qF "float r_C_partial_lag[2][64];" "$tmp/lag.cu" || fail "$f8: C_partial's two copies are not declared"
[ "$(grep -c "wgmma.wait_group.sync.aligned 1;" "$tmp/lag.cu")" = 4 ] || fail "$f8: not 4 gemms a trip waiting for 1"
# the late promotion's scale loads (the copy of scale_a's column, the let of
# scale_b's element) are issued before each iteration's barrier into one of
# two register copies, which the late tail reads (pass_pipeline.c's
# lag_loadable): 4 of each a trip, none left in the tails
ir=$("$TLC" compile $f8 --target sm_90a --emit ir) || fail "$f8: --emit ir"
[ "$(printf '%s\n' "$ir" | grep -cF "[loaded as its iteration starts, before the barrier or the wait for the stage, 2 copies in turn, for the late tail]")" = 2 ] ||
  fail "$f8: the scale loads are not both issued an iteration early"
printf '%s\n' "$ir" | grep "alloc sa:" | grep -qF ", 2 copies (one per iteration parity)" || fail "$f8: sa has not two copies"
grep -qF "float r_sa_lag[2][2];" "$tmp/lag.cu" || fail "$f8: sa's two copies are not declared"
grep -qF "float tl_lagv_sb[2];" "$tmp/lag.cu" || fail "$f8: sb's two copies are not declared"
[ "$(grep -c "tl_lagv_sb\[[01]\] = " "$tmp/lag.cu")" = 4 ] || fail "$f8: not 4 loads of sb a trip"
[ "$(grep -c "const float v_sb = tl_lagv_sb\[[01]\];" "$tmp/lag.cu")" = 8 ] ||
  fail "$f8: the tails (4 in a trip, 3 where it ends early, 1 after the loop) do not all read sb's copies"
[ "$(grep -c "g_scale_b\[" "$tmp/lag.cu")" = 4 ] || fail "$f8: scale_b is read outside the early loads"
# the late promotion on TMA is warp-specialized (pass_wspec.c): the producer
# warpgroup issues the copies, and the program's warpgroups free each stage
# once the next iteration's gemm is issued (its wait_group 1 returned);
# without the producer ("warp_specialize": false) the scale loads are still
# issued an iteration early
ir=$("$TLC" compile $f8 --target sm_90a --emit ir -D M=4096 -D N=4096 -D K=4096) || fail "$f8 4096: --emit ir"
printf '%s\n' "$ir" | grep -F "loop pipelined" | grep -F "[tail one iteration late" | grep -qF "[warp-specialized" ||
  fail "$f8: the loop with the late promotion is not warp-specialized"
grep -qF "setmaxnreg.inc.sync.aligned.u32 232;" "$tmp/lag.cu" || fail "$f8: the program's warpgroups do not take 232 registers"
[ "$(grep -c "(tl_g - 1) % 4" "$tmp/lag.cu")" = 4 ] || fail "$f8: not 4 stages freed a trip, each after the next gemm"
fr=bench/programs/gemm_fp8_blockscaled_raster.json
ir=$("$TLC" compile $fr --target sm_90a --emit ir -D warp_specialize=false) || fail "$fr: --emit ir"
printf '%s\n' "$ir" | grep -qF '[not warp-specialized: its pipelined loop says "warp_specialize": false]' ||
  fail "$fr warp_specialize=false: warp-specialized"
[ "$(printf '%s\n' "$ir" | grep -cF "[loaded as its iteration starts")" = 2 ] ||
  fail "$fr warp_specialize=false: the scale loads are not issued an iteration early"
# "overlap": false keeps the promotion in place (and so loads nothing early)
ir=$("$TLC" compile $fr --target sm_90a --emit ir -D late=false) || fail "$fr: --emit ir"
printf '%s\n' "$ir" | grep -qF '[tail not late: the loop says "overlap": false]' || fail "$fr late=false: the tail runs late"
printf '%s\n' "$ir" | grep -qF "[loaded as its iteration starts" && fail "$fr late=false: loads issued early"
printf '%s\n' "$ir" | grep -F "loop pipelined" | grep -qF "[warp-specialized" || fail "$fr late=false: not warp-specialized"
# with the program's scale_a read element by element in the promotion (the
# direct-read variant above) at M = 1000, where those reads keep their rows'
# bounds guard, the second copy leaves too few registers: the cubin is built
# again without it, and its log says so (at M = 1024 the reads are proven
# inside scale_a, and the first build fits)
meta=$("$TLC" compile "$tmp/direct.json" --target sm_90a --emit meta -D M=1000) || fail "direct: --emit meta"
printf '%s\n' "$meta" | grep -qF "tlc: the first build, with a pipelined loop's tail one iteration late, spilled registers; built again without" ||
  fail "direct: the build that spilled with the late tail is not built again without it"
# a tail that touches shared memory stays where it is, and the ir says why
python3 - "$f8" "$tmp/smem.json" <<'PY' || fail "could not write the variant whose promotion reads shared memory"
import json, sys
p = json.load(open(sys.argv[1]))
body = p["kernel"]["body"]
body[4] = {"op": "alloc_shared", "name": "sa", "shape": ["block_M"], "dtype": "float32"}
json.dump(p, open(sys.argv[2], "w"))
PY
ir=$("$TLC" compile "$tmp/smem.json" --target sm_90a --emit ir) || fail "smem: --emit ir"
printf '%s\n' "$ir" | grep -qF "[tail not late: a statement of the loop besides the gemm and its copies touches shared memory]" ||
  fail "smem: a promotion reading shared memory runs late, or the ir does not say why not"
printf '%s\n' "$ir" | grep -qF "k32 step, wait_group 0]" || fail "smem: the gemm does not wait for 0"
# the int8 gemm keeps one group in flight across K tiles (above); a float16 one
# whose C the loop reads and writes waits for 0
# sm_90 without the 'a': mma.sync, and the ir names the variant with wgmma
"$TLC" compile $i8 --target sm_90 --emit ir |
  grep -qF "[mma.sync m16n8k32 s32.s8.s8] [not wgmma: this target has none; sm_90a has]" ||
  fail "sm_90's int8 gemm does not say that sm_90a has wgmma"
# integer wgmma takes N of 8, 16, 24 or a multiple of 16 (m64n48k32 here)
expect $i8 sm_90a "[wgmma m64nNk32 s32.s8.s8]" "wgmma.mma_async.sync.aligned.m64n48k32.s32.s8.s8" -D block_N=48

# operands that are not K-major (A stored [K, M], B [K, N]): mma.sync packs them byte
# by byte (ldmatrix has no 8-bit transpose); wgmma cannot take them
km=tests/gpu/programs/gemm_int8_kmkn.json
expect $km sm_80 "gemm A_shared^T x B_shared -> C_local [mma.sync m16n8k32 s32.s8.s8] (block)" \
  "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
expect $km sm_90a "[mma.sync m16n8k32 s32.s8.s8] [not wgmma: A is stored [K, M] (transpose_A): only a K-major A is lowered to wgmma]" \
  "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
"$TLC" compile $km --target sm_80 --emit ptx -o "$tmp/km.ptx" 2>/dev/null || fail "--emit ptx of $km"
grep -q "ldmatrix" "$tmp/km.ptx" && fail "$km: ldmatrix loads an operand that is not K-major"
echo "tlc_lowp: ok"
