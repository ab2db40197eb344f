/*
 * test_client_api.c - libtlclient's public API where no server is needed:
 * handles and _free(NULL), the typed setters and what they refuse, the
 * request key (formatting, key order and "x-" members do not change it;
 * the target, a constant or an option does), requests refused before any
 * network (bad JSON, bad overrides, bad targets, too large), an offline
 * client with an empty local cache, a server that is not there (every retry
 * made, with backoff, logged, then TL_NETWORK naming the URL and the local
 * cache), a local cache file that cannot be opened, and the GPU side on a
 * machine without one (TL_NO_DEVICE, "no CUDA driver").
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "../../client/internal.h"
#include "../../proto/tl_hash.h"

static const char prog[] =
    "{\"tlir\": 1, \"name\": \"add_one\", \"x-note\": \"a note\", \"constants\": {\"block_n\": 128},\n"
    " \"params\": [{\"name\": \"n\", \"kind\": \"scalar\", \"dtype\": \"int32\"},\n"
    "            {\"name\": \"a\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [\"n\"]}],\n"
    " \"kernel\": {\"grid\": [\"ceildiv(n, block_n)\"], \"threads\": 128, \"block_vars\": [\"bx\"], \"body\": []}}";

/* The same program: other whitespace, member order and x- members. */
static const char prog_reformatted[] =
    "{\"kernel\":{\"threads\":128,\"grid\":[\"ceildiv(n, block_n)\"],\"body\":[],\"block_vars\":[\"bx\"]},"
    "\"params\":[{\"kind\":\"scalar\",\"name\":\"n\",\"dtype\":\"int32\"},"
    "{\"shape\":[\"n\"],\"dtype\":\"float32\",\"kind\":\"tensor\",\"name\":\"a\",\"x-why\":1}],"
    "\"constants\":{\"block_n\":128},\"name\":\"add_one\",\"tlir\":1}";

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char tmpdir[256];

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tl-client-api-XXXXXX");
  assert_non_null(mkdtemp(tmpdir));
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_new_free(void **state) {
  (void)state;
  tl_client *c = NULL, *d = NULL;
  tl_error err;
  assert_int_equal(tl_client_new(&c, &err), TL_OK);
  assert_string_equal(tl_client_server(c), "http://127.0.0.1:8470");
  assert_int_equal(tl_client_cache_max_bytes(c), (int64_t)1 << 30);
  assert_int_equal(tl_client_set_token(c, "tok-0123456789abcdef", &err), TL_OK);
  assert_int_equal(tl_client_dup(c, &d, &err), TL_OK);
  assert_string_equal(tl_client_server(d), tl_client_server(c));
  assert_string_equal(d->token, "tok-0123456789abcdef");
  tl_client_free(d);
  tl_client_free(c);
  tl_client_free(NULL);
  tl_artifact_free(NULL);
  tl_kernel_free(NULL);
  tl_device_free(NULL);
  tl_target_results_free(NULL, 3);
  assert_int_equal(tl_client_new(NULL, &err), TL_INVALID_ARG);
  assert_string_equal(tl_strerror(TL_NETWORK), "could not reach the server");
  assert_string_equal(tl_source_name(TL_SOURCE_LOCAL), "local");
}

static void test_default_cache_path(void **state) {
  (void)state;
  char *old_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
  char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  tl_client *c;
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  assert_int_equal(tl_client_new(&c, NULL), TL_OK);
  assert_string_equal(tl_client_cache_path(c), "/x/cache/tlclient/cache.db");
  tl_client_free(c);
  setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  setenv("HOME", "/home/u", 1);
  assert_int_equal(tl_client_new(&c, NULL), TL_OK);
  assert_string_equal(tl_client_cache_path(c), "/home/u/.cache/tlclient/cache.db");
  tl_client_free(c);
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  assert_int_equal(tl_client_new(&c, NULL), TL_OK);
  assert_null(tl_client_cache_path(c));
  tl_client_free(c);
  if (old_xdg)
    setenv("XDG_CACHE_HOME", old_xdg, 1);
  if (old_home)
    setenv("HOME", old_home, 1);
  free(old_xdg);
  free(old_home);
}

static void test_setters(void **state) {
  (void)state;
  tl_client *c;
  tl_error err;
  assert_int_equal(tl_client_new(&c, &err), TL_OK);
  assert_int_equal(tl_client_set_server(c, "https://kernels.example.com:8470/tl//", &err), TL_OK);
  assert_string_equal(tl_client_server(c), "https://kernels.example.com:8470/tl");
  static const char *bad_urls[] = {"ftp://x", "http://", "http:///path", "127.0.0.1:8470", "http://a b",
                                   "http://x/?q=1", "http://x/#f", ""};
  for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
    if (tl_client_set_server(c, bad_urls[i], &err) != TL_INVALID_ARG)
      fail_msg("server URL '%s' was accepted", bad_urls[i]);
    assert_string_equal(tl_client_server(c), "https://kernels.example.com:8470/tl"); /* unchanged */
  }
  char long_url[TL_CLIENT_URL_MAX + 20];
  memset(long_url, 'a', sizeof long_url - 1);
  memcpy(long_url, "http://", 7);
  long_url[sizeof long_url - 1] = 0;
  assert_int_equal(tl_client_set_server(c, long_url, &err), TL_TOO_LARGE);
  assert_int_equal(tl_client_set_server(c, NULL, &err), TL_INVALID_ARG);
  /* replicas: a comma-separated list, each URL checked and trimmed */
  assert_int_equal(tl_client_set_server(c, "http://a:1/,https://b:2/tl//", &err), TL_OK);
  assert_string_equal(tl_client_server(c), "http://a:1,https://b:2/tl");
  static const char *bad_lists[] = {"http://a,", ",http://a", "http://a,,http://b", "http://a,ftp://b",
                                    "http://a, http://b"};
  for (size_t i = 0; i < sizeof bad_lists / sizeof bad_lists[0]; i++)
    if (tl_client_set_server(c, bad_lists[i], &err) != TL_INVALID_ARG)
      fail_msg("server list '%s' was accepted", bad_lists[i]);
  char many[40 * (TL_CLIENT_SERVERS_MAX + 1)] = "";
  for (int i = 0; i <= TL_CLIENT_SERVERS_MAX; i++)
    snprintf(many + strlen(many), sizeof many - strlen(many), "%shttp://h%d", i ? "," : "", i);
  assert_int_equal(tl_client_set_server(c, many, &err), TL_LIMIT);
  assert_string_equal(tl_client_server(c), "http://a:1,https://b:2/tl");

  assert_int_equal(tl_client_set_token(c, "has space", &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_token(c, "tab\tx", &err), TL_INVALID_ARG);
  char long_tok[TL_CLIENT_TOKEN_MAX + 2];
  memset(long_tok, 'x', sizeof long_tok - 1);
  long_tok[sizeof long_tok - 1] = 0;
  assert_int_equal(tl_client_set_token(c, long_tok, &err), TL_TOO_LARGE);
  assert_int_equal(tl_client_set_token(c, "", &err), TL_OK);
  assert_null(c->token);
  assert_int_equal(tl_client_set_token(c, NULL, &err), TL_OK);

  assert_int_equal(tl_client_set_ca_file(c, "", &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_ca_file(c, "/etc/ssl/certs/ca-certificates.crt", &err), TL_OK);
  assert_int_equal(tl_client_set_ca_file(c, NULL, &err), TL_OK);

  assert_int_equal(tl_client_set_connect_timeout_ms(c, 0, &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_connect_timeout_ms(c, 600001, &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_connect_timeout_ms(c, 250, &err), TL_OK);
  assert_int_equal(tl_client_set_timeout_ms(c, -5, &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_timeout_ms(c, 1000, &err), TL_OK);
  assert_int_equal(tl_client_set_retries(c, -1, &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_retries(c, TL_CLIENT_RETRIES_MAX + 1, &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_retries(c, 0, &err), TL_OK);
  assert_int_equal(tl_client_set_backoff_ms(c, 0, 10, &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_backoff_ms(c, 100, 50, &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_backoff_ms(c, 100, 600001, &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_backoff_ms(c, 10, 40, &err), TL_OK);
  assert_int_equal(tl_client_set_cache_path(c, "", &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_cache_path(c, NULL, &err), TL_OK);
  assert_null(tl_client_cache_path(c));
  assert_int_equal(tl_client_set_cache_max_bytes(c, -1, &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_cache_max_bytes(c, 0, &err), TL_OK);
  assert_int_equal(tl_client_set_offline(c, 1, &err), TL_OK);
  assert_int_equal(tl_client_set_offline(NULL, 1, &err), TL_INVALID_ARG);
  tl_client_free(c);
}

#define CID "tlc 0.1.0+0123456789abcdef" /* a server's compiler identity */

static void test_request_key(void **state) {
  (void)state;
  tl_error err;
  char k1[65], k2[65], k3[65], k4[65], k5[65], k6[65], *text = NULL;
  tl_client_request r1 = {.program = prog};
  tl_client_request r2 = {.program = prog_reformatted, .program_len = strlen(prog_reformatted)};
  assert_int_equal(tl_request_key(&r1, "sm_90", CID, k1, &text, &err), TL_OK);
  assert_int_equal(tl_request_key(&r2, "sm_90", CID, k2, NULL, &err), TL_OK);
  assert_string_equal(k1, k2); /* formatting, member order and x- members do not matter */
  assert_non_null(strstr(text, "target sm_90\n"));
  assert_null(strstr(text, "x-note"));
  free(text);
  assert_int_equal(tl_request_key(&r1, "sm_80", CID, k3, NULL, &err), TL_OK);
  assert_string_not_equal(k1, k3);
  tl_client_define d[2] = {{"block_n", "256"}, {"block_n", "128"}};
  tl_client_request r3 = {.program = prog, .defines = d, .ndefines = 1};
  assert_int_equal(tl_request_key(&r3, "sm_90", CID, k4, NULL, &err), TL_OK);
  assert_string_not_equal(k1, k4);
  tl_client_request r4 = {.program = prog, .options_json = "{\"debug\": true}"};
  assert_int_equal(tl_request_key(&r4, "sm_90", CID, k5, NULL, &err), TL_OK);
  assert_string_not_equal(k1, k5);
  tl_client_request r5 = {.program = prog, .options_json = "{}"};
  assert_int_equal(tl_request_key(&r5, "sm_90", CID, k6, NULL, &err), TL_OK);
  assert_string_equal(k1, k6); /* no options and empty options are the same request */
  /* another compiler on the server: another request */
  assert_int_equal(tl_request_key(&r1, "sm_90", "tlc 0.1.0+fedcba9876543210", k6, &text, &err), TL_OK);
  assert_string_not_equal(k1, k6);
  assert_non_null(strstr(text, "\ncompiler tlc 0.1.0+fedcba9876543210\n"));
  free(text);
  assert_true(tl_hex_is_sha256(k1));

  /* refused before any network */
  tl_client_request bad = {.program = "{\"tlir\": 1,"};
  assert_int_equal(tl_request_key(&bad, "sm_90", CID, k1, NULL, &err), TL_BAD_JSON);
  assert_non_null(strstr(err.message, "not valid JSON"));
  bad.program = "[1, 2]";
  assert_int_equal(tl_request_key(&bad, "sm_90", CID, k1, NULL, &err), TL_BAD_PROGRAM);
  tl_client_define bd[1] = {{"block_n", "\"text\""}};
  tl_client_request r6 = {.program = prog, .defines = bd, .ndefines = 1};
  assert_int_equal(tl_request_key(&r6, "sm_90", CID, k1, NULL, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "-D block_n"));
  bd[0].value = "nan";
  assert_int_equal(tl_request_key(&r6, "sm_90", CID, k1, NULL, &err), TL_INVALID_ARG);
  r6.ndefines = -1;
  assert_int_equal(tl_request_key(&r6, "sm_90", CID, k1, NULL, &err), TL_INVALID_ARG);
  tl_client_request r7 = {.program = prog, .options_json = "[]"};
  assert_int_equal(tl_request_key(&r7, "sm_90", CID, k1, NULL, &err), TL_INVALID_ARG);
  static const char *bad_targets[] = {"", "SM_90", "sm-90", "sm_90 ", "sm_9000000000000000000000000000000000"};
  for (size_t i = 0; i < sizeof bad_targets / sizeof bad_targets[0]; i++)
    if (tl_request_key(&r1, bad_targets[i], CID, k1, NULL, &err) == TL_OK)
      fail_msg("target '%s' was accepted", bad_targets[i]);
  assert_int_equal(tl_request_key(&r1, NULL, CID, k1, NULL, &err), TL_INVALID_ARG);
  /* too large */
  size_t big = TL_CLIENT_PROGRAM_MAX + 10;
  char *huge = malloc(big + 1);
  assert_non_null(huge);
  memset(huge, ' ', big);
  huge[big] = 0;
  tl_client_request r8 = {.program = huge, .program_len = big};
  assert_int_equal(tl_request_key(&r8, "sm_90", CID, k1, NULL, &err), TL_TOO_LARGE);
  free(huge);
}

static void collect_log(void *user, const char *line) {
  int *n = user;
  (*n)++;
  assert_non_null(strstr(line, "try "));
}

/* A loopback port with nothing listening: bind one, note it, close it. */
static int dead_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

static void test_unreachable_server(void **state) {
  (void)state;
  tl_client *c;
  tl_error err;
  assert_int_equal(tl_client_new(&c, &err), TL_OK);
  char url[64], cache[512];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", dead_port());
  snprintf(cache, sizeof cache, "%s/unreachable/cache.db", tmpdir);
  assert_int_equal(tl_client_set_server(c, url, &err), TL_OK);
  assert_int_equal(tl_client_set_cache_path(c, cache, &err), TL_OK);
  assert_int_equal(tl_client_set_retries(c, 3, &err), TL_OK);
  assert_int_equal(tl_client_set_backoff_ms(c, 100, 400, &err), TL_OK);
  int logged = 0;
  tl_client_set_log(c, collect_log, &logged);
  tl_client_request req = {.program = prog, .name = "prog.json"};
  tl_artifact *a = (tl_artifact *)1;
  double t0 = now_s();
  tl_status st = tl_client_get(c, &req, "sm_90", &a, &err);
  double took = now_s() - t0;
  assert_int_equal(st, TL_NETWORK);
  assert_null(a);
  /* the message names the program, the target, the server and the local cache */
  assert_non_null(strstr(err.message, "prog.json"));
  assert_non_null(strstr(err.message, "sm_90"));
  assert_non_null(strstr(err.message, url));
  assert_non_null(strstr(err.message, cache));
  tl_client_stats s;
  tl_client_get_stats(c, &s);
  assert_int_equal(s.retries, 3);
  assert_int_equal(logged, 3);
  /* waits: 50..100 + 100..200 + 200..400 ms */
  printf("3 retries took %.3f s\n", took);
  assert_true(took >= 0.35 && took < 5);

  /* the other entry points say the same */
  void *bytes = (void *)1;
  size_t n = 7;
  assert_int_equal(tl_client_fetch_artifact(c, "0000000000000000000000000000000000000000000000000000000000000000",
                                            &bytes, &n, &err), TL_NETWORK);
  assert_null(bytes);
  assert_int_equal(n, 0);
  assert_int_equal(tl_client_fetch_key(c, "00", &a, &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_retries(c, 0, &err), TL_OK);
  assert_int_equal(tl_client_fetch_key(c, "1111111111111111111111111111111111111111111111111111111111111111", &a, &err),
                   TL_NETWORK);
  assert_non_null(strstr(err.message, "/v1/kernels/1111"));
  char *info = (char *)1;
  assert_int_equal(tl_client_info(c, &info, &err), TL_NETWORK);
  assert_null(info);
  assert_int_equal(tl_client_get_for_arch(c, &req, 90, &a, &err), TL_NETWORK);
  assert_int_equal(tl_client_get_for_arch(c, &req, 5, &a, &err), TL_INVALID_ARG);
  tl_target_result *res = (tl_target_result *)1;
  const char *targets[2] = {"sm_90", "sm_90"};
  assert_int_equal(tl_client_compile(c, &req, targets, 2, &res, &err), TL_INVALID_ARG); /* named twice */
  assert_null(res);
  assert_int_equal(tl_client_compile(c, &req, targets, 0, &res, &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_compile(c, &req, targets, 1, &res, &err), TL_NETWORK);
  /* offline: no request at all */
  tl_client_get_stats(c, &s);
  int64_t before = s.retries;
  assert_int_equal(tl_client_set_offline(c, 1, &err), TL_OK);
  assert_int_equal(tl_client_get(c, &req, "sm_90", &a, &err), TL_NETWORK);
  assert_non_null(strstr(err.message, "offline"));
  tl_client_get_stats(c, &s);
  assert_int_equal(s.retries, before);
  assert_int_equal(s.requests, 0);
  tl_client_free(c);
}

/* The tuning key: the program's digest, the shape class (integers rounded
 * up to a power of two), the device; and the setters of bundles and tuning. */
static void test_tuning_and_bundle_settings(void **state) {
  (void)state;
  tl_error err;
  const char *text = NULL;
  char k1[65], k2[65], k3[65], k4[65];
  tl_client_define d1000[1] = {{"M", "1000"}}, d1024[1] = {{"M", "1024"}}, d1025[1] = {{"M", "1025"}};
  tl_client_request r = {.program = prog, .defines = d1000, .ndefines = 1};
  assert_int_equal(tl_client_tuning_key(&r, "GPU (sm_90)", k1, (char **)&text, &err), TL_OK);
  assert_non_null(strstr(text, "shape {\"M\":1024}\ndevice GPU (sm_90)\n"));
  assert_int_equal(strncmp(text, "tl-tuning 1\nprogram ", 20), 0);
  char want[65];
  tl_sha256_hex(text, strlen(text), want);
  assert_string_equal(k1, want);
  free((char *)text);
  r.defines = d1024;
  assert_int_equal(tl_client_tuning_key(&r, "GPU (sm_90)", k2, NULL, &err), TL_OK);
  assert_string_equal(k1, k2); /* one shape class */
  r.defines = d1025;
  assert_int_equal(tl_client_tuning_key(&r, "GPU (sm_90)", k3, NULL, &err), TL_OK);
  assert_string_not_equal(k1, k3);
  r.defines = d1024;
  assert_int_equal(tl_client_tuning_key(&r, "GPU (sm_80)", k4, NULL, &err), TL_OK);
  assert_string_not_equal(k1, k4); /* another device */
  assert_int_equal(tl_client_tuning_key(&r, "", k4, NULL, &err), TL_INVALID_ARG);

  tl_client *c;
  assert_int_equal(tl_client_new(&c, &err), TL_OK);
  assert_int_equal(tl_client_set_tuning(c, "", &err), TL_INVALID_ARG);
  assert_int_equal(tl_client_set_tuning(c, "auto", &err), TL_OK);
  assert_int_equal(tl_client_set_tuning(c, NULL, &err), TL_OK);
  char path[512];
  snprintf(path, sizeof path, "%s/no-such.tlb", tmpdir);
  assert_int_equal(tl_client_set_bundle(c, path, &err), TL_IO);
  assert_non_null(strstr(err.message, "cannot open the bundle"));
  assert_null(tl_client_bundle(c));
  snprintf(path, sizeof path, "%s/not-a-bundle.tlb", tmpdir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(prog, f);
  fclose(f);
  assert_int_equal(tl_client_set_bundle(c, path, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "not a bundle"));
  assert_int_equal(tl_client_set_bundle(c, NULL, &err), TL_OK);
  tl_client_free(c);
}

static void test_unusable_cache(void **state) {
  (void)state;
  tl_client *c;
  tl_error err;
  assert_int_equal(tl_client_new(&c, &err), TL_OK);
  char path[512];
  snprintf(path, sizeof path, "%s/not-a-db", tmpdir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("this is not an SQLite database, not at all, and it is long enough to be read as one", f);
  fclose(f);
  assert_int_equal(tl_client_set_cache_path(c, path, &err), TL_OK);
  assert_int_equal(tl_client_set_offline(c, 1, &err), TL_OK);
  tl_client_request req = {.program = prog};
  tl_artifact *a;
  /* not a crash, not a hang: the cache is logged as unusable and the get fails as offline */
  assert_int_equal(tl_client_get(c, &req, "sm_90", &a, &err), TL_NETWORK);
  assert_true(c->cache_failed);
  tl_client_free(c);
}

static void test_no_device(void **state) {
  (void)state;
  tl_device *d = (tl_device *)1;
  tl_error err;
  tl_status st = tl_device_open(0, &d, &err);
  if (st == TL_OK) {
    printf("a GPU is here (%s, sm_%d): the no-driver case is not tested\n", tl_device_name(d), tl_device_arch(d));
    tl_device_free(d);
    return;
  }
  assert_int_equal(st, TL_NO_DEVICE);
  assert_null(d);
  assert_true(strstr(err.message, "no CUDA driver") || strstr(err.message, "no CUDA device"));
  assert_int_equal(tl_device_open(0, NULL, &err), TL_INVALID_ARG);
  assert_int_equal(tl_device_arch(NULL), 0);
  tl_kernel *k = (tl_kernel *)1;
  assert_int_equal(tl_kernel_load(NULL, NULL, &k, &err), TL_INVALID_ARG);
  assert_null(k);
  k = (tl_kernel *)1;
  assert_int_equal(tl_kernel_load_binary(NULL, "sm_90a", "x", 1, "{}", &k, &err), TL_INVALID_ARG);
  assert_null(k);
  assert_non_null(strstr(err.message, "tl_kernel_load_binary"));
  assert_int_equal(tl_kernel_launch(NULL, NULL, 0, NULL, &err), TL_INVALID_ARG);
  assert_int_equal(tl_device_sync(NULL, &err), TL_INVALID_ARG);
  tl_client *c;
  assert_int_equal(tl_client_new(&c, &err), TL_OK);
  tl_client_request req = {.program = prog};
  tl_artifact *a;
  assert_int_equal(tl_client_get_for_device(c, &req, NULL, &a, &err), TL_INVALID_ARG);
  tl_client_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_new_free),          cmocka_unit_test(test_default_cache_path),
      cmocka_unit_test(test_setters),           cmocka_unit_test(test_request_key),
      cmocka_unit_test(test_unreachable_server), cmocka_unit_test(test_unusable_cache),
      cmocka_unit_test(test_no_device),         cmocka_unit_test(test_tuning_and_bundle_settings),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
