/*
 * emit_ptx.c - the direct PTX generator: a placed and lowered program to
 * the PTX text of one kernel, which nvJitLink (nvjitlink.c) or ptxas (ptxas.c) assembles
 * without NVRTC (bench/compile.md: NVRTC's load, front end and NVVM are
 * most of a small kernel's compile).
 *
 * Needs: a program after every pass of tl_compile (pass_place.c: where
 * buffers live; pass_range.c: which bounds guards are proven; pass_barrier.c:
 * where the barriers go; pass_raster.c: the blocks' order), for an NVIDIA
 * target of tl_ptx_target_ok (sm_80 to sm_90a).
 * Produces: the PTX text (ISA 8.0) and whether it must be assembled as a
 * whole program (ptxas.c, not nvjitlink.c: setmaxnreg, or wgmma beside an
 * instruction ptxas makes a call), or NULL with *err (TL_UNSUPPORTED, the
 * pointer of the first statement or expression outside the subset and what
 * it is): the caller then builds the program through emit_cuda.c and NVRTC
 * (compile.c: the back end's choice, with that message as the reason).
 * Keeps: the program (it only reads it).
 *
 * The subset (everything else is refused, never approximated):
 *   - one kernel, no workspaces, views, clusters or TMA stores;
 *   - on sm_90a, the gemms pass_place.c puts on wgmma as the passes lower
 *     them (emit_cuda.c's forms, their instructions shared through
 *     ptxform.c): a pipelined loop whose bulk tensor copies a producer
 *     warpgroup issues (pass_wspec.c: mbarrier expect-tx and try-wait
 *     phase loops, the stages freed one or more iterations
 *     late; with setmaxnreg only where ptxas assembles the PTX whole,
 *     ptxas.h: *whole), over the tiles of a
 *     persistent kernel or not, its gemms on
 *     wgmma with A and B in shared memory (float16 or bfloat16 operands,
 *     a float32 accumulator in registers, groups left in flight and
 *     drained after the loop; 8-bit operands, int8/uint8 into an int32
 *     accumulator, their tensors and buffers only copied in bulk) or A
 *     from a 16-bit fragment of the accumulator's layout (flash
 *     attention's P V: its pairs of halves), a gemm issued one iteration
 *     late after the loop's other one (pass_overlap.c: its group second,
 *     waited for before the statement that conflicts with it, the last
 *     iteration's after the loop), the warpgroups' ping-pong turns on
 *     named barriers 2.. (pass_wspec.c), the
 *     blocks in grid order, reversed or in rasterization stripes
 *     (pass_raster.c), a persistent kernel's growing tiles x slowest in
 *     groups of (y, z) pairs (emit_cuda.c's open_tiles), the copies
 *     before a wspec loop that the producer issues too (pass_wspec.c's pre
 *     copies: their own full and free mbarriers, one or two copies of the
 *     buffer, freed after their last reader); a cp.async copy of 16-byte chunks from a tensor
 *     into a (swizzled) shared buffer outside a pipelined loop (the last K
 *     tiles of a loop whose tiles pass_kgroup.c grouped); not yet: loops
 *     without a producer warpgroup (cp.async, or TMA with per-stage waits
 *     by the consumers), wg_lag loops, overlapped gemms outside a wspec
 *     loop, mma.sync;
 *   - dtypes: tensors, buffers and fragments of float32, float16, bfloat16
 *     and int32; scalar parameters of float32, int32, int64 and bool;
 *     values of bool, int32, int64 and the three floats (16-bit floats
 *     computed in float32 and rounded after each operation, as
 *     emit_cuda.c does);
 *   - buffers: register fragments of the blocked layout (thread t owns flat
 *     elements [t*P, t*P+P)), at most TL_PTX_MAX_PER_THREAD elements a
 *     thread, and of the mma layout (wgmma's accumulator: an element's
 *     indices are a register of the thread plus a constant of the local
 *     index), at most TL_PTX_MAX_ACC, each element a register of its own
 *     (a 16-bit one that emit_cuda.c packs in pairs: a register of two
 *     halves a pair, written by a copy of the whole of a float32 fragment
 *     of its layout and read by a wgmma only), and of the mma-rows layout
 *     (the rows of an mma-layout fragment, the same in a quad of lanes,
 *     read in a loop over such a fragment's elements as its row's register);
 *     shared buffers (and fragments pass_place.c put in shared memory) in
 *     the block's dynamic shared memory, read and written element by
 *     element when stored row-major in one stage (the swizzled, staged
 *     operands of bulk tensor copies and wgmma only by those); local
 *     arrays (4 bytes an element, as computed);
 *   - statements: alloc, alloc_var, let, assignment (to a fragment's own
 *     element, a tensor, shared or local element, a variable; a thread-level
 *     store into a shared buffer that its value or indices read, which
 *     emit_cuda.c makes lock-step, is refused), copy and fill between
 *     tensors, shared buffers, local arrays and fragments (element by
 *     element; a register fragment into a tensor or a shared buffer as
 *     wide as its layout allows: op_copy_vec, op_copy_acc), reduce of a blocked fragment by rows (pass_place.c's
 *     by_rows: warp shuffles and the shared scratch, as emit_cuda.c), and
 *     of an mma-layout one into an mma-rows one by the quads of lanes
 *     that hold its rows (shuffles, no scratch: tl_reduce_in_quads),
 *     cumsum, cummax and cummin (each element folds its prefix in a loop;
 *     a register fragment source through the shared scratch),
 *     parallel (by the owner of the fragment its body indexes, unrolled over
 *     the owner's elements, or cooperatively, element e by thread e mod T,
 *     as a loop; one that chooses by an affine comparison, pass_uniform.c,
 *     decided once per tile where it holds everywhere or nowhere),
 *     serial, unroll and vectorized loops (emitted as loops:
 *     ptxas unrolls what pays), if, sync_threads, the layout and swizzle
 *     hints;
 *   - expressions: + - * on the integers (wrapping), // % and ceildiv on
 *     them (Python's, 0 for a divisor 0, as emit_cuda.c's tl_fdiv, tl_fmod,
 *     tl_cdiv), + - * / // on floats (IEEE, rounded to nearest even: .rn,
 *     never contracted), & | ^ on integers and bools, comparisons
 *     (unordered != as C's), and/or/not, casts among the types above (float
 *     to integer truncating and saturating, NaN to 0, as cvt.rzi does and
 *     tl_f2i32 specifies), min, max, abs, clamp, fma, sqrt (exact: sqrt.rn),
 *     floor, ceil, trunc, exp2 (ex2.approx.ftz, the CUDA path's tl_ex2f:
 *     tile-ir-v1.md 8.3), if_then_else, isnan, isinf, thread_binding.  Not
 *     yet: shifts, exp, log, tanh and the other library functions (their
 *     CUDA sequences are exact to 1-2 ulp; PTX's approximate forms are not
 *     within every bound of the specification), unsigned and 8/16-bit
 *     integers, float64, atomics, reductions other than by rows (and of
 *     mma-layout fragments but in quads), gemms but the wgmma ones above,
 *     cp.async
 *     but the copies above.
 * Global reads outside a tensor give 0 and writes outside are dropped, as
 * in emit_cuda.c; a dimension pass_range.c proved inside keeps no guard.
 *
 * Registers are virtual and never reused (PTX allows any number; ptxas
 * allocates), except a variable's (alloc_var), a loop's counter and a
 * fragment element's, which are assigned again.  Generation is
 * deterministic.  ptxas is the only optimizer, so the fragment loops are
 * unrolled with constant register names, a copy of an accumulator into a
 * tensor stores at constant offsets from one address per thread, and a
 * wgmma's descriptors are two registers plus constants.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "ir.h"
#include "pass.h"
#include "ptxform.h"

#define TL_PTX_STR_(x) #x
#define TL_PTX_STR(x) TL_PTX_STR_(x)

/* Register classes: predicate, 32-bit integer, 64-bit integer, float32, 16-bit. */
enum { CP, CR, CD, CF, CH, NCLASS };
static const char *const cls_prefix[NCLASS] = {"%p", "%r", "%rd", "%f", "%h"};
static const char *const cls_decl[NCLASS] = {".pred", ".b32", ".b64", ".f32", ".b16"};

typedef struct {
  tl_arena *a;
  const tl_program *prog;
  tl_error *err;
  bool failed;
  tl_text out;
  int nreg[NCLASS];
  int label;
  int64_t T;
  const char *tid;          /* %r: the thread's index in the block */
  const char *smem;         /* %r: the shared address of the block's dynamic shared memory, or NULL */
  const char **val;         /* by value slot: the register holding the symbol's value */
  const char **base;        /* by param index: a tensor's global address (%rd) */
  const char *(*dims)[TL_MAX_DIMS]; /* by param index: a tensor's extents (%rd) */
  const tl_sym *owner;      /* the register fragment whose elements the current loop visits, or NULL */
  int64_t r;                /* its local index, when owner */
  bool in_par;              /* inside a parallel loop */
  const tl_stmt *par;       /* that loop, when in_par */
  const char *fill_value;   /* the value of the fill being emitted */
  struct {                  /* the start registers of the regions of the statement being emitted, computed once
                               before its loop over elements (hoist_region) */
    const tl_region *r;
    const char *lo[TL_MAX_DIMS];
  } hoisted[2];
  const tl_stmt *cur;       /* the statement being emitted (for the pointer of a failure) */
  const char *bar;          /* the block barrier: bar.sync 0, or the program's threads' named barrier 1 beside a
                               producer warpgroup */
  /* the tensor-core forms (sm_90a) */
  const char *mbar;         /* %r: the shared address of the mbarriers, or NULL */
  const char *tmap[TL_MAX_TMAPS]; /* %rd: the generic address of each tensor map parameter */
  const char **stage;       /* by buffer slot: %r, the shared address of the pipeline stage the iteration uses */
  const char *cit;          /* %rd: the consumer's wspec iterations waited for, over the tiles */
  const char **pre_cq;      /* by buffer slot: %rd, the tiles whose pre copy into it the consumers waited for */
  const char *lane0;        /* %p: the thread is its warp's first */
  const char *tg[3], *ntiles; /* %rd: a persistent kernel's grid of tiles, and their number */
  bool wgmma;               /* a wgmma was emitted */
  const tl_stmt *pipe;      /* the wspec loop being emitted (its body's late gemm: pass_overlap.c), or NULL */
  const char *pipe_g;       /* %rd: its iteration's index over the tiles (the stages' counter) */
  const char *pipe_c;       /* %rd: its iteration's index in the loop */
  int pp_wg;                /* in the body of a ping-pong loop (pass_wspec.c): the program's warpgroups, else 0 */
  int varying;              /* inside that many ifs or loops whose condition or trips vary among the threads (a
                               warp's lanes may part: no exchange among them, as emit_cuda.c's `uniform`) */
  tl_vec folded;            /* fills a gemm on wgmma clears C instead of, and those gemms (tl_fold_fills) */
  const char *call;         /* the first instruction emitted that ptxas makes a subroutine call, or NULL */
  const char *no_whole;     /* why the PTX cannot be assembled as a whole program (ptxas.h), or NULL */
  bool whole;               /* it must be: setmaxnreg, or wgmma beside a call */
} P;

#define S(...) tl_arena_printf(p->a, __VA_ARGS__)

/* ---- output ---------------------------------------------------------------------------- */
static void put(P *p, const char *s) {
  tl_text_put(p->a, &p->out, s);
}

/* One instruction (or label, when fmt ends in ':'), indented. */
static void ins(P *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ins(P *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *tmp = tl_arena_vprintf(p->a, fmt, ap); /* whole, however long */
  va_end(ap);
  size_t n = strlen(tmp);
  bool label = n && tmp[n - 1] == ':';
  /* instructions ptxas implements as subroutine calls: in the relocatable code nvJitLink compiles, a call
   * serializes every wgmma of the function (ptxas C7509), which tl_emit_ptx refuses */
  static const char *const calls[] = {"div.rn.f", "sqrt.rn.f", "rcp.rn.f", "div.s64", "div.u64", "rem.s64", "rem.u64"};
  for (size_t i = 0; i < sizeof calls / sizeof *calls && !p->call; i++)
    if (strncmp(tmp, calls[i], strlen(calls[i])) == 0 || (tmp[0] == '@' && strstr(tmp, calls[i])))
      p->call = tmp;
  put(p, label ? "" : "\t");
  put(p, tmp);
  put(p, label ? "\n" : ";\n");
}

static void fail(P *p, const char *pointer, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(P *p, const char *pointer, const char *fmt, ...) {
  if (p->failed)
    return;
  p->failed = true;
  va_list ap;
  va_start(ap, fmt);
  tl_error_setv(p->err, TL_UNSUPPORTED, fmt, ap);
  va_end(ap);
  if (p->err && pointer)
    snprintf(p->err->pointer, sizeof p->err->pointer, "%s", pointer);
}

static const char *nr(P *p, int c) {
  if (c < 0 || c >= NCLASS) /* a class-less type: failed already */
    c = CR;
  return S("%s%d", cls_prefix[c], p->nreg[c]++);
}
static int new_label(P *p) { return p->label++; }

/* ---- types ------------------------------------------------------------------------------- */
static bool is_float(tl_type t) { return t == TL_FLOAT32 || t == TL_FLOAT16 || t == TL_BFLOAT16; }

/* The class of registers a value of type t lives in, or -1 outside the subset. */
static int cls_of(tl_type t) {
  switch (t) {
  case TL_BOOL: return CP;
  case TL_INT32: return CR;
  case TL_INT64: case TL_TY_UINT: return CD;
  case TL_FLOAT32: case TL_FLOAT16: case TL_BFLOAT16: return CF;
  default: return -1;
  }
}

/* Is t a dtype a tensor or fragment element of the subset may have? */
static bool elem_ok(tl_dtype t) { return t == TL_FLOAT32 || t == TL_FLOAT16 || t == TL_BFLOAT16 || t == TL_INT32; }

/* Is t an 8-bit wgmma operand type?  Tensors and shared buffers of one are only copied by bulk tensor
 * copies and read by wgmma (address and smem_addr refuse them element by element). */
static bool mma8(tl_dtype t) { return t == TL_FLOAT8_E4M3 || t == TL_FLOAT8_E5M2 || t == TL_INT8 || t == TL_UINT8; }

static bool need_cls(P *p, tl_type t, const char *pointer) {
  if (cls_of(t) >= 0)
    return true;
  fail(p, pointer, "the PTX back end has no values of type %s", tl_type_name(t));
  return false;
}

/* Rounds float register x to 16-bit float type t (nothing for float32). */
static const char *round_to(P *p, tl_type t, const char *x) {
  if (t != TL_FLOAT16 && t != TL_BFLOAT16)
    return x;
  const char *h = nr(p, CH), *y = nr(p, CF);
  if (t == TL_FLOAT16) {
    ins(p, "cvt.rn.f16.f32 %s, %s", h, x);
    ins(p, "cvt.f32.f16 %s, %s", y, h);
  } else {
    const char *w = nr(p, CR);
    ins(p, "cvt.rn.bf16.f32 %s, %s", h, x);
    ins(p, "cvt.u32.u16 %s, %s", w, h);
    ins(p, "shl.b32 %s, %s, 16", w, w);
    ins(p, "mov.b32 %s, %s", y, w);
  }
  return y;
}

/* A float32 immediate. */
static const char *fimm(P *p, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return S("0f%08" PRIX32, u);
}

/* A register holding constant v of type t (a typed or untyped constant's
 * value, as emit_cuda.c's literal() and conv() give it). */
static const char *constant(P *p, const tl_expr *x, tl_type to) {
  tl_type from = x->type;
  int c = cls_of(to);
  const char *d = nr(p, c < 0 ? CR : c);
  bool ffrom = from == TL_TY_UREAL || is_float(from) || from == TL_FLOAT64;
  switch (c) {
  case CP:
    ins(p, "setp.ne.u32 %s, %d, 0", d, ffrom ? x->val.f != 0 : x->val.i != 0);
    return d;
  case CR:
    if (ffrom) /* a float constant to int32: truncating, saturating, NaN to 0 (tl_f2i32) */
      ins(p, "mov.b32 %s, %" PRId32, d,
          x->val.f != x->val.f ? 0 : x->val.f <= -2147483648.0 ? INT32_MIN : x->val.f >= 2147483647.0 ? INT32_MAX
                                                                         : (int32_t)x->val.f);
    else
      ins(p, "mov.b32 %s, %" PRId32, d, (int32_t)(uint32_t)x->val.u);
    return d;
  case CD:
    if (ffrom) {
      fail(p, x->pointer, "the PTX back end does not convert a real constant to a 64-bit integer");
      return d;
    }
    ins(p, "mov.b64 %s, %" PRId64, d, x->val.i);
    return d;
  case CF: {
    double v = ffrom ? x->val.f : from == TL_BOOL ? (double)(x->val.i != 0) : (double)x->val.i;
    if (!ffrom && from != TL_BOOL && (from != TL_INT32 || to != TL_FLOAT32) && from != TL_TY_UINT) {
      fail(p, x->pointer, "the PTX back end does not convert %s to %s", tl_type_name(from), tl_type_name(to));
      return d;
    }
    if (from == TL_FLOAT32) /* a float32 constant is a float (emit_cuda.c's literal), then rounded */
      v = (double)(float)v;
    float f = (to == TL_FLOAT16 || to == TL_BFLOAT16) ? (float)tl_round_to((tl_dtype)to, v) : (float)v;
    if (from == TL_TY_UINT && to == TL_FLOAT32)
      f = (float)x->val.i; /* (float)(long long): one rounding */
    ins(p, "mov.f32 %s, %s", d, fimm(p, f));
    return d;
  }
  default:
    fail(p, x->pointer, "the PTX back end has no values of type %s", tl_type_name(to));
    return d;
  }
}

/* Converts register x of type `from` to type `to` (emit_cuda.c's conv()). */
static const char *conv(P *p, const char *x, tl_type from, tl_type to, const char *pointer) {
  if (from == to || (from == TL_TY_UINT && to == TL_INT64) || (from == TL_INT64 && to == TL_TY_UINT))
    return x;
  int cf = cls_of(from), ct = cls_of(to);
  if (cf < 0 || ct < 0) {
    fail(p, pointer, "the PTX back end has no values of type %s", tl_type_name(cf < 0 ? from : to));
    return x;
  }
  const char *d = nr(p, ct);
  switch (ct) {
  case CP:
    if (cf == CP)
      return x;
    if (cf == CF)
      ins(p, "setp.neu.f32 %s, %s, 0f00000000", d, x); /* C's != : true for NaN */
    else
      ins(p, "setp.ne.%s %s, %s, 0", cf == CR ? "s32" : "s64", d, x);
    return d;
  case CR:
    if (cf == CP)
      ins(p, "selp.b32 %s, 1, 0, %s", d, x);
    else if (cf == CD)
      ins(p, "cvt.u32.u64 %s, %s", d, x); /* the low 32 bits, as C's (int) */
    else
      ins(p, "cvt.rzi.s32.f32 %s, %s", d, x); /* truncates, saturates, NaN to 0 (tl_f2i32) */
    return d;
  case CD:
    if (cf == CP)
      ins(p, "selp.b64 %s, 1, 0, %s", d, x);
    else if (cf == CR)
      ins(p, "cvt.s64.s32 %s, %s", d, x);
    else
      ins(p, "cvt.rzi.s64.f32 %s, %s", d, x); /* tl_f2i64 */
    return d;
  case CF:
    if (cf == CF) /* float to float: a 16-bit type rounds (from is never wider than float32 here) */
      return round_to(p, to, x);
    if (cf == CP) {
      ins(p, "selp.f32 %s, 0f3F800000, 0f00000000, %s", d, x);
      return d;
    }
    if (to != TL_FLOAT32) { /* emit_cuda.c rounds an int32 or int64 through a double (round to odd) */
      fail(p, pointer, "the PTX back end does not convert %s to %s", tl_type_name(from), tl_type_name(to));
      return x;
    }
    ins(p, "cvt.rn.f32.%s %s, %s", cf == CR ? "s32" : "s64", d, x);
    return d;
  }
  return x;
}

/* ---- expressions --------------------------------------------------------------------------- */
static const char *ex(P *p, const tl_expr *x);

/* The value of x converted to type `to`; an untyped constant is made in `to` directly. */
static const char *ex_to(P *p, const tl_expr *x, tl_type to) {
  if (x->kind == E_CONST)
    return constant(p, x, to);
  return conv(p, ex(p, x), x->type, to, x->pointer);
}

static bool is_cmp(int op) { return op == '<' || op == '>' || op == OP_LE || op == OP_GE || op == OP_EQ || op == OP_NE; }

static tl_type common(tl_type a, tl_type b) {
  if (a == b)
    return a;
  if (a == TL_TY_UINT || a == TL_TY_UREAL)
    return b == TL_TY_UINT || b == TL_TY_UREAL ? (a == TL_TY_UREAL || b == TL_TY_UREAL ? TL_TY_UREAL : TL_TY_UINT) : b;
  if (b == TL_TY_UINT || b == TL_TY_UREAL)
    return a;
  return (tl_type)tl_common_dtype((tl_dtype)a, (tl_dtype)b);
}

static const char *ityp(int c) { return c == CR ? "s32" : "s64"; }
static const char *btyp(int c) { return c == CR ? "b32" : "b64"; }

enum { TL_PTX_CEILDIV = 1 }; /* idiv's op for ceildiv (not an operator's code) */

/* Python's a // b, a % b and ceildiv(a, b) on signed integers of class c,
 * as emit_cuda.c's tl_fdiv, tl_fmod and tl_cdiv (prelude_cuda.h): 0 for b
 * == 0; for b == -1 the quotient -a (wrapping) and the remainder 0;
 * otherwise the truncated quotient moved down (//) or up (ceildiv) when the
 * division is inexact and the signs differ (agree), and the remainder
 * taking b's sign. */
static const char *idiv(P *p, int c, int op, const char *a, const char *b) {
  const char *ty = ityp(c), *bt = btyp(c), *zero = nr(p, CP), *m1 = nr(p, CP), *b1 = nr(p, c), *q = nr(p, c),
             *r = nr(p, c), *d = nr(p, c);
  ins(p, "setp.eq.%s %s, %s, 0", ty, zero, b);
  ins(p, "setp.eq.%s %s, %s, -1", ty, m1, b);
  ins(p, "selp.%s %s, 1, %s, %s", bt, b1, b, zero); /* b itself, or 1 where b is 0 or -1 (no trap, no overflow) */
  ins(p, "selp.%s %s, 1, %s, %s", bt, b1, b1, m1);
  ins(p, "div.%s %s, %s, %s", ty, q, a, b1);
  ins(p, "rem.%s %s, %s, %s", ty, r, a, b1);
  const char *inexact = nr(p, CP), *an = nr(p, CP), *bn = nr(p, CP), *k = nr(p, CP);
  ins(p, "setp.ne.%s %s, %s, 0", ty, inexact, r);
  ins(p, "setp.lt.%s %s, %s, 0", ty, an, op == '%' ? r : a);
  ins(p, "setp.lt.%s %s, %s, 0", ty, bn, b);
  ins(p, "xor.pred %s, %s, %s", k, an, bn); /* signs differ */
  if (op == TL_PTX_CEILDIV)
    ins(p, "not.pred %s, %s", k, k); /* signs agree */
  ins(p, "and.pred %s, %s, %s", k, k, inexact);
  if (op == '%') {
    const char *rb = nr(p, c);
    ins(p, "add.%s %s, %s, %s", ty, rb, r, b);
    ins(p, "selp.%s %s, %s, %s, %s", bt, d, rb, r, k);
    ins(p, "selp.%s %s, 0, %s, %s", bt, d, d, m1);
  } else {
    const char *qa = nr(p, c), *na = nr(p, c);
    ins(p, "add.%s %s, %s, %s", ty, qa, q, op == OP_FLOORDIV ? "-1" : "1");
    ins(p, "selp.%s %s, %s, %s, %s", bt, d, qa, q, k);
    ins(p, "neg.%s %s, %s", ty, na, a);
    ins(p, "selp.%s %s, %s, %s, %s", bt, d, na, d, m1);
  }
  ins(p, "selp.%s %s, 0, %s, %s", bt, d, d, zero);
  return d;
}

static const char *ex_binary(P *p, const tl_expr *x) {
  const tl_expr *l = x->args[0], *r = x->args[1];
  int op = x->op;
  if (op == OP_AND || op == OP_OR) {
    const char *a = ex_to(p, l, TL_BOOL), *b = ex_to(p, r, TL_BOOL), *d = nr(p, CP);
    ins(p, "%s.pred %s, %s, %s", op == OP_AND ? "and" : "or", d, a, b);
    return d;
  }
  if (is_cmp(op)) {
    tl_type ct = common(l->type, r->type);
    if (ct == TL_TY_UREAL)
      ct = TL_FLOAT32;
    if (!need_cls(p, ct, x->pointer))
      return "%p0";
    const char *a = ex_to(p, l, ct), *b = ex_to(p, r, ct), *d = nr(p, CP);
    int c = cls_of(ct);
    if (c == CP) {
      if (op != OP_EQ && op != OP_NE) {
        fail(p, x->pointer, "the PTX back end compares bools only with == and !=");
        return d;
      }
      ins(p, "xor.pred %s, %s, %s", d, a, b);
      if (op == OP_EQ)
        ins(p, "not.pred %s, %s", d, d);
      return d;
    }
    const char *cmp = op == '<' ? "lt" : op == '>' ? "gt" : op == OP_LE ? "le" : op == OP_GE ? "ge" : op == OP_EQ ? "eq"
                                                                                                          : (c == CF ? "neu" : "ne");
    ins(p, "setp.%s.%s %s, %s, %s", cmp, c == CF ? "f32" : ityp(c), d, a, b);
    return d;
  }
  tl_type t = x->type;
  if (!need_cls(p, t, x->pointer))
    return "%r0";
  int c = cls_of(t);
  if (c == CF && (op == '+' || op == '-' || op == '*' || op == '/' || op == OP_FLOORDIV)) {
    const char *a = ex_to(p, l, t), *b = ex_to(p, r, t), *d = nr(p, CF);
    static const char *const name[] = {['+'] = "add", ['-'] = "sub", ['*'] = "mul", ['/'] = "div"};
    ins(p, "%s.rn.f32 %s, %s, %s", name[op == OP_FLOORDIV ? '/' : op], d, a, b);
    if (op == OP_FLOORDIV) { /* floorf(a / b) */
      const char *f = nr(p, CF);
      ins(p, "cvt.rmi.f32.f32 %s, %s", f, d);
      d = f;
    }
    return round_to(p, t, d);
  }
  if (c == CP && (op == '&' || op == '|' || op == '^')) {
    const char *a = ex_to(p, l, t), *b = ex_to(p, r, t), *d = nr(p, CP);
    ins(p, "%s.pred %s, %s, %s", op == '&' ? "and" : op == '|' ? "or" : "xor", d, a, b);
    return d;
  }
  if (c == CR || c == CD) {
    const char *name = op == '+' ? "add" : op == '-' ? "sub" : op == '*' ? "mul.lo" : op == '&' ? "and" : op == '|' ? "or"
                                                                                          : op == '^' ? "xor" : NULL;
    if (op == OP_FLOORDIV || op == '%')
      return idiv(p, c, op, ex_to(p, l, t), ex_to(p, r, t));
    if (name) { /* wrapping, as emit_cuda.c's unsigned arithmetic */
      const char *a = ex_to(p, l, t), *b = ex_to(p, r, t), *d = nr(p, c);
      bool bits = op == '&' || op == '|' || op == '^';
      ins(p, "%s.%s %s, %s, %s", name, bits ? btyp(c) : ityp(c), d, a, b);
      return d;
    }
  }
  fail(p, x->pointer, "the PTX back end has no operator '%s' on %s yet", tl_op_text(op), tl_type_name(t));
  return nr(p, c);
}

static const char *ex_call(P *p, const tl_expr *x) {
  tl_type t = x->type;
  tl_expr *const *a = x->args;
  int c = cls_of(t);
  switch (x->fn) {
  case FN_CAST:
    if (!need_cls(p, (tl_type)x->dtype_arg, x->pointer))
      return "%r0";
    return ex_to(p, a[0], (tl_type)x->dtype_arg);
  case FN_IF_THEN_ELSE: {
    if (!need_cls(p, t, x->pointer))
      return "%r0";
    const char *k = ex_to(p, a[0], TL_BOOL), *u = ex_to(p, a[1], t), *v = ex_to(p, a[2], t), *d = nr(p, c);
    if (c == CP) { /* (k and u) or (not k and v) */
      const char *m = nr(p, CP), *n = nr(p, CP);
      ins(p, "and.pred %s, %s, %s", m, k, u);
      ins(p, "not.pred %s, %s", n, k);
      ins(p, "and.pred %s, %s, %s", n, n, v);
      ins(p, "or.pred %s, %s, %s", d, m, n);
    } else {
      ins(p, "selp.%s %s, %s, %s, %s", c == CF ? "f32" : btyp(c), d, u, v, k);
    }
    return d;
  }
  case FN_MIN:
  case FN_MAX:
  case FN_CLAMP: {
    if (c != CF && c != CR && c != CD) {
      fail(p, x->pointer, "the PTX back end has no %s of %s", tl_fn_name(x->fn), tl_type_name(t));
      return "%r0";
    }
    const char *ty = c == CF ? "f32" : ityp(c); /* min.f32/max.f32 return the other operand of a NaN, as fminf */
    const char *u = ex_to(p, a[0], t), *v = ex_to(p, a[1], t), *d = nr(p, c);
    ins(p, "%s.%s %s, %s, %s", x->fn == FN_MIN ? "min" : "max", ty, d, u, v);
    if (x->fn == FN_CLAMP) { /* min(max(x, lo), hi) */
      const char *h = ex_to(p, a[2], t), *e = nr(p, c);
      ins(p, "min.%s %s, %s, %s", ty, e, d, h);
      d = e;
    }
    return d;
  }
  case FN_ABS: {
    if (c != CF && c != CR && c != CD) {
      fail(p, x->pointer, "the PTX back end has no abs of %s", tl_type_name(t));
      return "%r0";
    }
    const char *u = ex_to(p, a[0], t), *d = nr(p, c);
    ins(p, "abs.%s %s, %s", c == CF ? "f32" : ityp(c), d, u); /* abs.s32 of INT32_MIN wraps, as tl_abs_i32 */
    return d;
  }
  case FN_SQRT: case FN_EXP2: case FN_FLOOR: case FN_CEIL: case FN_TRUNC: case FN_FMA: {
    if (c != CF) {
      fail(p, x->pointer, "the PTX back end has no %s of %s", tl_fn_name(x->fn), tl_type_name(t));
      return "%f0";
    }
    const char *u = ex_to(p, a[0], t), *d = nr(p, CF);
    switch (x->fn) {
    case FN_SQRT: ins(p, "sqrt.rn.f32 %s, %s", d, u); break;
    case FN_EXP2: ins(p, "ex2.approx.ftz.f32 %s, %s", d, u); break; /* emit_cuda.c's tl_ex2f */
    case FN_FLOOR: ins(p, "cvt.rmi.f32.f32 %s, %s", d, u); break;
    case FN_CEIL: ins(p, "cvt.rpi.f32.f32 %s, %s", d, u); break;
    case FN_TRUNC: ins(p, "cvt.rzi.f32.f32 %s, %s", d, u); break;
    default: {
      const char *v = ex_to(p, a[1], t), *w = ex_to(p, a[2], t);
      ins(p, "fma.rn.f32 %s, %s, %s, %s", d, u, v, w);
    }
    }
    return round_to(p, t, d);
  }
  case FN_CEILDIV:
    if (c != CR && c != CD) {
      fail(p, x->pointer, "the PTX back end has no ceildiv of %s", tl_type_name(t));
      return "%r0";
    }
    return idiv(p, c, TL_PTX_CEILDIV, ex_to(p, a[0], t), ex_to(p, a[1], t));
  case FN_THREAD_BINDING: { /* (int)threadIdx.{x,y,z} */
    const char *d = nr(p, CR);
    ins(p, "mov.u32 %s, %%tid.%c", d, "xyz"[a[0]->val.i & 3]);
    return d;
  }
  case FN_ISNAN:
  case FN_ISINF: {
    tl_type at = a[0]->type;
    const char *d = nr(p, CP);
    if (!is_float(at) && at != TL_TY_UREAL) { /* an integer is never NaN or infinite */
      ex(p, a[0]);
      ins(p, "setp.ne.u32 %s, 0, 0", d);
      return d;
    }
    const char *u = ex_to(p, a[0], TL_FLOAT32);
    if (x->fn == FN_ISNAN) {
      ins(p, "setp.nan.f32 %s, %s, %s", d, u, u);
    } else {
      const char *m = nr(p, CF);
      ins(p, "abs.f32 %s, %s", m, u);
      ins(p, "setp.eq.f32 %s, %s, 0f7F800000", d, m);
    }
    return d;
  }
  default:
    fail(p, x->pointer, "the PTX back end has no function %s yet", tl_fn_name(x->fn));
    return "%r0";
  }
}

/* ---- tensor elements ---------------------------------------------------------------------------- */
/* The global address of element idx (64-bit registers) of tensor s and,
 * in *guard, the predicate of its bounds guard over the dimensions not in
 * `inside` (NULL: none), or NULL when every dimension is proven. */
static const char *address(P *p, const tl_sym *s, const char *const *idx, const bool *inside, const char **guard) {
  if (!elem_ok(s->dtype)) {
    fail(p, p->cur ? p->cur->pointer : NULL, "the PTX back end reads and writes no %s tensor element by element "
         "('%s': its bulk tensor copies and wgmma take it)", tl_dtype_name(s->dtype), s->name);
    *guard = NULL;
    return "%rd0";
  }
  const char *o = idx[0], *g = NULL;
  for (int d = 0; d < s->ndim; d++) {
    if (d > 0) {
      const char *m = nr(p, CD);
      ins(p, "mad.lo.s64 %s, %s, %s, %s", m, o, p->dims[s->param_index][d], idx[d]);
      o = m;
    }
    if (inside && inside[d])
      continue;
    const char *q = nr(p, CP); /* (unsigned) idx < extent: also false for a negative index */
    ins(p, "setp.lt.u64 %s, %s, %s", q, idx[d], p->dims[s->param_index][d]);
    if (g) {
      const char *b = nr(p, CP);
      ins(p, "and.pred %s, %s, %s", b, g, q);
      q = b;
    }
    g = q;
  }
  const char *ad = nr(p, CD);
  ins(p, "mad.lo.s64 %s, %s, %d, %s", ad, o, (int)tl_dtype_size(s->dtype), p->base[s->param_index]);
  *guard = g;
  return ad;
}

/* Loads an element of dtype t at address ad of state space sp ("global",
 * "shared"), predicated by guard g (0 where it is false), as a value of t. */
static const char *load_at(P *p, const char *sp, tl_dtype t, const char *ad, const char *g) {
  const char *pre = g ? S("@%s ", g) : "";
  if (t == TL_FLOAT32 || t == TL_INT32) {
    int c = t == TL_FLOAT32 ? CF : CR;
    const char *d = nr(p, c);
    if (g)
      ins(p, "mov.b32 %s, 0", d);
    ins(p, "%sld.%s.%s %s, [%s]", pre, sp, c == CF ? "f32" : "b32", d, ad);
    return d;
  }
  const char *h = nr(p, CH), *d = nr(p, CF);
  if (g)
    ins(p, "mov.b16 %s, 0", h);
  ins(p, "%sld.%s.b16 %s, [%s]", pre, sp, h, ad);
  if (t == TL_FLOAT16) {
    ins(p, "cvt.f32.f16 %s, %s", d, h);
  } else { /* bfloat16: its bits are float32's upper half */
    const char *w = nr(p, CR);
    ins(p, "cvt.u32.u16 %s, %s", w, h);
    ins(p, "shl.b32 %s, %s, 16", w, w);
    ins(p, "mov.b32 %s, %s", d, w);
  }
  return d;
}

/* Stores v (a value of dtype t) at address ad of state space sp, predicated by g. */
static void store_at(P *p, const char *sp, tl_dtype t, const char *ad, const char *g, const char *v) {
  const char *pre = g ? S("@%s ", g) : "";
  if (t == TL_FLOAT32 || t == TL_INT32) {
    ins(p, "%sst.%s.%s [%s], %s", pre, sp, t == TL_FLOAT32 ? "f32" : "b32", ad, v);
    return;
  }
  const char *h = nr(p, CH);
  ins(p, "cvt.rn.%s.f32 %s, %s", t == TL_FLOAT16 ? "f16" : "bf16", h, v);
  ins(p, "%sst.%s.b16 [%s], %s", pre, sp, ad, h);
}

/* Loads element idx of tensor s (0 outside it) as a value of its dtype. */
static const char *load(P *p, const tl_sym *s, const char *const *idx, const bool *inside) {
  const char *g, *ad = address(p, s, idx, inside, &g);
  return load_at(p, "global", s->dtype, ad, g);
}

/* Stores v (a value of s's dtype) at element idx of tensor s (nothing outside it). */
static void store(P *p, const tl_sym *s, const char *const *idx, const bool *inside, const char *v) {
  const char *g, *ad = address(p, s, idx, inside, &g);
  store_at(p, "global", s->dtype, ad, g, v);
}

/* Is s a buffer in shared memory: a shared tile, or a fragment pass_place.c put there? */
static bool in_smem(const tl_sym *s) {
  return s->kind == SYM_BUFFER && (s->scope == SCOPE_SHARED || (s->scope == SCOPE_FRAGMENT && !s->in_regs));
}

/* Is s a local array (alloc_local): per-thread memory holding each element
 * as the value it is computed in (float for the float types, int32), as
 * emit_cuda.c's l_NAME arrays do? */
static bool in_local(const tl_sym *s) { return s->kind == SYM_BUFFER && s->scope == SCOPE_LOCAL; }

/* The row-major element number (32-bit register) of element idx (64-bit
 * registers) of buffer s, in 32-bit arithmetic. */
static const char *row_major(P *p, const tl_sym *s, const char *const *idx) {
  const char *o = nr(p, CR);
  ins(p, "cvt.u32.u64 %s, %s", o, idx[0]);
  for (int d = 1; d < s->ndim; d++) {
    const char *w = nr(p, CR), *m = nr(p, CR);
    ins(p, "cvt.u32.u64 %s, %s", w, idx[d]);
    ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", m, o, s->dims[d], w);
    o = m;
  }
  return o;
}

/* The local address (64-bit) of element idx of local array s: row-major
 * (row_major), 4 bytes an element. */
static const char *local_addr(P *p, const tl_sym *s, const char *const *idx) {
  const char *o = row_major(p, s, idx);
  const char *b = nr(p, CD), *ad = nr(p, CD);
  ins(p, "mov.u64 %s, l%d", b, s->slot);
  ins(p, "mad.wide.s32 %s, %s, 4, %s", ad, o, b);
  return ad;
}

static const char *local_load(P *p, const tl_sym *s, const char *const *idx) {
  const char *d = nr(p, s->dtype == TL_INT32 ? CR : CF);
  ins(p, "ld.local.%s %s, [%s]", s->dtype == TL_INT32 ? "b32" : "f32", d, local_addr(p, s, idx));
  return d;
}

static void local_store(P *p, const tl_sym *s, const char *const *idx, const char *v) {
  ins(p, "st.local.%s [%s], %s", s->dtype == TL_INT32 ? "b32" : "f32", local_addr(p, s, idx), v);
}

static tl_walk_act reads_fn(tl_expr *x, tl_stmt *st, void *b) {
  (void)st;
  return x->kind == E_INDEX && x->sym == b ? TL_WALK_STOP : TL_WALK_GO;
}

/* Does expression x read buffer b? */
static bool reads(const tl_expr *x, const tl_sym *b) {
  return tl_walk_expr((tl_expr *)x, reads_fn, NULL, (void *)b) == TL_WALK_STOP;
}

/* The shared address (32-bit) of element idx (64-bit registers) of shared
 * buffer s: row-major in 32-bit arithmetic, as emit_cuda.c's offset() (a
 * block's buffer holds fewer than 2^31 elements); no guard, as there. */
static const char *smem_addr(P *p, const tl_sym *s, const char *const *idx) {
  /* a buffer of several copies in its copy in use (p->stage: a pre copy's, pass_wspec.c), else its one */
  bool staged = s->stages > 1 && p->stage[s->slot];
  if (s->swizzled || s->wgmma_op || s->tma_dst || s->rotates || (s->stages > 1 && !staged) || s->layout ||
      s->viewed || s->smem_offset < 0 || !elem_ok(s->dtype)) {
    fail(p, p->cur ? p->cur->pointer : NULL, "the PTX back end reads and writes element by element only shared "
         "buffers stored row-major in one stage, not '%s' (its bulk tensor copies and wgmma take the others)", s->name);
    return "%r0";
  }
  const char *o = row_major(p, s, idx);
  const char *ad = nr(p, CR), *b = staged ? p->stage[s->slot] : nr(p, CR);
  if (!staged)
    ins(p, "add.s32 %s, %s, %" PRId64, b, p->smem, s->smem_offset);
  ins(p, "mad.lo.s32 %s, %s, %d, %s", ad, o, (int)tl_dtype_size(s->dtype), b);
  return ad;
}

/* Is s a register fragment (the only buffers of the subset)? */
static bool in_regs(const tl_sym *s) { return s->kind == SYM_BUFFER && s->scope == SCOPE_FRAGMENT && s->in_regs; }

/* The register of element (the current owner's local index) of fragment s, or NULL after fail. */
static const char *frag_reg(P *p, const tl_sym *s, const char *pointer, const char *what) {
  if (s->packed) {
    fail(p, pointer, "the PTX back end has packed fragment '%s' %s by a copy or a wgmma only", s->name, what);
    return NULL;
  }
  if (!p->owner || !tl_same_reg_layout(p->owner, s)) {
    fail(p, pointer, "register fragment '%s' is %s where its elements are not the thread's own", s->name, what);
    return NULL;
  }
  return S("%%fr%d_%" PRId64, s->slot, p->r);
}

static const char **index_regs(P *p, const tl_expr *x) {
  const char **idx = tl_arena_alloc(p->a, sizeof(char *) * TL_MAX_DIMS);
  for (int d = 0; d < x->nargs; d++)
    idx[d] = ex_to(p, x->args[d], TL_INT64);
  return idx;
}

static const char *ex(P *p, const tl_expr *x) {
  if (p->failed)
    return "%r0";
  switch (x->kind) {
  case E_CONST:
    if (x->type == TL_TY_UREAL)
      return constant(p, x, TL_FLOAT32); /* as a float operand would take it */
    return constant(p, x, x->type);
  case E_NAME: {
    const char *v = x->sym->slot >= 0 ? p->val[x->sym->slot] : NULL;
    if (!v)
      fail(p, x->pointer, "the PTX back end has no value for '%s' here", x->sym->name);
    return v ? v : "%r0";
  }
  case E_INDEX: {
    const tl_sym *s = x->sym;
    if (in_regs(s)) {
      /* row i of an mma-rows fragment in a loop over the elements of an mma-layout one (i, j): the register of
       * the owner's element's row (emit_cuda.c's row_reg) */
      if (p->in_par && s->reg_layout == TL_LAYOUT_MMA_ROWS && p->owner && p->owner->reg_layout == TL_LAYOUT_MMA &&
          x->nargs == 1 && x->args[0]->kind == E_NAME && p->par->nvars == 2 && x->args[0]->sym == p->par->vars[0])
        return S("%%fr%d_%" PRId64, s->slot, (p->r / (p->owner->mma_ni * 4)) * 2 + (p->r % 4) / 2);
      const char *r = frag_reg(p, s, x->pointer, "read");
      return r ? r : "%r0";
    }
    if (in_smem(s))
      return load_at(p, "shared", s->dtype, smem_addr(p, s, index_regs(p, x)), NULL);
    if (in_local(s))
      return local_load(p, s, index_regs(p, x));
    if (s->kind != SYM_TENSOR) {
      fail(p, x->pointer, "the PTX back end reads only tensors, shared buffers and register fragments, not '%s'",
           s->name);
      return "%r0";
    }
    return load(p, s, index_regs(p, x), NULL);
  }
  case E_UNARY: {
    const tl_expr *a = x->args[0];
    if (x->op == OP_NOT) {
      const char *u = ex_to(p, a, TL_BOOL), *d = nr(p, CP);
      ins(p, "not.pred %s, %s", d, u);
      return d;
    }
    if (!need_cls(p, x->type, x->pointer))
      return "%r0";
    int c = cls_of(x->type);
    const char *u = ex_to(p, a, x->type), *d = nr(p, c);
    if (c == CP) {
      fail(p, x->pointer, "the PTX back end has no unary '%c' on bool", x->op);
      return d;
    }
    if (x->op == '~') {
      if (c == CF) {
        fail(p, x->pointer, "'~' on %s", tl_type_name(x->type));
        return d;
      }
      ins(p, "not.%s %s, %s", btyp(c), d, u);
    } else {
      ins(p, "neg.%s %s, %s", c == CF ? "f32" : ityp(c), d, u);
    }
    return d;
  }
  case E_BINARY:
    return ex_binary(p, x);
  case E_CALL:
    return ex_call(p, x);
  }
  return "%r0";
}

/* ---- iteration ------------------------------------------------------------------------------------ */
static int64_t product(const int64_t *ext, int n) {
  int64_t v = 1;
  for (int i = 0; i < n; i++)
    v *= ext[i];
  return v;
}

/* The indices (32-bit registers) over extents ext of flat index e (a 32-bit register). */
static const char **decode(P *p, const char *e, const int64_t *ext, int n) {
  const char **v = tl_arena_alloc(p->a, sizeof(char *) * (size_t)(n + 1));
  int64_t stride = 1;
  for (int d = n - 1; d >= 0; d--) {
    const char *q = e;
    if (stride != 1) {
      q = nr(p, CR);
      ins(p, "div.u32 %s, %s, %" PRId64, q, e, stride);
    }
    v[d] = nr(p, CR);
    ins(p, "rem.u32 %s, %s, %" PRId64, v[d], q, ext[d]);
    stride *= ext[d];
  }
  return v;
}

/* Element *e = b + r of a thread's run of fragment elements (b: a 32-bit
 * register), and the label to place after the work on it, which a thread
 * whose element is past total branches to; -1 (no branch) where the runs
 * cover every element (covers). */
static int run_elem(P *p, const char *b, int64_t r, int64_t total, bool covers, const char **e) {
  *e = nr(p, CR);
  ins(p, "add.s32 %s, %s, %" PRId64, *e, b, r);
  if (covers)
    return -1;
  const char *g = nr(p, CP);
  int skip = new_label(p);
  ins(p, "setp.ge.s32 %s, %s, %" PRId64, g, *e, total);
  ins(p, "@%s bra L%d", g, skip);
  return skip;
}

/* The indices over extents ext of e = b + r, where b is a multiple of P
 * (a 32-bit register, bq its indices) and 0 <= r < P: from the innermost
 * dimension out, with S the product of the extents passed, a dimension
 * whose S * X divides P holds (r / S) % X (b's index there is 0), and at the
 * first whose S * X is a multiple of P the index is b's plus r / S, with no
 * carry into the dimensions above, which keep b's; otherwise e is decoded.
 * Exact for every b and r as stated; the common case, P elements of one
 * row, is b's row and column plus r, which ptxas need not divide for. */
static const char **decode_from(P *p, const char *e, const char *const *bq, int64_t P_, int64_t r, const int64_t *ext,
                                 int n) {
  const char **v = tl_arena_alloc(p->a, sizeof(char *) * (size_t)(n + 1));
  int64_t S = 1;
  int d = n - 1;
  for (; d >= 0; d--) {
    int64_t X = ext[d];
    if (P_ % (S * X) == 0) {
      v[d] = nr(p, CR);
      ins(p, "mov.b32 %s, %" PRId64, v[d], (r / S) % X);
      S *= X;
      continue;
    }
    if ((S * X) % P_ == 0) {
      if (r / S == 0) {
        v[d] = bq[d];
      } else {
        v[d] = nr(p, CR);
        ins(p, "add.s32 %s, %s, %" PRId64, v[d], bq[d], r / S);
      }
      for (int k = d - 1; k >= 0; k--)
        v[k] = bq[k];
      return v;
    }
    return decode(p, e, ext, n);
  }
  return v; /* every dimension divides P: one element set per thread (b's indices are all 0) */
}

/* Per-dimension indices (64-bit) of region r at squeezed indices q (32-bit). */
static const char **region_idx(P *p, const tl_region *r, const char *const *q) {
  const char **idx = tl_arena_alloc(p->a, sizeof(char *) * TL_MAX_DIMS);
  int k = 0, h = p->hoisted[0].r == r ? 0 : p->hoisted[1].r == r ? 1 : -1;
  for (int d = 0; d < r->ndim; d++) {
    const char *lo = h >= 0 ? p->hoisted[h].lo[d] : r->lo[d] ? ex_to(p, r->lo[d], TL_INT64) : NULL;
    if (r->ext[d] == 1) {
      idx[d] = lo ? lo : "0";
      if (!lo) {
        idx[d] = nr(p, CD);
        ins(p, "mov.b64 %s, 0", idx[d]);
      }
      continue;
    }
    const char *w = nr(p, CD);
    ins(p, "cvt.s64.s32 %s, %s", w, q[k++]);
    if (lo) {
      const char *s = nr(p, CD);
      ins(p, "add.s64 %s, %s, %s", s, lo, w);
      w = s;
    }
    idx[d] = w;
  }
  return idx;
}

/* Computes the starts of a tile operator's regions once, before its loop
 * over elements (they do not depend on the element); region_idx then uses
 * them.  Undone by unhoist. */
static void hoist(P *p, const tl_region *a, const tl_region *b) {
  const tl_region *rs[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    p->hoisted[i].r = NULL;
    if (!rs[i])
      continue;
    for (int d = 0; d < rs[i]->ndim; d++)
      p->hoisted[i].lo[d] = rs[i]->lo[d] ? ex_to(p, rs[i]->lo[d], TL_INT64) : NULL;
    p->hoisted[i].r = rs[i];
  }
}

static void unhoist(P *p) { p->hoisted[0].r = p->hoisted[1].r = NULL; }

static int squeezed(const tl_region *r, int64_t *out) {
  int m = 0;
  for (int d = 0; d < r->ndim; d++)
    if (r->ext[d] != 1)
      out[m++] = r->ext[d];
  return m;
}

/* One visit of an element: the body callback of for_elements, with the
 * decoded indices of the element over ext. */
typedef void (*visit_fn)(P *p, const void *what, const char *e, const char *const *q);

/* ---- the mma layout (wgmma's accumulator; ir.h: tl_mma_row_strides) ---- */
/* The row and the column of the element a thread holds at local index r of
 * mma-layout fragment s, each the sum of a part of the thread (*tr, *tc:
 * registers, computed here) and a part of r (mma_crow, mma_ccol: constants),
 * as emit_cuda.c's mma_row_col_split: every index of an unrolled loop over
 * the fragment is a register plus a constant. */
static void mma_thread_parts(P *p, const tl_sym *s, const char **tr, const char **tc) {
  int64_t ws, ts;
  tl_mma_row_strides(s, &ws, &ts);
  const char *w = nr(p, CR), *wm = nr(p, CR), *wn = nr(p, CR), *l = nr(p, CR), *lq = nr(p, CR), *lr = nr(p, CR);
  const char *a = nr(p, CR), *b = nr(p, CR);
  ins(p, "shr.u32 %s, %s, 5", w, p->tid);
  ins(p, "div.u32 %s, %s, %d", wm, w, s->mma_wn);
  ins(p, "rem.u32 %s, %s, %d", wn, w, s->mma_wn);
  ins(p, "and.b32 %s, %s, 31", l, p->tid);
  ins(p, "shr.u32 %s, %s, 2", lq, l);
  ins(p, "and.b32 %s, %s, 3", lr, l);
  ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", a, wm, ws, lq);
  ins(p, "shl.b32 %s, %s, 1", lr, lr);
  ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", b, wn, s->mma_ni * 8, lr);
  *tr = a;
  *tc = b;
}

static int64_t mma_crow(const tl_sym *s, int64_t r) {
  int64_t ws, ts;
  tl_mma_row_strides(s, &ws, &ts);
  return (r / (s->mma_ni * 4)) * ts + ((r % 4) / 2) * 8;
}

static int64_t mma_ccol(const tl_sym *s, int64_t r) { return ((r / 4) % s->mma_ni) * 8 + r % 2; }

/* for_elements over the whole of mma-layout fragment owner: unrolled over
 * its local indices, each element's indices the thread's part plus a
 * constant (the layout tiles the fragment exactly: no element is outside). */
static void mma_elements(P *p, const tl_sym *owner, const int64_t *ext, int n, visit_fn visit, const void *what,
                         const char *pointer) {
  if (owner->ndim != 2 || n != 2 || ext[0] != owner->dims[0] || ext[1] != owner->dims[1]) {
    fail(p, pointer, "the PTX back end visits the elements of mma-layout fragment '%s' only over its whole shape",
         owner->name);
    return;
  }
  const char *tr, *tc;
  mma_thread_parts(p, owner, &tr, &tc);
  const tl_sym *saved = p->owner;
  int64_t saved_r = p->r;
  p->owner = owner;
  for (int64_t r = 0; r < owner->per_thread && !p->failed; r++) {
    p->r = r;
    const char **q = tl_arena_alloc(p->a, sizeof(char *) * 2);
    q[0] = nr(p, CR);
    q[1] = nr(p, CR);
    ins(p, "add.s32 %s, %s, %" PRId64, q[0], tr, mma_crow(owner, r));
    ins(p, "add.s32 %s, %s, %" PRId64, q[1], tc, mma_ccol(owner, r));
    const char *e = nr(p, CR); /* the flat index, for a visit that wants it */
    ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", e, q[0], ext[1], q[1]);
    visit(p, what, e, q);
  }
  p->owner = saved;
  p->r = saved_r;
}

/* for_elements over the whole of mma-rows fragment owner (1-D, the rows of an
 * mma-layout one: ir.h), unrolled over its local indices: element r of the
 * thread is row (tid / 32) * ws + (r / 2) * ts + (tid % 32) / 4 + (r % 2) * 8
 * (emit_cuda.c's elem_of), the same in the 4 lanes of a quad. */
static void rows_elements(P *p, const tl_sym *owner, const int64_t *ext, int n, visit_fn visit, const void *what,
                          const char *pointer) {
  if (owner->ndim != 1 || n != 1 || ext[0] != owner->dims[0]) {
    fail(p, pointer, "the PTX back end visits the elements of mma-rows fragment '%s' only over its whole shape",
         owner->name);
    return;
  }
  int64_t ws, ts;
  tl_mma_row_strides(owner, &ws, &ts);
  const char *w = nr(p, CR), *l = nr(p, CR), *tr = nr(p, CR);
  ins(p, "shr.u32 %s, %s, 5", w, p->tid);
  ins(p, "and.b32 %s, %s, 31", l, p->tid);
  ins(p, "shr.u32 %s, %s, 2", l, l);
  ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", tr, w, ws, l);
  const tl_sym *saved = p->owner;
  int64_t saved_r = p->r;
  p->owner = owner;
  for (int64_t r = 0; r < owner->per_thread && !p->failed; r++) {
    p->r = r;
    const char **q = tl_arena_alloc(p->a, sizeof(char *));
    q[0] = nr(p, CR);
    ins(p, "add.s32 %s, %s, %" PRId64, q[0], tr, (r / 2) * ts + (r % 2) * 8);
    visit(p, what, q[0], q);
  }
  p->owner = saved;
  p->r = saved_r;
}

/* Runs visit for each element of `total` (over extents ext[0..n-1]) that this
 * thread handles: the elements owner holds (unrolled over its local
 * indices), or every T-th from the thread's index (a loop). */
static void for_elements(P *p, const tl_sym *owner, const int64_t *ext, int n, visit_fn visit, const void *what,
                         const char *pointer) {
  int64_t total = product(ext, n);
  if (total >= INT32_MAX) {
    fail(p, pointer, "the PTX back end iterates over fewer than 2^31 elements");
    return;
  }
  if (owner && owner->reg_layout == TL_LAYOUT_MMA) {
    mma_elements(p, owner, ext, n, visit, what, pointer);
    return;
  }
  if (owner && owner->reg_layout == TL_LAYOUT_MMA_ROWS) {
    rows_elements(p, owner, ext, n, visit, what, pointer);
    return;
  }
  if (owner && owner->reg_layout != TL_LAYOUT_BLOCKED) {
    fail(p, pointer, "the PTX back end visits the elements of register fragments of the blocked and mma layouts only, "
                     "not '%s'", owner->name);
    return;
  }
  if (owner) {
    bool covers = total >= product(owner->dims, owner->ndim) && owner->per_thread * p->T <= total;
    const tl_sym *saved = p->owner;
    int64_t saved_r = p->r;
    p->owner = owner;
    /* the thread's first element b = tid * P, decoded once: element b + r (r < P) is decoded
     * from b's indices with constants where P and the extents allow (decode_from) */
    const char *b = nr(p, CR);
    ins(p, "mul.lo.s32 %s, %s, %" PRId64, b, p->tid, owner->per_thread);
    const char **bq = decode(p, b, ext, n);
    for (int64_t r = 0; r < owner->per_thread && !p->failed; r++) {
      p->r = r;
      const char *e;
      int skip = run_elem(p, b, r, total, covers, &e);
      visit(p, what, e, decode_from(p, e, bq, owner->per_thread, r, ext, n));
      if (skip >= 0)
        ins(p, "L%d:", skip);
    }
    p->owner = saved;
    p->r = saved_r;
    return;
  }
  int top = new_label(p), end = new_label(p);
  const char *e = nr(p, CR), *g = nr(p, CP);
  const tl_sym *saved = p->owner;
  p->owner = NULL;
  ins(p, "mov.b32 %s, %s", e, p->tid);
  ins(p, "L%d:", top);
  ins(p, "setp.ge.s32 %s, %s, %" PRId64, g, e, total);
  ins(p, "@%s bra L%d", g, end);
  visit(p, what, e, decode(p, e, ext, n));
  ins(p, "add.s32 %s, %s, %" PRId64, e, e, p->T);
  ins(p, "bra L%d", top);
  ins(p, "L%d:", end);
  p->owner = saved;
}

/* ---- statements ------------------------------------------------------------------------------------ */
static void emit_body(P *p, const tl_body *b);
static void emit_stmt(P *p, const tl_stmt *s);
static void barrier(P *p);
static bool acc_copy(const tl_stmt *s);
static void op_copy_acc(P *p, const tl_stmt *s);
static void op_gemm(P *p, const tl_stmt *s);
static void wspec_loop(P *p, const tl_stmt *s);
static const char *buf_addr(P *p, const tl_sym *b);
static void pre_wait(P *p, const tl_stmt *c);
static void pre_release(P *p, const tl_stmt *s);
static const tl_region *reg_region(const tl_region *r) { return r && in_regs(r->sym) ? r : NULL; }

/* Reads element q of region r as a value of its dtype. */
static const char *region_read(P *p, const tl_region *r, const char *const *q, const char *pointer) {
  if (in_regs(r->sym))
    return frag_reg(p, r->sym, pointer, "read");
  if (in_smem(r->sym))
    return load_at(p, "shared", r->sym->dtype, smem_addr(p, r->sym, region_idx(p, r, q)), NULL);
  if (in_local(r->sym))
    return local_load(p, r->sym, region_idx(p, r, q));
  if (r->sym->kind != SYM_TENSOR) {
    fail(p, pointer, "the PTX back end copies only between tensors, shared buffers and register fragments, not '%s'",
         r->sym->name);
    return NULL;
  }
  return load(p, r->sym, region_idx(p, r, q), r->inside);
}

static void region_write(P *p, const tl_region *r, const char *const *q, const char *v, const char *pointer) {
  if (in_regs(r->sym)) {
    const char *d = frag_reg(p, r->sym, pointer, "written");
    if (d)
      ins(p, "mov.%s %s, %s", r->sym->dtype == TL_INT32 ? "b32" : "f32", d, v);
    return;
  }
  if (in_smem(r->sym)) {
    store_at(p, "shared", r->sym->dtype, smem_addr(p, r->sym, region_idx(p, r, q)), NULL, v);
    return;
  }
  if (in_local(r->sym)) {
    local_store(p, r->sym, region_idx(p, r, q), v);
    return;
  }
  if (r->sym->kind != SYM_TENSOR) {
    fail(p, pointer, "the PTX back end copies only between tensors, shared buffers and register fragments, not '%s'",
         r->sym->name);
    return;
  }
  store(p, r->sym, region_idx(p, r, q), r->inside, v);
}

static void visit_copy(P *p, const void *what, const char *e, const char *const *q) {
  (void)e;
  const tl_stmt *s = what;
  const char *v = region_read(p, s->src, q, s->pointer);
  if (v)
    v = conv(p, v, (tl_type)s->src->sym->dtype, (tl_type)s->dst->sym->dtype, s->pointer);
  if (v && !p->failed)
    region_write(p, s->dst, q, v, s->pointer);
}

static void visit_fill(P *p, const void *what, const char *e, const char *const *q) {
  (void)e;
  const tl_stmt *s = what;
  if (!p->failed)
    region_write(p, s->dst, q, p->fill_value, s->pointer);
}

static void visit_parallel(P *p, const void *what, const char *e, const char *const *q) {
  (void)e;
  const tl_stmt *s = what;
  for (int i = 0; i < s->nvars; i++)
    p->val[s->vars[i]->slot] = q[i];
  bool saved = p->in_par;
  const tl_stmt *saved_par = p->par;
  p->in_par = true;
  p->par = s;
  emit_body(p, &s->body);
  p->in_par = saved;
  p->par = saved_par;
}

/* ---- a copy from a tensor into shared memory in 16-byte cp.async chunks (emit_cuda.c's emit_async_copy) ---- */
/* The element offset (a 32-bit register) of row, column (32-bit registers) in swizzled shared buffer s, as
 * emit_cuda.c's offset() and its prelude's tl_swz: 16-byte chunk (row * cpr + column / 8) of the row's
 * line with its low 3 bits XORed with (row / rpk) & mask, counted in 16-bit elements (a byte buffer's
 * column c is byte c & 1 of 16-bit element c / 2); a wgmma operand of rows over 128 bytes is panels of
 * 128 bytes of columns, each [rows, 128 / es] in the 128-byte swizzle. */
static const char *swz(P *p, const char *row, const char *col, int64_t cpr, int64_t rpk, int64_t mask) {
  const char *g = nr(p, CR), *c8 = nr(p, CR), *key = nr(p, CR), *lo = nr(p, CR), *hi = nr(p, CR), *c7 = nr(p, CR);
  const char *o = nr(p, CR);
  ins(p, "shr.u32 %s, %s, 3", c8, col);
  ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", g, row, cpr, c8);
  ins(p, "div.u32 %s, %s, %" PRId64, key, row, rpk);
  ins(p, "and.b32 %s, %s, %" PRId64, key, key, mask);
  ins(p, "and.b32 %s, %s, 7", lo, g);
  ins(p, "xor.b32 %s, %s, %s", lo, lo, key);
  ins(p, "and.b32 %s, %s, -8", hi, g);
  ins(p, "or.b32 %s, %s, %s", hi, hi, lo);
  ins(p, "and.b32 %s, %s, 7", c7, col);
  ins(p, "shl.b32 %s, %s, 3", o, hi);
  ins(p, "or.b32 %s, %s, %s", o, o, c7);
  return o;
}

static const char *swz_offset(P *p, const tl_sym *s, const char *row, const char *col) {
  int64_t es = (int64_t)tl_dtype_size(s->dtype), cpr = s->dims[1] * es / 16, rpk = cpr >= 8 ? 1 : 8 / cpr;
  int64_t mask = s->wgmma_op && cpr < 8 ? cpr - 1 : 7;
  const char *pan = NULL;
  if (s->wgmma_op && s->dims[1] * es > 128) { /* panel col / pc at (col / pc) * rows * pc elements */
    int64_t pc = 128 / es;
    const char *k = nr(p, CR), *c = nr(p, CR);
    pan = nr(p, CR);
    ins(p, "div.u32 %s, %s, %" PRId64, k, col, pc);
    ins(p, "rem.u32 %s, %s, %" PRId64, c, col, pc);
    ins(p, "mul.lo.s32 %s, %s, %" PRId64, pan, k, s->dims[0] * pc);
    col = c;
    cpr = 8;
    rpk = 1;
    mask = 7;
  }
  const char *o;
  if (es == 1) { /* 16-bit element col / 2, byte col & 1 */
    const char *h = nr(p, CR), *b = nr(p, CR);
    ins(p, "shr.u32 %s, %s, 1", h, col);
    ins(p, "and.b32 %s, %s, 1", b, col);
    o = nr(p, CR);
    ins(p, "shl.b32 %s, %s, 1", o, swz(p, row, h, cpr, rpk, mask));
    ins(p, "or.b32 %s, %s, %s", o, o, b);
  } else {
    o = swz(p, row, col, cpr, rpk, mask);
  }
  if (pan) {
    const char *t = nr(p, CR);
    ins(p, "add.s32 %s, %s, %s", t, o, pan);
    o = t;
  }
  return o;
}

/* A cp.async copy (pass_pipeline.c says when it is exact) outside a pipelined loop: each thread every T-th
 * 16-byte chunk, a chunk outside the tensor zero-filled (source size 0, from the tensor's start), then
 * the thread's group waited for; the barriers pass_barrier.c placed order it for the other threads. */
static void op_async_copy(P *p, const tl_stmt *s) {
  const tl_region *src = s->src, *dst = s->dst;
  const tl_sym *t = src->sym, *b = dst->sym;
  int64_t es = (int64_t)tl_dtype_size(b->dtype), ext[TL_MAX_DIMS] = {0};
  int n = squeezed(dst, ext);
  const char *why = t->kind != SYM_TENSOR || !in_smem(b) || t->dtype != b->dtype ? "cp.async copies other than "
                                                                                   "from a tensor into shared memory"
                    : b->stages > 1 || b->rotates || (b->layout && !b->layout->swizzle) || b->viewed
                        ? "cp.async into a staged or laid-out buffer" /* a swizzle hint: b->swizzled says */
                    : (es != 1 && es != 2) || (b->swizzled && (b->ndim != 2 || n != 2))
                        ? "cp.async of other than 8- or 16-bit elements into a swizzled buffer of 2 dimensions"
                    : ext[n - 1] % (16 / es) ? "cp.async of rows of other than whole 16-byte chunks"
                                             : NULL;
  if (why)
    return fail(p, s->pointer, "the PTX back end has no %s yet", why);
  const char *pol = s->evict ? nr(p, CD) : NULL; /* the copy's L2 policy ("eviction_policy") */
  if (pol)
    ins(p, "%s", tl_ptx_createpolicy(p->a, s->evict, pol));
  int64_t v = 16 / es;
  int64_t cext[TL_MAX_DIMS];
  for (int i = 0; i < n; i++)
    cext[i] = i == n - 1 ? ext[i] / v : ext[i];
  int64_t total = product(cext, n);
  hoist(p, src, dst);
  const char *e = nr(p, CR), *q = nr(p, CP), *base = buf_addr(p, b);
  int top = new_label(p), end = new_label(p);
  ins(p, "mov.b32 %s, %s", e, p->tid);
  ins(p, "L%d:", top);
  ins(p, "setp.ge.s32 %s, %s, %" PRId64, q, e, total);
  ins(p, "@%s bra L%d", q, end);
  const char **cq = decode(p, e, cext, n), *vq[TL_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    vq[i] = cq[i];
    if (i == n - 1) {
      vq[i] = nr(p, CR);
      ins(p, "mul.lo.s32 %s, %s, %" PRId64, vq[i], cq[i], v);
    }
  }
  const char *g, *ad = address(p, t, region_idx(p, src, vq), src->inside, &g);
  const char **di = region_idx(p, dst, vq), *off;
  const char *d32[TL_MAX_DIMS];
  for (int i = 0; i < b->ndim; i++) {
    d32[i] = nr(p, CR);
    ins(p, "cvt.u32.u64 %s, %s", d32[i], di[i]);
  }
  if (b->swizzled) {
    off = swz_offset(p, b, d32[0], d32[1]);
  } else {
    off = d32[0];
    for (int i = 1; i < b->ndim; i++) {
      const char *m = nr(p, CR);
      ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", m, off, b->dims[i], d32[i]);
      off = m;
    }
  }
  const char *sa = nr(p, CR);
  ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", sa, off, es, base);
  if (g) { /* outside: no bytes read, from an address inside */
    const char *a2 = nr(p, CD), *sz = nr(p, CR);
    ins(p, "selp.b64 %s, %s, %s, %s", a2, ad, p->base[t->param_index], g);
    ins(p, "selp.b32 %s, 16, 0, %s", sz, g);
    ins(p, "%s", tl_ptx_cp_async16(p->a, sa, a2, sz, pol));
  } else {
    ins(p, "%s", tl_ptx_cp_async16(p->a, sa, ad, NULL, pol));
  }
  ins(p, "add.s32 %s, %s, %" PRId64, e, e, p->T);
  ins(p, "bra L%d", top);
  ins(p, "L%d:", end);
  unhoist(p);
  ins(p, "cp.async.commit_group");
  ins(p, "cp.async.wait_group 0");
}

/* ---- a blocked fragment into a tensor or a shared buffer, several elements a store ---- */
/* How many elements of blocked register fragment src one store of copy s writes (the vector of emit_cuda.c's
 * store_vec_bytes: 16, 8 or 4 bytes), or 0 where it is one at a time: the thread's P elements are flat
 * elements [t P, t P + P) of the copy's extents ext[0..n-1], so v of them from a multiple of v lie in one row
 * of the destination's last dimension where v divides P and that row's extent, and one store writes them
 * where the destination's rows and the region's start are multiples of v and the address is aligned (so the
 * v are wholly inside or outside the tensor, and wholly past the copy's elements or not). */
static int64_t blocked_vec(const P *p, const tl_stmt *s, const int64_t *ext, int n) {
  const tl_sym *f = s->src->sym, *d = s->dst->sym;
  const tl_region *r = s->dst;
  int last = d->ndim - 1;
  int64_t es = (int64_t)tl_dtype_size(d->dtype);
  if (!in_regs(f) || f->reg_layout != TL_LAYOUT_BLOCKED || f->packed || in_regs(d) || in_local(d) || n < 1 ||
      (d->kind != SYM_TENSOR && !in_smem(d)) || !elem_ok(d->dtype) || r->ext[last] != ext[n - 1] ||
      d->dims[last] <= 0)
    return 0;
  if (in_smem(d) && (d->swizzled || d->wgmma_op || d->tma_dst || d->rotates || d->layout || d->viewed ||
                     d->smem_offset < 0 || (d->stages > 1 && !p->stage[d->slot])))
    return 0;
  for (int64_t w = 16; w >= 4 && w >= 2 * es; w /= 2) {
    int64_t v = w / es;
    bool aligned = d->kind == SYM_TENSOR ? d->align >= w : d->smem_offset % w == 0;
    if (f->per_thread % v == 0 && ext[n - 1] % v == 0 && d->dims[last] % v == 0 && tl_multiple_of(r->lo[last], v) &&
        aligned)
      return v;
  }
  return 0;
}

static void op_copy_vec(P *p, const tl_stmt *s, int64_t v, const int64_t *ext, int n) {
  const tl_sym *f = s->src->sym, *d = s->dst->sym;
  int64_t total = product(ext, n), es = (int64_t)tl_dtype_size(d->dtype), nw = v * es / 4;
  if (total >= INT32_MAX)
    return fail(p, s->pointer, "the PTX back end iterates over fewer than 2^31 elements");
  bool covers = total >= product(f->dims, f->ndim) && f->per_thread * p->T <= total;
  hoist(p, s->src, s->dst);
  const char *b = nr(p, CR);
  ins(p, "mul.lo.s32 %s, %s, %" PRId64, b, p->tid, f->per_thread);
  const char **bq = decode(p, b, ext, n);
  for (int64_t r = 0; r < f->per_thread && !p->failed; r += v) {
    const char *e;
    int skip = run_elem(p, b, r, total, covers, &e);
    const char **idx = region_idx(p, s->dst, decode_from(p, e, bq, f->per_thread, r, ext, n));
    const char *x[16], *w[4];
    for (int64_t k = 0; k < v; k++)
      x[k] = conv(p, S("%%fr%d_%" PRId64, f->slot, r + k), (tl_type)f->dtype, (tl_type)d->dtype, s->pointer);
    for (int64_t k = 0; k < nw; k++)
      if (es == 4) {
        w[k] = x[k];
      } else { /* a pair of 16-bit values, already rounded: the conversion is exact */
        w[k] = nr(p, CR);
        ins(p, "cvt.rn.%s.f32 %s, %s, %s", d->dtype == TL_BFLOAT16 ? "bf16x2" : "f16x2", w[k], x[2 * k + 1], x[2 * k]);
      }
    const char *g = NULL, *ad = d->kind == SYM_TENSOR ? address(p, d, idx, s->dst->inside, &g) : smem_addr(p, d, idx);
    const char *ty = d->dtype == TL_FLOAT32 ? "f32" : "b32", *vals = w[0];
    for (int64_t k = 1; k < nw; k++)
      vals = S("%s, %s", vals, w[k]);
    ins(p, "%sst.%s%s.%s [%s], %s%s%s", g ? S("@%s ", g) : "", d->kind == SYM_TENSOR ? "global" : "shared",
        nw > 1 ? S(".v%" PRId64, nw) : "", ty, ad, nw > 1 ? "{" : "", vals, nw > 1 ? "}" : "");
    if (skip >= 0)
      ins(p, "L%d:", skip);
  }
  unhoist(p);
}

static void op_copy(P *p, const tl_stmt *s) {
  if (s->wspec_pre) { /* the producer's (pass_wspec.c) */
    pre_wait(p, s);
    return;
  }
  if (s->async_copy && !s->prefetch && !s->reg_prefetch && !s->lag_load && !s->tma_store && !s->byte_copy) {
    op_async_copy(p, s);
    return;
  }
  if (s->tma_store || s->byte_copy || s->async_copy || s->prefetch || s->reg_prefetch || s->lag_load) {
    fail(p, s->pointer, "the PTX back end has no asynchronous, bulk or packed copies");
    return;
  }
  if (acc_copy(s)) {
    op_copy_acc(p, s);
    return;
  }
  int64_t ext[TL_MAX_DIMS] = {0};
  int n = squeezed(s->dst, ext);
  const tl_sym *d = s->dst->sym, *f = s->src->sym;
  if (in_regs(d) && d->packed) { /* emit_cuda.c's op_copy_pairs into a packed fragment: word r / 2 the pair */
    if (!in_regs(f) || !tl_same_reg_layout(f, d) || f->dtype != TL_FLOAT32 || n != 2 || ext[0] != d->dims[0] ||
        ext[1] != d->dims[1])
      return fail(p, s->pointer, "the PTX back end writes packed fragment '%s' only by a copy of the whole of a "
                                 "float32 fragment of its layout", d->name);
    for (int64_t r = 0; r < d->per_thread; r += 2)
      ins(p, "%s %%fr%d_%" PRId64 ", %%fr%d_%" PRId64 ", %%fr%d_%" PRId64,
          d->dtype == TL_BFLOAT16 ? "cvt.rn.bf16x2.f32" : "cvt.rn.f16x2.f32", d->slot, r / 2, f->slot, r + 1, f->slot, r);
    return;
  }
  int64_t v = blocked_vec(p, s, ext, n);
  if (v)
    return op_copy_vec(p, s, v, ext, n);
  const tl_region *o = reg_region(s->dst) ? s->dst : reg_region(s->src);
  hoist(p, s->src, s->dst);
  for_elements(p, o ? o->sym : NULL, ext, n, visit_copy, s, s->pointer);
  unhoist(p);
}

static void op_fill(P *p, const tl_stmt *s) {
  if (tl_vec_has(&p->folded, s)) /* the gemm after it clears C (tl_fold_fills), as in emit_cuda.c */
    return;
  int64_t ext[TL_MAX_DIMS] = {0};
  int n = squeezed(s->dst, ext);
  const char *v = ex_to(p, s->value, (tl_type)s->dst->sym->dtype); /* once: a fill's value is the tile's */
  p->fill_value = v;
  const tl_sym *f = s->dst->sym;
  if (in_regs(f) && f->reg_layout == TL_LAYOUT_MMA && !f->packed && n == 2 && ext[0] == f->dims[0] &&
      ext[1] == f->dims[1]) {
    for (int64_t r = 0; r < f->per_thread; r++) /* every register of the fragment: no index needed */
      ins(p, "mov.%s %%fr%d_%" PRId64 ", %s", f->dtype == TL_INT32 ? "b32" : "f32", f->slot, r, v);
    return;
  }
  hoist(p, s->dst, NULL);
  for_elements(p, reg_region(s->dst) ? s->dst->sym : NULL, ext, n, visit_fill, s, s->pointer);
  unhoist(p);
}

static void op_parallel(P *p, const tl_stmt *s) {
  if (s->vec_dequant) {
    fail(p, s->pointer, "the PTX back end has no dequantizing parallel loops");
    return;
  }
  if (p->in_par) {
    fail(p, s->pointer, "a parallel loop inside a parallel loop");
    return;
  }
  int64_t ext[TL_MAX_DIMS] = {0};
  for (int i = 0; i < s->nvars; i++)
    ext[i] = s->extents[i]->val.i;
  for_elements(p, tl_body_owner(&s->body, s->nvars == 2), ext, s->nvars, visit_parallel, s, s->pointer);
}

/* A parallel loop that chooses by an affine comparison (pass_uniform.c;
 * emit_cuda.c's op_parallel_uniform): the comparison at the point where it
 * is hardest to satisfy, and at the easiest, picks the loop without it
 * (uni_all, uni_none) when it holds on the whole tile or nowhere. */
static void op_parallel_uniform(P *p, const tl_stmt *s) {
  const tl_expr *c = s->body.items[0]->value->args[0];
  bool ge = c->op == '>' || c->op == OP_GE;
  const int64_t *pts[2] = {ge ? s->uni_lo : s->uni_hi, ge ? s->uni_hi : s->uni_lo};
  const char *at[2];
  for (int k = 0; k < 2; k++) {
    for (int v = 0; v < s->nvars; v++) {
      const char *r = nr(p, CR);
      ins(p, "mov.b32 %s, %" PRId64, r, pts[k][v]);
      p->val[s->vars[v]->slot] = r;
    }
    at[k] = ex_to(p, c, TL_BOOL);
  }
  int mixed = new_label(p), none = new_label(p), end = new_label(p);
  ins(p, "@!%s bra L%d", at[0], none);
  op_parallel(p, s->uni_all);
  ins(p, "bra L%d", end);
  ins(p, "L%d:", none);
  ins(p, "@%s bra L%d", at[1], mixed); /* the comparison holds at the easiest point: not nowhere */
  op_parallel(p, s->uni_none);
  ins(p, "bra L%d", end);
  ins(p, "L%d:", mixed);
  op_parallel(p, s);
  ins(p, "L%d:", end);
}

/* ---- reductions of a register fragment along its rows (pass_place.c: by_rows) ---------------------- */
/* emit_cuda.c's op_reduce_rows for the blocked layout: each thread folds its
 * elements of a row, the threads of a row (a power of two up to 32) combine
 * by warp shuffles, one of them leaves the row's value in the shared scratch,
 * and after a barrier each element of the destination takes its row's. */
typedef struct {
  const tl_stmt *s;
  int c;             /* the accumulator's class: CF (float32) or CD (int64) */
  tl_reduce_type comb;
} red_ctx;

static const char *red_identity(P *p, tl_reduce_type rt, int c) {
  const char *d = nr(p, c);
  if (c == CF)
    ins(p, "mov.f32 %s, %s", d, rt == RED_MAX ? "0fFF800000" : rt == RED_MIN ? "0f7F800000" : "0f00000000");
  else
    ins(p, "mov.b64 %s, %s", d, rt == RED_MAX ? "-9223372036854775808" : rt == RED_MIN ? "9223372036854775807"
                                : rt == RED_BITAND ? "-1" : "0");
  return d;
}

/* combine(a, x) for rt (x already of the accumulator's class). */
static const char *red_step(P *p, tl_reduce_type rt, int c, const char *a, const char *x) {
  const char *ty = c == CF ? "f32" : "s64";
  if (rt == RED_ABSSUM || rt == RED_ABSMAX) {
    const char *y = nr(p, c);
    ins(p, "abs.%s %s, %s", ty, y, x); /* abs.s64 of INT64_MIN wraps, as tl_abs_i64 */
    x = y;
  }
  const char *d = nr(p, c);
  switch (rt) {
  case RED_SUM: case RED_ABSSUM: ins(p, c == CF ? "add.rn.f32 %s, %s, %s" : "add.s64 %s, %s, %s", d, a, x); break;
  case RED_MAX: case RED_ABSMAX: ins(p, "max.%s %s, %s, %s", ty, d, a, x); break; /* fmaxf: the non-NaN one */
  case RED_MIN: ins(p, "min.%s %s, %s, %s", ty, d, a, x); break;
  case RED_BITAND: ins(p, "and.b64 %s, %s, %s", d, a, x); break;
  case RED_BITOR: ins(p, "or.b64 %s, %s, %s", d, a, x); break;
  case RED_BITXOR: ins(p, "xor.b64 %s, %s, %s", d, a, x); break;
  }
  return d;
}

/* The value of lane (this lane ^ off) of acc: every lane of the warp runs it. */
static const char *shfl_xor(P *p, int c, const char *acc, int64_t off) {
  const char *d = nr(p, c);
  if (c == CF) {
    ins(p, "shfl.sync.bfly.b32 %s, %s, %" PRId64 ", 31, -1", d, acc, off);
    return d;
  }
  const char *lo = nr(p, CR), *hi = nr(p, CR), *plo = nr(p, CR), *phi = nr(p, CR);
  ins(p, "mov.b64 {%s, %s}, %s", lo, hi, acc);
  ins(p, "shfl.sync.bfly.b32 %s, %s, %" PRId64 ", 31, -1", plo, lo, off);
  ins(p, "shfl.sync.bfly.b32 %s, %s, %" PRId64 ", 31, -1", phi, hi, off);
  ins(p, "mov.b64 %s, {%s, %s}", d, plo, phi);
  return d;
}

/* The shared address of row r (a 32-bit register) of the scratch's partials. */
static const char *part_addr(P *p, int c, const char *r) {
  const char *b = nr(p, CR), *ad = nr(p, CR);
  ins(p, "add.s32 %s, %s, %" PRId64, b, p->smem, p->prog->scratch_offset);
  ins(p, "mad.lo.s32 %s, %s, %d, %s", ad, r, c == CF ? 4 : 8, b);
  return ad;
}

static void visit_partial(P *p, const void *what, const char *e, const char *const *q) {
  const red_ctx *rc = what;
  const tl_stmt *s = rc->s;
  const tl_sym *d = s->dst->sym;
  const char *acc = nr(p, rc->c);
  ins(p, "ld.shared.%s %s, [%s]", rc->c == CF ? "f32" : "b64", acc, part_addr(p, rc->c, e));
  tl_type at = rc->c == CF ? TL_FLOAT32 : TL_INT64;
  if (!s->clear) { /* combine with the old value */
    const char *old = region_read(p, s->dst, q, s->pointer);
    if (!old)
      return;
    acc = red_step(p, rc->comb, rc->c, conv(p, old, (tl_type)d->dtype, at, s->pointer), acc);
  }
  region_write(p, s->dst, q, conv(p, acc, at, (tl_type)d->dtype, s->pointer), s->pointer);
}

/* An mma-layout fragment by rows into an mma-rows one of the same rows, one
 * warp along N (pass_barrier.c's tl_reduce_in_quads; emit_cuda.c's
 * op_reduce_rows): a row's elements sit in one quad of lanes, so each
 * thread folds its elements of row h (local indices ((h / 2) NI + j / 2) 4 +
 * (h % 2) 2 + j % 2, j < 2 NI, in that order), the quad combines by
 * shuffles across lanes 1 and 2 apart, and every lane writes its row
 * register h (combined with the old value when the reduce does not clear). */
static void reduce_quads(P *p, const tl_stmt *s, const red_ctx *rc) {
  const tl_sym *src = s->src->sym, *dst = s->dst->sym;
  tl_type at = rc->c == CF ? TL_FLOAT32 : TL_INT64;
  int64_t NI = src->mma_ni;
  for (int64_t h = 0; h < src->mma_mi * 2 && !p->failed; h++) {
    const char *acc = red_identity(p, s->reduce_type, rc->c);
    for (int64_t j = 0; j < NI * 2; j++) {
      const char *x = S("%%fr%d_%" PRId64, src->slot, ((h / 2) * NI + j / 2) * 4 + (h % 2) * 2 + j % 2);
      acc = red_step(p, s->reduce_type, rc->c, acc, conv(p, x, (tl_type)src->dtype, at, s->pointer));
    }
    acc = red_step(p, rc->comb, rc->c, acc, shfl_xor(p, rc->c, acc, 1));
    acc = red_step(p, rc->comb, rc->c, acc, shfl_xor(p, rc->c, acc, 2));
    const char *d = S("%%fr%d_%" PRId64, dst->slot, h);
    if (!s->clear)
      acc = red_step(p, rc->comb, rc->c, conv(p, d, (tl_type)dst->dtype, at, s->pointer), acc);
    ins(p, "mov.%s %s, %s", dst->dtype == TL_INT32 ? "b32" : "f32", d, conv(p, acc, at, (tl_type)dst->dtype, s->pointer));
  }
}

static void op_reduce(P *p, const tl_stmt *s) {
  const tl_sym *src = s->src->sym;
  red_ctx rc = {.s = s, .c = tl_dtype_is_float(src->dtype) ? CF : CD,
                .comb = s->reduce_type == RED_ABSSUM ? RED_SUM : s->reduce_type == RED_ABSMAX ? RED_MAX : s->reduce_type};
  if (tl_reduce_in_quads(s))
    return reduce_quads(p, s, &rc);
  if (!tl_reduce_by_rows(s) || !in_regs(src) || src->reg_layout != TL_LAYOUT_BLOCKED || !p->smem ||
      (in_regs(s->dst->sym) && s->dst->sym->reg_layout != TL_LAYOUT_BLOCKED))
    return fail(p, s->pointer, "the PTX back end reduces only register fragments of the blocked layout by rows, "
                               "into the blocked layout, and of the mma layout into mma-rows ones in quads of lanes");
  tl_type at = rc.c == CF ? TL_FLOAT32 : TL_INT64;
  int64_t n = src->dims[src->ndim - 1], per = src->per_thread, size = product(src->dims, src->ndim), rows = size / n;
  if (n % per == 0) {
    int64_t g = n / per; /* threads per row, a power of two up to 32 */
    const char *acc = red_identity(p, s->reduce_type, rc.c);
    for (int64_t r = 0; r < per; r++) {
      const char *e = nr(p, CR), *in = nr(p, CP), *x = S("%%fr%d_%" PRId64, src->slot, r);
      ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %" PRId64, e, p->tid, per, r);
      ins(p, "setp.lt.s32 %s, %s, %" PRId64, in, e, size);
      const char *y = red_step(p, s->reduce_type, rc.c, acc, conv(p, x, (tl_type)src->dtype, at, s->pointer));
      const char *z = nr(p, rc.c);
      ins(p, "selp.%s %s, %s, %s, %s", rc.c == CF ? "f32" : "b64", z, y, acc, in);
      acc = z;
    }
    for (int64_t off = g / 2; off >= 1; off /= 2)
      acc = red_step(p, rc.comb, rc.c, acc, shfl_xor(p, rc.c, acc, off));
    const char *lead = nr(p, CR), *row = nr(p, CR), *k = nr(p, CP), *ok = nr(p, CP), *w = nr(p, CR);
    ins(p, "rem.u32 %s, %s, %" PRId64, lead, p->tid, g);
    ins(p, "mul.lo.s32 %s, %s, %" PRId64, w, p->tid, per);
    ins(p, "div.u32 %s, %s, %" PRId64, row, w, n);
    ins(p, "setp.eq.s32 %s, %s, 0", k, lead);
    ins(p, "setp.lt.s32 %s, %s, %" PRId64, ok, row, rows);
    ins(p, "and.pred %s, %s, %s", k, k, ok);
    ins(p, "@%s st.shared.%s [%s], %s", k, rc.c == CF ? "f32" : "b64", part_addr(p, rc.c, row), acc);
  } else { /* each thread holds whole rows */
    int64_t rpt = per / n;
    for (int64_t w = 0; w < rpt; w++) {
      const char *row = nr(p, CR), *ok = nr(p, CP);
      ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %" PRId64, row, p->tid, rpt, w);
      ins(p, "setp.lt.s32 %s, %s, %" PRId64, ok, row, rows);
      const char *acc = red_identity(p, s->reduce_type, rc.c);
      for (int64_t c = 0; c < n; c++)
        acc = red_step(p, s->reduce_type, rc.c, acc,
                       conv(p, S("%%fr%d_%" PRId64, src->slot, w * n + c), (tl_type)src->dtype, at, s->pointer));
      ins(p, "@%s st.shared.%s [%s], %s", ok, rc.c == CF ? "f32" : "b64", part_addr(p, rc.c, row), acc);
    }
  }
  barrier(p);
  int64_t dext[TL_MAX_DIMS] = {0};
  int dn = squeezed(s->dst, dext);
  hoist(p, s->dst, NULL);
  for_elements(p, reg_region(s->dst) ? s->dst->sym : NULL, dext, dn, visit_partial, &rc, s->pointer);
  unhoist(p);
}

/* ---- cumsum, cummax, cummin (emit_cuda.c's op_cumsum) ------------------------------------------------ */
/* A register fragment source is first stored whole into the shared scratch
 * (float32, or int64 for int32), then every element of the destination (by
 * its owner, or cooperatively) folds its prefix (its suffix, reverse) along
 * the dimension, in a loop. */
typedef struct {
  const tl_stmt *s;
  int c;          /* the accumulator's class */
  bool spilled;   /* the source is in the scratch */
} scan_ctx;

static void visit_spill(P *p, const void *what, const char *e, const char *const *q) {
  (void)q;
  const scan_ctx *sc = what;
  const tl_sym *src = sc->s->src->sym;
  tl_type at = sc->c == CF ? TL_FLOAT32 : TL_INT64;
  const char *v = conv(p, S("%%fr%d_%" PRId64, src->slot, p->r), (tl_type)src->dtype, at, sc->s->pointer);
  ins(p, "st.shared.%s [%s], %s", sc->c == CF ? "f32" : "b64", part_addr(p, sc->c, e), v);
}

static void visit_scan(P *p, const void *what, const char *e, const char *const *dq) {
  const scan_ctx *sc = what;
  const tl_stmt *s = sc->s;
  const tl_region *src = s->src;
  tl_type at = sc->c == CF ? TL_FLOAT32 : TL_INT64;
  int64_t ext[TL_MAX_DIMS];
  for (int d = 0; d < src->ndim; d++)
    ext[d] = src->ext[d];
  const char **full = decode(p, e, ext, src->ndim);
  const char *acc = red_identity(p, s->reduce_type, sc->c);
  const char *k = nr(p, CR), *g = nr(p, CP);
  int top = new_label(p), end = new_label(p);
  if (s->reverse)
    ins(p, "mov.b32 %s, %s", k, full[s->dim]);
  else
    ins(p, "mov.b32 %s, 0", k);
  ins(p, "L%d:", top);
  if (s->reverse)
    ins(p, "setp.ge.s32 %s, %s, %" PRId64, g, k, src->ext[s->dim]);
  else
    ins(p, "setp.gt.s32 %s, %s, %s", g, k, full[s->dim]);
  ins(p, "@%s bra L%d", g, end);
  const char *sq[TL_MAX_DIMS];
  int m = 0;
  for (int d = 0; d < src->ndim; d++)
    if (src->ext[d] != 1)
      sq[m++] = d == s->dim ? k : full[d];
  const char *v;
  if (sc->spilled) { /* the element's row-major offset in the fragment, in the scratch */
    const char **idx = region_idx(p, src, sq);
    const char *o = nr(p, CR);
    ins(p, "cvt.u32.u64 %s, %s", o, idx[0]);
    for (int d = 1; d < src->sym->ndim; d++) {
      const char *w = nr(p, CR), *mm = nr(p, CR);
      ins(p, "cvt.u32.u64 %s, %s", w, idx[d]);
      ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", mm, o, src->sym->dims[d], w);
      o = mm;
    }
    v = nr(p, sc->c);
    ins(p, "ld.shared.%s %s, [%s]", sc->c == CF ? "f32" : "b64", v, part_addr(p, sc->c, o));
  } else {
    v = region_read(p, src, sq, s->pointer);
    if (!v)
      return;
    v = conv(p, v, (tl_type)src->sym->dtype, at, s->pointer);
  }
  const char *y = red_step(p, s->reduce_type, sc->c, acc, v);
  ins(p, "mov.%s %s, %s", sc->c == CF ? "f32" : "b64", acc, y); /* the accumulator is assigned again */
  ins(p, "add.s32 %s, %s, 1", k, k);
  ins(p, "bra L%d", top);
  ins(p, "L%d:", end);
  region_write(p, s->dst, dq, conv(p, acc, at, (tl_type)s->dst->sym->dtype, s->pointer), s->pointer);
}

static void op_cumsum(P *p, const tl_stmt *s) {
  const tl_sym *src = s->src->sym;
  if ((in_regs(src) && src->reg_layout != TL_LAYOUT_BLOCKED) ||
      (in_regs(s->dst->sym) && s->dst->sym->reg_layout != TL_LAYOUT_BLOCKED))
    return fail(p, s->pointer, "the PTX back end scans register fragments of the blocked layout only");
  scan_ctx sc = {.s = s, .c = tl_dtype_is_float(src->dtype) ? CF : CD, .spilled = in_regs(src)};
  if (sc.spilled) {
    if (!p->smem)
      return fail(p, s->pointer, "the PTX back end scans a register fragment only through the shared scratch");
    for_elements(p, src, src->dims, src->ndim, visit_spill, &sc, s->pointer);
    barrier(p);
  }
  int64_t dext[TL_MAX_DIMS] = {0};
  int dn = squeezed(s->dst, dext);
  hoist(p, s->src, s->dst);
  for_elements(p, reg_region(s->dst) ? s->dst->sym : NULL, dext, dn, visit_scan, &sc, s->pointer);
  unhoist(p);
  if (sc.spilled)
    barrier(p);
}

static void emit_assign(P *p, const tl_stmt *s) {
  const tl_expr *l = s->lhs;
  if (l->kind == E_NAME) {
    const tl_sym *v = l->sym;
    if (!need_cls(p, v->type, s->pointer) || !p->val[v->slot])
      return fail(p, s->pointer, "the PTX back end has no variable '%s' here", v->name);
    const char *x = ex_to(p, s->value, v->type);
    ins(p, "mov.%s %s, %s", cls_of(v->type) == CP ? "pred" : cls_of(v->type) == CD ? "b64" : cls_of(v->type) == CF ? "f32" : "b32",
        p->val[v->slot], x);
    return;
  }
  const tl_sym *b = l->sym;
  if (in_regs(b)) {
    const char *x = ex_to(p, s->value, (tl_type)b->dtype);
    const char *d = frag_reg(p, b, s->pointer, "written");
    if (d && !p->failed)
      ins(p, "mov.%s %s, %s", b->dtype == TL_INT32 ? "b32" : "f32", d, x);
    return;
  }
  bool self_read = reads(s->value, b);
  for (int i = 0; i < l->nargs; i++)
    self_read |= reads(l->args[i], b);
  if (in_smem(b) && !p->in_par && self_read) /* emit_cuda.c makes such a thread-level store lock-step */
    return fail(p, s->pointer, "the PTX back end has no lock-step store into shared buffer '%s' (it reads the "
                               "buffer it writes outside a parallel loop)", b->name);
  if (b->kind != SYM_TENSOR && !in_smem(b) && !in_local(b))
    return fail(p, s->pointer, "the PTX back end writes only tensors, shared buffers, local arrays, register "
                               "fragments and variables, not '%s'", b->name);
  const char *x = ex_to(p, s->value, (tl_type)b->dtype);
  const char **idx = index_regs(p, l);
  if (p->failed)
    return;
  if (in_smem(b))
    store_at(p, "shared", b->dtype, smem_addr(p, b, idx), NULL, x);
  else if (in_local(b))
    local_store(p, b, idx, x);
  else
    store(p, b, idx, NULL, x);
}

/* The block barrier (the program's threads' beside a producer warpgroup), after fence.proxy.async where a
 * gemm runs on wgmma (pass_barrier.c: the threads' shared-memory writes visible to its async proxy). */
static void barrier(P *p) {
  if (p->prog->fence_async)
    ins(p, "fence.proxy.async.shared::cta");
  ins(p, "%s", p->bar);
}

/* A counted loop: register c (64-bit) from `from` while below n (64-bit registers or immediates), the
 * body after loop_open, closed by loop_close. */
typedef struct {
  const char *c;
  int top, end;
} counted;

static counted loop_open(P *p, const char *from, const char *n) {
  counted k = {nr(p, CD), new_label(p), new_label(p)};
  const char *q = nr(p, CP);
  ins(p, "mov.b64 %s, %s", k.c, from);
  ins(p, "L%d:", k.top);
  ins(p, "setp.ge.s64 %s, %s, %s", q, k.c, n);
  ins(p, "@%s bra L%d", q, k.end);
  return k;
}

static void loop_close(P *p, counted k) {
  ins(p, "add.s64 %s, %s, 1", k.c, k.c);
  ins(p, "bra L%d", k.top);
  ins(p, "L%d:", k.end);
}

/* Does pipelined loop s prefetch packed sub-byte elements by bulk tensor copies (pass_tma.c)? */
static bool packed_tma(const tl_program *prog, const tl_stmt *s) {
  for (int i = 0; i < s->body.n; i++)
    if (s->body.items[i]->tma && prog->tmaps[s->body.items[i]->tma_map].packed > 1)
      return true;
  return false;
}

static void emit_loop(P *p, const tl_stmt *s) {
  if (s->pipe || s->loop_kind == LOOP_PIPELINED) {
    const char *why = !s->pipe || !s->tma || !s->wspec ? "pipelined loops other than bulk tensor copies issued by a "
                                                          "producer warpgroup"
                      : s->wg_lag                    ? "pipelined loops that run their tail an iteration late (wg_lag)"
                      : s->slices > 1                ? "pipelined loops that run in slices"
                      : s->mcast                     ? "multicast copies"
                      : packed_tma(p->prog, s)       ? "bulk tensor copies of packed sub-byte elements"
                      : s->wspec_threads             ? "pipelined loops whose body reads the stages but through wgmma"
                                                     : NULL;
    if (!why && (!p->cit || s != tl_wspec_loop(p->prog)))
      why = "producer warpgroups of a loop inside another statement";
    if (why)
      return fail(p, s->pointer, "the PTX back end has no %s yet", why);
    return wspec_loop(p, s);
  }
  const char *n = ex_to(p, s->extent, TL_INT64), *st = ex_to(p, s->start, TL_INT64), *dd = ex_to(p, s->step, TL_INT64);
  int vary = tl_expr_varying(s->extent) || tl_expr_varying(s->start) || tl_expr_varying(s->step);
  counted k = loop_open(p, "0", n);
  const char *i = nr(p, CD), *v = nr(p, CR);
  ins(p, "mad.lo.s64 %s, %s, %s, %s", i, k.c, dd, st);
  ins(p, "cvt.u32.u64 %s, %s", v, i); /* (int)(start + c * step) */
  p->val[s->var->slot] = v;
  p->varying += vary;
  emit_body(p, &s->body);
  p->varying -= vary;
  if (s->barrier_end)
    barrier(p);
  loop_close(p, k);
}

static void emit_stmt(P *p, const tl_stmt *s) {
  p->cur = s;
  if (s->barrier_before)
    barrier(p);
  switch (s->kind) {
  case S_ALLOC:
    return; /* checked and declared at the top */
  case S_ALLOC_VAR: {
    const tl_sym *v = s->sym;
    if (!need_cls(p, (tl_type)v->dtype, s->pointer))
      return;
    int c = cls_of((tl_type)v->dtype);
    const char *r = nr(p, c);
    if (s->value)
      ins(p, "mov.%s %s, %s", c == CP ? "pred" : c == CD ? "b64" : c == CF ? "f32" : "b32", r,
          ex_to(p, s->value, (tl_type)v->dtype));
    else if (c == CP)
      ins(p, "setp.ne.u32 %s, 0, 0", r);
    else
      ins(p, "mov.%s %s, 0", c == CD ? "b64" : "b32", r);
    p->val[v->slot] = r;
    return;
  }
  case S_LET:
    if (need_cls(p, s->sym->type, s->pointer))
      p->val[s->sym->slot] = s->value->kind == E_CONST ? ex_to(p, s->value, s->sym->type) : ex(p, s->value);
    return;
  case S_ASSIGN: emit_assign(p, s); return;
  case S_COPY: op_copy(p, s); return;
  case S_FILL: op_fill(p, s); return;
  case S_REDUCE: op_reduce(p, s); return;
  case S_CUMSUM: op_cumsum(p, s); return;
  case S_PARALLEL:
    if (s->uni_all)
      op_parallel_uniform(p, s);
    else
      op_parallel(p, s);
    return;
  case S_SYNC_THREADS:
    barrier(p);
    if (s->fence) { /* the block's earlier global accesses, then its later ones, ordered device-wide */
      ins(p, "fence.sc.gpu");
      barrier(p);
    }
    return;
  case S_ANNOTATE_LAYOUT:
  case S_USE_SWIZZLE:
    return; /* hints: no effect on results */
  case S_IF: {
    if (s->value->kind == E_CONST) {
      bool take = s->value->type == TL_TY_UREAL || is_float(s->value->type) ? s->value->val.f != 0 : s->value->val.i != 0;
      emit_body(p, take ? &s->body : &s->else_body);
      return;
    }
    const char *k = ex_to(p, s->value, TL_BOOL);
    int els = new_label(p), end = new_label(p), vary = tl_expr_varying(s->value);
    ins(p, "@!%s bra L%d", k, els);
    p->varying += vary;
    emit_body(p, &s->body);
    ins(p, "bra L%d", end);
    ins(p, "L%d:", els);
    if (s->has_else)
      emit_body(p, &s->else_body);
    p->varying -= vary;
    ins(p, "L%d:", end);
    return;
  }
  case S_LOOP: emit_loop(p, s); return;
  case S_CLUSTER_REDUCE:
    if (p->prog->cl_size > 1)
      fail(p, s->pointer, "the PTX back end does not lower cluster_reduce across a cluster of blocks; the CUDA back "
           "end does");
    return; /* a cluster of one block: nothing to combine */
  case S_GEMM:
    if (!s->ov_late) /* a late gemm is issued after its loop's other gemm, one iteration on */
      op_gemm(p, s);
    return;
  default:
    fail(p, s->pointer, "the PTX back end has no '%s' statement yet", s->op_name ? s->op_name : tl_stmt_kind_name(s->kind));
  }
}

static void emit_body(P *p, const tl_body *b) {
  for (int i = 0; i < b->n && !p->failed; i++) {
    emit_stmt(p, b->items[i]);
    pre_release(p, b->items[i]);
  }
}

/* ---- an mma-layout fragment into a tensor ------------------------------------------------------- */
/* A copy of the whole of mma-layout fragment f into a tensor (emit_cuda.c's
 * op_copy_pairs and op_copy_quads): the thread's address computed once, each
 * store at a constant offset from it (a register per distinct row offset
 * where the tensor's extents are not constants), as wide as the layout
 * allows where the columns are the tensor's last dimension: a thread's pair
 * of neighbouring columns at a time where the row length and the start are
 * even (16-bit ones converted with one cvt.rn.f16x2/bf16x2.f32, the same
 * rounding as one at a time; 32-bit ones as one 8-byte store), and 16-bit
 * ones four columns at a time where they are multiples of 4 and the lanes
 * of each warp run the copy together (a lane pair exchanges pairs by one
 * shuffle: 8 bytes a store), under the guards pass_range.c kept (a pair or
 * quad is wholly inside or outside). */
static bool acc_copy(const tl_stmt *s) {
  const tl_sym *f = s->src->sym, *d = s->dst->sym;
  int64_t ext[TL_MAX_DIMS];
  return in_regs(f) && f->reg_layout == TL_LAYOUT_MMA && f->ndim == 2 && d->kind == SYM_TENSOR &&
         squeezed(s->dst, ext) == 2 && ext[0] == f->dims[0] && ext[1] == f->dims[1];
}

/* The constant value of tensor s's extent d, or -1. */
static int64_t const_dim(const tl_sym *s, int d) { return s->shape[d]->kind == E_CONST ? s->shape[d]->val.i : -1; }

static void op_copy_acc(P *p, const tl_stmt *s) {
  const tl_sym *f = s->src->sym, *d = s->dst->sym;
  const tl_region *r = s->dst;
  int dr = -1, dc = -1;
  for (int i = 0; i < r->ndim; i++)
    if (r->ext[i] != 1)
      *(dr < 0 ? &dr : &dc) = i;
  int64_t es = (int64_t)tl_dtype_size(d->dtype);
  /* how many neighbouring columns one store writes (see above): a thread's pair, or with quads a lane pair's
   * 16-bit pairs exchanged (op_copy_quads of emit_cuda.c: 8 bytes a store, a quad of lanes writing 32
   * neighbouring bytes of a row, where a pair store wrote 4 of two sectors; one shuffle a store) */
  bool pairs = (es == 2 || es == 4) && dc == d->ndim - 1 && d->dims[dc] >= 0 && d->dims[dc] % 2 == 0 &&
               tl_multiple_of(r->lo[dc], 2) && d->align >= 2 * es;
  bool quads = pairs && es == 2 && !p->varying && !p->in_par && p->T % 32 == 0 && f->mma_ni % 2 == 0 &&
               d->dims[dc] % 4 == 0 && tl_multiple_of(r->lo[dc], 4) && d->align >= 8;
  const char *tr, *tc, *odd = NULL;
  mma_thread_parts(p, f, &tr, &tc);
  if (quads) { /* the odd lane of a pair stores its group 2m + 1's four columns: its pair's column - 2 + 8 */
    const char *l = nr(p, CR), *c2 = nr(p, CR);
    odd = nr(p, CP);
    ins(p, "and.b32 %s, %s, 1", l, p->tid);
    ins(p, "setp.ne.u32 %s, %s, 0", odd, l);
    ins(p, "mad.lo.s32 %s, %s, 6, %s", c2, l, tc);
    tc = c2;
  }
  const char *tq[2] = {tr, tc};
  const char **idx = region_idx(p, r, tq);
  bool all[TL_MAX_DIMS];
  for (int i = 0; i < TL_MAX_DIMS; i++)
    all[i] = true;
  const char *g0, *base = address(p, d, idx, all, &g0);
  /* the guards of the dimensions not proven inside: the squeezed ones once, the rows' and columns' per offset */
  const char *gt = NULL;
  for (int i = 0; i < d->ndim; i++)
    if (i != dr && i != dc && !r->inside[i]) {
      const char *q = nr(p, CP);
      ins(p, "setp.lt.u64 %s, %s, %s", q, idx[i], p->dims[d->param_index][i]);
      if (gt)
        ins(p, "and.pred %s, %s, %s", q, q, gt);
      gt = q;
    }
  /* the strides (elements) of the rows' and the columns' dimensions: constants where the extents are */
  int64_t cs[2] = {1, 1};
  const char *rs[2] = {NULL, NULL};
  int dd[2] = {dr, dc};
  for (int k = 0; k < 2; k++)
    for (int i = dd[k] + 1; i < d->ndim; i++) {
      int64_t c = const_dim(d, i);
      if (c >= 0 && !rs[k]) {
        cs[k] *= c;
        continue;
      }
      const char *m = nr(p, CD);
      if (rs[k])
        ins(p, "mul.lo.s64 %s, %s, %s", m, rs[k], p->dims[d->param_index][i]);
      else
        ins(p, "mul.lo.s64 %s, %s, %" PRId64, m, p->dims[d->param_index][i], cs[k]);
      rs[k] = m;
    }
  /* per distinct row or column offset: its byte offset register (or constant) and guard */
  const char *roff[2][TL_PTX_MAX_ACC], *rg[2][TL_PTX_MAX_ACC];
  int64_t rkey[2][TL_PTX_MAX_ACC];
  int nk[2] = {0, 0};
  /* quads: per 8 elements (column groups 2m and 2m + 1, rows +0 and +8), elements h and h + 2 */
  for (int64_t e = 0; e < f->per_thread && !p->failed; e += quads ? (e % 8 == 2 ? 6 : 2) : pairs ? 2 : 1) {
    int64_t c[2] = {mma_crow(f, e), mma_ccol(f, e)};
    const char *off[2], *g[2];
    for (int k = 0; k < 2; k++) {
      int j = 0;
      while (j < nk[k] && rkey[k][j] != c[k])
        j++;
      if (j == nk[k]) { /* a new offset */
        rkey[k][j] = c[k];
        roff[k][j] = NULL;
        if (rs[k]) {
          const char *m = nr(p, CD);
          ins(p, "mul.lo.s64 %s, %s, %" PRId64, m, rs[k], c[k] * es);
          roff[k][j] = m;
        }
        rg[k][j] = NULL;
        if (!r->inside[dd[k]]) {
          const char *x = nr(p, CD), *q = nr(p, CP);
          ins(p, "add.s64 %s, %s, %" PRId64, x, idx[dd[k]], c[k]);
          ins(p, "setp.lt.u64 %s, %s, %s", q, x, p->dims[d->param_index][dd[k]]);
          rg[k][j] = q;
        }
        nk[k]++;
      }
      off[k] = roff[k][j];
      g[k] = rg[k][j];
    }
    int64_t imm = (rs[0] ? 0 : c[0] * cs[0] * es) + (rs[1] ? 0 : c[1] * cs[1] * es);
    const char *ad = base;
    for (int k = 0; k < 2; k++)
      if (off[k]) {
        const char *a2 = nr(p, CD);
        ins(p, "add.s64 %s, %s, %s", a2, ad, off[k]);
        ad = a2;
      }
    const char *gs[3] = {gt, g[0], g[1]}, *gg = NULL;
    for (int k = 0; k < 3; k++)
      if (gs[k] && !gg) {
        gg = gs[k];
      } else if (gs[k]) {
        const char *q = nr(p, CP);
        ins(p, "and.pred %s, %s, %s", q, gg, gs[k]);
        gg = q;
      }
    const char *pre = gg ? S("@%s ", gg) : "";
    const char *at = imm ? S("%s+%" PRId64, ad, imm) : ad;
    const char *cvt = d->dtype == TL_BFLOAT16 ? "bf16x2" : "f16x2";
    if (quads) { /* a: the pair of group 2m, b: of group 2m + 1; the even lane stores its a and the odd lane's */
      const char *a = nr(p, CR), *b = nr(p, CR), *x = nr(p, CR), *y = nr(p, CR), *lo = nr(p, CR), *hi = nr(p, CR);
      ins(p, "cvt.rn.%s.f32 %s, %%fr%d_%" PRId64 ", %%fr%d_%" PRId64, cvt, a, f->slot, e + 1, f->slot, e);
      ins(p, "cvt.rn.%s.f32 %s, %%fr%d_%" PRId64 ", %%fr%d_%" PRId64, cvt, b, f->slot, e + 5, f->slot, e + 4);
      ins(p, "selp.b32 %s, %s, %s, %s", x, a, b, odd);
      ins(p, "shfl.sync.bfly.b32 %s, %s, 1, 31, -1", y, x);
      ins(p, "selp.b32 %s, %s, %s, %s", lo, y, a, odd);
      ins(p, "selp.b32 %s, %s, %s, %s", hi, b, y, odd);
      ins(p, "%sst.global.v2.b32 [%s], {%s, %s}", pre, at, lo, hi);
    } else if (pairs && es == 2) {
      const char *w = nr(p, CR);
      ins(p, "cvt.rn.%s.f32 %s, %%fr%d_%" PRId64 ", %%fr%d_%" PRId64, cvt, w, f->slot, e + 1, f->slot, e);
      ins(p, "%sst.global.b32 [%s], %s", pre, at, w);
    } else if (pairs) { /* two 32-bit elements: 8 bytes */
      const char *v0 = conv(p, S("%%fr%d_%" PRId64, f->slot, e), (tl_type)f->dtype, (tl_type)d->dtype, s->pointer);
      const char *v1 = conv(p, S("%%fr%d_%" PRId64, f->slot, e + 1), (tl_type)f->dtype, (tl_type)d->dtype, s->pointer);
      ins(p, "%sst.global.v2.%s [%s], {%s, %s}", pre, d->dtype == TL_FLOAT32 ? "f32" : "b32", at, v0, v1);
    } else {
      const char *v = conv(p, S("%%fr%d_%" PRId64, f->slot, e), (tl_type)f->dtype, (tl_type)d->dtype, s->pointer);
      store_at(p, "global", d->dtype, at, gg, v);
    }
  }
}

/* ---- the tensor-core forms (sm_90a): mbarriers, bulk tensor copies, wgmma, the producer warpgroup --------- */
/* The shared address of mbarrier i + the stage in register st (or NULL). */
static const char *mbar_at(P *p, int i, const char *st) {
  const char *a = nr(p, CR);
  if (st)
    ins(p, "mad.lo.s32 %s, %s, 8, %s", a, st, p->mbar);
  else
    ins(p, "mov.u32 %s, %s", a, p->mbar);
  if (i)
    ins(p, "add.s32 %s, %s, %d", a, a, 8 * i);
  return a;
}

/* Waits until the mbarrier at shared address bar completes the phase of parity par (a register). */
static void mbar_wait(P *p, const char *bar, const char *par) {
  int top = new_label(p);
  const char *q = nr(p, CP);
  ins(p, "L%d:", top);
  ins(p, "mbarrier.try_wait.parity.shared::cta.b64 %s, [%s], %s", q, bar, par);
  ins(p, "@!%s bra L%d", q, top);
}

/* q = n / d and r = n % d (64-bit registers) of 64-bit unsigned register n and constant d >= 1, without a
 * division (a 64-bit one is a subroutine call: see ins): a shift and a mask for a power of two, else
 * Granlund and Montgomery's multiply (PLDI 1994, figure 4.1: m = floor(2^64 (2^l - d) / d) + 1 with
 * 2^(l-1) < d <= 2^l, q = (t + ((n - t) >> 1)) >> (l - 1) with t = mulhi(m, n)), exact for every n. */
static void udiv64c(P *p, const char *n, uint64_t d, const char **q, const char **r) {
  *q = nr(p, CD);
  *r = nr(p, CD);
  if ((d & (d - 1)) == 0) {
    int k = 0;
    while ((1ull << k) < d)
      k++;
    ins(p, "shr.b64 %s, %s, %d", *q, n, k);
    ins(p, "and.b64 %s, %s, %" PRIu64, *r, n, d - 1);
    return;
  }
  int l = 0;
  while ((1ull << l) < d)
    l++;
  uint64_t m = (uint64_t)((((unsigned __int128)((1ull << l) - d)) << 64) / d) + 1;
  const char *t = nr(p, CD), *u = nr(p, CD), *qd = nr(p, CD);
  ins(p, "mul.hi.u64 %s, %s, %" PRIu64, t, n, m);
  ins(p, "sub.s64 %s, %s, %s", u, n, t);
  ins(p, "shr.b64 %s, %s, 1", u, u);
  ins(p, "add.s64 %s, %s, %s", u, u, t);
  ins(p, "shr.b64 %s, %s, %d", *q, u, l - 1);
  ins(p, "mul.lo.s64 %s, %s, %" PRIu64, qd, *q, d);
  ins(p, "sub.s64 %s, %s, %s", *r, n, qd);
}

/* x % S and (x / S) & 1 of a 64-bit register x, as 32-bit registers. */
static void stage_parity(P *p, const char *x, int64_t S_, const char **st, const char **par) {
  const char *m, *q;
  udiv64c(p, x, (uint64_t)S_, &q, &m);
  *st = nr(p, CR);
  ins(p, "cvt.u32.u64 %s, %s", *st, m);
  if (par) {
    *par = nr(p, CR);
    ins(p, "cvt.u32.u64 %s, %s", *par, q);
    ins(p, "and.b32 %s, %s, 1", *par, *par);
  }
}

/* The bytes of one stage of buffer b. */
static int64_t buf_bytes(const tl_sym *b) { return product(b->dims, b->ndim) * (int64_t)tl_dtype_size(b->dtype); }

/* Points the buffers of loop's prefetched copies at stage st (a register): p->stage. */
static void stage_addrs(P *p, const tl_stmt *loop, const char *st) {
  for (int i = 0; i < loop->body.n; i++) {
    const tl_stmt *c = loop->body.items[i];
    if (!c->prefetch)
      continue;
    const tl_sym *b = c->dst->sym;
    const char *a = nr(p, CR), *o = nr(p, CR);
    ins(p, "add.s32 %s, %s, %" PRId64, o, p->smem, b->smem_offset);
    ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", a, st, buf_bytes(b), o);
    p->stage[b->slot] = a;
  }
}

/* The shared address of buffer b's stage in use (its only one outside a pipelined loop). */
static const char *buf_addr(P *p, const tl_sym *b) {
  if (p->stage[b->slot])
    return p->stage[b->slot];
  const char *o = nr(p, CR);
  ins(p, "add.s32 %s, %s, %" PRId64, o, p->smem, b->smem_offset);
  return o;
}

/* The bulk tensor copies of TMA copy s into its buffer's stage, completing
 * on the mbarrier at mb (emit_cuda.c's emit_tma_copy, without multicast):
 * one per 128-byte panel of a swizzled buffer. */
static void tma_copy(P *p, const tl_stmt *s, const char *mb) {
  const tl_tmap *m = &p->prog->tmaps[s->tma_map];
  const tl_region *src = s->src;
  const tl_sym *b = s->dst->sym;
  int64_t panels = m->swizzle ? b->dims[b->ndim - 1] / m->box[0] : 1, panel_bytes = buf_bytes(b) / panels;
  const char *pol = s->evict ? nr(p, CD) : NULL; /* the copy's L2 policy ("eviction_policy") */
  if (pol)
    ins(p, "%s", tl_ptx_createpolicy(p->a, s->evict, pol));
  const char *lo[TL_TMAP_RANK_MAX];
  for (int i = 0; i < m->rank; i++) {
    int d = m->rank - 1 - i;
    lo[i] = src->lo[d] ? ex_to(p, src->lo[d], TL_INT32) : "0";
    if (!src->lo[d]) {
      lo[i] = nr(p, CR);
      ins(p, "mov.b32 %s, 0", lo[i]);
    }
  }
  const char *dst = buf_addr(p, b);
  for (int64_t k = 0; k < panels; k++) {
    const char *coords = "";
    for (int i = 0; i < m->rank; i++) {
      const char *c = lo[i];
      if (i == 0 && k) {
        c = nr(p, CR);
        ins(p, "add.s32 %s, %s, %" PRId64, c, lo[i], m->box[0] * k);
      }
      coords = S("%s%s%s", coords, i ? ", " : "", c);
    }
    const char *at = k ? S("%s+%" PRId64, dst, k * panel_bytes) : dst;
    ins(p, "%s", tl_ptx_tma_load(p->a, m->rank, at, p->tmap[s->tma_map], coords, mb, NULL, pol));
  }
}

/* Bytes one stage of a TMA loop's copies brings: their buffers, whole (emit_cuda.c's tma_stage_bytes). */
static int64_t tma_bytes(const tl_stmt *loop) {
  int64_t n = 0;
  for (int i = 0; i < loop->body.n; i++)
    if (loop->body.items[i]->prefetch && loop->body.items[i]->tma)
      n += buf_bytes(loop->body.items[i]->dst->sym);
  return n;
}

/* Register d (64-bit): the wgmma matrix descriptor of shared address addr
 * (a register) with leading and stride byte offsets lbo, sbo and swizzle
 * mode `mode` (emit_cuda.c's tl_wgdesc). */
static const char *wgdesc(P *p, const char *addr, int64_t lbo, int64_t sbo, int mode) {
  const char *m = nr(p, CR), *w = nr(p, CD), *d = nr(p, CD);
  uint64_t hi = ((uint64_t)((lbo >> 4) & 0x3fff) << 16) | ((uint64_t)((sbo >> 4) & 0x3fff) << 32) |
                ((uint64_t)mode << 62);
  ins(p, "and.b32 %s, %s, 262143", m, addr);
  ins(p, "shr.u32 %s, %s, 4", m, m);
  ins(p, "cvt.u64.u32 %s, %s", w, m);
  ins(p, "or.b64 %s, %s, 0x%016" PRIx64 "U", d, w, hi);
  return d;
}

/* The byte offset of k16 step k (a k32 step of 8-bit operands: 32 bytes too) from row 0 of K-major wgmma
 * operand X ([rows, K] in the swizzle of its row width W: emit_cuda.c's kmajor_desc): k * 32 within rows
 * of up to 128 bytes, else in panel k / 4. */
static int64_t kmajor_off(const tl_sym *X, int64_t k) {
  int64_t Kb = X->dims[1] * (int64_t)tl_dtype_size(X->dtype);
  return Kb > 128 ? (k / 4) * X->dims[0] * 128 + (k % 4) * 32 : k * 32;
}

static int64_t kmajor_width(const tl_sym *X) {
  int64_t Kb = X->dims[1] * (int64_t)tl_dtype_size(X->dtype);
  return Kb < 128 ? Kb : 128;
}

static int swz_mode(int64_t W) { return W == 128 ? 1 : W == 64 ? 2 : 3; }

/* A gemm on wgmma (emit_cuda.c's wgmma_issue and op_gemm_wgmma, A and B
 * from shared memory; the PTX ISA's ordering rules are stated there): the
 * matrix descriptors of the thread's warpgroup's rows of A and of B are
 * computed once, each instruction's is one of them plus a constant (the
 * address field, (address & 0x3ffff) >> 4, never carries: the operands lie
 * in the block's shared memory, under 2^18 bytes, at 16-byte multiples);
 * the accumulators are C's registers; per k16 step the mma_mi instructions
 * of the warpgroup's row tiles, then one wgmma-group, waited for until
 * wg_pending groups are in flight.  A gemm that clears C has scale-d false
 * in its first k step.  gemm_issue: everything up to the commit. */
static void gemm_issue(P *p, const tl_stmt *s) {
  const tl_sym *A = s->A, *B = s->B, *C = s->C;
  const char *why = !s->use_wgmma  ? "gemms off wgmma (mma.sync, FMA)"
                    : A->dtype != B->dtype || !tl_mma_ptx_type(A->dtype) ? "wgmma of operands of two types"
                    : !in_regs(C) || C->reg_layout != TL_LAYOUT_MMA || C->stages > 1 ||
                        C->dtype != (A->dtype == TL_INT8 || A->dtype == TL_UINT8 ? TL_INT32 : TL_FLOAT32)
                        ? "wgmma accumulators other than one fragment in registers (float32, int32 for integers)"
                    : s->a_regs && (!in_regs(A) || A->reg_layout != TL_LAYOUT_MMA || A->ndim != 2 ||
                                    (A->dtype != TL_FLOAT16 && A->dtype != TL_BFLOAT16) || A->mma_mi != C->mma_mi)
                        ? "wgmma with A from registers but a 16-bit fragment of C's mma layout"
                    : s->a_regs && s->wg_pending > 0
                        ? "wgmma with A from registers left in flight (emit_cuda.c keeps the registers it reads "
                          "in two sets, held_a; ptxas would reuse them after the issue)"
                    : (!s->a_regs && (A->rotates || !in_smem(A))) || B->rotates || !in_smem(B) ? "rotating wgmma operands"
                                                                                              : NULL;
  if (why)
    return fail(p, s->pointer, "the PTX back end has no %s yet", why);
  int es = (int)tl_dtype_size(A->dtype);
  bool ints = C->dtype == TL_INT32;
  int64_t K = A->dims[1], N = C->dims[1], nacc = N / 2, MI = C->mma_mi, NW = C->mma_wm, kstep = es == 1 ? 32 : 16;
  const char *sb = buf_addr(p, B), *da0 = NULL, *wg = NULL;
  int64_t Wa = 0;
  if (!s->a_regs) {
    const char *sa = buf_addr(p, A), *ab = nr(p, CR);
    Wa = kmajor_width(A);
    wg = nr(p, CR);
    ins(p, "shr.u32 %s, %s, 7", wg, p->tid); /* the warpgroup: rows [64 wg, +64) of each instruction's tile */
    ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", ab, wg, 64 * Wa, sa);
    da0 = wgdesc(p, ab, 16, 8 * Wa, swz_mode(Wa));
  }
  const char *db0 = s->trans_b ? wgdesc(p, sb, 16, 8 * kmajor_width(B), swz_mode(kmajor_width(B)))
                               : wgdesc(p, sb, B->dims[0] * 128, 1024, 1);
  const char *one = nr(p, CP), *zero = s->clear_accum || tl_vec_has(&p->folded, s) ? nr(p, CP) : NULL;
  ins(p, "setp.ne.u32 %s, 1, 0", one);
  if (zero)
    ins(p, "setp.ne.u32 %s, 0, 0", zero);
  const char *ty = tl_mma_ptx_type(A->dtype), *cty = tl_mma_ptx_type(ints ? TL_INT32 : TL_FLOAT32);
  const char *tail = tl_ptx_wgmma_tail(p->a, es, ints, s->a_regs, s->trans_b);
  /* A from registers (emit_cuda.c's a_frag_regs): row tile i and k16 step k are A's accumulator tiles
   * (i, 2k) and (i, 2k + 1), elements i * 4 NI + 8k + 0..7, in pairs of halves (the first the low one),
   * every step's written before the fence; the values are 16-bit already, so the conversion is exact */
  const char **areg = NULL;
  if (s->a_regs) {
    areg = tl_arena_alloc(p->a, sizeof(char *) * (size_t)((K / kstep) * MI));
    const char *cvt = A->dtype == TL_BFLOAT16 ? "cvt.rn.bf16x2.f32" : "cvt.rn.f16x2.f32";
    for (int64_t k = 0; k < K / kstep; k++)
      for (int64_t i = 0; i < MI; i++) {
        int64_t base = i * A->mma_ni * 4 + k * 8;
        const char *w[4];
        for (int q = 0; q < 4; q++) {
          int64_t lo = base + (q / 2) * 4 + (q % 2) * 2;
          if (A->packed) { /* its pairs already: word lo / 2 */
            w[q] = S("%%fr%d_%" PRId64, A->slot, lo / 2);
            continue;
          }
          w[q] = nr(p, CR);
          ins(p, "%s %s, %%fr%d_%" PRId64 ", %%fr%d_%" PRId64, cvt, w[q], A->slot, lo + 1, A->slot, lo);
        }
        areg[k * MI + i] = S("{%s,%s,%s,%s}", w[0], w[1], w[2], w[3]);
      }
  }
  ins(p, "wgmma.fence.sync.aligned");
  p->wgmma = true;
  for (int64_t k = 0; k < K / kstep; k++) {
    int64_t ob = s->trans_b ? kmajor_off(B, k) : k * 2048;
    const char *db = db0;
    if (ob) {
      db = nr(p, CD);
      ins(p, "add.s64 %s, %s, %" PRId64, db, db0, ob >> 4);
    }
    for (int64_t i = 0; i < MI; i++) {
      const char *da = areg ? areg[k * MI + i] : da0;
      int64_t oa = areg ? 0 : i * NW * 16 * Wa + kmajor_off(A, k);
      if (oa) {
        da = nr(p, CD);
        ins(p, "add.s64 %s, %s, %" PRId64, da, da0, oa >> 4);
      }
      const char *acc = "";
      for (int64_t q = 0; q < nacc; q++)
        acc = S("%s%s%%fr%d_%" PRId64, acc, q ? "," : "", C->slot, i * nacc + q);
      ins(p, "%s", tl_ptx_wgmma(p->a, N, (int)kstep, cty, ty, acc, da, db, k == 0 && zero ? zero : one, tail));
    }
  }
}

/* Warpgroup ping-pong (pass_wspec.c's pingpong: emit_cuda.c's pp_turn_wait
 * and pp_turn_pass, which say why): warpgroup w waits on named barrier
 * PP_BAR + w (256 threads: its own 128 and the 128 of the one before, which
 * arrive) before it issues a gemm, and lets warpgroup w + 1 (mod W) go
 * after its commit. */
#define PP_BAR 2
static void pp_turn(P *p, bool pass) {
  if (!p->pp_wg)
    return;
  const char *w = nr(p, CR);
  ins(p, "shr.u32 %s, %s, 7", w, p->tid);
  if (pass) {
    ins(p, "add.s32 %s, %s, 1", w, w);
    ins(p, "rem.u32 %s, %s, %d", w, w, p->pp_wg);
  }
  ins(p, "add.s32 %s, %s, %d", w, w, PP_BAR);
  ins(p, "bar.%s %s, 256", pass ? "arrive" : "sync", w);
}

/* The late gemm g of the wspec loop being emitted (pass_overlap.c), for its
 * iteration over the tiles `it` (a %rd register): its prefetched operands at
 * that iteration's stage (emit_cuda.c's wgmma_issue_late). */
static void gemm_issue_late(P *p, const tl_stmt *g, const char *it) {
  const tl_stmt *loop = p->pipe;
  const char **saved = tl_arena_alloc(p->a, sizeof(char *) * (size_t)(p->prog->nbuffer_slots + 1));
  memcpy(saved, p->stage, sizeof(char *) * (size_t)(p->prog->nbuffer_slots + 1));
  const char *st;
  stage_parity(p, it, loop->pipe_stages, &st, NULL);
  stage_addrs(p, loop, st);
  gemm_issue(p, g);
  memcpy(p->stage, saved, sizeof(char *) * (size_t)(p->prog->nbuffer_slots + 1));
}

/* A gemm on wgmma (emit_cuda.c's op_gemm_wgmma): issued in the warpgroup's
 * turn of a ping-pong loop, committed, then waited for until wg_pending
 * groups are in flight; with a late gemm (ov_gemm), the previous
 * iteration's is issued after it as a second group (an empty one in the
 * first iteration), the two one turn, and this gemm's group alone waited
 * for. */
static void op_gemm(P *p, const tl_stmt *s) {
  if (s->ov_gemm && (!p->pipe || p->pipe->ov_gemm != s->ov_gemm))
    return fail(p, s->pointer, "the PTX back end has overlapped gemms (pass_overlap.c) only in a wspec loop");
  pp_turn(p, false);
  gemm_issue(p, s);
  ins(p, "wgmma.commit_group.sync.aligned");
  if (s->ov_gemm) {
    int skip = new_label(p);
    const char *first = nr(p, CP), *it = nr(p, CD);
    ins(p, "setp.eq.s64 %s, %s, 0", first, p->pipe_c);
    ins(p, "@%s bra L%d", first, skip);
    ins(p, "sub.s64 %s, %s, 1", it, p->pipe_g);
    gemm_issue_late(p, s->ov_gemm, it);
    ins(p, "L%d:", skip);
    ins(p, "wgmma.commit_group.sync.aligned");
    pp_turn(p, true);
    ins(p, "wgmma.wait_group.sync.aligned 1");
    return;
  }
  pp_turn(p, true);
  ins(p, "wgmma.wait_group.sync.aligned %d", s->wg_pending);
}

/* Frees stage st (a register) of wspec loop s: each warp, its reads done
 * (wgmma's, by the wait for their group), arrives on the stage's "free"
 * mbarrier once (emit_cuda.c's release_stage). */
static void release_stage(P *p, const tl_stmt *s, const char *st) {
  const char *bar = mbar_at(p, s->wspec_empty, st);
  ins(p, "bar.warp.sync -1");
  ins(p, "@%s %s", p->lane0, tl_ptx_mbar_arrive(p->a, bar));
}

/* The kernel's wspec loop (pass_wspec.c), or NULL. */
/* A wspec loop's consumer side (emit_cuda.c's emit_wspec_loop without
 * wg_lag): iteration c (g = the iterations waited for before it, over the
 * tiles, plus c) waits for its stage's full mbarrier in phase g / S,
 * points the prefetched buffers at stage g % S, runs the body's other
 * statements and frees the stage of iteration c - lag (with lag 0, its
 * own: until session 10 this back end freed none then, and the producer
 * waited for ever once S iterations were issued: the float8 block-scaled
 * gemm with late=false that hung on the H100 in session 8); after the
 * loop, its gemm's groups done, the stages of the last lag iterations. */
static void wspec_loop(P *p, const tl_stmt *s) {
  int64_t S_ = s->pipe_stages, lag = s->wspec_lag;
  int W = (int)(p->T / 128);
  const char *n = ex_to(p, s->extent, TL_INT64), *st0 = ex_to(p, s->start, TL_INT64);
  if (s->pingpong) { /* warpgroup 0's first turn: warpgroup W - 1 arrives on its barrier */
    const char *w = nr(p, CR), *q = nr(p, CP);
    ins(p, "shr.u32 %s, %s, 7", w, p->tid);
    ins(p, "setp.eq.u32 %s, %s, %d", q, w, W - 1);
    ins(p, "@%s bar.arrive %d, 256", q, PP_BAR);
    p->pp_wg = W;
  }
  counted k = loop_open(p, "0", n);
  const char *c = k.c, *g = nr(p, CD), *stg, *par;
  p->pipe = s;
  p->pipe_c = c;
  p->pipe_g = g;
  ins(p, "add.s64 %s, %s, %s", g, p->cit, c);
  stage_parity(p, g, S_, &stg, &par);
  mbar_wait(p, mbar_at(p, s->mbar, stg), par);
  const char *i = nr(p, CD), *v = nr(p, CR);
  ins(p, "add.s64 %s, %s, %s", i, st0, c);
  ins(p, "cvt.u32.u64 %s, %s", v, i);
  p->val[s->var->slot] = v;
  stage_addrs(p, s, stg);
  for (int k = 0; k < s->body.n && !p->failed; k++) {
    const tl_stmt *b = s->body.items[k];
    if (s->ov_gemm && b == s->ov_wait) /* the late gemm (pass_overlap.c), before what conflicts with it */
      ins(p, "wgmma.wait_group.sync.aligned 0");
    if (!b->prefetch)
      emit_stmt(p, b);
  }
  if (s->ov_gemm && !s->ov_wait)
    ins(p, "wgmma.wait_group.sync.aligned 0");
  if (s->barrier_end)
    barrier(p);
  if (lag) {
    int skip = new_label(p);
    const char *q2 = nr(p, CP), *gl = nr(p, CD), *sl;
    ins(p, "setp.lt.s64 %s, %s, %" PRId64, q2, c, lag);
    ins(p, "@%s bra L%d", q2, skip);
    ins(p, "sub.s64 %s, %s, %" PRId64, gl, g, lag);
    stage_parity(p, gl, S_, &sl, NULL);
    release_stage(p, s, sl);
    ins(p, "L%d:", skip);
  } else { /* its own stage, its groups done (wg_pending 0): else the producer waits S iterations on for ever */
    release_stage(p, s, stg);
  }
  loop_close(p, k);
  if (s->pingpong) { /* the turn left over: warpgroup 0 takes it */
    const char *w = nr(p, CR), *q = nr(p, CP);
    p->pp_wg = 0;
    ins(p, "shr.u32 %s, %s, 7", w, p->tid);
    ins(p, "setp.eq.u32 %s, %s, 0", q, w);
    ins(p, "@%s bar.sync %d, 256", q, PP_BAR);
  }
  if (s->ov_gemm) { /* the last iteration's late gemm, before its stage is freed (emit_cuda.c's late_tail) */
    int skip = new_label(p);
    const char *none = nr(p, CP), *it = nr(p, CD);
    ins(p, "setp.le.s64 %s, %s, 0", none, n);
    ins(p, "@%s bra L%d", none, skip);
    ins(p, "add.s64 %s, %s, %s", it, p->cit, n);
    ins(p, "sub.s64 %s, %s, 1", it, it);
    gemm_issue_late(p, s->ov_gemm, it);
    ins(p, "wgmma.commit_group.sync.aligned");
    ins(p, "wgmma.wait_group.sync.aligned 0");
    ins(p, "L%d:", skip);
  }
  p->pipe = NULL;
  if (s->wg_drain)
    ins(p, "wgmma.wait_group.sync.aligned 0");
  if (lag) { /* the stages of the last iterations, their groups done: the producer may be on the next tile */
    const char *j0 = nr(p, CD), *gj = nr(p, CD), *sj;
    ins(p, "sub.s64 %s, %s, %" PRId64, j0, n, lag);
    ins(p, "max.s64 %s, %s, 0", j0, j0);
    counted j = loop_open(p, j0, n);
    ins(p, "add.s64 %s, %s, %s", gj, p->cit, j.c);
    stage_parity(p, gj, S_, &sj, NULL);
    release_stage(p, s, sj);
    loop_close(p, j);
  }
  ins(p, "add.s64 %s, %s, %s", p->cit, p->cit, n);
  for (int k = 0; k < s->body.n; k++)
    if (s->body.items[k]->prefetch)
      p->stage[s->body.items[k]->dst->sym->slot] = NULL;
  /* no block barrier here, as in emit_cuda.c: pass_barrier.c puts those that the statements after need (a
   * barrier of all the consumers would make the warpgroups of a ping-pong loop end it together) */
}

/* A persistent kernel's walk over the grid's tiles (emit_cuda.c's open_tiles): from the block's linear
 * index, every (blocks started)-th, or where the blocks' work grows with x (reverse_x) x slowest in groups
 * of (y, z) pairs, in rounds of alternating direction (rnd: the round); the block variables of each tile.
 * Closed by close_tiles. */
typedef struct {
  const char *tile, *step, *rnd;
  int top, end;
} tiles;

/* The block variables of block bid[] (32-bit registers, per axis) of a grid of nb[] blocks, in the order of
 * pass_raster.c (emit_cuda.c's block_vars, without clusters): in grid order, the x one reversed (heaviest
 * first), or in stripes of raster_panel block rows (columns), walked column by column (row by row). */
static void block_vars(P *p, const char *const *bid, const char *const *nb) {
  const tl_program *g = p->prog;
  const char *v[3] = {bid[0], bid[1], bid[2]};
  if (g->raster_panel) {
    int64_t panel = g->raster_panel;
    int a = g->raster_column ? 1 : 0, o = 1 - a; /* a: the axis walked within a stripe */
    const char *lin = nr(p, CR), *pan = nr(p, CR), *rem = nr(p, CR), *span = nr(p, CR), *left = nr(p, CR);
    const char *rows = nr(p, CR), *va = nr(p, CR), *vo = nr(p, CR), *m = nr(p, CR);
    ins(p, "mad.lo.s32 %s, %s, %s, %s", lin, bid[o], nb[a], bid[a]);
    ins(p, "mul.lo.s32 %s, %s, %" PRId64, span, nb[a], panel);
    ins(p, "div.u32 %s, %s, %s", pan, lin, span);
    ins(p, "rem.u32 %s, %s, %s", rem, lin, span);
    ins(p, "mul.lo.s32 %s, %s, %" PRId64, m, pan, panel);
    ins(p, "sub.s32 %s, %s, %s", left, nb[o], m);
    ins(p, "min.u32 %s, %s, %" PRId64, rows, left, panel);
    ins(p, "div.u32 %s, %s, %s", va, rem, rows);
    ins(p, "rem.u32 %s, %s, %s", vo, rem, rows);
    ins(p, "add.s32 %s, %s, %s", vo, vo, m);
    v[a] = va;
    v[o] = vo;
  } else if (g->reverse_x) { /* heaviest first (pass_raster.c) */
    const char *q = nr(p, CR);
    ins(p, "sub.s32 %s, %s, %s", q, nb[0], bid[0]);
    ins(p, "sub.s32 %s, %s, 1", q, q);
    v[0] = q;
  }
  for (int i = 0; i < 3; i++)
    if (g->block_vars[i])
      p->val[g->block_vars[i]->slot] = v[i];
}

/* emit_cuda.c's open_tiles where the blocks' work grows with x, in 32 bits (see open_tiles): the group of
 * (y, z) pairs lcm(x, 2 * blocks started) / x, then rounds of the blocks started, every other one in reverse,
 * each tile's pairs group by group, x slowest within each (the last group taking the rest). */
static tiles open_tiles_lpt(P *p) {
  tiles t = {.rnd = nr(p, CR), .top = new_label(p), .end = new_label(p)};
  static const char *const ax = "xyz";
  const char *r[3], *nn[3], *n32[3];
  for (int i = 0; i < 3; i++) {
    r[i] = nr(p, CR);
    nn[i] = nr(p, CR);
    n32[i] = nr(p, CR);
    ins(p, "mov.u32 %s, %%ctaid.%c", r[i], ax[i]);
    ins(p, "mov.u32 %s, %%nctaid.%c", nn[i], ax[i]);
    ins(p, "cvt.u32.u64 %s, %s", n32[i], p->tg[i]);
  }
  const char *bl = nr(p, CR), *nbk = nr(p, CR), *nbk2 = nr(p, CR), *nyz = nr(p, CR), *grp = nr(p, CR);
  const char *ga = nr(p, CR), *gb = nr(p, CR), *gc = nr(p, CR), *gsz = nr(p, CR), *ngm1 = nr(p, CR);
  const char *q = nr(p, CP);
  ins(p, "mad.lo.u32 %s, %s, %s, %s", bl, nn[1], r[2], r[1]);
  ins(p, "mad.lo.u32 %s, %s, %s, %s", bl, nn[0], bl, r[0]);
  ins(p, "mul.lo.u32 %s, %s, %s", nbk, nn[0], nn[1]);
  ins(p, "mul.lo.u32 %s, %s, %s", nbk, nbk, nn[2]);
  ins(p, "shl.b32 %s, %s, 1", nbk2, nbk);
  ins(p, "mul.lo.u32 %s, %s, %s", nyz, n32[1], n32[2]);
  ins(p, "mov.u32 %s, %s", grp, nyz);
  int gtop = new_label(p), gend = new_label(p);
  ins(p, "mov.u32 %s, %s", ga, n32[0]);
  ins(p, "mov.u32 %s, %s", gb, nbk2);
  ins(p, "L%d:", gtop);
  ins(p, "setp.eq.u32 %s, %s, 0", q, gb);
  ins(p, "@%s bra L%d", q, gend);
  ins(p, "rem.u32 %s, %s, %s", gc, ga, gb);
  ins(p, "mov.u32 %s, %s", ga, gb);
  ins(p, "mov.u32 %s, %s", gb, gc);
  ins(p, "bra L%d", gtop);
  ins(p, "L%d:", gend);
  ins(p, "setp.ne.u32 %s, %s, 0", q, ga);
  ins(p, "@%s div.u32 %s, %s, %s", q, gc, nbk2, ga);
  ins(p, "@%s min.u32 %s, %s, %s", q, grp, grp, gc);
  ins(p, "mul.lo.u32 %s, %s, %s", gsz, grp, n32[0]);
  ins(p, "div.u32 %s, %s, %s", ngm1, nyz, grp);
  ins(p, "sub.u32 %s, %s, 1", ngm1, ngm1);
  ins(p, "mov.u32 %s, 0", t.rnd);
  ins(p, "L%d:", t.top);
  const char *base = nr(p, CD), *tile = nr(p, CD), *odd = nr(p, CR), *rev = nr(p, CR), *k = nr(p, CR);
  ins(p, "mul.wide.u32 %s, %s, %s", base, t.rnd, nbk);
  ins(p, "setp.ge.s64 %s, %s, %s", q, base, p->ntiles);
  ins(p, "@%s bra L%d", q, t.end);
  ins(p, "and.b32 %s, %s, 1", odd, t.rnd);
  ins(p, "setp.ne.u32 %s, %s, 0", q, odd);
  ins(p, "sub.u32 %s, %s, 1", rev, nbk);
  ins(p, "sub.u32 %s, %s, %s", rev, rev, bl);
  ins(p, "selp.b32 %s, %s, %s, %s", k, rev, bl, q);
  ins(p, "cvt.u64.u32 %s, %s", tile, k);
  ins(p, "add.s64 %s, %s, %s", tile, tile, base);
  ins(p, "setp.ge.s64 %s, %s, %s", q, tile, p->ntiles); /* the last round's */
  ins(p, "@%s bra L%d", q, t.end);
  const char *t32 = nr(p, CR), *gi = nr(p, CR), *gl = nr(p, CR), *gn = nr(p, CR), *yz = nr(p, CR);
  const char *b32[3] = {nr(p, CR), nr(p, CR), nr(p, CR)};
  ins(p, "cvt.u32.u64 %s, %s", t32, tile);
  ins(p, "div.u32 %s, %s, %s", gi, t32, gsz);
  ins(p, "min.u32 %s, %s, %s", gi, gi, ngm1); /* the last group takes the rest too */
  ins(p, "mul.lo.u32 %s, %s, %s", gl, gi, gsz);
  ins(p, "sub.u32 %s, %s, %s", gl, t32, gl);
  ins(p, "mul.lo.u32 %s, %s, %s", yz, gi, grp);
  ins(p, "sub.u32 %s, %s, %s", gn, nyz, yz);
  ins(p, "setp.lt.u32 %s, %s, %s", q, gi, ngm1);
  ins(p, "selp.b32 %s, %s, %s, %s", gn, grp, gn, q);
  ins(p, "rem.u32 %s, %s, %s", gc, gl, gn);
  ins(p, "add.u32 %s, %s, %s", yz, yz, gc);
  ins(p, "div.u32 %s, %s, %s", b32[0], gl, gn);
  ins(p, "rem.u32 %s, %s, %s", b32[1], yz, n32[1]);
  ins(p, "div.u32 %s, %s, %s", b32[2], yz, n32[1]);
  block_vars(p, b32, n32);
  return t;
}

static tiles open_tiles(P *p) {
  if (p->prog->reverse_x && !p->prog->raster_panel)
    return open_tiles_lpt(p);
  tiles t = {.tile = nr(p, CD), .step = nr(p, CD), .top = new_label(p), .end = new_label(p)};
  const char *c[3], *n[3];
  static const char *const ax = "xyz";
  for (int i = 0; i < 3; i++) {
    const char *r = nr(p, CR), *nn = nr(p, CR);
    ins(p, "mov.u32 %s, %%ctaid.%c", r, ax[i]);
    ins(p, "mov.u32 %s, %%nctaid.%c", nn, ax[i]);
    c[i] = nr(p, CD);
    n[i] = nr(p, CD);
    ins(p, "cvt.u64.u32 %s, %s", c[i], r);
    ins(p, "cvt.u64.u32 %s, %s", n[i], nn);
  }
  const char *m = nr(p, CD);
  ins(p, "mad.lo.s64 %s, %s, %s, %s", m, n[1], c[2], c[1]);
  ins(p, "mad.lo.s64 %s, %s, %s, %s", t.tile, n[0], m, c[0]);
  ins(p, "mul.lo.s64 %s, %s, %s", t.step, n[0], n[1]);
  ins(p, "mul.lo.s64 %s, %s, %s", t.step, t.step, n[2]);
  const char *q = nr(p, CP);
  ins(p, "L%d:", t.top);
  ins(p, "setp.ge.s64 %s, %s, %s", q, t.tile, p->ntiles);
  ins(p, "@%s bra L%d", q, t.end);
  /* in 32 bits (tl_emit_ptx traps on a grid of 2^32 tiles or more): a 64-bit division is a call (ins) */
  const char *t32 = nr(p, CR), *d1 = nr(p, CR), *b32[3] = {nr(p, CR), nr(p, CR), nr(p, CR)}, *n32[3];
  for (int i = 0; i < 3; i++) {
    n32[i] = nr(p, CR);
    ins(p, "cvt.u32.u64 %s, %s", n32[i], p->tg[i]);
  }
  ins(p, "cvt.u32.u64 %s, %s", t32, t.tile);
  ins(p, "rem.u32 %s, %s, %s", b32[0], t32, n32[0]);
  ins(p, "div.u32 %s, %s, %s", d1, t32, n32[0]);
  ins(p, "rem.u32 %s, %s, %s", b32[1], d1, n32[1]);
  ins(p, "div.u32 %s, %s, %s", b32[2], d1, n32[1]);
  block_vars(p, b32, n32);
  return t;
}

static void close_tiles(P *p, tiles t) {
  if (t.rnd)
    ins(p, "add.u32 %s, %s, 1", t.rnd, t.rnd);
  else
    ins(p, "add.s64 %s, %s, %s", t.tile, t.tile, t.step);
  ins(p, "bra L%d", t.top);
  ins(p, "L%d:", t.end);
}

/* The mbarriers, made ready by thread 0 before any copy (emit_cuda.c's
 * declare_mbarriers): one arrival completes a "full" phase (the thread that
 * expects the bytes), one per warp of the program's threads a wspec loop's
 * "free" one, and a pre copy's (one per thread where threads read its
 * buffer themselves: pre_threads). */
static void init_mbarriers(P *p) {
  const tl_program *g = p->prog;
  const tl_stmt *w = tl_wspec_loop(g);
  int nfull = w ? w->wspec_empty : g->nmbar, nempty = w ? (int)w->pipe_stages : 0;
  const char *q = nr(p, CP);
  int skip = new_label(p);
  p->mbar = nr(p, CR);
  ins(p, "add.s32 %s, %s, %" PRId64, p->mbar, p->smem, g->mbar_offset);
  ins(p, "setp.ne.u32 %s, %s, 0", q, p->tid);
  ins(p, "@%s bra L%d", q, skip);
  for (int i = 0; i < nfull + nempty; i++)
    ins(p, "%s", tl_ptx_mbar_init(p->a, S("%s+%d", p->mbar, 8 * i), i < nfull ? "1" : S("%" PRId64, p->T / 32)));
  for (int i = 0; i < g->body.n; i++) { /* a pre copy's: full ones of one arrival, then its free ones */
    const tl_stmt *c = g->body.items[i];
    for (int j = 0; c->wspec_pre && j < 2 * c->pre_stages; j++)
      ins(p, "%s", tl_ptx_mbar_init(p->a, S("%s+%d", p->mbar, 8 * (c->pre_mbar + j)),
                                    j < c->pre_stages ? "1" : S("%" PRId64, c->pre_threads ? p->T : p->T / 32)));
  }
  ins(p, "fence.mbarrier_init.release.cluster");
  ins(p, "L%d:", skip);
  ins(p, "bar.sync 0");
}

/* ---- pre copies (pass_wspec.c): a copy before the wspec loop, issued by the producer too ---- */
/* The shared address of copy st (a register) of pre copy c's buffer. */
static const char *pre_copy_addr(P *p, const tl_stmt *c, const char *st) {
  const tl_sym *b = c->dst->sym;
  const char *o = nr(p, CR), *a = nr(p, CR);
  ins(p, "add.s32 %s, %s, %" PRId64, o, p->smem, b->smem_offset);
  ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", a, st, buf_bytes(b), o);
  return a;
}

/* The producer's side of pre copy c, tile by tile (emit_cuda.c's pre_issue; pq: the tiles whose copy it
 * issued, a %rd register): wait until the tile pre_stages back has freed the copy (its free mbarrier in
 * phase pq / n - 1), expect its bytes, issue the bulk tensor copies. */
static void pre_issue(P *p, const tl_stmt *c, const char *pq) {
  if (p->prog->tmaps[c->tma_map].packed > 1)
    return fail(p, c->pointer, "the PTX back end has no bulk tensor copies of packed sub-byte elements yet");
  int64_t n = c->pre_stages;
  const char *st, *par, *q = nr(p, CP), *pw = nr(p, CR);
  int nowait = new_label(p);
  stage_parity(p, pq, n, &st, &par);
  ins(p, "setp.lt.u64 %s, %s, %" PRId64, q, pq, n);
  ins(p, "@%s bra L%d", q, nowait);
  ins(p, "xor.b32 %s, %s, 1", pw, par);
  mbar_wait(p, mbar_at(p, c->pre_mbar + (int)n, st), pw);
  ins(p, "L%d:", nowait);
  const char *mb = mbar_at(p, c->pre_mbar, st);
  ins(p, "%s", tl_ptx_expect_tx(p->a, mb, S("%" PRId64, buf_bytes(c->dst->sym))));
  const tl_sym *b = c->dst->sym;
  p->stage[b->slot] = pre_copy_addr(p, c, st);
  tma_copy(p, c, mb);
  p->stage[b->slot] = NULL;
  ins(p, "add.s64 %s, %s, 1", pq, pq);
}

/* The program's threads' side of pre copy c (emit_cuda.c's pre_wait): its buffer at this tile's copy
 * (p->stage, from here on), once complete (the full mbarrier in phase cq / n). */
static void pre_wait(P *p, const tl_stmt *c) {
  const tl_sym *b = c->dst->sym;
  const char *st, *par;
  stage_parity(p, p->pre_cq[b->slot], c->pre_stages, &st, &par);
  p->stage[b->slot] = pre_copy_addr(p, c, st);
  mbar_wait(p, mbar_at(p, c->pre_mbar, st), par);
}

/* After statement s, the last reading a pre copy's buffer (pre_last; emit_cuda.c's pre_release): its
 * wgmma groups done, every warp frees the copy (every thread, after a proxy fence, where threads read it
 * themselves: pre_threads). */
static void pre_release(P *p, const tl_stmt *s) {
  const tl_program *g = p->prog;
  for (int i = 0; i < g->body.n; i++) {
    const tl_stmt *c = g->body.items[i];
    if (!c->wspec_pre || c->pre_last != s)
      continue;
    const tl_sym *b = c->dst->sym;
    const char *st, *cq = p->pre_cq[b->slot];
    stage_parity(p, cq, c->pre_stages, &st, NULL);
    const char *bar = mbar_at(p, c->pre_mbar + c->pre_stages, st);
    ins(p, "wgmma.wait_group.sync.aligned 0"); /* its groups read the buffer: done */
    if (c->pre_threads) {
      ins(p, "fence.proxy.async.shared::cta");
      ins(p, "%s", tl_ptx_mbar_arrive(p->a, bar));
    } else {
      ins(p, "bar.warp.sync -1");
      ins(p, "@%s %s", p->lane0, tl_ptx_mbar_arrive(p->a, bar));
    }
    ins(p, "add.s64 %s, %s, 1", cq, cq);
    p->stage[b->slot] = NULL;
  }
}

/* The producer's pre copies into one copy of their buffers (emit_cuda.c's late_pres). */
static void late_pres(P *p, const tl_stmt *loop, const char *const *pq) {
  for (int i = 0; p->prog->body.items[i] != loop; i++)
    if (p->prog->body.items[i]->wspec_pre && p->prog->body.items[i]->pre_stages == 1)
      pre_issue(p, p->prog->body.items[i], pq[i]);
}

/* The producer warpgroup, threads T to T+127 (emit_cuda.c's emit_producer):
 * it gives up registers, and its first thread evaluates the lets the copies
 * use and walks the wspec loop's iterations, over the tiles of a
 * persistent kernel: iteration f waits until iteration f - S has freed its
 * stage, then expects the stage's bytes on its full mbarrier and issues the
 * copies.  The program's threads then take the registers, and the named
 * barrier 1 of their T threads as their block barrier. */
static void producer(P *p) {
  const tl_program *g = p->prog;
  const tl_stmt *loop = tl_wspec_loop(g);
  if (!loop)
    return;
  int64_t S_ = loop->pipe_stages;
  int cons = new_label(p), out = new_label(p);
  const char *q = nr(p, CP);
  ins(p, "setp.lt.u32 %s, %s, %" PRId64, q, p->tid, p->T);
  ins(p, "@%s bra L%d", q, cons);
  if (g->wspec_regs[1]) /* the producer warpgroup gives up registers (all its threads: .sync.aligned) */
    ins(p, "%s", tl_ptx_setmaxnreg(p->a, false, g->wspec_regs[0]));
  const char *q1 = nr(p, CP);
  ins(p, "setp.ne.u32 %s, %s, %" PRId64, q1, p->tid, p->T);
  ins(p, "@%s bra L%d", q1, out);
  const char *pit = nr(p, CD);
  ins(p, "mov.b64 %s, 0", pit);
  const char **pq = tl_arena_alloc(p->a, sizeof(char *) * (size_t)(g->body.n + 1)); /* by statement: a pre copy's */
  for (int i = 0; g->body.items[i] != loop; i++)
    if (g->body.items[i]->wspec_pre) {
      pq[i] = nr(p, CD);
      ins(p, "mov.b64 %s, 0", pq[i]);
    }
  tiles t = {0};
  if (g->persistent)
    t = open_tiles(p);
  for (int i = 0; g->body.items[i] != loop && !p->failed; i++)
    if (g->body.items[i]->kind == S_LET && g->body.items[i]->wspec)
      emit_stmt(p, g->body.items[i]);
  /* a pre copy into two copies first (the copy was freed a tile ago); into one, after the loop's first S
   * iterations (those wait only for the last tile's stages, so this tile's start on them while the program's
   * threads end the last tile, whose reading frees the copy), or at once where the loop has none */
  bool late_pre = false;
  for (int i = 0; g->body.items[i] != loop && !p->failed; i++)
    if (g->body.items[i]->wspec_pre && g->body.items[i]->pre_stages > 1)
      pre_issue(p, g->body.items[i], pq[i]);
    else
      late_pre |= g->body.items[i]->wspec_pre;
  const char *n = ex_to(p, loop->extent, TL_INT64), *st0 = ex_to(p, loop->start, TL_INT64), *first = NULL;
  if (late_pre) {
    first = nr(p, CD);
    ins(p, "min.s64 %s, %s, %" PRId64, first, n, S_);
  }
  counted k = loop_open(p, "0", n);
  const char *f = k.c;
  int nowait = new_label(p);
  const char *stg, *par, *qw = nr(p, CP), *pw = nr(p, CR);
  stage_parity(p, pit, S_, &stg, &par);
  ins(p, "setp.lt.u64 %s, %s, %" PRId64, qw, pit, S_);
  ins(p, "@%s bra L%d", qw, nowait);
  ins(p, "xor.b32 %s, %s, 1", pw, par); /* phase pit / S - 1 of the stage's free mbarrier */
  mbar_wait(p, mbar_at(p, loop->wspec_empty, stg), pw);
  ins(p, "L%d:", nowait);
  const char *i = nr(p, CD), *v = nr(p, CR);
  ins(p, "add.s64 %s, %s, %s", i, st0, f);
  ins(p, "cvt.u32.u64 %s, %s", v, i);
  p->val[loop->var->slot] = v;
  stage_addrs(p, loop, stg);
  const char *mb = mbar_at(p, loop->mbar, stg);
  ins(p, "%s", tl_ptx_expect_tx(p->a, mb, S("%" PRId64, tma_bytes(loop))));
  for (int k = 0; k < loop->body.n && !p->failed; k++)
    if (loop->body.items[k]->prefetch && loop->body.items[k]->tma)
      tma_copy(p, loop->body.items[k], mb);
  for (int k = 0; k < loop->body.n; k++)
    if (loop->body.items[k]->prefetch)
      p->stage[loop->body.items[k]->dst->sym->slot] = NULL;
  ins(p, "add.s64 %s, %s, 1", pit, pit);
  if (late_pre) {
    int skip = new_label(p);
    const char *f1 = nr(p, CD), *q2 = nr(p, CP);
    ins(p, "add.s64 %s, %s, 1", f1, f);
    ins(p, "setp.ne.s64 %s, %s, %s", q2, f1, first);
    ins(p, "@%s bra L%d", q2, skip);
    late_pres(p, loop, pq);
    ins(p, "L%d:", skip);
  }
  loop_close(p, k);
  if (late_pre) {
    int skip = new_label(p);
    const char *q2 = nr(p, CP);
    ins(p, "setp.gt.s64 %s, %s, 0", q2, n);
    ins(p, "@%s bra L%d", q2, skip);
    late_pres(p, loop, pq);
    ins(p, "L%d:", skip);
  }
  if (g->persistent)
    close_tiles(p, t);
  ins(p, "L%d:", out);
  ins(p, "ret");
  ins(p, "L%d:", cons);
  if (g->wspec_regs[1]) /* and the program's threads take them */
    ins(p, "%s", tl_ptx_setmaxnreg(p->a, true, g->wspec_regs[1]));
  p->cit = nr(p, CD);
  ins(p, "mov.b64 %s, 0", p->cit);
  for (int i = 0; g->body.items[i] != loop; i++)
    if (g->body.items[i]->wspec_pre) {
      const char *cq = nr(p, CD);
      ins(p, "mov.b64 %s, 0", cq);
      p->pre_cq[g->body.items[i]->dst->sym->slot] = cq;
    }
  p->bar = S("bar.sync 1, %" PRId64, p->T);
}

/* ---- the kernel ------------------------------------------------------------------------------------ */
bool tl_ptx_target_ok(const tl_target *t, const char **why) {
  if (t->vendor != TL_VENDOR_NVIDIA || t->arch < 80 || t->arch > 90 || t->variant == 'f') {
    *why = "the PTX back end builds for sm_80 to sm_90a (and compute_80 to compute_90a)";
    return false;
  }
  return true;
}

/* What the program as a whole must be (the statements are checked as they are emitted). */
static void check_program(P *p) {
  const tl_program *g = p->prog;
  const char *why = g->nkernels > 1          ? "programs of several kernels"
                    : g->nworkspaces         ? "workspace buffers"
                    : g->nviews              ? "views"
                    : g->cl_size > 1         ? "thread-block clusters"
                    : g->epi_bytes           ? "TMA stores"
                    : g->wspec_regs[1] && p->no_whole
                        ? tl_arena_printf(p->a, "setmaxnreg without ptxas (nvJitLink compiles PTX as relocatable "
                                          "code, where ptxas ignores it: C7504, and the consumers would keep the "
                                          "launch's registers; ptxas: %s)", p->no_whole)
                    : (g->ntmaps || g->nmbar) && !tl_wspec_loop(g) ? "bulk tensor copies but by a producer warpgroup"
                    : g->wspec_threads && g->threads[1] * g->threads[2] != 1
                        ? "a producer warpgroup beside a block of several dimensions"
                                             : NULL;
  if (why)
    return fail(p, g->kptr, "the PTX back end has no %s yet", why);
  p->whole = g->wspec_regs[1] != 0;
  for (int i = 0; i < g->nparams; i++) {
    const tl_sym *s = g->params[i];
    bool ok = s->kind == SYM_TENSOR ? elem_ok(s->dtype) || (mma8(s->dtype) && p->prog->fence_async)
                                    : s->dtype == TL_INT32 || s->dtype == TL_INT64 || s->dtype == TL_FLOAT32 ||
                                          s->dtype == TL_BOOL;
    if (!ok)
      return fail(p, s->pointer, "the PTX back end has no %s parameters of %s yet",
                  s->kind == SYM_TENSOR ? "tensor" : "scalar", tl_dtype_name(s->dtype));
  }
  for (int i = 0; i < g->nbuffer_slots; i++) {
    const tl_sym *s = g->buffer_syms[i];
    if (in_smem(s) && (s->rotates || s->viewed || s->smem_offset < 0))
      return fail(p, s->pointer, "the PTX back end has no rotating or viewed shared buffers, as '%s'", s->name);
    if (in_local(s) && (s->layout || s->viewed))
      return fail(p, s->pointer, "the PTX back end has no layouts or views of local array '%s'", s->name);
    /* a packed fragment (16-bit floats of the mma layout in pairs, emit_cuda.c) is held as one register an
     * element here, its values rounded as all 16-bit ones: the same values, packed where a wgmma reads it */
    bool packed_ok = s->reg_layout == TL_LAYOUT_MMA && (s->dtype == TL_FLOAT16 || s->dtype == TL_BFLOAT16);
    if (!in_smem(s) && !in_local(s) &&
        (!in_regs(s) ||
         (s->reg_layout != TL_LAYOUT_BLOCKED && s->reg_layout != TL_LAYOUT_MMA && s->reg_layout != TL_LAYOUT_MMA_ROWS) ||
         (s->packed && !packed_ok) || s->stages > 1))
      return fail(p, s->pointer, "the PTX back end holds only shared buffers and register fragments of the blocked, "
                                 "mma and mma-rows layouts, not '%s'", s->name);
    if (!elem_ok(s->dtype) && !(in_smem(s) && mma8(s->dtype)))
      return fail(p, s->pointer, "the PTX back end has no fragments of %s yet", tl_dtype_name(s->dtype));
    if (in_regs(s) && s->reg_layout == TL_LAYOUT_MMA_ROWS && (s->per_thread > TL_PTX_MAX_ACC || s->ndim != 1))
      return fail(p, s->pointer, "fragment '%s' holds %" PRId64 " elements a thread; the PTX back end takes mma-rows "
                  "fragments of 1 dimension and at most %d", s->name, s->per_thread, TL_PTX_MAX_ACC);
    if (in_regs(s) && s->reg_layout == TL_LAYOUT_MMA && (s->per_thread > TL_PTX_MAX_ACC || s->ndim != 2))
      return fail(p, s->pointer, "fragment '%s' holds %" PRId64 " elements a thread; the PTX back end takes mma-layout "
                  "fragments of 2 dimensions and at most %d", s->name, s->per_thread, TL_PTX_MAX_ACC);
    if (in_regs(s) && s->reg_layout == TL_LAYOUT_BLOCKED && s->per_thread > TL_PTX_MAX_PER_THREAD)
      return fail(p, s->pointer, "fragment '%s' holds %" PRId64 " elements a thread; the PTX back end takes at most %d",
                  s->name, s->per_thread, TL_PTX_MAX_PER_THREAD);
  }
}

static const char *ptx_param_type(const tl_sym *s) {
  if (s->kind == SYM_TENSOR)
    return ".u64";
  switch (s->dtype) {
  case TL_BOOL: return ".u8";
  case TL_INT64: return ".u64";
  case TL_FLOAT32: return ".f32";
  default: return ".u32";
  }
}

char *tl_emit_ptx(tl_arena *a, const tl_program *prog, const tl_target *t, const char *no_whole, bool *whole,
                  tl_error *err) {
  P pp = {.a = a, .prog = prog, .err = err, .no_whole = no_whole}, *p = &pp;
  *whole = false;
  const char *why;
  if (!tl_ptx_target_ok(t, &why)) {
    fail(p, NULL, "%s, not %s", why, t->name);
    return NULL;
  }
  p->T = prog->threads[0] * prog->threads[1] * prog->threads[2];
  check_program(p);
  if (p->failed)
    return NULL;
  p->val = tl_arena_alloc(a, sizeof(char *) * (size_t)(prog->nvalue_slots + 1));
  p->base = tl_arena_alloc(a, sizeof(char *) * (size_t)(prog->nparams + 1));
  p->dims = tl_arena_alloc(a, sizeof *p->dims * (size_t)(prog->nparams + 1));
  p->stage = tl_arena_alloc(a, sizeof(char *) * (size_t)(prog->nbuffer_slots + 1));
  p->pre_cq = tl_arena_alloc(a, sizeof(char *) * (size_t)(prog->nbuffer_slots + 1));
  p->bar = "bar.sync 0";
  tl_fold_fills(a, &prog->body, &p->folded);
  /* the thread's index and the parameters */
  p->tid = nr(p, CR);
  ins(p, "mov.u32 %s, %%tid.x", p->tid);
  if (p->T != prog->threads[0]) {
    const char *y = nr(p, CR), *z = nr(p, CR), *t2 = nr(p, CR);
    ins(p, "mov.u32 %s, %%tid.y", y);
    ins(p, "mov.u32 %s, %%tid.z", z);
    ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", t2, z, prog->threads[1], y);
    ins(p, "mad.lo.s32 %s, %s, %" PRId64 ", %s", t2, t2, prog->threads[0], p->tid);
    p->tid = t2;
  }
  if (prog->smem_bytes > 0) {
    p->smem = nr(p, CR);
    ins(p, "mov.u32 %s, tl_smem", p->smem);
  }
  for (int i = 0; i < prog->nparams; i++) {
    const tl_sym *s = prog->params[i];
    if (s->kind == SYM_TENSOR) {
      const char *g = nr(p, CD), *b = nr(p, CD);
      ins(p, "ld.param.u64 %s, [%s_param_%d]", g, prog->entry, i);
      ins(p, "cvta.to.global.u64 %s, %s", b, g);
      p->base[i] = b;
      continue;
    }
    int c = cls_of((tl_type)s->dtype);
    const char *v = nr(p, c);
    if (c == CP) {
      const char *w = nr(p, CR);
      ins(p, "ld.param.u8 %s, [%s_param_%d]", w, prog->entry, i);
      ins(p, "setp.ne.u32 %s, %s, 0", v, w);
    } else {
      ins(p, "ld.param%s %s, [%s_param_%d]", ptx_param_type(s), v, prog->entry, i);
    }
    p->val[s->slot] = v;
  }
  for (int i = 0; i < prog->ntmaps; i++) { /* the tensor maps' generic addresses (they are __grid_constant__) */
    const char *m = nr(p, CD);
    p->tmap[i] = nr(p, CD);
    ins(p, "mov.b64 %s, %s_param_%d", m, prog->entry, prog->nparams + i);
    ins(p, "cvta.param.u64 %s, %s", p->tmap[i], m);
  }
  for (int i = 0; i < prog->nparams && !p->failed; i++) {
    const tl_sym *s = prog->params[i];
    if (s->kind == SYM_TENSOR)
      for (int d = 0; d < s->ndim; d++)
        p->dims[i][d] = ex_to(p, s->shape[d], TL_INT64);
  }
  if (prog->persistent) { /* the grid's tiles (pass_wspec.c): the launch starts fewer blocks */
    for (int i = 0; i < 3; i++) {
      if (i < prog->ngrid) {
        p->tg[i] = ex_to(p, prog->grid[i], TL_INT64);
      } else {
        p->tg[i] = nr(p, CD);
        ins(p, "mov.b64 %s, 1", p->tg[i]);
      }
    }
    p->ntiles = nr(p, CD);
    ins(p, "mul.lo.s64 %s, %s, %s", p->ntiles, p->tg[0], p->tg[1]);
    ins(p, "mul.lo.s64 %s, %s, %s", p->ntiles, p->ntiles, p->tg[2]);
    /* the named limit of open_tiles' 32-bit tile arithmetic: a grid of 2^32 tiles or more (its C alone
     * would be 2^32 tiles of 16 x 8 elements at least) stops the kernel instead of walking wrong tiles */
    const char *big = nr(p, CP);
    ins(p, "setp.gt.u64 %s, %s, 4294967295", big, p->ntiles);
    ins(p, "@%s trap", big);
  }
  if (!prog->persistent) { /* the block variables (the producer's copies use them too) */
    static const char *const ax = "xyz";
    const char *b[3], *nb[3];
    for (int i = 0; i < 3; i++) {
      b[i] = nr(p, CR);
      nb[i] = nr(p, CR);
      ins(p, "mov.u32 %s, %%ctaid.%c", b[i], ax[i]);
      ins(p, "mov.u32 %s, %%nctaid.%c", nb[i], ax[i]);
    }
    block_vars(p, b, nb);
  }
  if (prog->nmbar)
    init_mbarriers(p);
  producer(p);
  { /* the warp's first thread (the one that arrives for its warp) */
    const char *l = nr(p, CR);
    p->lane0 = nr(p, CP);
    ins(p, "and.b32 %s, %s, 31", l, p->tid);
    ins(p, "setp.eq.u32 %s, %s, 0", p->lane0, l);
  }
  tiles tl = {0};
  if (prog->persistent)
    tl = open_tiles(p);
  emit_body(p, &prog->body);
  if (prog->persistent) { /* the next tile's statements after this one's: a barrier where they conflict (pass_wspec.c's
                             tile_barrier, as emit_cuda.c) */
    if (prog->tile_barrier)
      barrier(p);
    close_tiles(p, tl);
  }
  if (!p->failed && p->wgmma && p->call && p->no_whole)
    fail(p, prog->kptr, "the PTX back end leaves kernels with wgmma and '%s' to the CUDA one without ptxas (%s): "
                        "ptxas makes that instruction a subroutine call, which in nvJitLink's relocatable code "
                        "serializes the wgmma (C7509)", p->call, p->no_whole);
  p->whole |= p->wgmma && p->call;
  if (p->failed)
    return NULL;
  ins(p, "ret");
  char *body = p->out.buf;
  p->out = (tl_text){0};
  /* the module */
  put(p, "//\n// generated by tlc (emit_ptx.c); do not edit\n//\n");
  put(p, ".version 8.0\n");
  put(p, S(".target sm_%d%s\n.address_size 64\n\n", t->arch, t->variant == 'a' ? "a" : ""));
#ifdef TL_PRELUDE_MARK /* a build option that changes every binary, as in prelude_cuda.h (tests/sh/upgrade.sh) */
  put(p, ".visible .global .align 4 .u32 tl_prelude_mark = " TL_PTX_STR(TL_PRELUDE_MARK) ";\n\n");
#endif
  if (prog->smem_bytes > 0) /* the block's dynamic shared memory (the launch gives its size) */
    put(p, ".extern .shared .align 128 .b8 tl_smem[];\n\n");
  put(p, S(".visible .entry %s(", prog->entry));
  for (int i = 0; i < prog->nparams; i++)
    put(p, S("%s\n\t.param %s %s_param_%d", i ? "," : "", ptx_param_type(prog->params[i]), prog->entry, i));
  for (int i = 0; i < prog->ntmaps; i++) /* the tensor maps (pass_tma.c) after them: CUtensorMap, 128 bytes */
    put(p, S("%s\n\t.param .align 64 .b8 %s_param_%d[128]", prog->nparams + i ? "," : "", prog->entry,
             prog->nparams + i));
  put(p, prog->nparams + prog->ntmaps ? "\n)\n" : ")\n");
  /* a register cap given as an option replaces the launch bounds, as in emit_cuda.c, but beside a producer
   * warpgroup, whose launch bounds give the registers at entry (pass_wspec.c) */
  if (prog->wspec_threads)
    put(p, S(".maxntid %" PRId64 ", 1, 1\n.minnctapersm %d\n", p->T + prog->wspec_threads, prog->wspec_blocks));
  else if (prog->max_registers)
    put(p, S(".maxnreg %d\n", prog->max_registers));
  else
    put(p, S(".maxntid %" PRId64 ", 1, 1\n", p->T));
  put(p, "{\n");
  for (int c = 0; c < NCLASS; c++)
    if (p->nreg[c])
      put(p, S("\t.reg %s %s<%d>;\n", cls_decl[c], cls_prefix[c], p->nreg[c]));
  for (int i = 0; i < prog->nbuffer_slots; i++) {
    const tl_sym *s = prog->buffer_syms[i];
    if (in_local(s)) /* 4 bytes an element (float or int32, as computed) */
      put(p, S("\t.local .align 4 .b8 l%d[%" PRId64 "]; // %s\n", s->slot, 4 * product(s->dims, s->ndim), s->name));
    if (!in_regs(s))
      continue;
    put(p, S("\t.reg %s %%fr%d_<%" PRId64 ">; // %s%s\n", s->dtype == TL_INT32 || s->packed ? ".b32" : ".f32", s->slot,
             s->packed ? s->per_thread / 2 : s->per_thread, s->name, s->packed ? " (pairs of 16-bit halves)" : ""));
  }
  put(p, body);
  put(p, "}\n");
  *whole = p->whole;
  return p->out.buf;
}
