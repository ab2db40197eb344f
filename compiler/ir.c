/*
 * ir.c - the small utilities every stage of the compiler shares: the arena,
 * growable vectors, the diagnostics list, and printing of types,
 * functions and expressions (for messages and IR dumps).
 */
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

static char *arena_vprintf(tl_arena *a, const char *fmt, va_list ap) {
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
  char *p = arena_vprintf(a, fmt, ap);
  va_end(ap);
  return p;
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
  g->message = arena_vprintf(d->arena, fmt, ap);
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

static const char *const fn_names[FN_COUNT] = {
    [FN_NONE] = "?",          [FN_CEILDIV] = "ceildiv",   [FN_MIN] = "min",
    [FN_MAX] = "max",         [FN_ABS] = "abs",           [FN_EXP] = "exp",
    [FN_EXP2] = "exp2",       [FN_LOG] = "log",           [FN_LOG2] = "log2",
    [FN_SQRT] = "sqrt",       [FN_RSQRT] = "rsqrt",       [FN_TANH] = "tanh",
    [FN_SIGMOID] = "sigmoid", [FN_FLOOR] = "floor",       [FN_CEIL] = "ceil",
    [FN_ROUND] = "round",     [FN_POW] = "pow",           [FN_FMA] = "fma",
    [FN_IF_THEN_ELSE] = "if_then_else",                   [FN_INFINITY] = "infinity",
    [FN_MAX_VALUE] = "max_value",                         [FN_MIN_VALUE] = "min_value",
    [FN_CAST] = "cast",       [FN_REINTERPRET] = "reinterpret",
    [FN_THREAD_BINDING] = "thread_binding",
};

const char *tl_fn_name(tl_fn f) { return (unsigned)f < FN_COUNT ? fn_names[f] : "?"; }

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
