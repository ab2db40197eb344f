/*
 * cache.c - libtlcache: the content-addressed build cache on one SQLite file
 * (see tlcache.h for the contract, docs/DESIGN.md section 4 for the reasons).
 *
 * Reading order: the schema and its migrations; the other SQL, one named
 * string per statement, and the table of prepared statements; the handle;
 * small helpers (time, errors, stepping with retries); write transactions;
 * open and close; the batch of access times; put; lookups and the
 * integrity check; eviction; stats, list, verify and remove.
 *
 * Durability (WAL + synchronous=NORMAL): a commit appends the
 * transaction's pages to the -wal file with write() and ends them with a
 * commit frame; only checkpoints fsync.  Once write() has returned, the
 * data sits in the kernel's page cache, which outlives the process, so a
 * crash or SIGKILL of the process after COMMIT returned loses nothing, and a
 * crash before it leaves a WAL tail without a valid commit frame, which
 * recovery ignores: a transaction is there entirely or not at all.  What
 * NORMAL does not cover is power loss or an OS crash, which may drop the
 * last commits (still never half of one).  synchronous=FULL
 * (TL_CACHE_SYNC_FULL) fsyncs the WAL at every commit and so keeps those too,
 * at the price of one fsync per put.  For a cache NORMAL is the right
 * default: a lost entry is recompiled.
 *
 * Concurrency: every write is one short BEGIN IMMEDIATE transaction (the
 * write lock is taken up front, so a transaction never has to upgrade a
 * read lock, the case SQLite cannot wait for); SQLite's busy timeout waits
 * for the lock, and write_txn retries the whole transaction if the file is
 * still busy, until busy_timeout_ms have passed.  Reads are single
 * statements in autocommit mode, which in WAL mode never wait for writers.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sqlite3.h>
#include "tlcache.h"
#include "../proto/tl_hash.h"

/* ==== schema ==============================================================
 * The schema version lives in PRAGMA user_version.  migrations[v] takes a
 * database from version v to v + 1; a new version appends a row and never
 * edits an old one.  Sizes and row counts are kept in the stats table by
 * triggers, so they cannot drift from the rows, and reading them is O(1).
 * The blob is the last column, so reading id and size of an artifact never
 * touches its overflow pages. */

static const char SQL_SCHEMA_V1[] =
    "CREATE TABLE artifacts (\n"
    "  id      TEXT PRIMARY KEY CHECK (length(id) = 64),\n"
    "  size    INTEGER NOT NULL CHECK (size = length(bytes)),\n"
    "  created INTEGER NOT NULL,\n"
    "  bytes   BLOB NOT NULL\n"
    ");\n"
    "CREATE TABLE builds (\n"
    "  key         TEXT PRIMARY KEY CHECK (length(key) = 64),\n"
    "  artifact_id TEXT NOT NULL REFERENCES artifacts(id),\n"
    "  target      TEXT NOT NULL,\n"
    "  manifest    TEXT NOT NULL,\n"
    "  metadata    TEXT NOT NULL,\n"
    "  compile_ms  INTEGER NOT NULL,\n"
    "  created     INTEGER NOT NULL,\n"
    "  last_access INTEGER NOT NULL\n"
    ");\n"
    "CREATE INDEX builds_lru ON builds(last_access);\n"
    "CREATE INDEX builds_artifact ON builds(artifact_id);\n"
    "CREATE TABLE stats (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;\n"
    "INSERT INTO stats(name, value) VALUES ('bytes', 0), ('artifacts', 0), ('builds', 0),\n"
    "  ('hits', 0), ('misses', 0), ('evictions', 0), ('integrity_failures', 0);\n"
    "CREATE TRIGGER artifacts_insert AFTER INSERT ON artifacts BEGIN\n"
    "  UPDATE stats SET value = value + NEW.size WHERE name = 'bytes';\n"
    "  UPDATE stats SET value = value + 1 WHERE name = 'artifacts';\n"
    "END;\n"
    "CREATE TRIGGER artifacts_delete AFTER DELETE ON artifacts BEGIN\n"
    "  UPDATE stats SET value = value - OLD.size WHERE name = 'bytes';\n"
    "  UPDATE stats SET value = value - 1 WHERE name = 'artifacts';\n"
    "END;\n"
    "CREATE TRIGGER artifacts_resize AFTER UPDATE OF size ON artifacts BEGIN\n"
    "  UPDATE stats SET value = value - OLD.size + NEW.size WHERE name = 'bytes';\n"
    "END;\n"
    "CREATE TRIGGER builds_insert AFTER INSERT ON builds BEGIN\n"
    "  UPDATE stats SET value = value + 1 WHERE name = 'builds';\n"
    "END;\n"
    "CREATE TRIGGER builds_delete AFTER DELETE ON builds BEGIN\n"
    "  UPDATE stats SET value = value - 1 WHERE name = 'builds';\n"
    "END;\n";

/* Version 2: small named texts beside the builds (tl_cache_note_set). */
static const char SQL_SCHEMA_V2[] =
    "CREATE TABLE notes (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;\n";

static const char *const migrations[] = {
    SQL_SCHEMA_V1, /* 0 -> 1 */
    SQL_SCHEMA_V2, /* 1 -> 2 */
};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof migrations[0]))

/* ==== statements ========================================================== */

static const char SQL_BEGIN[] = "BEGIN IMMEDIATE";
static const char SQL_COMMIT[] = "COMMIT";
static const char SQL_ROLLBACK[] = "ROLLBACK";
static const char SQL_USER_VERSION[] = "PRAGMA user_version";

static const char SQL_BUILD_ARTIFACT[] = "SELECT artifact_id FROM builds WHERE key = ?1";
static const char SQL_PUT_ARTIFACT[] =
    "INSERT INTO artifacts(id, size, created, bytes) VALUES (?1, ?2, ?3, ?4)\n"
    "ON CONFLICT(id) DO UPDATE SET size = excluded.size, bytes = excluded.bytes\n"
    "  WHERE artifacts.bytes IS NOT excluded.bytes"; /* heals a damaged copy */
static const char SQL_PUT_BUILD[] =
    "INSERT INTO builds(key, artifact_id, target, manifest, metadata, compile_ms, created,\n"
    "                   last_access)\n"
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)\n"
    "ON CONFLICT(key) DO UPDATE SET artifact_id = excluded.artifact_id,\n"
    "  target = excluded.target, manifest = excluded.manifest, metadata = excluded.metadata,\n"
    "  compile_ms = excluded.compile_ms,\n"
    "  last_access = max(builds.last_access, excluded.last_access)";
static const char SQL_DELETE_IF_ORPHAN[] =
    "DELETE FROM artifacts WHERE id = ?1\n"
    "  AND NOT EXISTS (SELECT 1 FROM builds WHERE artifact_id = ?1)";

#define BUILD_COLUMNS                                                                   \
  "b.key, b.artifact_id, b.manifest, b.target, b.metadata, b.compile_ms, b.created,\n" \
  "  b.last_access, a.size\n"                                                          \
  "FROM builds b JOIN artifacts a ON a.id = b.artifact_id\n"
static const char SQL_GET_BUILD[] = "SELECT " BUILD_COLUMNS "WHERE b.key = ?1";
static const char SQL_LIST[] =
    "SELECT " BUILD_COLUMNS "ORDER BY b.last_access DESC, b.rowid DESC";
static const char SQL_GET_ARTIFACT[] = "SELECT bytes FROM artifacts WHERE id = ?1";
static const char SQL_ARTIFACT_STILL[] = "SELECT 1 FROM artifacts WHERE id = ?1 AND bytes = ?2";
static const char SQL_NEXT_ARTIFACT[] =
    "SELECT id, bytes FROM artifacts WHERE id > ?1 ORDER BY id LIMIT 1";

static const char SQL_DELETE_BUILD[] = "DELETE FROM builds WHERE key = ?1";
static const char SQL_DELETE_BUILDS_OF[] = "DELETE FROM builds WHERE artifact_id = ?1";
static const char SQL_DELETE_ARTIFACT[] = "DELETE FROM artifacts WHERE id = ?1";
static const char SQL_DELETE_DANGLING[] =
    "DELETE FROM builds WHERE NOT EXISTS\n"
    "  (SELECT 1 FROM artifacts a WHERE a.id = builds.artifact_id)";
static const char SQL_DELETE_ORPHANS[] =
    "DELETE FROM artifacts WHERE NOT EXISTS\n"
    "  (SELECT 1 FROM builds b WHERE b.artifact_id = artifacts.id)";

static const char SQL_TOUCH_BUILD[] =
    "UPDATE builds SET last_access = ?2 WHERE key = ?1 AND last_access < ?2";
static const char SQL_TOUCH_ARTIFACT[] =
    "UPDATE builds SET last_access = ?2 WHERE artifact_id = ?1 AND last_access < ?2";
static const char SQL_LRU_VICTIM[] =
    "SELECT key, artifact_id FROM builds ORDER BY last_access, rowid LIMIT 1";

static const char SQL_STAT_GET[] = "SELECT value FROM stats WHERE name = ?1";
static const char SQL_STAT_ADD[] = "UPDATE stats SET value = value + ?2 WHERE name = ?1";
static const char SQL_STATS_ALL[] = "SELECT name, value FROM stats";
static const char SQL_NOTE_GET[] = "SELECT value FROM notes WHERE name = ?1";
static const char SQL_NOTE_PUT[] =
    "INSERT INTO notes(name, value) VALUES (?1, ?2) ON CONFLICT(name) DO UPDATE SET value = excluded.value";

/* The transaction control statements come first: they are prepared before
 * the migrations run (the others need the tables). */
typedef enum stmt_id {
  ST_BEGIN, ST_COMMIT, ST_ROLLBACK, ST_USER_VERSION,
  ST_FIRST_DATA_,
  ST_BUILD_ARTIFACT = ST_FIRST_DATA_, ST_PUT_ARTIFACT, ST_PUT_BUILD, ST_DELETE_IF_ORPHAN,
  ST_GET_BUILD, ST_LIST, ST_GET_ARTIFACT, ST_ARTIFACT_STILL, ST_NEXT_ARTIFACT,
  ST_DELETE_BUILD, ST_DELETE_BUILDS_OF, ST_DELETE_ARTIFACT, ST_DELETE_DANGLING,
  ST_DELETE_ORPHANS, ST_TOUCH_BUILD, ST_TOUCH_ARTIFACT, ST_LRU_VICTIM,
  ST_STAT_GET, ST_STAT_ADD, ST_STATS_ALL, ST_NOTE_GET, ST_NOTE_PUT,
  ST_COUNT_
} stmt_id;

static const char *const stmt_sql[ST_COUNT_] = {
    [ST_BEGIN] = SQL_BEGIN,
    [ST_COMMIT] = SQL_COMMIT,
    [ST_ROLLBACK] = SQL_ROLLBACK,
    [ST_USER_VERSION] = SQL_USER_VERSION,
    [ST_BUILD_ARTIFACT] = SQL_BUILD_ARTIFACT,
    [ST_PUT_ARTIFACT] = SQL_PUT_ARTIFACT,
    [ST_PUT_BUILD] = SQL_PUT_BUILD,
    [ST_DELETE_IF_ORPHAN] = SQL_DELETE_IF_ORPHAN,
    [ST_GET_BUILD] = SQL_GET_BUILD,
    [ST_LIST] = SQL_LIST,
    [ST_GET_ARTIFACT] = SQL_GET_ARTIFACT,
    [ST_ARTIFACT_STILL] = SQL_ARTIFACT_STILL,
    [ST_NEXT_ARTIFACT] = SQL_NEXT_ARTIFACT,
    [ST_DELETE_BUILD] = SQL_DELETE_BUILD,
    [ST_DELETE_BUILDS_OF] = SQL_DELETE_BUILDS_OF,
    [ST_DELETE_ARTIFACT] = SQL_DELETE_ARTIFACT,
    [ST_DELETE_DANGLING] = SQL_DELETE_DANGLING,
    [ST_DELETE_ORPHANS] = SQL_DELETE_ORPHANS,
    [ST_TOUCH_BUILD] = SQL_TOUCH_BUILD,
    [ST_TOUCH_ARTIFACT] = SQL_TOUCH_ARTIFACT,
    [ST_LRU_VICTIM] = SQL_LRU_VICTIM,
    [ST_STAT_GET] = SQL_STAT_GET,
    [ST_STAT_ADD] = SQL_STAT_ADD,
    [ST_STATS_ALL] = SQL_STATS_ALL,
    [ST_NOTE_GET] = SQL_NOTE_GET,
    [ST_NOTE_PUT] = SQL_NOTE_PUT,
};

/* Columns of BUILD_COLUMNS. */
enum { COL_KEY, COL_ARTIFACT, COL_MANIFEST, COL_TARGET, COL_METADATA, COL_COMPILE_MS,
       COL_CREATED, COL_LAST_ACCESS, COL_SIZE };

/* ==== the handle ===========================================================
 * Access batch: a hit does not write.  It records (kind, hex id, time) in a
 * small open-addressing table in memory; the table is written in one small
 * transaction when access_flush_ms have passed since the last write, when
 * it is half full, before eviction and at close.  Compared with writing a
 * hit only when the stored time is older than some granularity, this writes
 * at most once per interval per process however many keys are hot, never
 * writes during the other reads, and keeps the order of uses exact to the
 * millisecond within a batch.  What it costs: a process killed between two
 * writes loses up to one interval of access times, which only makes
 * eviction slightly less exact. */

enum { ACCESS_BUILD = 1, ACCESS_ARTIFACT = 2 };
#define ACCESS_SLOTS 1024                  /* power of two */
#define ACCESS_FLUSH_USED (ACCESS_SLOTS / 2)  /* write when this many are used */
#define ACCESS_MAX_USED (ACCESS_SLOTS * 3 / 4) /* while writes fail: drop beyond this */

typedef struct access_slot {
  int64_t when_ms;
  unsigned char kind; /* 0: empty */
  char hex[TL_SHA256_HEX_LEN + 1];
} access_slot;

struct tl_cache {
  sqlite3 *db;
  sqlite3_stmt *stmt[ST_COUNT_];
  tl_cache_options opt;     /* with the defaults filled in */
  access_slot *slots;       /* ACCESS_SLOTS */
  int slots_used;
  int64_t pending_hits, pending_misses;
  int64_t last_flush_mono;  /* CLOCK_MONOTONIC ms of the last write attempt */
  int64_t commits;          /* write transactions committed (tl_cache_commits) */
};

/* ==== helpers ============================================================= */

static int64_t clock_ms(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
static int64_t wall_ms(void) { return clock_ms(CLOCK_REALTIME); }
static int64_t mono_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static bool is_busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

static tl_status sql_status(int rc) {
  switch (rc & 0xff) {
  case SQLITE_NOMEM: return TL_NOMEM;
  case SQLITE_BUSY:
  case SQLITE_LOCKED: return TL_BUSY;
  case SQLITE_CORRUPT:
  case SQLITE_NOTADB: return TL_CORRUPT;
  case SQLITE_TOOBIG: return TL_TOO_LARGE;
  default: return TL_IO;
  }
}

/* Fills err from SQLite's last error on c->db (call before resetting). */
static tl_status sql_fail(tl_cache *c, int rc, const char *what, tl_error *err) {
  return tl_error_set(err, sql_status(rc), "cache: %s failed: %s", what,
                      c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
}

/* The prepared statement id, reset and with its bindings cleared. */
static sqlite3_stmt *use(tl_cache *c, stmt_id id) {
  sqlite3_stmt *s = c->stmt[id];
  assert(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return s;
}

static int bind_hex(sqlite3_stmt *s, int i, const char *hex) {
  return sqlite3_bind_text(s, i, hex, -1, SQLITE_STATIC);
}

/* Steps a statement that returns no rows, then resets it. */
static tl_status exec_done(tl_cache *c, sqlite3_stmt *s, const char *what, tl_error *err) {
  int rc = sqlite3_step(s);
  tl_status st = rc == SQLITE_DONE ? TL_OK : sql_fail(c, rc, what, err);
  sqlite3_reset(s);
  return st;
}

/* First step of a read outside a transaction.  In WAL mode readers do not
 * wait for writers, but a reader can still see SQLITE_BUSY briefly (while
 * another connection recovers the WAL after a crash, for one): retry then
 * until the busy timeout is spent. */
static int step_read(tl_cache *c, sqlite3_stmt *s) {
  int64_t deadline = mono_ms() + c->opt.busy_timeout_ms;
  for (int wait = 1;; wait = wait < 32 ? wait * 2 : wait) {
    int rc = sqlite3_step(s);
    if (!is_busy(rc) || mono_ms() >= deadline)
      return rc;
    sqlite3_reset(s);
    sleep_ms(wait);
  }
}

/* Reads one integer counter of the stats table. */
static tl_status stat_get(tl_cache *c, const char *name, int64_t *value, tl_error *err) {
  sqlite3_stmt *s = use(c, ST_STAT_GET);
  sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
  int rc = step_read(c, s);
  tl_status st = TL_OK;
  if (rc == SQLITE_ROW)
    *value = sqlite3_column_int64(s, 0);
  else if (rc == SQLITE_DONE)
    st = tl_error_set(err, TL_CORRUPT, "cache: the stats table has no row '%s'", name);
  else
    st = sql_fail(c, rc, "reading stats", err);
  sqlite3_reset(s);
  return st;
}

static tl_status stat_add(tl_cache *c, const char *name, int64_t delta, tl_error *err) {
  if (delta == 0)
    return TL_OK;
  sqlite3_stmt *s = use(c, ST_STAT_ADD);
  sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, delta);
  return exec_done(c, s, "updating stats", err);
}

/* ==== write transactions ==================================================
 * write_txn runs fn inside BEGIN IMMEDIATE ... COMMIT.  If fn fails the
 * transaction is rolled back; if the failure (or BEGIN, or COMMIT) is
 * SQLITE_BUSY, the whole transaction is retried with a short back-off until
 * busy_timeout_ms have passed.  fn must therefore only change the database
 * and its own arg (resetting what it accumulates at its start). */

typedef tl_status (*txn_fn)(tl_cache *c, void *arg, tl_error *err);

static void rollback(tl_cache *c) {
  if (!sqlite3_get_autocommit(c->db)) { /* SQLite may have rolled back already */
    sqlite3_stmt *s = use(c, ST_ROLLBACK);
    sqlite3_step(s);
    sqlite3_reset(s);
  }
}

static tl_status write_txn(tl_cache *c, const char *what, txn_fn fn, void *arg, tl_error *err) {
  int64_t deadline = mono_ms() + c->opt.busy_timeout_ms;
  for (int wait = 1;; wait = wait < 32 ? wait * 2 : wait) {
    tl_status st;
    sqlite3_stmt *s = use(c, ST_BEGIN);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) {
      st = sql_fail(c, rc, what, err);
      sqlite3_reset(s);
    } else {
      sqlite3_reset(s);
      st = fn(c, arg, err);
      if (st == TL_OK) {
        s = use(c, ST_COMMIT);
        rc = sqlite3_step(s);
        while (is_busy(rc) && mono_ms() < deadline) { /* the transaction stays open */
          sqlite3_reset(s);
          sleep_ms(1);
          rc = sqlite3_step(s);
        }
        if (rc == SQLITE_DONE) {
          sqlite3_reset(s);
          c->commits++;
          return TL_OK;
        }
        st = sql_fail(c, rc, what, err);
        sqlite3_reset(s);
      }
      rollback(c);
    }
    if (st != TL_BUSY || mono_ms() >= deadline)
      return st;
    sleep_ms(wait);
  }
}

/* ==== open and close ======================================================= */

/* mkdir -p of every directory above the file in path. */
static tl_status make_parents(const char *path, tl_error *err) {
  char buf[TL_CACHE_PATH_MAX];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
      int e = errno;
      return tl_error_set(err, TL_IO, "cache: cannot create directory '%s': %s", buf, strerror(e));
    }
    *p = '/';
  }
  return TL_OK;
}

/* sqlite3_exec with retries while the file is busy (setting WAL mode on a
 * new file, for one, needs a moment of exclusive access). */
static tl_status exec_retry(tl_cache *c, const char *sql, const char *what, tl_error *err) {
  int64_t deadline = mono_ms() + c->opt.busy_timeout_ms;
  for (int wait = 1;; wait = wait < 32 ? wait * 2 : wait) {
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
      return TL_OK;
    if (!is_busy(rc) || mono_ms() >= deadline)
      return sql_fail(c, rc, what, err);
    sleep_ms(wait);
  }
}

static tl_status read_user_version(tl_cache *c, int *version, tl_error *err) {
  sqlite3_stmt *s = use(c, ST_USER_VERSION);
  int rc = step_read(c, s);
  tl_status st = TL_OK;
  if (rc == SQLITE_ROW)
    *version = sqlite3_column_int(s, 0);
  else
    st = sql_fail(c, rc, "reading the schema version", err);
  sqlite3_reset(s);
  return st;
}

static tl_status txn_migrate(tl_cache *c, void *arg, tl_error *err) {
  int version = 0;
  tl_status st = read_user_version(c, &version, err); /* again: another process may have won */
  if (st != TL_OK)
    return st;
  if (version > SCHEMA_VERSION)
    return tl_error_set(err, TL_UNSUPPORTED,
                        "cache: the database has schema version %d; this library knows up to %d",
                        version, SCHEMA_VERSION);
  for (int v = version; v < SCHEMA_VERSION; v++) {
    int rc = sqlite3_exec(c->db, migrations[v], NULL, NULL, NULL);
    if (rc != SQLITE_OK)
      return sql_fail(c, rc, "migrating the schema", err);
  }
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d", SCHEMA_VERSION);
  int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
  return rc == SQLITE_OK ? TL_OK : sql_fail(c, rc, "setting the schema version", err);
}

static tl_status migrate(tl_cache *c, tl_error *err) {
  int version = 0;
  tl_status st = read_user_version(c, &version, err);
  if (st != TL_OK || version == SCHEMA_VERSION)
    return st;
  if (version > SCHEMA_VERSION)
    return tl_error_set(err, TL_UNSUPPORTED,
                        "cache: the database has schema version %d; this library knows up to %d",
                        version, SCHEMA_VERSION);
  return write_txn(c, "migrating the schema", txn_migrate, NULL, err);
}

static tl_status prepare(tl_cache *c, int from, int to, tl_error *err) {
  for (int i = from; i < to; i++) {
    int rc = sqlite3_prepare_v3(c->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &c->stmt[i],
                                NULL);
    if (rc != SQLITE_OK)
      return sql_fail(c, rc, "preparing a statement", err);
  }
  return TL_OK;
}

static tl_status check_options(const tl_cache_options *in, tl_cache_options *o, tl_error *err) {
  if (in)
    *o = *in;
  else
    memset(o, 0, sizeof *o);
  if (o->max_bytes < 0 || o->max_artifact_bytes < 0 || o->busy_timeout_ms < 0)
    return tl_error_set(err, TL_INVALID_ARG, "cache: negative size or time in the options");
  if (o->sync != TL_CACHE_SYNC_NORMAL && o->sync != TL_CACHE_SYNC_FULL)
    return tl_error_set(err, TL_INVALID_ARG, "cache: unknown sync mode %d", (int)o->sync);
  if (o->max_artifact_bytes == 0)
    o->max_artifact_bytes = TL_CACHE_ARTIFACT_MAX_DEFAULT;
  if (o->busy_timeout_ms == 0)
    o->busy_timeout_ms = 5000;
  if (o->access_flush_ms == 0)
    o->access_flush_ms = 1000;
  return TL_OK;
}

/* Sets the connection up: busy timeout, WAL, synchronous, foreign keys. */
static tl_status configure(tl_cache *c, tl_error *err) {
  sqlite3_extended_result_codes(c->db, 1);
  sqlite3_busy_timeout(c->db, c->opt.busy_timeout_ms);
  if (c->opt.max_artifact_bytes > sqlite3_limit(c->db, SQLITE_LIMIT_LENGTH, -1))
    return tl_error_set(err, TL_INVALID_ARG,
                        "cache: max_artifact_bytes %lld is above SQLite's limit of %d bytes",
                        (long long)c->opt.max_artifact_bytes,
                        sqlite3_limit(c->db, SQLITE_LIMIT_LENGTH, -1));

  /* journal_mode answers with the mode in effect; anything but "wal" (a
   * file system without shared memory, say) is refused: several processes
   * and crash safety depend on it. */
  sqlite3_stmt *s = NULL;
  int64_t deadline = mono_ms() + c->opt.busy_timeout_ms;
  bool wal = false;
  for (int wait = 1;; wait = wait < 32 ? wait * 2 : wait) {
    int rc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode = WAL", -1, &s, NULL);
    if (rc == SQLITE_OK)
      rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
      const char *mode = (const char *)sqlite3_column_text(s, 0);
      wal = mode && strcmp(mode, "wal") == 0;
    }
    if (rc == SQLITE_ROW || !is_busy(rc) || mono_ms() >= deadline) {
      tl_status st = rc == SQLITE_ROW ? TL_OK : sql_fail(c, rc, "setting WAL mode", err);
      sqlite3_finalize(s);
      if (st != TL_OK)
        return st;
      break;
    }
    sqlite3_finalize(s);
    s = NULL;
    sleep_ms(wait);
  }
  if (!wal)
    return tl_error_set(err, TL_IO, "cache: WAL mode is not available for this file");
  tl_status st = exec_retry(c,
                            c->opt.sync == TL_CACHE_SYNC_FULL ? "PRAGMA synchronous = FULL"
                                                              : "PRAGMA synchronous = NORMAL",
                            "setting synchronous", err);
  if (st == TL_OK)
    st = exec_retry(c, "PRAGMA foreign_keys = ON", "enabling foreign keys", err);
  /* After a checkpoint, shrink a WAL that a large artifact made large. */
  if (st == TL_OK)
    st = exec_retry(c, "PRAGMA journal_size_limit = 67108864", "limiting the WAL", err);
  return st;
}

tl_status tl_cache_open(const char *path, const tl_cache_options *opts, tl_cache **out,
                        tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "cache: no place for the handle");
  *out = NULL;
  if (!path || !*path)
    return tl_error_set(err, TL_INVALID_ARG, "cache: empty database path");
  if (strlen(path) >= TL_CACHE_PATH_MAX)
    return tl_error_set(err, TL_TOO_LARGE, "cache: database path longer than %d bytes",
                        TL_CACHE_PATH_MAX - 1);
  tl_cache_options o;
  tl_status st = check_options(opts, &o, err);
  if (st != TL_OK)
    return st;
  if ((st = make_parents(path, err)) != TL_OK)
    return st;

  tl_cache *c = calloc(1, sizeof *c);
  if (!c || !(c->slots = calloc(ACCESS_SLOTS, sizeof *c->slots))) {
    free(c);
    return tl_error_set(err, TL_NOMEM, "cache: out of memory");
  }
  c->opt = o;
  c->last_flush_mono = mono_ms();
  int rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                             SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    st = tl_error_set(err, rc == SQLITE_NOMEM ? TL_NOMEM : TL_IO, "cache: cannot open '%s': %s",
                      path, c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
  } else {
    st = configure(c, err);
    if (st == TL_OK)
      st = prepare(c, 0, ST_FIRST_DATA_, err);
    if (st == TL_OK)
      st = migrate(c, err);
    if (st == TL_OK)
      st = prepare(c, ST_FIRST_DATA_, ST_COUNT_, err);
  }
  if (st != TL_OK) {
    tl_cache_close(c);
    return st;
  }
  *out = c;
  return TL_OK;
}

static tl_status flush(tl_cache *c, tl_error *err);

void tl_cache_close(tl_cache *c) {
  if (!c)
    return;
  if (c->db && c->stmt[ST_COUNT_ - 1]) /* fully opened: write the batch */
    flush(c, NULL);
  for (int i = 0; i < ST_COUNT_; i++)
    sqlite3_finalize(c->stmt[i]); /* NULL is fine */
  sqlite3_close(c->db);           /* NULL is fine; all statements are finalized */
  free(c->slots);
  free(c);
}

/* ==== the access batch ===================================================== */

static size_t slot_hash(int kind, const char *hex) {
  uint64_t h = 0; /* ids are SHA-256 digests: their first 16 digits are uniform */
  for (int i = 0; i < 16; i++)
    h = h << 4 | (uint64_t)(hex[i] <= '9' ? hex[i] - '0' : hex[i] - 'a' + 10);
  return (size_t)(h ^ (uint64_t)kind * 0x9e3779b97f4a7c15u);
}

static void note_access(tl_cache *c, int kind, const char *hex, int64_t when) {
  size_t mask = ACCESS_SLOTS - 1;
  for (size_t i = slot_hash(kind, hex) & mask;; i = (i + 1) & mask) {
    access_slot *s = &c->slots[i];
    if (!s->kind) {
      if (c->slots_used >= ACCESS_MAX_USED)
        return; /* writes keep failing: drop it, it is a hint */
      s->kind = (unsigned char)kind;
      memcpy(s->hex, hex, TL_SHA256_HEX_LEN + 1);
      s->when_ms = when;
      c->slots_used++;
      return;
    }
    if (s->kind == kind && memcmp(s->hex, hex, TL_SHA256_HEX_LEN) == 0) {
      if (when > s->when_ms)
        s->when_ms = when;
      return;
    }
  }
}

static tl_status txn_flush(tl_cache *c, void *arg, tl_error *err) {
  for (int i = 0; i < ACCESS_SLOTS; i++) {
    access_slot *a = &c->slots[i];
    if (!a->kind)
      continue;
    sqlite3_stmt *s = use(c, a->kind == ACCESS_BUILD ? ST_TOUCH_BUILD : ST_TOUCH_ARTIFACT);
    bind_hex(s, 1, a->hex);
    sqlite3_bind_int64(s, 2, a->when_ms);
    tl_status st = exec_done(c, s, "recording access times", err);
    if (st != TL_OK)
      return st;
  }
  tl_status st = stat_add(c, "hits", c->pending_hits, err);
  if (st == TL_OK)
    st = stat_add(c, "misses", c->pending_misses, err);
  return st;
}

static tl_status flush(tl_cache *c, tl_error *err) {
  c->last_flush_mono = mono_ms();
  if (c->slots_used == 0 && c->pending_hits == 0 && c->pending_misses == 0)
    return TL_OK;
  tl_status st = write_txn(c, "recording access times", txn_flush, NULL, err);
  if (st == TL_OK) {
    memset(c->slots, 0, ACCESS_SLOTS * sizeof *c->slots);
    c->slots_used = 0;
    c->pending_hits = c->pending_misses = 0;
  }
  return st;
}

tl_status tl_cache_flush(tl_cache *c, tl_error *err) {
  if (!c)
    return tl_error_set(err, TL_INVALID_ARG, "cache: no handle");
  return flush(c, err);
}

/* After a lookup: count it, note the use, and write the batch when due.
 * A failed write is not the lookup's failure; the batch stays for later. */
static void after_lookup(tl_cache *c, bool hit, int kind, const char *hex) {
  if (hit) {
    c->pending_hits++;
    note_access(c, kind, hex, wall_ms());
  } else {
    c->pending_misses++;
  }
  if (c->opt.access_flush_ms < 0 || c->slots_used >= ACCESS_FLUSH_USED ||
      mono_ms() - c->last_flush_mono >= c->opt.access_flush_ms)
    flush(c, NULL);
}

/* ==== put ===================================================================== */

typedef struct put_arg {
  const tl_cache_build *b;
  const char *id;
  const void *bytes;
  size_t n;
  int64_t now;
} put_arg;

static tl_status txn_put(tl_cache *c, void *arg, tl_error *err) {
  put_arg *p = arg;
  const tl_cache_build *b = p->b;

  /* The artifact the key used before, if any: it may become an orphan. */
  char old[TL_SHA256_HEX_LEN + 1] = "";
  sqlite3_stmt *s = use(c, ST_BUILD_ARTIFACT);
  bind_hex(s, 1, b->key);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(s, 0);
    if (t && strlen(t) == TL_SHA256_HEX_LEN)
      memcpy(old, t, sizeof old);
  } else if (rc != SQLITE_DONE) {
    tl_status st = sql_fail(c, rc, "put", err);
    sqlite3_reset(s);
    return st;
  }
  sqlite3_reset(s);

  s = use(c, ST_PUT_ARTIFACT);
  rc = bind_hex(s, 1, p->id) | sqlite3_bind_int64(s, 2, (sqlite3_int64)p->n) |
       sqlite3_bind_int64(s, 3, p->now) |
       sqlite3_bind_blob64(s, 4, p->bytes, (sqlite3_uint64)p->n, SQLITE_STATIC);
  if (rc != SQLITE_OK)
    return sql_fail(c, sqlite3_errcode(c->db), "put (artifact)", err);
  tl_status st = exec_done(c, s, "put (artifact)", err);
  if (st != TL_OK)
    return st;

  s = use(c, ST_PUT_BUILD);
  rc = bind_hex(s, 1, b->key) | bind_hex(s, 2, p->id) |
       sqlite3_bind_text(s, 3, b->target, -1, SQLITE_STATIC) |
       sqlite3_bind_text(s, 4, b->manifest, -1, SQLITE_STATIC) |
       sqlite3_bind_text(s, 5, b->metadata, -1, SQLITE_STATIC) |
       sqlite3_bind_int64(s, 6, b->compile_ms) | sqlite3_bind_int64(s, 7, p->now);
  if (rc != SQLITE_OK)
    return sql_fail(c, sqlite3_errcode(c->db), "put (build)", err);
  if ((st = exec_done(c, s, "put (build)", err)) != TL_OK)
    return st;

  if (old[0] && strcmp(old, p->id) != 0) {
    s = use(c, ST_DELETE_IF_ORPHAN);
    bind_hex(s, 1, old);
    st = exec_done(c, s, "put (old artifact)", err);
  }
  return st;
}

/* Checks a text field: present and at most max bytes. */
static tl_status check_text(const char *s, size_t max, const char *name, tl_error *err) {
  if (!s)
    return tl_error_set(err, TL_INVALID_ARG, "cache: the build has no %s", name);
  if (strnlen(s, max + 1) > max)
    return tl_error_set(err, TL_TOO_LARGE, "cache: the %s is longer than %zu bytes", name, max);
  return TL_OK;
}

tl_status tl_cache_put(tl_cache *c, const tl_cache_build *b, const void *bytes, size_t n,
                       tl_error *err) {
  if (!c || !b)
    return tl_error_set(err, TL_INVALID_ARG, "cache: put without a handle or build");
  if (!tl_hex_is_sha256(b->key))
    return tl_error_set(err, TL_INVALID_ARG,
                        "cache: malformed build key: expected 64 lowercase hex characters");
  if (!bytes || n == 0)
    return tl_error_set(err, TL_INVALID_ARG, "cache: put of an empty artifact");
  if ((uint64_t)n > (uint64_t)c->opt.max_artifact_bytes)
    return tl_error_set(err, TL_TOO_LARGE, "cache: artifact of %zu bytes is over the limit of %lld",
                        n, (long long)c->opt.max_artifact_bytes);
  tl_status st;
  if ((st = check_text(b->manifest, TL_CACHE_TEXT_MAX, "manifest", err)) != TL_OK ||
      (st = check_text(b->metadata, TL_CACHE_TEXT_MAX, "metadata", err)) != TL_OK ||
      (st = check_text(b->target, TL_CACHE_TARGET_MAX, "target", err)) != TL_OK)
    return st;
  if (!b->target[0])
    return tl_error_set(err, TL_INVALID_ARG, "cache: the build has an empty target");
  if (b->compile_ms < 0)
    return tl_error_set(err, TL_INVALID_ARG, "cache: negative compile_ms");

  /* Hash before taking the write lock. */
  char id[TL_SHA256_HEX_LEN + 1];
  if ((st = tl_sha256_hex(bytes, n, id)) != TL_OK)
    return tl_error_set(err, st, "cache: hashing the artifact failed");
  if (b->artifact_id[0] && (!tl_hex_is_sha256(b->artifact_id) || strcmp(b->artifact_id, id) != 0))
    return tl_error_set(err, TL_INVALID_ARG,
                        "cache: artifact_id %.64s is not the SHA-256 of the bytes (%s)",
                        b->artifact_id, id);

  put_arg p = {b, id, bytes, n, wall_ms()};
  return write_txn(c, "put", txn_put, &p, err);
}

/* ==== lookups and the integrity check ======================================= */

/* Copies the current row of a BUILD_COLUMNS statement into one allocation. */
static tl_status copy_build(sqlite3_stmt *s, tl_cache_build **out, tl_error *err) {
  const char *text[3];
  size_t len[3], total = sizeof(tl_cache_build);
  static const int cols[3] = {COL_MANIFEST, COL_TARGET, COL_METADATA};
  for (int i = 0; i < 3; i++) {
    text[i] = (const char *)sqlite3_column_text(s, cols[i]);
    if (!text[i])
      text[i] = "";
    len[i] = strlen(text[i]);
    total += len[i] + 1;
  }
  tl_cache_build *b = calloc(1, total);
  if (!b)
    return tl_error_set(err, TL_NOMEM, "cache: out of memory");
  char *p = (char *)(b + 1);
  const char **dst[3] = {&b->manifest, &b->target, &b->metadata};
  for (int i = 0; i < 3; i++) {
    memcpy(p, text[i], len[i] + 1);
    *dst[i] = p;
    p += len[i] + 1;
  }
  const char *key = (const char *)sqlite3_column_text(s, COL_KEY);
  const char *aid = (const char *)sqlite3_column_text(s, COL_ARTIFACT);
  snprintf(b->key, sizeof b->key, "%s", key ? key : "");
  snprintf(b->artifact_id, sizeof b->artifact_id, "%s", aid ? aid : "");
  b->compile_ms = sqlite3_column_int64(s, COL_COMPILE_MS);
  b->created_ms = sqlite3_column_int64(s, COL_CREATED);
  b->last_access_ms = sqlite3_column_int64(s, COL_LAST_ACCESS);
  b->size = sqlite3_column_int64(s, COL_SIZE);
  *out = b;
  return TL_OK;
}

static tl_status lookup_build(tl_cache *c, const char *key, tl_cache_build **out, tl_error *err) {
  sqlite3_stmt *s = use(c, ST_GET_BUILD);
  bind_hex(s, 1, key);
  int rc = step_read(c, s);
  tl_status st;
  if (rc == SQLITE_ROW)
    st = copy_build(s, out, err);
  else if (rc == SQLITE_DONE)
    st = tl_error_set(err, TL_NOT_FOUND, "cache: no build with key %s", key);
  else
    st = sql_fail(c, rc, "looking up a build", err);
  sqlite3_reset(s);
  return st;
}

typedef struct bad_arg {
  const char *id;
  const void *bytes; /* the bytes that failed the check */
  size_t n;
  bool removed;
} bad_arg;

/* Deletes the artifact and its builds, if the artifact still holds the bad
 * bytes that were read (another process may have removed or healed it in
 * the meantime), and counts the failure once. */
static tl_status txn_remove_bad(tl_cache *c, void *arg, tl_error *err) {
  bad_arg *a = arg;
  a->removed = false;
  sqlite3_stmt *s = use(c, ST_ARTIFACT_STILL);
  bind_hex(s, 1, a->id);
  sqlite3_bind_blob64(s, 2, a->bytes, (sqlite3_uint64)a->n, SQLITE_STATIC);
  int rc = sqlite3_step(s);
  tl_status st = TL_OK;
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    st = sql_fail(c, rc, "removing a bad artifact", err);
  sqlite3_reset(s);
  if (st != TL_OK || rc == SQLITE_DONE)
    return st;
  s = use(c, ST_DELETE_BUILDS_OF);
  bind_hex(s, 1, a->id);
  if ((st = exec_done(c, s, "removing a bad artifact's builds", err)) != TL_OK)
    return st;
  s = use(c, ST_DELETE_ARTIFACT);
  bind_hex(s, 1, a->id);
  if ((st = exec_done(c, s, "removing a bad artifact", err)) != TL_OK)
    return st;
  a->removed = true;
  return stat_add(c, "integrity_failures", 1, err);
}

/* Reads and checks an artifact; see tl_cache_get_artifact. *corrupt tells a
 * failed check from a plain miss. */
static tl_status read_artifact(tl_cache *c, const char *id, void **bytes, size_t *n, bool *corrupt,
                               tl_error *err) {
  *corrupt = false;
  sqlite3_stmt *s = use(c, ST_GET_ARTIFACT);
  bind_hex(s, 1, id);
  int rc = step_read(c, s);
  if (rc != SQLITE_ROW) {
    tl_status st = rc == SQLITE_DONE ? tl_error_set(err, TL_NOT_FOUND, "cache: no artifact %s", id)
                                     : sql_fail(c, rc, "reading an artifact", err);
    sqlite3_reset(s);
    return st;
  }
  const void *p = sqlite3_column_blob(s, 0);
  size_t len = (size_t)sqlite3_column_bytes(s, 0);
  unsigned char *buf = malloc(len ? len : 1);
  if (!buf || (!p && len)) {
    sqlite3_reset(s);
    free(buf);
    return tl_error_set(err, TL_NOMEM, "cache: out of memory reading artifact %s", id);
  }
  if (len)
    memcpy(buf, p, len);
  sqlite3_reset(s); /* ends the read before a possible write below */

  char got[TL_SHA256_HEX_LEN + 1];
  tl_status st = tl_sha256_hex(buf, len, got);
  if (st != TL_OK) {
    free(buf);
    return tl_error_set(err, st, "cache: hashing artifact %s failed", id);
  }
  if (strcmp(got, id) != 0) {
    bad_arg a = {id, buf, len, false};
    /* If this fails (busy), the next read finds the bad bytes again. */
    write_txn(c, "removing a bad artifact", txn_remove_bad, &a, NULL);
    free(buf);
    *corrupt = true;
    return tl_error_set(err, TL_NOT_FOUND,
                        "cache: artifact %s failed its integrity check and was removed", id);
  }
  *bytes = buf;
  *n = len;
  return TL_OK;
}

static tl_status check_id(const char *hex, const char *what, tl_error *err) {
  if (tl_hex_is_sha256(hex))
    return TL_OK;
  return tl_error_set(err, TL_INVALID_ARG,
                      "cache: malformed %s: expected 64 lowercase hex characters", what);
}

tl_status tl_cache_get_build(tl_cache *c, const char *key, tl_cache_build **out, tl_error *err) {
  if (out)
    *out = NULL;
  if (!c || !out)
    return tl_error_set(err, TL_INVALID_ARG, "cache: get_build without a handle or output");
  tl_status st = check_id(key, "build key", err);
  if (st != TL_OK)
    return st;
  st = lookup_build(c, key, out, err);
  if (st == TL_OK || st == TL_NOT_FOUND)
    after_lookup(c, st == TL_OK, ACCESS_BUILD, key);
  return st;
}

tl_status tl_cache_get_artifact(tl_cache *c, const char *id, void **bytes, size_t *n,
                                tl_error *err) {
  if (bytes)
    *bytes = NULL;
  if (n)
    *n = 0;
  if (!c || !bytes || !n)
    return tl_error_set(err, TL_INVALID_ARG, "cache: get_artifact without a handle or output");
  tl_status st = check_id(id, "artifact id", err);
  if (st != TL_OK)
    return st;
  bool corrupt;
  st = read_artifact(c, id, bytes, n, &corrupt, err);
  if (st == TL_OK || st == TL_NOT_FOUND)
    after_lookup(c, st == TL_OK, ACCESS_ARTIFACT, id);
  return st;
}

tl_status tl_cache_get(tl_cache *c, const char *key, tl_cache_build **out, void **bytes, size_t *n,
                       tl_error *err) {
  if (out)
    *out = NULL;
  if (bytes)
    *bytes = NULL;
  if (n)
    *n = 0;
  if (!c || !out || !bytes || !n)
    return tl_error_set(err, TL_INVALID_ARG, "cache: get without a handle or output");
  tl_status st = check_id(key, "build key", err);
  if (st != TL_OK)
    return st;
  tl_cache_build *b = NULL;
  st = lookup_build(c, key, &b, err);
  if (st == TL_OK) {
    bool corrupt;
    st = read_artifact(c, b->artifact_id, bytes, n, &corrupt, err);
    if (st == TL_OK)
      *out = b;
    else
      tl_cache_build_free(b);
  }
  if (st == TL_OK || st == TL_NOT_FOUND)
    after_lookup(c, st == TL_OK, ACCESS_BUILD, key);
  return st;
}

void tl_cache_build_free(tl_cache_build *b) { free(b); }

/* ==== eviction ================================================================
 * One transaction evicts at most max_rows builds, re-reading the total size
 * after each, so it stops as soon as the cache is under the cap.  Between
 * transactions the lock is released and the evictor pauses a millisecond, so
 * that writers waiting in their busy handlers get their turn. */

typedef struct evict_arg {
  int max_rows;
  int64_t evicted; /* in this transaction */
  bool done;       /* under the cap, or nothing left to evict */
} evict_arg;

static tl_status txn_evict(tl_cache *c, void *arg, tl_error *err) {
  evict_arg *a = arg;
  a->evicted = 0;
  a->done = false;
  tl_status st = TL_OK;
  for (int i = 0; i < a->max_rows && st == TL_OK; i++) {
    int64_t bytes = 0;
    if ((st = stat_get(c, "bytes", &bytes, err)) != TL_OK)
      break;
    if (bytes <= c->opt.max_bytes) {
      a->done = true;
      break;
    }
    char key[TL_SHA256_HEX_LEN + 1], aid[TL_SHA256_HEX_LEN + 1];
    sqlite3_stmt *s = use(c, ST_LRU_VICTIM);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
      const char *k = (const char *)sqlite3_column_text(s, 0);
      const char *a_ = (const char *)sqlite3_column_text(s, 1);
      if (!k || !a_)
        st = tl_error_set(err, TL_NOMEM, "cache: out of memory in eviction");
      else {
        snprintf(key, sizeof key, "%s", k);
        snprintf(aid, sizeof aid, "%s", a_);
      }
    } else if (rc != SQLITE_DONE) {
      st = sql_fail(c, rc, "eviction", err);
    }
    sqlite3_reset(s);
    if (st != TL_OK)
      break;
    if (rc == SQLITE_DONE) { /* no builds left: done */
      a->done = true;
      break;
    }
    s = use(c, ST_DELETE_BUILD);
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    if ((st = exec_done(c, s, "eviction", err)) != TL_OK)
      break;
    s = use(c, ST_DELETE_IF_ORPHAN);
    sqlite3_bind_text(s, 1, aid, -1, SQLITE_STATIC);
    if ((st = exec_done(c, s, "eviction", err)) != TL_OK)
      break;
    a->evicted++;
  }
  if (st == TL_OK)
    st = stat_add(c, "evictions", a->evicted, err);
  return st;
}

tl_status tl_cache_evict_step(tl_cache *c, int max_rows, int64_t *evicted, tl_error *err) {
  if (evicted)
    *evicted = 0;
  if (!c)
    return tl_error_set(err, TL_INVALID_ARG, "cache: evict without a handle");
  if (max_rows < 0 || max_rows > TL_CACHE_EVICT_ROWS_MAX)
    return tl_error_set(err, TL_INVALID_ARG, "cache: max_rows must be 0..%d",
                        TL_CACHE_EVICT_ROWS_MAX);
  if (c->opt.max_bytes == 0)
    return TL_OK;
  flush(c, NULL); /* so that this process's recent uses count */
  evict_arg a = {max_rows ? max_rows : TL_CACHE_EVICT_ROWS_DEFAULT, 0, false};
  for (;;) {
    tl_status st = write_txn(c, "eviction", txn_evict, &a, err);
    if (st != TL_OK)
      return st;
    if (evicted)
      *evicted += a.evicted;
    if (a.done)
      return TL_OK;
    sleep_ms(1);
  }
}

/* ==== stats, list, verify, remove ============================================= */

tl_status tl_cache_get_stats(tl_cache *c, tl_cache_stats *out, tl_error *err) {
  if (!c || !out)
    return tl_error_set(err, TL_INVALID_ARG, "cache: stats without a handle or output");
  memset(out, 0, sizeof *out);
  static const struct {
    const char *name;
    size_t offset;
  } fields[] = {
      {"bytes", offsetof(tl_cache_stats, bytes)},
      {"artifacts", offsetof(tl_cache_stats, artifacts)},
      {"builds", offsetof(tl_cache_stats, builds)},
      {"hits", offsetof(tl_cache_stats, hits)},
      {"misses", offsetof(tl_cache_stats, misses)},
      {"evictions", offsetof(tl_cache_stats, evictions)},
      {"integrity_failures", offsetof(tl_cache_stats, integrity_failures)},
  };
  sqlite3_stmt *s = use(c, ST_STATS_ALL);
  int rc = step_read(c, s);
  for (; rc == SQLITE_ROW; rc = sqlite3_step(s)) {
    const char *name = (const char *)sqlite3_column_text(s, 0);
    for (size_t i = 0; name && i < sizeof fields / sizeof fields[0]; i++)
      if (strcmp(name, fields[i].name) == 0)
        *(int64_t *)((char *)out + fields[i].offset) = sqlite3_column_int64(s, 1);
  }
  tl_status st = rc == SQLITE_DONE ? TL_OK : sql_fail(c, rc, "reading stats", err);
  sqlite3_reset(s);
  out->hits += c->pending_hits;
  out->misses += c->pending_misses;
  return st;
}

tl_status tl_cache_list(tl_cache *c, tl_cache_list_fn fn, void *user, tl_error *err) {
  if (!c || !fn)
    return tl_error_set(err, TL_INVALID_ARG, "cache: list without a handle or callback");
  sqlite3_stmt *s = use(c, ST_LIST);
  int rc = step_read(c, s);
  for (; rc == SQLITE_ROW; rc = sqlite3_step(s)) {
    tl_cache_build b = {0};
    const char *key = (const char *)sqlite3_column_text(s, COL_KEY);
    const char *aid = (const char *)sqlite3_column_text(s, COL_ARTIFACT);
    snprintf(b.key, sizeof b.key, "%s", key ? key : "");
    snprintf(b.artifact_id, sizeof b.artifact_id, "%s", aid ? aid : "");
    b.manifest = (const char *)sqlite3_column_text(s, COL_MANIFEST);
    b.target = (const char *)sqlite3_column_text(s, COL_TARGET);
    b.metadata = (const char *)sqlite3_column_text(s, COL_METADATA);
    b.manifest = b.manifest ? b.manifest : "";
    b.target = b.target ? b.target : "";
    b.metadata = b.metadata ? b.metadata : "";
    b.compile_ms = sqlite3_column_int64(s, COL_COMPILE_MS);
    b.created_ms = sqlite3_column_int64(s, COL_CREATED);
    b.last_access_ms = sqlite3_column_int64(s, COL_LAST_ACCESS);
    b.size = sqlite3_column_int64(s, COL_SIZE);
    if (fn(&b, user) != 0) {
      rc = SQLITE_DONE;
      break;
    }
  }
  tl_status st = rc == SQLITE_DONE ? TL_OK : sql_fail(c, rc, "listing builds", err);
  sqlite3_reset(s);
  return st;
}

typedef struct sweep_arg {
  stmt_id id;
  int64_t changed;
} sweep_arg;

static tl_status txn_sweep(tl_cache *c, void *arg, tl_error *err) {
  sweep_arg *a = arg;
  tl_status st = exec_done(c, use(c, a->id), "verify", err);
  a->changed = st == TL_OK ? sqlite3_changes(c->db) : 0;
  return st;
}

tl_status tl_cache_verify(tl_cache *c, tl_cache_verify_result *out, tl_error *err) {
  tl_cache_verify_result r = {0};
  if (out)
    *out = r;
  if (!c)
    return tl_error_set(err, TL_INVALID_ARG, "cache: verify without a handle");
  /* Walk the artifacts in id order, one short read per artifact, so that
   * no read transaction stays open while bad ones are deleted. */
  char *last = NULL; /* the id checked last; a copy, ids of a damaged file may be any length */
  tl_status st = TL_OK;
  for (;;) {
    sqlite3_stmt *s = use(c, ST_NEXT_ARTIFACT);
    sqlite3_bind_text(s, 1, last ? last : "", -1, SQLITE_STATIC);
    int rc = step_read(c, s);
    if (rc != SQLITE_ROW) {
      if (rc != SQLITE_DONE)
        st = sql_fail(c, rc, "verify", err);
      sqlite3_reset(s);
      break;
    }
    const char *id = (const char *)sqlite3_column_text(s, 0);
    free(last);
    if (!(last = strdup(id ? id : ""))) {
      sqlite3_reset(s);
      st = tl_error_set(err, TL_NOMEM, "cache: out of memory");
      break;
    }
    const void *p = sqlite3_column_blob(s, 1);
    size_t len = (size_t)sqlite3_column_bytes(s, 1);
    if (!p && len) {
      sqlite3_reset(s);
      st = tl_error_set(err, TL_NOMEM, "cache: out of memory reading artifact %s", last);
      break;
    }
    char got[TL_SHA256_HEX_LEN + 1];
    if ((st = tl_sha256_hex(p, len, got)) != TL_OK) {
      sqlite3_reset(s);
      tl_error_set(err, st, "cache: hashing artifact %s failed", last);
      break;
    }
    r.artifacts_checked++;
    r.bytes_checked += (int64_t)len;
    if (strcmp(got, last) == 0) {
      sqlite3_reset(s);
      continue;
    }
    /* Keep a copy of the bad bytes: the removal deletes only if they are
     * still what is stored. */
    void *copy = malloc(len ? len : 1);
    if (!copy) {
      sqlite3_reset(s);
      st = tl_error_set(err, TL_NOMEM, "cache: out of memory");
      break;
    }
    if (len)
      memcpy(copy, p, len);
    sqlite3_reset(s);
    bad_arg a = {last, copy, len, false};
    st = write_txn(c, "verify", txn_remove_bad, &a, err);
    free(copy);
    if (st != TL_OK)
      break;
    r.corrupt_artifacts += a.removed;
  }
  free(last);
  if (st == TL_OK) {
    sweep_arg a = {ST_DELETE_DANGLING, 0};
    st = write_txn(c, "verify", txn_sweep, &a, err);
    r.dangling_builds = a.changed;
  }
  if (st == TL_OK) {
    sweep_arg a = {ST_DELETE_ORPHANS, 0};
    st = write_txn(c, "verify", txn_sweep, &a, err);
    r.orphan_artifacts = a.changed;
  }
  if (out)
    *out = r;
  return st;
}

typedef struct remove_arg {
  const char *key;
  bool found;
} remove_arg;

static tl_status txn_remove(tl_cache *c, void *arg, tl_error *err) {
  remove_arg *a = arg;
  char aid[TL_SHA256_HEX_LEN + 1] = "";
  sqlite3_stmt *s = use(c, ST_BUILD_ARTIFACT);
  bind_hex(s, 1, a->key);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(s, 0);
    snprintf(aid, sizeof aid, "%s", t ? t : "");
  }
  tl_status st = rc == SQLITE_ROW || rc == SQLITE_DONE ? TL_OK : sql_fail(c, rc, "remove", err);
  sqlite3_reset(s);
  a->found = rc == SQLITE_ROW;
  if (st != TL_OK || !a->found)
    return st;
  s = use(c, ST_DELETE_BUILD);
  bind_hex(s, 1, a->key);
  if ((st = exec_done(c, s, "remove", err)) != TL_OK)
    return st;
  s = use(c, ST_DELETE_IF_ORPHAN);
  sqlite3_bind_text(s, 1, aid, -1, SQLITE_STATIC);
  return exec_done(c, s, "remove", err);
}

tl_status tl_cache_remove(tl_cache *c, const char *key, tl_error *err) {
  if (!c)
    return tl_error_set(err, TL_INVALID_ARG, "cache: remove without a handle");
  tl_status st = check_id(key, "build key", err);
  if (st != TL_OK)
    return st;
  remove_arg a = {key, false};
  if ((st = write_txn(c, "remove", txn_remove, &a, err)) != TL_OK)
    return st;
  return a.found ? TL_OK : tl_error_set(err, TL_NOT_FOUND, "cache: no build with key %s", key);
}

/* ==== notes ============================================================== */

static tl_status check_note(const char *name, const char *value, tl_error *err) {
  if (!name || !*name || strnlen(name, TL_CACHE_NOTE_NAME_MAX + 1) > TL_CACHE_NOTE_NAME_MAX)
    return tl_error_set(err, TL_INVALID_ARG, "cache: a note's name has 1 to %d bytes", TL_CACHE_NOTE_NAME_MAX);
  if (value && strnlen(value, TL_CACHE_NOTE_MAX + 1) > TL_CACHE_NOTE_MAX)
    return tl_error_set(err, TL_TOO_LARGE, "cache: note '%s' is longer than %d bytes", name, TL_CACHE_NOTE_MAX);
  return TL_OK;
}

typedef struct notes_arg {
  int n;
  const char *const *names, *const *values;
} notes_arg;

static tl_status txn_notes(tl_cache *c, void *arg, tl_error *err) {
  notes_arg *a = arg;
  tl_status st = TL_OK;
  for (int i = 0; i < a->n && st == TL_OK; i++) {
    sqlite3_stmt *s = use(c, ST_NOTE_PUT);
    sqlite3_bind_text(s, 1, a->names[i], -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, a->values[i], -1, SQLITE_STATIC);
    st = exec_done(c, s, "note", err);
  }
  return st;
}

tl_status tl_cache_notes_set(tl_cache *c, int n, const char *const names[], const char *const values[],
                             tl_error *err) {
  if (!c || n < 0 || (n > 0 && (!names || !values)))
    return tl_error_set(err, TL_INVALID_ARG, "cache: notes without a handle, names or values");
  for (int i = 0; i < n; i++) {
    if (!values[i])
      return tl_error_set(err, TL_INVALID_ARG, "cache: note without a value");
    tl_status st = check_note(names[i], values[i], err);
    if (st != TL_OK)
      return st;
  }
  if (n == 0)
    return TL_OK;
  notes_arg a = {n, names, values};
  return write_txn(c, "note", txn_notes, &a, err);
}

tl_status tl_cache_note_set(tl_cache *c, const char *name, const char *value, tl_error *err) {
  return tl_cache_notes_set(c, 1, &name, &value, err);
}

int64_t tl_cache_commits(const tl_cache *c) { return c ? c->commits : 0; }

tl_status tl_cache_note_get(tl_cache *c, const char *name, char **value, tl_error *err) {
  if (value)
    *value = NULL;
  if (!c || !value)
    return tl_error_set(err, TL_INVALID_ARG, "cache: note without a handle or value");
  tl_status st = check_note(name, NULL, err);
  if (st != TL_OK)
    return st;
  sqlite3_stmt *s = use(c, ST_NOTE_GET);
  sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
  int rc = step_read(c, s);
  if (rc == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(s, 0);
    size_t n = t ? strlen(t) + 1 : 1;
    if ((*value = malloc(n)))
      memcpy(*value, t ? t : "", n);
    else
      st = tl_error_set(err, TL_NOMEM, "cache: out of memory");
  } else if (rc == SQLITE_DONE)
    st = tl_error_set(err, TL_NOT_FOUND, "cache: no note '%s'", name);
  else
    st = sql_fail(c, rc, "reading a note", err);
  sqlite3_reset(s);
  return st;
}
