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

#endif
