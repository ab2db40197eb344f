/*
 * check.c - resolves, types and folds a parsed program (stage 2 of
 * docs/DESIGN.md section 3), so that every later stage can trust it.
 *
 * One walk over the program, in document order (the body with tl_walk):
 *   1. apply the constant overrides (-D / a request's "constants") and
 *      evaluate the constants (expressions over other constants, any
 *      order, cycles are errors), folding in int64/float64;
 *   2. parameters (tensor shapes over constants and scalar parameters) and
 *      the launch configuration (grid, threads, block vars);
 *   3. the body, with a scope stack: every name resolved to its tl_sym,
 *      every expression typed by the rules of TILE-IR.md sections 5-6
 *      (untyped constants take a type where they meet a typed operand),
 *      constant subexpressions folded, regions given constant extents,
 *      tile-operator operands matched, and the placement rules enforced
 *      (what a parallel body may hold, tile operators only under uniform
 *      control, fragments only touched by tile operators and parallel
 *      loops).
 * Errors are collected with their JSON Pointer and column and the walk goes
 * on, so that one run reports every error it can.
 *
 * Needs: a parsed program (tl_parse).  Keeps: the parsed tree's shape.
 * Produces: the "checked" state described in ir.h.
 */
#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"

/* ---- context ------------------------------------------------------------------ */
typedef struct scope {
  struct scope *up;
  tl_vec syms;
} scope;

/* The names visible now, hashed: names are never shadowed, so one table
 * holds every scope's; a scope's names are the newest in their chains and
 * leave them when it closes.  Lookups cost the same however many names a
 * program declares (a scan of the scopes made checking quadratic). */
enum { NAME_BUCKETS = 1 << 12 };
typedef struct name_ent {
  struct name_ent *next;
  tl_sym *sym;
} name_ent;

enum { CTX_CONST, CTX_LAUNCH, CTX_BODY }; /* what an expression may use */

typedef struct {
  tl_arena *arena;
  tl_diags *diags;
  tl_program *prog;
  scope *sc;
  name_ent **names;       /* NAME_BUCKETS chains of the visible names */
  name_ent *free_ents;    /* entries of closed scopes, for reuse */
  int where;              /* CTX_* */
  const tl_stmt *in_parallel;  /* the enclosing parallel loop, if any */
  const tl_stmt *varying_ctl;  /* the innermost enclosing if/loop whose control depends on the thread */
  tl_vec ctl_saved;            /* the varying_ctl of each enclosing loop/if, to restore after it */
  tl_vec value_syms, buffer_syms;
  tl_vec views;           /* the views of tensors (tl_program.views) */
  tl_vec all_views;       /* the view statements, of tensors and of shared buffers */
  tl_vec written;         /* after the walk: the memory (tl_mem_root) statements write */
  /* set while typing one expression */
  bool saw_varying, saw_thread;
  bool in_tile_op;
  bool writing;           /* the next check_index is the left side of an assignment */
  const tl_sym *const_being_defined;
} C;

#define ERR(ptr, col, ...) tl_diag_add(c->diags, (ptr), (col), __VA_ARGS__)

static bool is_float_t(tl_type t) { return t == TL_TY_UREAL || (t >= 0 && t < TL_DTYPE_COUNT && tl_dtype_is_float((tl_dtype)t)); }
static bool is_int_t(tl_type t) { return t == TL_TY_UINT || t == TL_BOOL || (t >= 0 && t < TL_DTYPE_COUNT && tl_dtype_is_int((tl_dtype)t)); }
static bool is_untyped(tl_type t) { return t == TL_TY_UINT || t == TL_TY_UREAL; }
static bool is_const(const tl_expr *e) { return e && e->kind == E_CONST; }

/* ---- the type rules (TILE-IR.md sections 5 and 6) ----------------------------- */
static tl_dtype promote_int(tl_dtype t) {
  switch (t) {
  case TL_BOOL: case TL_INT8: case TL_UINT8: case TL_INT16: case TL_UINT16:
  case TL_INT4: case TL_UINT4: case TL_INT2: case TL_UINT2: case TL_INT1: case TL_UINT1: return TL_INT32;
  default: return t;
  }
}

static tl_dtype widen_float(tl_dtype a, tl_dtype b) {
  if (a == b)
    return a;
  if (a == TL_FLOAT64 || b == TL_FLOAT64)
    return TL_FLOAT64;
  if (a == TL_FLOAT32 || b == TL_FLOAT32)
    return TL_FLOAT32;
  bool a8 = a == TL_FLOAT8_E4M3 || a == TL_FLOAT8_E5M2, b8 = b == TL_FLOAT8_E4M3 || b == TL_FLOAT8_E5M2;
  if (a8 && b8)
    return TL_FLOAT16; /* e4m3 with e5m2 */
  if (a8)
    return b;
  if (b8)
    return a;
  return TL_FLOAT32; /* float16 with bfloat16 */
}

/* The common type of two typed operands: floats widen, integer with float
 * is the float, integers follow C's usual arithmetic conversions. */
tl_dtype tl_common_dtype(tl_dtype a, tl_dtype b) {
  bool fa = tl_dtype_is_float(a), fb = tl_dtype_is_float(b);
  if (fa || fb)
    return fa && fb ? widen_float(a, b) : fa ? a : b;
  a = promote_int(a);
  b = promote_int(b);
  if (a == b)
    return a;
  int wa = tl_dtype_bits(a), wb = tl_dtype_bits(b);
  bool sa = tl_dtype_is_signed(a), sb = tl_dtype_is_signed(b);
  if (sa == sb)
    return wa >= wb ? a : b;
  tl_dtype s = sa ? a : b, u = sa ? b : a;
  int ws = sa ? wa : wb, wu = sa ? wb : wa;
  if (wu >= ws)
    return u;
  return s; /* the wider signed type holds every value of the unsigned one */
}

static bool fits_int32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

/* The type an untyped constant takes when it meets an operand of type t. */
static tl_dtype pin_type(const tl_expr *u, tl_dtype t) {
  if (u->type == TL_TY_UINT)
    return tl_dtype_is_float(t) ? t : fits_int32(u->val.i) ? TL_INT32 : TL_INT64;
  return tl_dtype_is_float(t) ? t : TL_FLOAT32;
}

/* The type an untyped constant takes alone (stored, or as a typed operand). */
static tl_dtype default_type(const tl_expr *u) {
  if (u->type == TL_TY_UINT)
    return fits_int32(u->val.i) ? TL_INT32 : TL_INT64;
  if (u->type == TL_TY_UREAL)
    return TL_FLOAT32;
  return (tl_dtype)u->type;
}

/* Gives an untyped constant node the concrete type t (converting its value). */
static void make_typed(tl_expr *e, tl_dtype t) {
  if (!is_untyped(e->type))
    return;
  tl_dtype from = e->type == TL_TY_UINT ? TL_INT64 : TL_FLOAT64;
  e->val = tl_convert(e->val, from, t);
  e->type = (tl_type)t;
}

/* ---- scopes ---------------------------------------------------------------------- */
static unsigned name_hash(const char *name) {
  unsigned h = 2166136261u; /* FNV-1a */
  for (; *name; name++)
    h = (h ^ (unsigned char)*name) * 16777619u;
  return h % NAME_BUCKETS;
}

static tl_sym *lookup(C *c, const char *name) {
  if (!c->names)
    return NULL;
  for (name_ent *n = c->names[name_hash(name)]; n; n = n->next)
    if (strcmp(n->sym->name, name) == 0)
      return n->sym;
  return NULL;
}

static const char *sym_kind_name(const tl_sym *s) {
  switch (s->kind) {
  case SYM_CONST: return "a constant";
  case SYM_SCALAR: return "a scalar parameter";
  case SYM_TENSOR: return "a tensor";
  case SYM_BLOCK_VAR: return "a block variable";
  case SYM_LOOP_VAR: return "a loop variable";
  case SYM_LET: return "a let";
  case SYM_VAR: return "a variable";
  case SYM_BUFFER:
    return s->scope == SCOPE_SHARED ? "a shared buffer" : s->scope == SCOPE_FRAGMENT ? "a fragment" : "a local buffer";
  }
  return "a name";
}

/* Collects the names visible now that satisfy `want` (for hints). */
static const char *suggest(C *c, const char *name, bool (*want)(const tl_sym *)) {
  tl_vec names = {0};
  for (scope *s = c->sc; s; s = s->up)
    for (int i = 0; i < s->syms.n; i++) {
      tl_sym *y = s->syms.items[i];
      if (!want || want(y))
        tl_vec_push(c->arena, &names, (void *)y->name);
    }
  return tl_closest(name, (const char *const *)names.items, names.n);
}

static bool is_bufferish(const tl_sym *s) { return s->kind == SYM_BUFFER || s->kind == SYM_TENSOR; }
static bool is_valueish(const tl_sym *s) { return !is_bufferish(s); }

static void declare(C *c, tl_sym *s, const char *ptr) {
  tl_sym *old = lookup(c, s->name);
  if (old) {
    ERR(ptr, 0, "'%s' is already defined (as %s at %s); names may not be redefined or shadowed", s->name,
        sym_kind_name(old), old->pointer);
    return;
  }
  tl_vec_push(c->arena, &c->sc->syms, s);
  if (!c->names)
    c->names = tl_arena_alloc(c->arena, sizeof *c->names * NAME_BUCKETS);
  name_ent *n = c->free_ents;
  if (n)
    c->free_ents = n->next;
  else
    n = tl_arena_alloc(c->arena, sizeof *n);
  unsigned h = name_hash(s->name);
  *n = (name_ent){.next = c->names[h], .sym = s};
  c->names[h] = n;
  if (s->kind == SYM_BUFFER) {
    s->slot = c->buffer_syms.n;
    tl_vec_push(c->arena, &c->buffer_syms, s);
  } else if (s->kind != SYM_CONST && s->kind != SYM_TENSOR) {
    s->slot = c->value_syms.n;
    tl_vec_push(c->arena, &c->value_syms, s);
  }
}

static void push_scope(C *c) {
  scope *s = tl_arena_alloc(c->arena, sizeof *s);
  s->up = c->sc;
  c->sc = s;
}
static void pop_scope(C *c) {
  /* newest first: each is then the head of its chain */
  for (int i = c->sc->syms.n - 1; i >= 0; i--) {
    unsigned h = name_hash(((tl_sym *)c->sc->syms.items[i])->name);
    name_ent *n = c->names[h];
    assert(n && n->sym == c->sc->syms.items[i]);
    c->names[h] = n->next;
    n->next = c->free_ents;
    c->free_ents = n;
  }
  c->sc = c->sc->up;
}

/* ---- constant folding of untyped values (int64 / float64) ------------------------ */
static tl_expr *mk_const(C *c, const tl_expr *at, tl_type t, tl_scalar v) {
  tl_expr *e = tl_arena_alloc(c->arena, sizeof *e);
  e->kind = E_CONST;
  e->type = t;
  e->val = v;
  e->column = at->column;
  e->pointer = at->pointer;
  return e;
}

static double as_real(const tl_expr *e) {
  if (e->type == TL_TY_UREAL || is_float_t(e->type))
    return e->val.f;
  if (e->type >= 0 && e->type < TL_DTYPE_COUNT && !tl_dtype_is_signed((tl_dtype)e->type) && e->type != TL_BOOL)
    return (double)e->val.u;
  return (double)e->val.i;
}

/* Folds a binary operator on two untyped (or bool) constants. */
static tl_expr *fold_binary(C *c, tl_expr *e, tl_expr *a, tl_expr *b) {
  tl_scalar v = {0};
  bool ints = !is_float_t(a->type) && !is_float_t(b->type);
  int op = e->op;
  if (op == OP_AND || op == OP_OR) {
    bool x = ints ? a->val.i != 0 : as_real(a) != 0, y = b->type == TL_TY_UREAL ? b->val.f != 0 : b->val.i != 0;
    if (is_float_t(a->type))
      x = as_real(a) != 0;
    v.i = op == OP_AND ? (x && y) : (x || y);
    return mk_const(c, e, TL_BOOL, v);
  }
  if (op == '<' || op == '>' || op == OP_LE || op == OP_GE || op == OP_EQ || op == OP_NE) {
    int cmp;
    if (ints)
      cmp = a->val.i < b->val.i ? -1 : a->val.i > b->val.i;
    else {
      double x = as_real(a), y = as_real(b);
      if (isnan(x) || isnan(y)) {
        v.i = op == OP_NE;
        return mk_const(c, e, TL_BOOL, v);
      }
      cmp = x < y ? -1 : x > y;
    }
    v.i = op == '<' ? cmp < 0 : op == '>' ? cmp > 0 : op == OP_LE ? cmp <= 0 : op == OP_GE ? cmp >= 0
        : op == OP_EQ ? cmp == 0 : cmp != 0;
    return mk_const(c, e, TL_BOOL, v);
  }
  if (ints) {
    int64_t x = a->val.i, y = b->val.i, r = 0;
    bool ovf = false;
    switch (op) {
    case '+': ovf = __builtin_add_overflow(x, y, &r); break;
    case '-': ovf = __builtin_sub_overflow(x, y, &r); break;
    case '*': ovf = __builtin_mul_overflow(x, y, &r); break;
    case OP_FLOORDIV:
    case '%':
      if (y == 0) {
        ERR(e->pointer, b->column, "division by zero in a constant expression");
        return NULL;
      }
      if (x == INT64_MIN && y == -1) {
        ovf = true;
        break;
      }
      r = op == '%' ? tl_floormod64(x, y) : tl_floordiv64(x, y);
      break;
    case '&': r = x & y; break;
    case '|': r = x | y; break;
    case '^': r = x ^ y; break;
    case OP_SHL:
    case OP_SHR:
      if (y < 0 || y >= 64) {
        ERR(e->pointer, b->column, "shift count %lld is outside [0, 64) in a constant expression", (long long)y);
        return NULL;
      }
      if (op == OP_SHR)
        r = x >> y;
      else {
        r = (int64_t)((uint64_t)x << y);
        ovf = (r >> y) != x;
      }
      break;
    default:
      return e;
    }
    if (ovf) {
      ERR(e->pointer, e->column, "integer overflow in a constant expression (constants fold in int64)");
      return NULL;
    }
    v.i = r;
    return mk_const(c, e, TL_TY_UINT, v);
  }
  double x = as_real(a), y = as_real(b), r;
  switch (op) {
  case '+': r = x + y; break;
  case '-': r = x - y; break;
  case '*': r = x * y; break;
  case '/': r = x / y; break;
  case OP_FLOORDIV: r = floor(x / y); break;
  case '%': r = y == 0 ? NAN : x - floor(x / y) * y; break;
  default: return e;
  }
  v.f = r;
  return mk_const(c, e, TL_TY_UREAL, v);
}

/* ---- expressions ---------------------------------------------------------------- */
static tl_expr *check_expr(C *c, tl_expr *e);

static const char *type_str(tl_type t) { return tl_type_name(t); }

/* Requires an integer-valued expression (for indices, extents, shapes). */
static bool want_int(C *c, tl_expr *e, const char *what) {
  if (!e)
    return false;
  if (!is_int_t(e->type) || e->type == TL_BOOL) {
    ERR(e->pointer, e->column, "%s must be an integer, not %s", what, type_str(e->type));
    return false;
  }
  return true;
}

/* Types both operands of a binary operation and returns their common type,
 * pinning an untyped side to the typed one. */
static tl_type unify(tl_expr *a, tl_expr *b) {
  bool ua = is_untyped(a->type), ub = is_untyped(b->type);
  if (ua && ub)
    return a->type == TL_TY_UREAL || b->type == TL_TY_UREAL ? TL_TY_UREAL : TL_TY_UINT;
  if (ua)
    make_typed(a, pin_type(a, (tl_dtype)b->type));
  if (ub)
    make_typed(b, pin_type(b, (tl_dtype)a->type));
  return (tl_type)tl_common_dtype((tl_dtype)a->type, (tl_dtype)b->type);
}

/* The common type of n operands, not all untyped (7.2 row by row: the
 * untyped ones take their type from the typed ones first). */
static tl_type unify_all(tl_expr **a, int n) {
  tl_dtype t = TL_DTYPE_COUNT;
  for (int i = 0; i < n; i++)
    if (!is_untyped(a[i]->type))
      t = t == TL_DTYPE_COUNT ? (tl_dtype)a[i]->type : tl_common_dtype(t, (tl_dtype)a[i]->type);
  assert(t != TL_DTYPE_COUNT);
  for (int i = 0; i < n; i++)
    make_typed(a[i], pin_type(a[i], t));
  for (int i = 0; i < n; i++)
    t = tl_common_dtype(t, (tl_dtype)a[i]->type);
  return (tl_type)t;
}

/* float4_e2m1 and float8_e8m0 are storage types: a value of one may be
 * stored, copied, cast or reinterpreted, and nothing else
 * (proto/tile-ir-v1.md 7.2); reports x as an operand of `what`. */
static bool computable(C *c, const tl_expr *x, const char *what) {
  if (x->type != TL_FLOAT4_E2M1 && x->type != TL_FLOAT8_E8M0)
    return true;
  ERR(x->pointer, x->column, "%s cannot take a %s value; convert it first (e.g. float16(...) or float32(...))", what,
      type_str(x->type));
  return false;
}

static tl_expr *check_binary(C *c, tl_expr *e) {
  tl_expr *a = check_expr(c, e->args[0]), *b = check_expr(c, e->args[1]);
  if (!a || !b)
    return NULL;
  const char *what = tl_arena_printf(c->arena, "'%s'", tl_op_text(e->op));
  if (!computable(c, a, what) || !computable(c, b, what))
    return NULL;
  e->args[0] = a;
  e->args[1] = b;
  int op = e->op;
  const char *ot = tl_op_text(op);
  if (op == OP_AND || op == OP_OR) {
    if (is_const(a) && is_const(b) && (is_untyped(a->type) || a->type == TL_BOOL) &&
        (is_untyped(b->type) || b->type == TL_BOOL))
      return fold_binary(c, e, a, b);
    if (is_untyped(a->type))
      make_typed(a, default_type(a));
    if (is_untyped(b->type))
      make_typed(b, default_type(b));
    e->type = TL_BOOL;
    return e;
  }
  bool cmp = op == '<' || op == '>' || op == OP_LE || op == OP_GE || op == OP_EQ || op == OP_NE;
  if (op == '/' && is_int_t(a->type) && is_int_t(b->type)) {
    ERR(e->pointer, e->column, "'/' between integers; use '//'");
    return NULL;
  }
  if ((op == '&' || op == '|' || op == '^' || op == OP_SHL || op == OP_SHR) &&
      (is_float_t(a->type) || is_float_t(b->type))) {
    tl_expr *bad = is_float_t(a->type) ? a : b;
    ERR(e->pointer, bad->column, "'%s' needs integer operands, not %s", ot, type_str(bad->type));
    return NULL;
  }
  if ((op == '&' || op == '|' || op == '^') && a->type == TL_BOOL && b->type == TL_BOOL) {
    if (is_const(a) && is_const(b)) {
      int64_t x = a->val.i, y = b->val.i;
      return mk_const(c, e, TL_BOOL, (tl_scalar){.i = op == '&' ? (x & y) : op == '|' ? (x | y) : (x ^ y)});
    }
    e->type = TL_BOOL; /* Python: bool & bool is a bool */
    return e;
  }
  bool both_fold = is_const(a) && is_const(b) && is_untyped(a->type) && is_untyped(b->type);
  if (both_fold)
    return fold_binary(c, e, a, b);
  if (op == OP_SHL || op == OP_SHR) {
    if (is_untyped(a->type))
      make_typed(a, default_type(a));
    if (is_untyped(b->type))
      make_typed(b, default_type(b));
    e->type = (tl_type)promote_int((tl_dtype)a->type);
    if (is_const(b)) {
      int64_t n = tl_dtype_is_signed((tl_dtype)b->type) || b->type == TL_BOOL ? b->val.i : (int64_t)b->val.u;
      if (n < 0 || n >= tl_dtype_bits((tl_dtype)e->type)) {
        ERR(e->pointer, b->column, "shift count %lld is outside [0, %d) for %s", (long long)n,
            tl_dtype_bits((tl_dtype)e->type), type_str(e->type));
        return NULL;
      }
    }
    return e;
  }
  tl_type t = unify(a, b);
  if (cmp) {
    e->type = TL_BOOL;
    return e;
  }
  e->type = t;
  return e;
}

static tl_expr *check_unary(C *c, tl_expr *e) {
  tl_expr *a = check_expr(c, e->args[0]);
  if (!a || !computable(c, a, tl_arena_printf(c->arena, "'%s'", tl_op_text(e->op))))
    return NULL;
  e->args[0] = a;
  if (e->op == OP_NOT) {
    if (is_const(a) && (is_untyped(a->type) || a->type == TL_BOOL)) {
      tl_scalar v = {.i = a->type == TL_TY_UREAL ? a->val.f == 0 : a->val.i == 0};
      return mk_const(c, e, TL_BOOL, v);
    }
    if (is_untyped(a->type))
      make_typed(a, default_type(a));
    e->type = TL_BOOL;
    return e;
  }
  if (e->op == '~' && is_float_t(a->type)) {
    ERR(e->pointer, e->column, "'~' needs an integer operand, not %s", type_str(a->type));
    return NULL;
  }
  if (is_const(a) && is_untyped(a->type)) {
    tl_scalar v = a->val;
    if (a->type == TL_TY_UREAL)
      v.f = -v.f;
    else if (e->op == '~')
      v.i = ~v.i;
    else if (v.i == INT64_MIN) {
      ERR(e->pointer, e->column, "integer overflow in a constant expression (constants fold in int64)");
      return NULL;
    } else
      v.i = -v.i;
    return mk_const(c, e, a->type, v);
  }
  if (e->op == '-' && is_const(a) && is_float_t(a->type)) {
    tl_scalar v = {.f = -a->val.f};
    return mk_const(c, e, a->type, v);
  }
  e->type = is_float_t(a->type) ? a->type : (tl_type)promote_int((tl_dtype)a->type);
  return e;
}

/* Reads a dtype name argument (a bare name such as float32). */
static bool dtype_arg(C *c, tl_expr *call, tl_expr *a, tl_dtype *out) {
  if (a->kind == E_NAME && tl_dtype_parse(a->name, out))
    return true;
  if (a->kind == E_NAME && !lookup(c, a->name)) {
    /* a misspelt dtype, as the dtype fields of allocations report it */
    const char *names[TL_DTYPE_COUNT];
    for (int i = 0; i < TL_DTYPE_COUNT; i++)
      names[i] = tl_dtype_name((tl_dtype)i);
    const char *hint = tl_closest(a->name, names, TL_DTYPE_COUNT);
    if (hint)
      ERR(a->pointer, a->column, "unknown dtype '%s'; did you mean '%s'?", a->name, hint);
    else
      ERR(a->pointer, a->column, "unknown dtype '%s'; '%s' needs a dtype name here (e.g. float32)", a->name,
          call->name);
    return false;
  }
  ERR(a->pointer, a->column, "'%s' needs a dtype name here (e.g. float32)", call->name);
  return false;
}

static tl_expr *check_call(C *c, tl_expr *e) {
  tl_fn f = FN_NONE;
  tl_dtype cast_to;
  bool dtype_call = tl_dtype_parse(e->name, &cast_to);
  for (int i = 1; i < FN_COUNT && !dtype_call; i++)
    if (strcmp(tl_fn_name((tl_fn)i), e->name) == 0)
      f = (tl_fn)i;
  tl_sym *s = lookup(c, e->name);
  if (f != FN_NONE && !tl_fn_reserved(f) && s) /* the program's name wins (proto/tile-ir-v1.md 7.5) */
    f = FN_NONE;
  if (f == FN_NONE && !dtype_call) {
    const char *names[FN_COUNT + TL_DTYPE_COUNT];
    int n = 0;
    for (int i = 1; i < FN_COUNT; i++)
      names[n++] = tl_fn_name((tl_fn)i);
    for (int i = 0; i < TL_DTYPE_COUNT; i++)
      names[n++] = tl_dtype_name((tl_dtype)i);
    const char *hint = tl_closest(e->name, names, n);
    if (s)
      ERR(e->pointer, e->column, "'%s' is %s, not a function", e->name, sym_kind_name(s));
    else if (hint)
      ERR(e->pointer, e->column, "unknown function '%s'; did you mean '%s'?", e->name, hint);
    else
      ERR(e->pointer, e->column, "unknown function '%s'", e->name);
    return NULL;
  }
  int want = dtype_call ? 1 : tl_fn_nargs(f);
  if (e->nargs != want) {
    ERR(e->pointer, e->column, "'%s' takes %d argument%s, not %d", e->name, want, want == 1 ? "" : "s", e->nargs);
    return NULL;
  }
  tl_fn fn = dtype_call ? FN_CAST : f;
  e->fn = fn;
  /* functions with a dtype argument */
  if (fn == FN_INFINITY || fn == FN_MAX_VALUE || fn == FN_MIN_VALUE) {
    tl_dtype t;
    if (!dtype_arg(c, e, e->args[0], &t))
      return NULL;
    if (fn == FN_INFINITY && !tl_dtype_has_inf(t)) {
      ERR(e->args[0]->pointer, e->args[0]->column, "%s has no infinity; use max_value(%s)", tl_dtype_name(t),
          tl_dtype_name(t));
      return NULL;
    }
    if (t == TL_BOOL) {
      ERR(e->args[0]->pointer, e->args[0]->column, "'%s' needs a numeric dtype, not bool", e->name);
      return NULL;
    }
    tl_scalar v = fn == FN_MAX_VALUE ? tl_dtype_max(t) : fn == FN_MIN_VALUE ? tl_dtype_min(t) : (tl_scalar){.f = INFINITY};
    return mk_const(c, e, (tl_type)t, v);
  }
  if (fn == FN_CAST || fn == FN_REINTERPRET) {
    tl_dtype t = cast_to;
    if (!dtype_call && !dtype_arg(c, e, e->args[1], &t))
      return NULL;
    tl_expr *x = check_expr(c, e->args[0]);
    if (!x)
      return NULL;
    e->args[0] = x;
    e->nargs = 1;
    e->dtype_arg = t;
    if (is_untyped(x->type))
      make_typed(x, default_type(x));
    if (fn == FN_REINTERPRET && (x->type == TL_BOOL || t == TL_BOOL)) {
      /* a bool's bits are not a number's (proto/tile-ir-v1.md 6.5) */
      const tl_expr *bad = x->type == TL_BOOL ? x : e->args[1];
      ERR(bad->pointer, bad->column, "reinterpret does not take bool; use cast");
      return NULL;
    }
    if (fn == FN_REINTERPRET && tl_dtype_bits((tl_dtype)x->type) != tl_dtype_bits(t)) {
      ERR(e->pointer, e->column, "reinterpret needs the same bit width: %s is %d bits and %s is %d",
          type_str(x->type), tl_dtype_bits((tl_dtype)x->type), tl_dtype_name(t), tl_dtype_bits(t));
      return NULL;
    }
    if (is_const(x))
      return mk_const(c, e, (tl_type)t,
                      fn == FN_CAST ? tl_convert(x->val, (tl_dtype)x->type, t)
                                    : tl_reinterpret(x->val, (tl_dtype)x->type, t));
    e->type = (tl_type)t;
    return e;
  }
  if (fn == FN_THREAD_BINDING) {
    tl_expr *d = check_expr(c, e->args[0]);
    if (!d)
      return NULL;
    if (!is_const(d) || !is_int_t(d->type) || d->val.i < 0 || d->val.i > 2) {
      ERR(d->pointer, d->column, "thread_binding takes a constant 0, 1 or 2 (the x, y or z thread index)");
      return NULL;
    }
    if (c->where != CTX_BODY) {
      ERR(e->pointer, e->column, "thread_binding is only available in the kernel body");
      return NULL;
    }
    make_typed(d, TL_INT32);
    e->args[0] = d;
    c->saw_varying = c->saw_thread = true;
    e->type = TL_INT32;
    return e;
  }
  /* ordinary functions: check the arguments */
  for (int i = 0; i < e->nargs; i++) {
    if (!(e->args[i] = check_expr(c, e->args[i])) ||
        !computable(c, e->args[i], tl_arena_printf(c->arena, "'%s'", e->name)))
      return NULL;
  }
  tl_expr **a = e->args;
  bool all_untyped = true;
  for (int i = 0; i < e->nargs; i++)
    all_untyped &= is_const(a[i]) && is_untyped(a[i]->type);
  switch (fn) {
  case FN_IF_THEN_ELSE: {
    tl_expr *cond = a[0];
    if (is_untyped(cond->type))
      make_typed(cond, default_type(cond));
    tl_type t = unify(a[1], a[2]);
    if (is_const(cond)) {
      bool take = tl_dtype_is_float((tl_dtype)cond->type) ? cond->val.f != 0 : cond->val.i != 0;
      tl_expr *side = take ? a[1] : a[2];
      if (side->type == t)
        return side;
      if (is_const(side) && !is_untyped(t))
        return mk_const(c, side, t, tl_convert(side->val, (tl_dtype)side->type, (tl_dtype)t));
    }
    e->type = t;
    return e;
  }
  case FN_CEILDIV:
    for (int i = 0; i < 2; i++)
      if (!is_int_t(a[i]->type) || a[i]->type == TL_BOOL) {
        ERR(a[i]->pointer, a[i]->column, "ceildiv is for integers; this argument is %s", type_str(a[i]->type));
        return NULL;
      }
    if (all_untyped) {
      if (a[1]->val.i == 0) {
        ERR(a[1]->pointer, a[1]->column, "division by zero in a constant expression");
        return NULL;
      }
      tl_scalar v = {.i = -tl_floordiv64(-a[0]->val.i, a[1]->val.i)};
      return mk_const(c, e, TL_TY_UINT, v);
    }
    e->type = unify(a[0], a[1]);
    return e;
  case FN_CLAMP: /* min(max(x, lo), hi) */
    if (all_untyped) {
      tl_scalar v;
      tl_type t;
      if (a[0]->type == TL_TY_UINT && a[1]->type == TL_TY_UINT && a[2]->type == TL_TY_UINT) {
        v.i = a[0]->val.i < a[1]->val.i ? a[1]->val.i : a[0]->val.i;
        v.i = v.i < a[2]->val.i ? v.i : a[2]->val.i;
        t = TL_TY_UINT;
      } else {
        v.f = fmin(fmax(as_real(a[0]), as_real(a[1])), as_real(a[2]));
        t = TL_TY_UREAL;
      }
      return mk_const(c, e, t, v);
    }
    e->type = unify_all(a, 3);
    return e;
  case FN_ISNAN:
  case FN_ISINF: {
    double x = as_real(a[0]);
    if (is_const(a[0])) {
      bool r = is_float_t(a[0]->type) ? (fn == FN_ISNAN ? isnan(x) : isinf(x)) : false;
      return mk_const(c, e, TL_BOOL, (tl_scalar){.i = r});
    }
    e->type = TL_BOOL;
    return e;
  }
  case FN_MIN:
  case FN_MAX:
    if (all_untyped) {
      tl_scalar v;
      tl_type t;
      if (a[0]->type == TL_TY_UINT && a[1]->type == TL_TY_UINT) {
        v.i = (fn == FN_MIN) == (a[0]->val.i < a[1]->val.i) ? a[0]->val.i : a[1]->val.i;
        t = TL_TY_UINT;
      } else {
        double x = as_real(a[0]), y = as_real(a[1]);
        v.f = fn == FN_MIN ? fmin(x, y) : fmax(x, y);
        t = TL_TY_UREAL;
      }
      return mk_const(c, e, t, v);
    }
    e->type = unify(a[0], a[1]);
    return e;
  case FN_ABS:
    if (all_untyped) {
      tl_scalar v = a[0]->val;
      if (a[0]->type == TL_TY_UREAL)
        v.f = fabs(v.f);
      else if (v.i == INT64_MIN) {
        ERR(e->pointer, e->column, "integer overflow in a constant expression (constants fold in int64)");
        return NULL;
      } else
        v.i = v.i < 0 ? -v.i : v.i;
      return mk_const(c, e, a[0]->type, v);
    }
    e->type = is_float_t(a[0]->type) ? a[0]->type : (tl_type)promote_int((tl_dtype)a[0]->type);
    return e;
  case FN_POW:
  case FN_FMA: {
    if (all_untyped) {
      tl_scalar v = {.f = fn == FN_POW ? pow(as_real(a[0]), as_real(a[1]))
                                       : fma(as_real(a[0]), as_real(a[1]), as_real(a[2]))};
      return mk_const(c, e, TL_TY_UREAL, v);
    }
    /* the common float type of the typed arguments; integers count as float32 */
    tl_dtype t = TL_DTYPE_COUNT;
    for (int i = 0; i < e->nargs; i++)
      if (!is_untyped(a[i]->type)) {
        tl_dtype at = tl_dtype_is_float((tl_dtype)a[i]->type) ? (tl_dtype)a[i]->type : TL_FLOAT32;
        t = t == TL_DTYPE_COUNT ? at : tl_common_dtype(t, at);
      }
    for (int i = 0; i < e->nargs; i++)
      make_typed(a[i], t);
    e->type = (tl_type)t;
    return e;
  }
  default: /* one-argument math functions */
    if (all_untyped) {
      tl_scalar v;
      if (!tl_math1(fn, as_real(a[0]), &v.f))
        assert(!"a function of one argument without a float64 value");
      return mk_const(c, e, TL_TY_UREAL, v);
    }
    e->type = is_float_t(a[0]->type) ? a[0]->type : TL_FLOAT32;
    return e;
  }
}

static tl_expr *check_name(C *c, tl_expr *e) {
  tl_sym *s = lookup(c, e->name);
  if (!s) {
    tl_dtype t;
    if (tl_dtype_parse(e->name, &t))
      ERR(e->pointer, e->column, "'%s' is a dtype; dtypes are only arguments of cast, reinterpret, infinity, "
                                 "max_value and min_value", e->name);
    else {
      const char *hint = suggest(c, e->name, is_valueish);
      if (hint)
        ERR(e->pointer, e->column, "unknown name '%s'; did you mean '%s'?", e->name, hint);
      else
        ERR(e->pointer, e->column, "unknown name '%s'", e->name);
    }
    return NULL;
  }
  if (is_bufferish(s)) {
    ERR(e->pointer, e->column, "'%s' is %s; read an element with '%s[...]' (one index per dimension)", s->name,
        sym_kind_name(s), s->name);
    return NULL;
  }
  if (s->kind == SYM_CONST) {
    if (s->type == TL_TY_NONE)
      return NULL; /* its own definition failed, and that was reported */
    return mk_const(c, e, s->type, s->cval);
  }
  /* a let bound to a constant expression is a named constant (proto 5.4):
   * usable wherever constants are, shapes included */
  if (s->kind == SYM_LET && s->init && is_const(s->init))
    return mk_const(c, e, s->init->type, s->init->val);
  if (c->where == CTX_CONST) {
    ERR(e->pointer, e->column, "'%s' is %s; only constants may be used here", s->name, sym_kind_name(s));
    return NULL;
  }
  if (c->where == CTX_LAUNCH && s->kind != SYM_SCALAR) {
    ERR(e->pointer, e->column, "'%s' is %s; only constants and scalar parameters may be used here", s->name,
        sym_kind_name(s));
    return NULL;
  }
  if (s->varying)
    c->saw_varying = true;
  if (s->kind == SYM_VAR)
    c->saw_varying = true;
  else if (s->varying && s->kind != SYM_VAR)
    c->saw_thread |= s->thread_dep;
  e->sym = s;
  e->type = s->type;
  return e;
}

static tl_expr *check_index(C *c, tl_expr *e) {
  bool writing = c->writing; /* this element is written (its indices are read) */
  c->writing = false;
  tl_sym *s = lookup(c, e->name);
  if (!s) {
    const char *hint = suggest(c, e->name, is_bufferish);
    if (hint)
      ERR(e->pointer, e->column, "unknown buffer '%s'; did you mean '%s'?", e->name, hint);
    else
      ERR(e->pointer, e->column, "unknown buffer '%s'", e->name);
    return NULL;
  }
  if (!is_bufferish(s)) {
    ERR(e->pointer, e->column, "'%s' is %s, not a buffer; it cannot be indexed", s->name, sym_kind_name(s));
    return NULL;
  }
  if (c->where != CTX_BODY) {
    ERR(e->pointer, e->column, "buffer elements cannot be read here");
    return NULL;
  }
  if (e->nargs != s->ndim) {
    ERR(e->pointer, e->column, "'%s' has %d dimension%s but %d ind%s given", s->name, s->ndim, s->ndim == 1 ? "" : "s",
        e->nargs, e->nargs == 1 ? "ex is" : "ices are");
    return NULL;
  }
  if (s->kind == SYM_BUFFER && s->scope == SCOPE_FRAGMENT && !c->in_parallel && !c->in_tile_op) {
    ERR(e->pointer, e->column, "fragment '%s' is %s by thread-level code; fragments are only read and written "
                               "by tile operators and parallel loops (each element lives in one thread's registers); %s",
        s->name, writing ? "written" : "read",
        writing ? "write it in a parallel loop" : "test it in a parallel loop, or copy it to a shared buffer and read that");
    return NULL;
  }
  if (s->kind == SYM_BUFFER && s->scope == SCOPE_LOCAL) {
    if (c->in_parallel) {
      ERR(e->pointer, e->column, "local buffer '%s' is per-thread and cannot be used in a parallel loop", s->name);
      return NULL;
    }
    c->saw_varying = c->saw_thread = true;
  }
  bool ok = true;
  for (int i = 0; i < e->nargs; i++) {
    tl_expr *x = check_expr(c, e->args[i]);
    if (!x || !want_int(c, x, "an index")) {
      ok = false;
      continue;
    }
    if (is_untyped(x->type))
      make_typed(x, default_type(x));
    e->args[i] = x;
    if (s->kind == SYM_BUFFER && is_const(x)) {
      int64_t v = tl_dtype_is_signed((tl_dtype)x->type) ? x->val.i : (int64_t)x->val.u;
      if (v < 0 || v >= s->dims[i]) {
        ERR(x->pointer, x->column, "index %lld is outside dimension %d of '%s' (size %lld)", (long long)v, i, s->name,
            (long long)s->dims[i]);
        ok = false;
      }
    }
  }
  if (!ok)
    return NULL;
  e->sym = s;
  e->type = (tl_type)s->dtype;
  return e;
}

static tl_expr *check_expr(C *c, tl_expr *e) {
  if (!e)
    return NULL;
  e->type = e->kind == E_CONST ? e->type : TL_TY_NONE;
  switch (e->kind) {
  case E_CONST: return e;
  case E_NAME: return check_name(c, e);
  case E_INDEX: return check_index(c, e);
  case E_UNARY: return check_unary(c, e);
  case E_BINARY: return check_binary(c, e);
  case E_CALL: return check_call(c, e);
  }
  return NULL;
}

/* Checks an expression that must fold to a constant. */
static tl_expr *const_expr(C *c, tl_expr *e, const char *what) {
  if (!e)
    return NULL;
  int where = c->where;
  c->where = CTX_CONST;
  tl_expr *x = check_expr(c, e);
  c->where = where;
  if (x && !is_const(x)) {
    ERR(x->pointer, x->column, "%s must be a constant expression", what);
    return NULL;
  }
  return x;
}

static bool const_int(C *c, tl_expr *e, const char *what, int64_t lo, int64_t hi, int64_t *out) {
  tl_expr *x = const_expr(c, e, what);
  if (!x)
    return false;
  if (!is_int_t(x->type) || x->type == TL_BOOL) {
    ERR(x->pointer, x->column, "%s must be an integer, not %s", what, type_str(x->type));
    return false;
  }
  int64_t v = (x->type >= 0 && x->type < TL_DTYPE_COUNT && !tl_dtype_is_signed((tl_dtype)x->type)) ? (int64_t)x->val.u
                                                                                                     : x->val.i;
  if (v < lo || v > hi) {
    if (hi == INT64_MAX)
      ERR(x->pointer, x->column, "%s is %lld; it must be at least %lld", what, (long long)v, (long long)lo);
    else
      ERR(x->pointer, x->column, "%s is %lld; it must be from %lld to %lld", what, (long long)v, (long long)lo,
          (long long)hi);
    return false;
  }
  *out = v;
  return true;
}

static bool const_bool(C *c, tl_expr *e, const char *what, bool dflt) {
  if (!e)
    return dflt;
  tl_expr *x = const_expr(c, e, what);
  if (!x)
    return dflt;
  if (x->type != TL_BOOL) {
    ERR(x->pointer, x->column, "%s must be true or false, not %s", what, type_str(x->type));
    return dflt;
  }
  return x->val.i != 0;
}

/* Checks a run-time expression in the body; reports whether it varies
 * between threads through *varying (and *thread: through thread_binding or
 * a local buffer rather than only an alloc_var). */
static tl_expr *body_expr(C *c, tl_expr *e, bool *varying, bool *thread) {
  bool sv = c->saw_varying, st = c->saw_thread;
  c->saw_varying = c->saw_thread = false;
  tl_expr *x = check_expr(c, e);
  if (varying)
    *varying = c->saw_varying;
  if (thread)
    *thread = c->saw_thread;
  if (x && c->in_parallel && c->saw_thread) {
    ERR(x->pointer, x->column, "a parallel loop is block-level: its body may not depend on the thread index");
    x = NULL;
  }
  c->saw_varying = sv || c->saw_varying;
  c->saw_thread = st || c->saw_thread;
  return x;
}

/* ---- constants and overrides ----------------------------------------------------- */
static bool parse_override_value(tl_arena *a, const char *text, tl_type *t, tl_scalar *v) {
  if (strcmp(text, "true") == 0 || strcmp(text, "True") == 0) {
    *t = TL_BOOL;
    v->i = 1;
    return true;
  }
  if (strcmp(text, "false") == 0 || strcmp(text, "False") == 0) {
    *t = TL_BOOL;
    v->i = 0;
    return true;
  }
  tl_diags d = {.arena = a};
  tl_expr *e = tl_parse_expr(a, text, "", &d);
  if (!e)
    return false;
  bool neg = false;
  if (e->kind == E_UNARY && e->op == '-') {
    neg = true;
    e = e->args[0];
  }
  if (e->kind != E_CONST || e->type == TL_BOOL)
    return false;
  *t = e->type;
  *v = e->val;
  if (neg) {
    if (e->type == TL_TY_UREAL)
      v->f = -v->f;
    else
      v->i = -v->i;
  }
  return true;
}

static const char *kind_word(tl_type t) {
  return t == TL_TY_UINT ? "an integer" : t == TL_TY_UREAL ? "a real" : t == TL_BOOL ? "a boolean" : "a value";
}

/* Evaluates every constant, each after the constants it names (any order
 * in the document; a cycle is an error naming it). */
typedef struct {
  int *state; /* 0 not yet, 1 in progress, 2 done */
  int *path;  /* the constants in progress, outermost first */
  int depth;
} const_walk;

static void eval_const(C *c, const_walk *w, int idx);

static void eval_constants(C *c) {
  tl_program *p = c->prog;
  const_walk w = {.state = tl_arena_alloc(c->arena, sizeof(int) * (size_t)(p->nconsts + 1)),
                  .path = tl_arena_alloc(c->arena, sizeof(int) * (size_t)(p->nconsts + 1))};
  for (int i = 0; i < p->nconsts; i++)
    p->consts[i]->type = TL_TY_NONE;
  for (int i = 0; i < p->nconsts; i++)
    eval_const(c, &w, i);
}

static void check_constants(C *c, const tl_define *defs, int ndefs) {
  tl_program *p = c->prog;
  /* The kind an override must keep is that of the constant's own value:
   * evaluate the definitions once without overrides, quietly (their errors
   * are reported by the real evaluation below). */
  tl_expr **orig = tl_arena_alloc(c->arena, sizeof(tl_expr *) * (size_t)(p->nconsts + 1));
  tl_type *kind = tl_arena_alloc(c->arena, sizeof(tl_type) * (size_t)(p->nconsts + 1));
  for (int i = 0; i < p->nconsts; i++) {
    orig[i] = p->consts[i]->init;
    p->consts[i]->init = tl_expr_copy(c->arena, orig[i]); /* checking folds in place */
  }
  if (ndefs > 0) {
    tl_diags quiet = {.arena = c->arena};
    tl_diags *saved = c->diags;
    c->diags = &quiet;
    eval_constants(c);
    c->diags = saved;
    for (int i = 0; i < p->nconsts; i++) {
      kind[i] = p->consts[i]->type;
      p->consts[i]->init = orig[i];
    }
  }
  for (int i = 0; i < ndefs; i++) {
    int j = 0;
    while (j < p->nconsts && strcmp(p->consts[j]->name, defs[i].name) != 0)
      j++;
    if (j == p->nconsts) {
      const char *names[TL_MAX_CONSTANTS];
      for (int k = 0; k < p->nconsts; k++)
        names[k] = p->consts[k]->name;
      const char *hint = tl_closest(defs[i].name, names, p->nconsts);
      if (hint)
        ERR("/constants", 0, "override of unknown constant '%s'; did you mean '%s'?", defs[i].name, hint);
      else
        ERR("/constants", 0, "override of unknown constant '%s'; only the program's constants can be set",
            defs[i].name);
      continue;
    }
    tl_sym *s = p->consts[j];
    tl_type t;
    tl_scalar v;
    if (!parse_override_value(c->arena, defs[i].value, &t, &v)) {
      ERR(s->pointer, 0, "override of '%s': '%s' is not a number or a boolean", s->name, defs[i].value);
      continue;
    }
    if (kind[j] == TL_TY_UREAL && t == TL_TY_UINT) {
      v.f = (double)v.i; /* an integer may set a real constant */
      t = TL_TY_UREAL;
    }
    if (kind[j] != TL_TY_NONE && kind[j] != t) {
      ERR(s->pointer, 0, "override of '%s' must keep its kind: it is %s, and '%s' is %s", s->name,
          kind_word(kind[j]), defs[i].value, kind_word(t));
      continue;
    }
    tl_expr *lit = mk_const(c, orig[j] ? orig[j] : &(tl_expr){.pointer = s->pointer}, t, v);
    lit->pointer = s->pointer;
    lit->column = 0;
    s->init = lit;
  }
  eval_constants(c);
}

static void eval_const(C *c, const_walk *w, int idx) {
  tl_program *p = c->prog;
  tl_sym *s = p->consts[idx];
  if (w->state[idx] == 2)
    return;
  if (w->state[idx] == 1) {
    int from = 0;
    while (w->path[from] != idx)
      from++;
    char *chain = tl_arena_strdup(c->arena, "");
    for (int k = from; k < w->depth; k++)
      chain = tl_arena_printf(c->arena, "%s%s -> ", chain, p->consts[w->path[k]]->name);
    ERR(s->pointer, 0, "constants form a cycle: %s%s", chain, s->name);
    return;
  }
  w->state[idx] = 1;
  w->path[w->depth++] = idx;
  /* evaluate the constants this one names first */
  tl_vec stack = {0};
  tl_vec_push(c->arena, &stack, s->init);
  while (stack.n) {
    tl_expr *e = stack.items[--stack.n];
    if (!e)
      continue;
    if (e->kind == E_NAME)
      for (int j = 0; j < p->nconsts; j++)
        if (strcmp(p->consts[j]->name, e->name) == 0)
          eval_const(c, w, j);
    if (e->kind != E_NAME)
      for (int i = 0; i < e->nargs; i++)
        tl_vec_push(c->arena, &stack, e->args[i]);
  }
  w->depth--;
  w->state[idx] = 2;
  const tl_sym *saved = c->const_being_defined;
  c->const_being_defined = s;
  tl_expr *v = const_expr(c, s->init, "a constant's value");
  c->const_being_defined = saved;
  if (!v)
    return;
  if (!is_untyped(v->type) && v->type != TL_BOOL) {
    /* a typed constant (e.g. float16(0.5)) folds to its value as an untyped number */
    if (tl_dtype_is_float((tl_dtype)v->type))
      v = mk_const(c, v, TL_TY_UREAL, (tl_scalar){.f = v->val.f});
    else
      v = mk_const(c, v, TL_TY_UINT, tl_convert(v->val, (tl_dtype)v->type, TL_INT64));
  }
  s->type = v->type;
  s->cval = v->val;
}

/* ---- parameters and launch ----------------------------------------------------- */
/* A packed type's rows are whole bytes: the innermost extent times the
 * bits is a multiple of 8 (proto/tile-ir-v1.md 7.1).  inner: the innermost
 * extent when constant, else negative (a tensor's is checked at launch). */
static void check_packed_rows(C *c, const tl_sym *s, int64_t inner) {
  if (!tl_dtype_is_packed(s->dtype) || inner < 0)
    return;
  int bits = tl_dtype_bits(s->dtype), per = 8 / bits;
  if (inner % per != 0)
    ERR(s->shape[s->ndim - 1]->pointer, 0,
        "'%s' is %s (%d bits, %d per byte), so its innermost dimension must be a multiple of %d, not %lld", s->name,
        tl_dtype_name(s->dtype), bits, per, per, (long long)inner);
}

/* The dimensions of a tensor (or a tensor's view): integer expressions over
 * constants and scalar parameters, evaluated at launch; dims[d] is the
 * folded value, or -1 when dynamic.  Returns false on an error. */
static bool check_tensor_dims(C *c, tl_sym *s) {
  int saved = c->where;
  int before = c->diags->n;
  c->where = CTX_LAUNCH;
  for (int d = 0; d < s->ndim; d++) {
    s->dims[d] = -1;
    tl_expr *x = check_expr(c, s->shape[d]);
    if (!x || !want_int(c, x, "a tensor dimension"))
      continue;
    if (is_untyped(x->type))
      make_typed(x, TL_INT64);
    s->shape[d] = x;
    if (is_const(x)) {
      int64_t v = tl_dtype_is_signed((tl_dtype)x->type) ? x->val.i : (int64_t)x->val.u;
      if (v < 0)
        ERR(x->pointer, x->column, "tensor dimension is %lld; it must not be negative", (long long)v);
      s->dims[d] = v;
    }
  }
  check_packed_rows(c, s, s->dims[s->ndim - 1]);
  c->where = saved;
  return c->diags->n == before;
}

static void check_params(C *c) {
  tl_program *p = c->prog;
  c->where = CTX_LAUNCH;
  for (int i = 0; i < p->nparams; i++) {
    tl_sym *s = p->params[i];
    if (s->kind == SYM_TENSOR)
      check_tensor_dims(c, s);
  }
  for (int i = 0; i < p->ngrid; i++) {
    tl_expr *x = check_expr(c, p->grid[i]);
    if (!x || !want_int(c, x, "a grid dimension"))
      continue;
    if (is_untyped(x->type))
      make_typed(x, TL_INT64);
    p->grid[i] = x;
    if (is_const(x) && (tl_dtype_is_signed((tl_dtype)x->type) ? x->val.i : (int64_t)x->val.u) < 0)
      ERR(x->pointer, x->column, "grid dimension is negative");
    if (is_const(x) && x->val.i > (i == 0 ? 2147483647LL : 65535)) /* CUDA's limits */
      ERR(x->pointer, x->column, "grid dimension %d is %lld; the limit is %lld", i, (long long)x->val.i,
          i == 0 ? 2147483647LL : 65535LL);
  }
  /* the cluster's dimensions: constant int-exprs, each 1 to 16 */
  c->where = CTX_CONST;
  p->cluster[0] = p->cluster[1] = p->cluster[2] = 1;
  bool cl_ok = true;
  for (int i = 0; i < p->ncluster; i++) {
    int64_t n = 1;
    if (const_int(c, p->cluster_expr[i], "a cluster dimension", 1, 16, &n))
      p->cluster[i] = n;
    else
      cl_ok = false;
  }
  c->where = CTX_LAUNCH;
  /* each grid extent is a multiple of the cluster's (proto/tile-ir-v1.md 4;
   * a dynamic extent is checked at launch); a missing dimension is 1 */
  for (int i = 0; cl_ok && i < p->ncluster; i++) {
    int64_t cl = p->cluster[i];
    if (cl == 1)
      continue;
    if (i >= p->ngrid) {
      ERR(tl_ptr_index(c->arena, tl_ptr_key(c->arena, p->kptr, "cluster"), i), 0, "the cluster's dimension %d is %lld, but the grid has "
          "%d dimension%s (its extent in that dimension is 1)", i, (long long)cl, p->ngrid, p->ngrid == 1 ? "" : "s");
      continue;
    }
    const tl_expr *x = p->grid[i];
    if (x && is_const(x) && x->type != TL_TY_NONE && x->val.i > 0 && x->val.i % cl != 0)
      ERR(x->pointer, x->column, "grid dimension %d is %lld, which is not a multiple of the cluster's %lld", i,
          (long long)x->val.i, (long long)cl);
  }
  c->where = CTX_CONST;
  int64_t total = 1;
  p->threads[0] = p->threads[1] = p->threads[2] = 1;
  for (int i = 0; i < p->nthreads_dims; i++) {
    int64_t v;
    if (const_int(c, p->threads_expr[i], "a thread count", 1, TL_MAX_THREADS, &v)) {
      p->threads[i] = v;
      total *= v;
    }
  }
  if (total > TL_MAX_THREADS)
    ERR(tl_ptr_key(c->arena, p->kptr, "threads"), 0, "the block has %lld threads; the limit is %d", (long long)total, TL_MAX_THREADS);
  p->no_persistent = !const_bool(c, p->persistent_expr, "'persistent'", true);
  c->where = CTX_BODY;
}

/* The workspaces' bytes together, where their shapes are constant, within
 * TL_MAX_WORKSPACE_BYTES (a dynamic shape is checked by the launcher). */
static void check_workspaces(C *c) {
  tl_program *p = c->prog;
  double total = 0;
  for (int i = tl_user_params(p); i < p->nparams; i++) {
    const tl_sym *s = p->params[i];
    double n = (double)tl_dtype_bits(s->dtype) / 8;
    for (int d = 0; d < s->ndim; d++)
      n *= s->dims[d] < 0 ? 0 : (double)s->dims[d];
    total += n;
    if (total > (double)TL_MAX_WORKSPACE_BYTES)
      ERR(tl_ptr_key(c->arena, s->pointer, "shape"), 0, "the workspaces take %.0f bytes up to '%s'; the limit is "
          "%lld (16 GiB)", total, s->name, (long long)TL_MAX_WORKSPACE_BYTES);
    if (total > (double)TL_MAX_WORKSPACE_BYTES)
      return;
  }
}

/* ---- regions ------------------------------------------------------------------------ */
/* A linear form sum(coef * atom) + k, for proving that hi - lo is constant. */
typedef struct {
  int n;
  const char *atom[16];
  int64_t coef[16];
  int64_t k;
  bool ok;
} affine;

static void aff_add(C *c, affine *f, const tl_expr *e, int64_t mul);

static void aff_atom(C *c, affine *f, const tl_expr *e, int64_t mul) {
  const char *key = tl_expr_str(c->arena, e);
  for (int i = 0; i < f->n; i++)
    if (strcmp(f->atom[i], key) == 0) {
      f->coef[i] += mul;
      return;
    }
  if (f->n == 16) {
    f->ok = false;
    return;
  }
  f->atom[f->n] = key;
  f->coef[f->n++] = mul;
}

static void aff_add(C *c, affine *f, const tl_expr *e, int64_t mul) {
  if (!f->ok)
    return;
  if (e->kind == E_CONST && is_int_t(e->type)) {
    f->k += mul * (tl_dtype_is_signed((tl_dtype)e->type) || is_untyped(e->type) || e->type == TL_BOOL ? e->val.i
                                                                                                        : (int64_t)e->val.u);
    return;
  }
  if (e->kind == E_BINARY && (e->op == '+' || e->op == '-')) {
    aff_add(c, f, e->args[0], mul);
    aff_add(c, f, e->args[1], e->op == '-' ? -mul : mul);
    return;
  }
  if (e->kind == E_UNARY && e->op == '-') {
    aff_add(c, f, e->args[0], -mul);
    return;
  }
  if (e->kind == E_BINARY && e->op == '*') {
    if (is_const(e->args[1]) && is_int_t(e->args[1]->type)) {
      aff_add(c, f, e->args[0], mul * e->args[1]->val.i);
      return;
    }
    if (is_const(e->args[0]) && is_int_t(e->args[0]->type)) {
      aff_add(c, f, e->args[1], mul * e->args[0]->val.i);
      return;
    }
  }
  aff_atom(c, f, e, mul);
}

/* hi - lo when it is provably constant. */
static bool const_difference(C *c, const tl_expr *hi, const tl_expr *lo, int64_t *out) {
  affine f = {.ok = true};
  aff_add(c, &f, hi, 1);
  if (lo)
    aff_add(c, &f, lo, -1);
  if (!f.ok)
    return false;
  for (int i = 0; i < f.n; i++)
    if (f.coef[i] != 0)
      return false;
  *out = f.k;
  return true;
}

static tl_expr *const_int_expr(C *c, const tl_expr *at, int64_t v) {
  return mk_const(c, at, TL_INT32, (tl_scalar){.i = v});
}

/* Resolves a region's buffer and its written indices.  Start points (no
 * slices, not whole) keep ext unset (0) for match_regions to fill. */
static bool resolve_region(C *c, tl_region *r, bool allow_local) {
  if (!r)
    return false;
  tl_sym *s = lookup(c, r->name);
  if (!s) {
    const char *hint = suggest(c, r->name, is_bufferish);
    if (hint)
      ERR(r->pointer, 1, "unknown buffer '%s'; did you mean '%s'?", r->name, hint);
    else
      ERR(r->pointer, 1, "unknown buffer '%s'", r->name);
    return false;
  }
  if (!is_bufferish(s)) {
    ERR(r->pointer, 1, "'%s' is %s, not a buffer", r->name, sym_kind_name(s));
    return false;
  }
  if (s->kind == SYM_BUFFER && s->scope == SCOPE_LOCAL && !allow_local) {
    ERR(r->pointer, 1, "'%s' is a local (per-thread) buffer; tile operators work on global, shared and fragment "
                       "buffers", r->name);
    return false;
  }
  r->sym = s;
  r->ndim = s->ndim;
  if (r->whole) {
    for (int d = 0; d < s->ndim; d++) {
      if (s->dims[d] < 0) {
        ERR(r->pointer, 1, "dimension %d of '%s' is dynamic; give a region with constant extents, e.g. '%s[i, ...]' "
                           "with the other operand's shape", d, s->name, s->name);
        return false;
      }
      r->ext[d] = s->dims[d];
    }
    return true;
  }
  if (r->nwritten != s->ndim) {
    ERR(r->pointer, 1, "'%s' has %d dimension%s but the region gives %d", s->name, s->ndim, s->ndim == 1 ? "" : "s",
        r->nwritten);
    return false;
  }
  bool ok = true, any_slice = false;
  for (int d = 0; d < r->nwritten; d++) {
    bool varying = false;
    tl_expr *lo = r->w_lo[d] ? body_expr(c, r->w_lo[d], &varying, NULL) : NULL;
    tl_expr *hi = r->w_hi[d] ? body_expr(c, r->w_hi[d], &varying, NULL) : NULL;
    if ((r->w_lo[d] && !lo) || (r->w_hi[d] && !hi)) {
      ok = false;
      continue;
    }
    if ((lo && !want_int(c, lo, "a region index")) || (hi && !want_int(c, hi, "a region bound"))) {
      ok = false;
      continue;
    }
    if (varying) {
      ERR(r->pointer, r->w_col[d], "this index of '%s' depends on the thread; tile operators need the same region in "
                                   "every thread", s->name);
      ok = false;
      continue;
    }
    if (lo && is_untyped(lo->type))
      make_typed(lo, default_type(lo));
    if (hi && is_untyped(hi->type))
      make_typed(hi, default_type(hi));
    r->lo[d] = lo;
    if (!r->is_slice[d]) {
      r->ext[d] = 0; /* fixed below */
      continue;
    }
    any_slice = true;
    int64_t ext;
    if (!hi) {
      if (s->dims[d] < 0) {
        ERR(r->pointer, r->w_col[d], "the slice runs to the end of dynamic dimension %d of '%s'; give both bounds",
            d, s->name);
        ok = false;
        continue;
      }
      hi = const_int_expr(c, r->w_lo[d] ? r->w_lo[d] : &(tl_expr){.pointer = r->pointer, .column = r->w_col[d]},
                          s->dims[d]);
    }
    if (!const_difference(c, hi, lo, &ext)) {
      ERR(r->pointer, r->w_col[d], "the extent of this slice of '%s' is not a constant (hi - lo must not depend on "
                                   "run-time values)", s->name);
      ok = false;
      continue;
    }
    if (ext < 0) {
      ERR(r->pointer, r->w_col[d], "slice of '%s' has hi < lo", s->name);
      ok = false;
      continue;
    }
    if (ext == 0) {
      ERR(r->pointer, r->w_col[d], "slice of '%s' is empty", s->name);
      ok = false;
      continue;
    }
    r->ext[d] = ext;
  }
  if (!ok)
    return false;
  if (any_slice)
    for (int d = 0; d < r->ndim; d++)
      if (!r->is_slice[d])
        r->ext[d] = 1;
  r->whole = false;
  return true;
}

static bool is_start_point(const tl_region *r) {
  if (r->whole || !r->sym)
    return false;
  for (int d = 0; d < r->ndim; d++)
    if (r->is_slice[d])
      return false;
  return true;
}

static const char *ext_str(C *c, const int64_t *ext, int n) {
  char *s = tl_arena_strdup(c->arena, "[");
  for (int i = 0; i < n; i++)
    s = tl_arena_printf(c->arena, "%s%s%lld", s, i ? ", " : "", (long long)ext[i]);
  return tl_arena_printf(c->arena, "%s]", s);
}

static int squeeze(const int64_t *ext, int n, int64_t *out) {
  int m = 0;
  for (int i = 0; i < n; i++)
    if (ext[i] != 1)
      out[m++] = ext[i];
  return m;
}

/* Gives a start point the extents of the other operand, right-aligned. */
static bool fill_start_point(C *c, tl_region *r, const int64_t *ext, int n) {
  int64_t e[TL_MAX_DIMS];
  int m = n, skip = 0;
  while (m > r->ndim && ext[skip] == 1) {
    skip++;
    m--;
  }
  if (m > r->ndim) {
    ERR(r->pointer, 1, "the other operand has extents %s, which do not fit the %d dimension%s of '%s'",
        ext_str(c, ext, n), r->ndim, r->ndim == 1 ? "" : "s", r->sym->name);
    return false;
  }
  for (int i = 0; i < m; i++)
    e[i] = ext[skip + i];
  for (int d = 0; d < r->ndim; d++)
    r->ext[d] = d < r->ndim - m ? 1 : e[d - (r->ndim - m)];
  return true;
}

/* Checks that a shared/fragment region with constant start stays inside. */
static bool region_in_bounds(C *c, tl_region *r) {
  if (r->sym->kind != SYM_BUFFER)
    return true;
  for (int d = 0; d < r->ndim; d++) {
    int64_t lo = 0;
    if (r->lo[d]) {
      if (!is_const(r->lo[d]))
        continue;
      lo = r->lo[d]->val.i;
    }
    if (lo < 0 || lo + r->ext[d] > r->sym->dims[d]) {
      ERR(r->pointer, r->w_col[d] ? r->w_col[d] : 1,
          "the region covers [%lld, %lld) of dimension %d of '%s', which has size %lld", (long long)lo,
          (long long)(lo + r->ext[d]), d, r->sym->name, (long long)r->sym->dims[d]);
      return false;
    }
  }
  return true;
}

/* Resolves both operands of copy/atomic_add and matches their extents. */
static bool match_regions(C *c, tl_stmt *s, tl_region *src, tl_region *dst) {
  bool sp = is_start_point(src), dp = is_start_point(dst);
  if (sp && dp) {
    ERR(s->pointer, 0, "both regions of '%s' are start points; give the extents of one of them (a slice or the "
                       "whole buffer)", s->op_name);
    return false;
  }
  if (sp && !fill_start_point(c, src, dst->ext, dst->ndim))
    return false;
  if (dp && !fill_start_point(c, dst, src->ext, src->ndim))
    return false;
  int64_t a[TL_MAX_DIMS], b[TL_MAX_DIMS];
  int na = squeeze(src->ext, src->ndim, a), nb = squeeze(dst->ext, dst->ndim, b);
  bool same = na == nb;
  for (int i = 0; same && i < na; i++)
    same = a[i] == b[i];
  if (!same) {
    ERR(s->pointer, 0, "the regions of '%s' do not match: src '%s' has extents %s and dst '%s' has %s", s->op_name,
        src->text, ext_str(c, src->ext, src->ndim), dst->text, ext_str(c, dst->ext, dst->ndim));
    return false;
  }
  return region_in_bounds(c, src) & region_in_bounds(c, dst);
}

/* ---- statements ------------------------------------------------------------------------ */
static bool is_tile_level(const tl_stmt *s) {
  if (s->kind == S_ALLOC)
    return s->sym->scope != SCOPE_LOCAL;
  return s->kind == S_VIEW || (tl_stmt_kind_flags(s->kind) & TL_KIND_TILE);
}

static bool uniform_placement(C *c, tl_stmt *s) {
  if (c->varying_ctl) {
    ERR(s->pointer, 0, "'%s' sits under %s at %s whose %s depends on the thread; tile operators, parallel loops, "
                       "shared/fragment allocations and sync_threads need the same control path in every thread",
        s->op_name, c->varying_ctl->kind == S_IF ? "the if" : "the loop", c->varying_ctl->pointer,
        c->varying_ctl->kind == S_IF ? "condition" : "range");
    return false;
  }
  return true;
}

#define MAX_BUFFER_ELEMS (1LL << 30) /* proto/tile-ir-v1.md 5.4 */

static void check_alloc(C *c, tl_stmt *s) {
  tl_sym *b = s->sym;
  int64_t size = 1;
  int first_big = -1; /* the dimension that takes the count past the limit */
  bool all = true, overflow = false;
  for (int d = 0; d < b->ndim; d++) {
    int64_t v;
    if (!const_int(c, b->shape[d], "a buffer dimension", 1, INT32_MAX, &v)) {
      b->dims[d] = 1;
      all = false;
      continue;
    }
    b->dims[d] = v;
    overflow |= __builtin_mul_overflow(size, v, &size);
    if (first_big < 0 && (overflow || size > MAX_BUFFER_ELEMS))
      first_big = d;
  }
  if (first_big >= 0 && all) {
    if (overflow)
      ERR(b->shape[first_big]->pointer, 0, "buffer '%s' has more than 2^63 elements; the limit is %lld", b->name,
          MAX_BUFFER_ELEMS);
    else
      ERR(b->shape[first_big]->pointer, 0, "buffer '%s' has %lld elements; the limit is %lld", b->name,
          (long long)size, MAX_BUFFER_ELEMS);
  }
  if (all)
    check_packed_rows(c, b, b->dims[b->ndim - 1]);
  declare(c, b, s->pointer);
}

static const char *ext_str(C *c, const int64_t *ext, int n);

/* The size in bits of s as a constant product (*bits) times the dimensions
 * that are not constant (dyn[0..*ndyn), as printed). */
static void size_form(C *c, const tl_sym *s, int64_t *bits, const char **dyn, int *ndyn) {
  *bits = tl_dtype_bits(s->dtype);
  *ndyn = 0;
  for (int d = 0; d < s->ndim; d++) {
    if (s->dims[d] >= 0)
      *bits = __builtin_mul_overflow(*bits, s->dims[d], bits) ? -1 : *bits;
    else
      dyn[(*ndyn)++] = tl_expr_str(c->arena, s->shape[d]);
    if (*bits < 0)
      return;
  }
}

/* Whether the non-constant dimensions of two size forms are the same
 * expressions, as many times each. */
static bool same_dyn(const char **a, int na, const char **b, int nb) {
  if (na != nb)
    return false;
  bool used[TL_MAX_DIMS] = {0};
  for (int i = 0; i < na; i++) {
    int j = 0;
    while (j < nb && (used[j] || strcmp(a[i], b[j]) != 0))
      j++;
    if (j == nb)
      return false;
    used[j] = true;
  }
  return true;
}

/* A "view" (TileLang's T.view / T.reshape; proto/tile-ir-v1.md 5.4): a new
 * name for the memory of a tensor or shared buffer, with its own shape and
 * dtype and the same size in bytes, no copy.  The view of a view is one of
 * the first buffer.  A view of a tensor is a tensor (dimensions over
 * constants and scalar parameters); of a shared buffer a shared buffer
 * (constant dimensions). */
static void check_view(C *c, tl_stmt *s) {
  tl_sym *v = s->sym, *src = lookup(c, s->view_src);
  const char *sp = tl_ptr_key(c->arena, s->pointer, "src");
  bool top = false; /* a view is declared once for the whole kernel: loops may be emitted more than once */
  for (int i = 0; i < c->prog->body.n; i++)
    top |= c->prog->body.items[i] == s;
  if (!top) {
    ERR(s->pointer, 0, "a view stands in the kernel's body, not inside a loop, if or parallel loop");
    return;
  }
  if (!src) {
    const char *hint = suggest(c, s->view_src, is_bufferish);
    if (hint)
      ERR(sp, 0, "unknown buffer '%s'; did you mean '%s'?", s->view_src, hint);
    else
      ERR(sp, 0, "unknown buffer '%s'", s->view_src);
    return;
  }
  if (!(src->kind == SYM_TENSOR || (src->kind == SYM_BUFFER && src->scope == SCOPE_SHARED))) {
    ERR(sp, 0, "a view aliases a global tensor or a shared buffer; '%s' is %s%s", src->name, sym_kind_name(src),
        src->kind == SYM_BUFFER ? " (its elements live in registers, in a layout the compiler chooses)" : "");
    return;
  }
  tl_sym *root = (tl_sym *)tl_mem_root(src);
  if (src->kind == SYM_BUFFER && !s->view_keep_dtype && tl_dtype_bits(s->sym->dtype) != tl_dtype_bits(src->dtype) &&
      (tl_dtype_is_packed(s->sym->dtype) || tl_dtype_is_packed(src->dtype))) {
    ERR(tl_ptr_key(c->arena, s->pointer, "dtype"), 0, "a view of shared buffer '%s' (%s) as %s changes the width of "
        "packed elements; that is allowed for read-only tensors only (the reference interpreter holds each packed "
        "element in a byte of its own)", src->name, tl_dtype_name(src->dtype), tl_dtype_name(s->sym->dtype));
    return;
  }
  if (root->layout) {
    ERR(sp, 0, "'%s' has a layout (annotate_layout at %s); a view needs a row-major buffer", root->name,
        root->layout->pointer);
    return;
  }
  if (s->view_keep_dtype)
    v->dtype = src->dtype;
  if (s->view_keep_shape) {
    v->ndim = src->ndim;
    for (int d = 0; d < src->ndim; d++)
      v->shape[d] = src->shape[d];
  }
  v->view_of = root;
  if (src->kind == SYM_TENSOR) {
    v->kind = SYM_TENSOR;
    v->scope = SCOPE_GLOBAL;
    v->align = root->align;
    v->smem_offset = -1;
    if (!check_tensor_dims(c, v))
      return;
  } else {
    v->scope = SCOPE_SHARED;
    int before = c->diags->n;
    check_alloc(c, s); /* its dimensions, limits and packed rows; declares it */
    if (c->diags->n != before)
      return;
  }
  int64_t vb, sb;
  const char *vd[TL_MAX_DIMS], *sd[TL_MAX_DIMS];
  int nv, ns;
  size_form(c, v, &vb, vd, &nv);
  size_form(c, src, &sb, sd, &ns);
  if (nv == 0 && ns == 0 && vb != sb)
    ERR(s->pointer, 0, "the view '%s' is %s%s, %lld bytes, but '%s' is %s%s, %lld bytes; a view keeps the size of "
        "what it views", v->name, tl_dtype_name(v->dtype), ext_str(c, v->dims, v->ndim), (long long)(vb / 8),
        src->name, tl_dtype_name(src->dtype), ext_str(c, src->dims, src->ndim), (long long)(sb / 8));
  else if ((nv || ns) && (vb != sb || !same_dyn(vd, nv, sd, ns)))
    ERR(s->pointer, 0, "cannot prove that the view '%s' has the size of '%s': the dimensions that are not constant "
        "must be the same expressions in both, as many times each, and the rest the same size", v->name, src->name);
  int64_t es = (tl_dtype_bits(v->dtype) + 7) / 8;
  if (src->kind == SYM_TENSOR && root->align % es != 0)
    ERR(s->pointer, 0, "the view '%s' of '%s' reads %s, %lld bytes at a time, but '%s' is only %lld-byte aligned (its "
        "'align')", v->name, src->name, tl_dtype_name(v->dtype), (long long)es, root->name, (long long)root->align);
  root->viewed = src->viewed = true;
  tl_vec_push(c->arena, &c->all_views, s);
  if (v->kind == SYM_TENSOR) {
    v->param_index = c->prog->nparams + c->views.n;
    tl_vec_push(c->arena, &c->views, v);
    declare(c, v, s->pointer);
  }
}

/* A view that changes the width of packed elements (uint8 as uint4, uint4
 * as int8) is read-only, and so is what it views: the reference
 * interpreter holds each packed element in a byte of its own, so it
 * copies such a view once, before the run (interp.c: setup_views). */
static void view_read_only(C *c, const tl_stmt *s) {
  const tl_sym *v = s->sym, *r = v->view_of;
  if (!r || tl_dtype_bits(v->dtype) == tl_dtype_bits(r->dtype) ||
      !(tl_dtype_is_packed(v->dtype) || tl_dtype_is_packed(r->dtype)))
    return;
  for (int i = 0; i < c->written.n; i++)
    if (c->written.items[i] == r) {
      ERR(s->pointer, 0, "the view '%s' of '%s' changes the width of packed elements (%s as %s), so neither may be "
          "written: the reference interpreter holds each packed element in a byte of its own and copies such a "
          "view once, before the run", v->name, r->name, tl_dtype_name(r->dtype), tl_dtype_name(v->dtype));
      return;
    }
}

/* A gemm operand must not share memory with a view: its layout in shared
 * memory is the gemm's choice (swizzled, for the tensor cores).  Also
 * collects the memory that statements write (C.written). */
static tl_walk_act gemm_not_viewed(tl_stmt *s, void *user) {
  C *c = user;
  const tl_sym *w = s->kind == S_ASSIGN || s->kind == S_ATOMIC ? (s->lhs ? s->lhs->sym : NULL)
                    : s->kind == S_COPY || s->kind == S_FILL || s->kind == S_ATOMIC_ADD || s->kind == S_REDUCE ||
                            s->kind == S_CUMSUM ? (s->dst ? s->dst->sym : NULL) : NULL;
  if (w)
    tl_vec_push(c->arena, &c->written, (void *)tl_mem_root(w));
  if (s->kind != S_GEMM)
    return TL_WALK_GO;
  const tl_sym *ops[2] = {s->A, s->B};
  for (int i = 0; i < 2; i++)
    if (ops[i] && (ops[i]->view_of || ops[i]->viewed))
      ERR(tl_ptr_key(c->arena, s->pointer, i ? "B" : "A"), 0, "gemm's %s '%s' %s; a gemm operand is laid out in "
          "shared memory as the gemm chooses, so it cannot share its memory with a view", i ? "B" : "A",
          ops[i]->name, ops[i]->view_of ? "is a view" : "has a view");
  return TL_WALK_GO;
}

/* Evaluates an integer layout index for one element (vars bound to its
 * indices).  Layout maps use +, -, *, //, %, bit operators, shifts, min and
 * max over the variables and constants; anything else is reported. */
static bool layout_eval(C *c, const tl_expr *e, const tl_layout *l, const int64_t *idx, int64_t *out) {
  if (e->kind == E_CONST) {
    *out = e->val.i;
    return true;
  }
  if (e->kind == E_NAME) {
    for (int v = 0; v < l->nvars; v++)
      if (e->sym == l->vars[v]) {
        *out = idx[v];
        return true;
      }
  }
  int64_t a = 0, b = 0;
  if (e->kind == E_UNARY && (e->op == '-' || e->op == '~')) {
    if (!layout_eval(c, e->args[0], l, idx, &a))
      return false;
    *out = e->op == '-' ? -a : ~a;
    return true;
  }
  bool two = (e->kind == E_BINARY || (e->kind == E_CALL && (e->fn == FN_MIN || e->fn == FN_MAX))) && e->nargs == 2;
  if (two) {
    if (!layout_eval(c, e->args[0], l, idx, &a) || !layout_eval(c, e->args[1], l, idx, &b))
      return false;
    int op = e->kind == E_CALL ? (e->fn == FN_MIN ? 'm' : 'M') : e->op;
    switch (op) {
    case '+': *out = a + b; return true;
    case '-': *out = a - b; return true;
    case '*': *out = a * b; return true;
    case '&': *out = a & b; return true;
    case '|': *out = a | b; return true;
    case '^': *out = a ^ b; return true;
    case 'm': *out = a < b ? a : b; return true;
    case 'M': *out = a > b ? a : b; return true;
    case OP_SHL: case OP_SHR:
      if (b < 0 || b > 62)
        break;
      *out = op == OP_SHL ? a << b : a >> b;
      return true;
    case OP_FLOORDIV: case '%':
      if (b == 0)
        break;
      *out = op == '%' ? tl_floormod64(a, b) : tl_floordiv64(a, b);
      return true;
    }
    ERR(e->pointer, e->column, "this layout index cannot be evaluated (a shift count out of range, a division by "
                               "zero, or an operator layouts do not use)");
    return false;
  }
  ERR(e->pointer, e->column, "a layout index may use only its variables, constants, + - * // %% & | ^ << >>, min "
                             "and max");
  return false;
}

/* A layout map must send the buffer's elements one-to-one into storage of
 * the same size: either one flat offset in [0, size) or one coordinate per
 * dimension inside the buffer's shape. */
static void check_layout_map(C *c, const tl_sym *b, const tl_layout *l) {
  int64_t size = 1;
  for (int d = 0; d < b->ndim; d++)
    size *= b->dims[d];
  const char *ip = tl_ptr_key(c->arena, l->pointer, "index");
  if (l->nindex != 1 && l->nindex != b->ndim) {
    ERR(ip, 0, "the layout of '%s' gives %d indices; give one flat offset or %d coordinates", b->name, l->nindex,
        b->ndim);
    return;
  }
  if (size > (1 << 22)) {
    ERR(l->pointer, 0, "'%s' is too large (%lld elements) for an explicit layout map; the limit is %d", b->name,
        (long long)size, 1 << 22);
    return;
  }
  unsigned char *seen = calloc((size_t)size, 1);
  if (!seen)
    return;
  int64_t idx[TL_MAX_DIMS] = {0};
  for (int64_t n = 0; n < size; n++) {
    int64_t flat = 0;
    for (int k = 0; k < l->nindex; k++) {
      int64_t v;
      if (!layout_eval(c, l->index[k], l, idx, &v))
        goto done;
      int64_t lim = l->nindex == 1 ? size : b->dims[k];
      if (v < 0 || v >= lim) {
        ERR(ip, 0, "the layout of '%s' sends element %s to %lld, outside [0, %lld)", b->name,
            ext_str(c, idx, b->ndim), (long long)v, (long long)lim);
        goto done;
      }
      flat = l->nindex == 1 ? v : flat * b->dims[k] + v;
    }
    if (seen[flat]) {
      ERR(ip, 0, "the layout of '%s' is not one-to-one: element %s lands where another element does", b->name,
          ext_str(c, idx, b->ndim));
      goto done;
    }
    seen[flat] = 1;
    for (int d = b->ndim - 1; d >= 0 && ++idx[d] == b->dims[d]; d--)
      idx[d] = 0;
  }
done:
  free(seen);
}

/* A layout map's variables (one per dimension of b) and its index
 * expressions, typed (untyped ones as int32).  False after an error. */
static bool check_map_exprs(C *c, const tl_sym *b, tl_layout *l) {
  if (l->nvars != b->ndim) {
    ERR(tl_ptr_key(c->arena, l->pointer, "vars"), 0, "'%s' has %d dimensions, so the layout needs %d variables, not %d",
        b->name, b->ndim, b->ndim, l->nvars);
    return false;
  }
  push_scope(c);
  for (int v = 0; v < l->nvars; v++)
    declare(c, l->vars[v], l->vars[v]->pointer);
  bool ok = true;
  for (int k = 0; k < l->nindex; k++) {
    tl_expr *x = body_expr(c, l->index[k], NULL, NULL);
    if (!x || !want_int(c, x, "a layout index")) {
      ok = false;
      continue;
    }
    if (is_untyped(x->type))
      make_typed(x, TL_INT32);
    l->index[k] = x;
  }
  pop_scope(c);
  return ok;
}

/* A layout on a global tensor or workspace (TileLang's dQ in flash
 * attention's backward): Tile IR v1 keeps global buffers dense and
 * row-major and every access names logical elements, so the layout would
 * change only where elements live; it is recorded (--emit ir shows it
 * ignored) and must be a map of the tensor's variables to integer
 * indices, given once per kernel.  True when recorded. */
static bool check_global_layout(C *c, tl_sym *b, tl_layout *l) {
  if (l->swizzle) {
    ERR(l->pointer, 0, "'%s' is a global tensor; the swizzle is for shared buffers (a global tensor takes an index "
        "map, which Tile IR v1 records and ignores)", b->name);
    return false;
  }
  if (b->global_layout) {
    ERR(l->pointer, 0, "'%s' already has a layout (given at %s)", b->name, b->global_layout->pointer);
    return false;
  }
  if (!check_map_exprs(c, b, l))
    return false;
  b->global_layout = l;
  return true;
}

static void check_layout(C *c, tl_stmt *s) {
  for (int i = 0; i < s->nlayouts; i++) {
    const char *name = s->layout_names[i];
    tl_layout *l = s->layouts[i];
    tl_sym *b = lookup(c, name);
    if (b && b->kind == SYM_TENSOR) {
      if (check_global_layout(c, b, l))
        s->layout_syms[i] = b;
      continue;
    }
    if (!b || b->kind != SYM_BUFFER) {
      const char *hint = suggest(c, name, is_bufferish);
      if (!b && hint)
        ERR(l->pointer, 0, "unknown buffer '%s'; did you mean '%s'?", name, hint);
      else if (!b)
        ERR(l->pointer, 0, "unknown buffer '%s'", name);
      else
        ERR(l->pointer, 0, "'%s' is %s; layouts apply to shared buffers only", name, sym_kind_name(b));
      continue;
    }
    if (b->scope != SCOPE_SHARED) {
      ERR(l->pointer, 0, "'%s' is %s; layouts apply to shared buffers only", name, sym_kind_name(b));
      continue;
    }
    if (b->layout) {
      ERR(l->pointer, 0, "'%s' already has a layout (given at %s)", name, b->layout->pointer);
      continue;
    }
    if (b->view_of || b->viewed) {
      ERR(l->pointer, 0, "'%s' %s; a view and the buffer it views stay row-major", name,
          b->view_of ? "is a view" : "has a view");
      continue;
    }
    s->layout_syms[i] = b;
    if (!l->swizzle) {
      if (!check_map_exprs(c, b, l))
        continue;
      int before = c->diags->n;
      check_layout_map(c, b, l);
      if (c->diags->n > before)
        continue;
    }
    b->layout = l;
  }
}

static void check_gemm(C *c, tl_stmt *s) {
  const char *names[3] = {s->a_name, s->b_name, s->c_name};
  const char *fields[3] = {"A", "B", "C"};
  tl_sym *sy[3] = {0};
  bool ok = true;
  for (int i = 0; i < 3; i++) {
    const char *fp = tl_ptr_key(c->arena, s->pointer, fields[i]);
    tl_sym *b = lookup(c, names[i]);
    if (!b) {
      const char *hint = suggest(c, names[i], is_bufferish);
      if (hint)
        ERR(fp, 0, "unknown buffer '%s'; did you mean '%s'?", names[i], hint);
      else
        ERR(fp, 0, "unknown buffer '%s'", names[i]);
      ok = false;
      continue;
    }
    bool good = b->kind == SYM_BUFFER && (i == 2 ? b->scope == SCOPE_FRAGMENT : b->scope != SCOPE_LOCAL);
    if (!good) {
      ERR(fp, 0, "gemm's %s must be %s; '%s' is %s", fields[i], i == 2 ? "a fragment" : "a shared buffer or a fragment",
          names[i], sym_kind_name(b));
      ok = false;
      continue;
    }
    if (b->ndim != 2) {
      ERR(fp, 0, "gemm's operands are 2-D; '%s' has %d dimension%s", names[i], b->ndim, b->ndim == 1 ? "" : "s");
      ok = false;
      continue;
    }
    sy[i] = b;
  }
  s->trans_a = const_bool(c, s->raw.trans_a, "'transpose_A'", false);
  s->trans_b = const_bool(c, s->raw.trans_b, "'transpose_B'", false);
  s->clear_accum = const_bool(c, s->raw.clear_accum, "'clear_accum'", false);
  int64_t kp = 1;
  if (s->raw.k_pack && const_int(c, s->raw.k_pack, "'k_pack'", 1, 8, &kp))
    s->k_pack = (int)kp;
  if (!ok)
    return;
  s->A = sy[0];
  s->B = sy[1];
  s->C = sy[2];
  tl_dtype ta = s->A->dtype, tb = s->B->dtype, tc = s->C->dtype;
  if (ta != tb) {
    ERR(s->pointer, 0, "gemm's A and B must have the same dtype; '%s' is %s and '%s' is %s", s->A->name,
        tl_dtype_name(ta), s->B->name, tl_dtype_name(tb));
    return;
  }
  bool fl = ta == TL_FLOAT16 || ta == TL_BFLOAT16 || ta == TL_FLOAT8_E4M3 || ta == TL_FLOAT8_E5M2;
  if (fl && tc != TL_FLOAT32 && tc != TL_FLOAT16) {
    ERR(s->pointer, 0, "gemm of %s accumulates into float32 or float16, not %s ('%s')", tl_dtype_name(ta),
        tl_dtype_name(tc), s->C->name);
    return;
  }
  bool i8 = ta == TL_INT8 || ta == TL_UINT8;
  if (i8 && tc != TL_INT32) {
    ERR(s->pointer, 0, "gemm of %s accumulates into int32, not %s ('%s')", tl_dtype_name(ta), tl_dtype_name(tc), s->C->name);
    return;
  }
  if (!fl && !i8) {
    ERR(s->pointer, 0, "gemm takes float16, bfloat16, float8, int8 or uint8 operands, not %s", tl_dtype_name(ta));
    return;
  }
  int64_t am = s->trans_a ? s->A->dims[1] : s->A->dims[0], ak = s->trans_a ? s->A->dims[0] : s->A->dims[1];
  int64_t bk = s->trans_b ? s->B->dims[1] : s->B->dims[0], bn = s->trans_b ? s->B->dims[0] : s->B->dims[1];
  if (am != s->C->dims[0] || bn != s->C->dims[1] || ak != bk)
    ERR(s->pointer, 0, "gemm shapes do not match: op(A) is [%lld, %lld], op(B) is [%lld, %lld] and C is [%lld, %lld]; "
                       "they must be [M, K], [K, N] and [M, N]", (long long)am, (long long)ak, (long long)bk,
        (long long)bn, (long long)s->C->dims[0], (long long)s->C->dims[1]);
}

static void check_reduce_like(C *c, tl_stmt *s) {
  bool ok = resolve_region(c, s->src, false) & resolve_region(c, s->dst, false);
  int64_t dim = 0;
  bool dok = const_int(c, s->raw.dim, "'dim'", 0, TL_MAX_DIMS - 1, &dim);
  if (s->kind == S_REDUCE)
    s->clear = const_bool(c, s->raw.clear, "'clear'", true);
  else
    s->reverse = const_bool(c, s->raw.reverse, "'reverse'", false);
  if (!ok || !dok)
    return;
  for (int i = 0; i < 2; i++) {
    tl_region *r = i ? s->dst : s->src;
    if (r->sym->kind != SYM_BUFFER) { /* proto/tile-ir-v1.md 5.6 */
      ERR(r->pointer, 1, "'%s' works on shared and fragment buffers; '%s' is %s", s->op_name, r->sym->name,
          sym_kind_name(r->sym));
      ok = false;
    } else if (is_start_point(r)) {
      ERR(r->pointer, 1, "'%s' takes whole buffers or sliced regions, not a start point", s->op_name);
      ok = false;
    }
  }
  if (!ok)
    return;
  if (s->reduce_type >= RED_BITAND) /* bitand, bitor, bitxor: integers (proto/tile-ir-v1.md 5.6) */
    for (int i = 0; i < 2; i++) {
      const tl_sym *b = i ? s->dst->sym : s->src->sym;
      if (tl_dtype_is_float(b->dtype) || b->dtype == TL_BOOL) {
        ERR((i ? s->dst : s->src)->pointer, 1, "a %s reduction takes integer buffers; '%s' is %s",
            s->reduce_type_name, b->name, tl_dtype_name(b->dtype));
        return;
      }
    }
  if (s->kind == S_REDUCE && s->src->sym == s->dst->sym) {
    ERR(s->pointer, 0, "'reduce' needs different src and dst buffers; both are '%s'", s->src->sym->name);
    return;
  }
  if (dim >= s->src->ndim) {
    ERR(tl_ptr_key(c->arena, s->pointer, "dim"), 0, "'dim' is %lld but '%s' has %d dimension%s", (long long)dim,
        s->src->text, s->src->ndim, s->src->ndim == 1 ? "" : "s");
    return;
  }
  s->dim = (int)dim;
  int64_t want[TL_MAX_DIMS], a[TL_MAX_DIMS], b[TL_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < s->src->ndim; d++)
    if (s->kind == S_CUMSUM || d != dim)
      want[n++] = s->src->ext[d];
  int na = squeeze(want, n, a), nb = squeeze(s->dst->ext, s->dst->ndim, b);
  bool same = na == nb;
  for (int i = 0; same && i < na; i++)
    same = a[i] == b[i];
  if (!same) {
    if (s->kind == S_REDUCE)
      ERR(s->pointer, 0, "reducing '%s' (extents %s) along dim %lld gives extents %s, but dst '%s' has %s",
          s->src->text, ext_str(c, s->src->ext, s->src->ndim), (long long)dim, ext_str(c, want, n), s->dst->text,
          ext_str(c, s->dst->ext, s->dst->ndim));
    else
      ERR(s->pointer, 0, "cumsum's src '%s' has extents %s but dst '%s' has %s", s->src->text,
          ext_str(c, s->src->ext, s->src->ndim), s->dst->text, ext_str(c, s->dst->ext, s->dst->ndim));
    return;
  }
  region_in_bounds(c, s->src);
  region_in_bounds(c, s->dst);
}

static void check_value_into(C *c, tl_stmt *s, tl_expr **value, tl_dtype dst) {
  bool varying = false;
  tl_expr *v = body_expr(c, *value, &varying, NULL);
  if (!v)
    return;
  if (varying && s->kind != S_ASSIGN && s->kind != S_ALLOC_VAR) {
    ERR(v->pointer, v->column, "the value of '%s' depends on the thread; tile operators need the same value in every "
                               "thread", s->op_name);
    return;
  }
  if (is_untyped(v->type))
    make_typed(v, tl_dtype_is_float(dst) || v->type == TL_TY_UINT ? (v->type == TL_TY_UINT && !tl_dtype_is_float(dst)
                                                                          ? dst
                                                                          : (tl_dtype_is_float(dst) ? dst : TL_FLOAT32))
                                                                    : TL_FLOAT32);
  *value = v;
}

static void check_assign(C *c, tl_stmt *s) {
  tl_expr *l = s->lhs;
  tl_dtype dst;
  if (l->kind == E_NAME) {
    tl_sym *y = lookup(c, l->name);
    if (!y) {
      const char *hint = suggest(c, l->name, NULL);
      if (hint)
        ERR(s->pointer, l->column, "unknown name '%s'; did you mean '%s'?", l->name, hint);
      else
        ERR(s->pointer, l->column, "unknown name '%s'", l->name);
      return;
    }
    if (y->kind != SYM_VAR) {
      if (is_bufferish(y))
        ERR(s->pointer, l->column, "'%s' is %s; assign to an element '%s[...]'", y->name, sym_kind_name(y), y->name);
      else
        ERR(s->pointer, l->column, "'%s' is %s and cannot be assigned; only alloc_var variables and buffer elements "
                                   "can", y->name, sym_kind_name(y));
      return;
    }
    if (c->in_parallel) {
      ERR(s->pointer, l->column, "variable '%s' is per-thread; a parallel loop may read it but not assign it", y->name);
      return;
    }
    l->sym = y;
    l->type = y->type;
    dst = y->dtype;
  } else {
    c->writing = true;
    tl_expr *x = body_expr(c, l, NULL, NULL);
    c->writing = false;
    if (!x)
      return;
    s->lhs = l = x;
    tl_sym *y = l->sym;
    if (y->kind == SYM_BUFFER && y->scope == SCOPE_LOCAL && c->in_parallel)
      return; /* reported by check_index */
    dst = y->dtype;
  }
  if (s->assign_op) {
    /* x op= e is x = x op e, typed as such */
    tl_expr *bin = tl_arena_alloc(c->arena, sizeof *bin);
    bin->kind = E_BINARY;
    bin->op = s->assign_op;
    bin->column = s->value->column;
    bin->pointer = s->pointer;
    bin->nargs = 2;
    bin->args = tl_arena_alloc(c->arena, 2 * sizeof(tl_expr *));
    tl_expr *lcopy = tl_arena_alloc(c->arena, sizeof *lcopy);
    *lcopy = *l;
    lcopy->type = (tl_type)dst;
    bin->args[0] = lcopy;
    bin->args[1] = s->value;
    /* the left operand is already checked: type it through check_binary by
     * checking only the right side */
    tl_expr *r = body_expr(c, s->value, NULL, NULL);
    if (!r)
      return;
    bin->args[1] = r;
    const char *what = tl_arena_printf(c->arena, "'%s='", tl_op_text(s->assign_op));
    if (!computable(c, lcopy, what) || !computable(c, r, what))
      return;
    if (s->assign_op == '/' && is_int_t((tl_type)dst) && is_int_t(r->type)) {
      ERR(s->pointer, r->column, "'/=' between integers; use '//='");
      return;
    }
    if ((s->assign_op == '&' || s->assign_op == '|' || s->assign_op == '^' || s->assign_op == OP_SHL ||
         s->assign_op == OP_SHR) && (tl_dtype_is_float(dst) || is_float_t(r->type))) {
      /* point at the float operand, the left side first (as 'a | b' does) */
      bool left = tl_dtype_is_float(dst);
      ERR(s->pointer, left ? l->column : r->column, "'%s=' needs integer operands, not %s", tl_op_text(s->assign_op),
          left ? tl_dtype_name(dst) : type_str(r->type));
      return;
    }
    if (s->assign_op == OP_SHL || s->assign_op == OP_SHR) {
      if (is_untyped(r->type))
        make_typed(r, default_type(r));
      bin->type = (tl_type)promote_int(dst);
      if (is_const(r)) { /* as for 'a << n': a constant count must fit the type */
        int64_t n = tl_dtype_is_signed((tl_dtype)r->type) || r->type == TL_BOOL ? r->val.i : (int64_t)r->val.u;
        int bits = tl_dtype_bits((tl_dtype)bin->type);
        if (n < 0 || n >= bits) {
          ERR(s->pointer, r->column, "shift count %lld is outside [0, %d) for %s", (long long)n, bits,
              type_str(bin->type));
          return;
        }
      }
    } else
      bin->type = unify(lcopy, r);
    s->value = bin;
    return;
  }
  check_value_into(c, s, &s->value, dst);
}

/* A pipelined loop's 'order' is a permutation of the body's statements and
 * its 'stage' values are in [0, num_stages] (stage 0 when num_stages is 0). */
static void check_schedule(C *c, tl_stmt *s) {
  if (s->order) {
    unsigned char *seen = tl_arena_alloc(c->arena, (size_t)s->norder);
    for (int i = 0; i < s->norder; i++) {
      int64_t v = s->order[i];
      if (v < 0 || v >= s->norder || seen[v]) {
        ERR(tl_ptr_index(c->arena, tl_ptr_key(c->arena, s->pointer, "order"), i), 0,
            "'order' must be a permutation of 0..%d (one position per body statement)", s->norder - 1);
        return;
      }
      seen[v] = 1;
    }
  }
  if (s->stage)
    for (int i = 0; i < s->norder; i++)
      if (s->stage[i] < 0 || s->stage[i] > s->num_stages) {
        ERR(tl_ptr_index(c->arena, tl_ptr_key(c->arena, s->pointer, "stage"), i), 0,
            "a stage is from 0 to num_stages (%lld), not %lld", (long long)s->num_stages, (long long)s->stage[i]);
        return;
      }
}

/* An "atomic" statement (proto/tile-ir-v1.md 5.9): dst an element of a
 * global tensor or shared buffer of a dtype with that atomic, the value
 * converted to it, and "old" a let of dst's dtype. */
static void check_atomic(C *c, tl_stmt *s) {
  static const char *const kinds[] = {[TL_ATOMIC_ADD] = "add", [TL_ATOMIC_MAX] = "max", [TL_ATOMIC_MIN] = "min"};
  bool ok = false;
  c->writing = true;
  tl_expr *x = body_expr(c, s->lhs, NULL, NULL);
  c->writing = false;
  if (x) {
    s->lhs = x;
    const tl_sym *y = x->sym;
    ok = y->kind == SYM_TENSOR || (y->kind == SYM_BUFFER && y->scope == SCOPE_SHARED);
    if (!ok)
      ERR(x->pointer, x->column, "'atomic' updates global or shared memory; '%s' is %s", y->name, sym_kind_name(y));
  }
  if (ok) {
    tl_dtype dt = x->sym->dtype;
    switch (dt) { /* the dtypes with atomics (proto/tile-ir-v1.md 5.9) */
    case TL_INT32: case TL_UINT32: case TL_INT64: case TL_UINT64: case TL_FLOAT32: case TL_FLOAT64:
    case TL_FLOAT16: case TL_BFLOAT16:
      break;
    default:
      ERR(x->pointer, x->column, "atomic %s cannot update %s ('%s'); its dst is int32, uint32, int64, uint64, "
          "float16, bfloat16, float32 or float64", kinds[s->atomic], tl_dtype_name(dt), x->sym->name);
      ok = false;
    }
  }
  tl_expr *v = body_expr(c, s->value, NULL, NULL);
  if (v && !computable(c, v, tl_arena_printf(c->arena, "atomic %s", kinds[s->atomic])))
    v = NULL;
  if (ok && v) {
    s->value = v;
    if (is_untyped(v->type))
      make_typed(v, pin_type(v, x->sym->dtype));
  }
  if (s->sym) { /* declared even when the rest failed, so that its uses are not reported again */
    tl_dtype dt = ok ? x->sym->dtype : TL_INT32;
    s->sym->type = (tl_type)dt;
    s->sym->dtype = dt;
    s->sym->varying = true;
    declare(c, s->sym, tl_ptr_key(c->arena, s->pointer, "old"));
  }
}

/* cluster_reduce (proto/tile-ir-v1.md 5.6): a whole register fragment of
 * float32 or int32, combined across the blocks of the kernel's cluster; a
 * statement of the kernel's body itself, so that every thread of every
 * block of the cluster reaches it exactly once. */
static void check_cluster_reduce(C *c, tl_stmt *s) {
  c->in_tile_op = true;
  bool ok = resolve_region(c, s->dst, false);
  c->in_tile_op = false;
  if (!ok)
    return;
  const tl_sym *b = s->dst->sym;
  const char *dp = tl_ptr_key(c->arena, s->pointer, "dst");
  if (b->kind != SYM_BUFFER || b->scope != SCOPE_FRAGMENT || b->view_of) {
    ERR(dp, 0, "cluster_reduce combines a register fragment (alloc_fragment) across the blocks of a cluster; '%s' "
        "is %s", b->name, b->view_of ? "a view" : sym_kind_name(b));
    return;
  }
  if (!s->dst->whole) {
    ERR(dp, 0, "cluster_reduce takes a whole fragment: write '%s' alone", b->name);
    return;
  }
  if (b->dtype != TL_FLOAT32 && b->dtype != TL_INT32) {
    ERR(dp, 0, "cluster_reduce combines float32 or int32 fragments, not %s ('%s')", tl_dtype_name(b->dtype), b->name);
    return;
  }
  bool top = false;
  for (int i = 0; i < c->prog->body.n; i++)
    top |= c->prog->body.items[i] == s;
  if (!top) {
    ERR(s->pointer, 0, "cluster_reduce must be a statement of the kernel's body itself, not inside a loop, an if or "
        "a parallel loop: every thread of every block of the cluster reaches it once");
    return;
  }
  c->prog->cluster_reduce = true;
}

/* Checks statement s before what it holds (tl_walker.pre): TL_WALK_SKIP
 * for the statements without a body, and for those whose body is not
 * checked (they are misplaced); check_end finishes the others. */
static tl_walk_act check_stmt(tl_stmt *s, void *user) {
  C *c = user;
  if (c->in_parallel) {
    bool allowed = s->kind == S_ASSIGN || s->kind == S_ATOMIC || s->kind == S_LET || s->kind == S_IF || s->kind == S_PRINT ||
                   s->kind == S_ASSERT ||
                   (s->kind == S_LOOP && s->loop_kind != LOOP_PIPELINED);
    if (!allowed) {
      ERR(s->pointer, 0, "'%s' is not allowed inside a parallel loop (the loop at %s); a parallel body holds "
                         "assignments, atomic, let, if, print, device_assert and serial/unroll/vectorized loops", s->op_name, c->in_parallel->pointer);
      return TL_WALK_SKIP;
    }
  }
  if (is_tile_level(s)) {
    s->block_level = true;
    if (!uniform_placement(c, s))
      return TL_WALK_SKIP;
  }
  switch (s->kind) {
  case S_ALLOC:
    check_alloc(c, s);
    return TL_WALK_SKIP;
  case S_VIEW:
    check_view(c, s);
    return TL_WALK_SKIP;
  case S_ALLOC_VAR: {
    if (s->value)
      check_value_into(c, s, &s->value, s->sym->dtype);
    s->sym->init = s->value;
    s->sym->varying = true;
    declare(c, s->sym, s->pointer);
    return TL_WALK_SKIP;
  }
  case S_LET: {
    bool varying = false, thread = false;
    tl_expr *v = body_expr(c, s->value, &varying, &thread);
    if (v) {
      if (v->kind != E_CONST && is_untyped(v->type))
        make_typed(v, default_type(v));
      /* a let bound to a constant expression is an untyped named constant
       * (proto/tile-ir-v1.md 5.4, 7.3), as a constant of the program is:
       * "let h = float16(0.1)" is the real 0.0999755859375 */
      if (is_const(v) && !is_untyped(v->type) && v->type != TL_BOOL &&
          !(v->type == TL_UINT64 && v->val.u > (uint64_t)INT64_MAX)) /* the one value int64 cannot hold */
        v = tl_dtype_is_float((tl_dtype)v->type) ? mk_const(c, v, TL_TY_UREAL, (tl_scalar){.f = v->val.f})
                                                 : mk_const(c, v, TL_TY_UINT,
                                                            tl_convert(v->val, (tl_dtype)v->type, TL_INT64));
      s->value = v;
      s->sym->init = v;
      s->sym->type = v->type;
      s->sym->dtype = is_untyped(v->type) ? default_type(v) : (tl_dtype)v->type;
      s->sym->varying = varying;
      s->sym->thread_dep = thread;
    } else {
      s->sym->type = TL_INT32; /* keep going; uses are not reported again */
      s->sym->dtype = TL_INT32;
    }
    declare(c, s->sym, s->pointer);
    return TL_WALK_SKIP;
  }
  case S_COPY: {
    s->store_asked = s->raw.tma && const_bool(c, s->raw.tma, "'tma'", false);
    c->in_tile_op = true;
    bool ok = resolve_region(c, s->src, false) & resolve_region(c, s->dst, false);
    c->in_tile_op = false;
    if (ok)
      match_regions(c, s, s->src, s->dst);
    if (ok && s->evict != TL_EVICT_NORMAL && s->src->sym->kind != SYM_TENSOR)
      ERR(tl_ptr_key(c->arena, s->pointer, "eviction_policy"), 0,
          "an eviction policy is for a copy that reads a tensor (global memory), not %s '%s'",
          sym_kind_name(s->src->sym), s->src->sym->name);
    return TL_WALK_SKIP;
  }
  case S_FILL: {
    c->in_tile_op = true;
    bool ok = resolve_region(c, s->dst, false);
    c->in_tile_op = false;
    if (!ok)
      return TL_WALK_SKIP;
    if (is_start_point(s->dst))
      for (int d = 0; d < s->dst->ndim; d++)
        s->dst->ext[d] = 1;
    region_in_bounds(c, s->dst);
    check_value_into(c, s, &s->value, s->dst->sym->dtype);
    return TL_WALK_SKIP;
  }
  case S_GEMM:
    check_gemm(c, s);
    return TL_WALK_SKIP;
  case S_CLUSTER_REDUCE:
    check_cluster_reduce(c, s);
    return TL_WALK_SKIP;
  case S_REDUCE:
  case S_CUMSUM:
    c->in_tile_op = true;
    check_reduce_like(c, s);
    c->in_tile_op = false;
    return TL_WALK_SKIP;
  case S_ATOMIC_ADD: {
    c->in_tile_op = true;
    bool ok = resolve_region(c, s->dst, false) && (!s->src || resolve_region(c, s->src, false));
    c->in_tile_op = false;
    if (!ok)
      return TL_WALK_SKIP;
    if (s->dst->sym->kind != SYM_TENSOR) {
      ERR(tl_ptr_key(c->arena, s->pointer, "dst"), 0, "atomic_add writes global memory; '%s' is %s",
          s->dst->sym->name, sym_kind_name(s->dst->sym));
      return TL_WALK_SKIP;
    }
    switch (s->dst->sym->dtype) { /* the dtypes with atomic adds (proto/tile-ir-v1.md 5.6) */
    case TL_INT32: case TL_UINT32: case TL_INT64: case TL_UINT64: case TL_FLOAT16: case TL_BFLOAT16:
    case TL_FLOAT32: case TL_FLOAT64:
      break;
    default:
      ERR(tl_ptr_key(c->arena, s->pointer, "dst"), 0, "atomic_add cannot add into %s ('%s'); its dst is int32, "
          "uint32, int64, uint64, float16, bfloat16, float32 or float64", tl_dtype_name(s->dst->sym->dtype),
          s->dst->sym->name);
      return TL_WALK_SKIP;
    }
    if (s->src)
      match_regions(c, s, s->src, s->dst);
    else {
      if (is_start_point(s->dst))
        for (int d = 0; d < s->dst->ndim; d++)
          s->dst->ext[d] = 1;
      check_value_into(c, s, &s->value, s->dst->sym->dtype);
    }
    return TL_WALK_SKIP;
  }
  case S_PARALLEL: {
    push_scope(c);
    for (int i = 0; i < s->nvars; i++) {
      int64_t v;
      if (!const_int(c, s->extents[i], "a parallel extent", 1, INT32_MAX, &v))
        continue;
      s->extents[i] = const_int_expr(c, s->extents[i], v);
    }
    for (int i = 0; i < s->nvars; i++)
      declare(c, s->vars[i], s->vars[i]->pointer);
    c->in_parallel = s;
    return TL_WALK_GO; /* check_end: out of the loop and its scope */
  }
  case S_LOOP: {
    bool v1 = false, v2 = false, v3 = false, t1 = false, t2 = false, t3 = false;
    if (!s->start)
      s->start = const_int_expr(c, s->extent, 0);
    if (!s->step)
      s->step = const_int_expr(c, s->extent, 1);
    tl_expr *st = body_expr(c, s->start, &v1, &t1), *ex = body_expr(c, s->extent, &v2, &t2),
            *sp = body_expr(c, s->step, &v3, &t3);
    bool ok = st && ex && sp && want_int(c, st, "a loop start") && want_int(c, ex, "a loop extent") &&
              want_int(c, sp, "a loop step");
    if (ok) {
      tl_expr *xs[3] = {st, ex, sp};
      for (int i = 0; i < 3; i++)
        if (is_untyped(xs[i]->type))
          make_typed(xs[i], default_type(xs[i]));
      s->start = st;
      s->extent = ex;
      s->step = sp;
      if (is_const(sp) && sp->val.i == 0) {
        ERR(sp->pointer, sp->column, "a loop step must not be 0");
        ok = false;
      }
    }
    if (s->raw.num_stages) {
      int64_t n;
      if (const_int(c, s->raw.num_stages, "'num_stages'", 0, 16, &n))
        s->num_stages = n;
    }
    s->no_tma = !const_bool(c, s->raw.tma, "'tma'", true);
    s->no_wspec = !const_bool(c, s->raw.wspec, "'warp_specialize'", true);
    s->overlap = s->raw.overlap ? const_bool(c, s->raw.overlap, "'overlap'", true) : -1;
    s->pingpong_req = s->raw.pingpong ? const_bool(c, s->raw.pingpong, "'pingpong'", true) : -1;
    int64_t kg = 0;
    s->k_group = s->raw.k_group && const_int(c, s->raw.k_group, "'k_group'", 0, 8, &kg) ? kg : 0;
    int64_t sl = 1;
    s->slices_req = s->raw.slices && const_int(c, s->raw.slices, "'slices'", 1, TL_MAX_SLICES, &sl) ? sl : 1;
    for (int i = 0; i < s->ncl_req; i++) {
      int64_t n = 1;
      s->cl_req[i] = const_int(c, s->raw.cluster[i], "a cluster dimension", 1, 16, &n) ? n : 1;
    }
    if (s->norder && s->norder != s->body.n)
      ERR(tl_ptr_key(c->arena, s->pointer, s->order ? "order" : "stage"), 0,
          "'%s' has %d entries but the body has %d statements; give one per statement", s->order ? "order" : "stage",
          s->norder, s->body.n);
    else if (s->norder)
      check_schedule(c, s);
    tl_vec_push(c->arena, &c->ctl_saved, (void *)c->varying_ctl);
    if (v1 || v2 || v3)
      c->varying_ctl = s;
    push_scope(c);
    s->var->varying = v1 || v2 || v3;
    s->var->thread_dep = t1 || t2 || t3;
    declare(c, s->var, s->var->pointer);
    (void)ok;
    return TL_WALK_GO; /* check_end: out of the scope and the control */
  }
  case S_IF: {
    bool varying = false;
    tl_expr *cond = body_expr(c, s->value, &varying, NULL);
    if (cond) {
      if (is_untyped(cond->type))
        make_typed(cond, default_type(cond));
      s->value = cond;
    }
    tl_vec_push(c->arena, &c->ctl_saved, (void *)c->varying_ctl);
    if (varying)
      c->varying_ctl = s;
    return TL_WALK_GO; /* each branch in a scope of its own (check_branch); check_end: out of the control */
  }
  case S_ANNOTATE_LAYOUT:
    check_layout(c, s);
    return TL_WALK_SKIP;
  case S_USE_SWIZZLE: {
    int64_t v;
    if (const_int(c, s->panel_size, "'panel_size'", 1, 65535, &v))
      s->panel_size = const_int_expr(c, s->panel_size, v);
    s->enable = const_bool(c, s->raw.enable, "'enable'", true);
    return TL_WALK_SKIP;
  }
  case S_SYNC_THREADS:
    s->fence = const_bool(c, s->raw.fence, "'fence'", false);
    return TL_WALK_SKIP;
  case S_ATOMIC:
    check_atomic(c, s);
    return TL_WALK_SKIP;
  case S_ASSIGN:
    check_assign(c, s);
    return TL_WALK_SKIP;
  case S_PRINT:
  case S_ASSERT:
    if (s->value) {
      tl_expr *v = body_expr(c, s->value, NULL, NULL);
      if (v && !computable(c, v, s->op_name))
        v = NULL;
      if (v && is_untyped(v->type))
        make_typed(v, default_type(v));
      if (v)
        s->value = v;
    }
    return TL_WALK_SKIP;
  }
  return TL_WALK_SKIP;
}

/* The then and else bodies of an if each have a scope of their own
 * (tl_walker.enter_body/leave_body). */
static void check_branch(tl_stmt *s, int which, void *user) {
  if (s->kind == S_IF)
    push_scope(user);
}

static void check_branch_end(tl_stmt *s, int which, void *user) {
  if (s->kind == S_IF)
    pop_scope(user);
}

/* Finishes a parallel loop, loop or if after its body (tl_walker.post). */
static tl_walk_act check_end(tl_stmt *s, void *user) {
  C *c = user;
  if (s->kind == S_PARALLEL) {
    c->in_parallel = NULL;
    pop_scope(c);
    return TL_WALK_GO;
  }
  if (s->kind == S_LOOP)
    pop_scope(c);
  c->varying_ctl = c->ctl_saved.items[--c->ctl_saved.n];
  /* loops and ifs are block-level when they hold a block-level statement */
  for (int i = 0; i < s->body.n; i++)
    s->block_level |= s->body.items[i]->block_level;
  for (int i = 0; i < s->else_body.n; i++)
    s->block_level |= s->else_body.items[i]->block_level;
  return TL_WALK_GO;
}

static const tl_walker checker = {
    .pre = check_stmt, .enter_body = check_branch, .leave_body = check_branch_end, .post = check_end};

/* ---- several kernels ------------------------------------------------------------------ */
/* A layout map as text with its variables named by position ("(i, j) ->
 * j, i" and "(r, c) -> c, r" read the same). */
static const char *layout_text(tl_arena *a, const tl_layout *l) {
  const char *names[TL_MAX_DIMS], *t = "";
  for (int v = 0; v < l->nvars; v++) {
    names[v] = l->vars[v]->name;
    l->vars[v]->name = tl_arena_printf(a, "$%d", v);
  }
  for (int k = 0; k < l->nindex; k++)
    t = tl_arena_printf(a, "%s%s%s", t, k ? ", " : "", tl_expr_str(a, l->index[k]));
  for (int v = 0; v < l->nvars; v++)
    l->vars[v]->name = names[v];
  return t;
}

bool tl_check_kernels(tl_program *prog, tl_diags *diags) {
  int before = diags->n;
  if (!prog->next)
    return true;
  /* a layout on a global buffer is ignored (check_global_layout): the same
   * in every kernel, so that each kernel reads what the others wrote as
   * TileLang's would */
  for (int i = 0; i < prog->nparams; i++) {
    const tl_program *with = NULL;
    for (const tl_program *k = prog; k && !with; k = k->next)
      with = k->params[i]->global_layout ? k : NULL;
    if (!with)
      continue;
    const char *want = layout_text(prog->arena, with->params[i]->global_layout);
    for (const tl_program *k = prog; k; k = k->next) {
      const tl_layout *l = k->params[i]->global_layout;
      if (!l)
        tl_diag_add(diags, k->kptr, 0, "this kernel gives '%s' no layout, but the one at %s does: give every "
                    "kernel of the program the same layout of a global buffer, or none", prog->params[i]->name,
                    with->params[i]->global_layout->pointer);
      else if (strcmp(layout_text(prog->arena, l), want) != 0)
        tl_diag_add(diags, l->pointer, 0, "the layout of '%s' differs from the one at %s: give every kernel of "
                    "the program the same layout of a global buffer, or none", prog->params[i]->name,
                    with->params[i]->global_layout->pointer);
    }
  }
  return diags->n == before;
}

/* ---- entry -------------------------------------------------------------------------- */
bool tl_check(tl_program *prog, const tl_define *defs, int ndefs, tl_diags *diags) {
  C cc = {.arena = prog->arena, .diags = diags, .prog = prog}, *c = &cc;
  int before = diags->n;
  push_scope(c);
  c->where = CTX_CONST;
  /* The kernel scope first, all of it (constants, parameters, block vars),
   * so that a name used in the wrong place is reported as what it is
   * ("'n' is a scalar parameter; only constants may be used here"), not as
   * unknown; then the values, each with what its place allows. */
  for (int i = 0; i < prog->nconsts; i++)
    declare(c, prog->consts[i], prog->consts[i]->pointer);
  for (int i = 0; i < prog->nparams; i++)
    declare(c, prog->params[i], prog->params[i]->pointer);
  for (int i = 0; i < 3; i++)
    if (prog->block_vars[i])
      declare(c, prog->block_vars[i], prog->block_vars[i]->pointer);
  check_constants(c, defs, ndefs);
  check_params(c);
  check_workspaces(c);
  push_scope(c);
  tl_walk(&prog->body, &checker, c);
  tl_walk(&prog->body, &(tl_walker){.pre = gemm_not_viewed}, c);
  for (int i = 0; i < c->all_views.n; i++)
    view_read_only(c, c->all_views.items[i]);
  prog->nviews = c->views.n;
  prog->views = (tl_sym **)c->views.items;
  prog->nvalue_slots = c->value_syms.n;
  prog->value_syms = (tl_sym **)c->value_syms.items;
  prog->nbuffer_slots = c->buffer_syms.n;
  prog->buffer_syms = (tl_sym **)c->buffer_syms.items;
  return diags->n == before && !diags->truncated;
}
