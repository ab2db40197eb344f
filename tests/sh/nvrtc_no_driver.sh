#!/bin/sh
# tests/sh/nvrtc_no_driver.sh - compiling never starts the CUDA driver:
# NVRTC 12.9 and newer keep a cache of their own in the driver's compute
# cache, reached by opening libcuda.so.1 and calling cuInit in the process
# that compiles (a tlserverd worker, under its --worker-memory limit), and
# answer a source compiled before without running ptxas (so without its
# report in the log).  compiler/nvrtc.c turns that cache off (--no-cache);
# this test runs `tlc targets` (every probe), and `tlc compile` for a cubin
# and for PTX, with glibc's loader trace (LD_DEBUG=libs) and fails when the
# loader was asked for libcuda.so.1 at all.  It needs no GPU: the lookup
# shows in the trace whether the library is there or not.
# Exit 0 pass, 1 fail, 77 skip (no NVRTC, or one older than 12.9).
TLC=${TL_BUILD:-build}/bin/tlc
ver=$("$TLC" targets 2>/dev/null | sed -n 's/^# NVRTC \([0-9][0-9]*\)\.\([0-9][0-9]*\) .*/\1 \2/p')
if [ -z "$ver" ]; then
  echo "no NVRTC here: nothing to check" >&2
  exit 77
fi
set -- $ver
if [ "$1" -lt 12 ] || { [ "$1" -eq 12 ] && [ "$2" -lt 9 ]; }; then
  echo "NVRTC $1.$2 has no cache of its own (12.9 and newer have): nothing to check" >&2
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
run() { # NAME COMMAND...: runs with the loader's trace in $tmp/NAME.PID
  name=$1
  shift
  LD_DEBUG=libs LD_DEBUG_OUTPUT="$tmp/$name" "$@" >"$tmp/$name.out" 2>&1 || fail "$* failed: $(tail -5 "$tmp/$name.out")"
  ls "$tmp/$name".* >/dev/null 2>&1 || fail "no loader trace from $*: LD_DEBUG is not honoured here"
  grep -q 'find library=libnvrtc' "$tmp/$name".[0-9]* || fail "the loader trace of $* does not show NVRTC being opened"
  if grep -l 'libcuda\.so' "$tmp/$name".[0-9]* >/dev/null; then
    fail "$* asked the loader for libcuda: $(grep -h 'libcuda\.so' "$tmp/$name".[0-9]* | head -3)"
  fi
}
run targets "$TLC" targets
run cubin "$TLC" compile examples/gemm.json --target sm_90a -o "$tmp/gemm.cubin"
run ptx "$TLC" compile examples/tilus_add_one.json --target compute_90a --emit ptx --backend cuda -o "$tmp/add_one.ptx"
# the resource figures of the cubin are all there: ptxas ran and reported
meta=$("$TLC" compile examples/gemm.json --target sm_90a --emit meta) || fail "tlc compile --emit meta"
for k in registers stack_frame_bytes spill_store_bytes spill_load_bytes; do
  printf '%s\n' "$meta" | grep -q "\"$k\": [0-9]" || fail "the metadata lacks $k"
done
echo "ok: no libcuda lookup while probing and compiling; the metadata has every resource figure"
