/*
 * procs.h - ending a tool's processes for good: every live process of a
 * process group (the AMD toolchain's clang and what it started, amdgpu.c)
 * or of a session (a compile worker and its tools, server/proc.c) is sent
 * SIGKILL and waited for until it has died, not only been signalled.
 *
 * Why waiting matters: a SIGKILLed clang of a few hundred MiB takes tens
 * of milliseconds to die (its memory is freed first), more on a loaded
 * machine, and until then it still runs; the parent reaps only its own
 * child (the group's leader), and the others (clang -cc1 under the clang
 * driver) are re-parented elsewhere.  Members are found in /proc and
 * waited for through a pidfd each (poll: readable once the process has
 * exited, a zombie counting as dead); a zombie member keeps the group's or
 * session's id allocated, so the id names only these processes until the
 * caller reaps its child.
 */
#ifndef TL_PROCS_H
#define TL_PROCS_H

#include <stddef.h>
#include <sys/types.h>
#include "../proto/tl_error.h"

#define TL_PROCS_KILL_WAIT_MS 10000 /* after a tool's time limit: the most waited for its killed processes to die */

typedef enum tl_procs_by { TL_PROCS_GROUP, TL_PROCS_SESSION } tl_procs_by;

/* Sends SIGKILL to every live process whose process group (or session) is
 * id, and waits until each has died, looking again until none is alive (a
 * member may start a child meanwhile), at most wait_ms.  Returns how many
 * were still alive then (0: all died), or -1 when /proc cannot be read. */
int tl_procs_kill_wait(int id, tl_procs_by by, long wait_ms);

/* ---- running a tool ----
 * A tool runs with stdin from /dev/null, stdout and stderr to one file, in
 * a process group of its own, with default signals, an empty signal mask
 * and the environment LC_ALL=C (plus TMPDIR=tmpdir where given), until a
 * deadline on tl_proc_now_ms's clock; past it, its group is killed and
 * waited for (tl_procs_kill_wait, at most TL_PROCS_KILL_WAIT_MS) and the
 * answer is TL_TIMEOUT. */

/* Milliseconds on the monotonic clock. */
double tl_proc_now_ms(void);
/* path is an executable regular file. */
int tl_proc_is_exec(const char *path);
/* Finds an executable called name in $PATH into out (cap bytes); 0 when none. */
int tl_proc_find_on_path(const char *name, char *out, size_t cap);
/* Reads a file of at most limit bytes (malloc'd, a NUL after it); a longer
 * one is cut at limit when cut is set, else TL_TOO_LARGE. */
tl_status tl_proc_read_file(const char *path, size_t limit, int cut, unsigned char **data, size_t *size,
                            tl_error *err);
/* Writes n bytes to a new file path (mode 0600). */
tl_status tl_proc_write_file(const char *path, const void *data, size_t n, tl_error *err);
/* A private directory, $TMPDIR (or /tmp) / prefix-XXXXXX (mkdtemp), into dir. */
tl_status tl_proc_tmpdir(char *dir, size_t cap, const char *prefix, tl_error *err);
/* Removes dir and the plain files in it. */
void tl_proc_rmdir(const char *dir);
/* Starts argv (argv[0] a path), output to out_fd (or /dev/null when out_fd < 0). */
tl_status tl_proc_spawn(char *const argv[], int out_fd, const char *tmpdir, pid_t *pid, tl_error *err);
/* Waits for pid until the deadline (then kills its group, as above); *status is waitpid's. */
tl_status tl_proc_await(pid_t pid, double deadline, const char *what, int *status, tl_error *err);
/* Runs argv (argv[0] a path) to completion or the deadline, its output to
 * out_fd (or /dev/null when out_fd < 0); TL_OK with *exit_code its exit
 * status (128 + N for a signal N). */
tl_status tl_proc_run(char *const argv[], int out_fd, const char *tmpdir, double deadline, int *exit_code,
                      tl_error *err);
/* tl_proc_run, and what it printed (malloc'd, cut at limit bytes) in *text. */
tl_status tl_proc_run_capture(char *const argv[], double deadline, size_t limit, int *exit_code, char **text,
                              tl_error *err);

#endif
