/*
 * compile.c - libtlcompiler's entry points (tlcompiler.h): the pipeline of
 * DESIGN.md section 3 for one program and one target, the build key, and
 * the metadata that lets a client launch the binary with nothing else.
 *
 *   tl_compile:  parse + check (tl_load_program)
 *                -> build key (canonical manifest, SHA-256)
 *                -> pass_place (registers or shared memory per buffer)
 *                -> pass_pipeline (cp.async, software pipelining)
 *                -> fit the target (shared memory, threads)
 *                -> pass_range (value ranges; bounds guards proven)
 *                -> pass_barrier (where the block barriers go)
 *                -> pass_raster (the blocks' order for use_swizzle)
 *                -> emit CUDA C or HIP C (emit_cuda.c and its dialects)
 *                -> NVRTC (nvrtc.c): cubin or PTX, or
 *                   hiprtc / clang + ld.lld (amdgpu.c): HSACO
 *                -> metadata (resources read back from the cubin, or from
 *                   the code object's notes, hsaco.c)
 *
 * The back end is chosen by the target's name: gfx... is AMD's, the rest
 * NVIDIA's.  Each toolchain is opened once, when first needed.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../proto/tl_hash.h"
#include "amdgpu.h"
#include "cubin.h"
#include "hsaco.h"
#include "interp.h"
#include "nvrtc.h"
#include "pass.h"
#include "tlcompiler.h"

/* ---- the toolchain, opened once -------------------------------------------------- */
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;
static tl_nvrtc *nv;
static tl_error nv_err;
static char nv_desc[128];

static void nv_open(void) {
  if (tl_nvrtc_open(&nv, &nv_err) != TL_OK) {
    nv = NULL;
    return;
  }
  int major = 0, minor = 0;
  tl_nvrtc_version(nv, &major, &minor);
  snprintf(nv_desc, sizeof nv_desc, "NVRTC %d.%d (%s)", major, minor, tl_nvrtc_library(nv));
}

static tl_nvrtc *toolchain(tl_error *err) {
  pthread_once(&nv_once, nv_open);
  if (!nv && err)
    *err = nv_err;
  return nv;
}

static pthread_once_t amd_once = PTHREAD_ONCE_INIT;
static tl_amdgpu *amd;
static tl_error amd_err;
static char amd_desc[4200];

static void amd_open(void) {
  if (tl_amdgpu_open(&amd, &amd_err) != TL_OK) {
    amd = NULL;
    return;
  }
  snprintf(amd_desc, sizeof amd_desc, "%s", tl_amdgpu_description(amd));
}

static tl_amdgpu *amd_toolchain(tl_error *err) {
  pthread_once(&amd_once, amd_open);
  if (!amd && err)
    *err = amd_err;
  return amd;
}

/* Every target offered, NVIDIA's then AMD's, built once. */
static pthread_once_t all_once = PTHREAD_ONCE_INIT;
static const char **all_targets;
static char all_desc[4400];
static tl_error all_err;

static void all_build(void) {
  tl_error nerr, aerr;
  tl_error_clear(&nerr);
  tl_error_clear(&aerr);
  const char *const *nl = NULL, *const *al = NULL;
  size_t nn = 0, an = 0;
  if (toolchain(&nerr) && tl_nvrtc_targets(nv, &nl, &nn, &nerr) != TL_OK)
    nn = 0;
  if (amd_toolchain(&aerr) && tl_amdgpu_targets(amd, &al, &an, &aerr) != TL_OK)
    an = 0;
  if (nn + an == 0) {
    tl_error_set(&all_err, nv || amd ? (nv ? nerr.code : aerr.code) : TL_NO_TOOLCHAIN,
                 "no toolchain offers any target: NVIDIA: %s; AMD: %s", nv ? "no targets" : nerr.message,
                 amd ? "no targets" : aerr.message);
    return;
  }
  all_targets = calloc(nn + an + 1, sizeof *all_targets);
  if (!all_targets) {
    tl_error_set(&all_err, TL_NOMEM, "out of memory listing the targets");
    return;
  }
  for (size_t i = 0; i < nn; i++)
    all_targets[i] = nl[i];
  for (size_t i = 0; i < an; i++)
    all_targets[nn + i] = al[i];
  snprintf(all_desc, sizeof all_desc, "%s%s%s", nn ? nv_desc : "", nn && an ? "; " : "", an ? amd_desc : "");
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

/* The known AMD targets the AMD toolchain refuses, built once. */
static pthread_once_t refused_once = PTHREAD_ONCE_INIT;
static const char *refused[16];

static void refused_build(void) {
  size_t n = 0, known;
  const tl_amd_target *t = tl_amd_known_targets(&known);
  for (size_t i = 0; i < known && n + 1 < sizeof refused / sizeof *refused; i++)
    if (amd_toolchain(NULL) && tl_amdgpu_refusal(amd, t[i].name))
      refused[n++] = t[i].name;
  refused[n] = NULL;
}

const char *const *tl_compiler_targets_refused(void) {
  pthread_once(&refused_once, refused_build);
  return refused;
}

const char *tl_compiler_target_refusal(const char *target) {
  return target && tl_amd_target_like(target) && amd_toolchain(NULL) ? tl_amdgpu_refusal(amd, target) : NULL;
}

const char *tl_compiler_target_toolchain(const char *target) {
  if (!target)
    return NULL;
  if (tl_amd_target_like(target))
    return amd_toolchain(NULL) && tl_amdgpu_accepts(amd, target) ? amd_desc : NULL;
  return toolchain(NULL) && tl_nvrtc_accepts(nv, target) ? nv_desc : NULL;
}

/* ---- options ------------------------------------------------------------------------ */
typedef struct {
  int max_registers; /* 0: the toolchain's choice */
  bool debug;        /* line info in the binary */
} options;

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
    } else {
      tl_status st = tl_error_set(err, TL_INVALID_ARG, "unknown option '%s'; the options are max_registers and debug",
                                  key); /* before the decref: key belongs to obj */
      json_decref(obj);
      return st;
    }
  }
  *canon = obj;
  return TL_OK;
}

/* ---- the build key ------------------------------------------------------------------- */
/* Drops every member whose name starts with "x-" (they never change a build). */
static void strip_x(json_t *v) {
  if (json_is_object(v)) {
    const char *key;
    json_t *x;
    void *tmp;
    json_object_foreach_safe(v, tmp, key, x) {
      if (strncmp(key, "x-", 2) == 0)
        json_object_del(v, key);
      else
        strip_x(x);
    }
  } else if (json_is_array(v)) {
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) strip_x(x);
  }
}

static char *canonical(json_t *v) {
  return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
}

/* The key manifest: everything a build depends on, one item per line. */
static char *manifest_of(const tl_compile_request *req, const tl_program *prog, json_t *options_canon,
                         const char *desc) {
  json_t *doc = json_loadb(req->program, req->program_len, JSON_REJECT_DUPLICATES, NULL);
  if (!doc)
    return NULL;
  strip_x(doc);
  json_t *consts = json_object();
  for (int i = 0; i < prog->nconsts; i++) {
    const tl_sym *c = prog->consts[i];
    json_t *v = c->type == TL_BOOL ? json_boolean(c->cval.i) : c->type == TL_TY_UREAL ? json_real(c->cval.f)
                                                                                       : json_integer(c->cval.i);
    json_object_set_new(consts, c->name, v);
  }
  char *p = canonical(doc), *c = canonical(consts), *o = canonical(options_canon);
  size_t n = strlen(p) + strlen(c) + strlen(o) + strlen(req->target) + strlen(desc) + 256;
  char *m = malloc(n);
  if (m)
    snprintf(m, n,
             "tl-build-key 1\ncompiler tlc %s\ntoolchain %s\ntarget %s\noptions %s\nconstants %s\nprogram %s\n",
             TL_COMPILER_VERSION, desc, req->target, o, c, p);
  free(p);
  free(c);
  free(o);
  json_decref(doc);
  json_decref(consts);
  return m;
}

/* Parses, checks and keys a request.  On success *prog lives in arena and
 * *desc is the description of the toolchain that builds for the target. */
static tl_status front(const tl_compile_request *req, tl_arena *arena, tl_program **prog, options *opt, char key[65],
                       char **manifest, const char **desc, tl_diags *diags, tl_error *err) {
  tl_error_clear(err);
  if (req->target && tl_amd_target_like(req->target)) {
    tl_amdgpu *h = amd_toolchain(err);
    if (!h)
      return err ? err->code : TL_NO_TOOLCHAIN;
    if (!tl_amdgpu_accepts(h, req->target)) {
      const char *why = tl_amdgpu_refusal(h, req->target);
      if (why)
        return tl_error_set(err, TL_UNSUPPORTED, "target '%.64s' is not offered here: %s", req->target, why);
      return tl_error_set(err, TL_UNSUPPORTED, "target '%.64s' is not offered here (see the toolchain's targets: %s)",
                          req->target, amd_desc);
    }
    *desc = amd_desc;
  } else {
    tl_nvrtc *h = toolchain(err);
    if (!h)
      return err ? err->code : TL_NO_TOOLCHAIN;
    if (!req->target || !tl_nvrtc_accepts(h, req->target))
      return tl_error_set(err, TL_UNSUPPORTED, "target '%.64s' is not offered here (see the toolchain's targets: %s)",
                          req->target ? req->target : "(none)", nv_desc);
    *desc = nv_desc;
  }
  json_t *ocanon = NULL;
  tl_status st = parse_options(req->options_json, opt, &ocanon, err);
  if (st != TL_OK)
    return st;
  int before = diags->n;
  *prog = tl_load_program(arena, req->program, req->program_len, req->defines, req->ndefines, diags);
  if (!*prog) {
    json_decref(ocanon);
    bool json_error = diags->n > before && !diags->items[before].pointer;
    return tl_error_set(err, json_error ? TL_BAD_JSON : TL_BAD_PROGRAM, "%s",
                        json_error ? "malformed JSON" : "the program is invalid; see the diagnostics");
  }
  char *m = manifest_of(req, *prog, ocanon, *desc);
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

tl_status tl_compile_key(const tl_compile_request *req, char key[65], char **manifest, tl_diags *diags, tl_error *err) {
  tl_arena *arena = tl_arena_new();
  tl_program *prog;
  options opt;
  const char *desc;
  tl_status st = front(req, arena, &prog, &opt, key, manifest, &desc, diags, err);
  tl_arena_free(arena);
  return st;
}

/* ---- fitting the target -------------------------------------------------------------- */
/* Largest dynamic shared memory one block may use (opt-in), in bytes. */
static int64_t smem_limit(int arch) {
  switch (arch) {
  case 75: return 65536;
  case 80: case 87: return 166912;
  case 86: case 89: case 120: case 121: return 101376;
  case 90: case 100: case 101: case 103: case 110: return 232448;
  default: return 49152;
  }
}

/* What one target is: its back end, what its code may use, its limits. */
typedef struct backend {
  const tl_amd_target *amd; /* AMD's target, or NULL for NVIDIA's */
  tl_nv_target nv;          /* NVIDIA's */
  tl_codegen cg;
  int64_t smem_limit;       /* shared memory (LDS) one block may use */
  const char *desc;         /* the toolchain */
} backend;

tl_status tl_codegen_for(const char *target, tl_codegen *cg, int64_t *smem, tl_error *err) {
  if (target && tl_amd_target_like(target)) {
    const tl_amd_target *t = tl_amd_target_find(target);
    if (!t)
      return tl_error_set(err, TL_UNSUPPORTED, "target '%.64s' is not an AMD target known here", target);
    /* HIP C on the portable paths: no mma.sync, ldmatrix or cp.async */
    *cg = (tl_codegen){.dialect = TL_DIALECT_HIP, .warp = t->wavefront, .amd_matrix = (int)t->matrix};
    *smem = t->lds_bytes;
    return TL_OK;
  }
  tl_nv_target nt;
  tl_status st = tl_nv_target_parse(target, &nt, err);
  if (st != TL_OK)
    return st;
  *cg = tl_codegen_cuda;
  cg->wgmma = nt.arch == 90 && nt.variant == 'a';
  *smem = smem_limit(nt.arch);
  return TL_OK;
}

static tl_status backend_of(const char *target, const char *desc, backend *be, tl_error *err) {
  memset(be, 0, sizeof *be);
  be->desc = desc;
  be->amd = tl_amd_target_find(target);
  if (!be->amd && tl_nv_target_parse(target, &be->nv, err) != TL_OK)
    return err ? err->code : TL_INVALID_ARG;
  return tl_codegen_for(target, &be->cg, &be->smem_limit, err);
}

static tl_status fit(const tl_program *prog, const backend *be, const char *target, tl_error *err) {
  int64_t lim = be->smem_limit;
  if (prog->smem_bytes > lim)
    return tl_error_set(err, TL_LIMIT,
                        "the kernel needs %lld bytes of shared memory per block and %s allows %lld: %lld bytes too "
                        "many (use smaller tiles, fewer stages, or a target with more shared memory)",
                        (long long)prog->smem_bytes, target, (long long)lim, (long long)(prog->smem_bytes - lim));
  bool cluster = false; /* a cluster of 1 x 1 x 1 is no cluster */
  for (int i = 0; i < prog->ncluster; i++)
    cluster |= prog->cluster[i] > 1;
  if (cluster && be->amd)
    return tl_error_set(err, TL_UNSUPPORTED, "thread-block clusters are NVIDIA's (sm_90 or later); %s has none",
                        target);
  if (cluster && be->nv.arch < 90)
    return tl_error_set(err, TL_UNSUPPORTED, "thread-block clusters need sm_90 or later, not %s", target);
  return TL_OK;
}

/* ---- metadata ------------------------------------------------------------------------ */
static json_t *expr_json(tl_arena *a, const tl_expr *e) {
  if (e->kind == E_CONST)
    return json_integer(e->val.i);
  return json_string(tl_expr_str(a, e));
}

/* The resources of a cubin: its own records and ptxas's report. */
static json_t *nv_resources(const tl_program *prog, bool ptx, const tl_cubin_info *ci, const char *log) {
  json_t *res = json_object();
  const tl_cubin_kernel *k = ci ? tl_cubin_find(ci, prog->name) : NULL;
  if (k) {
    json_object_set_new(res, "registers", json_integer(k->registers));
    json_object_set_new(res, "static_shared_bytes", json_integer(k->shared_bytes));
    json_object_set_new(res, "local_bytes", json_integer(k->local_bytes));
  }
  tl_ptxas_stats ps;
  if (!ptx && tl_ptxas_stats_parse(log, prog->name, &ps, NULL) == TL_OK) {
    json_object_set_new(res, "spill_store_bytes", json_integer(ps.spill_store_bytes));
    json_object_set_new(res, "spill_load_bytes", json_integer(ps.spill_load_bytes));
    json_object_set_new(res, "stack_frame_bytes", json_integer(ps.stack_frame_bytes));
  }
  return res;
}

/* The resources of an AMD kernel, from the code object's metadata note:
 * registers are VGPRs plus AGPRs (the unified register file of CDNA),
 * static_shared_bytes the static LDS, local_bytes the scratch per lane. */
static json_t *amd_resources(const tl_hsaco_kernel *k) {
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
  return res;
}

/* The metadata (proto/kernel-meta.md); takes res. */
static char *metadata(tl_arena *a, const tl_program *prog, const char *target, const char *binary, json_t *res,
                      const char *toolchain_desc, const char *log, double ms) {
  json_t *m = json_object();
  json_object_set_new(m, "format", json_integer(1));
  json_object_set_new(m, "entry", json_string(prog->name));
  json_object_set_new(m, "target", json_string(target));
  json_object_set_new(m, "binary", json_string(binary));
  json_t *params = json_array();
  for (int i = 0; i < prog->nparams; i++) {
    const tl_sym *s = prog->params[i];
    json_t *p = json_object();
    json_object_set_new(p, "name", json_string(s->name));
    json_object_set_new(p, "kind", json_string(s->kind == SYM_TENSOR ? "tensor" : "scalar"));
    json_object_set_new(p, "dtype", json_string(tl_dtype_name(s->dtype)));
    if (s->kind == SYM_TENSOR) {
      json_t *shape = json_array();
      for (int d = 0; d < s->ndim; d++)
        json_array_append_new(shape, expr_json(a, s->shape[d]));
      json_object_set_new(p, "shape", shape);
      json_object_set_new(p, "align", json_integer(s->align));
    }
    json_array_append_new(params, p);
  }
  json_object_set_new(m, "params", params);
  json_t *launch = json_object(), *grid = json_array(), *block = json_array();
  for (int i = 0; i < prog->ngrid; i++)
    json_array_append_new(grid, expr_json(a, prog->grid[i]));
  for (int i = 0; i < 3; i++)
    json_array_append_new(block, json_integer(prog->threads[i]));
  json_object_set_new(launch, "grid", grid);
  json_object_set_new(launch, "block", block);
  json_object_set_new(launch, "dynamic_shared_bytes", json_integer(prog->smem_bytes));
  if (prog->ncluster) {
    json_t *cl = json_array();
    for (int i = 0; i < prog->ncluster; i++)
      json_array_append_new(cl, json_integer(prog->cluster[i]));
    json_object_set_new(launch, "cluster", cl);
  }
  json_object_set_new(m, "launch", launch);
  json_object_set_new(m, "resources", res);
  json_t *ver = json_object();
  json_object_set_new(ver, "compiler", json_string("tlc " TL_COMPILER_VERSION));
  json_object_set_new(ver, "toolchain", json_string(toolchain_desc));
  json_object_set_new(m, "versions", ver);
  json_object_set_new(m, "compile_ms", json_real(ms));
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

/* The toolchain's part for NVIDIA: NVRTC, then the cubin read back. */
static tl_status build_nv(const backend *be, const tl_program *prog, const char *src, const char *target,
                          const options *opt, unsigned char **bin, size_t *n, char **log, json_t **res,
                          const char **binary, tl_error *err) {
  tl_nvrtc_result r = {0};
  const char *opts[3];
  int nopts = 0;
  opts[nopts++] = "--diag-suppress=177"; /* unused prelude helpers are expected */
  char reg[32];
  if (opt->max_registers) {
    snprintf(reg, sizeof reg, "--maxrregcount=%d", opt->max_registers);
    opts[nopts++] = reg;
  }
  if (opt->debug)
    opts[nopts++] = "-lineinfo";
  tl_status st = tl_nvrtc_compile(nv, src, "kernel.cu", target, opts, nopts, &r, err);
  tl_cubin_info ci = {0};
  if (st == TL_OK && !be->nv.is_ptx)
    st = tl_cubin_inspect(r.code, r.code_size, &ci, err);
  if (st == TL_OK) {
    *res = nv_resources(prog, be->nv.is_ptx, be->nv.is_ptx ? NULL : &ci, r.log);
    *binary = be->nv.is_ptx ? "ptx" : "cubin";
    *bin = r.code;
    *n = r.code_size;
    *log = r.log;
    r.code = NULL;
    r.log = NULL;
  }
  tl_cubin_info_free(&ci);
  tl_nvrtc_result_free(&r);
  return st;
}

/* The toolchain's part for AMD: hiprtc or clang, then the code object read
 * back: it must be for the target and hold the kernel with one argument
 * per parameter. */
static tl_status build_amd(const backend *be, const tl_program *prog, const char *src, const char *target,
                           unsigned char **bin, size_t *n, char **log, json_t **res, const char **binary,
                           tl_error *err) {
  tl_amdgpu_result r = {0};
  tl_hsaco_info hi = {0};
  tl_status st = tl_amdgpu_compile(amd, src, target, &r, err);
  if (st == TL_OK && (st = tl_hsaco_inspect(r.code, r.code_size, &hi, err)) == TL_OK &&
      (st = tl_hsaco_check_target(&hi, be->amd->name, err)) == TL_OK) {
    const tl_hsaco_kernel *k = tl_hsaco_find(&hi, prog->name);
    if (!k)
      st = tl_error_set(err, TL_TOOLCHAIN, "the code object has no kernel '%s'", prog->name);
    else if (k->nexplicit != (size_t)prog->nparams)
      st = tl_error_set(err, TL_TOOLCHAIN, "kernel '%s' has %zu arguments in the code object, not %d", prog->name,
                        k->nexplicit, prog->nparams);
    else {
      *res = amd_resources(k);
      *binary = "hsaco";
      *bin = r.code;
      *n = r.code_size;
      *log = r.log;
      r.code = NULL;
      r.log = NULL;
    }
  }
  tl_hsaco_info_free(&hi);
  tl_amdgpu_result_free(&r);
  return st;
}

const tl_stage_info tl_compile_stages[] = {
    {"check", "parse and check (check.c): names resolved, types, constants folded"},
    {"place", "pass_place.c: registers or shared memory for every buffer, gemms on the matrix cores"},
    {"pipeline", "pass_pipeline.c: cp.async copies, software-pipelined loops, shared memory offsets"},
    {"range", "pass_range.c: value ranges; each bounds guard kept or proven (inside)"},
    {"barrier", "pass_barrier.c: where the block barriers go"},
    {"raster", "pass_raster.c: the order of the blocks (use_swizzle)"},
    {NULL, NULL},
};

/* Hands the program after `stage` to the request's dump hook. */
static void dump(const tl_compile_request *req, const char *stage, const tl_program *prog) {
  if (req->dump)
    req->dump(req->dump_user, stage, prog);
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
  backend be;
  tl_status st = front(req, arena, &prog, &opt, key, &manifest, &desc, diags, err);
  if (st != TL_OK)
    goto done;
  if ((st = backend_of(req->target, desc, &be, err)) != TL_OK)
    goto done;
  dump(req, "check", prog);
  if ((st = tl_pass_place_for(prog, be.smem_limit, &be.cg, err)) != TL_OK)
    goto done;
  dump(req, "place", prog);
  if ((st = tl_pass_pipeline_for(prog, be.smem_limit, &be.cg, err)) != TL_OK)
    goto done;
  dump(req, "pipeline", prog);
  if ((st = fit(prog, &be, req->target, err)) != TL_OK)
    goto done;
  tl_pass_range(prog);
  dump(req, "range", prog);
  if ((st = tl_pass_barrier(prog, err)) != TL_OK)
    goto done;
  dump(req, "barrier", prog);
  tl_pass_raster(prog);
  dump(req, "raster", prog);
  prog->max_registers = opt.max_registers;
  char *src = tl_emit(arena, prog, &be.cg, err);
  if (!src) {
    st = err ? err->code : TL_UNSUPPORTED;
    goto done;
  }
  if (!req->source_only) {
    st = be.amd ? build_amd(&be, prog, src, req->target, &bin, &bin_size, &log, &res, &binary, err)
                : build_nv(&be, prog, src, req->target, &opt, &bin, &bin_size, &log, &res, &binary, err);
    if (st != TL_OK)
      goto done;
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
