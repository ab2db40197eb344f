/*
 * compile.c - libtlcompiler's entry points (tlcompiler.h): the pipeline of
 * docs/DESIGN.md section 3 for one program and one target, the build key, and
 * the metadata that lets a client launch the binary with nothing else.
 *
 * tl_compile() below reads as the pipeline, one call per stage; each call
 * is one hop from here to the file that does the work:
 *
 *   front()                the target (tl_target_parse: target.c, one table),
 *                          the options, the back end asked for and how it
 *                          goes (plan_of: NVIDIA may try emit_ptx.c, decided
 *                          from the target and options, never by lowering),
 *                          parse + check (tl_load_program: parse.c, expr.c,
 *                          check.c) and the build key (keyed, manifest_of,
 *                          here: it names the back end asked for and the
 *                          toolchains that may build; tl_compile_key_as keys
 *                          for a given compiler identity and toolchain
 *                          without opening one)
 *   tl_pass_threads        pass_threads.c: the block's threads grown where a
 *                          gemm's C would not fit in registers
 *   tl_pass_kgroup         pass_kgroup.c: several consecutive K tiles per stage
 *                          of a pipelined gemm loop whose K tiles are narrow
 *   tl_pass_place_for      pass_place.c: registers or shared memory per buffer
 *   tl_pass_pipeline_for   pass_pipeline.c: cp.async, software pipelining
 *   tl_pass_overlap        pass_overlap.c: a gemm on wgmma issued one iteration
 *                          late, overlapping the work after the next one (sm_90a)
 *   tl_pass_tma            pass_tma.c: bulk tensor copies (TMA) and their
 *                          mbarriers where the target has TMA; tensor maps
 *   tl_pass_cluster        pass_cluster.c: the thread-block cluster launched
 *                          and the bulk tensor copies multicast across it
 *   tl_pass_wspec          pass_wspec.c: a producer warpgroup that issues a
 *                          loop's bulk tensor copies (sm_90a)
 *   tl_pass_store          pass_store.c: a tile's epilogue through shared
 *                          memory and TMA stores, where a copy asks
 *   tl_check_target        check_target.c: clusters, shared memory (diagnostics)
 *   tl_pass_range          pass_range.c: value ranges; bounds guards proven
 *   tl_pass_uniform        pass_uniform.c: an affine comparison in a parallel
 *                          loop decided once per tile (a causal mask)
 *   tl_pass_barrier        pass_barrier.c: where the block barriers go
 *   tl_pass_raster         pass_raster.c: the blocks' order for use_swizzle, or
 *                          heaviest first where the work grows with bx
 *   tl_pass_split          pass_split.c: a long kernel's top level cut into
 *                          regions, each a noinline function (build_split:
 *                          NVRTC's PTX assembled by nvJitLink)
 *   after("emit")          the back end chosen, and why not PTX (--dump emit)
 *   tl_emit                emit_cuda.c: CUDA C or HIP C (its dialect table),
 *                          or, where plan_of tries it, tl_emit_ptx
 *                          (emit_ptx.c: PTX) assembled by
 *                          tl_nvjitlink_assemble (nvjitlink.c), or where it
 *                          must be assembled whole (setmaxnreg) by
 *                          tl_ptxas_assemble (ptxas.c: ptxas run as a
 *                          process), NVRTC not used; a program outside its
 *                          subset (or whose ptxas is missing or fails, or
 *                          with flash's late gemm or ping-pong turns, whose
 *                          kernel is faster from NVRTC) goes to emit_cuda.c
 *                          in mode auto, fails in mode ptx
 *   tc->compile, inspect   the toolchain of the target's vendor (toolchain.h):
 *                          tl_toolchain_nvrtc (nvrtc.c: cubin or PTX; the
 *                          binary read back by cubin.c) or tl_toolchain_amdgpu
 *                          (amdgpu.c: hiprtc or clang + ld.lld; hsaco.c); a
 *                          cubin that spills registers with a loop's tail one
 *                          iteration late (pass_pipeline.c's lag_gemm: its
 *                          register estimate cannot see the emitted code's
 *                          temporaries) is built once more, from the start,
 *                          without it (tl_program.no_wg_lag), and one that
 *                          spills with pass_wspec.c's tight register budget
 *                          for its producer warpgroup, without that
 *                          (tl_program.no_tight_wspec), and one that spills
 *                          with a producer warpgroup on its usual budget,
 *                          with a block less per SM, each thread's share of
 *                          the registers the larger (tl_program.wspec_max_blocks)
 *   metadata()             here: proto/kernel-meta.md
 *
 * After each stage, after() hands the program to the request's dump hook
 * (`tlc compile --dump STAGE`; the stages are tl_compile_stages) and, when
 * TL_VERIFY=1 or the request asks, checks it (tl_verify: verify.c).
 *
 * The toolchain is the entry of the toolchain table whose vendor is the
 * target's.  Each toolchain is opened once, when first needed.
 */
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../proto/tl_hash.h"
#include "../proto/tl_json.h"
#include "interp.h"
#include "pass.h"
#include "target.h"
#include "toolchain.h"
#include "dlutil.h"
#include "nvjitlink.h"
#include "ptxas.h"
#include "tlcompiler.h"

/* ---- the toolchains, opened once ------------------------------------------------- */
/* One entry per vendor (toolchain.h); a target's vendor picks its entry:
 * tl_toolchain_nvrtc is in nvrtc.c, tl_toolchain_amdgpu in amdgpu.c. */
static const tl_toolchain_ops *const toolchains[] = {&tl_toolchain_nvrtc, &tl_toolchain_amdgpu};
#define NTOOLCHAINS (sizeof toolchains / sizeof *toolchains)

/* An entry's handle, opened on first use (or why it could not be). */
typedef struct opened {
  bool tried;
  void *h;
  tl_error err;
  char desc[4200];
} opened;
static opened open_state[NTOOLCHAINS];
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

/* The handle of toolchain i, or NULL with *err (when err is not NULL) saying why. */
static void *toolchain_handle(size_t i, tl_error *err) {
  opened *o = &open_state[i];
  pthread_mutex_lock(&open_lock);
  if (!o->tried) {
    o->tried = true;
    if (toolchains[i]->open(&o->h, &o->err) == TL_OK)
      toolchains[i]->describe(o->h, o->desc, sizeof o->desc);
    else
      o->h = NULL;
  }
  pthread_mutex_unlock(&open_lock);
  if (!o->h && err)
    *err = o->err;
  return o->h;
}

/* The index of the entry for t's vendor. */
static size_t toolchain_of(const tl_target *t) {
  size_t i = 0;
  while (i + 1 < NTOOLCHAINS && toolchains[i]->vendor != t->vendor)
    i++;
  return i;
}

/* Every target offered, each toolchain's in the table's order, built once. */
static pthread_once_t all_once = PTHREAD_ONCE_INIT;
static const char **all_targets;
static char all_desc[4400];
static tl_error all_err;

static void all_build(void) {
  const char *const *lists[NTOOLCHAINS] = {0};
  size_t counts[NTOOLCHAINS] = {0}, total = 0;
  const char *why[NTOOLCHAINS];
  tl_status code = TL_NO_TOOLCHAIN;
  for (size_t i = 0; i < NTOOLCHAINS; i++) {
    tl_error e;
    tl_error_clear(&e);
    void *h = toolchain_handle(i, &e);
    if (h && toolchains[i]->targets(h, &lists[i], &counts[i], &e) != TL_OK)
      counts[i] = 0;
    if (h && !counts[i])
      code = e.code != TL_OK ? e.code : code;
    why[i] = h ? "no targets" : open_state[i].err.message;
    total += counts[i];
  }
  if (total == 0) {
    char msg[NTOOLCHAINS * TL_ERROR_MESSAGE_MAX] = "no toolchain offers any target";
    for (size_t i = 0; i < NTOOLCHAINS; i++)
      tl_appendf(msg, sizeof msg, "%s %s: %s", i ? ";" : ":", toolchains[i]->vendor == TL_VENDOR_AMD ? "AMD" : "NVIDIA",
                 why[i]);
    tl_error_set(&all_err, code, "%s", msg);
    return;
  }
  all_targets = calloc(total + 1, sizeof *all_targets);
  if (!all_targets) {
    tl_error_set(&all_err, TL_NOMEM, "out of memory listing the targets");
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < NTOOLCHAINS; i++) {
    for (size_t j = 0; j < counts[i]; j++)
      all_targets[n++] = lists[i][j];
    if (counts[i])
      tl_appendf(all_desc, sizeof all_desc, "%s%s", all_desc[0] ? "; " : "", open_state[i].desc);
  }
}

const char *const *tl_compiler_targets(const char **desc, tl_error *err) {
  pthread_once(&all_once, all_build);
  if (!all_targets) {
    if (err)
      *err = all_err;
    return NULL;
  }
  if (desc)
    *desc = all_desc;
  return all_targets;
}

/* The known targets a toolchain found refuses and says why, built once. */
static pthread_once_t refused_once = PTHREAD_ONCE_INIT;
static const char *refused[TL_TARGET_ROWS_MAX + 1];

static void refused_build(void) {
  size_t n = 0, rows;
  const tl_target *t = tl_target_table(&rows);
  for (size_t i = 0; i < rows; i++)
    if (tl_compiler_target_refusal(t[i].name))
      refused[n++] = t[i].name;
  refused[n] = NULL;
}

const char *const *tl_compiler_targets_refused(void) {
  pthread_once(&refused_once, refused_build);
  return refused;
}

const char *tl_compiler_target_refusal(const char *target) {
  tl_target t;
  if (tl_target_parse(target, &t, NULL) != TL_OK)
    return NULL;
  size_t i = toolchain_of(&t);
  void *h = toolchain_handle(i, NULL);
  return h ? toolchains[i]->refusal(h, target) : NULL;
}

const char *tl_compiler_target_toolchain(const char *target) {
  tl_target t;
  if (tl_target_parse(target, &t, NULL) != TL_OK)
    return NULL;
  size_t i = toolchain_of(&t);
  void *h = toolchain_handle(i, NULL);
  return h && toolchains[i]->accepts(h, target) ? open_state[i].desc : NULL;
}

/* ---- options ------------------------------------------------------------------------ */
typedef tl_toolchain_opts options; /* max_registers, debug, fast_compile */

static tl_status parse_options(const char *text, options *o, json_t **canon, tl_error *err) {
  memset(o, 0, sizeof *o);
  json_t *obj = text && *text ? json_loads(text, JSON_REJECT_DUPLICATES, NULL) : json_object();
  if (!obj || !json_is_object(obj)) {
    json_decref(obj);
    return tl_error_set(err, TL_INVALID_ARG, "options must be a JSON object");
  }
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    if (strcmp(key, "max_registers") == 0) {
      if (!json_is_integer(v) || json_integer_value(v) < 16 || json_integer_value(v) > 255) {
        json_decref(obj);
        return tl_error_set_at(err, TL_INVALID_ARG, "/options/max_registers", 0,
                               "max_registers is an integer from 16 to 255");
      }
      o->max_registers = (int)json_integer_value(v);
    } else if (strcmp(key, "debug") == 0) {
      if (!json_is_boolean(v)) {
        json_decref(obj);
        return tl_error_set_at(err, TL_INVALID_ARG, "/options/debug", 0, "debug is true or false");
      }
      o->debug = json_is_true(v);
    } else if (strcmp(key, "fast_compile") == 0) {
      /* NVRTC's --Ofast-compile: less optimization for a faster compile,
       * other (maybe slower) code; the string lives as long as *canon */
      static const char *const levels[] = {"min", "mid", "max"};
      const char *l = json_string_value(v);
      for (size_t i = 0; l && !o->fast_compile && i < sizeof levels / sizeof *levels; i++)
        if (strcmp(l, levels[i]) == 0)
          o->fast_compile = levels[i];
      if (!o->fast_compile) {
        json_decref(obj);
        return tl_error_set_at(err, TL_INVALID_ARG, "/options/fast_compile", 0,
                               "fast_compile is \"min\", \"mid\" or \"max\"");
      }
    } else if (strcmp(key, "split_statements") == 0) {
      if (!json_is_integer(v) || json_integer_value(v) < 2 || json_integer_value(v) > TL_SPLIT_MAX_STATEMENTS) {
        json_decref(obj);
        return tl_error_set_at(err, TL_INVALID_ARG, "/options/split_statements", 0,
                               "split_statements is an integer from 2 to %d", TL_SPLIT_MAX_STATEMENTS);
      }
      o->split_statements = (int)json_integer_value(v);
    } else if (strcmp(key, "backend") == 0) {
      static const char *const modes[] = {"auto", "cuda", "ptx"}; /* the string lives as long as *canon */
      const char *l = json_string_value(v);
      for (size_t i = 0; l && !o->backend && i < sizeof modes / sizeof *modes; i++)
        if (strcmp(l, modes[i]) == 0)
          o->backend = modes[i];
      if (!o->backend) {
        json_decref(obj);
        return tl_error_set_at(err, TL_INVALID_ARG, "/options/backend", 0, "backend is \"auto\", \"cuda\" or \"ptx\"");
      }
    } else {
      tl_status st = tl_error_set(err, TL_INVALID_ARG,
                                  "unknown option '%s'; the options are max_registers, debug, fast_compile, backend and "
                                  "split_statements",
                                  key); /* before the decref: key belongs to obj */
      json_decref(obj);
      return st;
    }
  }
  *canon = obj;
  return TL_OK;
}

/* ---- the build key ------------------------------------------------------------------- */
/* The key manifest: everything a build depends on, one item per line; mode
 * is the back end asked for (backend_mode), not the one chosen: the key is
 * made without lowering the program, so that a caller (tlserverd's HTTP
 * thread) never runs the passes, and the choice is a function of what the
 * manifest names (the program, target and options, the compiler, and the
 * toolchain line, which names nvJitLink where it may assemble). */
static char *manifest_of(const tl_compile_request *req, const tl_program *prog, json_t *options_canon,
                         const char *compiler, const char *desc, const char *mode) {
  json_t *doc = json_loadb(req->program, req->program_len, JSON_REJECT_DUPLICATES, NULL);
  if (!doc)
    return NULL;
  tl_json_strip_x(doc);
  json_t *consts = json_object();
  for (int i = 0; i < prog->nconsts; i++) {
    const tl_sym *c = prog->consts[i];
    json_t *v = c->type == TL_BOOL ? json_boolean(c->cval.i) : c->type == TL_TY_UREAL ? json_real(c->cval.f)
                                                                                       : json_integer(c->cval.i);
    json_object_set_new(consts, c->name, v);
  }
  char *p = tl_json_canonical(doc), *c = tl_json_canonical(consts), *o = tl_json_canonical(options_canon);
  size_t n = strlen(p) + strlen(c) + strlen(o) + strlen(req->target) + strlen(compiler) + strlen(desc) + 256;
  char *m = malloc(n);
  if (m)
    snprintf(m, n,
             "tl-build-key 1\ncompiler %s\ntoolchain %s\nbackend %s\ntarget %s\noptions %s\nconstants %s\nprogram %s\n",
             compiler, desc, mode, req->target, o, c, p);
  free(p);
  free(c);
  free(o);
  json_decref(consts);
  json_decref(doc);
  return m;
}

/* The assembler of the PTX back end, opened once, when first needed, and
 * the toolchain line of a build NVRTC or it may make (the two joined). */
static pthread_once_t jl_once = PTHREAD_ONCE_INIT;
static tl_nvjitlink *jl;
static tl_error jl_err;
static char jl_desc[600];
/* ptxas, the whole-program assembler (ptxas.h), looked for beside nvJitLink
 * when that opens; the key's line for the PTX back end names both */
static tl_ptxas *pa;
static tl_error pa_err;
static char pa_desc[PATH_MAX + 64];
static char asm_desc[sizeof jl_desc + sizeof pa_desc + 16];
static char nv_jl_desc[sizeof open_state[0].desc + sizeof asm_desc + 8];

static void jl_open(void) {
  if (tl_nvjitlink_open(&jl, &jl_err) != TL_OK)
    return;
  tl_nvjitlink_describe(jl, jl_desc, sizeof jl_desc);
  char dir[PATH_MAX];
  tl_nvjitlink_dir(jl, dir, sizeof dir);
  if (tl_ptxas_open(dir[0] ? dir : NULL, &pa, &pa_err) == TL_OK)
    tl_ptxas_describe(pa, pa_desc, sizeof pa_desc);
  snprintf(asm_desc, sizeof asm_desc, "%s; %s", jl_desc, pa ? pa_desc : "no ptxas");
}

const char *tl_compiler_ptxas(const char **why) {
  pthread_once(&jl_once, jl_open);
  if (!pa && why)
    *why = jl ? pa_err.message : "ptxas is looked for beside nvJitLink, which is not available";
  return pa ? pa_desc : NULL;
}

const char *tl_compiler_nvjitlink(const char **why) {
  pthread_once(&jl_once, jl_open);
  if (!jl && why)
    *why = jl_err.message;
  return jl ? jl_desc : NULL;
}

/* The back end asked for: the request's, else the options', else
 * TL_BACKEND, else "auto"; "cuda" (emit_cuda.c) for a target not NVIDIA's. */
static tl_status backend_mode(const tl_compile_request *req, const options *opt, const tl_target *t, const char **mode,
                              tl_error *err) {
  const char *m = req->backend ? req->backend : opt->backend ? opt->backend : getenv("TL_BACKEND");
  if (!m || !*m)
    m = "auto";
  if (strcmp(m, "auto") && strcmp(m, "cuda") && strcmp(m, "ptx"))
    return tl_error_set(err, TL_INVALID_ARG, "backend '%.32s': the back ends are auto, cuda and ptx", m);
  *mode = t->vendor == TL_VENDOR_NVIDIA ? m : "cuda";
  return TL_OK;
}

/* How a build goes, decided from the target, the options and the mode
 * alone (the program not lowered): whether emit_ptx.c is tried, the
 * vendor's toolchain where it is open and offers the target, and the key's
 * toolchain line: the vendor's toolchain's description, nvJitLink's where
 * it may assemble the PTX (the two joined by "; " when either may build),
 * "tlc emit_ptx.c (PTX ISA 8.0)" for PTX that nothing assembles. */
typedef struct plan {
  const char *mode;    /* auto, cuda or ptx (backend_mode) */
  bool try_ptx;        /* tl_compile lowers, then tries emit_ptx.c */
  const char *why_not; /* an NVIDIA target not tried in PTX: why (arena or static), or NULL */
  void *th;            /* the vendor's toolchain, NULL where it is absent, refuses the target or mode is ptx */
  tl_error th_err;     /* why th is NULL */
  const char *desc;    /* the toolchain line (static) */
} plan;

static tl_status plan_of(const tl_target *t, const options *opt, const char *mode, tl_arena *arena, plan *p,
                         tl_error *err) {
  memset(p, 0, sizeof *p);
  p->mode = mode;
  size_t tc = toolchain_of(t);
  if (strcmp(mode, "ptx") == 0)
    tl_error_set(&p->th_err, TL_UNSUPPORTED, "backend ptx: NVRTC is not used");
  else if ((p->th = toolchain_handle(tc, &p->th_err)) && !toolchains[tc]->accepts(p->th, t->name)) {
    const char *why = toolchains[tc]->refusal(p->th, t->name);
    if (why)
      tl_error_set(&p->th_err, TL_UNSUPPORTED, "target '%.64s' is not offered here: %s", t->name, why);
    else
      tl_error_set(&p->th_err, TL_UNSUPPORTED, "target '%.64s' is not offered here (see the toolchain's targets: %s)",
                   t->name, open_state[tc].desc);
    p->th = NULL;
  }
  if (strcmp(mode, "cuda") != 0) {
    const char *why = NULL;
    if (!tl_ptx_target_ok(t, &why))
      ;
    else if (t->binary == TL_BINARY_CUBIN && (pthread_once(&jl_once, jl_open), !jl))
      why = tl_arena_printf(arena, "%s", jl_err.message);
    else if (opt->debug)
      why = "the PTX back end has no line information (the option debug)";
    else if (opt->fast_compile)
      why = "fast_compile is an option of NVRTC";
    else
      p->try_ptx = true;
    p->why_not = why;
    if (!p->try_ptx && strcmp(mode, "ptx") == 0)
      return tl_error_set(err, TL_UNSUPPORTED, "backend ptx for %s: %s", t->name, why);
  }
  if (!p->th && !p->try_ptx) {
    if (err)
      *err = p->th_err;
    return p->th_err.code;
  }
  bool assembles = p->try_ptx && t->binary == TL_BINARY_CUBIN;
  if (p->th && assembles) {
    pthread_mutex_lock(&open_lock);
    if (!nv_jl_desc[0])
      snprintf(nv_jl_desc, sizeof nv_jl_desc, "%s; %s", open_state[tc].desc, asm_desc);
    pthread_mutex_unlock(&open_lock);
    p->desc = nv_jl_desc;
  } else {
    p->desc = p->th ? open_state[tc].desc : assembles ? asm_desc : "tlc emit_ptx.c (PTX ISA 8.0)";
  }
  return TL_OK;
}

/* The options, the back end asked for, the program loaded with the
 * request's overrides, and the key and manifest of the build by the
 * compiler whose identity is compiler with the toolchain described by desc,
 * or where desc is NULL the toolchain here (plan_of: *p). */
static tl_status keyed(const tl_compile_request *req, const tl_target *t, const char *compiler, const char *desc,
                       tl_arena *arena, tl_program **prog, options *opt, char key[65], char **manifest, plan *p,
                       tl_diags *diags, tl_error *err) {
  json_t *ocanon = NULL;
  const char *mode = NULL;
  tl_status st = parse_options(req->options_json, opt, &ocanon, err);
  if (st == TL_OK)
    st = backend_mode(req, opt, t, &mode, err);
  if (st == TL_OK && !desc && (st = plan_of(t, opt, mode, arena, p, err)) == TL_OK)
    desc = p->desc;
  if (st != TL_OK) {
    json_decref(ocanon);
    return st;
  }
  int before = diags->n;
  *prog = tl_load_program(arena, req->program, req->program_len, req->defines, req->ndefines, diags);
  if (!*prog) {
    json_decref(ocanon);
    bool json_error = diags->n > before && !diags->items[before].pointer;
    return tl_error_set(err, json_error ? TL_BAD_JSON : TL_BAD_PROGRAM, "%s",
                        json_error ? "malformed JSON" : "the program is invalid; see the diagnostics");
  }
  if (req->max_statements > 0 && (*prog)->nstmts > req->max_statements) {
    json_decref(ocanon);
    return tl_error_set(err, TL_TOO_LARGE,
                        "the program has %d statements (nested ones included); at most %d are compiled here",
                        (*prog)->nstmts, req->max_statements);
  }
  char *m = manifest_of(req, *prog, ocanon, compiler, desc, mode);
  json_decref(ocanon);
  if (!m)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  st = tl_sha256_hex(m, strlen(m), key);
  if (st != TL_OK) {
    free(m);
    return tl_error_set(err, st, "SHA-256 failed");
  }
  *manifest = m;
  return TL_OK;
}

/* Parses, checks and keys a request, and plans its build (plan_of: *p),
 * the program not lowered.  On success *prog lives in arena and *target is
 * the target (target.h). */
static tl_status front(const tl_compile_request *req, tl_arena *arena, tl_program **prog, options *opt, char key[65],
                       char **manifest, tl_target *target, plan *p, tl_diags *diags, tl_error *err) {
  tl_error_clear(err);
  memset(p, 0, sizeof *p);
  if (!req->target)
    return tl_error_set(err, TL_UNSUPPORTED, "no target given");
  tl_status st = tl_target_parse(req->target, target, err);
  if (st != TL_OK) /* malformed or unknown: the target is not offered (tlcompiler.h) */
    return err ? (err->code = TL_UNSUPPORTED) : TL_UNSUPPORTED;
  return keyed(req, target, tl_compiler_id, NULL, arena, prog, opt, key, manifest, p, diags, err);
}

tl_status tl_compile_key(const tl_compile_request *req, char key[65], char **manifest, tl_diags *diags, tl_error *err) {
  tl_arena *arena = tl_arena_new();
  tl_program *prog;
  options opt;
  tl_target t;
  plan p;
  tl_status st = front(req, arena, &prog, &opt, key, manifest, &t, &p, diags, err);
  tl_arena_free(arena);
  return st;
}

tl_status tl_compile_key_as(const tl_compile_request *req, const char *compiler, const char *toolchain, char key[65],
                            char **manifest, tl_diags *diags, tl_error *err) {
  tl_error_clear(err);
  if (!compiler || !*compiler || !toolchain || !*toolchain || strchr(compiler, '\n') || strchr(toolchain, '\n'))
    return tl_error_set(err, TL_INVALID_ARG, "tl_compile_key_as: the compiler and the toolchain are one line each");
  if (!req->target)
    return tl_error_set(err, TL_UNSUPPORTED, "no target given");
  tl_target t;
  tl_status st = tl_target_parse(req->target, &t, err);
  if (st != TL_OK)
    return err ? (err->code = TL_UNSUPPORTED) : TL_UNSUPPORTED;
  tl_arena *arena = tl_arena_new();
  tl_program *prog;
  options opt;
  plan p;
  st = keyed(req, &t, compiler, toolchain, arena, &prog, &opt, key, manifest, &p, diags, err);
  tl_arena_free(arena);
  return st;
}

/* ---- the target ------------------------------------------------------------------- */
tl_codegen tl_codegen_of(const tl_target *t) {
  tl_codegen cg = {
      .dialect = t->dialect,
      .warp = t->warp,
      .mma = tl_target_has(t, TL_FEATURE(MMA) | TL_FEATURE(LDMATRIX)),
      .int8_mma = tl_target_has(t, TL_FEATURE(MMA) | TL_FEATURE(LDMATRIX) | TL_FEATURE(INT8_MMA)),
      .fp8_mma = tl_target_has(t, TL_FEATURE(MMA) | TL_FEATURE(LDMATRIX) | TL_FEATURE(FP8_MMA)),
      .async_copy = tl_target_has(t, TL_FEATURE(CP_ASYNC)),
      .wgmma = tl_target_has(t, TL_FEATURE(WGMMA)),
      .tma = t->dialect == TL_DIALECT_CUDA && tl_target_has(t, TL_FEATURE(TMA)),
      .pdl = t->dialect == TL_DIALECT_CUDA && tl_target_has(t, TL_FEATURE(PDL)),
      .amd_matrix = (int)t->amd_matrix,
  };
  if (!cg.wgmma && (t->a_features & TL_FEATURE(WGMMA)))
    snprintf(cg.wgmma_variant, sizeof cg.wgmma_variant, "%sa", t->name);
  return cg;
}

tl_status tl_codegen_for(const char *target, tl_codegen *cg, int64_t *smem, tl_error *err) {
  tl_target t;
  tl_status st = tl_target_parse(target, &t, err);
  if (st != TL_OK)
    return st;
  *cg = tl_codegen_of(&t);
  *smem = t.smem_bytes;
  return TL_OK;
}

/* ---- metadata ------------------------------------------------------------------------ */
static json_t *expr_json(tl_arena *a, const tl_expr *e) {
  if (e->kind == E_CONST)
    return json_integer(e->val.i);
  return json_string(tl_expr_str(a, e));
}

/* The tensor maps of the kernel (pass_tma.c), as a client builds them
 * (proto/kernel-meta.md section 5), with their offsets in the parameter
 * buffer where the cubin's resources say them (res's param_offsets). */
static json_t *tensor_maps_json(tl_arena *a, const tl_program *prog, const json_t *res) {
  const json_t *offs = json_object_get(res, "param_offsets");
  json_t *maps = json_array();
  for (int i = 0; i < prog->ntmaps; i++) {
    const tl_tmap *m = &prog->tmaps[i];
    const tl_sym *t = m->tensor;
    json_t *o = json_object(), *dims = json_array(), *strides = json_array(), *box = json_array(), *es = json_array();
    int64_t cpitch = (int64_t)tl_dtype_size(t->dtype); /* the constant factor of the pitch */
    const char *dyn = NULL;                            /* the product of its dynamic factors */
    for (int k = 0; k < m->rank; k++) {
      const tl_expr *d = t->shape[m->rank - 1 - k];
      /* packed elements: the innermost dimension in bytes, a constant (pass_tma.c) */
      int64_t bytes = !k && m->packed > 1 ? (int64_t)tl_dtype_bytes(t->dtype, (uint64_t)d->val.i) : -1;
      json_array_append_new(dims, bytes >= 0 ? json_integer(bytes) : expr_json(a, d));
      json_array_append_new(box, json_integer(m->box[k]));
      json_array_append_new(es, json_integer(1));
      if (k + 1 == m->rank)
        break;
      if (bytes >= 0)
        cpitch = bytes;
      else if (d->kind == E_CONST)
        cpitch *= d->val.i;
      else
        dyn = dyn ? tl_arena_printf(a, "%s * (%s)", dyn, tl_expr_str(a, d)) : tl_arena_printf(a, "(%s)", tl_expr_str(a, d));
      json_array_append_new(strides, dyn ? json_string(tl_arena_printf(a, "%s * %lld", dyn, (long long)cpitch))
                                         : json_integer(cpitch));
    }
    json_object_set_new(o, "param", json_string(t->name));
    json_object_set_new(o, "dtype", json_string(tl_dtype_name(t->dtype)));
    json_object_set_new(o, "rank", json_integer(m->rank));
    json_object_set_new(o, "global_dims", dims);
    json_object_set_new(o, "global_strides", strides);
    json_object_set_new(o, "box", box);
    json_object_set_new(o, "element_strides", es);
    json_object_set_new(o, "interleave", json_string("none"));
    json_object_set_new(o, "swizzle", json_string(m->swizzle == 128 ? "128B" : m->swizzle == 64 ? "64B"
                                                  : m->swizzle == 32 ? "32B" : "none"));
    json_object_set_new(o, "l2_promotion", json_string("256B"));
    json_object_set_new(o, "oob_fill", json_string("zero"));
    json_t *off = json_array_get(offs, (size_t)(prog->nparams + i));
    if (off)
      json_object_set_new(o, "offset", json_integer(json_integer_value(off)));
    json_array_append_new(maps, o);
  }
  return maps;
}

static json_t *param_json(tl_arena *a, const tl_sym *s) {
  json_t *p = json_object();
  json_object_set_new(p, "name", json_string(s->name));
  if (!s->workspace)
    json_object_set_new(p, "kind", json_string(s->kind == SYM_TENSOR ? "tensor" : "scalar"));
  json_object_set_new(p, "dtype", json_string(tl_dtype_name(s->dtype)));
  if (s->kind == SYM_TENSOR) {
    json_t *shape = json_array();
    for (int d = 0; d < s->ndim; d++)
      json_array_append_new(shape, expr_json(a, s->shape[d]));
    json_object_set_new(p, "shape", shape);
    json_object_set_new(p, "align", json_integer(s->align));
  }
  if (s->ws_zeroed)
    json_object_set_new(p, "zeroed", json_true());
  return p;
}

/* What launches one kernel (proto/kernel-meta.md): entry, launch, tensor
 * maps, warnings and resources; takes res. */
static json_t *kernel_json(tl_arena *a, const tl_program *prog, json_t *res) {
  json_t *m = json_object();
  json_object_set_new(m, "entry", json_string(prog->entry));
  if (prog->ntmaps)
    json_object_set_new(m, "tensor_maps", tensor_maps_json(a, prog, res));
  json_t *launch = json_object(), *grid = json_array(), *block = json_array();
  for (int i = 0; i < prog->ngrid; i++)
    json_array_append_new(grid, expr_json(a, prog->grid[i]));
  for (int i = 0; i < 3; i++) /* with pass_wspec's producer warpgroup after the program's threads */
    json_array_append_new(block, json_integer(i ? prog->threads[i] : prog->threads[0] * prog->slices + prog->wspec_threads));
  json_object_set_new(launch, "grid", grid);
  json_object_set_new(launch, "block", block);
  json_object_set_new(launch, "dynamic_shared_bytes", json_integer(prog->smem_bytes));
  if (prog->wspec_threads)
    json_object_set_new(launch, "producer_threads", json_integer(prog->wspec_threads));
  if (prog->persistent)
    json_object_set_new(launch, "persistent", json_integer(prog->wspec_blocks));
  if (prog->slices > 1) /* the program's threads once per slice (pass_wspec.c) */
    json_object_set_new(launch, "slices", json_integer(prog->slices));
  if (prog->pdl_wait) /* it waits for the kernel before it: it may be launched before that one ends */
    json_object_set_new(launch, "programmatic", json_true());
  if (prog->ncluster || prog->cl_size > 1) { /* the kernel's cluster, or its multicast loop's (pass_cluster.c) */
    json_t *cl = json_array();
    int n = prog->cl_axis + 1 > prog->ncluster ? prog->cl_axis + 1 : prog->ncluster;
    for (int i = 0; i < n; i++)
      json_array_append_new(cl, json_integer(prog->cl[i]));
    json_object_set_new(launch, "cluster", cl);
  }
  json_object_set_new(m, "launch", launch);
  if (prog->nregions && prog->backend && strcmp(prog->backend, "cuda") == 0) /* pass_split.c */
    json_object_set_new(m, "regions", json_pack("{s:i, s:I}", "count", prog->nregions, "statements",
                                                (json_int_t)prog->nstatements));
  /* warnings: tl_warn_target's, and ptxas's spills */
  json_t *warn = json_array();
  for (int i = 0; i < prog->warnings.n; i++)
    json_array_append_new(warn, json_pack("{s:s, s:s}", "pointer", prog->warnings.items[i].pointer, "message",
                                          prog->warnings.items[i].message));
  json_int_t spill = json_integer_value(json_object_get(res, "spill_store_bytes"));
  if (spill > 0)
    json_array_append_new(warn, json_pack("{s:s, s:s}", "pointer", prog->kptr, "message",
                                          tl_arena_printf(a, "ptxas spilled %lld bytes a thread to local memory "
                                                          "(%lld registers): fewer fragment elements a thread "
                                                          "would avoid it", (long long)spill,
                                                          (long long)json_integer_value(json_object_get(res,
                                                                                                    "registers")))));
  if (json_array_size(warn))
    json_object_set_new(m, "warnings", warn);
  else
    json_decref(warn);
  json_object_set_new(m, "resources", res);
  return m;
}

/* The metadata (proto/kernel-meta.md); takes res, each kernel's resources
 * in order.  One kernel without workspaces: format 1 (2 with tensor maps),
 * the kernel's fields at the top level; else format 3: the "kernels" list
 * and the "workspaces", with the first kernel's fields at the top level
 * too, for tools that show one. */
static char *metadata(tl_arena *a, const tl_program *prog, const char *target, const char *binary, json_t *res,
                      const char *toolchain_desc, const char *log, double ms) {
  bool several = prog->next || prog->nworkspaces;
  json_t *m = json_object();
  json_object_set_new(m, "format", json_integer(several ? 3 : prog->ntmaps ? 2 : 1)); /* 2: a format-1 client would
                                                                                          miss the maps */
  json_object_set_new(m, "target", json_string(target));
  json_object_set_new(m, "binary", json_string(binary));
  json_t *params = json_array();
  for (int i = 0; i < tl_user_params(prog); i++)
    json_array_append_new(params, param_json(a, prog->params[i]));
  json_object_set_new(m, "params", params);
  json_t *kernels = json_array(), *warn = json_array();
  size_t i = 0;
  for (const tl_program *k = prog; k; k = k->next, i++)
    json_array_append_new(kernels, kernel_json(a, k, json_incref(json_array_get(res, i))));
  json_decref(res);
  json_t *first = json_array_get(kernels, 0);
  const char *key;
  json_t *v;
  json_object_foreach(first, key, v) {
    if (!several || strcmp(key, "tensor_maps") != 0)
      json_object_set(m, key, v);
  }
  if (several) {
    json_t *ws = json_array();
    for (int j = tl_user_params(prog); j < prog->nparams; j++)
      json_array_append_new(ws, param_json(a, prog->params[j]));
    json_object_set_new(m, "workspaces", ws);
    json_array_foreach(kernels, i, v) json_array_extend(warn, json_object_get(v, "warnings"));
    if (json_array_size(warn))
      json_object_set(m, "warnings", warn);
    json_object_set(m, "kernels", kernels);
  }
  json_decref(warn);
  json_decref(kernels);
  json_t *ver = json_object();
  json_object_set_new(ver, "compiler", json_string(tl_compiler_id));
  json_object_set_new(ver, "toolchain", json_string(toolchain_desc));
  json_object_set_new(m, "versions", ver);
  json_object_set_new(m, "compile_ms", json_real(ms));
  if (prog->backend) { /* NVIDIA: which back end made the binary, the one asked for, and why not the PTX one */
    json_object_set_new(m, "backend", json_string(prog->backend));
    json_object_set_new(m, "backend_requested", json_string(prog->backend_mode));
    if (prog->backend_why)
      json_object_set_new(m, "backend_why_not_ptx", json_string(prog->backend_why));
  }
  json_object_set_new(m, "log", json_string(log ? log : ""));
  char *text = json_dumps(m, JSON_INDENT(1) | JSON_SORT_KEYS);
  json_decref(m);
  return text;
}

/* ---- the pipeline --------------------------------------------------------------------- */
static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char *dup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

void tl_toolchain_out_free(tl_toolchain_out *o) {
  free(o->code);
  free(o->log);
  memset(o, 0, sizeof *o);
}

/* The stages after which tl_compile calls after(): a dump may follow each,
 * the verifier checks each (verify.c says what it checks after which). */
const tl_stage_info tl_compile_stages[] = {
    {"check", "parse and check (parse.c, check.c): names resolved, types, constants folded"},
    {"threads", "pass_threads.c: the block's threads grown where a gemm's C would not fit in registers"},
    {"kgroup", "pass_kgroup.c: several consecutive K tiles per stage of a pipelined gemm loop whose tiles are narrow"},
    {"place", "pass_place.c: registers or shared memory for every buffer, gemms on the matrix cores"},
    {"pipeline", "pass_pipeline.c: cp.async copies, software-pipelined loops, shared memory offsets"},
    {"overlap", "pass_overlap.c: a gemm on wgmma issued one iteration late (FlashAttention-3's overlap)"},
    {"tma", "pass_tma.c: bulk tensor copies (TMA) with mbarriers, the kernel's tensor maps"},
    {"cluster", "pass_cluster.c: the thread-block cluster launched, bulk tensor copies multicast across it"},
    {"wspec", "pass_wspec.c: a producer warpgroup issuing a loop's bulk tensor copies (warp specialization)"},
    {"store", "pass_store.c: a register fragment's tile stored through shared memory by TMA, where a copy asks"},
    {"range", "pass_range.c: value ranges; each bounds guard kept or proven (inside)"},
    {"uniform", "pass_uniform.c: affine comparisons in parallel loops decided once per tile where they can be"},
    {"barrier", "pass_barrier.c: where the block barriers go"},
    {"raster", "pass_raster.c: the order of the blocks (use_swizzle)"},
    {"split", "pass_split.c: a long kernel's top level cut into regions, each a function of its own"},
    {"emit", "the back end chosen for an NVIDIA target: emit_ptx.c (nvJitLink) or emit_cuda.c (NVRTC), and why not PTX"},
    {NULL, NULL},
};

/* After `stage`: hands the program to the request's dump hook, then, when
 * asked (the request, or TL_VERIFY=1), checks what the stage promises
 * (verify.c). */
static tl_status after(const tl_compile_request *req, const char *stage, const tl_program *prog, const tl_codegen *cg,
                       tl_error *err) {
  if (req->dump)
    req->dump(req->dump_user, stage, prog);
  const char *env = getenv("TL_VERIFY");
  if (req->verify || (env && strcmp(env, "1") == 0))
    return tl_verify(prog, stage, cg, err);
  return TL_OK;
}

static tl_walk_act find_lag(tl_stmt *s, void *user) {
  (void)user;
  return s->kind == S_LOOP && s->wg_lag ? TL_WALK_STOP : TL_WALK_GO;
}

/* Does body b hold a pipelined loop whose tail runs one iteration late? */
static bool has_wg_lag(tl_body *b) {
  static const tl_walker w = {.pre = find_lag};
  return tl_walk(b, &w, NULL) == TL_WALK_STOP;
}

/* Is prog, emitted by emit_cuda.c for NVIDIA target t, built in two steps
 * (build_split)?  When pass_split.c cut some kernel into regions, t is a
 * cubin, nvJitLink is here and NVRTC's fast_compile is not asked for (it
 * would apply to NVVM alone). */
static bool split_build(const tl_program *prog, const tl_target *t, const options *opt) {
  bool regions = false;
  for (const tl_program *k = prog; k; k = k->next)
    regions |= k->nregions > 0;
  return regions && t->vendor == TL_VENDOR_NVIDIA && t->binary == TL_BINARY_CUBIN && !opt->fast_compile &&
         (pthread_once(&jl_once, jl_open), jl != NULL);
}

/* A program whose kernels pass_split.c cut into regions: NVRTC makes PTX
 * (for t's compute_ target), nvJitLink assembles it.  ptxas inside NVRTC
 * would inline every region's function into the kernel again (each is
 * called once), taking the time that grows faster than the kernel's
 * length; nvJitLink assembles each function of the PTX apart
 * (bench/compile.md).  The log holds both tools' logs. */
static tl_status build_split(const tl_toolchain_ops *tc, void *th, const char *src, const tl_target *t,
                             const options *opt, tl_toolchain_out *out, tl_error *err) {
  char name[TL_TARGET_NAME_MAX + 8];
  tl_target pt;
  snprintf(name, sizeof name, "compute_%s", t->name + 3); /* "sm_90a" -> "compute_90a" */
  tl_status st = tl_target_parse(name, &pt, err);
  tl_toolchain_out ptx = {0};
  if (st == TL_OK)
    st = tc->compile(th, src, &pt, opt, &ptx, err);
  if (st == TL_OK)
    st = tl_nvjitlink_assemble(jl, (const char *)ptx.code, t->name, opt->max_registers, out, err);
  if (st == TL_OK) {
    size_t n = strlen(ptx.log ? ptx.log : "") + strlen(out->log ? out->log : "") + 1;
    char *log = malloc(n);
    if (!log) {
      st = tl_error_set(err, TL_NOMEM, "out of memory");
    } else {
      snprintf(log, n, "%s%s", ptx.log ? ptx.log : "", out->log ? out->log : "");
      free(out->log);
      out->log = log;
    }
  }
  tl_toolchain_out_free(&ptx);
  return st;
}

/* The passes for one kernel, from place to split (the stages after
 * "check" of tl_compile_stages), each followed by after(). */
static tl_status lower(const tl_compile_request *req, tl_program *prog, const tl_target *tp, const tl_codegen *cgp,
                       tl_diags *diags, tl_error *err) {
  tl_target t = *tp;
  tl_codegen cg = *cgp;
  tl_status st;
  if ((st = after(req, "check", prog, &cg, err)) != TL_OK)
    return st;
  tl_pass_threads(prog, &cg);
  if ((st = after(req, "threads", prog, &cg, err)) != TL_OK)
    return st;
  tl_pass_kgroup(prog, t.smem_bytes, &cg);
  if ((st = after(req, "kgroup", prog, &cg, err)) != TL_OK ||
      (st = tl_pass_place_for(prog, t.smem_bytes, &cg, err)) != TL_OK ||
      (st = after(req, "place", prog, &cg, err)) != TL_OK ||
      (st = tl_pass_pipeline_for(prog, t.smem_bytes, &cg, err)) != TL_OK ||
      (st = after(req, "pipeline", prog, &cg, err)) != TL_OK)
    return st;
  tl_pass_overlap(prog, t.smem_bytes, &cg);
  if ((st = after(req, "overlap", prog, &cg, err)) != TL_OK)
    return st;
  tl_pass_tma(prog, t.smem_bytes, &cg);
  if ((st = after(req, "tma", prog, &cg, err)) != TL_OK)
    return st;
  tl_pass_cluster(prog, &cg);
  if ((st = after(req, "cluster", prog, &cg, err)) != TL_OK)
    return st;
  tl_pass_wspec(prog, t.smem_bytes, &cg);
  if ((st = after(req, "wspec", prog, &cg, err)) != TL_OK)
    return st;
  tl_pass_store(prog, t.smem_bytes, &cg);
  if ((st = after(req, "store", prog, &cg, err)) != TL_OK || (st = tl_check_target(prog, &t, diags, err)) != TL_OK)
    return st;
  tl_warn_target(prog);
  tl_pass_range(prog);
  if ((st = after(req, "range", prog, &cg, err)) != TL_OK)
    return st;
  tl_pass_uniform(prog);
  if ((st = after(req, "uniform", prog, &cg, err)) != TL_OK || (st = tl_pass_barrier(prog, err)) != TL_OK ||
      (st = after(req, "barrier", prog, &cg, err)) != TL_OK)
    return st;
  tl_pass_raster(prog);
  if ((st = after(req, "raster", prog, &cg, err)) != TL_OK)
    return st;
  tl_pass_split(prog, &cg);
  return after(req, "split", prog, &cg, err);
}

tl_status tl_compile(const tl_compile_request *req, tl_build **out, tl_diags *diags, tl_error *err) {
  double t0 = now_ms();
  *out = NULL;
  tl_arena *arena = tl_arena_new();
  tl_program *prog;
  options opt;
  char key[65];
  char *manifest = NULL, *log = NULL;
  const char *desc = NULL, *binary = NULL;
  unsigned char *bin = NULL;
  size_t bin_size = 0;
  json_t *res = NULL;
  tl_build *b = NULL;
  tl_target t;
  tl_toolchain_out built = {0};
  bool no_lag = false, no_tight = false;
  int max_blocks[TL_MAX_KERNELS] = {0}; /* per kernel: blocks per SM for a producer warpgroup (0: no limit) */
again:;
  plan p;
  tl_status st = front(req, arena, &prog, &opt, key, &manifest, &t, &p, diags, err);
  if (st != TL_OK)
    goto done;
  desc = p.desc;
  tl_codegen cg = tl_codegen_of(&t);
  const tl_toolchain_ops *tc = toolchains[toolchain_of(&t)];
  int ki = 0;
  for (tl_program *k = prog; k; k = k->next, ki++) {
    k->no_wg_lag = no_lag;
    k->no_tight_wspec = no_tight;
    k->wspec_max_blocks = ki < TL_MAX_KERNELS ? max_blocks[ki] : 0;
    k->max_registers = opt.max_registers;
    k->split_statements = opt.split_statements ? opt.split_statements : TL_SPLIT_MIN_STATEMENTS;
    if ((st = lower(req, k, &t, &cg, diags, err)) != TL_OK)
      goto done;
  }
  const char *why_not = p.why_not, *src = NULL;
  bool whole = false, assembled = false;
  if (p.try_ptx) {
    tl_error e;
    tl_error_clear(&e);
    /* a cubin of PTX that must be assembled whole needs ptxas; PTX as the binary does not */
    const char *no_whole = NULL;
    if (t.binary == TL_BINARY_CUBIN)
      tl_compiler_ptxas(&no_whole);
    /* kernel speed first: flash attention's schedule (a late gemm or ping-pong turns) runs 5-9% slower from the
     * PTX back end than from the CUDA one on the H100 (bench/compile.md, sessions 8 and 11): in mode auto, CUDA,
     * decided before any PTX is emitted */
    const tl_stmt *wl = p.th && strcmp(p.mode, "auto") == 0 ? tl_wspec_loop(prog) : NULL;
    if (wl && (wl->ov_gemm || wl->pingpong)) {
      tl_error_set_at(&e, TL_UNSUPPORTED, wl->pointer, 0,
                      "a loop with a late gemm or ping-pong turns runs 5-9%% slower from the PTX back end than from the "
                      "CUDA one (bench/compile.md); --backend ptx takes it");
    } else {
      src = tl_emit_ptx(arena, prog, &t, no_whole, &whole, &e);
    }
    if (src && whole && t.binary == TL_BINARY_CUBIN && !req->source_only) {
      /* assembled here, after the choice, so that a failure of ptxas may fall back to NVRTC */
      if (tl_ptxas_assemble(pa, src, t.name, opt.max_registers, &built, &e) == TL_OK) {
        assembled = true;
      } else {
        tl_toolchain_out_free(&built);
        src = NULL;
      }
    }
    if (!src && strcmp(p.mode, "ptx") == 0) {
      st = tl_error_set_at(err, TL_UNSUPPORTED, e.pointer, 0, "backend ptx: %s", e.message);
      goto done;
    }
    if (!src)
      why_not = tl_arena_printf(arena, "%s%s%s", e.pointer, e.pointer[0] ? ": " : "", e.message);
    if (!src && !p.th) { /* auto without the vendor's toolchain: only PTX could build it */
      st = tl_error_set(err, p.th_err.code, "%s (and not by the PTX back end: %s)", p.th_err.message, why_not);
      goto done;
    }
  }
  bool ptx = src != NULL, split = false;
  for (tl_program *k = prog; k; k = k->next) {
    k->backend = t.vendor != TL_VENDOR_NVIDIA ? NULL : ptx ? "ptx" : "cuda";
    k->backend_mode = t.vendor != TL_VENDOR_NVIDIA ? NULL : p.mode;
    k->backend_why = ptx ? NULL : why_not;
    k->pdl_wait = !ptx && cg.pdl && k != prog; /* the CUDA C emitter's griddepcontrol.wait (emit_cuda.c: tl_emit) */
    if ((st = after(req, "emit", k, &cg, err)) != TL_OK)
      goto done;
  }
  if (!ptx && !(src = tl_emit_module(arena, prog, &cg, err))) {
    st = err ? err->code : TL_UNSUPPORTED;
    goto done;
  }
  if (!req->source_only) {
    if (assembled) /* by ptxas, above */
      st = TL_OK;
    else if (ptx && t.binary == TL_BINARY_CUBIN)
      st = tl_nvjitlink_assemble(jl, src, t.name, opt.max_registers, &built, err);
    else if (ptx) /* compute_: the PTX is the binary */
      st = (built.code = (unsigned char *)dup(src)) && (built.log = dup(""))
               ? (built.size = strlen(src), TL_OK)
               : tl_error_set(err, TL_NOMEM, "out of memory");
    else if ((split = split_build(prog, &t, &opt)))
      st = build_split(tc, p.th, src, &t, &opt, &built, err);
    else
      st = tc->compile(p.th, src, &t, &opt, &built, err);
    if (st != TL_OK)
      goto done;
    res = json_array(); /* each kernel's resources, in order */
    bool spilled_lag = false, spilled_tight = false, spilled_ws = false;
    int kj = 0, fewer[TL_MAX_KERNELS] = {0};
    for (tl_program *k = prog; k; k = k->next, kj++) {
      json_t *r = NULL;
      if ((st = (ptx || split ? tl_nv_cubin_resources : tc->inspect)(p.th, &t, &built, k->entry, k->nparams, &r,
                                                                        err)) != TL_OK)
        goto done;
      json_array_append_new(res, r);
      bool spilled = json_integer_value(json_object_get(r, "spill_store_bytes")) +
                         json_integer_value(json_object_get(r, "spill_load_bytes")) > 0;
      spilled_lag |= spilled && !no_lag && has_wg_lag(&k->body);
      spilled_tight |= spilled && !no_tight && k->wspec_tight;
      if (spilled && !k->wspec_tight && k->wspec_blocks > 1 && kj < TL_MAX_KERNELS) {
        fewer[kj] = k->wspec_blocks - 1; /* a producer warpgroup's kernel: a block less per SM, more registers */
        spilled_ws = true;
      }
    }
    if (!spilled_lag && !spilled_tight && spilled_ws) {
      for (int i = 0; i < TL_MAX_KERNELS; i++)
        if (fewer[i])
          max_blocks[i] = fewer[i];
    } else
      spilled_ws = false;
    if (spilled_lag || spilled_tight || spilled_ws) {
      /* the accumulators' second copy left too few registers: build again without it */
      tl_toolchain_out_free(&built);
      json_decref(res);
      res = NULL;
      free(manifest);
      manifest = NULL;
      tl_arena_free(arena);
      arena = tl_arena_new();
      no_lag |= spilled_lag;
      no_tight |= spilled_tight;
      goto again;
    }
    static const char *const binaries[] = {"cubin", "ptx", "hsaco"};
    binary = binaries[t.binary];
    bin = built.code;
    bin_size = built.size;
    log = built.log;
    if (no_lag) { /* say why the loop's tail is not late, as --emit ir cannot */
      char *l = tl_arena_printf(arena, "tlc: the first build, with a pipelined loop's tail one iteration late, "
                                       "spilled registers; built again without\n%s", log ? log : "");
      free(log);
      log = dup(l);
    }
    for (int i = 0; i < TL_MAX_KERNELS; i++)
      if (max_blocks[i]) { /* and for a producer warpgroup's blocks per SM */
        char *l = tl_arena_printf(arena, "tlc: kernel %d's build with a producer warpgroup and more blocks per SM "
                                         "spilled registers; built again with at most %d\n%s", i + 1, max_blocks[i],
                                  log ? log : "");
        free(log);
        log = dup(l);
      }
    if (no_tight) { /* the same for the producer warpgroup's tight register budget (pass_wspec.c) */
      char *l = tl_arena_printf(arena, "tlc: the build with a producer warpgroup on its tight register budget "
                                       "spilled registers; built again without it\n%s", log ? log : "");
      free(log);
      log = dup(l);
    }
    built.code = NULL;
    built.log = NULL;
  }
  b = calloc(1, sizeof *b);
  if (!b) {
    st = tl_error_set(err, TL_NOMEM, "out of memory");
    goto done;
  }
  b->compile_ms = now_ms() - t0;
  b->target = dup(req->target);
  b->key = dup(key);
  b->manifest = manifest;
  manifest = NULL;
  b->binary = bin;
  b->binary_size = bin_size;
  bin = NULL;
  b->source = dup(src);
  b->log = dup(log ? log : "");
  if (!req->source_only) {
    b->artifact = malloc(65);
    b->meta = metadata(arena, prog, req->target, binary, res, desc, log, b->compile_ms);
    res = NULL;
  }
  if (!b->target || !b->key || !b->source || !b->log ||
      (!req->source_only && (!b->artifact || !b->meta || tl_sha256_hex(b->binary, b->binary_size, b->artifact) != TL_OK))) {
    tl_build_free(b);
    b = NULL;
    st = tl_error_set(err, TL_NOMEM, "out of memory");
    goto done;
  }
  *out = b;
  st = TL_OK;
done:
  tl_toolchain_out_free(&built);
  json_decref(res);
  free(bin);
  free(log);
  free(manifest);
  tl_arena_free(arena);
  return st;
}

void tl_build_free(tl_build *b) {
  if (!b)
    return;
  free(b->target);
  free(b->key);
  free(b->manifest);
  free(b->binary);
  free(b->artifact);
  free(b->meta);
  free(b->source);
  free(b->log);
  free(b);
}
