/*
 * http.c - libtlclient's HTTP layer on libcurl: one easy handle per client,
 * kept between requests so that the connection stays alive; time-outs;
 * a bearer token; TLS with an optional CA file; a cap on every answer's
 * size; and retries with exponential backoff and jitter when the server
 * cannot be reached or answers 503/429, waiting at least what Retry-After
 * says, all within the client's time-out: it bounds the whole request, its
 * tries and the waits between them (a wait that would end past it is not
 * waited: the request fails at once, saying so).  It also turns the server's JSON error answers
 * ({"error": {"code", "message", "pointer", "diagnostics"}}) into a
 * tl_status and a message.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "internal.h"

#define RETRY_AFTER_CAP_S 60
#define DIAG_LINES_MAX 8

typedef struct {
  tl_http_response *resp;
  size_t cap, max;
  bool too_large, nomem;
} sink;

static size_t on_body(char *data, size_t size, size_t nmemb, void *user) {
  sink *s = user;
  size_t n = size * nmemb;
  tl_http_response *r = s->resp;
  if (r->len + n > s->max) {
    s->too_large = true;
    return 0;
  }
  if (r->len + n + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < r->len + n + 1)
      cap *= 2;
    char *nb = realloc(r->body, cap);
    if (!nb) {
      s->nomem = true;
      return 0;
    }
    r->body = nb;
    s->cap = cap;
  }
  memcpy(r->body + r->len, data, n);
  r->len += n;
  r->body[r->len] = 0;
  return n;
}

/* Reads Retry-After (delay-seconds form; an HTTP date is ignored). */
static size_t on_header(char *data, size_t size, size_t nmemb, void *user) {
  sink *s = user;
  size_t n = size * nmemb;
  static const char name[] = "retry-after:";
  if (n > sizeof name - 1 && strncasecmp(data, name, sizeof name - 1) == 0) {
    const char *p = data + sizeof name - 1;
    while (p < data + n && (*p == ' ' || *p == '\t'))
      p++;
    long v = 0;
    int digits = 0;
    while (p < data + n && isdigit((unsigned char)*p) && digits < 9) {
      v = v * 10 + (*p++ - '0');
      digits++;
    }
    if (digits)
      s->resp->retry_after = v;
  }
  return n;
}

void tl_http_response_free(tl_http_response *resp) {
  if (!resp)
    return;
  free(resp->body);
  memset(resp, 0, sizeof *resp);
  resp->retry_after = -1;
}

/* Milliseconds on the monotonic clock. */
static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static uint64_t rng_next(tl_client *c) { /* xorshift64* */
  c->rng ^= c->rng >> 12;
  c->rng ^= c->rng << 25;
  c->rng ^= c->rng >> 27;
  return c->rng * 0x2545F4914F6CDD1DULL;
}

/* The wait before try `attempt` (1-based retry number): half to all of
 * min(max, base * 2^(attempt-1)), at least Retry-After when given. */
static long backoff_ms(tl_client *c, int attempt, long retry_after) {
  long d = c->backoff_base_ms;
  for (int i = 1; i < attempt && d < c->backoff_max_ms; i++)
    d *= 2;
  if (d > c->backoff_max_ms)
    d = c->backoff_max_ms;
  long half = d / 2;
  long wait = half + (long)(rng_next(c) % (uint64_t)(half + 1));
  if (retry_after >= 0) {
    long ra = (retry_after > RETRY_AFTER_CAP_S ? RETRY_AFTER_CAP_S : retry_after) * 1000L;
    long jitter = (long)(rng_next(c) % (uint64_t)(half + 1));
    if (wait < ra + jitter)
      wait = ra + jitter;
  }
  return wait;
}

/* Transport errors worth another try: the server was not reached, or the
 * connection broke before an answer. */
static bool transient(CURLcode rc, double connect_time) {
  switch (rc) {
  case CURLE_COULDNT_CONNECT:
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR:
  case CURLE_GOT_NOTHING:
  case CURLE_PARTIAL_FILE:
    return true;
  case CURLE_OPERATION_TIMEDOUT:
    return connect_time <= 0; /* timed out connecting, not waiting for a long answer */
  default:
    return false;
  }
}

static tl_status setup(tl_client *c, CURL *h, const char *method, const char *url, const char *ctype,
                       const char *body, size_t body_len, long timeout_ms, sink *s, char *errbuf, tl_error *err) {
  curl_easy_reset(h); /* keeps the live connections */
  curl_slist_free_all(c->headers);
  c->headers = NULL;
  struct curl_slist *hd = NULL, *t;
  char auth[TL_CLIENT_TOKEN_MAX + 32];
  if (c->token) {
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
    if (!(t = curl_slist_append(hd, auth)))
      goto nomem;
    hd = t;
  }
  if (!(t = curl_slist_append(hd, "Expect:"))) /* no 100-continue round trip */
    goto nomem;
  hd = t;
  if (body) {
    char ct[128];
    snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
    if (!(t = curl_slist_append(hd, ct)))
      goto nomem;
    hd = t;
  }
  c->headers = hd;
  bool ok = curl_easy_setopt(h, CURLOPT_URL, url) == CURLE_OK;
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https"); /* may be unknown to an old libcurl */
  ok &= curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd) == CURLE_OK;
  ok &= curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK;
  ok &= curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L) == CURLE_OK;
  ok &= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms) == CURLE_OK;
  ok &= curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms) == CURLE_OK;
  ok &= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK;
  ok &= curl_easy_setopt(h, CURLOPT_WRITEDATA, s) == CURLE_OK;
  ok &= curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK;
  ok &= curl_easy_setopt(h, CURLOPT_HEADERDATA, s) == CURLE_OK;
  ok &= curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf) == CURLE_OK;
  ok &= curl_easy_setopt(h, CURLOPT_USERAGENT, "libtlclient/" TL_CLIENT_VERSION) == CURLE_OK;
  ok &= curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)s->max) == CURLE_OK;
  if (c->ca_file)
    ok &= curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file) == CURLE_OK;
  if (strcmp(method, "HEAD") == 0)
    ok &= curl_easy_setopt(h, CURLOPT_NOBODY, 1L) == CURLE_OK;
  else if (body) {
    ok &= curl_easy_setopt(h, CURLOPT_POSTFIELDS, body) == CURLE_OK;
    ok &= curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len) == CURLE_OK;
    if (strcmp(method, "POST") != 0)
      ok &= curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method) == CURLE_OK;
  } else if (strcmp(method, "GET") != 0)
    ok &= curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method) == CURLE_OK;
  if (!ok)
    return tl_error_set(err, TL_INTERNAL, "libcurl refused an option for %s %s", method, url);
  return TL_OK;
nomem:
  curl_slist_free_all(hd);
  return tl_error_set(err, TL_NOMEM, "out of memory");
}

tl_status tl_http_request(tl_client *c, const char *method, const char *path, const char *body, size_t body_len,
                          size_t max_bytes, tl_http_response *resp, tl_error *err) {
  return tl_http_request_as(c, method, path, "application/json", body, body_len, max_bytes, resp, err);
}

tl_status tl_http_request_as(tl_client *c, const char *method, const char *path, const char *content_type,
                             const char *body, size_t body_len, size_t max_bytes, tl_http_response *resp,
                             tl_error *err) {
  memset(resp, 0, sizeof *resp);
  resp->retry_after = -1;
  if (c->offline)
    return tl_error_set(err, TL_NETWORK, "offline: no server is contacted");
  if (!c->curl && !(c->curl = curl_easy_init()))
    return tl_error_set(err, TL_NOMEM, "libcurl could not make a handle");
  CURL *h = c->curl;
  size_t ulen = strlen(c->server) + strlen(path) + 1;
  char *url = malloc(ulen);
  if (!url)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  tl_status st = TL_OK;
  long deadline = now_ms() + c->timeout_ms; /* the whole request, retries and waits included */
  for (int attempt = 0;; attempt++) {
    size_t blen;
    const char *base = tl_client_base_url(c, &blen);
    snprintf(url, ulen, "%.*s%s", (int)blen, base, path);
    tl_http_response_free(resp);
    sink s = {.resp = resp, .max = max_bytes};
    char errbuf[CURL_ERROR_SIZE] = "";
    long left = deadline - now_ms();
    if ((st = setup(c, h, method, url, content_type, body, body_len, left > 1 ? left : 1, &s, errbuf, err)) != TL_OK)
      break;
    CURLcode rc = curl_easy_perform(h);
    if (s.nomem) {
      st = tl_error_set(err, TL_NOMEM, "out of memory reading the answer to %s %s", method, url);
      break;
    }
    if (s.too_large || rc == CURLE_FILESIZE_EXCEEDED) {
      st = tl_error_set(err, TL_TOO_LARGE, "%s %s: the answer is larger than %zu bytes", method, url, max_bytes);
      break;
    }
    double connect_time = 0;
    curl_easy_getinfo(h, CURLINFO_CONNECT_TIME, &connect_time);
    long status = 0, connects = 0;
    if (curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK)
      c->stats.connections += connects;
    if (rc == CURLE_OK)
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    resp->status = status;
    c->stats.requests += rc == CURLE_OK;
    bool busy = rc == CURLE_OK && (status == 503 || status == 429);
    if (rc == CURLE_OK && !busy) {
      st = TL_OK;
      break;
    }
    char why[CURL_ERROR_SIZE + 128];
    if (busy)
      snprintf(why, sizeof why, "the server answered %ld (%s)", status,
               status == 503 ? "overloaded or shutting down" : "too many requests");
    else
      snprintf(why, sizeof why, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
    bool retry = busy || transient(rc, connect_time);
    if (!retry || attempt >= c->retries) {
      if (busy)
        st = tl_error_set(err, TL_BUSY, "%s %s: %s%s", method, url, why,
                          attempt ? ", also after every retry" : "");
      else if (rc == CURLE_OPERATION_TIMEDOUT)
        st = tl_error_set(err, retry ? TL_NETWORK : TL_TIMEOUT, "%s %s: no answer within the time-out: %s", method,
                          url, why);
      else
        st = tl_error_set(err, TL_NETWORK, "cannot reach the server: %s %s: %s%s", method, url, why,
                          attempt ? " (after every retry)" : "");
      break;
    }
    /* several replicas: the next one at once; a full round waits the backoff */
    long wait = backoff_ms(c, attempt + 1, busy ? resp->retry_after : -1);
    if (c->nservers > 1) {
      c->current = (c->current + 1) % c->nservers;
      if ((attempt + 1) % c->nservers != 0)
        wait = 0;
      base = tl_client_base_url(c, &blen);
    }
    /* the time-out bounds the whole request, across every server tried */
    if (now_ms() + wait >= deadline) {
      st = tl_error_set(err, busy ? TL_BUSY : TL_NETWORK,
                        "%s %s: %s; not tried again: the next try%s%.*s, in %.1f s%s, would start past the "
                        "client's time-out of %.1f s",
                        method, url, why, c->nservers > 1 ? " on " : "", c->nservers > 1 ? (int)blen : 0, base,
                        wait / 1000.0, busy && resp->retry_after >= 0 ? " (the server said Retry-After)" : "",
                        c->timeout_ms / 1000.0);
      break;
    }
    tl_clog(c, "%s %s: %s; try %d of %d%s%.*s in %.1f s%s", method, url, why, attempt + 2, c->retries + 1,
            c->nservers > 1 ? " on " : "", c->nservers > 1 ? (int)blen : 0, base, wait / 1000.0,
            busy && resp->retry_after >= 0 ? " (the server said Retry-After)" : "");
    c->stats.retries++;
    sleep_ms(wait);
  }
  free(url);
  return st;
}

/* ---- error answers ------------------------------------------------------------------ */

static tl_status status_of(const char *wire, long http) {
  if (wire)
    for (int s = 0; s < TL_STATUS_COUNT_; s++)
      if (strcmp(tl_status_name((tl_status)s), wire) == 0)
        return (tl_status)s;
  switch (http) {
  case 400: return TL_INVALID_ARG;
  case 401: return TL_UNAUTHORIZED;
  case 403: return TL_FORBIDDEN;
  case 404: return TL_NOT_FOUND;
  case 413: return TL_TOO_LARGE;
  case 422: return TL_BAD_PROGRAM;
  case 429:
  case 503: return TL_BUSY;
  case 501: return TL_NO_TOOLCHAIN;
  case 504: return TL_TIMEOUT;
  }
  if (http >= 500)
    return TL_INTERNAL;
  return TL_INVALID_ARG;
}

/* Appends to buf (of size cap, holding a string) as much of the text as fits. */
static void append(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...) {
  size_t n = strlen(buf);
  if (n + 1 >= cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + n, cap - n, fmt, ap);
  va_end(ap);
}

tl_status tl_http_error_json(void *error_obj, void *diagnostics, long http, const char *what, tl_error *err) {
  json_t *e = error_obj, *diags = diagnostics;
  const char *wire = json_string_value(json_object_get(e, "code"));
  const char *msg = json_string_value(json_object_get(e, "message"));
  const char *ptr = json_string_value(json_object_get(e, "pointer"));
  tl_status st = status_of(wire, http);
  char buf[TL_ERROR_MESSAGE_MAX];
  snprintf(buf, sizeof buf, "%s: %s", what, msg ? msg : tl_strerror(st));
  if (http == 401 || http == 403)
    append(buf, sizeof buf, " (HTTP %ld: check the token)", http);
  else if (!msg)
    append(buf, sizeof buf, " (HTTP %ld)", http);
  if (!json_is_array(diags))
    diags = json_object_get(e, "diagnostics");
  size_t i;
  json_t *d;
  json_array_foreach(diags, i, d) {
    if (i == DIAG_LINES_MAX) {
      append(buf, sizeof buf, "\n  ... and %zu more", json_array_size(diags) - i);
      break;
    }
    const char *dp = json_string_value(json_object_get(d, "pointer"));
    const char *dm = json_string_value(json_object_get(d, "message"));
    json_int_t col = json_integer_value(json_object_get(d, "column"));
    json_int_t line = json_integer_value(json_object_get(d, "line"));
    if (dp && col)
      append(buf, sizeof buf, "\n  %s:%lld: %s", dp, (long long)col, dm ? dm : "?");
    else if (dp)
      append(buf, sizeof buf, "\n  %s: %s", dp, dm ? dm : "?");
    else if (line)
      append(buf, sizeof buf, "\n  line %lld: %s", (long long)line, dm ? dm : "?");
    else
      append(buf, sizeof buf, "\n  %s", dm ? dm : "?");
  }
  tl_error_set_at(err, st, ptr, (int)json_integer_value(json_object_get(e, "column")), "%s", buf);
  return st;
}

tl_status tl_http_error(const tl_http_response *resp, const char *what, tl_error *err) {
  json_t *doc = resp->body ? json_loadb(resp->body, resp->len, 0, NULL) : NULL;
  json_t *e = json_object_get(doc, "error");
  tl_status st;
  if (json_is_object(e)) {
    st = tl_http_error_json(e, NULL, resp->status, what, err);
  } else {
    st = status_of(NULL, resp->status);
    /* not our server's JSON (a proxy, libmicrohttpd's own 431): show its start */
    char snippet[201] = "";
    if (resp->body) {
      size_t n = resp->len < 200 ? resp->len : 200, k = 0;
      for (size_t i = 0; i < n; i++)
        snippet[k++] = isprint((unsigned char)resp->body[i]) ? resp->body[i] : ' ';
      snippet[k] = 0;
    }
    tl_error_set(err, st, "%s: HTTP %ld%s%s", what, resp->status, snippet[0] ? ": " : "", snippet);
  }
  json_decref(doc);
  return st;
}
