/*
 * tlclient.c - the command of libtlclient (docs/DESIGN.md section 6): talks to a
 * tlserverd and keeps the per-user local cache.
 *
 *   tlclient [GLOBAL OPTIONS] COMMAND [OPTIONS]
 *     info                     the server, the local cache and the GPU
 *     compile PROGRAM.json     compile for one or more targets (-o DIR writes the binaries)
 *     fetch KEY|ID             a build's binary by build key, or an artifact's bytes by id
 *     prebuild PATTERN...      every program x constants x target, in parallel (CI farms)
 *     explain KEY|PROGRAM      a build's manifest, and why a request misses the cache
 *     run PROGRAM.json         launch on the local GPU, optionally checked against the
 *                              reference interpreter
 *     cache ls|verify|gc       the local cache
 *     bundle create|import|ls|verify|push   one file of builds for a release (proto/bundle.md)
 *     tune PROGRAM.json        time the variants of a program's constants on the GPU and
 *                              record the fastest on the server for every node
 *
 * Everything that can fail prints one message naming the program, the
 * target and the server where they matter, on standard error, after
 * "tlclient: ".  Exit status: 0 success, 1 something failed, 2 the command
 * line is wrong; prebuild and bundle push: 3 the server or the network failed.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "../cache/tlbundle.h"
#include "../cache/tlcache.h"
#include "../compiler/interp.h"
#include "../compiler/ir.h"
#include "../compiler/npy.h"
#include "../compiler/tlcompiler.h"
#include "../proto/tl_hash.h"
#include "include/tl/tlclient.h"

#define MAX_LIST 256        /* -D, --arg, --in, --out, --target, files given */
#define MAX_FILES 100000    /* programs found by prebuild */
#define MAX_JOBS 64

/* ---- usage ------------------------------------------------------------------------ */

static const char usage_main[] =
    "usage: tlclient [GLOBAL OPTIONS] COMMAND [OPTIONS]\n"
    "\n"
    "The client of tlserverd, the compile service for tile programs: compiles through\n"
    "the server, fetches verified binaries, keeps them in a local cache so that a\n"
    "start works without the network, prebuilds for CI farms, and runs kernels.\n"
    "\n"
    "Commands (tlclient COMMAND --help for each):\n"
    "  info                       the server, the local cache and the GPU\n"
    "  compile PROGRAM.json       compile for one or more targets through the server\n"
    "  fetch KEY|ID               a build's binary by key, or an artifact's bytes by id\n"
    "  prebuild PATTERN...        compile programs x constants x targets, in parallel (CI)\n"
    "  explain KEY|PROGRAM.json   a build's manifest; for a miss, what differs from the cache\n"
    "  run PROGRAM.json           launch on the local GPU (--check: against the interpreter)\n"
    "  cache ls|verify|gc         list, re-hash or shrink the local cache\n"
    "  bundle create|import|ls|verify|push FILE   one file of builds for a release\n"
    "  tune PROGRAM.json --space NAME=V1,V2   time variants on the GPU, record the fastest\n"
    "\n"
    "Global options (anywhere on the line):\n"
    "  --server URL[,URL]...      the server, or replicas of one cluster to fail over\n"
    "                             between (env TL_SERVER; default http://127.0.0.1:8470)\n"
    "  --token TOKEN              bearer token (env TL_TOKEN)\n"
    "  --cacert FILE              PEM certificate authorities for https:// servers\n"
    "  --cache PATH|none          the local cache file (env TL_CLIENT_CACHE; default\n"
    "                             $XDG_CACHE_HOME/tlclient/cache.db or ~/.cache/tlclient/cache.db)\n"
    "  --offline                  never contact the server: the local cache only\n"
    "  --bundle FILE              read kernels from this bundle first, read-only (env\n"
    "                             TL_CLIENT_BUNDLE; tlclient bundle --help)\n"
    "  --tuning DEVICE|auto       apply the server's tuning records (env TL_CLIENT_TUNING;\n"
    "                             tlclient tune --help)\n"
    "  --timeout SEC              per request: its compile, its retries and the waits\n"
    "                             between them (Retry-After included) (default 300)\n"
    "  --connect-timeout SEC      to connect (default 5)\n"
    "  --retries N                after connection errors and 503/429 answers (default 4)\n"
    "  -v, --verbose              say what the client does (retries, cache repairs)\n"
    "  --version, --help\n"
    "\n"
    "Exit status: 0 success, 1 a failure, 2 a wrong command line; prebuild also 3 when\n"
    "the server could not be reached or failed (tlclient prebuild --help).\n";

static const char usage_info[] =
    "usage: tlclient info [--json]\n"
    "\n"
    "Prints the server's version, toolchain, targets and limits (GET /v1/info), the local\n"
    "cache's size and the GPU found.  --json prints the server's answer as it is.\n"
    "Fails (exit 1) when the server cannot be reached; the local part is printed anyway.\n";

static const char usage_compile[] =
    "usage: tlclient compile PROGRAM.json --target T [--target T]... [-D NAME=VALUE]...\n"
    "                        [--options JSON] [-o DIR]\n"
    "\n"
    "Compiles PROGRAM for every target in one request (--target repeats or takes a\n"
    "comma-separated list: sm_90,sm_80,compute_80).  Prints one line per target: whether\n"
    "the server compiled it or had it, its build key, artifact id and size.  With -o DIR,\n"
    "also fetches each binary (verified, and kept in the local cache) and writes\n"
    "DIR/NAME.TARGET.cubin (.ptx for compute_NN, .hsaco for gfxNNN) and DIR/NAME.TARGET.json\n"
    "(its metadata); the local cache then also answers this request with no network.\n"
    "-D overrides a constant (a number or true/false); --options passes compiler options\n"
    "as a JSON object ({\"max_registers\": 128}).  Exit 1 if any target failed.\n";

static const char usage_fetch[] =
    "usage: tlclient fetch KEY|ID [-o FILE] [--meta FILE]\n"
    "\n"
    "Writes a binary to FILE (or standard output when it is not a terminal).  A build key\n"
    "gives that build's binary (and --meta writes its metadata); an artifact id gives the\n"
    "bytes with that SHA-256.  A bare 64-hex value is tried as a key first, then as an\n"
    "id; write key:HEX or artifact:HEX to say which.  Both come from the local cache when\n"
    "it has them (so also with the server unreachable), else from the server; the bytes\n"
    "are checked against their SHA-256 either way.\n";

static const char usage_prebuild[] =
    "usage: tlclient prebuild PATTERN... --target T [--target T]... [--exclude PATTERN]...\n"
    "                         [-D NAME=V1,V2,...]... [--jobs N] [--fetch] [--json]\n"
    "\n"
    "Compiles every program for every target (and every choice of constants) through the\n"
    "server, N requests at a time (default 4), so that the server's cache holds them all.\n"
    "\n"
    "PATTERN is a program file, a directory (every *.json under it, recursively, hidden\n"
    "entries skipped) or a quoted glob(3) pattern ('kernels/*/gemm*.json'; a directory it\n"
    "matches means its *.json).  --exclude PATTERN leaves out every file or directory found\n"
    "whose path or base name matches (fnmatch, '*' also crossing '/'): --exclude 'test_*'.\n"
    "A .json file found in a directory or by a pattern that is not a Tile IR program (a\n"
    "JSON object without \"tlir\", such as the metadata compile -o writes) is skipped with\n"
    "a note on standard error; a file named as it is is always built.\n"
    "\n"
    "-D NAME=V1,V2,... gives a constant's values: each program is built for the cross\n"
    "product of the values of every -D constant it declares (-D M=1024,2048 -D N=64,128:\n"
    "four builds per target).  A program that does not declare NAME is built without it\n"
    "(a note says so); a NAME that no program declares is a usage error.  --target\n"
    "repeats or takes a comma-separated list.  At most a million builds in all.\n"
    "\n"
    "Output: on a terminal a progress bar, otherwise one line per build; then a summary.\n"
    "--json prints one JSON object per line and build instead (proto/prebuild-record.\n"
    "schema.json: program, constants, target, status compiled|hit|error|skipped, key,\n"
    "artifact, size, compile_ms, wall_ms, fetched, error, diagnostics) and the summary\n"
    "on standard error.  --fetch also downloads every binary into the local cache, under\n"
    "its build key and its request, so that an application asking for the same program\n"
    "and target starts from that cache offline.\n"
    "\n"
    "Exit status, for CI: 0 every build succeeded; 1 some program failed to compile (an\n"
    "invalid program, constant or target: status error); 2 a wrong command line, or\n"
    "PATTERN names no program or cannot be read; 3 the server could not be reached or\n"
    "failed (network, token, server error: once the server is unreachable or refuses the\n"
    "token, the builds not started yet are not tried, status skipped).\n";

static const char usage_explain[] =
    "usage: tlclient explain KEY\n"
    "       tlclient explain PROGRAM.json --target T [-D NAME=VALUE]... [--options JSON]\n"
    "\n"
    "Shows a build's key manifest (proto/kernel-meta.md section 4: the compiler, toolchain,\n"
    "target, options, constants and program that its key hashes).  With a KEY: the\n"
    "manifest from the local cache, else from the server (GET /v1/kernels/KEY).  With a\n"
    "PROGRAM: the request's key on the server, computed here (it needs the toolchain for\n"
    "T here, as offline keys do) with the server's compiler identity; on a hit its\n"
    "manifest; on a miss, the nearest build in the local cache (the most recently used\n"
    "256 builds; the server cannot list its own) and, in plain words, each input that\n"
    "differs, e.g.\n"
    "  constants: M=256 here, the cache has M=128\n"
    "  compiler: tlc 0.1.0+38ef... here, the cache has tlc 0.1.0+e36a... (built by another compiler)\n"
    "Exit status: 0 the build exists (or KEY was found), 1 a miss or an error, 2 a wrong\n"
    "command line.\n";

static const char usage_run[] =
    "usage: tlclient run PROGRAM.json [-D NAME=VALUE]... [--arg NAME=VALUE]...\n"
    "                    [--in NAME=FILE.npy]... [--out NAME=FILE.npy]... [--check]\n"
    "                    [--device N] [--target T] [--seed N]\n"
    "\n"
    "Gets the kernel for the local GPU (the exact cubin, else PTX for the JIT, or --target)\n"
    "through the local cache and the server, launches it once and writes --out tensors.\n"
    "Options as in tlc: -D overrides a constant, --arg gives a scalar parameter, --in a\n"
    "tensor from a .npy file.  Tensors not given start as NaN (integers as bytes 0xA5), or,\n"
    "with --check, as random values (--seed); --check then runs the reference interpreter\n"
    "on the same inputs and compares every tensor (relative error bound per dtype:\n"
    "float32 1e-4, float16 1e-2, bfloat16 2e-2, float8 0.15; integers exactly).\n"
    "Exit 1 when the GPU is missing, the kernel fails, or --check finds a difference.\n";

static const char usage_cache[] =
    "usage: tlclient cache ls | verify | gc [--max-bytes N]\n"
    "\n"
    "ls       every entry, most recently used first: key, target, size, last use, kind\n"
    "         (build: a build by its key; request: the key of a compile request that\n"
    "         names a build) and the kernel's name\n"
    "verify   re-hash every binary; damaged ones are deleted with their entries (exit 1\n"
    "         when any was found)\n"
    "gc       evict the least recently used entries until the binaries take at most N\n"
    "         bytes (K, M, G suffixes; default the client's cap, 1G; 0 empties it)\n";

static const char usage_bundle[] =
    "usage: tlclient bundle create FILE --from-cache [--compiler ID]\n"
    "       tlclient bundle create FILE PATTERN... --target T... [-D NAME=V1,V2,...]...\n"
    "                              [--exclude PATTERN]... [--jobs N] [--json]\n"
    "       tlclient bundle import FILE\n"
    "       tlclient bundle ls FILE [--json]\n"
    "       tlclient bundle verify FILE\n"
    "       tlclient bundle push FILE            (a token with the admin scope)\n"
    "\n"
    "A bundle is one file holding builds (binaries, key manifests, metadata) and the\n"
    "request keys that name them, every part with its SHA-256 (proto/bundle.md): what a\n"
    "release ships so that its application starts offline, on a machine with only the\n"
    "GPU driver (tl_client_set_bundle, or TL_CLIENT_BUNDLE / --bundle), or what fills a\n"
    "cache (import here, or POST /v1/bundles on a server).  It holds the builds of one\n"
    "compiler identity.\n"
    "\n"
    "create --from-cache  the local cache's builds by the server's compiler (or --compiler\n"
    "                     ID, as tlc --version prints it) and their requests; a build kept\n"
    "                     without its manifest (one a compile gave) gets it rebuilt from\n"
    "                     its request (checked against its key: no server needed), else\n"
    "                     from the server; entries that cannot be bundled are left out\n"
    "                     (-v says which and why)\n"
    "create PATTERN...    prebuilds as `tlclient prebuild --fetch` does (same options, same\n"
    "                     exit statuses) into a fresh temporary cache and bundles that; the\n"
    "                     file is written only when every build succeeded\n"
    "import               checks the whole bundle, then stores its builds and requests in\n"
    "                     the local cache (and remembers its compiler for offline starts)\n"
    "ls                   the bundle's compiler, builds and requests (--json: one object)\n"
    "verify               checks every checksum, key and reference; exit 0 when sound\n"
    "push                 checks the whole bundle, then imports it into the server's cache\n"
    "                     (POST /v1/bundles); a server with a shared tier (--tier) also\n"
    "                     publishes each build there, so every replica serves it; prints\n"
    "                     each build's status (stored, present, refused with the reason)\n"
    "\n"
    "Exit status: 0 success, 1 a failure (a damaged bundle: the message names the entry;\n"
    "push: a build refused, or not published to the server's tier), 2 a wrong command\n"
    "line; create with patterns as prebuild (1 a build failed, 3 the server or the\n"
    "network failed); push: 3 the server or the network failed (unreachable, a token\n"
    "without the admin scope, over its --max-bundle, a server error).\n";

static const char usage_tune[] =
    "usage: tlclient tune PROGRAM.json --space NAME=V1,V2,... [--space ...] [--shape NAME=V]...\n"
    "                     [--check-shape NAME=V]... [--arg NAME=V]... [--device N] [--repeat N]\n"
    "                     [--jobs N] [--seed N]\n"
    "\n"
    "Finds the fastest values of a program's tuning constants on this GPU and records them on\n"
    "the server, so that every node gets them (tl_client_set_tuning; tlclient --tuning auto):\n"
    "  1. every variant (the cross product of the --space values, at most 1024) is compiled\n"
    "     through the server, --jobs at a time (default 4), at the shape (--shape: constant\n"
    "     overrides such as M=4096) and at the check shape (--check-shape, default the shape);\n"
    "  2. each is checked at the check shape: the interpreter's results with the variant's\n"
    "     constants must equal those with the program's own (tuning changes speed, never\n"
    "     results), and the GPU's must match the interpreter's (tlclient run --check, same\n"
    "     bounds); a variant that fails is out, with the reason;\n"
    "  3. each is timed on the GPU through the launcher: 3 launches, then --repeat (default\n"
    "     20) timed ones between two synchronizations; the mean per launch;\n"
    "  4. the fastest is recorded (POST /v1/tunings) for the program, the shape class (the\n"
    "     --shape values, integers rounded up to a power of two) and the device (its name and\n"
    "     architecture).\n"
    "--arg gives scalar parameters.  Tests time with a fake timer instead of a GPU:\n"
    "TL_TUNE_FAKE_TIMES=FILE (a JSON object: \"NAME=V,NAME=V\" -> ms, in the --space order) and\n"
    "--target T (what to compile for; the device is then \"fake timer (T)\"; step 2 checks the\n"
    "interpreter only).  Exit status: 0 a winner was recorded, 1 none passed or the server\n"
    "failed, 2 a wrong command line.\n";

/* ---- small helpers -------------------------------------------------------------------- */

static bool verbose;

static void die_oom(void) {
  fprintf(stderr, "tlclient: out of memory\n");
  exit(1);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tlclient: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(see tlclient --help)\n");
  va_end(ap);
  return 2;
}

static void log_line(void *user, const char *line) {
  (void)user;
  if (verbose)
    fprintf(stderr, "tlclient: %s\n", line);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *read_file(const char *path, size_t *len, size_t max) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "tlclient: cannot open '%s': %s\n", path, strerror(errno));
    return NULL;
  }
  size_t cap = 65536, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (n > max || got == 0)
      break;
    if (n == cap) {
      char *nb = realloc(buf, cap * 2 + 1);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  bool bad = ferror(f);
  fclose(f);
  if (!buf)
    die_oom();
  if (bad || n > max) {
    fprintf(stderr, "tlclient: cannot read '%s'%s\n", path, n > max ? ": larger than 4 MiB" : "");
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

static bool write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "tlclient: cannot write '%s': %s\n", path, strerror(errno));
    return false;
  }
  bool ok = fwrite(data, 1, n, f) == n;
  ok &= fclose(f) == 0;
  if (!ok)
    fprintf(stderr, "tlclient: cannot write '%s': %s\n", path, strerror(errno));
  return ok;
}

/* "1.5" seconds -> 1500 ms; -1 when malformed or out of [0.001, max_s]. */
static long parse_seconds(const char *s, double max_s) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (!*s || *end || errno || !(v >= 0.001) || v > max_s)
    return -1;
  return (long)(v * 1000 + 0.5);
}

/* "64M" -> bytes; -1 when malformed. */
static int64_t parse_size(const char *s) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || v < 0 || errno)
    return -1;
  int shift = 0;
  if (*end == 'K' || *end == 'k')
    shift = 10, end++;
  else if (*end == 'M' || *end == 'm')
    shift = 20, end++;
  else if (*end == 'G' || *end == 'g')
    shift = 30, end++;
  if (*end || v > (1LL << 50) >> shift)
    return -1;
  return (int64_t)v << shift;
}

static void human_size(int64_t n, char *out, size_t cap) {
  if (n >= (1 << 30))
    snprintf(out, cap, "%.1f GiB", n / 1073741824.0);
  else if (n >= (1 << 20))
    snprintf(out, cap, "%.1f MiB", n / 1048576.0);
  else if (n >= (1 << 10))
    snprintf(out, cap, "%.1f KiB", n / 1024.0);
  else
    snprintf(out, cap, "%lld B", (long long)n);
}

/* ---- the command line ---------------------------------------------------------------------- */

typedef struct kv {
  char *name;
  const char *value;
} kv;

typedef struct cmdline {
  /* global */
  const char *server, *token, *cacert, *cache;
  long timeout_ms, connect_ms;
  int retries;
  bool offline;
  /* command */
  const char *cmd;
  const char *pos[MAX_LIST];
  int npos;
  const char *targets[MAX_LIST];
  int ntargets;
  kv defs[MAX_LIST], args[MAX_LIST], ins[MAX_LIST], outs[MAX_LIST];
  int ndefs, nargs, nins, nouts;
  kv spaces[MAX_LIST], shapes[MAX_LIST], checks[MAX_LIST]; /* tune */
  int nspaces, nshapes, nchecks, repeat;
  const char *tuning;
  const char *output, *meta_out, *options_json, *max_bytes;
  char *target_lists[MAX_LIST]; /* copies of --target values, which targets[] point into */
  int nlists;
  const char *excludes[MAX_LIST];
  int nexcludes;
  int jobs, device;
  bool json, check, fetch, help, from_cache;
  const char *bundle, *compiler;
  unsigned long long seed;
  bool seed_given;
} cmdline;

static void free_cmdline(cmdline *o) {
  for (int i = 0; i < o->nlists; i++)
    free(o->target_lists[i]);
  kv *lists[7] = {o->defs, o->args, o->ins, o->outs, o->spaces, o->shapes, o->checks};
  int counts[7] = {o->ndefs, o->nargs, o->nins, o->nouts, o->nspaces, o->nshapes, o->nchecks};
  for (int l = 0; l < 7; l++)
    for (int i = 0; i < counts[l]; i++)
      free(lists[l][i].name);
}

static bool split_kv(const char *s, kv *out) {
  const char *eq = strchr(s, '=');
  if (!eq || eq == s)
    return false;
  size_t n = (size_t)(eq - s);
  out->name = malloc(n + 1);
  if (!out->name)
    die_oom();
  memcpy(out->name, s, n);
  out->name[n] = 0;
  out->value = eq + 1;
  return true;
}

/* Adds each name of a comma-separated list of targets. */
static int add_targets(cmdline *o, char *list) {
  for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (!*t)
      continue;
    for (int i = 0; i < o->ntargets; i++)
      if (strcmp(o->targets[i], t) == 0)
        return usage_error("target %s is given twice", t);
    if (o->ntargets == MAX_LIST)
      return usage_error("too many targets");
    o->targets[o->ntargets++] = t;
  }
  return 0;
}

static int parse_cmdline(int argc, char **argv, cmdline *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
    /* --flag=value form */
    char flagbuf[64];
    const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
    if (eq && (size_t)(eq - a) < sizeof flagbuf) {
      memcpy(flagbuf, a, (size_t)(eq - a));
      flagbuf[eq - a] = 0;
      a = flagbuf;
      val = eq + 1;
    }
#define TAKE(name)                                                                                                  \
  do {                                                                                                              \
    if (!val) {                                                                                                     \
      if (i + 1 >= argc)                                                                                            \
        return usage_error("'%s' needs a value", name);                                                             \
      val = argv[++i];                                                                                              \
    }                                                                                                               \
  } while (0)
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      o->help = true;
    } else if (strcmp(a, "--server") == 0) {
      TAKE("--server");
      o->server = val;
    } else if (strcmp(a, "--token") == 0) {
      TAKE("--token");
      o->token = val;
    } else if (strcmp(a, "--cacert") == 0) {
      TAKE("--cacert");
      o->cacert = val;
    } else if (strcmp(a, "--cache") == 0) {
      TAKE("--cache");
      o->cache = val;
    } else if (strcmp(a, "--offline") == 0) {
      o->offline = true;
    } else if (strcmp(a, "--bundle") == 0) {
      TAKE("--bundle");
      o->bundle = val;
    } else if (strcmp(a, "--compiler") == 0) {
      TAKE("--compiler");
      o->compiler = val;
    } else if (strcmp(a, "--from-cache") == 0) {
      o->from_cache = true;
    } else if (strcmp(a, "--tuning") == 0) {
      TAKE("--tuning");
      o->tuning = val;
    } else if (strcmp(a, "--space") == 0 || strcmp(a, "--shape") == 0 || strcmp(a, "--check-shape") == 0) {
      const char *flag = a[2] == 's' && a[3] == 'p' ? "--space" : a[2] == 's' ? "--shape" : "--check-shape";
      TAKE(flag);
      kv *list = flag[3] == 'p' ? o->spaces : flag[2] == 's' ? o->shapes : o->checks;
      int *count = flag[3] == 'p' ? &o->nspaces : flag[2] == 's' ? &o->nshapes : &o->nchecks;
      if (*count == MAX_LIST)
        return usage_error("too many '%s' options", flag);
      if (!split_kv(val, &list[*count]))
        return usage_error("'%s %s' needs NAME=VALUE", flag, val);
      (*count)++;
    } else if (strcmp(a, "--repeat") == 0) {
      TAKE("--repeat");
      char *end;
      long n = strtol(val, &end, 10);
      if (!*val || *end || n < 1 || n > 100000)
        return usage_error("--repeat %s: a number from 1 to 100000", val);
      o->repeat = (int)n;
    } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
      verbose = true;
    } else if (strcmp(a, "--timeout") == 0 || strcmp(a, "--connect-timeout") == 0) {
      bool connect = a[2] == 'c';
      TAKE(a);
      long ms = parse_seconds(val, connect ? 600 : 86400);
      if (ms < 0)
        return usage_error("%s %s: a number of seconds from 0.001 to %s", connect ? "--connect-timeout" : "--timeout",
                           val, connect ? "600" : "86400");
      *(connect ? &o->connect_ms : &o->timeout_ms) = ms;
    } else if (strcmp(a, "--retries") == 0) {
      TAKE("--retries");
      char *end;
      long n = strtol(val, &end, 10);
      if (!*val || *end || n < 0 || n > TL_CLIENT_RETRIES_MAX)
        return usage_error("--retries %s: a number from 0 to %d", val, TL_CLIENT_RETRIES_MAX);
      o->retries = (int)n;
    } else if (strcmp(a, "--target") == 0 || strcmp(a, "-t") == 0) {
      TAKE("--target");
      if (o->nlists == MAX_LIST)
        return usage_error("too many --target options");
      char *copy = strdup(val);
      if (!copy)
        die_oom();
      o->target_lists[o->nlists++] = copy;
      int rc = add_targets(o, copy);
      if (rc)
        return rc;
    } else if (strncmp(a, "-D", 2) == 0 || strcmp(a, "--arg") == 0 ||
               strcmp(a, "--in") == 0 || strcmp(a, "--out") == 0) {
      const char *flag = strncmp(a, "-D", 2) == 0 ? "-D" : a;
      if (flag[0] == '-' && flag[1] == 'D' && a[2])
        val = a + 2;
      else
        TAKE(flag);
      kv *list = flag[1] == 'D' ? o->defs : strcmp(flag, "--arg") == 0 ? o->args : strcmp(flag, "--in") == 0 ? o->ins : o->outs;
      int *count = flag[1] == 'D' ? &o->ndefs : strcmp(flag, "--arg") == 0 ? &o->nargs : strcmp(flag, "--in") == 0 ? &o->nins : &o->nouts;
      if (*count == MAX_LIST)
        return usage_error("too many '%s' options", flag);
      if (!split_kv(val, &list[*count]))
        return usage_error("'%s %s' needs NAME=VALUE", flag, val);
      (*count)++;
    } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
      TAKE("-o");
      o->output = val;
    } else if (strcmp(a, "--meta") == 0) {
      TAKE("--meta");
      o->meta_out = val;
    } else if (strcmp(a, "--options") == 0) {
      TAKE("--options");
      o->options_json = val;
    } else if (strcmp(a, "--max-bytes") == 0) {
      TAKE("--max-bytes");
      o->max_bytes = val;
    } else if (strcmp(a, "--jobs") == 0 || strcmp(a, "-j") == 0) {
      TAKE("--jobs");
      char *end;
      long n = strtol(val, &end, 10);
      if (!*val || *end || n < 1 || n > MAX_JOBS)
        return usage_error("--jobs %s: a number from 1 to %d", val, MAX_JOBS);
      o->jobs = (int)n;
    } else if (strcmp(a, "--device") == 0) {
      TAKE("--device");
      char *end;
      long n = strtol(val, &end, 10);
      if (!*val || *end || n < 0 || n > 1024)
        return usage_error("--device %s: a device number (0, 1, ...)", val);
      o->device = (int)n;
    } else if (strcmp(a, "--seed") == 0) {
      TAKE("--seed");
      char *end;
      o->seed = strtoull(val, &end, 0);
      if (!*val || *end)
        return usage_error("--seed %s: a number", val);
      o->seed_given = true;
    } else if (strcmp(a, "--exclude") == 0) {
      TAKE("--exclude");
      if (o->nexcludes == MAX_LIST)
        return usage_error("too many --exclude options");
      o->excludes[o->nexcludes++] = val;
    } else if (strcmp(a, "--json") == 0) {
      o->json = true;
    } else if (strcmp(a, "--check") == 0) {
      o->check = true;
    } else if (strcmp(a, "--fetch") == 0) {
      o->fetch = true;
    } else if (strcmp(a, "--version") == 0) {
      printf("tlclient %s (libtlclient %s)\n", TL_CLIENT_VERSION, TL_CLIENT_VERSION);
      exit(0);
    } else if (a[0] == '-' && a[1]) {
      return usage_error("unknown option '%s'", argv[i]);
    } else if (!o->cmd) {
      o->cmd = a;
    } else {
      if (o->npos == MAX_LIST)
        return usage_error("too many arguments");
      o->pos[o->npos++] = a;
    }
#undef TAKE
  }
  return 0;
}

/* Which options each command takes (the rest is an error, not silently ignored). */
static int check_options(const cmdline *o) {
  const char *c = o->cmd;
  bool explain = strcmp(c, "explain") == 0, compile = strcmp(c, "compile") == 0, prebuild = strcmp(c, "prebuild") == 0, run = strcmp(c, "run") == 0,
       fetch = strcmp(c, "fetch") == 0, cache = strcmp(c, "cache") == 0, info = strcmp(c, "info") == 0;
  bool bundle = strcmp(c, "bundle") == 0, tune = strcmp(c, "tune") == 0;
  if ((o->nspaces || o->nshapes || o->nchecks || o->repeat) && !tune)
    return usage_error("'%s' does not take --space, --shape, --check-shape or --repeat", c);
  if (tune && (o->ndefs || o->nins || o->nouts || o->check || o->json || o->output))
    return usage_error("'tune' takes --shape, not -D; and no --in, --out, --check, --json or -o");
  if (tune) /* its --arg, --device, --seed, --jobs and --target (with the fake timer) */
    return 0;
  prebuild |= bundle; /* bundle create PATTERN... takes prebuild's options (cmd_bundle checks the rest) */
  if (o->ntargets && !compile && !prebuild && !run && !explain)
    return usage_error("'%s' does not take --target", c);
  if (o->ntargets > 1 && run)
    return usage_error("'run' takes one --target (by default the one for the GPU found)");
  if (o->ndefs && !compile && !run && !prebuild && !explain)
    return usage_error("'%s' does not take -D", c);
  if ((o->nargs || o->nins || o->nouts || o->check || o->seed_given || o->device) && !run)
    return usage_error("'%s' does not take --arg, --in, --out, --check, --seed or --device", c);
  if (o->output && !compile && !fetch)
    return usage_error("'%s' does not take -o", c);
  if (o->meta_out && !fetch)
    return usage_error("'%s' does not take --meta", c);
  if (o->options_json && !compile && !explain)
    return usage_error("'%s' does not take --options", c);
  if (o->max_bytes && !cache)
    return usage_error("'%s' does not take --max-bytes", c);
  if ((o->jobs || o->fetch || o->nexcludes) && !prebuild)
    return usage_error("'%s' does not take --jobs, --fetch or --exclude", c);
  if (o->json && !info && !prebuild)
    return usage_error("'%s' does not take --json", c);
  if ((o->from_cache || o->compiler) && !bundle)
    return usage_error("'%s' does not take --from-cache or --compiler", c);
  if (o->fetch && bundle)
    return usage_error("'bundle create' fetches every build anyway: no --fetch");
  return 0;
}

/* The client from the global options and the environment. */
static tl_client *make_client(const cmdline *o) {
  tl_client *c = NULL;
  tl_error err;
  if (tl_client_new(&c, &err) != TL_OK) {
    fprintf(stderr, "tlclient: %s\n", err.message);
    return NULL;
  }
  tl_client_set_log(c, log_line, NULL);
  const char *server = o->server ? o->server : getenv("TL_SERVER");
  const char *token = o->token ? o->token : getenv("TL_TOKEN");
  const char *cache = o->cache ? o->cache : getenv("TL_CLIENT_CACHE");
  tl_status st = TL_OK;
  if (server && *server && (st = tl_client_set_server(c, server, &err)) != TL_OK)
    goto bad;
  if (token && *token && (st = tl_client_set_token(c, token, &err)) != TL_OK)
    goto bad;
  if (o->cacert && (st = tl_client_set_ca_file(c, o->cacert, &err)) != TL_OK)
    goto bad;
  if (cache && *cache &&
      (st = tl_client_set_cache_path(c, strcmp(cache, "none") == 0 ? NULL : cache, &err)) != TL_OK)
    goto bad;
  if (o->timeout_ms && (st = tl_client_set_timeout_ms(c, o->timeout_ms, &err)) != TL_OK)
    goto bad;
  if (o->connect_ms && (st = tl_client_set_connect_timeout_ms(c, o->connect_ms, &err)) != TL_OK)
    goto bad;
  if (o->retries >= 0 && (st = tl_client_set_retries(c, o->retries, &err)) != TL_OK)
    goto bad;
  if (o->offline)
    tl_client_set_offline(c, 1, NULL);
  const char *bundle = o->bundle ? o->bundle : getenv("TL_CLIENT_BUNDLE");
  if (bundle && *bundle && strcmp(o->cmd, "bundle") != 0 && (st = tl_client_set_bundle(c, bundle, &err)) != TL_OK)
    goto bad;
  const char *tuning = o->tuning ? o->tuning : getenv("TL_CLIENT_TUNING");
  if (tuning && *tuning && strcmp(o->cmd, "tune") != 0 && (st = tl_client_set_tuning(c, tuning, &err)) != TL_OK)
    goto bad;
  return c;
bad:
  fprintf(stderr, "tlclient: %s\n", err.message);
  tl_client_free(c);
  return NULL;
}

static void fill_defines(const cmdline *o, tl_client_define *defs) {
  for (int i = 0; i < o->ndefs; i++)
    defs[i] = (tl_client_define){o->defs[i].name, o->defs[i].value};
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* ---- info ------------------------------------------------------------------------------------------ */

static const char *str_or(json_t *v, const char *dflt) {
  const char *s = json_string_value(v);
  return s ? s : dflt;
}

static void print_local_cache(tl_client *c) {
  const char *path = tl_client_cache_path(c);
  char cap[32];
  human_size(tl_client_cache_max_bytes(c), cap, sizeof cap);
  if (!path) {
    printf("local cache  off\n");
    return;
  }
  struct stat sb;
  if (stat(path, &sb) != 0) {
    printf("local cache  %s: empty (not created yet; cap %s)\n", path, cap);
    return;
  }
  tl_cache *cache = NULL;
  tl_error err;
  tl_cache_stats s;
  if (tl_cache_open(path, NULL, &cache, &err) != TL_OK || tl_cache_get_stats(cache, &s, &err) != TL_OK) {
    printf("local cache  %s: cannot be read: %s\n", path, err.message);
    tl_cache_close(cache);
    return;
  }
  char bytes[32];
  human_size(s.bytes, bytes, sizeof bytes);
  printf("local cache  %s: %lld entries, %lld binaries, %s (cap %s); %lld hits, %lld misses, %lld damaged entries "
         "dropped so far\n",
         path, (long long)s.builds, (long long)s.artifacts, bytes, cap, (long long)s.hits, (long long)s.misses,
         (long long)s.integrity_failures);
  tl_cache_close(cache);
}

static int cmd_info(const cmdline *o, tl_client *c) {
  if (o->npos)
    return usage_error("'info' takes no arguments");
  char *json = NULL;
  tl_error err;
  tl_status st = tl_client_info(c, &json, &err);
  if (o->json) {
    if (st != TL_OK) {
      fprintf(stderr, "tlclient: info: %s\n", err.message);
      return 1;
    }
    printf("%s\n", json);
    free(json);
    return 0;
  }
  printf("server       %s\n", tl_client_server(c));
  if (st == TL_OK) {
    json_t *doc = json_loads(json, 0, NULL);
    json_t *lim = json_object_get(doc, "limits");
    json_t *compiler = json_object_get(doc, "compiler"); /* the identity; older servers give only the release */
    printf("version      %s %s (compiler %s)\n", str_or(json_object_get(doc, "name"), "?"),
           str_or(json_object_get(doc, "version"), "?"),
           str_or(compiler ? compiler : json_object_get(doc, "compiler_version"), "?"));
    const char *tool = json_string_value(json_object_get(doc, "toolchain"));
    printf("toolchain    %s\n", tool ? tool : "none: the server only serves its cache");
    json_t *targets = json_object_get(doc, "targets");
    printf("targets      ");
    size_t i;
    json_t *t;
    json_array_foreach(targets, i, t) printf("%s%s", i ? " " : "", str_or(t, "?"));
    printf("\n");
    printf("limits       %lld workers, queue %lld, compile time-out %g s, body %lld bytes, %lld targets a request\n",
           (long long)json_integer_value(json_object_get(lim, "workers")),
           (long long)json_integer_value(json_object_get(lim, "queue")),
           json_number_value(json_object_get(lim, "compile_timeout_s")),
           (long long)json_integer_value(json_object_get(lim, "max_body_bytes")),
           (long long)json_integer_value(json_object_get(lim, "max_targets")));
    if (json_object_get(lim, "max_program_statements")) /* older servers lack them */
      printf("             a client: %lld compiles running, %lld waiting (0: no limit); %lld statements a program\n",
             (long long)json_integer_value(json_object_get(lim, "max_compiles_per_client")),
             (long long)json_integer_value(json_object_get(lim, "max_queued_per_client")),
             (long long)json_integer_value(json_object_get(lim, "max_program_statements")));
    printf("security     tokens %s, TLS %s\n", json_is_true(json_object_get(doc, "auth")) ? "on" : "off",
           json_is_true(json_object_get(doc, "tls")) ? "on" : "off");
    json_decref(doc);
    free(json);
  } else {
    printf("             %s\n", err.message);
  }
  print_local_cache(c);
  tl_device *d = NULL;
  tl_error derr;
  if (tl_device_open(0, &d, &derr) == TL_OK) {
    printf("device       %s (%s)\n", tl_device_name(d), tl_device_arch_name(d));
    tl_device_free(d);
  } else {
    printf("device       none: %s\n", derr.message);
  }
  if (st != TL_OK) {
    fprintf(stderr, "tlclient: info: %s\n", err.message);
    return 1;
  }
  return 0;
}

/* ---- compile ---------------------------------------------------------------------------------------- */

/* The file name extension of a's binary: "ptx", "hsaco" (an AMD code
 * object, for a gfx target) or "cubin". */
static const char *binary_ext(const tl_artifact *a) {
  if (tl_artifact_is_ptx(a))
    return "ptx";
  return strncmp(tl_artifact_target(a), "gfx", 3) == 0 ? "hsaco" : "cubin";
}

static int cmd_compile(const cmdline *o, tl_client *c) {
  if (o->npos != 1)
    return usage_error("'compile' takes one PROGRAM.json");
  if (!o->ntargets)
    return usage_error("'compile' needs --target T (sm_90, compute_80, ...; see tlclient info)");
  if (o->ntargets > TL_CLIENT_TARGETS_MAX)
    return usage_error("'compile' takes at most %d targets (use prebuild for more)", TL_CLIENT_TARGETS_MAX);
  const char *file = o->pos[0];
  size_t len;
  char *text = read_file(file, &len, TL_CLIENT_PROGRAM_MAX);
  if (!text)
    return 1;
  tl_client_define defs[MAX_LIST];
  fill_defines(o, defs);
  tl_client_request req = {.program = text, .program_len = len, .name = file, .defines = defs,
                           .ndefines = o->ndefs, .options_json = o->options_json};
  tl_target_result *res = NULL;
  tl_error err;
  tl_status st = tl_client_compile(c, &req, o->targets, o->ntargets, &res, &err);
  if (st != TL_OK) {
    fprintf(stderr, "tlclient: %s\n", err.message);
    free(text);
    return 1;
  }
  int failed = 0;
  if (o->output && mkdir(o->output, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "tlclient: cannot make directory '%s': %s\n", o->output, strerror(errno));
    failed++;
  }
  for (int i = 0; i < o->ntargets; i++) {
    const tl_target_result *r = &res[i];
    if (r->status != TL_OK) {
      fprintf(stderr, "tlclient: %s\n", r->message);
      failed++;
      continue;
    }
    printf("%-12s %-9s key %s  artifact %s  %lld bytes  %.0f ms\n", r->target, r->cached ? "hit" : "compiled",
           r->key, r->artifact, (long long)r->size, r->compile_ms);
    if (!o->output || failed)
      continue;
    tl_artifact *a = NULL;
    if (tl_client_fetch_result_for(c, &req, r, &a, &err) != TL_OK) {
      fprintf(stderr, "tlclient: %s (%s, %s)\n", err.message, file, r->target);
      failed++;
      continue;
    }
    size_t n;
    const void *bytes = tl_artifact_bytes(a, &n);
    char path[4200], mpath[4200];
    snprintf(path, sizeof path, "%s/%s.%s.%s", o->output, tl_artifact_entry(a), r->target, binary_ext(a));
    snprintf(mpath, sizeof mpath, "%s/%s.%s.json", o->output, tl_artifact_entry(a), r->target);
    const char *meta = tl_artifact_metadata(a);
    if (!write_file(path, bytes, n) || !write_file(mpath, meta, strlen(meta)))
      failed++;
    else
      fprintf(stderr, "tlclient: wrote %s (%zu bytes) and %s\n", path, n, base_name(mpath));
    tl_artifact_free(a);
  }
  tl_target_results_free(res, o->ntargets);
  free(text);
  return failed ? 1 : 0;
}

/* ---- fetch ------------------------------------------------------------------------------------------- */

static int cmd_fetch(const cmdline *o, tl_client *c) {
  if (o->npos != 1)
    return usage_error("'fetch' takes one KEY or ID");
  const char *what = o->pos[0];
  bool only_key = strncmp(what, "key:", 4) == 0, only_id = strncmp(what, "artifact:", 9) == 0;
  const char *hex = only_key ? what + 4 : only_id ? what + 9 : what;
  if (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64)
    return usage_error("'%s' is not a build key or artifact id (64 lowercase hexadecimal characters)", what);
  if (!o->output && isatty(1))
    return usage_error("not writing a binary to a terminal: give -o FILE (or redirect the output)");
  if (o->meta_out && only_id)
    return usage_error("--meta needs a build key: an artifact has no metadata of its own");
  tl_error err;
  tl_artifact *a = NULL;
  void *bytes = NULL;
  size_t n = 0;
  const char *kind = "build";
  tl_status st = TL_NOT_FOUND;
  if (!only_id) {
    st = tl_client_fetch_key(c, hex, &a, &err);
    if (st == TL_OK) {
      const void *b = tl_artifact_bytes(a, &n);
      bytes = malloc(n ? n : 1);
      if (!bytes)
        die_oom();
      memcpy(bytes, b, n);
    }
  }
  /* not a key we can find (or the server is away): perhaps an artifact id, maybe in the local cache */
  if (st != TL_OK && !only_key && (only_id || st == TL_NOT_FOUND || st == TL_NETWORK || st == TL_BUSY)) {
    tl_error e2;
    tl_status st2 = tl_client_fetch_artifact(c, hex, &bytes, &n, &e2);
    if (st2 == TL_OK || only_id || (st == TL_NOT_FOUND && st2 != TL_NOT_FOUND)) {
      st = st2;
      err = e2;
      kind = "artifact";
    } else if (st == TL_NOT_FOUND) {
      tl_error_set(&err, TL_NOT_FOUND, "neither the local cache nor the server %s has a build or an artifact %s",
                   tl_client_server(c), hex);
    } /* else: the key's error (the server could not be reached) says it best */
  }
  int rc = 0;
  if (st != TL_OK) {
    fprintf(stderr, "tlclient: fetch: %s\n", err.message);
    rc = 1;
  } else {
    if (o->output ? !write_file(o->output, bytes, n) : fwrite(bytes, 1, n, stdout) != n || fflush(stdout) != 0)
      rc = 1;
    if (!rc && o->meta_out && a) {
      const char *m = tl_artifact_metadata(a);
      rc = write_file(o->meta_out, m, strlen(m)) ? 0 : 1;
    }
    if (!rc) {
      if (a)
        fprintf(stderr, "tlclient: fetched build %s: %s, %zu bytes (artifact %s), from %s\n", hex,
                tl_artifact_target(a), n, tl_artifact_id(a),
                tl_artifact_source(a) == TL_SOURCE_LOCAL ? "the local cache" : "the server");
      else
        fprintf(stderr, "tlclient: fetched %s %s: %zu bytes (verified)\n", kind, hex, n);
    }
  }
  free(bytes);
  tl_artifact_free(a);
  return rc;
}

/* ---- prebuild ---------------------------------------------------------------------------------------- */

/* Exit status of prebuild, for CI systems (usage_prebuild and the README say the same). */
enum { PRE_OK = 0, PRE_FAILED = 1, PRE_USAGE = 2, PRE_INFRA = 3 };

/* One program found: its path, its text, and whether it was named on the
 * command line (then it is built even when it does not look like a program). */
typedef struct pprog {
  char *path;
  char *text;
  size_t len;
  bool named;
} pprog;

/* One -D axis of the matrix: NAME and its values. */
typedef struct paxis {
  const char *name;
  char *values_copy; /* the comma-separated list, split in place */
  const char *values[MAX_LIST];
  int nvalues;
  bool declared; /* by at least one program */
} paxis;

/* One build: a program with one choice of constants, for one target. */
typedef struct pjob {
  int prog;
  const tl_client_define *defs; /* shared by the targets of one variant */
  int ndefs;
  const char *target;
  tl_status status;
  char *record;      /* --json: the JSON line */
  bool skipped;      /* not tried: the server was found unreachable before */
} pjob;

typedef struct pstate {
  const cmdline *o;
  const tl_client *proto;
  pprog *progs;
  pjob *jobs;
  int njobs, next, ndone, nhits, ncompiled, nfailed, ninfra, nskipped;
  bool tty, abort;
  double start;
  char last[512]; /* the build that finished last, for the bar */
  pthread_mutex_t mu;
  pthread_cond_t cv;
} pstate;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* True when an --exclude pattern matches path (with '*' also crossing '/') or its base name. */
static bool excluded(const cmdline *o, const char *path) {
  for (int i = 0; i < o->nexcludes; i++)
    if (fnmatch(o->excludes[i], path, 0) == 0 || fnmatch(o->excludes[i], base_name(path), 0) == 0)
      return true;
  return false;
}

static void add_prog(pprog **progs, int *n, int *cap, const char *path, bool named) {
  if (*n == *cap) {
    *cap = *cap ? *cap * 2 : 64;
    pprog *np = realloc(*progs, sizeof **progs * (size_t)*cap);
    if (!np)
      die_oom();
    *progs = np;
  }
  pprog *p = &(*progs)[(*n)++];
  *p = (pprog){.path = strdup(path), .named = named};
  if (!p->path)
    die_oom();
}

/* Appends the programs at path: a file itself, or the *.json files under a
 * directory walked recursively (hidden entries and excluded ones skipped). */
static int collect(const cmdline *o, const char *path, pprog **progs, int *n, int *cap, int depth, bool named) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    fprintf(stderr, "tlclient: prebuild: cannot read '%s': %s\n", path, strerror(errno));
    return PRE_USAGE;
  }
  if (!named && excluded(o, path))
    return 0;
  if (!S_ISDIR(sb.st_mode)) {
    if (*n == MAX_FILES) {
      fprintf(stderr, "tlclient: prebuild: more than %d programs\n", MAX_FILES);
      return PRE_USAGE;
    }
    add_prog(progs, n, cap, path, named);
    return 0;
  }
  if (depth > 32) {
    fprintf(stderr, "tlclient: prebuild: '%s' is nested too deep (32 levels)\n", path);
    return PRE_USAGE;
  }
  DIR *d = opendir(path);
  if (!d) {
    fprintf(stderr, "tlclient: prebuild: cannot read directory '%s': %s\n", path, strerror(errno));
    return PRE_USAGE;
  }
  char **names = NULL;
  int nn = 0, ncap = 0, rc = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    size_t l = strlen(e->d_name);
    char full[4096];
    if (snprintf(full, sizeof full, "%s/%s", path, e->d_name) >= (int)sizeof full)
      continue;
    struct stat es;
    if (stat(full, &es) != 0)
      continue;
    if (!S_ISDIR(es.st_mode) && (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0))
      continue;
    if (nn == ncap) {
      ncap = ncap ? ncap * 2 : 32;
      char **nb = realloc(names, sizeof *names * (size_t)ncap);
      if (!nb)
        die_oom();
      names = nb;
    }
    if (!(names[nn++] = strdup(full)))
      die_oom();
  }
  closedir(d);
  if (nn)
    qsort(names, (size_t)nn, sizeof *names, cmp_str);
  for (int i = 0; i < nn; i++) {
    if (!rc)
      rc = collect(o, names[i], progs, n, cap, depth + 1, false);
    free(names[i]);
  }
  free(names);
  return rc;
}

/* A positional argument: a pattern (with * ? or [) expanded by glob(3), else a path. */
static int collect_arg(const cmdline *o, const char *arg, pprog **progs, int *n, int *cap) {
  if (!strpbrk(arg, "*?[")) {
    struct stat sb;
    return collect(o, arg, progs, n, cap, 0, stat(arg, &sb) == 0 && !S_ISDIR(sb.st_mode));
  }
  glob_t g;
  int grc = glob(arg, 0, NULL, &g);
  if (grc == GLOB_NOMATCH) {
    fprintf(stderr, "tlclient: prebuild: '%s' matches nothing\n", arg);
    return PRE_USAGE;
  }
  if (grc != 0) {
    fprintf(stderr, "tlclient: prebuild: cannot expand '%s'%s\n", arg, grc == GLOB_NOSPACE ? ": out of memory" : "");
    return PRE_USAGE;
  }
  int rc = 0;
  for (size_t i = 0; i < g.gl_pathc && !rc; i++) /* glob sorts the matches */
    rc = collect(o, g.gl_pathv[i], progs, n, cap, 1, false);
  globfree(&g);
  return rc;
}

/* The constants a program declares (its "constants" object), or NULL when
 * the text is not a JSON object; *is_program says whether it has "tlir". */
static json_t *program_doc(const pprog *p, bool *is_program) {
  json_t *doc = p->text ? json_loadb(p->text, p->len, 0, NULL) : NULL;
  *is_program = !doc || (json_is_object(doc) && json_object_get(doc, "tlir"));
  return doc;
}

/* The -D axes: every -D NAME=V1,V2,... once. */
static int make_axes(const cmdline *o, paxis *axes) {
  for (int i = 0; i < o->ndefs; i++) {
    paxis *a = &axes[i];
    a->name = o->defs[i].name;
    for (int k = 0; k < i; k++)
      if (strcmp(axes[k].name, a->name) == 0)
        return usage_error("-D %s is given twice (give its values as one list: -D %s=V1,V2)", a->name, a->name);
    if (!(a->values_copy = strdup(o->defs[i].value)))
      die_oom();
    char *save = NULL;
    for (char *v = strtok_r(a->values_copy, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
      for (int k = 0; k < a->nvalues; k++)
        if (strcmp(a->values[k], v) == 0)
          return usage_error("-D %s: the value %s is given twice", a->name, v);
      if (a->nvalues == MAX_LIST)
        return usage_error("-D %s: more than %d values", a->name, MAX_LIST);
      a->values[a->nvalues++] = v;
    }
    if (!a->nvalues)
      return usage_error("-D %s needs a value (or a list: %s=V1,V2)", a->name, a->name);
  }
  return 0;
}

/* Wire statuses that say the program (or its constants, or its target) is
 * at fault; the others say the server, the network or the files are. */
static bool program_failure(tl_status st) {
  switch (st) {
  case TL_INVALID_ARG: case TL_BAD_JSON: case TL_BAD_PROGRAM: case TL_TOO_LARGE:
  case TL_LIMIT: case TL_UNSUPPORTED: case TL_TOOLCHAIN:
    return true;
  default:
    return false;
  }
}

/* After these, every other request would fail the same way: the rest are not tried. */
static bool stops_the_run(tl_status st) {
  return st == TL_NETWORK || st == TL_UNAUTHORIZED || st == TL_FORBIDDEN;
}

/* A constant's value as JSON: the number or boolean it reads as, else the text. */
static json_t *value_json(const char *text) {
  json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
  if (v && (json_is_number(v) || json_is_boolean(v)))
    return v;
  json_decref(v);
  return json_string(text);
}

/* The --json record of one build (proto/prebuild-record.schema.json). */
static char *make_record(const pstate *s, const pjob *job, const char *status, const tl_target_result *r,
                         tl_status st, const char *msg, bool fetched, double wall_ms) {
  json_t *consts = json_object(), *diags = json_array();
  for (int i = 0; i < job->ndefs; i++)
    json_object_set_new(consts, job->defs[i].name, value_json(job->defs[i].value));
  bool ok = st == TL_OK && r;
  if (!ok && msg) /* the message's lines: the first says what failed, the rest are the diagnostics */
    for (const char *p = msg; *p;) {
      p += strspn(p, " \t");
      size_t l = strcspn(p, "\n");
      if (l)
        json_array_append_new(diags, json_stringn(p, l));
      p += l + (p[l] == '\n');
    }
  json_t *rec = json_pack("{s:s, s:o, s:s, s:s, s:o, s:o, s:o, s:o, s:f, s:o, s:o, s:o}",
                          "program", s->progs[job->prog].path, "constants", consts, "target", job->target,
                          "status", status,
                          "key", ok ? json_string(r->key) : json_null(),
                          "artifact", ok ? json_string(r->artifact) : json_null(),
                          "size", ok ? json_integer(r->size) : json_null(),
                          "compile_ms", ok ? json_real(r->compile_ms) : json_null(),
                          "wall_ms", wall_ms,
                          "fetched", json_boolean(fetched),
                          "error", ok ? json_null() : json_string(tl_status_name(st)),
                          "diagnostics", diags);
  char *text = rec ? json_dumps(rec, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(9)) : NULL;
  json_decref(rec);
  if (!text)
    die_oom();
  return text;
}

static void draw_bar(pstate *s) {
  int width = 30, filled = s->njobs ? s->ndone * width / s->njobs : width;
  char bar[64];
  for (int i = 0; i < width; i++)
    bar[i] = i < filled ? '#' : '.';
  bar[width] = 0;
  fprintf(stderr, "\r\033[K[%s] %d/%d  %d hits  %d compiled  %d failed  %.1fs%s%s", bar, s->ndone, s->njobs,
          s->nhits, s->ncompiled, s->nfailed, now_s() - s->start, s->last[0] ? "  " : "", s->last);
  fflush(stderr);
}

/* The constants of a build as "M=64 N=128", for the plain lines. */
static void defs_text(const pjob *job, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  for (int i = 0; i < job->ndefs && n < cap; i++)
    n += (size_t)snprintf(out + n, cap - n, "%s%s=%s", i ? " " : "", job->defs[i].name, job->defs[i].value);
}

static void *prebuild_worker(void *arg) {
  pstate *s = arg;
  tl_client *c = NULL;
  tl_error err;
  if (tl_client_dup(s->proto, &c, &err) != TL_OK)
    c = NULL;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    int j = s->next < s->njobs ? s->next++ : -1;
    bool abort_run = s->abort;
    pthread_mutex_unlock(&s->mu);
    if (j < 0)
      break;
    pjob *job = &s->jobs[j];
    const pprog *p = &s->progs[job->prog];
    double t0 = now_s();
    tl_status st;
    int cached = 0;
    bool fetched = false;
    char msg[TL_ERROR_MESSAGE_MAX + 64] = "";
    tl_target_result *res = NULL;
    if (abort_run) {
      st = TL_NETWORK;
      job->skipped = true;
      snprintf(msg, sizeof msg, "not tried: an earlier build found the server %s unusable", tl_client_server(s->proto));
    } else if (!c) {
      st = TL_NOMEM;
      snprintf(msg, sizeof msg, "%s", err.message);
    } else if (!p->text) {
      st = TL_IO;
      snprintf(msg, sizeof msg, "cannot read %s", p->path);
    } else {
      tl_client_request req = {.program = p->text, .program_len = p->len, .name = p->path,
                               .defines = job->defs, .ndefines = job->ndefs};
      st = tl_client_compile(c, &req, &job->target, 1, &res, &err);
      if (st != TL_OK)
        snprintf(msg, sizeof msg, "%s", err.message);
      else if ((st = res[0].status) != TL_OK)
        snprintf(msg, sizeof msg, "%s", res[0].message);
      else {
        cached = res[0].cached;
        if (s->o->fetch) {
          tl_artifact *a = NULL;
          if ((st = tl_client_fetch_result_for(c, &req, &res[0], &a, &err)) != TL_OK)
            snprintf(msg, sizeof msg, "%s (%s, %s)", err.message, p->path, job->target);
          fetched = st == TL_OK;
          tl_artifact_free(a);
        }
      }
    }
    double ms = (now_s() - t0) * 1000;
    const char *status = job->skipped ? "skipped" : st != TL_OK ? "error" : cached ? "hit" : "compiled";
    char *record = s->o->json ? make_record(s, job, status, res, st, msg, fetched, ms) : NULL;
    if (res)
      tl_target_results_free(res, 1);
    char consts[512];
    defs_text(job, consts, sizeof consts);
    pthread_mutex_lock(&s->mu);
    job->status = st;
    s->ndone++;
    if (st == TL_OK)
      *(cached ? &s->nhits : &s->ncompiled) += 1;
    else if (job->skipped)
      s->nskipped++;
    else if (program_failure(st))
      s->nfailed++;
    else
      s->ninfra++;
    if (stops_the_run(st))
      s->abort = true;
    snprintf(s->last, sizeof s->last, "%s %s", base_name(p->path), job->target);
    if (record) {
      puts(record);
      fflush(stdout);
      free(record);
    } else if (s->tty) {
      if (st != TL_OK && !job->skipped)
        fprintf(stderr, "\r\033[KFAIL %s%s%s\n", msg, consts[0] ? " with " : "", consts);
      draw_bar(s);
    } else if (!job->skipped) {
      if (st == TL_OK)
        printf("ok    %-8s %-12s %s%s%s  (%.0f ms)\n", cached ? "hit" : "compiled", job->target, p->path,
               consts[0] ? " " : "", consts, ms);
      else
        printf("FAIL  %-8s %-12s %s%s%s  %s\n", "", job->target, p->path, consts[0] ? " " : "", consts, msg);
      fflush(stdout);
    }
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
  tl_client_free(c);
  return NULL;
}

/* Runs the jobs on --jobs threads (default 4), the bar moving meanwhile on a terminal. */
static int run_jobs(pstate *s) {
  int nthreads = s->o->jobs ? s->o->jobs : 4;
  if (nthreads > s->njobs)
    nthreads = s->njobs;
  pthread_t th[MAX_JOBS];
  int started = 0;
  if (s->tty) {
    pthread_mutex_lock(&s->mu);
    draw_bar(s);
    pthread_mutex_unlock(&s->mu);
  }
  for (int i = 0; i < nthreads; i++)
    if (pthread_create(&th[i], NULL, prebuild_worker, s) == 0)
      started++;
  if (!started) {
    fprintf(stderr, "tlclient: prebuild: cannot start a thread\n");
    return PRE_INFRA;
  }
  pthread_mutex_lock(&s->mu);
  while (s->ndone < s->njobs) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 250000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    if (s->tty && s->ndone < s->njobs)
      draw_bar(s);
  }
  pthread_mutex_unlock(&s->mu);
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  if (s->tty)
    fprintf(stderr, "\r\033[K");
  return 0;
}

/* The variants of one program: the cross product of the -D axes it
 * declares, appended to *defs as groups of nd defines; returns how many. */
static int64_t program_variants(const paxis *axes, int naxes, json_t *doc, const char *path, tl_client_define **defs,
                                int *nd) {
  json_t *declared = json_object_get(doc, "constants");
  int use[MAX_LIST], nuse = 0;
  int64_t count = 1;
  for (int i = 0; i < naxes; i++) {
    if (json_object_get(declared, axes[i].name)) {
      use[nuse++] = i;
      count *= axes[i].nvalues;
      if (count > 1000000)
        return count;
    } else {
      fprintf(stderr, "tlclient: prebuild: note: %s does not declare the constant %s: built without -D %s\n", path,
              axes[i].name, axes[i].name);
    }
  }
  *nd = nuse;
  *defs = nuse ? malloc(sizeof **defs * (size_t)(nuse * count)) : NULL;
  if (nuse && !*defs)
    die_oom();
  for (int64_t v = 0; v < count; v++) { /* the last axis varies fastest */
    int64_t rest = v;
    for (int k = nuse - 1; k >= 0; k--) {
      const paxis *a = &axes[use[k]];
      (*defs)[v * nuse + k] = (tl_client_define){a->name, a->values[rest % a->nvalues]};
      rest /= a->nvalues;
    }
  }
  return count;
}

static int cmd_prebuild(const cmdline *o, tl_client *c) {
  if (!o->npos)
    return usage_error("'prebuild' needs a directory, program files or patterns");
  if (!o->ntargets)
    return usage_error("'prebuild' needs --target T (repeated, or a list: sm_90,sm_80)");
  pprog *progs = NULL;
  paxis axes[MAX_LIST] = {{0}};
  tl_client_define **vdefs = NULL;
  int nprogs = 0, cap = 0, rc = 0, naxes = o->ndefs, nvariants = 0;
  pstate s = {.o = o, .proto = c, .tty = isatty(2) != 0 && !o->json, .start = now_s()};
  if ((rc = make_axes(o, axes)) != 0)
    goto out;
  for (int i = 0; i < o->npos && !rc; i++)
    rc = collect_arg(o, o->pos[i], &progs, &nprogs, &cap);
  if (rc)
    goto out;
  /* read every program; found ones that are not Tile IR programs are left out */
  int kept = 0;
  json_t **docs = calloc((size_t)nprogs + 1, sizeof *docs);
  if (!docs)
    die_oom();
  for (int f = 0; f < nprogs; f++) {
    pprog p = progs[f];
    p.text = read_file(p.path, &p.len, TL_CLIENT_PROGRAM_MAX);
    if (!p.text) /* read_file said why */
      rc = PRE_USAGE;
    bool is_program;
    json_t *doc = program_doc(&p, &is_program);
    if (!is_program && !p.named) {
      fprintf(stderr, "tlclient: prebuild: note: skipped %s: not a Tile IR program (no \"tlir\" member)\n", p.path);
      json_decref(doc);
      free(p.path);
      free(p.text);
      continue;
    }
    docs[kept] = doc;
    progs[kept++] = p;
  }
  nprogs = kept;
  if (rc)
    goto docs_out;
  if (!nprogs) {
    fprintf(stderr, "tlclient: prebuild: no Tile IR programs found in %s%s\n", o->pos[0], o->npos > 1 ? " ..." : "");
    rc = PRE_USAGE;
    goto docs_out;
  }
  /* the matrix: per program, its variants x the targets */
  vdefs = calloc((size_t)nprogs, sizeof *vdefs);
  int *vcount = calloc((size_t)nprogs, sizeof *vcount), *vnd = calloc((size_t)nprogs, sizeof *vnd);
  if (!vdefs || !vcount || !vnd)
    die_oom();
  int64_t total = 0;
  for (int f = 0; f < nprogs && !rc; f++) {
    for (int i = 0; i < naxes; i++)
      axes[i].declared |= json_object_get(json_object_get(docs[f], "constants"), axes[i].name) != NULL;
    int64_t n = program_variants(axes, naxes, docs[f], progs[f].path, &vdefs[f], &vnd[f]);
    total += n * o->ntargets;
    if (n > 1000000 || total > 1000000) {
      fprintf(stderr, "tlclient: prebuild: the programs, their -D values and the targets make more than a million builds\n");
      rc = PRE_USAGE;
    }
    vcount[f] = (int)n;
    nvariants += vcount[f];
  }
  for (int i = 0; i < naxes && !rc; i++)
    if (!axes[i].declared)
      rc = usage_error("-D %s: no program declares the constant %s", axes[i].name, axes[i].name);
  if (!rc) {
    s.progs = progs;
    s.njobs = (int)total;
    s.jobs = calloc((size_t)s.njobs, sizeof *s.jobs);
    if (!s.jobs)
      die_oom();
    int j = 0;
    for (int f = 0; f < nprogs; f++)
      for (int v = 0; v < vcount[f]; v++)
        for (int t = 0; t < o->ntargets; t++)
          s.jobs[j++] = (pjob){.prog = f, .defs = vnd[f] ? vdefs[f] + v * vnd[f] : NULL, .ndefs = vnd[f],
                               .target = o->targets[t]};
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    rc = run_jobs(&s);
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
  }
  if (!rc) {
    FILE *sum = o->json ? stderr : stdout;
    fprintf(sum, "prebuild: %d build%s (%d program%s", s.njobs, s.njobs == 1 ? "" : "s", nprogs, nprogs == 1 ? "" : "s");
    if (nvariants != nprogs)
      fprintf(sum, ", %d with their constants,", nvariants);
    fprintf(sum, " x %d target%s) on %s: %d hits, %d compiled, %d failed", o->ntargets, o->ntargets == 1 ? "" : "s",
            tl_client_server(c), s.nhits, s.ncompiled, s.nfailed + s.ninfra + s.nskipped);
    if (s.ninfra || s.nskipped)
      fprintf(sum, " (%d by the server or the network, %d not tried)", s.ninfra, s.nskipped);
    fprintf(sum, " in %.1f s\n", now_s() - s.start);
    if ((s.nfailed || s.ninfra) && s.tty) /* the failures scrolled by above the bar: list them again */
      for (int j = 0; j < s.njobs; j++)
        if (s.jobs[j].status != TL_OK && !s.jobs[j].skipped)
          fprintf(stderr, "failed: %s %s\n", progs[s.jobs[j].prog].path, s.jobs[j].target);
    rc = s.ninfra || s.nskipped ? PRE_INFRA : s.nfailed ? PRE_FAILED : PRE_OK;
  }
  for (int f = 0; f < nprogs; f++)
    free(vdefs[f]);
  free(vcount);
  free(vnd);
docs_out:
  for (int f = 0; f < nprogs; f++)
    json_decref(docs[f]);
  free(docs);
out:
  for (int f = 0; f < nprogs; f++) {
    free(progs[f].path);
    free(progs[f].text);
  }
  free(progs);
  free(vdefs);
  free(s.jobs);
  for (int i = 0; i < naxes; i++)
    free(axes[i].values_copy);
  return rc;
}

/* ---- explain ------------------------------------------------------------------------------------------ */

#define EXPLAIN_CANDIDATES_MAX 256 /* local cache entries whose manifest explain asks the server for */
#define MANIFEST_MAGIC "tl-build-key 1\n"

/* The fields of a key manifest (proto/kernel-meta.md section 4), in order;
 * "backend" (the back end asked for) is absent from the manifests of
 * compilers before the PTX back end: such a manifest reads "-" there. */
static const char *const manifest_fields[] = {"compiler", "toolchain", "backend", "target",
                                              "options",  "constants", "program"};
enum { MF_COMPILER, MF_TOOLCHAIN, MF_BACKEND, MF_TARGET, MF_OPTIONS, MF_CONSTANTS, MF_PROGRAM, MF_COUNT };

typedef struct manifest {
  char *text;
  char key[65];
  const char *field[MF_COUNT]; /* NUL-terminated copies' starts inside lines */
  char *lines;                 /* the text split into lines */
} manifest;

static void manifest_free(manifest *m) {
  free(m->text);
  free(m->lines);
  memset(m, 0, sizeof *m);
}

/* Splits text (taken) into its fields; false when it is not a key manifest. */
static bool manifest_parse(char *text, const char *key, manifest *m) {
  memset(m, 0, sizeof *m);
  m->text = text;
  snprintf(m->key, sizeof m->key, "%s", key);
  if (!text || strncmp(text, MANIFEST_MAGIC, strlen(MANIFEST_MAGIC)) != 0 || !(m->lines = strdup(text)))
    return false;
  for (char *save = NULL, *l = strtok_r(m->lines, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
    for (int f = 0; f < MF_COUNT; f++) {
      size_t n = strlen(manifest_fields[f]);
      if (strncmp(l, manifest_fields[f], n) == 0 && l[n] == ' ')
        m->field[f] = l + n + 1;
    }
  if (!m->field[MF_BACKEND])
    m->field[MF_BACKEND] = "-";
  for (int f = 0; f < MF_COUNT; f++)
    if (!m->field[f])
      return false;
  return true;
}

/* The constants that differ between two canonical constant objects, as
 * "M=256 here, the cache has M=128"; how many differ. */
static int constants_diff(const char *here, const char *there, char *out, size_t cap) {
  json_t *a = json_loads(here, 0, NULL), *b = json_loads(there, 0, NULL);
  int n = 0;
  size_t used = 0;
  out[0] = 0;
  const char *name;
  json_t *v;
  json_object_foreach(a, name, v) {
    json_t *w = json_object_get(b, name);
    if (w && json_equal(v, w))
      continue;
    char *vs = json_dumps(v, JSON_ENCODE_ANY), *ws = w ? json_dumps(w, JSON_ENCODE_ANY) : NULL;
    if (used < cap)
      used += (size_t)snprintf(out + used, cap - used, "%s%s=%s here, the cache has %s%s%s", n ? "; " : "", name,
                               vs ? vs : "?", w ? name : "no constant ", w ? "=" : name, w && ws ? ws : "");
    free(vs);
    free(ws);
    n++;
  }
  json_object_foreach(b, name, v) {
    if (json_object_get(a, name))
      continue;
    if (used < cap)
      used += (size_t)snprintf(out + used, cap - used, "%sno constant %s here, the cache has one", n ? "; " : "", name);
    n++;
  }
  json_decref(a);
  json_decref(b);
  return n;
}

/* How far a cached build is from the request: lower is nearer; another
 * program weighs most, then the constants, the target, the options, the
 * back end asked for, and the compiler and toolchain least. */
static long manifest_distance(const manifest *want, const manifest *have) {
  long d = 0;
  char buf[8];
  if (strcmp(want->field[MF_PROGRAM], have->field[MF_PROGRAM]) != 0) {
    json_t *a = json_loads(want->field[MF_PROGRAM], 0, NULL), *b = json_loads(have->field[MF_PROGRAM], 0, NULL);
    const char *na = json_string_value(json_object_get(a, "name")), *nb = json_string_value(json_object_get(b, "name"));
    d += na && nb && strcmp(na, nb) == 0 ? 1000 : 100000;
    json_decref(a);
    json_decref(b);
  }
  d += 100L * constants_diff(want->field[MF_CONSTANTS], have->field[MF_CONSTANTS], buf, sizeof buf);
  d += strcmp(want->field[MF_TARGET], have->field[MF_TARGET]) != 0 ? 50 : 0;
  d += strcmp(want->field[MF_OPTIONS], have->field[MF_OPTIONS]) != 0 ? 20 : 0;
  d += strcmp(want->field[MF_BACKEND], have->field[MF_BACKEND]) != 0 ? 10 : 0;
  d += strcmp(want->field[MF_COMPILER], have->field[MF_COMPILER]) != 0 ? 2 : 0;
  d += strcmp(want->field[MF_TOOLCHAIN], have->field[MF_TOOLCHAIN]) != 0 ? 1 : 0;
  return d;
}

/* Prints, in plain words, each input of the request that differs from the cached build. */
static void print_differences(const manifest *want, const manifest *have) {
  int n = 0;
  char buf[2048];
  if (strcmp(want->field[MF_PROGRAM], have->field[MF_PROGRAM]) != 0) {
    json_t *a = json_loads(want->field[MF_PROGRAM], 0, NULL), *b = json_loads(have->field[MF_PROGRAM], 0, NULL);
    const char *na = str_or(json_object_get(a, "name"), "?"), *nb = str_or(json_object_get(b, "name"), "?");
    size_t used = 0;
    buf[0] = 0;
    const char *member;
    json_t *v;
    json_object_foreach(a, member, v) /* the top-level members that differ, constants aside */
      if (strcmp(member, "constants") != 0 && !json_equal(v, json_object_get(b, member)) && used < sizeof buf)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", used ? ", " : "", member);
    if (strcmp(na, nb) != 0)
      printf("  program: %s here, the cache has the program %s\n", na, nb);
    else
      printf("  program: %s here differs from the cached %s in %s\n", na, nb,
             buf[0] ? buf : "its constants' declared values");
    json_decref(a);
    json_decref(b);
    n++;
  }
  if (constants_diff(want->field[MF_CONSTANTS], have->field[MF_CONSTANTS], buf, sizeof buf)) {
    printf("  constants: %s\n", buf);
    n++;
  }
  static const struct { int f; const char *why; } plain[] = {
      {MF_TARGET, "built for another target"},
      {MF_OPTIONS, "built with other compiler options"},
      {MF_BACKEND, "another back end asked for: the option backend, or TL_BACKEND"},
      {MF_COMPILER, "built by another compiler"},
      {MF_TOOLCHAIN, "built with another toolchain"},
  };
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
    if (strcmp(want->field[plain[i].f], have->field[plain[i].f]) != 0) {
      printf("  %s: %s here, the cache has %s (%s)\n", manifest_fields[plain[i].f], want->field[plain[i].f],
             have->field[plain[i].f], plain[i].why);
      n++;
    }
  if (!n)
    printf("  nothing: the manifests are equal\n");
}

static void print_manifest(const char *title, const manifest *m) {
  printf("%s\n", title);
  for (int f = 0; f < MF_COUNT; f++)
    printf("  %-10s %s\n", manifest_fields[f], m->field[f]);
}

typedef struct candidate {
  char key[65];
  char *manifest; /* a copy when the local cache holds the manifest itself, else NULL */
} candidate;

typedef struct candlist {
  candidate *c;
  int n, cap;
} candlist;

static int note_candidate(const tl_cache_build *b, void *user) {
  candlist *l = user;
  if (strncmp(b->manifest, "tl-client-request 1\n", 20) == 0) /* a request: its build is listed too */
    return 0;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    candidate *nc = realloc(l->c, sizeof *l->c * (size_t)l->cap);
    if (!nc)
      die_oom();
    l->c = nc;
  }
  candidate *c = &l->c[l->n++];
  memcpy(c->key, b->key, 65);
  c->manifest = NULL;
  if (strncmp(b->manifest, MANIFEST_MAGIC, strlen(MANIFEST_MAGIC)) == 0 && !(c->manifest = strdup(b->manifest)))
    die_oom();
  return l->n < EXPLAIN_CANDIDATES_MAX ? 0 : 1;
}

/* The build nearest to want among the local cache's builds (most recently
 * used first, at most EXPLAIN_CANDIDATES_MAX); the manifests the local
 * cache lacks come from the server when ask_server.  False when there is none. */
static bool nearest_build(tl_client *c, const manifest *want, bool ask_server, manifest *best) {
  const char *path = tl_client_cache_path(c);
  tl_cache *cache = NULL;
  candlist l = {0};
  if (path && access(path, F_OK) == 0 && tl_cache_open(path, NULL, &cache, NULL) == TL_OK)
    tl_cache_list(cache, note_candidate, &l, NULL);
  tl_cache_close(cache);
  long best_d = -1;
  for (int i = 0; i < l.n; i++) {
    char *text = l.c[i].manifest;
    manifest m;
    if (strcmp(l.c[i].key, want->key) == 0 ||
        (!text && (!ask_server || tl_client_build_manifest(c, l.c[i].key, &text, NULL, NULL) != TL_OK))) {
      free(text);
      continue;
    }
    if (!manifest_parse(text, l.c[i].key, &m)) {
      manifest_free(&m);
      continue;
    }
    long d = manifest_distance(want, &m);
    if (best_d < 0 || d < best_d) {
      if (best_d >= 0)
        manifest_free(best);
      *best = m;
      best_d = d;
    } else {
      manifest_free(&m);
    }
  }
  free(l.c);
  return best_d >= 0;
}

/* The request's manifest and key on c's server: computed here (parse,
 * check, key: tl_compile_key) with the server's compiler identity in the
 * compiler line. */
static int request_manifest(const cmdline *o, tl_client *c, manifest *m) {
  size_t len;
  char *text = read_file(o->pos[0], &len, TL_CLIENT_PROGRAM_MAX);
  if (!text)
    return 2;
  tl_define defs[MAX_LIST];
  for (int i = 0; i < o->ndefs; i++)
    defs[i] = (tl_define){o->defs[i].name, o->defs[i].value};
  tl_compile_request req = {.program = text, .program_len = len, .defines = defs, .ndefines = o->ndefs,
                            .target = o->targets[0], .options_json = o->options_json};
  tl_arena *arena = tl_arena_new();
  tl_diags diags = {.arena = arena};
  char key[65], *mtext = NULL;
  tl_error err;
  tl_status st = tl_compile_key(&req, key, &mtext, &diags, &err);
  if (st != TL_OK) {
    fprintf(stderr, "tlclient: explain: %s: %s\n", o->pos[0], err.message);
    tl_diags_print(&diags, o->pos[0], stderr);
  }
  tl_arena_free(arena);
  free(text);
  if (st != TL_OK)
    return 1;
  /* the server's compiler identity in place of this one's */
  const char *server_id = tl_client_compiler_id(c);
  const char *line = strstr(mtext, "\ncompiler ");
  if (server_id[0] && line) {
    const char *end = strchr(line + 1, '\n');
    size_t head = (size_t)(line - mtext) + 10, tail = strlen(end);
    char *n = malloc(head + strlen(server_id) + tail + 1);
    if (!n)
      die_oom();
    memcpy(n, mtext, head);
    memcpy(n + head, server_id, strlen(server_id));
    memcpy(n + head + strlen(server_id), end, tail + 1);
    free(mtext);
    mtext = n;
  }
  tl_sha256_hex(mtext, strlen(mtext), key);
  if (!manifest_parse(mtext, key, m)) {
    fprintf(stderr, "tlclient: explain: the manifest computed here is not one\n");
    manifest_free(m);
    return 1;
  }
  return 0;
}

static int cmd_explain(const cmdline *o, tl_client *c) {
  if (o->npos != 1)
    return usage_error("'explain' takes one KEY or PROGRAM.json");
  const char *what = o->pos[0];
  bool is_key = strlen(what) == 64 && strspn(what, "0123456789abcdef") == 64;
  if (is_key && (o->ndefs || o->ntargets || o->options_json))
    return usage_error("'explain KEY' takes no -D, --target or --options: the key says them all");
  if (!is_key && o->ntargets != 1)
    return usage_error("'explain PROGRAM.json' needs one --target T");
  manifest want = {0};
  tl_error err;
  if (is_key) {
    char *text = NULL;
    tl_source where;
    if (tl_client_build_manifest(c, what, &text, &where, &err) != TL_OK) {
      fprintf(stderr, "tlclient: explain: %s\n", err.message);
      return 1;
    }
    if (!manifest_parse(text, what, &want)) {
      fprintf(stderr, "tlclient: explain: the manifest of %s is not a key manifest\n", what);
      manifest_free(&want);
      return 1;
    }
    printf("build %s, from %s:\n", what, where == TL_SOURCE_LOCAL ? "the local cache" : "the server");
    print_manifest("manifest", &want);
    manifest_free(&want);
    return 0;
  }
  int rc = request_manifest(o, c, &want);
  if (rc)
    return rc;
  char *text = NULL;
  tl_source where;
  tl_status st = tl_client_build_manifest(c, want.key, &text, &where, &err);
  free(text);
  printf("request  %s for %s", what, o->targets[0]);
  for (int i = 0; i < o->ndefs; i++)
    printf(" %s=%s", o->defs[i].name, o->defs[i].value);
  printf("\nkey      %s (%s %s)\n", want.key,
         tl_client_compiler_id(c)[0] ? "the server's compiler" : "the server's compiler is not known: this one's,",
         want.field[MF_COMPILER]);
  if (st == TL_OK) {
    printf("status   hit: %s has this build\n", where == TL_SOURCE_LOCAL ? "the local cache" : "the server");
    print_manifest("manifest", &want);
    manifest_free(&want);
    return 0;
  }
  if (st != TL_NOT_FOUND)
    printf("status   unknown: %s\n", err.message);
  else
    printf("status   miss: the server %s has no build with this key\n", tl_client_server(c));
  manifest near;
  if (nearest_build(c, &want, st == TL_NOT_FOUND, &near)) {
    printf("nearest  %s (in the local cache); this request differs in:\n", near.key);
    print_differences(&want, &near);
    manifest_free(&near);
  } else {
    printf("nearest  none: the local cache %s has no build whose manifest is known here\n",
           tl_client_cache_path(c) ? tl_client_cache_path(c) : "(off)");
  }
  print_manifest("manifest of this request", &want);
  manifest_free(&want);
  return 1;
}

/* ---- run ----------------------------------------------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rng(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1DULL;
}

/* Random values, never zero for floats (as tests/gpu/check_examples.py). */
static void fill_random(void *data, size_t count, tl_dtype dt) {
  size_t es = tl_dtype_size(dt);
  for (size_t k = 0; k < count; k++) {
    tl_scalar v;
    if (tl_dtype_is_float(dt)) {
      double x = (double)(rng() >> 11) / 9007199254740992.0 * 2.0 - 1.0;
      if (fabs(x) < 1e-3)
        x = 0.5;
      v.f = tl_round_to(dt, x);
    } else if (dt == TL_BOOL) {
      v.i = (int64_t)(rng() & 1);
    } else if (tl_dtype_size(dt) == 1) {
      v.i = (int64_t)(rng() & 0xff);
      v = tl_convert(v, TL_INT64, dt);
    } else if (tl_dtype_is_signed(dt)) {
      v.i = (int64_t)(rng() % 201) - 100;
    } else {
      v.u = rng() % 101;
    }
    tl_store((char *)data + k * es, dt, v);
  }
}

static void fill_poison(void *data, size_t count, tl_dtype dt) {
  size_t es = tl_dtype_size(dt);
  if (tl_dtype_is_float(dt) && dt != TL_FLOAT4_E2M1) { /* float4_e2m1 has no NaN */
    tl_scalar nan = tl_convert((tl_scalar){.f = NAN}, TL_FLOAT64, dt);
    for (size_t k = 0; k < count; k++)
      tl_store((char *)data + k * es, dt, nan);
  } else {
    memset(data, 0xA5, count * es);
  }
}

static double bound_of(tl_dtype dt) {
  switch (dt) {
  case TL_FLOAT64: return 1e-10;
  case TL_FLOAT32: return 1e-4;
  case TL_FLOAT16: return 1e-2;
  case TL_BFLOAT16: return 2e-2;
  case TL_FLOAT8_E4M3:
  case TL_FLOAT8_E5M2: return 0.15;
  case TL_FLOAT4_E2M1: return 0.3;
  case TL_FLOAT8_E8M0: return 0.5;
  default: return 0;
  }
}

/* Compares the GPU's tensor with the interpreter's; prints one line. */
static bool compare_tensor(const char *name, tl_dtype dt, const void *dev, const void *ref, const void *before,
                           size_t count, FILE *log) {
  size_t es = tl_dtype_size(dt);
  bool changed = memcmp(ref, before, count * es) != 0;
  if (!tl_dtype_is_float(dt)) {
    size_t bad = 0, first = 0;
    for (size_t k = 0; k < count; k++)
      if (memcmp((const char *)dev + k * es, (const char *)ref + k * es, es) != 0 && !bad++)
        first = k;
    if (bad && log)
      fprintf(log, "FAIL %s (%s, %zu elements): %zu differ, the first at flat index %zu\n", name, tl_dtype_name(dt), count,
             bad, first);
    else if (log)
      fprintf(log, "ok   %s (%s, %zu elements): equal%s\n", name, tl_dtype_name(dt), count, changed ? "" : " (unchanged input)");
    return bad == 0;
  }
  double num = 0, den = 0;
  size_t nan_dev = 0, nan_ref = 0;
  for (size_t k = 0; k < count; k++) {
    double a = tl_load((const char *)dev + k * es, dt).f, b = tl_load((const char *)ref + k * es, dt).f;
    bool na = isnan(a), nb = isnan(b);
    nan_dev += na;
    nan_ref += nb;
    if (na || nb || isinf(a) || isinf(b)) {
      if (!(na && nb) && !(a == b))
        num = INFINITY;
      continue;
    }
    num += (a - b) * (a - b);
    den += b * b;
  }
  double rel = sqrt(num) / fmax(sqrt(den), 1e-30);
  if (num == 0)
    rel = 0;
  bool ok = rel <= bound_of(dt) && nan_dev == nan_ref;
  if (log)
    fprintf(log, "%s %s (%s, %zu elements): rel err %.2e (bound %g), NaN %zu vs %zu in the interpreter's%s\n",
         ok ? "ok  " : "FAIL", name, tl_dtype_name(dt), count, rel, bound_of(dt), nan_dev, nan_ref,
         changed ? "" : " (unchanged input)");
  return ok;
}

static bool parse_scalar(const char *text, tl_dtype t, int64_t *iv, double *fv) {
  char *end;
  errno = 0;
  if (t == TL_BOOL) {
    if (strcmp(text, "true") == 0 || strcmp(text, "1") == 0)
      *iv = 1;
    else if (strcmp(text, "false") == 0 || strcmp(text, "0") == 0)
      *iv = 0;
    else
      return false;
    return true;
  }
  if (t == TL_FLOAT32) {
    *fv = strtod(text, &end);
    return *text && !*end && errno != ERANGE;
  }
  long long v = strtoll(text, &end, 0);
  if (!*text || *end || errno == ERANGE || (t == TL_INT32 && (v < INT32_MIN || v > INT32_MAX)))
    return false;
  *iv = v;
  return true;
}

static int find_param(const tl_program *prog, const char *name, const char *opt, const char *file) {
  for (int i = 0; i < tl_user_params(prog); i++)
    if (strcmp(prog->params[i]->name, name) == 0)
      return i;
  const char *names[TL_MAX_PARAMS];
  for (int i = 0; i < tl_user_params(prog); i++)
    names[i] = prog->params[i]->name;
  const char *hint = tl_closest(name, names, tl_user_params(prog));
  fprintf(stderr, "tlclient: run %s: %s %s: the kernel has no parameter '%s'%s%s%s\n", file, opt, name, name,
          hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
  return -1;
}

static int cmd_run(const cmdline *o, tl_client *c) {
  if (o->npos != 1)
    return usage_error("'run' takes one PROGRAM.json");
  const char *file = o->pos[0];
  size_t len;
  char *text = read_file(file, &len, TL_CLIENT_PROGRAM_MAX);
  if (!text)
    return 1;
  int rc = 1;
  tl_arena *arena = tl_arena_new();
  tl_define tdefs[MAX_LIST];
  tl_client_define cdefs[MAX_LIST];
  for (int i = 0; i < o->ndefs; i++)
    tdefs[i] = (tl_define){o->defs[i].name, o->defs[i].value};
  fill_defines(o, cdefs);
  tl_diags diags = {.arena = arena};
  tl_program *prog = tl_load_program(arena, text, len, tdefs, o->ndefs, &diags);
  tl_npy host[TL_MAX_PARAMS], init[TL_MAX_PARAMS];
  memset(host, 0, sizeof host);
  memset(init, 0, sizeof init);
  tl_arg iargs[TL_MAX_PARAMS];
  memset(iargs, 0, sizeof iargs);
  tl_kernel_arg kargs[TL_MAX_PARAMS];
  memset(kargs, 0, sizeof kargs);
  bool given[TL_MAX_PARAMS] = {0};
  uint64_t dptr[TL_MAX_PARAMS] = {0};
  tl_device *dev = NULL;
  tl_artifact *art = NULL;
  tl_kernel *k = NULL;
  tl_error err;
  if (!prog) {
    tl_diags_print(&diags, file, stderr);
    goto out;
  }
  uint64_t seed = o->seed_given ? o->seed : ((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20)) % 1000000007ULL;
  rng_state = seed ? seed : 1;
  /* scalars */
  for (int i = 0; i < o->nargs; i++) {
    int p = find_param(prog, o->args[i].name, "--arg", file);
    if (p < 0)
      goto usage;
    const tl_sym *s = prog->params[p];
    if (s->kind != SYM_SCALAR) {
      fprintf(stderr, "tlclient: run %s: --arg %s: '%s' is a tensor; give it with --in %s=FILE.npy\n", file, s->name,
              s->name, s->name);
      goto usage;
    }
    int64_t iv = 0;
    double fv = 0;
    if (!parse_scalar(o->args[i].value, s->dtype, &iv, &fv)) {
      fprintf(stderr, "tlclient: run %s: --arg %s=%s: not a valid %s\n", file, s->name, o->args[i].value,
              tl_dtype_name(s->dtype));
      goto usage;
    }
    if (s->dtype == TL_FLOAT32) {
      fv = tl_f32_round(fv); /* what the kernel gets, for the interpreter too */
      iargs[p].scalar.f = fv;
      kargs[p] = tl_arg_float(fv);
    } else {
      iargs[p].scalar.i = iv;
      kargs[p] = tl_arg_int(iv);
    }
    given[p] = true;
  }
  for (int p = 0; p < tl_user_params(prog); p++)
    if (prog->params[p]->kind == SYM_SCALAR && !given[p]) {
      fprintf(stderr, "tlclient: run %s: scalar parameter '%s' (%s) needs a value: --arg %s=VALUE\n", file,
              prog->params[p]->name, tl_dtype_name(prog->params[p]->dtype), prog->params[p]->name);
      goto usage;
    }
  /* tensors */
  for (int i = 0; i < o->nins; i++) {
    int p = find_param(prog, o->ins[i].name, "--in", file);
    if (p < 0)
      goto usage;
    const tl_sym *s = prog->params[p];
    if (s->kind != SYM_TENSOR) {
      fprintf(stderr, "tlclient: run %s: --in %s: '%s' is a scalar; give it with --arg %s=VALUE\n", file, s->name,
              s->name, s->name);
      goto usage;
    }
    if (given[p]) {
      fprintf(stderr, "tlclient: run %s: --in %s is given twice\n", file, s->name);
      goto usage;
    }
    if (tl_npy_read(o->ins[i].value, s->dtype, &host[p], &err) != TL_OK) {
      fprintf(stderr, "tlclient: run %s: --in %s: %s\n", file, s->name, err.message);
      goto out;
    }
    given[p] = true;
  }
  for (int i = 0; i < o->nouts; i++) {
    int p = find_param(prog, o->outs[i].name, "--out", file);
    if (p < 0)
      goto usage;
    if (prog->params[p]->kind != SYM_TENSOR) {
      fprintf(stderr, "tlclient: run %s: --out %s: '%s' is a scalar, not a tensor\n", file, o->outs[i].name,
              o->outs[i].name);
      goto usage;
    }
  }
  for (int p = 0; p < tl_user_params(prog); p++) {
    const tl_sym *s = prog->params[p];
    if (s->kind != SYM_TENSOR)
      continue;
    int64_t shape[TL_MAX_DIMS];
    if (tl_tensor_shape(prog, p, iargs, shape, &err) != TL_OK) {
      fprintf(stderr, "tlclient: run %s: tensor '%s': %s\n", file, s->name, err.message);
      goto out;
    }
    size_t count = 1;
    for (int d = 0; d < s->ndim; d++)
      count *= (size_t)shape[d];
    size_t es = tl_dtype_size(s->dtype);
    if (given[p]) {
      bool same = host[p].ndim == s->ndim;
      for (int d = 0; same && d < s->ndim; d++)
        same = host[p].shape[d] == shape[d];
      if (!same) {
        fprintf(stderr, "tlclient: run %s: --in %s: the file's shape does not match the tensor's\n", file, s->name);
        goto out;
      }
    } else {
      if (count > ((size_t)1 << 34) / es) {
        fprintf(stderr, "tlclient: run %s: tensor '%s' has %zu elements; the limit is 16 GiB\n", file, s->name, count);
        goto out;
      }
      host[p] = (tl_npy){.dtype = s->dtype, .ndim = s->ndim, .count = count, .data = malloc(count * es + 1)};
      for (int d = 0; d < s->ndim; d++)
        host[p].shape[d] = shape[d];
      if (!host[p].data)
        die_oom();
      if (o->check)
        fill_random(host[p].data, count, s->dtype);
      else
        fill_poison(host[p].data, count, s->dtype);
    }
  }
  /* the GPU */
  if (tl_device_open(o->device, &dev, &err) != TL_OK) {
    fprintf(stderr, "tlclient: run %s: %s\n", file, err.message);
    goto out;
  }
  tl_client_request req = {.program = text, .program_len = len, .name = file, .defines = cdefs, .ndefines = o->ndefs};
  double t0 = now_s();
  tl_status st = o->ntargets ? tl_client_get(c, &req, o->targets[0], &art, &err)
                             : tl_client_get_for_device(c, &req, dev, &art, &err);
  if (st != TL_OK) {
    fprintf(stderr, "tlclient: run: %s\n", err.message);
    goto out;
  }
  double t_get = now_s() - t0;
  if (tl_kernel_load(dev, art, &k, &err) != TL_OK) {
    fprintf(stderr, "tlclient: run %s (%s): %s\n", file, tl_artifact_target(art), err.message);
    goto out;
  }
  for (int p = 0; p < tl_user_params(prog); p++) {
    const tl_sym *s = prog->params[p];
    if (s->kind != SYM_TENSOR)
      continue;
    size_t bytes = host[p].count * tl_dtype_size(s->dtype);
    init[p] = host[p];
    init[p].data = malloc(bytes + 1);
    if (!init[p].data)
      die_oom();
    memcpy(init[p].data, host[p].data, bytes);
    /* packed types travel in their device layout (tl_pack) */
    size_t dbytes = (size_t)tl_dtype_bytes(s->dtype, host[p].count);
    void *packed = malloc(dbytes + 1);
    if (!packed)
      die_oom();
    tl_pack(s->dtype, host[p].data, host[p].count, packed);
    bool ok = tl_device_alloc(dev, dbytes, &dptr[p], &err) == TL_OK &&
              tl_device_upload(dev, dptr[p], packed, dbytes, &err) == TL_OK;
    free(packed);
    if (!ok) {
      fprintf(stderr, "tlclient: run %s: tensor '%s': %s\n", file, s->name, err.message);
      goto out;
    }
    kargs[p] = tl_arg_tensor(dptr[p]);
  }
  double t1 = now_s();
  if (tl_kernel_launch(k, kargs, tl_user_params(prog), NULL, &err) != TL_OK || tl_device_sync(dev, &err) != TL_OK) {
    fprintf(stderr, "tlclient: run %s (%s on %s): %s\n", file, tl_artifact_target(art), tl_device_name(dev),
            err.message);
    goto out;
  }
  double t_run = now_s() - t1;
  for (int p = 0; p < tl_user_params(prog); p++) {
    tl_dtype dt = prog->params[p]->dtype;
    if (prog->params[p]->kind != SYM_TENSOR)
      continue;
    size_t dbytes = (size_t)tl_dtype_bytes(dt, host[p].count);
    void *packed = malloc(dbytes + 1);
    if (!packed)
      die_oom();
    bool ok = tl_device_download(dev, packed, dptr[p], dbytes, &err) == TL_OK;
    if (ok)
      tl_unpack(dt, packed, host[p].count, host[p].data);
    free(packed);
    if (!ok) {
      fprintf(stderr, "tlclient: run %s: %s\n", file, err.message);
      goto out;
    }
  }
  fprintf(stderr, "tlclient: ran %s (%s, %s from %s in %.1f ms) on %s in %.3f ms\n", tl_artifact_entry(art),
          file, tl_artifact_target(art), tl_source_name(tl_artifact_source(art)), t_get * 1000, tl_device_name(dev),
          t_run * 1000);
  rc = 0;
  if (o->check) {
    /* the interpreter on copies of the same inputs */
    tl_npy ref[TL_MAX_PARAMS];
    memset(ref, 0, sizeof ref);
    for (int p = 0; p < tl_user_params(prog); p++) {
      if (prog->params[p]->kind != SYM_TENSOR)
        continue;
      size_t bytes = init[p].count * tl_dtype_size(init[p].dtype);
      ref[p] = init[p];
      ref[p].data = malloc(bytes + 1);
      if (!ref[p].data)
        die_oom();
      memcpy(ref[p].data, init[p].data, bytes);
      iargs[p].data = ref[p].data;
      iargs[p].count = ref[p].count;
    }
    double t2 = now_s();
    if (tl_interpret(prog, iargs, NULL, &err) != TL_OK) {
      fprintf(stderr, "tlclient: run %s: the reference interpreter failed: %s%s%s\n", file, err.pointer,
              err.pointer[0] ? ": " : "", err.message);
      rc = 1;
    } else {
      fprintf(stderr, "tlclient: the reference interpreter took %.2f s\n", now_s() - t2);
      for (int p = 0; p < tl_user_params(prog); p++)
        if (prog->params[p]->kind == SYM_TENSOR &&
            !compare_tensor(prog->params[p]->name, prog->params[p]->dtype, host[p].data, ref[p].data, init[p].data,
                            host[p].count, stdout))
          rc = 1;
      printf("check: %s against the reference interpreter (inputs from --seed %llu)\n", rc ? "FAILED" : "passed",
             (unsigned long long)seed);
    }
    for (int p = 0; p < TL_MAX_PARAMS; p++)
      tl_npy_free(&ref[p]);
  }
  for (int i = 0; i < o->nouts; i++) {
    int p = find_param(prog, o->outs[i].name, "--out", file);
    if (tl_npy_write(o->outs[i].value, &host[p], &err) != TL_OK) {
      fprintf(stderr, "tlclient: run %s: --out %s: %s\n", file, o->outs[i].name, err.message);
      rc = 1;
    }
  }
  goto out;
usage:
  rc = 2;
out:
  for (int p = 0; p < TL_MAX_PARAMS; p++) {
    if (dptr[p])
      tl_device_mem_free(dev, dptr[p]);
    tl_npy_free(&host[p]);
    tl_npy_free(&init[p]);
  }
  tl_kernel_free(k);
  tl_artifact_free(art);
  tl_device_free(dev);
  tl_arena_free(arena);
  free(text);
  return rc;
}

/* ---- tune ------------------------------------------------------------------------------------------------ */

#define TUNE_VARIANTS_MAX 1024 /* variants of one tune (the cross product of --space) */
#define TUNE_REPEAT_DEFAULT 20 /* timed launches of each variant (after 3 untimed) */

/* One variant: the shape's overrides and its space values. */
typedef struct tcand {
  tl_client_define defs[MAX_LIST * 2]; /* --shape, then the space's */
  int nshape, ndefs;
  tl_client_define cdefs[MAX_LIST * 2]; /* --check-shape (else --shape), then the space's */
  int ncdefs;
  char label[512];                      /* "block_M=64,block_N=128" */
  tl_status status;                     /* TL_OK while it is in the running */
  char why[TL_ERROR_MESSAGE_MAX + 64];
  char key[65];
  double ms;
} tcand;

typedef struct tstate {
  const cmdline *o;
  const tl_client *proto;
  const tl_device *dev;        /* NULL with the fake timer: --target then */
  const char *text, *file;
  size_t len;
  tcand *cands;
  int n, next;
  pthread_mutex_t mu;
} tstate;

/* Compiles (or finds) both builds of each variant, N at a time. */
static void *tune_worker(void *arg) {
  tstate *s = arg;
  tl_client *c = NULL;
  tl_error err;
  bool have = tl_client_dup(s->proto, &c, &err) == TL_OK;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    int i = s->next < s->n ? s->next++ : -1;
    pthread_mutex_unlock(&s->mu);
    if (i < 0)
      break;
    tcand *t = &s->cands[i];
    if (!have) {
      t->status = err.code;
      snprintf(t->why, sizeof t->why, "%s", err.message);
      continue;
    }
    for (int pass = 0; pass < 2 && t->status == TL_OK; pass++) { /* the timed shape, then the checked one */
      tl_client_request req = {.program = s->text, .program_len = s->len, .name = s->file,
                               .defines = pass ? t->cdefs : t->defs, .ndefines = pass ? t->ncdefs : t->ndefs};
      tl_artifact *a = NULL;
      tl_status st = s->dev ? tl_client_get_for_device(c, &req, s->dev, &a, &err)
                            : tl_client_get(c, &req, s->o->targets[0], &a, &err);
      if (st != TL_OK) {
        t->status = st;
        snprintf(t->why, sizeof t->why, "compile%s: %s", pass ? " (check shape)" : "", err.message);
        for (char *nl = strchr(t->why, '\n'); nl; nl = strchr(nl, '\n')) /* one line per variant */
          *nl = ' ';
      } else if (!pass)
        snprintf(t->key, sizeof t->key, "%s", tl_artifact_key(a));
      tl_artifact_free(a);
    }
  }
  tl_client_free(c);
  return NULL;
}

/* Runs the interpreter on the program with defs and --arg, on random inputs
 * of seed; its tensors (inputs and outputs) in out[].  False with why. */
static bool tune_interpret(const tstate *s, const tl_client_define *defs, int n, uint64_t seed, tl_arena *arena,
                           const tl_program **progp, tl_npy out[TL_MAX_PARAMS], char *why, size_t cap) {
  tl_define tdefs[MAX_LIST * 2];
  for (int i = 0; i < n; i++)
    tdefs[i] = (tl_define){defs[i].name, defs[i].value};
  tl_diags diags = {.arena = arena};
  tl_program *prog = tl_load_program(arena, s->text, s->len, tdefs, n, &diags);
  if (!prog) {
    snprintf(why, cap, "the program does not check with these constants (tlc check -D ... says why)");
    return false;
  }
  *progp = prog;
  tl_arg iargs[TL_MAX_PARAMS];
  memset(iargs, 0, sizeof iargs);
  for (int i = 0; i < s->o->nargs; i++) {
    int p = find_param(prog, s->o->args[i].name, "--arg", s->file);
    int64_t iv = 0;
    double fv = 0;
    if (p < 0 || prog->params[p]->kind != SYM_SCALAR || !parse_scalar(s->o->args[i].value, prog->params[p]->dtype, &iv, &fv)) {
      snprintf(why, cap, "--arg %s: not a scalar parameter's valid value", s->o->args[i].name);
      return false;
    }
    if (prog->params[p]->dtype == TL_FLOAT32)
      iargs[p].scalar.f = tl_f32_round(fv);
    else
      iargs[p].scalar.i = iv;
  }
  rng_state = seed;
  tl_error err;
  for (int p = 0; p < tl_user_params(prog); p++) {
    const tl_sym *sym = prog->params[p];
    if (sym->kind != SYM_TENSOR)
      continue;
    int64_t shape[TL_MAX_DIMS];
    if (tl_tensor_shape(prog, p, iargs, shape, &err) != TL_OK) {
      snprintf(why, cap, "tensor %s: %s (a scalar parameter needs --arg)", sym->name, err.message);
      return false;
    }
    size_t count = 1;
    for (int d = 0; d < sym->ndim; d++)
      count *= (size_t)shape[d];
    if (count > ((size_t)1 << 28)) {
      snprintf(why, cap, "tensor %s has %zu elements at the check shape; the limit is 2^28 (a smaller --check-shape)",
               sym->name, count);
      return false;
    }
    out[p] = (tl_npy){.dtype = sym->dtype, .ndim = sym->ndim, .count = count,
                      .data = malloc(count * tl_dtype_size(sym->dtype) + 1)};
    if (!out[p].data)
      die_oom();
    fill_random(out[p].data, count, sym->dtype);
    iargs[p].data = out[p].data;
    iargs[p].count = count;
  }
  if (tl_interpret(prog, iargs, NULL, &err) != TL_OK) {
    snprintf(why, cap, "the reference interpreter failed: %.200s%s%.600s", err.pointer, err.pointer[0] ? ": " : "",
             err.message);
    return false;
  }
  return true;
}

/* The tuning constants may change speed, never results: the interpreter's
 * outputs of the variant at the check shape against those of the program's
 * own constants, on the same inputs. */
static bool tune_check_interp(const tstate *s, tcand *t, const tl_npy *base, uint64_t seed) {
  tl_arena *arena = tl_arena_new();
  tl_npy got[TL_MAX_PARAMS];
  memset(got, 0, sizeof got);
  const tl_program *prog = NULL;
  bool ok = tune_interpret(s, t->cdefs, t->ncdefs, seed, arena, &prog, got, t->why, sizeof t->why);
  for (int p = 0; ok && p < tl_user_params(prog); p++)
    if (prog->params[p]->kind == SYM_TENSOR &&
        (got[p].count != base[p].count ||
         !compare_tensor(prog->params[p]->name, prog->params[p]->dtype, got[p].data, base[p].data, base[p].data,
                         got[p].count, verbose ? stderr : NULL))) {
      snprintf(t->why, sizeof t->why, "wrong: tensor %s differs from the program's own constants' in the interpreter",
               prog->params[p]->name);
      ok = false;
    }
  for (int p = 0; p < TL_MAX_PARAMS; p++)
    tl_npy_free(&got[p]);
  tl_arena_free(arena);
  return ok;
}

/* The GPU's results against the interpreter's at the check shape: `tlclient
 * run --check` in a child process (the one launch path, the one check). */
static bool tune_check_gpu(const tstate *s, tcand *t, uint64_t seed) {
  const cmdline *o = s->o;
  const char *argv[16 + 4 * MAX_LIST];
  char dev[16], sd[32], defs[MAX_LIST * 2][TL_MAX_NAME + 64], args[MAX_LIST][TL_MAX_NAME + 64];
  int n = 0;
  argv[n++] = "tlclient";
  if (o->server)
    argv[n++] = "--server", argv[n++] = o->server;
  if (o->token)
    argv[n++] = "--token", argv[n++] = o->token;
  if (o->cacert)
    argv[n++] = "--cacert", argv[n++] = o->cacert;
  if (o->cache)
    argv[n++] = "--cache", argv[n++] = o->cache;
  snprintf(dev, sizeof dev, "%d", o->device);
  snprintf(sd, sizeof sd, "%llu", (unsigned long long)seed);
  argv[n++] = "run", argv[n++] = s->file, argv[n++] = "--check", argv[n++] = "--device", argv[n++] = dev;
  argv[n++] = "--seed", argv[n++] = sd;
  for (int i = 0; i < t->ncdefs; i++) {
    snprintf(defs[i], sizeof defs[i], "-D%s=%s", t->cdefs[i].name, t->cdefs[i].value);
    argv[n++] = defs[i];
  }
  for (int i = 0; i < o->nargs; i++) {
    snprintf(args[i], sizeof args[i], "%s=%s", o->args[i].name, o->args[i].value);
    argv[n++] = "--arg", argv[n++] = args[i];
  }
  argv[n] = NULL;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (!verbose) { /* its report is the exit status; -v shows the run's own output */
      FILE *out = freopen("/dev/null", "w", stdout), *err = freopen("/dev/null", "w", stderr);
      (void)out;
      (void)err;
    }
    execv("/proc/self/exe", (char *const *)argv);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    snprintf(t->why, sizeof t->why, "wrong or failed on the GPU against the interpreter (tlclient run %s --check "
             "--seed %s with its constants says how)", s->file, sd);
    return false;
  }
  return true;
}

/* The time of one launch of the variant's build on the device, through the
 * one launch path: 3 untimed launches, then o->repeat (or 20) timed ones,
 * the device synchronized before and after; the mean. */
static bool tune_time_gpu(tstate *s, tl_client *c, tcand *t) {
  tl_device *dev = (tl_device *)s->dev;
  tl_client_request req = {.program = s->text, .program_len = s->len, .name = s->file, .defines = t->defs,
                           .ndefines = t->ndefs};
  tl_artifact *a = NULL;
  tl_kernel *k = NULL;
  tl_error err;
  tl_kernel_arg kargs[TL_KERNEL_PARAMS_MAX];
  uint64_t ptr[TL_KERNEL_PARAMS_MAX] = {0};
  bool ok = tl_client_get_for_device(c, &req, dev, &a, &err) == TL_OK && tl_kernel_load(dev, a, &k, &err) == TL_OK;
  int np = ok ? tl_artifact_nparams(a) : 0;
  for (int p = 0; ok && p < np; p++) { /* scalars first: the shapes depend on them */
    tl_param_info pi;
    tl_artifact_param(a, p, &pi, NULL);
    kargs[p] = tl_arg_int(0);
    for (int i = 0; !pi.is_tensor && i < s->o->nargs; i++)
      if (strcmp(s->o->args[i].name, pi.name) == 0)
        kargs[p] = strcmp(pi.dtype, "float32") == 0 ? tl_arg_float(strtod(s->o->args[i].value, NULL))
                                                     : tl_arg_int(strtoll(s->o->args[i].value, NULL, 0));
  }
  for (int p = 0; ok && p < np; p++) {
    tl_param_info pi;
    tl_artifact_param(a, p, &pi, NULL);
    if (!pi.is_tensor)
      continue;
    int64_t shape[TL_KERNEL_DIMS_MAX];
    int nd = 0;
    ok = tl_artifact_shape(a, p, kargs, np, shape, &nd, &err) == TL_OK;
    size_t count = 1;
    for (int d = 0; ok && d < nd; d++)
      count *= (size_t)shape[d];
    tl_dtype dt;
    ok = ok && tl_dtype_parse(pi.dtype, &dt);
    if (!ok)
      break;
    size_t hb = count * tl_dtype_size(dt), db = (size_t)tl_dtype_bytes(dt, count);
    void *host = malloc(hb + 1), *packed = malloc(db + 1);
    if (!host || !packed)
      die_oom();
    fill_random(host, count, dt);
    tl_pack(dt, host, count, packed);
    ok = tl_device_alloc(dev, db, &ptr[p], &err) == TL_OK && tl_device_upload(dev, ptr[p], packed, db, &err) == TL_OK;
    free(host);
    free(packed);
    kargs[p] = tl_arg_tensor(ptr[p]);
  }
  int reps = s->o->repeat ? s->o->repeat : TUNE_REPEAT_DEFAULT;
  for (int i = 0; ok && i < 3; i++)
    ok = tl_kernel_launch(k, kargs, np, NULL, &err) == TL_OK;
  ok = ok && tl_device_sync(dev, &err) == TL_OK;
  double t0 = now_s();
  for (int i = 0; ok && i < reps; i++)
    ok = tl_kernel_launch(k, kargs, np, NULL, &err) == TL_OK;
  ok = ok && tl_device_sync(dev, &err) == TL_OK;
  t->ms = (now_s() - t0) * 1000 / reps;
  if (!ok) {
    t->status = err.code ? err.code : TL_DEVICE;
    snprintf(t->why, sizeof t->why, "timing: %s", err.message);
  }
  for (int p = 0; p < TL_KERNEL_PARAMS_MAX; p++)
    if (ptr[p])
      tl_device_mem_free(dev, ptr[p]);
  tl_kernel_free(k);
  tl_artifact_free(a);
  return ok;
}

/* The fake timer of tests (TL_TUNE_FAKE_TIMES: a JSON object of label -> ms). */
static bool tune_time_fake(json_t *times, tcand *t) {
  json_t *v = json_object_get(times, t->label);
  if (!json_is_number(v)) {
    t->status = TL_NOT_FOUND;
    snprintf(t->why, sizeof t->why, "TL_TUNE_FAKE_TIMES has no time for %s", t->label);
    return false;
  }
  t->ms = json_number_value(v);
  return true;
}

static int cmd_tune(const cmdline *o, tl_client *c) {
  if (o->npos != 1)
    return usage_error("'tune' takes one PROGRAM.json");
  if (!o->nspaces)
    return usage_error("'tune' needs --space NAME=V1,V2,... (the constants to tune)");
  const char *fake = getenv("TL_TUNE_FAKE_TIMES");
  if (fake && *fake && o->ntargets != 1)
    return usage_error("with TL_TUNE_FAKE_TIMES (no GPU), 'tune' needs --target T");
  if ((!fake || !*fake) && o->ntargets)
    return usage_error("'tune' builds for the GPU it times; --target goes only with TL_TUNE_FAKE_TIMES");
  const char *file = o->pos[0];
  /* the space: its axes and their cross product */
  cmdline axes_o = *o;
  memcpy(axes_o.defs, o->spaces, sizeof o->spaces[0] * (size_t)o->nspaces);
  axes_o.ndefs = o->nspaces;
  paxis axes[MAX_LIST] = {{0}};
  int rc = make_axes(&axes_o, axes);
  int64_t count = 1;
  for (int i = 0; !rc && i < o->nspaces; i++)
    if ((count *= axes[i].nvalues) > TUNE_VARIANTS_MAX)
      rc = usage_error("the space has more than %d variants", TUNE_VARIANTS_MAX);
  for (int i = 0; !rc && i < o->nspaces; i++)
    for (int j = 0; j < o->nshapes + o->nchecks; j++)
      if (strcmp(axes[i].name, j < o->nshapes ? o->shapes[j].name : o->checks[j - o->nshapes].name) == 0)
        rc = usage_error("%s is both tuned (--space) and a shape constant", axes[i].name);
  size_t len = 0;
  char *text = rc ? NULL : read_file(file, &len, TL_CLIENT_PROGRAM_MAX);
  if (!rc && !text)
    rc = 1;
  tl_device *dev = NULL;
  json_t *times = NULL;
  tl_error err;
  char desc[512];
  if (!rc && fake && *fake) {
    json_error_t je;
    times = json_load_file(fake, 0, &je);
    if (!json_is_object(times)) { /* (a macro: its argument is evaluated twice) */
      fprintf(stderr, "tlclient: tune: TL_TUNE_FAKE_TIMES %s is not a JSON object: %s\n", fake, je.text);
      rc = 2;
    }
    snprintf(desc, sizeof desc, "fake timer (%s)", o->targets[0]);
  } else if (!rc) {
    if (tl_device_open(o->device, &dev, &err) != TL_OK) {
      fprintf(stderr, "tlclient: tune %s: %s\n", file, err.message);
      rc = 1;
    } else
      tl_device_description(dev, desc, sizeof desc);
  }
  tcand *cands = rc ? NULL : calloc((size_t)count, sizeof *cands);
  if (!rc && !cands)
    die_oom();
  for (int64_t v = 0; !rc && v < count; v++) {
    tcand *t = &cands[v];
    for (int i = 0; i < o->nshapes; i++)
      t->defs[t->ndefs++] = (tl_client_define){o->shapes[i].name, o->shapes[i].value};
    t->nshape = t->ndefs;
    const kv *cs = o->nchecks ? o->checks : o->shapes;
    for (int i = 0; i < (o->nchecks ? o->nchecks : o->nshapes); i++)
      t->cdefs[t->ncdefs++] = (tl_client_define){cs[i].name, cs[i].value};
    int64_t rest = v;
    size_t ln = 0;
    char part[MAX_LIST][TL_MAX_NAME + 64];
    for (int k = o->nspaces - 1; k >= 0; k--) { /* the last axis varies fastest */
      const char *val = axes[k].values[rest % axes[k].nvalues];
      rest /= axes[k].nvalues;
      snprintf(part[k], sizeof part[k], "%s=%s", axes[k].name, val);
      t->defs[t->nshape + k] = (tl_client_define){axes[k].name, val};
      t->cdefs[t->ncdefs + k] = (tl_client_define){axes[k].name, val};
    }
    t->ndefs += o->nspaces;
    t->ncdefs += o->nspaces;
    for (int k = 0; k < o->nspaces; k++)
      ln += (size_t)snprintf(t->label + ln, sizeof t->label - ln, "%s%s", k ? "," : "", part[k]);
  }
  if (rc)
    goto out;
  /* 1. compile every variant through the server, in parallel (cached there and here) */
  tstate s = {.o = o, .proto = c, .dev = dev, .text = text, .file = file, .len = len, .cands = cands, .n = (int)count};
  pthread_mutex_init(&s.mu, NULL);
  int nth = o->jobs ? o->jobs : 4;
  pthread_t th[MAX_JOBS];
  int started = 0;
  double t0 = now_s();
  for (int i = 0; i < nth && i < s.n; i++)
    if (pthread_create(&th[i], NULL, tune_worker, &s) == 0)
      started++;
  if (!started)
    tune_worker(&s);
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  pthread_mutex_destroy(&s.mu);
  fprintf(stderr, "tune: %s: %d variants compiled or found in %.1f s on %s\n", file, s.n, now_s() - t0,
          tl_client_server(c));
  /* 2. check each against the interpreter at the check shape, 3. time it */
  uint64_t seed = o->seed_given ? o->seed : ((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20)) % 1000000007ULL;
  seed = seed ? seed : 1;
  tl_arena *arena = tl_arena_new();
  tl_npy base[TL_MAX_PARAMS];
  memset(base, 0, sizeof base);
  const tl_program *bprog = NULL;
  char bwhy[TL_ERROR_MESSAGE_MAX + 64] = "";
  bool based = tune_interpret(&s, cands[0].cdefs, cands[0].ncdefs - o->nspaces, seed, arena, &bprog, base, bwhy,
                              sizeof bwhy);
  if (!based) {
    fprintf(stderr, "tlclient: tune %s: the program's own constants at the check shape: %s\n", file, bwhy);
    rc = 1;
  }
  int best = -1;
  for (int i = 0; based && i < s.n; i++) {
    tcand *t = &cands[i];
    if (t->status == TL_OK && !tune_check_interp(&s, t, base, seed))
      t->status = TL_RUNTIME;
    if (t->status == TL_OK && dev && !tune_check_gpu(&s, t, seed))
      t->status = TL_RUNTIME;
    if (t->status == TL_OK && !(dev ? tune_time_gpu(&s, c, t) : tune_time_fake(times, t)))
      t->status = t->status ? t->status : TL_DEVICE;
    if (t->status == TL_OK && (best < 0 || t->ms < cands[best].ms))
      best = i;
    if (t->status == TL_OK)
      printf("  %-40s %10.4f ms\n", t->label, t->ms);
    else
      printf("  %-40s %10s    %s\n", t->label, "-", t->why);
    fflush(stdout);
  }
  for (int p = 0; p < TL_MAX_PARAMS; p++)
    tl_npy_free(&base[p]);
  tl_arena_free(arena);
  /* 4. record the winner on the server */
  if (based && best < 0) {
    fprintf(stderr, "tlclient: tune %s: no variant compiled, passed its check and ran\n", file);
    rc = 1;
  } else if (based) {
    const tcand *w = &cands[best];
    json_t *cj = json_array();
    for (int i = 0; i < s.n; i++)
      json_array_append_new(cj, json_pack("{s:s, s:s, s:o}", "variant", cands[i].label, "status",
                                          cands[i].status == TL_OK ? "ok" : tl_status_name(cands[i].status), "ms",
                                          cands[i].status == TL_OK ? json_real(cands[i].ms) : json_null()));
    char *cjs = json_dumps(cj, JSON_COMPACT);
    json_decref(cj);
    if (cjs && strlen(cjs) > 2048) { /* the record's room (4 KiB) is for the winner first */
      free(cjs);
      cjs = NULL;
    }
    tl_client_request req = {.program = text, .program_len = len, .name = file, .defines = w->defs,
                             .ndefines = w->nshape};
    char key[65];
    if (tl_client_tuning_record(c, &req, desc, w->defs + w->nshape, o->nspaces, w->ms, cjs, &err) != TL_OK ||
        tl_client_tuning_key(&req, desc, key, NULL, &err) != TL_OK) {
      fprintf(stderr, "tlclient: tune %s: recording the winner: %s\n", file, err.message);
      rc = 1;
    } else
      printf("winner: %s (%.4f ms, build %s) on %s; recorded on %s as tuning %s\n", w->label, w->ms, w->key, desc,
             tl_client_server(c), key);
    free(cjs);
  }
out:
  for (int i = 0; i < o->nspaces; i++)
    free(axes[i].values_copy);
  free(cands);
  json_decref(times);
  tl_device_free(dev);
  free(text);
  return rc;
}

/* ---- cache ---------------------------------------------------------------------------------------------- */

static int print_entry(const tl_cache_build *b, void *user) {
  (void)user;
  const char *kind = strncmp(b->manifest, "tl-client-request 1\n", 20) == 0 ? "request" : "build";
  json_t *m = json_loads(b->metadata, 0, NULL);
  const char *entry = json_string_value(json_object_get(m, "entry"));
  char when[32] = "?";
  time_t t = (time_t)(b->last_access_ms / 1000);
  struct tm tm;
  if (localtime_r(&t, &tm))
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  printf("%s  %-12s %10lld  %s  %-7s  %s\n", b->key, b->target, (long long)b->size, when, kind, entry ? entry : "?");
  json_decref(m);
  return 0;
}

static int cmd_cache(const cmdline *o, tl_client *c) {
  if (o->npos != 1 || (strcmp(o->pos[0], "ls") && strcmp(o->pos[0], "verify") && strcmp(o->pos[0], "gc")))
    return usage_error("'cache' takes one of ls, verify and gc");
  const char *sub = o->pos[0];
  if (o->max_bytes && strcmp(sub, "gc") != 0)
    return usage_error("--max-bytes goes with 'cache gc'");
  int64_t cap = tl_client_cache_max_bytes(c);
  if (o->max_bytes && (cap = parse_size(o->max_bytes)) < 0)
    return usage_error("--max-bytes %s: a size in bytes (K, M, G suffixes)", o->max_bytes);
  const char *path = tl_client_cache_path(c);
  if (!path) {
    fprintf(stderr, "tlclient: cache %s: the local cache is off (--cache none, or no HOME)\n", sub);
    return 1;
  }
  tl_cache_options opts = {0};
  opts.max_bytes = cap;
  tl_cache *cache = NULL;
  tl_error err;
  if (tl_cache_open(path, &opts, &cache, &err) != TL_OK) {
    fprintf(stderr, "tlclient: cache %s: %s\n", sub, err.message);
    return 1;
  }
  int rc = 0;
  tl_cache_stats s;
  char size[32];
  if (strcmp(sub, "ls") == 0) {
    printf("%-64s  %-12s %10s  %-19s  %-7s  %s\n", "key", "target", "bytes", "last used", "kind", "kernel");
    if (tl_cache_list(cache, print_entry, NULL, &err) != TL_OK ||
        tl_cache_get_stats(cache, &s, &err) != TL_OK) {
      fprintf(stderr, "tlclient: cache ls: %s\n", err.message);
      rc = 1;
    } else {
      human_size(s.bytes, size, sizeof size);
      printf("# %s: %lld entries, %lld binaries, %s\n", path, (long long)s.builds, (long long)s.artifacts, size);
    }
  } else if (strcmp(sub, "verify") == 0) {
    tl_cache_verify_result v;
    if (tl_cache_verify(cache, &v, &err) != TL_OK) {
      fprintf(stderr, "tlclient: cache verify: %s\n", err.message);
      rc = 1;
    } else {
      human_size(v.bytes_checked, size, sizeof size);
      printf("cache verify: %s: %lld binaries (%s) re-hashed: %lld damaged (deleted with their entries), %lld "
             "unused, %lld entries without a binary\n",
             path, (long long)v.artifacts_checked, size, (long long)v.corrupt_artifacts,
             (long long)v.orphan_artifacts, (long long)v.dangling_builds);
      rc = v.corrupt_artifacts ? 1 : 0;
    }
  } else {
    int64_t total = 0, evicted = 0;
    if (cap == 0) { /* empty it: every entry */
      tl_cache_options none = {0};
      none.max_bytes = 1; /* any stored byte is over: evicts all */
      tl_cache_close(cache);
      cache = NULL;
      if (tl_cache_open(path, &none, &cache, &err) != TL_OK) {
        fprintf(stderr, "tlclient: cache gc: %s\n", err.message);
        return 1;
      }
    }
    do {
      evicted = 0;
      if (tl_cache_evict_step(cache, 0, &evicted, &err) != TL_OK) {
        fprintf(stderr, "tlclient: cache gc: %s\n", err.message);
        rc = 1;
        break;
      }
      total += evicted;
    } while (evicted > 0);
    if (!rc && tl_cache_get_stats(cache, &s, &err) == TL_OK) {
      human_size(s.bytes, size, sizeof size);
      char capt[32];
      human_size(cap, capt, sizeof capt);
      printf("cache gc: %s: %lld entries evicted; %lld entries, %s left (cap %s)\n", path, (long long)total,
             (long long)s.builds, size, cap ? capt : "0: emptied");
    }
  }
  tl_cache_close(cache);
  return rc;
}

/* ---- bundle --------------------------------------------------------------------------------------------- */

/* The "NAME" of a request text's program and its "constants" line, for ls. */
static void request_summary(const char *text, char *name, size_t ncap, char *consts, size_t ccap) {
  snprintf(name, ncap, "?");
  snprintf(consts, ccap, "{}");
  const char *c = strstr(text, "\nconstants ");
  if (c)
    snprintf(consts, ccap, "%.*s", (int)strcspn(c + 11, "\n"), c + 11);
  const char *p = strstr(text, "\nprogram ");
  json_t *doc = p ? json_loadb(p + 9, strcspn(p + 9, "\n"), 0, NULL) : NULL;
  const char *n = json_string_value(json_object_get(doc, "name"));
  if (n)
    snprintf(name, ncap, "%s", n);
  json_decref(doc);
}

static int bundle_ls(const cmdline *o, const char *file, const tl_bundle *b) {
  json_t *doc = o->json ? json_pack("{s:s, s:i, s:I, s:s, s:s, s:[], s:[]}", "file", file, "version", b->version,
                                    "size", (json_int_t)b->size, "checksum", b->checksum, "compiler", b->compiler,
                                    "builds", "requests")
                        : NULL;
  if (o->json && !doc)
    die_oom();
  if (!o->json) {
    char size[32];
    human_size((int64_t)b->size, size, sizeof size);
    printf("# %s: bundle format %d, %s, checksum %s\n# compiler %s: %d builds, %d requests, %d binaries\n", file,
           b->version, size, b->checksum, b->compiler[0] ? b->compiler : "(none)", b->nbuilds, b->nrequests,
           b->nartifacts);
    printf("%-7s  %-64s  %-12s %10s  %s\n", "kind", "key", "target", "bytes", "kernel / program and constants");
  }
  for (int i = 0; i < b->nbuilds; i++) {
    const tl_bundle_build *bd = &b->builds[i];
    json_t *m = json_loads(bd->metadata, 0, NULL);
    const char *entry = json_string_value(json_object_get(m, "entry"));
    size_t n = b->artifacts[bd->artifact_index].n;
    if (doc)
      json_array_append_new(json_object_get(doc, "builds"),
                            json_pack("{s:s, s:s, s:s, s:I, s:s?}", "key", bd->key, "target", bd->target, "artifact",
                                      bd->artifact, "size", (json_int_t)n, "entry", entry));
    else
      printf("%-7s  %-64s  %-12s %10zu  %s\n", "build", bd->key, bd->target, n, entry ? entry : "?");
    json_decref(m);
  }
  for (int i = 0; i < b->nrequests; i++) {
    const tl_bundle_request *r = &b->requests[i];
    const tl_bundle_build *bd = &b->builds[r->build_index];
    char name[128], consts[512];
    request_summary(r->text, name, sizeof name, consts, sizeof consts);
    if (doc)
      json_array_append_new(json_object_get(doc, "requests"),
                            json_pack("{s:s, s:s, s:s, s:s, s:s}", "key", r->key, "build", r->build, "target",
                                      bd->target, "program", name, "constants", consts));
    else
      printf("%-7s  %-64s  %-12s %10s  %s %s\n", "request", r->key, bd->target, "", name, consts);
  }
  if (doc) {
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    if (!text)
      die_oom();
    puts(text);
    free(text);
    json_decref(doc);
  }
  return 0;
}

/* bundle create FILE PATTERN...: prebuild --fetch into a fresh cache, then bundle it. */
static int bundle_prebuild(const cmdline *o, tl_client *c, const char *file) {
  const char *tmpdir = getenv("TMPDIR");
  char dirbuf[1024];
  snprintf(dirbuf, sizeof dirbuf, "%.900s/tlclient-bundle-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
  char *made = mkdtemp(dirbuf);
  if (!made) {
    fprintf(stderr, "tlclient: bundle create: cannot make a temporary directory: %s\n", strerror(errno));
    return 1;
  }
  char *dbpath = malloc(strlen(made) + 16);
  if (!dbpath)
    die_oom();
  sprintf(dbpath, "%s/cache.db", made);
  tl_error err;
  int rc = 0;
  if (tl_client_set_cache_path(c, dbpath, &err) != TL_OK) {
    fprintf(stderr, "tlclient: bundle create: %s\n", err.message);
    rc = 1;
  }
  if (!rc) {
    cmdline p = *o; /* prebuild's view: the patterns, and --fetch */
    memmove((void *)p.pos, p.pos + 2, sizeof p.pos[0] * (size_t)(p.npos - 2));
    p.npos -= 2;
    p.fetch = true;
    rc = cmd_prebuild(&p, c);
    if (rc)
      fprintf(stderr, "tlclient: bundle create: %s not written: not every build succeeded\n", file);
  }
  if (!rc) {
    tl_bundle_counts n;
    if (tl_client_bundle_create(c, file, o->compiler, &n, &err) != TL_OK) {
      fprintf(stderr, "tlclient: bundle create: %s\n", err.message);
      rc = 1;
    } else if (n.skipped) {
      fprintf(stderr, "tlclient: bundle create: %d entries of the prebuild could not be bundled (-v says why): %s "
                      "not kept\n", n.skipped, file);
      unlink(file);
      rc = 1;
    } else
      fprintf(o->json ? stderr : stdout, "bundle create: %s: %d builds, %d requests, %d binaries by %s\n", file,
              n.builds, n.requests, n.artifacts, n.compiler);
  }
  tl_client_set_cache_path(c, NULL, NULL); /* closes it */
  const char *suffix[] = {"", "-wal", "-shm"};
  for (int i = 0; i < 3; i++) {
    char f[TL_CLIENT_PATH_MAX + 8];
    snprintf(f, sizeof f, "%s%s", dbpath, suffix[i]);
    unlink(f);
  }
  rmdir(made);
  free(dbpath);
  return rc;
}

/* bundle push FILE: POST /v1/bundles, then one line per build that was not
 * stored or is not in the server's tier. */
static int bundle_push(tl_client *c, const char *file) {
  char *answer = NULL;
  tl_error err;
  tl_status st = tl_client_bundle_push(c, file, &answer, &err);
  json_t *doc = answer ? json_loads(answer, 0, NULL) : NULL;
  free(answer);
  json_t *builds = json_object_get(doc, "builds"), *bd;
  size_t i;
  int unpublished = 0;
  json_array_foreach(builds, i, bd) {
    const char *status = json_string_value(json_object_get(bd, "status"));
    const char *tier = json_string_value(json_object_get(bd, "tier"));
    const char *reason = json_string_value(json_object_get(bd, "reason"));
    const char *key = json_string_value(json_object_get(bd, "key")), *target = json_string_value(json_object_get(bd, "target"));
    if (status && strcmp(status, "refused") == 0)
      fprintf(stderr, "tlclient: bundle push: build %s for %s refused: %s\n", key ? key : "?", target ? target : "?",
              reason ? reason : "(no reason given)");
    else if (tier && strcmp(tier, "published") != 0) {
      unpublished++;
      fprintf(stderr, "tlclient: bundle push: build %s for %s is in the server's cache but not in its tier: %s\n",
              key ? key : "?", target ? target : "?",
              strcmp(tier, "too_large") == 0 ? "larger than its --tier-max-entry"
                                              : "Redis failed (the server's /readyz says why); push again when it is back");
    }
  }
  int rc = 0;
  if (st != TL_OK) {
    fprintf(stderr, "tlclient: bundle push: %s\n", err.message);
    /* the bundle itself, or a server that refused every build: 1; the server or the network: 3 */
    rc = st == TL_CORRUPT || st == TL_INVALID_ARG || st == TL_UNSUPPORTED || st == TL_IO ||
                 (st == TL_TOO_LARGE && !doc && strstr(err.message, "/v1/bundles") == NULL)
             ? 1
             : 3;
  } else {
    json_t *pub = json_object_get(doc, "tier_published");
    printf("bundle push: %s: %lld stored, %lld present, %lld refused, %lld requests", file,
           (long long)json_integer_value(json_object_get(doc, "stored")),
           (long long)json_integer_value(json_object_get(doc, "present")),
           (long long)json_integer_value(json_object_get(doc, "refused")),
           (long long)json_integer_value(json_object_get(doc, "requests")));
    if (pub)
      printf(", %lld published to the shared tier", (long long)json_integer_value(pub));
    printf(" (on %s)\n", tl_client_server(c));
    rc = json_integer_value(json_object_get(doc, "refused")) || unpublished ? 1 : 0;
  }
  json_decref(doc);
  return rc;
}

static int cmd_bundle(const cmdline *o, tl_client *c) {
  const char *sub = o->npos ? o->pos[0] : "";
  bool create = strcmp(sub, "create") == 0, ls = strcmp(sub, "ls") == 0;
  if (!create && !ls && strcmp(sub, "import") && strcmp(sub, "verify") && strcmp(sub, "push"))
    return usage_error("'bundle' takes one of create, import, ls, verify and push");
  if (o->npos < 2)
    return usage_error("'bundle %s' needs a FILE", sub);
  const char *file = o->pos[1];
  bool prebuild_opts = o->ntargets || o->ndefs || o->nexcludes || o->jobs;
  if (!create && (o->npos > 2 || prebuild_opts || o->from_cache || o->compiler))
    return usage_error("'bundle %s' takes one FILE and no other option%s", sub, ls ? " than --json" : "");
  if (o->json && !create && !ls)
    return usage_error("'bundle %s' does not take --json", sub);
  tl_error err;
  if (create) {
    if (o->from_cache && (o->npos > 2 || prebuild_opts))
      return usage_error("'bundle create --from-cache' takes no patterns and no prebuild options");
    if (!o->from_cache && o->npos == 2)
      return usage_error("'bundle create FILE' needs --from-cache, or patterns and --target as for prebuild");
    if (o->from_cache && o->json)
      return usage_error("'bundle create --from-cache' does not take --json");
    if (!o->from_cache)
      return bundle_prebuild(o, c, file);
    tl_bundle_counts n;
    if (tl_client_bundle_create(c, file, o->compiler, &n, &err) != TL_OK) {
      fprintf(stderr, "tlclient: bundle create: %s\n", err.message);
      return 1;
    }
    printf("bundle create: %s: %d builds, %d requests, %d binaries by %s from %s", file, n.builds, n.requests,
           n.artifacts, n.compiler, tl_client_cache_path(c));
    if (n.skipped)
      printf(" (%d entries left out: another compiler's, or without manifest or program; -v says which)", n.skipped);
    printf("\n");
    return 0;
  }
  if (strcmp(sub, "push") == 0)
    return bundle_push(c, file);
  if (strcmp(sub, "import") == 0) {
    tl_bundle_counts n;
    if (tl_client_bundle_import(c, file, &n, &err) != TL_OK) {
      fprintf(stderr, "tlclient: bundle import: %s\n", err.message);
      return 1;
    }
    printf("bundle import: %s: %d builds, %d requests, %d binaries by %s into %s\n", file, n.builds, n.requests,
           n.artifacts, n.compiler[0] ? n.compiler : "(none)", tl_client_cache_path(c));
    return 0;
  }
  tl_bundle *b = NULL;
  if (tl_bundle_open(file, &b, &err) != TL_OK) {
    fprintf(stderr, "tlclient: bundle %s: %s\n", sub, err.message);
    return 1;
  }
  int rc = 0;
  if (ls)
    rc = bundle_ls(o, file, b);
  else
    printf("bundle verify: %s: sound: format %d, %llu bytes, %d builds, %d requests, %d binaries by %s, checksum %s\n",
           file, b->version, (unsigned long long)b->size, b->nbuilds, b->nrequests, b->nartifacts,
           b->compiler[0] ? b->compiler : "(none)", b->checksum);
  tl_bundle_close(b);
  return rc;
}

/* ---- main --------------------------------------------------------------------------------------------- */

static const char *help_of(const char *cmd) {
  if (!cmd)
    return usage_main;
  if (strcmp(cmd, "info") == 0)
    return usage_info;
  if (strcmp(cmd, "compile") == 0)
    return usage_compile;
  if (strcmp(cmd, "fetch") == 0)
    return usage_fetch;
  if (strcmp(cmd, "prebuild") == 0)
    return usage_prebuild;
  if (strcmp(cmd, "explain") == 0)
    return usage_explain;
  if (strcmp(cmd, "run") == 0)
    return usage_run;
  if (strcmp(cmd, "cache") == 0)
    return usage_cache;
  if (strcmp(cmd, "bundle") == 0)
    return usage_bundle;
  if (strcmp(cmd, "tune") == 0)
    return usage_tune;
  return NULL;
}

int main(int argc, char **argv) {
  static cmdline o;
  o.retries = -1;
  if (argc < 2) {
    fputs(usage_main, stderr);
    return 2;
  }
  /* "tlclient help [COMMAND]" */
  if (strcmp(argv[1], "help") == 0) {
    const char *h = help_of(argc > 2 ? argv[2] : NULL);
    if (!h)
      return usage_error("unknown command '%s'", argv[2]);
    fputs(h, stdout);
    return 0;
  }
  int rc = parse_cmdline(argc, argv, &o);
  if (rc) {
    free_cmdline(&o);
    return rc;
  }
  if (o.help) {
    const char *h = help_of(o.cmd);
    free_cmdline(&o);
    if (!h)
      return usage_error("unknown command '%s'; the commands are info, compile, fetch, prebuild, explain, run, cache, bundle and tune", o.cmd);
    fputs(h, stdout);
    return 0;
  }
  if (!o.cmd) {
    free_cmdline(&o);
    return usage_error("no command given");
  }
  if (!help_of(o.cmd)) {
    free_cmdline(&o);
    return usage_error("unknown command '%s'; the commands are info, compile, fetch, prebuild, explain, run, cache, bundle and tune", o.cmd);
  }
  if ((rc = check_options(&o)) != 0) {
    free_cmdline(&o);
    return rc;
  }
  tl_client *c = make_client(&o);
  if (!c) {
    free_cmdline(&o);
    return 2;
  }
  if (strcmp(o.cmd, "info") == 0)
    rc = cmd_info(&o, c);
  else if (strcmp(o.cmd, "compile") == 0)
    rc = cmd_compile(&o, c);
  else if (strcmp(o.cmd, "fetch") == 0)
    rc = cmd_fetch(&o, c);
  else if (strcmp(o.cmd, "prebuild") == 0)
    rc = cmd_prebuild(&o, c);
  else if (strcmp(o.cmd, "explain") == 0)
    rc = cmd_explain(&o, c);
  else if (strcmp(o.cmd, "run") == 0)
    rc = cmd_run(&o, c);
  else if (strcmp(o.cmd, "bundle") == 0)
    rc = cmd_bundle(&o, c);
  else if (strcmp(o.cmd, "tune") == 0)
    rc = cmd_tune(&o, c);
  else
    rc = cmd_cache(&o, c);
  tl_client_free(c);
  free_cmdline(&o);
  return rc;
}
