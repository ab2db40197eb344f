/*
 * npy.h - reading and writing NumPy .npy files (format versions 1.0, 2.0
 * and 3.0 on read; 1.0 on write, 2.0 when the header needs it).
 *
 * Only little-endian (or byte-order-free) C-order arrays of the dtypes Tile
 * IR uses are accepted.  Mapping (TILE-IR.md section 6):
 *   bool |b1, int8 |i1, uint8 |u1, int16 <i2, uint16 <u2, int32 <i4,
 *   uint32 <u4, int64 <i8, uint64 <u8, float16 <f2, float32 <f4,
 *   float64 <f8; bfloat16 is stored as <u2 bit patterns and float8_* as |u1
 *   bit patterns.  The packed types are one element per byte with the
 *   tensor's own shape (tile-ir-v1.md 9.6): int4, int2, int1 as |i1 values,
 *   uint4, uint2, uint1 as |u1 values (a value out of the type's range is
 *   an error), float4_e2m1 as |u1 codes 0..15; float8_e8m0 as |u1 codes.
 *   When reading for a bfloat16, float8 or float4 tensor, files of <f4 or
 *   <f8 values are accepted too and rounded to nearest even (float8_e8m0:
 *   to the nearest power of two, dtype.h).  tl_npy.data holds a packed
 *   type one element per byte (tl_pack makes the device layout).
 * Limits: header at most 64 KiB, at most TL_NPY_MAX_DIMS dimensions, data at
 * most 2^40 bytes; a truncated file or trailing garbage is an error.
 */
#ifndef TL_NPY_H
#define TL_NPY_H

#include <stddef.h>
#include <stdint.h>
#include "dtype.h"
#include "../proto/tl_error.h"

#define TL_NPY_MAX_DIMS 8

typedef struct tl_npy {
  tl_dtype dtype;                   /* the element type of data */
  int ndim;                         /* 0 for a scalar array */
  int64_t shape[TL_NPY_MAX_DIMS];
  size_t count;                     /* product of shape (1 when ndim == 0) */
  void *data;                       /* count * tl_dtype_size(dtype) bytes, malloc'd */
} tl_npy;

/* Reads path into out, converting to `want` (the dtype of the tensor the
 * file is for).  The file's dtype must be want's own mapping above, or one
 * of the accepted alternatives; anything else is TL_INVALID_ARG with a
 * message such as "x.npy holds int32 (<i4) but the tensor is float16 (<f2)".
 * Malformed files are TL_INVALID_ARG naming the file and what is wrong;
 * open/read failures TL_IO.  On success out->data is owned by the caller
 * (tl_npy_free). On failure out holds nothing to free. */
tl_status tl_npy_read(const char *path, tl_dtype want, tl_npy *out, tl_error *err);

/* Parses an in-memory .npy image (same rules; `name` is used in messages). */
tl_status tl_npy_parse(const void *buf, size_t len, const char *name, tl_dtype want,
                       tl_npy *out, tl_error *err);

/* Writes arr to path (atomically: a temporary file renamed into place). */
tl_status tl_npy_write(const char *path, const tl_npy *arr, tl_error *err);

/* Frees arr->data and zeroes arr. Accepts NULL. */
void tl_npy_free(tl_npy *arr);

/* The descr written for (and first accepted for) tensors of dtype t:
 * "<f4", "|b1", "<u2" for bfloat16, "|u1" for float8; "?" for a value that
 * is not a dtype.  Static storage, never NULL. */
const char *tl_npy_descr(tl_dtype t);

/* Status codes, in detail: exceeding a limit (header size, dimensions, data
 * size) is TL_LIMIT; a failed allocation TL_NOMEM; tl_npy_write's I/O
 * failures TL_IO and an inconsistent arr TL_INVALID_ARG. */

#endif
