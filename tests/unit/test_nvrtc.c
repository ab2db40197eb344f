/*
 * test_nvrtc.c - unit tests of the NVIDIA toolchain and driver plumbing:
 * compiler/nvrtc.c (NVRTC through dlopen) checked against compiler/cubin.c
 * and ptxas's own report, and compiler/cudadrv.c on a machine without a GPU.
 *
 * The NVRTC tests compile real kernels with the installed NVRTC and skip,
 * with a message saying why, when there is none.  What they check comes
 * from independent sources: the cubin's headers (tl_cubin_inspect), the
 * PTX text, and the resource report ptxas writes into the log.  The "no
 * toolchain" path is tested everywhere by pointing TL_NVRTC at paths that
 * hold no NVRTC.  The CUDA driver test asserts TL_NO_DEVICE where no GPU is
 * present, and skips visibly where one is (tests/gpu/ covers that case).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudadrv.h"
#include "cubin.h"
#include "nvrtc.h"

/* ---- fixtures ------------------------------------------------------- */

static const char add_one_src[] =
    "extern \"C\" __global__ void add_one(float *a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) a[i] += 1.0f;\n"
    "}\n";

/* Static shared memory, a dynamically indexed local array (a stack
 * frame), launch bounds, and a non-inlined device function. */
static const char resources_src[] =
    "__device__ __noinline__ float helper(float x) { return x * x + 1.0f; }\n"
    "extern \"C\" __global__ void __launch_bounds__(256) big(float *a, int n) {\n"
    "  __shared__ float sm[1024];\n"
    "  float acc[64];\n"
    "  int t = threadIdx.x;\n"
    "  for (int i = 0; i < 64; i++) acc[i] = a[(t * i + n) % 4096];\n"
    "  sm[t] = acc[t % 64];\n"
    "  __syncthreads();\n"
    "  float s = 0;\n"
    "  for (int i = 0; i < 64; i++) s += acc[(i * 7 + n) & 63] * sm[(t + i) & 1023];\n"
    "  a[t] = helper(s);\n"
    "}\n"
    "extern \"C\" __global__ void small(double *b) {\n"
    "  __shared__ double q[10];\n"
    "  q[threadIdx.x % 10] = b[threadIdx.x];\n"
    "  __syncthreads();\n"
    "  b[threadIdx.x] = q[(threadIdx.x + 1) % 10];\n"
    "}\n"
    "extern \"C\" __global__ void plain(int *c) { c[threadIdx.x] = threadIdx.x; }\n";

static tl_nvrtc *nv;            /* NULL when NVRTC is missing */
static char nv_missing[TL_ERROR_MESSAGE_MAX];

static int group_setup(void **state) {
  (void)state;
  tl_error err;
  /* TL_NVRTC is honoured: TL_NVRTC=/nonexistent runs these tests as on a
   * machine without NVRTC. */
  if (tl_nvrtc_open(&nv, &err) != TL_OK) {
    assert_int_equal(err.code, TL_NO_TOOLCHAIN);
    snprintf(nv_missing, sizeof nv_missing, "%s", err.message);
    fprintf(stderr, "NOTE: NVRTC tests will skip: %s\n", nv_missing);
  }
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  tl_nvrtc_close(nv);
  nv = NULL;
  return 0;
}

#define NEED_NVRTC()                                                                         \
  do {                                                                                       \
    if (!nv) {                                                                               \
      printf("skipping: %s\n", nv_missing);                                                  \
      skip();                                                                                \
    }                                                                                        \
  } while (0)

/* Compiles src for target, asserting success. */
static void compile_ok(const char *src, const char *target, tl_nvrtc_result *res) {
  tl_error err;
  tl_error_clear(&err);
  tl_status st = tl_nvrtc_compile(nv, src, "kernel.cu", target, NULL, 0, res, &err);
  if (st != TL_OK)
    fail_msg("compiling for %s: %s", target, err.message);
  assert_non_null(res->code);
  assert_true(res->code_size > 0);
  assert_non_null(res->log);
  assert_string_equal(res->target, target);
  assert_true(res->wall_ms > 0.0);
}

static int in_list(const char *const *list, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(list[i], s) == 0)
      return 1;
  return 0;
}

/* ---- ptxas report parsing (no NVRTC needed) --------------------------- */

static void test_ptxas_stats_parse(void **state) {
  (void)state;
  /* A log as NVRTC 13.0 wrote it for resources_src on sm_90a. */
  const char *log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'small' for 'sm_90a'\n"
      "ptxas info    : Function properties for small\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 14 registers, used 1 barriers, 80 bytes smem\n"
      "ptxas info    : Compile time = 3.394 ms\n"
      "ptxas info    : Compiling entry function 'big' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z6helperf\n"
      "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Function properties for big\n"
      "ptxas         .     256 bytes stack frame, 12 bytes spill stores, 20 bytes spill loads\n"
      "ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, "
      "4096 bytes smem\n"
      "ptxas info    : Compile time = 44.024 ms\n"
      "ptxas info    : Compiling entry function 'bigger' for 'sm_90a'\n"
      "ptxas info    : Function properties for bigger\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 6 registers, 360 bytes cmem[0]\n";
  tl_ptxas_stats s;
  tl_error err;
  assert_int_equal(tl_ptxas_stats_parse(log, "big", &s, &err), TL_OK);
  assert_int_equal(s.registers, 32);
  assert_int_equal(s.stack_frame_bytes, 256);
  assert_int_equal(s.spill_store_bytes, 12);
  assert_int_equal(s.spill_load_bytes, 20);
  assert_int_equal(s.shared_bytes, 4096);
  assert_int_equal(s.barriers, 1);
  assert_int_equal(tl_ptxas_stats_parse(log, "small", &s, &err), TL_OK);
  assert_int_equal(s.registers, 14);
  assert_int_equal(s.shared_bytes, 80);
  assert_int_equal(s.stack_frame_bytes, 0);
  assert_int_equal(tl_ptxas_stats_parse(log, "bigger", &s, &err), TL_OK);
  assert_int_equal(s.registers, 6);
  assert_int_equal(s.shared_bytes, 0);
  assert_int_equal(s.barriers, 0);
  assert_int_equal(tl_ptxas_stats_parse(log, "bi", &s, &err), TL_NOT_FOUND);
  assert_non_null(strstr(err.message, "'bi'"));
  assert_int_equal(tl_ptxas_stats_parse("", "big", &s, &err), TL_NOT_FOUND);
  assert_int_equal(tl_ptxas_stats_parse(log, NULL, &s, &err), TL_INVALID_ARG);
}

/* ---- opening, and NVRTC missing ---------------------------------------- */

static void test_missing_toolchain(void **state) {
  (void)state;
  char dir[] = "/tmp/tl_nvrtc_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char notlib[sizeof dir + 32];
  snprintf(notlib, sizeof notlib, "%s/libnvrtc.so.13", dir);
  FILE *f = fopen(notlib, "w");
  assert_non_null(f);
  fputs("this is not a shared library\n", f);
  fclose(f);

  const char *orig = getenv("TL_NVRTC");
  char *saved = orig ? strdup(orig) : NULL;
  tl_nvrtc *h = (tl_nvrtc *)&h; /* must be reset to NULL */
  tl_error err;
  setenv("TL_NVRTC", "/nonexistent/libnvrtc.so.13", 1);
  assert_int_equal(tl_nvrtc_open(&h, &err), TL_NO_TOOLCHAIN);
  assert_null(h);
  assert_int_equal(err.code, TL_NO_TOOLCHAIN);
  assert_non_null(strstr(err.message, "/nonexistent/libnvrtc.so.13 (not found)"));
  assert_non_null(strstr(err.message, "TL_NVRTC"));

  /* A directory: each name in it is tried; one is there but not a library. */
  setenv("TL_NVRTC", dir, 1);
  assert_int_equal(tl_nvrtc_open(&h, &err), TL_NO_TOOLCHAIN);
  assert_null(h);
  char want[sizeof dir + 64];
  snprintf(want, sizeof want, "%s/libnvrtc.so.13 (not a shared library)", dir);
  assert_non_null(strstr(err.message, want));
  snprintf(want, sizeof want, "%s/libnvrtc.so.11 (not found)", dir);
  assert_non_null(strstr(err.message, want));

  /* A real shared library that is not NVRTC. */
  setenv("TL_NVRTC", "libm.so.6", 1);
  assert_int_equal(tl_nvrtc_open(&h, &err), TL_NO_TOOLCHAIN);
  assert_non_null(strstr(err.message, "libm.so.6 (lacks nvrtcGetErrorString)"));

  setenv("TL_NVRTC", "", 1);
  assert_int_equal(tl_nvrtc_open(&h, &err), TL_NO_TOOLCHAIN);
  assert_non_null(strstr(err.message, "TL_NVRTC is set but empty"));
  if (saved)
    setenv("TL_NVRTC", saved, 1);
  else
    unsetenv("TL_NVRTC");
  free(saved);

  assert_int_equal(tl_nvrtc_open(NULL, &err), TL_INVALID_ARG);
  tl_nvrtc_close(NULL); /* accepted */
  unlink(notlib);
  rmdir(dir);
}

static void test_override_path(void **state) {
  (void)state;
  NEED_NVRTC();
  /* TL_NVRTC naming the library that was found. */
  const char *orig = getenv("TL_NVRTC");
  char *saved = orig ? strdup(orig) : NULL;
  setenv("TL_NVRTC", tl_nvrtc_library(nv), 1);
  tl_nvrtc *h = NULL;
  tl_error err;
  tl_status st = tl_nvrtc_open(&h, &err);
  if (saved)
    setenv("TL_NVRTC", saved, 1);
  else
    unsetenv("TL_NVRTC");
  free(saved);
  if (st != TL_OK)
    fail_msg("%s", err.message);
  assert_string_equal(tl_nvrtc_library(h), tl_nvrtc_library(nv));
  int a, b, c, d;
  tl_nvrtc_version(h, &a, &b);
  tl_nvrtc_version(nv, &c, &d);
  assert_int_equal(a, c);
  assert_int_equal(b, d);
  tl_nvrtc_close(h);
}

/* ---- version and targets ---------------------------------------------- */

static void test_version_and_targets(void **state) {
  (void)state;
  NEED_NVRTC();
  int major = 0, minor = -1;
  tl_nvrtc_version(nv, &major, &minor);
  assert_true(major >= 11);
  assert_true(minor >= 0);
  const char *const *list = NULL;
  size_t n = 0;
  tl_error err;
  assert_int_equal(tl_nvrtc_targets(nv, &list, &n, &err), TL_OK);
  assert_true(n >= 4);
  printf("NVRTC %d.%d (%s) accepts %zu targets:", major, minor, tl_nvrtc_library(nv), n);
  for (size_t i = 0; i < n; i++)
    printf(" %s", list[i]);
  printf("\n");
  for (size_t i = 0; i < n; i++) {
    tl_target t;
    assert_int_equal(tl_target_parse(list[i], &t, &err), TL_OK);
    assert_true(tl_nvrtc_accepts(nv, list[i]));
    for (size_t j = i + 1; j < n; j++)
      assert_string_not_equal(list[i], list[j]);
    /* every sm_ target has its compute_ twin */
    if (t.binary == TL_BINARY_CUBIN) {
      char twin[TL_NVRTC_TARGET_MAX];
      snprintf(twin, sizeof twin, "compute_%s", list[i] + 3);
      assert_true(in_list(list, n, twin));
    }
  }
  /* What the project needs (issue 3), for the NVRTC versions that have it. */
  static const char *const need[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "compute_80"};
  for (size_t i = 0; i < sizeof need / sizeof *need; i++)
    assert_true(in_list(list, n, need[i]));
  if (major >= 13) {
    assert_true(in_list(list, n, "sm_100a"));
    assert_true(in_list(list, n, "sm_120"));
    assert_true(in_list(list, n, "sm_120a"));
  }
  /* Variants that do not exist are not offered. */
  assert_false(in_list(list, n, "sm_80a"));
  assert_false(in_list(list, n, "sm_90f"));
  assert_false(tl_nvrtc_accepts(nv, "sm_80a"));
  assert_false(tl_nvrtc_accepts(nv, "sm_99"));
  assert_false(tl_nvrtc_accepts(nv, "nonsense"));
  assert_int_equal(tl_nvrtc_targets(nv, NULL, &n, &err), TL_INVALID_ARG);
}

/* A variant asked about before the whole list is probed alone (a fresh
 * `tlc compile --target sm_90a` pays one probe); the answers and the list
 * built afterwards are those of a handle that probed everything first. */
static void test_variant_probed_alone(void **state) {
  (void)state;
  NEED_NVRTC();
  tl_nvrtc *fresh = NULL;
  tl_error err;
  assert_int_equal(tl_nvrtc_open(&fresh, &err), TL_OK);
  static const char *const asked[] = {"sm_90a", "compute_90a", "sm_90f", "sm_80a", "sm_100f", "sm_120a"};
  for (size_t i = 0; i < sizeof asked / sizeof *asked; i++)
    assert_int_equal(tl_nvrtc_accepts(fresh, asked[i]), tl_nvrtc_accepts(nv, asked[i]));
  const char *const *a = NULL, *const *b = NULL;
  size_t na = 0, nb = 0;
  assert_int_equal(tl_nvrtc_targets(fresh, &a, &na, &err), TL_OK);
  assert_int_equal(tl_nvrtc_targets(nv, &b, &nb, &err), TL_OK);
  assert_int_equal(na, nb);
  for (size_t i = 0; i < na; i++)
    assert_string_equal(a[i], b[i]);
  tl_nvrtc_close(fresh);
}

/* ---- compiling --------------------------------------------------------- */

/* Compiles add_one for an sm_ target and checks the cubin and the log. */
static void check_add_one_cubin(const char *target, int arch, int arch_specific) {
  tl_nvrtc_result res = {0};
  compile_ok(add_one_src, target, &res);
  assert_false(res.is_ptx);
  tl_cubin_info info;
  tl_error err;
  tl_status st = tl_cubin_inspect(res.code, res.code_size, &info, &err);
  if (st != TL_OK)
    fail_msg("%s: %s", target, err.message);
  assert_int_equal(info.arch, arch);
  assert_int_equal(info.arch_specific, arch_specific);
  assert_string_equal(info.target, target);
  assert_int_equal(tl_cubin_check_target(&info, target, &err), TL_OK);
  assert_int_equal(info.nkernels, 1);
  const tl_cubin_kernel *k = tl_cubin_find(&info, "add_one");
  assert_non_null(k);
  assert_true(k->registers > 0);
  assert_int_equal(k->shared_bytes, 0);
  assert_int_equal(k->local_bytes, 0);
  assert_int_equal(k->param_bytes, 12); /* float * and int */
  assert_true(k->code_bytes > 0);
  assert_non_null(strstr(info.toolkit, "Cuda compilation tools"));
  /* ptxas's report in the log says the same. */
  tl_ptxas_stats ps;
  assert_int_equal(tl_ptxas_stats_parse(res.log, "add_one", &ps, &err), TL_OK);
  assert_int_equal(ps.registers, k->registers);
  assert_int_equal(ps.stack_frame_bytes, 0);
  assert_int_equal(ps.spill_store_bytes, 0);
  printf("%s: %zu bytes of cubin, %d registers, %.1f ms\n", target, res.code_size, k->registers,
         res.wall_ms);
  tl_cubin_info_free(&info);
  tl_nvrtc_result_free(&res);
  assert_null(res.code);
  assert_null(res.log);
}

static void test_compile_sm80(void **state) {
  (void)state;
  NEED_NVRTC();
  check_add_one_cubin("sm_80", 80, 0);
}

static void test_compile_sm90a(void **state) {
  (void)state;
  NEED_NVRTC();
  check_add_one_cubin("sm_90a", 90, 1);
  check_add_one_cubin("sm_90", 90, 0);
}

static void test_compile_ptx(void **state) {
  (void)state;
  NEED_NVRTC();
  tl_nvrtc_result res = {0};
  compile_ok(add_one_src, "compute_80", &res);
  assert_true(res.is_ptx);
  const char *ptx = (const char *)res.code;
  assert_int_equal(strlen(ptx), res.code_size); /* NUL-terminated, not counted */
  assert_non_null(strstr(ptx, ".entry add_one"));
  assert_non_null(strstr(ptx, ".target sm_80"));
  assert_non_null(strstr(ptx, ".address_size 64"));
  /* PTX is not a cubin. */
  tl_cubin_info info;
  tl_error err;
  assert_int_equal(tl_cubin_inspect(res.code, res.code_size, &info, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "no ELF magic"));
  tl_nvrtc_result_free(&res);
}

static void test_compile_error(void **state) {
  (void)state;
  NEED_NVRTC();
  const char *src = "extern \"C\" __global__ void broken(float *a) {\n"
                    "  int i = threadIdx.x;\n"
                    "  a[i] = undefined_thing + 1.0f;\n"
                    "}\n";
  tl_nvrtc_result res = {0};
  tl_error err;
  tl_status st = tl_nvrtc_compile(nv, src, "kernel.cu", "sm_80", NULL, 0, &res, &err);
  assert_int_equal(st, TL_TOOLCHAIN);
  assert_int_equal(err.code, TL_TOOLCHAIN);
  assert_null(res.code);
  assert_non_null(res.log);
  assert_int_equal(strlen(res.log), res.log_len);
  assert_non_null(strstr(res.log, "kernel.cu(3): error"));
  assert_non_null(strstr(res.log, "undefined_thing"));
  assert_non_null(strstr(err.message, "kernel.cu(3): error"));
  assert_non_null(strstr(err.message, "for sm_80"));
  tl_nvrtc_result_free(&res);
  /* ptxas refusing what the front end accepted: the message leads with
   * ptxas's error, not with its verbose report. */
  const char *too_big = "extern \"C\" __global__ void hog(float *a) {\n"
                        "  __shared__ float s[20000];\n"
                        "  s[threadIdx.x] = a[threadIdx.x]; __syncthreads();\n"
                        "  a[threadIdx.x] = s[threadIdx.x ^ 1];\n"
                        "}\n";
  assert_int_equal(tl_nvrtc_compile(nv, too_big, "hog.cu", "sm_80", NULL, 0, &res, &err),
                   TL_TOOLCHAIN);
  printf("ptxas refusal: %s\n", err.message);
  assert_non_null(strstr(err.message, "too much shared data"));
  assert_non_null(strstr(err.message, "ptxas error"));
  assert_null(strstr(err.message, "ptxas info"));
  assert_non_null(strstr(res.log, "too much shared data"));
  tl_nvrtc_result_free(&res);
  /* The same with nowhere to put the result. */
  assert_int_equal(tl_nvrtc_compile(nv, src, NULL, "compute_80", NULL, 0, NULL, &err), TL_TOOLCHAIN);
  assert_non_null(strstr(err.message, "kernel.cu(3): error"));
}

static void test_bad_arguments(void **state) {
  (void)state;
  NEED_NVRTC();
  tl_nvrtc_result res = {0};
  tl_error err;
  /* A well-formed target this NVRTC does not accept: the message lists those it does. */
  assert_int_equal(tl_nvrtc_compile(nv, add_one_src, NULL, "sm_99", NULL, 0, &res, &err),
                   TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "target sm_99 is not accepted by NVRTC"));
  assert_non_null(strstr(err.message, "sm_80"));
  assert_non_null(strstr(err.message, "sm_90a"));
  assert_non_null(strstr(err.message, "compute_80"));
  assert_null(res.code);
  assert_null(res.log);
  assert_int_equal(tl_nvrtc_compile(nv, add_one_src, NULL, "sm_80a", NULL, 0, &res, &err),
                   TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "sm_80a is not accepted"));
  assert_int_equal(tl_nvrtc_compile(nv, add_one_src, NULL, "sm80", NULL, 0, &res, &err),
                   TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "'sm80' is not a target name"));
  /* Options: naming the architecture, unknown to NVRTC, too many. */
  const char *arch_opt[] = {"-arch=sm_90"};
  assert_int_equal(tl_nvrtc_compile(nv, add_one_src, NULL, "sm_80", arch_opt, 1, &res, &err),
                   TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "names the architecture"));
  const char *bad_opt[] = {"--no-such-option-here"};
  assert_int_equal(tl_nvrtc_compile(nv, add_one_src, NULL, "sm_80", bad_opt, 1, &res, &err),
                   TL_INVALID_ARG);
  assert_non_null(res.log);
  assert_non_null(strstr(res.log, "no-such-option-here"));
  tl_nvrtc_result_free(&res);
  const char *opts[TL_NVRTC_MAX_OPTS + 1];
  for (int i = 0; i <= TL_NVRTC_MAX_OPTS; i++)
    opts[i] = "-lineinfo";
  assert_int_equal(
      tl_nvrtc_compile(nv, add_one_src, NULL, "sm_80", opts, TL_NVRTC_MAX_OPTS + 1, &res, &err),
      TL_LIMIT);
  assert_int_equal(tl_nvrtc_compile(nv, add_one_src, NULL, "sm_80", opts, -1, &res, &err), TL_LIMIT);
  /* A good extra option works. */
  const char *ok_opt[] = {"-lineinfo", "-DUNUSED=1"};
  assert_int_equal(tl_nvrtc_compile(nv, add_one_src, NULL, "sm_80", ok_opt, 2, &res, &err), TL_OK);
  tl_nvrtc_result_free(&res);
  /* Missing pieces. */
  assert_int_equal(tl_nvrtc_compile(nv, NULL, NULL, "sm_80", NULL, 0, &res, &err), TL_INVALID_ARG);
  assert_int_equal(tl_nvrtc_compile(nv, add_one_src, NULL, NULL, NULL, 0, &res, &err),
                   TL_INVALID_ARG);
  assert_int_equal(tl_nvrtc_compile(nv, add_one_src, "", "sm_80", NULL, 0, &res, &err),
                   TL_INVALID_ARG);
  assert_int_equal(tl_nvrtc_compile(NULL, add_one_src, NULL, "sm_80", NULL, 0, &res, &err),
                   TL_INVALID_ARG);
  /* Source over the limit. */
  size_t big = (size_t)TL_NVRTC_MAX_SOURCE + 16;
  char *huge = malloc(big + 1);
  assert_non_null(huge);
  memset(huge, ' ', big);
  huge[big] = 0;
  assert_int_equal(tl_nvrtc_compile(nv, huge, NULL, "sm_80", NULL, 0, &res, &err), TL_TOO_LARGE);
  free(huge);
  tl_nvrtc_result_free(NULL);
}

/* The ELF reader's figures against ptxas's report, kernel by kernel, on
 * several architectures (the shared-memory window rule differs by arch). */
static void test_resources_match_ptxas(void **state) {
  (void)state;
  NEED_NVRTC();
  static const char *const targets[] = {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a",
                                        "sm_100a", "sm_120"};
  static const char *const kernels[] = {"big", "small", "plain"};
  int tried = 0;
  for (size_t ti = 0; ti < sizeof targets / sizeof *targets; ti++) {
    if (!tl_nvrtc_accepts(nv, targets[ti]))
      continue;
    tried++;
    tl_nvrtc_result res = {0};
    compile_ok(resources_src, targets[ti], &res);
    tl_cubin_info info;
    tl_error err;
    if (tl_cubin_inspect(res.code, res.code_size, &info, &err) != TL_OK)
      fail_msg("%s: %s", targets[ti], err.message);
    assert_string_equal(info.target, targets[ti]);
    assert_int_equal(info.nkernels, 3); /* helper is not a kernel */
    for (size_t ki = 0; ki < 3; ki++) {
      const tl_cubin_kernel *k = tl_cubin_find(&info, kernels[ki]);
      assert_non_null(k);
      tl_ptxas_stats ps;
      assert_int_equal(tl_ptxas_stats_parse(res.log, kernels[ki], &ps, &err), TL_OK);
      printf("%-7s %-5s regs %3d (ptxas %3ld)  smem %5u [section %5u] (ptxas %5ld)  "
             "local %4u (ptxas %4ld)\n",
             targets[ti], kernels[ki], k->registers, ps.registers, k->shared_bytes,
             k->shared_section_bytes, ps.shared_bytes, k->local_bytes, ps.stack_frame_bytes);
      assert_int_equal(k->registers, ps.registers);
      assert_int_equal(k->shared_bytes, ps.shared_bytes);
      assert_int_equal(k->local_bytes, ps.stack_frame_bytes);
    }
    const tl_cubin_kernel *big = tl_cubin_find(&info, "big");
    assert_int_equal(big->shared_bytes, 4096);
    assert_true(big->local_bytes >= 256); /* acc[64] lives in local memory */
    assert_int_equal(big->max_threads[0], 256);
    assert_int_equal(big->max_threads[1], 1);
    assert_int_equal(big->max_threads[2], 1);
    assert_int_equal(big->barriers, 1);
    const tl_cubin_kernel *small = tl_cubin_find(&info, "small");
    assert_int_equal(small->shared_bytes, 80);
    assert_int_equal(small->max_threads[0], 0);
    assert_int_equal(tl_cubin_find(&info, "plain")->shared_bytes, 0);
    assert_null(tl_cubin_find(&info, "helper"));
    assert_null(tl_cubin_find(&info, "_Z6helperf"));
    tl_cubin_info_free(&info);
    tl_nvrtc_result_free(&res);
  }
  assert_true(tried >= 3);
}

/* Several threads compiling on one fresh handle (racing the lazy probe). */
typedef struct job {
  tl_nvrtc *h;
  const char *target;
  int arch, accel;
  int ok;
  char why[TL_ERROR_MESSAGE_MAX];
} job;

static void *compile_job(void *arg) {
  job *j = arg;
  for (int rep = 0; rep < 2; rep++) {
    tl_nvrtc_result res = {0};
    tl_error err;
    if (tl_nvrtc_compile(j->h, add_one_src, "kernel.cu", j->target, NULL, 0, &res, &err) != TL_OK) {
      snprintf(j->why, sizeof j->why, "%s", err.message);
      return NULL;
    }
    tl_cubin_info info;
    if (tl_cubin_inspect(res.code, res.code_size, &info, &err) != TL_OK) {
      snprintf(j->why, sizeof j->why, "%s", err.message);
      tl_nvrtc_result_free(&res);
      return NULL;
    }
    int good = info.arch == j->arch && info.arch_specific == j->accel &&
               tl_cubin_find(&info, "add_one") != NULL;
    tl_cubin_info_free(&info);
    tl_nvrtc_result_free(&res);
    if (!good) {
      snprintf(j->why, sizeof j->why, "wrong cubin for %s", j->target);
      return NULL;
    }
  }
  j->ok = 1;
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  NEED_NVRTC();
  tl_nvrtc *h = NULL;
  tl_error err;
  assert_int_equal(tl_nvrtc_open(&h, &err), TL_OK);
  job jobs[4] = {{h, "sm_90a", 90, 1, 0, ""},
                 {h, "sm_80", 80, 0, 0, ""},
                 {h, "sm_90a", 90, 1, 0, ""},
                 {h, "sm_86", 86, 0, 0, ""}};
  pthread_t tid[4];
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&tid[i], NULL, compile_job, &jobs[i]), 0);
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_join(tid[i], NULL), 0);
  for (int i = 0; i < 4; i++)
    if (!jobs[i].ok)
      fail_msg("thread %d (%s): %s", i, jobs[i].target, jobs[i].why);
  tl_nvrtc_close(h);
}

/* ---- the CUDA driver on a machine without a GPU ------------------------ */

static void test_cuda_no_device(void **state) {
  (void)state;
  tl_gpu *h = NULL;
  tl_error err;
  unsetenv("TL_LIBCUDA");
  tl_status st = tl_gpu_open(TL_GPU_CUDA, 0, &h, &err);
  if (st == TL_OK) {
    printf("skipping: a CUDA device is present (%s, sm_%d); tests/gpu/run.sh covers it\n",
           tl_gpu_device_info(h)->name, tl_gpu_arch(h));
    tl_gpu_close(h);
    skip();
  }
  assert_int_equal(st, TL_NO_DEVICE);
  assert_int_equal(err.code, TL_NO_DEVICE);
  assert_null(h);
  printf("tl_gpu_open: %s\n", err.message);
  /* No driver at all (this CI), a driver with no GPU, or a driver that does
   * not start: each says so in its first words. */
  assert_true(strcmp(err.message, "no CUDA driver (libcuda.so.1 not found)") == 0 ||
              strncmp(err.message, "no CUDA device", 14) == 0 ||
              strncmp(err.message, "no CUDA driver (libcuda.so.1 ", 29) == 0);
}

static void test_cuda_missing_library(void **state) {
  (void)state;
  tl_gpu *h = NULL;
  tl_error err;
  setenv("TL_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  assert_int_equal(tl_gpu_open(TL_GPU_CUDA, 0, &h, &err), TL_NO_DEVICE);
  assert_null(h);
  assert_string_equal(err.message, "no CUDA driver (/nonexistent/libcuda.so.1 not found)");
  /* A library that is not the driver. */
  setenv("TL_LIBCUDA", "libm.so.6", 1);
  assert_int_equal(tl_gpu_open(TL_GPU_CUDA, 0, &h, &err), TL_NO_DEVICE);
  assert_non_null(strstr(err.message, "libm.so.6 lacks cuGetErrorName"));
  /* The toolkit's stub library, where installed: loads, resolves, refuses. */
  static const char *const stubs[] = {"/usr/local/cuda/lib64/stubs/libcuda.so",
                                      "/usr/local/cuda/lib/stubs/libcuda.so"};
  for (size_t i = 0; i < sizeof stubs / sizeof *stubs; i++) {
    if (access(stubs[i], R_OK) != 0)
      continue;
    setenv("TL_LIBCUDA", stubs[i], 1);
    assert_int_equal(tl_gpu_open(TL_GPU_CUDA, 0, &h, &err), TL_NO_DEVICE);
    assert_null(h);
    printf("with the stub: %s\n", err.message);
    assert_non_null(strstr(err.message, "stub library"));
    break;
  }
  unsetenv("TL_LIBCUDA");
  assert_int_equal(tl_gpu_open(TL_GPU_CUDA, -1, &h, &err), TL_INVALID_ARG);
  assert_int_equal(tl_gpu_open(TL_GPU_CUDA, 0, NULL, &err), TL_INVALID_ARG);
  tl_gpu_close(NULL);
  tl_gpu_unload(NULL);
  tl_gpu_event_destroy(NULL);
  tl_gpu_free(NULL, 0);
  assert_int_equal(tl_gpu_arch(NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ptxas_stats_parse),
      cmocka_unit_test(test_missing_toolchain),
      cmocka_unit_test(test_override_path),
      cmocka_unit_test(test_version_and_targets),
      cmocka_unit_test(test_variant_probed_alone),
      cmocka_unit_test(test_compile_sm80),
      cmocka_unit_test(test_compile_sm90a),
      cmocka_unit_test(test_compile_ptx),
      cmocka_unit_test(test_compile_error),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_resources_match_ptxas),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_cuda_no_device),
      cmocka_unit_test(test_cuda_missing_library),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
