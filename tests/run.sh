#!/bin/sh
# run.sh - the test runner behind `make test`.
#
#   TL_BUILD=build sh tests/run.sh [UNIT_TEST_BINARY...]
#
# Runs each unit-test binary given (cmocka programs: exit 0 is a pass,
# anything else a failure; a binary that exits 0 but skipped some of its
# cases with cmocka's skip() is counted as skipped, its reason naming the
# cases and the first one's message), then every executable tests/sh/*.sh
# in name order (exit 0 pass, 77 skipped, anything else a failure), then
# every tests/python/test_*.py the same way (with $TL_PYTHON, default
# /usr/bin/python3; one that exits 0 but printed a "SKIP  " line for a part
# it could not check is counted as skipped).  A test counts as passed only
# when it checked everything it has: a test that could not check a part
# here (no NVRTC, no clang, no GPU, no pip) skips.  Everything runs
# from the repository root, stdin from /dev/null, with TL_BUILD and
# TL_SRCDIR (the repository root) exported.
# Each test's stdout and stderr go to $TL_BUILD/test-logs/NAME.log; a failure
# prints its lines that start with FAIL (the first 20) and the last 40 lines
# of it, a skip prints the last line of the test's
# stderr as its reason.  The last line printed is always
# "N passed, N failed, N skipped" (CI reads it); the exit status is 1 when
# anything failed.
#
# Environment:
#   TL_BUILD         build directory (default: build)
#   TL_TEST_FILTER   run only the tests whose name contains this string
#   TL_TEST_TIMEOUT  seconds before a test is killed and failed (default 900;
#                    0 means no limit)
#   TL_VERIFY        exported as 1 unless set: every compile in the tests runs
#                    the verifier between passes (compiler/verify.c)
#   TL_PYTHON        the Python of tests/python (default /usr/bin/python3)
#
# Test names: a unit test is named by its file name (test_arena), a shell
# test by its file name with .sh (check_table.sh), a Python test by its file
# name with .py (test_tlir_examples.py).

ORIG_PWD=$(pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd) || exit 1
cd "$ROOT" || exit 1

TL_BUILD=${TL_BUILD:-build}
TL_SRCDIR=${TL_SRCDIR:-$ROOT}
TL_VERIFY=${TL_VERIFY:-1}
export TL_BUILD TL_SRCDIR TL_VERIFY
FILTER=${TL_TEST_FILTER:-}
TIMEOUT=${TL_TEST_TIMEOUT:-900}
case $TIMEOUT in
  ''|*[!0-9]*) echo "run.sh: TL_TEST_TIMEOUT must be a whole number of seconds" >&2; exit 2 ;;
esac

LOGDIR=$TL_BUILD/test-logs
mkdir -p "$LOGDIR" || exit 1
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'kill_group; exit 130' INT
trap 'kill_group; exit 143' TERM

npass=0
nfail=0
nskip=0
failed=

now() {
  date +%s.%N
}

# elapsed START END: seconds between two `now` readings, as 0.00.
elapsed() {
  awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'
}

# kill_group: kills what is left of the current test's process group.
kill_group() {
  pgid=$(cat "$TMP/pid" 2>/dev/null)
  [ -n "$pgid" ] && kill -s KILL -- "-$pgid" 2>/dev/null
  return 0
}

# unit_skips LOG: for a cmocka log, "K of N cases skipped (NAMES): REASON"
# when any case called skip(), else nothing.  REASON is the last line the
# first skipped case printed before cmocka's "[  SKIPPED ]" line (the
# tests print why before they skip).
unit_skips() {
  awk '
    /^\[==========\] [0-9]+ test\(s\) run/ { total += $2; next }
    /^\[ RUN      \] / { last = ""; next }
    /^\[  SKIPPED \] / {
      n = $0
      sub(/^\[  SKIPPED \] /, "", n)
      if (n ~ /test\(s\)/ || (n in seen)) next
      seen[n] = 1
      names = names (count++ ? ", " : "") n
      if (reason == "") reason = last
      next
    }
    /^\[/ { next }
    NF { last = $0 }
    END {
      if (count)
        printf "%d of %d cases skipped (%s)%s\n", count, total, names, reason != "" ? ": " reason : ""
    }' "$1"
}

# selected NAME: true when NAME passes TL_TEST_FILTER.
selected() {
  case $1 in
    *"$FILTER"*) return 0 ;;
    *) return 1 ;;
  esac
}

# py_skips LOG: for a Python test's log, "K parts skipped: FIRST" when it
# printed lines "SKIP  FIRST" (tests/python's convention), else nothing.
py_skips() {
  awk '/^SKIP  / { n++; if (n == 1) first = substr($0, 7) }
       END { if (n) printf "%d part%s skipped: %s\n", n, (n > 1 ? "s" : ""), first }' "$1"
}

# run_one KIND NAME COMMAND...: runs one test and reports it.
# KIND is "unit" (only 0 passes), "sh" (0 passes, 77 skips) or "py" (as
# "sh", and 0 with a "SKIP  " line in the log skips).
run_one() {
  kind=$1
  name=$2
  shift 2
  log=$LOGDIR/$name.log
  : >"$log"
  : >"$TMP/stderr"
  : >"$TMP/pid"
  echo 1 >"$TMP/status"
  start=$(now)
  # The test runs under timeout(1) (TL_TEST_TIMEOUT; 0 = no limit), which
  # makes a new process group whose id is written to $TMP/pid; when the test
  # ends, whatever it left running in that group is killed, so that no
  # stray process holds the log pipe open.  stdout goes straight to the
  # log; stderr goes to the log and, through tee, to $TMP/stderr (for a
  # skip's reason).  The status comes back through a file because a
  # pipeline's status is tee's.  The whole runs in the background so that
  # an interrupt reaches the trap below at once.
  {
    {
      sh -c 'echo $$ >"$0"; exec "$@"' "$TMP/pid" \
        timeout -k 10 "$TIMEOUT" "$@" </dev/null 2>&1 1>&3 3>&-
      echo $? >"$TMP/status"
      kill_group
    } 2>&3 | tee "$TMP/stderr" >&3
  } 3>>"$log" &
  wait $!
  rc=$(cat "$TMP/status")
  secs=$(elapsed "$start" "$(now)")

  partial=
  [ "$rc" -eq 0 ] && [ "$kind" = unit ] && partial=$(unit_skips "$log")
  [ "$rc" -eq 0 ] && [ "$kind" = py ] && partial=$(py_skips "$log")
  if [ -n "$partial" ]; then
    nskip=$((nskip + 1))
    echo "SKIP: $name: $partial  (${secs}s)"
  elif [ "$rc" -eq 0 ]; then
    npass=$((npass + 1))
    echo "PASS  $name  (${secs}s)"
  elif [ "$kind" != unit ] && [ "$rc" -eq 77 ]; then
    nskip=$((nskip + 1))
    reason=$(awk 'NF { last = $0 } END { print last }' "$TMP/stderr")
    echo "SKIP: $name: ${reason:-no reason given}  (${secs}s)"
  else
    nfail=$((nfail + 1))
    failed="$failed $name"
    how="exit $rc"
    if [ "$TIMEOUT" -gt 0 ] && { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; }; then
      how="exit $rc, timed out after ${TIMEOUT}s?"
    elif [ "$rc" -gt 128 ]; then
      how="exit $rc, signal $((rc - 128))"
    fi
    echo "FAIL  $name  (${secs}s, $how)"
    # a failed check far above the tail (a long log, server logs printed
    # after it) is still seen: its lines first
    if grep -q '^FAIL' "$log"; then
      echo "---- lines of $log that start with FAIL (the first 20) ----"
      grep -n '^FAIL' "$log" | head -n 20
    fi
    echo "---- last 40 lines of $log ----"
    tail -n 40 "$log"
    echo "----"
  fi
}

# 1. Unit-test binaries, in the order given.
for bin in "$@"; do
  name=$(basename "$bin")
  selected "$name" || continue
  case $bin in
    /*) path=$bin ;;
    *) path=$ORIG_PWD/$bin ;;
  esac
  if [ ! -x "$path" ]; then
    nfail=$((nfail + 1))
    failed="$failed $name"
    echo "FAIL  $name  (not found or not executable: $bin)"
    continue
  fi
  run_one unit "$name" "$path"
done

# 2. Shell tests, in name order.
for script in tests/sh/*.sh; do
  [ -e "$script" ] || continue
  name=$(basename "$script")
  selected "$name" || continue
  if [ ! -x "$script" ]; then
    echo "NOTE: $script is not executable; not run"
    continue
  fi
  run_one sh "$name" "./$script"
done

# 3. Python tests (tests/python/test_*.py, the tlir package), counted like
# the shell tests: exit 0 passes, 77 skips (no NumPy), anything else fails;
# one that exits 0 having printed "SKIP  WHAT" for a part skips (py_skips).
# They run under $TL_PYTHON (default /usr/bin/python3, Debian's, which has
# python3-numpy; else python3 from PATH).
PY=${TL_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || PY=python3
for script in tests/python/test_*.py; do
  [ -e "$script" ] || continue
  name=$(basename "$script")
  selected "$name" || continue
  run_one py "$name" "$PY" "$script"
done

if [ "$nfail" -gt 0 ]; then
  echo "failed:$failed"
fi
echo "$npass passed, $nfail failed, $nskip skipped"
[ "$nfail" -eq 0 ]
