/*
 * test_interp.c - unit tests of the reference interpreter (compiler/interp.c).
 *
 * Two kinds of tests:
 *   - every program of examples/ is loaded with tl_load_program (with -D
 *     style overrides), run at small sizes (including sizes that are not
 *     multiples of the tiles, and several values of the dynamic sizes) on
 *     fresh random inputs (never zero), and compared with a naive reference
 *     computed here in double (rounded to the output dtype with tl_convert),
 *     with a tolerance per dtype relative to the norm of the reference;
 *   - tiny inline programs pin down the tricky semantics: lock-step
 *     thread-level code, masked ifs, per-thread loop bounds, out-of-range
 *     global accesses, run-time errors with their pointer and column,
 *     parallel-loop independence, conversions on store, reduce/cumsum/
 *     atomic_add/gemm variants, several kernels run in order on workspaces
 *     that start poisoned (not zeroed), and the argument checks of
 *     tl_interpret.
 *
 * The random seed comes from the clock and is printed; TL_SEED=N repeats a
 * run.  Files are found under $TL_SRCDIR when it is set, else relative to
 * the current directory (make test runs from the repository root).  Inline
 * programs are written with ' for " to keep them readable.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "interp.h"
#include "ir.h"

#define MAXP 16

/* ---- random numbers ---------------------------------------------------------- */
static uint64_t rng_state;

static uint64_t rnd(void) { /* splitmix64 */
  uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* Uniform in [-1, -0.05] U [0.05, 1]: never zero. */
static double rnd_val(void) {
  double u = (double)(rnd() >> 11) / 9007199254740992.0;
  double m = 0.05 + 0.95 * u;
  return (rnd() & 1) ? m : -m;
}

/* ---- programs and runs ------------------------------------------------------------ */
static const char *srcdir(void) {
  const char *d = getenv("TL_SRCDIR");
  return d && *d ? d : ".";
}

static char *read_text(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", srcdir(), rel);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  fclose(f);
  if (s)
    s[n] = 0;
  return s;
}

/* A copy of s with every ' turned into ". */
static char *dq(const char *s) {
  char *r = strdup(s);
  for (char *p = r; *p; p++)
    if (*p == '\'')
      *p = '"';
  return r;
}

typedef struct run {
  tl_arena *arena;
  tl_program *prog;
  tl_arg args[MAXP];
  int64_t shape[MAXP][TL_MAX_DIMS];
  tl_error err;
} run;

static int param(const run *r, const char *name) {
  for (int p = 0; p < r->prog->nparams; p++)
    if (strcmp(r->prog->params[p]->name, name) == 0)
      return p;
  fail_msg("no parameter '%s'", name);
  return -1;
}

/* Loads text (double-quoted JSON) with the overrides "NAME=VALUE". */
static void load(run *r, const char *text, const char *const *defs) {
  memset(r, 0, sizeof *r);
  r->arena = tl_arena_new();
  tl_define d[16];
  int nd = 0;
  char buf[16][64];
  for (; defs && defs[nd]; nd++) {
    snprintf(buf[nd], sizeof buf[nd], "%s", defs[nd]);
    char *eq = strchr(buf[nd], '=');
    assert_non_null(eq);
    *eq = 0;
    d[nd].name = buf[nd];
    d[nd].value = eq + 1;
  }
  tl_diags diags = {.arena = r->arena};
  r->prog = tl_load_program(r->arena, text, strlen(text), d, nd, &diags);
  if (!r->prog)
    tl_diags_print(&diags, "<program>", stderr);
  assert_non_null(r->prog);
  assert_true(r->prog->nparams <= MAXP);
}

static void load_file(run *r, const char *rel, const char *const *defs) {
  char *text = read_text(rel);
  assert_non_null(text);
  load(r, text, defs);
  free(text);
}

static void load_sq(run *r, const char *sq, const char *const *defs) {
  char *text = dq(sq);
  load(r, text, defs);
  free(text);
}

static void set_int(run *r, const char *name, int64_t v) { r->args[param(r, name)].scalar.i = v; }

/* Allocates every tensor (after the scalars are set) and fills it with
 * random values: floats never zero, integers random bytes. */
static void alloc_tensors(run *r) {
  for (int p = 0; p < r->prog->nparams; p++) {
    const tl_sym *s = r->prog->params[p];
    if (s->kind != SYM_TENSOR)
      continue;
    assert_int_equal(tl_tensor_shape(r->prog, p, r->args, r->shape[p], &r->err), TL_OK);
    size_t n = 1, es = tl_dtype_size(s->dtype);
    for (int d = 0; d < s->ndim; d++)
      n *= (size_t)r->shape[p][d];
    r->args[p].count = n;
    r->args[p].data = malloc(n * es + 1);
    assert_non_null(r->args[p].data);
    for (size_t i = 0; i < n; i++) {
      unsigned char *q = (unsigned char *)r->args[p].data + i * es;
      if (tl_dtype_is_float(s->dtype)) {
        tl_scalar v = {.f = rnd_val()};
        tl_store(q, s->dtype, tl_convert(v, TL_FLOAT64, s->dtype));
      } else {
        for (size_t b = 0; b < es; b++)
          q[b] = (unsigned char)rnd();
      }
    }
  }
}

static void free_run(run *r) {
  for (int p = 0; r->prog && p < r->prog->nparams; p++)
    free(r->args[p].data);
  tl_arena_free(r->arena);
  memset(r, 0, sizeof *r);
}

static double get(const run *r, int p, size_t i) {
  tl_dtype dt = r->prog->params[p]->dtype;
  tl_scalar v = tl_load((const unsigned char *)r->args[p].data + i * tl_dtype_size(dt), dt);
  return tl_convert(v, dt, TL_FLOAT64).f;
}

static int64_t geti(const run *r, int p, size_t i) {
  tl_dtype dt = r->prog->params[p]->dtype;
  tl_scalar v = tl_load((const unsigned char *)r->args[p].data + i * tl_dtype_size(dt), dt);
  return tl_convert(v, dt, TL_INT64).i;
}

static void put(run *r, int p, size_t i, double x) {
  tl_dtype dt = r->prog->params[p]->dtype;
  tl_scalar v = {.f = x};
  tl_store((unsigned char *)r->args[p].data + i * tl_dtype_size(dt), dt, tl_convert(v, TL_FLOAT64, dt));
}

static void puti(run *r, int p, size_t i, int64_t x) {
  tl_dtype dt = r->prog->params[p]->dtype;
  tl_scalar v = {.i = x};
  tl_store((unsigned char *)r->args[p].data + i * tl_dtype_size(dt), dt, tl_convert(v, TL_INT64, dt));
}

static void run_ok(run *r) {
  tl_status st = tl_interpret(r->prog, r->args, NULL, &r->err);
  if (st != TL_OK)
    fprintf(stderr, "tl_interpret: %s:%d: %s\n", r->err.pointer, r->err.column, r->err.message);
  assert_int_equal(st, TL_OK);
}

/* Runs and expects a run-time error at pointer (and column when > 0) whose
 * message holds every string of `needles`. */
static void run_fails(run *r, const char *pointer, int column, const char *const *needles) {
  tl_status st = tl_interpret(r->prog, r->args, NULL, &r->err);
  fprintf(stderr, "  expected error: %s:%d: %s\n", r->err.pointer, r->err.column, r->err.message);
  assert_int_equal(st, TL_RUNTIME);
  assert_int_equal(r->err.code, TL_RUNTIME);
  assert_string_equal(r->err.pointer, pointer);
  if (column > 0)
    assert_int_equal(r->err.column, column);
  for (int i = 0; needles && needles[i]; i++)
    if (!strstr(r->err.message, needles[i]))
      fail_msg("message '%s' lacks '%s'", r->err.message, needles[i]);
}

/* Compares tensor p with ref (rounded to p's dtype) relative to the norm. */
static void compare(const run *r, int p, const double *ref, double tol, const char *what) {
  tl_dtype dt = r->prog->params[p]->dtype;
  double num = 0, den = 0, worst = 0;
  size_t n = r->args[p].count, bad = 0;
  for (size_t i = 0; i < n; i++) {
    double want = tl_convert((tl_scalar){.f = ref[i]}, TL_FLOAT64, dt).f, got = get(r, p, i);
    if (isnan(got))
      bad++;
    num += (got - want) * (got - want);
    den += want * want;
    if (fabs(got - want) > worst)
      worst = fabs(got - want);
  }
  double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  fprintf(stderr, "  %-44s %8zu elements, relative error %.3g (max abs %.3g), tolerance %g\n", what, n, rel, worst,
          tol);
  assert_int_equal(bad, 0);
  assert_true(den > 0);
  assert_true(rel <= tol);
}

static double tol_of(tl_dtype dt) { return dt == TL_FLOAT32 ? 1e-4 : dt == TL_FLOAT16 ? 1e-2 : 2e-2; }

/* ---- the examples ----------------------------------------------------------------- */
/* Loads example `file` with M, N, K overridden and fills its tensors. */
static void load_mnk(run *r, const char *file, const char *M, const char *N, const char *K) {
  char dm[32], dn[32], dk[32];
  snprintf(dm, sizeof dm, "M=%s", M);
  snprintf(dn, sizeof dn, "N=%s", N);
  snprintf(dk, sizeof dk, "K=%s", K);
  const char *defs[] = {dm, dn, dk, NULL};
  load_file(r, file, defs);
  alloc_tensors(r);
}

/* C = A B with A [M, K] and B [K, N] (bt: B given as [N, K]). */
static void ref_matmul(const run *r, int pa, int pb, int64_t M, int64_t N, int64_t K, bool bt, double *out) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc += get(r, pa, (size_t)(m * K + k)) * get(r, pb, (size_t)(bt ? n * K + k : k * N + n));
      out[m * N + n] = acc;
    }
}

static void example_gemm(const char *file, bool bt, const char *M, const char *N, const char *K) {
  run r;
  load_mnk(&r, file, M, N, K);
  int pa = param(&r, "A"), pb = param(&r, "B"), pc = param(&r, "C");
  int64_t m = r.shape[pc][0], n = r.shape[pc][1], k = r.shape[pa][1];
  run_ok(&r);
  double *ref = malloc(sizeof(double) * (size_t)(m * n));
  ref_matmul(&r, pa, pb, m, n, k, bt, ref);
  char what[128];
  snprintf(what, sizeof what, "%s M=%s N=%s K=%s", file, M, N, K);
  compare(&r, pc, ref, tol_of(TL_FLOAT16), what);
  free(ref);
  free_run(&r);
}

static void gemm_examples(void **state) {
  (void)state;
  const char *sizes[][3] = {{"200", "136", "72"}, {"256", "128", "64"}, {"1", "1", "1"}, {"130", "257", "33"}};
  for (int i = 0; i < 4; i++) {
    example_gemm("examples/gemm.json", false, sizes[i][0], sizes[i][1], sizes[i][2]);
    example_gemm("examples/gemm_nt.json", true, sizes[i][0], sizes[i][1], sizes[i][2]);
    example_gemm("examples/gemm_swizzle.json", false, sizes[i][0], sizes[i][1], sizes[i][2]);
  }
}

/* int8 x int8 -> int32 (B given as [N, K]): exact, against the integer sum. */
static void example_gemm_int8(const char *M, const char *N, const char *K) {
  run r;
  load_mnk(&r, "examples/gemm_int8.json", M, N, K);
  int pa = param(&r, "A"), pb = param(&r, "B"), pc = param(&r, "C");
  int64_t m = r.shape[pc][0], n = r.shape[pc][1], k = r.shape[pa][1];
  run_ok(&r);
  size_t bad = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      int64_t acc = 0;
      for (int64_t q = 0; q < k; q++)
        acc += geti(&r, pa, (size_t)(i * k + q)) * geti(&r, pb, (size_t)(j * k + q));
      bad += geti(&r, pc, (size_t)(i * n + j)) != (int64_t)(int32_t)acc;
    }
  fprintf(stderr, "  examples/gemm_int8.json M=%s N=%s K=%s: %zu of %lld elements differ (exact)\n", M, N, K, bad,
          (long long)(m * n));
  assert_int_equal(bad, 0);
  free_run(&r);
}

/* DeepGEMM's float8 gemm: C = sum over 128-blocks kb of K of
 * (A[:, kb] B[:, kb]^T) * scale_a[m, kb] * scale_b[n / 128, kb], rounded to
 * C's float16 (tol_of: the float32 sums and scalings are far finer). */
static void example_gemm_fp8(const char *M, const char *N, const char *K) {
  run r;
  load_mnk(&r, "examples/gemm_fp8_blockscaled.json", M, N, K);
  int pa = param(&r, "A"), pb = param(&r, "B"), psa = param(&r, "scale_a"), psb = param(&r, "scale_b"),
      pc = param(&r, "C");
  int64_t m = r.shape[pc][0], n = r.shape[pc][1], k = r.shape[pa][1], kb = r.shape[psa][1];
  run_ok(&r);
  double *ref = malloc(sizeof(double) * (size_t)(m * n));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t b = 0; b < kb; b++) {
        double part = 0;
        for (int64_t q = b * 128; q < k && q < b * 128 + 128; q++)
          part += get(&r, pa, (size_t)(i * k + q)) * get(&r, pb, (size_t)(j * k + q));
        acc += part * get(&r, psa, (size_t)(i * kb + b)) * get(&r, psb, (size_t)(j / 128 * kb + b));
      }
      ref[i * n + j] = acc;
    }
  char what[128];
  snprintf(what, sizeof what, "examples/gemm_fp8_blockscaled.json M=%s N=%s K=%s", M, N, K);
  compare(&r, pc, ref, tol_of(TL_FLOAT16), what);
  free(ref);
  free_run(&r);
}

/* The float8 gemm with per-tensor scales (torch._scaled_mm's operation):
 * C = (A B^T) * scale_a[0] * scale_b[0], rounded to C's float16. */
static void example_gemm_fp8_per_tensor(const char *M, const char *N, const char *K) {
  run r;
  load_mnk(&r, "examples/gemm_fp8.json", M, N, K);
  int pa = param(&r, "A"), pb = param(&r, "B"), psa = param(&r, "scale_a"), psb = param(&r, "scale_b"),
      pc = param(&r, "C");
  int64_t m = r.shape[pc][0], n = r.shape[pc][1], k = r.shape[pa][1];
  run_ok(&r);
  double *ref = malloc(sizeof(double) * (size_t)(m * n)), s = get(&r, psa, 0) * get(&r, psb, 0);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t q = 0; q < k; q++)
        acc += get(&r, pa, (size_t)(i * k + q)) * get(&r, pb, (size_t)(j * k + q));
      ref[i * n + j] = acc * s;
    }
  char what[128];
  snprintf(what, sizeof what, "examples/gemm_fp8.json M=%s N=%s K=%s", M, N, K);
  compare(&r, pc, ref, tol_of(TL_FLOAT16), what);
  free(ref);
  free_run(&r);
}

static void lowp_gemm_examples(void **state) {
  (void)state;
  const char *sizes[][3] = {{"200", "136", "72"}, {"256", "256", "256"}, {"1", "1", "1"}, {"130", "257", "300"}};
  for (int i = 0; i < 4; i++) {
    example_gemm_int8(sizes[i][0], sizes[i][1], sizes[i][2]);
    example_gemm_fp8(sizes[i][0], sizes[i][1], sizes[i][2]);
    example_gemm_fp8_per_tensor(sizes[i][0], sizes[i][1], sizes[i][2]);
  }
}

/* dequant(B)[n, k]: B holds two unsigned 4-bit values per byte, low first. */
/* Weight (n, k) of B: two 4-bit values per int8 byte, the low one first,
 * or (a uint4 tensor, held one element per byte) the element itself. */
static double dequant(const run *r, int pb, int64_t K, int64_t n, int64_t k) {
  if (r->prog->params[pb]->dtype == TL_UINT4)
    return (double)geti(r, pb, (size_t)(n * K + k));
  int64_t byte = geti(r, pb, (size_t)(n * (K / 2) + k / 2)) & 0xFF;
  return (double)((byte >> (4 * (k % 2))) & 15);
}

static void dequant_example(const char *file, bool threads, const char *M, const char *N, const char *K) {
  run r;
  load_mnk(&r, file, M, N, K);
  int pa = param(&r, "A"), pb = param(&r, "B"), pc = param(&r, threads ? "C" : "Ct");
  int64_t m = r.shape[pa][0], k = r.shape[pa][1], n = r.shape[pb][0];
  run_ok(&r);
  double *ref = malloc(sizeof(double) * (size_t)(m * n));
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t q = 0; q < k; q++)
        acc += get(&r, pa, (size_t)(i * k + q)) * dequant(&r, pb, k, j, q);
      if (threads)
        ref[i * n + j] = acc;  /* C[m, n] */
      else
        ref[j * m + i] = acc;  /* Ct[n, m] */
    }
  char what[128];
  snprintf(what, sizeof what, "%s M=%s N=%s K=%s", file, M, N, K);
  compare(&r, pc, ref, tol_of(TL_FLOAT16), what);
  free(ref);
  free_run(&r);
}

static void dequant_examples(void **state) {
  (void)state;
  dequant_example("examples/dequant_gemm.json", false, "200", "136", "72");
  dequant_example("examples/dequant_gemm.json", false, "256", "256", "64");
  dequant_example("examples/dequant_gemm_threads.json", true, "200", "136", "72");
  dequant_example("examples/dequant_gemm_threads.json", true, "128", "256", "96");
  dequant_example("examples/dequant_gemm_uint4.json", false, "200", "136", "74");
  dequant_example("examples/dequant_gemm_uint4.json", false, "256", "256", "64");
  dequant_example("examples/dequant_gemm_threads_uint4.json", true, "200", "136", "74");
  dequant_example("examples/dequant_gemm_threads_uint4.json", true, "128", "256", "96");
}

/* gemm_w4a16: C = A . ((B - 8) * S[:, k // group])^T, the dequantized weight
 * rounded to float16 as the program does (float16 arithmetic). */
static void w4a16_example(const char *M, const char *N, const char *K, const char *group) {
  char d[4][32];
  snprintf(d[0], sizeof d[0], "M=%s", M);
  snprintf(d[1], sizeof d[1], "N=%s", N);
  snprintf(d[2], sizeof d[2], "K=%s", K);
  snprintf(d[3], sizeof d[3], "group_size=%s", group);
  const char *defs[] = {d[0], d[1], d[2], d[3], NULL};
  run r;
  load_file(&r, "examples/gemm_w4a16.json", defs);
  alloc_tensors(&r);
  int pa = param(&r, "A"), pb = param(&r, "B"), ps = param(&r, "S"), pc = param(&r, "C");
  int64_t m = r.shape[pa][0], k = r.shape[pa][1], n = r.shape[pb][0], g = atoi(group), ng = r.shape[ps][1];
  run_ok(&r);
  double *ref = malloc(sizeof(double) * (size_t)(m * n));
  for (int64_t j = 0; j < n; j++)
    for (int64_t i = 0; i < m; i++) {
      double acc = 0;
      for (int64_t q = 0; q < k; q++) {
        double w = tl_round_to(TL_FLOAT16, (dequant(&r, pb, k, j, q) - 8) * get(&r, ps, (size_t)(j * ng + q / g)));
        acc += get(&r, pa, (size_t)(i * k + q)) * w;
      }
      ref[i * n + j] = acc;
    }
  char what[128];
  snprintf(what, sizeof what, "gemm_w4a16 M=%s N=%s K=%s group=%s", M, N, K, group);
  compare(&r, pc, ref, tol_of(TL_FLOAT16), what);
  free(ref);
  free_run(&r);
}

static void w4a16_examples(void **state) {
  (void)state;
  w4a16_example("200", "136", "202", "128");
  w4a16_example("1", "256", "512", "128");
  w4a16_example("64", "128", "256", "64");
}

/* Output[b, q, h, :] = softmax(Q K^T * scale) V per (b, h); the program does
 * not mask the keys of its last, partial K block, which read as zero
 * (TILE-IR.md 6): without is_causal they take part with score 0 and value
 * 0, so the reference pads the keys to whole blocks the same way. */
static void flash_example(bool causal, int64_t B, int64_t H, int64_t S, int64_t D, int64_t bm, int64_t bn) {
  char d[7][48];
  snprintf(d[0], sizeof d[0], "batch=%" PRId64, B);
  snprintf(d[1], sizeof d[1], "heads=%" PRId64, H);
  snprintf(d[2], sizeof d[2], "seq_len=%" PRId64, S);
  snprintf(d[3], sizeof d[3], "dim=%" PRId64, D);
  snprintf(d[4], sizeof d[4], "block_M=%" PRId64, bm);
  snprintf(d[5], sizeof d[5], "block_N=%" PRId64, bn);
  snprintf(d[6], sizeof d[6], "is_causal=%s", causal ? "true" : "false");
  const char *defs[] = {d[0], d[1], d[2], d[3], d[4], d[5], d[6], NULL};
  run r;
  load_file(&r, "examples/flash_attention.json", defs);
  alloc_tensors(&r);
  int pq = param(&r, "Q"), pk = param(&r, "K"), pv = param(&r, "V"), po = param(&r, "Output");
  run_ok(&r);
  int64_t padded = (S + bn - 1) / bn * bn;
  double scale = 1.0 / sqrt((double)D);
  double *ref = calloc((size_t)(B * S * H * D), sizeof(double)), *p = malloc(sizeof(double) * (size_t)padded);
#define AT(b, s, h, x) ((size_t)((((b) * S + (s)) * H + (h)) * D + (x)))
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t q = 0; q < S; q++) {
        int64_t nk = causal ? q + 1 : padded;
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < nk; k++) {
          double s = 0;
          if (k < S)
            for (int64_t x = 0; x < D; x++)
              s += get(&r, pq, AT(b, q, h, x)) * get(&r, pk, AT(b, k, h, x));
          p[k] = s * scale;
          mx = fmax(mx, p[k]);
        }
        for (int64_t k = 0; k < nk; k++)
          sum += (p[k] = exp(p[k] - mx));
        for (int64_t x = 0; x < D; x++) {
          double o = 0;
          for (int64_t k = 0; k < nk && k < S; k++)
            o += p[k] * get(&r, pv, AT(b, k, h, x));
          ref[AT(b, q, h, x)] = o / sum;
        }
      }
#undef AT
  char what[128];
  snprintf(what, sizeof what, "flash_attention causal=%d S=%" PRId64 " D=%" PRId64 " blocks %" PRId64 "x%" PRId64,
           causal, S, D, bm, bn);
  compare(&r, po, ref, tol_of(TL_FLOAT16), what);
  free(ref);
  free(p);
  free_run(&r);
}

static void flash_examples(void **state) {
  (void)state;
  flash_example(false, 2, 2, 100, 64, 64, 64);
  flash_example(true, 2, 2, 100, 64, 64, 64);
  flash_example(false, 1, 3, 128, 32, 64, 32);
  flash_example(true, 1, 1, 130, 16, 32, 64);
}

static void tilus_matmul(void **state) {
  (void)state;
  const int64_t ms[] = {1, 7, 300};
  const char *defs[] = {"n_size=136", "k_size=72", NULL};
  for (int i = 0; i < 3; i++) {
    run r;
    load_file(&r, "examples/tilus_matmul.json", defs);
    set_int(&r, "m_size", ms[i]);
    alloc_tensors(&r);
    int pa = param(&r, "a"), pb = param(&r, "b"), pc = param(&r, "c");
    run_ok(&r);
    double *ref = malloc(sizeof(double) * (size_t)(ms[i] * 136));
    ref_matmul(&r, pa, pb, ms[i], 136, 72, false, ref);
    char what[64];
    snprintf(what, sizeof what, "tilus_matmul m_size=%" PRId64, ms[i]);
    compare(&r, pc, ref, tol_of(TL_FLOAT16), what);
    free(ref);
    free_run(&r);
  }
}

static void tilus_add_one(void **state) {
  (void)state;
  const int64_t ns[] = {1, 129, 1000, 128};
  for (int i = 0; i < 4; i++) {
    run r;
    load_file(&r, "examples/tilus_add_one.json", NULL);
    set_int(&r, "n", ns[i]);
    alloc_tensors(&r);
    int pa = param(&r, "a"), pb = param(&r, "b");
    run_ok(&r);
    double *ref = malloc(sizeof(double) * (size_t)ns[i]);
    for (int64_t k = 0; k < ns[i]; k++)
      ref[k] = get(&r, pa, (size_t)k) + 1.0;
    char what[64];
    snprintf(what, sizeof what, "tilus_add_one n=%" PRId64, ns[i]);
    compare(&r, pb, ref, tol_of(TL_FLOAT32), what);
    for (int64_t k = 0; k < ns[i]; k++) /* exact: float32 a + 1, rounded once */
      assert_true(get(&r, pb, (size_t)k) == tl_f32_round(get(&r, pa, (size_t)k) + 1.0));
    free(ref);
    free_run(&r);
  }
  /* n = 0: an empty grid runs no block */
  run r;
  load_file(&r, "examples/tilus_add_one.json", NULL);
  set_int(&r, "n", 0);
  alloc_tensors(&r);
  run_ok(&r);
  free_run(&r);
}

/* ---- several kernels and workspaces (proto/tile-ir-v1.md 3.1, 4.1) ------------------------ */
static void kernels_in_order(void **state) {
  (void)state;
  /* row sums in 4 column slices into a workspace, then their sum: the second kernel reads what the first wrote */
  const int64_t ms[] = {200, 77, 64};
  for (int i = 0; i < 3; i++) {
    run r;
    load_file(&r, "tests/gpu/programs/split_rowsum.json", NULL);
    assert_int_equal(r.prog->nkernels, 2);
    assert_non_null(r.prog->next);
    assert_int_equal(r.prog->nworkspaces, 1);
    assert_int_equal(tl_user_params(r.prog), 3);
    set_int(&r, "m", ms[i]);
    alloc_tensors(&r);
    int px = param(&r, "X"), py = param(&r, "Y");
    run_ok(&r);
    double *ref = calloc((size_t)ms[i], sizeof(double));
    for (int64_t k = 0; k < ms[i] * 512; k++)
      ref[k / 512] += get(&r, px, (size_t)k);
    char what[64];
    snprintf(what, sizeof what, "split_rowsum m=%" PRId64, ms[i]);
    compare(&r, py, ref, tol_of(TL_FLOAT32), what);
    free(ref);
    free_run(&r);
  }
  /* a workspace is not zeroed: what no kernel wrote reads as the poison (NaN); the kernels see each other's
   * writes in order (the third adds 1 to what the second copied) */
  run r;
  load_sq(&r, "{'tlir': 1, 'name': 'ws', 'params': [{'name': 'O', 'kind': 'tensor', 'dtype': 'float32', "
              "'shape': [64]}], 'workspaces': [{'name': 'W', 'dtype': 'float32', 'shape': [64]}], 'kernels': ["
              "{'grid': [1], 'threads': 32, 'block_vars': ['bx'], 'body': [{'op': 'parallel', 'vars': ['i'], "
              "'extents': [32], 'body': ['W[i] = 2.0 * i']}]},"
              "{'grid': [1], 'threads': 32, 'block_vars': ['bx'], 'body': [{'op': 'copy', 'src': 'W', 'dst': 'O'}]},"
              "{'grid': [2], 'threads': 32, 'block_vars': ['b'], 'body': [{'op': 'parallel', 'vars': ['i'], "
              "'extents': [32], 'body': ['O[b * 32 + i] += 1.0']}]}]}",
          NULL);
  assert_int_equal(r.prog->nkernels, 3);
  alloc_tensors(&r);
  run_ok(&r);
  int po = param(&r, "O");
  for (int k = 0; k < 64; k++)
    if (k < 32)
      assert_true(get(&r, po, (size_t)k) == 2.0 * k + 1);
    else
      assert_true(isnan(get(&r, po, (size_t)k)));
  free_run(&r);
}

/* ---- thread-level semantics --------------------------------------------------------- */
#define HEAD(name, threads) \
  "{'tlir': 1, 'name': '" name "', 'params': ["
#define KERNEL(grid, threads, bvars) \
  "], 'kernel': {'grid': " grid ", 'threads': " threads ", 'block_vars': " bvars ", 'body': ["
#define TAIL "]}}"

/* ---- blocks handing results over (proto/tile-ir-v1.md 9.1) ------------------------------- */
/* Three blocks each leave a row of P, fence, count themselves in Cnt[0]; the block that counts 2 (the last) fences,
 * sets the count back and adds the rows.  Each variant drops or moves one piece of the handover; the run then
 * stops with the error that names it. */
static const char *const HANDOVER =
    "{'tlir': 1, 'name': 'handover', 'params': [{'name': 'out', 'kind': 'tensor', 'dtype': 'float32', 'shape': [4]}],"
    " 'workspaces': [{'name': 'P', 'dtype': 'float32', 'shape': [3, 4]},"
    "                {'name': 'Cnt', 'dtype': 'int32', 'shape': [3], 'zeroed': true}],"
    " 'kernel': {'grid': [3], 'threads': 4, 'block_vars': ['bx'], 'body': ["
    "  {'op': 'alloc_shared', 'name': 'arrived', 'shape': [1], 'dtype': 'int32'},"
    "  %s"                                                                    /* before: nothing, or a store */
    "  {'op': 'parallel', 'vars': ['i'], 'extents': [4], 'body': ['P[bx, i] = bx * 10.0 + i']},"
    "  %s"                                                                    /* the writer's fence */
    "  {'op': 'parallel', 'vars': ['i'], 'extents': [1], 'body': ["
    "    {'op': 'atomic', 'type': 'add', 'dst': '%s', 'value': '1', 'old': 'o'}, 'arrived[i] = o']},"
    "  %s"                                                                    /* the reader's fence */
    "  {'op': 'if', 'cond': '%s', 'then': ["
    "    {'op': 'parallel', 'vars': ['i'], 'extents': [1], 'body': ['%s']},"    /* the reset */
    "    {'op': 'parallel', 'vars': ['i'], 'extents': [4], 'body': ['%s']}]}" /* the reader */
    "]}}";

static void cross_block(void **state) {
  (void)state;
  const char *F = "{'op': 'sync_threads', 'fence': true},", *R = "out[i] = P[0, i] + P[1, i] + P[2, i]";
  struct {
    const char *pre, *f1, *cnt, *f2, *cond, *reset, *read, *ptr, *needles[4];
  } v[] = {
      /* the handover as 9.1 has it: runs, the sums right, Cnt zero again */
      {"", F, "Cnt[0]", F, "arrived[0] == 2", "Cnt[0] = 0", R, NULL, {NULL}},
      /* no fence between the writer's store and its atomic */
      {"", "", "Cnt[0]", F, "arrived[0] == 2", "Cnt[0] = 0", R, "/kernel/body/4/then/1/body/0",
       {"block (2, 0, 0)", "reads P[0, 0], which block (0, 0, 0) wrote, without the handover of 9.1: block (0, 0, 0) "
        "ran no fencing sync_threads between its store and its atomic on Cnt[0]", NULL}},
      /* no fence at all */
      {"", "", "Cnt[0]", "", "arrived[0] == 2", "Cnt[0] = 0", R, "/kernel/body/3/then/1/body/0",
       {"reads P[0, 0], which block (0, 0, 0) wrote, without the handover of 9.1: block (0, 0, 0) ran no fencing "
        "sync_threads after its store", NULL}},
      /* no fence between the reader's atomic and its reads */
      {"", F, "Cnt[0]", "", "arrived[0] == 2", "Cnt[0] = 0", R, "/kernel/body/4/then/1/body/0",
       {"reads P[0, 0], which block (0, 0, 0) wrote, without the handover of 9.1: this block ran no fencing "
        "sync_threads between its atomic on Cnt[0] and this access", NULL}},
      /* each block counts in its own counter: the reader's atomic is not on the writer's */
      {"", F, "Cnt[bx]", F, "bx == 2", "Cnt[bx] = 0", R, "/kernel/body/5/then/1/body/0",
       {"reads P[0, 0], which block (0, 0, 0) wrote, without the handover of 9.1: no atomic's old of this block counts "
        "the update of Cnt[0] by block (0, 0, 0) after its store and a fencing sync_threads (this block ran no atomic "
        "on Cnt[0])", NULL}},
      /* every block reads: block 0 reads the rows that blocks 1 and 2 write later */
      {"", F, "Cnt[0]", F, "arrived[0] >= 0", "arrived[i] = arrived[i]", R, "/kernel/body/1/body/0",
       {"block (1, 0, 0)", "writes a different value to P[1, 0], which block (0, 0, 0) read before, without the "
        "handover of 9.1: block (0, 0, 0) ran no fencing sync_threads after its read", NULL}},
      /* a block that is not the last sets the count back */
      {"", F, "Cnt[0]", F, "arrived[0] == 0", "Cnt[0] = 0", "out[i] = P[0, i]", "/kernel/body/3/body/0/dst",
       {"block (1, 0, 0)", "updates Cnt[0] after block (0, 0, 0) set it back (9.1: a counter is set back once every "
        "update of the launch has happened)", NULL}},
      /* the last block reads the count itself */
      {"", F, "Cnt[0]", F, "arrived[0] == 2", "out[i] = Cnt[0]", R, "/kernel/body/5/then/0/body/0",
       {"reads Cnt[0], which block (0, 0, 0) updates by atomics in this kernel, with a plain read", NULL}},
      /* a block stores to the count that another block's atomic updated */
      {"{'op': 'if', 'cond': 'bx == 1', 'then': [{'op': 'parallel', 'vars': ['i'], 'extents': [1], "
       "'body': ['Cnt[0] = 5']}]},", F, "Cnt[0]", F, "arrived[0] == 2", "Cnt[0] = 0", R, "/kernel/body/1/then/0/body/0",
       {"block (1, 0, 0)", "writes Cnt[0], which block (0, 0, 0) updates by atomics in this kernel, after the last "
        "update of it was another block's", NULL}},
      /* an atomic on what another block stored */
      {"{'op': 'if', 'cond': 'bx == 0', 'then': [{'op': 'parallel', 'vars': ['i'], 'extents': [1], "
       "'body': ['Cnt[0] = 0']}]},", F, "Cnt[0]", F, "arrived[0] == 2", "Cnt[0] = 0", R, "/kernel/body/4/body/0/dst",
       {"block (1, 0, 0)", "updates Cnt[0] by an atomic, which block (0, 0, 0) wrote with a plain store in this kernel",
        NULL}},
      /* every block writes out, a different value each */
      {"", F, "Cnt[0]", F, "arrived[0] == 2 or bx < 2", "arrived[i] = arrived[i]", "out[i] = bx",
       "/kernel/body/5/then/1/body/0",
       {"block (1, 0, 0)", "writes a different value to out[0], which block (0, 0, 0) wrote, without the handover of "
        "9.1: block (0, 0, 0) ran no fencing sync_threads after its store", NULL}},
  };
  for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
    char text[4096];
    snprintf(text, sizeof text, HANDOVER, v[k].pre, v[k].f1, v[k].cnt, v[k].f2, v[k].cond, v[k].reset, v[k].read);
    run r;
    load_sq(&r, text, NULL);
    alloc_tensors(&r);
    if (!v[k].ptr) {
      run_ok(&r);
      for (int i = 0; i < 4; i++)
        assert_true(get(&r, param(&r, "out"), (size_t)i) == 30.0 + 3 * i);
    } else
      run_fails(&r, v[k].ptr, 0, v[k].needles);
    free_run(&r);
  }
  /* blocks may store the same value to an element, and read what they stored themselves */
  run r;
  load_sq(&r,
          HEAD("same", 4)
          "{'name': 'out', 'kind': 'tensor', 'dtype': 'float32', 'shape': [4]}"
          KERNEL("[3]", "4", "['bx']")
          "{'op': 'parallel', 'vars': ['i'], 'extents': [4], 'body': ['out[i] = 7.0']},"
          "{'op': 'parallel', 'vars': ['i'], 'extents': [4], 'body': ['out[i] = out[i] * 1.0']}"
          TAIL,
          NULL);
  alloc_tensors(&r);
  run_ok(&r);
  free_run(&r);
}

static void lockstep(void **state) {
  (void)state;
  run r;
  load_sq(&r,
          HEAD("lockstep", 8)
          "{'name': 'out', 'kind': 'tensor', 'dtype': 'int32', 'shape': [8]},"
          "{'name': 'out2', 'kind': 'tensor', 'dtype': 'int32', 'shape': [8]}"
          KERNEL("[1]", "8", "['bx']")
          "{'op': 'alloc_shared', 'name': 'S', 'shape': [8], 'dtype': 'int32'},"
          "{'op': 'alloc_shared', 'name': 'S2', 'shape': [8], 'dtype': 'int32'},"
          "{'op': 'let', 'name': 'tx', 'value': 'thread_binding(0)'},"
          "'S[tx] = tx',"
          "'S2[tx] = S[(tx + 1) % 8]',"
          "'S[tx] = S[(tx + 1) % 8] * 10',"  /* all reads happen before any write */
          "{'op': 'copy', 'src': 'S', 'dst': 'out'},"
          "{'op': 'copy', 'src': 'S2', 'dst': 'out2'}"
          TAIL,
          NULL);
  alloc_tensors(&r);
  run_ok(&r);
  for (int i = 0; i < 8; i++) {
    assert_int_equal(geti(&r, 0, (size_t)i), (i + 1) % 8 * 10);
    assert_int_equal(geti(&r, 1, (size_t)i), (i + 1) % 8);
  }
  free_run(&r);

  /* 3-D thread blocks: x is fastest */
  load_sq(&r,
          HEAD("lockstep3d", 0)
          "{'name': 'out', 'kind': 'tensor', 'dtype': 'int32', 'shape': [2, 3, 4]}"
          KERNEL("[1]", "[4, 3, 2]", "['bx']")
          "'out[thread_binding(2), thread_binding(1), thread_binding(0)] = thread_binding(0) + 10 * "
          "thread_binding(1) + 100 * thread_binding(2)'"
          TAIL,
          NULL);
  alloc_tensors(&r);
  run_ok(&r);
  for (int z = 0; z < 2; z++)
    for (int y = 0; y < 3; y++)
      for (int x = 0; x < 4; x++)
        assert_int_equal(geti(&r, 0, (size_t)((z * 3 + y) * 4 + x)), x + 10 * y + 100 * z);
  free_run(&r);
}

static void masked_if_and_loops(void **state) {
  (void)state;
  run r;
  load_sq(&r,
          HEAD("masked", 8)
          "{'name': 'o1', 'kind': 'tensor', 'dtype': 'int32', 'shape': [8]},"
          "{'name': 'o2', 'kind': 'tensor', 'dtype': 'int32', 'shape': [8]},"
          "{'name': 'o3', 'kind': 'tensor', 'dtype': 'int32', 'shape': [8]}"
          KERNEL("[1]", "8", "['bx']")
          "{'op': 'alloc_shared', 'name': 'S', 'shape': [8], 'dtype': 'int32'},"
          "{'op': 'let', 'name': 'tx', 'value': 'thread_binding(0)'},"
          "{'op': 'alloc_var', 'name': 'acc', 'dtype': 'int32', 'init': '0'},"
          "{'op': 'if', 'cond': 'tx % 3 == 0', 'then': ['S[tx] = 1'], 'else': ["
          "  {'op': 'if', 'cond': 'tx > 4', 'then': ['S[tx] = 2'], 'else': ['S[tx] = 3']}]},"
          "{'op': 'copy', 'src': 'S', 'dst': 'o1'},"
          /* per-thread extents: thread tx runs tx iterations */
          "{'op': 'serial', 'var': 'i', 'extent': 'tx', 'body': ['acc += i']},"
          /* per-thread start and a negative step: tx, tx-1, tx-2 */
          "{'op': 'unroll', 'var': 'j', 'start': 'tx', 'extent': 3, 'step': -1, 'body': ['acc += j * 100']},"
          "'S[tx] = acc',"
          "{'op': 'copy', 'src': 'S', 'dst': 'o2'},"
          /* lock-step inside a loop with differing trip counts: each round
             shifts the values of the still active threads */
          "'S[tx] = tx',"
          "{'op': 'serial', 'var': 'k', 'extent': 'tx % 4', 'body': ['S[tx] = S[(tx + 1) % 8] + 10 * k']},"
          "{'op': 'copy', 'src': 'S', 'dst': 'o3'}"
          TAIL,
          NULL);
  alloc_tensors(&r);
  run_ok(&r);
  int sim[8], next[8];
  for (int t = 0; t < 8; t++) {
    assert_int_equal(geti(&r, 0, (size_t)t), t % 3 == 0 ? 1 : t > 4 ? 2 : 3);
    assert_int_equal(geti(&r, 1, (size_t)t), t * (t - 1) / 2 + 100 * (3 * t - 3));
    sim[t] = t;
  }
  for (int k = 0; k < 4; k++) { /* a lock-step simulation of the last loop */
    memcpy(next, sim, sizeof sim);
    for (int t = 0; t < 8; t++)
      if (k < t % 4)
        next[t] = sim[(t + 1) % 8] + 10 * k;
    memcpy(sim, next, sizeof sim);
  }
  for (int t = 0; t < 8; t++)
    assert_int_equal(geti(&r, 2, (size_t)t), sim[t]);
  free_run(&r);
}

static void global_out_of_range(void **state) {
  (void)state;
  run r;
  load_sq(&r,
          HEAD("oob", 8)
          "{'name': 'x', 'kind': 'tensor', 'dtype': 'float32', 'shape': [4]},"
          "{'name': 'out', 'kind': 'tensor', 'dtype': 'float32', 'shape': [8]},"
          "{'name': 'small', 'kind': 'tensor', 'dtype': 'float32', 'shape': [4]},"
          "{'name': 'win', 'kind': 'tensor', 'dtype': 'float32', 'shape': [6]},"
          "{'name': 'in2', 'kind': 'tensor', 'dtype': 'float32', 'shape': [3, 5]},"
          "{'name': 'tile', 'kind': 'tensor', 'dtype': 'float32', 'shape': [4, 4]}"
          KERNEL("[1]", "8", "['bx']")
          "{'op': 'let', 'name': 'tx', 'value': 'thread_binding(0)'},"
          "'out[tx] = x[tx - 2] + 1.0',"  /* indices -2..5 of a 4-element tensor */
          "'small[tx] = 5.0',"             /* writes past the end are dropped */
          "'small[tx - 8] = 6.0',"         /* negative indices too */
          "{'op': 'alloc_fragment', 'name': 'F', 'shape': [6], 'dtype': 'float32'},"
          "{'op': 'copy', 'src': 'x[1:7]', 'dst': 'F'},"  /* a slice past the end */
          "{'op': 'copy', 'src': 'F', 'dst': 'win'},"
          "{'op': 'alloc_shared', 'name': 'T', 'shape': [4, 4], 'dtype': 'float32'},"
          "{'op': 'copy', 'src': 'in2[1, 2]', 'dst': 'T'},"  /* rows 1..4, cols 2..5 of [3, 5] */
          "{'op': 'copy', 'src': 'T', 'dst': 'tile'},"
          "{'op': 'copy', 'src': 'T', 'dst': 'in2[2, 3]'}"   /* only [2, 3..4] is inside */
          TAIL,
          NULL);
  alloc_tensors(&r);
  int pin = 0, pout = 1, psmall = 2, pwin = 3, pin2 = 4, ptile = 5;
  double in[4], in2[15];
  for (int i = 0; i < 4; i++)
    in[i] = get(&r, pin, (size_t)i);
  for (int i = 0; i < 15; i++)
    in2[i] = get(&r, pin2, (size_t)i);
  run_ok(&r);
  for (int t = 0; t < 8; t++)
    assert_true(get(&r, pout, (size_t)t) == tl_f32_round((t - 2 >= 0 && t - 2 < 4 ? in[t - 2] : 0) + 1.0));
  for (int i = 0; i < 4; i++)
    assert_true(get(&r, psmall, (size_t)i) == 5.0);
  for (int i = 0; i < 6; i++)
    assert_true(get(&r, pwin, (size_t)i) == (i + 1 < 4 ? in[i + 1] : 0.0));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      double want = (1 + i < 3 && 2 + j < 5) ? in2[(1 + i) * 5 + 2 + j] : 0.0;
      assert_true(get(&r, ptile, (size_t)(i * 4 + j)) == want);
    }
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 5; j++) {
      double want = in2[i * 5 + j];
      if (i == 2 && j >= 3)
        want = (1 + 0 < 3 && 2 + (j - 3) < 5) ? in2[1 * 5 + 2 + (j - 3)] : 0.0;
      assert_true(get(&r, pin2, (size_t)(i * 5 + j)) == want);
    }
  free_run(&r);
}

static void runtime_errors(void **state) {
  (void)state;
  run r;
  /* a shared index out of range: the index expression's pointer and column */
  load_sq(&r,
          HEAD("shared_oob", 8)
          "{'name': 'out', 'kind': 'tensor', 'dtype': 'int32', 'shape': [8]}"
          KERNEL("[2]", "8", "['bx']")
          "{'op': 'alloc_shared', 'name': 'S', 'shape': [8], 'dtype': 'int32'},"
          "{'op': 'let', 'name': 'tx', 'value': 'thread_binding(0)'},"
          "'S[tx] = 0',"
          "'out[tx] = S[(tx + bx * 5) % 9]'"
          TAIL,
          NULL);
  alloc_tensors(&r);
  run_fails(&r, "/kernel/body/3", 14, (const char *const[]){"index 8", "'S'", "block (1, 0, 0)", "thread 3", NULL});
  free_run(&r);

  /* a region of a shared buffer outside it (the start is a run-time value) */
  load_sq(&r,
          HEAD("region_oob", 4)
          "{'name': 'x', 'kind': 'tensor', 'dtype': 'float32', 'shape': [16]}"
          KERNEL("[1]", "4", "['bx']")
          "{'op': 'alloc_shared', 'name': 'S', 'shape': [8], 'dtype': 'float32'},"
          "{'op': 'serial', 'var': 'k', 'extent': 3, 'body': ["
          "  {'op': 'copy', 'src': 'x[0:4]', 'dst': 'S[k * 4:k * 4 + 4]'}]}"
          TAIL,
          NULL);
  alloc_tensors(&r);
  run_fails(&r, "/kernel/body/1/body/0/dst", 3, (const char *const[]){"[8, 12)", "'S'", NULL});
  free_run(&r);

  /* integer division and modulo by zero, shift counts */
  const char *ops[] = {"tx // d", "tx % d", "1 << (tx + d + 28)", "-8 >> (d - tx)", "ceildiv(tx, d)"};
  const int cols[] = {11, 11, 11, 11, 11};
  const char *msgs[] = {"division by zero", "modulo by zero", "shift count 32", "shift count -1",
                        "division by zero"};
  const int64_t dval[] = {0, 0, 0, 0, 0};
  for (int i = 0; i < 5; i++) {
    char prog[1024];
    snprintf(prog, sizeof prog,
             HEAD("div0", 8)
             "{'name': 'd', 'kind': 'scalar', 'dtype': 'int32'},"
             "{'name': 'out', 'kind': 'tensor', 'dtype': 'int32', 'shape': [8]}"
             KERNEL("[1]", "8", "['bx']")
             "{'op': 'let', 'name': 'tx', 'value': 'thread_binding(0)'},"
             "'out[tx] = %s'"
             TAIL,
             ops[i]);
    load_sq(&r, prog, NULL);
    set_int(&r, "d", dval[i]);
    alloc_tensors(&r);
    run_fails(&r, "/kernel/body/1", cols[i], (const char *const[]){msgs[i], NULL});
    free_run(&r);
  }

  /* a dynamic dimension that comes out negative, a count that does not match */
  load_file(&r, "examples/tilus_add_one.json", NULL);
  set_int(&r, "n", -3);
  int64_t shape[TL_MAX_DIMS];
  assert_int_equal(tl_tensor_shape(r.prog, param(&r, "a"), r.args, shape, &r.err), TL_INVALID_ARG);
  set_int(&r, "n", 10);
  alloc_tensors(&r);
  r.args[param(&r, "b")].count = 9;
  assert_int_equal(tl_interpret(r.prog, r.args, NULL, &r.err), TL_INVALID_ARG);
  assert_non_null(strstr(r.err.message, "'b'"));
  r.args[param(&r, "b")].count = 10;
  r.args[param(&r, "n")].scalar.i = INT64_C(1) << 40; /* not an int32 */
  assert_int_equal(tl_interpret(r.prog, r.args, NULL, &r.err), TL_INVALID_ARG);
  r.args[param(&r, "n")].scalar.i = 10;
  int64_t grid[3];
  assert_int_equal(tl_grid_size(r.prog, r.args, grid, &r.err), TL_OK);
  assert_true(grid[0] == 1 && grid[1] == 1 && grid[2] == 1);
  run_ok(&r);
  free_run(&r);
}

static void parallel_independence(void **state) {
  (void)state;
  run r;
  const char *prog =
      HEAD("par", 4)
      "{'name': 'out', 'kind': 'tensor', 'dtype': 'float32', 'shape': [4, 8]},"
      "{'name': 'g', 'kind': 'tensor', 'dtype': 'float32', 'shape': [8]}"
      KERNEL("[1]", "4", "['bx']")
      "{'op': 'alloc_fragment', 'name': 'F', 'shape': [8], 'dtype': 'float32'},"
      "{'op': 'alloc_fragment', 'name': 'G', 'shape': [4, 8], 'dtype': 'float32'},"
      "{'op': 'alloc_fragment', 'name': 'R', 'shape': [4], 'dtype': 'float32'},"
      "{'op': 'alloc_var', 'name': 'v', 'dtype': 'int32'},"
      "'v = %s',"
      "{'op': 'parallel', 'vars': ['i'], 'extents': [8], 'body': ['F[i] = i']},"
      "{'op': 'parallel', 'vars': ['i', 'j'], 'extents': [4, 8], 'body': ["
      "  'R[i] = 7.0',"                     /* the same value from every j: allowed */
      "  'G[i, j] = F[j] * 2.0 + v']},"     /* F read by many: allowed */
      "{'op': 'parallel', 'vars': ['i', 'j'], 'extents': [4, 8], 'body': ['G[i, j] += R[i]']},"
      "{'op': 'copy', 'src': 'G', 'dst': 'out'},"
      "{'op': 'parallel', 'vars': ['i'], 'extents': [8], 'body': ['%s']}"
      TAIL;
  char text[2048];
  snprintf(text, sizeof text, prog, "3", "F[i] = F[i] + 1.0");
  load_sq(&r, text, NULL);
  alloc_tensors(&r);
  run_ok(&r);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 8; j++)
      assert_true(get(&r, 0, (size_t)(i * 8 + j)) == j * 2.0 + 3 + 7);
  free_run(&r);

  struct {
    const char *init, *body, *ptr, *needles[4];
  } bad[] = {
      {"3", "F[i] = F[(i + 1) % 8]", "/kernel/body/9/body/0",
       {"not independent", "element [1] of 'F'", "written by iteration (i=1) and read by (i=0)", NULL}},
      {"3", "F[i // 2] = i", "/kernel/body/9/body/0",
       {"not independent", "element [0] of 'F'", "written with a different value by (i=1)", NULL}},
      {"3", "g[i // 2] = i", "/kernel/body/9/body/0", {"not independent", "of 'g'", NULL}},
      {"3", "F[7 - i] = g[i] + F[i]", "/kernel/body/9/body/0", {"not independent", "of 'F'", NULL}},
      {"thread_binding(0)", "F[i] = F[i] + 1.0", "/kernel/body/6/body/1",
       {"'v' is read inside a parallel loop but differs", NULL}},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    snprintf(text, sizeof text, prog, bad[k].init, bad[k].body);
    load_sq(&r, text, NULL);
    alloc_tensors(&r);
    run_fails(&r, bad[k].ptr, 0, bad[k].needles);
    /* with the check off, the same program runs */
    if (k < 4) {
      tl_interp_options o = {.check_parallel = 0};
      assert_int_equal(tl_interpret(r.prog, r.args, &o, &r.err), TL_OK);
    }
    free_run(&r);
  }
}

static void store_conversions(void **state) {
  (void)state;
  run r;
  load_sq(&r,
          HEAD("conv", 1)
          "{'name': 'z', 'kind': 'scalar', 'dtype': 'float32'},"
          "{'name': 'o32', 'kind': 'tensor', 'dtype': 'int32', 'shape': [5]},"
          "{'name': 'o8', 'kind': 'tensor', 'dtype': 'int8', 'shape': [5]},"
          "{'name': 'ou', 'kind': 'tensor', 'dtype': 'uint8', 'shape': [3]},"
          "{'name': 'oh', 'kind': 'tensor', 'dtype': 'float16', 'shape': [3]}"
          KERNEL("[1]", "1", "['bx']")
          "'o32[0] = z + 1e10',"
          "'o32[1] = z - 1e10',"
          "'o32[2] = z * infinity(float32) * 0.0',"  /* NaN */
          "'o32[3] = z - 2.9',"
          "'o32[4] = cast(z + 3e9, int64)',"          /* int64 to int32 wraps */
          "'o8[0] = z + 300.7',"
          "'o8[1] = z - 1000.0',"
          "'o8[2] = int32(z) + 1000',"                 /* int to int8 wraps */
          "'o8[3] = z + 127.9',"
          "'o8[4] = z - 128.5',"
          "'ou[0] = z - 5.0',"
          "'ou[1] = z + 300.0',"
          "'ou[2] = int32(z) - 1',"
          "'oh[0] = z + 70000.0',"                     /* float16 overflows to infinity */
          "'oh[1] = z + 1.0 + 0.00048828125',"         /* a tie: rounds to even */
          "'oh[2] = z + 1.0 + 0.0014648438'"
          TAIL,
          NULL);
  r.args[0].scalar.f = 0.0;
  alloc_tensors(&r);
  run_ok(&r);
  assert_int_equal(geti(&r, 1, 0), INT32_MAX);
  assert_int_equal(geti(&r, 1, 1), INT32_MIN);
  assert_int_equal(geti(&r, 1, 2), 0);
  assert_int_equal(geti(&r, 1, 3), -2);
  assert_int_equal(geti(&r, 1, 4), (int32_t)(uint32_t)UINT64_C(3000000000));
  assert_int_equal(geti(&r, 2, 0), 127);
  assert_int_equal(geti(&r, 2, 1), -128);
  assert_int_equal(geti(&r, 2, 2), (int8_t)(uint8_t)(1000 & 0xFF));
  assert_int_equal(geti(&r, 2, 3), 127);
  assert_int_equal(geti(&r, 2, 4), -128);
  assert_int_equal(geti(&r, 3, 0), 0);
  assert_int_equal(geti(&r, 3, 1), 255);
  assert_int_equal(geti(&r, 3, 2), 255);
  assert_true(isinf(get(&r, 4, 0)) && get(&r, 4, 0) > 0);
  assert_true(get(&r, 4, 1) == 1.0);
  assert_true(get(&r, 4, 2) == 1.0 + 2 * 0.0009765625);
  free_run(&r);
}

static void arithmetic(void **state) {
  (void)state;
  run r;
  /* z = 0 keeps every expression a run-time one (no constant folding) */
  const char *exprs[] = {
      "(z - 7) // 2",        "(z - 7) % 2",           "(z + 7) % -2",         "(z + 7) // -2",
      "(z - 16) >> 2",       "int32(cast(z - 16, uint32) >> 28)", "ceildiv(z - 7, 2)", "ceildiv(z + 7, 2)",
      "int32(cast(z + 4294967295, uint32) > z - 1)", "int32(cast(z - 1, int8) < cast(z + 255, uint8))",
      "int32(round(float32(z) + 2.5))", "int32(round(float32(z) - 2.5))", "int32((float32(z) - 7.5) // 2.0 * 10.0)",
      "int32((float32(z) - 7.5) % 2.0 * 10.0)", "min(z + 3, z - 4)", "max(z + 3, z - 4)",
      "int32(max(float32(z) * infinity(float32) * 0.0, 2.0))", "int32(min(2.0, float32(z) * infinity(float32) * 0.0))",
      "if_then_else(z == 0, 11, 1 // z)", "int32(z == 0 or 1 // z == 0)", "int32(z != 0 and 1 // z == 0)",
      "abs(z - 5)", "cast(z + 200, int8)", "~(z + 5)", "-(z + 2147483647) - 2", "(z + 0x7fffffff) * 2",
      "int32(not (z + 0))", "int32(sqrt(float32(z) + 16.0) + exp2(float32(z) + 3.0))",
      "int32(floor(float32(z) - 0.5) * 10.0 + ceil(float32(z) + 0.5))", "reinterpret(float32(z) + 1.0, int32)",
      "int32(pow(float32(z) + 2.0, 10.0) + fma(float32(z) + 3.0, 4.0, 5.0))",
  };
  const int64_t want[] = {
      -4, 1, -1, -4, -4, 15, -3, 4, 1, 1, 3, -3, -40, 5, -4, 3, 2, 2, 11, 1, 0, 5, -56, -6, INT32_MAX, -2, 1, 12, -9,
      0x3f800000, 1041,
  };
  enum { NE = sizeof exprs / sizeof exprs[0] };
  _Static_assert(NE == sizeof want / sizeof want[0], "one value per expression");
  char text[8192];
  int k = snprintf(text, sizeof text,
                   HEAD("arith", 1)
                   "{'name': 'z', 'kind': 'scalar', 'dtype': 'int32'},"
                   "{'name': 'o', 'kind': 'tensor', 'dtype': 'int32', 'shape': [%d]}"
                   KERNEL("[1]", "1", "['bx']"),
                   (int)NE);
  for (int i = 0; i < NE; i++)
    k += snprintf(text + k, sizeof text - (size_t)k, "%s'o[%d] = %s'", i ? "," : "", i, exprs[i]);
  snprintf(text + k, sizeof text - (size_t)k, ", 'o[0] += 0', 'o[1] *= 1', 'o[2] -= z'" TAIL);
  load_sq(&r, text, NULL);
  set_int(&r, "z", 0);
  alloc_tensors(&r);
  run_ok(&r);
  for (int i = 0; i < NE; i++)
    if (geti(&r, 1, (size_t)i) != want[i])
      fail_msg("o[%d] = %s gives %" PRId64 ", want %" PRId64, i, exprs[i], geti(&r, 1, (size_t)i), want[i]);
  free_run(&r);
}

/* ---- tile operators ------------------------------------------------------------------ */
static void reduce_cumsum(void **state) {
  (void)state;
  run r;
  load_sq(&r,
          HEAD("reduce", 4)
          "{'name': 'o', 'kind': 'tensor', 'dtype': 'float32', 'shape': [6, 4]},"
          "{'name': 'omin', 'kind': 'tensor', 'dtype': 'float32', 'shape': [8]},"
          "{'name': 'csum', 'kind': 'tensor', 'dtype': 'int32', 'shape': [4, 8]},"
          "{'name': 'csum0', 'kind': 'tensor', 'dtype': 'float32', 'shape': [4, 8]},"
          "{'name': 'sl', 'kind': 'tensor', 'dtype': 'float32', 'shape': [4]},"
          "{'name': 'sl0', 'kind': 'tensor', 'dtype': 'float32', 'shape': [4]},"
          "{'name': 'isum', 'kind': 'tensor', 'dtype': 'int32', 'shape': [4]}"
          KERNEL("[1]", "4", "['bx']")
          "{'op': 'alloc_fragment', 'name': 'X', 'shape': [4, 8], 'dtype': 'float32'},"
          "{'op': 'alloc_fragment', 'name': 'XI', 'shape': [4, 8], 'dtype': 'int32'},"
          "{'op': 'alloc_fragment', 'name': 'S', 'shape': [6, 4], 'dtype': 'float32'},"
          "{'op': 'alloc_fragment', 'name': 'M', 'shape': [8], 'dtype': 'float32'},"
          "{'op': 'alloc_fragment', 'name': 'C', 'shape': [4, 8], 'dtype': 'int32'},"
          "{'op': 'alloc_shared', 'name': 'C0', 'shape': [4, 8], 'dtype': 'float32'},"
          "{'op': 'alloc_fragment', 'name': 'T', 'shape': [4], 'dtype': 'float32'},"
          "{'op': 'alloc_fragment', 'name': 'T0', 'shape': [4], 'dtype': 'float32'},"
          "{'op': 'alloc_fragment', 'name': 'TI', 'shape': [4], 'dtype': 'int32'},"
          "{'op': 'parallel', 'vars': ['i', 'j'], 'extents': [4, 8], 'body': ["
          "  'X[i, j] = (i * 8 + j - 13) * 0.5', 'XI[i, j] = i * 10 + j + 1']},"
          "{'op': 'fill', 'dst': 'S[0, 0:4]', 'value': 100},"
          "{'op': 'reduce', 'type': 'sum', 'src': 'X', 'dst': 'S[0, 0:4]', 'dim': 1, 'clear': false},"
          "{'op': 'fill', 'dst': 'S[1, 0:4]', 'value': 1.5},"
          "{'op': 'reduce', 'type': 'max', 'src': 'X', 'dst': 'S[1, 0:4]', 'dim': 1, 'clear': false},"
          "{'op': 'fill', 'dst': 'S[2, 0:4]', 'value': 3},"
          "{'op': 'reduce', 'type': 'absmax', 'src': 'X', 'dst': 'S[2, 0:4]', 'dim': 1, 'clear': false},"
          "{'op': 'fill', 'dst': 'S[3, 0:4]', 'value': 1},"
          "{'op': 'reduce', 'type': 'abssum', 'src': 'X', 'dst': 'S[3, 0:4]', 'dim': 1, 'clear': false},"
          "{'op': 'fill', 'dst': 'S[4, 0:4]', 'value': -2},"
          "{'op': 'reduce', 'type': 'min', 'src': 'X', 'dst': 'S[4, 0:4]', 'dim': 1, 'clear': false},"
          "{'op': 'fill', 'dst': 'S[5, 0:4]', 'value': 1000},"
          "{'op': 'reduce', 'type': 'sum', 'src': 'X', 'dst': 'S[5, 0:4]', 'dim': 1},"
          "{'op': 'copy', 'src': 'S', 'dst': 'o'},"
          "{'op': 'reduce', 'type': 'min', 'src': 'X', 'dst': 'M', 'dim': 0},"
          "{'op': 'copy', 'src': 'M', 'dst': 'omin'},"
          "{'op': 'cumsum', 'src': 'XI', 'dst': 'C', 'dim': 1, 'reverse': true},"
          "{'op': 'copy', 'src': 'C', 'dst': 'csum'},"
          "{'op': 'cumsum', 'src': 'X', 'dst': 'C0', 'dim': 0},"
          "{'op': 'copy', 'src': 'C0', 'dst': 'csum0'},"
          /* reductions of sliced regions */
          "{'op': 'fill', 'dst': 'T', 'value': -1},"
          "{'op': 'reduce', 'type': 'sum', 'src': 'X[1:3, 2:6]', 'dst': 'T[0:2]', 'dim': 1},"
          "{'op': 'reduce', 'type': 'max', 'src': 'X[2, 0:8]', 'dst': 'T[3:4]', 'dim': 1},"
          "{'op': 'copy', 'src': 'T', 'dst': 'sl'},"
          "{'op': 'reduce', 'type': 'sum', 'src': 'X[1:3, 2:6]', 'dst': 'T0', 'dim': 0},"
          "{'op': 'copy', 'src': 'T0', 'dst': 'sl0'},"
          "{'op': 'fill', 'dst': 'TI', 'value': 5},"
          "{'op': 'reduce', 'type': 'sum', 'src': 'XI', 'dst': 'TI', 'dim': 1, 'clear': false},"
          "{'op': 'copy', 'src': 'TI', 'dst': 'isum'}"
          TAIL,
          NULL);
  alloc_tensors(&r);
  run_ok(&r);
  double X[4][8];
  int XI[4][8];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 8; j++) {
      X[i][j] = (i * 8 + j - 13) * 0.5;
      XI[i][j] = i * 10 + j + 1;
    }
  for (int i = 0; i < 4; i++) {
    double sum = 0, mx = -INFINITY, amx = 0, asum = 0, mn = INFINITY;
    int isum = 0;
    for (int j = 0; j < 8; j++) {
      sum += X[i][j];
      mx = fmax(mx, X[i][j]);
      amx = fmax(amx, fabs(X[i][j]));
      asum += fabs(X[i][j]);
      mn = fmin(mn, X[i][j]);
      isum += XI[i][j];
    }
    assert_true(get(&r, 0, (size_t)(0 * 4 + i)) == 100 + sum);
    assert_true(get(&r, 0, (size_t)(1 * 4 + i)) == fmax(1.5, mx));
    assert_true(get(&r, 0, (size_t)(2 * 4 + i)) == fmax(3, amx));
    assert_true(get(&r, 0, (size_t)(3 * 4 + i)) == 1 + asum);
    assert_true(get(&r, 0, (size_t)(4 * 4 + i)) == fmin(-2, mn));
    assert_true(get(&r, 0, (size_t)(5 * 4 + i)) == sum);
    assert_int_equal(geti(&r, 6, (size_t)i), 5 + isum);
  }
  for (int j = 0; j < 8; j++) {
    double mn = INFINITY;
    for (int i = 0; i < 4; i++)
      mn = fmin(mn, X[i][j]);
    assert_true(get(&r, 1, (size_t)j) == mn);
  }
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 8; j++) {
      int s = 0;
      for (int k = j; k < 8; k++)
        s += XI[i][k];
      assert_int_equal(geti(&r, 2, (size_t)(i * 8 + j)), s);
      double c = 0;
      for (int k = 0; k <= i; k++)
        c += X[k][j];
      assert_true(get(&r, 3, (size_t)(i * 8 + j)) == c);
    }
  double s1 = 0, s2 = 0, m2 = -INFINITY;
  for (int j = 2; j < 6; j++) {
    s1 += X[1][j];
    s2 += X[2][j];
  }
  for (int j = 0; j < 8; j++)
    m2 = fmax(m2, X[2][j]);
  assert_true(get(&r, 4, 0) == s1 && get(&r, 4, 1) == s2 && get(&r, 4, 2) == -1 && get(&r, 4, 3) == m2);
  for (int j = 0; j < 4; j++)
    assert_true(get(&r, 5, (size_t)j) == X[1][2 + j] + X[2][2 + j]);
  free_run(&r);
}

static void atomic_add(void **state) {
  (void)state;
  run r;
  load_sq(&r,
          HEAD("atomic", 4)
          "{'name': 'acc', 'kind': 'tensor', 'dtype': 'float32', 'shape': [2]},"
          "{'name': 'cnt', 'kind': 'tensor', 'dtype': 'int32', 'shape': [6]},"
          "{'name': 'h', 'kind': 'tensor', 'dtype': 'float16', 'shape': [1]}"
          KERNEL("[4, 2]", "4", "['bx', 'by']")
          "{'op': 'atomic_add', 'dst': 'acc[0]', 'value': 1.5},"
          "{'op': 'atomic_add', 'dst': 'acc[by]', 'value': 'bx * 0.25'},"
          "{'op': 'alloc_fragment', 'name': 'F', 'shape': [4], 'dtype': 'int32'},"
          "{'op': 'fill', 'dst': 'F', 'value': 'bx + 1'},"
          "{'op': 'atomic_add', 'src': 'F', 'dst': 'cnt[4:8]'},"  /* half outside: dropped */
          "{'op': 'atomic_add', 'dst': 'h[0]', 'value': 0.0006}"   /* rounds to float16 each time */
          TAIL,
          NULL);
  alloc_tensors(&r);
  put(&r, 0, 0, 0.5);
  put(&r, 0, 1, -1.0);
  for (int i = 0; i < 6; i++)
    puti(&r, 1, (size_t)i, i);
  put(&r, 2, 0, 1.0);
  run_ok(&r);
  /* 8 blocks: acc[0] += 1.5 each, and bx * 0.25 from the blocks with by == 0 */
  assert_true(get(&r, 0, 0) == 0.5 + 8 * 1.5 + (0 + 1 + 2 + 3) * 0.25);
  assert_true(get(&r, 0, 1) == -1.0 + (0 + 1 + 2 + 3) * 0.25);
  for (int i = 0; i < 4; i++)
    assert_int_equal(geti(&r, 1, (size_t)i), i);
  assert_int_equal(geti(&r, 1, 4), 4 + 2 * (1 + 2 + 3 + 4));
  assert_int_equal(geti(&r, 1, 5), 5 + 2 * (1 + 2 + 3 + 4));
  double h = 1.0;
  for (int i = 0; i < 8; i++)
    h = tl_convert((tl_scalar){.f = h + tl_convert((tl_scalar){.f = 0.0006}, TL_FLOAT64, TL_FLOAT16).f},
                   TL_FLOAT64, TL_FLOAT16).f;
  assert_true(get(&r, 2, 0) == h);
  free_run(&r);
}

static void gemm_variants(void **state) {
  (void)state;
  const char *prog =
      "{'tlir': 1, 'name': 'gemmt', 'constants': {'M': 16, 'N': 24, 'K': 40, 'ta': false, 'tb': false, "
      "  'ca': false},"
      "'params': ["
      "{'name': 'A', 'kind': 'tensor', 'dtype': '%s', 'shape': ['if_then_else(ta, K, M)', 'if_then_else(ta, M, K)']},"
      "{'name': 'B', 'kind': 'tensor', 'dtype': '%s', 'shape': ['if_then_else(tb, N, K)', 'if_then_else(tb, K, N)']},"
      "{'name': 'C', 'kind': 'tensor', 'dtype': '%s', 'shape': ['M', 'N']}"
      KERNEL("[1]", "32", "['bx']")
      "{'op': 'alloc_shared', 'name': 'As', 'shape': ['if_then_else(ta, K, M)', 'if_then_else(ta, M, K)'], "
      "  'dtype': '%s'},"
      "{'op': 'alloc_fragment', 'name': 'Bs', 'shape': ['if_then_else(tb, N, K)', 'if_then_else(tb, K, N)'], "
      "  'dtype': '%s'},"
      "{'op': 'alloc_fragment', 'name': 'Cf', 'shape': ['M', 'N'], 'dtype': '%s'},"
      "{'op': 'copy', 'src': 'A', 'dst': 'As'},"
      "{'op': 'copy', 'src': 'B', 'dst': 'Bs'},"
      "{'op': 'copy', 'src': 'C', 'dst': 'Cf'},"
      "{'op': 'gemm', 'A': 'As', 'B': 'Bs', 'C': 'Cf', 'transpose_A': 'ta', 'transpose_B': 'tb', "
      "  'clear_accum': 'ca'},"
      "{'op': 'copy', 'src': 'Cf', 'dst': 'C'}"
      TAIL;
  char text[4096];
  for (int v = 0; v < 8; v++) {
    bool ta = v & 1, tb = v & 2, ca = v & 4;
    for (int ints = 0; ints < 2; ints++) {
      const char *ab = ints ? "int8" : (v % 3 ? "float16" : "bfloat16"), *c = ints ? "int32" : "float32";
      snprintf(text, sizeof text, prog, ab, ab, c, ab, ab, c);
      const char *defs[] = {ta ? "ta=true" : "ta=false", tb ? "tb=true" : "tb=false", ca ? "ca=true" : "ca=false",
                            NULL};
      run r;
      load_sq(&r, text, defs);
      alloc_tensors(&r);
      int M = 16, N = 24, K = 40;
      double *ref = malloc(sizeof(double) * (size_t)(M * N));
      for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
          double acc = ca ? 0 : (ints ? (double)geti(&r, 2, (size_t)(m * N + n)) : get(&r, 2, (size_t)(m * N + n)));
          for (int k = 0; k < K; k++) {
            size_t ia = (size_t)(ta ? k * M + m : m * K + k), ib = (size_t)(tb ? n * K + k : k * N + n);
            acc += ints ? (double)geti(&r, 0, ia) * (double)geti(&r, 1, ib) : get(&r, 0, ia) * get(&r, 1, ib);
          }
          ref[m * N + n] = acc;
        }
      run_ok(&r);
      if (ints) {
        for (int i = 0; i < M * N; i++) /* exact, wrapping to int32 */
          assert_int_equal(geti(&r, 2, (size_t)i),
                           (int32_t)(uint32_t)(uint64_t)(int64_t)ref[i]);
        fprintf(stderr, "  gemm int8 ta=%d tb=%d clear_accum=%d: exact\n", ta, tb, ca);
      } else {
        char what[96];
        snprintf(what, sizeof what, "gemm %s ta=%d tb=%d clear_accum=%d", ab, ta, tb, ca);
        compare(&r, 2, ref, 1e-6, what);
      }
      free(ref);
      free_run(&r);
    }
  }
}

static void allocation_poison(void **state) {
  (void)state;
  run r;
  /* an allocation inside a loop is fresh (poisoned) on every iteration */
  load_sq(&r,
          HEAD("poison", 1)
          "{'name': 'o', 'kind': 'tensor', 'dtype': 'float32', 'shape': [2]},"
          "{'name': 'oi', 'kind': 'tensor', 'dtype': 'int32', 'shape': [2]}"
          KERNEL("[1]", "1", "['bx']")
          "{'op': 'serial', 'var': 'k', 'extent': 2, 'body': ["
          "  {'op': 'alloc_fragment', 'name': 'F', 'shape': [2], 'dtype': 'float32'},"
          "  {'op': 'alloc_local', 'name': 'L', 'shape': [2], 'dtype': 'int32'},"
          "  {'op': 'copy', 'src': 'F[k:k + 1]', 'dst': 'o[k:k + 1]'},"
          "  'oi[k] = L[k]',"
          "  {'op': 'fill', 'dst': 'F', 'value': 1.0}, 'L[0] = 1', 'L[1] = 1']}"
          TAIL,
          NULL);
  alloc_tensors(&r);
  run_ok(&r);
  assert_true(isnan(get(&r, 0, 0)) && isnan(get(&r, 0, 1)));
  assert_int_equal(geti(&r, 1, 0), (int32_t)0xA5A5A5A5);
  assert_int_equal(geti(&r, 1, 1), (int32_t)0xA5A5A5A5);
  free_run(&r);
}

/* The packed and scale types (proto/tile-ir-v1.md 7.1.2): element reads of
 * uint4/int4/uint2/uint1 tensors and of a uint4 shared buffer, float4_e2m1
 * values and float8_e8m0 scales converted to float32, stores that wrap and
 * saturate into packed outputs; against a reference computed here from the
 * codes with the OCP MX tables written out.  Then the launch check of a
 * dynamic innermost extent. */
static void packed_types(void **state) {
  (void)state;
  static const double e2m1[16] = {0.0,  0.5,  1.0,  1.5,  2.0,  3.0,  4.0,  6.0,
                                  -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};
  run r;
  load_sq(&r,
          "{'tlir': 1, 'name': 'k', 'params': ["
          " {'name': 'W', 'kind': 'tensor', 'dtype': 'uint4', 'shape': [4, 16]},"
          " {'name': 'I', 'kind': 'tensor', 'dtype': 'int4', 'shape': [4, 16]},"
          " {'name': 'T', 'kind': 'tensor', 'dtype': 'uint2', 'shape': [4, 16]},"
          " {'name': 'B', 'kind': 'tensor', 'dtype': 'uint1', 'shape': [4, 16]},"
          " {'name': 'F', 'kind': 'tensor', 'dtype': 'float4_e2m1fn', 'shape': [4, 16]},"
          " {'name': 'S', 'kind': 'tensor', 'dtype': 'float8_e8m0', 'shape': [4]},"
          " {'name': 'O', 'kind': 'tensor', 'dtype': 'float32', 'shape': [4, 16]},"
          " {'name': 'P', 'kind': 'tensor', 'dtype': 'int4', 'shape': [4, 16]},"
          " {'name': 'Q', 'kind': 'tensor', 'dtype': 'float4_e2m1', 'shape': [4, 16]},"
          " {'name': 'R', 'kind': 'tensor', 'dtype': 'uint2', 'shape': [4, 16]}],"
          " 'kernel': {'grid': [1], 'threads': 64, 'block_vars': ['bx'], 'body': ["
          "  {'op': 'alloc_shared', 'name': 'Ws', 'shape': [4, 16], 'dtype': 'uint4'},"
          "  {'op': 'copy', 'src': 'W', 'dst': 'Ws'},"
          "  {'op': 'parallel', 'vars': ['i', 'j'], 'extents': [4, 16], 'body': ["
          "   'O[i, j] = (float32(Ws[i, j]) - 8.0) * float32(S[i]) + float32(F[i, j]) + I[i, j] * 16 + T[i, j] * 2 + B[i, j]',"
          "   'P[i, j] = Ws[i, j] + I[i, j]',"
          "   'Q[i, j] = float32(F[i, j]) * 3.0',"
          "   'R[i, j] = T[i, j] - B[i, j]']}]}}",
          NULL);
  alloc_tensors(&r);
  int pw = param(&r, "W"), pi = param(&r, "I"), pt = param(&r, "T"), pb = param(&r, "B"), pf = param(&r, "F"),
      ps = param(&r, "S"), po = param(&r, "O"), pp = param(&r, "P"), pq = param(&r, "Q"), pr = param(&r, "R");
  unsigned char *w = r.args[pw].data, *in = r.args[pi].data, *t = r.args[pt].data, *b = r.args[pb].data,
                *f = r.args[pf].data, *sc = r.args[ps].data;
  for (int k = 0; k < 64; k++) { /* one element per byte; high bits are not the element's */
    w[k] = (unsigned char)(rnd() & 0xF) | 0x50;
    in[k] = (unsigned char)(rnd() & 0xF);
    t[k] = (unsigned char)(rnd() & 0x3);
    b[k] = (unsigned char)(rnd() & 0x1) | 0xA0;
    f[k] = (unsigned char)(rnd() & 0xF);
  }
  for (int i = 0; i < 4; i++)
    sc[i] = (unsigned char)(120 + rnd() % 14); /* 2^-7 .. 2^6 */
  run_ok(&r);
  double ref[64];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 16; j++) {
      int k = i * 16 + j;
      int wv = w[k] & 0xF, iv = (in[k] & 0x8) ? (int)(in[k] & 0xF) - 16 : (int)(in[k] & 0xF);
      int tv = t[k] & 3, bv = b[k] & 1;
      ref[k] = (wv - 8.0) * ldexp(1.0, sc[i] - 127) + e2m1[f[k] & 0xF] + iv * 16 + tv * 2 + bv;
      assert_true(get(&r, po, (size_t)k) == (double)(float)ref[k]);
      int sum = wv + iv; /* wraps into int4 */
      int wrapped = ((sum & 0xF) ^ 0x8) - 0x8;
      assert_int_equal(geti(&r, pp, (size_t)k), wrapped);
      double q = e2m1[f[k] & 0xF] * 3.0, qa = fabs(q); /* round to the FP4 grid, ties to even codes */
      double want = qa > 5.0 ? 6.0 : qa >= 3.5 ? 4.0 : qa > 2.5 ? 3.0 : qa >= 1.75 ? 2.0 : qa > 1.25 ? 1.5
                  : qa >= 0.75 ? 1.0 : qa > 0.25 ? 0.5 : 0.0;
      assert_true(fabs(get(&r, pq, (size_t)k)) == want);
      assert_int_equal(geti(&r, pr, (size_t)k), (tv - bv) & 3);
    }
  free_run(&r);

  /* a dynamic innermost extent of a packed tensor must make whole bytes */
  load_sq(&r,
          "{'tlir': 1, 'name': 'k', 'params': [{'name': 'n', 'kind': 'scalar', 'dtype': 'int32'},"
          " {'name': 'W', 'kind': 'tensor', 'dtype': 'uint4', 'shape': [2, 'n']}],"
          " 'kernel': {'grid': [1], 'threads': 32, 'block_vars': ['bx'], 'body': ['W[0, 0] = 1']}}",
          NULL);
  set_int(&r, "n", 7);
  int64_t shape[TL_MAX_DIMS];
  assert_int_equal(tl_tensor_shape(r.prog, 1, r.args, shape, &r.err), TL_INVALID_ARG);
  assert_string_equal(r.err.pointer, "/params/1/shape/1");
  assert_non_null(strstr(r.err.message, "not a multiple of 2"));
  set_int(&r, "n", 8);
  assert_int_equal(tl_tensor_shape(r.prog, 1, r.args, shape, &r.err), TL_OK);
  free_run(&r);
}

int main(void) {
  const char *s = getenv("TL_SEED");
  uint64_t seed = s && *s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
  rng_state = seed;
  fprintf(stderr, "test_interp: random seed %" PRIu64 " (TL_SEED=%" PRIu64 " repeats this run)\n", seed, seed);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(packed_types),
      cmocka_unit_test(w4a16_examples),
      cmocka_unit_test(lockstep),          cmocka_unit_test(masked_if_and_loops),
      cmocka_unit_test(global_out_of_range), cmocka_unit_test(runtime_errors),
      cmocka_unit_test(parallel_independence), cmocka_unit_test(store_conversions),
      cmocka_unit_test(arithmetic),        cmocka_unit_test(reduce_cumsum),
      cmocka_unit_test(atomic_add),        cmocka_unit_test(gemm_variants),
      cmocka_unit_test(allocation_poison), cmocka_unit_test(tilus_add_one),
      cmocka_unit_test(kernels_in_order), cmocka_unit_test(cross_block),
      cmocka_unit_test(tilus_matmul),      cmocka_unit_test(gemm_examples),
      cmocka_unit_test(dequant_examples),  cmocka_unit_test(flash_examples),
      cmocka_unit_test(lowp_gemm_examples),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
