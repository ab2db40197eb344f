/*
 * api.c - the endpoints of tlserverd (proto/openapi.yaml is the contract):
 *
 *   GET  /healthz, /readyz     liveness and readiness
 *   GET  /v1/info              version, targets, toolchain, limits
 *   GET  /metrics              Prometheus text (metrics.c)
 *   POST /v1/compile           compile a program for some targets
 *   GET|HEAD /v1/artifacts/ID  the bytes of a binary (ETag, 304, Range)
 *   GET  /v1/kernels/KEY       the metadata of a build
 *   GET  /status...            the status pages (status.c)
 *   POST /v1/bundles           import a bundle into the cache (admin)
 *   POST /v1/tunings           record a tuning (compile scope)
 *   GET  /v1/tunings/KEY       a tuning record
 *
 * POST /v1/compile, per target: tl_compile_key (parse + check + key, in
 * the daemon: it is cheap, runs no pass and builds no binary; the key names
 * the back end asked for, the worker chooses one, compiler/compile.c) -> cache
 * lookup by key ->
 * a hit is answered from the cache; misses go to the compile pool as one
 * all-or-nothing submission (single-flight there) and the connection is
 * suspended until every result is in; the worker thread publishes each
 * build in the cache before the result comes back.  The answer lists the
 * targets in the request's order.  Its HTTP status is 200 when every target
 * succeeded, otherwise the status of the first target that failed, with an
 * "error" object describing that failure (for an invalid program: every
 * diagnostic), next to the "results" of all targets.
 *
 * Diagnostics' JSON Pointers point into the request document: the
 * compiler's pointer into the program is prefixed with "/program".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <microhttpd.h>
#include "server.h"
#include "../compiler/target.h"
#include "../compiler/tlcompiler.h"
#include "../cache/tlbundle.h"
#include "../proto/tl_hash.h"
#include "../proto/tl_json.h"

struct tl_srv_compile {
  char *name; /* the program's name, for the status page; or NULL */
  int ntargets;
  char *targets[TL_SRV_MAX_TARGETS];
  tl_srv_result *results[TL_SRV_MAX_TARGETS];
  atomic_int pending;
  bool suspended;
};

void tl_srv_api_free(tl_srv_req *r) {
  tl_srv_compile *c = r->compile;
  if (!c)
    return;
  for (int i = 0; i < c->ntargets; i++) {
    free(c->targets[i]);
    tl_srv_result_unref(c->results[i]);
  }
  free(c->name);
  free(c);
  r->compile = NULL;
}

/* ==== small endpoints =================================================================== */

static int get_healthz(tl_srv_req *r) {
  tl_srv_buf b = {0};
  tl_srv_buf_puts(&b, "{\"status\": \"ok\"}\n");
  return tl_srv_respond_json(r, 200, &b);
}

/* 200 when every readiness check (ready.c) passed at its last probe; else
 * 503 with each failed check's reason, in the "error" message and in
 * "checks".  The cache tier (tier.c) is not a check: with its Redis down
 * the server degrades to its local cache and stays ready, and "tier" says
 * how many primaries answer. */
static int get_readyz(tl_srv_req *r) {
  tl_srv *s = r->srv;
  if (atomic_load(&s->draining))
    return tl_srv_respond_http_error(r, 503, "overloaded", "the server is shutting down");
  bool ok[TL_READY_COUNT_];
  char why[TL_READY_COUNT_][TL_SRV_READY_WHY_MAX];
  bool ready = tl_srv_ready_get(&s->ready, ok, why);
  tl_srv_buf b = {0};
  if (!ready) {
    tl_srv_buf_puts(&b, "{\"status\": \"not_ready\", \"error\": {\"code\": \"not_ready\", "
                        "\"message\": \"not ready: ");
    for (int i = 0, n = 0; i < TL_READY_COUNT_; i++)
      if (!ok[i]) {
        tl_srv_buf_puts(&b, n++ ? "; " : "");
        tl_srv_buf_json_str(&b, why[i]);
      }
    tl_srv_buf_puts(&b, "\"}, ");
  } else {
    tl_srv_buf_puts(&b, "{\"status\": \"ready\", ");
  }
  tl_srv_buf_printf(&b, "\"workers_running\": %d, \"toolchain\": %s, \"checks\": {",
                    tl_srv_pool_live_workers(s->pool), s->targets ? "true" : "false");
  for (int i = 0; i < TL_READY_COUNT_; i++) {
    tl_srv_buf_printf(&b, "%s\"%s\": {\"ok\": %s", i ? ", " : "",
                      tl_srv_ready_check_name((tl_srv_ready_check)i), ok[i] ? "true" : "false");
    if (!ok[i]) {
      tl_srv_buf_puts(&b, ", \"reason\": \"");
      tl_srv_buf_json_str(&b, why[i]);
      tl_srv_buf_puts(&b, "\"");
    }
    tl_srv_buf_puts(&b, "}");
  }
  tl_srv_buf_puts(&b, "}");
  if (s->tier) { /* a tier that is down degrades the server: not a check, it stays ready */
    tl_srv_buf_puts(&b, ", \"tier\": ");
    tl_srv_tier_json(s->tier, &b);
  }
  tl_srv_buf_puts(&b, "}\n");
  return tl_srv_respond_json(r, ready ? 200 : 503, &b);
}

/* `, "KEY": "VALUE"`, or `, "KEY": null, "KEY_error": "WHY"` when value is NULL. */
static void str_or_why(tl_srv_buf *b, const char *key, const char *value, const char *why) {
  tl_srv_buf_printf(b, ", \"%s\": ", key);
  if (value) {
    tl_srv_buf_puts(b, "\"");
    tl_srv_buf_json_str(b, value);
  } else {
    tl_srv_buf_printf(b, "null, \"%s_error\": \"", key);
    tl_srv_buf_json_str(b, why);
  }
  tl_srv_buf_puts(b, "\"");
}

static int get_info(tl_srv_req *r) {
  tl_srv *s = r->srv;
  const tl_srv_config *c = &s->cfg;
  tl_srv_buf b = {0};
  tl_srv_buf_printf(&b,
                    "{\"name\": \"tlserverd\", \"version\": \"" TL_SERVER_VERSION "\", \"compiler_version\": \""
                    TL_COMPILER_VERSION "\", \"compiler\": \"%s\", \"compiler_digest\": \"%s\"",
                    tl_compiler_id, tl_compiler_digest);
  str_or_why(&b, "toolchain", s->toolchain, s->toolchain_error);
  str_or_why(&b, "nvjitlink", s->nvjitlink, s->nvjitlink_error); /* the PTX back end's assembler */
  str_or_why(&b, "ptxas", s->ptxas, s->ptxas_error);             /* ... of kernels with setmaxnreg */
  tl_srv_buf_puts(&b, ", \"targets\": [");
  for (int i = 0; s->targets && s->targets[i]; i++) {
    tl_srv_buf_puts(&b, i ? ", \"" : "\"");
    tl_srv_buf_json_str(&b, s->targets[i]);
    tl_srv_buf_puts(&b, "\"");
  }
  /* what each offered target is (target.h's table) */
  tl_srv_buf_puts(&b, "], \"target_info\": {");
  for (int i = 0; s->targets && s->targets[i]; i++) {
    tl_target t;
    char *desc = tl_target_parse(s->targets[i], &t, NULL) == TL_OK ? tl_target_json(&t) : NULL;
    tl_srv_buf_puts(&b, i ? ", \"" : "\"");
    tl_srv_buf_json_str(&b, s->targets[i]);
    tl_srv_buf_puts(&b, "\": ");
    tl_srv_buf_puts(&b, desc ? desc : "null");
    free(desc);
  }
  /* known targets the toolchain refuses, and why (gfx950 before clang 20) */
  tl_srv_buf_puts(&b, "}, \"targets_not_offered\": {");
  const char *const *refused = tl_compiler_targets_refused();
  for (int i = 0; refused[i]; i++) {
    tl_srv_buf_puts(&b, i ? ", \"" : "\"");
    tl_srv_buf_json_str(&b, refused[i]);
    tl_srv_buf_puts(&b, "\": \"");
    tl_srv_buf_json_str(&b, tl_compiler_target_refusal(refused[i]));
    tl_srv_buf_puts(&b, "\"");
  }
  tl_srv_buf_printf(&b,
                    "}, \"limits\": {\"max_body_bytes\": %lld, \"max_header_bytes\": %lld, "
                    "\"max_json_depth\": %d, \"max_targets\": %d, \"max_diagnostics\": %d, "
                    "\"max_connections\": %d, \"compile_timeout_s\": %g, \"workers\": %d, "
                    "\"queue\": %d, \"max_compiles_per_client\": %d, \"max_queued_per_client\": %d, "
                    "\"max_program_statements\": %d, "
                    "\"cache_max_bytes\": %lld}, \"auth\": %s, \"tls\": %s}\n",
                    (long long)c->max_body, (long long)c->max_header, TL_SRV_JSON_DEPTH,
                    TL_SRV_MAX_TARGETS, TL_SRV_MAX_DIAGS, c->max_connections, c->compile_timeout,
                    c->workers, c->queue, c->max_compiles_per_client,
                    c->max_compiles_per_client ? TL_SRV_QUEUE_SHARE(c->queue) : 0, c->max_program_statements,
                    (long long)c->cache_max_bytes,
                    s->auth ? "true" : "false", c->tls_cert ? "true" : "false");
  return tl_srv_respond_json(r, 200, &b);
}

bool tl_srv_cache_stats(tl_srv *s, tl_cache_stats *st) {
  bool have = false;
  tl_cache *c = tl_srv_handles_get(s->handles, NULL);
  if (c) {
    have = tl_cache_get_stats(c, st, NULL) == TL_OK;
    tl_srv_handles_put(s->handles, c);
  }
  return have;
}

static int get_metrics(tl_srv_req *r) {
  tl_srv *s = r->srv;
  tl_cache_stats st;
  bool have = tl_srv_cache_stats(s, &st);
  tl_srv_metrics_extra x = {
      .cache = have ? &st : NULL,
      .workers = s->cfg.workers,
      .queue_capacity = s->cfg.queue,
      .uptime_s = (double)(tl_srv_now_us() - s->start_us) / 1e6,
      .toolchain = s->toolchain,
      .draining = atomic_load(&s->draining),
  };
  x.ready = tl_srv_ready_get(&s->ready, x.ready_check, NULL) && !x.draining;
  if (s->tier)
    x.tier_up = tl_srv_tier_up(s->tier, &x.tier_primaries);
  tl_srv_artmem_stats(s->artmem, &x.memory_cache_bytes, &x.memory_cache_entries);
  tl_srv_buf b = {0};
  tl_srv_metrics_render(&s->metrics, &x, &b);
  if (b.failed) {
    tl_srv_buf_free(&b);
    tl_error e;
    tl_error_set(&e, TL_NOMEM, "out of memory");
    return tl_srv_respond_error(r, &e);
  }
  size_t n = b.len;
  struct MHD_Response *resp =
      MHD_create_response_from_buffer_with_free_callback_cls(n, b.data, free, b.data);
  if (!resp) {
    tl_srv_buf_free(&b);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  return tl_srv_respond(r, 200, resp, (int64_t)n);
}

/* ==== artifacts ============================================================================ */

static int bad_id(tl_srv_req *r, const char *what) {
  tl_error e;
  tl_error_set(&e, TL_INVALID_ARG, "%s is 64 lowercase hexadecimal characters (a SHA-256)", what);
  return tl_srv_respond_error(r, &e);
}

static int not_modified(tl_srv_req *r, const char *id) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
  if (!resp)
    return MHD_NO;
  char etag[70];
  snprintf(etag, sizeof etag, "\"%s\"", id);
  MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
                          "public, max-age=31536000, immutable");
  return tl_srv_respond(r, 304, resp, 0);
}

static int serve_artifact(tl_srv_req *r, const char *id, const tl_srv_artref *a) {
  tl_srv *s = r->srv;
  const char *inm =
      MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
  if (inm && tl_srv_etag_match(inm, id))
    return not_modified(r, id);
  const char *range = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
  if (range) {
    const char *if_range =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_RANGE);
    if (if_range && !tl_srv_etag_match(if_range, id))
      range = NULL; /* the client's copy is another one: send it all */
  }
  int64_t first = 0, last = 0;
  tl_srv_range rk = tl_srv_parse_range(range, (int64_t)a->n, &first, &last);
  char cr[96];
  if (rk == TL_RANGE_UNSATISFIABLE) {
    tl_srv_buf b = {0};
    tl_srv_buf_printf(&b, "{\"error\": {\"code\": \"%s\", \"message\": \"the artifact has %zu bytes\"}}\n",
                      tl_status_name(TL_RANGE), a->n);
    size_t n = b.len;
    struct MHD_Response *resp =
        b.failed ? NULL : MHD_create_response_from_buffer_with_free_callback_cls(n, b.data, free, b.data);
    if (!resp) {
      tl_srv_buf_free(&b);
      return MHD_NO;
    }
    snprintf(cr, sizeof cr, "bytes */%zu", a->n);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return tl_srv_respond(r, 416, resp, (int64_t)n);
  }
  if (rk == TL_RANGE_OK) {
    size_t len = (size_t)(last - first + 1);
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, (char *)a->bytes + first, MHD_RESPMEM_MUST_COPY);
    if (!resp)
      return MHD_NO;
    tl_srv_artifact_headers(resp, id);
    snprintf(cr, sizeof cr, "bytes %lld-%lld/%zu", (long long)first, (long long)last, a->n);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
    if (!r->head)
      atomic_fetch_add(&s->metrics.artifact_bytes, (long long)len);
    return tl_srv_respond(r, 206, resp, (int64_t)len);
  }
  if (!r->head)
    atomic_fetch_add(&s->metrics.artifact_bytes, (long long)a->n);
  return tl_srv_respond_shared(r, 200, a->full, (int64_t)a->n);
}

/* A local miss of key (or of artifact id, key NULL) asked of the shared
 * tier: a checked build found there is stored in the local cache c first.
 * *bytes (malloc'd) receives its binary when bytes is not NULL.  True when
 * found. */
static bool from_tier(tl_srv *s, tl_cache *c, const char *key, const char *id, void **bytes,
                      size_t *n) {
  tl_cache_build *b = NULL;
  void *bin = NULL;
  size_t bn = 0;
  if (!s->tier || tl_srv_tier_fetch(s->tier, key, id, &b, &bin, &bn) != TL_OK)
    return false;
  tl_error err;
  if (tl_cache_put(c, b, bin, bn, &err) != TL_OK)
    atomic_fetch_add(&s->metrics.publish_failures, 1);
  tl_cache_build_free(b);
  if (bytes) {
    *bytes = bin;
    *n = bn;
  } else {
    free(bin);
  }
  return true;
}

static int get_artifact(tl_srv_req *r) {
  tl_srv *s = r->srv;
  const char *id = r->url + strlen("/v1/artifacts/");
  if (!tl_hex_is_sha256(id))
    return bad_id(r, "an artifact id");
  tl_srv_artref a;
  if (tl_srv_artmem_get(s->artmem, id, &a)) {
    atomic_fetch_add(&s->metrics.artifact_mem_hits, 1);
  } else {
    tl_error err;
    tl_error_clear(&err);
    tl_cache *c = tl_srv_handles_get(s->handles, &err);
    if (!c)
      return tl_srv_respond_error(r, &err);
    void *bytes = NULL;
    size_t n = 0;
    tl_status st = tl_cache_get_artifact(c, id, &bytes, &n, &err);
    if (st == TL_NOT_FOUND && from_tier(s, c, NULL, id, &bytes, &n))
      st = TL_OK;
    tl_srv_handles_put(s->handles, c);
    if (st == TL_NOT_FOUND) {
      atomic_fetch_add(&s->metrics.artifact_misses, 1);
      tl_error_set(&err, TL_NOT_FOUND, "no artifact with this id");
      return tl_srv_respond_error(r, &err);
    }
    if (st != TL_OK)
      return tl_srv_respond_error(r, &err);
    atomic_fetch_add(&s->metrics.artifact_db_hits, 1);
    if (!tl_srv_artmem_put(s->artmem, id, bytes, n, &a)) {
      tl_error_set(&err, TL_NOMEM, "out of memory");
      return tl_srv_respond_error(r, &err);
    }
  }
  int rc = serve_artifact(r, id, &a);
  tl_srv_artref_release(&a);
  return rc;
}

/* ==== kernels ============================================================================== */

tl_status tl_srv_find_build(tl_srv *s, const char *key, tl_cache_build **out, tl_error *err) {
  *out = NULL;
  tl_cache *c = tl_srv_handles_get(s->handles, err);
  if (!c)
    return err->code;
  tl_status st = tl_cache_get_build(c, key, out, err);
  if (st == TL_NOT_FOUND && from_tier(s, c, key, NULL, NULL, NULL))
    st = tl_cache_get_build(c, key, out, err);
  tl_srv_handles_put(s->handles, c);
  if (st == TL_NOT_FOUND)
    return tl_error_set(err, TL_NOT_FOUND, "no build with this key");
  return st;
}

static int get_kernel(tl_srv_req *r) {
  tl_srv *s = r->srv;
  const char *key = r->url + strlen("/v1/kernels/");
  if (!tl_hex_is_sha256(key))
    return bad_id(r, "a build key");
  tl_error err;
  tl_error_clear(&err);
  tl_cache_build *bd = NULL;
  if (tl_srv_find_build(s, key, &bd, &err) != TL_OK)
    return tl_srv_respond_error(r, &err);
  tl_srv_buf_puts(&r->keys, key);
  tl_srv_buf b = {0};
  tl_srv_buf_printf(&b, "{\"key\": \"%s\", \"target\": \"", bd->key);
  tl_srv_buf_json_str(&b, bd->target);
  tl_srv_buf_printf(&b,
                    "\", \"artifact\": \"%s\", \"size\": %lld, \"compile_ms\": %lld, "
                    "\"created_ms\": %lld, \"last_access_ms\": %lld, \"meta\": ",
                    bd->artifact_id, (long long)bd->size, (long long)bd->compile_ms,
                    (long long)bd->created_ms, (long long)bd->last_access_ms);
  tl_srv_buf_json_compact(&b, bd->metadata && bd->metadata[0] ? bd->metadata : "{}");
  tl_srv_buf_puts(&b, ", \"manifest\": \"");
  tl_srv_buf_json_str(&b, bd->manifest ? bd->manifest : "");
  tl_srv_buf_puts(&b, "\"}\n");
  tl_cache_build_free(bd);
  return tl_srv_respond_json(r, 200, &b);
}

/* ==== bundles ================================================================================ */

/* POST /v1/bundles: the body is a bundle (proto/bundle.md).  The whole of it
 * is checked first (tl_bundle_parse: every checksum, artifact id, build key
 * and reference; a damaged one is refused whole, with the entry at fault);
 * then each build is stored in this replica's SQLite cache (tl_cache_put
 * re-hashes its bytes once more) unless it is there already, and refused
 * when the bundle's compiler identity is not this server's: its key would
 * name another compiler's output, so it is never served as current.  With
 * a shared tier (--tier) every build stored or present is also published
 * there as a compile publishes it (tl_srv_tier_publish without a lease:
 * the same tl:b: entry with its hashes, its tl:a: pointer, the TTL and
 * --tier-max-entry, and the message that wakes waiting replicas), so every
 * replica serves it; each build's "tier" says whether it was written
 * ("published", "too_large", "failed": Redis down or slow, counted in
 * tier_errors_total; the build stays stored here).  Request keys are the
 * clients' and are only counted.  200 when at least one build was stored
 * or present, else 422 (every build refused). */
static int post_bundle(tl_srv_req *r) {
  tl_srv *s = r->srv;
  tl_error err;
  tl_error_clear(&err);
  tl_bundle *b = NULL;
  tl_status st = tl_bundle_parse(r->body ? r->body : "", r->body_len, "the bundle", &b, &err);
  if (st != TL_OK)
    return tl_srv_respond_http_error(r, st == TL_TOO_LARGE ? 413 : st == TL_NOMEM ? 500 : 400, tl_status_name(st),
                                     err.message);
  tl_cache *c = tl_srv_handles_get(s->handles, &err);
  if (!c) {
    tl_bundle_free(b);
    return tl_srv_respond_error(r, &err);
  }
  bool ours = strcmp(b->compiler, tl_compiler_id) == 0;
  int stored = 0, present = 0, refused = 0, published = 0;
  tl_srv_tier_conn *tc = s->tier && ours ? tl_srv_tier_conn_new(s->tier) : NULL;
  tl_srv_buf list = {0};
  for (int i = 0; i < b->nbuilds; i++) {
    const tl_bundle_build *bd = &b->builds[i];
    const tl_bundle_artifact *a = &b->artifacts[bd->artifact_index];
    const char *status = "refused", *tier = NULL;
    char reason[TL_ERROR_MESSAGE_MAX] = "";
    tl_cache_build *have = NULL;
    tl_cache_build row = {.manifest = bd->manifest, .target = bd->target, .metadata = bd->metadata,
                          .compile_ms = bd->compile_ms, .size = (int64_t)a->n};
    memcpy(row.key, bd->key, 65);
    memcpy(row.artifact_id, a->id, 65);
    if (!ours) {
      snprintf(reason, sizeof reason, "built by %s; this server runs %s", b->compiler, tl_compiler_id);
    } else if (tl_cache_get_build(c, bd->key, &have, NULL) == TL_OK) {
      status = "present";
    } else {
      tl_error e;
      if (tl_cache_put(c, &row, a->bytes, a->n, &e) == TL_OK)
        status = "stored";
      else
        snprintf(reason, sizeof reason, "%s", e.message);
    }
    tl_cache_build_free(have);
    if (s->tier && status[0] != 'r') {
      tl_srv_tier_lease none = {0};
      int w = tc ? tl_srv_tier_publish(tc, &none, &row, a->bytes, a->n) : -1;
      tier = w > 0 ? "published" : w == 0 ? "too_large" : "failed";
      published += w > 0;
    }
    *(status[0] == 's' ? &stored : status[0] == 'p' ? &present : &refused) += 1;
    tl_srv_buf_printf(&list, "%s{\"key\": \"%s\", \"target\": \"", i ? ", " : "", bd->key);
    tl_srv_buf_json_str(&list, bd->target);
    tl_srv_buf_printf(&list, "\", \"status\": \"%s\"", status);
    if (tier)
      tl_srv_buf_printf(&list, ", \"tier\": \"%s\"", tier);
    if (reason[0]) {
      tl_srv_buf_puts(&list, ", \"reason\": \"");
      tl_srv_buf_json_str(&list, reason);
      tl_srv_buf_puts(&list, "\"");
    }
    tl_srv_buf_puts(&list, "}");
  }
  tl_srv_handles_put(s->handles, c);
  tl_srv_tier_conn_free(tc);
  tl_srv_buf out = {0};
  int http = stored || present || !b->nbuilds ? 200 : 422;
  tl_srv_buf_puts(&out, "{");
  if (http != 200) {
    tl_error_set(&err, TL_UNSUPPORTED, "every build of the bundle was refused%s%s%s%s",
                 ours ? "" : ": built by ", ours ? "" : b->compiler, ours ? "" : "; this server runs ",
                 ours ? "" : tl_compiler_id);
    tl_srv_buf_puts(&out, "\"error\": {");
    tl_srv_error_members(&out, &err);
    tl_srv_buf_puts(&out, "}, ");
  }
  tl_srv_buf_puts(&out, "\"compiler\": \"");
  tl_srv_buf_json_str(&out, b->compiler);
  tl_srv_buf_puts(&out, "\", \"server_compiler\": \"");
  tl_srv_buf_json_str(&out, tl_compiler_id);
  tl_srv_buf_printf(&out,
                    "\", \"checksum\": \"%s\", \"stored\": %d, \"present\": %d, \"refused\": %d, "
                    "\"requests\": %d, \"builds\": [",
                    b->checksum, stored, present, refused, b->nrequests);
  tl_srv_buf_puts(&out, list.data ? list.data : "");
  if (s->tier)
    tl_srv_buf_printf(&out, "], \"tier_published\": %d", published);
  else
    tl_srv_buf_puts(&out, "]");
  tl_srv_buf_puts(&out, "}\n");
  if (list.failed)
    out.failed = true;
  tl_srv_buf_free(&list);
  tl_bundle_free(b);
  return tl_srv_respond_json(r, http, &out);
}

/* ==== tunings ================================================================================ */

/* Tuning records (client/include/tl/tlclient.h, "tuning"): small JSON
 * texts under their key, kept as notes of the SQLite cache ("tuning KEY")
 * and, with --tier, in Redis (tl:t:KEY), so every replica answers what one
 * node recorded.  A record's key is checked against its own fields: the
 * SHA-256 of "tl-tuning 1\nprogram P\nshape S\ndevice D\n". */
#define TUNING_NOTE_PREFIX "tuning "

static tl_status check_tuning(json_t *doc, char key[65], tl_error *err) {
  json_t *shape = json_object_get(doc, "shape"), *cons = json_object_get(doc, "constants");
  json_t *ms = json_object_get(doc, "ms"), *cands = json_object_get(doc, "candidates");
  const char *k = json_string_value(json_object_get(doc, "key"));
  const char *prog = json_string_value(json_object_get(doc, "program"));
  const char *dev = json_string_value(json_object_get(doc, "device"));
  if (!json_is_object(doc) || json_object_size(doc) != 7 || !tl_hex_is_sha256(k) || !tl_hex_is_sha256(prog) ||
      !json_is_object(shape) || !dev || !*dev || strlen(dev) > 256 || !json_is_object(cons) || !json_is_number(ms) ||
      json_number_value(ms) < 0 || !json_is_array(cands))
    return tl_error_set(err, TL_INVALID_ARG,
                        "a tuning record is an object of exactly key, program (SHA-256 hex), shape (object), device "
                        "(1 to 256 bytes), constants (object), ms (>= 0) and candidates (array)");
  const char *name;
  json_t *v;
  json_object_foreach(cons, name, v) {
    if (!json_is_number(v) && !json_is_boolean(v))
      return tl_error_set_at(err, TL_INVALID_ARG, "/constants", 0, "the tuned constant %.100s is not a number or a boolean",
                             name);
  }
  char *sh = tl_json_canonical(shape);
  if (!sh)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  size_t n = strlen(sh) + strlen(dev) + 160;
  char *text = malloc(n);
  tl_status st = text ? TL_OK : tl_error_set(err, TL_NOMEM, "out of memory");
  if (text) {
    snprintf(text, n, "tl-tuning 1\nprogram %s\nshape %s\ndevice %s\n", prog, sh, dev);
    st = tl_sha256_hex(text, strlen(text), key);
    if (st == TL_OK && strcmp(key, k) != 0)
      st = tl_error_set_at(err, TL_INVALID_ARG, "/key", 0,
                           "the key is not the SHA-256 of the record's program, shape and device (%s)", key);
  }
  free(text);
  free(sh);
  return st;
}

static int post_tuning(tl_srv_req *r) {
  tl_srv *s = r->srv;
  tl_error err;
  tl_error_clear(&err);
  json_error_t je;
  json_t *doc = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &je);
  if (!doc) {
    tl_error_set(&err, TL_BAD_JSON, "the body is not JSON: line %d, column %d: %s", je.line, je.column, je.text);
    return tl_srv_respond_error(r, &err);
  }
  char key[65];
  tl_status st = check_tuning(doc, key, &err);
  char *text = st == TL_OK ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII) : NULL;
  json_decref(doc);
  if (st == TL_OK && !text)
    st = tl_error_set(&err, TL_NOMEM, "out of memory");
  if (st == TL_OK && strlen(text) > TL_CACHE_NOTE_MAX)
    st = tl_error_set(&err, TL_TOO_LARGE, "a tuning record is %zu bytes; the limit is %d", strlen(text),
                      TL_CACHE_NOTE_MAX);
  tl_cache *c = st == TL_OK ? tl_srv_handles_get(s->handles, &err) : NULL;
  if (st == TL_OK && !c)
    st = err.code;
  if (c) {
    char name[80];
    snprintf(name, sizeof name, TUNING_NOTE_PREFIX "%s", key);
    st = tl_cache_note_set(c, name, text, &err);
    tl_srv_handles_put(s->handles, c);
  }
  bool tiered = st == TL_OK && s->tier && tl_srv_tier_record_set(s->tier, key, text) == TL_OK;
  free(text);
  if (st != TL_OK)
    return tl_srv_respond_error(r, &err);
  tl_srv_buf b = {0};
  tl_srv_buf_printf(&b, "{\"key\": \"%s\", \"stored\": true, \"tier\": %s}\n", key, tiered ? "true" : "false");
  return tl_srv_respond_json(r, 200, &b);
}

static int get_tuning(tl_srv_req *r) {
  tl_srv *s = r->srv;
  const char *key = r->url + strlen("/v1/tunings/");
  if (!tl_hex_is_sha256(key))
    return bad_id(r, "a tuning key");
  tl_error err;
  tl_error_clear(&err);
  tl_cache *c = tl_srv_handles_get(s->handles, &err);
  if (!c)
    return tl_srv_respond_error(r, &err);
  char name[80], *text = NULL;
  snprintf(name, sizeof name, TUNING_NOTE_PREFIX "%s", key);
  tl_status st = tl_cache_note_get(c, name, &text, &err);
  if (st == TL_NOT_FOUND && s->tier && tl_srv_tier_record_get(s->tier, key, &text) == TL_OK) {
    json_t *doc = json_loads(text, 0, NULL); /* checked like a POST: a damaged entry is a miss */
    char k[65];
    st = doc && check_tuning(doc, k, NULL) == TL_OK && strcmp(k, key) == 0 ? TL_OK : TL_NOT_FOUND;
    json_decref(doc);
    if (st == TL_OK)
      tl_cache_note_set(c, name, text, NULL);
  }
  tl_srv_handles_put(s->handles, c);
  if (st != TL_OK) {
    free(text);
    if (st == TL_NOT_FOUND)
      tl_error_set(&err, TL_NOT_FOUND, "no tuning recorded with this key");
    return tl_srv_respond_error(r, &err);
  }
  tl_srv_buf b = {0};
  tl_srv_buf_puts(&b, text);
  tl_srv_buf_puts(&b, "\n");
  free(text);
  return tl_srv_respond_json(r, 200, &b);
}

/* ==== compile ================================================================================ */

/* A request-level failure before any target was looked at. */
static int fail_at(tl_srv_req *r, tl_status code, const char *pointer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_at(tl_srv_req *r, tl_status code, const char *pointer, const char *fmt, ...) {
  tl_error e;
  va_list ap;
  va_start(ap, fmt);
  tl_error_setv(&e, code, fmt, ap);
  va_end(ap);
  if (pointer)
    snprintf(e.pointer, sizeof e.pointer, "%s", pointer);
  return tl_srv_respond_error(r, &e);
}

/* Writes a JSON Pointer token (RFC 6901: ~ -> ~0, / -> ~1). */
static void pointer_token(char *out, size_t n, const char *prefix, const char *name) {
  size_t k = (size_t)snprintf(out, n, "%s/", prefix);
  for (; *name && k + 3 < n; name++) {
    if (*name == '~') {
      out[k++] = '~';
      out[k++] = '0';
    } else if (*name == '/') {
      out[k++] = '~';
      out[k++] = '1';
    } else {
      out[k++] = *name;
    }
  }
  out[k < n ? k : n - 1] = 0;
}

static void diags_json(tl_srv_buf *b, const tl_srv_result *res) {
  tl_srv_buf_puts(b, "[");
  for (int i = 0; i < res->ndiags; i++) {
    const tl_srv_diag *d = &res->diags[i];
    tl_srv_buf_puts(b, i ? ", {" : "{");
    if (d->pointer) {
      tl_srv_buf_puts(b, "\"pointer\": \"/program");
      tl_srv_buf_json_str(b, d->pointer);
      tl_srv_buf_puts(b, "\", ");
    } else if (d->line > 0) {
      tl_srv_buf_printf(b, "\"line\": %d, ", d->line);
    }
    if (d->column > 0)
      tl_srv_buf_printf(b, "\"column\": %d, ", d->column);
    tl_srv_buf_puts(b, "\"message\": \"");
    tl_srv_buf_json_str(b, d->message ? d->message : "");
    tl_srv_buf_puts(b, "\"}");
  }
  tl_srv_buf_puts(b, "]");
}

/* out = "/program" + ptr, truncated to fit. */
static void program_pointer(char out[TL_ERROR_POINTER_MAX], const char *ptr) {
  static const char pre[] = "/program";
  size_t n = strlen(ptr);
  if (n > TL_ERROR_POINTER_MAX - sizeof pre)
    n = TL_ERROR_POINTER_MAX - sizeof pre;
  memcpy(out, pre, sizeof pre - 1);
  memmove(out + sizeof pre - 1, ptr, n);
  out[sizeof pre - 1 + n] = 0;
}

/* The error of a failed result, with "/program" before a program pointer. */
static void result_error(const tl_srv_result *res, tl_error *e) {
  *e = res->err;
  if (res->err.pointer[0] || (res->err.code == TL_BAD_PROGRAM && res->ndiags == 0)) {
    program_pointer(e->pointer, res->err.pointer);
  } else if (res->err.code == TL_BAD_PROGRAM && res->ndiags > 0 && res->diags[0].pointer) {
    program_pointer(e->pointer, res->diags[0].pointer);
    e->column = res->diags[0].column;
  }
}

static int respond_compile(tl_srv_req *r) {
  tl_srv_compile *c = r->compile;
  int status = 200;
  int first_fail = -1;
  for (int i = 0; i < c->ntargets; i++) {
    if (c->results[i]->err.code != TL_OK) {
      first_fail = i;
      status = tl_status_http(c->results[i]->err.code);
      break;
    }
  }
  tl_srv_buf b = {0};
  tl_srv_buf_puts(&b, "{");
  if (first_fail >= 0) {
    const tl_srv_result *res = c->results[first_fail];
    tl_error e;
    result_error(res, &e);
    tl_srv_buf_puts(&b, "\"error\": {");
    tl_srv_error_members(&b, &e);
    tl_srv_buf_puts(&b, ", \"target\": \"");
    tl_srv_buf_json_str(&b, c->targets[first_fail]);
    tl_srv_buf_puts(&b, "\", \"diagnostics\": ");
    diags_json(&b, res);
    tl_srv_buf_puts(&b, "}, ");
  }
  tl_srv_buf_puts(&b, "\"results\": [");
  for (int i = 0; i < c->ntargets; i++) {
    const tl_srv_result *res = c->results[i];
    tl_srv_recent_add(r->srv->recent, c->name, c->targets[i], res);
    tl_srv_buf_puts(&b, i ? ", {\"target\": \"" : "{\"target\": \"");
    tl_srv_buf_json_str(&b, c->targets[i]);
    if (res->err.code == TL_OK) {
      tl_srv_buf_printf(&b,
                        "\", \"status\": \"ok\", \"key\": \"%s\", \"artifact\": \"%s\", "
                        "\"size\": %lld, \"cached\": %s, \"compile_ms\": %.3f, \"meta\": ",
                        res->key, res->artifact, (long long)res->size,
                        res->cached ? "true" : "false", res->compile_ms);
      tl_srv_buf_json_compact(&b, res->meta && res->meta[0] ? res->meta : "{}");
      tl_srv_buf_puts(&b, ", \"diagnostics\": []");
    } else {
      tl_srv_buf_puts(&b, "\", \"status\": \"error\"");
      if (res->key[0])
        tl_srv_buf_printf(&b, ", \"key\": \"%s\"", res->key);
      tl_error e;
      result_error(res, &e);
      tl_srv_buf_puts(&b, ", \"error\": {");
      tl_srv_error_members(&b, &e);
      tl_srv_buf_puts(&b, "}, \"diagnostics\": ");
      diags_json(&b, res);
      if (res->diags_truncated)
        tl_srv_buf_puts(&b, ", \"diagnostics_truncated\": true");
    }
    tl_srv_buf_puts(&b, "}");
  }
  tl_srv_buf_puts(&b, "]}\n");
  return tl_srv_respond_json(r, status, &b);
}

/* A pool callback: stores the result and resumes the connection after the last one. */
static void compile_done(void *user, int index, tl_srv_result *res) {
  tl_srv_req *r = user;
  tl_srv_compile *c = r->compile;
  if (!res)
    res = tl_srv_result_error(TL_NOMEM, "out of memory");
  c->results[index] = res;
  if (atomic_fetch_sub(&c->pending, 1) == 1)
    MHD_resume_connection(r->conn);
}

static char *dup_n(const char *s) { return s ? strdup(s) : NULL; }

/* A result for a target that failed at tl_compile_key. */
static tl_srv_result *key_error(const tl_error *err, const tl_diags *d) {
  tl_srv_result *res = tl_srv_result_new();
  if (!res)
    return NULL;
  res->err = *err;
  if (res->err.code == TL_OK)
    tl_error_set(&res->err, TL_INTERNAL, "the compiler failed without saying why");
  int n = d->n < TL_SRV_MAX_DIAGS ? d->n : TL_SRV_MAX_DIAGS;
  if (n > 0 && (res->diags = calloc((size_t)n, sizeof *res->diags))) {
    for (int i = 0; i < n; i++) {
      res->diags[i].pointer = dup_n(d->items[i].pointer);
      res->diags[i].message = dup_n(d->items[i].message ? d->items[i].message : "");
      res->diags[i].line = d->items[i].line;
      res->diags[i].column = d->items[i].column;
      res->ndiags++;
    }
  }
  res->diags_truncated = d->truncated || d->n > n;
  if (res->err.code == TL_BAD_PROGRAM && res->ndiags > 0)
    snprintf(res->err.message, sizeof res->err.message, "the program has %d error%s%s",
             res->ndiags, res->ndiags == 1 ? "" : "s", res->diags_truncated ? " (or more)" : "");
  return res;
}

static tl_srv_result *from_build(const tl_cache_build *b) {
  tl_srv_result *res = tl_srv_result_new();
  if (!res)
    return NULL;
  memcpy(res->key, b->key, 65);
  memcpy(res->artifact, b->artifact_id, 65);
  res->size = b->size;
  res->compile_ms = (double)b->compile_ms;
  res->cached = true;
  if (!(res->meta = strdup(b->metadata ? b->metadata : "{}"))) {
    tl_srv_result_unref(res);
    return NULL;
  }
  return res;
}

static bool target_offered(const tl_srv *s, const char *t) {
  for (int i = 0; s->targets && s->targets[i]; i++)
    if (strcmp(s->targets[i], t) == 0)
      return true;
  return false;
}

/* The parsed request, borrowed from the JSON tree. */
typedef struct parsed {
  json_t *root;
  char *program;       /* compact JSON text */
  const char *name;
  char *options;       /* or NULL */
  tl_define defs[TL_MAX_CONSTANTS];
  char *def_values[TL_MAX_CONSTANTS];
  int ndefs;
} parsed;

static void parsed_free(parsed *p) {
  for (int i = 0; i < p->ndefs; i++)
    free(p->def_values[i]);
  free(p->program);
  free(p->options);
  json_decref(p->root);
}

/* Reads and validates the request body; answers and returns false on error. */
static bool parse_request(tl_srv_req *r, parsed *p, int *rc) {
  tl_srv *s = r->srv;
  if (!r->body_len) {
    *rc = fail_at(r, TL_BAD_JSON, NULL, "the request body is empty; expected a JSON object");
    return false;
  }
  if (!tl_srv_json_depth_ok(r->body, r->body_len, TL_SRV_JSON_DEPTH)) {
    *rc = fail_at(r, TL_TOO_LARGE, NULL, "the JSON nests deeper than %d levels",
                  TL_SRV_JSON_DEPTH);
    return false;
  }
  json_error_t je;
  p->root = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &je);
  if (!p->root) {
    tl_error e;
    tl_error_set(&e, TL_BAD_JSON, "malformed JSON at line %d, column %d: %s", je.line, je.column,
                 je.text);
    e.column = je.column > 0 ? je.column : 0;
    tl_srv_buf b = {0};
    tl_srv_buf_puts(&b, "{\"error\": {");
    tl_srv_error_members(&b, &e);
    tl_srv_buf_printf(&b, ", \"line\": %d, \"position\": %d}}\n", je.line, je.position);
    *rc = tl_srv_respond_json(r, 400, &b);
    return false;
  }
  if (!json_is_object(p->root)) {
    *rc = fail_at(r, TL_INVALID_ARG, "", "the request must be a JSON object");
    return false;
  }
  const char *k;
  json_t *v;
  json_object_foreach(p->root, k, v) {
    if (strcmp(k, "program") && strcmp(k, "targets") && strcmp(k, "constants") &&
        strcmp(k, "options") && strncmp(k, "x-", 2) != 0) {
      char ptr[300];
      pointer_token(ptr, sizeof ptr, "", k);
      *rc = fail_at(r, TL_INVALID_ARG, ptr,
                    "unknown member; a compile request has program, targets, constants, options");
      return false;
    }
  }
  json_t *prog = json_object_get(p->root, "program");
  if (!json_is_object(prog)) {
    *rc = fail_at(r, TL_INVALID_ARG, prog ? "/program" : "",
                  prog ? "program must be a JSON object (a Tile IR program)"
                       : "the request has no program");
    return false;
  }
  json_t *targets = json_object_get(p->root, "targets");
  if (!json_is_array(targets)) {
    *rc = fail_at(r, TL_INVALID_ARG, targets ? "/targets" : "",
                  targets ? "targets must be an array of target names"
                          : "the request has no targets");
    return false;
  }
  size_t nt = json_array_size(targets);
  if (nt == 0 || nt > TL_SRV_MAX_TARGETS) {
    *rc = fail_at(r, nt ? TL_TOO_LARGE : TL_INVALID_ARG, "/targets",
                  "a request names 1 to %d targets (this one %zu)", TL_SRV_MAX_TARGETS, nt);
    return false;
  }
  for (size_t i = 0; i < nt; i++) {
    char ptr[64];
    snprintf(ptr, sizeof ptr, "/targets/%zu", i);
    const char *t = json_string_value(json_array_get(targets, i));
    if (!t || !t[0] || strlen(t) > 32) {
      *rc = fail_at(r, TL_INVALID_ARG, ptr, "a target is a name such as \"sm_90a\"");
      return false;
    }
    for (size_t k2 = 0; k2 < i; k2++) {
      if (strcmp(t, json_string_value(json_array_get(targets, k2))) == 0) {
        *rc = fail_at(r, TL_INVALID_ARG, ptr, "target '%s' is named twice", t);
        return false;
      }
    }
    if (!s->targets) {
      *rc = fail_at(r, TL_NO_TOOLCHAIN, NULL, "this server has no toolchain: %s",
                    s->toolchain_error);
      return false;
    }
    if (!target_offered(s, t)) {
      const char *why = tl_compiler_target_refusal(t);
      *rc = fail_at(r, TL_UNSUPPORTED, ptr, "target '%s' is not offered by this server%s%s (GET /v1/info lists them)",
                    t, why ? ": " : "", why ? why : "");
      return false;
    }
  }
  json_t *consts = json_object_get(p->root, "constants");
  if (consts && !json_is_null(consts)) {
    if (!json_is_object(consts)) {
      *rc = fail_at(r, TL_INVALID_ARG, "/constants",
                    "constants must be an object of names to numbers or booleans");
      return false;
    }
    if (json_object_size(consts) > TL_MAX_CONSTANTS) {
      *rc = fail_at(r, TL_TOO_LARGE, "/constants", "more than %d constants", TL_MAX_CONSTANTS);
      return false;
    }
    json_object_foreach(consts, k, v) {
      char ptr[300];
      pointer_token(ptr, sizeof ptr, "/constants", k);
      if (!json_is_number(v) && !json_is_boolean(v)) {
        *rc = fail_at(r, TL_INVALID_ARG, ptr, "a constant's value is a number or a boolean");
        return false;
      }
      char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
      if (!text) {
        *rc = fail_at(r, TL_NOMEM, NULL, "out of memory");
        return false;
      }
      p->defs[p->ndefs].name = k;
      p->defs[p->ndefs].value = text;
      p->def_values[p->ndefs] = text;
      p->ndefs++;
    }
  }
  json_t *opts = json_object_get(p->root, "options");
  if (opts && !json_is_null(opts)) {
    if (!json_is_object(opts)) {
      *rc = fail_at(r, TL_INVALID_ARG, "/options", "options must be an object");
      return false;
    }
    p->options = json_dumps(opts, JSON_COMPACT | JSON_SORT_KEYS);
  }
  p->program = json_dumps(prog, JSON_COMPACT);
  if (!p->program || (opts && !json_is_null(opts) && !p->options)) {
    *rc = fail_at(r, TL_NOMEM, NULL, "out of memory");
    return false;
  }
  p->name = json_string_value(json_object_get(prog, "name"));
  return true;
}

static bool fill_job(tl_srv_job *j, const parsed *p, const char *target, const char *key,
                     char *manifest, const char *client) {
  memcpy(j->key, key, 65);
  snprintf(j->client, sizeof j->client, "%s", client);
  j->manifest = manifest;
  j->program_len = strlen(p->program);
  j->program = strdup(p->program);
  j->name = dup_n(p->name);
  j->target = strdup(target);
  j->options = dup_n(p->options);
  j->ndefines = p->ndefs;
  j->define_names = calloc((size_t)(p->ndefs ? p->ndefs : 1), sizeof(char *));
  j->define_values = calloc((size_t)(p->ndefs ? p->ndefs : 1), sizeof(char *));
  if (!j->program || !j->target || (p->name && !j->name) || (p->options && !j->options) ||
      !j->define_names || !j->define_values)
    return false;
  for (int i = 0; i < p->ndefs; i++) {
    j->define_names[i] = strdup(p->defs[i].name);
    j->define_values[i] = strdup(p->defs[i].value);
    if (!j->define_names[i] || !j->define_values[i])
      return false;
  }
  return true;
}

static int post_compile(tl_srv_req *r) {
  tl_srv *s = r->srv;
  parsed p = {0};
  int rc = MHD_YES;
  if (!parse_request(r, &p, &rc)) {
    parsed_free(&p);
    return rc;
  }
  json_t *targets = json_object_get(p.root, "targets");
  tl_srv_compile *c = calloc(1, sizeof *c);
  if (!c) {
    parsed_free(&p);
    return fail_at(r, TL_NOMEM, NULL, "out of memory");
  }
  r->compile = c;
  c->name = p.name ? strdup(p.name) : NULL;
  c->ntargets = (int)json_array_size(targets);
  tl_srv_job jobs[TL_SRV_MAX_TARGETS];
  int idx[TL_SRV_MAX_TARGETS];
  int njobs = 0;
  memset(jobs, 0, sizeof jobs);
  tl_error err;
  tl_cache *cache = NULL;
  bool oom = false;
  char client[TL_SRV_CLIENT_MAX];
  tl_srv_client_addr(r->conn, client);

  for (int i = 0; i < c->ntargets && !oom; i++) {
    const char *t = json_string_value(json_array_get(targets, i));
    if (!(c->targets[i] = strdup(t))) {
      oom = true;
      break;
    }
    tl_compile_request req = {
        .program = p.program,
        .program_len = strlen(p.program),
        .defines = p.defs,
        .ndefines = p.ndefs,
        .target = t,
        .options_json = p.options,
        .max_statements = s->cfg.max_program_statements,
    };
    char key[65] = {0};
    char *manifest = NULL;
    tl_diags diags = {0};
    diags.arena = tl_arena_new();
    tl_error_clear(&err);
    tl_status st = tl_compile_key(&req, key, &manifest, &diags, &err);
    if (st != TL_OK) {
      if (err.code == TL_OK)
        tl_error_set(&err, st, "%s", tl_strerror(st));
      size_t n = strlen(err.message);
      if (st == TL_TOO_LARGE) /* the only one tl_compile_key gives: past max_statements */
        snprintf(err.message + n, sizeof err.message - n,
                 " (tlserverd --max-program-statements; GET /v1/info: limits.max_program_statements)");
      c->results[i] = key_error(&err, &diags);
      tl_arena_free(diags.arena);
      free(manifest);
      if (!c->results[i])
        oom = true;
      continue;
    }
    tl_arena_free(diags.arena);
    if (r->keys.len)
      tl_srv_buf_puts(&r->keys, ",");
    tl_srv_buf_puts(&r->keys, key);
    if (!cache && !(cache = tl_srv_handles_get(s->handles, &err))) {
      free(manifest);
      c->results[i] = tl_srv_result_error(err.code, "%s", err.message);
      if (!c->results[i])
        oom = true;
      continue;
    }
    tl_cache_build *bd = NULL;
    if (tl_cache_get_build(cache, key, &bd, NULL) == TL_OK) {
      atomic_fetch_add(&s->metrics.cache_hits, 1);
      c->results[i] = from_build(bd);
      tl_cache_build_free(bd);
      free(manifest);
      if (!c->results[i])
        oom = true;
      continue;
    }
    atomic_fetch_add(&s->metrics.cache_misses, 1);
    if (!fill_job(&jobs[njobs], &p, t, key, manifest, client)) {
      tl_srv_job_clear(&jobs[njobs]);
      oom = true;
      break;
    }
    idx[njobs++] = i;
  }
  if (cache)
    tl_srv_handles_put(s->handles, cache);
  parsed_free(&p);
  if (oom) {
    for (int i = 0; i < njobs; i++)
      tl_srv_job_clear(&jobs[i]);
    return fail_at(r, TL_NOMEM, NULL, "out of memory");
  }
  if (njobs == 0)
    return respond_compile(r);

  atomic_init(&c->pending, njobs + 1);
  int joined = 0;
  tl_error_clear(&err);
  tl_status st = tl_srv_pool_submit(s->pool, jobs, idx, njobs, compile_done, r, &joined, &err);
  for (int i = 0; i < njobs; i++)
    tl_srv_job_clear(&jobs[i]); /* what the pool took was moved out */
  if (st != TL_OK)
    return tl_srv_respond_error(r, &err);
  c->suspended = true;
  atomic_fetch_add(&s->metrics.connections_suspended, 1);
  MHD_suspend_connection(r->conn);
  if (atomic_fetch_sub(&c->pending, 1) == 1)
    MHD_resume_connection(r->conn);
  return MHD_YES;
}

/* One job for a request that is not a compile request (the status page's
 * source): the same suspension, with one result. */
tl_status tl_srv_api_wait_job(tl_srv_req *r, tl_srv_job *job, tl_error *err) {
  tl_srv_compile *c = calloc(1, sizeof *c);
  if (!c)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  r->compile = c;
  c->ntargets = 1;
  atomic_init(&c->pending, 2);
  int joined = 0, idx = 0;
  tl_status st = tl_srv_pool_submit(r->srv->pool, job, &idx, 1, compile_done, r, &joined, err);
  tl_srv_job_clear(job);
  if (st != TL_OK) {
    tl_srv_api_free(r);
    return st;
  }
  c->suspended = true;
  atomic_fetch_add(&r->srv->metrics.connections_suspended, 1);
  MHD_suspend_connection(r->conn);
  if (atomic_fetch_sub(&c->pending, 1) == 1)
    MHD_resume_connection(r->conn);
  return TL_OK;
}

const tl_srv_result *tl_srv_api_result(const tl_srv_req *r) {
  return r->compile && !r->compile->suspended ? r->compile->results[0] : NULL;
}

int tl_srv_api_dispatch(tl_srv_req *r) {
  if (r->compile && r->compile->suspended) { /* resumed: every result is in */
    r->compile->suspended = false;
    atomic_fetch_sub(&r->srv->metrics.connections_suspended, 1);
    if (r->route == TL_ROUTE_STATUS)
      return tl_srv_status_dispatch(r);
    return respond_compile(r);
  }
  switch (r->route) {
  case TL_ROUTE_HEALTHZ: return get_healthz(r);
  case TL_ROUTE_READYZ: return get_readyz(r);
  case TL_ROUTE_INFO: return get_info(r);
  case TL_ROUTE_METRICS: return get_metrics(r);
  case TL_ROUTE_COMPILE: return post_compile(r);
  case TL_ROUTE_ARTIFACTS: return get_artifact(r);
  case TL_ROUTE_KERNELS: return get_kernel(r);
  case TL_ROUTE_STATUS: return tl_srv_status_dispatch(r);
  case TL_ROUTE_BUNDLES: return post_bundle(r);
  case TL_ROUTE_TUNINGS: return r->body_route ? post_tuning(r) : get_tuning(r);
  default: break;
  }
  return tl_srv_respond_http_error(r, 404, "not_found", "no such endpoint");
}
