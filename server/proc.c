/*
 * proc.c - compile worker processes: the isolation of docs/DESIGN.md section 5.
 *
 * A compile of an untrusted program runs the whole compiler and NVRTC on
 * it; a bug in either (a crash, a loop, a runaway allocation) must cost one
 * request, not the daemon.  So compiles run in worker processes, each a
 * fresh exec of this program in worker mode (`tlserverd --worker-fd N`),
 * talking to the daemon over a Unix socket pair.  The program executed is
 * the daemon's own file, held open since start and run through
 * /proc/self/fd/N, so that a binary installed over it meanwhile cannot give
 * the daemon workers of another compiler version (whose build keys would
 * differ).  Workers are long-lived: NVRTC is loaded with dlopen, probed and
 * warmed by one tiny compile once per worker, before its first job (and
 * nvJitLink, the PTX back end's assembler, by a second one) (about
 * 0.4 s, see bench/server.md), not once per compile.
 * A worker that dies or overruns its time is killed and reaped, and a new
 * one is started at once.  Why exec rather than fork: the daemon is multi-threaded, and a
 * fork of it would inherit locks held by other threads (NVRTC's, the
 * allocator's) in whatever state they were; an exec'd worker starts clean.
 *
 * Each worker is the leader of a session of its own, and everything it
 * starts stays in that session: clang and ld.lld for AMD targets run in
 * process groups of their own (compiler/amdgpu.c kills a tool's group when
 * the tool overruns), so killing the worker's group alone would leave them
 * running as orphans, outside --workers and --compile-timeout.  When the
 * daemon kills a worker (time-out, cancel, a confused worker, shutdown) or
 * finds one dead, it kills every process of that session and waits until
 * each has died before it answers (a compile's 504 comes after its clang
 * is gone, not while a SIGKILLed clang still frees its memory).
 *
 * Limits in the worker: RLIMIT_AS (--worker-memory), RLIMIT_CORE 0 (no core
 * files from aborted compiles), and per job RLIMIT_CPU set to the CPU time
 * used so far plus the compile timeout, as a backstop to the daemon's
 * wall-clock timeout (which kills with SIGKILL).  The worker asks to be
 * killed when the daemon thread that started it ends (PR_SET_PDEATHSIG),
 * and exits when its socket reaches end of file.
 *
 * The wire between them: a frame is a fixed header (magic, the length of a
 * JSON text, the length of a binary part) followed by the two parts.  A job
 * is JSON {key, target, options, name, defines: [[NAME, VALUE], ...],
 * source} with the program text as the binary part; a result is JSON
 * {code, message, pointer, column, diags: [...], truncated, key, artifact,
 * meta (which holds the toolchain's log), compile_ms} with the compiled
 * binary as the binary part.  The daemon checks what comes back: the key
 * must be the one it asked for and the artifact id the SHA-256 of the bytes
 * (libtlcache checks that again).  A source job (the status page's
 * generated source, tl_srv_job.source) stops after code generation: its
 * result is {code, message, ..., key} with the source text as the binary
 * part, at most TL_SRV_SOURCE_MAX bytes (checked on both sides).
 */
#define _GNU_SOURCE /* POSIX_SPAWN_SETSID */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <jansson.h>
#include "server.h"
#include "../compiler/procs.h"
#include "../compiler/tlcompiler.h"
#include "../proto/tl_hash.h"

extern char **environ;

#define FRAME_MAGIC 0x31574c54u /* "TLW1" */

typedef struct frame_hdr {
  uint32_t magic, pad;
  uint64_t json_len, bin_len;
} frame_hdr;

/* ==== results ==================================================================== */

tl_srv_result *tl_srv_result_new(void) {
  tl_srv_result *r = calloc(1, sizeof *r);
  if (r)
    atomic_init(&r->refs, 1);
  return r;
}

tl_srv_result *tl_srv_result_ref(tl_srv_result *r) {
  atomic_fetch_add(&r->refs, 1);
  return r;
}

void tl_srv_result_unref(tl_srv_result *r) {
  if (!r || atomic_fetch_sub(&r->refs, 1) != 1)
    return;
  for (int i = 0; i < r->ndiags; i++) {
    free(r->diags[i].pointer);
    free(r->diags[i].message);
  }
  free(r->diags);
  free(r->meta);
  free(r->source);
  free(r);
}

tl_srv_result *tl_srv_result_error(tl_status code, const char *fmt, ...) {
  tl_srv_result *r = tl_srv_result_new();
  if (!r)
    return NULL;
  va_list ap;
  va_start(ap, fmt);
  tl_error_setv(&r->err, code, fmt, ap);
  va_end(ap);
  return r;
}

void tl_srv_job_clear(tl_srv_job *j) {
  free(j->manifest);
  free(j->program);
  free(j->name);
  free(j->target);
  free(j->options);
  for (int i = 0; i < j->ndefines; i++) {
    free(j->define_names[i]);
    free(j->define_values[i]);
  }
  free(j->define_names);
  free(j->define_values);
  memset(j, 0, sizeof *j);
}

/* ==== frames ======================================================================= */

/* Writes everything, waiting for the socket until deadline_us (monotonic;
 * 0: no deadline).  -1 on error or timeout (errno ETIMEDOUT). */
static int write_all(int fd, const void *p, size_t n, int64_t deadline_us) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL | (deadline_us ? MSG_DONTWAIT : 0));
    if (w > 0) {
      c += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && deadline_us) {
      int64_t left = deadline_us - tl_srv_now_us();
      if (left <= 0) {
        errno = ETIMEDOUT;
        return -1;
      }
      struct pollfd pfd = {fd, POLLOUT, 0};
      poll(&pfd, 1, (int)(left / 1000) + 1);
      continue;
    }
    return -1;
  }
  return 0;
}

/* Reads exactly n bytes.  Waits at most until deadline_us (0: forever) and
 * gives up when cancel_fd (-1: none) becomes readable.  Returns 0, or -1
 * with errno: 0 for end of file, ETIMEDOUT, ECANCELED, or the read error. */
static int read_all(int fd, void *p, size_t n, int64_t deadline_us, int cancel_fd) {
  char *c = p;
  while (n > 0) {
    struct pollfd pfd[2] = {{fd, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
    int timeout = -1;
    if (deadline_us) {
      int64_t left = deadline_us - tl_srv_now_us();
      if (left <= 0) {
        errno = ETIMEDOUT;
        return -1;
      }
      timeout = (int)(left / 1000) + 1;
    }
    int pr = poll(pfd, cancel_fd >= 0 ? 2 : 1, timeout);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr < 0)
      return -1;
    if (pr == 0)
      continue; /* the deadline is checked above */
    if (cancel_fd >= 0 && (pfd[1].revents & POLLIN)) {
      errno = ECANCELED;
      return -1;
    }
    ssize_t r = recv(fd, c, n, MSG_DONTWAIT);
    if (r > 0) {
      c += r;
      n -= (size_t)r;
    } else if (r == 0) {
      errno = 0;
      return -1;
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      return -1;
    }
  }
  return 0;
}

static int send_frame(int fd, const char *json, size_t json_len, const void *bin, size_t bin_len,
                      int64_t deadline_us) {
  frame_hdr h = {FRAME_MAGIC, 0, json_len, bin_len};
  if (write_all(fd, &h, sizeof h, deadline_us) < 0 ||
      write_all(fd, json, json_len, deadline_us) < 0 ||
      (bin_len && write_all(fd, bin, bin_len, deadline_us) < 0))
    return -1;
  return 0;
}

/* Reads one frame: *json (NUL-terminated) and *bin, malloc'd.  -1 with errno
 * as read_all, or EPROTO for a bad header, ENOMEM. */
static int recv_frame(int fd, char **json, size_t *json_len, void **bin, size_t *bin_len,
                      int64_t deadline_us, int cancel_fd) {
  *json = NULL;
  *bin = NULL;
  frame_hdr h;
  if (read_all(fd, &h, sizeof h, deadline_us, cancel_fd) < 0)
    return -1;
  if (h.magic != FRAME_MAGIC || h.json_len > TL_SRV_FRAME_MAX || h.bin_len > TL_SRV_FRAME_MAX) {
    errno = EPROTO;
    return -1;
  }
  char *j = malloc(h.json_len + 1);
  void *b = malloc(h.bin_len ? h.bin_len : 1);
  if (!j || !b) {
    free(j);
    free(b);
    errno = ENOMEM;
    return -1;
  }
  if (read_all(fd, j, h.json_len, deadline_us, cancel_fd) < 0 ||
      read_all(fd, b, h.bin_len, deadline_us, cancel_fd) < 0) {
    int e = errno;
    free(j);
    free(b);
    errno = e;
    return -1;
  }
  j[h.json_len] = 0;
  *json = j;
  *json_len = h.json_len;
  *bin = b;
  *bin_len = h.bin_len;
  return 0;
}

/* ==== the worker's side ============================================================== */

static void set_limit(int res, rlim_t cur, rlim_t max) {
  struct rlimit rl = {cur, max};
  setrlimit(res, &rl);
}

/* Sets RLIMIT_CPU to what this process has used plus `seconds`. */
static void cpu_limit_from_now(double seconds) {
  struct rusage ru;
  if (seconds <= 0 || getrusage(RUSAGE_SELF, &ru) != 0)
    return;
  double used = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec + 1;
  struct rlimit cur;
  if (getrlimit(RLIMIT_CPU, &cur) != 0)
    return;
  rlim_t want = (rlim_t)ceil(used + seconds);
  if (cur.rlim_max != RLIM_INFINITY && want > cur.rlim_max)
    want = cur.rlim_max;
  set_limit(RLIMIT_CPU, want, cur.rlim_max);
}

/* The test hooks: a worker compiling the program named in TL_TEST_CRASH_ON
 * aborts, one compiling TL_TEST_HANG_ON sleeps until it is killed, and one
 * compiling TL_TEST_GROW_ON asks malloc for twice its --worker-memory (not
 * touched): under the limit that fails, and the job fails with TL_NOMEM;
 * when it does not fail (no limit), the job goes on as any other. */
static tl_status test_hooks(const char *name, const tl_srv_proc_opts *o, tl_error *err) {
  const char *crash = getenv("TL_TEST_CRASH_ON");
  const char *hang = getenv("TL_TEST_HANG_ON");
  const char *grow = getenv("TL_TEST_GROW_ON");
  if (crash && name && strcmp(crash, name) == 0)
    abort();
  if (hang && name && strcmp(hang, name) == 0)
    for (;;)
      pause();
  if (grow && name && strcmp(grow, name) == 0 && o->memory > 0 && (uint64_t)o->memory <= SIZE_MAX / 2) {
    void *p = malloc((size_t)o->memory * 2);
    if (!p)
      return tl_error_set(err, TL_NOMEM, "out of memory: %lld bytes are over this worker's limit of %lld",
                          (long long)o->memory * 2, (long long)o->memory);
    free(p);
  }
  return TL_OK;
}

static json_t *error_fields(json_t *o, const tl_error *e) {
  json_object_set_new(o, "code", json_integer(e->code));
  json_object_set_new(o, "message", json_string(e->message));
  json_object_set_new(o, "pointer", json_string(e->pointer));
  json_object_set_new(o, "column", json_integer(e->column));
  return o;
}

/* Compiles one job and sends the result.  Returns -1 when the socket failed. */
static int worker_job(int fd, const char *job_json, const char *program, size_t program_len,
                      const tl_srv_proc_opts *o) {
  json_error_t jerr;
  json_t *job = json_loads(job_json, 0, &jerr);
  json_t *res = json_object();
  tl_build *build = NULL;
  tl_error err;
  tl_error_clear(&err);
  tl_diags diags = {0};
  tl_define *defs = NULL;
  if (!res)
    return -1;
  const char *key = job ? json_string_value(json_object_get(job, "key")) : NULL;
  const char *target = job ? json_string_value(json_object_get(job, "target")) : NULL;
  const char *options = job ? json_string_value(json_object_get(job, "options")) : NULL;
  const char *name = job ? json_string_value(json_object_get(job, "name")) : NULL;
  bool source = job && json_is_true(json_object_get(job, "source"));
  json_t *jdefs = job ? json_object_get(job, "defines") : NULL;
  if (!key || !target || !json_is_array(jdefs)) {
    tl_error_set(&err, TL_INTERNAL, "the worker got a malformed job");
    goto done;
  }
  size_t nd = json_array_size(jdefs);
  defs = calloc(nd ? nd : 1, sizeof *defs);
  if (!defs) {
    tl_error_set(&err, TL_NOMEM, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < nd; i++) {
    json_t *pair = json_array_get(jdefs, i);
    defs[i].name = json_string_value(json_array_get(pair, 0));
    defs[i].value = json_string_value(json_array_get(pair, 1));
    if (!defs[i].name || !defs[i].value) {
      tl_error_set(&err, TL_INTERNAL, "the worker got a malformed job");
      goto done;
    }
  }
  if (o->test_hooks && test_hooks(name, o, &err) != TL_OK)
    goto done;
  cpu_limit_from_now(o->cpu_seconds);

  diags.arena = tl_arena_new();
  tl_compile_request req = {
      .program = program,
      .program_len = program_len,
      .defines = defs,
      .ndefines = (int)nd,
      .target = target,
      .options_json = options,
      .source_only = source,
  };
  tl_status st = tl_compile(&req, &build, &diags, &err);
  if (st == TL_OK && source && (!build->key || strcmp(build->key, key) != 0))
    tl_error_set(&err, TL_UNSUPPORTED,
                 "generating it again gave another build key (%.12s, not %.12s): the toolchain "
                 "changed since the build was made",
                 build->key ? build->key : "none", key);
  else if (st == TL_OK && source && build->source && strlen(build->source) > TL_SRV_SOURCE_MAX)
    tl_error_set(&err, TL_TOO_LARGE, "the generated source is %zu bytes; the status page shows at most %zu",
                 strlen(build->source), TL_SRV_SOURCE_MAX);
  else if (st == TL_OK && strcmp(build->key, key) != 0)
    tl_error_set(&err, TL_INTERNAL,
                 "the compiler gave build key %.16s... for a job whose key is %.16s...", build->key,
                 key);
  else if (st != TL_OK && err.code == TL_OK)
    tl_error_set(&err, st, "%s", tl_strerror(st));
done:
  error_fields(res, &err);
  json_t *jd = json_array();
  for (int i = 0; i < diags.n && i < TL_SRV_MAX_DIAGS; i++) {
    const tl_diag *d = &diags.items[i];
    json_t *x = json_object();
    json_object_set_new(x, "pointer", d->pointer ? json_string(d->pointer) : json_null());
    json_object_set_new(x, "line", json_integer(d->line));
    json_object_set_new(x, "column", json_integer(d->column));
    json_object_set_new(x, "message", json_string(d->message ? d->message : ""));
    json_array_append_new(jd, x);
  }
  json_object_set_new(res, "diags", jd);
  json_object_set_new(res, "truncated", json_boolean(diags.truncated || diags.n > TL_SRV_MAX_DIAGS));
  const void *bin = NULL;
  size_t bin_len = 0;
  if (err.code == TL_OK && build && source) {
    json_object_set_new(res, "key", json_string(build->key));
    bin = build->source ? build->source : "";
    bin_len = strlen(bin);
  } else if (err.code == TL_OK && build) {
    json_object_set_new(res, "key", json_string(build->key));
    json_object_set_new(res, "artifact", json_string(build->artifact));
    json_object_set_new(res, "meta", json_string(build->meta ? build->meta : "{}"));
    json_object_set_new(res, "compile_ms", json_real(build->compile_ms));
    bin = build->binary;
    bin_len = build->binary_size;
  }
  char *text = json_dumps(res, JSON_COMPACT);
  int rc = -1;
  if (text)
    rc = send_frame(fd, text, strlen(text), bin, bin_len, 0);
  free(text);
  json_decref(res);
  json_decref(job);
  free(defs);
  tl_build_free(build);
  tl_arena_free(diags.arena);
  return rc;
}

tl_status tl_srv_worker_warm(const char *const *targets, char *target, size_t target_size, tl_error *err) {
  static const char kernel[] =
      "{\"tlir\": 1, \"name\": \"warm\", \"params\": [{\"name\": \"a\", \"kind\": \"tensor\", "
      "\"dtype\": \"float32\", \"shape\": [128]}], \"kernel\": {\"grid\": [1], \"threads\": 128, "
      "\"block_vars\": [\"bx\"], \"body\": [{\"op\": \"parallel\", \"vars\": [\"i\"], "
      "\"extents\": [128], \"body\": [\"a[i] = a[i] + 1.0\"]}]}}";
  if (target_size)
    target[0] = 0;
  /* NVRTC (the CUDA back end) for the first NVIDIA target, then nvJitLink (the PTX back end,
   * compiler/emit_ptx.c) for the first target that back end takes, where it is here */
  tl_status st = TL_OK;
  bool cuda_done = false;
  for (size_t i = 0; targets && targets[i]; i++) {
    if (strncmp(targets[i], "sm_", 3) != 0)
      continue;
    if (!cuda_done)
      snprintf(target, target_size, "%s", targets[i]);
    tl_compile_request req = {.program = kernel, .program_len = sizeof kernel - 1, .target = targets[i],
                              .backend = cuda_done ? "ptx" : "cuda"};
    tl_diags diags = {.arena = tl_arena_new()};
    tl_build *b = NULL;
    tl_error e;
    tl_status r = tl_compile(&req, &b, &diags, cuda_done ? &e : err);
    tl_build_free(b);
    tl_arena_free(diags.arena);
    if (!cuda_done) {
      st = r;
      cuda_done = true;
    } else if (r == TL_OK || r != TL_UNSUPPORTED) {
      break; /* warmed, or the PTX back end cannot run here (no nvJitLink): nothing to warm */
    }
  }
  return st;
}

int tl_srv_worker_main(int fd, const tl_srv_proc_opts *o) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  set_limit(RLIMIT_CORE, 0, 0);
#if defined(__SANITIZE_ADDRESS__)
  /* AddressSanitizer reserves terabytes of address space for its shadow
   * memory: no address-space limit in sanitizer builds. */
#else
  if (o->memory > 0)
    set_limit(RLIMIT_AS, (rlim_t)o->memory, (rlim_t)o->memory);
#endif
  signal(SIGPIPE, SIG_IGN);
  /* Load and probe the toolchains and warm NVRTC now, before the first job. */
  const char *toolchain = NULL;
  tl_error err;
  char warmed[64];
  if (tl_srv_worker_warm(tl_compiler_targets(&toolchain, &err), warmed, sizeof warmed, &err) != TL_OK)
    fprintf(stderr, "tlserverd: worker %d: warming NVRTC with a compile for %s failed: %s\n", (int)getpid(), warmed,
            err.message);
  /* test hook: a slow start (TL_TEST_SLOW_START=SECONDS) */
  const char *slow = o->test_hooks ? getenv("TL_TEST_SLOW_START") : NULL;
  if (slow)
    sleep((unsigned)atoi(slow));
  /* ready: the daemon starts the first job's time-out from here */
  if (write_all(fd, "R", 1, 0) < 0)
    return 1;
  for (;;) {
    char *json;
    void *bin;
    size_t jn, bn;
    if (recv_frame(fd, &json, &jn, &bin, &bn, 0, -1) < 0)
      return errno == 0 ? 0 : 1; /* end of file: the daemon is done with us */
    int rc = worker_job(fd, json, bin, bn, o);
    free(json);
    free(bin);
    if (rc < 0)
      return 1;
  }
}

/* ==== the daemon's side ================================================================ */

tl_status tl_srv_proc_spawn(const tl_srv_proc_opts *o, tl_srv_proc *p, tl_error *err) {
  p->pid = 0;
  p->fd = -1;
  p->jobs = 0;
  p->ready = false;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return tl_error_set(err, TL_IO, "socketpair: %s", strerror(errno));
  int child = sv[1];
  if (child == 3) { /* dup2(3, 3) would keep close-on-exec */
    child = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    close(sv[1]);
    if (child < 0) {
      close(sv[0]);
      return tl_error_set(err, TL_IO, "fcntl: %s", strerror(errno));
    }
  }
  char mem[32];
  char cpu[32];
  snprintf(mem, sizeof mem, "%lld", (long long)o->memory);
  snprintf(cpu, sizeof cpu, "%.3f", o->cpu_seconds);
  char *argv[] = {"tlserverd-worker", "--worker-fd", "3", "--worker-memory", mem,
                  "--compile-timeout", cpu, o->test_hooks ? "--test-hooks" : NULL, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  posix_spawn_file_actions_adddup2(&fa, child, 3);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  sigset_t none, defs;
  sigemptyset(&none);
  sigemptyset(&defs);
  sigaddset(&defs, SIGPIPE);
  sigaddset(&defs, SIGTERM);
  sigaddset(&defs, SIGINT);
  sigaddset(&defs, SIGHUP);
  sigaddset(&defs, SIGCHLD);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &defs);
  /* Own session (and so process group): a terminal's Ctrl-C goes to the
   * daemon, which then lets running compiles finish; and every process the
   * worker starts can be found and killed by its session id. */
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                    POSIX_SPAWN_SETSID);
  pid_t pid;
  int rc = posix_spawn(&pid, o->exe, &fa, &at, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(child);
  if (rc != 0) {
    close(sv[0]);
    return tl_error_set(err, TL_IO, "cannot start a compile worker (%s): %s", o->exe,
                        strerror(rc));
  }
  p->pid = pid;
  p->fd = sv[0];
  return TL_OK;
}

void tl_srv_proc_kill_session(int sid) {
  if (sid <= 0)
    return;
  /* Every member, in the worker's group or the tools' own groups (a session
   * id stays allocated while any member lives, so it names only this
   * worker's processes), waited for until it has died, not only signalled
   * (compiler/procs.h): until then a killed clang still runs, outside
   * --workers. */
  int alive = tl_procs_kill_wait(sid, TL_PROCS_SESSION, (long)TL_SRV_KILL_WAIT_S * 1000);
  if (alive > 0)
    fprintf(stderr, "tlserverd: %d process(es) of worker session %d still alive %d s after SIGKILL\n",
            alive, sid, TL_SRV_KILL_WAIT_S);
}

/* Reaps the worker after its socket failed or it was killed; says how it ended. */
static void reap(tl_srv_proc *p, char *how, size_t n) {
  int status = 0;
  pid_t r;
  do
    r = waitpid(p->pid, &status, 0);
  while (r < 0 && errno == EINTR);
  if (r == p->pid && WIFSIGNALED(status))
    snprintf(how, n, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else if (r == p->pid && WIFEXITED(status))
    snprintf(how, n, "exited with status %d", WEXITSTATUS(status));
  else
    snprintf(how, n, "ended (waitpid: %s)", strerror(errno));
  close(p->fd);
  p->fd = -1;
  p->pid = 0;
}

void tl_srv_proc_kill(tl_srv_proc *p) {
  if (p->pid <= 0)
    return;
  tl_srv_proc_kill_session(p->pid);
  char how[128];
  reap(p, how, sizeof how);
}

static char *dup_json_str(json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? strdup(s) : NULL;
}

/* Builds a result from a worker's answer. */
static tl_srv_result *parse_result(const char *text, const void *bin, size_t bin_len,
                                   const tl_srv_job *job) {
  json_error_t jerr;
  json_t *o = json_loads(text, 0, &jerr);
  if (!o)
    return tl_srv_result_error(TL_INTERNAL, "the compile worker sent a malformed answer");
  tl_srv_result *r = tl_srv_result_new();
  if (!r) {
    json_decref(o);
    return NULL;
  }
  json_int_t code = json_integer_value(json_object_get(o, "code"));
  if (code < 0 || code >= TL_STATUS_COUNT_)
    code = TL_INTERNAL;
  r->err.code = (tl_status)code;
  const char *msg = json_string_value(json_object_get(o, "message"));
  const char *ptr = json_string_value(json_object_get(o, "pointer"));
  snprintf(r->err.message, sizeof r->err.message, "%s", msg ? msg : "");
  snprintf(r->err.pointer, sizeof r->err.pointer, "%s", ptr ? ptr : "");
  r->err.column = (int)json_integer_value(json_object_get(o, "column"));
  json_t *jd = json_object_get(o, "diags");
  size_t nd = json_array_size(jd);
  if (nd > TL_SRV_MAX_DIAGS)
    nd = TL_SRV_MAX_DIAGS;
  if (nd) {
    r->diags = calloc(nd, sizeof *r->diags);
    if (!r->diags) {
      tl_srv_result_unref(r);
      json_decref(o);
      return NULL;
    }
    for (size_t i = 0; i < nd; i++) {
      json_t *d = json_array_get(jd, i);
      r->diags[i].pointer = dup_json_str(d, "pointer");
      r->diags[i].message = dup_json_str(d, "message");
      r->diags[i].line = (int)json_integer_value(json_object_get(d, "line"));
      r->diags[i].column = (int)json_integer_value(json_object_get(d, "column"));
      r->ndiags++;
    }
  }
  r->diags_truncated = json_is_true(json_object_get(o, "truncated"));
  memcpy(r->key, job->key, 65);
  if (r->err.code == TL_OK && job->source) {
    const char *key = json_string_value(json_object_get(o, "key"));
    if (!key || strcmp(key, job->key) != 0 || bin_len > TL_SRV_SOURCE_MAX || memchr(bin, 0, bin_len)) {
      tl_error_set(&r->err, TL_INTERNAL, "the compile worker's answer failed its checks");
    } else if (!(r->source = malloc(bin_len + 1))) {
      tl_error_set(&r->err, TL_NOMEM, "out of memory");
    } else {
      if (bin_len)
        memcpy(r->source, bin, bin_len);
      r->source[bin_len] = 0;
    }
  } else if (r->err.code == TL_OK) {
    const char *key = json_string_value(json_object_get(o, "key"));
    const char *art = json_string_value(json_object_get(o, "artifact"));
    char hex[65];
    if (!key || strcmp(key, job->key) != 0 || !art || !tl_hex_is_sha256(art) || bin_len == 0 ||
        tl_sha256_hex(bin, bin_len, hex) != TL_OK || strcmp(hex, art) != 0) {
      tl_error_set(&r->err, TL_INTERNAL, "the compile worker's answer failed its checks");
    } else {
      memcpy(r->artifact, art, 65);
      r->size = (int64_t)bin_len;
      r->meta = dup_json_str(o, "meta");
      r->compile_ms = json_real_value(json_object_get(o, "compile_ms"));
      if (!r->meta)
        tl_error_set(&r->err, TL_INTERNAL, "the compile worker sent no metadata");
    }
  }
  json_decref(o);
  return r;
}

static char *job_json(const tl_srv_job *job) {
  json_t *o = json_object();
  json_t *d = json_array();
  if (!o || !d) {
    json_decref(o);
    json_decref(d);
    return NULL;
  }
  json_object_set_new(o, "key", json_string(job->key));
  json_object_set_new(o, "target", json_string(job->target));
  json_object_set_new(o, "options", job->options ? json_string(job->options) : json_null());
  json_object_set_new(o, "name", job->name ? json_string(job->name) : json_null());
  if (job->source)
    json_object_set_new(o, "source", json_true());
  for (int i = 0; i < job->ndefines; i++)
    json_array_append_new(d, json_pack("[ss]", job->define_names[i], job->define_values[i]));
  json_object_set_new(o, "defines", d);
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s;
}

tl_status tl_srv_proc_run(tl_srv_proc *p, const tl_srv_job *job, double timeout_s, int cancel_fd,
                          tl_srv_compile_outcome *outcome, tl_srv_result **out, void **binary,
                          size_t *binary_size, tl_error *err) {
  *out = NULL;
  *binary = NULL;
  *binary_size = 0;
  *outcome = TL_COMPILE_CRASH;
  char *jj = job_json(job);
  if (!jj)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  char *rjson = NULL;
  void *rbin = NULL;
  size_t rjn = 0, rbn = 0;
  int rc = 0, e = 0;
  bool starting = !p->ready;
  if (starting) {
    char c;
    rc = read_all(p->fd, &c, 1, tl_srv_now_us() + (int64_t)TL_SRV_WORKER_START_S * 1000000,
                  cancel_fd);
    e = errno;
    if (rc == 0 && c != 'R') {
      rc = -1;
      e = EPROTO;
    }
    p->ready = rc == 0;
  }
  int64_t deadline = tl_srv_now_us() + (int64_t)(timeout_s * 1e6);
  if (rc == 0) {
    starting = false;
    rc = send_frame(p->fd, jj, strlen(jj), job->program, job->program_len, deadline);
    e = errno;
  }
  free(jj);
  if (rc == 0) {
    rc = recv_frame(p->fd, &rjson, &rjn, &rbin, &rbn, deadline, cancel_fd);
    e = errno;
  }
  p->jobs++;
  if (rc < 0) {
    if (e == ENOMEM)
      return tl_error_set(err, TL_NOMEM, "out of memory");
    /* timed out, cancelled, dead, or alive but confused (EPROTO): kill it
     * and everything it started */
    tl_srv_proc_kill_session(p->pid);
    char how[128];
    reap(p, how, sizeof how);
    if (starting && e != ECANCELED) {
      *outcome = TL_COMPILE_CRASH;
      *out = tl_srv_result_error(TL_INTERNAL,
                                 "the compile worker for %s did not start within %d s (%s); the "
                                 "server is fine, the compile was not done",
                                 job->target, TL_SRV_WORKER_START_S,
                                 e == ETIMEDOUT ? "timed out" : how);
    } else if (e == ETIMEDOUT) {
      *outcome = TL_COMPILE_TIMEOUT;
      *out = tl_srv_result_error(TL_TIMEOUT,
                                 "the %s for %s ran longer than the server's limit of %g s "
                                 "and was stopped",
                                 job->source ? "source generation" : "compile", job->target, timeout_s);
    } else if (e == ECANCELED) {
      *outcome = TL_COMPILE_ERROR;
      *out = tl_srv_result_error(TL_BUSY, "the compile was cancelled: the server is shutting down");
    } else {
      *outcome = TL_COMPILE_CRASH;
      *out = tl_srv_result_error(TL_INTERNAL,
                                 "the compile worker for %s died during the %s (%s); the "
                                 "server is fine, the %s was not done",
                                 job->target, job->source ? "source generation" : "compile", how,
                                 job->source ? "source generation" : "compile");
    }
    if (!*out)
      return tl_error_set(err, TL_NOMEM, "out of memory");
    memcpy((*out)->key, job->key, 65);
    return TL_OK;
  }
  tl_srv_result *r = parse_result(rjson, rbin, rbn, job);
  free(rjson);
  if (!r) {
    free(rbin);
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  *outcome = r->err.code == TL_OK ? TL_COMPILE_OK : TL_COMPILE_ERROR;
  if (r->err.code == TL_OK) {
    *binary = rbin;
    *binary_size = rbn;
  } else {
    free(rbin);
  }
  *out = r;
  return TL_OK;
}
