/*
 * fuzz_http.c - the libFuzzer target of tlserverd's HTTP front end.  The
 * input is the raw bytes one client sends on one connection: request
 * lines, headers and bodies, as many requests as it holds.  They go through
 * libmicrohttpd's parser, then server/http.c (framing checks, routing,
 * auth, body collection and its budget) and server/api.c (the handlers:
 * compile requests' JSON, Range, If-None-Match, ids and keys).
 *
 * One real server (tl_srv_start: its cache in a temporary folder, one
 * compile worker, 1 s deadlines, a 256 KiB body limit) starts at the first
 * input and is kept.  Each input is sent on a new loopback connection
 * whose sending side is then shut; whatever the server answers is read
 * until it closes the connection (at most READ_LIMIT_MS).  Then the server
 * must still answer GET /healthz with 200 on a new connection: a crash, a
 * sanitizer report, a server that stops answering is a finding (abort).
 *
 * The compile workers are tlserverd itself (--worker-fd): TL_FUZZ_TLSERVERD
 * names it, else $TL_BUILD/bin/tlserverd, else build/bin/tlserverd (from
 * the repository root).
 *
 * Built two ways: `make fuzz` (clang -fsanitize=fuzzer, build/fuzz/fuzz_http)
 * and, with replay_main.c, as build/tests/fuzz_http_replay, which `make
 * test` runs on tests/fuzz/http_corpus (tests/sh/fuzz_replay.sh).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../server/server.h"

#define READ_LIMIT_MS 3000 /* the server closes a half-closed connection within about 1 s */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tl_srv *srv;
static char tmpdir[64];

static void stop_server(void) {
  tl_srv_stop(srv);
  srv = NULL;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0)
    fprintf(stderr, "fuzz_http: could not remove %s\n", tmpdir);
}

static void start_server(void) {
  signal(SIGPIPE, SIG_IGN);
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tl-fuzz-http-XXXXXX");
  if (!mkdtemp(tmpdir)) {
    perror("fuzz_http: mkdtemp");
    abort();
  }
  static char exe[512];
  const char *env = getenv("TL_FUZZ_TLSERVERD"), *b = getenv("TL_BUILD");
  if (env)
    snprintf(exe, sizeof exe, "%s", env);
  else
    snprintf(exe, sizeof exe, "%s/bin/tlserverd", b && *b ? b : "build");
  if (access(exe, X_OK) != 0) {
    fprintf(stderr, "fuzz_http: %s is not an executable tlserverd (set TL_FUZZ_TLSERVERD)\n", exe);
    abort();
  }
  tl_srv_config cfg;
  tl_srv_config_defaults(&cfg);
  cfg.port = 0;
  snprintf(cfg.db_path, sizeof cfg.db_path, "%s/cache.db", tmpdir);
  cfg.workers = 1;
  cfg.threads = 2;
  cfg.queue = 4;
  cfg.header_timeout = 1;
  cfg.body_timeout = 1;
  cfg.idle_timeout = 1;
  cfg.max_body = 256 << 10;
  cfg.max_body_total = 1 << 20;
  cfg.compile_timeout = 20;
  cfg.shutdown_grace = 1;
  cfg.memory_cache = 1 << 20;
  cfg.log_format = TL_LOG_OFF;
  tl_error err;
  tl_error_clear(&err);
  if (tl_srv_start(&cfg, exe, &srv, &err) != TL_OK) {
    fprintf(stderr, "fuzz_http: the server did not start: %s\n", err.message);
    abort();
  }
  atexit(stop_server);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int dial(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tl_srv_port(srv))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    perror("fuzz_http: connect");
    abort();
  }
  return fd;
}

/* Sends data, shuts the sending side and reads until the server closes (or
 * READ_LIMIT_MS).  Keeps the first bytes of the answer in head. */
static void exchange(const void *data, size_t size, char *head, size_t cap) {
  int fd = dial();
  const char *p = data;
  for (size_t done = 0; done < size;) {
    ssize_t w = send(fd, p + done, size - done, MSG_NOSIGNAL);
    if (w <= 0)
      break; /* the server answered and closed: fine */
    done += (size_t)w;
  }
  shutdown(fd, SHUT_WR);
  size_t n = 0;
  int64_t end = now_ms() + READ_LIMIT_MS;
  for (;;) {
    int64_t left = end - now_ms();
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
      break;
    char buf[4096];
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r <= 0)
      break;
    if (n + 1 < cap) {
      size_t k = (size_t)r < cap - 1 - n ? (size_t)r : cap - 1 - n;
      memcpy(head + n, buf, k);
      n += k;
    }
  }
  if (cap)
    head[n] = 0;
  close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!srv)
    start_server();
  char head[64];
  exchange(data, size, head, sizeof head);
  static const char health[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  exchange(health, sizeof health - 1, head, sizeof head);
  if (strncmp(head, "HTTP/1.1 200", 12) != 0) {
    fprintf(stderr, "fuzz_http: after this input the server no longer answers /healthz (got '%.40s')\n",
            head);
    abort();
  }
  return 0;
}
