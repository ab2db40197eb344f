#!/bin/sh
# fuzz_replay.sh - replays the saved fuzz corpora without libFuzzer:
# tests/fuzz/corpus through the front end's target (tests/fuzz/fuzz_check.c)
# and tests/fuzz/http_corpus through the HTTP front end's
# (tests/fuzz/fuzz_http.c: each input sent to a real tlserverd started
# in-process, which must still answer /healthz after it).  Run from the
# repository root by tests/run.sh; fails when a replay fails (a crash, a
# sanitizer report in a sanitizer build, a server that stops answering, an
# unreadable input) or when a corpus ran no input at all.
B=${TL_BUILD:-build}
# replay BINARY CORPUS
replay() {
  if [ ! -x "$1" ]; then
    echo "fuzz_replay.sh: $1 not built (make $1)" >&2
    exit 1
  fi
  out=$("$1" "$2") || { printf '%s\n' "$out"; echo "fuzz_replay.sh: replay of $2 failed" >&2; exit 1; }
  printf '%s: %s\n' "$2" "$out"
  n=$(printf '%s\n' "$out" | sed -n 's/^fuzz_replay: \([0-9][0-9]*\) inputs ran$/\1/p')
  if [ -z "$n" ] || [ "$n" -eq 0 ]; then
    echo "fuzz_replay.sh: no input of $2 ran (is it empty?)" >&2
    exit 1
  fi
}
replay "$B/tests/fuzz_replay" tests/fuzz/corpus
TL_FUZZ_TLSERVERD=$B/bin/tlserverd replay "$B/tests/fuzz_http_replay" tests/fuzz/http_corpus
