/*
 * test_server_e2e.c - end-to-end tests of tlserverd: a real server process
 * (build/bin/tlserverd) on a loopback port it picks itself (--listen
 * 127.0.0.1:0, the port read back from --port-file), driven by a C client
 * on libcurl, with real compiles through NVRTC.
 *
 *   compile_fetch     every example for sm_90a and sm_100a; fetch each
 *                     artifact and check its SHA-256 against the id and the
 *                     ETag; HEAD, If-None-Match -> 304, Range -> 206/416;
 *                     the same request again is a hit (in the answer and in
 *                     /metrics); /v1/kernels/KEY
 *   singleflight      50 concurrent identical requests -> exactly one compile
 *   isolation         a worker that aborts (500) or hangs (504) costs one
 *                     request; a full queue gives 503 with Retry-After
 *   kill9             SIGKILL during a stream of compiles; after a restart
 *                     every acknowledged build is a hit and the database
 *                     passes PRAGMA integrity_check
 *   graceful          SIGTERM while a compile runs: it finishes and is
 *                     answered, the server exits 0, the build is kept
 *   shutdown_cancel   SIGTERM while a compile hangs: cancelled after the
 *                     grace period, answered 503, exit 0
 *   eviction          --cache-max-bytes is enforced in the background
 *   integrity         a damaged artifact is a 404, counted in /metrics, and
 *                     healed by the next compile
 *   target_misfit     a program that needs what its target lacks (more
 *                     shared memory than sm_75 has) is a 422 with a
 *                     diagnostic pointing into the program, not a
 *                     toolchain error; gemm builds for sm_75; /v1/info
 *                     describes every offered target
 *   not_offered       /v1/info's targets_not_offered names the known AMD
 *                     targets the toolchain refuses (gfx950 with clang 19),
 *                     each with the reason this test's own process finds;
 *                     a compile request for one is refused with it;
 *                     /v1/info's nvjitlink is the PTX back end's assembler
 *                     this process finds (or null, with nvjitlink_error),
 *                     and ptxas its whole-program one (or ptxas_error)
 *
 * Skips (exit 0 with a message) when the server has no toolchain (NVRTC).
 * Environment: TL_BUILD (default build), TL_SRCDIR (default .).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>
#include <jansson.h>
#include <sqlite3.h>
#include "../../proto/tl_hash.h"
#include "../../compiler/tlcompiler.h"

/* ==== helpers: the server process ======================================================= */

typedef struct server {
  pid_t pid;
  int port;
  char dir[512];
  char db[600];
  char base[64]; /* http://127.0.0.1:PORT */
} server;

static char tmp_root[256];

/* Every server started and not yet stopped, so that the group teardown can
 * stop the ones a failed test left behind. */
static pid_t live_pids[64];

static void track(pid_t pid, bool alive) {
  for (int i = 0; i < 64; i++) {
    if (alive && live_pids[i] == 0) {
      live_pids[i] = pid;
      return;
    }
    if (!alive && live_pids[i] == pid) {
      live_pids[i] = 0;
      return;
    }
  }
}

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

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Starts tlserverd with the given extra flags (NULL-terminated) and extra
 * environment (NAME=VALUE, NULL-terminated) on a fresh port; db is the
 * database file (reused across restarts).  Fails the test when it does not
 * come up within 30 s. */
static void server_start(server *s, const char *name, const char *db, const char *const *flags,
                         const char *const *env) {
  memset(s, 0, sizeof *s);
  snprintf(s->dir, sizeof s->dir, "%s/%s", tmp_root, name);
  mkdir(s->dir, 0700);
  if (db)
    snprintf(s->db, sizeof s->db, "%s", db);
  else
    snprintf(s->db, sizeof s->db, "%s/cache.db", s->dir);
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
      dup2(fd, 2);
      dup2(fd, 1);
    }
    for (int i = 0; env && env[i]; i++)
      putenv((char *)env[i]);
    execv(exe, (char *const *)argv);
    _exit(127);
  }
  s->pid = pid;
  track(pid, true);
  for (int i = 0; i < 1500; i++) {
    FILE *f = fopen(portfile, "r");
    if (f) {
      int ok = fscanf(f, "%d", &s->port);
      fclose(f);
      if (ok == 1 && s->port > 0) {
        snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", s->port);
        return;
      }
    }
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      s->pid = 0;
      track(pid, false);
      char cmd[700];
      snprintf(cmd, sizeof cmd, "tail -n 20 '%s' >&2", log);
      if (system(cmd) != 0)
        fprintf(stderr, "(cannot show %s)\n", log);
      fail_msg("tlserverd exited during start-up (status %d); see %s", status, log);
    }
    sleep_ms(20);
  }
  fail_msg("tlserverd did not start within 30 s; see %s", log);
}

/* Sends sig and waits up to 60 s; returns the wait status. */
static int server_stop(server *s, int sig) {
  if (s->pid <= 0)
    return -1;
  kill(s->pid, sig);
  int status = -1;
  for (int i = 0; i < 6000; i++) {
    if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
      track(s->pid, false);
      s->pid = 0;
      if (sig == SIGTERM && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        /* the caller fails on this; show why the server did not exit cleanly */
        char cmd[700];
        snprintf(cmd, sizeof cmd, "tail -n 20 '%s/server.log' >&2", s->dir);
        fprintf(stderr, "tlserverd ended with status %#x after SIGTERM; its log ends:\n", status);
        if (system(cmd) != 0)
          fprintf(stderr, "(cannot show %s/server.log)\n", s->dir);
      }
      return status;
    }
    sleep_ms(10);
  }
  kill(s->pid, SIGKILL);
  waitpid(s->pid, &status, 0);
  track(s->pid, false);
  s->pid = 0;
  fail_msg("tlserverd did not stop within 60 s of signal %d", sig);
  return status;
}

/* ==== helpers: HTTP =========================================================================== */

typedef struct resp {
  long status;
  char *body;
  size_t len;
  char *hdrs;
  size_t hlen;
  CURLcode rc;
} resp;

typedef struct sink {
  char *data;
  size_t len;
} sink;

static size_t sink_write(char *p, size_t sz, size_t n, void *user) {
  sink *s = user;
  size_t k = sz * n;
  char *nd = realloc(s->data, s->len + k + 1);
  if (!nd)
    return 0;
  memcpy(nd + s->len, p, k);
  s->data = nd;
  s->len += k;
  s->data[s->len] = 0;
  return k;
}

typedef struct req_ctx {
  CURL *h;
  struct curl_slist *hl;
  sink body, hdrs;
} req_ctx;

static void req_init(req_ctx *c, const server *s, const char *method, const char *path,
                     const char *body, const char *const *headers) {
  memset(c, 0, sizeof *c);
  c->h = curl_easy_init();
  assert_non_null(c->h);
  char url[512];
  snprintf(url, sizeof url, "%s%s", s->base, path);
  curl_easy_setopt(c->h, CURLOPT_URL, url);
  curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, sink_write);
  curl_easy_setopt(c->h, CURLOPT_WRITEDATA, &c->body);
  curl_easy_setopt(c->h, CURLOPT_HEADERFUNCTION, sink_write);
  curl_easy_setopt(c->h, CURLOPT_HEADERDATA, &c->hdrs);
  curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 120L);
  curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
  if (strcmp(method, "HEAD") == 0)
    curl_easy_setopt(c->h, CURLOPT_NOBODY, 1L);
  else if (strcmp(method, "GET") != 0)
    curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, method);
  if (body) {
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    c->hl = curl_slist_append(c->hl, "Content-Type: application/json");
  }
  for (int i = 0; headers && headers[i]; i++)
    c->hl = curl_slist_append(c->hl, headers[i]);
  c->hl = curl_slist_append(c->hl, "Expect:");
  curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->hl);
}

static resp req_finish(req_ctx *c, CURLcode rc) {
  resp r = {0};
  r.rc = rc;
  curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &r.status);
  r.body = c->body.data ? c->body.data : strdup("");
  r.len = c->body.len;
  r.hdrs = c->hdrs.data ? c->hdrs.data : strdup("");
  r.hlen = c->hdrs.len;
  curl_slist_free_all(c->hl);
  curl_easy_cleanup(c->h);
  return r;
}

static resp http(const server *s, const char *method, const char *path, const char *body,
                 const char *const *headers) {
  req_ctx c;
  req_init(&c, s, method, path, body, headers);
  CURLcode rc = curl_easy_perform(c.h);
  return req_finish(&c, rc);
}

/* Fails the test, showing the answer, unless r has the status. */
#define expect_status(r, want)                                                                  \
  do {                                                                                          \
    if ((r).status != (want))                                                                   \
      fail_msg("status %ld, expected %d (curl: %s): %.600s", (r).status, (want),               \
               curl_easy_strerror((r).rc), (r).body ? (r).body : "");                           \
  } while (0)

static void resp_free(resp *r) {
  free(r->body);
  free(r->hdrs);
  memset(r, 0, sizeof *r);
}

/* The value of header name (case-insensitive) in r, in buf; NULL when absent. */
static const char *header(const resp *r, const char *name, char *buf, size_t n) {
  size_t nl = strlen(name);
  for (const char *p = r->hdrs; p && *p;) {
    const char *e = strstr(p, "\r\n");
    if (!e)
      break;
    if ((size_t)(e - p) > nl + 1 && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
      const char *v = p + nl + 1;
      while (*v == ' ')
        v++;
      size_t k = (size_t)(e - v);
      if (k >= n)
        k = n - 1;
      memcpy(buf, v, k);
      buf[k] = 0;
      return buf;
    }
    p = e + 2;
  }
  return NULL;
}

/* Runs n requests at once (curl multi) and fills out[i]. */
static void http_many(const server *s, const char *method, const char *path, char **bodies,
                      int n, resp *out) {
  CURLM *m = curl_multi_init();
  req_ctx *c = calloc((size_t)n, sizeof *c);
  assert_non_null(c);
  for (int i = 0; i < n; i++) {
    req_init(&c[i], s, method, path, bodies[i], NULL);
    curl_easy_setopt(c[i].h, CURLOPT_PRIVATE, (void *)(intptr_t)i);
    curl_multi_add_handle(m, c[i].h);
  }
  int running = n;
  CURLcode rcs[1024];
  for (int i = 0; i < n; i++)
    rcs[i] = CURLE_OK;
  while (running > 0) {
    curl_multi_perform(m, &running);
    int q;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(m, &q))) {
      if (msg->msg == CURLMSG_DONE) {
        void *priv;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&priv);
        rcs[(intptr_t)priv] = msg->data.result;
      }
    }
    if (running > 0)
      curl_multi_poll(m, NULL, 0, 100, NULL);
  }
  for (int i = 0; i < n; i++) {
    curl_multi_remove_handle(m, c[i].h);
    out[i] = req_finish(&c[i], rcs[i]);
  }
  free(c);
  curl_multi_cleanup(m);
}

/* A sample of /metrics: the value of the line "name value" (name with its
 * labels exactly as printed); -1 when absent or when /metrics fails.  No
 * cmocka assertion inside: forked helper processes call it too. */
static double metric(const server *s, const char *name) {
  resp r = http(s, "GET", "/metrics", NULL, NULL);
  if (r.status != 200) {
    resp_free(&r);
    return -1;
  }
  double v = -1;
  size_t nl = strlen(name);
  for (char *p = r.body; p && *p;) {
    char *e = strchr(p, '\n');
    if (strncmp(p, name, nl) == 0 && p[nl] == ' ') {
      v = strtod(p + nl + 1, NULL);
      break;
    }
    p = e ? e + 1 : NULL;
  }
  resp_free(&r);
  return v;
}

/* ==== helpers: programs ======================================================================= */

/* A compile request for the example file with the given targets; when
 * rename is set, the program is renamed (a different build key). */
static char *compile_body(const char *example, const char *const *targets, int nt,
                          const char *rename) {
  char path[512];
  snprintf(path, sizeof path, "%s/examples/%s", src_dir(), example);
  json_error_t je;
  json_t *prog = json_load_file(path, 0, &je);
  assert_non_null(prog);
  if (rename)
    json_object_set_new(prog, "name", json_string(rename));
  json_t *t = json_array();
  for (int i = 0; i < nt; i++)
    json_array_append_new(t, json_string(targets[i]));
  json_t *req = json_pack("{s:o, s:o}", "program", prog, "targets", t);
  char *s = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  return s;
}

static json_t *parse(const resp *r) {
  json_error_t je;
  json_t *j = json_loadb(r->body, r->len, 0, &je);
  if (!j)
    fail_msg("not JSON (%s): %.300s", je.text, r->body);
  return j;
}

/* Whether the server offers NVIDIA targets (NVRTC): the compile tests use
 * sm_80 and sm_90a; an AMD toolchain alone does not do. */
static bool have_toolchain(const server *s) {
  resp r = http(s, "GET", "/v1/info", NULL, NULL);
  json_t *j = parse(&r);
  bool ok = false;
  size_t i;
  json_t *t;
  json_array_foreach(json_object_get(j, "targets"), i, t) ok |= json_is_string(t) && !strcmp(json_string_value(t), "sm_80");
  json_decref(j);
  resp_free(&r);
  return ok;
}

/* ==== fixtures ================================================================================ */

static server main_srv;
static bool no_toolchain;

static int group_setup(void **state) {
  curl_global_init(CURL_GLOBAL_ALL);
  snprintf(tmp_root, sizeof tmp_root, "/tmp/tl-server-e2e-XXXXXX");
  if (!mkdtemp(tmp_root))
    return -1;
  /* every request of this test comes from one address, several at once:
   * no per-client share (http_attacks.py's "share" group tests it) */
  const char *flags[] = {"--workers", "2", "--max-compiles-per-client", "0", NULL};
  server_start(&main_srv, "main", NULL, flags, NULL);
  no_toolchain = !have_toolchain(&main_srv);
  if (no_toolchain)
    fprintf(stderr, "test_server_e2e: the server found no toolchain (NVRTC); compile tests skip\n");
  return 0;
}

static void rm_tree(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
        continue;
      char p[1024];
      snprintf(p, sizeof p, "%s/%s", path, e->d_name);
      struct stat st;
      if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
        rm_tree(p);
      else
        unlink(p);
    }
    closedir(d);
  }
  rmdir(path);
}

static int group_teardown(void **state) {
  if (main_srv.pid > 0) {
    int st = server_stop(&main_srv, SIGTERM);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fprintf(stderr, "test_server_e2e: the main server did not exit cleanly (status %d)\n", st);
  }
  for (int i = 0; i < 64; i++) { /* left behind by a failed test */
    if (live_pids[i] > 0) {
      kill(live_pids[i], SIGKILL);
      waitpid(live_pids[i], NULL, 0);
      live_pids[i] = 0;
    }
  }
  if (!getenv("TL_KEEP_TMP"))
    rm_tree(tmp_root);
  curl_global_cleanup();
  return 0;
}

#define NEED_TOOLCHAIN()                                                                        \
  do {                                                                                          \
    if (no_toolchain) {                                                                         \
      printf("skipping: the server offers no sm_80 (no NVRTC here): this case's compiles are "    \
             "not checked\n");                                                                  \
      skip();                                                                                   \
    }                                                                                           \
  } while (0)

/* ==== tests ================================================================================= */

static void check_artifact(const server *s, const char *id, int64_t size) {
  char path[128], buf[256], want_etag[80];
  snprintf(path, sizeof path, "/v1/artifacts/%s", id);
  snprintf(want_etag, sizeof want_etag, "\"%s\"", id);

  resp r = http(s, "GET", path, NULL, NULL);
  expect_status(r, 200);
  assert_int_equal((int64_t)r.len, size);
  char hex[65];
  assert_int_equal(tl_sha256_hex(r.body, r.len, hex), TL_OK);
  assert_string_equal(hex, id);
  assert_non_null(header(&r, "ETag", buf, sizeof buf));
  assert_string_equal(buf, want_etag);
  assert_non_null(header(&r, "Cache-Control", buf, sizeof buf));
  assert_string_equal(buf, "public, max-age=31536000, immutable");
  resp_free(&r);

  r = http(s, "HEAD", path, NULL, NULL);
  expect_status(r, 200);
  assert_int_equal(r.len, 0);
  assert_non_null(header(&r, "Content-Length", buf, sizeof buf));
  assert_int_equal(atoll(buf), size);
  resp_free(&r);

  char inm[100];
  snprintf(inm, sizeof inm, "If-None-Match: %s", want_etag);
  const char *h1[] = {inm, NULL};
  r = http(s, "GET", path, NULL, h1);
  expect_status(r, 304);
  assert_int_equal(r.len, 0);
  resp_free(&r);

  const char *h2[] = {"If-None-Match: \"0000\"", NULL};
  r = http(s, "GET", path, NULL, h2);
  expect_status(r, 200);
  resp_free(&r);

  const char *h3[] = {"Range: bytes=0-15", NULL};
  resp full = http(s, "GET", path, NULL, NULL);
  r = http(s, "GET", path, NULL, h3);
  expect_status(r, 206);
  assert_int_equal(r.len, 16);
  assert_memory_equal(r.body, full.body, 16);
  assert_non_null(header(&r, "Content-Range", buf, sizeof buf));
  char want[80];
  snprintf(want, sizeof want, "bytes 0-15/%lld", (long long)size);
  assert_string_equal(buf, want);
  resp_free(&r);

  const char *h4[] = {"Range: bytes=-10", NULL};
  r = http(s, "GET", path, NULL, h4);
  expect_status(r, 206);
  assert_int_equal(r.len, 10);
  assert_memory_equal(r.body, full.body + size - 10, 10);
  resp_free(&r);

  char big[64];
  snprintf(big, sizeof big, "Range: bytes=%lld-", (long long)size);
  const char *h5[] = {big, NULL};
  r = http(s, "GET", path, NULL, h5);
  expect_status(r, 416);
  resp_free(&r);
  resp_free(&full);
}

static void test_compile_fetch(void **state) {
  NEED_TOOLCHAIN();
  server *s = &main_srv;
  /* two targets every example fits (flash attention's tiles need more
   * shared memory than sm_80 has) */
  const char *targets[] = {"sm_90a", "sm_100a"};
  DIR *d = opendir("examples");
  char exdir[512];
  snprintf(exdir, sizeof exdir, "%s/examples", src_dir());
  if (d)
    closedir(d);
  d = opendir(exdir);
  assert_non_null(d);
  char *names[64];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < 64) {
    size_t l = strlen(e->d_name);
    if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0)
      names[n++] = strdup(e->d_name);
  }
  closedir(d);
  assert_true(n >= 2);

  double hits0 = metric(s, "tlserverd_cache_hits_total");
  double ok0 = metric(s, "tlserverd_compiles_total{outcome=\"ok\"}");
  char **bodies = calloc((size_t)n, sizeof *bodies);
  resp *rs = calloc((size_t)n, sizeof *rs);
  for (int i = 0; i < n; i++)
    bodies[i] = compile_body(names[i], targets, 2, NULL);
  double t0 = now_s();
  http_many(s, "POST", "/v1/compile", bodies, n, rs);
  fprintf(stderr, "compiled %d examples for 2 targets in %.2f s\n", n, now_s() - t0);

  char keys[64][2][65];
  for (int i = 0; i < n; i++) {
    if (rs[i].status != 200)
      fail_msg("%s: status %ld: %.400s", names[i], rs[i].status, rs[i].body);
    json_t *j = parse(&rs[i]);
    json_t *res = json_object_get(j, "results");
    assert_int_equal(json_array_size(res), 2);
    for (int t = 0; t < 2; t++) {
      json_t *x = json_array_get(res, (size_t)t);
      assert_string_equal(json_string_value(json_object_get(x, "target")), targets[t]);
      assert_string_equal(json_string_value(json_object_get(x, "status")), "ok");
      const char *key = json_string_value(json_object_get(x, "key"));
      const char *art = json_string_value(json_object_get(x, "artifact"));
      assert_true(tl_hex_is_sha256(key));
      assert_true(tl_hex_is_sha256(art));
      assert_true(json_is_false(json_object_get(x, "cached")));
      assert_true(json_is_object(json_object_get(x, "meta")));
      assert_non_null(json_object_get(json_object_get(x, "meta"), "entry"));
      assert_int_equal(json_array_size(json_object_get(x, "diagnostics")), 0);
      json_int_t size = json_integer_value(json_object_get(x, "size"));
      assert_true(size > 0);
      strcpy(keys[i][t], key);
      check_artifact(s, art, size);
      /* a cubin is an ELF file */
      char path[128];
      snprintf(path, sizeof path, "/v1/artifacts/%s", art);
      resp a = http(s, "GET", path, NULL, NULL);
      assert_memory_equal(a.body, "\177ELF", 4);
      resp_free(&a);
    }
    json_decref(j);
    resp_free(&rs[i]);
  }
  assert_true(metric(s, "tlserverd_compiles_total{outcome=\"ok\"}") - ok0 == 2.0 * n);

  /* the same requests again: hits, in the answers and in /metrics */
  for (int i = 0; i < n; i++) {
    resp r = http(s, "POST", "/v1/compile", bodies[i], NULL);
    expect_status(r, 200);
    json_t *j = parse(&r);
    for (int t = 0; t < 2; t++) {
      json_t *x = json_array_get(json_object_get(j, "results"), (size_t)t);
      assert_true(json_is_true(json_object_get(x, "cached")));
      assert_string_equal(json_string_value(json_object_get(x, "key")), keys[i][t]);
    }
    json_decref(j);
    resp_free(&r);
  }
  assert_true(metric(s, "tlserverd_cache_hits_total") - hits0 == 2.0 * n);
  assert_true(metric(s, "tlserverd_compiles_total{outcome=\"ok\"}") - ok0 == 2.0 * n);
  /* the artifacts were served from memory after their first read */
  assert_true(metric(s, "tlserverd_artifact_lookups_total{result=\"memory\"}") > 0);
  assert_true(metric(s, "tlserverd_artifact_bytes_served_total") > 0);

  /* the metadata of a build by its key */
  char path[128];
  snprintf(path, sizeof path, "/v1/kernels/%s", keys[0][0]);
  resp r = http(s, "GET", path, NULL, NULL);
  expect_status(r, 200);
  json_t *j = parse(&r);
  assert_string_equal(json_string_value(json_object_get(j, "key")), keys[0][0]);
  assert_string_equal(json_string_value(json_object_get(j, "target")), "sm_90a");
  assert_true(strlen(json_string_value(json_object_get(j, "manifest"))) > 0);
  json_decref(j);
  resp_free(&r);
  r = http(s, "GET", "/v1/kernels/0000000000000000000000000000000000000000000000000000000000000000",
           NULL, NULL);
  expect_status(r, 404);
  resp_free(&r);

  for (int i = 0; i < n; i++) {
    free(bodies[i]);
    free(names[i]);
  }
  free(bodies);
  free(rs);
}

static void test_invalid_program(void **state) {
  NEED_TOOLCHAIN();
  /* two errors: a bad dtype and an expression error with a column */
  const char *body =
      "{\"program\": {\"tlir\": 1, \"name\": \"bad\", \"params\": [{\"name\": \"a\", \"kind\": "
      "\"tensor\", \"dtype\": \"float33\", \"shape\": [4]}], \"kernel\": {\"grid\": [1], "
      "\"threads\": 32, \"body\": [{\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [4], "
      "\"body\": [\"a[i] = a[i] + + \"]}]}}, \"targets\": [\"sm_80\"]}";
  resp r = http(&main_srv, "POST", "/v1/compile", body, NULL);
  expect_status(r, 422);
  json_t *j = parse(&r);
  json_t *e = json_object_get(j, "error");
  assert_string_equal(json_string_value(json_object_get(e, "code")), "invalid_program");
  json_t *diags = json_object_get(e, "diagnostics");
  assert_true(json_array_size(diags) >= 1);
  for (size_t i = 0; i < json_array_size(diags); i++) {
    const char *p = json_string_value(json_object_get(json_array_get(diags, i), "pointer"));
    assert_non_null(p);
    assert_true(strncmp(p, "/program", 8) == 0);
    assert_non_null(json_string_value(json_object_get(json_array_get(diags, i), "message")));
  }
  json_decref(j);
  resp_free(&r);
}

static void test_target_misfit(void **state) {
  NEED_TOOLCHAIN();
  const char *t[] = {"sm_75"};
  char *body = compile_body("flash_attention.json", t, 1, NULL);
  resp r = http(&main_srv, "POST", "/v1/compile", body, NULL);
  free(body);
  expect_status(r, 422);
  json_t *j = parse(&r);
  json_t *e = json_object_get(j, "error");
  assert_string_equal(json_string_value(json_object_get(e, "code")), "limit_exceeded");
  assert_string_equal(json_string_value(json_object_get(e, "pointer")), "/program/kernel/body/0");
  assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "sm_75 allows 65536"));
  json_t *diags = json_object_get(e, "diagnostics");
  assert_int_equal(json_array_size(diags), 1);
  assert_string_equal(json_string_value(json_object_get(json_array_get(diags, 0), "pointer")),
                      "/program/kernel/body/0");
  assert_string_equal(json_string_value(json_object_get(json_array_get(diags, 0), "message")),
                      json_string_value(json_object_get(e, "message")));
  json_decref(j);
  resp_free(&r);
  /* gemm (cp.async and mma.sync on sm_80) builds for sm_75 on the portable paths */
  body = compile_body("gemm.json", t, 1, NULL);
  r = http(&main_srv, "POST", "/v1/compile", body, NULL);
  free(body);
  expect_status(r, 200);
  resp_free(&r);
  /* /v1/info: what each offered target is */
  r = http(&main_srv, "GET", "/v1/info", NULL, NULL);
  expect_status(r, 200);
  j = parse(&r);
  json_t *info = json_object_get(j, "target_info"), *offered = json_object_get(j, "targets");
  assert_int_equal(json_object_size(info), json_array_size(offered));
  json_t *sm75 = json_object_get(info, "sm_75");
  assert_non_null(sm75);
  assert_int_equal(json_integer_value(json_object_get(sm75, "shared_bytes")), 65536);
  assert_string_equal(json_string_value(json_array_get(json_object_get(sm75, "features"), 0)), "ldmatrix");
  assert_int_equal(json_array_size(json_object_get(sm75, "features")), 1);
  json_decref(j);
  resp_free(&r);
}

static void test_not_offered(void **state) {
  (void)state;
  resp r = http(&main_srv, "GET", "/v1/info", NULL, NULL);
  expect_status(r, 200);
  json_t *j = parse(&r);
  json_t *no = json_object_get(j, "targets_not_offered"), *offered = json_object_get(j, "targets");
  assert_true(json_is_object(no));
  const char *const *refused = tl_compiler_targets_refused();
  size_t n = 0;
  for (; refused[n]; n++) {
    const char *why = json_string_value(json_object_get(no, refused[n]));
    if (!why)
      fail_msg("/v1/info does not say why %s is not offered: %.600s", refused[n], r.body);
    assert_string_equal(why, tl_compiler_target_refusal(refused[n]));
    size_t i;
    json_t *t;
    json_array_foreach(offered, i, t) assert_string_not_equal(json_string_value(t), refused[n]);
  }
  assert_int_equal(json_object_size(no), n);
  /* the PTX back end's assembler, as the compiler here finds it (the server has the same environment) */
  const char *jl_why = NULL, *jl = tl_compiler_nvjitlink(&jl_why);
  json_t *njl = json_object_get(j, "nvjitlink");
  if (jl) {
    assert_string_equal(json_string_value(njl), jl);
    assert_null(json_object_get(j, "nvjitlink_error"));
  } else {
    assert_true(njl && json_is_null(njl));
    assert_string_equal(json_string_value(json_object_get(j, "nvjitlink_error")), jl_why);
  }
  const char *pa_why = NULL, *pa = tl_compiler_ptxas(&pa_why); /* and its whole-program one */
  json_t *npa = json_object_get(j, "ptxas");
  if (pa) {
    assert_string_equal(json_string_value(npa), pa);
    assert_null(json_object_get(j, "ptxas_error"));
  } else {
    assert_true(npa && json_is_null(npa));
    assert_string_equal(json_string_value(json_object_get(j, "ptxas_error")), pa_why);
  }
  json_decref(j);
  resp_free(&r);
  const char *why = tl_compiler_target_refusal("gfx950");
  if (!why) {
    printf("skipping the request part: gfx950 is offered here (or there is no AMD toolchain), so the "
           "answer to a compile for a refused target is not checked\n");
    skip();
  }
  print_message("gfx950: %s\n", why);
  const char *t[] = {"gfx950"};
  char *body = compile_body("tilus_add_one.json", t, 1, NULL);
  r = http(&main_srv, "POST", "/v1/compile", body, NULL);
  free(body);
  expect_status(r, 422);
  j = parse(&r);
  json_t *e = json_object_get(j, "error");
  assert_string_equal(json_string_value(json_object_get(e, "code")), "unsupported");
  const char *msg = json_string_value(json_object_get(e, "message"));
  assert_non_null(msg);
  if (!strstr(msg, why))
    fail_msg("the refusal does not say why: %s", msg);
  json_decref(j);
  resp_free(&r);
}

static void test_singleflight(void **state) {
  NEED_TOOLCHAIN();
  server *s = &main_srv;
  const char *targets[] = {"sm_90a"};
  char *body = compile_body("tilus_matmul.json", targets, 1, "singleflight_probe");
  char *bodies[50];
  resp rs[50];
  for (int i = 0; i < 50; i++)
    bodies[i] = body;
  double ok0 = metric(s, "tlserverd_compiles_total{outcome=\"ok\"}");
  double joins0 = metric(s, "tlserverd_singleflight_joins_total");
  double hits0 = metric(s, "tlserverd_cache_hits_total");
  double qhits0 = metric(s, "tlserverd_queued_cache_hits_total");
  http_many(s, "POST", "/v1/compile", bodies, 50, rs);
  char art[65] = "";
  for (int i = 0; i < 50; i++) {
    expect_status(rs[i], 200);
    json_t *j = parse(&rs[i]);
    json_t *x = json_array_get(json_object_get(j, "results"), 0);
    const char *a = json_string_value(json_object_get(x, "artifact"));
    assert_non_null(a);
    if (!art[0])
      strcpy(art, a);
    assert_string_equal(a, art);
    json_decref(j);
    resp_free(&rs[i]);
  }
  double compiles = metric(s, "tlserverd_compiles_total{outcome=\"ok\"}") - ok0;
  double joins = metric(s, "tlserverd_singleflight_joins_total") - joins0;
  double hits = metric(s, "tlserverd_cache_hits_total") - hits0;
  double qhits = metric(s, "tlserverd_queued_cache_hits_total") - qhits0;
  fprintf(stderr, "50 identical requests: %g compile, %g joined, %g cache hits, %g queued hits\n",
          compiles, joins, hits, qhits);
  assert_true(compiles == 1.0);
  assert_true(joins + hits + qhits == 49.0);
  free(body);
}

/* A request's targets are one pool job each (server/api.c), so with two
 * workers its two targets compile at once: the request takes less time than
 * the two compiles one after the other (each compile_ms is the worker's own
 * time of its compile, so run one after the other they would add up to at
 * most the request's time). */
static void test_targets_in_parallel(void **state) {
  NEED_TOOLCHAIN();
  server *s = &main_srv; /* two workers */
  const char *targets[] = {"sm_90a", "sm_100a"};
  char *body = compile_body("gemm.json", targets, 2, "parallel_targets_probe");
  double t0 = now_s();
  resp r = http(s, "POST", "/v1/compile", body, NULL);
  double wall_ms = (now_s() - t0) * 1e3;
  expect_status(r, 200);
  json_t *j = parse(&r);
  double sum = 0;
  for (int t = 0; t < 2; t++) {
    json_t *x = json_array_get(json_object_get(j, "results"), (size_t)t);
    assert_true(json_is_false(json_object_get(x, "cached")));
    assert_true(json_is_number(json_object_get(x, "compile_ms")));
    sum += json_number_value(json_object_get(x, "compile_ms"));
  }
  fprintf(stderr, "gemm for 2 targets with 2 workers: %.0f ms for the request, %.0f ms of compiles\n", wall_ms, sum);
  assert_true(wall_ms < sum);
  json_decref(j);
  resp_free(&r);
  free(body);
}

static void test_isolation(void **state) {
  NEED_TOOLCHAIN();
  server s;
  const char *flags[] = {"--workers", "1", "--queue", "0", "--compile-timeout", "3",
                         "--max-compiles-per-client", "0", /* the full queue's 503, not the share's 429 */
                         "--test-hooks", NULL};
  const char *env[] = {"TL_TEST_CRASH_ON=crash_probe", "TL_TEST_HANG_ON=hang_probe", NULL};
  server_start(&s, "isolation", NULL, flags, env);
  const char *targets[] = {"sm_80"};
  char *crash = compile_body("tilus_add_one.json", targets, 1, "crash_probe");
  char *hang = compile_body("tilus_add_one.json", targets, 1, "hang_probe");
  char *fine = compile_body("tilus_add_one.json", targets, 1, "fine_probe");
  char *other = compile_body("tilus_add_one.json", targets, 1, "other_probe");

  resp r = http(&s, "POST", "/v1/compile", crash, NULL);
  expect_status(r, 500);
  json_t *j = parse(&r);
  assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                      "internal_error");
  json_decref(j);
  resp_free(&r);
  r = http(&s, "GET", "/healthz", NULL, NULL);
  expect_status(r, 200);
  resp_free(&r);
  r = http(&s, "POST", "/v1/compile", fine, NULL);
  expect_status(r, 200);
  resp_free(&r);

  /* a hanging compile: 504 after the timeout; meanwhile the queue (0) is full */
  char *two[2] = {hang, NULL};
  resp rs[2];
  double t0 = now_s();
  /* while the hanging compile holds the only worker, a forked probe asks
   * for another compile, which must be refused (503, Retry-After) */
  pid_t probe = fork();
  assert_true(probe >= 0);
  if (probe == 0) {
    /* wait until the hang is running, then ask for another compile */
    for (int i = 0; i < 200; i++) {
      if (metric(&s, "tlserverd_compiles_running") == 1.0)
        break;
      sleep_ms(10);
    }
    resp p = http(&s, "POST", "/v1/compile", other, NULL);
    char buf[64];
    int ok = p.status == 503 && header(&p, "Retry-After", buf, sizeof buf) != NULL &&
             strstr(p.body, "\"overloaded\"") != NULL;
    _exit(ok ? 0 : 1);
  }
  http_many(&s, "POST", "/v1/compile", two, 1, rs);
  int pst;
  waitpid(probe, &pst, 0);
  assert_true(WIFEXITED(pst) && WEXITSTATUS(pst) == 0);
  expect_status(rs[0], 504);
  assert_true(now_s() - t0 >= 2.9);
  j = parse(&rs[0]);
  assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                      "timeout");
  json_decref(j);
  resp_free(&rs[0]);

  /* still serving, and the next compile works */
  r = http(&s, "POST", "/v1/compile", other, NULL);
  expect_status(r, 200);
  resp_free(&r);
  assert_true(metric(&s, "tlserverd_compiles_total{outcome=\"crash\"}") == 1.0);
  assert_true(metric(&s, "tlserverd_compiles_total{outcome=\"timeout\"}") == 1.0);
  assert_true(metric(&s, "tlserverd_overloaded_total") == 1.0);
  int st = server_stop(&s, SIGTERM);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  free(crash);
  free(hang);
  free(fine);
  free(other);
}

/* A new worker's start-up (loading and warming NVRTC: seconds in a
 * sanitizer build on a loaded machine) is not part of its first job's
 * --compile-timeout: with a start of 3 s (test hook) and a limit of 2 s
 * the first compile still succeeds. */
static void test_slow_start(void **state) {
  NEED_TOOLCHAIN();
  server s;
  const char *flags[] = {"--workers", "1", "--compile-timeout", "2", "--test-hooks", NULL};
  const char *env[] = {"TL_TEST_SLOW_START=3", NULL};
  server_start(&s, "slow_start", NULL, flags, env);
  const char *targets[] = {"sm_80"};
  char *body = compile_body("tilus_add_one.json", targets, 1, "slow_start");
  resp r = http(&s, "POST", "/v1/compile", body, NULL);
  expect_status(r, 200);
  resp_free(&r);
  assert_true(metric(&s, "tlserverd_compiles_total{outcome=\"timeout\"}") == 0.0);
  int st = server_stop(&s, SIGTERM);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  free(body);
}

/* ---- the worker's memory bound (--worker-memory, RLIMIT_AS) ---- */

/* A worker under --worker-memory 512M cannot have 1 GiB (the test hook
 * TL_TEST_GROW_ON asks malloc for twice the limit): that job fails with
 * out_of_memory and names the limit, while the worker still compiles the
 * next program within it (NVRTC, its cache off, needs far less). */
static void test_worker_memory(void **state) {
  NEED_TOOLCHAIN();
#if defined(__SANITIZE_ADDRESS__)
  printf("skipping: AddressSanitizer builds set no address-space limit on workers\n");
  skip();
#endif
  server s;
  const char *flags[] = {"--workers", "1", "--worker-memory", "512M", "--test-hooks", NULL};
  const char *env[] = {"TL_TEST_GROW_ON=grow_probe", NULL};
  server_start(&s, "worker_memory", NULL, flags, env);
  const char *targets[] = {"sm_80"};
  char *grow = compile_body("tilus_add_one.json", targets, 1, "grow_probe");
  char *fine = compile_body("gemm.json", targets, 1, "fine_probe");
  resp r = http(&s, "POST", "/v1/compile", grow, NULL);
  expect_status(r, 500);
  json_t *j = parse(&r);
  json_t *e = json_object_get(j, "error");
  assert_string_equal(json_string_value(json_object_get(e, "code")), "out_of_memory");
  assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "limit of 536870912"));
  json_decref(j);
  resp_free(&r);
  r = http(&s, "POST", "/v1/compile", fine, NULL);
  expect_status(r, 200);
  resp_free(&r);
  int st = server_stop(&s, SIGTERM);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  free(grow);
  free(fine);
}

/* ---- kill -9 during a stream of compiles ---- */

typedef struct stream {
  server *s;
  int id;
  atomic_bool *stop;
  atomic_int *acks; /* shared by the streams */
  char (*acked)[65];
  int nacked;
  int errors_after_kill;
} stream;

static void *stream_main(void *arg) {
  stream *st = arg;
  const char *targets[] = {"sm_80"};
  for (int k = 0; !atomic_load(st->stop) && k < 200; k++) {
    char name[64];
    snprintf(name, sizeof name, "kill9_s%d_n%d", st->id, k);
    char *body = compile_body("tilus_add_one.json", targets, 1, name);
    resp r = http(st->s, "POST", "/v1/compile", body, NULL);
    free(body);
    if (r.status == 200) {
      json_error_t je;
      json_t *j = json_loadb(r.body, r.len, 0, &je);
      const char *key =
          j ? json_string_value(json_object_get(json_array_get(json_object_get(j, "results"), 0),
                                                "key"))
            : NULL;
      if (key) {
        strcpy(st->acked[st->nacked++], key);
        atomic_fetch_add(st->acks, 1);
      }
      json_decref(j);
    } else {
      st->errors_after_kill++;
    }
    CURLcode rc = r.rc;
    resp_free(&r);
    if (rc != CURLE_OK)
      break;
  }
  return NULL;
}

static void test_kill9(void **state) {
  NEED_TOOLCHAIN();
  server s;
  const char *flags[] = {"--workers", "2", NULL};
  server_start(&s, "kill9", NULL, flags, NULL);
  char db[600];
  strcpy(db, s.db);
  atomic_bool stop;
  atomic_int acks;
  atomic_init(&stop, false);
  atomic_init(&acks, 0);
  stream st[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    st[i] = (stream){.s = &s, .id = i, .stop = &stop, .acks = &acks};
    st[i].acked = calloc(200, 65);
    pthread_create(&th[i], NULL, stream_main, &st[i]);
  }
  /* kill at a random moment after a random number (2 to 12) of
   * acknowledged builds, with compiles in flight */
  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  int want = 2 + rand() % 11;
  for (int i = 0; i < 6000 && atomic_load(&acks) < want; i++)
    sleep_ms(10);
  sleep_ms(rand() % 150);
  int status = server_stop(&s, SIGKILL);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  atomic_store(&stop, true);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  int total = st[0].nacked + st[1].nacked;
  fprintf(stderr, "kill -9 after %d acknowledged builds\n", total);
  assert_true(total > 0);

  /* the database is sound */
  sqlite3 *h;
  assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_stmt *q;
  assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &q, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(q), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(q, 0), "ok");
  sqlite3_finalize(q);
  sqlite3_close(h);

  /* restart on the same database: every acknowledged build is a hit */
  const char *flags2[] = {"--workers", "1", NULL};
  server_start(&s, "kill9b", db, flags2, NULL);
  double hits0 = metric(&s, "tlserverd_cache_hits_total");
  for (int i = 0; i < 2; i++) {
    for (int k = 0; k < st[i].nacked; k++) {
      char path[128];
      snprintf(path, sizeof path, "/v1/kernels/%s", st[i].acked[k]);
      resp r = http(&s, "GET", path, NULL, NULL);
      if (r.status != 200)
        fail_msg("acknowledged build %s is missing after the restart", st[i].acked[k]);
      resp_free(&r);
    }
  }
  /* and compiling the acknowledged programs again hits the cache */
  const char *targets[] = {"sm_80"};
  for (int i = 0; i < 2; i++) {
    for (int k = 0; k < st[i].nacked; k++) {
      char name[64];
      snprintf(name, sizeof name, "kill9_s%d_n%d", i, k);
      char *body = compile_body("tilus_add_one.json", targets, 1, name);
      resp r = http(&s, "POST", "/v1/compile", body, NULL);
      free(body);
      expect_status(r, 200);
      assert_non_null(strstr(r.body, "\"cached\": true"));
      assert_non_null(strstr(r.body, st[i].acked[k]));
      resp_free(&r);
    }
  }
  assert_true(metric(&s, "tlserverd_cache_hits_total") - hits0 == (double)total);
  assert_true(metric(&s, "tlserverd_compiles_total{outcome=\"ok\"}") == 0.0);
  status = server_stop(&s, SIGTERM);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  free(st[0].acked);
  free(st[1].acked);
}

static void test_graceful(void **state) {
  NEED_TOOLCHAIN();
  server s;
  const char *flags[] = {"--workers", "1", NULL};
  server_start(&s, "graceful", NULL, flags, NULL);
  const char *targets[] = {"sm_90a"};
  char *body = compile_body("tilus_matmul.json", targets, 1, "graceful_probe");
  pid_t killer = fork();
  assert_true(killer >= 0);
  if (killer == 0) {
    for (int i = 0; i < 500; i++) {
      if (metric(&s, "tlserverd_compiles_running") == 1.0)
        break;
      sleep_ms(5);
    }
    kill(s.pid, SIGTERM);
    _exit(0);
  }
  resp r = http(&s, "POST", "/v1/compile", body, NULL);
  waitpid(killer, NULL, 0);
  expect_status(r, 200); /* the running compile finished and was answered */
  json_t *j = parse(&r);
  char key[65];
  strcpy(key, json_string_value(json_object_get(json_array_get(json_object_get(j, "results"), 0),
                                                "key")));
  json_decref(j);
  resp_free(&r);
  int status = server_stop(&s, 0); /* already signalled: just wait */
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char db[600];
  strcpy(db, s.db);
  server_start(&s, "graceful2", db, flags, NULL);
  char path[128];
  snprintf(path, sizeof path, "/v1/kernels/%s", key);
  r = http(&s, "GET", path, NULL, NULL);
  expect_status(r, 200);
  resp_free(&r);
  server_stop(&s, SIGTERM);
  free(body);
}

/* SIGTERM while a compile hangs: after --shutdown-grace it is cancelled,
 * the waiting request is answered 503, and the server exits 0. */
static void test_shutdown_cancel(void **state) {
  NEED_TOOLCHAIN();
  server s;
  const char *flags[] = {"--workers", "1", "--shutdown-grace", "1", "--test-hooks", NULL};
  const char *env[] = {"TL_TEST_HANG_ON=hang_probe", NULL};
  server_start(&s, "cancel", NULL, flags, env);
  const char *targets[] = {"sm_80"};
  char *body = compile_body("tilus_add_one.json", targets, 1, "hang_probe");
  pid_t killer = fork();
  assert_true(killer >= 0);
  if (killer == 0) {
    for (int i = 0; i < 500; i++) {
      if (metric(&s, "tlserverd_compiles_running") == 1.0)
        break;
      sleep_ms(5);
    }
    kill(s.pid, SIGTERM);
    _exit(0);
  }
  double t0 = now_s();
  resp r = http(&s, "POST", "/v1/compile", body, NULL);
  waitpid(killer, NULL, 0);
  expect_status(r, 503);
  assert_non_null(strstr(r.body, "shutting down"));
  resp_free(&r);
  int status = server_stop(&s, 0);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_true(now_s() - t0 < 20);
  free(body);
}

static void test_eviction(void **state) {
  NEED_TOOLCHAIN();
  server s;
  const char *flags[] = {"--workers", "2", "--cache-max-bytes", "12K", NULL};
  server_start(&s, "evict", NULL, flags, NULL);
  const char *targets[] = {"sm_80"};
  for (int k = 0; k < 6; k++) {
    char name[32];
    snprintf(name, sizeof name, "evict_%d", k);
    char *body = compile_body("tilus_add_one.json", targets, 1, name);
    resp r = http(&s, "POST", "/v1/compile", body, NULL);
    expect_status(r, 200);
    resp_free(&r);
    free(body);
  }
  double bytes = -1;
  for (int i = 0; i < 300; i++) { /* the eviction thread runs every second */
    bytes = metric(&s, "tlserverd_cache_bytes");
    if (bytes >= 0 && bytes <= 12 * 1024)
      break;
    sleep_ms(20);
  }
  assert_true(bytes <= 12 * 1024);
  assert_true(metric(&s, "tlserverd_cache_evictions_total") > 0);
  server_stop(&s, SIGTERM);
}

/* A damaged artifact in the database is detected on read (404, counted),
 * its build is dropped, and the next compile rebuilds it. */
static void test_integrity(void **state) {
  NEED_TOOLCHAIN();
  server s;
  const char *flags[] = {"--workers", "1", "--memory-cache", "0", NULL};
  server_start(&s, "integrity", NULL, flags, NULL);
  const char *targets[] = {"sm_80"};
  char *body = compile_body("tilus_add_one.json", targets, 1, "integrity_probe");
  resp r = http(&s, "POST", "/v1/compile", body, NULL);
  expect_status(r, 200);
  json_t *j = parse(&r);
  json_t *x = json_array_get(json_object_get(j, "results"), 0);
  char art[65], key[65], path[128];
  strcpy(art, json_string_value(json_object_get(x, "artifact")));
  strcpy(key, json_string_value(json_object_get(x, "key")));
  json_decref(j);
  resp_free(&r);
  snprintf(path, sizeof path, "/v1/artifacts/%s", art);
  r = http(&s, "GET", path, NULL, NULL);
  expect_status(r, 200);
  resp_free(&r);

  /* damage the stored bytes behind the server's back (same length) */
  sqlite3 *h;
  assert_int_equal(sqlite3_open_v2(s.db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  sqlite3_busy_timeout(h, 5000);
  sqlite3_stmt *q;
  assert_int_equal(sqlite3_prepare_v2(h, "UPDATE artifacts SET bytes = zeroblob(size) WHERE id = ?",
                                      -1, &q, NULL),
                   SQLITE_OK);
  sqlite3_bind_text(q, 1, art, -1, SQLITE_STATIC);
  assert_int_equal(sqlite3_step(q), SQLITE_DONE);
  assert_int_equal(sqlite3_changes(h), 1);
  sqlite3_finalize(q);
  sqlite3_close(h);

  r = http(&s, "GET", path, NULL, NULL);
  expect_status(r, 404);
  resp_free(&r);
  assert_true(metric(&s, "tlserverd_cache_integrity_failures_total") == 1.0);
  snprintf(path, sizeof path, "/v1/kernels/%s", key);
  r = http(&s, "GET", path, NULL, NULL);
  expect_status(r, 404); /* the build went with its artifact */
  resp_free(&r);

  /* healed by a recompile */
  r = http(&s, "POST", "/v1/compile", body, NULL);
  expect_status(r, 200);
  assert_non_null(strstr(r.body, "\"cached\": false"));
  j = parse(&r);
  x = json_array_get(json_object_get(j, "results"), 0);
  snprintf(path, sizeof path, "/v1/artifacts/%s", json_string_value(json_object_get(x, "artifact")));
  json_decref(j);
  resp_free(&r);
  r = http(&s, "GET", path, NULL, NULL);
  expect_status(r, 200);
  char hex[65];
  tl_sha256_hex(r.body, r.len, hex);
  assert_string_equal(hex, path + strlen("/v1/artifacts/"));
  resp_free(&r);
  server_stop(&s, SIGTERM);
  free(body);
}

int main(void) {
  /* TL_TEST_ONLY=test_kill9 runs one test (a cmocka name filter) */
  if (getenv("TL_TEST_ONLY"))
    cmocka_set_test_filter(getenv("TL_TEST_ONLY"));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compile_fetch),
      cmocka_unit_test(test_invalid_program),
      cmocka_unit_test(test_target_misfit),
      cmocka_unit_test(test_not_offered),
      cmocka_unit_test(test_singleflight), cmocka_unit_test(test_targets_in_parallel),
      cmocka_unit_test(test_isolation),
      cmocka_unit_test(test_slow_start),
      cmocka_unit_test(test_worker_memory),
      cmocka_unit_test(test_kill9),
      cmocka_unit_test(test_graceful),
      cmocka_unit_test(test_shutdown_cancel),
      cmocka_unit_test(test_eviction),
      cmocka_unit_test(test_integrity),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
