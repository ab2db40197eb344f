/*
 * pass_place.c - decides where every block-level buffer lives on the GPU.
 *
 * Needs: a checked program.  Produces: for each fragment, in_regs and
 * per_thread (registers, blocked layout: thread t holds the flat elements
 * [t * P, (t + 1) * P) of the buffer, P = ceil(size / threads)) or an
 * smem_offset; for each shared buffer its smem_offset; the program's
 * smem_bytes and the scratch area for cross-thread exchanges (reductions
 * and prefix sums over register fragments).  Keeps: everything else.
 *
 * A fragment stays in registers only when every thread can work on its
 * own elements alone: it is never an operand A or B of gemm (every thread
 * reads all of those), every tile operator names it whole, every parallel
 * loop that touches it runs over exactly its shape and indexes it with the
 * loop variables in order (the "identity" access), and P is at most
 * TL_MAX_REG_ELEMS.  Every other fragment lives in shared memory, where any
 * thread may read any element; that is always correct, and slower.  (Later
 * versions replace this with layout inference onto the mma layouts.)
 */
#include <string.h>
#include "ir.h"
#include "pass.h"

#define TL_MAX_REG_ELEMS 128

typedef struct {
  tl_program *prog;
  int64_t threads;
  int64_t scratch;
} P;

static void demote(tl_sym *s) {
  if (s && s->kind == SYM_BUFFER && s->scope == SCOPE_FRAGMENT)
    s->in_regs = false;
}

/* Walks expression e inside the parallel loop `par` and demotes every
 * fragment it indexes other than by the identity access. */
static void scan_par_expr(const tl_stmt *par, const tl_expr *e) {
  if (!e)
    return;
  if (e->kind == E_INDEX && e->sym && e->sym->kind == SYM_BUFFER && e->sym->scope == SCOPE_FRAGMENT) {
    bool identity = e->nargs == par->nvars;
    for (int k = 0; identity && k < e->nargs; k++)
      identity = e->args[k]->kind == E_NAME && e->args[k]->sym == par->vars[k] &&
                 par->extents[k]->val.i == e->sym->dims[k];
    if (!identity)
      demote(e->sym);
  }
  for (int i = 0; i < e->nargs; i++)
    scan_par_expr(par, e->args[i]);
}

static void scan_par_body(const tl_stmt *par, const tl_body *b) {
  for (int i = 0; i < b->n; i++) {
    const tl_stmt *s = b->items[i];
    scan_par_expr(par, s->value);
    scan_par_expr(par, s->lhs);
    scan_par_expr(par, s->start);
    scan_par_expr(par, s->extent);
    scan_par_expr(par, s->step);
    scan_par_body(par, &s->body);
    scan_par_body(par, &s->else_body);
  }
}

static bool whole(const tl_region *r) {
  if (r->whole)
    return true;
  for (int d = 0; d < r->ndim; d++) {
    if (r->ext[d] != r->sym->dims[d])
      return false;
    if (r->lo[d] && !(r->lo[d]->kind == E_CONST && r->lo[d]->val.i == 0))
      return false;
  }
  return true;
}

static void need_whole(const tl_region *r) {
  if (r && r->sym && !whole(r))
    demote(r->sym);
}

static void scan_body(P *p, const tl_body *b);

static void scan_stmt(P *p, tl_stmt *s) {
  switch (s->kind) {
  case S_COPY: case S_REDUCE: case S_CUMSUM: case S_ATOMIC_ADD: case S_FILL:
    need_whole(s->src);
    need_whole(s->dst);
    break;
  case S_GEMM:
    demote(s->A);
    demote(s->B);
    break;
  case S_PARALLEL:
    scan_par_body(s, &s->body);
    break;
  default:
    break;
  }
  scan_body(p, &s->body);
  scan_body(p, &s->else_body);
}

static void scan_body(P *p, const tl_body *b) {
  for (int i = 0; i < b->n; i++)
    scan_stmt(p, b->items[i]);
}

static int64_t elems(const tl_sym *s) {
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++)
    n *= s->dims[d];
  return n;
}

/* The bytes of shared scratch an operator needs to exchange values of
 * register fragments between threads (see emit_cuda.c). */
static int64_t scratch_need(const tl_stmt *s) {
  if ((s->kind == S_REDUCE || s->kind == S_CUMSUM) && s->src->sym->in_regs) {
    const tl_sym *src = s->src->sym;
    if (s->kind == S_REDUCE && tl_reduce_by_rows(s))
      return (elems(s->dst->sym) + 1) * 8; /* one partial per row */
    /* the whole fragment, as float (4 bytes) or double/long long (8) */
    int64_t es = tl_dtype_is_float(src->dtype) && src->dtype != TL_FLOAT64 ? 4 : 8;
    return elems(src) * es;
  }
  return 0;
}

static void max_scratch(P *p, const tl_body *b) {
  for (int i = 0; i < b->n; i++) {
    int64_t n = scratch_need(b->items[i]);
    if (n > p->scratch)
      p->scratch = n;
    max_scratch(p, &b->items[i]->body);
    max_scratch(p, &b->items[i]->else_body);
  }
}

/* A reduction of a register fragment along its last dimension, where each
 * thread's elements sit in one row (its row's threads then combine with
 * warp shuffles: a power of two of them, at most a warp, and the block made
 * of whole warps) or hold whole rows. */
static bool by_rows(const tl_stmt *s, int64_t threads) {
  const tl_sym *src = s->src->sym;
  if (!src->in_regs || s->dim != src->ndim - 1)
    return false;
  int64_t n = src->dims[src->ndim - 1], per = src->per_thread, g = n / per;
  return (n % per == 0 && g <= 32 && (g & (g - 1)) == 0 && threads % 32 == 0) || per % n == 0;
}

static void mark_reductions(P *p, tl_body *b) {
  for (int i = 0; i < b->n; i++) {
    tl_stmt *s = b->items[i];
    if (s->kind == S_REDUCE)
      s->by_rows = by_rows(s, p->threads);
    mark_reductions(p, &s->body);
    mark_reductions(p, &s->else_body);
  }
}

bool tl_reduce_by_rows(const tl_stmt *s) { return s->by_rows; }

tl_status tl_pass_place(tl_program *prog, tl_error *err) {
  P pp = {.prog = prog}, *p = &pp;
  p->threads = prog->threads[0] * prog->threads[1] * prog->threads[2];
  for (int i = 0; i < prog->nbuffer_slots; i++) {
    tl_sym *s = prog->buffer_syms[i];
    s->smem_offset = -1;
    if (s->scope == SCOPE_FRAGMENT) {
      s->per_thread = (elems(s) + p->threads - 1) / p->threads;
      s->in_regs = s->per_thread <= TL_MAX_REG_ELEMS;
    }
  }
  scan_body(p, &prog->body);
  mark_reductions(p, &prog->body);
  int64_t off = 0;
  for (int i = 0; i < prog->nbuffer_slots; i++) {
    tl_sym *s = prog->buffer_syms[i];
    if (s->scope == SCOPE_LOCAL || (s->scope == SCOPE_FRAGMENT && s->in_regs))
      continue;
    off = (off + 127) & ~(int64_t)127;
    s->smem_offset = off;
    off += elems(s) * (int64_t)tl_dtype_size(s->dtype);
  }
  max_scratch(p, &prog->body);
  off = (off + 127) & ~(int64_t)127;
  prog->scratch_offset = off;
  prog->scratch_bytes = p->scratch;
  prog->smem_bytes = off + p->scratch;
  (void)err;
  return TL_OK;
}
