/*
 * test_cache.c - tests of libtlcache (cache/tlcache.h) and of the SHA-256
 * helpers it uses (proto/tl_hash.h), on real SQLite files in a temporary
 * directory and with real processes: round trips, shared artifacts, misses
 * and malformed input, corruption of a stored blob (made with the sqlite3
 * API directly) and its healing, LRU eviction under a size cap, several
 * processes writing and reading one file at once, and SIGKILL of a writer
 * in the middle of its work.
 *
 * Random choices come from a seeded generator; the seed is printed and can
 * be fixed with TL_TEST_SEED=<n> to replay a failure.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sqlite3.h>

#include "../../cache/tlcache.h"
#include "../../proto/tl_hash.h"

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t seed;

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* key = SHA-256 of a formatted name, so keys look like the compiler's. */
static void key_for(char out[65], const char *fmt, ...) {
  char name[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  assert_int_equal(tl_sha256_hex(name, strlen(name), out), TL_OK);
}

/* Deterministic artifact bytes for a name: 100..(100 + spread) bytes. */
static unsigned char *content_for(size_t *n, size_t spread, const char *fmt, ...) {
  char name[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  uint8_t md[32];
  tl_sha256(name, strlen(name), md);
  uint64_t s;
  memcpy(&s, md, sizeof s);
  s |= 1;
  *n = 100 + (size_t)(rng_next(&s) % (spread + 1));
  unsigned char *b = malloc(*n);
  if (!b)
    abort();
  for (size_t i = 0; i < *n; i++)
    b[i] = (unsigned char)(rng_next(&s) >> 56);
  return b;
}

static tl_cache_build build_of(const char *key, const char *target) {
  tl_cache_build b = {0};
  snprintf(b.key, sizeof b.key, "%.64s", key);
  b.manifest = "program sha256:...\ntarget sm_90a\n";
  b.target = target;
  b.metadata = "{\"entry\":\"main_kernel\",\"block\":[128,1,1]}";
  b.compile_ms = 42;
  return b;
}

typedef struct fixture {
  char dir[64];
  char path[128]; /* dir/sub/cache.db: the subdirectory is created by open */
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f)
    return -1;
  snprintf(f->dir, sizeof f->dir, "/tmp/tlcache_test.XXXXXX");
  if (!mkdtemp(f->dir))
    return -1;
  snprintf(f->path, sizeof f->path, "%s/sub/cache.db", f->dir);
  *state = f;
  return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  return remove(path);
}

static int teardown(void **state) {
  fixture *f = *state;
  nftw(f->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(f);
  return 0;
}

static tl_cache *open_cache(const char *path, const tl_cache_options *o) {
  tl_cache *c = NULL;
  tl_error err;
  tl_status st = tl_cache_open(path, o, &c, &err);
  if (st != TL_OK)
    fail_msg("tl_cache_open: %s", err.message);
  return c;
}

static void put_ok(tl_cache *c, const tl_cache_build *b, const void *bytes, size_t n) {
  tl_error err;
  tl_status st = tl_cache_put(c, b, bytes, n, &err);
  if (st != TL_OK)
    fail_msg("tl_cache_put: %s", err.message);
}

/* The first column of the first row of sql (with ?1 = arg when arg is set),
 * read through a separate raw SQLite connection. */
static int64_t raw_int(const char *path, const char *sql, const char *arg) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
  if (arg)
    sqlite3_bind_text(s, 1, arg, -1, SQLITE_STATIC);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  sqlite3_close(db);
  return v;
}

static void raw_exec(const char *path, const char *sql) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
    fail_msg("%s: %s", sql, msg);
  sqlite3_close(db);
}

/* The first column of the first row of sql as text, copied to out. */
static void raw_text(const char *path, const char *sql, char *out, size_t cap) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  snprintf(out, cap, "%s", (const char *)sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(db);
}

/* Flips one byte in the middle of the stored blob of artifact id, keeping
 * its length, with a plain UPDATE. */
static void raw_corrupt(const char *path, const char *id) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt *s = NULL;
  assert_int_equal(
      sqlite3_prepare_v2(db, "SELECT bytes FROM artifacts WHERE id = ?1", -1, &s, NULL), SQLITE_OK);
  sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  int n = sqlite3_column_bytes(s, 0);
  assert_true(n > 0);
  unsigned char *b = malloc((size_t)n);
  memcpy(b, sqlite3_column_blob(s, 0), (size_t)n);
  sqlite3_finalize(s);
  b[n / 2] ^= 0x5a;
  assert_int_equal(
      sqlite3_prepare_v2(db, "UPDATE artifacts SET bytes = ?2 WHERE id = ?1", -1, &s, NULL),
      SQLITE_OK);
  sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
  sqlite3_bind_blob(s, 2, b, n, SQLITE_STATIC);
  assert_int_equal(sqlite3_step(s), SQLITE_DONE);
  assert_int_equal(sqlite3_changes(db), 1);
  sqlite3_finalize(s);
  sqlite3_close(db);
  free(b);
}

/* ---- tl_hash ---------------------------------------------------------------- */

static void test_sha256(void **state) {
  char hex[65];
  /* FIPS 180-2 test vectors. */
  assert_int_equal(tl_sha256_hex("abc", 3, hex), TL_OK);
  assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert_int_equal(tl_sha256_hex(NULL, 0, hex), TL_OK);
  assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const char *msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  assert_int_equal(tl_sha256_hex(msg, strlen(msg), hex), TL_OK);
  assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");

  /* Incremental over uneven pieces equals one-shot. */
  size_t n;
  unsigned char *b = content_for(&n, 5000, "incremental");
  char one[65], inc[65];
  tl_sha256_hex(b, n, one);
  tl_sha256_ctx h;
  assert_int_equal(tl_sha256_init(&h), TL_OK);
  for (size_t at = 0, step = 1; at < n; at += step, step = step * 3 + 1)
    assert_int_equal(tl_sha256_update(&h, b + at, at + step > n ? n - at : step), TL_OK);
  assert_int_equal(tl_sha256_final_hex(&h, inc), TL_OK);
  assert_string_equal(one, inc);
  tl_sha256_discard(&h); /* after final: fine */
  assert_int_equal(tl_sha256_init(&h), TL_OK);
  tl_sha256_update(&h, "x", 1);
  tl_sha256_discard(&h); /* given up half-way: no leak */
  free(b);

  assert_true(tl_hex_is_sha256(one));
  char bad[70];
  snprintf(bad, sizeof bad, "%s", one);
  bad[3] = 'A'; /* upper case */
  assert_false(tl_hex_is_sha256(bad));
  snprintf(bad, sizeof bad, "%s", one);
  bad[63] = 0; /* 63 characters */
  assert_false(tl_hex_is_sha256(bad));
  snprintf(bad, sizeof bad, "%s0", one); /* 65 characters */
  assert_false(tl_hex_is_sha256(bad));
  snprintf(bad, sizeof bad, "%s", one);
  bad[10] = 'g';
  assert_false(tl_hex_is_sha256(bad));
  assert_false(tl_hex_is_sha256(""));
  assert_false(tl_hex_is_sha256(NULL));
}

/* ---- put and get --------------------------------------------------------------- */

static void test_round_trip(void **state) {
  fixture *f = *state;
  tl_cache *c = open_cache(f->path, NULL); /* creates dir/sub */
  char key[65];
  key_for(key, "round trip");
  size_t n;
  unsigned char *bytes = content_for(&n, 4000, "round trip bytes");
  tl_cache_build b = build_of(key, "sm_90a");
  int64_t before = (int64_t)time(NULL) * 1000;
  put_ok(c, &b, bytes, n);

  tl_cache_build *got = NULL;
  tl_error err;
  assert_int_equal(tl_cache_get_build(c, key, &got, &err), TL_OK);
  assert_string_equal(got->key, key);
  char id[65];
  tl_sha256_hex(bytes, n, id);
  assert_string_equal(got->artifact_id, id);
  assert_string_equal(got->manifest, b.manifest);
  assert_string_equal(got->target, "sm_90a");
  assert_string_equal(got->metadata, b.metadata);
  assert_int_equal(got->compile_ms, 42);
  assert_int_equal(got->size, (int64_t)n);
  assert_true(got->created_ms >= before && got->created_ms <= before + 60000);
  assert_true(got->last_access_ms >= got->created_ms);

  void *data = NULL;
  size_t len = 0;
  assert_int_equal(tl_cache_get_artifact(c, got->artifact_id, &data, &len, &err), TL_OK);
  assert_int_equal(len, n);
  assert_memory_equal(data, bytes, n);
  free(data);
  tl_cache_build_free(got);

  /* Both at once. */
  assert_int_equal(tl_cache_get(c, key, &got, &data, &len, &err), TL_OK);
  assert_string_equal(got->artifact_id, id);
  assert_int_equal(len, n);
  assert_memory_equal(data, bytes, n);
  free(data);
  tl_cache_build_free(got);

  /* Giving artifact_id explicitly: the right one is accepted. */
  snprintf(b.artifact_id, sizeof b.artifact_id, "%s", id);
  put_ok(c, &b, bytes, n);

  tl_cache_stats st;
  assert_int_equal(tl_cache_get_stats(c, &st, &err), TL_OK);
  assert_int_equal(st.builds, 1);
  assert_int_equal(st.artifacts, 1);
  assert_int_equal(st.bytes, (int64_t)n);
  assert_int_equal(st.hits, 3);
  assert_int_equal(st.misses, 0);
  tl_cache_close(c);

  /* Reopened (the hits were written at close), everything is still there. */
  c = open_cache(f->path, NULL);
  assert_int_equal(tl_cache_get_stats(c, &st, &err), TL_OK);
  assert_int_equal(st.hits, 3);
  assert_int_equal(tl_cache_get(c, key, &got, &data, &len, &err), TL_OK);
  assert_memory_equal(data, bytes, n);
  free(data);
  tl_cache_build_free(got);
  tl_cache_close(c);
  tl_cache_close(NULL);
  free(bytes);
}

static void test_shared_artifact(void **state) {
  fixture *f = *state;
  tl_cache *c = open_cache(f->path, NULL);
  char k1[65], k2[65], k3[65];
  key_for(k1, "shared 1");
  key_for(k2, "shared 2");
  key_for(k3, "other");
  size_t n, m;
  unsigned char *bytes = content_for(&n, 3000, "shared bytes");
  unsigned char *other = content_for(&m, 3000, "other bytes");
  tl_cache_build b1 = build_of(k1, "sm_80"), b2 = build_of(k2, "sm_86");
  tl_cache_build b3 = build_of(k3, "gfx942");
  put_ok(c, &b1, bytes, n);
  put_ok(c, &b2, bytes, n);
  put_ok(c, &b3, other, m);
  char id[65];
  tl_sha256_hex(bytes, n, id);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM artifacts", NULL), 2);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM artifacts WHERE id = ?1", id), 1);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM builds WHERE artifact_id = ?1", id), 2);
  assert_int_equal(raw_int(f->path, "SELECT sum(length(bytes)) FROM artifacts", NULL),
                   (int64_t)(n + m));

  /* Idempotent: the same key again changes nothing but the fields. */
  tl_cache_build *got = NULL;
  tl_error err;
  assert_int_equal(tl_cache_get_build(c, k1, &got, &err), TL_OK);
  int64_t created = got->created_ms;
  tl_cache_build_free(got);
  sleep_ms(3);
  b1.metadata = "{\"entry\":\"again\"}";
  put_ok(c, &b1, bytes, n);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM builds", NULL), 3);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM artifacts", NULL), 2);
  assert_int_equal(tl_cache_get_build(c, k1, &got, &err), TL_OK);
  assert_int_equal(got->created_ms, created);
  assert_string_equal(got->metadata, "{\"entry\":\"again\"}");
  tl_cache_build_free(got);

  /* A key that moves to other bytes releases its old artifact when unused. */
  put_ok(c, &b3, bytes, n); /* k3: other -> bytes; `other` is now unused */
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM artifacts", NULL), 1);

  /* Removing one user keeps the artifact; removing the last deletes it. */
  assert_int_equal(tl_cache_remove(c, k1, &err), TL_OK);
  assert_int_equal(tl_cache_remove(c, k1, &err), TL_NOT_FOUND);
  assert_int_equal(tl_cache_remove(c, k3, &err), TL_OK);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM artifacts", NULL), 1);
  assert_int_equal(tl_cache_remove(c, k2, &err), TL_OK);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM artifacts", NULL), 0);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM builds", NULL), 0);
  tl_cache_stats st;
  assert_int_equal(tl_cache_get_stats(c, &st, &err), TL_OK);
  assert_int_equal(st.bytes, 0);
  assert_int_equal(st.artifacts, 0);
  assert_int_equal(st.builds, 0);
  tl_cache_close(c);
  free(bytes);
  free(other);
}

static void test_miss_and_bad_input(void **state) {
  fixture *f = *state;
  tl_cache_options o = {.max_artifact_bytes = 1000};
  tl_cache *c = open_cache(f->path, &o);
  tl_error err;
  char key[65];
  key_for(key, "never stored");
  tl_cache_build *got = (tl_cache_build *)&err; /* must be reset to NULL */
  assert_int_equal(tl_cache_get_build(c, key, &got, &err), TL_NOT_FOUND);
  assert_null(got);
  assert_int_equal(err.code, TL_NOT_FOUND);
  void *data = &err;
  size_t len = 7;
  assert_int_equal(tl_cache_get_artifact(c, key, &data, &len, &err), TL_NOT_FOUND);
  assert_null(data);
  assert_int_equal(len, 0);
  assert_int_equal(tl_cache_get(c, key, &got, &data, &len, &err), TL_NOT_FOUND);

  /* Malformed keys and ids, as they might arrive from the network. */
  char upper[65];
  snprintf(upper, sizeof upper, "%s", key);
  upper[0] = 'A';
  char longer[80];
  snprintf(longer, sizeof longer, "%s0", key);
  const char *bad[] = {upper, longer, "", "abc", "../../etc/passwd", NULL};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(tl_cache_get_build(c, bad[i], &got, &err), TL_INVALID_ARG);
    assert_int_equal(tl_cache_get_artifact(c, bad[i], &data, &len, &err), TL_INVALID_ARG);
    assert_int_equal(tl_cache_get(c, bad[i], &got, &data, &len, &err), TL_INVALID_ARG);
    assert_int_equal(tl_cache_remove(c, bad[i], &err), TL_INVALID_ARG);
  }
  unsigned char bytes[1001];
  memset(bytes, 7, sizeof bytes);
  tl_cache_build b = build_of(upper, "sm_90a");
  assert_int_equal(tl_cache_put(c, &b, bytes, 10, &err), TL_INVALID_ARG);
  b = build_of(key, "sm_90a");
  assert_int_equal(tl_cache_put(c, &b, bytes, 1001, &err), TL_TOO_LARGE); /* option limit */
  assert_int_equal(tl_cache_put(c, &b, bytes, 0, &err), TL_INVALID_ARG);
  assert_int_equal(tl_cache_put(c, &b, NULL, 10, &err), TL_INVALID_ARG);
  assert_int_equal(tl_cache_put(c, NULL, bytes, 10, &err), TL_INVALID_ARG);
  snprintf(b.artifact_id, sizeof b.artifact_id, "%s", key); /* not the hash of bytes */
  assert_int_equal(tl_cache_put(c, &b, bytes, 10, &err), TL_INVALID_ARG);
  b = build_of(key, "");
  assert_int_equal(tl_cache_put(c, &b, bytes, 10, &err), TL_INVALID_ARG);
  b = build_of(key, "sm_90a");
  b.manifest = NULL;
  assert_int_equal(tl_cache_put(c, &b, bytes, 10, &err), TL_INVALID_ARG);
  b = build_of(key, "sm_90a");
  b.compile_ms = -1;
  assert_int_equal(tl_cache_put(c, &b, bytes, 10, &err), TL_INVALID_ARG);
  char *big = malloc(TL_CACHE_TEXT_MAX + 2);
  memset(big, 'x', TL_CACHE_TEXT_MAX + 1);
  big[TL_CACHE_TEXT_MAX + 1] = 0;
  b = build_of(key, "sm_90a");
  b.metadata = big;
  assert_int_equal(tl_cache_put(c, &b, bytes, 10, &err), TL_TOO_LARGE);
  big[TL_CACHE_TEXT_MAX] = 0; /* exactly the limit: accepted */
  put_ok(c, &b, bytes, 10);
  free(big);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM builds", NULL), 1);

  tl_cache_stats st;
  assert_int_equal(tl_cache_get_stats(c, &st, &err), TL_OK);
  assert_int_equal(st.misses, 3); /* malformed input is not a lookup */
  assert_int_equal(st.hits, 0);
  tl_cache_close(c);
}

static void test_open_errors(void **state) {
  fixture *f = *state;
  tl_cache *c = (tl_cache *)f;
  tl_error err;
  assert_int_equal(tl_cache_open(NULL, NULL, &c, &err), TL_INVALID_ARG);
  assert_null(c);
  assert_int_equal(tl_cache_open("", NULL, &c, &err), TL_INVALID_ARG);
  tl_cache_options o = {.busy_timeout_ms = -1};
  assert_int_equal(tl_cache_open(f->path, &o, &c, &err), TL_INVALID_ARG);
  o = (tl_cache_options){.sync = (tl_cache_sync)7};
  assert_int_equal(tl_cache_open(f->path, &o, &c, &err), TL_INVALID_ARG);

  /* A directory in the path is a file. */
  char p[200];
  snprintf(p, sizeof p, "%s/afile", f->dir);
  FILE *fp = fopen(p, "w");
  fputs("x", fp);
  fclose(fp);
  snprintf(p, sizeof p, "%s/afile/cache.db", f->dir);
  assert_int_equal(tl_cache_open(p, NULL, &c, &err), TL_IO);
  assert_null(c);

  /* A file that is not a database. */
  snprintf(p, sizeof p, "%s/notadb", f->dir);
  fp = fopen(p, "w");
  for (int i = 0; i < 200; i++)
    fputs("this is not an SQLite database. ", fp);
  fclose(fp);
  assert_int_equal(tl_cache_open(p, NULL, &c, &err), TL_CORRUPT);
  assert_null(c);

  /* A schema from the future. */
  c = open_cache(f->path, NULL);
  tl_cache_close(c);
  raw_exec(f->path, "PRAGMA user_version = 99");
  assert_int_equal(tl_cache_open(f->path, NULL, &c, &err), TL_UNSUPPORTED);
  assert_null(c);
  raw_exec(f->path, "PRAGMA user_version = 2");

  /* FULL synchronous mode opens and works too. */
  o = (tl_cache_options){.sync = TL_CACHE_SYNC_FULL};
  c = open_cache(f->path, &o);
  char mode[16];
  raw_text(f->path, "PRAGMA journal_mode", mode, sizeof mode);
  assert_string_equal(mode, "wal");
  tl_cache_close(c);
}

/* ---- integrity ------------------------------------------------------------------ */

static void test_corruption(void **state) {
  fixture *f = *state;
  tl_cache *c = open_cache(f->path, NULL);
  char k1[65], k2[65], k3[65];
  key_for(k1, "corrupt 1");
  key_for(k2, "corrupt 2");
  key_for(k3, "intact");
  size_t n, m;
  unsigned char *bytes = content_for(&n, 3000, "to be damaged");
  unsigned char *other = content_for(&m, 3000, "stays intact");
  tl_cache_build b1 = build_of(k1, "sm_90a"), b2 = build_of(k2, "sm_80");
  tl_cache_build b3 = build_of(k3, "sm_90a");
  put_ok(c, &b1, bytes, n);
  put_ok(c, &b2, bytes, n); /* shares the artifact */
  put_ok(c, &b3, other, m);
  char id[65], id3[65];
  tl_sha256_hex(bytes, n, id);
  tl_sha256_hex(other, m, id3);

  raw_corrupt(f->path, id);

  /* The build row alone still looks fine; the bytes do not. */
  tl_error err;
  void *data = NULL;
  size_t len = 0;
  assert_int_equal(tl_cache_get_artifact(c, id, &data, &len, &err), TL_NOT_FOUND);
  assert_null(data);
  assert_non_null(strstr(err.message, "integrity"));
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM artifacts WHERE id = ?1", id), 0);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM builds WHERE artifact_id = ?1", id), 0);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM builds", NULL), 1);
  tl_cache_build *got = NULL;
  assert_int_equal(tl_cache_get_build(c, k1, &got, &err), TL_NOT_FOUND);
  assert_int_equal(tl_cache_get_build(c, k2, &got, &err), TL_NOT_FOUND);
  assert_int_equal(tl_cache_get(c, k3, &got, &data, &len, &err), TL_OK); /* others unharmed */
  assert_memory_equal(data, other, m);
  free(data);
  tl_cache_build_free(got);

  tl_cache_stats st;
  assert_int_equal(tl_cache_get_stats(c, &st, &err), TL_OK);
  assert_int_equal(st.integrity_failures, 1);
  assert_int_equal(st.bytes, (int64_t)m);
  /* Persisted: another handle (another process) sees the same count. */
  tl_cache *c2 = open_cache(f->path, NULL);
  assert_int_equal(tl_cache_get_stats(c2, &st, &err), TL_OK);
  assert_int_equal(st.integrity_failures, 1);
  tl_cache_close(c2);
  assert_int_equal(
      raw_int(f->path, "SELECT value FROM stats WHERE name = 'integrity_failures'", NULL), 1);

  /* A recompile puts it again: healed. */
  put_ok(c, &b1, bytes, n);
  assert_int_equal(tl_cache_get(c, k1, &got, &data, &len, &err), TL_OK);
  assert_int_equal(len, n);
  assert_memory_equal(data, bytes, n);
  free(data);
  tl_cache_build_free(got);

  /* Damaged, then put again before anyone read it: the put rewrites it. */
  raw_corrupt(f->path, id);
  put_ok(c, &b2, bytes, n);
  assert_int_equal(tl_cache_get_artifact(c, id, &data, &len, &err), TL_OK);
  assert_memory_equal(data, bytes, n);
  free(data);

  /* Damaged and found through tl_cache_get. */
  raw_corrupt(f->path, id);
  assert_int_equal(tl_cache_get(c, k1, &got, &data, &len, &err), TL_NOT_FOUND);
  assert_null(got);
  assert_null(data);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM builds WHERE artifact_id = ?1", id), 0);

  /* tl_cache_verify finds damage nobody has read yet. */
  raw_corrupt(f->path, id3);
  tl_cache_verify_result vr;
  assert_int_equal(tl_cache_verify(c, &vr, &err), TL_OK);
  assert_int_equal(vr.artifacts_checked, 1);
  assert_int_equal(vr.corrupt_artifacts, 1);
  assert_int_equal(vr.bytes_checked, (int64_t)m);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM artifacts", NULL), 0);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM builds", NULL), 0);
  assert_int_equal(tl_cache_get_stats(c, &st, &err), TL_OK);
  assert_int_equal(st.integrity_failures, 3);
  assert_int_equal(st.bytes, 0);

  /* ... and what a connection without foreign keys left behind. */
  put_ok(c, &b1, bytes, n);
  put_ok(c, &b3, other, m);
  raw_exec(f->path, "PRAGMA foreign_keys = OFF; DELETE FROM artifacts WHERE id = ("
                    "SELECT artifact_id FROM builds WHERE target = 'sm_90a' LIMIT 1)");
  raw_exec(f->path, "INSERT INTO artifacts(id, size, created, bytes) VALUES ('"
                    "00000000000000000000000000000000000000000000000000000000000000aa"
                    "', 1, 0, x'01')");
  assert_int_equal(tl_cache_verify(c, &vr, &err), TL_OK);
  assert_int_equal(vr.corrupt_artifacts, 1); /* the made-up row does not hash to its id */
  assert_true(vr.dangling_builds >= 1);
  char ok[64];
  raw_text(f->path, "PRAGMA integrity_check", ok, sizeof ok);
  assert_string_equal(ok, "ok");
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM builds b WHERE NOT EXISTS "
                                    "(SELECT 1 FROM artifacts a WHERE a.id = b.artifact_id)",
                           NULL),
                   0);
  tl_cache_close(c);
  free(bytes);
  free(other);
}

/* ---- eviction and access times ----------------------------------------------- */

static void test_eviction_lru(void **state) {
  fixture *f = *state;
  enum { N = 10, SIZE = 1000 };
  tl_cache_options o = {.max_bytes = 5 * SIZE, .access_flush_ms = 60000};
  tl_cache *c = open_cache(f->path, &o);
  char keys[N][65];
  unsigned char bytes[N][SIZE];
  for (int i = 0; i < N; i++) {
    key_for(keys[i], "evict %d", i);
    memset(bytes[i], i + 1, SIZE);
    bytes[i][0] = (unsigned char)i;
    tl_cache_build b = build_of(keys[i], "sm_90a");
    put_ok(c, &b, bytes[i], SIZE);
    sleep_ms(2); /* distinct put times */
  }
  int64_t put_time0 = raw_int(f->path, "SELECT last_access FROM builds WHERE key = ?1", keys[0]);

  /* Use the three oldest. */
  tl_error err;
  for (int i = 0; i < 3; i++) {
    tl_cache_build *got = NULL;
    void *data = NULL;
    size_t len = 0;
    assert_int_equal(tl_cache_get(c, keys[i], &got, &data, &len, &err), TL_OK);
    free(data);
    tl_cache_build_free(got);
  }
  /* Hits do not write: the stored time is still the put's. */
  assert_int_equal(raw_int(f->path, "SELECT last_access FROM builds WHERE key = ?1", keys[0]),
                   put_time0);

  int64_t evicted = -1;
  assert_int_equal(tl_cache_evict_step(c, 2, &evicted, &err), TL_OK); /* 2 per transaction */
  assert_int_equal(evicted, 5);
  for (int i = 0; i < N; i++) {
    bool kept = i < 3 || i >= 8;
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM builds WHERE key = ?1", keys[i]),
                     kept ? 1 : 0);
  }
  /* The evictor wrote the batched access times first. */
  assert_true(raw_int(f->path, "SELECT last_access FROM builds WHERE key = ?1", keys[0]) >
              put_time0);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM artifacts", NULL), 5);
  tl_cache_stats st;
  assert_int_equal(tl_cache_get_stats(c, &st, &err), TL_OK);
  assert_int_equal(st.bytes, 5 * SIZE);
  assert_int_equal(st.evictions, 5);
  assert_int_equal(st.builds, 5);
  assert_int_equal(st.hits, 3);

  /* Under the cap: nothing more to do. */
  assert_int_equal(tl_cache_evict_step(c, 0, &evicted, &err), TL_OK);
  assert_int_equal(evicted, 0);
  assert_int_equal(tl_cache_evict_step(c, TL_CACHE_EVICT_ROWS_MAX + 1, &evicted, &err),
                   TL_INVALID_ARG);

  /* Reading an artifact by id (as GET /v1/artifacts/{id} does) is a use of
   * its builds too: read 8's bytes, add two more, evict: 9 goes first. */
  sleep_ms(2);
  char id8[65];
  tl_sha256_hex(bytes[8], SIZE, id8);
  void *data = NULL;
  size_t len = 0;
  assert_int_equal(tl_cache_get_artifact(c, id8, &data, &len, &err), TL_OK);
  free(data);
  sleep_ms(2);
  char extra[65];
  key_for(extra, "evict extra");
  unsigned char more[SIZE];
  memset(more, 0xee, SIZE);
  tl_cache_build b = build_of(extra, "sm_90a");
  put_ok(c, &b, more, SIZE);
  assert_int_equal(tl_cache_evict_step(c, 0, &evicted, &err), TL_OK);
  assert_int_equal(evicted, 1);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM builds WHERE key = ?1", keys[9]), 0);
  assert_int_equal(raw_int(f->path, "SELECT count(*) FROM builds WHERE key = ?1", keys[8]), 1);
  tl_cache_close(c);

  /* No cap: evict_step does nothing. */
  c = open_cache(f->path, NULL);
  assert_int_equal(tl_cache_evict_step(c, 0, &evicted, &err), TL_OK);
  assert_int_equal(evicted, 0);
  tl_cache_close(c);
}

typedef struct list_state {
  int calls, stop_after;
  char keys[8][65];
} list_state;

static int list_cb(const tl_cache_build *b, void *user) {
  list_state *ls = user;
  if (ls->calls < 8)
    snprintf(ls->keys[ls->calls], 65, "%s", b->key);
  ls->calls++;
  return ls->stop_after && ls->calls >= ls->stop_after;
}

/* Notes: set, replace, read back after reopening; limits; a version-1
 * database gains the table. */
static void test_notes(void **state) {
  fixture *f = *state;
  tl_error err;
  char *v = NULL;
  tl_cache *c = open_cache(f->path, NULL);
  assert_int_equal(tl_cache_note_get(c, "compiler http://a", &v, &err), TL_NOT_FOUND);
  assert_null(v);
  assert_int_equal(tl_cache_note_set(c, "compiler http://a", "tlc 0.1.0+0123456789abcdef", &err), TL_OK);
  assert_int_equal(tl_cache_note_set(c, "compiler http://b", "other", &err), TL_OK);
  assert_int_equal(tl_cache_note_set(c, "compiler http://a", "tlc 0.1.0+fedcba9876543210", &err), TL_OK);
  assert_int_equal(tl_cache_note_set(c, "", "x", &err), TL_INVALID_ARG);
  char big[TL_CACHE_NOTE_MAX + 2];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  assert_int_equal(tl_cache_note_set(c, "big", big, &err), TL_TOO_LARGE);
  big[TL_CACHE_NOTE_MAX] = 0;
  assert_int_equal(tl_cache_note_set(c, "big", big, &err), TL_OK);
  tl_cache_close(c);
  c = open_cache(f->path, NULL);
  assert_int_equal(tl_cache_note_get(c, "compiler http://a", &v, &err), TL_OK);
  assert_string_equal(v, "tlc 0.1.0+fedcba9876543210");
  free(v);
  assert_int_equal(tl_cache_note_get(c, "big", &v, &err), TL_OK);
  assert_int_equal(strlen(v), TL_CACHE_NOTE_MAX);
  free(v);
  tl_cache_stats stats;
  assert_int_equal(tl_cache_get_stats(c, &stats, &err), TL_OK);
  assert_int_equal(stats.builds, 0); /* notes are not builds */
  /* several notes in one transaction: one commit; all or none */
  const char *names[3] = {"n1", "n2", "compiler http://a"}, *values[3] = {"one", "two", "three"};
  int64_t commits = tl_cache_commits(c);
  assert_int_equal(tl_cache_notes_set(c, 3, names, values, &err), TL_OK);
  assert_int_equal(tl_cache_commits(c), commits + 1);
  assert_int_equal(tl_cache_note_set(c, "n3", "x", &err), TL_OK);
  assert_int_equal(tl_cache_commits(c), commits + 2);
  assert_int_equal(tl_cache_notes_set(c, 0, NULL, NULL, &err), TL_OK); /* nothing: no transaction */
  assert_int_equal(tl_cache_commits(c), commits + 2);
  const char *bad_names[2] = {"n1", ""}, *bad_values[2] = {"changed", "x"};
  assert_int_equal(tl_cache_notes_set(c, 2, bad_names, bad_values, &err), TL_INVALID_ARG);
  const char *big_values[2] = {"changed", big};
  const char *big_names[2] = {"n1", "n2"};
  big[TL_CACHE_NOTE_MAX] = 'x';
  assert_int_equal(tl_cache_notes_set(c, 2, big_names, big_values, &err), TL_TOO_LARGE);
  assert_int_equal(tl_cache_commits(c), commits + 2);
  assert_int_equal(tl_cache_note_get(c, "n1", &v, &err), TL_OK);
  assert_string_equal(v, "one"); /* neither batch wrote its first note */
  free(v);
  assert_int_equal(tl_cache_note_get(c, "compiler http://a", &v, &err), TL_OK);
  assert_string_equal(v, "three");
  free(v);
  assert_int_equal(tl_cache_notes_set(c, -1, names, values, &err), TL_INVALID_ARG);
  assert_int_equal(tl_cache_commits(NULL), 0);
  tl_cache_close(c);
  /* a database of schema version 1 (before notes) is migrated */
  raw_exec(f->path, "DROP TABLE notes; PRAGMA user_version = 1");
  c = open_cache(f->path, NULL);
  assert_int_equal(raw_int(f->path, "PRAGMA user_version", NULL), 2);
  assert_int_equal(tl_cache_note_get(c, "compiler http://a", &v, &err), TL_NOT_FOUND);
  assert_int_equal(tl_cache_note_set(c, "compiler http://a", "again", &err), TL_OK);
  tl_cache_close(c);
}

static void test_list(void **state) {
  fixture *f = *state;
  tl_cache *c = open_cache(f->path, NULL);
  char keys[3][65];
  for (int i = 0; i < 3; i++) {
    key_for(keys[i], "list %d", i);
    tl_cache_build b = build_of(keys[i], "sm_90a");
    unsigned char bytes[64];
    memset(bytes, i, sizeof bytes);
    put_ok(c, &b, bytes, sizeof bytes);
    sleep_ms(2);
  }
  list_state ls = {0};
  tl_error err;
  assert_int_equal(tl_cache_list(c, list_cb, &ls, &err), TL_OK);
  assert_int_equal(ls.calls, 3);
  for (int i = 0; i < 3; i++) /* most recently used first */
    assert_string_equal(ls.keys[i], keys[2 - i]);
  ls = (list_state){.stop_after = 1};
  assert_int_equal(tl_cache_list(c, list_cb, &ls, &err), TL_OK);
  assert_int_equal(ls.calls, 1);
  assert_int_equal(tl_cache_list(c, NULL, NULL, &err), TL_INVALID_ARG);
  tl_cache_close(c);
}

/* ---- several processes ---------------------------------------------------------- */

enum { WRITERS = 4, READERS = 4, OPS = 300, SHARED = 40, ARTS = 50 };

/* What key k of writer w (w == -1: the shared keys) holds.  Every third
 * put of a writer is a shared key, which all writers put with the same
 * bytes; the others are distinct keys whose bytes come from a pool of ARTS
 * contents, so distinct keys share artifacts across writers. */
static bool writer_key(int w, int i, char key[65], unsigned char **bytes, size_t *n) {
  if (i % 3 == 0) {
    int s = (i / 3) % SHARED;
    key_for(key, "mp shared %d", s);
    *bytes = content_for(n, 4000, "mp shared bytes %d", s);
    return true;
  }
  key_for(key, "mp writer %d op %d", w, i);
  *bytes = content_for(n, 4000, "mp pool %d", (w * 7 + i) % ARTS);
  return false;
}

static int run_writer(const char *path, int w) {
  tl_cache *c = NULL;
  tl_error err;
  if (tl_cache_open(path, NULL, &c, &err) != TL_OK) {
    fprintf(stderr, "writer %d: open: %s\n", w, err.message);
    return 1;
  }
  int failures = 0;
  for (int i = 0; i < OPS; i++) {
    char key[65];
    unsigned char *bytes;
    size_t n;
    writer_key(w, i, key, &bytes, &n);
    tl_cache_build b = build_of(key, "sm_90a");
    if (tl_cache_put(c, &b, bytes, n, &err) != TL_OK) {
      fprintf(stderr, "writer %d: put %d: %s: %s\n", w, i, tl_status_name(err.code), err.message);
      failures++;
    }
    free(bytes);
  }
  tl_cache_close(c);
  return failures ? 1 : 0;
}

static int run_reader(const char *path, int r) {
  tl_cache_options o = {.access_flush_ms = r == 0 ? -1 : 5}; /* reader 0 writes every hit */
  tl_cache *c = NULL;
  tl_error err;
  if (tl_cache_open(path, &o, &c, &err) != TL_OK) {
    fprintf(stderr, "reader %d: open: %s\n", r, err.message);
    return 1;
  }
  uint64_t rs = seed ^ (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull;
  int failures = 0, hits = 0;
  for (int k = 0; k < OPS; k++) {
    int w = (int)(rng_next(&rs) % WRITERS), i = (int)(rng_next(&rs) % OPS);
    char key[65];
    unsigned char *want;
    size_t n;
    writer_key(w, i, key, &want, &n);
    tl_cache_build *got = NULL;
    void *data = NULL;
    size_t len = 0;
    tl_status st = tl_cache_get(c, key, &got, &data, &len, &err);
    if (st == TL_OK) {
      hits++;
      if (len != n || memcmp(data, want, n) != 0) {
        fprintf(stderr, "reader %d: wrong bytes for writer %d op %d\n", r, w, i);
        failures++;
      }
    } else if (st != TL_NOT_FOUND) {
      fprintf(stderr, "reader %d: get: %s: %s\n", r, tl_status_name(st), err.message);
      failures++;
    }
    free(data);
    tl_cache_build_free(got);
    free(want);
    if (k % 50 == 0) {
      tl_cache_stats s;
      if (tl_cache_get_stats(c, &s, &err) != TL_OK) {
        fprintf(stderr, "reader %d: stats: %s\n", r, err.message);
        failures++;
      }
    }
  }
  tl_cache_close(c);
  return failures ? 1 : 0;
}

static void test_many_processes(void **state) {
  fixture *f = *state;
  tl_cache_close(open_cache(f->path, NULL)); /* create it; no handle is open across fork */
  pid_t pids[WRITERS + READERS];
  for (int p = 0; p < WRITERS + READERS; p++) {
    pids[p] = fork();
    assert_true(pids[p] >= 0);
    if (pids[p] == 0)
      _exit(p < WRITERS ? run_writer(f->path, p) : run_reader(f->path, p - WRITERS));
  }
  for (int p = 0; p < WRITERS + READERS; p++) {
    int status = 0;
    assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail_msg("%s %d failed (status %d)", p < WRITERS ? "writer" : "reader",
               p < WRITERS ? p : p - WRITERS, status);
  }

  /* Every put returned TL_OK (else a writer failed above): all readable. */
  char ok[64];
  raw_text(f->path, "PRAGMA integrity_check", ok, sizeof ok);
  assert_string_equal(ok, "ok");
  tl_cache *c = open_cache(f->path, NULL);
  tl_error err;
  for (int w = 0; w < WRITERS; w++)
    for (int i = 0; i < OPS; i++) {
      char key[65];
      unsigned char *want;
      size_t n;
      writer_key(w, i, key, &want, &n);
      tl_cache_build *got = NULL;
      void *data = NULL;
      size_t len = 0;
      tl_status st = tl_cache_get(c, key, &got, &data, &len, &err);
      if (st != TL_OK)
        fail_msg("writer %d op %d: %s", w, i, err.message);
      assert_int_equal(len, n);
      assert_memory_equal(data, want, n);
      free(data);
      free(want);
      tl_cache_build_free(got);
    }
  tl_cache_stats st;
  assert_int_equal(tl_cache_get_stats(c, &st, &err), TL_OK);
  assert_int_equal(st.builds, SHARED + WRITERS * (OPS - OPS / 3));
  assert_int_equal(st.artifacts, SHARED + ARTS);
  assert_int_equal(st.integrity_failures, 0);
  assert_int_equal(st.bytes, raw_int(f->path, "SELECT sum(length(bytes)) FROM artifacts", NULL));
  assert_true(st.hits >= WRITERS * OPS); /* ours above, plus the readers' */
  tl_cache_close(c);
}

/* Several processes create the same new file (directories, WAL mode,
 * schema) at the same moment. */
static void test_concurrent_create(void **state) {
  fixture *f = *state;
  enum { P = 4 };
  char path[200];
  snprintf(path, sizeof path, "%s/fresh/deeper/cache.db", f->dir);
  int gate[2];
  assert_int_equal(pipe(gate), 0);
  pid_t pids[P];
  for (int p = 0; p < P; p++) {
    pids[p] = fork();
    assert_true(pids[p] >= 0);
    if (pids[p] == 0) {
      close(gate[1]);
      char x;
      if (read(gate[0], &x, 1) != 0) /* returns 0 when the parent opens the gate */
        _exit(5);
      tl_cache *c = NULL;
      tl_error err;
      if (tl_cache_open(path, NULL, &c, &err) != TL_OK) {
        fprintf(stderr, "creator %d: open: %s\n", p, err.message);
        _exit(1);
      }
      char key[65];
      key_for(key, "creator %d", p);
      tl_cache_build b = build_of(key, "sm_90a");
      int rc = tl_cache_put(c, &b, key, 64, &err) == TL_OK ? 0 : 2;
      tl_cache_close(c);
      _exit(rc);
    }
  }
  close(gate[0]);
  close(gate[1]); /* all start now */
  for (int p = 0; p < P; p++) {
    int status = 0;
    assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  assert_int_equal(raw_int(path, "SELECT count(*) FROM builds", NULL), P);
  assert_int_equal(raw_int(path, "PRAGMA user_version", NULL), 2);
}

/* ---- crash safety ----------------------------------------------------------------- */

enum { ROUNDS = 30, CRASH_MAX_PUTS = 3000 };

static void crash_key(int round, int i, char key[65], unsigned char **bytes, size_t *n) {
  key_for(key, "crash %d %d", round, i);
  if (i % 4 == 0) /* some artifacts are shared, also with earlier rounds */
    *bytes = content_for(n, 3000, "crash shared %d", i % 13);
  else
    *bytes = content_for(n, 3000, "crash %d %d", round, i);
}

/* The child: puts until killed, acknowledging each put that returned TL_OK. */
static void crash_writer(const char *path, int round, int fd) {
  tl_cache *c = NULL;
  if (tl_cache_open(path, NULL, &c, NULL) != TL_OK)
    _exit(2);
  for (int i = 0; i < CRASH_MAX_PUTS; i++) {
    char key[65];
    unsigned char *bytes;
    size_t n;
    crash_key(round, i, key, &bytes, &n);
    tl_cache_build b = build_of(key, "gfx942");
    tl_error err;
    if (tl_cache_put(c, &b, bytes, n, &err) != TL_OK) {
      fprintf(stderr, "crash writer: put: %s\n", err.message);
      _exit(3);
    }
    int32_t rec = i;
    if (write(fd, &rec, sizeof rec) != (ssize_t)sizeof rec)
      _exit(4);
    free(bytes);
  }
  tl_cache_close(c);
  _exit(0);
}

/* Every artifact hashes to its id and every build has its artifact. */
static void check_nothing_half_written(const char *path) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT id, bytes, size FROM artifacts", -1, &s, NULL),
                   SQLITE_OK);
  while (sqlite3_step(s) == SQLITE_ROW) {
    char got[65];
    tl_sha256_hex(sqlite3_column_blob(s, 1), (size_t)sqlite3_column_bytes(s, 1), got);
    assert_string_equal(got, (const char *)sqlite3_column_text(s, 0));
    assert_int_equal(sqlite3_column_int64(s, 2), sqlite3_column_bytes(s, 1));
  }
  sqlite3_finalize(s);
  assert_int_equal(
      sqlite3_prepare_v2(db,
                         "SELECT count(*) FROM builds b WHERE NOT EXISTS "
                         "(SELECT 1 FROM artifacts a WHERE a.id = b.artifact_id)",
                         -1, &s, NULL),
      SQLITE_OK);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int64(s, 0), 0);
  sqlite3_finalize(s);
  sqlite3_close(db);
}

static void test_crash_safety(void **state) {
  fixture *f = *state;
  tl_cache_close(open_cache(f->path, NULL));
  int32_t *acked = calloc((size_t)ROUNDS * CRASH_MAX_PUTS, sizeof *acked);
  int nacked[ROUNDS] = {0}, killed = 0, total = 0;
  uint64_t rs = seed | 1;
  for (int round = 0; round < ROUNDS; round++) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      crash_writer(f->path, round, fds[1]);
    }
    close(fds[1]);
    /* A short random life; longer while nothing got through (slow machine). */
    sleep_ms(2 + (int)(rng_next(&rs) % 25) + (total == 0 ? 10 * round : 0));
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
      killed++;
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail_msg("round %d: the writer failed with status %d", round, status);
    int32_t rec;
    int32_t *mine = acked + (size_t)round * CRASH_MAX_PUTS;
    while (read(fds[0], &rec, sizeof rec) == (ssize_t)sizeof rec) {
      assert_int_equal(rec, nacked[round]); /* in order, none skipped */
      mine[nacked[round]++] = rec;
    }
    close(fds[0]);
    total += nacked[round];

    /* The parent's checks, on the file the writer died on. */
    char ok[64];
    raw_text(f->path, "PRAGMA integrity_check", ok, sizeof ok);
    if (strcmp(ok, "ok") != 0)
      fail_msg("round %d: integrity_check: %s", round, ok);
    check_nothing_half_written(f->path);
    tl_cache *c = open_cache(f->path, NULL);
    for (int r = 0; r <= round; r++)
      for (int j = 0; j < nacked[r]; j++) {
        char key[65];
        unsigned char *want;
        size_t n;
        crash_key(r, acked[(size_t)r * CRASH_MAX_PUTS + j], key, &want, &n);
        tl_cache_build *got = NULL;
        void *data = NULL;
        size_t len = 0;
        tl_error err;
        if (tl_cache_get(c, key, &got, &data, &len, &err) != TL_OK)
          fail_msg("round %d: acknowledged put %d of round %d is lost: %s", round, j, r,
                   err.message);
        assert_int_equal(len, n);
        assert_memory_equal(data, want, n);
        free(data);
        free(want);
        tl_cache_build_free(got);
      }
    tl_cache_stats st;
    tl_error err;
    assert_int_equal(tl_cache_get_stats(c, &st, &err), TL_OK);
    assert_int_equal(st.integrity_failures, 0);
    assert_int_equal(st.bytes,
                     raw_int(f->path, "SELECT coalesce(sum(length(bytes)), 0) FROM artifacts",
                             NULL));
    assert_int_equal(st.builds, raw_int(f->path, "SELECT count(*) FROM builds", NULL));
    tl_cache_close(c);
  }
  print_message("crash test: %d of %d writers killed mid-work, %d acknowledged puts checked\n",
                killed, ROUNDS, total);
  assert_true(total > 0);
  assert_true(killed > ROUNDS / 2); /* else the test did not test crashes */
  free(acked);
}

int main(void) {
  const char *s = getenv("TL_TEST_SEED");
  seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
  if (!seed)
    seed = 1;
  print_message("test_cache: TL_TEST_SEED=%llu\n", (unsigned long long)seed);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256),
      cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shared_artifact, setup, teardown),
      cmocka_unit_test_setup_teardown(test_miss_and_bad_input, setup, teardown),
      cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_corruption, setup, teardown),
      cmocka_unit_test_setup_teardown(test_eviction_lru, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_notes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_many_processes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_concurrent_create, setup, teardown),
      cmocka_unit_test_setup_teardown(test_crash_safety, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
