/*
 * nvrtc.c - NVRTC opened with dlopen, and the NVIDIA entry of the toolchain
 * table (toolchain.h): finding the library, resolving its
 * functions, working out which targets it accepts, compiling one source for
 * one target, and reading ptxas's resource report out of the log.
 *
 * The NVRTC types and functions used here are declared locally (no
 * nvrtc.h include), from the CUDA Toolkit's public nvrtc.h: nvrtcResult is
 * an int enum whose 0 is success, a program is an opaque pointer.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlutil.h"
#include "nvrtc.h"
#include "cubin.h"
#include "toolchain.h"

/* ---- NVRTC's ABI ----------------------------------------------------- */

typedef int nvrtcResult;
typedef struct nvrtc_program_ *nvrtcProgram;

enum {
  NVRTC_SUCCESS = 0,
  NVRTC_ERROR_OUT_OF_MEMORY = 1,
  NVRTC_ERROR_INVALID_OPTION = 5,
  NVRTC_ERROR_COMPILATION = 6,
};

typedef const char *(*fn_GetErrorString)(nvrtcResult);
typedef nvrtcResult (*fn_Version)(int *, int *);
typedef nvrtcResult (*fn_GetNumSupportedArchs)(int *);
typedef nvrtcResult (*fn_GetSupportedArchs)(int *);
typedef nvrtcResult (*fn_CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                        const char *const *, const char *const *);
typedef nvrtcResult (*fn_DestroyProgram)(nvrtcProgram *);
typedef nvrtcResult (*fn_CompileProgram)(nvrtcProgram, int, const char *const *);
typedef nvrtcResult (*fn_GetSize)(nvrtcProgram, size_t *);
typedef nvrtcResult (*fn_GetBytes)(nvrtcProgram, char *);

/* Largest number of base architectures we keep (NVRTC 13.0 lists 12). */
#define MAX_ARCHS 64

/* Architectures probed when NVRTC cannot list its own (before 11.2). */
static const int fallback_archs[] = {35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90};

struct tl_nvrtc {
  void *lib;
  char library[PATH_MAX];
  int major, minor;

  fn_GetErrorString GetErrorString;
  fn_Version Version;
  fn_GetNumSupportedArchs GetNumSupportedArchs; /* optional */
  fn_GetSupportedArchs GetSupportedArchs;       /* optional */
  fn_CreateProgram CreateProgram;
  fn_DestroyProgram DestroyProgram;
  fn_CompileProgram CompileProgram;
  fn_GetSize GetPTXSize, GetCUBINSize, GetProgramLogSize;
  fn_GetBytes GetPTX, GetCUBIN, GetProgramLog;

  /* Base architectures, sorted.  When NVRTC lists them (`listed`, set at
   * open and never changed) they are filled at open; otherwise by the probe. */
  int archs[MAX_ARCHS];
  int narchs;
  int listed;

  /* Filled under lock: one variant at a time by probe_variant (`tried`
   * says which: bit 1 'a', bit 2 'f'), all of them by ensure_probed, after
   * which (`probed`) they are read-only. */
  pthread_mutex_t lock;
  int probed;
  unsigned char has_a[MAX_ARCHS], has_f[MAX_ARCHS], tried[MAX_ARCHS];
  char **targets;
  size_t ntargets;
};

/* ---- small helpers --------------------------------------------------- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const char *nvrtc_errstr(const tl_nvrtc *h, nvrtcResult r) {
  const char *s = h->GetErrorString ? h->GetErrorString(r) : NULL;
  return s ? s : "unknown NVRTC error";
}

/* ---- targets --------------------------------------------------------- */

/* Writes "sm_90a" (ptx: "compute_90a") into buf; returns buf. */
static char *target_name(int ptx, int arch, char variant, char *buf, size_t cap) {
  snprintf(buf, cap, "%s_%d%s", ptx ? "compute" : "sm", arch, variant == 'a' ? "a" : variant == 'f' ? "f" : "");
  return buf;
}

/* Is name a target of the target table (target.h)?  Only those are offered. */
static int known_target(const char *name) {
  tl_target t;
  return tl_target_parse(name, &t, NULL) == TL_OK && t.vendor == TL_VENDOR_NVIDIA;
}

static int arch_index(const tl_nvrtc *h, int arch) {
  for (int i = 0; i < h->narchs; i++)
    if (h->archs[i] == arch)
      return i;
  return -1;
}

/* Is NVRTC at least major.minor? */
static int at_least(const tl_nvrtc *h, int major, int minor) {
  return h->major > major || (h->major == major && h->minor >= minor);
}

/* The options every compile and probe gets besides the architecture
 * (nvrtc.h): -default-device; --no-cache from 12.9, whose own cache it
 * turns off.  Not -minimal (about 5 ms less per compile, same code): after
 * a compile with it, LeakSanitizer's tracer crashes in its scan of the
 * process's dynamic TLS (a bogus DTLS range; `make SANITIZE=... test`,
 * tlc compile of examples/tilus_add_one.json for sm_80), and a build the
 * sanitizers cannot check is not worth 5 ms.  Fills opts, returns how
 * many. */
static int common_opts(const tl_nvrtc *h, const char **opts) {
  int n = 0;
  opts[n++] = "-default-device";
  if (at_least(h, 12, 9))
    opts[n++] = "--no-cache";
  return n;
}
#define COMMON_OPTS_MAX 3

/* Compiles an empty program for `target`; 1 if NVRTC accepts it. */
static int probe_target(tl_nvrtc *h, const char *target) {
  nvrtcProgram prog = NULL;
  if (h->CreateProgram(&prog, "", "probe.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
    return 0;
  char opt[64];
  snprintf(opt, sizeof opt, "--gpu-architecture=%s", target);
  const char *opts[1 + COMMON_OPTS_MAX] = {opt};
  int n = 1 + common_opts(h, opts + 1);
  nvrtcResult r = h->CompileProgram(prog, n, opts);
  h->DestroyProgram(&prog);
  return r == NVRTC_SUCCESS;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static void free_targets(tl_nvrtc *h) {
  for (size_t i = 0; i < h->ntargets; i++)
    free(h->targets[i]);
  free(h->targets);
  h->targets = NULL;
  h->ntargets = 0;
}

/* Builds h->targets from the base list and the variant flags. */
static tl_status build_targets(tl_nvrtc *h, tl_error *err) {
  size_t cap = (size_t)h->narchs * 6;
  h->targets = calloc(cap ? cap : 1, sizeof *h->targets);
  if (!h->targets)
    return tl_error_set(err, TL_NOMEM, "out of memory listing NVRTC targets");
  for (int ptx = 0; ptx < 2; ptx++) {
    for (int i = 0; i < h->narchs; i++) {
      for (int v = 0; v < 3; v++) {
        if ((v == 1 && !h->has_a[i]) || (v == 2 && !h->has_f[i]))
          continue;
        char name[TL_NVRTC_TARGET_MAX];
        target_name(ptx, h->archs[i], v == 1 ? 'a' : v == 2 ? 'f' : 0, name, sizeof name);
        if (!known_target(name))
          continue;
        char *copy = strdup(name);
        if (!copy) {
          free_targets(h);
          return tl_error_set(err, TL_NOMEM, "out of memory listing NVRTC targets");
        }
        h->targets[h->ntargets++] = copy;
      }
    }
  }
  return TL_OK;
}

/* Probes variant v ('a' or 'f') of architecture i unless done already;
 * under h->lock.  The probe compiles to PTX (compute_Nv): the sm_Nv twin
 * follows it (nvrtc.h), and no ptxas run makes it half the cost. */
static int probe_variant_locked(tl_nvrtc *h, int i, char v) {
  unsigned char bit = v == 'a' ? 1 : 2, *has = v == 'a' ? h->has_a : h->has_f;
  if (!(h->tried[i] & bit)) {
    char name[TL_NVRTC_TARGET_MAX];
    has[i] = (unsigned char)(h->archs[i] >= 90 && probe_target(h, target_name(1, h->archs[i], v, name, sizeof name)));
    h->tried[i] |= bit;
  }
  return has[i];
}

/* Runs the probes once (see nvrtc.h): base architectures when NVRTC could
 * not list them, then the 'a' and 'f' variants of those >= 90. */
static tl_status ensure_probed(tl_nvrtc *h, tl_error *err) {
  tl_status st = TL_OK;
  pthread_mutex_lock(&h->lock);
  if (!h->probed) {
    char name[TL_NVRTC_TARGET_MAX];
    if (!h->listed) {
      h->narchs = 0;
      for (size_t i = 0; i < sizeof fallback_archs / sizeof *fallback_archs; i++) {
        if (probe_target(h, target_name(0, fallback_archs[i], 0, name, sizeof name)))
          h->archs[h->narchs++] = fallback_archs[i];
      }
    }
    for (int i = 0; i < h->narchs; i++) {
      if (!h->listed)
        h->tried[i] = 0; /* the list was built just now */
      probe_variant_locked(h, i, 'a');
      probe_variant_locked(h, i, 'f');
    }
    st = build_targets(h, err);
    if (st == TL_OK)
      h->probed = 1;
  }
  pthread_mutex_unlock(&h->lock);
  return st;
}

/* 1 if NVRTC accepts t.  Needs the whole probe only when NVRTC did not
 * list its architectures; a variant is probed alone (one empty compile, not
 * the dozen of the whole probe: a fresh `tlc compile` pays only that). */
static int accepts_target(tl_nvrtc *h, const tl_target *t) {
  if (t->vendor != TL_VENDOR_NVIDIA)
    return 0;
  if (!h->listed && ensure_probed(h, NULL) != TL_OK)
    return 0;
  int i = arch_index(h, t->arch);
  if (i < 0)
    return 0;
  if (!t->variant)
    return 1;
  pthread_mutex_lock(&h->lock);
  int ok = probe_variant_locked(h, i, t->variant);
  pthread_mutex_unlock(&h->lock);
  return ok;
}

int tl_nvrtc_accepts(tl_nvrtc *h, const char *target) {
  tl_target t;
  if (!h || tl_target_parse(target, &t, NULL) != TL_OK)
    return 0;
  return accepts_target(h, &t);
}

tl_status tl_nvrtc_targets(tl_nvrtc *h, const char *const **list, size_t *count, tl_error *err) {
  if (!h || !list || !count)
    return tl_error_set(err, TL_INVALID_ARG, "tl_nvrtc_targets: NULL argument");
  tl_status st = ensure_probed(h, err);
  if (st != TL_OK)
    return st;
  *list = (const char *const *)h->targets;
  *count = h->ntargets;
  return TL_OK;
}

/* ---- opening --------------------------------------------------------- */

/* Resolves every function; returns the name of the first required one
 * missing, or NULL. */
static const char *resolve(tl_nvrtc *h) {
  void *lib = h->lib;
#define REQ(field, sym)                                                                  \
  do {                                                                                   \
    *(void **)&h->field = dlsym(lib, sym);                                               \
    if (!h->field)                                                                       \
      return sym;                                                                        \
  } while (0)
  REQ(GetErrorString, "nvrtcGetErrorString");
  REQ(Version, "nvrtcVersion");
  REQ(CreateProgram, "nvrtcCreateProgram");
  REQ(DestroyProgram, "nvrtcDestroyProgram");
  REQ(CompileProgram, "nvrtcCompileProgram");
  REQ(GetPTXSize, "nvrtcGetPTXSize");
  REQ(GetPTX, "nvrtcGetPTX");
  REQ(GetCUBINSize, "nvrtcGetCUBINSize");
  REQ(GetCUBIN, "nvrtcGetCUBIN");
  REQ(GetProgramLogSize, "nvrtcGetProgramLogSize");
  REQ(GetProgramLog, "nvrtcGetProgramLog");
#undef REQ
  *(void **)&h->GetNumSupportedArchs = dlsym(lib, "nvrtcGetNumSupportedArchs");
  *(void **)&h->GetSupportedArchs = dlsym(lib, "nvrtcGetSupportedArchs");
  return NULL;
}

/* Tries one candidate; on success h->lib is set.  Appends what happened to
 * `tried` otherwise. */
static int try_open(void *ctx, const char *path, char *tried, size_t cap) {
  tl_nvrtc *h = ctx;
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    tl_appendf(tried, cap, "%s%s (%s)", *tried ? ", " : "", path, tl_dl_reason(dlerror()));
    return 0;
  }
  h->lib = lib;
  const char *missing = resolve(h);
  if (missing) {
    tl_appendf(tried, cap, "%s%s (lacks %s)", *tried ? ", " : "", path, missing);
    dlclose(lib);
    h->lib = NULL;
    return 0;
  }
  /* Keep it mapped after dlclose: unloading NVRTC loses its C++ runtime's
   * allocations (and is of no use: the next open would load it again). */
  void *pin = dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  if (pin)
    dlclose(pin);
  snprintf(h->library, sizeof h->library, "%s", path);
  return 1;
}

static const char *const nvrtc_names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11"};
#define NNAMES (sizeof nvrtc_names / sizeof *nvrtc_names)

tl_status tl_nvrtc_open(tl_nvrtc **out, tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_nvrtc_open: NULL argument");
  *out = NULL;
  tl_nvrtc *h = calloc(1, sizeof *h);
  if (!h)
    return tl_error_set(err, TL_NOMEM, "out of memory opening NVRTC");
  char tried[768] = "";
  if (!tl_dl_search("TL_NVRTC", nvrtc_names, NNAMES, "/usr/local/cuda/lib64", try_open, h, tried, sizeof tried)) {
    free(h);
    return tl_error_set(err, TL_NO_TOOLCHAIN,
                        "NVRTC is not available: tried %s; install the CUDA Toolkit's NVRTC "
                        "or set TL_NVRTC to the library's path",
                        tried);
  }
  nvrtcResult r = h->Version(&h->major, &h->minor);
  if (r != NVRTC_SUCCESS) {
    tl_status st = tl_error_set(err, TL_NO_TOOLCHAIN, "nvrtcVersion failed in %s: %s",
                                h->library, nvrtc_errstr(h, r));
    dlclose(h->lib);
    free(h);
    return st;
  }
  int n = 0;
  if (h->GetNumSupportedArchs && h->GetSupportedArchs &&
      h->GetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0 && n <= MAX_ARCHS) {
    int tmp[MAX_ARCHS];
    if (h->GetSupportedArchs(tmp) == NVRTC_SUCCESS) {
      qsort(tmp, (size_t)n, sizeof *tmp, cmp_int);
      for (int i = 0; i < n; i++)
        if (tmp[i] >= 10 && tmp[i] <= 999 && (h->narchs == 0 || h->archs[h->narchs - 1] != tmp[i]))
          h->archs[h->narchs++] = tmp[i];
      h->listed = h->narchs > 0;
    }
  }
  pthread_mutex_init(&h->lock, NULL);
  *out = h;
  return TL_OK;
}

void tl_nvrtc_close(tl_nvrtc *h) {
  if (!h)
    return;
  free_targets(h);
  pthread_mutex_destroy(&h->lock);
  if (h->lib)
    dlclose(h->lib);
  free(h);
}

void tl_nvrtc_version(const tl_nvrtc *h, int *major, int *minor) {
  if (major)
    *major = h ? h->major : 0;
  if (minor)
    *minor = h ? h->minor : 0;
}

const char *tl_nvrtc_library(const tl_nvrtc *h) { return h ? h->library : ""; }

/* ---- compiling ------------------------------------------------------- */

void tl_nvrtc_result_free(tl_nvrtc_result *r) {
  if (!r)
    return;
  free(r->code);
  free(r->log);
  memset(r, 0, sizeof *r);
}

/* Fetches the program's log (malloc'd, NUL-terminated, maybe ""). */
static char *fetch_log(tl_nvrtc *h, nvrtcProgram prog) {
  size_t n = 0;
  if (h->GetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n > TL_NVRTC_MAX_OUTPUT)
    n = 0;
  char *log = malloc(n + 1);
  if (!log)
    return NULL;
  if (n == 0 || h->GetProgramLog(prog, log) != NVRTC_SUCCESS)
    n = 0;
  log[n] = 0;
  return log;
}

/* Is opt one that names the architecture (which the target does)? */
static int names_arch(const char *opt) {
  static const char *const prefixes[] = {"-arch", "--gpu-architecture", "-gpu-architecture",
                                         "--gpu-name"};
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
    size_t n = strlen(prefixes[i]);
    if (strncmp(opt, prefixes[i], n) == 0 && (opt[n] == 0 || opt[n] == '=' || opt[n] == ' '))
      return 1;
  }
  return 0;
}

/* Does line [p, p+n) contain "error"? */
static int memmem_error(const char *p, size_t n) {
  for (size_t i = 0; i + 5 <= n; i++)
    if (memcmp(p + i, "error", 5) == 0)
      return 1;
  return 0;
}

/* Lists the accepted targets into buf, for an error message. */
static void list_targets(tl_nvrtc *h, char *buf, size_t cap) {
  buf[0] = 0;
  if (ensure_probed(h, NULL) != TL_OK) {
    tl_appendf(buf, cap, "(unknown)");
    return;
  }
  for (size_t i = 0; i < h->ntargets; i++)
    tl_appendf(buf, cap, "%s%s", i ? ", " : "", h->targets[i]);
}

/* Copies what matters of a log into buf for an error message: its lines
 * that say "error" (ptxas's verbose report can come first), else its start;
 * at most `limit` bytes, "..." when cut. */
static void log_excerpt(const char *log, char *buf, size_t cap, size_t limit) {
  if (limit >= cap)
    limit = cap - 1;
  buf[0] = 0;
  size_t len = 0;
  int cut = 0;
  for (int pass = 0; pass < 2 && len == 0; pass++) {
    for (const char *p = log ? log : ""; *p && !cut;) {
      const char *end = strchr(p, '\n');
      size_t n = end ? (size_t)(end - p) : strlen(p);
      int blank = 1;
      for (size_t i = 0; i < n; i++)
        blank &= p[i] == ' ' || p[i] == '\r' || p[i] == '\t';
      int want = !blank && (pass == 1 || memmem_error(p, n));
      if (want) {
        size_t sep = len ? 1 : 0;
        if (len + sep >= limit) {
          cut = 1;
          break;
        }
        size_t room = limit - len - sep;
        if (n > room) {
          n = room;
          cut = 1;
        }
        if (len)
          buf[len++] = '\n';
        memcpy(buf + len, p, n);
        len += n;
        buf[len] = 0;
      }
      p = end ? end + 1 : p + n;
    }
  }
  if (cut)
    tl_appendf(buf, cap, " ...");
}

tl_status tl_nvrtc_compile(tl_nvrtc *h, const char *src, const char *name, const char *target,
                           const char *const *extra_opts, int nopts, tl_nvrtc_result *out,
                           tl_error *err) {
  if (out)
    memset(out, 0, sizeof *out);
  if (!h || !src || !target)
    return tl_error_set(err, TL_INVALID_ARG, "tl_nvrtc_compile: NULL handle, source or target");
  if (!name)
    name = "kernel.cu";
  if (strnlen(name, TL_NVRTC_MAX_NAME) >= TL_NVRTC_MAX_NAME || !*name)
    return tl_error_set(err, TL_INVALID_ARG, "source name is empty or longer than %d bytes",
                        TL_NVRTC_MAX_NAME - 1);
  if (strnlen(src, TL_NVRTC_MAX_SOURCE + 1u) > TL_NVRTC_MAX_SOURCE)
    return tl_error_set(err, TL_TOO_LARGE, "source %s is larger than %u bytes", name,
                        TL_NVRTC_MAX_SOURCE);
  if (nopts < 0 || nopts > TL_NVRTC_MAX_OPTS || (nopts > 0 && !extra_opts))
    return tl_error_set(err, TL_LIMIT, "between 0 and %d extra NVRTC options are allowed, got %d",
                        TL_NVRTC_MAX_OPTS, nopts);
  for (int i = 0; i < nopts; i++) {
    if (!extra_opts[i])
      return tl_error_set(err, TL_INVALID_ARG, "extra NVRTC option %d is NULL", i);
    if (strnlen(extra_opts[i], TL_NVRTC_MAX_OPT_LEN) >= TL_NVRTC_MAX_OPT_LEN)
      return tl_error_set(err, TL_LIMIT, "extra NVRTC option %d is longer than %d bytes", i,
                          TL_NVRTC_MAX_OPT_LEN - 1);
    if (names_arch(extra_opts[i]))
      return tl_error_set(err, TL_INVALID_ARG,
                          "option '%.64s' names the architecture; give it as the target instead",
                          extra_opts[i]);
  }

  tl_target t;
  tl_error perr;
  tl_status st = tl_target_parse(target, &t, &perr);
  if (st == TL_INVALID_ARG) { /* not a target name at all */
    if (err)
      *err = perr;
    return st;
  }
  const char *tname = st == TL_OK ? t.name : target; /* TL_UNSUPPORTED: not in the target table */
  if (st != TL_OK || !accepts_target(h, &t)) {
    char accepted[640];
    list_targets(h, accepted, sizeof accepted);
    return tl_error_set(err, TL_INVALID_ARG, "target %.64s is not accepted by NVRTC %d.%d (%s); it accepts %s",
                        tname, h->major, h->minor, h->library, accepted);
  }

  char archopt[64];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", tname);
  const char *opts[3 + COMMON_OPTS_MAX + TL_NVRTC_MAX_OPTS];
  int nall = 0;
  opts[nall++] = archopt;
  opts[nall++] = "--std=c++17";
  nall += common_opts(h, opts + nall);
  int verbose = !(t.binary == TL_BINARY_PTX), at_verbose = nall;
  if (verbose)
    opts[nall++] = "--ptxas-options=--verbose";
  for (int i = 0; i < nopts; i++)
    opts[nall++] = extra_opts[i];

  double t0 = now_ms();
  nvrtcProgram prog = NULL;
  nvrtcResult r = h->CreateProgram(&prog, src, name, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS)
    return tl_error_set(err, r == NVRTC_ERROR_OUT_OF_MEMORY ? TL_NOMEM : TL_TOOLCHAIN,
                        "nvrtcCreateProgram failed for %s: %s", name, nvrtc_errstr(h, r));
  r = h->CompileProgram(prog, nall, opts);
  char *log = fetch_log(h, prog);
  if (!log) {
    h->DestroyProgram(&prog);
    return tl_error_set(err, TL_NOMEM, "out of memory reading the NVRTC log");
  }
  if (r != NVRTC_SUCCESS && verbose && !memmem_error(log, strlen(log))) {
    /* NVRTC 13.0 drops ptxas's error messages from the log when ptxas is
     * verbose: compile once more without it to say what went wrong. */
    nvrtcProgram again = NULL;
    if (h->CreateProgram(&again, src, name, 0, NULL, NULL) == NVRTC_SUCCESS) {
      memmove(&opts[at_verbose], &opts[at_verbose + 1], (size_t)(nall - at_verbose - 1) * sizeof *opts); /* drop --verbose */
      r = h->CompileProgram(again, nall - 1, opts);
      char *log2 = r != NVRTC_SUCCESS ? fetch_log(h, again) : NULL;
      if (log2) {
        free(log);
        log = log2;
      }
      h->DestroyProgram(&prog);
      prog = again;
      if (r == NVRTC_SUCCESS) /* should not happen; report it as it was */
        r = NVRTC_ERROR_COMPILATION;
    }
  }
  if (r != NVRTC_SUCCESS) {
    char excerpt[760];
    log_excerpt(log, excerpt, sizeof excerpt, 700);
    st = tl_error_set(err, r == NVRTC_ERROR_INVALID_OPTION ? TL_INVALID_ARG : TL_TOOLCHAIN,
                      "NVRTC %d.%d could not compile %s for %s (%s)%s%s", h->major, h->minor,
                      name, tname, nvrtc_errstr(h, r), *excerpt ? ":\n" : "", excerpt);
    h->DestroyProgram(&prog);
    if (out) {
      out->log = log;
      out->log_len = strlen(log);
      snprintf(out->target, sizeof out->target, "%s", tname);
    } else {
      free(log);
    }
    return st;
  }

  size_t size = 0;
  r = (t.binary == TL_BINARY_PTX) ? h->GetPTXSize(prog, &size) : h->GetCUBINSize(prog, &size);
  unsigned char *code = NULL;
  if (r == NVRTC_SUCCESS && size > 0 && size <= TL_NVRTC_MAX_OUTPUT) {
    code = malloc(size + 1);
    if (!code) {
      h->DestroyProgram(&prog);
      free(log);
      return tl_error_set(err, TL_NOMEM, "out of memory for %zu bytes of NVRTC output", size);
    }
    r = (t.binary == TL_BINARY_PTX) ? h->GetPTX(prog, (char *)code) : h->GetCUBIN(prog, (char *)code);
    code[size] = 0;
  }
  h->DestroyProgram(&prog);
  double t1 = now_ms();
  if (r != NVRTC_SUCCESS || size == 0 || size > TL_NVRTC_MAX_OUTPUT) {
    free(code);
    free(log);
    if (size > TL_NVRTC_MAX_OUTPUT)
      return tl_error_set(err, TL_TOO_LARGE, "NVRTC output for %s is %zu bytes, over the limit of %u",
                          name, size, TL_NVRTC_MAX_OUTPUT);
    return tl_error_set(err, TL_TOOLCHAIN, "NVRTC gave no %s for %s (%s)",
                        (t.binary == TL_BINARY_PTX) ? "PTX" : "cubin", name,
                        r != NVRTC_SUCCESS ? nvrtc_errstr(h, r) : "empty output");
  }
  if (t.binary == TL_BINARY_PTX) /* NVRTC counts the PTX's terminating NUL */
    size = strnlen((const char *)code, size);
  if (!out) {
    free(code);
    free(log);
    return TL_OK;
  }
  out->code = code;
  out->code_size = size;
  out->is_ptx = (t.binary == TL_BINARY_PTX);
  out->log = log;
  out->log_len = strlen(log);
  out->wall_ms = t1 - t0;
  snprintf(out->target, sizeof out->target, "%s", tname);
  return TL_OK;
}

/* ---- ptxas's report -------------------------------------------------- */

/* The number just before `what` in line [p, end), or -1. */
static long number_before(const char *p, const char *end, const char *what) {
  size_t wl = strlen(what);
  for (const char *q = p; q + wl <= end; q++) {
    if (memcmp(q, what, wl) != 0)
      continue;
    const char *e = q;
    while (e > p && e[-1] == ' ')
      e--;
    const char *b = e;
    while (b > p && b[-1] >= '0' && b[-1] <= '9')
      b--;
    if (b == e || e - b > 15)
      return -1;
    long v = 0;
    for (const char *d = b; d < e; d++)
      v = v * 10 + (*d - '0');
    return v;
  }
  return -1;
}

/* The number just after `what` in line [p, end), or -1. */
static long number_after(const char *p, const char *end, const char *what) {
  size_t wl = strlen(what);
  for (const char *q = p; q + wl <= end; q++) {
    if (memcmp(q, what, wl) != 0)
      continue;
    const char *d = q + wl;
    while (d < end && *d == ' ')
      d++;
    long v = -1;
    int nd = 0;
    while (d < end && *d >= '0' && *d <= '9' && nd < 15) {
      v = (v < 0 ? 0 : v * 10) + (*d - '0');
      d++;
      nd++;
    }
    return v;
  }
  return -1;
}

/* Does line [p, end) contain `pre` immediately followed by `name` and then
 * `post`? */
static int line_names(const char *p, const char *end, const char *pre, const char *name,
                      const char *post) {
  size_t pl = strlen(pre), nl = strlen(name), ql = strlen(post);
  for (const char *q = p; q + pl + nl + ql <= end; q++)
    if (memcmp(q, pre, pl) == 0 && memcmp(q + pl, name, nl) == 0 &&
        memcmp(q + pl + nl, post, ql) == 0)
      return 1;
  return 0;
}

tl_status tl_ptxas_stats_parse(const char *log, const char *kernel, tl_ptxas_stats *out,
                               tl_error *err) {
  if (!log || !kernel || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_ptxas_stats_parse: NULL argument");
  tl_ptxas_stats s = {-1, -1, -1, -1, 0, 0};
  int in_kernel = 0, found = 0, props = 0;
  for (const char *p = log; *p;) {
    const char *end = strchr(p, '\n');
    if (!end)
      end = p + strlen(p);
    if (line_names(p, end, "Compiling entry function '", "", "")) {
      if (in_kernel)
        break; /* the next kernel's report begins */
      in_kernel = line_names(p, end, "Compiling entry function '", kernel, "'");
      found |= in_kernel;
    } else if (in_kernel) {
      if (line_names(p, end, "Function properties for ", kernel, "")) {
        /* the name must end the line */
        const char *e = end;
        while (e > p && (e[-1] == ' ' || e[-1] == '\r'))
          e--;
        size_t kl = strlen(kernel);
        props = (size_t)(e - p) >= kl && memcmp(e - kl, kernel, kl) == 0 && e - kl > p &&
                e[-(long)kl - 1] == ' ';
      } else if (props && number_before(p, end, "bytes stack frame") >= 0) {
        s.stack_frame_bytes = number_before(p, end, "bytes stack frame");
        s.spill_store_bytes = number_before(p, end, "bytes spill stores");
        s.spill_load_bytes = number_before(p, end, "bytes spill loads");
        props = 0;
      } else {
        props = 0;
        long regs = number_after(p, end, "Used ");
        if (regs >= 0 && number_before(p, end, "registers") >= 0) {
          s.registers = regs;
          long b = number_after(p, end, "used ");
          s.barriers = b >= 0 && number_before(p, end, "barriers") >= 0 ? b : 0;
          long sm = number_before(p, end, "bytes smem");
          s.shared_bytes = sm >= 0 ? sm : 0;
        }
      }
    }
    p = *end ? end + 1 : end;
  }
  if (!found || s.registers < 0)
    return tl_error_set(err, TL_NOT_FOUND, "the log has no ptxas report for kernel '%.200s'", kernel);
  *out = s;
  return TL_OK;
}

/* ---- the NVIDIA entry of the toolchain table (toolchain.h) ------------- */

static tl_status nv_open(void **h, tl_error *err) { return tl_nvrtc_open((tl_nvrtc **)h, err); }

static void nv_describe(void *h, char *buf, size_t cap) {
  int major = 0, minor = 0;
  tl_nvrtc_version(h, &major, &minor);
  snprintf(buf, cap, "NVRTC %d.%d (%s)", major, minor, tl_nvrtc_library(h));
}

static tl_status nv_targets(void *h, const char *const **list, size_t *count, tl_error *err) {
  return tl_nvrtc_targets(h, list, count, err);
}

static int nv_accepts(void *h, const char *target) { return tl_nvrtc_accepts(h, target); }

static const char *nv_refusal(void *h, const char *target) {
  (void)h, (void)target; /* NVRTC's targets are listed, not probed one by one: nothing to explain */
  return NULL;
}

static tl_status nv_compile(void *h, const char *src, const tl_target *t, const tl_toolchain_opts *o,
                            tl_toolchain_out *out, tl_error *err) {
  const char *opts[4];
  int nopts = 0;
  opts[nopts++] = "--diag-suppress=177"; /* unused prelude helpers are expected */
  char reg[32];
  if (o->max_registers) {
    snprintf(reg, sizeof reg, "--maxrregcount=%d", o->max_registers);
    opts[nopts++] = reg;
  }
  if (o->debug)
    opts[nopts++] = "-lineinfo";
  char fast[32];
  if (o->fast_compile) { /* "min", "mid" or "max" (compile.c) */
    int major = 0, minor = 0;
    tl_nvrtc_version(h, &major, &minor);
    if (major < 12 || (major == 12 && minor < 8))
      return tl_error_set(err, TL_UNSUPPORTED, "the option fast_compile needs NVRTC 12.8 or newer; this is NVRTC %d.%d",
                          major, minor);
    snprintf(fast, sizeof fast, "--Ofast-compile=%s", o->fast_compile);
    opts[nopts++] = fast;
  }
  tl_nvrtc_result r = {0};
  tl_status st = tl_nvrtc_compile(h, src, "kernel.cu", t->name, opts, nopts, &r, err);
  if (st == TL_OK) {
    out->code = r.code;
    out->size = r.code_size;
    out->log = r.log;
    r.code = NULL;
    r.log = NULL;
  }
  tl_nvrtc_result_free(&r);
  return st;
}

/* The resources of a cubin: registers, shared and local memory and the
 * stack frame from its own records; the spill stores and loads, which no
 * record of the cubin holds, from ptxas's report, which every cubin NVRTC
 * built has in its log now that NVRTC's own cache is off (nvrtc.h).  None
 * for PTX. */
tl_status tl_nv_cubin_resources(void *h, const tl_target *t, const tl_toolchain_out *b, const char *kernel, int nparams,
                                json_t **resources, tl_error *err) {
  (void)h, (void)nparams; /* a cubin's records do not count the arguments */
  json_t *res = json_object();
  if (t->binary == TL_BINARY_CUBIN) {
    tl_cubin_info ci = {0};
    tl_status st = tl_cubin_inspect(b->code, b->size, &ci, err);
    if (st != TL_OK) {
      json_decref(res);
      return st;
    }
    const tl_cubin_kernel *k = tl_cubin_find(&ci, kernel);
    if (k) {
      json_object_set_new(res, "registers", json_integer(k->registers));
      json_object_set_new(res, "static_shared_bytes", json_integer(k->shared_bytes));
      json_object_set_new(res, "local_bytes", json_integer(k->local_bytes));
      json_object_set_new(res, "stack_frame_bytes", json_integer(k->local_bytes)); /* EIATTR_FRAME_SIZE */
      if (k->nparams) { /* where each parameter goes in the parameter buffer (EIATTR_KPARAM_INFO) */
        json_t *offs = json_array();
        for (int i = 0; i < k->nparams; i++)
          json_array_append_new(offs, json_integer(k->param_offset[i]));
        json_object_set_new(res, "param_offsets", offs);
      }
    }
    tl_cubin_info_free(&ci);
    tl_ptxas_stats ps;
    if (tl_ptxas_stats_parse(b->log, kernel, &ps, NULL) == TL_OK) {
      json_object_set_new(res, "spill_store_bytes", json_integer(ps.spill_store_bytes));
      json_object_set_new(res, "spill_load_bytes", json_integer(ps.spill_load_bytes));
    }
  }
  *resources = res;
  return TL_OK;
}

const tl_toolchain_ops tl_toolchain_nvrtc = {
    .vendor = TL_VENDOR_NVIDIA,
    .name = "NVRTC",
    .open = nv_open,
    .describe = nv_describe,
    .targets = nv_targets,
    .accepts = nv_accepts,
    .refusal = nv_refusal,
    .compile = nv_compile,
    .inspect = tl_nv_cubin_resources,
};
