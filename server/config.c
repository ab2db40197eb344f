/*
 * config.c - tlserverd's command line: the table of flags, their defaults
 * (chosen so that `tlserverd` with no flags serves on loopback with a cache
 * in the user's cache directory), parsing with limits on every value, and
 * the --help text, which documents every flag.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "server.h"

static const char usage_text[] =
    "usage: tlserverd [OPTION]...\n"
    "\n"
    "The compile service for tile programs: compiles Tile IR programs sent over HTTP\n"
    "for the GPU targets asked for, keeps the binaries in a content-addressed SQLite\n"
    "cache and serves them.  The HTTP API is described in proto/openapi.yaml.\n"
    "Every option may also be written --option=VALUE.  Sizes take K, M, G suffixes\n"
    "(binary: 1K = 1024); durations are seconds (decimals allowed) or end in ms.\n"
    "\n"
    "Listening and storage:\n"
    "  --listen ADDR:PORT      address to listen on; [V6ADDR]:PORT for IPv6; port 0\n"
    "                          picks a free port (default 127.0.0.1:8470).  An\n"
    "                          address other than loopback needs --tokens (or\n"
    "                          --insecure-no-auth).  The port is never shared (no\n"
    "                          SO_REUSEPORT): a second server on it fails to start\n"
    "  --port-file FILE        write the port listened on to FILE once ready\n"
    "  --db PATH               the cache database (default\n"
    "                          $XDG_CACHE_HOME/tlserverd/cache.db, or\n"
    "                          ~/.cache/tlserverd/cache.db); created if missing;\n"
    "                          several servers may share one file\n"
    "  --cache-max-bytes N     cap on the stored artifacts' total size; least\n"
    "                          recently used builds are evicted in the background\n"
    "                          in small steps (default 8G; 0: no cap)\n"
    "  --memory-cache N        bytes of verified artifacts kept in memory for fast\n"
    "                          GETs (default 256M; 0: off)\n"
    "  --memory-cache-ttl SEC  age after which an artifact in memory is re-read\n"
    "                          (and re-hashed) from the database (default 30)\n"
    "\n"
    "Compiling:\n"
    "  --workers N             compile worker processes, i.e. compiles at once\n"
    "                          (default: the number of CPUs)\n"
    "  --queue N               compiles that may wait for a worker; when full, compile\n"
    "                          requests get 503 with Retry-After (default 64)\n"
    "  --compile-timeout SEC   a compile running longer is killed, with every process it\n"
    "                          started (clang, ld.lld): 504 (default 120)\n"
    "  --max-compiles-per-client N\n"
    "                          compiles that one client address (keyed as for\n"
    "                          --max-connections-per-ip) may have running at\n"
    "                          once; its others wait while other clients'\n"
    "                          compiles take the free workers, at most half of\n"
    "                          --queue of them: a request that would make more\n"
    "                          wait gets 429 with Retry-After (unless the client\n"
    "                          has none: one request may name more targets).\n"
    "                          Joining a compile another request started costs\n"
    "                          nothing.  Default: --workers less one (at least\n"
    "                          1), so one client cannot hold every worker; 0: no\n"
    "                          limit (behind a proxy every client has the\n"
    "                          proxy's address)\n"
    "  --max-program-statements N\n"
    "                          a program of more statements (every kernel's,\n"
    "                          nested ones included) is refused with 413 before\n"
    "                          it is compiled (default 2000, from 1 to 65536;\n"
    "                          a compile's time grows with the program: 2000\n"
    "                          took about 20 s of CPU here, 10000 over 130 s;\n"
    "                          bench/compile.md)\n"
    "  --source-timeout SEC    a build's source generated again for the status page\n"
    "                          (/status/builds/KEY/source, in a compile worker) running\n"
    "                          longer is stopped: a 504 page (default 10; at most\n"
    "                          --compile-timeout)\n"
    "  --worker-memory N       address-space limit (RLIMIT_AS) of a worker process\n"
    "                          (default 4G; 0: none)\n"
    "\n"
    "HTTP limits:\n"
    "  --threads N             HTTP threads (default: the number of CPUs)\n"
    "  --max-connections N     open connections at once (default 1024); from 3/4\n"
    "                          of N open (under pressure), a connection still\n"
    "                          sending its head or idle between requests is closed\n"
    "                          after --pressure-timeout, and one sending its body\n"
    "                          slower than --min-body-rate is closed\n"
    "  --max-connections-per-ip N\n"
    "                          open connections from one client address at once;\n"
    "                          more are closed as soon as they are accepted\n"
    "                          (default 64; 0: no limit)\n"
    "  --header-timeout SEC    a request's line and headers must all arrive within\n"
    "                          this, counted from the connection's start (or from\n"
    "                          the request line on a kept-alive connection); a\n"
    "                          connection past it is closed (default 10)\n"
    "  --body-timeout SEC      a request's whole body must arrive within this,\n"
    "                          counted from the end of its headers; a connection\n"
    "                          past it is closed (default 60)\n"
    "  --pressure-timeout SEC  under pressure, the time a connection may take for\n"
    "                          its head, stay idle, or send its body before\n"
    "                          --min-body-rate applies (default 1)\n"
    "  --min-body-rate N       bytes a second that a request body must average from\n"
    "                          its start once it has been coming in for longer\n"
    "                          than --pressure-timeout, under pressure or while\n"
    "                          bodies hold over 3/4 of --max-body-total; a slower\n"
    "                          one is closed (default 64K; 0: no floor, bodies\n"
    "                          keep --body-timeout; at most 1G)\n"
    "  --max-body N            bytes of a request body; more gets 413 (default 8M)\n"
    "  --max-bundle N          bytes of a bundle posted to /v1/bundles (admin; it is\n"
    "                          held whole while checked); more gets 413 (default\n"
    "                          64M, or --max-body-total less a byte when that is\n"
    "                          smaller; at most 4G; --max-body-total must be larger)\n"
    "  --max-body-total N      bytes of request bodies held at once, over all\n"
    "                          connections (a body with Content-Length counts whole\n"
    "                          from its start); a request that does not fit gets\n"
    "                          503 with Retry-After, and the slowest bodies that\n"
    "                          came in for over --pressure-timeout are closed\n"
    "                          until the others hold at most 3/4 of N and leave\n"
    "                          its size free (default 128M, at least --max-body)\n"
    "  --max-header-bytes N    bytes of a request's line and headers, the\n"
    "                          connection's buffer (default 32K, at least 4K)\n"
    "  --idle-timeout SEC      an idle keep-alive connection is closed after this\n"
    "                          (default 60); one that trickles its next request\n"
    "                          line is closed after this plus --header-timeout.\n"
    "                          A connection whose client closed its side before\n"
    "                          its request was whole is closed within a second\n"
    "  Fixed limits: 16 targets per request, JSON nesting 66 levels, 1000\n"
    "  diagnostics per target; GET /v1/info lists every limit.\n"
    "\n"
    "Shared tier (a cluster of replicas, README \"Clusters\"):\n"
    "  --tier URL              a Redis primary of the shared cache tier behind the\n"
    "                          local cache: redis://HOST:PORT[/DB] (DB 0 to 15), or\n"
    "                          redis-sentinel://HOST:PORT/NAME to ask that Sentinel\n"
    "                          for primary NAME at every (re)connect and so follow a\n"
    "                          failover.  Repeat for up to 16 primaries: keys are\n"
    "                          spread over them by consistent hashing.  A local miss\n"
    "                          asks the tier; a compile publishes to both; every\n"
    "                          entry read is re-hashed (a bad one is deleted there\n"
    "                          and rebuilt).  One replica compiles a cold key under\n"
    "                          a lease; the others wait for its build.  With Redis\n"
    "                          slow or down the server answers from its own cache\n"
    "                          and compiles locally (/readyz and /metrics say so)\n"
    "  --tier-timeout SEC      connect, send and receive time-out of every Redis\n"
    "                          call (default 0.5); a primary that failed is not\n"
    "                          called again for a second\n"
    "  --tier-ttl SEC          entries expire from Redis after this (default 7 days;\n"
    "                          0: never, leaving it to Redis's maxmemory policy)\n"
    "  --tier-lease SEC        a compile lease lasts this long, renewed every third of\n"
    "                          it while the compile runs: a replica that dies is\n"
    "                          taken over after at most this (default 10, at least\n"
    "                          0.3)\n"
    "  --tier-max-entry N      largest entry (build, metadata and binary) written to\n"
    "                          Redis; larger builds stay in the local cache\n"
    "                          (default 64M, at most 512M)\n"
    "  --tier-auth-file FILE   the Redis primaries require a password (requirepass,\n"
    "                          or an ACL user): FILE holds one line, PASSWORD or\n"
    "                          USER PASSWORD, sent with AUTH on every connection;\n"
    "                          mode 600, like --tokens (a password with a space\n"
    "                          needs its user: default PASSWORD)\n"
    "  --tier-sentinel-auth-file FILE\n"
    "                          the same for the Sentinels of redis-sentinel:// URLs\n"
    "                          (their requirepass); the primary they name is then\n"
    "                          reached with --tier-auth-file's password\n"
    "  A replica waits for another's compile at most --compile-timeout, then\n"
    "  compiles itself.\n"
    "\n"
    "Security:\n"
    "  --tokens FILE           turn on authentication: FILE maps bearer tokens to\n"
    "                          scopes, one per line: TOKEN SCOPE[,SCOPE...]\n"
    "                          (# starts a comment line).  TOKEN is 16 to 256\n"
    "                          characters of A-Z a-z 0-9 . _ ~ + / = -.  Scopes:\n"
    "                          read (GET /v1/info, /v1/artifacts, /v1/kernels,\n"
    "                          the /status pages),\n"
    "                          compile (POST /v1/compile, and read), admin\n"
    "                          (everything, and /metrics).  /healthz and /readyz\n"
    "                          are always open.\n"
    "                          A request without a token gets 401, one whose token\n"
    "                          lacks the scope 403.  Without --tokens everything is\n"
    "                          open, so it is refused on a non-loopback --listen\n"
    "                          address unless --insecure-no-auth is given.\n"
    "                          The file must not be open to group or others (like\n"
    "                          ssh's keys): chmod 600 it, or the start is refused\n"
    "  --allow-anonymous-read  with --tokens: requests without a token may read\n"
    "  --insecure-no-auth      allow a non-loopback --listen address without\n"
    "                          --tokens: everyone who reaches it may compile, read\n"
    "                          and see /metrics\n"
    "  --tls-cert FILE         serve HTTPS with this PEM certificate (chain) ...\n"
    "  --tls-key FILE          ... and this PEM private key (both or neither)\n"
    "\n"
    "Operation:\n"
    "  --log-format FMT        request log on stderr, one line per request with\n"
    "                          method, path, status, bytes, microseconds and build\n"
    "                          keys: text (default), json or off\n"
    "  --shutdown-grace SEC    on SIGTERM or SIGINT, running compiles get this long\n"
    "                          to finish before they are cancelled (default 30);\n"
    "                          queued ones are cancelled at once (503)\n"
    "  --test-hooks            honour the test hooks TL_TEST_CRASH_ON=NAME,\n"
    "                          TL_TEST_HANG_ON=NAME and TL_TEST_GROW_ON=NAME\n"
    "                          (environment): a worker compiling the program named\n"
    "                          NAME aborts, hangs, or asks for twice --worker-memory\n"
    "                          (and fails the job when it cannot have it);\n"
    "                          TL_TEST_SLOW_START=SEC: a new worker waits SEC\n"
    "                          before it says it is ready (a start-up is not\n"
    "                          counted in --compile-timeout; it may take 60 s).\n"
    "                          For tests only\n"
    "  --help                  print this text\n"
    "  --version               print the version\n"
    "\n"
    "Readiness: GET /readyz answers 503 with the reason while no toolchain offers a\n"
    "target (probed at start), the cache database refuses a one-row write, or\n"
    "64 KiB cannot be written beside it (a read-only or full disk); the last two\n"
    "are probed once a second, so recovery shows within about two seconds.\n"
    "/metrics: tlserverd_ready, tlserverd_ready_check{check}.\n"
    "\n"
    "Status page: GET /status (HTML, read scope): health, cache size and hit rate,\n"
    "the shared tier, the last compile requests with their diagnostics, the most\n"
    "recently used builds; /status/builds/KEY[/source]: a build's metadata,\n"
    "manifest and generated source.\n"
    "\n"
    "Signals: SIGTERM and SIGINT stop the server gracefully (stop accepting, finish or\n"
    "cancel compiles, answer every request in flight, close the database).\n"
    "systemd: with NOTIFY_SOCKET set (Type=notify) it sends READY=1 once it listens\n"
    "and STOPPING=1 when the graceful stop begins (deploy/tlserverd.service).\n"
    "Internal: --worker-fd N runs a compile worker on socket N (the server starts\n"
    "its workers this way).\n";

const char *tl_srv_usage(void) { return usage_text; }

static int cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1)
    n = 1;
  if (n > 64)
    n = 64;
  return (int)n;
}

void tl_srv_config_defaults(tl_srv_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  strcpy(cfg->host, "127.0.0.1");
  cfg->port = 8470;
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  int n = -1;
  if (xdg && xdg[0] == '/')
    n = snprintf(cfg->db_path, sizeof cfg->db_path, "%s/tlserverd/cache.db", xdg);
  else if (home && home[0])
    n = snprintf(cfg->db_path, sizeof cfg->db_path, "%s/.cache/tlserverd/cache.db", home);
  if (n < 0 || (size_t)n >= sizeof cfg->db_path)
    cfg->db_path[0] = 0;
  cfg->cache_max_bytes = (int64_t)8 << 30;
  cfg->workers = cpu_count();
  cfg->queue = 64;
  cfg->max_program_statements = TL_SRV_PROGRAM_STATEMENTS; /* max_compiles_per_client: tl_srv_config_parse */
  cfg->threads = cpu_count();
  cfg->max_connections = 1024;
  cfg->max_connections_per_ip = 64;
  cfg->header_timeout = 10;
  cfg->body_timeout = 60;
  cfg->pressure_timeout = 1;
  cfg->min_body_rate = 64 << 10;
  cfg->max_body = (int64_t)8 << 20;
  cfg->max_body_total = (int64_t)128 << 20;
  cfg->max_bundle = (int64_t)64 << 20; /* less when --max-body-total is smaller (tl_srv_config_parse) */
  cfg->max_header = 32 << 10;
  cfg->compile_timeout = 120;
  cfg->source_timeout = 10;
  cfg->idle_timeout = 60;
  cfg->shutdown_grace = 30;
  cfg->worker_memory = (int64_t)4 << 30;
  cfg->memory_cache = (int64_t)256 << 20;
  cfg->memory_cache_ttl = 30;
  cfg->tier_timeout = 0.5;
  cfg->tier_ttl = 7 * 24 * 3600;
  cfg->tier_lease = 10;
  cfg->tier_max_entry = (int64_t)64 << 20;
  cfg->log_format = TL_LOG_TEXT;
  cfg->worker_fd = -1;
}

/* Flags that take a value. */
typedef enum {
  F_LISTEN, F_PORT_FILE, F_DB, F_CACHE_MAX, F_MEMCACHE, F_MEMCACHE_TTL, F_WORKERS, F_QUEUE,
  F_TIMEOUT, F_SOURCE_TIMEOUT, F_MAX_CLIENT_COMPILES, F_MAX_STATEMENTS, F_WORKER_MEM, F_THREADS, F_MAXCONN, F_MAXCONN_IP, F_HEADER_TIMEOUT,
  F_BODY_TIMEOUT, F_PRESSURE_TIMEOUT, F_MIN_BODY_RATE, F_MAXBODY, F_MAXBODY_TOTAL, F_MAXBUNDLE, F_MAXHEADER,
  F_IDLE, F_TOKENS,
  F_TLS_CERT, F_TLS_KEY, F_LOG_FORMAT, F_GRACE, F_WORKER_FD,
  F_TIER, F_TIER_TIMEOUT, F_TIER_TTL, F_TIER_LEASE, F_TIER_MAX_ENTRY, F_TIER_AUTH, F_TIER_SENTINEL_AUTH,
  /* switches */
  F_ANON_READ, F_INSECURE, F_TEST_HOOKS, F_HELP, F_VERSION,
} flag_id;

static const struct {
  const char *name;
  flag_id id;
  bool takes_value;
} flags[] = {
    {"--listen", F_LISTEN, true},
    {"--port-file", F_PORT_FILE, true},
    {"--db", F_DB, true},
    {"--cache-max-bytes", F_CACHE_MAX, true},
    {"--memory-cache", F_MEMCACHE, true},
    {"--memory-cache-ttl", F_MEMCACHE_TTL, true},
    {"--workers", F_WORKERS, true},
    {"--queue", F_QUEUE, true},
    {"--compile-timeout", F_TIMEOUT, true},
    {"--source-timeout", F_SOURCE_TIMEOUT, true},
    {"--max-compiles-per-client", F_MAX_CLIENT_COMPILES, true},
    {"--max-program-statements", F_MAX_STATEMENTS, true},
    {"--worker-memory", F_WORKER_MEM, true},
    {"--threads", F_THREADS, true},
    {"--max-connections", F_MAXCONN, true},
    {"--max-connections-per-ip", F_MAXCONN_IP, true},
    {"--header-timeout", F_HEADER_TIMEOUT, true},
    {"--body-timeout", F_BODY_TIMEOUT, true},
    {"--pressure-timeout", F_PRESSURE_TIMEOUT, true},
    {"--min-body-rate", F_MIN_BODY_RATE, true},
    {"--max-body", F_MAXBODY, true},
    {"--max-body-total", F_MAXBODY_TOTAL, true},
    {"--max-bundle", F_MAXBUNDLE, true},
    {"--max-header-bytes", F_MAXHEADER, true},
    {"--idle-timeout", F_IDLE, true},
    {"--tokens", F_TOKENS, true},
    {"--tls-cert", F_TLS_CERT, true},
    {"--tls-key", F_TLS_KEY, true},
    {"--log-format", F_LOG_FORMAT, true},
    {"--shutdown-grace", F_GRACE, true},
    {"--worker-fd", F_WORKER_FD, true},
    {"--tier", F_TIER, true},
    {"--tier-timeout", F_TIER_TIMEOUT, true},
    {"--tier-ttl", F_TIER_TTL, true},
    {"--tier-lease", F_TIER_LEASE, true},
    {"--tier-max-entry", F_TIER_MAX_ENTRY, true},
    {"--tier-auth-file", F_TIER_AUTH, true},
    {"--tier-sentinel-auth-file", F_TIER_SENTINEL_AUTH, true},
    {"--allow-anonymous-read", F_ANON_READ, false},
    {"--insecure-no-auth", F_INSECURE, false},
    {"--test-hooks", F_TEST_HOOKS, false},
    {"--help", F_HELP, false},
    {"-h", F_HELP, false},
    {"--version", F_VERSION, false},
};

static tl_status bad(tl_error *err, const char *flag, const char *val, const char *what) {
  return tl_error_set(err, TL_INVALID_ARG, "%s: '%s' is not %s", flag, val, what);
}

static tl_status set_string(tl_error *err, const char *flag, const char *val, const char **out) {
  if (!val[0])
    return tl_error_set(err, TL_INVALID_ARG, "%s needs a non-empty value", flag);
  if (strlen(val) >= TL_CACHE_PATH_MAX)
    return tl_error_set(err, TL_TOO_LARGE, "%s: the path is too long", flag);
  *out = val;
  return TL_OK;
}

static tl_status apply(tl_srv_config *c, flag_id id, const char *flag, const char *v,
                       tl_error *err) {
  int64_t sz;
  double sec;
  switch (id) {
  case F_LISTEN:
    if (!tl_srv_parse_listen(v, c->host, &c->port))
      return bad(err, flag, v, "HOST:PORT, [V6HOST]:PORT or :PORT");
    return TL_OK;
  case F_PORT_FILE: return set_string(err, flag, v, &c->port_file);
  case F_DB:
    if (!v[0] || strlen(v) >= sizeof c->db_path)
      return bad(err, flag, v, "a usable path");
    strcpy(c->db_path, v);
    return TL_OK;
  case F_CACHE_MAX:
    if (!tl_srv_parse_size(v, &c->cache_max_bytes))
      return bad(err, flag, v, "a size");
    return TL_OK;
  case F_MEMCACHE:
    if (!tl_srv_parse_size(v, &c->memory_cache))
      return bad(err, flag, v, "a size");
    return TL_OK;
  case F_MEMCACHE_TTL:
    if (!tl_srv_parse_seconds(v, &c->memory_cache_ttl))
      return bad(err, flag, v, "a duration");
    return TL_OK;
  case F_WORKERS:
    if (!tl_srv_parse_int(v, 1, TL_SRV_MAX_WORKERS, &c->workers))
      return bad(err, flag, v, "a number from 1 to 256");
    return TL_OK;
  case F_QUEUE:
    if (!tl_srv_parse_int(v, 0, TL_SRV_MAX_QUEUE, &c->queue))
      return bad(err, flag, v, "a number from 0 to 100000");
    return TL_OK;
  case F_TIMEOUT:
    if (!tl_srv_parse_seconds(v, &sec) || sec < 0.01)
      return bad(err, flag, v, "a duration of at least 10ms");
    c->compile_timeout = sec;
    return TL_OK;
  case F_MAX_CLIENT_COMPILES:
    if (!tl_srv_parse_int(v, 0, TL_SRV_MAX_WORKERS + TL_SRV_MAX_QUEUE, &c->max_compiles_per_client))
      return bad(err, flag, v, "a number from 0 to 100256");
    c->max_compiles_per_client_given = true;
    return TL_OK;
  case F_MAX_STATEMENTS:
    if (!tl_srv_parse_int(v, 1, 65536, &c->max_program_statements))
      return bad(err, flag, v, "a number from 1 to 65536");
    return TL_OK;
  case F_SOURCE_TIMEOUT:
    if (!tl_srv_parse_seconds(v, &sec) || sec < 0.01)
      return bad(err, flag, v, "a duration of at least 10ms");
    c->source_timeout = sec;
    return TL_OK;
  case F_WORKER_MEM:
    if (!tl_srv_parse_size(v, &sz) || (sz != 0 && sz < ((int64_t)64 << 20)))
      return bad(err, flag, v, "a size of at least 64M (or 0)");
    c->worker_memory = sz;
    return TL_OK;
  case F_THREADS:
    if (!tl_srv_parse_int(v, 1, TL_SRV_MAX_THREADS, &c->threads))
      return bad(err, flag, v, "a number from 1 to 256");
    return TL_OK;
  case F_MAXCONN:
    if (!tl_srv_parse_int(v, 1, TL_SRV_MAX_CONNECTIONS, &c->max_connections))
      return bad(err, flag, v, "a number from 1 to 100000");
    return TL_OK;
  case F_MAXCONN_IP:
    if (!tl_srv_parse_int(v, 0, TL_SRV_MAX_CONNECTIONS, &c->max_connections_per_ip))
      return bad(err, flag, v, "a number from 0 to 100000");
    return TL_OK;
  case F_HEADER_TIMEOUT:
  case F_BODY_TIMEOUT:
  case F_PRESSURE_TIMEOUT:
    if (!tl_srv_parse_seconds(v, &sec) || sec < 0.1)
      return bad(err, flag, v, "a duration of at least 100ms");
    *(id == F_HEADER_TIMEOUT ? &c->header_timeout
      : id == F_BODY_TIMEOUT ? &c->body_timeout
                             : &c->pressure_timeout) = sec;
    return TL_OK;
  case F_MIN_BODY_RATE:
    if (!tl_srv_parse_size(v, &sz) || sz > ((int64_t)1 << 30))
      return bad(err, flag, v, "a size from 0 to 1G (bytes a second)");
    c->min_body_rate = sz;
    return TL_OK;
  case F_MAXBODY:
    if (!tl_srv_parse_size(v, &sz) || sz < 1 || sz > ((int64_t)1 << 30))
      return bad(err, flag, v, "a size from 1 to 1G");
    c->max_body = sz;
    return TL_OK;
  case F_MAXBUNDLE:
    if (!tl_srv_parse_size(v, &sz) || sz < 1 || sz > ((int64_t)4 << 30))
      return bad(err, flag, v, "a size from 1 to 4G");
    c->max_bundle = sz;
    c->max_bundle_given = true;
    return TL_OK;
  case F_MAXBODY_TOTAL:
    if (!tl_srv_parse_size(v, &sz) || sz < 1 || sz > ((int64_t)1 << 40))
      return bad(err, flag, v, "a size from 1 to 1T");
    c->max_body_total = sz;
    return TL_OK;
  case F_MAXHEADER:
    if (!tl_srv_parse_size(v, &sz) || sz < 4096 || sz > (16 << 20))
      return bad(err, flag, v, "a size from 4K to 16M");
    c->max_header = sz;
    return TL_OK;
  case F_IDLE:
    if (!tl_srv_parse_seconds(v, &sec) || sec < 1)
      return bad(err, flag, v, "a duration of at least 1 second");
    c->idle_timeout = sec;
    return TL_OK;
  case F_TOKENS: return set_string(err, flag, v, &c->tokens_file);
  case F_TLS_CERT: return set_string(err, flag, v, &c->tls_cert);
  case F_TLS_KEY: return set_string(err, flag, v, &c->tls_key);
  case F_LOG_FORMAT:
    if (strcmp(v, "text") == 0)
      c->log_format = TL_LOG_TEXT;
    else if (strcmp(v, "json") == 0)
      c->log_format = TL_LOG_JSON;
    else if (strcmp(v, "off") == 0)
      c->log_format = TL_LOG_OFF;
    else
      return bad(err, flag, v, "text, json or off");
    return TL_OK;
  case F_GRACE:
    if (!tl_srv_parse_seconds(v, &c->shutdown_grace))
      return bad(err, flag, v, "a duration");
    return TL_OK;
  case F_TIER:
    if (c->ntier == TL_SRV_TIER_MAX)
      return tl_error_set(err, TL_LIMIT, "%s: at most %d primaries", flag, TL_SRV_TIER_MAX);
    if (!v[0] || strlen(v) >= TL_SRV_TIER_URL_MAX)
      return bad(err, flag, v, "a URL of 1 to 255 bytes");
    c->tier[c->ntier++] = v; /* the syntax is checked by tier.c at start */
    return TL_OK;
  case F_TIER_TIMEOUT:
    if (!tl_srv_parse_seconds(v, &sec) || sec < 0.001 || sec > 60)
      return bad(err, flag, v, "a duration from 1ms to 60 seconds");
    c->tier_timeout = sec;
    return TL_OK;
  case F_TIER_TTL:
    if (!tl_srv_parse_seconds(v, &sec) || (sec != 0 && sec < 1))
      return bad(err, flag, v, "a duration of at least 1 second (or 0)");
    c->tier_ttl = sec;
    return TL_OK;
  case F_TIER_LEASE:
    if (!tl_srv_parse_seconds(v, &sec) || sec < 0.3 || sec > 3600)
      return bad(err, flag, v, "a duration from 300ms to an hour");
    c->tier_lease = sec;
    return TL_OK;
  case F_TIER_MAX_ENTRY:
    if (!tl_srv_parse_size(v, &sz) || sz < 1024 || sz > TL_SRV_TIER_ENTRY_MAX)
      return bad(err, flag, v, "a size from 1K to 512M");
    c->tier_max_entry = sz;
    return TL_OK;
  case F_TIER_AUTH: /* read at start (http.c), like --tokens */
    c->tier_auth_file = v;
    return TL_OK;
  case F_TIER_SENTINEL_AUTH:
    c->tier_sentinel_auth_file = v;
    return TL_OK;
  case F_WORKER_FD:
    if (!tl_srv_parse_int(v, 0, 1 << 20, &c->worker_fd))
      return bad(err, flag, v, "a file descriptor");
    return TL_OK;
  default: break;
  }
  return tl_error_set(err, TL_INTERNAL, "%s: unhandled flag", flag);
}

tl_status tl_srv_config_parse(tl_srv_config *cfg, int argc, char **argv, bool *help, bool *version,
                              tl_error *err) {
  *help = *version = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *eq = strchr(a, '=');
    size_t namelen = eq ? (size_t)(eq - a) : strlen(a);
    int f = -1;
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
      if (strlen(flags[k].name) == namelen && strncmp(flags[k].name, a, namelen) == 0) {
        f = (int)k;
        break;
      }
    }
    if (f < 0)
      return tl_error_set(err, TL_INVALID_ARG, "unknown option '%s'", a);
    const char *flag = flags[f].name;
    if (!flags[f].takes_value) {
      if (eq)
        return tl_error_set(err, TL_INVALID_ARG, "%s takes no value", flag);
      switch (flags[f].id) {
      case F_ANON_READ: cfg->allow_anonymous_read = true; break;
      case F_INSECURE: cfg->insecure_no_auth = true; break;
      case F_TEST_HOOKS: cfg->test_hooks = true; break;
      case F_HELP: *help = true; break;
      case F_VERSION: *version = true; break;
      default: break;
      }
      continue;
    }
    const char *val;
    if (eq) {
      val = eq + 1;
    } else {
      if (i + 1 >= argc)
        return tl_error_set(err, TL_INVALID_ARG, "%s needs a value", flag);
      val = argv[++i];
    }
    tl_status st = apply(cfg, flags[f].id, flag, val, err);
    if (st != TL_OK)
      return st;
  }
  if ((cfg->tls_cert == NULL) != (cfg->tls_key == NULL))
    return tl_error_set(err, TL_INVALID_ARG, "--tls-cert and --tls-key go together");
  if ((cfg->tier_auth_file || cfg->tier_sentinel_auth_file) && cfg->ntier == 0)
    return tl_error_set(err, TL_INVALID_ARG, "%s needs --tier",
                        cfg->tier_auth_file ? "--tier-auth-file" : "--tier-sentinel-auth-file");
  if (cfg->max_body_total < cfg->max_body + 1)
    return tl_error_set(err, TL_INVALID_ARG,
                        "--max-body-total (%lld) must be larger than --max-body (%lld)",
                        (long long)cfg->max_body_total, (long long)cfg->max_body);
  if (!cfg->max_bundle_given && cfg->max_bundle > cfg->max_body_total - 1)
    cfg->max_bundle = cfg->max_body_total - 1;
  if (cfg->max_body_total < cfg->max_bundle + 1)
    return tl_error_set(err, TL_INVALID_ARG,
                        "--max-body-total (%lld) must be larger than --max-bundle (%lld)",
                        (long long)cfg->max_body_total, (long long)cfg->max_bundle);
  if (!cfg->max_compiles_per_client_given)
    cfg->max_compiles_per_client = cfg->workers > 1 ? cfg->workers - 1 : 1;
  if (cfg->allow_anonymous_read && !cfg->tokens_file)
    return tl_error_set(err, TL_INVALID_ARG,
                        "--allow-anonymous-read needs --tokens (without it everything is open)");
  if (!cfg->db_path[0] && cfg->worker_fd < 0 && !*help && !*version)
    return tl_error_set(err, TL_INVALID_ARG,
                        "no --db given and neither XDG_CACHE_HOME nor HOME is set");
  return TL_OK;
}
