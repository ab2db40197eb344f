/*
 * tlc.c - the compiler's command line.
 *
 *   tlc check PROGRAM.json [-D NAME=VALUE]...
 *   tlc run PROGRAM.json --interpret [-D NAME=VALUE]... [--arg NAME=VALUE]...
 *           [--in NAME=FILE.npy]... [--out NAME=FILE.npy]...
 *
 * Exit status: 0 success, 1 the program is invalid or failed to run,
 * 2 the command line is wrong or a file cannot be read.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../client/launch.h"
#include "gpudrv.h"
#include "interp.h"
#include "ir.h"
#include "npy.h"
#include "pass.h"
#include "target.h"
#include "tlcompiler.h"

#define MAX_OPTS 256

static const char usage[] =
    "usage: tlc check PROGRAM.json [-D NAME=VALUE]...\n"
    "       tlc compile PROGRAM.json --target TARGET [-D NAME=VALUE]... [-o FILE]\n"
    "               [--emit cuda|ptx|cubin|hip|hsaco|meta|ir] [--dump STAGE] [--options JSON]\n"
    "               [--backend auto|cuda|ptx]\n"
    "       tlc run PROGRAM.json (--interpret | --device cuda[:N] [--target T]\n"
    "               [--time N [--flush-l2[=dirty|clean]]]\n"
    "               [--options JSON] [--backend auto|cuda|ptx])\n"
    "               [-D NAME=VALUE]...\n"
    "               [--arg NAME=VALUE]... [--in NAME=FILE.npy]... [--out NAME=FILE.npy]...\n"
    "       tlc targets\n"
    "       tlc --version | --help\n"
    "\n"
    "check      parse and check a tile program; print every error as\n"
    "           FILE:POINTER[:COLUMN]: error: MESSAGE (POINTER is an RFC 6901 JSON Pointer)\n"
    "compile    compile for TARGET (sm_XX, sm_XXa or compute_XX for NVIDIA, gfxNNN for AMD;\n"
    "           see 'tlc targets'); --emit cubin (default for sm_*), ptx (default for compute_*)\n"
    "           or hsaco (default for gfx*) writes the binary to -o FILE (default\n"
    "           NAME.TARGET.cubin / .ptx / .hsaco); cuda or hip and meta print the generated\n"
    "           CUDA C or HIP C (without running the toolchain) or the metadata JSON (to -o FILE\n"
    "           or standard output); ir prints the program as the code generator sees it;\n"
    "           --dump STAGE prints it after that stage of the pipeline on standard error\n"
    "           (the stages: tlc compile --help)\n"
    "run        run a program on the CPU with the reference interpreter (--interpret), or\n"
    "           compile it for the GPU found and run it there (--device cuda, cuda:N; --target T\n"
    "           builds for T instead, e.g. compute_75 to run sm_75's code paths as PTX); --time N\n"
    "           launches it N more times and prints the mean time per launch; with --flush-l2\n"
    "           each of the N is timed alone, after writing 256 MiB of device memory so that\n"
    "           it finds none of its data in the L2 cache (the cold time of a weight-streaming\n"
    "           kernel; without it, data that fits the L2 stays there between launches); the\n"
    "           L2 is then full of written lines, which the launch pays to write back:\n"
    "           --flush-l2=clean reads the 256 MiB back by a kernel after writing them, so\n"
    "           that the L2 holds only clean lines, as after another kernel that read its data\n"
    "           (dirty: the default)\n"
    "targets    list the targets the installed toolchains offer, each with its binary, warp size,\n"
    "           shared memory per block, features and toolchain, then (# not offered) the\n"
    "           known AMD targets the toolchain refuses, and why; the second line says whether\n"
    "           nvJitLink, the PTX back end's assembler, is here\n"
    "\n"
    "-D NAME=VALUE      override constant NAME (a number or true/false; it keeps its kind)\n"
    "--options JSON     compiler options, as a compile request's: {\"max_registers\": 128}, {\"debug\": true},\n"
    "                   {\"fast_compile\": \"min\"} (NVRTC's --Ofast-compile: min, mid or max),\n"
    "                   {\"split_statements\": 1024} (a kernel that long is cut into regions: pass_split.c)\n"
    "--backend B        NVIDIA targets: auto (default; or TL_BACKEND): our PTX assembled by nvJitLink\n"
    "                   when every statement is in emit_ptx.c's subset, else CUDA C through NVRTC\n"
    "                   (--emit ir and the metadata say which, and why not PTX); cuda or ptx force one\n"
    "--arg NAME=VALUE   value of scalar parameter NAME\n"
    "--in NAME=FILE     tensor NAME from a .npy file (tensors not given start as NaN, or bytes 0xA5)\n"
    "--out NAME=FILE    write tensor NAME to a .npy file after the run\n";

typedef struct {
  const char *name, *value;
} kv;

typedef struct {
  const char *cmd, *file;
  bool interpret;
  const char *device, *target, *output, *emit, *dump, *options_json, *backend;
  int time_runs; /* run --device --time N: time N launches after one warm-up */
  bool flush_l2;  /* --flush-l2: each timed launch alone, after TL_FLUSH_BYTES written (tlc.c: time_launches) */
  bool flush_clean; /* --flush-l2=clean: after TL_FLUSH_BYTES read back instead, the L2's lines left clean */
  kv defs[MAX_OPTS], args[MAX_OPTS], ins[MAX_OPTS], outs[MAX_OPTS];
  int ndefs, nargs, nins, nouts;
} options;

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "tlc: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(see tlc --help)\n");
  return 2;
}

static bool split_kv(const char *s, kv *out) {
  const char *eq = strchr(s, '=');
  if (!eq || eq == s)
    return false;
  size_t n = (size_t)(eq - s);
  char *name = malloc(n + 1);
  if (!name)
    return false;
  memcpy(name, s, n);
  name[n] = 0;
  out->name = name;
  out->value = eq + 1;
  return true;
}

static bool stage_known(const char *name) {
  for (const tl_stage_info *st = tl_compile_stages; st->name; st++)
    if (strcmp(st->name, name) == 0)
      return true;
  return false;
}

/* tlc compile --help: the command's usage and the stages --dump takes. */
static int compile_help(void) {
  printf("usage: tlc compile PROGRAM.json --target TARGET [-D NAME=VALUE]... [-o FILE]\n"
         "               [--emit cuda|ptx|cubin|hip|hsaco|meta|ir] [--dump STAGE] [--options JSON]\n"
         "               [--backend auto|cuda|ptx]\n"
         "\n"
         "--emit ir prints the program after the last stage; --dump STAGE prints it after\n"
         "STAGE on standard error.  The stages, in pipeline order (then the emitter, then\n"
         "the toolchain):\n");
  for (const tl_stage_info *st = tl_compile_stages; st->name; st++)
    printf("  %-10s %s\n", st->name, st->what);
  return 0;
}

static int parse_options(int argc, char **argv, options *o) {
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    kv *list = NULL;
    int *count = NULL;
    const char *flag = a;
    const char *val = NULL;
    if (strcmp(a, "-D") == 0 || strcmp(a, "--arg") == 0 || strcmp(a, "--in") == 0 || strcmp(a, "--out") == 0) {
      if (i + 1 >= argc)
        return usage_error("'%s' needs NAME=VALUE", a);
      val = argv[++i];
    } else if (strncmp(a, "-D", 2) == 0) {
      flag = "-D";
      val = a + 2;
    } else if (strcmp(a, "--interpret") == 0) {
      o->interpret = true;
      continue;
    } else if (strcmp(a, "--flush-l2") == 0 || strcmp(a, "--flush-l2=dirty") == 0) {
      o->flush_l2 = true;
      continue;
    } else if (strcmp(a, "--flush-l2=clean") == 0) {
      o->flush_l2 = o->flush_clean = true;
      continue;
    } else if (strcmp(a, "--time") == 0) {
      if (i + 1 >= argc || atoi(argv[i + 1]) < 1 || atoi(argv[i + 1]) > 100000)
        return usage_error("%s", "--time needs a number of launches from 1 to 100000");
      o->time_runs = atoi(argv[++i]);
      continue;
    } else if (strcmp(a, "--device") == 0 || strcmp(a, "--target") == 0 || strcmp(a, "-o") == 0 ||
               strcmp(a, "--emit") == 0 || strcmp(a, "--dump") == 0 || strcmp(a, "--options") == 0 ||
               strcmp(a, "--backend") == 0) {
      if (i + 1 >= argc)
        return usage_error("'%s' needs a value", a);
      const char **slot = strcmp(a, "--dump") == 0      ? &o->dump
                          : strcmp(a, "--backend") == 0 ? &o->backend
                          : strcmp(a, "--options") == 0 ? &o->options_json
                          : a[2] == 'd'                 ? &o->device
                          : a[2] == 't'                 ? &o->target
                          : a[1] == 'o'                 ? &o->output
                                                        : &o->emit;
      *slot = argv[++i];
      continue;
    } else if (a[0] == '-') {
      return usage_error("unknown option '%s'", a);
    } else if (!o->file) {
      o->file = a;
      continue;
    } else {
      return usage_error("unexpected argument '%s'", a);
    }
    if (strcmp(flag, "-D") == 0)
      list = o->defs, count = &o->ndefs;
    else if (strcmp(flag, "--arg") == 0)
      list = o->args, count = &o->nargs;
    else if (strcmp(flag, "--in") == 0)
      list = o->ins, count = &o->nins;
    else
      list = o->outs, count = &o->nouts;
    if (*count == MAX_OPTS)
      return usage_error("too many '%s' options", flag);
    if (!split_kv(val, &list[*count]))
      return usage_error("'%s' needs NAME=VALUE", val);
    (*count)++;
  }
  if (!o->file)
    return usage_error("%s: no program file given", o->cmd);
  bool run = strcmp(o->cmd, "run") == 0, compile = strcmp(o->cmd, "compile") == 0;
  if (o->time_runs && !o->device)
    return usage_error("%s", "--time goes with run --device");
  if (o->flush_l2 && !o->time_runs)
    return usage_error("%s", "--flush-l2 goes with --time N");
  if (o->options_json && !compile && !o->device)
    return usage_error("%s", "--options goes with compile and run --device");
  if (o->backend && !compile && !o->device)
    return usage_error("%s", "--backend goes with compile and run --device");
  if (o->backend && strcmp(o->backend, "auto") && strcmp(o->backend, "cuda") && strcmp(o->backend, "ptx"))
    return usage_error("--backend %s: the back ends are auto, cuda and ptx", o->backend);
  if (!run && (o->nargs || o->nins || o->nouts || o->interpret || o->device))
    return usage_error("'%s' does not take --arg, --in, --out, --interpret or --device", o->cmd);
  if (!compile && (o->output || o->emit || o->dump || (o->target && !o->device)))
    return usage_error("'%s' does not take -o, --emit or --dump, nor --target without --device", o->cmd);
  if (o->dump && !stage_known(o->dump)) {
    fprintf(stderr, "tlc: --dump %s: the stages are", o->dump);
    for (const tl_stage_info *st = tl_compile_stages; st->name; st++)
      fprintf(stderr, "%s %s", st == tl_compile_stages ? "" : st[1].name ? "," : " and", st->name);
    fprintf(stderr, "\n(see tlc compile --help)\n");
    return 2;
  }
  if (run && !o->interpret == !o->device)
    return usage_error("%s", "'run' needs exactly one of --interpret and --device cuda[:N]");
  if (compile && !o->target)
    return usage_error("%s", "'compile' needs --target (see 'tlc targets')");
  if (o->emit && strcmp(o->emit, "cuda") && strcmp(o->emit, "ptx") && strcmp(o->emit, "cubin") &&
      strcmp(o->emit, "hip") && strcmp(o->emit, "hsaco") && strcmp(o->emit, "meta") && strcmp(o->emit, "ir"))
    return usage_error("--emit %s: the forms are cuda, ptx, cubin, hip, hsaco, meta and ir", o->emit);
  if (o->device && strncmp(o->device, "cuda", 4) != 0)
    return usage_error("--device %s: the devices are cuda and cuda:N", o->device);
  return 0;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "tlc: cannot open '%s': %s\n", path, strerror(errno));
    return NULL;
  }
  size_t cap = 65536, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (n > TL_MAX_PROGRAM_BYTES)
      break; /* tl_parse reports the size */
    if (got == 0)
      break;
    if (n == cap) {
      char *nb = realloc(buf, cap * 2);
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
  if (f != stdin)
    fclose(f);
  if (!buf || bad) {
    fprintf(stderr, "tlc: cannot read '%s'%s\n", path, buf ? "" : ": out of memory");
    free(buf);
    return NULL;
  }
  *len = n;
  return buf;
}

static tl_define defs_of(const options *o, int i) { return (tl_define){o->defs[i].name, o->defs[i].value}; }

/* Loads and checks the program; prints diagnostics.  NULL on failure.
 * When text is not NULL, it receives the file's text (caller frees). */
static tl_program *load(const options *o, tl_arena *arena, int *status, char **text_out, size_t *len_out) {
  size_t len = 0;
  char *text = read_file(o->file, &len);
  if (!text) {
    *status = 2;
    return NULL;
  }
  tl_define defs[MAX_OPTS];
  for (int i = 0; i < o->ndefs; i++)
    defs[i] = defs_of(o, i);
  tl_diags diags = {.arena = arena};
  tl_program *prog = tl_load_program(arena, text, len, defs, o->ndefs, &diags);
  if (prog && text_out) {
    *text_out = text;
    *len_out = len;
  } else
    free(text);
  if (!prog) {
    tl_diags_print(&diags, o->file, stderr);
    *status = 1;
  }
  return prog;
}

static int find_param(const tl_program *prog, const char *name, const char *opt) {
  for (int i = 0; i < tl_user_params(prog); i++)
    if (strcmp(prog->params[i]->name, name) == 0)
      return i;
  const char *names[TL_MAX_PARAMS];
  for (int i = 0; i < tl_user_params(prog); i++)
    names[i] = prog->params[i]->name;
  const char *hint = tl_closest(name, names, tl_user_params(prog));
  fprintf(stderr, "tlc: %s %s: the kernel has no parameter '%s'%s%s%s\n", opt, name, name,
          hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
  return -1;
}

static bool parse_scalar(const char *text, tl_dtype t, tl_scalar *out) {
  char *end;
  errno = 0;
  if (t == TL_BOOL) {
    if (strcmp(text, "true") == 0 || strcmp(text, "1") == 0)
      out->i = 1;
    else if (strcmp(text, "false") == 0 || strcmp(text, "0") == 0)
      out->i = 0;
    else
      return false;
    return true;
  }
  if (t == TL_FLOAT32) {
    double d = strtod(text, &end);
    if (*text == 0 || *end || errno == ERANGE)
      return false;
    out->f = tl_f32_round(d);
    return true;
  }
  long long v = strtoll(text, &end, 0);
  if (*text == 0 || *end || errno == ERANGE)
    return false;
  if (t == TL_INT32 && (v < INT32_MIN || v > INT32_MAX))
    return false;
  out->i = v;
  return true;
}

/* Prints a compile failure: the diagnostics of an invalid program, or the
 * error. */
static void print_compile_error(const options *o, const tl_diags *d, const tl_error *err) {
  if (d->n)
    tl_diags_print(d, o->file, stderr);
  else if (err->pointer[0])
    fprintf(stderr, "%s:%s: error: %s\n", o->file, err->pointer, err->message);
  else
    fprintf(stderr, "%s: error: %s\n", o->file, err->message);
}

/* The --dump and --emit ir hook: prints the IR after the stage asked for
 * (to standard error for --dump, to the output for --emit ir). */
typedef struct {
  const options *o;
  FILE *ir_out;
} dump_ctx;

static const char *last_stage(void) {
  const tl_stage_info *st = tl_compile_stages;
  while (st[1].name)
    st++;
  return st->name;
}

static void dump_stage(void *user, const char *stage, const tl_program *prog) {
  dump_ctx *d = user;
  if (d->o->dump && strcmp(d->o->dump, stage) == 0) {
    fprintf(stderr, "# IR after %s\n", stage);
    tl_dump_program(prog, stderr);
  }
  if (d->ir_out && strcmp(stage, last_stage()) == 0)
    tl_dump_program(prog, d->ir_out);
}

static tl_status compile_with(const options *o, const char *text, size_t len, const char *target, tl_build **out,
                              tl_arena *arena) {
  tl_define defs[MAX_OPTS];
  for (int i = 0; i < o->ndefs; i++)
    defs[i] = defs_of(o, i);
  dump_ctx dc = {.o = o};
  bool ir = o->emit && strcmp(o->emit, "ir") == 0;
  /* --emit cuda prints the CUDA C, which only the CUDA back end makes */
  const char *backend = o->emit && strcmp(o->emit, "cuda") == 0 ? "cuda" : o->backend;
  if (o->backend && strcmp(o->backend, "cuda") != 0 && o->emit && strcmp(o->emit, "cuda") == 0) {
    fprintf(stderr, "tlc: --emit cuda prints what the CUDA back end makes, not --backend %s\n", o->backend);
    return TL_INVALID_ARG;
  }
  if (ir && !(dc.ir_out = o->output ? fopen(o->output, "w") : stdout)) {
    fprintf(stderr, "tlc: cannot write '%s': %s\n", o->output, strerror(errno));
    return TL_IO;
  }
  tl_compile_request req = {.program = text, .program_len = len, .defines = defs, .ndefines = o->ndefs,
                            .target = target, .options_json = o->options_json, .backend = backend, .dump = dump_stage, .dump_user = &dc,
                            /* the source and the IR need no toolchain run */
                            .source_only = o->emit && (ir || strcmp(o->emit, "cuda") == 0 || strcmp(o->emit, "hip") == 0)};
  tl_diags d = {.arena = arena};
  tl_error err;
  tl_status st = tl_compile(&req, out, &d, &err);
  if (dc.ir_out && dc.ir_out != stdout)
    fclose(dc.ir_out);
  if (st != TL_OK)
    print_compile_error(o, &d, &err);
  return st;
}

/* The metadata's warnings (proto/kernel-meta.md), as FILE:POINTER: warning: MESSAGE. */
static void print_warnings(const options *o, const tl_build *b) {
  json_t *m = b->meta ? json_loads(b->meta, 0, NULL) : NULL, *w;
  size_t i;
  json_array_foreach(json_object_get(m, "warnings"), i, w)
    fprintf(stderr, "%s:%s: warning: %s\n", o->file, json_string_value(json_object_get(w, "pointer")),
            json_string_value(json_object_get(w, "message")));
  json_decref(m);
}

/* The bytes --flush-l2 writes before each timed launch: 5 times the
 * H100's 50 MB L2 (a GPU whose last-level cache holds more, such as the
 * 256 MB Infinity Cache of an MI300, keeps part of the data: the time is
 * then not all cold). */
#define TL_FLUSH_BYTES ((size_t)256 << 20)

/* run --device --time N: N launches after the warm-up.  Without
 * --flush-l2 they run back to back between two events, and the mean is
 * printed.  With it, each launch is timed alone between two events, after
 * a write of TL_FLUSH_BYTES (tl_gpu_memset8, queued ahead of it on the
 * same stream and not timed), which evicts whatever the launch before
 * left in the L2: the mean and the least of the N are printed.  The L2
 * then holds the last of those writes, dirty lines the timed launch
 * writes back to memory as its reads evict them (on the H100, 10 us of
 * cuBLAS's 60 us float16 GEMV of 8192^2: bench/README.md).  With
 * flush_clean a kernel (flush_read_ptx, queued after the write) then
 * reads the TL_FLUSH_BYTES back, so that the launch finds the L2 full of
 * clean lines, as after a kernel that read its inputs: the cold time of
 * a kernel whose data another kernel did not just write.  (A copy to
 * the host would leave the GPU idle, and the timed launch would then
 * wait on the host's launch.) */
static const char flush_read_ptx[] =
    /* each thread reads 16 bytes at a time, a grid-stride loop over n of them, and stores to q only where
     * their XOR is a value no memset8 leaves (never): the loads cannot be dropped */
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    ".visible .entry tl_flush_read(.param .u64 p, .param .u64 n, .param .u64 q)\n"
    "{\n"
    "  .reg .pred %p<3>;\n"
    "  .reg .b32 %r<12>;\n"
    "  .reg .b64 %rd<10>;\n"
    "  ld.param.u64 %rd1, [p];\n"
    "  ld.param.u64 %rd2, [n];\n"
    "  ld.param.u64 %rd3, [q];\n"
    "  cvta.to.global.u64 %rd1, %rd1;\n"
    "  cvta.to.global.u64 %rd3, %rd3;\n"
    "  mov.u32 %r1, %ctaid.x;\n"
    "  mov.u32 %r2, %ntid.x;\n"
    "  mov.u32 %r3, %tid.x;\n"
    "  mov.u32 %r4, %nctaid.x;\n"
    "  mad.lo.s32 %r5, %r1, %r2, %r3;\n"
    "  cvt.u64.u32 %rd4, %r5;\n"
    "  mul.wide.u32 %rd5, %r4, %r2;\n"
    "  mov.b32 %r6, 0;\n"
    "  setp.ge.u64 %p1, %rd4, %rd2;\n"
    "  @%p1 bra DONE;\n"
    "LOOP:\n"
    "  shl.b64 %rd6, %rd4, 4;\n"
    "  add.s64 %rd7, %rd1, %rd6;\n"
    "  ld.global.v4.u32 {%r7, %r8, %r9, %r10}, [%rd7];\n"
    "  xor.b32 %r6, %r6, %r7;\n"
    "  xor.b32 %r6, %r6, %r8;\n"
    "  xor.b32 %r6, %r6, %r9;\n"
    "  xor.b32 %r6, %r6, %r10;\n"
    "  add.s64 %rd4, %rd4, %rd5;\n"
    "  setp.lt.u64 %p1, %rd4, %rd2;\n"
    "  @%p1 bra LOOP;\n"
    "DONE:\n"
    "  setp.ne.u32 %p2, %r6, 1;\n"
    "  @%p2 bra END;\n"
    "  st.global.u32 [%rd3], %r6;\n"
    "END:\n"
    "  ret;\n"
    "}\n";

static tl_status time_launches(const options *o, tl_gpu *h, tl_kernel *k, tl_kernel_arg *kargs, int nargs,
                               const char *target, tl_error *err) {
  tl_gpu_event *t0 = NULL, *t1 = NULL;
  tl_gpu_ptr flush = 0;
  float ms = 0, sum = 0, least = 0;
  tl_status st = TL_OK;
  tl_gpu_module *rm = NULL;
  tl_gpu_func *rf = NULL;
  if (o->flush_l2)
    st = tl_gpu_alloc(h, TL_FLUSH_BYTES, &flush, err);
  if (st == TL_OK && o->flush_clean && tl_gpu_get_api(h) != TL_GPU_CUDA)
    st = tl_error_set(err, TL_UNSUPPORTED, "--flush-l2=clean: only on CUDA devices (its read kernel is PTX)");
  if (st == TL_OK && o->flush_clean && (st = tl_gpu_load(h, flush_read_ptx, strlen(flush_read_ptx), &rm, err)) == TL_OK)
    st = tl_gpu_function(rm, "tl_flush_read", &rf, err);
  unsigned long long n16 = TL_FLUSH_BYTES / 16;
  void *rargs[] = {&flush, &n16, &flush};
  unsigned rgrid[3] = {(unsigned)tl_gpu_device_info(h)->multiprocessors * 4, 1, 1}, rblock[3] = {256, 1, 1};
  if (st == TL_OK && (st = tl_gpu_event_create(h, &t0, err)) == TL_OK)
    st = tl_gpu_event_create(h, &t1, err);
  int runs = o->flush_l2 ? o->time_runs : 1, per = o->flush_l2 ? 1 : o->time_runs;
  for (int r = 0; r < runs && st == TL_OK; r++) {
    if (o->flush_l2)
      st = tl_gpu_memset8(h, flush, (unsigned char)r, TL_FLUSH_BYTES, err);
    if (st == TL_OK && o->flush_clean)
      st = tl_gpu_launch(rf, rgrid, rblock, 0, NULL, rargs, err);
    if (st == TL_OK)
      st = tl_gpu_event_record(t0, NULL, err);
    for (int i = 0; i < per && st == TL_OK; i++)
      st = tl_kernel_launch(k, kargs, nargs, NULL, err);
    if (st == TL_OK && (st = tl_gpu_event_record(t1, NULL, err)) == TL_OK && (st = tl_gpu_sync(h, err)) == TL_OK &&
        (st = tl_gpu_event_elapsed(t0, t1, &ms, err)) == TL_OK) {
      least = r == 0 || ms < least ? ms : least;
      sum += ms;
    }
  }
  if (st == TL_OK && o->flush_l2)
    printf("time: %.4f ms per launch (mean of %d after one warm-up, each timed alone after %zu MiB written%s to "
           "flush the L2; least %.4f), %s, %s\n",
           sum / o->time_runs, o->time_runs, TL_FLUSH_BYTES >> 20, o->flush_clean ? " and read back" : "", least,
           target, tl_gpu_device_info(h)->name);
  else if (st == TL_OK)
    printf("time: %.4f ms per launch (mean of %d after one warm-up), %s, %s\n", sum / o->time_runs, o->time_runs,
           target, tl_gpu_device_info(h)->name);
  tl_gpu_event_destroy(t0);
  tl_gpu_event_destroy(t1);
  if (flush)
    tl_gpu_free(h, flush);
  tl_gpu_unload(rm);
  return st;
}

/* Compiles for the GPU, copies the tensors there, launches once through
 * libtlclient's launcher (client/launch.h: the binary's metadata gives the
 * grid, block and shared memory, as in an application), and copies every
 * tensor back into arrays[]. */
static tl_status run_device(const options *o, tl_program *prog, const char *text, size_t len, tl_arg *args,
                            tl_npy *arrays, tl_error *err) {
  int ordinal = 0;
  if (o->device[4] == ':')
    ordinal = atoi(o->device + 5);
  else if (o->device[4])
    return tl_error_set(err, TL_INVALID_ARG, "--device %s: the devices are cuda and cuda:N", o->device);
  char target[32];
  if (o->target && strlen(o->target) >= sizeof target)
    return tl_error_set(err, TL_INVALID_ARG, "--target %.40s...: no target has a name that long (see 'tlc targets')",
                        o->target);
  tl_gpu *h = NULL;
  tl_status st = tl_gpu_open(TL_GPU_CUDA, ordinal, &h, err);
  if (st != TL_OK)
    return st;
  /* the exact device: its architecture-specific target where the back end
   * uses one (wgmma on sm_90a; tl_target_for_arch decides) */
  tl_target_for_arch(tl_gpu_arch(h), target, sizeof target);
  /* --target: another target's code on this GPU, e.g. compute_75 (PTX the
   * driver compiles for the GPU) runs sm_75's portable code paths on an H100 */
  if (o->target)
    snprintf(target, sizeof target, "%s", o->target);
  tl_build *b = NULL;
  tl_kernel *k = NULL;
  tl_gpu_ptr dev[TL_MAX_PARAMS] = {0};
  tl_kernel_arg kargs[TL_MAX_PARAMS];
  if (compile_with(o, text, len, target, &b, prog->arena) != TL_OK) {
    st = tl_error_set(err, TL_TOOLCHAIN, "compiling for %s failed (above)", target);
    goto done;
  }
  print_warnings(o, b); /* a fragment too large for registers runs, hundreds of times slower: say so */
  if ((st = tl_kernel_load_image(h, target, b->binary, b->binary_size, b->meta, &k, err)) != TL_OK)
    goto done;
  for (int p = 0; p < tl_user_params(prog); p++) {
    const tl_sym *s = prog->params[p];
    if (s->kind == SYM_SCALAR) {
      kargs[p] = s->dtype == TL_FLOAT32 ? tl_arg_float(args[p].scalar.f) : tl_arg_int(args[p].scalar.i);
      continue;
    }
    /* packed types travel in their device layout (tl_pack) */
    size_t bytes = (size_t)tl_dtype_bytes(s->dtype, arrays[p].count);
    void *packed = tl_dtype_is_packed(s->dtype) ? malloc(bytes ? bytes : 1) : NULL;
    if (tl_dtype_is_packed(s->dtype) && !packed) {
      st = tl_error_set(err, TL_NOMEM, "out of memory packing tensor '%s'", s->name);
      goto done;
    }
    if (packed)
      tl_pack(s->dtype, arrays[p].data, arrays[p].count, packed);
    st = tl_gpu_alloc(h, bytes ? bytes : 1, &dev[p], err);
    if (st == TL_OK)
      st = tl_gpu_upload(h, dev[p], packed ? packed : arrays[p].data, bytes, err);
    free(packed);
    if (st != TL_OK)
      goto done;
    kargs[p] = tl_arg_tensor(dev[p]);
  }
  int64_t grid[3];
  if ((st = tl_kernel_grid(k, kargs, tl_user_params(prog), grid, err)) != TL_OK)
    goto done;
  if (prog->next || (grid[0] > 0 && grid[1] > 0 && grid[2] > 0)) { /* an empty grid runs no block (the first kernel's: the next may have one) */
    if ((st = tl_kernel_launch(k, kargs, tl_user_params(prog), NULL, err)) != TL_OK || (st = tl_gpu_sync(h, err)) != TL_OK ||
        (st = tl_kernel_check_zeroed(k, err)) != TL_OK)
      goto done;
    /* the outputs are those of the first launch; the timed ones repeat it */
    if (o->time_runs && ((st = time_launches(o, h, k, kargs, tl_user_params(prog), target, err)) != TL_OK ||
                         (st = tl_kernel_check_zeroed(k, err)) != TL_OK))
      goto done;
  }
  for (int p = 0; p < tl_user_params(prog); p++) {
    tl_dtype dt = prog->params[p]->dtype;
    size_t bytes = (size_t)tl_dtype_bytes(dt, arrays[p].count);
    if (prog->params[p]->kind != SYM_TENSOR)
      continue;
    void *packed = tl_dtype_is_packed(dt) ? malloc(bytes ? bytes : 1) : NULL;
    if (tl_dtype_is_packed(dt) && !packed) {
      st = tl_error_set(err, TL_NOMEM, "out of memory unpacking tensor '%s'", prog->params[p]->name);
      goto done;
    }
    st = tl_gpu_download(h, packed ? packed : arrays[p].data, dev[p], bytes, err);
    if (packed && st == TL_OK)
      tl_unpack(dt, packed, arrays[p].count, arrays[p].data);
    free(packed);
    if (st != TL_OK)
      goto done;
  }
  st = TL_OK;
done:
  tl_kernel_free(k);
  for (int p = 0; p < tl_user_params(prog); p++)
    tl_gpu_free(h, dev[p]);
  tl_build_free(b);
  tl_gpu_close(h);
  return st;
}

static int write_out(const char *path, const void *data, size_t n) {
  FILE *f = path ? fopen(path, "wb") : stdout;
  if (!f) {
    fprintf(stderr, "tlc: cannot write '%s': %s\n", path, strerror(errno));
    return 2;
  }
  bool ok = fwrite(data, 1, n, f) == n;
  if (path)
    ok &= fclose(f) == 0;
  if (!ok) {
    fprintf(stderr, "tlc: cannot write '%s'\n", path ? path : "standard output");
    return 2;
  }
  return 0;
}

static int cmd_compile(const options *o) {
  tl_arena *arena = tl_arena_new();
  int status = 0;
  char *text = NULL;
  size_t len = 0;
  tl_program *prog = load(o, arena, &status, &text, &len);
  if (!prog) {
    tl_arena_free(arena);
    return status;
  }
  bool amd = tl_target_is_amd_name(o->target);
  const char *emit = o->emit ? o->emit : amd ? "hsaco" : strncmp(o->target, "compute_", 8) == 0 ? "ptx" : "cubin";
  char target[64];
  snprintf(target, sizeof target, "%s", o->target);
  if (strcmp(emit, "ptx") == 0 && strncmp(target, "sm_", 3) == 0)
    snprintf(target, sizeof target, "compute_%s", o->target + 3); /* PTX of the same architecture */
  const char *wrong = NULL; /* an --emit that does not go with the target */
  if (strcmp(emit, "cubin") == 0 && strncmp(target, "sm_", 3) != 0)
    wrong = "cubin needs an sm_";
  else if ((strcmp(emit, "hsaco") == 0 || strcmp(emit, "hip") == 0) && !amd)
    wrong = strcmp(emit, "hip") == 0 ? "hip needs a gfx" : "hsaco needs a gfx";
  else if ((strcmp(emit, "ptx") == 0 || strcmp(emit, "cuda") == 0) && amd)
    wrong = strcmp(emit, "ptx") == 0 ? "ptx needs an sm_ or compute_" : "cuda needs an sm_ or compute_";
  if (wrong) {
    fprintf(stderr, "tlc: --emit %s target, not %s\n", wrong, target);
    free(text);
    tl_arena_free(arena);
    return 2;
  }
  tl_build *b = NULL;
  status = compile_with(o, text, len, target, &b, arena) == TL_OK ? 0 : 1;
  if (b) {
    if (strcmp(emit, "ir") == 0)
      status = 0; /* printed by the hook */
    else if (strcmp(emit, "cuda") == 0 || strcmp(emit, "hip") == 0)
      status = write_out(o->output, b->source, strlen(b->source));
    else if (strcmp(emit, "meta") == 0)
      status = write_out(o->output, b->meta, strlen(b->meta));
    else {
      const char *ext = amd ? "hsaco" : b->binary[0] == 0x7f ? "cubin" : "ptx";
      const char *path = o->output ? o->output : tl_arena_printf(arena, "%s.%s.%s", prog->name, target, ext);
      status = write_out(path, b->binary, b->binary_size);
      if (!status)
        fprintf(stderr, "tlc: wrote %s (%zu bytes, %s, %.0f ms)\n", path, b->binary_size, target, b->compile_ms);
    }
    print_warnings(o, b);
  }
  tl_build_free(b);
  free(text);
  tl_arena_free(arena);
  return status;
}

static int cmd_targets(void) {
  const char *desc;
  tl_error err;
  const char *const *list = tl_compiler_targets(&desc, &err);
  if (!list) {
    fprintf(stderr, "tlc: %s\n", err.message);
    return 1;
  }
  printf("# %s\n", desc);
  const char *why = NULL, *jl = tl_compiler_nvjitlink(&why);
  if (jl)
    printf("# %s: assembles the PTX back end's PTX for sm_ targets (--backend)\n", jl);
  else
    printf("# no nvJitLink: the PTX back end makes PTX (compute_ targets) only: %s\n", why);
  const char *pa = tl_compiler_ptxas(&why);
  if (pa)
    printf("# %s: assembles the PTX back end's kernels with setmaxnreg (whole program)\n", pa);
  else
    printf("# no ptxas: kernels with setmaxnreg are built by NVRTC: %s\n", why);
  printf("%-12s %-6s %4s %13s %-58s %s\n", "# target", "binary", "warp", "shared-memory", "features", "toolchain");
  for (; *list; list++) {
    const char *by = tl_compiler_target_toolchain(*list);
    tl_target t = {0};
    char features[256] = "-";
    if (tl_target_parse(*list, &t, NULL) == TL_OK && t.features)
      tl_target_features_str(&t, ",", features, sizeof features);
    printf("%-12s %-6s %4d %13lld %-58s %s\n", *list, t.binary == TL_BINARY_HSACO ? "hsaco" : t.binary == TL_BINARY_PTX ? "ptx" : "cubin",
           t.warp, (long long)t.smem_bytes, features, by ? by : "");
  }
  for (const char *const *r = tl_compiler_targets_refused(); *r; r++)
    printf("# not offered: %s: %s\n", *r, tl_compiler_target_refusal(*r));
  return 0;
}

static int cmd_run(const options *o) {
  tl_arena *arena = tl_arena_new();
  int status = 0;
  char *text = NULL;
  size_t text_len = 0;
  tl_program *prog = load(o, arena, &status, &text, &text_len);
  tl_arg args[TL_MAX_PARAMS];
  memset(args, 0, sizeof args);
  tl_npy arrays[TL_MAX_PARAMS];
  memset(arrays, 0, sizeof arrays);
  bool given[TL_MAX_PARAMS] = {0};
  tl_error err;
  tl_error_clear(&err);
  if (!prog)
    goto out;
  status = 2;
  /* scalar arguments */
  for (int i = 0; i < o->nargs; i++) {
    int p = find_param(prog, o->args[i].name, "--arg");
    if (p < 0)
      goto out;
    tl_sym *s = prog->params[p];
    if (s->kind != SYM_SCALAR) {
      fprintf(stderr, "tlc: --arg %s: '%s' is a tensor; give it with --in %s=FILE.npy\n", s->name, s->name, s->name);
      goto out;
    }
    if (!parse_scalar(o->args[i].value, s->dtype, &args[p].scalar)) {
      fprintf(stderr, "tlc: --arg %s=%s: not a valid %s\n", s->name, o->args[i].value, tl_dtype_name(s->dtype));
      goto out;
    }
    given[p] = true;
  }
  for (int p = 0; p < tl_user_params(prog); p++)
    if (prog->params[p]->kind == SYM_SCALAR && !given[p]) {
      fprintf(stderr, "tlc: scalar parameter '%s' (%s) needs a value: --arg %s=VALUE\n", prog->params[p]->name,
              tl_dtype_name(prog->params[p]->dtype), prog->params[p]->name);
      goto out;
    }
  /* tensors: from files, or poisoned */
  for (int i = 0; i < o->nins; i++) {
    int p = find_param(prog, o->ins[i].name, "--in");
    if (p < 0)
      goto out;
    tl_sym *s = prog->params[p];
    if (s->kind != SYM_TENSOR) {
      fprintf(stderr, "tlc: --in %s: '%s' is a scalar; give it with --arg %s=VALUE\n", s->name, s->name, s->name);
      goto out;
    }
    if (given[p]) {
      fprintf(stderr, "tlc: --in %s is given twice\n", s->name);
      goto out;
    }
    if (tl_npy_read(o->ins[i].value, s->dtype, &arrays[p], &err) != TL_OK) {
      fprintf(stderr, "tlc: --in %s: %s\n", s->name, err.message);
      goto out;
    }
    given[p] = true;
  }
  for (int p = 0; p < tl_user_params(prog); p++) {
    tl_sym *s = prog->params[p];
    if (s->kind != SYM_TENSOR)
      continue;
    int64_t shape[TL_MAX_DIMS];
    if (tl_tensor_shape(prog, p, args, shape, &err) != TL_OK) {
      fprintf(stderr, "tlc: tensor '%s': %s\n", s->name, err.message);
      goto out;
    }
    size_t count = 1;
    for (int d = 0; d < s->ndim; d++)
      count *= (size_t)shape[d];
    if (given[p]) {
      bool same = arrays[p].ndim == s->ndim;
      for (int d = 0; same && d < s->ndim; d++)
        same = arrays[p].shape[d] == shape[d];
      if (!same) {
        char want[256] = "", got[256] = "";
        for (int d = 0; d < s->ndim; d++)
          snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? ", " : "", (long long)shape[d]);
        for (int d = 0; d < arrays[p].ndim; d++)
          snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "", (long long)arrays[p].shape[d]);
        fprintf(stderr, "tlc: --in %s: the file has shape (%s) but the tensor is [%s]\n", s->name, got, want);
        goto out;
      }
    } else {
      size_t es = tl_dtype_size(s->dtype);
      if (count > ((size_t)1 << 34) / (es ? es : 1)) {
        fprintf(stderr, "tlc: tensor '%s' has %zu elements; the interpreter's limit is 16 GiB\n", s->name, count);
        goto out;
      }
      arrays[p].dtype = s->dtype;
      arrays[p].ndim = s->ndim;
      for (int d = 0; d < s->ndim; d++)
        arrays[p].shape[d] = shape[d];
      arrays[p].count = count;
      arrays[p].data = malloc(count * es + 1);
      if (!arrays[p].data) {
        fprintf(stderr, "tlc: out of memory for tensor '%s'\n", s->name);
        goto out;
      }
      if (tl_dtype_is_float(s->dtype) && s->dtype != TL_FLOAT4_E2M1) { /* float4_e2m1 has no NaN */
        tl_scalar nan = tl_convert((tl_scalar){.f = NAN}, TL_FLOAT64, s->dtype);
        for (size_t k = 0; k < count; k++)
          tl_store((char *)arrays[p].data + k * es, s->dtype, nan);
      } else {
        memset(arrays[p].data, 0xA5, count * es);
      }
    }
    args[p].data = arrays[p].data;
    args[p].count = count;
  }
  for (int i = 0; i < o->nouts; i++) {
    int p = find_param(prog, o->outs[i].name, "--out");
    if (p < 0)
      goto out;
    if (prog->params[p]->kind != SYM_TENSOR) {
      fprintf(stderr, "tlc: --out %s: '%s' is a scalar, not a tensor\n", o->outs[i].name, o->outs[i].name);
      goto out;
    }
  }
  tl_status st = o->interpret ? tl_interpret(prog, args, NULL, &err)
                              : run_device(o, prog, text, text_len, args, arrays, &err);
  if (st != TL_OK) {
    if (err.pointer[0] || err.column)
      fprintf(stderr, "%s:%s%s%.0d: error: %s\n", o->file, err.pointer, err.column ? ":" : "", err.column,
              err.message);
    else
      fprintf(stderr, "%s: error: %s\n", o->file, err.message);
    status = 1;
    goto out;
  }
  for (int i = 0; i < o->nouts; i++) {
    int p = find_param(prog, o->outs[i].name, "--out");
    if (tl_npy_write(o->outs[i].value, &arrays[p], &err) != TL_OK) {
      fprintf(stderr, "tlc: --out %s: %s\n", o->outs[i].name, err.message);
      goto out;
    }
  }
  status = 0;
out:
  for (int p = 0; p < TL_MAX_PARAMS; p++)
    tl_npy_free(&arrays[p]);
  free(text);
  tl_arena_free(arena);
  return status;
}

static int cmd_check(const options *o) {
  tl_arena *arena = tl_arena_new();
  int status = 0;
  load(o, arena, &status, NULL, NULL);
  tl_arena_free(arena);
  return status;
}

static void free_options(options *o) {
  kv *lists[4] = {o->defs, o->args, o->ins, o->outs};
  int counts[4] = {o->ndefs, o->nargs, o->nins, o->nouts};
  for (int l = 0; l < 4; l++)
    for (int i = 0; i < counts[l]; i++)
      free((char *)lists[l][i].name);
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    fputs(usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    /* the identity every build key and metadata carry (tlcompiler.h) */
    printf("%s (Tile IR 1)\ncompiler digest %s\n", tl_compiler_id, tl_compiler_digest);
    return 0;
  }
  if (strcmp(argv[1], "targets") == 0)
    return argc == 2 ? cmd_targets() : usage_error("%s", "'targets' takes no arguments");
  static options o;
  o.cmd = argv[1];
  if (strcmp(o.cmd, "check") != 0 && strcmp(o.cmd, "run") != 0 && strcmp(o.cmd, "compile") != 0)
    return usage_error("unknown command '%s'; the commands are check, compile, run and targets", o.cmd);
  if (strcmp(o.cmd, "compile") == 0 && argc == 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0))
    return compile_help();
  int rc = parse_options(argc, argv, &o);
  if (rc == 0)
    rc = strcmp(o.cmd, "check") == 0 ? cmd_check(&o) : strcmp(o.cmd, "compile") == 0 ? cmd_compile(&o) : cmd_run(&o);
  free_options(&o);
  return rc;
}
