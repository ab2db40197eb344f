/*
 * hipdrv.c - the HIP entry of gpudrv.h's driver table: the HIP runtime
 * through dlopen, with the check of a code object before it is loaded.
 * Argument checks, module bookkeeping and launch checks are gpudrv.c's.
 * The few types, enum values,
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elf.h"
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

typedef struct hip_rt {
  void *lib;
  int dev;
  tl_gpu_device *info; /* the handle's, filled at open */
#define HIP_FIELD_(field, sym, ret, args) ret(*field) args;
  HIP_FUNCS(HIP_FIELD_)
#undef HIP_FIELD_
} hip_rt;

/* ---- errors ----------------------------------------------------------- */

/* Fills err for a failed runtime call and returns `code`. */
static tl_status hip_fail(const hip_rt *h, tl_status code, hipError_t r, tl_error *err, const char *what) {
  const char *name = h && h->GetErrorName ? h->GetErrorName(r) : NULL;
  const char *text = h && h->GetErrorString ? h->GetErrorString(r) : NULL;
  if (!name || !*name)
    return tl_error_set(err, code, "%s: HIP error %d", what, r);
  return tl_error_set(err, code, "%s: %.100s (%.200s)", what, name, text && *text ? text : "no description");
}

/* Returns TL_OK, or the failure of the call `what`. */
static tl_status hip_check(const hip_rt *h, hipError_t r, tl_error *err, const char *what) {
  return r == hipSuccess ? TL_OK : hip_fail(h, TL_DEVICE, r, err, what);
}

/* Makes the handle's device current on this thread. */
static tl_status hip_bind(void *rt, tl_error *err) {
  hip_rt *h = rt;
  return hip_check(h, h->SetDevice(h->dev), err, "hipSetDevice");
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

static const char *resolve(hip_rt *h) {
#define HIP_RESOLVE_(field, sym, ret, args)                                                  \
  *(void **)&h->field = dlsym(h->lib, sym);                                                  \
  if (!h->field)                                                                             \
    return sym;
  HIP_FUNCS(HIP_RESOLVE_)
#undef HIP_RESOLVE_
  return NULL;
}

static int attr(hip_rt *h, int which) {
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
static tl_status open_library(hip_rt *h, tl_error *err) {
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
      snprintf(h->info->library, sizeof h->info->library, "%s", names[i]);
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
static tl_status read_props(hip_rt *h, tl_error *err) {
  tl_gpu_device *d = h->info;
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
  int ok = n >= 4 && n < TL_GPU_ARCH_MAX && strncmp(d->target_id, "gfx", 3) == 0;
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
  memcpy(d->arch_name, d->target_id, n);
  d->arch_name[n] = 0;
  if (!d->name[0])
    snprintf(d->name, sizeof d->name, "AMD GPU %d (%s)", h->dev, d->arch_name);
  return TL_OK;
}

/* Initialises the runtime and selects the device; fills h->info. */
static tl_status hip_start(hip_rt *h, int ordinal, tl_error *err) {
  const char *libname = h->info->library;
  const char *missing = resolve(h);
  if (missing)
    return tl_error_set(err, TL_NO_DEVICE, "no usable HIP runtime (%s lacks %s)", libname, missing);
  hipError_t r = h->Init(0);
  if (r == hipErrorNoDevice || r == hipErrorInvalidDevice)
    return tl_error_set(err, TL_NO_DEVICE, "no HIP device (%s)", libname);
  if (r != hipSuccess)
    return hip_fail(h, TL_NO_DEVICE, r, err, "no HIP device: the runtime did not initialise: hipInit");
  int count = 0;
  r = h->GetDeviceCount(&count);
  if (r != hipSuccess || count <= 0)
    return tl_error_set(err, TL_NO_DEVICE, "no HIP device (%s)", libname);
  if (ordinal >= count)
    return tl_error_set(err, TL_INVALID_ARG, "there is no HIP device %d (%d device%s: 0 to %d)", ordinal, count,
                        count == 1 ? "" : "s", count - 1);
  h->dev = ordinal;
  tl_status st;
  if ((st = hip_bind(h, err)) != TL_OK || (st = read_props(h, err)) != TL_OK)
    return st;
  tl_gpu_device *d = h->info;
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
  d->max_shared_per_block_optin = d->max_shared_per_block; /* no opt-in on AMD */
  d->max_registers_per_block = attr(h, hipDeviceAttributeMaxRegistersPerBlock);
  d->warp_size = attr(h, hipDeviceAttributeWarpSize);
  return TL_OK;
}

static tl_status hip_open(int ordinal, void **rt, tl_gpu_device *info, tl_error *err) {
  hip_rt *h = calloc(1, sizeof *h);
  if (!h)
    return tl_error_set(err, TL_NOMEM, "out of memory opening the HIP runtime");
  h->info = info;
  tl_status st = open_library(h, err);
  if (st != TL_OK) {
    free(h);
    return st;
  }
  if ((st = hip_start(h, ordinal, err)) != TL_OK) {
    /* RTLD_NODELETE keeps the mapping; dlclose only drops our reference. */
    dlclose(h->lib);
    free(h);
    return st;
  }
  *rt = h;
  return TL_OK;
}

static void hip_close(void *rt) {
  hip_rt *h = rt;
  dlclose(h->lib);
  free(h);
}

/* ---- code objects ------------------------------------------------------- */

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
  unsigned type = (unsigned)tl_elf_rd16(b + 16), machine = (unsigned)tl_elf_rd16(b + 18);
  if (machine != EM_AMDGPU)
    return tl_error_set(err, TL_UNSUPPORTED,
                        "the image is an ELF for machine %u%s, not an AMDGPU code object (%d)",
                        machine, machine == EM_CUDA ? " (a CUDA cubin)" : "", EM_AMDGPU);
  if (type != ET_DYN)
    return tl_error_set(err, TL_UNSUPPORTED,
                        "the code object is an ELF of type %u%s, not a linked one (ET_DYN, as "
                        "ld.lld -shared makes)",
                        type, type == ET_REL ? " (a relocatable object)" : "");
  uint64_t phoff = tl_elf_rd64(b + 32), shoff = tl_elf_rd64(b + 40);
  unsigned flags = (unsigned)tl_elf_rd32(b + 48);
  unsigned phentsize = (unsigned)tl_elf_rd16(b + 54), phnum = (unsigned)tl_elf_rd16(b + 56);
  unsigned shentsize = (unsigned)tl_elf_rd16(b + 58), shnum = (unsigned)tl_elf_rd16(b + 60);
  if ((phnum && phentsize < 56) || (shnum && shentsize < 64) ||
      !within(phoff, phnum, phentsize, n) || !within(shoff, shnum, shentsize, n))
    return tl_error_set(err, TL_CORRUPT,
                        "the code object's ELF headers reach past its %zu bytes (truncated?)", n);
  for (unsigned i = 0; i < phnum; i++) {
    const unsigned char *ph = b + phoff + (uint64_t)i * phentsize;
    if (!within(tl_elf_rd64(ph + 8), 1, tl_elf_rd64(ph + 32), n))
      return tl_error_set(err, TL_CORRUPT,
                          "program header %u of the code object reaches past its %zu bytes", i, n);
  }
  for (unsigned i = 0; i < shnum; i++) {
    const unsigned char *sh = b + shoff + (uint64_t)i * shentsize;
    if (tl_elf_rd32(sh + 4) != SHT_NOBITS && !within(tl_elf_rd64(sh + 24), 1, tl_elf_rd64(sh + 32), n))
      return tl_error_set(err, TL_CORRUPT, "section %u of the code object reaches past its %zu bytes",
                          i, n);
  }
  const char *built = tl_hip_arch_of_mach((int)(flags & 0xff));
  if (built && strcmp(built, arch) != 0)
    return tl_error_set(err, TL_UNSUPPORTED,
                        "the code object is for %s; this GPU is %s", built, arch);
  return TL_OK;
}

static tl_status hip_load(void *rt, const void *image, size_t n, void **mod, char *log, tl_error *err) {
  hip_rt *h = rt;
  (void)log; /* the HIP runtime keeps no JIT log */
  tl_status st = check_code_object(image, n, h->info->arch_name, err);
  if (st != TL_OK)
    return st;
  hipModule_t m = NULL;
  hipError_t r = h->ModuleLoadData(&m, image);
  if (r != hipSuccess) {
    char what[128];
    snprintf(what, sizeof what, "hipModuleLoadData (code object of %zu bytes, on %s)", n, h->info->arch_name);
    return hip_fail(h, TL_DEVICE, r, err, what);
  }
  *mod = m;
  return TL_OK;
}

static void hip_unload(void *rt, void *mod) { ((hip_rt *)rt)->ModuleUnload((hipModule_t)mod); }

static tl_status hip_function(void *rt, void *mod, const char *name, void **fn, tl_error *err) {
  hip_rt *h = rt;
  hipFunction_t f = NULL;
  hipError_t r = h->ModuleGetFunction(&f, (hipModule_t)mod, name);
  if (r == hipErrorNotFound)
    return TL_NOT_FOUND;
  *fn = f;
  return hip_check(h, r, err, "hipModuleGetFunction");
}

static tl_status hip_fattr(void *rt, void *fn, tl_gpu_fattr which, int *value, tl_error *err) {
  static const int native[TL_FATTR_COUNT] = {
      [TL_FATTR_NUM_REGS] = HIP_FUNC_ATTRIBUTE_NUM_REGS,
      [TL_FATTR_LOCAL_BYTES] = HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
      [TL_FATTR_SHARED_BYTES] = HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
      [TL_FATTR_CONST_BYTES] = -1,
      [TL_FATTR_MAX_THREADS] = HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
      [TL_FATTR_MAX_DYNAMIC_SHARED] = HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
      [TL_FATTR_PTX_VERSION] = -1,
      [TL_FATTR_BINARY_VERSION] = HIP_FUNC_ATTRIBUTE_BINARY_VERSION,
  };
  hip_rt *h = rt;
  *value = -1;
  if (native[which] < 0)
    return TL_OK;
  return hip_check(h, h->FuncGetAttribute(value, native[which], (hipFunction_t)fn), err, "hipFuncGetAttribute");
}

static tl_status hip_launch(void *rt, void *fn, const unsigned grid[3], const unsigned block[3], unsigned dyn_smem,
                            tl_gpu_stream stream, void **args, unsigned flags, tl_error *err) {
  hip_rt *h = rt;
  (void)flags; /* no programmatic launch: the stream orders every kernel (the same results) */
  return hip_check(h,
                   h->ModuleLaunchKernel((hipFunction_t)fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                         dyn_smem, (hipStream_t)stream, args, NULL),
                   err, "hipModuleLaunchKernel");
}

/* ---- memory, streams, events ------------------------------------------ */

static void *as_ptr(tl_gpu_ptr p) { return (void *)(uintptr_t)p; }

static tl_status hip_alloc(void *rt, size_t bytes, tl_gpu_ptr *out, tl_error *err) {
  hip_rt *h = rt;
  void *p = NULL;
  hipError_t r = h->Malloc(&p, bytes);
  if (r != hipSuccess) {
    char what[96];
    snprintf(what, sizeof what, "hipMalloc of %zu bytes", bytes);
    return hip_fail(h, TL_DEVICE, r, err, what);
  }
  *out = (tl_gpu_ptr)(uintptr_t)p;
  return TL_OK;
}

static void hip_free(void *rt, tl_gpu_ptr p) { ((hip_rt *)rt)->Free(as_ptr(p)); }

static tl_status hip_upload(void *rt, tl_gpu_ptr dst, const void *src, size_t bytes, tl_error *err) {
  hip_rt *h = rt;
  /* hipMemcpyHtoD's source is not const in the header; it is only read. */
  return hip_check(h, h->MemcpyHtoD(as_ptr(dst), (void *)(uintptr_t)src, bytes), err, "hipMemcpyHtoD");
}

static tl_status hip_download(void *rt, void *dst, tl_gpu_ptr src, size_t bytes, tl_error *err) {
  hip_rt *h = rt;
  return hip_check(h, h->MemcpyDtoH(dst, as_ptr(src), bytes), err, "hipMemcpyDtoH");
}

static tl_status hip_memset8(void *rt, tl_gpu_ptr dst, unsigned char value, size_t bytes, tl_error *err) {
  hip_rt *h = rt;
  return hip_check(h, h->MemsetD8(as_ptr(dst), value, bytes), err, "hipMemsetD8");
}

static tl_status hip_stream_create(void *rt, tl_gpu_stream *out, tl_error *err) {
  hip_rt *h = rt;
  hipStream_t s = NULL;
  tl_status st = hip_check(h, h->StreamCreateWithFlags(&s, hipStreamNonBlocking), err, "hipStreamCreateWithFlags");
  *out = s;
  return st;
}

static void hip_stream_destroy(void *rt, tl_gpu_stream s) { ((hip_rt *)rt)->StreamDestroy((hipStream_t)s); }

static tl_status hip_stream_sync(void *rt, tl_gpu_stream s, tl_error *err) {
  hip_rt *h = rt;
  return hip_check(h, h->StreamSynchronize((hipStream_t)s), err, "hipStreamSynchronize");
}

static tl_status hip_sync(void *rt, tl_error *err) {
  hip_rt *h = rt;
  return hip_check(h, h->DeviceSynchronize(), err, "hipDeviceSynchronize");
}

static tl_status hip_event_create(void *rt, void **ev, tl_error *err) {
  hip_rt *h = rt;
  hipEvent_t e = NULL;
  tl_status st = hip_check(h, h->EventCreate(&e), err, "hipEventCreate");
  *ev = e;
  return st;
}

static tl_status hip_event_record(void *rt, void *ev, tl_gpu_stream s, tl_error *err) {
  hip_rt *h = rt;
  return hip_check(h, h->EventRecord((hipEvent_t)ev, (hipStream_t)s), err, "hipEventRecord");
}

static tl_status hip_event_elapsed(void *rt, void *start, void *end, float *ms, tl_error *err) {
  hip_rt *h = rt;
  tl_status st = hip_check(h, h->EventSynchronize((hipEvent_t)end), err, "hipEventSynchronize");
  return st != TL_OK ? st
                     : hip_check(h, h->EventElapsedTime(ms, (hipEvent_t)start, (hipEvent_t)end), err,
                                 "hipEventElapsedTime");
}

static void hip_event_destroy(void *rt, void *ev) { ((hip_rt *)rt)->EventDestroy((hipEvent_t)ev); }

const tl_gpu_driver tl_gpu_hip_driver = {
    .api = TL_GPU_HIP,
    .name = "HIP",
    .smem_name = "LDS",
    .block_name = "workgroup",
    .items_32bit = true,
    .open = hip_open,
    .close = hip_close,
    .bind = hip_bind,
    .load = hip_load,
    .unload = hip_unload,
    .function = hip_function,
    .fattr = hip_fattr,
    .launch = hip_launch,
    .alloc = hip_alloc,
    .free = hip_free,
    .upload = hip_upload,
    .download = hip_download,
    .memset8 = hip_memset8,
    .stream_create = hip_stream_create,
    .stream_destroy = hip_stream_destroy,
    .stream_sync = hip_stream_sync,
    .sync = hip_sync,
    .event_create = hip_event_create,
    .event_record = hip_event_record,
    .event_elapsed = hip_event_elapsed,
    .event_destroy = hip_event_destroy,
};
