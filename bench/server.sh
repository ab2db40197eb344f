#!/bin/bash
# bench/server.sh - tlserverd's serving speed, side by side with nginx in the
# same run, and the costs behind the worker-process design.
#
#   bench/server.sh [SECONDS]        (default 10 seconds per wrk run)
#
# 1. Cached artifact GET: artifacts of 100 KiB and 1 MiB (random bytes,
#    stored in the cache through libtlcache, exactly as a compile stores
#    them) fetched with wrk from tlserverd, and the same bytes served as
#    static files by nginx on another loopback port.  Both get the same
#    number of processes/threads (the machine's CPU count), no access log,
#    keep-alive connections, and the same wrk command (2 threads, 64
#    connections).  wrk runs on the same machine and takes CPU from both
#    equally.  Reported: requests/s, transfer rate, p50 and p99 latency.
# 2. A cache-hit POST /v1/compile of examples/gemm.json for sm_90a: p50 and
#    p99 latency with one connection (wrk -c1), and throughput with 16.
# 3. Worker start-up versus a warm compile, which decides between a pool of
#    long-lived worker processes and a fork per compile: a fresh process
#    that loads NVRTC, probes its targets and compiles tilus_add_one, timed
#    against further compiles in the same process.
#
# Prints a table; bench/server.md keeps the figures.  Needs wrk and nginx
# (deploy/install-deps.sh installs them) and a built tree (make).

set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
SECS=${1:-10}
B=${TL_BUILD:-build}
NCPU=$(nproc)
for tool in wrk nginx curl; do
  command -v $tool >/dev/null || { echo "server.sh: $tool is missing; run deploy/install-deps.sh" >&2; exit 2; }
done
[ -x "$B/bin/tlserverd" ] || { echo "server.sh: $B/bin/tlserverd is missing; run make" >&2; exit 2; }

WORK=$(mktemp -d)
chmod 755 "$WORK" # nginx's workers (user nobody when started as root) read the files
SRV_PID=
NGX_PID=
cleanup() {
  [ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null && wait "$SRV_PID" 2>/dev/null || true
  [ -n "$NGX_PID" ] && kill "$NGX_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# --- helpers compiled against the project's libraries ------------------------------
cat >"$WORK/put.c" <<'EOF'
/* put DB SIZE OUTFILE: stores SIZE random bytes as an artifact (with a build
 * for it) through libtlcache, writes the same bytes to OUTFILE, prints the id. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tlcache.h"
#include "tl_hash.h"
int main(int argc, char **argv) {
  size_t n = (size_t)atoll(argv[2]);
  unsigned char *b = malloc(n);
  srand((unsigned)n);
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)rand();
  tl_cache *c; tl_error err;
  if (tl_cache_open(argv[1], NULL, &c, &err) != TL_OK) { fprintf(stderr, "%s\n", err.message); return 1; }
  tl_cache_build bd = {0};
  char seed[64]; snprintf(seed, sizeof seed, "bench key %zu", n);
  tl_sha256_hex(seed, strlen(seed), bd.key);
  bd.manifest = "bench"; bd.target = "sm_90a"; bd.metadata = "{}"; bd.compile_ms = 0;
  if (tl_cache_put(c, &bd, b, n, &err) != TL_OK) { fprintf(stderr, "%s\n", err.message); return 1; }
  char id[65]; tl_sha256_hex(b, n, id);
  FILE *f = fopen(argv[3], "wb"); fwrite(b, 1, n, f); fclose(f);
  printf("%s\n", id);
  tl_cache_close(c); free(b); return 0;
}
EOF
cat >"$WORK/cold.c" <<'EOF'
/* cold PROGRAM.json: in a fresh process, times loading the toolchain
 * (tl_compiler_targets: dlopen NVRTC, probe targets) and three compiles of
 * the program for sm_90a under different names (the first pays NVRTC's own
 * first-use costs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tlcompiler.h"
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
int main(int argc, char **argv) {
  FILE *f = fopen(argv[1], "rb"); static char text[1 << 20]; size_t n = fread(text, 1, sizeof text - 1, f); fclose(f); text[n] = 0;
  double t0 = now(); const char *tc; tl_error err;
  if (!tl_compiler_targets(&tc, &err)) { fprintf(stderr, "no toolchain: %s\n", err.message); return 1; }
  double t1 = now(); printf("load+probe %.1f\n", t1 - t0);
  for (int i = 0; i < 3; i++) {
    char *p = strstr(text, "\"name\": \"");
    if (p) p[9] = (char)('a' + i);          /* a different program each time */
    tl_compile_request rq = {.program = text, .program_len = n, .target = "sm_90a"};
    tl_build *b = NULL; tl_diags d = {0}; d.arena = tl_arena_new();
    double s = now();
    if (tl_compile(&rq, &b, &d, &err) != TL_OK) { fprintf(stderr, "compile: %s\n", err.message); return 1; }
    printf("compile%d %.1f\n", i + 1, now() - s);
    tl_build_free(b); tl_arena_free(d.arena);
  }
  return 0;
}
EOF
CFLAGS="-O2 -std=c11 -D_DEFAULT_SOURCE -Icache -Iproto -Icompiler"
cc $CFLAGS -o "$WORK/put" "$WORK/put.c" "$B/lib/libtlcache.a" "$B/lib/libtlproto.a" -lsqlite3 -lcrypto
cc $CFLAGS -o "$WORK/cold" "$WORK/cold.c" "$B/lib/libtlcompiler.a" "$B/lib/libtlproto.a" -ljansson -ldl -lm -lcrypto

# --- the two servers ---------------------------------------------------------------
mkdir -p "$WORK/www/v1/artifacts"
ID100=$("$WORK/put" "$WORK/cache.db" $((100 * 1024)) "$WORK/a100")
ID1M=$("$WORK/put" "$WORK/cache.db" $((1024 * 1024)) "$WORK/a1m")
cp "$WORK/a100" "$WORK/www/v1/artifacts/$ID100"
cp "$WORK/a1m" "$WORK/www/v1/artifacts/$ID1M"
chmod -R a+rX "$WORK/www"

"$B/bin/tlserverd" --listen 127.0.0.1:0 --port-file "$WORK/port" --db "$WORK/cache.db" \
  --log-format off --threads "$NCPU" --workers 1 --max-connections 4096 2>"$WORK/tlserverd.log" &
SRV_PID=$!
for _ in $(seq 1500); do [ -s "$WORK/port" ] && break; sleep 0.02; done
SPORT=$(cat "$WORK/port")
NPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$WORK/nginx.conf" <<EOF
worker_processes $NCPU;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path $WORK/nginx-tmp;
  proxy_temp_path $WORK/nginx-tmp;
  fastcgi_temp_path $WORK/nginx-tmp;
  uwsgi_temp_path $WORK/nginx-tmp;
  scgi_temp_path $WORK/nginx-tmp;
  types { }
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$NPORT;
    root $WORK/www;
    etag on;
  }
}
EOF
mkdir -p "$WORK/nginx-tmp"
nginx -c "$WORK/nginx.conf" -p "$WORK" &
NGX_PID=$!
for _ in $(seq 500); do curl -sf -o /dev/null "http://127.0.0.1:$NPORT/v1/artifacts/$ID100" && break; sleep 0.02; done

# both serve the same bytes
for id in $ID100 $ID1M; do
  a=$(curl -s "http://127.0.0.1:$SPORT/v1/artifacts/$id" | sha256sum | cut -d' ' -f1)
  b=$(curl -s "http://127.0.0.1:$NPORT/v1/artifacts/$id" | sha256sum | cut -d' ' -f1)
  [ "$a" = "$id" ] && [ "$b" = "$id" ] || { echo "server.sh: the servers do not serve $id" >&2; exit 1; }
done

# run_wrk NAME URL [wrk args]: prints "NAME req/s transfer p50 p99"
run_wrk() {
  local name=$1 url=$2
  shift 2
  local out
  out=$(wrk --latency -d "${SECS}s" "$@" "$url")
  echo "$out" >"$WORK/wrk-$name.txt"
  local rps tr p50 p99 errs
  rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  tr=$(awk '/^Transfer\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  errs=$(grep -E "Non-2xx|Socket errors" <<<"$out" | tr '\n' ' ' || true)
  printf '| %-28s | %10s | %10s | %9s | %9s | %s\n' "$name" "$rps" "$tr" "$p50" "$p99" "${errs:-}"
}

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $NCPU CPUs, $(free -g | awk '/Mem/ {print $2}') GiB"
echo "tlserverd $("$B/bin/tlserverd" --version | cut -d' ' -f2) ($NCPU HTTP threads, epoll), nginx $(nginx -v 2>&1 | cut -d/ -f2) ($NCPU workers, sendfile); wrk -t2 -c64 -d${SECS}s"
echo
echo "| server, body                 |      req/s |   transfer |       p50 |       p99 | errors"
echo "|------------------------------|------------|------------|-----------|-----------|-------"
for size in 100K 1M; do
  id=$ID100
  [ $size = 1M ] && id=$ID1M
  # warm-up (fills tlserverd's memory cache and nginx's page cache)
  curl -s -o /dev/null "http://127.0.0.1:$SPORT/v1/artifacts/$id"
  run_wrk "tlserverd GET $size" "http://127.0.0.1:$SPORT/v1/artifacts/$id" -t2 -c64
  run_wrk "nginx static $size" "http://127.0.0.1:$NPORT/v1/artifacts/$id" -t2 -c64
done

# --- cache-hit compile ---------------------------------------------------------------
if curl -sf "http://127.0.0.1:$SPORT/v1/info" | grep -q '"sm_90a"'; then
  python3 - "$WORK/gemm-req.json" <<'EOF'
import json, sys
json.dump({"program": json.load(open("examples/gemm.json")), "targets": ["sm_90a"]}, open(sys.argv[1], "w"))
EOF
  code=$(curl -s -o "$WORK/first.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$WORK/gemm-req.json" "http://127.0.0.1:$SPORT/v1/compile")
  [ "$code" = 200 ] || { echo "server.sh: compiling gemm.json failed ($code)" >&2; head -c 500 "$WORK/first.json" >&2; exit 1; }
  first_ms=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["compile_ms"])' "$WORK/first.json")
  cat >"$WORK/post.lua" <<EOF
local f = io.open("$WORK/gemm-req.json", "rb")
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
EOF
  echo
  echo "POST /v1/compile, examples/gemm.json for sm_90a, cache hit (the first compile took ${first_ms} ms):"
  echo "| client                       |      req/s |   transfer |       p50 |       p99 | errors"
  echo "|------------------------------|------------|------------|-----------|-----------|-------"
  run_wrk "1 connection" "http://127.0.0.1:$SPORT/v1/compile" -t1 -c1 -s "$WORK/post.lua"
  run_wrk "16 connections" "http://127.0.0.1:$SPORT/v1/compile" -t2 -c16 -s "$WORK/post.lua"
else
  echo "(no sm_90a toolchain: the compile benchmark is skipped)"
fi

# --- worker start-up versus a warm compile --------------------------------------------
echo
echo "Worker start-up (a fresh process: exec, load NVRTC, probe targets) versus warm compiles,"
echo "tilus_add_one and gemm for sm_90a, milliseconds (3 runs each):"
for prog in tilus_add_one gemm; do
  for run in 1 2 3; do
    s=$(date +%s%N)
    out=$("$WORK/cold" "examples/$prog.json" | tr '\n' ' ')
    e=$(date +%s%N)
    echo "  $prog run $run: whole process $(( (e - s) / 1000000 )) ms: $out"
  done
done
