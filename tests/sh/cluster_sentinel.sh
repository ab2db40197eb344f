#!/bin/sh
# tests/sh/cluster_sentinel.sh - the shared tier follows a Redis Sentinel
# failover (tlserverd --tier redis-sentinel://HOST:PORT/NAME; README
# "Clusters").  Real processes on loopback: a Redis primary, its replica,
# one Sentinel watching them, one tlserverd.
#
#  1. a compile through the server lands in the primary (and, replicated,
#     in the replica)
#  2. kill -9 of the primary: until the Sentinel promotes the replica the
#     server answers from its cache and compiles locally; after it, a new
#     compile lands in the promoted replica, and a build written before the
#     failover is read from it by a second server with an empty cache
#
# Exit status: 0 pass, 1 fail, 77 skipped (redis-server cannot start, no
# NVRTC, no curl or redis-cli).

cd "$(dirname "$0")/../.." || exit 1
NAME=cluster_sentinel.sh
. tests/sh/lib/cluster.sh

PA=$(free_port)
PB=$(free_port)
PS=$(free_port)
redis-server --port "$PA" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
  --logfile "$TMP/a.log" </dev/null >/dev/null 2>&1 &
A=$!
PIDS="$PIDS $A"
redis-server --port "$PB" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
  --logfile "$TMP/b.log" --replicaof 127.0.0.1 "$PA" </dev/null >/dev/null 2>&1 &
PIDS="$PIDS $!"
printf '%s\n' "port $PS" "bind 127.0.0.1" "sentinel monitor tl 127.0.0.1 $PA 1" \
  "sentinel down-after-milliseconds tl 500" "sentinel failover-timeout tl 3000" >"$TMP/sentinel.conf"
redis-server "$TMP/sentinel.conf" --sentinel --logfile "$TMP/s.log" </dev/null >/dev/null 2>&1 &
PIDS="$PIDS $!"
if ! until_ok 10 redis-cli -p "$PA" ping || ! until_ok 10 redis-cli -p "$PS" ping; then
  tail -n 5 "$TMP/a.log" "$TMP/s.log" >&2
  echo "cluster_sentinel.sh: skipped: redis-server cannot start here" >&2
  exit 77
fi
until_ok 10 sh -c "redis-cli -p $PB info replication | grep -q 'master_link_status:up'" ||
  bad "the replica did not sync"

SENT="--tier redis-sentinel://127.0.0.1:$PS/tl --tier-timeout 0.3"
server s1 $SENT
P1=$PORT
body before
check "compile before the failover" "$(post "$P1" before)" 200
check "in the primary" "$(redis-cli -p "$PA" exists "tl:b:$(key before)")" 1
until_ok 5 sh -c "[ \$(redis-cli -p $PB exists tl:b:$(key before)) = 1 ]" && ok || bad "not replicated"

# the Sentinel learns of the replica from the primary's INFO, which it asks
# for every 10 s: killed before that, the primary has no replica to promote
until_ok 15 sh -c "redis-cli -p $PS sentinel replicas tl | grep -qx $PB" ||
  bad "the Sentinel does not know the replica: $(tail -n 5 "$TMP/s.log")"
kill -9 "$A"
body during
check "compile while the primary is gone" "$(post "$P1" during)" 200
until_ok 20 sh -c "redis-cli -p $PS sentinel get-master-addr-by-name tl | grep -qx $PB" ||
  bad "the Sentinel did not promote the replica: $(tail -n 5 "$TMP/s.log")"
until_ok 10 sh -c "redis-cli -p $PB role | head -n 1 | grep -qx master" || bad "the replica is no primary"
sleep 1.2 # past the second a failed primary is left alone
body after
check "compile after the failover" "$(post "$P1" after)" 200
until_ok 5 sh -c "[ \$(redis-cli -p $PB exists tl:b:$(key after)) = 1 ]" && ok ||
  bad "the build after the failover is not in the new primary: $(curl -s "http://127.0.0.1:$P1/readyz")"
server s2 $SENT
check "a second server reads the old build" "$(post "$PORT" before)" 200
check "from the new primary" "$(cached before)" true

finish
