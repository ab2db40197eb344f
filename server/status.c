/*
 * status.c - the status pages of tlserverd: HTML for people, next to the
 * JSON and Prometheus endpoints that machines read.
 *
 *   GET /status                        the node: health and readiness, the
 *                                      cache (size, hit rate), the compile
 *                                      pool, the shared tier, the recent
 *                                      compile requests (builds, hits and
 *                                      failures with their diagnostics) and
 *                                      the most recently used builds
 *   GET /status/builds/KEY             one build: its metadata, its key
 *                                      manifest, links to its binary and source
 *   GET /status/builds/KEY/source      the build's generated CUDA C or HIP C
 *
 * Each page is one HTML document with inline CSS and no script, image or
 * other asset, so it renders the same from a proxy, a browser with scripts
 * off or a terminal browser.  Everything that comes from a request or from
 * the cache (program names, diagnostics, metadata, manifests, sources) is
 * HTML-escaped (tl_srv_buf_html), and every page is sent with a
 * Content-Security-Policy that allows inline styles and nothing else (no
 * script runs even if escaping were missed somewhere).  Links are relative,
 * so the pages work behind a proxy that serves them under a prefix.  The
 * routes need the read scope (http.c's table).
 *
 * The recent requests are a ring of the last TL_SRV_RECENT per-target
 * outcomes of POST /v1/compile, kept in memory and saved in the cache
 * database (a note per slot, "status recent N", each at most
 * TL_CACHE_NOTE_MAX bytes: diagnostics that do not fit are left out) by
 * the background thread once a second and at the stop, the slots changed
 * since the last save in one transaction, so a restart shows
 * them again (what a crash leaves unsaved: at most the last second's).  The
 * source of a build is not stored: it is generated again from the build's
 * manifest (program, constants, target, options) by this server's
 * compiler, without the toolchain, and shown only when that gives the same
 * build key, that is, when this compiler is the one that made the build; a
 * build of another compiler says so.  That runs the compiler's passes, so
 * it runs in a compile worker as a source job (pool.c), never in the
 * daemon's HTTP threads: the connection is suspended meanwhile, the job is
 * bounded by --source-timeout and TL_SRV_SOURCE_MAX bytes of source, at
 * most TL_SRV_SOURCE_FLIGHTS run at once, and a refusal (the pool full or
 * stopping) is a 503 page with Retry-After that says why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <microhttpd.h>
#include "server.h"
#include "../compiler/tlcompiler.h"
#include "../proto/tl_hash.h"

/* ==== the ring of recent compile outcomes ============================================ */

#define NAME_MAX_ 128
#define MESSAGE_MAX_ 512
#define DIAG_MAX_ 256

typedef struct recent_diag {
  char pointer[128];
  int line, column;
  char message[DIAG_MAX_];
} recent_diag;

typedef struct recent_entry {
  int64_t wall_ms;
  char name[NAME_MAX_], target[40], key[65], artifact[65];
  bool ok, cached;
  double compile_ms;
  int64_t size;
  char code[40];
  char message[MESSAGE_MAX_];
  int ndiags;
  bool more_diags;
  recent_diag diags[TL_SRV_RECENT_DIAGS];
} recent_entry;

struct tl_srv_recent {
  pthread_mutex_t mu;
  int next, count;
  recent_entry e[TL_SRV_RECENT];
  bool dirty[TL_SRV_RECENT]; /* changed since the last save */
};

tl_srv_recent *tl_srv_recent_new(void) {
  tl_srv_recent *r = calloc(1, sizeof *r);
  if (r)
    pthread_mutex_init(&r->mu, NULL);
  return r;
}

void tl_srv_recent_free(tl_srv_recent *r) {
  if (!r)
    return;
  pthread_mutex_destroy(&r->mu);
  free(r);
}

/* Copies s into out[n], cut at a character boundary when too long. */
static void copy_cut(char *out, size_t n, const char *s) {
  size_t len = s ? strlen(s) : 0;
  if (len >= n) {
    len = n - 1;
    while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80) /* not inside a UTF-8 sequence */
      len--;
  }
  if (len)
    memcpy(out, s, len);
  out[len] = 0;
}

void tl_srv_recent_add(tl_srv_recent *r, const char *name, const char *target,
                       const tl_srv_result *res) {
  if (!r || !res)
    return;
  recent_entry e;
  memset(&e, 0, sizeof e);
  e.wall_ms = tl_srv_wall_ms();
  copy_cut(e.name, sizeof e.name, name ? name : "");
  copy_cut(e.target, sizeof e.target, target);
  copy_cut(e.key, sizeof e.key, res->key);
  e.ok = res->err.code == TL_OK;
  if (e.ok) {
    copy_cut(e.artifact, sizeof e.artifact, res->artifact);
    e.cached = res->cached;
    e.compile_ms = res->compile_ms;
    e.size = res->size;
  } else {
    copy_cut(e.code, sizeof e.code, tl_status_name(res->err.code));
    copy_cut(e.message, sizeof e.message,
             res->err.message[0] ? res->err.message : tl_strerror(res->err.code));
    for (int i = 0; i < res->ndiags && e.ndiags < TL_SRV_RECENT_DIAGS; i++) {
      const tl_srv_diag *d = &res->diags[i];
      recent_diag *o = &e.diags[e.ndiags++];
      if (d->pointer)
        snprintf(o->pointer, sizeof o->pointer, "/program%.110s", d->pointer);
      o->line = d->line;
      o->column = d->column;
      copy_cut(o->message, sizeof o->message, d->message);
    }
    e.more_diags = res->ndiags > e.ndiags || res->diags_truncated;
  }
  pthread_mutex_lock(&r->mu);
  r->e[r->next] = e;
  r->dirty[r->next] = true;
  r->next = (r->next + 1) % TL_SRV_RECENT;
  if (r->count < TL_SRV_RECENT)
    r->count++;
  pthread_mutex_unlock(&r->mu);
}

/* ---- kept across restarts: one note of the cache database per slot ---------------------- */

#define RECENT_NOTE "status recent %d"

/* An entry as JSON text of at most TL_CACHE_NOTE_MAX bytes (diagnostics
 * dropped from the end until it fits); NULL when it cannot be written (no
 * memory, text jansson refuses).  An empty slot is "{}". */
static char *entry_json(const recent_entry *e) {
  if (!e->wall_ms)
    return strdup("{}");
  for (int nd = e->ndiags;; nd--) {
    json_t *d = json_array();
    for (int i = 0; i < nd; i++)
      json_array_append_new(d, json_pack("{s:s, s:i, s:i, s:s}", "pointer", e->diags[i].pointer, "line",
                                         e->diags[i].line, "column", e->diags[i].column, "message",
                                         e->diags[i].message));
    json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:s, s:b, s:b, s:f, s:I, s:s, s:s, s:b, s:o}", "wall_ms",
                          (json_int_t)e->wall_ms, "name", e->name, "target", e->target, "key", e->key, "artifact",
                          e->artifact, "ok", e->ok, "cached", e->cached, "compile_ms", e->compile_ms, "size",
                          (json_int_t)e->size, "code", e->code, "message", e->message, "more_diags",
                          e->more_diags || nd < e->ndiags, "diags", d);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text && strlen(text) <= TL_CACHE_NOTE_MAX)
      return text;
    free(text);
    if (!text || nd == 0)
      return NULL;
  }
}

/* Reads an entry back; false for "{}" or anything malformed. */
static bool entry_parse(const char *text, recent_entry *e) {
  memset(e, 0, sizeof *e);
  json_t *o = json_loads(text, 0, NULL), *d = json_object_get(o, "diags");
  json_int_t wall = json_integer_value(json_object_get(o, "wall_ms"));
  const char *name = json_string_value(json_object_get(o, "name"));
  const char *target = json_string_value(json_object_get(o, "target"));
  bool ok = wall > 0 && name && target && json_is_array(d);
  if (ok) {
    e->wall_ms = wall;
    copy_cut(e->name, sizeof e->name, name);
    copy_cut(e->target, sizeof e->target, target);
    copy_cut(e->key, sizeof e->key, json_string_value(json_object_get(o, "key")));
    copy_cut(e->artifact, sizeof e->artifact, json_string_value(json_object_get(o, "artifact")));
    e->ok = json_is_true(json_object_get(o, "ok"));
    e->cached = json_is_true(json_object_get(o, "cached"));
    e->compile_ms = json_number_value(json_object_get(o, "compile_ms"));
    e->size = json_integer_value(json_object_get(o, "size"));
    copy_cut(e->code, sizeof e->code, json_string_value(json_object_get(o, "code")));
    copy_cut(e->message, sizeof e->message, json_string_value(json_object_get(o, "message")));
    e->more_diags = json_is_true(json_object_get(o, "more_diags"));
    for (size_t i = 0; i < json_array_size(d) && e->ndiags < TL_SRV_RECENT_DIAGS; i++) {
      json_t *x = json_array_get(d, i);
      recent_diag *o2 = &e->diags[e->ndiags++];
      copy_cut(o2->pointer, sizeof o2->pointer, json_string_value(json_object_get(x, "pointer")));
      o2->line = (int)json_integer_value(json_object_get(x, "line"));
      o2->column = (int)json_integer_value(json_object_get(x, "column"));
      copy_cut(o2->message, sizeof o2->message, json_string_value(json_object_get(x, "message")));
    }
  }
  json_decref(o);
  return ok;
}

static int by_time(const void *a, const void *b) {
  const recent_entry *x = a, *y = b;
  return x->wall_ms < y->wall_ms ? -1 : x->wall_ms > y->wall_ms;
}

int tl_srv_recent_load(tl_srv_recent *r, tl_cache *c) {
  if (!r || !c)
    return 0;
  recent_entry *all = calloc(TL_SRV_RECENT, sizeof *all);
  if (!all)
    return 0;
  int n = 0;
  for (int i = 0; i < TL_SRV_RECENT; i++) {
    char name[32], *text = NULL;
    snprintf(name, sizeof name, RECENT_NOTE, i);
    if (tl_cache_note_get(c, name, &text, NULL) == TL_OK && entry_parse(text, &all[n]))
      n++;
    free(text);
  }
  qsort(all, (size_t)n, sizeof *all, by_time); /* oldest first, into slots 0..n-1 */
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < TL_SRV_RECENT; i++) {
    r->e[i] = i < n ? all[i] : (recent_entry){0};
    r->dirty[i] = n > 0; /* saved again in this order (empty slots too) */
  }
  r->count = n;
  r->next = n % TL_SRV_RECENT;
  pthread_mutex_unlock(&r->mu);
  free(all);
  return n;
}

void tl_srv_recent_save(tl_srv_recent *r, tl_cache *c) {
  if (!r || !c)
    return;
  /* the dirty slots copied under the lock, their JSON made outside it, and
   * all of them written in one transaction (one commit, not one per slot) */
  recent_entry *e = malloc(TL_SRV_RECENT * sizeof *e);
  if (!e)
    return; /* left dirty for the next save */
  int slot[TL_SRV_RECENT], n = 0;
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < TL_SRV_RECENT; i++)
    if (r->dirty[i]) {
      e[n] = r->e[i];
      slot[n++] = i;
      r->dirty[i] = false;
    }
  pthread_mutex_unlock(&r->mu);
  char names[TL_SRV_RECENT][32], *texts[TL_SRV_RECENT];
  const char *np[TL_SRV_RECENT], *vp[TL_SRV_RECENT];
  for (int k = 0; k < n; k++) {
    snprintf(names[k], sizeof names[k], RECENT_NOTE, slot[k]);
    texts[k] = entry_json(&e[k]);
    np[k] = names[k];
    vp[k] = texts[k] ? texts[k] : "{}"; /* an entry that cannot be written empties its slot there */
  }
  if (n && tl_cache_notes_set(c, n, np, vp, NULL) != TL_OK) {
    pthread_mutex_lock(&r->mu); /* a busy database: the next save tries again (a slot changed meanwhile is dirty anyway) */
    for (int k = 0; k < n; k++)
      r->dirty[slot[k]] = true;
    pthread_mutex_unlock(&r->mu);
  }
  for (int k = 0; k < n; k++)
    free(texts[k]);
  free(e);
}

/* ==== HTML pieces ======================================================================= */

static const char css[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f4f6f8;color:#1d2733}"
    "header{background:#1f3a5f;color:#fff;padding:14px 24px}"
    "header h1{margin:0;font-size:20px}header p{margin:4px 0 0;color:#c9d6e6}"
    "header a{color:#fff}"
    "main{padding:8px 24px 32px}"
    "section{background:#fff;border:1px solid #d5dbe2;border-radius:6px;margin:16px 0;"
    "padding:12px 16px}"
    "h2{font-size:16px;margin:0 0 8px}"
    "table{border-collapse:collapse;width:100%}"
    "th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e6eaef;vertical-align:top}"
    "th{background:#eef2f6;font-weight:600}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".ok{background:#d8f3dc;color:#1b5e20}.bad{background:#fde2e1;color:#9b1c1c}"
    ".hit{background:#e3ecfa;color:#1e4e8c}.warn{background:#fff3cd;color:#7a5b00}"
    ".tag{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}"
    ".tiles{display:flex;flex-wrap:wrap;gap:12px}table+.tiles{margin-top:12px}"
    ".tile{flex:1 1 150px;border:1px solid #d5dbe2;border-radius:6px;padding:8px 12px}"
    ".tile b{display:block;font-size:22px}"
    "pre{background:#0f1720;color:#e3e8ef;padding:10px;border-radius:4px;overflow:auto;"
    "white-space:pre-wrap;word-break:break-all;font:12px/1.4 ui-monospace,monospace}"
    "code{font:12px ui-monospace,monospace}ul.d{margin:4px 0;padding-left:18px;color:#9b1c1c}"
    ".muted{color:#6b7785}";

/* The page's start: doctype, head with the inline style, the header bar.
 * title and subtitle are plain text (escaped here). */
static void page_start(tl_srv_buf *b, const char *title, const char *subtitle, const char *up) {
  tl_srv_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                     "<meta name=\"viewport\" content=\"width=device-width\"><title>");
  tl_srv_buf_html(b, title);
  tl_srv_buf_printf(b, "</title><style>%s</style></head>\n<body><header><h1>", css);
  tl_srv_buf_html(b, title);
  tl_srv_buf_puts(b, "</h1><p>");
  tl_srv_buf_html(b, subtitle);
  if (up)
    tl_srv_buf_printf(b, " &middot; <a href=\"%s\">back to the node</a>", up);
  tl_srv_buf_puts(b, "</p></header>\n<main>\n");
}

/* Sends the page; retry_after > 0 adds a Retry-After header (a 503). */
static int page_send_retry(tl_srv_req *r, int status, tl_srv_buf *b, int retry_after) {
  tl_srv_buf_puts(b, "</main></body></html>\n");
  if (b->failed) {
    tl_srv_buf_free(b);
    tl_error e;
    tl_error_set(&e, TL_NOMEM, "out of memory");
    return tl_srv_respond_error(r, &e);
  }
  size_t n = b->len;
  char *data = b->data;
  memset(b, 0, sizeof *b);
  struct MHD_Response *resp =
      MHD_create_response_from_buffer_with_free_callback_cls(n, data, free, data);
  if (!resp) {
    free(data);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_add_response_header(resp, "Content-Security-Policy",
                          "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
                          "form-action 'none'; frame-ancestors 'none'");
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
  if (retry_after > 0) {
    char ra[16];
    snprintf(ra, sizeof ra, "%d", retry_after);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
  }
  return tl_srv_respond(r, status, resp, (int64_t)n);
}

static int page_send(tl_srv_req *r, int status, tl_srv_buf *b) { return page_send_retry(r, status, b, 0); }

static void tag(tl_srv_buf *b, const char *cls, const char *text) {
  tl_srv_buf_printf(b, "<span class=\"tag %s\">", cls);
  tl_srv_buf_html(b, text);
  tl_srv_buf_puts(b, "</span>");
}

static void tile(tl_srv_buf *b, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void tile(tl_srv_buf *b, const char *label, const char *fmt, ...) {
  char v[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v, sizeof v, fmt, ap);
  va_end(ap);
  tl_srv_buf_puts(b, "<div class=\"tile\"><b>");
  tl_srv_buf_html(b, v);
  tl_srv_buf_puts(b, "</b>");
  tl_srv_buf_html(b, label);
  tl_srv_buf_puts(b, "</div>");
}

/* "1.5 MiB" */
static void human_bytes(int64_t n, char out[32]) {
  static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)n;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(out, 32, "%lld bytes", (long long)n);
  else
    snprintf(out, 32, "%.1f %s", v, unit[u]);
}

static void time_cell(tl_srv_buf *b, int64_t wall_ms) {
  char when[32];
  tl_srv_format_time(wall_ms, when);
  tl_srv_buf_puts(b, "<td><code>");
  tl_srv_buf_html(b, when);
  tl_srv_buf_puts(b, "</code></td>");
}

/* ==== GET /status ============================================================================ */

static void section_health(tl_srv_buf *b, tl_srv *s) {
  bool ok[TL_READY_COUNT_];
  char why[TL_READY_COUNT_][TL_SRV_READY_WHY_MAX];
  bool draining = atomic_load(&s->draining);
  bool ready = tl_srv_ready_get(&s->ready, ok, why) && !draining;
  tl_srv_buf_puts(b, "<section id=\"health\"><h2>Health</h2><p>");
  tag(b, "ok", "live");
  tl_srv_buf_puts(b, " ");
  tag(b, ready ? "ok" : "bad", draining ? "shutting down" : ready ? "ready" : "not ready");
  tl_srv_buf_puts(b, "</p><table><tr><th>check</th><th>state</th><th>reason</th></tr>");
  for (int i = 0; i < TL_READY_COUNT_; i++) {
    tl_srv_buf_puts(b, "<tr><td>");
    tl_srv_buf_html(b, tl_srv_ready_check_name((tl_srv_ready_check)i));
    tl_srv_buf_puts(b, "</td><td>");
    tag(b, ok[i] ? "ok" : "bad", ok[i] ? "ok" : "failing");
    tl_srv_buf_puts(b, "</td><td>");
    tl_srv_buf_html(b, ok[i] ? "" : why[i]);
    tl_srv_buf_puts(b, "</td></tr>");
  }
  tl_srv_buf_puts(b, "</table><p class=\"muted\">Toolchain: ");
  tl_srv_buf_html(b, s->toolchain ? s->toolchain : s->toolchain_error);
  tl_srv_buf_puts(b, "<br>Targets offered: ");
  for (int i = 0; s->targets && s->targets[i]; i++) {
    tl_srv_buf_puts(b, i ? ", " : "");
    tl_srv_buf_html(b, s->targets[i]);
  }
  if (!s->targets)
    tl_srv_buf_puts(b, "none");
  tl_srv_buf_puts(b, "</p></section>\n");
}

static double ratio(long long a, long long b) { return b > 0 ? 100.0 * (double)a / (double)b : 0; }

static void section_cache(tl_srv_buf *b, tl_srv *s) {
  tl_cache_stats st;
  bool have = tl_srv_cache_stats(s, &st);
  long long hits = atomic_load(&s->metrics.cache_hits), misses = atomic_load(&s->metrics.cache_misses);
  int64_t mem_bytes = 0, mem_entries = 0;
  tl_srv_artmem_stats(s->artmem, &mem_bytes, &mem_entries);
  char size[32], cap[32], mem[32];
  human_bytes(have ? st.bytes : 0, size);
  human_bytes(s->cfg.cache_max_bytes, cap);
  human_bytes(mem_bytes, mem);
  tl_srv_buf_puts(b, "<section id=\"cache\"><h2>Cache</h2><div class=\"tiles\">");
  if (have) {
    tile(b, s->cfg.cache_max_bytes > 0 ? "of binaries (cap below)" : "of binaries (no cap)", "%s", size);
    tile(b, "builds", "%lld", (long long)st.builds);
    tile(b, "artifacts", "%lld", (long long)st.artifacts);
  } else {
    tile(b, "the cache's statistics could not be read", "?");
  }
  tile(b, "hit rate of compile requests since start", "%.1f%%", ratio(hits, hits + misses));
  tile(b, "hits / misses since start", "%lld / %lld", hits, misses);
  tile(b, "artifacts in memory", "%lld (%s)", (long long)mem_entries, mem);
  tl_srv_buf_puts(b, "</div><p class=\"muted\">Database: <code>");
  tl_srv_buf_html(b, s->cfg.db_path);
  tl_srv_buf_puts(b, "</code>");
  if (s->cfg.cache_max_bytes > 0) {
    tl_srv_buf_puts(b, "; cap ");
    tl_srv_buf_html(b, cap);
  }
  if (have)
    tl_srv_buf_printf(b, "; lookups over the database's life (every process sharing it): %lld "
                         "hits, %lld misses (%.1f%%); %lld evictions; %lld integrity failures",
                      (long long)st.hits, (long long)st.misses,
                      ratio(st.hits, st.hits + st.misses), (long long)st.evictions,
                      (long long)st.integrity_failures);
  tl_srv_buf_puts(b, ".</p></section>\n");
}

static void section_compiles(tl_srv_buf *b, tl_srv *s) {
  const tl_srv_metrics *m = &s->metrics;
  long long ok = atomic_load(&m->compiles[TL_COMPILE_OK]),
            err = atomic_load(&m->compiles[TL_COMPILE_ERROR]),
            tmo = atomic_load(&m->compiles[TL_COMPILE_TIMEOUT]),
            crash = atomic_load(&m->compiles[TL_COMPILE_CRASH]);
  long long all = ok + err + tmo + crash;
  tl_srv_buf_puts(b, "<section id=\"compiles\"><h2>Compiles</h2><div class=\"tiles\">");
  tile(b, "compiled", "%lld", ok);
  tile(b, "refused or failed", "%lld", err);
  tile(b, "timed out", "%lld", tmo);
  tile(b, "worker crashes", "%lld", crash);
  tile(b, "mean compile time", "%.0f ms",
       all ? (double)atomic_load(&m->compile_us_sum) / 1e3 / (double)all : 0.0);
  tile(b, "running / queued", "%lld / %lld", atomic_load(&m->compiles_running),
       atomic_load(&m->queue_depth));
  tile(b, "workers live / configured", "%d / %d", tl_srv_pool_live_workers(s->pool), s->cfg.workers);
  tile(b, "single-flight joins", "%lld", atomic_load(&m->singleflight_joins));
  tl_srv_buf_puts(b, "</div></section>\n");
}

static void section_tier(tl_srv_buf *b, tl_srv *s) {
  tl_srv_buf_puts(b, "<section id=\"tier\"><h2>Shared tier (Redis)</h2>");
  if (!s->tier) {
    tl_srv_buf_puts(b, "<p class=\"muted\">Not set: this node has its local cache only "
                       "(<code>--tier</code>).</p></section>\n");
    return;
  }
  tl_srv_buf tj = {0};
  tl_srv_tier_json(s->tier, &tj);
  json_t *t = tj.failed ? NULL : json_loads(tj.data, 0, NULL);
  tl_srv_buf_free(&tj);
  const char *state = json_string_value(json_object_get(t, "state"));
  tl_srv_buf_puts(b, "<p>");
  tag(b, !state ? "warn" : strcmp(state, "up") == 0 ? "ok" : "bad", state ? state : "unknown");
  tl_srv_buf_puts(b, "</p><table><tr><th>primary</th><th>state</th><th>last error</th></tr>");
  json_t *p;
  size_t i;
  json_array_foreach(json_object_get(t, "primaries"), i, p) {
    bool up = json_is_true(json_object_get(p, "up"));
    tl_srv_buf_puts(b, "<tr><td><code>");
    tl_srv_buf_html(b, json_string_value(json_object_get(p, "url")) ? json_string_value(json_object_get(p, "url")) : "");
    tl_srv_buf_puts(b, "</code></td><td>");
    tag(b, up ? "ok" : "bad", up ? "up" : "down");
    tl_srv_buf_puts(b, "</td><td>");
    const char *e = json_string_value(json_object_get(p, "error"));
    tl_srv_buf_html(b, e ? e : "");
    tl_srv_buf_puts(b, "</td></tr>");
  }
  json_decref(t);
  const tl_srv_metrics *m = &s->metrics;
  long long th = atomic_load(&m->tier_hits), tm = atomic_load(&m->tier_misses);
  tl_srv_buf_puts(b, "</table><div class=\"tiles\">");
  tile(b, "tier hit rate after local misses", "%.1f%%", ratio(th, th + tm));
  tile(b, "tier errors", "%lld", atomic_load(&m->tier_errors));
  tile(b, "corrupt entries dropped", "%lld", atomic_load(&m->tier_corrupt));
  tile(b, "lease waits / take-overs", "%lld / %lld", atomic_load(&m->tier_lease_waits),
       atomic_load(&m->tier_takeovers));
  tl_srv_buf_puts(b, "</div></section>\n");
}

static void key_link(tl_srv_buf *b, const char *prefix, const char *key) {
  if (!tl_hex_is_sha256(key)) {
    tl_srv_buf_puts(b, "<span class=\"muted\">none</span>");
    return;
  }
  tl_srv_buf_printf(b, "<a href=\"%sstatus/builds/%s\"><code>%.12s</code></a>", prefix, key, key);
}

static void section_recent(tl_srv_buf *b, tl_srv *s) {
  tl_srv_recent *rc = s->recent;
  recent_entry *copy = rc ? malloc(sizeof rc->e) : NULL;
  int n = 0;
  if (copy) { /* newest first */
    pthread_mutex_lock(&rc->mu);
    for (int i = 0; i < rc->count; i++)
      copy[n++] = rc->e[(rc->next - 1 - i + 2 * TL_SRV_RECENT) % TL_SRV_RECENT];
    pthread_mutex_unlock(&rc->mu);
  }
  tl_srv_buf_printf(b, "<section id=\"recent\"><h2>Recent compile requests</h2><p class=\"muted\">"
                       "The last %d targets asked for (newest first), kept in the cache "
                       "database across restarts.</p>",
                    TL_SRV_RECENT);
  if (n == 0)
    tl_srv_buf_puts(b, "<p>None yet.</p>");
  else
    tl_srv_buf_puts(b, "<table><tr><th>time</th><th>program</th><th>target</th><th>outcome</th>"
                       "<th>build</th><th class=\"n\">size</th><th class=\"n\">compile</th></tr>");
  for (int i = 0; i < n; i++) {
    const recent_entry *e = &copy[i];
    tl_srv_buf_puts(b, "<tr>");
    time_cell(b, e->wall_ms);
    tl_srv_buf_puts(b, "<td>");
    tl_srv_buf_html(b, e->name[0] ? e->name : "(unnamed)");
    tl_srv_buf_puts(b, "</td><td>");
    tl_srv_buf_html(b, e->target);
    tl_srv_buf_puts(b, "</td><td>");
    if (e->ok) {
      tag(b, e->cached ? "hit" : "ok", e->cached ? "hit" : "compiled");
    } else {
      tag(b, "bad", e->code);
      tl_srv_buf_puts(b, " ");
      tl_srv_buf_html(b, e->message);
      if (e->ndiags) {
        tl_srv_buf_puts(b, "<ul class=\"d\">");
        for (int k = 0; k < e->ndiags; k++) {
          const recent_diag *d = &e->diags[k];
          tl_srv_buf_puts(b, "<li><code>");
          if (d->pointer[0])
            tl_srv_buf_html(b, d->pointer);
          else if (d->line > 0)
            tl_srv_buf_printf(b, "line %d", d->line);
          if (d->column > 0)
            tl_srv_buf_printf(b, ":%d", d->column);
          tl_srv_buf_puts(b, "</code> ");
          tl_srv_buf_html(b, d->message);
          tl_srv_buf_puts(b, "</li>");
        }
        if (e->more_diags)
          tl_srv_buf_puts(b, "<li>(more: the compile answer has them all)</li>");
        tl_srv_buf_puts(b, "</ul>");
      }
    }
    tl_srv_buf_puts(b, "</td><td>");
    key_link(b, "", e->key);
    if (e->ok) {
      char size[32];
      human_bytes(e->size, size);
      tl_srv_buf_puts(b, "</td><td class=\"n\">");
      tl_srv_buf_html(b, size);
      tl_srv_buf_printf(b, "</td><td class=\"n\">%.0f ms</td></tr>", e->compile_ms);
    } else {
      tl_srv_buf_puts(b, "</td><td></td><td></td></tr>");
    }
  }
  if (n)
    tl_srv_buf_puts(b, "</table>");
  tl_srv_buf_puts(b, "</section>\n");
  free(copy);
}

/* The program's name in a key manifest's "program" line (NULL if none). */
static json_t *manifest_line(const char *manifest, const char *name) {
  size_t n = strlen(name);
  for (const char *p = manifest; p && *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (len > n && strncmp(p, name, n) == 0 && p[n] == ' ')
      return json_loadb(p + n + 1, len - n - 1, JSON_DECODE_ANY, NULL);
    p = nl ? nl + 1 : NULL;
  }
  return NULL;
}

typedef struct list_state {
  tl_srv_buf *b;
  int n;
} list_state;

static int list_one(const tl_cache_build *bd, void *user) {
  list_state *ls = user;
  tl_srv_buf *b = ls->b;
  json_t *prog = manifest_line(bd->manifest, "program");
  const char *name = json_string_value(json_object_get(prog, "name"));
  char size[32];
  human_bytes(bd->size, size);
  tl_srv_buf_puts(b, "<tr>");
  time_cell(b, bd->last_access_ms);
  tl_srv_buf_puts(b, "<td>");
  tl_srv_buf_html(b, name ? name : "(unnamed)");
  json_decref(prog);
  tl_srv_buf_puts(b, "</td><td>");
  tl_srv_buf_html(b, bd->target);
  tl_srv_buf_puts(b, "</td><td>");
  key_link(b, "", bd->key);
  tl_srv_buf_puts(b, "</td><td class=\"n\">");
  tl_srv_buf_html(b, size);
  tl_srv_buf_printf(b, "</td><td class=\"n\">%lld ms</td></tr>", (long long)bd->compile_ms);
  return ++ls->n >= TL_SRV_STATUS_BUILDS;
}

static void section_builds(tl_srv_buf *b, tl_srv *s) {
  tl_srv_buf_printf(b, "<section id=\"builds\"><h2>Builds in the cache</h2><p class=\"muted\">"
                       "The %d most recently used (access times are written in batches, so the "
                       "order lags by a few seconds).</p>"
                       "<table><tr><th>last used</th><th>program</th><th>target</th><th>build</th>"
                       "<th class=\"n\">size</th><th class=\"n\">compile</th></tr>",
                    TL_SRV_STATUS_BUILDS);
  list_state ls = {b, 0};
  tl_error err;
  tl_error_clear(&err);
  tl_cache *c = tl_srv_handles_get(s->handles, &err);
  if (c) {
    tl_cache_list(c, list_one, &ls, &err);
    tl_srv_handles_put(s->handles, c);
  }
  tl_srv_buf_puts(b, "</table>");
  if (err.code != TL_OK) {
    tl_srv_buf_puts(b, "<p class=\"bad\">The cache could not be listed: ");
    tl_srv_buf_html(b, err.message);
    tl_srv_buf_puts(b, "</p>");
  } else if (ls.n == 0) {
    tl_srv_buf_puts(b, "<p>The cache is empty.</p>");
  }
  tl_srv_buf_puts(b, "</section>\n");
}

static int get_status(tl_srv_req *r) {
  tl_srv *s = r->srv;
  char sub[512], when[32];
  tl_srv_format_time(tl_srv_wall_ms(), when);
  double up = (double)(tl_srv_now_us() - s->start_us) / 1e6;
  snprintf(sub, sizeof sub, "tlserverd %s, compiler %s; up %.0f s; %s", TL_SERVER_VERSION,
           tl_compiler_id, up, when);
  tl_srv_buf b = {0};
  page_start(&b, "tlserverd status", sub, NULL);
  section_health(&b, s);
  section_cache(&b, s);
  section_compiles(&b, s);
  section_tier(&b, s);
  section_recent(&b, s);
  section_builds(&b, s);
  tl_srv_buf_puts(&b, "<p class=\"muted\">Machine-readable: <a href=\"readyz\">/readyz</a>, "
                      "<a href=\"v1/info\">/v1/info</a>, <a href=\"metrics\">/metrics</a> "
                      "(admin scope).</p>\n");
  return page_send(r, 200, &b);
}

/* ==== GET /status/builds/KEY[/source] ================================================= */

static void pre(tl_srv_buf *b, const char *text) {
  tl_srv_buf_puts(b, "<pre>");
  tl_srv_buf_html(b, text);
  tl_srv_buf_puts(b, "</pre>");
}

/* The source job of a build (tl_srv_job.source): its program, constants,
 * target and options from its manifest.  False with *why set when there is
 * none to run: a build of another compiler (this one cannot say what that
 * one generated), a manifest it cannot read, no memory. */
static bool source_job(const tl_cache_build *bd, tl_srv_job *job, char *why, size_t why_n) {
  memset(job, 0, sizeof *job);
  /* the compiler line is plain text, not JSON */
  const char *cl = strstr(bd->manifest, "\ncompiler ");
  size_t idn = strlen(tl_compiler_id);
  if (!cl || strncmp(cl + 10, tl_compiler_id, idn) != 0 || cl[10 + idn] != '\n') {
    const char *end = cl ? strchr(cl + 10, '\n') : NULL;
    snprintf(why, why_n, "this build was made by %.*s; this server's compiler is %s, so it "
                         "cannot say which source that compiler generated",
             cl && end ? (int)(end - cl - 10) : 9, cl && end ? cl + 10 : "another compiler",
             tl_compiler_id);
    return false;
  }
  json_t *options = manifest_line(bd->manifest, "options");
  json_t *consts = manifest_line(bd->manifest, "constants");
  json_t *prog = manifest_line(bd->manifest, "program");
  bool ok = json_is_object(prog) && json_is_object(consts) && json_is_object(options);
  if (!ok)
    snprintf(why, why_n, "the build's manifest cannot be read");
  size_t nc = ok ? json_object_size(consts) : 0;
  if (ok) {
    const char *name = json_string_value(json_object_get(prog, "name"));
    memcpy(job->key, bd->key, 65);
    job->source = true;
    job->program = json_dumps(prog, JSON_COMPACT);
    job->program_len = job->program ? strlen(job->program) : 0;
    job->name = name ? strdup(name) : NULL;
    job->target = strdup(bd->target);
    job->options = json_object_size(options) ? json_dumps(options, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    job->define_names = calloc(nc ? nc : 1, sizeof *job->define_names);
    job->define_values = calloc(nc ? nc : 1, sizeof *job->define_values);
    ok = job->program && (job->name || !name) && job->target && (job->options || !json_object_size(options)) &&
         job->define_names && job->define_values;
    const char *k;
    json_t *v;
    json_object_foreach(consts, k, v) {
      if (!ok)
        break;
      job->define_names[job->ndefines] = strdup(k);
      job->define_values[job->ndefines] = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
      ok = job->define_names[job->ndefines] && job->define_values[job->ndefines];
      job->ndefines++;
    }
    if (!ok)
      snprintf(why, why_n, "out of memory");
  }
  json_decref(options);
  json_decref(consts);
  json_decref(prog);
  if (!ok)
    tl_srv_job_clear(job);
  return ok;
}

static int get_build_page(tl_srv_req *r, const char *rest) {
  tl_srv *s = r->srv;
  char key[65] = {0};
  bool source = false;
  size_t kn = strcspn(rest, "/");
  if (kn == 64) {
    memcpy(key, rest, 64);
    source = strcmp(rest + 64, "/source") == 0;
  }
  if (!tl_hex_is_sha256(key) || (rest[kn] && !source)) {
    tl_error e;
    tl_error_set(&e, TL_NOT_FOUND,
                 "no such page: /status/builds/KEY or /status/builds/KEY/source, KEY a build key "
                 "(64 lowercase hexadecimal characters)");
    return tl_srv_respond_error(r, &e);
  }
  tl_error err;
  tl_error_clear(&err);
  tl_cache_build *bd = NULL;
  if (tl_srv_find_build(s, key, &bd, &err) != TL_OK)
    return tl_srv_respond_error(r, &err);
  if (!tl_srv_api_result(r)) /* not again when resumed */
    tl_srv_buf_puts(&r->keys, key);
  json_t *prog = manifest_line(bd->manifest, "program");
  const char *name = json_string_value(json_object_get(prog, "name"));
  char title[256];
  snprintf(title, sizeof title, "%s for %s%s", name ? name : "(unnamed)", bd->target,
           source ? ": generated source" : "");
  char sub[128];
  snprintf(sub, sizeof sub, "build %s", key);
  tl_srv_buf b = {0};
  page_start(&b, title, sub, source ? "../../../status" : "../../status");
  json_decref(prog);
  int status = 200, retry_after = 0;
  if (source) {
    char why[TL_ERROR_MESSAGE_MAX + 256] = "";
    const tl_srv_result *res = tl_srv_api_result(r);
    tl_srv_job job;
    if (!res && source_job(bd, &job, why, sizeof why)) {
      /* generated by a compile worker: this connection waits, not this thread */
      tl_error e;
      tl_status st = tl_srv_api_wait_job(r, &job, &e);
      if (st == TL_OK) {
        tl_srv_buf_free(&b);
        tl_cache_build_free(bd);
        return MHD_YES;
      }
      snprintf(why, sizeof why, "the source is generated again by a compile worker, and none could "
                                "take it now: %s", e.message);
      status = st == TL_BUSY ? 503 : tl_status_http(st);
      retry_after = st == TL_BUSY ? 2 : 0;
    } else if (res && res->err.code != TL_OK) {
      snprintf(why, sizeof why, "%s", res->err.message);
      /* the source cannot be shown (another key, too large): the page; a failure of the worker: its status */
      status = res->err.code == TL_UNSUPPORTED || res->err.code == TL_TOO_LARGE ? 200 : tl_status_http(res->err.code);
      retry_after = res->err.code == TL_BUSY ? 2 : 0;
    }
    tl_srv_buf_printf(&b, "<section id=\"source\"><h2>%s</h2><p class=\"muted\">Generated again "
                          "from the build's manifest by this server's compiler, in a compile worker "
                          "(at most %g s and %zu MiB); the same build key says it is the source the "
                          "binary was compiled from. <a href=\"../%s\">The build</a>.</p>",
                      bd->target[0] == 'g' ? "HIP C" : "CUDA C",
                      s->cfg.source_timeout < s->cfg.compile_timeout ? s->cfg.source_timeout : s->cfg.compile_timeout,
                      TL_SRV_SOURCE_MAX >> 20, key);
    if (res && res->err.code == TL_OK && res->source) {
      pre(&b, res->source);
    } else {
      tl_srv_buf_puts(&b, "<p class=\"bad\">");
      tl_srv_buf_html(&b, why);
      tl_srv_buf_puts(&b, "</p>");
    }
    tl_srv_buf_puts(&b, "</section>\n");
  } else {
    char size[32], created[32], used[32];
    human_bytes(bd->size, size);
    tl_srv_format_time(bd->created_ms, created);
    tl_srv_format_time(bd->last_access_ms, used);
    tl_srv_buf_puts(&b, "<section id=\"build\"><h2>Build</h2><table>");
    tl_srv_buf_printf(&b, "<tr><th>key</th><td><code>%s</code> (<a href=\"../../v1/kernels/%s\">"
                          "JSON</a>)</td></tr>", key, key);
    tl_srv_buf_puts(&b, "<tr><th>target</th><td>");
    tl_srv_buf_html(&b, bd->target);
    tl_srv_buf_printf(&b, "</td></tr><tr><th>binary</th><td><a href=\"../../v1/artifacts/%s\">"
                          "<code>%s</code></a> (", bd->artifact_id, bd->artifact_id);
    tl_srv_buf_html(&b, size);
    tl_srv_buf_printf(&b, ")</td></tr><tr><th>compile time</th><td>%lld ms</td></tr>"
                          "<tr><th>created</th><td><code>%s</code></td></tr>"
                          "<tr><th>last used</th><td><code>%s</code></td></tr>"
                          "<tr><th>source</th><td><a href=\"%s/source\">generated source</a>"
                          "</td></tr></table></section>\n",
                      (long long)bd->compile_ms, created, used, key);
    json_t *meta = bd->metadata ? json_loads(bd->metadata, 0, NULL) : NULL;
    char *pretty = meta ? json_dumps(meta, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    tl_srv_buf_puts(&b, "<section id=\"metadata\"><h2>Metadata</h2>");
    pre(&b, pretty ? pretty : bd->metadata ? bd->metadata : "");
    tl_srv_buf_puts(&b, "</section>\n<section id=\"manifest\"><h2>Key manifest</h2>"
                        "<p class=\"muted\">The build key is the SHA-256 of this text "
                        "(proto/kernel-meta.md section 4).</p>");
    pre(&b, bd->manifest ? bd->manifest : "");
    tl_srv_buf_puts(&b, "</section>\n");
    free(pretty);
    json_decref(meta);
  }
  tl_cache_build_free(bd);
  return page_send_retry(r, status, &b, retry_after);
}

int tl_srv_status_dispatch(tl_srv_req *r) {
  if (strcmp(r->url, "/status") == 0)
    return get_status(r);
  return get_build_page(r, r->url + strlen("/status/builds/"));
}
