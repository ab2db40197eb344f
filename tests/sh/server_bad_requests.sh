#!/bin/sh
# tests/sh/server_bad_requests.sh - a table of bad requests to tlserverd,
# each with the HTTP status and the JSON error code it must get.
#
# Starts build/bin/tlserverd on a free loopback port (--listen 127.0.0.1:0,
# the port read back from --port-file) with a small --max-body, sends every
# request of the table below with curl, and checks the status, that the body
# is {"error": {"code": CODE, "message": "..."}} with the expected CODE (the
# wire names of proto/tl_status.h, plus method_not_allowed,
# unsupported_media_type and range_not_satisfiable), and that the server is
# still healthy at the end.  A row whose code is "-" has no JSON body to
# check (libmicrohttpd answers 431 itself).
#
# Exit status: 0 pass, 1 fail, 77 skipped (no curl, or no toolchain offers a
# target; compiles go to sm_80 with NVRTC, else to the first target offered).

cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
SERVER=$TL_BUILD/bin/tlserverd
PY=/usr/bin/python3
tl_init server_bad_requests.sh
tl_need curl
[ -x "$PY" ] || PY=python3
tl_built "$SERVER"
# the target compiled for: sm_80 with NVRTC, else the first one offered (clang's gfx90a)
T=$(tl_target)
[ -n "$T" ] || tl_skip "no toolchain here (tlc targets lists none), the server cannot compile"

tl_server server --workers 1 --max-body 64K --max-header-bytes 8K
JSON="Content-Type: application/json"

# Bodies used below.
ADD_ONE=$(cat examples/tilus_add_one.json)
GOOD="{\"program\": $ADD_ONE, \"targets\": [\"$T\"]}"
head -c 70000 /dev/zero | tr '\0' ' ' >"$TMP/big.json"
"$PY" -c 'print("{\"program\": " + "[" * 100 + "]" * 100 + "}")' >"$TMP/deep.json"
printf '{"program": {}, "targets": ["'"$T"'", "\377"]}' >"$TMP/badutf8.json"
TARGETS17=$("$PY" -c 'import json; print(json.dumps(["sm_%d" % (70 + i) for i in range(17)]))')
BIGHDR=$(head -c 9000 /dev/zero | tr '\0' 'a')
ZERO=0000000000000000000000000000000000000000000000000000000000000000

# One artifact to ask for ranges of.
ART=$(curl -s -H "$JSON" --data-binary "$GOOD" "$URL/v1/compile" |
  "$PY" -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["artifact"])' 2>/dev/null)
if [ -z "$ART" ]; then
  cat "$TMP/server.log" >&2
  tl_fail "could not compile the example to get an artifact"
fi

# check STATUS CODE DESCRIPTION -- CURL ARGS... (the URL path is the last argument)
check() {
  want_status=$1
  want_code=$2
  desc=$3
  shift 4
  got_status=$(curl -s -o "$TMP/body" -w '%{http_code}' "$@")
  got_code=-
  if [ "$want_code" != - ]; then
    got_code=$("$PY" -c '
import json, sys
try:
    e = json.load(open(sys.argv[1]))["error"]
    assert isinstance(e["message"], str) and e["message"]
    print(e["code"])
except Exception as x:
    print("(no JSON error: %s)" % x)' "$TMP/body")
  fi
  if [ "$got_status" = "$want_status" ] && [ "$got_code" = "$want_code" ]; then
    ok
  else
    bad "$desc: got $got_status $got_code, want $want_status $want_code"
    head -c 400 "$TMP/body" >&2
    echo >&2
  fi
}

# ---- the table -----------------------------------------------------------------
# routes and methods
check 404 not_found "unknown path" -- "$URL/nope"
check 404 not_found "compile with a trailing path" -- -X POST "$URL/v1/compile/x"
check 404 not_found "unknown version" -- "$URL/v2/info"
check 405 method_not_allowed "GET compile" -- "$URL/v1/compile"
check 405 method_not_allowed "PUT compile" -- -X PUT -H "$JSON" -d '{}' "$URL/v1/compile"
check 405 method_not_allowed "DELETE artifact" -- -X DELETE "$URL/v1/artifacts/$ART"
check 405 method_not_allowed "POST healthz" -- -X POST -d x "$URL/healthz"
check 405 method_not_allowed "OPTIONS info" -- -X OPTIONS "$URL/v1/info"
# content type
check 415 unsupported_media_type "no content type" -- --data-binary "$GOOD" "$URL/v1/compile"
check 415 unsupported_media_type "text/plain" -- -H "Content-Type: text/plain" --data-binary "$GOOD" "$URL/v1/compile"
check 415 unsupported_media_type "application/jsonx" -- -H "Content-Type: application/jsonx" --data-binary "$GOOD" "$URL/v1/compile"
# malformed JSON
check 400 malformed_json "empty body" -- -H "$JSON" -X POST "$URL/v1/compile"
check 400 malformed_json "truncated JSON" -- -H "$JSON" -d '{"program":' "$URL/v1/compile"
check 400 malformed_json "trailing garbage" -- -H "$JSON" -d '{} x' "$URL/v1/compile"
check 400 malformed_json "duplicate member" -- -H "$JSON" -d '{"program": {}, "program": {}}' "$URL/v1/compile"
check 400 malformed_json "invalid UTF-8" -- -H "$JSON" --data-binary @"$TMP/badutf8.json" "$URL/v1/compile"
check 400 malformed_json "NUL in a string" -- -H "$JSON" -d '{"x-a": "\u0000"}' "$URL/v1/compile"
check 400 malformed_json "a string, not an object" -- -H "$JSON" -d '"program"' "$URL/v1/compile"
# the request's shape
check 400 invalid_argument "array at the root" -- -H "$JSON" -d '[]' "$URL/v1/compile"
check 400 invalid_argument "no program" -- -H "$JSON" -d '{"targets": ["'"$T"'"]}' "$URL/v1/compile"
check 400 invalid_argument "program is a string" -- -H "$JSON" -d '{"program": "x", "targets": ["'"$T"'"]}' "$URL/v1/compile"
check 400 invalid_argument "no targets" -- -H "$JSON" -d "{\"program\": $ADD_ONE}" "$URL/v1/compile"
check 400 invalid_argument "targets is a string" -- -H "$JSON" -d "{\"program\": $ADD_ONE, \"targets\": \"$T\"}" "$URL/v1/compile"
check 400 invalid_argument "no target at all" -- -H "$JSON" -d "{\"program\": $ADD_ONE, \"targets\": []}" "$URL/v1/compile"
check 400 invalid_argument "a target that is a number" -- -H "$JSON" -d "{\"program\": $ADD_ONE, \"targets\": [80]}" "$URL/v1/compile"
check 400 invalid_argument "a target named twice" -- -H "$JSON" -d "{\"program\": $ADD_ONE, \"targets\": [\"$T\", \"$T\"]}" "$URL/v1/compile"
check 413 too_large "17 targets" -- -H "$JSON" -d "{\"program\": $ADD_ONE, \"targets\": $TARGETS17}" "$URL/v1/compile"
check 422 unsupported "unknown target" -- -H "$JSON" -d "{\"program\": $ADD_ONE, \"targets\": [\"sm_1\"]}" "$URL/v1/compile"
check 400 invalid_argument "constants is an array" -- -H "$JSON" -d "{\"program\": $ADD_ONE, \"targets\": [\"$T\"], \"constants\": [1]}" "$URL/v1/compile"
check 400 invalid_argument "a constant that is a string" -- -H "$JSON" -d "{\"program\": $ADD_ONE, \"targets\": [\"$T\"], \"constants\": {\"block_n\": \"128\"}}" "$URL/v1/compile"
check 400 invalid_argument "options is a string" -- -H "$JSON" -d "{\"program\": $ADD_ONE, \"targets\": [\"$T\"], \"options\": \"-O3\"}" "$URL/v1/compile"
check 400 invalid_argument "an unknown option" -- -H "$JSON" -d "{\"program\": $ADD_ONE, \"targets\": [\"$T\"], \"options\": {\"fast\": true}}" "$URL/v1/compile"
check 400 invalid_argument "an unknown member" -- -H "$JSON" -d "{\"program\": $ADD_ONE, \"target\": [\"$T\"]}" "$URL/v1/compile"
# limits
check 413 too_large "body over --max-body" -- -H "$JSON" --data-binary @"$TMP/big.json" "$URL/v1/compile"
check 413 too_large "chunked body over --max-body" -- -H "$JSON" -H "Transfer-Encoding: chunked" --data-binary @"$TMP/big.json" "$URL/v1/compile"
check 413 too_large "JSON nested 100 deep" -- -H "$JSON" --data-binary @"$TMP/deep.json" "$URL/v1/compile"
check 431 - "headers over --max-header-bytes" -- -H "X-Big: $BIGHDR" "$URL/healthz"
# invalid programs
check 422 invalid_program "an empty program" -- -H "$JSON" -d '{"program": {}, "targets": ["'"$T"'"]}' "$URL/v1/compile"
check 422 invalid_program "override of an unknown constant" -- -H "$JSON" -d "{\"program\": $ADD_ONE, \"targets\": [\"$T\"], \"constants\": {\"nope\": 1}}" "$URL/v1/compile"
check 422 invalid_program "a bad dtype" -- -H "$JSON" -d '{"program": {"tlir": 1, "name": "k", "params": [{"name": "a", "kind": "tensor", "dtype": "float33", "shape": [4]}], "kernel": {"grid": [1], "threads": 32, "body": []}}, "targets": ["'"$T"'"]}' "$URL/v1/compile"
# artifacts and kernels
check 400 invalid_argument "artifact id too short" -- "$URL/v1/artifacts/abc"
check 400 invalid_argument "artifact id in upper case" -- "$URL/v1/artifacts/$(echo "$ART" | tr a-f A-F)"
check 404 not_found "unknown artifact" -- "$URL/v1/artifacts/$ZERO"
check 404 - "unknown artifact (HEAD)" -- -I "$URL/v1/artifacts/$ZERO"
check 416 range_not_satisfiable "range past the end" -- -H "Range: bytes=99999999-" "$URL/v1/artifacts/$ART"
check 400 invalid_argument "bad build key" -- "$URL/v1/kernels/xyz"
check 404 not_found "unknown build key" -- "$URL/v1/kernels/$ZERO"

# The 422 for an invalid program carries every diagnostic with a pointer into
# the request, and a column for an error inside an expression.
curl -s -o "$TMP/body" -H "$JSON" -d '{"program": {"tlir": 1, "name": "k", "params": [{"name": "a", "kind": "tensor", "dtype": "float32", "shape": [4]}], "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": [{"op": "parallel", "vars": ["i"], "extents": [4], "body": ["a[i] = a[i] +* 2"]}, {"op": "parallel", "vars": ["j"], "extents": [4], "body": ["a[j] = (a[j]"]}]}}, "targets": ["'"$T"'"]}' "$URL/v1/compile"
if "$PY" - "$TMP/body" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
e = d["error"]
assert e["code"] == "invalid_program", e
diags = e["diagnostics"]
assert len(diags) >= 2, diags
assert all(x["pointer"].startswith("/program/kernel/body/") for x in diags), diags
assert any(x.get("column", 0) > 0 for x in diags), diags
assert d["results"][0]["status"] == "error"
EOF
then
  ok
else
  bad "diagnostics of an invalid program:"
  cat "$TMP/body" >&2
fi

# Still healthy after all that.
if [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/healthz")" = 200 ]; then
  ok
else
  bad "/healthz after the bad requests"
fi

tl_done
