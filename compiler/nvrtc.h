/*
 * nvrtc.h - the NVIDIA toolchain driver: CUDA C source to cubin (sm_XX,
 * sm_XXa, sm_XXf) or PTX (compute_XX...) through NVRTC.
 *
 * NVRTC is opened with dlopen at run time, never linked, so the project
 * builds and runs where the CUDA Toolkit is missing; tl_nvrtc_open then
 * answers TL_NO_TOOLCHAIN and says what it tried.  Where it looks:
 *   - if the environment variable TL_NVRTC is set (even to ""), that path
 *     alone (a library file, or a directory holding libnvrtc.so.13/12/11);
 *     set it to a path that does not exist to act as if NVRTC were missing;
 *   - otherwise libnvrtc.so.13, .12 and .11 through the dynamic loader's
 *     search (LD_LIBRARY_PATH, the ld.so cache), then the same names in
 *     /usr/local/cuda/lib64/.
 * The library found stays mapped after tl_nvrtc_close (RTLD_NODELETE).
 *
 * Targets.  The base architectures come from nvrtcGetSupportedArchs (or,
 * with an NVRTC too old to have it, from probing a fixed list); sm_N and
 * compute_N are offered for each that the target table knows (target.h:
 * names are parsed there; an architecture the table lacks, such as an
 * older NVRTC's sm_50 .. sm_72, is not offered).  The architecture-specific ('a', e.g.
 * sm_90a) and family-specific ('f', e.g. sm_100f) variants are not listed
 * by NVRTC, so they are found by probing: for every supported N >= 90 an
 * empty program is compiled to PTX for compute_Na and compute_Nf, and a
 * variant is offered (as sm_ and compute_) when that succeeds.  Probing is lazy and done
 * once per handle and variant: a compile for an 'a'/'f' target (or
 * tl_nvrtc_accepts) probes that one variant, tl_nvrtc_targets all the
 * others; each costs about 10 ms of CPU (20 ms when it compiled for
 * sm_N, with ptxas, and without -minimal), so a process that compiles for
 * sm_90a pays one probe, not the whole list (bench/compile.md).  Version rules were the
 * alternative; they break each time NVIDIA renames an architecture (sm_101
 * became sm_110 in CUDA 13.0), a probe cannot.  The compute_Na/compute_Nf
 * and sm_ twins are assumed to accept alike (true for NVRTC 13.0).
 *
 * Options.  Every compile gets --gpu-architecture=TARGET, --std=c++17,
 * -default-device and from NVRTC 12.9 --no-cache (not -minimal: nvrtc.c
 * says why; bench/compile.md); sm_ targets also get --ptxas-options=--verbose, so that
 * the log carries ptxas's resource report (registers, stack frame, spill
 * stores and loads, shared memory: tl_ptxas_stats_parse reads it).  NVRTC
 * 13.0 leaves ptxas's error messages out of the log when ptxas is verbose,
 * so a failed sm_ compile whose log names no error is compiled once more
 * without --verbose, for the message.  The sources we generate use no
 * system headers, so no include paths are set.
 *
 * NVRTC's own cache is off.  From 12.9 NVRTC keeps PTX and cubins of the
 * sources it compiled in the CUDA driver's compute cache (~/.nv/ComputeCache,
 * CUDA_CACHE_PATH): to reach it, every process that compiles opens
 * libcuda.so.1 and calls cuInit, which starts the driver in a compile
 * worker (its address-space reservations under the worker's RLIMIT_AS
 * included) and, on a hit, returns a cubin without running ptxas, so the
 * log lacks ptxas's report.  The service has a content-addressed cache of
 * its own, and a build must not depend on what else ran on the machine, so
 * every compile and probe gets --no-cache when NVRTC is 12.9 or newer
 * (older ones have no cache and refuse the option); NVRTC then never opens
 * libcuda (tests/sh/nvrtc_no_driver.sh checks that).
 *
 * Threads.  A handle may be used from several threads at once: each compile
 * has its own NVRTC program (NVRTC is thread-safe per program) and the lazy
 * probe runs once under the handle's lock.
 */
#ifndef TL_NVRTC_H
#define TL_NVRTC_H

#include <stddef.h>
#include "../proto/tl_error.h"
#include "target.h"

/* Limits on what a compile accepts. */
#define TL_NVRTC_MAX_SOURCE   (64u << 20) /* bytes of source */
#define TL_NVRTC_MAX_NAME     256         /* bytes of a source name */
#define TL_NVRTC_MAX_OPTS     64          /* extra options */
#define TL_NVRTC_MAX_OPT_LEN  4096        /* bytes of one option */
#define TL_NVRTC_MAX_OUTPUT   (1u << 30)  /* bytes of cubin or PTX */
#define TL_NVRTC_TARGET_MAX   24          /* bytes of a target name, with NUL */

typedef struct tl_nvrtc tl_nvrtc;

/* What one compile gives back.  Zero it (or leave it as tl_nvrtc_compile
 * left it) and release it with tl_nvrtc_result_free. */
typedef struct tl_nvrtc_result {
  unsigned char *code; /* cubin bytes (sm_) or PTX text (compute_), malloc'd;
                          PTX is followed by a NUL not counted in code_size */
  size_t code_size;
  int is_ptx;          /* 1 for a compute_ target */
  char *log;           /* the NVRTC log, NUL-terminated, malloc'd; "" if empty */
  size_t log_len;      /* strlen(log) */
  double wall_ms;      /* wall-clock time from program creation to output */
  char target[TL_NVRTC_TARGET_MAX]; /* the target compiled for */
} tl_nvrtc_result;

/* Opens NVRTC (see the search order above) and resolves its functions.
 * On success *out is a handle to close with tl_nvrtc_close.  A missing
 * library, or one lacking a required function, is TL_NO_TOOLCHAIN whose
 * message lists every path tried and why each failed; TL_NOMEM on
 * allocation failure.  *out is NULL on failure. */
tl_status tl_nvrtc_open(tl_nvrtc **out, tl_error *err);

/* Closes a handle (no compile may be running on it).  Accepts NULL. */
void tl_nvrtc_close(tl_nvrtc *h);

/* NVRTC's version, e.g. 13 and 0. */
void tl_nvrtc_version(const tl_nvrtc *h, int *major, int *minor);

/* The library that was loaded (the name or path given to dlopen).  Owned by
 * the handle. */
const char *tl_nvrtc_library(const tl_nvrtc *h);

/* Every target this NVRTC accepts, in a fixed order: sm_ targets by
 * architecture (base, then 'a', then 'f'), then the compute_ ones likewise.
 * *list and its strings are owned by the handle and live until it closes.
 * Runs the lazy probe if it has not run yet.  Fails only with TL_NOMEM. */
tl_status tl_nvrtc_targets(tl_nvrtc *h, const char *const **list, size_t *count,
                           tl_error *err);

/* 1 if target (e.g. "sm_90a") is one of tl_nvrtc_targets, else 0. */
int tl_nvrtc_accepts(tl_nvrtc *h, const char *target);

/* Compiles src (NUL-terminated CUDA C++; `name` is the file name NVRTC uses
 * in its messages, "kernel.cu" when NULL) for target ("sm_90a",
 * "compute_80", ...), with nopts extra NVRTC options after ours (they may
 * not name the architecture).  On success fills *out (which the caller
 * frees with tl_nvrtc_result_free).
 * Failures:
 *   TL_INVALID_ARG  bad arguments, a target this NVRTC does not accept (the
 *                   message lists those it does), an option NVRTC rejects;
 *   TL_TOO_LARGE    source over TL_NVRTC_MAX_SOURCE, output over
 *                   TL_NVRTC_MAX_OUTPUT; TL_LIMIT too many/long options;
 *   TL_TOOLCHAIN    NVRTC failed to compile: the message carries the start
 *                   of the log, and out->log holds all of it (out->code is
 *                   NULL); also NVRTC's other internal failures;
 *   TL_NOMEM.
 * On every failure out holds at most the log: call tl_nvrtc_result_free in
 * every case (out may be NULL when the caller wants nothing back). */
tl_status tl_nvrtc_compile(tl_nvrtc *h, const char *src, const char *name, const char *target,
                           const char *const *extra_opts, int nopts, tl_nvrtc_result *out,
                           tl_error *err);

/* Frees what r holds and zeroes it.  Accepts NULL. */
void tl_nvrtc_result_free(tl_nvrtc_result *r);

/* ptxas's verbose report of one kernel, as tl_nvrtc_compile's log has it
 * for sm_ targets.  -1 marks a figure the report did not give. */
typedef struct tl_ptxas_stats {
  long registers;         /* "Used N registers" */
  long stack_frame_bytes; /* "N bytes stack frame" */
  long spill_store_bytes; /* "N bytes spill stores" */
  long spill_load_bytes;  /* "N bytes spill loads" */
  long shared_bytes;      /* "N bytes smem" (static shared memory), 0 if absent */
  long barriers;          /* "used N barriers", 0 if absent */
} tl_ptxas_stats;

/* Reads the report of `kernel` (its name as in the cubin, i.e. mangled
 * unless extern "C") from a log.  TL_NOT_FOUND when the log has no report
 * for it (a PTX compile, or ptxas not verbose); TL_INVALID_ARG on NULL
 * arguments. */
tl_status tl_ptxas_stats_parse(const char *log, const char *kernel, tl_ptxas_stats *out,
                               tl_error *err);

#endif
