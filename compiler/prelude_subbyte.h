/*
 * prelude_subbyte.h - the device functions of the packed sub-byte types
 * and of the block-scale type (proto/tile-ir-v1.md 7.1.2, 8.1), as one
 * string macro that prelude_cuda.h and prelude_hip.h expand with their own
 * names of the math functions, bit casts and 32-bit atomics.
 *
 *   tl_e2m1_2f, tl_re2m1, tl_f2e2m1   float4_e2m1: code to float, rounding
 *                                     (satfinite, NaN to +6), float to code;
 *   tl_e8m0_2f, tl_re8m0, tl_f2e8m0   float8_e8m0 the same (nearest power
 *                                     of two, 1.5 * 2^k up; NaN and negative
 *                                     values to 0xFF);
 *   tl_sxt, tl_clampi                 sign-extension of the low bits, clamp;
 *   tl_ldp, tl_stp                    element i of a packed buffer: at bit
 *                                     (i % (8/bits)) * bits of byte
 *                                     i / (8/bits).  A store changes its bits
 *                                     of the 32-bit word with two atomics,
 *                                     since other threads may store the other
 *                                     elements of that word at the same time;
 *   tl_v1 ... tl_v16                  1 to 16 bytes, for copies of packed
 *                                     tiles as bytes.
 * Needs tl_r8 (the small-float rounding of the prelude).
 */
#ifndef TL_PRELUDE_SUBBYTE_H
#define TL_PRELUDE_SUBBYTE_H

#define TL_PRELUDE_SUBBYTE(LDEXPF, FABSF, COPYSIGNF, FREXPF, INT_AS_FLOAT, ATOMIC_AND, ATOMIC_OR)              \
  "TL_DEV float tl_e2m1_2f(unsigned char b) {\n"                                                                  \
  "  int e = (b >> 1) & 3, m = b & 1;\n"                                                                          \
  "  float v = e == 0 ? 0.5f * (float)m : " LDEXPF "(1.0f + 0.5f * (float)m, e - 1);\n"                           \
  "  return (b & 8) ? -v : v;\n"                                                                                  \
  "}\n"                                                                                                           \
  "TL_DEV float tl_re2m1(float x) { return x != x ? 6.0f : " COPYSIGNF "(tl_r8(x, 0, 1, 6.0f), x); }\n"           \
  "TL_DEV unsigned char tl_f2e2m1(float x) {\n"                                                                   \
  "  float r = tl_re2m1(x), a = " FABSF "(r);\n"                                                                  \
  "  int c = a < 2.0f ? (int)(a * 2.0f) : a < 4.0f ? (int)a + 2 : a < 5.0f ? 6 : 7;\n"                            \
  "  return (unsigned char)(c | (" COPYSIGNF "(1.0f, r) < 0.0f ? 8 : 0));\n"                                      \
  "}\n"                                                                                                           \
  "TL_DEV float tl_e8m0_2f(unsigned char b) { return b == 0xff ? " INT_AS_FLOAT "(0x7fc00000) : " LDEXPF          \
  "(1.0f, (int)b - 127); }\n"                                                                                     \
  "TL_DEV unsigned char tl_f2e8m0(float x) {\n"                                                                   \
  "  if (x != x || x < 0.0f) return 0xff;\n"                                                                      \
  "  if (!(x > 0x1p-127f)) return 0;\n"                                                                           \
  "  if (!(x < 0x1p127f)) return 0xfe;\n"                                                                         \
  "  int k;\n"                                                                                                    \
  "  float m = " FREXPF "(x, &k);\n"                                                                              \
  "  return (unsigned char)((m >= 0.75f ? k : k - 1) + 127);\n"                                                   \
  "}\n"                                                                                                           \
  "TL_DEV float tl_re8m0(float x) { return tl_e8m0_2f(tl_f2e8m0(x)); }\n"                                         \
  "typedef unsigned char tl_v1;\n"                                                                               \
  "typedef unsigned short tl_v2;\n"                                                                              \
  "typedef unsigned tl_v4;\n"                                                                                    \
  "typedef unsigned long long tl_v8;\n"                                                                          \
  "typedef struct __attribute__((aligned(16))) { unsigned long long lo, hi; } tl_v16;\n"                         \
  "TL_DEV int tl_sxt(int x, int bits) { return (int)((unsigned)x << (32 - bits)) >> (32 - bits); }\n"             \
  "TL_DEV int tl_clampi(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }\n"                       \
  "TL_DEV int tl_ldp(const unsigned char *p, long long i, int bits, int sgn) {\n"                                 \
  "  int per = 8 / bits;\n"                                                                                       \
  "  int v = (p[i / per] >> ((int)(i % per) * bits)) & ((1 << bits) - 1);\n"                                     \
  "  return sgn ? tl_sxt(v, bits) : v;\n"                                                                         \
  "}\n"                                                                                                           \
  "TL_DEV void tl_stp(unsigned char *p, long long i, int bits, unsigned v) {\n"                                   \
  "  int per = 8 / bits;\n"                                                                                       \
  "  unsigned char *b = p + i / per;\n"                                                                           \
  "  unsigned *w = (unsigned *)((unsigned long long)b & ~3ull);\n"                                                \
  "  int sh = (int)((unsigned long long)b & 3) * 8 + (int)(i % per) * bits;\n"                                    \
  "  unsigned m = ((1u << bits) - 1u) << sh;\n"                                                                   \
  "  " ATOMIC_AND "(w, ~m);\n"                                                                                    \
  "  " ATOMIC_OR "(w, (v << sh) & m);\n"                                                                          \
  "}\n"

#endif
