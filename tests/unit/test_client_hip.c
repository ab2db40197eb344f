/*
 * test_client_hip.c - libtlclient's AMD path with the fake HIP runtime of
 * tests/hip (built here with cc) as the machine's only GPU runtime
 * (TL_LIBCUDA names a library that does not exist, TL_LIBHIP the fake):
 *
 *   open        tl_device_open falls back to HIP and reports the fake's gfx
 *               architecture; with neither runtime, both reasons
 *   kernel      an artifact for gfx90a loaded and launched from its
 *               metadata: the grid computed, the arguments packed as for
 *               CUDA, the fake's CPU kernel computing from them; artifacts
 *               for other targets refused; an empty grid launches nothing;
 *               LDS over the device's limit refused (no CUDA-style opt-in)
 *   server      tl_client_get_for_device against a real tlserverd asks for
 *               gfx90a: a server without the AMD back end answers that the
 *               target is not offered and the error says so plainly; one
 *               with it serves an HSACO that loads through the fake
 *
 * Environment: TL_BUILD (default build), TL_SRCDIR (default .).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>

#include "../../client/internal.h"
#define FAKE_HIP_BUILDER
#include "../hip/fake_amdhip64.h"

static char tmpdir[256];
static char fake[512];
static char skip_reason[512];

static const char *src_dir(void) {
  const char *s = getenv("TL_SRCDIR");
  return s && *s ? s : ".";
}

static const char *build_dir(void) {
  const char *b = getenv("TL_BUILD");
  return b && *b ? b : "build";
}

static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  char path[1024];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
      remove_tree(path);
    else
      unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tl-test-client-hip-XXXXXX");
  if (!mkdtemp(tmpdir))
    return -1;
  int r = fake_hip_build(src_dir(), tmpdir, "libamdhip64.so.6", "", fake, sizeof fake, skip_reason,
                         sizeof skip_reason);
  if (r < 0) {
    fprintf(stderr, "%s\n", skip_reason);
    return -1;
  }
  if (r > 0)
    fake[0] = 0;
  setenv("TL_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  remove_tree(tmpdir);
  return 0;
}

#define NEED_FAKE()                                                                          \
  do {                                                                                       \
    if (!fake[0]) {                                                                          \
      printf("skipping: %s\n", skip_reason);                                                 \
      skip();                                                                                \
    }                                                                                        \
    setenv("TL_LIBHIP", fake, 1);                                                            \
    unsetenv("FAKE_HIP_DEVICES");                                                            \
    unsetenv("FAKE_HIP_ARCH");                                                               \
  } while (0)

static void test_open(void **state) {
  (void)state;
  NEED_FAKE();
  tl_device *d = NULL;
  tl_error err;
  if (tl_device_open(0, &d, &err) != TL_OK)
    fail_msg("tl_device_open with the fake HIP runtime: %s", err.message);
  assert_int_equal(tl_device_get_api(d), TL_DEVICE_API_HIP);
  assert_string_equal(tl_device_arch_name(d), "gfx90a");
  assert_int_equal(tl_device_arch(d), 0);
  assert_string_equal(tl_device_name(d), "AMD Instinct MI210 (fake)");
  printf("device: %s (%s)\n", tl_device_name(d), tl_device_arch_name(d));
  tl_device_free(d);
  setenv("FAKE_HIP_ARCH", "gfx1201", 1);
  assert_int_equal(tl_device_open(0, &d, &err), TL_OK);
  assert_string_equal(tl_device_arch_name(d), "gfx1201");
  tl_device_free(d);
  unsetenv("FAKE_HIP_ARCH");
  /* an ordinal HIP does not have: HIP's answer, not "no device" */
  setenv("FAKE_HIP_DEVICES", "2", 1);
  assert_int_equal(tl_device_open(5, &d, &err), TL_INVALID_ARG);
  assert_null(d);
  assert_string_equal(err.message, "there is no HIP device 5 (2 devices: 0 to 1)");
  unsetenv("FAKE_HIP_DEVICES");
  /* neither runtime: both reasons */
  setenv("TL_LIBHIP", "/nonexistent/libamdhip64.so", 1);
  d = (tl_device *)1;
  assert_int_equal(tl_device_open(0, &d, &err), TL_NO_DEVICE);
  assert_null(d);
  assert_string_equal(err.message,
                      "no CUDA driver (/nonexistent/libcuda.so.1 not found); no HIP runtime "
                      "(/nonexistent/libamdhip64.so not found)");
  assert_int_equal(tl_device_get_api(NULL), TL_DEVICE_API_NONE);
  assert_null(tl_device_arch_name(NULL));
  setenv("TL_LIBHIP", fake, 1);
}

/* ---- a kernel through the client ------------------------------------------------------ */

static const char axpy_meta[] =
    "{\"entry\": \"fake_axpy\", \"target\": \"gfx90a\", \"binary\": \"hsaco\",\n"
    " \"params\": [{\"name\": \"y\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [\"n\"], \"align\": 16},\n"
    "            {\"name\": \"x\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [\"n\"], \"align\": 16},\n"
    "            {\"name\": \"a\", \"kind\": \"scalar\", \"dtype\": \"float32\"},\n"
    "            {\"name\": \"n\", \"kind\": \"scalar\", \"dtype\": \"int32\"}],\n"
    " \"launch\": {\"grid\": [\"ceildiv(n, 128)\"], \"block\": [128, 1, 1], \"dynamic_shared_bytes\": DYN}}";

/* An artifact made as fetch.c makes one, for target, with a code object
 * holding fake_axpy and metadata asking for dyn bytes of dynamic LDS. */
static tl_artifact *artifact(const char *target, unsigned mach, int dyn) {
  static const char *const names[] = {"fake_axpy"};
  tl_artifact *a = calloc(1, sizeof *a);
  assert_non_null(a);
  snprintf(a->target, sizeof a->target, "%s", target);
  a->bytes = fake_hip_code_object(3, 224, 0x500 | mach, names, 1, &a->n);
  assert_non_null(a->bytes);
  const char *at = strstr(axpy_meta, "DYN");
  char text[2048];
  snprintf(text, sizeof text, "%.*s%d%s", (int)(at - axpy_meta), axpy_meta, dyn, at + 3);
  a->metadata = strdup(text);
  assert_non_null(a->metadata);
  tl_error err;
  if (tl_meta_parse(a->metadata, &a->meta, &err) != TL_OK)
    fail_msg("metadata: %s", err.message);
  a->source = TL_SOURCE_LOCAL;
  return a;
}

static void test_kernel(void **state) {
  (void)state;
  NEED_FAKE();
  void *lib = dlopen(fake, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(lib);
  fake_hip_last_launch_fn last_launch;
  fake_hip_set_arg_sizes_fn set_arg_sizes;
  fake_hip_live_fn live;
  *(void **)&last_launch = dlsym(lib, "fake_hip_last_launch");
  *(void **)&set_arg_sizes = dlsym(lib, "fake_hip_set_arg_sizes");
  *(void **)&live = dlsym(lib, "fake_hip_live");
  assert_true(last_launch && set_arg_sizes && live);
  int allocs0 = live("allocations");

  tl_device *d = NULL;
  tl_error err;
  assert_int_equal(tl_device_open(0, &d, &err), TL_OK);
  tl_artifact *a = artifact("gfx90a", 0x3f, 0);
  tl_kernel *k = NULL;
  if (tl_kernel_load(d, a, &k, &err) != TL_OK)
    fail_msg("tl_kernel_load: %s", err.message);
  tl_artifact_free(a);

  enum { N = 1000 };
  float x[N], y[N], got[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 17) - 8.0f;
    y[i] = (float)i * 0.25f;
  }
  uint64_t dx = 0, dy = 0;
  assert_int_equal(tl_device_alloc(d, sizeof x, &dx, &err), TL_OK);
  assert_int_equal(tl_device_alloc(d, sizeof y, &dy, &err), TL_OK);
  assert_int_equal(tl_device_upload(d, dx, x, sizeof x, &err), TL_OK);
  assert_int_equal(tl_device_upload(d, dy, y, sizeof y, &err), TL_OK);
  int sizes[] = {8, 8, 4, 4};
  set_arg_sizes(sizes, 4);
  fake_hip_launch before, after;
  last_launch(&before);
  tl_kernel_arg args[] = {tl_arg_tensor(dy), tl_arg_tensor(dx), tl_arg_float(-1.5), tl_arg_int(N)};
  if (tl_kernel_launch(k, args, 4, NULL, &err) != TL_OK)
    fail_msg("tl_kernel_launch: %s", err.message);
  assert_int_equal(tl_device_sync(d, &err), TL_OK);
  last_launch(&after);
  assert_int_equal(after.count, before.count + 1);
  assert_string_equal(after.kernel, "fake_axpy");
  assert_int_equal(after.grid[0], (N + 127) / 128); /* ceildiv(n, 128) from the metadata */
  assert_int_equal(after.grid[1], 1);
  assert_int_equal(after.block[0], 128);
  assert_int_equal(after.shared_bytes, 0);
  assert_int_equal(after.extra_given, 0);
  float alpha = -1.5f;
  int n = N;
  assert_memory_equal(after.args[0], &dy, 8);
  assert_memory_equal(after.args[1], &dx, 8);
  assert_memory_equal(after.args[2], &alpha, 4);
  assert_memory_equal(after.args[3], &n, 4);
  assert_int_equal(tl_device_download(d, got, dy, sizeof got, &err), TL_OK);
  for (int i = 0; i < N; i++)
    if (got[i] != y[i] + alpha * x[i])
      fail_msg("y[%d] = %g, want %g", i, got[i], y[i] + alpha * x[i]);

  /* checks of the plan, made before HIP sees anything */
  last_launch(&before);
  tl_kernel_arg misaligned[] = {tl_arg_tensor(dy + 4), tl_arg_tensor(dx), tl_arg_float(1), tl_arg_int(N)};
  assert_int_equal(tl_kernel_launch(k, misaligned, 4, NULL, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "align"));
  assert_int_equal(tl_kernel_launch(k, args, 3, NULL, &err), TL_INVALID_ARG);
  tl_kernel_arg empty[] = {tl_arg_tensor(dy), tl_arg_tensor(dx), tl_arg_float(1), tl_arg_int(0)};
  assert_int_equal(tl_kernel_launch(k, empty, 4, NULL, &err), TL_OK); /* an empty grid: nothing */
  last_launch(&after);
  assert_int_equal(after.count, before.count);
  tl_kernel_free(k);

  /* artifacts that cannot run here */
  static const char *const others[] = {"gfx942", "sm_90", "compute_80", "gfx90"};
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    a = artifact(others[i], 0x3f, 0);
    k = (tl_kernel *)1;
    assert_int_equal(tl_kernel_load(d, a, &k, &err), TL_UNSUPPORTED);
    assert_null(k);
    char want[300];
    snprintf(want, sizeof want,
             "kernel 'fake_axpy' was built for %s, which cannot run on this GPU (AMD Instinct MI210 "
             "(fake), gfx90a)",
             others[i]);
    assert_string_equal(err.message, want);
    tl_artifact_free(a);
  }
  /* named gfx90a but holding another architecture's code */
  a = artifact("gfx90a", 0x4c, 0);
  assert_int_equal(tl_kernel_load(d, a, &k, &err), TL_UNSUPPORTED);
  assert_string_equal(err.message, "the code object is for gfx942; this GPU is gfx90a");
  tl_artifact_free(a);
  /* dynamic LDS: 64 KiB less the fake's 1 KiB of static LDS fits; above it, refused */
  a = artifact("gfx90a", 0x3f, 65536 - 1024);
  assert_int_equal(tl_kernel_load(d, a, &k, &err), TL_OK);
  assert_int_equal(tl_kernel_launch(k, args, 4, NULL, &err), TL_OK);
  tl_kernel_free(k);
  tl_artifact_free(a);
  a = artifact("gfx90a", 0x3f, 100000);
  assert_int_equal(tl_kernel_load(d, a, &k, &err), TL_OK);
  assert_int_equal(tl_kernel_launch(k, args, 4, NULL, &err), TL_LIMIT);
  assert_string_equal(err.message,
                      "fake_axpy needs 101024 bytes of LDS (1024 static + 100000 dynamic), over "
                      "the device's 65536 per workgroup by 35488");
  tl_kernel_free(k);
  tl_artifact_free(a);
  assert_int_equal(tl_device_sync(d, &err), TL_OK);

  tl_device_mem_free(d, dx);
  tl_device_mem_free(d, dy);
  assert_int_equal(live("allocations"), allocs0);
  assert_int_equal(live("modules"), 0);
  tl_device_free(d);
  dlclose(lib);
}

/* ---- against a real server ------------------------------------------------------------ */

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* Starts tlserverd on a free loopback port with the extra environment
 * (NULL-terminated; may be NULL); returns its pid and its URL. */
static pid_t server_start(const char *const *env, char *url, size_t cap) {
  char exe[512], portfile[600], db[600], log[600];
  snprintf(exe, sizeof exe, "%s/bin/tlserverd", build_dir());
  snprintf(portfile, sizeof portfile, "%s/port", tmpdir);
  snprintf(db, sizeof db, "%s/server.db", tmpdir);
  snprintf(log, sizeof log, "%s/server.log", tmpdir);
  unlink(portfile);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    for (int i = 0; env && env[i]; i++)
      putenv((char *)env[i]);
    execl(exe, exe, "--listen", "127.0.0.1:0", "--port-file", portfile, "--db", db, "--workers", "2",
          (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 3000; i++) {
    FILE *f = fopen(portfile, "r");
    int port = 0;
    if (f) {
      if (fscanf(f, "%d", &port) != 1)
        port = 0;
      fclose(f);
    }
    if (port > 0) {
      snprintf(url, cap, "http://127.0.0.1:%d", port);
      return pid;
    }
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid)
      fail_msg("tlserverd exited at start (see %s)", log);
    sleep_ms(10);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  fail_msg("tlserverd did not start within 30 s (see %s)", log);
  return -1;
}

static void server_stop(pid_t pid) {
  kill(pid, SIGTERM);
  int status;
  for (int i = 0; i < 3000 && waitpid(pid, &status, WNOHANG) == 0; i++)
    sleep_ms(10);
  if (waitpid(pid, &status, WNOHANG) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* One server (with the extra environment env): asks for the fake GPU's
 * gfx90a and checks the answer against what /v1/info offers.  Returns 1
 * when the server offered gfx90a, 0 when it said it does not, -1 when it
 * has no toolchain at all (the not-offered answer cannot be seen). */
static int get_from_server(const char *const *env, const char *label) {
  char url[64];
  pid_t pid = server_start(env, url, sizeof url);
  tl_client *c = NULL;
  tl_error err;
  assert_int_equal(tl_client_new(&c, &err), TL_OK);
  assert_int_equal(tl_client_set_server(c, url, &err), TL_OK);
  char cache[600];
  snprintf(cache, sizeof cache, "%s/cache-%s.db", tmpdir, label);
  assert_int_equal(tl_client_set_cache_path(c, cache, &err), TL_OK);
  char *info = NULL;
  assert_int_equal(tl_client_info(c, &info, &err), TL_OK);
  json_t *doc = json_loads(info, 0, NULL);
  free(info);
  bool offered = false;
  size_t i;
  json_t *t;
  json_array_foreach(json_object_get(doc, "targets"), i, t) offered |= json_is_string(t) && !strcmp(json_string_value(t), "gfx90a");
  bool no_toolchain = json_array_size(json_object_get(doc, "targets")) == 0; /* NVRTC hidden too */
  json_decref(doc);

  tl_device *d = NULL;
  assert_int_equal(tl_device_open(0, &d, &err), TL_OK);
  char path[600];
  snprintf(path, sizeof path, "%s/examples/tilus_add_one.json", src_dir());
  char *prog = read_text(path);
  tl_client_request req = {.program = prog, .name = "tilus_add_one.json"};
  tl_artifact *a = (tl_artifact *)1;
  tl_status st = tl_client_get_for_device(c, &req, d, &a, &err);
  if (no_toolchain) {
    /* no toolchain at all (NVRTC is missing too): said plainly, but the
     * "not offered" answer cannot be seen */
    printf("%s: the server has no toolchain at all: %s\n", label, err.message);
    assert_int_equal(st, TL_NO_TOOLCHAIN);
    assert_null(a);
    assert_non_null(strstr(err.message, "no toolchain"));
  } else if (!offered) {
    /* no AMD back end in this server: said plainly */
    printf("%s: the server does not offer gfx90a: %s\n", label, err.message);
    assert_int_equal(st, TL_UNSUPPORTED);
    assert_null(a);
    assert_non_null(strstr(err.message, "target 'gfx90a' is not offered by this server"));
    assert_non_null(strstr(err.message, url));
    assert_non_null(strstr(err.message, "this GPU (AMD Instinct MI210 (fake)) is an AMD gfx90a"));
    assert_string_equal(err.pointer, "/targets/0");
  } else {
    /* the AMD back end: an HSACO that the fake's loader takes, launched
     * with the arguments packed from its metadata (the fake records them;
     * it cannot run real code) */
    if (st != TL_OK)
      fail_msg("%s: the server offers gfx90a, but: %s", label, err.message);
    assert_string_equal(tl_artifact_target(a), "gfx90a");
    tl_kernel *k = NULL;
    if (tl_kernel_load(d, a, &k, &err) != TL_OK)
      fail_msg("%s: loading the server's gfx90a code object: %s", label, err.message);
    void *lib = dlopen(fake, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    fake_hip_last_launch_fn last_launch;
    fake_hip_set_arg_sizes_fn set_arg_sizes;
    *(void **)&last_launch = dlsym(lib, "fake_hip_last_launch");
    *(void **)&set_arg_sizes = dlsym(lib, "fake_hip_set_arg_sizes");
    assert_true(last_launch && set_arg_sizes);
    int sizes[] = {4, 8, 8};
    set_arg_sizes(sizes, 3);
    uint64_t da = 0, db = 0;
    assert_int_equal(tl_device_alloc(d, 300 * 4, &da, &err), TL_OK);
    assert_int_equal(tl_device_alloc(d, 300 * 4, &db, &err), TL_OK);
    tl_kernel_arg args[] = {tl_arg_int(300), tl_arg_tensor(da), tl_arg_tensor(db)};
    if (tl_kernel_launch(k, args, 3, NULL, &err) != TL_OK)
      fail_msg("%s: launching the server's gfx90a kernel: %s", label, err.message);
    fake_hip_launch l;
    last_launch(&l);
    assert_string_equal(l.kernel, tl_artifact_entry(a));
    assert_int_equal(l.grid[0], 3); /* ceildiv(300, 128) */
    assert_int_equal(l.block[0], 128);
    int n = 300;
    assert_memory_equal(l.args[0], &n, 4);
    assert_memory_equal(l.args[1], &da, 8);
    assert_memory_equal(l.args[2], &db, 8);
    printf("%s: the server's gfx90a code object for %s loaded and launched (%s, %zu bytes)\n", label,
           tl_artifact_entry(a), tl_source_name(tl_artifact_source(a)), a->n);
    tl_device_mem_free(d, da);
    tl_device_mem_free(d, db);
    tl_kernel_free(k);
    tl_artifact_free(a);
    dlclose(lib);
  }
  free(prog);
  tl_device_free(d);
  tl_client_free(c);
  server_stop(pid);
  return no_toolchain ? -1 : offered;
}

static void test_server(void **state) {
  (void)state;
  NEED_FAKE();
  char exe[512];
  snprintf(exe, sizeof exe, "%s/bin/tlserverd", build_dir());
  if (access(exe, X_OK) != 0) {
    printf("skipping: %s is not built\n", exe);
    skip();
  }
  /* without an AMD toolchain (compiler/amdgpu.h: these paths alone are
   * tried), then with whatever this machine has */
  static const char *const no_amd[] = {"TL_CLANG=/nonexistent/clang", "TL_HIPRTC=/nonexistent/libhiprtc.so",
                                       NULL};
  int without = get_from_server(no_amd, "no-amd");
  int with = get_from_server(NULL, "default");
  if (without != 0 || with != 1) { /* both ran; say what could not be seen */
    printf("skipping: %s%s%s%s\n",
           without > 0 ? "the server offered gfx90a without an AMD toolchain, " : "",
           without < 0 ? "the server had no toolchain at all (no NVRTC either): the not-offered answer was "
                         "not seen" : "",
           without < 0 && with != 1 ? "; " : "",
           with != 1 ? "no AMD toolchain here: the served-HSACO case was not seen" : "");
    skip();
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open),
      cmocka_unit_test(test_kernel),
      cmocka_unit_test(test_server),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
