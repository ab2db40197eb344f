/*
 * auth.c - bearer tokens and their scopes (the --tokens file; its format
 * is in server.h and in tlserverd --help).
 *
 * The table keeps only the SHA-256 of each token, so the daemon's memory
 * does not hold the secrets in the clear, and a lookup hashes the
 * presented token and compares it with every entry without stopping early,
 * so the time taken does not depend on how much of a token matched.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include "server.h"
#include "../proto/tl_hash.h"

#define TOKEN_MIN 16
#define TOKEN_MAX 256
#define FILE_MAX ((size_t)4 << 20)

typedef struct entry {
  uint8_t digest[TL_SHA256_LEN];
  unsigned scopes;
} entry;

struct tl_srv_auth {
  entry *items;
  int n;
};

static bool token_char(int c) {
  return isalnum(c) || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=' ||
         c == '-';
}

static bool parse_scopes(const char *s, size_t n, unsigned *out) {
  unsigned scopes = 0;
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && s[j] != ',')
      j++;
    size_t len = j - i;
    if (len == 4 && memcmp(s + i, "read", 4) == 0)
      scopes |= TL_SCOPE_READ;
    else if (len == 7 && memcmp(s + i, "compile", 7) == 0)
      scopes |= TL_SCOPE_COMPILE | TL_SCOPE_READ;
    else if (len == 5 && memcmp(s + i, "admin", 5) == 0)
      scopes |= TL_SCOPE_ADMIN | TL_SCOPE_READ | TL_SCOPE_COMPILE;
    else
      return false;
    i = j + 1;
    if (j < n && i == n)
      return false; /* trailing comma */
  }
  *out = scopes;
  return scopes != 0;
}

tl_status tl_srv_auth_parse(const char *text, size_t n, tl_srv_auth **out, tl_error *err) {
  *out = NULL;
  if (n > FILE_MAX)
    return tl_error_set(err, TL_TOO_LARGE, "the tokens file is larger than 4 MiB");
  tl_srv_auth *a = calloc(1, sizeof *a);
  if (!a)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  int cap = 0;
  int line = 0;
  size_t i = 0;
  tl_status st = TL_OK;
  while (i < n) {
    line++;
    size_t end = i;
    while (end < n && text[end] != '\n')
      end++;
    size_t e = end;
    if (e > i && text[e - 1] == '\r')
      e--;
    size_t p = i;
    while (p < e && (text[p] == ' ' || text[p] == '\t'))
      p++;
    i = end + 1;
    if (p == e || text[p] == '#')
      continue;
    size_t t0 = p;
    while (p < e && text[p] != ' ' && text[p] != '\t') {
      if (!token_char((unsigned char)text[p])) {
        st = tl_error_set(err, TL_INVALID_ARG,
                          "tokens file line %d: a token may only hold A-Z a-z 0-9 . _ ~ + / = -",
                          line);
        goto fail;
      }
      p++;
    }
    size_t tlen = p - t0;
    if (tlen < TOKEN_MIN || tlen > TOKEN_MAX) {
      st = tl_error_set(err, TL_INVALID_ARG,
                        "tokens file line %d: a token must be %d to %d characters long (this one "
                        "has %zu)",
                        line, TOKEN_MIN, TOKEN_MAX, tlen);
      goto fail;
    }
    while (p < e && (text[p] == ' ' || text[p] == '\t'))
      p++;
    size_t s0 = p;
    while (p < e && text[p] != ' ' && text[p] != '\t')
      p++;
    size_t s1 = p;
    while (p < e && (text[p] == ' ' || text[p] == '\t'))
      p++;
    unsigned scopes;
    if (s0 == s1 || p != e || !parse_scopes(text + s0, s1 - s0, &scopes)) {
      st = tl_error_set(err, TL_INVALID_ARG,
                        "tokens file line %d: expected 'TOKEN SCOPE[,SCOPE...]' with scopes read, "
                        "compile, admin",
                        line);
      goto fail;
    }
    if (a->n >= TL_SRV_MAX_TOKENS) {
      st = tl_error_set(err, TL_TOO_LARGE, "tokens file: more than %d tokens", TL_SRV_MAX_TOKENS);
      goto fail;
    }
    if (a->n == cap) {
      int nc = cap ? cap * 2 : 16;
      entry *ni = realloc(a->items, (size_t)nc * sizeof *ni);
      if (!ni) {
        st = tl_error_set(err, TL_NOMEM, "out of memory");
        goto fail;
      }
      a->items = ni;
      cap = nc;
    }
    entry *en = &a->items[a->n];
    if ((st = tl_sha256(text + t0, tlen, en->digest)) != TL_OK) {
      tl_error_set(err, st, "cannot hash a token");
      goto fail;
    }
    for (int k = 0; k < a->n; k++) {
      if (memcmp(a->items[k].digest, en->digest, TL_SHA256_LEN) == 0) {
        st = tl_error_set(err, TL_INVALID_ARG, "tokens file line %d: the token appears twice",
                          line);
        goto fail;
      }
    }
    en->scopes = scopes;
    a->n++;
  }
  *out = a;
  return TL_OK;
fail:
  tl_srv_auth_free(a);
  return st;
}

tl_status tl_srv_secret_read(const char *path, const char *what, const char *secrets, size_t max, char **out,
                             size_t *n, tl_error *err) {
  *out = NULL;
  *n = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return tl_error_set(err, TL_IO, "cannot open the %s '%s': %s", what, path, strerror(errno));
  /* like ssh with a private key: secrets others can read are refused */
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0) {
    fclose(f);
    return tl_error_set(err, TL_IO, "cannot stat the %s '%s': %s", what, path, strerror(errno));
  }
  if (sb.st_mode & (S_IRWXG | S_IRWXO)) {
    fclose(f);
    return tl_error_set(err, TL_INVALID_ARG,
                        "the %s '%s' is open to group or others (mode %04o): its %s; make it private "
                        "with: chmod 600 '%s'",
                        what, path, (unsigned)(sb.st_mode & 07777), secrets, path);
  }
  char *buf = malloc(max + 2);
  if (!buf) {
    fclose(f);
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  size_t got = fread(buf, 1, max + 1, f);
  bool failed = ferror(f);
  fclose(f);
  buf[got] = 0;
  if (failed || got > max) {
    tl_srv_secret_free(buf, got);
    return failed ? tl_error_set(err, TL_IO, "cannot read the %s '%s'", what, path)
                  : tl_error_set(err, TL_TOO_LARGE, "the %s '%s' is larger than %zu bytes", what, path, max);
  }
  *out = buf;
  *n = got;
  return TL_OK;
}

void tl_srv_secret_free(char *buf, size_t n) {
  if (!buf)
    return;
  volatile char *v = buf; /* wipe the secrets before giving the memory back */
  for (size_t i = 0; i < n; i++)
    v[i] = 0;
  free(buf);
}

tl_status tl_srv_auth_load(const char *path, tl_srv_auth **out, tl_error *err) {
  *out = NULL;
  char *buf;
  size_t n;
  tl_status st = tl_srv_secret_read(path, "tokens file", "tokens are secrets", FILE_MAX, &buf, &n, err);
  if (st != TL_OK)
    return st;
  st = tl_srv_auth_parse(buf, n, out, err);
  tl_srv_secret_free(buf, n);
  return st;
}

void tl_srv_auth_free(tl_srv_auth *a) {
  if (!a)
    return;
  free(a->items);
  free(a);
}

int tl_srv_auth_count(const tl_srv_auth *a) { return a ? a->n : 0; }

/* The scopes of the token, or -1 when unknown; looks at every entry. */
static int lookup(const tl_srv_auth *a, const char *token, size_t n) {
  uint8_t d[TL_SHA256_LEN];
  if (tl_sha256(token, n, d) != TL_OK)
    return -1;
  int found = -1;
  for (int i = 0; i < a->n; i++) {
    unsigned diff = 0;
    for (int k = 0; k < TL_SHA256_LEN; k++)
      diff |= (unsigned)(a->items[i].digest[k] ^ d[k]);
    /* no early exit: every entry is compared */
    int hit = diff == 0;
    found = hit ? (int)a->items[i].scopes : found;
  }
  return found;
}

static const char *scope_name(unsigned s) {
  return s == TL_SCOPE_READ ? "read" : s == TL_SCOPE_COMPILE ? "compile" : "admin";
}

tl_status tl_srv_auth_check(const tl_srv_auth *a, const char *authorization, unsigned need,
                            bool allow_anonymous_read, tl_error *err) {
  if (!a || need == 0)
    return TL_OK;
  if (!authorization) {
    if (allow_anonymous_read && need == TL_SCOPE_READ)
      return TL_OK;
    return tl_error_set(err, TL_UNAUTHORIZED,
                        "this endpoint needs a bearer token with the '%s' scope (Authorization: "
                        "Bearer TOKEN)",
                        scope_name(need));
  }
  const char *s = authorization;
  while (*s == ' ')
    s++;
  if (strncasecmp(s, "Bearer", 6) != 0 || (s[6] != ' ' && s[6] != '\t'))
    return tl_error_set(err, TL_UNAUTHORIZED,
                        "the Authorization header must be 'Bearer TOKEN'");
  s += 6;
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
    n--;
  if (n == 0 || n > TOKEN_MAX)
    return tl_error_set(err, TL_UNAUTHORIZED, "unknown token");
  int scopes = lookup(a, s, n);
  if (scopes < 0)
    return tl_error_set(err, TL_UNAUTHORIZED, "unknown token");
  if (((unsigned)scopes & need) == 0)
    return tl_error_set(err, TL_FORBIDDEN, "the token lacks the '%s' scope", scope_name(need));
  return TL_OK;
}
