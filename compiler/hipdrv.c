/*
 * hipdrv.c - the HIP runtime through dlopen: the few types, enum values,
 * structures and entry points we use are declared here from ROCm 6.0's
 * public headers (include/hip/hip_runtime_api.h, driver_types.h and
 * hip_deprecated.h of ROCm/HIP, tag rocm-6.0.0; the values used are the
 * same in 6.2 and in 5.7), so nothing of ROCm is needed to build.
 *
 * ABI notes, ROCm 5 against ROCm 6:
 *   - hipDeviceProp_t changed layout in ROCm 6 (CUDA-like fields added and
 *     reordered; gcnArchName moved from offset 396 to 1160; the structure
 *     grew from 792 to 1472 bytes on LP64).  ROCm 6's header renames the
 *     call to hipGetDevicePropertiesR0600; libamdhip64.so.6 keeps exporting
 *     hipGetDeviceProperties and hipGetDevicePropertiesR0000 for the old
 *     layout (clr, hipamd/src/hip_device.cpp).  We call R0600 with the ROCm
 *     6 structure when the symbol exists, else the plain name with the ROCm
 *     5 structure; both copies are below, their sizes and offsets pinned by
 *     static assertions to what the real headers give.  The buffer handed
 *     to the runtime is larger than either structure, in case a runtime
 *     writes more than its header says.
 *   - hipDeviceAttributeGcnArchName is gone in ROCm 6 (its value is now
 *     hipDeviceAttributeUnused5), so the name can only come from the
 *     properties; the numeric attributes we read kept their values.
 *   - hipGetErrorName and hipGetErrorString return the text (unlike the
 *     CUDA driver's out-parameter form).
 *   - hipModuleLaunchKernel (clr, hip_module.cpp) refuses a launch whose
 *     grid[0] * block[0] is over 2^32 - 1 work-items and casts the other
 *     two dimensions to 32 bits; tl_hip_launch checks all three first.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipdrv.h"

/* ---- the runtime's ABI (ROCm 6.0 headers) ------------------------------ */

typedef int hipError_t;
typedef int hipDevice_t;
typedef void *hipDeviceptr_t;
typedef struct ihipModule_t *hipModule_t;
typedef struct ihipModuleSymbol_t *hipFunction_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;

enum {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorNotInitialized = 3,
  hipErrorInsufficientDriver = 35,
  hipErrorNoDevice = 100,
  hipErrorInvalidDevice = 101,
  hipErrorNotFound = 500,
};

enum { /* hipDeviceAttribute_t (the same values in ROCm 5.7 and 6.x) */
  hipDeviceAttributeMaxBlockDimX = 26,
  hipDeviceAttributeMaxBlockDimY = 27,
  hipDeviceAttributeMaxBlockDimZ = 28,
  hipDeviceAttributeMaxGridDimX = 29,
  hipDeviceAttributeMaxGridDimY = 30,
  hipDeviceAttributeMaxGridDimZ = 31,
  hipDeviceAttributeMaxThreadsPerBlock = 56,
  hipDeviceAttributeMultiprocessorCount = 63,
  hipDeviceAttributeMaxRegistersPerBlock = 71,
  hipDeviceAttributeMaxSharedMemoryPerBlock = 74,
  hipDeviceAttributeWarpSize = 87,
};

enum { /* hipFunction_attribute (driver_types.h) */
  HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  HIP_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
  HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  HIP_FUNC_ATTRIBUTE_NUM_REGS = 4,
  HIP_FUNC_ATTRIBUTE_PTX_VERSION = 5,
  HIP_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
  HIP_FUNC_ATTRIBUTE_CACHE_MODE_CA = 7,
  HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum { hipStreamNonBlocking = 1 };

typedef struct { /* hipDeviceArch_t: 17 one-bit flags */
  unsigned hasGlobalInt32Atomics : 1, hasGlobalFloatAtomicExch : 1, hasSharedInt32Atomics : 1,
      hasSharedFloatAtomicExch : 1, hasFloatAtomicAdd : 1, hasGlobalInt64Atomics : 1,
      hasSharedInt64Atomics : 1, hasDoubles : 1, hasWarpVote : 1, hasWarpBallot : 1,
      hasWarpShuffle : 1, hasFunnelShift : 1, hasThreadFenceSystem : 1, hasSyncThreadsExt : 1,
      hasSurfaceFuncs : 1, has3dGrid : 1, hasDynamicParallelism : 1;
} hip_arch_flags;

/* hipDeviceProp_tR0600: ROCm 6's hipDeviceProp_t, field for field. */
typedef struct hip_props_r0600 {
  char name[256];
  char uuid[16];
  char luid[8];
  unsigned int luidDeviceNodeMask;
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  size_t totalConstMem;
  int major;
  int minor;
  size_t textureAlignment;
  size_t texturePitchAlignment;
  int deviceOverlap;
  int multiProcessorCount;
  int kernelExecTimeoutEnabled;
  int integrated;
  int canMapHostMemory;
  int computeMode;
  int maxTexture1D;
  int maxTexture1DMipmap;
  int maxTexture1DLinear;
  int maxTexture2D[2];
  int maxTexture2DMipmap[2];
  int maxTexture2DLinear[3];
  int maxTexture2DGather[2];
  int maxTexture3D[3];
  int maxTexture3DAlt[3];
  int maxTextureCubemap;
  int maxTexture1DLayered[2];
  int maxTexture2DLayered[3];
  int maxTextureCubemapLayered[2];
  int maxSurface1D;
  int maxSurface2D[2];
  int maxSurface3D[3];
  int maxSurface1DLayered[2];
  int maxSurface2DLayered[3];
  int maxSurfaceCubemap;
  int maxSurfaceCubemapLayered[2];
  size_t surfaceAlignment;
  int concurrentKernels;
  int ECCEnabled;
  int pciBusID;
  int pciDeviceID;
  int pciDomainID;
  int tccDriver;
  int asyncEngineCount;
  int unifiedAddressing;
  int memoryClockRate;
  int memoryBusWidth;
  int l2CacheSize;
  int persistingL2CacheMaxSize;
  int maxThreadsPerMultiProcessor;
  int streamPrioritiesSupported;
  int globalL1CacheSupported;
  int localL1CacheSupported;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  int managedMemory;
  int isMultiGpuBoard;
  int multiGpuBoardGroupID;
  int hostNativeAtomicSupported;
  int singleToDoublePrecisionPerfRatio;
  int pageableMemoryAccess;
  int concurrentManagedAccess;
  int computePreemptionSupported;
  int canUseHostPointerForRegisteredMem;
  int cooperativeLaunch;
  int cooperativeMultiDeviceLaunch;
  size_t sharedMemPerBlockOptin;
  int pageableMemoryAccessUsesHostPageTables;
  int directManagedMemAccessFromHost;
  int maxBlocksPerMultiProcessor;
  int accessPolicyMaxWindowSize;
  size_t reservedSharedMemPerBlock;
  int hostRegisterSupported;
  int sparseHipArraySupported;
  int hostRegisterReadOnlySupported;
  int timelineSemaphoreInteropSupported;
  int memoryPoolsSupported;
  int gpuDirectRDMASupported;
  unsigned int gpuDirectRDMAFlushWritesOptions;
  int gpuDirectRDMAWritesOrdering;
  unsigned int memoryPoolSupportedHandleTypes;
  int deferredMappingHipArraySupported;
  int ipcEventSupported;
  int clusterLaunch;
  int unifiedFunctionPointers;
  int reserved[63];
  int hipReserved[32];
  char gcnArchName[256];
  size_t maxSharedMemoryPerMultiProcessor;
  int clockInstructionRate;
  hip_arch_flags arch;
  unsigned int *hdpMemFlushCntl;
  unsigned int *hdpRegFlushCntl;
  int cooperativeMultiDeviceUnmatchedFunc;
  int cooperativeMultiDeviceUnmatchedGridDim;
  int cooperativeMultiDeviceUnmatchedBlockDim;
  int cooperativeMultiDeviceUnmatchedSharedMem;
  int isLargeBar;
  int asicRevision;
} hip_props_r0600;

/* hipDeviceProp_tR0000: ROCm 5's hipDeviceProp_t (identical in 5.4 to 5.7,
 * and kept by ROCm 6 in hip_deprecated.h), the fields up to gcnArchName
 * and the rest as bytes. */
typedef struct hip_props_r0000 {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  int memoryClockRate;
  int memoryBusWidth;
  size_t totalConstMem;
  int major;
  int minor;
  int multiProcessorCount;
  int l2CacheSize;
  int maxThreadsPerMultiProcessor;
  int computeMode;
  int clockInstructionRate;
  hip_arch_flags arch;
  int concurrentKernels;
  int pciDomainID;
  int pciBusID;
  int pciDeviceID;
  size_t maxSharedMemoryPerMultiProcessor;
  int isMultiGpuBoard;
  int canMapHostMemory;
  int gcnArch;
  char gcnArchName[256];
  int integrated;
  int cooperativeLaunch;
  int cooperativeMultiDeviceLaunch;
  int maxTexture1DLinear;
  int maxTexture1D;
  int maxTexture2D[2];
  int maxTexture3D[3];
  unsigned int *hdpMemFlushCntl;
  unsigned int *hdpRegFlushCntl;
  size_t memPitch;
  size_t textureAlignment;
  size_t texturePitchAlignment;
  int kernelExecTimeoutEnabled;
  int ECCEnabled;
  int tccDriver;
  int cooperativeMultiDeviceUnmatchedFunc;
  int cooperativeMultiDeviceUnmatchedGridDim;
  int cooperativeMultiDeviceUnmatchedBlockDim;
  int cooperativeMultiDeviceUnmatchedSharedMem;
  int isLargeBar;
  int asicRevision;
  int managedMemory;
  int directManagedMemAccessFromHost;
  int concurrentManagedAccess;
  int pageableMemoryAccess;
  int pageableMemoryAccessUsesHostPageTables;
} hip_props_r0000;

/* Sizes and offsets the real headers give on LP64 (computed with the
 * structures extracted from rocm-6.0.0 and rocm-6.2.2's headers). */
#if defined(__LP64__)
_Static_assert(sizeof(hip_props_r0600) == 1472, "hipDeviceProp_tR0600 is 1472 bytes");
_Static_assert(offsetof(hip_props_r0600, totalGlobalMem) == 288, "R0600 totalGlobalMem at 288");
_Static_assert(offsetof(hip_props_r0600, gcnArchName) == 1160, "R0600 gcnArchName at 1160");
_Static_assert(sizeof(hip_props_r0000) == 792, "hipDeviceProp_tR0000 is 792 bytes");
_Static_assert(offsetof(hip_props_r0000, totalGlobalMem) == 256, "R0000 totalGlobalMem at 256");
_Static_assert(offsetof(hip_props_r0000, gcnArchName) == 396, "R0000 gcnArchName at 396");
#endif

/* What the runtime writes into: either layout, with room to spare. */
typedef union hip_props_buf {
  hip_props_r0600 r0600;
  hip_props_r0000 r0000;
  unsigned char bytes[4096];
} hip_props_buf;

/* ---- the entry points ------------------------------------------------- */

/* X(field, symbol, return type, arguments) */
#define HIP_FUNCS(X)                                                                         \
  X(GetErrorName, "hipGetErrorName", const char *, (hipError_t))                             \
  X(GetErrorString, "hipGetErrorString", const char *, (hipError_t))                         \
  X(Init, "hipInit", hipError_t, (unsigned))                                                 \
  X(RuntimeGetVersion, "hipRuntimeGetVersion", hipError_t, (int *))                          \
  X(GetDeviceCount, "hipGetDeviceCount", hipError_t, (int *))                                \
  X(SetDevice, "hipSetDevice", hipError_t, (int))                                            \
  X(DeviceGetAttribute, "hipDeviceGetAttribute", hipError_t, (int *, int, int))              \
  X(DeviceSynchronize, "hipDeviceSynchronize", hipError_t, (void))                           \
  X(ModuleLoadData, "hipModuleLoadData", hipError_t, (hipModule_t *, const void *))          \
  X(ModuleUnload, "hipModuleUnload", hipError_t, (hipModule_t))                              \
  X(ModuleGetFunction, "hipModuleGetFunction", hipError_t,                                   \
    (hipFunction_t *, hipModule_t, const char *))                                            \
  X(FuncGetAttribute, "hipFuncGetAttribute", hipError_t, (int *, int, hipFunction_t))        \
  X(ModuleLaunchKernel, "hipModuleLaunchKernel", hipError_t,                                 \
    (hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,    \
     hipStream_t, void **, void **))                                                         \
  X(Malloc, "hipMalloc", hipError_t, (void **, size_t))                                      \
  X(Free, "hipFree", hipError_t, (void *))                                                   \
  X(MemcpyHtoD, "hipMemcpyHtoD", hipError_t, (hipDeviceptr_t, void *, size_t))               \
  X(MemcpyDtoH, "hipMemcpyDtoH", hipError_t, (void *, hipDeviceptr_t, size_t))               \
  X(MemsetD8, "hipMemsetD8", hipError_t, (hipDeviceptr_t, unsigned char, size_t))            \
  X(StreamCreateWithFlags, "hipStreamCreateWithFlags", hipError_t, (hipStream_t *, unsigned)) \
  X(StreamDestroy, "hipStreamDestroy", hipError_t, (hipStream_t))                            \
  X(StreamSynchronize, "hipStreamSynchronize", hipError_t, (hipStream_t))                    \
  X(EventCreate, "hipEventCreate", hipError_t, (hipEvent_t *))                               \
  X(EventRecord, "hipEventRecord", hipError_t, (hipEvent_t, hipStream_t))                    \
  X(EventSynchronize, "hipEventSynchronize", hipError_t, (hipEvent_t))                       \
  X(EventElapsedTime, "hipEventElapsedTime", hipError_t, (float *, hipEvent_t, hipEvent_t))  \
  X(EventDestroy, "hipEventDestroy", hipError_t, (hipEvent_t))

typedef hipError_t (*props_fn)(void *, int);

struct tl_hip {
  void *lib;
  int dev;
  tl_hip_device info;
#define HIP_FIELD_(field, sym, ret, args) ret(*field) args;
  HIP_FUNCS(HIP_FIELD_)
#undef HIP_FIELD_
};

struct tl_hip_func {
  tl_hip_module *mod;
  hipFunction_t fn;
  int static_smem; /* HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, read at lookup */
  int max_threads; /* HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
  char *name;
  tl_hip_func *next;
};

struct tl_hip_module {
  tl_hip *h;
  hipModule_t mod;
  pthread_mutex_t lock; /* guards the function list */
  tl_hip_func *funcs;
};

struct tl_hip_event {
  tl_hip *h;
  hipEvent_t ev;
};

/* ---- errors ----------------------------------------------------------- */

/* Fills err for a failed runtime call and returns `code`. */
static tl_status hip_fail(const tl_hip *h, tl_status code, hipError_t r, tl_error *err,
                          const char *what) {
  const char *name = h && h->GetErrorName ? h->GetErrorName(r) : NULL;
  const char *text = h && h->GetErrorString ? h->GetErrorString(r) : NULL;
  if (!name || !*name)
    return tl_error_set(err, code, "%s: HIP error %d", what, r);
  return tl_error_set(err, code, "%s: %.100s (%.200s)", what, name,
                      text && *text ? text : "no description");
}

#define HIP_CHECK(h, call, err, what)                                                        \
  do {                                                                                       \
    hipError_t r_ = (call);                                                                  \
    if (r_ != hipSuccess)                                                                    \
      return hip_fail((h), TL_DEVICE, r_, (err), (what));                                    \
  } while (0)

/* Makes the handle's device current on this thread. */
static tl_status bind(tl_hip *h, tl_error *err) {
  HIP_CHECK(h, h->SetDevice(h->dev), err, "hipSetDevice");
  return TL_OK;
}

/* ---- architectures ----------------------------------------------------- */

/* EF_AMDGPU_MACH_AMDGCN_* (llvm/BinaryFormat/ELF.h; checked against what
 * clang 19 writes for each, gfx950 against LLVM's tests). */
static const struct {
  const char *arch;
  int mach;
} machs[] = {
    {"gfx900", 0x2c},  {"gfx906", 0x2f},  {"gfx908", 0x30},  {"gfx90a", 0x3f},
    {"gfx940", 0x40},  {"gfx941", 0x4b},  {"gfx942", 0x4c},  {"gfx950", 0x4f},
    {"gfx1030", 0x36}, {"gfx1100", 0x41}, {"gfx1101", 0x46}, {"gfx1102", 0x47},
    {"gfx1200", 0x48}, {"gfx1201", 0x4e},
};

int tl_hip_mach_of(const char *arch) {
  for (size_t i = 0; arch && i < sizeof machs / sizeof *machs; i++)
    if (strcmp(machs[i].arch, arch) == 0)
      return machs[i].mach;
  return -1;
}

const char *tl_hip_arch_of_mach(int mach) {
  for (size_t i = 0; i < sizeof machs / sizeof *machs; i++)
    if (machs[i].mach == mach)
      return machs[i].arch;
  return NULL;
}

/* ---- opening ---------------------------------------------------------- */

static const char *resolve(tl_hip *h) {
#define HIP_RESOLVE_(field, sym, ret, args)                                                  \
  *(void **)&h->field = dlsym(h->lib, sym);                                                  \
  if (!h->field)                                                                             \
    return sym;
  HIP_FUNCS(HIP_RESOLVE_)
#undef HIP_RESOLVE_
  return NULL;
}

static int attr(tl_hip *h, int which) {
  int v = 0;
  if (h->DeviceGetAttribute(&v, which, h->dev) != hipSuccess)
    return 0;
  return v;
}

static const char *const default_libs[] = {
    "libamdhip64.so.6",
    "libamdhip64.so.5",
    "libamdhip64.so",
    "/opt/rocm/lib/libamdhip64.so.6",
    "/opt/rocm/lib/libamdhip64.so.5",
    "/opt/rocm/lib/libamdhip64.so",
};

/* Opens the first library that loads.  On failure fills err: every name
 * tried when none exists, else the first that exists but does not load. */
static tl_status open_library(tl_hip *h, tl_error *err) {
  const char *env = getenv("TL_LIBHIP");
  const char *one[1] = {env};
  const char *const *names = env && *env ? one : default_libs;
  size_t count = env && *env ? 1 : sizeof default_libs / sizeof *default_libs;
  char tried[512] = "", why[384] = "";
  const char *bad = NULL;
  for (size_t i = 0; i < count; i++) {
    /* RTLD_NODELETE: the runtime is never unmapped (it keeps threads and
     * process-wide state); RTLD_LOCAL keeps its symbols out of ours. */
    h->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (h->lib) {
      snprintf(h->info.library, sizeof h->info.library, "%s", names[i]);
      return TL_OK;
    }
    const char *e = dlerror();
    if (!bad && e && !strstr(e, "No such file")) {
      bad = names[i];
      snprintf(why, sizeof why, "%s", e);
    }
    size_t l = strlen(tried);
    snprintf(tried + l, sizeof tried - l, "%s%s", l ? ", " : "", names[i]);
  }
  if (bad)
    return tl_error_set(err, TL_NO_DEVICE, "no HIP runtime (%s cannot be loaded: %s)", bad, why);
  return tl_error_set(err, TL_NO_DEVICE, "no HIP runtime (%s not found)", tried);
}

/* Reads name and architecture from the properties structure (see the top
 * of the file for the two layouts). */
static tl_status read_props(tl_hip *h, tl_error *err) {
  tl_hip_device *d = &h->info;
  props_fn r0600 = NULL, r0000 = NULL;
  *(void **)&r0600 = dlsym(h->lib, "hipGetDevicePropertiesR0600");
  if (!r0600)
    *(void **)&r0000 = dlsym(h->lib, "hipGetDeviceProperties");
  if (!r0600 && !r0000)
    return tl_error_set(err, TL_NO_DEVICE,
                        "no usable HIP runtime (%s lacks hipGetDevicePropertiesR0600 and "
                        "hipGetDeviceProperties)",
                        d->library);
  hip_props_buf *p = calloc(1, sizeof *p);
  if (!p)
    return tl_error_set(err, TL_NOMEM, "out of memory opening the HIP runtime");
  hipError_t r = r0600 ? r0600(p, h->dev) : r0000(p, h->dev);
  if (r != hipSuccess) {
    free(p);
    return hip_fail(h, TL_DEVICE, r, err,
                    r0600 ? "hipGetDevicePropertiesR0600" : "hipGetDeviceProperties");
  }
  const char *name = r0600 ? p->r0600.name : p->r0000.name;
  const char *arch = r0600 ? p->r0600.gcnArchName : p->r0000.gcnArchName;
  d->props_layout = r0600 ? 600 : 0;
  snprintf(d->name, sizeof d->name, "%.*s", (int)strnlen(name, 255), name);
  snprintf(d->target_id, sizeof d->target_id, "%.*s", (int)strnlen(arch, 255), arch);
  d->total_memory = r0600 ? p->r0600.totalGlobalMem : p->r0000.totalGlobalMem;
  free(p);
  /* "gfx90a:sramecc+:xnack-": the processor is what comes before ':'. */
  size_t n = strcspn(d->target_id, ":");
  int ok = n >= 4 && n < TL_HIP_ARCH_MAX && strncmp(d->target_id, "gfx", 3) == 0;
  for (size_t i = 3; ok && i < n; i++)
    ok = (d->target_id[i] >= '0' && d->target_id[i] <= '9') ||
         (d->target_id[i] >= 'a' && d->target_id[i] <= 'z');
  if (!ok)
    return tl_error_set(err, TL_DEVICE,
                        "HIP device %d reports no architecture name (gcnArchName '%.64s' from %s "
                        "of %s)",
                        h->dev, d->target_id,
                        r0600 ? "hipGetDevicePropertiesR0600" : "hipGetDeviceProperties",
                        d->library);
  memcpy(d->arch, d->target_id, n);
  d->arch[n] = 0;
  if (!d->name[0])
    snprintf(d->name, sizeof d->name, "AMD GPU %d (%s)", h->dev, d->arch);
  return TL_OK;
}

tl_status tl_hip_open(int ordinal, tl_hip **out, tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_open: NULL argument");
  *out = NULL;
  if (ordinal < 0)
    return tl_error_set(err, TL_INVALID_ARG, "device ordinal %d is negative", ordinal);
  tl_hip *h = calloc(1, sizeof *h);
  if (!h)
    return tl_error_set(err, TL_NOMEM, "out of memory opening the HIP runtime");
  tl_status st = open_library(h, err);
  if (st != TL_OK) {
    free(h);
    return st;
  }
  const char *libname = h->info.library;
  const char *missing = resolve(h);
  if (missing) {
    st = tl_error_set(err, TL_NO_DEVICE, "no usable HIP runtime (%s lacks %s)", libname, missing);
    goto fail;
  }
  hipError_t r = h->Init(0);
  if (r == hipErrorNoDevice || r == hipErrorInvalidDevice) {
    st = tl_error_set(err, TL_NO_DEVICE, "no HIP device (%s)", libname);
    goto fail;
  }
  if (r != hipSuccess) {
    st = hip_fail(h, TL_NO_DEVICE, r, err, "no HIP device: the runtime did not initialise: hipInit");
    goto fail;
  }
  int count = 0;
  r = h->GetDeviceCount(&count);
  if (r != hipSuccess || count <= 0) {
    st = tl_error_set(err, TL_NO_DEVICE, "no HIP device (%s)", libname);
    goto fail;
  }
  if (ordinal >= count) {
    st = tl_error_set(err, TL_INVALID_ARG, "there is no HIP device %d (%d device%s: 0 to %d)",
                      ordinal, count, count == 1 ? "" : "s", count - 1);
    goto fail;
  }
  h->dev = ordinal;
  if ((st = bind(h, err)) != TL_OK || (st = read_props(h, err)) != TL_OK)
    goto fail;
  tl_hip_device *d = &h->info;
  d->ordinal = ordinal;
  if (h->RuntimeGetVersion(&d->runtime_version) != hipSuccess)
    d->runtime_version = 0;
  d->multiprocessors = attr(h, hipDeviceAttributeMultiprocessorCount);
  d->max_threads_per_block = attr(h, hipDeviceAttributeMaxThreadsPerBlock);
  d->max_block_dim[0] = attr(h, hipDeviceAttributeMaxBlockDimX);
  d->max_block_dim[1] = attr(h, hipDeviceAttributeMaxBlockDimY);
  d->max_block_dim[2] = attr(h, hipDeviceAttributeMaxBlockDimZ);
  d->max_grid_dim[0] = attr(h, hipDeviceAttributeMaxGridDimX);
  d->max_grid_dim[1] = attr(h, hipDeviceAttributeMaxGridDimY);
  d->max_grid_dim[2] = attr(h, hipDeviceAttributeMaxGridDimZ);
  d->max_shared_per_block = attr(h, hipDeviceAttributeMaxSharedMemoryPerBlock);
  d->max_registers_per_block = attr(h, hipDeviceAttributeMaxRegistersPerBlock);
  d->warp_size = attr(h, hipDeviceAttributeWarpSize);
  *out = h;
  return TL_OK;
fail:
  /* RTLD_NODELETE keeps the mapping; dlclose only drops our reference. */
  dlclose(h->lib);
  free(h);
  return st;
}

void tl_hip_close(tl_hip *h) {
  if (!h)
    return;
  dlclose(h->lib);
  free(h);
}

const char *tl_hip_arch(const tl_hip *h) { return h ? h->info.arch : ""; }

const tl_hip_device *tl_hip_device_info(const tl_hip *h) { return h ? &h->info : NULL; }

/* ---- code objects ------------------------------------------------------- */

static uint64_t rd(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* Whether [off, off + count * size) lies within n bytes (no overflow). */
static int within(uint64_t off, uint64_t count, uint64_t size, size_t n) {
  if (count && size > UINT64_MAX / count)
    return 0;
  uint64_t len = count * size;
  return off <= n && len <= n - off;
}

/* Checks that image is a linked AMDGPU code object lying within its n
 * bytes, for architecture `arch`.  Fills err and returns its code if not. */
static tl_status check_code_object(const unsigned char *b, size_t n, const char *arch,
                                   tl_error *err) {
  enum { EM_AMDGPU = 224, EM_CUDA = 190, ET_REL = 1, ET_DYN = 3, SHT_NOBITS = 8 };
  if (n >= 24 && memcmp(b, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0)
    return tl_error_set(err, TL_UNSUPPORTED,
                        "the image is a clang offload bundle, not a code object (the service "
                        "serves raw code objects; unbundle it for %s first)",
                        arch);
  if (n < 64 || memcmp(b, "\177ELF", 4) != 0)
    return tl_error_set(err, TL_UNSUPPORTED,
                        "the image (%zu bytes) is not an ELF code object%s", n,
                        n >= 9 && memcmp(b, "//", 2) == 0 ? " (it looks like PTX text)" : "");
  if (b[4] != 2 || b[5] != 1)
    return tl_error_set(err, TL_UNSUPPORTED, "the image is not a little-endian ELF64 code object");
  unsigned type = (unsigned)rd(b + 16, 2), machine = (unsigned)rd(b + 18, 2);
  if (machine != EM_AMDGPU)
    return tl_error_set(err, TL_UNSUPPORTED,
                        "the image is an ELF for machine %u%s, not an AMDGPU code object (%d)",
                        machine, machine == EM_CUDA ? " (a CUDA cubin)" : "", EM_AMDGPU);
  if (type != ET_DYN)
    return tl_error_set(err, TL_UNSUPPORTED,
                        "the code object is an ELF of type %u%s, not a linked one (ET_DYN, as "
                        "ld.lld -shared makes)",
                        type, type == ET_REL ? " (a relocatable object)" : "");
  uint64_t phoff = rd(b + 32, 8), shoff = rd(b + 40, 8);
  unsigned flags = (unsigned)rd(b + 48, 4);
  unsigned phentsize = (unsigned)rd(b + 54, 2), phnum = (unsigned)rd(b + 56, 2);
  unsigned shentsize = (unsigned)rd(b + 58, 2), shnum = (unsigned)rd(b + 60, 2);
  if ((phnum && phentsize < 56) || (shnum && shentsize < 64) ||
      !within(phoff, phnum, phentsize, n) || !within(shoff, shnum, shentsize, n))
    return tl_error_set(err, TL_CORRUPT,
                        "the code object's ELF headers reach past its %zu bytes (truncated?)", n);
  for (unsigned i = 0; i < phnum; i++) {
    const unsigned char *ph = b + phoff + (uint64_t)i * phentsize;
    if (!within(rd(ph + 8, 8), 1, rd(ph + 32, 8), n))
      return tl_error_set(err, TL_CORRUPT,
                          "program header %u of the code object reaches past its %zu bytes", i, n);
  }
  for (unsigned i = 0; i < shnum; i++) {
    const unsigned char *sh = b + shoff + (uint64_t)i * shentsize;
    if (rd(sh + 4, 4) != SHT_NOBITS && !within(rd(sh + 24, 8), 1, rd(sh + 32, 8), n))
      return tl_error_set(err, TL_CORRUPT, "section %u of the code object reaches past its %zu bytes",
                          i, n);
  }
  const char *built = tl_hip_arch_of_mach((int)(flags & 0xff));
  if (built && strcmp(built, arch) != 0)
    return tl_error_set(err, TL_UNSUPPORTED,
                        "the code object is for %s; this GPU is %s", built, arch);
  return TL_OK;
}

tl_status tl_hip_load(tl_hip *h, const void *image, size_t n, tl_hip_module **out,
                      tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_load: NULL argument");
  *out = NULL;
  if (!h || !image || n == 0)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_load: no image given");
  if (n > TL_HIP_MAX_IMAGE)
    return tl_error_set(err, TL_TOO_LARGE, "image of %zu bytes is over the limit of %u", n,
                        TL_HIP_MAX_IMAGE);
  tl_status st = check_code_object(image, n, h->info.arch, err);
  if (st != TL_OK)
    return st;
  if ((st = bind(h, err)) != TL_OK)
    return st;
  tl_hip_module *m = calloc(1, sizeof *m);
  if (!m)
    return tl_error_set(err, TL_NOMEM, "out of memory loading a module");
  hipError_t r = h->ModuleLoadData(&m->mod, image);
  if (r != hipSuccess) {
    char what[128];
    snprintf(what, sizeof what, "hipModuleLoadData (code object of %zu bytes, on %s)", n,
             h->info.arch);
    free(m);
    return hip_fail(h, TL_DEVICE, r, err, what);
  }
  m->h = h;
  pthread_mutex_init(&m->lock, NULL);
  *out = m;
  return TL_OK;
}

void tl_hip_unload(tl_hip_module *m) {
  if (!m)
    return;
  for (tl_hip_func *f = m->funcs, *next; f; f = next) {
    next = f->next;
    free(f->name);
    free(f);
  }
  if (bind(m->h, NULL) == TL_OK)
    m->h->ModuleUnload(m->mod);
  pthread_mutex_destroy(&m->lock);
  free(m);
}

tl_status tl_hip_function(tl_hip_module *m, const char *name, tl_hip_func **out,
                          tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_function: NULL argument");
  *out = NULL;
  if (!m || !name || !*name)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_function: no module or name");
  if (strlen(name) > 4096)
    return tl_error_set(err, TL_LIMIT, "kernel name longer than 4096 bytes");
  tl_hip *h = m->h;
  pthread_mutex_lock(&m->lock);
  for (tl_hip_func *f = m->funcs; f; f = f->next) {
    if (strcmp(f->name, name) == 0) {
      pthread_mutex_unlock(&m->lock);
      *out = f;
      return TL_OK;
    }
  }
  tl_status st = bind(h, err);
  hipFunction_t fn = NULL;
  if (st == TL_OK) {
    hipError_t r = h->ModuleGetFunction(&fn, m->mod, name);
    if (r == hipErrorNotFound)
      st = tl_error_set(err, TL_NOT_FOUND, "the module has no kernel named '%.200s'", name);
    else if (r != hipSuccess)
      st = hip_fail(h, TL_DEVICE, r, err, "hipModuleGetFunction");
  }
  tl_hip_func *f = NULL;
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
    if (h->FuncGetAttribute(&f->static_smem, HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn) != hipSuccess)
      f->static_smem = 0;
    if (h->FuncGetAttribute(&f->max_threads, HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn) !=
        hipSuccess)
      f->max_threads = 0;
    f->next = m->funcs;
    m->funcs = f;
    *out = f;
  }
  pthread_mutex_unlock(&m->lock);
  return st;
}

tl_status tl_hip_function_attrs(tl_hip_func *fn, tl_hip_func_attrs *out, tl_error *err) {
  if (!fn || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_function_attrs: NULL argument");
  tl_hip *h = fn->mod->h;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  static const struct {
    int attr;
    size_t off;
  } rows[] = {
      {HIP_FUNC_ATTRIBUTE_NUM_REGS, offsetof(tl_hip_func_attrs, num_regs)},
      {HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, offsetof(tl_hip_func_attrs, local_bytes)},
      {HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, offsetof(tl_hip_func_attrs, shared_bytes)},
      {HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, offsetof(tl_hip_func_attrs, max_threads)},
      {HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
       offsetof(tl_hip_func_attrs, max_dynamic_shared)},
      {HIP_FUNC_ATTRIBUTE_BINARY_VERSION, offsetof(tl_hip_func_attrs, binary_version)},
  };
  tl_hip_func_attrs a;
  memset(&a, 0, sizeof a);
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    int v = 0;
    HIP_CHECK(h, h->FuncGetAttribute(&v, rows[i].attr, fn->fn), err, "hipFuncGetAttribute");
    memcpy((char *)&a + rows[i].off, &v, sizeof v);
  }
  *out = a;
  return TL_OK;
}

tl_status tl_hip_launch(tl_hip_func *fn, const unsigned grid[3], const unsigned block[3],
                        unsigned dyn_smem, tl_hip_stream stream, void **args, tl_error *err) {
  if (!fn || !grid || !block)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_launch: NULL argument");
  tl_hip *h = fn->mod->h;
  const tl_hip_device *d = &h->info;
  static const char dims[] = "xyz";
  for (int i = 0; i < 3; i++)
    if (grid[i] == 0 || block[i] == 0)
      return tl_error_set(err, TL_INVALID_ARG,
                          "launch of %s with a zero dimension: grid %ux%ux%u, block %ux%ux%u",
                          fn->name, grid[0], grid[1], grid[2], block[0], block[1], block[2]);
  unsigned long long threads = (unsigned long long)block[0] * block[1] * block[2];
  unsigned long long limit = (unsigned long long)d->max_threads_per_block;
  if (fn->max_threads > 0 && (limit == 0 || (unsigned long long)fn->max_threads < limit))
    limit = (unsigned long long)fn->max_threads;
  if (limit > 0 && threads > limit)
    return tl_error_set(err, TL_LIMIT,
                        "block of %llu threads for %s is over its limit of %llu by %llu", threads,
                        fn->name, limit, threads - limit);
  for (int i = 0; i < 3; i++) {
    if (d->max_block_dim[i] > 0 && block[i] > (unsigned)d->max_block_dim[i])
      return tl_error_set(err, TL_LIMIT, "block dimension %c of %s is %u, over the device's %d by %u",
                          dims[i], fn->name, block[i], d->max_block_dim[i],
                          block[i] - (unsigned)d->max_block_dim[i]);
    unsigned long long items = (unsigned long long)grid[i] * block[i];
    if (items > 0xffffffffull)
      return tl_error_set(err, TL_LIMIT,
                          "grid dimension %c of %s spans %llu work-items (%u blocks of %u), over "
                          "the 4294967295 an AMD dispatch can count by %llu",
                          dims[i], fn->name, items, grid[i], block[i], items - 0xffffffffull);
  }
  unsigned long long smem = (unsigned long long)dyn_smem + (unsigned)fn->static_smem;
  unsigned long long smax = (unsigned long long)d->max_shared_per_block;
  if (smax > 0 && smem > smax)
    return tl_error_set(err, TL_LIMIT,
                        "%s needs %llu bytes of LDS (%d static + %u dynamic), over the "
                        "device's %llu per workgroup by %llu",
                        fn->name, smem, fn->static_smem, dyn_smem, smax, smem - smax);
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  HIP_CHECK(h,
            h->ModuleLaunchKernel(fn->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                  dyn_smem, (hipStream_t)stream, args, NULL),
            err, "hipModuleLaunchKernel");
  return TL_OK;
}

/* ---- memory, streams, events ------------------------------------------ */

static void *as_ptr(tl_hip_ptr p) { return (void *)(uintptr_t)p; }

tl_status tl_hip_alloc(tl_hip *h, size_t bytes, tl_hip_ptr *out, tl_error *err) {
  if (!h || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_alloc: NULL argument");
  *out = 0;
  if (bytes == 0)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_alloc: zero bytes");
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  void *p = NULL;
  hipError_t r = h->Malloc(&p, bytes);
  if (r != hipSuccess) {
    char what[96];
    snprintf(what, sizeof what, "hipMalloc of %zu bytes", bytes);
    return hip_fail(h, TL_DEVICE, r, err, what);
  }
  *out = (tl_hip_ptr)(uintptr_t)p;
  return TL_OK;
}

void tl_hip_free(tl_hip *h, tl_hip_ptr p) {
  if (!h || !p || bind(h, NULL) != TL_OK)
    return;
  h->Free(as_ptr(p));
}

tl_status tl_hip_upload(tl_hip *h, tl_hip_ptr dst, const void *src, size_t bytes, tl_error *err) {
  if (!h || (!src && bytes))
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_upload: NULL argument");
  if (bytes == 0)
    return TL_OK;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  /* hipMemcpyHtoD's source is not const in the header; it is only read. */
  HIP_CHECK(h, h->MemcpyHtoD(as_ptr(dst), (void *)(uintptr_t)src, bytes), err, "hipMemcpyHtoD");
  return TL_OK;
}

tl_status tl_hip_download(tl_hip *h, void *dst, tl_hip_ptr src, size_t bytes, tl_error *err) {
  if (!h || (!dst && bytes))
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_download: NULL argument");
  if (bytes == 0)
    return TL_OK;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  HIP_CHECK(h, h->MemcpyDtoH(dst, as_ptr(src), bytes), err, "hipMemcpyDtoH");
  return TL_OK;
}

tl_status tl_hip_memset8(tl_hip *h, tl_hip_ptr dst, unsigned char value, size_t bytes,
                         tl_error *err) {
  if (!h)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_memset8: NULL handle");
  if (bytes == 0)
    return TL_OK;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  HIP_CHECK(h, h->MemsetD8(as_ptr(dst), value, bytes), err, "hipMemsetD8");
  return TL_OK;
}

tl_status tl_hip_stream_create(tl_hip *h, tl_hip_stream *out, tl_error *err) {
  if (!h || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_stream_create: NULL argument");
  *out = NULL;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  hipStream_t s = NULL;
  HIP_CHECK(h, h->StreamCreateWithFlags(&s, hipStreamNonBlocking), err, "hipStreamCreateWithFlags");
  *out = s;
  return TL_OK;
}

void tl_hip_stream_destroy(tl_hip *h, tl_hip_stream s) {
  if (!h || !s || bind(h, NULL) != TL_OK)
    return;
  h->StreamDestroy((hipStream_t)s);
}

tl_status tl_hip_stream_sync(tl_hip *h, tl_hip_stream s, tl_error *err) {
  if (!h)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_stream_sync: NULL handle");
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  HIP_CHECK(h, h->StreamSynchronize((hipStream_t)s), err, "hipStreamSynchronize");
  return TL_OK;
}

tl_status tl_hip_sync(tl_hip *h, tl_error *err) {
  if (!h)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_sync: NULL handle");
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  HIP_CHECK(h, h->DeviceSynchronize(), err, "hipDeviceSynchronize");
  return TL_OK;
}

tl_status tl_hip_event_create(tl_hip *h, tl_hip_event **out, tl_error *err) {
  if (!h || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_event_create: NULL argument");
  *out = NULL;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  tl_hip_event *e = calloc(1, sizeof *e);
  if (!e)
    return tl_error_set(err, TL_NOMEM, "out of memory creating an event");
  hipError_t r = h->EventCreate(&e->ev);
  if (r != hipSuccess) {
    free(e);
    return hip_fail(h, TL_DEVICE, r, err, "hipEventCreate");
  }
  e->h = h;
  *out = e;
  return TL_OK;
}

tl_status tl_hip_event_record(tl_hip_event *ev, tl_hip_stream s, tl_error *err) {
  if (!ev)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_event_record: NULL event");
  tl_status st = bind(ev->h, err);
  if (st != TL_OK)
    return st;
  HIP_CHECK(ev->h, ev->h->EventRecord(ev->ev, (hipStream_t)s), err, "hipEventRecord");
  return TL_OK;
}

tl_status tl_hip_event_elapsed(tl_hip_event *start, tl_hip_event *end, float *ms, tl_error *err) {
  if (!start || !end || !ms || start->h != end->h)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hip_event_elapsed: bad arguments");
  tl_hip *h = end->h;
  tl_status st = bind(h, err);
  if (st != TL_OK)
    return st;
  HIP_CHECK(h, h->EventSynchronize(end->ev), err, "hipEventSynchronize");
  HIP_CHECK(h, h->EventElapsedTime(ms, start->ev, end->ev), err, "hipEventElapsedTime");
  return TL_OK;
}

void tl_hip_event_destroy(tl_hip_event *ev) {
  if (!ev)
    return;
  if (bind(ev->h, NULL) == TL_OK)
    ev->h->EventDestroy(ev->ev);
  free(ev);
}
