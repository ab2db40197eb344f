/*
 * pass_range.c - value ranges of integer expressions, and which bounds
 * guards of global accesses they prove unnecessary.
 *
 * A range is bounded from constants, the grid, loop bounds and thread
 * counts.  The emitter prints a signed +, - or * that provably cannot
 * overflow as plain arithmetic (which the toolchain may optimize freely)
 * instead of the wrapping form the semantics ask for, and leaves out the
 * guard of a tensor dimension that a region provably stays inside.
 *
 * Needs: a checked program, placed (pass_place) and pipelined
 *        (pass_pipeline); ranges do not depend on either, but the emitter
 *        reads them with the rest.
 * Produces: tl_sym.has_range/rlo/rhi for block variables, loop variables
 *        and lets; tl_expr.has_range/rlo/rhi and no_wrap on every integer
 *        expression the kernel evaluates (tensor shapes, statement values,
 *        loop bounds, left-hand sides, region starts); tl_region.inside for
 *        the regions of tensors, and tl_expr.inside for the elements of
 *        tensors that expressions read or assign; TL_RAN_RANGE in
 *        tl_program.lowered.
 * Keeps: the tree (no node is added, removed or rewritten).
 * One walk in document order: a name is declared before it is used, so
 * each symbol's range is known before any expression that reads it.
 */
#include <stdint.h>
#include "ir.h"
#include "pass.h"

static bool is_float_t(tl_type t) {
  return t == TL_TY_UREAL || (t >= 0 && t < TL_DTYPE_COUNT && tl_dtype_is_float((tl_dtype)t));
}
static bool is_unsigned_t(tl_type t) { return t == TL_UINT8 || t == TL_UINT16 || t == TL_UINT32 || t == TL_UINT64; }

/* The range of x from its children's (already set), or false. */
static bool node_range(const tl_expr *x, int64_t *lo, int64_t *hi) {
  const tl_expr *l = x->nargs > 0 ? x->args[0] : NULL, *r = x->nargs > 1 ? x->args[1] : NULL;
  switch (x->kind) {
  case E_CONST:
    if (is_float_t(x->type) || is_unsigned_t(x->type))
      return false;
    *lo = *hi = x->val.i;
    return true;
  case E_NAME:
    if (!x->sym->has_range)
      return false;
    *lo = x->sym->rlo;
    *hi = x->sym->rhi;
    return true;
  case E_CALL:
    if (x->fn == FN_THREAD_BINDING)
      return false; /* bounded by the block: a let of it gets the range (range_stmt) */
    if ((x->fn == FN_MIN || x->fn == FN_MAX) && l->has_range && r->has_range) {
      bool mn = x->fn == FN_MIN;
      *lo = mn ? (l->rlo < r->rlo ? l->rlo : r->rlo) : (l->rlo > r->rlo ? l->rlo : r->rlo);
      *hi = mn ? (l->rhi < r->rhi ? l->rhi : r->rhi) : (l->rhi > r->rhi ? l->rhi : r->rhi);
      return true;
    }
    if (x->fn == FN_CEILDIV && l->has_range && r->has_range && r->rlo == r->rhi && r->rlo > 0 &&
        l->rlo > -(1LL << 62) && l->rhi < (1LL << 62)) { /* monotone in its dividend */
      int64_t c = r->rlo;
      *lo = l->rlo >= 0 ? (l->rlo + c - 1) / c : -(-l->rlo / c);
      *hi = l->rhi >= 0 ? (l->rhi + c - 1) / c : -(-l->rhi / c);
      return true;
    }
    if (x->fn == FN_IF_THEN_ELSE && r->has_range && x->args[2]->has_range && !is_float_t(x->type)) {
      const tl_expr *f = x->args[2];
      *lo = r->rlo < f->rlo ? r->rlo : f->rlo;
      *hi = r->rhi > f->rhi ? r->rhi : f->rhi;
      return true;
    }
    if (x->fn == FN_CAST && !is_float_t(l->type) && !is_float_t((tl_type)x->dtype_arg) &&
        !is_unsigned_t((tl_type)x->dtype_arg) && l->has_range) {
      *lo = l->rlo;
      *hi = l->rhi;
      return *lo >= INT32_MIN && *hi <= INT32_MAX; /* fits every target of 32 bits or more */
    }
    return false;
  case E_UNARY:
    if (x->op == '-' && l->has_range && l->rlo > INT64_MIN) {
      *lo = -l->rhi;
      *hi = -l->rlo;
      return true;
    }
    return false;
  case E_BINARY: {
    if (!l->has_range || !r->has_range)
      return false;
    int64_t a = l->rlo, b = l->rhi, c = r->rlo, d = r->rhi;
    if (a < -(1LL << 40) || b > (1LL << 40) || c < -(1LL << 40) || d > (1LL << 40))
      return false; /* keep the products below in range */
    switch (x->op) {
    case '+': *lo = a + c; *hi = b + d; return true;
    case '-': *lo = a - d; *hi = b - c; return true;
    case '*': {
      int64_t p[4] = {a * c, a * d, b * c, b * d};
      *lo = *hi = p[0];
      for (int i = 1; i < 4; i++) {
        if (p[i] < *lo)
          *lo = p[i];
        if (p[i] > *hi)
          *hi = p[i];
      }
      return true;
    }
    case OP_FLOORDIV:
      if (c != d || c <= 0)
        return false;
      *lo = a >= 0 ? a / c : -((-a + c - 1) / c);
      *hi = b >= 0 ? b / c : -((-b + c - 1) / c);
      return true;
    case '%':
      if (c != d || c <= 0)
        return false;
      *lo = 0;
      *hi = c - 1;
      return true;
    }
    return false;
  }
  default:
    return false;
  }
}

static bool fits(tl_type t, int64_t lo, int64_t hi) {
  if (t == TL_INT32)
    return lo >= INT32_MIN && hi <= INT32_MAX;
  return t == TL_INT64 || t == TL_TY_UINT;
}

/* Sets the ranges of x and of every node below it, children first. */
static void range_expr(tl_expr *x) {
  if (!x)
    return;
  for (int i = 0; i < x->nargs; i++)
    range_expr(x->args[i]);
  int64_t lo = 0, hi = 0;
  x->has_range = node_range(x, &lo, &hi);
  x->rlo = x->has_range ? lo : 0;
  x->rhi = x->has_range ? hi : 0;
  x->no_wrap = x->has_range && x->kind == E_BINARY && (x->op == '+' || x->op == '-' || x->op == '*') &&
               fits(x->type, lo, hi);
  x->inside = 0;
  for (int d = 0; x->kind == E_INDEX && x->sym->kind == SYM_TENSOR && d < x->nargs; d++) {
    const tl_expr *a = x->args[d];
    if (x->sym->dims[d] >= 0 && a->has_range && a->rlo >= 0 && a->rhi < x->sym->dims[d])
      x->inside |= (uint8_t)(1u << d);
  }
}

static void set_range(tl_sym *s, int64_t lo, int64_t hi) {
  s->has_range = true;
  s->rlo = lo;
  s->rhi = hi;
}

/* The regions' starts, and which dimensions of a tensor's region are
 * proven inside it. */
static void range_region(tl_region *r) {
  if (!r)
    return;
  for (int d = 0; d < r->ndim; d++) {
    range_expr(r->lo[d]);
    int64_t lo = r->lo[d] ? r->lo[d]->rlo : 0, hi = r->lo[d] ? r->lo[d]->rhi : 0;
    r->inside[d] = r->sym->kind == SYM_TENSOR && (!r->lo[d] || r->lo[d]->has_range) && r->sym->dims[d] >= 0 &&
                   lo >= 0 && hi + r->ext[d] <= r->sym->dims[d];
  }
}

static void range_body(const tl_program *p, const tl_body *b);
static void range_stmt(const tl_program *p, tl_stmt *s) {
  range_expr(s->value);
  range_expr(s->start);
  range_expr(s->extent);
  range_expr(s->step);
  range_expr(s->lhs);
  range_expr(s->panel_size);
  for (int i = 0; s->kind == S_PARALLEL && i < s->nvars; i++)
    range_expr(s->extents[i]);
  range_region(s->src);
  range_region(s->dst);
  switch (s->kind) {
  case S_LET:
    if (s->value && s->value->has_range)
      set_range(s->sym, s->value->rlo, s->value->rhi);
    else if (s->value && s->value->kind == E_CALL && s->value->fn == FN_THREAD_BINDING)
      set_range(s->sym, 0, p->threads[s->value->args[0]->val.i] - 1);
    break;
  case S_PARALLEL:
    for (int i = 0; i < s->nvars; i++)
      set_range(s->vars[i], 0, s->extents[i]->val.i - 1);
    break;
  case S_LOOP: {
    const tl_expr *st = s->start, *ex = s->extent, *sp = s->step;
    if (st->has_range && ex->has_range && sp->has_range && sp->rlo == sp->rhi && ex->rhi >= 1 &&
        ex->rhi < (1LL << 31) && sp->rlo > -(1LL << 20) && sp->rlo < (1LL << 20)) {
      int64_t a = st->rlo, b = st->rhi, d = ex->rhi, f = sp->rlo;
      int64_t last_lo = a + (f > 0 ? 0 : (d - 1) * f), last_hi = b + (f > 0 ? (d - 1) * f : 0);
      set_range(s->var, last_lo < a ? last_lo : a, last_hi > b ? last_hi : b);
    }
    break;
  }
  default:
    break;
  }
  range_body(p, &s->body);
  range_body(p, &s->else_body);
}

static void range_body(const tl_program *p, const tl_body *b) {
  for (int i = 0; i < b->n; i++)
    range_stmt(p, b->items[i]);
}

void tl_pass_range(tl_program *prog) {
  for (int i = 0; i < prog->ngrid; i++) {
    tl_sym *v = prog->block_vars[i];
    if (!v)
      continue;
    int64_t cap = i == 0 ? INT32_MAX - 1 : 65534; /* CUDA's grid limits */
    if (prog->grid[i]->kind == E_CONST && prog->grid[i]->val.i >= 1 && prog->grid[i]->val.i - 1 < cap)
      cap = prog->grid[i]->val.i - 1;
    set_range(v, 0, cap);
  }
  for (int i = 0; i < prog->nparams; i++)
    for (int d = 0; prog->params[i]->kind == SYM_TENSOR && d < prog->params[i]->ndim; d++)
      range_expr(prog->params[i]->shape[d]);
  range_body(prog, &prog->body);
  prog->lowered |= TL_RAN_RANGE;
}
