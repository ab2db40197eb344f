/*
 * npy.c - reading and writing NumPy .npy files (see npy.h for the rules).
 *
 * A .npy file is a 6-byte magic "\x93NUMPY", a major and minor version byte,
 * a little-endian header length (2 bytes in version 1.0, 4 bytes in 2.0 and
 * 3.0), a header that is a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and a '\n', and then the raw C-order element data.
 * The header is parsed by a small strict parser of exactly that literal
 * (nothing is evaluated); the data size is computed with overflow checks and
 * must match the rest of the file exactly.  Reading a file for a bfloat16 or
 * float8 tensor may convert float32/float64 values (dtype.h rounds them);
 * everything else must already be the tensor's storage type.  Writing emits a
 * version 1.0 header aligned to 64 bytes, as NumPy does, into a temporary
 * file that is fsync'd and renamed over the destination.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "npy.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c assumes a little-endian host"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_HEADER_MAX 65536u                /* bytes of dict text */
#define NPY_DATA_MAX ((uint64_t)1 << 40)     /* bytes of element data */
#define NPY_ALIGN 64                         /* total header alignment on write */
#define NPY_STR_MAX 64                       /* longest string kept from a header */
#define NPY_PATH_MAX 4096

/* The descr written for tensors of each dtype (bfloat16 and float8 are bit
 * patterns in unsigned integers), and the dtype those bytes have in a file. */
static const struct {
  const char *descr;
  tl_dtype stored;
} storage[TL_DTYPE_COUNT] = {
    [TL_BOOL] = {"|b1", TL_BOOL},           [TL_INT8] = {"|i1", TL_INT8},
    [TL_UINT8] = {"|u1", TL_UINT8},         [TL_INT16] = {"<i2", TL_INT16},
    [TL_UINT16] = {"<u2", TL_UINT16},       [TL_INT32] = {"<i4", TL_INT32},
    [TL_UINT32] = {"<u4", TL_UINT32},       [TL_INT64] = {"<i8", TL_INT64},
    [TL_UINT64] = {"<u8", TL_UINT64},       [TL_FLOAT16] = {"<f2", TL_FLOAT16},
    [TL_BFLOAT16] = {"<u2", TL_UINT16},     [TL_FLOAT32] = {"<f4", TL_FLOAT32},
    [TL_FLOAT64] = {"<f8", TL_FLOAT64},     [TL_FLOAT8_E4M3] = {"|u1", TL_UINT8},
    [TL_FLOAT8_E5M2] = {"|u1", TL_UINT8},
    /* packed types: one element per byte (signed ones sign-extended), the
     * float4/e8m0 ones as their codes */
    [TL_INT4] = {"|i1", TL_INT8},           [TL_UINT4] = {"|u1", TL_UINT8},
    [TL_INT2] = {"|i1", TL_INT8},           [TL_UINT2] = {"|u1", TL_UINT8},
    [TL_INT1] = {"|i1", TL_INT8},           [TL_UINT1] = {"|u1", TL_UINT8},
    [TL_FLOAT4_E2M1] = {"|u1", TL_UINT8},   [TL_FLOAT8_E8M0] = {"|u1", TL_UINT8},
};

static bool valid_dtype(tl_dtype t) { return (unsigned)t < (unsigned)TL_DTYPE_COUNT; }

const char *tl_npy_descr(tl_dtype t) { return valid_dtype(t) ? storage[t].descr : "?"; }

/* Tensors whose file may hold float32/float64 values instead of bit patterns. */
static bool accepts_float_values(tl_dtype want) {
  return want == TL_BFLOAT16 || want == TL_FLOAT8_E4M3 || want == TL_FLOAT8_E5M2 || want == TL_FLOAT4_E2M1 ||
         want == TL_FLOAT8_E8M0;
}

/* A packed type's file holds one element per byte: each must be in range
 * (int4: -8..7, uint4: 0..15, float4_e2m1: codes 0..15). */
static tl_status check_packed_values(const unsigned char *data, size_t count, tl_dtype want, const char *name,
                                     tl_error *err) {
  if (!tl_dtype_is_packed(want))
    return TL_OK;
  int bits = tl_dtype_bits(want);
  bool sgn = tl_dtype_is_signed(want);
  int lo = sgn ? -(1 << (bits - 1)) : 0, hi = sgn ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
  for (size_t k = 0; k < count; k++) {
    int v = sgn ? (int)(signed char)data[k] : (int)data[k];
    if (v < lo || v > hi)
      return tl_error_set(err, TL_INVALID_ARG,
                          "%s: element %zu is %d, outside %s's range %d..%d (%s files hold one element per byte)",
                          name, k, v, tl_dtype_name(want), lo, hi, tl_dtype_name(want));
  }
  return TL_OK;
}

/* What a header says. */
typedef struct npy_info {
  tl_dtype file_dtype;            /* the type of the bytes in the file */
  int ndim;
  int64_t shape[TL_NPY_MAX_DIMS];
  size_t count;                   /* product of shape */
  uint64_t data_bytes;            /* count * size of file_dtype */
} npy_info;

/* ---- the header dict literal ------------------------------------------- */

typedef struct cursor {
  const char *s;
  size_t n, i;
  const char *name;   /* file name for messages */
  tl_error *err;
} cursor;

static tl_status syntax(cursor *c, const char *what) {
  return tl_error_set(c->err, TL_INVALID_ARG, "%s: malformed header: %s at byte %zu", c->name,
                      what, c->i);
}

static void skip_ws(cursor *c) {
  while (c->i < c->n) {
    char ch = c->s[c->i];
    if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r' && ch != '\f')
      break;
    c->i++;
  }
}

static int peek(cursor *c) { return c->i < c->n ? (unsigned char)c->s[c->i] : -1; }

static bool is_ident_char(int ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_';
}

/* A quoted string (single or double quotes, no escapes, printable ASCII)
 * into out (NUL-terminated); *too_long is set when it did not fit. */
static tl_status parse_string(cursor *c, char out[NPY_STR_MAX], bool *too_long) {
  int q = peek(c);
  if (q != '\'' && q != '"')
    return syntax(c, "expected a quoted string");
  c->i++;
  size_t len = 0;
  *too_long = false;
  for (;;) {
    int ch = peek(c);
    if (ch < 0 || ch == '\n' || ch == '\r')
      return syntax(c, "unterminated string");
    if (ch == q)
      break;
    if (ch == '\\')
      return syntax(c, "escape sequences in strings are not supported");
    if (ch < 0x20 || ch > 0x7e)
      return syntax(c, "unexpected character in a string");
    if (len + 1 < NPY_STR_MAX)
      out[len++] = (char)ch;
    else
      *too_long = true;
    c->i++;
  }
  c->i++;
  out[len] = 0;
  return TL_OK;
}

/* True or False. */
static tl_status parse_bool(cursor *c, bool *out) {
  static const char *const words[] = {"False", "True"};
  for (int v = 0; v < 2; v++) {
    size_t len = strlen(words[v]);
    if (c->n - c->i >= len && memcmp(c->s + c->i, words[v], len) == 0) {
      size_t end = c->i + len;
      if (end < c->n && is_ident_char((unsigned char)c->s[end]))
        break;
      c->i = end;
      *out = v != 0;
      return TL_OK;
    }
  }
  return tl_error_set(c->err, TL_INVALID_ARG, "%s: header 'fortran_order' must be True or False",
                      c->name);
}

/* One dimension: a non-negative decimal integer (an 'L' suffix, as Python 2
 * wrote long integers, is accepted). */
static tl_status parse_dim(cursor *c, int64_t *out) {
  bool neg = false;
  if (peek(c) == '-') {
    neg = true;
    c->i++;
    skip_ws(c);
  }
  int ch = peek(c);
  if (ch < '0' || ch > '9')
    return tl_error_set(c->err, TL_INVALID_ARG,
                        "%s: header 'shape' must be a tuple of integers, such as (2, 3)", c->name);
  size_t start = c->i;
  uint64_t v = 0;
  bool overflow = false;
  while ((ch = peek(c)) >= '0' && ch <= '9') {
    if (v > ((uint64_t)INT64_MAX - (uint64_t)(ch - '0')) / 10)
      overflow = true;
    else
      v = v * 10 + (uint64_t)(ch - '0');
    c->i++;
  }
  if (c->s[start] == '0' && c->i - start > 1 && v != 0)
    return syntax(c, "integer with a leading zero");
  if (peek(c) == 'L' || peek(c) == 'l')
    c->i++;
  if (is_ident_char(peek(c)) || peek(c) == '.')
    return tl_error_set(c->err, TL_INVALID_ARG,
                        "%s: header 'shape' must be a tuple of integers, such as (2, 3)", c->name);
  if (overflow)
    return tl_error_set(c->err, TL_LIMIT, "%s: a dimension in shape is too large", c->name);
  if (neg && v != 0)
    return tl_error_set(c->err, TL_INVALID_ARG, "%s: negative dimension -%" PRIu64 " in shape",
                        c->name, v);
  *out = (int64_t)v;
  return TL_OK;
}

/* A tuple of dimensions: (), (3,), (2, 3), (2, 3,). */
static tl_status parse_shape(cursor *c, npy_info *info) {
  if (peek(c) != '(')
    return tl_error_set(c->err, TL_INVALID_ARG,
                        "%s: header 'shape' must be a tuple of integers, such as (2, 3)", c->name);
  c->i++;
  skip_ws(c);
  long ndim = 0;
  if (peek(c) == ')') {
    c->i++;
    info->ndim = 0;
    return TL_OK;
  }
  for (;;) {
    int64_t d = 0;
    tl_status st = parse_dim(c, &d);
    if (st != TL_OK)
      return st;
    if (ndim < TL_NPY_MAX_DIMS)
      info->shape[ndim] = d;
    ndim++;
    skip_ws(c);
    if (peek(c) == ',') {
      c->i++;
      skip_ws(c);
      if (peek(c) == ')') {
        c->i++;
        break;
      }
      continue;
    }
    if (peek(c) == ')') {
      if (ndim == 1) /* (3) is the integer 3, not a tuple */
        return tl_error_set(c->err, TL_INVALID_ARG,
                            "%s: header 'shape' must be a tuple of integers, such as (2, 3)",
                            c->name);
      c->i++;
      break;
    }
    return syntax(c, "expected ',' or ')' in shape");
  }
  if (ndim > TL_NPY_MAX_DIMS)
    return tl_error_set(c->err, TL_LIMIT, "%s: shape has %ld dimensions; at most %d are supported",
                        c->name, ndim, TL_NPY_MAX_DIMS);
  info->ndim = (int)ndim;
  return TL_OK;
}

/* Maps a descr string to the dtype of the file's bytes. */
static tl_status parse_descr(const char *d, const char *name, tl_dtype *out, tl_error *err) {
  const char *p = d;
  char order = '=';
  if (*p == '<' || *p == '>' || *p == '=' || *p == '|')
    order = *p++;
  char kind = *p ? *p++ : 0;
  int size = 0;
  if (p[0] >= '1' && p[0] <= '9' && p[1] == 0)
    size = p[0] - '0';
  static const struct {
    char kind;
    int size;
    tl_dtype t;
  } table[] = {
      {'b', 1, TL_BOOL},   {'i', 1, TL_INT8},    {'u', 1, TL_UINT8},   {'i', 2, TL_INT16},
      {'u', 2, TL_UINT16}, {'i', 4, TL_INT32},   {'u', 4, TL_UINT32},  {'i', 8, TL_INT64},
      {'u', 8, TL_UINT64}, {'f', 2, TL_FLOAT16}, {'f', 4, TL_FLOAT32}, {'f', 8, TL_FLOAT64},
  };
  for (size_t k = 0; k < sizeof table / sizeof table[0]; k++) {
    if (table[k].kind != kind || table[k].size != size)
      continue;
    if (order == '>' && size > 1)
      return tl_error_set(err, TL_INVALID_ARG,
                          "%s: big-endian data ('%s') is not supported; convert with "
                          "a.astype('<%c%d')",
                          name, d, kind, size);
    *out = table[k].t;
    return TL_OK;
  }
  return tl_error_set(err, TL_INVALID_ARG, "%s: unsupported dtype '%s'", name, d);
}

enum { KEY_DESCR, KEY_FORTRAN, KEY_SHAPE, KEY_COUNT };
static const char *const key_names[KEY_COUNT] = {"descr", "fortran_order", "shape"};

/* Parses the dict literal text[0..len) into info. */
static tl_status parse_dict(const char *text, size_t len, const char *name, npy_info *info,
                            tl_error *err) {
  cursor cur = {text, len, 0, name, err}, *c = &cur;
  bool seen[KEY_COUNT] = {false, false, false};
  char descr[NPY_STR_MAX] = "";
  bool too_long = false;
  tl_status st;

  skip_ws(c);
  if (peek(c) != '{')
    return syntax(c, "expected '{'");
  c->i++;
  skip_ws(c);
  while (peek(c) != '}') {
    char key[NPY_STR_MAX];
    bool key_long;
    if ((st = parse_string(c, key, &key_long)) != TL_OK)
      return st;
    int k = 0;
    while (k < KEY_COUNT && (key_long || strcmp(key, key_names[k]) != 0))
      k++;
    if (k == KEY_COUNT)
      return tl_error_set(err, TL_INVALID_ARG, "%s: header has an unexpected key '%s%s'", name,
                          key, key_long ? "..." : "");
    if (seen[k])
      return tl_error_set(err, TL_INVALID_ARG, "%s: header has the key '%s' twice", name, key);
    seen[k] = true;
    skip_ws(c);
    if (peek(c) != ':')
      return syntax(c, "expected ':'");
    c->i++;
    skip_ws(c);
    switch (k) {
    case KEY_DESCR:
      if (peek(c) == '[')
        return tl_error_set(err, TL_INVALID_ARG, "%s: structured dtypes are not supported", name);
      if (peek(c) != '\'' && peek(c) != '"')
        return tl_error_set(err, TL_INVALID_ARG, "%s: header 'descr' must be a string", name);
      if ((st = parse_string(c, descr, &too_long)) != TL_OK)
        return st;
      break;
    case KEY_FORTRAN: {
      bool fortran = false;
      if ((st = parse_bool(c, &fortran)) != TL_OK)
        return st;
      if (fortran)
        return tl_error_set(err, TL_INVALID_ARG,
                            "%s: fortran_order arrays are not supported; save with "
                            "np.ascontiguousarray",
                            name);
      break;
    }
    case KEY_SHAPE:
      if ((st = parse_shape(c, info)) != TL_OK)
        return st;
      break;
    }
    skip_ws(c);
    if (peek(c) == ',') {
      c->i++;
      skip_ws(c);
    } else if (peek(c) != '}') {
      return syntax(c, "expected ',' or '}'");
    }
  }
  c->i++;
  skip_ws(c);
  if (c->i != c->n)
    return syntax(c, "unexpected text after the dict");
  for (int k = 0; k < KEY_COUNT; k++)
    if (!seen[k])
      return tl_error_set(err, TL_INVALID_ARG, "%s: header lacks the key '%s'", name, key_names[k]);
  if (too_long)
    return tl_error_set(err, TL_INVALID_ARG, "%s: unsupported dtype '%s...'", name, descr);
  return parse_descr(descr, name, &info->file_dtype, err);
}

/* ---- preamble, sizes and dtypes ---------------------------------------- */

/* Checks the magic and version in p[0..n) and gives the header's length and
 * where it starts.  n may be short (a truncated file). */
static tl_status parse_preamble(const unsigned char *p, size_t n, const char *name,
                                size_t *header_len, size_t *header_start, tl_error *err) {
  size_t m = n < NPY_MAGIC_LEN ? n : NPY_MAGIC_LEN;
  if (n == 0)
    return tl_error_set(err, TL_INVALID_ARG, "%s: not a .npy file (it is empty)", name);
  if (memcmp(p, NPY_MAGIC, m) != 0)
    return tl_error_set(err, TL_INVALID_ARG,
                        "%s: not a .npy file (it does not start with \\x93NUMPY)", name);
  if (n < NPY_MAGIC_LEN + 2)
    return tl_error_set(err, TL_INVALID_ARG, "%s: truncated header", name);
  int major = p[6], minor = p[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return tl_error_set(err, TL_INVALID_ARG,
                        "%s: unsupported .npy format version %d.%d (1.0, 2.0 and 3.0 are supported)",
                        name, major, minor);
  size_t start = major == 1 ? 10 : 12;
  if (n < start)
    return tl_error_set(err, TL_INVALID_ARG, "%s: truncated header", name);
  uint32_t len = (uint32_t)p[8] | (uint32_t)p[9] << 8;
  if (major != 1)
    len |= (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
  if (len > NPY_HEADER_MAX)
    return tl_error_set(err, TL_LIMIT, "%s: header of %" PRIu32 " bytes exceeds the limit of %u bytes",
                        name, len, NPY_HEADER_MAX);
  *header_len = len;
  *header_start = start;
  return TL_OK;
}

/* The element count and byte size of a shape of non-negative dimensions;
 * false when they overflow.  The product of the non-zero dimensions must
 * not overflow either (an empty array of (0, 2^32, 2^32) is refused), so
 * that strides computed from the shape are safe. */
static bool shape_size(int ndim, const int64_t *shape, size_t esize, uint64_t *count,
                       uint64_t *bytes) {
  uint64_t n = 1, nonzero = 1, b;
  for (int d = 0; d < ndim; d++) {
    uint64_t dim = (uint64_t)shape[d];
    n *= dim; /* cannot overflow while nonzero does not */
    if (dim && __builtin_mul_overflow(nonzero, dim, &nonzero))
      return false;
  }
  if (__builtin_mul_overflow(nonzero, (uint64_t)esize, &b))
    return false;
  *count = n;
  *bytes = n * (uint64_t)esize;
  return true;
}

/* Computes count and data_bytes with overflow checks and the size limit. */
static tl_status compute_size(npy_info *info, const char *name, tl_error *err) {
  uint64_t count, bytes;
  if (!shape_size(info->ndim, info->shape, tl_dtype_size(info->file_dtype), &count, &bytes))
    return tl_error_set(err, TL_LIMIT, "%s: shape is too large (the data size overflows)", name);
  if (bytes > NPY_DATA_MAX || count > SIZE_MAX)
    return tl_error_set(err, TL_LIMIT,
                        "%s: array data of %" PRIu64 " bytes exceeds the limit of 2^40 bytes",
                        name, bytes);
  info->count = (size_t)count;
  info->data_bytes = bytes;
  return TL_OK;
}

/* Is the file's dtype acceptable for a tensor of dtype want? */
static tl_status check_dtype(const npy_info *info, const char *name, tl_dtype want,
                             tl_error *err) {
  if (!valid_dtype(want))
    return tl_error_set(err, TL_INVALID_ARG, "%s: the tensor's dtype (%d) is not a dtype", name,
                        (int)want);
  tl_dtype f = info->file_dtype;
  if (f == storage[want].stored)
    return TL_OK;
  if (accepts_float_values(want) && (f == TL_FLOAT32 || f == TL_FLOAT64))
    return TL_OK;
  if (accepts_float_values(want))
    return tl_error_set(err, TL_INVALID_ARG,
                        "%s holds %s (%s) but the tensor is %s (%s bit patterns, or <f4 or <f8 "
                        "values)",
                        name, tl_dtype_name(f), storage[f].descr, tl_dtype_name(want),
                        storage[want].descr);
  return tl_error_set(err, TL_INVALID_ARG, "%s holds %s (%s) but the tensor is %s (%s)", name,
                      tl_dtype_name(f), storage[f].descr, tl_dtype_name(want),
                      storage[want].descr);
}

/* Turns the file's data (info->data_bytes at raw) into out: a copy, or a
 * rounding of float values into bfloat16/float8 bit patterns.  raw is not
 * consumed. */
static tl_status fill_output(const npy_info *info, const void *raw, tl_dtype want, tl_npy *out,
                             const char *name, tl_error *err) {
  size_t out_size = tl_dtype_size(want);
  size_t bytes = info->count * out_size; /* <= data_bytes: cannot overflow */
  unsigned char *data = malloc(bytes ? bytes : 1);
  if (!data)
    return tl_error_set(err, TL_NOMEM, "%s: out of memory for %zu bytes of array data", name,
                        bytes);
  const unsigned char *src = raw;
  if (info->file_dtype == storage[want].stored) {
    if (bytes)
      memcpy(data, src, bytes);
    if (want == TL_BOOL)
      for (size_t k = 0; k < info->count; k++)
        data[k] = data[k] != 0;
    tl_status st = check_packed_values(data, info->count, want, name, err);
    if (st != TL_OK) {
      free(data);
      return st;
    }
    if (tl_dtype_is_packed(want)) /* held as the element's low bits (dtype.h) */
      for (size_t k = 0; k < info->count; k++)
        data[k] &= (unsigned char)((1u << tl_dtype_bits(want)) - 1);
  } else {
    for (size_t k = 0; k < info->count; k++) {
      double x;
      if (info->file_dtype == TL_FLOAT32) {
        float f;
        memcpy(&f, src + 4 * k, 4);
        x = f;
      } else {
        memcpy(&x, src + 8 * k, 8);
      }
      if (want == TL_BFLOAT16) {
        uint16_t h = tl_bf16_from_double(x);
        memcpy(data + 2 * k, &h, 2);
      } else if (want == TL_FLOAT8_E4M3) {
        data[k] = tl_e4m3_from_double(x);
      } else if (want == TL_FLOAT4_E2M1) {
        data[k] = tl_e2m1_from_double(x);
      } else if (want == TL_FLOAT8_E8M0) {
        data[k] = tl_e8m0_from_double(x);
      } else {
        assert(want == TL_FLOAT8_E5M2);
        data[k] = tl_e5m2_from_double(x);
      }
    }
  }
  out->dtype = want;
  out->ndim = info->ndim;
  memcpy(out->shape, info->shape, sizeof out->shape);
  out->count = info->count;
  out->data = data;
  return TL_OK;
}

static tl_status truncated_data(const char *name, const npy_info *info, uint64_t found,
                                tl_error *err) {
  return tl_error_set(err, TL_INVALID_ARG,
                      "%s: truncated data (expected %" PRIu64 " bytes after the header, found %" PRIu64
                      ")",
                      name, info->data_bytes, found);
}

static tl_status trailing_data(const char *name, const npy_info *info, uint64_t header_end,
                               tl_error *err) {
  return tl_error_set(err, TL_INVALID_ARG,
                      "%s: unexpected bytes after the array data (expected %" PRIu64
                      " bytes in all)",
                      name, header_end + info->data_bytes);
}

/* ---- public: parse and read -------------------------------------------- */

tl_status tl_npy_parse(const void *buf, size_t len, const char *name, tl_dtype want, tl_npy *out,
                       tl_error *err) {
  assert(out && (buf || len == 0));
  memset(out, 0, sizeof *out);
  if (!name)
    name = "(buffer)";
  const unsigned char *p = buf;
  size_t header_len, start;
  tl_status st = parse_preamble(p, len, name, &header_len, &start, err);
  if (st != TL_OK)
    return st;
  if (len - start < header_len)
    return tl_error_set(err, TL_INVALID_ARG, "%s: truncated header (expected %zu bytes, found %zu)",
                        name, header_len, len - start);
  npy_info info;
  memset(&info, 0, sizeof info);
  if ((st = parse_dict((const char *)p + start, header_len, name, &info, err)) != TL_OK ||
      (st = compute_size(&info, name, err)) != TL_OK ||
      (st = check_dtype(&info, name, want, err)) != TL_OK)
    return st;
  size_t header_end = start + header_len;
  uint64_t rest = len - header_end;
  if (rest < info.data_bytes)
    return truncated_data(name, &info, rest, err);
  if (rest > info.data_bytes)
    return trailing_data(name, &info, header_end, err);
  return fill_output(&info, p + header_end, want, out, name, err);
}

/* Reads up to n bytes; *got is how many were read (less only at end of
 * file).  Returns false on a read error (errno set). */
static bool read_full(int fd, void *buf, size_t n, size_t *got) {
  size_t done = 0;
  while (done < n) {
    size_t chunk = n - done < ((size_t)1 << 30) ? n - done : ((size_t)1 << 30);
    ssize_t r = read(fd, (char *)buf + done, chunk);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      *got = done;
      return false;
    }
    if (r == 0)
      break;
    done += (size_t)r;
  }
  *got = done;
  return true;
}

static tl_status read_error(const char *path, tl_error *err) {
  return tl_error_set(err, TL_IO, "%s: cannot read: %s", path, strerror(errno));
}

/* Reads the data (info->data_bytes bytes, then checks for end of file).  The
 * buffer grows as bytes arrive, so that a header promising more than the
 * file holds does not allocate it. */
static tl_status read_data(int fd, const char *path, const npy_info *info, uint64_t header_end,
                           unsigned char **raw_out, tl_error *err) {
  size_t want = (size_t)info->data_bytes, cap = want < ((size_t)1 << 24) ? want : ((size_t)1 << 24);
  unsigned char *raw = malloc(cap ? cap : 1);
  if (!raw)
    return tl_error_set(err, TL_NOMEM, "%s: out of memory", path);
  size_t have = 0;
  while (have < want) {
    if (have == cap) {
      size_t ncap = cap > want / 2 ? want : cap * 2;
      unsigned char *n = realloc(raw, ncap);
      if (!n) {
        free(raw);
        return tl_error_set(err, TL_NOMEM, "%s: out of memory for %zu bytes of array data",
                            path, want);
      }
      raw = n;
      cap = ncap;
    }
    size_t got;
    if (!read_full(fd, raw + have, cap - have, &got)) {
      free(raw);
      return read_error(path, err);
    }
    have += got;
    if (have < cap)
      break; /* end of file */
  }
  if (have < want) {
    free(raw);
    return truncated_data(path, info, have, err);
  }
  unsigned char extra;
  size_t got;
  if (!read_full(fd, &extra, 1, &got)) {
    free(raw);
    return read_error(path, err);
  }
  if (got) {
    free(raw);
    return trailing_data(path, info, header_end, err);
  }
  *raw_out = raw;
  return TL_OK;
}

tl_status tl_npy_read(const char *path, tl_dtype want, tl_npy *out, tl_error *err) {
  assert(path && out);
  memset(out, 0, sizeof *out);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return tl_error_set(err, TL_IO, "%s: cannot open: %s", path, strerror(errno));
  tl_status st;
  char *text = NULL;
  unsigned char *raw = NULL;
  unsigned char pre[12];
  size_t got, header_len, start;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !read_full(fd, pre, 10, &got)) {
    st = read_error(path, err);
    goto done;
  }
  /* parse_preamble wants 12 bytes for versions 2 and 3 */
  if (got == 10 && pre[6] != 1) {
    size_t more;
    if (!read_full(fd, pre + 10, 2, &more)) {
      st = read_error(path, err);
      goto done;
    }
    got += more;
  }
  if ((st = parse_preamble(pre, got, path, &header_len, &start, err)) != TL_OK)
    goto done;
  if (!(text = malloc(header_len ? header_len : 1))) {
    st = tl_error_set(err, TL_NOMEM, "%s: out of memory", path);
    goto done;
  }
  if (!read_full(fd, text, header_len, &got)) {
    st = read_error(path, err);
    goto done;
  }
  if (got < header_len) {
    st = tl_error_set(err, TL_INVALID_ARG, "%s: truncated header (expected %zu bytes, found %zu)",
                      path, header_len, got);
    goto done;
  }
  npy_info info;
  memset(&info, 0, sizeof info);
  if ((st = parse_dict(text, header_len, path, &info, err)) != TL_OK ||
      (st = compute_size(&info, path, err)) != TL_OK ||
      (st = check_dtype(&info, path, want, err)) != TL_OK)
    goto done;
  uint64_t header_end = start + header_len;
  if (S_ISREG(sb.st_mode) && sb.st_size >= 0) {
    uint64_t size = (uint64_t)sb.st_size, rest = size > header_end ? size - header_end : 0;
    if (rest < info.data_bytes) {
      st = truncated_data(path, &info, rest, err);
      goto done;
    }
    if (rest > info.data_bytes) {
      st = trailing_data(path, &info, header_end, err);
      goto done;
    }
  }
  if ((st = read_data(fd, path, &info, header_end, &raw, err)) != TL_OK)
    goto done;
  st = fill_output(&info, raw, want, out, path, err);
done:
  free(raw);
  free(text);
  close(fd);
  return st;
}

void tl_npy_free(tl_npy *arr) {
  if (!arr)
    return;
  free(arr->data);
  memset(arr, 0, sizeof *arr);
}

/* ---- write ------------------------------------------------------------- */

/* Builds the preamble and header for arr into buf (cap bytes); returns its
 * length, a multiple of NPY_ALIGN, or 0 if it does not fit. */
static size_t build_header(const tl_npy *arr, char *buf, size_t cap) {
  char dict[512];
  int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                   storage[arr->dtype].descr);
  for (int d = 0; d < arr->ndim; d++)
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%" PRId64, d ? ", " : "", arr->shape[d]);
  n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", arr->ndim == 1 ? "," : "");
  assert(n > 0 && (size_t)n < sizeof dict);
  /* Version 1.0 unless the padded header needs more than 16 bits. */
  size_t start = 10, total = (start + (size_t)n + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
  int major = 1;
  if (total - start > 65535) {
    start = 12;
    major = 2;
    total = (start + (size_t)n + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
  }
  if (total > cap)
    return 0;
  size_t hlen = total - start;
  memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
  buf[6] = (char)major;
  buf[7] = 0;
  buf[8] = (char)(hlen & 0xff);
  buf[9] = (char)(hlen >> 8 & 0xff);
  if (major == 2) {
    buf[10] = (char)(hlen >> 16 & 0xff);
    buf[11] = (char)(hlen >> 24 & 0xff);
  }
  memcpy(buf + start, dict, (size_t)n);
  memset(buf + start + n, ' ', total - start - (size_t)n - 1);
  buf[total - 1] = '\n';
  return total;
}

static bool write_full(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    size_t chunk = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
    ssize_t w = write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += w;
    n -= (size_t)w;
  }
  return true;
}

/* Writes the data; bools are written as 0/1. */
/* bool is written as 0/1 and a packed type as one element per byte, signed
 * types sign-extended (the host may hold other bits above the element). */
static bool write_data(int fd, const tl_npy *arr, size_t bytes) {
  if (arr->dtype != TL_BOOL && !tl_dtype_is_packed(arr->dtype))
    return write_full(fd, arr->data, bytes);
  const unsigned char *src = arr->data;
  unsigned char chunk[4096];
  int bits = tl_dtype_bits(arr->dtype);
  for (size_t off = 0; off < bytes; off += sizeof chunk) {
    size_t m = bytes - off < sizeof chunk ? bytes - off : sizeof chunk;
    for (size_t k = 0; k < m; k++)
      chunk[k] = arr->dtype == TL_BOOL                ? src[off + k] != 0
                 : tl_dtype_is_float(arr->dtype) ? src[off + k] & ((1u << bits) - 1) /* float4_e2m1 codes */
                                                 : (unsigned char)tl_load(src + off + k, arr->dtype).i;
    if (!write_full(fd, chunk, m))
      return false;
  }
  return true;
}

/* Best effort: makes a rename in path's directory durable. */
static void sync_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  char dir[NPY_PATH_MAX];
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == path)
    snprintf(dir, sizeof dir, "/");
  else
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
}

tl_status tl_npy_write(const char *path, const tl_npy *arr, tl_error *err) {
  assert(path && arr);
  size_t plen = strlen(path);
  if (plen == 0 || plen >= NPY_PATH_MAX - 32)
    return tl_error_set(err, TL_INVALID_ARG, "cannot write a .npy file: the path is %s",
                        plen ? "too long" : "empty");
  if (!valid_dtype(arr->dtype))
    return tl_error_set(err, TL_INVALID_ARG, "%s: cannot write an array of dtype %d", path,
                        (int)arr->dtype);
  if (arr->ndim < 0 || arr->ndim > TL_NPY_MAX_DIMS)
    return tl_error_set(err, TL_INVALID_ARG, "%s: cannot write an array of %d dimensions", path,
                        arr->ndim);
  for (int d = 0; d < arr->ndim; d++)
    if (arr->shape[d] < 0)
      return tl_error_set(err, TL_INVALID_ARG, "%s: cannot write an array with a negative dimension",
                          path);
  uint64_t count, bytes;
  if (!shape_size(arr->ndim, arr->shape, tl_dtype_size(arr->dtype), &count, &bytes) ||
      bytes > NPY_DATA_MAX || count > SIZE_MAX)
    return tl_error_set(err, TL_LIMIT, "%s: array data exceeds the limit of 2^40 bytes", path);
  if (count != arr->count)
    return tl_error_set(err, TL_INVALID_ARG,
                        "%s: the array's count (%zu) is not the product of its shape (%" PRIu64 ")",
                        path, arr->count, count);
  if (!arr->data && bytes)
    return tl_error_set(err, TL_INVALID_ARG, "%s: the array has no data", path);

  char header[1024];
  size_t hlen = build_header(arr, header, sizeof header);
  assert(hlen > 0);

  static _Atomic unsigned counter;
  char tmp[NPY_PATH_MAX];
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), counter++);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0)
    return tl_error_set(err, TL_IO, "%s: cannot create a temporary file: %s", path,
                        strerror(errno));
  if (!write_full(fd, header, hlen) || !write_data(fd, arr, (size_t)bytes) || fsync(fd) != 0) {
    int e = errno;
    close(fd);
    unlink(tmp);
    return tl_error_set(err, TL_IO, "%s: cannot write: %s", path, strerror(e));
  }
  if (close(fd) != 0) {
    int e = errno;
    unlink(tmp);
    return tl_error_set(err, TL_IO, "%s: cannot write: %s", path, strerror(e));
  }
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    return tl_error_set(err, TL_IO, "%s: cannot rename the temporary file into place: %s", path,
                        strerror(e));
  }
  sync_dir(path);
  return TL_OK;
}
