/*
 * procs.c - SIGKILL a process group or session and wait until every member
 * has died (procs.h says why).  Needs /proc; pidfds (Linux 5.3) when there,
 * else it looks again every 2 ms.
 */
#include "procs.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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
