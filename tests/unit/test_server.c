/*
 * test_server.c - unit tests of tlserverd's stateless parts: size,
 * duration and address parsing, the Range / If-None-Match / Content-Type
 * parsers, the JSON depth scan, the text buffer, the command line, the
 * tokens file and the bearer check, the metrics text, the in-memory
 * artifact cache's bounds, the shared tier's URLs and hash ring, the
 * compile workers' warm-up compile, and the status page's recent outcomes
 * saved in the cache database (one commit per save).  The server as a whole is tested by
 * test_server_e2e.c and tests/sh/server_*.sh.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../../cache/tlcache.h"
#include "../../compiler/tlcompiler.h"
#include "../../server/server.h"
#include "../../proto/tl_hash.h"

static void test_parse_size(void **state) {
  int64_t v;
  assert_true(tl_srv_parse_size("0", &v));
  assert_int_equal(v, 0);
  assert_true(tl_srv_parse_size("123", &v));
  assert_int_equal(v, 123);
  assert_true(tl_srv_parse_size("4K", &v));
  assert_int_equal(v, 4096);
  assert_true(tl_srv_parse_size("8M", &v));
  assert_int_equal(v, 8 << 20);
  assert_true(tl_srv_parse_size("2GiB", &v));
  assert_int_equal(v, (int64_t)2 << 30);
  assert_true(tl_srv_parse_size("16mb", &v));
  assert_int_equal(v, 16 << 20);
  assert_false(tl_srv_parse_size("", &v));
  assert_false(tl_srv_parse_size("-1", &v));
  assert_false(tl_srv_parse_size("1X", &v));
  assert_false(tl_srv_parse_size("K", &v));
  assert_false(tl_srv_parse_size("99999999999999999999", &v));
  assert_false(tl_srv_parse_size("9000000000000T", &v)); /* overflows int64 */
  assert_false(tl_srv_parse_size(NULL, &v));
}

static void test_parse_seconds_int_listen(void **state) {
  double d;
  assert_true(tl_srv_parse_seconds("30", &d));
  assert_true(d == 30.0);
  assert_true(tl_srv_parse_seconds("2.5", &d));
  assert_true(d == 2.5);
  assert_true(tl_srv_parse_seconds("500ms", &d));
  assert_true(d == 0.5);
  assert_false(tl_srv_parse_seconds("-1", &d));
  assert_false(tl_srv_parse_seconds("1h", &d));
  assert_false(tl_srv_parse_seconds("nan", &d));
  assert_false(tl_srv_parse_seconds("1e300", &d));

  int i;
  assert_true(tl_srv_parse_int("7", 1, 10, &i));
  assert_int_equal(i, 7);
  assert_false(tl_srv_parse_int("11", 1, 10, &i));
  assert_false(tl_srv_parse_int("7x", 1, 10, &i));

  char host[TL_SRV_HOST_MAX];
  int port;
  assert_true(tl_srv_parse_listen("127.0.0.1:8470", host, &port));
  assert_string_equal(host, "127.0.0.1");
  assert_int_equal(port, 8470);
  assert_true(tl_srv_parse_listen(":0", host, &port));
  assert_string_equal(host, "127.0.0.1");
  assert_int_equal(port, 0);
  assert_true(tl_srv_parse_listen("[::1]:9000", host, &port));
  assert_string_equal(host, "::1");
  assert_int_equal(port, 9000);
  assert_true(tl_srv_parse_listen("localhost:1", host, &port));
  assert_false(tl_srv_parse_listen("::1:9000", host, &port)); /* IPv6 needs brackets */
  assert_false(tl_srv_parse_listen("127.0.0.1", host, &port));
  assert_false(tl_srv_parse_listen("127.0.0.1:65536", host, &port));
  assert_false(tl_srv_parse_listen("[::1]9000", host, &port));
}

static void test_range(void **state) {
  int64_t a, b;
  assert_int_equal(tl_srv_parse_range(NULL, 100, &a, &b), TL_RANGE_NONE);
  assert_int_equal(tl_srv_parse_range("bytes=0-9", 100, &a, &b), TL_RANGE_OK);
  assert_int_equal(a, 0);
  assert_int_equal(b, 9);
  assert_int_equal(tl_srv_parse_range("bytes=90-", 100, &a, &b), TL_RANGE_OK);
  assert_int_equal(a, 90);
  assert_int_equal(b, 99);
  assert_int_equal(tl_srv_parse_range("bytes=50-1000", 100, &a, &b), TL_RANGE_OK);
  assert_int_equal(b, 99);
  assert_int_equal(tl_srv_parse_range("bytes=-10", 100, &a, &b), TL_RANGE_OK);
  assert_int_equal(a, 90);
  assert_int_equal(b, 99);
  assert_int_equal(tl_srv_parse_range("bytes=-1000", 100, &a, &b), TL_RANGE_OK);
  assert_int_equal(a, 0);
  assert_int_equal(tl_srv_parse_range(" bytes=5-6 ", 100, &a, &b), TL_RANGE_OK);
  assert_int_equal(a, 5);
  assert_int_equal(b, 6);
  assert_int_equal(tl_srv_parse_range("bytes=5 - 6", 100, &a, &b), TL_RANGE_NONE);
  assert_int_equal(tl_srv_parse_range("bytes=100-", 100, &a, &b), TL_RANGE_UNSATISFIABLE);
  assert_int_equal(tl_srv_parse_range("bytes=-0", 100, &a, &b), TL_RANGE_UNSATISFIABLE);
  /* ignored: malformed, other units, several ranges, reversed */
  assert_int_equal(tl_srv_parse_range("bytes=9-0", 100, &a, &b), TL_RANGE_NONE);
  assert_int_equal(tl_srv_parse_range("items=0-9", 100, &a, &b), TL_RANGE_NONE);
  assert_int_equal(tl_srv_parse_range("bytes=0-1,5-6", 100, &a, &b), TL_RANGE_NONE);
  assert_int_equal(tl_srv_parse_range("bytes=x-1", 100, &a, &b), TL_RANGE_NONE);
  assert_int_equal(tl_srv_parse_range("bytes=0-99999999999999999999", 100, &a, &b), TL_RANGE_NONE);
}

static void test_etag_and_content_type(void **state) {
  const char *id = "abc";
  assert_true(tl_srv_etag_match("\"abc\"", id));
  assert_true(tl_srv_etag_match("W/\"abc\"", id));
  assert_true(tl_srv_etag_match("\"x\", \"abc\"", id));
  assert_true(tl_srv_etag_match("*", id));
  assert_false(tl_srv_etag_match("\"abcd\"", id));
  assert_false(tl_srv_etag_match("abc", id));
  assert_false(tl_srv_etag_match("\"ab", id));
  assert_false(tl_srv_etag_match("", id));
  assert_false(tl_srv_etag_match(NULL, id));

  assert_true(tl_srv_content_type_is_json("application/json"));
  assert_true(tl_srv_content_type_is_json("Application/JSON; charset=utf-8"));
  assert_false(tl_srv_content_type_is_json("application/jsonx"));
  assert_false(tl_srv_content_type_is_json("text/plain"));
  assert_false(tl_srv_content_type_is_json(NULL));
}

static void test_json_depth_and_buf(void **state) {
  assert_true(tl_srv_json_depth_ok("{\"a\": [1, {\"b\": 2}]}", 20, 3));
  assert_false(tl_srv_json_depth_ok("[[[[1]]]]", 9, 3));
  /* brackets inside strings do not count, escaped quotes do not end them */
  const char *s = "{\"a\": \"[[[[\\\"[[[[\"}";
  assert_true(tl_srv_json_depth_ok(s, strlen(s), 1));

  tl_srv_buf b = {0};
  tl_srv_buf_puts(&b, "x=");
  tl_srv_buf_json_str(&b, "a\"b\\c\n\x01");
  assert_string_equal(b.data, "x=a\\\"b\\\\c\\n\\u0001");
  tl_srv_buf_free(&b);
  for (int i = 0; i < 10000; i++)
    tl_srv_buf_printf(&b, "%d,", i);
  assert_false(b.failed);
  assert_true(strncmp(b.data + b.len - 5, "9999,", 5) == 0);
  tl_srv_buf_free(&b);
  tl_srv_buf_json_compact(&b, "{ \"a b\" : [ 1 ,\n 2 ], \"c\\\" d\": \"e  f\" }");
  assert_string_equal(b.data, "{\"a b\":[1,2],\"c\\\" d\":\"e  f\"}");
  tl_srv_buf_free(&b);
}

static void test_config(void **state) {
  tl_srv_config c;
  bool help, version;
  tl_error err;
  tl_srv_config_defaults(&c);
  assert_string_equal(c.host, "127.0.0.1");
  assert_int_equal(c.port, 8470);
  char *a1[] = {"tlserverd", "--listen", ":0", "--db=/tmp/x.db", "--workers", "3", "--queue=0",
                "--max-body", "1M", "--compile-timeout", "2.5", "--log-format", "json",
                "--test-hooks", NULL};
  assert_int_equal(tl_srv_config_parse(&c, 13, a1, &help, &version, &err), TL_OK);
  assert_int_equal(c.port, 0);
  assert_string_equal(c.db_path, "/tmp/x.db");
  assert_int_equal(c.workers, 3);
  assert_int_equal(c.queue, 0);
  assert_int_equal(c.max_body, 1 << 20);
  assert_true(c.compile_timeout == 2.5);
  assert_int_equal(c.log_format, TL_LOG_JSON);
  assert_false(c.test_hooks); /* argc 13 stops before it */
  assert_int_equal(c.max_compiles_per_client, 2); /* --workers less one */
  assert_int_equal(c.max_program_statements, 2000);
  char *a3[] = {"tlserverd", "--db=/tmp/x.db", "--workers", "1", "--max-program-statements=10", NULL};
  tl_srv_config_defaults(&c);
  assert_int_equal(tl_srv_config_parse(&c, 5, a3, &help, &version, &err), TL_OK);
  assert_int_equal(c.max_compiles_per_client, 1); /* at least one */
  assert_int_equal(c.max_program_statements, 10);
  char *a4[] = {"tlserverd", "--db=/tmp/x.db", "--max-compiles-per-client", "0", "--workers", "8", NULL};
  tl_srv_config_defaults(&c);
  assert_int_equal(tl_srv_config_parse(&c, 6, a4, &help, &version, &err), TL_OK);
  assert_int_equal(c.max_compiles_per_client, 0); /* given: no limit, whatever --workers */

  const char *bad[][3] = {
      {"--workers", "0", NULL},     {"--workers", "x", NULL},  {"--nope", NULL, NULL},
      {"--max-body", "0", NULL},    {"--log-format", "xml", NULL},
      {"--listen", "nowhere", NULL}, {"--tls-cert", "a.pem", NULL},
      {"--allow-anonymous-read", NULL, NULL}, {"--help=1", NULL, NULL}, {"--db", NULL, NULL},
      {"--max-compiles-per-client", "-1", NULL}, {"--max-compiles-per-client", "x", NULL},
      {"--max-program-statements", "0", NULL}, {"--max-program-statements", "65537", NULL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tl_srv_config_defaults(&c);
    char *argv[4] = {"tlserverd", (char *)bad[i][0], (char *)bad[i][1], NULL};
    int argc = bad[i][1] ? 3 : 2;
    assert_int_equal(tl_srv_config_parse(&c, argc, argv, &help, &version, &err), TL_INVALID_ARG);
    assert_true(strlen(err.message) > 0);
  }
  tl_srv_config_defaults(&c);
  char *a2[] = {"tlserverd", "--help", NULL};
  assert_int_equal(tl_srv_config_parse(&c, 2, a2, &help, &version, &err), TL_OK);
  assert_true(help);
  /* --help documents every flag */
  const char *flags[] = {"--listen", "--db", "--cache-max-bytes", "--workers", "--queue",
                         "--tokens", "--allow-anonymous-read", "--tls-cert", "--tls-key",
                         "--max-body", "--compile-timeout", "--log-format", "--threads",
                         "--max-connections", "--max-header-bytes", "--idle-timeout",
                         "--shutdown-grace", "--worker-memory", "--memory-cache",
                         "--memory-cache-ttl", "--port-file", "--test-hooks", "--version",
                         "--max-compiles-per-client", "--max-program-statements"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    assert_non_null(strstr(tl_srv_usage(), flags[i]));
}

static void test_auth(void **state) {
  const char *text = "# tokens\n"
                     "\n"
                     "reader-0123456789abcdef read\n"
                     "  compiler-0123456789abcdef   compile  \r\n"
                     "admin-0123456789abcdef admin\n"
                     "both-0123456789abcdef read,compile\n";
  tl_srv_auth *a = NULL;
  tl_error err;
  assert_int_equal(tl_srv_auth_parse(text, strlen(text), &a, &err), TL_OK);
  assert_int_equal(tl_srv_auth_count(a), 4);
  assert_int_equal(tl_srv_auth_check(a, "Bearer reader-0123456789abcdef", TL_SCOPE_READ, false, &err), TL_OK);
  assert_int_equal(tl_srv_auth_check(a, "Bearer reader-0123456789abcdef", TL_SCOPE_COMPILE, false, &err), TL_FORBIDDEN);
  assert_int_equal(tl_srv_auth_check(a, "Bearer reader-0123456789abcdef", TL_SCOPE_ADMIN, false, &err), TL_FORBIDDEN);
  assert_int_equal(tl_srv_auth_check(a, "bearer compiler-0123456789abcdef", TL_SCOPE_COMPILE, false, &err), TL_OK);
  assert_int_equal(tl_srv_auth_check(a, "Bearer compiler-0123456789abcdef", TL_SCOPE_READ, false, &err), TL_OK);
  assert_int_equal(tl_srv_auth_check(a, "Bearer compiler-0123456789abcdef", TL_SCOPE_ADMIN, false, &err), TL_FORBIDDEN);
  assert_int_equal(tl_srv_auth_check(a, "Bearer admin-0123456789abcdef", TL_SCOPE_ADMIN, false, &err), TL_OK);
  assert_int_equal(tl_srv_auth_check(a, "Bearer admin-0123456789abcdef", TL_SCOPE_COMPILE, false, &err), TL_OK);
  assert_int_equal(tl_srv_auth_check(a, "Bearer unknown-0123456789abcdef", TL_SCOPE_READ, true, &err), TL_UNAUTHORIZED);
  assert_int_equal(tl_srv_auth_check(a, "Basic YWxhZGRpbjpvcGVuc2VzYW1l", TL_SCOPE_READ, false, &err), TL_UNAUTHORIZED);
  assert_int_equal(tl_srv_auth_check(a, "Bearer ", TL_SCOPE_READ, false, &err), TL_UNAUTHORIZED);
  assert_int_equal(tl_srv_auth_check(a, NULL, TL_SCOPE_READ, false, &err), TL_UNAUTHORIZED);
  assert_int_equal(tl_srv_auth_check(a, NULL, TL_SCOPE_READ, true, &err), TL_OK);
  assert_int_equal(tl_srv_auth_check(a, NULL, TL_SCOPE_COMPILE, true, &err), TL_UNAUTHORIZED);
  assert_int_equal(tl_srv_auth_check(a, NULL, 0, false, &err), TL_OK); /* open endpoints */
  assert_int_equal(tl_srv_auth_check(NULL, NULL, TL_SCOPE_ADMIN, false, &err), TL_OK); /* auth off */
  tl_srv_auth_free(a);

  const char *bad[] = {
      "short read\n",                              /* too short */
      "bad*char-0123456789abcdef read\n",          /* bad character */
      "tok-0123456789abcdef\n",                    /* no scope */
      "tok-0123456789abcdef write\n",              /* unknown scope */
      "tok-0123456789abcdef read,\n",              /* trailing comma */
      "tok-0123456789abcdef read extra\n",         /* junk */
      "tok-0123456789abcdef read\ntok-0123456789abcdef admin\n", /* twice */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    a = NULL;
    assert_int_equal(tl_srv_auth_parse(bad[i], strlen(bad[i]), &a, &err), TL_INVALID_ARG);
    assert_null(a);
    assert_non_null(strstr(err.message, "line"));
  }
  assert_int_equal(tl_srv_auth_load("/nonexistent/tokens", &a, &err), TL_IO);
}

static void test_metrics(void **state) {
  tl_srv_metrics *m = calloc(1, sizeof *m);
  assert_non_null(m);
  tl_srv_metrics_request(m, TL_ROUTE_COMPILE, 200, 100, 1000);
  tl_srv_metrics_request(m, TL_ROUTE_COMPILE, 200, 100, 1000);
  tl_srv_metrics_request(m, TL_ROUTE_ARTIFACTS, 304, 0, 10);
  tl_srv_metrics_request(m, TL_ROUTE_OTHER, 299, 0, 10);
  tl_srv_metrics_compile(m, TL_COMPILE_OK, 0.3);
  tl_srv_metrics_compile(m, TL_COMPILE_TIMEOUT, 500);
  atomic_fetch_add(&m->singleflight_joins, 49);
  tl_cache_stats st = {.bytes = 10, .artifacts = 1, .builds = 2, .integrity_failures = 3};
  tl_srv_metrics_extra x = {.cache = &st, .workers = 2, .queue_capacity = 64,
                            .toolchain = "NV \"x\""};
  tl_srv_buf b = {0};
  tl_srv_metrics_render(m, &x, &b);
  assert_false(b.failed);
  assert_non_null(strstr(b.data, "tlserverd_requests_total{route=\"compile\",code=\"200\"} 2\n"));
  assert_non_null(strstr(b.data, "tlserverd_requests_total{route=\"artifacts\",code=\"304\"} 1\n"));
  assert_non_null(strstr(b.data, "tlserverd_requests_total{route=\"other\",code=\"other\"} 1\n"));
  assert_non_null(strstr(b.data, "tlserverd_compiles_total{outcome=\"ok\"} 1\n"));
  assert_non_null(strstr(b.data, "tlserverd_compiles_total{outcome=\"timeout\"} 1\n"));
  assert_non_null(strstr(b.data, "tlserverd_compile_seconds_bucket{le=\"0.25\"} 0\n"));
  assert_non_null(strstr(b.data, "tlserverd_compile_seconds_bucket{le=\"0.5\"} 1\n"));
  assert_non_null(strstr(b.data, "tlserverd_compile_seconds_bucket{le=\"+Inf\"} 2\n"));
  assert_non_null(strstr(b.data, "tlserverd_compile_seconds_count 2\n"));
  assert_non_null(strstr(b.data, "tlserverd_singleflight_joins_total 49\n"));
  assert_non_null(strstr(b.data, "tlserverd_cache_integrity_failures_total 3\n"));
  assert_non_null(strstr(b.data, "toolchain=\"NV \\\"x\\\"\""));
  /* every sample line is NAME[{...}] VALUE */
  for (char *line = b.data; *line;) {
    char *nl = strchr(line, '\n');
    assert_non_null(nl);
    if (line[0] != '#') {
      assert_true(strncmp(line, "tlserverd_", 10) == 0);
      char *sp = nl;
      while (sp > line && *sp != ' ')
        sp--;
      assert_true(*sp == ' ');
      char *end;
      strtod(sp + 1, &end);
      assert_ptr_equal(end, nl);
    }
    line = nl + 1;
  }
  tl_srv_buf_free(&b);
  free(m);
}

static void test_artmem(void **state) {
  tl_srv_artmem *m = tl_srv_artmem_new(4000, 60);
  assert_non_null(m);
  char id[3][65];
  for (int i = 0; i < 3; i++) {
    memset(id[i], 'a' + i, 64);
    id[i][64] = 0;
  }
  tl_srv_artref r;
  assert_false(tl_srv_artmem_get(m, id[0], &r));
  for (int i = 0; i < 3; i++) {
    void *bytes = malloc(900);
    memset(bytes, i, 900);
    assert_true(tl_srv_artmem_put(m, id[i], bytes, 900, &r));
    assert_int_equal(r.n, 900);
    assert_non_null(r.full);
    tl_srv_artref_release(&r);
  }
  int64_t bytes, entries;
  tl_srv_artmem_stats(m, &bytes, &entries);
  assert_int_equal(entries, 3);
  assert_int_equal(bytes, 2700);
  /* a fourth and fifth push out the least recently used (id[0] unless touched) */
  assert_true(tl_srv_artmem_get(m, id[0], &r)); /* id[0] is now the most recent */
  assert_int_equal(((const unsigned char *)r.bytes)[0], 0);
  tl_srv_artref_release(&r);
  char id4[65];
  memset(id4, 'f', 64);
  id4[64] = 0;
  assert_true(tl_srv_artmem_put(m, id4, malloc(900), 900, &r));
  tl_srv_artref held = r; /* keep borrowing it across an eviction */
  char id5[65];
  memset(id5, 'e', 64);
  id5[64] = 0;
  assert_true(tl_srv_artmem_put(m, id5, malloc(900), 900, &r));
  tl_srv_artref_release(&r);
  tl_srv_artmem_stats(m, &bytes, &entries);
  assert_true(bytes <= 4000);
  assert_true(tl_srv_artmem_get(m, id[0], &r));
  tl_srv_artref_release(&r);
  assert_false(tl_srv_artmem_get(m, id[1], &r)); /* the least recently used went first */
  tl_srv_artref_release(&held);
  /* too large for the cache: served, not kept */
  char id6[65];
  memset(id6, 'd', 64);
  id6[64] = 0;
  assert_true(tl_srv_artmem_put(m, id6, malloc(3000), 3000, &r));
  tl_srv_artref_release(&r);
  assert_false(tl_srv_artmem_get(m, id6, &r));
  tl_srv_artmem_free(m);

  /* TTL 0: every entry is stale at once */
  m = tl_srv_artmem_new(4000, 0);
  assert_true(tl_srv_artmem_put(m, id[0], malloc(10), 10, &r));
  tl_srv_artref_release(&r);
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
  assert_false(tl_srv_artmem_get(m, id[0], &r));
  tl_srv_artmem_free(m);
}

/* The worker's warm-up compile builds, for the first NVIDIA target offered;
 * nothing is compiled when only AMD targets are. */
static void test_worker_warm(void **state) {
  (void)state;
  static const char *const amd_only[] = {"gfx942", NULL};
  char target[64];
  tl_error err;
  tl_error_clear(&err);
  assert_int_equal(tl_srv_worker_warm(amd_only, target, sizeof target, &err), TL_OK);
  assert_string_equal(target, "");
  const char *desc;
  const char *const *targets = tl_compiler_targets(&desc, &err);
  bool nvidia = false;
  for (size_t i = 0; targets && targets[i]; i++)
    nvidia |= strncmp(targets[i], "sm_", 3) == 0;
  if (!nvidia) {
    print_message("skipping: no NVRTC here\n");
    skip();
  }
  assert_int_equal(tl_srv_worker_warm(targets, target, sizeof target, &err), TL_OK);
  assert_int_equal(strncmp(target, "sm_", 3), 0);
}

/* tier.c without a Redis: URL checks, and the ring of consistent hashing
 * (connections are lazy; nothing listens on these ports, so the renewer's
 * pings fail at once and only count errors). */
static tl_srv_tier *tier_of(tl_srv_metrics *m, const char *const *urls, int n, tl_error *err) {
  tl_srv_tier_opts o = {.urls = urls, .nurls = n, .timeout_s = 0.1, .ttl_s = 0, .lease_s = 1,
                        .max_entry = 1 << 20, .metrics = m};
  tl_srv_tier *t = NULL;
  tl_status st = tl_srv_tier_new(&o, &t, err);
  assert_true((st == TL_OK) == (t != NULL));
  return t;
}

static void test_tier_ring(void **state) {
  (void)state;
  static tl_srv_metrics m;
  tl_error err;
  static const char *const bad[] = {
      "http://127.0.0.1:1", "redis://127.0.0.1", "redis://:6379", "redis://127.0.0.1:0",
      "redis://127.0.0.1:70000", "redis://127.0.0.1:1/16", "redis://127.0.0.1:1/x",
      "redis-sentinel://127.0.0.1:1", "redis-sentinel://127.0.0.1:1/", "redis-sentinel://127.0.0.1:1/a/b",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (tier_of(&m, &bad[i], 1, &err))
      fail_msg("--tier '%s' was accepted", bad[i]);
  static const char *const twice[] = {"redis://127.0.0.1:1", "redis://127.0.0.1:1"};
  assert_null(tier_of(&m, twice, 2, &err));
  assert_non_null(strstr(err.message, "twice"));

  static const char *const urls[] = {"redis://127.0.0.1:1", "redis://127.0.0.1:2",
                                     "redis://127.0.0.1:3/2", "redis://127.0.0.1:4"};
  static const char *const reversed[] = {"redis://127.0.0.1:3/2", "redis://127.0.0.1:2",
                                         "redis://127.0.0.1:1"};
  tl_srv_tier *t3 = tier_of(&m, urls, 3, &err), *t4 = tier_of(&m, urls, 4, &err);
  tl_srv_tier *r3 = tier_of(&m, reversed, 3, &err);
  assert_non_null(t3);
  assert_non_null(t4);
  assert_non_null(r3);
  enum { N = 6000 };
  int count[4] = {0}, moved = 0, moved_elsewhere = 0;
  for (int i = 0; i < N; i++) {
    char text[32], key[65];
    snprintf(text, sizeof text, "key %d", i);
    assert_int_equal(tl_sha256_hex(text, strlen(text), key), TL_OK);
    int a = tl_srv_tier_shard_of(t3, key), b = tl_srv_tier_shard_of(t4, key);
    count[a]++;
    /* the ring depends on the URLs, not on their order */
    assert_string_equal(urls[a], reversed[tl_srv_tier_shard_of(r3, key)]);
    if (a != b) {
      moved++;
      moved_elsewhere += b != 3; /* a key only ever moves to the new primary */
    }
  }
  for (int s = 0; s < 3; s++) /* about a third each: 160 points per primary */
    if (count[s] < N / 4 || count[s] > N / 2)
      fail_msg("primary %d holds %d of %d keys", s, count[s], N);
  assert_int_equal(moved_elsewhere, 0);
  if (moved < N / 6 || moved > N / 3) /* about a quarter moves to a fourth primary */
    fail_msg("%d of %d keys moved when a fourth primary was added", moved, N);
  printf("tier ring: %d / %d / %d of %d keys per primary; %d moved to a fourth\n", count[0], count[1],
         count[2], N, moved);
  int total = 0;
  assert_int_equal(tl_srv_tier_up(t3, &total), 0); /* nothing was reached */
  assert_int_equal(total, 3);
  tl_srv_buf b = {0};
  tl_srv_tier_json(t3, &b);
  assert_non_null(strstr(b.data, "\"state\": \"down\""));
  tl_srv_buf_free(&b);
  tl_srv_tier_free(t3);
  tl_srv_tier_free(t4);
  tl_srv_tier_free(r3);
}

/* The recent outcomes of the status page: a save writes every slot changed
 * since the last one in one transaction (one commit for all 64, none when
 * nothing changed), and a fresh ring reads them back. */
static void test_recent_save(void **state) {
  (void)state;
  char dir[] = "/tmp/tl-test-recent-XXXXXX", path[64], name[32];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/cache.db", dir);
  tl_cache *c = NULL;
  tl_error err;
  assert_int_equal(tl_cache_open(path, NULL, &c, &err), TL_OK);
  tl_srv_recent *r = tl_srv_recent_new(), *r2 = tl_srv_recent_new();
  tl_srv_result *ok = tl_srv_result_new(), *bad = tl_srv_result_error(TL_BAD_PROGRAM, "the program is invalid");
  assert_non_null(r);
  assert_non_null(r2);
  assert_non_null(ok);
  assert_non_null(bad);
  snprintf(ok->key, sizeof ok->key, "%064d", 1);
  snprintf(ok->artifact, sizeof ok->artifact, "%064d", 2);
  ok->size = 3368;
  int total = TL_SRV_RECENT + 8;
  for (int i = 0; i < total; i++) {
    snprintf(name, sizeof name, "prog%d", i);
    tl_srv_recent_add(r, name, "sm_80", i % 5 ? ok : bad);
  }
  int64_t before = tl_cache_commits(c);
  tl_srv_recent_save(r, c);
  assert_int_equal(tl_cache_commits(c), before + 1); /* 64 slots changed: one commit */
  tl_srv_recent_save(r, c);
  assert_int_equal(tl_cache_commits(c), before + 1); /* nothing changed: none */
  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "prog%d", total + i);
    tl_srv_recent_add(r, name, "sm_90a", ok);
  }
  tl_srv_recent_save(r, c);
  assert_int_equal(tl_cache_commits(c), before + 2);
  /* every slot is there: the newest outcomes, none of the first ones */
  int found_new = 0;
  for (int i = 0; i < TL_SRV_RECENT; i++) {
    char note[32], *v = NULL;
    snprintf(note, sizeof note, "status recent %d", i);
    assert_int_equal(tl_cache_note_get(c, note, &v, &err), TL_OK);
    found_new += strstr(v, "\"prog74\"") != NULL || strstr(v, "\"prog73\"") != NULL;
    assert_null(strstr(v, "\"prog0\""));
    free(v);
  }
  assert_int_equal(found_new, 2);
  assert_int_equal(tl_srv_recent_load(r2, c), TL_SRV_RECENT);
  tl_srv_recent_save(r2, c); /* loaded slots are saved again, in their order: one commit */
  assert_int_equal(tl_cache_commits(c), before + 3);
  tl_srv_result_unref(ok);
  tl_srv_result_unref(bad);
  tl_srv_recent_free(r);
  tl_srv_recent_free(r2);
  tl_cache_close(c);
  for (const char *suffix = ""; suffix; suffix = *suffix == 0 ? "-wal" : strcmp(suffix, "-wal") == 0 ? "-shm" : NULL) {
    char f[80];
    snprintf(f, sizeof f, "%s%s", path, suffix);
    unlink(f);
  }
  assert_int_equal(rmdir(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_size),
      cmocka_unit_test(test_parse_seconds_int_listen),
      cmocka_unit_test(test_range),
      cmocka_unit_test(test_etag_and_content_type),
      cmocka_unit_test(test_json_depth_and_buf),
      cmocka_unit_test(test_config),
      cmocka_unit_test(test_auth),
      cmocka_unit_test(test_metrics),
      cmocka_unit_test(test_artmem),
      cmocka_unit_test(test_worker_warm),
      cmocka_unit_test(test_tier_ring),
      cmocka_unit_test(test_recent_save),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
