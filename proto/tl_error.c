/*
 * tl_error.c - the status table's lookups and the tl_error helpers.
 */
#include <stdio.h>
#include <string.h>
#include "tl_error.h"

static const struct {
  const char *wire, *msg;
  int http;
} status_rows[] = {
#define TL_STATUS_ROW_(name, wire, http, msg) {wire, msg, http},
    TL_STATUS_TABLE(TL_STATUS_ROW_)
#undef TL_STATUS_ROW_
};

static int valid(tl_status s) { return (unsigned)s < (unsigned)TL_STATUS_COUNT_; }

const char *tl_strerror(tl_status s) { return valid(s) ? status_rows[s].msg : "unknown status"; }
const char *tl_status_name(tl_status s) { return valid(s) ? status_rows[s].wire : "unknown"; }
int tl_status_http(tl_status s) { return valid(s) ? status_rows[s].http : 500; }

void tl_error_clear(tl_error *err) {
  if (!err)
    return;
  err->code = TL_OK;
  err->column = 0;
  err->pointer[0] = 0;
  err->message[0] = 0;
}

tl_status tl_error_setv(tl_error *err, tl_status code, const char *fmt, va_list ap) {
  if (!err)
    return code;
  err->code = code;
  err->column = 0;
  err->pointer[0] = 0;
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  return code;
}

tl_status tl_error_set(tl_error *err, tl_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tl_error_setv(err, code, fmt, ap);
  va_end(ap);
  return code;
}

tl_status tl_error_set_at(tl_error *err, tl_status code, const char *pointer, int column,
                          const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tl_error_setv(err, code, fmt, ap);
  va_end(ap);
  if (err) {
    snprintf(err->pointer, sizeof err->pointer, "%s", pointer ? pointer : "");
    err->column = column;
  }
  return code;
}
