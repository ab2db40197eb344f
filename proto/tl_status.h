/*
 * tl_status.h - the one table of status codes shared by every part of the
 * project (compiler, cache, server, client).
 *
 * Each row of TL_STATUS_TABLE gives the code's name, its stable lowercase
 * wire name (used in JSON error objects: {"error": {"code": ...}}), the HTTP
 * status the server answers with, and a short message.  The enum, the
 * message table, the name table and the HTTP table are all generated from
 * it, so they cannot drift apart.  Append new rows at the end: the numeric
 * values are part of libtlclient's ABI.
 */
#ifndef TL_STATUS_H
#define TL_STATUS_H

#define TL_STATUS_TABLE(X)                                                     \
  X(OK,          "ok",                 200, "success")                         \
  X(NOMEM,       "out_of_memory",      500, "out of memory")                   \
  X(INVALID_ARG, "invalid_argument",   400, "invalid argument")                \
  X(BAD_JSON,    "malformed_json",     400, "malformed JSON")                  \
  X(BAD_PROGRAM, "invalid_program",    422, "invalid program")                 \
  X(IO,          "io_error",           500, "input/output error")              \
  X(NOT_FOUND,   "not_found",          404, "not found")                       \
  X(TOO_LARGE,   "too_large",          413, "input too large")                 \
  X(LIMIT,       "limit_exceeded",     422, "a limit was exceeded")            \
  X(UNSUPPORTED, "unsupported",        422, "not supported")                   \
  X(TOOLCHAIN,   "toolchain_error",    500, "toolchain failed")                \
  X(NO_TOOLCHAIN,"toolchain_missing",  501, "toolchain not available")         \
  X(TIMEOUT,     "timeout",            504, "timed out")                       \
  X(UNAUTHORIZED,"unauthorized",       401, "missing or unknown token")        \
  X(FORBIDDEN,   "forbidden",          403, "token lacks the scope")           \
  X(BUSY,        "overloaded",         503, "server overloaded; retry later")  \
  X(RUNTIME,     "runtime_error",      422, "error while running the program") \
  X(CORRUPT,     "corrupt",            500, "stored data failed its check")    \
  X(DEVICE,      "device_error",       500, "GPU driver error")                \
  X(NO_DEVICE,   "device_missing",     501, "no GPU or driver available")      \
  X(NETWORK,     "network_error",      502, "could not reach the server")      \
  X(INTERNAL,    "internal_error",     500, "internal error")                  \
  X(METHOD_NOT_ALLOWED, "method_not_allowed", 405, "method not allowed")       \
  X(MEDIA_TYPE,  "unsupported_media_type", 415, "unsupported media type")      \
  X(RANGE,       "range_not_satisfiable", 416, "range not satisfiable")     \
  X(TOO_MANY,    "too_many_requests",  429, "too many requests from this client; retry later")

typedef enum tl_status {
#define TL_STATUS_ENUM_(name, wire, http, msg) TL_##name,
  TL_STATUS_TABLE(TL_STATUS_ENUM_)
#undef TL_STATUS_ENUM_
  TL_STATUS_COUNT_
} tl_status;

/* Short human message for a status ("invalid program"). Never NULL. */
const char *tl_strerror(tl_status s);
/* Stable wire name ("invalid_program"). Never NULL. */
const char *tl_status_name(tl_status s);
/* HTTP status the server answers with for this code. */
int tl_status_http(tl_status s);

#endif
