#!/bin/sh
# bench/same_output.sh [--all-targets] OLD_TLC NEW_TLC [PROGRAM...] - do two tlc binaries build the same?
#
# Compiles every program (default: examples/*.json and tests/gpu/programs/*.json for sm_90a, and
# examples/gemm.json and examples/flash_attention.json for sm_80 and sm_89 too; --all-targets: every
# one for sm_90a, sm_80 and sm_89; PROGRAM...: those for sm_90a) with each binary, in
# mode auto as given (no options), and compares the cubins byte for byte, and the metadata's back end
# and its reason.  For a change that must not change what a compile produces (compile time, error
# paths): "same" on every line, exit 0; a line "DIFF ..." for each program that differs (exit 1), and
# "FAIL ..." where one binary fails and the other does not.  Programs both refuse count as the same.
# Run from the repository root; needs NVRTC (a GPU is not needed).
set -u
all=
[ "${1:-}" = --all-targets ] && { all=1; shift; }
[ $# -ge 2 ] || { echo "usage: $0 OLD_TLC NEW_TLC [PROGRAM...]" >&2; exit 2; }
old=$1 new=$2
shift 2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/same_output.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
if [ $# -gt 0 ]; then
  cases=$(for f in "$@"; do echo "$f sm_90a"; done)
elif [ -n "$all" ]; then
  cases=$(for t in sm_90a sm_80 sm_89; do for f in examples/*.json tests/gpu/programs/*.json; do echo "$f $t"; done; done)
else
  cases=$(for f in examples/*.json tests/gpu/programs/*.json; do echo "$f sm_90a"; done
          for t in sm_80 sm_89; do echo "examples/gemm.json $t"; echo "examples/flash_attention.json $t"; done)
fi
bad=0 n=0
meta() { # TLC PROGRAM TARGET: the metadata's back end and why not PTX
  "$1" compile "$2" --target "$3" --emit meta 2>/dev/null |
    sed -n 's/^ *"\(backend\|backend_why_not_ptx\|backend_requested\)": \(.*\),*$/\1 \2/p'
}
echo "$cases" | {
  while read -r f t; do
    n=$((n + 1))
    "$old" compile "$f" --target "$t" -o "$tmp/o.bin" >/dev/null 2>"$tmp/o.err"
    ro=$?
    "$new" compile "$f" --target "$t" -o "$tmp/n.bin" >/dev/null 2>"$tmp/n.err"
    rn=$?
    if [ $ro -ne 0 ] && [ $rn -ne 0 ]; then
      echo "same (both refuse) $f $t"
    elif [ $ro -ne 0 ] || [ $rn -ne 0 ]; then
      echo "FAIL $f $t: old exit $ro, new exit $rn: $(tail -1 "$tmp/o.err") / $(tail -1 "$tmp/n.err")"
      bad=$((bad + 1))
    elif ! cmp -s "$tmp/o.bin" "$tmp/n.bin"; then
      echo "DIFF $f $t: the binaries differ ($(wc -c <"$tmp/o.bin") / $(wc -c <"$tmp/n.bin") bytes)"
      bad=$((bad + 1))
    elif [ "$(meta "$old" "$f" "$t")" != "$(meta "$new" "$f" "$t")" ]; then
      echo "DIFF $f $t: the metadata's back end differs"
      bad=$((bad + 1))
    else
      echo "same $f $t ($(wc -c <"$tmp/n.bin") bytes)"
    fi
  done
  echo "$n programs, $bad differ"
  [ $bad -eq 0 ]
}
