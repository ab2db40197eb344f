/*
 * ptxas.h - the whole-program assembler of the direct PTX back end: the
 * CUDA toolkit's ptxas run as a process (procs.h), for the kernels that
 * nvJitLink cannot assemble as they are meant.  nvJitLink compiles PTX as
 * relocatable code, where ptxas ignores setmaxnreg (warning C7504: the
 * consumers of a producer warpgroup would keep the launch's registers) and
 * serializes every wgmma of a function that calls a subroutine (C7509);
 * ptxas given the PTX alone compiles it whole, as NVRTC does.
 *
 * Where it looks: TL_PTXAS when set (the path of the ptxas to run; one
 * that is not an executable file acts as if ptxas were missing), else
 * beside the nvJitLink that was opened (its library directory's ../bin
 * and ../../../bin: /usr/local/cuda/lib64 and
 * /usr/local/cuda-V/targets/x86_64-linux/lib), then
 * /usr/local/cuda/bin, then $PATH.  `ptxas --version` gives the version
 * that names it in the build key's toolchain line (compile.c).
 *
 * Each assembly writes kernel.ptx into a private temporary directory and
 * runs `ptxas -arch=ARCH -O3 -v [-maxrregcount=N] -o kernel.cubin
 * kernel.ptx` there, in a process group of its own, at most
 * TL_PTXAS_TIMEOUT_MS (then the group is killed: TL_TIMEOUT).  A handle may
 * be used from several threads at once.
 */
#ifndef TL_PTXAS_H
#define TL_PTXAS_H

#include <stddef.h>
#include "../proto/tl_error.h"
#include "toolchain.h"

#define TL_PTXAS_TIMEOUT_MS 120000     /* one assembly's time limit */
#define TL_PTXAS_MAX_CUBIN  (1u << 30) /* bytes of cubin */
#define TL_PTXAS_MAX_LOG    (16u << 20) /* bytes of log kept */

typedef struct tl_ptxas tl_ptxas;

/* Finds ptxas (beside_dir: the directory of the opened nvJitLink library,
 * or NULL) and asks its version; TL_NO_TOOLCHAIN saying what was tried or
 * why it failed, TL_NOMEM. */
tl_status tl_ptxas_open(const char *beside_dir, tl_ptxas **out, tl_error *err);
/* "ptxas 13.0.88 (/usr/local/cuda/bin/ptxas)" into buf. */
void tl_ptxas_describe(const tl_ptxas *h, char *buf, size_t cap);
/* Assembles ptx for arch ("sm_90a") at -O3 with -v, and -maxrregcount
 * when max_registers is not 0, into out (free it with
 * tl_toolchain_out_free in every case: on failure it holds the log).
 * TL_TOOLCHAIN with the start of the log when ptxas fails, TL_TIMEOUT,
 * TL_IO, TL_NOMEM. */
tl_status tl_ptxas_assemble(tl_ptxas *h, const char *ptx, const char *arch, int max_registers, tl_toolchain_out *out,
                            tl_error *err);

#endif
