/*
 * pass_pipeline.c - asynchronous copies and software pipelining.
 *
 * Needs: a placed program (pass_place.c).  Produces: async_copy on every
 * copy from global memory into shared memory that can move in aligned
 * 16-byte chunks (cp.async; chunks wholly inside or wholly outside the
 * tensor, so the zero-fill of a chunk outside is the "reads as zero" rule);
 * prefetch on those copies of a `pipelined` loop that the loop can issue
 * num_stages - 1 iterations ahead, with `stages` copies of their shared
 * buffers; pipe on such loops, with pipe_stages and pipe_ahead; for a
 * gemm on wgmma, how many of its wgmma-groups stay in flight as it ends
 * (wg_pending, and wg_drain on its loop: the rule and its argument are at
 * async_gemm below); wg_lag on a loop whose gemm clears C and whose other
 * statements run one iteration late, on two register copies of C (stages
 * 2 of that fragment; lag_gemm below), or lag_why saying why not; rotates
 * (two copies) on the buffers such a gemm reads that a parallel loop of the
 * body computes (rotatable); reg_prefetch on the other copies from a tensor
 * into shared memory that such a loop can issue an iteration ahead through
 * registers, whose buffers rotate too (reg_prefetchable).  Keeps:
 * everything else (results never change: a prefetched copy reads only the
 * loop variable and values fixed before the loop, and its buffer is
 * written by nothing else and read by nothing before it in the body or
 * outside the loop; a late tail computes what it did, lag_gemm says why).
 *
 * Then tl_pass_smem lays shared memory out again with the stages.
 *
 * A target without cp.async (tl_codegen: AMD) gets no async copies and so
 * no pipelining: its copies are plain loads and stores.
 *
 * Also produces byte_copy on every other copy between tensors or shared
 * buffers of one packed dtype (proto/tile-ir-v1.md 7.1.2) whose rows hold
 * whole aligned vectors: it moves bytes, 1 to 16 at a time, instead of
 * elements.
 */
#include <string.h>
#include "ir.h"
#include "pass.h"

/* True when integer expression x is provably a multiple of v. */
bool tl_multiple_of(const tl_expr *x, int64_t v) {
  if (!x)
    return true;
  switch (x->kind) {
  case E_CONST:
    return x->val.i % v == 0;
  case E_BINARY:
    if (x->op == '+' || x->op == '-')
      return tl_multiple_of(x->args[0], v) && tl_multiple_of(x->args[1], v);
    if (x->op == '*')
      return tl_multiple_of(x->args[0], v) || tl_multiple_of(x->args[1], v);
    return false;
  case E_NAME:
    return x->sym->kind == SYM_LET && x->sym->init && tl_multiple_of(x->sym->init, v);
  default:
    return false;
  }
}

/* A copy from a tensor into shared memory that can move in 16-byte chunks:
 * same dtype, the innermost dimension of both sides is the copy's innermost
 * one, holds whole chunks, starts on a chunk and sits in rows that start on
 * chunks. */
static bool can_async(const tl_stmt *s) {
  const tl_region *src = s->src, *dst = s->dst;
  if (src->sym->kind != SYM_TENSOR || dst->sym->kind != SYM_BUFFER || dst->sym->scope == SCOPE_LOCAL ||
      (dst->sym->scope == SCOPE_FRAGMENT && dst->sym->in_regs) || src->sym->dtype != dst->sym->dtype)
    return false;
  if (dst->sym->view_of || dst->sym->viewed) /* one row-major copy: no stages, no tensor map */
    return false;
  int64_t v = 128 / tl_dtype_bits(src->sym->dtype); /* elements per 16 bytes, packed dtypes included */
  int ls = src->ndim - 1, ld = dst->ndim - 1;
  if (src->ext[ls] == 1 || dst->ext[ld] == 1 || src->ext[ls] % v || dst->ext[ld] % v)
    return false;
  if (src->sym->dims[ls] < 0 || src->sym->dims[ls] % v || dst->sym->dims[ld] % v)
    return false;
  if (!tl_multiple_of(src->lo[ls], v) || !tl_multiple_of(dst->lo[ld], v))
    return false;
  if (src->sym->align < 16) /* the tensor's base must be 16-byte aligned */
    return false;
  return true;
}

/* Does statement s itself (not what its bodies hold) read or write buffer b? */
static tl_walk_act touches_here(tl_stmt *s, void *b) {
  if ((s->src && s->src->sym == b) || (s->dst && s->dst->sym == b) || s->A == b || s->B == b || s->C == b)
    return TL_WALK_STOP;
  if (tl_expr_names(s->value, b) || tl_expr_names(s->lhs, b) || tl_expr_names(s->start, b) || tl_expr_names(s->extent, b))
    return TL_WALK_STOP;
  return TL_WALK_GO;
}

bool tl_stmt_touches(const tl_stmt *s, const tl_sym *b) {
  static const tl_walker w = {.pre = touches_here};
  return tl_walk_stmt((tl_stmt *)s, &w, (void *)b) == TL_WALK_STOP;
}

static tl_walk_act writes_here(tl_stmt *s, void *b) {
  if ((s->dst && s->dst->sym == b) || (s->kind == S_GEMM && s->C == b) || (s->lhs && s->lhs->sym == b))
    return TL_WALK_STOP;
  return TL_WALK_GO;
}

/* Does statement s (or anything in it) write buffer b? */
static bool stmt_writes(const tl_stmt *s, const tl_sym *b) {
  static const tl_walker w = {.pre = writes_here};
  return tl_walk_stmt((tl_stmt *)s, &w, (void *)b) == TL_WALK_STOP;
}

/* Is x fixed for the whole loop but for its variable: made of the loop
 * variable, scalar parameters, block variables, constants and lets defined
 * before the loop (not in its body) that are themselves such? */
static bool only_loop_var(const tl_expr *x, const tl_stmt *loop) {
  if (!x)
    return true;
  if (x->kind == E_NAME) {
    const tl_sym *s = x->sym;
    if (s == loop->var || s->kind == SYM_SCALAR || s->kind == SYM_BLOCK_VAR)
      return true;
    if (s->kind == SYM_LET) {
      size_t n = strlen(loop->pointer);
      bool inside = strncmp(s->pointer, loop->pointer, n) == 0 && s->pointer[n] == '/';
      return !inside && !s->varying && s->init && only_loop_var(s->init, loop);
    }
    return false;
  }
  if (x->kind == E_INDEX)
    return false;
  for (int i = 0; i < x->nargs; i++)
    if (!only_loop_var(x->args[i], loop))
      return false;
  return true;
}

typedef struct {
  tl_program *prog;
  const tl_body *top; /* the kernel body, to look for uses outside a loop */
  int64_t max_stages; /* at most this many stages (fewer when shared memory is short) */
  bool async;         /* the target has cp.async (tl_codegen) */
} P;

typedef struct {
  const tl_stmt *loop;
  const tl_sym *buf;
} outside;

/* Is buf used outside loop (tl_walker.pre over the kernel body): by the
 * control of a loop or if, or by any other statement and what it holds? */
static tl_walk_act use_outside(tl_stmt *s, void *user) {
  const outside *o = user;
  if (s == o->loop)
    return TL_WALK_SKIP;
  if (s->kind == S_LOOP || s->kind == S_IF)
    return tl_expr_names(s->value, o->buf) || tl_expr_names(s->extent, o->buf) ? TL_WALK_STOP : TL_WALK_GO;
  return tl_stmt_touches(s, o->buf) ? TL_WALK_STOP : TL_WALK_SKIP;
}

static bool used_outside(const tl_body *b, const tl_stmt *loop, const tl_sym *buf) {
  static const tl_walker w = {.pre = use_outside};
  outside o = {loop, buf};
  return tl_walk((tl_body *)b, &w, &o) == TL_WALK_STOP;
}

/* ---- wgmma kept in flight across iterations -----------------------------------------
 * A gemm on wgmma issues its instructions, commits them as one wgmma-group
 * and waits with wgmma.wait_group N until at most N groups are pending.
 * N = 0 (the gemm done when it ends) is always right.  N > 0 lets the
 * tensor cores run the gemm of iteration c while the block waits for the
 * copies of c + 1 and issues the gemm of c + 1; it is right only when
 * nothing touches what the pending groups still use until they are waited
 * for.  The PTX ISA (wgmma.mma_async, wgmma.wait_group) makes reading or
 * writing the accumulator registers of a pending wgmma undefined (except by
 * further wgmma.mma_async of the same shape, which the hardware orders),
 * and a pending wgmma reads its A and B from shared memory until its group
 * completes, so writing them meanwhile is a race.
 *
 * So a gemm keeps N = 1 only inside a software-pipelined loop (pipe) that
 * holds it at its top level, where it is the loop's only gemm on wgmma,
 * does not clear C (writing C's registers with a group pending), C is
 * touched by no other statement of the loop, and A and B are both buffers
 * the loop prefetches (written by nothing but the loop's own copies) or
 * rotates (below), or A is a register fragment (a_regs: the emitter keeps
 * the registers the pending group reads apart from those the loop computes
 * A in, and rewrites them only after waiting for that group: emit_cuda.c's
 * held_a), and its wgmma is at least A_REGS_PENDING_N wide (below).  The
 * loop then waits for the last group as it ends (wg_drain: wait_group 0,
 * before the barrier that follows every pipelined loop), so whatever
 * comes after it (the epilogue reading C) sees finished accumulators.
 *
 * The stages.  With S stages of the prefetched buffers, copies issued d
 * iterations ahead, and N groups pending at the end of each iteration:
 * iteration c starts with cp.async.wait_group and a block barrier, which
 * every warpgroup reaches only after its wait at the end of iteration c - 1,
 * so all groups up to c - 1 - N are complete and only those of iterations
 * c - N .. c - 1 may be pending, reading stages (c - N) % S .. (c - 1) % S.
 * After the barrier the block overwrites stage (c + d) % S with the copies
 * of iteration c + d.  That stage is none of the pending ones exactly when
 * d + j is not a multiple of S for j = 1 .. N, i.e. (with d >= 1) when
 * d + N <= S - 1.  The copies of iteration c itself, which the gemm of c
 * reads, are in stage c % S, not being written (d < S).  So a loop of S
 * stages prefetches d = S - 1 - N ahead: num_stages - 1 ahead as the
 * program asks, with one stage more (S = num_stages + 1) for the pending
 * group, or, where shared memory is short of that stage, one iteration
 * less ahead; with no room for d >= 1 the gemm waits for 0 (N = 0, d = S - 1).
 *
 * A pending gemm with A in registers pays for it in every iteration: held_a
 * copies each A register once more (a selp each) and keeps a second set of
 * them live, twice the registers of A.  What it buys is the tensor cores'
 * time for the group (an m64nNk16 step takes N/2 cycles of an SM's tensor
 * cores) running under the next iteration's work, mostly computing the
 * next A (a dequantized weight fragment: about 4 instructions a register,
 * so 16 a step).  Where N is narrow the group is short and the copies cost
 * more than the overlap hides, so a gemm with A in registers and C narrower
 * than A_REGS_PENDING_N columns waits for 0.  Measured on an H100
 * (bench/README.md, "W4A16: no pending group"): C of 8, 16 and 64 columns
 * (the small-M W4A16 programs) ran 12-22% faster waiting for 0; 128 and 256
 * columns (gemm_w4a16_t.json at M = 4096) 15% and 17% slower.
 * ---------------------------------------------------------------------------------------- */
#define A_REGS_PENDING_N 128
#define TL_PIPE_STR_(x) #x
#define TL_PIPE_STR(x) TL_PIPE_STR_(x)
/* ---- rotating buffers -----------------------------------------------------------------
 * A gemm operand that the loop computes rather than copies -- a float16
 * tile dequantized from packed weights by a parallel loop before the gemm
 * -- would keep the gemm waiting for 0: the next iteration overwrites it
 * while the group still reads it.  Such a buffer rotates instead: two
 * copies, iteration c writing and reading copy c % 2.  The writer of
 * iteration c + 1 then writes the copy that the pending group of c does not
 * read, and the writer of c + 2 starts after the barrier that opens
 * iteration c + 2, which every warpgroup reaches only after its wait at the
 * end of c + 1 (wait_group 1: the group of c complete) -- the argument for
 * the prefetched stages above, with S = 2 and d = 0.  Results are those of
 * one buffer: the writer is the only statement of the loop that writes the
 * buffer and it writes all of it each iteration (a parallel loop over the
 * buffer's shape whose one assignment stores the identity element), nothing
 * before it in the body touches the buffer, and nothing outside the loop
 * does, so every read of an iteration sees that iteration's values. */
bool tl_writes_whole(const tl_stmt *w, const tl_sym *buf) {
  if (w->kind != S_PARALLEL || w->body.n != 1 || w->body.items[0]->kind != S_ASSIGN ||
      w->body.items[0]->assign_op || w->nvars != buf->ndim)
    return false;
  const tl_expr *l = w->body.items[0]->lhs;
  if (l->kind != E_INDEX || l->sym != buf || l->nargs != w->nvars)
    return false;
  for (int d = 0; d < w->nvars; d++)
    if (l->args[d]->kind != E_NAME || l->args[d]->sym != w->vars[d] || w->extents[d]->val.i != buf->dims[d])
      return false;
  return true;
}

static bool rotatable(P *p, const tl_stmt *loop, const tl_sym *buf, const tl_stmt *g) {
  if (buf->kind != SYM_BUFFER || buf->scope != SCOPE_SHARED || buf->stages > 1)
    return false;
  const tl_body *b = &loop->body;
  int wi = -1, gi = -1;
  for (int i = 0; i < b->n; i++) {
    if (b->items[i] == g)
      gi = i;
    else if (stmt_writes(b->items[i], buf)) {
      if (wi >= 0)
        return false;
      wi = i;
    }
  }
  if (wi < 0 || wi > gi || !tl_writes_whole(b->items[wi], buf))
    return false;
  for (int j = 0; j < wi; j++)
    if (tl_stmt_touches(b->items[j], buf))
      return false;
  return !used_outside(p->top, loop, buf);
}

/* A copy (statement `at` of loop's body) that can load one iteration
 * ahead into the other of two copies of its destination: its source reads
 * only the loop variable and values fixed before the loop, it writes the
 * whole destination, which nothing before it in the body touches, nothing
 * after it writes, and nothing outside the loop uses. */
static bool copy_rotatable(P *p, const tl_stmt *loop, int at) {
  const tl_body *b = &loop->body;
  const tl_stmt *c = b->items[at];
  const tl_sym *dst = c->dst->sym;
  for (int d = 0; d < c->src->ndim; d++)
    if (!only_loop_var(c->src->lo[d], loop))
      return false;
  for (int d = 0; d < c->dst->ndim; d++) /* the whole buffer: its other copy holds nothing older */
    if ((c->dst->lo[d] && !(c->dst->lo[d]->kind == E_CONST && c->dst->lo[d]->val.i == 0)) ||
        c->dst->ext[d] != dst->dims[d])
      return false;
  for (int j = 0; j < b->n; j++)
    if (j != at && (j < at ? tl_stmt_touches(b->items[j], dst) : stmt_writes(b->items[j], dst)))
      return false;
  return !used_outside(p->top, loop, dst);
}

/* ---- copies prefetched through registers ---------------------------------------------
 * A copy of the loop from a tensor into shared memory that cp.async
 * cannot move -- a column of scales, one 2-byte element per row -- would
 * wait for global memory in every iteration.  Instead each thread loads its
 * elements of iteration c + 1 into registers while iteration c runs, and
 * stores them as iteration c ends into the other copy of the (rotating)
 * buffer; the barrier that opens iteration c + 1 makes them visible, and
 * the copy the store overwrites was last read in iteration c - 1, before
 * that iteration's closing barrier.  Iteration 0's elements are copied
 * before the loop.  (A warp-specialized loop, pass_wspec.c, has no
 * barrier opening its iterations: pass_barrier.c puts one after that
 * first copy and one closing each iteration, after the store.)  Results
 * are those of the copy in place: it reads only
 * the loop variable and values fixed before the loop (as a prefetched
 * copy), it writes the whole buffer and is its only writer, which nothing before it in
 * the body and nothing outside the loop touches, so every read of an
 * iteration sees that iteration's elements. */
#define TL_REG_PREFETCH 8 /* elements per thread, in registers */

static bool reg_prefetchable(P *p, const tl_stmt *loop, int at) {
  const tl_body *b = &loop->body;
  const tl_stmt *c = b->items[at];
  if (c->kind != S_COPY || c->async_copy || c->prefetch || c->byte_copy)
    return false;
  const tl_sym *src = c->src->sym, *dst = c->dst->sym;
  if (src->kind != SYM_TENSOR || dst->kind != SYM_BUFFER || dst->scope != SCOPE_SHARED || dst->stages > 1 ||
      dst->rotates || tl_dtype_is_packed(dst->dtype) || tl_dtype_is_packed(src->dtype) || dst->view_of || dst->viewed)
    return false;
  int64_t n = 1, threads = p->prog->threads[0] * p->prog->threads[1] * p->prog->threads[2];
  for (int d = 0; d < c->dst->ndim; d++)
    n *= c->dst->ext[d];
  if (n > TL_REG_PREFETCH * threads)
    return false;
  return copy_rotatable(p, loop, at);
}

static tl_walk_act find_wgmma(tl_stmt *s, void *n) {
  if (s->kind == S_GEMM && s->use_wgmma)
    ++*(int *)n;
  return TL_WALK_GO;
}

/* The gemm of pipelined loop `loop` that may leave its group in flight
 * across iterations (above), or NULL. */
static tl_stmt *async_gemm(const tl_stmt *loop) {
  static const tl_walker w = {.pre = find_wgmma};
  int n = 0;
  tl_walk((tl_body *)&loop->body, &w, &n);
  const tl_body *b = &loop->body;
  tl_stmt *g = NULL;
  for (int i = 0; i < b->n; i++)
    if (b->items[i]->kind == S_GEMM && b->items[i]->use_wgmma)
      g = b->items[i];
  if (n != 1 || !g || g->clear_accum)
    return NULL;
  bool a = g->A->rotates || g->a_regs, bb = g->B->rotates;
  for (int i = 0; i < b->n; i++) {
    const tl_stmt *c = b->items[i];
    if (c->prefetch && c->dst->sym == g->A)
      a = true;
    if (c->prefetch && c->dst->sym == g->B)
      bb = true;
    if (c != g && tl_stmt_touches(c, g->C))
      return NULL;
  }
  if (!a || !bb)
    return NULL;
  if (g->a_regs && g->C->dims[1] < A_REGS_PENDING_N) { /* safe, but not worth it (above) */
    g->pend_why = "A in registers and C narrower than " TL_PIPE_STR(A_REGS_PENDING_N) " columns: the copies that would keep "
                  "A for a pending group cost more than the overlap hides (pass_pipeline.c)";
    return NULL;
  }
  return g;
}

/* ---- a clearing gemm's tail one iteration late (DeepGEMM's promotion) -------------------
 * A gemm that clears C every iteration (clear_accum) and whose product the
 * rest of the iteration reads (DeepGEMM's per-block scaling: C_acc += C *
 * scale) cannot leave its group pending: the statements after it need C
 * finished, so the tensor cores idle while they run.  Unless those
 * statements run one iteration late.  The loop then keeps two register
 * copies of C, and iteration c issues the gemm of c into copy c % 2, waits
 * until one group is pending (wait_group 1: the gemm of c - 1 is done, that
 * of c runs) and runs the tail of iteration c - 1 (every statement of the
 * body but the gemm and the prefetched copies, in their order, with the
 * loop variable c - 1) on copy (c - 1) % 2; the tail of the last iteration
 * runs after the loop, after wait_group 0.  (The emitter runs LAG_TRIP
 * iterations a trip, each naming its copy at compile time, and ends every
 * trip with wait_group 0: ptxas serializes all the wgmma of a loop where a
 * group is pending across its back edge while other instructions read
 * accumulator registers, C7514; the tail of a trip's last iteration then
 * runs at the start of the next trip, still after the next gemm is
 * issued.)  The results are the same when
 * 1. the gemm commutes with every tail statement written before it (they
 *    do not touch C, A or B) and the tail of c with the gemm of c + 1 (no
 *    tail statement writes C, or touches A or B), so each iteration still
 *    computes gemm then tail, in its own order;
 * 2. the tail of c may run after the barrier and the prefetches of c + 1:
 *    it touches no shared memory at all (so neither the prefetched stages
 *    nor barrier-ordered data of other threads), writes no tensor that the
 *    prefetched copies read, and prefetched copies read only the loop
 *    variable and values fixed before the loop;
 * 3. C is used nowhere outside the loop (after it, neither copy holds
 *    what the program's C would);
 * and the accumulator registers fit: registers of every fragment held in
 * registers plus C's second copy at most LAG_REGS_SLACK under the
 * registers a thread may have (65536 / threads, at most 255), the rest
 * being left for addresses, indices and the tail's temporaries (where
 * that estimate is short, the cubin spills, and tl_compile builds it again
 * with tl_program.no_wg_lag set).  The gemm
 * has wg_pending 1 (the stage rule of async_gemm holds: the group of c
 * pending across the barrier of c + 1 reads stage c % S).  A loop that
 * says "overlap": false keeps its tail in place. */
enum { LAG_REGS_SLACK = 40, LAG_TRIP = 4 };

static bool in_regs(const tl_sym *s) { return s->kind == SYM_BUFFER && s->scope == SCOPE_FRAGMENT && s->in_regs; }

/* Does statement s touch any buffer held in shared memory? */
static bool touches_shared(const tl_program *prog, const tl_stmt *s) {
  for (int i = 0; i < prog->nbuffer_slots; i++) {
    const tl_sym *b = prog->buffer_syms[i];
    if (b->scope != SCOPE_LOCAL && !in_regs(b) && tl_stmt_touches(s, b))
      return true;
  }
  return false;
}

/* The clearing gemm of pipelined loop `loop` whose tail may run one
 * iteration late (above), or NULL; *why says why not where the loop has
 * one clearing gemm on wgmma. */
static tl_stmt *lag_gemm(const P *p, const tl_stmt *loop, const char **why) {
  static const tl_walker w = {.pre = find_wgmma};
  int n = 0;
  tl_walk((tl_body *)&loop->body, &w, &n);
  const tl_body *b = &loop->body;
  tl_stmt *g = NULL;
  int gi = -1;
  for (int i = 0; i < b->n; i++)
    if (b->items[i]->kind == S_GEMM && b->items[i]->use_wgmma)
      g = b->items[i], gi = i;
  if (n != 1 || !g || !g->clear_accum)
    return NULL;
  if (p->prog->no_wg_lag) {
    *why = "the build with it spilled registers (tl_compile built again without)";
    return NULL;
  }
  if (loop->overlap == 0) {
    *why = "the loop says \"overlap\": false";
    return NULL;
  }
  bool a = false, bb = false;
  for (int i = 0; i < b->n; i++) {
    const tl_stmt *c = b->items[i];
    a |= c->prefetch && c->dst->sym == g->A;
    bb |= c->prefetch && c->dst->sym == g->B;
    if (c == g || c->prefetch)
      continue;
    if (tl_stmt_touches(c, g->A) || tl_stmt_touches(c, g->B) || touches_shared(p->prog, c)) {
      *why = "a statement of the loop besides the gemm and its copies touches shared memory";
      return NULL;
    }
    if (i < gi ? tl_stmt_touches(c, g->C) : stmt_writes(c, g->C)) {
      *why = "another statement writes the gemm's C, or reads it before the gemm";
      return NULL;
    }
    for (int j = 0; j < b->n; j++)
      if (b->items[j]->prefetch && stmt_writes(c, b->items[j]->src->sym)) {
        *why = "a statement of the loop writes a tensor that its copies read ahead";
        return NULL;
      }
  }
  if (!a || !bb) {
    *why = "the loop does not prefetch both A and B";
    return NULL;
  }
  if (used_outside(p->top, loop, g->C)) {
    *why = "C is used outside the loop";
    return NULL;
  }
  int64_t threads = p->prog->threads[0] * p->prog->threads[1] * p->prog->threads[2];
  int64_t cap = threads > 0 && 65536 / threads < 255 ? 65536 / threads : 255, regs = g->C->per_thread;
  for (int i = 0; i < p->prog->nbuffer_slots; i++) {
    const tl_sym *x = p->prog->buffer_syms[i];
    if (in_regs(x))
      regs += x->packed ? x->per_thread / 2 : x->per_thread * (tl_dtype_size(x->dtype) > 4 ? 2 : 1);
  }
  if (regs > cap - LAG_REGS_SLACK) {
    *why = tl_arena_printf(p->prog->arena,
                           "the fragments in registers with a second copy of C take %lld registers a thread, over "
                           "%lld - %d",
                           (long long)regs, (long long)cap, (int)LAG_REGS_SLACK);
    return NULL;
  }
  return g;
}

/* ---- a late tail's loads issued an iteration early -----------------------------------
 * The late tail of iteration c (above) starts with its loads from global
 * memory (DeepGEMM's scales: a column of scale_a into a register fragment,
 * one element of scale_b in a let), and waits for them there, after the
 * gemm of c + 1 is issued: with one block's tiles the tensor cores finish
 * that gemm before the loads return.  Such a load is issued instead for
 * iteration c as c starts (before its barrier, or its wait for its stage
 * on a producer warpgroup: pass_wspec.c), into copy c % 2 of its registers
 * (a fragment's two copies; for a let whose C name is v_NAME,
 * tl_lagv_NAME[2]), and the tail of c reads that copy: its latency hides
 * under the wait for the copies, the gemm of c and the tail of c - 1.
 * Copy c % 2 was last read by the tail of c - 2, which ran in iteration
 * c - 1.  Results are those of the load in place when a load reads only
 * tensors that no statement of the loop writes, at indices made of the
 * loop variable and values fixed before the loop (only_loop_var); and a
 * copy's fragment is written whole by it alone, touched by nothing before
 * it in the body nor outside the loop (so every read in the tail of c sees
 * c's elements).  A copy's second copy takes registers that lag_gemm did
 * not count: at most TL_LAG_LOAD elements a thread.  Others stay in the
 * tail. */
#define TL_LAG_LOAD 8 /* elements per thread of a fragment loaded an iteration early (a column of scales: 2 to 4) */

typedef struct {
  const tl_stmt *loop;
  bool ok, tensor; /* only loadable names; some tensor element read */
} LL;

static tl_walk_act loadable_node(tl_expr *x, tl_stmt *s, void *user) {
  LL *l = user;
  (void)s;
  if (x->kind == E_INDEX) {
    if (x->sym->kind != SYM_TENSOR) {
      l->ok = false;
      return TL_WALK_STOP;
    }
    l->tensor = true;
    for (int i = 0; i < l->loop->body.n; i++)
      if (stmt_writes(l->loop->body.items[i], x->sym)) {
        l->ok = false;
        return TL_WALK_STOP;
      }
    return TL_WALK_GO; /* its indices are nodes too */
  }
  if (x->kind == E_NAME && !only_loop_var(x, l->loop)) {
    l->ok = false;
    return TL_WALK_STOP;
  }
  return TL_WALK_GO;
}

static bool lag_loadable(P *p, const tl_stmt *loop, const tl_stmt *g, int at) {
  const tl_body *b = &loop->body;
  const tl_stmt *c = b->items[at];
  LL l = {.loop = loop, .ok = true};
  if (c->kind == S_LET) {
    if (c->sym->varying || tl_expr_varying(c->value))
      return false;
    tl_walk_expr(c->value, loadable_node, NULL, &l);
    return l.ok && l.tensor;
  }
  if (c->kind != S_COPY || c->prefetch || c->async_copy || c->byte_copy)
    return false;
  const tl_sym *src = c->src->sym, *dst = c->dst->sym;
  if (src->kind != SYM_TENSOR || !in_regs(dst) || dst == g->C || dst->packed || dst->stages > 1 ||
      dst->per_thread > TL_LAG_LOAD || tl_dtype_is_packed(src->dtype))
    return false;
  for (int j = 0; j < b->n; j++)
    if (stmt_writes(b->items[j], src))
      return false;
  return copy_rotatable(p, loop, at);
}

static void pipeline_loop(P *p, tl_stmt *loop) {
  int64_t stages = loop->num_stages < p->max_stages ? loop->num_stages : p->max_stages;
  if (stages < 2 || loop->step->kind != E_CONST || loop->step->val.i != 1)
    return;
  tl_body *b = &loop->body;
  for (int i = 0; i < b->n; i++) {
    tl_stmt *c = b->items[i];
    if (c->kind != S_COPY || !c->async_copy)
      continue;
    const tl_sym *buf = c->dst->sym;
    bool ok = true;
    for (int d = 0; d < c->src->ndim && ok; d++)
      ok = only_loop_var(c->src->lo[d], loop);
    for (int d = 0; d < c->dst->ndim && ok; d++)
      ok = c->dst->lo[d] == NULL || c->dst->lo[d]->kind == E_CONST;
    for (int j = 0; j < b->n && ok; j++) /* nothing before it touches the buffer, nothing else writes it */
      if (j != i)
        ok = j < i ? !tl_stmt_touches(b->items[j], buf) : !stmt_writes(b->items[j], buf);
    if (ok && used_outside(p->top, loop, buf))
      ok = false;
    if (!ok)
      continue;
    c->prefetch = true;
    loop->pipe = true;
  }
  if (!loop->pipe)
    return;
  /* operands the loop computes rotate (above), where a stage is left for a pending group */
  tl_stmt *w = NULL;
  for (int i = 0; i < b->n; i++)
    if (b->items[i]->kind == S_GEMM && b->items[i]->use_wgmma && !b->items[i]->clear_accum)
      w = b->items[i];
  tl_sym *rot[2] = {NULL, NULL};
  for (int k = 0; w && k < 2 && p->max_stages >= 3; k++) {
    tl_sym *x = k ? w->B : w->A;
    if (rotatable(p, loop, x, w)) {
      x->rotates = true;
      x->stages = 2;
      rot[k] = x;
    }
  }
  for (int i = 0; i < b->n && p->max_stages >= 3; i++)
    if (reg_prefetchable(p, loop, i)) {
      b->items[i]->reg_prefetch = true;
      b->items[i]->dst->sym->rotates = true;
      b->items[i]->dst->sym->stages = 2;
    }
  tl_stmt *g = async_gemm(loop);
  const char *why = NULL;
  tl_stmt *lg = g ? NULL : lag_gemm(p, loop, &why);
  if (lg)
    g = lg;
  loop->lag_why = why;
  int pending = g ? 1 : 0;
  int64_t total = loop->num_stages + pending < p->max_stages ? loop->num_stages + pending : p->max_stages;
  int64_t ahead = total - 1 - pending;
  if (ahead < 1) {
    pending = 0;
    ahead = total - 1;
  }
  for (int k = 0; k < 2 && !pending; k++)
    if (rot[k]) { /* no group pending: one copy serves */
      rot[k]->rotates = false;
      rot[k]->stages = 1;
    }
  loop->pipe_stages = total;
  loop->pipe_ahead = ahead;
  loop->wg_drain = pending > 0;
  loop->wg_lag = lg && pending > 0 ? LAG_TRIP : 0;
  if (loop->wg_lag) {
    lg->C->stages = 2; /* its two register copies */
    for (int i = 0; i < b->n; i++)
      if (b->items[i] != lg && !b->items[i]->prefetch && lag_loadable(p, loop, lg, i)) {
        b->items[i]->lag_load = true;
        if (b->items[i]->kind == S_COPY)
          b->items[i]->dst->sym->stages = 2;
      }
  }
  if (lg && !pending)
    loop->lag_why = "no stage is left for a pending wgmma group";
  if (g)
    g->wg_pending = pending;
  for (int i = 0; i < b->n; i++)
    if (b->items[i]->prefetch)
      b->items[i]->dst->sym->stages = total;
}

/* The bytes a copy between two tensors or shared buffers of one packed
 * dtype may move at once (1, 2, 4, 8 or 16), or 0 when it cannot move
 * bytes: the innermost dimension of both regions is the copy's, and its
 * extent, both starts and (for a constant dimension) both rows hold whole
 * vectors; a tensor's base is aligned to them. */
static int byte_copy_width(const tl_stmt *s) {
  const tl_region *src = s->src, *dst = s->dst;
  const tl_sym *a = src->sym, *b = dst->sym;
  if (a->dtype != b->dtype || !tl_dtype_is_packed(a->dtype) || in_regs(a) || in_regs(b))
    return 0;
  if ((a->kind == SYM_BUFFER && a->scope == SCOPE_LOCAL) || (b->kind == SYM_BUFFER && b->scope == SCOPE_LOCAL))
    return 0;
  int ls = src->ndim - 1, ld = dst->ndim - 1, per = 8 / tl_dtype_bits(a->dtype);
  if (src->ext[ls] == 1 || dst->ext[ld] == 1 || src->ext[ls] != dst->ext[ld])
    return 0;
  for (int w = 16; w >= 1; w /= 2) {
    int64_t v = (int64_t)w * per; /* elements per vector */
    bool ok = src->ext[ls] % v == 0 && tl_multiple_of(src->lo[ls], v) && tl_multiple_of(dst->lo[ld], v);
    for (int k = 0; k < 2; k++) {
      const tl_sym *x = k ? b : a;
      int last = k ? ld : ls;
      ok = ok && (x->dims[last] < 0 ? w == 1 : x->dims[last] % v == 0) && (x->kind != SYM_TENSOR || x->align >= w);
    }
    if (ok)
      return w;
  }
  return 0;
}

/* Marks the copies before what they hold, the pipelined loops after (tl_walker). */
static tl_walk_act mark_copy(tl_stmt *s, void *user) {
  P *p = user;
  s->prefetch = s->reg_prefetch = s->pipe = s->wg_drain = s->lag_load = false;
  s->wg_lag = 0;
  s->lag_why = NULL;
  s->wg_pending = 0;
  s->pipe_stages = s->pipe_ahead = 0;
  if (s->kind == S_GEMM && s->C)
    s->C->stages = 1;
  if (s->kind == S_COPY) {
    s->async_copy = p->async && can_async(s);
    s->byte_copy = s->async_copy ? 0 : byte_copy_width(s);
    if (s->dst->sym->kind == SYM_BUFFER)
      s->dst->sym->stages = 1;
  }
  return TL_WALK_GO;
}

static tl_walk_act mark_loop(tl_stmt *s, void *user) {
  if (s->kind == S_LOOP && s->loop_kind == LOOP_PIPELINED)
    pipeline_loop(user, s);
  return TL_WALK_GO;
}

static void walk(P *p, tl_body *b) {
  static const tl_walker w = {.pre = mark_copy, .post = mark_loop};
  for (int i = 0; i < p->prog->nbuffer_slots; i++) {
    tl_sym *x = p->prog->buffer_syms[i];
    if (x->rotates) {
      x->rotates = false;
      x->stages = 1;
    }
  }
  tl_walk(b, &w, p);
}

/* Pipelines with as many stages as the loops ask for, and with fewer when
 * the stages' buffers would not fit in smem_limit bytes (down to none:
 * pipelining never makes a program that fits fail to). */
tl_status tl_pass_pipeline(tl_program *prog, int64_t smem_limit, tl_error *err) {
  return tl_pass_pipeline_for(prog, smem_limit, &tl_codegen_cuda, err);
}

tl_status tl_pass_pipeline_for(tl_program *prog, int64_t smem_limit, const tl_codegen *cg, tl_error *err) {
  P pp = {.prog = prog, .top = &prog->body, .max_stages = 17, .async = cg->async_copy};
  for (;;) {
    walk(&pp, &prog->body);
    tl_pass_smem(prog);
    if (prog->smem_bytes <= smem_limit || pp.max_stages < 2)
      break;
    int64_t deepest = 0;
    for (int i = 0; i < prog->nbuffer_slots; i++)
      if (prog->buffer_syms[i]->stages > deepest)
        deepest = prog->buffer_syms[i]->stages;
    pp.max_stages = deepest > 1 ? deepest - 1 : 1;
  }
  prog->lowered |= TL_RAN_PIPELINE;
  (void)err;
  return TL_OK;
}
