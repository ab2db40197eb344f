/*
 * amdgpu.c - the AMD toolchain driver of amdgpu.h and its entry of the
 * toolchain table (toolchain.h): the gfx targets of target.h's table that
 * it offers, hiprtc opened with dlopen, clang and ld.lld run as time-limited
 * subprocesses in a private temporary directory, the lazy target probe,
 * the offload-bundle reader (for hiprtc output) and llvm-objdump.
 *
 * The hiprtc types and functions used here are declared locally (no ROCm
 * header), from ROCm 6's hiprtc.h: hiprtcResult is an int enum whose 0 is
 * success, a program is an opaque pointer.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlutil.h"
#include "amdgpu.h"
#include "procs.h"
#include "hsaco.h"
#include "toolchain.h"

/* ---- the targets ---------------------------------------------------------- */

/* The AMD rows of the target table (target.c keeps them together, after
 * NVIDIA's): the targets this driver may offer. */
static const tl_target *known_targets;
static size_t nknown;
static pthread_once_t known_once = PTHREAD_ONCE_INIT;

static void known_build(void) {
  size_t all;
  const tl_target *t = tl_target_table(&all);
  size_t first = 0;
  while (first < all && t[first].vendor != TL_VENDOR_AMD)
    first++;
  known_targets = t + first;
  nknown = all - first;
}

/* The index of the known target called name in known_targets, or -1. */
static int known_index(const char *name) {
  pthread_once(&known_once, known_build);
  for (size_t i = 0; name && i < nknown; i++)
    if (strcmp(known_targets[i].name, name) == 0)
      return (int)i;
  return -1;
}

/* ---- hiprtc's ABI ------------------------------------------------------------ */

typedef int hiprtcResult;
typedef struct hiprtc_program_ *hiprtcProgram;
enum { HIPRTC_SUCCESS = 0, HIPRTC_ERROR_OUT_OF_MEMORY = 1, HIPRTC_ERROR_INVALID_OPTION = 5 };

typedef const char *(*fn_GetErrorString)(hiprtcResult);
typedef hiprtcResult (*fn_Version)(int *, int *);
typedef hiprtcResult (*fn_CreateProgram)(hiprtcProgram *, const char *, const char *, int, const char *const *,
                                         const char *const *);
typedef hiprtcResult (*fn_DestroyProgram)(hiprtcProgram *);
typedef hiprtcResult (*fn_CompileProgram)(hiprtcProgram, int, const char *const *);
typedef hiprtcResult (*fn_GetSize)(hiprtcProgram, size_t *);
typedef hiprtcResult (*fn_GetBytes)(hiprtcProgram, char *);

struct tl_amdgpu {
  tl_amdgpu_kind kind;
  char desc[PATH_MAX + 64];
  int major, minor;
  long timeout_ms;

  /* clang */
  char clang[PATH_MAX];
  char lld[PATH_MAX];

  /* hiprtc */
  void *lib;
  char library[PATH_MAX];
  fn_GetErrorString GetErrorString;
  fn_Version Version;
  fn_CreateProgram CreateProgram;
  fn_DestroyProgram DestroyProgram;
  fn_CompileProgram CompileProgram;
  fn_GetSize GetCodeSize, GetProgramLogSize;
  fn_GetBytes GetCode, GetProgramLog;

  /* Filled once by ensure_probed() under lock, read-only afterwards. */
  pthread_mutex_t lock;
  int probed;
  unsigned char accepted[TL_TARGET_ROWS_MAX];
  char refusal[TL_TARGET_ROWS_MAX][PATH_MAX + 256]; /* why not, where !accepted[i] */
  const char *targets[TL_TARGET_ROWS_MAX + 1];
  size_t ntargets;
};

/* ---- the log -------------------------------------------------------------- */

static int has_error(const char *p, size_t n) {
  for (size_t i = 0; i + 5 <= n; i++)
    if (memcmp(p + i, "error", 5) == 0)
      return 1;
  return 0;
}

/* The lines of log that say "error" (else its start), at most limit bytes,
 * for an error message. */
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
      if (!blank && (pass == 1 || has_error(p, n))) {
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

/* ---- clang ------------------------------------------------------------------ */

#define CLANG_MIN 19
#define CLANG_MAX 22

/* Runs `clang --version` and reads "clang version X.Y.Z". */
static int clang_version(const char *path, int v[3]) {
  char *argv[] = {(char *)path, "--version", NULL};
  char *text = NULL;
  int code = -1;
  if (tl_proc_run_capture(argv, tl_proc_now_ms() + 20000, 4096, &code, &text, NULL) != TL_OK || code != 0) {
    free(text);
    return 0;
  }
  const char *p = strstr(text, "clang version ");
  int ok = p && sscanf(p + 14, "%d.%d.%d", &v[0], &v[1], &v[2]) == 3;
  free(text);
  return ok;
}

/* Finds ld.lld for clang major version `major` installed at clang_path. */
static int find_lld(const char *clang_path, int major, char *out, size_t cap) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", clang_path);
  char *slash = strrchr(dir, '/');
  if (slash) {
    *slash = 0;
    if (snprintf(out, cap, "%s/ld.lld-%d", dir, major) < (int)cap && tl_proc_is_exec(out))
      return 1;
    if (snprintf(out, cap, "%s/ld.lld", dir) < (int)cap && tl_proc_is_exec(out))
      return 1;
  }
  char name[32];
  snprintf(name, sizeof name, "ld.lld-%d", major);
  if (tl_proc_find_on_path(name, out, cap))
    return 1;
  snprintf(out, cap, "/usr/lib/llvm-%d/bin/ld.lld", major);
  if (tl_proc_is_exec(out))
    return 1;
  out[0] = 0;
  return 0;
}

/* Tries clang at path: usable when it runs, is 19 or newer, and has an
 * ld.lld.  Appends to `tried` otherwise. */
static int try_clang(tl_amdgpu *h, const char *path, char *tried, size_t cap) {
  if (!tl_proc_is_exec(path)) {
    tl_appendf(tried, cap, "%s%s (not found)", *tried ? ", " : "", path);
    return 0;
  }
  int v[3];
  if (!clang_version(path, v)) {
    tl_appendf(tried, cap, "%s%s (no clang version in its --version)", *tried ? ", " : "", path);
    return 0;
  }
  if (v[0] < CLANG_MIN) {
    tl_appendf(tried, cap, "%s%s (clang %d.%d.%d, older than %d)", *tried ? ", " : "", path, v[0], v[1], v[2],
            CLANG_MIN);
    return 0;
  }
  if (!find_lld(path, v[0], h->lld, sizeof h->lld)) {
    tl_appendf(tried, cap, "%s%s (clang %d but no ld.lld-%d beside it, on PATH or in /usr/lib/llvm-%d/bin)",
            *tried ? ", " : "", path, v[0], v[0], v[0]);
    return 0;
  }
  snprintf(h->clang, sizeof h->clang, "%s", path);
  h->kind = TL_AMDGPU_CLANG;
  h->major = v[0];
  h->minor = v[1];
  snprintf(h->desc, sizeof h->desc, "clang %d.%d.%d (%s)", v[0], v[1], v[2], path);
  return 1;
}

static int open_clang(tl_amdgpu *h, char *tried, size_t cap) {
  const char *env = getenv("TL_CLANG");
  if (env) {
    if (!*env) {
      tl_appendf(tried, cap, "%sTL_CLANG is set but empty", *tried ? ", " : "");
      return 0;
    }
    return try_clang(h, env, tried, cap);
  }
  char path[PATH_MAX];
  for (int m = CLANG_MAX; m >= CLANG_MIN; m--) {
    char name[32];
    snprintf(name, sizeof name, "clang-%d", m);
    if (tl_proc_find_on_path(name, path, sizeof path) && try_clang(h, path, tried, cap))
      return 1;
  }
  for (int m = CLANG_MAX; m >= CLANG_MIN; m--) {
    snprintf(path, sizeof path, "/usr/lib/llvm-%d/bin/clang", m);
    if (tl_proc_is_exec(path) && try_clang(h, path, tried, cap))
      return 1;
  }
  tl_appendf(tried, cap, "%sclang-%d..clang-%d on PATH and in /usr/lib/llvm-N/bin (none found)", *tried ? ", " : "",
          CLANG_MIN, CLANG_MAX);
  return 0;
}

/* ---- hiprtc ------------------------------------------------------------------ */

static const char *resolve(tl_amdgpu *h) {
#define REQ(field, sym)                                                                            \
  do {                                                                                             \
    *(void **)&h->field = dlsym(h->lib, sym);                                                      \
    if (!h->field)                                                                                 \
      return sym;                                                                                  \
  } while (0)
  REQ(GetErrorString, "hiprtcGetErrorString");
  REQ(Version, "hiprtcVersion");
  REQ(CreateProgram, "hiprtcCreateProgram");
  REQ(DestroyProgram, "hiprtcDestroyProgram");
  REQ(CompileProgram, "hiprtcCompileProgram");
  REQ(GetCodeSize, "hiprtcGetCodeSize");
  REQ(GetCode, "hiprtcGetCode");
  REQ(GetProgramLogSize, "hiprtcGetProgramLogSize");
  REQ(GetProgramLog, "hiprtcGetProgramLog");
#undef REQ
  return NULL;
}

static int try_hiprtc(tl_amdgpu *h, const char *path, char *tried, size_t cap) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    tl_appendf(tried, cap, "%s%s (%s)", *tried ? ", " : "", path, tl_dl_reason(dlerror()));
    return 0;
  }
  h->lib = lib;
  const char *missing = resolve(h);
  int major = 0, minor = 0;
  if (missing || h->Version(&major, &minor) != HIPRTC_SUCCESS) {
    tl_appendf(tried, cap, "%s%s (%s%s)", *tried ? ", " : "", path, missing ? "lacks " : "hiprtcVersion failed",
            missing ? missing : "");
    dlclose(lib);
    h->lib = NULL;
    return 0;
  }
  /* Keep it mapped: unloading a C++ runtime library is of no use here. */
  void *pin = dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  if (pin)
    dlclose(pin);
  snprintf(h->library, sizeof h->library, "%s", path);
  h->kind = TL_AMDGPU_HIPRTC;
  h->major = major;
  h->minor = minor;
  snprintf(h->desc, sizeof h->desc, "hiprtc %d.%d (%s)", major, minor, path);
  return 1;
}

static const char *const hiprtc_names[] = {"libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5"};
#define NHIPRTC (sizeof hiprtc_names / sizeof *hiprtc_names)

static int try_hiprtc_dir(tl_amdgpu *h, const char *dir, char *tried, size_t cap) {
  for (size_t i = 0; i < NHIPRTC; i++) {
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", dir, hiprtc_names[i]);
    if (n > 0 && (size_t)n < sizeof path && try_hiprtc(h, path, tried, cap))
      return 1;
  }
  return 0;
}

static int open_hiprtc(tl_amdgpu *h, char *tried, size_t cap) {
  const char *env = getenv("TL_HIPRTC");
  if (env) {
    struct stat sb;
    if (!*env) {
      tl_appendf(tried, cap, "%sTL_HIPRTC is set but empty", *tried ? ", " : "");
      return 0;
    }
    if (stat(env, &sb) == 0 && S_ISDIR(sb.st_mode))
      return try_hiprtc_dir(h, env, tried, cap);
    return try_hiprtc(h, env, tried, cap);
  }
  for (size_t i = 0; i < NHIPRTC; i++)
    if (try_hiprtc(h, hiprtc_names[i], tried, cap))
      return 1;
  return try_hiprtc_dir(h, "/opt/rocm/lib", tried, cap);
}

static const char *hiprtc_errstr(const tl_amdgpu *h, hiprtcResult r) {
  const char *s = h->GetErrorString ? h->GetErrorString(r) : NULL;
  return s ? s : "unknown hiprtc error";
}

/* ---- opening ------------------------------------------------------------------ */

tl_status tl_amdgpu_open(tl_amdgpu **out, tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_amdgpu_open: NULL argument");
  *out = NULL;
  tl_amdgpu *h = calloc(1, sizeof *h);
  if (!h)
    return tl_error_set(err, TL_NOMEM, "out of memory opening the AMD toolchain");
  h->timeout_ms = TL_AMDGPU_TIMEOUT_MS;
  char tried_rtc[768] = "", tried_clang[768] = "";
  if (!open_hiprtc(h, tried_rtc, sizeof tried_rtc) && !open_clang(h, tried_clang, sizeof tried_clang)) {
    free(h);
    return tl_error_set(err, TL_NO_TOOLCHAIN,
                        "no AMD toolchain: hiprtc: tried %s; clang: tried %s; install ROCm's hiprtc, or clang-19 "
                        "and lld-19 (deploy/install-deps.sh), or set TL_HIPRTC or TL_CLANG",
                        tried_rtc, tried_clang);
  }
  pthread_mutex_init(&h->lock, NULL);
  *out = h;
  return TL_OK;
}

void tl_amdgpu_close(tl_amdgpu *h) {
  if (!h)
    return;
  pthread_mutex_destroy(&h->lock);
  if (h->lib)
    dlclose(h->lib);
  free(h);
}

tl_amdgpu_kind tl_amdgpu_toolchain_kind(const tl_amdgpu *h) { return h ? h->kind : 0; }
const char *tl_amdgpu_description(const tl_amdgpu *h) { return h ? h->desc : ""; }

void tl_amdgpu_version(const tl_amdgpu *h, int *major, int *minor) {
  if (major)
    *major = h ? h->major : 0;
  if (minor)
    *minor = h ? h->minor : 0;
}

void tl_amdgpu_set_timeout(tl_amdgpu *h, long ms) {
  if (h)
    h->timeout_ms = ms < 1 ? 1 : ms;
}

/* ---- targets ----------------------------------------------------------------- */

static int hiprtc_probe(tl_amdgpu *h, const char *target) {
  hiprtcProgram prog = NULL;
  if (h->CreateProgram(&prog, "", "probe.hip", 0, NULL, NULL) != HIPRTC_SUCCESS)
    return 0;
  char opt[64];
  snprintf(opt, sizeof opt, "--offload-arch=%s", target);
  const char *opts[] = {opt};
  hiprtcResult r = h->CompileProgram(prog, 1, opts);
  h->DestroyProgram(&prog);
  return r == HIPRTC_SUCCESS;
}

/* clang: every known target at once, `-fsyntax-only` of an empty source. */
static void clang_probe(tl_amdgpu *h) {
  pid_t pids[TL_TARGET_ROWS_MAX];
  double deadline = tl_proc_now_ms() + 30000;
  for (size_t i = 0; i < nknown; i++) {
    char arch[64];
    snprintf(arch, sizeof arch, "--offload-arch=%s", known_targets[i].name);
    char *argv[] = {h->clang, "-x", "hip", "--cuda-device-only", "-nogpulib", "-nogpuinc", arch, "-fsyntax-only",
                    "/dev/null", NULL};
    if (tl_proc_spawn(argv, -1, NULL, &pids[i], NULL) != TL_OK)
      pids[i] = -1;
  }
  for (size_t i = 0; i < nknown; i++) {
    int status = 0;
    h->accepted[i] = pids[i] > 0 && tl_proc_await(pids[i], deadline, "clang", &status, NULL) == TL_OK &&
                     WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
}

/* Why the probe refused known target t. */
static void explain_refusal(tl_amdgpu *h, const tl_target *t, char *out, size_t cap) {
  if (h->kind == TL_AMDGPU_CLANG && h->major < t->min_clang)
    snprintf(out, cap, "%s does not know %s (LLVM added it in clang %d): it needs clang %d or newer, or ROCm's hiprtc",
             h->desc, t->name, t->min_clang, t->min_clang);
  else if (h->kind == TL_AMDGPU_CLANG)
    snprintf(out, cap, "%s refused --offload-arch=%s (an empty source did not compile for it)", h->desc, t->name);
  else
    snprintf(out, cap, "%s does not accept %s: it needs a ROCm whose hiprtc knows it, or clang %d or newer", h->desc,
             t->name, t->min_clang);
}

static void ensure_probed(tl_amdgpu *h) {
  pthread_once(&known_once, known_build);
  pthread_mutex_lock(&h->lock);
  if (!h->probed) {
    if (h->kind == TL_AMDGPU_HIPRTC)
      for (size_t i = 0; i < nknown; i++)
        h->accepted[i] = (unsigned char)hiprtc_probe(h, known_targets[i].name);
    else
      clang_probe(h);
    h->ntargets = 0;
    for (size_t i = 0; i < nknown; i++)
      if (h->accepted[i])
        h->targets[h->ntargets++] = known_targets[i].name;
      else
        explain_refusal(h, &known_targets[i], h->refusal[i], sizeof h->refusal[i]);
    h->targets[h->ntargets] = NULL;
    h->probed = 1;
  }
  pthread_mutex_unlock(&h->lock);
}

tl_status tl_amdgpu_targets(tl_amdgpu *h, const char *const **list, size_t *count, tl_error *err) {
  if (!h || !list || !count)
    return tl_error_set(err, TL_INVALID_ARG, "tl_amdgpu_targets: NULL argument");
  ensure_probed(h);
  *list = h->targets;
  *count = h->ntargets;
  return TL_OK;
}

int tl_amdgpu_accepts(tl_amdgpu *h, const char *target) {
  int i = known_index(target);
  if (!h || i < 0)
    return 0;
  ensure_probed(h);
  return h->accepted[i];
}

const char *tl_amdgpu_refusal(tl_amdgpu *h, const char *target) {
  int i = known_index(target);
  if (!h || i < 0)
    return NULL;
  ensure_probed(h);
  return h->accepted[i] ? NULL : h->refusal[i];
}

/* ---- offload bundles ------------------------------------------------------------ */

#define BUNDLE_MAGIC "__CLANG_OFFLOAD_BUNDLE__"

static uint64_t rd64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* Does the bundle entry id name target ("hipv4-amdgcn-amd-amdhsa--gfx90a",
 * maybe followed by ":feature+...")? */
static int id_names(const unsigned char *id, size_t n, const char *target) {
  static const char *const prefixes[] = {"hipv4-amdgcn-amd-amdhsa--", "hip-amdgcn-amd-amdhsa--",
                                         "hipv4-amdgcn-amd-amdhsa-unknown-", "hip-amdgcn-amd-amdhsa-unknown-"};
  size_t tl = strlen(target);
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
    size_t pl = strlen(prefixes[i]);
    if (n >= pl + tl && memcmp(id, prefixes[i], pl) == 0 && memcmp(id + pl, target, tl) == 0 &&
        (n == pl + tl || id[pl + tl] == ':'))
      return 1;
  }
  return 0;
}

int tl_amdgpu_is_bundle(const void *bytes, size_t n) {
  return bytes && n >= 24 && memcmp(bytes, BUNDLE_MAGIC, 24) == 0;
}

tl_status tl_amdgpu_unbundle(const void *bytes, size_t n, const char *target, size_t *off, size_t *size,
                             tl_error *err) {
  const unsigned char *p = bytes;
  if (!bytes || !target || !off || !size)
    return tl_error_set(err, TL_INVALID_ARG, "tl_amdgpu_unbundle: NULL argument");
  if (n >= 4 && memcmp(p, "CCOB", 4) == 0)
    return tl_error_set(err, TL_UNSUPPORTED, "the offload bundle is compressed (CCOB), which is not read here");
  if (!tl_amdgpu_is_bundle(bytes, n) || n < 32)
    return tl_error_set(err, TL_INVALID_ARG, "not an offload bundle");
  uint64_t count = rd64(p + 24);
  if (count == 0 || count > 4096)
    return tl_error_set(err, TL_INVALID_ARG, "offload bundle with %llu entries", (unsigned long long)count);
  size_t pos = 32;
  for (uint64_t i = 0; i < count; i++) {
    if (n - pos < 24)
      return tl_error_set(err, TL_INVALID_ARG, "offload bundle entry %llu runs past the end", (unsigned long long)i);
    uint64_t eoff = rd64(p + pos), esize = rd64(p + pos + 8), idlen = rd64(p + pos + 16);
    pos += 24;
    if (idlen > n - pos)
      return tl_error_set(err, TL_INVALID_ARG, "offload bundle entry %llu's id runs past the end",
                          (unsigned long long)i);
    const unsigned char *id = p + pos;
    pos += (size_t)idlen;
    if (eoff > n || esize > n - eoff)
      return tl_error_set(err, TL_INVALID_ARG, "offload bundle entry %llu's code runs past the end",
                          (unsigned long long)i);
    if (id_names(id, (size_t)idlen, target) && esize > 0) {
      *off = (size_t)eoff;
      *size = (size_t)esize;
      return TL_OK;
    }
  }
  return tl_error_set(err, TL_NOT_FOUND, "the offload bundle has no code object for %s", target);
}

/* ---- compiling ------------------------------------------------------------------ */

void tl_amdgpu_result_free(tl_amdgpu_result *r) {
  if (!r)
    return;
  free(r->code);
  free(r->log);
  memset(r, 0, sizeof *r);
}

static char *hiprtc_log(tl_amdgpu *h, hiprtcProgram prog) {
  size_t n = 0;
  if (h->GetProgramLogSize(prog, &n) != HIPRTC_SUCCESS || n > TL_AMDGPU_MAX_LOG * 64u)
    n = 0;
  char *log = malloc(n + 1);
  if (!log)
    return NULL;
  if (n == 0 || h->GetProgramLog(prog, log) != HIPRTC_SUCCESS)
    n = 0;
  log[n] = 0;
  return log;
}

static tl_status compile_hiprtc(tl_amdgpu *h, const char *src, const char *target, tl_amdgpu_result *out,
                                tl_error *err) {
  char arch[64];
  snprintf(arch, sizeof arch, "--offload-arch=%s", target);
  const char *opts[] = {arch, "-O3", "-mcode-object-version=5", "-mprintf-kind=buffered"};
  hiprtcProgram prog = NULL;
  hiprtcResult r = h->CreateProgram(&prog, src, "kernel.hip", 0, NULL, NULL);
  if (r != HIPRTC_SUCCESS)
    return tl_error_set(err, r == HIPRTC_ERROR_OUT_OF_MEMORY ? TL_NOMEM : TL_TOOLCHAIN,
                        "hiprtcCreateProgram failed: %s", hiprtc_errstr(h, r));
  r = h->CompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts);
  out->log = hiprtc_log(h, prog);
  if (!out->log) {
    h->DestroyProgram(&prog);
    return tl_error_set(err, TL_NOMEM, "out of memory reading the hiprtc log");
  }
  out->log_len = strlen(out->log);
  if (r != HIPRTC_SUCCESS) {
    char excerpt[760];
    log_excerpt(out->log, excerpt, sizeof excerpt, 700);
    h->DestroyProgram(&prog);
    return tl_error_set(err, r == HIPRTC_ERROR_INVALID_OPTION ? TL_INVALID_ARG : TL_TOOLCHAIN,
                        "%s could not compile kernel.hip for %s (%s)%s%s", h->desc, target, hiprtc_errstr(h, r),
                        *excerpt ? ":\n" : "", excerpt);
  }
  size_t size = 0;
  r = h->GetCodeSize(prog, &size);
  if (r != HIPRTC_SUCCESS || size == 0 || size > TL_AMDGPU_MAX_OUTPUT) {
    h->DestroyProgram(&prog);
    if (size > TL_AMDGPU_MAX_OUTPUT)
      return tl_error_set(err, TL_TOO_LARGE, "hiprtc output is %zu bytes, over the limit of %u", size,
                          TL_AMDGPU_MAX_OUTPUT);
    return tl_error_set(err, TL_TOOLCHAIN, "hiprtc gave no code (%s)",
                        r != HIPRTC_SUCCESS ? hiprtc_errstr(h, r) : "empty output");
  }
  unsigned char *code = malloc(size);
  if (!code) {
    h->DestroyProgram(&prog);
    return tl_error_set(err, TL_NOMEM, "out of memory for %zu bytes of hiprtc output", size);
  }
  r = h->GetCode(prog, (char *)code);
  h->DestroyProgram(&prog);
  if (r != HIPRTC_SUCCESS) {
    free(code);
    return tl_error_set(err, TL_TOOLCHAIN, "hiprtcGetCode failed: %s", hiprtc_errstr(h, r));
  }
  if (tl_amdgpu_is_bundle(code, size)) {
    size_t off = 0, n = 0;
    tl_status st = tl_amdgpu_unbundle(code, size, target, &off, &n, err);
    if (st != TL_OK) {
      free(code);
      return st == TL_NOMEM ? st : tl_error_set(err, TL_TOOLCHAIN, "hiprtc's output: %s", err ? err->message : "");
    }
    memmove(code, code + off, n);
    size = n;
  }
  out->code = code;
  out->code_size = size;
  return TL_OK;
}

/* Removes every "DIR/" from log, in place: the private directory's name
 * means nothing to the reader ("kernel.hip:3:5: error: ..."). */
static void strip_dir(char *log, const char *dir) {
  size_t dl = strlen(dir);
  char *w = log;
  for (const char *r = log; *r;) {
    if (strncmp(r, dir, dl) == 0 && r[dl] == '/') {
      r += dl + 1;
      continue;
    }
    *w++ = *r++;
  }
  *w = 0;
}

/* Appends a line to the log file (a note between the two children's output). */
static void log_note(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_note(int fd, const char *fmt, ...) {
  char buf[PATH_MAX * 2];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0)
    (void)!write(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static tl_status compile_clang(tl_amdgpu *h, const char *src, const char *target, tl_amdgpu_result *out,
                               tl_error *err) {
  double deadline = tl_proc_now_ms() + (double)h->timeout_ms;
  char dir[PATH_MAX];
  tl_status st = tl_proc_tmpdir(dir, sizeof dir, "tl-amdgpu", err);
  if (st != TL_OK)
    return st;
  char srcp[PATH_MAX + 16], objp[PATH_MAX + 16], outp[PATH_MAX + 16], logp[PATH_MAX + 16];
  snprintf(srcp, sizeof srcp, "%s/kernel.hip", dir);
  snprintf(objp, sizeof objp, "%s/kernel.o", dir);
  snprintf(outp, sizeof outp, "%s/kernel.hsaco", dir);
  snprintf(logp, sizeof logp, "%s/log", dir);
  int logfd = -1;
  const char *failed_step = NULL;
  int code = 0;
  if ((st = tl_proc_write_file(srcp, src, strlen(src), err)) != TL_OK)
    goto done;
  logfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (logfd < 0) {
    st = tl_error_set(err, TL_IO, "cannot create %s: %s", logp, strerror(errno));
    goto done;
  }
  char arch[64];
  snprintf(arch, sizeof arch, "--offload-arch=%s", target);
  char *cc[] = {h->clang, "-x", "hip", "--cuda-device-only", "-nogpulib", "-nogpuinc", arch, "-O3",
                "-mcode-object-version=5", "-mprintf-kind=buffered", "-fhip-emit-relocatable", "-c", srcp, "-o",
                objp, NULL};
  if ((st = tl_proc_run(cc, logfd, dir, deadline, &code, err)) != TL_OK)
    goto done;
  if (code != 0) {
    failed_step = "compile";
    goto done;
  }
  char *ld[] = {h->lld, "-shared", objp, "-o", outp, NULL};
  if ((st = tl_proc_run(ld, logfd, dir, deadline, &code, err)) != TL_OK)
    goto done;
  if (code != 0) {
    log_note(logfd, "[ld.lld exited with status %d]\n", code);
    failed_step = "link";
    goto done;
  }
  size_t size = 0;
  st = tl_proc_read_file(outp, TL_AMDGPU_MAX_OUTPUT, 0, &out->code, &size, err);
  out->code_size = size;
  if (st == TL_OK && size == 0)
    st = tl_error_set(err, TL_TOOLCHAIN, "ld.lld gave an empty code object");
done:
  if (logfd >= 0) {
    close(logfd);
    unsigned char *log = NULL;
    size_t n = 0;
    if (tl_proc_read_file(logp, TL_AMDGPU_MAX_LOG, 1, &log, &n, NULL) == TL_OK) {
      strip_dir((char *)log, dir);
      out->log = (char *)log;
      out->log_len = strlen(out->log);
    }
  }
  if (!out->log) {
    out->log = calloc(1, 1);
    out->log_len = 0;
  }
  if (st == TL_OK && failed_step) {
    char excerpt[760];
    log_excerpt(out->log, excerpt, sizeof excerpt, 700);
    st = tl_error_set(err, TL_TOOLCHAIN, "%s could not %s kernel.hip for %s (exit status %d)%s%s", h->desc,
                      failed_step, target, code, *excerpt ? ":\n" : "", excerpt);
  }
  tl_proc_rmdir(dir);
  return st;
}

tl_status tl_amdgpu_compile(tl_amdgpu *h, const char *src, const char *target, tl_amdgpu_result *out,
                            tl_error *err) {
  tl_amdgpu_result local = {0};
  if (!out)
    out = &local;
  memset(out, 0, sizeof *out);
  if (!h || !src || !target)
    return tl_error_set(err, TL_INVALID_ARG, "tl_amdgpu_compile: NULL handle, source or target");
  if (strnlen(src, TL_AMDGPU_MAX_SOURCE + 1u) > TL_AMDGPU_MAX_SOURCE)
    return tl_error_set(err, TL_TOO_LARGE, "the source is larger than %u bytes", TL_AMDGPU_MAX_SOURCE);
  if (known_index(target) < 0) {
    char names[128] = "";
    for (size_t i = 0; i < nknown; i++)
      tl_appendf(names, sizeof names, "%s%s", i ? ", " : "", known_targets[i].name);
    return tl_error_set(err, TL_INVALID_ARG, "'%.64s' is not an AMD target known here (%s)", target, names);
  }
  if (!tl_amdgpu_accepts(h, target)) {
    char names[128] = "";
    for (size_t i = 0; i < h->ntargets; i++)
      tl_appendf(names, sizeof names, "%s%s", i ? ", " : "", h->targets[i]);
    return tl_error_set(err, TL_UNSUPPORTED, "%s; it accepts %s", tl_amdgpu_refusal(h, target),
                        *names ? names : "none of the known targets");
  }
  double t0 = tl_proc_now_ms();
  tl_status st = h->kind == TL_AMDGPU_HIPRTC ? compile_hiprtc(h, src, target, out, err)
                                             : compile_clang(h, src, target, out, err);
  snprintf(out->target, sizeof out->target, "%s", target);
  out->wall_ms = tl_proc_now_ms() - t0;
  if (st != TL_OK) {
    free(out->code);
    out->code = NULL;
    out->code_size = 0;
  }
  if (out == &local)
    tl_amdgpu_result_free(&local);
  return st;
}

/* ---- llvm-objdump ------------------------------------------------------------- */

static int find_objdump(char *out, size_t cap) {
  const char *env = getenv("TL_LLVM_OBJDUMP");
  if (env) {
    snprintf(out, cap, "%s", env);
    return *env && tl_proc_is_exec(out);
  }
  for (int m = CLANG_MAX; m >= CLANG_MIN; m--) {
    char name[32];
    snprintf(name, sizeof name, "llvm-objdump-%d", m);
    if (tl_proc_find_on_path(name, out, cap))
      return 1;
  }
  for (int m = CLANG_MAX; m >= CLANG_MIN; m--) {
    snprintf(out, cap, "/usr/lib/llvm-%d/bin/llvm-objdump", m);
    if (tl_proc_is_exec(out))
      return 1;
  }
  return 0;
}

tl_status tl_amdgpu_disassemble(const void *code, size_t n, const char *target, char **text, tl_error *err) {
  if (text)
    *text = NULL;
  if (!code || !n || !target || !text)
    return tl_error_set(err, TL_INVALID_ARG, "tl_amdgpu_disassemble: NULL or empty argument");
  if (known_index(target) < 0)
    return tl_error_set(err, TL_INVALID_ARG, "'%.64s' is not an AMD target known here", target);
  char tool[PATH_MAX];
  if (!find_objdump(tool, sizeof tool))
    return tl_error_set(err, TL_NO_TOOLCHAIN,
                        "no llvm-objdump 19 or newer (TL_LLVM_OBJDUMP, llvm-objdump-N on PATH, "
                        "/usr/lib/llvm-N/bin; Debian's llvm-19 has it)");
  char dir[PATH_MAX];
  tl_status st = tl_proc_tmpdir(dir, sizeof dir, "tl-amdgpu", err);
  if (st != TL_OK)
    return st;
  char path[PATH_MAX + 16], mcpu[64];
  snprintf(path, sizeof path, "%s/code.hsaco", dir);
  snprintf(mcpu, sizeof mcpu, "--mcpu=%s", target);
  int code_rc = 0;
  if ((st = tl_proc_write_file(path, code, n, err)) == TL_OK) {
    char *argv[] = {tool, "--disassemble", mcpu, path, NULL};
    st = tl_proc_run_capture(argv, tl_proc_now_ms() + 60000, 64u << 20, &code_rc, text, err);
    if (st == TL_OK && code_rc != 0) {
      char excerpt[600];
      log_excerpt(*text, excerpt, sizeof excerpt, 500);
      st = tl_error_set(err, TL_TOOLCHAIN, "%s failed (exit status %d): %s", tool, code_rc, excerpt);
      free(*text);
      *text = NULL;
    }
  }
  tl_proc_rmdir(dir);
  return st;
}

/* ---- the AMD entry of the toolchain table (toolchain.h) --------------------- */

static tl_status amd_open(void **h, tl_error *err) { return tl_amdgpu_open((tl_amdgpu **)h, err); }

static void amd_describe(void *h, char *buf, size_t cap) { snprintf(buf, cap, "%s", tl_amdgpu_description(h)); }

static tl_status amd_targets(void *h, const char *const **list, size_t *count, tl_error *err) {
  return tl_amdgpu_targets(h, list, count, err);
}

static int amd_accepts(void *h, const char *target) { return tl_amdgpu_accepts(h, target); }

static const char *amd_refusal(void *h, const char *target) { return tl_amdgpu_refusal(h, target); }

/* hiprtc or clang; the compile options (max_registers, debug, fast_compile)
 * are NVRTC's and not passed on. */
static tl_status amd_compile(void *h, const char *src, const tl_target *t, const tl_toolchain_opts *o,
                             tl_toolchain_out *out, tl_error *err) {
  (void)o;
  tl_amdgpu_result r = {0};
  tl_status st = tl_amdgpu_compile(h, src, t->name, &r, err);
  if (st == TL_OK) {
    out->code = r.code;
    out->size = r.code_size;
    out->log = r.log;
    r.code = NULL;
    r.log = NULL;
  }
  tl_amdgpu_result_free(&r);
  return st;
}

/* The code object must be for the target and hold the kernel with one
 * argument per parameter.  Its resources come from the metadata note:
 * registers are VGPRs plus AGPRs (the unified register file of CDNA),
 * static_shared_bytes the static LDS, local_bytes the scratch per lane. */
static tl_status amd_inspect(void *h, const tl_target *t, const tl_toolchain_out *b, const char *kernel, int nparams,
                             json_t **resources, tl_error *err) {
  (void)h;
  tl_hsaco_info hi = {0};
  tl_status st;
  const tl_hsaco_kernel *k = NULL;
  if ((st = tl_hsaco_inspect(b->code, b->size, &hi, err)) == TL_OK &&
      (st = tl_hsaco_check_target(&hi, t->name, err)) == TL_OK) {
    k = tl_hsaco_find(&hi, kernel);
    if (!k)
      st = tl_error_set(err, TL_TOOLCHAIN, "the code object has no kernel '%s'", kernel);
    else if (k->nexplicit != (size_t)nparams)
      st = tl_error_set(err, TL_TOOLCHAIN, "kernel '%s' has %zu arguments in the code object, not %d", kernel,
                        k->nexplicit, nparams);
  }
  if (st == TL_OK) {
    json_t *res = json_object();
    int agprs = k->agpr_count > 0 ? k->agpr_count : 0;
    json_object_set_new(res, "registers", json_integer(k->vgpr_count + agprs));
    json_object_set_new(res, "vgprs", json_integer(k->vgpr_count));
    json_object_set_new(res, "agprs", json_integer(agprs));
    json_object_set_new(res, "sgprs", json_integer(k->sgpr_count));
    json_object_set_new(res, "static_shared_bytes", json_integer(k->group_segment_fixed_size));
    json_object_set_new(res, "local_bytes", json_integer(k->private_segment_fixed_size));
    json_object_set_new(res, "wavefront_size", json_integer(k->wavefront_size));
    json_object_set_new(res, "max_flat_workgroup_size", json_integer(k->max_flat_workgroup_size));
    if (k->vgpr_spill_count >= 0)
      json_object_set_new(res, "vgpr_spill_count", json_integer(k->vgpr_spill_count));
    if (k->sgpr_spill_count >= 0)
      json_object_set_new(res, "sgpr_spill_count", json_integer(k->sgpr_spill_count));
    *resources = res;
  }
  tl_hsaco_info_free(&hi);
  return st;
}

const tl_toolchain_ops tl_toolchain_amdgpu = {
    .vendor = TL_VENDOR_AMD,
    .name = "AMDGPU",
    .open = amd_open,
    .describe = amd_describe,
    .targets = amd_targets,
    .accepts = amd_accepts,
    .refusal = amd_refusal,
    .compile = amd_compile,
    .inspect = amd_inspect,
};
