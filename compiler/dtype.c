/*
 * dtype.c - Tile IR element types: names, sizes and limits, and exact
 * conversions between them (the rules are in dtype.h).
 *
 * Every float format is one row of a small table (exponent and mantissa
 * widths, bias, the encodings of its largest finite value, of infinity and
 * of its canonical NaN, and whether overflow saturates).  One routine,
 * encode_exact(), rounds an exact value (-1)^s * m * 2^e, m a 64-bit
 * integer, to any of these formats with integer arithmetic only: doubles and
 * 64-bit integers are both fed to it directly, so nothing is ever rounded
 * twice and the host's rounding mode and flush-to-zero settings do not
 * matter.  decode() turns an encoding back into a double, which is always
 * exact.  The remaining sections (integers, tl_convert, memory) are thin
 * layers over these two.
 */
#include "dtype.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <string.h>

_Static_assert(sizeof(double) == 8 && DBL_MANT_DIG == 53 && FLT_MANT_DIG == 24,
               "dtype.c needs IEEE binary64 doubles and binary32 floats");

/* ---- the type table ---------------------------------------------------- */

static const struct {
  const char *name;
  int bits;
} dtype_info[TL_DTYPE_COUNT] = {
    [TL_BOOL] = {"bool", 8},
    [TL_INT8] = {"int8", 8},
    [TL_UINT8] = {"uint8", 8},
    [TL_INT16] = {"int16", 16},
    [TL_UINT16] = {"uint16", 16},
    [TL_INT32] = {"int32", 32},
    [TL_UINT32] = {"uint32", 32},
    [TL_INT64] = {"int64", 64},
    [TL_UINT64] = {"uint64", 64},
    [TL_FLOAT16] = {"float16", 16},
    [TL_BFLOAT16] = {"bfloat16", 16},
    [TL_FLOAT32] = {"float32", 32},
    [TL_FLOAT64] = {"float64", 64},
    [TL_FLOAT8_E4M3] = {"float8_e4m3", 8},
    [TL_FLOAT8_E5M2] = {"float8_e5m2", 8},
    [TL_INT4] = {"int4", 4},
    [TL_UINT4] = {"uint4", 4},
    [TL_INT2] = {"int2", 2},
    [TL_UINT2] = {"uint2", 2},
    [TL_INT1] = {"int1", 1},
    [TL_UINT1] = {"uint1", 1},
    [TL_FLOAT4_E2M1] = {"float4_e2m1", 4},
    [TL_FLOAT8_E8M0] = {"float8_e8m0", 8},
};

/* Other spellings of a dtype (TileLang's and PyTorch's names for the same
 * encodings; tile-ir-v1.md 7.1). */
static const struct {
  const char *alias;
  tl_dtype t;
} dtype_alias[] = {
    {"float8_e4m3fn", TL_FLOAT8_E4M3},
    {"float4_e2m1fn", TL_FLOAT4_E2M1},
    {"float8_e8m0fnu", TL_FLOAT8_E8M0},
};

static bool dtype_valid(tl_dtype t) { return (unsigned)t < TL_DTYPE_COUNT; }

const char *tl_dtype_name(tl_dtype t) {
  return dtype_valid(t) ? dtype_info[t].name : "invalid";
}

bool tl_dtype_parse(const char *s, tl_dtype *out) {
  if (!s) return false;
  for (int t = 0; t < TL_DTYPE_COUNT; t++) {
    if (strcmp(s, dtype_info[t].name) == 0) {
      if (out) *out = (tl_dtype)t;
      return true;
    }
  }
  for (size_t i = 0; i < sizeof dtype_alias / sizeof dtype_alias[0]; i++) {
    if (strcmp(s, dtype_alias[i].alias) == 0) {
      if (out) *out = dtype_alias[i].t;
      return true;
    }
  }
  return false;
}

bool tl_dtype_is_reserved(tl_dtype t) { return (unsigned)t <= TL_FLOAT8_E5M2; }

int tl_dtype_bits(tl_dtype t) {
  assert(dtype_valid(t));
  return dtype_valid(t) ? dtype_info[t].bits : 0;
}

bool tl_dtype_is_packed(tl_dtype t) { return dtype_valid(t) && dtype_info[t].bits < 8; }

size_t tl_dtype_size(tl_dtype t) { return tl_dtype_is_packed(t) ? 1 : (size_t)tl_dtype_bits(t) / 8; }

uint64_t tl_dtype_bytes(tl_dtype t, uint64_t n) {
  int bits = tl_dtype_bits(t);
  return bits >= 8 ? n * (uint64_t)(bits / 8) : (n / (uint64_t)(8 / bits)) + (n % (uint64_t)(8 / bits) != 0);
}

/* Packs (pack) or unpacks n elements between one per byte and the device
 * layout (dtype.h). */
static void repack(tl_dtype t, const unsigned char *s, uint64_t n, unsigned char *d, bool pack) {
  if (!tl_dtype_is_packed(t)) {
    if (n) memcpy(d, s, (size_t)(n * tl_dtype_size(t)));
    return;
  }
  int bits = tl_dtype_bits(t), per = 8 / bits;
  unsigned mask = (1u << bits) - 1;
  if (pack) memset(d, 0, (size_t)tl_dtype_bytes(t, n));
  for (uint64_t k = 0; k < n; k++) {
    int sh = (int)(k % (uint64_t)per) * bits;
    if (pack) d[k / per] |= (unsigned char)((s[k] & mask) << sh);
    else d[k] = (unsigned char)((s[k / per] >> sh) & mask);
  }
}

void tl_pack(tl_dtype t, const void *src, uint64_t n, void *dst) { repack(t, src, n, dst, true); }
void tl_unpack(tl_dtype t, const void *src, uint64_t n, void *dst) { repack(t, src, n, dst, false); }

bool tl_dtype_is_float(tl_dtype t) {
  switch (t) {
  case TL_FLOAT16: case TL_BFLOAT16: case TL_FLOAT32: case TL_FLOAT64:
  case TL_FLOAT8_E4M3: case TL_FLOAT8_E5M2: case TL_FLOAT4_E2M1: case TL_FLOAT8_E8M0:
    return true;
  default:
    return false;
  }
}

bool tl_dtype_is_int(tl_dtype t) {
  return dtype_valid(t) && t != TL_BOOL && !tl_dtype_is_float(t);
}

bool tl_dtype_is_signed(tl_dtype t) {
  return t == TL_INT8 || t == TL_INT16 || t == TL_INT32 || t == TL_INT64 || t == TL_INT4 || t == TL_INT2 ||
         t == TL_INT1;
}

bool tl_dtype_has_inf(tl_dtype t) {
  return tl_dtype_is_float(t) && t != TL_FLOAT8_E4M3 && t != TL_FLOAT4_E2M1 && t != TL_FLOAT8_E8M0;
}

/* ---- float formats ----------------------------------------------------- */

typedef struct fmt {
  int ebits;         /* exponent field width */
  int mbits;         /* mantissa (fraction) field width */
  int bias;
  uint64_t max_bits; /* encoding of the largest finite value */
  uint64_t inf_bits; /* encoding of +infinity; 0 when the format has none */
  uint64_t nan_bits; /* canonical NaN: positive, quiet */
  bool saturate;     /* overflow and infinities give +-max instead of +-inf */
} fmt;

/* Every encoding above max_bits (ignoring the sign) is inf_bits or a NaN. */
static const fmt FMT_F16 = {5, 10, 15, 0x7BFF, 0x7C00, 0x7E00, false};
static const fmt FMT_BF16 = {8, 7, 127, 0x7F7F, 0x7F80, 0x7FC0, false};
static const fmt FMT_F32 = {8, 23, 127, 0x7F7FFFFF, 0x7F800000, 0x7FC00000, false};
static const fmt FMT_F64 = {11, 52, 1023, UINT64_C(0x7FEFFFFFFFFFFFFF),
                            UINT64_C(0x7FF0000000000000), UINT64_C(0x7FF8000000000000),
                            false};
/* "fn": S.1111.111 is the only NaN, S.1111.110 = 448 the largest value. */
static const fmt FMT_E4M3 = {4, 3, 7, 0x7E, 0, 0x7F, true};
static const fmt FMT_E5M2 = {5, 2, 15, 0x7B, 0x7C, 0x7E, true};
/* OCP MX FP4: S.11.1 = 6 is the largest value; there is no NaN: a NaN
 * converts to +6 (nan_bits), as CUDA's satfinite conversion does. */
static const fmt FMT_E2M1 = {2, 1, 1, 0x7, 0, 0x7, true};
/* OCP MX E8M0: 2^(e-127); no sign, no zero, no mantissa; 0xFF is NaN.
 * encode_double() and decode() treat it apart (e8m0_encode/e8m0_decode). */
static const fmt FMT_E8M0 = {8, 0, 127, 0xFE, 0, 0xFF, true};

static const fmt *fmt_of(tl_dtype t) {
  switch (t) {
  case TL_FLOAT16: return &FMT_F16;
  case TL_BFLOAT16: return &FMT_BF16;
  case TL_FLOAT32: return &FMT_F32;
  case TL_FLOAT64: return &FMT_F64;
  case TL_FLOAT8_E4M3: return &FMT_E4M3;
  case TL_FLOAT8_E5M2: return &FMT_E5M2;
  case TL_FLOAT4_E2M1: return &FMT_E2M1;
  case TL_FLOAT8_E8M0: return &FMT_E8M0;
  default: return NULL;
  }
}

static uint64_t sign_bit(const fmt *f) { return (uint64_t)1 << (f->ebits + f->mbits); }

static uint64_t overflow_bits(const fmt *f) { return f->saturate ? f->max_bits : f->inf_bits; }

static uint64_t double_bits(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

static double double_from_bits(uint64_t b) {
  double x;
  memcpy(&x, &b, sizeof x);
  return x;
}

/* Number of significant bits of m (0 for 0). */
static int bit_length(uint64_t m) {
#if defined(__GNUC__)
  return m ? 64 - __builtin_clzll(m) : 0;
#else
  int n = 0;
  for (; m; m >>= 1) n++;
  return n;
#endif
}

/* m / 2^shift rounded to nearest, ties to even (m * 2^-shift when shift <=
 * 0; the caller guarantees that this fits). */
static uint64_t shift_rne(uint64_t m, int shift) {
  if (shift <= 0) return m << -shift;
  if (shift > 64) return 0; /* m < 2^64 <= 2^(shift-1): below half */
  uint64_t q = shift == 64 ? 0 : m >> shift;
  uint64_t rem = shift == 64 ? m : m & (((uint64_t)1 << shift) - 1);
  uint64_t half = (uint64_t)1 << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return q;
}

/* Encodes (-1)^neg * m * 2^e in format f, rounded to nearest even as if
 * the exponent range were unbounded above, then overflowing to infinity (or
 * to max when f saturates) when the result is beyond the largest finite
 * value.  Works for subnormal results: below 2^emin the quantum stays
 * 2^(emin - mbits). */
static uint64_t encode_exact(const fmt *f, bool neg, uint64_t m, int e) {
  uint64_t s = neg ? sign_bit(f) : 0;
  if (m == 0) return s;
  int emin = 1 - f->bias;
  int emax = (int)(f->max_bits >> f->mbits) - f->bias;
  int k = e + bit_length(m) - 1; /* 2^k <= value < 2^(k+1) */
  if (k > emax) return s | overflow_bits(f);
  int kk = k > emin ? k : emin;  /* exponent that sets the quantum */
  uint64_t q = shift_rne(m, kk - f->mbits - e); /* value / quantum, rounded */
  /* For normal results q is in [2^mbits, 2^(mbits+1)] and adding it to
   * the exponent offset supplies the implicit bit (and the carry when q
   * rounded up to 2^(mbits+1)); for subnormals kk == emin and q is the
   * encoding itself (2^mbits being the smallest normal). */
  uint64_t bits = ((uint64_t)(kk - emin) << f->mbits) + q;
  if (bits > f->max_bits) bits = overflow_bits(f);
  return s | bits;
}

/* E8M0: NaN and negative values give NaN; zero and values up to 2^-127
 * give 2^-127, +inf and values beyond 2^127 give 2^127; otherwise the
 * nearest power of two, 1.5 * 2^k rounding up to 2^(k+1). */
static uint64_t e8m0_encode(double x) {
  if (isnan(x) || x < 0) return 0xFF;
  if (!(x > 0x1p-127)) return 0x00;
  if (!(x < 0x1p127)) return 0xFE;
  int k;
  double m = frexp(x, &k); /* x = m * 2^k, m in [0.5, 1) */
  int e = m >= 0.75 ? k : k - 1;
  return (uint64_t)(e + 127);
}

/* Encodes x in format f (nearest even; NaN gives the canonical NaN). */
static uint64_t encode_double(const fmt *f, double x) {
  if (f == &FMT_E8M0) return e8m0_encode(x);
  uint64_t b = double_bits(x);
  bool neg = (b >> 63) != 0;
  int field = (int)((b >> 52) & 0x7FF);
  uint64_t frac = b & ((UINT64_C(1) << 52) - 1);
  if (field == 0x7FF) {
    if (frac) return f->nan_bits;
    return (neg ? sign_bit(f) : 0) | overflow_bits(f);
  }
  if (field == 0) return encode_exact(f, neg, frac, -1074);
  return encode_exact(f, neg, frac | (UINT64_C(1) << 52), field - 1075);
}

/* The value of encoding bits of format f (exact; any NaN gives the
 * canonical double NaN). */
static double decode(const fmt *f, uint64_t bits) {
  if (f == &FMT_F64) {
    double x = double_from_bits(bits);
    return isnan(x) ? double_from_bits(FMT_F64.nan_bits) : x;
  }
  if (f == &FMT_E8M0)
    return (bits & 0xFF) == 0xFF ? double_from_bits(FMT_F64.nan_bits) : ldexp(1.0, (int)(bits & 0xFF) - 127);
  uint64_t mmask = ((uint64_t)1 << f->mbits) - 1;
  uint64_t mag = bits & (sign_bit(f) - 1);
  int field = (int)(mag >> f->mbits);
  uint64_t mant = mag & mmask;
  double v;
  if (mag > f->max_bits) {
    if (f->inf_bits && mag == f->inf_bits) v = HUGE_VAL;
    else return double_from_bits(FMT_F64.nan_bits);
  } else if (field == 0) {
    v = ldexp((double)mant, 1 - f->bias - f->mbits);
  } else {
    v = ldexp((double)(mant | (mmask + 1)), field - f->bias - f->mbits);
  }
  return (bits & sign_bit(f)) ? -v : v;
}

/* ---- float16 ----------------------------------------------------------- */

uint16_t tl_f16_from_double(double x) { return (uint16_t)encode_double(&FMT_F16, x); }
double tl_f16_to_double(uint16_t h) { return decode(&FMT_F16, h); }

void tl_subbyte_f16_at(int bits, bool sgn, int sl, int sh, tl_subbyte_pair *out) {
  assert(bits >= 1 && bits <= 4 && sl >= 0 && sh >= 0 && sl + bits <= 10 && sh + bits <= 10);
  uint32_t m = (1u << bits) - 1u;
  double off = sgn ? (double)(1u << (bits - 1)) : 0.0;
  uint32_t top = 1u << (bits - 1), flip = 0;
  for (int i = 0; i < 32; i += bits)
    flip |= top << i;
  out->flip = sgn ? flip : 0;
  out->sel = 0;
  out->mask = m << sl | (m << sh) << 16;
  out->magic = (25u - (uint32_t)sl) << 10 | ((25u - (uint32_t)sh) << 10) << 16; /* 2^(10 - s), last mantissa bit at s */
  out->bias = (uint32_t)tl_f16_from_double(-ldexp(1024.0, -sl) - off) |
              (uint32_t)tl_f16_from_double(-ldexp(1024.0, -sh) - off) << 16;
}

void tl_subbyte_f16_pair(int bits, bool sgn, int p, tl_subbyte_pair *out) {
  int lo = 2 * p * bits, byte = lo / 8, sl = lo % 8;
  tl_subbyte_f16_at(bits, sgn, sl, sl + bits, out);
  out->sel = 0x4040u | (uint32_t)byte | (uint32_t)byte << 8;
}

/* ---- bfloat16 ---------------------------------------------------------- */

uint16_t tl_bf16_from_double(double x) { return (uint16_t)encode_double(&FMT_BF16, x); }
double tl_bf16_to_double(uint16_t h) { return decode(&FMT_BF16, h); }

/* ---- float8_e4m3 (fn) and float8_e5m2 ---------------------------------- */

uint8_t tl_e4m3_from_double(double x) { return (uint8_t)encode_double(&FMT_E4M3, x); }
double tl_e4m3_to_double(uint8_t b) { return decode(&FMT_E4M3, b); }
uint8_t tl_e5m2_from_double(double x) { return (uint8_t)encode_double(&FMT_E5M2, x); }
double tl_e5m2_to_double(uint8_t b) { return decode(&FMT_E5M2, b); }
uint8_t tl_e2m1_from_double(double x) { return (uint8_t)encode_double(&FMT_E2M1, x); }
double tl_e2m1_to_double(uint8_t b) { return decode(&FMT_E2M1, b & 0xF); }
uint8_t tl_e8m0_from_double(double x) { return (uint8_t)encode_double(&FMT_E8M0, x); }
double tl_e8m0_to_double(uint8_t b) { return decode(&FMT_E8M0, b); }

/* ---- float32 and any float type ---------------------------------------- */

double tl_f32_round(double x) { return decode(&FMT_F32, encode_double(&FMT_F32, x)); }

double tl_round_to(tl_dtype t, double x) {
  assert(tl_dtype_is_float(t));
  if (t == TL_FLOAT64 || !tl_dtype_is_float(t)) return x;
  const fmt *f = fmt_of(t);
  return decode(f, encode_double(f, x));
}

/* ---- integers ---------------------------------------------------------- */

/* All ones in the low tl_dtype_bits(t) bits. */
static uint64_t width_mask(tl_dtype t) {
  int w = tl_dtype_bits(t);
  return w >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << w) - 1;
}

/* raw (a two's complement bit pattern) reduced modulo 2^width of integer
 * type t, sign-extended for signed t. */
static tl_scalar int_wrap(uint64_t raw, tl_dtype t) {
  int w = tl_dtype_bits(t);
  uint64_t mask = width_mask(t);
  tl_scalar r;
  r.u = raw & mask;
  if (tl_dtype_is_signed(t) && w < 64 && ((r.u >> (w - 1)) & 1)) r.u |= ~mask;
  return r; /* .i reads .u as two's complement */
}

tl_scalar tl_dtype_max(tl_dtype t) {
  tl_scalar r;
  const fmt *f = fmt_of(t);
  if (f) r.f = decode(f, f->max_bits);
  else if (t == TL_BOOL) r.i = 1;
  else if (tl_dtype_is_signed(t)) r.u = (UINT64_C(1) << (tl_dtype_bits(t) - 1)) - 1;
  else r = int_wrap(~UINT64_C(0), t);
  return r;
}

tl_scalar tl_dtype_min(tl_dtype t) {
  tl_scalar r;
  if (t == TL_FLOAT8_E8M0) r.f = 0x1p-127; /* unsigned: the smallest value */
  else if (fmt_of(t)) r.f = -tl_dtype_max(t).f;
  else if (tl_dtype_is_signed(t)) r.i = -tl_dtype_max(t).i - 1;
  else r.u = 0; /* bool and unsigned */
  return r;
}

/* ---- conversions ------------------------------------------------------- */

/* Truncates x toward zero into integer type t, saturating; NaN gives 0. */
static tl_scalar float_to_int(double x, tl_dtype t) {
  tl_scalar r;
  r.u = 0;
  if (isnan(x)) return r;
  double v = trunc(x);
  int w = tl_dtype_bits(t);
  if (tl_dtype_is_signed(t)) {
    double lim = ldexp(1.0, w - 1); /* 2^(w-1), exact */
    if (v >= lim) return tl_dtype_max(t);
    if (v < -lim) return tl_dtype_min(t);
    r.i = (int64_t)v;
  } else {
    if (v >= ldexp(1.0, w)) return tl_dtype_max(t);
    if (v > 0) r.u = (uint64_t)v;
  }
  return r;
}

/* Rounds the integer (-1)^neg * mag to float type t. */
static double int_to_float(bool neg, uint64_t mag, tl_dtype t) {
  const fmt *f = fmt_of(t);
  assert(f);
  if (f == &FMT_E8M0) { /* the nearest power of two, 1.5 * 2^k up; in integers */
    if (neg) return decode(f, 0xFF);
    if (mag == 0) return decode(f, 0x00);
    int k = bit_length(mag) - 1;
    bool up = k > 0 && mag >= (UINT64_C(3) << (k - 1));
    return decode(f, (uint64_t)(k + up + 127));
  }
  return decode(f, encode_exact(f, neg, mag, 0));
}

tl_scalar tl_convert(tl_scalar v, tl_dtype from, tl_dtype to) {
  tl_scalar r;
  bool ffloat = tl_dtype_is_float(from);
  if (from == TL_BOOL) v.u = v.u != 0;
  if (to == TL_BOOL) {
    r.i = ffloat ? v.f != 0 : v.u != 0; /* NaN != 0 holds */
    return r;
  }
  if (ffloat) {
    if (tl_dtype_is_float(to)) r.f = tl_round_to(to, v.f);
    else r = float_to_int(v.f, to);
    return r;
  }
  /* from is bool or an integer: v.u is its two's complement bit pattern. */
  if (tl_dtype_is_float(to)) {
    bool neg = tl_dtype_is_signed(from) && v.i < 0;
    r.f = int_to_float(neg, neg ? 0 - v.u : v.u, to);
    return r;
  }
  return int_wrap(v.u, to);
}

/* ---- memory ------------------------------------------------------------ */

/* The bit pattern of v (a value of type t) as stored. */
static uint64_t to_bits(tl_dtype t, tl_scalar v) {
  switch (t) {
  case TL_BOOL: return v.u != 0;
  case TL_FLOAT32: {
    float x = (float)v.f; /* exact: v is already a float32 value */
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
  }
  case TL_FLOAT64: return double_bits(v.f);
  default: {
    const fmt *f = fmt_of(t);
    if (!f) return v.u & width_mask(t);
    /* A float8_e5m2 infinity (only loads make one) is stored as itself:
     * storing is not a conversion, so it does not saturate. */
    if (isinf(v.f) && f->inf_bits) return (v.f < 0 ? sign_bit(f) : 0) | f->inf_bits;
    return encode_double(f, v.f);
  }
  }
}

/* The value of type t whose stored bit pattern is bits. */
static tl_scalar from_bits(tl_dtype t, uint64_t bits) {
  tl_scalar r;
  switch (t) {
  case TL_BOOL: r.i = bits != 0; break;
  case TL_FLOAT32: {
    uint32_t b = (uint32_t)bits;
    float x;
    memcpy(&x, &b, sizeof x);
    r.f = x;
    break;
  }
  case TL_FLOAT64: r.f = double_from_bits(bits); break;
  default: {
    const fmt *f = fmt_of(t);
    if (f) r.f = decode(f, bits);
    else r = int_wrap(bits, t);
  }
  }
  return r;
}

tl_scalar tl_load(const void *p, tl_dtype t) {
  const unsigned char *b = p;
  uint64_t bits = 0;
  for (size_t i = tl_dtype_size(t); i-- > 0;) bits = bits << 8 | b[i];
  return from_bits(t, bits);
}

void tl_store(void *p, tl_dtype t, tl_scalar v) {
  unsigned char *b = p;
  uint64_t bits = to_bits(t, v);
  for (size_t i = 0, n = tl_dtype_size(t); i < n; i++, bits >>= 8) b[i] = (unsigned char)bits;
}

tl_scalar tl_reinterpret(tl_scalar v, tl_dtype from, tl_dtype to) {
  assert(tl_dtype_bits(from) == tl_dtype_bits(to));
  return from_bits(to, to_bits(from, v));
}
