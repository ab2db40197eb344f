#!/bin/sh
# tests/sh/bundle.sh - bundles (proto/bundle.md) end to end, with real
# processes: tlserverd on loopback with tokens, tlclient, the example
# application, and a second writer of the format in Python (the spec's
# check: it re-signs a bundle with another compiler line).
#
#  1. `tlclient bundle create FILE PATTERN --target ...` (a prebuild into a
#     temporary cache): ls, ls --json, verify; `bundle create --from-cache`
#     of a local cache that `tlclient compile -o` filled (its builds stored
#     with placeholders for their manifests) has the same builds
#  2. the server stopped and NVRTC hidden: the application starts from the
#     bundle (TL_CLIENT_BUNDLE, and --bundle) for sm_80 and sm_90 with an
#     empty local cache, "from bundle"; a build the bundle lacks fails
#     naming what is missing; `bundle import` into a fresh cache, then an
#     --offline start from it; `bundle create --from-cache` of the cache
#     compile -o filled gives the same bundle with no server (the manifests
#     rebuilt from the requests, each checked against its build key), and a
#     build whose rebuilt manifest does not hash to its key (its metadata's
#     toolchain altered) is left out, saying why
#  3. bad bundles through the command line: truncated, a byte flipped, not a
#     bundle, another version: each refused with its exact message (by
#     verify, import and the application), nothing imported
#  4. the server: POST /v1/bundles needs the admin scope (403 with a compile
#     token, 401 without); stores the builds ("stored", then "present"), a
#     compile of the same request is then a hit; a damaged bundle is 400; a
#     bundle of another compiler identity is 422 with every build
#     "refused", and its builds are not served (their keys are not found)
#
# Exit status: 0 pass, 1 fail, 77 skipped (no NVRTC: the server cannot
# compile; no curl or python3).

cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
CLIENT=$TL_BUILD/bin/tlclient
APP=$TL_BUILD/bin/tl-example-app
tl_init bundle.sh
tl_need curl python3
tl_built "$CLIENT" "$APP" "$TL_BUILD/bin/tlc" "$TL_BUILD/bin/tlserverd"
tl_need_nvrtc "the server cannot compile"

ADMIN=admin-token-0123456789abcdef
USER=compile-token-0123456789abcdef
printf '%s admin\n%s compile\n' "$ADMIN" "$USER" >"$TMP/tokens"
chmod 600 "$TMP/tokens"
start() { # start NAME: the server, with its database $TMP/NAME.db
  tl_server "$1" --workers 2 --tokens "$TMP/tokens"
  export TL_SERVER=$URL TL_TOKEN=$USER
}
stop() { tl_stop "$PID"; }
unset TL_NVRTC TL_CLIENT_BUNDLE
DEFS="-D M=128 -D N=128 -D K=128"
# bundle create's temporary caches go here, not into the /tmp other tests and users share
mkdir -p "$TMP/tmpdir"
export TMPDIR="$TMP/tmpdir"

# ---- 1. create, ls, verify --------------------------------------------------------------------
start server
export TL_CLIENT_CACHE="$TMP/user.db"
"$CLIENT" bundle create "$TMP/rel.tlb" examples/gemm.json --target sm_80,sm_90 $DEFS >"$TMP/out" 2>&1 && ok ||
  bad "bundle create: $(cat "$TMP/out")"
has "$TMP/out" "bundle create: $TMP/rel.tlb: 2 builds, 2 requests, 2 binaries by tlc 0.1.0+" "create says what it wrote"
[ ! -e "$TMP/user.db" ] && ok || bad "bundle create with patterns touched the user's local cache"
ls "$TMPDIR"/tlclient-bundle-* >/dev/null 2>&1 && bad "bundle create left its temporary cache" || ok
ID=$("$TL_BUILD/bin/tlc" --version | sed -n '1s/ (Tile IR.*//p')
"$CLIENT" bundle verify "$TMP/rel.tlb" >"$TMP/out" 2>&1 && ok || bad "verify: $(cat "$TMP/out")"
has "$TMP/out" "bundle verify: $TMP/rel.tlb: sound: format 1," "verify says sound"
has "$TMP/out" "2 builds, 2 requests, 2 binaries by $ID" "verify names the compiler"
"$CLIENT" bundle ls "$TMP/rel.tlb" >"$TMP/ls" 2>&1 && ok || bad "ls: $(cat "$TMP/ls")"
[ "$(grep -c '^build .* matmul$' "$TMP/ls")" = 2 ] && ok || bad "ls lists 2 builds: $(cat "$TMP/ls")"
[ "$(grep -c '^request .*matmul {"K":128,"M":128,"N":128}' "$TMP/ls")" = 2 ] && ok || bad "ls lists 2 requests: $(cat "$TMP/ls")"
"$CLIENT" bundle ls "$TMP/rel.tlb" --json >"$TMP/ls.json" 2>&1 && ok || bad "ls --json"
python3 - "$TMP/ls.json" "$ID" <<'EOF' && ok || bad "ls --json: $(cat "$TMP/ls.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["version"] == 1 and d["compiler"] == sys.argv[2], d
assert sorted(b["target"] for b in d["builds"]) == ["sm_80", "sm_90"], d
assert all(r["program"] == "matmul" for r in d["requests"]) and len(d["requests"]) == 2, d
EOF
# from a local cache that compile -o filled: the manifests rebuilt from the requests
"$CLIENT" compile examples/gemm.json --target sm_80,sm_90 $DEFS -o "$TMP/bin" >"$TMP/out" 2>&1 && ok ||
  bad "compile -o: $(cat "$TMP/out")"
"$CLIENT" bundle create "$TMP/fromcache.tlb" --from-cache >"$TMP/out" 2>&1 && ok ||
  bad "create --from-cache: $(cat "$TMP/out")"
has "$TMP/out" "2 builds, 2 requests, 2 binaries by $ID from $TMP/user.db" "--from-cache says what it wrote"
"$CLIENT" bundle ls "$TMP/fromcache.tlb" | sort >"$TMP/ls2"
"$CLIENT" bundle ls "$TMP/rel.tlb" | sort >"$TMP/ls1"
[ "$(grep -v '^#' "$TMP/ls1")" = "$(grep -v '^#' "$TMP/ls2")" ] && ok || bad "--from-cache gives other entries: $(diff "$TMP/ls1" "$TMP/ls2")"
"$CLIENT" bundle create "$TMP/x.tlb" --from-cache --compiler 'tlc 0.1.0+0000000000000000' >"$TMP/out" 2>&1 &&
  bad "a bundle of a compiler the cache lacks" || ok
has "$TMP/out" "has no build by tlc 0.1.0+0000000000000000" "--compiler with no builds"
"$CLIENT" bundle create "$TMP/x.tlb" >"$TMP/out" 2>&1; [ $? = 2 ] && ok || bad "create without source: not exit 2"
has "$TMP/out" "needs --from-cache, or patterns and --target" "create without source says what it needs"
"$CLIENT" bundle create "$TMP/x.tlb" examples/no-such.json --target sm_80 >"$TMP/out" 2>&1; [ $? = 2 ] && ok ||
  bad "create of a missing program: not prebuild's exit 2"
[ ! -e "$TMP/x.tlb" ] && ok || bad "a failed create wrote the bundle"

# ---- 2. offline start from the bundle, NVRTC hidden -------------------------------------------
stop
export TL_NVRTC="$TMP/no-such-libnvrtc.so"
# --from-cache with no server and no NVRTC: the placeholders' manifests rebuilt from the requests
TL_CLIENT_CACHE="$TMP/user.db" "$CLIENT" -v bundle create "$TMP/offline.tlb" --from-cache >"$TMP/out" 2>&1 && ok ||
  bad "create --from-cache offline: $(cat "$TMP/out")"
has "$TMP/out" "2 builds, 2 requests, 2 binaries by $ID from $TMP/user.db" "--from-cache offline says what it wrote"
grep -q "asking the server\|left out" "$TMP/out" && bad "--from-cache offline: $(cat "$TMP/out")" || ok
"$CLIENT" bundle ls "$TMP/offline.tlb" | sort >"$TMP/ls3"
[ "$(grep -v '^#' "$TMP/ls1")" = "$(grep -v '^#' "$TMP/ls3")" ] && ok ||
  bad "--from-cache offline gives other entries: $(diff "$TMP/ls1" "$TMP/ls3")"
cp "$TMP/user.db" "$TMP/altered.db"
python3 - "$TMP/altered.db" <<'EOF' && ok || bad "altering the toolchain in a copy of the cache"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute("UPDATE builds SET metadata = replace(metadata, '\"NVRTC ', '\"NVRTC 0.') "
               "WHERE target = 'sm_80' AND manifest LIKE 'tl-client-build 1%'").rowcount
db.commit()
assert n == 1, n
EOF
TL_CLIENT_CACHE="$TMP/altered.db" "$CLIENT" -v bundle create "$TMP/altered.tlb" --from-cache >"$TMP/out" 2>&1 && ok ||
  bad "create --from-cache of the altered cache: $(cat "$TMP/out")"
has "$TMP/out" "it gives another key: another compiler's checker?); asking the server" "a rebuilt manifest is checked"
has "$TMP/out" "the local cache has no manifest of it and the server gives none" "then the server is asked"
has "$TMP/out" "1 builds, 1 requests, 1 binaries by $ID" "the build is left out, and its request"
export TL_CLIENT_CACHE="$TMP/empty.db"
for arch in 80 90; do
  TL_CLIENT_BUNDLE="$TMP/rel.tlb" "$APP" --arch $arch --size 128 >"$TMP/app" 2>&1 && ok ||
    bad "start on sm_$arch from the bundle: $(cat "$TMP/app")"
  has "$TMP/app" "for sm_$arch: " "start on sm_$arch"
  has "$TMP/app" "from bundle" "start on sm_$arch from the bundle"
done
"$APP" --bundle "$TMP/rel.tlb" --offline --arch 90 --size 128 >"$TMP/app" 2>&1 && ok || bad "--bundle: $(cat "$TMP/app")"
has "$TMP/app" "from bundle" "--bundle"
TL_CLIENT_BUNDLE="$TMP/rel.tlb" "$APP" --offline --arch 86 --size 128 >"$TMP/app" 2>&1 && bad "sm_86 is not in the bundle" || ok
has "$TMP/app" "has no build of examples/gemm.json (embedded) for sm_86" "a build the bundle lacks"
"$CLIENT" bundle import "$TMP/rel.tlb" >"$TMP/out" 2>&1 && ok || bad "import: $(cat "$TMP/out")"
has "$TMP/out" "bundle import: $TMP/rel.tlb: 2 builds, 2 requests, 2 binaries by $ID into $TMP/empty.db" "import says what"
"$CLIENT" cache ls >"$TMP/ls" 2>&1
[ "$(grep -c ' request ' "$TMP/ls")" = 2 ] && [ "$(grep -c ' build ' "$TMP/ls")" = 2 ] && ok ||
  bad "import stored other entries: $(cat "$TMP/ls")"
for arch in 80 90; do
  "$APP" --offline --arch $arch --size 128 >"$TMP/app" 2>&1 && ok || bad "offline start on sm_$arch after import: $(cat "$TMP/app")"
  has "$TMP/app" "from local" "offline start on sm_$arch after import"
done
KEY=$(grep '^build .*sm_80 ' "$TMP/ls1" | awk '{print $2}')
"$CLIENT" --offline explain "$KEY" >"$TMP/out" 2>&1 && ok || bad "explain of an imported build offline: $(cat "$TMP/out")"
has "$TMP/out" "compiler   $ID" "the imported build has its manifest"
"$CLIENT" --offline --bundle "$TMP/rel.tlb" --cache none fetch "$KEY" -o "$TMP/k.bin" >"$TMP/out" 2>&1 && ok ||
  bad "fetch by key from the bundle: $(cat "$TMP/out")"
cmp -s "$TMP/k.bin" "$TMP/bin/matmul.sm_80.cubin" && ok || bad "the bundle's sm_80 binary differs from compile -o's"
unset TL_NVRTC

# ---- 3. bad bundles ------------------------------------------------------------------------------
SIZE=$(wc -c <"$TMP/rel.tlb")
head -c $((SIZE - 100)) "$TMP/rel.tlb" >"$TMP/trunc.tlb"
python3 - "$TMP/rel.tlb" "$TMP/flip.tlb" "$TMP/v2.tlb" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
f = bytearray(b); f[24 + 48 + 100] ^= 1      # inside the first entry's payload
open(sys.argv[2], "wb").write(f)
v = bytearray(b); v[8] = 2                   # the format version
open(sys.argv[3], "wb").write(v)
EOF
cp examples/gemm.json "$TMP/notbundle.tlb"
check_bad() { # FILE MESSAGE
  "$CLIENT" bundle verify "$1" >"$TMP/out" 2>&1 && bad "verify accepted $1" || ok
  has "$TMP/out" "$2" "verify of $1"
  TL_CLIENT_CACHE="$TMP/bad.db" "$CLIENT" bundle import "$1" >"$TMP/out" 2>&1 && bad "import accepted $1" || ok
  has "$TMP/out" "$2" "import of $1"
  TL_CLIENT_BUNDLE="$1" "$APP" --offline --arch 80 --size 128 >"$TMP/out" 2>&1 && bad "the app took $1" || ok
  has "$TMP/out" "$2" "the app with $1"
}
check_bad "$TMP/trunc.tlb" "$TMP/trunc.tlb: truncated: $((SIZE - 100)) bytes, its header says $SIZE"
check_bad "$TMP/flip.tlb" "$TMP/flip.tlb: entry 0 (artifact) at byte 24: its bytes do not match its SHA-256 (damaged)"
check_bad "$TMP/v2.tlb" "$TMP/v2.tlb: format version 2; this build reads version 1"
check_bad "$TMP/notbundle.tlb" "$TMP/notbundle.tlb: not a bundle (it does not start with \"TLBUNDLE\")"
if [ -e "$TMP/bad.db" ]; then
  TL_CLIENT_CACHE="$TMP/bad.db" "$CLIENT" cache ls >"$TMP/ls" 2>&1
  has "$TMP/ls" ": 0 entries" "nothing of a bad bundle was imported"
else
  ok
fi

# ---- 4. the server imports --------------------------------------------------------------------
start server2
export TL_CLIENT_CACHE="$TMP/user2.db"
post() { # FILE TOKEN -> $TMP/post (body), prints the HTTP status
  curl -s -o "$TMP/post" -w '%{http_code}' -X POST --data-binary @"$1" -H 'Content-Type: application/octet-stream' \
    ${2:+-H "Authorization: Bearer $2"} "$URL/v1/bundles"
}
[ "$(post "$TMP/rel.tlb" "$USER")" = 403 ] && ok || bad "a compile token imported a bundle: $(cat "$TMP/post")"
has "$TMP/post" "lacks the 'admin' scope" "403 says why"
[ "$(post "$TMP/rel.tlb" "")" = 401 ] && ok || bad "no token imported a bundle"
[ "$(post "$TMP/rel.tlb" "$ADMIN")" = 200 ] && ok || bad "import: $(cat "$TMP/post")"
python3 - "$TMP/post" "$ID" stored <<'EOF' && ok || bad "import answer: $(cat "$TMP/post")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["compiler"] == sys.argv[2] == d["server_compiler"], d
assert d["stored" if sys.argv[3] == "stored" else "present"] == 2 and d["refused"] == 0 and d["requests"] == 2, d
assert [b["status"] for b in d["builds"]] == [sys.argv[3]] * 2, d
EOF
[ "$(post "$TMP/rel.tlb" "$ADMIN")" = 200 ] && ok || bad "import again: $(cat "$TMP/post")"
python3 - "$TMP/post" "$ID" present <<'EOF' && ok || bad "import again answer: $(cat "$TMP/post")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["present"] == 2 and d["stored"] == 0, d
EOF
"$CLIENT" compile examples/gemm.json --target sm_80,sm_90 $DEFS >"$TMP/out" 2>&1 && ok || bad "compile after import: $(cat "$TMP/out")"
[ "$(grep -c ' hit ' "$TMP/out")" = 2 ] && ok || bad "the imported builds are not hits: $(cat "$TMP/out")"
[ "$(post "$TMP/flip.tlb" "$ADMIN")" = 400 ] && ok || bad "a damaged bundle: $(cat "$TMP/post")"
has "$TMP/post" '"code": "corrupt"' "a damaged bundle's code"
has "$TMP/post" "entry 0 (artifact) at byte 24: its bytes do not match its SHA-256" "a damaged bundle's message"
[ "$(post "$TMP/v2.tlb" "$ADMIN")" = 400 ] && ok || bad "another version: $(cat "$TMP/post")"
has "$TMP/post" '"code": "unsupported"' "another version's code"
curl -s -o "$TMP/post" -w '%{http_code}' -X POST --data-binary @"$TMP/rel.tlb" -H 'Content-Type: application/json' \
  -H "Authorization: Bearer $ADMIN" "$URL/v1/bundles" >"$TMP/code"
[ "$(cat "$TMP/code")" = 415 ] && ok || bad "a bundle as JSON: $(cat "$TMP/code")"
# another compiler identity: the bundle re-signed by a second writer of the format (proto/bundle.md)
python3 - "$TMP/rel.tlb" "$TMP/other.tlb" <<'EOF' || bad "the Python writer failed"
import hashlib, json, struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"TLBUNDLE"
version, count, size = struct.unpack_from("<IIQ", data, 8)
assert version == 1 and size == len(data)
at, entries = 24, []
for _ in range(count):
    kind, length = data[at:at + 1], struct.unpack_from("<Q", data, at + 8)[0]
    entries.append([kind, data[at + 48:at + 48 + length]])
    at += 48 + length
assert hashlib.sha256(data[:at]).digest() == data[at:]
sha = lambda s: hashlib.sha256(s.encode()).hexdigest()
other = "tlc 0.1.0+ffffffffffffffff"
keys = {}
def resign(kind, text):  # the records of kind, their text's compiler line replaced, keyed again
    for e in entries:
        if e[0] == kind:
            r = json.loads(e[1])
            lines = r[text].split("\n")
            lines[1] = "compiler " + other
            r[text] = "\n".join(lines)
            old, r["key"] = r["key"], sha(r[text])
            keys.setdefault(old, r["key"])
            if "build" in r:
                r["build"] = keys[r["build"]]
            e[1] = json.dumps(r, sort_keys=True, separators=(",", ":")).encode()
resign(b"B", "manifest")
built = sorted(keys.values())
resign(b"R", "request")
body = b"".join(k + bytes(7) + struct.pack("<Q", len(p)) + hashlib.sha256(p).digest() + p for k, p in entries)
head = b"TLBUNDLE" + struct.pack("<IIQ", 1, len(entries), 24 + len(body) + 32)
out = head + body
open(sys.argv[2], "wb").write(out + hashlib.sha256(out).digest())
json.dump(built, open(sys.argv[2] + ".keys", "w"))
EOF
"$CLIENT" bundle verify "$TMP/other.tlb" >"$TMP/out" 2>&1 && ok || bad "the Python writer's bundle: $(cat "$TMP/out")"
has "$TMP/out" "by tlc 0.1.0+ffffffffffffffff" "the Python writer's compiler"
[ "$(post "$TMP/other.tlb" "$ADMIN")" = 422 ] && ok || bad "another compiler's bundle: $(cat "$TMP/post")"
python3 - "$TMP/post" "$ID" <<'EOF' && ok || bad "another compiler's answer: $(cat "$TMP/post")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["error"]["code"] == "unsupported", d
assert "built by tlc 0.1.0+ffffffffffffffff; this server runs " + sys.argv[2] in d["error"]["message"], d
assert d["refused"] == 2 and d["stored"] == 0, d
assert all(b["status"] == "refused" and "this server runs" in b["reason"] for b in d["builds"]), d
EOF
for k in $(python3 -c "import json,sys; print(' '.join(json.load(open(sys.argv[1]))))" "$TMP/other.tlb.keys"); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $USER" "$URL/v1/kernels/$k")
  [ "$code" = 404 ] && ok || bad "a refused build of another compiler is served: $k ($code)"
done
stop

tl_done
