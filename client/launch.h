/*
 * launch.h - the launcher: a kernel loaded on a GPU from its binary and its
 * metadata (proto/kernel-meta.md), and launched from that metadata alone.
 * It is the code behind libtlclient's tl_kernel_load and tl_kernel_launch,
 * and `tlc run --device` launches through it too, so every GPU check and
 * benchmark that uses tlc runs the code applications use: the same
 * metadata parser (meta.c), the same launch plan (grid from the scalar
 * arguments, dynamic shared memory, argument kinds, ranges and pointer
 * alignment) and the same runtime interface (compiler/gpudrv.h).
 *
 * Needs libtlcompiler (the expression parser, gpudrv) and jansson, not the
 * network side of libtlclient (curl, the cache): tlc links libtlclient.a,
 * from which only launch.o and meta.o are taken.
 */
#ifndef TL_CLIENT_LAUNCH_H
#define TL_CLIENT_LAUNCH_H

#include <stddef.h>
#include <stdint.h>
#include "../compiler/gpudrv.h"
#include "include/tl/tlclient.h"

/* Loads `image` (n bytes: a cubin, PTX or an HSACO) built for `target`
 * with its metadata JSON text on gpu, and looks up its entry.  Checks
 * first that the metadata is valid (tl_meta_parse's errors) and that the
 * target runs on the device (TL_UNSUPPORTED saying both: on NVIDIA as
 * tl_target_runs_on says, on AMD only the device's own gfx name); then the
 * errors of tl_gpu_load and tl_gpu_function.  The kernel keeps gpu (which
 * must outlive it) and copies nothing of image.  Free with tl_kernel_free. */
tl_status tl_kernel_load_image(tl_gpu *gpu, const char *target, const void *image, size_t n, const char *metadata,
                               tl_kernel **out, tl_error *err);

/* After k's launches have ended (the caller synchronized): TL_RUNTIME, naming
 * the workspace and byte, when a "zeroed" workspace (proto/tile-ir-v1.md
 * 3.1) is not all zeros again, which the next launch would count from.
 * `tlc run --device` checks it after its launches, so every GPU check and
 * benchmark of such a program tests that its blocks reset what they count. */
tl_status tl_kernel_check_zeroed(tl_kernel *k, tl_error *err);

/* The grid of a launch of k with args (tl_artifact_grid's rules). */
tl_status tl_kernel_grid(const tl_kernel *k, const tl_kernel_arg *args, int nargs, int64_t grid[3], tl_error *err);

#endif
