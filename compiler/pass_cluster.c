/*
 * pass_cluster.c - thread-block clusters, and the bulk tensor copies
 * multicast across them.
 *
 * Needs: a program after pass_tma (its tma loops and copies, tensor maps),
 * for a target of tl_codegen with tma (sm_90 and later: clusters too).
 * Produces: tl_program.cl, cl_axis and cl_size, the cluster shape the
 * kernel is launched with: the kernel's "cluster", or else the "cluster"
 * of the one tma loop that asks for one and qualifies (below); mcast on
 * that loop and on those of its bulk tensor copies that every block of a
 * cluster makes alike (the same box of the same tensor: their sources use
 * no block variable of the cluster's axis), each with a tensor map of the
 * part a block copies (its box's outermost dimension over 1, divided by
 * cl_size; tl_program.tmaps rebuilt); cluster_why on the other tma loops
 * that ask, or that a kernel's cluster could serve, and on the other tma
 * copies of a multicast loop, saying why not (`--emit ir` prints it).
 * Keeps: everything else; results never change (every block's stage gets
 * the same bytes its own copy would have brought: the block of rank r
 * copies part r of the box into the stage of every block of the cluster,
 * at the part's offset, and each block's mbarrier expects the whole
 * stage's bytes as before).
 *
 * How the kernel runs (emit_cuda.c): `__cluster_dims__` fixes the shape,
 * so a plain launch applies it (proto/kernel-meta.md, launch.cluster); the
 * blocks of a cluster get block variables that differ only on the
 * cluster's axis (emit_cuda.c's block_vars orders clusters, not blocks,
 * where the kernel rasterizes); the mbarriers are made ready in every
 * block before any copy (a cluster barrier after their init), and no block
 * exits while another may still write to it (a cluster barrier at the
 * end).  A stage is overwritten only when every block of the cluster is
 * done with it: without a producer warpgroup, each iteration's block
 * barrier becomes a cluster barrier (pass_pipeline.c's argument, over the
 * cluster's threads); with one (pass_wspec.c), every consumer warp frees
 * the stage in every block of the cluster (a remote mbarrier arrival), so
 * a stage's "free" mbarrier expects cl_size times the arrivals.
 *
 * A loop's "cluster" is used when:
 *   - the target has clusters and the Tensor Memory Accelerator, and the
 *     kernel gives no "cluster" of its own (then the kernel's is the one:
 *     a loop may only repeat it, or say [1] to keep its copies unicast);
 *   - it is the only tma loop that asks, a statement of the kernel's body
 *     itself (every block of a cluster runs it, the same number of times);
 *   - one axis of the shape is over 1, at most TL_CLUSTER_MAX blocks, and
 *     the grid's extent on that axis is a constant multiple of it (whole
 *     clusters: no idle blocks are started);
 *   - its extent and start use no block variable of that axis;
 *   - at least one of its copies qualifies: its source uses no block
 *     variable of that axis (directly or through lets), and the box's
 *     outermost dimension over 1 is the buffer's first, a multiple of the
 *     cluster's size, each part a whole number of swizzle atoms (8 rows of
 *     the swizzle's span) or, unswizzled, of 128 bytes (a bulk copy's
 *     destination alignment).
 * A kernel's own "cluster" is always launched (check.c checks it against
 * the grid); its tma loops at the kernel's top level multicast where the
 * same rules hold, except in a kernel with a cluster_reduce (emit_cuda.c
 * brackets that with cluster barriers of its own; none of its copies is
 * multicast).
 */
#include <string.h>
#include "ir.h"
#include "pass.h"

#define TL_CLUSTER_MAX 8 /* blocks per cluster that every sm_90 launch allows (16 needs an opt-in) */

/* Does x use block variable bv, directly or through lets? */
static bool uses(const tl_expr *x, const tl_sym *bv) {
  if (!x)
    return false;
  if (x->sym == bv)
    return true;
  if (x->sym && x->sym->kind == SYM_LET && uses(x->sym->init, bv))
    return true;
  for (int i = 0; i < x->nargs; i++)
    if (uses(x->args[i], bv))
      return true;
  return false;
}

/* The tensor map of the part of tma copy s that one block of a cluster of
 * n copies, or why there is none (static text or the program's arena).
 * *d0 is the tensor dimension split. */
static const char *part_map(tl_program *prog, const tl_stmt *s, int64_t n, tl_tmap *m, int *d0) {
  const tl_region *src = s->src;
  const tl_sym *b = s->dst->sym;
  *m = prog->tmaps[s->tma_map];
  int d = 0;
  while (d < src->ndim && src->ext[d] == 1)
    d++;
  int bd = 0;
  while (bd < b->ndim && b->dims[bd] == 1)
    bd++;
  if (d == src->ndim || bd == b->ndim || b->dims[bd] != src->ext[d])
    return "its box's outermost dimension is not its buffer's";
  if (m->packed > 1)
    return "its elements are packed sub-byte ones (a part's bytes are not counted for them)";
  int64_t rows = src->ext[d], es = (int64_t)tl_dtype_size(b->dtype);
  if (rows % n)
    return tl_arena_printf(prog->arena, "its box's %lld rows are not a multiple of the cluster's %lld blocks",
                           (long long)rows, (long long)n);
  int64_t row_bytes = es; /* one row of a panel (swizzled) or of the buffer */
  if (m->swizzle)
    row_bytes *= m->box[0];
  else
    for (int k = bd + 1; k < b->ndim; k++)
      row_bytes *= b->dims[k];
  int64_t part = rows / n, unit = m->swizzle ? 8 * m->swizzle : 128;
  if (m->swizzle && b->ndim - bd != 2)
    return "its swizzled buffer is not two-dimensional";
  if (part * row_bytes % unit)
    return tl_arena_printf(prog->arena, "a part of %lld rows is %lld bytes, not a whole number of %lld-byte %s",
                           (long long)part, (long long)(part * row_bytes), (long long)unit,
                           m->swizzle ? "swizzle atoms" : "blocks (a bulk copy's alignment)");
  m->box[m->rank - 1 - d] = part;
  *d0 = d;
  return NULL;
}

/* Why tma copy s of a loop multicast along block variable bv cannot be. */
static const char *copy_why(tl_program *prog, const tl_stmt *s, const tl_sym *bv, int64_t n) {
  for (int d = 0; d < s->src->ndim; d++)
    if (uses(s->src->lo[d], bv))
      return tl_arena_printf(prog->arena, "its source depends on %s, which differs between the blocks of a cluster",
                             bv->name);
  tl_tmap m;
  int d0;
  return part_map(prog, s, n, &m, &d0);
}

typedef struct {
  tl_program *prog;
  int nasked;            /* tma loops asking for a cluster of more than one block */
} P;

static tl_walk_act reset(tl_stmt *s, void *user) {
  P *p = user;
  s->mcast = false;
  s->cluster_why = NULL;
  if (s->kind == S_LOOP && s->tma && s->ncl_req) {
    int64_t n = 1;
    for (int i = 0; i < s->ncl_req; i++)
      n *= s->cl_req[i];
    p->nasked += n > 1;
  }
  return TL_WALK_GO;
}

static tl_walk_act refuse_asked(tl_stmt *s, void *user) {
  const char *why = user;
  if (s->kind == S_LOOP && s->ncl_req && !s->cluster_why && !s->mcast)
    s->cluster_why = why;
  return TL_WALK_GO;
}

/* The shape loop s asks for (its "cluster", 1s where not given) in sh. */
static void asked(const tl_stmt *s, int64_t sh[3]) {
  sh[0] = sh[1] = sh[2] = 1;
  for (int i = 0; i < s->ncl_req; i++)
    sh[i] = s->cl_req[i];
}

/* Why top-level tma loop s cannot multicast across clusters of shape sh
 * (own: sh is the loop's own request, not the kernel's), or NULL with
 * *axis and *n; marks its copies' mcast and cluster_why. */
static const char *loop_why(tl_program *prog, tl_stmt *s, const int64_t sh[3], bool own, int *axis, int64_t *n) {
  tl_arena *a = prog->arena;
  int ax = -1, over = 0;
  for (int i = 0; i < 3; i++)
    if (sh[i] > 1)
      ax = i, over++;
  if (over == 0)
    return "its cluster is one block";
  if (over > 1)
    return "multicast needs a cluster over one grid axis (the others 1)";
  if (sh[ax] > TL_CLUSTER_MAX)
    return tl_arena_printf(a, "a cluster of %lld blocks is over the %d every launch allows", (long long)sh[ax],
                           TL_CLUSTER_MAX);
  if (ax >= prog->ngrid || !prog->block_vars[ax])
    return tl_arena_printf(a, "the grid has no axis %d", ax);
  const tl_expr *g = prog->grid[ax];
  if (own && !(g && g->kind == E_CONST && g->val.i > 0 && g->val.i % sh[ax] == 0))
    return tl_arena_printf(a, "grid dimension %d is not a constant multiple of %lld (the launch could not form whole "
                           "clusters)", ax, (long long)sh[ax]);
  const tl_sym *bv = prog->block_vars[ax];
  if (uses(s->extent, bv) || uses(s->start, bv) || tl_expr_varying(s->extent) || tl_expr_varying(s->start))
    return tl_arena_printf(a, "the loop's extent or start depends on %s, which differs between the blocks of a "
                           "cluster", bv->name);
  int ok = 0;
  for (int j = 0; j < s->body.n; j++) {
    tl_stmt *c = s->body.items[j];
    if (!c->prefetch || !c->tma)
      continue;
    c->cluster_why = copy_why(prog, c, bv, sh[ax]);
    ok += !c->cluster_why;
  }
  if (!ok) {
    for (int j = 0; j < s->body.n; j++)
      s->body.items[j]->cluster_why = NULL;
    return "no copy it issues is the same in every block of a cluster (each copy's reason: tlc compile --dump cluster)";
  }
  for (int j = 0; j < s->body.n; j++) {
    tl_stmt *c = s->body.items[j];
    c->mcast = c->prefetch && c->tma && !c->cluster_why;
  }
  *axis = ax;
  *n = sh[ax];
  return NULL;
}

/* tl_program.tmaps again: each tma copy's map (a multicast copy's part
 * map), the same ones shared (tl_walker; user: the new list). */
typedef struct {
  tl_program *prog;
  tl_tmap *maps;
  int n;
} R;

static tl_walk_act remap(tl_stmt *s, void *user) {
  R *r = user;
  if (s->kind != S_COPY || !s->tma)
    return TL_WALK_GO;
  tl_tmap m = r->prog->tmaps[s->tma_map];
  int d0;
  if (s->mcast)
    (void)part_map(r->prog, s, r->prog->cl_size, &m, &d0);
  int i = 0;
  while (i < r->n && !(r->maps[i].tensor == m.tensor && r->maps[i].swizzle == m.swizzle &&
                       !memcmp(r->maps[i].box, m.box, sizeof m.box)))
    i++;
  if (i == r->n) /* never more than before: a part map replaces its copy's whole one */
    r->maps[r->n++] = m;
  s->tma_map = i;
  return TL_WALK_GO;
}

void tl_pass_cluster(tl_program *prog, const tl_codegen *cg) {
  P pp = {.prog = prog};
  tl_walk(&prog->body, &(tl_walker){.pre = reset}, &pp);
  prog->cl[0] = prog->cl[1] = prog->cl[2] = 1;
  prog->cl_axis = -1;
  prog->cl_size = 1;
  bool kernel = false;
  for (int i = 0; i < prog->ncluster; i++) {
    prog->cl[i] = prog->cluster[i];
    kernel |= prog->cluster[i] > 1;
  }
  if (!cg->tma || prog->cluster_reduce) {
    for (int i = 0; i < 3; i++)
      prog->cl_size *= prog->cl[i];
    tl_walk(&prog->body, &(tl_walker){.pre = refuse_asked},
            (void *)(cg->tma ? "the kernel has a cluster_reduce (its cluster barriers and a multicast's are not "
                               "combined)"
                             : "the target has no Tensor Memory Accelerator (sm_90 and later)"));
    return;
  }
  tl_stmt *chosen = NULL;
  int axis = -1;
  int64_t n = 1;
  for (int i = 0; i < prog->body.n && !chosen; i++) {
    tl_stmt *s = prog->body.items[i];
    if (s->kind == S_LOOP && !s->tma && s->ncl_req && s->loop_kind == LOOP_PIPELINED)
      s->cluster_why = "none of its copies is a bulk tensor copy (tlc compile --emit ir says why)";
    if (s->kind != S_LOOP || !s->tma)
      continue;
    int64_t sh[3];
    asked(s, sh);
    bool own = !kernel;
    if (kernel && s->ncl_req) {
      bool same = true, one = true;
      for (int k = 0; k < 3; k++) {
        same &= sh[k] == prog->cl[k];
        one &= sh[k] == 1;
      }
      if (one) {
        s->cluster_why = "its \"cluster\" is one block (its copies stay unicast)";
        continue;
      }
      if (!same) {
        s->cluster_why = "its \"cluster\" is not the kernel's";
        continue;
      }
    }
    if (kernel)
      memcpy(sh, prog->cl, sizeof sh);
    else if (!s->ncl_req)
      continue;
    if (own && pp.nasked > 1) {
      s->cluster_why = "more than one loop of the kernel asks for a cluster";
      continue;
    }
    s->cluster_why = loop_why(prog, s, sh, own, &axis, &n);
    if (!s->cluster_why) {
      chosen = s;
      if (own)
        memcpy(prog->cl, sh, sizeof sh);
    }
  }
  tl_walk(&prog->body, &(tl_walker){.pre = refuse_asked},
          (void *)"the loop is inside another statement (every block of a cluster must run it alike)");
  for (int i = 0; i < 3; i++)
    prog->cl_size *= prog->cl[i];
  if (!chosen)
    return;
  chosen->mcast = true;
  prog->cl_axis = axis;
  (void)n;
  R r = {.prog = prog, .maps = tl_arena_alloc(prog->arena, sizeof *prog->tmaps * TL_MAX_TMAPS)};
  tl_walk(&prog->body, &(tl_walker){.pre = remap}, &r);
  prog->tmaps = r.maps;
  prog->ntmaps = r.n;
}
