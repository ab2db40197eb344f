/*
 * test_hsaco.c - unit tests of the AMDGPU code-object reader
 * (compiler/hsaco.c) and its MessagePack reader.
 *
 * MessagePack: byte strings written here from the MessagePack
 * specification with the values they must give; the malformed inputs the
 * reader must refuse (truncation, trailing bytes, bin/ext, 0xc1, non-string
 * or duplicate keys, bad UTF-8, too deep, lengths past the end); a
 * round trip through a small encoder written here (choosing every width
 * the format allows) on random JSON trees; and a brief fuzz: random
 * mutations and random bytes, which must never crash and, where accepted,
 * must give JSON that round-trips.
 *
 * Code objects: real ones compiled with the AMD toolchain
 * (compiler/amdgpu.c; these tests skip, saying why, without one), each
 * read field checked against llvm-readelf's own decoding of the same file
 * (--notes and -h, a separate implementation, LLVM's) and against what the
 * source says (LDS bytes, argument offsets by the C ABI, launch bounds);
 * damage to each header field and to chosen metadata values in place (each
 * refused with its own message); every truncation; random mutations.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amdgpu.h"
#include "hsaco.h"

static tl_amdgpu *amd;
static char amd_missing[TL_ERROR_MESSAGE_MAX];

/* The row of a known target (target.h). */
static tl_target known(const char *name) {
  tl_target t;
  if (tl_target_parse(name, &t, NULL) != TL_OK)
    fail_msg("%s is not a known target", name);
  return t;
}

#define NEED_AMD()                                                                                 \
  do {                                                                                             \
    if (!amd) {                                                                                    \
      printf("skipping: no AMD toolchain here: %s\n", amd_missing);                               \
      skip();                                                                                      \
    }                                                                                              \
  } while (0)

static int group_setup(void **state) {
  (void)state;
  tl_error err;
  if (tl_amdgpu_open(&amd, &err) != TL_OK) {
    snprintf(amd_missing, sizeof amd_missing, "%s", err.message);
    fprintf(stderr, "NOTE: code-object tests will skip: %s\n", amd_missing);
  }
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  tl_amdgpu_close(amd);
  return 0;
}

/* ---- MessagePack: vectors ---------------------------------------------------------- */

typedef struct vec {
  const char *bytes; /* hex */
  const char *json;  /* expected, or NULL when it must be refused */
} vec;

static size_t unhex(const char *hex, unsigned char *out, size_t cap) {
  size_t n = 0;
  for (const char *p = hex; *p;) {
    if (*p == ' ') {
      p++;
      continue;
    }
    unsigned v;
    assert_int_equal(sscanf(p, "%2x", &v), 1);
    assert_true(n < cap);
    out[n++] = (unsigned char)v;
    p += 2;
  }
  return n;
}

static void test_msgpack_vectors(void **state) {
  (void)state;
  static const vec good[] = {
      {"84 a1 61 01 a1 62 93 c3 c2 c0 a1 63 ff a1 64 a2 68 69", "{\"a\":1,\"b\":[true,false,null],\"c\":-1,\"d\":\"hi\"}"},
      {"00", "0"},
      {"7f", "127"},
      {"e0", "-32"},
      {"cc ff", "255"},
      {"cd 01 00", "256"},
      {"ce 00 01 00 00", "65536"},
      {"cf 00 00 00 01 00 00 00 00", "4294967296"},
      {"cf 7f ff ff ff ff ff ff ff", "9223372036854775807"},
      {"d0 80", "-128"},
      {"d1 80 00", "-32768"},
      {"d2 80 00 00 00", "-2147483648"},
      {"d3 80 00 00 00 00 00 00 00", "-9223372036854775808"},
      {"d3 ff ff ff ff ff ff ff ff", "-1"},
      {"ca 3f c0 00 00", "1.5"},
      {"cb 40 09 21 fb 54 44 2d 18", "3.141592653589793"},
      {"d9 03 61 62 63", "\"abc\""},
      {"da 00 01 7a", "\"z\""},
      {"db 00 00 00 00", "\"\""},
      {"a0", "\"\""},
      {"a2 c3 a9", "\"\\u00e9\""},
      {"dc 00 02 01 02", "[1,2]"},
      {"dd 00 00 00 00", "[]"},
      {"90", "[]"},
      {"de 00 01 a1 6b 05", "{\"k\":5}"},
      {"df 00 00 00 00", "{}"},
      {"80", "{}"},
      {"92 91 90 81 a1 78 92 c0 c3", "[[[]],{\"x\":[null,true]}]"},
  };
  static const vec bad[] = {
      {"", NULL},                          /* nothing */
      {"c1", NULL},                        /* never used */
      {"c4 01 00", NULL},                  /* bin 8 */
      {"c5 00 01 00", NULL},               /* bin 16 */
      {"c7 01 01 00", NULL},               /* ext 8 */
      {"d4 01 00", NULL},                  /* fixext 1 */
      {"92 01", NULL},                     /* array cut short */
      {"a3 61 62", NULL},                  /* string cut short */
      {"cd 01", NULL},                     /* uint16 cut short */
      {"cb 00 00 00", NULL},               /* float64 cut short */
      {"01 02", NULL},                     /* trailing byte */
      {"81 01 02", NULL},                  /* integer key */
      {"81 c0 02", NULL},                  /* nil key */
      {"82 a1 61 01 a1 61 02", NULL},      /* key twice */
      {"81 a2 61 00 01", NULL},            /* NUL inside a key */
      {"a2 c3 28", NULL},                  /* not UTF-8 */
      {"a1 ff", NULL},                     /* not UTF-8 */
      {"cf 80 00 00 00 00 00 00 00", NULL},/* over INT64_MAX */
      {"cb 7f f8 00 00 00 00 00 00", NULL},/* NaN */
      {"cb 7f f0 00 00 00 00 00 00", NULL},/* infinity */
      {"dd ff ff ff ff", NULL},            /* 4 billion elements, no bytes */
      {"df ff ff ff ff 01", NULL},         /* 4 billion pairs */
      {"db ff ff ff ff 61", NULL},         /* 4 GiB string */
      {"dc 00 03 01 02", NULL},            /* array16 short by one */
      {"81 a1 61", NULL},                  /* map value missing */
  };
  unsigned char buf[256];
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    size_t n = unhex(good[i].bytes, buf, sizeof buf);
    json_t *v = NULL;
    tl_error err;
    if (tl_msgpack_to_json(buf, n, &v, &err) != TL_OK)
      fail_msg("vector %zu (%s): %s", i, good[i].bytes, err.message);
    json_t *want = json_loads(good[i].json, JSON_DECODE_ANY, NULL);
    assert_non_null(want);
    if (!json_equal(v, want)) {
      char *got = json_dumps(v, JSON_ENCODE_ANY);
      fail_msg("vector %zu (%s): got %s, want %s", i, good[i].bytes, got, good[i].json);
    }
    json_decref(v);
    json_decref(want);
    /* every strict prefix is refused */
    for (size_t k = 0; k < n; k++) {
      json_t *w = (json_t *)1;
      assert_int_equal(tl_msgpack_to_json(buf, k, &w, NULL), TL_INVALID_ARG);
      assert_null(w);
    }
  }
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    size_t n = unhex(bad[i].bytes, buf, sizeof buf);
    json_t *v = (json_t *)1;
    tl_error err;
    tl_error_clear(&err);
    tl_status st = tl_msgpack_to_json(n ? buf : (const unsigned char *)"", n, &v, &err);
    if (st != TL_INVALID_ARG)
      fail_msg("bad vector %zu (%s) was not refused", i, bad[i].bytes);
    assert_null(v);
    assert_non_null(strstr(err.message, "MessagePack"));
  }
  /* nesting: 32 levels are read, 33 are not */
  for (int levels = 32; levels <= 33; levels++) {
    for (int i = 0; i < levels; i++)
      buf[i] = 0x91;
    buf[levels] = 0x01;
    json_t *v = NULL;
    tl_error err;
    tl_status st = tl_msgpack_to_json(buf, (size_t)levels + 1, &v, &err);
    assert_int_equal(st, levels <= TL_MSGPACK_MAX_DEPTH ? TL_OK : TL_INVALID_ARG);
    if (st != TL_OK)
      assert_non_null(strstr(err.message, "nested too deeply"));
    json_decref(v);
  }
  json_t *v;
  assert_int_equal(tl_msgpack_to_json(NULL, 3, &v, NULL), TL_INVALID_ARG);
  assert_int_equal(tl_msgpack_to_json(buf, 1, NULL, NULL), TL_INVALID_ARG);
}

/* ---- MessagePack: an encoder, for round trips -------------------------------------- */

typedef struct wbuf {
  unsigned char *p;
  size_t n, cap;
} wbuf;

static void put_byte(wbuf *w, unsigned b) {
  if (w->n == w->cap) {
    w->cap = w->cap ? w->cap * 2 : 256;
    w->p = realloc(w->p, w->cap);
    assert_non_null(w->p);
  }
  w->p[w->n++] = (unsigned char)b;
}

static void put_be(wbuf *w, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; i--)
    put_byte(w, (unsigned)(v >> (8 * i)) & 0xff);
}

/* A header for a length: fix form (mask/limit), or 8/16/32-bit forms with
 * their codes (c8 may be 0 when there is no 8-bit form).  `wide` picks a
 * wider form than needed. */
static void put_len(wbuf *w, size_t len, unsigned fix, size_t fixmax, unsigned c8, unsigned c16, unsigned c32,
                    int wide) {
  if (!wide && len <= fixmax)
    put_byte(w, fix | (unsigned)len);
  else if (c8 && len <= 0xff && wide < 2)
    put_byte(w, c8), put_be(w, len, 1);
  else if (len <= 0xffff && wide < 3)
    put_byte(w, c16), put_be(w, len, 2);
  else
    put_byte(w, c32), put_be(w, len, 4);
}

static void encode(wbuf *w, json_t *v) {
  int wide = rand() % 4;
  switch (json_typeof(v)) {
  case JSON_NULL: put_byte(w, 0xc0); break;
  case JSON_TRUE: put_byte(w, 0xc3); break;
  case JSON_FALSE: put_byte(w, 0xc2); break;
  case JSON_INTEGER: {
    int64_t x = json_integer_value(v);
    if (x >= 0 && x <= 127 && !wide)
      put_byte(w, (unsigned)x);
    else if (x >= -32 && x < 0 && !wide)
      put_byte(w, (unsigned)(x & 0xff));
    else if (x >= 0 && rand() % 2) { /* unsigned forms */
      int b = x <= 0xff ? 0 : x <= 0xffff ? 1 : x <= 0xffffffffLL ? 2 : 3;
      b += rand() % (4 - b);
      put_byte(w, 0xcc + (unsigned)b), put_be(w, (uint64_t)x, 1 << b);
    } else {
      int b = (x >= -128 && x <= 127) ? 0 : (x >= -32768 && x <= 32767) ? 1 : (x >= INT32_MIN && x <= INT32_MAX) ? 2 : 3;
      b += rand() % (4 - b);
      put_byte(w, 0xd0 + (unsigned)b), put_be(w, (uint64_t)x, 1 << b);
    }
    break;
  }
  case JSON_REAL: {
    double d = json_real_value(v);
    float f = (float)d;
    if ((double)f == d && rand() % 2) {
      uint32_t u;
      memcpy(&u, &f, 4);
      put_byte(w, 0xca), put_be(w, u, 4);
    } else {
      uint64_t u;
      memcpy(&u, &d, 8);
      put_byte(w, 0xcb), put_be(w, u, 8);
    }
    break;
  }
  case JSON_STRING: {
    size_t len = json_string_length(v);
    put_len(w, len, 0xa0, 31, 0xd9, 0xda, 0xdb, wide);
    for (size_t i = 0; i < len; i++)
      put_byte(w, (unsigned char)json_string_value(v)[i]);
    break;
  }
  case JSON_ARRAY: {
    size_t i;
    json_t *x;
    put_len(w, json_array_size(v), 0x90, 15, 0, 0xdc, 0xdd, wide);
    json_array_foreach(v, i, x) encode(w, x);
    break;
  }
  case JSON_OBJECT: {
    const char *k;
    json_t *x;
    put_len(w, json_object_size(v), 0x80, 15, 0, 0xde, 0xdf, wide);
    json_object_foreach(v, k, x) {
      json_t *ks = json_string(k);
      encode(w, ks);
      json_decref(ks);
      encode(w, x);
    }
    break;
  }
  }
}

static json_t *random_json(int depth) {
  int kind = rand() % (depth > 4 ? 6 : 8);
  switch (kind) {
  case 0: return json_null();
  case 1: return json_boolean(rand() % 2);
  case 2: {
    static const int64_t edges[] = {0, 1, 127, 128, -1, -32, -33, 255, 256, -128, -129, 65535, 65536, -32768,
                                    -32769, 4294967295LL, 4294967296LL, INT32_MIN, INT32_MAX, INT64_MAX, INT64_MIN};
    if (rand() % 2)
      return json_integer(edges[rand() % (sizeof edges / sizeof *edges)]);
    return json_integer((int64_t)((uint64_t)rand() << 33 ^ (uint64_t)rand() << 11 ^ (uint64_t)rand()) >>
                        (rand() % 63));
  }
  case 3: return json_real((double)(rand() % 100000) / 64.0 - 700.0);
  case 4:
  case 5: {
    char s[300];
    int len = rand() % 4 == 0 ? rand() % 290 : rand() % 12;
    for (int i = 0; i < len; i++)
      s[i] = (char)(' ' + rand() % 95);
    return json_stringn(s, (size_t)len);
  }
  case 6: {
    json_t *a = json_array();
    int n = rand() % 4 == 0 ? rand() % 40 : rand() % 4;
    for (int i = 0; i < n; i++)
      json_array_append_new(a, random_json(depth + 1));
    return a;
  }
  default: {
    json_t *o = json_object();
    int n = rand() % 4 == 0 ? rand() % 20 : rand() % 4;
    for (int i = 0; i < n; i++) {
      char key[16];
      snprintf(key, sizeof key, ".k%d", rand() % 50);
      json_object_set_new(o, key, random_json(depth + 1));
    }
    return o;
  }
  }
}

/* Feeds bytes to the reader; when accepted, the JSON must round-trip. */
static int check_accepted(const unsigned char *p, size_t n) {
  json_t *v = NULL;
  if (tl_msgpack_to_json(p, n, &v, NULL) != TL_OK) {
    assert_null(v);
    return 0;
  }
  wbuf w = {0};
  encode(&w, v);
  json_t *again = NULL;
  assert_int_equal(tl_msgpack_to_json(w.p, w.n, &again, NULL), TL_OK);
  assert_true(json_equal(v, again));
  json_decref(again);
  json_decref(v);
  free(w.p);
  return 1;
}

static void test_msgpack_roundtrip_and_fuzz(void **state) {
  (void)state;
  srand(4242);
  int accepted = 0, mutated = 0;
  for (int round = 0; round < 600; round++) {
    json_t *v = random_json(0);
    wbuf w = {0};
    encode(&w, v);
    json_t *back = NULL;
    tl_error err;
    if (tl_msgpack_to_json(w.p, w.n, &back, &err) != TL_OK)
      fail_msg("round %d: %s", round, err.message);
    if (!json_equal(v, back)) {
      char *a = json_dumps(v, JSON_ENCODE_ANY), *b = json_dumps(back, JSON_ENCODE_ANY);
      fail_msg("round %d: %s came back as %s", round, a, b);
    }
    json_decref(back);
    /* truncations: every one refused (a shorter prefix is never a whole value
     * here because the value's length is fixed by its header) */
    for (size_t k = 0; k < w.n && k < 64; k++)
      assert_int_equal(tl_msgpack_to_json(w.p, k, &back, NULL), TL_INVALID_ARG);
    /* mutations */
    for (int m = 0; m < 30; m++) {
      unsigned char *c = malloc(w.n + 8);
      assert_non_null(c);
      memcpy(c, w.p, w.n);
      size_t n = w.n;
      int flips = 1 + rand() % 4;
      for (int f = 0; f < flips; f++) {
        size_t at = (size_t)rand() % n;
        switch (rand() % 3) {
        case 0: c[at] ^= (unsigned char)(1u << (rand() % 8)); break;
        case 1: c[at] = (unsigned char)rand(); break;
        default: n = at + 1; break;
        }
      }
      accepted += check_accepted(c, n);
      mutated++;
      free(c);
    }
    free(w.p);
    json_decref(v);
  }
  /* random bytes */
  unsigned char junk[64];
  for (int round = 0; round < 20000; round++) {
    size_t n = (size_t)rand() % sizeof junk;
    for (size_t i = 0; i < n; i++)
      junk[i] = (unsigned char)rand();
    accepted += check_accepted(junk, n);
    mutated++;
  }
  print_message("msgpack fuzz: %d of %d damaged or random inputs were valid MessagePack (and round-trip)\n",
                accepted, mutated);
}

/* ---- code objects ------------------------------------------------------------------ */

/* Two kernels: static LDS, scratch, launch bounds, mixed argument types. */
static const char two_kernels_src[] =
    "extern \"C\" __attribute__((global)) __attribute__((amdgpu_flat_work_group_size(1, 256)))\n"
    "void lds_user(float *out, const float *in, double scale, char flag, long long n) {\n"
    "  static __attribute__((shared)) float buf[256];\n"
    "  unsigned t = __builtin_amdgcn_workitem_id_x();\n"
    "  buf[t] = in[t] * (float)scale;\n"
    "  __builtin_amdgcn_s_barrier();\n"
    "  if (flag && t < n) out[t] = buf[255 - t];\n"
    "}\n"
    "extern \"C\" __attribute__((global)) void scratch_user(int *out, int k) {\n"
    "  volatile int local[64];\n"
    "  for (int i = 0; i < 64; i++) local[i] = i * k;\n"
    "  out[__builtin_amdgcn_workitem_id_x()] = local[(k * 7) & 63];\n"
    "}\n";

typedef struct blob {
  unsigned char *p;
  size_t n;
  char target[16];
} blob;

static blob compile_blob(const char *src, const char *target) {
  tl_amdgpu_result r = {0};
  tl_error err;
  if (tl_amdgpu_compile(amd, src, target, &r, &err) != TL_OK)
    fail_msg("compiling for %s: %s", target, err.message);
  blob b = {r.code, r.code_size, ""};
  snprintf(b.target, sizeof b.target, "%s", target);
  r.code = NULL;
  tl_amdgpu_result_free(&r);
  return b;
}

/* Finds llvm-readelf (19 or newer) the way amdgpu.c finds llvm-objdump. */
static int find_readelf(char *out, size_t cap) {
  for (int m = 22; m >= 19; m--) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v llvm-readelf-%d 2>/dev/null || ls /usr/lib/llvm-%d/bin/llvm-readelf 2>/dev/null", m, m);
    FILE *p = popen(cmd, "r");
    if (!p)
      continue;
    char line[512] = "";
    char *got = fgets(line, sizeof line, p);
    pclose(p);
    if (got && *line) {
      line[strcspn(line, "\n")] = 0;
      snprintf(out, cap, "%s", line);
      return 1;
    }
  }
  return 0;
}

/* llvm-readelf's YAML, read into per-kernel key/value lists. */
typedef struct ykernel {
  char keys[48][64], vals[48][128];
  int n;
  char args[32][4][48]; /* .offset .size .value_kind .name */
  int nargs;
} ykernel;

static const char *ykey(const ykernel *k, const char *key) {
  for (int i = 0; i < k->n; i++)
    if (strcmp(k->keys[i], key) == 0)
      return k->vals[i];
  return NULL;
}

static int read_yaml(const char *text, ykernel *ks, int max, char *target, size_t tcap) {
  int nk = -1, in_args = 0;
  for (const char *p = text; *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char line[256];
    snprintf(line, sizeof line, "%.*s", (int)(len < 255 ? len : 255), p);
    p += len + (e ? 1 : 0);
    char key[64], val[128] = "";
    if (sscanf(line, "amdhsa.target: %127s", val) == 1) {
      snprintf(target, tcap, "%s", val);
      continue;
    }
    const char *q = line;
    int indent = 0;
    while (*q == ' ')
      q++, indent++;
    int item = 0;
    if (q[0] == '-' && q[1] == ' ') {
      item = 1;
      q += 2;
      indent += 2;
    }
    if (sscanf(q, "%63[^:]: %127[^\n]", key, val) < 1 || key[0] != '.')
      continue;
    if (indent == 4 && item) { /* "  - .key:" starts a kernel */
      if (++nk >= max)
        return -1;
      memset(&ks[nk], 0, sizeof ks[nk]);
      in_args = 0;
    }
    if (nk < 0)
      continue;
    ykernel *k = &ks[nk];
    if (indent == 4) {
      in_args = strcmp(key, ".args") == 0;
      if (!in_args && k->n < 48) {
        snprintf(k->keys[k->n], sizeof k->keys[0], "%s", key);
        snprintf(k->vals[k->n], sizeof k->vals[0], "%s", val);
        k->n++;
      }
    } else if (in_args && indent == 8) {
      if (item && k->nargs < 32)
        k->nargs++;
      int slot = strcmp(key, ".offset") == 0 ? 0 : strcmp(key, ".size") == 0 ? 1
                 : strcmp(key, ".value_kind") == 0 ? 2 : strcmp(key, ".name") == 0 ? 3 : -1;
      if (slot >= 0 && k->nargs > 0)
        snprintf(k->args[k->nargs - 1][slot], sizeof k->args[0][0], "%s", val);
    }
  }
  return nk + 1;
}

static void cross_check_with_readelf(const blob *b, const tl_hsaco_info *info) {
  char tool[512];
  if (!find_readelf(tool, sizeof tool)) {
    print_message("no llvm-readelf: the cross-check with LLVM's own reading is not done\n");
    return;
  }
  char path[] = "/tmp/test_hsaco-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, b->p, b->n), (ssize_t)b->n);
  close(fd);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "'%s' --notes -h '%s'", tool, path);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, p);
  text[n] = 0;
  assert_int_equal(pclose(p), 0);
  unlink(path);
  /* the processor as llvm-readelf names e_flags */
  char flags[64];
  snprintf(flags, sizeof flags, ", %s", info->processor);
  assert_non_null(strstr(text, flags));
  static ykernel ks[4];
  char target[128] = "";
  int nk = read_yaml(text, ks, 4, target, sizeof target);
  assert_int_equal(nk, (int)info->nkernels);
  assert_string_equal(target, info->target_id);
  for (int i = 0; i < nk; i++) {
    const tl_hsaco_kernel *k = &info->kernels[i];
    assert_string_equal(ykey(&ks[i], ".name"), k->name);
    assert_string_equal(ykey(&ks[i], ".symbol"), k->symbol);
    struct {
      const char *key;
      long long v;
    } nums[] = {
        {".sgpr_count", k->sgpr_count},
        {".vgpr_count", k->vgpr_count},
        {".group_segment_fixed_size", k->group_segment_fixed_size},
        {".private_segment_fixed_size", k->private_segment_fixed_size},
        {".kernarg_segment_size", k->kernarg_segment_size},
        {".kernarg_segment_align", k->kernarg_segment_align},
        {".wavefront_size", k->wavefront_size},
        {".max_flat_workgroup_size", k->max_flat_workgroup_size},
        {".agpr_count", k->agpr_count},
        {".sgpr_spill_count", k->sgpr_spill_count},
        {".vgpr_spill_count", k->vgpr_spill_count},
    };
    for (size_t j = 0; j < sizeof nums / sizeof *nums; j++) {
      const char *y = ykey(&ks[i], nums[j].key);
      if (!y) {
        assert_int_equal(nums[j].v, -1); /* absent: the reader says -1 */
        continue;
      }
      if (atoll(y) != nums[j].v)
        fail_msg("%s %s: llvm-readelf says %s, the reader %lld", k->name, nums[j].key, y, nums[j].v);
    }
    assert_int_equal(ks[i].nargs, (int)k->nargs);
    for (size_t a = 0; a < k->nargs; a++) {
      assert_int_equal(atoll(ks[i].args[a][0]), k->args[a].offset);
      assert_int_equal(atoll(ks[i].args[a][1]), k->args[a].size);
      assert_string_equal(ks[i].args[a][2], k->args[a].value_kind);
    }
  }
  print_message("%s: %d kernels agree with llvm-readelf\n", b->target, nk);
}

static void test_real_objects(void **state) {
  (void)state;
  NEED_AMD();
  const char *targets[] = {"gfx90a", "gfx942", "gfx1100"};
  for (size_t t = 0; t < 3; t++) {
    blob b = compile_blob(two_kernels_src, targets[t]);
    tl_hsaco_info info;
    tl_error err;
    if (tl_hsaco_inspect(b.p, b.n, &info, &err) != TL_OK)
      fail_msg("%s: %s", targets[t], err.message);
    assert_string_equal(info.processor, targets[t]);
    assert_int_equal(tl_hsaco_check_target(&info, targets[t], &err), TL_OK);
    assert_int_equal(tl_hsaco_check_target(&info, t == 0 ? "gfx942" : "gfx90a", &err), TL_INVALID_ARG);
    assert_int_equal(info.code_object_version, 5);
    assert_int_equal(info.md_version[0], 1);
    assert_int_equal(info.md_version[1], 2);
    assert_int_equal(info.nkernels, 2);
    const tl_hsaco_kernel *a = tl_hsaco_find(&info, "lds_user"), *s = tl_hsaco_find(&info, "scratch_user");
    assert_non_null(a);
    assert_non_null(s);
    assert_null(tl_hsaco_find(&info, "nothing"));
    /* What the source says. */
    assert_int_equal(a->group_segment_fixed_size, 256 * 4);
    assert_int_equal(a->max_flat_workgroup_size, 256);
    assert_int_equal(a->nexplicit, 5);
    static const struct {
      uint32_t off, size;
      const char *kind;
    } args[] = {{0, 8, "global_buffer"}, {8, 8, "global_buffer"}, {16, 8, "by_value"}, {24, 1, "by_value"},
                {32, 8, "by_value"}}; /* the C ABI: double at 16, char at 24, long long at 32 */
    for (int i = 0; i < 5; i++) {
      assert_int_equal(a->args[i].offset, args[i].off);
      assert_int_equal(a->args[i].size, args[i].size);
      assert_string_equal(a->args[i].value_kind, args[i].kind);
    }
    assert_true(s->private_segment_fixed_size >= 64 * 4);
    assert_int_equal(s->group_segment_fixed_size, 0);
    assert_int_equal(s->max_flat_workgroup_size, 1024);
    assert_int_equal(a->wavefront_size, known(targets[t]).warp);
    cross_check_with_readelf(&b, &info);
    tl_hsaco_info_free(&info);
    free(b.p);
  }
}

/* Finds the bytes `key` (a fixstr-encoded metadata key) followed by `val`
 * bytes; returns the offset of the value or -1. */
static long find_key_value(const blob *b, const char *key, const unsigned char *val, size_t vl) {
  size_t kl = strlen(key);
  for (size_t i = 0; i + 1 + kl + vl <= b->n; i++)
    if (b->p[i] == (0xa0 | kl) && memcmp(b->p + i + 1, key, kl) == 0 && memcmp(b->p + i + 1 + kl, val, vl) == 0)
      return (long)(i + 1 + kl);
  return -1;
}

static void expect_refused(const blob *b, const char *what, const char *msg_part) {
  tl_hsaco_info info;
  tl_error err;
  tl_error_clear(&err);
  tl_status st = tl_hsaco_inspect(b->p, b->n, &info, &err);
  if (st == TL_OK)
    fail_msg("%s: %s was accepted", b->target, what);
  assert_int_equal(st, TL_INVALID_ARG);
  assert_int_equal(info.nkernels, 0);
  assert_null(info.kernels);
  if (!strstr(err.message, msg_part))
    fail_msg("%s: %s: message '%s' lacks '%s'", b->target, what, err.message, msg_part);
}

static void test_damage(void **state) {
  (void)state;
  NEED_AMD();
  static const char add_one[] = "extern \"C\" __attribute__((global)) void add_one(float *a, int n) {\n"
                                "  int i = __builtin_amdgcn_workitem_id_x();\n"
                                "  if (i < n) a[i] += 1.0f;\n"
                                "}\n";
  const char *targets[] = {"gfx90a", "gfx1100"};
  for (int t = 0; t < 2; t++) {
    blob orig = compile_blob(add_one, targets[t]);
    blob b = orig;
    b.p = malloc(orig.n);
    assert_non_null(b.p);
    struct {
      size_t at;
      unsigned char v;
      const char *what, *msg;
    } hdr[] = {
        {0, 0x7e, "magic", "no ELF magic"},
        {4, 1, "class", "ELF64"},
        {5, 2, "data", "little-endian"},
        {7, 0, "OS ABI", "OS ABI 0"},
        {8, 1, "ABI version 1", "code object v3"},
        {8, 5, "ABI version 5", "code object v7"},
        {16, 1, "e_type", "not a shared object"},
        {18, 190, "e_machine", "not EM_AMDGPU"},
        {48, 0x30, "e_flags mach (gfx908)", "processor 0x30"},
        {40 + 7, 0x10, "e_shoff", "section header table"},
        {60, 0xff, "e_shnum", "section header table"},
        {62, 0x7f, "e_shstrndx", "section name table index"},
        {32 + 7, 0x10, "e_phoff", "program header table"},
        {54, 57, "e_phentsize", "program header size"},
    };
    for (size_t i = 0; i < sizeof hdr / sizeof *hdr; i++) {
      memcpy(b.p, orig.p, orig.n);
      b.p[hdr[i].at] = hdr[i].v;
      expect_refused(&b, hdr[i].what, hdr[i].msg);
    }
    /* Metadata values changed in place (same length). */
    const unsigned char zero = 0x00, eight = 0x08;
    const unsigned char wave = t == 0 ? 0x40 : 0x20;
    struct {
      const char *key;
      const unsigned char *val;
      size_t vl;
      unsigned char now;
      const char *what, *msg;
    } md[] = {
        {".group_segment_fixed_size", &zero, 1, 0x10, "LDS size", "disagree with the metadata"},
        {".private_segment_fixed_size", &zero, 1, 0x04, "scratch size", "disagree with the metadata"},
        {".wavefront_size", &wave, 1, t == 0 ? 0x20 : 0x40, "wavefront size", t == 0 ? "wave64-only" : "descriptor says wave32"},
        {".offset", &eight, 1, 0x7f, "argument offset", "outside the kernarg segment"},
        {".sgpr_count", NULL, 0, 0xc1, "a byte never used", "bad MessagePack"},
    };
    for (size_t i = 0; i < sizeof md / sizeof *md; i++) {
      memcpy(b.p, orig.p, orig.n);
      long at = md[i].val ? find_key_value(&orig, md[i].key, md[i].val, md[i].vl)
                          : find_key_value(&orig, md[i].key, (const unsigned char *)"", 0);
      assert_true(at > 0);
      b.p[at] = md[i].now;
      expect_refused(&b, md[i].what, md[i].msg);
    }
    /* The target string, the descriptor's symbol, a key renamed. */
    const char *swaps[][3] = {
        {t == 0 ? "amdgcn-amd-amdhsa--gfx90a" : "amdgcn-amd-amdhsa--gfx1100",
         t == 0 ? "amdgcn-amd-amdhsa--gfx90b" : "amdgcn-amd-amdhsa--gfx1101", "is not for"},
        {"add_one.kd", "add_one.kx", "is not defined"},
        {".vgpr_count", ".vgpr_c0unt", "lacks .vgpr_count"},
        {"amdhsa.kernels", "amdhsa.kernelz", "amdhsa.kernels is missing"},
    };
    for (size_t i = 0; i < sizeof swaps / sizeof *swaps; i++) {
      memcpy(b.p, orig.p, orig.n);
      size_t l = strlen(swaps[i][0]);
      int done = 0;
      for (size_t k = 0; k + l <= b.n; k++)
        if (b.p[k] == (0xa0 | l) && memcmp(b.p + k + 1, swaps[i][0], l) == 0) {
          memcpy(b.p + k + 1, swaps[i][1], l);
          done = 1;
        }
      if (!done) /* longer strings use str8 */
        for (size_t k = 0; k + l + 2 <= b.n; k++)
          if (b.p[k] == 0xd9 && b.p[k + 1] == l && memcmp(b.p + k + 2, swaps[i][0], l) == 0) {
            memcpy(b.p + k + 2, swaps[i][1], l);
            done = 1;
          }
      assert_true(done);
      expect_refused(&b, swaps[i][1], swaps[i][2]);
    }
    /* Every truncation is refused. */
    for (size_t n = 0; n < orig.n; n++) {
      tl_hsaco_info info;
      assert_int_not_equal(tl_hsaco_inspect(orig.p, n, &info, NULL), TL_OK);
    }
    /* Random mutations: no crash; what is accepted is coherent. */
    srand(99 + (unsigned)t);
    int accepted = 0;
    for (int round = 0; round < 8000; round++) {
      memcpy(b.p, orig.p, orig.n);
      int flips = 1 + rand() % 6;
      for (int f = 0; f < flips; f++) {
        size_t at = (size_t)rand() % b.n;
        if (rand() % 2)
          b.p[at] ^= (unsigned char)(1u << (rand() % 8));
        else
          b.p[at] = (unsigned char)rand();
      }
      tl_hsaco_info info;
      if (tl_hsaco_inspect(b.p, b.n, &info, NULL) == TL_OK) {
        accepted++;
        assert_int_equal(known(info.processor).vendor, TL_VENDOR_AMD);
        for (size_t k = 0; k < info.nkernels; k++)
          for (size_t a = 0; a < info.kernels[k].nargs; a++)
            assert_true((uint64_t)info.kernels[k].args[a].offset + info.kernels[k].args[a].size <=
                        info.kernels[k].kernarg_segment_size);
        tl_hsaco_info_free(&info);
      }
    }
    print_message("%s: %d of 8000 damaged copies still read as code objects\n", targets[t], accepted);
    free(b.p);
    free(orig.p);
  }
}

static void test_not_code_objects(void **state) {
  (void)state;
  tl_hsaco_info info;
  tl_error err;
  assert_int_equal(tl_hsaco_inspect(NULL, 10, &info, &err), TL_INVALID_ARG);
  assert_int_equal(tl_hsaco_inspect("abc", 3, NULL, &err), TL_INVALID_ARG);
  assert_int_equal(tl_hsaco_inspect("abc", 3, &info, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "shorter than an ELF64 header"));
  /* An x86-64 ELF: this test program itself. */
  FILE *f = fopen("/proc/self/exe", "rb");
  assert_non_null(f);
  static unsigned char buf[4096];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  assert_int_equal(tl_hsaco_inspect(buf, n, &info, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "OS ABI"));
  buf[7] = 64;
  buf[8] = 3;
  assert_int_equal(tl_hsaco_inspect(buf, n, &info, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "not EM_AMDGPU"));
  tl_hsaco_info_free(NULL);
  assert_null(tl_hsaco_find(NULL, "x"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_msgpack_vectors),
      cmocka_unit_test(test_msgpack_roundtrip_and_fuzz),
      cmocka_unit_test(test_not_code_objects),
      cmocka_unit_test(test_real_objects),
      cmocka_unit_test(test_damage),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
