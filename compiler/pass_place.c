/*
 * pass_place.c - decides where every block-level buffer lives on the GPU.
 *
 * Needs: a checked program.  Produces: for each fragment, in_regs and
 * per_thread (registers, blocked layout: thread t holds the flat elements
 * [t * P, (t + 1) * P) of the buffer, P = ceil(size / threads)) or an
 * smem_offset; for each shared buffer its smem_offset; the program's
 * smem_bytes and the scratch area for cross-thread exchanges (reductions
 * and prefix sums over register fragments); for parallel loops, the
 * dequantizing ones (tl_stmt.vec_dequant) and the tensor read made 4
 * elements at a time (tl_stmt.vec_read: vec_read_of).  Keeps: everything
 * else.
 *
 * A fragment stays in registers only when every thread can work on its
 * own elements alone: it is never an operand A or B of gemm (every thread
 * reads all of those), every tile operator names it whole, every parallel
 * loop that touches it runs over exactly its shape and indexes it with the
 * loop variables in order (the "identity" access), and P is at most
 * TL_MAX_REG_ELEMS.  Every other fragment lives in shared memory, where any
 * thread may read any element; that is always correct, and slower.
 *
 * Then the matrix-core path: a gemm of float16/bfloat16 operands (or,
 * where the target has them, int8/uint8 into int32 and float8 into
 * float32) into a register fragment C whose shape tiles onto
 * the block's warps (by the gemm's policy) is marked use_mma, and C takes
 * the accumulator layout of mma.m16n8k16 (TL_LAYOUT_MMA; m16n8k32's int32
 * and float32 accumulators sit in the same places).  A gemm left on the
 * per-element path gets the reason in mma_why, which `--emit ir` prints.
 * Register fragments that share parallel loops or copies with C take the
 * same layout when they have its shape and are demoted to shared memory
 * otherwise (a loop's iterations must run on the thread that owns their
 * elements); a register fragment A that nothing else gives a layout takes
 * C's rows over K (adopt_a_layout), which keeps it in registers for the
 * gemm (resolve_gemm_a).  The operands A and B are stored
 * swizzled (bank-conflict free for ldmatrix) when their rows allow it.
 * Only where the target has mma.sync (tl_codegen.mma).  Where it has wgmma
 * (sm_90a), a gemm whose shape choose_wgmma accepts takes that instead,
 * and C the mma layout with interleaved row tiles when a warpgroup issues
 * more than one m64 instruction per K step (ir.h: mma_interleaved); a gemm
 * it refuses keeps why in why_not_wgmma (`--emit ir` prints it).
 *
 * On AMD targets with matrix cores (tl_codegen.amd_matrix: MFMA on CDNA,
 * WMMA on RDNA3 (gfx11) and RDNA4 (gfx12)) the same holds with their
 * instructions of 16 x 16 x 16: a gemm of float16 (or bfloat16) A and B,
 * both in shared memory (LDS), into a float32 register C whose shape tiles
 * onto the wavefronts is marked use_amd_mma and C takes TL_LAYOUT_MFMA,
 * TL_LAYOUT_WMMA or TL_LAYOUT_WMMA_GFX12 (ir.h).  Fragments meeting C in
 * parallel loops and copies unify with it as with the mma layout; row reads
 * of it and A in registers are demoted to shared memory (no row layout is
 * defined for these).  Everything else keeps the portable path.
 */
#include <stdint.h>
#include <string.h>
#include "ir.h"
#include "pass.h"
#include "target.h"


typedef struct {
  tl_program *prog;
  int64_t threads;
  int64_t scratch;
  tl_vec rows;      /* row reads: pairs (1-D fragment, 2-D parallel loop) */
  bool wgmma;       /* the target has wgmma.mma_async */
  bool int8_mma;    /* ... mma.sync with int8/uint8 operands */
  bool fp8_mma;     /* ... mma.sync with float8 operands */
  const char *wgmma_variant; /* tl_codegen.wgmma_variant */
  int amd_matrix;   /* choose_amd_all: the target's matrix instructions (TL_AMD_MATRIX_*) */
  int wave;         /* choose_amd_all: its wavefront size */
  bool changed;     /* unify_all, resolve_gemm_a: something changed in this walk */
  int64_t smem_limit; /* resolve_gemm_a */
  bool rs_refused;  /* resolve_gemm_a: a gemm on wgmma lost its A from registers (tl_stmt.rs_refused) */
  const tl_codegen *cg; /* the target's code generation (resolve_gemm_a: mark_packed) */
} P;

/* Is x a read V[i] of a 1-D fragment by the first variable of a 2-D
 * parallel loop over V's length (a "row read")? */
static bool row_read(const tl_stmt *par, const tl_expr *x) {
  return par->nvars == 2 && x->kind == E_INDEX && x->nargs == 1 && x->sym->ndim == 1 &&
         x->args[0]->kind == E_NAME && x->args[0]->sym == par->vars[0] && par->extents[0]->val.i == x->sym->dims[0];
}

static void demote(tl_sym *s) {
  if (s && s->kind == SYM_BUFFER && s->scope == SCOPE_FRAGMENT)
    s->in_regs = false;
}

/* The parallel loop whose body is being scanned. */
typedef struct {
  P *p;
  const tl_stmt *par;
} in_par;

/* Demotes every fragment that a node of an expression inside the parallel
 * loop indexes other than by the identity access (tl_walker.expr). */
static tl_walk_act scan_par_expr(tl_expr *e, tl_stmt *s, void *user) {
  P *p = ((in_par *)user)->p;
  const tl_stmt *par = ((in_par *)user)->par;
  if (e->kind == E_INDEX && e->sym && e->sym->kind == SYM_BUFFER && e->sym->scope == SCOPE_FRAGMENT &&
      row_read(par, e)) {
    tl_vec_push(p->prog->arena, &p->rows, e->sym);
    tl_vec_push(p->prog->arena, &p->rows, (void *)par);
  } else if (e->kind == E_INDEX && e->sym && e->sym->kind == SYM_BUFFER && e->sym->scope == SCOPE_FRAGMENT) {
    bool identity = e->nargs == par->nvars;
    for (int k = 0; identity && k < e->nargs; k++)
      identity = e->args[k]->kind == E_NAME && e->args[k]->sym == par->vars[k] &&
                 par->extents[k]->val.i == e->sym->dims[k];
    if (!identity)
      demote(e->sym);
  }
  return TL_WALK_GO;
}

static tl_walk_act scan_par_stmt(tl_stmt *s, void *user) {
  if (s->lhs && s->lhs->kind == E_INDEX && row_read(((in_par *)user)->par, s->lhs))
    demote(s->lhs->sym); /* written by every column: not a row read */
  return TL_WALK_GO;
}

/* Scans the statements of a parallel body (only assignments, lets, ifs
 * and loops, whose expressions are all the walker's). */
static void scan_par_body(P *p, const tl_stmt *par, const tl_body *b) {
  static const tl_walker w = {.pre = scan_par_stmt, .expr = scan_par_expr};
  in_par ip = {p, par};
  tl_walk((tl_body *)b, &w, &ip);
}

static bool whole(const tl_region *r) {
  if (r->whole)
    return true;
  for (int d = 0; d < r->ndim; d++) {
    if (r->ext[d] != r->sym->dims[d])
      return false;
    if (r->lo[d] && !(r->lo[d]->kind == E_CONST && r->lo[d]->val.i == 0))
      return false;
  }
  return true;
}

static void need_whole(const tl_region *r) {
  if (r && r->sym && !whole(r))
    demote(r->sym);
}

static tl_walk_act scan_stmt(tl_stmt *s, void *user) {
  P *p = user;
  switch (s->kind) {
  case S_COPY: case S_REDUCE: case S_CUMSUM: case S_ATOMIC_ADD: case S_FILL:
    need_whole(s->src);
    need_whole(s->dst);
    break;
  case S_GEMM:
    /* B is read by every thread: shared memory.  A may stay in registers
     * when it turns out to hold the rows of C in the mma layout (decided
     * in resolve_gemm_a). */
    if (s->A->dtype != TL_FLOAT16 && s->A->dtype != TL_BFLOAT16)
      demote(s->A);
    if (s->trans_a)
      demote(s->A);
    demote(s->B);
    break;
  case S_PARALLEL:
    scan_par_body(p, s, &s->body);
    break;
  default:
    break;
  }
  return TL_WALK_GO;
}

static int64_t elems(const tl_sym *s) {
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++)
    n *= s->dims[d];
  return n;
}

/* The bytes of shared scratch an operator needs to exchange values of
 * register fragments between threads (see emit_cuda.c), for a block of
 * `threads`. */
static int64_t scratch_need(const tl_stmt *s, int64_t threads) {
  if (s->kind == S_CLUSTER_REDUCE && s->dst->sym->in_regs) /* each thread's elements, 4 bytes each */
    return s->dst->sym->per_thread * threads * 4;
  if ((s->kind == S_REDUCE || s->kind == S_CUMSUM) && s->src->sym->in_regs) {
    const tl_sym *src = s->src->sym;
    if (s->kind == S_REDUCE && tl_reduce_by_rows(s))
      return (elems(s->dst->sym) + 1) * 8 * (src->reg_layout == TL_LAYOUT_MMA ? src->mma_wn : 1); /* partials per row */
    /* the whole fragment, as float (4 bytes) or double/long long (8) */
    int64_t es = tl_dtype_is_float(src->dtype) && src->dtype != TL_FLOAT64 ? 4 : 8;
    return elems(src) * es;
  }
  return 0;
}

static tl_walk_act max_scratch(tl_stmt *s, void *user) {
  P *p = user;
  int64_t n = scratch_need(s, p->threads);
  if (n > p->scratch)
    p->scratch = n;
  return TL_WALK_GO;
}

/* A reduction of a register fragment along its last dimension, where each
 * thread's elements sit in one row (its row's threads then combine with
 * warp shuffles: a power of two of them, at most a warp, and the block made
 * of whole warps) or hold whole rows. */
static bool by_rows(const tl_stmt *s, int64_t threads) {
  const tl_sym *src = s->src->sym;
  if (!src->in_regs || s->dim != src->ndim - 1)
    return false;
  if (src->reg_layout == TL_LAYOUT_MMA)
    return src->ndim == 2; /* quads of lanes hold a row; warps along N meet in the scratch */
  if (src->reg_layout == TL_LAYOUT_MMA_ROWS || tl_amd_layout(src->reg_layout))
    return false; /* through the scratch */
  int64_t n = src->dims[src->ndim - 1], per = src->per_thread, g = n / per;
  return (n % per == 0 && g <= 32 && (g & (g - 1)) == 0 && threads % 32 == 0) || per % n == 0;
}

static tl_walk_act mark_reduction(tl_stmt *s, void *user) {
  if (s->kind == S_REDUCE)
    s->by_rows = by_rows(s, ((P *)user)->threads);
  return TL_WALK_GO;
}

bool tl_reduce_by_rows(const tl_stmt *s) { return s->by_rows; }

/* ---- the matrix-core path ------------------------------------------------------- */
static bool interleaved(const tl_sym *s) { return s->mma_interleaved && s->mma_mi > 1; }

static bool same_mma(const tl_sym *a, const tl_sym *b) {
  return a->mma_wm == b->mma_wm && a->mma_wn == b->mma_wn && a->mma_mi == b->mma_mi && a->mma_ni == b->mma_ni &&
         interleaved(a) == interleaved(b);
}

/* 8-bit operands (int8, uint8, float8): their instructions take K in
 * steps of 32 (m16n8k32, m64nNk32), and wgmma takes them K-major only: A
 * stored [M, K] and B [N, K] (transpose_B); it transposes only 16-bit
 * operands.  mma.sync takes any storage order: ldmatrix (which has no
 * 8-bit transpose before sm_100) loads K-major operands, and the others
 * are packed byte by byte from shared memory (slower: emit_cuda.c's
 * gather8), so a program gets the fast path by storing B as [N, K]. */
static bool byte_operands(const tl_stmt *s) { return tl_dtype_bits(s->A->dtype) == 8; }

/* Why the target's mma.sync cannot take the gemm's operand types, or NULL
 * when it can. */
static const char *mma_types_why(const P *p, const tl_stmt *s) {
  switch (s->A->dtype) {
  case TL_FLOAT16: case TL_BFLOAT16: return NULL;
  case TL_INT8: case TL_UINT8:
    return p->int8_mma ? NULL : "the target has no mma.sync with int8 operands (sm_80 and later)";
  case TL_FLOAT8_E4M3: case TL_FLOAT8_E5M2:
    return p->fp8_mma ? NULL : "the target has no mma.sync with float8 operands (sm_89 and later)";
  default: return "no matrix instruction takes these operands";
  }
}

/* The accumulator C must have: int32 for integer operands, float32 (or,
 * on mma.sync, float16, accumulated in float32) for the others. */
static bool c_type_ok(const tl_stmt *s, bool f16_ok) {
  if (s->A->dtype == TL_INT8 || s->A->dtype == TL_UINT8)
    return s->C->dtype == TL_INT32;
  return s->C->dtype == TL_FLOAT32 || (f16_ok && s->C->dtype == TL_FLOAT16);
}

/* wgmma (sm_90a): warpgroup g (4 warps) issues, per k16 step, mi
 * instructions m64nNk16 across all N columns of C, instruction i for rows
 * [(i * W + 4 g) * 16, +64) (W warps in the block), A and B read from
 * shared memory through matrix descriptors.  Warp w of the block thus holds
 * rows [(i * W + w) * 16, +16) of each i: C's layout is the mma layout with
 * every warp along M, mi x N/8 tiles per warp, and the row tiles
 * interleaved (ir.h: mma_interleaved; with mi = 1 that is the plain
 * layout); each warp's accumulator registers of instruction i are then
 * C's registers [i * N/2, (i + 1) * N/2) in order.
 *
 * The operands' storage (emit_cuda.c writes it, the descriptors read it):
 * A [M, Kt] K-major; B [N, Kt] (transpose_B, K-major) or [Kt, N] (N-major).
 * A K-major operand with rows of Kt <= 64 elements is stored in the swizzle
 * mode of its row width (128, 64 or 32 bytes for Kt = 64, 32, 16: the
 * 16-byte chunks of a row XORed by its address bits 7 and up, as the
 * descriptor's mode says), with wider rows (Kt a multiple of 64) as panels
 * of 64 columns in the 128-byte mode; a k16 step is 32 bytes along a row.
 * An N-major B is stored as panels of 64 columns (N a multiple of 64), each
 * [Kt, 64] in the 128-byte mode; a k16 step is 16 rows (2048 bytes) on.
 * Every swizzled buffer starts on 1024 bytes (tl_pass_smem), and its rows
 * come in groups of 8 (M, N, Kt multiples of 8 and 16), so the address bits
 * that the hardware's swizzle reads are the ones emit_cuda.c's offsets use.
 *
 * 8-bit operands (int8 and uint8 into int32, float8_e4m3 and float8_e5m2
 * into float32) take m64nNk32 on the same storage counted in bytes: a k32
 * step is again 32 bytes along a row, K tiles of 32, 64 and 128 elements
 * take the 32-, 64- and 128-byte swizzle and wider ones panels of 128
 * columns; wgmma takes them K-major only (B [N, K] with transpose_B), and
 * integer ones N of 8, 16, 24 or a multiple of 16 (ptxas refuses the
 * others).
 *
 * Returns why gemm s cannot run so (and leaves everything as it was), or
 * NULL after giving C the layout. */
static int64_t es_of(const tl_sym *X) { return (int64_t)tl_dtype_size(X->dtype); }

static const char *choose_wgmma(P *p, tl_stmt *s) {
  tl_sym *A = s->A, *B = s->B, *C = s->C;
  bool b8 = byte_operands(s), ints = A->dtype == TL_INT8 || A->dtype == TL_UINT8;
  bool a_frag = A->scope == SCOPE_FRAGMENT && A->in_regs; /* the RS form: A from registers (resolve_gemm_a) */
  if (B->scope != SCOPE_SHARED)
    return "B must be a shared buffer (wgmma reads it through a matrix descriptor)";
  if (A->scope != SCOPE_SHARED && !a_frag)
    return "A must be a shared buffer or a register fragment (wgmma reads it through a matrix descriptor or "
           "from registers)";
  if (a_frag && s->rs_refused)
    return "A is a fragment that could not stay in registers in C's row layout (wgmma reads no other fragment)";
  if (a_frag && (es_of(A) != 2 || s->trans_a))
    return "A is a register fragment: wgmma takes one from registers only as float16/bfloat16 [M, K]";
  if (s->trans_a)
    return "A is stored [K, M] (transpose_A): only a K-major A is lowered to wgmma";
  if (B->dtype != A->dtype || mma_types_why(p, s))
    return "A and B are not of one type of float16, bfloat16, float8_e4m3, float8_e5m2, int8 and uint8";
  if (b8 && !s->trans_b)
    return "B is stored [K, N]: wgmma takes 8-bit operands K-major only (store B as [N, K] with transpose_B)";
  if ((A->layout && !A->layout->swizzle) || (B->layout && !B->layout->swizzle))
    return "annotate_layout gives A or B a layout of its own (wgmma needs its swizzled storage)";
  if (A->ndim != 2 || B->ndim != 2 || C->ndim != 2)
    return "A, B and C are not all 2-D";
  if (c_type_ok(s, false) && C->scope == SCOPE_FRAGMENT && !C->in_regs && elems(C) > TL_MAX_REG_ELEMS * p->threads)
    return tl_arena_printf(p->prog->arena, "C would take %lld accumulators per thread, more than %d: use more warps or "
                           "a smaller tile", (long long)((elems(C) + p->threads - 1) / p->threads), TL_MAX_REG_ELEMS);
  if (!C->in_regs || !c_type_ok(s, false))
    return ints ? "C is not an int32 fragment in registers" : "C is not a float32 fragment in registers";
  if (p->threads % 128)
    return "the block is not whole warpgroups (threads a multiple of 128)";
  int64_t M = C->dims[0], N = C->dims[1], K = A->dims[1], nw = p->threads / 32;
  if (M % (16 * nw))
    return tl_arena_printf(p->prog->arena, "C's %lld rows are not a multiple of 16 x %lld warps (each m64 instruction "
                           "gives each warp of its warpgroup 16 rows)", (long long)M, (long long)nw);
  int64_t mi = M / (16 * nw);
  if (N % 8 || N > 256)
    return tl_arena_printf(p->prog->arena, "C's %lld columns are not a multiple of 8 up to 256 (wgmma's N)", (long long)N);
  if (ints && N > 24 && N % 16)
    return tl_arena_printf(p->prog->arena, "C's %lld columns are not 8, 16, 24 or a multiple of 16 (wgmma's N with "
                           "integer operands)", (long long)N);
  if (A->dims[0] != M)
    return "A's rows are not C's";
  int64_t es = es_of(A), Kb = K * es; /* bytes of a row */
  bool kmajor = !a_frag || s->trans_b; /* an operand stored K-major (A in shared memory, or B [N, K]) */
  if (!kmajor && K % 16)
    return tl_arena_printf(p->prog->arena, "the K tile is %lld, not a multiple of 16 (wgmma's k16 step)", (long long)K);
  if (kmajor && (Kb % 32 || (Kb > 128 && Kb % 128) || Kb == 96))
    return tl_arena_printf(p->prog->arena, "the K tile is %lld: a K-major operand is stored in the 32-, 64- or 128-byte "
                           "swizzle (K tile %lld, %lld or %lld) or as panels of %lld (a multiple of %lld)", (long long)K,
                           (long long)(32 / es), (long long)(64 / es), (long long)(128 / es), (long long)(128 / es),
                           (long long)(128 / es));
  if (s->trans_b && (B->dims[0] != N || B->dims[1] != K))
    return "B (transpose_B) is not [N, K]";
  if (!s->trans_b && (B->dims[0] != K || B->dims[1] != N))
    return "B is not [K, N]";
  if (!s->trans_b && N % 64)
    return tl_arena_printf(p->prog->arena, "an N-major B ([K, N]) is stored as panels of 64 columns; N is %lld "
                           "(store B as [N, K] with transpose_B, or use N a multiple of 64)", (long long)N);
  tl_sym want = {.mma_wm = (int)nw, .mma_wn = 1, .mma_mi = mi, .mma_ni = N / 8, .mma_interleaved = mi > 1};
  if (C->reg_layout == TL_LAYOUT_MMA && !same_mma(C, &want))
    return "C already has another gemm's accumulator layout";
  C->reg_layout = TL_LAYOUT_MMA;
  C->mma_wm = (int)nw;
  C->mma_wn = 1;
  C->mma_mi = mi;
  C->mma_ni = N / 8;
  C->mma_interleaved = mi > 1;
  C->per_thread = mi * N / 2;
  s->use_mma = s->use_wgmma = true;
  return NULL;
}

/* Gives fragment C the accumulator layout for a gemm on the block's
 * warps, when the shape tiles onto them: wgmma where the target has it
 * and choose_wgmma allows, else mma.sync: m16n8k16 for 16-bit operands,
 * m16n8k32 for 8-bit ones (int8 and uint8 into int32 from sm_80, float8
 * into float32 from sm_89), on a grid of warps over C with square-ish warp
 * tiles.  Returns why neither (nothing changed), or NULL when taken. */
static const char *choose_mma(P *p, tl_stmt *s) {
  tl_sym *A = s->A, *B = s->B, *C = s->C;
  s->use_wgmma = false;
  s->why_not_wgmma = p->wgmma             ? choose_wgmma(p, s)
                     : p->wgmma_variant[0] ? tl_arena_printf(p->prog->arena, "this target has none; %s has",
                                                             p->wgmma_variant)
                                           : NULL;
  if (s->use_wgmma)
    return NULL;
  const char *why = mma_types_why(p, s);
  if (why)
    return why;
  if (B->in_regs)
    return "B is a register fragment";
  if (!C->in_regs)
    return "C is not in registers";
  if (!c_type_ok(s, true) || p->threads % 32)
    return p->threads % 32 ? "the block is not whole warps" : "C's dtype has no accumulator of the instruction";
  bool b8 = byte_operands(s);
  int64_t M = C->dims[0], N = C->dims[1], K = s->trans_a ? A->dims[0] : A->dims[1], kstep = b8 ? 32 : 16;
  int nw = (int)(p->threads / 32);
  if (K % kstep)
    return b8 ? "K is not a multiple of 32" : "K is not a multiple of 16";
  int best_wm = 0;
  int64_t best_cost = INT64_MAX;
  for (int wm = 1; wm <= nw; wm++) {
    if (nw % wm)
      continue;
    int wn = nw / wm;
    if ((s->policy == POLICY_FULL_ROW && wn != 1) || (s->policy == POLICY_FULL_COL && wm != 1))
      continue;
    if (M % (wm * 16) || N % (wn * 16))
      continue;
    int64_t tm = M / wm, tn = N / wn, cost = tm > tn ? tm - tn : tn - tm; /* square-ish warp tiles */
    if (cost < best_cost) {
      best_cost = cost;
      best_wm = wm;
    }
  }
  if (!best_wm)
    return "C does not tile onto the warps in 16 x 16 tiles (by the policy)";
  int wn = nw / best_wm;
  int64_t mi = M / best_wm / 16, ni = N / wn / 8;
  if (mi * ni * 4 > TL_MAX_REG_ELEMS)
    return "C's warp tile needs more than 128 registers per thread";
  tl_sym want = {.mma_wm = best_wm, .mma_wn = wn, .mma_mi = mi, .mma_ni = ni};
  if (C->reg_layout == TL_LAYOUT_MMA && !same_mma(C, &want))
    return "C already has another warp tiling (another gemm)";
  C->reg_layout = TL_LAYOUT_MMA;
  C->mma_wm = best_wm;
  C->mma_wn = wn;
  C->mma_mi = mi;
  C->mma_ni = ni;
  C->per_thread = mi * ni * 4;
  s->use_mma = true;
  return NULL;
}

static tl_walk_act choose_mma_all(tl_stmt *s, void *user) {
  if (s->kind == S_GEMM)
    s->mma_why = choose_mma(user, s);
  return TL_WALK_GO;
}

/* Gives fragment C an AMD matrix-core layout for a gemm on `threads` of a
 * target with wavefronts of `wave` and matrix instructions `matrix`, when
 * the shape tiles onto the wavefronts in 16 x 16 tiles; returns false
 * (nothing changed) if not.  A goes to shared memory either way (the
 * instructions' operands are loaded from LDS). */
static bool choose_amd(P *p, tl_stmt *s, int matrix, int wave) {
  tl_sym *A = s->A, *B = s->B, *C = s->C;
  int layout = matrix == TL_AMD_MATRIX_MFMA         ? TL_LAYOUT_MFMA
               : matrix == TL_AMD_MATRIX_WMMA       ? TL_LAYOUT_WMMA
               : matrix == TL_AMD_MATRIX_WMMA_GFX12 ? TL_LAYOUT_WMMA_GFX12
                                                    : -1;
  int items = layout == TL_LAYOUT_MFMA ? 4 : 8; /* accumulator floats per lane and tile */
  demote(A);
  if (layout < 0 || wave != (layout == TL_LAYOUT_MFMA ? 64 : 32)) /* MFMA in wave64, WMMA in wave32 */
    return false;
  if ((A->dtype != TL_FLOAT16 && A->dtype != TL_BFLOAT16) || B->dtype != A->dtype || B->in_regs || A->in_regs)
    return false;
  if (A->ndim != 2 || B->ndim != 2 || C->ndim != 2 || !C->in_regs || C->dtype != TL_FLOAT32 || p->threads % wave)
    return false;
  int64_t M = C->dims[0], N = C->dims[1], K = s->trans_a ? A->dims[0] : A->dims[1];
  int nw = (int)(p->threads / wave);
  if (K % 16)
    return false;
  int best_wm = 0;
  int64_t best_cost = INT64_MAX;
  for (int wm = 1; wm <= nw; wm++) {
    if (nw % wm)
      continue;
    int wn = nw / wm;
    if ((s->policy == POLICY_FULL_ROW && wn != 1) || (s->policy == POLICY_FULL_COL && wm != 1))
      continue;
    if (M % (wm * 16) || N % (wn * 16))
      continue;
    int64_t tm = M / wm, tn = N / wn, cost = tm > tn ? tm - tn : tn - tm; /* square-ish wave tiles */
    if (cost < best_cost) {
      best_cost = cost;
      best_wm = wm;
    }
  }
  if (!best_wm)
    return false;
  int wn = nw / best_wm;
  int64_t mi = M / best_wm / 16, ni = N / wn / 16;
  if (mi * ni * items > TL_MAX_REG_ELEMS)
    return false;
  tl_sym want = {.mma_wm = best_wm, .mma_wn = wn, .mma_mi = mi, .mma_ni = ni};
  if (C->reg_layout != TL_LAYOUT_BLOCKED && (C->reg_layout != layout || !same_mma(C, &want)))
    return false;
  C->reg_layout = layout;
  C->mma_wm = best_wm;
  C->mma_wn = wn;
  C->mma_mi = mi;
  C->mma_ni = ni;
  C->per_thread = mi * ni * items;
  s->use_amd_mma = true;
  return true;
}

static tl_walk_act choose_amd_all(tl_stmt *s, void *user) {
  P *p = user;
  s->use_amd_mma = false;
  if (s->kind == S_GEMM) {
    s->why_not_wgmma = NULL;
    s->mma_why = choose_amd(p, s, p->amd_matrix, p->wave) ? NULL
                 : p->amd_matrix ? "the matrix cores take float16/bfloat16 A and B in shared memory into a float32 C of 16 x 16 tiles per wave"
                                 : "the target has no matrix instructions (mma.sync from sm_80)";
  }
  return TL_WALK_GO;
}

/* Collects the register fragments a parallel body indexes, each once, in
 * the order of their first use (tl_walker.expr). */
typedef struct {
  const tl_stmt *par;
  tl_vec *out;
  tl_arena *a;
} regs_of;

static tl_walk_act par_regs(tl_expr *x, tl_stmt *s, void *user) {
  regs_of *r = user;
  if (x->kind == E_INDEX && x->sym->kind == SYM_BUFFER && x->sym->scope == SCOPE_FRAGMENT && x->sym->in_regs &&
      !row_read(r->par, x)) {
    for (int i = 0; i < r->out->n; i++)
      if (r->out->items[i] == x->sym)
        return TL_WALK_GO;
    tl_vec_push(r->a, r->out, x->sym);
  }
  return TL_WALK_GO;
}

static void par_body_regs(const tl_stmt *par, const tl_body *b, tl_vec *out, tl_arena *a) {
  static const tl_walker w = {.expr = par_regs};
  regs_of r = {par, out, a};
  tl_walk((tl_body *)b, &w, &r);
}

/* Makes the register fragments of one group (a parallel loop, a copy)
 * agree on a layout: they take the mma layout of a member that has one
 * when they have its shape, and are demoted otherwise. */
bool tl_same_reg_layout(const tl_sym *a, const tl_sym *b) {
  if (a->reg_layout != b->reg_layout || a->ndim != b->ndim || a->per_thread != b->per_thread)
    return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->dims[d] != b->dims[d])
      return false;
  if (a->reg_layout == TL_LAYOUT_MMA_ROWS)
    return a->mma_wm == b->mma_wm && a->mma_mi == b->mma_mi && interleaved(a) == interleaved(b);
  return a->reg_layout == TL_LAYOUT_BLOCKED || same_mma(a, b);
}

static bool unify(tl_sym **g, int n) {
  const tl_sym *m = NULL;
  for (int i = 0; i < n; i++)
    if (g[i]->in_regs && g[i]->reg_layout != TL_LAYOUT_BLOCKED)
      m = g[i];
  if (!m)
    return false;
  bool changed = false;
  for (int i = 0; i < n; i++) {
    tl_sym *x = g[i];
    if (!x->in_regs || x == m || tl_same_reg_layout(x, m))
      continue;
    bool same_shape = x->ndim == m->ndim;
    for (int d = 0; same_shape && d < x->ndim; d++)
      same_shape = x->dims[d] == m->dims[d];
    if (same_shape && x->reg_layout == TL_LAYOUT_BLOCKED) {
      x->reg_layout = m->reg_layout;
      x->mma_wm = m->mma_wm;
      x->mma_wn = m->mma_wn;
      x->mma_mi = m->mma_mi;
      x->mma_ni = m->mma_ni;
      x->mma_interleaved = m->mma_interleaved;
      x->per_thread = m->per_thread;
    } else {
      x->in_regs = false;
    }
    changed = true;
  }
  return changed;
}

/* A register fragment A of a gemm on the matrix cores that no statement
 * has given a layout yet (written by parallel loops over its own elements:
 * the dequantized weights of gemm_w4a16_t.json) takes the layout that
 * resolve_gemm_a keeps in registers: C's rows (C in the mma layout with one
 * warp along N) over K, mma_ni = K / 8 tiles of 8 columns.  The loops that
 * write it then run on the threads that hold its elements.  Returns whether
 * A changed. */
static bool adopt_a_layout(tl_stmt *s) {
  tl_sym *A = s->A;
  const tl_sym *C = s->C;
  if (!A->in_regs || A->scope != SCOPE_FRAGMENT || A->reg_layout != TL_LAYOUT_BLOCKED || s->trans_a ||
      A->ndim != 2 || !C->in_regs || C->reg_layout != TL_LAYOUT_MMA || C->mma_wn != 1 ||
      A->dims[0] != C->dims[0] || A->dims[1] % 16 || (A->dtype != TL_FLOAT16 && A->dtype != TL_BFLOAT16))
    return false;
  A->reg_layout = TL_LAYOUT_MMA;
  A->mma_wm = C->mma_wm;
  A->mma_wn = 1;
  A->mma_mi = C->mma_mi;
  A->mma_ni = A->dims[1] / 8;
  A->mma_interleaved = C->mma_interleaved;
  A->per_thread = A->mma_mi * A->mma_ni * 4;
  return true;
}

/* Makes one group agree (tl_walker.pre): a parallel loop's register
 * fragments, a copy's two buffers; drops the matrix-core path of a gemm
 * whose operands left it.  Sets p->changed when anything changed. */
static tl_walk_act unify_all(tl_stmt *s, void *user) {
  P *p = user;
  if (s->kind == S_GEMM && s->use_mma)
    p->changed |= adopt_a_layout(s);
  if (s->kind == S_PARALLEL) {
    tl_vec regs = {0};
    par_body_regs(s, &s->body, &regs, p->prog->arena);
    p->changed |= unify((tl_sym **)regs.items, regs.n);
  } else if ((s->kind == S_COPY || s->kind == S_ATOMIC_ADD) && s->src && s->dst) {
    tl_sym *g[2] = {s->src->sym, s->dst->sym};
    if (g[0]->kind == SYM_BUFFER && g[1]->kind == SYM_BUFFER)
      p->changed |= unify(g, 2);
  } else if (s->kind == S_GEMM && s->use_mma && !s->C->in_regs) {
    if (s->use_wgmma)
      s->why_not_wgmma = "C left the registers (another statement needs it elsewhere)";
    s->use_mma = s->use_wgmma = false; /* C was demoted after all */
    s->mma_why = "C left the registers (a parallel loop or copy shares it with a fragment of another layout)";
    p->changed = true;
  } else if (s->kind == S_GEMM && s->use_amd_mma && (!s->C->in_regs || s->A->in_regs || s->B->in_regs)) {
    s->use_amd_mma = false;
    s->mma_why = "C left the registers, or A or B is a register fragment";
    p->changed = true;
  }
  return TL_WALK_GO;
}

/* The 2-D register fragment a parallel loop indexes by its own elements:
 * the first such index in the loop's body, looking in the left and right
 * sides of each statement. */
typedef struct {
  const tl_stmt *par;
  const tl_sym *owner;
} owner_of;

static tl_walk_act expr_owner(tl_expr *x, tl_stmt *s, void *user) {
  owner_of *o = user;
  if (x->kind == E_INDEX && x->sym->kind == SYM_BUFFER && x->sym->scope == SCOPE_FRAGMENT && x->sym->in_regs &&
      x->sym->ndim == 2 && x->nargs == 2 && x->args[0]->kind == E_NAME && x->args[0]->sym == o->par->vars[0]) {
    o->owner = x->sym;
    return TL_WALK_STOP;
  }
  return TL_WALK_GO;
}

static tl_walk_act stmt_owner(tl_stmt *s, void *user) {
  if (tl_walk_expr(s->lhs, expr_owner, s, user) == TL_WALK_STOP ||
      tl_walk_expr(s->value, expr_owner, s, user) == TL_WALK_STOP)
    return TL_WALK_STOP;
  return TL_WALK_GO;
}

static const tl_sym *loop_owner(const tl_stmt *par, const tl_body *b) {
  static const tl_walker w = {.pre = stmt_owner};
  owner_of o = {par, NULL};
  tl_walk((tl_body *)b, &w, &o);
  return o.owner;
}

/* A gemm operand A held in registers is usable when the gemm runs on the
 * matrix cores and A is laid out as the accumulator of C's rows over K
 * (FlashAttention's P): then each warp's A fragments are its own
 * registers.  Otherwise A goes to shared memory (resolve_gemm_a). */
/* Keeping A in registers pays only while the register fragments leave
 * room: measured on an H200, flash attention (128 x 128 tiles, 8 warps)
 * ran at 269 TFLOP/s with 170 words (P packed) against 188 with P in
 * shared memory; unpacked, 202 words spilled and ran 5% slower. */
#define TL_REG_BUDGET 176

int64_t tl_reg_words(const tl_program *prog) {
  int64_t n = 0;
  for (int i = 0; i < prog->nbuffer_slots; i++) {
    const tl_sym *s = prog->buffer_syms[i];
    if (s->scope == SCOPE_FRAGMENT && s->in_regs)
      n += s->packed ? s->per_thread / 2 : s->per_thread;
  }
  return n;
}

/* ---- packed 16-bit register fragments --------------------------------------------------------
 * A register fragment of float16 or bfloat16 in the mma layout that is
 * written only whole, by a copy from a fragment of the same layout, and
 * read only as the A operand of gemms on the matrix cores (FlashAttention's
 * P) is held as pairs of halves: half the registers, converted two at a
 * time by the copy (cvt.rn.f16x2.f32), and taken by the gemm as its A
 * fragments with no further work.  Any other use unpacks it. */
static void unpack_sym(tl_sym *s) {
  if (s)
    s->packed = false;
}

static tl_walk_act unpack_expr(tl_expr *x, tl_stmt *s, void *user) {
  unpack_sym(x->sym);
  return TL_WALK_GO;
}

typedef struct {
  const tl_codegen *cg;
  int64_t threads;
  tl_arena *arena; /* mark_dequant: where the pair maps go */
} dq_ctx;

static int dequant_loop(const tl_stmt *s, const dq_ctx *c);

/* Unpacks what statement s uses other than as a packed fragment may be used
 * (tl_walker.pre; every fragment its expressions name: unpack_expr).  A
 * dequantizing loop into a register fragment computes its elements as
 * pairs (dequant_loop returns 2): its destination stays packed. */
static tl_walk_act unpack_stmt(tl_stmt *s, void *user) {
  if (s->kind == S_PARALLEL && dequant_loop(s, user) == 2) {
    tl_walk_expr(s->body.items[0]->value, unpack_expr, s, NULL);
    return TL_WALK_SKIP;
  }
  if (s->kind == S_GEMM) {
    if (!s->use_mma || !s->C->in_regs || s->C->reg_layout != TL_LAYOUT_MMA)
      unpack_sym(s->A);
    unpack_sym(s->B);
    unpack_sym(s->C);
  } else if (s->kind == S_COPY && s->dst->sym->packed) {
    const tl_sym *f = s->src->sym;
    bool ok = whole(s->dst) && whole(s->src) && f->kind == SYM_BUFFER && f->scope == SCOPE_FRAGMENT && f->in_regs &&
              !f->packed && tl_same_reg_layout(f, s->dst->sym) && s->dst->sym->ndim == 2;
    if (!ok)
      unpack_sym(s->dst->sym);
    unpack_sym(s->src->sym);
  } else {
    if (s->src)
      unpack_sym(s->src->sym);
    if (s->dst)
      unpack_sym(s->dst->sym);
  }
  return TL_WALK_GO;
}

/* Sets tl_sym.packed on the fragments that qualify (a gemm that may still
 * take A from registers counts as such: when resolve_gemm_a decides
 * otherwise, A leaves the registers and so cannot be packed). */
static void mark_packed(tl_program *prog, const dq_ctx *c) {
  for (int i = 0; i < prog->nbuffer_slots; i++) {
    tl_sym *s = prog->buffer_syms[i];
    s->packed = s->scope == SCOPE_FRAGMENT && s->in_regs && s->reg_layout == TL_LAYOUT_MMA && s->ndim == 2 &&
                (s->dtype == TL_FLOAT16 || s->dtype == TL_BFLOAT16) && s->per_thread % 2 == 0;
  }
  static const tl_walker w = {.pre = unpack_stmt, .expr = unpack_expr};
  tl_walk(&prog->body, &w, (void *)c);
}

/* Bytes of the shared buffers (one stage each) and fragments outside
 * registers, plus `extra`: a lower bound of the block's shared memory. */
static int64_t smem_floor(const tl_program *prog, int64_t extra) {
  int64_t n = extra;
  for (int i = 0; i < prog->nbuffer_slots; i++) {
    const tl_sym *s = prog->buffer_syms[i];
    if (s->scope == SCOPE_SHARED || (s->scope == SCOPE_FRAGMENT && !s->in_regs))
      n += (int64_t)tl_dtype_bytes(s->dtype, (uint64_t)elems(s));
  }
  return n;
}

/* (tl_walker.pre; sets p->changed when A leaves the registers) */
static tl_walk_act resolve_gemm_a(tl_stmt *s, void *user) {
  P *p = user;
  tl_program *prog = p->prog;
  if (s->kind == S_GEMM && s->A->in_regs) {
    const tl_sym *A = s->A, *C = s->C;
    /* registers, when they leave room, or when shared memory could not
     * hold A besides the rest */
    mark_packed(prog, &(dq_ctx){p->cg, p->threads, NULL});
    bool room = tl_reg_words(prog) <= TL_REG_BUDGET ||
                smem_floor(prog, (int64_t)tl_dtype_bytes(A->dtype, (uint64_t)elems(A))) > p->smem_limit;
    bool ok = s->use_mma && C->in_regs && A->reg_layout == TL_LAYOUT_MMA && A->mma_wn == 1 &&
              C->mma_wn == 1 && A->mma_wm == C->mma_wm && A->mma_mi == C->mma_mi &&
              interleaved(A) == interleaved(C) && A->dims[0] == C->dims[0] && A->dims[1] % 16 == 0 && room;
    s->a_regs = ok;
    if (!ok) {
      s->A->in_regs = false;
      p->changed = true;
      if (s->use_wgmma) { /* C keeps its layout, which mma.sync takes too (one warp column), until placed again */
        s->use_wgmma = false;
        s->rs_refused = p->rs_refused = true;
      }
    }
  } else if (s->kind == S_GEMM) {
    s->a_regs = false;
  }
  return TL_WALK_GO;
}

/* Gives the fragments read by rows (V[i] in a loop over an mma-layout
 * fragment with one warp along N) the row layout of that fragment, and
 * demotes those that cannot have it.  Returns whether anything changed. */
static bool resolve_rows(P *p) {
  bool changed = false;
  for (int k = 0; k + 1 < p->rows.n; k += 2) {
    tl_sym *v = p->rows.items[k];
    const tl_stmt *par = p->rows.items[k + 1];
    if (!v->in_regs)
      continue;
    const tl_sym *o = loop_owner(par, &par->body);
    bool ok = o && o->reg_layout == TL_LAYOUT_MMA && o->mma_wn == 1 && o->dims[0] == v->dims[0];
    if (ok && v->reg_layout == TL_LAYOUT_BLOCKED) {
      v->reg_layout = TL_LAYOUT_MMA_ROWS;
      v->mma_wm = o->mma_wm;
      v->mma_wn = 1;
      v->mma_mi = o->mma_mi;
      v->mma_ni = o->mma_ni;
      v->mma_interleaved = o->mma_interleaved;
      v->per_thread = 2 * o->mma_mi;
      changed = true;
    } else if (!ok || v->reg_layout != TL_LAYOUT_MMA_ROWS || v->mma_wm != o->mma_wm || v->mma_mi != o->mma_mi ||
               interleaved(v) != interleaved(o)) {
      v->in_regs = false;
      changed = true;
    }
  }
  return changed;
}

/* Swizzles gemm operands stored in shared memory when their rows hold at
 * least 4 chunks of 16 bytes and the buffer is a whole number of 128-byte
 * groups. */
static tl_walk_act swizzle_operands(tl_stmt *s, void *user) {
  if (s->kind == S_GEMM && s->use_wgmma) {
    tl_sym *ops[2] = {s->A, s->B};
    for (int k = s->a_regs; k < 2; k++)
      ops[k]->swizzled = ops[k]->wgmma_op = true;
  } else if (s->kind == S_GEMM && s->use_mma) {
    tl_sym *ops[2] = {s->A, s->B};
    for (int k = 0; k < 2; k++) {
      tl_sym *x = ops[k];
      if (x->in_regs)
        continue;
      int64_t row_bytes = x->dims[1] * (int64_t)tl_dtype_size(x->dtype);
      if (x->ndim == 2 && row_bytes % 64 == 0 && (row_bytes * x->dims[0]) % 128 == 0)
        x->swizzled = true;
    }
  }
  return TL_WALK_GO;
}

/* ---- dequantizing parallel loops, 8 elements at a time -------------------------------------
 * A parallel loop whose body is one assignment D[..., j] = f(...) of a
 * float16 (or, from sm_80, bfloat16) shared buffer, j its innermost var
 * (extent a multiple of 8), where f is arithmetic in D's type (+, -, *,
 * negation, casts to it) on casts T(P[..., j]) of packed integer shared
 * buffers P (int4, uint4, int2, uint2, int1, uint1) and on values that do
 * not change within aligned groups of 8 j (constants, elements of D's type
 * of shared buffers or tensors whose indices do not use j, or use it as
 * group_const allows), runs 8 iterations along j at a time
 * (tl_stmt.vec_dequant; 16 or 32 when the loop's extent and P's rows allow
 * it, P's elements then fit 16 bytes, and every thread still gets an
 * iteration): P's elements of those iterations are one aligned load (its
 * rows a multiple of as many elements, row-major), each 8 converted to 4
 * float16 pairs with
 * the conversion of tl_subbyte_f16_pair (no convert instruction; for
 * bfloat16 then converted, exactly, to bfloat16 pairs), f is computed on
 * pairs with f16x2 (add, sub and mul with .rn) or bf16x2 (fma.rn with 1,
 * -1 or -0 as the other operand) instructions: never fused, so each
 * operation rounds once to D's type as proto/tile-ir-v1.md 8.2 says
 * (float32 arithmetic rounded to float16 or bfloat16, as the scalar path
 * computes, gives the same results, since float32 has more than twice
 * their precision), and D's 8 elements are one 16-byte store (rows a
 * multiple of 8 elements; the swizzles move 16-byte chunks whole).
 * D may also be a register fragment of the mma layout written by the
 * loop's variables over its shape (reg_pairs_dst; gemm_w4a16_t.json's
 * weights for wgmma's A from registers): each thread then computes its own
 * elements two at a time (they sit in pairs of adjacent columns), each pair
 * from one load of the packed group of 8 holding it, and D stays packed in
 * pairs of halves (mark_packed).
 * NVIDIA targets only (inline PTX); everything else keeps the loop's
 * scalar path. */
static bool mentions(tl_expr *x, const tl_sym *v);

static tl_walk_act find_sym(tl_expr *x, tl_stmt *s, void *user) {
  (void)s;
  return x->sym == user ? TL_WALK_STOP : TL_WALK_GO;
}

/* Does x use symbol v (as a name, or as the buffer it indexes)? */
static bool mentions(tl_expr *x, const tl_sym *v) {
  return tl_walk_expr(x, find_sym, NULL, (void *)v) == TL_WALK_STOP;
}

/* Is index i the same for the 8 values of j in every aligned group of 8
 * (j0 a multiple of 8): free of j, or (X + j) // C (X + j or j alone) with
 * X a multiple of 8 and C a positive multiple of 8 (the groups of 8 then
 * never straddle a multiple of C)?  A scale read S[n, (k * block_K + j) //
 * group_size] is such an index, and so is one less the first group of a
 * block's run of K (gemm_w4a16_splitk.json: such an index plus or minus
 * a value free of j). */
static bool group_const_m(tl_expr *i, const tl_sym *j, int64_t m) {
  if (!mentions(i, j))
    return true;
  if (i->kind == E_BINARY && (i->op == '+' || i->op == '-'))
    for (int k = 0; k < 2; k++)
      if (!mentions(i->args[1 - k], j))
        return group_const_m(i->args[k], j, m);
  if (i->kind != E_BINARY || i->op != OP_FLOORDIV || i->args[1]->kind != E_CONST || i->args[1]->val.i <= 0 ||
      i->args[1]->val.i % m)
    return false;
  tl_expr *l = i->args[0];
  if (l->kind == E_NAME && l->sym == j)
    return true;
  if (l->kind != E_BINARY || l->op != '+')
    return false;
  for (int k = 0; k < 2; k++) {
    tl_expr *v = l->args[k], *x = l->args[1 - k];
    if (v->kind == E_NAME && v->sym == j && !mentions(x, j) && tl_multiple_of(x, m))
      return true;
  }
  return false;
}

static bool group_const(tl_expr *i, const tl_sym *j) { return group_const_m(i, j, 8); }

/* Are the reads of x outside its packed casts the same for the g values
 * of j in every aligned group of g (their indices free of j, or group_const
 * with g for 8)?  Then a vec_dequant loop of g at a time reads them once
 * per g (tl_stmt.vec_once). */
static bool vec_once(tl_expr *x, const tl_sym *j, int64_t g) {
  if (x->kind == E_CALL && x->fn == FN_CAST && x->args[0]->kind == E_INDEX && tl_dtype_is_packed(x->args[0]->sym->dtype))
    return true;
  if (x->kind == E_INDEX) {
    for (int d = 0; d < x->nargs; d++)
      if (!group_const_m(x->args[d], j, g))
        return false;
    return true;
  }
  for (int k = 0; k < x->nargs; k++)
    if (!vec_once(x->args[k], j, g))
      return false;
  return true;
}

/* Is x an element of shared buffer or tensor whose indices do not use j
 * (but as group_const allows) and no register fragment, or (last_j) whose
 * last index is j itself and the others free of j? */
static bool vec_elem(tl_expr *x, const tl_sym *j, bool last_j) {
  const tl_sym *b = x->sym;
  if (x->kind != E_INDEX || b->ndim != x->nargs)
    return false;
  if (b->kind == SYM_BUFFER && !(b->scope == SCOPE_SHARED || (b->scope == SCOPE_FRAGMENT && !b->in_regs)))
    return false;
  if (b->kind != SYM_BUFFER && b->kind != SYM_TENSOR)
    return false;
  if (b->layout && !b->layout->swizzle)
    return false;
  for (int d = 0; d < x->nargs; d++) {
    tl_expr *i = x->args[d];
    if (last_j && d == x->nargs - 1) {
      if (i->kind != E_NAME || i->sym != j)
        return false;
    } else if (last_j ? mentions(i, j) : !group_const(i, j)) {
      return false;
    }
  }
  return true;
}

/* The value of integer expression x with loop variable j at jv, or false
 * where x holds anything but integer constants, j and integer arithmetic,
 * or a step leaves int32 (the program's int32 arithmetic is then not
 * int64's). */
static bool eval_j(const tl_expr *x, const tl_sym *j, int64_t jv, int64_t *out) {
  int64_t a = 0, b = 0, r = 0;
  switch (x->kind) {
  case E_CONST:
    if (x->type == TL_BOOL || !(x->type == TL_TY_UINT || tl_dtype_is_int((tl_dtype)x->type)))
      return false;
    r = x->val.i;
    break;
  case E_NAME:
    if (x->sym != j)
      return false;
    r = jv;
    break;
  case E_UNARY:
    if (x->op != '-' || !eval_j(x->args[0], j, jv, &a))
      return false;
    r = -a;
    break;
  case E_CALL: { /* a cast to an integer type of at most 32 bits: the value where the type holds it */
    if (x->fn != FN_CAST || !tl_dtype_is_int((tl_dtype)x->type) || !eval_j(x->args[0], j, jv, &r))
      return false;
    int w = tl_dtype_bits((tl_dtype)x->type);
    bool sg = tl_dtype_is_signed((tl_dtype)x->type);
    if (w > 32 || r < (sg ? -(INT64_C(1) << (w - 1)) : 0) || r > (INT64_C(1) << (w - sg)) - 1)
      return false;
    break;
  }
  case E_BINARY:
    if (!eval_j(x->args[0], j, jv, &a) || !eval_j(x->args[1], j, jv, &b))
      return false;
    switch (x->op) {
    case '+': r = a + b; break;
    case '-': r = a - b; break;
    case '*': r = a * b; break;
    case OP_FLOORDIV: case '%':
      if (b == 0)
        return false;
      r = x->op == '%' ? tl_floormod64(a, b) : tl_floordiv64(a, b);
      break;
    case '&': r = a & b; break;
    case '|': r = a | b; break;
    case '^': r = a ^ b; break;
    case OP_SHL: case OP_SHR:
      if (b < 0 || b > 31 || a < 0)
        return false;
      r = x->op == OP_SHL ? a << b : a >> b;
      break;
    default:
      return false;
    }
    break;
  default:
    return false;
  }
  if (r < INT32_MIN || r > INT32_MAX)
    return false;
  *out = r;
  return true;
}

/* Is x, an element of shared buffer P, read at a last index that is a
 * function of j alone (eval_j), its other indices free of j?  A register
 * destination may then take its pairs where pair_map finds them. */
static bool perm_elem(tl_expr *x, const tl_sym *j) {
  const tl_sym *b = x->sym;
  int64_t v;
  if (x->kind != E_INDEX || b->kind != SYM_BUFFER || b->scope != SCOPE_SHARED || b->ndim != x->nargs ||
      (b->layout && !b->layout->swizzle) || !eval_j(x->args[x->nargs - 1], j, 0, &v))
    return false;
  for (int d = 0; d + 1 < x->nargs; d++)
    if (mentions(x->args[d], j))
      return false;
  return true;
}

/* A packed integer shared buffer read along j, 8 elements to a word (perm:
 * or through a function of j, perm_elem).
 * Lowers *g to the most elements per load that its rows and 16 bytes allow. */
static bool vec_packed(tl_expr *x, const tl_sym *j, int *g, bool perm) {
  if (x->kind != E_INDEX || !(vec_elem(x, j, true) || (perm && perm_elem(x, j))) || x->sym->kind != SYM_BUFFER ||
      x->sym->swizzled || x->sym->wgmma_op)
    return false;
  switch (x->sym->dtype) {
  case TL_INT4: case TL_UINT4: case TL_INT2: case TL_UINT2: case TL_INT1: case TL_UINT1:
    while (*g > 8 && (x->sym->dims[x->sym->ndim - 1] % *g || *g * tl_dtype_bits(x->sym->dtype) > 128))
      *g /= 2;
    return x->sym->dims[x->sym->ndim - 1] % 8 == 0;
  default:
    return false;
  }
}

/* Can expression x of type t (float16 or bfloat16) be computed on pairs
 * (emit_cuda.c: vex)?  Counts the packed reads in *npacked. */
static bool vec_f16(tl_expr *x, const tl_sym *j, const tl_sym *D, tl_type t, int *npacked, int *g, bool perm) {
  if (x->kind == E_CONST)
    return x->type != TL_BOOL;
  if (x->type != t)
    return false;
  switch (x->kind) {
  case E_INDEX:
    return x->sym != D && vec_elem(x, j, false) && (tl_type)x->sym->dtype == t && !mentions(x, D);
  case E_UNARY:
    return x->op == '-' && x->args[0]->type == t && vec_f16(x->args[0], j, D, t, npacked, g, perm);
  case E_CALL:
    if (x->fn != FN_CAST)
      return false;
    if (vec_packed(x->args[0], j, g, perm)) {
      ++*npacked;
      return true;
    }
    return x->args[0]->type == t && vec_f16(x->args[0], j, D, t, npacked, g, perm);
  case E_BINARY:
    if (x->op != '+' && x->op != '-' && x->op != '*')
      return false;
    for (int k = 0; k < 2; k++)
      if ((x->args[k]->kind != E_CONST && x->args[k]->type != t) || !vec_f16(x->args[k], j, D, t, npacked, g, perm))
        return false;
    return true;
  default:
    return false;
  }
}

/* Is l, the left side of parallel loop s's assignment, an element of a
 * register fragment in the mma layout indexed by s's two variables in order
 * over its shape?  Each thread then holds pairs of its elements at columns
 * j and j + 1, j even (local indices 2r and 2r + 1), and dequant_loop lets
 * it compute them as pairs: 2 at a time. */
static bool reg_pairs_dst(const tl_stmt *s, const tl_expr *l) {
  const tl_sym *D = l->sym;
  if (D->kind != SYM_BUFFER || D->scope != SCOPE_FRAGMENT || !D->in_regs || D->reg_layout != TL_LAYOUT_MMA ||
      D->ndim != 2 || s->nvars != 2 || l->nargs != 2)
    return false;
  for (int d = 0; d < 2; d++)
    if (l->args[d]->kind != E_NAME || l->args[d]->sym != s->vars[d] || s->extents[d]->val.i != D->dims[d])
      return false;
  return true;
}

/* Where every thread of register fragment D (mma layout) finds its pairs in
 * packed read x = P[..., g(j)] (into *m, when m is given), in chunks of
 * `chunk` elements, or false: P's rows not whole chunks; g(j) outside the
 * row for a column some thread holds; the threads' pairs not at the same
 * offsets from the chunk that holds their first element, g(jt)
 * (tl_pair_map), or before that chunk; or a
 * pair whose elements are neither in one 32-bit word 16 bits apart (the
 * word then shifted by whole bytes: tl_subbyte_f16_at) nor neighbours in
 * one byte (tl_subbyte_f16_pair's prmt), the lower column's element first.
 * Every column of every thread is evaluated: what the emitter assumes is
 * proven, whatever g is. */
static bool pair_map_in(const tl_expr *x, const tl_sym *j, const tl_sym *D, int64_t chunk, tl_arena *a,
                        tl_pair_map *m) {
  const tl_sym *P = x->sym;
  const tl_expr *g = x->args[x->nargs - 1];
  int bits = tl_dtype_bits(P->dtype);
  int64_t row = P->dims[P->ndim - 1], ni = D->mma_ni, wn = D->mma_wn;
  if (row % chunk || D->dims[1] != wn * ni * 8 || ni > 64)
    return false;
  int64_t lo[64], hi[64];
  for (int64_t wc = 0; wc < wn; wc++)
    for (int64_t q = 0; q < 4; q++) {
      int64_t jt = wc * ni * 8 + 2 * q, first;
      if (!eval_j(g, j, jt, &first) || first < 0 || first >= row)
        return false;
      int64_t cb = first / chunk * chunk;
      for (int64_t u = 0; u < ni; u++)
        for (int b = 0; b < 2; b++) {
          int64_t at;
          if (!eval_j(g, j, jt + 8 * u + b, &at) || at < 0 || at >= row)
            return false;
          int64_t *o = b ? &hi[u] : &lo[u];
          if (wc == 0 && q == 0)
            *o = at - cb;
          else if (*o != at - cb)
            return false;
        }
    }
  for (int64_t u = 0; u < ni; u++) {
    int64_t la = lo[u] * bits, ha = hi[u] * bits;
    if (lo[u] < 0 || hi[u] < 0) /* before the first element's chunk: the emitter counts chunks up from it */
      return false;
    bool word = la / 32 == ha / 32 && ha - la == 16;
    bool byte = hi[u] == lo[u] + 1 && lo[u] % 2 == 0 && la / 8 == ha / 8;
    if (!word && !byte)
      return false;
  }
  if (m) {
    m->read = x;
    m->chunk = chunk;
    m->n = ni;
    m->lo = tl_arena_alloc(a, sizeof(int64_t) * (size_t)ni);
    m->hi = tl_arena_alloc(a, sizeof(int64_t) * (size_t)ni);
    memcpy(m->lo, lo, sizeof(int64_t) * (size_t)ni);
    memcpy(m->hi, hi, sizeof(int64_t) * (size_t)ni);
  }
  return true;
}

/* pair_map_in with chunks of 16 bytes, else 8, else 4 (a thread's pairs
 * in fewer bytes than 16 leave the chunk's others to its neighbours). */
static bool pair_map(const tl_expr *x, const tl_sym *j, const tl_sym *D, tl_arena *a, tl_pair_map *m) {
  int bits = tl_dtype_bits(x->sym->dtype);
  for (int64_t bytes = 16; bytes >= 4; bytes /= 2)
    if (pair_map_in(x, j, D, bytes * 8 / bits, a, m))
      return true;
  return false;
}

/* The packed reads of x whose last index is not j itself (perm_elem), up
 * to max of them into out; their number. */
static int perm_reads(tl_expr *x, const tl_sym *j, const tl_expr **out, int n, int max) {
  if (x->kind == E_CALL && x->fn == FN_CAST && x->args[0]->kind == E_INDEX && tl_dtype_is_packed(x->args[0]->sym->dtype)) {
    const tl_expr *r = x->args[0], *l = r->args[r->nargs - 1];
    if (!(l->kind == E_NAME && l->sym == j)) {
      if (n < max)
        out[n] = r;
      n++;
    }
    return n;
  }
  for (int k = 0; k < x->nargs; k++)
    n = perm_reads(x->args[k], j, out, n, max);
  return n;
}

/* Does every permuted packed read of register-destination loop s have its
 * pair map (into s's, when a is given)? */
static bool pair_maps(tl_stmt *s, tl_arena *a) {
  const tl_expr *reads[16];
  const tl_stmt *as = s->body.items[0];
  const tl_sym *j = s->vars[s->nvars - 1];
  int n = perm_reads(as->value, j, reads, 0, 16);
  if (n > 16)
    return false;
  tl_pair_map *m = a && n ? tl_arena_alloc(a, sizeof *m * (size_t)n) : NULL;
  for (int k = 0; k < n; k++)
    if (!pair_map(reads[k], j, as->lhs->sym, a, m ? &m[k] : NULL))
      return false;
  if (a) {
    s->pair_maps = m;
    s->npair_maps = n;
  }
  return true;
}

/* The elements a dequantizing loop runs at a time (8, 16 or 32; 2 into a
 * register fragment: reg_pairs_dst), or 0.  NVIDIA targets only; bfloat16
 * from sm_80 (where the target has mma.sync). */
static int dequant_loop(const tl_stmt *s, const dq_ctx *c) {
  if (c->cg->dialect != TL_DIALECT_CUDA || s->kind != S_PARALLEL || s->body.n != 1 ||
      s->body.items[0]->kind != S_ASSIGN || s->extents[s->nvars - 1]->val.i % 8)
    return 0;
  bool bf16 = c->cg->mma;
  int64_t threads = c->threads;
  const tl_stmt *a = s->body.items[0];
  const tl_sym *j = s->vars[s->nvars - 1];
  tl_expr *l = a->lhs;
  bool regs = l->kind == E_INDEX && reg_pairs_dst(s, l);
  if (a->assign_op || l->kind != E_INDEX || !(regs || vec_elem(l, j, true)) || l->sym->kind != SYM_BUFFER)
    return 0;
  const tl_sym *D = l->sym;
  tl_type t = (tl_type)D->dtype;
  if (!(t == TL_FLOAT16 || (bf16 && t == TL_BFLOAT16)) || D->dims[D->ndim - 1] % 8 || a->value->type != t)
    return 0;
  if ((D->swizzled || D->wgmma_op) && D->ndim != 2)
    return 0;
  int npacked = 0, g = 32;
  if (!vec_f16(a->value, j, D, t, &npacked, &g, regs) || npacked == 0)
    return 0;
  if (regs)
    return pair_maps((tl_stmt *)s, NULL) ? 2 : 0;
  int64_t outer = 1, ext = s->extents[s->nvars - 1]->val.i;
  for (int i = 0; i + 1 < s->nvars; i++)
    outer *= s->extents[i]->val.i;
  while (g > 8 && (ext % g || outer * (ext / g) < threads)) /* every thread an iteration */
    g /= 2;
  return g;
}

/* The reads of tensor elements in x: *n of them, the last in *last. */
static void tensor_reads(const tl_expr *x, int *n, const tl_expr **last) {
  if (!x)
    return;
  if (x->kind == E_INDEX && x->sym->kind == SYM_TENSOR) {
    ++*n;
    *last = x;
  }
  for (int i = 0; i < x->nargs; i++)
    tensor_reads(x->args[i], n, last);
}

/* The read of parallel loop s that the CUDA back end makes 4 elements at a
 * time (tl_stmt.vec_read), or NULL.  A blocked register fragment gives each
 * thread per_thread neighbouring elements, tl_tid * per_thread + r, which
 * the loop's variables decode row-major by its extents; where per_thread
 * and the last extent are multiples of 4, local indices 4q .. 4q + 3 are
 * one row of the loop at last-variable values j0 .. j0 + 3, j0 a multiple
 * of 4.  The loop's one statement is an assignment (not into that tensor)
 * whose value reads one element X of a tensor: 4-byte elements (float32,
 * int32, uint32), X's last index j or B + j (j the loop's last variable,
 * B free of it and a multiple of 4), its other indices free of j, the
 * tensor's rows a constant multiple of 4 elements and its base aligned to
 * 16 bytes.  Then X at j0 .. j0 + 3 is 16 aligned bytes, and a vector is
 * wholly inside the tensor or wholly outside (its guard is the first
 * element's), so one load gives the 4 reads: the same values, with a
 * thread's 4 neighbours in one request where one at a time made every
 * warp-instruction touch 32 sectors (bench/README.md, session 15: the
 * split programs' adding kernel). */
static const tl_expr *vec_read_of(const tl_stmt *s, const tl_codegen *cg) {
  if (cg->dialect != TL_DIALECT_CUDA || s->vec_dequant || s->nvars < 1 || s->body.n != 1)
    return NULL;
  const tl_stmt *a = s->body.items[0];
  const tl_sym *o = tl_body_owner(&s->body, s->nvars == 2), *j = s->vars[s->nvars - 1];
  if (a->kind != S_ASSIGN || !o || o->reg_layout != TL_LAYOUT_BLOCKED || o->per_thread % 4 ||
      s->extents[s->nvars - 1]->val.i % 4)
    return NULL;
  int n = 0;
  const tl_expr *x = NULL;
  tensor_reads(a->value, &n, &x);
  if (n != 1 || (a->lhs && a->lhs->sym == x->sym))
    return NULL;
  const tl_sym *t = x->sym;
  int last = t->ndim - 1;
  if (!(t->dtype == TL_FLOAT32 || t->dtype == TL_INT32 || t->dtype == TL_UINT32) || x->nargs != t->ndim ||
      t->dims[last] < 0 || t->dims[last] % 4 || t->align < 16)
    return NULL;
  for (int d = 0; d < last; d++)
    if (tl_expr_names(x->args[d], j))
      return NULL;
  const tl_expr *l = x->args[last], *b = NULL;
  if (l->kind == E_NAME && l->sym == j)
    b = NULL;
  else if (l->kind == E_BINARY && l->op == '+' && l->args[1]->kind == E_NAME && l->args[1]->sym == j)
    b = l->args[0];
  else if (l->kind == E_BINARY && l->op == '+' && l->args[0]->kind == E_NAME && l->args[0]->sym == j)
    b = l->args[1];
  else
    return NULL;
  return b && (tl_expr_names(b, j) || !tl_multiple_of(b, 4)) ? NULL : x;
}

static tl_walk_act mark_vec_read(tl_stmt *s, void *user) {
  if (s->kind == S_PARALLEL)
    s->vec_read = vec_read_of(s, user);
  return TL_WALK_GO;
}

static tl_walk_act mark_dequant(tl_stmt *s, void *user) {
  if (s->kind == S_PARALLEL) {
    s->vec_dequant = dequant_loop(s, user);
    if (s->vec_dequant == 2)
      pair_maps(s, ((const dq_ctx *)user)->arena);
    s->vec_once = s->vec_dequant > 8 && vec_once(s->body.items[0]->value, s->vars[s->nvars - 1], s->vec_dequant);
  }
  return TL_WALK_GO;
}

tl_status tl_pass_place(tl_program *prog, int64_t smem_limit, tl_error *err) {
  return tl_pass_place_for(prog, smem_limit, &tl_codegen_cuda, err);
}

static bool place(tl_program *prog, int64_t smem_limit, const tl_codegen *cg, bool amd);

tl_status tl_pass_place_for(tl_program *prog, int64_t smem_limit, const tl_codegen *cg, tl_error *err) {
  bool amd = cg->dialect == TL_DIALECT_HIP && (cg->amd_matrix == TL_AMD_MATRIX_MFMA || cg->amd_matrix == TL_AMD_MATRIX_WMMA ||
                                               cg->amd_matrix == TL_AMD_MATRIX_WMMA_GFX12);
  /* a gemm that took wgmma for A from registers and then lost them is placed again off wgmma, where
   * mma.sync tiles C by the gemm's own policy */
  if (place(prog, smem_limit, cg, amd))
    place(prog, smem_limit, cg, amd);
  /* the matrix-core layouts demote more to LDS (row reads, A in registers):
   * when that no longer fits, place again on the portable path */
  if (amd && prog->smem_bytes > smem_limit)
    place(prog, smem_limit, cg, false);
  (void)err;
  return TL_OK;
}

/* Returns whether a gemm lost its wgmma with A from registers (then placing again gives mma.sync its own
 * tiling). */
static bool place(tl_program *prog, int64_t smem_limit, const tl_codegen *cg, bool amd) {
  P pp = {.prog = prog, .cg = cg, .wgmma = cg->wgmma, .int8_mma = cg->int8_mma, .fp8_mma = cg->fp8_mma,
          .wgmma_variant = cg->wgmma_variant}, *p = &pp;
  p->threads = prog->threads[0] * prog->threads[1] * prog->threads[2];
  for (int i = 0; i < prog->nbuffer_slots; i++) {
    tl_sym *s = prog->buffer_syms[i];
    s->smem_offset = -1;
    s->reg_layout = TL_LAYOUT_BLOCKED;
    s->swizzled = false;
    s->packed = false;
    s->wgmma_op = false;
    s->tma_dst = false;
    s->mma_interleaved = false;
    s->stages = 1;
    if (s->scope == SCOPE_FRAGMENT) {
      s->per_thread = (elems(s) + p->threads - 1) / p->threads;
      s->in_regs = s->per_thread <= TL_MAX_REG_ELEMS;
    }
  }
  tl_walk(&prog->body, &(tl_walker){.pre = scan_stmt}, p);
  p->amd_matrix = amd ? cg->amd_matrix : TL_AMD_MATRIX_NONE;
  p->wave = cg->warp;
  /* a target without mma.sync keeps every gemm on the portable path */
  tl_walk(&prog->body, &(tl_walker){.pre = cg->mma ? choose_mma_all : choose_amd_all}, p);
  p->smem_limit = smem_limit;
  for (bool changed = true; changed;) {
    do {
      p->changed = false;
      tl_walk(&prog->body, &(tl_walker){.pre = unify_all}, p);
    } while (p->changed);
    changed = resolve_rows(p);
    p->changed = false;
    tl_walk(&prog->body, &(tl_walker){.pre = resolve_gemm_a}, p);
    changed |= p->changed;
  }
  mark_packed(prog, &(dq_ctx){cg, p->threads, NULL});
  tl_walk(&prog->body, &(tl_walker){.pre = swizzle_operands}, p);
  tl_walk(&prog->body, &(tl_walker){.pre = mark_reduction}, p);
  tl_walk(&prog->body, &(tl_walker){.pre = mark_dequant}, &(dq_ctx){cg, p->threads, prog->arena});
  tl_walk(&prog->body, &(tl_walker){.pre = mark_vec_read}, (void *)cg);
  tl_walk(&prog->body, &(tl_walker){.pre = max_scratch}, p);
  prog->scratch_bytes = p->scratch;
  tl_pass_smem(prog);
  return p->rs_refused;
}

/* Lays the shared buffers out one after another (128-byte aligned, each as
 * many times as its pipeline stages), then the scratch. */
void tl_pass_smem(tl_program *prog) {
  int64_t off = 0;
  for (int i = 0; i < prog->nbuffer_slots; i++) {
    tl_sym *s = prog->buffer_syms[i];
    if (s->scope == SCOPE_LOCAL || (s->scope == SCOPE_FRAGMENT && s->in_regs))
      continue;
    if (s->view_of) { /* the memory of the buffer it views, declared (and placed) before it */
      s->smem_offset = s->view_of->smem_offset;
      continue;
    }
    int64_t al = s->wgmma_op || s->tma_dst ? 1024 : 128; /* 128-byte swizzle atoms: 1024 bytes */
    off = (off + al - 1) & ~(al - 1);
    s->smem_offset = off;
    off += (int64_t)tl_dtype_bytes(s->dtype, (uint64_t)elems(s)) * (s->stages > 1 ? s->stages : 1);
  }
  prog->mbar_offset = off = (off + 7) & ~(int64_t)7; /* pass_tma's mbarriers, 8 bytes each */
  off += 8 * (int64_t)prog->nmbar;
  if (prog->epi_bytes) { /* pass_store's staging buffer, in the 128-byte swizzle */
    prog->epi_offset = off = (off + 1023) & ~(int64_t)1023;
    off += prog->epi_bytes;
  }
  off = (off + 127) & ~(int64_t)127;
  prog->scratch_offset = off;
  prog->smem_bytes = off + prog->scratch_bytes;
}
