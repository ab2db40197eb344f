/*
 * cudadrv.c - the CUDA driver API through dlopen: the few types, enum values
 * and entry points we use are declared here from the public cuda.h of the
 * CUDA Toolkit (13.0), so nothing of the toolkit is needed to build.
 *
 * Versioned entry points: cuda.h maps several names onto suffixed symbols
 * (cuMemAlloc -> cuMemAlloc_v2, cuMemcpyHtoD -> cuMemcpyHtoD_v2, ...); the
 * table below asks for those symbols, each with the older name as a
 * fallback where one with the same signature exists.  The context is the
 * primary one (cuDevicePrimaryCtxRetain), which has kept its signature
 * while cuCtxCreate went through _v2, _v3 and _v4.
 */
#include <dlfcn.h>
#include <pthread.h>
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

struct tl_cuda {
  void *lib;
  CUdevice dev;
  CUcontext ctx;
  tl_cuda_device info;
#define CUDA_FIELD_(field, sym, alt, ret, args) ret(*field) args;
  CUDA_FUNCS(CUDA_FIELD_)
#undef CUDA_FIELD_
};

struct tl_cuda_func {
  tl_cuda_module *mod;
  CUfunction fn;
  int static_smem; /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, read at lookup */
  int max_threads; /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
  char *name;
  tl_cuda_func *next;
};

struct tl_cuda_module {
  tl_cuda *h;
  CUmodule mod;
  char log[TL_CUDA_JIT_LOG];
  pthread_mutex_t lock; /* guards the function list */
  tl_cuda_func *funcs;
};

struct tl_cuda_event {
  tl_cuda *h;
  CUevent ev;
};

/* ---- errors ----------------------------------------------------------- */

/* Fills err for a failed driver call and returns `code`. */
static tl_status cu_fail(const tl_cuda *h, tl_status code, CUresult r, tl_error *err,
                         const char *what) {
  const char *name = NULL, *text = NULL;
  if (h && h->GetErrorName)
    h->GetErrorName(r, &name);
  if (h && h->GetErrorString)
    h->GetErrorString(r, &text);
  if (!name)
    return tl_error_set(err, code, "%s: CUDA error %d", what, r);
  return tl_error_set(err, code, "%s: %s (%s)", what, name, text ? text : "no description");
}

#define CU_CHECK(h, call, err, what)                                                         \
  do {                                                                                       \
    CUresult r_ = (call);                                                                    \
    if (r_ != CUDA_SUCCESS)                                                                  \
      return cu_fail((h), TL_DEVICE, r_, (err), (what));                                     \
  } while (0)

/* Makes the handle's context current on this thread. */
static tl_status bind(tl_cuda *h, tl_error *err) {
  CU_CHECK(h, h->CtxSetCurrent(h->ctx), err, "cuCtxSetCurrent");
  return TL_OK;
}

/* ---- opening ---------------------------------------------------------- */

/* dlsym of `sym`, or of `alt` (which may be NULL) when sym is missing. */
static void *sym_or(void *lib, const char *sym, const char *alt) {
  void *p = dlsym(lib, sym);
  if (!p && alt)
    p = dlsym(lib, alt);
  return p;
}

static const char *resolve(tl_cuda *h) {
#define CUDA_RESOLVE_(field, sym, alt, ret, args)                                            \
  *(void **)&h->field = sym_or(h->lib, sym, alt);                                            \
  if (!h->field)                                                                             \
    return sym;
  CUDA_FUNCS(CUDA_RESOLVE_)
#undef CUDA_RESOLVE_
  return NULL;
}

static int attr(tl_cuda *h, int which) {
  int v = 0;
  if (h->DeviceGetAttribute(&v, which, h->dev) != CUDA_SUCCESS)
    return 0;
  return v;
}

tl_status tl_cuda_open(int ordinal, tl_cuda **out, tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_open: NULL argument");
  *out = NULL;
  if (ordinal < 0)
    return tl_error_set(err, TL_INVALID_ARG, "device ordinal %d is negative", ordinal);
  tl_cuda *h = calloc(1, sizeof *h);
  if (!h)
    return tl_error_set(err, TL_NOMEM, "out of memory opening the CUDA driver");
  const char *env = getenv("TL_LIBCUDA");
  const char *libname = env && *env ? env : "libcuda.so.1";
  /* RTLD_NODELETE: the driver is never unmapped, as the CUDA runtime does;
   * unloading it loses its internal state and is of no use. */
  h->lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h->lib) {
    const char *why = dlerror();
    tl_status st;
    if (!why || strstr(why, "No such file"))
      st = tl_error_set(err, TL_NO_DEVICE, "no CUDA driver (%s not found)", libname);
    else
      st = tl_error_set(err, TL_NO_DEVICE, "no CUDA driver (%s cannot be loaded: %s)", libname, why);
    free(h);
    return st;
  }
  const char *missing = resolve(h);
  tl_status st = TL_OK;
  if (missing) {
    st = tl_error_set(err, TL_NO_DEVICE, "no usable CUDA driver (%s lacks %s)", libname, missing);
    goto fail;
  }
  CUresult r = h->Init(0);
  if (r == CUDA_ERROR_NO_DEVICE) {
    st = tl_error_set(err, TL_NO_DEVICE, "no CUDA device");
    goto fail;
  }
  if (r == CUDA_ERROR_STUB_LIBRARY) {
    st = tl_error_set(err, TL_NO_DEVICE,
                      "no CUDA driver (%s is the CUDA Toolkit's stub library, not the driver)",
                      libname);
    goto fail;
  }
  if (r != CUDA_SUCCESS) {
    st = cu_fail(h, TL_NO_DEVICE, r, err, "no CUDA device: the driver did not initialise: cuInit");
    goto fail;
  }
  int count = 0;
  r = h->DeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count <= 0) {
    st = tl_error_set(err, TL_NO_DEVICE, "no CUDA device");
    goto fail;
  }
  if (ordinal >= count) {
    st = tl_error_set(err, TL_INVALID_ARG, "there is no CUDA device %d (%d device%s: 0 to %d)",
                      ordinal, count, count == 1 ? "" : "s", count - 1);
    goto fail;
  }
  r = h->DeviceGet(&h->dev, ordinal);
  if (r != CUDA_SUCCESS) {
    st = cu_fail(h, TL_DEVICE, r, err, "cuDeviceGet");
    goto fail;
  }
  r = h->PrimaryCtxRetain(&h->ctx, h->dev);
  if (r != CUDA_SUCCESS) {
    st = cu_fail(h, TL_DEVICE, r, err, "cuDevicePrimaryCtxRetain");
    goto fail;
  }
  r = h->CtxSetCurrent(h->ctx);
  if (r != CUDA_SUCCESS) {
    st = cu_fail(h, TL_DEVICE, r, err, "cuCtxSetCurrent");
    h->PrimaryCtxRelease(h->dev);
    goto fail;
  }
  tl_cuda_device *d = &h->info;
  d->ordinal = ordinal;
  if (h->DeviceGetName(d->name, (int)sizeof d->name - 1, h->dev) != CUDA_SUCCESS)
    snprintf(d->name, sizeof d->name, "CUDA device %d", ordinal);
  d->name[sizeof d->name - 1] = 0;
  d->cc_major = attr(h, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  d->cc_minor = attr(h, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  d->arch = d->cc_major * 10 + d->cc_minor;
  d->multiprocessors = attr(h, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  d->max_threads_per_block = attr(h, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
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
  *out = h;
  return TL_OK;
fail:
  dlclose(h->lib);
  free(h);
  return st;
}

void tl_cuda_close(tl_cuda *h) {
  if (!h)
    return;
  h->PrimaryCtxRelease(h->dev);
  dlclose(h->lib);
  free(h);
}

int tl_cuda_arch(const tl_cuda *h) { return h ? h->info.arch : 0; }

const tl_cuda_device *tl_cuda_device_info(const tl_cuda *h) { return h ? &h->info : NULL; }

/* ---- modules and functions -------------------------------------------- */

/* Copies the start of a JIT log into buf (for a message), "..." when cut. */
static void log_start(const char *log, char *buf, size_t cap) {
  size_t n = strnlen(log, TL_CUDA_JIT_LOG);
  while (n > 0 && (log[n - 1] == '\n' || log[n - 1] == ' '))
    n--;
  size_t limit = cap > 8 ? cap - 8 : 0;
  int cut = n > limit;
  if (cut)
    n = limit;
  memcpy(buf, log, n);
  strcpy(buf + n, cut ? " ..." : "");
}

tl_status tl_cuda_load(tl_cuda *h, const void *image, size_t n, tl_cuda_module **out,
                       tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_load: NULL argument");
  *out = NULL;
  if (!h || !image || n == 0)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_load: no image given");
  if (n > TL_CUDA_MAX_IMAGE)
    return tl_error_set(err, TL_TOO_LARGE, "image of %zu bytes is over the limit of %u", n,
                        TL_CUDA_MAX_IMAGE);
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  /* PTX is text the driver reads up to a NUL: give it a terminated copy.
   * A cubin is ELF, whose size the driver reads from its headers. */
  int is_elf = n >= 4 && memcmp(image, "\177ELF", 4) == 0;
  char *copy = NULL;
  if (!is_elf) {
    copy = malloc(n + 1);
    if (!copy)
      return tl_error_set(err, TL_NOMEM, "out of memory loading a module");
    memcpy(copy, image, n);
    copy[n] = 0;
  }
  tl_cuda_module *m = calloc(1, sizeof *m);
  if (!m) {
    free(copy);
    return tl_error_set(err, TL_NOMEM, "out of memory loading a module");
  }
  char *elog = calloc(1, TL_CUDA_JIT_LOG);
  if (!elog) {
    free(copy);
    free(m);
    return tl_error_set(err, TL_NOMEM, "out of memory loading a module");
  }
  CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {m->log, (void *)(uintptr_t)(TL_CUDA_JIT_LOG - 1), elog,
                  (void *)(uintptr_t)(TL_CUDA_JIT_LOG - 1)};
  CUresult r = h->ModuleLoadDataEx(&m->mod, is_elf ? image : copy, 4, opts, vals);
  free(copy);
  m->log[TL_CUDA_JIT_LOG - 1] = 0;
  elog[TL_CUDA_JIT_LOG - 1] = 0;
  if (r != CUDA_SUCCESS) {
    char what[96], excerpt[640];
    snprintf(what, sizeof what, "cuModuleLoadDataEx (%s of %zu bytes, on sm_%d)",
             is_elf ? "cubin" : "PTX", n, h->info.arch);
    log_start(elog[0] ? elog : m->log, excerpt, sizeof excerpt);
    st = cu_fail(h, TL_DEVICE, r, err, what);
    if (excerpt[0] && err) {
      size_t len = strlen(err->message);
      snprintf(err->message + len, sizeof err->message - len, "; JIT log: %s", excerpt);
    }
    free(elog);
    free(m);
    return st;
  }
  free(elog);
  m->h = h;
  pthread_mutex_init(&m->lock, NULL);
  *out = m;
  return TL_OK;
}

const char *tl_cuda_module_log(const tl_cuda_module *m) { return m ? m->log : ""; }

void tl_cuda_unload(tl_cuda_module *m) {
  if (!m)
    return;
  for (tl_cuda_func *f = m->funcs, *next; f; f = next) {
    next = f->next;
    free(f->name);
    free(f);
  }
  if (bind(m->h, NULL) == TL_OK)
    m->h->ModuleUnload(m->mod);
  pthread_mutex_destroy(&m->lock);
  free(m);
}

tl_status tl_cuda_function(tl_cuda_module *m, const char *name, tl_cuda_func **out,
                           tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_function: NULL argument");
  *out = NULL;
  if (!m || !name || !*name)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_function: no module or name");
  if (strlen(name) > 4096)
    return tl_error_set(err, TL_LIMIT, "kernel name longer than 4096 bytes");
  tl_cuda *h = m->h;
  pthread_mutex_lock(&m->lock);
  for (tl_cuda_func *f = m->funcs; f; f = f->next) {
    if (strcmp(f->name, name) == 0) {
      pthread_mutex_unlock(&m->lock);
      *out = f;
      return TL_OK;
    }
  }
  tl_status st = bind(h, err);
  CUfunction fn = NULL;
  CUresult r = CUDA_SUCCESS;
  if (st == TL_OK) {
    r = h->ModuleGetFunction(&fn, m->mod, name);
    if (r == CUDA_ERROR_NOT_FOUND)
      st = tl_error_set(err, TL_NOT_FOUND, "the module has no kernel named '%.200s'", name);
    else if (r != CUDA_SUCCESS)
      st = cu_fail(h, TL_DEVICE, r, err, "cuModuleGetFunction");
  }
  tl_cuda_func *f = NULL;
  if (st == TL_OK) {
    f = calloc(1, sizeof *f);
    if (f)
      f->name = strdup(name);
    if (!f || !f->name) {
      free(f);
      f = NULL;
      st = tl_error_set(err, TL_NOMEM, "out of memory looking up a kernel");
    }
  }
  if (st == TL_OK) {
    f->mod = m;
    f->fn = fn;
    if (h->FuncGetAttribute(&f->static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn) != CUDA_SUCCESS)
      f->static_smem = 0;
    if (h->FuncGetAttribute(&f->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn) !=
        CUDA_SUCCESS)
      f->max_threads = 0;
    f->next = m->funcs;
    m->funcs = f;
    *out = f;
  }
  pthread_mutex_unlock(&m->lock);
  return st;
}

tl_status tl_cuda_function_attrs(tl_cuda_func *fn, tl_cuda_func_attrs *out, tl_error *err) {
  if (!fn || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_function_attrs: NULL argument");
  tl_cuda *h = fn->mod->h;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  static const struct {
    int attr;
    size_t off;
  } rows[] = {
      {CU_FUNC_ATTRIBUTE_NUM_REGS, offsetof(tl_cuda_func_attrs, num_regs)},
      {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, offsetof(tl_cuda_func_attrs, local_bytes)},
      {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, offsetof(tl_cuda_func_attrs, shared_bytes)},
      {CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, offsetof(tl_cuda_func_attrs, const_bytes)},
      {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, offsetof(tl_cuda_func_attrs, max_threads)},
      {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
       offsetof(tl_cuda_func_attrs, max_dynamic_shared)},
      {CU_FUNC_ATTRIBUTE_PTX_VERSION, offsetof(tl_cuda_func_attrs, ptx_version)},
      {CU_FUNC_ATTRIBUTE_BINARY_VERSION, offsetof(tl_cuda_func_attrs, binary_version)},
  };
  tl_cuda_func_attrs a;
  memset(&a, 0, sizeof a);
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    int v = 0;
    CU_CHECK(h, h->FuncGetAttribute(&v, rows[i].attr, fn->fn), err, "cuFuncGetAttribute");
    memcpy((char *)&a + rows[i].off, &v, sizeof v);
  }
  *out = a;
  return TL_OK;
}

tl_status tl_cuda_launch(tl_cuda_func *fn, const unsigned grid[3], const unsigned block[3],
                         unsigned dyn_smem, tl_cuda_stream stream, void **args, tl_error *err) {
  if (!fn || !grid || !block)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_launch: NULL argument");
  tl_cuda *h = fn->mod->h;
  const tl_cuda_device *d = &h->info;
  for (int i = 0; i < 3; i++)
    if (grid[i] == 0 || block[i] == 0)
      return tl_error_set(err, TL_INVALID_ARG, "launch of %s with a zero dimension: grid %ux%ux%u, block %ux%ux%u",
                          fn->name, grid[0], grid[1], grid[2], block[0], block[1], block[2]);
  unsigned long long threads = (unsigned long long)block[0] * block[1] * block[2];
  unsigned long long limit = (unsigned long long)(fn->max_threads > 0 ? fn->max_threads
                                                                      : d->max_threads_per_block);
  if (limit > 0 && threads > limit)
    return tl_error_set(err, TL_LIMIT,
                        "block of %llu threads for %s is over its limit of %llu by %llu", threads,
                        fn->name, limit, threads - limit);
  unsigned long long smem = (unsigned long long)dyn_smem + (unsigned)fn->static_smem;
  unsigned long long smax = (unsigned long long)d->max_shared_per_block_optin;
  if (smax > 0 && smem > smax)
    return tl_error_set(err, TL_LIMIT,
                        "%s needs %llu bytes of shared memory (%d static + %u dynamic), over the "
                        "device's %llu per block by %llu",
                        fn->name, smem, fn->static_smem, dyn_smem, smax, smem - smax);
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  if (dyn_smem > DEFAULT_DYN_SMEM_LIMIT)
    CU_CHECK(h, h->FuncSetAttribute(fn->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)dyn_smem),
             err, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  CU_CHECK(h,
           h->LaunchKernel(fn->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                           dyn_smem, (CUstream)stream, args, NULL),
           err, "cuLaunchKernel");
  return TL_OK;
}

/* ---- memory, streams, events ------------------------------------------ */

tl_status tl_cuda_alloc(tl_cuda *h, size_t bytes, tl_cuda_ptr *out, tl_error *err) {
  if (!h || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_alloc: NULL argument");
  *out = 0;
  if (bytes == 0)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_alloc: zero bytes");
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  CUdeviceptr p = 0;
  CUresult r = h->MemAlloc(&p, bytes);
  if (r != CUDA_SUCCESS) {
    char what[96];
    snprintf(what, sizeof what, "cuMemAlloc of %zu bytes", bytes);
    return cu_fail(h, TL_DEVICE, r, err, what);
  }
  *out = (tl_cuda_ptr)p;
  return TL_OK;
}

void tl_cuda_free(tl_cuda *h, tl_cuda_ptr p) {
  if (!h || !p || bind(h, NULL) != TL_OK)
    return;
  h->MemFree((CUdeviceptr)p);
}

tl_status tl_cuda_upload(tl_cuda *h, tl_cuda_ptr dst, const void *src, size_t bytes, tl_error *err) {
  if (!h || (!src && bytes))
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_upload: NULL argument");
  if (bytes == 0)
    return TL_OK;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  CU_CHECK(h, h->MemcpyHtoD((CUdeviceptr)dst, src, bytes), err, "cuMemcpyHtoD");
  return TL_OK;
}

tl_status tl_cuda_download(tl_cuda *h, void *dst, tl_cuda_ptr src, size_t bytes, tl_error *err) {
  if (!h || (!dst && bytes))
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_download: NULL argument");
  if (bytes == 0)
    return TL_OK;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  CU_CHECK(h, h->MemcpyDtoH(dst, (CUdeviceptr)src, bytes), err, "cuMemcpyDtoH");
  return TL_OK;
}

tl_status tl_cuda_memset8(tl_cuda *h, tl_cuda_ptr dst, unsigned char value, size_t bytes,
                          tl_error *err) {
  if (!h)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_memset8: NULL handle");
  if (bytes == 0)
    return TL_OK;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  CU_CHECK(h, h->MemsetD8((CUdeviceptr)dst, value, bytes), err, "cuMemsetD8");
  return TL_OK;
}

tl_status tl_cuda_stream_create(tl_cuda *h, tl_cuda_stream *out, tl_error *err) {
  if (!h || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_stream_create: NULL argument");
  *out = NULL;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  CUstream s = NULL;
  CU_CHECK(h, h->StreamCreate(&s, CU_STREAM_NON_BLOCKING), err, "cuStreamCreate");
  *out = s;
  return TL_OK;
}

void tl_cuda_stream_destroy(tl_cuda *h, tl_cuda_stream s) {
  if (!h || !s || bind(h, NULL) != TL_OK)
    return;
  h->StreamDestroy((CUstream)s);
}

tl_status tl_cuda_stream_sync(tl_cuda *h, tl_cuda_stream s, tl_error *err) {
  if (!h)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_stream_sync: NULL handle");
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  CU_CHECK(h, h->StreamSynchronize((CUstream)s), err, "cuStreamSynchronize");
  return TL_OK;
}

tl_status tl_cuda_sync(tl_cuda *h, tl_error *err) {
  if (!h)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_sync: NULL handle");
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  CU_CHECK(h, h->CtxSynchronize(), err, "cuCtxSynchronize");
  return TL_OK;
}

tl_status tl_cuda_event_create(tl_cuda *h, tl_cuda_event **out, tl_error *err) {
  if (!h || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_event_create: NULL argument");
  *out = NULL;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  tl_cuda_event *e = calloc(1, sizeof *e);
  if (!e)
    return tl_error_set(err, TL_NOMEM, "out of memory creating an event");
  CUresult r = h->EventCreate(&e->ev, CU_EVENT_DEFAULT);
  if (r != CUDA_SUCCESS) {
    free(e);
    return cu_fail(h, TL_DEVICE, r, err, "cuEventCreate");
  }
  e->h = h;
  *out = e;
  return TL_OK;
}

tl_status tl_cuda_event_record(tl_cuda_event *ev, tl_cuda_stream s, tl_error *err) {
  if (!ev)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_event_record: NULL event");
  tl_status st = bind(ev->h, err);
  if (st != TL_OK)
    return st;
  CU_CHECK(ev->h, ev->h->EventRecord(ev->ev, (CUstream)s), err, "cuEventRecord");
  return TL_OK;
}

tl_status tl_cuda_event_elapsed(tl_cuda_event *start, tl_cuda_event *end, float *ms, tl_error *err) {
  if (!start || !end || !ms || start->h != end->h)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cuda_event_elapsed: bad arguments");
  tl_cuda *h = end->h;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  CU_CHECK(h, h->EventSynchronize(end->ev), err, "cuEventSynchronize");
  CU_CHECK(h, h->EventElapsedTime(ms, start->ev, end->ev), err, "cuEventElapsedTime");
  return TL_OK;
}

void tl_cuda_event_destroy(tl_cuda_event *ev) {
  if (!ev)
    return;
  if (bind(ev->h, NULL) == TL_OK)
    ev->h->EventDestroy(ev->ev);
  free(ev);
}
