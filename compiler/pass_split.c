/*
 * pass_split.c - a long kernel's top level cut into regions, each emitted
 * as a function of its own, so that its compile time grows linearly with
 * its length.
 *
 * NVRTC's optimizer (NVVM) and ptxas take time that grows faster than the
 * length of a function: one kernel of thousands of tile statements, its
 * register loops fully unrolled, is one straight-line function of
 * hundreds of thousands of instructions (bench/compile.md: 1000 statements
 * of bench/long_program.py took 5.7 s of CPU in NVVM and 2.2 s in ptxas,
 * 2000 about 30 s, 4000 250 s, 10,000 did not finish in 300 s).  A
 * kernel of at least TL_SPLIT_MIN_STATEMENTS statements (nested ones
 * counted) has its top level cut into regions of consecutive statements,
 * each holding about TL_SPLIT_REGION_STATEMENTS statements, and emit_cuda.c
 * prints each region as a noinline lambda called once: NVVM and ptxas then
 * see functions of bounded size, so the whole compile is linear.
 *
 * The cost (why only long kernels): a region reaches the kernel's
 * variables through references, so its scalars (lets, alloc_vars, the
 * block indices) live in local memory, and the register fragments and
 * local buffers a region uses are copied from local memory into registers
 * at its start and back at its end (per thread, twice their size in
 * local-memory accesses per region, against the tens of tile statements
 * the region runs).  Below the threshold the emitted source is byte for
 * byte what it was without this pass.
 *
 * A region holds only statements that declare nothing later statements
 * name (no let, alloc, alloc_var or view at the top level, nor in the
 * taken branch of an if whose condition is a constant, which the emitter
 * prints without braces) and that hold no state across a function
 * boundary; but a let of the top level whose value reads no buffer and no
 * alloc_var, with no barrier before it, is computed before its region's
 * function instead of in it (emit_cuda.c), so the region goes on past it.
 * Not in a region: no pipelined loop, no gemm on wgmma (its accumulator in
 * flight), no TMA copy or store.  Kernels with a producer warpgroup,
 * persistent tiles, clusters, tensor maps or a wgmma accumulator in two
 * copies are not split at all (split_why says so); only the CUDA dialect
 * (NVRTC) is split: the AMD toolchain is not measured here.
 *
 * Needs: a placed, pipelined program whose barriers are placed (tl_stmt's
 *        barrier flags; emit_cuda.c prints them inside the regions).
 * Produces: tl_program.nstatements, nregions, split_why; tl_stmt.region,
 *           region_frags, nregion_frags (top level); tl_sym.region_used.
 * Keeps: everything else (the statements and their order).
 */
#include "ir.h"
#include "pass.h"

/* Is s, a statement at the kernel's top level (top) or inside a braced
 * body, one a region may hold? */
static bool regionable(const tl_stmt *s, bool top);

static bool regionable_body(const tl_body *b, bool top) {
  for (int i = 0; i < b->n; i++)
    if (!regionable(b->items[i], top))
      return false;
  return true;
}

static bool regionable(const tl_stmt *s, bool top) {
  switch (s->kind) {
  case S_ALLOC:
  case S_ALLOC_VAR:
  case S_LET:
  case S_VIEW:
    return !top; /* at the top level they declare names the statements after them use */
  case S_IF:
    if (s->value->kind == E_CONST) /* printed without braces: the branch taken is at this level */
      return regionable_body(&s->body, top) && regionable_body(&s->else_body, top);
    return regionable_body(&s->body, false) && regionable_body(&s->else_body, false);
  case S_LOOP:
    return !s->pipe && s->loop_kind != LOOP_PIPELINED && regionable_body(&s->body, false);
  case S_PARALLEL:
    return regionable_body(&s->body, false);
  case S_GEMM:
    return !s->use_wgmma && !s->ov_late && !s->ov_gemm;
  case S_COPY:
    return !s->tma && !s->tma_store && !s->prefetch && !s->reg_prefetch && !s->lag_load;
  case S_CLUSTER_REDUCE: /* its cluster barriers stay in the kernel's own function */
    return false;
  case S_FILL:
  case S_REDUCE:
  case S_CUMSUM:
  case S_ATOMIC_ADD:
  case S_SYNC_THREADS:
  case S_ASSIGN:
  case S_ATOMIC:
  case S_PRINT:
  case S_ASSERT:
  case S_ANNOTATE_LAYOUT:
  case S_USE_SWIZZLE:
    return true;
  }
  return false;
}

static tl_walk_act impure(tl_expr *x, tl_stmt *s, void *user) {
  (void)s, (void)user;
  return x->kind == E_INDEX || (x->kind == E_NAME && x->sym->kind == SYM_VAR) ? TL_WALK_STOP : TL_WALK_GO;
}

/* May s, a let of the top level, be computed before the region it is in
 * (emit_cuda.c declares it at the kernel's level, before the region's
 * function)?  When its value reads no buffer element and no alloc_var (the
 * statements before it in the region may change those; the lets it reads
 * are declared before it either way) and no barrier goes before it. */
static bool hoistable(tl_stmt *s) {
  return s->kind == S_LET && !s->barrier_before && tl_walk_expr(s->value, impure, s, NULL) != TL_WALK_STOP;
}

/* May s, a statement of the top level, be in a region? */
static bool in_region(tl_stmt *s) { return regionable(s, true) || hoistable(s); }

static tl_walk_act count_stmt(tl_stmt *s, void *user) {
  (void)s;
  ++*(int64_t *)user;
  return TL_WALK_GO;
}

static const tl_walker counter = {.pre = count_stmt};

/* The statements of body b, nested ones counted. */
static int64_t count(tl_body *b) {
  int64_t n = 0;
  tl_walk(b, &counter, &n);
  return n;
}

/* Statement s and those it holds. */
static int64_t count_one(tl_stmt *s) {
  int64_t n = 0;
  tl_walk_stmt(s, &counter, &n);
  return n;
}

/* What a region's walk collects: the register fragments and local
 * buffers it uses, and the local buffers it declares itself (in a loop's
 * or an if's body: not copied). */
typedef struct {
  tl_arena *a;
  tl_vec used, own;
} uses;

static void add(tl_arena *a, tl_vec *v, tl_sym *s) {
  for (int i = 0; i < v->n; i++)
    if (v->items[i] == s)
      return;
  tl_vec_push(a, v, s);
}

static void use(uses *u, tl_sym *s) {
  if (s && s->kind == SYM_BUFFER && ((s->scope == SCOPE_FRAGMENT && s->in_regs) || s->scope == SCOPE_LOCAL))
    add(u->a, &u->used, s);
}

static tl_walk_act use_stmt(tl_stmt *s, void *user) {
  uses *u = user;
  if (s->kind == S_ALLOC && s->sym->scope == SCOPE_LOCAL)
    add(u->a, &u->own, s->sym);
  if (s->src)
    use(u, s->src->sym);
  if (s->dst)
    use(u, s->dst->sym);
  use(u, s->A);
  use(u, s->B);
  use(u, s->C);
  return TL_WALK_GO;
}

static tl_walk_act use_expr(tl_expr *x, tl_stmt *s, void *user) {
  (void)s;
  if (x->kind == E_INDEX)
    use(user, x->sym);
  return TL_WALK_GO;
}

/* Why prog is not split, or NULL when it may be. */
static const char *refusal(const tl_program *prog, const tl_codegen *cg) {
  if (cg->dialect != TL_DIALECT_CUDA)
    return "only NVIDIA targets (NVRTC) are split";
  if (prog->wspec_threads || prog->persistent)
    return "a producer warpgroup or persistent tiles";
  if (prog->cl_size > 1)
    return "a thread-block cluster";
  if (prog->ntmaps)
    return "bulk tensor copies (tensor maps)";
  for (int i = 0; i < prog->nbuffer_slots; i++)
    if (prog->buffer_syms[i]->scope == SCOPE_FRAGMENT && prog->buffer_syms[i]->in_regs &&
        prog->buffer_syms[i]->stages == 2)
      return "a wgmma accumulator in two copies";
  return NULL;
}

void tl_pass_split(tl_program *prog, const tl_codegen *cg) {
  prog->lowered |= TL_RAN_SPLIT;
  prog->nstatements = count(&prog->body);
  prog->nregions = 0;
  prog->split_why = NULL;
  if (prog->nstatements < (prog->split_statements ? prog->split_statements : TL_SPLIT_MIN_STATEMENTS))
    return;
  if ((prog->split_why = refusal(prog, cg)))
    return;
  static const tl_walker w = {.pre = use_stmt, .expr = use_expr};
  tl_body *b = &prog->body;
  for (int i = 0; i < b->n;) {
    if (!in_region(b->items[i])) {
      i++;
      continue;
    }
    int j = i, calls = 0;
    int64_t n = 0;
    while (j < b->n && n < TL_SPLIT_REGION_STATEMENTS && in_region(b->items[j])) {
      calls += b->items[j]->kind != S_LET;
      n += count_one(b->items[j++]);
    }
    if (calls >= 2) { /* one statement alone is not worth a call */
      int r = ++prog->nregions;
      uses u = {.a = prog->arena};
      for (int k = i; k < j; k++) {
        b->items[k]->region = r;
        tl_walk_stmt(b->items[k], &w, &u);
      }
      tl_stmt *first = b->items[i];
      first->region_frags = tl_arena_alloc(prog->arena, (size_t)(u.used.n + 1) * sizeof *first->region_frags);
      for (int k = 0; k < u.used.n; k++) {
        tl_sym *f = u.used.items[k];
        bool own = false;
        for (int m = 0; m < u.own.n; m++)
          own |= u.own.items[m] == f;
        if (!own) {
          first->region_frags[first->nregion_frags++] = f;
          f->region_used = true;
        }
      }
    }
    i = j;
  }
  if (!prog->nregions)
    prog->split_why = "no two consecutive statements of the top level may go into a function of their own";
}
