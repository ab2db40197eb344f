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

typedef enum tl_procs_by { TL_PROCS_GROUP, TL_PROCS_SESSION } tl_procs_by;

/* Sends SIGKILL to every live process whose process group (or session) is
 * id, and waits until each has died, looking again until none is alive (a
 * member may start a child meanwhile), at most wait_ms.  Returns how many
 * were still alive then (0: all died), or -1 when /proc cannot be read. */
int tl_procs_kill_wait(int id, tl_procs_by by, long wait_ms);

#endif
