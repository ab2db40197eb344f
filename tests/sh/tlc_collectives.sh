#!/bin/sh
# tests/sh/tlc_collectives.sh - every block barrier and warp shuffle that
# tlc emits is reached by every thread it waits for (issue 10: TileLang's
# top-k hung on an H100 because an int32 row max ran a full-mask shuffle in
# one arm of a `?:`).  tests/sh/collectives.py checks the generated CUDA
# (sm_90a) and HIP (gfx90a) of every example, every program of
# tests/gpu/programs, bench/programs and tests/golden, and of top-k and its
# relatives at other sizes and thread counts (each reduction path, wave32);
# first it checks that the checker refuses the shapes of the bug on small
# hand-written kernels and accepts their fixed forms.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here).
cd "$(dirname "$0")/../.." || exit 1
TLC=${TL_BUILD:-build}/bin/tlc
PY=/usr/bin/python3
CHK=tests/sh/collectives.py
if ! "$TLC" targets 2>/dev/null | grep -q '^sm_80 '; then # NVRTC, not just an AMD toolchain
  echo "no NVRTC here: tlc compile cannot run" >&2
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT

# 1. the checker itself: each bad kernel is refused with its rule, the good one accepted
kernel() { # NAME BODY...: a kernel file in $tmp
  f=$tmp/$1.cu; shift
  { echo 'extern "C" __global__ void k(int *g) {'
    echo '  const int tl_tid = (int)threadIdx.x;'
    for l in "$@"; do echo "  $l"; done
    echo '}'; } >"$f"
}
kernel ternary 'long long tl_acc = g[tl_tid];' \
  'tl_acc = (tl_acc > __shfl_xor_sync(0xffffffffu, tl_acc, 1) ? tl_acc : __shfl_xor_sync(0xffffffffu, tl_acc, 1));'
kernel if_tid 'if (tl_tid < 32) {' '__syncthreads();' '}'
kernel if_line 'const int tl_e = tl_tid * 4 + 1;' 'if (tl_e < 64) __syncthreads();'
kernel for_tid 'for (int tl_e = tl_tid; tl_e < 64; tl_e += 128) {' 'g[tl_e] = 0;' '__syncthreads();' '}'
kernel for_nobrace 'for (int tl_e = tl_tid; tl_e < 64; tl_e += 128)' '  __syncthreads();'
kernel chain 'int v_x = g[tl_tid];' 'const int v_y = v_x + 1;' 'if (v_y > 0) {' 'g[0] = 1;' '} else {' '__syncthreads();' '}'
kernel under_if 'int v_z = 0;' 'if (tl_tid == 0) {' 'v_z = 1;' '}' 'for (int i = 0; i < v_z; i++) {' '__syncthreads();' '}'
kernel brk 'for (int i = 0; i < 8; i++) {' '__syncthreads();' 'if (g[tl_tid] > i) break;' '}'
kernel elif 'if (tl_tid < 3) {' 'g[0] = 1;' '} else if (g[0] > 2) {' 'g[1] = 2;' '__syncthreads();' '}'
kernel ret 'if (tl_tid >= 64) return;' '__syncthreads();'
kernel reg 'float r_a[2];' 'r_a[0] = g[tl_tid];' 'if (r_a[0] > 0) {' 'const float tl_p = __shfl_xor_sync(0xffffffffu, r_a[0], 1);' '}'
# a warp-uniform split (pass_wspec.c's producer warpgroup) keeps warps whole for shuffles, not the block for barriers
kernel warp_bar 'if (tl_tid >= 256) {' 'return;' '}' '__syncthreads();'
kernel warp_odd 'float tl_a = g[0];' 'if (tl_tid >= 250) {' 'return;' '}' 'const float tl_p = __shfl_xor_sync(0xffffffffu, tl_a, 1);'
for k in ternary if_tid if_line for_tid for_nobrace chain under_if brk elif ret reg warp_bar warp_odd; do
  out=$("$PY" $CHK "$tmp/$k.cu") && fail "the checker accepts the bad kernel '$k'"
  printf '%s\n' "$out" | grep -q "$k.cu:[0-9]*: \(form\|control\): " || fail "the checker's message for '$k': $out"
done
kernel good 'long long tl_acc = g[tl_tid];' 'for (int i = 0; i < 4; i++) {' 'if (g[0] > i) {' '__syncthreads();' '}' \
  '{' 'const long long tl_peer = __shfl_xor_sync(0xffffffffu, tl_acc, 1);' 'tl_acc = (tl_acc > tl_peer ? tl_acc : tl_peer);' '}' \
  'if (tl_tid % 2 == 0) g[tl_tid / 2] = (int)tl_acc;' '}' '__syncthreads();'
out=$("$PY" $CHK --count "$tmp/good.cu") || fail "the checker refuses the good kernel: $out"
printf '%s\n' "$out" | grep -qx "2 barriers, 1 shuffles checked in 1 files" || fail "the checker miscounts the good kernel: $out"

kernel warp_good 'float tl_a = g[0];' 'if (tl_tid >= 256) {' 'if (tl_tid == 256) g[0] = 1;' 'return;' '}' \
  'for (int i = 0; i < 2; i++) {' 'const float tl_p = __shfl_xor_sync(0xffffffffu, tl_a, 1);' 'tl_a += tl_p;' '}'
out=$("$PY" $CHK --count "$tmp/warp_good.cu") || fail "the checker refuses a shuffle after a warp-uniform split: $out"

# 2. what tlc emits
n=0
emit() { # PROGRAM TARGET [-D ...]
  prog=$1 t=$2; shift 2
  lang=cuda; case $t in gfx*) lang=hip ;; esac
  n=$((n + 1)); f=$tmp/src.$n.$(basename "$prog" .json).$t.$lang
  if ! "$TLC" compile "$prog" --target "$t" --emit $lang "$@" >"$f" 2>"$tmp/err"; then
    # a program too big for the target's shared memory is no failure here
    grep -q "bytes of shared memory per block" "$tmp/err" && { rm -f "$f"; return 0; }
    # nor one in thread-block clusters for a target without them
    grep -qE "thread-block clusters (need sm_90 or later|are NVIDIA.s)" "$tmp/err" && { rm -f "$f"; return 0; }
    fail "tlc compile $prog --target $t $*: $(cat "$tmp/err")"
  fi
}
for p in examples/*.json tests/gpu/programs/*.json bench/programs/*.json tests/golden/*.json; do
  for t in sm_90a gfx90a; do emit "$p" $t; done
done
# the other reduction paths of top-k and its relatives: one thread per row
# (threads=32), 4 lanes per row, whole rows per thread, ragged rows; wave32
emit tests/gpu/programs/topk.json sm_90a -D threads=32
emit tests/gpu/programs/topk.json sm_90a -D threads=256
emit tests/gpu/programs/topk.json sm_90a -D N=7 -D blk_m=1
emit tests/gpu/programs/topk.json sm_90a -D N=33
emit tests/gpu/programs/topk.json gfx1100
emit tests/gpu/programs/serial_int_reduce.json sm_90a -D threads=256
emit tests/gpu/programs/serial_int_reduce.json sm_90a -D N=7 -D blk_m=1
emit tests/gpu/programs/serial_int_reduce.json gfx1100
emit tests/gpu/programs/serial_chunk_reduce.json sm_90a -D threads=32
out=$("$PY" $CHK --count "$tmp"/src.*) || fail "collectives that not every thread reaches:
$out"
printf '%s\n' "$out" | tail -1
printf '%s\n' "$out" | tail -1 | awk '$1 < 100 || $3 < 40 { exit 1 }' ||
  fail "too few barriers or shuffles checked for the check to mean anything: $(printf '%s\n' "$out" | tail -1)"
echo "tlc_collectives: ok"
