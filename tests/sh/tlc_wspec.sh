#!/bin/sh
# tests/sh/tlc_wspec.sh - warp specialization (compiler/pass_wspec.c) and
# the register-cliff warning (check_target.c's tl_warn_target) without a
# GPU: on sm_90a a pipelined loop whose copies all run on TMA gets a
# producer warpgroup (threads T to T+127, setmaxnreg.dec) issuing the
# copies on full/empty mbarriers while the program's threads
# (setmaxnreg.inc) run the gemms and synchronize on the named barrier 1 of
# T threads; the metadata's block has the 128 threads more
# (launch.producer_threads); a let of the kernel's body that the copies use
# is evaluated by the producer too; "warp_specialize": false, sm_90 (no
# setmaxnreg) and sm_80 keep the loop as it was; `--emit ir` and `--dump
# wspec` say which loop and why not the others; a fragment too large for
# registers is a warning on standard error and in the metadata; a loop's
# "slices" run its iterations on that many groups of the program's threads
# (slice 0 alone before and after the loop, the sums added through shared
# memory), refused with the reason where the loop does not allow them.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC here).
cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
tl_init tlc_wspec.sh
tl_need_target sm_90a "tlc compile cannot run"
TLC=$TL_BUILD/bin/tlc
G="bench/programs/gemm_raster.json -D block_N=256 -D block_K=64 -D threads=256"
src=$("$TLC" compile $G --target sm_90a --emit cuda) || tl_fail "--emit cuda for sm_90a"
for want in "__launch_bounds__(384, 1)" "if (tl_tid >= 256) {" "setmaxnreg.dec.sync.aligned.u32 40;" \
            "setmaxnreg.inc.sync.aligned.u32 232;" \
            "mbarrier.init.shared::cta.b64 [%0], 8;" "mbarrier.arrive.shared::cta.b64 _, [%0];" \
            "if (tl_pit >= 4) tl_mbar_wait(tl_mbar + 8u * (unsigned)(4 + (tl_st)), (unsigned)(tl_pit / 4 - 1) & 1u);"; do
  printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "the sm_90a source lacks: $want"
done
# no barrier of the program's threads: none after the loop, none between tiles (pass_barrier.c)
printf '%s\n' "$src" | grep -q "bar.sync" && tl_fail "a named barrier after the K loop or between tiles"
# the copies are the producer's alone: issued once in the source, after its branch opens
n=$(printf '%s\n' "$src" | grep -c "cp.async.bulk.tensor")
[ "$n" = 5 ] || tl_fail "the source issues $n bulk tensor copies, not the producer's 5 (A, B's 4 panels)"
printf '%s\n' "$src" | awk '/if \(tl_tid >= 256\)/ {p = 1} /cp.async.bulk.tensor/ && !p {bad = 1} END {exit bad}' ||
  tl_fail "a bulk tensor copy outside the producer's branch"
printf '%s\n' "$src" | grep -q "__syncthreads" && [ "$(printf '%s\n' "$src" | grep -c __syncthreads)" != 1 ] &&
  tl_fail "more than the one block-wide barrier before the producer's branch"
"$TLC" compile $G --target sm_90a --emit ptx -o "$TMP/k.ptx" 2>/dev/null || tl_fail "--emit ptx for sm_90a"
for want in "setmaxnreg.inc.sync.aligned.u32 232" "setmaxnreg.dec.sync.aligned.u32 40" "cp.async.bulk.tensor.2d" \
            "wgmma.mma_async"; do
  grep -qF -- "$want" "$TMP/k.ptx" || tl_fail "the sm_90a PTX lacks: $want"
done
"$TLC" compile $G --target sm_90a --emit meta > "$TMP/m.json" || tl_fail "--emit meta"
python3 - "$TMP/m.json" <<'PY' || tl_fail "the metadata of the warp-specialized kernel"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["launch"]["block"] == [384, 1, 1] and m["launch"]["producer_threads"] == 128, m["launch"]
assert m["launch"]["persistent"] == 1 and m["launch"]["grid"] == [4, 8], m["launch"]  # one block per SM walks the tiles
r = m["resources"]
assert r["registers"] == 168 and r["spill_store_bytes"] == 0, r  # 65536 / 384 at entry; 232 after setmaxnreg
assert "warnings" not in m, m["warnings"]
PY
ir=$("$TLC" compile $G --target sm_90a --emit ir) || tl_fail "--emit ir"
for want in "[warp-specialized: a producer warpgroup issues the copies; stages freed on mbarriers 4..7, 1 iteration later]" \
            "producer warpgroup: 128 threads after the program's; 1 blocks per SM; setmaxnreg 40 / 232" "mbarriers: 8 at "; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || tl_fail "--emit ir lacks: $want"
done
"$TLC" compile $G --target sm_90a --emit cuda --dump wspec 2>&1 >/dev/null | grep -qF "# IR after wspec" ||
  tl_fail "--dump wspec"
# persistent: producer and program's threads each walk the tiles from the block's linear index, the
# iterations counted over the tiles (stages and phases go on: the program's threads count them modulo 2 * stages
# in 32 bits, no 64-bit division by 4 or 5 an iteration); "persistent": false keeps a block per tile
tiles='for (long long tl_tile = blockIdx.x + (long long)gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z); tl_tile < tl_ntiles; tl_tile += (long long)gridDim.x * gridDim.y * gridDim.z) {'
[ "$(printf '%s\n' "$src" | grep -cF -- "$tiles")" = 2 ] || tl_fail "persistent: not two tile loops"
for want in "tl_mbar_wait(tl_mbar + 8u * (unsigned)(0 + ((int)(tl_g % 4))), (unsigned)(tl_g / 4) & 1u);" \
            "const unsigned tl_g = tl_cit + (unsigned)tl_c0;" \
            "tl_cit = (unsigned)((tl_cit + (unsigned long long)(tl_n0 > 0 ? tl_n0 : 0)) % 8u);" "for (long long tl_j = tl_n0 > 1 ? tl_n0 - 1 : 0; tl_j < tl_n0; tl_j++)"; do
  printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "persistent: the source lacks: $want"
done
src=$("$TLC" compile $G --target sm_90a -D persistent=false --emit cuda) || tl_fail "persistent=false: --emit cuda"
printf '%s\n' "$src" | grep -q "tl_tile" && tl_fail "persistent=false: tile loops"
printf '%s\n' "$src" | grep -qF "setmaxnreg.inc" || tl_fail "persistent=false: not warp-specialized"
"$TLC" compile $G --target sm_90a -D persistent=false --emit meta | grep -q '"persistent"' &&
  tl_fail "persistent=false: launch.persistent in the metadata"
# a body that reads the stages itself (a parallel loop, not wgmma): every thread frees the stage, after a
# proxy fence (its generic reads before the async proxy's next copy), on an mbarrier of T arrivals
src=$("$TLC" compile tests/gpu/programs/tma_colsum.json -D K=1024 -D num_stages=4 --target sm_90a --emit cuda) ||
  tl_fail "tma_colsum: --emit cuda"
printf '%s\n' "$src" | grep -qF "mbarrier.init.shared::cta.b64 [%0], 128;" || tl_fail "tma_colsum: not 128 arrivals a phase"
printf '%s\n' "$src" | grep -A1 -F 'asm volatile("fence.proxy.async.shared::cta;" ::: "memory");' |
  grep -qF 'asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];"' || tl_fail "tma_colsum: no fence before the arrival"
printf '%s\n' "$src" | grep -q "__syncwarp" && tl_fail "tma_colsum: a warp's arrival"
# an m64n256 wgmma on 4 warps: 128 accumulators and the instruction's own registers must fit the registers at
# entry (ptxas allocates it there, whatever setmaxnreg gives): one block per SM, not two of 128 registers
D="tests/gpu/programs/gemm_dyn_m.json -D N=256 -D K=32 -D block_M=64 -D block_N=256"
"$TLC" compile $D --target sm_90a -o "$TMP/n256.cubin" 2>/dev/null || tl_fail "m64n256 on 4 warps does not compile"
"$TLC" compile $D --target sm_90a --emit ir | grep -qF "producer warpgroup: 128 threads after the program's; 1 blocks per SM" ||
  tl_fail "m64n256 on 4 warps: not one block per SM"
# turned off, and targets without setmaxnreg: the loop as before
for off in "--target sm_90a -D warp_specialize=false" "--target sm_90" "--target sm_80"; do
  src=$("$TLC" compile $G $off --emit cuda) || tl_fail "--emit cuda $off"
  printf '%s\n' "$src" | grep -q "setmaxnreg\|bar.sync 1\|tl_tid >= 256" && tl_fail "$off: warp-specialized"
  "$TLC" compile $G $off --emit meta | grep -q producer_threads && tl_fail "$off: producer_threads in the metadata"
done
"$TLC" compile $G --target sm_90a -D warp_specialize=false --emit ir |
  grep -qF '[not warp-specialized: its pipelined loop says "warp_specialize": false]' || tl_fail "warp_specialize=false: why not"
# examples/gemm.json with one K tile a stage (k_group 1, bench/programs/gemm_raster.json): A's rows of 64 bytes
# in the 64-byte swizzle on TMA too; 128 accumulators a thread leave room for two blocks per SM (128
# registers at entry, 216 after setmaxnreg)
ir=$("$TLC" compile bench/programs/gemm_raster.json -D k_group=1 --target sm_90a --emit ir) || tl_fail "gemm.json: --emit ir"
for want in "tensor map 0: A, box [32, 128] (innermost first), swizzle 64B" "[warp-specialized" \
            "producer warpgroup: 128 threads after the program's; 2 blocks per SM; setmaxnreg 40 / 216"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || tl_fail "gemm.json: --emit ir lacks: $want"
done
"$TLC" compile $G -D use_tma=false --target sm_90a --emit ir | grep -qF "[warp-specialized" &&
  tl_fail "a loop on cp.async is warp-specialized"
# a let of the kernel's body in the copies' coordinates: the producer evaluates it too
python3 - bench/programs/gemm_raster.json "$TMP" <<'PY' || tl_fail "making the let and var programs"
import json, sys
p = json.load(open(sys.argv[1]))
body = p["kernel"]["body"]
i = next(i for i, s in enumerate(body) if s["op"] == "pipelined")
loop = body[i]
body.insert(i, {"op": "let", "name": "row0", "value": "by * block_M"})
loop["body"][0]["src"] = "A[row0, k * block_K]"
json.dump(p, open(sys.argv[2] + "/let.json", "w"))
p["params"].append({"name": "Off", "kind": "tensor", "dtype": "int32", "shape": [1]})
body[i]["value"] = "by * block_M + Off[0]"
json.dump(p, open(sys.argv[2] + "/var.json", "w"))
PY
src=$("$TLC" compile "$TMP/let.json" -D block_K=64 -D threads=256 --target sm_90a --emit cuda) || tl_fail "let: --emit cuda"
printf '%s\n' "$src" | awk '/if \(tl_tid == 256\)/ {p = 1} p && /v_row0 =/ {ok = 1} END {exit !ok}' ||
  tl_fail "let: the producer does not evaluate row0"
"$TLC" compile "$TMP/let.json" -D block_K=64 -D threads=256 --target sm_90a -o "$TMP/let.cubin" 2>/dev/null ||
  tl_fail "let: cubin"
# a row read from a tensor: A's copy is not prefetched and stays the program's threads' (cp.async, in
# the loop), B's is the producer's; A_shared is rewritten by the next iteration: a barrier ends each one
ir=$("$TLC" compile "$TMP/var.json" -D block_K=64 -D threads=256 --target sm_90a --emit ir) || tl_fail "var: --emit ir"
printf '%s\n' "$ir" | grep -qF "[warp-specialized" || tl_fail "var: not warp-specialized"
printf '%s\n' "$ir" | grep -qF -- "-> A_shared[0+:128, 0+:64] [cp.async] [not TMA: not a copy that a pipelined loop prefetches]" ||
  tl_fail "var: A's copy"
src=$("$TLC" compile "$TMP/var.json" -D block_K=64 -D threads=256 --target sm_90a --emit cuda) || tl_fail "var: --emit cuda"
printf '%s\n' "$src" | awk '/tl_c0 < tl_n0/ {p = 1} p && /cp.async.cg.shared.global/ {c = 1}
                            p && c && /wgmma.commit_group/ {w = 1} p && w && /bar.sync 1, 256/ {ok = 1} END {exit !ok}' ||
  tl_fail "var: A's cp.async in the loop, then the gemm, then a barrier ending the iteration"
# int8 weights dequantized into a tile that rotates through two copies (the gemm's group of iteration c
# pending while c + 1 writes the other): B goes by TMA, the loop gets a producer warpgroup, and its
# iterations rotate the tile as without one
w8=tests/gpu/programs/gemm_w8a16.json
"$TLC" compile $w8 --target sm_90a --emit ir | grep -F "loop pipelined" | grep -qF "[warp-specialized" ||
  tl_fail "$w8: not warp-specialized"
src=$("$TLC" compile $w8 --target sm_90a --emit cuda) || tl_fail "$w8: --emit cuda"
printf '%s\n' "$src" | grep -qF "unsigned short *const s_B_dequant = tl_base_B_dequant + (long long)(tl_c0 % 2) * 8192LL;" ||
  tl_fail "$w8: the warp-specialized loop does not rotate the dequantized tile"
# warpgroup ping-pong (pass_wspec.c's pingpong, emit_cuda.c's pp_turn_*): flash attention's two gemms
# on 2 (3) warpgroups: each gemm's issue waits on barrier 2 + w and then lets warpgroup w + 1 go; the
# last warpgroup gives the first its first turn before the loop, the first takes the one left after it;
# "pingpong": false, and a GEMM's one gemm (by default), do not
F=examples/flash_attention.json
# (with P V issued late, the example's default, both gemms are one turn)
for args in "-D dim=64 -D block_M=128 -D threads=256 -D overlap=false:2:2" "-D dim=64 -D block_M=192 -D block_N=64 -D threads=384 -D overlap=false:3:2" \
            "-D dim=128 -D is_causal=true -D overlap=false:2:2" "-D dim=64:3:1" "-D dim=128:2:1"; do
  N=${args##*:}; a=${args%:*}; W=${a##*:}; a=${a%:*}
  src=$("$TLC" compile $F $a --target sm_90a --emit cuda) || tl_fail "flash $a: --emit cuda"
  for want in "if ((int)tl_tid / 128 == $((W - 1))) asm volatile(\"bar.arrive 2, 256;\" ::: \"memory\");" \
              "if ((int)tl_tid / 128 == 0) asm volatile(\"bar.sync 2, 256;\" ::: \"memory\");"; do
    printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "flash $a: the source lacks: $want"
  done
  [ "$(printf '%s\n' "$src" | grep -cF 'asm volatile("bar.sync %0, 256;" :: "r"(2 + (int)tl_tid / 128) : "memory");')" = $N ] ||
    tl_fail "flash $a: not $N turns"
  [ "$(printf '%s\n' "$src" | grep -cF "asm volatile(\"bar.arrive %0, 256;\" :: \"r\"(2 + ((int)tl_tid / 128 + 1) % $W) : \"memory\");")" = $N ] ||
    tl_fail "flash $a: not $N turns passed on"
  printf '%s\n' "$src" | awk '/bar.sync %0, 256/ {t = 1} t && /wgmma.mma_async/ {m = 1} m && /wgmma.commit_group/ {c = 1}
                              c && /bar.arrive %0, 256/ {a = 1} a && /wgmma.wait_group.sync.aligned [01];/ {ok = 1} END {exit !ok}' ||
    tl_fail "flash $a: not wait for the turn, issue, commit, pass the turn, wait for the gemm"
  "$TLC" compile $F $a --target sm_90a --emit ir | grep -F "loop pipelined" |
    grep -qF "[ping-pong: the warpgroups take turns issuing the body's gemms on wgmma, named barriers 2..$((W + 1))]" ||
    tl_fail "flash $a: --emit ir does not say ping-pong"
done
# emit_cuda.c's fold_fills: the clear of S before Q K^T (the constant if's side taken) is the gemm's first
# k step with scale-d false; the causal mask is no fill of zeros and stays
src=$("$TLC" compile $F -D dim=64 --target sm_90a --emit cuda) || tl_fail "flash d64: --emit cuda"
[ "$(printf '%s\n' "$src" | grep -cF '"l"(tl_da), "l"(tl_db), "r"(tl_k) : "memory");')" = 1 ] ||
  tl_fail "flash: Q K^T does not clear S on its first k step"
printf '%s\n' "$src" | grep -qF "r_acc_s[tl_r] = tl_v;" && tl_fail "flash: S still cleared before Q K^T"
"$TLC" compile $F -D is_causal=true --target sm_90a --emit cuda | grep -qF '"r"(tl_k) : "memory");' &&
  tl_fail "causal flash: Q K^T clears S after the mask"
sed 's/"num_stages": "num_stages",/"num_stages": "num_stages", "pingpong": "is_causal",/' $F > "$TMP/fpp.json"
"$TLC" compile "$TMP/fpp.json" -D dim=64 --target sm_90a --emit ir | grep -F "loop pipelined" |
  grep -qF "[no ping-pong: the loop says \"pingpong\": false]" || tl_fail "\"pingpong\": false: --emit ir"
"$TLC" compile "$TMP/fpp.json" -D dim=64 --target sm_90a --emit cuda | grep -qF "bar.arrive" &&
  tl_fail "\"pingpong\": false: turns taken"
"$TLC" compile "$TMP/fpp.json" -D dim=64 -D is_causal=true --target sm_90a --emit cuda | grep -qF "bar.arrive" ||
  tl_fail "\"pingpong\": true (a constant expression): no turns"
"$TLC" compile $F -D dim=64 -D block_M=64 -D threads=128 --target sm_90a --emit ir | grep -F "loop pipelined" |
  grep -qF "[no ping-pong: the program's threads are one warpgroup]" || tl_fail "one warpgroup: --emit ir"
"$TLC" compile $G --target sm_90a --emit ir | grep -F "loop pipelined" | grep -qF "[no ping-pong: its body holds one gemm on wgmma" ||
  tl_fail "GEMM: --emit ir does not say why no ping-pong"
"$TLC" compile $G --target sm_90a --emit cuda | grep -qF "bar.arrive" && tl_fail "GEMM: turns taken by default"
# the tight register budget (pass_wspec.c): d64 attention in 3 warpgroups of 64 x 128 (138 registers in
# fragments) gets its producer with 24 registers a thread, 160 for the others, and builds without spills;
# a build on that budget that spills is built again without the producer (and the log says so)
F3="$F -D dim=64 -D block_M=192 -D threads=384"
"$TLC" compile $F3 --target sm_90a --emit ir | grep -qF "producer warpgroup: 128 threads after the program's; 1 blocks per SM; setmaxnreg 24 / 160" ||
  tl_fail "d64 in 3 warpgroups: not on the tight budget"
"$TLC" compile $F3 -D overlap=true --target sm_90a --emit meta | python3 -c '
import json, sys
m = json.load(sys.stdin)
assert m["launch"]["producer_threads"] == 128 and m["resources"]["spill_store_bytes"] == 0, (m["launch"], m["resources"])
assert "setmaxnreg.dec.sync.aligned.u32 24" not in m["log"] and "tight" not in m["log"], m["log"]' ||
  tl_fail "d64 in 3 warpgroups: the tight build"
"$TLC" compile $F -D block_M=192 -D block_N=88 -D threads=384 -D overlap=true --target sm_90a --emit meta | python3 -c '
import json, sys
m = json.load(sys.stdin)
assert "producer_threads" not in m["launch"], m["launch"]
assert "tlc: the build with a producer warpgroup on its tight register budget spilled registers; built again without it" in m["log"], m["log"]' ||
  tl_fail "a tight build that spills is not built again without the producer"
# on the usual budget: W4A16's split kernel at M = 1 with 3 stages fits 5 blocks per SM by shared memory, whose
# 48 registers a thread spilled; built again with 4 (64 registers, no spill), the log saying so (the example as it
# was before its scale groups were rounded to 8: its threads copy them, with registers of their own)
tl_w4a16_unrounded examples/gemm_w4a16_splitk.json "$TMP/sk23.json" || tl_fail "gemm_w4a16_splitk: no rounded scale groups to undo"
"$TLC" compile "$TMP/sk23.json" -D M=1 -D N=8192 -D K=8192 -D block_N=128 -D block_K=64 -D num_stages=3 \
  -D split_k=8 --target sm_90a --emit meta | python3 -c '
import json, sys
m = json.load(sys.stdin)
assert m["kernels"][0]["launch"]["producer_threads"] == 128, m["kernels"][0]["launch"]
assert all(k["resources"]["spill_store_bytes"] == 0 for k in m["kernels"]), [k["resources"] for k in m["kernels"]]
assert "tlc: kernel 1\x27s build with a producer warpgroup and more blocks per SM spilled registers; built again with at most 4" in m["log"], m["log"]' ||
  tl_fail "a build with a producer that spills is not built again with a block less per SM"
# the register cliff: 128 x 256 float32 accumulators on 128 threads; nothing in gemm.json names a thread, so
# pass_threads.c runs it on 256 (two warpgroups of m64n256), with no warning
ir=$("$TLC" compile examples/gemm.json -D block_N=256 -D block_K=64 --target sm_90a --emit ir 2>"$TMP/err") ||
  tl_fail "gemm.json block_N=256: --emit ir"
printf '%s\n' "$ir" | grep -qF "kernel matmul: threads 256 x 1 x 1" || tl_fail "block_N=256: not grown to 256 threads"
printf '%s\n' "$ir" | grep -qF "threads: 256, not the program's 128 (pass_threads.c:" || tl_fail "block_N=256: no threads line"
printf '%s\n' "$ir" | grep -qF "alloc C_local: fragment float32[128, 256] in registers" || tl_fail "block_N=256: C not in registers"
printf '%s\n' "$ir" | grep -qF "[wgmma m64nNk16]" || tl_fail "block_N=256: the gemm is not on wgmma"
grep -q "warning" "$TMP/err" && tl_fail "gemm.json block_N=256 warns: $(cat "$TMP/err")"
# a program that names its threads keeps them: the warning, and why the compiler did not grow them
sed '0,/"body": \[/s||"body": [{"op": "let", "name": "tx", "value": "thread_binding(0)"}, |' examples/gemm.json > "$TMP/tx.json"
err=$("$TLC" compile "$TMP/tx.json" -D block_N=256 -D block_K=64 --target sm_90a -o "$TMP/c.cubin" 2>&1) ||
  tl_fail "gemm.json with a thread_binding, block_N=256: compile: $err"
printf '%s\n' "$err" | grep -qF "/kernel/body/3: warning: fragment 'C_local' takes 256 elements a thread (128 threads), more than the 128 a thread keeps in registers: it lives in shared memory and its gemm runs element by element, off the matrix cores (hundreds of times slower); 256 threads or a smaller tile would keep it in registers (the compiler keeps the program's: it names a thread (thread_binding))" ||
  tl_fail "no register-cliff warning on stderr: $err"
"$TLC" compile "$TMP/tx.json" -D block_N=256 -D block_K=64 --target sm_90a --emit meta 2>/dev/null |
  python3 -c 'import json,sys; w=json.load(sys.stdin)["warnings"]; assert len(w) == 1 and w[0]["pointer"] == "/kernel/body/3", w' ||
  tl_fail "no register-cliff warning in the metadata"
err=$("$TLC" compile examples/gemm.json --target sm_90a -o "$TMP/d.cubin" 2>&1) || tl_fail "gemm.json: compile"
printf '%s\n' "$err" | grep -q "warning" && tl_fail "gemm.json as written warns: $err"
# pass_wspec.c's pre copies: flash attention's Q tile, copied before the warp-specialized loop, is the
# producer's too, tile by tile, into two copies (the next tile's while this one's is read); the program's
# threads wait for it on its own mbarrier and free it after the loop (its last reader)
F=examples/flash_attention.json
ir=$("$TLC" compile $F -D is_causal=true -D dim=64 --target sm_90a --emit ir) || tl_fail "flash --emit ir"
printf '%s\n' "$ir" | grep -qF -- "-> Q_shared[0+:192, 0+:64] [TMA: cp.async.bulk.tensor, tensor map 2, by the producer warpgroup tile by tile, into two copies of the buffer (the next tile's while this one's is read); freed after loop]" ||
  tl_fail "flash: Q is not the producer's pre copy"
printf '%s\n' "$ir" | grep -qF "alloc Q_shared: shared float16[192, 64] in shared memory at 0, 2 stages" ||
  tl_fail "flash: Q_shared has not two copies"
# at head dim 128 the three stages of K and V leave room for one copy of Q
"$TLC" compile $F --target sm_90a --emit ir | grep -qF "by the producer warpgroup tile by tile, into the buffer (no room in shared memory for a second copy); freed after loop]" ||
  tl_fail "flash d128: Q is not the producer's pre copy, in one copy"
src=$("$TLC" compile $F -D is_causal=true -D dim=64 --target sm_90a --emit cuda) || tl_fail "flash --emit cuda"
for want in "if (tl_pq6 >= 2u) tl_mbar_wait(tl_mbar + 8u * (unsigned)(8 + tl_qs), (unsigned)(tl_pq6 / 2u - 1) & 1u);" \
            "unsigned short *const s_Q_shared = tl_base_Q_shared + (long long)(tl_qs6) * 12288LL;" \
            "tl_mbar_wait(tl_mbar + 8u * (unsigned)(6 + tl_qs6), (unsigned)(tl_cq6 / 2u) & 1u);" \
            "if ((tl_tid & 31) == 0) asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(tl_mbar + 8u * (unsigned)(8 + tl_qs6)) : \"memory\");"; do
  printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "flash's pre copy: the CUDA lacks: $want"
done
# the PTX back end's the same: the Q copy's full mbarriers of one arrival, its free ones of one per warp of the
# program's 384 threads, the producer expecting its bytes (192 x 64 halves), the consumers freeing it after
# their wgmma groups
"$TLC" compile $F -D is_causal=true -D dim=64 --target compute_90a --backend ptx --emit ptx -o "$TMP/f.ptx" ||
  tl_fail "flash --backend ptx --emit ptx"
for want in "mbarrier.init.shared::cta.b64 [%r2+56], 1;" "mbarrier.init.shared::cta.b64 [%r2+72], 12;" \
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r50], 24576;"; do
  grep -qF -- "$want" "$TMP/f.ptx" || tl_fail "flash's pre copy: the PTX lacks: $want"
done
grep -A2 -F "wgmma.wait_group.sync.aligned 0;" "$TMP/f.ptx" | grep -qF "mbarrier.arrive.shared::cta.b64" ||
  tl_fail "flash's pre copy: the PTX's consumers do not free Q's copy after their wgmma groups"
"$TLC" compile $F --target sm_90a --backend ptx --emit ir | grep -qF "by the producer warpgroup tile by tile" ||
  tl_fail "flash --backend ptx: Q is not the producer's pre copy"
# not where the kernel is not persistent
sed 's/"kernel": {/"kernel": {"persistent": false, /' $F > "$TMP/np.json"
"$TLC" compile "$TMP/np.json" --target sm_90a --emit ir | grep -qF "[not TMA: before the warp-specialized loop, not the producer's: the kernel is not persistent (one tile a block: nothing to copy ahead)]" ||
  tl_fail "flash, not persistent: no reason for the threads' own Q copy"
# a bias tile read element by element after the loop (tests/gpu/programs/gemm_bias_pre.json): every thread
# frees its copy after a proxy fence, the free mbarriers counting the 128 threads
src=$("$TLC" compile tests/gpu/programs/gemm_bias_pre.json --target sm_90a --emit cuda) || tl_fail "gemm_bias_pre --emit cuda"
for want in 'asm volatile("mbarrier.init.shared::cta.b64 [%0], 128;" :: "r"(tl_mbar + 8u * (unsigned)tl_i) : "memory");' \
            'asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); /* Bias_shared read: free its copy */' \
            'asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(tl_mbar + 8u * (unsigned)(10 + tl_qs8)) : "memory");'; do
  printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "gemm_bias_pre's pre copy: the CUDA lacks: $want"
done
printf '%s\n' "$src" | grep -A1 -F "Bias_shared read: free its copy" | grep -qF 'fence.proxy.async.shared::cta' ||
  tl_fail "gemm_bias_pre: no proxy fence before the threads free the bias's copy"
# the PTX back end's: free mbarriers of 128 arrivals, each thread's after a proxy fence
"$TLC" compile tests/gpu/programs/gemm_bias_pre.json --target compute_90a --backend ptx --emit ptx -o "$TMP/b.ptx" ||
  tl_fail "gemm_bias_pre --backend ptx --emit ptx"
grep -qF "mbarrier.init.shared::cta.b64 [%r2+88], 128;" "$TMP/b.ptx" || tl_fail "gemm_bias_pre: the PTX's free mbarriers"
grep -A2 -F "wgmma.wait_group.sync.aligned 0;" "$TMP/b.ptx" | grep -A1 -F "fence.proxy.async.shared::cta;" |
  grep -qF "mbarrier.arrive.shared::cta.b64" || tl_fail "gemm_bias_pre: the PTX's threads free the bias's copy without a fence"
# W4A16 in Machete's form: the uint4 weights by TMA (their bytes) give the loop a producer warpgroup; with the
# scales one row per group (gemm_w4a16_t_gn) every copy is a bulk tensor copy and the loop has no block barrier;
# with N not a multiple of 8 their copy goes through registers one iteration ahead (iteration 0's before the
# loop, then a barrier, the next one's stored as an iteration ends, before the barrier that closes it)
G=examples/gemm_w4a16_t_gn.json
ir=$("$TLC" compile $G --target sm_90a -D M=4096 -D N=8192 -D K=8192 -D block_M=256 -D block_N=128 -D threads=256 \
  --emit ir) || tl_fail "$G: --emit ir"
printf '%s\n' "$ir" | grep -qF "[warp-specialized: a producer warpgroup issues the copies" || tl_fail "$G: not warp-specialized"
printf '%s\n' "$ir" | grep -F -- "-> S_shared" | grep -qF "[TMA: cp.async.bulk.tensor, tensor map 2" || tl_fail "$G: St not TMA"
printf '%s\n' "$ir" | grep -qF "  barrier" && tl_fail "$G: a barrier in the loop"
src=$("$TLC" compile $G --target sm_90a -D M=4096 -D N=8192 -D K=8192 -D block_M=256 -D block_N=128 -D threads=256 \
  --emit cuda) || tl_fail "$G: --emit cuda"
printf '%s\n' "$src" | awk '/for \(long long tl_c[0-9]+ = 0;/ { l = 1 } l && /bar\.sync 1/ { bad = 1 } /tl_cit = \(unsigned\)/ { l = 0 }
  END { exit bad }' || tl_fail "$G: a named barrier among the consumers in the loop"
ir=$("$TLC" compile $G --target sm_90a -D N=300 --emit ir) || tl_fail "$G N=300: --emit ir"
printf '%s\n' "$ir" | grep -F -- "-> S_shared" | grep -qF "[prefetched through registers" || tl_fail "$G N=300: St not through registers"
printf '%s\n' "$ir" | grep -qF "  barrier (end of each iteration)" || tl_fail "$G N=300: no barrier closing the iterations"
src=$("$TLC" compile $G --target sm_90a -D N=300 --emit cuda) || tl_fail "$G N=300: --emit cuda"
printf '%s\n' "$src" | awk '/tl_rq[0-9]+\[tl_r\] = / { ld = NR } /tl_mbar_wait\(tl_mbar/ && ld && !w { w = NR }
  /= tl_f2h\(tl_rq[0-9]+\[tl_r\]\)/ { st = NR } /bar\.sync 1, 128/ && st && !b { b = NR }
  END { exit !(ld && w > ld && st > w && b > st) }' ||
  tl_fail "$G N=300: not loaded before the stage's wait and stored before the closing barrier"
# slices (pass_wspec.c): examples/gemm_w4a16_sliced.json's loop in 3 slices of 128 threads, 6 stages (two a
# slice); the block is 3 x 128 + the producer, not persistent; slice s starts at iteration s, steps 3, and
# lane 0 of producer warp s issues its copies (into its slice's own stages, waiting on that slice alone); slice 0
# alone runs the statements before (after them every slice waits on barrier 4) and after the loop (the others
# return once their sums are in shared memory, which slice 0 adds)
S=examples/gemm_w4a16_sliced.json
ir=$("$TLC" compile $S --target sm_90a --emit ir) || tl_fail "$S: --emit ir"
for want in "[in 3 slices: slice s of the program's threads runs iterations s, s + 3, ...; its gemms' sums added into slice 0's after the loop, through A_shared's memory; slice 0 runs the statements before and after the loop; named barriers 1..4]" \
            "producer warpgroup: 128 threads after the program's (3 slices of 128); 1 blocks per SM" "[no ping-pong: the loop runs in slices]"; do
  printf '%s\n' "$ir" | grep -qF -- "$want" || tl_fail "$S: --emit ir lacks: $want"
done
printf '%s\n' "$ir" | grep -q "persistent" && tl_fail "$S: persistent in slices"
src=$("$TLC" compile $S --target sm_90a --emit cuda) || tl_fail "$S: --emit cuda"
for want in "__launch_bounds__(512, 1)" "if (tl_tid >= 384) {" "if ((tl_tid - 384) % 32 == 0 && (tl_tid - 384) / 32 < 3) {" \
            "for (long long tl_f = (long long)tl_pit; tl_f < tl_pn; tl_f += 3, tl_pit += 3) {" \
            "const int tl_slice = __shfl_sync(0xffffffffu, (int)(tl_tid / 128), 0);" "const int tl_stid = tl_tid % 128;" "const int tl_tid = tl_stid; (void)tl_tid;" \
            "for (long long tl_c0 = tl_slice; tl_c0 < tl_n0; tl_c0 += 3) {" "if (tl_slice > 0) return;" \
            "r_Ct_local[tl_i] += tl_sum[(long long)tl_i * 128]" "tl_sum[(long long)tl_i * 128] = r_Ct_local[tl_i]"; do
  printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "$S: the source lacks: $want"
done
[ "$(printf '%s\n' "$src" | grep -c 'bar.sync 4, 384;')" = 3 ] || tl_fail "$S: not 3 barriers of every slice"
printf '%s\n' "$src" | grep -A1 -F "if (tl_slice > 0) return;" | grep -qF 'bar.sync 1, 128;' ||
  tl_fail "$S: slice 0 goes on before all its threads have read the sums"
printf '%s\n' "$src" | awk '/if \(tl_tid < 128\) \{ \/\* slice 0/ { s0 = 1 } /bar.sync 4, 384/ { exit !s0 }' ||
  tl_fail "$S: the statements before the loop are not slice 0's"
"$TLC" compile $S --target sm_90a --emit meta > "$TMP/s.json" || tl_fail "$S: --emit meta"
python3 - "$TMP/s.json" <<'PY' || tl_fail "$S: the metadata of the kernel in slices"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["launch"]["block"] == [512, 1, 1] and m["launch"]["slices"] == 3 and "persistent" not in m["launch"], m["launch"]
assert m["resources"]["spill_store_bytes"] == 0, m["resources"]
PY
# a gemm under an if of the body: its sum zeroed in slices 1.. and added into slice 0's as a top-level one's
src=$("$TLC" compile tests/gpu/programs/gemm_sliced_if.json --target sm_90a --emit cuda) || tl_fail "gemm_sliced_if: --emit cuda"
for want in "r_C_local[tl_i] = 0;" "r_C_local[tl_i] += tl_sum[(long long)tl_i * 128]"; do
  printf '%s\n' "$src" | grep -qF -- "$want" || tl_fail "gemm_sliced_if: the source lacks: $want"
done
# refused, and why: stages the slices would share; a group in flight with too few stages; a fragment of the body
# read after the loop; a body writing
# shared memory (a copy of rows not of whole 16 bytes, K = 650, is not the producer's); a gemm that clears its sum;
# no producer warpgroup (sm_90)
why() { # program, what --emit ir must say, -D...
  p=$1 w=$2; shift 2
  "$TLC" compile "$p" --target "${TGT:-sm_90a}" "$@" --emit ir 2>&1 | grep -qF -- "$w" || tl_fail "$p $*: --emit ir lacks: $w"
}
why $S "[not in 4 slices: its 6 stages (num_stages) are not a multiple of its 4 slices, at least 4: each slice takes stages of its own]" -D slices=4
why tests/gpu/programs/gemm_sliced.json "[not in 3 slices: its 7 stages (num_stages + 1, for its gemm's group in flight) are not a multiple of its 3 slices, at least 6" -D num_stages=6
why tests/gpu/programs/gemm_sliced.json "[in 3 slices" -D num_stages=8
python3 - $S "$TMP" <<'PY' || tl_fail "$S: the variants"
import json, sys
p = json.load(open(sys.argv[1]))
body = p["kernel"]["body"]
loop = next(s for s in body if isinstance(s, dict) and s["op"] == "pipelined")
w = json.loads(json.dumps(p))  # a shared buffer the body writes
wb = w["kernel"]["body"]
wb.insert(0, {"op": "alloc_shared", "name": "Ct_tmp", "shape": ["block_N", "block_K"], "dtype": "float16"})
wl = next(s for s in wb if isinstance(s, dict) and s["op"] == "pipelined")
next(s for s in wl["body"] if isinstance(s, dict) and s["op"] == "parallel")["body"].insert(0, "Ct_tmp[i, j] = 0.0")
json.dump(w, open(sys.argv[2] + "/sw.json", "w"))
a = json.loads(json.dumps(p))  # a fragment of the body read after the loop (the last iteration's, some other slice's)
ab = a["kernel"]["body"]
ab.insert(0, {"op": "alloc_shared", "name": "Bf_shared", "shape": ["block_N", "block_K"], "dtype": "float16"})
ab.append({"op": "copy", "src": "B_frag", "dst": "Bf_shared"})
json.dump(a, open(sys.argv[2] + "/sa.json", "w"))
next(s for s in loop["body"] if isinstance(s, dict) and s["op"] == "gemm")["clear_accum"] = True  # a gemm that clears its sum
json.dump(p, open(sys.argv[2] + "/sc.json", "w"))
PY
why "$TMP/sw.json" "[not in 3 slices: its body writes Ct_tmp, which every slice would share"
why "$TMP/sa.json" "[not in 3 slices: a statement after it reads B_frag, which each slice writes for its own iterations]"
why "$TMP/sc.json" "[not in 3 slices: a gemm of its body clears Ct_local (clear_accum): there is no sum to split]"
why $S "[not in 3 slices: its body writes A_shared, which every slice would share" -D K=650
TGT=sm_90 why $S "[not in 3 slices: the loop is not warp-specialized]"
"$TLC" compile $S --target sm_90a -D slices=5 --emit ir 2>&1 | grep -qF "'slices' is 5; it must be from 1 to 4" ||
  tl_fail "$S: slices=5 is not an error"
exit 0
