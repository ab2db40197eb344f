#!/bin/sh
# tests/gpu/run.sh - builds and runs the GPU-side checks of the NVIDIA
# plumbing (compiler/nvrtc.c, compiler/gpudrv.c + cudadrv.c, compiler/cubin.c) on a machine
# with a GPU; on one without, it builds, says why it skips, and exits 77.
#
#   sh tests/gpu/run.sh [cuda_smoke options: -d ORDINAL -s SEED]
#
# 1. Builds tests/gpu/cuda_smoke.c with the machine's C compiler ($CC, else
#    cc) straight from the .c files it needs: libc, libdl and jansson (the
#    toolchain entry of nvrtc.c reads resources into JSON; where jansson's
#    headers are not installed, point CPATH and LIBRARY_PATH at a copy); no
#    SQLite or curl.
# 2. Runs it: it compiles kernels with NVRTC for the device's own targets
#    (sm_N, sm_Na, compute_N), loads and launches them on random data,
#    checks every result on the CPU, and compares registers, local and
#    shared memory between cuFuncGetAttribute, the ELF reader and ptxas.
# 3. Where cuobjdump is installed, compares its `-res-usage` figures for the
#    cubins with the ELF reader's: REG must equal the registers and STACK
#    the local bytes; SHARED is printed beside ours (the tools may count the
#    reserved 1 KiB window on sm_90+ differently).
#
# Output goes to stdout and to $OUT/gpu-smoke.log (with the cubins and PTX
# under $OUT/cubins/) when OUT is set, else to build/gpu/.  Exit status:
# 0 passed, 1 failed (or did not build), 77 skipped (no CUDA driver or
# device, or no NVRTC).

ROOT=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
cd "$ROOT" || exit 1
DEST=${OUT:-$ROOT/build/gpu}
mkdir -p "$DEST/cubins" || exit 1
LOG=$DEST/gpu-smoke.log
WORK=$(mktemp -d) || exit 1
trap 'rm -rf "$WORK"' EXIT
CC=${CC:-cc}

{
  echo "# tests/gpu/run.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "# host: $(uname -srm)"
  echo "# git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 |
      sed 's/^/# gpu: /'
  else
    echo "# gpu: no nvidia-smi"
  fi
  echo "# cc: $($CC --version 2>&1 | head -n 1)"
} >"$LOG"
cat "$LOG"

echo "building cuda_smoke"
if ! $CC -std=c11 -O2 -g -Wall -Wextra -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L \
  -Iproto -Icompiler -o "$WORK/cuda_smoke" \
  tests/gpu/cuda_smoke.c compiler/nvrtc.c compiler/target.c compiler/gpudrv.c compiler/cudadrv.c compiler/hipdrv.c \
  compiler/cubin.c compiler/elf.c compiler/dlutil.c proto/tl_error.c \
  -ljansson -ldl -pthread >"$WORK/build.log" 2>&1; then
  cat "$WORK/build.log" | tee -a "$LOG"
  echo "run.sh: FAILED: cuda_smoke did not build" | tee -a "$LOG"
  exit 1
fi
cat "$WORK/build.log" >>"$LOG"

"$WORK/cuda_smoke" -o "$DEST/cubins" "$@" >"$WORK/smoke.out" 2>"$WORK/smoke.err"
rc=$?
cat "$WORK/smoke.out" | tee -a "$LOG"
cat "$WORK/smoke.err" >>"$LOG"
if [ "$rc" -eq 77 ]; then
  echo "run.sh: SKIPPED: $(tail -n 1 "$WORK/smoke.err")" | tee -a "$LOG"
  exit 77
fi

# 3. cuobjdump's view of the cubins, where there is one.
if command -v cuobjdump >/dev/null 2>&1; then
  echo "== cuobjdump -res-usage" | tee -a "$LOG"
  for f in "$DEST"/cubins/*.cubin; do
    [ -e "$f" ] || continue
    target=$(basename "$f" .cubin)
    target=${target#smoke.}
    cuobjdump -res-usage "$f" >"$WORK/res.txt" 2>&1
    sed "s|^|[$target] |" "$WORK/res.txt" >>"$LOG"
    # "elf: target=T kernel=K regs=R shared=S shared_section=SS local=L ..."
    # against " Function K:" followed by "  REG:R STACK:L SHARED:X LOCAL:Y ..."
    awk -v target="$target" '
      FNR == NR {
        if ($1 == "elf:" && $2 == "target=" target) {
          split($3, k, "="); split($4, r, "="); split($5, s, "=");
          split($6, ss, "="); split($7, l, "=");
          regs[k[2]] = r[2]; shared[k[2]] = s[2]; section[k[2]] = ss[2]; local_[k[2]] = l[2];
        }
        next
      }
      $1 == "Function" { name = $2; sub(/:$/, "", name); next }
      name != "" && /REG:/ {
        for (i = 1; i <= NF; i++) { split($i, kv, ":"); v[kv[1]] = kv[2] }
        if (!(name in regs)) { name = ""; next }
        seen++
        status = "ok"
        if (v["REG"] != regs[name] || v["STACK"] != local_[name]) { status = "MISMATCH"; bad++ }
        printf "%s %s: cuobjdump REG %s STACK %s SHARED %s | ELF regs %s local %s shared %s (section %s)  %s\n",
               target, name, v["REG"], v["STACK"], v["SHARED"], regs[name], local_[name],
               shared[name], section[name], status
        name = ""
      }
      END {
        if (seen == 0) print target ": cuobjdump output not understood (see the log); not compared"
        exit bad > 0
      }' "$WORK/smoke.out" "$WORK/res.txt" | tee -a "$LOG"
    # tee hides awk's status: look for the word instead.
    if grep -q "^$target .*MISMATCH\$" "$LOG"; then
      rc=1
    fi
  done
else
  echo "cuobjdump not found: resource figures not cross-checked with it" | tee -a "$LOG"
fi

if [ "$rc" -eq 0 ]; then
  echo "run.sh: PASSED" | tee -a "$LOG"
else
  echo "run.sh: FAILED (status $rc)" | tee -a "$LOG"
fi
exit "$rc"
