/*
 * pass_overlap.c - overlaps a gemm on wgmma with the work after the next
 * one (FlashAttention-3's intra-warpgroup pipelining), where the loop's
 * dependences allow.
 *
 * When.  Only where the loop asks with "overlap": true.  Measured on an
 * H100 (FlashAttention, b4 h32 s4096 d128, float16), the late issue was
 * slower: 467 against 513 TFLOP/s with 8 warps and 128 x 128 tiles (the
 * other warpgroup's gemms already run during one's softmax, and every
 * iteration starts with a block barrier), 365 against 376 with one
 * warpgroup and 64 x 128 tiles.  Under a producer warpgroup (pass_wspec.c,
 * which frees each stage one iteration later for it) with the warpgroups
 * taking turns at their gemms, it was faster: 577 against 545 TFLOP/s at
 * d128, 393 against 373 at d64 (bench/README.md), and the example asks.
 *
 * Needs: a placed and pipelined program (pass_place, pass_pipeline).
 * Produces: on a software-pipelined loop with "overlap": true whose body holds two gemms on
 * wgmma at its top level, H before G (FlashAttention: H = Q K^T into S,
 * G = P V into O), when the conditions below hold: G.ov_late (G of
 * iteration c - 1 is issued in iteration c, right after H of c, and waited
 * for only before the first statement of c that conflicts with it),
 * H.ov_gemm = G, the loop's ov_gemm = G (after the loop, G of the last
 * iteration is issued and waited for), ov_wait on the statement before
 * which G is waited for (NULL: at the end of the body); the loop body
 * reordered so that the statements that conflict with G, and those that
 * depend on them, come last (in their order); pipe_stages or pipe_ahead so
 * that no prefetch overwrites the stage G still reads.  Keeps: everything
 * else; the program's results (the reordering and the late issue only move
 * statements past statements they do not conflict with).
 *
 * Two statements conflict when one writes a buffer, tensor or variable the
 * other reads or writes (rw_of collects what each reads and writes, with
 * everything it holds).  The prefetched copies of the loop are not
 * statements of the body here: they run at the top of each iteration, into
 * the stage of the iteration they fetch for.
 *
 * The late issue.  In the source order iteration c runs pre(c), H(c),
 * mid(c), G(c), post(c): G of c - 1 moves after H of c when nothing
 * between them (post(c - 1), pre(c), H(c)) conflicts with it, and reads
 * then what it read in place: its register fragments (nothing wrote them),
 * and its prefetched buffers at the stage of c - 1, which the prefetch of
 * iteration c (pipe_ahead iterations ahead, into stage (c + ahead) % S)
 * does not overwrite when ahead <= S - 2: one stage more than the loop
 * had, where shared memory has room, or else one iteration less ahead
 * (ahead >= 2); neither: no late issue.  Its other operands are buffers the
 * loop does not write.  The wgmma-groups: H(c) commits, then G(c - 1) (an
 * empty group in iteration 0), then wgmma.wait_group 1 waits for H alone
 * (groups complete in order), so G runs on the tensor cores while the
 * statements that do not conflict with it (the softmax of S) run; then
 * wait_group 0 before the first that does (O's rescale, P's new values).
 * The reordering moves those statements, and every later statement that
 * conflicts with one of them, after the others (a statement moves only
 * past statements it does not conflict with), when the body holds only
 * tile operators, parallel loops, ifs, loops and assignments (a let, an
 * allocation or sync_threads keeps the order).
 */
#include <string.h>
#include "ir.h"
#include "pass.h"

/* What a statement (with everything it holds) reads and writes: symbols. */
typedef struct {
  tl_vec r, w;
  tl_arena *a;
} rw;

static void add(rw *x, tl_vec *v, const tl_sym *s) {
  if (!s)
    return;
  for (int i = 0; i < v->n; i++)
    if (v->items[i] == s)
      return;
  tl_vec_push(x->a, v, (void *)s);
}

static tl_walk_act rw_expr(tl_expr *e, tl_stmt *s, void *user) {
  (void)s;
  if ((e->kind == E_NAME || e->kind == E_INDEX) && e->sym)
    add(user, &((rw *)user)->r, e->sym);
  return TL_WALK_GO;
}

static tl_walk_act rw_stmt(tl_stmt *s, void *user) {
  rw *x = user;
  if (s->src)
    add(x, &x->r, s->src->sym);
  if (s->dst) { /* read too: a partial write keeps the rest, a reduce may accumulate */
    add(x, &x->w, s->dst->sym);
    add(x, &x->r, s->dst->sym);
  }
  if (s->kind == S_GEMM) {
    add(x, &x->r, s->A);
    add(x, &x->r, s->B);
    add(x, &x->r, s->C);
    add(x, &x->w, s->C);
  }
  if (s->lhs && s->lhs->sym)
    add(x, &x->w, s->lhs->sym);
  if ((s->kind == S_LET || s->kind == S_ALLOC_VAR) && s->sym)
    add(x, &x->w, s->sym);
  return TL_WALK_GO;
}

static rw rw_of(tl_arena *a, tl_stmt *s) {
  static const tl_walker w = {.pre = rw_stmt, .expr = rw_expr};
  rw x = {.a = a};
  tl_walk_stmt(s, &w, &x);
  return x;
}

static bool meets(const tl_vec *a, const tl_vec *b) {
  for (int i = 0; i < a->n; i++)
    for (int j = 0; j < b->n; j++)
      if (a->items[i] == b->items[j])
        return true;
  return false;
}

static bool conflict(const rw *x, const rw *y) {
  return meets(&x->w, &y->r) || meets(&x->w, &y->w) || meets(&y->w, &x->r);
}

/* Statement kinds the reordering may move (and move others past). */
static tl_walk_act movable_kind(tl_stmt *s, void *user) {
  (void)user;
  switch (s->kind) {
  case S_COPY: case S_FILL: case S_GEMM: case S_REDUCE: case S_CUMSUM: case S_PARALLEL: case S_LOOP: case S_IF:
  case S_ASSIGN:
    return TL_WALK_GO;
  default:
    return TL_WALK_STOP;
  }
}

static bool movable(tl_stmt *s) {
  static const tl_walker w = {.pre = movable_kind};
  return tl_walk_stmt(s, &w, NULL) != TL_WALK_STOP;
}

static tl_walk_act count_wgmma(tl_stmt *s, void *n) {
  *(int *)n += s->kind == S_GEMM && s->use_wgmma;
  return TL_WALK_GO;
}

static bool prefetched(const tl_stmt *loop, const tl_sym *b) {
  for (int i = 0; i < loop->body.n; i++)
    if (loop->body.items[i]->prefetch && loop->body.items[i]->dst->sym == b)
      return true;
  return false;
}

/* Is operand X of G fine for the late issue: registers, a buffer the loop
 * prefetches, or one nothing in the loop writes? */
static bool operand_ok(tl_arena *a, tl_stmt *loop, const tl_sym *X, bool *staged) {
  if (X->kind == SYM_BUFFER && X->scope == SCOPE_FRAGMENT && X->in_regs)
    return true;
  if (prefetched(loop, X))
    return *staged = true;
  for (int i = 0; i < loop->body.n; i++) {
    rw x = rw_of(a, loop->body.items[i]);
    for (int j = 0; j < x.w.n; j++)
      if (x.w.items[j] == X)
        return false;
  }
  return true;
}

/* Makes room for G's stage (ahead <= stages - 2): one stage more where
 * shared memory has it, else one iteration less ahead.  False: neither. */
static bool stage_room(tl_program *prog, tl_stmt *loop, int64_t smem_limit) {
  if (loop->pipe_ahead <= loop->pipe_stages - 2)
    return true;
  tl_body *b = &loop->body;
  for (int i = 0; i < b->n; i++)
    if (b->items[i]->prefetch)
      b->items[i]->dst->sym->stages = loop->pipe_stages + 1;
  tl_pass_smem(prog);
  if (prog->smem_bytes <= smem_limit) {
    loop->pipe_stages++;
    return true;
  }
  for (int i = 0; i < b->n; i++)
    if (b->items[i]->prefetch)
      b->items[i]->dst->sym->stages = loop->pipe_stages;
  tl_pass_smem(prog);
  if (loop->pipe_ahead >= 2) {
    loop->pipe_ahead--;
    return true;
  }
  return false;
}

static void overlap_loop(tl_program *prog, tl_stmt *loop, int64_t smem_limit) {
  tl_arena *a = prog->arena;
  if (loop->overlap != 1 || loop->wg_lag) /* a late tail (pass_pipeline.c) already overlaps its gemm */
    return;
  tl_body *b = &loop->body;
  int h = -1, g = -1, n = 0;
  for (int i = 0; i < b->n; i++) {
    tl_stmt *s = b->items[i];
    if (s->kind == S_GEMM && s->use_wgmma) {
      if (h < 0)
        h = i;
      else
        g = i;
    } else if (!movable(s) && !s->prefetch) {
      return;
    }
  }
  static const tl_walker count = {.pre = count_wgmma};
  tl_walk(b, &count, &n);
  if (n != 2 || g < 0 || loop->wg_drain || b->items[h]->wg_pending || b->items[g]->wg_pending)
    return;
  tl_stmt *H = b->items[h], *G = b->items[g];
  bool staged = false;
  if (!operand_ok(a, loop, G->B, &staged) || !operand_ok(a, loop, G->C, &staged) ||
      (!G->a_regs && !operand_ok(a, loop, G->A, &staged)))
    return;
  /* nothing from G (exclusive) round to H (inclusive) of the next iteration conflicts with G */
  rw rg = rw_of(a, G);
  for (int i = 0; i < b->n; i++) {
    if (i == g || (i > h && i < g) || b->items[i]->prefetch)
      continue;
    rw x = rw_of(a, b->items[i]);
    if (conflict(&x, &rg))
      return;
  }
  if (staged && !stage_room(prog, loop, smem_limit))
    return;
  /* the statements after H: those that conflict with G, or with one moved, go last */
  tl_stmt **keep = tl_arena_alloc(a, sizeof *keep * (size_t)b->n), **moved = tl_arena_alloc(a, sizeof *moved * (size_t)b->n);
  rw *mrw = tl_arena_alloc(a, sizeof *mrw * (size_t)b->n);
  int nk = 0, nm = 0;
  for (int i = h + 1; i < b->n; i++) {
    tl_stmt *s = b->items[i];
    if (s->prefetch) {
      keep[nk++] = s;
      continue;
    }
    rw x = rw_of(a, s);
    bool m = s == G || conflict(&x, &rg);
    for (int j = 0; j < nm && !m; j++)
      m = conflict(&x, &mrw[j]);
    if (m) {
      mrw[nm] = x;
      moved[nm++] = s;
    } else {
      keep[nk++] = s;
    }
  }
  memcpy(b->items + h + 1, keep, sizeof *keep * (size_t)nk);
  memcpy(b->items + h + 1 + nk, moved, sizeof *moved * (size_t)nm);
  G->ov_late = true;
  H->ov_gemm = G;
  loop->ov_gemm = G;
  loop->ov_wait = moved[0] == G ? NULL : moved[0]; /* G first: nothing after it conflicts; wait at the end */
}

static tl_walk_act find_loop(tl_stmt *s, void *user) {
  void **u = user;
  if (s->kind == S_LOOP && s->pipe)
    overlap_loop(u[0], s, *(int64_t *)u[1]);
  return TL_WALK_GO;
}

void tl_pass_overlap(tl_program *prog, int64_t smem_limit, const tl_codegen *cg) {
  static const tl_walker w = {.post = find_loop};
  if (!cg->wgmma)
    return;
  void *u[2] = {prog, &smem_limit};
  tl_walk(&prog->body, &w, u);
  tl_pass_smem(prog);
}
