# tests/sh/lib.sh - what the shell tests of tests/sh/ share: a temporary
# folder removed at exit, the processes a test starts stopped at exit,
# tlserverd started on a free loopback port and waited for, the pass and
# fail counters with the closing line, and skipping or failing with the
# test's name.  Not a test itself (it is not executable, so tests/run.sh
# does not run it).
#
# A test sources it from the repository root:
#
#   cd "$(dirname "$0")/../.." || exit 1
#   . tests/sh/lib.sh
#   tl_init NAME.sh          # TMP, the EXIT trap, npass/nfail, TL_BUILD
#   ...checks: ok / bad MESSAGE / check WHAT ACTUAL EXPECTED / has FILE TEXT WHAT
#   tl_done                  # "NAME.sh: N checks passed, N failed"; exits 1 on a failure
#
# Variables it sets: TL_BUILD (default build), TL_NAME, TMP, PIDS (the
# processes stopped at exit: tl_track adds one), npass, nfail; tl_server
# sets PID, PORT and URL.  A test that must do more at exit defines
# tl_at_exit (called first).
#
# Exit statuses are those of tests/run.sh: 0 passed, 1 failed, 77 skipped.

TL_BUILD=${TL_BUILD:-build}

# tl_init NAME: the test's name (for messages), a fresh $TMP removed at
# exit, the counters.
tl_init() {
  TL_NAME=$1
  TMP=$(mktemp -d) || exit 1
  PIDS=
  npass=0
  nfail=0
  trap tl_cleanup EXIT
}

# At exit: tl_at_exit if the test defines it, then every process of $PIDS
# is stopped (SIGTERM, then waited for), then $TMP is removed.
tl_cleanup() {
  command -v tl_at_exit >/dev/null 2>&1 && tl_at_exit
  for p in $PIDS; do kill "$p" 2>/dev/null; done
  for p in $PIDS; do wait "$p" 2>/dev/null; done
  rm -rf "$TMP"
}

# tl_track PID: stop PID at exit.
tl_track() {
  PIDS="$PIDS $1"
}

# tl_stop PID: stops PID now (SIGTERM) and waits for it.
tl_stop() {
  kill "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

# tl_skip WHY / tl_fail WHY: the test ends skipped (77) / failed (1), saying why.
tl_skip() {
  echo "$TL_NAME: skipped: $*" >&2
  exit 77
}
tl_fail() {
  echo "$TL_NAME: FAIL: $*" >&2
  exit 1
}

# tl_need TOOL...: skips the test unless every TOOL is on the PATH.
tl_need() {
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || tl_skip "no $t"
  done
}

# tl_built FILE...: fails the test unless every FILE is built.
tl_built() {
  for f in "$@"; do
    [ -x "$f" ] || tl_fail "$f is not built (run make)"
  done
}

# tl_need_target TARGET WHAT: skips the test, saying WHAT cannot be done,
# unless tlc offers TARGET (sm_90a, compute_80: NVRTC; gfx942: hiprtc or
# clang), as `tlc targets` lists it.
tl_need_target() {
  case $1 in gfx*) _tc="no AMD toolchain for $1" ;; *) _tc="no NVRTC here" ;; esac
  "$TL_BUILD/bin/tlc" targets 2>/dev/null | grep -q "^$1 " ||
    tl_skip "$_tc, $2 ($("$TL_BUILD/bin/tlc" targets 2>&1 | head -n 1))"
}

# tl_need_nvrtc WHAT: tl_need_target sm_80 WHAT (NVRTC, not just an AMD
# toolchain).
tl_need_nvrtc() {
  tl_need_target sm_80 "$1"
}

# tl_target: prints the target to compile for: sm_80 with NVRTC, else the
# first one tlc offers (clang's gfx90a); nothing when none is offered.
tl_target() {
  "$TL_BUILD/bin/tlc" targets 2>/dev/null | awk '!/^#/ { if (!first) first = $1; if ($1 == "sm_80") nv = 1 }
    END { print nv ? "sm_80" : first }'
}

# Counters: ok and bad count a check (bad says why on stderr); check WHAT
# ACTUAL EXPECTED compares two strings; has FILE TEXT WHAT and hasnt FILE
# TEXT WHAT look for a fixed string in a file.
ok() { npass=$((npass + 1)); }
bad() { nfail=$((nfail + 1)); echo "FAIL: $*" >&2; }
check() { if [ "$2" = "$3" ]; then ok; else bad "$1: got '$2', expected '$3'"; fi; }
has() { if grep -qF -- "$2" "$1"; then ok; else bad "$3: no '$2' in: $(head -c 800 "$1")"; fi; }
hasnt() { if grep -qF -- "$2" "$1"; then bad "$3: '$2' in: $(head -c 800 "$1")"; else ok; fi; }

# run_client WANT WHAT ARGS...: runs $CLIENT (tlclient) with ARGS, its
# output in $TMP/out and $TMP/err; a check that it exits with status WANT.
run_client() {
  _want=$1
  _what=$2
  shift 2
  "$CLIENT" "$@" >"$TMP/out" 2>"$TMP/err"
  _got=$?
  if [ "$_got" = "$_want" ]; then ok; else bad "$_what: exit $_got, want $_want: $(head -c 800 "$TMP/err")"; fi
}

# tl_done [MORE]: prints the closing line "NAME: N checks passed, N
# failed[ MORE]"; returns 1 when a check failed (the test's last command,
# or `tl_done || exit 1` before a skip that comes after every check).
tl_done() {
  echo "$TL_NAME: $npass checks passed, $nfail failed${1:+ $1}"
  [ "$nfail" -eq 0 ]
}

# tl_until SECONDS COMMAND...: runs COMMAND every 0.1 s until it succeeds;
# returns 1 when it did not within SECONDS.
tl_until() {
  n=$(($1 * 10))
  shift
  while ! "$@" >/dev/null 2>&1; do
    n=$((n - 1))
    [ $n -gt 0 ] || return 1
    sleep 0.1
  done
}

# tl_free_port: prints a TCP port of 127.0.0.1 that was free a moment ago.
tl_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# tl_wait_port FILE PID WHAT: waits (30 s at most) for PID to write its
# port to FILE; fails the test, with LOG ($4, when given) on stderr, when
# PID dies or the time is up.
tl_wait_port() {
  i=0
  while [ ! -s "$1" ]; do
    i=$((i + 1))
    if [ $i -gt 1500 ] || ! kill -0 "$2" 2>/dev/null; then
      [ -n "${4:-}" ] && cat "$4" >&2
      tl_fail "$3 did not start"
    fi
    sleep 0.02
  done
}

# tl_server NAME [FLAG...]: starts tlserverd ($TL_SERVERD, default
# $TL_BUILD/bin/tlserverd) on a free port of 127.0.0.1 with its database
# $TMP/NAME.db (a --db among FLAGs replaces it), its stderr appended to
# $TMP/NAME.log and its port in $TMP/NAME.port; waits until it listens and
# GET /healthz answers 200 (with curl, when there is one); sets PID, PORT
# and URL (https:// with --tls-cert).  Fails the test, showing the log,
# when it does not start.
tl_server() {
  _name=$1
  shift
  rm -f "$TMP/$_name.port"
  "${TL_SERVERD:-$TL_BUILD/bin/tlserverd}" --listen 127.0.0.1:0 --port-file "$TMP/$_name.port" \
    --db "$TMP/$_name.db" "$@" </dev/null 2>>"$TMP/$_name.log" &
  PID=$!
  tl_track "$PID"
  tl_wait_port "$TMP/$_name.port" "$PID" "server $_name" "$TMP/$_name.log"
  PORT=$(cat "$TMP/$_name.port")
  URL=http://127.0.0.1:$PORT
  case " $* " in *" --tls-cert "*) URL=https://127.0.0.1:$PORT ;; esac
  if command -v curl >/dev/null 2>&1 &&
    ! tl_until 10 curl -skf -o /dev/null "$URL/healthz"; then
    cat "$TMP/$_name.log" >&2
    tl_fail "server $_name does not answer GET /healthz"
  fi
}

# tl_w4a16_unrounded EXAMPLE OUT: writes to OUT the W4A16 split example as
# it was before its run's scale groups were rounded to 8 (g0 the run's first
# group, one group more than the run covers): a copy of the scales that
# starts off a 16-byte boundary, which the program's threads make.  Status
# 1 when the example no longer has both rounded lines to undo.
tl_w4a16_unrounded() {
  sed 's|"ceildiv(ceildiv(tiles \* block_K, group_size) + 8, 8) \* 8"|"ceildiv(tiles * block_K, group_size) + 1"|
       s|"bz \* tiles \* block_K // group_size // 8 \* 8"|"bz * tiles * block_K // group_size"|' "$1" >"$2" &&
    grep -qF '"ceildiv(tiles * block_K, group_size) + 1"' "$2" &&
    grep -qF '"bz * tiles * block_K // group_size"' "$2"
}
