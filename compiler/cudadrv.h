/*
 * cudadrv.h - the CUDA entry of gpudrv.h's driver table: the CUDA driver
 * API, opened with dlopen (libcuda.so.1), for loading cubins/PTX and
 * launching kernels.  Use it through gpudrv.h (tl_gpu_open(TL_GPU_CUDA,
 * ...)); this header only says what is particular to CUDA.
 *
 * A machine without the driver or without a GPU is an ordinary answer, not
 * a crash: tl_gpu_open returns TL_NO_DEVICE with "no CUDA driver
 * (libcuda.so.1 not found)", "no CUDA driver (X is the CUDA Toolkit's stub
 * library, not the driver)", "no usable CUDA driver (X lacks SYMBOL)" or
 * "no CUDA device".  The environment variable TL_LIBCUDA, when set, names
 * the library to open instead of libcuda.so.1.  The driver library stays
 * mapped after tl_gpu_close (RTLD_NODELETE).
 *
 * Contexts.  A handle uses the device's primary context (the one the CUDA
 * runtime shares), retained at open and released at close, and made
 * current before every call.
 *
 * Loading takes a cubin (ELF) or PTX text; on failure the message carries
 * the driver's error and the start of the JIT error log, and
 * tl_gpu_module_log gives the JIT info log of a load.  A launch with over
 * 48 KiB of dynamic shared memory raises the function's
 * MAX_DYNAMIC_SHARED_SIZE_BYTES first; the shared-memory limit of the
 * launch checks is the device's opt-in limit.
 */
#ifndef TL_CUDA_H
#define TL_CUDA_H

#include "gpudrv.h"

#endif
