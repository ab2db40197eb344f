/*
 * cudadrv.c - the CUDA entry of gpudrv.h's driver table: the CUDA driver API
 * through dlopen.  The few types, enum values and entry points we use are
 * declared here from the public cuda.h of the CUDA Toolkit (13.0), so
 * nothing of the toolkit is needed to build.  Argument checks, module
 * bookkeeping and launch checks are gpudrv.c's.
 *
 * Versioned entry points: cuda.h maps several names onto suffixed symbols
 * (cuMemAlloc -> cuMemAlloc_v2, cuMemcpyHtoD -> cuMemcpyHtoD_v2, ...); the
 * table below asks for those symbols, each with the older name as a
 * fallback where one with the same signature exists.  The context is the
 * primary one (cuDevicePrimaryCtxRetain), which has kept its signature
 * while cuCtxCreate went through _v2, _v3 and _v4.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudadrv.h"

/* ---- the driver's ABI (from cuda.h) ----------------------------------- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_NOT_FOUND = 500,
};

enum { /* CUdevice_attribute */
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK = 111,
};

enum { /* CUfunction_attribute */
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
  CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum { /* CUdevice_attribute, continued */
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
};

typedef int CUjit_option;
enum {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_LOG_VERBOSE = 12,
};

enum { CU_STREAM_NON_BLOCKING = 1, CU_EVENT_DEFAULT = 0 };

/* Dynamic shared memory a launch may use without opting in. */
#define DEFAULT_DYN_SMEM_LIMIT (48 * 1024)

/* ---- the entry points ------------------------------------------------- */

/* X(field, symbol, fallback symbol or NULL, return type, arguments) */
#define CUDA_FUNCS(X)                                                                        \
  X(GetErrorName, "cuGetErrorName", NULL, CUresult, (CUresult, const char **))              \
  X(GetErrorString, "cuGetErrorString", NULL, CUresult, (CUresult, const char **))          \
  X(Init, "cuInit", NULL, CUresult, (unsigned))                                              \
  X(DriverGetVersion, "cuDriverGetVersion", NULL, CUresult, (int *))                        \
  X(DeviceGet, "cuDeviceGet", NULL, CUresult, (CUdevice *, int))                            \
  X(DeviceGetCount, "cuDeviceGetCount", NULL, CUresult, (int *))                            \
  X(DeviceGetName, "cuDeviceGetName", NULL, CUresult, (char *, int, CUdevice))              \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", NULL, CUresult, (int *, int, CUdevice))     \
  X(DeviceTotalMem, "cuDeviceTotalMem_v2", NULL, CUresult, (size_t *, CUdevice))            \
  X(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL, CUresult, (CUcontext *, CUdevice))  \
  X(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease",         \
    CUresult, (CUdevice))                                                                    \
  X(CtxSetCurrent, "cuCtxSetCurrent", NULL, CUresult, (CUcontext))                          \
  X(CtxSynchronize, "cuCtxSynchronize", NULL, CUresult, (void))                             \
  X(ModuleLoadDataEx, "cuModuleLoadDataEx", NULL, CUresult,                                 \
    (CUmodule *, const void *, unsigned, CUjit_option *, void **))                           \
  X(ModuleUnload, "cuModuleUnload", NULL, CUresult, (CUmodule))                             \
  X(ModuleGetFunction, "cuModuleGetFunction", NULL, CUresult,                               \
    (CUfunction *, CUmodule, const char *))                                                  \
  X(FuncGetAttribute, "cuFuncGetAttribute", NULL, CUresult, (int *, int, CUfunction))       \
  X(FuncSetAttribute, "cuFuncSetAttribute", NULL, CUresult, (CUfunction, int, int))         \
  X(LaunchKernel, "cuLaunchKernel", NULL, CUresult,                                         \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,       \
     CUstream, void **, void **))                                                            \
  X(MemAlloc, "cuMemAlloc_v2", NULL, CUresult, (CUdeviceptr *, size_t))                     \
  X(MemFree, "cuMemFree_v2", NULL, CUresult, (CUdeviceptr))                                 \
  X(MemcpyHtoD, "cuMemcpyHtoD_v2", NULL, CUresult, (CUdeviceptr, const void *, size_t))     \
  X(MemcpyDtoH, "cuMemcpyDtoH_v2", NULL, CUresult, (void *, CUdeviceptr, size_t))           \
  X(MemsetD8, "cuMemsetD8_v2", NULL, CUresult, (CUdeviceptr, unsigned char, size_t))        \
  X(StreamCreate, "cuStreamCreate", NULL, CUresult, (CUstream *, unsigned))                 \
  X(StreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy", CUresult, (CUstream))           \
  X(StreamSynchronize, "cuStreamSynchronize", NULL, CUresult, (CUstream))                   \
  X(EventCreate, "cuEventCreate", NULL, CUresult, (CUevent *, unsigned))                    \
  X(EventRecord, "cuEventRecord", NULL, CUresult, (CUevent, CUstream))                      \
  X(EventSynchronize, "cuEventSynchronize", NULL, CUresult, (CUevent))                      \
  X(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime", CUresult,              \
    (float *, CUevent, CUevent))                                                             \
  X(EventDestroy, "cuEventDestroy_v2", "cuEventDestroy", CUresult, (CUevent))

/* cuTensorMapEncodeTiled (CUDA 12.0 and later; optional: an older driver
 * runs everything but kernels with tensor maps). */
typedef CUresult (*cu_tmap_encode_fn)(void *, int, unsigned, void *, const unsigned long long *,
                                      const unsigned long long *, const unsigned *, const unsigned *, int, int, int,
                                      int);

/* cuLaunchKernelEx (CUDA 12.0 and later; optional: without it a launch
 * asked to be programmatic is an ordinary one), with cuda.h's
 * CUlaunchConfig and CUlaunchAttribute (an 8-byte id, a 64-byte value). */
enum { CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
typedef struct {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmatic_stream_serialization_allowed;
  } value;
} cu_launch_attr;
typedef struct {
  unsigned grid[3], block[3], shared_bytes;
  CUstream stream;
  cu_launch_attr *attrs;
  unsigned nattrs;
} cu_launch_config;
_Static_assert(sizeof(cu_launch_attr) == 72 && offsetof(cu_launch_config, stream) == 32 &&
                   offsetof(cu_launch_config, nattrs) == 48,
               "cuda.h's CUlaunchAttribute and CUlaunchConfig layouts");
typedef CUresult (*cu_launch_ex_fn)(const cu_launch_config *, CUfunction, void **, void **);

typedef struct cu_rt {
  void *lib;
  cu_tmap_encode_fn TensorMapEncodeTiled; /* NULL when the driver lacks it */
  cu_launch_ex_fn LaunchKernelEx;         /* NULL when the driver lacks it */
  CUdevice dev;
  CUcontext ctx;
  int arch; /* for messages, and programmatic launches (sm_90 and later) */
#define CUDA_FIELD_(field, sym, alt, ret, args) ret(*field) args;
  CUDA_FUNCS(CUDA_FIELD_)
#undef CUDA_FIELD_
} cu_rt;

/* ---- errors ----------------------------------------------------------- */

/* Fills err for a failed driver call and returns `code`. */
static tl_status cu_fail(const cu_rt *h, tl_status code, CUresult r, tl_error *err, const char *what) {
  const char *name = NULL, *text = NULL;
  if (h && h->GetErrorName)
    h->GetErrorName(r, &name);
  if (h && h->GetErrorString)
    h->GetErrorString(r, &text);
  if (!name)
    return tl_error_set(err, code, "%s: CUDA error %d", what, r);
  return tl_error_set(err, code, "%s: %s (%s)", what, name, text ? text : "no description");
}

/* Returns TL_OK, or the failure of the call `what`. */
static tl_status cu_check(const cu_rt *h, CUresult r, tl_error *err, const char *what) {
  return r == CUDA_SUCCESS ? TL_OK : cu_fail(h, TL_DEVICE, r, err, what);
}

/* Makes the handle's context current on this thread. */
static tl_status cu_bind(void *rt, tl_error *err) {
  cu_rt *h = rt;
  return cu_check(h, h->CtxSetCurrent(h->ctx), err, "cuCtxSetCurrent");
}

/* ---- opening ---------------------------------------------------------- */

/* dlsym of `sym`, or of `alt` (which may be NULL) when sym is missing. */
static void *sym_or(void *lib, const char *sym, const char *alt) {
  void *p = dlsym(lib, sym);
  if (!p && alt)
    p = dlsym(lib, alt);
  return p;
}

static const char *resolve(cu_rt *h) {
#define CUDA_RESOLVE_(field, sym, alt, ret, args)                                            \
  *(void **)&h->field = sym_or(h->lib, sym, alt);                                            \
  if (!h->field)                                                                             \
    return sym;
  CUDA_FUNCS(CUDA_RESOLVE_)
#undef CUDA_RESOLVE_
  return NULL;
}

static int attr(cu_rt *h, int which) {
  int v = 0;
  if (h->DeviceGetAttribute(&v, which, h->dev) != CUDA_SUCCESS)
    return 0;
  return v;
}

/* Opens the library and the device; fills d. */
static tl_status cu_start(cu_rt *h, int ordinal, tl_gpu_device *d, tl_error *err) {
  const char *libname = d->library;
  const char *missing = resolve(h);
  if (missing)
    return tl_error_set(err, TL_NO_DEVICE, "no usable CUDA driver (%s lacks %s)", libname, missing);
  *(void **)&h->TensorMapEncodeTiled = dlsym(h->lib, "cuTensorMapEncodeTiled");
  *(void **)&h->LaunchKernelEx = dlsym(h->lib, "cuLaunchKernelEx");
  CUresult r = h->Init(0);
  if (r == CUDA_ERROR_NO_DEVICE)
    return tl_error_set(err, TL_NO_DEVICE, "no CUDA device");
  if (r == CUDA_ERROR_STUB_LIBRARY)
    return tl_error_set(err, TL_NO_DEVICE,
                        "no CUDA driver (%s is the CUDA Toolkit's stub library, not the driver)", libname);
  if (r != CUDA_SUCCESS)
    return cu_fail(h, TL_NO_DEVICE, r, err, "no CUDA device: the driver did not initialise: cuInit");
  int count = 0;
  r = h->DeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count <= 0)
    return tl_error_set(err, TL_NO_DEVICE, "no CUDA device");
  if (ordinal >= count)
    return tl_error_set(err, TL_INVALID_ARG, "there is no CUDA device %d (%d device%s: 0 to %d)", ordinal, count,
                        count == 1 ? "" : "s", count - 1);
  tl_status st;
  if ((st = cu_check(h, h->DeviceGet(&h->dev, ordinal), err, "cuDeviceGet")) != TL_OK ||
      (st = cu_check(h, h->PrimaryCtxRetain(&h->ctx, h->dev), err, "cuDevicePrimaryCtxRetain")) != TL_OK)
    return st;
  if ((st = cu_bind(h, err)) != TL_OK) {
    h->PrimaryCtxRelease(h->dev);
    return st;
  }
  if (h->DeviceGetName(d->name, (int)sizeof d->name - 1, h->dev) != CUDA_SUCCESS)
    snprintf(d->name, sizeof d->name, "CUDA device %d", ordinal);
  d->name[sizeof d->name - 1] = 0;
  d->cc_major = attr(h, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  d->cc_minor = attr(h, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  d->arch = h->arch = d->cc_major * 10 + d->cc_minor;
  snprintf(d->arch_name, sizeof d->arch_name, "sm_%d", d->arch);
  snprintf(d->target_id, sizeof d->target_id, "%s", d->arch_name);
  d->multiprocessors = attr(h, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  d->max_threads_per_block = attr(h, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  static const int dims[2][3] = {
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z}};
  for (int i = 0; i < 3; i++) {
    d->max_block_dim[i] = attr(h, dims[0][i]);
    d->max_grid_dim[i] = attr(h, dims[1][i]);
  }
  d->max_shared_per_block = attr(h, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  d->max_shared_per_block_optin = attr(h, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  if (d->max_shared_per_block_optin < d->max_shared_per_block)
    d->max_shared_per_block_optin = d->max_shared_per_block;
  d->reserved_shared_per_block = attr(h, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
  d->max_registers_per_block = attr(h, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  d->warp_size = attr(h, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  if (h->DriverGetVersion(&d->driver_version) != CUDA_SUCCESS)
    d->driver_version = 0;
  if (h->DeviceTotalMem(&d->total_memory, h->dev) != CUDA_SUCCESS)
    d->total_memory = 0;
  return TL_OK;
}

static tl_status cu_open(int ordinal, void **rt, tl_gpu_device *d, tl_error *err) {
  cu_rt *h = calloc(1, sizeof *h);
  if (!h)
    return tl_error_set(err, TL_NOMEM, "out of memory opening the CUDA driver");
  const char *env = getenv("TL_LIBCUDA");
  snprintf(d->library, sizeof d->library, "%s", env && *env ? env : "libcuda.so.1");
  /* RTLD_NODELETE: the driver is never unmapped, as the CUDA runtime does;
   * unloading it loses its internal state and is of no use. */
  h->lib = dlopen(d->library, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h->lib) {
    const char *why = dlerror();
    tl_status st;
    if (!why || strstr(why, "No such file"))
      st = tl_error_set(err, TL_NO_DEVICE, "no CUDA driver (%s not found)", d->library);
    else
      st = tl_error_set(err, TL_NO_DEVICE, "no CUDA driver (%s cannot be loaded: %s)", d->library, why);
    free(h);
    return st;
  }
  tl_status st = cu_start(h, ordinal, d, err);
  if (st != TL_OK) {
    dlclose(h->lib);
    free(h);
    return st;
  }
  *rt = h;
  return TL_OK;
}

static void cu_close(void *rt) {
  cu_rt *h = rt;
  h->PrimaryCtxRelease(h->dev);
  dlclose(h->lib);
  free(h);
}

/* ---- modules and functions -------------------------------------------- */

/* Copies the start of a JIT log into buf (for a message), "..." when cut. */
static void log_start(const char *log, char *buf, size_t cap) {
  size_t n = strnlen(log, TL_GPU_JIT_LOG);
  while (n > 0 && (log[n - 1] == '\n' || log[n - 1] == ' '))
    n--;
  size_t limit = cap > 8 ? cap - 8 : 0;
  int cut = n > limit;
  if (cut)
    n = limit;
  memcpy(buf, log, n);
  strcpy(buf + n, cut ? " ..." : "");
}

static tl_status cu_load(void *rt, const void *image, size_t n, void **mod, char *log, tl_error *err) {
  cu_rt *h = rt;
  /* PTX is text the driver reads up to a NUL: give it a terminated copy.
   * A cubin is ELF, whose size the driver reads from its headers. */
  int is_elf = n >= 4 && memcmp(image, "\177ELF", 4) == 0;
  char *copy = is_elf ? NULL : malloc(n + 1);
  char *elog = calloc(1, TL_GPU_JIT_LOG);
  if ((!is_elf && !copy) || !elog) {
    free(copy);
    free(elog);
    return tl_error_set(err, TL_NOMEM, "out of memory loading a module");
  }
  if (copy) {
    memcpy(copy, image, n);
    copy[n] = 0;
  }
  CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {log, (void *)(uintptr_t)(TL_GPU_JIT_LOG - 1), elog, (void *)(uintptr_t)(TL_GPU_JIT_LOG - 1)};
  CUmodule m = NULL;
  CUresult r = h->ModuleLoadDataEx(&m, is_elf ? image : copy, 4, opts, vals);
  free(copy);
  log[TL_GPU_JIT_LOG - 1] = 0;
  elog[TL_GPU_JIT_LOG - 1] = 0;
  tl_status st = TL_OK;
  if (r != CUDA_SUCCESS) {
    char what[96], excerpt[640];
    snprintf(what, sizeof what, "cuModuleLoadDataEx (%s of %zu bytes, on sm_%d)", is_elf ? "cubin" : "PTX", n,
             h->arch);
    log_start(elog[0] ? elog : log, excerpt, sizeof excerpt);
    st = cu_fail(h, TL_DEVICE, r, err, what);
    if (excerpt[0] && err) {
      size_t len = strlen(err->message);
      snprintf(err->message + len, sizeof err->message - len, "; JIT log: %s", excerpt);
    }
  }
  free(elog);
  *mod = m;
  return st;
}

static void cu_unload(void *rt, void *mod) { ((cu_rt *)rt)->ModuleUnload((CUmodule)mod); }

static tl_status cu_function(void *rt, void *mod, const char *name, void **fn, tl_error *err) {
  cu_rt *h = rt;
  CUfunction f = NULL;
  CUresult r = h->ModuleGetFunction(&f, (CUmodule)mod, name);
  if (r == CUDA_ERROR_NOT_FOUND)
    return TL_NOT_FOUND;
  *fn = f;
  return cu_check(h, r, err, "cuModuleGetFunction");
}

static tl_status cu_fattr(void *rt, void *fn, tl_gpu_fattr which, int *value, tl_error *err) {
  static const int native[TL_FATTR_COUNT] = {
      [TL_FATTR_NUM_REGS] = CU_FUNC_ATTRIBUTE_NUM_REGS,
      [TL_FATTR_LOCAL_BYTES] = CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
      [TL_FATTR_SHARED_BYTES] = CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
      [TL_FATTR_CONST_BYTES] = CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
      [TL_FATTR_MAX_THREADS] = CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
      [TL_FATTR_MAX_DYNAMIC_SHARED] = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
      [TL_FATTR_PTX_VERSION] = CU_FUNC_ATTRIBUTE_PTX_VERSION,
      [TL_FATTR_BINARY_VERSION] = CU_FUNC_ATTRIBUTE_BINARY_VERSION,
  };
  cu_rt *h = rt;
  return cu_check(h, h->FuncGetAttribute(value, native[which], (CUfunction)fn), err, "cuFuncGetAttribute");
}

static tl_status cu_tensor_map(void *rt, const tl_gpu_tmap *m, void *out, tl_error *err) {
  cu_rt *h = rt;
  if (!h->TensorMapEncodeTiled)
    return tl_error_set(err, TL_UNSUPPORTED, "the CUDA driver has no cuTensorMapEncodeTiled (CUDA 12.0 or newer needed)");
  unsigned long long dims[TL_GPU_TMAP_RANK_MAX], strides[TL_GPU_TMAP_RANK_MAX];
  unsigned box[TL_GPU_TMAP_RANK_MAX], es[TL_GPU_TMAP_RANK_MAX];
  for (int i = 0; i < m->rank && i < TL_GPU_TMAP_RANK_MAX; i++) {
    dims[i] = m->dims[i];
    strides[i] = i + 1 < m->rank ? m->strides[i] : 0;
    box[i] = m->box[i];
    es[i] = m->elem_strides[i];
  }
  CUresult r = h->TensorMapEncodeTiled(out, m->dtype, (unsigned)m->rank, (void *)(uintptr_t)m->addr, dims, strides, box,
                                       es, m->interleave, m->swizzle, m->l2_promotion, m->oob_fill);
  return cu_check(h, r, err, "cuTensorMapEncodeTiled");
}

static tl_status cu_launch(void *rt, void *fn, const unsigned grid[3], const unsigned block[3], unsigned dyn_smem,
                           tl_gpu_stream stream, void **args, unsigned flags, tl_error *err) {
  cu_rt *h = rt;
  tl_status st;
  if (dyn_smem > DEFAULT_DYN_SMEM_LIMIT &&
      (st = cu_check(h, h->FuncSetAttribute((CUfunction)fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            (int)dyn_smem),
                     err, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")) != TL_OK)
    return st;
  if ((flags & TL_GPU_LAUNCH_PROGRAMMATIC) && h->LaunchKernelEx && h->arch >= 90) {
    cu_launch_attr attr = {.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
    attr.value.programmatic_stream_serialization_allowed = 1;
    cu_launch_config c = {{grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]}, dyn_smem, (CUstream)stream,
                          &attr, 1};
    return cu_check(h, h->LaunchKernelEx(&c, (CUfunction)fn, args, NULL), err, "cuLaunchKernelEx");
  }
  return cu_check(h,
                  h->LaunchKernel((CUfunction)fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], dyn_smem,
                                  (CUstream)stream, args, NULL),
                  err, "cuLaunchKernel");
}

/* ---- memory, streams, events ------------------------------------------ */

static tl_status cu_alloc(void *rt, size_t bytes, tl_gpu_ptr *out, tl_error *err) {
  cu_rt *h = rt;
  CUdeviceptr p = 0;
  CUresult r = h->MemAlloc(&p, bytes);
  if (r != CUDA_SUCCESS) {
    char what[96];
    snprintf(what, sizeof what, "cuMemAlloc of %zu bytes", bytes);
    return cu_fail(h, TL_DEVICE, r, err, what);
  }
  *out = (tl_gpu_ptr)p;
  return TL_OK;
}

static void cu_free(void *rt, tl_gpu_ptr p) { ((cu_rt *)rt)->MemFree((CUdeviceptr)p); }

static tl_status cu_upload(void *rt, tl_gpu_ptr dst, const void *src, size_t bytes, tl_error *err) {
  cu_rt *h = rt;
  return cu_check(h, h->MemcpyHtoD((CUdeviceptr)dst, src, bytes), err, "cuMemcpyHtoD");
}

static tl_status cu_download(void *rt, void *dst, tl_gpu_ptr src, size_t bytes, tl_error *err) {
  cu_rt *h = rt;
  return cu_check(h, h->MemcpyDtoH(dst, (CUdeviceptr)src, bytes), err, "cuMemcpyDtoH");
}

static tl_status cu_memset8(void *rt, tl_gpu_ptr dst, unsigned char value, size_t bytes, tl_error *err) {
  cu_rt *h = rt;
  return cu_check(h, h->MemsetD8((CUdeviceptr)dst, value, bytes), err, "cuMemsetD8");
}

static tl_status cu_stream_create(void *rt, tl_gpu_stream *out, tl_error *err) {
  cu_rt *h = rt;
  CUstream s = NULL;
  tl_status st = cu_check(h, h->StreamCreate(&s, CU_STREAM_NON_BLOCKING), err, "cuStreamCreate");
  *out = s;
  return st;
}

static void cu_stream_destroy(void *rt, tl_gpu_stream s) { ((cu_rt *)rt)->StreamDestroy((CUstream)s); }

static tl_status cu_stream_sync(void *rt, tl_gpu_stream s, tl_error *err) {
  cu_rt *h = rt;
  return cu_check(h, h->StreamSynchronize((CUstream)s), err, "cuStreamSynchronize");
}

static tl_status cu_sync(void *rt, tl_error *err) {
  cu_rt *h = rt;
  return cu_check(h, h->CtxSynchronize(), err, "cuCtxSynchronize");
}

static tl_status cu_event_create(void *rt, void **ev, tl_error *err) {
  cu_rt *h = rt;
  CUevent e = NULL;
  tl_status st = cu_check(h, h->EventCreate(&e, CU_EVENT_DEFAULT), err, "cuEventCreate");
  *ev = e;
  return st;
}

static tl_status cu_event_record(void *rt, void *ev, tl_gpu_stream s, tl_error *err) {
  cu_rt *h = rt;
  return cu_check(h, h->EventRecord((CUevent)ev, (CUstream)s), err, "cuEventRecord");
}

static tl_status cu_event_elapsed(void *rt, void *start, void *end, float *ms, tl_error *err) {
  cu_rt *h = rt;
  tl_status st = cu_check(h, h->EventSynchronize((CUevent)end), err, "cuEventSynchronize");
  return st != TL_OK ? st
                     : cu_check(h, h->EventElapsedTime(ms, (CUevent)start, (CUevent)end), err, "cuEventElapsedTime");
}

static void cu_event_destroy(void *rt, void *ev) { ((cu_rt *)rt)->EventDestroy((CUevent)ev); }

const tl_gpu_driver tl_gpu_cuda_driver = {
    .api = TL_GPU_CUDA,
    .name = "CUDA",
    .smem_name = "shared memory",
    .block_name = "block",
    .items_32bit = false,
    .open = cu_open,
    .close = cu_close,
    .bind = cu_bind,
    .load = cu_load,
    .unload = cu_unload,
    .function = cu_function,
    .fattr = cu_fattr,
    .launch = cu_launch,
    .tensor_map = cu_tensor_map,
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = cu_upload,
    .download = cu_download,
    .memset8 = cu_memset8,
    .stream_create = cu_stream_create,
    .stream_destroy = cu_stream_destroy,
    .stream_sync = cu_stream_sync,
    .sync = cu_sync,
    .event_create = cu_event_create,
    .event_record = cu_event_record,
    .event_elapsed = cu_event_elapsed,
    .event_destroy = cu_event_destroy,
};
