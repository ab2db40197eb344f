/*
 * dlutil.c - helpers shared by the dlopen-based toolchain drivers (dlutil.h).
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "dlutil.h"

void tl_appendf(char *buf, size_t cap, const char *fmt, ...) {
  size_t len = strlen(buf);
  if (len + 1 >= cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, cap - len, fmt, ap);
  va_end(ap);
}

const char *tl_dl_reason(const char *msg) {
  if (!msg)
    return "unknown error";
  if (strstr(msg, "No such file"))
    return "not found";
  if (strstr(msg, "wrong ELF class"))
    return "wrong ELF class";
  if (strstr(msg, "invalid ELF header") || strstr(msg, "file too short"))
    return "not a shared library";
  const char *colon = strrchr(msg, ':');
  return colon && colon[1] ? colon + 2 : msg;
}

/* Tries each of names inside dir. */
static int try_dir(const char *dir, const char *const *names, size_t nnames,
                   int (*try_one)(void *, const char *, char *, size_t), void *ctx, char *tried, size_t cap) {
  for (size_t i = 0; i < nnames; i++) {
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (n > 0 && (size_t)n < sizeof path && try_one(ctx, path, tried, cap))
      return 1;
  }
  return 0;
}

int tl_dl_search(const char *env, const char *const *names, size_t nnames, const char *dir,
                 int (*try_one)(void *ctx, const char *path, char *tried, size_t cap), void *ctx, char *tried,
                 size_t cap) {
  const char *v = getenv(env);
  if (v) {
    struct stat sb;
    if (*v && stat(v, &sb) == 0 && S_ISDIR(sb.st_mode))
      return try_dir(v, names, nnames, try_one, ctx, tried, cap);
    if (*v)
      return try_one(ctx, v, tried, cap);
    tl_appendf(tried, cap, "%s is set but empty", env);
    return 0;
  }
  for (size_t i = 0; i < nnames; i++)
    if (try_one(ctx, names[i], tried, cap))
      return 1;
  return try_dir(dir, names, nnames, try_one, ctx, tried, cap);
}
