/*
 * test_client_e2e.c - libtlclient against real tlserverd processes
 * ($TL_BUILD/bin/tlserverd on a loopback port it picks, a temporary
 * database), with real compiles through NVRTC:
 *
 *   get_and_fetch   a compile, the same request again from the local cache
 *                   with no request at all, another client's local cache
 *                   filled from the server's cache, fetch by key and by
 *                   artifact id (bytes hash to the id), misses, several
 *                   targets in one request with one failing (shared memory
 *                   over sm_75's limit) and the metadata of the other
 *                   (dynamic shared memory above 48 KiB), an invalid
 *                   program's diagnostics, a target the server does not offer
 *   ptx_fallback    a GPU whose sm_NN the server does not offer gets PTX;
 *                   the next start finds it locally without the network
 *   offline         the server stopped: a start from the local cache, by
 *                   request key and by the build key computed here; a miss
 *                   says what failed and where
 *   heal            a damaged binary and damaged metadata in the local cache
 *                   are dropped and fetched again
 *   busy            a server that answers 503 (one worker, no queue, the
 *                   worker held by a compile that hangs): no retries gives
 *                   TL_BUSY, retries honouring Retry-After then succeed
 *   tokens          no token, a wrong token, a token without the scope
 *   tuning_memo     a client with tuning on asks GET /v1/tunings once per
 *                   program, shape class and device per TTL, not once per
 *                   get (counted in the server's /metrics): a record and a
 *                   "none recorded" are kept, TTL 0 asks every time, an
 *                   answer past its TTL is asked again, a record the client
 *                   posts replaces its answer at once, a new server or
 *                   tuning forgets them
 *
 * Skips (passes with a message) when the server has no toolchain.
 * Environment: TL_BUILD (default build), TL_SRCDIR (default .).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sqlite3.h>
#include "../../client/internal.h"
#include "../../compiler/tlcompiler.h"
#include "../../proto/tl_hash.h"

/* ---- servers ------------------------------------------------------------------------ */

typedef struct server {
  pid_t pid;
  char dir[512], db[600], url[64];
} server;

static char tmp_root[256];
static bool have_toolchain;

static const char *build_dir(void) {
  const char *b = getenv("TL_BUILD");
  return b && *b ? b : "build";
}

static const char *src_dir(void) {
  const char *s = getenv("TL_SRCDIR");
  return s && *s ? s : ".";
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* Starts tlserverd (flags and extra environment NULL-terminated) in
 * tmp_root/name with the database db (NULL: a new one there). */
static void server_start(server *s, const char *name, const char *db, const char *const *flags,
                         const char *const *env) {
  char dbpath[600] = "";
  if (db)
    snprintf(dbpath, sizeof dbpath, "%s", db); /* db may point into *s */
  memset(s, 0, sizeof *s);
  snprintf(s->dir, sizeof s->dir, "%s/%s", tmp_root, name);
  mkdir(s->dir, 0700);
  if (db)
    snprintf(s->db, sizeof s->db, "%s", dbpath);
  else
    snprintf(s->db, sizeof s->db, "%s/server.db", s->dir);
  char exe[512], portfile[600], log[600];
  snprintf(exe, sizeof exe, "%s/bin/tlserverd", build_dir());
  snprintf(portfile, sizeof portfile, "%s/port", s->dir);
  snprintf(log, sizeof log, "%s/server.log", s->dir);
  unlink(portfile);
  const char *argv[40];
  int n = 0;
  argv[n++] = exe;
  argv[n++] = "--listen";
  argv[n++] = "127.0.0.1:0";
  argv[n++] = "--port-file";
  argv[n++] = portfile;
  argv[n++] = "--db";
  argv[n++] = s->db;
  for (int i = 0; flags && flags[i] && n < 38; i++)
    argv[n++] = flags[i];
  argv[n] = NULL;
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
    execv(exe, (char *const *)argv);
    _exit(127);
  }
  s->pid = pid;
  for (int i = 0; i < 3000; i++) {
    FILE *f = fopen(portfile, "r");
    int port = 0;
    if (f) {
      if (fscanf(f, "%d", &port) != 1)
        port = 0;
      fclose(f);
    }
    if (port > 0) {
      snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", port);
      return;
    }
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid)
      fail_msg("tlserverd exited at start (see %s)", log);
    sleep_ms(10);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  fail_msg("tlserverd did not start within 30 s (see %s)", log);
}

static void server_stop(server *s) {
  if (s->pid <= 0)
    return;
  kill(s->pid, SIGTERM);
  int status = 0;
  for (int i = 0; i < 3000 && waitpid(s->pid, &status, WNOHANG) == 0; i++)
    sleep_ms(10);
  if (waitpid(s->pid, &status, WNOHANG) == 0) {
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
  }
  s->pid = 0;
}

/* ---- helpers ------------------------------------------------------------------------- */

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

static char *example(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/%s.json", src_dir(), name);
  return read_text(path);
}

/* A client of url with the local cache tmp_root/cache_name. */
static tl_client *client(const char *url, const char *cache_name) {
  tl_client *c;
  tl_error err;
  assert_int_equal(tl_client_new(&c, &err), TL_OK);
  assert_int_equal(tl_client_set_server(c, url, &err), TL_OK);
  char path[600];
  snprintf(path, sizeof path, "%s/%s", tmp_root, cache_name);
  assert_int_equal(tl_client_set_cache_path(c, path, &err), TL_OK);
  assert_int_equal(tl_client_set_backoff_ms(c, 50, 400, &err), TL_OK);
  return c;
}

static int64_t requests(const tl_client *c) {
  tl_client_stats s;
  tl_client_get_stats(c, &s);
  return s.requests;
}

static void assert_verified(const tl_artifact *a) {
  size_t n;
  const void *b = tl_artifact_bytes(a, &n);
  char hex[65];
  assert_int_equal(tl_sha256_hex(b, n, hex), TL_OK);
  assert_string_equal(hex, tl_artifact_id(a));
  assert_true(tl_hex_is_sha256(tl_artifact_key(a)));
}

/* Runs SQL on a local cache file (to damage it as a disk or a bug would). */
static void sql(const char *cache_name, const char *stmt) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", tmp_root, cache_name);
  sqlite3 *db;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char *msg = NULL;
  if (sqlite3_exec(db, stmt, NULL, NULL, &msg) != SQLITE_OK)
    fail_msg("%s: %s", stmt, msg ? msg : "?");
  assert_true(sqlite3_changes(db) > 0);
  sqlite3_close(db);
}

typedef struct logbuf {
  char text[16384];
} logbuf;

static void to_log(void *user, const char *line) {
  logbuf *l = user;
  size_t n = strlen(l->text);
  snprintf(l->text + n, sizeof l->text - n, "%s\n", line);
}

static server main_srv;
static char *add_one;

static int group_setup(void **state) {
  (void)state;
  snprintf(tmp_root, sizeof tmp_root, "/tmp/tl-client-e2e-XXXXXX");
  if (!mkdtemp(tmp_root))
    return -1;
  tl_error err;
  const char *tool;
  /* NVIDIA's: the tests compile for sm_* and compute_* targets */
  have_toolchain = tl_compiler_targets(&tool, &err) != NULL && tl_compiler_target_toolchain("sm_80") != NULL;
  add_one = example("tilus_add_one");
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  server_stop(&main_srv);
  free(add_one);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
  return system(cmd) == 0 ? 0 : -1;
}

#define NEED_TOOLCHAIN()                                                                                           \
  do {                                                                                                             \
    if (!have_toolchain) {                                                                                         \
      printf("skipping: no NVRTC here (sm_80 is not offered), so the server cannot compile: "                     \
             "this case's compiles, fetches and cache checks are not checked\n");                                      \
      skip();                                                                                                      \
    }                                                                                                              \
  } while (0)

/* ---- the tests ---------------------------------------------------------------------------- */

static const char smem_hog[] =
    "{\"tlir\": 1, \"name\": \"smem_hog\",\n"
    " \"params\": [{\"name\": \"n\", \"kind\": \"scalar\", \"dtype\": \"int32\"},\n"
    "            {\"name\": \"a\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [\"n\"]},\n"
    "            {\"name\": \"b\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [\"n\"]}],\n"
    " \"kernel\": {\"grid\": [\"ceildiv(n, 32768)\"], \"threads\": 128, \"block_vars\": [\"bx\"], \"body\": [\n"
    "   {\"op\": \"alloc_shared\", \"name\": \"s\", \"shape\": [32768], \"dtype\": \"float32\"},\n"
    "   {\"op\": \"copy\", \"src\": \"a[bx * 32768]\", \"dst\": \"s\"},\n"
    "   {\"op\": \"copy\", \"src\": \"s\", \"dst\": \"b[bx * 32768]\"}]}}\n";

static void test_get_and_fetch(void **state) {
  (void)state;
  NEED_TOOLCHAIN();
  server_start(&main_srv, "main", NULL, (const char *const[]){"--workers", "2", NULL}, NULL);
  tl_client *c1 = client(main_srv.url, "c1.db");
  tl_error err;
  tl_client_request req = {.program = add_one, .name = "tilus_add_one.json"};
  tl_artifact *a = NULL;
  if (tl_client_get(c1, &req, "sm_90", &a, &err) != TL_OK)
    fail_msg("%s", err.message);
  assert_int_equal(tl_artifact_source(a), TL_SOURCE_COMPILED);
  assert_verified(a);
  assert_string_equal(tl_artifact_target(a), "sm_90");
  assert_string_equal(tl_artifact_entry(a), "add_one");
  assert_false(tl_artifact_is_ptx(a));
  size_t n;
  const unsigned char *bytes = tl_artifact_bytes(a, &n);
  assert_true(n > 4 && bytes[0] == 0x7f && bytes[1] == 'E'); /* an ELF cubin */
  /* what a launch needs, from the metadata alone */
  assert_int_equal(tl_artifact_nparams(a), 3);
  tl_param_info pi;
  assert_int_equal(tl_artifact_param(a, 1, &pi, &err), TL_OK);
  assert_string_equal(pi.name, "a");
  assert_true(pi.is_tensor);
  assert_string_equal(pi.dtype, "float32");
  assert_int_equal(pi.align, 16);
  assert_int_equal(tl_artifact_param(a, 3, &pi, &err), TL_INVALID_ARG);
  tl_kernel_arg args[3] = {tl_arg_int(1000), tl_arg_tensor(0), tl_arg_tensor(0)};
  int64_t grid[3], shape[TL_KERNEL_DIMS_MAX];
  int ndim;
  assert_int_equal(tl_artifact_grid(a, args, 3, grid, &err), TL_OK);
  assert_int_equal(grid[0], 8); /* ceildiv(1000, 128) */
  assert_int_equal(grid[1], 1);
  assert_int_equal(tl_artifact_shape(a, 2, args, 3, shape, &ndim, &err), TL_OK);
  assert_int_equal(ndim, 1);
  assert_int_equal(shape[0], 1000);
  char key[65], id[65];
  snprintf(key, sizeof key, "%s", tl_artifact_key(a));
  snprintf(id, sizeof id, "%s", tl_artifact_id(a));
  tl_artifact_free(a);

  /* the same request again: the local cache, no request at all */
  int64_t before = requests(c1);
  assert_int_equal(tl_client_get(c1, &req, "sm_90", &a, &err), TL_OK);
  assert_int_equal(tl_artifact_source(a), TL_SOURCE_LOCAL);
  assert_string_equal(tl_artifact_key(a), key);
  assert_verified(a);
  tl_artifact_free(a);
  assert_int_equal(requests(c1), before);

  /* keep-alive: every request of c1 went over one connection */
  tl_client_stats st1;
  tl_client_get_stats(c1, &st1);
  assert_true(st1.requests >= 2); /* the compile and the artifact */
  assert_int_equal(st1.connections, 1);

  /* another client with its own local cache: the server's cache */
  tl_client *c2 = client(main_srv.url, "c2.db");
  assert_int_equal(tl_client_get(c2, &req, "sm_90", &a, &err), TL_OK);
  assert_int_equal(tl_artifact_source(a), TL_SOURCE_SERVER_CACHE);
  assert_string_equal(tl_artifact_key(a), key);
  tl_artifact_free(a);
  /* by key: from its local cache now */
  before = requests(c2);
  assert_int_equal(tl_client_fetch_key(c2, key, &a, &err), TL_OK);
  assert_int_equal(tl_artifact_source(a), TL_SOURCE_LOCAL);
  tl_artifact_free(a);
  assert_int_equal(requests(c2), before);

  /* a third, empty local cache: by key through /v1/kernels, stored with the real manifest */
  tl_client *c3 = client(main_srv.url, "c3.db");
  assert_int_equal(tl_client_fetch_key(c3, key, &a, &err), TL_OK);
  assert_int_equal(tl_artifact_source(a), TL_SOURCE_SERVER_CACHE);
  assert_string_equal(tl_artifact_id(a), id);
  assert_verified(a);
  tl_artifact_free(a);
  tl_cache_build *b = NULL;
  assert_int_equal(tl_cache_get_build(c3->cache, key, &b, &err), TL_OK);
  assert_true(strncmp(b->manifest, "tl-build-key 1\n", 15) == 0);
  tl_cache_build_free(b);
  void *raw = NULL;
  assert_int_equal(tl_client_fetch_artifact(c3, id, &raw, &n, &err), TL_OK); /* local */
  char hex[65];
  assert_int_equal(tl_sha256_hex(raw, n, hex), TL_OK);
  assert_string_equal(hex, id);
  free(raw);
  tl_client *c4 = client(main_srv.url, "c4.db");
  assert_int_equal(tl_client_fetch_artifact(c4, id, &raw, &n, &err), TL_OK); /* from the server */
  assert_int_equal(tl_sha256_hex(raw, n, hex), TL_OK);
  assert_string_equal(hex, id);
  free(raw);
  static const char zeros[] = "0000000000000000000000000000000000000000000000000000000000000000";
  assert_int_equal(tl_client_fetch_key(c4, zeros, &a, &err), TL_NOT_FOUND);
  assert_non_null(strstr(err.message, main_srv.url));
  assert_int_equal(tl_client_fetch_artifact(c4, zeros, &raw, &n, &err), TL_NOT_FOUND);

  /* two targets, one failing: shared memory over sm_75's limit */
  tl_client_request hog = {.program = smem_hog, .name = "smem_hog.json"};
  const char *targets[2] = {"sm_75", "compute_90"};
  tl_target_result *res = NULL;
  if (tl_client_compile(c4, &hog, targets, 2, &res, &err) != TL_OK)
    fail_msg("%s", err.message);
  assert_int_equal(res[0].status, TL_LIMIT);
  assert_non_null(strstr(res[0].message, "shared memory"));
  assert_non_null(strstr(res[0].message, "smem_hog.json"));
  assert_non_null(strstr(res[0].message, "sm_75"));
  assert_non_null(strstr(res[0].message, main_srv.url));
  assert_null(res[0].metadata);
  assert_int_equal(res[1].status, TL_OK);
  assert_int_equal(res[1].cached, 0);
  assert_true(tl_hex_is_sha256(res[1].key));
  assert_int_equal(tl_client_fetch_result(c4, &res[0], &a, &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_fetch_result(c4, &res[1], &a, &err), TL_OK);
  assert_true(tl_artifact_is_ptx(a));
  assert_int_equal(a->meta->dyn_smem, 131072); /* above 48 KiB: the launch opts in */
  tl_launch_plan plan;
  tl_kernel_arg hargs[3] = {tl_arg_int(100000), tl_arg_tensor(0x1000), tl_arg_tensor(0x2000)};
  assert_int_equal(tl_launch_plan_make(a->meta, hargs, 3, &plan, &err), TL_OK);
  assert_int_equal(plan.dyn_smem, 131072);
  assert_int_equal(plan.grid[0], 4);
  tl_artifact_free(a);
  tl_target_results_free(res, 2);
  /* the single-target path reports the same failure */
  assert_int_equal(tl_client_get(c4, &hog, "sm_75", &a, &err), TL_LIMIT);
  assert_null(a);

  /* an invalid program: its diagnostics, with their pointers */
  const char *bad_prog = "{\"tlir\": 1, \"name\": \"bad\", \"params\": [], \"kernel\": {\"grid\": [\"nope + 1\"], "
                         "\"threads\": 32, \"block_vars\": [\"bx\"], \"body\": []}}";
  tl_client_request bad = {.program = bad_prog, .name = "bad.json"};
  assert_int_equal(tl_client_get(c4, &bad, "sm_90", &a, &err), TL_BAD_PROGRAM);
  assert_non_null(strstr(err.message, "bad.json"));
  assert_non_null(strstr(err.message, "/program/kernel/grid/0"));
  assert_non_null(strstr(err.message, "nope"));
  /* a target the server does not offer: the request as a whole fails */
  assert_int_equal(tl_client_get(c4, &req, "sm_999", &a, &err), TL_UNSUPPORTED);
  assert_string_equal(err.pointer, "/targets/0");
  tl_client_free(c1);
  tl_client_free(c2);
  tl_client_free(c3);
  tl_client_free(c4);
}

static void test_ptx_fallback(void **state) {
  (void)state;
  NEED_TOOLCHAIN();
  assert_true(main_srv.pid > 0);
  tl_client *c = client(main_srv.url, "ptx.db");
  tl_error err;
  logbuf log = {{0}};
  tl_client_set_log(c, to_log, &log);
  tl_client_request req = {.program = add_one, .name = "tilus_add_one.json"};
  tl_artifact *a = NULL;
  /* sm_95 is no target: the newest PTX below it, compute_90 */
  if (tl_client_get_for_arch(c, &req, 95, &a, &err) != TL_OK)
    fail_msg("%s", err.message);
  assert_string_equal(tl_artifact_target(a), "compute_90");
  assert_true(tl_artifact_is_ptx(a));
  assert_true(tl_target_runs_on(tl_artifact_target(a), 95));
  assert_non_null(strstr(log.text, "does not offer sm_95"));
  tl_artifact_free(a);
  /* an existing architecture gets its cubin */
  assert_int_equal(tl_client_get_for_arch(c, &req, 80, &a, &err), TL_OK);
  assert_string_equal(tl_artifact_target(a), "sm_80");
  tl_artifact_free(a);
  /* a compute-capability-9.0 GPU gets sm_90a (wgmma), which runs on it */
  assert_int_equal(tl_client_get_for_arch(c, &req, 90, &a, &err), TL_OK);
  assert_string_equal(tl_artifact_target(a), "sm_90a");
  assert_true(tl_target_runs_on(tl_artifact_target(a), 90));
  tl_artifact_free(a);
  /* the next start on the sm_95 GPU: no network at all */
  assert_int_equal(tl_client_set_offline(c, 1, &err), TL_OK);
  assert_int_equal(tl_client_get_for_arch(c, &req, 95, &a, &err), TL_OK);
  assert_string_equal(tl_artifact_target(a), "compute_90");
  assert_int_equal(tl_artifact_source(a), TL_SOURCE_LOCAL);
  tl_artifact_free(a);
  tl_client_free(c);
}

static void test_offline(void **state) {
  (void)state;
  NEED_TOOLCHAIN();
  assert_true(main_srv.pid > 0);
  server_stop(&main_srv);
  tl_client *c = client(main_srv.url, "c1.db");
  assert_int_equal(tl_client_set_retries(c, 1, NULL), TL_OK);
  logbuf log = {{0}};
  tl_client_set_log(c, to_log, &log);
  tl_error err;
  tl_client_request req = {.program = add_one, .name = "tilus_add_one.json"};
  tl_artifact *a = NULL;
  /* a start with the server gone: the local cache */
  assert_int_equal(tl_client_get(c, &req, "sm_90", &a, &err), TL_OK);
  assert_int_equal(tl_artifact_source(a), TL_SOURCE_LOCAL);
  assert_verified(a);
  char key[65];
  snprintf(key, sizeof key, "%s", tl_artifact_key(a));
  tl_artifact_free(a);
  assert_int_equal(requests(c), 0);
  assert_int_equal(tl_client_fetch_key(c, key, &a, &err), TL_OK);
  assert_int_equal(tl_artifact_source(a), TL_SOURCE_LOCAL);
  tl_artifact_free(a);
  /* another request for the same build (a constant set to its default):
   * not under this request key, but found by the build key computed here */
  tl_client_define same[1] = {{"block_n", "128"}};
  tl_client_request req2 = {.program = add_one, .name = "tilus_add_one.json", .defines = same, .ndefines = 1};
  if (tl_client_get(c, &req2, "sm_90", &a, &err) != TL_OK)
    fail_msg("%s\nlog:\n%s", err.message, log.text);
  assert_string_equal(tl_artifact_key(a), key);
  assert_int_equal(tl_artifact_source(a), TL_SOURCE_LOCAL);
  assert_non_null(strstr(log.text, "build key computed here"));
  tl_artifact_free(a);
  /* a build the local cache does not have: what failed and where */
  assert_int_equal(tl_client_get(c, &req, "sm_86", &a, &err), TL_NETWORK);
  assert_null(a);
  assert_non_null(strstr(err.message, "tilus_add_one.json"));
  assert_non_null(strstr(err.message, "sm_86"));
  assert_non_null(strstr(err.message, main_srv.url));
  assert_non_null(strstr(err.message, "c1.db"));
  assert_non_null(strstr(err.message, "cannot reach the server"));
  tl_client_free(c);
}

static void test_heal(void **state) {
  (void)state;
  NEED_TOOLCHAIN();
  /* the server back, on its database */
  server_start(&main_srv, "main", main_srv.db, (const char *const[]){"--workers", "2", NULL}, NULL);
  tl_client_request req = {.program = add_one, .name = "tilus_add_one.json"};
  tl_error err;
  tl_artifact *a = NULL;
  /* damage the stored binary of c1.db's sm_90 build (same size, other bytes) */
  tl_client *c = client(main_srv.url, "c1.db");
  assert_int_equal(tl_client_get(c, &req, "sm_90", &a, &err), TL_OK);
  char id[65];
  snprintf(id, sizeof id, "%s", tl_artifact_id(a));
  tl_artifact_free(a);
  tl_client_free(c);
  char stmt[256];
  snprintf(stmt, sizeof stmt, "UPDATE artifacts SET bytes = zeroblob(size) WHERE id = '%s'", id);
  sql("c1.db", stmt);
  c = client(main_srv.url, "c1.db");
  logbuf log = {{0}};
  tl_client_set_log(c, to_log, &log);
  assert_int_equal(tl_client_get(c, &req, "sm_90", &a, &err), TL_OK);
  assert_int_equal(tl_artifact_source(a), TL_SOURCE_SERVER_CACHE); /* fetched again */
  assert_string_equal(tl_artifact_id(a), id);
  assert_verified(a);
  tl_artifact_free(a);
  tl_client_stats s;
  tl_client_get_stats(c, &s);
  assert_int_equal(s.local_dropped, 1);
  assert_non_null(strstr(log.text, "damaged"));
  assert_int_equal(tl_client_get(c, &req, "sm_90", &a, &err), TL_OK); /* healed */
  assert_int_equal(tl_artifact_source(a), TL_SOURCE_LOCAL);
  tl_artifact_free(a);
  tl_client_free(c);
  /* damaged metadata: dropped and fetched again too */
  sql("c1.db", "UPDATE builds SET metadata = '{\"entry\": ' WHERE manifest LIKE 'tl-client-request 1%' AND target = 'sm_90'");
  c = client(main_srv.url, "c1.db");
  assert_int_equal(tl_client_get(c, &req, "sm_90", &a, &err), TL_OK);
  assert_int_not_equal(tl_artifact_source(a), TL_SOURCE_LOCAL);
  tl_artifact_free(a);
  tl_client_get_stats(c, &s);
  assert_int_equal(s.local_dropped, 1);
  tl_client_free(c);
}

typedef struct hang_arg {
  const char *url;
  tl_status status;
  char message[TL_ERROR_MESSAGE_MAX];
} hang_arg;

static void *hang_thread(void *p) {
  hang_arg *h = p;
  tl_client *c;
  tl_error err;
  if (tl_client_new(&c, &err) != TL_OK)
    return NULL;
  tl_client_set_server(c, h->url, NULL);
  tl_client_set_cache_path(c, NULL, NULL);
  tl_client_set_retries(c, 0, NULL);
  char *prog = example("tilus_add_one");
  char *at = strstr(prog, "\"add_one\"");
  memcpy(at, "\"hangme\" ", 9);
  tl_client_request req = {.program = prog, .name = "hangme.json"};
  const char *t[1] = {"sm_90"};
  tl_target_result *res = NULL;
  h->status = tl_client_compile(c, &req, t, 1, &res, &err);
  if (h->status == TL_OK)
    h->status = res[0].status;
  snprintf(h->message, sizeof h->message, "%s", h->status == TL_OK ? "" : res ? res[0].message : err.message);
  tl_target_results_free(res, 1);
  free(prog);
  tl_client_free(c);
  return NULL;
}

static void test_busy(void **state) {
  (void)state;
  NEED_TOOLCHAIN();
  server busy;
  server_start(&busy, "busy", NULL,
               (const char *const[]){"--workers", "1", "--queue", "0", "--test-hooks", "--compile-timeout", "3",
                                     "--max-compiles-per-client", "0", /* the full queue's 503, not the share's 429 */
                                     NULL},
               (const char *const[]){"TL_TEST_HANG_ON=hangme", NULL});
  hang_arg h = {.url = busy.url};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, hang_thread, &h), 0);
  sleep_ms(500); /* the only worker now hangs on hangme */
  tl_client_request req = {.program = add_one, .name = "tilus_add_one.json"};
  tl_error err;
  tl_artifact *a = NULL;
  tl_client *c = client(busy.url, "busy.db");
  assert_int_equal(tl_client_set_retries(c, 0, &err), TL_OK);
  tl_status st = tl_client_get(c, &req, "sm_86", &a, &err);
  if (st != TL_BUSY)
    fail_msg("without retries: %s: %s", tl_strerror(st), err.message);
  assert_non_null(strstr(err.message, "503"));
  assert_non_null(strstr(err.message, busy.url));
  /* with retries: 503 with Retry-After: 1 until the hung compile is killed (3 s), then the compile */
  assert_int_equal(tl_client_set_retries(c, 8, &err), TL_OK);
  logbuf log = {{0}};
  tl_client_set_log(c, to_log, &log);
  if (tl_client_get(c, &req, "sm_86", &a, &err) != TL_OK)
    fail_msg("with retries: %s\nlog:\n%s", err.message, log.text);
  assert_verified(a);
  tl_artifact_free(a);
  tl_client_stats s;
  tl_client_get_stats(c, &s);
  printf("busy: %lld retries before the compile went through\n", (long long)s.retries);
  assert_true(s.retries >= 1);
  assert_non_null(strstr(log.text, "503"));
  assert_non_null(strstr(log.text, "Retry-After"));
  pthread_join(th, NULL);
  assert_int_equal(h.status, TL_TIMEOUT);
  tl_client_free(c);
  server_stop(&busy);
}

static void test_tokens(void **state) {
  (void)state;
  NEED_TOOLCHAIN();
  char tokens[600];
  snprintf(tokens, sizeof tokens, "%s/tokens", tmp_root);
  FILE *f = fopen(tokens, "w");
  assert_non_null(f);
  fputs("read-token-0123456789abcdef read\ncompile-token-0123456789abcdef compile\n", f);
  fclose(f);
  assert_int_equal(chmod(tokens, 0600), 0); /* the server refuses tokens others can read */
  server auth;
  server_start(&auth, "auth", NULL, (const char *const[]){"--workers", "1", "--tokens", tokens, NULL}, NULL);
  tl_client *c = client(auth.url, "auth.db");
  tl_error err;
  tl_client_request req = {.program = add_one, .name = "tilus_add_one.json"};
  tl_artifact *a = NULL;
  assert_int_equal(tl_client_get(c, &req, "sm_90", &a, &err), TL_UNAUTHORIZED);
  assert_non_null(strstr(err.message, "token"));
  assert_non_null(strstr(err.message, auth.url));
  assert_int_equal(tl_client_set_token(c, "wrong-token-0123456789abcdef", &err), TL_OK);
  assert_int_equal(tl_client_get(c, &req, "sm_90", &a, &err), TL_UNAUTHORIZED);
  char *info = NULL;
  assert_int_equal(tl_client_info(c, &info, &err), TL_UNAUTHORIZED);
  assert_int_equal(tl_client_set_token(c, "read-token-0123456789abcdef", &err), TL_OK);
  assert_int_equal(tl_client_get(c, &req, "sm_90", &a, &err), TL_FORBIDDEN);
  assert_non_null(strstr(err.message, "token"));
  assert_int_equal(tl_client_info(c, &info, &err), TL_OK);
  assert_non_null(strstr(info, "\"auth\": true"));
  free(info);
  assert_int_equal(tl_client_set_token(c, "compile-token-0123456789abcdef", &err), TL_OK);
  if (tl_client_get(c, &req, "sm_90", &a, &err) != TL_OK)
    fail_msg("%s", err.message);
  char key[65];
  snprintf(key, sizeof key, "%s", tl_artifact_key(a));
  tl_artifact_free(a);
  /* a reader fetches by key */
  tl_client *r = client(auth.url, "auth-reader.db");
  assert_int_equal(tl_client_set_token(r, "read-token-0123456789abcdef", &err), TL_OK);
  assert_int_equal(tl_client_fetch_key(r, key, &a, &err), TL_OK);
  assert_verified(a);
  tl_artifact_free(a);
  tl_client_free(r);
  tl_client_free(c);
  server_stop(&auth);
}

/* Several servers (replicas): the first refuses connections (port 1 on
 * loopback), so the request goes on to the second within the retries, and
 * the second stays current for the next request. */
static void test_failover(void **state) {
  (void)state;
  NEED_TOOLCHAIN();
  server srv;
  server_start(&srv, "failover", NULL, (const char *const[]){"--workers", "1", NULL}, NULL);
  char list[200];
  snprintf(list, sizeof list, "http://127.0.0.1:1/,%s", srv.url);
  tl_client *c = client(list, "failover.db");
  tl_error err;
  char *info = NULL;
  assert_int_equal(tl_client_set_retries(c, 0, &err), TL_OK);
  assert_int_equal(tl_client_info(c, &info, &err), TL_NETWORK); /* no retry, no second server */
  assert_int_equal(tl_client_set_retries(c, 1, &err), TL_OK);
  if (tl_client_info(c, &info, &err) != TL_OK)
    fail_msg("failover: %s", err.message);
  free(info);
  tl_client_stats s;
  tl_client_get_stats(c, &s);
  assert_int_equal(s.retries, 1);
  tl_client_request req = {.program = add_one, .name = "tilus_add_one.json"};
  tl_artifact *a = NULL;
  if (tl_client_get(c, &req, "sm_80", &a, &err) != TL_OK)
    fail_msg("compile after the failover: %s", err.message);
  assert_verified(a);
  tl_artifact_free(a);
  tl_client_get_stats(c, &s);
  assert_int_equal(s.retries, 1); /* the replica that answered stayed current */
  tl_client_free(c);
  server_stop(&srv);
}

/* The server's count of GET /v1/tunings answered with code (its /metrics). */
static long tuning_gets(const char *url, int code) {
  tl_client *m = client(url, "metrics.db");
  tl_http_response r;
  tl_error err;
  assert_int_equal(tl_http_request(m, "GET", "/metrics", NULL, 0, 1 << 22, &r, &err), TL_OK);
  assert_int_equal(r.status, 200);
  char series[80];
  snprintf(series, sizeof series, "tlserverd_requests_total{route=\"tunings\",code=\"%d\"} ", code);
  const char *at = strstr(r.body, series);
  long n = at ? strtol(at + strlen(series), NULL, 10) : 0;
  tl_http_response_free(&r);
  tl_client_free(m);
  return n;
}

/* Waits (up to 10 s) until the server has counted `want` requests to the
 * tunings route with status `code`, then checks that it counted no more:
 * tlserverd counts a request once it has been answered (http.c's
 * on_completed), which may come after the client has read the answer and
 * asked /metrics on another connection (a machine under load). */
static void expect_tuning_gets(const char *url, int code, long want) {
  long n = tuning_gets(url, code);
  for (int i = 0; i < 500 && n < want; i++) {
    sleep_ms(20);
    n = tuning_gets(url, code);
  }
  assert_int_equal(n, want);
}

/* The build key tl_client_get gives for req on sm_80. */
static void get_key(tl_client *c, const tl_client_request *req, char key[65]) {
  tl_artifact *a = NULL;
  tl_error err;
  if (tl_client_get(c, req, "sm_80", &a, &err) != TL_OK)
    fail_msg("get: %s", err.message);
  snprintf(key, 65, "%s", tl_artifact_key(a));
  tl_artifact_free(a);
}

static void test_tuning_memo(void **state) {
  (void)state;
  NEED_TOOLCHAIN();
  server srv;
  server_start(&srv, "memo", NULL, (const char *const[]){"--workers", "1", NULL}, NULL);
  const char *dev = "memo test device (sm_80)";
  tl_error err;
  tl_client_request req = {.program = add_one, .name = "tilus_add_one.json"};
  tl_client_define d128 = {"block_n", "128"}, d64 = {"block_n", "64"}, d32 = {"block_n", "32"};
  tl_client_request other = {.program = add_one, .name = "tilus_add_one.json", .defines = &d128, .ndefines = 1};
  /* the builds each record should give, through a client without tuning */
  tl_client *plain = client(srv.url, "memo-plain.db");
  char want64[65], want32[65], want128[65], k[65];
  get_key(plain, &(tl_client_request){.program = add_one, .defines = &d64, .ndefines = 1}, want64);
  get_key(plain, &(tl_client_request){.program = add_one, .defines = &d32, .ndefines = 1}, want32);
  get_key(plain, &other, want128);
  /* another node records block_n=64 for the program with no overrides */
  assert_int_equal(tl_client_tuning_record(plain, &req, dev, &d64, 1, 1.0, NULL, &err), TL_OK);
  tl_client_free(plain);

  tl_client *c = client(srv.url, "memo.db");
  assert_int_equal(tl_client_set_tuning(c, dev, &err), TL_OK);
  long ok0 = 1, none0 = 0; /* a new server: the one POST above */
  expect_tuning_gets(srv.url, 200, ok0);
  expect_tuning_gets(srv.url, 404, none0);
  for (int i = 0; i < 10; i++) { /* ten gets: one lookup */
    get_key(c, &req, k);
    assert_string_equal(k, want64);
  }
  expect_tuning_gets(srv.url, 200, ok0 + 1);
  for (int i = 0; i < 5; i++) { /* another shape class, none recorded: one lookup, kept too */
    get_key(c, &other, k);
    assert_string_equal(k, want128);
  }
  expect_tuning_gets(srv.url, 404, none0 + 1);
  /* this client's own record replaces its answer at once: no lookup */
  assert_int_equal(tl_client_tuning_record(c, &req, dev, &d32, 1, 0.5, NULL, &err), TL_OK);
  ok0++; /* the route's 200s count that POST too */
  get_key(c, &req, k);
  assert_string_equal(k, want32);
  expect_tuning_gets(srv.url, 200, ok0 + 1);
  /* TTL 0: every get asks */
  assert_int_equal(tl_client_set_tuning_ttl_ms(c, -1, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "0 to 86400000 ms"));
  assert_int_equal(tl_client_set_tuning_ttl_ms(c, 0, &err), TL_OK);
  for (int i = 0; i < 3; i++)
    get_key(c, &req, k);
  expect_tuning_gets(srv.url, 200, ok0 + 4);
  /* a short TTL: kept within it, asked again after it */
  assert_int_equal(tl_client_set_tuning_ttl_ms(c, 1000, &err), TL_OK);
  get_key(c, &req, k);
  get_key(c, &req, k);
  expect_tuning_gets(srv.url, 200, ok0 + 5);
  sleep_ms(1100);
  get_key(c, &req, k);
  expect_tuning_gets(srv.url, 200, ok0 + 6);
  /* tuning set again (and a dup) starts with nothing kept */
  assert_int_equal(tl_client_set_tuning(c, dev, &err), TL_OK);
  get_key(c, &req, k);
  expect_tuning_gets(srv.url, 200, ok0 + 7);
  tl_client *d = NULL;
  assert_int_equal(tl_client_dup(c, &d, &err), TL_OK);
  get_key(d, &req, k);
  get_key(d, &req, k);
  assert_string_equal(k, want32);
  expect_tuning_gets(srv.url, 200, ok0 + 8);
  tl_client_free(d);
  tl_client_free(c);
  server_stop(&srv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_failover),
      cmocka_unit_test(test_get_and_fetch), cmocka_unit_test(test_ptx_fallback), cmocka_unit_test(test_offline),
      cmocka_unit_test(test_heal),          cmocka_unit_test(test_busy),         cmocka_unit_test(test_tokens),
      cmocka_unit_test(test_tuning_memo),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
