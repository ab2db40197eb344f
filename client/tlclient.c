/*
 * tlclient.c - the command of libtlclient (DESIGN.md section 6): talks to a
 * tlserverd and keeps the per-user local cache.
 *
 *   tlclient [GLOBAL OPTIONS] COMMAND [OPTIONS]
 *     info                     the server, the local cache and the GPU
 *     compile PROGRAM.json     compile for one or more targets (-o DIR writes the binaries)
 *     fetch KEY|ID             a build's binary by build key, or an artifact's bytes by id
 *     prebuild DIR|FILES...    every program x every target, in parallel (CI farms)
 *     run PROGRAM.json         launch on the local GPU, optionally checked against the
 *                              reference interpreter
 *     cache ls|verify|gc       the local cache
 *
 * Everything that can fail prints one message naming the program, the
 * target and the server where they matter, on standard error, after
 * "tlclient: ".  Exit status: 0 success, 1 something failed, 2 the command
 * line is wrong.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "../cache/tlcache.h"
#include "../compiler/interp.h"
#include "../compiler/ir.h"
#include "../compiler/npy.h"
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
    "  prebuild DIR|FILES...      compile every program for every target, in parallel\n"
    "  run PROGRAM.json           launch on the local GPU (--check: against the interpreter)\n"
    "  cache ls|verify|gc         list, re-hash or shrink the local cache\n"
    "\n"
    "Global options (anywhere on the line):\n"
    "  --server URL[,URL]...      the server, or replicas of one cluster to fail over\n"
    "                             between (env TL_SERVER; default http://127.0.0.1:8470)\n"
    "  --token TOKEN              bearer token (env TL_TOKEN)\n"
    "  --cacert FILE              PEM certificate authorities for https:// servers\n"
    "  --cache PATH|none          the local cache file (env TL_CLIENT_CACHE; default\n"
    "                             $XDG_CACHE_HOME/tlclient/cache.db or ~/.cache/tlclient/cache.db)\n"
    "  --offline                  never contact the server: the local cache only\n"
    "  --timeout SEC              per request: its compile, its retries and the waits\n"
    "                             between them (Retry-After included) (default 300)\n"
    "  --connect-timeout SEC      to connect (default 5)\n"
    "  --retries N                after connection errors and 503/429 answers (default 4)\n"
    "  -v, --verbose              say what the client does (retries, cache repairs)\n"
    "  --version, --help\n"
    "\n"
    "Exit status: 0 success, 1 a failure, 2 a wrong command line.\n";

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
    "usage: tlclient prebuild DIR|FILE... --target T [--target T]... [-D NAME=VALUE]... [--jobs N] [--fetch]\n"
    "\n"
    "Compiles every program (FILE, or every *.json under DIR) for every target through\n"
    "the server, N requests at a time (default 4), so that the server's cache holds them\n"
    "all.  --target repeats or takes a comma-separated list; -D overrides a constant in\n"
    "every program (each must have it).  On a terminal a progress bar\n"
    "shows; otherwise one line per build.  Ends with a summary of hits (already in the\n"
    "server's cache), compiles and failures; exit 1 if any failed.  --fetch also downloads\n"
    "every binary into the local cache, under its build key and its request, so that an\n"
    "application asking for the same program and target starts from that cache offline.\n";

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
  const char *output, *meta_out, *options_json, *max_bytes;
  char *target_lists[MAX_LIST]; /* copies of --target values, which targets[] point into */
  int nlists;
  int jobs, device;
  bool json, check, fetch, help;
  unsigned long long seed;
  bool seed_given;
} cmdline;

static void free_cmdline(cmdline *o) {
  for (int i = 0; i < o->nlists; i++)
    free(o->target_lists[i]);
  kv *lists[4] = {o->defs, o->args, o->ins, o->outs};
  int counts[4] = {o->ndefs, o->nargs, o->nins, o->nouts};
  for (int l = 0; l < 4; l++)
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
  bool compile = strcmp(c, "compile") == 0, prebuild = strcmp(c, "prebuild") == 0, run = strcmp(c, "run") == 0,
       fetch = strcmp(c, "fetch") == 0, cache = strcmp(c, "cache") == 0, info = strcmp(c, "info") == 0;
  if (o->ntargets && !compile && !prebuild && !run)
    return usage_error("'%s' does not take --target", c);
  if (o->ntargets > 1 && run)
    return usage_error("'run' takes one --target (by default the one for the GPU found)");
  if (o->ndefs && !compile && !run && !prebuild)
    return usage_error("'%s' does not take -D", c);
  if ((o->nargs || o->nins || o->nouts || o->check || o->seed_given || o->device) && !run)
    return usage_error("'%s' does not take --arg, --in, --out, --check, --seed or --device", c);
  if (o->output && !compile && !fetch)
    return usage_error("'%s' does not take -o", c);
  if (o->meta_out && !fetch)
    return usage_error("'%s' does not take --meta", c);
  if (o->options_json && !compile)
    return usage_error("'%s' does not take --options", c);
  if (o->max_bytes && !cache)
    return usage_error("'%s' does not take --max-bytes", c);
  if ((o->jobs || o->fetch) && !prebuild)
    return usage_error("'%s' does not take --jobs or --fetch", c);
  if (o->json && !info)
    return usage_error("'%s' does not take --json", c);
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

typedef struct pjob {
  int file;          /* index into files */
  const char *target;
  tl_status status;
  int cached;
  bool done;
  char *message;
} pjob;

typedef struct pstate {
  const cmdline *o;
  const tl_client *proto;
  char **files;
  char **texts;
  size_t *lens;
  int nfiles;
  pjob *jobs;
  int njobs, next, ndone, nhits, ncompiled, nfailed;
  bool tty;
  double start;
  char last[512]; /* the build that finished last, for the bar */
  pthread_mutex_t mu;
  pthread_cond_t cv;
} pstate;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Appends the *.json files under path (a file itself, or a directory walked
 * recursively, hidden entries skipped) to the list. */
static int collect(const char *path, char ***files, int *n, int *cap, int depth) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    fprintf(stderr, "tlclient: prebuild: cannot read '%s': %s\n", path, strerror(errno));
    return 1;
  }
  if (!S_ISDIR(sb.st_mode)) {
    if (*n == MAX_FILES) {
      fprintf(stderr, "tlclient: prebuild: more than %d programs\n", MAX_FILES);
      return 1;
    }
    if (*n == *cap) {
      *cap = *cap ? *cap * 2 : 64;
      char **nf = realloc(*files, sizeof **files * (size_t)*cap);
      if (!nf)
        die_oom();
      *files = nf;
    }
    if (!((*files)[(*n)++] = strdup(path)))
      die_oom();
    return 0;
  }
  if (depth > 32) {
    fprintf(stderr, "tlclient: prebuild: '%s' is nested too deep\n", path);
    return 1;
  }
  DIR *d = opendir(path);
  if (!d) {
    fprintf(stderr, "tlclient: prebuild: cannot read directory '%s': %s\n", path, strerror(errno));
    return 1;
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
      rc = collect(names[i], files, n, cap, depth + 1);
    free(names[i]);
  }
  free(names);
  return rc;
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

static void *prebuild_worker(void *arg) {
  pstate *s = arg;
  tl_client *c = NULL;
  tl_error err;
  if (tl_client_dup(s->proto, &c, &err) != TL_OK)
    c = NULL;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    int j = s->next < s->njobs ? s->next++ : -1;
    pthread_mutex_unlock(&s->mu);
    if (j < 0)
      break;
    pjob *job = &s->jobs[j];
    const char *file = s->files[job->file];
    double t0 = now_s();
    tl_status st;
    int cached = 0;
    char msg[TL_ERROR_MESSAGE_MAX + 64] = "";
    if (!c) {
      st = TL_NOMEM;
      snprintf(msg, sizeof msg, "%s", err.message);
    } else if (!s->texts[job->file]) {
      st = TL_IO;
      snprintf(msg, sizeof msg, "cannot read %s", file);
    } else {
      tl_client_define defs[MAX_LIST];
      fill_defines(s->o, defs);
      tl_client_request req = {.program = s->texts[job->file], .program_len = s->lens[job->file], .name = file,
                               .defines = defs, .ndefines = s->o->ndefs};
      tl_target_result *res = NULL;
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
            snprintf(msg, sizeof msg, "%s (%s, %s)", err.message, file, job->target);
          tl_artifact_free(a);
        }
      }
      tl_target_results_free(res, 1);
    }
    double ms = (now_s() - t0) * 1000;
    pthread_mutex_lock(&s->mu);
    job->status = st;
    job->cached = cached;
    job->done = true;
    s->ndone++;
    if (st != TL_OK)
      s->nfailed++;
    else if (cached)
      s->nhits++;
    else
      s->ncompiled++;
    snprintf(s->last, sizeof s->last, "%s %s", base_name(file), job->target);
    if (s->tty) {
      if (st != TL_OK)
        fprintf(stderr, "\r\033[KFAIL %s\n", msg);
      draw_bar(s);
    } else {
      if (st == TL_OK)
        printf("ok    %-8s %-12s %s  (%.0f ms)\n", cached ? "hit" : "compiled", job->target, file, ms);
      else
        printf("FAIL  %-8s %-12s %s  %s\n", "", job->target, file, msg);
      fflush(stdout);
    }
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
  tl_client_free(c);
  return NULL;
}

static int cmd_prebuild(const cmdline *o, tl_client *c) {
  if (!o->npos)
    return usage_error("'prebuild' needs a directory or program files");
  if (!o->ntargets)
    return usage_error("'prebuild' needs --target T (repeated, or a list: sm_90,sm_80)");
  char **files = NULL;
  int nfiles = 0, cap = 0;
  for (int i = 0; i < o->npos; i++)
    if (collect(o->pos[i], &files, &nfiles, &cap, 0)) {
      for (int k = 0; k < nfiles; k++)
        free(files[k]);
      free(files);
      return 1;
    }
  if (!nfiles) {
    fprintf(stderr, "tlclient: prebuild: no *.json programs found under %s\n", o->pos[0]);
    free(files);
    return 1;
  }
  if ((int64_t)nfiles * o->ntargets > 1000000) {
    fprintf(stderr, "tlclient: prebuild: %d programs x %d targets is more than a million builds\n", nfiles,
            o->ntargets);
    for (int k = 0; k < nfiles; k++)
      free(files[k]);
    free(files);
    return 1;
  }
  pstate s = {.o = o, .proto = c, .files = files, .nfiles = nfiles, .tty = isatty(2) != 0, .start = now_s()};
  s.texts = calloc((size_t)nfiles, sizeof *s.texts);
  s.lens = calloc((size_t)nfiles, sizeof *s.lens);
  s.njobs = nfiles * o->ntargets;
  s.jobs = calloc((size_t)s.njobs, sizeof *s.jobs);
  if (!s.texts || !s.lens || !s.jobs)
    die_oom();
  for (int f = 0; f < nfiles; f++) {
    s.texts[f] = read_file(files[f], &s.lens[f], TL_CLIENT_PROGRAM_MAX);
    for (int t = 0; t < o->ntargets; t++)
      s.jobs[f * o->ntargets + t] = (pjob){.file = f, .target = o->targets[t]};
  }
  pthread_mutex_init(&s.mu, NULL);
  pthread_cond_init(&s.cv, NULL);
  int nthreads = o->jobs ? o->jobs : 4;
  if (nthreads > s.njobs)
    nthreads = s.njobs;
  pthread_t th[MAX_JOBS];
  int started = 0;
  if (s.tty) {
    pthread_mutex_lock(&s.mu);
    draw_bar(&s);
    pthread_mutex_unlock(&s.mu);
  }
  for (int i = 0; i < nthreads; i++)
    if (pthread_create(&th[i], NULL, prebuild_worker, &s) == 0)
      started++;
  if (!started) {
    fprintf(stderr, "tlclient: prebuild: cannot start a thread\n");
    return 1;
  }
  /* the bar also moves with the clock while compiles run */
  pthread_mutex_lock(&s.mu);
  while (s.ndone < s.njobs) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 250000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s.cv, &s.mu, &ts);
    if (s.tty && s.ndone < s.njobs)
      draw_bar(&s);
  }
  pthread_mutex_unlock(&s.mu);
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  if (s.tty)
    fprintf(stderr, "\r\033[K");
  printf("prebuild: %d builds (%d program%s x %d target%s) on %s: %d hits, %d compiled, %d failed in %.1f s\n",
         s.njobs, nfiles, nfiles == 1 ? "" : "s", o->ntargets, o->ntargets == 1 ? "" : "s", tl_client_server(c),
         s.nhits, s.ncompiled, s.nfailed, now_s() - s.start);
  if (s.nfailed && s.tty) /* the failures scrolled by above the bar: list them again */
    for (int j = 0; j < s.njobs; j++)
      if (s.jobs[j].status != TL_OK)
        fprintf(stderr, "failed: %s %s\n", files[s.jobs[j].file], s.jobs[j].target);
  int rc = s.nfailed ? 1 : 0;
  pthread_mutex_destroy(&s.mu);
  pthread_cond_destroy(&s.cv);
  for (int f = 0; f < nfiles; f++) {
    free(files[f]);
    free(s.texts[f]);
  }
  free(files);
  free(s.texts);
  free(s.lens);
  free(s.jobs);
  return rc;
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
                           size_t count) {
  size_t es = tl_dtype_size(dt);
  bool changed = memcmp(ref, before, count * es) != 0;
  if (!tl_dtype_is_float(dt)) {
    size_t bad = 0, first = 0;
    for (size_t k = 0; k < count; k++)
      if (memcmp((const char *)dev + k * es, (const char *)ref + k * es, es) != 0 && !bad++)
        first = k;
    if (bad)
      printf("FAIL %s (%s, %zu elements): %zu differ, the first at flat index %zu\n", name, tl_dtype_name(dt), count,
             bad, first);
    else
      printf("ok   %s (%s, %zu elements): equal%s\n", name, tl_dtype_name(dt), count, changed ? "" : " (unchanged input)");
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
  printf("%s %s (%s, %zu elements): rel err %.2e (bound %g), NaN %zu vs %zu in the interpreter's%s\n",
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
  for (int i = 0; i < prog->nparams; i++)
    if (strcmp(prog->params[i]->name, name) == 0)
      return i;
  const char *names[TL_MAX_PARAMS];
  for (int i = 0; i < prog->nparams; i++)
    names[i] = prog->params[i]->name;
  const char *hint = tl_closest(name, names, prog->nparams);
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
  for (int p = 0; p < prog->nparams; p++)
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
  for (int p = 0; p < prog->nparams; p++) {
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
  for (int p = 0; p < prog->nparams; p++) {
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
  if (tl_kernel_launch(k, kargs, prog->nparams, NULL, &err) != TL_OK || tl_device_sync(dev, &err) != TL_OK) {
    fprintf(stderr, "tlclient: run %s (%s on %s): %s\n", file, tl_artifact_target(art), tl_device_name(dev),
            err.message);
    goto out;
  }
  double t_run = now_s() - t1;
  for (int p = 0; p < prog->nparams; p++) {
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
    for (int p = 0; p < prog->nparams; p++) {
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
      for (int p = 0; p < prog->nparams; p++)
        if (prog->params[p]->kind == SYM_TENSOR &&
            !compare_tensor(prog->params[p]->name, prog->params[p]->dtype, host[p].data, ref[p].data, init[p].data,
                            host[p].count))
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
  if (strcmp(cmd, "run") == 0)
    return usage_run;
  if (strcmp(cmd, "cache") == 0)
    return usage_cache;
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
      return usage_error("unknown command '%s'; the commands are info, compile, fetch, prebuild, run and cache", o.cmd);
    fputs(h, stdout);
    return 0;
  }
  if (!o.cmd) {
    free_cmdline(&o);
    return usage_error("no command given");
  }
  if (!help_of(o.cmd)) {
    free_cmdline(&o);
    return usage_error("unknown command '%s'; the commands are info, compile, fetch, prebuild, run and cache", o.cmd);
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
  else if (strcmp(o.cmd, "run") == 0)
    rc = cmd_run(&o, c);
  else
    rc = cmd_cache(&o, c);
  tl_client_free(c);
  free_cmdline(&o);
  return rc;
}
