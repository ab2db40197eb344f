#!/bin/sh
# tests/sh/cluster_bundle.sh - a bundle imported by one replica is served by
# every replica (POST /v1/bundles publishes to the shared tier; README
# "Clusters", proto/bundle.md section 4), pushed with `tlclient bundle
# push`.  Real processes on loopback: a redis-server, two tlserverd
# replicas on it with tokens, and a third server without the tier that
# builds the bundle (so nothing reaches Redis but the push).
#
#  1. `tlclient bundle push` of a bundle to r1 (admin token): every build
#     "stored" and published ("2 published to the shared tier"); the
#     entries are in Redis as a compile leaves them (tl:b:KEY with its TTL,
#     tl:a:ID)
#  2. r2, with an empty cache, answers the bundle's compile request as a
#     hit and serves GET /v1/kernels/KEY and the artifact, with no compile
#     on either replica (/metrics)
#  3. exact errors: a compile token (exit 3, "lacks the 'admin' scope"), no
#     token (exit 3, 401's message), a damaged bundle (exit 1, the entry
#     named, nothing sent: r1's bundle requests unchanged), a file that is
#     not a bundle, a missing file, `bundle push` without a FILE (exit 2)
#  4. Redis down: the push stores locally, says which builds are not in
#     the tier and exits 1; Redis back: a second push finds them "present"
#     and publishes them
#
# Exit status: 0 pass, 1 fail, 77 skipped (redis-server cannot start, no
# NVRTC, no curl or redis-cli).

cd "$(dirname "$0")/../.." || exit 1
NAME=cluster_bundle.sh
. tests/sh/lib/cluster.sh
CLIENT=$TL_BUILD/bin/tlclient
metric() { # metric PORT SERIES: its value (0 when absent)
  curl -s -H "Authorization: Bearer $ADMIN" "http://127.0.0.1:$1/metrics" |
    awk -v s="$2" '$1 == s { v = $2 } END { print v + 0 }'
}
OKC='tlserverd_compiles_total{outcome="ok"}'

ADMIN=admin-token-0123456789abcdef
USER=compile-token-0123456789abcdef
printf '%s admin\n%s compile\n' "$ADMIN" "$USER" >"$TMP/tokens"
chmod 600 "$TMP/tokens"

PR=$(free_port)
redis() {
  redis-server --port "$PR" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
    --logfile "$TMP/redis.log" </dev/null >/dev/null 2>&1 &
  REDIS=$!
  PIDS="$PIDS $REDIS"
  until_ok 10 redis-cli -p "$PR" ping
}
if ! redis; then
  tail -n 5 "$TMP/redis.log" >&2
  echo "cluster_bundle.sh: skipped: redis-server cannot start here" >&2
  exit 77
fi
RC="redis-cli -p $PR"

# the bundle, built by a server outside the cluster (its temporary cache in $TMP)
DEFS="-D block_n=64"
server maker --tokens "$TMP/tokens"
TMPDIR=$TMP "$CLIENT" --server "http://127.0.0.1:$PORT" --token "$USER" --cache none bundle create "$TMP/rel.tlb" \
  examples/tilus_add_one.json --target sm_80,sm_86 $DEFS >"$TMP/out" 2>&1 && ok || bad "bundle create: $(cat "$TMP/out")"
kill "$LAST"
wait "$LAST" 2>/dev/null
"$CLIENT" bundle ls "$TMP/rel.tlb" --json >"$TMP/ls.json" || bad "bundle ls"
KEYS=$(python3 -c "import json,sys; print(' '.join(b['key'] for b in json.load(open(sys.argv[1]))['builds']))" "$TMP/ls.json")
ARTS=$(python3 -c "import json,sys; print(' '.join(b['artifact'] for b in json.load(open(sys.argv[1]))['builds']))" "$TMP/ls.json")
check "the bundle holds 2 builds" "$(echo $KEYS | wc -w)" 2
check "nothing in Redis before the push" "$($RC dbsize)" 0

TIER="--tokens $TMP/tokens --tier redis://127.0.0.1:$PR --tier-timeout 0.3 --tier-ttl 3600"
server r1 $TIER
P1=$PORT
server r2 $TIER
P2=$PORT
push() { # push PORT TOKEN FILE: tlclient bundle push; output in $TMP/push, prints the exit status
  "$CLIENT" --server "http://127.0.0.1:$1" ${2:+--token "$2"} --cache none bundle push "$3" >"$TMP/push" 2>&1
  echo $?
}

# ---- 1. push to r1 ------------------------------------------------------------------------------
check "push to r1" "$(push "$P1" "$ADMIN" "$TMP/rel.tlb")" 0
has "$TMP/push" "bundle push: $TMP/rel.tlb: 2 stored, 0 present, 0 refused, 2 requests, 2 published to the shared tier (on http://127.0.0.1:$P1)" "push says what it did"
for k in $KEYS; do
  check "tl:b: of $k" "$($RC exists "tl:b:$k")" 1
  ttl=$($RC pttl "tl:b:$k")
  [ "$ttl" -gt 3500000 ] && [ "$ttl" -le 3600000 ] && ok || bad "tl:b:$k has no --tier-ttl: $ttl"
done
for a in $ARTS; do
  k=$($RC get "tl:a:$a")
  case " $KEYS " in *" $k "*) ok ;; *) bad "tl:a:$a names '$k'" ;; esac
done
check "r1 counts 2 publishes" "$(metric "$P1" tlserverd_tier_publishes_total)" 2

# ---- 2. r2 serves them with no compile ------------------------------------------------------------
python3 - "$TMP/req.json" <<'EOF'
import json, sys
p = json.load(open("examples/tilus_add_one.json"))
json.dump({"program": p, "targets": ["sm_80", "sm_86"], "constants": {"block_n": 64}}, open(sys.argv[1], "w"))
EOF
code=$(curl -s -o "$TMP/c2.json" -w '%{http_code}' -XPOST -H 'Content-Type: application/json' \
  -H "Authorization: Bearer $USER" --data-binary "@$TMP/req.json" "http://127.0.0.1:$P2/v1/compile")
check "compile on r2" "$code" 200
python3 - "$TMP/c2.json" "$KEYS" <<'EOF' && ok || bad "r2's answer: $(cat "$TMP/c2.json")"
import json, sys
r = json.load(open(sys.argv[1]))["results"]
assert all(x["cached"] for x in r), r
assert sorted(x["key"] for x in r) == sorted(sys.argv[2].split()), r
EOF
check "r2 read the tier" "$(metric "$P2" tlserverd_tier_hits_total)" 2
check "no compile on r2" "$(metric "$P2" "$OKC")" 0
check "no compile on r1" "$(metric "$P1" "$OKC")" 0
# a third replica with an empty cache, by key and by artifact id
server r3 $TIER
P3=$PORT
for k in $KEYS; do
  check "GET /v1/kernels on r3" "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $USER" \
    "http://127.0.0.1:$P3/v1/kernels/$k")" 200
done
for a in $ARTS; do
  curl -s -o "$TMP/art" -H "Authorization: Bearer $USER" "http://127.0.0.1:$P3/v1/artifacts/$a"
  check "GET /v1/artifacts on r3" "$(sha256sum <"$TMP/art" | cut -c1-64)" "$a"
done
check "no compile on r3" "$(metric "$P3" "$OKC")" 0
# the server's answer as proto/openapi.yaml says (BundleImport, with the tier's fields)
curl -s -o "$TMP/post.json" -X POST --data-binary "@$TMP/rel.tlb" -H 'Content-Type: application/octet-stream' \
  -H "Authorization: Bearer $ADMIN" "http://127.0.0.1:$P1/v1/bundles"
if /usr/bin/python3 -c 'import yaml, jsonschema' 2>/dev/null; then
  /usr/bin/python3 - "$TMP/post.json" <<'EOF' && ok || bad "the answer against BundleImport: $(cat "$TMP/post.json")"
import json, sys, yaml
from jsonschema import Draft202012Validator, RefResolver
spec = yaml.safe_load(open("proto/openapi.yaml"))
d = json.load(open(sys.argv[1]))
Draft202012Validator(spec["components"]["schemas"]["BundleImport"], resolver=RefResolver("", spec)).validate(d)
assert d["present"] == 2 and d["tier_published"] == 2, d
assert [b["tier"] for b in d["builds"]] == ["published"] * 2, d
EOF
else
  echo "note: no python3-yaml/python3-jsonschema: the answer is not checked against proto/openapi.yaml" >&2
fi

# ---- 3. exact errors --------------------------------------------------------------------------------
check "push with a compile token" "$(push "$P1" "$USER" "$TMP/rel.tlb")" 3
has "$TMP/push" "tlclient: bundle push: POST http://127.0.0.1:$P1/v1/bundles: the token lacks the 'admin' scope" "a compile token"
check "push without a token" "$(push "$P1" "" "$TMP/rel.tlb")" 3
has "$TMP/push" "tlclient: bundle push: POST http://127.0.0.1:$P1/v1/bundles: " "no token"
grep -qi "token" "$TMP/push" && ok || bad "no token: $(cat "$TMP/push")"
before=$(metric "$P1" 'tlserverd_requests_total{route="bundles",code="200"}')
SIZE=$(wc -c <"$TMP/rel.tlb")
python3 - "$TMP/rel.tlb" "$TMP/flip.tlb" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read()); b[24 + 48 + 100] ^= 1
open(sys.argv[2], "wb").write(b)
EOF
check "push of a damaged bundle" "$(push "$P1" "$ADMIN" "$TMP/flip.tlb")" 1
has "$TMP/push" "tlclient: bundle push: $TMP/flip.tlb: entry 0 (artifact) at byte 24: its bytes do not match its SHA-256 (damaged)" "a damaged bundle"
head -c $((SIZE - 100)) "$TMP/rel.tlb" >"$TMP/trunc.tlb"
check "push of a truncated bundle" "$(push "$P1" "$ADMIN" "$TMP/trunc.tlb")" 1
has "$TMP/push" "tlclient: bundle push: $TMP/trunc.tlb: truncated: $((SIZE - 100)) bytes, its header says $SIZE" "a truncated bundle"
check "push of a program" "$(push "$P1" "$ADMIN" examples/gemm.json)" 1
has "$TMP/push" 'tlclient: bundle push: examples/gemm.json: not a bundle (it does not start with "TLBUNDLE")' "not a bundle"
check "push of a missing file" "$(push "$P1" "$ADMIN" "$TMP/none.tlb")" 1
has "$TMP/push" "tlclient: bundle push: $TMP/none.tlb: cannot open: No such file or directory" "a missing file"
check "nothing of the bad pushes reached r1" "$(metric "$P1" 'tlserverd_requests_total{route="bundles",code="200"}')" "$before"
"$CLIENT" bundle push >"$TMP/push" 2>&1
check "push without a FILE" $? 2
has "$TMP/push" "'bundle push' needs a FILE" "push without a FILE"

# ---- 4. Redis down, then back -----------------------------------------------------------------------
kill "$REDIS"
wait "$REDIS" 2>/dev/null
server r4 $TIER
P4=$PORT
check "push with Redis down" "$(push "$P4" "$ADMIN" "$TMP/rel.tlb")" 1
has "$TMP/push" "2 stored, 0 present, 0 refused, 2 requests, 0 published to the shared tier" "Redis down: stored"
has "$TMP/push" "is in the server's cache but not in its tier: Redis failed" "Redis down: says which"
redis || bad "redis did not restart"
check "Redis restarted empty" "$($RC dbsize)" 0
sleep 1.2 # past the second a failed primary is left alone
check "push again, Redis back" "$(push "$P4" "$ADMIN" "$TMP/rel.tlb")" 0
has "$TMP/push" "0 stored, 2 present, 0 refused, 2 requests, 2 published to the shared tier" "Redis back: published"
for k in $KEYS; do check "tl:b: of $k after Redis came back" "$($RC exists "tl:b:$k")" 1; done

finish
