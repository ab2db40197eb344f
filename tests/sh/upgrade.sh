#!/bin/sh
# tests/sh/upgrade.sh - the compiler's identity in every key: a rebuilt
# compiler that generates other code never answers from the builds of the
# one before, on the server nor in a client's local cache; and an
# application starts offline, without NVRTC, from a cache that
# `tlclient prebuild --fetch` filled.  Real processes: two builds of tlc and
# tlserverd, servers on loopback sharing one SQLite database, tlclient and
# the example application.
#
#  1. the identity: a second tree ($TL_BUILD/upgrade) built with
#     -DTL_PRELUDE_MARK=1 (a device variable added to the preludes, so its
#     binaries differ) has another `tlc --version`; building it again keeps
#     the generated digest file (deterministic, no timestamps); in a copy of
#     the sources, changing the server, the tests and the README keeps the
#     digest and changing a comment of the prelude changes it
#  2. server A fills a database; server B (the other build) on the same
#     database: every compile is a miss (compiled, not hit), under other
#     keys, with other bytes; a second compile on B hits; `tlclient explain`
#     of a miss on B names A's compiler as the difference
#  3. the client's local cache: filled through A; with B the example
#     application gets B's binary (compiled by B, not from the local
#     cache), then B's from the local cache; offline it uses B's (the
#     identity it remembered); A back on the same database: A's again
#  4. prebuild --fetch into a fresh local cache, server stopped, NVRTC
#     hidden (TL_NVRTC naming a file that does not exist, and nvJitLink
#     by TL_NVJITLINK, which the PTX back end would use): the application
#     starts from the local cache; a request the cache lacks fails saying
#     so, offline, without naming a server to ask
#  5. tlclient compile -o names an AMD code object NAME.gfxNNN.hsaco (when
#     the AMD toolchain is here)
#
# Exit status: 0 pass, 1 fail, 77 skipped (no NVRTC, curl or sha256sum; or no
# AMD toolchain, after every other check passed: 5. was not checked).

cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
. tests/sh/lib.sh
V=$TL_BUILD/upgrade
CLIENT=$TL_BUILD/bin/tlclient
APP=$TL_BUILD/bin/tl-example-app
tl_init upgrade.sh
tl_need curl sha256sum make
tl_built "$CLIENT" "$APP" "$TL_BUILD/bin/tlc" "$TL_BUILD/bin/tlserverd"
tl_need_nvrtc "the servers cannot compile"
PARTIAL=

# smake DIR ARGS...: make in DIR as the outer make was called (sanitizers, C compiler), without its job server
smake() {
  dir=$1
  shift
  [ -n "${TL_SANITIZE:-}" ] && set -- SANITIZE="$TL_SANITIZE" "$@"
  [ -n "${TL_CC:-}" ] && set -- CC="$TL_CC" "$@"
  env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -C "$dir" "$@"
}
# vmake ARGS...: make of the second tree
vmake() {
  smake "$ROOT" -j2 B="$V" OPT=-O0 CFLAGS=-DTL_PRELUDE_MARK=1 WERROR= "$@"
}

# ---- 1. the identity ---------------------------------------------------------------------
if ! vmake "$V/bin/tlc" "$V/bin/tlserverd" >"$TMP/make.log" 2>&1; then
  tail -n 30 "$TMP/make.log" >&2
  tl_fail "the second compiler did not build"
fi
ID_A=$("$TL_BUILD/bin/tlc" --version | head -n 1)
ID_B=$("$V/bin/tlc" --version | head -n 1)
case $ID_A in "tlc 0.1.0+"????????????????" (Tile IR 1)") ok ;; *) bad "tlc --version: '$ID_A'" ;; esac
[ "$ID_A" != "$ID_B" ] && ok || bad "two compilers with other preludes have one identity: $ID_A"
before=$(ls -l --time-style=+%s.%N "$V/gen/compiler_id.c"; sha256sum "$V/gen/compiler_id.c")
vmake "$V/bin/tlc" >"$TMP/make2.log" 2>&1 || bad "the second tree does not build again"
after=$(ls -l --time-style=+%s.%N "$V/gen/compiler_id.c"; sha256sum "$V/gen/compiler_id.c")
[ "$before" = "$after" ] && ok || bad "a second make rewrote the digest file: $before / $after"
grep -q ' -c .*compiler_id.c' "$TMP/make2.log" && bad "a second make recompiled the digest" || ok
# what enters the digest: a copy of the sources, changed
mkdir "$TMP/src" && cp -r Makefile compiler proto server client cache tests examples README.md "$TMP/src/" || exit 1
digest() { # digest DIR: the digest a tree of DIR computes (no compiling)
  smake "$1" -s B="$TMP/b" OPT=-O0 CFLAGS=-DTL_PRELUDE_MARK=1 WERROR= "$TMP/b/gen/compiler_id.c" >/dev/null 2>&1
  sed -n 's/.*tl_compiler_digest\[\] = "\([0-9a-f]*\)".*/\1/p' "$TMP/b/gen/compiler_id.c"
}
D0=$(digest "$TMP/src")
[ "$(sed -n 's/.*tl_compiler_digest\[\] = "\([0-9a-f]*\)".*/\1/p' "$V/gen/compiler_id.c")" = "$D0" ] && ok ||
  bad "a copy of the sources gives another digest ($D0)"
echo "/* harmless */" >>"$TMP/src/server/api.c"
echo "harmless" >>"$TMP/src/README.md"
echo "# harmless" >>"$TMP/src/tests/sh/upgrade.sh"
echo "/* harmless */" >>"$TMP/src/client/fetch.c"
[ "$(digest "$TMP/src")" = "$D0" ] && ok || bad "the server, client, tests or README changed the digest"
echo "/* not harmless: the preludes are the compiler */" >>"$TMP/src/compiler/prelude_cuda.h"
[ "$(digest "$TMP/src")" != "$D0" ] && ok || bad "a change of the CUDA prelude kept the digest"

# ---- servers --------------------------------------------------------------------------------
# start NAME BUILD: a server of BUILD on the shared database; sets PORT and PID
start() {
  TL_SERVERD=$2/bin/tlserverd tl_server "$1" --db "$TMP/shared.db" --workers 2
  export TL_SERVER=$URL
}
stop() { tl_stop "$1"; }
unset TL_TOKEN TL_NVRTC
export TL_CLIENT_CACHE="$TMP/local.db"
PROGRAMS="examples/gemm.json examples/tilus_add_one.json examples/tilus_matmul.json"
for p in $PROGRAMS; do [ -f "$p" ] || { echo "upgrade.sh: FAIL: no $p" >&2; exit 1; }; done

# compile_all OUT: every program for two targets through the server; lines "TARGET hit|compiled key K artifact ID N bytes"
compile_all() {
  : >"$1"
  for p in $PROGRAMS; do
    "$CLIENT" compile "$p" --target sm_80,compute_80 >>"$1" 2>>"$TMP/compile.err" || bad "compile $p: $(tail -n 3 "$TMP/compile.err")"
  done
}

# ---- 2. server A fills the database, server B shares it ----------------------------------------
start a "$TL_BUILD"
PID_A=$PID
curl -sS "$TL_SERVER/v1/info" >"$TMP/info_a" || bad "GET /v1/info of A"
has "$TMP/info_a" "\"compiler\": \"${ID_A% (Tile IR 1)}\"" "/v1/info of A names its compiler"
"$CLIENT" info >"$TMP/cinfo" 2>&1 || bad "tlclient info: $(cat "$TMP/cinfo")"
has "$TMP/cinfo" "(compiler ${ID_A% (Tile IR 1)})" "tlclient info names the server's compiler"
compile_all "$TMP/a1"
[ "$(grep -c ' compiled ' "$TMP/a1")" = 6 ] && ok || bad "A did not compile all six: $(cat "$TMP/a1")"
"$APP" --arch 80 --size 128 >"$TMP/app" 2>&1 && ok || bad "app with A: $(cat "$TMP/app")"
has "$TMP/app" "from compiled" "app with A, first start"
APP_A=$(sed -n 's/.*sm_80: .* artifact \([0-9a-f]*\)).*/\1/p' "$TMP/app")
"$APP" --arch 80 --size 128 >"$TMP/app" 2>&1 && ok || bad "app with A again: $(cat "$TMP/app")"
has "$TMP/app" "from local" "app with A, warm start"
stop "$PID_A"

start b "$V"
PID_B=$PID
curl -sS "$TL_SERVER/v1/info" >"$TMP/info_b" || bad "GET /v1/info of B"
has "$TMP/info_b" "\"compiler\": \"${ID_B% (Tile IR 1)}\"" "/v1/info of B names its compiler"
# explain: B has no build of the GEMM yet; the nearest in the local cache is A's (the application's)
"$CLIENT" explain examples/gemm.json --target sm_80 >"$TMP/explain" 2>&1
[ $? = 1 ] && ok || bad "explain a miss on B: exit not 1: $(cat "$TMP/explain")"
has "$TMP/explain" "compiler: ${ID_B% (Tile IR 1)} here, the cache has ${ID_A% (Tile IR 1)} (built by another compiler)" \
  "explain names the other compiler"
compile_all "$TMP/b1"
[ "$(grep -c ' compiled ' "$TMP/b1")" = 6 ] && ok || bad "B answered from A's builds: $(cat "$TMP/b1")"
hasnt "$TMP/b1" " hit " "B answered from A's builds"
# keys and bytes: no key and no artifact of A comes back from B
awk '{print $4}' "$TMP/a1" | sort >"$TMP/keys_a"
awk '{print $4}' "$TMP/b1" | sort >"$TMP/keys_b"
[ -z "$(comm -12 "$TMP/keys_a" "$TMP/keys_b")" ] && [ -s "$TMP/keys_b" ] && ok || bad "A and B share keys"
awk '{print $6}' "$TMP/a1" | sort -u >"$TMP/arts_a"
awk '{print $6}' "$TMP/b1" | sort -u >"$TMP/arts_b"
[ -z "$(comm -12 "$TMP/arts_a" "$TMP/arts_b")" ] && [ -s "$TMP/arts_b" ] && ok || bad "A and B share binaries"
compile_all "$TMP/b2"
[ "$(grep -c ' hit ' "$TMP/b2")" = 6 ] && ok || bad "B does not answer from its own builds: $(cat "$TMP/b2")"
curl -sS "$TL_SERVER/v1/kernels/$(head -n 1 "$TMP/keys_b")" >"$TMP/kernel_b" || bad "GET /v1/kernels of B"
has "$TMP/kernel_b" "compiler ${ID_B% (Tile IR 1)}\\n" "B's manifest names B's compiler"

# ---- 3. the client's local cache --------------------------------------------------------------
"$APP" --arch 80 --size 128 >"$TMP/app" 2>&1 && ok || bad "app with B: $(cat "$TMP/app")"
has "$TMP/app" "from compiled" "the local cache answered B's request from A's entry"
APP_B=$(sed -n 's/.*sm_80: .* artifact \([0-9a-f]*\)).*/\1/p' "$TMP/app")
[ -n "$APP_A" ] && [ -n "$APP_B" ] && [ "$APP_A" != "$APP_B" ] && ok || bad "app: A's binary $APP_A, B's $APP_B"
"$APP" --arch 80 --size 128 >"$TMP/app" 2>&1 && ok || bad "app with B again: $(cat "$TMP/app")"
has "$TMP/app" "from local" "app with B, warm start"
has "$TMP/app" "artifact $APP_B)" "app with B, warm start, B's binary"
stop "$PID_B"
"$APP" --arch 80 --size 128 >"$TMP/app" 2>&1 && ok || bad "app offline after B: $(cat "$TMP/app")"
has "$TMP/app" "artifact $APP_B)" "offline, the binary of the last server seen (B)"
has "$TMP/app" "from local" "offline, from the local cache"
start a2 "$TL_BUILD"
PID_A=$PID
"$APP" --arch 80 --size 128 >"$TMP/app" 2>&1 && ok || bad "app with A back: $(cat "$TMP/app")"
has "$TMP/app" "artifact $APP_A)" "A back: A's binary"
has "$TMP/app" "from local" "A back: from the local cache"

# ---- 4. offline start from prebuild --fetch, without NVRTC ---------------------------------------
export TL_CLIENT_CACHE="$TMP/prebuilt.db"
"$CLIENT" prebuild examples/gemm.json --target sm_80,sm_90 -D M=128 -D N=128 -D K=128 --fetch >"$TMP/pre" 2>&1 && ok ||
  bad "prebuild --fetch: $(cat "$TMP/pre")"
"$CLIENT" cache ls >"$TMP/ls" 2>&1
[ "$(grep -c request "$TMP/ls")" = 2 ] && ok || bad "prebuild --fetch stored no request entries: $(cat "$TMP/ls")"
stop "$PID_A"
export TL_NVRTC="$TMP/no-such-libnvrtc.so"
export TL_NVJITLINK="$TMP/no-such-libnvJitLink.so" # nor the PTX back end's assembler (compiler/nvjitlink.c)
"$TL_BUILD/bin/tlc" compile examples/tilus_add_one.json --target sm_80 -o "$TMP/x.cubin" >"$TMP/t" 2>&1 &&
  bad "TL_NVRTC did not hide NVRTC" || ok
has "$TMP/t" "NVRTC is not available" "TL_NVRTC hides NVRTC"
# (a 9.0 GPU asks for sm_90a first, wgmma's target; offline, the sm_90 that was prebuilt runs too)
for arch in 80 90; do
  "$APP" --arch $arch --size 128 >"$TMP/app" 2>&1 && ok || bad "offline start on sm_$arch without NVRTC: $(cat "$TMP/app")"
  has "$TMP/app" "for sm_$arch: " "offline start on sm_$arch"
  has "$TMP/app" "from local" "offline start on sm_$arch from the local cache"
done
TL_SERVER=http://127.0.0.1:1 "$APP" --arch 86 --size 128 >"$TMP/app" 2>&1 && bad "sm_86 was never fetched" || ok
has "$TMP/app" "has no build of examples/gemm.json (embedded) for" "unreachable: the cache lacks the build"
"$APP" --offline --arch 86 --size 128 >"$TMP/out" 2>"$TMP/err" && bad "sm_86 offline was never fetched" || ok
has "$TMP/err" "offline: the local cache $TMP/prebuilt.db has no build of examples/gemm.json (embedded) for sm_86" \
  "offline: the error says what the cache lacks"
hasnt "$TMP/err" "127.0.0.1" "offline: the error names no server to ask"
"$APP" --offline --arch 90 --size 128 >"$TMP/app" 2>&1 && ok || bad "--offline start: $(cat "$TMP/app")"
has "$TMP/app" "from local" "--offline start from the local cache"
unset TL_NVRTC

# ---- 5. .hsaco ------------------------------------------------------------------------------------
GFX=$("$TL_BUILD/bin/tlc" targets 2>/dev/null | awk '$1 ~ /^gfx/ {print $1; exit}')
if [ -n "$GFX" ]; then
  export TL_CLIENT_CACHE="$TMP/local.db"
  start a3 "$TL_BUILD"
  "$CLIENT" compile examples/tilus_add_one.json --target "$GFX",sm_80,compute_80 -o "$TMP/bin" >"$TMP/out" 2>"$TMP/err" && ok ||
    bad "compile -o for $GFX: $(cat "$TMP/err")"
  for f in "add_one.$GFX.hsaco" add_one.sm_80.cubin add_one.compute_80.ptx; do
    [ -s "$TMP/bin/$f" ] && ok || bad "compile -o did not write $f: $(ls "$TMP/bin")"
  done
  [ -e "$TMP/bin/add_one.$GFX.cubin" ] && bad "an AMD code object named .cubin" || ok
  stop "$PID"
else
  PARTIAL="no AMD toolchain here: the .hsaco names are not checked"
fi

tl_done "($ID_A and $ID_B)" || exit 1
[ -z "$PARTIAL" ] || tl_skip "in part: $PARTIAL"
