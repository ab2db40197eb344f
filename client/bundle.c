/*
 * bundle.c - libtlclient and bundles (proto/bundle.md, cache/tlbundle.h):
 * a bundle set on a client for read-only use (the lookups themselves are in
 * fetch.c, beside the local cache's), a bundle imported into the local
 * cache, and a bundle written from the local cache.
 *
 * Local cache entries and bundle entries map one to one: a build row with
 * its key manifest is a bundle build (and its artifact); a request row (an
 * alias, TL_CLIENT_ALIAS_MAGIC) whose manifest holds the whole request text
 * is a bundle request.  So import and create are loops over the entries of
 * one side, writing the other; nothing is trusted that a hash does not
 * cover (tl_bundle_parse checks a bundle whole, tl_cache_get_artifact
 * re-hashes the bytes it reads).  A build stored from a compile has a
 * placeholder for its manifest (fetch.c: the compile answer has none); its
 * manifest is rebuilt here from the request that names it and the
 * toolchain of its metadata (tl_compile_key_as), kept only when its SHA-256
 * is the build's key, and asked of the server otherwise.  A bundle pushed to a server (POST
 * /v1/bundles) is checked here whole first, then sent as it is.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "../cache/tlbundle.h"
#include "../compiler/tlcompiler.h"
#include "../proto/tl_hash.h"
#include "internal.h"

tl_status tl_client_set_bundle(tl_client *c, const char *path, tl_error *err) {
  tl_error_clear(err);
  if (!c)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_set_bundle: NULL client");
  tl_bundle *b = NULL;
  char *copy = NULL;
  atomic_int *refs = NULL;
  if (path) {
    if (strlen(path) > TL_CLIENT_PATH_MAX)
      return tl_error_set(err, TL_TOO_LARGE, "the bundle's path is longer than %d bytes", TL_CLIENT_PATH_MAX);
    tl_status st = tl_bundle_open(path, &b, err);
    if (st != TL_OK)
      return st;
    if (!(copy = strdup(path)) || !(refs = malloc(sizeof *refs))) {
      free(copy);
      tl_bundle_close(b);
      return tl_error_set(err, TL_NOMEM, "out of memory");
    }
    atomic_init(refs, 1);
  }
  tl_client_bundle_release(c);
  c->bundle = b;
  c->bundle_path = copy;
  c->bundle_refs = refs;
  return TL_OK;
}

void tl_client_bundle_release(tl_client *c) {
  if (c->bundle_refs && atomic_fetch_sub(c->bundle_refs, 1) == 1) {
    tl_bundle_close(c->bundle);
    free(c->bundle_path);
    free(c->bundle_refs);
  }
  c->bundle = NULL;
  c->bundle_path = NULL;
  c->bundle_refs = NULL;
}

const char *tl_client_bundle(const tl_client *c) { return c ? c->bundle_path : NULL; }

/* ---- import ------------------------------------------------------------------------------- */

/* Adds id to the local cache's list of imported compilers (once). */
static tl_status remember_compiler(tl_cache *cache, const char *id, tl_error *err) {
  char *list = NULL;
  if (tl_cache_note_get(cache, TL_NOTE_IMPORTED_COMPILERS, &list, NULL) != TL_OK)
    list = NULL;
  size_t idl = strlen(id);
  for (const char *p = list; p && *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0))
    if (strncmp(p, id, idl) == 0 && (p[idl] == '\n' || p[idl] == 0)) {
      free(list);
      return TL_OK;
    }
  /* newest first; the oldest are dropped when the note is full */
  size_t n = idl + 1 + (list ? strlen(list) : 0) + 1;
  char *next = malloc(n);
  if (!next) {
    free(list);
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  snprintf(next, n, "%s\n%s", id, list ? list : "");
  while (strlen(next) > TL_CACHE_NOTE_MAX) {
    char *last = strrchr(next, '\n');
    if (!last)
      break;
    *last = 0;
    char *prev = strrchr(next, '\n');
    if (prev)
      prev[1] = 0;
    else
      break;
  }
  tl_status st = tl_cache_note_set(cache, TL_NOTE_IMPORTED_COMPILERS, next, err);
  free(next);
  free(list);
  return st;
}

tl_status tl_client_bundle_import(tl_client *c, const char *path, tl_bundle_counts *counts, tl_error *err) {
  tl_error_clear(err);
  if (counts)
    memset(counts, 0, sizeof *counts);
  if (!c || !path)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_bundle_import: NULL argument");
  tl_cache *cache = tl_client_local(c);
  if (!cache)
    return tl_error_set(err, TL_INVALID_ARG, "no local cache to import %s into (%s)", path,
                        c->cache_path ? "it cannot be opened" : "it is turned off");
  tl_bundle *b = NULL;
  tl_status st = tl_bundle_open(path, &b, err);
  if (st != TL_OK)
    return st;
  for (int i = 0; i < b->nbuilds && st == TL_OK; i++) {
    const tl_bundle_build *bd = &b->builds[i];
    const tl_bundle_artifact *a = &b->artifacts[bd->artifact_index];
    tl_cache_build row = {.manifest = bd->manifest, .target = bd->target, .metadata = bd->metadata,
                          .compile_ms = bd->compile_ms};
    memcpy(row.key, bd->key, 65);
    memcpy(row.artifact_id, a->id, 65);
    st = tl_cache_put(cache, &row, a->bytes, a->n, err);
  }
  for (int i = 0; i < b->nrequests && st == TL_OK; i++) {
    const tl_bundle_request *r = &b->requests[i];
    const tl_bundle_build *bd = &b->builds[r->build_index];
    const tl_bundle_artifact *a = &b->artifacts[bd->artifact_index];
    char *manifest = tl_alias_manifest(bd->key, r->text);
    if (!manifest) {
      st = tl_error_set(err, TL_NOMEM, "out of memory");
      break;
    }
    tl_cache_build row = {.manifest = manifest, .target = bd->target, .metadata = bd->metadata,
                          .compile_ms = bd->compile_ms};
    memcpy(row.key, r->key, 65);
    memcpy(row.artifact_id, a->id, 65);
    st = tl_cache_put(cache, &row, a->bytes, a->n, err);
    free(manifest);
  }
  if (st == TL_OK && b->compiler[0])
    st = remember_compiler(cache, b->compiler, err);
  if (st == TL_OK && counts) {
    counts->builds = b->nbuilds;
    counts->requests = b->nrequests;
    counts->artifacts = b->nartifacts;
    snprintf(counts->compiler, sizeof counts->compiler, "%s", b->compiler);
  }
  if (st != TL_OK && err) { /* say which file */
    char msg[TL_ERROR_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "%s", err->message);
    tl_error_set(err, st, "importing %s into the local cache %s: %s", path, c->cache_path, msg);
  }
  tl_bundle_close(b);
  return st;
}

/* ---- create ----------------------------------------------------------------------------------- */

/* One local cache entry, as tl_cache_list gives it (copied). */
typedef struct centry {
  char key[65];
  char *manifest;
} centry;

typedef struct clist {
  centry *e;
  int n, cap;
  bool oom;
} clist;

static int collect_entry(const tl_cache_build *b, void *user) {
  clist *l = user;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 64;
    centry *ne = realloc(l->e, sizeof *ne * (size_t)cap);
    if (!ne) {
      l->oom = true;
      return 1;
    }
    l->e = ne;
    l->cap = cap;
  }
  centry *e = &l->e[l->n];
  memcpy(e->key, b->key, 65);
  if (!(e->manifest = strdup(b->manifest))) {
    l->oom = true;
    return 1;
  }
  l->n++;
  return 0;
}

/* The value of a manifest's "compiler" line is id. */
static bool by_compiler(const char *manifest, const char *id) {
  const char *p = strstr(manifest, "\ncompiler ");
  size_t n = strlen(id);
  return p && strncmp(p + 10, id, n) == 0 && p[10 + n] == '\n';
}

/* The line of text after "\nNAME " (or at its start), as a copy; NULL
 * when it has none. */
static char *line_of(const char *text, const char *name) {
  size_t n = strlen(name);
  for (const char *p = text; p; p = strchr(p, '\n')) {
    p += *p == '\n';
    if (strncmp(p, name, n) == 0 && p[n] == ' ') {
      const char *end = strchr(p + n + 1, '\n');
      return end ? strndup(p + n + 1, (size_t)(end - p - n - 1)) : NULL;
    }
  }
  return NULL;
}

/* The manifest of the build key rebuilt here, with no server and no
 * toolchain, from a request of l that names the build (its whole request
 * text: compiler, target, options, constants, program) and the toolchain in
 * the build's metadata: malloc'd when its SHA-256 is key, else NULL (no
 * such request, one kept without its program, a compiler that folds the
 * constants otherwise than this one's checker). */
static char *manifest_from_request(tl_client *c, const clist *l, const char *key, const char *metadata) {
  size_t am = strlen(TL_CLIENT_ALIAS_MAGIC);
  json_t *meta = json_loads(metadata, 0, NULL);
  const char *toolchain = json_string_value(json_object_get(json_object_get(meta, "versions"), "toolchain"));
  char *found = NULL;
  for (int i = 0; toolchain && !found && i < l->n; i++) {
    const centry *e = &l->e[i];
    if (strncmp(e->manifest, TL_CLIENT_ALIAS_MAGIC, am) != 0 || strncmp(e->manifest + am, "build ", 6) != 0 ||
        strncmp(e->manifest + am + 6, key, 64) != 0)
      continue;
    char *text = tl_alias_request_text(e->manifest, e->key);
    char *compiler = text ? line_of(text, "compiler") : NULL, *target = text ? line_of(text, "target") : NULL;
    char *options = text ? line_of(text, "options") : NULL, *consts = text ? line_of(text, "constants") : NULL;
    char *program = text ? line_of(text, "program") : NULL;
    json_t *cj = consts ? json_loads(consts, 0, NULL) : NULL;
    tl_define defs[TL_CLIENT_DEFINES_MAX];
    char *values[TL_CLIENT_DEFINES_MAX];
    int nd = 0;
    bool ok = compiler && target && options && program && json_is_object(cj) &&
              json_object_size(cj) <= TL_CLIENT_DEFINES_MAX;
    const char *name;
    json_t *v;
    json_object_foreach(ok ? cj : NULL, name, v) {
      if (!(values[nd] = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT))) {
        ok = false;
        break;
      }
      defs[nd] = (tl_define){name, values[nd]};
      nd++;
    }
    if (ok) {
      /* the back end asked for (the key's backend line): the metadata's, for NVIDIA targets */
      const char *backend = json_string_value(json_object_get(meta, "backend_requested"));
      tl_compile_request req = {.program = program, .program_len = strlen(program), .defines = defs,
                                .ndefines = nd, .target = target, .options_json = options,
                                .backend = backend ? backend : "cuda"};
      tl_arena *arena = tl_arena_new();
      tl_diags diags = {.arena = arena};
      char got[65], *m = NULL;
      tl_error ke;
      tl_status st = tl_compile_key_as(&req, compiler, toolchain, got, &m, &diags, &ke);
      if (st == TL_OK && strcmp(got, key) == 0)
        found = m;
      else {
        tl_clog(c, "bundle: the manifest of %s cannot be rebuilt from the request %s (%s); asking the server", key,
                e->key, st == TL_OK ? "it gives another key: another compiler's checker?" : ke.message);
        free(m);
      }
      tl_arena_free(arena);
    }
    for (int k = 0; k < nd; k++)
      free(values[k]);
    json_decref(cj);
    free(compiler);
    free(target);
    free(options);
    free(consts);
    free(program);
    free(text);
  }
  json_decref(meta);
  return found;
}

/* Adds the build of key (its bytes re-hashed by the cache; where the cache
 * holds a placeholder for its manifest, the manifest rebuilt from a request
 * of l, else the server's).  False when it is left out (logged). */
static bool add_build(tl_client *c, tl_cache *cache, const clist *l, tl_bundle_writer *w, const char *key,
                      const char *compiler, tl_error *err, bool *fatal) {
  tl_cache_build *b = NULL;
  void *bytes = NULL;
  size_t n = 0;
  tl_error e;
  if (tl_cache_get(cache, key, &b, &bytes, &n, &e) != TL_OK) {
    tl_clog(c, "bundle: left out the build %s: %s", key, e.message);
    return false;
  }
  char *manifest = NULL;
  bool ok = true;
  if (strncmp(b->manifest, TL_BUILD_MANIFEST_MAGIC, strlen(TL_BUILD_MANIFEST_MAGIC)) != 0 &&
      !(manifest = manifest_from_request(c, l, key, b->metadata))) {
    if (tl_client_build_manifest(c, key, &manifest, NULL, &e) != TL_OK) {
      tl_clog(c, "bundle: left out the build %s (%s): the local cache has no manifest of it and the server gives "
                 "none: %s", key, b->target, e.message);
      ok = false;
    }
  }
  const char *m = manifest ? manifest : b->manifest;
  if (ok && !by_compiler(m, compiler)) {
    tl_clog(c, "bundle: left out the build %s (%s): not built by %s", key, b->target, compiler);
    ok = false;
  }
  if (ok) {
    tl_status st = tl_bundle_writer_add_build(w, key, m, b->metadata, b->compile_ms, bytes, n, &e);
    if (st == TL_NOMEM || st == TL_TOO_LARGE) {
      *fatal = true;
      tl_error_set(err, st, "%s", e.message);
    } else if (st != TL_OK)
      tl_clog(c, "bundle: left out the build %s: %s", key, e.message);
    ok = st == TL_OK;
  }
  free(manifest);
  free(bytes);
  tl_cache_build_free(b);
  return ok;
}

tl_status tl_client_bundle_create(tl_client *c, const char *path, const char *compiler, tl_bundle_counts *counts,
                                  tl_error *err) {
  tl_error_clear(err);
  if (counts)
    memset(counts, 0, sizeof *counts);
  if (!c || !path || !*path)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_bundle_create: NULL argument");
  tl_cache *cache = tl_client_local(c);
  if (!cache)
    return tl_error_set(err, TL_INVALID_ARG, "no local cache to make a bundle of (%s)",
                        c->cache_path ? "it cannot be opened" : "it is turned off");
  char id[TL_CLIENT_COMPILER_ID_MAX + 1];
  snprintf(id, sizeof id, "%s", compiler && *compiler ? compiler : tl_client_compiler_id(c));
  if (!id[0])
    return tl_error_set(err, TL_INVALID_ARG,
                        "no compiler identity to make the bundle for: the server %s cannot be reached and the local "
                        "cache does not remember it (give one: --compiler 'tlc 0.1.0+...')", c->server);
  clist l = {0};
  tl_status st = tl_cache_list(cache, collect_entry, &l, err);
  if (st == TL_OK && l.oom)
    st = tl_error_set(err, TL_NOMEM, "out of memory");
  tl_bundle_writer *w = NULL;
  if (st == TL_OK)
    st = tl_bundle_writer_new(&w, err);
  int skipped = 0;
  bool fatal = false;
  size_t am = strlen(TL_CLIENT_ALIAS_MAGIC);
  /* the builds, then the requests that name them */
  for (int i = 0; i < l.n && st == TL_OK && !fatal; i++)
    if (strncmp(l.e[i].manifest, TL_CLIENT_ALIAS_MAGIC, am) != 0 && !add_build(c, cache, &l, w, l.e[i].key, id, err, &fatal))
      skipped++;
  for (int i = 0; i < l.n && st == TL_OK && !fatal; i++) {
    const centry *e = &l.e[i];
    if (strncmp(e->manifest, TL_CLIENT_ALIAS_MAGIC, am) != 0)
      continue;
    char build[65] = "";
    if (strncmp(e->manifest + am, "build ", 6) == 0)
      snprintf(build, sizeof build, "%.64s", e->manifest + am + 6);
    char *text = tl_alias_request_text(e->manifest, e->key);
    tl_error ee;
    if (!text) {
      tl_clog(c, "bundle: left out the request %s: the local cache holds it without its program (stored by an "
                 "older client, or too large)", e->key);
      skipped++;
    } else if (!strstr(text, "\ncompiler ") || !by_compiler(text, id)) {
      skipped++; /* another compiler's request: not this bundle's */
    } else {
      /* the build it names may have been left out above (its row gone,
       * or another compiler's): try it once more, then leave the request out */
      tl_status bs = TL_OK;
      if (tl_bundle_writer_add_request(w, text, build, &ee) != TL_OK) {
        if (tl_hex_is_sha256(build) && add_build(c, cache, &l, w, build, id, err, &fatal))
          bs = tl_bundle_writer_add_request(w, text, build, &ee);
        else
          bs = TL_INVALID_ARG;
        if (bs != TL_OK) {
          tl_clog(c, "bundle: left out the request %s: %s", e->key, ee.message);
          skipped++;
        }
      }
    }
    free(text);
  }
  for (int i = 0; i < l.n; i++)
    free(l.e[i].manifest);
  free(l.e);
  if (fatal)
    st = err ? err->code : TL_NOMEM;
  int na = 0, nb = 0, nr = 0;
  tl_bundle_writer_counts(w, &na, &nb, &nr);
  if (st == TL_OK && nb == 0)
    st = tl_error_set(err, TL_NOT_FOUND, "the local cache %s has no build by %s%s", c->cache_path, id,
                      skipped ? " that can be bundled (tlclient -v says why each was left out)" : "");
  if (st == TL_OK)
    st = tl_bundle_writer_write(w, path, err);
  tl_bundle_writer_free(w);
  if (st == TL_OK && counts) {
    counts->builds = nb;
    counts->requests = nr;
    counts->artifacts = na;
    counts->skipped = skipped;
    snprintf(counts->compiler, sizeof counts->compiler, "%s", id);
  }
  return st;
}

/* ---- push to a server ------------------------------------------------------------------------ */

tl_status tl_client_bundle_push(tl_client *c, const char *path, char **answer, tl_error *err) {
  tl_error_clear(err);
  if (answer)
    *answer = NULL;
  if (!c || !path)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_bundle_push: NULL argument");
  FILE *f = fopen(path, "rb");
  if (!f)
    return tl_error_set(err, TL_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(f);
    return tl_error_set(err, TL_IO, "%s: not a regular file", path);
  }
  if ((uint64_t)sb.st_size > TL_CLIENT_BUNDLE_PUSH_MAX) {
    fclose(f);
    return tl_error_set(err, TL_TOO_LARGE, "%s: %lld bytes; a server takes at most %llu (its --max-bundle, at most 4 GiB)",
                        path, (long long)sb.st_size, (unsigned long long)TL_CLIENT_BUNDLE_PUSH_MAX);
  }
  size_t n = (size_t)sb.st_size;
  char *data = malloc(n ? n : 1);
  if (!data) {
    fclose(f);
    return tl_error_set(err, TL_NOMEM, "out of memory for the %zu bytes of %s", n, path);
  }
  size_t got = fread(data, 1, n, f);
  bool rerr = ferror(f);
  fclose(f);
  if (got != n || rerr) {
    free(data);
    return tl_error_set(err, TL_IO, "%s: cannot read it whole (%zu of %zu bytes)", path, got, n);
  }
  /* checked here first: a damaged bundle fails naming the entry, without a round trip */
  tl_bundle *b = NULL;
  tl_status st = tl_bundle_parse(data, n, path, &b, err);
  tl_bundle_free(b);
  if (st != TL_OK) {
    free(data);
    return st;
  }
  tl_http_response r;
  tl_error e;
  st = tl_http_request_as(c, "POST", "/v1/bundles", "application/octet-stream", data, n, 8u << 20, &r, &e);
  free(data);
  if (st == TL_OK && (r.status == 200 || r.status == 422) && r.body && answer) {
    *answer = r.body; /* the per-build list, also when every build was refused */
    r.body = NULL;
  }
  if (st == TL_OK && r.status != 200) {
    char what[300];
    snprintf(what, sizeof what, "POST %.200s/v1/bundles", c->server);
    st = tl_http_error(&r, what, &e);
  }
  tl_http_response_free(&r);
  if (st != TL_OK && err)
    *err = e;
  return st;
}
