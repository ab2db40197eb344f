/*
 * dtype.h - the element types of Tile IR and exact conversions between them.
 *
 * Every value the interpreter computes with is a tl_scalar tagged (out of
 * band) with a tl_dtype.  Representation inside tl_scalar:
 *   - bool: .i is 0 or 1;
 *   - signed integers: .i holds the value (sign-extended);
 *   - unsigned integers: .u holds the value (zero-extended);
 *   - every float type (float4_e2m1, float8_e4m3, float8_e5m2,
 *     float8_e8m0, float16, bfloat16, float32, float64): .f holds the value
 *     as a double.  The value is always exactly representable in its dtype
 *     (conversions round).
 *
 * The sub-byte types int4, uint4, int2, uint2, int1, uint1 and float4_e2m1
 * are "packed": in device memory 8/bits elements share a byte (element k
 * of a row-major array at bit (k % (8/bits)) * bits of byte k / (8/bits),
 * tl_pack/tl_unpack).  On the host (the interpreter's buffers, .npy files,
 * tl_load/tl_store) they are held one element per byte, in the low bits.
 * float4_e2m1 (OCP MX FP4: bias 1, max 6, no infinity, no NaN) saturates
 * like the float8 types and converts NaN to +6.  float8_e8m0 (OCP MX E8M0,
 * the block-scale type) is an unsigned power of two 2^(e-127), e in 0..254,
 * 0xFF NaN: no zero, no sign, no infinity; conversion to it rounds to the
 * nearest power of two (a tie, 1.5 * 2^k, rounds up), saturates to
 * [2^-127, 2^127] (zero, tiny positive values and +inf included), and gives
 * NaN for NaN and negative values.
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
  /* the packed sub-byte types (tl_dtype_is_packed) and the scale type */
  TL_INT4,
  TL_UINT4,
  TL_INT2,
  TL_UINT2,
  TL_INT1,
  TL_UINT1,
  TL_FLOAT4_E2M1,
  TL_FLOAT8_E8M0,
  TL_DTYPE_COUNT
} tl_dtype;

typedef union tl_scalar {
  int64_t i;
  uint64_t u;
  double f;
} tl_scalar;

/* "float16", "bfloat16", ... (the Tile IR spelling).  Never NULL. */
const char *tl_dtype_name(tl_dtype t);
/* Parses a Tile IR dtype name, or one of the aliases of tile-ir-v1.md 7.1
 * (TileLang's spellings: float8_e4m3fn, float4_e2m1fn, float8_e8m0fnu);
 * returns false if s is neither. */
bool tl_dtype_parse(const char *s, tl_dtype *out);
/* Whether t is one of the dtypes Tile IR v1 started with (bool to
 * float8_e5m2): only those names are reserved (tile-ir-v1.md 7.5). */
bool tl_dtype_is_reserved(tl_dtype t);
/* Host storage size in bytes of one element (bool is 1; a packed type is
 * held one element per byte on the host, so 1). */
size_t tl_dtype_size(tl_dtype t);
/* Width in bits (bool is 8, as stored; 4, 2 or 1 for the packed types). */
int tl_dtype_bits(tl_dtype t);
/* Whether t is a packed sub-byte type (fewer than 8 bits). */
bool tl_dtype_is_packed(tl_dtype t);
/* Device bytes of n elements of t: n * bits / 8, rounded up. */
uint64_t tl_dtype_bytes(tl_dtype t, uint64_t n);
/* Packs n elements of packed type t held one per byte at src (low bits)
 * into device layout at dst (tl_dtype_bytes(t, n) bytes; the unused high
 * bits of a last partial byte are 0).  For a type that is not packed both
 * are plain copies of n * tl_dtype_size(t) bytes.  src and dst do not
 * overlap. */
void tl_pack(tl_dtype t, const void *src, uint64_t n, void *dst);
void tl_unpack(tl_dtype t, const void *src, uint64_t n, void *dst);
bool tl_dtype_is_float(tl_dtype t);
bool tl_dtype_is_int(tl_dtype t);      /* integer types, not bool */
bool tl_dtype_is_signed(tl_dtype t);   /* signed integer types */
/* Whether t is a float type with an infinity: every float type except
 * float8_e4m3, float4_e2m1 and float8_e8m0 (TILE-IR.md: `infinity` of an
 * integer type or of float8_e4m3 is an error).  False for bool and
 * integers. */
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
uint8_t tl_e2m1_from_double(double x);  /* a 4-bit code, 0..15 */
double tl_e2m1_to_double(uint8_t b);    /* of the low 4 bits */
uint8_t tl_e8m0_from_double(double x);
double tl_e8m0_to_double(uint8_t b);
/* float32 rounding of a double (nearest even), as a double. */
double tl_f32_round(double x);

/* The conversion of packed integers to float16 pairs without a convert
 * instruction (FasterTransformer's "magic number" trick): in a word w of
 * packed elements of `bits` (1, 2 or 4) bits, element i at bit i * bits
 * (proto/tile-ir-v1.md 7.1.2), the pair of elements 2p and 2p + 1 becomes
 * the float16 pair h = add.f16x2(x, bias) with
 *   x = lop3(prmt(w', 0, sel), mask, magic) = (prmt & mask) | magic,
 * w' = w ^ flip.  prmt copies the byte holding the pair into bytes 0 and
 * 2; mask keeps the lower element at its bits sl of the low half and the
 * upper one at its bits sh of the high half; magic puts in each half the
 * exponent of 2^(10 - s), whose last mantissa bit is bit s, so that the
 * half reads 2^(10 - s) + e; bias (-2^(10 - s) - off) leaves e - off,
 * exactly (every step is exact in float16, and no multiplier is needed:
 * an add takes its constant pair as an immediate, where an fma kept a
 * second constant in a register that ptxas rematerialized for every
 * pair).  Signed types flip each element's top bit (flip) and take
 * off = 2^(bits - 1), which maps two's complement to offset binary.  The
 * emitter (emit_cuda.c) prints these constants; tests/unit check the table
 * of every value. */
typedef struct tl_subbyte_pair {
  uint32_t flip, sel, mask, magic, bias; /* magic and bias: float16 pairs, the lower element's in the low half */
} tl_subbyte_pair;
void tl_subbyte_f16_pair(int bits, bool sgn, int p, tl_subbyte_pair *out);
/* The same conversion of a pair that a word already holds at bits sl of its
 * low half and bits sh of its high half (sl + bits and sh + bits at most
 * 10), without prmt: x = (w' & mask) | magic (tl_nb2h2; sel is 0).  A
 * program's weights interleaved so that a thread's pairs sit 16 bits apart
 * (FasterTransformer's and Marlin's order) take this one. */
void tl_subbyte_f16_at(int bits, bool sgn, int sl, int sh, tl_subbyte_pair *out);

/* Reinterprets the bits of v (of type from) as type to; both must have the
 * same width (checked by the caller). */
tl_scalar tl_reinterpret(tl_scalar v, tl_dtype from, tl_dtype to);

#endif
