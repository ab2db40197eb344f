#!/bin/sh
# tests/sh/server_auth_tls.sh - tlserverd's bearer tokens and TLS.
#
# 1. HTTPS with a self-signed certificate made here by openssl, and a
#    tokens file with one token per scope: every scope is allowed and
#    refused where it should be (401 without or with an unknown token, with
#    WWW-Authenticate; 403 for a token lacking the scope); /healthz and
#    /readyz are open; an artifact fetched over HTTPS hashes to its id;
#    plain HTTP to the TLS port gets no answer; a client that does not
#    trust the certificate is refused by curl.
# 2. --allow-anonymous-read: reads work without a token, compiles and
#    /metrics still need one.
# 3. Start-up refusals, each with a clear message: a tokens file with a bad
#    line (named); a tokens file open to group or others (chmod 600, like
#    ssh); a non-loopback --listen address without --tokens (unless
#    --insecure-no-auth); a second server on a port one already listens on
#    (no SO_REUSEPORT).
#
# Exit status: 0 pass, 1 fail, 77 skipped (no curl or openssl, or no toolchain
# offers a target; compiles go to sm_80 with NVRTC, else to the first offered).

cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
SERVER=$TL_BUILD/bin/tlserverd
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
tl_init server_auth_tls.sh
tl_need curl openssl sha256sum
tl_built "$SERVER"
# the target compiled for: sm_80 with NVRTC, else the first one offered (clang's gfx90a)
TARGET=$(tl_target)
[ -n "$TARGET" ] || tl_skip "no toolchain here (tlc targets lists none), the server cannot compile"

# start NAME FLAGS...: starts a server, sets PORT
start() {
  _n=$1
  shift
  tl_server "$_n" --workers 1 "$@"
}

# expect STATUS DESCRIPTION CURL-ARGS...
expect() {
  want=$1
  desc=$2
  shift 2
  got=$(curl -s -o "$TMP/body" -D "$TMP/headers" -w '%{http_code}' "$@")
  if [ "$got" = "$want" ]; then ok; else bad "$desc: got $got, want $want: $(head -c 300 "$TMP/body")"; fi
}

# ---- files ---------------------------------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$TMP/key.pem" -out "$TMP/cert.pem" -days 2 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" >"$TMP/openssl.log" 2>&1 ||
  { cat "$TMP/openssl.log" >&2; echo "server_auth_tls.sh: FAIL: openssl could not make a certificate" >&2; exit 1; }
R=read-token-0123456789abcdef
C=compile-token-0123456789abcdef
A=admin-token-0123456789abcdef
umask 077 # tokens files must be private (3. checks the refusal of others)
cat >"$TMP/tokens" <<EOF
# scope tokens for the test
$R read
$C compile
$A admin
EOF
chmod 600 "$TMP/tokens"
JSON="Content-Type: application/json"
BODY="{\"program\": $(cat examples/tilus_add_one.json), \"targets\": [\"$TARGET\"]}"
ZERO=0000000000000000000000000000000000000000000000000000000000000000

# ---- 1. HTTPS + tokens ---------------------------------------------------------
start tls --tokens "$TMP/tokens" --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem"
U=https://localhost:$PORT
T="--cacert $TMP/cert.pem"

# open endpoints
expect 200 "healthz without a token" $T "$U/healthz"
expect 200 "readyz without a token" $T "$U/readyz"
# no token, unknown token, malformed header
expect 401 "info without a token" $T "$U/v1/info"
grep -qi '^WWW-Authenticate: Bearer' "$TMP/headers" && ok || bad "401 without WWW-Authenticate"
expect 401 "compile without a token" $T -H "$JSON" --data-binary "$BODY" "$U/v1/compile"
expect 401 "unknown token" $T -H "Authorization: Bearer nobody-0123456789abcdef" "$U/v1/info"
expect 401 "basic auth" $T -u "user:pass" "$U/v1/info"
# read
expect 200 "read: info" $T -H "Authorization: Bearer $R" "$U/v1/info"
expect 404 "read: artifact lookup" $T -H "Authorization: Bearer $R" "$U/v1/artifacts/$ZERO"
expect 403 "read: compile" $T -H "Authorization: Bearer $R" -H "$JSON" --data-binary "$BODY" "$U/v1/compile"
grep -q '"forbidden"' "$TMP/body" && ok || bad "403 without code forbidden"
expect 403 "read: metrics" $T -H "Authorization: Bearer $R" "$U/metrics"
# compile (includes read)
expect 200 "compile: compile" $T -H "Authorization: Bearer $C" -H "$JSON" --data-binary "$BODY" "$U/v1/compile"
ART=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["artifact"])' "$TMP/body" 2>/dev/null)
expect 200 "compile: info" $T -H "Authorization: Bearer $C" "$U/v1/info"
expect 403 "compile: metrics" $T -H "Authorization: Bearer $C" "$U/metrics"
# admin
expect 200 "admin: metrics" $T -H "Authorization: Bearer $A" "$U/metrics"
grep -q '^tlserverd_requests_total{route="compile",code="403"} 1$' "$TMP/body" && ok || bad "metrics do not count the 403"
expect 200 "admin: compile (a hit)" $T -H "Authorization: Bearer $A" -H "$JSON" --data-binary "$BODY" "$U/v1/compile"
grep -q '"cached": true' "$TMP/body" && ok || bad "the second compile was not a hit"
# the artifact over HTTPS hashes to its id
if [ -n "$ART" ]; then
  got=$(curl -s $T -H "Authorization: Bearer $R" "$U/v1/artifacts/$ART" | sha256sum | cut -d' ' -f1)
  [ "$got" = "$ART" ] && ok || bad "artifact over https hashes to $got, not $ART"
else
  bad "no artifact id in the compile answer"
fi
# a client that does not trust the certificate, and plain HTTP to the TLS port
if curl -s -o /dev/null "$U/healthz" 2>/dev/null; then bad "curl accepted an untrusted certificate"; else ok; fi
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/healthz" 2>/dev/null)
[ "$code" != 200 ] && ok || bad "plain HTTP to the TLS port was answered"
expect 200 "healthz after all that" $T "$U/healthz"

# ---- 2. anonymous reads --------------------------------------------------------
start anon --tokens "$TMP/tokens" --allow-anonymous-read
U=http://127.0.0.1:$PORT
expect 200 "anonymous: info" "$U/v1/info"
expect 404 "anonymous: artifact lookup" "$U/v1/artifacts/$ZERO"
expect 401 "anonymous: compile" -H "$JSON" --data-binary "$BODY" "$U/v1/compile"
expect 401 "anonymous: metrics" "$U/metrics"
expect 401 "anonymous with an unknown token" -H "Authorization: Bearer nobody-0123456789abcdef" "$U/v1/info"
expect 200 "compile token on an anonymous-read server" -H "Authorization: Bearer $C" -H "$JSON" --data-binary "$BODY" "$U/v1/compile"
ART=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["artifact"])' "$TMP/body" 2>/dev/null)
expect 200 "anonymous: fetch the artifact" "$U/v1/artifacts/$ART"

# ---- 3. start-up refusals ------------------------------------------------------
# refused NAME GREP ARGS...: the server must exit (not serve) with status 1
# within 20 s, its message holding GREP
refused() {
  name=$1
  want=$2
  shift 2
  timeout 20 "$SERVER" --db "$TMP/refused.db" --port-file "$TMP/refused.port" "$@" 2>"$TMP/refused.log"
  rc=$?
  if [ "$rc" -ne 1 ]; then
    bad "$name: exit status $rc, want 1 (a refusal): $(cat "$TMP/refused.log")"
  elif ! grep -q -- "$want" "$TMP/refused.log"; then
    bad "$name: the message lacks '$want': $(cat "$TMP/refused.log")"
  else
    ok
  fi
  rm -f "$TMP/refused.port"
}

printf 'good-token-0123456789abcdef read\nshort read\n' >"$TMP/bad-tokens"
refused "a bad tokens file" "line 2" --listen 127.0.0.1:0 --tokens "$TMP/bad-tokens"

cp "$TMP/tokens" "$TMP/open-tokens"
chmod 644 "$TMP/open-tokens"
refused "a tokens file readable by others" "chmod 600" --listen 127.0.0.1:0 --tokens "$TMP/open-tokens"
chmod 640 "$TMP/open-tokens"
refused "a tokens file readable by the group" "mode 0640" --listen 127.0.0.1:0 --tokens "$TMP/open-tokens"

refused "0.0.0.0 without tokens" "insecure-no-auth" --listen 0.0.0.0:0
start open --listen 0.0.0.0:0 --insecure-no-auth
expect 200 "0.0.0.0 with --insecure-no-auth serves" "http://127.0.0.1:$PORT/healthz"
start open_tokens --listen 0.0.0.0:0 --tokens "$TMP/tokens"
expect 401 "0.0.0.0 with --tokens serves, with auth" "http://127.0.0.1:$PORT/v1/info"

start first
refused "a second server on the same port" "in use" --listen "127.0.0.1:$PORT"
expect 200 "the first server still serves" "http://127.0.0.1:$PORT/healthz"

tl_done
