/*
 * test_bundle.c - the bundle format's reader and writer (cache/tlbundle.h,
 * proto/bundle.md): a round trip through a real file, and the table of bad
 * bundles with the exact error each gets -- truncated at every kind of
 * place, a byte flipped in each part, wrong magic and version, duplicate
 * entries, oversized entries, keys that do not hash, dangling references,
 * two compilers in one bundle.  The bad ones are assembled here byte by
 * byte (assemble()), so each breaks exactly one rule and carries valid
 * checksums otherwise.
 *
 * Names: the format has no file names (every entry is addressed by its
 * SHA-256), so nothing is ever written under a name taken from a bundle and
 * there is no path to traverse; the test of an entry whose record has an
 * extra member ("name": "../../etc/passwd") checks that unknown members are
 * refused rather than ignored.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../cache/tlbundle.h"
#include "../../proto/tl_hash.h"

/* ---- assembling bundles byte by byte ------------------------------------------ */

typedef struct raw {
  int kind;
  char *data;
  size_t n;
  int flip_reserved; /* a non-zero reserved byte */
  int64_t claim;     /* >= 0: the length its header claims instead of n */
} raw;

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++, v >>= 8)
    p[i] = (unsigned char)(v & 0xff);
}

/* A bundle of the entries, with correct checksums; *n its size.  version
 * and magic can be changed. */
static unsigned char *assemble(const raw *e, int ne, const char *magic, uint32_t version, size_t *n) {
  size_t size = TL_BUNDLE_HEADER_BYTES + TL_BUNDLE_TRAILER_BYTES;
  for (int i = 0; i < ne; i++)
    size += TL_BUNDLE_ENTRY_HEADER_BYTES + e[i].n;
  unsigned char *b = calloc(1, size);
  assert_non_null(b);
  memcpy(b, magic, 8);
  put_le(b + 8, version, 4);
  put_le(b + 12, (uint64_t)ne, 4);
  put_le(b + 16, size, 8);
  size_t at = TL_BUNDLE_HEADER_BYTES;
  for (int i = 0; i < ne; i++) {
    b[at] = (unsigned char)e[i].kind;
    if (e[i].flip_reserved)
      b[at + 3] = 1;
    put_le(b + at + 8, e[i].claim >= 0 ? (uint64_t)e[i].claim : e[i].n, 8);
    assert_int_equal(tl_sha256(e[i].data, e[i].n, b + at + 16), TL_OK);
    memcpy(b + at + TL_BUNDLE_ENTRY_HEADER_BYTES, e[i].data, e[i].n);
    at += TL_BUNDLE_ENTRY_HEADER_BYTES + e[i].n;
  }
  assert_int_equal(tl_sha256(b, at, b + at), TL_OK);
  *n = size;
  return b;
}

static char *dupn(const char *s) {
  char *d = strdup(s);
  assert_non_null(d);
  return d;
}

static char *hex_of(const char *s, char out[65]) {
  assert_int_equal(tl_sha256_hex(s, strlen(s), out), TL_OK);
  return out;
}

static char *manifest_of(const char *compiler, const char *target) {
  char buf[1024];
  snprintf(buf, sizeof buf,
           "tl-build-key 1\ncompiler %s\ntoolchain NVRTC 13.0 (libnvrtc.so.13)\ntarget %s\noptions {}\nconstants "
           "{\"N\":64}\nprogram {\"name\":\"add_one\",\"tlir\":1}\n",
           compiler, target);
  return dupn(buf);
}

static char *request_of(const char *compiler, const char *target) {
  char buf[1024];
  snprintf(buf, sizeof buf,
           "tl-client-request 1\ncompiler %s\ntarget %s\noptions {}\nconstants {}\nprogram "
           "{\"name\":\"add_one\",\"tlir\":1}\n",
           compiler, target);
  return dupn(buf);
}

static const char META[] = "{\"entry\":\"add_one\",\"params\":[]}";
static const char BIN[] = "\x7f" "ELF pretend cubin bytes";
static const char COMPILER[] = "tlc 0.1.0+0123456789abcdef";

/* A build record for manifest over the artifact id art. */
static raw build_rec(const char *manifest, const char *art, const char *key_override) {
  char key[65];
  hex_of(manifest, key);
  json_t *rec = json_pack("{s:s, s:s, s:s, s:s, s:i}", "key", key_override ? key_override : key, "artifact", art,
                          "manifest", manifest, "metadata", META, "compile_ms", 12);
  char *t = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(rec);
  return (raw){TL_BUNDLE_BUILD, t, strlen(t), 0, -1};
}

static raw request_rec(const char *text, const char *build) {
  char key[65];
  hex_of(text, key);
  json_t *rec = json_pack("{s:s, s:s, s:s}", "key", key, "build", build, "request", text);
  char *t = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(rec);
  return (raw){TL_BUNDLE_REQUEST, t, strlen(t), 0, -1};
}

static raw artifact_rec(const char *bytes) { return (raw){TL_BUNDLE_ARTIFACT, dupn(bytes), strlen(bytes), 0, -1}; }

/* The three entries of a sound bundle: artifact, build, request. */
static int sound(raw *e, char build_key[65]) {
  char art[65], *m = manifest_of(COMPILER, "sm_80"), *r = request_of(COMPILER, "sm_80");
  hex_of(BIN, art);
  hex_of(m, build_key);
  e[0] = artifact_rec(BIN);
  e[1] = build_rec(m, art, NULL);
  e[2] = request_rec(r, build_key);
  free(m);
  free(r);
  return 3;
}

static void free_raw(raw *e, int n) {
  for (int i = 0; i < n; i++)
    free(e[i].data);
}

/* Parses b[0..n) and checks the status and that the message holds want. */
static void expect(const unsigned char *b, size_t n, tl_status code, const char *want) {
  tl_bundle *out = NULL;
  tl_error err;
  tl_status st = tl_bundle_parse(b, n, "b.tlb", &out, &err);
  if (st != code || (want && !strstr(err.message, want)))
    fail_msg("expected %s '%s', got %s '%s'", tl_status_name(code), want ? want : "", tl_status_name(st),
             st == TL_OK ? "" : err.message);
  if (code == TL_OK)
    assert_non_null(out);
  else
    assert_null(out);
  tl_bundle_free(out);
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_sound(void **state) {
  (void)state;
  raw e[3];
  char bk[65];
  int ne = sound(e, bk);
  size_t n;
  unsigned char *b = assemble(e, ne, TL_BUNDLE_MAGIC, 1, &n);
  tl_bundle *out = NULL;
  tl_error err;
  assert_int_equal(tl_bundle_parse(b, n, "b.tlb", &out, &err), TL_OK);
  assert_int_equal(out->nartifacts, 1);
  assert_int_equal(out->nbuilds, 1);
  assert_int_equal(out->nrequests, 1);
  assert_string_equal(out->compiler, COMPILER);
  assert_string_equal(out->builds[0].target, "sm_80");
  assert_string_equal(out->builds[0].key, bk);
  assert_int_equal(tl_bundle_find_build(out, bk), 0);
  assert_int_equal(tl_bundle_find_request(out, out->requests[0].key), 0);
  assert_int_equal(tl_bundle_find_request(out, bk), -1);
  assert_memory_equal(out->artifacts[0].bytes, BIN, strlen(BIN));
  tl_bundle_free(out);
  /* every order of the entries is accepted */
  raw rev[3] = {e[2], e[1], e[0]};
  free(b);
  b = assemble(rev, 3, TL_BUNDLE_MAGIC, 1, &n);
  expect(b, n, TL_OK, NULL);
  free(b);
  free_raw(e, ne);
}

static void test_writer_round_trip(void **state) {
  (void)state;
  char dir[] = "/tmp/test_bundle_XXXXXX", path[256];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/b.tlb", dir);
  tl_bundle_writer *w = NULL;
  tl_error err;
  assert_int_equal(tl_bundle_writer_new(&w, &err), TL_OK);
  char *m80 = manifest_of(COMPILER, "sm_80"), *m90 = manifest_of(COMPILER, "sm_90"), k80[65], k90[65];
  hex_of(m80, k80);
  hex_of(m90, k90);
  /* two builds of one binary: stored once */
  assert_int_equal(tl_bundle_writer_add_build(w, k80, m80, META, 5, BIN, strlen(BIN), &err), TL_OK);
  assert_int_equal(tl_bundle_writer_add_build(w, k90, m90, META, 6, BIN, strlen(BIN), &err), TL_OK);
  assert_int_equal(tl_bundle_writer_add_build(w, k80, m80, META, 5, BIN, strlen(BIN), &err), TL_OK); /* again: kept once */
  assert_int_equal(tl_bundle_writer_add_build(w, k80, m80, META, 5, "other", 5, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "added twice with other bytes"));
  char *r80 = request_of(COMPILER, "sm_80"), *r90 = request_of(COMPILER, "sm_90");
  assert_int_equal(tl_bundle_writer_add_request(w, r80, k80, &err), TL_OK);
  assert_int_equal(tl_bundle_writer_add_request(w, r80, k80, &err), TL_OK);
  assert_int_equal(tl_bundle_writer_add_request(w, r90, k80, &err), TL_INVALID_ARG); /* sm_90 asks, sm_80 named */
  assert_non_null(strstr(err.message, "asks for sm_90"));
  assert_int_equal(tl_bundle_writer_add_request(w, r90, k90, &err), TL_OK);
  /* a key that is not its manifest's hash, another compiler */
  assert_int_equal(tl_bundle_writer_add_build(w, k90, m80, META, 5, BIN, strlen(BIN), &err), TL_INVALID_ARG);
  char *other = manifest_of("tlc 0.1.0+fedcba9876543210", "sm_80"), ko[65];
  hex_of(other, ko);
  assert_int_equal(tl_bundle_writer_add_build(w, ko, other, META, 5, BIN, strlen(BIN), &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "one compiler's builds"));
  int na, nb, nr;
  tl_bundle_writer_counts(w, &na, &nb, &nr);
  assert_int_equal(na, 1);
  assert_int_equal(nb, 2);
  assert_int_equal(nr, 2);
  assert_int_equal(tl_bundle_writer_write(w, path, &err), TL_OK);
  tl_bundle_writer_free(w);
  tl_bundle *b = NULL;
  assert_int_equal(tl_bundle_open(path, &b, &err), TL_OK);
  assert_int_equal(b->nartifacts, 1);
  assert_int_equal(b->nbuilds, 2);
  assert_int_equal(b->nrequests, 2);
  int i = tl_bundle_find_build(b, k90);
  assert_true(i >= 0);
  assert_int_equal(b->builds[i].compile_ms, 6);
  assert_string_equal(b->builds[i].metadata, META);
  assert_string_equal(b->builds[i].manifest, m90);
  char rk[65];
  int r = tl_bundle_find_request(b, hex_of(r90, rk));
  assert_true(r >= 0);
  assert_string_equal(b->requests[r].build, k90);
  assert_string_equal(b->requests[r].text, r90);
  tl_bundle_close(b);
  /* files that are not bundles */
  assert_int_equal(tl_bundle_open(dir, &b, &err), TL_IO);
  char missing[300];
  snprintf(missing, sizeof missing, "%s/none.tlb", dir);
  assert_int_equal(tl_bundle_open(missing, &b, &err), TL_IO);
  assert_non_null(strstr(err.message, "cannot open the bundle"));
  unlink(path);
  rmdir(dir);
  free(m80);
  free(m90);
  free(r80);
  free(r90);
  free(other);
}

/* The table of bad bundles. */
static void test_bad_bundles(void **state) {
  (void)state;
  raw e[8];
  char bk[65];
  int ne = sound(e, bk);
  size_t n;
  unsigned char *good = assemble(e, ne, TL_BUNDLE_MAGIC, 1, &n);
  unsigned char *b = malloc(n + 64);
  assert_non_null(b);

  /* not a bundle, wrong version */
  expect((const unsigned char *)"{\"tlir\": 1}", 11, TL_INVALID_ARG, "b.tlb: not a bundle (it does not start with \"TLBUNDLE\")");
  expect((const unsigned char *)"", 0, TL_INVALID_ARG, "not a bundle");
  unsigned char *v2 = assemble(e, ne, TL_BUNDLE_MAGIC, 2, &n);
  expect(v2, n, TL_UNSUPPORTED, "b.tlb: format version 2; this build reads version 1");
  free(v2);
  unsigned char *mg = assemble(e, ne, "TLBUNDLX", 1, &n);
  expect(mg, n, TL_INVALID_ARG, "not a bundle");
  free(mg);

  /* truncated: in the header, in an entry, before the trailer; bytes appended */
  expect(good, 20, TL_CORRUPT, "b.tlb: truncated: 20 bytes, less than a bundle's header and trailer (56)");
  expect(good, 100, TL_CORRUPT, "truncated: 100 bytes, its header says");
  expect(good, n - 1, TL_CORRUPT, "truncated");
  memcpy(b, good, n);
  memset(b + n, 0, 8);
  expect(b, n + 8, TL_CORRUPT, "bytes after its end");

  /* a byte flipped: in an artifact, in a build record, in an entry's hash, in the trailer */
  size_t art_at = TL_BUNDLE_HEADER_BYTES + TL_BUNDLE_ENTRY_HEADER_BYTES;
  memcpy(b, good, n);
  b[art_at + 3] ^= 0x01;
  expect(b, n, TL_CORRUPT, "b.tlb: entry 0 (artifact) at byte 24: its bytes do not match its SHA-256 (damaged)");
  memcpy(b, good, n);
  b[art_at + e[0].n + TL_BUNDLE_ENTRY_HEADER_BYTES + 10] ^= 0x20;
  expect(b, n, TL_CORRUPT, "entry 1 (build)");
  memcpy(b, good, n);
  b[TL_BUNDLE_HEADER_BYTES + 20] ^= 0x80;
  expect(b, n, TL_CORRUPT, "entry 0 (artifact) at byte 24: its bytes do not match");
  memcpy(b, good, n);
  b[n - 5] ^= 0x01;
  expect(b, n, TL_CORRUPT, "b.tlb: the trailer's SHA-256 does not match the file (damaged)");
  memcpy(b, good, n);
  b[12] = 2; /* the count of entries */
  expect(b, n, TL_CORRUPT, "bytes between the last entry and the trailer");
  memcpy(b, good, n);
  b[TL_BUNDLE_HEADER_BYTES] = 'Z'; /* the kind */
  expect(b, n, TL_CORRUPT, "entry 0 at byte 24: unknown kind 0x5a");
  free(b);
  free(good);

  unsigned char *x;
  /* reserved bytes */
  e[0].flip_reserved = 1;
  x = assemble(e, ne, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_CORRUPT, "entry 0 at byte 24: reserved header bytes are not zero");
  free(x);
  e[0].flip_reserved = 0;

  /* oversized entries: a binary over 256 MiB, a record over 8 MiB (claimed
   * lengths: refused before anything is read) */
  e[0].claim = (int64_t)TL_BUNDLE_ARTIFACT_MAX + 1;
  x = assemble(e, ne, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_TOO_LARGE, "b.tlb: entry 0 (artifact) is 268435457 bytes; the limit is 268435456");
  free(x);
  e[0].claim = -1;
  e[1].claim = (int64_t)TL_BUNDLE_RECORD_MAX + 1;
  x = assemble(e, ne, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_TOO_LARGE, "entry 1 (build) is 8388609 bytes; the limit is 8388608");
  free(x);
  e[1].claim = 1000; /* within the limit, past the end */
  x = assemble(e, ne, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_CORRUPT, "entry 1 (build) of 1000 bytes runs past the end (truncated?)");
  free(x);
  e[1].claim = -1;

  /* duplicate entries */
  raw dup[4] = {e[0], e[1], e[2], e[1]};
  x = assemble(dup, 4, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_INVALID_ARG, "b.tlb: entry 3: duplicate build");
  free(x);
  raw dupa[4] = {e[0], e[0], e[1], e[2]};
  x = assemble(dupa, 4, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_INVALID_ARG, "entry 1: duplicate artifact");
  free(x);
  raw dupr[4] = {e[0], e[1], e[2], e[2]};
  x = assemble(dupr, 4, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_INVALID_ARG, "entry 3: duplicate request");
  free(x);

  /* dangling references, unused artifacts */
  raw nobuild[2] = {e[0], e[2]};
  x = assemble(nobuild, 2, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_INVALID_ARG, "names the build");
  free(x);
  raw noart[2] = {e[1], e[2]};
  x = assemble(noart, 2, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_INVALID_ARG, "which the bundle lacks");
  free(x);
  raw extra[4] = {e[0], e[1], e[2], artifact_rec("unused bytes")};
  x = assemble(extra, 4, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_INVALID_ARG, "is used by no build");
  free(x);
  free(extra[3].data);

  /* keys that do not hash to their text; records that are not what they say */
  char art[65], *m = manifest_of(COMPILER, "sm_80");
  hex_of(BIN, art);
  raw wrongkey[3] = {e[0], build_rec(m, art, "1111111111111111111111111111111111111111111111111111111111111111"), e[2]};
  x = assemble(wrongkey, 3, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_CORRUPT, "entry 1 (build): the key 1111111111111111111111111111111111111111111111111111111111111111 "
                           "is not the SHA-256 of its manifest");
  free(x);
  free(wrongkey[1].data);
  raw notjson[3] = {e[0], {TL_BUNDLE_BUILD, dupn("{\"key\": "), 8, 0, -1}, e[2]};
  x = assemble(notjson, 3, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_CORRUPT, "entry 1 (build): the record is not a JSON object");
  free(x);
  free(notjson[1].data);
  json_t *rec = json_loadb(e[1].data, e[1].n, 0, NULL);
  json_object_set_new(rec, "name", json_string("../../etc/passwd"));
  char *t = json_dumps(rec, JSON_COMPACT);
  json_decref(rec);
  raw named[3] = {e[0], {TL_BUNDLE_BUILD, t, strlen(t), 0, -1}, e[2]};
  x = assemble(named, 3, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_CORRUPT, "entry 1 (build): unknown member \"name\"");
  free(x);
  free(t);

  /* a request for another target than its build's; two compilers */
  char *r90 = request_of(COMPILER, "sm_90");
  raw mism[3] = {e[0], e[1], request_rec(r90, bk)};
  x = assemble(mism, 3, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_INVALID_ARG, "asks for sm_90 by tlc 0.1.0+0123456789abcdef, but names the build");
  free(x);
  free(mism[2].data);
  char *mo = manifest_of("tlc 0.1.0+fedcba9876543210", "sm_90");
  raw two[4] = {e[0], e[1], e[2], build_rec(mo, art, NULL)};
  x = assemble(two, 4, TL_BUNDLE_MAGIC, 1, &n);
  expect(x, n, TL_INVALID_ARG, "built by tlc 0.1.0+fedcba9876543210, the bundle's first build by "
                               "tlc 0.1.0+0123456789abcdef (a bundle holds the builds of one compiler)");
  free(x);
  free(two[3].data);
  free(mo);
  free(r90);
  free(m);
  free_raw(e, ne);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sound),
      cmocka_unit_test(test_writer_round_trip),
      cmocka_unit_test(test_bad_bundles),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
