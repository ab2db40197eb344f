/*
 * nvjitlink.c - PTX to cubin through nvJitLink (nvjitlink.h): the assembler
 * of the direct PTX back end (emit_ptx.c), opened with dlopen as NVRTC is,
 * so that a compile on that path never loads NVRTC.
 */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dlutil.h"
#include "nvjitlink.h"

typedef void *jl_handle;
typedef int (*fn_create)(jl_handle *, unsigned, const char **);
typedef int (*fn_destroy)(jl_handle *);
typedef int (*fn_add)(jl_handle, int, const void *, size_t, const char *);
typedef int (*fn_complete)(jl_handle);
typedef int (*fn_size)(jl_handle, size_t *);
typedef int (*fn_get)(jl_handle, void *);
typedef int (*fn_version)(unsigned *, unsigned *);

struct tl_nvjitlink {
  void *lib;
  char library[PATH_MAX];
  unsigned major, minor;
  fn_create Create;
  fn_destroy Destroy;
  fn_add AddData;
  fn_complete Complete;
  fn_size CubinSize, ErrorLogSize, InfoLogSize;
  fn_get Cubin, ErrorLog, InfoLog;
  fn_version Version;
};

enum { JL_INPUT_PTX = 2 };            /* NVJITLINK_INPUT_PTX (nvJitLink.h) */
enum { JL_UNRECOGNIZED_OPTION = 1 };  /* NVJITLINK_ERROR_UNRECOGNIZED_OPTION */

static const char *resolve(tl_nvjitlink *h) {
#define REQ(field, sym)                                                                                        \
  do {                                                                                                         \
    *(void **)&h->field = dlsym(h->lib, sym);                                                                  \
    if (!h->field)                                                                                             \
      return sym;                                                                                              \
  } while (0)
  REQ(Create, "nvJitLinkCreate");
  REQ(Destroy, "nvJitLinkDestroy");
  REQ(AddData, "nvJitLinkAddData");
  REQ(Complete, "nvJitLinkComplete");
  REQ(CubinSize, "nvJitLinkGetLinkedCubinSize");
  REQ(Cubin, "nvJitLinkGetLinkedCubin");
  REQ(ErrorLogSize, "nvJitLinkGetErrorLogSize");
  REQ(ErrorLog, "nvJitLinkGetErrorLog");
  REQ(InfoLogSize, "nvJitLinkGetInfoLogSize");
  REQ(InfoLog, "nvJitLinkGetInfoLog");
  REQ(Version, "nvJitLinkVersion");
#undef REQ
  return NULL;
}

static int try_open(void *ctx, const char *path, char *tried, size_t cap) {
  tl_nvjitlink *h = ctx;
  h->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h->lib) {
    tl_appendf(tried, cap, "%s%s (%s)", *tried ? ", " : "", path, tl_dl_reason(dlerror()));
    return 0;
  }
  const char *missing = resolve(h);
  if (missing) {
    tl_appendf(tried, cap, "%s%s (lacks %s)", *tried ? ", " : "", path, missing);
    dlclose(h->lib);
    h->lib = NULL;
    return 0;
  }
  void *pin = dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE); /* stays mapped, as NVRTC */
  if (pin)
    dlclose(pin);
  snprintf(h->library, sizeof h->library, "%s", path);
  return 1;
}

static const char *const names[] = {"libnvJitLink.so.13", "libnvJitLink.so.12"};
#define NNAMES (sizeof names / sizeof *names)

tl_status tl_nvjitlink_open(tl_nvjitlink **out, tl_error *err) {
  *out = NULL;
  tl_nvjitlink *h = calloc(1, sizeof *h);
  if (!h)
    return tl_error_set(err, TL_NOMEM, "out of memory opening nvJitLink");
  char tried[768] = "";
  if (!tl_dl_search("TL_NVJITLINK", names, NNAMES, "/usr/local/cuda/lib64", try_open, h, tried, sizeof tried)) {
    free(h);
    return tl_error_set(err, TL_NO_TOOLCHAIN, "nvJitLink is not available: tried %s", tried);
  }
  if (h->Version(&h->major, &h->minor) != 0) {
    dlclose(h->lib);
    free(h);
    return tl_error_set(err, TL_NO_TOOLCHAIN, "nvJitLinkVersion failed");
  }
  *out = h;
  return TL_OK;
}

void tl_nvjitlink_dir(const tl_nvjitlink *h, char *buf, size_t cap) {
  Dl_info info;
  buf[0] = 0;
  if (dladdr(*(void **)&h->Version, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
    snprintf(buf, cap, "%s", info.dli_fname);
    *strrchr(buf, '/') = 0;
  }
}

void tl_nvjitlink_describe(const tl_nvjitlink *h, char *buf, size_t cap) {
  snprintf(buf, cap, "nvJitLink %u.%u (%s)", h->major, h->minor, h->library);
}

/* One of nvJitLink's logs, malloc'd ("" when empty or unreadable). */
static char *get_log(tl_nvjitlink *h, jl_handle j, fn_size size, fn_get get) {
  size_t n = 0;
  if (size(j, &n) != 0 || n > TL_NVJITLINK_MAX_LOG)
    n = 0;
  char *log = calloc(n + 1, 1);
  if (log && n && get(j, log) != 0)
    log[0] = 0;
  (void)h;
  return log;
}

tl_status tl_nvjitlink_assemble(tl_nvjitlink *h, const char *ptx, const char *arch, int max_registers,
                                tl_toolchain_out *out, tl_error *err) {
  memset(out, 0, sizeof *out);
  size_t len = strlen(ptx);
  if (len > TL_NVJITLINK_MAX_PTX)
    return tl_error_set(err, TL_TOO_LARGE, "PTX of %zu bytes; nvJitLink takes at most %u", len, TL_NVJITLINK_MAX_PTX);
  char a[48], reg[48];
  snprintf(a, sizeof a, "-arch=%s", arch);
  /* -no-cache: nvJitLink's own cache would open libcuda.so.1 and call cuInit in every compiling
   * process (its strings: "no cuInit so no cache"), as NVRTC's did (bench/compile.md): on a
   * machine with a GPU that start costs ~100 ms a fresh process, and the service keeps one
   * cache of its own.  An nvJitLink that does not know the option is asked again without. */
  const char *opts[5] = {a, "-O3", "-Xptxas=-v", "-no-cache", NULL};
  unsigned nopts = 4;
  if (max_registers) {
    snprintf(reg, sizeof reg, "-maxrregcount=%d", max_registers);
    opts[nopts++] = reg;
  }
  jl_handle j = NULL;
  int r = h->Create(&j, nopts, opts);
  if (r == JL_UNRECOGNIZED_OPTION) {
    opts[3] = opts[--nopts]; /* without -no-cache */
    r = h->Create(&j, nopts, opts);
  }
  if (r != 0)
    return tl_error_set(err, TL_TOOLCHAIN, "nvJitLinkCreate failed (%d) for %s", r, arch);
  tl_status st = TL_OK;
  r = h->AddData(j, JL_INPUT_PTX, ptx, len + 1, "kernel.ptx");
  if (r == 0)
    r = h->Complete(j);
  char *info = get_log(h, j, h->InfoLogSize, h->InfoLog);
  char *elog = get_log(h, j, h->ErrorLogSize, h->ErrorLog);
  size_t n = 0;
  if (r == 0 && (h->CubinSize(j, &n) != 0 || n == 0 || n > TL_NVJITLINK_MAX_CUBIN))
    r = -1;
  if (r == 0 && !(out->code = malloc(n)))
    st = tl_error_set(err, TL_NOMEM, "out of memory");
  else if (r == 0 && h->Cubin(j, out->code) != 0)
    r = -1;
  if (r != 0 && st == TL_OK)
    st = tl_error_set(err, TL_TOOLCHAIN, "nvJitLink failed to assemble the PTX for %s (%d): %.900s", arch, r,
                      elog && *elog ? elog : info ? info : "");
  if (st == TL_OK)
    out->size = n;
  else {
    free(out->code);
    out->code = NULL;
  }
  size_t il = info ? strlen(info) : 0, el = elog ? strlen(elog) : 0;
  out->log = malloc(il + el + 1);
  if (out->log)
    snprintf(out->log, il + el + 1, "%s%s", info ? info : "", elog ? elog : "");
  free(info);
  free(elog);
  h->Destroy(&j);
  return st;
}
