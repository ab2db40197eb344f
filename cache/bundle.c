/*
 * bundle.c - the reader and writer of bundle files (tlbundle.h for the
 * contract, proto/bundle.md for the format).
 *
 * Reading order: small helpers (little-endian numbers, the lines of a
 * manifest or request text, sorted key indexes); the parser, in the order
 * of its checks -- the header, the walk over the entry headers (bounds and
 * limits before any payload is read), each entry's SHA-256, the trailer's,
 * then the records and the references between them; mapping a file; the
 * writer, with a small hash set of the keys it holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tlbundle.h"
#include "../proto/tl_hash.h"

#define BUILD_MAGIC "tl-build-key 1\n"
#define REQUEST_MAGIC "tl-client-request 1\n"
#define LINE_MAX_BYTES 4096 /* a compiler or target line worth keeping */

/* ---- helpers ------------------------------------------------------------------------- */

static uint64_t get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++, v >>= 8)
    p[i] = (unsigned char)(v & 0xff);
}

static const char *kind_name(int kind) {
  return kind == TL_BUNDLE_ARTIFACT ? "artifact" : kind == TL_BUNDLE_BUILD ? "build" : kind == TL_BUNDLE_REQUEST ? "request" : "?";
}

/* The value of the line "FIELD VALUE" of a manifest or request text (after
 * its first line), malloc'd; NULL when there is none. */
static char *line_value(const char *text, const char *field) {
  size_t fl = strlen(field);
  for (const char *p = strchr(text, '\n'); p; p = strchr(p + 1, '\n')) {
    if (strncmp(p + 1, field, fl) == 0 && p[1 + fl] == ' ') {
      const char *v = p + 2 + fl;
      size_t n = strcspn(v, "\n");
      if (n > LINE_MAX_BYTES)
        return NULL;
      char *out = malloc(n + 1);
      if (out) {
        memcpy(out, v, n);
        out[n] = 0;
      }
      return out;
    }
  }
  return NULL;
}

/* A key and the index of what it names, sorted for bsearch. */
typedef struct keyed {
  char key[65];
  int index;  /* into the bundle's array */
  int entry;  /* the entry's position in the file, for messages */
} keyed;

static int cmp_keyed(const void *a, const void *b) { return strcmp(((const keyed *)a)->key, ((const keyed *)b)->key); }

static int find_keyed(const keyed *arr, int n, const char *key) {
  if (!key || n <= 0)
    return -1;
  keyed k;
  snprintf(k.key, sizeof k.key, "%s", key);
  const keyed *hit = bsearch(&k, arr, (size_t)n, sizeof *arr, cmp_keyed);
  return hit ? hit->index : -1;
}

/* ---- the parsed bundle ----------------------------------------------------------------- */

typedef struct impl {
  json_t **docs;       /* one per record entry: the strings point into them */
  int ndocs;
  char **strs;         /* targets and the compiler, malloc'd */
  int nstrs, capstrs;
  keyed *art_sorted, *build_sorted, *req_sorted;
  void *map;           /* tl_bundle_open: the mapping */
  size_t map_len;
} impl;

void tl_bundle_free(tl_bundle *b) {
  if (!b)
    return;
  impl *m = b->impl_;
  if (m) {
    for (int i = 0; i < m->ndocs; i++)
      json_decref(m->docs[i]);
    free(m->docs);
    for (int i = 0; i < m->nstrs; i++)
      free(m->strs[i]);
    free(m->strs);
    free(m->art_sorted);
    free(m->build_sorted);
    free(m->req_sorted);
    free(m);
  }
  free(b->artifacts);
  free(b->builds);
  free(b->requests);
  free(b);
}

/* Keeps s (malloc'd) until the bundle is freed; false (and frees s) when out of memory. */
static bool keep(impl *m, char *s) {
  if (!s)
    return false;
  if (m->nstrs == m->capstrs) {
    int cap = m->capstrs ? m->capstrs * 2 : 16;
    char **ns = realloc(m->strs, sizeof *ns * (size_t)cap);
    if (!ns) {
      free(s);
      return false;
    }
    m->strs = ns;
    m->capstrs = cap;
  }
  m->strs[m->nstrs++] = s;
  return true;
}

int tl_bundle_find_build(const tl_bundle *b, const char *key) {
  return b ? find_keyed(((impl *)b->impl_)->build_sorted, b->nbuilds, key) : -1;
}

int tl_bundle_find_request(const tl_bundle *b, const char *key) {
  return b ? find_keyed(((impl *)b->impl_)->req_sorted, b->nrequests, key) : -1;
}

/* Sorts arr[0..n) and reports the first duplicate key. */
static tl_status sort_unique(keyed *arr, int n, const char *name, const char *what, tl_error *err) {
  qsort(arr, (size_t)n, sizeof *arr, cmp_keyed);
  for (int i = 1; i < n; i++)
    if (strcmp(arr[i - 1].key, arr[i].key) == 0) {
      int a = arr[i - 1].entry < arr[i].entry ? arr[i - 1].entry : arr[i].entry;
      int b = arr[i - 1].entry < arr[i].entry ? arr[i].entry : arr[i - 1].entry;
      return tl_error_set(err, TL_INVALID_ARG, "%s: entry %d: duplicate %s %s (also entry %d)", name, b, what,
                          arr[i].key, a);
    }
  return TL_OK;
}

/* A JSON record of an entry: an object with exactly the members named. */
static json_t *load_record(const unsigned char *p, size_t n, const char *const *members, int nmembers, const char *name,
                           int entry, const char *kind, tl_error *err) {
  json_error_t je;
  json_t *doc = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES, &je);
  if (!json_is_object(doc)) {
    json_decref(doc);
    tl_error_set(err, TL_CORRUPT, "%s: entry %d (%s): the record is not a JSON object%s%s", name, entry, kind,
                 doc ? "" : ": ", doc ? "" : je.text);
    return NULL;
  }
  const char *k;
  json_t *v;
  json_object_foreach(doc, k, v) {
    bool known = false;
    for (int i = 0; i < nmembers; i++)
      known |= strcmp(k, members[i]) == 0;
    if (!known) {
      tl_error_set(err, TL_CORRUPT, "%s: entry %d (%s): unknown member \"%.100s\"", name, entry, kind, k);
      json_decref(doc);
      return NULL;
    }
  }
  for (int i = 0; i < nmembers; i++)
    if (!json_object_get(doc, members[i])) {
      tl_error_set(err, TL_CORRUPT, "%s: entry %d (%s): no member \"%s\"", name, entry, kind, members[i]);
      json_decref(doc);
      return NULL;
    }
  return doc;
}

static bool is_sha(json_t *v) { return tl_hex_is_sha256(json_string_value(v)); }

/* The hex SHA-256 of s equals key. */
static bool hashes_to(const char *s, const char *key) {
  char got[65];
  return tl_sha256_hex(s, strlen(s), got) == TL_OK && strcmp(got, key) == 0;
}

/* A build record (entry e) into *out. */
static tl_status parse_build(tl_bundle *b, impl *m, json_t *doc, int e, const char *name, tl_bundle_build *out,
                             tl_error *err) {
  const char *manifest = json_string_value(json_object_get(doc, "manifest"));
  const char *metadata = json_string_value(json_object_get(doc, "metadata"));
  json_t *ms = json_object_get(doc, "compile_ms");
  if (!is_sha(json_object_get(doc, "key")) || !is_sha(json_object_get(doc, "artifact")) || !manifest || !metadata ||
      !json_is_integer(ms) || json_integer_value(ms) < 0)
    return tl_error_set(err, TL_CORRUPT,
                        "%s: entry %d (build): key and artifact must be SHA-256 hex strings, manifest and metadata "
                        "strings, compile_ms an integer >= 0",
                        name, e);
  snprintf(out->key, sizeof out->key, "%s", json_string_value(json_object_get(doc, "key")));
  snprintf(out->artifact, sizeof out->artifact, "%s", json_string_value(json_object_get(doc, "artifact")));
  if (strncmp(manifest, BUILD_MAGIC, strlen(BUILD_MAGIC)) != 0)
    return tl_error_set(err, TL_CORRUPT, "%s: entry %d (build %s): the manifest does not start with \"tl-build-key 1\"",
                        name, e, out->key);
  if (!hashes_to(manifest, out->key))
    return tl_error_set(err, TL_CORRUPT, "%s: entry %d (build): the key %s is not the SHA-256 of its manifest", name,
                        e, out->key);
  char *target = line_value(manifest, "target"), *compiler = line_value(manifest, "compiler");
  if (!target || !compiler || !*target || !*compiler) {
    free(target);
    free(compiler);
    return tl_error_set(err, TL_CORRUPT, "%s: entry %d (build %s): the manifest has no target or compiler line", name,
                        e, out->key);
  }
  json_t *meta = json_loads(metadata, JSON_REJECT_DUPLICATES, NULL);
  bool meta_ok = json_is_object(meta);
  json_decref(meta);
  if (!meta_ok) {
    free(target);
    free(compiler);
    return tl_error_set(err, TL_CORRUPT, "%s: entry %d (build %s): its metadata is not a JSON object", name, e,
                        out->key);
  }
  if (!b->compiler) {
    if (!keep(m, compiler)) {
      free(target);
      return tl_error_set(err, TL_NOMEM, "out of memory");
    }
    b->compiler = compiler;
  } else {
    bool same = strcmp(b->compiler, compiler) == 0;
    if (!same) {
      tl_status st = tl_error_set(err, TL_INVALID_ARG,
                                  "%s: entry %d (build %s): built by %s, the bundle's first build by %s (a bundle "
                                  "holds the builds of one compiler)",
                                  name, e, out->key, compiler, b->compiler);
      free(target);
      free(compiler);
      return st;
    }
    free(compiler);
  }
  if (!keep(m, target))
    return tl_error_set(err, TL_NOMEM, "out of memory");
  out->target = target;
  out->manifest = manifest;
  out->metadata = metadata;
  out->compile_ms = (int64_t)json_integer_value(ms);
  return TL_OK;
}

/* A request record (entry e) into *out. */
static tl_status parse_request(json_t *doc, int e, const char *name, tl_bundle_request *out, tl_error *err) {
  const char *text = json_string_value(json_object_get(doc, "request"));
  if (!is_sha(json_object_get(doc, "key")) || !is_sha(json_object_get(doc, "build")) || !text)
    return tl_error_set(err, TL_CORRUPT,
                        "%s: entry %d (request): key and build must be SHA-256 hex strings, request a string", name, e);
  snprintf(out->key, sizeof out->key, "%s", json_string_value(json_object_get(doc, "key")));
  snprintf(out->build, sizeof out->build, "%s", json_string_value(json_object_get(doc, "build")));
  if (strncmp(text, REQUEST_MAGIC, strlen(REQUEST_MAGIC)) != 0)
    return tl_error_set(err, TL_CORRUPT, "%s: entry %d (request %s): the text does not start with \"tl-client-request 1\"",
                        name, e, out->key);
  if (!hashes_to(text, out->key))
    return tl_error_set(err, TL_CORRUPT, "%s: entry %d (request): the key %s is not the SHA-256 of its text", name, e,
                        out->key);
  out->text = text;
  return TL_OK;
}

/* The request's target and compiler lines agree with its build's. */
static tl_status check_request_build(const tl_bundle *b, const tl_bundle_request *r, const char *name,
                                     tl_error *err) {
  const tl_bundle_build *bd = &b->builds[r->build_index];
  char *target = line_value(r->text, "target"), *compiler = line_value(r->text, "compiler");
  tl_status st = TL_OK;
  if (!target || !compiler)
    st = tl_error_set(err, TL_CORRUPT, "%s: request %s: the text has no target or compiler line", name, r->key);
  else if (strcmp(target, bd->target) != 0 || strcmp(compiler, b->compiler) != 0)
    st = tl_error_set(err, TL_INVALID_ARG,
                      "%s: request %s: asks for %s by %s, but names the build %s for %s by %s", name, r->key, target, compiler, r->build, bd->target, b->compiler);
  free(target);
  free(compiler);
  return st;
}

tl_status tl_bundle_parse(const void *data, size_t n, const char *name, tl_bundle **out, tl_error *err) {
  tl_error_clear(err);
  *out = NULL;
  name = name ? name : "bundle";
  const unsigned char *p = data;
  size_t magic_len = strlen(TL_BUNDLE_MAGIC);
  if (n < magic_len || memcmp(p, TL_BUNDLE_MAGIC, magic_len) != 0)
    return tl_error_set(err, TL_INVALID_ARG, "%s: not a bundle (it does not start with \"%s\")", name,
                        TL_BUNDLE_MAGIC);
  if (n < TL_BUNDLE_HEADER_BYTES + TL_BUNDLE_TRAILER_BYTES)
    return tl_error_set(err, TL_CORRUPT, "%s: truncated: %zu bytes, less than a bundle's header and trailer (%d)", name,
                        n, TL_BUNDLE_HEADER_BYTES + TL_BUNDLE_TRAILER_BYTES);
  uint32_t version = (uint32_t)get_le(p + 8, 4), count = (uint32_t)get_le(p + 12, 4);
  uint64_t size = get_le(p + 16, 8);
  if (version != TL_BUNDLE_VERSION)
    return tl_error_set(err, TL_UNSUPPORTED, "%s: format version %u; this build reads version %d", name, version,
                        TL_BUNDLE_VERSION);
  if (size != n)
    return tl_error_set(err, TL_CORRUPT, "%s: %s: %zu bytes, its header says %llu", name,
                        n < size ? "truncated" : "bytes after its end", n, (unsigned long long)size);
  if (count > TL_BUNDLE_ENTRIES_MAX)
    return tl_error_set(err, TL_TOO_LARGE, "%s: %u entries; the limit is %u", name, count, TL_BUNDLE_ENTRIES_MAX);

  /* the walk over the entry headers: bounds and limits first */
  size_t end = n - TL_BUNDLE_TRAILER_BYTES, at = TL_BUNDLE_HEADER_BYTES;
  int counts[3] = {0, 0, 0};
  for (uint32_t e = 0; e < count; e++) {
    if (end - at < TL_BUNDLE_ENTRY_HEADER_BYTES)
      return tl_error_set(err, TL_CORRUPT, "%s: entry %u of %u: its header at byte %zu runs past the end (truncated?)",
                          name, e, count, at);
    int kind = p[at];
    for (int i = 1; i < 8; i++)
      if (p[at + (size_t)i])
        return tl_error_set(err, TL_CORRUPT, "%s: entry %u at byte %zu: reserved header bytes are not zero", name, e,
                            at);
    if (kind != TL_BUNDLE_ARTIFACT && kind != TL_BUNDLE_BUILD && kind != TL_BUNDLE_REQUEST)
      return tl_error_set(err, TL_CORRUPT, "%s: entry %u at byte %zu: unknown kind 0x%02x", name, e, at, kind);
    uint64_t len = get_le(p + at + 8, 8);
    uint64_t limit = kind == TL_BUNDLE_ARTIFACT ? TL_BUNDLE_ARTIFACT_MAX : TL_BUNDLE_RECORD_MAX;
    if (len > limit)
      return tl_error_set(err, TL_TOO_LARGE, "%s: entry %u (%s) is %llu bytes; the limit is %llu", name, e,
                          kind_name(kind), (unsigned long long)len, (unsigned long long)limit);
    if (len == 0)
      return tl_error_set(err, TL_CORRUPT, "%s: entry %u (%s) is empty", name, e, kind_name(kind));
    at += TL_BUNDLE_ENTRY_HEADER_BYTES;
    if (len > end - at)
      return tl_error_set(err, TL_CORRUPT, "%s: entry %u (%s) of %llu bytes runs past the end (truncated?)", name, e,
                          kind_name(kind), (unsigned long long)len);
    at += (size_t)len;
    counts[kind == TL_BUNDLE_ARTIFACT ? 0 : kind == TL_BUNDLE_BUILD ? 1 : 2]++;
  }
  if (at != end)
    return tl_error_set(err, TL_CORRUPT, "%s: %zu bytes between the last entry and the trailer", name, end - at);

  /* every entry's checksum, then the trailer's */
  at = TL_BUNDLE_HEADER_BYTES;
  for (uint32_t e = 0; e < count; e++) {
    uint64_t len = get_le(p + at + 8, 8);
    uint8_t got[TL_SHA256_LEN];
    if (tl_sha256(p + at + TL_BUNDLE_ENTRY_HEADER_BYTES, (size_t)len, got) != TL_OK)
      return tl_error_set(err, TL_NOMEM, "SHA-256 failed");
    if (memcmp(got, p + at + 16, TL_SHA256_LEN) != 0)
      return tl_error_set(err, TL_CORRUPT, "%s: entry %u (%s) at byte %zu: its bytes do not match its SHA-256 (damaged)",
                          name, e, kind_name(p[at]), at);
    at += TL_BUNDLE_ENTRY_HEADER_BYTES + (size_t)len;
  }
  uint8_t sum[TL_SHA256_LEN];
  if (tl_sha256(p, end, sum) != TL_OK)
    return tl_error_set(err, TL_NOMEM, "SHA-256 failed");
  if (memcmp(sum, p + end, TL_SHA256_LEN) != 0)
    return tl_error_set(err, TL_CORRUPT, "%s: the trailer's SHA-256 does not match the file (damaged)", name);

  /* the records */
  tl_bundle *b = calloc(1, sizeof *b);
  impl *m = calloc(1, sizeof *m);
  if (!b || !m) {
    free(b);
    free(m);
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  b->impl_ = m;
  b->version = (int)version;
  b->size = size;
  tl_hex_encode(sum, TL_SHA256_LEN, b->checksum);
  b->artifacts = calloc((size_t)counts[0] + 1, sizeof *b->artifacts);
  b->builds = calloc((size_t)counts[1] + 1, sizeof *b->builds);
  b->requests = calloc((size_t)counts[2] + 1, sizeof *b->requests);
  m->docs = calloc((size_t)(counts[1] + counts[2]) + 1, sizeof *m->docs);
  m->art_sorted = calloc((size_t)counts[0] + 1, sizeof *m->art_sorted);
  m->build_sorted = calloc((size_t)counts[1] + 1, sizeof *m->build_sorted);
  m->req_sorted = calloc((size_t)counts[2] + 1, sizeof *m->req_sorted);
  tl_status st = TL_OK;
  if (!b->artifacts || !b->builds || !b->requests || !m->docs || !m->art_sorted || !m->build_sorted || !m->req_sorted)
    st = tl_error_set(err, TL_NOMEM, "out of memory");
  static const char *const build_members[] = {"key", "artifact", "manifest", "metadata", "compile_ms"};
  static const char *const request_members[] = {"key", "build", "request"};
  at = TL_BUNDLE_HEADER_BYTES;
  for (uint32_t e = 0; e < count && st == TL_OK; e++) {
    int kind = p[at];
    uint64_t len = get_le(p + at + 8, 8);
    const unsigned char *payload = p + at + TL_BUNDLE_ENTRY_HEADER_BYTES;
    if (kind == TL_BUNDLE_ARTIFACT) {
      tl_bundle_artifact *a = &b->artifacts[b->nartifacts];
      tl_hex_encode(p + at + 16, TL_SHA256_LEN, a->id);
      a->bytes = payload;
      a->n = (size_t)len;
      m->art_sorted[b->nartifacts] = (keyed){.index = b->nartifacts, .entry = (int)e};
      memcpy(m->art_sorted[b->nartifacts].key, a->id, 65);
      b->nartifacts++;
    } else {
      bool build = kind == TL_BUNDLE_BUILD;
      json_t *doc = load_record(payload, (size_t)len, build ? build_members : request_members, build ? 5 : 3, name,
                                (int)e, kind_name(kind), err);
      if (!doc) {
        st = err ? err->code : TL_CORRUPT;
        break;
      }
      m->docs[m->ndocs++] = doc;
      if (build) {
        tl_bundle_build *bd = &b->builds[b->nbuilds];
        if ((st = parse_build(b, m, doc, (int)e, name, bd, err)) != TL_OK)
          break;
        m->build_sorted[b->nbuilds] = (keyed){.index = b->nbuilds, .entry = (int)e};
        memcpy(m->build_sorted[b->nbuilds].key, bd->key, 65);
        b->nbuilds++;
      } else {
        tl_bundle_request *r = &b->requests[b->nrequests];
        if ((st = parse_request(doc, (int)e, name, r, err)) != TL_OK)
          break;
        m->req_sorted[b->nrequests] = (keyed){.index = b->nrequests, .entry = (int)e};
        memcpy(m->req_sorted[b->nrequests].key, r->key, 65);
        b->nrequests++;
      }
    }
    at += TL_BUNDLE_ENTRY_HEADER_BYTES + (size_t)len;
  }
  if (st == TL_OK)
    st = sort_unique(m->art_sorted, b->nartifacts, name, "artifact", err);
  if (st == TL_OK)
    st = sort_unique(m->build_sorted, b->nbuilds, name, "build", err);
  if (st == TL_OK)
    st = sort_unique(m->req_sorted, b->nrequests, name, "request", err);
  /* the references: every build's artifact and every request's build are
   * in the bundle, and every artifact is used */
  char *used = st == TL_OK ? calloc((size_t)b->nartifacts + 1, 1) : NULL;
  if (st == TL_OK && !used)
    st = tl_error_set(err, TL_NOMEM, "out of memory");
  for (int i = 0; i < b->nbuilds && st == TL_OK; i++) {
    tl_bundle_build *bd = &b->builds[i];
    bd->artifact_index = find_keyed(m->art_sorted, b->nartifacts, bd->artifact);
    if (bd->artifact_index < 0)
      st = tl_error_set(err, TL_INVALID_ARG, "%s: build %s names the artifact %s, which the bundle lacks", name,
                        bd->key, bd->artifact);
    else
      used[bd->artifact_index] = 1;
  }
  for (int i = 0; i < b->nrequests && st == TL_OK; i++) {
    tl_bundle_request *r = &b->requests[i];
    r->build_index = find_keyed(m->build_sorted, b->nbuilds, r->build);
    if (r->build_index < 0)
      st = tl_error_set(err, TL_INVALID_ARG, "%s: request %s names the build %s, which the bundle lacks", name, r->key,
                        r->build);
    else
      st = check_request_build(b, r, name, err);
  }
  for (int i = 0; i < b->nartifacts && st == TL_OK; i++)
    if (!used[i])
      st = tl_error_set(err, TL_INVALID_ARG, "%s: artifact %s is used by no build", name, b->artifacts[i].id);
  free(used);
  if (st != TL_OK) {
    tl_bundle_free(b);
    return st;
  }
  if (!b->compiler)
    b->compiler = "";
  *out = b;
  return TL_OK;
}

/* ---- files ------------------------------------------------------------------------------- */

tl_status tl_bundle_open(const char *path, tl_bundle **out, tl_error *err) {
  tl_error_clear(err);
  *out = NULL;
  if (!path || !*path)
    return tl_error_set(err, TL_INVALID_ARG, "no bundle file given");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return tl_error_set(err, TL_IO, "cannot open the bundle %s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return tl_error_set(err, TL_IO, "the bundle %s is not a regular file", path);
  }
  if ((uint64_t)sb.st_size > TL_BUNDLE_SIZE_MAX) {
    close(fd);
    return tl_error_set(err, TL_TOO_LARGE, "the bundle %s is %lld bytes; the limit is %llu", path,
                        (long long)sb.st_size, (unsigned long long)TL_BUNDLE_SIZE_MAX);
  }
  size_t len = (size_t)sb.st_size;
  void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (len && map == MAP_FAILED)
    return tl_error_set(err, TL_IO, "cannot map the bundle %s: %s", path, strerror(errno));
  tl_status st = tl_bundle_parse(len ? map : "", len, path, out, err);
  if (st != TL_OK) {
    if (len)
      munmap(map, len);
    return st;
  }
  impl *m = (*out)->impl_;
  m->map = len ? map : NULL;
  m->map_len = len;
  return TL_OK;
}

void tl_bundle_close(tl_bundle *b) {
  if (!b)
    return;
  impl *m = b->impl_;
  void *map = m ? m->map : NULL;
  size_t len = m ? m->map_len : 0;
  tl_bundle_free(b);
  if (map)
    munmap(map, len);
}

/* ---- the writer ----------------------------------------------------------------------------- */

typedef struct wentry {
  int kind;
  char key[65];         /* artifact id, build key or request key */
  char ref[65];         /* builds: the artifact id; requests: the build key */
  unsigned char *data;  /* the payload: bytes or the record's JSON text */
  size_t n;
  char *target;         /* builds and requests: the target line */
} wentry;

struct tl_bundle_writer {
  wentry *e;
  int n, cap;
  int counts[3];
  int *slots;           /* hash set of (kind, key) -> index into e, -1 empty */
  int nslots;
  char *compiler;       /* of the first build */
};

tl_status tl_bundle_writer_new(tl_bundle_writer **out, tl_error *err) {
  *out = calloc(1, sizeof **out);
  return *out ? TL_OK : tl_error_set(err, TL_NOMEM, "out of memory");
}

void tl_bundle_writer_free(tl_bundle_writer *w) {
  if (!w)
    return;
  for (int i = 0; i < w->n; i++) {
    free(w->e[i].data);
    free(w->e[i].target);
  }
  free(w->e);
  free(w->slots);
  free(w->compiler);
  free(w);
}

void tl_bundle_writer_counts(const tl_bundle_writer *w, int *artifacts, int *builds, int *requests) {
  if (artifacts)
    *artifacts = w ? w->counts[0] : 0;
  if (builds)
    *builds = w ? w->counts[1] : 0;
  if (requests)
    *requests = w ? w->counts[2] : 0;
}

/* The slot of (kind, key): where it is, or the empty slot where it would go. */
static int slot_of(const tl_bundle_writer *w, int kind, const char *key) {
  uint64_t h = (uint64_t)kind * 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 16; i++) /* the keys are hex SHA-256: their first digits are uniform */
    h = h * 16 + (uint64_t)(key[i] <= '9' ? key[i] - '0' : key[i] - 'a' + 10);
  int mask = w->nslots - 1, s = (int)(h & (uint64_t)mask);
  while (w->slots[s] >= 0 && !(w->e[w->slots[s]].kind == kind && strcmp(w->e[w->slots[s]].key, key) == 0))
    s = (s + 1) & mask;
  return s;
}

static int find_entry(const tl_bundle_writer *w, int kind, const char *key) {
  return w->nslots ? w->slots[slot_of(w, kind, key)] : -1;
}

/* Appends an entry (taking data and target) and indexes it. */
static tl_status add_entry(tl_bundle_writer *w, wentry we, tl_error *err) {
  if ((unsigned)w->n >= TL_BUNDLE_ENTRIES_MAX) {
    free(we.data);
    free(we.target);
    return tl_error_set(err, TL_TOO_LARGE, "a bundle holds at most %u entries", TL_BUNDLE_ENTRIES_MAX);
  }
  if (w->n == w->cap || 2 * (w->n + 1) > w->nslots) {
    int cap = w->cap ? w->cap * 2 : 64, nslots = cap * 2;
    wentry *ne = realloc(w->e, sizeof *ne * (size_t)cap);
    int *ns = malloc(sizeof *ns * (size_t)nslots);
    if (ne)
      w->e = ne;
    if (!ne || !ns) {
      free(ns);
      free(we.data);
      free(we.target);
      return tl_error_set(err, TL_NOMEM, "out of memory");
    }
    w->cap = cap;
    free(w->slots);
    w->slots = ns;
    w->nslots = nslots;
    for (int i = 0; i < nslots; i++)
      ns[i] = -1;
    for (int i = 0; i < w->n; i++)
      ns[slot_of(w, w->e[i].kind, w->e[i].key)] = i;
  }
  w->e[w->n] = we;
  w->slots[slot_of(w, we.kind, we.key)] = w->n;
  w->n++;
  w->counts[we.kind == TL_BUNDLE_ARTIFACT ? 0 : we.kind == TL_BUNDLE_BUILD ? 1 : 2]++;
  return TL_OK;
}

/* A record's JSON text (canonical: compact, keys sorted), malloc'd. */
static char *record_text(json_t *rec, size_t *n) {
  char *s = rec ? json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII) : NULL;
  json_decref(rec);
  *n = s ? strlen(s) : 0;
  return s;
}

tl_status tl_bundle_writer_add_build(tl_bundle_writer *w, const char *key, const char *manifest, const char *metadata,
                                     int64_t compile_ms, const void *bytes, size_t n, tl_error *err) {
  tl_error_clear(err);
  if (!w || !tl_hex_is_sha256(key) || !manifest || !metadata || !bytes || !n || compile_ms < 0)
    return tl_error_set(err, TL_INVALID_ARG, "tl_bundle_writer_add_build: a missing or malformed argument");
  if (n > TL_BUNDLE_ARTIFACT_MAX)
    return tl_error_set(err, TL_TOO_LARGE, "the binary of %s is %zu bytes; a bundle's limit is %llu", key, n,
                        (unsigned long long)TL_BUNDLE_ARTIFACT_MAX);
  if (strncmp(manifest, BUILD_MAGIC, strlen(BUILD_MAGIC)) != 0 || !hashes_to(manifest, key))
    return tl_error_set(err, TL_INVALID_ARG, "build %s: its manifest is not a key manifest of that key", key);
  json_t *meta = json_loads(metadata, JSON_REJECT_DUPLICATES, NULL);
  bool meta_ok = json_is_object(meta);
  json_decref(meta);
  if (!meta_ok)
    return tl_error_set(err, TL_INVALID_ARG, "build %s: its metadata is not a JSON object", key);
  char id[65];
  if (tl_sha256_hex(bytes, n, id) != TL_OK)
    return tl_error_set(err, TL_NOMEM, "SHA-256 failed");
  int have = find_entry(w, TL_BUNDLE_BUILD, key);
  if (have >= 0)
    return strcmp(w->e[have].ref, id) == 0
               ? TL_OK
               : tl_error_set(err, TL_INVALID_ARG, "build %s is added twice with other bytes (%s, then %s)", key,
                              w->e[have].ref, id);
  char *target = line_value(manifest, "target"), *compiler = line_value(manifest, "compiler");
  if (!target || !compiler) {
    free(target);
    free(compiler);
    return tl_error_set(err, TL_INVALID_ARG, "build %s: its manifest has no target or compiler line", key);
  }
  if (w->compiler && strcmp(w->compiler, compiler) != 0) {
    tl_status st = tl_error_set(err, TL_INVALID_ARG,
                                "build %s is by %s, the bundle's builds by %s (a bundle holds one compiler's builds)",
                                key, compiler, w->compiler);
    free(target);
    free(compiler);
    return st;
  }
  if (!w->compiler)
    w->compiler = compiler;
  else
    free(compiler);
  size_t plen = strlen(manifest) + strlen(metadata);
  if (plen > TL_BUNDLE_RECORD_MAX - 1024) {
    free(target);
    return tl_error_set(err, TL_TOO_LARGE, "build %s: its manifest and metadata are %zu bytes; a record's limit is %llu",
                        key, plen, (unsigned long long)TL_BUNDLE_RECORD_MAX);
  }
  tl_status st = TL_OK;
  if (find_entry(w, TL_BUNDLE_ARTIFACT, id) < 0) {
    wentry a = {.kind = TL_BUNDLE_ARTIFACT, .data = malloc(n), .n = n};
    memcpy(a.key, id, 65);
    if (!a.data) {
      free(target);
      return tl_error_set(err, TL_NOMEM, "out of memory");
    }
    memcpy(a.data, bytes, n);
    if ((st = add_entry(w, a, err)) != TL_OK) {
      free(target);
      return st;
    }
  }
  json_t *rec = json_pack("{s:s, s:s, s:s, s:s, s:I}", "key", key, "artifact", id, "manifest", manifest, "metadata",
                          metadata, "compile_ms", (json_int_t)compile_ms);
  wentry be = {.kind = TL_BUNDLE_BUILD, .target = target};
  be.data = (unsigned char *)record_text(rec, &be.n);
  memcpy(be.key, key, 65);
  memcpy(be.ref, id, 65);
  if (!be.data) {
    free(target);
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  return add_entry(w, be, err);
}

tl_status tl_bundle_writer_add_request(tl_bundle_writer *w, const char *text, const char *build, tl_error *err) {
  tl_error_clear(err);
  if (!w || !text || !tl_hex_is_sha256(build))
    return tl_error_set(err, TL_INVALID_ARG, "tl_bundle_writer_add_request: a missing or malformed argument");
  if (strncmp(text, REQUEST_MAGIC, strlen(REQUEST_MAGIC)) != 0)
    return tl_error_set(err, TL_INVALID_ARG, "a request text starts with \"tl-client-request 1\"");
  if (strlen(text) > TL_BUNDLE_RECORD_MAX - 1024)
    return tl_error_set(err, TL_TOO_LARGE, "a request of %zu bytes; a record's limit is %llu", strlen(text),
                        (unsigned long long)TL_BUNDLE_RECORD_MAX);
  char key[65];
  if (tl_sha256_hex(text, strlen(text), key) != TL_OK)
    return tl_error_set(err, TL_NOMEM, "SHA-256 failed");
  int have = find_entry(w, TL_BUNDLE_REQUEST, key);
  if (have >= 0)
    return strcmp(w->e[have].ref, build) == 0
               ? TL_OK
               : tl_error_set(err, TL_INVALID_ARG, "request %s names two builds (%s and %s)", key, w->e[have].ref, build);
  int b = find_entry(w, TL_BUNDLE_BUILD, build);
  if (b < 0)
    return tl_error_set(err, TL_INVALID_ARG, "request %s names the build %s, which the bundle lacks", key, build);
  char *target = line_value(text, "target"), *compiler = line_value(text, "compiler");
  bool ok = target && compiler && strcmp(target, w->e[b].target) == 0 && strcmp(compiler, w->compiler) == 0;
  tl_status st = ok ? TL_OK
                    : tl_error_set(err, TL_INVALID_ARG, "request %s asks for %s by %s, not the build's %s by %s", key,
                                   target ? target : "(no target)", compiler ? compiler : "(no compiler)",
                                   w->e[b].target, w->compiler);
  free(target);
  free(compiler);
  if (st != TL_OK)
    return st;
  json_t *rec = json_pack("{s:s, s:s, s:s}", "key", key, "build", build, "request", text);
  wentry re = {.kind = TL_BUNDLE_REQUEST};
  re.data = (unsigned char *)record_text(rec, &re.n);
  memcpy(re.key, key, 65);
  memcpy(re.ref, build, 65);
  if (!re.data)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  return add_entry(w, re, err);
}

/* Writes n bytes and hashes them. */
static bool emit(FILE *f, tl_sha256_ctx *h, const void *p, size_t n) {
  return fwrite(p, 1, n, f) == n && tl_sha256_update(h, p, n) == TL_OK;
}

tl_status tl_bundle_writer_write(tl_bundle_writer *w, const char *path, tl_error *err) {
  tl_error_clear(err);
  if (!w || !path || !*path)
    return tl_error_set(err, TL_INVALID_ARG, "tl_bundle_writer_write: no writer or path");
  uint64_t size = TL_BUNDLE_HEADER_BYTES + TL_BUNDLE_TRAILER_BYTES;
  for (int i = 0; i < w->n; i++)
    size += TL_BUNDLE_ENTRY_HEADER_BYTES + w->e[i].n;
  if (size > TL_BUNDLE_SIZE_MAX)
    return tl_error_set(err, TL_TOO_LARGE, "the bundle would be %llu bytes; the limit is %llu",
                        (unsigned long long)size, (unsigned long long)TL_BUNDLE_SIZE_MAX);
  size_t pl = strlen(path);
  char *tmp = malloc(pl + 5);
  if (!tmp)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  snprintf(tmp, pl + 5, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    tl_status st = tl_error_set(err, TL_IO, "cannot write %s: %s", tmp, strerror(errno));
    free(tmp);
    return st;
  }
  tl_sha256_ctx h;
  bool ok = tl_sha256_init(&h) == TL_OK;
  unsigned char head[TL_BUNDLE_HEADER_BYTES] = {0};
  memcpy(head, TL_BUNDLE_MAGIC, 8);
  put_le(head + 8, TL_BUNDLE_VERSION, 4);
  put_le(head + 12, (uint64_t)w->n, 4);
  put_le(head + 16, size, 8);
  ok = ok && emit(f, &h, head, sizeof head);
  /* artifacts, then builds, then requests: each reference points backwards */
  static const int order[3] = {TL_BUNDLE_ARTIFACT, TL_BUNDLE_BUILD, TL_BUNDLE_REQUEST};
  for (int k = 0; k < 3 && ok; k++)
    for (int i = 0; i < w->n && ok; i++) {
      const wentry *e = &w->e[i];
      if (e->kind != order[k])
        continue;
      unsigned char eh[TL_BUNDLE_ENTRY_HEADER_BYTES] = {0};
      eh[0] = (unsigned char)e->kind;
      put_le(eh + 8, e->n, 8);
      ok = tl_sha256(e->data, e->n, eh + 16) == TL_OK && emit(f, &h, eh, sizeof eh) && emit(f, &h, e->data, e->n);
    }
  uint8_t sum[TL_SHA256_LEN];
  ok = ok && tl_sha256_final(&h, sum) == TL_OK && fwrite(sum, 1, sizeof sum, f) == sizeof sum;
  tl_sha256_discard(&h);
  ok = (fflush(f) == 0) & ok;
  ok = (fsync(fileno(f)) == 0) & ok;
  ok = (fclose(f) == 0) & ok;
  tl_status st = TL_OK;
  if (!ok || rename(tmp, path) != 0) {
    st = tl_error_set(err, TL_IO, "cannot write %s: %s", ok ? path : tmp, strerror(errno));
    unlink(tmp);
  }
  free(tmp);
  return st;
}
