/*
 * test_hipdrv.c - the HIP loader (compiler/hipdrv.c) without an AMD GPU:
 *
 *   no_runtime      no libamdhip64 here: TL_NO_DEVICE naming every library
 *                   tried; a missing TL_LIBHIP, a library that is not HIP,
 *                   a file that is not a library
 *   open_rocm6      the fake runtime of tests/hip (built here with cc, a real
 *                   shared library loaded through TL_LIBHIP) with ROCm 6's
 *                   exports: the name and gcnArchName read from the R0600
 *                   layout, the plain hipGetDeviceProperties never called,
 *                   the attributes, other architectures
 *   open_rocm5      the fake with ROCm 5's exports: the old layout
 *   open_errors     no device, hipInit failing, an ordinal out of range, no
 *                   architecture name
 *   load_launch     a code object loaded and its kernel found; the
 *                   arguments packed for hipModuleLaunchKernel as the fake
 *                   received them, and its CPU "kernel" computing from them;
 *                   the launch checks; memory, streams, events; a fault
 *                   reported at the next synchronisation; nothing leaked
 *   load_checks     images refused before the runtime sees them (not ELF,
 *                   a cubin, a bundle, relocatable, truncated, another
 *                   architecture) and the runtime's own refusals
 *   threads         one handle used from four threads at once
 *   real_hsaco      where clang 19 and ld.lld are installed: the mach table
 *                   against the e_flags clang writes, and a real linked
 *                   HSACO through the checks and the fake's loader
 *
 * What only an AMD GPU can show: that ROCm's own libamdhip64 answers as the
 * fake does (tests/gpu is where that belongs).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../compiler/hipdrv.h"
#define FAKE_HIP_BUILDER
#include "../hip/fake_amdhip64.h"

static char tmpdir[256];
static char fake6[512], fake5[512];
static char skip_reason[512];

static const char *src_dir(void) {
  const char *s = getenv("TL_SRCDIR");
  return s && *s ? s : ".";
}

static void reset_env(void) {
  unsetenv("FAKE_HIP_DEVICES");
  unsetenv("FAKE_HIP_ARCH");
  unsetenv("FAKE_HIP_INIT_ERROR");
  unsetenv("TL_LIBHIP");
}

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tl-test-hipdrv-XXXXXX");
  if (!mkdtemp(tmpdir))
    return -1;
  int r = fake_hip_build(src_dir(), tmpdir, "libamdhip64.so.6", "", fake6, sizeof fake6, skip_reason,
                         sizeof skip_reason);
  if (r == 0)
    r = fake_hip_build(src_dir(), tmpdir, "libamdhip64.so.5", "-DFAKE_ROCM5", fake5, sizeof fake5,
                       skip_reason, sizeof skip_reason);
  if (r < 0) {
    fprintf(stderr, "%s\n", skip_reason);
    return -1;
  }
  if (r > 0) {
    fake6[0] = fake5[0] = 0;
    printf("%s: the tests that load it are skipped\n", skip_reason);
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  DIR *d = opendir(tmpdir);
  if (d) {
    struct dirent *e;
    char path[600];
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
        unlink(path);
      }
    closedir(d);
  }
  rmdir(tmpdir);
  return 0;
}

/* Skips the calling test when the fakes could not be built. */
#define NEED_FAKE()                                                                          \
  do {                                                                                       \
    if (!fake6[0]) {                                                                         \
      printf("skipping: %s\n", skip_reason);                                                 \
      skip();                                                                                \
    }                                                                                        \
  } while (0)

/* The fake's own functions, for reading what it received. */
typedef struct fake_api {
  void *lib;
  fake_hip_last_launch_fn last_launch;
  fake_hip_set_arg_sizes_fn set_arg_sizes;
  fake_hip_calls_fn calls;
  fake_hip_live_fn live;
} fake_api;

static fake_api fake_open(const char *path) {
  fake_api f;
  f.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(f.lib);
  *(void **)&f.last_launch = dlsym(f.lib, "fake_hip_last_launch");
  *(void **)&f.set_arg_sizes = dlsym(f.lib, "fake_hip_set_arg_sizes");
  *(void **)&f.calls = dlsym(f.lib, "fake_hip_calls");
  *(void **)&f.live = dlsym(f.lib, "fake_hip_live");
  assert_true(f.last_launch && f.set_arg_sizes && f.calls && f.live);
  return f;
}

static tl_gpu *open_fake(const char *path) {
  setenv("TL_LIBHIP", path, 1);
  tl_gpu *h = NULL;
  tl_error err;
  tl_status st = tl_gpu_open(TL_GPU_HIP, 0, &h, &err);
  if (st != TL_OK)
    fail_msg("tl_gpu_open with %s: %s", path, err.message);
  return h;
}

/* ---- no runtime ------------------------------------------------------------------ */

static void test_no_runtime(void **state) {
  (void)state;
  reset_env();
  tl_gpu *h = (tl_gpu *)1;
  tl_error err;
  tl_status st = tl_gpu_open(TL_GPU_HIP, 0, &h, &err);
  bool device_here = st == TL_OK;
  if (device_here) {
    printf("skipping the no-runtime case: a HIP device is here (%s, %s)\n",
           tl_gpu_device_info(h)->name, tl_gpu_arch_name(h));
    tl_gpu_close(h);
  } else {
    assert_int_equal(st, TL_NO_DEVICE);
    assert_int_equal(err.code, TL_NO_DEVICE);
    assert_null(h);
    printf("tl_gpu_open: %s\n", err.message);
    if (strncmp(err.message, "no HIP runtime (libamdhip64.so.6, ", 34) == 0)
      assert_string_equal(err.message,
                          "no HIP runtime (libamdhip64.so.6, libamdhip64.so.5, libamdhip64.so, "
                          "/opt/rocm/lib/libamdhip64.so.6, /opt/rocm/lib/libamdhip64.so.5, "
                          "/opt/rocm/lib/libamdhip64.so not found)");
    else /* ROCm installed: a runtime without a GPU, or one that does not load */
      assert_true(strncmp(err.message, "no HIP device", 13) == 0 ||
                  strncmp(err.message, "no HIP runtime (", 16) == 0 ||
                  strncmp(err.message, "no usable HIP runtime (", 23) == 0);
  }
  /* TL_LIBHIP names the only library tried */
  setenv("TL_LIBHIP", "/nonexistent/libamdhip64.so.6", 1);
  assert_int_equal(tl_gpu_open(TL_GPU_HIP, 0, &h, &err), TL_NO_DEVICE);
  assert_null(h);
  assert_string_equal(err.message, "no HIP runtime (/nonexistent/libamdhip64.so.6 not found)");
  /* a library that is not the HIP runtime */
  setenv("TL_LIBHIP", "libm.so.6", 1);
  assert_int_equal(tl_gpu_open(TL_GPU_HIP, 0, &h, &err), TL_NO_DEVICE);
  assert_string_equal(err.message, "no usable HIP runtime (libm.so.6 lacks hipGetErrorName)");
  /* a file that is not a library at all */
  char path[600];
  snprintf(path, sizeof path, "%s/tests/hip/fake_amdhip64.c", src_dir());
  setenv("TL_LIBHIP", path, 1);
  assert_int_equal(tl_gpu_open(TL_GPU_HIP, 0, &h, &err), TL_NO_DEVICE);
  assert_null(h);
  assert_non_null(strstr(err.message, "cannot be loaded: "));
  assert_non_null(strstr(err.message, "fake_amdhip64.c"));
  reset_env();
  /* bad arguments */
  assert_int_equal(tl_gpu_open(TL_GPU_HIP, -1, &h, &err), TL_INVALID_ARG);
  assert_int_equal(tl_gpu_open(TL_GPU_HIP, 0, NULL, &err), TL_INVALID_ARG);
  tl_gpu_close(NULL);
  assert_string_equal(tl_gpu_arch_name(NULL), "");
  assert_null(tl_gpu_device_info(NULL));
  if (device_here) /* the rest ran; the answer without a runtime was not checked */
    skip();
}

/* ---- opening the fake -------------------------------------------------------------- */

static void test_open_rocm6(void **state) {
  (void)state;
  NEED_FAKE();
  reset_env();
  fake_api f = fake_open(fake6);
  int r0600 = f.calls("hipGetDevicePropertiesR0600"), plain = f.calls("hipGetDeviceProperties");
  tl_gpu *h = open_fake(fake6);
  const tl_gpu_device *d = tl_gpu_device_info(h);
  assert_string_equal(tl_gpu_arch_name(h), "gfx90a");
  assert_string_equal(d->arch_name, "gfx90a");
  assert_string_equal(d->target_id, "gfx90a:sramecc+:xnack-");
  assert_string_equal(d->name, "AMD Instinct MI210 (fake)");
  assert_string_equal(d->library, fake6);
  assert_int_equal(d->props_layout, 600);
  assert_int_equal(d->runtime_version, 60032830);
  assert_true(d->total_memory == ((size_t)64 << 30));
  /* ROCm 6's symbol, and never the plain one (the old layout in ROCm 6) */
  assert_int_equal(f.calls("hipGetDevicePropertiesR0600"), r0600 + 1);
  assert_int_equal(f.calls("hipGetDeviceProperties"), plain);
  assert_int_equal(f.calls("hipGetDevicePropertiesR0000"), 0);
  /* the numbers, from hipDeviceGetAttribute */
  assert_int_equal(d->ordinal, 0);
  assert_int_equal(d->multiprocessors, 104);
  assert_int_equal(d->max_threads_per_block, 1024);
  assert_int_equal(d->max_block_dim[0], 1024);
  assert_int_equal(d->max_block_dim[2], 1024);
  assert_int_equal(d->max_grid_dim[1], 2147483647);
  assert_int_equal(d->max_shared_per_block, 65536);
  assert_int_equal(d->max_registers_per_block, 65536);
  assert_int_equal(d->warp_size, 64);
  tl_gpu_close(h);

  /* RDNA: another name, wavefront 32, a name without features */
  setenv("FAKE_HIP_ARCH", "gfx1100", 1);
  h = open_fake(fake6);
  assert_string_equal(tl_gpu_arch_name(h), "gfx1100");
  assert_string_equal(tl_gpu_device_info(h)->target_id, "gfx1100");
  assert_int_equal(tl_gpu_device_info(h)->warp_size, 32);
  tl_gpu_close(h);
  setenv("FAKE_HIP_ARCH", "gfx942:sramecc+:xnack-", 1);
  h = open_fake(fake6);
  assert_string_equal(tl_gpu_arch_name(h), "gfx942");
  tl_gpu_close(h);
  /* the second of two devices */
  setenv("FAKE_HIP_DEVICES", "2", 1);
  setenv("TL_LIBHIP", fake6, 1);
  tl_error err;
  assert_int_equal(tl_gpu_open(TL_GPU_HIP, 1, &h, &err), TL_OK);
  assert_int_equal(tl_gpu_device_info(h)->ordinal, 1);
  tl_gpu_close(h);
  reset_env();
  dlclose(f.lib);
}

static void test_open_rocm5(void **state) {
  (void)state;
  NEED_FAKE();
  reset_env();
  fake_api f = fake_open(fake5);
  assert_null(dlsym(f.lib, "hipGetDevicePropertiesR0600"));
  tl_gpu *h = open_fake(fake5);
  const tl_gpu_device *d = tl_gpu_device_info(h);
  assert_string_equal(d->arch_name, "gfx90a");
  assert_string_equal(d->target_id, "gfx90a:sramecc+:xnack-");
  assert_string_equal(d->name, "AMD Instinct MI210 (fake)");
  assert_int_equal(d->props_layout, 0);
  assert_int_equal(d->runtime_version, 50731921);
  assert_true(d->total_memory == ((size_t)64 << 30));
  assert_int_equal(f.calls("hipGetDeviceProperties"), 1);
  tl_gpu_close(h);
  dlclose(f.lib);
  reset_env();
}

static void test_open_errors(void **state) {
  (void)state;
  NEED_FAKE();
  reset_env();
  tl_gpu *h = (tl_gpu *)1;
  tl_error err;
  char want[700];
  setenv("TL_LIBHIP", fake6, 1);
  setenv("FAKE_HIP_DEVICES", "0", 1);
  assert_int_equal(tl_gpu_open(TL_GPU_HIP, 0, &h, &err), TL_NO_DEVICE);
  assert_null(h);
  snprintf(want, sizeof want, "no HIP device (%s)", fake6);
  assert_string_equal(err.message, want);
  unsetenv("FAKE_HIP_DEVICES");
  setenv("FAKE_HIP_INIT_ERROR", "35", 1);
  assert_int_equal(tl_gpu_open(TL_GPU_HIP, 0, &h, &err), TL_NO_DEVICE);
  assert_string_equal(err.message,
                      "no HIP device: the runtime did not initialise: hipInit: "
                      "hipErrorInsufficientDriver (driver version is insufficient for runtime "
                      "version)");
  setenv("FAKE_HIP_INIT_ERROR", "4242", 1);
  assert_int_equal(tl_gpu_open(TL_GPU_HIP, 0, &h, &err), TL_NO_DEVICE);
  assert_non_null(strstr(err.message, "hipInit: hipErrorUnknown (unknown error)"));
  unsetenv("FAKE_HIP_INIT_ERROR");
  setenv("FAKE_HIP_DEVICES", "2", 1);
  assert_int_equal(tl_gpu_open(TL_GPU_HIP, 3, &h, &err), TL_INVALID_ARG);
  assert_null(h);
  assert_string_equal(err.message, "there is no HIP device 3 (2 devices: 0 to 1)");
  unsetenv("FAKE_HIP_DEVICES");
  static const char *const bad_arch[] = {"", "ZZZZ", "gfx", "gfx90a!:xnack-", "sm_90"};
  for (size_t i = 0; i < sizeof bad_arch / sizeof *bad_arch; i++) {
    setenv("FAKE_HIP_ARCH", bad_arch[i], 1);
    assert_int_equal(tl_gpu_open(TL_GPU_HIP, 0, &h, &err), TL_DEVICE);
    assert_null(h);
    assert_non_null(strstr(err.message, "reports no architecture name"));
  }
  reset_env();
}

/* ---- code objects and launches ----------------------------------------------------- */

static const char *const kernels[] = {"fake_axpy", "fake_fault", "other"};

static unsigned char *code_object(unsigned mach, size_t *n) {
  unsigned char *b = fake_hip_code_object(3, 224, 0x500 | mach, kernels, 3, n);
  assert_non_null(b);
  return b;
}

static void test_load_launch(void **state) {
  (void)state;
  NEED_FAKE();
  reset_env();
  fake_api f = fake_open(fake6);
  int allocs0 = f.live("allocations"), modules0 = f.live("modules");
  tl_gpu *h = open_fake(fake6);
  tl_error err;
  size_t n;
  unsigned char *image = code_object(0x3f, &n);
  tl_gpu_module *m = NULL;
  assert_int_equal(tl_gpu_load(h, image, n, &m, &err), TL_OK);
  free(image); /* the runtime keeps its own copy */
  assert_int_equal(f.live("modules"), modules0 + 1);
  tl_gpu_func *fn = NULL, *again = NULL;
  assert_int_equal(tl_gpu_function(m, "fake_axpy", &fn, &err), TL_OK);
  assert_int_equal(tl_gpu_function(m, "fake_axpy", &again, &err), TL_OK);
  assert_ptr_equal(fn, again);
  assert_int_equal(tl_gpu_function(m, "fake_axp", &again, &err), TL_NOT_FOUND);
  assert_null(again);
  assert_string_equal(err.message, "the module has no kernel named 'fake_axp'");
  assert_int_equal(tl_gpu_function(m, "", &again, &err), TL_INVALID_ARG);
  tl_gpu_func_attrs a;
  assert_int_equal(tl_gpu_function_attrs(fn, &a, &err), TL_OK);
  assert_int_equal(a.num_regs, 42);
  assert_int_equal(a.shared_bytes, 1024);
  assert_int_equal(a.local_bytes, 16);
  assert_int_equal(a.max_threads, 256);
  assert_int_equal(a.max_dynamic_shared, 65536 - 1024);
  assert_int_equal(a.binary_version, 5);

  /* memory and a launch whose arguments the fake computes from */
  enum { N = 1000 };
  float x[N], y[N], want[N], got[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)i * 0.5f;
    y[i] = 3.0f - (float)i;
  }
  tl_gpu_ptr dx = 0, dy = 0;
  assert_int_equal(tl_gpu_alloc(h, sizeof x, &dx, &err), TL_OK);
  assert_int_equal(tl_gpu_alloc(h, sizeof y, &dy, &err), TL_OK);
  assert_int_equal(dx % 256, 0);
  assert_int_equal(tl_gpu_upload(h, dx, x, sizeof x, &err), TL_OK);
  assert_int_equal(tl_gpu_upload(h, dy, y, sizeof y, &err), TL_OK);
  tl_gpu_stream s = NULL;
  assert_int_equal(tl_gpu_stream_create(h, &s, &err), TL_OK);
  assert_non_null(s);
  float alpha = 2.5f;
  int count = N;
  void *args[] = {&dy, &dx, &alpha, &count};
  int sizes[] = {8, 8, 4, 4};
  f.set_arg_sizes(sizes, 4);
  fake_hip_launch before, after;
  f.last_launch(&before);
  unsigned grid[3] = {4, 1, 1}, block[3] = {256, 1, 1};
  assert_int_equal(tl_gpu_launch(fn, grid, block, 2048, s, args, &err), TL_OK);
  assert_int_equal(tl_gpu_stream_sync(h, s, &err), TL_OK);
  f.last_launch(&after);
  assert_int_equal(after.count, before.count + 1);
  assert_string_equal(after.kernel, "fake_axpy");
  assert_int_equal(after.grid[0], 4);
  assert_int_equal(after.grid[1], 1);
  assert_int_equal(after.block[0], 256);
  assert_int_equal(after.block[2], 1);
  assert_int_equal(after.shared_bytes, 2048);
  assert_ptr_equal(after.stream, s);
  assert_int_equal(after.extra_given, 0);
  assert_int_equal(after.nargs, 4);
  assert_memory_equal(after.args[0], &dy, 8);
  assert_memory_equal(after.args[1], &dx, 8);
  assert_memory_equal(after.args[2], &alpha, 4);
  assert_memory_equal(after.args[3], &count, 4);
  assert_int_equal(tl_gpu_download(h, got, dy, sizeof got, &err), TL_OK);
  for (int i = 0; i < N; i++)
    want[i] = y[i] + alpha * x[i];
  assert_memory_equal(got, want, sizeof want);
  /* a grid that covers only part of n: the rest untouched */
  assert_int_equal(tl_gpu_upload(h, dy, y, sizeof y, &err), TL_OK);
  grid[0] = 1;
  block[0] = 100;
  assert_int_equal(tl_gpu_launch(fn, grid, block, 0, NULL, args, &err), TL_OK);
  assert_int_equal(tl_gpu_sync(h, &err), TL_OK);
  assert_int_equal(tl_gpu_download(h, got, dy, sizeof got, &err), TL_OK);
  assert_true(got[99] == y[99] + alpha * x[99] && got[100] == y[100]);
  f.last_launch(&after);
  assert_null(after.stream);

  /* the checks before launching: nothing reaches the runtime */
  f.last_launch(&before);
  unsigned zero[3] = {0, 1, 1}, one[3] = {1, 1, 1};
  assert_int_equal(tl_gpu_launch(fn, zero, block, 0, NULL, args, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "zero dimension"));
  unsigned big_block[3] = {512, 1, 1};
  assert_int_equal(tl_gpu_launch(fn, one, big_block, 0, NULL, args, &err), TL_LIMIT);
  assert_string_equal(err.message, "block of 512 threads for fake_axpy is over its limit of 256 by 256");
  unsigned wide[3] = {16777216, 1, 1};
  assert_int_equal(tl_gpu_launch(fn, wide, block, 0, NULL, args, &err), TL_OK); /* 1677721600 work-items */
  block[0] = 256;
  assert_int_equal(tl_gpu_launch(fn, wide, block, 0, NULL, args, &err), TL_LIMIT);
  assert_string_equal(err.message,
                      "grid dimension x of fake_axpy spans 4294967296 work-items (16777216 blocks "
                      "of 256), over the 4294967295 an AMD dispatch can count by 1");
  unsigned tall[3] = {1, 16777216, 1};
  unsigned tall_block[3] = {1, 256, 1};
  assert_int_equal(tl_gpu_launch(fn, tall, tall_block, 0, NULL, args, &err), TL_LIMIT);
  assert_non_null(strstr(err.message, "grid dimension y"));
  assert_int_equal(tl_gpu_launch(fn, one, block, 65536 - 1024, NULL, args, &err), TL_OK);
  assert_int_equal(tl_gpu_launch(fn, one, block, 65536 - 1023, NULL, args, &err), TL_LIMIT);
  assert_string_equal(err.message,
                      "fake_axpy needs 65537 bytes of LDS (1024 static + 64513 dynamic), over "
                      "the device's 65536 per workgroup by 1");
  assert_int_equal(tl_gpu_launch(NULL, one, block, 0, NULL, args, &err), TL_INVALID_ARG);
  f.last_launch(&after);
  assert_int_equal(after.count, before.count + 2); /* the two that were accepted */
  assert_int_equal(tl_gpu_sync(h, &err), TL_OK);

  /* a fault shows at the next synchronisation, in the runtime's words */
  tl_gpu_func *fault = NULL;
  assert_int_equal(tl_gpu_function(m, "fake_fault", &fault, &err), TL_OK);
  assert_int_equal(tl_gpu_launch(fault, one, one, 0, NULL, NULL, &err), TL_OK);
  assert_int_equal(tl_gpu_sync(h, &err), TL_DEVICE);
  assert_string_equal(err.message,
                      "hipDeviceSynchronize: hipErrorIllegalAddress (an illegal memory access was "
                      "encountered)");
  assert_int_equal(tl_gpu_sync(h, &err), TL_OK);

  /* memset, failures of memory calls, events */
  assert_int_equal(tl_gpu_memset8(h, dx, 0x7f, sizeof x, &err), TL_OK);
  unsigned char bytes[16];
  assert_int_equal(tl_gpu_download(h, bytes, dx, sizeof bytes, &err), TL_OK);
  assert_int_equal(bytes[0], 0x7f);
  assert_int_equal(bytes[15], 0x7f);
  tl_gpu_ptr huge = 1;
  assert_int_equal(tl_gpu_alloc(h, (size_t)1 << 40, &huge, &err), TL_DEVICE);
  assert_int_equal(huge, 0);
  assert_string_equal(err.message, "hipMalloc of 1099511627776 bytes: hipErrorOutOfMemory (out of memory)");
  assert_int_equal(tl_gpu_alloc(h, 0, &huge, &err), TL_INVALID_ARG);
  assert_int_equal(tl_gpu_upload(h, 0, x, 4, &err), TL_DEVICE); /* the runtime's answer to NULL */
  assert_non_null(strstr(err.message, "hipMemcpyHtoD: hipErrorInvalidValue"));
  assert_int_equal(tl_gpu_upload(h, dx, NULL, 4, &err), TL_INVALID_ARG);
  assert_int_equal(tl_gpu_upload(h, dx, x, 0, &err), TL_OK);
  tl_gpu_event *e0 = NULL, *e1 = NULL;
  assert_int_equal(tl_gpu_event_create(h, &e0, &err), TL_OK);
  assert_int_equal(tl_gpu_event_create(h, &e1, &err), TL_OK);
  assert_int_equal(tl_gpu_event_record(e0, s, &err), TL_OK);
  assert_int_equal(tl_gpu_event_record(e1, s, &err), TL_OK);
  float ms = -1;
  assert_int_equal(tl_gpu_event_elapsed(e0, e1, &ms, &err), TL_OK);
  assert_true(ms >= 0);
  assert_int_equal(tl_gpu_event_elapsed(e0, NULL, &ms, &err), TL_INVALID_ARG);
  tl_gpu_event_destroy(e0);
  tl_gpu_event_destroy(e1);
  tl_gpu_event_destroy(NULL);

  tl_gpu_stream_destroy(h, s);
  tl_gpu_stream_destroy(h, NULL);
  tl_gpu_free(h, dx);
  tl_gpu_free(h, dy);
  tl_gpu_free(h, 0);
  tl_gpu_unload(m);
  tl_gpu_unload(NULL);
  assert_int_equal(f.live("allocations"), allocs0);
  assert_int_equal(f.live("modules"), modules0);
  assert_int_equal(f.live("streams"), 0);
  assert_int_equal(f.live("events"), 0);
  tl_gpu_close(h);
  dlclose(f.lib);
  reset_env();
}

static void put(unsigned char *p, uint64_t v, int bytes) { fake_put(p, v, bytes); }

static void test_load_checks(void **state) {
  (void)state;
  NEED_FAKE();
  reset_env();
  fake_api f = fake_open(fake6);
  tl_gpu *h = open_fake(fake6);
  tl_error err;
  tl_gpu_module *m = (tl_gpu_module *)1;
  int loads = f.calls("hipModuleLoadData");
  size_t n;
  unsigned char *good = code_object(0x3f, &n);

  /* not code objects */
  const char ptx[] = "//\n// Generated by NVIDIA NVVM Compiler\n.version 8.0\n.target sm_90\n"
                     "..........................................................";
  assert_int_equal(tl_gpu_load(h, ptx, sizeof ptx - 1, &m, &err), TL_UNSUPPORTED);
  assert_null(m);
  assert_non_null(strstr(err.message, "not an ELF code object (it looks like PTX text)"));
  unsigned char *cubin = fake_hip_code_object(2, 190, 0x5a, kernels, 1, &n);
  assert_int_equal(tl_gpu_load(h, cubin, n, &m, &err), TL_UNSUPPORTED);
  assert_string_equal(err.message,
                      "the image is an ELF for machine 190 (a CUDA cubin), not an AMDGPU code object (224)");
  free(cubin);
  unsigned char *rel = fake_hip_code_object(1, 224, 0x53f, kernels, 1, &n);
  assert_int_equal(tl_gpu_load(h, rel, n, &m, &err), TL_UNSUPPORTED);
  assert_non_null(strstr(err.message, "(a relocatable object), not a linked one"));
  free(rel);
  char bundle[200] = "__CLANG_OFFLOAD_BUNDLE__";
  assert_int_equal(tl_gpu_load(h, bundle, sizeof bundle, &m, &err), TL_UNSUPPORTED);
  assert_non_null(strstr(err.message, "offload bundle"));
  unsigned char *b32 = code_object(0x3f, &n);
  b32[4] = 1; /* ELFCLASS32 */
  assert_int_equal(tl_gpu_load(h, b32, n, &m, &err), TL_UNSUPPORTED);
  assert_non_null(strstr(err.message, "little-endian ELF64"));
  free(b32);

  /* another architecture, known by its EF_AMDGPU_MACH */
  unsigned char *other = code_object(0x4c, &n);
  assert_int_equal(tl_gpu_load(h, other, n, &m, &err), TL_UNSUPPORTED);
  assert_string_equal(err.message, "the code object is for gfx942; this GPU is gfx90a");
  free(other);

  /* every truncation of a good image is refused before the runtime reads it */
  unsigned char *cut = malloc(n);
  assert_non_null(cut);
  for (size_t len = 1; len < n; len++) {
    memcpy(cut, good, len);
    tl_status st = tl_gpu_load(h, cut, len, &m, &err);
    assert_true(st == TL_CORRUPT || st == TL_UNSUPPORTED);
    assert_null(m);
  }
  free(cut);
  /* headers or sections that point past the end */
  unsigned char *bad = malloc(n);
  assert_non_null(bad);
  static const struct {
    size_t at;
    int bytes;
    uint64_t value;
    const char *says;
  } edits[] = {
      {60, 2, 0xffff, "ELF headers reach past"},                 /* e_shnum */
      {40, 8, UINT64_MAX - 32, "ELF headers reach past"},        /* e_shoff: overflow */
      {56, 2, 3, "ELF headers reach past"},                      /* e_phnum with phoff 0, size 0 */
      {58, 2, 8, "ELF headers reach past"},                      /* e_shentsize too small */
  };
  for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
    memcpy(bad, good, n);
    put(bad + edits[i].at, edits[i].value, edits[i].bytes);
    assert_int_equal(tl_gpu_load(h, bad, n, &m, &err), TL_CORRUPT);
    assert_non_null(strstr(err.message, edits[i].says));
  }
  uint64_t shoff = 0;
  for (int i = 7; i >= 0; i--)
    shoff = shoff << 8 | good[40 + i];
  memcpy(bad, good, n);
  put(bad + shoff + 64 + 32, 1u << 20, 8); /* the string table's sh_size */
  assert_int_equal(tl_gpu_load(h, bad, n, &m, &err), TL_CORRUPT);
  char want[300];
  snprintf(want, sizeof want, "section 1 of the code object reaches past its %zu bytes", n);
  assert_string_equal(err.message, want);
  memcpy(bad, good, n);
  put(bad + shoff + 64 + 4, 8, 4); /* SHT_NOBITS: its size takes no bytes */
  put(bad + shoff + 64 + 32, 1u << 20, 8);
  assert_int_equal(tl_gpu_load(h, bad, n, &m, &err), TL_OK);
  tl_gpu_unload(m);
  free(bad);
  assert_int_equal(f.calls("hipModuleLoadData"), loads + 1);

  /* the runtime's refusals, translated */
  unsigned char *unknown = code_object(0x01, &n); /* a mach the table does not know */
  assert_int_equal(tl_gpu_load(h, unknown, n, &m, &err), TL_DEVICE);
  assert_null(m);
  snprintf(want, sizeof want,
           "hipModuleLoadData (code object of %zu bytes, on gfx90a): hipErrorNoBinaryForGpu (no "
           "kernel image is available for execution on the device)",
           n);
  assert_string_equal(err.message, want);
  free(unknown);
  static const char *const refuse[] = {"fake:refuse"};
  unsigned char *refused = fake_hip_code_object(3, 224, 0x53f, refuse, 1, &n);
  assert_int_equal(tl_gpu_load(h, refused, n, &m, &err), TL_DEVICE);
  assert_non_null(strstr(err.message, "hipErrorSharedObjectInitFailed (shared object initialization failed)"));
  free(refused);

  /* arguments */
  assert_int_equal(tl_gpu_load(h, NULL, 10, &m, &err), TL_INVALID_ARG);
  assert_int_equal(tl_gpu_load(h, good, 0, &m, &err), TL_INVALID_ARG);
  assert_int_equal(tl_gpu_load(h, good, (size_t)TL_GPU_MAX_IMAGE + 1, &m, &err), TL_TOO_LARGE);
  assert_int_equal(tl_gpu_load(h, good, n, NULL, &err), TL_INVALID_ARG);
  free(good);
  assert_int_equal(f.live("modules"), 0);
  tl_gpu_close(h);
  dlclose(f.lib);
  reset_env();
}

static void test_mach_table(void **state) {
  (void)state;
  assert_int_equal(tl_hip_mach_of("gfx90a"), 0x3f);
  assert_int_equal(tl_hip_mach_of("gfx942"), 0x4c);
  assert_int_equal(tl_hip_mach_of("gfx950"), 0x4f);
  assert_int_equal(tl_hip_mach_of("gfx1100"), 0x41);
  assert_int_equal(tl_hip_mach_of("gfx1201"), 0x4e);
  assert_int_equal(tl_hip_mach_of("gfx9000"), -1);
  assert_int_equal(tl_hip_mach_of(NULL), -1);
  assert_string_equal(tl_hip_arch_of_mach(0x3f), "gfx90a");
  assert_null(tl_hip_arch_of_mach(0x01));
}

/* ---- threads ---------------------------------------------------------------------- */

typedef struct job {
  tl_gpu *h;
  tl_gpu_func *fn;
  int id;
  char why[TL_ERROR_MESSAGE_MAX + 64];
} job;

static void *worker(void *arg) {
  job *j = arg;
  tl_error err;
  enum { N = 512 };
  float x[N], y[N], got[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i + j->id);
    y[i] = (float)j->id;
  }
  tl_gpu_ptr dx = 0, dy = 0;
  float a = (float)j->id + 1;
  int count = N;
  void *args[] = {&dy, &dx, &a, &count};
  unsigned grid[3] = {2, 1, 1}, block[3] = {256, 1, 1};
  for (int round = 0; round < 50 && !j->why[0]; round++) {
    if (tl_gpu_alloc(j->h, sizeof x, &dx, &err) != TL_OK || tl_gpu_alloc(j->h, sizeof y, &dy, &err) != TL_OK ||
        tl_gpu_upload(j->h, dx, x, sizeof x, &err) != TL_OK || tl_gpu_upload(j->h, dy, y, sizeof y, &err) != TL_OK ||
        tl_gpu_launch(j->fn, grid, block, 0, NULL, args, &err) != TL_OK ||
        tl_gpu_download(j->h, got, dy, sizeof got, &err) != TL_OK) {
      snprintf(j->why, sizeof j->why, "%s", err.message);
    }
    for (int i = 0; i < N && !j->why[0]; i++)
      if (got[i] != y[i] + a * x[i])
        snprintf(j->why, sizeof j->why, "round %d: y[%d] = %g, want %g", round, i, got[i], y[i] + a * x[i]);
    tl_gpu_free(j->h, dx);
    tl_gpu_free(j->h, dy);
    dx = dy = 0;
  }
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  NEED_FAKE();
  reset_env();
  fake_api f = fake_open(fake6);
  int allocs0 = f.live("allocations");
  tl_gpu *h = open_fake(fake6);
  tl_error err;
  size_t n;
  unsigned char *image = code_object(0x3f, &n);
  tl_gpu_module *m = NULL;
  assert_int_equal(tl_gpu_load(h, image, n, &m, &err), TL_OK);
  free(image);
  tl_gpu_func *fn = NULL;
  assert_int_equal(tl_gpu_function(m, "fake_axpy", &fn, &err), TL_OK);
  job jobs[4];
  pthread_t tid[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (job){.h = h, .fn = fn, .id = i};
    assert_int_equal(pthread_create(&tid[i], NULL, worker, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_join(tid[i], NULL), 0);
  for (int i = 0; i < 4; i++)
    if (jobs[i].why[0])
      fail_msg("thread %d: %s", i, jobs[i].why);
  tl_gpu_unload(m);
  assert_int_equal(f.live("allocations"), allocs0);
  tl_gpu_close(h);
  dlclose(f.lib);
  reset_env();
}

/* ---- a real code object from clang ------------------------------------------------- */

static void test_real_hsaco(void **state) {
  (void)state;
  NEED_FAKE();
  reset_env();
  const char *clang = NULL, *lld = NULL;
  static const char *const clangs[] = {"clang-19", "clang-20", "clang"};
  static const char *const llds[] = {"ld.lld-19", "ld.lld-20", "ld.lld"};
  char cmd[1600];
  for (int i = 0; i < 3 && !clang; i++) {
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1 && command -v %s >/dev/null 2>&1", clangs[i], llds[i]);
    if (system(cmd) == 0) {
      clang = clangs[i];
      lld = llds[i];
    }
  }
  if (!clang) {
    printf("skipping: no clang 19 with ld.lld to make a real code object\n");
    skip();
  }
  char src[600];
  snprintf(src, sizeof src, "%s/real.hip", tmpdir);
  FILE *fp = fopen(src, "w");
  assert_non_null(fp);
  fputs("extern \"C\" __attribute__((global)) void real_scale(float *p, float a, int n) {\n"
        "  int i = __builtin_amdgcn_workgroup_id_x() * 256 + __builtin_amdgcn_workitem_id_x();\n"
        "  if (i < n) p[i] *= a;\n"
        "}\n",
        fp);
  fclose(fp);
  static const char *const archs[] = {"gfx90a", "gfx942", "gfx1100"};
  for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) {
    snprintf(cmd, sizeof cmd,
             "%s -x hip --cuda-device-only -nogpulib -nogpuinc --offload-arch=%s -O2 "
             "-fhip-emit-relocatable -c '%s' -o '%s/real_%s.o' && %s -shared '%s/real_%s.o' -o "
             "'%s/real_%s.hsaco'",
             clang, archs[i], src, tmpdir, archs[i], lld, tmpdir, archs[i], tmpdir, archs[i]);
    if (system(cmd) != 0) {
      printf("skipping: %s cannot build for %s: %s\n", clang, archs[i], cmd);
      skip();
    }
    char path[600];
    snprintf(path, sizeof path, "%s/real_%s.hsaco", tmpdir, archs[i]);
    FILE *in = fopen(path, "rb");
    assert_non_null(in);
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    assert_true(n > 64 && n < sizeof buf);
    unsigned flags = (unsigned)buf[48] | (unsigned)buf[49] << 8;
    assert_int_equal(flags & 0xff, tl_hip_mach_of(archs[i]));
    /* through the checks and the fake's loader, on a GPU of that architecture */
    setenv("FAKE_HIP_ARCH", archs[i], 1);
    tl_gpu *h = open_fake(fake6);
    tl_error err;
    tl_gpu_module *m = NULL;
    if (tl_gpu_load(h, buf, n, &m, &err) != TL_OK)
      fail_msg("loading the %s code object: %s", archs[i], err.message);
    tl_gpu_func *fn = NULL;
    assert_int_equal(tl_gpu_function(m, "real_scale", &fn, &err), TL_OK);
    tl_gpu_unload(m);
    /* and refused on another */
    const char *other = i == 0 ? "gfx942" : "gfx90a";
    tl_gpu_close(h);
    setenv("FAKE_HIP_ARCH", other, 1);
    h = open_fake(fake6);
    assert_int_equal(tl_gpu_load(h, buf, n, &m, &err), TL_UNSUPPORTED);
    assert_non_null(strstr(err.message, archs[i]));
    tl_gpu_close(h);
    printf("%s: %zu bytes, e_flags 0x%x, loaded and refused as it should be\n", archs[i], n, flags);
  }
  reset_env();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_runtime),   cmocka_unit_test(test_open_rocm6),
      cmocka_unit_test(test_open_rocm5),   cmocka_unit_test(test_open_errors),
      cmocka_unit_test(test_load_launch),  cmocka_unit_test(test_load_checks),
      cmocka_unit_test(test_mach_table),   cmocka_unit_test(test_threads),
      cmocka_unit_test(test_real_hsaco),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
