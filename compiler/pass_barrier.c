/*
 * pass_barrier.c - where the block barriers go.
 *
 * A barrier goes before a statement that reads a buffer written, or writes
 * a buffer read or written, by another thread since the last barrier
 * (shared memory, and global tensors, whose elements other threads of the
 * block may touch); register fragments and local arrays are per-thread.
 * The scratch of cross-thread exchanges counts as one more buffer.  The
 * walk follows the emitter's order of execution: a statement under uniform
 * control (every thread of the block runs it) may get a barrier before it;
 * a serial loop whose next iteration conflicts with the end of its body
 * gets one at the end of each iteration; after a loop under uniform
 * control, what was pending before it and what its body leaves pending
 * (nothing when its iterations end with a barrier) are pending, not every
 * access of its body; an if's branches both start from
 * what was pending before it and leave the union; a loop may run no
 * iteration, so what was pending before it stays pending after it; a
 * pipelined loop starts with a barrier when anything is pending and its
 * iterations each start with one (emit_cuda.c prints those), except a
 * warp-specialized one (pass_wspec.c), whose copies synchronize on
 * mbarriers: the rest of its body is walked as a serial loop's (its copies
 * prefetched through registers after a barrier that follows the loop's
 * first, and at the end of each iteration, where it stores the next), with no
 * barrier after it (the consumer warpgroups of a persistent kernel then run
 * on into the next tile apart, one's epilogue beside the other's gemm); a
 * persistent kernel's tiles are separated by a barrier only where the
 * shared memory they use asks for one (tile_barrier); a copy before that
 * loop which the producer issues too (wspec_pre) synchronizes with its
 * readers on its own mbarriers, and counts as no access.  A conflict
 * inside thread-dependent control, where no barrier can be placed, is an
 * error.  The barriers inside one tile operator's lowering (the exchanges
 * of a reduction through the scratch, a lock-step assignment) are the
 * emitter's own; a cluster_reduce ends with a barrier of the whole cluster,
 * so nothing is pending after it.
 *
 * The pending accesses are sets of symbols in arrays grown in the compile's
 * arena, as many as the program touches (no fixed bound).
 *
 * Needs: a placed and pipelined program (pass_place, pass_pipeline): what
 *        lives in registers, which reductions exchange through the scratch,
 *        which loops are software pipelined, which gemms run on wgmma.
 * Produces: tl_stmt.barrier_before and barrier_end, tl_program.fence_async
 *        and tile_barrier (tile_barrier below),
 *        TL_RAN_BARRIER in tl_program.lowered; or TL_UNSUPPORTED with the
 *        statement's pointer for a dependency under thread-dependent control.
 * Keeps: everything else.
 */
#include <stdio.h>
#include "ir.h"
#include "pass.h"

/* Shared and global buffers read and written: each access value owns its
 * arrays (copy_access to keep one). */
typedef struct access {
  tl_vec r, w;
} access;

typedef struct {
  tl_arena *a;
  tl_error *err;
  bool failed;
  const tl_stmt *par; /* the parallel loop being walked, or NULL */
  access pend;        /* touched since the last barrier */
} B;

static const tl_sym scratch_sym = {.name = "(scratch)"};

static bool shared_or_global(const tl_sym *b) {
  return b && (b->kind == SYM_TENSOR ||
               (b->kind == SYM_BUFFER && b->scope != SCOPE_LOCAL && !(b->scope == SCOPE_FRAGMENT && b->in_regs)));
}

static bool in_set(const tl_vec *v, const tl_sym *b) {
  for (int i = 0; i < v->n; i++)
    if (v->items[i] == b)
      return true;
  return false;
}

static void add(tl_arena *a, tl_vec *v, const tl_sym *b) {
  if (!in_set(v, b))
    tl_vec_push(a, v, (void *)b);
}

/* A view's accesses are its buffer's (tl_mem_root). */
static void reads(tl_arena *a, access *x, const tl_sym *b) {
  if (shared_or_global(b) || b == &scratch_sym)
    add(a, &x->r, tl_mem_root(b));
}

static void writes(tl_arena *a, access *x, const tl_sym *b) {
  if (shared_or_global(b) || b == &scratch_sym)
    add(a, &x->w, tl_mem_root(b));
}

static void expr_reads(tl_arena *a, access *x, const tl_expr *e) {
  if (!e)
    return;
  if (e->kind == E_INDEX)
    reads(a, x, e->sym);
  for (int i = 0; i < e->nargs; i++)
    expr_reads(a, x, e->args[i]);
}

static void region_reads(tl_arena *a, access *x, const tl_region *r) {
  for (int d = 0; r && d < r->ndim; d++)
    expr_reads(a, x, r->lo[d]);
}

bool tl_reduce_in_quads(const tl_stmt *s) {
  const tl_sym *src = s->src->sym, *dst = s->dst->sym;
  return tl_reduce_by_rows(s) && src->in_regs && src->reg_layout == TL_LAYOUT_MMA && src->mma_wn == 1 &&
         dst->kind == SYM_BUFFER && dst->scope == SCOPE_FRAGMENT && dst->in_regs && dst->reg_layout == TL_LAYOUT_MMA_ROWS &&
         dst->mma_wm == src->mma_wm && dst->mma_mi == src->mma_mi && dst->mma_interleaved == src->mma_interleaved;
}

static void collect(tl_arena *a, access *x, const tl_stmt *s);
static void collect_body(tl_arena *a, access *x, const tl_body *b) {
  for (int i = 0; i < b->n; i++)
    collect(a, x, b->items[i]);
}

/* Every shared and global access of s and of the statements inside it. */
static void collect(tl_arena *a, access *x, const tl_stmt *s) {
  expr_reads(a, x, s->value);
  expr_reads(a, x, s->start);
  expr_reads(a, x, s->extent);
  expr_reads(a, x, s->step);
  region_reads(a, x, s->src);
  region_reads(a, x, s->dst);
  switch (s->kind) {
  case S_COPY:
  case S_ATOMIC_ADD:
    if (s->src)
      reads(a, x, s->src->sym);
    writes(a, x, s->dst->sym);
    break;
  case S_FILL:
    writes(a, x, s->dst->sym);
    break;
  case S_GEMM:
    reads(a, x, s->A);
    reads(a, x, s->B);
    reads(a, x, s->C);
    writes(a, x, s->C);
    break;
  case S_REDUCE:
  case S_CUMSUM:
    reads(a, x, s->src->sym);
    reads(a, x, s->dst->sym);
    writes(a, x, s->dst->sym);
    if (s->src->sym->in_regs && !tl_reduce_in_quads(s)) {
      reads(a, x, &scratch_sym);
      writes(a, x, &scratch_sym);
    }
    break;
  case S_CLUSTER_REDUCE: /* a register fragment through the scratch (emit_cuda.c: op_cluster_reduce) */
    reads(a, x, s->dst->sym);
    writes(a, x, s->dst->sym);
    if (s->dst->sym->in_regs) {
      reads(a, x, &scratch_sym);
      writes(a, x, &scratch_sym);
    }
    break;
  case S_ATOMIC: /* reads its element (the old value), and writes it as an assignment does */
    reads(a, x, s->lhs->sym);
    /* fall through */
  case S_ASSIGN:
    if (s->lhs->kind == E_INDEX) {
      writes(a, x, s->lhs->sym);
      for (int i = 0; i < s->lhs->nargs; i++)
        expr_reads(a, x, s->lhs->args[i]);
    }
    break;
  default:
    break;
  }
  collect_body(a, x, &s->body);
  collect_body(a, x, &s->else_body);
}

/* Does running a after what pend holds need a barrier between them? */
static bool conflicts(const access *pend, const access *a) {
  for (int i = 0; i < a->r.n; i++)
    if (in_set(&pend->w, a->r.items[i]))
      return true;
  for (int i = 0; i < a->w.n; i++)
    if (in_set(&pend->w, a->w.items[i]) || in_set(&pend->r, a->w.items[i]))
      return true;
  return false;
}

static void merge(tl_arena *ar, access *into, const access *a) {
  for (int i = 0; i < a->r.n; i++)
    add(ar, &into->r, a->r.items[i]);
  for (int i = 0; i < a->w.n; i++)
    add(ar, &into->w, a->w.items[i]);
}

static access copy_access(tl_arena *ar, const access *a) {
  access c = {0};
  merge(ar, &c, a);
  return c;
}

static void barrier(B *b) { b->pend.r.n = b->pend.w.n = 0; }

bool tl_expr_varying(const tl_expr *x) {
  if (!x)
    return false;
  if (x->kind == E_CALL && x->fn == FN_THREAD_BINDING)
    return true;
  if ((x->kind == E_NAME || x->kind == E_INDEX) && x->sym &&
      (x->sym->varying || x->sym->kind == SYM_VAR || (x->sym->kind == SYM_BUFFER && x->sym->scope == SCOPE_LOCAL)))
    return true;
  for (int i = 0; i < x->nargs; i++)
    if (tl_expr_varying(x->args[i]))
      return true;
  return false;
}

static void walk_body(B *b, const tl_body *body, bool uniform);
static void walk_stmt(B *b, tl_stmt *s, bool uniform);

/* A pipelined loop: a barrier first when anything is pending (its prologue
 * writes stages that earlier code may still read); every iteration starts
 * with a barrier, and one follows the loop.  Its prefetched copies, through
 * cp.async or registers, write stages that the iteration does not read
 * (pass_pipeline.c); the barrier that opens the next iteration covers them. */
static void walk_pipelined(B *b, tl_stmt *s) {
  if (b->pend.r.n || b->pend.w.n) {
    s->barrier_before = true;
    barrier(b);
  }
  barrier(b);
  for (int i = 0; i < s->body.n && !b->failed; i++)
    if (!s->body.items[i]->prefetch && !s->body.items[i]->reg_prefetch)
      walk_stmt(b, s->body.items[i], true);
  barrier(b);
}

/* `uniform`: every thread of the block runs s (so a barrier may be placed
 * before it).  Statements under thread-dependent control are separated as
 * a whole, by their uniform ancestor. */
static void walk_stmt(B *b, tl_stmt *s, bool uniform) {
  access a = {0};
  s->barrier_before = s->barrier_end = false;
  if (s->wspec_pre) /* the producer's copy (pass_wspec.c): it and its readers synchronize on its mbarriers */
    return;
  collect(b->a, &a, s);
  if (uniform && !b->par && conflicts(&b->pend, &a)) {
    s->barrier_before = true;
    barrier(b);
  } else if (!uniform && !b->par && conflicts(&b->pend, &a) && s->kind != S_IF && s->kind != S_LOOP) {
    b->failed = true;
    tl_error_set_at(b->err, TL_UNSUPPORTED, s->pointer, 0,
                    "this statement uses shared or global memory written earlier under the same "
                    "thread-dependent condition or loop, where no barrier can be placed; move it after the "
                    "condition or loop");
    return;
  }
  switch (s->kind) {
  case S_ALLOC:
  case S_VIEW:
  case S_ANNOTATE_LAYOUT:
  case S_USE_SWIZZLE:
    return;
  case S_SYNC_THREADS:
  case S_CLUSTER_REDUCE: /* ends with a barrier of the whole cluster, which orders the block's memory too */
    barrier(b);
    return;
  case S_PARALLEL: {
    const tl_stmt *saved = b->par;
    b->par = s;
    walk_body(b, &s->body, false);
    b->par = saved;
    break;
  }
  case S_IF: {
    if (s->value->kind == E_CONST) { /* only the branch taken is emitted */
      tl_type t = s->value->type;
      bool real = t == TL_TY_UREAL || (t >= 0 && t < TL_DTYPE_COUNT && tl_dtype_is_float((tl_dtype)t));
      bool take = real ? s->value->val.f != 0 : s->value->val.i != 0;
      walk_body(b, take ? &s->body : &s->else_body, uniform);
      return;
    }
    bool inner = uniform && !tl_expr_varying(s->value);
    access before = copy_access(b->a, &b->pend);
    walk_body(b, &s->body, inner);
    access after_then = b->pend;
    b->pend = before;
    if (s->has_else && s->else_body.n)
      walk_body(b, &s->else_body, inner);
    merge(b->a, &b->pend, &after_then);
    break;
  }
  case S_LOOP: {
    if (s->pipe && !s->wspec) {
      walk_pipelined(b, s);
      return;
    }
    bool inner = uniform && !tl_expr_varying(s->start) && !tl_expr_varying(s->extent) && !tl_expr_varying(s->step);
    access before = copy_access(b->a, &b->pend), body = {0};
    /* a warp-specialized loop (pass_wspec.c): the producer's copies wait
     * for their stages, and are waited for, on mbarriers; the rest of the
     * body runs as a serial loop's (no barrier after it: a statement that
     * conflicts with what it leaves pending gets its own) */
    /* Its copies prefetched through registers (emit_cuda.c's
     * emit_tl_wspec_loop): iteration 0's before the loop, then a barrier;
     * each iteration's store of the next one's at its end. */
    bool rp = false;
    for (int i = 0; i < s->body.n; i++) {
      if (!(s->wspec && s->body.items[i]->prefetch))
        collect(b->a, &body, s->body.items[i]);
      rp |= s->wspec && s->body.items[i]->reg_prefetch;
    }
    if (rp)
      barrier(b);
    for (int i = 0; i < s->body.n && !b->failed; i++)
      if (!(s->wspec && (s->body.items[i]->prefetch || s->body.items[i]->reg_prefetch)))
        walk_stmt(b, s->body.items[i], inner);
    for (int i = 0; rp && i < s->body.n; i++)
      if (s->body.items[i]->reg_prefetch)
        collect(b->a, &b->pend, s->body.items[i]);
    /* the next iteration runs the body again: separate it from this one */
    if (inner && conflicts(&b->pend, &body)) {
      s->barrier_end = true;
      barrier(b);
    }
    merge(b->a, &b->pend, &before); /* the loop may run no iteration */
    if (inner) {
      /* After the loop, what was pending before it (no iteration) and what
       * the body leaves pending (nothing when each iteration ends with a
       * barrier), not all of the body's accesses: the walk above ran the
       * body from what was pending before it; a later iteration starts from
       * what the body left, which conflicts with nothing in the body (else
       * barrier_end), so it places the same barriers and leaves at most
       * that again.  And what the loop's bounds read (verify.c's model). */
      expr_reads(b->a, &b->pend, s->start);
      expr_reads(b->a, &b->pend, s->extent);
      expr_reads(b->a, &b->pend, s->step);
      return;
    }
    break;
  }
  default:
    break;
  }
  if (uniform || !b->par)
    merge(b->a, &b->pend, &a);
}

static void walk_body(B *b, const tl_body *body, bool uniform) {
  for (int i = 0; i < body->n && !b->failed; i++)
    walk_stmt(b, body->items[i], uniform);
}

static bool uses_wgmma(const tl_body *b) {
  for (int i = 0; i < b->n; i++)
    if ((b->items[i]->kind == S_GEMM && b->items[i]->use_wgmma) || uses_wgmma(&b->items[i]->body) ||
        uses_wgmma(&b->items[i]->else_body))
      return true;
  return false;
}

/* The shared-memory part of what pend holds conflicts with what a holds?
 * (Global tensors are left out: see tile_barrier.) */
static bool conflicts_shared(tl_arena *ar, const access *pend, const access *a) {
  access p = {0}, x = {0};
  for (int k = 0; k < 2; k++) {
    const tl_vec *from[2] = {k ? &a->r : &pend->r, k ? &a->w : &pend->w};
    access *to = k ? &x : &p;
    for (int j = 0; j < 2; j++)
      for (int i = 0; i < from[j]->n; i++)
        if (((const tl_sym *)from[j]->items[i])->kind != SYM_TENSOR)
          add(ar, j ? &to->w : &to->r, from[j]->items[i]);
  }
  return conflicts(&p, &x);
}

/* A persistent kernel (pass_wspec.c) runs the body once per tile: the next
 * tile's statements need a barrier after this one's only where they touch
 * shared memory (or the scratch) in conflict with what the body leaves
 * pending.  Global tensors do not count: two tiles are two blocks of the
 * program's grid, which never depend on each other (proto/tile-ir-v1.md),
 * and the copies of a warp-specialized loop synchronize on its mbarriers
 * across tiles as within one.  Where no barrier is needed, the next tile
 * starts from what pend holds, which conflicts with nothing the body does,
 * so the body's own barriers serve every tile (as a serial loop's). */
static bool tile_barrier(B *b, const tl_body *body) {
  access all = {0};
  for (int i = 0; i < body->n; i++) {
    const tl_stmt *s = body->items[i];
    if (s->kind == S_LOOP && s->wspec) {
      expr_reads(b->a, &all, s->start);
      expr_reads(b->a, &all, s->extent);
      for (int j = 0; j < s->body.n; j++)
        if (!s->body.items[j]->prefetch)
          collect(b->a, &all, s->body.items[j]);
    } else if (!s->wspec_pre) {
      collect(b->a, &all, s);
    }
  }
  return conflicts_shared(b->a, &b->pend, &all);
}

tl_status tl_pass_barrier(tl_program *prog, tl_error *err) {
  B b = {.a = prog->arena, .err = err};
  prog->fence_async = uses_wgmma(&prog->body);
  walk_body(&b, &prog->body, true);
  if (b.failed)
    return TL_UNSUPPORTED;
  prog->tile_barrier = prog->persistent && tile_barrier(&b, &prog->body);
  prog->lowered |= TL_RAN_BARRIER;
  return TL_OK;
}
