/*
 * dlutil.c - helpers shared by the dlopen-based toolchain drivers (dlutil.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
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
