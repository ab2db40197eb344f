/*
 * fetch.c - where libtlclient's builds come from: the request key, the
 * local cache (libtlcache on a per-user SQLite file), the server's compile,
 * kernels and artifacts endpoints, and the SHA-256 check of every binary
 * before it is handed out.  The order of the lookups and the reasons are
 * in client/include/tl/tlclient.h; in short:
 *
 *   tl_client_get:  local cache by request key -> POST /v1/compile ->
 *                   artifact bytes (local cache by id, else GET
 *                   /v1/artifacts/ID, verified) -> stored locally under the
 *                   build key and the request key.  Server unreachable:
 *                   the build key computed locally (tl_compile_key, when
 *                   NVRTC is here) -> local cache.
 *
 * Local cache entries.  A build is stored under its build key with the
 * server's manifest when the client fetched it by key, or with a short
 * placeholder naming the key when it came from a compile (the compile
 * answer has no manifest).  A request key is stored as one more build row
 * of the same artifact whose manifest starts with TL_CLIENT_ALIAS_MAGIC and
 * names the build key; libtlcache keeps one copy of the bytes for both.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../cache/tlbundle.h"
#include "../compiler/target.h"
#include "../compiler/tlcompiler.h"
#include "../proto/tl_hash.h"
#include "../proto/tl_json.h"
#include "internal.h"

#define JSON_ANSWER_MAX ((size_t)64 << 20)
#define INFO_ANSWER_MAX ((size_t)1 << 20)
#define IDENT_PROBE_TIMEOUT_MS 10000 /* the most the GET /v1/info of the compiler identity may take */
#define NAME_MAX_SHOWN 80

/* ---- requests --------------------------------------------------------------------- */

typedef struct prepared {
  json_t *program;    /* the parsed program */
  json_t *constants;  /* object of the overrides */
  json_t *options;    /* object, or NULL */
  char name[NAME_MAX_SHOWN + 1];
} prepared;

static void prepared_free(prepared *p) {
  json_decref(p->program);
  json_decref(p->constants);
  json_decref(p->options);
  memset(p, 0, sizeof *p);
}

static tl_status prepare(const tl_client_request *req, prepared *p, tl_error *err) {
  memset(p, 0, sizeof *p);
  if (!req || !req->program)
    return tl_error_set(err, TL_INVALID_ARG, "no program given");
  size_t len = req->program_len ? req->program_len : strlen(req->program);
  const char *shown = req->name;
  if (len > TL_CLIENT_PROGRAM_MAX)
    return tl_error_set(err, TL_TOO_LARGE, "program %s is %zu bytes; the limit is %u", shown ? shown : "", len,
                        TL_CLIENT_PROGRAM_MAX);
  if (req->ndefines < 0 || req->ndefines > TL_CLIENT_DEFINES_MAX || (req->ndefines && !req->defines))
    return tl_error_set(err, TL_INVALID_ARG, "a request has 0 to %d constant overrides, not %d", TL_CLIENT_DEFINES_MAX,
                        req->ndefines);
  json_error_t jerr;
  p->program = json_loadb(req->program, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!p->program)
    return tl_error_set(err, TL_BAD_JSON, "program %s is not valid JSON: line %d, column %d: %s",
                        shown ? shown : "(unnamed)", jerr.line, jerr.column, jerr.text);
  if (!json_is_object(p->program)) {
    prepared_free(p);
    return tl_error_set(err, TL_BAD_PROGRAM, "program %s is not a JSON object", shown ? shown : "(unnamed)");
  }
  const char *pname = json_string_value(json_object_get(p->program, "name"));
  snprintf(p->name, sizeof p->name, "%s", shown ? shown : pname ? pname : "(unnamed)");
  tl_json_strip_x(p->program);
  p->constants = json_object();
  if (!p->constants) {
    prepared_free(p);
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  for (int i = 0; i < req->ndefines; i++) {
    const tl_client_define *d = &req->defines[i];
    if (!d->name || !*d->name || strlen(d->name) > TL_MAX_NAME || !d->value) {
      prepared_free(p);
      return tl_error_set(err, TL_INVALID_ARG, "constant override %d of %s has no name or no value", i, p->name);
    }
    json_t *v = json_loads(d->value, JSON_DECODE_ANY, NULL);
    if (!v || !(json_is_number(v) || json_is_boolean(v))) {
      json_decref(v);
      prepared_free(p);
      return tl_error_set(err, TL_INVALID_ARG, "-D %s=%.100s: the value must be a number or true/false", d->name,
                          d->value);
    }
    json_object_set_new(p->constants, d->name, v);
  }
  if (req->options_json && *req->options_json) {
    p->options = json_loads(req->options_json, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(p->options)) {
      prepared_free(p);
      return tl_error_set(err, TL_INVALID_ARG, "the compiler options of %s must be a JSON object", p->name);
    }
  }
  return TL_OK;
}

tl_status tl_target_check(const char *target, tl_error *err) {
  if (!target || !*target)
    return tl_error_set(err, TL_INVALID_ARG, "no target given (e.g. sm_90, compute_80)");
  size_t n = strlen(target);
  if (n > TL_CLIENT_TARGET_MAX)
    return tl_error_set(err, TL_TOO_LARGE, "target '%.40s...' is longer than %d characters", target,
                        TL_CLIENT_TARGET_MAX);
  for (size_t i = 0; i < n; i++)
    if (!((target[i] >= 'a' && target[i] <= 'z') || (target[i] >= '0' && target[i] <= '9') || target[i] == '_'))
      return tl_error_set(err, TL_INVALID_ARG, "target '%s' has a character other than a-z, 0-9 and '_'", target);
  return TL_OK;
}

/* The canonical request text of p for target and the server's compiler
 * (malloc'd). */
static char *request_text(const prepared *p, const char *target, const char *compiler) {
  char *prog = tl_json_canonical(p->program), *cons = tl_json_canonical(p->constants);
  char *opts = p->options ? tl_json_canonical(p->options) : NULL;
  char *out = NULL;
  if (prog && cons && (opts || !p->options)) {
    size_t n = strlen(prog) + strlen(cons) + (opts ? strlen(opts) : 2) + strlen(target) + strlen(compiler) + 160;
    if ((out = malloc(n)))
      snprintf(out, n, "%scompiler %s\ntarget %s\noptions %s\nconstants %s\nprogram %s\n", TL_CLIENT_ALIAS_MAGIC,
               *compiler ? compiler : "(unknown)", target, opts ? opts : "{}", cons, prog);
  }
  free(prog);
  free(cons);
  free(opts);
  return out;
}

static tl_status key_of(const prepared *p, const char *target, const char *compiler, char key[65], char **text,
                        tl_error *err) {
  char *t = request_text(p, target, compiler);
  if (!t)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  tl_status st = tl_sha256_hex(t, strlen(t), key);
  if (st != TL_OK) {
    free(t);
    return tl_error_set(err, st, "SHA-256 failed");
  }
  if (text)
    *text = t;
  else
    free(t);
  return TL_OK;
}

tl_status tl_request_key(const tl_client_request *req, const char *target, const char *compiler, char key[65],
                         char **text, tl_error *err) {
  tl_error_clear(err);
  if (text)
    *text = NULL;
  tl_status st = tl_target_check(target, err);
  if (st != TL_OK)
    return st;
  prepared p;
  if ((st = prepare(req, &p, err)) != TL_OK)
    return st;
  st = key_of(&p, target, compiler ? compiler : "", key, text, err);
  prepared_free(&p);
  return st;
}

tl_status tl_request_canonical(const tl_client_request *req, char **program, void **constants, tl_error *err) {
  *program = NULL;
  *constants = NULL;
  prepared p;
  tl_status st = prepare(req, &p, err);
  if (st != TL_OK)
    return st;
  *program = tl_json_canonical(p.program);
  *constants = json_incref(p.constants);
  prepared_free(&p);
  if (!*program) {
    json_decref(*constants);
    *constants = NULL;
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  return TL_OK;
}

/* ---- artifacts ------------------------------------------------------------------------ */

/* Makes an artifact, taking bytes (malloc'd) in every case. */
static tl_status artifact_make(const char *key, const char *id, const char *target, void *bytes, size_t n,
                               const char *metadata, tl_source source, tl_artifact **out, tl_error *err) {
  *out = NULL;
  tl_meta *meta = NULL;
  tl_status st = tl_meta_parse(metadata, &meta, err);
  if (st != TL_OK) {
    free(bytes);
    return st;
  }
  tl_artifact *a = calloc(1, sizeof *a);
  size_t ml = strlen(metadata) + 1;
  char *mt = malloc(ml);
  if (!a || !mt) {
    free(a);
    free(mt);
    free(bytes);
    tl_meta_free(meta);
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  memcpy(mt, metadata, ml);
  snprintf(a->key, sizeof a->key, "%s", key);
  snprintf(a->id, sizeof a->id, "%s", id);
  snprintf(a->target, sizeof a->target, "%s", target);
  a->bytes = bytes;
  a->n = n;
  a->metadata = mt;
  a->meta = meta;
  a->source = source;
  *out = a;
  return TL_OK;
}

void tl_artifact_free(tl_artifact *a) {
  if (!a)
    return;
  free(a->bytes);
  free(a->metadata);
  tl_meta_free(a->meta);
  free(a);
}

const char *tl_artifact_key(const tl_artifact *a) { return a ? a->key : NULL; }
const char *tl_artifact_id(const tl_artifact *a) { return a ? a->id : NULL; }
const char *tl_artifact_target(const tl_artifact *a) { return a ? a->target : NULL; }
const char *tl_artifact_metadata(const tl_artifact *a) { return a ? a->metadata : NULL; }
const char *tl_artifact_entry(const tl_artifact *a) { return a ? a->meta->entry : NULL; }
tl_source tl_artifact_source(const tl_artifact *a) { return a ? a->source : (tl_source)0; }
int tl_artifact_is_ptx(const tl_artifact *a) {
  return a && (strncmp(a->target, "compute_", 8) == 0 || a->meta->ptx);
}
const void *tl_artifact_bytes(const tl_artifact *a, size_t *n) {
  if (n)
    *n = a ? a->n : 0;
  return a ? a->bytes : NULL;
}
int tl_artifact_nparams(const tl_artifact *a) { return a ? a->meta->nparams : 0; }

tl_status tl_artifact_param(const tl_artifact *a, int i, tl_param_info *out, tl_error *err) {
  tl_error_clear(err);
  if (!a || !out || i < 0 || i >= a->meta->nparams)
    return tl_error_set(err, TL_INVALID_ARG, "no parameter %d (the kernel has %d)", i, a ? a->meta->nparams : 0);
  const tl_meta_param *q = &a->meta->params[i];
  out->name = q->name;
  out->is_tensor = q->is_tensor;
  out->dtype = tl_dtype_name(q->dtype);
  out->ndim = q->is_tensor ? q->ndim : 0;
  out->align = q->is_tensor ? q->align : 0;
  return TL_OK;
}

tl_status tl_artifact_grid(const tl_artifact *a, const tl_kernel_arg *args, int nargs, int64_t grid[3],
                           tl_error *err) {
  if (!a || !grid)
    return tl_error_set(err, TL_INVALID_ARG, "tl_artifact_grid: NULL argument");
  return tl_meta_grid(a->meta, args, nargs, grid, err);
}

tl_status tl_artifact_shape(const tl_artifact *a, int param, const tl_kernel_arg *args, int nargs,
                            int64_t shape[TL_KERNEL_DIMS_MAX], int *ndim, tl_error *err) {
  if (!a || !shape)
    return tl_error_set(err, TL_INVALID_ARG, "tl_artifact_shape: NULL argument");
  tl_status st = tl_meta_shape(a->meta, param, args, nargs, shape, err);
  if (ndim)
    *ndim = st == TL_OK ? a->meta->params[param].ndim : 0;
  return st;
}

/* ---- the local cache ---------------------------------------------------------------------- */

/* The local cache, opened on first use; NULL when off or unusable (logged once). */
static tl_cache *local(tl_client *c) {
  if (c->cache || !c->cache_path || c->cache_failed)
    return c->cache;
  tl_error e;
  tl_cache_options o = {0};
  o.max_bytes = c->cache_max_bytes;
  o.max_artifact_bytes = (int64_t)TL_CLIENT_ARTIFACT_MAX;
  if (tl_cache_open(c->cache_path, &o, &c->cache, &e) != TL_OK) {
    c->cache_failed = true;
    c->cache = NULL;
    tl_clog(c, "the local cache %s cannot be used (%s); going on without it", c->cache_path, e.message);
  }
  return c->cache;
}

tl_cache *tl_client_local(tl_client *c) { return local(c); }

char *tl_alias_manifest(const char *build, const char *request_text) {
  size_t m = strlen(TL_CLIENT_ALIAS_MAGIC), len = strlen(request_text);
  const char *nl = strstr(request_text, "\nprogram ");
  size_t keep = len - m;
  if (len + 80 > TL_CACHE_TEXT_MAX && nl) /* too large whole: the request's small parts */
    keep = (size_t)(nl - request_text) + 1 - m;
  size_t n = keep + m + 80;
  char *text = malloc(n);
  if (text)
    snprintf(text, n, "%sbuild %s\n%.*s", TL_CLIENT_ALIAS_MAGIC, build, (int)keep, request_text + m);
  return text;
}

char *tl_alias_request_text(const char *manifest, const char *key) {
  size_t m = strlen(TL_CLIENT_ALIAS_MAGIC);
  if (strncmp(manifest, TL_CLIENT_ALIAS_MAGIC, m) != 0 || strncmp(manifest + m, "build ", 6) != 0)
    return NULL;
  const char *rest = strchr(manifest + m, '\n');
  if (!rest)
    return NULL;
  rest++;
  size_t n = m + strlen(rest) + 1;
  char *text = malloc(n), got[65];
  if (!text)
    return NULL;
  snprintf(text, n, "%s%s", TL_CLIENT_ALIAS_MAGIC, rest);
  if (tl_sha256_hex(text, n - 1, got) != TL_OK || strcmp(got, key) != 0) {
    free(text);
    return NULL;
  }
  return text;
}

/* Reads "build KEY" from an alias manifest; false when it is not one. */
static bool alias_target_key(const char *manifest, char key[65]) {
  size_t m = strlen(TL_CLIENT_ALIAS_MAGIC);
  if (strncmp(manifest, TL_CLIENT_ALIAS_MAGIC, m) != 0)
    return false;
  const char *b = strstr(manifest + m, "\nbuild ");
  const char *line = strncmp(manifest + m, "build ", 6) == 0 ? manifest + m + 6 : b ? b + 7 : NULL;
  if (!line)
    return false;
  memcpy(key, line, 64);
  key[64] = 0;
  return tl_hex_is_sha256(key) && (line[64] == '\n' || line[64] == 0);
}

/* Looks key up in the local cache: true and *out on a hit.  A damaged
 * entry (bytes that no longer match, metadata that does not parse, an
 * alias that names no build) is dropped and counts as a miss. */
static bool local_lookup(tl_client *c, const char *key, tl_artifact **out) {
  *out = NULL;
  tl_cache *cache = local(c);
  if (!cache)
    return false;
  tl_error e;
  tl_cache_build *b = NULL;
  tl_status st = tl_cache_get_build(cache, key, &b, &e);
  if (st != TL_OK) {
    if (st != TL_NOT_FOUND)
      tl_clog(c, "local cache %s: %s", c->cache_path, e.message);
    c->stats.local_misses++;
    return false;
  }
  void *bytes = NULL;
  size_t n = 0;
  st = tl_cache_get_artifact(cache, b->artifact_id, &bytes, &n, &e);
  if (st != TL_OK) {
    if (st == TL_NOT_FOUND) { /* the cache re-hashed the bytes and dropped them with their builds */
      tl_clog(c, "local cache %s: the binary of %s (%s) was damaged or missing; dropped, fetching it again",
                     c->cache_path, key, b->target);
      c->stats.local_dropped++;
      tl_cache_remove(cache, key, NULL);
    } else
      tl_clog(c, "local cache %s: %s", c->cache_path, e.message);
    tl_cache_build_free(b);
    c->stats.local_misses++;
    return false;
  }
  char build_key[65];
  snprintf(build_key, sizeof build_key, "%s", key);
  bool alias_ok = strncmp(b->manifest, TL_CLIENT_ALIAS_MAGIC, strlen(TL_CLIENT_ALIAS_MAGIC)) != 0 ||
                  alias_target_key(b->manifest, build_key);
  tl_artifact *a = NULL;
  if (alias_ok)
    st = artifact_make(build_key, b->artifact_id, b->target, bytes, n, b->metadata, TL_SOURCE_LOCAL, &a, &e);
  else
    free(bytes);
  if (!alias_ok || st != TL_OK) {
    tl_clog(c, "local cache %s: the entry %s (%s) is damaged (%s); dropped, fetching it again", c->cache_path,
                   key, b->target, alias_ok ? e.message : "its request names no build");
    tl_cache_remove(cache, key, NULL);
    c->stats.local_dropped++;
    c->stats.local_misses++;
    tl_cache_build_free(b);
    return false;
  }
  tl_cache_build_free(b);
  c->stats.local_hits++;
  *out = a;
  return true;
}

/* Stores one build row (best effort: a failure is logged). */
static void local_put(tl_client *c, const char *key, const char *manifest, const tl_artifact *a, int64_t compile_ms) {
  tl_cache *cache = local(c);
  if (!cache)
    return;
  tl_cache_build b = {0};
  snprintf(b.key, sizeof b.key, "%s", key);
  snprintf(b.artifact_id, sizeof b.artifact_id, "%s", a->id);
  b.manifest = manifest;
  b.target = a->target;
  b.metadata = a->metadata;
  b.compile_ms = compile_ms > 0 ? compile_ms : 0;
  tl_error e;
  if (tl_cache_put(cache, &b, a->bytes, a->n, &e) != TL_OK)
    tl_clog(c, "local cache %s: cannot store %s: %s", c->cache_path, key, e.message);
}

static void local_evict(tl_client *c) {
  tl_cache *cache = local(c);
  tl_error e;
  if (cache && c->cache_max_bytes > 0 && tl_cache_evict_step(cache, 0, NULL, &e) != TL_OK)
    tl_clog(c, "local cache %s: eviction failed: %s", c->cache_path, e.message);
}

/* ---- the server's compiler identity ------------------------------------------------------ */

/* The name of the local cache's note that remembers the compiler of c's server. */
static void ident_note_name(const tl_client *c, char name[TL_CACHE_NOTE_NAME_MAX + 1]) {
  snprintf(name, TL_CACHE_NOTE_NAME_MAX + 1, "compiler %.480s", c->server);
}

/* An identity as a server gives it: 1 to TL_CLIENT_COMPILER_ID_MAX printable ASCII characters. */
static bool ident_valid(const char *id) {
  size_t n = id ? strlen(id) : 0;
  if (n == 0 || n > TL_CLIENT_COMPILER_ID_MAX)
    return false;
  for (size_t i = 0; i < n; i++)
    if (id[i] < 0x20 || id[i] > 0x7e)
      return false;
  return true;
}

/* Records id, from an answer of c's server, as its compiler, and remembers
 * it in the local cache (for offline starts). */
static void ident_learn(tl_client *c, const char *id) {
  if (!ident_valid(id) || (c->compiler_id_known && strcmp(c->compiler_id, id) == 0))
    return;
  if (c->compiler_id[0] && strcmp(c->compiler_id, id) != 0)
    tl_clog(c, "the server %s runs the compiler %s, no longer %s: the local cache's builds of the old one are not used",
            c->server, id, c->compiler_id);
  snprintf(c->compiler_id, sizeof c->compiler_id, "%s", id);
  c->compiler_id_known = true;
  tl_cache *cache = local(c);
  if (!cache)
    return;
  char name[TL_CACHE_NOTE_NAME_MAX + 1], *had = NULL;
  ident_note_name(c, name);
  tl_error e;
  if ((tl_cache_note_get(cache, name, &had, NULL) != TL_OK || strcmp(had, id) != 0) &&
      tl_cache_note_set(cache, name, id, &e) != TL_OK)
    tl_clog(c, "local cache %s: cannot remember the server's compiler: %s", c->cache_path, e.message);
  free(had);
}

/* The compiler identity that c's request keys are made with ("" when none
 * is known): the one learned from the server by this handle; else, once,
 * GET /v1/info (one try without retries, at most IDENT_PROBE_TIMEOUT_MS,
 * so that an offline start does not wait through back-offs); else the one
 * the local cache remembers for this server (an offline start). */
static const char *ident_current(tl_client *c) {
  if (c->compiler_id_known)
    return c->compiler_id;
  if (!c->offline && !c->compiler_id_probed) {
    c->compiler_id_probed = true;
    int retries = c->retries;
    long timeout = c->timeout_ms;
    c->retries = 0;
    if (timeout <= 0 || timeout > IDENT_PROBE_TIMEOUT_MS)
      c->timeout_ms = IDENT_PROBE_TIMEOUT_MS;
    tl_http_response r;
    tl_status st = tl_http_request(c, "GET", "/v1/info", NULL, 0, INFO_ANSWER_MAX, &r, NULL);
    c->retries = retries;
    c->timeout_ms = timeout;
    if (st == TL_OK && r.status == 200) {
      json_t *doc = json_loadb(r.body ? r.body : "", r.len, 0, NULL);
      ident_learn(c, json_string_value(json_object_get(doc, "compiler")));
      json_decref(doc);
    }
    tl_http_response_free(&r);
    if (c->compiler_id_known)
      return c->compiler_id;
  }
  tl_cache *cache = local(c);
  if (!c->compiler_id[0] && cache) {
    char name[TL_CACHE_NOTE_NAME_MAX + 1], *id = NULL;
    ident_note_name(c, name);
    if (tl_cache_note_get(cache, name, &id, NULL) == TL_OK && ident_valid(id))
      snprintf(c->compiler_id, sizeof c->compiler_id, "%s", id);
    free(id);
  }
  return c->compiler_id;
}

/* Stores a's build under its key (unless already there, perhaps with the
 * real manifest) and, when alias_key is given, the request's alias. */
static void local_store(tl_client *c, const tl_artifact *a, const char *manifest, const char *alias_key,
                        const char *alias_text, int64_t compile_ms) {
  tl_cache *cache = local(c);
  if (!cache)
    return;
  tl_cache_build *have = NULL;
  if (manifest || tl_cache_get_build(cache, a->key, &have, NULL) != TL_OK) {
    char placeholder[256];
    snprintf(placeholder, sizeof placeholder,
             "tl-client-build 1\nbuild %s\nmanifest not fetched (GET /v1/kernels/%s on the server gives it)\n", a->key,
             a->key);
    local_put(c, a->key, manifest ? manifest : placeholder, a, compile_ms);
  }
  tl_cache_build_free(have);
  if (alias_key) {
    /* the alias's manifest names the build and holds the request (so that
     * `tlclient bundle create` can ship it, re-hashable) */
    char *text = tl_alias_manifest(a->key, alias_text);
    if (text && strlen(text) <= TL_CACHE_TEXT_MAX)
      local_put(c, alias_key, text, a, compile_ms);
    free(text);
  }
  local_evict(c);
}

/* ---- the server ----------------------------------------------------------------------------- */

/* Verifies that bytes[0..n) hash to id. */
static tl_status verify(const void *bytes, size_t n, const char *id, const char *from, tl_error *err) {
  char got[65];
  tl_status st = tl_sha256_hex(bytes, n, got);
  if (st != TL_OK)
    return tl_error_set(err, st, "SHA-256 failed");
  if (strcmp(got, id) != 0)
    return tl_error_set(err, TL_CORRUPT, "%s sent %zu bytes for artifact %s that hash to %s: refused", from, n, id,
                        got);
  return TL_OK;
}

/* The bytes of artifact id: the local cache, else the server; verified.
 * size is the expected size, or -1 when unknown. */
static tl_status fetch_bytes(tl_client *c, const char *id, int64_t size, void **bytes, size_t *n, bool *from_local,
                             tl_error *err) {
  *bytes = NULL;
  *n = 0;
  *from_local = false;
  tl_cache *cache = local(c);
  if (cache && tl_cache_get_artifact(cache, id, bytes, n, NULL) == TL_OK) {
    *from_local = true;
    return TL_OK;
  }
  char path[128];
  snprintf(path, sizeof path, "/v1/artifacts/%s", id);
  tl_status st = TL_OK;
  for (int attempt = 0; attempt < 2; attempt++) { /* one more try after a damaged transfer */
    tl_http_response r;
    st = tl_http_request(c, "GET", path, NULL, 0, TL_CLIENT_ARTIFACT_MAX, &r, err);
    if (st == TL_OK && r.status != 200) {
      char what[256];
      snprintf(what, sizeof what, "GET %s%s", c->server, path);
      st = r.status == 404 ? tl_error_set(err, TL_NOT_FOUND, "the server %s has no artifact %s", c->server, id)
                           : tl_http_error(&r, what, err);
    }
    if (st != TL_OK) {
      tl_http_response_free(&r);
      return st;
    }
    char from[128];
    snprintf(from, sizeof from, "the server %.100s", c->server);
    if (size >= 0 && (int64_t)r.len != size)
      st = tl_error_set(err, TL_CORRUPT, "%s sent %zu bytes for artifact %s of %lld bytes: refused", from, r.len, id,
                        (long long)size);
    else
      st = verify(r.body ? r.body : "", r.len, id, from, err);
    if (st == TL_OK) {
      c->stats.bytes_fetched += (int64_t)r.len;
      *n = r.len;
      *bytes = r.body ? r.body : malloc(1);
      r.body = NULL;
      tl_http_response_free(&r);
      return *bytes ? TL_OK : tl_error_set(err, TL_NOMEM, "out of memory");
    }
    tl_http_response_free(&r);
    tl_clog(c, "%s", err ? err->message : "a damaged artifact was refused");
  }
  return st;
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

void tl_target_results_free(tl_target_result *r, int n) {
  if (!r)
    return;
  for (int i = 0; i < n; i++) {
    free((char *)r[i].target);
    free((char *)r[i].message);
    free((char *)r[i].metadata);
  }
  free(r);
}

/* One result object of a compile answer into *out. */
static tl_status parse_result(json_t *o, const char *want_target, long http, const char *name, const char *server,
                              tl_target_result *out) {
  tl_error e;
  tl_error_clear(&e);
  out->target = dup_str(want_target);
  const char *target = json_string_value(json_object_get(o, "target"));
  const char *status = json_string_value(json_object_get(o, "status"));
  if (!out->target)
    return TL_NOMEM;
  if (!json_is_object(o) || !target || strcmp(target, want_target) != 0 || !status) {
    out->status = TL_CORRUPT;
    out->message = dup_str("the server's answer does not match the request (results out of order or malformed)");
    return out->message ? TL_OK : TL_NOMEM;
  }
  if (strcmp(status, "ok") != 0) {
    char w[512];
    snprintf(w, sizeof w, "compile of %s for %s on %.300s", name, want_target, server);
    json_t *eobj = json_object_get(o, "error");
    out->status = json_is_object(eobj) ? tl_http_error_json(eobj, json_object_get(o, "diagnostics"), http, w, &e)
                                       : tl_error_set(&e, TL_INTERNAL, "%s: failed without saying why", w);
    out->message = dup_str(e.message);
    return out->message ? TL_OK : TL_NOMEM;
  }
  const char *key = json_string_value(json_object_get(o, "key"));
  const char *art = json_string_value(json_object_get(o, "artifact"));
  json_t *size = json_object_get(o, "size"), *meta = json_object_get(o, "meta");
  if (!tl_hex_is_sha256(key) || !tl_hex_is_sha256(art) || !json_is_integer(size) || json_integer_value(size) < 1 ||
      json_integer_value(size) > (json_int_t)TL_CLIENT_ARTIFACT_MAX || !json_is_object(meta)) {
    out->status = TL_CORRUPT;
    out->message = dup_str("the server's answer lacks a valid key, artifact, size or meta");
    return out->message ? TL_OK : TL_NOMEM;
  }
  out->status = TL_OK;
  out->message = dup_str("");
  memcpy(out->key, key, 65);
  memcpy(out->artifact, art, 65);
  out->size = (int64_t)json_integer_value(size);
  out->cached = json_is_true(json_object_get(o, "cached"));
  out->compile_ms = json_number_value(json_object_get(o, "compile_ms"));
  out->metadata = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS);
  return out->message && out->metadata ? TL_OK : TL_NOMEM;
}

/* POST /v1/compile for targets[0..n).  TL_OK with *results when the server
 * answered per target; else the whole request's failure. */
static tl_status post_compile(tl_client *c, const prepared *p, const char *const *targets, int n,
                              tl_target_result **results, tl_error *err) {
  *results = NULL;
  char what[512];
  int k = snprintf(what, sizeof what, "compile of %s for ", p->name);
  for (int i = 0; i < n && k < (int)sizeof what - 64; i++)
    k += snprintf(what + k, sizeof what - (size_t)k, "%s%s", i ? ", " : "", targets[i]);
  snprintf(what + k, sizeof what - (size_t)k, " on %.200s", c->server);
  json_t *body = json_object(), *tl = json_array();
  if (!body || !tl) {
    json_decref(body);
    json_decref(tl);
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  json_object_set(body, "program", p->program);
  for (int i = 0; i < n; i++)
    json_array_append_new(tl, json_string(targets[i]));
  json_object_set_new(body, "targets", tl);
  if (json_object_size(p->constants))
    json_object_set(body, "constants", p->constants);
  if (p->options)
    json_object_set(body, "options", p->options);
  char *text = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  if (!text)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  tl_http_response r;
  tl_error e;
  tl_status st = tl_http_request(c, "POST", "/v1/compile", text, strlen(text), JSON_ANSWER_MAX, &r, &e);
  free(text);
  if (st != TL_OK) {
    tl_error_set(err, st, "%s: %s", what, e.message);
    tl_http_response_free(&r);
    return st;
  }
  json_t *doc = json_loadb(r.body ? r.body : "", r.len, 0, NULL);
  json_t *arr = json_object_get(doc, "results");
  if (!json_is_array(arr) || json_array_size(arr) != (size_t)n) {
    st = r.status == 200 ? tl_error_set(err, TL_CORRUPT, "%s: the answer has no results for every target", what)
                         : tl_http_error(&r, what, err);
    json_decref(doc);
    tl_http_response_free(&r);
    return st;
  }
  tl_target_result *res = calloc((size_t)n, sizeof *res);
  st = res ? TL_OK : TL_NOMEM;
  for (int i = 0; i < n && st == TL_OK; i++) {
    json_t *o = json_array_get(arr, (size_t)i);
    st = parse_result(o, targets[i], r.status, p->name, c->server, &res[i]);
    if (st == TL_OK && res[i].status == TL_OK) /* the server's compiler, as its builds name it */
      ident_learn(c, json_string_value(json_object_get(
                         json_object_get(json_object_get(o, "meta"), "versions"), "compiler")));
  }
  json_decref(doc);
  tl_http_response_free(&r);
  if (st != TL_OK) {
    tl_target_results_free(res, n);
    return tl_error_set(err, st, "out of memory");
  }
  *results = res;
  return TL_OK;
}

/* ---- entry points ------------------------------------------------------------------------------ */

static void copy_err(tl_error *dst, const tl_error *src) {
  if (dst)
    *dst = *src;
}

/* A successful result into an artifact; stores it locally (and the alias). */
static tl_status materialize(tl_client *c, const tl_target_result *r, const char *alias_key, const char *alias_text,
                             tl_artifact **out, tl_error *err) {
  void *bytes;
  size_t n;
  bool from_local;
  tl_status st = fetch_bytes(c, r->artifact, r->size, &bytes, &n, &from_local, err);
  if (st != TL_OK)
    return st;
  st = artifact_make(r->key, r->artifact, r->target, bytes, n, r->metadata,
                     r->cached ? TL_SOURCE_SERVER_CACHE : TL_SOURCE_COMPILED, out, err);
  if (st != TL_OK)
    return st;
  local_store(c, *out, NULL, alias_key, alias_text, (int64_t)r->compile_ms);
  return TL_OK;
}

tl_status tl_client_fetch_result(tl_client *c, const tl_target_result *r, tl_artifact **out, tl_error *err) {
  tl_error_clear(err);
  if (out)
    *out = NULL;
  if (!c || !r || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_fetch_result: NULL argument");
  if (r->status != TL_OK || !r->metadata)
    return tl_error_set(err, TL_INVALID_ARG, "the result for %s is a failure: %s", r->target ? r->target : "?",
                        r->message ? r->message : "");
  return materialize(c, r, NULL, NULL, out, err);
}

tl_status tl_client_fetch_result_for(tl_client *c, const tl_client_request *req, const tl_target_result *r,
                                     tl_artifact **out, tl_error *err) {
  tl_error_clear(err);
  if (out)
    *out = NULL;
  if (!c || !req || !r || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_fetch_result_for: NULL argument");
  if (r->status != TL_OK || !r->metadata)
    return tl_error_set(err, TL_INVALID_ARG, "the result for %s is a failure: %s", r->target ? r->target : "?",
                        r->message ? r->message : "");
  prepared p;
  tl_status st = prepare(req, &p, err);
  if (st != TL_OK)
    return st;
  char rkey[65], *rtext = NULL;
  if ((st = key_of(&p, r->target, ident_current(c), rkey, &rtext, err)) == TL_OK)
    st = materialize(c, r, rkey, rtext, out, err);
  free(rtext);
  prepared_free(&p);
  return st;
}

/* Server unreachable: the build key computed here (NVRTC needed) and the
 * local cache.  True on a hit. */
static bool offline_by_build_key(tl_client *c, const tl_client_request *req, const char *target, tl_artifact **out) {
  if (!local(c))
    return false;
  tl_define defs[TL_CLIENT_DEFINES_MAX];
  for (int i = 0; i < req->ndefines; i++)
    defs[i] = (tl_define){req->defines[i].name, req->defines[i].value};
  tl_compile_request creq = {.program = req->program,
                             .program_len = req->program_len ? req->program_len : strlen(req->program),
                             .defines = defs,
                             .ndefines = req->ndefines,
                             .target = target,
                             .options_json = req->options_json};
  tl_arena *arena = tl_arena_new();
  tl_diags diags = {.arena = arena};
  char key[65], *manifest = NULL;
  tl_error e;
  tl_status st = tl_compile_key(&creq, key, &manifest, &diags, &e);
  free(manifest);
  tl_arena_free(arena);
  if (st != TL_OK)
    return false;
  if (!local_lookup(c, key, out))
    return false;
  tl_clog(c, "%s; found %s for %s in the local cache by the build key computed here",
          c->offline ? "offline" : "the server is unreachable", key, target);
  return true;
}

/* The bundle's build i (tl_client_set_bundle) as an artifact. */
static bool bundle_build(tl_client *c, int i, tl_artifact **out) {
  const tl_bundle_build *bd = &c->bundle->builds[i];
  const tl_bundle_artifact *a = &c->bundle->artifacts[bd->artifact_index];
  void *bytes = malloc(a->n);
  if (!bytes)
    return false;
  memcpy(bytes, a->bytes, a->n);
  tl_error e;
  if (artifact_make(bd->key, a->id, bd->target, bytes, a->n, bd->metadata, TL_SOURCE_BUNDLE, out, &e) != TL_OK) {
    tl_clog(c, "the bundle %s: the build %s cannot be used: %s", c->bundle_path, bd->key, e.message);
    return false;
  }
  tl_clog(c, "found %s for %s in the bundle %s", bd->key, bd->target, c->bundle_path);
  return true;
}

/* The bundle's build of p for target: the request's key made with the
 * compiler identity of the bundle's builds.  True on a hit. */
static bool bundle_lookup(tl_client *c, const prepared *p, const char *target, tl_artifact **out) {
  *out = NULL;
  char key[65];
  if (!c->bundle || !c->bundle->compiler[0] || key_of(p, target, c->bundle->compiler, key, NULL, NULL) != TL_OK)
    return false;
  int r = tl_bundle_find_request(c->bundle, key);
  return r >= 0 && bundle_build(c, c->bundle->requests[r].build_index, out);
}

/* Server unreachable: the request keys made with the compilers of the
 * bundles imported into the local cache (other than the one tried
 * already).  True on a hit. */
static bool imported_lookup(tl_client *c, const prepared *p, const char *target, const char *tried,
                            tl_artifact **out) {
  tl_cache *cache = local(c);
  char *list = NULL;
  if (!cache || tl_cache_note_get(cache, TL_NOTE_IMPORTED_COMPILERS, &list, NULL) != TL_OK)
    return false;
  bool hit = false;
  for (char *save = NULL, *id = strtok_r(list, "\n", &save); id && !hit; id = strtok_r(NULL, "\n", &save)) {
    char key[65];
    if ((tried && strcmp(id, tried) == 0) || key_of(p, target, id, key, NULL, NULL) != TL_OK)
      continue;
    if ((hit = local_lookup(c, key, out)))
      tl_clog(c, "%s; found %s for %s in the local cache, imported from a bundle of %s",
              c->offline ? "offline" : "the server is unreachable", (*out)->key, target, id);
  }
  free(list);
  return hit;
}

/* What an unreachable server leaves: the build key computed here, or an
 * imported bundle's request. */
static bool offline_lookup(tl_client *c, const tl_client_request *req, const prepared *p, const char *target,
                           tl_artifact **out) {
  return offline_by_build_key(c, req, target, out) || imported_lookup(c, p, target, c->compiler_id, out);
}

static tl_status offline_miss_cache(tl_client *c, const char *name, const char *target, tl_error *err) {
  if (!c->cache_path)
    return tl_error_set(err, TL_NETWORK, "offline, and there is no local cache: no build of %s for %s", name, target);
  if (!c->compiler_id[0])
    return tl_error_set(err, TL_NETWORK,
                        "offline: the local cache %s has no build of %s for %s (it has never been filled from the "
                        "server %s: run tlclient prebuild --fetch or the application once online)",
                        c->cache_path, name, target, c->server);
  return tl_error_set(err, TL_NETWORK,
                      "offline: the local cache %s has no build of %s for %s by the compiler %s (the one the "
                      "server ran when last reached)",
                      c->cache_path, name, target, c->compiler_id);
}

/* The error of an offline request that the local cache cannot answer
 * (and the bundle, when one is set: said at the end). */
static tl_status offline_miss(tl_client *c, const char *name, const char *target, tl_error *err) {
  tl_status st = offline_miss_cache(c, name, target, err);
  if (err && c->bundle_path) {
    size_t l = strlen(err->message);
    snprintf(err->message + l, sizeof err->message - l, "; nor has the bundle %s", c->bundle_path);
  }
  return st;
}

/* tl_client_get's work for one target, local lookup optional. */
static tl_status get_one(tl_client *c, const tl_client_request *req, const prepared *p, const char *target,
                         bool look_local, tl_artifact **out, tl_error *err) {
  char rkey[65], *rtext = NULL, used[TL_CLIENT_COMPILER_ID_MAX + 1];
  snprintf(used, sizeof used, "%s", ident_current(c));
  tl_status st = key_of(p, target, used, rkey, &rtext, err);
  if (st != TL_OK)
    return st;
  if (look_local && local_lookup(c, rkey, out)) {
    free(rtext);
    return TL_OK;
  }
  if (c->offline) {
    free(rtext);
    return offline_lookup(c, req, p, target, out) ? TL_OK : offline_miss(c, p->name, target, err);
  }
  tl_target_result *res = NULL;
  const char *targets[1] = {target};
  st = post_compile(c, p, targets, 1, &res, err);
  if (st == TL_NETWORK || st == TL_BUSY) {
    if (offline_lookup(c, req, p, target, out)) {
      free(rtext);
      return TL_OK;
    }
    if (err) {
      size_t l = strlen(err->message);
      snprintf(err->message + l, sizeof err->message - l, "; and the local cache %s has no build of %s for %s%s%s%s%s",
               c->cache_path ? c->cache_path : "(off)", p->name, target, c->compiler_id[0] ? " by the compiler " : "",
               c->compiler_id, c->bundle_path ? "; nor has the bundle " : "", c->bundle_path ? c->bundle_path : "");
    }
  } else if (st == TL_OK) {
    if (res[0].status != TL_OK)
      st = tl_error_set(err, res[0].status, "%s", res[0].message);
    else {
      if (strcmp(used, c->compiler_id) != 0) { /* the answer named another compiler: store under its key */
        free(rtext);
        rtext = NULL;
        st = key_of(p, target, c->compiler_id, rkey, &rtext, err);
      }
      if (st == TL_OK)
        st = materialize(c, &res[0], rkey, rtext, out, err);
    }
  }
  tl_target_results_free(res, 1);
  free(rtext);
  return st;
}

/* The device description tuning uses for calls that know no device. */
static const char *tuning_device(const tl_client *c) {
  return c->tuning && strcmp(c->tuning, "auto") != 0 ? c->tuning : NULL;
}

tl_status tl_client_get(tl_client *c, const tl_client_request *req, const char *target, tl_artifact **out,
                        tl_error *err) {
  tl_error_clear(err);
  if (out)
    *out = NULL;
  if (!c || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_get: NULL argument");
  tl_tuned t;
  if (tl_tuning_apply(c, req, tuning_device(c), &t)) {
    c->tuning_applied = true;
    tl_status tst = tl_client_get(c, &t.req, target, out, err);
    c->tuning_applied = false;
    tl_tuned_free(&t);
    return tst;
  }
  tl_status st = tl_target_check(target, err);
  if (st != TL_OK)
    return st;
  prepared p;
  if ((st = prepare(req, &p, err)) != TL_OK)
    return st;
  st = bundle_lookup(c, &p, target, out) ? TL_OK : get_one(c, req, &p, target, true, out, err);
  prepared_free(&p);
  return st;
}

/* The newest compute_NN (no suffix) at most arch among the server's targets, or "". */
static void best_ptx(const char *info, int arch, char out[TL_CLIENT_TARGET_MAX + 1]) {
  out[0] = 0;
  json_t *doc = json_loads(info, 0, NULL);
  json_t *targets = json_object_get(doc, "targets");
  int best = -1;
  size_t i;
  json_t *t;
  json_array_foreach(targets, i, t) {
    const char *s = json_string_value(t);
    if (!s || strncmp(s, "compute_", 8) != 0)
      continue;
    char *end;
    long v = strtol(s + 8, &end, 10);
    if (*end || end == s + 8 || v > arch || v <= best)
      continue;
    best = (int)v;
  }
  if (best >= 0)
    snprintf(out, TL_CLIENT_TARGET_MAX + 1, "compute_%d", best);
  json_decref(doc);
}

tl_status tl_client_get_for_arch(tl_client *c, const tl_client_request *req, int arch, tl_artifact **out,
                                 tl_error *err) {
  tl_error_clear(err);
  if (out)
    *out = NULL;
  if (!c || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_get_for_arch: NULL argument");
  tl_tuned t;
  if (tl_tuning_apply(c, req, tuning_device(c), &t)) {
    c->tuning_applied = true;
    tl_status tst = tl_client_get_for_arch(c, &t.req, arch, out, err);
    c->tuning_applied = false;
    tl_tuned_free(&t);
    return tst;
  }
  if (arch < 10 || arch > 9999)
    return tl_error_set(err, TL_INVALID_ARG, "architecture %d is not a compute capability (e.g. 90)", arch);
  char sm[TL_CLIENT_TARGET_MAX + 1], plain[TL_CLIENT_TARGET_MAX + 1], ptx[TL_CLIENT_TARGET_MAX + 1];
  tl_target_for_arch(arch, sm, sizeof sm); /* sm_90a on a 9.0 GPU: wgmma */
  snprintf(plain, sizeof plain, "sm_%d", arch);
  snprintf(ptx, sizeof ptx, "compute_%d", arch);
  bool variant = strcmp(sm, plain) != 0;
  prepared p;
  tl_status st = prepare(req, &p, err);
  if (st != TL_OK)
    return st;
  /* the bundle's, in the same order of preference, with no network */
  if (bundle_lookup(c, &p, sm, out) || (variant && bundle_lookup(c, &p, plain, out)) || bundle_lookup(c, &p, ptx, out)) {
    prepared_free(&p);
    return TL_OK;
  }
  /* a warm start: the binary for sm_ARCH (or the PTX stored under its
   * request when the server did not offer sm_ARCH) from the local cache */
  char k1[65], k2[65], k3[65], *k1text = NULL;
  const char *id = ident_current(c);
  if ((st = key_of(&p, sm, id, k1, &k1text, err)) != TL_OK || (st = key_of(&p, ptx, id, k2, NULL, err)) != TL_OK ||
      (st = key_of(&p, plain, id, k3, NULL, err)) != TL_OK) {
    free(k1text);
    prepared_free(&p);
    return st;
  }
  if (local_lookup(c, k1, out)) {
    free(k1text);
    prepared_free(&p);
    return TL_OK;
  }
  tl_error e;
  tl_error_clear(&e);
  st = get_one(c, req, &p, sm, false, out, &e);
  if (st == TL_UNSUPPORTED && variant && strncmp(e.pointer, "/targets", 8) == 0) {
    /* the server does not offer sm_ARCHa: sm_ARCH runs too, on the portable paths */
    tl_clog(c, "the server %s does not offer %s; trying %s", c->server, sm, plain);
    tl_error_clear(&e);
    st = get_one(c, req, &p, plain, false, out, &e);
  }
  if ((st == TL_NETWORK || st == TL_BUSY) && variant &&
      (local_lookup(c, k3, out) || offline_lookup(c, req, &p, plain, out))) {
    /* offline: a cubin for sm_ARCH (a farm that prebuilt that one) runs too */
    tl_clog(c, "%s; using %s from the local cache", c->offline ? "offline" : "the server is unreachable", plain);
    st = TL_OK;
  } else if (st == TL_NETWORK || st == TL_BUSY) {
    /* offline: PTX for this architecture will do */
    if (local_lookup(c, k2, out) || offline_lookup(c, req, &p, ptx, out)) {
      tl_clog(c, "%s; using %s from the local cache", c->offline ? "offline" : "the server is unreachable", ptx);
      st = TL_OK;
    }
  } else if (st == TL_UNSUPPORTED && strncmp(e.pointer, "/targets", 8) == 0) {
    /* the server does not offer sm_ARCH: the newest PTX it has that the JIT can take */
    char *info = NULL;
    tl_error ie;
    if (tl_client_info(c, &info, &ie) != TL_OK) {
      st = ie.code;
      e = ie;
    } else {
      char best[TL_CLIENT_TARGET_MAX + 1];
      best_ptx(info, arch, best);
      if (!best[0])
        st = tl_error_set(&e, TL_UNSUPPORTED, "the server %s offers neither %s nor PTX (compute_NN) for a GPU of "
                          "architecture %d", c->server, sm, arch);
      else {
        tl_clog(c, "the server %s does not offer %s; using PTX for %s", c->server, sm, best);
        st = get_one(c, req, &p, best, strcmp(best, ptx) != 0, out, &e);
        /* the next start on this GPU finds the PTX under the sm_ARCH request, with no network */
        if (st == TL_OK) {
          free(k1text); /* keyed again: the compile may have taught another compiler */
          k1text = NULL;
          if (key_of(&p, sm, c->compiler_id, k1, &k1text, NULL) == TL_OK)
            local_store(c, *out, NULL, k1, k1text, 0);
        }
      }
    }
    free(info);
  }
  free(k1text);
  prepared_free(&p);
  if (st != TL_OK)
    copy_err(err, &e);
  return st;
}

tl_status tl_client_compile(tl_client *c, const tl_client_request *req, const char *const *targets, int ntargets,
                            tl_target_result **results, tl_error *err) {
  tl_error_clear(err);
  if (results)
    *results = NULL;
  if (!c || !results || (ntargets && !targets))
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_compile: NULL argument");
  if (ntargets < 1 || ntargets > TL_CLIENT_TARGETS_MAX)
    return tl_error_set(err, TL_INVALID_ARG, "a compile names 1 to %d targets, not %d", TL_CLIENT_TARGETS_MAX,
                        ntargets);
  tl_status st;
  for (int i = 0; i < ntargets; i++) {
    if ((st = tl_target_check(targets[i], err)) != TL_OK)
      return st;
    for (int j = 0; j < i; j++)
      if (strcmp(targets[i], targets[j]) == 0)
        return tl_error_set(err, TL_INVALID_ARG, "target %s is named twice", targets[i]);
  }
  prepared p;
  if ((st = prepare(req, &p, err)) != TL_OK)
    return st;
  st = post_compile(c, &p, targets, ntargets, results, err);
  prepared_free(&p);
  return st;
}

tl_status tl_client_fetch_key(tl_client *c, const char *key, tl_artifact **out, tl_error *err) {
  tl_error_clear(err);
  if (out)
    *out = NULL;
  if (!c || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_fetch_key: NULL argument");
  if (!tl_hex_is_sha256(key))
    return tl_error_set(err, TL_INVALID_ARG, "'%.80s' is not a build key (64 lowercase hexadecimal characters)",
                        key ? key : "(null)");
  if (local_lookup(c, key, out))
    return TL_OK;
  int bi = tl_bundle_find_build(c->bundle, key);
  if (bi >= 0 && bundle_build(c, bi, out))
    return TL_OK;
  char path[128], what[512];
  snprintf(path, sizeof path, "/v1/kernels/%s", key);
  snprintf(what, sizeof what, "GET %.200s%s", c->server, path);
  tl_http_response r;
  tl_error e;
  tl_status st = tl_http_request(c, "GET", path, NULL, 0, JSON_ANSWER_MAX, &r, &e);
  if (st != TL_OK) {
    if (st == TL_NETWORK || st == TL_BUSY)
      tl_error_set(err, st, "%s; and the local cache %s has no build %s", e.message,
                   c->cache_path ? c->cache_path : "(off)", key);
    else
      copy_err(err, &e);
    tl_http_response_free(&r);
    return st;
  }
  if (r.status != 200) {
    st = r.status == 404 ? tl_error_set(err, TL_NOT_FOUND, "the server %s has no build with key %s", c->server, key)
                         : tl_http_error(&r, what, err);
    tl_http_response_free(&r);
    return st;
  }
  json_t *doc = json_loadb(r.body ? r.body : "", r.len, 0, NULL);
  tl_http_response_free(&r);
  const char *k = json_string_value(json_object_get(doc, "key"));
  const char *target = json_string_value(json_object_get(doc, "target"));
  const char *art = json_string_value(json_object_get(doc, "artifact"));
  const char *manifest = json_string_value(json_object_get(doc, "manifest"));
  json_t *size = json_object_get(doc, "size"), *meta = json_object_get(doc, "meta");
  if (!k || strcmp(k, key) != 0 || tl_target_check(target, NULL) != TL_OK || !tl_hex_is_sha256(art) ||
      !json_is_integer(size) || !json_is_object(meta) || !manifest) {
    json_decref(doc);
    return tl_error_set(err, TL_CORRUPT, "%s: the answer is not a build of this key", what);
  }
  char *mtext = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS);
  void *bytes = NULL;
  size_t n = 0;
  bool from_local;
  st = mtext ? fetch_bytes(c, art, (int64_t)json_integer_value(size), &bytes, &n, &from_local, err)
             : tl_error_set(err, TL_NOMEM, "out of memory");
  if (st == TL_OK)
    st = artifact_make(key, art, target, bytes, n, mtext, TL_SOURCE_SERVER_CACHE, out, err);
  if (st == TL_OK)
    local_store(c, *out, manifest, NULL, NULL, (int64_t)json_integer_value(json_object_get(doc, "compile_ms")));
  free(mtext);
  json_decref(doc);
  return st;
}

tl_status tl_client_fetch_artifact(tl_client *c, const char *id, void **bytes, size_t *n, tl_error *err) {
  tl_error_clear(err);
  if (bytes)
    *bytes = NULL;
  if (n)
    *n = 0;
  if (!c || !bytes || !n)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_fetch_artifact: NULL argument");
  if (!tl_hex_is_sha256(id))
    return tl_error_set(err, TL_INVALID_ARG, "'%.80s' is not an artifact id (64 lowercase hexadecimal characters)",
                        id ? id : "(null)");
  bool from_local;
  tl_error e;
  tl_status st = fetch_bytes(c, id, -1, bytes, n, &from_local, &e);
  if (st == TL_NETWORK || st == TL_BUSY)
    tl_error_set(err, st, "%s; and the local cache %s has no artifact %s", e.message,
                 c->cache_path ? c->cache_path : "(off)", id);
  else if (st != TL_OK)
    copy_err(err, &e);
  return st;
}

tl_status tl_client_info(tl_client *c, char **json, tl_error *err) {
  tl_error_clear(err);
  if (json)
    *json = NULL;
  if (!c || !json)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_info: NULL argument");
  tl_http_response r;
  tl_status st = tl_http_request(c, "GET", "/v1/info", NULL, 0, INFO_ANSWER_MAX, &r, err);
  if (st == TL_OK && r.status != 200) {
    char what[300];
    snprintf(what, sizeof what, "GET %.200s/v1/info", c->server);
    st = tl_http_error(&r, what, err);
  }
  if (st == TL_OK) {
    json_t *doc = json_loadb(r.body ? r.body : "", r.len, 0, NULL);
    ident_learn(c, json_string_value(json_object_get(doc, "compiler")));
    json_decref(doc);
    *json = r.body ? r.body : dup_str("");
    r.body = NULL;
    if (!*json)
      st = tl_error_set(err, TL_NOMEM, "out of memory");
  }
  tl_http_response_free(&r);
  return st;
}

const char *tl_client_compiler_id(tl_client *c) { return c ? ident_current(c) : ""; }

tl_status tl_client_build_manifest(tl_client *c, const char *key, char **manifest, tl_source *where, tl_error *err) {
  tl_error_clear(err);
  if (manifest)
    *manifest = NULL;
  if (!c || !manifest)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_build_manifest: NULL argument");
  if (!tl_hex_is_sha256(key))
    return tl_error_set(err, TL_INVALID_ARG, "'%.80s' is not a build key (64 lowercase hexadecimal characters)",
                        key ? key : "(null)");
  tl_cache *cache = local(c);
  tl_cache_build *b = NULL;
  if (cache && tl_cache_get_build(cache, key, &b, NULL) == TL_OK &&
      strncmp(b->manifest, TL_BUILD_MANIFEST_MAGIC, strlen(TL_BUILD_MANIFEST_MAGIC)) == 0) {
    *manifest = dup_str(b->manifest);
    tl_cache_build_free(b);
    if (where)
      *where = TL_SOURCE_LOCAL;
    return *manifest ? TL_OK : tl_error_set(err, TL_NOMEM, "out of memory");
  }
  tl_cache_build_free(b);
  if (c->offline)
    return tl_error_set(err, TL_NETWORK, "offline, and the local cache %s has no manifest of the build %s",
                        c->cache_path ? c->cache_path : "(off)", key);
  char path[128], what[512];
  snprintf(path, sizeof path, "/v1/kernels/%s", key);
  snprintf(what, sizeof what, "GET %.200s%s", c->server, path);
  tl_http_response r;
  tl_status st = tl_http_request(c, "GET", path, NULL, 0, JSON_ANSWER_MAX, &r, err);
  if (st == TL_OK && r.status != 200)
    st = r.status == 404 ? tl_error_set(err, TL_NOT_FOUND, "the server %s has no build with key %s", c->server, key)
                         : tl_http_error(&r, what, err);
  if (st == TL_OK) {
    json_t *doc = json_loadb(r.body ? r.body : "", r.len, 0, NULL);
    const char *k = json_string_value(json_object_get(doc, "key"));
    const char *m = json_string_value(json_object_get(doc, "manifest"));
    if (!k || strcmp(k, key) != 0 || !m)
      st = tl_error_set(err, TL_CORRUPT, "%s: the answer is not a build of this key", what);
    else if (!(*manifest = dup_str(m)))
      st = tl_error_set(err, TL_NOMEM, "out of memory");
    else if (where)
      *where = TL_SOURCE_SERVER_CACHE;
    json_decref(doc);
  }
  tl_http_response_free(&r);
  return st;
}
