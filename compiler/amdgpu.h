/*
 * amdgpu.h - the AMD toolchain driver: HIP C source to a raw AMDGPU code
 * object (HSACO: an ELF shared object, code object version 5) for one
 * gfx target, the counterpart of nvrtc.h.
 *
 * Two toolchains, the first one found is used:
 *   1. hiprtc from an installed ROCm, opened with dlopen (never linked).
 *      If the environment variable TL_HIPRTC is set (even to ""), that path
 *      alone is tried (a library file, or a directory holding
 *      libhiprtc.so.7/6/5); set it to a path that does not exist to act as
 *      if ROCm were missing.  Otherwise libhiprtc.so.7, .6 and .5 through
 *      the dynamic loader's search, then the same names in /opt/rocm/lib/.
 *      Options given: --offload-arch=TARGET -O3 -mcode-object-version=5.
 *      hiprtc's output is used as a code object; an offload bundle
 *      ("__CLANG_OFFLOAD_BUNDLE__") is unpacked to its entry for TARGET.
 *      (Written against ROCm 6's hiprtc.h; no ROCm exists where this was
 *      written, so only the "absent" and "wrong library" paths are tested.)
 *   2. clang 19 or newer (Debian's clang-19 and lld-19), run as a
 *      subprocess with posix_spawn.  If TL_CLANG is set (even to ""), that
 *      path alone is tried (set it to a path that does not exist to act as
 *      if clang were missing); otherwise clang-22 .. clang-19 on PATH, then
 *      /usr/lib/llvm-22 .. llvm-19/bin/clang.  Its version is read from
 *      `clang --version` and must be 19 or newer.  ld.lld is looked for
 *      beside it (ld.lld-N, ld.lld), then as ld.lld-N on PATH, then in
 *      /usr/lib/llvm-N/bin.  A compile is two steps in a private temporary
 *      directory (mkdtemp under $TMPDIR or /tmp, removed afterwards):
 *        clang -x hip --cuda-device-only -nogpulib -nogpuinc
 *              --offload-arch=TARGET -O3 -mcode-object-version=5
 *              -fhip-emit-relocatable -c kernel.hip -o kernel.o
 *        ld.lld -shared kernel.o -o kernel.hsaco
 *      (-fhip-emit-relocatable stops the clang driver from linking itself,
 *      so that the link is ours.)  Each child gets a minimal environment
 *      (LC_ALL=C, TMPDIR=the private directory), stdin from /dev/null, its
 *      own process group, and a time limit (default TL_AMDGPU_TIMEOUT_MS;
 *      when it runs out the group is killed and every member, clang -cc1
 *      under the driver too, is waited for until it has died, at most
 *      TL_PROCS_KILL_WAIT_MS: procs.h).  Both children's output is
 *      the log.
 *
 * Targets: the AMD rows of the target table (target.h: gfx90a, gfx942,
 * gfx950, CDNA 2, 3, 4, and gfx1100, gfx1201, RDNA 3, 4), those the
 * toolchain accepts.  Each is checked once per
 * handle, lazily, by compiling an empty source for it (clang:
 * -fsyntax-only, the five at once; about 60 ms).  Debian's clang 19.1.7
 * accepts all but gfx950, which LLVM added in clang 20; for each known
 * target a toolchain refuses, tl_amdgpu_refusal says why.
 *
 * Threads: a handle may be used from several threads at once.
 */
#ifndef TL_AMDGPU_H
#define TL_AMDGPU_H

#include <stddef.h>
#include <stdint.h>
#include "../proto/tl_error.h"
#include "target.h"

/* Limits. */
#define TL_AMDGPU_MAX_SOURCE  (64u << 20) /* bytes of source */
#define TL_AMDGPU_MAX_OUTPUT  (256u << 20)/* bytes of code object */
#define TL_AMDGPU_MAX_LOG     (1u << 20)  /* bytes of log kept (the rest is cut) */
#define TL_AMDGPU_TARGET_MAX  16          /* bytes of a target name, with NUL */
#define TL_AMDGPU_TIMEOUT_MS  120000      /* default time limit of one compile */

typedef struct tl_amdgpu tl_amdgpu;

/* Which toolchain a handle drives. */
typedef enum tl_amdgpu_kind { TL_AMDGPU_HIPRTC = 1, TL_AMDGPU_CLANG = 2 } tl_amdgpu_kind;

/* What one compile gives back.  Zero it (or leave it as tl_amdgpu_compile
 * left it) and release it with tl_amdgpu_result_free. */
typedef struct tl_amdgpu_result {
  unsigned char *code; /* the code object (ELF), malloc'd */
  size_t code_size;
  char *log;           /* the toolchain's messages, NUL-terminated, malloc'd; "" if none */
  size_t log_len;      /* strlen(log) */
  double wall_ms;      /* wall-clock time of the compile (and link) */
  char target[TL_AMDGPU_TARGET_MAX];
} tl_amdgpu_result;

/* Opens a toolchain (hiprtc, else clang; see above).  On success *out is a
 * handle to close with tl_amdgpu_close.  None found is TL_NO_TOOLCHAIN
 * whose message lists every place tried and why each failed; TL_NOMEM.
 * *out is NULL on failure. */
tl_status tl_amdgpu_open(tl_amdgpu **out, tl_error *err);

/* Closes a handle (no compile may be running on it).  Accepts NULL. */
void tl_amdgpu_close(tl_amdgpu *h);

tl_amdgpu_kind tl_amdgpu_toolchain_kind(const tl_amdgpu *h);

/* What the handle drives, e.g. "clang 19.1.7 (/usr/bin/clang-19)" or
 * "hiprtc 6.2 (libhiprtc.so.6)".  Owned by the handle. */
const char *tl_amdgpu_description(const tl_amdgpu *h);

/* The toolchain's version, e.g. 19 and 1 (clang) or 6 and 2 (hiprtc). */
void tl_amdgpu_version(const tl_amdgpu *h, int *major, int *minor);

/* The time limit of each later compile on h, in milliseconds (at least 1;
 * clang only: hiprtc runs in-process and cannot be stopped). */
void tl_amdgpu_set_timeout(tl_amdgpu *h, long ms);

/* The AMD targets of target.h's table that this toolchain accepts, in the
 * table's order.  *list and its strings are owned by the handle.  Runs the
 * probe if it has not run yet.  TL_NOMEM, or TL_TOOLCHAIN when the
 * toolchain could not be run at all. */
tl_status tl_amdgpu_targets(tl_amdgpu *h, const char *const **list, size_t *count, tl_error *err);

/* 1 if target is one of tl_amdgpu_targets, else 0. */
int tl_amdgpu_accepts(tl_amdgpu *h, const char *target);

/* Why the toolchain does not accept target, an AMD target of the table,
 * e.g. "clang 19.1.7 (/usr/bin/clang-19) does not know gfx950 (LLVM added
 * it in clang 20): it needs clang 20 or newer, or ROCm's hiprtc"; NULL when
 * it accepts target, for a target not in the table, and for NULL
 * arguments.  Owned by the handle.  Runs the probe if it has not run yet. */
const char *tl_amdgpu_refusal(tl_amdgpu *h, const char *target);

/* Compiles src (NUL-terminated HIP C that includes nothing) for target.
 * On success fills *out (free with tl_amdgpu_result_free).
 * Failures:
 *   TL_INVALID_ARG  NULL arguments; a target name this project does not
 *                   know (the message lists those it does);
 *   TL_UNSUPPORTED  a known target this toolchain does not accept (the
 *                   message is tl_amdgpu_refusal's);
 *   TL_TOO_LARGE    source over TL_AMDGPU_MAX_SOURCE, output over
 *                   TL_AMDGPU_MAX_OUTPUT;
 *   TL_TOOLCHAIN    the compile or the link failed: the message carries the
 *                   start of the log (its error lines first) and out->log
 *                   all of it; also a toolchain that could not be run;
 *   TL_TIMEOUT      the time limit ran out (the children were killed);
 *   TL_IO           the temporary directory or its files failed;
 *   TL_NOMEM.
 * On every failure out holds at most the log: call tl_amdgpu_result_free in
 * every case (out may be NULL). */
tl_status tl_amdgpu_compile(tl_amdgpu *h, const char *src, const char *target, tl_amdgpu_result *out,
                            tl_error *err);

/* Frees what r holds and zeroes it.  Accepts NULL. */
void tl_amdgpu_result_free(tl_amdgpu_result *r);

/* 1 if bytes[0, n) is a clang offload bundle ("__CLANG_OFFLOAD_BUNDLE__"). */
int tl_amdgpu_is_bundle(const void *bytes, size_t n);

/* Finds the code object for target ("gfx90a") in an uncompressed clang
 * offload bundle: its entry "hipv4-amdgcn-amd-amdhsa--TARGET" (or "hip-",
 * with or without ":features"), as *off and *size within bytes.  Every
 * offset is checked against n.  TL_INVALID_ARG for a malformed bundle,
 * TL_UNSUPPORTED for a compressed one (CCOB), TL_NOT_FOUND when no entry
 * is for target. */
tl_status tl_amdgpu_unbundle(const void *bytes, size_t n, const char *target, size_t *off, size_t *size,
                             tl_error *err);

/* Disassembles a code object for target with llvm-objdump (19 or newer,
 * found as clang is: TL_LLVM_OBJDUMP if set, else llvm-objdump-22 .. -19 on
 * PATH, then /usr/lib/llvm-22 .. llvm-19/bin/llvm-objdump), as
 * `llvm-objdump --disassemble --mcpu=TARGET`; *text is its output,
 * malloc'd, NUL-terminated (cut at 64 MiB).  TL_NO_TOOLCHAIN when there is
 * no llvm-objdump, TL_TOOLCHAIN when it fails (the message has its
 * output), TL_INVALID_ARG, TL_IO, TL_TIMEOUT, TL_NOMEM. */
tl_status tl_amdgpu_disassemble(const void *code, size_t n, const char *target, char **text,
                                tl_error *err);

#endif
