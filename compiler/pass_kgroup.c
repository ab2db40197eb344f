/*
 * pass_kgroup.c - several consecutive K tiles per pipeline stage.
 *
 * A pipelined K loop whose tiles are narrow in K (examples/gemm.json as
 * written: K tiles of 32 float16, rows of 64 bytes) pays its per-stage
 * costs (a wait on the stage's mbarrier, its release, a wgmma group's
 * commit and wait, one bulk tensor copy per tile and operand) for little
 * work, and its tiles take the 64- or 32-byte swizzle.  Where the loop's
 * body is only copies of tiles into shared buffers and gemms of those
 * buffers, this pass makes each stage hold g consecutive K tiles: the
 * buffers grow g times along K, each copy's box covers the g tiles
 * (one bulk tensor copy, one expect-tx, one mbarrier per stage), the gemm
 * runs its K steps over all of them in one wgmma group, and the loop runs
 * over groups of g tiles.  g makes a tile's extent in K 128 bytes (the
 * 128-byte swizzle of a wgmma operand): 2 for K tiles of 64 bytes, 4 for
 * 32 bytes.
 *
 * Results do not change: the gemm accumulates the same products into C in
 * the same order (K steps of the first tile, then of the next), and the
 * tiles that do not fill a last group (the loop's extent E not a multiple
 * of g, which a dynamic E may be) run after the loop, one at a time, as
 * the program wrote them (a serial loop over the last E mod g tiles with
 * buffers of the program's own shape), so no tile past the loop's own
 * range is ever read, whatever the tensor's extent.
 *
 * Needs: a checked program, for a target of tl_codegen (the pass acts only
 * where the target has wgmma and TMA: sm_90a; elsewhere it changes
 * nothing).  Runs before pass_place, which then places the program as if
 * it had been written with the wider tiles.  Produces, on a pipelined loop
 * it groups: kgroup (g) and kgroup_rest (the serial loop of the last
 * tiles, or NULL when E is a constant multiple of g), with kgroup_tail on
 * that loop; the wider buffers (dims), copies (src, dst extents and the
 * source's start in K) and the loop's start (0) and extent (E' / g, E' =
 * max(E, 0)); on a pipelined loop with narrow tiles that it does not
 * group, on a target with wgmma and TMA: kgroup_why (`--emit ir` prints
 * both).  New symbols (the last
 * tiles' loop variable and buffers) get fresh slots.  Keeps: everything
 * else.
 *
 * A pipelined loop is grouped when:
 *   - it does not say "k_group" (or says 0), or says a number g over 1
 *     that makes the tiles' extent in K a multiple of 128 bytes ("k_group":
 *     1 keeps one tile a stage), gives no explicit
 *     "order"/"stage" and no cluster of more than one block, and keeps TMA
 *     ("tma" not false);
 *   - its num_stages is at least 2 and its body holds only copies from
 *     tensors into whole 2-D shared buffers and gemms (not clear_accum) of
 *     those buffers, every buffer written by one copy and read by the
 *     gemms as A or B, and used by no other statement of the kernel (and
 *     neither a view nor viewed, nor given a layout other than "swizzle");
 *   - each copy's source starts, along exactly one dimension, at the loop
 *     variable times the tile's extent there plus what does not depend on
 *     it (consecutive tiles), and that dimension is the buffer's K (A's
 *     dimension 1, or 0 with transpose_A; B's 0, or 1 with transpose_B);
 *     every other start does not depend on the variable;
 *   - the tile's extent in K times the element size is 32 or 64 bytes
 *     (16- or 8-bit elements), so g is 4 or 2;
 *   - each gemm's C is a float32 or int32 fragment (a narrower one is
 *     rounded after each gemm, so fewer gemms would change results) of
 *     at most TL_MAX_REG_ELEMS elements a thread in whole warpgroups (a
 *     gemm that wgmma can take);
 *   - a constant E is at least g, and the loop's num_stages + 1 stages of
 *     the wider buffers, the last tiles' buffers and the kernel's other
 *     shared buffers fit in the target's shared memory (with 2 KiB for
 *     mbarriers and alignment).
 */
#include <stdio.h>
#include <string.h>
#include "ir.h"
#include "pass.h"

#define KGROUP_ROW_BYTES 128 /* a grouped tile's extent in K, in bytes: the 128-byte swizzle */
#define KGROUP_SLACK 2048    /* shared memory kept for mbarriers and the 1024-byte alignment */
#define KGROUP_MAX_COPIES 8

typedef struct {
  tl_program *prog;
  const tl_codegen *cg;
  int64_t smem_limit;
} P;

typedef struct {
  tl_stmt *copy;
  tl_sym *buf;
  int sd;     /* the source dimension that moves with the loop variable */
  int bd;     /* the buffer's dimension it fills (its K) */
  tl_sym *narrow; /* the last tiles' buffer */
} Tile;

/* ---- small expression builders (typed as the checker would) -------------------------- */
static tl_expr *mk_int(tl_arena *a, tl_type t, int64_t v, const tl_expr *at) {
  tl_expr *e = tl_arena_alloc(a, sizeof *e);
  e->kind = E_CONST;
  e->type = t;
  e->val.i = v;
  e->column = at ? at->column : 0;
  e->pointer = at ? at->pointer : NULL;
  return e;
}

static tl_expr *mk_bin(tl_arena *a, int op, tl_expr *l, tl_expr *r, tl_type t) {
  tl_expr *e = tl_arena_alloc(a, sizeof *e);
  e->kind = E_BINARY;
  e->op = op;
  e->type = t;
  e->nargs = 2;
  e->args = tl_arena_alloc(a, 2 * sizeof *e->args);
  e->args[0] = l;
  e->args[1] = r;
  e->column = l->column;
  e->pointer = l->pointer;
  return e;
}

static tl_expr *mk_name(tl_arena *a, tl_sym *s, const tl_expr *at) {
  tl_expr *e = tl_arena_alloc(a, sizeof *e);
  e->kind = E_NAME;
  e->sym = s;
  e->name = s->name;
  e->type = s->type;
  e->column = at ? at->column : 0;
  e->pointer = at ? at->pointer : NULL;
  return e;
}

/* A copy of x with every use of v replaced by a copy of by. */
static tl_expr *subst(tl_arena *a, const tl_expr *x, const tl_sym *v, const tl_expr *by) {
  if (!x)
    return NULL;
  if (x->kind == E_NAME && x->sym == v)
    return tl_expr_copy(a, by);
  tl_expr *y = tl_arena_alloc(a, sizeof *y);
  *y = *x;
  if (x->nargs) {
    y->args = tl_arena_alloc(a, sizeof *y->args * (size_t)x->nargs);
    for (int i = 0; i < x->nargs; i++)
      y->args[i] = subst(a, x->args[i], v, by);
  }
  return y;
}

/* Is x = v * coef + (terms without v), through +, - and * by constants?
 * Sets *coef (0 when x does not use v). */
static bool linear(const tl_expr *x, const tl_sym *v, int64_t *coef) {
  *coef = 0;
  if (!tl_expr_names(x, v))
    return true;
  if (x->kind == E_NAME)
    return x->sym == v ? (*coef = 1, true) : false;
  if (x->kind != E_BINARY)
    return false;
  int64_t c0, c1;
  if (!linear(x->args[0], v, &c0) || !linear(x->args[1], v, &c1))
    return false;
  switch (x->op) {
  case '+': *coef = c0 + c1; return true;
  case '-': *coef = c0 - c1; return true;
  case '*':
    if (x->args[1]->kind == E_CONST && !c1)
      return (*coef = c0 * x->args[1]->val.i), true;
    if (x->args[0]->kind == E_CONST && !c0)
      return (*coef = c1 * x->args[0]->val.i), true;
    return false;
  default: return false;
  }
}

/* Is b's layout annotation only "swizzle" (no index map)? */
static bool plain_swizzle(const tl_sym *b) { return b->layout && b->layout->swizzle && !b->layout->nindex; }

/* ---- uses of a buffer ------------------------------------------------------------------ */
typedef struct {
  const tl_sym *b;
  const tl_stmt *loop; /* statements of its body that may use b: its copies and gemms */
  bool used;
} U;

static bool region_of(const tl_region *r, const tl_sym *b) { return r && r->sym == b; }

static tl_walk_act use_pre(tl_stmt *s, void *user) {
  U *u = user;
  if (s->kind == S_ALLOC && s->sym == u->b)
    return TL_WALK_GO;
  for (int i = 0; i < u->loop->body.n; i++)
    if (u->loop->body.items[i] == s)
      return TL_WALK_SKIP; /* checked by the caller */
  if (region_of(s->src, u->b) || region_of(s->dst, u->b) || s->A == u->b || s->B == u->b || s->C == u->b)
    u->used = true;
  for (int i = 0; i < s->nlayouts && s->layout_syms; i++) /* "swizzle" says only where elements live */
    u->used |= s->layout_syms[i] == u->b && !plain_swizzle(u->b);
  if (s->kind == S_VIEW && s->sym && s->sym->view_of == u->b)
    u->used = true;
  return u->used ? TL_WALK_STOP : TL_WALK_GO;
}

static tl_walk_act use_expr(tl_expr *x, tl_stmt *s, void *user) {
  U *u = user;
  (void)s;
  if (x->sym == u->b) {
    u->used = true;
    return TL_WALK_STOP;
  }
  return TL_WALK_GO;
}

/* Does a statement of the kernel other than loop's copies and gemms (and b's
 * alloc) use buffer b? */
static bool used_elsewhere(tl_program *prog, const tl_stmt *loop, const tl_sym *b) {
  U u = {.b = b, .loop = loop};
  tl_walk(&prog->body, &(tl_walker){.pre = use_pre, .expr = use_expr}, &u);
  return u.used;
}

/* ---- the decision ------------------------------------------------------------------------ */
static int64_t buf_bytes(const tl_sym *b) {
  int64_t n = (int64_t)tl_dtype_size(b->dtype);
  for (int d = 0; d < b->ndim; d++)
    n *= b->dims[d];
  return n;
}

static tl_walk_act shared_sum(tl_stmt *s, void *user) {
  if (s->kind == S_ALLOC && s->sym && s->sym->scope == SCOPE_SHARED)
    *(int64_t *)user += buf_bytes(s->sym);
  return TL_WALK_GO;
}

/* The tile of copy c (into t), or why it does not qualify. */
static const char *tile_of(const tl_stmt *loop, tl_stmt *c, Tile *t) {
  const tl_region *src = c->src, *dst = c->dst;
  const tl_sym *b = dst->sym;
  if (src->sym->kind != SYM_TENSOR || b->kind != SYM_BUFFER || b->scope != SCOPE_SHARED)
    return "a copy of its body is not from a tensor into shared memory";
  if (b->ndim != 2 || b->view_of || b->viewed || (b->layout && !plain_swizzle(b)) || tl_dtype_is_packed(b->dtype))
    return "a copied buffer is not a plain 2-D shared tile";
  for (int d = 0; d < 2; d++)
    if (dst->ext[d] != b->dims[d] || (dst->lo[d] && !(dst->lo[d]->kind == E_CONST && dst->lo[d]->val.i == 0)))
      return "a copy fills part of its buffer";
  int sd = -1, bd = -1, nb = 0;
  for (int d = 0; d < src->ndim; d++) {
    int64_t coef;
    if (!linear(src->lo[d], loop->var, &coef))
      return "a copy's start depends on the loop variable otherwise than as consecutive tiles";
    if (src->ext[d] != 1) {
      while (nb < 2 && b->dims[nb] == 1)
        nb++;
      if (nb == 2 || b->dims[nb] != src->ext[d])
        return "a copy's box and its buffer differ in shape";
      if (coef)
        bd = nb;
      nb++;
    }
    if (!coef)
      continue;
    if (sd >= 0 || coef != src->ext[d])
      return "a copy's start does not move one whole tile per iteration along one dimension";
    sd = d;
  }
  if (sd < 0 || bd < 0)
    return "a copy does not move along K with the loop";
  *t = (Tile){.copy = c, .buf = (tl_sym *)b, .sd = sd, .bd = bd};
  return NULL;
}

/* A name not used by any symbol of prog, from base. */
static const char *fresh_name(tl_program *prog, const char *base) {
  for (int n = 0;; n++) {
    const char *name = n ? tl_arena_printf(prog->arena, "%s%d", base, n) : base;
    bool taken = false;
    for (int i = 0; i < prog->nvalue_slots && !taken; i++)
      taken = strcmp(prog->value_syms[i]->name, name) == 0;
    for (int i = 0; i < prog->nbuffer_slots && !taken; i++)
      taken = strcmp(prog->buffer_syms[i]->name, name) == 0;
    for (int i = 0; i < prog->nconsts && !taken; i++)
      taken = strcmp(prog->consts[i]->name, name) == 0;
    for (int i = 0; i < prog->nparams && !taken; i++)
      taken = strcmp(prog->params[i]->name, name) == 0;
    if (!taken)
      return name;
  }
}

static void add_slot(tl_arena *a, tl_sym ***arr, int *n, tl_sym *s) {
  tl_sym **na = tl_arena_alloc(a, sizeof *na * (size_t)(*n + 1));
  if (*n)
    memcpy(na, *arr, sizeof *na * (size_t)*n);
  na[*n] = s;
  s->slot = (*n)++;
  *arr = na;
}

static void body_insert(tl_arena *a, tl_body *b, int at, tl_stmt *s) {
  tl_stmt **items = tl_arena_alloc(a, sizeof *items * (size_t)(b->n + 1));
  memcpy(items, b->items, sizeof *items * (size_t)at);
  items[at] = s;
  memcpy(items + at + 1, b->items + at, sizeof *items * (size_t)(b->n - at));
  b->items = items;
  b->n++;
}

/* Groups loop (the kernel body's statement at index li, or nested when
 * li < 0) by g tiles (the header); tiles[0..n) its copies. */
static void group(P *p, tl_stmt *loop, Tile *tiles, int n, int64_t g, bool rest) {
  tl_program *prog = p->prog;
  tl_arena *a = prog->arena;
  tl_sym *k = loop->var;
  tl_type it = k->type;
  const tl_expr *E = loop->extent, *s0 = loop->start;
  /* E' = max(E, 0), the tiles the loop runs */
  tl_expr *En = E->kind == E_CONST ? mk_int(a, it, E->val.i > 0 ? E->val.i : 0, E) : NULL;
  if (!En) {
    En = tl_arena_alloc(a, sizeof *En);
    En->kind = E_CALL;
    En->fn = FN_MAX;
    En->name = "max";
    En->type = it;
    En->nargs = 2;
    En->args = tl_arena_alloc(a, 2 * sizeof *En->args);
    En->args[0] = tl_expr_copy(a, E);
    En->args[1] = mk_int(a, it, 0, E);
    En->column = E->column;
    En->pointer = E->pointer;
  }
  tl_expr *groups = En->kind == E_CONST ? mk_int(a, it, En->val.i / g, E)
                                        : mk_bin(a, OP_FLOORDIV, tl_expr_copy(a, En), mk_int(a, it, g, E), it);
  tl_stmt *last = NULL;
  if (rest) {
    /* the last E' mod g tiles, one at a time, into buffers of the program's shape */
    tl_sym *kr = tl_arena_alloc(a, sizeof *kr);
    *kr = *k;
    kr->name = fresh_name(prog, tl_arena_printf(a, "%s_last", k->name));
    kr->has_range = false;
    add_slot(a, &prog->value_syms, &prog->nvalue_slots, kr);
    last = tl_arena_alloc(a, sizeof *last);
    *last = *loop;
    last->loop_kind = LOOP_SERIAL;
    last->op_name = "serial";
    last->var = kr;
    last->num_stages = 0;
    last->kgroup_tail = true;
    last->kgroup = (int)g;
    /* start s0 + (E' / g) * g, extent E' - (E' / g) * g */
    tl_expr *done = mk_bin(a, '*', tl_expr_copy(a, groups), mk_int(a, it, g, E), it);
    last->start = mk_bin(a, '+', tl_expr_copy(a, s0), done, it);
    last->extent = mk_bin(a, '-', tl_expr_copy(a, En), tl_expr_copy(a, done), it);
    last->step = mk_int(a, it, 1, E);
    last->body.items = tl_arena_alloc(a, sizeof *last->body.items * (size_t)loop->body.n);
    last->body.n = loop->body.n;
    tl_expr *kr_name = mk_name(a, kr, E);
    for (int i = 0; i < n; i++) {
      tl_sym *nb = tl_arena_alloc(a, sizeof *nb);
      *nb = *tiles[i].buf;
      nb->name = fresh_name(prog, tl_arena_printf(a, "%s_last", tiles[i].buf->name));
      add_slot(a, &prog->buffer_syms, &prog->nbuffer_slots, nb);
      tiles[i].narrow = nb;
      tl_stmt *al = tl_arena_alloc(a, sizeof *al);
      al->kind = S_ALLOC;
      al->op_name = "alloc_shared";
      al->pointer = loop->pointer;
      al->block_level = true;
      al->sym = nb;
      body_insert(a, &prog->body, 0, al);
    }
    for (int i = 0; i < loop->body.n; i++) {
      const tl_stmt *o = loop->body.items[i];
      tl_stmt *c = tl_arena_alloc(a, sizeof *c);
      *c = *o;
      if (o->kind == S_COPY) {
        c->src = tl_arena_alloc(a, sizeof *c->src);
        *c->src = *o->src;
        for (int d = 0; d < o->src->ndim; d++)
          c->src->lo[d] = subst(a, o->src->lo[d], k, kr_name);
        c->dst = tl_arena_alloc(a, sizeof *c->dst);
        *c->dst = *o->dst;
        for (int j = 0; j < n; j++)
          if (tiles[j].copy == o)
            c->dst->sym = tiles[j].narrow;
      } else {
        for (int j = 0; j < n; j++) {
          if (o->A == tiles[j].buf)
            c->A = tiles[j].narrow;
          if (o->B == tiles[j].buf)
            c->B = tiles[j].narrow;
        }
      }
      last->body.items[i] = c;
    }
  }
  /* the loop over groups: variable k is the group, tile k * g + j of it at s0 + k * g + j */
  tl_expr *tile0 = mk_bin(a, '*', mk_name(a, k, E), mk_int(a, it, g, E), it);
  if (!(s0->kind == E_CONST && s0->val.i == 0))
    tile0 = mk_bin(a, '+', tl_expr_copy(a, s0), tile0, it);
  for (int i = 0; i < n; i++) {
    tl_region *src = tiles[i].copy->src;
    src->lo[tiles[i].sd] = subst(a, src->lo[tiles[i].sd], k, tile0);
    src->ext[tiles[i].sd] *= g;
    tiles[i].buf->dims[tiles[i].bd] *= g;
    tiles[i].copy->dst->ext[tiles[i].bd] *= g;
  }
  loop->start = mk_int(a, it, 0, s0);
  loop->extent = groups;
  loop->kgroup = (int)g;
  loop->kgroup_rest = last;
  if (last) {
    for (int i = 0; i < prog->body.n; i++)
      if (prog->body.items[i] == loop) {
        body_insert(a, &prog->body, i + 1, last);
        return;
      }
  }
}

/* Why loop is not grouped (NULL: it is, or has nothing narrow to group:
 * *quiet then says so). */
static const char *consider(P *p, tl_stmt *loop, bool *quiet, bool top) {
  *quiet = true;
  Tile tiles[KGROUP_MAX_COPIES];
  int n = 0, ngemm = 0;
  int64_t bk_bytes = 0;
  /* the narrowest tile in K, for the quiet test first: nothing is said about loops that have none */
  for (int i = 0; i < loop->body.n; i++) {
    tl_stmt *s = loop->body.items[i];
    if (s->kind != S_GEMM)
      continue;
    ngemm++;
    const tl_sym *ops[2] = {s->A, s->B};
    for (int j = 0; j < 2; j++) {
      const tl_sym *b = ops[j];
      if (b->scope != SCOPE_SHARED || b->ndim != 2)
        continue;
      int kd = j == 0 ? (s->trans_a ? 0 : 1) : (s->trans_b ? 1 : 0);
      int64_t bytes = b->dims[kd] * (int64_t)tl_dtype_size(b->dtype);
      if (!bk_bytes || bytes < bk_bytes)
        bk_bytes = bytes;
    }
  }
  if (!ngemm || !bk_bytes || bk_bytes >= KGROUP_ROW_BYTES)
    return NULL;
  if (!p->cg->wgmma || !p->cg->tma) /* nothing said on targets that could not */
    return NULL;
  *quiet = false;
  if (loop->k_group == 1)
    return "the loop says \"k_group\": 1";
  if (loop->no_tma)
    return "the loop says \"tma\": false";
  int64_t cl = 1;
  for (int i = 0; i < loop->ncl_req; i++)
    cl *= loop->cl_req[i];
  if (loop->norder)
    return "the loop names its schedule (\"order\"/\"stage\")";
  if (cl > 1) /* pass_cluster.c splits each box's rows among the cluster's blocks: not measured with wider boxes */
    return "the loop asks for a thread-block cluster";
  if (loop->num_stages < 2)
    return "the loop has fewer than 2 stages";
  if (!top)
    return "the loop is not a statement of the kernel's body";
  int64_t g = loop->k_group > 1 ? loop->k_group : KGROUP_ROW_BYTES / bk_bytes;
  if (loop->k_group > 1 ? (bk_bytes * g) % KGROUP_ROW_BYTES : bk_bytes * g != KGROUP_ROW_BYTES)
    return tl_arena_printf(p->prog->arena, "its K tiles of %lld bytes do not make 128-byte rows in groups of %lld",
                           (long long)bk_bytes, (long long)g);
  for (int i = 0; i < loop->body.n; i++) {
    tl_stmt *s = loop->body.items[i];
    if (s->kind == S_GEMM) {
      if (s->clear_accum)
        return "its gemm clears C (clear_accum) each K tile";
      if (s->C->scope != SCOPE_FRAGMENT)
        return "its gemm's C is not a fragment";
      if (s->C->dtype != TL_FLOAT32 && s->C->dtype != TL_INT32) /* a narrower C is rounded after each gemm */
        return tl_arena_printf(p->prog->arena, "its gemm's C is %s, rounded after each K tile's gemm",
                               tl_dtype_name(s->C->dtype));
      int64_t t = p->prog->threads[0] * p->prog->threads[1] * p->prog->threads[2];
      int64_t ce = s->C->ndim == 2 ? s->C->dims[0] * s->C->dims[1] : 0;
      if (t % 128 || !ce || ce / t > TL_MAX_REG_ELEMS)
        return "its gemm would not run on wgmma (C over 128 registers a thread, or not whole warpgroups)";
      continue;
    }
    if (s->kind != S_COPY)
      return "its body holds other statements than copies and gemms";
    if (n == KGROUP_MAX_COPIES)
      return "its body has more than 8 copies";
    const char *why = tile_of(loop, s, &tiles[n]);
    if (why)
      return why;
    for (int j = 0; j < n; j++)
      if (tiles[j].buf == tiles[n].buf)
        return "two copies write one buffer";
    n++;
  }
  /* every gemm operand is a tile copied here, along its K */
  for (int i = 0; i < loop->body.n; i++) {
    const tl_stmt *s = loop->body.items[i];
    if (s->kind != S_GEMM)
      continue;
    const tl_sym *ops[2] = {s->A, s->B};
    for (int j = 0; j < 2; j++) {
      int kd = j == 0 ? (s->trans_a ? 0 : 1) : (s->trans_b ? 1 : 0), t = 0;
      while (t < n && tiles[t].buf != ops[j])
        t++;
      if (t == n)
        return "a gemm operand is not a tile copied in the loop";
      if (tiles[t].bd != kd)
        return "a copy moves along a dimension that is not its gemm's K";
    }
  }
  for (int i = 0; i < n; i++) {
    bool read = false;
    for (int j = 0; j < loop->body.n; j++)
      read |= loop->body.items[j]->kind == S_GEMM &&
              (loop->body.items[j]->A == tiles[i].buf || loop->body.items[j]->B == tiles[i].buf);
    if (!read)
      return "a copied tile is not a gemm operand";
    if (used_elsewhere(p->prog, loop, tiles[i].buf))
      return tl_arena_printf(p->prog->arena, "buffer '%s' is used outside the loop", tiles[i].buf->name);
  }
  const tl_expr *E = loop->extent;
  if (E->kind == E_CONST && E->val.i < g)
    return tl_arena_printf(p->prog->arena, "it runs fewer than %lld K tiles", (long long)g);
  bool rest = !(E->kind == E_CONST && E->val.i % g == 0);
  int64_t stage = 0, others = 0;
  for (int i = 0; i < n; i++)
    stage += buf_bytes(tiles[i].buf);
  tl_walk(&p->prog->body, &(tl_walker){.pre = shared_sum}, &others);
  others -= stage;
  int64_t need = (loop->num_stages + 1) * g * stage + (rest ? stage : 0) + others + KGROUP_SLACK;
  if (need > p->smem_limit)
    return tl_arena_printf(p->prog->arena,
                           "%lld stages of %lld K tiles would take %lld bytes of shared memory, over the %lld a block has",
                           (long long)(loop->num_stages + 1), (long long)g, (long long)need, (long long)p->smem_limit);
  group(p, loop, tiles, n, g, rest);
  return NULL;
}

static tl_walk_act pre(tl_stmt *s, void *user) {
  P *p = user;
  if (s->kind != S_LOOP || s->loop_kind != LOOP_PIPELINED)
    return TL_WALK_GO;
  bool top = false, quiet;
  for (int i = 0; i < p->prog->body.n; i++)
    top |= p->prog->body.items[i] == s;
  const char *why = consider(p, s, &quiet, top);
  s->kgroup_why = quiet ? NULL : why;
  return TL_WALK_SKIP;
}

void tl_pass_kgroup(tl_program *prog, int64_t smem_limit, const tl_codegen *cg) {
  P p = {.prog = prog, .cg = cg, .smem_limit = smem_limit};
  /* the kernel body's statements may grow (the last tiles' loop and buffers): walk a copy of the list */
  tl_body b = prog->body;
  b.items = tl_arena_alloc(prog->arena, sizeof *b.items * (size_t)(b.n ? b.n : 1));
  memcpy(b.items, prog->body.items, sizeof *b.items * (size_t)b.n);
  tl_walk(&b, &(tl_walker){.pre = pre}, &p);
}
