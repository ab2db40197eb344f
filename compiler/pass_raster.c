/*
 * pass_raster.c - block rasterization for L2 locality (use_swizzle): the
 * order in which the blocks of a 2-D grid take their block indices.
 *
 * An enabled use_swizzle at the top level of the body makes the blocks
 * walk stripes of panel_size block rows (block columns with order
 * "column") one column (row) at a time, so that blocks running at the same
 * time share the tiles they read.  The map is a bijection of the grid, so
 * results do not change (blocks are independent).  The last enabled
 * use_swizzle of the top level counts; one nested in a loop or an if, or a
 * grid of one dimension, or block variables not named for x and y, leave
 * the grid order.
 *
 * Without use_swizzle, when the blocks' work grows with the x block
 * variable (a loop at the top level of the body whose extent is a
 * non-decreasing function of it and not constant: FlashAttention's causal
 * loop over the key blocks up to the diagonal), the blocks take x in
 * reverse order (reverse_x): the longest start first and the shortest
 * fill the last wave (longest-processing-time-first scheduling; the map is
 * again a bijection).
 *
 * Without use_swizzle (none at the top level, enabled or not), and with
 * no such growing loop, a kernel whose gemm tiles its output by both block
 * variables of a 2-D grid (a gemm in a loop of the top level whose A and B
 * are copied from tensors, A's tile chosen by one of x and y and not the
 * other, B's the other way round) gets stripes of TL_RASTER_PANEL block
 * rows (raster_chosen): without them the blocks running at once read a
 * whole row of B's tiles each, with them a few of A's and B's.  Not where
 * the grid is constant and of at most TL_RASTER_WAVE blocks: they all run
 * in one wave (on a GPU of that many SMs), so no order reads a tile less
 * often (raster_why says so).  Measured
 * on an H100 (bench/gpu-bench-2026-11-25-h100-final.log: examples/gemm.json
 * with block_K = 64 against bench/programs/gemm_raster.json, whose only
 * difference in the emitted code is these stripes): 559 to 608 TFLOP/s at
 * 4096^3, 527 to 655 at 8192^3.
 *
 * Needs: a checked, pipelined program (use_swizzle's panel_size folded to a
 * constant; the copies prefetched).
 * Produces: tl_program.raster_panel (0: grid order), raster_column,
 *           raster_chosen, raster_why and reverse_x; TL_RAN_RASTER in
 *           tl_program.lowered.
 * Keeps: everything else.
 */
#include "ir.h"
#include "pass.h"

/* How x varies with block variable v: 0 not at all, 1 non-decreasing,
 * -1 otherwise or not known. */
static int grows(const tl_expr *x, const tl_sym *v) {
  int a = x->nargs > 0 ? grows(x->args[0], v) : 0, b = x->nargs > 1 ? grows(x->args[1], v) : 0;
  bool pos0 = x->nargs > 1 && x->args[0]->kind == E_CONST && x->args[0]->val.i > 0,
       pos1 = x->nargs > 1 && x->args[1]->kind == E_CONST && x->args[1]->val.i > 0;
  switch (x->kind) {
  case E_CONST:
    return 0;
  case E_NAME:
    if (x->sym == v)
      return 1;
    if (x->sym->kind == SYM_LET)
      return x->sym->init ? grows(x->sym->init, v) : -1;
    return x->sym->kind == SYM_CONST || x->sym->kind == SYM_SCALAR || x->sym->kind == SYM_BLOCK_VAR ? 0 : -1;
  case E_BINARY:
    if (a < 0 || b < 0)
      return -1;
    if (x->op == '+')
      return a > b ? a : b;
    if (x->op == '-')
      return b ? -1 : a;
    if ((x->op == '*' || x->op == OP_FLOORDIV) && pos1) /* by a positive constant */
      return a;
    if (x->op == '*' && pos0)
      return b;
    return !a && !b ? 0 : -1;
  case E_CALL:
    if (x->fn == FN_CEILDIV && a >= 0 && b == 0 && pos1)
      return a;
    if ((x->fn == FN_MIN || x->fn == FN_MAX) && a >= 0 && b >= 0)
      return a > b ? a : b;
    return -1;
  default:
    return -1;
  }
}

#define TL_RASTER_PANEL 8 /* block rows a stripe (Triton's and TileLang's GROUP_M) */

#define TL_RASTER_WAVE 132 /* blocks that run at once at least (an H100 SXM's SMs, one block each) */

/* The blocks of prog's grid when it is constant and at most TL_RASTER_WAVE
 * (they all run at once, each tile read once whatever their order), else 0. */
static int64_t one_wave(const tl_program *prog) {
  int64_t n = 1;
  for (int i = 0; i < prog->ngrid; i++) {
    if (prog->grid[i]->kind != E_CONST)
      return 0;
    n *= prog->grid[i]->val.i;
  }
  return n <= TL_RASTER_WAVE ? n : 0;
}

/* Does x use block variable v, directly or through lets? */
static bool uses(const tl_expr *x, const tl_sym *v) {
  if (!x)
    return false;
  if (x->sym == v || (x->sym && x->sym->kind == SYM_LET && uses(x->sym->init, v)))
    return true;
  for (int i = 0; i < x->nargs; i++)
    if (uses(x->args[i], v))
      return true;
  return false;
}

/* Which of block variables x (bit 0) and y (bit 1) the source of the copy
 * into buffer b in loop body lb uses, or -1 when no copy from a tensor
 * writes b there. */
static int copied_by(const tl_program *prog, const tl_body *lb, const tl_sym *b) {
  for (int i = 0; i < lb->n; i++) {
    const tl_stmt *c = lb->items[i];
    if (c->kind != S_COPY || c->dst->sym != b || c->src->sym->kind != SYM_TENSOR)
      continue;
    int m = 0;
    for (int d = 0; d < c->src->ndim; d++)
      for (int k = 0; k < 2; k++)
        m |= uses(c->src->lo[d], prog->block_vars[k]) << k;
    return m;
  }
  return -1;
}

/* Is there a gemm tiling its output by both block variables (the header)? */
static bool gemm_tiled(const tl_program *prog) {
  for (int i = 0; i < prog->body.n; i++) {
    const tl_stmt *l = prog->body.items[i];
    if (l->kind != S_LOOP)
      continue;
    for (int j = 0; j < l->body.n; j++) {
      const tl_stmt *g = l->body.items[j];
      if (g->kind != S_GEMM)
        continue;
      int a = copied_by(prog, &l->body, g->A), b = copied_by(prog, &l->body, g->B);
      if ((a == 1 && b == 2) || (a == 2 && b == 1))
        return true;
    }
  }
  return false;
}

void tl_pass_raster(tl_program *prog) {
  const tl_stmt *raster = NULL;
  bool given = false;
  for (int i = 0; i < prog->body.n; i++) {
    given |= prog->body.items[i]->kind == S_USE_SWIZZLE;
    if (prog->body.items[i]->kind == S_USE_SWIZZLE && prog->body.items[i]->enable)
      raster = prog->body.items[i];
  }
  prog->raster_chosen = false;
  prog->raster_panel = 0;
  prog->raster_column = false;
  if (raster && prog->ngrid >= 2 && prog->block_vars[0] && prog->block_vars[1]) {
    prog->raster_panel = raster->panel_size->val.i;
    prog->raster_column = raster->order_column;
  }
  prog->reverse_x = false;
  for (int i = 0; !prog->raster_panel && prog->block_vars[0] && i < prog->body.n; i++) {
    const tl_stmt *s = prog->body.items[i];
    if (s->kind == S_LOOP && s->extent->kind != E_CONST && grows(s->extent, prog->block_vars[0]) == 1)
      prog->reverse_x = true;
  }
  prog->raster_why = NULL;
  if (!given && !prog->reverse_x && prog->ngrid >= 2 && prog->block_vars[0] && prog->block_vars[1] &&
      gemm_tiled(prog)) {
    int64_t blocks = one_wave(prog);
    if (blocks) {
      prog->raster_why = tl_arena_printf(prog->arena, "a constant grid of %lld blocks, at most the %d of one wave",
                                         (long long)blocks, TL_RASTER_WAVE);
    } else {
      prog->raster_panel = TL_RASTER_PANEL;
      prog->raster_chosen = true;
    }
  }
  prog->lowered |= TL_RAN_RASTER;
}
