#!/bin/sh
# tests/sh/tlc_dequant.sh - packed weights dequantized 8 to 32 at a time
# (issue 12; pass_place.c: dequant_loop, emit_cuda.c: op_parallel_vec):
# the loops that qualify are marked in `--emit ir` and their PTX converts
# packed words with prmt + lop3 + add.f16x2 (no per-element convert, no
# multiplier: the magic number's exponent sits at each element's bits), does
# its float16 arithmetic on pairs (mul/sub.rn.f16x2, never fused), bfloat16
# with fma.rn.bf16x2 from sm_80, and stores 16 bytes at a time; a loop that
# uses j outside an index, an AMD target, and a bfloat16 loop before sm_80
# keep the scalar path; a wgmma gemm reading the dequantized tile rotates
# it and keeps its group in flight (wait_group 1), and one that clears its
# accumulator does not; the column of scales is prefetched through
# registers.  The exact conversion tables are test_dtype's.  tlc run's
# --flush-l2 (the benchmark's cold timing) is refused without --time.
# Weights stored in the order the threads read them take their pairs through
# a map (lop3 alone where a pair is 16 bits apart), and orders no map serves
# keep the scalar path.
# A scale that a whole vector of 16 or 32 shares is read once for them, the
# scale's group (a floor division by a power of two) is a shift, and a
# cooperative loop whose threads divide its elements has a constant count;
# the loop's first copies go before the scales' loads ahead of it.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here).
TLC=${TL_BUILD:-build}/bin/tlc
if ! "$TLC" targets 2>/dev/null | grep -q '^sm_80 '; then # NVRTC, not just an AMD toolchain
  echo "no NVRTC here: tlc compile cannot run" >&2
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
. tests/sh/lib.sh # tl_w4a16_unrounded
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
W=examples/gemm_w4a16.json NW=examples/gemm_w4a16_narrow.json G=tests/golden/dequant_pairs.json

ir() { "$TLC" compile "$@" --emit ir || fail "--emit ir $*"; }

# the W4A16 benchmark's cold timing (tlc run --time N --flush-l2): only with --time
"$TLC" run $W --interpret --flush-l2 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -qF -- '--flush-l2 goes with --time N' "$tmp/err" || fail "--flush-l2 without --time: exit $rc: $(cat "$tmp/err")"
"$TLC" run $W --device cuda --flush-l2 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -qF -- '--flush-l2 goes with --time N' "$tmp/err" || fail "--flush-l2 without --time: exit $rc: $(cat "$tmp/err")"
for f in --flush-l2=clean --flush-l2=dirty; do
  "$TLC" run $W --device cuda $f >/dev/null 2>"$tmp/err"; rc=$?
  [ $rc = 2 ] && grep -qF -- '--flush-l2 goes with --time N' "$tmp/err" || fail "$f without --time: exit $rc: $(cat "$tmp/err")"
done
"$TLC" run $W --device cuda --time 2 --flush-l2=warm >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -qF -- 'unknown option' "$tmp/err" || fail "--flush-l2=warm: exit $rc: $(cat "$tmp/err")"
# the clean flush's read kernel is PTX the driver compiles: ptxas takes it, and it reads 16 bytes a thread
sed -n '/^static const char flush_read_ptx/,/^    "}\\n";/p' compiler/tlc.c | sed -n 's/^ *"\(.*\)\\n"[;]*$/\1/p' >"$tmp/fr.ptx"
grep -qF 'ld.global.v4.u32' "$tmp/fr.ptx" || fail "the flush's read kernel does not read 16 bytes a thread"
if [ -n "${PTXAS:-}" ] || PTXAS=$(command -v ptxas || ls /usr/local/cuda/bin/ptxas 2>/dev/null); then
  "$PTXAS" -arch=sm_90 "$tmp/fr.ptx" -o "$tmp/fr.cubin" 2>"$tmp/err" || fail "ptxas refuses the flush's read kernel: $(cat "$tmp/err")"
fi
ptx() { "$TLC" compile "$@" --emit ptx -o "$tmp/k.ptx" 2>/dev/null || fail "--emit ptx $*"; }
has() { grep -qF -- "$1" "$tmp/k.ptx" || fail "$2: the PTX lacks $1"; }

# the W4A16 examples: 32 at a time, the PTX's conversion and pair arithmetic
for t in sm_80 sm_90a; do
  ir $W --target $t | grep -qF '[32 at a time' || fail "$W $t: the dequant loop is not 32 at a time"
  ptx $W --target $t
  for i in prmt.b32 lop3.b32 add.rn.f16x2 mul.rn.f16x2 st.shared.v2.u64; do has $i "$W $t"; done
  # T(P) - 8 folds into the conversion: no sub.f16x2; the conversion adds, it does not multiply
  grep -q 'sub.rn.f16x2' "$tmp/k.ptx" && fail "$W $t: (float16(B) - 8) was not folded into the conversion"
  grep -q 'fma.rn.f16x2' "$tmp/k.ptx" && fail "$W $t: the conversion has an fma"
done
ir $NW --target sm_80 -D M=1 | grep -qF '[32 at a time' || fail "$NW: not 32 at a time"
# a K tile over several scale groups: the scale S_block[i, (k * block_K + j) // group_size] is read per 8 of j
ir $NW --target sm_80 -D M=1 -D block_K=256 | grep -qF '[32 at a time' || fail "$NW block_K=256: not 32 at a time"
# split along K: the scale's index less the first group of the block's run, still per 8 of j
SK=examples/gemm_w4a16_splitk.json
ir $SK --target sm_90a -D M=1 | grep -qF '[32 at a time' || fail "$SK: not 32 at a time"
# a group of 128 holds each 32: the scale is read once per 32 (vec_once); groups of 80 do not (per 8)
ir $SK --target sm_90a -D M=1 | grep -qF 'the other reads once for all of them]' || fail "$SK: the scale is not read once per 32"
ir $SK --target sm_90a -D M=1 -D group_size=80 -D block_K=64 | grep -q 'once for all' && fail "$SK group_size=80: a scale read once per 32"
# the scale's group (X + j) // 128 is a shift, the packed element's byte too: no floor-division helper left
"$TLC" compile $SK --target sm_90a -D M=1 --emit cuda -o "$tmp/sk.cu" || fail "$SK --emit cuda"
grep -q 'tl_fdiv_i32(\|tl_fdiv_i64(' "$tmp/sk.cu" && fail "$SK: a floor division by a power of two is not a shift"
grep -qF ') >> 7)' "$tmp/sk.cu" || fail "$SK: the scale's group is not a shift by 7"
# the loop's first tiles are copied before the column of scales is loaded (emit_cuda.c: early_prologue),
# and a gemm with nothing loaded ahead of its loop keeps its prologue in place
awk '/first copies of the pipelined loop below/ {p = NR} /s_S_block\[/ && !s {s = NR} END {exit !(p && s && p < s)}' "$tmp/sk.cu" ||
  fail "$SK: the loop's first copies are not issued before the scales' loads"
"$TLC" compile examples/gemm.json --target sm_90a --emit cuda | grep -q 'first copies of the pipelined loop below' &&
  fail "examples/gemm.json: a prologue moved with no load ahead of its loop"
# each thread's share of a cooperative loop counted from 0 (a constant trip count)
grep -qF 'for (int tl_ci = 0; tl_ci < ' "$tmp/sk.cu" || fail "$SK: no cooperative loop counts its trips from 0"
# where the threads do not divide the elements too (64 rows of 23 groups of scales, 128 threads): 11 whole
# rounds and a 12th for the threads below 64, so the unrolled copy issues its loads together (the example before
# its scale groups were rounded to 8: a copy the program's threads make, not a bulk tensor copy)
tl_w4a16_unrounded examples/gemm_w4a16_splitk_t.json "$tmp/g23.json" || fail "splitk_t: no rounded scale groups to undo"
"$TLC" compile "$tmp/g23.json" --target sm_90a -D M=1 -D N=8192 -D K=8192 -D block_M=8 -D block_K=128 \
  -D split_k=3 --emit cuda | grep -qF 'for (int tl_ci = 0; tl_ci < 12; tl_ci++) if (tl_ci < 11 || tl_tid < 64) { const int tl_e = tl_tid + tl_ci * 128;' ||
  fail "splitk_t: the copy of 1472 scales by 128 threads does not count 11 whole rounds and a part"
# the scale groups of a run from a multiple of 8 (16 bytes), 8 of them more than the run covers: one bulk tensor
# copy that the producer issues before the loop's, where 23 groups from group 22 (the unrounded program) are not
for sk in 3 4; do
  ir examples/gemm_w4a16_splitk_t.json --target sm_90a -D M=16 -D N=8192 -D K=8192 -D block_M=16 -D split_k=$sk |
    grep -F 'copy S[' | grep -qF 'TMA: cp.async.bulk.tensor, tensor map 2, by the producer warpgroup tile by tile' ||
    fail "splitk_t split_k=$sk: the scales are not the producer's bulk tensor copy"
done
ir "$tmp/g23.json" --target sm_90a -D M=16 -D N=8192 -D K=8192 -D block_M=16 -D split_k=3 | grep -F 'copy S[' |
  grep -q 'TMA' && fail "splitk_t with 23 groups from group 22: a bulk tensor copy off a 16-byte boundary"
# activations prefetched through registers (K = 1030: rows of 2060 bytes, no 16-byte chunks), a wgmma operand
# in two copies in turn, beside weights on cp.async (stored tile by tile): the copy's pointer declared once
for t in sm_80 sm_90a; do
  "$TLC" compile examples/gemm_w4a16_splitk_tiled.json --target $t -D M=3 -D N=160 -D K=1030 -D block_M=8 -D split_k=8 \
    -o "$tmp/tiled.cubin" >/dev/null 2>"$tmp/tiled.err" || fail "splitk_tiled K=1030 $t: $(cat "$tmp/tiled.err")"
done
# C^T: the dequantized tile is wgmma's first operand, straight from the registers that dequantize it
out=$(ir examples/gemm_w4a16_splitk_t.json --target sm_90a -D M=1 -D block_M=8)
printf '%s\n' "$out" | grep -qF "[2 at a time: each thread's pairs of its register fragment" || fail "splitk_t: not in pairs of the fragment"
printf '%s\n' "$out" | grep 'gemm B_frag x A_shared' | grep -qF 'wgmma m64nNk16' || fail "splitk_t: the gemm is not on wgmma"
printf '%s\n' "$out" | grep 'gemm B_frag x A_shared' | grep -qF 'A in registers' || fail "splitk_t: wgmma's A is not in registers"
# a narrow C (8 columns): the group is not left in flight, so A needs no held copies (pass_pipeline.c's
# A_REGS_PENDING_N); a C of 128 columns (gemm_w4a16_t.json below) keeps them
printf '%s\n' "$out" | grep 'gemm B_frag x A_shared' | grep -qF 'wait_group 0: not left in flight: A in registers and C narrower than 128 columns' ||
  fail "splitk_t: a narrow gemm with A in registers does not say why it waits for 0"
"$TLC" compile examples/gemm_w4a16_splitk_t.json --target sm_90a -D M=1 -D block_M=8 --emit cuda | grep -q 'tl_held_' &&
  fail "splitk_t: a gemm waiting for 0 keeps held copies of A"
# a 4-bit pair is one byte of its word: tl_sb2h2's prmt selects the thread's byte ((j % 8) / 2), no shift
src=$("$TLC" compile examples/gemm_w4a16_splitk_t.json --target sm_90a -D M=1 -D block_M=8 --emit cuda) || fail "splitk_t: --emit cuda"
printf '%s\n' "$src" | grep -qF 'tl_sb2h2(tl_x0 ^ 0x00000000u, 0x4040u + (unsigned)(tl_jt % 8 / 2) * 0x0101u,' ||
  fail "splitk_t: the pair's byte not chosen by the prmt selector"
printf '%s\n' "$src" | grep -qF 'tl_x0 >>=' && fail "splitk_t: the 4-bit pair is shifted into place"
# the float32 sums leave the fragment as 8-byte pairs (emit_cuda.c's wide_pair) where the row length
# (M) is even, and one element at a time where it is odd (a pair would straddle two rows)
"$TLC" compile examples/gemm_w4a16_splitk_t.json --target sm_90a -D M=64 -D block_M=64 --emit cuda |
  grep -qF 'const float2 tl_pair = make_float2(r_Ct_local[tl_r], r_Ct_local[tl_r + 1]);' ||
  fail "splitk_t M=64: the float32 sums are not stored in pairs"
"$TLC" compile examples/gemm_w4a16_splitk_t.json --target sm_90a -D M=13 -D block_M=16 --emit cuda | grep -q 'float2' &&
  fail "splitk_t M=13: float32 pairs in rows of odd length"
sed 's|// group_size - g0]|// group_size - j]|' $SK >"$tmp/gj.json"
grep -qF -- '- j]' "$tmp/gj.json" || fail "$SK: the sed found no scale index"
ir "$tmp/gj.json" --target sm_90a -D M=1 | grep -q '\[[0-9]* at a time' && fail "a scale index less j was paired"
sed 's|(k \* block_K + j) // group_size|(k * block_K + j) // 12|' $NW >"$tmp/g12.json"
ir "$tmp/g12.json" --target sm_80 -D M=1 | grep -q '\[[0-9]* at a time' && fail "a scale index that changes within 8 of j was paired"

# the golden: int4, int2, a tensor scale, bfloat16 (fma.rn.bf16x2 from sm_80); j outside an index stays scalar
out=$(ir $G --target sm_80)
[ "$(printf '%s\n' "$out" | grep -c '\[16 at a time')" = 3 ] || fail "$G sm_80: not 3 loops 16 at a time:
$out"
ptx $G --target sm_80
for i in fma.rn.bf16x2 cvt.rn.bf16x2.f32 sub.rn.f16x2 add.rn.f16x2; do has $i "$G sm_80"; done
[ "$(ir $G --target sm_75 | grep -c '\[16 at a time')" = 2 ] || fail "$G sm_75: the bfloat16 loop is paired before sm_80"
if "$TLC" targets 2>/dev/null | grep -q gfx942; then
  ir $G --target gfx942 | grep -q '\[[0-9]* at a time' && fail "$G gfx942: an AMD target took the PTX path"
fi

# wgmma: the dequantized operand rotates, the group stays in flight; not when the gemm clears C
out=$(ir $W --target sm_90a -D M=4096 -D N=8192 -D K=8192)
printf '%s\n' "$out" | grep -qF 'B_dequant rotates' || fail "$W sm_90a: B_dequant does not rotate"
printf '%s\n' "$out" | grep -qF 'wait_group 1' || fail "$W sm_90a: the gemm waits for 0"
printf '%s\n' "$out" | grep -qF 'B_dequant: shared float16[128, 64] in shared memory at' || fail "$W: B_dequant's alloc"
printf '%s\n' "$out" | grep 'alloc B_dequant' | grep -qF '2 stages' || fail "$W: B_dequant has not 2 stages"
# the column of scales: prefetched through registers into 2 copies, no barrier of its own
printf '%s\n' "$out" | grep 'copy S\[' | grep -qF 'prefetched through registers' || fail "$W: S is not prefetched through registers"
printf '%s\n' "$out" | grep 'alloc S_shared' | grep -qF '2 stages' || fail "$W: S_shared has not 2 stages"
"$TLC" compile $W --target sm_90a --emit cuda >"$tmp/k.cu" || fail "$W: --emit cuda"
grep -q 'tl_rq[0-9]*\[tl_r\] = ' "$tmp/k.cu" || fail "$W: no register prefetch in the CUDA"
sed 's/"transpose_B": true}/"transpose_B": true, "clear_accum": true}/' $W >"$tmp/clear.json"
out=$(ir "$tmp/clear.json" --target sm_90a)
printf '%s\n' "$out" | grep -qF 'rotates' && fail "a gemm that clears C rotates its operand"
printf '%s\n' "$out" | grep 'alloc B_dequant' | grep -qF 'stages' && fail "a gemm that clears C: B_dequant has stages"

# C^T with the dequantized weights wgmma's A from registers (gemm_w4a16_t.json): the fragment takes C's rows
# over K and stays in registers packed in pairs, each thread dequantizes its own pairs (prmt + lop3 + fma.f16x2,
# no 16-byte stores); the group stays in flight, and the registers it reads are set (selp, emit_cuda.c's held_a)
# only after the next tile's wait, from the fragments computed beside it in other registers
T=examples/gemm_w4a16_t.json
PTXAS=$(command -v ptxas || echo "${CUDA_HOME:-/usr/local/cuda}/bin/ptxas")
for d in "" "-D block_M=256 -D block_N=128 -D threads=256" "-D block_N=256 -D threads=256" "-D block_K=128"; do
  out=$(ir $T --target sm_90a -D M=4096 -D N=8192 -D K=8192 $d)
  printf '%s\n' "$out" | grep 'alloc B_frag' | grep -qF 'in registers, mma layout' || fail "$T $d: B_frag not in registers"
  printf '%s\n' "$out" | grep 'alloc B_frag' | grep -qF 'packed in pairs' || fail "$T $d: B_frag not packed"
  printf '%s\n' "$out" | grep -qF '[2 at a time: each thread' || fail "$T $d: the dequant loop is not on pairs"
  printf '%s\n' "$out" | grep 'gemm B_frag' | grep -qF '[A in registers: set only after the wait' || fail "$T $d: A not from registers after the wait"
  printf '%s\n' "$out" | grep 'gemm B_frag' | grep -qF 'wait_group 1' || fail "$T $d: the gemm waits for 0"
  ptx $T --target sm_90a -D M=4096 -D N=8192 -D K=8192 $d
  for i in prmt.b32 lop3.b32 add.rn.f16x2 mul.rn.f16x2 'wgmma.wait_group.sync.aligned 0;' '%nsmid'; do has "$i" "$T $d"; done
  # every wgmma's A registers: written by a selp after the wait, from the other set's registers (themselves
  # written so) on a never-true predicate, or from the computed ones (emit_cuda.c's held_a)
  awk '/wgmma.wait_group.sync.aligned 0;/ { w = 1 }
       /^selp.b32 %r[0-9]+, %r[0-9]+, %r[0-9]+, q;/ && w { d = $2; o = $3; sub(/,/, "", d); sub(/,/, "", o); held[d] = 1; other[o] = 1 }
       /wgmma.mma_async.*}, {%r/ { s = $0; sub(/.*}, {/, "", s); sub(/}.*/, "", s); n = split(s, r, ",");
         for (i = 1; i <= n; i++) if (!held[r[i]]) bad = 1 }
       END { for (o in other) if (!held[o]) bad = 1; exit bad || !length(held) }' "$tmp/k.ptx" ||
    fail "$T $d: a wgmma reads A registers not set after the wait from the other set"
  if [ -x "$PTXAS" ]; then # and ptxas keeps the group in flight (no C7513: wgmma serialized)
    "$PTXAS" -arch=sm_90a -v "$tmp/k.ptx" -o "$tmp/k.cubin" >"$tmp/ptxas.txt" 2>&1 || fail "$T $d: ptxas"
    grep -q 'C75' "$tmp/ptxas.txt" && fail "$T $d: ptxas serializes the wgmma: $(grep C75 "$tmp/ptxas.txt")"
  fi
  grep -q 'wgmma.mma_async.sync.aligned.m64n[0-9]*k16.f32.f16.f16 {[^}]*}, {%r' "$tmp/k.ptx" || fail "$T $d: no wgmma with A from registers"
  grep -q 'st.shared.v2.u64' "$tmp/k.ptx" && fail "$T $d: the dequantized tile went through shared memory"
done
# the epilogue C_shared[j, i] = Ct_local[i, j] converts the accumulators in pairs (one at a time, ptxas
# serialized the gemm's wgmma: C7514) and stores the halves transposed
"$TLC" compile $T --target sm_90a --emit cuda >"$tmp/t.cu" || fail "$T: --emit cuda"
grep -qF 'const unsigned tl_pair = tl_f2h2(r_Ct_local[tl_r], r_Ct_local[tl_r + 1]);' "$tmp/t.cu" || fail "$T: no pair conversion"
grep -qF '= (unsigned short)(tl_pair >> 16);' "$tmp/t.cu" || fail "$T: no store of the pair's high half"
# bfloat16 weights: the pairs in bfloat16
sed -e 's/"name": "B_frag", "shape": \["block_N", "block_K"\], "dtype": "float16"/"name": "B_frag", "shape": ["block_N", "block_K"], "dtype": "bfloat16"/' \
    -e 's/"name": "A", "kind": "tensor", "dtype": "float16"/"name": "A", "kind": "tensor", "dtype": "bfloat16"/' \
    -e 's/"name": "A_shared", "shape": \["block_M", "block_K"\], "dtype": "float16"/"name": "A_shared", "shape": ["block_M", "block_K"], "dtype": "bfloat16"/' \
    -e 's/"name": "S", "kind": "tensor", "dtype": "float16"/"name": "S", "kind": "tensor", "dtype": "bfloat16"/' \
    -e 's/"name": "S_shared", "shape": \["block_N"\], "dtype": "float16"/"name": "S_shared", "shape": ["block_N"], "dtype": "bfloat16"/' \
    -e 's/(float16(B_shared\[i, j\])/(bfloat16(B_shared[i, j])/' $T >"$tmp/bf.json"
[ "$(grep -c bfloat16 "$tmp/bf.json")" = 6 ] || fail "the bfloat16 sed missed"
out=$(ir "$tmp/bf.json" --target sm_90a)
printf '%s\n' "$out" | grep -qF '[2 at a time: each thread' || fail "bfloat16 $T: the dequant loop is not on pairs"
ptx "$tmp/bf.json" --target sm_90a
has fma.rn.bf16x2 "bfloat16 $T"
# the fragment read elsewhere than by the gemm keeps the scalar path and its floats
sed 's|{"op": "gemm", "A": "B_frag"|{"op": "parallel", "vars": ["i", "j"], "extents": ["block_N", "block_K"], "body": ["B_frag[i, j] = B_frag[i, j] * 2.0"]}, {"op": "gemm", "A": "B_frag"|' $T >"$tmp/twice.json"
out=$(ir "$tmp/twice.json" --target sm_90a)
printf '%s\n' "$out" | grep 'alloc B_frag' | grep -qF 'packed' && fail "a fragment another loop reads is packed"
printf '%s\n' "$out" | grep -qF '[2 at a time: each thread' || fail "$T read twice: the dequant loop is not on pairs"
ptx "$tmp/twice.json" --target sm_90a
# weights stored in the order the threads read them (pass_place.c: pair_map, for every column of every thread):
# examples/gemm_w4a16_il.json's pairs 16 bits apart in one load a row (16 bytes at block_K 128, 8 at 64, 4 at
# 32), converted by lop3 alone (tl_nb2h2: no prmt in the PTX), and gemm_w4a16_sliced.json, the same but for the
# order, by prmt; tests/gpu/programs/gemm_il_bytes.json's pairs in one byte each (through the map, by prmt)
IL=examples/gemm_w4a16_il.json
for c in "128 16" "64 8" "32 4" "256 16"; do
  set -- $c
  ir $IL --target sm_90a -D block_K=$1 | grep -qF "[B_shared through a map: a thread's pairs in $2-byte loads, $(($1 / 8)) of $(($1 / 8)) pairs 16 bits apart]" ||
    fail "$IL block_K=$1: not through a map of $2-byte loads"
done
ptx $IL --target sm_90a
grep -q 'prmt.b32' "$tmp/k.ptx" && fail "$IL: the PTX permutes bytes"
has "lop3.b32" "$IL"
# a K tile's weights: a thread's 16 bytes of each of its 2 rows, as 2 64-bit loads each (ptxas pairs them)
[ "$(grep -c 'ld.shared.u64' "$tmp/k.ptx")" = 4 ] || fail "$IL: not 4 64-bit loads of the weights ($(grep -c 'ld.shared.u64' "$tmp/k.ptx"))"
ptx examples/gemm_w4a16_sliced.json --target sm_90a
has "prmt.b32" "gemm_w4a16_sliced"
[ "$(grep -c 'ld.shared.u64' "$tmp/k.ptx")" = 16 ] || fail "gemm_w4a16_sliced: not 16 64-bit loads of the weights"
ir tests/gpu/programs/gemm_il_bytes.json --target sm_90a | grep -qF "[B_shared through a map: a thread's pairs in 16-byte loads, 0 of 16 pairs 16 bits apart]" ||
  fail "gemm_il_bytes: not through a map"
ir tests/gpu/programs/gemm_il_int4.json --target sm_90a | grep -qF "[B_shared through a map: a thread's pairs in 16-byte loads, 16 of 16 pairs 16 bits apart]" ||
  fail "gemm_il_int4: not through a map"
"$TLC" compile tests/gpu/programs/gemm_il_int4.json --target sm_90a --emit cuda | grep -qF '^ 0x88888888u) >> 0;' ||
  fail "gemm_il_int4: the signed codes' top bits are not flipped before the shift"
# orders that no map serves keep the scalar path: a pair in reverse (the higher column's element first), pairs
# whose threads do not share offsets (j ^ 32), an index that reads the row (i); a map's refusal is never a wrong map
for g in 'block_K - 1 - j' 'j ^ 32' '(j + i * 8) % block_K'; do
  sed "s|B_shared\[i, ((j % 8) // 2) \* (block_K // 4) + (j // 32) \* 8 + (j // 8) % 4 + (j % 2) \* 4\]|B_shared[i, $g]|" $IL >"$tmp/g.json"
  grep -qF "B_shared[i, $g]" "$tmp/g.json" || fail "the sed left the order ($g)"
  out=$(ir "$tmp/g.json" --target sm_90a)
  printf '%s\n' "$out" | grep -qF 'through a map' && fail "order $g: a map"
  printf '%s\n' "$out" | grep -qF '[2 at a time' && fail "order $g: paired without a map"
done
echo "ok: dequant loops paired, converted without cvt, rotating under wgmma; pairs into wgmma's A registers, through maps"
