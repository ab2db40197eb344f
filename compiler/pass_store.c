/*
 * pass_store.c - a tile's epilogue through shared memory and TMA stores.
 *
 * Needs: a program after pass_wspec (its shared memory laid out, tensor
 * maps and mbarriers final), for a target of tl_codegen with tma (sm_90
 * and later).  Produces: tma_store on the copies that ask ("tma": true)
 * and qualify, each with store_map, the tensor map of one 128-byte panel
 * of its tile (128-byte swizzle, added to tl_program.tmaps);
 * tl_program.epi_bytes, the staging buffer they share (epi_buffers
 * panels of the largest tile, two where they fit in shared memory, else
 * one: rows x 128 bytes each; tl_pass_smem puts it after the
 * mbarriers, so it never shares memory with a pipeline's stages, also in
 * a persistent kernel whose producer fills the next tile's stages while
 * the program's threads store); store_why on the other copies that ask,
 * saying why not (`--emit ir` prints it); store_defer on a last store
 * that qualifies (below), defer_why on one that does not.  Keeps:
 * everything else;
 * results never change (each panel's elements are the tile's, converted as
 * the copy converts them; a bulk tensor store writes only the elements
 * inside the tensor, which is the "writes outside are dropped" rule of
 * proto/tile-ir-v1.md 5.5).
 *
 * How the kernel runs (emit_cuda.c's emit_tma_store): for each panel of
 * 128 bytes of columns, every thread writes its elements of the panel
 * into the staging buffer in the 128-byte swizzle (conflict-free for the
 * mma layout), a proxy fence and a block barrier make them the async
 * proxy's, and one thread stores the panel with a bulk tensor copy.  With
 * one panel staged, the next panel waits until that copy has read the
 * buffer, and the statement ends when the last has completed.  With two,
 * panels alternate between them (a count of the kernel's panels picks the
 * half), each filled once the store two panels back has read it, so that
 * a panel is written while the one before is stored; the statement ends
 * when its stores are complete, except where it is the last of the
 * kernel's body (store_async): its threads go on (the next tile of a
 * persistent kernel) while the stores run, and the kernel waits for them
 * before it exits.  Nothing after it in the tile touches the tensor, and
 * another tile is another block of the grid.
 *
 * Deferred (store_defer): a store_async copy of a persistent kernel with
 * a warp-specialized loop (neither ping-pong nor a late gemm; the last
 * statement comes after it) that stores float32 accumulators as float16
 * or bfloat16 only converts them, a cvt a pair, into registers (tl_pend)
 * with the tile's coordinates; the next tile's loop stages and stores
 * panel p once its iteration p has issued its gemm (the tensor cores busy
 * with the next tile while the panels are written, where the plain
 * epilogue left them idle), the panels past that loop's last iteration
 * after it (so that the statements after the loop see none pending), and
 * the last tile's after the walk of the tiles.  Panels of every store
 * keep their order through the staging halves (tl_epi), each waiting, as
 * before, until the store two panels back has read its half.  The pairs live beside the
 * fragments through the next loop, so the fragments, the pairs and
 * DEFER_SPARE registers must fit in the program's threads' setmaxnreg
 * budget; otherwise, or where a condition fails, defer_why says why and
 * the epilogue stays as above.
 *
 * A copy qualifies when:
 *   - it says "tma": true (off by default: not yet measured against the
 *     plain stores);
 *   - it is a statement of the kernel's body itself (every thread reaches
 *     it: the block barriers between panels);
 *   - its source is a register fragment of the mma layout (a gemm's
 *     accumulators), whole, and its destination a 2-D tensor of the same
 *     extents, elements of 1, 2 or 4 bytes, whose columns make whole
 *     panels of 128 bytes;
 *   - the fragment has at most 256 rows (a tensor map's box dimension);
 *   - the tensor's base is 16-byte aligned and its rows a constant number
 *     of 16-byte chunks (cuTensorMapEncodeTiled's pitch; the launcher
 *     checks again);
 *   - the kernel has fewer than TL_MAX_TMAPS tensor maps, and the staging
 *     buffer fits in the block's shared memory.
 */
#include <string.h>
#include "ir.h"
#include "pass.h"

static const char *why_not(tl_program *prog, const tl_stmt *s) {
  const tl_region *src = s->src, *dst = s->dst;
  const tl_sym *f = src->sym, *t = dst->sym;
  tl_arena *a = prog->arena;
  if (!(f->kind == SYM_BUFFER && f->scope == SCOPE_FRAGMENT && f->in_regs && f->reg_layout == TL_LAYOUT_MMA &&
        f->ndim == 2))
    return "its source is not a register fragment of a gemm's (mma) layout";
  if (t->kind != SYM_TENSOR || t->ndim != 2)
    return "its destination is not a 2-D tensor";
  for (int d = 0; d < 2; d++)
    if (src->ext[d] != f->dims[d] || dst->ext[d] != f->dims[d] ||
        (src->lo[d] && !(src->lo[d]->kind == E_CONST && src->lo[d]->val.i == 0)))
      return "it does not copy the whole fragment into a tile of its extents";
  int64_t es = (int64_t)tl_dtype_size(t->dtype);
  if (tl_dtype_is_packed(t->dtype) || (es != 1 && es != 2 && es != 4))
    return tl_arena_printf(a, "%s elements are not of 1, 2 or 4 bytes", tl_dtype_name(t->dtype));
  if (f->dims[1] * es % 128)
    return tl_arena_printf(a, "its rows of %lld bytes are not whole 128-byte panels", (long long)(f->dims[1] * es));
  if (f->dims[0] > 256)
    return tl_arena_printf(a, "its %lld rows are over the 256 of a tensor map's box", (long long)f->dims[0]);
  if (t->align < 16 || t->dims[1] < 0 || t->dims[1] * es % 16)
    return "the tensor's base is not 16-byte aligned or its rows are not a constant number of 16-byte chunks";
  return NULL;
}

/* Why store_async copy s (the last statement of the body) is not
 * store_defer, or NULL when it is: see the header. */
#define DEFER_SPARE 40 /* registers a thread needs besides its fragments (pass_wspec.c's TL_WSPEC_SPARE) */
#define DEFER_SM_REGS 65536 /* 32-bit registers per SM (sm_90: pass_wspec.c's SM_REGS) */
static const char *defer_why(const tl_program *prog, const tl_stmt *s) {
  const tl_sym *f = s->src->sym, *t = s->dst->sym;
  const tl_stmt *loop = tl_wspec_loop(prog);
  if (!prog->persistent)
    return "the kernel is not persistent (no next tile whose gemms it could run under)";
  if (!loop)
    return "the kernel has no warp-specialized loop";
  if (loop->pingpong || loop->wg_lag || loop->ov_gemm)
    return "its loop takes ping-pong turns or issues a gemm late";
  if (f->dtype != TL_FLOAT32 || (t->dtype != TL_FLOAT16 && t->dtype != TL_BFLOAT16))
    return "it does not store float32 accumulators as float16 or bfloat16 (one conversion a pair)";
  /* the program's threads' registers: setmaxnreg's, else the launch's (pass_wspec.c's R) */
  int64_t T = prog->threads[0] * prog->threads[1] * prog->threads[2], regs = prog->wspec_regs[1];
  if (!regs && prog->wspec_blocks > 0)
    regs = DEFER_SM_REGS / (prog->wspec_blocks * (T + prog->wspec_threads)) / 8 * 8;
  if (regs > 255)
    regs = 255;
  if (tl_reg_words(prog) + f->per_thread / 2 + DEFER_SPARE > regs)
    return "its converted pairs would not fit in registers beside the fragments";
  return NULL;
}

static tl_walk_act reset(tl_stmt *s, void *user) {
  (void)user;
  s->tma_store = false;
  s->store_async = false;
  s->store_defer = false;
  s->defer_why = NULL;
  s->store_map = -1;
  s->store_why = NULL;
  return TL_WALK_GO;
}

void tl_pass_store(tl_program *prog, int64_t smem_limit, const tl_codegen *cg) {
  tl_walk(&prog->body, &(tl_walker){.pre = reset}, NULL);
  prog->epi_bytes = 0;
  prog->epi_buffers = 0;
  if (!cg->tma)
    return;
  int64_t bytes = 0, before = prog->smem_bytes;
  int ntmaps = prog->ntmaps;
  for (int i = 0; i < prog->body.n; i++) {
    tl_stmt *s = prog->body.items[i];
    if (s->kind != S_COPY || !s->store_asked)
      continue;
    s->store_why = why_not(prog, s);
    if (s->store_why)
      continue;
    if (prog->ntmaps == TL_MAX_TMAPS) {
      s->store_why = tl_arena_printf(prog->arena, "the kernel has %d tensor maps already", TL_MAX_TMAPS);
      continue;
    }
    const tl_sym *f = s->src->sym, *t = s->dst->sym;
    tl_tmap *m = &prog->tmaps[prog->ntmaps];
    memset(m, 0, sizeof *m);
    m->tensor = t;
    m->rank = 2;
    m->box[0] = 128 / (int64_t)tl_dtype_size(t->dtype);
    m->box[1] = f->dims[0];
    m->swizzle = 128;
    s->store_map = prog->ntmaps++;
    s->tma_store = true;
    if (f->dims[0] * 128 > bytes)
      bytes = f->dims[0] * 128;
  }
  if (!bytes)
    return;
  /* two panels where they fit, else one */
  prog->epi_buffers = 2;
  prog->epi_bytes = 2 * bytes;
  tl_pass_smem(prog);
  if (prog->smem_bytes > smem_limit && prog->smem_bytes > before) {
    prog->epi_buffers = 1;
    prog->epi_bytes = bytes;
    tl_pass_smem(prog);
  }
  tl_stmt *last = prog->body.items[prog->body.n - 1];
  last->store_async = last->tma_store && prog->epi_buffers == 2;
  if (last->store_async) {
    last->defer_why = defer_why(prog, last);
    last->store_defer = !last->defer_why;
  }
  if (prog->smem_bytes > smem_limit && prog->smem_bytes > before) {
    for (int i = 0; i < prog->body.n; i++)
      if (prog->body.items[i]->tma_store) {
        prog->body.items[i]->tma_store = false;
        prog->body.items[i]->store_why = "no room for its staging buffer in shared memory";
      }
    prog->ntmaps = ntmaps;
    prog->epi_bytes = 0;
    prog->epi_buffers = 0;
    last->store_async = last->store_defer = false;
    last->defer_why = NULL;
    tl_pass_smem(prog);
  }
}
