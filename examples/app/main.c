/*
 * main.c - tl-example-app: a small application that gets its GEMM kernel
 * (examples/gemm.json, embedded at build time) through libtlclient at
 * start-up, runs it on random inputs and checks the result against a plain
 * CPU loop.  It uses only the public API (<tl/tlclient.h>) and links the
 * shared library, as an application outside this repository would.
 *
 *   tl-example-app [--server URL] [--token T] [--bundle FILE] [--size N] [--arch N] [--seed N] [--offline]
 *
 * Environment: TL_SERVER, TL_TOKEN (as tlclient), TL_CLIENT_CACHE (the local
 * cache file; "none" turns it off), TL_CLIENT_BUNDLE (a bundle of the
 * release's kernels, read first: tl_client_set_bundle; also --bundle),
 * TL_CLIENT_TUNING (a device description or "auto": the server's tuning
 * record for the kernel's shape is applied, tl_client_set_tuning), TL_START_US (the launcher's wall clock
 * in microseconds, e.g. bash's ${EPOCHREALTIME/./}, taken just before it
 * started the process: then the start-up time is measured from there; else
 * from the kernel's record of the process's start, to 10 ms).
 *
 * It prints where the kernel came from (local cache, server cache, compiled
 * now) and the time from process start to the first kernel launch, with its
 * parts.  Without a GPU it says so and exits 1, unless --arch N is given:
 * then it fetches the kernel for that architecture, reports, and exits 0
 * (for machines that fill a cache without a GPU, and for tests).  With
 * --offline it never contacts the server: the local cache only.
 * Exit status: 0 success, 1 failure (the message says which part failed).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <tl/tlclient.h>

extern const char tl_app_gemm_json[], tl_app_gemm_json_end[];

static double wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The process's start in wall-clock microseconds: TL_START_US when given,
 * else from /proc/self/stat (clock ticks since boot) and CLOCK_BOOTTIME. */
static double process_start_us(const char **how) {
  const char *env = getenv("TL_START_US");
  if (env && *env) {
    char *end;
    double v = strtod(env, &end);
    if (!*end && v > 0) {
      *how = "from TL_START_US";
      return v;
    }
  }
  *how = "from /proc/self/stat, to 10 ms";
  FILE *f = fopen("/proc/self/stat", "r");
  if (!f)
    return wall_us();
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* the command name may hold spaces */
  unsigned long long ticks = 0;
  if (p) {
    int field = 2;
    for (char *t = p + 1; *t && field < 22; t++)
      if (*t == ' ')
        field++, p = t;
    ticks = strtoull(p + 1, NULL, 10);
  }
  struct timespec boot;
  clock_gettime(CLOCK_BOOTTIME, &boot);
  double since_start_us = ((double)boot.tv_sec + boot.tv_nsec / 1e9 - (double)ticks / sysconf(_SC_CLK_TCK)) * 1e6;
  return wall_us() - since_start_us;
}

/* float16 <-> float, round to nearest even (the application has no half type). */
static uint16_t half_from(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, m = x & 0x7fffff;
  if (e == 0xff)
    return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
  int exp = (int)e - 127 + 15;
  if (exp >= 31)
    return (uint16_t)(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10)
      return (uint16_t)sign;
    m |= 0x800000;
    int shift = 14 - exp;
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1)))
      h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)exp << 10) | (m >> 13), rem = m & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
    h++;
  return (uint16_t)(sign | h);
}

static float half_to(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
  if (e == 0) {
    if (!m)
      x = sign;
    else {
      int k = -1;
      do {
        k++;
        m <<= 1;
      } while (!(m & 0x400));
      x = sign | ((uint32_t)(127 - 15 - k) << 23) | ((m & 0x3ff) << 13);
    }
  } else if (e == 31)
    x = sign | 0x7f800000 | (m << 13);
  else
    x = sign | ((e - 15 + 127) << 23) | (m << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static uint64_t rng_state = 88172645463325252ULL;
static float rnd(void) { /* uniform in [-1, 1), never near zero */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  float x = (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
  return fabsf(x) < 1e-3f ? 0.5f : x;
}

static int fail(const char *part, const tl_error *err) {
  fprintf(stderr, "tl-example-app: %s: %s\n", part, err->message);
  return 1;
}

int main(int argc, char **argv) {
  double t_main = wall_us();
  const char *how;
  double t_start = process_start_us(&how);
  const char *server = getenv("TL_SERVER"), *token = getenv("TL_TOKEN"), *cache = getenv("TL_CLIENT_CACHE");
  const char *bundle = getenv("TL_CLIENT_BUNDLE"), *tuning = getenv("TL_CLIENT_TUNING");
  long size = 1024;
  int arch = 0;
  bool offline = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--server") == 0 && v)
      server = v, i++;
    else if (strcmp(a, "--token") == 0 && v)
      token = v, i++;
    else if (strcmp(a, "--bundle") == 0 && v)
      bundle = v, i++;
    else if (strcmp(a, "--size") == 0 && v)
      size = strtol(v, NULL, 10), i++;
    else if (strcmp(a, "--arch") == 0 && v)
      arch = atoi(v), i++;
    else if (strcmp(a, "--seed") == 0 && v)
      rng_state = strtoull(v, NULL, 0) | 1, i++;
    else if (strcmp(a, "--offline") == 0)
      offline = true;
    else {
      fprintf(stderr, "usage: tl-example-app [--server URL] [--token T] [--bundle FILE] [--size N] [--arch N] "
                      "[--seed N] [--offline]\n");
      return 2;
    }
  }
  if (size < 1 || size > 16384) {
    fprintf(stderr, "tl-example-app: --size is from 1 to 16384\n");
    return 2;
  }

  /* ---- start-up: the client, the device, the kernel ---- */
  tl_error err;
  tl_client *c = NULL;
  if (tl_client_new(&c, &err) != TL_OK)
    return fail("client", &err);
  if ((server && *server && tl_client_set_server(c, server, &err) != TL_OK) ||
      (token && *token && tl_client_set_token(c, token, &err) != TL_OK) ||
      (cache && *cache && tl_client_set_cache_path(c, strcmp(cache, "none") ? cache : NULL, &err) != TL_OK) ||
      (offline && tl_client_set_offline(c, 1, &err) != TL_OK) ||
      (bundle && *bundle && tl_client_set_bundle(c, bundle, &err) != TL_OK) ||
      (tuning && *tuning && tl_client_set_tuning(c, tuning, &err) != TL_OK)) {
    tl_client_free(c);
    return fail("settings", &err);
  }
  tl_device *dev = NULL;
  tl_error derr;
  tl_status dst = tl_device_open(0, &dev, &derr);
  if (dst != TL_OK && !arch) {
    err = derr;
    tl_client_free(c);
    return fail("GPU", &err);
  }
  char sz[32];
  snprintf(sz, sizeof sz, "%ld", size);
  tl_client_define defs[3] = {{"M", sz}, {"N", sz}, {"K", sz}};
  tl_client_request req = {.program = tl_app_gemm_json,
                           .program_len = (size_t)(tl_app_gemm_json_end - tl_app_gemm_json),
                           .name = "examples/gemm.json (embedded)",
                           .defines = defs,
                           .ndefines = 3};
  double t_client = wall_us();
  tl_artifact *art = NULL;
  tl_status st = dev ? tl_client_get_for_device(c, &req, dev, &art, &err)
                     : tl_client_get_for_arch(c, &req, arch, &art, &err);
  double t_got = wall_us();
  if (st != TL_OK) {
    tl_device_free(dev);
    tl_client_free(c);
    return fail("getting the kernel", &err);
  }
  size_t nbytes;
  tl_artifact_bytes(art, &nbytes);
  printf("kernel %s for %s: %zu bytes from %s in %.1f ms (server %s, artifact %s)\n", tl_artifact_entry(art),
         tl_artifact_target(art), nbytes, tl_source_name(tl_artifact_source(art)), (t_got - t_client) / 1000,
         tl_client_server(c), tl_artifact_id(art));
  if (!dev) {
    printf("no GPU here (%s): fetched the kernel for architecture %d (%s), not run\n", derr.message, arch,
           tl_artifact_target(art));
    tl_artifact_free(art);
    tl_client_free(c);
    return 0;
  }
  tl_kernel *k = NULL;
  if (tl_kernel_load(dev, art, &k, &err) != TL_OK) {
    tl_artifact_free(art);
    tl_device_free(dev);
    tl_client_free(c);
    return fail("loading the kernel", &err);
  }
  double t_loaded = wall_us();

  /* ---- inputs, the launch ---- */
  size_t n = (size_t)size, elems = n * n;
  uint16_t *A = malloc(elems * 2), *B = malloc(elems * 2), *C = malloc(elems * 2);
  float *Af = malloc(elems * 4), *Bf = malloc(elems * 4);
  uint64_t dA = 0, dB = 0, dC = 0;
  int rc = 1;
  if (!A || !B || !C || !Af || !Bf) {
    fprintf(stderr, "tl-example-app: out of memory\n");
    goto out;
  }
  for (size_t i = 0; i < elems; i++) {
    A[i] = half_from(rnd());
    B[i] = half_from(rnd());
    Af[i] = half_to(A[i]);
    Bf[i] = half_to(B[i]);
  }
  if (tl_device_alloc(dev, elems * 2, &dA, &err) != TL_OK || tl_device_alloc(dev, elems * 2, &dB, &err) != TL_OK ||
      tl_device_alloc(dev, elems * 2, &dC, &err) != TL_OK || tl_device_upload(dev, dA, A, elems * 2, &err) != TL_OK ||
      tl_device_upload(dev, dB, B, elems * 2, &err) != TL_OK) {
    fail("device memory", &err);
    goto out;
  }
  tl_kernel_arg args[3] = {tl_arg_tensor(dA), tl_arg_tensor(dB), tl_arg_tensor(dC)};
  double t_launch0 = wall_us();
  if (tl_kernel_launch(k, args, 3, NULL, &err) != TL_OK) {
    fail("launching", &err);
    goto out;
  }
  double t_launched = wall_us();
  if (tl_device_sync(dev, &err) != TL_OK || tl_device_download(dev, C, dC, elems * 2, &err) != TL_OK) {
    fail("running", &err);
    goto out;
  }
  double t_done = wall_us();
  printf("start-up: %.1f ms from process start to the first launch (%s): to main %.1f ms, client and GPU %.1f ms, "
         "kernel %.1f ms (%s), load %.1f ms, inputs %.1f ms, launch %.2f ms; the GEMM ran in %.2f ms\n",
         (t_launched - t_start) / 1000, how, (t_main - t_start) / 1000, (t_client - t_main) / 1000,
         (t_got - t_client) / 1000, tl_source_name(tl_artifact_source(art)), (t_loaded - t_got) / 1000,
         (t_launch0 - t_loaded) / 1000, (t_launched - t_launch0) / 1000, (t_done - t_launched) / 1000);
  printf("startup_ms=%.2f source=%s target=%s\n", (t_launched - t_start) / 1000,
         tl_source_name(tl_artifact_source(art)), tl_artifact_target(art));

  /* ---- the check: C = A B, accumulated in double on the CPU ---- */
  double num = 0, den = 0;
  size_t nan = 0;
  double *row = malloc(n * sizeof *row);
  if (!row) {
    fprintf(stderr, "tl-example-app: out of memory\n");
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < n; j++)
      row[j] = 0;
    for (size_t kk = 0; kk < n; kk++) {
      double a = Af[i * n + kk];
      const float *b = Bf + kk * n;
      for (size_t j = 0; j < n; j++)
        row[j] += a * b[j];
    }
    for (size_t j = 0; j < n; j++) {
      double got = half_to(C[i * n + j]);
      if (isnan(got))
        nan++;
      else {
        num += (got - row[j]) * (got - row[j]);
        den += row[j] * row[j];
      }
    }
  }
  free(row);
  double rel = sqrt(num) / fmax(sqrt(den), 1e-30);
  bool ok = nan == 0 && rel <= 1e-2;
  printf("check: C = A B (%zu x %zu, float16) against a CPU loop: relative error %.2e (bound 1e-2), %zu NaN: %s\n", n,
         n, rel, nan, ok ? "ok" : "FAILED");
  rc = ok ? 0 : 1;
out:
  tl_device_mem_free(dev, dA);
  tl_device_mem_free(dev, dB);
  tl_device_mem_free(dev, dC);
  free(A);
  free(B);
  free(C);
  free(Af);
  free(Bf);
  tl_kernel_free(k);
  tl_artifact_free(art);
  tl_device_free(dev);
  tl_client_free(c);
  return rc;
}
