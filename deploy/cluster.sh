#!/bin/bash
# cluster.sh - a cluster of tlserverd replicas sharing one Redis tier, on
# loopback, for a demo and for tests/sh/cluster.sh (README "Clusters").
#
#   deploy/cluster.sh start DIR [--replicas N] [--haproxy] [--no-tier] [-- TLSERVERD_FLAG...]
#   deploy/cluster.sh add-replica DIR [-- TLSERVERD_FLAG...]
#   deploy/cluster.sh redis-start DIR      (again, on its old port)
#   deploy/cluster.sh stop DIR
#
# start: a redis-server on a free loopback port (no persistence; maxmemory
# 256mb with allkeys-lru, so Redis evicts least recently used entries
# rather than refusing writes), N replicas (default 3), each with its own
# SQLite cache DIR/rK/cache.db and --tier redis://127.0.0.1:PORT, and with
# --haproxy one haproxy in front of them (round robin, health checks on
# /readyz every second).  The flags after -- go to every replica.
# --no-tier starts no Redis and the replicas without --tier (each on its
# own cache: what the tier is compared with in bench/cluster.md).
# add-replica starts one more (with this shell's environment: the tests
# start a replica with a test hook this way).  Everything runs in the
# background; DIR/cluster.env says where (sourced by the tests):
#   REDIS_PORT REDIS_PID REPLICAS R1_PORT R1_PID ... SERVERS (the replicas'
#   URLs, comma-separated, for tlclient --server) HAPROXY_PORT HAPROXY_PID
# and DIR/*.log hold each process's log.  stop kills everything listed.
#
# No passwords: everything listens on 127.0.0.1 for a demo and the tests
# (Redis with a password: README "Clusters", the units and deploy/k8s).
#
# How this file was checked: tests/sh/cluster.sh runs it (start,
# add-replica, redis-start, stop, --haproxy) with a real redis-server,
# tlserverd and haproxy; the haproxy configuration it
# writes is checked with `haproxy -c` before haproxy starts; and it was run
# from a fresh `git clone` after `make` (README "Clusters").
#
# Exit status: 0 done, 1 a process did not start (its log is printed), 2 usage.

set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TLSERVERD=${TLSERVERD:-$ROOT/${TL_BUILD:-build}/bin/tlserverd}
REDIS_SERVER=${REDIS_SERVER:-redis-server}

usage() { sed -n '4,8p' "$0" | sed 's/^# //' >&2; exit 2; }
REDIS_PORT=
die() { echo "cluster.sh: $*" >&2; exit 1; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_for WHAT SECONDS COMMAND...: polls COMMAND every 50 ms
wait_for() {
  what=$1 secs=$2
  shift 2
  for _ in $(seq 1 $((secs * 20))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  return 1
}

setenv() { # setenv NAME VALUE: records NAME=VALUE in cluster.env
  grep -v "^$1=" "$DIR/cluster.env" >"$DIR/cluster.env.tmp" 2>/dev/null
  echo "$1=$2" >>"$DIR/cluster.env.tmp"
  mv "$DIR/cluster.env.tmp" "$DIR/cluster.env"
}

redis_start() {
  "$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --maxmemory 256mb --maxmemory-policy allkeys-lru --dir "$DIR" \
    --logfile "$DIR/redis.log" --daemonize no </dev/null >/dev/null 2>&1 &
  REDIS_PID=$!
  setenv REDIS_PID $REDIS_PID
  if ! wait_for redis 10 redis-cli -p "$REDIS_PORT" ping; then
    tail -n 20 "$DIR/redis.log" >&2
    die "redis-server did not start on port $REDIS_PORT"
  fi
}

# replica_start K FLAGS...: starts replica K
replica_start() {
  k=$1
  shift
  mkdir -p "$DIR/r$k"
  rm -f "$DIR/r$k.port"
  [ -n "${REDIS_PORT:-}" ] && set -- --tier "redis://127.0.0.1:$REDIS_PORT" "$@"
  "$TLSERVERD" --listen 127.0.0.1:0 --port-file "$DIR/r$k.port" --db "$DIR/r$k/cache.db" \
    "$@" </dev/null 2>>"$DIR/r$k.log" &
  pid=$!
  if ! wait_for replica 30 test -s "$DIR/r$k.port"; then
    tail -n 20 "$DIR/r$k.log" >&2
    die "replica $k did not start"
  fi
  setenv "R${k}_PORT" "$(cat "$DIR/r$k.port")"
  setenv "R${k}_PID" $pid
}

servers_env() {
  . "$DIR/cluster.env"
  s=
  for k in $(seq 1 "$REPLICAS"); do
    eval "p=\$R${k}_PORT"
    s="$s${s:+,}http://127.0.0.1:$p"
  done
  setenv SERVERS "$s"
}

haproxy_start() {
  command -v haproxy >/dev/null || die "no haproxy (apt-get install haproxy)"
  . "$DIR/cluster.env"
  HAPROXY_PORT=$(free_port)
  {
    echo "global"
    echo "  maxconn 4096"
    echo "defaults"
    echo "  mode http"
    echo "  timeout connect 2s"
    echo "  timeout client 300s"
    echo "  timeout server 300s"
    echo "  retries 2"
    echo "  option redispatch"
    echo "frontend tl"
    echo "  bind 127.0.0.1:$HAPROXY_PORT"
    echo "  default_backend replicas"
    echo "backend replicas"
    echo "  balance roundrobin"
    echo "  option httpchk GET /readyz"
    echo "  http-check expect status 200"
    for k in $(seq 1 "$REPLICAS"); do
      eval "p=\$R${k}_PORT"
      echo "  server r$k 127.0.0.1:$p check inter 1s fall 2 rise 1"
    done
  } >"$DIR/haproxy.cfg"
  haproxy -c -q -f "$DIR/haproxy.cfg" >>"$DIR/haproxy.log" 2>&1 ||
    { tail -n 20 "$DIR/haproxy.log" >&2; die "haproxy -c refused $DIR/haproxy.cfg"; }
  haproxy -db -f "$DIR/haproxy.cfg" </dev/null >>"$DIR/haproxy.log" 2>&1 &
  setenv HAPROXY_PID $!
  setenv HAPROXY_PORT "$HAPROXY_PORT"
  wait_for haproxy 10 curl -sf "http://127.0.0.1:$HAPROXY_PORT/healthz" ||
    { tail -n 20 "$DIR/haproxy.log" >&2; die "haproxy did not start"; }
}

cmd=${1:-}
DIR=${2:-}
[ -n "$cmd" ] && [ -n "$DIR" ] || usage
shift 2
case $cmd in
start)
  n=3 proxy=0 tier=1
  while [ $# -gt 0 ]; do
    case $1 in
    --replicas) n=$2; shift 2 ;;
    --haproxy) proxy=1; shift ;;
    --no-tier) tier=0; shift ;;
    --) shift; break ;;
    *) usage ;;
    esac
  done
  case $n in ''|*[!0-9]*|0) die "--replicas: a number from 1" ;; esac
  [ -x "$TLSERVERD" ] || die "$TLSERVERD is not built (run make)"
  mkdir -p "$DIR" || exit 1
  : >"$DIR/cluster.env"
  REDIS_PORT=
  if [ $tier = 1 ]; then
    command -v "$REDIS_SERVER" >/dev/null || die "no redis-server (apt-get install redis-server)"
    REDIS_PORT=$(free_port)
    setenv REDIS_PORT "$REDIS_PORT"
    redis_start
  fi
  for k in $(seq 1 "$n"); do replica_start "$k" "$@"; done
  setenv REPLICAS "$n"
  servers_env
  [ $proxy = 1 ] && haproxy_start
  cat "$DIR/cluster.env"
  ;;
add-replica)
  [ "${1:-}" = -- ] && shift
  . "$DIR/cluster.env"
  k=$((REPLICAS + 1))
  replica_start "$k" "$@"
  setenv REPLICAS "$k"
  servers_env
  echo "R${k}_PORT=$(cat "$DIR/r$k.port")"
  ;;
redis-start)
  . "$DIR/cluster.env"
  redis_start
  ;;
stop)
  [ -f "$DIR/cluster.env" ] || exit 0
  . "$DIR/cluster.env"
  for v in $(sed -n 's/^\(.*_PID\)=.*/\1/p' "$DIR/cluster.env"); do
    eval "p=\$$v"
    kill "$p" 2>/dev/null
  done
  for v in $(sed -n 's/^\(.*_PID\)=.*/\1/p' "$DIR/cluster.env"); do
    eval "p=\$$v"
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$p" 2>/dev/null || :
  done
  ;;
*) usage ;;
esac
