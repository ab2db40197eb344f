#!/bin/sh
# tests/sh/cluster.sh - the shared tier on Redis and single-flight across
# replicas (README "Clusters"), with real processes on loopback: a
# redis-server and tlserverd replicas started by deploy/cluster.sh, driven
# with curl, redis-cli and tlclient.
#
#  1. a build compiled through one replica is a hit on the others (from the
#     tier: no compile there), and stored in their local caches
#  2. 30 identical cold requests spread over the three replicas make
#     exactly one compile in the cluster (summed from /metrics); the
#     other replicas get the same artifact from the tier
#  3. an entry corrupted in Redis is detected by a replica that reads it,
#     deleted there and rebuilt (same artifact), and never served
#  4. limits: an entry over --tier-max-entry stays local (counted); the
#     entries carry --tier-ttl; Redis's maxmemory eviction (allkeys-lru)
#     drops entries and a replica lacking one compiles it again
#  5. kill -9 of a replica holding a lease (its compile hangs, test hook):
#     another replica takes the lease over once it expires, and every
#     client (tlclient --server with the replicas' list) gets its build;
#     a replica waiting for a lease stops at SIGTERM within its grace
#  6. Redis slow (SIGSTOP): answers come within the tier time-outs;
#     Redis killed: every replica answers from its cache and compiles
#     locally, /readyz says "down" (still 200) and /metrics counts the
#     errors; Redis restarted: the replicas use it again
#  7. two primaries (--tier twice): the builds spread over both, each
#     on one
#  8. haproxy in front of two replicas (deploy/cluster.sh --haproxy):
#     compiles go through it, also after one replica died (health checks
#     on /readyz)
#
# Exit status: 0 pass, 1 fail, 77 skipped (redis-server cannot start, no
# NVRTC, no curl or redis-cli).

cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
CLIENT=$TL_BUILD/bin/tlclient
tl_init cluster.sh
tl_need curl redis-server redis-cli python3
tl_need_nvrtc "the replicas cannot compile"
D=$TMP/cluster
ORPHANS=
tl_at_exit() {
  TL_BUILD=$TL_BUILD deploy/cluster.sh stop "$D"
  for p in $ORPHANS; do kill -9 "$p" 2>/dev/null; done
}

if ! TL_BUILD=$TL_BUILD deploy/cluster.sh start "$D" -- --workers 2 --log-format off --tier-lease 5 \
  --tier-timeout 1 --tier-ttl 3600 --test-hooks >"$TMP/start.log" 2>&1; then
  if grep -q "redis-server did not start" "$TMP/start.log"; then
    tail -n 5 "$TMP/start.log" >&2
    tl_skip "redis-server cannot start here"
  fi
  cat "$TMP/start.log" >&2
  tl_fail "the cluster did not start"
fi
. "$D/cluster.env"
RC="redis-cli -p $REDIS_PORT"

# body NAME [BLOCK_N]: a compile request of examples/tilus_add_one.json renamed NAME, for sm_80
body() {
  python3 - "$1" "${2:-128}" >"$TMP/$1.req" <<'EOF'
import json, sys
p = json.load(open("examples/tilus_add_one.json"))
p["name"] = sys.argv[1]
print(json.dumps({"program": p, "targets": ["sm_80"], "constants": {"block_n": int(sys.argv[2])}}))
EOF
  echo "$TMP/$1.req"
}
# post PORT REQ OUT: POST /v1/compile; prints the HTTP status
post() {
  curl -s -o "$3" -w '%{http_code}' -XPOST -H 'Content-Type: application/json' --data-binary "@$2" \
    "http://127.0.0.1:$1/v1/compile"
}
field() { # field FILE NAME: a string or boolean field of the first result
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results'][0]; print(str(r.get(sys.argv[2])).lower())" "$1" "$2" 2>/dev/null
}
metric() { # metric PORT SERIES: its value (0 when absent)
  curl -s "http://127.0.0.1:$1/metrics" | awk -v s="$2" '$1 == s { v = $2 } END { print v + 0 }'
}
sum_metric() { # sum_metric SERIES PORT...
  s=$1
  shift
  t=0
  for p in "$@"; do t=$((t + $(metric "$p" "$s"))); done
  echo $t
}
OKC='tlserverd_compiles_total{outcome="ok"}'
P3="$R1_PORT $R2_PORT $R3_PORT"

# ---- 1. one compile, hits elsewhere ------------------------------------------------------------
REQ=$(body first)
check "compile on r1" "$(post "$R1_PORT" "$REQ" "$TMP/a1.json")" 200
check "r1 compiled it" "$(field "$TMP/a1.json" cached)" false
KEY=$(field "$TMP/a1.json" key)
ART=$(field "$TMP/a1.json" artifact)
check "the entry is in Redis" "$($RC exists "tl:b:$KEY")" 1
for p in $R2_PORT $R3_PORT; do
  check "hit on $p" "$(post "$p" "$REQ" "$TMP/a2.json")" 200
  check "cached on $p" "$(field "$TMP/a2.json" cached)" true
  check "same artifact on $p" "$(field "$TMP/a2.json" artifact)" "$ART"
  check "tier hit on $p" "$(metric "$p" tlserverd_tier_hits_total)" 1
  check "no compile on $p" "$(metric "$p" "$OKC")" 0
  check "artifact from $p's local cache" \
    "$(curl -s "http://127.0.0.1:$p/v1/artifacts/$ART" | sha256sum | cut -c1-64)" "$ART"
done
# fetches by id or key on a replica that never compiled it: from the tier
REQ=$(body fetched)
post "$R1_PORT" "$REQ" "$TMP/f1.json" >/dev/null
FKEY=$(field "$TMP/f1.json" key)
FART=$(field "$TMP/f1.json" artifact)
check "GET the artifact from r2 (the tier)" \
  "$(curl -s "http://127.0.0.1:$R2_PORT/v1/artifacts/$FART" | sha256sum | cut -c1-64)" "$FART"
check "GET the kernel from r3 (the tier)" \
  "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$R3_PORT/v1/kernels/$FKEY")" 200
check "r3 keeps it" "$(post "$R3_PORT" "$REQ" "$TMP/f3.json")$(field "$TMP/f3.json" cached)" 200true
check "an unknown artifact is still a 404" \
  "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$R2_PORT/v1/artifacts/$(echo x | sha256sum | cut -c1-64)")" 404
ttl=$($RC pttl "tl:b:$KEY")
[ "$ttl" -gt 3500000 ] && [ "$ttl" -le 3600000 ] && ok || bad "the entry's TTL is $ttl ms, not --tier-ttl 3600"

# ---- 2. 30 identical cold requests over three replicas: one compile --------------------------
before=$(sum_metric "$OKC" $P3)
hits_before=$(sum_metric tlserverd_tier_hits_total $P3)
REQ=$(body thirty 256)
i=0
for p in $P3 $P3 $P3 $P3 $P3 $P3 $P3 $P3 $P3 $P3; do
  i=$((i + 1))
  post "$p" "$REQ" "$TMP/t$i.json" >"$TMP/t$i.code" &
done
wait
codes=$(for f in "$TMP"/t*.code; do cat "$f"; echo; done | sort | uniq -c | tr -s ' ')
check "30 answers" "$codes" " 30 200"
arts=$(for i in $(seq 1 30); do field "$TMP/t$i.json" artifact; done | sort -u | wc -l)
check "one artifact for 30 requests" "$arts" 1
check "one compile in the cluster for 30 requests" $(($(sum_metric "$OKC" $P3) - before)) 1
# the two replicas that did not compile got it from the tier (having waited for the lease,
# or after the build landed: which one depends on timing; section 5 waits for sure)
hits=$(($(sum_metric tlserverd_tier_hits_total $P3) - hits_before))
[ "$hits" -ge 2 ] && ok || bad "only $hits tier hits for the replicas that did not compile"

# ---- 3. a corrupted entry is detected, deleted and rebuilt ------------------------------------
REQ=$(body corrupt)
check "compile on r1" "$(post "$R1_PORT" "$REQ" "$TMP/c1.json")" 200
KEY=$(field "$TMP/c1.json" key)
ART=$(field "$TMP/c1.json" artifact)
len=$($RC strlen "tl:b:$KEY")
off=$((len - 100))
old=$($RC getrange "tl:b:$KEY" $off $off)
new=X
[ "$old" = X ] && new=Y
$RC setrange "tl:b:$KEY" $off "$new" >/dev/null
c2=$(metric "$R2_PORT" "$OKC")
check "r2 answers" "$(post "$R2_PORT" "$REQ" "$TMP/c2.json")" 200
check "r2 rebuilt it (not served from the bad entry)" "$(field "$TMP/c2.json" cached)" false
check "the rebuilt artifact" "$(field "$TMP/c2.json" artifact)" "$ART"
check "r2 counted the bad entry" "$(metric "$R2_PORT" tlserverd_tier_corrupt_total)" 1
check "r2 compiled" $(($(metric "$R2_PORT" "$OKC") - c2)) 1
check "r3 hits the rebuilt entry" "$(post "$R3_PORT" "$REQ" "$TMP/c3.json")" 200
check "r3 from the tier" "$(field "$TMP/c3.json" cached)" true
check "r3 found nothing bad" "$(metric "$R3_PORT" tlserverd_tier_corrupt_total)" 0
# a truncated entry too
REQ=$(body truncated)
post "$R1_PORT" "$REQ" "$TMP/u1.json" >/dev/null
KEY=$(field "$TMP/u1.json" key)
$RC set "tl:b:$KEY" "$($RC getrange "tl:b:$KEY" 0 300)" >/dev/null
check "a truncated entry is rebuilt" "$(post "$R3_PORT" "$REQ" "$TMP/u3.json")" 200
check "r3 rebuilt it" "$(field "$TMP/u3.json" cached)" false
check "r3 counted it" "$(metric "$R3_PORT" tlserverd_tier_corrupt_total)" 1

# ---- 4. limits: entry size, eviction --------------------------------------------------------
TL_BUILD=$TL_BUILD deploy/cluster.sh add-replica "$D" -- --workers 1 --log-format off \
  --tier-max-entry 1K >/dev/null || bad "the fourth replica did not start"
. "$D/cluster.env"
REQ=$(body large)
check "compile on r4" "$(post "$R4_PORT" "$REQ" "$TMP/l4.json")" 200
KEY=$(field "$TMP/l4.json" key)
check "over --tier-max-entry: not in Redis" "$($RC exists "tl:b:$KEY")" 0
check "over --tier-max-entry: counted" "$(metric "$R4_PORT" tlserverd_tier_too_large_total)" 1
check "no lease left behind" "$($RC exists "tl:l:$KEY")" 0
# maxmemory: Redis evicts (allkeys-lru); a replica that lacks an evicted entry compiles it
REQ=$(body evicted)
post "$R1_PORT" "$REQ" "$TMP/e1.json" >/dev/null
KEY=$(field "$TMP/e1.json" key)
used=$($RC info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p')
$RC config set maxmemory $((used + 2000000)) >/dev/null
python3 -c "print('x' * 100000)" >"$TMP/filler"
for i in $(seq 1 60); do $RC -x set "filler:$i" <"$TMP/filler" >/dev/null; done
evicted=$($RC info stats | sed -n 's/^evicted_keys:\([0-9]*\).*/\1/p')
[ "${evicted:-0}" -gt 0 ] && ok || bad "Redis evicted nothing under maxmemory"
check "the entry was evicted" "$($RC exists "tl:b:$KEY")" 0
check "r2 compiles the evicted build" "$(post "$R2_PORT" "$REQ" "$TMP/e2.json")" 200
check "r2 compiled it" "$(field "$TMP/e2.json" cached)" false
$RC config set maxmemory 256mb >/dev/null
$RC del $(seq -f 'filler:%g' 1 60) >/dev/null

# ---- 5. kill -9 of the lease holder -----------------------------------------------------------
TL_TEST_HANG_ON=hangs TL_BUILD=$TL_BUILD deploy/cluster.sh add-replica "$D" -- --workers 1 \
  --log-format off --tier-lease 1 --test-hooks >/dev/null || bad "the fifth replica did not start"
. "$D/cluster.env"
REQ=$(body hangs)
post "$R5_PORT" "$REQ" "$TMP/h5.json" >/dev/null &
i=0
until [ "$($RC --scan --pattern 'tl:l:*' | wc -l)" -ge 1 ] || [ $i -gt 200 ]; do sleep 0.05; i=$((i + 1)); done
check "r5 holds the lease" "$($RC --scan --pattern 'tl:l:*' | wc -l)" 1
sleep 1.5 # past one lease time: r5 renews it while its compile runs
check "r5 renews the lease" "$($RC --scan --pattern 'tl:l:*' | wc -l)" 1
python3 -c "import json; p=json.load(open('examples/tilus_add_one.json')); p['name']='hangs'; json.dump(p, open('$TMP/hangs.json','w'))"
takeovers=$(sum_metric tlserverd_tier_takeovers_total $P3)
for i in 1 2 3 4 5 6; do
  case $i in # three start on r5 (the holder), three on the others; all list every replica
  1|2|3) servers="http://127.0.0.1:$R5_PORT,$SERVERS" ;;
  *) servers=$SERVERS ;;
  esac
  "$CLIENT" --server "$servers" --cache none compile "$TMP/hangs.json" --target sm_80 -D block_n=128 \
    >"$TMP/k$i.out" 2>"$TMP/k$i.err" &
  echo $! >"$TMP/k$i.pid"
done
# a replica waiting for the lease stops at SIGTERM within its grace, not after the wait
TL_BUILD=$TL_BUILD deploy/cluster.sh add-replica "$D" -- --workers 1 --log-format off \
  --shutdown-grace 1 >/dev/null || bad "the sixth replica did not start"
. "$D/cluster.env"
post "$R6_PORT" "$REQ" "$TMP/h6.json" >"$TMP/h6.code" &
H6=$!
i=0
until [ "$(metric "$R6_PORT" tlserverd_tier_lease_waits_total)" = 1 ] || [ $i -gt 100 ]; do
  sleep 0.05
  i=$((i + 1))
done
check "r6 waits for the lease" "$(metric "$R6_PORT" tlserverd_tier_lease_waits_total)" 1
t0=$(date +%s%N)
kill "$R6_PID"
while kill -0 "$R6_PID" 2>/dev/null && [ $((($(date +%s%N) - t0) / 1000000)) -lt 20000 ]; do sleep 0.05; done
ms=$((($(date +%s%N) - t0) / 1000000))
[ $ms -lt 8000 ] && ok || bad "a replica waiting for a lease took $ms ms to stop"
wait $H6
check "its waiting request is told to go elsewhere (not compiled)" "$(cat "$TMP/h6.code")" 503
sleep 1
ORPHANS=$(ps -o pid= --ppid "$R5_PID") # its compile worker, hanging in the hook
kill -9 "$R5_PID"
for i in 1 2 3 4 5 6; do
  if wait "$(cat "$TMP/k$i.pid")"; then ok; else bad "client $i got no build: $(cat "$TMP/k$i.err")"; fi
done
for p in $ORPHANS; do kill -9 "$p" 2>/dev/null; done
got=$(($(sum_metric tlserverd_tier_takeovers_total $P3) - takeovers))
[ "$got" -ge 1 ] && ok || bad "no replica took the dead holder's lease over"
KEY=$(grep -o '[0-9a-f]\{64\}' "$TMP/k4.out" | head -n 1)
[ -n "$KEY" ] && check "the build is in Redis" "$($RC exists "tl:b:$KEY")" 1

# ---- 6. Redis slow, down, back -----------------------------------------------------------------
REQ=$(body slow)
kill -STOP "$REDIS_PID"
t0=$(date +%s%N)
check "r1 answers with Redis stopped" "$(post "$R1_PORT" "$REQ" "$TMP/s1.json")" 200
ms=$((($(date +%s%N) - t0) / 1000000))
kill -CONT "$REDIS_PID"
# a GET, a lease and a publish, each bounded by --tier-timeout 1 (then the primary is
# skipped for a second), plus the compile
[ $ms -lt 10000 ] && ok || bad "with Redis stopped the answer took $ms ms"
errs=$(metric "$R1_PORT" tlserverd_tier_errors_total)
[ "$errs" -ge 1 ] && ok || bad "r1 counted no tier error with Redis stopped"

kill -9 "$REDIS_PID"
sleep 0.2
for p in $P3; do
  check "cached build on $p with Redis down" "$(post "$p" "$(body first)" "$TMP/d.json")" 200
done
c1=$(metric "$R1_PORT" "$OKC")
check "new build on r1 with Redis down" "$(post "$R1_PORT" "$(body down 64)" "$TMP/d1.json")" 200
check "compiled locally" $(($(metric "$R1_PORT" "$OKC") - c1)) 1
sleep 1.2
ready=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$R2_PORT/readyz")
# the tier is not a readiness check: every check still passes, status ready
case $ready in *'"status": "ready"'*'"database": {"ok": true}'*'"tier": {"state": "down"'*' 200') ok ;;
  *) bad "/readyz with Redis down: $ready" ;; esac
check "primaries up with Redis down" "$(metric "$R2_PORT" tlserverd_tier_primaries_up)" 0
check "tlserverd_ready with Redis down" "$(metric "$R2_PORT" tlserverd_ready)" 1

TL_BUILD=$TL_BUILD deploy/cluster.sh redis-start "$D" || bad "Redis did not start again"
. "$D/cluster.env"
for p in "$R1_PORT" "$R3_PORT"; do # r3 must be back on Redis too for its hit below
  i=0
  until curl -s "http://127.0.0.1:$p/readyz" | grep -q '"state": "up"' || [ $i -gt 60 ]; do
    sleep 0.1
    i=$((i + 1))
  done
done
check "r1 uses Redis again" "$(metric "$R1_PORT" tlserverd_tier_primaries_up)" 1
REQ=$(body back 32)
check "compile after the restart" "$(post "$R1_PORT" "$REQ" "$TMP/b1.json")" 200
check "published again" "$($RC exists "tl:b:$(field "$TMP/b1.json" key)")" 1
check "a hit on r3 again" "$(post "$R3_PORT" "$REQ" "$TMP/b3.json")" 200
check "r3 from the tier" "$(field "$TMP/b3.json" cached)" true

# ---- 7. two primaries: keys spread by consistent hashing ----------------------------------------
P2=$(tl_free_port)
redis-server --port "$P2" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
  --logfile "$TMP/redis2.log" </dev/null >/dev/null 2>&1 &
ORPHANS="$ORPHANS $!"
i=0
until redis-cli -p "$P2" ping >/dev/null 2>&1 || [ $i -gt 100 ]; do sleep 0.05; i=$((i + 1)); done
TL_BUILD=$TL_BUILD deploy/cluster.sh add-replica "$D" -- --workers 1 --log-format off \
  --tier "redis://127.0.0.1:$P2" >/dev/null || bad "the replica with two primaries did not start"
. "$D/cluster.env"
eval "PT=\$R${REPLICAS}_PORT"
for i in $(seq 1 12); do
  check "compile $i on two primaries" "$(post "$PT" "$(body "sharded$i" 32)" "$TMP/s.json")" 200
done
k1=$(for i in $(seq 1 12); do post "$PT" "$TMP/sharded$i.req" "$TMP/s.json" >/dev/null; echo "tl:b:$(field "$TMP/s.json" key)"; done)
on1=0 on2=0
for k in $k1; do
  on1=$((on1 + $($RC exists "$k"))); on2=$((on2 + $(redis-cli -p "$P2" exists "$k")))
done
check "every build on one primary" $((on1 + on2)) 12
[ $on1 -gt 0 ] && [ $on2 -gt 0 ] && ok || bad "the builds were not spread: $on1 and $on2"

# ---- 8. haproxy in front (deploy/cluster.sh --haproxy), when installed -------------------------
if command -v haproxy >/dev/null 2>&1; then
  H=$TMP/proxied
  if TL_BUILD=$TL_BUILD deploy/cluster.sh start "$H" --replicas 2 --haproxy -- --workers 1 \
    --log-format off >"$TMP/hstart.log" 2>&1; then
    HP=$(sed -n 's/^HAPROXY_PORT=//p' "$H/cluster.env")
    HR1=$(sed -n 's/^R1_PID=//p' "$H/cluster.env")
    REQ=$(body proxied)
    codes=
    for i in 1 2 3 4; do codes="$codes$(post "$HP" "$REQ" "$TMP/p.json")"; done
    check "four compiles through haproxy" "$codes" 200200200200
    kill -9 "$HR1"
    sleep 2.5 # two failed health checks of /readyz, one second apart
    codes=
    for i in 1 2 3 4; do codes="$codes$(post "$HP" "$(body "proxied$i" 64)" "$TMP/p.json")"; done
    check "four compiles through haproxy with a replica dead" "$codes" 200200200200
  else
    bad "the cluster behind haproxy did not start: $(tail -n 5 "$TMP/hstart.log")"
  fi
  TL_BUILD=$TL_BUILD deploy/cluster.sh stop "$H"
else
  echo "cluster.sh: no haproxy: section 8 not run" >&2
fi

tl_done
