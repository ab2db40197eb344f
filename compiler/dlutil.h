/*
 * dlutil.h - small helpers shared by the toolchain drivers that open
 * libraries with dlopen (nvrtc.c, amdgpu.c): the "tried" list of their
 * error messages.
 */
#ifndef TL_DLUTIL_H
#define TL_DLUTIL_H

#include <stddef.h>

/* Appends printf-formatted text to buf (cap bytes), keeping it terminated;
 * text that does not fit is dropped. */
void tl_appendf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A short reason for a failed dlopen, from dlerror()'s message ("not
 * found", "wrong ELF class", ...).  Never NULL; may point into msg. */
const char *tl_dl_reason(const char *msg);

/* Opens a library the way every toolchain driver looks for one: when the
 * environment variable env is set, that path alone (a library file, or a
 * directory holding one of names; set but empty names nothing), else each
 * of names through the dynamic loader's search, then each in dir.
 * try_one(ctx, path, tried, cap) tries one path and answers 1 when it
 * opened it, else appends why not to tried.  Returns 1 when one opened. */
int tl_dl_search(const char *env, const char *const *names, size_t nnames, const char *dir,
                 int (*try_one)(void *ctx, const char *path, char *tried, size_t cap), void *ctx, char *tried,
                 size_t cap);

#endif
