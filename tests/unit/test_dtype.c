/*
 * test_dtype.c - unit tests of compiler/dtype.c: dtype names and limits,
 * the small float encodings, tl_convert, memory access and reinterpret.
 *
 * The float encoders are checked against independent references: every bit
 * pattern of the 8- and 16-bit formats (decode against the C compiler's
 * _Float16 and float, or a naive formula; encode(decode(b)) == b), every
 * midpoint between neighbouring values of those formats (ties to even,
 * subnormals, the overflow boundary), a brute-force nearest-value search
 * (binary search over the sorted encodings) for many random doubles, and
 * the C compiler's own conversions (double to float and _Float16, int64 and
 * uint64 to float and double).  Random inputs come from a fixed-seed
 * generator, so failures reproduce.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtype.h"

/* ---- helpers ----------------------------------------------------------- */

static uint64_t rng_state = UINT64_C(0x9E3779B97F4A7C15);

/* splitmix64 */
static uint64_t rnd(void) {
  uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static uint64_t dbits(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

static double dfrom(uint64_t b) {
  double x;
  memcpy(&x, &b, sizeof x);
  return x;
}

static uint32_t fbits(float x) {
  uint32_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

static float ffrom(uint32_t b) {
  float x;
  memcpy(&x, &b, sizeof x);
  return x;
}

/* Equal bit for bit (so -0 differs from +0), or both NaN. */
static bool same_double(double a, double b) {
  return (isnan(a) && isnan(b)) || dbits(a) == dbits(b);
}

#define assert_same_double(got, want)                                                    \
  do {                                                                                   \
    double g_ = (got), w_ = (want);                                                      \
    if (!same_double(g_, w_)) {                                                          \
      print_error("%s:%d: got %.17g (0x%016" PRIx64 "), want %.17g (0x%016" PRIx64 ")\n", \
                  __FILE__, __LINE__, g_, dbits(g_), w_, dbits(w_));                     \
      fail();                                                                            \
    }                                                                                    \
  } while (0)

#define assert_bits(got, want)                                                           \
  do {                                                                                   \
    uint64_t g_ = (got), w_ = (want);                                                    \
    if (g_ != w_) {                                                                      \
      print_error("%s:%d: got bits 0x%" PRIx64 ", want 0x%" PRIx64 "\n", __FILE__,        \
                  __LINE__, g_, w_);                                                     \
      fail();                                                                            \
    }                                                                                    \
  } while (0)

/* A random double with random sign and mantissa and a binary exponent in
 * [elo, ehi] (may be a double subnormal when elo < -1022). */
static double rnd_double(int elo, int ehi) {
  int e = elo + (int)(rnd() % (uint64_t)(ehi - elo + 1));
  double m = ldexp((double)(rnd() >> 11), -53) + 1.0; /* [1, 2) */
  if (rnd() & 1) m = -m;
  return ldexp(m, e);
}

/* ---- the small formats, described independently of dtype.c ------------- */

typedef struct tfmt {
  const char *name;
  uint32_t (*enc)(double);
  double (*dec)(uint32_t);
  uint32_t sign;     /* sign bit */
  uint32_t max_bits; /* largest finite */
  uint32_t inf_bits; /* 0: none */
  uint32_t nan_bits; /* canonical NaN documented in dtype.h */
  bool saturate;
  int elo, ehi;      /* binary exponents worth testing around */
} tfmt;

static uint32_t enc_f16(double x) { return tl_f16_from_double(x); }
static double dec_f16(uint32_t b) { return tl_f16_to_double((uint16_t)b); }
static uint32_t enc_bf16(double x) { return tl_bf16_from_double(x); }
static double dec_bf16(uint32_t b) { return tl_bf16_to_double((uint16_t)b); }
static uint32_t enc_e4m3(double x) { return tl_e4m3_from_double(x); }
static double dec_e4m3(uint32_t b) { return tl_e4m3_to_double((uint8_t)b); }
static uint32_t enc_e2m1(double x) { return tl_e2m1_from_double(x); }
static double dec_e2m1(uint32_t b) { return tl_e2m1_to_double((uint8_t)b); }
static uint32_t enc_e5m2(double x) { return tl_e5m2_from_double(x); }
static double dec_e5m2(uint32_t b) { return tl_e5m2_to_double((uint8_t)b); }
/* float32 through tl_f32_round; decoding with the C compiler. */
static uint32_t enc_f32(double x) { return fbits((float)tl_f32_round(x)); }
static double dec_f32(uint32_t b) { return ffrom(b); }

static const tfmt F16 = {"float16", enc_f16, dec_f16, 0x8000, 0x7BFF, 0x7C00, 0x7E00, false, -27, 17};
static const tfmt BF16 = {"bfloat16", enc_bf16, dec_bf16, 0x8000, 0x7F7F, 0x7F80, 0x7FC0, false, -136, 129};
static const tfmt E4M3 = {"float8_e4m3", enc_e4m3, dec_e4m3, 0x80, 0x7E, 0, 0x7F, true, -12, 10};
static const tfmt E5M2 = {"float8_e5m2", enc_e5m2, dec_e5m2, 0x80, 0x7B, 0x7C, 0x7E, true, -19, 17};
static const tfmt F32 = {"float32", enc_f32, dec_f32, 0x80000000u, 0x7F7FFFFF, 0x7F800000,
                         0x7FC00000, false, -152, 129};
/* float4_e2m1 has no NaN: NaN converts to +6 (0x7), documented in dtype.h */
static const tfmt E2M1 = {"float4_e2m1", enc_e2m1, dec_e2m1, 0x8, 0x7, 0, 0x7, true, -4, 5};
static const tfmt *const SMALL[] = {&F16, &BF16, &E4M3, &E5M2, &E2M1};

/* What rounding |x| to nearest even gives when it lies beyond max: the
 * format's exponent range is unbounded in the rounding, so the value after
 * max is max + ulp(max); the tie between them goes to the even one. */
static uint32_t ref_overflow(const tfmt *f, double a) {
  double max = f->dec(f->max_bits);
  double next = max + (max - f->dec(f->max_bits - 1));
  if (f->saturate) return f->max_bits;
  if (2 * a < max + next || (2 * a == max + next && !(f->max_bits & 1))) return f->max_bits;
  return f->inf_bits;
}

/* Reference rounding: binary search for the largest encoding not above |x|
 * (positive finite encodings are sorted), then pick the nearer neighbour,
 * ties to the even encoding.  2|x| and the sum of two neighbours are exact
 * doubles for every format here. */
static uint32_t ref_round(const tfmt *f, double x) {
  if (isnan(x)) return f->nan_bits;
  double a = fabs(x);
  uint32_t s = signbit(x) ? f->sign : 0;
  uint32_t lo = 0, hi = f->max_bits; /* dec(lo) <= a; find the last such */
  if (a >= f->dec(hi)) {
    if (a == f->dec(hi)) return s | hi;
    return s | ref_overflow(f, a);
  }
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (f->dec(mid) <= a) lo = mid;
    else hi = mid;
  }
  double sum = f->dec(lo) + f->dec(lo + 1);
  uint32_t r = 2 * a < sum ? lo : 2 * a > sum ? lo + 1 : (lo & 1) ? lo + 1 : lo;
  return s | r;
}

/* ---- names, sizes, limits ---------------------------------------------- */

static void test_names(void **state) {
  (void)state;
  for (int t = 0; t < TL_DTYPE_COUNT; t++) {
    tl_dtype back = TL_DTYPE_COUNT;
    assert_true(tl_dtype_parse(tl_dtype_name((tl_dtype)t), &back));
    assert_int_equal(back, t);
    if (tl_dtype_is_packed((tl_dtype)t))
      assert_int_equal(tl_dtype_size((tl_dtype)t), 1); /* one element per byte on the host */
    else
      assert_int_equal(tl_dtype_size((tl_dtype)t) * 8, tl_dtype_bits((tl_dtype)t));
  }
  /* the sub-byte and scale types, and TileLang's spellings */
  struct { const char *name; tl_dtype t; int bits; bool packed, reserved; } nt[] = {
      {"int4", TL_INT4, 4, true, false},           {"uint4", TL_UINT4, 4, true, false},
      {"int2", TL_INT2, 2, true, false},           {"uint2", TL_UINT2, 2, true, false},
      {"int1", TL_INT1, 1, true, false},           {"uint1", TL_UINT1, 1, true, false},
      {"float4_e2m1", TL_FLOAT4_E2M1, 4, true, false}, {"float8_e8m0", TL_FLOAT8_E8M0, 8, false, false},
      {"float8_e4m3fn", TL_FLOAT8_E4M3, 8, false, true}, {"float4_e2m1fn", TL_FLOAT4_E2M1, 4, true, false},
      {"float8_e8m0fnu", TL_FLOAT8_E8M0, 8, false, false}, {"float8_e5m2", TL_FLOAT8_E5M2, 8, false, true},
  };
  for (size_t i = 0; i < sizeof nt / sizeof *nt; i++) {
    tl_dtype back = TL_DTYPE_COUNT;
    assert_true(tl_dtype_parse(nt[i].name, &back));
    assert_int_equal(back, nt[i].t);
    assert_int_equal(tl_dtype_bits(back), nt[i].bits);
    assert_int_equal(tl_dtype_is_packed(back), nt[i].packed);
    assert_int_equal(tl_dtype_is_reserved(back), nt[i].reserved);
  }
  tl_dtype t;
  assert_false(tl_dtype_parse("float8_e4m3fnuz", &t)); /* another encoding (bias 8), not an alias */
  assert_false(tl_dtype_parse("uint3", &t));
  assert_true(tl_dtype_is_signed(TL_INT4) && tl_dtype_is_signed(TL_INT1) && !tl_dtype_is_signed(TL_UINT2));
  assert_true(tl_dtype_is_float(TL_FLOAT4_E2M1) && tl_dtype_is_float(TL_FLOAT8_E8M0));
  assert_false(tl_dtype_has_inf(TL_FLOAT4_E2M1) || tl_dtype_has_inf(TL_FLOAT8_E8M0));
  assert_int_equal(tl_dtype_bytes(TL_UINT4, 7), 4);
  assert_int_equal(tl_dtype_bytes(TL_UINT4, 8), 4);
  assert_int_equal(tl_dtype_bytes(TL_INT2, 9), 3);
  assert_int_equal(tl_dtype_bytes(TL_UINT1, 16), 2);
  assert_int_equal(tl_dtype_bytes(TL_FLOAT16, 5), 10);
  assert_false(tl_dtype_parse("float", &t));
  assert_false(tl_dtype_parse("Float16", &t));
  assert_false(tl_dtype_parse("", &t));
  assert_false(tl_dtype_parse("float16 ", &t));
  assert_false(tl_dtype_parse(NULL, &t));
  assert_string_equal(tl_dtype_name(TL_FLOAT8_E4M3), "float8_e4m3");
  assert_string_equal(tl_dtype_name(TL_BFLOAT16), "bfloat16");
  assert_non_null(tl_dtype_name(TL_DTYPE_COUNT));

  assert_int_equal(tl_dtype_size(TL_BOOL), 1);
  assert_int_equal(tl_dtype_size(TL_FLOAT8_E5M2), 1);
  assert_int_equal(tl_dtype_size(TL_BFLOAT16), 2);
  assert_int_equal(tl_dtype_size(TL_UINT32), 4);
  assert_int_equal(tl_dtype_bits(TL_FLOAT64), 64);

  assert_true(tl_dtype_is_float(TL_FLOAT8_E4M3));
  assert_true(tl_dtype_is_float(TL_BFLOAT16));
  assert_false(tl_dtype_is_float(TL_INT8));
  assert_false(tl_dtype_is_float(TL_BOOL));
  assert_true(tl_dtype_is_int(TL_UINT64));
  assert_false(tl_dtype_is_int(TL_BOOL));
  assert_false(tl_dtype_is_int(TL_FLOAT16));
  assert_true(tl_dtype_is_signed(TL_INT16));
  assert_false(tl_dtype_is_signed(TL_UINT16));
  assert_false(tl_dtype_is_signed(TL_FLOAT32));
  assert_true(tl_dtype_has_inf(TL_FLOAT8_E5M2));
  assert_true(tl_dtype_has_inf(TL_BFLOAT16));
  assert_false(tl_dtype_has_inf(TL_FLOAT8_E4M3));
  assert_false(tl_dtype_has_inf(TL_INT32));
}

static void test_limits(void **state) {
  (void)state;
  assert_same_double(tl_dtype_max(TL_FLOAT16).f, 65504.0);
  assert_same_double(tl_dtype_min(TL_FLOAT16).f, -65504.0);
  assert_same_double(tl_dtype_max(TL_BFLOAT16).f, ldexp(255.0, 120)); /* 0x7F7F */
  assert_same_double(tl_dtype_min(TL_BFLOAT16).f, -ldexp(255.0, 120));
  assert_same_double(tl_dtype_max(TL_FLOAT32).f, FLT_MAX);
  assert_same_double(tl_dtype_min(TL_FLOAT32).f, -FLT_MAX);
  assert_same_double(tl_dtype_max(TL_FLOAT64).f, DBL_MAX);
  assert_same_double(tl_dtype_min(TL_FLOAT64).f, -DBL_MAX);
  assert_same_double(tl_dtype_max(TL_FLOAT8_E4M3).f, 448.0);
  assert_same_double(tl_dtype_min(TL_FLOAT8_E4M3).f, -448.0);
  assert_same_double(tl_dtype_max(TL_FLOAT8_E5M2).f, 57344.0);
  assert_same_double(tl_dtype_min(TL_FLOAT8_E5M2).f, -57344.0);
  assert_int_equal(tl_dtype_max(TL_BOOL).i, 1);
  assert_int_equal(tl_dtype_min(TL_BOOL).i, 0);
  assert_true(tl_dtype_max(TL_INT8).i == 127 && tl_dtype_min(TL_INT8).i == -128);
  assert_true(tl_dtype_max(TL_UINT8).u == 255 && tl_dtype_min(TL_UINT8).u == 0);
  assert_true(tl_dtype_max(TL_INT16).i == 32767 && tl_dtype_min(TL_INT16).i == -32768);
  assert_true(tl_dtype_max(TL_UINT16).u == 65535);
  assert_true(tl_dtype_max(TL_INT32).i == INT32_MAX && tl_dtype_min(TL_INT32).i == INT32_MIN);
  assert_true(tl_dtype_max(TL_UINT32).u == UINT32_MAX && tl_dtype_min(TL_UINT32).u == 0);
  assert_true(tl_dtype_max(TL_INT64).i == INT64_MAX && tl_dtype_min(TL_INT64).i == INT64_MIN);
  assert_true(tl_dtype_max(TL_UINT64).u == UINT64_MAX && tl_dtype_min(TL_UINT64).u == 0);
  assert_true(tl_dtype_max(TL_INT4).i == 7 && tl_dtype_min(TL_INT4).i == -8);
  assert_true(tl_dtype_max(TL_UINT4).u == 15 && tl_dtype_min(TL_UINT4).u == 0);
  assert_true(tl_dtype_max(TL_INT2).i == 1 && tl_dtype_min(TL_INT2).i == -2);
  assert_true(tl_dtype_max(TL_UINT2).u == 3);
  assert_true(tl_dtype_max(TL_INT1).i == 0 && tl_dtype_min(TL_INT1).i == -1);
  assert_true(tl_dtype_max(TL_UINT1).u == 1 && tl_dtype_min(TL_UINT1).u == 0);
  assert_same_double(tl_dtype_max(TL_FLOAT4_E2M1).f, 6.0);
  assert_same_double(tl_dtype_min(TL_FLOAT4_E2M1).f, -6.0);
  assert_same_double(tl_dtype_max(TL_FLOAT8_E8M0).f, ldexp(1, 127));
  assert_same_double(tl_dtype_min(TL_FLOAT8_E8M0).f, ldexp(1, -127)); /* unsigned: the smallest value */
}

/* ---- decoding every pattern against independent references ------------ */

/* e4m3fn by the textbook formula, written differently from dtype.c. */
static double naive_e4m3(unsigned b) {
  double sgn = (b & 0x80) ? -1.0 : 1.0;
  unsigned e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  if (e == 0) return sgn * (m / 8.0) * pow(2.0, -6);
  return sgn * (1.0 + m / 8.0) * pow(2.0, (double)e - 7);
}

static void test_decode_all(void **state) {
  (void)state;
  int bad = 0;
  for (uint32_t b = 0; b < 65536; b++) {
    /* bfloat16 is the top half of a float32 */
    double want = ffrom(b << 16);
    if (!same_double(tl_bf16_to_double((uint16_t)b), want) && bad++ < 5)
      print_error("bfloat16 0x%04x decodes to %.17g, want %.17g\n", b,
                  tl_bf16_to_double((uint16_t)b), want);
#ifdef __FLT16_MANT_DIG__
    _Float16 h;
    uint16_t hb = (uint16_t)b;
    memcpy(&h, &hb, 2);
    want = (double)h;
    if (!same_double(tl_f16_to_double((uint16_t)b), want) && bad++ < 5)
      print_error("float16 0x%04x decodes to %.17g, want %.17g\n", b,
                  tl_f16_to_double((uint16_t)b), want);
#endif
  }
  for (uint32_t b = 0; b < 256; b++) {
    /* float8_e5m2 is the top byte of a float16 */
    double want = tl_f16_to_double((uint16_t)(b << 8));
    if (!same_double(tl_e5m2_to_double((uint8_t)b), want) && bad++ < 5)
      print_error("e5m2 0x%02x decodes to %.17g, want %.17g\n", b, tl_e5m2_to_double((uint8_t)b),
                  want);
    /* float8_e8m0: 2^(b - 127), 0xFF NaN (OCP MX table) */
    want = b == 0xFF ? NAN : pow(2.0, (double)b - 127.0);
    if (!same_double(tl_e8m0_to_double((uint8_t)b), want) && bad++ < 5)
      print_error("e8m0 0x%02x decodes to %.17g, want %.17g\n", b, tl_e8m0_to_double((uint8_t)b), want);
    want = naive_e4m3(b);
    if (!same_double(tl_e4m3_to_double((uint8_t)b), want) && bad++ < 5)
      print_error("e4m3 0x%02x decodes to %.17g, want %.17g\n", b, tl_e4m3_to_double((uint8_t)b),
                  want);
  }
  /* float4_e2m1: the OCP MX table of its 16 codes, written out */
  static const double e2m1[16] = {0.0,  0.5,  1.0,  1.5,  2.0,  3.0,  4.0,  6.0,
                                  -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};
  for (uint32_t b = 0; b < 16; b++) {
    if (!same_double(tl_e2m1_to_double((uint8_t)b), e2m1[b]) && bad++ < 5)
      print_error("e2m1 0x%x decodes to %.17g, want %.17g\n", b, tl_e2m1_to_double((uint8_t)b), e2m1[b]);
    /* and only the low 4 bits count (the host holds one element per byte) */
    if (!same_double(tl_e2m1_to_double((uint8_t)(b | 0xA0)), e2m1[b]) && bad++ < 5)
      print_error("e2m1 0x%x with high bits decodes differently\n", b);
  }
  assert_int_equal(bad, 0);

  /* spot values */
  assert_same_double(tl_f16_to_double(0x7BFF), 65504.0);
  assert_same_double(tl_f16_to_double(0x0001), ldexp(1, -24));
  assert_same_double(tl_f16_to_double(0x7C00), INFINITY);
  assert_same_double(tl_f16_to_double(0x8000), -0.0);
  assert_same_double(tl_bf16_to_double(0x0001), ldexp(1, -133));
  assert_same_double(tl_e4m3_to_double(0x7E), 448.0);
  assert_same_double(tl_e4m3_to_double(0x78), 256.0); /* exponent 1111 is finite in "fn" */
  assert_same_double(tl_e4m3_to_double(0x01), ldexp(1, -9));
  assert_same_double(tl_e4m3_to_double(0xFE), -448.0);
  assert_true(isnan(tl_e4m3_to_double(0x7F)) && isnan(tl_e4m3_to_double(0xFF)));
  assert_same_double(tl_e5m2_to_double(0x7B), 57344.0);
  assert_same_double(tl_e5m2_to_double(0x01), ldexp(1, -16));
  assert_same_double(tl_e5m2_to_double(0xFC), -INFINITY);
  assert_true(isnan(tl_e5m2_to_double(0x7D)) && isnan(tl_e5m2_to_double(0xFF)));
}

/* decode then encode gives the same bits; NaNs give the canonical NaN and
 * (float8_e5m2 only) the infinities saturate to +-max, as conversions to
 * float8 do. */
static void check_round_trip(const tfmt *f, uint32_t count) {
  int bad = 0;
  for (uint32_t b = 0; b < count; b++) {
    double d = f->dec(b);
    uint32_t want = isnan(d) ? f->nan_bits : b;
    if (isinf(d) && f->saturate) want = (b & f->sign) | f->max_bits;
    uint32_t got = f->enc(d);
    if (got != want && bad++ < 5)
      print_error("%s: 0x%x -> %.17g -> 0x%x\n", f->name, b, d, got);
    if (isnan(d) && !isnan(f->dec(got)) && bad++ < 5)
      print_error("%s: NaN 0x%x re-encodes to non-NaN 0x%x\n", f->name, b, got);
  }
  assert_int_equal(bad, 0);
}

static void test_round_trip_all(void **state) {
  (void)state;
  check_round_trip(&F16, 65536);
  check_round_trip(&BF16, 65536);
  check_round_trip(&E4M3, 256);
  check_round_trip(&E5M2, 256);
  check_round_trip(&E2M1, 16);
  /* NaNs of either sign map to the canonical NaN */
  for (size_t i = 0; i < sizeof SMALL / sizeof *SMALL; i++) {
    assert_bits(SMALL[i]->enc(NAN), SMALL[i]->nan_bits);
    assert_bits(SMALL[i]->enc(-NAN), SMALL[i]->nan_bits);
  }
}

/* ---- rounding: every midpoint, random doubles -------------------------- */

/* Around each pair of neighbouring positive values lo = dec(p), hi =
 * dec(p+1): lo and hi encode to themselves, the midpoint to the even one,
 * a double just below/above the midpoint to lo/hi; the same negated.  At the
 * top, hi is max + ulp(max) (rounding's unbounded exponent). */
static int check_pair(const tfmt *f, uint32_t p) {
  double lo = f->dec(p);
  double hi = p < f->max_bits ? f->dec(p + 1) : lo + (lo - f->dec(p - 1));
  uint32_t hib = p < f->max_bits ? p + 1 : ref_overflow(f, hi);
  uint32_t tieb = p < f->max_bits ? ((p & 1) ? p + 1 : p) : ref_overflow(f, (lo + hi) / 2);
  double mid = (lo + hi) / 2;
  struct { double x; uint32_t want; } cases[] = {
      {lo, p},
      {hi, hib},
      {mid, tieb},
      {nextafter(mid, 0), p},
      {nextafter(mid, INFINITY), hib},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    for (int neg = 0; neg < 2; neg++) {
      double x = neg ? -cases[i].x : cases[i].x;
      uint32_t want = cases[i].want | (neg ? f->sign : 0);
      uint32_t got = f->enc(x);
      if (got != want && bad++ < 3)
        print_error("%s: %.17g (0x%016" PRIx64 ") encodes to 0x%x, want 0x%x\n", f->name, x,
                    dbits(x), got, want);
    }
  }
  return bad;
}

static void test_ties_all_pairs(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof SMALL / sizeof *SMALL; i++) {
    const tfmt *f = SMALL[i];
    int bad = 0;
    for (uint32_t p = 0; p <= f->max_bits && bad < 3; p++) bad += check_pair(f, p);
    assert_int_equal(bad, 0);
  }
  /* float32: the edges and random pairs */
  uint32_t edges[] = {0, 1, 2, 0x007FFFFE, 0x007FFFFF, 0x00800000, 0x3F7FFFFF, 0x3F800000,
                      0x7F7FFFFE, 0x7F7FFFFF};
  int bad = 0;
  for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) bad += check_pair(&F32, edges[i]);
  for (int i = 0; i < 200000 && bad < 3; i++)
    bad += check_pair(&F32, (uint32_t)(rnd() % (F32.max_bits + UINT64_C(1))));
  assert_int_equal(bad, 0);
}

static void check_random(const tfmt *f, int n) {
  int bad = 0;
  for (int i = 0; i < n && bad < 5; i++) {
    double x;
    if (i % 4 == 3) { /* near a midpoint, a few double ulps off */
      uint32_t p = (uint32_t)(rnd() % f->max_bits);
      double mid = (f->dec(p) + f->dec(p + 1)) / 2;
      x = dfrom(dbits(mid) + (rnd() % 7) - 3);
      if (rnd() & 1) x = -x;
    } else {
      x = rnd_double(f->elo, f->ehi);
    }
    uint32_t got = f->enc(x), want = ref_round(f, x);
    if (got != want && bad++ < 5)
      print_error("%s: %.17g (0x%016" PRIx64 ") encodes to 0x%x, reference 0x%x\n", f->name, x,
                  dbits(x), got, want);
  }
  assert_int_equal(bad, 0);
}

static void test_random_vs_reference(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof SMALL / sizeof *SMALL; i++) check_random(SMALL[i], 200000);
  check_random(&F32, 200000);
  /* far outside every range */
  double far[] = {1e300, -1e300, 1e-300, -1e-300, 5e-324, DBL_MAX, INFINITY, -INFINITY, 0.0, -0.0};
  for (size_t i = 0; i < sizeof SMALL / sizeof *SMALL; i++)
    for (size_t j = 0; j < sizeof far / sizeof *far; j++)
      assert_bits(SMALL[i]->enc(far[j]), ref_round(SMALL[i], far[j]));
}

static void test_known_values(void **state) {
  (void)state;
  /* float16 */
  assert_bits(tl_f16_from_double(1.0), 0x3C00);
  assert_bits(tl_f16_from_double(65504.0), 0x7BFF);
  assert_bits(tl_f16_from_double(65519.99), 0x7BFF);
  assert_bits(tl_f16_from_double(65520.0), 0x7C00); /* midpoint to 2^16: ties to inf */
  assert_bits(tl_f16_from_double(-65520.0), 0xFC00);
  assert_bits(tl_f16_from_double(1e6), 0x7C00);
  assert_bits(tl_f16_from_double(1.0 / 3), 0x3555);
  assert_bits(tl_f16_from_double(ldexp(1, -24)), 0x0001);  /* smallest subnormal */
  assert_bits(tl_f16_from_double(ldexp(1, -25)), 0x0000);  /* tie to even: 0 */
  assert_bits(tl_f16_from_double(-ldexp(1, -25)), 0x8000);
  assert_bits(tl_f16_from_double(nextafter(ldexp(1, -25), 1)), 0x0001);
  assert_bits(tl_f16_from_double(3 * ldexp(1, -25)), 0x0002); /* tie to even: 2 */
  assert_bits(tl_f16_from_double(ldexp(1, -14) - ldexp(1, -25)), 0x0400); /* into normals */
  assert_bits(tl_f16_from_double(1 + ldexp(1, -11)), 0x3C00);
  assert_bits(tl_f16_from_double(1 + 3 * ldexp(1, -11)), 0x3C02);
  /* rounding via float first would give 0x3C00 */
  assert_bits(tl_f16_from_double(1 + ldexp(1, -11) + ldexp(1, -40)), 0x3C01);
  assert_bits(tl_f16_from_double(-0.0), 0x8000);
  assert_bits(tl_f16_from_double(INFINITY), 0x7C00);
  assert_bits(tl_f16_from_double(NAN), 0x7E00);
  /* bfloat16 */
  assert_bits(tl_bf16_from_double(1.0), 0x3F80);
  assert_bits(tl_bf16_from_double(1.0 / 3), 0x3EAB);
  assert_bits(tl_bf16_from_double(ldexp(1, -133)), 0x0001);
  assert_bits(tl_bf16_from_double(ldexp(1, -134)), 0x0000);
  assert_bits(tl_bf16_from_double(1 + ldexp(1, -8)), 0x3F80);
  assert_bits(tl_bf16_from_double(1 + 3 * ldexp(1, -8)), 0x3F82);
  assert_bits(tl_bf16_from_double(1 + ldexp(1, -8) + ldexp(1, -30)), 0x3F81);
  assert_bits(tl_bf16_from_double(ldexp(1, 128) - ldexp(1, 119)), 0x7F80); /* midpoint */
  assert_bits(tl_bf16_from_double(nextafter(ldexp(1, 128) - ldexp(1, 119), 0)), 0x7F7F);
  assert_bits(tl_bf16_from_double(FLT_MAX), 0x7F80);
  assert_bits(tl_bf16_from_double(-INFINITY), 0xFF80);
  /* float8_e4m3 */
  assert_bits(tl_e4m3_from_double(1.0), 0x38);
  assert_bits(tl_e4m3_from_double(448.0), 0x7E);
  assert_bits(tl_e4m3_from_double(464.0), 0x7E);
  assert_bits(tl_e4m3_from_double(500.0), 0x7E);
  assert_bits(tl_e4m3_from_double(1e9), 0x7E);
  assert_bits(tl_e4m3_from_double(-1e9), 0xFE);
  assert_bits(tl_e4m3_from_double(INFINITY), 0x7E);
  assert_bits(tl_e4m3_from_double(-INFINITY), 0xFE);
  assert_bits(tl_e4m3_from_double(NAN), 0x7F);
  assert_bits(tl_e4m3_from_double(240.0), 0x77);
  assert_bits(tl_e4m3_from_double(1.0 / 3), 0x2B);
  assert_bits(tl_e4m3_from_double(ldexp(1, -9)), 0x01);
  assert_bits(tl_e4m3_from_double(ldexp(1, -10)), 0x00);
  assert_bits(tl_e4m3_from_double(3 * ldexp(1, -10)), 0x02);
  /* float8_e5m2 */
  assert_bits(tl_e5m2_from_double(1.0), 0x3C);
  assert_bits(tl_e5m2_from_double(57344.0), 0x7B);
  assert_bits(tl_e5m2_from_double(61440.0), 0x7B); /* would be inf without saturation */
  assert_bits(tl_e5m2_from_double(1e9), 0x7B);
  assert_bits(tl_e5m2_from_double(INFINITY), 0x7B);
  assert_bits(tl_e5m2_from_double(-INFINITY), 0xFB);
  assert_bits(tl_e5m2_from_double(NAN), 0x7E);
  assert_bits(tl_e5m2_from_double(1.0 / 3), 0x35);
  assert_bits(tl_e5m2_from_double(ldexp(1, -16)), 0x01);
  assert_bits(tl_e5m2_from_double(ldexp(1, -17)), 0x00);
  /* float32 */
  assert_same_double(tl_f32_round(1 + ldexp(1, -24)), 1.0);
  assert_same_double(tl_f32_round(1 + ldexp(1, -24) + ldexp(1, -50)), 1 + ldexp(1, -23));
  assert_same_double(tl_f32_round(FLT_MAX + ldexp(1, 103)), INFINITY); /* midpoint */
  assert_same_double(tl_f32_round(nextafter(FLT_MAX + ldexp(1, 103), 0)), FLT_MAX);
  assert_same_double(tl_f32_round(ldexp(1, -150)), 0.0);
  assert_same_double(tl_f32_round(ldexp(3, -150)), ldexp(1, -148)); /* tie: 2 ulps */
  assert_same_double(tl_f32_round(ldexp(3, -151)), ldexp(1, -149));
  assert_true(isnan(tl_f32_round(NAN)));
  /* tl_round_to */
  assert_same_double(tl_round_to(TL_FLOAT64, 0.1), 0.1);
  assert_same_double(tl_round_to(TL_FLOAT32, 0.1), (double)0.1f);
  assert_same_double(tl_round_to(TL_FLOAT16, 1.0 / 3), tl_f16_to_double(0x3555));
  assert_same_double(tl_round_to(TL_BFLOAT16, 1.0 / 3), tl_bf16_to_double(0x3EAB));
  assert_same_double(tl_round_to(TL_FLOAT8_E4M3, 1e6), 448.0);
  assert_same_double(tl_round_to(TL_FLOAT8_E5M2, -1e6), -57344.0);
}

/* tl_f32_round against the C compiler's double -> float conversion. */
static void test_f32_vs_cast(void **state) {
  (void)state;
  int bad = 0;
  for (int i = 0; i < 1000000 && bad < 5; i++) {
    double x = i % 2 ? rnd_double(-155, 130) : dfrom(rnd()); /* any pattern */
    double got = tl_f32_round(x), want = (double)(float)x;
    if (!same_double(got, want) && bad++ < 5)
      print_error("f32_round(%.17g) = %.17g, cast gives %.17g\n", x, got, want);
  }
  assert_int_equal(bad, 0);
}

/* tl_f16_from_double against the C compiler's double -> _Float16. */
static void test_f16_vs_compiler(void **state) {
  (void)state;
#ifdef __FLT16_MANT_DIG__
  int bad = 0;
  for (int i = 0; i < 1000000 && bad < 5; i++) {
    double x;
    if (i % 3 == 2) { /* near a midpoint */
      uint16_t p = (uint16_t)(rnd() % 0x7BFF);
      x = (tl_f16_to_double(p) + tl_f16_to_double((uint16_t)(p + 1))) / 2;
      x = dfrom(dbits(x) + (rnd() % 5) - 2);
    } else {
      x = rnd_double(-27, 17);
    }
    volatile double vx = x;
    _Float16 h = (_Float16)vx;
    uint16_t want;
    memcpy(&want, &h, 2);
    uint16_t got = tl_f16_from_double(x);
    if (got != want && bad++ < 5)
      print_error("f16(%.17g) = 0x%04x, _Float16 gives 0x%04x\n", x, got, want);
  }
  assert_int_equal(bad, 0);
#else
  skip();
#endif
}

/* ---- tl_convert -------------------------------------------------------- */

static tl_scalar I(int64_t v) { tl_scalar s; s.i = v; return s; }
static tl_scalar U(uint64_t v) { tl_scalar s; s.u = v; return s; }
static tl_scalar F(double v) { tl_scalar s; s.f = v; return s; }

static void test_float_to_int(void **state) {
  (void)state;
  assert_int_equal(tl_convert(F(1e10), TL_FLOAT64, TL_INT32).i, INT32_MAX);
  assert_int_equal(tl_convert(F(-1e10), TL_FLOAT64, TL_INT32).i, INT32_MIN);
  assert_int_equal(tl_convert(F(NAN), TL_FLOAT32, TL_INT32).i, 0);
  assert_int_equal(tl_convert(F(NAN), TL_FLOAT16, TL_UINT64).u, 0);
  assert_int_equal(tl_convert(F(2.9), TL_FLOAT64, TL_INT32).i, 2);
  assert_int_equal(tl_convert(F(-2.9), TL_FLOAT64, TL_INT32).i, -2);
  assert_int_equal(tl_convert(F(-0.7), TL_FLOAT64, TL_INT8).i, 0);
  assert_int_equal(tl_convert(F(-0.7), TL_FLOAT64, TL_UINT8).u, 0);
  assert_int_equal(tl_convert(F(300.0), TL_FLOAT32, TL_INT8).i, 127);
  assert_int_equal(tl_convert(F(-300.0), TL_FLOAT32, TL_INT8).i, -128);
  assert_int_equal(tl_convert(F(-128.9), TL_FLOAT32, TL_INT8).i, -128);
  assert_int_equal(tl_convert(F(127.9), TL_FLOAT32, TL_INT8).i, 127);
  assert_int_equal(tl_convert(F(300.0), TL_FLOAT32, TL_UINT8).u, 255);
  assert_int_equal(tl_convert(F(-1.0), TL_FLOAT32, TL_UINT8).u, 0);
  assert_int_equal(tl_convert(F(65535.5), TL_FLOAT64, TL_UINT16).u, 65535);
  assert_int_equal(tl_convert(F(4294967295.9), TL_FLOAT64, TL_UINT32).u, UINT32_MAX);
  assert_true(tl_convert(F(1e30), TL_FLOAT32, TL_UINT64).u == UINT64_MAX);
  assert_true(tl_convert(F(ldexp(1, 64)), TL_FLOAT64, TL_UINT64).u == UINT64_MAX);
  assert_true(tl_convert(F(ldexp(1, 64) - ldexp(1, 11)), TL_FLOAT64, TL_UINT64).u ==
              UINT64_MAX - 2047);
  assert_true(tl_convert(F(ldexp(1, 63)), TL_FLOAT64, TL_INT64).i == INT64_MAX);
  assert_true(tl_convert(F(-ldexp(1, 63)), TL_FLOAT64, TL_INT64).i == INT64_MIN);
  assert_true(tl_convert(F(-1e300), TL_FLOAT64, TL_INT64).i == INT64_MIN);
  assert_true(tl_convert(F(INFINITY), TL_FLOAT64, TL_INT64).i == INT64_MAX);
  assert_true(tl_convert(F(-INFINITY), TL_FLOAT64, TL_UINT32).u == 0);
  assert_true(tl_convert(F(INFINITY), TL_FLOAT16, TL_INT16).i == 32767);
  assert_true(tl_convert(F(448.0), TL_FLOAT8_E4M3, TL_INT8).i == 127);
}

static void test_int_to_float(void **state) {
  (void)state;
  int64_t two53 = INT64_C(1) << 53;
  assert_same_double(tl_convert(I(two53 + 1), TL_INT64, TL_FLOAT64).f, 9007199254740992.0);
  assert_same_double(tl_convert(I(two53 + 3), TL_INT64, TL_FLOAT64).f, 9007199254740996.0);
  assert_same_double(tl_convert(I(-two53 - 1), TL_INT64, TL_FLOAT64).f, -9007199254740992.0);
  assert_same_double(tl_convert(I(INT64_MAX), TL_INT64, TL_FLOAT64).f, ldexp(1, 63));
  assert_same_double(tl_convert(I(INT64_MAX), TL_INT64, TL_FLOAT32).f, ldexp(1, 63));
  assert_same_double(tl_convert(I(INT64_MIN), TL_INT64, TL_FLOAT64).f, -ldexp(1, 63));
  assert_same_double(tl_convert(I(INT64_MIN), TL_INT64, TL_FLOAT16).f, -INFINITY);
  assert_same_double(tl_convert(U(UINT64_MAX), TL_UINT64, TL_FLOAT64).f, ldexp(1, 64));
  assert_same_double(tl_convert(U(UINT64_MAX), TL_UINT64, TL_FLOAT32).f, ldexp(1, 64));
  assert_same_double(tl_convert(U(UINT64_MAX), TL_UINT64, TL_FLOAT16).f, INFINITY);
  assert_same_double(tl_convert(U(UINT64_MAX), TL_UINT64, TL_BFLOAT16).f, ldexp(1, 64));
  assert_same_double(tl_convert(U(UINT64_MAX), TL_UINT64, TL_FLOAT8_E4M3).f, 448.0);
  assert_same_double(tl_convert(U(UINT64_MAX), TL_UINT64, TL_FLOAT8_E5M2).f, 57344.0);
  assert_same_double(tl_convert(U((UINT64_C(1) << 63) + 1), TL_UINT64, TL_FLOAT64).f,
                     ldexp(1, 63));
  /* 2^62 + 2^38 + 1: via double it would tie and round down to 2^62 */
  int64_t v = (INT64_C(1) << 62) + (INT64_C(1) << 38) + 1;
  assert_same_double(tl_convert(I(v), TL_INT64, TL_FLOAT32).f, ldexp(1, 62) + ldexp(1, 39));
  /* the same trap for bfloat16: 2^40 + 2^32 + 1 */
  v = (INT64_C(1) << 40) + (INT64_C(1) << 32) + 1;
  assert_same_double(tl_convert(I(v), TL_INT64, TL_BFLOAT16).f, ldexp(1, 40) + ldexp(1, 33));
  assert_same_double(tl_convert(I(v - 1), TL_INT64, TL_BFLOAT16).f, ldexp(1, 40));
  assert_same_double(tl_convert(I((1 << 24) + 1), TL_INT32, TL_FLOAT32).f, 16777216.0);
  assert_same_double(tl_convert(I(65520), TL_INT32, TL_FLOAT16).f, INFINITY);
  assert_same_double(tl_convert(I(65519), TL_INT32, TL_FLOAT16).f, 65504.0);
  assert_same_double(tl_convert(I(2049), TL_INT32, TL_FLOAT16).f, 2048.0);
  assert_same_double(tl_convert(I(2051), TL_INT32, TL_FLOAT16).f, 2052.0);
  assert_same_double(tl_convert(I(-128), TL_INT8, TL_FLOAT16).f, -128.0);
  assert_same_double(tl_convert(I(0), TL_INT32, TL_FLOAT32).f, 0.0);
  assert_same_double(tl_convert(U(200), TL_UINT8, TL_FLOAT8_E4M3).f, 192.0);
  assert_same_double(tl_convert(U(17), TL_UINT8, TL_FLOAT8_E4M3).f, 16.0);
  assert_same_double(tl_convert(U(19), TL_UINT8, TL_FLOAT8_E5M2).f, 20.0);

  /* random 64-bit integers of every length against the C compiler */
  int bad = 0;
  for (int i = 0; i < 400000 && bad < 5; i++) {
    uint64_t u = rnd() >> (rnd() % 64);
    int64_t s = (int64_t)(rnd() >> (rnd() % 63 + 1));
    if (rnd() & 1) s = -s;
    double g[4] = {tl_convert(U(u), TL_UINT64, TL_FLOAT32).f,
                   tl_convert(U(u), TL_UINT64, TL_FLOAT64).f,
                   tl_convert(I(s), TL_INT64, TL_FLOAT32).f,
                   tl_convert(I(s), TL_INT64, TL_FLOAT64).f};
    double w[4] = {(float)u, (double)u, (float)s, (double)s};
    for (int k = 0; k < 4; k++)
      if (!same_double(g[k], w[k]) && bad++ < 5)
        print_error("int->float case %d: u=%" PRIu64 " s=%" PRId64 ": got %.17g want %.17g\n", k,
                    u, s, g[k], w[k]);
    /* and against the reference rounding of the small formats, fed the
     * integer as an exact double when it is one */
    if (u < (UINT64_C(1) << 53)) {
      for (size_t k = 0; k < sizeof SMALL / sizeof *SMALL; k++) {
        static const tl_dtype ts[] = {TL_FLOAT16, TL_BFLOAT16, TL_FLOAT8_E4M3, TL_FLOAT8_E5M2, TL_FLOAT4_E2M1};
        double want = SMALL[k]->dec(ref_round(SMALL[k], (double)u));
        if (!same_double(tl_convert(U(u), TL_UINT64, ts[k]).f, want) && bad++ < 5)
          print_error("%s(%" PRIu64 ") wrong\n", SMALL[k]->name, u);
      }
    }
  }
  assert_int_equal(bad, 0);
}

static void test_int_to_int(void **state) {
  (void)state;
  assert_int_equal(tl_convert(I(300), TL_INT32, TL_INT8).i, 44);
  assert_int_equal(tl_convert(I(128), TL_INT32, TL_INT8).i, -128);
  assert_int_equal(tl_convert(I(-1), TL_INT32, TL_UINT32).u, 4294967295u);
  assert_true(tl_convert(I(-1), TL_INT8, TL_UINT64).u == UINT64_MAX);
  assert_int_equal(tl_convert(U(65535), TL_UINT16, TL_INT16).i, -1);
  assert_int_equal(tl_convert(U(UINT64_MAX), TL_UINT64, TL_INT64).i, -1);
  assert_true(tl_convert(U(UINT32_MAX), TL_UINT32, TL_INT64).i == 4294967295);
  assert_int_equal(tl_convert(I(-5), TL_INT8, TL_UINT16).u, 65531);
  assert_int_equal(tl_convert(I(INT64_MIN), TL_INT64, TL_INT32).i, 0);
  assert_int_equal(tl_convert(I(-129), TL_INT16, TL_INT8).i, 127);
  assert_int_equal(tl_convert(U(0x1234567890ull), TL_UINT64, TL_UINT16).u, 0x7890);
  assert_true(tl_convert(I(INT64_MIN), TL_INT64, TL_UINT64).u == UINT64_C(1) << 63);
  /* bool */
  assert_int_equal(tl_convert(I(1), TL_BOOL, TL_INT8).i, 1);
  assert_int_equal(tl_convert(I(1), TL_BOOL, TL_UINT64).u, 1);
  assert_int_equal(tl_convert(I(256), TL_INT32, TL_BOOL).i, 1); /* != 0, no wrap */
  assert_int_equal(tl_convert(I(0), TL_INT32, TL_BOOL).i, 0);
  assert_int_equal(tl_convert(U(UINT64_C(1) << 63), TL_UINT64, TL_BOOL).i, 1);
  assert_int_equal(tl_convert(F(NAN), TL_FLOAT32, TL_BOOL).i, 1);
  assert_int_equal(tl_convert(F(-0.0), TL_FLOAT32, TL_BOOL).i, 0);
  assert_int_equal(tl_convert(F(ldexp(1, -149)), TL_FLOAT32, TL_BOOL).i, 1);
  assert_int_equal(tl_convert(I(1), TL_BOOL, TL_BOOL).i, 1);
  assert_same_double(tl_convert(I(1), TL_BOOL, TL_FLOAT8_E4M3).f, 1.0);
  assert_same_double(tl_convert(I(0), TL_BOOL, TL_FLOAT64).f, 0.0);
  assert_same_double(tl_convert(I(1), TL_BOOL, TL_BFLOAT16).f, 1.0);
}

static void test_float_to_float(void **state) {
  (void)state;
  assert_same_double(tl_convert(F(1e5), TL_FLOAT64, TL_FLOAT16).f, INFINITY);
  assert_same_double(tl_convert(F(1e5), TL_FLOAT32, TL_FLOAT8_E4M3).f, 448.0);
  assert_same_double(tl_convert(F(-INFINITY), TL_FLOAT32, TL_FLOAT8_E5M2).f, -57344.0);
  assert_same_double(tl_convert(F(INFINITY), TL_FLOAT16, TL_FLOAT32).f, INFINITY);
  assert_same_double(tl_convert(F(INFINITY), TL_FLOAT16, TL_BFLOAT16).f, INFINITY);
  assert_true(isnan(tl_convert(F(NAN), TL_FLOAT16, TL_FLOAT8_E4M3).f));
  assert_true(isnan(tl_convert(F(NAN), TL_FLOAT64, TL_FLOAT32).f));
  assert_same_double(tl_convert(F(65504.0), TL_FLOAT16, TL_FLOAT8_E4M3).f, 448.0);
  assert_same_double(tl_convert(F(65504.0), TL_FLOAT16, TL_BFLOAT16).f, 65536.0);
  assert_same_double(tl_convert(F(0.1), TL_FLOAT64, TL_FLOAT32).f, (double)0.1f);
  assert_same_double(tl_convert(F(-0.0), TL_FLOAT64, TL_FLOAT8_E5M2).f, -0.0);
  assert_same_double(tl_convert(F(ldexp(1, -30)), TL_FLOAT32, TL_FLOAT16).f, 0.0);
  /* every float16 value into each other format matches the reference */
  int bad = 0;
  for (uint32_t b = 0; b < 65536; b++) {
    double x = tl_f16_to_double((uint16_t)b);
    const tfmt *fs[] = {&BF16, &E4M3, &E5M2};
    const tl_dtype ts[] = {TL_BFLOAT16, TL_FLOAT8_E4M3, TL_FLOAT8_E5M2};
    for (int k = 0; k < 3; k++) {
      double want = fs[k]->dec(ref_round(fs[k], x));
      if (!same_double(tl_convert(F(x), TL_FLOAT16, ts[k]).f, want) && bad++ < 5)
        print_error("float16 0x%04x to %s wrong\n", b, fs[k]->name);
    }
    if (!isnan(x) && !same_double(tl_convert(F(x), TL_FLOAT16, TL_FLOAT32).f, x) && bad++ < 5)
      print_error("float16 0x%04x to float32 not exact\n", b);
  }
  assert_int_equal(bad, 0);
}

/* ---- memory ------------------------------------------------------------ */

static void test_load_store(void **state) {
  (void)state;
  unsigned char buf[24];
  unsigned char *p = buf + 3; /* unaligned */

  memset(buf, 0xEE, sizeof buf);
  tl_store(p, TL_INT32, I(0x01020304));
  assert_memory_equal(p, "\x04\x03\x02\x01", 4);
  assert_int_equal(buf[2], 0xEE);
  assert_int_equal(p[4], 0xEE);
  assert_int_equal(tl_load(p, TL_INT32).i, 0x01020304);

  memset(buf, 0xEE, sizeof buf);
  tl_store(p, TL_INT8, I(-1));
  assert_int_equal(p[0], 0xFF);
  assert_int_equal(p[1], 0xEE);
  assert_int_equal(tl_load(p, TL_INT8).i, -1);
  assert_int_equal(tl_load(p, TL_UINT8).u, 255);

  tl_store(p, TL_FLOAT16, F(1.0));
  assert_memory_equal(p, "\x00\x3C", 2);
  tl_store(p, TL_BFLOAT16, F(-2.0));
  assert_memory_equal(p, "\x00\xC0", 2);
  tl_store(p, TL_FLOAT32, F(1.0));
  assert_memory_equal(p, "\x00\x00\x80\x3F", 4);
  tl_store(p, TL_FLOAT64, F(1.0));
  assert_memory_equal(p, "\x00\x00\x00\x00\x00\x00\xF0\x3F", 8);
  tl_store(p, TL_FLOAT8_E4M3, F(448.0));
  assert_int_equal(p[0], 0x7E);
  tl_store(p, TL_FLOAT8_E5M2, F(-57344.0));
  assert_int_equal(p[0], 0xFB);
  p[0] = 0xFC; /* an e5m2 infinity survives load and store */
  tl_store(p, TL_FLOAT8_E5M2, tl_load(p, TL_FLOAT8_E5M2));
  assert_int_equal(p[0], 0xFC);
  assert_same_double(tl_load(p, TL_FLOAT8_E5M2).f, -INFINITY);
  tl_store(p, TL_BOOL, I(1));
  assert_int_equal(p[0], 1);
  tl_store(p, TL_UINT64, U(0x0102030405060708ull));
  assert_memory_equal(p, "\x08\x07\x06\x05\x04\x03\x02\x01", 8);
  assert_true(tl_load(p, TL_UINT64).u == 0x0102030405060708ull);
  tl_store(p, TL_UINT16, U(0xBEEF));
  assert_memory_equal(p, "\xEF\xBE", 2);

  memcpy(p, "\xFF\x7F", 2);
  assert_int_equal(tl_load(p, TL_INT16).i, 32767);
  memcpy(p, "\x00\x80", 2);
  assert_int_equal(tl_load(p, TL_INT16).i, -32768);
  assert_int_equal(tl_load(p, TL_UINT16).u, 32768);
  assert_same_double(tl_load(p, TL_FLOAT16).f, -0.0);
  memcpy(p, "\x00\x7C", 2);
  assert_same_double(tl_load(p, TL_FLOAT16).f, INFINITY);
  memcpy(p, "\x80\x3F", 2);
  assert_same_double(tl_load(p, TL_BFLOAT16).f, 1.0);
  memset(p, 0xFF, 8);
  assert_true(tl_load(p, TL_UINT64).u == UINT64_MAX);
  assert_int_equal(tl_load(p, TL_INT64).i, -1);
  assert_int_equal(tl_load(p, TL_UINT32).u, UINT32_MAX);
  assert_true(isnan(tl_load(p, TL_FLOAT8_E4M3).f));
  p[0] = 2;
  assert_int_equal(tl_load(p, TL_BOOL).i, 1);
  p[0] = 0;
  assert_int_equal(tl_load(p, TL_BOOL).i, 0);

  /* store(load(bytes)) == bytes for random non-NaN patterns of every type */
  int bad = 0;
  for (int i = 0; i < 20000; i++) {
    for (int t = 0; t < TL_DTYPE_COUNT; t++) {
      unsigned char in[8], out[8];
      uint64_t r = rnd();
      memcpy(in, &r, 8);
      size_t n = tl_dtype_size((tl_dtype)t);
      if (t == TL_BOOL) in[0] &= 1;
      if (tl_dtype_is_packed((tl_dtype)t)) in[0] &= (unsigned char)((1u << tl_dtype_bits((tl_dtype)t)) - 1);
      tl_scalar v = tl_load(in, (tl_dtype)t);
      if (tl_dtype_is_float((tl_dtype)t) && isnan(v.f)) continue;
      memset(out, 0, sizeof out);
      tl_store(out, (tl_dtype)t, v);
      if (memcmp(in, out, n) != 0 && bad++ < 5)
        print_error("%s: store(load(x)) != x\n", tl_dtype_name((tl_dtype)t));
    }
  }
  assert_int_equal(bad, 0);
}

static void test_reinterpret(void **state) {
  (void)state;
  assert_int_equal(tl_reinterpret(F(1.0), TL_FLOAT16, TL_INT16).i, 0x3C00);
  assert_int_equal(tl_reinterpret(F(-2.0), TL_FLOAT16, TL_UINT16).u, 0xC000);
  assert_int_equal(tl_reinterpret(F(-2.0), TL_FLOAT16, TL_INT16).i, -16384);
  assert_true(isnan(tl_reinterpret(I(-1), TL_INT16, TL_FLOAT16).f));
  assert_same_double(tl_reinterpret(U(0x7C00), TL_UINT16, TL_FLOAT16).f, INFINITY);
  assert_same_double(tl_reinterpret(I(0x3C00), TL_INT16, TL_FLOAT16).f, 1.0);
  assert_int_equal(tl_reinterpret(F(1.0), TL_FLOAT32, TL_INT32).i, 0x3F800000);
  assert_same_double(tl_reinterpret(I(0x3F800000), TL_INT32, TL_FLOAT32).f, 1.0);
  assert_same_double(tl_reinterpret(I(INT32_MIN), TL_INT32, TL_FLOAT32).f, -0.0);
  assert_same_double(tl_reinterpret(U(1), TL_UINT32, TL_FLOAT32).f, ldexp(1, -149));
  assert_int_equal(tl_reinterpret(F(1.0), TL_BFLOAT16, TL_UINT16).u, 0x3F80);
  assert_same_double(tl_reinterpret(U(0x3F80), TL_UINT16, TL_BFLOAT16).f, 1.0);
  assert_same_double(tl_reinterpret(U(0x7E), TL_UINT8, TL_FLOAT8_E4M3).f, 448.0);
  assert_same_double(tl_reinterpret(I(-2), TL_INT8, TL_FLOAT8_E4M3).f, -448.0); /* 0xFE */
  assert_int_equal(tl_reinterpret(F(57344.0), TL_FLOAT8_E5M2, TL_UINT8).u, 0x7B);
  assert_int_equal(tl_reinterpret(F(-1.0), TL_FLOAT8_E5M2, TL_INT8).i, (int8_t)0xBC);
  assert_int_equal(tl_reinterpret(F(INFINITY), TL_FLOAT8_E5M2, TL_UINT8).u, 0x7C);
  assert_same_double(tl_reinterpret(U(0x7C), TL_UINT8, TL_FLOAT8_E5M2).f, INFINITY);
  assert_true(tl_reinterpret(F(1.0), TL_FLOAT64, TL_INT64).i == 0x3FF0000000000000);
  assert_same_double(tl_reinterpret(U(0x3FF0000000000000), TL_UINT64, TL_FLOAT64).f, 1.0);
  assert_int_equal(tl_reinterpret(I(-1), TL_INT32, TL_UINT32).u, UINT32_MAX);
  assert_int_equal(tl_reinterpret(U(255), TL_UINT8, TL_INT8).i, -1);
  assert_same_double(tl_reinterpret(F(1.0), TL_FLOAT16, TL_BFLOAT16).f, ldexp(1, -7)); /* 0x3C00 */
  /* every non-NaN float16 / bfloat16 pattern survives a trip through int16 */
  for (uint32_t b = 0; b < 65536; b++) {
    tl_scalar h = tl_reinterpret(U(b), TL_UINT16, TL_FLOAT16);
    if (isnan(h.f)) continue;
    assert_int_equal(tl_reinterpret(h, TL_FLOAT16, TL_UINT16).u, b);
    tl_scalar g = tl_reinterpret(U(b), TL_UINT16, TL_BFLOAT16);
    if (isnan(g.f)) continue;
    assert_int_equal(tl_reinterpret(g, TL_BFLOAT16, TL_UINT16).u, b);
  }
}

/* float8_e8m0: every code round-trips; between 2^k and 2^(k+1) the rounding
 * point is 1.5 * 2^k (up); the ends saturate; NaN and negatives give NaN. */
static void test_e8m0(void **state) {
  (void)state;
  for (uint32_t b = 0; b < 255; b++) {
    double v = ldexp(1.0, (int)b - 127);
    assert_bits(tl_e8m0_from_double(v), b);
    if (b < 254) {
      double mid = 1.5 * v;
      assert_bits(tl_e8m0_from_double(mid), b + 1);
      assert_bits(tl_e8m0_from_double(nextafter(mid, 0)), b);
      /* from an integer, exactly the same (tl_convert's integer path) */
      if (b >= 128 && b < 127 + 62) { /* mid = 3 * 2^(b-128) is an integer */
        uint64_t m = (uint64_t)mid;
        tl_scalar x = {.u = m - 1};
        assert_same_double(tl_convert(x, TL_UINT64, TL_FLOAT8_E8M0).f, v);
        x.u = m;
        assert_same_double(tl_convert(x, TL_UINT64, TL_FLOAT8_E8M0).f, 2 * v);
      }
    }
  }
  assert_bits(tl_e8m0_from_double(NAN), 0xFF);
  assert_bits(tl_e8m0_from_double(-1.0), 0xFF);
  assert_bits(tl_e8m0_from_double(0.0), 0x00);
  assert_bits(tl_e8m0_from_double(1e-300), 0x00);
  assert_bits(tl_e8m0_from_double(INFINITY), 0xFE);
  assert_bits(tl_e8m0_from_double(1e300), 0xFE);
  assert_bits(tl_e8m0_from_double(0.75), 127);  /* 1.5 * 2^-1 rounds up to 1 */
  assert_bits(tl_e8m0_from_double(0.74), 126);
  tl_scalar neg = {.i = -4};
  assert_true(isnan(tl_convert(neg, TL_INT32, TL_FLOAT8_E8M0).f));
  /* to the wider types: exact where they reach */
  tl_scalar s = {.f = ldexp(1.0, -127)};
  assert_same_double(tl_convert(s, TL_FLOAT8_E8M0, TL_FLOAT32).f, ldexp(1.0, -127)); /* a float32 subnormal */
  assert_same_double(tl_convert(s, TL_FLOAT8_E8M0, TL_FLOAT16).f, 0.0);
  s.f = ldexp(1.0, 16);
  assert_same_double(tl_convert(s, TL_FLOAT8_E8M0, TL_FLOAT16).f, INFINITY);
}

/* The sub-byte integers wrap and saturate like the others; float4_e2m1 to
 * and from every other float type; the packing order of tile-ir-v1.md 7.1. */
static void test_packed(void **state) {
  (void)state;
  tl_scalar v = {.i = 9};
  assert_int_equal(tl_convert(v, TL_INT32, TL_INT4).i, -7);
  assert_int_equal(tl_convert(v, TL_INT32, TL_UINT4).u, 9);
  assert_int_equal(tl_convert(v, TL_INT32, TL_UINT2).u, 1);
  assert_int_equal(tl_convert(v, TL_INT32, TL_INT2).i, 1);
  assert_int_equal(tl_convert(v, TL_INT32, TL_INT1).i, -1);
  assert_int_equal(tl_convert(v, TL_INT32, TL_UINT1).u, 1);
  v.i = -1;
  assert_int_equal(tl_convert(v, TL_INT32, TL_UINT4).u, 15);
  tl_scalar f = {.f = 100.0};
  assert_int_equal(tl_convert(f, TL_FLOAT32, TL_INT4).i, 7);
  assert_int_equal(tl_convert(f, TL_FLOAT32, TL_UINT2).u, 3);
  f.f = -100.0;
  assert_int_equal(tl_convert(f, TL_FLOAT32, TL_INT4).i, -8);
  assert_int_equal(tl_convert(f, TL_FLOAT32, TL_UINT4).u, 0);
  f.f = -1.9;
  assert_int_equal(tl_convert(f, TL_FLOAT32, TL_INT2).i, -1);
  /* every uint4/int4 value to float16 and float32 exactly; every float4
   * code through float16, bfloat16, float8 and back unchanged */
  for (int k = 0; k < 16; k++) {
    tl_scalar u = {.u = (uint64_t)k}, i = {.i = k - 8};
    assert_same_double(tl_convert(u, TL_UINT4, TL_FLOAT16).f, (double)k);
    assert_same_double(tl_convert(i, TL_INT4, TL_FLOAT32).f, (double)(k - 8));
    tl_scalar c = {.f = tl_e2m1_to_double((uint8_t)k)};
    tl_dtype wide[] = {TL_FLOAT16, TL_BFLOAT16, TL_FLOAT32, TL_FLOAT8_E4M3, TL_FLOAT8_E5M2};
    for (size_t w = 0; w < sizeof wide / sizeof *wide; w++) {
      tl_scalar x = tl_convert(c, TL_FLOAT4_E2M1, wide[w]);
      assert_same_double(x.f, c.f);
      assert_same_double(tl_convert(x, wide[w], TL_FLOAT4_E2M1).f, c.f);
    }
    /* reinterpret: the code's bits */
    assert_int_equal(tl_reinterpret(c, TL_FLOAT4_E2M1, TL_UINT4).u, (uint64_t)k);
  }
  tl_scalar big = {.f = 7.0};
  assert_same_double(tl_convert(big, TL_FLOAT32, TL_FLOAT4_E2M1).f, 6.0); /* satfinite */
  big.f = 5.0; /* tie between 4 and 6: to the even code (4 = 0x6) */
  assert_same_double(tl_convert(big, TL_FLOAT32, TL_FLOAT4_E2M1).f, 4.0);
  big.f = 0.25; /* tie between 0 and 0.5: to 0 */
  assert_same_double(tl_convert(big, TL_FLOAT32, TL_FLOAT4_E2M1).f, 0.0);
  /* element k of a row at bit (k % (8/bits)) * bits of byte k / (8/bits) */
  unsigned char host[8] = {0x1, 0x2, 0x3, 0xF, 0x4, 0x5, 0x6, 0x7}, dev[4], back[8];
  tl_pack(TL_UINT4, host, 8, dev);
  assert_int_equal(dev[0], 0x21);
  assert_int_equal(dev[1], 0xF3);
  assert_int_equal(dev[3], 0x76);
  tl_unpack(TL_UINT4, dev, 8, back);
  assert_memory_equal(back, host, 8);
  unsigned char h2[5] = {1, 2, 3, 0, 1}, d2[2];
  tl_pack(TL_UINT2, h2, 5, d2);
  assert_int_equal(d2[0], 1 | 2 << 2 | 3 << 4);
  assert_int_equal(d2[1], 1); /* the last partial byte's high bits are 0 */
  unsigned char h1[9] = {1, 0, 0, 0, 0, 0, 0, 1, 1}, d1[2];
  tl_pack(TL_UINT1, h1, 9, d1);
  assert_int_equal(d1[0], 0x81);
  assert_int_equal(d1[1], 0x01);
  /* a host element's byte may hold other bits above it: they are dropped */
  unsigned char hs[2] = {0xF7, 0xA8}, ds[1];
  tl_pack(TL_INT4, hs, 2, ds);
  assert_int_equal(ds[0], 0x87);
  assert_int_equal(tl_load(&hs[0], TL_INT4).i, 7);
  assert_int_equal(tl_load(&hs[1], TL_INT4).i, -8);
}

/* The packed-integer to float16-pair conversion of tl_subbyte_f16_pair,
 * with prmt, lop3 and add.rn.f16x2 computed here as PTX defines them (the
 * add exactly in double, then rounded once to float16): every value of
 * every element position of each type must come out as the element's
 * integer, in the right half of the right pair, the other elements of the
 * word holding random bits. */
static uint32_t prmt0(uint32_t a, uint32_t sel) {
  uint32_t r = 0;
  for (int k = 0; k < 4; k++) {
    uint32_t idx = (sel >> (4 * k)) & 7;
    uint32_t byte = idx < 4 ? (a >> (8 * idx)) & 0xff : 0;
    r |= byte << (8 * k);
  }
  return r;
}

static uint16_t add_h(uint16_t x, uint16_t b) {
  return tl_f16_from_double(tl_f16_to_double(x) + tl_f16_to_double(b));
}

static void test_subbyte_f16_pairs(void **state) {
  (void)state;
  static const struct { int bits; bool sgn; } types[] = {{4, false}, {4, true}, {2, false}, {2, true}, {1, false}, {1, true}};
  uint64_t rng = 12345;
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    int bits = types[t].bits, n = 1 << bits;
    for (int u = 0; u < 8; u++)     /* the element's position in a group of 8 */
      for (int val = 0; val < n; val++)
        for (int trial = 0; trial < 4; trial++) {
          rng = rng * 6364136223846793005ull + 1442695040888963407ull;
          uint32_t w = (uint32_t)(rng >> 32), m = (uint32_t)n - 1;
          w = (w & ~(m << (u * bits))) | (uint32_t)val << (u * bits);
          tl_subbyte_pair c;
          tl_subbyte_f16_pair(bits, types[t].sgn, u / 2, &c);
          uint32_t x = (prmt0(w ^ c.flip, c.sel) & c.mask) | c.magic;
          int half = u % 2;
          uint16_t h = add_h((uint16_t)(x >> (16 * half)), (uint16_t)(c.bias >> (16 * half)));
          int want = types[t].sgn && val >= n / 2 ? val - n : val;
          if (tl_f16_to_double(h) != (double)want)
            fail_msg("bits %d signed %d element %d value %d: got %g (0x%04x), want %d", bits, types[t].sgn, u, val,
                     tl_f16_to_double(h), h, want);
          /* emit_cuda.c folds T(P) + c (c an integer, |c| <= 512) into the bias: still exact */
          static const int adds[] = {-512, -511, -8, 1, 8, 37, 511, 512};
          for (size_t a = 0; a < sizeof adds / sizeof adds[0]; a++) {
            double b = tl_f16_to_double((uint16_t)(c.bias >> (16 * half))) + adds[a];
            uint16_t bh = tl_f16_from_double(b);
            assert_true(tl_f16_to_double(bh) == b);
            uint16_t ha = add_h((uint16_t)(x >> (16 * half)), bh);
            if (tl_f16_to_double(ha) != (double)(want + adds[a]))
              fail_msg("bits %d element %d value %d + %d: got %g", bits, u, val, adds[a], tl_f16_to_double(ha));
          }
        }
  }
}

/* tl_subbyte_f16_at: a pair the word holds 16 bits apart, at every position
 * the conversion allows (bits sl of each half, sl + bits at most 10), after
 * the shift by whole bytes that emit_cuda.c's pair maps make: every value of
 * both elements, the word's other bits random, must come out exactly. */
static void test_subbyte_f16_at(void **state) {
  (void)state;
  static const struct { int bits; bool sgn; } types[] = {{4, false}, {4, true}, {2, false}, {2, true}, {1, false}, {1, true}};
  uint64_t rng = 777;
  int checked = 0;
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    int bits = types[t].bits, n = 1 << bits;
    uint32_t m = (uint32_t)n - 1;
    for (int la = 0; la + 16 < 32; la += bits) { /* the lower element's bit in the word; the upper one's la + 16 */
      int sh = la / 8 * 8, sl = la - sh;
      if (sl + bits > 10)
        continue;
      tl_subbyte_pair c;
      tl_subbyte_f16_at(bits, types[t].sgn, sl, sl, &c);
      assert_int_equal(c.sel, 0);
      for (int lo = 0; lo < n; lo++)
        for (int hi = 0; hi < n; hi++) {
          rng = rng * 6364136223846793005ull + 1442695040888963407ull;
          uint32_t w = (uint32_t)(rng >> 32);
          w = (w & ~(m << la) & ~(m << (la + 16))) | (uint32_t)lo << la | (uint32_t)hi << (la + 16);
          uint32_t x = (((w ^ c.flip) >> sh) & c.mask) | c.magic;
          int v[2] = {lo, hi};
          for (int half = 0; half < 2; half++) {
            uint16_t h = add_h((uint16_t)(x >> (16 * half)), (uint16_t)(c.bias >> (16 * half)));
            int want = types[t].sgn && v[half] >= n / 2 ? v[half] - n : v[half];
            if (tl_f16_to_double(h) != (double)want)
              fail_msg("bits %d signed %d at bit %d half %d value %d: got %g, want %d", bits, types[t].sgn, la, half,
                       v[half], tl_f16_to_double(h), want);
            checked++;
          }
        }
    }
  }
  assert_true(checked > 1000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_subbyte_f16_pairs),
      cmocka_unit_test(test_subbyte_f16_at),
      cmocka_unit_test(test_e8m0),
      cmocka_unit_test(test_packed),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_decode_all),
      cmocka_unit_test(test_round_trip_all),
      cmocka_unit_test(test_ties_all_pairs),
      cmocka_unit_test(test_random_vs_reference),
      cmocka_unit_test(test_known_values),
      cmocka_unit_test(test_f32_vs_cast),
      cmocka_unit_test(test_f16_vs_compiler),
      cmocka_unit_test(test_float_to_int),
      cmocka_unit_test(test_int_to_float),
      cmocka_unit_test(test_int_to_int),
      cmocka_unit_test(test_float_to_float),
      cmocka_unit_test(test_load_store),
      cmocka_unit_test(test_reinterpret),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
