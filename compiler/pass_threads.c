/*
 * pass_threads.c - more threads for a block whose gemm's accumulators
 * would not fit in registers.
 *
 * A fragment of more than TL_MAX_REG_ELEMS elements a thread lives in
 * shared memory (pass_place.c), and a gemm into it runs element by
 * element, off the matrix cores: examples/gemm.json with block_N=256 at
 * its 128 threads took 32 ms at 4096^3 on the H100 (4 TFLOP/s), where the
 * same tile on 256 threads (two warpgroups of m64n256 wgmma) takes 0.2 ms.
 * Where the program's results cannot depend on how many threads its block
 * has, this pass doubles them (once or twice, to at most
 * TL_THREADS_GROWN_MAX) until every gemm's C fits in registers:
 *   - the target has the matrix cores' gemm (mma.sync or wgmma: NVIDIA);
 *   - the block is one-dimensional, its threads a multiple of 32;
 *   - some gemm's C is a fragment of more than TL_MAX_REG_ELEMS elements a
 *     thread, and at most that many at the grown count;
 *   - no expression names a thread (thread_binding), no buffer is
 *     per-thread (alloc_local) and no scalar variable is (alloc_var), and
 *     every statement is one whose meaning is the same over any number of
 *     threads: allocations, views, layouts, lets, copies, fills, gemms,
 *     loops, ifs and sync_threads, and parallel loops of assignments, lets
 *     and ifs (each element computed alone).  Reductions, prefix sums,
 *     atomics, prints and asserts keep the program's count (a reduction's
 *     order of additions follows the threads).
 *
 * Needs: a checked program, its target's tl_codegen.  Produces: threads[0]
 * grown and threads_asked (the program's count; 0 where unchanged, with
 * threads_why saying why not when a gemm's C does not fit), which `--emit
 * ir` prints.  Keeps: everything else; results never change (every
 * statement allowed computes each element as one thread would, and a
 * gemm's sums run in the same order over K whatever the warps).
 */
#include "ir.h"
#include "pass.h"

typedef struct {
  tl_arena *a;
  int64_t need;    /* the most elements a gemm's C fragment has */
  const char *why; /* the first thing that keeps the count, or NULL */
} T;

static int64_t elems(const tl_sym *s) {
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++)
    n *= s->dims[d];
  return n;
}

static tl_walk_act names_thread(tl_expr *x, tl_stmt *s, void *user) {
  (void)s;
  (void)user;
  return x->kind == E_CALL && x->fn == FN_THREAD_BINDING ? TL_WALK_STOP : TL_WALK_GO;
}

/* A parallel loop's body: each element computed alone. */
static bool elementwise(const tl_body *b) {
  for (int i = 0; i < b->n; i++) {
    const tl_stmt *s = b->items[i];
    if (s->kind == S_IF ? !elementwise(&s->body) || !elementwise(&s->else_body)
                        : s->kind != S_ASSIGN && s->kind != S_LET)
      return false;
  }
  return true;
}

static tl_walk_act largest_c(tl_stmt *s, void *user) {
  T *t = user;
  if (s->kind == S_GEMM && s->C->kind == SYM_BUFFER && s->C->scope == SCOPE_FRAGMENT && elems(s->C) > t->need)
    t->need = elems(s->C);
  return TL_WALK_GO;
}

static tl_walk_act scan(tl_stmt *s, void *user) {
  T *t = user;
  switch (s->kind) {
  case S_ALLOC:
    if (s->sym->scope == SCOPE_LOCAL)
      t->why = "a buffer is per-thread (alloc_local)";
    break;
  case S_PARALLEL:
    if (!elementwise(&s->body))
      t->why = "a parallel loop holds more than assignments, lets and ifs";
    return t->why ? TL_WALK_STOP : TL_WALK_SKIP;
  case S_GEMM:
  case S_VIEW:
  case S_LET:
  case S_COPY:
  case S_FILL:
  case S_LOOP:
  case S_IF:
  case S_ANNOTATE_LAYOUT:
  case S_USE_SWIZZLE:
  case S_SYNC_THREADS:
    break;
  default:
    t->why = tl_arena_printf(t->a, "it has '%s', whose meaning may follow the threads", tl_stmt_kind_name(s->kind));
    break;
  }
  return t->why ? TL_WALK_STOP : TL_WALK_GO;
}

void tl_pass_threads(tl_program *prog, const tl_codegen *cg) {
  int64_t T0 = prog->threads[0];
  prog->threads_asked = 0;
  prog->threads_why = NULL;
  T t = {.a = prog->arena};
  tl_walk(&prog->body, &(tl_walker){.pre = largest_c}, &t);
  if (t.need <= TL_MAX_REG_ELEMS * T0) /* every C fits (or there is no gemm) */
    return;
  tl_walk(&prog->body, &(tl_walker){.pre = scan}, &t);
  int64_t grown = T0;
  while (grown < TL_THREADS_GROWN_MAX && t.need > TL_MAX_REG_ELEMS * grown)
    grown *= 2;
  if (!cg->mma)
    t.why = "the target has no matrix-core gemm";
  else if (prog->threads[1] != 1 || prog->threads[2] != 1 || T0 % 32)
    t.why = "its block is not one-dimensional in whole warps";
  else if (t.need > TL_MAX_REG_ELEMS * grown)
    t.why = tl_arena_printf(prog->arena, "C would not fit even at %lld threads", (long long)grown);
  else if (!t.why && tl_walk(&prog->body, &(tl_walker){.expr = names_thread}, NULL) == TL_WALK_STOP)
    t.why = "it names a thread (thread_binding)";
  if (t.why) {
    prog->threads_why = t.why;
    return;
  }
  prog->threads_asked = T0;
  prog->threads[0] = grown;
}
