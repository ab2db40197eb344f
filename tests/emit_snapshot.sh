#!/bin/sh
# tests/emit_snapshot.sh - writes the generated source of every program we
# keep (examples/, tests/gpu/programs/, bench/programs/, tests/golden/) for
# sm_80, sm_90a, gfx942 and gfx1201 into one directory, so that a change
# meant to leave the emitter's output alone can be checked byte for byte:
#
#   sh tests/emit_snapshot.sh /tmp/before     # on the old commit
#   sh tests/emit_snapshot.sh /tmp/after      # with the change
#   diff -r /tmp/before /tmp/after            # must print nothing
#
# One file per program and target (NAME.TARGET.cu / .hip); a program that
# does not compile for a target gets NAME.TARGET.err with tlc's message
# instead (that must not change either).  Needs the built tlc (TL_BUILD,
# default build) and NVRTC; gfx targets need clang or hiprtc.
set -u
OUT=${1:?usage: emit_snapshot.sh OUTDIR}
TLC=${TL_BUILD:-build}/bin/tlc
mkdir -p "$OUT" || exit 1
n=0
# snap NAME PROGRAM [-D NAME=VALUE]...: the program's source for every target
snap() {
  name=$1
  shift
  for t in sm_80 sm_90a gfx942 gfx1201; do
    case $t in gfx*) form=hip ;; *) form=cuda ;; esac
    if "$TLC" compile "$@" --target $t --emit $form -o "$OUT/$name.$t.$form" 2>"$OUT/$name.$t.err"; then
      rm -f "$OUT/$name.$t.err"
    else
      rm -f "$OUT/$name.$t.$form"
    fi
    n=$((n + 1))
  done
}
for p in examples/*.json tests/gpu/programs/*.json bench/programs/*.json tests/golden/*.json; do
  [ -f "$p" ] || continue
  name=$(echo "$p" | tr / _)
  snap "${name%.json}" "$p"
done
# variants that take other paths: wgmma (8 warps, 64-wide K tiles on
# sm_90a), flash attention small enough for AMD's LDS, a causal one
snap gemm_raster_wgmma bench/programs/gemm_raster.json -D block_K=64 -D threads=256
snap flash_small examples/flash_attention.json -D block_M=64 -D block_N=64 -D threads=128
snap flash_causal examples/flash_attention.json -D block_N=64 -D is_causal=true
snap long_200 "$(python3 bench/long_program.py 200 "$OUT/.long_200.json" && echo "$OUT/.long_200.json")"
rm -f "$OUT/.long_200.json"
echo "emit_snapshot.sh: $n sources in $OUT ($(ls "$OUT" | grep -c '\.err$') errors)"
