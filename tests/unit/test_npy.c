/*
 * test_npy.c - unit tests of compiler/npy.c, the .npy reader and writer.
 *
 * Round trips of every dtype through real files; header variants and every
 * rejection with its exact message (in memory and through files, including
 * a FIFO fed by a child process); float32/float64 values rounded into
 * bfloat16 and float8 tensors, checked against an independent bit-level
 * reference; random mutations that must never crash.  The NumPy tests run
 * /usr/bin/python3 (Debian's python3-numpy): files numpy writes are read
 * here and compared with the raw bytes numpy dumps beside them, and files
 * written here are loaded and checked by numpy.  Without numpy they skip.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "npy.h"

#ifndef PYTHON /* -DPYTHON=... to test the skips */
#define PYTHON "/usr/bin/python3"
#endif

static char tmpdir[256];

/* ---- helpers ----------------------------------------------------------- */

static void path_in(char *out, size_t cap, const char *name) {
  int n = snprintf(out, cap, "%s/%s", tmpdir, name);
  assert_true(n > 0 && (size_t)n < cap);
}

static void write_bytes(const char *path, const void *buf, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (len)
    assert_int_equal(fwrite(buf, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

/* Reads a whole file (malloc'd; *len its size). */
static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  size_t cap = 4096, n = 0;
  unsigned char *buf = malloc(cap);
  assert_non_null(buf);
  size_t r;
  while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      assert_non_null(buf);
    }
  }
  fclose(f);
  *len = n;
  return buf;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}

/* Builds a .npy image: preamble of the given version, dict text padded with
 * spaces and a '\n' to hlen bytes (0: to a 64-byte boundary as numpy does),
 * then data.  Returns a malloc'd buffer. */
static unsigned char *make_npy(int major, int minor, const char *dict, size_t hlen,
                               const void *data, size_t dlen, size_t *len) {
  size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
  if (hlen == 0)
    hlen = (pre + dl + 1 + 63) / 64 * 64 - pre;
  assert_true(hlen >= dl);
  unsigned char *b = malloc(pre + hlen + dlen + 1);
  assert_non_null(b);
  memcpy(b, "\x93NUMPY", 6);
  b[6] = (unsigned char)major;
  b[7] = (unsigned char)minor;
  b[8] = (unsigned char)(hlen & 0xff);
  b[9] = (unsigned char)(hlen >> 8 & 0xff);
  if (pre == 12) {
    b[10] = (unsigned char)(hlen >> 16 & 0xff);
    b[11] = (unsigned char)(hlen >> 24 & 0xff);
  }
  memcpy(b + pre, dict, dl);
  if (hlen > dl) {
    memset(b + pre + dl, ' ', hlen - dl);
    b[pre + hlen - 1] = '\n';
  }
  if (dlen)
    memcpy(b + pre + hlen, data, dlen);
  *len = pre + hlen + dlen;
  return b;
}

static int have_numpy_cached = -1;
static int have_numpy(void) {
  if (have_numpy_cached < 0)
    have_numpy_cached =
        access(PYTHON, X_OK) == 0 &&
        system(PYTHON " -c 'import numpy' >/dev/null 2>&1") == 0;
  return have_numpy_cached;
}

#define REQUIRE_NUMPY()                                                                  \
  do {                                                                                   \
    if (!have_numpy()) {                                                                 \
      printf("skipping: " PYTHON " with numpy is not available (apt-get install "       \
             "python3-numpy)\n");                                                        \
      skip();                                                                            \
    }                                                                                    \
  } while (0)

/* Writes script to the temp dir and runs it with the temp dir as argv[1];
 * returns its exit status (-1 if it did not exit normally). */
static int run_python(const char *script) {
  char spath[512], cmd[1200];
  path_in(spath, sizeof spath, "script.py");
  write_bytes(spath, script, strlen(script));
  snprintf(cmd, sizeof cmd, PYTHON " '%s' '%s'", spath, tmpdir);
  int rc = system(cmd);
  unlink(spath);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Fills buf with n valid elements of t (bools 0/1, everything else any
 * bits, NaN payloads included: files carry bytes). */
static void fill_random(tl_dtype t, void *buf, size_t n) {
  unsigned char *p = buf;
  size_t bytes = n * tl_dtype_size(t);
  for (size_t k = 0; k < bytes; k++)
    p[k] = (unsigned char)(rnd() >> 24);
  if (t == TL_BOOL)
    for (size_t k = 0; k < n; k++)
      p[k] &= 1;
  if (tl_dtype_is_packed(t)) /* one element per byte, in its low bits */
    for (size_t k = 0; k < n; k++)
      p[k] &= (unsigned char)((1u << tl_dtype_bits(t)) - 1);
}

static tl_npy make_arr(tl_dtype t, int ndim, const int64_t *shape) {
  tl_npy a;
  memset(&a, 0, sizeof a);
  a.dtype = t;
  a.ndim = ndim;
  a.count = 1;
  for (int d = 0; d < ndim; d++) {
    a.shape[d] = shape[d];
    a.count *= (size_t)shape[d];
  }
  size_t bytes = a.count * tl_dtype_size(t);
  a.data = malloc(bytes ? bytes : 1);
  assert_non_null(a.data);
  fill_random(t, a.data, a.count);
  return a;
}

static void assert_same(const tl_npy *a, const tl_npy *b) {
  assert_int_equal(a->dtype, b->dtype);
  assert_int_equal(a->ndim, b->ndim);
  for (int d = 0; d < a->ndim; d++)
    assert_int_equal(a->shape[d], b->shape[d]);
  assert_int_equal(a->count, b->count);
  assert_non_null(b->data);
  if (a->count)
    assert_memory_equal(a->data, b->data, a->count * tl_dtype_size(a->dtype));
}

static int no_temp_files_left(void) {
  DIR *d = opendir(tmpdir);
  assert_non_null(d);
  struct dirent *e;
  int ok = 1;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".tmp."))
      ok = 0;
  closedir(d);
  return ok;
}

/* ---- setup ------------------------------------------------------------- */

static int group_setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/test_npy.XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state) {
  (void)state;
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

/* ---- round trips ------------------------------------------------------- */

static void check_written_header(const char *path, tl_dtype t, const tl_npy *a) {
  size_t len;
  unsigned char *b = slurp(path, &len);
  assert_true(len >= 10);
  assert_memory_equal(b, "\x93NUMPY\x01\x00", 8);
  size_t hlen = b[8] | (size_t)b[9] << 8, end = 10 + hlen;
  assert_int_equal(end % 64, 0);
  assert_int_equal(b[end - 1], '\n');
  assert_int_equal(len, end + a->count * tl_dtype_size(t));
  char want[64];
  snprintf(want, sizeof want, "{'descr': '%s', 'fortran_order': False, 'shape': (",
           tl_npy_descr(t));
  assert_memory_equal(b + 10, want, strlen(want));
  /* between the dict and the '\n' only spaces */
  const unsigned char *close = memchr(b + 10, '}', hlen);
  assert_non_null(close);
  for (const unsigned char *p = close + 1; p < b + end - 1; p++)
    assert_int_equal(*p, ' ');
  free(b);
}

static void test_roundtrip_every_dtype(void **state) {
  (void)state;
  static const struct {
    int ndim;
    int64_t shape[TL_NPY_MAX_DIMS];
  } shapes[] = {
      {0, {0}}, {1, {7}}, {2, {3, 5}}, {3, {2, 3, 4}}, {2, {0, 4}}, {8, {2, 1, 2, 1, 2, 1, 2, 3}},
  };
  char path[512];
  path_in(path, sizeof path, "rt.npy");
  for (int t = 0; t < TL_DTYPE_COUNT; t++) {
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      tl_npy a = make_arr((tl_dtype)t, shapes[s].ndim, shapes[s].shape), b, c;
      tl_error err;
      assert_int_equal(tl_npy_write(path, &a, &err), TL_OK);
      check_written_header(path, (tl_dtype)t, &a);
      assert_int_equal(tl_npy_read(path, (tl_dtype)t, &b, &err), TL_OK);
      assert_same(&a, &b);
      /* the in-memory parser agrees */
      size_t len;
      unsigned char *img = slurp(path, &len);
      assert_int_equal(tl_npy_parse(img, len, "rt.npy", (tl_dtype)t, &c, &err), TL_OK);
      assert_same(&a, &c);
      free(img);
      tl_npy_free(&a);
      tl_npy_free(&b);
      tl_npy_free(&c);
      assert_null(b.data);
    }
  }
  assert_true(no_temp_files_left());
}

/* Packed tensors: one element per byte with the tensor's shape
 * (proto/tile-ir-v1.md 9.6); signed ones as sign-extended |i1, values out
 * of range rejected, float4_e2m1 also from float values. */
static void test_packed_dtypes(void **state) {
  (void)state;
  size_t len;
  tl_npy a;
  tl_error err;
  const char *u1 = "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 4), }";
  const char *i1 = "{'descr': '|i1', 'fortran_order': False, 'shape': (2, 4), }";
  const unsigned char uv[8] = {0, 1, 2, 3, 12, 13, 14, 15};
  unsigned char *img = make_npy(1, 0, u1, 0, uv, 8, &len);
  assert_int_equal(tl_npy_parse(img, len, "w.npy", TL_UINT4, &a, &err), TL_OK);
  assert_int_equal(a.dtype, TL_UINT4);
  assert_int_equal(a.count, 8);
  assert_memory_equal(a.data, uv, 8);
  unsigned char packed[4];
  tl_pack(TL_UINT4, a.data, 8, packed);
  assert_memory_equal(packed, "\x10\x32\xDC\xFE", 4);
  tl_npy_free(&a);
  /* float4_e2m1 codes are read as they are */
  assert_int_equal(tl_npy_parse(img, len, "w.npy", TL_FLOAT4_E2M1, &a, &err), TL_OK);
  assert_true(tl_load((unsigned char *)a.data + 7, TL_FLOAT4_E2M1).f == -6.0);
  tl_npy_free(&a);
  /* uint2: 12 is out of range */
  assert_int_equal(tl_npy_parse(img, len, "w.npy", TL_UINT2, &a, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "element 4 is 12, outside uint2's range 0..3"));
  /* int4 wants |i1 */
  assert_int_equal(tl_npy_parse(img, len, "w.npy", TL_INT4, &a, &err), TL_INVALID_ARG);
  free(img);
  const signed char iv[8] = {-8, -1, 0, 7, 3, -3, 1, -2};
  img = make_npy(1, 0, i1, 0, iv, 8, &len);
  assert_int_equal(tl_npy_parse(img, len, "i.npy", TL_INT4, &a, &err), TL_OK);
  for (int k = 0; k < 8; k++)
    assert_int_equal(tl_load((unsigned char *)a.data + k, TL_INT4).i, iv[k]);
  /* written back sign-extended, byte for byte the file's data */
  char path[512];
  path_in(path, sizeof path, "i4.npy");
  assert_int_equal(tl_npy_write(path, &a, &err), TL_OK);
  size_t wl;
  unsigned char *back = slurp(path, &wl);
  assert_memory_equal(back + wl - 8, iv, 8);
  assert_memory_equal(back + 10, "{'descr': '|i1'", 15);
  free(back);
  tl_npy_free(&a);
  assert_int_equal(tl_npy_parse(img, len, "i.npy", TL_INT2, &a, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "element 0 is -8, outside int2's range -2..1"));
  free(img);
  /* float values for float4_e2m1 and float8_e8m0, rounded as conversions */
  const float fv[4] = {0.3f, -5.0f, 100.0f, 0.75f};
  img = make_npy(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 0, fv, sizeof fv, &len);
  assert_int_equal(tl_npy_parse(img, len, "f.npy", TL_FLOAT4_E2M1, &a, &err), TL_OK);
  assert_memory_equal(a.data, "\x01\x0E\x07\x02", 4); /* 0.5, -4 (tie to even), 6 (satfinite), 1 (tie) */
  tl_npy_free(&a);
  assert_int_equal(tl_npy_parse(img, len, "f.npy", TL_FLOAT8_E8M0, &a, &err), TL_OK);
  assert_memory_equal(a.data, "\x7D\xFF\x86\x7F", 4); /* 2^-2 (0.3 < 1.5 * 2^-2), NaN, 2^7 (100 >= 1.5 * 2^6), 1 */
  tl_npy_free(&a);
  free(img);
}

static void test_write_details(void **state) {
  (void)state;
  char path[512];
  path_in(path, sizeof path, "w.npy");
  tl_error err;
  /* bools are stored as 0/1 */
  int64_t shape[1] = {4};
  tl_npy a = make_arr(TL_BOOL, 1, shape), b;
  memcpy(a.data, "\x00\x02\xff\x01", 4);
  assert_int_equal(tl_npy_write(path, &a, &err), TL_OK);
  assert_int_equal(tl_npy_read(path, TL_BOOL, &b, &err), TL_OK);
  assert_memory_equal(b.data, "\x00\x01\x01\x01", 4);
  tl_npy_free(&b);
  /* a file over an existing one is replaced */
  tl_npy c = make_arr(TL_INT64, 1, shape);
  assert_int_equal(tl_npy_write(path, &c, &err), TL_OK);
  assert_int_equal(tl_npy_read(path, TL_INT64, &b, &err), TL_OK);
  assert_same(&c, &b);
  tl_npy_free(&b);
  assert_true(no_temp_files_left());
  /* the exact header numpy would write for a 2x3 float32 array */
  int64_t s23[2] = {2, 3};
  tl_npy f = make_arr(TL_FLOAT32, 2, s23);
  assert_int_equal(tl_npy_write(path, &f, &err), TL_OK);
  size_t len;
  unsigned char *img = slurp(path, &len);
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  assert_int_equal(len, 128 + 24);
  assert_memory_equal(img, "\x93NUMPY\x01\x00\x76\x00", 10);
  assert_memory_equal(img + 10, dict, strlen(dict));
  free(img);
  /* inconsistent arrays are refused, and nothing is left behind */
  f.count = 5;
  assert_int_equal(tl_npy_write(path, &f, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "is not the product of its shape"));
  f.count = 6;
  f.shape[1] = -3;
  assert_int_equal(tl_npy_write(path, &f, &err), TL_INVALID_ARG);
  f.shape[1] = 3;
  f.ndim = 9;
  assert_int_equal(tl_npy_write(path, &f, &err), TL_INVALID_ARG);
  f.ndim = 2;
  /* a directory that does not exist */
  char bad[600];
  snprintf(bad, sizeof bad, "%s/no/such/dir/x.npy", tmpdir);
  assert_int_equal(tl_npy_write(bad, &f, &err), TL_IO);
  assert_non_null(strstr(err.message, bad));
  assert_true(no_temp_files_left());
  tl_npy_free(&a);
  tl_npy_free(&c);
  tl_npy_free(&f);
  tl_npy_free(NULL);
}

static void test_read_io_errors(void **state) {
  (void)state;
  tl_npy a;
  tl_error err;
  char path[512];
  path_in(path, sizeof path, "missing.npy");
  assert_int_equal(tl_npy_read(path, TL_FLOAT32, &a, &err), TL_IO);
  char want[700];
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
  assert_string_equal(err.message, want);
  assert_null(a.data);
  /* a directory opens but cannot be read */
  assert_int_equal(tl_npy_read(tmpdir, TL_FLOAT32, &a, &err), TL_IO);
  assert_non_null(strstr(err.message, tmpdir));
  assert_null(a.data);
}

/* ---- header variants --------------------------------------------------- */

static void test_header_variants(void **state) {
  (void)state;
  static const struct {
    int major;
    const char *dict;
    tl_dtype want;
    int ndim;
    int64_t shape[3];
  } ok[] = {
      {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", TL_FLOAT32, 2, {2, 3}},
      {1, "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", TL_FLOAT32, 2, {2, 3}},
      {1, "{\"descr\":\"<i4\",\"fortran_order\":False,\"shape\":(2,3,)}", TL_INT32, 2, {2, 3}},
      {1, "{ 'fortran_order' : False ,\n\t'descr' : '<i2' ,'shape':( 3 , ) , }", TL_INT16, 1, {3}},
      {1, "{'descr': '|b1', 'fortran_order': False, 'shape': ()}", TL_BOOL, 0, {0}},
      {1, "{'descr': '<b1', 'fortran_order': False, 'shape': (1,)}", TL_BOOL, 1, {1}},
      {1, "{'descr': 'b1', 'fortran_order': False, 'shape': (1,)}", TL_BOOL, 1, {1}},
      {1, "{'descr': '>u1', 'fortran_order': False, 'shape': (1,)}", TL_UINT8, 1, {1}},
      {1, "{'descr': '|i1', 'fortran_order': False, 'shape': (1,)}", TL_INT8, 1, {1}},
      {1, "{'descr': '=i8', 'fortran_order': False, 'shape': (1,)}", TL_INT64, 1, {1}},
      {1, "{'descr': '|u4', 'fortran_order': False, 'shape': (1,)}", TL_UINT32, 1, {1}},
      {1, "{'descr': '=f2', 'fortran_order': False, 'shape': (1, 1, 2)}", TL_FLOAT16, 3, {1, 1, 2}},
      {1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2L, 1L)}", TL_FLOAT64, 2, {2, 1}},
      {1, "{'descr': '<u8', 'fortran_order': False, 'shape': (0,)}", TL_UINT64, 1, {0}},
      {1, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,)}", TL_BFLOAT16, 1, {2}},
      {1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,)}", TL_FLOAT8_E4M3, 1, {2}},
      {1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,)}", TL_FLOAT8_E5M2, 1, {2}},
      {2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", TL_FLOAT32, 2, {2, 3}},
      {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", TL_FLOAT32, 2, {2, 3}},
  };
  for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
    size_t count = 1;
    for (int d = 0; d < ok[k].ndim; d++)
      count *= (size_t)ok[k].shape[d];
    /* data as the file's own dtype: the wanted storage */
    size_t esize = tl_dtype_size(ok[k].want);
    unsigned char data[64];
    fill_random(ok[k].want, data, count);
    size_t len;
    unsigned char *img = make_npy(ok[k].major, 0, ok[k].dict, 0, data, count * esize, &len);
    tl_npy a;
    tl_error err;
    tl_status st = tl_npy_parse(img, len, "v.npy", ok[k].want, &a, &err);
    if (st != TL_OK)
      print_error("case %zu: %s\n", k, err.message);
    assert_int_equal(st, TL_OK);
    assert_int_equal(a.dtype, ok[k].want);
    assert_int_equal(a.ndim, ok[k].ndim);
    for (int d = 0; d < a.ndim; d++)
      assert_int_equal(a.shape[d], ok[k].shape[d]);
    assert_int_equal(a.count, count);
    assert_non_null(a.data);
    if (count)
      assert_memory_equal(a.data, data, count * esize);
    tl_npy_free(&a);
    free(img);
  }
}

/* ---- rejections -------------------------------------------------------- */

/* Checks that img is rejected with code and "name" + suffix, both in memory
 * and through a file (whose path then names it). */
static void expect_reject(const unsigned char *img, size_t len, tl_dtype want, tl_status code,
                          const char *suffix) {
  tl_npy a;
  tl_error err;
  char msg[2048];
  memset(&a, 0x5a, sizeof a);
  assert_int_equal(tl_npy_parse(img, len, "x.npy", want, &a, &err), code);
  snprintf(msg, sizeof msg, "x.npy%s", suffix);
  assert_string_equal(err.message, msg);
  assert_null(a.data);
  assert_int_equal(err.code, code);

  char path[512];
  path_in(path, sizeof path, "reject.npy");
  write_bytes(path, img, len);
  memset(&a, 0x5a, sizeof a);
  assert_int_equal(tl_npy_read(path, want, &a, &err), code);
  snprintf(msg, sizeof msg, "%s%s", path, suffix);
  assert_string_equal(err.message, msg);
  assert_null(a.data);
  unlink(path);
}

static void reject_dict(int major, const char *dict, size_t dlen, tl_dtype want, tl_status code,
                        const char *suffix) {
  unsigned char data[64];
  memset(data, 0, sizeof data);
  assert_true(dlen <= sizeof data);
  size_t len;
  unsigned char *img = make_npy(major, 0, dict, 0, data, dlen, &len);
  expect_reject(img, len, want, code, suffix);
  free(img);
}

static void test_rejections(void **state) {
  (void)state;
  static const struct {
    const char *dict;
    size_t dlen;        /* bytes of data after the header */
    tl_dtype want;
    tl_status code;
    const char *suffix; /* the message after the file name */
  } cases[] = {
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}", 8, TL_FLOAT32, TL_INVALID_ARG,
       ": big-endian data ('>f4') is not supported; convert with a.astype('<f4')"},
      {"{'descr': '>i8', 'fortran_order': False, 'shape': (1,)}", 8, TL_INT64, TL_INVALID_ARG,
       ": big-endian data ('>i8') is not supported; convert with a.astype('<i8')"},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}", 24, TL_FLOAT32, TL_INVALID_ARG,
       ": fortran_order arrays are not supported; save with np.ascontiguousarray"},
      {"{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (1,)}", 8,
       TL_FLOAT32, TL_INVALID_ARG, ": structured dtypes are not supported"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", 8, TL_FLOAT32, TL_INVALID_ARG,
       ": unsupported dtype '<c8'"},
      {"{'descr': '|V2', 'fortran_order': False, 'shape': (1,)}", 2, TL_BFLOAT16, TL_INVALID_ARG,
       ": unsupported dtype '|V2'"},
      {"{'descr': '<U3', 'fortran_order': False, 'shape': (1,)}", 12, TL_FLOAT32, TL_INVALID_ARG,
       ": unsupported dtype '<U3'"},
      {"{'descr': '<f16', 'fortran_order': False, 'shape': (1,)}", 16, TL_FLOAT32, TL_INVALID_ARG,
       ": unsupported dtype '<f16'"},
      {"{'descr': '<f3', 'fortran_order': False, 'shape': (1,)}", 3, TL_FLOAT32, TL_INVALID_ARG,
       ": unsupported dtype '<f3'"},
      {"{'descr': '', 'fortran_order': False, 'shape': (1,)}", 4, TL_FLOAT32, TL_INVALID_ARG,
       ": unsupported dtype ''"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1)}", 4,
       TL_FLOAT32, TL_LIMIT, ": shape has 9 dimensions; at most 8 are supported"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3)}", 0, TL_FLOAT32,
       TL_INVALID_ARG, ": negative dimension -1 in shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, - 2)}", 0, TL_FLOAT32,
       TL_INVALID_ARG, ": negative dimension -2 in shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 0,
       TL_FLOAT32, TL_LIMIT, ": shape is too large (the data size overflows)"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}", 0,
       TL_FLOAT64, TL_LIMIT, ": shape is too large (the data size overflows)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296, 16)}", 0,
       TL_FLOAT32, TL_LIMIT, ": shape is too large (the data size overflows)"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (1099511627776,)}", 0, TL_BFLOAT16,
       TL_LIMIT, ": array data of 2199023255552 bytes exceeds the limit of 2^40 bytes"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 0,
       TL_FLOAT32, TL_LIMIT, ": a dimension in shape is too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", 20, TL_FLOAT32,
       TL_INVALID_ARG, ": truncated data (expected 24 bytes after the header, found 20)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", 0, TL_FLOAT32,
       TL_INVALID_ARG, ": truncated data (expected 24 bytes after the header, found 0)"},
      {"{'descr': '<f4', 'fortran_order': False}", 4, TL_FLOAT32, TL_INVALID_ARG,
       ": header lacks the key 'shape'"},
      {"{'shape': (1,), 'fortran_order': False}", 4, TL_FLOAT32, TL_INVALID_ARG,
       ": header lacks the key 'descr'"},
      {"{}", 4, TL_FLOAT32, TL_INVALID_ARG, ": header lacks the key 'descr'"},
      {"{'descr': '<f4', 'shape': (1,)}", 4, TL_FLOAT32, TL_INVALID_ARG,
       ": header lacks the key 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'descr': '<f4'}", 4, TL_FLOAT32,
       TL_INVALID_ARG, ": header has the key 'descr' twice"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", 4, TL_FLOAT32,
       TL_INVALID_ARG, ": header has an unexpected key 'extra'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", 12, TL_FLOAT32, TL_INVALID_ARG,
       ": header 'shape' must be a tuple of integers, such as (2, 3)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", 12, TL_FLOAT32, TL_INVALID_ARG,
       ": header 'shape' must be a tuple of integers, such as (2, 3)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,)}", 12, TL_FLOAT32,
       TL_INVALID_ARG, ": header 'shape' must be a tuple of integers, such as (2, 3)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ('3',)}", 12, TL_FLOAT32,
       TL_INVALID_ARG, ": header 'shape' must be a tuple of integers, such as (2, 3)"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", 4, TL_FLOAT32, TL_INVALID_ARG,
       ": header 'fortran_order' must be True or False"},
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (1,)}", 4, TL_FLOAT32,
       TL_INVALID_ARG, ": header 'fortran_order' must be True or False"},
      {"{'descr': 5, 'fortran_order': False, 'shape': (1,)}", 4, TL_FLOAT32, TL_INVALID_ARG,
       ": header 'descr' must be a string"},
      /* the dtype does not fit the tensor */
      {"{'descr': '<f2', 'fortran_order': False, 'shape': (2,)}", 4, TL_INT32, TL_INVALID_ARG,
       " holds float16 (<f2) but the tensor is int32 (<i4)"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (2,)}", 8, TL_FLOAT32, TL_INVALID_ARG,
       " holds int32 (<i4) but the tensor is float32 (<f4)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8, TL_FLOAT16, TL_INVALID_ARG,
       " holds float32 (<f4) but the tensor is float16 (<f2)"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (2,)}", 2, TL_BOOL, TL_INVALID_ARG,
       " holds uint8 (|u1) but the tensor is bool (|b1)"},
      {"{'descr': '=i8', 'fortran_order': False, 'shape': (2,)}", 16, TL_UINT64, TL_INVALID_ARG,
       " holds int64 (<i8) but the tensor is uint64 (<u8)"},
      {"{'descr': '<f2', 'fortran_order': False, 'shape': (2,)}", 4, TL_BFLOAT16, TL_INVALID_ARG,
       " holds float16 (<f2) but the tensor is bfloat16 (<u2 bit patterns, or <f4 or <f8 "
       "values)"},
      {"{'descr': '|i1', 'fortran_order': False, 'shape': (2,)}", 2, TL_FLOAT8_E4M3,
       TL_INVALID_ARG,
       " holds int8 (|i1) but the tensor is float8_e4m3 (|u1 bit patterns, or <f4 or <f8 "
       "values)"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    reject_dict(1, cases[k].dict, cases[k].dlen, cases[k].want, cases[k].code, cases[k].suffix);

  /* trailing bytes: the message gives the size the file should have */
  static const struct {
    const char *dict;
    size_t data, extra;
  } trailing[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", 24, 1},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ()}", 4, 1000},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0,)}", 0, 1},
  };
  for (size_t k = 0; k < sizeof trailing / sizeof trailing[0]; k++) {
    unsigned char data[1024] = {0};
    size_t len;
    unsigned char *img =
        make_npy(1, 0, trailing[k].dict, 0, data, trailing[k].data + trailing[k].extra, &len);
    char suffix[128];
    snprintf(suffix, sizeof suffix,
             ": unexpected bytes after the array data (expected %zu bytes in all)",
             len - trailing[k].extra);
    expect_reject(img, len, TL_FLOAT32, TL_INVALID_ARG, suffix);
    free(img);
  }
}

/* Syntax errors report the byte offset inside the dict; `at` marks it. */
static void test_syntax_errors(void **state) {
  (void)state;
  static const struct {
    const char *dict, *at, *what;
  } cases[] = {
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", "'<f4'", "expected ':'"},
      {"['descr', 1]", "['descr", "expected '{'"},
      {"", NULL, "expected '{'"}, /* at the end of the blank header */
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", "'fortran",
       "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", "x", "unexpected text after the dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}]", "]",
       "unexpected text after the dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}", "2)}",
       "expected ',' or ')' in shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}", ",)}",
       "integer with a leading zero"},
      {"{descr: '<f4', 'fortran_order': False, 'shape': (1,)}", "descr:",
       "expected a quoted string"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), ,}", ",}",
       "expected a quoted string"},
      {"{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,)}", "\\x34",
       "escape sequences in strings are not supported"},
      {"{'descr': '<f\xe9" "4', 'fortran_order': False, 'shape': (1,)}", "\xe9",
       "unexpected character in a string"},
      {"{'descr': '<f4", NULL, "unterminated string"}, /* at the padding's '\n' */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const char *d = cases[k].dict;
    size_t at = cases[k].at ? (size_t)(strstr(d, cases[k].at) - d) : strlen(d);
    if (!cases[k].at) {
      /* an error at the end of the padded header */
      size_t pre = 10;
      at = (pre + strlen(d) + 1 + 63) / 64 * 64 - pre;
      if (strstr(cases[k].what, "unterminated"))
        at--;
    }
    char suffix[256];
    snprintf(suffix, sizeof suffix, ": malformed header: %s at byte %zu", cases[k].what, at);
    reject_dict(1, d, 4, TL_FLOAT32, TL_INVALID_ARG, suffix);
  }
  /* a NUL inside the header is not whitespace */
  size_t len;
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}";
  unsigned char *img = make_npy(1, 0, dict, 0, "abcd", 4, &len);
  img[10 + strlen(dict) + 2] = 0;
  char suffix[256];
  snprintf(suffix, sizeof suffix, ": malformed header: unexpected text after the dict at byte %zu",
           strlen(dict) + 2);
  expect_reject(img, len, TL_FLOAT32, TL_INVALID_ARG, suffix);
  free(img);
}

static void test_preamble_rejections(void **state) {
  (void)state;
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}";
  size_t len;
  unsigned char *img = make_npy(1, 0, dict, 0, "abcd", 4, &len);

  expect_reject(img, 0, TL_FLOAT32, TL_INVALID_ARG, ": not a .npy file (it is empty)");
  expect_reject((const unsigned char *)"PK\x03\x04", 4, TL_FLOAT32, TL_INVALID_ARG,
                ": not a .npy file (it does not start with \\x93NUMPY)");
  expect_reject((const unsigned char *)"\x93NUMPZ\x01\x00", 8, TL_FLOAT32, TL_INVALID_ARG,
                ": not a .npy file (it does not start with \\x93NUMPY)");
  expect_reject(img, 4, TL_FLOAT32, TL_INVALID_ARG, ": truncated header");
  expect_reject(img, 7, TL_FLOAT32, TL_INVALID_ARG, ": truncated header");
  expect_reject(img, 9, TL_FLOAT32, TL_INVALID_ARG, ": truncated header");
  size_t hlen = img[8] | (size_t)img[9] << 8;
  assert_int_equal(len, 10 + hlen + 4);
  char suffix[128];
  snprintf(suffix, sizeof suffix, ": truncated header (expected %zu bytes, found 40)", hlen);
  expect_reject(img, 50, TL_FLOAT32, TL_INVALID_ARG, suffix);
  snprintf(suffix, sizeof suffix, ": truncated header (expected %zu bytes, found %zu)", hlen,
           hlen - 1);
  expect_reject(img, 10 + hlen - 1, TL_FLOAT32, TL_INVALID_ARG, suffix);
  expect_reject(img, 10 + hlen, TL_FLOAT32, TL_INVALID_ARG,
                ": truncated data (expected 4 bytes after the header, found 0)");

  img[6] = 4;
  expect_reject(img, len, TL_FLOAT32, TL_INVALID_ARG,
                ": unsupported .npy format version 4.0 (1.0, 2.0 and 3.0 are supported)");
  img[6] = 1;
  img[7] = 1;
  expect_reject(img, len, TL_FLOAT32, TL_INVALID_ARG,
                ": unsupported .npy format version 1.1 (1.0, 2.0 and 3.0 are supported)");
  img[6] = 0;
  img[7] = 0;
  expect_reject(img, len, TL_FLOAT32, TL_INVALID_ARG,
                ": unsupported .npy format version 0.0 (1.0, 2.0 and 3.0 are supported)");
  free(img);

  /* version 2.0 preamble cut short */
  img = make_npy(2, 0, dict, 0, "abcd", 4, &len);
  expect_reject(img, 11, TL_FLOAT32, TL_INVALID_ARG, ": truncated header");
  free(img);

  /* a header over 64 KiB (only possible from version 2.0 on) */
  img = make_npy(2, 0, dict, 70000, "abcd", 4, &len);
  expect_reject(img, len, TL_FLOAT32, TL_LIMIT,
                ": header of 70000 bytes exceeds the limit of 65536 bytes");
  free(img);
  /* ... while one of exactly 64 KiB is fine */
  img = make_npy(2, 0, dict, 65536, "abcd", 4, &len);
  tl_npy a;
  tl_error err;
  assert_int_equal(tl_npy_parse(img, len, "x.npy", TL_FLOAT32, &a, &err), TL_OK);
  assert_memory_equal(a.data, "abcd", 4);
  tl_npy_free(&a);
  free(img);
}

/* ---- float values for bfloat16 and float8 tensors ---------------------- */

/* Independent reference: float32 bits to bfloat16, round to nearest even. */
static uint16_t ref_bf16(uint32_t bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return 0xffff; /* NaN: checked separately */
  uint32_t lsb = (bits >> 16) & 1;
  return (uint16_t)((bits + 0x7fffu + lsb) >> 16);
}

static int is_bf16_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

static void test_float_values_to_bf16(void **state) {
  (void)state;
  char path[512];
  path_in(path, sizeof path, "f32.npy");
  /* tricky values first, then random bit patterns */
  static const uint32_t fixed[] = {
      0x3f800000u, /* 1.0 */
      0x3f808000u, /* 1 + 2^-8: tie, to even 0x3f80 */
      0x3f818000u, /* 1 + 3*2^-8: tie, to even 0x3f82 */
      0x3f808001u, /* just above the tie: 0x3f81 */
      0x3f807fffu, /* just below the tie: 0x3f80 */
      0x80000000u, /* -0.0 */
      0x7f800000u, /* inf */
      0xff800000u, /* -inf */
      0x7f7fffffu, /* FLT_MAX rounds up to inf */
      0x00000001u, /* smallest subnormal */
      0x7fc00000u, /* NaN */
      0xffc12345u, /* NaN with payload */
  };
  enum { N = 4096 };
  int64_t shape[1] = {N};
  tl_npy f = make_arr(TL_FLOAT32, 1, shape), b;
  uint32_t *bits = f.data;
  memcpy(bits, fixed, sizeof fixed);
  tl_error err;
  assert_int_equal(tl_npy_write(path, &f, &err), TL_OK);
  assert_int_equal(tl_npy_read(path, TL_BFLOAT16, &b, &err), TL_OK);
  assert_int_equal(b.dtype, TL_BFLOAT16);
  assert_int_equal(b.count, N);
  const uint16_t *h = b.data;
  static const uint16_t fixed_want[] = {0x3f80, 0x3f80, 0x3f82, 0x3f81, 0x3f80, 0x8000,
                                        0x7f80, 0xff80, 0x7f80, 0x0000};
  for (size_t k = 0; k < sizeof fixed_want / sizeof fixed_want[0]; k++)
    assert_int_equal(h[k], fixed_want[k]);
  assert_true(is_bf16_nan(h[10]));
  assert_true(is_bf16_nan(h[11]));
  for (size_t k = 0; k < N; k++) {
    if ((bits[k] & 0x7fffffffu) > 0x7f800000u)
      assert_true(is_bf16_nan(h[k]));
    else
      assert_int_equal(h[k], ref_bf16(bits[k]));
  }
  tl_npy_free(&b);
  tl_npy_free(&f);

  /* float64 values are rounded once, not through float32: 1 + 2^-8 + 2^-30
   * is above the bfloat16 tie although its float32 rounding is the tie */
  path_in(path, sizeof path, "f64.npy");
  tl_npy d = make_arr(TL_FLOAT64, 1, (int64_t[]){3});
  double *dv = d.data;
  dv[0] = 1.0 + ldexp(1, -8) + ldexp(1, -30);
  dv[1] = 1.0 + ldexp(1, -8);
  dv[2] = -3.0e38 * 10; /* beyond float32, still finite: bfloat16 inf */
  assert_int_equal(tl_npy_write(path, &d, &err), TL_OK);
  assert_int_equal(tl_npy_read(path, TL_BFLOAT16, &b, &err), TL_OK);
  h = b.data;
  assert_int_equal(h[0], 0x3f81);
  assert_int_equal(h[1], 0x3f80);
  assert_int_equal(h[2], 0xff80);
  tl_npy_free(&b);

  /* float8: round to nearest even, saturate */
  dv[0] = 1.0 + ldexp(1, -4);   /* e4m3 tie: 0x38; e5m2: 1.0 = 0x3c */
  dv[1] = 1000.0;               /* e4m3 saturates to 448 = 0x7e; e5m2: 1024 = 0x64 */
  dv[2] = -1.0e6;               /* e4m3 -448 = 0xfe; e5m2 -57344 = 0xfb */
  assert_int_equal(tl_npy_write(path, &d, &err), TL_OK);
  assert_int_equal(tl_npy_read(path, TL_FLOAT8_E4M3, &b, &err), TL_OK);
  assert_int_equal(b.dtype, TL_FLOAT8_E4M3);
  assert_memory_equal(b.data, "\x38\x7e\xfe", 3);
  tl_npy_free(&b);
  assert_int_equal(tl_npy_read(path, TL_FLOAT8_E5M2, &b, &err), TL_OK);
  assert_memory_equal(b.data, "\x3c\x64\xfb", 3);
  tl_npy_free(&b);
  tl_npy_free(&d);

  /* float32 file into a float8 tensor: 1 + 3*2^-4 is an e4m3 tie, to 1.25 */
  tl_npy g = make_arr(TL_FLOAT32, 0, NULL);
  *(float *)g.data = 1.1875f;
  path_in(path, sizeof path, "f32s.npy");
  assert_int_equal(tl_npy_write(path, &g, &err), TL_OK);
  assert_int_equal(tl_npy_read(path, TL_FLOAT8_E4M3, &b, &err), TL_OK);
  assert_int_equal(b.ndim, 0);
  assert_int_equal(b.count, 1);
  assert_int_equal(*(uint8_t *)b.data, 0x3a);
  tl_npy_free(&b);
  tl_npy_free(&g);
}

/* ---- robustness -------------------------------------------------------- */

static void test_mutations_never_crash(void **state) {
  (void)state;
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  float data[6] = {1, 2, 3, 4, 5, 6};
  size_t len;
  unsigned char *img = make_npy(1, 0, dict, 0, data, sizeof data, &len);
  static const unsigned char vals[] = {0, 0xff, '(', ')', ',', '-', '9', '\'', ' ', '}', 'T', '>', 0x80};
  tl_npy a;
  tl_error err;
  int ok = 0, bad = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char saved = img[i];
    for (size_t v = 0; v < sizeof vals; v++) {
      img[i] = vals[v];
      for (int want = 0; want < TL_DTYPE_COUNT; want += 5) {
        tl_status st = tl_npy_parse(img, len, "m.npy", (tl_dtype)want, &a, &err);
        if (st == TL_OK) {
          ok++;
          tl_npy_free(&a);
        } else {
          bad++;
          assert_null(a.data);
          assert_true(strncmp(err.message, "m.npy", 5) == 0);
        }
      }
    }
    img[i] = saved;
  }
  assert_true(ok > 0 && bad > 0);
  /* every proper prefix is rejected */
  for (size_t n = 0; n < len; n++) {
    assert_int_not_equal(tl_npy_parse(img, n, "m.npy", TL_FLOAT32, &a, &err), TL_OK);
    assert_null(a.data);
  }
  assert_int_equal(tl_npy_parse(img, len, "m.npy", TL_FLOAT32, &a, &err), TL_OK);
  assert_memory_equal(a.data, data, sizeof data);
  tl_npy_free(&a);
  free(img);
}

/* Reads img through a FIFO written by a child process (a file whose size
 * is not known in advance). */
static tl_status read_through_fifo(const unsigned char *img, size_t len, tl_dtype want,
                                   tl_npy *out, tl_error *err, const char *path) {
  unlink(path);
  assert_int_equal(mkfifo(path, 0600), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGPIPE, SIG_IGN);
    int fd = open(path, O_WRONLY);
    size_t off = 0;
    while (fd >= 0 && off < len) {
      ssize_t w = write(fd, img + off, len - off < 7 ? len - off : 7);
      if (w <= 0)
        break;
      off += (size_t)w;
    }
    _exit(0);
  }
  tl_status st = tl_npy_read(path, want, out, err);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  unlink(path);
  return st;
}

static void test_read_from_fifo(void **state) {
  (void)state;
  char path[512];
  path_in(path, sizeof path, "fifo.npy");
  const char *dict = "{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }";
  int16_t data[4] = {-1, 2, 300, 7};
  size_t len;
  unsigned char *img = make_npy(1, 0, dict, 0, data, 6, &len);
  tl_npy a;
  tl_error err;
  assert_int_equal(read_through_fifo(img, len, TL_INT16, &a, &err, path), TL_OK);
  assert_int_equal(a.count, 3);
  assert_memory_equal(a.data, data, 6);
  tl_npy_free(&a);
  char want[700];
  assert_int_equal(read_through_fifo(img, len - 1, TL_INT16, &a, &err, path), TL_INVALID_ARG);
  snprintf(want, sizeof want, "%s: truncated data (expected 6 bytes after the header, found 5)",
           path);
  assert_string_equal(err.message, want);
  assert_null(a.data);
  free(img);
  img = make_npy(1, 0, dict, 0, data, 8, &len);
  assert_int_equal(read_through_fifo(img, len, TL_INT16, &a, &err, path), TL_INVALID_ARG);
  snprintf(want, sizeof want,
           "%s: unexpected bytes after the array data (expected %zu bytes in all)", path,
           len - 2);
  assert_string_equal(err.message, want);
  assert_null(a.data);
  free(img);
}

/* ---- NumPy ------------------------------------------------------------- */

static const char numpy_writer[] =
    "import sys, numpy as np\n"
    "d = sys.argv[1]\n"
    "rng = np.random.default_rng(1234)\n"
    "def save(name, a, version=None):\n"
    "    p = f'{d}/{name}.npy'\n"
    "    if version is None:\n"
    "        np.save(p, a)\n"
    "    else:\n"
    "        with open(p, 'wb') as f:\n"
    "            np.lib.format.write_array(f, a, version=version)\n"
    "    with open(f'{d}/{name}.bin', 'wb') as f:\n"
    "        f.write(np.ascontiguousarray(a).tobytes())\n"
    "    with open(f'{d}/{name}.shape', 'w') as f:\n"
    "        f.write(' '.join(str(x) for x in (a.ndim,) + a.shape))\n"
    "for t in ['int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64']:\n"
    "    info = np.iinfo(t)\n"
    "    a = rng.integers(info.min, info.max, size=(3, 4), dtype=t, endpoint=True)\n"
    "    a.flat[0] = info.min\n"
    "    a.flat[1] = info.max\n"
    "    save(t, a)\n"
    "save('bool', rng.integers(0, 2, size=(5, 7)).astype(np.bool_))\n"
    "save('float16', np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 6e-8, np.inf, -np.inf, np.nan,"
    " 0.1], dtype=np.float16))\n"
    "save('float32', rng.standard_normal((4, 5)).astype(np.float32) * 1000)\n"
    "save('float64', rng.standard_normal((2, 3, 4)))\n"
    "save('scalar', np.array(3.5))\n"
    "save('int8_small', np.array([-128, -1, 0, 1, 127], dtype=np.int8))\n"
    "save('v2', np.arange(24, dtype=np.int32).reshape(2, 3, 4), version=(2, 0))\n"
    "save('v3', np.arange(6, dtype=np.uint16).reshape(3, 2), version=(3, 0))\n"
    "save('empty', np.zeros((0, 5), dtype=np.float32))\n"
    "save('eight', np.arange(256, dtype=np.uint8).reshape(2, 2, 2, 2, 2, 2, 2, 2))\n"
    "np.save(f'{d}/fortran.npy', np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))\n"
    "np.save(f'{d}/bigendian.npy', np.arange(4, dtype='>f4'))\n"
    "np.save(f'{d}/structured.npy', np.zeros(3, dtype=[('a', '<f4'), ('b', '<i4')]))\n"
    "np.save(f'{d}/complex.npy', np.zeros(3, dtype=np.complex64))\n"
    "np.save(f'{d}/nine.npy', np.zeros((1,) * 9, dtype=np.float32))\n";

/* Reads name.npy for want and compares it with name.shape and name.bin. */
static void check_numpy_file(const char *name, tl_dtype want, tl_npy *out) {
  char path[512], file[128];
  tl_error err;
  snprintf(file, sizeof file, "%s.npy", name);
  path_in(path, sizeof path, file);
  tl_status st = tl_npy_read(path, want, out, &err);
  if (st != TL_OK)
    print_error("%s: %s\n", name, err.message);
  assert_int_equal(st, TL_OK);
  assert_int_equal(out->dtype, want);

  snprintf(file, sizeof file, "%s.shape", name);
  path_in(path, sizeof path, file);
  size_t len;
  char *text = (char *)slurp(path, &len);
  text = realloc(text, len + 1);
  text[len] = 0;
  char *p = text, *end;
  long ndim = strtol(p, &end, 10);
  assert_int_equal(ndim, out->ndim);
  size_t count = 1;
  for (long d = 0; d < ndim; d++) {
    p = end;
    long long dim = strtoll(p, &end, 10);
    assert_int_equal(dim, out->shape[d]);
    count *= (size_t)dim;
  }
  assert_int_equal(out->count, count);
  free(text);

  /* the raw bytes match when no conversion happened */
  if (want != TL_BFLOAT16 && want != TL_FLOAT8_E4M3 && want != TL_FLOAT8_E5M2) {
    snprintf(file, sizeof file, "%s.bin", name);
    path_in(path, sizeof path, file);
    unsigned char *raw = slurp(path, &len);
    assert_int_equal(len, count * tl_dtype_size(want));
    if (len)
      assert_memory_equal(raw, out->data, len);
    free(raw);
  }
}

static void test_numpy_files_read(void **state) {
  (void)state;
  REQUIRE_NUMPY();
  assert_int_equal(run_python(numpy_writer), 0);
  static const struct {
    const char *name;
    tl_dtype want;
  } files[] = {
      {"int8", TL_INT8},       {"uint8", TL_UINT8},       {"int16", TL_INT16},
      {"uint16", TL_UINT16},   {"int32", TL_INT32},       {"uint32", TL_UINT32},
      {"int64", TL_INT64},     {"uint64", TL_UINT64},     {"bool", TL_BOOL},
      {"float16", TL_FLOAT16}, {"float32", TL_FLOAT32},   {"float64", TL_FLOAT64},
      {"scalar", TL_FLOAT64},  {"int8_small", TL_INT8},   {"v2", TL_INT32},
      {"v3", TL_UINT16},       {"empty", TL_FLOAT32},     {"eight", TL_UINT8},
  };
  tl_npy a;
  for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
    check_numpy_file(files[k].name, files[k].want, &a);
    tl_npy_free(&a);
  }

  /* spot checks of values known from the script */
  check_numpy_file("int8_small", TL_INT8, &a);
  assert_memory_equal(a.data, "\x80\xff\x00\x01\x7f", 5);
  tl_npy_free(&a);
  check_numpy_file("float16", TL_FLOAT16, &a);
  const uint16_t *h = a.data;
  static const uint16_t f16[] = {0x0000, 0x8000, 0x3c00, 0xc100, 0x7bff,
                                 0x0001, 0x7c00, 0xfc00, 0x0000, 0x2e66};
  for (int k = 0; k < 10; k++)
    if (k != 8)
      assert_int_equal(h[k], f16[k]);
  assert_true((h[8] & 0x7c00) == 0x7c00 && (h[8] & 0x3ff));
  tl_npy_free(&a);
  check_numpy_file("scalar", TL_FLOAT64, &a);
  assert_int_equal(a.ndim, 0);
  assert_int_equal(a.count, 1);
  assert_true(*(double *)a.data == 3.5);
  tl_npy_free(&a);
  check_numpy_file("float64", TL_FLOAT64, &a);
  assert_int_equal(a.ndim, 3);
  tl_npy_free(&a);
  check_numpy_file("v2", TL_INT32, &a);
  for (int k = 0; k < 24; k++)
    assert_int_equal(((int32_t *)a.data)[k], k);
  tl_npy_free(&a);
  check_numpy_file("bool", TL_BOOL, &a);
  for (size_t k = 0; k < a.count; k++)
    assert_true(((uint8_t *)a.data)[k] <= 1);
  tl_npy_free(&a);
  /* a <u2 file is a bfloat16 tensor's bit patterns */
  check_numpy_file("v3", TL_BFLOAT16, &a);
  for (int k = 0; k < 6; k++)
    assert_int_equal(((uint16_t *)a.data)[k], k);
  tl_npy_free(&a);
  /* numpy's float32 values rounded into bfloat16 */
  check_numpy_file("float32", TL_BFLOAT16, &a);
  char path[512];
  path_in(path, sizeof path, "float32.bin");
  size_t len;
  unsigned char *raw = slurp(path, &len);
  assert_int_equal(len, 4 * a.count);
  for (size_t k = 0; k < a.count; k++) {
    uint32_t bits;
    memcpy(&bits, raw + 4 * k, 4);
    assert_int_equal(((uint16_t *)a.data)[k], ref_bf16(bits));
  }
  free(raw);
  tl_npy_free(&a);

  /* numpy's files that are refused */
  static const struct {
    const char *name;
    tl_dtype want;
    tl_status code;
    const char *suffix;
  } bad[] = {
      {"fortran.npy", TL_FLOAT32, TL_INVALID_ARG,
       ": fortran_order arrays are not supported; save with np.ascontiguousarray"},
      {"bigendian.npy", TL_FLOAT32, TL_INVALID_ARG,
       ": big-endian data ('>f4') is not supported; convert with a.astype('<f4')"},
      {"structured.npy", TL_FLOAT32, TL_INVALID_ARG, ": structured dtypes are not supported"},
      {"complex.npy", TL_FLOAT32, TL_INVALID_ARG, ": unsupported dtype '<c8'"},
      {"nine.npy", TL_FLOAT32, TL_LIMIT, ": shape has 9 dimensions; at most 8 are supported"},
      {"float16.npy", TL_INT32, TL_INVALID_ARG,
       " holds float16 (<f2) but the tensor is int32 (<i4)"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    char want[700];
    tl_error err;
    path_in(path, sizeof path, bad[k].name);
    assert_int_equal(tl_npy_read(path, bad[k].want, &a, &err), bad[k].code);
    snprintf(want, sizeof want, "%s%s", path, bad[k].suffix);
    assert_string_equal(err.message, want);
    assert_null(a.data);
  }
}

static const char numpy_checker[] =
    "import sys, numpy as np\n"
    "d = sys.argv[1]\n"
    "bad = 0\n"
    "for line in open(f'{d}/manifest.txt'):\n"
    "    f = line.split()\n"
    "    name, descr, nd = f[0], f[1], int(f[2])\n"
    "    shape = tuple(int(x) for x in f[3:3 + nd])\n"
    "    p = f'{d}/{name}.npy'\n"
    "    a = np.load(p)\n"
    "    raw = open(f'{d}/{name}.bin', 'rb').read()\n"
    "    with open(p, 'rb') as fh:\n"
    "        v = np.lib.format.read_magic(fh)\n"
    "        np.lib.format.read_array_header_1_0(fh)\n"
    "        off = fh.tell()\n"
    "    ok = (a.dtype.str == descr and a.shape == shape and a.tobytes() == raw\n"
    "          and a.flags.c_contiguous and v == (1, 0) and off % 64 == 0)\n"
    "    if not ok:\n"
    "        print('mismatch:', name, a.dtype.str, descr, a.shape, shape, v, off)\n"
    "        bad += 1\n"
    "def check(name, want):\n"
    "    global bad\n"
    "    a = np.load(f'{d}/{name}.npy')\n"
    "    if a.dtype != want.dtype or a.shape != want.shape or not np.array_equal(a, want):\n"
    "        print('wrong values in', name, a, want)\n"
    "        bad += 1\n"
    "check('sem_f16', (np.arange(40) * 0.25 - 3).astype(np.float16).reshape(5, 8))\n"
    "check('sem_i32', (np.arange(12, dtype=np.int32) * 1000 - 7).reshape(3, 4))\n"
    "check('sem_bool', (np.arange(10) % 3 == 0).reshape(2, 5))\n"
    "check('sem_f64', np.array(-0.125))\n"
    "check('sem_bf16', ((np.arange(6) * 0.5).astype(np.float32).view(np.uint32) >> 16)"
    ".astype(np.uint16))\n"
    "sys.exit(1 if bad else 0)\n";

static void test_numpy_reads_our_files(void **state) {
  (void)state;
  REQUIRE_NUMPY();
  static const struct {
    int ndim;
    int64_t shape[TL_NPY_MAX_DIMS];
  } shapes[] = {{0, {0}}, {1, {5}}, {3, {2, 3, 4}}, {2, {0, 3}}, {8, {1, 2, 1, 2, 1, 2, 1, 3}}};
  char path[512], mpath[512];
  path_in(mpath, sizeof mpath, "manifest.txt");
  FILE *m = fopen(mpath, "w");
  assert_non_null(m);
  tl_error err;
  for (int t = 0; t < TL_DTYPE_COUNT; t++) {
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      tl_npy a = make_arr((tl_dtype)t, shapes[s].ndim, shapes[s].shape);
      char name[64];
      snprintf(name, sizeof name, "ours_%s_%zu", tl_dtype_name((tl_dtype)t), s);
      char file[80];
      snprintf(file, sizeof file, "%s.npy", name);
      path_in(path, sizeof path, file);
      assert_int_equal(tl_npy_write(path, &a, &err), TL_OK);
      snprintf(file, sizeof file, "%s.bin", name);
      path_in(path, sizeof path, file);
      if (tl_dtype_is_signed(a.dtype) && tl_dtype_is_packed(a.dtype)) /* the file holds them sign-extended */
        for (size_t k = 0; k < a.count; k++)
          ((signed char *)a.data)[k] = (signed char)tl_load((unsigned char *)a.data + k, a.dtype).i;
      write_bytes(path, a.data, a.count * tl_dtype_size(a.dtype));
      fprintf(m, "%s %s %d", name, tl_npy_descr((tl_dtype)t), a.ndim);
      for (int d = 0; d < a.ndim; d++)
        fprintf(m, " %lld", (long long)a.shape[d]);
      fprintf(m, "\n");
      tl_npy_free(&a);
    }
  }
  assert_int_equal(fclose(m), 0);

  /* files whose values numpy checks against its own computation */
  tl_npy f16 = make_arr(TL_FLOAT16, 2, (int64_t[]){5, 8});
  for (int k = 0; k < 40; k++)
    ((uint16_t *)f16.data)[k] = tl_f16_from_double(k * 0.25 - 3);
  path_in(path, sizeof path, "sem_f16.npy");
  assert_int_equal(tl_npy_write(path, &f16, &err), TL_OK);
  tl_npy i32 = make_arr(TL_INT32, 2, (int64_t[]){3, 4});
  for (int k = 0; k < 12; k++)
    ((int32_t *)i32.data)[k] = k * 1000 - 7;
  path_in(path, sizeof path, "sem_i32.npy");
  assert_int_equal(tl_npy_write(path, &i32, &err), TL_OK);
  tl_npy bl = make_arr(TL_BOOL, 2, (int64_t[]){2, 5});
  for (int k = 0; k < 10; k++)
    ((uint8_t *)bl.data)[k] = k % 3 == 0;
  path_in(path, sizeof path, "sem_bool.npy");
  assert_int_equal(tl_npy_write(path, &bl, &err), TL_OK);
  tl_npy f64 = make_arr(TL_FLOAT64, 0, NULL);
  *(double *)f64.data = -0.125;
  path_in(path, sizeof path, "sem_f64.npy");
  assert_int_equal(tl_npy_write(path, &f64, &err), TL_OK);
  tl_npy bf = make_arr(TL_BFLOAT16, 1, (int64_t[]){6});
  for (int k = 0; k < 6; k++)
    ((uint16_t *)bf.data)[k] = tl_bf16_from_double(k * 0.5);
  path_in(path, sizeof path, "sem_bf16.npy");
  assert_int_equal(tl_npy_write(path, &bf, &err), TL_OK);
  tl_npy_free(&f16);
  tl_npy_free(&i32);
  tl_npy_free(&bl);
  tl_npy_free(&f64);
  tl_npy_free(&bf);

  assert_int_equal(run_python(numpy_checker), 0);

  /* the checker must be able to fail: a corrupted file is caught */
  path_in(path, sizeof path, "sem_i32.npy");
  size_t len;
  unsigned char *img = slurp(path, &len);
  img[len - 1] ^= 1;
  write_bytes(path, img, len);
  free(img);
  printf("(a mismatch report about sem_i32 is expected next)\n");
  fflush(stdout);
  assert_int_equal(run_python(numpy_checker), 1);
  assert_true(no_temp_files_left());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip_every_dtype),
      cmocka_unit_test(test_packed_dtypes),
      cmocka_unit_test(test_write_details),
      cmocka_unit_test(test_read_io_errors),
      cmocka_unit_test(test_header_variants),
      cmocka_unit_test(test_rejections),
      cmocka_unit_test(test_syntax_errors),
      cmocka_unit_test(test_preamble_rejections),
      cmocka_unit_test(test_float_values_to_bf16),
      cmocka_unit_test(test_mutations_never_crash),
      cmocka_unit_test(test_read_from_fifo),
      cmocka_unit_test(test_numpy_files_read),
      cmocka_unit_test(test_numpy_reads_our_files),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
