/*
 * tlcache.h - libtlcache, the content-addressed build cache of the compile
 * service, on one SQLite file (docs/DESIGN.md section 4).
 *
 * The cache holds two things:
 *   - artifacts: the compiled binaries (cubin, HSACO, PTX), each stored once
 *     under its id, the lowercase hex SHA-256 of its bytes;
 *   - builds: a build key (lowercase hex SHA-256 that the compiler computes
 *     over a canonical key manifest; the cache takes it as given), the
 *     manifest text, the artifact id, the target, the metadata JSON text,
 *     the compile time and the creation and last-access times.
 * Several builds may share one artifact.
 *
 * Guarantees:
 *   - a build and its artifact are published in one transaction: a reader
 *     (in any process) sees both or neither, also after a crash;
 *   - every artifact read re-hashes the bytes; a mismatch is served as a
 *     miss, the bad artifact and the builds using it are deleted, and the
 *     persistent integrity_failures counter goes up;
 *   - several processes may open the same file at once (WAL mode, a busy
 *     timeout, and retries of write transactions that find the file busy);
 *   - a size cap with least-recently-used eviction (tl_cache_evict_step).
 *
 * Threads: a tl_cache handle is not thread-safe.  Use one handle per thread
 * (they may all open the same file), or serialize calls on a shared one.
 * Do not carry an open handle across fork(): open it in the child.
 *
 * Errors: functions that can fail return a tl_status and fill *err (err may
 * be NULL).  Malformed keys/ids and arguments out of their limits are
 * TL_INVALID_ARG or TL_TOO_LARGE, a miss is TL_NOT_FOUND, out of memory is
 * TL_NOMEM, a file that is busy for longer than the busy timeout is TL_BUSY,
 * a damaged database file TL_CORRUPT, other SQLite or file failures TL_IO.
 */
#ifndef TL_CACHE_H
#define TL_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "../proto/tl_error.h"
#include "../proto/tl_status.h"

/* ---- limits ----------------------------------------------------------------- */
#define TL_CACHE_ARTIFACT_MAX_DEFAULT ((int64_t)256 << 20) /* bytes of one artifact */
#define TL_CACHE_TEXT_MAX ((size_t)1 << 20)   /* bytes of a manifest or metadata text */
#define TL_CACHE_TARGET_MAX 128               /* bytes of a target string */
#define TL_CACHE_NOTE_NAME_MAX 512            /* bytes of a note's name */
#define TL_CACHE_NOTE_MAX 4096                /* bytes of a note's value */
#define TL_CACHE_PATH_MAX 4096                /* bytes of the database path */
#define TL_CACHE_EVICT_ROWS_DEFAULT 64        /* builds per eviction transaction */
#define TL_CACHE_EVICT_ROWS_MAX 10000

typedef struct tl_cache tl_cache;

/* ---- options ------------------------------------------------------------------
 * Every field's zero value means its default, so `tl_cache_options o = {0};`
 * followed by setting the fields one cares about is the intended use, and a
 * NULL options pointer means all defaults. */
typedef enum tl_cache_sync {
  /* synchronous=NORMAL: no fsync on commit, only at checkpoints.  Every
   * committed transaction survives a crash of the process; the last ones may
   * be lost (never half-applied) on power loss or an OS crash. */
  TL_CACHE_SYNC_NORMAL = 0,
  /* synchronous=FULL: the WAL is fsync'd at every commit, so committed
   * transactions also survive power loss.  Costs an fsync per put. */
  TL_CACHE_SYNC_FULL = 1,
} tl_cache_sync;

typedef struct tl_cache_options {
  int64_t max_bytes;          /* cap on the sum of artifact sizes for
                                 tl_cache_evict_step; 0: no cap */
  int64_t max_artifact_bytes; /* largest artifact tl_cache_put accepts;
                                 0: TL_CACHE_ARTIFACT_MAX_DEFAULT (256 MiB) */
  int busy_timeout_ms;        /* how long to wait for another process's
                                 lock before TL_BUSY; 0: 5000 */
  int access_flush_ms;        /* last-access times of hits are batched in
                                 memory and written at most this often;
                                 0: 1000; negative: write at every hit */
  tl_cache_sync sync;         /* durability, see above; default NORMAL */
} tl_cache_options;

/* ---- builds ----------------------------------------------------------------------
 * For tl_cache_put the caller fills key, manifest, target, metadata and
 * compile_ms; the strings are borrowed for the call.  artifact_id may be
 * left empty; when it is set it must equal the SHA-256 of the bytes.
 * created_ms, last_access_ms and size are ignored on input.
 * tl_cache_get_build returns one allocation (tl_cache_build_free). */
typedef struct tl_cache_build {
  char key[65];            /* 64 lowercase hex characters */
  char artifact_id[65];    /* 64 lowercase hex characters */
  const char *manifest;    /* key manifest text, at most TL_CACHE_TEXT_MAX bytes */
  const char *target;      /* e.g. "sm_90a", "gfx942"; 1..TL_CACHE_TARGET_MAX bytes */
  const char *metadata;    /* metadata JSON text (not parsed here), at most
                              TL_CACHE_TEXT_MAX bytes */
  int64_t compile_ms;      /* >= 0 */
  int64_t created_ms;      /* Unix time in milliseconds of the first put */
  int64_t last_access_ms;  /* Unix time in milliseconds of the last use (see tl_cache_flush) */
  int64_t size;            /* bytes of the artifact */
} tl_cache_build;

typedef struct tl_cache_stats {
  int64_t bytes;              /* sum of artifact sizes */
  int64_t artifacts;          /* artifact rows */
  int64_t builds;             /* build rows */
  int64_t hits, misses;       /* lookups (get_build, get_artifact, get) */
  int64_t evictions;          /* builds removed by tl_cache_evict_step */
  int64_t integrity_failures; /* artifacts whose bytes did not match their id */
} tl_cache_stats;

/* ---- open and close ----------------------------------------------------------- */

/* Opens (creating it, its parent directories and its schema if needed) the
 * cache database at path; opts may be NULL.  On success *out owns the handle
 * (tl_cache_close).  On failure *out is NULL and err says why: TL_INVALID_ARG
 * (bad path or options), TL_IO (cannot create or open the file, or WAL mode
 * is not available there), TL_UNSUPPORTED (the file's schema is newer than
 * this library), TL_CORRUPT (not a cache database), TL_BUSY. */
tl_status tl_cache_open(const char *path, const tl_cache_options *opts, tl_cache **out,
                        tl_error *err);

/* Writes the batched access times and counters, then closes the handle.
 * NULL is fine.  Errors while writing are ignored (access times are hints). */
void tl_cache_close(tl_cache *cache);

/* Writes the batched last-access times and hit/miss counts now (they are
 * written anyway every access_flush_ms during reads, before eviction and at
 * close).  A server may call this from a timer.  Fails with TL_BUSY/TL_IO;
 * the batch is kept for the next try. */
tl_status tl_cache_flush(tl_cache *cache, tl_error *err);

/* ---- publishing ------------------------------------------------------------------ */

/* Publishes the artifact bytes[0..n) and the build in one transaction.
 * Idempotent: putting the same key again replaces the build's fields (the
 * creation time stays) and counts as a use; an artifact already stored is
 * reused (and rewritten if its stored bytes were damaged).  If the key
 * pointed at another artifact before and nothing else uses that one, it is
 * deleted.  Nothing is evicted here: call tl_cache_evict_step afterwards or
 * from a timer.  Errors: TL_INVALID_ARG (malformed key or artifact id, NULL
 * or empty bytes, missing strings, negative compile_ms, artifact_id not the
 * hash of the bytes), TL_TOO_LARGE (bytes over max_artifact_bytes, a text
 * over TL_CACHE_TEXT_MAX, a target over TL_CACHE_TARGET_MAX), TL_BUSY,
 * TL_IO, TL_NOMEM.  On failure nothing was stored. */
tl_status tl_cache_put(tl_cache *cache, const tl_cache_build *build, const void *bytes, size_t n,
                       tl_error *err);

/* ---- lookups --------------------------------------------------------------------
 * Each lookup counts one hit or one miss and records the use of the build
 * (or of every build of the artifact) for LRU eviction. */

/* Looks up a build by key.  On success *out is owned by the caller
 * (tl_cache_build_free); on failure *out is NULL.  TL_NOT_FOUND on a miss,
 * TL_INVALID_ARG when key is not 64 lowercase hex characters.  The artifact
 * bytes are not read (use tl_cache_get_artifact, or tl_cache_get). */
tl_status tl_cache_get_build(tl_cache *cache, const char *key, tl_cache_build **out,
                             tl_error *err);

/* Reads an artifact by id and re-checks its SHA-256.  On success *bytes is a
 * malloc'd buffer of *n bytes owned by the caller (free()).  On failure
 * *bytes is NULL and *n 0.  TL_NOT_FOUND on a miss, including an artifact
 * whose bytes no longer match its id (it is then deleted with its builds
 * and counted in integrity_failures), TL_INVALID_ARG for a malformed id. */
tl_status tl_cache_get_artifact(tl_cache *cache, const char *id, void **bytes, size_t *n,
                                tl_error *err);

/* Both at once: the build of key and its checked artifact bytes.  A build
 * whose artifact fails the check is a miss (TL_NOT_FOUND).  Ownership and
 * errors as for the two calls above; on failure *out and *bytes are NULL. */
tl_status tl_cache_get(tl_cache *cache, const char *key, tl_cache_build **out, void **bytes,
                       size_t *n, tl_error *err);

/* Frees a build returned by this library.  NULL is fine. */
void tl_cache_build_free(tl_cache_build *build);

/* ---- size cap --------------------------------------------------------------------- */

/* While the sum of artifact sizes is above opts->max_bytes, deletes the
 * least recently used builds (and the artifacts no build uses any more), at
 * most max_rows builds per transaction (0: TL_CACHE_EVICT_ROWS_DEFAULT), so
 * that the write lock is only ever held briefly and other processes keep
 * publishing and reading in between.  Writes this handle's batched access
 * times first.  Does nothing when there is no cap.  If evicted is not NULL
 * it receives the number of builds deleted.  TL_INVALID_ARG for max_rows
 * above TL_CACHE_EVICT_ROWS_MAX; TL_BUSY, TL_IO (what was evicted before
 * the failure stays evicted). */
tl_status tl_cache_evict_step(tl_cache *cache, int max_rows, int64_t *evicted, tl_error *err);

/* ---- administration ----------------------------------------------------------------- */

/* Fills *out with the sizes and counters.  The counters are summed over all
 * processes that use the file, plus this handle's not yet written hits and
 * misses.  TL_INVALID_ARG for NULL arguments; TL_BUSY, TL_IO. */
tl_status tl_cache_get_stats(tl_cache *cache, tl_cache_stats *out, tl_error *err);

/* Calls fn for every build, most recently used first (for `cache ls`).  The
 * build and its strings are valid only during the call.  fn returns 0 to go
 * on, anything else to stop (tl_cache_list then returns TL_OK).  fn must not
 * call into the same handle.  Errors: TL_INVALID_ARG, TL_IO. */
typedef int (*tl_cache_list_fn)(const tl_cache_build *build, void *user);
tl_status tl_cache_list(tl_cache *cache, tl_cache_list_fn fn, void *user, tl_error *err);

/* What tl_cache_verify found. */
typedef struct tl_cache_verify_result {
  int64_t artifacts_checked;   /* artifacts re-hashed */
  int64_t bytes_checked;       /* their total size */
  int64_t corrupt_artifacts;   /* bytes did not hash to the id: deleted, with their builds */
  int64_t orphan_artifacts;    /* no build used them: deleted */
  int64_t dangling_builds;     /* their artifact was missing: deleted */
} tl_cache_verify_result;

/* Re-hashes every artifact (for `cache verify`), deleting the ones that do
 * not match their id together with their builds (counted in
 * integrity_failures, as in the read path), and deletes builds without an
 * artifact and artifacts without a build.  Each artifact is checked and,
 * if needed, deleted in its own short transaction, so serving goes on.
 * out may be NULL.  Errors: TL_BUSY, TL_IO, TL_NOMEM. */
tl_status tl_cache_verify(tl_cache *cache, tl_cache_verify_result *out, tl_error *err);

/* Deletes the build of key, and its artifact if no other build uses it.
 * TL_NOT_FOUND if there is no such build, TL_INVALID_ARG for a malformed key. */
tl_status tl_cache_remove(tl_cache *cache, const char *key, tl_error *err);

/* ---- notes ----------------------------------------------------------------------
 * Small named texts kept beside the builds (schema version 2): libtlclient
 * keeps there the compiler identity of each server it talked to, so that an
 * offline start keys its requests as the last answer did.  A name has 1 to
 * TL_CACHE_NOTE_NAME_MAX bytes, a value at most TL_CACHE_NOTE_MAX; notes are
 * not builds: not listed, counted, verified or evicted.
 * tl_cache_note_set replaces the value of name (TL_INVALID_ARG,
 * TL_TOO_LARGE, TL_BUSY, TL_IO).  tl_cache_note_get gives a malloc'd copy
 * in *value (free()), or TL_NOT_FOUND.  tl_cache_notes_set replaces n of
 * them in one transaction (one commit for all: the server's status page
 * saves its 64 slots so), all or none: every name and value is checked
 * first, and a failure writes none. */
tl_status tl_cache_note_set(tl_cache *cache, const char *name, const char *value, tl_error *err);
tl_status tl_cache_notes_set(tl_cache *cache, int n, const char *const names[], const char *const values[],
                             tl_error *err);
tl_status tl_cache_note_get(tl_cache *cache, const char *name, char **value, tl_error *err);

/* Write transactions this handle committed since it was opened (a build
 * stored, a note or a batch of notes, an eviction step, a flush of access
 * times): what tests and benchmarks count commits with.  0 for NULL. */
int64_t tl_cache_commits(const tl_cache *cache);

#endif
