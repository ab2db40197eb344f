/*
 * http.c - tlserverd's HTTP layer on libmicrohttpd: the daemon (epoll, a
 * pool of threads, suspend/resume for requests that wait for compiles),
 * routing, the checks every request passes before its handler runs
 * (method, auth, body size, content type), request bodies, JSON error
 * answers, the request log and metrics, the background eviction thread,
 * and the start and graceful stop of the whole server.
 *
 * A request's life: the URI log callback allocates its tl_srv_req (so that
 * even requests libmicrohttpd rejects itself are timed); the first handler
 * call routes it and runs the checks, answering at once when one fails (a
 * too large Content-Length is refused before any of the body is read); the
 * following calls collect the body up to --max-body; the last call hands it
 * to api.c; the completion callback logs it, counts it and frees it.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <microhttpd.h>
#include "server.h"
#include "../compiler/tlcompiler.h"
#include "../proto/tl_hash.h"

/* ==== routes ==================================================================== */

typedef struct route_def {
  const char *path;
  bool prefix;
  tl_srv_route route;
  const char *allow; /* methods, for 405's Allow header */
  unsigned scope;
  bool body; /* takes a request body (the others' are read and dropped) */
} route_def;

static const route_def routes[] = {
    {"/healthz", false, TL_ROUTE_HEALTHZ, "GET, HEAD", 0, false},
    {"/readyz", false, TL_ROUTE_READYZ, "GET, HEAD", 0, false},
    {"/v1/info", false, TL_ROUTE_INFO, "GET, HEAD", TL_SCOPE_READ, false},
    {"/metrics", false, TL_ROUTE_METRICS, "GET, HEAD", TL_SCOPE_ADMIN, false},
    {"/v1/compile", false, TL_ROUTE_COMPILE, "POST", TL_SCOPE_COMPILE, true},
    {"/v1/bundles", false, TL_ROUTE_BUNDLES, "POST", TL_SCOPE_ADMIN, true},
    {"/v1/tunings", false, TL_ROUTE_TUNINGS, "POST", TL_SCOPE_COMPILE, true},
    {"/v1/tunings/", true, TL_ROUTE_TUNINGS, "GET, HEAD", TL_SCOPE_READ, false},
    {"/v1/artifacts/", true, TL_ROUTE_ARTIFACTS, "GET, HEAD", TL_SCOPE_READ, false},
    {"/v1/kernels/", true, TL_ROUTE_KERNELS, "GET, HEAD", TL_SCOPE_READ, false},
    {"/status", false, TL_ROUTE_STATUS, "GET, HEAD", TL_SCOPE_READ, false},
    {"/status/builds/", true, TL_ROUTE_STATUS, "GET, HEAD", TL_SCOPE_READ, false},
};

static const route_def *find_route(const char *url) {
  for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
    const route_def *d = &routes[i];
    size_t n = strlen(d->path);
    if (d->prefix ? strncmp(url, d->path, n) == 0 : strcmp(url, d->path) == 0)
      return d;
  }
  return NULL;
}

static bool method_allowed(const route_def *d, const char *method) {
  if (d->body)
    return strcmp(method, MHD_HTTP_METHOD_POST) == 0;
  return strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
}

/* ==== answers ====================================================================== */

int tl_srv_respond(tl_srv_req *r, int status, struct MHD_Response *resp, int64_t bytes) {
  if (!resp)
    return MHD_NO;
  int ok = tl_srv_respond_shared(r, status, resp, bytes);
  MHD_destroy_response(resp);
  return ok;
}

int tl_srv_respond_shared(tl_srv_req *r, int status, struct MHD_Response *resp, int64_t bytes) {
  enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)status, resp);
  if (ok == MHD_YES) {
    r->responded = true;
    r->status = status;
    r->bytes = r->head ? 0 : bytes;
  }
  return ok;
}

static void free_cb(void *p) { free(p); }

int tl_srv_respond_json(tl_srv_req *r, int status, tl_srv_buf *b) {
  if (b->failed || !b->data) {
    tl_srv_buf_free(b);
    static const char oom[] =
        "{\"error\": {\"code\": \"out_of_memory\", \"message\": \"out of memory\"}}\n";
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    if (resp)
      MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return tl_srv_respond(r, 500, resp, sizeof oom - 1);
  }
  size_t n = b->len;
  char *data = b->data;
  memset(b, 0, sizeof *b);
  struct MHD_Response *resp =
      MHD_create_response_from_buffer_with_free_callback_cls(n, data, free_cb, data);
  if (!resp) {
    free(data);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  if (r->close)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  if (status == 503 || status == 429)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
  if (status == 401)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"tlserverd\"");
  return tl_srv_respond(r, status, resp, (int64_t)n);
}

void tl_srv_error_members(tl_srv_buf *b, const tl_error *err) {
  tl_srv_buf_printf(b, "\"code\": \"%s\", \"message\": \"", tl_status_name(err->code));
  tl_srv_buf_json_str(b, err->message[0] ? err->message : tl_strerror(err->code));
  tl_srv_buf_puts(b, "\"");
  if (err->pointer[0]) {
    tl_srv_buf_puts(b, ", \"pointer\": \"");
    tl_srv_buf_json_str(b, err->pointer);
    tl_srv_buf_puts(b, "\"");
  }
  if (err->column > 0)
    tl_srv_buf_printf(b, ", \"column\": %d", err->column);
}

int tl_srv_respond_error(tl_srv_req *r, const tl_error *err) {
  tl_srv_buf b = {0};
  tl_srv_buf_puts(&b, "{\"error\": {");
  tl_srv_error_members(&b, err);
  tl_srv_buf_puts(&b, "}}\n");
  return tl_srv_respond_json(r, tl_status_http(err->code), &b);
}

int tl_srv_respond_http_error(tl_srv_req *r, int status, const char *code, const char *message) {
  tl_srv_buf b = {0};
  tl_srv_buf_printf(&b, "{\"error\": {\"code\": \"%s\", \"message\": \"", code);
  tl_srv_buf_json_str(&b, message);
  tl_srv_buf_puts(&b, "\"}}\n");
  return tl_srv_respond_json(r, status, &b);
}

/* ==== the request log ============================================================== */

/* Copies s for a log line, escaping what is not printable ASCII as %XX. */
static void log_escape(tl_srv_buf *b, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '%')
      tl_srv_buf_printf(b, "%%%02X", c);
    else
      tl_srv_buf_append(b, s, 1);
  }
}

void tl_srv_client_addr(struct MHD_Connection *conn, char out[TL_SRV_CLIENT_MAX]) {
  out[0] = 0;
  const union MHD_ConnectionInfo *ci =
      conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
  if (!ci || !ci->client_addr)
    return;
  const struct sockaddr *sa = ci->client_addr;
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, TL_SRV_CLIENT_MAX);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out, TL_SRV_CLIENT_MAX);
}

static void log_request(tl_srv *s, tl_srv_req *r, int64_t us) {
  if (s->cfg.log_format == TL_LOG_OFF)
    return;
  char when[32];
  tl_srv_format_time(tl_srv_wall_ms(), when);
  char remote[TL_SRV_CLIENT_MAX];
  tl_srv_client_addr(r->conn, remote);
  if (!remote[0])
    strcpy(remote, "-");
  const char *keys = r->keys.len ? r->keys.data : "-";
  tl_srv_buf b = {0};
  if (s->cfg.log_format == TL_LOG_JSON) {
    tl_srv_buf_printf(&b, "{\"time\": \"%s\", \"remote\": \"%s\", \"method\": \"", when, remote);
    tl_srv_buf_json_str(&b, r->method ? r->method : "-");
    tl_srv_buf_puts(&b, "\", \"path\": \"");
    tl_srv_buf_json_str(&b, r->raw_uri);
    tl_srv_buf_printf(&b, "\", \"status\": %d, \"bytes\": %lld, \"us\": %lld, \"key\": ", r->status,
                      (long long)r->bytes, (long long)us);
    if (r->keys.len) {
      tl_srv_buf_puts(&b, "\"");
      tl_srv_buf_json_str(&b, keys);
      tl_srv_buf_puts(&b, "\"}\n");
    } else {
      tl_srv_buf_puts(&b, "null}\n");
    }
  } else {
    tl_srv_buf_printf(&b, "%s %s ", when, remote);
    log_escape(&b, r->method ? r->method : "-");
    tl_srv_buf_puts(&b, " ");
    log_escape(&b, r->raw_uri[0] ? r->raw_uri : "-");
    tl_srv_buf_printf(&b, " %d %lld %lldus %s\n", r->status, (long long)r->bytes, (long long)us,
                      keys);
  }
  if (!b.failed && b.len) {
    ssize_t w = write(2, b.data, b.len); /* one write: lines do not interleave */
    (void)w;
  }
  tl_srv_buf_free(&b);
}

/* ==== framing ========================================================================
 * libmicrohttpd 0.9.75 reads a request with both Transfer-Encoding and
 * Content-Length as chunked, uses the first of two Content-Length headers,
 * reads a body of unknown framing (Transfer-Encoding other than chunked)
 * until the connection closes, answers HTTP/1.1 without Host, and cuts a
 * path at an escaped NUL.  Any of these lets a proxy in front of the server
 * and the server disagree on where a request ends (request smuggling), so
 * the first handler call refuses them with 400 (and 413 for a
 * Content-Length over --max-body on any route), and the connection is
 * closed after the answer: the bytes that follow are never read as a
 * request. */

typedef struct framing {
  int host, content_length, transfer_encoding;
  const char *cl, *te;
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value) {
  (void)kind;
  framing *f = cls;
  if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
    f->host++;
  } else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
    f->content_length++;
    f->cl = value;
  } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
    f->transfer_encoding++;
    f->te = value;
  }
  return MHD_YES;
}

/* True when a path holds an escaped control character (%00-%1F, %7F):
 * libmicrohttpd unescapes the path in place, so /metrics%00junk would be
 * routed as /metrics. */
static bool uri_has_escaped_control(const char *uri) {
  for (const char *p = uri; (p = strchr(p, '%')) != NULL; p++) {
    char hi = p[1], lo = hi ? p[2] : 0;
    if (!lo)
      break;
    lo = (char)tolower((unsigned char)lo);
    if (((hi == '0' || hi == '1') && isxdigit((unsigned char)lo)) || (hi == '7' && lo == 'f'))
      return true;
  }
  return false;
}

/* Says what is wrong with a request's framing (NULL: nothing); *status is
 * the HTTP status to answer with. */
static const char *framing_error(tl_srv_req *r, const char *version, int *status) {
  framing f = {0};
  *status = 400;
  if (r->bad_uri)
    return "the path holds an escaped control character (%00-%1F or %7F)";
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_framing, &f);
  if (f.host > 1)
    return "more than one Host header";
  if (f.host == 0 && strcmp(version, MHD_HTTP_VERSION_1_1) == 0)
    return "an HTTP/1.1 request needs a Host header";
  if (f.transfer_encoding && f.content_length)
    return "both Transfer-Encoding and Content-Length: the body's end is ambiguous";
  if (f.transfer_encoding > 1 || (f.te && strcasecmp(f.te, "chunked") != 0))
    return "the only Transfer-Encoding accepted is a single 'chunked'";
  if (f.content_length > 1)
    return "more than one Content-Length header";
  if (f.cl) {
    /* libmicrohttpd accepts up to 2^64-1; compare the digits without overflow */
    size_t n = strlen(f.cl), i = 0;
    while (i < n && f.cl[i] == '0')
      i++;
    int64_t v = 0;
    bool big = n - i > 18;
    for (; !big && i < n; i++)
      v = v * 10 + (f.cl[i] - '0');
    if (big || v > r->body_max) {
      *status = 413;
      return r->route == TL_ROUTE_BUNDLES ? "the bundle is larger than the server's limit (--max-bundle)"
                                          : "the request body is larger than the server's limit (--max-body)";
    }
    r->content_length = v;
  }
  return NULL;
}

/* The connection's deadline record (conns.c), or NULL. */
static tl_srv_conn *conn_of(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

/* ==== the budget of bodies in flight ================================================
 * Every byte of request body the server holds (collected or about to be, up
 * to the request's end) is counted against --max-body-total, so that many
 * unfinished bodies cannot take the server's memory: a body announced with
 * Content-Length reserves its whole size at once (and is refused with 503
 * when it does not fit); a chunked one reserves as its buffer grows. */

static bool body_reserve(tl_srv_req *r, size_t cap) {
  tl_srv *s = r->srv;
  int64_t more = (int64_t)cap - r->body_reserved;
  if (more <= 0)
    return true;
  if (atomic_fetch_add(&s->metrics.body_bytes, more) + more > s->cfg.max_body_total) {
    atomic_fetch_sub(&s->metrics.body_bytes, more);
    atomic_fetch_add(&s->metrics.bodies_refused, 1);
    tl_srv_conns_body_refused(s->conns, more);
    return false;
  }
  r->body_reserved += more;
  tl_srv_conn_body_reserved(s->conns, conn_of(r->conn), more);
  return true;
}

static void body_release(tl_srv_req *r) {
  atomic_fetch_sub(&r->srv->metrics.body_bytes, r->body_reserved);
  tl_srv_conn_body_reserved(r->srv->conns, conn_of(r->conn), -r->body_reserved);
  r->body_reserved = 0;
  free(r->body);
  r->body = NULL;
  r->body_len = r->body_cap = 0;
}

static int respond_body_busy(tl_srv_req *r) {
  tl_error err;
  tl_error_set(&err, TL_BUSY,
               "the server holds as many request bodies as it may (--max-body-total, %lld "
               "bytes); retry later",
               (long long)r->srv->cfg.max_body_total);
  r->close = true;
  return tl_srv_respond_error(r, &err);
}

/* ==== libmicrohttpd callbacks ======================================================== */

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
  tl_srv *s = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context = ci ? tl_srv_conn_opened(s->conns, ci->connect_fd) : NULL;
  } else {
    tl_srv_conn_closed(s->conns, *socket_context);
    *socket_context = NULL;
  }
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  tl_srv *s = cls;
  tl_srv_conn_enter(s->conns, conn_of(conn), TL_CONN_HEAD);
  tl_srv_req *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->srv = s;
  r->conn = conn;
  r->route = TL_ROUTE_OTHER;
  r->content_length = -1;
  r->start_us = tl_srv_now_us();
  snprintf(r->raw_uri, sizeof r->raw_uri, "%s", uri ? uri : "");
  r->bad_uri = uri && uri_has_escaped_control(uri);
  atomic_fetch_add(&s->active, 1);
  return r;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  tl_srv *s = cls;
  tl_srv_req *r = *con_cls;
  if (!r)
    return;
  *con_cls = NULL;
  tl_srv_conn_enter(s->conns, conn_of(conn), TL_CONN_IDLE);
  int64_t us = tl_srv_now_us() - r->start_us;
  /* a request closed before it was answered is logged with status 0 */
  tl_srv_metrics_request(&s->metrics, r->route, r->status, r->bytes, us);
  log_request(s, r, us);
  tl_srv_api_free(r);
  body_release(r);
  tl_srv_buf_free(&r->keys);
  free(r);
  atomic_fetch_sub(&s->active, 1);
}

/* The checks of a request's first call.  Returns true when it may go on;
 * otherwise an answer was queued (or queuing failed: *rc says). */
static bool first_checks(tl_srv_req *r, const char *version, enum MHD_Result *rc) {
  tl_srv *s = r->srv;
  const route_def *d = find_route(r->url);
  *rc = MHD_YES;
  r->route = d && d->body ? d->route : TL_ROUTE_OTHER; /* for the limit of the body */
  r->body_route = d && d->body;
  r->body_max = r->route == TL_ROUTE_BUNDLES ? s->cfg.max_bundle : s->cfg.max_body;
  int status;
  const char *bad = framing_error(r, version, &status);
  if (bad) {
    r->close = true;
    tl_error err;
    tl_error_set(&err, status == 413 ? TL_TOO_LARGE : TL_INVALID_ARG, "%s", bad);
    if (status == 413) /* say the limit */
      tl_error_set(&err, TL_TOO_LARGE, "the request body is larger than the server's limit of %lld bytes%s",
                   (long long)r->body_max, r->route == TL_ROUTE_BUNDLES ? " for a bundle (--max-bundle)" : "");
    *rc = tl_srv_respond_error(r, &err);
    return false;
  }
  if (!d) {
    *rc = tl_srv_respond_http_error(r, 404, "not_found", "no such endpoint");
    return false;
  }
  r->route = d->route;
  if (!method_allowed(d, r->method)) {
    tl_srv_buf b = {0};
    tl_srv_buf_printf(&b, "{\"error\": {\"code\": \"%s\", \"message\": \"", tl_status_name(TL_METHOD_NOT_ALLOWED));
    tl_srv_buf_json_str(&b, r->method);
    tl_srv_buf_printf(&b, " is not allowed here; allowed: %s\"}}\n", d->allow);
    size_t n = b.len;
    struct MHD_Response *resp =
        b.failed ? NULL
                 : MHD_create_response_from_buffer_with_free_callback_cls(n, b.data, free_cb,
                                                                          b.data);
    if (!resp) {
      tl_srv_buf_free(&b);
      *rc = MHD_NO;
      return false;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, d->allow);
    *rc = tl_srv_respond(r, 405, resp, (int64_t)n);
    return false;
  }
  tl_error err;
  tl_error_clear(&err);
  const char *authz =
      MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (tl_srv_auth_check(s->auth, authz, d->scope, s->cfg.allow_anonymous_read, &err) != TL_OK) {
    *rc = tl_srv_respond_error(r, &err);
    return false;
  }
  if (d->body) {
    const char *cl =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    int64_t len;
    if (cl && tl_srv_parse_size(cl, &len) && len > r->body_max) {
      tl_error_set(&err, TL_TOO_LARGE, "the request body is larger than the server's limit of %lld bytes",
                   (long long)r->body_max);
      *rc = tl_srv_respond_error(r, &err);
      return false;
    }
    const char *ct =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    bool bundle = d->route == TL_ROUTE_BUNDLES;
    if (bundle ? !tl_srv_content_type_is_binary(ct) : !tl_srv_content_type_is_json(ct)) {
      *rc = tl_srv_respond_http_error(r, tl_status_http(TL_MEDIA_TYPE), tl_status_name(TL_MEDIA_TYPE),
                                      bundle ? "the body must be a bundle (Content-Type: application/octet-stream)"
                                             : "the body must be JSON (Content-Type: application/json)");
      return false;
    }
    if (r->content_length > 0) { /* the whole body's room, reserved and allocated at once */
      if (!body_reserve(r, (size_t)r->content_length + 1)) {
        *rc = respond_body_busy(r);
        return false;
      }
      if (!(r->body = malloc((size_t)r->content_length + 1))) {
        *rc = MHD_NO;
        return false;
      }
      r->body_cap = (size_t)r->content_length + 1;
    }
  }
  return true;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  tl_srv_req *r = *con_cls;
  if (!r)
    return MHD_NO; /* the URI callback could not allocate */
  if (!r->method) { /* first call */
    tl_srv_conn_enter(r->srv->conns, conn_of(conn), TL_CONN_BODY);
    r->method = method;
    r->url = url;
    r->head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    enum MHD_Result rc;
    if (!first_checks(r, version, &rc)) {
      tl_srv_conn_enter(r->srv->conns, conn_of(conn), TL_CONN_BUSY);
      return rc;
    }
    return MHD_YES;
  }
  if (r->responded) { /* an early answer is queued: drop whatever body still comes */
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (*upload_data_size) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    tl_srv_conn_body_bytes(r->srv->conns, conn_of(conn), n);
    /* only compile requests have a body; others' are read and dropped */
    if (r->body_overflow || r->body_busy || !r->body_route)
      return MHD_YES;
    if ((int64_t)(r->body_len + n) > r->body_max) {
      r->body_overflow = true;
      body_release(r);
      return MHD_YES;
    }
    if (r->body_len + n + 1 > r->body_cap) {
      size_t cap = r->body_cap ? r->body_cap : 4096;
      while (cap < r->body_len + n + 1)
        cap *= 2;
      if ((int64_t)cap > r->body_max + 1)
        cap = (size_t)r->body_max + 1;
      if (!body_reserve(r, cap)) {
        r->body_busy = true;
        body_release(r);
        return MHD_YES;
      }
      char *nb = realloc(r->body, cap);
      if (!nb)
        return MHD_NO;
      r->body = nb;
      r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, upload_data, n);
    r->body_len += n;
    r->body[r->body_len] = 0;
    return MHD_YES;
  }
  /* the last call: the whole body is in */
  tl_srv_conn_enter(r->srv->conns, conn_of(conn), TL_CONN_BUSY);
  if (r->body_busy)
    return respond_body_busy(r);
  if (r->body_overflow) {
    tl_error err;
    tl_error_set(&err, TL_TOO_LARGE, "the request body is larger than the server's limit of %lld bytes",
                 (long long)r->body_max);
    return tl_srv_respond_error(r, &err);
  }
  return tl_srv_api_dispatch(r);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t n = strlen(msg);
  while (n && msg[n - 1] == '\n')
    msg[--n] = 0;
  fprintf(stderr, "tlserverd: libmicrohttpd: %s\n", msg);
}

/* ==== the background thread: eviction, flushing, readiness ================================
 * Once a second: the readiness probe (ready.c), a flush, the status page's
 * recent outcomes saved (status.c; once more when it stops), and eviction
 * in small steps.  The thread keeps its own cache handle; when the
 * database cannot be opened it tries again each second (the server is not
 * ready meanwhile). */

static void *evict_main(void *arg) {
  tl_srv *s = arg;
  tl_cache *c = NULL;
  tl_error err;
  pthread_mutex_lock(&s->evict_mu);
  while (!s->evict_stop) {
    pthread_mutex_unlock(&s->evict_mu);
    tl_error_clear(&err);
    if (!c && tl_cache_open(s->cfg.db_path, &s->cache_opts, &c, &err) != TL_OK)
      c = NULL;
    tl_srv_ready_probe(&s->ready, s->targets ? NULL : s->toolchain_error, s->cfg.db_path, c, &err);
    if (c) {
      tl_cache_flush(c, NULL);
      tl_srv_recent_save(s->recent, c);
    }
    if (c && s->cfg.cache_max_bytes > 0) {
      /* small steps: the write lock is held for one batch at a time */
      for (int step = 0; step < 1000; step++) {
        int64_t n = 0;
        if (tl_cache_evict_step(c, 32, &n, NULL) != TL_OK || n == 0)
          break;
        atomic_fetch_add(&s->metrics.evictions, n);
        if (n < 32)
          break;
        usleep(2000);
      }
    }
    pthread_mutex_lock(&s->evict_mu);
    if (s->evict_stop)
      break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    pthread_cond_timedwait(&s->evict_cv, &s->evict_mu, &ts);
  }
  pthread_mutex_unlock(&s->evict_mu);
  tl_srv_recent_save(s->recent, c); /* what came in since the last second */
  tl_cache_close(c);
  return NULL;
}

/* ==== the listening socket ==============================================================
 * Made here rather than by libmicrohttpd, so that a port in use is a clear
 * error: SO_REUSEADDR (a restart need not wait for old connections'
 * TIME_WAIT) but never SO_REUSEPORT, so a second server on the same address
 * and port fails to bind instead of sharing the port.  Without --tokens the
 * address must be loopback unless --insecure-no-auth is given. */

static bool is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a))
      return true;
    return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
  }
  return false;
}

static int listen_family(int fd) {
  struct sockaddr_storage ss;
  socklen_t n = sizeof ss;
  return getsockname(fd, (struct sockaddr *)&ss, &n) == 0 ? ss.ss_family : AF_UNSPEC;
}

static tl_status open_listener(const tl_srv_config *cfg, int *out, tl_error *err) {
  struct addrinfo hints = {0}, *ai = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  char port[16];
  snprintf(port, sizeof port, "%d", cfg->port);
  int gai = getaddrinfo(cfg->host, port, &hints, &ai);
  if (gai != 0 || !ai)
    return tl_error_set(err, TL_INVALID_ARG, "cannot resolve the listen address '%s': %s",
                        cfg->host, gai_strerror(gai));
  if (!cfg->tokens_file && !cfg->insecure_no_auth && !is_loopback(ai->ai_addr)) {
    freeaddrinfo(ai);
    return tl_error_set(err, TL_INVALID_ARG,
                        "refusing to listen on %s, which is not a loopback address, without "
                        "--tokens: anyone who reaches it could compile and read everything; give "
                        "--tokens FILE, or --insecure-no-auth to accept that",
                        cfg->host);
  }
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  tl_status st = TL_OK;
  int one = 1;
  if (fd < 0) {
    st = tl_error_set(err, TL_IO, "cannot make a socket: %s", strerror(errno));
  } else if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
             bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    int e = errno;
    st = tl_error_set(err, TL_IO, "cannot listen on %s:%d: %s%s", cfg->host, cfg->port,
                      strerror(e),
                      e == EADDRINUSE ? " (another tlserverd, or another program, listens there; "
                                        "tlserverd never shares a port)"
                                      : "");
  } else if (listen(fd, SOMAXCONN) != 0) {
    st = tl_error_set(err, TL_IO, "cannot listen on %s:%d: %s", cfg->host, cfg->port,
                      strerror(errno));
  }
  freeaddrinfo(ai);
  if (st != TL_OK) {
    if (fd >= 0)
      close(fd);
    return st;
  }
  *out = fd;
  return TL_OK;
}

/* ==== start and stop ====================================================================== */

static char *read_file(const char *path, tl_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    tl_error_set(err, TL_IO, "cannot open '%s': %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (n < cap)
      break;
    if (cap >= (1u << 20)) { /* certificates and keys are small */
      free(buf);
      buf = NULL;
      tl_error_set(err, TL_TOO_LARGE, "'%s' is larger than 1 MiB", path);
      fclose(f);
      return NULL;
    }
    cap *= 2;
    char *nb = realloc(buf, cap + 1);
    if (!nb) {
      free(buf);
      buf = NULL;
    } else {
      buf = nb;
    }
  }
  fclose(f);
  if (!buf) {
    tl_error_set(err, TL_NOMEM, "out of memory");
    return NULL;
  }
  buf[n] = 0;
  return buf;
}

static void free_server(tl_srv *s) {
  if (s->evict_started) {
    pthread_mutex_lock(&s->evict_mu);
    s->evict_stop = true;
    pthread_cond_signal(&s->evict_cv);
    pthread_mutex_unlock(&s->evict_mu);
    pthread_join(s->evict_thread, NULL);
  }
  pthread_mutex_destroy(&s->evict_mu);
  pthread_cond_destroy(&s->evict_cv);
  tl_srv_ready_destroy(&s->ready);
  if (s->listen_fd >= 0)
    close(s->listen_fd);
  tl_srv_pool_free(s->pool);
  tl_srv_tier_free(s->tier);
  tl_srv_recent_free(s->recent);
  tl_srv_conns_free(s->conns);
  tl_srv_artmem_free(s->artmem);
  tl_srv_handles_free(s->handles);
  tl_srv_auth_free(s->auth);
  if (s->tls_key_pem) {
    memset(s->tls_key_pem, 0, strlen(s->tls_key_pem));
    free(s->tls_key_pem);
  }
  free(s->tls_cert_pem);
  free(s->exe);
  free(s);
}

tl_status tl_srv_start(const tl_srv_config *cfg, const char *exe, tl_srv **out, tl_error *err) {
  *out = NULL;
  tl_srv *s = calloc(1, sizeof *s);
  if (!s)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  s->cfg = *cfg;
  s->listen_fd = -1;
  s->start_us = tl_srv_now_us();
  pthread_mutex_init(&s->evict_mu, NULL);
  pthread_cond_init(&s->evict_cv, NULL);
  tl_srv_ready_init(&s->ready);
  /* OpenSSL sets itself up at its first use, and the thread that does so
   * keeps an error state that is never freed if that thread exits (904
   * bytes under LeakSanitizer, when it is one of the HTTP threads): use it
   * once here, in the thread that starts the server */
  uint8_t digest[TL_SHA256_LEN];
  (void)tl_sha256("", 0, digest);
  tl_status st = TL_OK;
  if (!(s->exe = strdup(exe))) {
    st = tl_error_set(err, TL_NOMEM, "out of memory");
    goto fail;
  }

  /* files */
  if (cfg->tokens_file && (st = tl_srv_auth_load(cfg->tokens_file, &s->auth, err)) != TL_OK)
    goto fail;
  if (cfg->tls_cert) {
    if (!(s->tls_cert_pem = read_file(cfg->tls_cert, err)) ||
        !(s->tls_key_pem = read_file(cfg->tls_key, err))) {
      st = err ? err->code : TL_IO;
      goto fail;
    }
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
      st = tl_error_set(err, TL_UNSUPPORTED, "this libmicrohttpd was built without TLS");
      goto fail;
    }
  }

  /* the listening socket, before anything slow: a refused address or a port
   * in use stops the start at once */
  if ((st = open_listener(cfg, &s->listen_fd, err)) != TL_OK)
    goto fail;

  /* the toolchain (loads NVRTC here once; workers load their own) */
  tl_error terr;
  tl_error_clear(&terr);
  s->targets = tl_compiler_targets(&s->toolchain, &terr);
  if (!s->targets)
    snprintf(s->toolchain_error, sizeof s->toolchain_error, "%s", terr.message);
  const char *jl_why = NULL; /* nvJitLink, the PTX back end's assembler (loaded here once, as NVRTC) */
  if (!(s->nvjitlink = tl_compiler_nvjitlink(&jl_why)))
    snprintf(s->nvjitlink_error, sizeof s->nvjitlink_error, "%s", jl_why ? jl_why : "not found");
  const char *pa_why = NULL; /* ptxas, its whole-program assembler (run as a process by the workers) */
  if (!(s->ptxas = tl_compiler_ptxas(&pa_why)))
    snprintf(s->ptxas_error, sizeof s->ptxas_error, "%s", pa_why ? pa_why : "not found");

  /* the cache */
  s->cache_opts.max_bytes = cfg->cache_max_bytes;
  if ((st = tl_srv_handles_new(cfg->db_path, &s->cache_opts, &s->handles, err)) != TL_OK)
    goto fail;
  tl_cache *probe_handle = tl_srv_handles_get(s->handles, err);
  if (!probe_handle) {
    st = err ? err->code : TL_IO;
    goto fail;
  }
  /* the first readiness probe, before anyone can ask */
  tl_srv_ready_probe(&s->ready, s->targets ? NULL : s->toolchain_error, cfg->db_path,
                     probe_handle, NULL);
  tl_srv_handles_put(s->handles, probe_handle);
  if (!(s->artmem = tl_srv_artmem_new(cfg->memory_cache, cfg->memory_cache_ttl)) ||
      !(s->recent = tl_srv_recent_new())) {
    st = tl_error_set(err, TL_NOMEM, "out of memory");
    goto fail;
  }
  tl_cache *recent_handle = tl_srv_handles_get(s->handles, NULL); /* the status page's last outcomes */
  if (recent_handle) {
    tl_srv_recent_load(s->recent, recent_handle);
    tl_srv_handles_put(s->handles, recent_handle);
  }

  /* the shared tier (connects lazily: a Redis that is down is no error) */
  if (cfg->ntier > 0) {
    tl_srv_tier_opts to = {
        .urls = s->cfg.tier,
        .nurls = cfg->ntier,
        .timeout_s = cfg->tier_timeout,
        .ttl_s = cfg->tier_ttl,
        .lease_s = cfg->tier_lease,
        .max_entry = cfg->tier_max_entry,
        .auth_file = cfg->tier_auth_file,
        .sentinel_auth_file = cfg->tier_sentinel_auth_file,
        .metrics = &s->metrics,
    };
    if ((st = tl_srv_tier_new(&to, &s->tier, err)) != TL_OK)
      goto fail;
  }

  /* the compile pool */
  tl_srv_pool_opts po = {
      .proc = {.exe = s->exe,
               .memory = cfg->worker_memory,
               .cpu_seconds = cfg->compile_timeout + 1,
               .test_hooks = cfg->test_hooks},
      .workers = cfg->workers,
      .queue = cfg->queue,
      .max_per_client = cfg->max_compiles_per_client,
      .compile_timeout = cfg->compile_timeout,
      .source_timeout = cfg->source_timeout < cfg->compile_timeout ? cfg->source_timeout : cfg->compile_timeout,
      .db_path = cfg->db_path,
      .cache_opts = &s->cache_opts,
      .metrics = &s->metrics,
      .tier = s->tier,
  };
  if ((st = tl_srv_pool_new(&po, &s->pool, err)) != TL_OK)
    goto fail;

  /* connection deadlines */
  if (!(s->conns = tl_srv_conns_new(&s->cfg, &s->metrics))) {
    st = tl_error_set(err, TL_NOMEM, "out of memory");
    goto fail_pool;
  }

  int lfd = s->listen_fd;
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                   MHD_USE_ITC;
  if (listen_family(lfd) == AF_INET6)
    flags |= MHD_USE_IPv6;
  if (cfg->tls_cert)
    flags |= MHD_USE_TLS;
  struct MHD_OptionItem opts[16];
  int no = 0;
  opts[no++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, lfd, NULL};
  opts[no++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections, NULL};
  opts[no++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                       cfg->max_connections_per_ip, NULL};
  opts[no++] =
      (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)cfg->idle_timeout, NULL};
  opts[no++] =
      (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)cfg->max_header, NULL};
  if (cfg->threads > 1)
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, cfg->threads, NULL};
  if (cfg->tls_cert) {
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key_pem};
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert_pem};
  }
  opts[no++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  s->mhd = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, s,
                            MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                            MHD_OPTION_ARRAY, opts,
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_END);
  if (!s->mhd) {
    st = tl_error_set(err, TL_IO,
                      "cannot serve on %s:%d (a bad TLS certificate or key?); see the "
                      "libmicrohttpd message above",
                      cfg->host, cfg->port);
    goto fail_pool;
  }
  s->listen_fd = -1; /* libmicrohttpd's now */
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
  s->port = di ? di->port : cfg->port;

  if (pthread_create(&s->evict_thread, NULL, evict_main, s) == 0)
    s->evict_started = true;
  *out = s;
  return TL_OK;

fail_pool:
  tl_srv_pool_shutdown(s->pool, 0);
fail:
  free_server(s);
  return st;
}

int tl_srv_port(const tl_srv *s) { return s->port; }

void tl_srv_stop(tl_srv *s) {
  if (!s)
    return;
  atomic_store(&s->draining, true);
  /* 1. stop accepting */
  MHD_socket lfd = MHD_quiesce_daemon(s->mhd);
  if (lfd != MHD_INVALID_SOCKET)
    close(lfd);
  /* 2. finish running compiles (within the grace period), cancel queued
   * ones; every waiting request gets its answer and is resumed */
  tl_srv_pool_shutdown(s->pool, s->cfg.shutdown_grace);
  /* 3. let the answers go out (at most 5 s) */
  for (int i = 0; i < 500 && atomic_load(&s->active) > 0; i++)
    usleep(10000);
  /* 4. close connections and stop the HTTP threads */
  MHD_stop_daemon(s->mhd);
  /* 5. stop eviction, close every cache handle */
  free_server(s);
}
