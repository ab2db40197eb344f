/*
 * tlclient.h - libtlclient, the thin client of the tile-kernel compile
 * service (docs/DESIGN.md section 6): what an application links to get its
 * kernels from tlserverd at start-up, and what the `tlclient` command is
 * built on.
 *
 *   tl_client    the connection to one server (libcurl, keep-alive,
 *                time-outs, retries with backoff and jitter on 503 and
 *                connection errors, honouring Retry-After), a bearer token,
 *                TLS with a CA file, and a per-user local content-addressed
 *                cache (SQLite, libtlcache) so that a warm start
 *                transfers no binary (one GET /v1/info checks the
 *                server's compiler) and an offline start works;
 *   tl_artifact  one build as the client holds it: build key, target,
 *                artifact id, the verified binary (cubin, PTX or HSACO) and its
 *                metadata (entry, parameters, launch configuration);
 *   tl_device    a GPU opened through the CUDA driver (libcuda.so.1 opened
 *                with dlopen: nothing of CUDA is needed to build or link),
 *                or, when there is no CUDA device, an AMD GPU through the
 *                HIP runtime (libamdhip64, likewise opened with dlopen);
 *   tl_kernel    an artifact loaded on a device, launched from its
 *                metadata: the grid is computed from the scalar arguments,
 *                dynamic shared memory above 48 KiB is enabled on the
 *                function, tensor pointers are checked against their
 *                promised alignment.
 *
 * Where a kernel comes from (tl_client_get): the local cache is looked up
 * first by a request key, the SHA-256 of the canonical request (program
 * with formatting and "x-" members removed, constant overrides, target,
 * options; proto/tl_json.h) and of the compiler identity of the server
 * (/v1/info's "compiler", a digest of the compiler's code: see
 * proto/kernel-meta.md section 4).  A client learns that identity once
 * per tl_client from GET /v1/info (one try, no retries, at most 10 s) and
 * from every compile answer, and remembers it per server URL in the local
 * cache; when the server cannot be reached (or the client is offline) the
 * remembered one is used.  So after a server upgrade that changed the
 * generated code, every request key changes and the old entries are
 * misses; an offline start still finds what the last server built.  A hit
 * transfers nothing but that GET /v1/info, which an offline client skips.
 * On a miss the server compiles
 * or finds the build (POST /v1/compile), the binary is fetched by its
 * artifact id (GET /v1/artifacts/ID) unless the local cache already holds
 * those bytes, its SHA-256 is checked against the id, and both the build
 * (under its build key) and the request key are stored locally.  Every read
 * from the local cache re-hashes the bytes; a damaged entry is dropped and
 * fetched again.  When the server cannot be reached and the request key is
 * not in the local cache, the build key is computed locally with the
 * compiler's front end (only possible where NVRTC of the server's version
 * is installed) and looked up; otherwise the error says that the server
 * could not be reached and that the local cache has no such build.
 *
 * Status and errors: every function that can fail returns a tl_status
 * (proto/tl_status.h, with tl_strerror for its message) and fills the
 * tl_error given (which may be NULL) with a message that says what failed
 * and where: the program, the target and the server.  Network failures
 * after the retries are TL_NETWORK, a server still overloaded after them
 * TL_BUSY, an artifact whose bytes do not hash to its id TL_CORRUPT, a
 * machine without a GPU or driver TL_NO_DEVICE, and the server's own
 * answers keep their code (TL_BAD_PROGRAM, TL_UNAUTHORIZED, ...).
 *
 * Ownership: a function named _new, _open, _get, _fetch, _load or _dup
 * gives the caller an object to release with the matching _free (which
 * accepts NULL).  Strings passed in are copied unless said otherwise;
 * strings returned are owned by the object they come from and live as
 * long as it does.
 *
 * Threads: a tl_client, tl_artifact or tl_kernel may be used by one thread
 * at a time; use tl_client_dup to give each thread its own client (they may
 * share the local cache file).  Different objects may be used from
 * different threads at once.  A tl_device may be shared by threads.
 */
#ifndef TL_CLIENT_H
#define TL_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include "tl_error.h"
#include "tl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_CLIENT_VERSION "0.1.0"

/* ---- limits ---------------------------------------------------------------- */
#define TL_CLIENT_URL_MAX 2048          /* bytes of the server URLs, commas included */
#define TL_CLIENT_SERVERS_MAX 16        /* server URLs of one client (replicas) */
#define TL_CLIENT_TOKEN_MAX 256         /* bytes of a bearer token */
#define TL_CLIENT_PATH_MAX 4096         /* bytes of a file path */
#define TL_CLIENT_TARGET_MAX 32         /* bytes of a target name */
#define TL_CLIENT_PROGRAM_MAX (4u << 20) /* bytes of a program's JSON text */
#define TL_CLIENT_DEFINES_MAX 1024      /* constant overrides of one request */
#define TL_CLIENT_TARGETS_MAX 16        /* targets of one tl_client_compile */
#define TL_CLIENT_ARTIFACT_MAX ((size_t)256 << 20) /* bytes of one binary */
#define TL_CLIENT_RETRIES_MAX 20
#define TL_KERNEL_PARAMS_MAX 256
#define TL_KERNEL_DIMS_MAX 8

/* ==== the client ============================================================= */

typedef struct tl_client tl_client;

/* Makes a client with the defaults: server http://127.0.0.1:8470, no
 * token, the system's CA store, connect time-out 5 s, request time-out
 * 300 s, 4 retries with a backoff from 200 ms doubling up to 5 s, and the
 * local cache at $XDG_CACHE_HOME/tlclient/cache.db (or
 * ~/.cache/tlclient/cache.db; none when neither variable is set) capped at
 * 1 GiB.  Nothing is read from the environment otherwise and nothing is
 * opened until it is needed.  On success *out owns the client
 * (tl_client_free); on failure (TL_NOMEM, TL_INTERNAL when libcurl does not
 * initialise) *out is NULL. */
tl_status tl_client_new(tl_client **out, tl_error *err);

/* A new client with the same settings as c (for another thread).  Nothing
 * is shared but the local cache file.  Failure as for tl_client_new. */
tl_status tl_client_dup(const tl_client *c, tl_client **out, tl_error *err);

/* Closes the connections and the local cache and frees c.  NULL is fine. */
void tl_client_free(tl_client *c);

/* ---- settings -----------------------------------------------------------------
 * Each setter checks its value: a bad one returns TL_INVALID_ARG (or
 * TL_TOO_LARGE over a limit above) and leaves the old setting in place.
 * Strings are copied. */

/* The server's base URL, http:// or https://, with an optional path prefix
 * ("https://kernels.example.com:8470/tl").  A trailing '/' is dropped.
 * Several replicas of one cluster (tlserverd --tier): "URL1,URL2,..." (at
 * most TL_CLIENT_SERVERS_MAX); requests go to the first, and a request that
 * cannot reach one, or is answered 503/429, goes on to the next within the
 * same retries (a full round of the list waits the backoff; the one that
 * answered stays current). */
tl_status tl_client_set_server(tl_client *c, const char *url, tl_error *err);

/* The bearer token sent with every request (Authorization: Bearer TOKEN);
 * NULL or "" sends none.  At most TL_CLIENT_TOKEN_MAX printable ASCII
 * characters without spaces. */
tl_status tl_client_set_token(tl_client *c, const char *token, tl_error *err);

/* A PEM file of the certificate authorities that may sign the server's
 * certificate, instead of the system's store; NULL goes back to the
 * system's.  The file is read when the first HTTPS request is made. */
tl_status tl_client_set_ca_file(tl_client *c, const char *path, tl_error *err);

/* Time allowed to connect (1 ms to 10 min), and for a whole request
 * including the transfer and the server's compile (1 ms to 24 h).  The
 * request's time-out bounds all its tries and the waits between them: a
 * retry whose wait (backoff or the server's Retry-After) would end past it
 * is not made, and the request fails then (TL_BUSY after 503/429,
 * TL_NETWORK after a connection error) saying so. */
tl_status tl_client_set_connect_timeout_ms(tl_client *c, long ms, tl_error *err);
tl_status tl_client_set_timeout_ms(tl_client *c, long ms, tl_error *err);

/* How many times a request is tried again after a connection error or an
 * answer 503/429 (0 to TL_CLIENT_RETRIES_MAX).  Before try n (from 1) the
 * client waits a random time between half and all of min(max_ms, base_ms *
 * 2^(n-1)), or, when the server sent Retry-After, at least that many
 * seconds (capped at 60 s) plus such a random part. */
tl_status tl_client_set_retries(tl_client *c, int retries, tl_error *err);
/* base_ms 1 to 60000, max_ms base_ms to 600000. */
tl_status tl_client_set_backoff_ms(tl_client *c, long base_ms, long max_ms, tl_error *err);

/* The local cache's SQLite file (created with its directories when first
 * used); NULL turns the local cache off. */
tl_status tl_client_set_cache_path(tl_client *c, const char *path, tl_error *err);

/* Cap on the local cache's artifact bytes (least recently used builds are
 * evicted after each store); 0 means no cap.  At most 2^50. */
tl_status tl_client_set_cache_max_bytes(tl_client *c, int64_t bytes, tl_error *err);

/* A bundle file (proto/bundle.md: builds, their manifests and metadata, and
 * the request keys that name them, as `tlclient bundle create` writes it)
 * that the client reads its kernels from before anything else, read-only:
 * nothing of it is copied into the local cache.  The file is mapped and
 * checked whole here (every checksum, key and reference: two SHA-256
 * passes over the file, the entries' and the trailer's; 0.14 s for a 100
 * MiB bundle on the build machine, `tlclient bundle verify`), so a damaged
 * or truncated bundle fails now, with the reason, and not at a launch.
 * tl_client_get and its variants then look up the request's key computed
 * with the compiler identity of the bundle's builds; a hit is answered with
 * no network at all (not even GET /v1/info), so an application starts
 * offline from a bundle on a machine with only the GPU driver; a miss goes
 * on as without a bundle.  tl_client_fetch_key finds the bundle's builds
 * by their build keys too.  Clients made by tl_client_dup share the
 * mapping (it is closed with the last of them).  NULL closes the bundle.  The file must not
 * change while it is set.  Errors: those of the bundle's check
 * (TL_CORRUPT, TL_UNSUPPORTED for another format version, TL_INVALID_ARG,
 * TL_TOO_LARGE; the message names the entry), TL_IO. */
tl_status tl_client_set_bundle(tl_client *c, const char *path, tl_error *err);
const char *tl_client_bundle(const tl_client *c); /* its path, or NULL */

/* Offline (non-zero): never contact the server; everything comes from the
 * local cache or fails with TL_NETWORK. */
tl_status tl_client_set_offline(tl_client *c, int offline, tl_error *err);

/* A function that receives one line (no newline) for each event worth a
 * log: a retry and why, a damaged local entry dropped, a local cache that
 * cannot be used, an offline fallback.  NULL turns it off (the default).
 * Called on the thread using the client. */
typedef void (*tl_client_log_fn)(void *user, const char *line);
void tl_client_set_log(tl_client *c, tl_client_log_fn fn, void *user);

/* Current settings.  The strings belong to c and change with the setters;
 * tl_client_cache_path is NULL when the local cache is off. */
const char *tl_client_server(const tl_client *c);
const char *tl_client_cache_path(const tl_client *c);
int64_t tl_client_cache_max_bytes(const tl_client *c);

/* Counters since tl_client_new, for diagnostics and tests. */
typedef struct tl_client_stats {
  int64_t requests;      /* HTTP requests completed (any status), retries included */
  int64_t connections;   /* new connections opened (the others reused a kept-alive one) */
  int64_t retries;       /* tries after the first */
  int64_t local_hits;    /* builds answered from the local cache */
  int64_t local_misses;  /* local lookups that found nothing (or a damaged entry) */
  int64_t local_dropped; /* damaged local entries dropped */
  int64_t bytes_fetched; /* artifact bytes downloaded */
} tl_client_stats;
void tl_client_get_stats(const tl_client *c, tl_client_stats *out);

/* ==== requests ================================================================ */

/* A constant override, as tlc's -D NAME=VALUE: value is JSON text of a
 * number or a boolean ("256", "0.5", "true"). */
typedef struct tl_client_define {
  const char *name;
  const char *value;
} tl_client_define;

/* A program to build.  Everything is borrowed for the call. */
typedef struct tl_client_request {
  const char *program;       /* Tile IR v1 JSON text */
  size_t program_len;        /* bytes of program; 0 means strlen(program) */
  const char *name;          /* how messages name it (a file name); NULL: the program's "name" */
  const tl_client_define *defines;
  int ndefines;              /* 0 to TL_CLIENT_DEFINES_MAX */
  const char *options_json;  /* NULL, or a JSON object of compiler options */
} tl_client_request;

/* Where a tl_artifact came from. */
typedef enum tl_source {
  TL_SOURCE_LOCAL = 1,     /* the local cache: no network */
  TL_SOURCE_SERVER_CACHE,  /* the server had it */
  TL_SOURCE_COMPILED,      /* the server compiled it for this request */
  TL_SOURCE_BUNDLE,        /* the client's bundle (tl_client_set_bundle): no network */
} tl_source;
const char *tl_source_name(tl_source s); /* "local", "server-cache", "compiled", "bundle" */

/* ---- one build ------------------------------------------------------------------- */
typedef struct tl_artifact tl_artifact;

/* The build of req for target ("sm_90", "compute_80", ...), from the local
 * cache or the server as described at the top, with its binary verified.
 * On success *out is the caller's (tl_artifact_free); on failure NULL.
 * Errors: TL_INVALID_ARG / TL_TOO_LARGE for a bad request or target,
 * TL_BAD_JSON when the program is not JSON (checked here), the server's
 * errors (TL_BAD_PROGRAM with its diagnostics in the message,
 * TL_UNSUPPORTED for a target it does not offer, TL_LIMIT, TL_TOOLCHAIN,
 * TL_UNAUTHORIZED, TL_FORBIDDEN, TL_TIMEOUT), TL_NETWORK / TL_BUSY when the
 * server cannot be used and the local cache has no such build, TL_CORRUPT
 * when the server sends bytes that do not match their id, TL_NOMEM. */
tl_status tl_client_get(tl_client *c, const tl_client_request *req, const char *target,
                        tl_artifact **out, tl_error *err);

/* As tl_client_get, picking the target for a GPU of architecture arch
 * (10 * major + minor compute capability, e.g. 90): the exact cubin for it
 * -- sm_ARCHa where that variant has instructions the compiler uses
 * (sm_90a: wgmma), else sm_ARCH -- when the local cache has it or the
 * server offers it; for sm_ARCHa, else the cubin sm_ARCH (the server does
 * not offer sm_ARCHa, or it cannot be reached and the local cache has
 * sm_ARCH, as prebuilt for it); else PTX for the JIT: compute_ARCH, or the
 * newest compute_NN below ARCH that the server offers.
 * Errors as for tl_client_get; TL_UNSUPPORTED when the server offers
 * nothing that runs on arch. */
tl_status tl_client_get_for_arch(tl_client *c, const tl_client_request *req, int arch,
                                 tl_artifact **out, tl_error *err);

/* A build by its key: the local cache, else GET /v1/kernels/KEY and the
 * artifact.  TL_INVALID_ARG for a key that is not 64 lowercase hex
 * characters, TL_NOT_FOUND when the server has no such build, TL_NETWORK
 * when the server cannot be reached and the local cache does not have it. */
tl_status tl_client_fetch_key(tl_client *c, const char *key, tl_artifact **out, tl_error *err);

/* The bytes of an artifact by id: the local cache, else GET
 * /v1/artifacts/ID; checked against id either way.  On success *bytes is
 * malloc'd (free()) and *n its size; on failure NULL and 0.  Errors as for
 * tl_client_fetch_key, and TL_CORRUPT. */
tl_status tl_client_fetch_artifact(tl_client *c, const char *id, void **bytes, size_t *n,
                                   tl_error *err);

/* The compiler identity of c's server ("tlc 0.1.0+3f1c2a9e8d7b6c5a"), the
 * compiler line of its build keys' manifests: learned from its answers,
 * else asked once (GET /v1/info), else the one the local cache remembers
 * for this server; "" when none is known.  Owned by c. */
const char *tl_client_compiler_id(tl_client *c);

/* The key manifest of the build with this key (proto/kernel-meta.md
 * section 4: the canonical text the key hashes, which explains a miss):
 * from the local cache when it holds the manifest itself (a build fetched
 * by key), else GET /v1/kernels/KEY, without the binary.  *manifest is
 * malloc'd (the caller frees it); *where (may be NULL) is TL_SOURCE_LOCAL
 * or TL_SOURCE_SERVER_CACHE.  TL_NOT_FOUND when the server has no such
 * build; TL_NETWORK when it cannot be reached (or offline) and the local
 * cache lacks it. */
tl_status tl_client_build_manifest(tl_client *c, const char *key, char **manifest, tl_source *where, tl_error *err);

/* ---- several targets at once, on the server only (prebuilding) ---------------- */

/* What the server answered for one target.  Read-only; owned by the array
 * tl_client_compile returned. */
typedef struct tl_target_result {
  const char *target;
  tl_status status;        /* TL_OK, or why this target failed */
  const char *message;     /* on failure: the server's message with its diagnostics; else "" */
  char key[65];            /* on success: the build key */
  char artifact[65];       /* on success: the artifact id */
  int64_t size;            /* on success: bytes of the artifact */
  int cached;              /* on success: 1 found in the server's cache, 0 compiled now */
  double compile_ms;       /* on success: the compile's wall time */
  const char *metadata;    /* on success: the kernel metadata (JSON text); else NULL */
} tl_target_result;

/* POSTs req with targets[0..ntargets) (1 to TL_CLIENT_TARGETS_MAX) in one
 * request and gives one result per target, in order, in *results (free with
 * tl_target_results_free(*results, ntargets)).  Returns TL_OK when the
 * server answered per target, also when some targets failed (see each
 * status); the request as a whole failing (a program that is not JSON, a
 * target the server does not offer, the token, the network) returns that
 * error and *results is NULL.  The
 * local cache is not used: this is for filling the server's cache. */
tl_status tl_client_compile(tl_client *c, const tl_client_request *req, const char *const *targets,
                            int ntargets, tl_target_result **results, tl_error *err);
void tl_target_results_free(tl_target_result *results, int n);

/* Turns a successful result into an artifact: the binary from the local
 * cache or the server, verified, and stored in the local cache under the
 * result's build key.  Errors as for tl_client_fetch_key; TL_INVALID_ARG for
 * a failed result. */
tl_status tl_client_fetch_result(tl_client *c, const tl_target_result *result, tl_artifact **out,
                                 tl_error *err);

/* As tl_client_fetch_result, and also stores req's request key for
 * result->target in the local cache, so that tl_client_get of the same
 * request (and tl_client_get_for_arch for sm_NN) finds the build with no
 * network: what `tlclient prebuild --fetch` and `tlclient compile -o` do.
 * req must be the request that gave result (tl_client_compile). */
tl_status tl_client_fetch_result_for(tl_client *c, const tl_client_request *req, const tl_target_result *result,
                                     tl_artifact **out, tl_error *err);

/* ---- bundles into and out of the local cache (`tlclient bundle`) -------------- */

/* What tl_client_bundle_import and tl_client_bundle_create did. */
typedef struct tl_bundle_counts {
  int builds;        /* builds stored (import) or written (create) */
  int requests;      /* request keys likewise */
  int artifacts;     /* distinct binaries */
  int skipped;       /* create: local entries left out (another compiler, no manifest, damaged) */
  char compiler[129];/* the compiler identity of the builds */
} tl_bundle_counts;

/* Imports the bundle at path into the local cache: every build (with its
 * manifest, so `tlclient explain` works offline) and every request key,
 * after the whole bundle was checked as by tl_client_set_bundle; and
 * remembers the bundle's compiler identity, so that a later offline start
 * (or one with the server unreachable) finds the imported requests also
 * when the last server seen ran another compiler.  counts may be NULL.
 * Errors: those of the check; TL_INVALID_ARG without a local cache;
 * TL_IO, TL_BUSY from the cache (what was stored before stays). */
tl_status tl_client_bundle_import(tl_client *c, const char *path, tl_bundle_counts *counts, tl_error *err);

/* Writes a bundle of the local cache's builds by the compiler identity
 * compiler (NULL: the server's, as tl_client_compiler_id gives it) and of
 * every request key naming one of them, to path (through path.tmp and a
 * rename).  A build stored without its key manifest (one that came from a
 * compile answer) gets it rebuilt from a request entry naming it and the
 * toolchain of its metadata (tl_compile_key_as), kept when it hashes to
 * the build's key, else from the server (GET /v1/kernels/KEY); when
 * neither gives it, or its bytes are damaged, or a request entry was
 * stored by an older client without its program, the entry is left out
 * and counted in skipped (the log says which and why).  Errors:
 * TL_INVALID_ARG without a local cache or compiler identity, TL_NOT_FOUND
 * when no build of that compiler is there, TL_IO, TL_TOO_LARGE
 * (TL_BUNDLE_SIZE_MAX of cache/tlbundle.h: 16 GiB), TL_NOMEM. */
tl_status tl_client_bundle_create(tl_client *c, const char *path, const char *compiler, tl_bundle_counts *counts,
                                  tl_error *err);

/* The largest bundle tl_client_bundle_push sends: a server's --max-bundle
 * is at most this (its default is 64 MiB). */
#define TL_CLIENT_BUNDLE_PUSH_MAX ((unsigned long long)4 << 30)

/* Imports the bundle at path into the server's cache (POST /v1/bundles;
 * the token needs the admin scope): the file is read whole and checked
 * here first (as tl_client_set_bundle checks it), then sent.  The server
 * stores each build of its own compiler identity and, with a shared tier
 * (tlserverd --tier), publishes it there, so that every replica serves it.
 * On an answer that lists the builds (200, or 422 when the server refused
 * every one: another compiler's bundle) *answer (may be NULL) is its JSON
 * text, malloc'd: {"compiler", "server_compiler", "checksum", "stored",
 * "present", "refused", "requests", "builds": [{"key", "target", "status",
 * "tier"?, "reason"?}], "tier_published"?} (proto/openapi.yaml).  Errors:
 * the check's (TL_CORRUPT, TL_INVALID_ARG, TL_UNSUPPORTED naming the entry),
 * TL_IO, TL_TOO_LARGE over TL_CLIENT_BUNDLE_PUSH_MAX or the server's
 * --max-bundle, and the server's: TL_UNAUTHORIZED, TL_FORBIDDEN (no admin
 * scope), TL_UNSUPPORTED (every build refused), TL_NETWORK, TL_BUSY. */
tl_status tl_client_bundle_push(tl_client *c, const char *path, char **answer, tl_error *err);

/* ---- tuning shared by the cluster (`tlclient tune`) ------------------------------
 * A tuning record says which values of a program's tuning constants
 * (block sizes, stages, ...) ran fastest on one device for one shape class:
 * `tlclient tune` compiles the variants through the server, checks them,
 * times them on the local GPU and records the winner on the server (POST
 * /v1/tunings); every node then asks for it (GET /v1/tunings/KEY) instead
 * of tuning again.  A record is keyed by
 *   SHA-256("tl-tuning 1\nprogram P\nshape S\ndevice D\n")
 * where P is the SHA-256 of the canonical program (x- members removed, as
 * in a request key), S the canonical JSON object of the request's constant
 * overrides -- its shape -- with every integer value of at least 1 rounded
 * up to a power of two (the shape class: M=1000 and M=1024 share a record),
 * and D the device's description, "NAME (ARCH)" as tl_device_name and
 * tl_device_arch_name give them ("NVIDIA H100 80GB HBM3 (sm_90)"). */

/* The tuning key of req's program and shape on device, and the text it
 * hashes (malloc'd; text may be NULL).  Errors as for tl_client_get's
 * request checks; TL_INVALID_ARG for an empty device. */
tl_status tl_client_tuning_key(const tl_client_request *req, const char *device, char key[65], char **text,
                               tl_error *err);

/* Records on the server (POST /v1/tunings, compile scope) that the
 * constants winner[0..nwinner) ran fastest, in ms milliseconds, for req's
 * program and shape on device; candidates_json (NULL, or a JSON array of
 * what was measured) is kept beside it.  The last record for a key
 * replaces the one before.  Errors: those of the server (TL_TOO_LARGE over
 * its 4 KiB of record), TL_NETWORK. */
tl_status tl_client_tuning_record(tl_client *c, const tl_client_request *req, const char *device,
                                  const tl_client_define *winner, int nwinner, double ms, const char *candidates_json,
                                  tl_error *err);

/* The record for req's program and shape on device (GET /v1/tunings/KEY,
 * or the answer kept from one less than the tuning TTL ago:
 * tl_client_set_tuning_ttl_ms), as JSON text (malloc'd): {"key", "program",
 * "shape", "device", "constants", "ms", "candidates"}.  It is kept in the
 * local cache, which answers when the server cannot be reached (the GET is tried once, with
 * no retries, so an unreachable server costs one connect time-out, not the
 * back-offs).  TL_NOT_FOUND when nobody
 * recorded one; TL_NETWORK. */
tl_status tl_client_tuning_lookup(tl_client *c, const tl_client_request *req, const char *device, char **record,
                                  tl_error *err);

/* Tuning on (device "auto": the device tl_client_get_for_device is given;
 * or a device description, for tl_client_get and tl_client_get_for_arch as
 * well) or off (NULL, the default).  With it on, those calls first look up
 * the request's record (as tl_client_tuning_lookup) and, on a hit, add its
 * constants to the request's overrides (an override the request gives
 * itself wins), so one node's tuning serves every node; without a record
 * (or a server) the request goes on as it is (the log says so). */
tl_status tl_client_set_tuning(tl_client *c, const char *device, tl_error *err);

/* How long a client keeps the server's answer to a tuning lookup (a record,
 * or "none recorded") before it asks again: default TL_CLIENT_TUNING_TTL_MS
 * (60 s), 0 to TL_CLIENT_TUNING_TTL_MAX_MS (0: not kept; every lookup asks).
 * So a get with tuning on costs one GET /v1/tunings per program, shape
 * class and device per TTL, not one per call; a record posted meanwhile by
 * another node is seen at the latest one TTL later.  At most
 * TL_CLIENT_TUNING_MEMO answers are kept per client (the one expiring first
 * is replaced); they are forgotten when the server or the tuning is set
 * again, and a record this client posts (tl_client_tuning_record) replaces
 * its key's answer at once.  Failures (network, server errors) are never
 * kept.  tl_client_dup copies the setting, not the answers. */
#define TL_CLIENT_TUNING_TTL_MS 60000L
#define TL_CLIENT_TUNING_TTL_MAX_MS 86400000L
#define TL_CLIENT_TUNING_MEMO 256
tl_status tl_client_set_tuning_ttl_ms(tl_client *c, long ms, tl_error *err);

/* GET /v1/info: the server's description (version, targets, limits) as
 * JSON text, malloc'd (free()).  Errors: TL_NETWORK, TL_UNAUTHORIZED, ... */
tl_status tl_client_info(tl_client *c, char **json, tl_error *err);

/* ==== artifacts ==================================================================== */

/* Accessors.  Strings and bytes are owned by a. */
const char *tl_artifact_key(const tl_artifact *a);      /* build key (64 hex) */
const char *tl_artifact_id(const tl_artifact *a);       /* artifact id: SHA-256 of the bytes */
const char *tl_artifact_target(const tl_artifact *a);   /* "sm_90", "compute_80" */
const void *tl_artifact_bytes(const tl_artifact *a, size_t *n); /* cubin, or PTX text (not NUL-terminated) */
int tl_artifact_is_ptx(const tl_artifact *a);
const char *tl_artifact_metadata(const tl_artifact *a); /* metadata JSON text */
const char *tl_artifact_entry(const tl_artifact *a);    /* the kernel's name */
tl_source tl_artifact_source(const tl_artifact *a);
void tl_artifact_free(tl_artifact *a);

/* Kernel parameters, from the metadata, in launch order. */
typedef struct tl_param_info {
  const char *name;
  int is_tensor;           /* 1 tensor (a device pointer), 0 scalar */
  const char *dtype;       /* "float16", "int32", ... */
  int ndim;                /* tensors: dimensions */
  int64_t align;           /* tensors: promised alignment of the pointer in bytes */
} tl_param_info;
int tl_artifact_nparams(const tl_artifact *a);
/* TL_INVALID_ARG when i is out of range. */
tl_status tl_artifact_param(const tl_artifact *a, int i, tl_param_info *out, tl_error *err);

/* ==== launching ================================================================== */

/* One kernel argument.  Use the constructors below. */
typedef enum tl_arg_kind {
  TL_ARG_TENSOR = 1, /* ptr: a device address */
  TL_ARG_INT = 2,    /* i: int32, int64 or bool (0/1) parameters */
  TL_ARG_FLOAT = 3,  /* f: float32 parameters (rounded to float) */
} tl_arg_kind;

typedef struct tl_kernel_arg {
  tl_arg_kind kind;
  uint64_t ptr;
  int64_t i;
  double f;
} tl_kernel_arg;

static inline tl_kernel_arg tl_arg_tensor(uint64_t device_ptr) {
  tl_kernel_arg a = {TL_ARG_TENSOR, device_ptr, 0, 0.0};
  return a;
}
static inline tl_kernel_arg tl_arg_int(int64_t v) {
  tl_kernel_arg a = {TL_ARG_INT, 0, v, 0.0};
  return a;
}
static inline tl_kernel_arg tl_arg_float(double v) {
  tl_kernel_arg a = {TL_ARG_FLOAT, 0, 0, v};
  return a;
}

/* The grid (blocks in x, y, z) and a tensor's shape for the given
 * arguments, evaluated from the metadata's expressions over the scalar
 * parameters with Tile IR's integer rules.  args holds one entry per
 * parameter (tl_artifact_nparams); tensor entries are not read.  Errors:
 * TL_INVALID_ARG (wrong number or kind of arguments, a scalar out of its
 * type's range, param not a tensor), TL_RUNTIME (division by zero,
 * overflow). */
tl_status tl_artifact_grid(const tl_artifact *a, const tl_kernel_arg *args, int nargs,
                           int64_t grid[3], tl_error *err);
tl_status tl_artifact_shape(const tl_artifact *a, int param, const tl_kernel_arg *args, int nargs,
                            int64_t shape[TL_KERNEL_DIMS_MAX], int *ndim, tl_error *err);

/* ---- devices ------------------------------------------------------------------------- */
typedef struct tl_device tl_device;

/* Opens CUDA device `ordinal` (its primary context, shared with the CUDA
 * runtime); when the machine has no CUDA driver or no CUDA device, AMD
 * device `ordinal` through the HIP runtime (libamdhip64.so.6, .so.5 or
 * .so, or the library named by the environment variable TL_LIBHIP; the
 * CUDA driver's name can be changed with TL_LIBCUDA).  TL_NO_DEVICE when
 * neither has a device, with both reasons: "no CUDA driver (libcuda.so.1
 * not found); no HIP runtime (libamdhip64.so.6, ... not found)";
 * TL_INVALID_ARG for an ordinal that does not exist; TL_DEVICE for other
 * driver failures. */
tl_status tl_device_open(int ordinal, tl_device **out, tl_error *err);
void tl_device_free(tl_device *d); /* after every kernel and buffer of it; NULL is fine */

/* Which runtime a device was opened through. */
typedef enum tl_device_api {
  TL_DEVICE_API_NONE = 0, /* (a NULL device) */
  TL_DEVICE_API_CUDA = 1, /* NVIDIA, the CUDA driver API */
  TL_DEVICE_API_HIP = 2,  /* AMD, the HIP runtime */
} tl_device_api;
tl_device_api tl_device_get_api(const tl_device *d);

int tl_device_arch(const tl_device *d);        /* 90 for an H100; 0 for an AMD GPU */
const char *tl_device_arch_name(const tl_device *d); /* "sm_90", or "gfx90a" for an AMD GPU */
const char *tl_device_name(const tl_device *d); /* "NVIDIA H100 80GB HBM3" */
/* "NAME (ARCH)", the device of tuning records: "NVIDIA H100 80GB HBM3 (sm_90)". */
void tl_device_description(const tl_device *d, char *out, size_t cap);

/* A CUDA device: as tl_client_get_for_arch with the device's architecture.
 * An AMD device: as tl_client_get for the target tl_device_arch_name(d)
 * ("gfx90a"), the only one whose code objects run on it; a server that
 * does not offer it answers TL_UNSUPPORTED, and the message says so and
 * names the GPU's architecture. */
tl_status tl_client_get_for_device(tl_client *c, const tl_client_request *req, const tl_device *d,
                                   tl_artifact **out, tl_error *err);

/* Device memory, for applications without the CUDA runtime.  Addresses
 * from tl_device_alloc are aligned to at least 256 bytes.  Errors TL_DEVICE
 * (the driver's message), TL_INVALID_ARG.  tl_device_mem_free accepts 0. */
tl_status tl_device_alloc(tl_device *d, size_t bytes, uint64_t *ptr, tl_error *err);
void tl_device_mem_free(tl_device *d, uint64_t ptr);
tl_status tl_device_upload(tl_device *d, uint64_t dst, const void *src, size_t bytes, tl_error *err);
tl_status tl_device_download(tl_device *d, void *dst, uint64_t src, size_t bytes, tl_error *err);
/* Waits for all work on the device (the whole context) and reports a
 * fault of an earlier launch as TL_DEVICE. */
tl_status tl_device_sync(tl_device *d, tl_error *err);

/* ---- kernels ---------------------------------------------------------------------------- */
typedef struct tl_kernel tl_kernel;

/* Loads a's binary on d (a cubin directly, PTX through the driver's JIT;
 * on an AMD GPU an HSACO through hipModuleLoadData) and finds its entry.
 * a may be freed afterwards.  TL_UNSUPPORTED when a's target cannot run on
 * d's architecture (an sm_80 cubin on an sm_90 GPU; on an AMD GPU anything
 * but a code object for its own gfx name), TL_DEVICE when the driver
 * refuses the binary (its JIT log in the message), TL_CORRUPT for a code
 * object whose ELF reaches past its bytes, TL_NOT_FOUND when the entry is
 * missing. */
tl_status tl_kernel_load(tl_device *d, const tl_artifact *a, tl_kernel **out, tl_error *err);

/* As tl_kernel_load, for a binary that did not come through a tl_client:
 * bytes (n of them: a cubin, PTX text or an HSACO) built for target
 * ("sm_90a") with its metadata JSON text (`tlc compile --emit meta`,
 * proto/kernel-meta.md), as the local tlc writes them (the Python package
 * tlir loads what it compiled without a server this way).  Nothing is
 * kept of bytes or metadata after the call.  Errors as for tl_kernel_load,
 * and those of the metadata parser (TL_BAD_JSON, TL_INVALID_ARG); also
 * TL_INVALID_ARG for a NULL argument or n == 0. */
tl_status tl_kernel_load_binary(tl_device *d, const char *target, const void *bytes, size_t n,
                                const char *metadata, tl_kernel **out, tl_error *err);

/* Launches k once with one argument per parameter, on stream (a CUstream
 * or cudaStream_t, a hipStream_t on an AMD GPU; NULL is the default
 * stream); asynchronous.  Checks
 * first: the number and kinds of arguments, scalars within their type,
 * every tensor pointer aligned as its parameter promises, the grid within
 * CUDA's limits (an empty grid launches nothing and succeeds).  Dynamic
 * shared memory above 48 KiB is enabled on the function first (CUDA; an
 * AMD GPU needs no opt-in, its limit is the LDS per workgroup).  A kernel
 * with tensor maps (metadata format 2) gets them built for these arguments
 * and passed after them (TL_INVALID_ARG for a tensor they cannot describe:
 * a row pitch not a multiple of 16 bytes, a misaligned pointer, a
 * dimension of 0).  A program of several kernels or with workspaces
 * (metadata format 3, proto/kernel-meta.md section 6) takes the program's
 * params only: the workspaces are allocated on the device (kept by k for
 * the next launch, grown when one needs more: launch one k on one stream
 * at a time) and every kernel is launched in order on stream.  Errors:
 * TL_INVALID_ARG, TL_LIMIT (also workspaces over 16 GiB), TL_UNSUPPORTED
 * (thread-block clusters; tensor maps on a driver without them),
 * TL_DEVICE. */
tl_status tl_kernel_launch(tl_kernel *k, const tl_kernel_arg *args, int nargs, void *stream,
                           tl_error *err);
void tl_kernel_free(tl_kernel *k); /* NULL is fine */

#ifdef __cplusplus
}
#endif

#endif
