/*
 * cuda_smoke.c - GPU smoke test of the NVIDIA plumbing: compiles small
 * self-contained kernels with NVRTC (compiler/nvrtc.c) for the device's own
 * architecture, reads the cubins (compiler/cubin.c), loads and launches them
 * through the driver API (compiler/cudadrv.c) on fresh random data, checks
 * every output element against a CPU loop, and checks that the resource
 * figures of three sources agree: the driver's cuFuncGetAttribute, the ELF
 * reader and ptxas's report in the NVRTC log.
 *
 * Needs only libc and libdl (the GPU machine has no jansson or sqlite
 * headers): tests/gpu/run.sh builds it from the .c files directly.
 *
 *   cuda_smoke [-d ORDINAL] [-s SEED] [-o DIR]
 *     -d  device ordinal (default 0)
 *     -s  seed of the random inputs (default: from the clock; printed)
 *     -o  directory to write the cubins and PTX it built into
 *
 * Exit status: 0 every check passed, 1 a check failed, 77 skipped (no CUDA
 * driver or device, or no NVRTC), 2 bad usage.  Lines starting "FAIL" say
 * what failed; "elf:" lines carry each kernel's figures for run.sh.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cudadrv.h"
#include "cubin.h"
#include "nvrtc.h"

/* The kernels: no includes, as the code generator's output will have none. */
static const char kernels_src[] =
    "extern \"C\" __global__ void add_one(float *a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) a[i] += 1.0f;\n"
    "}\n"
    "\n"
    "/* Each block reverses one chunk of `chunk` floats through dynamic shared\n"
    "   memory and scales element i by scale[i % 32] = 1 + i % 32, a table kept\n"
    "   in static shared memory. */\n"
    "extern \"C\" __global__ void rev_chunks(const float *in, float *out, int n, int chunk) {\n"
    "  extern __shared__ float buf[];\n"
    "  __shared__ float scale[32];\n"
    "  int base = blockIdx.x * chunk;\n"
    "  for (int i = threadIdx.x; i < chunk; i += blockDim.x)\n"
    "    buf[i] = base + i < n ? in[base + i] : 0.0f;\n"
    "  if (threadIdx.x < 32) scale[threadIdx.x] = 1.0f + (float)threadIdx.x;\n"
    "  __syncthreads();\n"
    "  for (int i = threadIdx.x; i < chunk; i += blockDim.x)\n"
    "    if (base + i < n) out[base + i] = buf[chunk - 1 - i] * scale[i % 32];\n"
    "}\n"
    "\n"
    "/* A dynamically indexed local array: a stack frame in local memory. */\n"
    "extern \"C\" __global__ void __launch_bounds__(128) stack_user(float *a, int n) {\n"
    "  float acc[64];\n"
    "  int t = threadIdx.x;\n"
    "  for (int i = 0; i < 64; i++) acc[i] = a[(t * i + n) % 4096];\n"
    "  float s = 0;\n"
    "  for (int i = 0; i < 64; i++) s += acc[(i * 7 + n) & 63];\n"
    "  a[t] = s;\n"
    "}\n";

static const char *const kernel_names[] = {"add_one", "rev_chunks", "stack_user"};
#define NKERNELS 3

static int failures;

#define CHECK(cond, ...)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                           \
      printf(__VA_ARGS__);                                                                   \
      printf("\n");                                                                          \
      failures++;                                                                            \
    }                                                                                        \
  } while (0)

/* Reports a failed call and counts it; returns 1 when st is TL_OK. */
static int ok(tl_status st, const tl_error *err, const char *what) {
  if (st == TL_OK)
    return 1;
  printf("FAIL %s: %s: %s\n", what, tl_status_name(st), err->message);
  failures++;
  return 0;
}

static uint64_t rng_state;
static float rnd(void) { /* xorshift64*, uniform in [-1000, 1000), never 0 */
  for (;;) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t x = rng_state * 2685821657736338717ull;
    float f = (float)((double)(x >> 11) / 9007199254740992.0 * 2000.0 - 1000.0);
    if (f != 0.0f)
      return f;
  }
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void save(const char *dir, const char *target, const void *bytes, size_t n, int ptx) {
  if (!dir)
    return;
  char path[4096];
  snprintf(path, sizeof path, "%s/smoke.%s.%s", dir, target, ptx ? "ptx" : "cubin");
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(bytes, 1, n, f) != n) {
    printf("note: cannot write %s: %s\n", path, strerror(errno));
  } else {
    printf("wrote %s\n", path);
  }
  if (f)
    fclose(f);
}

/* add_one on n random floats; exact comparison (x + 1.0f rounds the same
 * on both sides). */
static void run_add_one(tl_gpu *cu, tl_gpu_func *fn, const char *target) {
  const int n = 1000003; /* not a multiple of the block */
  size_t bytes = (size_t)n * sizeof(float);
  float *x = malloc(bytes), *y = malloc(bytes);
  tl_gpu_ptr d = 0;
  tl_error err;
  if (!x || !y) {
    printf("FAIL out of memory\n");
    failures++;
    goto out;
  }
  for (int i = 0; i < n; i++)
    x[i] = rnd();
  if (!ok(tl_gpu_alloc(cu, bytes, &d, &err), &err, "alloc") ||
      !ok(tl_gpu_upload(cu, d, x, bytes, &err), &err, "upload"))
    goto out;
  unsigned grid[3] = {(unsigned)((n + 255) / 256), 1, 1}, block[3] = {256, 1, 1};
  int nn = n;
  void *args[] = {&d, &nn};
  if (!ok(tl_gpu_launch(fn, grid, block, 0, NULL, args, &err), &err, "launch add_one") ||
      !ok(tl_gpu_sync(cu, &err), &err, "sync after add_one") ||
      !ok(tl_gpu_download(cu, y, d, bytes, &err), &err, "download"))
    goto out;
  int bad = 0;
  for (int i = 0; i < n; i++) {
    if (y[i] != x[i] + 1.0f) {
      if (bad < 5)
        printf("  add_one[%d] = %.9g, expected %.9g\n", i, (double)y[i], (double)(x[i] + 1.0f));
      bad++;
    }
  }
  CHECK(bad == 0, "%s add_one: %d of %d elements wrong", target, bad, n);
  /* Time 20 launches with events. */
  tl_gpu_event *e0 = NULL, *e1 = NULL;
  if (ok(tl_gpu_event_create(cu, &e0, &err), &err, "event") &&
      ok(tl_gpu_event_create(cu, &e1, &err), &err, "event")) {
    float ms = 0;
    tl_gpu_event_record(e0, NULL, &err);
    for (int r = 0; r < 20; r++)
      tl_gpu_launch(fn, grid, block, 0, NULL, args, &err);
    tl_gpu_event_record(e1, NULL, &err);
    if (ok(tl_gpu_event_elapsed(e0, e1, &ms, &err), &err, "elapsed"))
      printf("%s add_one: %d elements OK; %.4f ms per launch, %.0f GB/s\n", target, n, ms / 20,
             2.0 * (double)bytes / (ms / 20 * 1e-3) / 1e9);
  }
  tl_gpu_event_destroy(e0);
  tl_gpu_event_destroy(e1);
out:
  tl_gpu_free(cu, d);
  free(x);
  free(y);
}

/* rev_chunks with more than 48 KiB of dynamic shared memory, output
 * poisoned before the launch. */
static void run_rev_chunks(tl_gpu *cu, tl_gpu_func *fn, const char *target) {
  const tl_gpu_device *dev = tl_gpu_device_info(cu);
  int chunk = 16384; /* 64 KiB of floats */
  while (chunk > 1024 && (long)chunk * 4 + 1024 > dev->max_shared_per_block_optin)
    chunk /= 2;
  const int n = 3 * chunk + 777;
  size_t bytes = (size_t)n * sizeof(float);
  float *x = malloc(bytes), *y = malloc(bytes);
  tl_gpu_ptr din = 0, dout = 0;
  tl_error err;
  if (!x || !y) {
    printf("FAIL out of memory\n");
    failures++;
    goto out;
  }
  for (int i = 0; i < n; i++)
    x[i] = rnd();
  if (!ok(tl_gpu_alloc(cu, bytes, &din, &err), &err, "alloc") ||
      !ok(tl_gpu_alloc(cu, bytes, &dout, &err), &err, "alloc") ||
      !ok(tl_gpu_upload(cu, din, x, bytes, &err), &err, "upload") ||
      !ok(tl_gpu_memset8(cu, dout, 0xff, bytes, &err), &err, "poison"))
    goto out;
  unsigned grid[3] = {(unsigned)((n + chunk - 1) / chunk), 1, 1}, block[3] = {256, 1, 1};
  int nn = n, cc = chunk;
  void *args[] = {&din, &dout, &nn, &cc};
  tl_gpu_stream s = NULL;
  if (!ok(tl_gpu_stream_create(cu, &s, &err), &err, "stream"))
    goto out;
  if (ok(tl_gpu_launch(fn, grid, block, (unsigned)chunk * 4, s, args, &err), &err,
         "launch rev_chunks") &&
      ok(tl_gpu_stream_sync(cu, s, &err), &err, "stream sync") &&
      ok(tl_gpu_download(cu, y, dout, bytes, &err), &err, "download")) {
    int bad = 0;
    for (int i = 0; i < n; i++) {
      int base = i / chunk * chunk, k = i - base, j = base + chunk - 1 - k;
      float want = (j < n ? x[j] : 0.0f) * (1.0f + (float)(k % 32));
      if (memcmp(&y[i], &want, sizeof want) != 0) {
        if (bad < 5)
          printf("  rev_chunks[%d] = %.9g, expected %.9g\n", i, (double)y[i], (double)want);
        bad++;
      }
    }
    CHECK(bad == 0, "%s rev_chunks: %d of %d elements wrong", target, bad, n);
    if (bad == 0)
      printf("%s rev_chunks: %d elements OK with %d bytes of dynamic shared memory\n", target, n,
             chunk * 4);
  }
  tl_gpu_stream_destroy(cu, s);
  /* Refusals before the launch, saying by how much. */
  unsigned big_block[3] = {2048, 1, 1};
  tl_status st = tl_gpu_launch(fn, grid, big_block, 0, NULL, args, &err);
  CHECK(st == TL_LIMIT && strstr(err.message, "over its limit"),
        "block of 2048 threads: %s (%s)", tl_status_name(st), err.message);
  st = tl_gpu_launch(fn, grid, block, (unsigned)dev->max_shared_per_block_optin + 4096, NULL,
                      args, &err);
  CHECK(st == TL_LIMIT && strstr(err.message, "shared memory"), "too much shared memory: %s (%s)",
        tl_status_name(st), err.message);
  unsigned zero[3] = {0, 1, 1};
  st = tl_gpu_launch(fn, zero, block, 0, NULL, args, &err);
  CHECK(st == TL_INVALID_ARG, "zero grid: %s", tl_status_name(st));
out:
  tl_gpu_free(cu, din);
  tl_gpu_free(cu, dout);
  free(x);
  free(y);
}

/* Compiles, checks, loads and runs every kernel for one target. */
static void test_target(tl_nvrtc *nv, tl_gpu *cu, const char *target, const char *outdir) {
  printf("\n== %s\n", target);
  tl_nvrtc_result res = {0};
  tl_error err;
  if (!ok(tl_nvrtc_compile(nv, kernels_src, "smoke.cu", target, NULL, 0, &res, &err), &err,
          "compile")) {
    if (res.log && *res.log)
      printf("log:\n%s\n", res.log);
    tl_nvrtc_result_free(&res);
    return;
  }
  printf("compiled %s in %.1f ms: %zu bytes of %s\n", target, res.wall_ms, res.code_size,
         res.is_ptx ? "PTX" : "cubin");
  save(outdir, target, res.code, res.code_size, res.is_ptx);
  tl_cubin_info info = {0};
  int have_elf = 0;
  if (!res.is_ptx) {
    have_elf = ok(tl_cubin_inspect(res.code, res.code_size, &info, &err), &err, "inspect");
    if (have_elf) {
      CHECK(info.arch == tl_gpu_arch(cu), "cubin is for sm_%d, device is sm_%d", info.arch,
            tl_gpu_arch(cu));
      CHECK(tl_cubin_check_target(&info, target, &err) == TL_OK, "%s", err.message);
      printf("cubin: %s, ABI version %d, e_flags 0x%08x, %s\n", info.target, info.abi_version,
             (unsigned)info.e_flags, info.toolkit);
    }
  }
  tl_gpu_module *mod = NULL;
  double t0 = now_ms();
  if (!ok(tl_gpu_load(cu, res.code, res.code_size, &mod, &err), &err, "load")) {
    tl_cubin_info_free(&info);
    tl_nvrtc_result_free(&res);
    return;
  }
  printf("loaded in %.2f ms%s%s\n", now_ms() - t0, *tl_gpu_module_log(mod) ? "; JIT log: " : "",
         tl_gpu_module_log(mod));
  tl_gpu_func *fns[NKERNELS] = {0};
  for (int k = 0; k < NKERNELS; k++) {
    if (!ok(tl_gpu_function(mod, kernel_names[k], &fns[k], &err), &err, kernel_names[k]))
      continue;
    tl_gpu_func_attrs a;
    if (!ok(tl_gpu_function_attrs(fns[k], &a, &err), &err, "attributes"))
      continue;
    printf("driver: target=%s kernel=%s regs=%d shared=%d local=%d const=%d max_threads=%d "
           "ptx=%d binary=%d\n",
           target, kernel_names[k], a.num_regs, a.shared_bytes, a.local_bytes, a.const_bytes,
           a.max_threads, a.ptx_version, a.binary_version);
    CHECK(a.binary_version == tl_gpu_arch(cu) || res.is_ptx,
          "%s binary version %d on sm_%d", kernel_names[k], a.binary_version, tl_gpu_arch(cu));
    if (!have_elf)
      continue;
    const tl_cubin_kernel *ek = tl_cubin_find(&info, kernel_names[k]);
    CHECK(ek != NULL, "the ELF reader does not find %s", kernel_names[k]);
    if (!ek)
      continue;
    printf("elf: target=%s kernel=%s regs=%d shared=%u shared_section=%u local=%u "
           "max_threads=%u\n",
           target, kernel_names[k], ek->registers, ek->shared_bytes, ek->shared_section_bytes,
           ek->local_bytes, ek->max_threads[0]);
    CHECK(a.num_regs == ek->registers, "%s %s: registers: driver %d, ELF %d", target,
          kernel_names[k], a.num_regs, ek->registers);
    CHECK(a.local_bytes == (int)ek->local_bytes, "%s %s: local bytes: driver %d, ELF %u", target,
          kernel_names[k], a.local_bytes, ek->local_bytes);
    CHECK(a.shared_bytes == (int)ek->shared_bytes,
          "%s %s: static shared bytes: driver %d, ELF %u (section %u)", target, kernel_names[k],
          a.shared_bytes, ek->shared_bytes, ek->shared_section_bytes);
    tl_ptxas_stats ps;
    if (tl_ptxas_stats_parse(res.log, kernel_names[k], &ps, &err) == TL_OK)
      CHECK(ps.registers == a.num_regs && ps.stack_frame_bytes == a.local_bytes,
            "%s %s: ptxas says %ld registers, %ld bytes stack frame", target, kernel_names[k],
            ps.registers, ps.stack_frame_bytes);
    if (ek->max_threads[0])
      CHECK(a.max_threads == (int)ek->max_threads[0], "%s %s: max threads: driver %d, ELF %u",
            target, kernel_names[k], a.max_threads, ek->max_threads[0]);
  }
  if (fns[0])
    run_add_one(cu, fns[0], target);
  if (fns[1])
    run_rev_chunks(cu, fns[1], target);
  tl_gpu_func *none = NULL;
  tl_status st = tl_gpu_function(mod, "no_such_kernel", &none, &err);
  CHECK(st == TL_NOT_FOUND && none == NULL, "missing kernel: %s (%s)", tl_status_name(st),
        err.message);
  tl_gpu_unload(mod);
  tl_cubin_info_free(&info);
  tl_nvrtc_result_free(&res);
}

/* Images the device must refuse, with the driver's reason. */
static void test_refusals(tl_nvrtc *nv, tl_gpu *cu) {
  printf("\n== refusals\n");
  tl_error err;
  tl_gpu_module *mod = NULL;
  const char junk[] = "this is neither PTX nor a cubin";
  tl_status st = tl_gpu_load(cu, junk, sizeof junk - 1, &mod, &err);
  CHECK(st == TL_DEVICE && mod == NULL, "junk image: %s", tl_status_name(st));
  printf("junk image: %s\n", err.message);
  /* A cubin of another major architecture does not run here. */
  int arch = tl_gpu_arch(cu);
  const char *other = arch / 10 == 8 ? "sm_90" : "sm_80";
  tl_nvrtc_result res = {0};
  if (tl_nvrtc_accepts(nv, other) &&
      ok(tl_nvrtc_compile(nv, kernels_src, "smoke.cu", other, NULL, 0, &res, &err), &err,
         "compile")) {
    st = tl_gpu_load(cu, res.code, res.code_size, &mod, &err);
    CHECK(st == TL_DEVICE && strstr(err.message, "CUDA_ERROR_NO_BINARY_FOR_GPU"),
          "%s cubin on sm_%d: %s (%s)", other, arch, tl_status_name(st), err.message);
    printf("%s cubin on sm_%d: %s\n", other, arch, err.message);
    tl_gpu_unload(mod);
  }
  tl_nvrtc_result_free(&res);
}

int main(int argc, char **argv) {
  int ordinal = 0;
  const char *outdir = NULL;
  uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
  int opt;
  while ((opt = getopt(argc, argv, "d:s:o:")) != -1) {
    switch (opt) {
    case 'd': ordinal = atoi(optarg); break;
    case 's': seed = strtoull(optarg, NULL, 0); break;
    case 'o': outdir = optarg; break;
    default:
      fprintf(stderr, "usage: cuda_smoke [-d ORDINAL] [-s SEED] [-o DIR]\n");
      return 2;
    }
  }
  rng_state = seed ? seed : 88172645463325252ull;
  setvbuf(stdout, NULL, _IOLBF, 0);
  tl_error err;
  tl_gpu *cu = NULL;
  tl_status st = tl_gpu_open(TL_GPU_CUDA, ordinal, &cu, &err);
  if (st != TL_OK) {
    printf("cuda_smoke: SKIP: %s\n", err.message);
    fprintf(stderr, "cuda_smoke: SKIP: %s\n", err.message);
    return st == TL_NO_DEVICE ? 77 : 1;
  }
  const tl_gpu_device *d = tl_gpu_device_info(cu);
  printf("device %d: %s, sm_%d, %d SMs, %d KiB shared per block (opt-in %d KiB, %d B reserved), "
         "%zu MiB, driver %d.%d\n",
         d->ordinal, d->name, d->arch, d->multiprocessors, d->max_shared_per_block / 1024,
         d->max_shared_per_block_optin / 1024, d->reserved_shared_per_block,
         d->total_memory >> 20, d->driver_version / 1000, d->driver_version % 1000 / 10);
  tl_nvrtc *nv = NULL;
  st = tl_nvrtc_open(&nv, &err);
  if (st != TL_OK) {
    printf("cuda_smoke: SKIP: %s\n", err.message);
    fprintf(stderr, "cuda_smoke: SKIP: %s\n", err.message);
    tl_gpu_close(cu);
    return 77;
  }
  int maj, min;
  tl_nvrtc_version(nv, &maj, &min);
  printf("NVRTC %d.%d (%s); random seed %llu\n", maj, min, tl_nvrtc_library(nv),
         (unsigned long long)seed);
  if (outdir && mkdir(outdir, 0755) != 0 && errno != EEXIST) {
    printf("note: cannot create %s: %s\n", outdir, strerror(errno));
    outdir = NULL;
  }

  /* The device's own targets: sm_N, sm_Na where it exists, compute_N (JIT). */
  char t[3][TL_NVRTC_TARGET_MAX];
  snprintf(t[0], sizeof t[0], "sm_%d", d->arch);
  snprintf(t[1], sizeof t[1], "sm_%da", d->arch);
  snprintf(t[2], sizeof t[2], "compute_%d", d->arch);
  int tested = 0;
  for (int i = 0; i < 3; i++) {
    if (!tl_nvrtc_accepts(nv, t[i])) {
      printf("\n== %s: not accepted by this NVRTC, not tested\n", t[i]);
      continue;
    }
    test_target(nv, cu, t[i], outdir);
    tested++;
  }
  CHECK(tested >= 2, "only %d of the device's targets could be compiled", tested);
  test_refusals(nv, cu);

  tl_nvrtc_close(nv);
  tl_gpu_close(cu);
  if (failures) {
    printf("\ncuda_smoke: FAILED (%d check%s)\n", failures, failures == 1 ? "" : "s");
    return 1;
  }
  printf("\ncuda_smoke: OK\n");
  return 0;
}
