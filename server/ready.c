/*
 * ready.c - whether this server can do its work, for /readyz and /metrics:
 * one table of checks, each with its state and the reason it failed.
 *
 *   toolchain  some toolchain offers a target (NVRTC, or hiprtc / clang for
 *              AMD): without one every compile request would fail.  Probed
 *              once at start (the compiler opens its toolchains once per
 *              process): a toolchain installed later needs a restart.
 *   database   the cache database takes a write: a one-row write
 *              transaction (tl_cache_note_set of "ready_probe"), which
 *              fails on a read-only file or mount and on a full disk that
 *              SQLite cannot grow its journal on.
 *   disk       the folder of the database takes TL_SRV_PROBE_BYTES: a
 *              new file "DB.probe-PID" is created (O_EXCL), written and
 *              removed, which fails with ENOSPC on a full disk (a write
 *              SQLite may still fit into pages it holds would not show it),
 *              EROFS on a read-only mount and EACCES on a folder made
 *              read-only.  A probe file that could not be removed (the
 *              folder became read-only between its creation and its
 *              removal) fails the probe, and the next probe removes it
 *              before it creates its own: writing into a file that is
 *              there already needs no right on the folder, so reusing it
 *              would pass in a read-only folder.
 *
 * The database and disk probes are cheap and bounded (one small transaction
 * and 64 KiB, no fsync) and run on the server's background thread once a
 * second (http.c), and once before the server listens, so /readyz never
 * waits on the disk and a cause that goes away is seen within a second or
 * two.  The state is behind one mutex; readers take a copy.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "server.h"

static const char *const check_names[TL_READY_COUNT_] = {"toolchain", "database", "disk"};

const char *tl_srv_ready_check_name(tl_srv_ready_check c) { return check_names[c]; }

void tl_srv_ready_init(tl_srv_ready *r) {
  memset(r, 0, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
  for (int i = 0; i < TL_READY_COUNT_; i++)
    snprintf(r->why[i], sizeof r->why[i], "not probed yet");
}

void tl_srv_ready_destroy(tl_srv_ready *r) { pthread_mutex_destroy(&r->mu); }

/* Writes TL_SRV_PROBE_BYTES to a new file beside the database and removes
 * it.  True when the file was created, every byte written and the file
 * removed; else why[] says what failed. */
static bool probe_disk(const char *db_path, char *why, size_t cap) {
  static const char zeros[4096];
  char path[TL_CACHE_PATH_MAX + 32];
  snprintf(path, sizeof path, "%s.probe-%d", db_path, (int)getpid());
  int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
  int fd = open(path, flags, 0600);
  if (fd < 0 && errno == EEXIST) {
    /* an earlier probe's file it could not remove: remove it now (which
     * fails while the folder is still read-only), then create a new one */
    if (unlink(path) != 0 && errno != ENOENT) {
      snprintf(why, cap, "cannot remove an earlier probe's file beside the database (%.300s): %s", path,
               strerror(errno));
      return false;
    }
    fd = open(path, flags, 0600);
  }
  if (fd < 0) {
    snprintf(why, cap, "cannot create a file beside the database (%.300s): %s", path, strerror(errno));
    return false;
  }
  bool ok = true;
  for (size_t done = 0; ok && done < TL_SRV_PROBE_BYTES; done += sizeof zeros) {
    ssize_t w = write(fd, zeros, sizeof zeros);
    if (w != (ssize_t)sizeof zeros) {
      snprintf(why, cap, "cannot write %d KiB beside the database (%.300s): %s",
               TL_SRV_PROBE_BYTES / 1024, path, w < 0 ? strerror(errno) : strerror(ENOSPC));
      ok = false;
    }
  }
  close(fd);
  if (unlink(path) != 0 && errno != ENOENT && ok) {
    snprintf(why, cap, "cannot remove a file beside the database (%.300s): %s", path, strerror(errno));
    ok = false;
  }
  return ok;
}

void tl_srv_ready_probe(tl_srv_ready *r, const char *toolchain_error, const char *db_path,
                        tl_cache *c, const tl_error *open_err) {
  bool ok[TL_READY_COUNT_];
  char why[TL_READY_COUNT_][sizeof r->why[0]];
  memset(why, 0, sizeof why);

  ok[TL_READY_TOOLCHAIN] = toolchain_error == NULL;
  if (!ok[TL_READY_TOOLCHAIN])
    snprintf(why[TL_READY_TOOLCHAIN], sizeof why[0], "no toolchain can compile: %.700s",
             toolchain_error);

  char stamp[32];
  tl_srv_format_time(tl_srv_wall_ms(), stamp);
  tl_error err;
  tl_error_clear(&err);
  if (!c) {
    ok[TL_READY_DATABASE] = false;
    snprintf(why[TL_READY_DATABASE], sizeof why[0], "the database cannot be opened: %.700s",
             open_err && open_err->message[0] ? open_err->message : "unknown error");
  } else {
    ok[TL_READY_DATABASE] = tl_cache_note_set(c, "ready_probe", stamp, &err) == TL_OK;
    if (!ok[TL_READY_DATABASE])
      snprintf(why[TL_READY_DATABASE], sizeof why[0], "the database refuses writes: %.700s",
               err.message);
  }
  ok[TL_READY_DISK] = probe_disk(db_path, why[TL_READY_DISK], sizeof why[0]);

  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < TL_READY_COUNT_; i++) {
    /* a change of state (and a failure at the first probe) gets a line in the log */
    bool changed = !r->probed || ok[i] != r->ok[i] || strcmp(why[i], r->why[i]) != 0;
    if (changed && !ok[i])
      fprintf(stderr, "tlserverd: not ready: %s: %s\n", check_names[i], why[i]);
    else if (changed && r->probed)
      fprintf(stderr, "tlserverd: ready again: %s\n", check_names[i]);
    r->ok[i] = ok[i];
    memcpy(r->why[i], why[i], sizeof why[i]);
  }
  r->probed = true;
  pthread_mutex_unlock(&r->mu);
}

bool tl_srv_ready_get(tl_srv_ready *r, bool ok[TL_READY_COUNT_],
                      char why[TL_READY_COUNT_][TL_SRV_READY_WHY_MAX]) {
  bool all = true;
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < TL_READY_COUNT_; i++) {
    ok[i] = r->ok[i] && r->probed;
    if (why)
      memcpy(why[i], r->why[i], TL_SRV_READY_WHY_MAX);
    all = all && ok[i];
  }
  pthread_mutex_unlock(&r->mu);
  return all;
}
