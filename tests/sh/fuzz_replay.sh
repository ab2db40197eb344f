#!/bin/sh
# fuzz_replay.sh - replays the saved fuzz corpus (tests/fuzz/corpus) through
# the fuzz target (tests/fuzz/fuzz_check.c) without libFuzzer.  Run from the repository root by tests/run.sh;
# fails when the replay fails (a crash, a sanitizer report in a sanitizer
# build, an unreadable input) or when it ran no input at all.
BIN=${TL_BUILD:-build}/tests/fuzz_replay
if [ ! -x "$BIN" ]; then
  echo "fuzz_replay.sh: $BIN not built (make $BIN)" >&2
  exit 1
fi
out=$("$BIN" tests/fuzz/corpus) || { printf '%s\n' "$out"; echo "fuzz_replay.sh: replay failed" >&2; exit 1; }
printf '%s\n' "$out"
n=$(printf '%s\n' "$out" | sed -n 's/^fuzz_replay: \([0-9][0-9]*\) inputs ran$/\1/p')
if [ -z "$n" ] || [ "$n" -eq 0 ]; then
  echo "fuzz_replay.sh: no input ran (is tests/fuzz/corpus empty?)" >&2
  exit 1
fi
