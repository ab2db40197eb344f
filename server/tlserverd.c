/*
 * tlserverd.c - main() of the compile service daemon: reads the flags
 * (config.c), runs as a compile worker when started with --worker-fd
 * (proc.c), or else starts the server (http.c), writes the --port-file,
 * and waits for SIGTERM or SIGINT to stop it gracefully.
 *
 * Signals are blocked in every thread (the mask is set before any thread
 * is started, and threads inherit it) and taken synchronously here with
 * sigwait, so no handler ever runs inside the server's code.  SIGPIPE is
 * ignored: a client that goes away is an error on its socket, not a
 * reason to die.
 *
 * Under systemd (Type=notify, deploy/tlserverd.service) it says when it is
 * ready and when it stops with sd_notify's protocol, spoken here directly
 * (no libsystemd): one datagram to the AF_UNIX socket that $NOTIFY_SOCKET
 * names, READY=1 once it listens (the port file written), STOPPING=1 when a
 * signal starts the graceful stop.
 *
 * Exit status: 0 after a graceful stop or --help/--version, 1 when the
 * server cannot start, 2 for a bad command line.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "server.h"
#include "../compiler/tlcompiler.h"

static int write_port_file(const char *path, int port) {
  char tmp[TL_CACHE_PATH_MAX + 16];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f)
    return -1;
  fprintf(f, "%d\n", port);
  if (fclose(f) != 0 || rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* sd_notify(3)'s protocol: sends state (e.g. "READY=1") as one datagram to
 * the socket $NOTIFY_SOCKET names: a path, or "@NAME" in the abstract
 * namespace.  Nothing when the variable is unset (not under systemd); a
 * name it cannot use or a send that fails is said on stderr, and the server
 * goes on (systemd then says the start timed out). */
static void sd_notify_state(const char *state) {
  const char *name = getenv("NOTIFY_SOCKET");
  if (!name || !name[0])
    return;
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  size_t n = strlen(name);
  if ((name[0] != '/' && name[0] != '@') || n >= sizeof sa.sun_path) {
    fprintf(stderr, "tlserverd: NOTIFY_SOCKET='%s' is not an absolute path or @NAME of at most %zu "
                    "bytes; systemd is not told %s\n",
            name, sizeof sa.sun_path - 1, state);
    return;
  }
  memcpy(sa.sun_path, name, n);
  if (name[0] == '@')
    sa.sun_path[0] = 0; /* the abstract namespace */
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || sendto(fd, state, strlen(state), MSG_NOSIGNAL, (const struct sockaddr *)&sa,
                       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0)
    fprintf(stderr, "tlserverd: cannot tell systemd %s (NOTIFY_SOCKET=%s): %s\n", state, name,
            strerror(errno));
  if (fd >= 0)
    close(fd);
}

int main(int argc, char **argv) {
  tl_srv_config cfg;
  tl_srv_config_defaults(&cfg);
  bool help, version;
  tl_error err;
  tl_error_clear(&err);
  if (tl_srv_config_parse(&cfg, argc, argv, &help, &version, &err) != TL_OK) {
    fprintf(stderr, "tlserverd: %s\n(see tlserverd --help)\n", err.message);
    return 2;
  }
  if (help) {
    fputs(tl_srv_usage(), stdout);
    return 0;
  }
  if (version) {
    printf("tlserverd %s (compiler %s)\n", TL_SERVER_VERSION, tl_compiler_id);
    return 0;
  }
  if (cfg.worker_fd >= 0) {
    tl_srv_proc_opts o = {
        .exe = argv[0],
        .memory = cfg.worker_memory,
        .cpu_seconds = cfg.compile_timeout,
        .test_hooks = cfg.test_hooks,
    };
    return tl_srv_worker_main(cfg.worker_fd, &o);
  }

  /* Workers run this very program: the file is held open and executed
   * through /proc/self/fd/N, so that a new binary installed over the old
   * one while the daemon runs (make, a package upgrade) cannot give it
   * workers of another compiler version, whose build keys would differ. */
  int exe_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (exe_fd >= 0 && exe_fd < 10) { /* clear of the fds a worker's set-up replaces (0..3) */
    int high = fcntl(exe_fd, F_DUPFD_CLOEXEC, 10);
    close(exe_fd);
    exe_fd = high;
  }
  if (exe_fd < 0) {
    fprintf(stderr, "tlserverd: cannot open my own executable (/proc/self/exe): %s\n",
            strerror(errno));
    return 1;
  }
  char exe[64];
  snprintf(exe, sizeof exe, "/proc/self/fd/%d", exe_fd);

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  tl_srv *s = NULL;
  if (tl_srv_start(&cfg, exe, &s, &err) != TL_OK) {
    fprintf(stderr, "tlserverd: %s\n", err.message);
    return 1;
  }
  int port = tl_srv_port(s);
  if (cfg.port_file && write_port_file(cfg.port_file, port) != 0) {
    fprintf(stderr, "tlserverd: cannot write the port file '%s': %s\n", cfg.port_file,
            strerror(errno));
    tl_srv_stop(s);
    return 1;
  }
  const char *toolchain = s->toolchain ? s->toolchain : "none";
  fprintf(stderr,
          "tlserverd %s: listening on %s://%s%s%s:%d (db %s, %d workers, toolchain %s%s%s)\n",
          TL_SERVER_VERSION, cfg.tls_cert ? "https" : "http", strchr(cfg.host, ':') ? "[" : "",
          cfg.host, strchr(cfg.host, ':') ? "]" : "", port, cfg.db_path, cfg.workers, toolchain,
          s->toolchain ? "" : ": ", s->toolchain ? "" : s->toolchain_error);
  char state[160];
  snprintf(state, sizeof state, "READY=1\nSTATUS=listening on port %d", port);
  sd_notify_state(state);

  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0)
      continue;
    if (sig == SIGTERM || sig == SIGINT) {
      fprintf(stderr, "tlserverd: %s: stopping (running compiles get up to %g s)\n",
              sig == SIGTERM ? "SIGTERM" : "SIGINT", cfg.shutdown_grace);
      break;
    }
    /* SIGHUP: nothing to reload yet; ignored */
  }
  sd_notify_state("STOPPING=1\nSTATUS=stopping: finishing running compiles");
  tl_srv_stop(s);
  fprintf(stderr, "tlserverd: stopped\n");
  return 0;
}
