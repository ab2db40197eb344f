#!/bin/sh
# tests/sh/gpu_examples.sh - every example on the GPU against the reference
# interpreter, through tests/gpu/check_examples.py, when this machine has a
# usable GPU; otherwise a visible skip.
#
#   TL_BUILD=build sh tests/sh/gpu_examples.sh
#
# A GPU is usable when `tlc run --device cuda` can open the CUDA driver and
# find a device: the probe runs the smallest example (tilus_add_one, n = 1)
# with the same loader the checks use, under a 120-second limit (a probe
# that hangs is a failure).  When the probe says there is no
# CUDA driver or device, this exits 77 and its last line on stderr says why
# (tests/run.sh prints that line).  A probe that fails for another reason
# (no NVRTC on a GPU machine, a kernel that does not load) is a failure, as
# is a missing tlc.  With a GPU it runs
#   /usr/bin/python3 tests/gpu/check_examples.py --tlc $TL_BUILD/bin/tlc
# and exits with its status (0 passed, 1 failed, 77 skipped).
#
# Exit status: 0 passed, 1 failed, 77 skipped (no GPU here).

cd "$(dirname "$0")/../.." || exit 1
TLC=${TL_BUILD:-build}/bin/tlc
PY=/usr/bin/python3
SKIP_REASON="no GPU here (tests/gpu/check_examples.py runs on a GPU machine)"

if [ ! -x "$TLC" ]; then
  echo "gpu_examples.sh: FAIL: $TLC is not built (run make)" >&2
  exit 1
fi

probe=$(timeout -k 5 120 "$TLC" run examples/tilus_add_one.json --device cuda --arg n=1 2>&1 >/dev/null)
rc=$?
if [ "$rc" -ne 0 ]; then
  case $probe in
    *"no CUDA"* | *"no usable CUDA"*)
      echo "gpu_examples.sh: the probe says: $probe" >&2
      echo "$SKIP_REASON" >&2
      exit 77
      ;;
  esac
  [ "$rc" -eq 124 ] && probe="timed out after 120 s (killed)"
  echo "gpu_examples.sh: FAIL: the GPU probe (tlc run --device cuda) failed with status $rc:" >&2
  echo "$probe" >&2
  exit 1
fi

if [ ! -x "$PY" ]; then
  echo "gpu_examples.sh: FAIL: a GPU is here but $PY is not (apt-get install python3 python3-numpy)" >&2
  exit 1
fi
echo "gpu_examples.sh: a GPU is usable; running tests/gpu/check_examples.py"
exec "$PY" tests/gpu/check_examples.py --tlc "$TLC"
