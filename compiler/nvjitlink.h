/*
 * nvjitlink.h - the assembler of the direct PTX back end: PTX text (from
 * emit_ptx.c) to a cubin through nvJitLink, with ptxas's verbose report in
 * the log (registers, spills: tl_ptxas_stats_parse reads it).
 *
 * nvJitLink is opened with dlopen at run time, never linked.  Where it
 * looks: TL_NVJITLINK when set (a library file or a directory holding
 * libnvJitLink.so.13/.12; a path that does not exist acts as if it were
 * missing), else libnvJitLink.so.13 and .12 through the loader's search,
 * then /usr/local/cuda/lib64.  NVRTC is not loaded by any of this.
 *
 * A handle may be used from several threads at once: each assembly has its
 * own nvJitLink handle.
 */
#ifndef TL_NVJITLINK_H
#define TL_NVJITLINK_H

#include <stddef.h>
#include "../proto/tl_error.h"
#include "toolchain.h"

#define TL_NVJITLINK_MAX_PTX   (64u << 20) /* bytes of PTX */
#define TL_NVJITLINK_MAX_CUBIN (1u << 30)  /* bytes of cubin */
#define TL_NVJITLINK_MAX_LOG   (16u << 20) /* bytes of a log */

typedef struct tl_nvjitlink tl_nvjitlink;

/* Opens nvJitLink; TL_NO_TOOLCHAIN listing what was tried, TL_NOMEM. */
tl_status tl_nvjitlink_open(tl_nvjitlink **out, tl_error *err);
/* "nvJitLink 13.0 (libnvJitLink.so.13)" into buf. */
void tl_nvjitlink_describe(const tl_nvjitlink *h, char *buf, size_t cap);
/* The directory of the library opened, into buf ("" when unknown): ptxas
 * is looked for beside it (ptxas.h). */
void tl_nvjitlink_dir(const tl_nvjitlink *h, char *buf, size_t cap);
/* Assembles ptx for arch ("sm_90a") at -O3 with ptxas verbose, without
 * nvJitLink's own cache (-no-cache: it would start the CUDA driver), and
 * -maxrregcount when max_registers is not 0, into out (free it with
 * tl_toolchain_out_free in every case: on failure it holds the log).
 * TL_TOOLCHAIN with the start of the error log when nvJitLink fails,
 * TL_TOO_LARGE, TL_NOMEM. */
tl_status tl_nvjitlink_assemble(tl_nvjitlink *h, const char *ptx, const char *arch, int max_registers,
                                tl_toolchain_out *out, tl_error *err);

#endif
