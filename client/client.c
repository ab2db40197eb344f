/*
 * client.c - the tl_client handle of libtlclient: its defaults, the typed
 * setters that check their values, duplication for other threads, the log
 * hook, and the one-time initialisation of libcurl.  The network is in
 * http.c, the builds and the local cache in fetch.c.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../cache/tlbundle.h"
#include "internal.h"

#define DEFAULT_SERVER "http://127.0.0.1:8470"
#define DEFAULT_CACHE_MAX ((int64_t)1 << 30)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init(void) { curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT); }

static char *dup_str(const char *s) {
  if (!s)
    return NULL;
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

/* $XDG_CACHE_HOME/tlclient/cache.db, else $HOME/.cache/tlclient/cache.db,
 * else NULL (no local cache).  Only absolute directories count, as the XDG
 * specification says. */
static char *default_cache_path(void) {
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  char buf[TL_CLIENT_PATH_MAX];
  int n;
  if (xdg && xdg[0] == '/')
    n = snprintf(buf, sizeof buf, "%s/tlclient/cache.db", xdg);
  else if (home && home[0] == '/')
    n = snprintf(buf, sizeof buf, "%s/.cache/tlclient/cache.db", home);
  else
    return NULL;
  if (n < 0 || (size_t)n >= sizeof buf)
    return NULL;
  return dup_str(buf);
}

static uint64_t seed_rng(const void *addr) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 16) ^
               (uint64_t)(uintptr_t)addr;
  return s ? s : 0x9e3779b97f4a7c15ULL;
}

static tl_status make(tl_client **out, tl_error *err) {
  *out = NULL;
  pthread_once(&curl_once, curl_init);
  if (curl_init_result != CURLE_OK)
    return tl_error_set(err, TL_INTERNAL, "libcurl did not initialise: %s", curl_easy_strerror(curl_init_result));
  tl_client *c = calloc(1, sizeof *c);
  if (!c)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  c->rng = seed_rng(c);
  *out = c;
  return TL_OK;
}

tl_status tl_client_new(tl_client **out, tl_error *err) {
  tl_error_clear(err);
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_new: out is NULL");
  tl_status st = make(out, err);
  if (st != TL_OK)
    return st;
  tl_client *c = *out;
  c->server = dup_str(DEFAULT_SERVER);
  c->nservers = 1;
  c->connect_timeout_ms = 5000;
  c->timeout_ms = 300000;
  c->retries = 4;
  c->backoff_base_ms = 200;
  c->backoff_max_ms = 5000;
  c->tuning_ttl_ms = TL_CLIENT_TUNING_TTL_MS;
  c->cache_path = default_cache_path();
  c->cache_max_bytes = DEFAULT_CACHE_MAX;
  if (!c->server) {
    tl_client_free(c);
    *out = NULL;
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  return TL_OK;
}

tl_status tl_client_dup(const tl_client *src, tl_client **out, tl_error *err) {
  tl_error_clear(err);
  if (!src || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_dup: NULL argument");
  tl_status st = make(out, err);
  if (st != TL_OK)
    return st;
  tl_client *c = *out;
  c->server = dup_str(src->server);
  c->nservers = src->nservers;
  c->current = src->current;
  c->token = dup_str(src->token);
  c->ca_file = dup_str(src->ca_file);
  c->cache_path = dup_str(src->cache_path);
  c->connect_timeout_ms = src->connect_timeout_ms;
  c->timeout_ms = src->timeout_ms;
  c->retries = src->retries;
  c->backoff_base_ms = src->backoff_base_ms;
  c->backoff_max_ms = src->backoff_max_ms;
  c->cache_max_bytes = src->cache_max_bytes;
  c->offline = src->offline;
  c->tuning_ttl_ms = src->tuning_ttl_ms; /* the answers kept are not shared */
  memcpy(c->compiler_id, src->compiler_id, sizeof c->compiler_id); /* the server is the same */
  c->compiler_id_known = src->compiler_id_known;
  c->compiler_id_probed = src->compiler_id_probed;
  c->log_fn = src->log_fn;
  c->log_user = src->log_user;
  if (!c->server || (src->token && !c->token) || (src->ca_file && !c->ca_file) ||
      (src->cache_path && !c->cache_path)) {
    tl_client_free(c);
    *out = NULL;
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  if (src->bundle) { /* shared, not mapped and checked again */
    c->bundle = src->bundle;
    c->bundle_path = src->bundle_path;
    c->bundle_refs = src->bundle_refs;
    atomic_fetch_add(c->bundle_refs, 1);
  }
  if (src->tuning && (st = tl_client_set_tuning(c, src->tuning, err)) != TL_OK) {
    tl_client_free(c);
    *out = NULL;
    return st;
  }
  return TL_OK;
}

void tl_client_free(tl_client *c) {
  if (!c)
    return;
  if (c->curl)
    curl_easy_cleanup(c->curl);
  curl_slist_free_all(c->headers);
  tl_cache_close(c->cache);
  tl_client_bundle_release(c);
  tl_tuning_memo_clear(c);
  free(c->tuning);
  free(c->server);
  free(c->token);
  free(c->ca_file);
  free(c->cache_path);
  free(c);
}

void tl_clog(tl_client *c, const char *fmt, ...) {
  if (!c->log_fn)
    return;
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  c->log_fn(c->log_user, line);
}

/* ---- settings ------------------------------------------------------------------ */

/* Replaces *slot with a copy of value (NULL clears it). */
static tl_status set_string(char **slot, const char *value, tl_error *err) {
  char *copy = NULL;
  if (value && !(copy = dup_str(value)))
    return tl_error_set(err, TL_NOMEM, "out of memory");
  free(*slot);
  *slot = copy;
  return TL_OK;
}

/* Checks one server URL of n bytes; the length without its trailing '/'s in *keep. */
static tl_status check_url(const char *url, size_t n, size_t *keep, tl_error *err) {
  size_t scheme = strncmp(url, "http://", 7) == 0 ? 7 : strncmp(url, "https://", 8) == 0 ? 8 : 0;
  if (!scheme)
    return tl_error_set(err, TL_INVALID_ARG, "server URL '%.*s' must start with http:// or https://",
                        (int)(n < 200 ? n : 200), url);
  if (n == scheme || url[scheme] == '/')
    return tl_error_set(err, TL_INVALID_ARG, "server URL '%.*s' has no host", (int)(n < 200 ? n : 200), url);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)url[i] <= ' ' || (unsigned char)url[i] >= 0x7f || url[i] == '?' || url[i] == '#')
      return tl_error_set(err, TL_INVALID_ARG,
                          "server URL '%.*s' has a space, a control character, '?' or '#' at byte %zu",
                          (int)(n < 200 ? n : 200), url, i + 1);
  while (n > scheme + 1 && url[n - 1] == '/')
    n--;
  *keep = n;
  return TL_OK;
}

tl_status tl_client_set_server(tl_client *c, const char *url, tl_error *err) {
  tl_error_clear(err);
  if (!c || !url)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_set_server: NULL argument");
  size_t n = strlen(url);
  if (n > TL_CLIENT_URL_MAX)
    return tl_error_set(err, TL_TOO_LARGE, "the server URL is %zu bytes long; the limit is %d", n,
                        TL_CLIENT_URL_MAX);
  char *copy = malloc(n + 1);
  if (!copy)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  size_t out = 0;
  int count = 0;
  for (const char *p = url;;) { /* URL[,URL]...: each checked, trailing '/'s dropped */
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p), keep = 0;
    tl_status st = ++count > TL_CLIENT_SERVERS_MAX
                       ? tl_error_set(err, TL_LIMIT, "more than %d server URLs", TL_CLIENT_SERVERS_MAX)
                       : check_url(p, len, &keep, err);
    if (st != TL_OK) {
      free(copy);
      return st;
    }
    if (out)
      copy[out++] = ',';
    memcpy(copy + out, p, keep);
    out += keep;
    if (!comma)
      break;
    p = comma + 1;
  }
  copy[out] = 0;
  free(c->server);
  c->server = copy;
  c->nservers = count;
  c->current = 0;
  c->compiler_id[0] = 0; /* another server: its compiler is learned anew */
  c->compiler_id_known = c->compiler_id_probed = false;
  tl_tuning_memo_clear(c); /* and its tuning records */
  return TL_OK;
}

const char *tl_client_base_url(const tl_client *c, size_t *len) {
  const char *p = c->server;
  for (int i = 0; i < c->current; i++)
    p = strchr(p, ',') + 1;
  const char *comma = strchr(p, ',');
  *len = comma ? (size_t)(comma - p) : strlen(p);
  return p;
}

tl_status tl_client_set_token(tl_client *c, const char *token, tl_error *err) {
  tl_error_clear(err);
  if (!c)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_set_token: NULL client");
  if (token && !*token)
    token = NULL;
  if (token) {
    size_t n = strlen(token);
    if (n > TL_CLIENT_TOKEN_MAX)
      return tl_error_set(err, TL_TOO_LARGE, "the token is %zu bytes long; the limit is %d", n, TL_CLIENT_TOKEN_MAX);
    for (size_t i = 0; i < n; i++)
      if (!isgraph((unsigned char)token[i]))
        return tl_error_set(err, TL_INVALID_ARG, "the token has a space or a non-printable character at byte %zu",
                            i + 1);
  }
  return set_string(&c->token, token, err);
}

tl_status tl_client_set_ca_file(tl_client *c, const char *path, tl_error *err) {
  tl_error_clear(err);
  if (!c)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_set_ca_file: NULL client");
  if (path && (!*path || strlen(path) > TL_CLIENT_PATH_MAX))
    return tl_error_set(err, *path ? TL_TOO_LARGE : TL_INVALID_ARG, "the CA file path is empty or too long");
  return set_string(&c->ca_file, path, err);
}

tl_status tl_client_set_connect_timeout_ms(tl_client *c, long ms, tl_error *err) {
  tl_error_clear(err);
  if (!c || ms < 1 || ms > 600000L)
    return tl_error_set(err, TL_INVALID_ARG, "the connect time-out is from 1 ms to 10 minutes, not %ld ms", ms);
  c->connect_timeout_ms = ms;
  return TL_OK;
}

tl_status tl_client_set_timeout_ms(tl_client *c, long ms, tl_error *err) {
  tl_error_clear(err);
  if (!c || ms < 1 || ms > 86400000L)
    return tl_error_set(err, TL_INVALID_ARG, "the request time-out is from 1 ms to 24 hours, not %ld ms", ms);
  c->timeout_ms = ms;
  return TL_OK;
}

tl_status tl_client_set_retries(tl_client *c, int retries, tl_error *err) {
  tl_error_clear(err);
  if (!c || retries < 0 || retries > TL_CLIENT_RETRIES_MAX)
    return tl_error_set(err, TL_INVALID_ARG, "retries are from 0 to %d, not %d", TL_CLIENT_RETRIES_MAX, retries);
  c->retries = retries;
  return TL_OK;
}

tl_status tl_client_set_backoff_ms(tl_client *c, long base_ms, long max_ms, tl_error *err) {
  tl_error_clear(err);
  if (!c || base_ms < 1 || base_ms > 60000 || max_ms < base_ms || max_ms > 600000)
    return tl_error_set(err, TL_INVALID_ARG,
                        "the backoff is base 1 to 60000 ms and max from base to 600000 ms, not %ld and %ld", base_ms,
                        max_ms);
  c->backoff_base_ms = base_ms;
  c->backoff_max_ms = max_ms;
  return TL_OK;
}

tl_status tl_client_set_cache_path(tl_client *c, const char *path, tl_error *err) {
  tl_error_clear(err);
  if (!c)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_set_cache_path: NULL client");
  if (path && !*path)
    return tl_error_set(err, TL_INVALID_ARG, "the local cache path is empty (NULL turns the local cache off)");
  if (path && strlen(path) > TL_CACHE_PATH_MAX)
    return tl_error_set(err, TL_TOO_LARGE, "the local cache path is longer than %d bytes", TL_CACHE_PATH_MAX);
  tl_status st = set_string(&c->cache_path, path, err);
  if (st != TL_OK)
    return st;
  tl_cache_close(c->cache); /* reopened at the next use */
  c->cache = NULL;
  c->cache_failed = false;
  return TL_OK;
}

tl_status tl_client_set_cache_max_bytes(tl_client *c, int64_t bytes, tl_error *err) {
  tl_error_clear(err);
  if (!c || bytes < 0 || bytes > ((int64_t)1 << 50))
    return tl_error_set(err, TL_INVALID_ARG, "the local cache cap is from 0 to 2^50 bytes, not %lld",
                        (long long)bytes);
  c->cache_max_bytes = bytes;
  return TL_OK;
}

tl_status tl_client_set_offline(tl_client *c, int offline, tl_error *err) {
  tl_error_clear(err);
  if (!c)
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_set_offline: NULL client");
  c->offline = offline != 0;
  return TL_OK;
}

void tl_client_set_log(tl_client *c, tl_client_log_fn fn, void *user) {
  if (!c)
    return;
  c->log_fn = fn;
  c->log_user = user;
}

const char *tl_client_server(const tl_client *c) { return c ? c->server : NULL; }
const char *tl_client_cache_path(const tl_client *c) { return c ? c->cache_path : NULL; }
int64_t tl_client_cache_max_bytes(const tl_client *c) { return c ? c->cache_max_bytes : 0; }

void tl_client_get_stats(const tl_client *c, tl_client_stats *out) {
  if (!out)
    return;
  if (!c)
    memset(out, 0, sizeof *out);
  else
    *out = c->stats;
}

const char *tl_source_name(tl_source s) {
  switch (s) {
  case TL_SOURCE_LOCAL: return "local";
  case TL_SOURCE_SERVER_CACHE: return "server-cache";
  case TL_SOURCE_COMPILED: return "compiled";
  case TL_SOURCE_BUNDLE: return "bundle";
  }
  return "unknown";
}
