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
. tests/sh/lib.sh
tl_init cluster_sentinel.sh
tl_need curl redis-server redis-cli python3
tl_need_nvrtc "the server cannot compile"

PA=$(tl_free_port)
PB=$(tl_free_port)
PS=$(tl_free_port)
redis-server --port "$PA" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
  --logfile "$TMP/a.log" </dev/null >/dev/null 2>&1 &
A=$!
tl_track "$A"
redis-server --port "$PB" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
  --logfile "$TMP/b.log" --replicaof 127.0.0.1 "$PA" </dev/null >/dev/null 2>&1 &
tl_track $!
printf '%s\n' "port $PS" "bind 127.0.0.1" "sentinel monitor tl 127.0.0.1 $PA 1" \
  "sentinel down-after-milliseconds tl 500" "sentinel failover-timeout tl 3000" >"$TMP/sentinel.conf"
redis-server "$TMP/sentinel.conf" --sentinel --logfile "$TMP/s.log" </dev/null >/dev/null 2>&1 &
tl_track $!
if ! tl_until 10 redis-cli -p "$PA" ping || ! tl_until 10 redis-cli -p "$PS" ping; then
  tail -n 5 "$TMP/a.log" "$TMP/s.log" >&2
  tl_skip "redis-server cannot start here"
fi
tl_until 10 sh -c "redis-cli -p $PB info replication | grep -q 'master_link_status:up'" ||
  bad "the replica did not sync"

# server NAME: a tlserverd on the Sentinel's primary; sets PORT
server() {
  tl_server "$1" --workers 1 --log-format off --tier "redis-sentinel://127.0.0.1:$PS/tl" --tier-timeout 0.3
}
body() { # body NAME: a compile request (tilus_add_one renamed NAME, for sm_80) in $TMP/NAME.req
  python3 -c "import json,sys; p=json.load(open('examples/tilus_add_one.json')); p['name']=sys.argv[1]; print(json.dumps({'program': p, 'targets': ['sm_80']}))" "$1" >"$TMP/$1.req"
}
post() { # post PORT NAME: compiles NAME; prints the HTTP status, the answer in $TMP/NAME.json
  curl -s -o "$TMP/$2.json" -w '%{http_code}' -XPOST -H 'Content-Type: application/json' \
    --data-binary "@$TMP/$2.req" "http://127.0.0.1:$1/v1/compile"
}
key() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][0]['key'])" "$TMP/$1.json"; }
cached() { python3 -c "import json,sys; print(str(json.load(open(sys.argv[1]))['results'][0]['cached']).lower())" "$TMP/$1.json"; }

server s1
P1=$PORT
body before
check "compile before the failover" "$(post "$P1" before)" 200
check "in the primary" "$(redis-cli -p "$PA" exists "tl:b:$(key before)")" 1
tl_until 5 sh -c "[ \$(redis-cli -p $PB exists tl:b:$(key before)) = 1 ]" && ok || bad "not replicated"

# the Sentinel learns of the replica from the primary's INFO, which it asks
# for every 10 s: killed before that, the primary has no replica to promote
tl_until 15 sh -c "redis-cli -p $PS sentinel replicas tl | grep -qx $PB" ||
  bad "the Sentinel does not know the replica: $(tail -n 5 "$TMP/s.log")"
kill -9 "$A"
body during
check "compile while the primary is gone" "$(post "$P1" during)" 200
tl_until 20 sh -c "redis-cli -p $PS sentinel get-master-addr-by-name tl | grep -qx $PB" ||
  bad "the Sentinel did not promote the replica: $(tail -n 5 "$TMP/s.log")"
tl_until 10 sh -c "redis-cli -p $PB role | head -n 1 | grep -qx master" || bad "the replica is no primary"
sleep 1.2 # past the second a failed primary is left alone
body after
check "compile after the failover" "$(post "$P1" after)" 200
tl_until 5 sh -c "[ \$(redis-cli -p $PB exists tl:b:$(key after)) = 1 ]" && ok ||
  bad "the build after the failover is not in the new primary: $(curl -s "http://127.0.0.1:$P1/readyz")"
server s2
check "a second server reads the old build" "$(post "$PORT" before)" 200
check "from the new primary" "$(cached before)" true

tl_done
