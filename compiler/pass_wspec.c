/*
 * pass_wspec.c - warp specialization: a producer warpgroup for the bulk
 * tensor copies of a pipelined loop.
 *
 * Needs: a program after pass_tma and pass_cluster (its tma loops, mbarriers and tensor
 * maps), for a target of tl_codegen with wgmma and tma (sm_90a: setmaxnreg
 * is an sm_90a instruction).  Produces: wspec on the one tma loop that
 * qualifies, with wspec_empty (its "stage is free" mbarriers, one per
 * stage, after the program's others: tl_program.nmbar grows by
 * pipe_stages) and wspec_lag; tl_program.wspec_threads (128: the launch's
 * block grows by one warpgroup, after the program's threads) and
 * wspec_regs (setmaxnreg's counts for the producer and for the program's
 * threads); wspec_pre, pre_mbar, pre_stages, pre_threads and pre_last on
 * the copies before the loop that the producer issues too (tl_program.nmbar
 * grows by two for each copy of their buffers, whose stages become that
 * many; their tensor maps join the program's), tma_why on the others;
 * wspec_why on every other tma loop, saying why not (`--emit ir` prints it);
 * wspec on the lets of the kernel's body before the loop that the producer
 * evaluates too; then the shared-memory layout again
 * (tl_pass_smem); pingpong on the chosen loop (pingpong_why when not: the
 * loop says "pingpong": false, the program's threads are one warpgroup, its
 * tail runs one iteration late, no gemm of the body runs on wgmma, or,
 * unless the loop says "pingpong": true, only one does): its warpgroups
 * take turns issuing the body's gemms (emit_cuda.c's pp_turn_wait); slices
 * and slice_buf on a loop that asked for slices and can have them
 * (tl_program.slices; slices_why on one that cannot).  Keeps: everything
 * else; results never change (the same copies land in the same stages
 * before the same iterations read them), but for the order in which
 * slices add their gemms' sums (proto/tile-ir-v1.md 8.3).
 *
 * How the kernel runs (emit_cuda.c's emit_wspec): the program's threads,
 * 0 to T-1, run the program as before, except that the loop's copies are
 * not theirs: iteration c waits for stage c % S's full mbarrier (the
 * producer's expect_tx and the copies' bytes complete it), runs the body,
 * and then frees the stage of iteration c - wspec_lag (one arrival per
 * warp on its empty mbarrier; per thread, after fence.proxy.async, where
 * the body reads the stages other than through wgmma: wspec_threads, as
 * measured on an H100, where a per-warp arrival let the next copy
 * overwrite a stage that a parallel loop was still reading) once the
 * wgmma groups still reading it are
 * done; their block barriers become the named barrier 1 of T threads.  The
 * producer warpgroup, threads T to T+127, gives up registers (setmaxnreg.dec)
 * and one of its threads walks the loop's iterations: wait for the stage to
 * be free, expect its bytes, issue its copies.  So the copies run up to S
 * iterations ahead, with no block barrier in the loop, and the program's
 * threads get the registers the producer does not need (setmaxnreg.inc).
 * A loop whose gemm's tail runs one iteration late (pass_pipeline.c's
 * lag_gemm; its gemm leaves one group pending, so wspec_lag is 1) runs its
 * trips as without the producer: iteration c issues its gemm after the
 * wait for its stage, frees the stage of c - 1 (the gemm of c - 1 is done
 * once wait_group 1 returns; its tail touches no shared memory) and runs
 * the tail of c - 1; its second copies of registers count among the
 * fragments, with TL_WSPEC_LAG_SPARE more.  A loop with a gemm issued one
 * iteration late (pass_overlap.c's ov_gemm: P V of iteration c - 1 after
 * Q K^T of c) frees the stage of c - 1 at the end of iteration c
 * (wspec_lag 1: that gemm read it, and was waited for in c), and the last
 * stage once the loop's last late gemm, issued after it, is done.
 *
 * Pre copies (persistent kernels): a copy of the kernel's body before the
 * loop, from a tensor no statement writes into a shared buffer no other
 * statement writes, at a place the producer can compute (as the loop's
 * copies), one tensor map can do (tl_tma_map_of) is the producer's too
 * (wspec_pre: attention's Q tile): tile by tile it waits until the tile
 * pre_stages back has freed the buffer's copy, then issues the bulk tensor
 * copy on a full mbarrier of its own; the program's threads, at the copy,
 * wait for it there and free it after its last reader (pre_last; after
 * wgmma.wait_group 0, per warp, or per thread after a proxy fence where a
 * reader is not a wgmma operand: pre_threads).  Two copies of the buffer
 * (the next tile's lands while this one's is read) where shared memory
 * holds them at the blocks per SM chosen, else one (issued after the
 * loop's first pipe_stages iterations, so the next tile's stages are not
 * held up by the last tile's reading), else none (tma_why says why).
 * Otherwise the program's threads copy, with cp.async, at each tile's start (H100, attention b4 h32 s4096:
 * causal d64 374-380 against 358 TFLOP/s, s1024 d128 524 against 502;
 * bench/README.md).
 *
 * Slices (a loop's "slices", G of them: slices_why says when not): the
 * block has G times the program's threads before the producer, slice s
 * (threads s T to (s + 1) T - 1, each as thread tl_tid % T of the program)
 * runs iterations s, s + G, ... with its own fragments, its gemms' sums
 * starting at 0 but for slice 0's, which keeps what the statements before
 * the loop left; lane 0 of producer warp s issues slice s's copies.  Each
 * slice has stages of its own (iteration c's stage c % S, G dividing S),
 * so that a slice waits on a stage's mbarriers only after it saw their last
 * phase complete, and the slices' producers wait on one slice each.  Slice
 * 0 alone runs the kernel's statements before the loop (every slice then
 * waits on named barrier G + 1) and after it: once every slice is done with
 * the stages, slices 1.. G - 1 store their sums in the memory of the loop's
 * largest staged buffer (slice_buf) and return, and slice 0 adds them into
 * its own in slice order.  The slices' block barriers are named barriers 1
 * + s.  The kernel is not persistent.
 *
 * Persistent: unless the kernel says "persistent": false (or is launched
 * in thread-block clusters: tl_program.cl_size, pass_cluster.c), the kernel is persistent too
 * (tl_program.persistent): the launcher starts at most wspec_blocks blocks
 * per SM (proto/kernel-meta.md, launch.persistent), and each walks the
 * grid's tiles, block indices in the grid's order, tile t then t + the
 * blocks started; the producer runs on into the next tile's stages while
 * the program's threads store the last one's results, and the stages and
 * mbarrier phases go on from tile to tile.  Every tile runs the whole body
 * as a block of the grid would (blocks never depend on each other).
 *
 * A tma loop qualifies when:
 *   - the loop does not say "warp_specialize": false;
 *   - it is the program's only tma loop, a statement of the kernel's body
 *     itself (not inside another loop or an if: the producer walks it
 *     once), and every copy it prefetches is a bulk tensor copy;
 *   - its extent, start and the copies' source regions use only constants,
 *     scalar parameters, block variables, its own variable and lets of the
 *     kernel's body before it that do the same (the producer evaluates them
 *     on its own; no element of a tensor or buffer: its thread has none of
 *     the program's buffers, and a tensor may be written by the kernel);
 *   - no statement writes a tensor the copies read (the producer reads it
 *     at its own time);
 *   - the block is one-dimensional, whole warpgroups, and one warpgroup
 *     more stays within 1024 threads;
 *   - the register fragments, and TL_WSPEC_SPARE more, fit in what
 *     setmaxnreg leaves the program's threads (65536 registers per SM, for
 *     as many blocks as shared memory holds or fewer, minus the producer's
 *     40 a thread), or else (the tight budget: tl_program.wspec_tight; not
 *     for a loop with a late tail, nor once a build with it spilled) the
 *     fragments and TL_WSPEC_TIGHT_SPARE more fit beside a producer of 24
 *     (at most tl_program.wspec_max_blocks blocks per SM where tl_compile
 *     gives it: a build with more spilled, the estimate missing the emitted
 *     code's temporaries);
 *     the registers at entry hold the largest wgmma
 *     instruction (inst_regs); no register cap is given (--max-registers);
 *   - the S more mbarriers fit in the block's shared memory.
 */
#include <string.h>
#include "ir.h"
#include "pass.h"

#define WSPEC_THREADS 128   /* the producer: one warpgroup (setmaxnreg acts on whole warpgroups) */
#define WSPEC_PRODUCER_REGS 40 /* registers per producer thread: one thread's loop of copies */
#define SM_REGS 65536       /* 32-bit registers per SM (sm_90) */
#define MAX_REGS 240        /* the most setmaxnreg gives a thread here (its limit is 256; 240 as CUTLASS) */
#define SM_SMEM 233472      /* shared memory per SM (sm_90: 228 KiB; each block also takes 1 KiB) */
#define TL_WSPEC_SPARE 40   /* registers a thread needs besides its fragments (addresses, indices,
                               descriptors): the program's threads must get that many more */
#define WSPEC_TIGHT_PRODUCER_REGS 24 /* the tight budget: the fewest setmaxnreg gives (CUTLASS's and
                               FlashAttention-3's producers take 24 to 32) */
#define TL_WSPEC_TIGHT_SPARE 16 /* ... and its registers besides the fragments: FlashAttention at d64 in
                               3 warpgroups of 64 x 128 (138 in fragments) builds without spills at 160
                               (32 bytes spilled at 152 with P V issued late) */
#define TL_WSPEC_LAG_SPARE 32 /* the same for a loop with a late tail (pass_pipeline.c's lag_gemm): its
                               loads are in fragments and lets counted already, the rest its scaling's
                               temporaries (the 128 x 128 float8 tile of examples/ at 4096: 216
                               registers with 196 in fragments, without warp specialization); a cubin
                               that spills is built again without the late tail */

typedef struct {
  tl_program *prog;
  tl_stmt *loop;    /* the loop being examined */
  const tl_stmt *const *before; /* the kernel body's statements before it */
  int nbefore;
  bool ok;
} Q;

/* May the producer evaluate x on its own (see the header)? */
static bool producer_expr(Q *q, const tl_expr *x);

static tl_walk_act producer_node(tl_expr *x, tl_stmt *s, void *user) {
  Q *q = user;
  (void)s;
  const tl_sym *y = x->sym;
  if (!y)
    return TL_WALK_GO;
  switch (y->kind) {
  case SYM_CONST: case SYM_SCALAR: case SYM_BLOCK_VAR: return TL_WALK_GO;
  case SYM_LOOP_VAR:
    if (y == q->loop->var)
      return TL_WALK_GO;
    break;
  case SYM_LET:
    for (int i = 0; i < q->nbefore; i++)
      if (q->before[i]->kind == S_LET && q->before[i]->sym == y && producer_expr(q, q->before[i]->value))
        return TL_WALK_GO;
    break;
  default: break;
  }
  q->ok = false;
  return TL_WALK_STOP;
}

static bool producer_expr(Q *q, const tl_expr *x) {
  if (tl_expr_varying(x)) /* thread_binding, a thread's own values: the producer's thread has other ones */
    return false;
  bool saved = q->ok;
  q->ok = true;
  tl_walk_expr((tl_expr *)x, producer_node, NULL, q);
  bool r = q->ok;
  q->ok = saved;
  return r;
}

static bool producer_region(Q *q, const tl_region *r) {
  for (int d = 0; d < r->ndim; d++)
    if (r->lo[d] && !producer_expr(q, r->lo[d]))
      return false;
  return true;
}

/* Does statement s write tensor t (tl_walker.pre; user: Q with loop->...)? */
typedef struct {
  const tl_sym *t;
  bool hit;
} W;

static tl_walk_act writes(tl_stmt *s, void *user) {
  W *w = user;
  const tl_sym *d = s->kind == S_ASSIGN && s->lhs ? s->lhs->sym
                    : (s->kind == S_COPY || s->kind == S_ATOMIC_ADD || s->kind == S_FILL) && s->dst ? s->dst->sym
                                                                                                    : NULL;
  if (d == w->t)
    w->hit = true;
  return TL_WALK_GO;
}

static tl_walk_act count_tma(tl_stmt *s, void *user) {
  if (s->kind == S_LOOP && s->tma)
    ++*(int *)user;
  return TL_WALK_GO;
}

/* The registers at entry that the kernel's largest wgmma needs: ptxas
 * allocates each instruction within the entry's count, whatever setmaxnreg
 * gives later (measured: an m64n256k16 wgmma, 128 accumulators a thread,
 * "needs 154" and does not compile with 128 at entry), so its N / 2
 * accumulators and 32 more (descriptors, addresses). */
static int64_t inst_regs(const tl_program *prog);

static tl_walk_act max_wgmma(tl_stmt *s, void *user) {
  int64_t *m = user;
  if (s->kind == S_GEMM && s->use_wgmma && s->C->dims[1] / 2 + 32 > *m)
    *m = s->C->dims[1] / 2 + 32;
  return TL_WALK_GO;
}

static int64_t inst_regs(const tl_program *prog) {
  int64_t m = 0;
  tl_walk((tl_body *)&prog->body, &(tl_walker){.pre = max_wgmma}, &m);
  return m;
}

/* The registers a thread holds in the second copies of register
 * fragments (a wg_lag gemm's C, lag_load copies: stages 2), which
 * tl_reg_words does not count. */
static int64_t lag_words(const tl_program *prog) {
  int64_t n = 0;
  for (int i = 0; i < prog->nbuffer_slots; i++) {
    const tl_sym *s = prog->buffer_syms[i];
    if (s->scope == SCOPE_FRAGMENT && s->in_regs && s->stages == 2)
      n += s->packed ? s->per_thread / 2 : s->per_thread;
  }
  return n;
}

/* Why loop (a tma loop, statement i of the kernel's body, or i < 0 when
 * nested) cannot be warp-specialized, or NULL. */
static const char *why_not(tl_program *prog, tl_stmt *loop, int i, int ntma, int G) {
  tl_arena *a = prog->arena;
  int64_t T = prog->threads[0] * prog->threads[1] * prog->threads[2] * G; /* the program's threads, all slices */
  if (loop->no_wspec)
    return "its pipelined loop says \"warp_specialize\": false";
  if (ntma > 1)
    return "the kernel has more than one loop of bulk tensor copies";
  if (i < 0)
    return "the loop is inside another statement (the producer walks only a loop of the kernel's body)";
  if (prog->threads[1] * prog->threads[2] != 1)
    return "the block is not one-dimensional";
  if (T % WSPEC_THREADS)
    return "the block is not whole warpgroups (threads a multiple of 128)";
  if (T + WSPEC_THREADS > 1024)
    return tl_arena_printf(a, "%lld threads%s and a producer warpgroup are over 1024", (long long)T,
                           G > 1 ? tl_arena_printf(a, " (%d slices)", G) : "");
  Q q = {.prog = prog, .loop = loop, .before = (const tl_stmt *const *)prog->body.items, .nbefore = i};
  if (!producer_expr(&q, loop->extent) || !producer_expr(&q, loop->start))
    return "the loop's extent or start depends on values the producer does not have";
  for (int j = 0; j < loop->body.n; j++) {
    const tl_stmt *c = loop->body.items[j];
    if (!c->prefetch)
      continue;
    if (!c->tma)
      return "a copy it prefetches is not a bulk tensor copy";
    if (!producer_region(&q, c->src))
      return tl_arena_printf(a, "the copy into %s reads where only the program's threads know (a value other than "
                             "constants, scalars, block variables, the loop's variable and lets of them)",
                             c->dst->sym->name);
    W w = {.t = c->src->sym};
    tl_walk(&prog->body, &(tl_walker){.pre = writes}, &w);
    if (w.hit)
      return tl_arena_printf(a, "the kernel writes %s, which the copies read", c->src->sym->name);
  }
  if (prog->max_registers)
    return "a register cap is given (setmaxnreg needs the launch bounds it replaces)";
  /* blocks per SM: as many as shared memory holds, fewer while the program's
   * threads would get too few registers; a block starts with R registers a
   * thread (ptxas takes the most that __launch_bounds__(T + 128, B) allows),
   * then the producer gives up R - 40 and the program's threads take them */
  /* the usual budget first; where it does not fit, the tight one (a loop without a late tail, unless its
   * build spilled: tl_compile builds again with no_tight_wspec) */
  int64_t words = tl_reg_words(prog) + lag_words(prog), inst = inst_regs(prog), B = 0, R = 0, C = 0, P = 0;
  for (int tight = 0; tight < 2 && B < 1; tight++) {
    if (tight && (loop->wg_lag || prog->no_tight_wspec))
      break;
    int64_t spare = tight ? TL_WSPEC_TIGHT_SPARE : loop->wg_lag ? TL_WSPEC_LAG_SPARE : TL_WSPEC_SPARE;
    int64_t need = (words + spare + 7) / 8 * 8;
    P = tight ? WSPEC_TIGHT_PRODUCER_REGS : WSPEC_PRODUCER_REGS;
    B = SM_SMEM / (prog->smem_bytes + 1024);
    if (prog->wspec_max_blocks > 0 && B > prog->wspec_max_blocks)
      B = prog->wspec_max_blocks;
    for (B = B < 1 ? 1 : B; B >= 1; B--) {
      R = SM_REGS / (B * (T + WSPEC_THREADS)) / 8 * 8;
      R = R > 255 ? 255 : R;
      C = ((T + WSPEC_THREADS) * R - WSPEC_THREADS * P) / T / 8 * 8;
      C = C > MAX_REGS ? MAX_REGS : C;
      if (C >= need && R >= P && R >= inst)
        break;
    }
    prog->wspec_tight = tight && B >= 1;
  }
  if (B < 1)
    return tl_arena_printf(a, "its register fragments take %lld registers a thread, and a producer warpgroup would "
                           "leave at most %lld", (long long)words, (long long)C);
  prog->wspec_blocks = (int)B;
  prog->wspec_regs[0] = (int)P;
  prog->wspec_regs[1] = C > R ? (int)C : 0; /* 0: no setmaxnreg (R is as much as the program's threads can get) */
  return NULL;
}

/* Does a statement touch a buffer that loop prefetches (tl_walker, user: S)? */
typedef struct {
  const tl_stmt *loop;
  bool hit;
} S;

static bool staged(const S *st, const tl_sym *y) {
  for (int j = 0; y && j < st->loop->body.n; j++)
    if (st->loop->body.items[j]->prefetch && st->loop->body.items[j]->dst->sym == y)
      return true;
  return false;
}

static tl_walk_act stage_stmt(tl_stmt *s, void *user) {
  S *st = user;
  st->hit |= (s->src && staged(st, s->src->sym)) || (s->dst && staged(st, s->dst->sym)) || staged(st, s->A) ||
             staged(st, s->B) || staged(st, s->C);
  return TL_WALK_GO;
}

static tl_walk_act stage_expr(tl_expr *x, tl_stmt *s, void *user) {
  S *st = user;
  (void)s;
  st->hit |= staged(st, x->sym);
  return TL_WALK_GO;
}

/* Does a statement touch buffer b, and otherwise than as a wgmma gemm's operand (tl_walker, user: R)? */
typedef struct {
  const tl_sym *b;
  bool hit, generic;
} R;

static tl_walk_act pre_stmt(tl_stmt *s, void *user) {
  R *r = user;
  bool op = s->kind == S_GEMM && (s->A == r->b || s->B == r->b), wg = op && s->use_wgmma && s->C != r->b;
  bool other = (s->src && s->src->sym == r->b) || (s->dst && s->dst->sym == r->b) || s->C == r->b;
  r->hit |= op || other;
  r->generic |= other || (op && !wg);
  return TL_WALK_GO;
}

static tl_walk_act pre_expr(tl_expr *x, tl_stmt *s, void *user) {
  R *r = user;
  (void)s;
  if (x->sym == r->b)
    r->hit = r->generic = true;
  return TL_WALK_GO;
}

/* Why copy c (statement i of the kernel's body, before wspec loop `loop`) is not issued by the producer
 * too (a pre copy; see the header), or NULL, with its tensor map in *map. */
static const char *pre_why(tl_program *prog, tl_stmt *loop, int i, tl_stmt *c, int *map) {
  const tl_sym *t = c->src->sym, *b = c->dst->sym;
  if (!prog->persistent)
    return "the kernel is not persistent (one tile a block: nothing to copy ahead)";
  if (loop->no_tma)
    return "the pipelined loop says \"tma\": false";
  if (t->kind != SYM_TENSOR || b->kind != SYM_BUFFER || b->scope != SCOPE_SHARED || b->stages > 1 || b->rotates)
    return "not a copy of a tensor into a shared buffer of one copy";
  Q q = {.prog = prog, .loop = loop, .before = (const tl_stmt *const *)prog->body.items, .nbefore = i};
  if (!producer_region(&q, c->src))
    return "it reads where only the program's threads know";
  W w = {.t = t};
  tl_walk(&prog->body, &(tl_walker){.pre = writes}, &w);
  if (w.hit)
    return tl_arena_printf(prog->arena, "the kernel writes %s, which it reads", t->name);
  for (int j = 0; j < prog->body.n; j++) {
    W wb = {.t = b};
    if (prog->body.items[j] != c && (tl_walk_stmt(prog->body.items[j], &(tl_walker){.pre = writes}, &wb), wb.hit))
      return tl_arena_printf(prog->arena, "the kernel writes %s otherwise too", b->name);
  }
  return tl_tma_map_of(prog, c, map);
}

/* The pre copies of wspec loop `loop` (see the header): each copy of the kernel's body before it from a
 * tensor into a shared buffer, where the buffer can have two copies (or, short of room, one) and four (two)
 * mbarriers more; the shared-memory layout again.  Blocks per SM stay what they were. */
static void pre_copies(tl_program *prog, tl_stmt *loop, int64_t smem_limit) {
  for (int i = 0; prog->body.items[i] != loop; i++) {
    tl_stmt *c = prog->body.items[i];
    if (c->kind != S_COPY || !c->async_copy || c->prefetch)
      continue;
    int map = -1, ntmaps = prog->ntmaps;
    const char *why = pre_why(prog, loop, i, c, &map);
    if (why) {
      c->tma_why = tl_arena_printf(prog->arena, "before the warp-specialized loop, not the producer's: %s", why);
      continue;
    }
    R r = {.b = c->dst->sym};
    c->pre_last = c;
    for (int j = i + 1; j < prog->body.n; j++) {
      R rj = {.b = c->dst->sym};
      tl_walk_stmt(prog->body.items[j], &(tl_walker){.pre = pre_stmt, .expr = pre_expr}, &rj);
      if (rj.hit)
        c->pre_last = prog->body.items[j];
      r.generic |= rj.generic;
    }
    tl_sym *b = c->dst->sym;
    int nmbar = prog->nmbar;
    int64_t blocks = prog->wspec_blocks;
    for (int n = 2; n >= 1; n--) {
      b->stages = n;
      b->tma_dst = prog->tmaps[map].swizzle != 0;
      prog->nmbar = nmbar + 2 * n;
      tl_pass_smem(prog);
      if (prog->smem_bytes <= smem_limit && SM_SMEM / (prog->smem_bytes + 1024) >= blocks) {
        c->wspec_pre = true;
        c->tma_map = map;
        c->pre_mbar = nmbar;
        c->pre_stages = n;
        c->pre_threads = r.generic;
        c->tma_why = NULL;
        break;
      }
    }
    if (!c->wspec_pre) {
      b->stages = 1;
      b->tma_dst = false;
      prog->nmbar = nmbar;
      if (map == ntmaps) /* a map added for this copy alone: the launcher would encode it for nothing */
        prog->ntmaps = ntmaps;
      tl_pass_smem(prog);
      c->tma_why = "before the warp-specialized loop, not the producer's: no room for its copies in shared memory";
    }
  }
}

static tl_walk_act reset(tl_stmt *s, void *user) {
  (void)user;
  if (s->wspec_pre) {
    s->dst->sym->stages = 1;
    s->dst->sym->tma_dst = false;
    s->tma_map = -1;
  }
  s->wspec_pre = false;
  s->pre_mbar = s->pre_stages = 0;
  s->pre_threads = false;
  s->pre_last = NULL;
  s->wspec = false;
  s->wspec_why = NULL;
  s->wspec_empty = 0;
  s->wspec_lag = 0;
  s->wspec_threads = false;
  s->pingpong = false;
  s->pingpong_why = NULL;
  s->slices = 0;
  s->slices_why = NULL;
  return TL_WALK_GO;
}

static tl_walk_act count_wgmma(tl_stmt *s, void *user) {
  if (s->kind == S_GEMM && s->use_wgmma)
    ++*(int *)user;
  return TL_WALK_GO;
}

/* Why the program's warpgroups do not take turns issuing the gemms of wspec
 * loop (see the header), or NULL. */
static const char *pingpong_why(const tl_program *prog, const tl_stmt *loop) {
  int64_t T = prog->threads[0];
  int n = 0;
  tl_walk((tl_body *)&loop->body, &(tl_walker){.pre = count_wgmma}, &n);
  if (loop->pingpong_req == 0)
    return "the loop says \"pingpong\": false";
  if (loop->slices > 1)
    return "the loop runs in slices";
  if (T / WSPEC_THREADS < 2)
    return "the program's threads are one warpgroup";
  if (loop->wg_lag)
    return "its gemm's tail runs one iteration late (the turns follow the body's order)";
  if (n == 0)
    return "no gemm of its body runs on wgmma";
  if (n < 2 && loop->pingpong_req < 0)
    return "its body holds one gemm on wgmma (by default the turns are taken where two or more leave work "
           "between them, as attention's do; \"pingpong\": true asks)";
  return NULL;
}

/* The wgmma groups left in flight after an iteration of loop: a stage is
 * read until that many more iterations have waited for theirs (each
 * iteration commits at least one group). */
static int lag_of(const tl_stmt *loop) {
  int lag = 0;
  for (int j = 0; j < loop->body.n; j++)
    if (loop->body.items[j]->kind == S_GEMM && loop->body.items[j]->wg_pending > lag)
      lag = loop->body.items[j]->wg_pending;
  return lag;
}

/* ---- slices (see the header) ---- */
typedef struct {
  tl_program *prog;
  const tl_stmt *loop;
  const char *why;
  const tl_sym *syms[64]; /* the per-thread buffers and variables the body touches */
  int nsyms;
  const tl_sym *vars[64]; /* the alloc_vars the body declares */
  int nvars;
} SL;

/* A buffer whose elements each thread holds (a register fragment, a local buffer), or a variable. */
static bool per_thread(const tl_sym *b) {
  return b && (b->kind == SYM_VAR ||
               (b->kind == SYM_BUFFER && (b->scope == SCOPE_LOCAL || (b->scope == SCOPE_FRAGMENT && b->in_regs))));
}

static void sl_note(SL *q, const tl_sym *b) {
  if (!per_thread(b) || q->why)
    return;
  for (int i = 0; i < q->nsyms; i++)
    if (q->syms[i] == b)
      return;
  if (q->nsyms == (int)(sizeof q->syms / sizeof q->syms[0]))
    q->why = "its body touches more than 64 fragments and variables";
  else
    q->syms[q->nsyms++] = b;
}

static tl_walk_act sl_expr(tl_expr *x, tl_stmt *s, void *user) {
  (void)s;
  sl_note(user, x->sym);
  return TL_WALK_GO;
}

/* What the body may do when its iterations run side by side in slices: write only what each thread holds
 * (fragments in registers, local buffers, variables), its prefetched stages, and gemm sums. */
static tl_walk_act sl_stmt(tl_stmt *s, void *user) {
  SL *q = user;
  tl_arena *a = q->prog->arena;
  const tl_sym *w = NULL; /* what s writes */
  switch (s->kind) {
  case S_LET: case S_PARALLEL: case S_IF: case S_SYNC_THREADS: break;
  case S_ALLOC: case S_ALLOC_VAR:
    if (s->kind == S_ALLOC_VAR && q->nvars < (int)(sizeof q->vars / sizeof q->vars[0]))
      q->vars[q->nvars++] = s->sym;
    break;
  case S_LOOP:
    if (s->loop_kind == LOOP_PIPELINED)
      q->why = "its body holds another pipelined loop";
    break;
  case S_COPY:
    if (s->prefetch)
      return TL_WALK_SKIP; /* the producer's, into the iteration's own stage */
    w = s->dst->sym;
    break;
  case S_FILL: w = s->dst->sym; break;
  case S_ASSIGN:
    if (s->atomic)
      q->why = "its body holds an atomic";
    w = s->lhs->sym;
    break;
  case S_GEMM:
    if (!s->C->in_regs || (s->C->dtype != TL_FLOAT32 && s->C->dtype != TL_INT32))
      q->why = tl_arena_printf(a, "the sum of a gemm of its body, %s, is not a float32 or int32 register fragment",
                               s->C->name);
    else if (s->clear_accum)
      q->why = tl_arena_printf(a, "a gemm of its body clears %s (clear_accum): there is no sum to split",
                               s->C->name);
    sl_note(q, s->A);
    sl_note(q, s->B);
    sl_note(q, s->C);
    return q->why ? TL_WALK_STOP : TL_WALK_GO;
  default:
    q->why = tl_arena_printf(a, "its body holds a %s statement", s->op_name ? s->op_name : tl_stmt_kind_name(s->kind));
    break;
  }
  if (w && !per_thread(w))
    q->why = tl_arena_printf(a, "its body writes %s, which every slice would share (only fragments in registers, "
                             "local buffers and variables are each thread's own)", w->name);
  if (s->src)
    sl_note(q, s->src->sym);
  if (s->dst)
    sl_note(q, s->dst->sym);
  return q->why ? TL_WALK_STOP : TL_WALK_GO;
}

/* Does top-level body statement s write all of b before reading any of it (a copy or fill of the whole
 * buffer, a parallel loop over its shape storing each element, an assignment of a variable)? */
static bool whole_write(const tl_stmt *s, const tl_sym *b) {
  const tl_region *d = s->kind == S_COPY || s->kind == S_FILL ? s->dst : NULL;
  if (d && d->sym == b && !(s->src && s->src->sym == b) && !tl_expr_names(s->value, b)) {
    if (d->ndim != b->ndim)
      return false;
    for (int i = 0; i < d->ndim; i++)
      if ((d->lo[i] && !(d->lo[i]->kind == E_CONST && d->lo[i]->val.i == 0)) || d->ext[i] != b->dims[i])
        return false;
    return true;
  }
  if (s->kind == S_ASSIGN && !s->assign_op && s->lhs->kind == E_NAME && s->lhs->sym == b)
    return !tl_expr_names(s->value, b);
  return tl_writes_whole(s, b) && !tl_expr_names(s->body.items[0]->value, b);
}

/* Does statement s (or what it holds) touch b, other than as the C of a gemm? */
static tl_walk_act touch_not_c(tl_stmt *s, void *user) {
  const tl_sym *b = user;
  if (s->kind == S_GEMM)
    return s->A == b || s->B == b ? TL_WALK_STOP : TL_WALK_GO;
  if ((s->src && s->src->sym == b) || (s->dst && s->dst->sym == b) || tl_expr_names(s->value, b) || tl_expr_names(s->lhs, b) ||
      tl_expr_names(s->start, b) || tl_expr_names(s->extent, b))
    return TL_WALK_STOP;
  return TL_WALK_GO;
}

static tl_walk_act is_gemm_c(tl_stmt *s, void *user) {
  return s->kind == S_GEMM && s->C == user ? TL_WALK_STOP : TL_WALK_GO;
}

/* Why wspec candidate `loop` (statement `at` of the kernel's body) cannot run its iterations in
 * loop->slices_req slices (see the header), or NULL, with loop->slice_buf set. */
static const char *slices_why(tl_program *prog, tl_stmt *loop, int at) {
  tl_arena *a = prog->arena;
  int64_t T = prog->threads[0] * prog->threads[1] * prog->threads[2], G = loop->slices_req;
  if (loop->wg_lag || loop->ov_gemm)
    return "a gemm or the tail of its body runs one iteration late (each slice's next iteration is another's)";
  for (int i = 0; i < loop->body.n; i++)
    if (loop->body.items[i]->kind == S_GEMM && loop->body.items[i]->a_regs && loop->body.items[i]->wg_pending)
      return "a gemm of its body keeps A in registers for its group in flight (two sets, by the iteration's parity)";
  /* each slice keeps stages of its own (iteration c's stage c % S is slice c % G's only where G divides S):
   * an mbarrier's phase is told by its parity, so a slice may wait for a stage's next phase only once it has
   * seen the last one complete, as it has where it read that stage itself (measured on an H100: 3 slices
   * sharing 4 or 5 stages read stages whose copies had not landed and failed the launch); and a stage is
   * freed lag iterations of its slice on, so each slice needs lag + 1 of them */
  int64_t lag = lag_of(loop);
  if (loop->pipe_stages % G || loop->pipe_stages / G < lag + 1)
    return tl_arena_printf(a, "its %lld stages (num_stages%s) are not a multiple of its %lld slices, at least "
                           "%lld: each slice takes stages of its own%s", (long long)loop->pipe_stages,
                           lag ? " + 1, for its gemm's group in flight" : "", (long long)G, (long long)((lag + 1) * G),
                           lag ? ", two or more with a group in flight" : "");
  if (loop->mcast || prog->cl_size > 1)
    return "the kernel runs in thread-block clusters";
  for (int i = 0; i < loop->body.n; i++)
    if (loop->body.items[i]->reg_prefetch)
      return "a copy of its body is prefetched through registers (the threads of one slice)";
  SL q = {.prog = prog, .loop = loop};
  for (int i = 0; i < loop->body.n && !q.why; i++)
    tl_walk_stmt(loop->body.items[i], &(tl_walker){.pre = sl_stmt, .expr = sl_expr}, &q);
  if (q.why)
    return q.why;
  /* each slice's own copies: a gemm's sum, split among them and added after the loop, or what an iteration
   * writes whole before it reads it */
  int64_t words = 0;
  int nsums = 0;
  for (int k = 0; k < q.nsyms; k++) {
    const tl_sym *b = q.syms[k];
    bool declared = false;
    for (int v = 0; v < q.nvars; v++)
      declared |= q.vars[v] == b;
    if (declared)
      continue;
    if (tl_walk(&loop->body, &(tl_walker){.pre = is_gemm_c}, (void *)b) == TL_WALK_STOP) {
      if (tl_walk(&loop->body, &(tl_walker){.pre = touch_not_c}, (void *)b) == TL_WALK_STOP)
        return tl_arena_printf(a, "its body uses %s otherwise than as the sum of its gemms", b->name);
      if (++nsums > TL_MAX_SLICE_SUMS)
        return tl_arena_printf(a, "its gemms sum into more than %d fragments", TL_MAX_SLICE_SUMS);
      words += b->per_thread;
      continue;
    }
    int first = 0;
    while (first < loop->body.n && !tl_stmt_touches(loop->body.items[first], b))
      first++;
    if (first == loop->body.n || !whole_write(loop->body.items[first], b))
      return tl_arena_printf(a, "an iteration reads %s before it writes all of it (each slice would read its own)",
                             b->name);
    for (int i = at + 1; i < prog->body.n; i++) /* after the loop, slice 0's holds its own last iteration's */
      if (tl_stmt_touches(prog->body.items[i], b))
        return tl_arena_printf(a, "a statement after it reads %s, which each slice writes for its own iterations",
                               b->name);
  }
  if (!words)
    return "no gemm of its body sums into a fragment across iterations";
  /* the lets before it: every slice evaluates them, the statements between only slice 0 runs */
  Q lq = {.prog = prog, .loop = loop, .before = (const tl_stmt *const *)prog->body.items};
  for (int i = 0; i < at; i++) {
    lq.nbefore = i;
    if (prog->body.items[i]->kind == S_LET && !producer_expr(&lq, prog->body.items[i]->value))
      return tl_arena_printf(a, "let %s before the loop reads more than constants, scalars, block variables and "
                             "lets of them (every slice evaluates it, and only slice 0 runs what comes before)",
                             prog->body.items[i]->sym->name);
  }
  /* the sums of slices 1.. G - 1 pass through the memory of the largest staged buffer once the loop is done */
  int64_t need = (G - 1) * T * words * 4, most = 0;
  loop->slice_buf = NULL;
  for (int i = 0; i < loop->body.n; i++) {
    const tl_stmt *c = loop->body.items[i];
    if (!c->prefetch)
      continue;
    const tl_sym *b = c->dst->sym;
    int64_t n = 1;
    for (int d = 0; d < b->ndim; d++)
      n *= b->dims[d];
    n = (int64_t)tl_dtype_bytes(b->dtype, (uint64_t)n) * (b->stages > 1 ? b->stages : 1);
    if (n > most && !b->view_of && !b->viewed) {
      most = n;
      loop->slice_buf = b;
    }
  }
  if (need > most)
    return tl_arena_printf(a, "the slices' sums take %lld bytes of shared memory after the loop, and its largest "
                           "staged buffer holds %lld", (long long)need, (long long)most);
  return NULL;
}

static tl_walk_act mark_nested(tl_stmt *s, void *user) {
  Q *q = user;
  bool top = false;
  for (int i = 0; i < q->prog->body.n; i++)
    top |= q->prog->body.items[i] == s;
  if (s->kind == S_LOOP && s->tma && !top)
    s->wspec_why = why_not(q->prog, s, -1, 1, 1);
  return TL_WALK_GO;
}

void tl_pass_wspec(tl_program *prog, int64_t smem_limit, const tl_codegen *cg) {
  tl_walk(&prog->body, &(tl_walker){.pre = reset}, NULL);
  prog->wspec_threads = 0;
  prog->wspec_regs[0] = prog->wspec_regs[1] = 0;
  prog->wspec_blocks = 0;
  prog->wspec_tight = false;
  prog->persistent = false;
  prog->slices = 1;
  if (!cg->wgmma || !cg->tma || !prog->nmbar)
    return;
  int ntma = 0;
  tl_walk(&prog->body, &(tl_walker){.pre = count_tma}, &ntma);
  tl_stmt *chosen = NULL;
  for (int i = 0; i < prog->body.n; i++) {
    tl_stmt *s = prog->body.items[i];
    if (s->kind != S_LOOP || !s->tma)
      continue;
    int G = (int)s->slices_req;
    s->wspec_why = why_not(prog, s, i, ntma, 1);
    if (G > 1 && s->wspec_why)
      s->slices_why = "the loop is not warp-specialized";
    else if (G > 1 && !(s->slices_why = slices_why(prog, s, i))) {
      const char *why = why_not(prog, s, i, ntma, G); /* the registers and threads of every slice */
      if (why) {
        s->slices_why = tl_arena_printf(prog->arena, "in %d slices, %s", G, why);
        why_not(prog, s, i, ntma, 1); /* the budget without them again */
      }
    }
    s->slices = s->slices_why ? 1 : G;
    if (!s->wspec_why)
      chosen = s;
  }
  Q q = {.prog = prog};
  tl_walk(&prog->body, &(tl_walker){.pre = mark_nested}, &q);
  for (int i = 0; i < prog->body.n; i++) /* a loop not chosen runs in no slices */
    if (prog->body.items[i] != chosen && prog->body.items[i]->kind == S_LOOP && prog->body.items[i]->slices > 1) {
      prog->body.items[i]->slices = 1;
      prog->body.items[i]->slices_why = "the loop has no producer warpgroup";
    }
  if (!chosen)
    return;
  prog->slices = chosen->slices;
  /* the lets the producer evaluates too (those its copies may use) */
  Q lq = {.prog = prog, .loop = chosen, .before = (const tl_stmt *const *)prog->body.items};
  for (int i = 0; prog->body.items[i] != chosen; i++) {
    tl_stmt *l = prog->body.items[i];
    lq.nbefore = i;
    l->wspec = l->kind == S_LET && producer_expr(&lq, l->value);
  }
  int nmbar = prog->nmbar;
  int64_t before = prog->smem_bytes;
  chosen->wspec = true;
  chosen->wspec_empty = nmbar;
  chosen->wspec_lag = chosen->ov_gemm ? 1 : lag_of(chosen); /* a late gemm reads its stage one iteration on */
  for (int j = 0; j < chosen->body.n; j++) {
    tl_stmt *b = chosen->body.items[j];
    S st = {.loop = chosen};
    if (!b->prefetch && !(b->kind == S_GEMM && b->use_wgmma))
      tl_walk_stmt(b, &(tl_walker){.pre = stage_stmt, .expr = stage_expr}, &st);
    chosen->wspec_threads |= st.hit;
  }
  prog->nmbar = nmbar + (int)chosen->pipe_stages;
  prog->wspec_threads = WSPEC_THREADS;
  tl_pass_smem(prog);
  if (prog->smem_bytes > smem_limit && prog->smem_bytes > before) {
    chosen->wspec = false;
    chosen->wspec_why = "no room for its mbarriers in shared memory";
    chosen->slices = 1;
    prog->slices = 1;
    prog->nmbar = nmbar;
    prog->wspec_threads = 0;
    prog->wspec_regs[0] = prog->wspec_regs[1] = 0;
    prog->wspec_tight = false;
    tl_pass_smem(prog);
    return;
  }
  /* a cluster's blocks start together; a persistent block is no cluster's (pass_cluster.c): measured on an
   * H100, clusters of 2 walking the tiles ran at half the speed of the kernel without clusters (326 against
   * 684 TFLOP/s, 4096^3), and so did clusters of one block a tile (328 against 671: bench/README.md), so the
   * cause was the clustered kernel's, not the tile walk's: its stages freed by release.cluster arrivals
   * (emit_cuda.c's release_stage; with release.cta ones, 637.5 against 666.9); the simpler schedule stays */
  prog->persistent = !prog->no_persistent && prog->cl_size == 1 && prog->slices == 1; /* slices: one tile a block */
  pre_copies(prog, chosen, smem_limit);
  chosen->pingpong_why = pingpong_why(prog, chosen);
  chosen->pingpong = !chosen->pingpong_why;
}
