/*
 * pass_uniform.c - a parallel loop that chooses per element between two
 * values by an affine comparison of its variables (a causal mask) decides
 * once per tile when the comparison holds everywhere or nowhere.
 *
 * Needs: a ranged program (pass_range: no_wrap on the integer nodes).
 * Produces: on each parallel loop whose body is one assignment
 * X[...] = if_then_else(P op Q, a, b), op one of <, <=, >, >=, P and Q
 * integer expressions that are affine in the loop's variables (sums and
 * differences of them, times constants) over values the same in every
 * thread (constants, scalar parameters, block variables, the variables of
 * enclosing serial and pipelined loops, lets of such), every +, - and *
 * of them proven not to wrap: uni_all (the loop with the condition
 * replaced by true: X[...] = a, converted as before), uni_none (by false:
 * b), and uni_lo and uni_hi, the points of the loop's box
 * (one value per variable: 0 or its extent - 1, by the sign of its
 * coefficient in P - Q) where P - Q is least and greatest.  emit_cuda.c
 * evaluates the comparison at those two points: true at the one where it
 * is hardest to satisfy means true everywhere (P - Q is affine, so its
 * extremes over the box are at those corners), false at the other means
 * false everywhere; the loop then writes a or b without comparing, else
 * it compares per element.  FlashAttention's causal mask compares only on
 * the tiles the diagonal crosses.  Keeps: everything else (the values
 * written are the same).
 */
#include "ir.h"
#include "pass.h"

/* The coefficients of the loop variables in x (coef[v], v an index of
 * par->vars), adding sign times them; false when x is not affine in them
 * over thread-uniform values, or may wrap. */
static bool affine(const tl_stmt *par, const tl_expr *x, int64_t sign, int64_t *coef) {
  switch (x->kind) {
  case E_CONST:
    return true;
  case E_NAME:
    for (int v = 0; v < par->nvars; v++)
      if (x->sym == par->vars[v]) {
        coef[v] += sign;
        return true;
      }
    switch (x->sym->kind) {
    case SYM_CONST: case SYM_SCALAR: case SYM_BLOCK_VAR:
      return true;
    case SYM_LOOP_VAR: /* an enclosing loop's (not a parallel loop's: those vary per thread) */
      return !x->sym->varying;
    case SYM_LET: /* one value per block, whatever it is made of */
      return !x->sym->varying;
    default:
      return false;
    }
  case E_UNARY:
    return x->op == '-' && affine(par, x->args[0], -sign, coef);
  case E_BINARY:
    if (!x->no_wrap || tl_dtype_is_float((tl_dtype)x->type))
      return false;
    if (x->op == '+' || x->op == '-')
      return affine(par, x->args[0], sign, coef) && affine(par, x->args[1], x->op == '-' ? -sign : sign, coef);
    if (x->op == '*') {
      for (int k = 0; k < 2; k++)
        if (x->args[k]->kind == E_CONST)
          return affine(par, x->args[1 - k], sign * x->args[k]->val.i, coef);
      /* neither a constant: affine only when neither holds a loop variable */
      int64_t c[2][TL_MAX_DIMS] = {{0}};
      if (par->nvars > TL_MAX_DIMS || !affine(par, x->args[0], 1, c[0]) || !affine(par, x->args[1], 1, c[1]))
        return false;
      for (int v = 0; v < par->nvars; v++)
        if (c[0][v] || c[1][v])
          return false;
      return true;
    }
    return false;
  default:
    return false;
  }
}

/* The loop par with its if_then_else's condition replaced by the constant
 * `holds` (the value keeps its conversions: one rounding, as in place). */
static tl_stmt *with_value(tl_arena *a, const tl_stmt *par, bool holds) {
  tl_stmt *p = tl_arena_alloc(a, sizeof *p), *s = tl_arena_alloc(a, sizeof *s);
  const tl_expr *v = par->body.items[0]->value;
  tl_expr *nv = tl_arena_alloc(a, sizeof *nv), *c = tl_arena_alloc(a, sizeof *c);
  *nv = *v;
  *c = *v->args[0];
  c->kind = E_CONST;
  c->nargs = 0;
  c->args = NULL;
  c->val.i = holds;
  nv->args = tl_arena_alloc(a, sizeof *nv->args * 3);
  nv->args[0] = c;
  nv->args[1] = v->args[1];
  nv->args[2] = v->args[2];
  *p = *par;
  *s = *par->body.items[0];
  s->value = nv;
  p->barrier_before = false;
  p->body.n = 1;
  p->body.items = tl_arena_alloc(a, sizeof *p->body.items);
  p->body.items[0] = s;
  return p;
}

static tl_walk_act split(tl_stmt *par, void *user) {
  tl_program *prog = user;
  if (par->kind != S_PARALLEL || par->body.n != 1 || par->nvars > TL_MAX_DIMS)
    return TL_WALK_GO;
  tl_stmt *s = par->body.items[0];
  tl_expr *v = s->value;
  if (s->kind != S_ASSIGN || !s->lhs || s->assign_op || !v || v->kind != E_CALL || v->fn != FN_IF_THEN_ELSE ||
      v->nargs < 1)
    return TL_WALK_SKIP; /* not a choice (a constant has no arguments to look at) */
  tl_expr *c = v->args[0];
  if (c->kind != E_BINARY || (c->op != '<' && c->op != '>' && c->op != OP_LE && c->op != OP_GE) ||
      tl_dtype_is_float((tl_dtype)c->args[0]->type) || tl_dtype_is_float((tl_dtype)c->args[1]->type) ||
      !c->args[0]->has_range || !c->args[1]->has_range)
    return TL_WALK_SKIP;
  int64_t coef[TL_MAX_DIMS] = {0};
  if (!affine(par, c->args[0], 1, coef) || !affine(par, c->args[1], -1, coef))
    return TL_WALK_SKIP;
  par->uni_lo = tl_arena_alloc(prog->arena, sizeof *par->uni_lo * (size_t)par->nvars);
  par->uni_hi = tl_arena_alloc(prog->arena, sizeof *par->uni_hi * (size_t)par->nvars);
  for (int k = 0; k < par->nvars; k++) {
    int64_t last = par->extents[k]->val.i - 1;
    par->uni_lo[k] = coef[k] >= 0 ? 0 : last;
    par->uni_hi[k] = coef[k] >= 0 ? last : 0;
  }
  par->uni_all = with_value(prog->arena, par, true);
  par->uni_none = with_value(prog->arena, par, false);
  return TL_WALK_SKIP;
}

void tl_pass_uniform(tl_program *prog) {
  static const tl_walker w = {.pre = split};
  tl_walk(&prog->body, &w, prog);
}
