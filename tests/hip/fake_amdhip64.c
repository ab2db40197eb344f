/*
 * fake_amdhip64.c - a fake libamdhip64 (the HIP runtime) for the tests of
 * compiler/hipdrv.c and of libtlclient's AMD path: see fake_amdhip64.h for
 * what it is, what it answers and how the tests steer it.  It is built by
 * the tests themselves (fake_hip_build), never by the Makefile, and never
 * linked into anything.
 *
 * The properties structures are written here by byte offset, not through
 * a C copy of hipDeviceProp_t, so that the loader's own copy is checked
 * against numbers obtained independently: the offsets and sizes below come
 * from compiling the structures of ROCm/HIP's include/hip/hip_runtime_api.h
 * (tags rocm-6.0.0 and rocm-6.2.2: hipDeviceProp_tR0600) and
 * hip_deprecated.h (hipDeviceProp_tR0000, the same as ROCm 5.4 to 5.7's
 * hipDeviceProp_t) on x86-64 Linux.  Every byte the loader should not
 * need is filled with 'Z', so a loader reading at a wrong offset reads
 * "ZZZ...", not a plausible name.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_amdhip64.h"

typedef int hipError_t;

#define R0600_SIZE 1472
#define R0600_TOTAL_GLOBAL_MEM 288
#define R0600_GCN_ARCH_NAME 1160
#define R0000_SIZE 792
#define R0000_TOTAL_GLOBAL_MEM 256
#define R0000_GCN_ARCH_NAME 396

#define FAKE_NAME "AMD Instinct MI210 (fake)"
#define FAKE_MEMORY ((size_t)64 << 30)

/* ---- bookkeeping ---------------------------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  const char *name;
  int n;
} calls[64];
static int live_allocs, live_modules, live_streams, live_events;
static fake_hip_launch last;
static int arg_sizes[FAKE_HIP_MAX_ARGS], narg_sizes;
static hipError_t sticky; /* reported by the next synchronising call */
static _Thread_local int current;

static void called(const char *name) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < 64; i++) {
    if (!calls[i].name || strcmp(calls[i].name, name) == 0) {
      calls[i].name = name;
      calls[i].n++;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
}

int fake_hip_calls(const char *function) {
  int n = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < 64 && calls[i].name; i++)
    if (strcmp(calls[i].name, function) == 0)
      n = calls[i].n;
  pthread_mutex_unlock(&lock);
  return n;
}

int fake_hip_live(const char *what) {
  if (strcmp(what, "allocations") == 0)
    return live_allocs;
  if (strcmp(what, "modules") == 0)
    return live_modules;
  if (strcmp(what, "streams") == 0)
    return live_streams;
  if (strcmp(what, "events") == 0)
    return live_events;
  return -1;
}

void fake_hip_last_launch(fake_hip_launch *out) {
  pthread_mutex_lock(&lock);
  *out = last;
  pthread_mutex_unlock(&lock);
}

void fake_hip_set_arg_sizes(const int *sizes, int n) {
  pthread_mutex_lock(&lock);
  narg_sizes = n < 0 ? 0 : n > FAKE_HIP_MAX_ARGS ? FAKE_HIP_MAX_ARGS : n;
  for (int i = 0; i < narg_sizes; i++)
    arg_sizes[i] = sizes[i] < 0 ? 0 : sizes[i] > FAKE_HIP_ARG_BYTES ? FAKE_HIP_ARG_BYTES : sizes[i];
  pthread_mutex_unlock(&lock);
}

static int devices(void) {
  const char *s = getenv("FAKE_HIP_DEVICES");
  return s && *s ? atoi(s) : 1;
}

static const char *arch_id(void) {
  const char *s = getenv("FAKE_HIP_ARCH");
  return s ? s : "gfx90a:sramecc+:xnack-";
}

/* ---- errors ----------------------------------------------------------------- */

static const struct {
  int code;
  const char *name, *text;
} errors[] = {
    {0, "hipSuccess", "no error"},
    {1, "hipErrorInvalidValue", "invalid argument"},
    {2, "hipErrorOutOfMemory", "out of memory"},
    {3, "hipErrorNotInitialized", "initialization error"},
    {9, "hipErrorInvalidConfiguration", "invalid configuration argument"},
    {35, "hipErrorInsufficientDriver", "driver version is insufficient for runtime version"},
    {100, "hipErrorNoDevice", "no ROCm-capable device is detected"},
    {101, "hipErrorInvalidDevice", "invalid device ordinal"},
    {200, "hipErrorInvalidImage", "device kernel image is invalid"},
    {209, "hipErrorNoBinaryForGpu", "no kernel image is available for execution on the device"},
    {303, "hipErrorSharedObjectInitFailed", "shared object initialization failed"},
    {400, "hipErrorInvalidHandle", "invalid resource handle"},
    {500, "hipErrorNotFound", "named symbol not found"},
    {700, "hipErrorIllegalAddress", "an illegal memory access was encountered"},
};

const char *hipGetErrorName(hipError_t e) {
  for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
    if (errors[i].code == e)
      return errors[i].name;
  return "hipErrorUnknown";
}

const char *hipGetErrorString(hipError_t e) {
  for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
    if (errors[i].code == e)
      return errors[i].text;
  return "unknown error";
}

/* ---- devices ------------------------------------------------------------------ */

hipError_t hipInit(unsigned flags) {
  called("hipInit");
  const char *e = getenv("FAKE_HIP_INIT_ERROR");
  if (flags != 0)
    return 1;
  if (e && *e)
    return atoi(e);
  return devices() > 0 ? 0 : 100;
}

hipError_t hipRuntimeGetVersion(int *v) {
  called("hipRuntimeGetVersion");
#ifdef FAKE_ROCM5
  *v = 50731921;
#else
  *v = 60032830;
#endif
  return 0;
}

hipError_t hipGetDeviceCount(int *count) {
  called("hipGetDeviceCount");
  *count = devices() > 0 ? devices() : 0;
  return *count ? 0 : 100;
}

hipError_t hipSetDevice(int d) {
  called("hipSetDevice");
  if (d < 0 || d >= devices())
    return 101;
  current = d;
  return 0;
}

hipError_t hipGetDevice(int *d) {
  *d = current;
  return 0;
}

hipError_t hipDeviceGetAttribute(int *v, int attr, int dev) {
  called("hipDeviceGetAttribute");
  if (dev < 0 || dev >= devices())
    return 101;
  switch (attr) {
  case 26: case 27: case 28: *v = 1024; return 0;        /* MaxBlockDimX/Y/Z */
  case 29: case 30: case 31: *v = 2147483647; return 0;  /* MaxGridDimX/Y/Z */
  case 56: *v = 1024; return 0;                          /* MaxThreadsPerBlock */
  case 63: *v = 104; return 0;                           /* MultiprocessorCount */
  case 71: *v = 65536; return 0;                         /* MaxRegistersPerBlock */
  case 74: *v = 65536; return 0;                         /* MaxSharedMemoryPerBlock */
  case 87: *v = strncmp(arch_id(), "gfx1", 4) == 0 ? 32 : 64; return 0; /* WarpSize */
  default: return 1;
  }
}

/* Writes a properties structure of `size` bytes: 'Z' everywhere, then the
 * name, the memory size and gcnArchName at their offsets. */
static void fill_props(unsigned char *p, size_t size, size_t mem_at, size_t arch_at) {
  memset(p, 'Z', size);
  memset(p, 0, 256);
  snprintf((char *)p, 256, "%s", FAKE_NAME);
  size_t mem = FAKE_MEMORY;
  memcpy(p + mem_at, &mem, sizeof mem);
  memset(p + arch_at, 0, 256);
  snprintf((char *)p + arch_at, 256, "%s", arch_id());
}

#ifndef FAKE_ROCM5
hipError_t hipGetDevicePropertiesR0600(void *props, int dev) {
  called("hipGetDevicePropertiesR0600");
  if (!props)
    return 1;
  if (dev < 0 || dev >= devices())
    return 101;
  fill_props(props, R0600_SIZE, R0600_TOTAL_GLOBAL_MEM, R0600_GCN_ARCH_NAME);
  return 0;
}

hipError_t hipGetDevicePropertiesR0000(void *props, int dev) {
  called("hipGetDevicePropertiesR0000");
  if (!props)
    return 1;
  if (dev < 0 || dev >= devices())
    return 101;
  fill_props(props, R0000_SIZE, R0000_TOTAL_GLOBAL_MEM, R0000_GCN_ARCH_NAME);
  return 0;
}
#endif

/* ROCm 5's only one; in ROCm 6 the old layout kept under the old name. */
hipError_t hipGetDeviceProperties(void *props, int dev) {
  called("hipGetDeviceProperties");
  if (!props)
    return 1;
  if (dev < 0 || dev >= devices())
    return 101;
  fill_props(props, R0000_SIZE, R0000_TOTAL_GLOBAL_MEM, R0000_GCN_ARCH_NAME);
  return 0;
}

hipError_t hipDeviceSynchronize(void) {
  called("hipDeviceSynchronize");
  hipError_t e = sticky;
  sticky = 0;
  return e;
}

/* ---- memory (host memory standing in for device memory) --------------------------- */

hipError_t hipMalloc(void **p, size_t n) {
  called("hipMalloc");
  if (!p)
    return 1;
  *p = NULL;
  if (n > ((size_t)1 << 32))
    return 2;
  *p = aligned_alloc(256, (n + 255) / 256 * 256);
  if (!*p)
    return 2;
  __atomic_add_fetch(&live_allocs, 1, __ATOMIC_SEQ_CST);
  return 0;
}

hipError_t hipFree(void *p) {
  called("hipFree");
  if (p) {
    free(p);
    __atomic_sub_fetch(&live_allocs, 1, __ATOMIC_SEQ_CST);
  }
  return 0;
}

hipError_t hipMemcpyHtoD(void *dst, void *src, size_t n) {
  called("hipMemcpyHtoD");
  if (!dst || !src)
    return 1;
  memcpy(dst, src, n);
  return 0;
}

hipError_t hipMemcpyDtoH(void *dst, void *src, size_t n) {
  called("hipMemcpyDtoH");
  if (!dst || !src)
    return 1;
  memcpy(dst, src, n);
  return 0;
}

hipError_t hipMemsetD8(void *dst, unsigned char v, size_t n) {
  called("hipMemsetD8");
  if (!dst)
    return 1;
  memset(dst, v, n);
  return 0;
}

/* ---- modules ---------------------------------------------------------------------- */

typedef struct fake_func {
  char name[128];
  struct fake_func *next;
} fake_func;

typedef struct fake_module {
  unsigned char *bytes;
  size_t n;
  fake_func *funcs;
} fake_module;

static uint64_t rd(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* The image's size as a code-object loader sees it: the furthest byte any
 * header or section names (the caller passes no size). */
static uint64_t elf_size(const unsigned char *b) {
  uint64_t phoff = rd(b + 32, 8), shoff = rd(b + 40, 8);
  unsigned phentsize = (unsigned)rd(b + 54, 2), phnum = (unsigned)rd(b + 56, 2);
  unsigned shentsize = (unsigned)rd(b + 58, 2), shnum = (unsigned)rd(b + 60, 2);
  uint64_t end = max64(64, max64(phoff + (uint64_t)phnum * phentsize, shoff + (uint64_t)shnum * shentsize));
  for (unsigned i = 0; i < phnum; i++)
    end = max64(end, rd(b + phoff + (uint64_t)i * phentsize + 8, 8) + rd(b + phoff + (uint64_t)i * phentsize + 32, 8));
  for (unsigned i = 0; i < shnum; i++) {
    const unsigned char *sh = b + shoff + (uint64_t)i * shentsize;
    if (rd(sh + 4, 4) != 8)
      end = max64(end, rd(sh + 24, 8) + rd(sh + 32, 8));
  }
  return end;
}

static int mach_of(const char *id) {
  static const struct {
    const char *arch;
    int mach;
  } t[] = {{"gfx90a", 0x3f}, {"gfx942", 0x4c}, {"gfx1100", 0x41}, {"gfx1201", 0x4e}};
  for (size_t i = 0; i < sizeof t / sizeof *t; i++)
    if (strncmp(id, t[i].arch, strlen(t[i].arch)) == 0 &&
        (id[strlen(t[i].arch)] == 0 || id[strlen(t[i].arch)] == ':'))
      return t[i].mach;
  return -1;
}

static int contains(const unsigned char *b, size_t n, const char *s, size_t len) {
  for (size_t i = 0; i + len <= n; i++)
    if (memcmp(b + i, s, len) == 0)
      return 1;
  return 0;
}

hipError_t hipModuleLoadData(void **module, const void *image) {
  called("hipModuleLoadData");
  if (!module || !image)
    return 1;
  const unsigned char *b = image;
  if (memcmp(b, "\177ELF", 4) != 0 || rd(b + 18, 2) != 224)
    return 200;
  if ((int)(rd(b + 48, 4) & 0xff) != mach_of(arch_id()))
    return 209;
  uint64_t n = elf_size(b);
  if (n > ((uint64_t)1 << 30))
    return 200;
  if (contains(b, n, "fake:refuse", 11))
    return 303;
  fake_module *m = calloc(1, sizeof *m);
  if (!m || !(m->bytes = malloc(n))) {
    free(m);
    return 2;
  }
  memcpy(m->bytes, b, n);
  m->n = n;
  *module = m;
  __atomic_add_fetch(&live_modules, 1, __ATOMIC_SEQ_CST);
  return 0;
}

hipError_t hipModuleUnload(void *module) {
  called("hipModuleUnload");
  fake_module *m = module;
  if (!m)
    return 400;
  for (fake_func *f = m->funcs, *next; f; f = next) {
    next = f->next;
    free(f);
  }
  free(m->bytes);
  free(m);
  __atomic_sub_fetch(&live_modules, 1, __ATOMIC_SEQ_CST);
  return 0;
}

/* A kernel is any name found NUL-delimited in the image (its string table). */
hipError_t hipModuleGetFunction(void **fn, void *module, const char *name) {
  called("hipModuleGetFunction");
  fake_module *m = module;
  if (!fn || !name || !*name)
    return 1;
  if (!m)
    return 400;
  size_t len = strlen(name);
  if (len >= sizeof((fake_func *)0)->name)
    return 500;
  char key[130];
  key[0] = 0;
  memcpy(key + 1, name, len + 1);
  if (!contains(m->bytes, m->n, key, len + 2))
    return 500;
  fake_func *f = calloc(1, sizeof *f);
  if (!f)
    return 2;
  memcpy(f->name, name, len + 1);
  f->next = m->funcs;
  m->funcs = f;
  *fn = f;
  return 0;
}

hipError_t hipFuncGetAttribute(int *v, int attr, void *fn) {
  called("hipFuncGetAttribute");
  if (!v || !fn)
    return 1;
  switch (attr) {
  case 0: *v = 256; return 0;           /* MAX_THREADS_PER_BLOCK: the launch bounds */
  case 1: *v = 1024; return 0;          /* SHARED_SIZE_BYTES: static LDS */
  case 2: *v = 0; return 0;             /* CONST_SIZE_BYTES */
  case 3: *v = 16; return 0;            /* LOCAL_SIZE_BYTES */
  case 4: *v = 42; return 0;            /* NUM_REGS */
  case 5: *v = 30; return 0;            /* PTX_VERSION */
  case 6: *v = 5; return 0;             /* BINARY_VERSION */
  case 7: *v = 0; return 0;             /* CACHE_MODE_CA */
  case 8: *v = 65536 - 1024; return 0;  /* MAX_DYNAMIC_SHARED_SIZE_BYTES */
  default: return 1;
  }
}

hipError_t hipModuleLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shared, void *stream,
                                 void **params, void **extra) {
  called("hipModuleLaunchKernel");
  fake_func *f = fn;
  if (!f)
    return 200;
  if (params && extra)
    return 1;
  if (!gx || !gy || !gz || !bx || !by || !bz)
    return 9;
  if ((unsigned long long)bx * by * bz > 1024 || shared > 65536)
    return 1;
  pthread_mutex_lock(&lock);
  last.count++;
  snprintf(last.kernel, sizeof last.kernel, "%s", f->name);
  last.grid[0] = gx, last.grid[1] = gy, last.grid[2] = gz;
  last.block[0] = bx, last.block[1] = by, last.block[2] = bz;
  last.shared_bytes = shared;
  last.stream = stream;
  last.extra_given = extra != NULL;
  last.nargs = params ? narg_sizes : 0;
  memset(last.args, 0, sizeof last.args);
  for (int i = 0; i < last.nargs; i++)
    memcpy(last.args[i], params[i], (size_t)arg_sizes[i]);
  pthread_mutex_unlock(&lock);
  if (strcmp(f->name, "fake_axpy") == 0 && params) {
    float *y = *(float **)params[0];
    const float *x = *(const float **)params[1];
    float a = *(const float *)params[2];
    int n = *(const int *)params[3];
    unsigned long long threads = (unsigned long long)gx * bx;
    for (long long i = 0; i < n && (unsigned long long)i < threads; i++)
      y[i] += a * x[i];
  } else if (strcmp(f->name, "fake_fault") == 0) {
    sticky = 700;
  }
  return 0;
}

/* ---- streams and events ------------------------------------------------------------ */

hipError_t hipStreamCreateWithFlags(void **s, unsigned flags) {
  called("hipStreamCreateWithFlags");
  if (!s || flags > 1)
    return 1;
  *s = malloc(1);
  if (!*s)
    return 2;
  __atomic_add_fetch(&live_streams, 1, __ATOMIC_SEQ_CST);
  return 0;
}

hipError_t hipStreamDestroy(void *s) {
  called("hipStreamDestroy");
  if (!s)
    return 400;
  free(s);
  __atomic_sub_fetch(&live_streams, 1, __ATOMIC_SEQ_CST);
  return 0;
}

hipError_t hipStreamSynchronize(void *s) {
  called("hipStreamSynchronize");
  (void)s;
  hipError_t e = sticky;
  sticky = 0;
  return e;
}

typedef struct fake_event {
  double ms;
  int recorded;
} fake_event;

hipError_t hipEventCreate(void **ev) {
  called("hipEventCreate");
  if (!ev)
    return 1;
  *ev = calloc(1, sizeof(fake_event));
  if (!*ev)
    return 2;
  __atomic_add_fetch(&live_events, 1, __ATOMIC_SEQ_CST);
  return 0;
}

hipError_t hipEventRecord(void *ev, void *stream) {
  called("hipEventRecord");
  fake_event *e = ev;
  (void)stream;
  if (!e)
    return 400;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  e->ms = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  e->recorded = 1;
  return 0;
}

hipError_t hipEventSynchronize(void *ev) {
  called("hipEventSynchronize");
  return ev ? 0 : 400;
}

hipError_t hipEventElapsedTime(float *ms, void *start, void *stop) {
  called("hipEventElapsedTime");
  fake_event *a = start, *b = stop;
  if (!ms || !a || !b)
    return 1;
  if (!a->recorded || !b->recorded)
    return 400;
  *ms = (float)(b->ms - a->ms);
  return 0;
}

hipError_t hipEventDestroy(void *ev) {
  called("hipEventDestroy");
  if (!ev)
    return 400;
  free(ev);
  __atomic_sub_fetch(&live_events, 1, __ATOMIC_SEQ_CST);
  return 0;
}
