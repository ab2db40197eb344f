/*
 * server.h - the parts of tlserverd and how they talk to each other
 * (docs/DESIGN.md section 5; the HTTP contract is proto/openapi.yaml).
 *
 * The daemon is a small set of modules, each in its own file:
 *
 *   config.c    the command line: flags, defaults, --help;
 *   util.c      pure helpers with no state: a growable text buffer, size
 *               and duration parsing, HTTP header parsing (Range,
 *               If-None-Match, Content-Type), the JSON depth scan, clocks;
 *   auth.c      the tokens file and the bearer-token check;
 *   metrics.c   counters, gauges and the compile-time histogram, and their
 *               Prometheus text;
 *   ready.c     the readiness checks (a toolchain, the database and its disk
 *               take writes) behind /readyz and /metrics;
 *   handles.c   a pool of tl_cache handles (one per thread at a time);
 *   artmem.c    the in-memory cache of verified artifact responses;
 *   proc.c      the compile worker process: both its side (a loop that
 *               reads jobs from a socket and runs tl_compile) and the
 *               daemon's side (spawn, send a job, wait with a deadline,
 *               kill);
 *   pool.c      the bounded queue of compile jobs, the single-flight map
 *               and the threads that drive the worker processes;
 *   tier.c      the shared cache tier on Redis (hiredis) behind the local
 *               cache, and the leases of single-flight across replicas;
 *   api.c       the endpoints;
 *   status.c    the status pages (HTML): the node, its recent compiles, each
 *               build's metadata, manifest and generated source;
 *   http.c      libmicrohttpd: the daemon, routing, bodies, auth, limits,
 *               JSON error answers, the request log, start and shutdown;
 *   tlserverd.c main(): flags, signals, the worker mode.
 *
 * Threads: libmicrohttpd's pool of HTTP threads (epoll) runs the handlers;
 * a handler never blocks on a compile (nor on the status page's source,
 * which a worker generates): it suspends its connection, and the compile
 * pool's threads resume it when every result it waits for is in.
 * One background thread evicts and flushes the cache.  Compiles run in
 * worker processes, never in the daemon.
 *
 * Everything named tl_srv_* is shared between these files only; nothing
 * here is a public library API.
 */
#ifndef TL_SERVER_H
#define TL_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../cache/tlcache.h"
#include "../proto/tl_error.h"

#define TL_SERVER_VERSION "0.1.0"

/* ==== limits ================================================================= */
#define TL_SRV_MAX_TARGETS 16          /* targets in one compile request */
#define TL_SRV_JSON_DEPTH 66           /* request nesting: a program (64) inside {"program": ...} */
#define TL_SRV_MAX_WORKERS 256
#define TL_SRV_MAX_QUEUE 100000
#define TL_SRV_MAX_THREADS 256
#define TL_SRV_MAX_CONNECTIONS 100000
#define TL_SRV_MAX_DIAGS 1000          /* diagnostics returned for one target */
#define TL_SRV_FRAME_MAX ((uint64_t)1 << 30) /* bytes of one worker message part */
#define TL_SRV_HOST_MAX 256
#define TL_SRV_TIER_MAX 16             /* Redis primaries of the shared tier (--tier) */
#define TL_SRV_TIER_URL_MAX 256        /* bytes of a --tier URL */
#define TL_SRV_TIER_ENTRY_MAX ((int64_t)512 << 20) /* Redis's own limit on a string */
#define TL_SRV_SOURCE_MAX ((size_t)4 << 20) /* bytes of a build's source shown by /status/builds/KEY/source */
#define TL_SRV_SOURCE_FLIGHTS 2        /* sources generated (queued or running) at once in the compile pool */
#define TL_SRV_CLIENT_MAX 46           /* bytes of a client's address as text (INET6_ADDRSTRLEN), with NUL */
#define TL_SRV_PROGRAM_STATEMENTS 2000 /* --max-program-statements' default (bench/soak.md: NVRTC's time) */
#define TL_SRV_QUEUE_SHARE(queue) ((queue) / 2) /* compiles one client may have waiting (pool.c) */

/* ==== util.c: a growable text buffer ========================================= */
typedef struct tl_srv_buf {
  char *data; /* NUL-terminated when len > 0 or after any append */
  size_t len, cap;
  bool failed; /* an allocation failed: the content is incomplete */
} tl_srv_buf;

void tl_srv_buf_append(tl_srv_buf *b, const char *s, size_t n);
void tl_srv_buf_puts(tl_srv_buf *b, const char *s);
void tl_srv_buf_printf(tl_srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as the inside of a JSON string (escapes quotes, backslashes and
 * control characters; bytes >= 0x80 are copied as they are). */
void tl_srv_buf_json_str(tl_srv_buf *b, const char *s);
/* Appends s as HTML text or an attribute value (escapes & < > " ' and
 * replaces control characters other than newline and tab with U+FFFD). */
void tl_srv_buf_html(tl_srv_buf *b, const char *s);
/* Appends JSON text without the whitespace between its tokens. */
void tl_srv_buf_json_compact(tl_srv_buf *b, const char *json);
void tl_srv_buf_free(tl_srv_buf *b); /* frees the data and zeroes b */

/* ==== util.c: parsing helpers ================================================ */

/* "123", "4K", "8M", "2G" (binary multiples; optional trailing "B" or "iB")
 * -> bytes.  False for anything else, negative values or overflow. */
bool tl_srv_parse_size(const char *s, int64_t *out);
/* "30", "2.5", "500ms" -> seconds (>= 0, finite, at most a year). */
bool tl_srv_parse_seconds(const char *s, double *out);
/* A whole number in [lo, hi]. */
bool tl_srv_parse_int(const char *s, int lo, int hi, int *out);
/* "HOST:PORT", "[V6]:PORT" or ":PORT" (host defaults to 127.0.0.1); port
 * 0..65535 (0: any free port). */
bool tl_srv_parse_listen(const char *s, char host[TL_SRV_HOST_MAX], int *port);

/* The result of reading a Range header against a body of `size` bytes. */
typedef enum tl_srv_range {
  TL_RANGE_NONE,          /* no header, a malformed one or several ranges: send it all (RFC 9110 14.2) */
  TL_RANGE_OK,            /* *first..*last (inclusive) */
  TL_RANGE_UNSATISFIABLE, /* answer 416 with Content-Range: bytes STAR/size */
} tl_srv_range;
tl_srv_range tl_srv_parse_range(const char *header, int64_t size, int64_t *first, int64_t *last);

/* True when an If-None-Match header value matches the entity tag "id":
 * "*", or a list holding "id" or W/"id". */
bool tl_srv_etag_match(const char *header, const char *id);

/* True when a Content-Type value is application/json, with or without
 * parameters (charset=utf-8), case-insensitively. */
bool tl_srv_content_type_is_json(const char *value);
/* The same for "application/octet-stream" (a bundle). */
bool tl_srv_content_type_is_binary(const char *value);

/* Scans JSON text and says whether its nesting of arrays and objects stays
 * within max_depth (the text need not be valid; strings are skipped). */
bool tl_srv_json_depth_ok(const char *text, size_t n, int max_depth);

/* Clocks: microseconds on the monotonic clock; milliseconds since the epoch. */
int64_t tl_srv_now_us(void);
int64_t tl_srv_wall_ms(void);
/* "2026-11-21T20:05:40.123Z" from Unix milliseconds. */
void tl_srv_format_time(int64_t wall_ms, char out[32]);

/* ==== config.c =================================================================
 * Every flag of tlserverd.  tl_srv_config_defaults fills the defaults that
 * work with no flags; tl_srv_config_parse applies argv over them.  Strings
 * point into argv or into the config itself; nothing to free. */
typedef enum tl_srv_log_format { TL_LOG_TEXT, TL_LOG_JSON, TL_LOG_OFF } tl_srv_log_format;

typedef struct tl_srv_config {
  char host[TL_SRV_HOST_MAX];
  int port;
  char db_path[TL_CACHE_PATH_MAX];
  int64_t cache_max_bytes;     /* 0: no cap */
  int workers;                 /* compile worker processes */
  int queue;                   /* compile jobs waiting for a worker */
  int max_compiles_per_client; /* compiles one client address has running (and half --queue waiting); 0: no limit */
  bool max_compiles_per_client_given; /* else --workers less one (at least 1), set by tl_srv_config_parse */
  int max_program_statements;  /* a program with more is refused before compiling (413) */
  int threads;                 /* HTTP threads */
  int max_connections;
  int max_connections_per_ip;  /* 0: no limit */
  double header_timeout;       /* seconds for a request's line and headers */
  double body_timeout;         /* seconds for a request's body */
  double pressure_timeout;     /* seconds in HEAD or IDLE, and of a body's grace, under pressure */
  int64_t min_body_rate;       /* bytes a second a body must keep up under pressure; 0: none */
  int64_t max_body;            /* bytes of a request body */
  int64_t max_body_total;      /* bytes of all request bodies held at once */
  int64_t max_bundle;          /* bytes of a bundle posted to /v1/bundles */
  bool max_bundle_given;       /* --max-bundle was given (else it shrinks to fit --max-body-total) */
  int64_t max_header;          /* bytes of a request's line and headers (the connection buffer) */
  double compile_timeout;      /* seconds per compile */
  double source_timeout;       /* seconds a worker may take to generate a build's source (status page) */
  double idle_timeout;         /* seconds an idle connection is kept */
  double shutdown_grace;       /* seconds running compiles get on SIGTERM */
  int64_t worker_memory;       /* RLIMIT_AS of a worker, bytes; 0: none */
  int64_t memory_cache;        /* bytes of artifacts kept in memory */
  double memory_cache_ttl;     /* seconds before an in-memory artifact is re-read from the db */
  const char *tokens_file;
  bool allow_anonymous_read;
  bool insecure_no_auth;       /* a non-loopback address without --tokens is allowed */
  const char *tls_cert, *tls_key;
  const char *port_file;       /* where to write the port once listening */
  const char *tier[TL_SRV_TIER_MAX]; /* --tier URLs (Redis primaries) */
  int ntier;
  double tier_timeout;         /* seconds: connect, send and receive of each Redis call */
  double tier_ttl;             /* seconds an entry lives in Redis; 0: no expiry */
  double tier_lease;           /* seconds of a compile lease (renewed while it runs) */
  int64_t tier_max_entry;      /* bytes of the largest entry written to Redis */
  const char *tier_auth_file;  /* "PASSWORD" or "USER PASSWORD" of the primaries, or NULL */
  const char *tier_sentinel_auth_file; /* the same for the Sentinels */
  tl_srv_log_format log_format;
  bool test_hooks;             /* honour TL_TEST_CRASH_ON / _HANG_ON / _GROW_ON */
  int worker_fd;               /* >= 0: run as a compile worker on this socket */
} tl_srv_config;

/* Fills the defaults (db under $XDG_CACHE_HOME or ~/.cache; TL_IO when
 * neither HOME nor XDG_CACHE_HOME is set, then --db is required). */
void tl_srv_config_defaults(tl_srv_config *cfg);
/* Parses argv (argv[0] is the program).  *help is set for --help, *version
 * for --version.  TL_INVALID_ARG with a message naming the flag. */
tl_status tl_srv_config_parse(tl_srv_config *cfg, int argc, char **argv, bool *help, bool *version,
                              tl_error *err);
/* The --help text. */
const char *tl_srv_usage(void);

/* ==== auth.c ======================================================================
 * Tokens file: one token per line, "TOKEN SCOPE[,SCOPE...]"; blank lines
 * and lines starting with '#' are ignored.  TOKEN: 16 to 256 characters of
 * [A-Za-z0-9._~+/=-].  SCOPE: read, compile (includes read: a client fetches
 * what it compiled), admin (includes both).  Tokens are kept only as SHA-256 digests and compared in constant
 * time. */
enum { TL_SCOPE_READ = 1, TL_SCOPE_COMPILE = 2, TL_SCOPE_ADMIN = 4 };
#define TL_SRV_MAX_TOKENS 10000

typedef struct tl_srv_auth tl_srv_auth;

/* Parses a tokens file's text; errors (TL_INVALID_ARG, TL_TOO_LARGE) name
 * the line.  *out owns the table (tl_srv_auth_free). */
tl_status tl_srv_auth_parse(const char *text, size_t n, tl_srv_auth **out, tl_error *err);
tl_status tl_srv_auth_load(const char *path, tl_srv_auth **out, tl_error *err);
/* Reads a file of secrets (the tokens, a Redis password) whole, at most max
 * bytes: refused when group or others may use it (TL_INVALID_ARG saying
 * "chmod 600"), TL_IO, TL_TOO_LARGE.  what names the file in messages
 * ("tokens file"), secrets ends the refusal ("tokens are secrets").  *out
 * is NUL-terminated, *n bytes; give it back with tl_srv_secret_free. */
tl_status tl_srv_secret_read(const char *path, const char *what, const char *secrets, size_t max, char **out,
                             size_t *n, tl_error *err);
void tl_srv_secret_free(char *buf, size_t n); /* wipes, then frees (NULL is fine) */
void tl_srv_auth_free(tl_srv_auth *a); /* accepts NULL */
int tl_srv_auth_count(const tl_srv_auth *a);
/* Decides a request needing scope `need` (one TL_SCOPE_*) with the given
 * Authorization header (NULL when absent).  a == NULL means auth is off:
 * everything is allowed.  TL_OK, TL_UNAUTHORIZED (no token, malformed
 * header, unknown token) or TL_FORBIDDEN (the token lacks the scope), with
 * a message in err. */
tl_status tl_srv_auth_check(const tl_srv_auth *a, const char *authorization, unsigned need,
                            bool allow_anonymous_read, tl_error *err);

/* ==== ready.c: readiness ======================================================
 * One row per check; /readyz answers 200 only when every check passed at
 * the last probe (and the server is not shutting down). */
typedef enum tl_srv_ready_check {
  TL_READY_TOOLCHAIN, TL_READY_DATABASE, TL_READY_DISK, TL_READY_COUNT_
} tl_srv_ready_check;
#define TL_SRV_PROBE_BYTES 65536   /* written beside the database by each disk probe */
#define TL_SRV_READY_WHY_MAX 768

typedef struct tl_srv_ready {
  pthread_mutex_t mu;
  bool probed;                     /* a probe has run */
  bool ok[TL_READY_COUNT_];
  char why[TL_READY_COUNT_][TL_SRV_READY_WHY_MAX]; /* empty where ok */
} tl_srv_ready;

void tl_srv_ready_init(tl_srv_ready *r);    /* not ready until the first probe */
void tl_srv_ready_destroy(tl_srv_ready *r);
const char *tl_srv_ready_check_name(tl_srv_ready_check c);
/* Runs the checks: toolchain_error is NULL when a toolchain was found, c a
 * handle on the cache (NULL when it could not be opened: open_err says
 * why).  Logs each change of state on stderr. */
void tl_srv_ready_probe(tl_srv_ready *r, const char *toolchain_error, const char *db_path,
                        tl_cache *c, const tl_error *open_err);
/* Copies the last probe's result (why may be NULL); true when every check
 * passed. */
bool tl_srv_ready_get(tl_srv_ready *r, bool ok[TL_READY_COUNT_],
                      char why[TL_READY_COUNT_][TL_SRV_READY_WHY_MAX]);

/* ==== metrics.c ================================================================== */
typedef enum tl_srv_route {
  TL_ROUTE_HEALTHZ,
  TL_ROUTE_READYZ,
  TL_ROUTE_INFO,
  TL_ROUTE_METRICS,
  TL_ROUTE_COMPILE,
  TL_ROUTE_ARTIFACTS,
  TL_ROUTE_KERNELS,
  TL_ROUTE_STATUS,
  TL_ROUTE_BUNDLES,
  TL_ROUTE_TUNINGS,
  TL_ROUTE_OTHER,
  TL_ROUTE_COUNT_
} tl_srv_route;
const char *tl_srv_route_name(tl_srv_route r);

typedef enum tl_srv_compile_outcome {
  TL_COMPILE_OK,
  TL_COMPILE_ERROR,   /* the compiler refused or the toolchain failed */
  TL_COMPILE_TIMEOUT, /* killed after --compile-timeout */
  TL_COMPILE_CRASH,   /* the worker died */
  TL_COMPILE_OUTCOME_COUNT_
} tl_srv_compile_outcome;

/* The phases of a connection (conns.c): each has its own deadline. */
typedef enum tl_srv_conn_phase {
  TL_CONN_HEAD, TL_CONN_BODY, TL_CONN_BUSY, TL_CONN_IDLE, TL_CONN_PHASE_COUNT_
} tl_srv_conn_phase;

/* Why conns.c cut a connection: past the deadline of its phase (the first
 * TL_CONN_PHASE_COUNT_ values, a phase each), the client had closed its
 * side, its body fell behind --min-body-rate under pressure, or its body
 * was the slowest when another request needed room in --max-body-total. */
enum {
  TL_CONN_CUT_HALF_CLOSED = TL_CONN_PHASE_COUNT_,
  TL_CONN_CUT_BODY_RATE,
  TL_CONN_CUT_BODY_BUDGET,
  TL_CONN_CUT_COUNT_
};

#define TL_SRV_HTTP_CODES 21 /* distinct statuses counted; others go to the last slot */
#define TL_SRV_COMPILE_BUCKETS 14

typedef struct tl_srv_metrics {
  atomic_llong requests[TL_ROUTE_COUNT_][TL_SRV_HTTP_CODES];
  atomic_llong request_us[TL_ROUTE_COUNT_];
  atomic_llong response_bytes[TL_ROUTE_COUNT_];
  atomic_llong artifact_bytes;       /* artifact body bytes sent (GET, 200 and 206) */
  atomic_llong cache_hits, cache_misses;       /* build lookups of compile requests */
  atomic_llong artifact_mem_hits, artifact_db_hits, artifact_misses;
  atomic_llong compiles[TL_COMPILE_OUTCOME_COUNT_];
  atomic_llong compile_bucket[TL_SRV_COMPILE_BUCKETS + 1]; /* last: +Inf */
  atomic_llong compile_us_sum;
  atomic_llong singleflight_joins;
  atomic_llong rechecked_hits;       /* a queued compile found in the cache by its worker thread */
  atomic_llong overloaded;           /* compile requests refused with 503 */
  atomic_llong client_limited;       /* compile requests refused with 429 (--max-compiles-per-client) */
  atomic_llong evictions;
  atomic_llong worker_spawns;
  atomic_llong publish_failures;
  atomic_llong sources[TL_COMPILE_OUTCOME_COUNT_]; /* source jobs of the status pages, by outcome */
  /* the shared tier (tier.c) */
  atomic_llong tier_hits, tier_misses; /* lookups after a local miss */
  atomic_llong tier_errors;          /* failed or timed-out Redis calls */
  atomic_llong tier_corrupt;         /* entries that failed their hash check (deleted) */
  atomic_llong tier_publishes, tier_too_large;
  atomic_llong tier_lease_waits;     /* misses that waited for another replica's compile */
  atomic_llong tier_takeovers;       /* leases taken after their holder's expired */
  atomic_llong tier_wait_timeouts;   /* waits that ran out: compiled without a lease */
  atomic_llong queue_depth;          /* gauges */
  atomic_llong compiles_running;
  atomic_llong connections_suspended;
  atomic_llong body_bytes;           /* request bodies held (--max-body-total's count) */
  atomic_llong bodies_refused;       /* requests refused with 503 for --max-body-total */
  /* connections cut by conns.c, by tl_srv_conn_cut reason */
  atomic_llong connections_cut[TL_CONN_CUT_COUNT_];
} tl_srv_metrics;

void tl_srv_metrics_request(tl_srv_metrics *m, tl_srv_route route, int status, int64_t bytes,
                            int64_t us);
void tl_srv_metrics_compile(tl_srv_metrics *m, tl_srv_compile_outcome o, double seconds);

/* What /metrics shows besides the counters. */
typedef struct tl_srv_metrics_extra {
  const tl_cache_stats *cache; /* NULL when the stats could not be read */
  int workers, queue_capacity;
  int64_t memory_cache_bytes, memory_cache_entries;
  double uptime_s;
  const char *toolchain;       /* or NULL */
  bool draining;
  bool ready;                  /* what /readyz answers: 200 or 503 */
  bool ready_check[TL_READY_COUNT_];
  int tier_primaries, tier_up; /* 0, 0 without --tier */
} tl_srv_metrics_extra;

/* Appends the Prometheus text exposition (version 0.0.4) to b. */
void tl_srv_metrics_render(const tl_srv_metrics *m, const tl_srv_metrics_extra *x, tl_srv_buf *b);

/* ==== conns.c: connection deadlines ================================================
 * The phases of a connection and their deadlines (conns.c says which). */
typedef struct tl_srv_conns tl_srv_conns;
typedef struct tl_srv_conn tl_srv_conn;

/* Starts the sweeping thread, with the deadlines of cfg: --header-timeout,
 * --body-timeout, --idle-timeout, and under pressure (from 3/4 of
 * --max-connections open) --pressure-timeout and --min-body-rate, the
 * latter also while bodies hold over 3/4 of --max-body-total.  NULL on no
 * memory. */
tl_srv_conns *tl_srv_conns_new(const tl_srv_config *cfg, tl_srv_metrics *metrics);
void tl_srv_conns_free(tl_srv_conns *cs); /* after every connection closed; accepts NULL */
/* A connection accepted on fd, in phase HEAD; NULL on no memory (then it has
 * no deadlines: every function below accepts NULL). */
tl_srv_conn *tl_srv_conn_opened(tl_srv_conns *cs, int fd);
/* Before libmicrohttpd closes the descriptor.  Frees c. */
void tl_srv_conn_closed(tl_srv_conns *cs, tl_srv_conn *c);
/* Enters phase p (its clock starts now; no change when already in p). */
void tl_srv_conn_enter(tl_srv_conns *cs, tl_srv_conn *c, tl_srv_conn_phase p);
/* n more bytes of the request's body came in (for --min-body-rate). */
void tl_srv_conn_body_bytes(tl_srv_conns *cs, tl_srv_conn *c, size_t n);
/* The request on c holds delta more bytes of --max-body-total (less when
 * negative). */
void tl_srv_conn_body_reserved(tl_srv_conns *cs, tl_srv_conn *c, int64_t delta);
/* A request was refused room for bytes of body in --max-body-total: the
 * sweep cuts the slowest bodies to make room for its retry (conns.c). */
void tl_srv_conns_body_refused(tl_srv_conns *cs, int64_t bytes);
const char *tl_srv_conn_phase_name(tl_srv_conn_phase p);

/* ==== handles.c: tl_cache handles for threads ===================================
 * A tl_cache handle is for one thread at a time; the HTTP threads borrow one
 * per request and give it back.  Handles are opened on demand and kept. */
typedef struct tl_srv_handles tl_srv_handles;
tl_status tl_srv_handles_new(const char *path, const tl_cache_options *opts, tl_srv_handles **out,
                             tl_error *err);
/* Borrows a handle (opening one if none is free); NULL with err on failure. */
tl_cache *tl_srv_handles_get(tl_srv_handles *h, tl_error *err);
void tl_srv_handles_put(tl_srv_handles *h, tl_cache *c);
/* Closes every handle (all must have been given back). Accepts NULL. */
void tl_srv_handles_free(tl_srv_handles *h);

/* ==== artmem.c: verified artifacts in memory ======================================
 * Artifacts are immutable, so an artifact whose bytes were read from the
 * database and re-hashed can be served from memory; each entry is
 * re-read from the database (a use for LRU eviction there, a fresh hash
 * check, and the way an evicted artifact stops being served) once it is
 * older than the TTL.  Entries hold a ready libmicrohttpd response that
 * any number of connections share.  Bounded in bytes, LRU. */
typedef struct tl_srv_artmem tl_srv_artmem;
struct MHD_Response;

/* A borrowed artifact: its bytes and the shared 200 response carrying them
 * (with the artifact headers).  Valid until tl_srv_artref_release. */
typedef struct tl_srv_artref {
  const void *bytes;
  size_t n;
  struct MHD_Response *full;
  void *entry_; /* private */
} tl_srv_artref;

tl_srv_artmem *tl_srv_artmem_new(int64_t max_bytes, double ttl_s); /* NULL on no memory */
void tl_srv_artmem_free(tl_srv_artmem *m);                         /* accepts NULL */
/* Borrows id when it is in memory and younger than the TTL (a stale entry
 * is dropped); false otherwise. */
bool tl_srv_artmem_get(tl_srv_artmem *m, const char *id, tl_srv_artref *out);
/* Takes the verified bytes of id (malloc'd; ownership always passes, also on
 * failure) and borrows them back in *out, keeping them in memory when they
 * fit (an artifact over a quarter of the cache is not kept).  False only
 * when out of memory. */
bool tl_srv_artmem_put(tl_srv_artmem *m, const char *id, void *bytes, size_t n,
                       tl_srv_artref *out);
void tl_srv_artref_release(tl_srv_artref *r); /* accepts a zeroed ref */
void tl_srv_artmem_stats(tl_srv_artmem *m, int64_t *bytes, int64_t *entries);
void tl_srv_artifact_headers(struct MHD_Response *r, const char *id);

/* ==== pool.c + proc.c: compiling ====================================================== */

/* One diagnostic of a failed compile. */
typedef struct tl_srv_diag {
  char *pointer; /* JSON Pointer into the program, or NULL (malformed JSON: line and column) */
  int line, column;
  char *message;
} tl_srv_diag;

/* The outcome of compiling one key for one target.  Immutable once made;
 * shared by every request that waited for it (reference counted). */
typedef struct tl_srv_result {
  atomic_int refs;
  tl_error err;              /* err.code == TL_OK on success */
  tl_srv_diag *diags;
  int ndiags;
  bool diags_truncated;
  char key[65], artifact[65];
  int64_t size;
  double compile_ms;
  bool cached;               /* served from the cache, not compiled for this request */
  char *meta;                /* metadata JSON text (holds the toolchain's log) */
  char *source;              /* a source job's generated CUDA C or HIP C (NUL-terminated) */
} tl_srv_result;

tl_srv_result *tl_srv_result_new(void); /* refs = 1; NULL on no memory */
tl_srv_result *tl_srv_result_ref(tl_srv_result *r);
void tl_srv_result_unref(tl_srv_result *r); /* accepts NULL */
/* A result that is just an error. */
tl_srv_result *tl_srv_result_error(tl_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* What to compile: everything tl_compile needs, owned by the job.  A
 * source job (source true) generates the build's source only (no
 * toolchain, nothing published), for the status pages: it must give the
 * same build key, and the result's source is at most TL_SRV_SOURCE_MAX
 * bytes. */
typedef struct tl_srv_job {
  char key[65];
  bool source;
  char client[TL_SRV_CLIENT_MAX]; /* the address of the client that asked ("": none), for
                                     --max-compiles-per-client (pool.c) */
  char *manifest;           /* the key manifest (stored with the build) */
  char *program;            /* JSON text */
  size_t program_len;
  char *name;               /* the program's "name" (for the test hooks and the log) */
  char *target;
  char *options;            /* JSON object text, or NULL */
  char **define_names, **define_values;
  int ndefines;
} tl_srv_job;
void tl_srv_job_clear(tl_srv_job *j);

/* The compile worker process, as seen from the daemon. */
typedef struct tl_srv_proc {
  int pid; /* 0: none running */
  int fd;  /* the daemon's end of the socket */
  int jobs; /* compiles done by this process */
  bool ready; /* its start-up byte has been read (see tl_srv_proc_run) */
} tl_srv_proc;

/* How long a new worker may take to start (load NVRTC, warm it) before
 * its first job's own time-out starts. */
#define TL_SRV_WORKER_START_S 60
#define TL_SRV_KILL_WAIT_S 10 /* seconds a killed worker's processes get to die */

typedef struct tl_srv_proc_opts {
  const char *exe;          /* this program's path (/proc/self/exe read at start) */
  int64_t memory;           /* RLIMIT_AS; 0: none */
  double cpu_seconds;       /* RLIMIT_CPU per job */
  bool test_hooks;
} tl_srv_proc_opts;

/* Starts a worker process (this program with --worker-fd).  TL_IO on failure. */
tl_status tl_srv_proc_spawn(const tl_srv_proc_opts *o, tl_srv_proc *p, tl_error *err);
/* Runs one job in the worker, waiting at most timeout_s and returning
 * early (TL_BUSY "cancelled") when cancel_fd becomes readable (-1: none).
 * On success *out is a new result (which may itself carry a compile
 * error).  When the worker dies, hangs past the timeout or is cancelled it
 * is killed and reaped (p->pid becomes 0) and *out is an error result:
 * TL_INTERNAL for a crash, TL_TIMEOUT for a timeout.  Only fails (no
 * result) on no memory.  A new worker's start-up (up to
 * TL_SRV_WORKER_START_S, ended by the one byte it writes when it is
 * ready) is waited for first and is not counted in timeout_s. */
tl_status tl_srv_proc_run(tl_srv_proc *p, const tl_srv_job *job, double timeout_s, int cancel_fd,
                          tl_srv_compile_outcome *outcome, tl_srv_result **out,
                          void **binary, size_t *binary_size, tl_error *err);
/* Kills (SIGKILL) the worker and every process of its session (the tools
 * it started), and reaps it; a no-op when none. */
void tl_srv_proc_kill(tl_srv_proc *p);
/* Kills every process of session sid (a worker's pid; the worker may be
 * gone already, leaving orphans) and waits until each has died, at most
 * TL_SRV_KILL_WAIT_S (a process stuck in the kernel: then it says so on
 * standard error). */
void tl_srv_proc_kill_session(int sid);
/* Warms NVRTC: one compile of a one-line kernel for the first NVIDIA
 * target of targets (a NULL-terminated list, or NULL) through the CUDA back
 * end, then one through the PTX back end (nvJitLink) for the first target
 * it takes (its failure is not reported: nvJitLink may be missing), so that NVRTC's
 * lazily started parts (front end, NVVM, ptxas) start before a worker's
 * first job instead of inside it (bench/compile.md).  *target gets the
 * target compiled for ("" when none: AMD targets need no warming, clang
 * and ld.lld run as processes of their own per compile).  TL_OK, or the
 * compile's failure in *err. */
tl_status tl_srv_worker_warm(const char *const *targets, char *target, size_t target_size, tl_error *err);
/* The worker's main loop (tlserverd --worker-fd N): returns the exit status. */
int tl_srv_worker_main(int fd, const tl_srv_proc_opts *o);

/* ==== tier.c: the shared cache tier on Redis ===========================================
 * See tier.c for the keys, the entry format and the protocol.  A
 * tl_srv_tier is shared by every thread; a tl_srv_tier_conn (its
 * connections) belongs to one thread. */
typedef struct tl_srv_tier tl_srv_tier;
typedef struct tl_srv_tier_conn tl_srv_tier_conn;

typedef struct tl_srv_tier_opts {
  const char *const *urls;  /* redis://HOST:PORT[/DB] or redis-sentinel://HOST:PORT/NAME */
  int nurls;                /* 1..TL_SRV_TIER_MAX */
  double timeout_s, ttl_s, lease_s;
  int64_t max_entry;
  const char *auth_file;          /* the primaries' password file (--tier-auth-file), or NULL */
  const char *sentinel_auth_file; /* the Sentinels' (--tier-sentinel-auth-file), or NULL */
  tl_srv_metrics *metrics;
} tl_srv_tier_opts;

/* A compile lease of this replica (tl_srv_tier_acquire fills it). */
typedef struct tl_srv_tier_lease {
  bool held;
  int shard;
  char key[65];
  char token[64];
} tl_srv_tier_lease;

typedef enum tl_srv_tier_outcome {
  TL_TIER_HIT,     /* the build, checked, is in *b and *bytes */
  TL_TIER_COMPILE, /* compile it (holding the lease when lease->held), then publish */
} tl_srv_tier_outcome;

/* Parses the URLs (TL_INVALID_ARG naming the bad one) and starts the lease
 * renewer.  Connects lazily: a Redis that is down is not an error here. */
tl_status tl_srv_tier_new(const tl_srv_tier_opts *o, tl_srv_tier **out, tl_error *err);
void tl_srv_tier_free(tl_srv_tier *t); /* accepts NULL */
tl_srv_tier_conn *tl_srv_tier_conn_new(tl_srv_tier *t); /* NULL on no memory */
void tl_srv_tier_conn_free(tl_srv_tier_conn *c);       /* accepts NULL */
/* After a local miss of key: a checked hit (*b: tl_cache_build_free;
 * *bytes: free), or compile: with the lease when *lease says so, else
 * because the tier is down, the wait for another replica's compile
 * outlasted wait_s or *cancel became true (shutdown; cancel may be NULL).
 * Waiting takes over a lease whose holder died. */
tl_srv_tier_outcome tl_srv_tier_acquire(tl_srv_tier_conn *c, const char *key, double wait_s,
                                        const atomic_bool *cancel, tl_srv_tier_lease *lease,
                                        tl_cache_build **b, void **bytes, size_t *n);
/* After the compile: writes the build (b != NULL, unless over the entry
 * limit), releases the lease and wakes the waiters; b == NULL (the compile
 * failed): releases the lease and wakes the waiters, who then try it.
 * Without a lease (lease->held false) it writes b under its own key's
 * primary, as for a build imported from a bundle (api.c).  Failures of the
 * tier are counted, never returned as errors: 1 the build was written, 0
 * not (b == NULL, or over --tier-max-entry), -1 Redis failed or no memory. */
int tl_srv_tier_publish(tl_srv_tier_conn *c, tl_srv_tier_lease *lease, const tl_cache_build *b,
                        const void *bytes, size_t n);
/* For GET /v1/kernels/KEY (key) or /v1/artifacts/ID (artifact; key NULL)
 * on a local miss: the build from the tier, checked (ownership as for
 * tl_srv_tier_acquire), on a connection of its own.  TL_NOT_FOUND when the
 * tier lacks it or cannot be reached; TL_NOMEM. */
tl_status tl_srv_tier_fetch(tl_srv_tier *t, const char *key, const char *artifact,
                           tl_cache_build **b, void **bytes, size_t *n);
/* Primaries up (the last call to each succeeded); *total: all of them. */
int tl_srv_tier_up(tl_srv_tier *t, int *total);
/* Appends {"state": "up"|"degraded"|"down", "primaries": [{url, up, error}]}. */
void tl_srv_tier_json(tl_srv_tier *t, tl_srv_buf *b);
/* The primary (index into the URLs) that owns key. */
int tl_srv_tier_shard_of(const tl_srv_tier *t, const char *key);
/* A small record (a tuning, api.c) under key (64 hex) in the tier, with the
 * entries' TTL: set, or get (*value malloc'd).  TL_NETWORK when Redis cannot
 * be used, TL_NOT_FOUND, TL_NOMEM.  Records are not hashed: their readers
 * check them (a tuning record's key is the hash of its own fields). */
tl_status tl_srv_tier_record_set(tl_srv_tier *t, const char *key, const char *value);
tl_status tl_srv_tier_record_get(tl_srv_tier *t, const char *key, char **value);

typedef struct tl_srv_pool tl_srv_pool;

typedef struct tl_srv_pool_opts {
  tl_srv_proc_opts proc;
  int workers, queue;
  int max_per_client;       /* --max-compiles-per-client (0: no limit) */
  double compile_timeout;
  double source_timeout;    /* a source job's bound (at most compile_timeout) */
  const char *db_path;
  const tl_cache_options *cache_opts;
  tl_srv_metrics *metrics;
  tl_srv_tier *tier;        /* NULL: no shared tier */
} tl_srv_pool_opts;

/* Called once per submitted item when its result is in, from a pool
 * thread (or from the submitting thread during tl_srv_pool_cancel).  The
 * callee owns the reference to res. */
typedef void (*tl_srv_done_fn)(void *user, int index, tl_srv_result *res);

tl_status tl_srv_pool_new(const tl_srv_pool_opts *o, tl_srv_pool **out, tl_error *err);
/* Submits n jobs (their keys need not be distinct).  Each one joins the
 * flight of its key (and kind: compile or source) when one is queued or
 * running (single-flight) or starts a new one; the jobs of new flights are
 * moved into the pool (cleared in jobs[]).  All or nothing: when the queue
 * has no room for every new flight, or a new source flight would make more
 * than TL_SRV_SOURCE_FLIGHTS, nothing is submitted and TL_BUSY is returned
 * (err says which); after shutdown began, TL_BUSY too.  done is called once per job, possibly
 * before this returns. *joined receives how many joined a flight. */
tl_status tl_srv_pool_submit(tl_srv_pool *p, tl_srv_job *jobs, const int *indexes, int n,
                             tl_srv_done_fn done, void *user, int *joined, tl_error *err);
/* Shutdown: refuses new work, cancels what is queued (TL_BUSY results),
 * lets running compiles finish for up to grace_s, then kills them
 * (TL_BUSY results), and joins the threads.  Every done callback has been
 * called when this returns. */
void tl_srv_pool_shutdown(tl_srv_pool *p, double grace_s);
void tl_srv_pool_free(tl_srv_pool *p); /* after shutdown; accepts NULL */
int tl_srv_pool_live_workers(tl_srv_pool *p);

/* ==== status.c: the status pages ======================================================
 * The ring of the last TL_SRV_RECENT per-target outcomes of compile
 * requests (each with at most TL_SRV_RECENT_DIAGS diagnostics), shown by
 * GET /status with the TL_SRV_STATUS_BUILDS most recently used builds, and
 * kept across restarts in the cache database (one note per slot, written
 * by the background thread). */
#define TL_SRV_RECENT 64
#define TL_SRV_RECENT_DIAGS 8
#define TL_SRV_STATUS_BUILDS 25
typedef struct tl_srv_recent tl_srv_recent;
tl_srv_recent *tl_srv_recent_new(void);     /* NULL on no memory */
void tl_srv_recent_free(tl_srv_recent *r); /* accepts NULL */
/* Records the outcome of one target of a compile request (name: the
 * program's name, or NULL).  Copies what it keeps, cut to fixed sizes. */
void tl_srv_recent_add(tl_srv_recent *r, const char *name, const char *target,
                       const struct tl_srv_result *res);
/* Reads the outcomes a previous run saved in c (at start; what cannot be
 * read is skipped).  Returns how many. */
int tl_srv_recent_load(tl_srv_recent *r, tl_cache *c);
/* Writes the slots changed since the last save (the background thread,
 * once a second and at the stop).  Failures are left for the next save. */
void tl_srv_recent_save(tl_srv_recent *r, tl_cache *c);

/* ==== http.c + api.c: the daemon and its requests ======================================= */
struct MHD_Daemon;
struct MHD_Connection;

typedef struct tl_srv {
  tl_srv_config cfg;
  struct MHD_Daemon *mhd;
  int listen_fd;              /* until libmicrohttpd takes it; -1 after */
  int port;
  tl_srv_auth *auth;
  tl_srv_pool *pool;
  tl_srv_artmem *artmem;
  tl_srv_handles *handles;
  tl_srv_conns *conns;
  tl_srv_tier *tier;          /* NULL without --tier */
  tl_srv_recent *recent;      /* status.c: the last compile outcomes */
  tl_cache_options cache_opts;
  tl_srv_metrics metrics;
  const char *const *targets; /* offered by the compiler; NULL when no toolchain */
  const char *toolchain;
  char toolchain_error[TL_ERROR_MESSAGE_MAX];
  const char *nvjitlink;      /* the PTX back end's assembler, or NULL (then nvjitlink_error) */
  char nvjitlink_error[TL_ERROR_MESSAGE_MAX];
  const char *ptxas;          /* the PTX back end's whole-program assembler (setmaxnreg), or NULL (then ptxas_error) */
  char ptxas_error[TL_ERROR_MESSAGE_MAX];
  atomic_bool draining;
  atomic_int active;          /* requests begun and not yet completed */
  int64_t start_us;
  char *tls_cert_pem, *tls_key_pem;
  char *exe;                  /* this program, for the workers */
  tl_srv_ready ready;         /* ready.c; probed by the background thread */
  pthread_t evict_thread;
  bool evict_started;
  pthread_mutex_t evict_mu;
  pthread_cond_t evict_cv;
  bool evict_stop;
} tl_srv;

typedef struct tl_srv_compile tl_srv_compile; /* api.c's state of one compile request */

/* One request, from its first byte to its completion (libmicrohttpd's
 * per-request pointer). */
typedef struct tl_srv_req {
  tl_srv *srv;
  struct MHD_Connection *conn;
  tl_srv_route route;
  const char *method;       /* libmicrohttpd's strings, valid during the request */
  const char *url;
  char raw_uri[512];        /* for the log (truncated) */
  bool head;
  int64_t start_us;
  char *body;
  size_t body_len, body_cap;
  int64_t body_max;         /* its route's limit: --max-body, or --max-bundle for /v1/bundles */
  bool body_route;          /* its route takes a body (the others' is read and dropped) */
  bool body_overflow;        /* over body_max: answer 413 at the end */
  bool body_busy;           /* over --max-body-total: answer 503 at the end */
  int64_t content_length;   /* the header's value; -1: none (chunked or no body) */
  int64_t body_reserved;    /* bytes counted against --max-body-total */
  bool bad_uri;             /* the path escapes a control character (%00) */
  bool close;               /* answer with Connection: close (bad framing) */
  bool responded;           /* a response is queued */
  int status;               /* what was answered (0: none yet) */
  int64_t bytes;            /* body bytes of the answer */
  tl_srv_buf keys;          /* build keys, comma-separated, for the log */
  tl_srv_compile *compile;
} tl_srv_req;

/* The address of conn's client as text (what --max-connections-per-ip and
 * --max-compiles-per-client count by); "" when unknown. */
void tl_srv_client_addr(struct MHD_Connection *conn, char out[TL_SRV_CLIENT_MAX]);
/* Queues resp (consuming the caller's reference) with status; bytes is the
 * body size for the log and metrics. */
int tl_srv_respond(tl_srv_req *r, int status, struct MHD_Response *resp, int64_t bytes);
/* The same without consuming a reference (for responses shared by many
 * connections, artmem.c's). */
int tl_srv_respond_shared(tl_srv_req *r, int status, struct MHD_Response *resp, int64_t bytes);
/* Queues a JSON answer; takes b's data (b is left empty).  500 on no memory. */
int tl_srv_respond_json(tl_srv_req *r, int status, tl_srv_buf *b);
/* Queues {"error": {...}} for err with the status table's HTTP status. */
int tl_srv_respond_error(tl_srv_req *r, const tl_error *err);
/* Queues an error with an explicit HTTP status and wire code (for the HTTP
 * errors the status table has no row for: 405, 415, 416). */
int tl_srv_respond_http_error(tl_srv_req *r, int status, const char *code, const char *message);
/* Appends the "error" object's members (without braces) for err. */
void tl_srv_error_members(tl_srv_buf *b, const tl_error *err);

/* api.c: the endpoints, called on a request's last handler call (the body,
 * if any, is complete), and again after a suspended compile resumed. */
int tl_srv_api_dispatch(tl_srv_req *r);
void tl_srv_api_free(tl_srv_req *r); /* frees r->compile */
/* Submits one job to the pool for r and suspends r's connection until its
 * result is in; tl_srv_api_dispatch then calls the route's handler again,
 * which finds the result with tl_srv_api_result.  TL_BUSY (the pool is
 * full or stopping), TL_NOMEM: nothing was suspended.  The job is moved. */
tl_status tl_srv_api_wait_job(tl_srv_req *r, tl_srv_job *job, tl_error *err);
/* The result tl_srv_api_wait_job waited for, once resumed; else NULL. */
const struct tl_srv_result *tl_srv_api_result(const tl_srv_req *r);
/* The build of key from the local cache, or else from the shared tier
 * (then stored locally): *out (tl_cache_build_free) or TL_NOT_FOUND, TL_IO,
 * ... with a message in err. */
tl_status tl_srv_find_build(tl_srv *s, const char *key, tl_cache_build **out, tl_error *err);
/* The cache's statistics (tl_cache_get_stats on a pooled handle); false
 * when they cannot be read. */
bool tl_srv_cache_stats(tl_srv *s, tl_cache_stats *st);
/* status.c: GET /status and /status/builds/KEY[/source]. */
int tl_srv_status_dispatch(tl_srv_req *r);

/* Opens the cache, loads tokens and TLS files, starts the workers, the
 * HTTP threads and the eviction thread.  cfg is copied (its strings must
 * outlive the server).  exe is this program's path (for the workers).
 * TL_IO, TL_INVALID_ARG, ... with a message. */
tl_status tl_srv_start(const tl_srv_config *cfg, const char *exe, tl_srv **out, tl_error *err);
int tl_srv_port(const tl_srv *s); /* the port it listens on */
/* Graceful stop: stop accepting, finish or cancel compiles, answer what
 * is suspended, close connections, stop threads, close the cache.  Frees s. */
void tl_srv_stop(tl_srv *s);

#endif
