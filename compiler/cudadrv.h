/*
 * cudadrv.h - the CUDA driver API, opened with dlopen (libcuda.so.1), for
 * loading cubins/PTX and launching kernels.  Shared by `tlc run --device
 * cuda` and by libtlclient, so it needs nothing but libc and libdl.
 *
 * A machine without the driver or without a GPU is an ordinary answer, not
 * a crash: tl_cuda_open returns TL_NO_DEVICE with "no CUDA driver
 * (libcuda.so.1 not found)" or "no CUDA device".  The environment variable
 * TL_LIBCUDA, when set, names the library to open instead of libcuda.so.1.
 * The driver library stays mapped after tl_cuda_close (RTLD_NODELETE).
 *
 * Contexts.  A handle uses the device's primary context (the one the CUDA
 * runtime shares), retained at open and released at close.  Every call
 * below makes it current on the calling thread first, so a handle may be
 * used from several threads; the driver serialises what it must.  Modules,
 * functions, events and device memory belong to the handle that made them
 * and must be released before it closes.
 *
 * Driver failures are TL_DEVICE with a message naming the call and the
 * driver's own error name and text ("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY
 * (out of memory)").
 */
#ifndef TL_CUDA_H
#define TL_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include "../proto/tl_error.h"

typedef struct tl_cuda tl_cuda;
typedef struct tl_cuda_module tl_cuda_module;
typedef struct tl_cuda_func tl_cuda_func;
typedef struct tl_cuda_event tl_cuda_event;
typedef uint64_t tl_cuda_ptr;      /* a device address (CUdeviceptr) */
typedef void *tl_cuda_stream;      /* a CUstream; NULL is the default stream */

/* Limits. */
#define TL_CUDA_MAX_IMAGE (1u << 30)   /* bytes of cubin/PTX given to tl_cuda_load */
#define TL_CUDA_JIT_LOG   8192         /* bytes kept of each JIT log */

/* What tl_cuda_device_info reports. */
typedef struct tl_cuda_device {
  char name[256];
  int ordinal;
  int cc_major, cc_minor;          /* compute capability, 9 and 0 for an H100 */
  int arch;                        /* 10 * major + minor */
  int multiprocessors;
  int max_threads_per_block;
  int max_shared_per_block;        /* bytes without opting in (48 KiB) */
  int max_shared_per_block_optin;  /* bytes with opting in (227 KiB on an H100) */
  int reserved_shared_per_block;   /* bytes the driver reserves per block */
  int max_registers_per_block;
  int warp_size;
  int driver_version;              /* e.g. 13000 for CUDA 13.0 */
  size_t total_memory;             /* bytes, 0 if unknown */
} tl_cuda_device;

/* What tl_cuda_function_attrs reports (cuFuncGetAttribute). */
typedef struct tl_cuda_func_attrs {
  int num_regs;            /* CU_FUNC_ATTRIBUTE_NUM_REGS */
  int local_bytes;         /* CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES */
  int shared_bytes;        /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES (static) */
  int const_bytes;         /* CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES */
  int max_threads;         /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
  int max_dynamic_shared;  /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
  int ptx_version;         /* 10 * major + minor of the PTX it came from */
  int binary_version;      /* 10 * major + minor of the SASS it runs */
} tl_cuda_func_attrs;

/* Opens the driver, initialises it and retains device `ordinal`'s primary
 * context.  TL_NO_DEVICE when there is no driver library, the driver does
 * not initialise (the message says why) or there are no devices;
 * TL_INVALID_ARG when ordinal is not one of the devices (the message gives
 * their number); TL_DEVICE for other driver failures; TL_NOMEM.  *out is
 * NULL on failure. */
tl_status tl_cuda_open(int ordinal, tl_cuda **out, tl_error *err);

/* Releases the context and the library.  Accepts NULL. */
void tl_cuda_close(tl_cuda *h);

/* The device's sm number (10 * major + minor compute capability): 90. */
int tl_cuda_arch(const tl_cuda *h);

/* The device's properties (filled at open; never fails). */
const tl_cuda_device *tl_cuda_device_info(const tl_cuda *h);

/* Loads a cubin (ELF) or PTX text (n bytes; PTX need not be NUL-terminated)
 * as a module.  On failure TL_DEVICE whose message carries the driver's
 * error and the start of the JIT error log; TL_INVALID_ARG for an empty or
 * NULL image, TL_TOO_LARGE over TL_CUDA_MAX_IMAGE.  Free with
 * tl_cuda_unload. */
tl_status tl_cuda_load(tl_cuda *h, const void *image, size_t n, tl_cuda_module **out,
                       tl_error *err);

/* The JIT info log of the last load of m ("" when none).  Owned by m. */
const char *tl_cuda_module_log(const tl_cuda_module *m);

/* Unloads a module and frees its functions.  Accepts NULL. */
void tl_cuda_unload(tl_cuda_module *m);

/* Looks up a kernel by name (as in the cubin, mangled unless extern "C").
 * The function belongs to m (no separate free).  TL_NOT_FOUND when m has no
 * such kernel. */
tl_status tl_cuda_function(tl_cuda_module *m, const char *name, tl_cuda_func **out,
                           tl_error *err);

/* The driver's view of a kernel's resources. */
tl_status tl_cuda_function_attrs(tl_cuda_func *fn, tl_cuda_func_attrs *out, tl_error *err);

/* Launches fn on a grid of grid[0..2] blocks of block[0..2] threads with
 * dyn_smem bytes of dynamic shared memory on stream, with args as for
 * cuLaunchKernel (an array of pointers to each argument's value).  When
 * dyn_smem is over 48 KiB the function's maximum dynamic shared memory is
 * raised first.  Checks before launching (TL_INVALID_ARG / TL_LIMIT, saying
 * by how much): zero dimensions, block size over the device's and the
 * kernel's limit, static + dynamic shared memory over the device's opt-in
 * limit.  Asynchronous: a fault shows at the next synchronising call. */
tl_status tl_cuda_launch(tl_cuda_func *fn, const unsigned grid[3], const unsigned block[3],
                         unsigned dyn_smem, tl_cuda_stream stream, void **args, tl_error *err);

/* Device memory.  tl_cuda_free accepts 0. */
tl_status tl_cuda_alloc(tl_cuda *h, size_t bytes, tl_cuda_ptr *out, tl_error *err);
void tl_cuda_free(tl_cuda *h, tl_cuda_ptr p);
tl_status tl_cuda_upload(tl_cuda *h, tl_cuda_ptr dst, const void *src, size_t bytes, tl_error *err);
tl_status tl_cuda_download(tl_cuda *h, void *dst, tl_cuda_ptr src, size_t bytes, tl_error *err);
tl_status tl_cuda_memset8(tl_cuda *h, tl_cuda_ptr dst, unsigned char value, size_t bytes,
                          tl_error *err);

/* Streams (non-blocking) and synchronisation.  tl_cuda_stream_destroy
 * accepts NULL. */
tl_status tl_cuda_stream_create(tl_cuda *h, tl_cuda_stream *out, tl_error *err);
void tl_cuda_stream_destroy(tl_cuda *h, tl_cuda_stream s);
tl_status tl_cuda_stream_sync(tl_cuda *h, tl_cuda_stream s, tl_error *err);
tl_status tl_cuda_sync(tl_cuda *h, tl_error *err); /* the whole context */

/* Events, for timing: record two, then tl_cuda_event_elapsed (which waits
 * for `end`).  tl_cuda_event_destroy accepts NULL. */
tl_status tl_cuda_event_create(tl_cuda *h, tl_cuda_event **out, tl_error *err);
tl_status tl_cuda_event_record(tl_cuda_event *ev, tl_cuda_stream s, tl_error *err);
tl_status tl_cuda_event_elapsed(tl_cuda_event *start, tl_cuda_event *end, float *ms, tl_error *err);
void tl_cuda_event_destroy(tl_cuda_event *ev);

#endif
