#!/bin/sh
# seed_corpus.sh - writes fuzz seeds for fuzz_check into a directory: every
# examples/*.json, and every program of tests/check/bad.txt (its -D lines
# first, in the "-D NAME=VALUE" form fuzz_check.c reads).  Run from the
# repository root:  sh tests/fuzz/seed_corpus.sh OUTDIR
set -eu
out=${1:?usage: seed_corpus.sh OUTDIR}
mkdir -p "$out"
for f in examples/*.json; do
  cp "$f" "$out/example-$(basename "$f" .json)"
done
awk -v out="$out" '
  function finish() { if (file != "") { close(file); file = "" } }
  /^### / { finish(); n++; file = sprintf("%s/table-%03d", out, n); state = "head"; printf "" > file; next }
  file == "" { next }
  state == "head" && /^#/ { next }
  state == "head" && /^-D / { print > file; next }
  state == "head" { state = "prog" }
  state == "prog" && /^---$/ { finish(); next }
  state == "prog" { print > file }
  END { finish() }
' tests/check/bad.txt
echo "seed_corpus.sh: $(ls "$out" | wc -l) seeds in $out"
