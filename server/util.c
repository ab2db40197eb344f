/*
 * util.c - small stateless helpers of tlserverd: a growable text buffer,
 * parsing of sizes, durations and listen addresses, the HTTP header
 * parsers the artifact endpoint needs (Range, If-None-Match) and the
 * Content-Type check, the JSON nesting scan that runs before jansson sees a
 * body, and clocks.  Each is a pure function of its arguments, so
 * tests/unit/test_server.c tests them directly.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "server.h"

/* ==== text buffer ============================================================ */

static bool buf_reserve(tl_srv_buf *b, size_t extra) {
  if (b->failed)
    return false;
  if (extra > SIZE_MAX / 2 - b->len) {
    b->failed = true;
    return false;
  }
  size_t need = b->len + extra + 1;
  if (need <= b->cap)
    return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need)
    cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p) {
    b->failed = true;
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void tl_srv_buf_append(tl_srv_buf *b, const char *s, size_t n) {
  if (!buf_reserve(b, n))
    return;
  if (n)
    memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = 0;
}

void tl_srv_buf_puts(tl_srv_buf *b, const char *s) { tl_srv_buf_append(b, s, strlen(s)); }

void tl_srv_buf_printf(tl_srv_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = true;
    return;
  }
  if ((size_t)n < sizeof small) {
    tl_srv_buf_append(b, small, (size_t)n);
    return;
  }
  if (!buf_reserve(b, (size_t)n))
    return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void tl_srv_buf_json_str(tl_srv_buf *b, const char *s) {
  const char *run = s;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    tl_srv_buf_append(b, run, (size_t)(s - run));
    switch (c) {
    case '"': tl_srv_buf_puts(b, "\\\""); break;
    case '\\': tl_srv_buf_puts(b, "\\\\"); break;
    case '\n': tl_srv_buf_puts(b, "\\n"); break;
    case '\r': tl_srv_buf_puts(b, "\\r"); break;
    case '\t': tl_srv_buf_puts(b, "\\t"); break;
    default: tl_srv_buf_printf(b, "\\u%04x", c); break;
    }
    run = s + 1;
  }
  tl_srv_buf_append(b, run, (size_t)(s - run));
}

void tl_srv_buf_html(tl_srv_buf *b, const char *s) {
  const char *run = s;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    const char *rep = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;"
                    : c == '"' ? "&quot;" : c == '\'' ? "&#39;" : NULL;
    if (!rep && (c >= 0x20 || c == '\n' || c == '\t'))
      continue;
    tl_srv_buf_append(b, run, (size_t)(s - run));
    tl_srv_buf_puts(b, rep ? rep : "\xef\xbf\xbd"); /* other control characters: U+FFFD */
    run = s + 1;
  }
  tl_srv_buf_append(b, run, (size_t)(s - run));
}

void tl_srv_buf_json_compact(tl_srv_buf *b, const char *json) {
  const char *run = json;
  bool in_str = false;
  const char *s = json;
  for (; *s; s++) {
    char c = *s;
    if (in_str) {
      if (c == '\\' && s[1])
        s++;
      else if (c == '"')
        in_str = false;
      continue;
    }
    if (c == '"') {
      in_str = true;
    } else if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
      tl_srv_buf_append(b, run, (size_t)(s - run));
      run = s + 1;
    }
  }
  tl_srv_buf_append(b, run, (size_t)(s - run));
}

void tl_srv_buf_free(tl_srv_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

/* ==== numbers ================================================================== */

bool tl_srv_parse_size(const char *s, int64_t *out) {
  if (!s || !isdigit((unsigned char)*s))
    return false;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno)
    return false;
  int shift = 0;
  switch (*end) {
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  default: break;
  }
  if (shift && *end == 'i')
    end++;
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end)
    return false;
  if (v > ((unsigned long long)INT64_MAX >> shift))
    return false;
  *out = (int64_t)(v << shift);
  return true;
}

bool tl_srv_parse_seconds(const char *s, double *out) {
  if (!s || !(isdigit((unsigned char)*s) || *s == '.'))
    return false;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (errno || end == s)
    return false;
  if (strcmp(end, "ms") == 0)
    v /= 1000.0;
  else if (strcmp(end, "s") == 0 || *end == 0)
    ;
  else
    return false;
  if (!isfinite(v) || v < 0 || v > 366.0 * 86400)
    return false;
  *out = v;
  return true;
}

bool tl_srv_parse_int(const char *s, int lo, int hi, int *out) {
  if (!s || !*s)
    return false;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi)
    return false;
  *out = (int)v;
  return true;
}

bool tl_srv_parse_listen(const char *s, char host[TL_SRV_HOST_MAX], int *port) {
  if (!s)
    return false;
  const char *colon;
  size_t hn;
  const char *h;
  if (s[0] == '[') {
    const char *close = strchr(s, ']');
    if (!close || close[1] != ':')
      return false;
    h = s + 1;
    hn = (size_t)(close - h);
    colon = close + 1;
    if (hn == 0)
      return false;
  } else {
    colon = strrchr(s, ':');
    if (!colon)
      return false;
    h = s;
    hn = (size_t)(colon - s);
    if (memchr(h, ':', hn))
      return false; /* a bare IPv6 address needs brackets */
  }
  if (hn >= TL_SRV_HOST_MAX)
    return false;
  int p;
  if (!tl_srv_parse_int(colon + 1, 0, 65535, &p))
    return false;
  if (hn == 0) {
    strcpy(host, "127.0.0.1");
  } else {
    memcpy(host, h, hn);
    host[hn] = 0;
  }
  *port = p;
  return true;
}

/* ==== HTTP headers =============================================================== */

static const char *skip_ows(const char *s) {
  while (*s == ' ' || *s == '\t')
    s++;
  return s;
}

/* Reads a decimal number of at most 18 digits. */
static bool read_num(const char **ps, int64_t *out) {
  const char *s = *ps;
  if (!isdigit((unsigned char)*s))
    return false;
  int64_t v = 0;
  int digits = 0;
  while (isdigit((unsigned char)*s)) {
    if (++digits > 18)
      return false;
    v = v * 10 + (*s - '0');
    s++;
  }
  *ps = s;
  *out = v;
  return true;
}

tl_srv_range tl_srv_parse_range(const char *header, int64_t size, int64_t *first, int64_t *last) {
  if (!header)
    return TL_RANGE_NONE;
  const char *s = skip_ows(header);
  if (strncasecmp(s, "bytes", 5) != 0)
    return TL_RANGE_NONE;
  s = skip_ows(s + 5);
  if (*s != '=')
    return TL_RANGE_NONE;
  s = skip_ows(s + 1);
  int64_t a = -1, b = -1;
  if (*s == '-') { /* suffix: the last N bytes */
    s++;
    int64_t n;
    if (!read_num(&s, &n))
      return TL_RANGE_NONE;
    s = skip_ows(s);
    if (*s)
      return TL_RANGE_NONE; /* several ranges or junk: ignore the header */
    if (n == 0 || size == 0)
      return TL_RANGE_UNSATISFIABLE;
    *first = n >= size ? 0 : size - n;
    *last = size - 1;
    return TL_RANGE_OK;
  }
  if (!read_num(&s, &a) || *s != '-')
    return TL_RANGE_NONE;
  s++;
  if (isdigit((unsigned char)*s)) {
    if (!read_num(&s, &b) || b < a)
      return TL_RANGE_NONE;
  }
  s = skip_ows(s);
  if (*s)
    return TL_RANGE_NONE;
  if (a >= size)
    return TL_RANGE_UNSATISFIABLE;
  *first = a;
  *last = (b < 0 || b >= size) ? size - 1 : b;
  return TL_RANGE_OK;
}

bool tl_srv_etag_match(const char *header, const char *id) {
  if (!header || !id)
    return false;
  size_t idn = strlen(id);
  const char *s = header;
  for (;;) {
    s = skip_ows(s);
    while (*s == ',')
      s = skip_ows(s + 1);
    if (!*s)
      return false;
    if (*s == '*') {
      const char *t = skip_ows(s + 1);
      if (*t == 0 || *t == ',')
        return true;
      return false;
    }
    if (s[0] == 'W' && s[1] == '/')
      s += 2;
    if (*s != '"')
      return false;
    const char *q = strchr(s + 1, '"');
    if (!q)
      return false;
    if ((size_t)(q - s - 1) == idn && memcmp(s + 1, id, idn) == 0)
      return true;
    s = q + 1;
  }
}

/* value is the media type want, with or without parameters. */
static bool content_type_is(const char *value, const char *want) {
  if (!value)
    return false;
  const char *s = skip_ows(value);
  size_t n = strlen(want);
  if (strncasecmp(s, want, n) != 0)
    return false;
  s = skip_ows(s + n);
  return *s == 0 || *s == ';';
}

bool tl_srv_content_type_is_json(const char *value) { return content_type_is(value, "application/json"); }
bool tl_srv_content_type_is_binary(const char *value) { return content_type_is(value, "application/octet-stream"); }

bool tl_srv_json_depth_ok(const char *text, size_t n, int max_depth) {
  int depth = 0;
  bool in_str = false;
  for (size_t i = 0; i < n; i++) {
    char c = text[i];
    if (in_str) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_str = false;
      continue;
    }
    switch (c) {
    case '"': in_str = true; break;
    case '[':
    case '{':
      if (++depth > max_depth)
        return false;
      break;
    case ']':
    case '}':
      if (depth > 0)
        depth--;
      break;
    default: break;
    }
  }
  return true;
}

/* ==== clocks ====================================================================== */

int64_t tl_srv_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t tl_srv_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tl_srv_format_time(int64_t wall_ms, char out[32]) {
  time_t t = (time_t)(wall_ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  size_t n = strftime(out, 24, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + n, 32 - n, ".%03dZ", (int)(wall_ms % 1000));
}
