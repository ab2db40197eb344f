/*
 * ir.c - the small utilities every stage of the compiler shares: the arena,
 * growable vectors, the diagnostics list, the tables of statement kinds and
 * ops, the one walker over statements (tl_walk), and printing of types,
 * functions, expressions and whole programs (for messages and IR dumps).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"

/* ---- arena: a list of chunks, freed at once ---------------------------- */
typedef struct chunk {
  struct chunk *next;
  size_t used, size;
  _Alignas(16) unsigned char data[];
} chunk;

struct tl_arena {
  chunk *head;
};

tl_arena *tl_arena_new(void) {
  tl_arena *a = calloc(1, sizeof *a);
  if (!a)
    abort();
  return a;
}

void tl_arena_free(tl_arena *a) {
  if (!a)
    return;
  for (chunk *c = a->head, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  free(a);
}

void *tl_arena_alloc(tl_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  chunk *c = a->head;
  if (!c || c->size - c->used < n) {
    size_t size = n > 65536 ? n : 65536;
    c = malloc(sizeof *c + size);
    if (!c)
      abort();
    c->used = 0;
    c->size = size;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

char *tl_arena_strndup(tl_arena *a, const char *s, size_t n) {
  char *p = tl_arena_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *tl_arena_strdup(tl_arena *a, const char *s) { return tl_arena_strndup(a, s, strlen(s)); }

char *tl_arena_vprintf(tl_arena *a, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  char *p = tl_arena_alloc(a, (size_t)n + 1);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  return p;
}

char *tl_arena_printf(tl_arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *p = tl_arena_vprintf(a, fmt, ap);
  va_end(ap);
  return p;
}

void tl_text_put(tl_arena *a, tl_text *t, const char *s) {
  size_t n = strlen(s);
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 1 << 14;
    while (cap < t->len + n + 1)
      cap *= 2;
    char *nb = tl_arena_alloc(a, cap);
    if (t->len)
      memcpy(nb, t->buf, t->len);
    t->buf = nb;
    t->cap = cap;
  }
  memcpy(t->buf + t->len, s, n + 1);
  t->len += n;
}

void tl_vec_push(tl_arena *a, tl_vec *v, void *item) {
  if (v->n == v->cap) {
    int cap = v->cap ? v->cap * 2 : 8;
    void **items = tl_arena_alloc(a, sizeof(void *) * (size_t)cap);
    if (v->n)
      memcpy(items, v->items, sizeof(void *) * (size_t)v->n);
    v->items = items;
    v->cap = cap;
  }
  v->items[v->n++] = item;
}

/* ---- diagnostics ---------------------------------------------------------- */
void tl_diag_add(tl_diags *d, const char *pointer, int column, const char *fmt, ...) {
  if (d->n >= TL_MAX_DIAGS) {
    d->truncated = true;
    return;
  }
  if (d->n == d->cap) {
    int cap = d->cap ? d->cap * 2 : 16;
    tl_diag *items = tl_arena_alloc(d->arena, sizeof(tl_diag) * (size_t)cap);
    if (d->n)
      memcpy(items, d->items, sizeof(tl_diag) * (size_t)d->n);
    d->items = items;
    d->cap = cap;
  }
  va_list ap;
  va_start(ap, fmt);
  tl_diag *g = &d->items[d->n++];
  g->pointer = pointer ? tl_arena_strdup(d->arena, pointer) : NULL;
  g->line = 0;
  g->column = column;
  g->message = tl_arena_vprintf(d->arena, fmt, ap);
  va_end(ap);
}

/* Prints s with control and non-ASCII bytes as \xHH, so that every
 * diagnostic stays on one line whatever the input's keys hold. */
static void put_escaped(FILE *f, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p < 0x20 || *p >= 0x7f || *p == '\\')
      fprintf(f, "\\x%02x", *p);
    else
      fputc(*p, f);
}

void tl_diags_print(const tl_diags *d, const char *file, void *fp) {
  FILE *f = fp;
  for (int i = 0; i < d->n; i++) {
    const tl_diag *g = &d->items[i];
    if (!g->pointer) {
      fprintf(f, "%s:%d:%d: error: ", file, g->line, g->column);
    } else {
      fprintf(f, "%s:", file);
      put_escaped(f, g->pointer);
      if (g->column > 0)
        fprintf(f, ":%d", g->column);
      fputs(": error: ", f);
    }
    put_escaped(f, g->message);
    fputc('\n', f);
  }
  if (d->truncated)
    fprintf(f, "%s:: error: too many errors; stopped after %d\n", file, TL_MAX_DIAGS);
}

/* ---- names ---------------------------------------------------------------- */
const char *tl_type_name(tl_type t) {
  if (t == TL_TY_UINT)
    return "integer constant";
  if (t == TL_TY_UREAL)
    return "real constant";
  if (t >= 0 && t < TL_DTYPE_COUNT)
    return tl_dtype_name((tl_dtype)t);
  return "no type";
}

static const struct {
  const char *name;
  int nargs;
  bool reserved;
} fns[FN_COUNT] = {
    [FN_NONE] = {"?", 0, false},
#define TL_X(id, name, nargs, reserved) [id] = {name, nargs, reserved},
    TL_FNS(TL_X)
#undef TL_X
};

int tl_fn_nargs(tl_fn f) { return (unsigned)f < FN_COUNT ? fns[f].nargs : 0; }
bool tl_fn_reserved(tl_fn f) { return (unsigned)f < FN_COUNT && fns[f].reserved; }

bool tl_math1(tl_fn f, double x, double *y) {
  double r;
  switch (f) {
  case FN_EXP: r = exp(x); break;
  case FN_EXP2: r = exp2(x); break;
  case FN_LOG: r = log(x); break;
  case FN_LOG2: r = log2(x); break;
  case FN_SQRT: r = sqrt(x); break;
  case FN_RSQRT: r = 1.0 / sqrt(x); break;
  case FN_TANH: r = tanh(x); break;
  case FN_SIGMOID: r = 1.0 / (1.0 + exp(-x)); break;
  case FN_FLOOR: r = floor(x); break;
  case FN_CEIL: r = ceil(x); break;
  case FN_ROUND: r = round(x); break;
  case FN_ERF: r = erf(x); break;
  case FN_SIN: r = sin(x); break;
  case FN_COS: r = cos(x); break;
  case FN_TAN: r = tan(x); break;
  case FN_LOG1P: r = log1p(x); break;
  case FN_EXPM1: r = expm1(x); break;
  case FN_LOG10: r = log10(x); break;
  case FN_TRUNC: r = trunc(x); break;
  default: return false;
  }
  *y = r;
  return true;
}

const char *tl_fn_name(tl_fn f) { return (unsigned)f < FN_COUNT ? fns[f].name : "?"; }

/* ---- statement kinds and ops (ir.h: TL_STMT_KINDS, TL_STMT_OPS) ------------- */
static const struct {
  const char *name;
  unsigned flags;
} stmt_kinds[TL_STMT_KIND_COUNT] = {
#define TL_X(kind, name, flags) [kind] = {name, flags},
    TL_STMT_KINDS(TL_X)
#undef TL_X
};

const char *tl_stmt_kind_name(tl_stmt_kind k) { return (unsigned)k < TL_STMT_KIND_COUNT ? stmt_kinds[k].name : "?"; }

const char *tl_mma_ptx_type(tl_dtype t) {
  switch (t) {
  case TL_FLOAT16: return "f16";
  case TL_BFLOAT16: return "bf16";
  case TL_FLOAT8_E4M3: return "e4m3";
  case TL_FLOAT8_E5M2: return "e5m2";
  case TL_INT8: return "s8";
  case TL_UINT8: return "u8";
  case TL_INT32: return "s32";
  case TL_FLOAT32: return "f32";
  default: return NULL;
  }
}
unsigned tl_stmt_kind_flags(tl_stmt_kind k) { return (unsigned)k < TL_STMT_KIND_COUNT ? stmt_kinds[k].flags : 0; }

const tl_stmt_op_info tl_stmt_ops[TL_STMT_OP_COUNT] = {
#define TL_X(id, name, kind, ...) [id] = {name, kind, {__VA_ARGS__, NULL}},
    TL_STMT_OPS(TL_X)
#undef TL_X
};

int tl_stmt_op_lookup(const char *name) {
  for (int i = 0; i < TL_STMT_OP_COUNT; i++)
    if (strcmp(tl_stmt_ops[i].name, name) == 0)
      return i;
  return -1;
}

/* ---- walking statements (ir.h: tl_walk) ---------------------------------------- */
bool tl_expr_names(const tl_expr *x, const tl_sym *s) {
  if (!x)
    return false;
  if (x->sym == s)
    return true;
  for (int i = 0; i < x->nargs; i++)
    if (tl_expr_names(x->args[i], s))
      return true;
  return false;
}

tl_walk_act tl_walk_expr(tl_expr *x, tl_walk_act (*fn)(tl_expr *, tl_stmt *, void *), tl_stmt *stmt, void *user) {
  if (!x)
    return TL_WALK_GO;
  tl_walk_act a = fn(x, stmt, user);
  if (a != TL_WALK_GO)
    return a == TL_WALK_STOP ? TL_WALK_STOP : TL_WALK_GO;
  for (int i = 0; i < x->nargs; i++)
    if (tl_walk_expr(x->args[i], fn, stmt, user) == TL_WALK_STOP)
      return TL_WALK_STOP;
  return TL_WALK_GO;
}

/* The expressions of s in the order ir.h gives, each through fn. */
static tl_walk_act walk_stmt_exprs(tl_stmt *s, tl_walk_act (*fn)(tl_expr *, tl_stmt *, void *), void *user) {
  tl_expr *roots[] = {s->lhs, s->value, s->start, s->extent, s->step};
  for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++)
    if (tl_walk_expr(roots[i], fn, s, user) == TL_WALK_STOP)
      return TL_WALK_STOP;
  for (int i = 0; s->kind == S_PARALLEL && s->extents && i < s->nvars; i++)
    if (tl_walk_expr(s->extents[i], fn, s, user) == TL_WALK_STOP)
      return TL_WALK_STOP;
  tl_region *regions[] = {s->src, s->dst};
  for (int k = 0; k < 2; k++)
    for (int d = 0; regions[k] && d < regions[k]->ndim; d++)
      if (tl_walk_expr(regions[k]->lo[d], fn, s, user) == TL_WALK_STOP)
        return TL_WALK_STOP;
  return TL_WALK_GO;
}

tl_walk_act tl_walk_stmt(tl_stmt *s, const tl_walker *w, void *user) {
  tl_walk_act a = w->pre ? w->pre(s, user) : TL_WALK_GO;
  if (a != TL_WALK_GO)
    return a;
  if (w->expr && walk_stmt_exprs(s, w->expr, user) == TL_WALK_STOP)
    return TL_WALK_STOP;
  unsigned flags = tl_stmt_kind_flags(s->kind);
  for (int which = 0; which < 2; which++) {
    if (!(flags & (which ? TL_KIND_ELSE : TL_KIND_BODY)) || (which && !s->has_else))
      continue;
    if (w->enter_body)
      w->enter_body(s, which, user);
    if (tl_walk(which ? &s->else_body : &s->body, w, user) == TL_WALK_STOP)
      return TL_WALK_STOP;
    if (w->leave_body)
      w->leave_body(s, which, user);
  }
  return w->post && w->post(s, user) == TL_WALK_STOP ? TL_WALK_STOP : TL_WALK_GO;
}

tl_walk_act tl_walk(tl_body *b, const tl_walker *w, void *user) {
  for (int i = 0; i < b->n; i++)
    if (tl_walk_stmt(b->items[i], w, user) == TL_WALK_STOP)
      return TL_WALK_STOP;
  return TL_WALK_GO;
}

/* ---- printing expressions ------------------------------------------------ */
static const char *op_text(int op) {
  switch (op) {
  case OP_FLOORDIV: return "//";
  case OP_SHL: return "<<";
  case OP_SHR: return ">>";
  case OP_LE: return "<=";
  case OP_GE: return ">=";
  case OP_EQ: return "==";
  case OP_NE: return "!=";
  case OP_AND: return "and";
  case OP_OR: return "or";
  case OP_NOT: return "not";
  }
  static char one[128][2];
  if (op > 0 && op < 128) {
    one[op][0] = (char)op;
    return one[op];
  }
  return "?";
}

const char *tl_op_text(int op) { return op_text(op); }

static void put_expr(tl_arena *a, char **out, const tl_expr *e) {
  switch (e->kind) {
  case E_CONST:
    if (e->type == TL_TY_UREAL || (e->type >= 0 && e->type < TL_DTYPE_COUNT && tl_dtype_is_float((tl_dtype)e->type)))
      *out = tl_arena_printf(a, "%s%.17g", *out, e->val.f);
    else if (e->type == TL_BOOL)
      *out = tl_arena_printf(a, "%s%s", *out, e->val.i ? "true" : "false");
    else if (e->type >= 0 && e->type < TL_DTYPE_COUNT && !tl_dtype_is_signed((tl_dtype)e->type) &&
             e->type != TL_TY_UINT)
      *out = tl_arena_printf(a, "%s%llu", *out, (unsigned long long)e->val.u);
    else
      *out = tl_arena_printf(a, "%s%lld", *out, (long long)e->val.i);
    return;
  case E_NAME:
    *out = tl_arena_printf(a, "%s%s", *out, e->sym ? e->sym->name : e->name);
    return;
  case E_INDEX:
  case E_CALL:
    if (e->kind == E_CALL)
      *out = tl_arena_printf(a, "%s%s(", *out, e->name ? e->name : tl_fn_name(e->fn));
    else
      *out = tl_arena_printf(a, "%s%s[", *out, e->sym ? e->sym->name : e->name);
    for (int i = 0; i < e->nargs; i++) {
      if (i)
        *out = tl_arena_printf(a, "%s, ", *out);
      put_expr(a, out, e->args[i]);
    }
    *out = tl_arena_printf(a, "%s%s", *out, e->kind == E_CALL ? ")" : "]");
    return;
  case E_UNARY: {
    bool wrap = e->args[0]->kind == E_UNARY; /* binary operands print their own parentheses */
    *out = tl_arena_printf(a, "%s%s%s%s", *out, op_text(e->op), e->op == OP_NOT ? " " : "", wrap ? "(" : "");
    put_expr(a, out, e->args[0]);
    if (wrap)
      *out = tl_arena_printf(a, "%s)", *out);
    return;
  }
  case E_BINARY:
    *out = tl_arena_printf(a, "%s(", *out);
    put_expr(a, out, e->args[0]);
    *out = tl_arena_printf(a, "%s %s ", *out, op_text(e->op));
    put_expr(a, out, e->args[1]);
    *out = tl_arena_printf(a, "%s)", *out);
    return;
  }
}

char *tl_expr_str(tl_arena *a, const tl_expr *e) {
  char *out = tl_arena_strdup(a, "");
  put_expr(a, &out, e);
  return out;
}

/* ---- hints and pointers ------------------------------------------------------- */
static int edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64)
    return 1000;
  int row[65];
  for (size_t j = 0; j <= lb; j++)
    row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int prev = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int cur = row[j];
      int sub = prev + (a[i - 1] != b[j - 1]);
      int del = row[j] + 1, ins = row[j - 1] + 1;
      row[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
      prev = cur;
    }
  }
  return row[lb];
}

const char *tl_closest(const char *name, const char *const *cands, int n) {
  const char *best = NULL;
  int bestd = 1000;
  /* a third of the length: one edit from 3 characters on; names of one or
   * two characters get no hint (every short name is "close") */
  int limit = (int)strlen(name) / 3;
  for (int i = 0; i < n; i++) {
    if (!cands[i] || strcmp(cands[i], name) == 0)
      continue;
    int d = edit_distance(name, cands[i]);
    if (d < bestd) {
      bestd = d;
      best = cands[i];
    }
  }
  return bestd <= limit && limit > 0 ? best : NULL;
}

const char *tl_ptr_key(tl_arena *a, const char *base, const char *key) {
  size_t extra = 0;
  for (const char *k = key; *k; k++)
    extra += (*k == '~' || *k == '/');
  size_t lb = strlen(base), lk = strlen(key);
  char *p = tl_arena_alloc(a, lb + 1 + lk + extra + 1);
  memcpy(p, base, lb);
  char *o = p + lb;
  *o++ = '/';
  for (const char *k = key; *k; k++) {
    if (*k == '~') {
      *o++ = '~';
      *o++ = '0';
    } else if (*k == '/') {
      *o++ = '~';
      *o++ = '1';
    } else
      *o++ = *k;
  }
  *o = 0;
  return p;
}

const char *tl_ptr_index(tl_arena *a, const char *base, int index) {
  return tl_arena_printf(a, "%s/%d", base, index);
}

tl_expr *tl_expr_copy(tl_arena *a, const tl_expr *e) {
  if (!e)
    return NULL;
  tl_expr *x = tl_arena_alloc(a, sizeof *x);
  *x = *e;
  if (e->nargs) {
    x->args = tl_arena_alloc(a, sizeof(tl_expr *) * (size_t)e->nargs);
    for (int i = 0; i < e->nargs; i++)
      x->args[i] = tl_expr_copy(a, e->args[i]);
  }
  return x;
}

/* ---- dumping the IR (tlc compile --dump PASS / --emit ir) ----------------------- */
/* After pass_range, the elements of tensors that x reads or writes: " (T
 * inside)" where every index is proven inside the tensor (no bounds guard),
 * " (T guard)" where a guard is kept (tl_expr.inside), in the order met. */
static void dump_elem_guards(FILE *f, const tl_expr *x) {
  if (!x)
    return;
  for (int i = 0; i < x->nargs; i++)
    dump_elem_guards(f, x->args[i]);
  if (x->kind == E_INDEX && x->sym && x->sym->kind == SYM_TENSOR)
    fprintf(f, " (%s %s)", x->sym->name, x->inside == (uint8_t)((1u << x->nargs) - 1u) ? "inside" : "guard");
}

/* A region; after pass_range, a tensor's dimensions say whether their
 * bounds guard is kept or proven unnecessary. */
static void dump_region(FILE *f, tl_arena *a, const tl_region *r, bool ranged) {
  fprintf(f, "%s[", r->sym ? r->sym->name : r->name);
  for (int d = 0; d < r->ndim; d++) {
    fprintf(f, "%s%s+:%lld", d ? ", " : "", r->lo[d] ? tl_expr_str(a, r->lo[d]) : "0", (long long)r->ext[d]);
    if (ranged && r->sym && r->sym->kind == SYM_TENSOR)
      fputs(r->inside[d] ? " (inside)" : " (guard)", f);
  }
  fputs("]", f);
}

void tl_mma_row_strides(const tl_sym *s, int64_t *warp_stride, int64_t *tile_stride) {
  bool il = s->mma_interleaved && s->mma_mi > 1;
  *warp_stride = il ? 16 : s->mma_mi * 16;
  *tile_stride = il ? (int64_t)s->mma_wm * 16 : 16;
}

/* After pass_range: the range of a block, loop or let variable. */
static void dump_range(FILE *f, const tl_sym *s, bool ranged) {
  if (ranged && s->has_range)
    fprintf(f, " in [%lld, %lld]", (long long)s->rlo, (long long)s->rhi);
}

static void dump_sym_place(FILE *f, const tl_sym *s) {
  static const char *const scopes[] = {"", "global", "shared", "fragment", "local"};
  fprintf(f, "%s %s[", scopes[s->scope], tl_dtype_name(s->dtype));
  for (int d = 0; d < s->ndim; d++)
    fprintf(f, "%s%lld", d ? ", " : "", (long long)s->dims[d]);
  fputs("]", f);
  if (s->scope == SCOPE_FRAGMENT && s->in_regs) {
    static const char *const lay[] = {[TL_LAYOUT_BLOCKED] = "blocked", [TL_LAYOUT_MMA] = "mma",
                                      [TL_LAYOUT_MMA_ROWS] = "mma-rows", [TL_LAYOUT_MFMA] = "mfma",
                                      [TL_LAYOUT_WMMA] = "wmma",
                                      [TL_LAYOUT_WMMA_GFX12] = "wmma-gfx12"};
    fprintf(f, " in registers, %s layout, %lld per thread", lay[s->reg_layout], (long long)s->per_thread);
    if (s->reg_layout != TL_LAYOUT_BLOCKED)
      fprintf(f, " (warps %dx%d, tiles %lldx%lld%s)", s->mma_wm, s->mma_wn, (long long)s->mma_mi, (long long)s->mma_ni,
              s->mma_interleaved && s->mma_mi > 1 ? ", row tiles interleaved" : "");
    if (s->packed)
      fputs(", packed in pairs", f);
    if (s->stages == 2)
      fputs(", 2 copies (one per iteration parity)", f);
  } else if (s->smem_offset >= 0) {
    fprintf(f, " in shared memory at %lld", (long long)s->smem_offset);
    if (s->stages > 1)
      fprintf(f, ", %lld stages", (long long)s->stages);
    if (s->swizzled)
      fputs(", swizzled", f);
  }
}

typedef struct {
  FILE *f;
  tl_arena *a;
  int depth;         /* of the statements being printed */
  unsigned lowered;  /* the program's TL_RAN_* bits: which annotations to print */
  const tl_program *prog;
} dumper;

/* Prints one statement's line (tl_walker.pre). */
static tl_walk_act dump_stmt(tl_stmt *s, void *user) {
  dumper *d = user;
  FILE *f = d->f;
  tl_arena *a = d->a;
  bool ranged = d->lowered & TL_RAN_RANGE;
  if ((d->lowered & TL_RAN_SPLIT) && s->region && s->region_frags) /* a region's first statement (pass_split.c) */
    fprintf(f, "region %d: a function of its own\n", s->region);
  if ((d->lowered & TL_RAN_BARRIER) && s->barrier_before)
    fprintf(f, "%*sbarrier\n", d->depth * 2, "");
  fprintf(f, "%*s%s", d->depth * 2, "", tl_stmt_kind_name(s->kind));
  switch (s->kind) {
  case S_ALLOC:
    fprintf(f, " %s: ", s->sym->name);
    dump_sym_place(f, s->sym);
    break;
  case S_VIEW:
    fprintf(f, " %s: ", s->sym->name);
    dump_sym_place(f, s->sym);
    fprintf(f, ", the memory of '%s'", s->sym->view_of ? s->sym->view_of->name : s->view_src);
    break;
  case S_ALLOC_VAR:
  case S_LET:
    fprintf(f, " %s: %s", s->sym->name, tl_type_name(s->sym->type));
    if (s->value)
      fprintf(f, " = %s", tl_expr_str(a, s->value));
    dump_range(f, s->sym, ranged);
    if (s->lag_load)
      fputs(" [loaded as its iteration starts, before the barrier or the wait for the stage, 2 copies in turn, for the late tail]", f);
    break;
  case S_CLUSTER_REDUCE:
    fprintf(f, " %s ", s->reduce_type == RED_MAX ? "max" : s->reduce_type == RED_MIN ? "min" : "sum");
    dump_region(f, a, s->dst, ranged);
    fputs(" [into the block of rank 0 of the cluster, in rank order]", f);
    break;
  case S_COPY:
  case S_REDUCE:
  case S_CUMSUM:
  case S_ATOMIC_ADD:
  case S_FILL:
    fputc(' ', f);
    if (s->src) {
      dump_region(f, a, s->src, ranged);
      fputs(" -> ", f);
    }
    dump_region(f, a, s->dst, ranged);
    if (s->kind == S_FILL || (s->kind == S_ATOMIC_ADD && !s->src))
      fprintf(f, " = %s", tl_expr_str(a, s->value));
    if (s->kind == S_REDUCE || s->kind == S_CUMSUM)
      fprintf(f, " dim %d%s", s->dim, s->by_rows ? ", by rows" : "");
    if (s->tma)
      fprintf(f, " [TMA: cp.async.bulk.tensor, tensor map %d, prefetched]", s->tma_map);
    else if (s->wspec_pre)
      fprintf(f, " [TMA: cp.async.bulk.tensor, tensor map %d, by the producer warpgroup tile by tile, %s; freed "
                 "after %s]", s->tma_map,
              s->pre_stages > 1 ? "into two copies of the buffer (the next tile's while this one's is read)"
                                : "into the buffer (no room in shared memory for a second copy)",
              s->pre_last == s ? "itself" : tl_stmt_kind_name(s->pre_last->kind));
    else if (s->async_copy)
      fputs(s->prefetch ? " [cp.async, prefetched]" : " [cp.async]", f);
    if (s->tma_why)
      fprintf(f, " [not TMA: %s]", s->tma_why);
    if (s->kind == S_COPY && s->evict) {
      static const char *const ev[] = TL_EVICT_NAMES;
      fprintf(f, " [L2 %s%s]", ev[s->evict],
              s->tma || s->wspec_pre || s->async_copy ? "" : ": a hint only cp.async and bulk tensor copies take");
    }
    if (s->tma_store)
      fprintf(f, " [TMA store: staged in shared memory, 128-byte panels, each a bulk tensor copy through tensor map "
                 "%d%s%s]",
              s->store_map, d->prog->epi_buffers == 2 ? ", two panels staged, one filled while the other is stored" : "",
              s->store_async ? ", the last ones not waited for (the kernel's last statement: its threads go on to "
                               "the next tile)" : "");
    else if (s->store_why)
      fprintf(f, " [not a TMA store: %s]", s->store_why);
    if (s->store_defer)
      fputs(" [deferred: converted to pairs in registers at the tile's end; panel p staged and stored once the "
            "next tile's loop has issued the gemm of its iteration p, the rest after that loop, the last tile's "
            "after the walk]", f);
    else if (s->defer_why)
      fprintf(f, " [not deferred: %s]", s->defer_why);
    if (s->mcast)
      fprintf(f, " [multicast: each block of a cluster of %lld copies 1/%lld of the box into every block]",
              (long long)d->prog->cl_size, (long long)d->prog->cl_size);
    else if (s->cluster_why)
      fprintf(f, " [not multicast: %s]", s->cluster_why);
    if (s->byte_copy)
      fprintf(f, " [bytes, %d at a time]", s->byte_copy);
    if (s->reg_prefetch)
      fputs(" [prefetched through registers, one iteration ahead, into 2 copies in turn]", f);
    if (s->lag_load)
      fputs(" [loaded as its iteration starts, before the barrier or the wait for the stage, 2 copies in turn, for the late tail]", f);
    break;
  case S_GEMM: {
    /* the instruction, and why not a better one: 16-bit operands take
     * k16 shapes, 8-bit ones k32 (with the types named) */
    bool b8 = tl_dtype_size(s->A->dtype) == 1;
    int ks = b8 ? 32 : 16;
    const char *ty = b8 ? tl_arena_printf(a, " %s.%s.%s", tl_mma_ptx_type(s->C->dtype == TL_INT32 ? TL_INT32 : TL_FLOAT32),
                                          tl_mma_ptx_type(s->A->dtype), tl_mma_ptx_type(s->B->dtype))
                        : "";
    fprintf(f, " %s%s x %s%s -> %s", s->A->name, s->trans_a ? "^T" : "", s->B->name, s->trans_b ? "^T" : "", s->C->name);
    if (s->use_wgmma)
      fprintf(f, " [wgmma m64nNk%d%s]", ks, ty);
    else if (s->use_mma)
      fprintf(f, " [mma.sync m16n8k%d%s]", ks, ty);
    else if (s->use_amd_mma)
      fputs(" [mfma/wmma 16x16x16]", f);
    else
      fprintf(f, " [per-element%s%s]", s->mma_why ? ": " : "", s->mma_why ? s->mma_why : "");
    if (s->a_regs)
      fputs(s->wg_pending ? " [A in registers: set only after the wait for the pending group, in two sets for even "
                            "and odd iterations of a pipelined loop (emit_cuda.c's held_a)]" : " [A in registers]", f);
    if (s->use_wgmma && s->ov_gemm)
      fprintf(f, " [%lld x m64n%lld per warpgroup and k%d step, then the previous iteration's gemm into %s issued, "
              "wait_group 1]", (long long)s->C->mma_mi, (long long)s->C->dims[1], ks, s->ov_gemm->C->name);
    else if (s->use_wgmma && s->ov_late)
      fprintf(f, " [%lld x m64n%lld per warpgroup and k%d step, issued in the next iteration after the loop's "
              "other gemm on wgmma, waited for (wait_group 0) where the body first needs it]", (long long)s->C->mma_mi,
              (long long)s->C->dims[1], ks);
    else if (s->use_wgmma && (d->lowered & TL_RAN_PIPELINE))
      fprintf(f, " [%lld x m64n%lld per warpgroup and k%d step, wait_group %d%s%s]", (long long)s->C->mma_mi,
              (long long)s->C->dims[1], ks, s->wg_pending,
              s->wg_pending ? ": the next K tile's group is issued while this one runs"
                            : s->pend_why ? ": not left in flight: " : "", s->wg_pending || !s->pend_why ? "" : s->pend_why);
    if (s->use_wgmma && (s->A->rotates || s->B->rotates))
      fprintf(f, " [%s rotates: 2 copies, the next iteration writes the other]", s->A->rotates ? s->A->name : s->B->name);
    else if (s->use_wgmma)
      fprintf(f, " [%lld x m64n%lld per warpgroup and k%d step]", (long long)s->C->mma_mi, (long long)s->C->dims[1], ks);
    else if (s->why_not_wgmma)
      fprintf(f, " [not wgmma: %s]", s->why_not_wgmma);
    break;
  }
  case S_PARALLEL:
    fputs(" (", f);
    for (int i = 0; i < s->nvars; i++)
      fprintf(f, "%s%s < %s", i ? ", " : "", s->vars[i]->name, tl_expr_str(a, s->extents[i]));
    fputs(")", f);
    if (s->vec_dequant == 2)
      fputs(" [2 at a time: each thread's pairs of its register fragment, packed words to 16-bit float pairs, "
            "paired arithmetic]", f);
    else if (s->vec_dequant)
      fprintf(f, " [%d at a time: packed words to 16-bit float pairs, paired arithmetic, 16-byte stores%s]",
              s->vec_dequant, s->vec_once ? ", the other reads once for all of them" : "");
    for (int m = 0; m < s->npair_maps; m++) {
      const tl_pair_map *pm = &s->pair_maps[m];
      int bits = tl_dtype_bits(pm->read->sym->dtype), apart = 0;
      for (int64_t u = 0; u < pm->n; u++)
        apart += (pm->hi[u] - pm->lo[u]) * bits == 16;
      fprintf(f, " [%s through a map: a thread's pairs in %lld-byte loads, %d of %lld pairs 16 bits apart]",
              pm->read->sym->name, (long long)(pm->chunk * bits / 8), apart, (long long)pm->n);
    }
    if (s->vec_read)
      fprintf(f, " [4 at a time: %s read as 16-byte vectors (the CUDA back end)]", s->vec_read->sym->name);
    break;
  case S_LOOP: {
    static const char *const kinds[] = {"serial", "unroll", "vectorized", "pipelined"};
    fprintf(f, " %s %s in range(%s, +%s, step %s)", kinds[s->loop_kind], s->var->name, tl_expr_str(a, s->start),
            tl_expr_str(a, s->extent), tl_expr_str(a, s->step));
    if (s->loop_kind == LOOP_PIPELINED)
      fprintf(f, " num_stages %lld%s", (long long)s->num_stages, s->pipe ? " [software pipelined]" : "");
    if (s->pipe && (d->lowered & TL_RAN_PIPELINE))
      fprintf(f, " [%lld stages, copies %lld ahead%s%s]", (long long)s->pipe_stages, (long long)s->pipe_ahead,
              s->wg_drain ? ", wgmma groups drained at the end" : "",
              s->ov_gemm ? ", a gemm issued one iteration late (the last after the loop)" : "");
    if (s->ov_gemm)
      fprintf(f, " [late gemm waited for %s%s]", s->ov_wait ? "before " : "at the end of the body",
              s->ov_wait ? s->ov_wait->pointer : "");
    if (s->wg_lag)
      fprintf(f, " [tail one iteration late: it runs after the next iteration's gemm is issued; trips of %d]", s->wg_lag);
    else if (s->lag_why)
      fprintf(f, " [tail not late: %s]", s->lag_why);
    if (s->tma)
      fprintf(f, " [mbarriers %d..%d]", s->mbar, s->mbar + (int)s->pipe_stages - 1);
    if (s->wspec)
      fprintf(f, " [warp-specialized: a producer warpgroup issues the copies; stages freed on mbarriers %d..%d, "
              "%d iteration%s later]", s->wspec_empty, s->wspec_empty + (int)s->pipe_stages - 1, s->wspec_lag,
              s->wspec_lag == 1 ? "" : "s");
    if (s->wspec_why)
      fprintf(f, " [not warp-specialized: %s]", s->wspec_why);
    if (s->slices > 1)
      fprintf(f, " [in %d slices: slice s of the program's threads runs iterations s, s + %d, ...; its gemms' sums "
              "added into slice 0's after the loop, through %s's memory; slice 0 runs the statements before and "
              "after the loop; named barriers 1..%d]", s->slices, s->slices, s->slice_buf->name, s->slices + 1);
    else if (s->slices_why)
      fprintf(f, " [not in %lld slices: %s]", (long long)s->slices_req, s->slices_why);
    else if (s->slices_req > 1)
      fprintf(f, " [not in %lld slices: the loop is not warp-specialized]", (long long)s->slices_req);
    if (s->pingpong)
      fprintf(f, " [ping-pong: the warpgroups take turns issuing the body's gemms on wgmma, named barriers 2..%lld]",
              (long long)(1 + d->prog->threads[0] / 128));
    else if (s->pingpong_why)
      fprintf(f, " [no ping-pong: %s]", s->pingpong_why);
    else if (s->pingpong_req == 1)
      fprintf(f, " [no ping-pong: the loop is not warp-specialized]");
    if (s->mcast)
      fprintf(f, " [thread-block cluster %lldx%lldx%lld: copies multicast%s]", (long long)d->prog->cl[0],
              (long long)d->prog->cl[1], (long long)d->prog->cl[2], s->wspec ? ", each stage freed in every block" : "");
    else if (s->cluster_why)
      fprintf(f, " [no multicast across a cluster: %s]", s->cluster_why);
    if (s->kgroup && s->kgroup_tail)
      fprintf(f, " [the last K tiles that do not fill a group of %d, one at a time]", s->kgroup);
    else if (s->kgroup)
      fprintf(f, " [K tiles grouped: %d consecutive tiles a stage, one box and mbarrier per stage, one wgmma group "
              "over them (%s)%s]", s->kgroup, s->k_group ? "the loop's \"k_group\"" :
              "the compiler's choice: the tiles were under 128 bytes in K", s->kgroup_rest ? "; the last tiles after the loop" : "");
    else if (s->kgroup_why)
      fprintf(f, " [K tiles not grouped: %s]", s->kgroup_why);
    dump_range(f, s->var, ranged);
    break;
  }
  case S_IF:
    fprintf(f, " %s", tl_expr_str(a, s->value));
    break;
  case S_PRINT:
  case S_ASSERT:
    fprintf(f, " %s%s%s%s", s->value ? tl_expr_str(a, s->value) : "", s->msg ? " \"" : "", s->msg ? s->msg : "",
            s->msg ? "\"" : "");
    break;
  case S_SYNC_THREADS:
    if (s->fence)
      fprintf(f, " fence [and a device-scope memory fence: bar.sync, fence.sc.gpu, bar.sync]");
    break;
  case S_ATOMIC:
    fprintf(f, " %s %s, %s%s%s", s->atomic_name, tl_expr_str(a, s->lhs), tl_expr_str(a, s->value),
            s->sym ? " -> " : "", s->sym ? s->sym->name : "");
    break;
  case S_ASSIGN:
    fprintf(f, " %s = %s", tl_expr_str(a, s->lhs), tl_expr_str(a, s->value));
    if (ranged) {
      dump_elem_guards(f, s->lhs);
      dump_elem_guards(f, s->value);
    }
    break;
  case S_ANNOTATE_LAYOUT:
    for (int i = 0; i < s->nlayouts; i++)
      if (s->layout_syms && s->layout_syms[i] && s->layout_syms[i]->scope == SCOPE_GLOBAL)
        fprintf(f, " %s [ignored: a layout on global memory; the tensor stays dense row-major]",
                s->layout_syms[i]->name);
      else if (s->layout_syms && s->layout_syms[i])
        fprintf(f, " %s", s->layout_syms[i]->name);
    break;
  default:
    break;
  }
  fprintf(f, "%s   # %s\n", s->block_level ? " (block)" : "", s->pointer);
  return TL_WALK_GO;
}

/* A body is printed one level deeper, an else body after "else". */
static void dump_enter(tl_stmt *s, int which, void *user) {
  dumper *d = user;
  (void)s;
  if (which)
    fprintf(d->f, "%*selse\n", d->depth * 2, "");
  d->depth++;
}

/* After a loop's body: the barrier at the end of each iteration. */
static void dump_leave(tl_stmt *s, int which, void *user) {
  dumper *d = user;
  if (!which && (d->lowered & TL_RAN_BARRIER) && s->barrier_end)
    fprintf(d->f, "%*sbarrier (end of each iteration)\n", d->depth * 2, "");
  d->depth--;
}

void tl_dump_program(const tl_program *prog, void *fp) {
  FILE *f = fp;
  tl_arena *a = prog->arena;
  if (prog->nkernels > 1)
    fprintf(f, "kernel %d of %d (%s, entry %s, launched after the one before it on the same stream%s): ",
            prog->kernel_index + 1, prog->nkernels, prog->kptr, prog->entry,
            prog->pdl_wait ? "; starts early, waits first for the one before it (programmatic launch)" : "");
  fprintf(f, "kernel %s: threads %lld x %lld x %lld, grid (", prog->name, (long long)prog->threads[0],
          (long long)prog->threads[1], (long long)prog->threads[2]);
  for (int i = 0; i < prog->ngrid; i++)
    fprintf(f, "%s%s", i ? ", " : "", tl_expr_str(a, prog->grid[i]));
  fprintf(f, "), dynamic shared memory %lld bytes (scratch %lld at %lld)\n", (long long)prog->smem_bytes,
          (long long)prog->scratch_bytes, (long long)prog->scratch_offset);
  if (prog->threads_asked)
    fprintf(f, "threads: %lld, not the program's %lld (pass_threads.c: at those a gemm's C would not fit in "
               "registers and the gemm would run off the matrix cores; nothing in the program depends on its "
               "thread count)\n",
            (long long)prog->threads[0], (long long)prog->threads_asked);
  else if (prog->threads_why)
    fprintf(f, "threads: the program's, though a gemm's C does not fit in registers at those (pass_threads.c "
               "does not grow them: %s)\n", prog->threads_why);
  if (prog->backend) /* from the "emit" stage on (compile.c) */
    fprintf(f, "backend %s%s%s\n", prog->backend, prog->backend_why ? ", not ptx: " : "",
            prog->backend_why ? prog->backend_why : "");
  for (int i = 0; i < prog->nparams; i++) {
    const tl_sym *s = prog->params[i];
    fprintf(f, "%s %s: %s", s->workspace ? "workspace" : "param", s->name, tl_dtype_name(s->dtype));
    if (s->kind == SYM_TENSOR) {
      fputs(" tensor [", f);
      for (int d = 0; d < s->ndim; d++)
        fprintf(f, "%s%s", d ? ", " : "", tl_expr_str(a, s->shape[d]));
      fprintf(f, "] align %lld%s", (long long)s->align,
              s->workspace ? " (global memory the launch allocates, not zeroed, shared by the program's kernels)" : "");
    }
    fputc('\n', f);
  }
  for (int i = 0; i < prog->ntmaps; i++) {
    const tl_tmap *m = &prog->tmaps[i];
    fprintf(f, "tensor map %d: %s, box [", i, m->tensor->name);
    for (int d = 0; d < m->rank; d++)
      fprintf(f, "%s%lld", d ? ", " : "", (long long)m->box[d]);
    if (m->swizzle)
      fprintf(f, "] (innermost first), swizzle %dB, out of bounds reads zero\n", m->swizzle);
    else
      fprintf(f, "] (innermost first), swizzle none, out of bounds reads zero\n");
  }
  if (prog->nmbar)
    fprintf(f, "mbarriers: %d at %lld\n", prog->nmbar, (long long)prog->mbar_offset);
  if (prog->wspec_threads)
    fprintf(f, "producer warpgroup: %lld threads after the program's%s; %d blocks per SM; setmaxnreg %d / %d%s\n",
            (long long)prog->wspec_threads,
            prog->slices > 1 ? tl_arena_printf(prog->arena, " (%d slices of %lld)", prog->slices,
                                               (long long)prog->threads[0]) : "", prog->wspec_blocks, prog->wspec_regs[0], prog->wspec_regs[1],
            !prog->persistent ? ""
            : !(prog->lowered & TL_RAN_BARRIER) ? "; persistent: the blocks started walk the grid's tiles"
            : prog->tile_barrier ? "; persistent: the blocks started walk the grid's tiles, a barrier between tiles "
                                   "(their shared memory conflicts)"
                                 : "; persistent: the blocks started walk the grid's tiles, no barrier between "
                                   "tiles (only the stages' mbarriers: one warpgroup's epilogue runs beside "
                                   "another's next gemm)");
  if (prog->lowered & TL_RAN_RANGE)
    for (int i = 0; i < 3; i++)
      if (prog->block_vars[i]) {
        fprintf(f, "block var %s", prog->block_vars[i]->name);
        dump_range(f, prog->block_vars[i], true);
        fputc('\n', f);
      }
  if (prog->lowered & TL_RAN_BARRIER)
    fprintf(f, "barriers: marked 'barrier' below%s\n",
            prog->fence_async ? ", each after fence.proxy.async (a gemm runs on wgmma)" : "");
  if ((prog->lowered & TL_RAN_RASTER) && prog->raster_panel)
    fprintf(f, "blocks: rasterized in stripes of %lld block %s%s\n", (long long)prog->raster_panel,
            prog->raster_column ? "columns" : "rows",
            prog->raster_chosen ? " (the compiler's choice: a gemm's A and B tiles are copied by different block "
                                  "variables, and no use_swizzle is given)" : "");
  else if ((prog->lowered & TL_RAN_RASTER) && prog->reverse_x)
    fprintf(f, "blocks: x in reverse (the blocks with the most loop iterations first)%s\n",
            prog->persistent ? "; the persistent blocks walk the tiles x slowest, in rounds, every other one in "
                               "reverse, in groups of (y, z) pairs that fill whole pairs of rounds"
                             : "");
  else if (prog->lowered & TL_RAN_RASTER)
    fprintf(f, "blocks: in grid order%s%s%s\n", prog->raster_why ? " (the compiler's choice: " : "",
            prog->raster_why ? prog->raster_why : "", prog->raster_why ? ")" : "");
  if ((prog->lowered & TL_RAN_SPLIT) && prog->nregions)
    fprintf(f, "regions: %d runs of the top level's statements emitted as functions of their own (the kernel has "
               "%lld statements, at least %lld: compile time linear in its length; bench/compile.md)\n",
            prog->nregions, (long long)prog->nstatements,
            (long long)(prog->split_statements ? prog->split_statements : TL_SPLIT_MIN_STATEMENTS));
  else if ((prog->lowered & TL_RAN_SPLIT) && prog->split_why)
    fprintf(f, "regions: none, the kernel of %lld statements is one function: %s\n", (long long)prog->nstatements,
            prog->split_why);
  static const tl_walker w = {.pre = dump_stmt, .enter_body = dump_enter, .leave_body = dump_leave};
  dumper d = {.f = f, .a = a, .lowered = prog->lowered, .prog = prog};
  tl_walk((tl_body *)&prog->body, &w, &d); /* the walk changes nothing */
}

/* The first register fragment x indexes (other than by rows, when two_d). */
static const tl_sym *par_owner(const tl_expr *x, bool two_d) {
  if (!x)
    return NULL;
  if (x->kind == E_INDEX && x->sym->kind == SYM_BUFFER && x->sym->scope == SCOPE_FRAGMENT && x->sym->in_regs &&
      !(two_d && x->sym->reg_layout == TL_LAYOUT_MMA_ROWS))
    return x->sym;
  for (int i = 0; i < x->nargs; i++) {
    const tl_sym *s = par_owner(x->args[i], two_d);
    if (s)
      return s;
  }
  return NULL;
}

const tl_sym *tl_body_owner(const tl_body *b, bool two_d) {
  for (int i = 0; i < b->n; i++) {
    const tl_stmt *s = b->items[i];
    const tl_sym *o = par_owner(s->lhs, two_d);
    if (!o)
      o = par_owner(s->value, two_d);
    if (!o)
      o = tl_body_owner(&s->body, two_d);
    if (!o)
      o = tl_body_owner(&s->else_body, two_d);
    if (o)
      return o;
  }
  return NULL;
}

/* A whole-buffer fill of zeros, or a constant if whose side taken is that fill alone: the fill, else NULL. */
static const tl_stmt *zero_fill(const tl_stmt *s) {
  if (s->kind == S_IF && s->value->kind == E_CONST) {
    bool f = s->value->type == TL_TY_UREAL || (s->value->type >= 0 && s->value->type < TL_DTYPE_COUNT &&
                                               tl_dtype_is_float((tl_dtype)s->value->type));
    bool take = f ? s->value->val.f != 0 : s->value->val.i != 0;
    const tl_body *b = take ? &s->body : &s->else_body;
    return b->n == 1 ? zero_fill(b->items[0]) : NULL;
  }
  if (s->kind != S_FILL || s->value->kind != E_CONST)
    return NULL;
  bool f = s->value->type == TL_TY_UREAL ||
           (s->value->type >= 0 && s->value->type < TL_DTYPE_COUNT && tl_dtype_is_float((tl_dtype)s->value->type));
  if (f ? s->value->val.f != 0 : s->value->val.i != 0)
    return NULL;
  int64_t ext = 1, all = 1;
  for (int d = 0; d < s->dst->ndim; d++)
    ext *= s->dst->ext[d];
  for (int d = 0; d < s->dst->sym->ndim; d++)
    all *= s->dst->sym->dims[d];
  return ext == all ? s : NULL;
}

void tl_fold_fills(tl_arena *a, const tl_body *b, tl_vec *out) {
  for (int i = 0; i < b->n; i++) {
    const tl_stmt *s = b->items[i], *f = i + 1 < b->n ? zero_fill(s) : NULL, *g = f ? b->items[i + 1] : NULL;
    if (g && g->kind == S_GEMM && g->use_wgmma && !g->ov_late && !g->clear_accum && g->C == f->dst->sym) {
      tl_vec_push(a, out, (void *)f);
      tl_vec_push(a, out, (void *)g);
    }
    if (tl_stmt_kind_flags(s->kind) & TL_KIND_BODY)
      tl_fold_fills(a, &s->body, out);
    if (tl_stmt_kind_flags(s->kind) & TL_KIND_ELSE)
      tl_fold_fills(a, &s->else_body, out);
  }
}

bool tl_vec_has(const tl_vec *v, const void *item) {
  for (int i = 0; i < v->n; i++)
    if (v->items[i] == item)
      return true;
  return false;
}

const tl_stmt *tl_wspec_loop(const tl_program *p) {
  for (int i = 0; i < p->body.n; i++)
    if (p->body.items[i]->kind == S_LOOP && p->body.items[i]->wspec)
      return p->body.items[i];
  return NULL;
}

int64_t tl_floordiv64(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    q--;
  return q;
}

int64_t tl_floormod64(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return r;
}
