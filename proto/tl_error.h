/*
 * tl_error.h - the error record every failing function fills in.
 *
 * A function that can fail takes a `tl_error *err` (which may be NULL when
 * the caller does not care) and returns a tl_status.  On failure it fills
 * code, message and, when the error is about a place in a tile program, the
 * RFC 6901 JSON Pointer of that place and the 1-based column inside an
 * expression string (0 when not inside one).  Messages are complete
 * sentences without a trailing period, meant for people.
 */
#ifndef TL_ERROR_H
#define TL_ERROR_H

#include <stdarg.h>
#include "tl_status.h"

#define TL_ERROR_POINTER_MAX 512
#define TL_ERROR_MESSAGE_MAX 1024

typedef struct tl_error {
  tl_status code;
  int column;                        /* 1-based column in an expression, or 0 */
  char pointer[TL_ERROR_POINTER_MAX]; /* JSON Pointer, or "" */
  char message[TL_ERROR_MESSAGE_MAX];
} tl_error;

/* Clears err (code TL_OK, empty strings).  err may be NULL. */
void tl_error_clear(tl_error *err);

/* Fills err (if not NULL) with code and a printf-formatted message, clears
 * pointer and column, and returns code, so that callers can write
 * `return tl_error_set(err, TL_IO, "cannot open '%s': %s", path, strerror(errno));` */
tl_status tl_error_set(tl_error *err, tl_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
tl_status tl_error_setv(tl_error *err, tl_status code, const char *fmt, va_list ap);

/* As tl_error_set, with a JSON Pointer and column. */
tl_status tl_error_set_at(tl_error *err, tl_status code, const char *pointer, int column,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
