/*
 * gpudrv.h - one interface to the GPU runtimes: the CUDA driver API
 * (cudadrv.c, libcuda.so.1) and the HIP runtime (hipdrv.c, libamdhip64),
 * both opened with dlopen, for loading device code and launching kernels.
 * Shared by `tlc run --device` and by libtlclient, so it needs nothing but
 * libc, libdl and libpthread.
 *
 * Each runtime is one entry of the driver table (tl_gpu_driver below): the
 * calls that differ between vendors, on the runtime's own handles.
 * Everything else is written once here, in gpudrv.c: argument checks, the
 * module and function bookkeeping (a module keeps the functions looked up
 * in it, with the figures the launch checks need), the checks before a
 * launch, memory, streams and events.
 *
 * Opening.  A machine without the runtime or without a GPU is an ordinary
 * answer, not a crash: tl_gpu_open returns TL_NO_DEVICE with a message that
 * says what is missing (cudadrv.h and hipdrv.h give the exact texts and
 * the libraries tried).  TL_GPU_ANY tries CUDA first and, when there is no
 * CUDA device, HIP; when neither has one the message gives both reasons.
 *
 * Threads.  A handle makes its device current on the calling thread before
 * every call (the CUDA primary context, hipSetDevice), so a handle may be
 * used from several threads.  Modules, functions, events, streams and
 * device memory belong to the handle that made them and must be released
 * before it closes.
 *
 * Runtime failures are TL_DEVICE with a message naming the call and the
 * runtime's own error name and text ("cuMemAlloc of 1024 bytes:
 * CUDA_ERROR_OUT_OF_MEMORY (out of memory)").
 */
#ifndef TL_GPUDRV_H
#define TL_GPUDRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../proto/tl_error.h"

typedef struct tl_gpu tl_gpu;
typedef struct tl_gpu_module tl_gpu_module;
typedef struct tl_gpu_func tl_gpu_func;
typedef struct tl_gpu_event tl_gpu_event;
typedef uint64_t tl_gpu_ptr;  /* a device address (CUdeviceptr, hipDeviceptr_t) */
typedef void *tl_gpu_stream;  /* a CUstream / hipStream_t; NULL is the default stream */

/* Limits. */
#define TL_GPU_MAX_IMAGE (1u << 30) /* bytes of device code given to tl_gpu_load */
#define TL_GPU_JIT_LOG   8192       /* bytes kept of a module's JIT log */
#define TL_GPU_MAX_NAME  4096       /* bytes of a kernel name */
#define TL_GPU_ARCH_MAX  32         /* bytes of an architecture name, with NUL */

typedef enum tl_gpu_api { TL_GPU_ANY, TL_GPU_CUDA, TL_GPU_HIP } tl_gpu_api;

/* What tl_gpu_device_info reports (filled at open).  A figure a runtime
 * does not report is 0. */
typedef struct tl_gpu_device {
  tl_gpu_api api;                /* TL_GPU_CUDA or TL_GPU_HIP */
  char name[256];                /* "NVIDIA H100 80GB HBM3", "AMD Instinct MI210" */
  char arch_name[TL_GPU_ARCH_MAX]; /* "sm_90"; "gfx90a" (gcnArchName up to its first ':') */
  char target_id[256];           /* HIP: gcnArchName whole, "gfx90a:sramecc+:xnack-"; CUDA: arch_name */
  char library[256];             /* the library opened: "libcuda.so.1", "libamdhip64.so.6" */
  int ordinal;
  int arch;                      /* CUDA: 10 * major + minor (90 for an H100); HIP: 0 */
  int cc_major, cc_minor;        /* CUDA: compute capability */
  int driver_version;            /* CUDA: cuDriverGetVersion, 13000 for 13.0 */
  int runtime_version;           /* HIP: hipRuntimeGetVersion, 60032830 for 6.0.32830 */
  int props_layout;              /* HIP: 600 for hipGetDevicePropertiesR0600, 0 for ROCm 5's call */
  int multiprocessors;           /* SMs, compute units */
  int max_threads_per_block;
  int max_block_dim[3];
  int max_grid_dim[3];
  int max_shared_per_block;      /* bytes without opting in (48 KiB on NVIDIA; LDS per workgroup on AMD) */
  int max_shared_per_block_optin;/* bytes with opting in (227 KiB on an H100; AMD: max_shared_per_block) */
  int reserved_shared_per_block; /* CUDA: bytes the driver reserves per block */
  int max_registers_per_block;
  int warp_size;                 /* 32; wavefront 64 on CDNA, 32 on RDNA */
  size_t total_memory;           /* bytes, 0 if unknown */
} tl_gpu_device;

/* What tl_gpu_function_attrs reports (cuFuncGetAttribute,
 * hipFuncGetAttribute); a figure the runtime is not asked for is 0. */
typedef struct tl_gpu_func_attrs {
  int num_regs;            /* registers per thread (VGPRs on AMD, as ROCm reports it) */
  int local_bytes;         /* local (scratch) memory per thread */
  int shared_bytes;        /* static shared memory / LDS */
  int const_bytes;         /* CUDA: constant memory */
  int max_threads;         /* the kernel's thread limit (launch bounds) */
  int max_dynamic_shared;  /* the dynamic shared memory it may be launched with */
  int ptx_version;         /* CUDA: 10 * major + minor of the PTX it came from */
  int binary_version;      /* 10 * major + minor of the machine code */
} tl_gpu_func_attrs;

/* Opens the runtime of `api` and device `ordinal` of it.  TL_NO_DEVICE when
 * there is no runtime library, it lacks an entry point, it does not
 * initialise (the message says why) or there are no devices;
 * TL_INVALID_ARG when ordinal is negative or not one of the devices (the
 * message gives their number); TL_DEVICE for other runtime failures;
 * TL_NOMEM.  *out is NULL on failure. */
tl_status tl_gpu_open(tl_gpu_api api, int ordinal, tl_gpu **out, tl_error *err);

/* Releases the device (the runtime library stays mapped).  Accepts NULL. */
void tl_gpu_close(tl_gpu *g);

/* The device's properties (never NULL for an open handle; NULL for NULL). */
const tl_gpu_device *tl_gpu_device_info(const tl_gpu *g);

/* Shorthands: the api (TL_GPU_ANY for NULL), the sm number (0 on AMD and
 * for NULL) and the architecture name ("" for NULL). */
tl_gpu_api tl_gpu_get_api(const tl_gpu *g);
int tl_gpu_arch(const tl_gpu *g);
const char *tl_gpu_arch_name(const tl_gpu *g);

/* Loads device code (n bytes) as a module.  CUDA takes a cubin or PTX text
 * (which need not be NUL-terminated); on failure the message carries the
 * start of the JIT error log.  HIP takes a linked AMDGPU code object,
 * checked first since the runtime reads its size from the ELF headers
 * (hipdrv.h says what is refused: TL_CORRUPT, TL_UNSUPPORTED).
 * TL_INVALID_ARG for an empty or NULL image, TL_TOO_LARGE over
 * TL_GPU_MAX_IMAGE, TL_DEVICE when the runtime refuses it.  Free with
 * tl_gpu_unload. */
tl_status tl_gpu_load(tl_gpu *g, const void *image, size_t n, tl_gpu_module **out, tl_error *err);

/* The JIT info log of the load of m ("" when none; CUDA only).  Owned by m. */
const char *tl_gpu_module_log(const tl_gpu_module *m);

/* Unloads a module and frees its functions.  Accepts NULL. */
void tl_gpu_unload(tl_gpu_module *m);

/* Looks up a kernel by name (its symbol: mangled unless extern "C").  The
 * function belongs to m (no separate free); a second lookup of the same
 * name gives the same function.  TL_NOT_FOUND when m has no such kernel,
 * TL_LIMIT for a name over TL_GPU_MAX_NAME bytes. */
tl_status tl_gpu_function(tl_gpu_module *m, const char *name, tl_gpu_func **out, tl_error *err);

/* The runtime's view of a kernel's resources. */
tl_status tl_gpu_function_attrs(tl_gpu_func *fn, tl_gpu_func_attrs *out, tl_error *err);

/* Launches fn on a grid of grid[0..2] blocks of block[0..2] threads with
 * dyn_smem bytes of dynamic shared memory (LDS) on stream, with args as
 * for cuLaunchKernel (an array of pointers to each argument's value).
 * CUDA: over 48 KiB of dynamic shared memory the function's maximum is
 * raised first; AMD needs no opt-in.  Checks before launching
 * (TL_INVALID_ARG / TL_LIMIT, saying by how much): zero dimensions, a
 * block over the device's and the kernel's thread limits or the device's
 * per-dimension limits, static + dynamic shared memory over the device's
 * (opt-in) limit, and on AMD grid[i] * block[i] over 2^32 - 1 work-items
 * (an HSA dispatch counts work-items in 32 bits).  Asynchronous: a fault
 * shows at the next synchronising call. */
tl_status tl_gpu_launch(tl_gpu_func *fn, const unsigned grid[3], const unsigned block[3], unsigned dyn_smem,
                        tl_gpu_stream stream, void **args, tl_error *err);

/* tl_gpu_launch with flags: TL_GPU_LAUNCH_PROGRAMMATIC launches a kernel
 * that waits (griddepcontrol.wait) for the work before it on the stream
 * with programmatic stream serialization (CUDA 12 drivers, sm_90 and
 * later: it may start as the last blocks of the kernel before it exit, before
 * that kernel's end); a runtime without it (HIP, an older CUDA driver)
 * launches it as tl_gpu_launch does, which gives the same results. */
#define TL_GPU_LAUNCH_PROGRAMMATIC 1u
tl_status tl_gpu_launch_ex(tl_gpu_func *fn, const unsigned grid[3], const unsigned block[3], unsigned dyn_smem,
                           tl_gpu_stream stream, void **args, unsigned flags, tl_error *err);

/* A tiled tensor map (CUtensorMap: 128 bytes) as cuTensorMapEncodeTiled
 * takes it: dimensions innermost first, the enum values of cuda.h's
 * CUtensorMapDataType, CUtensorMapInterleave, CUtensorMapSwizzle,
 * CUtensorMapL2promotion and CUtensorMapFloatOOBfill. */
#define TL_GPU_TMAP_BYTES 128
#define TL_GPU_TMAP_RANK_MAX 5
typedef struct tl_gpu_tmap {
  int dtype, rank;
  tl_gpu_ptr addr;
  uint64_t dims[TL_GPU_TMAP_RANK_MAX];
  uint64_t strides[TL_GPU_TMAP_RANK_MAX - 1]; /* bytes, of dimensions 1 to rank - 1 */
  uint32_t box[TL_GPU_TMAP_RANK_MAX];
  uint32_t elem_strides[TL_GPU_TMAP_RANK_MAX];
  int interleave, swizzle, l2_promotion, oob_fill;
} tl_gpu_tmap;

/* Encodes tensor map m into out (TL_GPU_TMAP_BYTES bytes, 64-byte
 * aligned), to be passed by value as a kernel parameter.  TL_UNSUPPORTED
 * on a runtime without tensor maps (HIP, a CUDA driver before 12.0);
 * TL_INVALID_ARG when out is misaligned; TL_DEVICE with the driver's error
 * when it refuses m. */
tl_status tl_gpu_tensor_map(tl_gpu *g, const tl_gpu_tmap *m, void *out, tl_error *err);

/* Device memory.  tl_gpu_alloc of 0 bytes is TL_INVALID_ARG; tl_gpu_free
 * accepts 0; copies of 0 bytes do nothing. */
tl_status tl_gpu_alloc(tl_gpu *g, size_t bytes, tl_gpu_ptr *out, tl_error *err);
void tl_gpu_free(tl_gpu *g, tl_gpu_ptr p);
tl_status tl_gpu_upload(tl_gpu *g, tl_gpu_ptr dst, const void *src, size_t bytes, tl_error *err);
tl_status tl_gpu_download(tl_gpu *g, void *dst, tl_gpu_ptr src, size_t bytes, tl_error *err);
tl_status tl_gpu_memset8(tl_gpu *g, tl_gpu_ptr dst, unsigned char value, size_t bytes, tl_error *err);

/* Streams (non-blocking) and synchronisation.  tl_gpu_stream_destroy
 * accepts NULL. */
tl_status tl_gpu_stream_create(tl_gpu *g, tl_gpu_stream *out, tl_error *err);
void tl_gpu_stream_destroy(tl_gpu *g, tl_gpu_stream s);
tl_status tl_gpu_stream_sync(tl_gpu *g, tl_gpu_stream s, tl_error *err);
tl_status tl_gpu_sync(tl_gpu *g, tl_error *err); /* the whole device */

/* Events, for timing: record two, then tl_gpu_event_elapsed (which waits
 * for `end`).  tl_gpu_event_destroy accepts NULL. */
tl_status tl_gpu_event_create(tl_gpu *g, tl_gpu_event **out, tl_error *err);
tl_status tl_gpu_event_record(tl_gpu_event *ev, tl_gpu_stream s, tl_error *err);
tl_status tl_gpu_event_elapsed(tl_gpu_event *start, tl_gpu_event *end, float *ms, tl_error *err);
void tl_gpu_event_destroy(tl_gpu_event *ev);

/* ---- the driver table (for cudadrv.c and hipdrv.c) ------------------------------ */

/* The function attributes asked of a runtime, in tl_gpu_func_attrs order. */
typedef enum tl_gpu_fattr {
  TL_FATTR_NUM_REGS,
  TL_FATTR_LOCAL_BYTES,
  TL_FATTR_SHARED_BYTES,
  TL_FATTR_CONST_BYTES,
  TL_FATTR_MAX_THREADS,
  TL_FATTR_MAX_DYNAMIC_SHARED,
  TL_FATTR_PTX_VERSION,
  TL_FATTR_BINARY_VERSION,
  TL_FATTR_COUNT
} tl_gpu_fattr;

/* One runtime.  `rt` is the runtime's state made by open; modules,
 * functions, streams and events are the runtime's own handles.  gpudrv.c
 * checks every argument and makes the device current (bind) before each
 * call but open and close, so an entry only calls the runtime and says
 * what failed (TL_DEVICE with the call's name and the runtime's error). */
typedef struct tl_gpu_driver {
  tl_gpu_api api;
  const char *name;        /* "CUDA", "HIP": in messages */
  const char *smem_name;   /* "shared memory", "LDS" */
  const char *block_name;  /* "block", "workgroup" */
  bool items_32bit;        /* grid[i] * block[i] must fit 32 bits */
  /* fills info (all but api) as tl_gpu_open says */
  tl_status (*open)(int ordinal, void **rt, tl_gpu_device *info, tl_error *err);
  void (*close)(void *rt);
  tl_status (*bind)(void *rt, tl_error *err);
  /* log: TL_GPU_JIT_LOG bytes for the JIT info log (left "" when none) */
  tl_status (*load)(void *rt, const void *image, size_t n, void **mod, char *log, tl_error *err);
  void (*unload)(void *rt, void *mod);
  /* TL_NOT_FOUND (no message needed) when the module has no such kernel */
  tl_status (*function)(void *rt, void *mod, const char *name, void **fn, tl_error *err);
  /* -1 in *value for an attribute this runtime is not asked for */
  tl_status (*fattr)(void *rt, void *fn, tl_gpu_fattr which, int *value, tl_error *err);
  tl_status (*launch)(void *rt, void *fn, const unsigned grid[3], const unsigned block[3], unsigned dyn_smem,
                      tl_gpu_stream stream, void **args, unsigned flags, tl_error *err); /* TL_GPU_LAUNCH_* */
  /* NULL for a runtime without tensor maps; TL_UNSUPPORTED when this
   * runtime's library lacks them */
  tl_status (*tensor_map)(void *rt, const tl_gpu_tmap *m, void *out, tl_error *err);
  tl_status (*alloc)(void *rt, size_t bytes, tl_gpu_ptr *out, tl_error *err);
  void (*free)(void *rt, tl_gpu_ptr p);
  tl_status (*upload)(void *rt, tl_gpu_ptr dst, const void *src, size_t bytes, tl_error *err);
  tl_status (*download)(void *rt, void *dst, tl_gpu_ptr src, size_t bytes, tl_error *err);
  tl_status (*memset8)(void *rt, tl_gpu_ptr dst, unsigned char value, size_t bytes, tl_error *err);
  tl_status (*stream_create)(void *rt, tl_gpu_stream *out, tl_error *err);
  void (*stream_destroy)(void *rt, tl_gpu_stream s);
  tl_status (*stream_sync)(void *rt, tl_gpu_stream s, tl_error *err);
  tl_status (*sync)(void *rt, tl_error *err);
  tl_status (*event_create)(void *rt, void **ev, tl_error *err);
  tl_status (*event_record)(void *rt, void *ev, tl_gpu_stream s, tl_error *err);
  /* waits for end, then the milliseconds between the two */
  tl_status (*event_elapsed)(void *rt, void *start, void *end, float *ms, tl_error *err);
  void (*event_destroy)(void *rt, void *ev);
} tl_gpu_driver;

extern const tl_gpu_driver tl_gpu_cuda_driver; /* cudadrv.c */
extern const tl_gpu_driver tl_gpu_hip_driver;  /* hipdrv.c */

#endif
