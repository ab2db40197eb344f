#!/bin/sh
# tests/sh/tlc_splitk_last.sh - a split-K reduction in the main kernel
# (issue 12; proto/tile-ir-v1.md 3.1 "zeroed", 5.7 sync_threads "fence",
# 9.1): examples/gemm_w4a16_splitk_last.json and _t_last.json, where the
# last block of each output tile adds the runs' sums, give on the reference
# interpreter the same bytes as the two-kernel programs they fuse, at ragged
# sizes, one run, and runs wholly past K (and gemm_w4a16_splitk_tiled.json,
# the weights stored tile by tile, the same bytes as gemm_w4a16_splitk_t.json
# whose weights they hold, and gemm_w4a16_sliced.json, its K loop in
# slices, those of _tiled with one run, and gemm_w4a16_il.json, its weights
# interleaved, those of _sliced); a program that does not reset its
# zeroed counter is a run-time error naming the workspace; the CUDA C puts
# the device-scope fence between two barriers, the metadata marks the
# workspace zeroed for the launcher.  The GPU side (tlc run fails a launch
# that leaves a zeroed workspace nonzero) is tests/gpu/check_examples.py's.
# Exit 0 pass, 1 fail.
TLC=${TL_BUILD:-build}/bin/tlc
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
E=examples

# inputs: A float16 [M, K], B uint4 [N, K] (one element per byte), S float16 [N, ceil(K / G)]
inputs() { # M N K G
  python3 - "$@" "$tmp" <<'PY' || fail "python3 wrote no inputs"
import random, struct, sys
def save(path, shape, descr, fmt, vals):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, ", ".join(map(str, shape)))
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%d%s" % (len(vals), fmt), *vals))
M, N, K, G = map(int, sys.argv[1:5]); d = sys.argv[5]
random.seed(M * 7 + N + K)
save(d + "/A.npy", (M, K), "<f2", "e", [random.uniform(-1, 1) for _ in range(M * K)])
save(d + "/B.npy", (N, K), "|u1", "B", [random.randint(0, 15) for _ in range(N * K)])
save(d + "/S.npy", (N, -(-K // G)), "<f2", "e", [random.uniform(0.001, 0.02) for _ in range(N * -(-K // G))])
PY
}
IN="--in A=$tmp/A.npy --in B=$tmp/B.npy --in S=$tmp/S.npy"
same() { # PROGRAM REFERENCE -D ...: the same bytes of C on the interpreter
  p=$1 r=$2; shift 2
  "$TLC" run $E/$p.json --interpret $IN --out C="$tmp/c1.npy" "$@" || fail "$p $*"
  "$TLC" run $E/$r.json --interpret $IN --out C="$tmp/c2.npy" "$@" || fail "$r $*"
  cmp -s "$tmp/c1.npy" "$tmp/c2.npy" || fail "$p differs from $r at $*"
}
inputs 13 200 650 128
same gemm_w4a16_splitk_last gemm_w4a16_splitk -D M=13 -D N=200 -D K=650 -D split_k=3
same gemm_w4a16_splitk_last gemm_w4a16_splitk -D M=13 -D N=200 -D K=650 -D split_k=1
same gemm_w4a16_splitk_t_last gemm_w4a16_splitk_t -D M=13 -D N=200 -D K=650 -D split_k=3
same gemm_w4a16_splitk_t_last gemm_w4a16_splitk_t -D M=13 -D N=200 -D K=650 -D block_M=8 -D split_k=1
inputs 3 160 1030 128 # 9 K tiles of 128 in 8 runs of 2: the last 3 runs wholly past K
same gemm_w4a16_splitk_last gemm_w4a16_splitk -D M=3 -D N=160 -D K=1030 -D split_k=8
same gemm_w4a16_splitk_t_last gemm_w4a16_splitk_t -D M=3 -D N=160 -D K=1030 -D block_M=8 -D split_k=8
inputs 5 136 650 80 # runs that start inside a scale group
same gemm_w4a16_splitk_last gemm_w4a16_splitk -D M=5 -D N=136 -D K=650 -D block_K=64 -D group_size=80 -D split_k=3
# gemm_w4a16_splitk_tiled.json: the weights stored tile by tile give gemm_w4a16_splitk_t.json's bytes; the tiles'
# parts past N and K hold random codes, which must not count
tiled() { # N K BN BK: $tmp/Bt.npy from $tmp/B.npy
  python3 - "$@" "$tmp" <<'PY' || fail "python3 wrote no tiled weights"
import random, struct, sys
N, K, bn, bk = map(int, sys.argv[1:5]); d = sys.argv[5]
b = open(d + "/B.npy", "rb").read(); b = b[10 + struct.unpack("<H", b[8:10])[0]:]
nb, kb = -(-N // bn), -(-K // bk)
random.seed(N + K + bn)
out = bytearray(random.randint(0, 15) for _ in range(nb * kb * bn * bk))
for n in range(N):
    for k in range(K):
        out[((n // bn * kb + k // bk) * bn + n % bn) * bk + k % bk] = b[n * K + k]
hdr = "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d, %d, %d), }" % (nb, kb, bn, bk)
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
open(d + "/Bt.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + bytes(out))
PY
}
same_tiled() { # N K BN BK -D ...
  n=$1 k=$2 bn=$3 bk=$4; shift 4
  tiled "$n" "$k" "$bn" "$bk"
  "$TLC" run $E/gemm_w4a16_splitk_tiled.json --interpret --in A="$tmp/A.npy" --in B="$tmp/Bt.npy" --in S="$tmp/S.npy" \
    --out C="$tmp/t1.npy" -D N="$n" -D K="$k" -D block_N="$bn" -D block_K="$bk" "$@" || fail "splitk_tiled $*"
  "$TLC" run $E/gemm_w4a16_splitk_t.json --interpret $IN --out C="$tmp/t2.npy" -D N="$n" -D K="$k" -D block_N="$bn" \
    -D block_K="$bk" "$@" || fail "splitk_t $*"
  cmp -s "$tmp/t1.npy" "$tmp/t2.npy" || fail "splitk_tiled differs from splitk_t at N=$n K=$k $*"
}
same_tiled 136 650 64 64 -D M=5 -D group_size=80 -D split_k=3
inputs 13 200 650 128
same_tiled 200 650 64 128 -D M=13 -D block_M=16 -D split_k=3
same_tiled 200 650 128 64 -D M=13 -D block_M=16 -D split_k=2 -D threads=256
# gemm_w4a16_sliced.json (one kernel, its K loop in slices, its scales one row per group: St, S transposed) in
# the interpreter: the bytes of gemm_w4a16_splitk_tiled.json with one run (the slices are a schedule; the
# interpreter sums the K tiles in order)
inputs 13 200 650 128
tiled 200 650 64 128
python3 - "$tmp" <<'PY' || fail "python3 wrote no St.npy"
import struct, sys
d = sys.argv[1]
b = open(d + "/S.npy", "rb").read(); h = 10 + struct.unpack("<H", b[8:10])[0]
shape = eval(b[10:h].decode())["shape"]; v = b[h:]
n, g = shape
out = b"".join(v[(r * g + c) * 2:(r * g + c) * 2 + 2] for c in range(g) for r in range(n))
hdr = "{'descr': '<f2', 'fortran_order': False, 'shape': (%d, %d), }" % (g, n)
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
open(d + "/St.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + out)
PY
"$TLC" run $E/gemm_w4a16_sliced.json --interpret --in A="$tmp/A.npy" --in B="$tmp/Bt.npy" --in St="$tmp/St.npy" \
  --out C="$tmp/t1.npy" -D M=13 -D N=200 -D K=650 -D block_M=16 || fail "sliced"
"$TLC" run $E/gemm_w4a16_splitk_tiled.json --interpret --in A="$tmp/A.npy" --in B="$tmp/Bt.npy" --in S="$tmp/S.npy" \
  --out C="$tmp/t2.npy" -D M=13 -D N=200 -D K=650 -D block_M=16 -D split_k=1 || fail "splitk_tiled split_k=1"
cmp -s "$tmp/t1.npy" "$tmp/t2.npy" || fail "sliced differs from splitk_tiled with one run"
# gemm_w4a16_il.json: the same weights interleaved in each tile as its threads read them (column j of a tile at
# p(j), its x-source) give gemm_w4a16_sliced.json's bytes, at K tiles of 128 and of 64
interleave() { # $tmp/Bt.npy -> $tmp/Bi.npy
  python3 - "$tmp" <<'PY' || fail "python3 wrote no interleaved weights"
import struct, sys
d = sys.argv[1]
b = open(d + "/Bt.npy", "rb").read(); h = 10 + struct.unpack("<H", b[8:10])[0]
bk = eval(b[10:h].decode())["shape"][3]; v = b[h:]
p = [(j % 8) // 2 * (bk // 4) + j // 32 * 8 + j // 8 % 4 + j % 2 * 4 for j in range(bk)]
assert sorted(p) == list(range(bk))
out = bytearray(len(v))
for r in range(0, len(v), bk):
    for j in range(bk):
        out[r + p[j]] = v[r + j]
open(d + "/Bi.npy", "wb").write(b[:h] + bytes(out))
PY
}
for bk in 128 64; do
  tiled 200 650 64 $bk
  interleave
  "$TLC" run $E/gemm_w4a16_sliced.json --interpret --in A="$tmp/A.npy" --in B="$tmp/Bt.npy" --in St="$tmp/St.npy" \
    --out C="$tmp/t1.npy" -D M=13 -D N=200 -D K=650 -D block_M=16 -D block_K=$bk || fail "sliced block_K=$bk"
  "$TLC" run $E/gemm_w4a16_il.json --interpret --in A="$tmp/A.npy" --in B="$tmp/Bi.npy" --in St="$tmp/St.npy" \
    --out C="$tmp/t2.npy" -D M=13 -D N=200 -D K=650 -D block_M=16 -D block_K=$bk || fail "il block_K=$bk"
  cmp -s "$tmp/t1.npy" "$tmp/t2.npy" || fail "il differs from sliced at block_K=$bk"
  cmp -s "$tmp/Bt.npy" "$tmp/Bi.npy" && fail "the interleaved weights are the tiled ones"
done
inputs 5 136 650 80 # back to the inputs of the last comparison above, for the checks below
# the results are not all zero or NaN (the comparison above is not empty)
python3 -c "
import struct, sys; b = open('$tmp/c1.npy', 'rb').read(); b = b[10 + struct.unpack('<H', b[8:10])[0]:]
v = struct.unpack('<%de' % (len(b) // 2), b); sys.exit(not (len(v) == 5 * 136 and all(x == x for x in v) and any(v)))" ||
  fail "splitk_last: C is empty, zero or NaN"

# a last block that does not set its counter back to 0: the run is an error naming the workspace
sed 's|{"op": "parallel", "vars": \["i"\], "extents": \[1\], "body": \["Cnt\[by, bx\] = 0"\]},||' \
  $E/gemm_w4a16_splitk_last.json >"$tmp/noreset.json"
grep -qF 'Cnt[by, bx] = 0' "$tmp/noreset.json" && fail "the sed left the reset"
out=$("$TLC" run "$tmp/noreset.json" --interpret $IN -D M=5 -D N=136 -D K=650 -D block_K=64 -D group_size=80 2>&1) &&
  fail "a run that leaves a zeroed workspace nonzero passed"
printf '%s\n' "$out" | grep -qF "/workspaces/1: error: the run left byte 0 of workspace 'Cnt' nonzero" ||
  fail "the error does not name the workspace: $out"

# the CUDA C: barrier, device-scope fence, barrier, twice; the atomic counter; the metadata
"$TLC" compile $E/gemm_w4a16_splitk_last.json --target sm_90a --emit cuda -o "$tmp/l.cu" || fail "--emit cuda"
[ "$(grep -A2 '__syncthreads();' "$tmp/l.cu" | grep -B1 -A1 '__threadfence();' | grep -c '__syncthreads();')" -ge 4 ] ||
  fail "the fences are not each between two barriers"
[ "$(grep -c '__threadfence();' "$tmp/l.cu")" = 2 ] || fail "not two fences"
grep -q 'atomicAdd(&g_Cnt\[' "$tmp/l.cu" || fail "no atomic add on the counter"
"$TLC" compile $E/gemm_w4a16_splitk_last.json --target sm_90a --emit ir | grep -c 'sync_threads fence \[' | grep -qx 2 ||
  fail "--emit ir does not show the two fences"
"$TLC" compile $E/gemm_w4a16_splitk_last.json --target sm_90a --emit meta |
  python3 -c "import json, sys; w = json.load(sys.stdin)['workspaces']; sys.exit(not ([x.get('zeroed', False) for x in w] == [False, True]))" ||
  fail "the metadata does not mark Cnt zeroed"
# the PTX back end's fence (it keeps atomics on the CUDA back end, so a program without one)
cat >"$tmp/fp.json" <<'JSON'
{"tlir": 1, "name": "fp", "params": [{"name": "A", "kind": "tensor", "dtype": "float32", "shape": [256]}],
 "kernel": {"grid": [2], "threads": 128, "block_vars": ["bx"], "body": [
   {"op": "parallel", "vars": ["i"], "extents": [128], "body": ["A[bx * 128 + i] = A[bx * 128 + i] + 1.0"]},
   {"op": "sync_threads", "fence": true},
   {"op": "parallel", "vars": ["i"], "extents": [128], "body": ["A[bx * 128 + i] = A[bx * 128 + i] * 2.0"]}]}}
JSON
"$TLC" compile "$tmp/fp.json" --target sm_90a --backend ptx --emit ptx -o "$tmp/fp.ptx" 2>/dev/null || fail "--backend ptx"
grep -A1 'bar.sync 0;' "$tmp/fp.ptx" | grep -A1 'fence.sc.gpu;' | grep -q 'bar.sync 0;' ||
  fail "the PTX back end's fence is not between two barriers"
echo "ok: split-K reduced by each tile's last block: the two-kernel programs' bytes, the counter reset, fenced"
