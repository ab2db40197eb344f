/*
 * verify.c - the verifier between passes: after each pass of tl_compile()
 * it checks what the pass promises, from the annotations on the IR alone,
 * and reports a broken promise as TL_INTERNAL naming the pass and the
 * statement's JSON Pointer (a compiler bug, never a fault of the program).
 * tl_compile() runs it when TL_VERIFY=1 is set in the environment or the
 * request asks (tl_compile_request.verify); `make test` sets TL_VERIFY=1
 * for the whole suite (tests/run.sh), so every program compiled in tests
 * is verified.
 *
 * One check per pass boundary (tl_verify's stage):
 *   place:    every buffer has a placement (shared memory offset, or
 *             registers), every register fragment a layout whose shape
 *             covers the buffer on the block's threads (the mma layouts'
 *             row tiles, plain or interleaved, by tl_mma_row_strides), every
 *             gemm one path (per-element, mma.sync, wgmma, MFMA/WMMA) that
 *             the target has and that its C's layout matches (wgmma's C:
 *             one warp column, row tiles interleaved), A in registers only
 *             where the gemm takes it from there, B never;
 *   pipeline: every cp.async copy goes from a tensor into shared memory on
 *             a target with cp.async; every prefetched copy sits in a
 *             software-pipelined loop, its buffer has the loop's
 *             pipe_stages (the stages the emitter rotates through), and
 *             nothing but the loop's later statements touches that buffer
 *             (so the iteration's wait covers every use); the loop issues
 *             its copies 1 to num_stages - 1 iterations ahead (pipe_ahead);
 *             a gemm leaving wgmma groups pending (wg_pending) is the only
 *             wgmma gemm at the top of a draining (wg_drain) loop, keeps C
 *             and reads prefetched (or rotating: 2 stages) A and B, and
 *             pipe_ahead + wg_pending <=
 *             pipe_stages - 1 (pass_pipeline.c's rule at async_gemm: the
 *             next prefetch overwrites no stage a pending group reads); the
 *             shared buffers, each with its stages (packed dtypes at
 *             tl_dtype_bytes), the mbarriers and the scratch lie inside the
 *             block's shared memory without overlapping;
 *   tma:      as after pipeline, and every bulk tensor copy (tma) is a
 *             prefetched copy on a target with TMA, through one of the
 *             program's tensor maps that maps its tensor (rank, boxes of 1
 *             to 256, the swizzle its buffer has: tma_dst buffers 1024-byte
 *             aligned), into whole-byte elements or, unswizzled, packed
 *             ones whose map counts bytes; a loop has mbarriers
 *             exactly when it has such copies, one per stage within the
 *             program's, shared with no other loop (a stage is refilled
 *             only after the barrier that starts the iteration, as for
 *             cp.async, so the barrier check below covers both);
 *   range:    every recorded range holds given its operands' recorded
 *             ranges (each node checked on its own), every no_wrap
 *             operation fits its type, and every tensor dimension marked
 *             inside (no bounds guard) is inside by those ranges;
 *   barrier:  every shared or global access that depends on an access by
 *             another thread (a read after a write, a write after a read or
 *             write) since the last barrier is separated from it by a
 *             barrier, or lies in the same parallel loop (the same
 *             thread's elements); no barrier sits under thread-dependent
 *             control or inside a parallel loop (a persistent kernel's
 *             next tile counts as following this one, with a barrier
 *             between only where tile_barrier says, shared memory alone;
 *             a copy the producer issues before its loop, wspec_pre, is
 *             no access: it synchronizes on its own mbarriers);
 *             fence_async is set exactly when a gemm runs on wgmma.
 *   wspec:    the shared buffers and mbarriers as after pipeline; at most
 *             one warp-specialized loop, a tma loop of the kernel's body all
 *             of whose prefetched copies are bulk tensor copies, with one
 *             "stage is free" mbarrier per stage apart from its full ones;
 *             the producer warpgroup exactly then, after a one-dimensional
 *             block of whole warpgroups; setmaxnreg counts that the
 *             instruction takes; pre copies (wspec_pre) only on the body's
 *             statements before that loop of a persistent kernel, their
 *             buffers in pre_stages (1 or 2) copies, their mbarriers within
 *             the program's and apart from the loop's, pre_last a statement
 *             of the body at or after them (verify_wspec);
 *   split:    regions only on statements of the kernel's top level, each
 *             region a run of consecutive statements numbered 1, 2, ...
 *             in order (its first statement listing the fragments it
 *             copies), as many as nregions, only in a kernel of at least
 *             its threshold of statements on a CUDA-dialect target; no
 *             region holds an alloc, alloc_var or view of the top level, a
 *             let with a barrier before it, a pipelined loop, a gemm on
 *             wgmma or a bulk tensor copy (verify_split);
 * check and raster promise nothing the verifier checks.
 *
 * The barrier check reuses pass_barrier.c's access model (which buffers a
 * statement reads and writes; register fragments and local arrays are the
 * thread's own; the scratch of a reduction through it counts as a buffer)
 * but not its code: it runs the program in execution order over two sets
 * of buffers indexed by slot, leaf by leaf, and runs a loop's body once,
 * from what is pending before the loop joined with what an iteration
 * leaves pending (the body's effect, computed apart), which checks every
 * iteration at once.  Each statement is run once and its effect computed
 * once per loop around it (at most TL_MAX_STMT_DEPTH): time linear in the
 * program's size times the buffers it has.
 *
 * Needs: the program as the stage left it.  Produces: nothing (a verdict).
 * Keeps: everything (it changes nothing).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"
#include "pass.h"

typedef struct {
  const tl_program *prog;
  const tl_codegen *cg;
  const char *stage;
  tl_error *err;
  bool failed;
  int pending, pending_ok;     /* gemms with wgmma groups left pending; those a loop's rule allows */
  const char *pending_at;      /* the first of them */
  char *mbar_used;             /* tma: which of the program's mbarriers a loop has taken */
} V;

/* Records the first failure, at statement pointer ptr. */
static tl_walk_act fail(V *v, const char *ptr, const char *fmt, const char *a, const char *b) {
  if (!v->failed) {
    v->failed = true;
    char msg[TL_ERROR_MESSAGE_MAX];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
    tl_error_set_at(v->err, TL_INTERNAL, ptr ? ptr : "", 0, "verifier: after %s: %s", v->stage, msg);
  }
  return TL_WALK_STOP;
}

static int64_t elements(const tl_sym *s) {
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++)
    n *= s->dims[d];
  return n;
}

static int64_t threads_of(const tl_program *p) { return p->threads[0] * p->threads[1] * p->threads[2]; }

static bool in_shared(const tl_sym *s) {
  return s->kind == SYM_BUFFER && (s->scope == SCOPE_SHARED || (s->scope == SCOPE_FRAGMENT && !s->in_regs));
}

/* ---- after place ------------------------------------------------------------------ */
/* Do the row tiles of mma-layout fragment s (tile i of warp row w at
 * tl_mma_row_strides' w * warp_stride + i * tile_stride, plain or
 * interleaved) fall on 0, 16, ..., 16 * (mma_wm * mma_mi - 1), each once?
 * Up to 4096 tiles (65536 rows, more than any block's registers hold);
 * more is refused. */
static bool row_tiles_cover(const tl_sym *s) {
  int64_t ws, ts, n = (int64_t)s->mma_wm * s->mma_mi;
  tl_mma_row_strides(s, &ws, &ts);
  if (ws < 16 || ts < 16 || ws % 16 || ts % 16 || n > 4096)
    return false;
  char seen[4096] = {0};
  for (int64_t w = 0; w < s->mma_wm; w++)
    for (int64_t i = 0; i < s->mma_mi; i++) {
      int64_t t = (w * ws + i * ts) / 16;
      if (t >= n || seen[t]++)
        return false;
    }
  return true;
}

/* Does register fragment s's layout cover its shape on the block's threads? */
static bool layout_covers(const tl_sym *s, int64_t threads) {
  int64_t wm = s->mma_wm, wn = s->mma_wn, mi = s->mma_mi, ni = s->mma_ni;
  bool grid = wm >= 1 && wn >= 1 && mi >= 1 && ni >= 1;
  bool mma = s->reg_layout == TL_LAYOUT_MMA || s->reg_layout == TL_LAYOUT_MMA_ROWS;
  if (s->mma_interleaved && !mma) /* only the mma layouts' row tiles interleave */
    return false;
  switch (s->reg_layout) {
  case TL_LAYOUT_BLOCKED:
    return s->per_thread >= 1 && s->per_thread * threads >= elements(s) && !s->packed;
  case TL_LAYOUT_MMA:
    return grid && s->ndim == 2 && s->dims[0] == wm * mi * 16 && s->dims[1] == wn * ni * 8 && wm * wn * 32 == threads &&
           s->per_thread == mi * ni * 4 && (!s->packed || tl_dtype_size(s->dtype) == 2) && row_tiles_cover(s);
  case TL_LAYOUT_MMA_ROWS:
    return grid && s->ndim == 1 && s->dims[0] == wm * mi * 16 && wm * 32 == threads && s->per_thread == 2 * mi &&
           !s->packed && row_tiles_cover(s);
  case TL_LAYOUT_MFMA:
  case TL_LAYOUT_WMMA:
  case TL_LAYOUT_WMMA_GFX12:
    return grid && s->ndim == 2 && s->dims[0] == wm * mi * 16 && s->dims[1] == wn * ni * 16 &&
           wm * wn * tl_amd_layout_wave(s->reg_layout) == threads &&
           s->per_thread == mi * ni * tl_amd_layout_items(s->reg_layout) && !s->packed;
  default:
    return false;
  }
}

static bool verify_buffers(V *v) {
  const tl_program *p = v->prog;
  for (int i = 0; i < p->nbuffer_slots; i++) {
    const tl_sym *s = p->buffer_syms[i];
    if (s->scope == SCOPE_LOCAL)
      continue;
    if (s->scope == SCOPE_FRAGMENT && s->in_regs) {
      if (!layout_covers(s, threads_of(p)))
        return fail(v, s->pointer, "register fragment '%s' has no layout that covers its shape on the block's threads",
                    s->name, NULL),
               false;
    } else if (s->smem_offset < 0) {
      return fail(v, s->pointer, "buffer '%s' has no placement (neither registers nor a shared memory offset)", s->name,
                  NULL),
             false;
    }
  }
  return true;
}

static tl_walk_act place_stmt(tl_stmt *s, void *user) {
  V *v = user;
  if (s->kind != S_GEMM)
    return TL_WALK_GO;
  const tl_sym *C = s->C;
  const tl_codegen *cg = v->cg;
  int paths = (s->use_mma && !s->use_wgmma) + s->use_wgmma + s->use_amd_mma;
  if (paths > 1 || (s->use_wgmma && !s->use_mma))
    return fail(v, s->pointer, "gemm has more than one path chosen", NULL, NULL);
  if ((s->use_mma && !cg->mma) || (s->use_wgmma && !cg->wgmma) || (s->use_amd_mma && !cg->amd_matrix))
    return fail(v, s->pointer, "gemm runs on matrix instructions the target does not have", NULL, NULL);
  if (s->use_mma && !(C->in_regs && C->reg_layout == TL_LAYOUT_MMA))
    return fail(v, s->pointer, "gemm on mma.sync/wgmma but its C '%s' is not in the mma accumulator layout", C->name,
                NULL);
  if (s->use_wgmma && (C->mma_wn != 1 || (C->mma_mi > 1 && !C->mma_interleaved)))
    return fail(v, s->pointer, "gemm on wgmma but its C '%s' is not in wgmma's accumulator layout (one warp column, "
                "the m64 instructions' row tiles interleaved)", C->name, NULL);
  if (s->use_amd_mma && !(C->in_regs && tl_amd_layout(C->reg_layout)))
    return fail(v, s->pointer, "gemm on MFMA/WMMA but its C '%s' is not in a matrix-core layout", C->name, NULL);
  if (s->B->in_regs)
    return fail(v, s->pointer, "gemm operand B '%s' is in registers", s->B->name, NULL);
  if (s->A->in_regs != s->a_regs || (s->a_regs && !(s->use_mma && s->A->reg_layout == TL_LAYOUT_MMA)))
    return fail(v, s->pointer, "gemm operand A '%s' is in registers but the gemm does not take it from there (or the "
                "reverse)", s->A->name, NULL);
  return TL_WALK_GO;
}

/* ---- after pipeline --------------------------------------------------------------- */
static tl_walk_act find_index(tl_expr *x, tl_stmt *s, void *b) {
  (void)s;
  return x->kind == E_INDEX && x->sym == b ? TL_WALK_STOP : TL_WALK_GO;
}

/* Does statement s itself (not its bodies) name buffer b? */
static bool names_buffer(const tl_stmt *s, const tl_sym *b) {
  if ((s->src && s->src->sym == b) || (s->dst && s->dst->sym == b) || s->A == b || s->B == b || s->C == b ||
      (s->lhs && s->lhs->sym == b))
    return true;
  tl_stmt *m = (tl_stmt *)s;
  tl_expr *roots[] = {m->lhs, m->value, m->start, m->extent, m->step};
  for (size_t i = 0; i < sizeof roots / sizeof *roots; i++)
    if (tl_walk_expr(roots[i], find_index, m, (void *)b) == TL_WALK_STOP)
      return true;
  for (int k = 0; k < 2; k++) {
    const tl_region *r = k ? s->dst : s->src;
    for (int d = 0; r && d < r->ndim; d++)
      if (tl_walk_expr(r->lo[d], find_index, m, (void *)b) == TL_WALK_STOP)
        return true;
  }
  return false;
}

/* A prefetched copy's buffer: who may touch it. */
typedef struct {
  V *v;
  const tl_stmt *loop, *copy;
  const tl_sym *buf;
  bool reads_ok; /* walking the loop's statements after the copy: they may read it */
} prefetched;

static tl_walk_act prefetch_use(tl_stmt *s, void *user) {
  prefetched *u = user;
  if (s == u->loop) { /* its statements: none before the copy touches the buffer, none after writes it */
    if (names_buffer(s, u->buf))
      return fail(u->v, s->pointer, "the control of the pipelined loop reads buffer '%s'", u->buf->name, NULL);
    static const tl_walker w = {.pre = prefetch_use};
    for (int i = 0; i < s->body.n && !u->v->failed; i++) {
      if (s->body.items[i] == u->copy) {
        u->reads_ok = true;
        continue;
      }
      tl_walk_stmt(s->body.items[i], &w, u);
    }
    u->reads_ok = false;
    return u->v->failed ? TL_WALK_STOP : TL_WALK_SKIP;
  }
  if (!names_buffer(s, u->buf))
    return TL_WALK_GO;
  if (!u->reads_ok)
    return fail(u->v, s->pointer, "buffer '%s' of a prefetched copy is used where the pipeline's wait does not cover "
                "it (outside its loop, or before the copy in the loop)", u->buf->name, NULL);
  if ((s->dst && s->dst->sym == u->buf) || (s->kind == S_GEMM && s->C == u->buf) || (s->lhs && s->lhs->sym == u->buf))
    return fail(u->v, s->pointer, "buffer '%s' of a prefetched copy is written by another statement", u->buf->name,
                NULL);
  return TL_WALK_GO;
}

/* Who touches the buffer of the prefetched copy at index `at` of loop? */
static void check_prefetch(V *v, const tl_stmt *loop, int at) {
  const tl_stmt *c = loop->body.items[at];
  prefetched u = {.v = v, .loop = loop, .copy = c, .buf = c->dst->sym};
  static const tl_walker w = {.pre = prefetch_use};
  tl_walk((tl_body *)&v->prog->body, &w, &u);
}

/* Does statement s or anything it holds name buffer b? */
static tl_walk_act names_pre(tl_stmt *s, void *b) { return names_buffer(s, b) ? TL_WALK_STOP : TL_WALK_GO; }

static bool touches(const tl_stmt *s, const tl_sym *b) {
  static const tl_walker w = {.pre = names_pre};
  return tl_walk_stmt((tl_stmt *)s, &w, (void *)b) == TL_WALK_STOP;
}

static tl_walk_act count_wgmma(tl_stmt *s, void *n) {
  *(int *)n += s->kind == S_GEMM && s->use_wgmma;
  return TL_WALK_GO;
}

/* Gemm g at the top of pipelined loop s leaves g->wg_pending wgmma groups
 * in flight across iterations: pass_pipeline.c's conditions (at
 * async_gemm: A and B prefetched or rotating, or A from registers, or for a wg_lag loop at lag_gemm: C cleared by the gemm, in
 * two register copies, read but not written by the statements after it;
 * its lag_load statements lets or copies into two register copies) for
 * that, and its rule pipe_ahead + wg_pending <=
 * pipe_stages - 1 (the stage the next prefetch overwrites is none that a
 * pending group still reads). */
static tl_walk_act writes_c_pre(tl_stmt *s, void *c) {
  return (s->dst && s->dst->sym == c) || (s->kind == S_GEMM && s->C == c) || (s->lhs && s->lhs->sym == c)
             ? TL_WALK_STOP
             : TL_WALK_GO;
}

/* Does statement s (or anything in it) write buffer c? */
static bool writes_c(const tl_stmt *s, const tl_sym *c) {
  static const tl_walker w = {.pre = writes_c_pre};
  return tl_walk_stmt((tl_stmt *)s, &w, (void *)c) == TL_WALK_STOP;
}

static void check_pending(V *v, const tl_stmt *s, const tl_stmt *g) {
  static const tl_walker w = {.pre = count_wgmma};
  int n = 0;
  tl_walk((tl_body *)&s->body, &w, &n);
  bool a = (g->A->rotates && g->A->stages == 2) || g->a_regs, b = g->B->rotates && g->B->stages == 2;
  int gi = 0;
  while (s->body.items[gi] != g)
    gi++;
  for (int i = 0; i < s->body.n; i++) {
    const tl_stmt *c = s->body.items[i];
    a |= c->prefetch && c->dst->sym == g->A;
    b |= c->prefetch && c->dst->sym == g->B;
    if (c != g && touches(c, g->C) && !(s->wg_lag && i > gi && !writes_c(c, g->C))) {
      fail(v, c->pointer, "C '%s' of a gemm with wgmma groups pending across iterations is touched by another "
           "statement of the loop", g->C->name, NULL);
      return;
    }
  }
  for (int i = 0; i < s->body.n; i++) {
    const tl_stmt *c = s->body.items[i];
    if (c->lag_load && (!s->wg_lag || c == g || c->prefetch ||
                        (c->kind != S_LET && (c->kind != S_COPY || c->dst->sym->stages != 2)))) {
      fail(v, c->pointer, "a load issued an iteration early for a late tail is not a let or a copy into two "
           "register copies in a loop whose tail runs late%s", "", NULL);
      return;
    }
  }
  if (!s->pipe || !s->wg_drain || !g->use_wgmma || n != 1 || g->clear_accum != (s->wg_lag > 0) || !a || !b ||
      s->wg_lag % 2 || (s->wg_lag && g->C->stages != 2)) {
    fail(v, g->pointer, "gemm leaves wgmma groups pending across iterations but is not the only wgmma gemm of a "
         "draining pipelined loop, with A and B prefetched or rotating and C kept", NULL, NULL);
    return;
  }
  if (s->pipe_ahead + g->wg_pending > s->pipe_stages - 1) {
    char why[96];
    snprintf(why, sizeof why, "%lld ahead + %d pending > %lld stages - 1", (long long)s->pipe_ahead, g->wg_pending,
             (long long)s->pipe_stages);
    fail(v, s->pointer, "the loop's prefetch overwrites a stage that a pending wgmma group reads (%s)", why, NULL);
    return;
  }
  v->pending_ok++;
}

/* Bulk tensor copy c of pipelined loop s: its tensor map is one of the
 * program's and maps c's tensor with boxes a tensor map allows, on a target
 * with TMA, into a buffer of whole-byte elements or, unswizzled, of packed
 * ones whose map moves bytes (pass_tma.c). */
static void check_tma_copy(V *v, const tl_stmt *s, const tl_stmt *c) {
  const tl_program *p = v->prog;
  const tl_tmap *m = c->tma_map >= 0 && c->tma_map < p->ntmaps ? &p->tmaps[c->tma_map] : NULL;
  if (!v->cg->tma || !s->tma || !m || p->ntmaps > TL_MAX_TMAPS) {
    fail(v, c->pointer, "bulk tensor copy without a tensor map of the program, in a loop without mbarriers or on a "
         "target without TMA", NULL, NULL);
    return;
  }
  bool ok = m->tensor == c->src->sym && m->rank == c->src->sym->ndim && m->rank <= TL_TMAP_RANK_MAX &&
            (tl_dtype_is_packed(c->dst->sym->dtype) ? m->packed == 8 / tl_dtype_bits(c->dst->sym->dtype) && !m->swizzle
                                                     : m->packed <= 1) &&
            (m->swizzle != 0) == c->dst->sym->tma_dst;
  for (int d = 0; d < m->rank && ok; d++)
    ok = m->box[d] >= 1 && m->box[d] <= 256;
  if (!ok)
    fail(v, c->pointer, "bulk tensor copy whose tensor map is not its tensor's (rank, boxes of 1 to 256, swizzle, "
         "packing) into buffer '%s'", c->dst->sym->name, NULL);
}

/* The mbarriers of tma loop s: one per stage, within the program's, taken
 * by no other loop. */
static void check_mbarriers(V *v, const tl_stmt *s) {
  const tl_program *p = v->prog;
  if (s->mbar < 0 || s->mbar + s->pipe_stages > p->nmbar) {
    fail(v, s->pointer, "the loop's mbarriers (one per stage) are not within the program's %s", "", NULL);
    return;
  }
  if (!v->mbar_used)
    v->mbar_used = tl_arena_alloc(p->arena, (size_t)p->nmbar);
  for (int64_t i = s->mbar; i < s->mbar + s->pipe_stages; i++)
    if (v->mbar_used[i]++) {
      fail(v, s->pointer, "the loop's mbarriers are another loop's too%s", "", NULL);
      return;
    }
}

/* Loop s issues its gemm ov_gemm one iteration late (pass_overlap.c): that
 * gemm is on wgmma at the top of the body, after the one gemm whose
 * ov_gemm it is, no gemm leaves groups pending across iterations, the
 * statement it is waited for before is in the body, and the prefetch
 * overwrites no stage it reads (pipe_ahead <= pipe_stages - 2 when it
 * reads a prefetched buffer). */
static void check_late(V *v, const tl_stmt *s) {
  const tl_stmt *g = s->ov_gemm;
  int h = -1, at = -1, heads = 0;
  bool staged = false, wait_in = s->ov_wait == NULL;
  for (int i = 0; i < s->body.n; i++) {
    const tl_stmt *c = s->body.items[i];
    if (c == g)
      at = i;
    if (c->kind == S_GEMM && c->ov_gemm == g) {
      heads++;
      h = i;
    }
    wait_in |= c == s->ov_wait;
    staged |= c->prefetch && (c->dst->sym == g->A || c->dst->sym == g->B);
  }
  if (at < 0 || h < 0 || h > at || heads != 1 || !g->ov_late || !g->use_wgmma || g->wg_pending || s->wg_drain ||
      !s->body.items[h]->use_wgmma || s->body.items[h]->wg_pending || !wait_in)
    fail(v, g->pointer, "gemm issued one iteration late but not a gemm on wgmma at the top of its loop after the one "
         "gemm that issues it, with no groups pending across iterations and its wait in the body", NULL, NULL);
  else if (staged && s->pipe_ahead > s->pipe_stages - 2)
    fail(v, s->pointer, "the loop's prefetch overwrites the stage its late gemm reads (pipe_ahead > pipe_stages - 2)",
         NULL, NULL);
}

static tl_walk_act pipeline_stmt(tl_stmt *s, void *user) {
  V *v = user;
  if (s->async_copy &&
      (s->kind != S_COPY || !v->cg->async_copy || s->src->sym->kind != SYM_TENSOR || !in_shared(s->dst->sym) ||
       s->src->sym->dtype != s->dst->sym->dtype))
    return fail(v, s->pointer, "cp.async copy that is not tensor -> shared memory of one dtype on a target with cp.async",
                NULL, NULL);
  if (s->prefetch && !s->async_copy)
    return fail(v, s->pointer, "prefetched copy that is not a cp.async copy", NULL, NULL);
  if (s->kind == S_COPY && s->tma && !s->prefetch)
    return fail(v, s->pointer, "bulk tensor copy that its pipelined loop does not prefetch", NULL, NULL);
  if (s->reg_prefetch && (s->kind != S_COPY || s->async_copy || s->prefetch || s->dst->sym->kind != SYM_BUFFER ||
                          !s->dst->sym->rotates || s->dst->sym->stages != 2))
    return fail(v, s->pointer, "copy prefetched through registers that is also a cp.async copy, or whose buffer does "
                "not rotate through two copies", NULL, NULL);
  if (s->kind == S_GEMM && s->wg_pending) {
    if (s->wg_pending < 0)
      return fail(v, s->pointer, "gemm with a negative count of pending wgmma groups", NULL, NULL);
    if (!v->pending++)
      v->pending_at = s->pointer;
  }
  if (s->kind != S_LOOP) {
    for (int i = 0; i < s->body.n; i++)
      if (s->body.items[i]->prefetch || s->body.items[i]->reg_prefetch)
        return fail(v, s->body.items[i]->pointer, "prefetched copy outside a software-pipelined loop", NULL, NULL);
    return TL_WALK_GO;
  }
  int nprefetch = 0, ntma = 0;
  const tl_stmt *g = NULL;
  for (int i = 0; i < s->body.n && !v->failed; i++) {
    const tl_stmt *c = s->body.items[i];
    if (c->kind == S_GEMM && c->wg_pending > 0)
      g = c;
    if (!c->prefetch)
      continue;
    if (!s->pipe)
      return fail(v, c->pointer, "prefetched copy in a loop that is not software pipelined", NULL, NULL);
    if (c->dst->sym->stages < 2 || c->dst->sym->stages != s->pipe_stages)
      return fail(v, c->pointer, "buffer '%s' of a prefetched copy has not the stages its loop rotates through "
                  "(pipe_stages)", c->dst->sym->name, NULL);
    nprefetch++;
    if (c->tma) {
      ntma++;
      check_tma_copy(v, s, c);
    }
    if (!v->failed)
      check_prefetch(v, s, i);
  }
  if (v->failed)
    return TL_WALK_STOP;
  if (s->pipe && (!nprefetch || s->loop_kind != LOOP_PIPELINED || s->step->kind != E_CONST || s->step->val.i != 1 ||
                  s->pipe_ahead < 1 || s->pipe_ahead > s->num_stages - 1))
    return fail(v, s->pointer, "software-pipelined loop without prefetched copies, not pipelined, with a step other "
                "than 1 or with its copies not 1 to num_stages - 1 iterations ahead", NULL, NULL);
  if (s->wg_drain && !g)
    return fail(v, s->pointer, "the loop drains wgmma groups that no gemm of it leaves pending", NULL, NULL);
  if (s->tma != (ntma > 0))
    return fail(v, s->pointer, "the loop's mbarriers do not match its bulk tensor copies (tma on the loop and on "
                "none of its copies, or the reverse)%s", "", NULL);
  if (g)
    check_pending(v, s, g);
  if (s->ov_gemm && !v->failed)
    check_late(v, s);
  if (s->tma && !v->failed)
    check_mbarriers(v, s);
  return v->failed ? TL_WALK_STOP : TL_WALK_GO;
}

/* After the walk: every gemm with wgmma groups pending was one a loop's
 * rule allows. */
static void verify_pending(V *v) {
  if (!v->failed && v->pending != v->pending_ok)
    fail(v, v->pending_at, "gemm leaves wgmma groups pending outside the top of a software-pipelined loop%s", "",
         NULL);
}

static int by_offset(const void *a, const void *b) {
  int64_t x = (*(const tl_sym *const *)a)->smem_offset, y = (*(const tl_sym *const *)b)->smem_offset;
  return x < y ? -1 : x > y;
}

/* A shared buffer's bytes: packed dtypes (int4, ...) take tl_dtype_bytes. */
static int64_t smem_size(const tl_sym *s) {
  return (int64_t)tl_dtype_bytes(s->dtype, (uint64_t)elements(s)) * (s->stages > 1 ? s->stages : 1);
}

/* The shared buffers with their stages, then the mbarriers (8 bytes each),
 * then the scratch, without overlap. */
static bool verify_smem(V *v) {
  const tl_program *p = v->prog;
  const tl_sym **b = tl_arena_alloc(p->arena, sizeof *b * (size_t)(p->nbuffer_slots + 1));
  int n = 0;
  for (int i = 0; i < p->nbuffer_slots; i++) {
    const tl_sym *s = p->buffer_syms[i];
    if (in_shared(s) && s->view_of && (s->smem_offset != s->view_of->smem_offset || smem_size(s) != smem_size(s->view_of)))
      return fail(v, s->pointer, "the view '%s' is not at the bytes of '%s'", s->name, s->view_of->name), false;
    if (in_shared(s) && !s->view_of) /* a view is at its buffer's bytes */
      b[n++] = s;
  }
  qsort(b, (size_t)n, sizeof *b, by_offset);
  int64_t end = 0;
  for (int i = 0; i < n; i++) {
    int64_t al = b[i]->wgmma_op || b[i]->tma_dst ? 1024 : 16; /* the 128-byte swizzle's atoms */
    if (b[i]->smem_offset < end || b[i]->smem_offset % al)
      return fail(v, b[i]->pointer, "shared buffer '%s' overlaps the one before it or is misaligned", b[i]->name, NULL),
             false;
    end = b[i]->smem_offset + smem_size(b[i]);
  }
  if (p->nmbar < 0 || p->mbar_offset < end || p->mbar_offset % 8 || p->scratch_offset < p->mbar_offset + 8 * p->nmbar ||
      p->scratch_bytes < 0 || p->scratch_offset + p->scratch_bytes > p->smem_bytes)
    return fail(v, "", "the shared buffers with their stages, the mbarriers and the scratch do not fit the block's %s "
                "bytes", "dynamic shared memory", NULL),
           false;
  return true;
}

/* ---- after range ------------------------------------------------------------------ */
static bool is_float(tl_type t) {
  return t == TL_TY_UREAL || (t >= 0 && t < TL_DTYPE_COUNT && tl_dtype_is_float((tl_dtype)t));
}

/* Does integer dtype t hold every value of [lo, hi] (so a cast keeps them)? */
static bool dtype_holds(tl_dtype t, int64_t lo, int64_t hi) {
  static const struct {
    tl_dtype t;
    int64_t lo, hi;
  } ints[] = {{TL_INT8, INT8_MIN, INT8_MAX},    {TL_INT16, INT16_MIN, INT16_MAX}, {TL_INT32, INT32_MIN, INT32_MAX},
              {TL_INT64, INT64_MIN, INT64_MAX}, {TL_UINT8, 0, UINT8_MAX},         {TL_UINT16, 0, UINT16_MAX},
              {TL_UINT32, 0, UINT32_MAX},       {TL_UINT64, 0, INT64_MAX}};
  for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
    if (ints[i].t == t)
      return ints[i].lo <= lo && hi <= ints[i].hi;
  return false;
}

/* Does [lo, hi] hold [a, b]? */
static bool holds(const tl_expr *x, __int128 a, __int128 b) { return x->rlo <= a && b <= x->rhi; }

static __int128 min4(__int128 a, __int128 b, __int128 c, __int128 d) {
  __int128 m = a < b ? a : b, n = c < d ? c : d;
  return m < n ? m : n;
}
static __int128 max4(__int128 a, __int128 b, __int128 c, __int128 d) {
  __int128 m = a > b ? a : b, n = c > d ? c : d;
  return m > n ? m : n;
}

/* Floor division of a by c > 0. */
static __int128 fdiv(__int128 a, __int128 c) { return a >= 0 ? a / c : -((-a + c - 1) / c); }

/* Is x's recorded range true whenever its operands' recorded ranges are? */
static bool range_sound(const tl_expr *x) {
  const tl_expr *l = x->nargs > 0 ? x->args[0] : NULL, *r = x->nargs > 1 ? x->args[1] : NULL;
  if (x->rlo > x->rhi)
    return false;
  switch (x->kind) {
  case E_CONST:
    return !is_float(x->type) && holds(x, x->val.i, x->val.i);
  case E_NAME:
    return x->sym->has_range && holds(x, x->sym->rlo, x->sym->rhi);
  case E_UNARY:
    return x->op == '-' && l->has_range && holds(x, -(__int128)l->rhi, -(__int128)l->rlo);
  case E_CALL:
    if ((x->fn == FN_MIN || x->fn == FN_MAX) && l->has_range && r->has_range)
      return holds(x, x->fn == FN_MIN ? (l->rlo < r->rlo ? l->rlo : r->rlo) : (l->rlo > r->rlo ? l->rlo : r->rlo),
                   x->fn == FN_MIN ? (l->rhi < r->rhi ? l->rhi : r->rhi) : (l->rhi > r->rhi ? l->rhi : r->rhi));
    if (x->fn == FN_CEILDIV && l->has_range && r->has_range)
      return r->rlo == r->rhi && r->rlo > 0 && holds(x, -fdiv(-(__int128)l->rlo, r->rlo), -fdiv(-(__int128)l->rhi, r->rlo));
    if (x->fn == FN_IF_THEN_ELSE && r->has_range && x->args[2]->has_range)
      return !is_float(x->type) && holds(x, r->rlo, r->rhi) && holds(x, x->args[2]->rlo, x->args[2]->rhi);
    return x->fn == FN_CAST && l->has_range && !is_float(l->type) && dtype_holds(x->dtype_arg, l->rlo, l->rhi) &&
           holds(x, l->rlo, l->rhi);
  case E_BINARY: {
    if (!l->has_range || !r->has_range)
      return false;
    __int128 a = l->rlo, b = l->rhi, c = r->rlo, d = r->rhi;
    switch (x->op) {
    case '+': return holds(x, a + c, b + d);
    case '-': return holds(x, a - d, b - c);
    case '*': return holds(x, min4(a * c, a * d, b * c, b * d), max4(a * c, a * d, b * c, b * d));
    case OP_FLOORDIV: return c == d && c > 0 && holds(x, fdiv(a, c), fdiv(b, c));
    case '%': return c == d && c > 0 && holds(x, 0, c - 1);
    default: return false;
    }
  }
  default:
    return false;
  }
}

static tl_walk_act range_node(tl_expr *x, tl_stmt *s, void *user) {
  V *v = user;
  const char *ptr = s ? s->pointer : x->pointer;
  if (x->has_range && !range_sound(x))
    return fail(v, ptr, "the recorded range of '%s' does not follow from its operands' ranges",
                tl_expr_str(v->prog->arena, x), NULL);
  bool fits = x->has_range && (x->type == TL_INT64 || x->type == TL_TY_UINT ||
                               (x->type == TL_INT32 && x->rlo >= INT32_MIN && x->rhi <= INT32_MAX));
  if (x->no_wrap && (!fits || x->kind != E_BINARY))
    return fail(v, ptr, "'%s' is printed as plain arithmetic but is not proven to fit its type",
                tl_expr_str(v->prog->arena, x), NULL);
  for (int d = 0; d < TL_MAX_DIMS; d++) { /* every index without a guard is inside by the recorded ranges */
    if (!(x->inside >> d & 1))
      continue;
    const tl_expr *a = d < x->nargs ? x->args[d] : NULL;
    if (x->kind != E_INDEX || x->sym->kind != SYM_TENSOR || !a || x->sym->dims[d] < 0 || !a->has_range ||
        a->rlo < 0 || a->rhi >= x->sym->dims[d])
      return fail(v, ptr, "element '%s' is marked inside its tensor without a bounds guard, but its ranges do not "
                  "prove it", tl_expr_str(v->prog->arena, x), NULL);
  }
  return TL_WALK_GO;
}

/* Does the recorded range of symbol s hold [a, b]? */
static bool sym_holds(const tl_sym *s, __int128 a, __int128 b) { return s->has_range && s->rlo <= a && b <= s->rhi; }

static tl_walk_act range_stmt(tl_stmt *s, void *user) {
  V *v = user;
  const tl_program *p = v->prog;
  bool ok = true;
  if (s->kind == S_LET && s->sym->has_range) {
    const tl_expr *x = s->value;
    if (x->kind == E_CALL && x->fn == FN_THREAD_BINDING)
      ok = sym_holds(s->sym, 0, p->threads[x->args[0]->val.i] - 1);
    else
      ok = x->has_range && sym_holds(s->sym, x->rlo, x->rhi);
  } else if (s->kind == S_PARALLEL) {
    for (int i = 0; i < s->nvars && ok; i++)
      ok = !s->vars[i]->has_range || sym_holds(s->vars[i], 0, s->extents[i]->val.i - 1);
  } else if (s->kind == S_LOOP && s->var->has_range) {
    const tl_expr *st = s->start, *ex = s->extent, *sp = s->step;
    ok = st->has_range && ex->has_range && sp->has_range && sp->rlo == sp->rhi;
    if (ok) { /* every value start + k * step, 0 <= k < extent */
      __int128 last = (__int128)(ex->rhi > 0 ? ex->rhi - 1 : 0) * sp->rlo;
      ok = sym_holds(s->var, st->rlo + (last < 0 ? last : 0), st->rhi + (last > 0 ? last : 0));
    }
  }
  if (!ok)
    return fail(v, s->pointer, "the recorded range of the variable this statement binds is not proven", NULL, NULL);
  for (int k = 0; k < 2; k++) { /* every dimension without a guard is inside by the recorded ranges */
    const tl_region *r = k ? s->dst : s->src;
    for (int d = 0; r && d < r->ndim; d++) {
      if (!r->inside[d])
        continue;
      const tl_expr *lo = r->lo[d];
      if (r->sym->kind != SYM_TENSOR || r->sym->dims[d] < 0 || (lo && !lo->has_range) || (lo ? lo->rlo : 0) < 0 ||
          (__int128)(lo ? lo->rhi : 0) + r->ext[d] > r->sym->dims[d])
        return fail(v, s->pointer, "region '%s' is marked inside its tensor without a bounds guard, but its ranges "
                    "do not prove it", r->text ? r->text : r->sym->name, NULL);
    }
  }
  return TL_WALK_GO;
}

static bool verify_block_ranges(V *v) {
  const tl_program *p = v->prog;
  for (int i = 0; i < p->ngrid; i++) {
    const tl_sym *b = p->block_vars[i];
    if (!b || !b->has_range)
      continue;
    const tl_expr *g = p->grid[i];
    int64_t cap = i == 0 ? INT32_MAX - 1 : 65534; /* CUDA's grid limits */
    int64_t hi = g->kind == E_CONST && g->val.i - 1 < cap ? g->val.i - 1 : cap;
    if (!sym_holds(b, 0, hi))
      return fail(v, b->pointer, "the recorded range of block variable '%s' does not hold its grid", b->name, NULL),
             false;
  }
  for (int i = 0; i < p->nparams; i++)
    for (int d = 0; p->params[i]->kind == SYM_TENSOR && d < p->params[i]->ndim; d++)
      if (tl_walk_expr(p->params[i]->shape[d], range_node, NULL, v) == TL_WALK_STOP)
        return false;
  return true;
}

/* ---- after barrier ---------------------------------------------------------------- */
/* Buffers by index: buffer slots, then tensor parameters, then the scratch. */
typedef struct {
  bool *r, *w;
} touched;

typedef struct {
  V *v;
  int n;            /* indices */
  touched pend;     /* accessed since the last barrier */
} Bv;

static int index_of(const Bv *b, const tl_sym *s) {
  const tl_program *p = b->v->prog;
  if (!s)
    return -1;
  s = tl_mem_root(s); /* a view is its buffer's memory */
  if (s->kind == SYM_TENSOR)
    return p->nbuffer_slots + s->param_index;
  if (s->kind == SYM_BUFFER && in_shared(s))
    return s->slot;
  return -1; /* registers, local arrays: the thread's own */
}

static touched fresh(const Bv *b) {
  tl_arena *a = b->v->prog->arena;
  return (touched){tl_arena_alloc(a, (size_t)b->n), tl_arena_alloc(a, (size_t)b->n)};
}

static touched copy_of(const Bv *b, touched t) {
  touched c = fresh(b);
  memcpy(c.r, t.r, (size_t)b->n);
  memcpy(c.w, t.w, (size_t)b->n);
  return c;
}

/* into |= t; returns whether into grew. */
static bool join(const Bv *b, touched into, touched t) {
  bool grew = false;
  for (int i = 0; i < b->n; i++) {
    grew |= (t.r[i] && !into.r[i]) || (t.w[i] && !into.w[i]);
    into.r[i] |= t.r[i];
    into.w[i] |= t.w[i];
  }
  return grew;
}

static void clear(const Bv *b, touched t) {
  memset(t.r, 0, (size_t)b->n);
  memset(t.w, 0, (size_t)b->n);
}

/* The first buffer of t that conflicts with what pend holds, or -1. */
static int conflict(const Bv *b, touched pend, touched t) {
  for (int i = 0; i < b->n; i++)
    if ((t.r[i] && pend.w[i]) || (t.w[i] && (pend.w[i] || pend.r[i])))
      return i;
  return -1;
}

static const char *name_of(const Bv *b, int i) {
  const tl_program *p = b->v->prog;
  if (i < p->nbuffer_slots)
    return p->buffer_syms[i]->name;
  if (i < p->nbuffer_slots + p->nparams)
    return p->params[i - p->nbuffer_slots]->name;
  return "(scratch)";
}

typedef struct {
  Bv *b;
  touched t;
} gather;

static void mark(gather *g, const tl_sym *s, bool write) {
  int i = index_of(g->b, s);
  if (i >= 0)
    (write ? g->t.w : g->t.r)[i] = true;
}

static tl_walk_act gather_expr(tl_expr *x, tl_stmt *s, void *user) {
  (void)s;
  if (x->kind == E_INDEX)
    mark(user, x->sym, false);
  return TL_WALK_GO;
}

/* What statement s reads and writes itself (its expressions included). */
static tl_walk_act gather_stmt(tl_stmt *s, void *user) {
  gather *g = user;
  switch (s->kind) {
  case S_COPY:
  case S_ATOMIC_ADD:
  case S_FILL:
    if (s->src)
      mark(g, s->src->sym, false);
    mark(g, s->dst->sym, true);
    break;
  case S_GEMM:
    mark(g, s->A, false);
    mark(g, s->B, false);
    mark(g, s->C, false);
    mark(g, s->C, true);
    break;
  case S_REDUCE:
  case S_CUMSUM:
    mark(g, s->src->sym, false);
    mark(g, s->dst->sym, false);
    mark(g, s->dst->sym, true);
    if (s->src->sym->in_regs && !tl_reduce_in_quads(s)) /* exchanges through the scratch */
      g->t.r[g->b->n - 1] = g->t.w[g->b->n - 1] = true;
    break;
  case S_CLUSTER_REDUCE: /* its fragment, through the scratch when in registers (emit_cuda.c) */
    mark(g, s->dst->sym, false);
    mark(g, s->dst->sym, true);
    if (s->dst->sym->in_regs)
      g->t.r[g->b->n - 1] = g->t.w[g->b->n - 1] = true;
    break;
  case S_ATOMIC:
    mark(g, s->lhs->sym, false);
    /* fall through */
  case S_ASSIGN:
    if (s->lhs->kind == E_INDEX)
      mark(g, s->lhs->sym, true);
    break;
  default:
    break;
  }
  return TL_WALK_GO;
}

/* Everything s and what it holds access. */
static touched accesses(Bv *b, tl_stmt *s) {
  gather g = {b, fresh(b)};
  static const tl_walker w = {.pre = gather_stmt, .expr = gather_expr};
  tl_walk_stmt(s, &w, &g);
  return g.t;
}

/* Does x depend on the thread (a thread index, a per-thread variable or a
 * local array)? */
static tl_walk_act thread_dep(tl_expr *x, tl_stmt *s, void *user) {
  (void)s;
  (void)user;
  if (x->kind == E_CALL && x->fn == FN_THREAD_BINDING)
    return TL_WALK_STOP;
  const tl_sym *y = x->kind == E_NAME || x->kind == E_INDEX ? x->sym : NULL;
  return y && (y->varying || y->kind == SYM_VAR || (y->kind == SYM_BUFFER && y->scope == SCOPE_LOCAL)) ? TL_WALK_STOP
                                                                                                    : TL_WALK_GO;
}

static bool uniform_control(const tl_stmt *s) {
  tl_stmt *m = (tl_stmt *)s;
  tl_expr *c[] = {m->value, m->start, m->extent, m->step};
  for (size_t i = 0; i < sizeof c / sizeof *c; i++)
    if (tl_walk_expr(c[i], thread_dep, m, NULL) == TL_WALK_STOP)
      return false;
  return true;
}

/* No barrier inside s (tl_walker.pre over what a parallel loop or
 * thread-dependent control holds). */
static tl_walk_act no_barrier(tl_stmt *s, void *user) {
  if (s->barrier_before || s->barrier_end || s->pipe || s->kind == S_SYNC_THREADS)
    return fail(user, s->pointer, "a barrier inside a parallel loop or under thread-dependent control", NULL, NULL);
  return TL_WALK_GO;
}

static void run_body(Bv *b, const tl_body *body);

/* What the control of s (an if's condition, a loop's bounds) reads. */
static touched control(Bv *b, tl_stmt *s) {
  gather g = {b, fresh(b)};
  tl_expr *c[] = {s->value, s->start, s->extent, s->step};
  for (size_t i = 0; i < sizeof c / sizeof *c; i++)
    tl_walk_expr(c[i], gather_expr, s, &g);
  return g.t;
}

/* What running statements does to the pending sets, whatever they were:
 * pending after = (passes ? pending before : nothing) + adds.  Every
 * statement's effect has this form (an access adds, a barrier clears, an
 * if joins its branches, a loop joins its iterations), and so has a
 * sequence's. */
typedef struct {
  bool passes;
  touched adds;
} effect;

static effect stmt_effect(Bv *b, tl_stmt *s);

/* A warp-specialized loop's body as the program's threads run it: without
 * the producer's copies (they wait and are waited for on mbarriers). */
static tl_body consumer_body(Bv *b, const tl_stmt *s) {
  tl_body rest = {.items = tl_arena_alloc(b->v->prog->arena, sizeof(tl_stmt *) * (size_t)(s->body.n + 1))};
  for (int i = 0; i < s->body.n; i++)
    if (!s->body.items[i]->prefetch && !s->body.items[i]->reg_prefetch)
      rest.items[rest.n++] = s->body.items[i];
  return rest;
}

/* Does wspec loop s hold copies prefetched through registers (iteration 0's
 * before the loop, then a barrier: emit_cuda.c's emit_tl_wspec_loop)?
 * Iteration c stores c + 1's into the buffer's other copy as it ends, which
 * no access of c touches (pass_pipeline.c: the copy is its buffer's only
 * writer and a rotating one) and which c - 1 last read before the barrier
 * that closes it: run_stmt checks that barrier_end is set. */
static bool wspec_reg_prefetch(const tl_stmt *s) {
  for (int i = 0; s->wspec && i < s->body.n; i++)
    if (s->body.items[i]->reg_prefetch)
      return true;
  return false;
}

/* a, then c. */
static effect then(Bv *b, effect a, effect c) {
  effect r = {a.passes && c.passes, c.passes ? a.adds : fresh(b)};
  join(b, r.adds, c.adds);
  return r;
}

static effect body_effect(Bv *b, const tl_body *body) {
  effect e = {true, fresh(b)};
  for (int i = 0; i < body->n; i++)
    e = then(b, e, stmt_effect(b, body->items[i]));
  return e;
}

static effect stmt_effect(Bv *b, tl_stmt *s) {
  effect e = {true, fresh(b)}, cleared = {false, fresh(b)};
  if (s->wspec_pre) /* the producer's copy: on mbarriers with its readers (pass_wspec.c) */
    return e;
  switch (s->kind) {
  case S_SYNC_THREADS:
  case S_CLUSTER_REDUCE: /* ends with a barrier of the whole cluster; only ever at the kernel's top level */
    e = cleared;
    break;
  case S_ALLOC:
  case S_VIEW:
  case S_ANNOTATE_LAYOUT:
  case S_USE_SWIZZLE:
    break;
  case S_IF:
    if (s->value->kind == E_CONST) {
      bool take = is_float(s->value->type) ? s->value->val.f != 0 : s->value->val.i != 0;
      e = body_effect(b, take ? &s->body : &s->else_body);
    } else if (uniform_control(s)) {
      effect t = body_effect(b, &s->body), f = body_effect(b, &s->else_body);
      effect branches = {t.passes || f.passes, t.adds};
      join(b, branches.adds, f.adds);
      e = then(b, (effect){true, control(b, s)}, branches);
    } else {
      e.adds = accesses(b, s);
    }
    break;
  case S_LOOP:
    if (!uniform_control(s)) {
      e.adds = accesses(b, s);
    } else if (s->pipe && !s->wspec) { /* a barrier after the loop */
      e = cleared;
    } else { /* zero or more iterations, each ending with what the body leaves (or a barrier) */
      e.adds = control(b, s);
      tl_body body = s->wspec ? consumer_body(b, s) : s->body;
      if (!s->barrier_end)
        join(b, e.adds, body_effect(b, &body).adds);
      if (wspec_reg_prefetch(s))
        e = then(b, cleared, e);
    }
    break;
  default:
    e.adds = accesses(b, s);
    break;
  }
  return s->barrier_before ? then(b, cleared, e) : e;
}

/* Checks access t of statement s against what is pending, then adds it. */
static void access_now(Bv *b, const tl_stmt *s, touched t) {
  int i = conflict(b, b->pend, t);
  if (i >= 0) {
    fail(b->v, s->pointer, "'%s' is accessed here after another thread's access since the last barrier, with no "
         "barrier between%s", name_of(b, i), "");
    return;
  }
  join(b, b->pend, t);
}

/* A unit that runs as a whole: a parallel loop (each thread its own
 * elements) or thread-dependent control (no barrier possible): its
 * statements in order must not depend on each other's threads, and it holds
 * no barrier. */
static void run_unit(Bv *b, tl_stmt *s) {
  V *v = b->v;
  static const tl_walker nb = {.pre = no_barrier};
  if (s->barrier_end || s->pipe) {
    fail(v, s->pointer, "a barrier under thread-dependent control", NULL, NULL);
    return;
  }
  if (s->kind == S_PARALLEL) {
    for (int i = 0; i < s->body.n; i++)
      tl_walk_stmt(s->body.items[i], &nb, v);
    if (!v->failed)
      access_now(b, s, accesses(b, s));
    return;
  }
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < (k ? s->else_body.n : s->body.n); i++)
      tl_walk_stmt(k ? s->else_body.items[i] : s->body.items[i], &nb, v);
  if (v->failed)
    return;
  /* control first, then the body's statements in order (what they hold is
   * under the same thread-dependent control, so each counts as a whole) */
  access_now(b, s, control(b, s));
  touched outer = b->pend, inner = copy_of(b, outer);
  for (int k = 0; k < 2 && !v->failed; k++) {
    b->pend = copy_of(b, outer);
    for (int i = 0; i < (k ? s->else_body.n : s->body.n) && !v->failed; i++) {
      tl_stmt *t = k ? s->else_body.items[i] : s->body.items[i];
      access_now(b, t, accesses(b, t));
    }
    join(b, inner, b->pend);
  }
  b->pend = inner;
}

static void run_stmt(Bv *b, tl_stmt *s) {
  if (s->barrier_before)
    clear(b, b->pend);
  if (s->wspec_pre) /* the producer's copy: on mbarriers with its readers (pass_wspec.c) */
    return;
  switch (s->kind) {
  case S_SYNC_THREADS:
    clear(b, b->pend);
    return;
  case S_CLUSTER_REDUCE: /* its accesses, then a barrier of the whole cluster (a block barrier too) */
    access_now(b, s, accesses(b, s));
    clear(b, b->pend);
    return;
  case S_PARALLEL:
    run_unit(b, s);
    return;
  case S_IF: {
    if (s->value->kind == E_CONST) { /* only the branch taken is emitted */
      bool take = is_float(s->value->type) ? s->value->val.f != 0 : s->value->val.i != 0;
      run_body(b, take ? &s->body : &s->else_body);
      return;
    }
    if (!uniform_control(s)) {
      run_unit(b, s);
      return;
    }
    access_now(b, s, control(b, s));
    touched before = copy_of(b, b->pend);
    run_body(b, &s->body);
    touched after_then = b->pend;
    b->pend = before;
    if (s->has_else)
      run_body(b, &s->else_body);
    join(b, b->pend, after_then);
    return;
  }
  case S_LOOP: {
    if (!uniform_control(s)) {
      run_unit(b, s);
      return;
    }
    access_now(b, s, control(b, s));
    if (s->wspec) { /* the producer's copies wait and are waited for on mbarriers: the rest as a serial loop's */
      tl_body rest = consumer_body(b, s);
      if (wspec_reg_prefetch(s)) { /* iteration 0's copies through registers, then a barrier */
        for (int i = 0; i < s->body.n; i++)
          if (s->body.items[i]->reg_prefetch)
            access_now(b, s->body.items[i], accesses(b, s->body.items[i]));
        clear(b, b->pend);
        if (!s->barrier_end) {
          fail(b->v, s->pointer, "warp-specialized loop with copies prefetched through registers but no barrier "
               "closing its iterations%s", "", NULL);
          return;
        }
      }
      touched after = copy_of(b, b->pend);
      if (!s->barrier_end)
        join(b, b->pend, body_effect(b, &rest).adds);
      run_body(b, &rest);
      if (s->barrier_end)
        clear(b, b->pend);
      join(b, after, b->pend); /* no barrier after the loop */
      b->pend = after;
      return;
    }
    if (s->pipe) { /* the prologue's copies, then each iteration after a barrier, and one after the loop */
      for (int i = 0; i < s->body.n; i++)
        if (s->body.items[i]->prefetch || s->body.items[i]->reg_prefetch)
          access_now(b, s->body.items[i], accesses(b, s->body.items[i]));
      clear(b, b->pend);
      for (int i = 0; i < s->body.n && !b->v->failed; i++)
        if (!s->body.items[i]->prefetch && !s->body.items[i]->reg_prefetch)
          run_stmt(b, s->body.items[i]);
      clear(b, b->pend);
      return;
    }
    /* Zero, one or more iterations.  An iteration starts from what was
     * pending before the loop or, after the first, from what the body
     * leaves (its effect; nothing after a barrier at its end); the checks
     * are monotone and the effects distribute over unions, so one run of
     * the body from the union of those starts checks every iteration. */
    touched after = copy_of(b, b->pend);
    if (!s->barrier_end)
      join(b, b->pend, body_effect(b, &s->body).adds);
    run_body(b, &s->body);
    if (s->barrier_end)
      clear(b, b->pend);
    join(b, after, b->pend);
    b->pend = after;
    return;
  }
  case S_ALLOC:
  case S_VIEW:
  case S_ANNOTATE_LAYOUT:
  case S_USE_SWIZZLE:
    return;
  default:
    access_now(b, s, accesses(b, s));
    return;
  }
}

static void run_body(Bv *b, const tl_body *body) {
  for (int i = 0; i < body->n && !b->v->failed; i++)
    run_stmt(b, body->items[i]);
}

static tl_walk_act wgmma_gemm(tl_stmt *s, void *user) {
  (void)user;
  return s->kind == S_GEMM && s->use_wgmma ? TL_WALK_STOP : TL_WALK_GO;
}

static void verify_barriers(V *v) {
  const tl_program *p = v->prog;
  static const tl_walker w = {.pre = wgmma_gemm};
  bool wgmma = tl_walk((tl_body *)&p->body, &w, NULL) == TL_WALK_STOP;
  if (wgmma != p->fence_async) {
    fail(v, "", "fence_async is %s but a gemm on wgmma is %s", p->fence_async ? "set" : "not set",
         wgmma ? "there" : "not there");
    return;
  }
  Bv b = {.v = v, .n = p->nbuffer_slots + p->nparams + 1};
  b.pend = fresh(&b);
  run_body(&b, &p->body);
  if (!p->persistent || p->tile_barrier)
    return;
  /* A persistent kernel's tiles with no barrier between them: each next
   * tile from what the ones before leave in shared memory (global tensors
   * left out: tiles are blocks of the grid, which never depend on each
   * other), until that stops growing (the checks are monotone). */
  touched start = fresh(&b);
  for (int round = 0; !v->failed; round++) {
    for (int i = 0; i < p->nparams; i++)
      b.pend.r[p->nbuffer_slots + i] = b.pend.w[p->nbuffer_slots + i] = false;
    if (!join(&b, start, b.pend) && round)
      return;
    b.pend = copy_of(&b, start);
    run_body(&b, &p->body);
  }
}

/* ---- wspec ---------------------------------------------------------------------------- */
/* pass_wspec.c's promises: at most one wspec loop, a tma loop of the
 * kernel's body whose prefetched copies are all bulk tensor copies, on a
 * target with wgmma and TMA; its "stage is free" mbarriers, one per stage,
 * within the program's and apart from its full ones; the producer
 * warpgroup (wspec_threads) exactly when there is such a loop, after a
 * one-dimensional block of whole warpgroups, within 1024 threads; the
 * setmaxnreg counts multiples of 8 from 24 to 256, the producer's below
 * the others'; slices (tl_program.slices, 1 to TL_MAX_SLICES) only on
 * that loop, of a kernel neither persistent nor in clusters, whose stages
 * are a multiple of them, with the producer within 1024 threads of them
 * all and the buffer that takes their sums a staged one of the loop. */
/* A statement inside a body: never a pre copy (tl_walker.pre). */
static tl_walk_act no_pre(tl_stmt *s, void *user) {
  return s->wspec_pre ? fail(user, s->pointer, "a copy the producer issues is not of the kernel's body%s", "", NULL)
                      : TL_WALK_GO;
}

static void verify_wspec(V *v) {
  const tl_program *p = v->prog;
  int64_t T = p->threads[0] * p->threads[1] * p->threads[2];
  const tl_stmt *loop = NULL;
  for (int i = 0; i < p->body.n; i++) {
    const tl_stmt *s = p->body.items[i];
    if (s->kind != S_LOOP || !s->wspec)
      continue;
    if (loop) {
      fail(v, s->pointer, "a second warp-specialized loop%s", "", NULL);
      return;
    }
    loop = s;
    if (!s->tma || !v->cg->wgmma || !v->cg->tma) {
      fail(v, s->pointer, "a warp-specialized loop without bulk tensor copies, or on a target without wgmma and TMA%s",
           "", NULL);
      return;
    }
    for (int j = 0; j < s->body.n; j++)
      if (s->body.items[j]->prefetch && !s->body.items[j]->tma) {
        fail(v, s->body.items[j]->pointer, "a warp-specialized loop prefetches a copy that is not a bulk tensor copy%s",
             "", NULL);
        return;
      }
    int64_t e = s->wspec_empty, S = s->pipe_stages;
    if (e < 0 || e + S > p->nmbar || (e < s->mbar + S && s->mbar < e + S)) {
      fail(v, s->pointer, "the loop's empty mbarriers are not within the program's, apart from its full ones%s", "",
           NULL);
      return;
    }
  }
  /* pre copies: copies of the body before its wspec loop, of a persistent kernel, into one or two copies of
   * their buffer, their full and free mbarriers within the program's and apart from the loop's, freed after
   * a statement of the body at or after them; nowhere else */
  bool before = loop != NULL;
  for (int i = 0; i < p->body.n; i++) {
    const tl_stmt *c = p->body.items[i];
    before &= c != loop;
    if (!c->wspec_pre)
      continue;
    int64_t m = c->pre_mbar, n = c->pre_stages, S = loop ? loop->pipe_stages : 0;
    bool last = false;
    for (int j = i; j < p->body.n; j++)
      last |= p->body.items[j] == c->pre_last;
    if (c->kind != S_COPY || !before || !p->persistent || (n != 1 && n != 2) || c->dst->sym->stages != n ||
        c->tma_map < 0 || c->tma_map >= p->ntmaps || m < 0 || m + 2 * n > p->nmbar ||
        (m < loop->mbar + S && loop->mbar < m + 2 * n) || (m < loop->wspec_empty + S && loop->wspec_empty < m + 2 * n) ||
        !last) {
      fail(v, c->pointer, "a copy the producer issues before its loop is not as pass_wspec.c promises%s", "", NULL);
      return;
    }
  }
  static const tl_walker nested = {.pre = no_pre};
  for (int i = 0; i < p->body.n; i++)
    for (int k = 0; k < 2 && !v->failed; k++) {
      const tl_body *b = k ? &p->body.items[i]->else_body : &p->body.items[i]->body;
      tl_walk((tl_body *)b, &nested, v);
    }
  if (v->failed)
    return;
  int G = p->slices;
  bool slices_ok = G >= 1 && G <= TL_MAX_SLICES && (G == 1 || (loop && loop->slices == G && !p->persistent &&
                                                                p->cl_size == 1 && loop->pipe_stages % G == 0));
  if (slices_ok && G > 1) {
    slices_ok = false;
    for (int j = 0; j < loop->body.n; j++)
      slices_ok |= loop->body.items[j]->prefetch && loop->body.items[j]->dst->sym == loop->slice_buf;
  }
  for (int i = 0; i < p->body.n; i++)
    slices_ok &= p->body.items[i] == loop || p->body.items[i]->slices <= 1;
  if (!slices_ok) {
    fail(v, loop ? loop->pointer : "", "the slices are not as pass_wspec.c promises%s", "", NULL);
    return;
  }
  T *= G;
  bool regs_ok = p->wspec_regs[1] == 0 || (p->wspec_regs[0] % 8 == 0 && p->wspec_regs[1] % 8 == 0 &&
                                           p->wspec_regs[0] >= 24 && p->wspec_regs[1] <= 256 &&
                                           p->wspec_regs[0] < p->wspec_regs[1]);
  if ((loop != NULL) != (p->wspec_threads == 128) || (loop && (T != p->threads[0] * G || T % 128 || T + 128 > 1024)) ||
      !regs_ok || (loop && p->wspec_blocks < 1))
    fail(v, loop ? loop->pointer : "", "the producer warpgroup, the block or the setmaxnreg counts are not as "
                                       "pass_wspec.c promises%s", "", NULL);
}

/* ---- split ------------------------------------------------------------------------------ */
/* Does s hold state that a function boundary would cut (pass_split.c)? */
static bool async_state(const tl_stmt *s) {
  return (s->kind == S_LOOP && (s->pipe || s->loop_kind == LOOP_PIPELINED)) || (s->kind == S_GEMM && s->use_wgmma) ||
         (s->kind == S_COPY && (s->tma || s->tma_store));
}

/* A statement inside a body: never marked (tl_walker.pre). */
static tl_walk_act split_unmarked(tl_stmt *s, void *user) {
  return s->region ? fail(user, s->pointer, "a statement inside a body is in a region%s", "", NULL) : TL_WALK_GO;
}

/* A statement inside a region's body: unmarked, and no state across the function (tl_walker.pre). */
static tl_walk_act split_inner(tl_stmt *s, void *user) {
  if (async_state(s))
    return fail(user, s->pointer, "a region holds a pipelined loop, a gemm on wgmma or a bulk tensor copy%s", "",
                NULL);
  return split_unmarked(s, user);
}

static void verify_split(V *v) {
  const tl_program *p = v->prog;
  const tl_body *b = &p->body;
  int last = 0;
  static const tl_walker unmarked = {.pre = split_unmarked}, inner = {.pre = split_inner};
  for (int i = 0; i < b->n && !v->failed; i++) {
    tl_stmt *s = b->items[i];
    bool first = s->region && (i == 0 || b->items[i - 1]->region != s->region);
    if (s->region && (first ? s->region != last + 1 || !s->region_frags : s->region_frags != NULL))
      fail(v, s->pointer, "the regions are not runs of consecutive statements numbered in order%s", "", NULL);
    else if (s->region && (s->kind == S_ALLOC || s->kind == S_ALLOC_VAR || s->kind == S_VIEW ||
                           (s->kind == S_LET && s->barrier_before)))
      fail(v, s->pointer, "a region holds a declaration the statements after it use%s", "", NULL);
    else if (s->region && async_state(s))
      split_inner(s, v);
    last = s->region ? s->region : last;
    for (int k = 0; k < 2 && !v->failed; k++) /* its bodies: no marks; in a region, no state across the function */
      tl_walk(k ? &s->else_body : &s->body, s->region ? &inner : &unmarked, v);
  }
  if (!v->failed && last != p->nregions)
    fail(v, "", "nregions does not count the regions%s", "", NULL);
  else if (!v->failed && last && (p->nstatements < p->split_statements || v->cg->dialect != TL_DIALECT_CUDA))
    fail(v, "", "regions in a kernel under its threshold or for a target that is not NVIDIA's%s", "", NULL);
}

/* ---- the entry point ---------------------------------------------------------------- */
tl_status tl_verify(const tl_program *prog, const char *stage, const tl_codegen *cg, tl_error *err) {
  V v = {.prog = prog, .cg = cg, .stage = stage, .err = err};
  tl_body *body = (tl_body *)&prog->body; /* the walks change nothing */
  if (strcmp(stage, "place") == 0) {
    static const tl_walker w = {.pre = place_stmt};
    if (verify_buffers(&v) && verify_smem(&v))
      tl_walk(body, &w, &v);
  } else if (strcmp(stage, "pipeline") == 0 || strcmp(stage, "overlap") == 0 || strcmp(stage, "tma") == 0) {
    static const tl_walker w = {.pre = pipeline_stmt};
    if (!cg->tma && (prog->ntmaps || prog->nmbar))
      fail(&v, "", "tensor maps or mbarriers on a target without TMA%s", "", NULL);
    else if (verify_buffers(&v) && verify_smem(&v))
      tl_walk(body, &w, &v);
    verify_pending(&v);
  } else if (strcmp(stage, "wspec") == 0) {
    if (verify_smem(&v))
      verify_wspec(&v);
  } else if (strcmp(stage, "range") == 0) {
    static const tl_walker w = {.pre = range_stmt, .expr = range_node};
    if (!(prog->lowered & TL_RAN_RANGE))
      fail(&v, "", "the pass did not mark the program ranged", NULL, NULL);
    else if (verify_block_ranges(&v))
      tl_walk(body, &w, &v);
  } else if (strcmp(stage, "split") == 0) {
    if (!(prog->lowered & TL_RAN_SPLIT))
      fail(&v, "", "the pass did not mark the program split%s", "", NULL);
    else
      verify_split(&v);
  } else if (strcmp(stage, "barrier") == 0) {
    if (!(prog->lowered & TL_RAN_BARRIER))
      fail(&v, "", "the pass did not mark the program's barriers placed", NULL, NULL);
    else
      verify_barriers(&v);
  }
  return v.failed ? TL_INTERNAL : TL_OK;
}
