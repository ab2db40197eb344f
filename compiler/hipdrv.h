/*
 * hipdrv.h - the HIP runtime (libamdhip64), opened with dlopen, for loading
 * AMD code objects (HSACO) and launching their kernels: the AMD counterpart
 * of cudadrv.h, with the same shape, shared by libtlclient (and whatever
 * else runs kernels), so it needs nothing but libc and libdl.  Written
 * against ROCm 6's headers and ABI; ROCm 5's runtime is accepted too (see
 * "Properties" below).
 *
 * Opening.  A machine without ROCm or without an AMD GPU is an ordinary
 * answer, not a crash: tl_hip_open returns TL_NO_DEVICE with "no HIP
 * runtime (libamdhip64.so.6, ... not found)", "no HIP runtime (X cannot be
 * loaded: WHY)", "no usable HIP runtime (X lacks SYMBOL)" or "no HIP
 * device".  The libraries tried, in order: libamdhip64.so.6,
 * libamdhip64.so.5 and libamdhip64.so through the dynamic loader's search,
 * then the same three in /opt/rocm/lib/.  The environment variable
 * TL_LIBHIP, when set and not empty, names the one library to try instead.
 * The library stays mapped after tl_hip_close (RTLD_NODELETE: the runtime
 * keeps process-wide state and is not meant to be unloaded).
 *
 * Devices.  HIP has no contexts to hold: a handle remembers its device
 * ordinal and makes it the calling thread's current device (hipSetDevice)
 * before every call below, so a handle may be used from several threads.
 * Modules, functions, events, streams and device memory belong to the
 * handle that made them and must be released before it closes.
 *
 * Properties.  The architecture name ("gfx90a") exists only in the
 * properties structure (gcnArchName); ROCm 6 dropped the attribute that gave
 * it (hipDeviceAttributeGcnArchName became hipDeviceAttributeUnused5).  ROCm
 * 6 also changed hipDeviceProp_t's layout and renamed the call that fills
 * it: its header maps hipGetDeviceProperties to the new symbol
 * hipGetDevicePropertiesR0600 (the ROCm 6 layout), while libamdhip64.so.6
 * still exports the plain hipGetDeviceProperties for the ROCm 5 layout
 * (hipDeviceProp_tR0000).  So the loader asks for
 * hipGetDevicePropertiesR0600 with a copy of ROCm 6's structure and reads
 * name and gcnArchName from it; only when that symbol is missing (a ROCm 5
 * runtime) does it call hipGetDeviceProperties with ROCm 5's layout.  The
 * numbers (threads, LDS, wavefront size, ...) come from
 * hipDeviceGetAttribute, whose values did not change between ROCm 5 and 6.
 *
 * Runtime failures are TL_DEVICE with a message naming the call and the
 * runtime's own error name and text ("hipMalloc of 1024 bytes:
 * hipErrorOutOfMemory (out of memory)").
 */
#ifndef TL_HIP_H
#define TL_HIP_H

#include <stddef.h>
#include <stdint.h>
#include "../proto/tl_error.h"

typedef struct tl_hip tl_hip;
typedef struct tl_hip_module tl_hip_module;
typedef struct tl_hip_func tl_hip_func;
typedef struct tl_hip_event tl_hip_event;
typedef uint64_t tl_hip_ptr;   /* a device address (hipDeviceptr_t) */
typedef void *tl_hip_stream;   /* a hipStream_t; NULL is the default stream */

/* Limits. */
#define TL_HIP_MAX_IMAGE (1u << 30) /* bytes of code object given to tl_hip_load */
#define TL_HIP_ARCH_MAX 32          /* bytes of an architecture name, with NUL */

/* What tl_hip_device_info reports. */
typedef struct tl_hip_device {
  char name[256];                /* "AMD Instinct MI210" */
  char arch[TL_HIP_ARCH_MAX];    /* "gfx90a": gcnArchName up to its first ':' */
  char target_id[256];           /* gcnArchName whole: "gfx90a:sramecc+:xnack-" */
  char library[256];             /* the library opened: "libamdhip64.so.6" */
  int ordinal;
  int props_layout;              /* 600: hipGetDevicePropertiesR0600; 0: ROCm 5's hipGetDeviceProperties */
  int runtime_version;           /* hipRuntimeGetVersion: 60032830 for 6.0.32830, 0 if unknown */
  int multiprocessors;           /* compute units */
  int max_threads_per_block;
  int max_block_dim[3];
  int max_grid_dim[3];
  int max_shared_per_block;      /* LDS bytes a workgroup may use (64 KiB on CDNA 2/3); no opt-in on AMD */
  int max_registers_per_block;
  int warp_size;                 /* wavefront: 64 on CDNA, 32 on RDNA */
  size_t total_memory;           /* bytes, 0 if unknown */
} tl_hip_device;

/* What tl_hip_function_attrs reports (hipFuncGetAttribute). */
typedef struct tl_hip_func_attrs {
  int num_regs;            /* HIP_FUNC_ATTRIBUTE_NUM_REGS: VGPRs used, as ROCm reports it */
  int local_bytes;         /* HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: private (scratch) per lane */
  int shared_bytes;        /* HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: static LDS */
  int max_threads;         /* HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK (launch bounds) */
  int max_dynamic_shared;  /* HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
  int binary_version;      /* HIP_FUNC_ATTRIBUTE_BINARY_VERSION */
} tl_hip_func_attrs;

/* Opens the runtime, initialises it and selects device `ordinal`.
 * TL_NO_DEVICE when there is no runtime library (the message names every
 * library tried), it lacks an entry point, it does not initialise (the
 * message says why) or there are no devices; TL_INVALID_ARG when ordinal
 * is not one of the devices (the message gives their number); TL_DEVICE
 * when the properties cannot be read or name no architecture; TL_NOMEM.
 * *out is NULL on failure. */
tl_status tl_hip_open(int ordinal, tl_hip **out, tl_error *err);

/* Forgets the handle (the runtime stays loaded).  Accepts NULL. */
void tl_hip_close(tl_hip *h);

/* The device's architecture name, "gfx90a" (never NULL for an open
 * handle; "" for NULL). */
const char *tl_hip_arch(const tl_hip *h);

/* The device's properties (filled at open; never fails). */
const tl_hip_device *tl_hip_device_info(const tl_hip *h);

/* The EF_AMDGPU_MACH value (the low byte of an AMDGPU ELF's e_flags) of a
 * gfx name, and back: a small table of the architectures this project
 * knows (gfx900 to gfx1201).  -1 / NULL when not in it. */
int tl_hip_mach_of(const char *arch);
const char *tl_hip_arch_of_mach(int mach);

/* Loads an AMD code object (n bytes of a linked HSACO: ELF64, EM_AMDGPU,
 * ET_DYN) as a module with hipModuleLoadData.  The image is checked first,
 * since the runtime reads its size from the ELF headers: TL_INVALID_ARG for
 * an empty or NULL image, TL_TOO_LARGE over TL_HIP_MAX_IMAGE, TL_CORRUPT
 * for an ELF whose headers or sections reach past n bytes, TL_UNSUPPORTED
 * for anything that is not an AMDGPU code object (a cubin, PTX, an offload
 * bundle, a relocatable object) or one built for another architecture (by
 * its EF_AMDGPU_MACH, when the table knows it).  TL_DEVICE when the runtime
 * refuses it.  Free with tl_hip_unload. */
tl_status tl_hip_load(tl_hip *h, const void *image, size_t n, tl_hip_module **out,
                      tl_error *err);

/* Unloads a module and frees its functions.  Accepts NULL. */
void tl_hip_unload(tl_hip_module *m);

/* Looks up a kernel by name (its symbol in the code object).  The function
 * belongs to m (no separate free).  TL_NOT_FOUND when m has no such
 * kernel. */
tl_status tl_hip_function(tl_hip_module *m, const char *name, tl_hip_func **out,
                          tl_error *err);

/* The runtime's view of a kernel's resources. */
tl_status tl_hip_function_attrs(tl_hip_func *fn, tl_hip_func_attrs *out, tl_error *err);

/* Launches fn with hipModuleLaunchKernel on a grid of grid[0..2] blocks of
 * block[0..2] threads with dyn_smem bytes of dynamic LDS on stream, with
 * args as for cuLaunchKernel (an array of pointers to each argument's
 * value, passed as kernelParams; `extra` is NULL).  AMD needs no opt-in for
 * dynamic LDS: the limit is the device's LDS per workgroup.  Checks before
 * launching (TL_INVALID_ARG / TL_LIMIT, saying by how much): zero
 * dimensions, a block over the device's and the kernel's thread limits or
 * the device's per-dimension limits, grid[i] * block[i] over 2^32 - 1
 * work-items (an HSA dispatch counts work-items in 32 bits), static +
 * dynamic LDS over the device's limit.  Asynchronous: a fault shows at the
 * next synchronising call. */
tl_status tl_hip_launch(tl_hip_func *fn, const unsigned grid[3], const unsigned block[3],
                        unsigned dyn_smem, tl_hip_stream stream, void **args, tl_error *err);

/* Device memory (hipMalloc, hipFree, hipMemcpyHtoD, hipMemcpyDtoH,
 * hipMemsetD8).  tl_hip_free accepts 0. */
tl_status tl_hip_alloc(tl_hip *h, size_t bytes, tl_hip_ptr *out, tl_error *err);
void tl_hip_free(tl_hip *h, tl_hip_ptr p);
tl_status tl_hip_upload(tl_hip *h, tl_hip_ptr dst, const void *src, size_t bytes, tl_error *err);
tl_status tl_hip_download(tl_hip *h, void *dst, tl_hip_ptr src, size_t bytes, tl_error *err);
tl_status tl_hip_memset8(tl_hip *h, tl_hip_ptr dst, unsigned char value, size_t bytes,
                         tl_error *err);

/* Streams (non-blocking) and synchronisation.  tl_hip_stream_destroy
 * accepts NULL. */
tl_status tl_hip_stream_create(tl_hip *h, tl_hip_stream *out, tl_error *err);
void tl_hip_stream_destroy(tl_hip *h, tl_hip_stream s);
tl_status tl_hip_stream_sync(tl_hip *h, tl_hip_stream s, tl_error *err);
tl_status tl_hip_sync(tl_hip *h, tl_error *err); /* hipDeviceSynchronize */

/* Events, for timing: record two, then tl_hip_event_elapsed (which waits
 * for `end`).  tl_hip_event_destroy accepts NULL. */
tl_status tl_hip_event_create(tl_hip *h, tl_hip_event **out, tl_error *err);
tl_status tl_hip_event_record(tl_hip_event *ev, tl_hip_stream s, tl_error *err);
tl_status tl_hip_event_elapsed(tl_hip_event *start, tl_hip_event *end, float *ms, tl_error *err);
void tl_hip_event_destroy(tl_hip_event *ev);

#endif
