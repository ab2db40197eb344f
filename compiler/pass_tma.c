/*
 * pass_tma.c - which copies run on the Tensor Memory Accelerator.
 *
 * Needs: a placed and pipelined program (pass_place.c, pass_pipeline.c),
 * for a target of tl_codegen with tma (sm_90 and later, CUDA).  Produces:
 * tma on the prefetched cp.async copies of `pipelined` loops that one bulk
 * tensor copy per 128-byte panel can do (cp.async.bulk.tensor, issued by
 * one thread, completing on a per-stage mbarrier: emit_cuda.c's
 * emit_pipelined); tma on their loops, with `mbar`, the first of the
 * loop's pipe_stages mbarriers; the tensor maps the kernel takes
 * (tl_program.tmaps, one per tensor, box and swizzle; a copy's tma_map);
 * tma_dst on the buffers they write; tma_why on every other copy from
 * global into shared memory, saying why not (`--emit ir` prints it); then
 * the shared-memory layout again with the mbarriers.  Keeps: everything
 * else; results never change (a bulk tensor copy fills the elements
 * outside the tensor with zeros, which is the "reads as zero" rule of
 * proto/tile-ir-v1.md 5.5, and writes the buffer's own layout).
 *
 * A copy qualifies when:
 *   - it is a prefetched copy of a pipelined loop that does not say
 *     "tma": false;
 *   - its elements are whole bytes, or packed sub-byte elements (tl_tmap's
 *     packed: the map moves their bytes, its innermost dimension and box
 *     counted in bytes) in a buffer without swizzle, in rows of whole bytes;
 *   - the tensor has at most 5 dimensions and the copy fills its whole
 *     buffer (its extents, without the 1s, are the buffer's dimensions);
 *   - each box dimension is at most 256 elements (the hardware's limit);
 *   - the buffer's layout is one a tensor map writes: row-major
 *     (no swizzle), or the 128-byte swizzle of 128-byte rows of 16- or 8-bit
 *     elements (tl_swz with 8 chunks per row, and a wgmma operand's panels
 *     of 128 bytes of columns, one copy per panel), or a wgmma operand's
 *     rows of 32 or 64 bytes (tl_swz's key then XORs the chunk index below
 *     the row pair or quad, the 32- or 64-byte swizzle), each stage a whole
 *     number of swizzle atoms (8 rows of the swizzle's span: 1024, 512 or
 *     256 bytes) or, unswizzled, of 128 bytes (a bulk copy's destination
 *     alignment);
 *   - (always so after cp.async's own conditions) the tensor's base is
 *     16-byte aligned and its innermost dimension a constant number of
 *     16-byte chunks, so every row pitch is a multiple of 16 bytes, as
 *     cuTensorMapEncodeTiled demands, whatever the dynamic dimensions are.
 *     The launcher checks the pitches it computes again (client/meta.c).
 * Other copies keep cp.async.  The ldmatrix swizzles of rows wider or
 * narrower than 128 bytes (outside wgmma operands) have no tensor-map equivalent: such copies stay on
 * cp.async (pass_place.c would have to store them as panels, like wgmma's).
 */
#include <string.h>
#include "ir.h"
#include "pass.h"

typedef struct {
  tl_program *prog;
  const tl_stmt *loop; /* the pipelined loop being walked, or NULL */
  int nmbar;
} P;

/* The tensor map of s, or why there is none (a static message or one in
 * the program's arena).  Fills *m. */
static const char *map_why(tl_program *prog, const tl_stmt *s, tl_tmap *m);

static const char *why_not(P *p, const tl_stmt *s, tl_tmap *m) {
  if (!p->loop || !s->prefetch)
    return "not a copy that a pipelined loop prefetches";
  if (p->loop->no_tma)
    return "its pipelined loop says \"tma\": false";
  /* a packed tile alone on TMA beside cp.async copies gained nothing and cost registers: H100, W4A16 M = 1
   * (gemm_w4a16_splitk) 0.0362 ms against 0.0320 with all on cp.async, 64 bytes a thread spilled */
  for (int j = 0; tl_dtype_is_packed(s->dst->sym->dtype) && j < p->loop->body.n; j++) {
    const tl_stmt *o = p->loop->body.items[j];
    tl_tmap om;
    if (o != s && o->kind == S_COPY && o->async_copy && o->prefetch && !tl_dtype_is_packed(o->dst->sym->dtype) &&
        map_why(p->prog, o, &om))
      return tl_arena_printf(p->prog->arena, "packed %s elements take TMA only where every copy the loop prefetches "
                             "does (the copy into %s keeps cp.async)", tl_dtype_name(s->dst->sym->dtype),
                             o->dst->sym->name);
  }
  return map_why(p->prog, s, m);
}

/* The tensor map of copy s, or why there is none (the conditions of the header but the loop's). */
static const char *map_why(tl_program *prog, const tl_stmt *s, tl_tmap *m) {
  const tl_region *src = s->src, *dst = s->dst;
  const tl_sym *t = src->sym, *b = dst->sym;
  tl_arena *a = prog->arena;
  if (t->ndim > TL_TMAP_RANK_MAX)
    return "the tensor has more than 5 dimensions";
  if (t->view_of) /* a tensor map is made at launch from a parameter's pointer and shape */
    return "the tensor is a view";
  /* packed sub-byte elements move as the bytes that hold them (a map of
   * uint8 whose innermost dimension and box count bytes): the tensor's
   * innermost dimension is a constant number of 16-byte chunks and the box
   * starts on one (pass_pipeline.c's can_async), so both are whole bytes,
   * and the bytes keep their elements' order (proto/tile-ir-v1.md 7.1.2) */
  int per = tl_dtype_is_packed(b->dtype) ? 8 / tl_dtype_bits(b->dtype) : 1;
  if (per > 1 && (b->wgmma_op || b->swizzled))
    return tl_arena_printf(a, "the buffer holds packed %s elements in a swizzled layout", tl_dtype_name(b->dtype));
  if (per > 1 && (t->shape[t->ndim - 1]->kind != E_CONST || t->shape[t->ndim - 1]->val.i % per ||
                  src->ext[src->ndim - 1] % per))
    return tl_arena_printf(a, "the tensor's rows or the box's of packed %s elements are not whole bytes",
                           tl_dtype_name(b->dtype));
  if (b->layout && !b->layout->swizzle)
    return "the buffer has a layout map";
  int64_t se[TL_MAX_DIMS], n = 0;
  for (int d = 0; d < src->ndim; d++)
    if (src->ext[d] != 1)
      se[n++] = src->ext[d];
  int64_t bn = 0;
  for (int d = 0; d < b->ndim; d++) {
    if (dst->ext[d] != b->dims[d] || (dst->lo[d] && !(dst->lo[d]->kind == E_CONST && dst->lo[d]->val.i == 0)))
      return "it fills part of its buffer";
    if (b->dims[d] != 1 && (bn >= n || se[bn++] != b->dims[d]))
      return "the tensor's box and the buffer differ in shape";
  }
  if (bn != n)
    return "the tensor's box and the buffer differ in shape";
  memset(m, 0, sizeof *m);
  m->tensor = t;
  m->rank = t->ndim;
  for (int d = 0; d < t->ndim; d++)
    m->box[t->ndim - 1 - d] = src->ext[d];
  m->packed = per;
  m->box[0] /= per;
  int64_t es = (int64_t)tl_dtype_size(b->dtype), stage_bytes = 1;
  for (int d = 0; d < b->ndim; d++)
    stage_bytes *= b->dims[d];
  stage_bytes = (int64_t)tl_dtype_bytes(b->dtype, (uint64_t)stage_bytes);
  if (b->wgmma_op || b->swizzled) {
    /* 2-D, 16- or 8-bit: tl_swz with 8 chunks of 16 bytes per row (one row
     * per swizzle key; an 8-bit buffer's byte pairs counted as 16-bit
     * elements) is the 128-byte swizzle; a wgmma operand is stored in
     * panels of 128 bytes of columns, each in that swizzle */
    int64_t cols = b->dims[b->ndim - 1], pc = 128 / es; /* the columns of 128 bytes */
    int64_t row = cols * es; /* a wgmma operand's rows of 32 or 64 bytes: tl_swz's key is row / (8 / chunks)
                                over the chunks of a row, the 32- or 64-byte swizzle of a tensor map */
    bool narrow = b->wgmma_op && b->ndim == 2 && es <= 2 && (row == 32 || row == 64);
    if (!narrow && (b->ndim != 2 || es > 2 || (b->wgmma_op ? cols % pc : cols != pc)))
      return tl_arena_printf(a, "the buffer's swizzle (rows of %lld bytes) is not one a tensor map writes",
                             (long long)(cols * es));
    m->swizzle = narrow ? (int)row : 128;
    m->box[0] = narrow ? cols : pc; /* emit_cuda.c copies the cols / pc panels one by one */
    if (stage_bytes % (8 * m->swizzle))
      return tl_arena_printf(a, "a stage of the buffer is not a whole number of %d-byte swizzle atoms",
                             8 * m->swizzle);
  } else if (stage_bytes % 128) {
    return "a stage of the buffer is not a whole number of 128 bytes";
  }
  for (int d = 0; d < m->rank; d++)
    if (m->box[d] > 256)
      return tl_arena_printf(a, "a box dimension of %lld elements is over the 256 a tensor map allows",
                             (long long)m->box[d]);
  /* the box's rows and the tensor's row pitches are multiples of 16 bytes
   * (cuTensorMapEncodeTiled's demand) since cp.async already needed the
   * tensor's innermost dimension to be a constant number of 16-byte chunks */
  return NULL;
}

/* The index of map m in the program's tensor maps, added when new, or -1
 * when there are TL_MAX_TMAPS already. */
static int map_index(tl_program *prog, const tl_tmap *m) {
  for (int i = 0; i < prog->ntmaps; i++) {
    const tl_tmap *o = &prog->tmaps[i];
    if (o->tensor == m->tensor && o->swizzle == m->swizzle && !memcmp(o->box, m->box, sizeof o->box))
      return i;
  }
  if (prog->ntmaps == TL_MAX_TMAPS)
    return -1;
  prog->tmaps[prog->ntmaps] = *m;
  return prog->ntmaps++;
}

const char *tl_tma_map_of(tl_program *prog, const tl_stmt *s, int *map) {
  tl_tmap m;
  const char *why = map_why(prog, s, &m);
  if (why)
    return why;
  if ((*map = map_index(prog, &m)) < 0)
    return tl_arena_printf(prog->arena, "the kernel has %d tensor maps already", TL_MAX_TMAPS);
  return NULL;
}

static tl_walk_act pre(tl_stmt *s, void *user) {
  P *p = user;
  if (s->kind == S_LOOP && s->pipe)
    p->loop = s;
  if (s->kind != S_COPY || !s->async_copy)
    return TL_WALK_GO;
  tl_tmap m;
  s->tma_why = why_not(p, s, &m);
  if (s->tma_why)
    return TL_WALK_GO;
  s->tma_map = map_index(p->prog, &m);
  if (s->tma_map < 0) {
    s->tma_why = tl_arena_printf(p->prog->arena, "the kernel has %d tensor maps already", TL_MAX_TMAPS);
    return TL_WALK_GO;
  }
  s->tma = true;
  s->dst->sym->tma_dst = m.swizzle != 0;
  tl_stmt *loop = (tl_stmt *)p->loop;
  if (!loop->tma) {
    loop->tma = true;
    loop->mbar = p->nmbar;
    p->nmbar += (int)loop->pipe_stages;
  }
  return TL_WALK_GO;
}

static tl_walk_act post(tl_stmt *s, void *user) {
  P *p = user;
  if (s == p->loop)
    p->loop = NULL;
  return TL_WALK_GO;
}

static tl_walk_act reset(tl_stmt *s, void *user) {
  (void)user;
  s->tma = false;
  s->tma_map = -1;
  s->tma_why = NULL;
  s->mbar = 0;
  if (s->kind == S_COPY && s->dst->sym->kind == SYM_BUFFER)
    s->dst->sym->tma_dst = false;
  return TL_WALK_GO;
}

static void clear(tl_program *prog) {
  tl_walk(&prog->body, &(tl_walker){.pre = reset}, NULL);
  prog->ntmaps = 0;
  prog->nmbar = 0;
}

static tl_walk_act no_room(tl_stmt *s, void *user) {
  (void)user;
  if (s->kind == S_COPY && s->async_copy && !s->tma_why)
    s->tma_why = "no room for its mbarriers in shared memory";
  return TL_WALK_GO;
}

void tl_pass_tma(tl_program *prog, int64_t smem_limit, const tl_codegen *cg) {
  P pp = {.prog = prog};
  clear(prog);
  if (cg->tma) {
    prog->tmaps = tl_arena_alloc(prog->arena, sizeof *prog->tmaps * TL_MAX_TMAPS);
    tl_walk(&prog->body, &(tl_walker){.pre = pre, .post = post}, &pp);
    prog->nmbar = pp.nmbar;
  }
  tl_pass_smem(prog);
  int64_t before = prog->smem_bytes;
  if (prog->nmbar && before > smem_limit) { /* the mbarriers and the 1024-byte alignment did not fit */
    clear(prog);
    tl_pass_smem(prog);
    if (prog->smem_bytes < before)
      tl_walk(&prog->body, &(tl_walker){.pre = no_room}, NULL);
  }
}
