#!/bin/sh
# tests/sh/cluster_sentinel_auth.sh - the shared tier behind a Redis
# Sentinel when both ask for passwords (tlserverd --tier-auth-file and
# --tier-sentinel-auth-file; README "Clusters").  Real processes on
# loopback: a primary and its replica with requirepass (and masterauth), a
# Sentinel with its own requirepass that knows the primary's (auth-pass),
# tlserverd replicas.
#
#  1. with both password files (the primary's as "default PASSWORD", the
#     Sentinel's as "PASSWORD"): a compile lands in the primary, /readyz
#     says the tier is up
#  2. a password missing or wrong: the server still compiles (locally) and
#     /readyz says why the tier is down, in Redis's words with the flag to
#     use (NOAUTH for the Sentinel and the primary, WRONGPASS), never the
#     password itself
#  3. refused at start, saying why: a password file others may read (chmod
#     600), one that is not one line, a URL with a password in it (not
#     echoed), an auth file without --tier
#  4. kill -9 of the primary: the Sentinel promotes the replica; a compile
#     after it lands in the promoted one (AUTH on the new primary), and a
#     second server with an empty cache reads the build written before
#
# Exit status: 0 pass, 1 fail, 77 skipped (redis-server cannot start, no
# NVRTC, no curl or redis-cli).

cd "$(dirname "$0")/../.." || exit 1
NAME=cluster_sentinel_auth.sh
. tests/sh/lib/cluster.sh

PW=primary-secret-0123456789
SPW=sentinel-secret-9876543210
PA=$(free_port)
PB=$(free_port)
PS=$(free_port)
for p in $PA $PB; do
  extra=
  [ "$p" = "$PB" ] && extra="--replicaof 127.0.0.1 $PA"
  redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" --logfile "$TMP/$p.log" \
    --requirepass "$PW" --masterauth "$PW" $extra </dev/null >/dev/null 2>&1 &
  PIDS="$PIDS $!"
  [ "$p" = "$PA" ] && A=$!
done
printf '%s\n' "port $PS" "bind 127.0.0.1" "requirepass $SPW" "sentinel monitor tl 127.0.0.1 $PA 1" \
  "sentinel auth-pass tl $PW" "sentinel down-after-milliseconds tl 500" "sentinel failover-timeout tl 3000" \
  >"$TMP/sentinel.conf"
redis-server "$TMP/sentinel.conf" --sentinel --logfile "$TMP/s.log" </dev/null >/dev/null 2>&1 &
PIDS="$PIDS $!"
RA="redis-cli --no-auth-warning -a $PW -p $PA"
RB="redis-cli --no-auth-warning -a $PW -p $PB"
RS="redis-cli --no-auth-warning -a $SPW -p $PS"
if ! until_ok 10 $RA ping || ! until_ok 10 $RS ping; then
  tail -n 5 "$TMP/$PA.log" "$TMP/s.log" >&2
  echo "$NAME: skipped: redis-server cannot start here" >&2
  exit 77
fi
until_ok 10 sh -c "$RB info replication | grep -q 'master_link_status:up'" || bad "the replica did not sync"
check "the primary wants its password" "$(redis-cli -p "$PA" get x 2>&1 | cut -c1-6)" NOAUTH

printf 'default %s\n' "$PW" >"$TMP/primary.pw"
printf '%s\n' "$SPW" >"$TMP/sentinel.pw"
echo wrong-password-000 >"$TMP/wrong.pw"
chmod 600 "$TMP/primary.pw" "$TMP/sentinel.pw" "$TMP/wrong.pw"
SENT="redis-sentinel://127.0.0.1:$PS/tl"
TIER="--tier $SENT --tier-timeout 0.3"

tier_error() { # tier_error PORT: the tier's state and its primary's last error, from /readyz
  curl -s "http://127.0.0.1:$1/readyz" | python3 -c '
import json, sys
t = json.load(sys.stdin)["tier"]
print(t["state"], t["primaries"][0].get("error", ""))'
}

# ---- 1. both passwords -------------------------------------------------------------------------
server s1 $TIER --tier-auth-file "$TMP/primary.pw" --tier-sentinel-auth-file "$TMP/sentinel.pw"
P1=$PORT
body before
check "compile through the Sentinel with passwords" "$(post "$P1" before)" 200
check "in the primary" "$($RA exists "tl:b:$(key before)")" 1
until_ok 5 sh -c "curl -s http://127.0.0.1:$P1/readyz | grep -q '\"state\": \"up\"'" && ok ||
  bad "the tier is not up: $(tier_error "$P1")"

# ---- 2. a password missing or wrong: degraded, saying why ---------------------------------------
wait_error() { # wait_error PORT TEXT WHAT: /readyz's tier error comes to hold TEXT
  until_ok 10 sh -c "curl -s http://127.0.0.1:$1/readyz | grep -qF -- '$2'" && ok ||
    bad "$3: /readyz says: $(tier_error "$1")"
}
body degraded
server nosent $TIER --tier-auth-file "$TMP/primary.pw"
check "no Sentinel password: still compiles" "$(post "$PORT" degraded)" 200
wait_error "$PORT" "refused: NOAUTH" "no Sentinel password"
wait_error "$PORT" "(it wants a password: --tier-sentinel-auth-file)" "no Sentinel password names the flag"
check "no Sentinel password: down" "$(tier_error "$PORT" | cut -d' ' -f1)" down
server noprim $TIER --tier-sentinel-auth-file "$TMP/sentinel.pw"
check "no primary password: still compiles" "$(post "$PORT" degraded)" 200
wait_error "$PORT" "NOAUTH" "no primary password"
wait_error "$PORT" "(the primary wants a password: --tier-auth-file)" "no primary password names the flag"
server wrong $TIER --tier-auth-file "$TMP/wrong.pw" --tier-sentinel-auth-file "$TMP/sentinel.pw"
check "a wrong primary password: still compiles" "$(post "$PORT" degraded)" 200
wait_error "$PORT" "auth: the primary at 127.0.0.1:$PA refused the password: WRONGPASS" "a wrong password"
curl -s "http://127.0.0.1:$PORT/readyz" >"$TMP/readyz"
if grep -qF wrong-password-000 "$TMP/readyz" || grep -qF "$SPW" "$TMP/readyz"; then
  bad "/readyz shows a password: $(cat "$TMP/readyz")"
else
  ok
fi
check "degraded compiles left Redis alone" "$($RA exists "tl:b:$(key degraded)")" 0

# ---- 3. refused at start ---------------------------------------------------------------------------
refused() { # refused WHAT TEXT FLAG...: tlserverd does not start, saying TEXT
  what=$1
  text=$2
  shift 2
  timeout 30 "$TL_BUILD/bin/tlserverd" --listen 127.0.0.1:0 --db "$TMP/refused.db" --log-format off "$@" </dev/null \
    >"$TMP/refused.out" 2>&1 && bad "$what: it started" || ok
  has "$TMP/refused.out" "$text" "$what"
}
cp "$TMP/primary.pw" "$TMP/open.pw"
chmod 644 "$TMP/open.pw"
refused "a readable password file" "the --tier-auth-file file '$TMP/open.pw' is open to group or others (mode 0644): its password is a secret; make it private with: chmod 600 '$TMP/open.pw'" \
  --tier "$SENT" --tier-auth-file "$TMP/open.pw"
printf 'a b\nc\n' >"$TMP/two.pw"
chmod 600 "$TMP/two.pw"
refused "a password file of two lines" "--tier-sentinel-auth-file '$TMP/two.pw': it must hold one line of 1 to 512 printable bytes, PASSWORD or USER PASSWORD" \
  --tier "$SENT" --tier-sentinel-auth-file "$TMP/two.pw"
refused "a password in the URL" "--tier: a URL with user or password (USER:PASSWORD@) is refused" \
  --tier "redis://:hunter2-secret@127.0.0.1:$PA"
grep -qF hunter2-secret "$TMP/refused.out" && bad "the refusal echoes the password" || ok
refused "an auth file without --tier" "--tier-auth-file needs --tier" --tier-auth-file "$TMP/primary.pw"
refused "a Sentinel auth file without a Sentinel" "--tier-sentinel-auth-file: no --tier is a redis-sentinel:// URL" \
  --tier "redis://127.0.0.1:$PA" --tier-sentinel-auth-file "$TMP/sentinel.pw"

# ---- 4. a failover with passwords ------------------------------------------------------------------
until_ok 5 sh -c "[ \$($RB exists tl:b:$(key before)) = 1 ]" && ok || bad "not replicated"
until_ok 15 sh -c "$RS sentinel replicas tl | grep -qx $PB" ||
  bad "the Sentinel does not know the replica: $(tail -n 5 "$TMP/s.log")"
kill -9 "$A"
until_ok 20 sh -c "$RS sentinel get-master-addr-by-name tl | grep -qx $PB" ||
  bad "the Sentinel did not promote the replica: $(tail -n 5 "$TMP/s.log")"
until_ok 10 sh -c "$RB role | head -n 1 | grep -qx master" || bad "the replica is no primary"
sleep 1.2 # past the second a failed primary is left alone
body after
check "compile after the failover" "$(post "$P1" after)" 200
until_ok 5 sh -c "[ \$($RB exists tl:b:$(key after)) = 1 ]" && ok ||
  bad "the build after the failover is not in the new primary: $(tier_error "$P1")"
server s2 $TIER --tier-auth-file "$TMP/primary.pw" --tier-sentinel-auth-file "$TMP/sentinel.pw"
check "a second server reads the old build" "$(post "$PORT" before)" 200
check "from the new primary" "$(cached before)" true

finish
