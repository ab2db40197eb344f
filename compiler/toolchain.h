/*
 * toolchain.h - one interface to the toolchains: each driver (nvrtc.c for
 * NVIDIA, amdgpu.c for AMD) exports one entry of this table, and compile.c
 * picks the entry of the target's vendor (target.h) instead of branching
 * per vendor.  An entry's handle is opened once, when first needed, by
 * compile.c, and never closed.
 *
 * Every function may be called from several threads at once on one handle.
 */
#ifndef TL_TOOLCHAIN_H
#define TL_TOOLCHAIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include "../proto/tl_error.h"
#include "target.h"

/* The compile options a toolchain may get (compile.c parses them). */
typedef struct tl_toolchain_opts {
  int max_registers;        /* 0: the toolchain's choice */
  bool debug;               /* line info in the binary */
  const char *fast_compile; /* NULL, or NVRTC's --Ofast-compile level: "min", "mid", "max" */
  const char *backend;      /* NVIDIA: "auto", "cuda" or "ptx" (compile.c chooses the back end by it) */
  int split_statements;     /* 0, or the fewest statements of a kernel pass_split.c cuts (compile.c) */
} tl_toolchain_opts;

/* What one compile gives: the binary and the toolchain's log, malloc'd. */
typedef struct tl_toolchain_out {
  unsigned char *code;
  size_t size;
  char *log; /* NUL-terminated, "" when empty */
} tl_toolchain_out;

typedef struct tl_toolchain_ops {
  tl_vendor vendor; /* the targets it builds for */
  const char *name; /* "NVRTC", "AMDGPU" */
  /* Opens the toolchain (see nvrtc.h, amdgpu.h for where it looks):
   * TL_NO_TOOLCHAIN saying what was tried, TL_NOMEM. */
  tl_status (*open)(void **h, tl_error *err);
  /* What the handle drives, e.g. "NVRTC 13.0 (libnvrtc.so.13)", into buf. */
  void (*describe)(void *h, char *buf, size_t cap);
  /* The targets it offers (all in target.h's table), owned by the handle. */
  tl_status (*targets)(void *h, const char *const **list, size_t *count, tl_error *err);
  /* 1 if it offers target, else 0. */
  int (*accepts)(void *h, const char *target);
  /* Why it does not offer target, a target of the table; NULL when it
   * does, or when it has nothing to say. */
  const char *(*refusal)(void *h, const char *target);
  /* Compiles src for t into *out (freed by tl_toolchain_out_free, in every
   * case): TL_TOOLCHAIN with the start of the log when the compile fails. */
  tl_status (*compile)(void *h, const char *src, const tl_target *t, const tl_toolchain_opts *opts,
                       tl_toolchain_out *out, tl_error *err);
  /* Reads the binary back: it must hold kernel (with nparams arguments
   * where the binary says) for t; *resources is the metadata's
   * "resources" object (proto/kernel-meta.md).  TL_TOOLCHAIN when the
   * binary is not what was asked for. */
  tl_status (*inspect)(void *h, const tl_target *t, const tl_toolchain_out *built, const char *kernel, int nparams,
                       json_t **resources, tl_error *err);
} tl_toolchain_ops;

extern const tl_toolchain_ops tl_toolchain_nvrtc;  /* nvrtc.c */
extern const tl_toolchain_ops tl_toolchain_amdgpu; /* amdgpu.c */

void tl_toolchain_out_free(tl_toolchain_out *o);

/* The resources of an NVIDIA build (nvrtc.c): a cubin's own records and
 * ptxas's verbose report in built->log (spills); nothing for PTX.  The
 * inspect of tl_toolchain_nvrtc, and of the PTX back end's builds (h is
 * not used). */
tl_status tl_nv_cubin_resources(void *h, const tl_target *t, const tl_toolchain_out *built, const char *kernel,
                                int nparams, json_t **resources, tl_error *err);

#endif
