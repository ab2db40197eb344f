/*
 * procs.c - SIGKILL a process group or session and wait until every member
 * has died (procs.h says why), and run a tool as a time-limited process
 * group in a private temporary directory (the AMD toolchain's clang and
 * ld.lld, NVIDIA's ptxas).  Needs /proc; pidfds (Linux 5.3) when there,
 * else it looks again every 2 ms.
 */
#include "procs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void) { return (long)tl_proc_now_ms(); }

/* Sends SIGKILL to every live member and opens a pidfd on each (up to nfd
 * of them, into fds).  Returns how many were alive, or -1. */
static int kill_members(int id, tl_procs_by by, int *fds, int nfd, int *nopen) {
  *nopen = 0;
  DIR *d = opendir("/proc");
  if (!d)
    return -1;
  int alive = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char *end;
    long pid = strtol(de->d_name, &end, 10);
    if (*end || pid <= 0)
      continue;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')'); /* after the command name, which may hold anything */
    char state;
    int ppid, pgrp, session;
    if (!rp || sscanf(rp + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) != 4 ||
        (by == TL_PROCS_GROUP ? pgrp : session) != id || state == 'Z' || state == 'X')
      continue;
    alive++;
    int pfd = -1;
#ifdef SYS_pidfd_open
    pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#endif
#ifdef SYS_pidfd_send_signal
    if (pfd < 0 || syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) != 0)
#endif
      kill((pid_t)pid, SIGKILL);
    if (pfd >= 0 && *nopen < nfd)
      fds[(*nopen)++] = pfd;
    else if (pfd >= 0)
      close(pfd);
  }
  closedir(d);
  return alive;
}

int tl_procs_kill_wait(int id, tl_procs_by by, long wait_ms) {
  if (id <= 0)
    return 0;
  kill(-id, SIGKILL); /* the group id (a session's leader leads a group of the same id) */
  long deadline = now_ms() + wait_ms;
  for (;;) {
    int fds[64], nopen;
    int alive = kill_members(id, by, fds, 64, &nopen);
    if (alive <= 0)
      return alive;
    for (int i = 0; i < nopen; i++) {
      long left = deadline - now_ms();
      struct pollfd pf = {fds[i], POLLIN, 0};
      if (left > 0)
        while (poll(&pf, 1, (int)left) < 0 && errno == EINTR)
          ;
      close(fds[i]);
    }
    if (now_ms() > deadline)
      return kill_members(id, by, fds, 0, &nopen);
    if (nopen < alive) {
      struct timespec ts = {0, 2000000}; /* without pidfds: let the signals land, then look again */
      nanosleep(&ts, NULL);
    }
  }
}

/* ---- files and tools (procs.h) ---------------------------------------------- */

double tl_proc_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int tl_proc_is_exec(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

/* Looks for an executable called name in $PATH; fills out (cap bytes). */
int tl_proc_find_on_path(const char *name, char *out, size_t cap) {
  const char *path = getenv("PATH");
  if (!path)
    path = "/usr/local/bin:/usr/bin:/bin";
  while (*path) {
    const char *colon = strchr(path, ':');
    size_t n = colon ? (size_t)(colon - path) : strlen(path);
    if (n > 0 && n < PATH_MAX) {
      int w = snprintf(out, cap, "%.*s/%s", (int)n, path, name);
      if (w > 0 && (size_t)w < cap && tl_proc_is_exec(out))
        return 1;
    }
    path += n + (colon ? 1 : 0);
  }
  out[0] = 0;
  return 0;
}

/* Reads a whole file of at most `limit` bytes into a malloc'd buffer (with
 * a NUL after it).  With cut set, a longer file is cut at limit; otherwise
 * it is TL_TOO_LARGE. */
tl_status tl_proc_read_file(const char *path, size_t limit, int cut, unsigned char **data, size_t *size,
                           tl_error *err) {
  *data = NULL;
  *size = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return tl_error_set(err, TL_IO, "cannot open %s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return tl_error_set(err, TL_IO, "%s is not a regular file", path);
  }
  size_t n = (size_t)sb.st_size;
  if (n > limit) {
    if (!cut) {
      close(fd);
      return tl_error_set(err, TL_TOO_LARGE, "%s is %zu bytes, over the limit of %zu", path, n, limit);
    }
    n = limit;
  }
  unsigned char *buf = malloc(n + 1);
  if (!buf) {
    close(fd);
    return tl_error_set(err, TL_NOMEM, "out of memory reading %zu bytes of %s", n, path);
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  close(fd);
  buf[got] = 0;
  *data = buf;
  *size = got;
  return TL_OK;
}

tl_status tl_proc_write_file(const char *path, const void *data, size_t n, tl_error *err) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return tl_error_set(err, TL_IO, "cannot create %s: %s", path, strerror(errno));
  const unsigned char *p = data;
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      int e = errno;
      close(fd);
      return tl_error_set(err, TL_IO, "cannot write %s: %s", path, strerror(e));
    }
    done += (size_t)w;
  }
  if (close(fd) != 0)
    return tl_error_set(err, TL_IO, "cannot write %s: %s", path, strerror(errno));
  return TL_OK;
}

/* A private directory for one compile: mkdtemp under $TMPDIR or /tmp. */
tl_status tl_proc_tmpdir(char *dir, size_t cap, const char *prefix, tl_error *err) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base || strlen(base) > PATH_MAX - 64)
    base = "/tmp";
  snprintf(dir, cap, "%s/%s-XXXXXX", base, prefix);
  if (!mkdtemp(dir))
    return tl_error_set(err, TL_IO, "cannot create a temporary directory under %s: %s", base, strerror(errno));
  return TL_OK;
}

/* Removes dir and the plain files in it (all a compile leaves there). */
void tl_proc_rmdir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
        continue;
      unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
  }
  rmdir(dir);
}

/* ---- subprocesses ------------------------------------------------------------ */

/* Starts argv[0] (a path) with stdin from /dev/null, stdout and stderr to
 * out_fd (or /dev/null when out_fd < 0), in a new process group, with
 * default signal handling and an empty signal mask, and the environment
 * LC_ALL=C plus TMPDIR=tmpdir when given. */
tl_status tl_proc_spawn(char *const argv[], int out_fd, const char *tmpdir, pid_t *pid, tl_error *err) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  if (posix_spawn_file_actions_init(&fa) != 0)
    return tl_error_set(err, TL_NOMEM, "out of memory starting %s", argv[0]);
  if (posix_spawnattr_init(&attr) != 0) {
    posix_spawn_file_actions_destroy(&fa);
    return tl_error_set(err, TL_NOMEM, "out of memory starting %s", argv[0]);
  }
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (out_fd >= 0) {
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
  } else {
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  }
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  char tmpenv[PATH_MAX + 8];
  char *envp[3];
  int ne = 0;
  envp[ne++] = "LC_ALL=C";
  if (tmpdir) {
    snprintf(tmpenv, sizeof tmpenv, "TMPDIR=%s", tmpdir);
    envp[ne++] = tmpenv;
  }
  envp[ne] = NULL;
  int rc = posix_spawn(pid, argv[0], &fa, &attr, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    return tl_error_set(err, TL_TOOLCHAIN, "cannot run %s: %s", argv[0], strerror(rc));
  return TL_OK;
}

/* Waits for pid until deadline (tl_proc_now_ms() clock).  On time-out kills its
 * process group, waits until every member has died (clang -cc1 under the
 * clang driver too, not only pid: procs.h), reaps pid and answers
 * TL_TIMEOUT.  *status is waitpid's. */
tl_status tl_proc_await(pid_t pid, double deadline, const char *what, int *status, tl_error *err) {
#ifdef SYS_pidfd_open
  int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
#else
  int pfd = -1;
#endif
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) {
      if (pfd >= 0)
        close(pfd);
      return TL_OK;
    }
    if (r < 0 && errno != EINTR) {
      int e = errno;
      if (pfd >= 0)
        close(pfd);
      return tl_error_set(err, TL_TOOLCHAIN, "waiting for %s failed: %s", what, strerror(e));
    }
    double left = deadline - tl_proc_now_ms();
    if (left <= 0) {
      /* pid stays a zombie until reaped below, so the group's id names only its members */
      int alive = tl_procs_kill_wait(pid, TL_PROCS_GROUP, TL_PROCS_KILL_WAIT_MS);
      kill(pid, SIGKILL);
      while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
      if (pfd >= 0)
        close(pfd);
      if (alive > 0)
        return tl_error_set(err, TL_TIMEOUT, "%s ran out of its time limit and was stopped, but %d of its "
                            "processes were still alive %d ms after SIGKILL", what, alive, TL_PROCS_KILL_WAIT_MS);
      return tl_error_set(err, TL_TIMEOUT, "%s ran out of its time limit and was stopped", what);
    }
    if (pfd >= 0) {
      struct pollfd p = {pfd, POLLIN, 0};
      poll(&p, 1, left > 1e6 ? 1000000 : (int)left + 1);
    } else {
      struct timespec ts = {0, 2000000}; /* 2 ms */
      nanosleep(&ts, NULL);
    }
  }
}

/* Runs argv to completion with output to out_fd.  TL_OK with *exit_code the
 * child's exit status (128 + N for a signal N). */
tl_status tl_proc_run(char *const argv[], int out_fd, const char *tmpdir, double deadline, int *exit_code,
                     tl_error *err) {
  pid_t pid;
  tl_status st = tl_proc_spawn(argv, out_fd, tmpdir, &pid, err);
  if (st != TL_OK)
    return st;
  int status = 0;
  const char *base = strrchr(argv[0], '/');
  st = tl_proc_await(pid, deadline, base ? base + 1 : argv[0], &status, err);
  if (st != TL_OK)
    return st;
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return TL_OK;
}

/* Runs argv and reads what it printed (cut at limit bytes). */
tl_status tl_proc_run_capture(char *const argv[], double deadline, size_t limit, int *exit_code, char **text,
                             tl_error *err) {
  *text = NULL;
  FILE *f = tmpfile();
  if (!f)
    return tl_error_set(err, TL_IO, "cannot create a temporary file: %s", strerror(errno));
  tl_status st = tl_proc_run(argv, fileno(f), NULL, deadline, exit_code, err);
  if (st == TL_OK) {
    long n = -1;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) {
      st = tl_error_set(err, TL_IO, "cannot read a temporary file");
    } else {
      size_t len = (size_t)n < limit ? (size_t)n : limit;
      char *buf = malloc(len + 1);
      if (!buf) {
        st = tl_error_set(err, TL_NOMEM, "out of memory");
      } else {
        rewind(f);
        len = fread(buf, 1, len, f);
        buf[len] = 0;
        *text = buf;
      }
    }
  }
  fclose(f);
  return st;
}

