/*
 * check_target.c - does a placed program fit its target?  What a target
 * lacks is a diagnostic with a JSON Pointer into the program (the server
 * answers 422 with it), never a toolchain error.
 *
 * Needs:    a program after pass_place and pass_pipeline for the target
 *           (smem_bytes, each buffer's smem_offset and stages).
 * Produces: diagnostics, and *err with the first of them (its pointer).
 * Keeps:    the program as it is.
 *
 * What it checks (target.h's table):
 *   - thread-block clusters larger than 1 x 1 x 1 need TL_FEATURE(CLUSTERS)
 *     (sm_90 and later): TL_UNSUPPORTED at /kernel/cluster;
 *   - the dynamic shared memory of one block must fit smem_bytes:
 *     TL_LIMIT at the largest shared buffer, saying by how many bytes.
 * Everything else a program may ask for runs on every target: the passes
 * choose mma.sync, ldmatrix, cp.async and wgmma only where the target has
 * them (tl_codegen_of), and float16, bfloat16 and float8 values are
 * converted in software (prelude_cuda.h), so no target lacks a dtype.
 */
#include <stdio.h>
#include "pass.h"

/* The bytes a buffer takes in shared memory, or 0 when it lives elsewhere. */
static int64_t smem_of(const tl_sym *s) {
  if (s->kind != SYM_BUFFER || s->smem_offset < 0 || s->in_regs)
    return 0;
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++)
    n *= s->dims[d];
  return (int64_t)tl_dtype_bytes(s->dtype, (uint64_t)n) * (s->stages > 1 ? s->stages : 1);
}

tl_status tl_check_target(const tl_program *prog, const tl_target *t, tl_diags *diags, tl_error *err) {
  tl_status st = TL_OK;
  bool cluster = false; /* a cluster of 1 x 1 x 1 is no cluster */
  for (int i = 0; i < prog->ncluster; i++)
    cluster |= prog->cluster[i] > 1;
  if (cluster && !tl_target_has(t, TL_FEATURE(CLUSTERS))) {
    const char *msg = t->vendor == TL_VENDOR_AMD
                          ? "thread-block clusters are NVIDIA's (sm_90 or later); %s has none"
                          : "thread-block clusters need sm_90 or later, not %s";
    tl_diag_add(diags, tl_ptr_key(prog->arena, prog->kptr, "cluster"), 0, msg, t->name);
    st = tl_error_set_at(err, TL_UNSUPPORTED, tl_ptr_key(prog->arena, prog->kptr, "cluster"), 0, msg, t->name);
  }
  if (prog->smem_bytes > t->smem_bytes) {
    const tl_sym *big = NULL;
    for (int i = 0; i < prog->nbuffer_slots; i++)
      if (smem_of(prog->buffer_syms[i]) > (big ? smem_of(big) : 0))
        big = prog->buffer_syms[i];
    const char *ptr = big && big->pointer ? big->pointer : prog->kptr;
    char what[160] = "";
    if (big)
      snprintf(what, sizeof what, " ('%s' takes %lld of them)", big->name, (long long)smem_of(big));
    const char *fmt = "the kernel needs %lld bytes of shared memory per block%s and %s allows %lld: %lld bytes too "
                      "many (use smaller tiles, fewer stages, or a target with more shared memory)";
    long long need = prog->smem_bytes, lim = t->smem_bytes;
    tl_diag_add(diags, ptr, 0, fmt, need, what, t->name, lim, need - lim);
    if (st == TL_OK)
      st = tl_error_set_at(err, TL_LIMIT, ptr, 0, fmt, need, what, t->name, lim, need - lim);
  }
  return st;
}

/* ---- warnings --------------------------------------------------------------------------
 * A fragment of more than TL_MAX_REG_ELEMS elements a thread lives in
 * shared memory, and a gemm into such a C runs element by element: a
 * program one constant away from a fast one (block_N = 256 on 128 threads:
 * 256 float32 accumulators a thread) ran 400 times slower with nothing
 * said.  Results stay right, so it is a warning, with the threads that
 * would bring it into registers (pass_threads.c grows them itself where
 * the program allows; the warning then says why it did not). */
static tl_walk_act gemm_into(tl_stmt *s, void *user) {
  const tl_sym **c = user;
  if (s->kind == S_GEMM && s->C == *c && !s->use_mma && !s->use_amd_mma) {
    *c = NULL;
    return TL_WALK_STOP;
  }
  return TL_WALK_GO;
}

void tl_warn_target(tl_program *prog) {
  prog->warnings = (tl_diags){.arena = prog->arena};
  int64_t T = prog->threads[0] * prog->threads[1] * prog->threads[2];
  for (int i = 0; i < prog->nbuffer_slots; i++) {
    const tl_sym *s = prog->buffer_syms[i];
    if (s->kind != SYM_BUFFER || s->scope != SCOPE_FRAGMENT || s->in_regs || s->per_thread <= TL_MAX_REG_ELEMS)
      continue;
    int64_t n = s->per_thread * T, fit = (n + TL_MAX_REG_ELEMS - 1) / TL_MAX_REG_ELEMS;
    fit = (fit + 127) / 128 * 128; /* whole warpgroups */
    const tl_sym *c = s;
    tl_walk(&prog->body, &(tl_walker){.pre = gemm_into}, &c);
    tl_diag_add(&prog->warnings, s->pointer ? s->pointer : "", 0,
                "fragment '%s' takes %lld elements a thread (%lld threads), more than the %d a thread keeps in "
                "registers: it lives in shared memory%s; %lld threads or a smaller tile would keep it in registers%s%s%s",
                s->name, (long long)s->per_thread, (long long)T, TL_MAX_REG_ELEMS,
                c ? "" : " and its gemm runs element by element, off the matrix cores (hundreds of times slower)",
                (long long)(fit > 1024 ? 1024 : fit), prog->threads_why ? " (the compiler keeps the program's: " : "",
                prog->threads_why ? prog->threads_why : "", prog->threads_why ? ")" : "");
  }
}
