/*
 * dtype.h - the element types of Tile IR and exact conversions between them.
 *
 * Every value the interpreter computes with is a tl_scalar tagged (out of
 * band) with a tl_dtype.  Representation inside tl_scalar:
 *   - bool: .i is 0 or 1;
 *   - signed integers: .i holds the value (sign-extended);
 *   - unsigned integers: .u holds the value (zero-extended);
 *   - every float type (float8_e4m3, float8_e5m2, float16, bfloat16,
 *     float32, float64): .f holds the value as a double.  The value is
 *     always exactly representable in its dtype (conversions round).
 *
 * Conversions follow TILE-IR.md section 6: floats round to nearest even;
 * float to integer truncates toward zero and saturates to the integer's
 * range, NaN gives 0; integer to integer wraps modulo 2^width; anything to
 * bool is `!= 0` (NaN is true); float16 and bfloat16 overflow to infinity;
 * float8_e4m3 is the "fn" variant (bias 7, max 448, no infinity, NaN is
 * S.1111.111); float8_e5m2 is IEEE-like (bias 15, max 57344, has inf/NaN);
 * conversions to either float8 round to nearest even and saturate to
 * +-maximum (infinities included: "satfinite"); NaN stays NaN.
 */
#ifndef TL_DTYPE_H
#define TL_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum tl_dtype {
  TL_BOOL,
  TL_INT8,
  TL_UINT8,
  TL_INT16,
  TL_UINT16,
  TL_INT32,
  TL_UINT32,
  TL_INT64,
  TL_UINT64,
  TL_FLOAT16,
  TL_BFLOAT16,
  TL_FLOAT32,
  TL_FLOAT64,
  TL_FLOAT8_E4M3,
  TL_FLOAT8_E5M2,
  TL_DTYPE_COUNT
} tl_dtype;

typedef union tl_scalar {
  int64_t i;
  uint64_t u;
  double f;
} tl_scalar;

/* "float16", "bfloat16", ... (the Tile IR spelling).  Never NULL. */
const char *tl_dtype_name(tl_dtype t);
/* Parses a Tile IR dtype name; returns false if s is not one. */
bool tl_dtype_parse(const char *s, tl_dtype *out);
/* Storage size in bytes (bool is 1). */
size_t tl_dtype_size(tl_dtype t);
/* Width in bits (bool is 8, as stored). */
int tl_dtype_bits(tl_dtype t);
bool tl_dtype_is_float(tl_dtype t);
bool tl_dtype_is_int(tl_dtype t);      /* integer types, not bool */
bool tl_dtype_is_signed(tl_dtype t);   /* signed integer types */
/* Whether t is a float type with an infinity: every float type except
 * float8_e4m3 (TILE-IR.md: `infinity` of an integer type or of float8_e4m3
 * is an error).  False for bool and integers. */
bool tl_dtype_has_inf(tl_dtype t);
/* Largest finite value, lowest finite value (as doubles for floats, as
 * tl_scalar of the type for integers). */
tl_scalar tl_dtype_max(tl_dtype t);
tl_scalar tl_dtype_min(tl_dtype t);

/* Rounds a double to the nearest value of float type t (nearest even,
 * saturating for float8 as described above) and returns it as a double. */
double tl_round_to(tl_dtype t, double x);

/* Converts v, a value of type from, to type to, with the rules above. */
tl_scalar tl_convert(tl_scalar v, tl_dtype from, tl_dtype to);

/* Loads/stores one element of type t at p (little-endian host; p need not
 * be aligned).  tl_store expects v already of type t (see tl_convert); it
 * rounds a float that is not (nearest even), but it is not a conversion:
 * a float8_e5m2 infinity (which only a load or reinterpret can produce) is
 * stored as infinity, not saturated. */
tl_scalar tl_load(const void *p, tl_dtype t);
void tl_store(void *p, tl_dtype t, tl_scalar v);

/* Bit-level encodings of the small float formats (round to nearest even).
 * Each small format has one NaN as far as these functions are concerned:
 * encoding any NaN gives the canonical positive quiet NaN (float16 0x7E00,
 * bfloat16 0x7FC0, float8_e4m3 0x7F, float8_e5m2 0x7E) and decoding any NaN
 * pattern gives the canonical double NaN (0x7FF8000000000000), so sign and
 * payload of a NaN are not kept (not even by tl_reinterpret through these
 * types).  tl_f32_round also gives the canonical NaN; float32 and float64
 * loads, stores and reinterprets move NaNs as C casts do. */
uint16_t tl_f16_from_double(double x);
double tl_f16_to_double(uint16_t h);
uint16_t tl_bf16_from_double(double x);
double tl_bf16_to_double(uint16_t h);
uint8_t tl_e4m3_from_double(double x);
double tl_e4m3_to_double(uint8_t b);
uint8_t tl_e5m2_from_double(double x);
double tl_e5m2_to_double(uint8_t b);
/* float32 rounding of a double (nearest even), as a double. */
double tl_f32_round(double x);

/* Reinterprets the bits of v (of type from) as type to; both must have the
 * same width (checked by the caller). */
tl_scalar tl_reinterpret(tl_scalar v, tl_dtype from, tl_dtype to);

#endif
