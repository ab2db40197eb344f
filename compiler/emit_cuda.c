/*
 * emit_cuda.c - the CUDA C generator: a placed program (pass_place.c) to
 * the text of one self-contained kernel (prelude_cuda.h, then the kernel),
 * which NVRTC compiles.  Generation is deterministic: the same program
 * gives the same bytes.  No name or expression text of the input is pasted:
 * names are re-emitted with a prefix by kind (v_ values, g_ tensors, s_
 * shared memory, r_ register fragments, l_ local arrays), expressions are
 * printed from the checked tree.
 *
 * Two dialects share this printer (docs/DESIGN.md section 3): CUDA C for NVRTC
 * and HIP C for clang or hiprtc (AMD).  Where they differ -- the prelude,
 * the kernel's qualifiers, thread and block indices, the barrier, shared
 * memory, math and bit-cast functions, atomics and lane shuffles -- the
 * printer asks the dialect table below; the HIP prelude (prelude_hip.h)
 * names its functions tl_<CUDA name>.  What a target cannot use (mma.sync,
 * ldmatrix and cp.async on AMD) the passes never choose (tl_codegen).
 *
 * Lowering:
 *   - thread-level statements are emitted as written, run by every thread;
 *   - a tile operator runs as a loop over its elements: a register
 *     fragment's elements are visited by their owning thread (blocked
 *     layout: thread t owns flat elements [t*P, t*P+P)), anything else by
 *     all threads cooperatively (element e by thread e mod T);
 *   - a parallel loop runs its iterations the same way: by the owner of the
 *     register fragment it indexes, or cooperatively;
 *   - gemm computes each element of C as a dot product from shared memory;
 *     a reduction of a register fragment along its rows combines partials
 *     with warp shuffles; other exchanges go through shared scratch;
 *   - global reads outside a tensor give 0 and writes outside are dropped
 *     (bounds guards on every global access).
 *
 * The emitter only prints: what it reads besides the program is what the
 * passes decided and wrote into the IR (ir.h): pass_place.c and
 * pass_pipeline.c (where buffers live, which gemms and copies take the
 * matrix cores and cp.async), pass_range.c (which arithmetic cannot wrap,
 * which bounds guards are proven), pass_barrier.c (where block barriers
 * go), pass_raster.c (the blocks' order), amd_layout.c (AMD's lane maps).
 */
#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"
#include "ptxform.h"
#include "pass.h"
#include "prelude_cuda.h"
#include "prelude_hip.h"

/* What differs between the two dialects. */
typedef struct dialect {
  const char *prelude;
  const char *kernel;     /* the kernel's qualifiers and return type */
  const char *bounds;     /* launch bounds, a format of the block's threads */
  const char *tid[3];     /* thread index in the block, per axis */
  const char *bid[3];     /* block index in the grid */
  const char *nblocks[3]; /* blocks in the grid */
  const char *barrier;    /* a block-wide barrier statement */
  const char *shfl_xor;   /* a format: value, lane mask */
  const char *smem;       /* the dynamic shared memory's declaration */
  const char *fn_prefix;  /* renames CUDA's math, bit-cast and atomic functions ("": none) */
} dialect;

static const dialect dialect_cuda = {
    .prelude = tl_prelude_cuda,
    .kernel = "extern \"C\" __global__ void",
    .bounds = "__launch_bounds__(%" PRId64 ") ",
    .tid = {"threadIdx.x", "threadIdx.y", "threadIdx.z"},
    .bid = {"blockIdx.x", "blockIdx.y", "blockIdx.z"},
    .nblocks = {"gridDim.x", "gridDim.y", "gridDim.z"},
    .barrier = "__syncthreads();",
    .shfl_xor = "__shfl_xor_sync(0xffffffffu, %s, %s)",
    .smem = "extern __shared__ __align__(128) unsigned char tl_smem[];",
    .fn_prefix = "",
};

static const dialect dialect_hip = {
    .prelude = tl_prelude_hip,
    .kernel = "extern \"C\" __attribute__((global)) void",
    .bounds = "__attribute__((amdgpu_flat_work_group_size(1, %" PRId64 "))) ",
    .tid = {"__builtin_amdgcn_workitem_id_x()", "__builtin_amdgcn_workitem_id_y()", "__builtin_amdgcn_workitem_id_z()"},
    .bid = {"__builtin_amdgcn_workgroup_id_x()", "__builtin_amdgcn_workgroup_id_y()", "__builtin_amdgcn_workgroup_id_z()"},
    .nblocks = {"tl_num_groups(0)", "tl_num_groups(1)", "tl_num_groups(2)"},
    .barrier = "tl_syncthreads();",
    .shfl_xor = "tl_shfl_xor(%s, %s)",
    .smem = "extern __attribute__((shared)) __attribute__((aligned(128))) unsigned char tl_smem[];",
    .fn_prefix = "tl_",
};

const tl_codegen tl_codegen_cuda = {.dialect = TL_DIALECT_CUDA, .warp = 32, .mma = true, .int8_mma = true,
                                    .async_copy = true};

typedef struct {
  tl_arena *a;
  const tl_program *prog;
  tl_error *err;
  const dialect *d;
  bool failed;
  tl_text out;
  int indent;
  int64_t T;               /* threads per block (per slice of a loop in slices: pass_wspec.c) */
  const tl_stmt *par;      /* the parallel loop being emitted, or NULL */
  const tl_sym *par_owner; /* its register fragment (iteration by owner), or NULL */
  struct {                 /* the last index lists region_idx made, and their regions */
    const char *const *idx;
    const tl_region *r;
  } ridx[8];
  int ridx_next;
  const tl_expr *vec_read; /* in a loop of op_parallel_vec_read: the read it made as a vector... */
  const char *vec_code;    /* ... and this element of it */
  struct {                 /* the last index lists index_codes made, and their elements (tl_expr.inside) */
    const char *const *idx;
    const tl_expr *x;
  } xidx[8];
  int xidx_next;
  int uid;                 /* for unique local names */
  const char *barrier;     /* a barrier of the program's threads: the dialect's, or with a producer
                              warpgroup (pass_wspec.c) the named barrier 1 of T threads */
  const tl_stmt *pipe;     /* the pipelined loop being emitted, or NULL */
  int pipe_id;             /* its uid (tl_cN, tl_nN) */
  const tl_stmt *early;    /* a pipelined loop whose first copies were issued before the statements
                              ahead of it (early_prologue), or NULL */
  int early_id;            /* its uid */
  int pp_wg;               /* in the body of a ping-pong loop (pass_wspec.c): the program's warpgroups, else 0 */
  tl_vec folded;           /* fills folded into the gemm after them, then those gemms (tl_fold_fills) */
  int held;                /* in an iteration of a pipelined loop with held_a's two sets: 1 + the set its
                              gemm reads, else 0 */
} E;

/* ---- output ---------------------------------------------------------------------- */
static void put(E *e, const char *s) {
  tl_text_put(e->a, &e->out, s);
}

static void line(E *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(E *e, const char *fmt, ...) {
  char tmp[8192];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  for (int i = 0; i < e->indent; i++)
    put(e, "  ");
  if (n >= (int)sizeof tmp) {
    va_start(ap, fmt);
    char *big = tl_arena_alloc(e->a, (size_t)n + 1);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    put(e, big);
  } else
    put(e, tmp);
  put(e, "\n");
}

#define S(...) tl_arena_printf(e->a, __VA_ARGS__)

/* The dialect's name of a CUDA math, bit-cast or atomic function ("expf",
 * "__int_as_float", "atomicAdd"): itself, or the prefix and the name
 * without leading underscores ("tl_expf", "tl_int_as_float"). */
static const char *dfn(E *e, const char *cuda_name) {
  if (!*e->d->fn_prefix)
    return cuda_name;
  return S("%s%s", e->d->fn_prefix, cuda_name + strspn(cuda_name, "_"));
}

static void fail(E *e, const char *pointer, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(E *e, const char *pointer, const char *fmt, ...) {
  if (e->failed)
    return;
  e->failed = true;
  va_list ap;
  va_start(ap, fmt);
  tl_error_setv(e->err, TL_UNSUPPORTED, fmt, ap);
  va_end(ap);
  if (e->err && pointer)
    snprintf(e->err->pointer, sizeof e->err->pointer, "%s", pointer);
}

/* ---- types --------------------------------------------------------------------------- */
static bool is_f(tl_type t) { return t == TL_TY_UREAL || (t >= 0 && t < TL_DTYPE_COUNT && tl_dtype_is_float((tl_dtype)t)); }
static bool is_signed_i(tl_type t) { return t == TL_TY_UINT || (t >= 0 && t < TL_DTYPE_COUNT && tl_dtype_is_signed((tl_dtype)t)); }
static bool is_unsigned_i(tl_type t) {
  return t == TL_UINT8 || t == TL_UINT16 || t == TL_UINT32 || t == TL_UINT64 || t == TL_UINT4 || t == TL_UINT2 ||
         t == TL_UINT1;
}
/* Is t a packed sub-byte dtype (proto/tile-ir-v1.md 7.1.2)? */
static bool is_packed(tl_type t) { return t >= 0 && t < TL_DTYPE_COUNT && tl_dtype_is_packed((tl_dtype)t); }

/* The C type a value of type t is computed in. */
static const char *crep(tl_type t) {
  switch (t) {
  case TL_BOOL: return "bool";
  case TL_INT8: case TL_INT4: case TL_INT2: case TL_INT1: return "signed char";
  case TL_UINT8: case TL_UINT4: case TL_UINT2: case TL_UINT1: return "unsigned char";
  case TL_INT16: return "short";
  case TL_UINT16: return "unsigned short";
  case TL_INT32: return "int";
  case TL_UINT32: return "unsigned";
  case TL_INT64: case TL_TY_UINT: return "long long";
  case TL_UINT64: return "unsigned long long";
  case TL_FLOAT64: case TL_TY_UREAL: return "double";
  default: return "float";
  }
}

/* The C type an element of dtype t is stored as. */
static const char *srep(tl_dtype t) {
  switch (t) {
  case TL_BOOL: return "unsigned char";
  case TL_FLOAT16: case TL_BFLOAT16: return "unsigned short";
  case TL_FLOAT8_E4M3: case TL_FLOAT8_E5M2: case TL_FLOAT8_E8M0: return "unsigned char";
  case TL_FLOAT4_E2M1: case TL_INT4: case TL_UINT4: case TL_INT2: case TL_UINT2: case TL_INT1: case TL_UINT1:
    return "unsigned char"; /* packed: 8 / bits elements per byte */
  case TL_FLOAT32: return "float";
  default: return crep((tl_type)t);
  }
}

static const char *load_conv(E *e, tl_dtype t, const char *x) {
  switch (t) {
  case TL_FLOAT16: return S("tl_h2f(%s)", x);
  case TL_BFLOAT16: return S("tl_bf2f(%s)", x);
  case TL_FLOAT8_E4M3: return S("tl_e4m3_2f(%s)", x);
  case TL_FLOAT8_E5M2: return S("tl_e5m2_2f(%s)", x);
  case TL_FLOAT4_E2M1: return S("tl_e2m1_2f(%s)", x);
  case TL_FLOAT8_E8M0: return S("tl_e8m0_2f(%s)", x);
  case TL_BOOL: return S("(%s != 0)", x);
  default: return x;
  }
}

static const char *store_conv(E *e, tl_dtype t, const char *v) {
  switch (t) {
  case TL_FLOAT16: return S("tl_f2h(%s)", v);
  case TL_BFLOAT16: return S("tl_f2bf(%s)", v);
  case TL_FLOAT8_E4M3: return S("tl_f2e4m3(%s)", v);
  case TL_FLOAT8_E5M2: return S("tl_f2e5m2(%s)", v);
  case TL_FLOAT4_E2M1: return S("tl_f2e2m1(%s)", v);
  case TL_FLOAT8_E8M0: return S("tl_f2e8m0(%s)", v);
  case TL_BOOL: return S("(unsigned char)(%s)", v);
  default: return v;
  }
}

/* Rounds a float-computed value to a narrow float type. */
static const char *round_to(E *e, tl_type t, const char *x) {
  switch (t) {
  case TL_FLOAT16: return S("tl_rh(%s)", x);
  case TL_BFLOAT16: return S("tl_rbf(%s)", x);
  case TL_FLOAT8_E4M3: return S("tl_re4(%s)", x);
  case TL_FLOAT8_E5M2: return S("tl_re5(%s)", x);
  case TL_FLOAT4_E2M1: return S("tl_re2m1(%s)", x);
  case TL_FLOAT8_E8M0: return S("tl_re8m0(%s)", x);
  default: return x;
  }
}

static const char *int_sfx(tl_type t) {
  switch (t) {
  case TL_UINT32: return "u32";
  case TL_UINT64: return "u64";
  case TL_INT64: case TL_TY_UINT: return "i64";
  default: return "i32";
  }
}

/* Wraps an int to packed integer type t (modulo 2^bits). */
static const char *wrap_packed(E *e, const char *x, tl_type t) {
  int bits = tl_dtype_bits((tl_dtype)t);
  if (is_signed_i(t))
    return S("((signed char)tl_sxt((int)(%s), %d))", x, bits);
  return S("((unsigned char)((int)(%s) & %d))", x, (1 << bits) - 1);
}

/* Converts code computing a value of type `from` to type `to`. */
static const char *conv(E *e, const char *x, tl_type from, tl_type to) {
  if (from == to || (from == TL_TY_UINT && to == TL_INT64) || (from == TL_TY_UREAL && to == TL_FLOAT64))
    return x;
  if (to == TL_BOOL)
    return S("((%s) != 0)", x);
  if (is_f(to)) {
    bool from_wide = from == TL_FLOAT64 || from == TL_TY_UREAL || from == TL_INT64 || from == TL_UINT64 ||
                     from == TL_TY_UINT || from == TL_UINT32 || from == TL_INT32;
    if (to == TL_FLOAT64 || to == TL_TY_UREAL)
      return S("((double)(%s))", x);
    if (to == TL_FLOAT32)
      return S("((float)(%s))", x);
    if (is_f(from) && !from_wide)
      return round_to(e, to, x);
    if (is_packed(from) && (to == TL_FLOAT16 || to == TL_BFLOAT16)) /* 4 bits at most: exact (8.1) */
      return S("((float)(%s))", x);
    if (!is_f(from) && from != TL_INT32 && from != TL_UINT32 && from != TL_INT64 && from != TL_UINT64 &&
        from != TL_TY_UINT)
      return round_to(e, to, S("((float)(%s))", x)); /* small integers are exact in float */
    return round_to(e, to, S("tl_d2f_odd((double)(%s))", x));
  }
  /* to an integer */
  if (is_f(from) && is_packed(to)) { /* truncate, saturate to the packed range */
    tl_scalar lo = tl_dtype_min((tl_dtype)to), hi = tl_dtype_max((tl_dtype)to);
    return S("((%s)tl_clampi(tl_f2i32((double)(%s)), %d, %d))", crep(to), x,
             is_signed_i(to) ? (int)lo.i : (int)lo.u, is_signed_i(to) ? (int)hi.i : (int)hi.u);
  }
  if (is_packed(to))
    return wrap_packed(e, x, to);
  if (is_f(from)) {
    static const char *const fn[TL_DTYPE_COUNT] = {
        [TL_INT8] = "tl_f2i8",   [TL_UINT8] = "tl_f2u8",   [TL_INT16] = "tl_f2i16", [TL_UINT16] = "tl_f2u16",
        [TL_INT32] = "tl_f2i32", [TL_UINT32] = "tl_f2u32", [TL_INT64] = "tl_f2i64", [TL_UINT64] = "tl_f2u64",
    };
    return S("%s((double)(%s))", fn[to == TL_TY_UINT ? TL_INT64 : to], x);
  }
  return S("((%s)(%s))", crep(to), x);
}

/* ---- names -------------------------------------------------------------------------- */
static const char *vname(E *e, const tl_sym *s) { return S("v_%s", s->name); }

/* A C literal of a constant node. */
static const char *literal(E *e, const tl_expr *x) {
  tl_type t = x->type;
  if (t == TL_BOOL)
    return x->val.i ? "true" : "false";
  if (is_f(t)) {
    double v = x->val.f;
    bool dbl = t == TL_FLOAT64 || t == TL_TY_UREAL;
    const char *ld = dfn(e, "__longlong_as_double"), *fi = dfn(e, "__int_as_float");
    if (v != v)
      return dbl ? S("%s(0x7ff8000000000000LL)", ld) : S("%s(0x7fc00000)", fi);
    if (isinf(v))
      return dbl ? S("%s(%s)", ld, v > 0 ? "0x7ff0000000000000LL" : "0xfff0000000000000LL")
                 : S("%s(%s)", fi, v > 0 ? "0x7f800000" : "(int)0xff800000");
    return dbl ? S("(%a)", v) : S("(%af)", v);
  }
  if (is_unsigned_i(t))
    return S("((%s)%" PRIu64 "ull)", crep(t), x->val.u);
  if (x->val.i == INT64_MIN)
    return S("((%s)(-9223372036854775807LL - 1))", crep(t));
  return S("((%s)%" PRId64 "LL)", crep(t), x->val.i);
}

/* ---- element access -------------------------------------------------------------------- */
static const char *ex(E *e, const tl_expr *x);

static const char *dim_name(E *e, const tl_sym *s, int d) {
  if (s->kind == SYM_TENSOR)
    return S("g_%s_d%d", s->name, d);
  return S("%" PRId64 "LL", s->dims[d]);
}

/* The swizzle's parameters of a 2-D buffer: 16-byte chunks per row and
 * rows per change of the key. */
static int64_t swz_cpr(const tl_sym *s) { return s->dims[1] * (int64_t)tl_dtype_size(s->dtype) / 16; }
static int64_t swz_rpk(const tl_sym *s) { return swz_cpr(s) >= 8 ? 1 : 8 / swz_cpr(s); }
/* The bits of the key: 3 (8 chunks of a 128-byte line), or, for a wgmma
 * operand of narrower rows, as many as the chunks of a row (its 64- or
 * 32-byte swizzle mode; pass_place.c). */
static int64_t swz_mask(const tl_sym *s) { return s->wgmma_op && swz_cpr(s) < 8 ? swz_cpr(s) - 1 : 7; }

/* Element offset of idx (C expressions of type long long): row-major, or
 * swizzled for a swizzled shared buffer.  tl_swz counts 16-bit elements: a
 * byte buffer's column c is byte c & 1 of 16-bit element c >> 1. */
static const char *offset(E *e, const tl_sym *s, const char *const *idx) {
  int64_t es = (int64_t)tl_dtype_size(s->dtype);
  if (s->wgmma_op && s->dims[1] * es > 128) { /* panels of 128 bytes of columns, each [rows, 128 / es] swizzled */
    int64_t pc = 128 / es;
    const char *in = es == 1 ? S("(tl_swz((int)(%s), ((int)(%s) %% 128) >> 1, 8, 1, 7) * 2 + ((int)(%s) & 1))", idx[0],
                                 idx[1], idx[1])
                             : S("tl_swz((int)(%s), (int)(%s) %% 64, 8, 1, 7)", idx[0], idx[1]);
    return S("((int)(%s) / %" PRId64 " * %" PRId64 " + %s)", idx[1], pc, s->dims[0] * pc, in);
  }
  if (s->swizzled && es == 1)
    return S("(tl_swz((int)(%s), (int)(%s) >> 1, %" PRId64 ", %" PRId64 ", %" PRId64 ") * 2 + ((int)(%s) & 1))", idx[0],
             idx[1], swz_cpr(s), swz_rpk(s), swz_mask(s), idx[1]);
  if (s->swizzled)
    return S("tl_swz((int)(%s), (int)(%s), %" PRId64 ", %" PRId64 ", %" PRId64 ")", idx[0], idx[1], swz_cpr(s), swz_rpk(s),
             swz_mask(s));
  if (s->kind == SYM_BUFFER) { /* a buffer of the block holds fewer than 2^31 elements: 32-bit math */
    const char *o = S("(int)(%s)", idx[0]);
    for (int d = 1; d < s->ndim; d++)
      o = S("(%s) * %" PRId64 " + (int)(%s)", o, s->dims[d], idx[d]);
    return o;
  }
  const char *o = idx[0];
  for (int d = 1; d < s->ndim; d++)
    o = S("(%s) * %s + (%s)", o, dim_name(e, s, d), idx[d]);
  return o;
}

/* The guard of a global element access: every index inside its dimension.
 * For indices made by region_idx, dimensions proven inside (pass_range.c)
 * are left out. */
static const char *in_bounds(E *e, const tl_sym *s, const char *const *idx) {
  const tl_region *r = NULL;
  unsigned proven = 0;
  for (int i = 0; i < 8; i++) {
    if (e->ridx[i].idx == idx)
      r = e->ridx[i].r;
    if (e->xidx[i].idx == idx)
      proven = e->xidx[i].x->inside;
  }
  const char *c = "true";
  for (int d = 0; d < s->ndim; d++)
    if ((!r || !r->inside[d]) && !(proven >> d & 1))
      c = S("%s && (unsigned long long)(%s) < (unsigned long long)%s", c, idx[d], dim_name(e, s, d));
  return c;
}

static const char *storage(E *e, const tl_sym *s) {
  if (s->kind == SYM_TENSOR)
    return S("g_%s", s->name);
  if (s->scope == SCOPE_LOCAL)
    return S("l_%s", s->name);
  return S("s_%s", s->name);
}

/* The value of element idx of buffer s, computed in crep(s->dtype).  For a
 * register fragment, ridx is the owner's local index. */
static const char *read_elem(E *e, const tl_sym *s, const char *const *idx, const char *ridx) {
  if (s->kind == SYM_BUFFER && s->scope == SCOPE_FRAGMENT && s->in_regs)
    return S("r_%s[%s]", s->name, ridx);
  if (s->kind == SYM_BUFFER && s->scope == SCOPE_LOCAL)
    return S("%s[%s]", storage(e, s), offset(e, s, idx));
  const char *raw = S("%s[%s]", storage(e, s), offset(e, s, idx));
  if (is_packed((tl_type)s->dtype)) /* a packed tensor or shared buffer: its bits of a byte */
    raw = S("((%s)tl_ldp(%s, %s, %d, %d))", is_f((tl_type)s->dtype) ? "unsigned char" : crep((tl_type)s->dtype),
            storage(e, s), offset(e, s, idx),
            tl_dtype_bits(s->dtype), is_signed_i((tl_type)s->dtype));
  const char *v = load_conv(e, s->dtype, raw);
  if (s->kind == SYM_TENSOR)
    return S("(%s ? %s : (%s)0)", in_bounds(e, s, idx), v, crep((tl_type)s->dtype));
  return v;
}

/* A statement storing v (already of s->dtype, computed in crep) at idx. */
static void write_elem(E *e, const tl_sym *s, const char *const *idx, const char *ridx, const char *v) {
  if (s->kind == SYM_BUFFER && s->scope == SCOPE_FRAGMENT && s->in_regs) {
    line(e, "r_%s[%s] = %s;", s->name, ridx, v);
    return;
  }
  if (s->kind == SYM_BUFFER && s->scope == SCOPE_LOCAL) {
    line(e, "%s[%s] = %s;", storage(e, s), offset(e, s, idx), v);
    return;
  }
  const char *st = S("%s[%s] = %s;", storage(e, s), offset(e, s, idx), store_conv(e, s->dtype, v));
  if (is_packed((tl_type)s->dtype))
    st = S("tl_stp(%s, %s, %d, (unsigned)(%s));", storage(e, s), offset(e, s, idx), tl_dtype_bits(s->dtype),
           store_conv(e, s->dtype, v));
  if (s->kind == SYM_TENSOR)
    line(e, "if (%s) %s", in_bounds(e, s, idx), st);
  else
    line(e, "%s", st);
}

/* Index expressions of an E_INDEX node, as long long. */
static const char **index_codes(E *e, const tl_expr *x) {
  const char **idx = tl_arena_alloc(e->a, sizeof(char *) * TL_MAX_DIMS);
  for (int d = 0; d < x->nargs; d++)
    idx[d] = S("(long long)(%s)", ex(e, x->args[d]));
  e->xidx[e->xidx_next].idx = idx; /* for in_bounds: the dimensions pass_range proved (tl_expr.inside) */
  e->xidx[e->xidx_next].x = x;
  e->xidx_next = (e->xidx_next + 1) % 8;
  return idx;
}

/* Do register fragments a and b hold the same elements in every thread? */
static bool same_layout(const tl_sym *a, const tl_sym *b) { return a && b && tl_same_reg_layout(a, b); }

/* The register holding row i of row-layout fragment v, in a loop over the
 * elements of mma-layout fragment `owner` (local index tl_r): the row of
 * the owner's element tl_r. */
static const char *row_reg(E *e, const tl_sym *v, const tl_sym *owner) {
  return S("r_%s[((tl_r) / %" PRId64 ") * 2 + ((tl_r) %% 4) / 2]", v->name, owner->mma_ni * 4);
}

/* ---- expressions ------------------------------------------------------------------------- */
static bool is_cmp(int op) { return op == '<' || op == '>' || op == OP_LE || op == OP_GE || op == OP_EQ || op == OP_NE; }

static const char *cop(int op) {
  switch (op) {
  case OP_LE: return "<=";
  case OP_GE: return ">=";
  case OP_EQ: return "==";
  case OP_NE: return "!=";
  default: return tl_op_text(op);
  }
}

static tl_type common(tl_type a, tl_type b) {
  if (a == b)
    return a;
  if (a == TL_TY_UINT || a == TL_TY_UREAL)
    return b == TL_TY_UINT || b == TL_TY_UREAL ? (a == TL_TY_UREAL || b == TL_TY_UREAL ? TL_TY_UREAL : TL_TY_UINT) : b;
  if (b == TL_TY_UINT || b == TL_TY_UREAL)
    return a;
  return (tl_type)tl_common_dtype((tl_dtype)a, (tl_dtype)b);
}

/* k where x is the integer constant 2^k (k < 63), else -1. */
static int pow2_const(const tl_expr *x) {
  if (x->kind != E_CONST || is_f(x->type) || x->type == TL_BOOL)
    return -1;
  unsigned long long v = is_unsigned_i(x->type) ? x->val.u : x->val.i > 0 ? (unsigned long long)x->val.i : 0;
  if (v == 0 || (v & (v - 1)) || v >= 1ULL << 63)
    return -1;
  int k = 0;
  while (v >> k != 1)
    k++;
  return k;
}

static const char *ex_binary(E *e, const tl_expr *x) {
  const tl_expr *l = x->args[0], *r = x->args[1];
  int op = x->op;
  if (op == OP_AND || op == OP_OR)
    return S("((%s) != 0 %s (%s) != 0)", ex(e, l), op == OP_AND ? "&&" : "||", ex(e, r));
  if (is_cmp(op)) {
    tl_type lt = l->type, rt = r->type;
    bool mixed = (is_signed_i(lt) && is_unsigned_i(rt)) || (is_unsigned_i(lt) && is_signed_i(rt));
    if (mixed) {
      if (is_signed_i(lt))
        return S("(tl_cmp_su((long long)(%s), (unsigned long long)(%s)) %s 0)", ex(e, l), ex(e, r), cop(op));
      return S("(0 %s tl_cmp_su((long long)(%s), (unsigned long long)(%s)))", cop(op), ex(e, r), ex(e, l));
    }
    tl_type ct = common(lt, rt);
    return S("(%s %s %s)", conv(e, ex(e, l), lt, ct), cop(op), conv(e, ex(e, r), rt, ct));
  }
  tl_type t = x->type;
  if (op == OP_SHL || op == OP_SHR)
    return S("tl_%s_%s(%s, (long long)(%s))", op == OP_SHL ? "shl" : "shr", int_sfx(t), conv(e, ex(e, l), l->type, t),
             ex(e, r));
  const char *a = conv(e, ex(e, l), l->type, t), *b = conv(e, ex(e, r), r->type, t);
  if (is_f(t)) {
    bool dbl = t == TL_FLOAT64 || t == TL_TY_UREAL;
    switch (op) {
    case '+': case '-': case '*': case '/':
      return round_to(e, t, S("(%s %c %s)", a, op, b));
    case OP_FLOORDIV:
      return round_to(e, t, S("%s(%s / %s)", dfn(e, dbl ? "floor" : "floorf"), a, b));
    case '%':
      return round_to(e, t, S("%s(%s, %s)", dbl ? "tl_pymod" : "tl_pymodf", a, b));
    }
    fail(e, x->pointer, "operator '%s' on %s", tl_op_text(op), tl_type_name(t));
    return "0";
  }
  if (t == TL_BOOL)
    return S("((bool)(%s %s %s))", a, cop(op), b);
  switch (op) {
  case '+': case '-': case '*':
    if (is_signed_i(t)) {
      if (x->no_wrap) /* cannot overflow (pass_range.c): plain arithmetic */
        return S("((%s)(%s %c %s))", crep(t), a, op, b);
      const char *u = t == TL_INT32 ? "unsigned" : "unsigned long long";
      return S("((%s)((%s)(%s) %c (%s)(%s)))", crep(t), u, a, op, u, b);
    }
    return S("((%s)(%s %c %s))", crep(t), a, op, b);
  case OP_FLOORDIV: case '%': {
    bool wide = t == TL_INT64 || t == TL_UINT64 || t == TL_TY_UINT;
    int k = pow2_const(r);
    /* by 2^k: Python's floor division is the arithmetic shift, and its
     * remainder (of the divisor's sign) the low k bits, for every dividend */
    if (k >= 0 && (wide || k < 31))
      return op == '%' ? S("((%s)((%s) & %#llx%s))", crep(t), a, (1ULL << k) - 1, wide ? "LL" : "")
                       : S("((%s)((%s) >> %d))", crep(t), a, k);
    /* a dividend that cannot be negative (pass_range.c) and a positive
     * constant divisor: C's truncating / and % are Python's */
    if (l->has_range && l->rlo >= 0 && r->kind == E_CONST && !is_f(r->type) && r->type != TL_BOOL &&
        !is_unsigned_i(r->type) && r->val.i > 0 && (t == TL_INT32 || t == TL_INT64) && (wide || r->val.i < INT32_MAX))
      return S("((%s)((%s)(%s) %c %lld%s))", crep(t), wide ? "unsigned long long" : "unsigned", a,
               op == '%' ? '%' : '/', (long long)r->val.i, wide ? "ULL" : "u");
    return S("tl_f%s_%s(%s, %s)", op == '%' ? "mod" : "div", int_sfx(t), a, b);
  }
  case '&': case '|': case '^': return S("((%s)(%s %c %s))", crep(t), a, op, b);
  }
  fail(e, x->pointer, "operator '%s' on %s", tl_op_text(op), tl_type_name(t));
  return "0";
}

static const char *math1(E *e, tl_fn fn, bool dbl, const char *a) {
  const char *f = dbl ? "" : "f";
  switch (fn) {
  case FN_EXP: return S("%s(%s)", dfn(e, S("exp%s", f)), a);
  case FN_EXP2: /* float32 on NVIDIA: the fast exp2 (tile-ir-v1.md 8.3) */
    if (!dbl && e->d == &dialect_cuda)
      return S("tl_ex2f(%s)", a);
    return S("%s(%s)", dfn(e, S("exp2%s", f)), a);
  case FN_LOG: return S("%s(%s)", dfn(e, S("log%s", f)), a);
  case FN_LOG2: return S("%s(%s)", dfn(e, S("log2%s", f)), a);
  case FN_SQRT: return S("%s(%s)", dfn(e, S("sqrt%s", f)), a);
  case FN_RSQRT: return S("%s(%s)", dfn(e, S("rsqrt%s", f)), a);
  case FN_TANH: return S("%s(%s)", dfn(e, S("tanh%s", f)), a);
  case FN_SIGMOID: return dbl ? S("(1.0 / (1.0 + %s(-(%s))))", dfn(e, "exp"), a) : S("(1.0f / (1.0f + %s(-(%s))))", dfn(e, "expf"), a);
  case FN_FLOOR: return S("%s(%s)", dfn(e, S("floor%s", f)), a);
  case FN_CEIL: return S("%s(%s)", dfn(e, S("ceil%s", f)), a);
  case FN_ROUND: return S("%s(%s)", dfn(e, S("round%s", f)), a);
  case FN_ABS: return S("%s(%s)", dfn(e, S("fabs%s", f)), a);
  case FN_ERF: return S("%s(%s)", dfn(e, S("erf%s", f)), a);
  case FN_SIN: return S("%s(%s)", dfn(e, S("sin%s", f)), a);
  case FN_COS: return S("%s(%s)", dfn(e, S("cos%s", f)), a);
  case FN_TAN: return S("%s(%s)", dfn(e, S("tan%s", f)), a);
  case FN_LOG1P: return S("%s(%s)", dfn(e, S("log1p%s", f)), a);
  case FN_EXPM1: return S("%s(%s)", dfn(e, S("expm1%s", f)), a);
  case FN_LOG10: return S("%s(%s)", dfn(e, S("log10%s", f)), a);
  case FN_TRUNC: return S("%s(%s)", dfn(e, S("trunc%s", f)), a);
  default: return "0";
  }
}

static const char *bits_of(E *e, const char *x, tl_type t) {
  switch (t) {
  case TL_FLOAT16: return S("tl_f2h(%s)", x);
  case TL_BFLOAT16: return S("tl_f2bf(%s)", x);
  case TL_FLOAT8_E4M3: return S("tl_f2e4m3(%s)", x);
  case TL_FLOAT8_E5M2: return S("tl_f2e5m2(%s)", x);
  case TL_FLOAT4_E2M1: return S("tl_f2e2m1(%s)", x);
  case TL_FLOAT8_E8M0: return S("tl_f2e8m0(%s)", x);
  case TL_FLOAT32: return S("%s(%s)", dfn(e, "__float_as_uint"), x);
  case TL_FLOAT64: return S("(unsigned long long)%s(%s)", dfn(e, "__double_as_longlong"), x);
  default: return S("(unsigned long long)(%s)", x);
  }
}

static const char *from_bits(E *e, const char *b, tl_type t) {
  switch (t) {
  case TL_FLOAT16: return S("tl_h2f((unsigned short)(%s))", b);
  case TL_BFLOAT16: return S("tl_bf2f((unsigned short)(%s))", b);
  case TL_FLOAT8_E4M3: return S("tl_e4m3_2f((unsigned char)(%s))", b);
  case TL_FLOAT8_E5M2: return S("tl_e5m2_2f((unsigned char)(%s))", b);
  case TL_FLOAT4_E2M1: return S("tl_e2m1_2f((unsigned char)((%s) & 15))", b);
  case TL_FLOAT8_E8M0: return S("tl_e8m0_2f((unsigned char)(%s))", b);
  case TL_FLOAT32: return S("%s((unsigned)(%s))", dfn(e, "__uint_as_float"), b);
  case TL_FLOAT64: return S("%s((long long)(%s))", dfn(e, "__longlong_as_double"), b);
  case TL_BOOL: return S("((%s) != 0)", b);
  default: return is_packed(t) ? wrap_packed(e, b, t) : S("((%s)(%s))", crep(t), b);
  }
}

static const char *ex_call(E *e, const tl_expr *x) {
  tl_type t = x->type;
  const tl_expr *const *a = (const tl_expr *const *)x->args;
  bool dbl = t == TL_FLOAT64 || t == TL_TY_UREAL;
  switch (x->fn) {
  case FN_THREAD_BINDING: {
    return S("((int)%s)", e->d->tid[a[0]->val.i]);
  }
  case FN_CAST:
    return conv(e, ex(e, a[0]), a[0]->type, (tl_type)x->dtype_arg);
  case FN_REINTERPRET:
    return from_bits(e, bits_of(e, ex(e, a[0]), a[0]->type), (tl_type)x->dtype_arg);
  case FN_IF_THEN_ELSE:
    return S("((%s) != 0 ? %s : %s)", ex(e, a[0]), conv(e, ex(e, a[1]), a[1]->type, t), conv(e, ex(e, a[2]), a[2]->type, t));
  case FN_MIN:
  case FN_MAX: {
    const char *p = conv(e, ex(e, a[0]), a[0]->type, t), *q = conv(e, ex(e, a[1]), a[1]->type, t);
    if (is_f(t))
      return S("%s(%s, %s)", dfn(e, S("%s%s", x->fn == FN_MIN ? "fmin" : "fmax", dbl ? "" : "f")), p, q);
    return S("((%s) %s (%s) ? (%s) : (%s))", p, x->fn == FN_MIN ? "<" : ">", q, p, q);
  }
  case FN_CLAMP: { /* min(max(x, lo), hi) */
    const char *v = conv(e, ex(e, a[0]), a[0]->type, t), *lo = conv(e, ex(e, a[1]), a[1]->type, t),
               *hi = conv(e, ex(e, a[2]), a[2]->type, t);
    if (is_f(t))
      return S("%s(%s(%s, %s), %s)", dfn(e, dbl ? "fmin" : "fminf"), dfn(e, dbl ? "fmax" : "fmaxf"), v, lo, hi);
    return S("tl_clamp_%s(%s, %s, %s)", int_sfx(t), v, lo, hi);
  }
  case FN_ISNAN:
  case FN_ISINF: {
    tl_type at = a[0]->type;
    if (!is_f(at)) /* an integer is never NaN or infinite; it is still evaluated */
      return S("((void)(%s), false)", ex(e, a[0]));
    bool adbl = at == TL_FLOAT64 || at == TL_TY_UREAL;
    return S("tl_%s%s(%s)", x->fn == FN_ISNAN ? "isnan" : "isinf", adbl ? "" : "f", conv(e, ex(e, a[0]), at, adbl ? TL_FLOAT64 : TL_FLOAT32));
  }
  case FN_CEILDIV:
    return S("tl_cdiv_%s(%s, %s)", int_sfx(t), conv(e, ex(e, a[0]), a[0]->type, t), conv(e, ex(e, a[1]), a[1]->type, t));
  case FN_ABS:
    if (!is_f(t))
      return S("tl_abs_%s(%s)", int_sfx(t), conv(e, ex(e, a[0]), a[0]->type, t));
    return math1(e, FN_ABS, dbl, conv(e, ex(e, a[0]), a[0]->type, t));
  case FN_POW:
    return round_to(e, t, S("%s(%s, %s)", dfn(e, dbl ? "pow" : "powf"), conv(e, ex(e, a[0]), a[0]->type, t),
                            conv(e, ex(e, a[1]), a[1]->type, t)));
  case FN_FMA:
    return round_to(e, t, S("%s(%s, %s, %s)", dfn(e, dbl ? "fma" : "fmaf"), conv(e, ex(e, a[0]), a[0]->type, t),
                            conv(e, ex(e, a[1]), a[1]->type, t), conv(e, ex(e, a[2]), a[2]->type, t)));
  default:
    return round_to(e, t, math1(e, x->fn, dbl, conv(e, ex(e, a[0]), a[0]->type, t)));
  }
}

static const char *ex(E *e, const tl_expr *x) {
  switch (x->kind) {
  case E_CONST:
    return literal(e, x);
  case E_NAME:
    return vname(e, x->sym);
  case E_INDEX: {
    const tl_sym *s = x->sym;
    if (x == e->vec_read)
      return e->vec_code;
    if (s->kind == SYM_BUFFER && s->scope == SCOPE_FRAGMENT && s->in_regs) {
      if (e->par && s->reg_layout == TL_LAYOUT_MMA_ROWS && e->par_owner &&
          e->par_owner->reg_layout == TL_LAYOUT_MMA && x->nargs == 1 && x->args[0]->kind == E_NAME &&
          x->args[0]->sym == e->par->vars[0] && e->par->nvars == 2)
        return row_reg(e, s, e->par_owner);
      if (!e->par || !same_layout(e->par_owner, s)) {
        fail(e, x->pointer, "register fragment '%s' is read where its elements are not the thread's own", s->name);
        return "0";
      }
      return S("r_%s[tl_r]", s->name);
    }
    return read_elem(e, s, index_codes(e, x), NULL);
  }
  case E_UNARY: {
    const tl_expr *a = x->args[0];
    if (x->op == OP_NOT)
      return S("(!((%s) != 0))", ex(e, a));
    const char *v = conv(e, ex(e, a), a->type, x->type);
    if (x->op == '~')
      return S("((%s)~(%s))", crep(x->type), v);
    if (is_f(x->type))
      return S("(-(%s))", v);
    if (is_signed_i(x->type))
      return S("((%s)(0%s - (%s)(%s)))", crep(x->type), x->type == TL_INT32 ? "u" : "ull",
               x->type == TL_INT32 ? "unsigned" : "unsigned long long", v);
    return S("((%s)(0 - %s))", crep(x->type), v);
  }
  case E_BINARY:
    return ex_binary(e, x);
  case E_CALL:
    return ex_call(e, x);
  }
  return "0";
}

/* ---- iteration spaces -------------------------------------------------------------------- */
/* Emits the decoding of flat index `flat` (a C variable) over the extents
 * ext[0..n-1] into C variables named base0.. (long long); returns the names. */
static int64_t product(const int64_t *ext, int n);

static const char **decode(E *e, const char *flat, const int64_t *ext, int n, const char *base) {
  const char **v = tl_arena_alloc(e->a, sizeof(char *) * (size_t)(n + 1));
  bool small = product(ext, n) < INT32_MAX; /* 32-bit math is faster; tiles are small */
  int64_t stride = 1;
  for (int d = n - 1; d >= 0; d--) {
    v[d] = S("%s%d", base, d);
    if (small) /* unsigned: the flat index is never negative, and / and % by constants become shifts */
      line(e, "const int %s = (int)(((unsigned)%s / %" PRId64 "u) %% %" PRId64 "u); (void)%s;", v[d], flat, stride,
           ext[d], v[d]);
    else
      line(e, "const long long %s = (%s / %" PRId64 "LL) %% %" PRId64 "LL; (void)%s;", v[d], flat, stride, ext[d], v[d]);
    stride *= ext[d];
  }
  return v;
}

static int64_t product(const int64_t *ext, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++)
    p *= ext[i];
  return p;
}

/* The squeezed extents of a region (dims of extent 1 dropped). */
static int squeezed(const tl_region *r, int64_t *out) {
  int m = 0;
  for (int d = 0; d < r->ndim; d++)
    if (r->ext[d] != 1)
      out[m++] = r->ext[d];
  return m;
}

/* Per-dimension indices of region r at squeezed indices q[0..]. */
static const char **region_idx(E *e, const tl_region *r, const char *const *q) {
  const char **idx = tl_arena_alloc(e->a, sizeof(char *) * TL_MAX_DIMS);
  int k = 0;
  for (int d = 0; d < r->ndim; d++) {
    const char *lo = r->lo[d] ? S("(long long)(%s)", ex(e, r->lo[d])) : "0LL";
    idx[d] = r->ext[d] == 1 ? lo : S("%s + %s", lo, q[k++]);
  }
  e->ridx[e->ridx_next].idx = idx;
  e->ridx[e->ridx_next].r = r;
  e->ridx_next = (e->ridx_next + 1) % 8;
  return idx;
}

/* The text of coordinate c for x and r (unsigned arithmetic). */
static const char *coord_str(E *e, const tl_amd_coord *c, const char *x, const char *r) {
  const char *out = NULL;
  for (int i = 0; i < c->n; i++) {
    const tl_amd_term *t = &c->t[i];
    const char *y = S("(unsigned)(%s)", t->of_r ? r : x);
    if (t->div != 1)
      y = S("(%s / %" PRId64 "u)", y, t->div);
    if (t->mod)
      y = S("(%s %% %" PRId64 "u)", y, t->mod);
    if (t->mul != 1)
      y = S("%s * %" PRId64 "u", y, t->mul);
    out = out ? S("%s + %s", out, y) : y;
  }
  return out ? S("(%s)", out) : "0u";
}

/* The row and the column of the element that thread tl_tid holds at local
 * index `r` of register fragment s of the mma layout. */
/* The first row of tile i (an unsigned C expression) of the warps in warp
 * row wm of mma-layout fragment s (tl_mma_row_strides). */
static const char *tile_row(E *e, const tl_sym *s, const char *wm, const char *i) {
  int64_t ws, ts;
  tl_mma_row_strides(s, &ws, &ts);
  return S("(%s) * %" PRId64 "u + (%s) * %" PRId64 "u", wm, ws, i, ts);
}

static void mma_row_col(E *e, const tl_sym *s, const char *r, const char **row, const char **col) {
  int64_t wn_cols = s->mma_ni * 8;
  *row = S("%s + ((unsigned)tl_tid %% 32u) / 4u + (((unsigned)(%s) %% 4u) / 2u) * 8u",
           tile_row(e, s, S("(unsigned)tl_tid / 32u / %du", s->mma_wn), S("(unsigned)(%s) / %" PRId64 "u", r, s->mma_ni * 4)),
           r);
  *col = S("((unsigned)tl_tid / 32u %% %du) * %" PRId64 "u + (((unsigned)(%s) / 4u) %% %" PRId64 "u) * 8u + "
           "((unsigned)tl_tid %% 4u) * 2u + ((unsigned)(%s) %% 2u)",
           s->mma_wn, wn_cols, r, s->mma_ni, r);
}

/* mma_row_col's row and column, each split into the part of the thread
 * (tl_tid alone: parts[0] the row's, parts[2] the column's) and the part of
 * local index r (parts[1], parts[3]); row = parts[0] + parts[1], column =
 * parts[2] + parts[3]. */
static void mma_row_col_split(E *e, const tl_sym *s, const char *r, const char *parts[4]) {
  int64_t ws, ts;
  tl_mma_row_strides(s, &ws, &ts);
  parts[0] = S("((unsigned)tl_tid / 32u / %du) * %" PRId64 "u + ((unsigned)tl_tid %% 32u) / 4u", s->mma_wn, ws);
  parts[1] = S("((unsigned)(%s) / %" PRId64 "u) * %" PRId64 "u + (((unsigned)(%s) %% 4u) / 2u) * 8u", r,
               s->mma_ni * 4, ts, r);
  parts[2] = S("((unsigned)tl_tid / 32u %% %du) * %" PRId64 "u + ((unsigned)tl_tid %% 4u) * 2u", s->mma_wn,
               s->mma_ni * 8);
  parts[3] = S("(((unsigned)(%s) / 4u) %% %" PRId64 "u) * 8u + ((unsigned)(%s) %% 2u)", r, s->mma_ni, r);
}

/* Opens a loop over the elements a thread handles: the owner's elements of
 * register fragment `owner` (flat index tl_e, local index tl_r), or every
 * T-th of `total` elements.  Close with close_loop. */
/* The flat element index that thread tl_tid holds at local index `r` of
 * register fragment s. */
static const char *elem_of(E *e, const tl_sym *s, const char *r) {
  if (s->reg_layout == TL_LAYOUT_MMA_ROWS)
    return S("(int)(%s + ((unsigned)tl_tid %% 32u) / 4u + ((unsigned)(%s) %% 2u) * 8u)",
             tile_row(e, s, "(unsigned)tl_tid / 32u", S("(unsigned)(%s) / 2u", r)), r);
  if (s->reg_layout == TL_LAYOUT_MMA) {
    const char *row, *col;
    mma_row_col(e, s, r, &row, &col);
    return S("(int)((%s) * %" PRId64 "u + %s)", row, s->dims[1], col);
  }
  if (tl_amd_layout(s->reg_layout)) {
    tl_amd_coord row, col;
    tl_amd_frag_map(s, &row, &col);
    return S("(int)(%s * %" PRId64 "u + %s)", coord_str(e, &row, "tl_tid", r), s->dims[1], coord_str(e, &col, "tl_tid", r));
  }
  return S("(tl_tid * %" PRId64 " + (%s))", s->per_thread, r);
}

/* Whether every element thread tl_tid holds at a local index of register
 * fragment s lies below `total`: the matrix-core layouts tile s exactly
 * (pass_place.c), and a blocked layout whose threads hold total elements
 * between them has no remainder. */
static bool owner_covers(const E *e, const tl_sym *s, int64_t total) {
  if (total < product(s->dims, s->ndim))
    return false;
  return s->reg_layout != TL_LAYOUT_BLOCKED || s->per_thread * e->T <= total;
}

/* Opens the loop in which thread tl_tid takes elements tl_e = tl_tid,
 * tl_tid + T, ... below total (int).  It counts the thread's elements from
 * 0, so that the toolchain sees a constant trip count, total / T whole
 * rounds and, where T does not divide total, one more that only the threads
 * below total % T take (every thread that runs the program's statements has
 * tl_tid below T: a producer warpgroup's threads return before them).  So
 * the whole rounds need no test, and an unrolled loop issues all of a
 * thread's loads before its stores: a block's copy of a few elements a
 * thread (the scales of W4A16's K runs) waits for global memory once, not
 * once for every few elements. */
static void coop_for(E *e, int64_t total) {
  int64_t q = total / e->T, r = total % e->T;
  if (!r)
    line(e, "for (int tl_ci = 0; tl_ci < %" PRId64 "; tl_ci++) { const int tl_e = tl_tid + tl_ci * %" PRId64 ";", q, e->T);
  else if (!q) /* kept a loop: as an `if`, ptxas hoisted gemm_fp8_blockscaled.json's scale loads above its mma loop */
    line(e, "for (int tl_e = tl_tid; tl_e < %" PRId64 "; tl_e += %" PRId64 ") {", total, e->T);
  else
    line(e, "for (int tl_ci = 0; tl_ci < %" PRId64 "; tl_ci++) if (tl_ci < %" PRId64 " || tl_tid < %" PRId64 ") { "
            "const int tl_e = tl_tid + tl_ci * %" PRId64 ";", q + 1, q, r, e->T);
}

static void open_loop(E *e, const tl_sym *owner, int64_t total) {
  if (owner) {
    line(e, "#pragma unroll");
    line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r++) {", owner->per_thread);
    e->indent++;
    line(e, "const int tl_e = %s;", elem_of(e, owner, "tl_r"));
    line(e, owner_covers(e, owner, total) ? "{" : "if (tl_e < %" PRId64 ") {", total);
  } else if (total < INT32_MAX) {
    coop_for(e, total);
  } else {
    line(e, "for (long long tl_e = tl_tid; tl_e < %" PRId64 "LL; tl_e += %" PRId64 "LL) {", total, e->T);
  }
  e->indent++;
}

static void close_loop(E *e, const tl_sym *owner) {
  e->indent--;
  line(e, "}");
  if (owner) {
    e->indent--;
    line(e, "}");
  }
}

/* The indices, over extents ext, of the element at local index tl_r of
 * register fragment owner: its row and column read off the mma layout when
 * ext is the fragment's shape, else NULL.  Decoding tl_e instead gives the
 * same numbers, but NVVM cannot undo the / and % of a flat index built from
 * thread and register parts, and in fully unrolled loops that arithmetic
 * was most of the compile (bench/compile.md: the GEMM's NVRTC time -40%). */
static const char **owned_idx(E *e, const tl_sym *owner, const int64_t *ext, int n, const char *base) {
  if (!owner || owner->reg_layout != TL_LAYOUT_MMA || owner->ndim != 2 || n != 2 || ext[0] != owner->dims[0] ||
      ext[1] != owner->dims[1])
    return NULL;
  const char *row, *col;
  mma_row_col(e, owner, "tl_r", &row, &col);
  const char **v = tl_arena_alloc(e->a, sizeof(char *) * 3);
  v[0] = S("%s0", base);
  v[1] = S("%s1", base);
  line(e, "const int %s = (int)(%s); (void)%s;", v[1], col, v[1]);
  line(e, "const int %s = (int)(%s); (void)%s;", v[0], row, v[0]);
  return v;
}

/* The indices, over extents ext, of the element a loop of open_loop(e,
 * owner, ...) is at. */
static const char **loop_idx(E *e, const tl_sym *owner, const int64_t *ext, int n, const char *base) {
  const char **v = owned_idx(e, owner, ext, n, base);
  return v ? v : decode(e, "tl_e", ext, n, base);
}

static const tl_sym *reg_of(const tl_region *r) {
  return r && r->sym->kind == SYM_BUFFER && r->sym->scope == SCOPE_FRAGMENT && r->sym->in_regs ? r->sym : NULL;
}

/* ---- tile operators ------------------------------------------------------------------------ */
static void barrier_line(E *e);
/* Opens the loop of a cooperative copy of dst from src in vectors of v
 * elements along the innermost dimension (each thread takes every T-th
 * vector; pragma, when not NULL, goes before it) and sets *si and *di to
 * the source and destination indices of the vector's first element. */
static void vector_loop(E *e, const tl_region *src, const tl_region *dst, int64_t v, const char *pragma,
                        const char ***si, const char ***di) {
  int64_t ext[TL_MAX_DIMS] = {0};
  int n = squeezed(dst, ext);
  ext[n - 1] /= v;
  int64_t total = product(ext, n);
  if (pragma)
    line(e, "%s", pragma);
  coop_for(e, total);
  e->indent++;
  const char **q = decode(e, "tl_e", ext, n, "tl_q");
  const char *q2[TL_MAX_DIMS];
  for (int i = 0; i < n; i++)
    q2[i] = i == n - 1 ? S("(%s * %" PRId64 "LL)", q[i], v) : q[i];
  *si = region_idx(e, src, q2);
  *di = region_idx(e, dst, q2);
}

/* The byte of packed element `off` (per elements a byte: 2, 4 or 8): a
 * shift, since the offsets dereferenced are never negative (a tensor's
 * are taken only inside it). */
static const char *packed_byte(E *e, const char *off, int64_t per) {
  int k = 0;
  while ((1LL << k) < per)
    k++;
  assert((1LL << k) == per);
  return S("(%s) >> %d", off, k);
}

/* A copy from a tensor into shared memory in 16-byte cp.async chunks
 * (pass_pipeline.c says when that is exact); a chunk outside the tensor is
 * zero-filled.  Waiting for it is the caller's business.  Up to 16 trips
 * per thread the loop is unrolled: each trip's offsets fold to constants;
 * rolled, the GEMM ran 7% slower on the H100 (bench/compile.md), which
 * is not worth the 25% less PTX.  Longer loops stay rolled. */
static void emit_async_copy(E *e, const tl_stmt *s) {
  if (e->d != &dialect_cuda) {
    fail(e, s->pointer, "cp.async is NVIDIA's; the passes chose it for a HIP target");
    return;
  }
  const tl_region *src = s->src, *dst = s->dst;
  int64_t v = 128 / tl_dtype_bits(src->sym->dtype); /* elements per 16 bytes */
  int per = is_packed((tl_type)src->sym->dtype) ? 8 / tl_dtype_bits(src->sym->dtype) : 1; /* per byte */
  int64_t ext[TL_MAX_DIMS] = {0};
  int n = squeezed(dst, ext);
  const char **si, **di;
  vector_loop(e, src, dst, v, product(ext, n) / v / e->T <= 16 ? "#pragma unroll" : "#pragma unroll 1", &si, &di);
  line(e, "const bool tl_in = %s;", in_bounds(e, src->sym, si));
  const char *so = offset(e, src->sym, si), *dof = offset(e, dst->sym, di);
  if (per > 1) { /* a packed dtype: the byte of the element */
    so = packed_byte(e, so, per);
    dof = packed_byte(e, dof, per);
  }
  line(e, "const %s *tl_g = tl_in ? &g_%s[%s] : g_%s;", srep(src->sym->dtype), src->sym->name, so, src->sym->name);
  if (s->evict) /* the copy's L2 policy ("eviction_policy") */
    line(e, "unsigned long long tl_pol; asm(\"%s;\" : \"=l\"(tl_pol));", tl_ptx_createpolicy(e->a, s->evict, "%0"));
  line(e, "asm volatile(\"%s;\" :: \"r\"(tl_smem_addr(&s_%s[%s])), \"l\"(tl_g), \"r\"(tl_in ? 16 : 0)%s);",
       tl_ptx_cp_async16(e->a, "%0", "%1", "%2", s->evict ? "%3" : NULL), dst->sym->name, dof,
       s->evict ? ", \"l\"(tl_pol)" : "");
  e->indent--;
  line(e, "}");
}

/* A copy of a 32-bit fragment f into d of its own dtype (float32, int32
 * or uint32) stores a thread's pair of neighbouring columns as one 8-byte
 * vector (op_copy_pairs), where one store an element left the epilogue
 * of a split-K gemm's float32 sums held up on its store queue (W4A16 at
 * M = 64: bench/README.md). */
static bool wide_pair(const tl_sym *f, const tl_sym *d) {
  return d->dtype == f->dtype && (d->dtype == TL_FLOAT32 || d->dtype == TL_INT32 || d->dtype == TL_UINT32);
}

/* A copy out of an mma-layout register fragment into a 16-bit buffer or
 * tensor whose rows are the fragment's rows: each thread's elements 2k and
 * 2k + 1 are neighbours in a row (columns c, c + 1 with c even), so they go
 * out as one 4-byte store of two packed halves (or, from a 32-bit fragment
 * into its own dtype, wide_pair, one 8-byte store of the two).  Needs: the
 * destination's last dimension is the fragment's columns, starts on an even
 * element and has an even size (so a pair is wholly inside or wholly
 * outside a tensor, and aligned to its size). */
static bool copy_pairs_ok(const tl_stmt *s) {
  const tl_region *src = s->src, *dst = s->dst;
  const tl_sym *f = reg_of(src), *d = dst->sym;
  if (f && d->kind == SYM_BUFFER && d->packed) /* pass_place.c checked the copy */
    return true;
  if (!f || f->reg_layout != TL_LAYOUT_MMA || f->ndim != 2 || reg_of(dst))
    return false;
  if ((d->dtype != TL_FLOAT16 && d->dtype != TL_BFLOAT16 && !wide_pair(f, d)) ||
      (d->kind == SYM_BUFFER && d->scope == SCOPE_LOCAL))
    return false;
  int last = dst->ndim - 1;
  int64_t ext[TL_MAX_DIMS];
  if (squeezed(dst, ext) != 2 || dst->ext[last] != f->dims[1] || d->dims[last] < 0 || d->dims[last] % 2)
    return false;
  return tl_multiple_of(dst->lo[last], 2) &&
         (d->kind != SYM_TENSOR || d->align >= 2 * (int64_t)tl_dtype_size(d->dtype));
}

/* The pair of halves of registers r and r + 1 of fragment f as one
 * 32-bit word, converted to d's dtype (a C expression); float to half
 * pairs in one cvt.rn.f16x2.f32 (tl_f2h2) where `f2h2`, and in the CUDA
 * dialect float to bfloat16 pairs in one cvt.rn.bf16x2.f32 (tl_f2bf2): the
 * same rounding as one at a time, and after a wgmma, where rounding
 * through tl_rh (half, back to float, then half) made ptxas serialize the
 * gemm's wgmma-groups (C7514: "non wgmma instructions reading accumulator
 * registers"), and tl_rbf then tl_f2bf took a dozen integer instructions
 * an element in the epilogue. */
static const char *half_pair(E *e, const tl_sym *f, const tl_sym *d, const char *r, bool f2h2) {
  if (f2h2 && f->dtype == TL_FLOAT32 && (d->dtype == TL_FLOAT16 || (d->dtype == TL_BFLOAT16 && e->d == &dialect_cuda)))
    return S("%s(r_%s[%s], r_%s[%s + 1])", d->dtype == TL_FLOAT16 ? "tl_f2h2" : "tl_f2bf2", f->name, r, f->name, r);
  const char *pk = d->dtype == TL_BFLOAT16 ? "tl_f2bf" : "tl_f2h";
  const char *lo = conv(e, S("r_%s[%s]", f->name, r), (tl_type)f->dtype, (tl_type)d->dtype);
  const char *hi = conv(e, S("r_%s[%s + 1]", f->name, r), (tl_type)f->dtype, (tl_type)d->dtype);
  return S("(unsigned)%s(%s) | ((unsigned)%s(%s) << 16)", pk, lo, pk, hi);
}

/* A store of value (of C type `type`) from the register whose index is
 * tl_r into copy s's destination tensor at tl_gp (the thread's part of the
 * address, computed before the loop: mma_row_col_split's split[0] and
 * split[2] as tl_t0 and tl_t1) plus the register's part, where the
 * element is inside the tensor. */
static void hoisted_store(E *e, const tl_stmt *s, const char *split[4], const char *type, const char *value) {
  const tl_sym *d = s->dst->sym;
  line(e, "const int tl_q0 = (int)(%s), tl_q1 = (int)(%s);", split[1], split[3]);
  const char *full[2] = {"tl_t0 + tl_q0", "tl_t1 + tl_q1"};
  const char **idx = region_idx(e, s->dst, full); /* for the guard */
  const char *rel[TL_MAX_DIMS];
  for (int k = 0, i = 0; i < d->ndim; i++)
    rel[i] = s->dst->ext[i] == 1 ? "0LL" : (k++ ? "(long long)tl_q1" : "(long long)tl_q0");
  line(e, "if (%s) *(%s *)&tl_gp[%s] = %s;", in_bounds(e, d, idx), type, offset(e, d, rel), value);
}

/* Whether op_copy_quads can store copy s (op_copy_pairs's, into a tensor,
 * from the whole fragment) as 8-byte chunks of 4 columns: a thread's
 * column groups come in pairs (mma_ni even), every warp is whole and every
 * thread runs the copy (a shuffle between lane pairs), and the tensor's
 * rows and the tile's first column are multiples of 4 elements (a chunk is
 * wholly inside or outside the tensor, and 8-byte aligned). */
static bool copy_quads_ok(const E *e, const tl_stmt *s, bool uniform) {
  const tl_sym *f = reg_of(s->src), *d = s->dst->sym;
  int last = s->dst->ndim - 1;
  int64_t ext[TL_MAX_DIMS];
  return uniform && e->d == &dialect_cuda && e->T % 32 == 0 && f && f->reg_layout == TL_LAYOUT_MMA &&
         tl_dtype_size(d->dtype) == 2 && f->mma_ni % 2 == 0 && d->kind == SYM_TENSOR && squeezed(s->dst, ext) == 2 &&
         ext[0] == f->dims[0] && ext[1] == f->dims[1] && d->dims[last] > 0 && d->dims[last] % 4 == 0 &&
         d->align >= 8 && tl_multiple_of(s->dst->lo[last], 4);
}

/* op_copy_pairs's stores as full 32-byte sectors: of a thread's column
 * groups 2m and 2m + 1 (8 columns each, two of them the thread's), lane
 * 2i keeps its pair of group 2m and takes lane 2i + 1's (4 neighbouring
 * columns), lane 2i + 1 the same of group 2m + 1, and each stores them as
 * one 8-byte chunk: a quad of lanes writes 16 neighbouring columns of a row
 * (32 bytes) where op_copy_pairs's store wrote 8, half of two sectors.
 * One shuffle per chunk; the store instructions halve. */
static void op_copy_quads(E *e, const tl_stmt *s) {
  const tl_sym *f = reg_of(s->src), *d = s->dst->sym;
  const char *split[4] = {0};
  mma_row_col_split(e, f, "tl_r", split);
  line(e, "{");
  e->indent++;
  /* the thread's first column: its pair's, rounded down to the lane pair's, plus 8 on the odd lane */
  line(e, "const unsigned tl_t0 = %s, tl_t1 = (%s) - ((unsigned)tl_tid & 1u) * 2u + ((unsigned)tl_tid & 1u) * 8u;",
       split[0], split[2]);
  line(e, "const bool tl_odd = (tl_tid & 1) != 0;");
  const char *tq[2] = {"tl_t0", "tl_t1"};
  line(e, "%s *const tl_gp = &%s[%s];", srep(d->dtype), storage(e, d), offset(e, d, region_idx(e, s->dst, tq)));
  line(e, "#pragma unroll");
  line(e, "for (int tl_r8 = 0; tl_r8 < %" PRId64 "; tl_r8 += 8) {", f->per_thread);
  e->indent++;
  line(e, "#pragma unroll");
  line(e, "for (int tl_h = 0; tl_h < 4; tl_h += 2) {");
  e->indent++;
  line(e, "const int tl_r = tl_r8 + tl_h;");
  bool f2h2 = true; /* the CUDA dialect (copy_quads_ok) */
  line(e, "const unsigned tl_a = %s, tl_b = %s;", half_pair(e, f, d, "tl_r", f2h2), half_pair(e, f, d, "tl_r + 4", f2h2));
  line(e, "const unsigned tl_s = tl_odd ? tl_a : tl_b;"); /* the shuffle a whole statement (tests/sh/collectives.py) */
  line(e, "const unsigned tl_x = __shfl_xor_sync(0xffffffffu, tl_s, 1);");
  hoisted_store(e, s, split, "uint2", "make_uint2(tl_odd ? tl_x : tl_a, tl_odd ? tl_b : tl_x)");
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
}

static void op_copy_pairs(E *e, const tl_stmt *s) {
  const tl_sym *f = reg_of(s->src), *d = s->dst->sym;
  int64_t ext[TL_MAX_DIMS] = {0};
  int n = squeezed(s->dst, ext);
  /* Into a tensor, from the whole of an mma-layout fragment: the thread's
   * part of the address is computed once, before the loop, and each trip
   * adds its register's part (a tensor's offset is linear in the indices).
   * The same stores, with a constant offset each instead of the whole
   * index arithmetic per pair: less for NVVM to fold and for ptxas to
   * schedule (bench/compile.md). */
  const char *split[4] = {0};
  bool hoist = d->kind == SYM_TENSOR && f->reg_layout == TL_LAYOUT_MMA && n == 2 && ext[0] == f->dims[0] &&
               ext[1] == f->dims[1];
  if (hoist) {
    mma_row_col_split(e, f, "tl_r", split);
    line(e, "{");
    e->indent++;
    line(e, "const unsigned tl_t0 = %s, tl_t1 = %s;", split[0], split[2]);
    const char *tq[2] = {"tl_t0", "tl_t1"};
    line(e, "%s *const tl_gp = &%s[%s];", srep(d->dtype), storage(e, d), offset(e, d, region_idx(e, s->dst, tq)));
  }
  line(e, "#pragma unroll");
  line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r += 2) {", f->per_thread);
  e->indent++;
  bool packed = d->kind == SYM_BUFFER && d->packed, wide = wide_pair(f, d);
  /* a pair of 16-bit values as one word, or of 32-bit ones as one 8-byte vector (wide_pair) */
  const char *vt = !wide ? "unsigned" : d->dtype == TL_FLOAT32 ? "float2" : d->dtype == TL_INT32 ? "int2" : "uint2";
  if (wide)
    line(e, "const %s tl_pair = make_%s(r_%s[tl_r], r_%s[tl_r + 1]);", vt, vt, f->name, f->name);
  else
    line(e, "const unsigned tl_pair = %s;", half_pair(e, f, d, "tl_r", packed || e->d == &dialect_cuda));
  if (packed) { /* same layout: word tl_r / 2 */
    line(e, "r_%s[tl_r / 2] = tl_pair;", d->name);
    e->indent--;
    line(e, "}");
    return;
  }
  if (hoist) {
    hoisted_store(e, s, split, vt, "tl_pair");
    e->indent--;
    line(e, "}");
    e->indent--;
    line(e, "}");
    return;
  }
  const char **q = owned_idx(e, f, ext, n, "tl_q");
  if (!q) {
    line(e, "const int tl_e = %s;", elem_of(e, f, "tl_r"));
    q = decode(e, "tl_e", ext, n, "tl_q");
  }
  const char **idx = region_idx(e, s->dst, q);
  const char *st = S("*(%s *)&%s[%s] = tl_pair;", vt, storage(e, d), offset(e, d, idx));
  if (d->kind == SYM_TENSOR)
    line(e, "if (%s) %s", in_bounds(e, d, idx), st);
  else
    line(e, "%s", st);
  e->indent--;
  line(e, "}");
}

/* A copy of a packed tile as bytes, w at a time (pass_pipeline.c chose w),
 * cooperatively; outside a tensor reads give 0 and writes are dropped (a
 * vector is wholly inside or outside). */
static void op_copy_packed(E *e, const tl_stmt *s, int w) {
  const tl_region *src = s->src, *dst = s->dst;
  int64_t v = (int64_t)w * (8 / tl_dtype_bits(src->sym->dtype));
  const char **si, **di;
  vector_loop(e, src, dst, v, NULL, &si, &di);
  const char *vt = S("tl_v%d", w); /* prelude_subbyte.h */
  const char *sp = S("*(const %s *)&%s[%s]", vt, storage(e, src->sym), packed_byte(e, offset(e, src->sym, si), v / w));
  if (src->sym->kind == SYM_TENSOR)
    line(e, "const %s tl_b = %s ? %s : %s{};", vt, in_bounds(e, src->sym, si), sp, vt);
  else
    line(e, "const %s tl_b = %s;", vt, sp);
  const char *st = S("*(%s *)&%s[%s] = tl_b;", vt, storage(e, dst->sym), packed_byte(e, offset(e, dst->sym, di), v / w));
  if (dst->sym->kind == SYM_TENSOR)
    line(e, "if (%s) %s", in_bounds(e, dst->sym, di), st);
  else
    line(e, "%s", st);
  e->indent--;
  line(e, "}");
}

/* The bytes (16, 8 or 4) a copy from a shared buffer into a tensor of the
 * same (whole-byte) dtype may store at once, or 0: its innermost extent on
 * both sides is the copy's innermost dimension and a multiple of the vector,
 * both starts are multiples of it, the buffer's rows (in any swizzle, which
 * moves aligned 16-byte chunks whole) and the tensor's (a constant
 * innermost dimension) hold whole vectors, and the tensor's base is aligned
 * to them: a vector then lies wholly inside or wholly outside the tensor,
 * and its elements are contiguous on both sides (the mirror of
 * pass_pipeline.c's can_async). */
static int store_vec_bytes(const tl_stmt *s) {
  const tl_region *src = s->src, *dst = s->dst;
  const tl_sym *b = src->sym, *t = dst->sym;
  if (b->kind != SYM_BUFFER || b->scope != SCOPE_SHARED || t->kind != SYM_TENSOR || b->dtype != t->dtype ||
      tl_dtype_is_packed(b->dtype) || (b->layout && !b->layout->swizzle) || b->view_of || b->viewed)
    return 0;
  int64_t es = (int64_t)tl_dtype_size(b->dtype);
  int ls = src->ndim - 1, ld = dst->ndim - 1;
  if (src->ext[ls] != dst->ext[ld] || src->ext[ls] == 1 || t->dims[ld] < 0)
    return 0;
  for (int w = 16; w >= 4 && w >= 2 * es; w /= 2) {
    int64_t v = w / es;
    if (src->ext[ls] % v == 0 && b->dims[ls] % v == 0 && t->dims[ld] % v == 0 && tl_multiple_of(src->lo[ls], v) &&
        tl_multiple_of(dst->lo[ld], v) && t->align >= w)
      return w;
  }
  return 0;
}

/* A copy store_vec_bytes allows, w bytes at a time (each vector stored
 * when it lies inside the tensor). */
static void op_copy_store_vec(E *e, const tl_stmt *s, int w) {
  const tl_region *src = s->src, *dst = s->dst;
  int64_t v = w / (int64_t)tl_dtype_size(src->sym->dtype), ext[TL_MAX_DIMS] = {0};
  int n = squeezed(dst, ext);
  const char **si, **di;
  vector_loop(e, src, dst, v, product(ext, n) / v / e->T <= 16 ? "#pragma unroll" : "#pragma unroll 1", &si, &di);
  const char *ty = w == 16 ? "tl_v16" : w == 8 ? "tl_v8" : "tl_v4";
  line(e, "if (%s) *(%s *)&g_%s[%s] = *(const %s *)&s_%s[%s];", in_bounds(e, dst->sym, di), ty, dst->sym->name,
       offset(e, dst->sym, di), ty, src->sym->name, offset(e, src->sym, si));
  e->indent--;
  line(e, "}");
}

static void emit_tma_store(E *e, const tl_stmt *s);
static void pre_wait(E *e, const tl_stmt *c);

static void op_copy(E *e, const tl_stmt *s, bool uniform) {
  const tl_region *src = s->src, *dst = s->dst;
  if (s->wspec_pre) { /* the producer's (pass_wspec.c) */
    pre_wait(e, s);
    return;
  }
  if (s->tma_store) {
    emit_tma_store(e, s);
    return;
  }
  if (s->byte_copy) {
    op_copy_packed(e, s, s->byte_copy);
    return;
  }
  if (s->async_copy) {
    emit_async_copy(e, s);
    line(e, "asm volatile(\"cp.async.commit_group;\\n\\tcp.async.wait_group 0;\" ::: \"memory\");");
    return;
  }
  if (copy_pairs_ok(s) && copy_quads_ok(e, s, uniform)) {
    op_copy_quads(e, s);
    return;
  }
  if (copy_pairs_ok(s)) {
    op_copy_pairs(e, s);
    return;
  }
  int w = store_vec_bytes(s);
  if (w) {
    op_copy_store_vec(e, s, w);
    return;
  }
  int64_t ext[TL_MAX_DIMS] = {0};
  int n = squeezed(dst, ext);
  const tl_sym *owner = reg_of(dst) ? reg_of(dst) : reg_of(src);
  open_loop(e, owner, product(ext, n));
  const char **q = loop_idx(e, owner, ext, n, "tl_q");
  const char *v = read_elem(e, src->sym, region_idx(e, src, q), "tl_r");
  write_elem(e, dst->sym, region_idx(e, dst, q), "tl_r", conv(e, v, (tl_type)src->sym->dtype, (tl_type)dst->sym->dtype));
  close_loop(e, owner);
}

/* Zeros written into a gemm's C right before the gemm, on wgmma, issues
 * as the gemm's first k step with scale-d false (D = A B, as clear_accum
 * does) instead: the fill, a whole-buffer fill of zeros in the same body
 * as the gemm and just before it (or a constant if whose side taken is
 * that fill alone: flash attention's mask or clear), is not emitted.  The
 * same results, with C's registers not written twice; a gemm one iteration
 * late (pass_overlap.c) keeps the order written.  tl_fold_fills (ir.c)
 * finds the pairs before the kernel is emitted. */
static bool folded(const E *e, const tl_stmt *s) { return tl_vec_has(&e->folded, s); }

static void op_fill(E *e, const tl_stmt *s) {
  const tl_region *dst = s->dst;
  if (folded(e, s)) /* the gemm after it clears C (tl_fold_fills) */
    return;
  line(e, "{");
  e->indent++;
  line(e, "const %s tl_v = %s;", crep((tl_type)dst->sym->dtype),
       conv(e, ex(e, s->value), s->value->type, (tl_type)dst->sym->dtype));
  int64_t ext[TL_MAX_DIMS] = {0};
  int n = squeezed(dst, ext);
  const tl_sym *owner = reg_of(dst);
  open_loop(e, owner, product(ext, n));
  const char **q = loop_idx(e, owner, ext, n, "tl_q");
  write_elem(e, dst->sym, region_idx(e, dst, q), "tl_r", "tl_v");
  close_loop(e, owner);
  e->indent--;
  line(e, "}");
}

/* The accumulator registers of C and their asm constraint: int32 C ("r")
 * for integer operands, float ("f") for the others. */
static const char *acc_constraint(const tl_sym *C) { return C->dtype == TL_INT32 ? "+r" : "+f"; }

/* Four 8-bit fragment registers dst[0..3] of a k32 mma operand stored with
 * K outermost (A [K, M], B [K, N]), packed a byte at a time from shared
 * memory: ldmatrix has no 8-bit transpose before sm_100.  Register q holds
 * the bytes at k = tl_k + kq + 4 (lane % 4) + v, v = 0..3 (low byte
 * first), of row or column mn + lane / 4; mn and kq are expressions of
 * tl_q. */
static void gather8(E *e, const tl_sym *X, const char *dst, const char *mn, const char *kq) {
  const char *idx[2] = {S("(tl_k + %s + (tl_lane %% 4) * 4 + tl_v)", kq), S("(%s + tl_lane / 4)", mn)};
  line(e, "#pragma unroll");
  line(e, "for (int tl_q = 0; tl_q < 4; tl_q++) {");
  line(e, "  unsigned tl_w = 0;");
  line(e, "#pragma unroll");
  line(e, "  for (int tl_v = 0; tl_v < 4; tl_v++) tl_w |= (unsigned)(unsigned char)s_%s[%s] << (8 * tl_v);", X->name,
       offset(e, X, idx));
  line(e, "  %s[tl_q] = tl_w;", dst);
  line(e, "}");
}

/* Sets the four registers dst[0..3] of the m16k16 A fragment of row tile
 * i and the k16 step from element k (C expressions; k a multiple of 16) of
 * register fragment A, which has the mma layout of the gemm's C (pass_place.c's
 * resolve_gemm_a): A's accumulator tiles (i, k/8) and (i, k/8 + 1) are
 * exactly that fragment, for mma.sync's m16n8k16 and for wgmma's m64nNk16
 * with A from registers alike; a packed A already holds its pairs of
 * halves, an unpacked one is packed here. */
static void a_frag_regs(E *e, const tl_sym *A, const char *dst, const char *i, const char *k) {
  const char *pk = A->dtype == TL_BFLOAT16 ? "tl_f2bf" : "tl_f2h";
  int64_t NA = A->mma_ni * 4;
  if (A->packed) {
    line(e, "#pragma unroll");
    line(e, "for (int tl_q = 0; tl_q < 4; tl_q++) %s[tl_q] = r_%s[((%s) * %" PRId64 " + ((%s) / 8) * 4) / 2 + tl_q];", dst,
         A->name, i, NA, k);
    return;
  }
  line(e, "{");
  line(e, "  const float *tl_p0 = &r_%s[(%s) * %" PRId64 " + ((%s) / 8) * 4], *tl_p1 = tl_p0 + 4;", A->name, i, NA, k);
  line(e, "  %s[0] = (unsigned)%s(tl_p0[0]) | ((unsigned)%s(tl_p0[1]) << 16);", dst, pk, pk);
  line(e, "  %s[1] = (unsigned)%s(tl_p0[2]) | ((unsigned)%s(tl_p0[3]) << 16);", dst, pk, pk);
  line(e, "  %s[2] = (unsigned)%s(tl_p1[0]) | ((unsigned)%s(tl_p1[1]) << 16);", dst, pk, pk);
  line(e, "  %s[3] = (unsigned)%s(tl_p1[2]) | ((unsigned)%s(tl_p1[3]) << 16);", dst, pk, pk);
  line(e, "}");
}

/* gemm on the matrix cores: C (TL_LAYOUT_MMA) += A . B with
 * mma.sync.m16n8k16 (16-bit operands, float accumulators) or m16n8k32
 * (8-bit operands: s8/u8 into s32, e4m3/e5m2 into f32), fragments of A
 * and B loaded from shared memory with ldmatrix (.trans where the storage
 * is K-major for A or N-major for B).
 * An 8-bit A or B fragment of k32 holds the same bytes as a 16-bit one of
 * k16 (row g, bytes 4t..4t+3 of each 16-byte half of a 32-byte row), so
 * the same ldmatrix loads both, with the column counted in bytes; an
 * 8-bit operand stored with K outermost is packed byte by byte (gather8).
 * A float16 C accumulates in float across the call and is rounded once at
 * its end. */
static void op_gemm_mma(E *e, const tl_stmt *s) {
  const tl_sym *A = s->A, *B = s->B, *C = s->C;
  int64_t K = s->trans_a ? A->dims[0] : A->dims[1];
  int64_t MI = C->mma_mi, NI = C->mma_ni, WNc = NI * 8;
  int es = (int)tl_dtype_size(A->dtype), kstep = es == 1 ? 32 : 16, epc = 16 / es; /* elements per 16 bytes */
  const char *ty = tl_mma_ptx_type(A->dtype), *cty = tl_mma_ptx_type(C->dtype == TL_INT32 ? TL_INT32 : TL_FLOAT32);
  line(e, "{");
  e->indent++;
  line(e, "const int tl_lane = tl_tid %% 32, tl_wm = tl_tid / 32 / %d, tl_wn = tl_tid / 32 %% %d;", C->mma_wn, C->mma_wn);
  line(e, "(void)tl_wm; (void)tl_wn;");
  if (s->clear_accum) {
    line(e, "#pragma unroll");
    line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r++) r_%s[tl_r] = 0;", C->per_thread, C->name);
  }
  if (s->a_regs)
    line(e, "const unsigned tl_sb = tl_smem_addr(s_%s);", B->name);
  else
    line(e, "const unsigned tl_sa = tl_smem_addr(s_%s), tl_sb = tl_smem_addr(s_%s);", A->name, B->name);
  /* unrolled when short (the swizzled addresses then fold to constants per
   * row), always when A is in registers (register indices must be
   * constants), and up to 8 steps while the register fragments leave room
   * for the next step's loads (H200, flash attention with 64-wide K
   * tiles: 193 -> 248 TFLOP/s; with 170 words of fragments it spilled) */
  bool gather = es == 1 && (s->trans_a || !s->trans_b); /* gather8's index arithmetic spills when unrolled */
  bool unroll = !gather && (K / kstep <= 4 || s->a_regs || (K / kstep <= 8 && tl_reg_words(e->prog) <= 128));
  line(e, "#pragma unroll %s", unroll ? "" : "1");
  line(e, "for (int tl_k = 0; tl_k < %" PRId64 "; tl_k += %d) {", K, kstep);
  e->indent++;
  line(e, "unsigned tl_a[%" PRId64 "][4];", MI);
  if (s->a_regs) {
    line(e, "#pragma unroll");
    line(e, "for (int tl_i = 0; tl_i < %" PRId64 "; tl_i++) {", MI);
    e->indent++;
    a_frag_regs(e, A, "tl_a[tl_i]", "tl_i", "tl_k");
    e->indent--;
    line(e, "}");
  } else {
  /* A: rows m, columns k (or stored [K, M] and loaded transposed) */
  line(e, "#pragma unroll");
  line(e, "for (int tl_i = 0; tl_i < %" PRId64 "; tl_i++) {", MI);
  e->indent++;
  const char *am = S("(int)(%s)", tile_row(e, C, "(unsigned)tl_wm", "(unsigned)tl_i"));
  if (es == 1 && s->trans_a) {
    /* registers 0..3: rows +0, +8, +0, +8 and k +0, +0, +16, +16 */
    gather8(e, A, "tl_a[tl_i]", S("%s + (tl_q %% 2) * 8", am), "(tl_q / 2) * 16");
    e->indent--;
    line(e, "}");
  } else {
  const char *aidx[2];
  if (!s->trans_a) {
    aidx[0] = S("%s + (tl_lane %% 16)", am);
    aidx[1] = S("(tl_k + (tl_lane / 16) * %d)", epc);
  } else {
    aidx[0] = "(tl_k + (tl_lane % 8) + (tl_lane / 16) * 8)";
    aidx[1] = S("%s + ((tl_lane / 8) %% 2) * 8", am);
  }
  line(e, "asm volatile(\"ldmatrix.sync.aligned.m8n8.x4%s.shared.b16 {%%0,%%1,%%2,%%3}, [%%4];\" : \"=r\"(tl_a[tl_i][0]), "
          "\"=r\"(tl_a[tl_i][1]), \"=r\"(tl_a[tl_i][2]), \"=r\"(tl_a[tl_i][3]) : \"r\"(tl_sa + (unsigned)(%s) * %du));",
       s->trans_a ? ".trans" : "", offset(e, A, aidx), es);
  e->indent--;
  line(e, "}");
  }
  }
  /* B: two n8 tiles per ldmatrix.x4.  Wide warp tiles (NI > 8, where
   * registers are short) use each pair at once in the mmas of every row
   * tile, so only four B registers live at a time; narrower ones load all
   * of B first, which hides the loads' latency better. */
  bool interleave = NI > 8;
  if (!interleave) {
    line(e, "unsigned tl_bb[%" PRId64 "][4];", NI / 2);
    line(e, "#pragma unroll");
    line(e, "for (int tl_j = 0; tl_j < %" PRId64 "; tl_j += 2) {", NI);
  } else {
    line(e, "#pragma unroll");
    line(e, "for (int tl_j = 0; tl_j < %" PRId64 "; tl_j += 2) {", NI);
  }
  e->indent++;
  const char *bn = S("(tl_wn * %" PRId64 " + tl_j * 8)", WNc);
  const char *bidx[2];
  if (s->trans_b) { /* stored [N, K] */
    bidx[0] = S("%s + (tl_lane %% 8) + (tl_lane / 16) * 8", bn);
    bidx[1] = S("(tl_k + ((tl_lane / 8) %% 2) * %d)", epc);
  } else { /* stored [K, N] */
    bidx[0] = "(tl_k + (tl_lane % 8) + ((tl_lane / 8) % 2) * 8)";
    bidx[1] = S("%s + (tl_lane / 16) * 8", bn);
  }
  if (!interleave)
    line(e, "unsigned *const tl_b = tl_bb[tl_j / 2];");
  else
    line(e, "unsigned tl_b[4];");
  if (es == 1 && !s->trans_b) /* registers 0..3: n tiles j, j, j + 1, j + 1 and k +0, +16, +0, +16 */
    gather8(e, B, "tl_b", S("%s + (tl_q / 2) * 8", bn), "(tl_q % 2) * 16");
  else
    line(e, "asm volatile(\"ldmatrix.sync.aligned.m8n8.x4%s.shared.b16 {%%0,%%1,%%2,%%3}, [%%4];\" : \"=r\"(tl_b[0]), "
            "\"=r\"(tl_b[1]), \"=r\"(tl_b[2]), \"=r\"(tl_b[3]) : \"r\"(tl_sb + (unsigned)(%s) * %du));",
         s->trans_b ? "" : ".trans", offset(e, B, bidx), es);
  if (!interleave) {
    e->indent--;
    line(e, "}");
    line(e, "#pragma unroll");
    line(e, "for (int tl_j = 0; tl_j < %" PRId64 "; tl_j += 2) {", NI);
    e->indent++;
    line(e, "const unsigned *const tl_b = tl_bb[tl_j / 2];");
  }
  line(e, "#pragma unroll");
  line(e, "for (int tl_i = 0; tl_i < %" PRId64 "; tl_i++)", MI);
  line(e, "#pragma unroll");
  line(e, "  for (int tl_h = 0; tl_h < 2; tl_h++) {");
  line(e, "    %s *tl_c = &r_%s[(tl_i * %" PRId64 " + tl_j + tl_h) * 4];", crep((tl_type)C->dtype), C->name, NI);
  const char *cc = acc_constraint(C);
  line(e, "    asm(\"mma.sync.aligned.m16n8k%d.row.col.%s.%s.%s.%s {%%0,%%1,%%2,%%3}, {%%4,%%5,%%6,%%7}, "
          "{%%8,%%9}, {%%0,%%1,%%2,%%3};\" : \"%s\"(tl_c[0]), \"%s\"(tl_c[1]), \"%s\"(tl_c[2]), \"%s\"(tl_c[3]) : "
          "\"r\"(tl_a[tl_i][0]), \"r\"(tl_a[tl_i][1]), \"r\"(tl_a[tl_i][2]), \"r\"(tl_a[tl_i][3]), \"r\"(tl_b[tl_h * 2]), "
          "\"r\"(tl_b[tl_h * 2 + 1]));", kstep, cty, ty, ty, cty, cc, cc, cc, cc);
  line(e, "  }");
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
  if (C->dtype == TL_FLOAT16) {
    line(e, "#pragma unroll");
    line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r++) r_%s[tl_r] = tl_rh(r_%s[tl_r]);", C->per_thread, C->name,
         C->name);
  }
  e->indent--;
  line(e, "}");
}

/* Pins the registers of fragment C in place (an empty asm that reads and
 * writes each): NVVM moves no access of them across it, so register
 * writes stay before a wgmma.fence and reads after a wgmma.wait_group. */
static void pin_regs(E *e, const tl_sym *C) {
  line(e, "#pragma unroll");
  line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r++) asm volatile(\"\" : \"%s\"(r_%s[tl_r]) :: \"memory\");",
       C->per_thread, acc_constraint(C), C->name);
}

/* The matrix descriptor (a C expression) of the 64 rows (or all N rows of
 * a B) from row `row0` (an unsigned C expression, a multiple of 8) of
 * K-major operand X ([rows, Kt] at shared address `base`) at k16 step `k`:
 * rows of Kt <= 64 (16-bit) elements in the swizzle mode of their width (128, 64 or
 * 32 bytes: modes 1, 2, 3), 8-row groups 8 rows apart, each k step 32 bytes
 * on; wider rows are panels of 64 columns (128-byte mode), step k in panel
 * k / 4 (pass_place.c's choose_wgmma describes the storage).  Counted in
 * bytes, the same holds for 8-bit operands and their k32 steps. */
static const char *kmajor_off(E *e, const tl_sym *X, const char *row0, const char *k) {
  int64_t Kb = X->dims[1] * (int64_t)tl_dtype_size(X->dtype), W = Kb < 128 ? Kb : 128;
  return Kb > 128 ? S("(unsigned)(%s) / 4u * %" PRId64 "u + (%s) * 128u + (unsigned)(%s) %% 4u * 32u", k, X->dims[0] * 128, row0, k)
                  : S("(%s) * %" PRId64 "u + (unsigned)(%s) * 32u", row0, W, k);
}

static const char *kmajor_desc(E *e, const tl_sym *X, const char *base, const char *row0, const char *k) {
  int64_t Kb = X->dims[1] * (int64_t)tl_dtype_size(X->dtype), W = Kb < 128 ? Kb : 128;
  int64_t mode = W == 128 ? 1 : W == 64 ? 2 : 3;
  return S("tl_wgdesc(%s + %s, 16u, %" PRId64 "u, %" PRId64 "u)", base, kmajor_off(e, X, row0, k), 8 * W, mode);
}

/* The descriptor at byte offset `off` (an unsigned C expression, a multiple
 * of 16) from the one `d` names: the start address is the descriptor's low
 * 14 bits, the address / 16, and a shared address with its offset stays
 * below 2^18 (the most shared memory a block has is 228 KB), so adding
 * off / 16 to the whole descriptor sets the same bits tl_wgdesc would from
 * the address plus off, carrying into no other field.  The k steps' and the
 * row blocks' descriptors of a wgmma gemm are so one add each (at compile
 * time mostly constant offsets), not the masks and shifts of tl_wgdesc. */
static const char *desc_plus(E *e, const char *d, const char *off) {
  return S("%s + (unsigned long long)((%s) >> 4)", d, off);
}

/* gemm on wgmma (sm_90a; pass_place.c's choose_wgmma says when): per k16
 * step, warpgroup g issues mma_mi instructions m64nNk16, instruction i for
 * rows [(i * W + 4 g) * 16, +64) of C (W warps; the interleaved mma
 * layout), its accumulators C's registers [i * N/2, (i + 1) * N/2); A and B
 * through matrix descriptors (kmajor_desc; an N-major B [Kt, N] as panels
 * of 64 columns: 8-row groups of k 1024 bytes apart, panels (the leading
 * offset) Kt * 128 bytes apart, each k step 16 rows (2048 bytes) on,
 * transposed by the instruction).  Then the instructions are committed as
 * one wgmma-group and the gemm waits until at most wg_pending groups are
 * pending (pass_pipeline.c decides, and says why that is safe).  A gemm
 * that clears C (clear_accum) does not write zeros first: its first k step
 * has scale-d false (the predicate operand: D = A B, C's old registers not
 * read), the others true.
 *
 * The PTX ISA's other ordering rules: wgmma.fence comes before the first
 * wgmma.mma_async of every call, so C's registers written by other
 * instructions (code before the gemm) are ordered before the
 * wgmma that accumulates into them (pin_regs keeps NVVM from moving those
 * writes past the fence, and reads of C after the wait that ends the
 * groups before it); the fence between accumulating wgmma of one shape is
 * not needed but costs nothing.  A and B written through the generic proxy
 * (cp.async, st.shared) reach the gemm only across a block barrier
 * (pass_barrier.c; a pipelined loop's barrier per iteration), and every
 * barrier of a program with a gemm on wgmma is preceded by
 * fence.proxy.async, which makes those writes visible to wgmma's async
 * proxy.
 *
 * 8-bit operands (both K-major) take m64nNk32 with the same descriptors (a
 * k32 step is again 32 bytes); they have no transpose or negation
 * operands, and integer ones no scale operands either; the accumulators
 * are int32 for integer operands. */
/* A gemm on wgmma with A from registers that leaves its group pending
 * across iterations (pass_pipeline.c's async_gemm): the PTX ISA makes
 * writing the registers of a pending wgmma's A undefined until a
 * wgmma.wait_group retires its group, and the registers that group reads
 * must be none that the next iteration computes its A in meanwhile (the
 * dequantized weights of gemm_w4a16_t.json, beside the pending group).
 * Neither compiler sees to that: NVVM makes a copy of the computed
 * fragments into other variables after the wait one register with them,
 * and ptxas, which takes a wgmma's registers as read where it is issued,
 * gave a copy made after the wait the registers of the values computed
 * before it (2 of 8 results wrong on an H100 with two warpgroups,
 * bench/gpu-w4a16-2026-11-25-h100-w7big-r2.log).  So such a gemm keeps A
 * in two sets of registers of its loop (held_a: [2][k steps][mi][4],
 * declared in the loop's block with zeros, held_a_loop), iteration c
 * reading set c % 2 (the loop's body is emitted twice, for even and odd
 * c: emit_pipelined, emit_tl_wspec_loop).  Iteration c computes its A where it likes, waits
 * for the pending group (c - 1's, which read set (c - 1) % 2: wait_group
 * 0), then sets set c % 2 with selp.b32 from the other set's register or
 * the computed one, on a predicate that is never true but that neither
 * compiler can know (%nsmid, the number of SMs, is 0).  The other set is
 * then read after the wait, so live, in registers of its own, from its
 * definition through the whole of c - 1's pending group, and set c % 2 is
 * defined only after the wait that retired the last group reading it
 * (c - 2's, at iteration c - 1); so ptxas keeps the group in flight
 * (a set defined from itself instead is right too, but ptxas serializes
 * the loop's wgmma then: C7513). */
static const char *held_a(E *e, const tl_stmt *g) { return S("tl_held_%s_%s", g->A->name, g->C->name); }

/* Does pipelined loop s hold a gemm that needs held_a? */
static bool has_held_a(const tl_stmt *s) {
  for (int i = 0; i < s->body.n; i++)
    if (s->body.items[i]->kind == S_GEMM && s->body.items[i]->a_regs && s->body.items[i]->wg_pending)
      return true;
  return false;
}

/* Declares held_a's array, and the number of SMs, in the block of
 * pipelined loop s, for its gemm that needs them. */
static void held_a_loop(E *e, const tl_stmt *s) {
  for (int i = 0; i < s->body.n; i++) {
    const tl_stmt *g = s->body.items[i];
    if (g->kind != S_GEMM || !g->a_regs || !g->wg_pending)
      continue;
    line(e, "unsigned %s[2][%" PRId64 "][%" PRId64 "][4] = {}, tl_nsmid;", held_a(e, g),
         g->A->dims[1] / (tl_dtype_size(g->A->dtype) == 1 ? 32 : 16), g->C->mma_mi);
    line(e, "asm volatile(\"mov.u32 %%0, %%%%nsmid;\" : \"=r\"(tl_nsmid));");
  }
}

/* (op_gemm_wgmma: everything up to the commit, in a block left open: wgmma_close) */
static void wgmma_issue(E *e, const tl_stmt *s) {
  const tl_sym *A = s->A, *B = s->B, *C = s->C;
  int es = (int)tl_dtype_size(A->dtype), kstep = es == 1 ? 32 : 16;
  int64_t K = A->dims[1], N = C->dims[1], nacc = N / 2, MI = C->mma_mi, NW = C->mma_wm;
  bool ints = C->dtype == TL_INT32;
  const char *ty = tl_mma_ptx_type(A->dtype), *cty = tl_mma_ptx_type(ints ? TL_INT32 : TL_FLOAT32);
  line(e, "{");
  e->indent++;
  if (s->a_regs)
    line(e, "const unsigned tl_sb = tl_smem_addr(s_%s);", B->name);
  else
    line(e, "const unsigned tl_sa = tl_smem_addr(s_%s), tl_sb = tl_smem_addr(s_%s), tl_wr = (unsigned)tl_tid / 128u * 64u;",
         A->name, B->name);
  int set = e->held ? e->held - 1 : 0, other = e->held ? 1 - set : 0;
  const char *ta = s->a_regs && s->wg_pending ? S("%s[%d]", held_a(e, s), set) : "tl_a";
  if (s->a_regs) { /* every k step's A fragments, written before the fence (an unpacked A is converted here) */
    line(e, "unsigned tl_a[%" PRId64 "][%" PRId64 "][4];", K / kstep, MI);
    line(e, "#pragma unroll");
    line(e, "for (int tl_k = 0; tl_k < %" PRId64 "; tl_k++)", K / kstep);
    line(e, "#pragma unroll");
    line(e, "  for (int tl_i = 0; tl_i < %" PRId64 "; tl_i++) {", MI);
    e->indent += 2;
    a_frag_regs(e, A, "tl_a[tl_k][tl_i]", "tl_i", "tl_k * 16");
    e->indent -= 2;
    line(e, "  }");
    if (s->wg_pending) { /* into the registers the pending group reads (held_a), once it is done */
      line(e, "asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");");
      line(e, "#pragma unroll");
      line(e, "for (int tl_k = 0; tl_k < %" PRId64 "; tl_k++)", K / kstep);
      line(e, "#pragma unroll");
      line(e, "  for (int tl_i = 0; tl_i < %" PRId64 "; tl_i++) {", MI);
      line(e, "    unsigned *const tl_h = %s[tl_k][tl_i];", ta);
      line(e, "    const unsigned *const tl_o = %s[%d][tl_k][tl_i];", held_a(e, s), other);
      line(e, "    const unsigned *const tl_n = tl_a[tl_k][tl_i];");
      line(e, "    asm volatile(\"{\\n.reg .pred q;\\nsetp.eq.u32 q, %%12, 0;\\nselp.b32 %%0, %%4, %%8, q;\\n"
              "selp.b32 %%1, %%5, %%9, q;\\nselp.b32 %%2, %%6, %%10, q;\\nselp.b32 %%3, %%7, %%11, q;\\n}\" : "
              "\"=r\"(tl_h[0]), \"=r\"(tl_h[1]), \"=r\"(tl_h[2]), \"=r\"(tl_h[3]) : "
              "\"r\"(tl_o[0]), \"r\"(tl_o[1]), \"r\"(tl_o[2]), \"r\"(tl_o[3]), "
              "\"r\"(tl_n[0]), \"r\"(tl_n[1]), \"r\"(tl_n[2]), \"r\"(tl_n[3]), \"r\"(tl_nsmid));");
      line(e, "  }");
    }
  }
  pin_regs(e, C);
  /* the descriptors of k step 0 (and A's rows of this warpgroup); the others are offsets from them (desc_plus) */
  line(e, "const unsigned long long tl_db0 = %s;", s->trans_b ? kmajor_desc(e, B, "tl_sb", "0u", "0")
                                                                : S("tl_wgdesc(tl_sb, %" PRId64 "u, 1024u, 1u)", B->dims[0] * 128));
  if (!s->a_regs)
    line(e, "const unsigned long long tl_da0 = %s;", kmajor_desc(e, A, "tl_sa", "tl_wr", "0"));
  line(e, "asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");");
  line(e, "#pragma unroll");
  line(e, "for (int tl_k = 0; tl_k < %" PRId64 "; tl_k++) {", K / kstep);
  e->indent++;
  if (s->trans_b)
    line(e, "const unsigned long long tl_db = %s;", desc_plus(e, "tl_db0", kmajor_off(e, B, "0u", "tl_k")));
  else
    line(e, "const unsigned long long tl_db = %s;", desc_plus(e, "tl_db0", "tl_k * 2048u"));
  /* the operands after scale-d: 16-bit: scale A, scale B, transpose A (not with A from registers), transpose
   * B; float8: the scales */
  const char *tail = tl_ptx_wgmma_tail(e->a, es, ints, s->a_regs, s->trans_b);
  const char *regs = "";
  for (int64_t q = 0; q < nacc; q++)
    regs = S("%s%s%%%" PRId64, regs, q ? "," : "", q);
  for (int64_t i = 0; i < MI; i++) {
    const char *outs = "";
    for (int64_t q = 0; q < nacc; q++)
      outs = S("%s%s\"%s\"(r_%s[%" PRId64 "])", outs, q ? ", " : "", acc_constraint(C), C->name, i * nacc + q);
    line(e, "{");
    e->indent++;
    if (s->a_regs) { /* A's registers of instruction i: %nacc .. %nacc+3 */
      line(e, "const unsigned *const tl_ai = %s[tl_k][%" PRId64 "];", ta, i);
      const char *ar = S("{%%%" PRId64 ",%%%" PRId64 ",%%%" PRId64 ",%%%" PRId64 "}", nacc, nacc + 1, nacc + 2, nacc + 3);
      line(e, "asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%" PRId64 ", 0;\\n%s;\\n}\" : %s : "
              "\"r\"(tl_ai[0]), \"r\"(tl_ai[1]), \"r\"(tl_ai[2]), \"r\"(tl_ai[3]), \"l\"(tl_db), \"r\"(%s) : \"memory\");",
           nacc + 5, tl_ptx_wgmma(e->a, N, kstep, cty, ty, regs, ar, S("%%%" PRId64, nacc + 4), "p", tail), outs,
           s->clear_accum || folded(e, s) ? "tl_k" : "1");
    } else {
      line(e, "const unsigned long long tl_da = %s;", desc_plus(e, "tl_da0", kmajor_off(e, A, S("%" PRId64 "u", i * NW * 16), "tl_k")));
      line(e, "asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %%%" PRId64 ", 0;\\n%s;\\n}\" : %s : \"l\"(tl_da), "
              "\"l\"(tl_db), \"r\"(%s) : \"memory\");",
           nacc + 2, tl_ptx_wgmma(e->a, N, kstep, cty, ty, regs, S("%%%" PRId64, nacc), S("%%%" PRId64, nacc + 1), "p", tail),
           outs, s->clear_accum || folded(e, s) ? "tl_k" : "1");
    }
    e->indent--;
    line(e, "}");
  }
  e->indent--;
  line(e, "}");
}

/* Closes the block wgmma_issue opened. */
static void wgmma_close(E *e) {
  e->indent--;
  line(e, "}");
}

static void wgmma_wait(E *e, const tl_sym *C, int n) {
  line(e, "asm volatile(\"wgmma.wait_group.sync.aligned %d;\" ::: \"memory\");", n);
  if (!n)
    pin_regs(e, C);
}

/* The late gemm g of the pipelined loop being emitted (pass_overlap.c),
 * for the iteration `iter` (a C expression): its prefetched operands at
 * that iteration's stage. */
static void stage_pointers(E *e, const tl_stmt *loop, const char *stage);
static void wgmma_issue_late(E *e, const tl_stmt *g, const char *iter) {
  line(e, "{");
  e->indent++;
  stage_pointers(e, e->pipe, S("(%s) %% %" PRId64, iter, e->pipe->pipe_stages));
  wgmma_issue(e, g);
  wgmma_close(e);
  e->indent--;
  line(e, "}");
}

/* Warpgroup ping-pong (pass_wspec.c's pingpong; FlashAttention-3's
 * scheduler barriers): in the body of such a loop, warpgroup w of the
 * program's W issues each gemm on wgmma in its turn: it waits on named
 * barrier PP_BAR + w (bar.sync, 128 threads of 256) until warpgroup w - 1
 * (mod W) has issued its, issues and commits, then lets warpgroup w + 1 go
 * (bar.arrive on PP_BAR + w + 1, the other 128).  The tensor cores then run
 * one warpgroup's gemm after the other's instead of interleaving their
 * instructions, so one warpgroup's softmax runs while the next one's gemm
 * does, rather than every warpgroup's at once.  Every warpgroup issues the
 * same gemms in the same order (a gemm is a statement of the whole block,
 * under block-uniform conditions only), so the turns pair up: before the
 * loop warpgroup W - 1 gives warpgroup 0 its first turn, and after it
 * warpgroup 0 takes the turn left over, so that each barrier has seen as
 * many arrivals as waits whatever the trips (none included).  Only the
 * order of issue changes, never a result.  Barrier 1 is the program's
 * threads' (emit_wspec), 0 the block's. */
#define PP_BAR 2
static void pp_turn_wait(E *e) {
  if (e->pp_wg)
    line(e, "asm volatile(\"bar.sync %%0, 256;\" :: \"r\"(%d + (int)tl_tid / 128) : \"memory\");", PP_BAR);
}

static void pp_turn_pass(E *e) {
  if (e->pp_wg)
    line(e, "asm volatile(\"bar.arrive %%0, 256;\" :: \"r\"(%d + ((int)tl_tid / 128 + 1) %% %d) : \"memory\");", PP_BAR,
         e->pp_wg);
}

static void op_gemm_wgmma(E *e, const tl_stmt *s) {
  pp_turn_wait(e);
  wgmma_issue(e, s);
  if (s->ov_gemm) { /* pass_overlap.c: the previous iteration's late gemm (an empty group in the first), then
                     * wait for this one alone */
    wgmma_close(e);
    line(e, "asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");");
    line(e, "if (tl_c%d > 0)", e->pipe_id);
    /* a wspec loop's stages go on from tile to tile: iteration c's is tl_g = tl_cit + c's */
    wgmma_issue_late(e, s->ov_gemm, e->pipe->wspec ? "tl_g - 1" : S("tl_c%d - 1", e->pipe_id));
    line(e, "asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");");
    pp_turn_pass(e); /* the two gemms are one turn */
    wgmma_wait(e, s->C, 1);
    pin_regs(e, s->C);
    return;
  }
  if (e->pp_wg) {
    line(e, "asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");");
    pp_turn_pass(e);
    line(e, "asm volatile(\"wgmma.wait_group.sync.aligned %d;\" ::: \"memory\");", s->wg_pending);
  } else
    line(e, "asm volatile(\"wgmma.commit_group.sync.aligned;\\n\\twgmma.wait_group.sync.aligned %d;\" ::: \"memory\");",
         s->wg_pending);
  if (!s->wg_pending)
    pin_regs(e, s->C);
  wgmma_close(e);
}

/* gemm on AMD's matrix cores: C (TL_LAYOUT_MFMA, TL_LAYOUT_WMMA or
 * TL_LAYOUT_WMMA_GFX12) += A . B with v_mfma_f32_16x16x16{f16,bf16_1k}
 * (CDNA, wave64) or v_wmma_f32_16x16x16_{f16,bf16} (wave32; builtins
 * ..._w32 on gfx11, ..._w32_gfx12 on gfx12), one instruction per 16 x 16
 * tile of C and 16 of K.  Each lane loads its operand items from
 * LDS as tl_amd_operand_map says (A[row][k] stored [M, K], or [K, M] when
 * transposed; B[k][col] stored [K, N], or [N, K]), the rows and columns
 * from the tile origins of C's own map.  k_pack > 1 loads k_pack steps of
 * 16 at once and then issues their instructions back to back (when K is a
 * multiple of 16 * k_pack; else it acts as 1). */
static void op_gemm_amd(E *e, const tl_stmt *s) {
  const tl_sym *A = s->A, *B = s->B, *C = s->C;
  int lay = C->reg_layout;
  bool mfma = lay == TL_LAYOUT_MFMA, bf = A->dtype == TL_BFLOAT16;
  int64_t K = s->trans_a ? A->dims[0] : A->dims[1], MI = C->mma_mi, NI = C->mma_ni;
  int64_t W = tl_amd_layout_wave(lay), EI = tl_amd_layout_items(lay), items = tl_amd_operand_items(lay);
  int64_t kp = s->k_pack > 1 && K % (16 * s->k_pack) == 0 ? s->k_pack : 1;
  tl_amd_coord orow, ocol, amn, ak, bmn, bk;
  tl_amd_tile_origin(C, &orow, &ocol);
  tl_amd_operand_map(lay, false, &amn, &ak);
  tl_amd_operand_map(lay, true, &bmn, &bk);
  const char *fn = mfma ? (bf ? "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k" : "__builtin_amdgcn_mfma_f32_16x16x16f16")
                        : S("__builtin_amdgcn_wmma_f32_16x16x16_%s_w32%s", bf ? "bf16" : "f16",
                            lay == TL_LAYOUT_WMMA_GFX12 ? "_gfx12" : "");
  line(e, "{");
  e->indent++;
  line(e, "typedef %s tl_ab __attribute__((ext_vector_type(%" PRId64 ")));", bf ? "short" : "_Float16", items);
  line(e, "typedef float tl_cd __attribute__((ext_vector_type(%" PRId64 ")));", EI);
  line(e, "const int tl_lane = tl_tid %% %" PRId64 ";", W);
  if (s->clear_accum) {
    line(e, "#pragma unroll");
    line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r++) r_%s[tl_r] = 0.0f;", C->per_thread, C->name);
  }
  line(e, "#pragma unroll %s", K / (16 * kp) <= 4 ? "" : "1");
  line(e, "for (int tl_k = 0; tl_k < %" PRId64 "; tl_k += %" PRId64 ") {", K, 16 * kp);
  e->indent++;
  line(e, "tl_ab tl_a[%" PRId64 "][%" PRId64 "], tl_b[%" PRId64 "][%" PRId64 "];", kp, MI, kp, NI);
  const char *ld = bf ? "(short)" : "";
  for (int op = 0; op < 2; op++) {
    const tl_sym *X = op ? B : A;
    bool tr = op ? s->trans_b : s->trans_a;
    /* A: row = origin of tile (tl_i, 0) + mn; B: column = origin of tile (0, tl_j) + mn */
    const char *mn = op ? S("%s + %s", coord_str(e, &ocol, "tl_tid", S("tl_j * %" PRId64, EI)), coord_str(e, &bmn, "tl_lane", "tl_v"))
                        : S("%s + %s", coord_str(e, &orow, "tl_tid", S("tl_i * %" PRId64, EI * NI)), coord_str(e, &amn, "tl_lane", "tl_v"));
    const char *kk = S("(unsigned)(tl_k + tl_p * 16) + %s", coord_str(e, op ? &bk : &ak, "tl_lane", "tl_v"));
    /* A stored [M, K] (trans: [K, M]); B stored [K, N] (trans: [N, K]) */
    bool mn_first = op ? tr : !tr;
    const char *idx[2] = {S("(long long)(%s)", mn_first ? mn : kk), S("(long long)(%s)", mn_first ? kk : mn)};
    const char *el = S("s_%s[%s]", X->name, offset(e, X, idx));
    line(e, "#pragma unroll");
    line(e, "for (int tl_p = 0; tl_p < %" PRId64 "; tl_p++)", kp);
    line(e, "#pragma unroll");
    line(e, "  for (int %s = 0; %s < %" PRId64 "; %s++)", op ? "tl_j" : "tl_i", op ? "tl_j" : "tl_i", op ? NI : MI,
         op ? "tl_j" : "tl_i");
    line(e, "#pragma unroll");
    line(e, "    for (int tl_v = 0; tl_v < %" PRId64 "; tl_v++)", items);
    line(e, "      tl_%s[tl_p][%s][tl_v] = %s;", op ? "b" : "a", op ? "tl_j" : "tl_i",
         bf ? S("%s%s", ld, el) : S("__builtin_bit_cast(_Float16, %s)", el));
  }
  line(e, "#pragma unroll");
  line(e, "for (int tl_p = 0; tl_p < %" PRId64 "; tl_p++)", kp);
  line(e, "#pragma unroll");
  line(e, "  for (int tl_i = 0; tl_i < %" PRId64 "; tl_i++)", MI);
  line(e, "#pragma unroll");
  line(e, "    for (int tl_j = 0; tl_j < %" PRId64 "; tl_j++) {", NI);
  line(e, "      float *tl_c = &r_%s[(tl_i * %" PRId64 " + tl_j) * %" PRId64 "];", C->name, NI, EI);
  line(e, "      tl_cd tl_d;");
  line(e, "#pragma unroll");
  line(e, "      for (int tl_u = 0; tl_u < %" PRId64 "; tl_u++) tl_d[tl_u] = tl_c[tl_u];", EI);
  line(e, "      tl_d = %s(tl_a[tl_p][tl_i], tl_b[tl_p][tl_j], tl_d%s);", fn, mfma ? ", 0, 0, 0" : "");
  line(e, "#pragma unroll");
  line(e, "      for (int tl_u = 0; tl_u < %" PRId64 "; tl_u++) tl_c[tl_u] = tl_d[tl_u];", EI);
  line(e, "    }");
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
}

/* gemm: each thread computes its elements of C (the owner's for a register
 * C, else every T-th), in blocks of at most 32 so that their accumulators
 * stay in registers, with k outermost: C[i,j] += sum_k A[i,k] * B[k,j] in
 * float (int for int8), added to C and rounded once per call. */
static void op_gemm(E *e, const tl_stmt *s) {
  const tl_sym *A = s->A, *B = s->B, *C = s->C;
  int64_t M = C->dims[0], N = C->dims[1], K = s->trans_a ? A->dims[0] : A->dims[1];
  bool ints = A->dtype == TL_INT8 || A->dtype == TL_UINT8;
  const char *acc = ints ? "int" : "float";
  const tl_sym *owner = C->in_regs ? C : NULL;
  int64_t count = owner ? owner->per_thread : (M * N + e->T - 1) / e->T;
  int64_t rb = count < 32 ? count : 32;
  const char *elem = owner ? elem_of(e, owner, "tl_r") : S("(long long)tl_tid + (long long)tl_r * %" PRId64 "LL", e->T);
  const char *aik[2] = {"tl_i", "tl_k"}, *aki[2] = {"tl_k", "tl_i"}, *bkj[2] = {"tl_k", "tl_j"}, *bjk[2] = {"tl_j", "tl_k"};
  const char *av = load_conv(e, A->dtype, S("s_%s[%s]", A->name, offset(e, A, s->trans_a ? aki : aik)));
  const char *bv = load_conv(e, B->dtype, S("s_%s[%s]", B->name, offset(e, B, s->trans_b ? bjk : bkj)));
  if (s->use_mma && e->d != &dialect_cuda) {
    fail(e, s->pointer, "gemm on mma.sync is NVIDIA's; the passes chose it for a HIP target");
    return;
  }
  if (s->use_wgmma) {
    op_gemm_wgmma(e, s);
    return;
  }
  if (s->use_mma) {
    op_gemm_mma(e, s);
    return;
  }
  if (s->use_amd_mma) {
    if (e->d != &dialect_hip)
      fail(e, s->pointer, "gemm on AMD's matrix cores was chosen for a CUDA target");
    else
      op_gemm_amd(e, s);
    return;
  }
  line(e, "#pragma unroll");
  line(e, "for (int tl_rb = 0; tl_rb < %" PRId64 "; tl_rb += %" PRId64 ") {", count, rb);
  e->indent++;
  line(e, "%s tl_acc[%" PRId64 "];", acc, rb);
  line(e, "#pragma unroll");
  line(e, "for (int tl_u = 0; tl_u < %" PRId64 "; tl_u++) tl_acc[tl_u] = 0;", rb);
  line(e, "for (long long tl_k = 0; tl_k < %" PRId64 "LL; tl_k++) {", K);
  e->indent++;
  line(e, "#pragma unroll");
  line(e, "for (int tl_u = 0; tl_u < %" PRId64 "; tl_u++) {", rb);
  e->indent++;
  line(e, "const int tl_r = tl_rb + tl_u;");
  line(e, "const long long tl_e = %s;", elem);
  line(e, "if (tl_r < %" PRId64 " && tl_e < %" PRId64 "LL) {", count, M * N);
  e->indent++;
  line(e, "const long long tl_i = tl_e / %" PRId64 "LL, tl_j = tl_e %% %" PRId64 "LL;", N, N);
  if (ints)
    line(e, "tl_acc[tl_u] += (int)%s * (int)%s;", av, bv);
  else
    line(e, "tl_acc[tl_u] = %s(%s, %s, tl_acc[tl_u]);", dfn(e, "fmaf"), av, bv);
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
  line(e, "#pragma unroll");
  line(e, "for (int tl_u = 0; tl_u < %" PRId64 "; tl_u++) {", rb);
  e->indent++;
  line(e, "const int tl_r = tl_rb + tl_u;");
  line(e, "const long long tl_e = %s;", elem);
  line(e, "if (tl_r < %" PRId64 " && tl_e < %" PRId64 "LL) {", count, M * N);
  e->indent++;
  line(e, "const long long tl_i = tl_e / %" PRId64 "LL, tl_j = tl_e %% %" PRId64 "LL;", N, N);
  const char *cidx[2] = {"tl_i", "tl_j"};
  const char *old = s->clear_accum ? "0" : read_elem(e, C, cidx, "tl_r");
  const char *sum = ints ? S("(int)((unsigned)(%s) + (unsigned)tl_acc[tl_u])", old)
                         : round_to(e, (tl_type)C->dtype, S("(%s + tl_acc[tl_u])", old));
  write_elem(e, C, cidx, "tl_r", sum);
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
}

/* The accumulator of a reduction of values of dtype t. */
static tl_type acc_type(tl_dtype t) {
  if (t == TL_FLOAT64)
    return TL_FLOAT64;
  if (tl_dtype_is_float(t))
    return TL_FLOAT32;
  return tl_dtype_is_signed(t) || t == TL_BOOL ? TL_INT64 : TL_UINT64;
}

static const char *red_identity(E *e, tl_reduce_type rt, tl_type acc) {
  bool f = is_f(acc);
  const char *ld = dfn(e, "__longlong_as_double"), *fi = dfn(e, "__int_as_float");
  switch (rt) {
  case RED_MAX:
    return f ? (acc == TL_FLOAT64 ? S("%s(0xfff0000000000000LL)", ld) : S("%s((int)0xff800000)", fi))
             : (acc == TL_INT64 ? "(-9223372036854775807LL - 1)" : "0ull");
  case RED_MIN:
    return f ? (acc == TL_FLOAT64 ? S("%s(0x7ff0000000000000LL)", ld) : S("%s(0x7f800000)", fi))
             : (acc == TL_INT64 ? "9223372036854775807LL" : "18446744073709551615ull");
  case RED_BITAND:
    return acc == TL_INT64 ? "(-1LL)" : "18446744073709551615ull";
  default:
    return "0";
  }
}

/* acc = combine(acc, x) for reduction rt; x already in the acc type. x may
 * be evaluated twice (the integer max and min are conditional expressions),
 * so it must be free of side effects and never a warp shuffle: shfl_step
 * reads the partner's value into a variable first. */
static const char *red_step(E *e, tl_reduce_type rt, tl_type acc, const char *a, const char *x) {
  bool f = is_f(acc), dbl = acc == TL_FLOAT64;
  const char *ax = rt == RED_ABSSUM || rt == RED_ABSMAX
                       ? (f ? S("%s(%s)", dfn(e, dbl ? "fabs" : "fabsf"), x) : acc == TL_INT64 ? S("tl_abs_i64(%s)", x) : x)
                       : x;
  switch (rt) {
  case RED_SUM:
  case RED_ABSSUM:
    return acc == TL_INT64 ? S("(long long)((unsigned long long)(%s) + (unsigned long long)(%s))", a, ax)
                           : S("(%s + %s)", a, ax);
  case RED_MAX:
  case RED_ABSMAX:
    return f ? S("%s(%s, %s)", dfn(e, dbl ? "fmax" : "fmaxf"), a, ax) : S("(%s > %s ? %s : %s)", a, ax, a, ax);
  case RED_MIN:
    return f ? S("%s(%s, %s)", dfn(e, dbl ? "fmin" : "fminf"), a, ax) : S("(%s < %s ? %s : %s)", a, ax, a, ax);
  case RED_BITAND:
  case RED_BITOR:
  case RED_BITXOR:
    return S("(%s)((%s) %c (%s))", crep(acc), a, rt == RED_BITAND ? '&' : rt == RED_BITOR ? '|' : '^', ax);
  }
  return a;
}

/* One butterfly step of a warp reduction: every lane reads its partner's
 * accumulator (lane ^ off) in a statement of its own, then combines. A
 * shuffle with a full mask that only some lanes reach (as the operand of a
 * conditional expression would be) hangs the warp on sm_70 and later and
 * reads inactive lanes on AMD: the int32 row max of TileLang's top-k
 * (tests/gpu/programs/topk.json) never finished on an H100 that way. */
static void shfl_step(E *e, tl_reduce_type comb, tl_type acc, int64_t off) {
  line(e, "{");
  e->indent++;
  line(e, "const %s tl_peer = %s;", crep(acc), S(e->d->shfl_xor, "tl_acc", S("%" PRId64, off)));
  line(e, "tl_acc = %s;", red_step(e, comb, acc, "tl_acc", "tl_peer"));
  e->indent--;
  line(e, "}");
}

/* Stores the reduced value acc into dst element (idx, ridx), combining with
 * the old value when the reduce does not clear. */
static void red_store(E *e, const tl_stmt *s, tl_type acc, const char *const *idx, const char *ridx) {
  const tl_sym *d = s->dst->sym;
  const char *v = "tl_acc";
  if (!s->clear) {
    const char *old = conv(e, read_elem(e, d, idx, ridx), (tl_type)d->dtype, acc);
    tl_reduce_type comb = s->reduce_type == RED_ABSSUM ? RED_SUM : s->reduce_type == RED_ABSMAX ? RED_MAX : s->reduce_type;
    v = red_step(e, comb, acc, old, "tl_acc");
  }
  write_elem(e, d, idx, ridx, conv(e, v, acc, (tl_type)d->dtype));
}

/* Spills register fragment src to the shared scratch (as float, or as
 * double/long long for 8-byte values). */
static const char *spill(E *e, const tl_sym *src) {
  const char *st = tl_dtype_is_float(src->dtype) && src->dtype != TL_FLOAT64 ? "float"
                   : src->dtype == TL_FLOAT64                               ? "double"
                                                                            : "long long";
  line(e, "{");
  e->indent++;
  line(e, "%s *tl_sp = (%s *)(tl_smem + %" PRId64 ");", st, st, e->prog->scratch_offset);
  open_loop(e, src, product(src->dims, src->ndim));
  line(e, "tl_sp[tl_e] = (%s)r_%s[tl_r];", st, src->name);
  close_loop(e, src);
  e->indent--;
  line(e, "}");
  barrier_line(e);
  return st;
}

/* The second half of a row reduction: after a barrier, each element of dst
 * (by its owner, or cooperatively) combines the `nparts` partials of its
 * row left in tl_part (part w of row r at w * stride + r) with its old value. */
static void partials_to_dst(E *e, const tl_stmt *s, tl_type acc, tl_reduce_type comb, int nparts, int64_t stride) {
  barrier_line(e);
  int64_t dext[TL_MAX_DIMS] = {0};
  int dn = squeezed(s->dst, dext);
  const tl_sym *owner = reg_of(s->dst);
  open_loop(e, owner, product(dext, dn));
  const char **q = loop_idx(e, owner, dext, dn, "tl_q");
  line(e, "%s tl_acc = tl_part[tl_e];", crep(acc));
  for (int w = 1; w < nparts; w++)
    line(e, "tl_acc = %s;", red_step(e, comb, acc, "tl_acc", S("tl_part[%d * %" PRId64 "LL + tl_e]", w, stride)));
  red_store(e, s, acc, region_idx(e, s->dst, q), "tl_r");
  close_loop(e, owner);
}

static void op_reduce_rows(E *e, const tl_stmt *s) {
  const tl_sym *src = s->src->sym;
  tl_type acc = acc_type(src->dtype);
  int64_t n = src->dims[src->ndim - 1], per = src->per_thread, size = product(src->dims, src->ndim);
  int64_t rows = size / n;
  const char *at = crep(acc);
  tl_reduce_type comb = s->reduce_type == RED_ABSSUM ? RED_SUM : s->reduce_type == RED_ABSMAX ? RED_MAX : s->reduce_type;
  line(e, "{");
  e->indent++;
  line(e, "%s *tl_part = (%s *)(tl_smem + %" PRId64 ");", at, at, e->prog->scratch_offset);
  if (src->reg_layout == TL_LAYOUT_MMA) {
    /* a row's elements sit in one quad of lanes of each warp along N */
    int64_t M = src->dims[0], MI = src->mma_mi, NI = src->mma_ni;
    line(e, "const int tl_lane = tl_tid %% 32, tl_wm = tl_tid / 32 / %d, tl_wn = tl_tid / 32 %% %d;", src->mma_wn,
         src->mma_wn);
    line(e, "#pragma unroll");
    line(e, "for (int tl_h = 0; tl_h < %" PRId64 "; tl_h++) {", MI * 2);
    e->indent++;
    line(e, "%s tl_acc = %s;", at, red_identity(e, s->reduce_type, acc));
    line(e, "#pragma unroll");
    line(e, "for (int tl_j = 0; tl_j < %" PRId64 "; tl_j++)", NI * 2);
    line(e, "  tl_acc = %s;",
         red_step(e, s->reduce_type, acc, "tl_acc",
                  conv(e, S("r_%s[((tl_h / 2) * %" PRId64 " + tl_j / 2) * 4 + (tl_h %% 2) * 2 + tl_j %% 2]", src->name, NI),
                       (tl_type)src->dtype, acc)));
    shfl_step(e, comb, acc, 1);
    shfl_step(e, comb, acc, 2);
    const tl_sym *dst = s->dst->sym;
    if (tl_reduce_in_quads(s)) {
      /* every lane of the quad has its row's value: straight into the row registers */
      const char *v = "tl_acc";
      if (!s->clear) {
        const char *old = conv(e, S("r_%s[tl_h]", dst->name), (tl_type)dst->dtype, acc);
        v = red_step(e, comb, acc, old, "tl_acc");
      }
      line(e, "r_%s[tl_h] = %s;", dst->name, conv(e, v, acc, (tl_type)dst->dtype));
      e->indent--;
      line(e, "}");
      e->indent--;
      line(e, "}");
      return;
    }
    line(e, "if (tl_lane %% 4 == 0) tl_part[tl_wn * %" PRId64 "LL + %s + tl_lane / 4 + (tl_h %% 2) * 8] = tl_acc;", M,
         tile_row(e, src, "(unsigned)tl_wm", "(unsigned)tl_h / 2u"));
    e->indent--;
    line(e, "}");
    partials_to_dst(e, s, acc, comb, src->mma_wn, M);
    e->indent--;
    line(e, "}");
    return;
  }
  if (n % per == 0) {
    int64_t g = n / per; /* threads per row, a power of two up to 32 */
    line(e, "%s tl_acc = %s;", at, red_identity(e, s->reduce_type, acc));
    line(e, "#pragma unroll");
    line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r++)", per);
    line(e, "  if ((long long)tl_tid * %" PRId64 "LL + tl_r < %" PRId64 "LL) tl_acc = %s;", per, size,
         red_step(e, s->reduce_type, acc, "tl_acc", conv(e, S("r_%s[tl_r]", src->name), (tl_type)src->dtype, acc)));
    for (int64_t off = g / 2; off >= 1; off /= 2)
      shfl_step(e, comb, acc, off);
    line(e, "if (tl_tid %% %" PRId64 " == 0 && (long long)tl_tid * %" PRId64 "LL / %" PRId64 "LL < %" PRId64 "LL) "
            "tl_part[(long long)tl_tid * %" PRId64 "LL / %" PRId64 "LL] = tl_acc;",
         g, per, n, rows, per, n);
  } else { /* each thread holds whole rows */
    int64_t rpt = per / n;
    line(e, "for (int tl_w = 0; tl_w < %" PRId64 "; tl_w++) {", rpt);
    e->indent++;
    line(e, "const long long tl_row = (long long)tl_tid * %" PRId64 "LL + tl_w;", rpt);
    line(e, "if (tl_row >= %" PRId64 "LL) break;", rows);
    line(e, "%s tl_acc = %s;", at, red_identity(e, s->reduce_type, acc));
    line(e, "#pragma unroll");
    line(e, "for (int tl_c = 0; tl_c < %" PRId64 "; tl_c++) tl_acc = %s;", n,
         red_step(e, s->reduce_type, acc, "tl_acc",
                  conv(e, S("r_%s[tl_w * %" PRId64 " + tl_c]", src->name, n), (tl_type)src->dtype, acc)));
    line(e, "tl_part[tl_row] = tl_acc;");
    e->indent--;
    line(e, "}");
  }
  partials_to_dst(e, s, acc, comb, 1, 0);
  e->indent--;
  line(e, "}");
}

/* The value of src element at per-dimension indices idx, reading a spilled
 * register fragment from the scratch. */
static const char *src_value(E *e, const tl_region *r, const char *const *idx, const char *spilled) {
  if (spilled)
    return S("tl_sp[%s]", offset(e, r->sym, idx));
  return read_elem(e, r->sym, idx, NULL);
}

static void op_reduce(E *e, const tl_stmt *s) {
  if (tl_reduce_by_rows(s)) {
    op_reduce_rows(e, s);
    return;
  }
  const tl_region *src = s->src;
  tl_type acc = acc_type(src->sym->dtype);
  const char *spilled = reg_of(src) ? spill(e, src->sym) : NULL;
  line(e, "{");
  e->indent++;
  if (spilled)
    line(e, "const %s *tl_sp = (const %s *)(tl_smem + %" PRId64 ");", spilled, spilled, e->prog->scratch_offset);
  /* the outer (kept) dimensions of src, in order */
  int64_t oext[TL_MAX_DIMS] = {0};
  int on = 0;
  for (int d = 0; d < src->ndim; d++)
    if (d != s->dim)
      oext[on++] = src->ext[d];
  int64_t dext[TL_MAX_DIMS] = {0};
  int dn = squeezed(s->dst, dext);
  const tl_sym *owner = reg_of(s->dst);
  open_loop(e, owner, product(dext, dn));
  const char **oq = decode(e, "tl_e", oext, on, "tl_o");
  const char **dq = loop_idx(e, owner, dext, dn, "tl_q");
  line(e, "%s tl_acc = %s;", crep(acc), red_identity(e, s->reduce_type, acc));
  line(e, "for (long long tl_k = 0; tl_k < %" PRId64 "LL; tl_k++) {", src->ext[s->dim]);
  e->indent++;
  const char *q[TL_MAX_DIMS];
  for (int d = 0, k = 0; d < src->ndim; d++)
    q[d] = d == s->dim ? "tl_k" : oq[k++];
  /* region_idx wants squeezed indices: rebuild them from the full list */
  const char *sq[TL_MAX_DIMS];
  int m = 0;
  for (int d = 0; d < src->ndim; d++)
    if (src->ext[d] != 1)
      sq[m++] = q[d];
  const char *v = conv(e, src_value(e, src, region_idx(e, src, sq), spilled), (tl_type)src->sym->dtype, acc);
  line(e, "tl_acc = %s;", red_step(e, s->reduce_type, acc, "tl_acc", v));
  e->indent--;
  line(e, "}");
  red_store(e, s, acc, region_idx(e, s->dst, dq), "tl_r");
  close_loop(e, owner);
  e->indent--;
  line(e, "}");
  if (spilled)
    barrier_line(e);
}

static void op_cumsum(E *e, const tl_stmt *s) {
  const tl_region *src = s->src, *dst = s->dst;
  tl_type acc = acc_type(src->sym->dtype);
  const char *spilled = reg_of(src) ? spill(e, src->sym) : NULL;
  line(e, "{");
  e->indent++;
  if (spilled)
    line(e, "const %s *tl_sp = (const %s *)(tl_smem + %" PRId64 ");", spilled, spilled, e->prog->scratch_offset);
  /* every element of dst (its owner, or cooperatively) sums its prefix */
  int64_t ext[TL_MAX_DIMS] = {0};
  for (int d = 0; d < src->ndim; d++)
    ext[d] = src->ext[d];
  int64_t dext[TL_MAX_DIMS] = {0};
  int dn = squeezed(dst, dext);
  const tl_sym *owner = reg_of(dst);
  open_loop(e, owner, product(dext, dn));
  const char **full = decode(e, "tl_e", ext, src->ndim, "tl_f");
  const char **dq = loop_idx(e, owner, dext, dn, "tl_q");
  line(e, "%s tl_acc = %s;", crep(acc), red_identity(e, s->reduce_type, acc));
  if (s->reverse)
    line(e, "for (long long tl_k = %s; tl_k < %" PRId64 "LL; tl_k++) {", full[s->dim], src->ext[s->dim]);
  else
    line(e, "for (long long tl_k = 0; tl_k <= %s; tl_k++) {", full[s->dim]);
  e->indent++;
  const char *sq[TL_MAX_DIMS];
  int m = 0;
  for (int d = 0; d < src->ndim; d++)
    if (src->ext[d] != 1)
      sq[m++] = d == s->dim ? "tl_k" : full[d];
  const char *v = conv(e, src_value(e, src, region_idx(e, src, sq), spilled), (tl_type)src->sym->dtype, acc);
  line(e, "tl_acc = %s;", red_step(e, s->reduce_type, acc, "tl_acc", v));
  e->indent--;
  line(e, "}");
  write_elem(e, dst->sym, region_idx(e, dst, dq), "tl_r", conv(e, "tl_acc", acc, (tl_type)dst->sym->dtype));
  close_loop(e, owner);
  e->indent--;
  line(e, "}");
  if (spilled)
    barrier_line(e);
}

/* A loop over the elements of register fragment `owner` visits each of
 * them in every thread that holds a copy: an mma-rows fragment is the same
 * in the 4 lanes of a quad (ir.h).  An atomic (or a print) must happen
 * once per element: in the quad's first lane only. */
static const char *one_replica(const tl_sym *owner) {
  return owner && owner->reg_layout == TL_LAYOUT_MMA_ROWS ? "((unsigned)tl_tid % 4u == 0u)" : "true";
}

static void atomic_add_elem(E *e, const tl_sym *d, const char *const *idx, const char *v, const tl_sym *owner) {
  const char *p = S("&g_%s[%s]", d->name, offset(e, d, idx));
  const char *guard = S("%s && %s", one_replica(owner), in_bounds(e, d, idx));
  const char *add = dfn(e, "atomicAdd");
  switch (d->dtype) {
  case TL_FLOAT32: line(e, "if (%s) %s(%s, %s);", guard, add, p, v); break;
  case TL_FLOAT64: line(e, "if (%s) %s(%s, %s);", guard, add, p, v); break;
  case TL_INT32: line(e, "if (%s) %s(%s, %s);", guard, add, p, v); break;
  case TL_UINT32: line(e, "if (%s) %s(%s, %s);", guard, add, p, v); break;
  case TL_INT64: case TL_UINT64:
    line(e, "if (%s) %s((unsigned long long *)%s, (unsigned long long)(%s));", guard, add, p, v);
    break;
  case TL_FLOAT16: line(e, "if (%s) tl_atomic_add16(%s, %s, 0);", guard, p, v); break;
  case TL_BFLOAT16: line(e, "if (%s) tl_atomic_add16(%s, %s, 1);", guard, p, v); break;
  default:
    fail(e, NULL, "atomic_add into %s is not supported by the CUDA back end yet", tl_dtype_name(d->dtype));
  }
}

static void op_atomic_add(E *e, const tl_stmt *s) {
  const tl_region *dst = s->dst;
  const tl_sym *d = dst->sym;
  /* the added value is first rounded to the destination's dtype (that is
   * what the interpreter adds: round(old + value) of that dtype) */
  line(e, "{");
  e->indent++;
  int64_t ext[TL_MAX_DIMS] = {0};
  int n = squeezed(dst, ext);
  const tl_sym *owner = s->src ? reg_of(s->src) : NULL;
  if (!s->src)
    line(e, "const %s tl_v = %s;", crep((tl_type)d->dtype), conv(e, ex(e, s->value), s->value->type, (tl_type)d->dtype));
  open_loop(e, owner, product(ext, n));
  const char **q = loop_idx(e, owner, ext, n, "tl_q");
  const char *v = "tl_v";
  if (s->src)
    v = conv(e, read_elem(e, s->src->sym, region_idx(e, s->src, q), "tl_r"), (tl_type)s->src->sym->dtype,
             (tl_type)d->dtype);
  atomic_add_elem(e, d, region_idx(e, dst, q), v, owner);
  close_loop(e, owner);
  e->indent--;
  line(e, "}");
}

/* ---- statements -------------------------------------------------------------------------- */
static void emit_body(E *e, const tl_body *b, bool uniform);
static void emit_stmt(E *e, const tl_stmt *s, bool uniform);
static void region_pointer(E *e, const tl_sym *b);
static void emit_pipelined(E *e, const tl_stmt *s);
static void emit_prologue(E *e, const tl_stmt *s, int id);

/* ---- a dequantizing parallel loop, 8 to 32 elements at a time (pass_place.c: dequant_loop) ---- */
/* The packed reads of a vec_dequant loop's value, in the order vex meets
 * them, and the pair being computed. */
typedef struct {
  const tl_expr *reads[16];
  int n, at, pair;
  bool bf16; /* the pairs are bfloat16 (else float16) */
  const tl_expr *once[16]; /* tl_stmt.vec_once: the other reads, each read once as tl_r<k> */
  int nonce;
  const char *selb[16]; /* per packed read: a byte offset (C expression) added to the pair's byte selector, or NULL */
  const tl_subbyte_pair *pc[16]; /* per packed read: its pair's conversion (a pair map's), or NULL: v->pair's */
  bool word[16];        /* ... and pc's pair is in its word 16 bits apart already (tl_nb2h2, no prmt) */
} vec_state;

/* The C type of a load of n bytes (1 to 16) of packed elements. */
static const char *load_type(int n) {
  return n == 16 ? "tl_v16" : n == 8 ? "unsigned long long" : n == 4 ? "unsigned" : n == 2 ? "unsigned short"
                                                                                   : "unsigned char";
}

static bool is_packed_cast(const tl_expr *x);

static void vec_reads(const tl_expr *x, vec_state *v) {
  if (is_packed_cast(x)) {
    assert(v->n < 16);
    v->reads[v->n++] = x;
    return;
  }
  if (x->kind == E_INDEX) { /* the value's other reads (pass_place.c: vec_f16 reads no index of one) */
    if (v->nonce < 16)
      v->once[v->nonce++] = x;
    return;
  }
  for (int i = 0; i < x->nargs; i++)
    vec_reads(x->args[i], v);
}

/* The bits of element idx of a 16-bit buffer or tensor (0 outside a tensor). */
static const char *read_bits16(E *e, const tl_sym *s, const char *const *idx) {
  const char *raw = S("%s[%s]", storage(e, s), offset(e, s, idx));
  if (s->kind == SYM_TENSOR)
    return S("(%s ? %s : (unsigned short)0)", in_bounds(e, s, idx), raw);
  return raw;
}

static bool is_packed_cast(const tl_expr *x) {
  return x->kind == E_CALL && x->fn == FN_CAST && x->args[0]->kind == E_INDEX && is_packed(x->args[0]->type);
}

/* Is x an integer-valued constant of magnitude at most 512 (*c)?  Then
 * T(P) + c is exact in float16 for every packed integer P (at most 4 bits:
 * |P + c| <= 527), and so is tl_sb2h2's bias with c added (an integer of
 * magnitude below 2048), so the addition folds into the bias and the
 * add's one rounding is exact; bfloat16(P) + c is that float16 value
 * converted once. */
static bool exact_offset(const tl_expr *x, double *c) {
  if (x->kind != E_CONST || x->type == TL_BOOL)
    return false;
  double d = is_f(x->type) ? x->val.f : is_unsigned_i(x->type) ? (double)x->val.u : (double)x->val.i;
  if (!(d == floor(d) && fabs(d) <= 512))
    return false;
  *c = d;
  return true;
}

/* The pair of cast x of packed read number v->at (converted by tl_sb2h2)
 * plus the constant add. */
static const char *vex_packed(E *e, const tl_expr *x, vec_state *v, double add) {
  int k = v->at++;
  const tl_sym *P = x->args[0]->sym;
  tl_subbyte_pair c;
  if (v->pc[k])
    c = *v->pc[k];
  else
    tl_subbyte_f16_pair(tl_dtype_bits(P->dtype), is_signed_i((tl_type)P->dtype), v->pair, &c);
  unsigned lo = tl_f16_from_double(tl_f16_to_double((uint16_t)(c.bias & 0xffff)) + add);
  unsigned hi = tl_f16_from_double(tl_f16_to_double((uint16_t)(c.bias >> 16)) + add);
  const char *sel = v->selb[k] ? S("0x%04xu + %s * 0x0101u", c.sel, v->selb[k]) : S("0x%04xu", c.sel);
  const char *h = v->word[k] ? S("tl_nb2h2(tl_x%d, 0x%08xu, 0x%08xu, 0x%08xu)", k, c.mask, c.magic, lo | hi << 16)
                             : S("tl_sb2h2(tl_x%d ^ 0x%08xu, %s, 0x%08xu, 0x%08xu, 0x%08xu)", k, c.flip, sel, c.mask,
                                 c.magic, lo | hi << 16);
  return v->bf16 ? S("tl_h2bf2(%s)", h) : h;
}

/* Expression x (float16 or bfloat16: v->bf16) for elements 2p and 2p + 1
 * of the group (p = v->pair), as a pair (unsigned, the lower element in
 * the low half). */
static const char *vex(E *e, const tl_expr *x, vec_state *v) {
  switch (x->kind) {
  case E_CONST: {
    double d = is_f(x->type) ? x->val.f : is_unsigned_i(x->type) ? (double)x->val.u : (double)x->val.i;
    unsigned h = v->bf16 ? tl_bf16_from_double(d) : tl_f16_from_double(d);
    return S("0x%08xu", h | h << 16);
  }
  case E_INDEX:
    for (int k = 0; k < v->nonce; k++)
      if (v->once[k] == x)
        return S("tl_r%d", k);
    return S("((unsigned)%s * 0x10001u)", read_bits16(e, x->sym, index_codes(e, x)));
  case E_UNARY:
    return S("(%s ^ 0x80008000u)", vex(e, x->args[0], v));
  case E_CALL:
    if (!is_packed(x->args[0]->type))
      return vex(e, x->args[0], v);
    return vex_packed(e, x, v, 0);
  case E_BINARY: {
    double c = 0;
    if ((x->op == '+' || x->op == '-') && is_packed_cast(x->args[0]) && exact_offset(x->args[1], &c))
      return vex_packed(e, x->args[0], v, x->op == '+' ? c : -c); /* T(P) +- c: c folded into the bias */
    const char *a = vex(e, x->args[0], v); /* in this order: the packed reads count up */
    const char *b = vex(e, x->args[1], v);
    return S("tl_%s%s2(%s, %s)", v->bf16 ? "b" : "h", x->op == '+' ? "add" : x->op == '-' ? "sub" : "mul", a, b);
  }
  default:
    fail(e, x->pointer, "internal: expression not computable on float16 pairs");
    return "0";
  }
}

/* A vec_dequant loop: G = s->vec_dequant iterations along j at a time,
 * each packed operand loaded once (G elements), then per 8 elements: the
 * words of the 8, 4 pairs computed by vex, one 16-byte store. */
static void op_parallel_vec(E *e, const tl_stmt *s) {
  int64_t ext[TL_MAX_DIMS] = {0};
  int n = s->nvars, G = s->vec_dequant;
  for (int i = 0; i < n; i++)
    ext[i] = s->extents[i]->val.i;
  ext[n - 1] /= G;
  int64_t total = product(ext, n);
  if (total <= 8 * e->T)
    line(e, "#pragma unroll");
  coop_for(e, total);
  e->indent++;
  const char **q = decode(e, "tl_e", ext, n, "tl_p");
  for (int i = 0; i < n; i++)
    line(e, "const int %s = (int)%s%s;", vname(e, s->vars[i]), q[i], i == n - 1 ? S(" * %d", G) : "");
  const tl_stmt *saved = e->par;
  e->par = s;
  const tl_stmt *a = s->body.items[0];
  vec_state v = {.bf16 = a->lhs->sym->dtype == TL_BFLOAT16};
  vec_reads(a->value, &v);
  for (int k = 0; k < v.n; k++) {
    const tl_expr *r = v.reads[k]->args[0];
    const tl_sym *P = r->sym;
    int bits = tl_dtype_bits(P->dtype);
    line(e, "const %s tl_w%d = *(const %s *)&%s[%s];", load_type(G * bits / 8), k, load_type(G * bits / 8),
         storage(e, P), packed_byte(e, offset(e, P, index_codes(e, r)), 8 / bits));
  }
  const char *j = vname(e, s->vars[n - 1]);
  line(e, "const int tl_jb = %s;", j);
  /* the same for all G (tl_stmt.vec_once): read once, at the first */
  int nonce = v.nonce;
  v.nonce = 0;
  if (s->vec_once && nonce <= 16)
    for (; v.nonce < nonce; v.nonce++)
      line(e, "const unsigned tl_r%d = %s;", v.nonce, vex(e, v.once[v.nonce], &v));
  for (int sub = 0; sub < G / 8; sub++) {
    line(e, "{");
    e->indent++;
    line(e, "const int %s = tl_jb + %d; (void)%s;", j, 8 * sub, j);
    for (int k = 0; k < v.n; k++) { /* the 8 elements' bytes at the bottom of a word */
      int bits = tl_dtype_bits(v.reads[k]->args[0]->sym->dtype), sh = 8 * sub * bits;
      const char *w = G * bits / 8 == 16 ? S("tl_w%d.%s", k, sh < 64 ? "lo" : "hi") : S("tl_w%d", k);
      line(e, "const unsigned tl_x%d = (unsigned)(%s >> %d);", k, w, sh % 64);
    }
    for (int p = 0; p < 4; p++) {
      v.at = 0;
      v.pair = p;
      line(e, "const unsigned tl_h%d = %s;", p, vex(e, a->value, &v));
    }
    line(e, "tl_v16 tl_o;");
    line(e, "tl_o.lo = (unsigned long long)tl_h0 | (unsigned long long)tl_h1 << 32;");
    line(e, "tl_o.hi = (unsigned long long)tl_h2 | (unsigned long long)tl_h3 << 32;");
    line(e, "*(tl_v16 *)&%s[%s] = tl_o;", storage(e, a->lhs->sym), offset(e, a->lhs->sym, index_codes(e, a->lhs)));
    e->indent--;
    line(e, "}");
  }
  e->par = saved;
  e->indent--;
  line(e, "}");
}

/* Into tl_x<k> (declared by the caller, in an open block): the word of
 * packed read r (last index j itself) that holds the pair at column
 * tl_jt + tl_jr of the thread's row (op_parallel_pairs says how). */
static void pair_group_read(E *e, const tl_expr *r, int k, const char *j, vec_state *v) {
  const tl_sym *P = r->sym;
  int bits = tl_dtype_bits(P->dtype), per = 8 / bits;
  line(e, "const int %s = 0; /* the row's first element */", j);
  line(e, "const int tl_gb = (tl_jt / 8 + tl_jr / 8) * %d; /* the group's first byte in the row */", bits);
  if (P->dims[P->ndim - 1] * bits % 128 == 0) {
    line(e, "const tl_v16 tl_c = *(const tl_v16 *)&%s[(%s) / %d + tl_gb / 16 * 16];", storage(e, P),
         offset(e, P, index_codes(e, r)), per);
    line(e, "tl_x%d = (unsigned)((tl_gb %% 16 < 8 ? tl_c.lo : tl_c.hi) >> (tl_gb %% 8 * 8));", k);
  } else {
    line(e, "tl_x%d = (unsigned)*(const %s *)&%s[(%s) / %d + tl_gb];", k, load_type(bits), storage(e, P),
         offset(e, P, index_codes(e, r)), per);
  }
  if (bits == 4) /* the pair is byte (jt % 8) / 2 of the word: tl_sb2h2's byte selector takes it, no shift */
    v->selb[k] = "(unsigned)(tl_jt % 8 / 2)";
  else
    line(e, "tl_x%d >>= (unsigned)(tl_jt %% 8) * %du;", k, bits);
}

/* The pair of assignment a's value at column j = tl_jt + tl_jr, computed
 * from the words tl_x<k>, into register fragment D at local index r (an
 * even C expression) and r + 1. */
static void pair_result(E *e, const tl_stmt *a, const tl_sym *D, const char *j, vec_state *v, const char *r) {
  line(e, "const int %s = tl_jt + tl_jr; (void)%s;", j, j);
  v->at = v->pair = 0;
  line(e, "const unsigned tl_h = %s;", vex(e, a->value, v));
  if (D->packed)
    line(e, "r_%s[%s / 2] = tl_h;", D->name, r);
  else
    line(e, "r_%s[%s] = %s((unsigned short)tl_h); r_%s[%s + 1] = %s((unsigned short)(tl_h >> 16));", D->name, r,
         v->bf16 ? "tl_bf2f" : "tl_h2f", D->name, r, v->bf16 ? "tl_bf2f" : "tl_h2f");
}

/* A vec_dequant loop into a register fragment D of the mma layout
 * (vec_dequant 2: pass_place.c's reg_pairs_dst): each thread runs over its
 * own pairs of elements, local indices r and r + 1 (r even) at columns j
 * and j + 1 of one row, j = jt + jr even (mma_row_col_split: jt the
 * thread's part, 2 (lane % 4) plus its warp's columns, a multiple of 8;
 * jr local index r's part, a multiple of 8, known once the loop is
 * unrolled).  Each packed operand P (read P[..., j], its other indices free
 * of j) holds the pair in its aligned group of 8 elements (bits bytes) at
 * byte (j - j % 8) * bits / 8 of the row; the group is loaded from the
 * 16-byte chunk holding it where P's rows are whole chunks (the chunk's
 * address is the same for every pair of the thread's row that it serves,
 * so the compiler loads it once), else alone; shifted so that elements j
 * and j + 1 are its first two (4-bit elements: the pair is byte (j % 8) / 2
 * of the group, which tl_sb2h2's prmt selects, no shift), vex computes the
 * pair as the loop's value.
 * A packed D takes it as its word r / 2, an unpacked one as two floats. */
static void op_parallel_pairs(E *e, const tl_stmt *s) {
  const tl_stmt *a = s->body.items[0];
  const tl_sym *D = a->lhs->sym;
  line(e, "#pragma unroll");
  line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r += 2) {", D->per_thread);
  e->indent++;
  const char *parts[4];
  mma_row_col_split(e, D, "tl_r", parts);
  const char *i = vname(e, s->vars[0]), *j = vname(e, s->vars[1]);
  line(e, "const int %s = (int)(%s + %s); (void)%s;", i, parts[0], parts[1], i);
  line(e, "const int tl_jt = (int)(%s), tl_jr = (int)(%s);", parts[2], parts[3]);
  const tl_stmt *saved = e->par;
  e->par = s;
  vec_state v = {.bf16 = D->dtype == TL_BFLOAT16};
  vec_reads(a->value, &v);
  v.nonce = 0; /* the other reads in place: every pair has its own row (no vec_once) */
  for (int k = 0; k < v.n; k++) {
    line(e, "unsigned tl_x%d;", k);
    line(e, "{");
    e->indent++;
    pair_group_read(e, v.reads[k]->args[0], k, j, &v);
    e->indent--;
    line(e, "}");
  }
  pair_result(e, a, D, j, &v, "tl_r");
  e->par = saved;
  e->indent--;
  line(e, "}");
}

/* op_parallel_pairs where packed reads take their pairs through pair maps
 * (tl_stmt.pair_maps: last indices that permute j, such as weights stored
 * so that a thread's pairs fill whole 16-byte chunks, 16 bits apart).  The
 * loop over the thread's pairs is unrolled here, so that each pair's chunk,
 * word and bits are constants: a mapped read loads the chunk at the
 * thread's first chunk (its last index at j = jt, divided by the chunk's
 * elements, once per thread) plus the pair's, from its row (the same load
 * for every pair of the row in that chunk, which the compiler makes once),
 * takes the word, shifted right by whole bytes to the pair's lower
 * element's byte (its pair then 16 bits apart: tl_nb2h2), or keeps the
 * word for a pair in one byte (tl_sb2h2's prmt selects it).  The other
 * packed reads (last index j) are read as op_parallel_pairs reads them. */
static void op_parallel_pairs_mapped(E *e, const tl_stmt *s) {
  const tl_stmt *a = s->body.items[0];
  const tl_sym *D = a->lhs->sym;
  const char *i = vname(e, s->vars[0]), *j = vname(e, s->vars[1]);
  const tl_stmt *saved = e->par;
  e->par = s;
  vec_state v0 = {.bf16 = D->dtype == TL_BFLOAT16};
  vec_reads(a->value, &v0);
  const char *parts0[4];
  mma_row_col_split(e, D, "0", parts0);
  line(e, "{");
  e->indent++;
  line(e, "const int tl_jt = (int)(%s);", parts0[2]);
  const tl_pair_map *pms[16] = {0}; /* packed read k's map, or NULL (last index j) */
  for (int k = 0; k < v0.n; k++) { /* each mapped read's first chunk, in its row */
    const tl_expr *r = v0.reads[k]->args[0];
    for (int m = 0; m < s->npair_maps; m++)
      if (s->pair_maps[m].read == r)
        pms[k] = &s->pair_maps[m];
    if (pms[k]) {
      line(e, "int tl_cb%d;", k);
      line(e, "{ const int %s = tl_jt; (void)%s; tl_cb%d = (int)(%s) / %" PRId64 "; }", j, j, k,
           ex(e, r->args[r->nargs - 1]), pms[k]->chunk);
    }
  }
  for (int64_t rr = 0; rr < D->per_thread; rr += 2) {
    const char *parts[4];
    mma_row_col_split(e, D, S("%" PRId64, rr), parts);
    int64_t u = (rr / 4) % D->mma_ni;
    line(e, "{");
    e->indent++;
    line(e, "const int %s = (int)(%s + %s); (void)%s;", i, parts[0], parts[1], i);
    line(e, "const int tl_jr = (int)(%s);", parts[3]);
    vec_state v = {.bf16 = v0.bf16};
    vec_reads(a->value, &v);
    v.nonce = 0;
    tl_subbyte_pair pcs[16];
    for (int k = 0; k < v.n; k++) {
      const tl_expr *r = v.reads[k]->args[0];
      const tl_sym *P = r->sym;
      int bits = tl_dtype_bits(P->dtype), per = 8 / bits;
      const tl_pair_map *pm = pms[k]; /* vec_reads meets the reads in the same order each time */
      line(e, "unsigned tl_x%d;", k);
      line(e, "{");
      e->indent++;
      const tl_expr *last = r->args[r->nargs - 1];
      if (!pm && !(last->kind == E_NAME && last->sym == s->vars[1])) { /* a copy of the loop, its map the original's */
        fail(e, r->pointer, "internal: a packed read through a permuted index without its pair map");
        break;
      }
      if (!pm) {
        pair_group_read(e, r, k, j, &v);
      } else {
        const char **idx = index_codes(e, r);
        idx[r->nargs - 1] = "0LL"; /* the row's first element */
        int64_t lo = pm->lo[u], hi = pm->hi[u], la = lo * bits, cbytes = pm->chunk * bits / 8;
        int64_t ck = lo / pm->chunk, wd = (la % (cbytes * 8)) / 32; /* the pair's chunk after the thread's, its word */
        line(e, "const %s tl_c = *(const %s *)&%s[(%s) / %d + (tl_cb%d + %" PRId64 ") * %" PRId64 "];",
             load_type((int)cbytes), load_type((int)cbytes), storage(e, P), offset(e, P, idx), per, k, ck, cbytes);
        const char *w = cbytes == 16 ? S("(unsigned)(tl_c.%s >> %d)", wd < 2 ? "lo" : "hi", (int)(wd % 2) * 32)
                                     : S("(unsigned)(tl_c >> %d)", (int)wd * 32);
        bool sgn = is_signed_i((tl_type)P->dtype);
        if (hi * bits - la == 16) { /* 16 bits apart: shifted to the lower element's byte */
          int sh = (int)(la % 32) / 8 * 8, sl = (int)(la % 32) - sh;
          tl_subbyte_f16_at(bits, sgn, sl, sl, &pcs[k]);
          line(e, "tl_x%d = (%s ^ 0x%08xu) >> %d;", k, w, pcs[k].flip, sh);
          v.word[k] = true;
        } else { /* neighbours in one byte: prmt selects it */
          tl_subbyte_f16_pair(bits, sgn, (int)((la % 32) / (2 * bits)), &pcs[k]);
          line(e, "tl_x%d = %s;", k, w);
        }
        v.pc[k] = &pcs[k];
      }
      e->indent--;
      line(e, "}");
    }
    pair_result(e, a, D, j, &v, S("%" PRId64, rr));
    e->indent--;
    line(e, "}");
  }
  e->indent--;
  line(e, "}");
  e->par = saved;
}

/* A parallel loop that chooses by an affine comparison (pass_uniform.c):
 * the comparison at the point where it is hardest to satisfy, and at the
 * easiest, pick the loop without it when it holds everywhere or nowhere. */
static void op_parallel(E *e, const tl_stmt *s);
static void op_parallel_uniform(E *e, const tl_stmt *s) {
  const tl_expr *c = s->body.items[0]->value->args[0];
  bool ge = c->op == '>' || c->op == OP_GE;
  const int64_t *pts[2] = {ge ? s->uni_lo : s->uni_hi, ge ? s->uni_hi : s->uni_lo};
  line(e, "{");
  e->indent++;
  line(e, "bool tl_uni[2];");
  for (int k = 0; k < 2; k++) {
    line(e, "{");
    e->indent++;
    for (int v = 0; v < s->nvars; v++)
      line(e, "const int %s = %" PRId64 "; (void)%s;", vname(e, s->vars[v]), pts[k][v], vname(e, s->vars[v]));
    line(e, "tl_uni[%d] = %s(%s);", k, k ? "!" : "", ex(e, c));
    e->indent--;
    line(e, "}");
  }
  line(e, "if (tl_uni[0]) {");
  e->indent++;
  op_parallel(e, s->uni_all);
  e->indent--;
  line(e, "} else if (tl_uni[1]) {");
  e->indent++;
  op_parallel(e, s->uni_none);
  e->indent--;
  line(e, "} else {");
  e->indent++;
  op_parallel(e, s);
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
}

/* A parallel loop over a float32 register fragment F of the mma layout whose
 * one assignment stores F[i, j] (its own element) into a float16 element of
 * a shared buffer or tensor (an epilogue turning a gemm's C^T back through
 * shared memory, gemm_w4a16_t.json): each thread converts its elements two
 * at a time (local indices r and r + 1, cvt.rn.f16x2.f32, the same rounding
 * as one at a time) and stores the halves where the loop puts them.  Read
 * one at a time, a gemm's accumulators made ptxas serialize its wgmma
 * (C7514: "non wgmma instructions reading accumulator registers"). */
static bool pair_store_ok(const E *e, const tl_stmt *s, const tl_sym *F) {
  if (e->d != &dialect_cuda || !F || F->reg_layout != TL_LAYOUT_MMA || F->ndim != 2 || F->dtype != TL_FLOAT32 ||
      s->nvars != 2 || s->body.n != 1 || s->body.items[0]->kind != S_ASSIGN || s->body.items[0]->assign_op)
    return false;
  const tl_expr *l = s->body.items[0]->lhs, *v = s->body.items[0]->value;
  if (l->kind != E_INDEX || l->sym->dtype != TL_FLOAT16 || (l->sym->kind == SYM_BUFFER && l->sym->scope != SCOPE_SHARED))
    return false;
  if (v->kind != E_INDEX || v->sym != F || v->nargs != 2)
    return false;
  for (int d = 0; d < 2; d++)
    if (v->args[d]->kind != E_NAME || v->args[d]->sym != s->vars[d] || s->extents[d]->val.i != F->dims[d])
      return false;
  return true;
}

static void op_parallel_pair_store(E *e, const tl_stmt *s, const tl_sym *F) {
  const tl_expr *l = s->body.items[0]->lhs;
  line(e, "#pragma unroll");
  line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r += 2) {", F->per_thread);
  e->indent++;
  line(e, "const unsigned tl_pair = tl_f2h2(r_%s[tl_r], r_%s[tl_r + 1]);", F->name, F->name);
  const tl_stmt *saved = e->par;
  e->par = s;
  for (int k = 0; k < 2; k++) {
    const char *row, *col;
    mma_row_col(e, F, k ? "(tl_r + 1)" : "tl_r", &row, &col);
    line(e, "{");
    e->indent++;
    line(e, "const int %s = (int)(%s); (void)%s;", vname(e, s->vars[0]), row, vname(e, s->vars[0]));
    line(e, "const int %s = (int)(%s); (void)%s;", vname(e, s->vars[1]), col, vname(e, s->vars[1]));
    const char **idx = index_codes(e, l);
    const char *st = S("%s[%s] = (unsigned short)(tl_pair >> %d);", storage(e, l->sym), offset(e, l->sym, idx), 16 * k);
    if (l->sym->kind == SYM_TENSOR)
      line(e, "if (%s) %s", in_bounds(e, l->sym, idx), st);
    else
      line(e, "%s", st);
    e->indent--;
    line(e, "}");
  }
  e->par = saved;
  e->indent--;
  line(e, "}");
}

/* The statements of parallel loop s for one element, whose variables the
 * caller has declared; owner: the fragment whose elements the thread runs over. */
static void par_body(E *e, const tl_stmt *s, const tl_sym *owner) {
  const tl_stmt *saved = e->par;
  const tl_sym *saved_owner = e->par_owner;
  e->par = s;
  e->par_owner = owner;
  emit_body(e, &s->body, false);
  e->par = saved;
  e->par_owner = saved_owner;
}

/* Is x in expression y? */
static bool holds_expr(const tl_expr *y, const tl_expr *x) {
  if (y == x)
    return true;
  for (int i = 0; y && i < y->nargs; i++)
    if (holds_expr(y->args[i], x))
      return true;
  return false;
}

/* A parallel loop with a vec_read (pass_place.c's vec_read_of): thread
 * tl_tid's elements 4 at a time, local indices r0 .. r0 + 3; the read at
 * r0's variables loaded as one 16-byte vector (zeros where its guard, the
 * vector's first element's, fails), and the loop's statement run for each
 * of the 4 with that read the vector's element. */
static void op_parallel_vec_read(E *e, const tl_stmt *s, const tl_sym *owner, const int64_t *ext) {
  const tl_expr *x = s->vec_read;
  const tl_sym *t = x->sym;
  int n = s->nvars;
  int64_t total = product(ext, n);
  const char *vt = t->dtype == TL_FLOAT32 ? "float4" : t->dtype == TL_INT32 ? "int4" : "uint4";
  line(e, "#pragma unroll");
  line(e, "for (int tl_r0 = 0; tl_r0 < %" PRId64 "; tl_r0 += 4) {", owner->per_thread);
  e->indent++;
  line(e, "const int tl_e0 = %s;", elem_of(e, owner, "tl_r0"));
  line(e, owner_covers(e, owner, total) ? "{" : "if (tl_e0 < %" PRId64 ") {", total);
  e->indent++;
  line(e, "%s tl_v4;", vt);
  line(e, "{");
  e->indent++;
  const char **q = decode(e, "tl_e0", ext, n, "tl_p");
  for (int i = 0; i < n; i++)
    line(e, "const int %s = (int)%s; (void)%s;", vname(e, s->vars[i]), q[i], vname(e, s->vars[i]));
  const char **idx = index_codes(e, x);
  line(e, "tl_v4 = %s ? *(const %s *)&%s[%s] : %s{};", in_bounds(e, t, idx), vt, storage(e, t), offset(e, t, idx), vt);
  e->indent--;
  line(e, "}");
  line(e, "const %s tl_vs[4] = {tl_v4.x, tl_v4.y, tl_v4.z, tl_v4.w};", crep((tl_type)t->dtype));
  line(e, "#pragma unroll");
  line(e, "for (int tl_q = 0; tl_q < 4; tl_q++) {");
  e->indent++;
  line(e, "const int tl_r = tl_r0 + tl_q, tl_e = tl_e0 + tl_q; (void)tl_r;");
  q = loop_idx(e, owner, ext, n, "tl_p");
  for (int i = 0; i < n; i++)
    line(e, "const int %s = (int)%s;", vname(e, s->vars[i]), q[i]);
  e->vec_read = x;
  e->vec_code = "tl_vs[tl_q]";
  par_body(e, s, owner);
  e->vec_read = NULL;
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
}

static void op_parallel(E *e, const tl_stmt *s) {
  if (s->vec_dequant == 2 && s->npair_maps) {
    op_parallel_pairs_mapped(e, s);
    return;
  }
  if (s->vec_dequant == 2) {
    op_parallel_pairs(e, s);
    return;
  }
  if (s->vec_dequant) {
    op_parallel_vec(e, s);
    return;
  }
  int64_t ext[TL_MAX_DIMS] = {0};
  for (int i = 0; i < s->nvars; i++)
    ext[i] = s->extents[i]->val.i;
  const tl_sym *owner = tl_body_owner(&s->body, s->nvars == 2);
  if (pair_store_ok(e, s, owner)) {
    op_parallel_pair_store(e, s, owner);
    return;
  }
  /* a loop pass_uniform.c copied keeps its original's vec_read: only the loop that holds it reads so */
  if (s->vec_read && owner && s->body.n == 1 && holds_expr(s->body.items[0]->value, s->vec_read)) {
    op_parallel_vec_read(e, s, owner, ext);
    return;
  }
  open_loop(e, owner, product(ext, s->nvars));
  const char **q = loop_idx(e, owner, ext, s->nvars, "tl_p");
  for (int i = 0; i < s->nvars; i++)
    line(e, "const int %s = (int)%s;", vname(e, s->vars[i]), q[i]);
  par_body(e, s, owner);
  close_loop(e, owner);
}

/* An "atomic" statement: one atomic read-modify-write by this thread (an
 * element outside its tensor is not touched, and "old" reads 0 for it). */
static void emit_atomic(E *e, const tl_stmt *s) {
  const tl_expr *l = s->lhs;
  const tl_sym *b = l->sym;
  tl_type dt = (tl_type)b->dtype;
  const char **idx = index_codes(e, l);
  const char *p = S("&%s[%s]", storage(e, b), offset(e, b, idx));
  const char *v = conv(e, ex(e, s->value), s->value->type, dt);
  const char *call;
  if (s->atomic == TL_ATOMIC_ADD && (dt == TL_FLOAT16 || dt == TL_BFLOAT16))
    call = S("tl_atomic_add16(%s, %s, %d)", p, v, dt == TL_BFLOAT16);
  else if (dt == TL_FLOAT16 || dt == TL_BFLOAT16) /* max, min */
    call = S("tl_atomic_mm16(%s, %s, %d, %d)", p, v, dt == TL_BFLOAT16, s->atomic == TL_ATOMIC_MAX);
  else if (s->atomic == TL_ATOMIC_ADD && (dt == TL_INT64 || dt == TL_UINT64))
    call = S("((%s)%s((unsigned long long *)%s, (unsigned long long)(%s)))", crep(dt), dfn(e, "atomicAdd"), p, v);
  else if (s->atomic == TL_ATOMIC_ADD)
    call = S("%s(%s, %s)", dfn(e, "atomicAdd"), p, v);
  else
    call = S("tl_atomic_%s((%s *)%s, (%s)(%s))", s->atomic == TL_ATOMIC_MAX ? "max" : "min", crep(dt), p, crep(dt), v);
  const char *guard = S("%s && %s", one_replica(e->par ? e->par_owner : NULL),
                        b->kind == SYM_TENSOR ? in_bounds(e, b, idx) : "true");
  if (s->sym) {
    line(e, "%s %s = 0;", crep(dt), vname(e, s->sym));
    line(e, "if (%s) %s = %s;", guard, vname(e, s->sym), call);
  } else
    line(e, "if (%s) (void)%s;", guard, call);
}

/* A C string literal's body for msg (printable ASCII, checked by the
 * parser), as a printf format: '\\', '"' escaped, '%' doubled. */
static const char *format_text(E *e, const char *msg) {
  char *out = tl_arena_alloc(e->a, 2 * strlen(msg) + 1), *o = out;
  for (const char *p = msg; *p; p++) {
    if (*p == '\\' || *p == '"' || *p == '%')
      *o++ = *p == '%' ? '%' : '\\';
    *o++ = *p;
  }
  *o = 0;
  return out;
}

/* print: one printf line per thread (or parallel iteration) that runs it;
 * device_assert: a printf and a trap when the condition is false.  On AMD
 * targets printf is clang's buffered one (the HIP prelude's __printf_alloc;
 * amdgpu.c passes -mprintf-kind=buffered): the HIP runtime prints the lines
 * after the kernel. */
static void emit_print(E *e, const tl_stmt *s) {
  const char *msg = s->msg ? format_text(e, s->msg) : "";
  const char *where = "[block (%d, %d, %d), thread (%d, %d, %d)]";
  const char *wargs = S("(int)%s, (int)%s, (int)%s, (int)%s, (int)%s, (int)%s", e->d->bid[0], e->d->bid[1],
                        e->d->bid[2], e->d->tid[0], e->d->tid[1], e->d->tid[2]);
  bool cuda = e->d == &dialect_cuda;
  if (s->kind == S_ASSERT) {
    line(e, "if (!((%s) != 0)) {", ex(e, s->value));
    line(e, "  printf(\"device_assert failed at %s %s%s%s\\n\", %s);", s->pointer, where, *msg ? ": " : "", msg, wargs);
    line(e, "  %s", cuda ? "asm volatile(\"trap;\");" : "__builtin_trap();");
    line(e, "}");
    return;
  }
  const char *once = one_replica(e->par ? e->par_owner : NULL); /* one line per element */
  if (!s->value) {
    line(e, "if (%s) printf(\"%s:%s%s\\n\", %s);", once, where, *msg ? " " : "", msg, wargs);
    return;
  }
  tl_type t = s->value->type;
  const char *fmt = is_f(t) ? (t == TL_FLOAT64 ? "%.17g" : "%.9g") : t == TL_BOOL ? "%d" : is_unsigned_i(t) ? "%llu" : "%lld";
  const char *cast = is_f(t) ? "double" : t == TL_BOOL ? "int" : is_unsigned_i(t) ? "unsigned long long" : "long long";
  line(e, "if (%s) printf(\"%s:%s%s %s\\n\", %s, (%s)(%s));", once, where, *msg ? " " : "", msg, fmt, wargs, cast,
       ex(e, s->value));
}

static void emit_assign(E *e, const tl_stmt *s, bool uniform) {
  const tl_expr *l = s->lhs;
  if (l->kind == E_NAME) {
    line(e, "%s = %s;", vname(e, l->sym), conv(e, ex(e, s->value), s->value->type, l->sym->type));
    return;
  }
  const tl_sym *b = l->sym;
  bool in_regs = b->kind == SYM_BUFFER && b->scope == SCOPE_FRAGMENT && b->in_regs;
  /* a float32 value stored as float16 or bfloat16 is rounded once, by the store's conversion (write_elem):
   * rounding it in float first (tl_rh) gives the same bits, and after a wgmma made ptxas serialize the gemm's
   * wgmma-groups (C7514: "non wgmma instructions reading accumulator registers") */
  bool store_rounds = !in_regs && s->value->type == TL_FLOAT32 && (b->dtype == TL_FLOAT16 || b->dtype == TL_BFLOAT16) &&
                      !(b->kind == SYM_BUFFER && b->scope == SCOPE_LOCAL);
  const char *v = store_rounds ? ex(e, s->value) : conv(e, ex(e, s->value), s->value->type, (tl_type)b->dtype);
  if (in_regs) {
    if (!e->par || !same_layout(e->par_owner, b)) {
      fail(e, s->pointer, "register fragment '%s' is written where its elements are not the thread's own", b->name);
      return;
    }
    line(e, "r_%s[tl_r] = %s;", b->name, v);
    return;
  }
  bool shared = b->kind == SYM_BUFFER && b->scope != SCOPE_LOCAL;
  /* lock-step: every thread reads before any writes the same buffer */
  if (shared && !e->par && (tl_expr_names(s->value, b) || tl_expr_names(l, b) )) {
    bool self_read = tl_expr_names(s->value, b);
    for (int i = 0; i < l->nargs && !self_read; i++)
      self_read = tl_expr_names(l->args[i], b);
    if (self_read) {
      if (!uniform) {
        fail(e, s->pointer, "an assignment that reads and writes shared buffer '%s' under a thread-dependent "
                            "condition cannot be made lock-step; read into an alloc_var first", b->name);
        return;
      }
      const char **idx = index_codes(e, l);
      line(e, "{");
      e->indent++;
      line(e, "const %s tl_v = %s;", crep((tl_type)b->dtype), v);
      for (int d = 0; d < b->ndim; d++)
        line(e, "const long long tl_i%d = %s;", d, idx[d]);
      barrier_line(e);
      const char *ii[TL_MAX_DIMS];
      for (int d = 0; d < b->ndim; d++)
        ii[d] = S("tl_i%d", d);
      write_elem(e, b, ii, NULL, "tl_v");
      e->indent--;
      line(e, "}");
      return;
    }
  }
  write_elem(e, b, index_codes(e, l), NULL, v);
}

/* ---- statements (the barriers: pass_barrier.c) ------------------------------------------- */
static void barrier_line(E *e) {
  if (e->prog->fence_async)
    line(e, "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");");
  line(e, "%s", e->barrier);
}

/* A view of a tensor: a pointer to the tensor's memory with the view's
 * dtype and dimensions (a view of a shared buffer is declared at the top,
 * at its buffer's offset: declare_buffers). */
static void emit_view(E *e, const tl_sym *v) {
  if (v->kind != SYM_TENSOR)
    return;
  line(e, "%s *const g_%s = (%s *)g_%s; (void)g_%s;", srep(v->dtype), v->name, srep(v->dtype), v->view_of->name,
       v->name);
  for (int d = 0; d < v->ndim; d++)
    line(e, "const long long g_%s_d%d = (long long)(%s); (void)g_%s_d%d;", v->name, d, ex(e, v->shape[d]), v->name, d);
}

static void cluster_barrier(E *e);

/* cluster_reduce (proto/tile-ir-v1.md 5.6): the block of cluster rank 0
 * gets the element-wise sum (max, min) of fragment X over the cluster's
 * blocks, in rank order; the others keep theirs.  Every block lays its
 * values out in its own shared memory (a register fragment: thread t's
 * element r at r * T + t of the scratch, 4 bytes each; a fragment in shared
 * memory as it is), a cluster barrier makes them visible cluster-wide
 * (arrive.release, wait.acquire), the threads of rank 0 read the other
 * blocks' copies through distributed shared memory (mapa, ld.shared::cluster:
 * the same layout in every block, so thread t reads the elements it holds)
 * and combine them in rank order, and a second cluster barrier keeps every
 * block's shared memory its own until rank 0 is done with it.  The
 * scratch's earlier readers are ordered by the barrier pass_barrier.c puts
 * before the statement. */
static void op_cluster_reduce(E *e, const tl_stmt *s) {
  const tl_sym *X = s->dst->sym;
  int64_t n = e->prog->cl_size;
  if (n <= 1) { /* a cluster of one block, or none (the targets without clusters): nothing to combine */
    line(e, "/* cluster_reduce %s: a cluster of one block */", X->name);
    return;
  }
  if (X->in_regs && X->stages > 1) {
    fail(e, s->pointer, "cluster_reduce of '%s', a fragment kept in two copies for a gemm left in flight, is not "
         "supported", X->name);
    return;
  }
  bool fl = X->dtype == TL_FLOAT32;
  const char *ty = fl ? "float" : "int", *op;
  if (s->reduce_type == RED_MAX)
    op = fl ? "fmaxf(tl_a, tl_b)" : "max(tl_a, tl_b)";
  else if (s->reduce_type == RED_MIN)
    op = fl ? "fminf(tl_a, tl_b)" : "min(tl_a, tl_b)";
  else
    op = fl ? "tl_a + tl_b" : "(int)((unsigned)tl_a + (unsigned)tl_b)";
  const char *word = fl ? "__uint_as_float(tl_w)" : "(int)tl_w";
  int64_t P = X->per_thread, N = 1;
  for (int d = 0; d < X->ndim; d++)
    N *= X->dims[d];
  line(e, "{ /* cluster_reduce %s of %s: into the block of rank 0, in rank order */",
       s->reduce_type == RED_MAX ? "max" : s->reduce_type == RED_MIN ? "min" : "sum", X->name);
  e->indent++;
  if (X->in_regs) {
    line(e, "%s *const tl_cs = (%s *)(tl_smem + %" PRId64 ");", ty, ty, e->prog->scratch_offset);
    line(e, "#pragma unroll");
    line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r++) tl_cs[tl_r * %" PRId64 " + tl_tid] = r_%s[tl_r];", P,
         e->T, X->name);
  } else {
    line(e, "%s *const tl_cs = (%s *)s_%s;", ty, ty, X->name);
  }
  cluster_barrier(e);
  line(e, "unsigned tl_crk;");
  line(e, "asm volatile(\"mov.u32 %%0, %%%%cluster_ctarank;\" : \"=r\"(tl_crk));");
  line(e, "if (tl_crk == 0) {");
  e->indent++;
  line(e, "const unsigned tl_cb = (unsigned)__cvta_generic_to_shared(tl_cs);");
  line(e, "#pragma unroll");
  line(e, "for (unsigned tl_q = 1; tl_q < %" PRId64 "u; tl_q++) {", n);
  e->indent++;
  line(e, "unsigned tl_ra;");
  line(e, "asm volatile(\"mapa.shared::cluster.u32 %%0, %%1, %%2;\" : \"=r\"(tl_ra) : \"r\"(tl_cb), \"r\"(tl_q));");
  if (X->in_regs) { /* every load of a rank in flight before its values are used */
    line(e, "unsigned tl_ws[%" PRId64 "];", P);
    line(e, "#pragma unroll");
    line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r++)", P);
    line(e, "  asm volatile(\"ld.shared::cluster.b32 %%0, [%%1];\" : \"=r\"(tl_ws[tl_r]) : \"r\"(tl_ra + 4u * "
         "(unsigned)(tl_r * %" PRId64 " + tl_tid)) : \"memory\");", e->T);
    line(e, "#pragma unroll");
    line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r++) {", P);
    line(e, "  const unsigned tl_w = tl_ws[tl_r];");
    line(e, "  const %s tl_a = r_%s[tl_r], tl_b = %s;", ty, X->name, word);
    line(e, "  r_%s[tl_r] = %s;", X->name, op);
    line(e, "}");
  } else {
    line(e, "for (int tl_e = tl_tid; tl_e < %" PRId64 "; tl_e += %" PRId64 ") {", N, e->T);
    line(e, "  unsigned tl_w;");
    line(e, "  asm volatile(\"ld.shared::cluster.b32 %%0, [%%1];\" : \"=r\"(tl_w) : \"r\"(tl_ra + 4u * "
         "(unsigned)tl_e) : \"memory\");");
    line(e, "  const %s tl_a = tl_cs[tl_e], tl_b = %s;", ty, word);
    line(e, "  tl_cs[tl_e] = %s;", op);
    line(e, "}");
  }
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
  cluster_barrier(e);
  e->indent--;
  line(e, "}");
}

/* Emits one statement.  `uniform`: every thread of the block runs it (so a
 * barrier may be placed around it).  Statements under thread-dependent
 * control are handled as a whole by their uniform ancestor. */
static void emit_stmt_body(E *e, const tl_stmt *s, bool uniform);
static void emit_stmt(E *e, const tl_stmt *s, bool uniform) {
  if (s->barrier_before)
    barrier_line(e);
  emit_stmt_body(e, s, uniform);
}

/* emit_stmt without the barrier before the statement (a caller that places it: emit_body, before a loop
 * in slices). */
static void emit_stmt_body(E *e, const tl_stmt *s, bool uniform) {
  switch (s->kind) {
  case S_ALLOC:
    if (s->sym->scope == SCOPE_LOCAL) {
      int64_t n = 1;
      for (int d = 0; d < s->sym->ndim; d++)
        n *= s->sym->dims[d];
      line(e, "%s l_%s[%" PRId64 "];", crep((tl_type)s->sym->dtype), s->sym->name, n);
      region_pointer(e, s->sym);
    }
    return; /* shared and fragments are declared at the top */
  case S_VIEW:
    emit_view(e, s->sym);
    return;
  case S_ALLOC_VAR:
    if (s->value)
      line(e, "%s %s = %s;", crep((tl_type)s->sym->dtype), vname(e, s->sym),
           conv(e, ex(e, s->value), s->value->type, (tl_type)s->sym->dtype));
    else
      line(e, "%s %s = 0;", crep((tl_type)s->sym->dtype), vname(e, s->sym));
    break;
  case S_LET:
    line(e, "const %s %s = %s;", crep(s->sym->type), vname(e, s->sym), ex(e, s->value));
    break;
  case S_ASSIGN: emit_assign(e, s, uniform); break;
  case S_ATOMIC: emit_atomic(e, s); break;
  case S_PRINT: case S_ASSERT: emit_print(e, s); break;
  case S_COPY: op_copy(e, s, uniform); break;
  case S_FILL: op_fill(e, s); break;
  case S_GEMM:
    if (!s->ov_late) /* a late gemm is issued after its loop's other gemm, one iteration on */
      op_gemm(e, s);
    break;
  case S_REDUCE: op_reduce(e, s); break;
  case S_CUMSUM: op_cumsum(e, s); break;
  case S_CLUSTER_REDUCE: op_cluster_reduce(e, s); break;
  case S_ATOMIC_ADD: op_atomic_add(e, s); break;
  case S_PARALLEL:
    if (s->uni_all)
      op_parallel_uniform(e, s);
    else
      op_parallel(e, s);
    break;
  case S_SYNC_THREADS:
    barrier_line(e);
    if (s->fence) { /* the block's earlier global accesses, then its later ones, ordered device-wide */
      line(e, "%s();", dfn(e, "__threadfence"));
      barrier_line(e);
    }
    return;
  case S_ANNOTATE_LAYOUT:
  case S_USE_SWIZZLE:
    return; /* hints: no effect on results; used by later passes */
  case S_IF: {
    if (s->value->kind == E_CONST) {
      bool take = is_f(s->value->type) ? s->value->val.f != 0 : s->value->val.i != 0;
      emit_body(e, take ? &s->body : &s->else_body, uniform);
      return;
    }
    bool inner_uniform = uniform && !tl_expr_varying(s->value);
    line(e, "if ((%s) != 0) {", ex(e, s->value));
    e->indent++;
    emit_body(e, &s->body, inner_uniform);
    e->indent--;
    if (s->has_else && s->else_body.n) {
      line(e, "} else {");
      e->indent++;
      emit_body(e, &s->else_body, inner_uniform);
      e->indent--;
    }
    line(e, "}");
    break;
  }
  case S_LOOP: {
    if (s->pipe) {
      emit_pipelined(e, s);
      return;
    }
    bool inner_uniform = uniform && !tl_expr_varying(s->start) && !tl_expr_varying(s->extent) && !tl_expr_varying(s->step);
    int id = e->uid++;
    line(e, "{");
    e->indent++;
    line(e, "const long long tl_n%d = (long long)(%s);", id, ex(e, s->extent));
    line(e, "const long long tl_s%d = (long long)(%s), tl_d%d = (long long)(%s);", id, ex(e, s->start), id,
         ex(e, s->step));
    if (s->loop_kind == LOOP_UNROLL && s->extent->kind == E_CONST)
      line(e, "#pragma unroll");
    line(e, "for (long long tl_c%d = 0; tl_c%d < tl_n%d; tl_c%d++) {", id, id, id, id);
    e->indent++;
    line(e, "const int %s = (int)(tl_s%d + tl_c%d * tl_d%d);", vname(e, s->var), id, id, id);
    emit_body(e, &s->body, inner_uniform);
    if (s->barrier_end) /* the next iteration runs the body again */
      barrier_line(e);
    e->indent--;
    line(e, "}");
    e->indent--;
    line(e, "}");
    break;
  }
  }
}

/* ---- bulk tensor copies (pass_tma.c) ------------------------------------------------------- */
/* What a kernel with bulk tensor copies needs besides the prelude: the
 * tensor map type of its parameters (CUtensorMap: 128 opaque bytes,
 * 64-byte aligned) and the wait on an mbarrier's phase. */
static const char *tma_prelude(E *e) {
  return S("typedef struct __attribute__((aligned(64))) { unsigned long long tl_q[16]; } tl_tensor_map;\n"
           "TL_DEV void tl_mbar_wait(unsigned bar, unsigned parity) {\n"
           "  unsigned done;\n"
           "  do {\n"
           "    asm volatile(\"{\\n.reg .pred p;\\n%s;\\nselp.u32 %%0, 1, 0, p;\\n}\"\n"
           "                 : \"=r\"(done) : \"r\"(bar), \"r\"(parity) : \"memory\");\n"
           "  } while (!done);\n"
           "}\n",
           tl_ptx_mbar_try_wait(e->a, "p", "%1", "%2"));
}

/* Bytes one stage of a TMA loop's copies brings: their buffers, whole. */
static int64_t tma_stage_bytes(const tl_stmt *loop) {
  int64_t bytes = 0;
  for (int i = 0; i < loop->body.n; i++) {
    const tl_stmt *c = loop->body.items[i];
    if (c->prefetch && c->tma) {
      uint64_t n = 1;
      for (int d = 0; d < c->dst->sym->ndim; d++)
        n *= (uint64_t)c->dst->sym->dims[d];
      bytes += (int64_t)tl_dtype_bytes(c->dst->sym->dtype, n);
    }
  }
  return bytes;
}

/* The bulk tensor copies of copy s into its buffer (s_ names pointing at
 * the stage), completing on the mbarrier at shared address tl_mb: one per
 * panel of a 128-byte-swizzled buffer (box[0] columns: 128 bytes), else
 * one.  Coordinates are the region's start, innermost first. */
static void emit_tma_copy(E *e, const tl_stmt *s) {
  const tl_tmap *m = &e->prog->tmaps[s->tma_map];
  const tl_region *src = s->src;
  const tl_sym *b = s->dst->sym;
  int64_t panel_elems = 1, panels = m->swizzle ? b->dims[b->ndim - 1] / m->box[0] : 1;
  for (int d = 0; d < b->ndim; d++)
    panel_elems *= b->dims[d];
  panel_elems /= panels;
  /* multicast (pass_cluster.c): this block's part, rows [r * part, (r + 1) * part) of the box's
   * outermost dimension over 1 (d0), at that offset in each panel of every block's stage */
  int d0 = 0;
  while (s->mcast && src->ext[d0] == 1)
    d0++;
  int64_t n = s->mcast ? e->prog->cl_size : 1, part = src->ext[d0] / n;
  const char *off = s->mcast ? S(" + tl_crank * %" PRId64 "u", (int64_t)tl_dtype_bytes(b->dtype, (uint64_t)(panel_elems / n))) : "";
  if (s->evict) { /* the copy's L2 policy ("eviction_policy"), its last operand */
    line(e, "{");
    e->indent++;
    line(e, "unsigned long long tl_pol;");
    line(e, "asm(\"%s;\" : \"=l\"(tl_pol));", tl_ptx_createpolicy(e->a, s->evict, "%0"));
  }
  for (int64_t p = 0; p < panels; p++) {
    const char *ops = "", *coords = "";
    for (int i = 0; i < m->rank; i++) {
      int d = m->rank - 1 - i;
      const char *lo = src->lo[d] ? ex(e, src->lo[d]) : "0";
      if (i == 0 && p)
        lo = S("(%s) + %" PRId64, lo, m->box[0] * p);
      if (s->mcast && d == d0)
        lo = S("(%s) + (int)tl_crank * %" PRId64, lo, part);
      if (i == 0 && m->packed > 1) /* bytes of packed elements (pass_tma.c: the box starts on a byte) */
        lo = S("(%s) / %d", lo, m->packed);
      coords = S("%s%s%%%d", coords, i ? ", " : "", (s->mcast ? 4 : 3) + i);
      ops = S("%s, \"r\"((int)(%s))", ops, lo);
    }
    const char *mask = s->mcast ? S(", \"h\"((unsigned short)%#llx)", (1ull << n) - 1) : ""; /* every block of the cluster */
    const char *hint = s->evict ? S("%%%d", (s->mcast ? 4 : 3) + m->rank) : NULL;
    line(e, "asm volatile(\"%s;\" :: \"r\"(tl_smem_addr(s_%s) + %" PRId64 "u%s), \"l\"((unsigned long long)&tl_tmap%d), "
            "\"r\"(tl_mb)%s%s%s : \"memory\");",
         tl_ptx_tma_load(e->a, m->rank, "%0", "%1", coords, "%2", s->mcast ? "%3" : NULL, hint), b->name,
         p * panel_elems * (int64_t)tl_dtype_size(b->dtype), off, s->tma_map, mask, ops, s->evict ? ", \"l\"(tl_pol)" : "");
  }
  if (s->evict) {
    e->indent--;
    line(e, "}");
  }
}

/* Panel p of TMA store s (emit_tma_store), tl_stg0, tl_y0 and tl_x0 in
 * scope: the thread's elements of the panel, or with `pend` the pairs
 * converted before (tl_pend[], a deferred store: emit_defer_convert),
 * staged, then stored by one thread. */
static void tma_store_panel(E *e, const tl_stmt *s, int64_t p, bool pend) {
  const tl_sym *f = s->src->sym, *t = s->dst->sym;
  int64_t es = (int64_t)tl_dtype_size(t->dtype), pc = 128 / es;
  bool pairs = es == 2, two = e->prog->epi_buffers == 2;
  line(e, "{");
  e->indent++;
  if (two) { /* the half the store two panels back read: free once that store has read it */
    line(e, "if (tl_tid == 0) asm volatile(\"cp.async.bulk.wait_group.read 1;\" ::: \"memory\");");
    barrier_line(e);
    line(e, "const unsigned tl_stg = tl_stg0 + (tl_epi & 1u) * %" PRId64 "u;", e->prog->epi_bytes / 2);
  } else {
    if (p) {
      line(e, "if (tl_tid == 0) asm volatile(\"cp.async.bulk.wait_group.read 0;\" ::: \"memory\");");
      barrier_line(e);
    }
    line(e, "const unsigned tl_stg = tl_stg0;");
  }
  line(e, "#pragma unroll");
  line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r += %d) {", f->per_thread, pairs ? 2 : 1);
  e->indent++;
  const char *row, *col;
  mma_row_col(e, f, "tl_r", &row, &col);
  line(e, "const unsigned tl_row = %s, tl_col = %s;", row, col);
  line(e, "if (tl_col / %" PRId64 "u == %" PRId64 "u) {", pc, p);
  e->indent++;
  line(e, "const unsigned tl_b = (tl_col %% %" PRId64 "u) * %" PRId64 "u;", pc, es);
  line(e, "const unsigned tl_a = tl_stg + tl_row * 128u + (((tl_b / 16u) ^ (tl_row %% 8u)) * 16u) + tl_b %% 16u;");
  const char *v0 = store_conv(e, t->dtype, conv(e, S("r_%s[tl_r]", f->name), (tl_type)f->dtype, (tl_type)t->dtype));
  if (pairs && (pend || t->dtype == TL_FLOAT16 || t->dtype == TL_BFLOAT16)) { /* one conversion of both halves */
    line(e, "asm volatile(\"st.shared.b32 [%%0], %%1;\" :: \"r\"(tl_a), \"r\"((unsigned)(%s)) : \"memory\");",
         pend ? "tl_pend[tl_r / 2]" : half_pair(e, f, t, "tl_r", true));
  } else if (pairs) {
    const char *v1 = store_conv(e, t->dtype, conv(e, S("r_%s[tl_r + 1]", f->name), (tl_type)f->dtype, (tl_type)t->dtype));
    line(e, "asm volatile(\"st.shared.b32 [%%0], %%1;\" :: \"r\"(tl_a), \"r\"((unsigned)(unsigned short)(%s) | "
            "((unsigned)(unsigned short)(%s) << 16)) : \"memory\");", v0, v1);
  } else {
    if (is_f((tl_type)t->dtype) && es == 4) /* its bits */
      v0 = S("__float_as_uint(%s)", v0);
    line(e, "asm volatile(\"st.shared.b%d [%%0], %%1;\" :: \"r\"(tl_a), \"%s\"((%s)(%s)) : \"memory\");", (int)(8 * es),
         es == 4 ? "r" : "h", es == 4 ? "unsigned" : "unsigned short", v0);
  }
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
  if (!e->prog->fence_async) /* else barrier_line fences */
    line(e, "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");");
  barrier_line(e);
  line(e, "if (tl_tid == 0) {");
  e->indent++;
  line(e, "asm volatile(\"cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%%0, {%%1, %%2}], [%%3];\" :: "
          "\"l\"((unsigned long long)&tl_tmap%d), \"r\"(tl_x0 + %" PRId64 "), \"r\"(tl_y0), \"r\"(tl_stg) : \"memory\");",
       s->store_map, p * pc);
  line(e, "asm volatile(\"cp.async.bulk.commit_group;\" ::: \"memory\");");
  e->indent--;
  line(e, "}");
  if (two)
    line(e, "tl_epi++;");
  e->indent--;
  line(e, "}");
}

/* The panels of 128 bytes of TMA store s's tile rows. */
static int64_t tma_store_panels(const tl_stmt *s) {
  return s->src->sym->dims[1] / (128 / (int64_t)tl_dtype_size(s->dst->sym->dtype));
}

/* A TMA store (pass_store.c): for each panel of 128 bytes of the tile's
 * columns, every thread writes its elements of the panel (mma layout:
 * its register index tl_r at row and column mma_row_col; the panel of a
 * register is known at compile time where the warps do not split the
 * columns) into the staging buffer in the 128-byte swizzle (the 16-byte
 * chunk of a row XORed with the row's index mod 8, as the tensor map
 * reads it), two 16-bit elements at a time; a proxy fence and a barrier
 * hand them to the async proxy; thread 0 stores the panel.  The next
 * panel first waits until that store has read the buffer; the statement
 * ends when the last store is complete.  A deferred store (store_defer)
 * only converts: emit_defer_convert. */
static void emit_defer_convert(E *e, const tl_stmt *s);
static void emit_tma_store(E *e, const tl_stmt *s) {
  if (s->store_defer) {
    emit_defer_convert(e, s);
    return;
  }
  line(e, "{");
  e->indent++;
  line(e, "const unsigned tl_stg0 = tl_smem_addr(tl_smem + %" PRId64 ");", e->prog->epi_offset);
  line(e, "const int tl_y0 = (int)(%s), tl_x0 = (int)(%s);", s->dst->lo[0] ? ex(e, s->dst->lo[0]) : "0",
       s->dst->lo[1] ? ex(e, s->dst->lo[1]) : "0");
  for (int64_t p = 0; p < tma_store_panels(s); p++)
    tma_store_panel(e, s, p, false);
  if (s->store_async) { /* the kernel's last statement: the kernel waits for the stores before it exits */
    e->indent--;
    line(e, "}");
    return;
  }
  line(e, "if (tl_tid == 0) asm volatile(\"cp.async.bulk.wait_group 0;\" ::: \"memory\");");
  e->indent--;
  line(e, "}");
  barrier_line(e);
}

/* ---- a deferred TMA store (pass_store.c: store_defer) ---------------------------------------
 * At the tile's end the fragment's pairs are converted into tl_pend[] (its
 * accumulators are the next tile's), with the tile's coordinates; the next
 * tile's wspec loop stages and stores panel p after its iteration p has
 * issued its gemm (emit_defer_in_loop), so that the tensor cores run while
 * the panel is written; the panels past its last iteration follow the loop
 * (emit_defer_after), and the last tile's come after the walk of the tiles
 * (emit_defer_rest). */
static const tl_stmt *deferred_store(const tl_program *p) {
  return p->body.n && p->body.items[p->body.n - 1]->store_defer ? p->body.items[p->body.n - 1] : NULL;
}

static void emit_defer_decls(E *e) {
  const tl_stmt *d = deferred_store(e->prog);
  if (d)
    line(e, "unsigned tl_pend[%" PRId64 "]; int tl_pend_on = 0, tl_py0 = 0, tl_px0 = 0; /* a deferred store's pairs */",
         d->src->sym->per_thread / 2);
}

static void emit_defer_convert(E *e, const tl_stmt *s) {
  line(e, "#pragma unroll");
  line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r += 2) tl_pend[tl_r / 2] = %s;", s->src->sym->per_thread,
       half_pair(e, s->src->sym, s->dst->sym, "tl_r", true));
  line(e, "tl_py0 = (int)(%s); tl_px0 = (int)(%s); tl_pend_on = 1;", s->dst->lo[0] ? ex(e, s->dst->lo[0]) : "0",
       s->dst->lo[1] ? ex(e, s->dst->lo[1]) : "0");
}

/* The deferred panels (when tl_pend_on): with id >= 0 panel p where
 * iteration p of loop id is the current one (`after`: past its last),
 * else all. */
static void defer_panels(E *e, const tl_stmt *d, int id, bool after) {
  line(e, "if (tl_pend_on) {");
  e->indent++;
  line(e, "const unsigned tl_stg0 = tl_smem_addr(tl_smem + %" PRId64 ");", e->prog->epi_offset);
  line(e, "const int tl_y0 = tl_py0, tl_x0 = tl_px0;");
  for (int64_t p = 0; p < tma_store_panels(d); p++) {
    if (id >= 0)
      line(e, after ? "if (tl_n%d <= %" PRId64 ")" : "if (tl_c%d == %" PRId64 ")", id, p);
    tma_store_panel(e, d, p, true);
  }
  e->indent--;
  line(e, "}");
}

/* In iteration tl_c<id> of wspec loop s, after its gemm was issued. */
static void emit_defer_in_loop(E *e, const tl_stmt *s, int id) {
  const tl_stmt *d = deferred_store(e->prog);
  if (d && tl_wspec_loop(e->prog) == s)
    defer_panels(e, d, id, false);
}

/* After wspec loop s (tl_n<id> iterations): the panels it did not reach. */
static void emit_defer_after(E *e, const tl_stmt *s, int id) {
  const tl_stmt *d = deferred_store(e->prog);
  if (!d || tl_wspec_loop(e->prog) != s)
    return;
  defer_panels(e, d, id, true);
  line(e, "tl_pend_on = 0;");
}

/* After the walk of the tiles: the last tile's panels. */
static void emit_defer_rest(E *e) {
  const tl_stmt *d = deferred_store(e->prog);
  if (d)
    defer_panels(e, d, -1, false);
}

/* Whether the kernel's last statement is a TMA store whose stores it does
 * not wait for (pass_store.c: store_async). */
static bool async_store_last(const tl_program *p) {
  return p->body.n && p->body.items[p->body.n - 1]->store_async;
}

/* A barrier of every thread of the cluster (pass_cluster.c), ordering
 * memory as a block barrier does. */
static void cluster_barrier(E *e) {
  if (e->prog->fence_async) /* as barrier_line: the threads' shared-memory writes visible to wgmma */
    line(e, "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");");
  line(e, "asm volatile(\"barrier.cluster.arrive.release;\\nbarrier.cluster.wait.acquire;\" ::: \"memory\");");
}

/* Whether the kernel has a loop that multicasts (pass_cluster.c). */
static bool multicasts(const tl_program *p) {
  for (int i = 0; i < p->body.n; i++)
    if (p->body.items[i]->kind == S_LOOP && p->body.items[i]->mcast)
      return true;
  return false;
}

/* The mbarrier of stage `stage` (a C expression) of TMA loop `loop`. */
static const char *mbar_of(E *e, const tl_stmt *loop, const char *stage) {
  return S("tl_mbar + 8u * (unsigned)(%d + (%s))", loop->mbar, stage);
}

/* The phase bits of a TMA loop's mbarriers: one word per loop, a bit per
 * stage (tl_walker). */
static tl_walk_act declare_phase(tl_stmt *s, void *user) {
  if (s->kind == S_LOOP && s->tma && !s->wspec)
    line(user, "unsigned tl_ph%d = 0;", s->mbar);
  return TL_WALK_GO;
}

/* The mbarriers, made ready by thread 0 before any copy, and their phase
 * bits. */
static void declare_mbarriers(E *e) {
  const tl_program *p = e->prog;
  if (!p->nmbar)
    return;
  line(e, "const unsigned tl_mbar = tl_smem_addr(tl_smem + %" PRId64 ");", p->mbar_offset);
  line(e, "if (tl_tid == 0) {");
  e->indent++;
  /* one arrival completes a phase (the thread that expects the bytes), or,
   * on pass_wspec's "stage is free" mbarriers (the last), one per warp of
   * the program's threads, or one per thread (wspec_threads) */
  int nfull = p->nmbar, nempty = 0;
  int64_t arrivals = e->T / 32;
  for (int i = 0; i < p->body.n; i++)
    if (p->body.items[i]->kind == S_LOOP && p->body.items[i]->wspec) {
      nfull = p->body.items[i]->wspec_empty;
      nempty = (int)p->body.items[i]->pipe_stages;
      arrivals = p->body.items[i]->wspec_threads ? e->T : e->T / 32;
      if (p->body.items[i]->mcast) /* freed in every block of the cluster (release_stage) */
        arrivals *= p->cl_size;
    }
  line(e, "for (int tl_i = 0; tl_i < %d; tl_i++)", nfull);
  line(e, "  asm volatile(\"%s;\" :: \"r\"(tl_mbar + 8u * (unsigned)tl_i) : \"memory\");", tl_ptx_mbar_init(e->a, "%0", "1"));
  if (nempty) {
    line(e, "for (int tl_i = %d; tl_i < %d; tl_i++)", nfull, nfull + nempty);
    line(e, "  asm volatile(\"%s;\" :: \"r\"(tl_mbar + 8u * (unsigned)tl_i) : \"memory\");",
         tl_ptx_mbar_init(e->a, "%0", S("%" PRId64, arrivals)));
  }
  for (int i = 0; i < p->body.n; i++) { /* a pre copy's: full ones of one arrival, then its "free" ones */
    const tl_stmt *c = p->body.items[i];
    if (!c->wspec_pre)
      continue;
    line(e, "for (int tl_i = %d; tl_i < %d; tl_i++)", c->pre_mbar, c->pre_mbar + c->pre_stages);
    line(e, "  asm volatile(\"%s;\" :: \"r\"(tl_mbar + 8u * (unsigned)tl_i) : \"memory\");",
         tl_ptx_mbar_init(e->a, "%0", "1"));
    line(e, "for (int tl_i = %d; tl_i < %d; tl_i++)", c->pre_mbar + c->pre_stages, c->pre_mbar + 2 * c->pre_stages);
    line(e, "  asm volatile(\"%s;\" :: \"r\"(tl_mbar + 8u * (unsigned)tl_i) : \"memory\");",
         tl_ptx_mbar_init(e->a, "%0", S("%" PRId64, c->pre_threads ? e->T : e->T / 32)));
  }
  line(e, "asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");");
  e->indent--;
  line(e, "}");
  if (multicasts(p)) /* every block's mbarriers ready before any block copies into it */
    cluster_barrier(e);
  else
    line(e, "%s", e->d->barrier);
  tl_walk((tl_body *)&p->body, &(tl_walker){.pre = declare_phase}, e);
}

/* Points the shared buffers of a pipelined loop's prefetched copies at
 * pipeline stage `stage` (a C expression), shadowing their s_ names. */
static void stage_pointers(E *e, const tl_stmt *loop, const char *stage) {
  for (int i = 0; i < loop->body.n; i++) {
    const tl_stmt *c = loop->body.items[i];
    if (!c->prefetch)
      continue;
    const tl_sym *b = c->dst->sym;
    bool seen = false;
    for (int j = 0; j < i; j++)
      seen |= loop->body.items[j]->prefetch && loop->body.items[j]->dst->sym == b;
    if (seen)
      continue;
    int64_t n = 1;
    for (int d = 0; d < b->ndim; d++)
      n *= b->dims[d];
    if (is_packed((tl_type)b->dtype)) /* a stage of a packed buffer: its bytes */
      n = (int64_t)tl_dtype_bytes(b->dtype, (uint64_t)n);
    line(e, "%s *const s_%s = tl_base_%s + (long long)(%s) * %" PRId64 "LL; (void)s_%s;", srep(b->dtype), b->name,
         b->name, stage, n, b->name);
  }
}

/* The bulk tensor copies of one iteration of loop into stage `stage`, by
 * the thread that runs it, after it tells the stage's mbarrier how many
 * bytes they bring. */
static void tma_copies(E *e, const tl_stmt *loop, const char *stage) {
  line(e, "const unsigned tl_mb = %s;", mbar_of(e, loop, stage));
  line(e, "asm volatile(\"%s;\" :: \"r\"(tl_mb), \"r\"(%" PRId64 "u) : \"memory\");",
       tl_ptx_expect_tx(e->a, "%0", "%1"), tma_stage_bytes(loop));
  for (int i = 0; i < loop->body.n; i++)
    if (loop->body.items[i]->prefetch && loop->body.items[i]->tma)
      emit_tma_copy(e, loop->body.items[i]);
}

/* Points s_NAME at copy `copy` of rotating buffer b. */
static void rotate_pointer(E *e, const tl_sym *b, const char *copy) {
  int64_t n = 1;
  for (int d = 0; d < b->ndim; d++)
    n *= b->dims[d];
  line(e, "%s *const s_%s = tl_base_%s + (long long)(%s) * %" PRId64 "LL; (void)s_%s;", srep(b->dtype), b->name,
       b->name, copy, n, b->name);
}

/* Has rotate_pointers declared s_NAME of b already, for a statement of
 * loop before statement `upto` (a copy prefetched through registers into
 * it, or a gemm reading it)? */
static bool rotated_before(const tl_stmt *loop, int upto, const tl_sym *b) {
  for (int i = 0; i < upto; i++) {
    const tl_stmt *g = loop->body.items[i];
    if ((g->reg_prefetch && g->dst->sym == b) || (g->kind == S_GEMM && b->rotates && (g->A == b || g->B == b)))
      return true;
  }
  return false;
}

/* The copy of each rotating buffer (pass_pipeline.c: rotatable,
 * reg_prefetchable) that the iteration writes and reads: the operands of
 * the loop's wgmma gemm, the buffers of its copies prefetched through
 * registers; each once (a buffer prefetched through registers may be a
 * gemm's operand too: gemm_w4a16_splitk_tiled's activations where K is no
 * multiple of 8). */
static void rotate_pointers(E *e, const tl_stmt *loop, const char *copy) {
  for (int i = 0; i < loop->body.n; i++) {
    const tl_stmt *g = loop->body.items[i];
    if (g->reg_prefetch && !rotated_before(loop, i, g->dst->sym))
      rotate_pointer(e, g->dst->sym, copy);
    if (g->kind != S_GEMM)
      continue;
    const tl_sym *ops[2] = {g->A, g->B};
    for (int k = 0; k < 2; k++)
      if (ops[k]->rotates && !(k == 1 && g->A == g->B) && !rotated_before(loop, i, ops[k]))
        rotate_pointer(e, ops[k], copy);
  }
}

/* The loop over the elements thread tl_tid holds of reg_prefetch copy c,
 * in registers tl_rqID[r]: loading them from the tensor (load) or storing
 * them into the buffer s_NAME. */
static void reg_prefetch_elems(E *e, const tl_stmt *c, int id, bool load) {
  int64_t ext[TL_MAX_DIMS] = {0};
  int n = squeezed(c->dst, ext);
  int64_t total = product(ext, n), per = (total + e->T - 1) / e->T;
  line(e, "#pragma unroll");
  line(e, "for (int tl_r = 0; tl_r < %" PRId64 "; tl_r++) {", per);
  e->indent++;
  line(e, "const int tl_e = tl_tid + tl_r * %" PRId64 ";", e->T);
  line(e, "if (tl_e < %" PRId64 ") {", total);
  e->indent++;
  const char **q = decode(e, "tl_e", ext, n, "tl_q");
  const tl_sym *src = c->src->sym, *dst = c->dst->sym;
  if (load)
    line(e, "tl_rq%d[tl_r] = %s;", id, conv(e, read_elem(e, src, region_idx(e, c->src, q), NULL), (tl_type)src->dtype,
                                            (tl_type)dst->dtype));
  else
    write_elem(e, dst, region_idx(e, c->dst, q), NULL, S("tl_rq%d[tl_r]", id));
  e->indent--;
  line(e, "}");
  e->indent--;
  line(e, "}");
}

/* Copies prefetched through registers (pass_pipeline.c: reg_prefetchable):
 * at = 0 before the loop (iteration 0's elements straight into copy 0),
 * 1 as an iteration starts (iteration c + 1's into registers), 2 as it
 * ends (the registers into copy (c + 1) % 2). */
static void reg_prefetches(E *e, const tl_stmt *loop, int id, int at) {
  const char *var = vname(e, loop->var);
  for (int i = 0; i < loop->body.n; i++) {
    const tl_stmt *c = loop->body.items[i];
    if (!c->reg_prefetch)
      continue;
    int64_t ext[TL_MAX_DIMS] = {0};
    int64_t total = product(ext, squeezed(c->dst, ext)), per = (total + e->T - 1) / e->T;
    if (at == 1)
      line(e, "%s tl_rq%d[%" PRId64 "];", crep((tl_type)c->dst->sym->dtype), i, per);
    line(e, at ? "if (tl_c%d + 1 < tl_n%d) {" : "if (0 < tl_n%d) {", id, id);
    e->indent++;
    if (at == 0) {
      line(e, "const int %s = (int)(tl_s%d); (void)%s;", var, id, var);
      rotate_pointer(e, c->dst->sym, "0");
      op_copy(e, c, false);
    } else if (at == 1) {
      line(e, "const int %s = (int)(tl_s%d + tl_c%d + 1); (void)%s;", var, id, id, var);
      reg_prefetch_elems(e, c, i, true);
    } else {
      rotate_pointer(e, c->dst->sym, S("(tl_c%d + 1) %% 2", id));
      reg_prefetch_elems(e, c, i, false);
    }
    e->indent--;
    line(e, "}");
  }
}

/* The prefetches of one iteration into stage `stage`: cp.async copies by
 * every thread; bulk tensor copies by thread 0. */
static void prefetch_copies(E *e, const tl_stmt *loop, const char *stage) {
  for (int i = 0; i < loop->body.n; i++)
    if (loop->body.items[i]->prefetch && !loop->body.items[i]->tma)
      emit_async_copy(e, loop->body.items[i]);
  if (!loop->tma)
    return;
  line(e, "if (tl_tid == 0) {");
  e->indent++;
  tma_copies(e, loop, stage);
  e->indent--;
  line(e, "}");
}

/* After a pipelined loop: waits for the wgmma groups its gemm left in
 * flight (pass_pipeline.c's wg_drain), and pins their accumulators. */
static void drain_wgmma(E *e, const tl_stmt *s) {
  if (!s->wg_drain)
    return;
  line(e, "asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");");
  for (int i = 0; i < s->body.n; i++)
    if (s->body.items[i]->kind == S_GEMM && s->body.items[i]->wg_pending)
      pin_regs(e, s->body.items[i]->C);
}

/* ---- warp specialization (pass_wspec.c) ---------------------------------------------------- */
/* The "stage is free" mbarrier of stage `stage` of wspec loop `loop`. */
static const char *empty_of(E *e, const tl_stmt *loop, const char *stage) {
  return S("tl_mbar + 8u * (unsigned)(%d + (%s))", loop->wspec_empty, stage);
}

/* The kernel's wspec loop, or NULL. */
/* The block variables of block bid[] (C expressions, per axis) of a grid
 * of nb[] blocks, in the raster order of pass_raster.c. */
static void block_vars(E *e, const char *const *bid0, const char *const *nb0) {
  const tl_program *p = e->prog;
  /* in clusters over one axis (pass_cluster.c), the order is the clusters',
   * each block's variable on that axis its cluster's times the size plus
   * its rank, so that a cluster's blocks differ on that axis alone */
  const char *bid[3] = {bid0[0], bid0[1], bid0[2]}, *nb[3] = {nb0[0], nb0[1], nb0[2]};
  int a = p->persistent ? -1 : p->cl_axis;
  if (a >= 0) {
    bid[a] = S("(%s / %" PRId64 "u)", bid0[a], p->cl_size);
    nb[a] = S("(%s / %" PRId64 "u)", nb0[a], p->cl_size);
  }
  const char *v[3] = {NULL, NULL, NULL};
  if (p->raster_panel) {
    /* block rasterization (pass_raster.c): stripes of `panel` block rows
     * (or columns), walked column by column */
    int64_t panel = p->raster_panel;
    bool col = p->raster_column;
    line(e, "const unsigned tl_gx = %s, tl_gy = %s;", nb[col ? 1 : 0], nb[col ? 0 : 1]);
    line(e, "const unsigned tl_lin = %s + %s * %s;", bid[col ? 1 : 0], bid[col ? 0 : 1], nb[col ? 1 : 0]);
    line(e, "const unsigned tl_pan = tl_lin / (%" PRId64 "u * tl_gx), tl_rem = tl_lin %% (%" PRId64 "u * tl_gx);", panel, panel);
    line(e, "const unsigned tl_rows = tl_gy - tl_pan * %" PRId64 "u < %" PRId64 "u ? tl_gy - tl_pan * %" PRId64 "u : %" PRId64 "u;",
         panel, panel, panel, panel);
    v[col ? 1 : 0] = "(int)(tl_rem / tl_rows)";
    v[col ? 0 : 1] = S("(int)(tl_pan * %" PRId64 "u + tl_rem %% tl_rows)", panel);
    v[2] = S("(int)%s", bid[2]);
  } else {
    for (int i = 0; i < 3; i++)
      v[i] = i == 0 && p->reverse_x ? S("(int)(%s - 1u - %s)", nb[0], bid[0]) /* heaviest first (pass_raster.c) */
                                    : S("(int)%s", bid[i]);
  }
  for (int i = 0; i < 3; i++)
    if (p->block_vars[i] && i == a)
      line(e, "const int %s = %s * %" PRId64 " + (int)(%s %% %" PRId64 "u);", vname(e, p->block_vars[i]), v[i],
           p->cl_size, bid0[i], p->cl_size);
    else if (p->block_vars[i])
      line(e, "const int %s = %s;", vname(e, p->block_vars[i]), v[i]);
}

/* A persistent kernel (pass_wspec.c): the grid's tiles, walked by the
 * blocks started, each from its linear index, every (blocks started)-th
 * (so that a launch of the whole grid runs each tile once too); the
 * program's block variables of each.  Where the blocks' work grows with x
 * (reverse_x, pass_raster.c), the tiles are numbered x slowest (heaviest
 * first) and walked in rounds of (blocks started) tiles, every other round
 * in reverse, so that each block's work evens out
 * (longest-processing-time-first; in grid order a block takes the same few
 * x for all its tiles: causal attention with 22 x-blocks on 132 SMs ran at
 * half speed, with 8 on 132, b16 h32 s1024 d128, at 0.76 of this walk),
 * and the (y, z) pairs are taken in groups, each walked so before the
 * next: the fewest pairs whose tiles fill a whole number of round pairs
 * (lcm(x, 2 * blocks started) / x, at most all of them; the last group
 * takes the rest), so that the rounds' alternation evens out within each
 * group and the blocks at work at once read what few pairs share in the
 * L2 (x slowest over all of them, one tile of each pair at a time, read
 * nothing twice there: H100, causal attention b4 h32 s4096 d128, 362
 * TFLOP/s against 462 in grid order, L2 hits 25%; in groups of 33 pairs,
 * 508; bench/README.md).  Closed by close_tiles. */
static void open_tiles(E *e) {
  static const char *const bid[3] = {"tl_b0", "tl_b1", "tl_b2"};
  static const char *const nb[3] = {"(unsigned)tl_tg0", "(unsigned)tl_tg1", "(unsigned)tl_tg2"};
  const char *const *b = e->d->bid, *const *n = e->d->nblocks;
  if (e->prog->reverse_x && !e->prog->raster_panel) {
    line(e, "const long long tl_nbk = (long long)%s * %s * %s, tl_nyz = tl_tg1 * tl_tg2;", n[0], n[1], n[2]);
    line(e, "long long tl_grp = tl_nyz; /* the (y, z) pairs of a group: lcm(x, 2 * blocks started) / x */");
    line(e, "{");
    line(e, "  long long tl_ga = tl_tg0, tl_gb = 2 * tl_nbk;");
    line(e, "  while (tl_gb) { const long long tl_gc = tl_ga %% tl_gb; tl_ga = tl_gb; tl_gb = tl_gc; }");
    line(e, "  if (tl_ga > 0 && 2 * tl_nbk / tl_ga < tl_grp) tl_grp = 2 * tl_nbk / tl_ga;");
    line(e, "}");
    line(e, "for (long long tl_rnd = 0, tl_bl = %s + (long long)%s * (%s + (long long)%s * %s); "
            "tl_rnd * tl_nbk < tl_ntiles; tl_rnd++) {", b[0], n[0], b[1], n[1], b[2]);
    e->indent++;
    line(e, "const long long tl_tile = tl_rnd * tl_nbk + ((tl_rnd & 1) ? tl_nbk - 1 - tl_bl : tl_bl);");
    line(e, "if (tl_tile >= tl_ntiles) break; /* the last round's */");
    line(e, "const long long tl_ng = tl_nyz / tl_grp, tl_gi = tl_tile / (tl_grp * tl_tg0) < tl_ng - 1 ? "
            "tl_tile / (tl_grp * tl_tg0) : tl_ng - 1; /* the last group takes the rest too */");
    line(e, "const long long tl_gl = tl_tile - tl_gi * tl_grp * tl_tg0, "
            "tl_gn = tl_gi < tl_ng - 1 ? tl_grp : tl_nyz - tl_gi * tl_grp, tl_yz = tl_gi * tl_grp + tl_gl %% tl_gn;");
    line(e, "const unsigned tl_b0 = (unsigned)(tl_gl / tl_gn), tl_b1 = (unsigned)(tl_yz %% tl_tg1), "
            "tl_b2 = (unsigned)(tl_yz / tl_tg1); (void)tl_b1; (void)tl_b2;");
  } else {
    line(e, "for (long long tl_tile = %s + (long long)%s * (%s + (long long)%s * %s); tl_tile < tl_ntiles; "
            "tl_tile += (long long)%s * %s * %s) {", b[0], n[0], b[1], n[1], b[2], n[0], n[1], n[2]);
    e->indent++;
    line(e, "const unsigned tl_b0 = (unsigned)(tl_tile %% tl_tg0), tl_b1 = (unsigned)(tl_tile / tl_tg0 %% tl_tg1), "
            "tl_b2 = (unsigned)(tl_tile / (tl_tg0 * tl_tg1)); (void)tl_b1; (void)tl_b2;");
  }
  block_vars(e, bid, nb);
}

static void close_tiles(E *e) {
  e->indent--;
  line(e, "}");
}

/* The arrival `arrive` (a statement) on a "free" mbarrier: each warp's, its reads done (__syncwarp; wgmma's,
 * by the wait for their group), or each thread's after a proxy fence (per_thread: its generic reads
 * before the async proxy's next copy). */
static void arrive_free(E *e, const char *arrive, bool per_thread) {
  if (per_thread) {
    line(e, "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");");
    line(e, "%s", arrive);
  } else {
    line(e, "__syncwarp();");
    line(e, "if ((tl_tid & 31) == 0) %s", arrive);
  }
}

/* ---- pre copies (pass_wspec.c): a copy before the wspec loop, issued by the producer too ---- */
/* Elements of one copy of buffer b. */
static int64_t buffer_elems(const tl_sym *b) {
  int64_t n = 1;
  for (int d = 0; d < b->ndim; d++)
    n *= b->dims[d];
  return n;
}

/* Shadows s_NAME of pre copy c's buffer with copy `copy` (a C expression) of it. */
static void pre_pointer(E *e, const tl_stmt *c, const char *copy) {
  const tl_sym *b = c->dst->sym;
  line(e, "%s *const s_%s = tl_base_%s + (long long)(%s) * %" PRId64 "LL; (void)s_%s;", srep(b->dtype), b->name,
       b->name, copy, buffer_elems(b), b->name);
}

/* The producer's side, tile by tile: wait until the tile pre_stages back has freed the copy, expect its
 * bytes, issue the bulk tensor copies. */
static void pre_issue(E *e, const tl_stmt *c) {
  int id = c->pre_mbar, n = c->pre_stages;
  line(e, "{");
  e->indent++;
  line(e, "const int tl_qs = (int)(tl_pq%d %% %du);", id, n);
  line(e, "if (tl_pq%d >= %du) tl_mbar_wait(tl_mbar + 8u * (unsigned)(%d + tl_qs), (unsigned)(tl_pq%d / %du - 1) & 1u);",
       id, n, id + n, id, n);
  line(e, "const unsigned tl_mb = tl_mbar + 8u * (unsigned)(%d + tl_qs);", id);
  line(e, "asm volatile(\"%s;\" :: \"r\"(tl_mb), \"r\"(%" PRId64 "u) : \"memory\");", tl_ptx_expect_tx(e->a, "%0", "%1"),
       buffer_elems(c->dst->sym) * (int64_t)tl_dtype_size(c->dst->sym->dtype));
  pre_pointer(e, c, "tl_qs");
  emit_tma_copy(e, c);
  line(e, "tl_pq%d++;", id);
  e->indent--;
  line(e, "}");
}

/* The producer's pre copies into one copy of their buffers (emit_producer). */
static void late_pres(E *e, const tl_stmt *loop) {
  e->indent++;
  for (int i = 0; e->prog->body.items[i] != loop; i++)
    if (e->prog->body.items[i]->wspec_pre && e->prog->body.items[i]->pre_stages == 1)
      pre_issue(e, e->prog->body.items[i]);
  e->indent--;
}

/* The program's threads' side: the copy of this tile's, once complete (its s_NAME from here on). */
static void pre_wait(E *e, const tl_stmt *c) {
  int id = c->pre_mbar, n = c->pre_stages;
  line(e, "const int tl_qs%d = (int)(tl_cq%d %% %du);", id, id, n);
  pre_pointer(e, c, S("tl_qs%d", id));
  line(e, "tl_mbar_wait(tl_mbar + 8u * (unsigned)(%d + tl_qs%d), (unsigned)(tl_cq%d / %du) & 1u);", id, id, id, n);
}

/* After the last statement reading pre copy c's buffer (s): its wgmma groups done, the copy freed by every
 * warp (every thread, after a proxy fence, where threads read it themselves: pre_threads). */
static void pre_release(E *e, const tl_stmt *s) {
  const tl_program *p = e->prog;
  for (int i = 0; i < p->body.n; i++) {
    const tl_stmt *c = p->body.items[i];
    if (!c->wspec_pre || c->pre_last != s)
      continue;
    const char *arrive = S("asm volatile(\"%s;\" :: \"r\"(tl_mbar + 8u * (unsigned)(%d + tl_qs%d)) : \"memory\");",
                           tl_ptx_mbar_arrive(e->a, "%0"), c->pre_mbar + c->pre_stages, c->pre_mbar);
    line(e, "asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\"); /* %s read: free its copy */",
         c->dst->sym->name);
    arrive_free(e, arrive, c->pre_threads);
    line(e, "tl_cq%d++;", c->pre_mbar);
  }
}

/* The producer warpgroup, threads T to T+127 (after the mbarriers are
 * ready): it gives up registers, and its first thread evaluates the lets
 * the copies use and walks the wspec loop's iterations: iteration f waits
 * until iteration f - S has freed its stage (the stage's empty mbarrier
 * completing its phase f / S - 1), then expects the stage's bytes on its
 * full mbarrier and issues the copies.  The program's threads then take
 * the registers, and the named barrier 1 of their T threads as their block
 * barrier. */
static void emit_producer(E *e) {
  const tl_program *p = e->prog;
  const tl_stmt *loop = tl_wspec_loop(p);
  if (!loop)
    return;
  int64_t S = loop->pipe_stages, GT = e->T * p->slices; /* the program's threads, every slice's */
  line(e, "if (tl_tid >= %" PRId64 ") {", GT);
  e->indent++;
  if (p->wspec_regs[1])
    line(e, "asm volatile(\"%s;\" ::: \"memory\");", tl_ptx_setmaxnreg(e->a, false, p->wspec_regs[0]));
  if (p->slices > 1) /* a thread of producer warp s for slice s's iterations, in its own stages (pass_wspec.c) */
    line(e, "if ((tl_tid - %" PRId64 ") %% 32 == 0 && (tl_tid - %" PRId64 ") / 32 < %d) {", GT, GT, p->slices);
  else
    line(e, "if (tl_tid == %" PRId64 ") {", GT);
  e->indent++;
  if (p->slices > 1)
    line(e, "unsigned long long tl_pit = (unsigned long long)((tl_tid - %" PRId64 ") / 32); /* its slice's first */", GT);
  else
    line(e, "unsigned long long tl_pit = 0; /* iterations issued, over the tiles */");
  for (int i = 0; p->body.items[i] != loop; i++)
    if (p->body.items[i]->wspec_pre)
      line(e, "unsigned long long tl_pq%d = 0; /* tiles whose %s it copied */", p->body.items[i]->pre_mbar,
           p->body.items[i]->dst->sym->name);
  if (p->persistent)
    open_tiles(e);
  for (int i = 0; p->body.items[i] != loop; i++)
    if (p->body.items[i]->kind == S_LET && p->body.items[i]->wspec)
      emit_stmt(e, p->body.items[i], false);
  /* a pre copy into two copies first (the copy was freed a tile ago); into one, after the loop's first S
   * iterations (those wait only for the last tile's stages, so this tile's start on K's and V's stages while
   * the program's threads end the last tile, whose reading frees the copy) */
  bool late_pre = false;
  for (int i = 0; p->body.items[i] != loop; i++)
    if (p->body.items[i]->wspec_pre && p->body.items[i]->pre_stages > 1)
      pre_issue(e, p->body.items[i]);
    else
      late_pre |= p->body.items[i]->wspec_pre;
  const char *var = vname(e, loop->var);
  line(e, "const long long tl_pn = (long long)(%s), tl_ps = (long long)(%s);", ex(e, loop->extent), ex(e, loop->start));
  if (p->slices > 1)
    line(e, "for (long long tl_f = (long long)tl_pit; tl_f < tl_pn; tl_f += %d, tl_pit += %d) {", p->slices, p->slices);
  else
    line(e, "for (long long tl_f = 0; tl_f < tl_pn; tl_f++, tl_pit++) {");
  e->indent++;
  line(e, "const int tl_st = (int)(tl_pit %% %" PRId64 ");", S);
  line(e, "if (tl_pit >= %" PRId64 ") tl_mbar_wait(%s, (unsigned)(tl_pit / %" PRId64 " - 1) & 1u);", S,
       empty_of(e, loop, "tl_st"), S);
  line(e, "const int %s = (int)(tl_ps + tl_f); (void)%s;", var, var);
  stage_pointers(e, loop, "tl_st");
  tma_copies(e, loop, "tl_st");
  if (late_pre) {
    line(e, "if (tl_f + 1 == (tl_pn < %" PRId64 " ? tl_pn : %" PRId64 ")) {", S, S);
    late_pres(e, loop);
    line(e, "}");
  }
  e->indent--;
  line(e, "}");
  if (late_pre) {
    line(e, "if (tl_pn <= 0) {");
    late_pres(e, loop);
    line(e, "}");
  }
  if (p->persistent)
    close_tiles(e);
  e->indent--;
  line(e, "}");
  if (multicasts(p)) /* with the cluster's other threads, so that no block exits while another may arrive on it */
    cluster_barrier(e);
  line(e, "return;");
  e->indent--;
  line(e, "}");
  if (p->wspec_regs[1])
    line(e, "asm volatile(\"%s;\" ::: \"memory\");", tl_ptx_setmaxnreg(e->a, true, p->wspec_regs[1]));
  /* the stage and phase of an iteration repeat every 2 S iterations: counted modulo 2 S in 32 bits (a 64-bit
   * division by a stage count that is no power of two takes a dozen instructions an iteration) */
  line(e, "unsigned tl_cit = 0; /* iterations waited for, over the tiles, modulo 2 * stages */");
  for (int i = 0; p->body.items[i] != loop; i++)
    if (p->body.items[i]->wspec_pre)
      line(e, "unsigned long long tl_cq%d = 0; /* tiles whose %s they waited for */", p->body.items[i]->pre_mbar,
           p->body.items[i]->dst->sym->name);
  e->barrier = S("asm volatile(\"bar.sync 1, %" PRId64 ";\" ::: \"memory\");", e->T);
}

/* Frees stage `stage` (a C expression) of wspec loop s: each warp, its
 * reads done (__syncwarp; wgmma's, by the wait for their group), or, where
 * the body reads the stage otherwise (wspec_threads), each thread after a
 * proxy fence, its generic reads before the async proxy's next copy. */
static void release_stage(E *e, const tl_stmt *s, const char *stage) {
  const char *arrive = S("asm volatile(\"%s;\" :: \"r\"(%s) : \"memory\");", tl_ptx_mbar_arrive(e->a, "%0"),
                         empty_of(e, s, stage));
  /* in every block of the cluster: their producers multicast into this one's stage.  Where only wgmma reads
   * the stages, its groups are complete here (wgmma.wait_group), so the arrival orders nothing else and is
   * the default .release.cta one (as CUTLASS's ClusterBarrier::arrive); .release.cluster, which orders the
   * thread's earlier accesses at cluster scope first (a fence per warp and iteration), stays where the body
   * reads the stages otherwise (wspec_threads) */
  if (s->mcast)
    arrive = S("for (unsigned tl_r = 0; tl_r < %" PRId64 "u; tl_r++) asm volatile(\"{\\n.reg .b32 tl_ra;\\n"
               "mapa.shared::cluster.u32 tl_ra, %%0, %%1;\\nmbarrier.arrive%s.shared::cluster.b64 _, "
               "[tl_ra];\\n}\" :: \"r\"(%s), \"r\"(tl_r) : \"memory\");", e->prog->cl_size,
               s->wspec_threads ? ".release.cluster" : "", empty_of(e, s, stage));
  arrive_free(e, arrive, s->wspec_threads);
}

/* Whether loop has prefetched copies on cp.async. */
static bool has_cp_async(const tl_stmt *loop) {
  for (int i = 0; i < loop->body.n; i++)
    if (loop->body.items[i]->prefetch && !loop->body.items[i]->tma)
      return true;
  return false;
}

/* The gemm of wg_lag loop s (pass_pipeline.c's lag_gemm). */
static const tl_stmt *lag_gemm_of(const tl_stmt *s) {
  for (int i = 0; i < s->body.n; i++)
    if (s->body.items[i]->kind == S_GEMM && s->body.items[i]->wg_pending)
      return s->body.items[i];
  assert(0);
  return NULL;
}

/* Names copy `par` (0 or 1) of a wg_lag gemm's C, or of a lag_load copy's
 * fragment (declared as r_X_lag[2][n] by declare_buffers), r_X within the
 * block that follows. */
static void lag_alias(E *e, const tl_sym *C, int par) {
  line(e, "%s (&r_%s)[%" PRId64 "] = r_%s_lag[%d];", crep((tl_type)C->dtype), C->name, C->per_thread, C->name, par);
}

/* The tail of iteration `c` (a C expression) of wg_lag loop s: its
 * statements but the gemm and the prefetched copies, on copy `par` of C,
 * once the gemm's group of that iteration is complete; its lag_load
 * statements read what lag_loads loaded into copy `par`. */
static void emit_lag_tail(E *e, const tl_stmt *s, int id, const char *c, int par) {
  const tl_stmt *g = lag_gemm_of(s);
  const char *var = vname(e, s->var);
  line(e, "{");
  e->indent++;
  line(e, "const int %s = (int)(tl_s%d + (%s)); (void)%s;", var, id, c, var);
  lag_alias(e, g->C, par);
  pin_regs(e, g->C);
  for (int i = 0; i < s->body.n; i++)
    if (s->body.items[i]->lag_load && s->body.items[i]->kind == S_COPY)
      lag_alias(e, s->body.items[i]->dst->sym, par);
  for (int i = 0; i < s->body.n && !e->failed; i++) {
    const tl_stmt *b = s->body.items[i];
    if (b->lag_load && b->kind == S_LET)
      line(e, "const %s %s = tl_lag%s[%d];", crep(b->sym->type), vname(e, b->sym), vname(e, b->sym), par);
    else if (!b->prefetch && b != g && !b->lag_load)
      emit_stmt(e, b, true);
  }
  e->indent--;
  line(e, "}");
}

/* The gemm of wg_lag loop s into copy `par` of its C. */
static void lag_gemm_issue(E *e, const tl_stmt *s, int par) {
  const tl_stmt *g = lag_gemm_of(s);
  line(e, "{");
  e->indent++;
  lag_alias(e, g->C, par);
  emit_stmt(e, g, true);
  e->indent--;
  line(e, "}");
}

/* The lag_load statements of wg_lag loop s for iteration `c` (a C
 * expression) into copy `par` of their registers (pass_pipeline.c:
 * lag_loadable); decl: instead, declare the lets' two copies. */
static void lag_loads(E *e, const tl_stmt *s, int id, const char *c, int par, bool decl) {
  bool any = false;
  for (int i = 0; i < s->body.n; i++)
    any |= s->body.items[i]->lag_load;
  if (!any)
    return;
  if (decl) {
    for (int i = 0; i < s->body.n; i++)
      if (s->body.items[i]->lag_load && s->body.items[i]->kind == S_LET)
        line(e, "%s tl_lag%s[2];", crep(s->body.items[i]->sym->type), vname(e, s->body.items[i]->sym));
    return;
  }
  const char *var = vname(e, s->var);
  line(e, "{");
  e->indent++;
  line(e, "const int %s = (int)(tl_s%d + (%s)); (void)%s;", var, id, c, var);
  for (int i = 0; i < s->body.n && !e->failed; i++) {
    const tl_stmt *b = s->body.items[i];
    if (!b->lag_load)
      continue;
    if (b->kind == S_LET) {
      line(e, "tl_lag%s[%d] = %s;", vname(e, b->sym), par, ex(e, b->value));
      continue;
    }
    line(e, "{");
    e->indent++;
    lag_alias(e, b->dst->sym, par);
    emit_stmt(e, b, true);
    e->indent--;
    line(e, "}");
  }
  e->indent--;
  line(e, "}");
}

/* The prefetched copies of iteration `i` (a C name) of pipelined loop s
 * into stage `stage`, when i is one, then their cp.async group. */
static void prefetch_iteration(E *e, const tl_stmt *s, int id, const char *i, const char *stage) {
  const char *var = vname(e, s->var);
  line(e, "if (%s < tl_n%d) {", i, id);
  e->indent++;
  line(e, "const int %s = (int)(tl_s%d + %s); (void)%s;", var, id, i, var);
  stage_pointers(e, s, stage);
  prefetch_copies(e, s, stage);
  e->indent--;
  line(e, "}");
  if (has_cp_async(s))
    line(e, "asm volatile(\"cp.async.commit_group;\" ::: \"memory\");");
}

/* Iteration `c` (a C name or a parenthesized expression) of pipelined loop
 * s (emit_pipelined); par is the copy of C its gemm writes in a wg_lag
 * loop, else -1. */
static void emit_iteration(E *e, const tl_stmt *s, int id, const char *c, int par) {
  int64_t S = s->pipe_stages, D = s->pipe_ahead;
  bool cp = has_cp_async(s);
  const char *var = vname(e, s->var);
  if (par >= 0) /* a wg_lag loop's loads for c, before the barrier (pass_pipeline.c: lag_loadable) */
    lag_loads(e, s, id, c, par, false);
  if (cp)
    line(e, "asm volatile(\"cp.async.wait_group %" PRId64 ";\" ::: \"memory\");", D - 1);
  if (s->mcast) /* no block of the cluster still reads the stage the copies overwrite (pass_cluster.c) */
    cluster_barrier(e);
  else
    barrier_line(e);
  line(e, "{");
  e->indent++;
  line(e, "const long long tl_f = %s + %" PRId64 ";", c, D);
  prefetch_iteration(e, s, id, "tl_f", S("tl_f %% %" PRId64, S));
  e->indent--;
  line(e, "}");
  if (s->tma) {
    line(e, "{");
    e->indent++;
    line(e, "const int tl_cs = (int)(%s %% %" PRId64 ");", c, S);
    line(e, "tl_mbar_wait(%s, (tl_ph%d >> tl_cs) & 1u);", mbar_of(e, s, "tl_cs"), s->mbar);
    line(e, "tl_ph%d ^= 1u << tl_cs;", s->mbar);
    e->indent--;
    line(e, "}");
  }
  line(e, "const int %s = (int)(tl_s%d + %s);", var, id, c);
  stage_pointers(e, s, S("%s %% %" PRId64, c, S));
  if (par < 0) { /* c is tl_cID here, which reg_prefetches names */
    rotate_pointers(e, s, S("%s %% 2", c));
    reg_prefetches(e, s, id, 1);
    for (int i = 0; i < s->body.n && !e->failed; i++) {
      const tl_stmt *b = s->body.items[i];
      if (s->ov_gemm && b == s->ov_wait) /* the late gemm (pass_overlap.c), before what conflicts with it */
        wgmma_wait(e, s->ov_gemm->C, 0);
      if (!b->prefetch && !b->reg_prefetch)
        emit_stmt(e, b, true);
    }
    if (s->ov_gemm && !s->ov_wait)
      wgmma_wait(e, s->ov_gemm->C, 0);
    reg_prefetches(e, s, id, 2);
    return;
  }
  for (int i = 0; i < s->body.n; i++) /* pass_pipeline.c: a wg_lag loop neither rotates nor prefetches in registers */
    assert(!s->body.items[i]->reg_prefetch);
  lag_gemm_issue(e, s, par);
}

/* Iteration `c` (a C expression) of wspec loop s with a late tail
 * (wg_lag): its loads for the tail, the wait for its stage, its gemm into
 * copy `par` of C (then wait_group 1), then the stage of c - 1 freed, the
 * gemm of c - 1 being done (emit_wspec_loop). */
static void wspec_lag_iteration(E *e, const tl_stmt *s, int id, const char *c, int par) {
  int64_t S = s->pipe_stages;
  const char *var = vname(e, s->var);
  lag_loads(e, s, id, c, par, false);
  line(e, "const unsigned tl_g = tl_cit + (unsigned)(%s);", c);
  line(e, "tl_mbar_wait(%s, (unsigned)(tl_g / %" PRId64 ") & 1u);", mbar_of(e, s, S("(int)(tl_g %% %" PRId64 ")", S)), S);
  line(e, "const int %s = (int)(tl_s%d + %s);", var, id, c);
  stage_pointers(e, s, S("tl_g %% %" PRId64, S));
  lag_gemm_issue(e, s, par);
  line(e, "if (%s > 0) {", c);
  e->indent++;
  release_stage(e, s, S("(int)((tl_g - 1) %% %" PRId64 ")", S));
  e->indent--;
  line(e, "}");
}

/* The trips of wg_lag loop s (counter c, a C name), T = wg_lag iterations
 * each: iteration c + j issues its gemm into copy j % 2 (then wait_group 1,
 * as every gemm of the loop) and runs the tail of c + j - 1; the trip ends
 * with wait_group 0, so that no group is pending across the loop's back
 * edge (ptxas serializes every wgmma of a loop where one is pending there
 * while other instructions read accumulators); where c + j is past the
 * end, the tail of c + j - 1 follows a wait_group 0.  The iterations are
 * emit_iteration's, or wspec_lag_iteration's in a wspec loop. */
static void lag_trips(E *e, const tl_stmt *s, int id, const char *c) {
  int T = s->wg_lag;
  lag_loads(e, s, id, NULL, 0, true);
  line(e, "for (long long %s = 0; %s < tl_n%d; %s += %d) {", c, c, id, c, T);
  e->indent++;
  for (int j = 0; j < T; j++) {
    const char *cj = j ? S("(%s + %d)", c, j) : c;
    line(e, j ? "if (%s < tl_n%d) {" : "{", cj, id);
    e->indent++;
    if (s->wspec)
      wspec_lag_iteration(e, s, id, cj, j % 2);
    else
      emit_iteration(e, s, id, cj, j % 2);
    if (!j)
      line(e, "if (%s > 0)", c);
    emit_lag_tail(e, s, id, S("%s - 1", cj), (j + 1) % 2);
    if (s->wspec && s->barrier_end) /* the next iteration conflicts with this one (pass_barrier.c) */
      barrier_line(e);
  }
  line(e, "asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");");
  for (int j = T - 1; j >= 0; j--) {
    e->indent--;
    if (!j) {
      line(e, "}");
      break;
    }
    line(e, "} else {");
    e->indent++;
    line(e, "asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");");
    emit_lag_tail(e, s, id, S("(%s + %d)", c, j - 1), (j - 1) % 2);
    e->indent--;
    line(e, "}");
  }
  e->indent--;
  line(e, "}");
}

/* Loop s's last iteration's late gemm (pass_overlap.c: issued one
 * iteration late, so the loop ends with one still to issue), iteration
 * `it` (a C expression), committed and waited for. */
static void late_tail(E *e, const tl_stmt *s, int id, const char *it) {
  line(e, "if (tl_n%d > 0) {", id);
  e->indent++;
  wgmma_issue_late(e, s->ov_gemm, it);
  line(e, "asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");");
  wgmma_wait(e, s->ov_gemm->C, 0);
  e->indent--;
  line(e, "}");
}

/* Does loop s hold copies prefetched through registers (pass_pipeline.c: reg_prefetchable)? */
static bool has_reg_prefetch(const tl_stmt *s) {
  for (int i = 0; i < s->body.n; i++)
    if (s->body.items[i]->reg_prefetch)
      return true;
  return false;
}

/* ---- slices (pass_wspec.c) ---- */
/* Named barriers: slice s's threads barrier 1 + s (slice 0's the program's, 1), every slice's G + 1. */
static void all_slices_barrier(E *e, const tl_stmt *s) {
  line(e, "asm volatile(\"bar.sync %d, %" PRId64 ";\" ::: \"memory\"); /* every slice */", s->slices + 1,
       e->T * s->slices);
}

/* The gemm sums of sliced loop s (the C of its gemms, each once, wherever in its body: at most
 * TL_MAX_SLICE_SUMS, pass_wspec.c). */
typedef struct {
  const tl_sym *c[TL_MAX_SLICE_SUMS];
  int n;
} sums;

static tl_walk_act slice_sum(tl_stmt *g, void *user) {
  sums *u = user;
  if (g->kind != S_GEMM)
    return TL_WALK_GO;
  for (int k = 0; k < u->n; k++)
    if (u->c[k] == g->C)
      return TL_WALK_GO;
  assert(u->n < TL_MAX_SLICE_SUMS);
  u->c[u->n++] = g->C;
  return TL_WALK_GO;
}

static int slice_sums(const tl_stmt *s, const tl_sym **out) {
  sums u = {.n = 0};
  tl_walk((tl_body *)&s->body, &(tl_walker){.pre = slice_sum}, &u);
  for (int k = 0; k < u.n; k++)
    out[k] = u.c[k];
  return u.n;
}

/* Before sliced loop s (in the block of the loop): every slice waits for slice 0's statements before it,
 * then runs as the program's T threads (tl_tid within its slice), slices after the first with their gemm
 * sums at 0, their block barriers their own named barrier.  The slice's index is lane 0's (__shfl_sync: the
 * same in every lane, as a slice is whole warps), which ptxas then knows is one value a warp, as CUTLASS
 * takes its warpgroup's: the loop's counter, stage and wgmma descriptors go to uniform registers, no move
 * from each thread's registers before each wgmma (R2UR: 28 to 14 in gemm_w4a16_il.json's kernel at
 * M = 64; 0.0256 -> 0.0253 ms on an H100, bench/README.md, session 17). */
static void slices_open(E *e, const tl_stmt *s) {
  if (e->prog->fence_async)
    line(e, "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");");
  all_slices_barrier(e, s);
  line(e, "const int tl_slice = __shfl_sync(0xffffffffu, (int)(tl_tid / %" PRId64 "), 0);", e->T);
  line(e, "const int tl_stid = tl_tid %% %" PRId64 ";", e->T);
  line(e, "{");
  e->indent++;
  line(e, "const int tl_tid = tl_stid; (void)tl_tid;");
  const tl_sym *C[TL_MAX_SLICE_SUMS];
  int n = slice_sums(s, C);
  line(e, "if (tl_slice > 0) {");
  e->indent++;
  for (int k = 0; k < n; k++) {
    line(e, "#pragma unroll");
    line(e, "for (int tl_i = 0; tl_i < %" PRId64 "; tl_i++) r_%s[tl_i] = 0;", C[k]->per_thread, C[k]->name);
  }
  e->indent--;
  line(e, "}");
  e->barrier = S("asm volatile(\"bar.sync %%0, %" PRId64 ";\" :: \"r\"(1 + tl_slice) : \"memory\");", e->T);
}

/* After sliced loop s: once every slice is done with the stages, slices 1.. put their sums in the memory of
 * s->slice_buf (T consecutive words per element, so a warp's stores and loads are whole lines), and slice 0
 * adds them into its own, slice by slice in order, then waits for all its threads (named barrier 1); the
 * other slices' threads return. */
static void slices_close(E *e, const tl_stmt *s) {
  const tl_sym *C[TL_MAX_SLICE_SUMS];
  int n = slice_sums(s, C);
  int64_t W = 0;
  for (int k = 0; k < n; k++)
    W += C[k]->per_thread;
  all_slices_barrier(e, s);
  for (int pass = 0; pass < 2; pass++) {
    line(e, pass ? "if (tl_slice == 0) {" : "if (tl_slice > 0) {");
    e->indent++;
    if (pass)
      line(e, "for (int tl_o = 1; tl_o < %d; tl_o++) {", s->slices);
    else
      line(e, "{");
    e->indent++;
    if (!pass)
      line(e, "const int tl_o = tl_slice;");
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
      const char *t = crep((tl_type)C[k]->dtype);
      line(e, "%s *const tl_sum = (%s *)(tl_smem + %" PRId64 ") + ((long long)(tl_o - 1) * %" PRId64 " + %" PRId64
           ") * %" PRId64 " + tl_tid;", t, t, s->slice_buf->smem_offset, W, at, e->T);
      line(e, "#pragma unroll");
      line(e, "for (int tl_i = 0; tl_i < %" PRId64 "; tl_i++) %s;", C[k]->per_thread,
           pass ? S("r_%s[tl_i] += tl_sum[(long long)tl_i * %" PRId64 "]", C[k]->name, e->T)
                : S("tl_sum[(long long)tl_i * %" PRId64 "] = r_%s[tl_i]", e->T, C[k]->name));
      at += C[k]->per_thread;
    }
    e->indent--;
    line(e, "}");
    e->indent--;
    line(e, "}");
    if (!pass)
      all_slices_barrier(e, s);
  }
  e->indent--;
  line(e, "}");
  line(e, "if (tl_slice > 0) return; /* the statements after the loop are slice 0's */");
  /* slice 0's threads done reading the sums before any of them writes that memory again (a K group's last
   * tiles' copies after the loop, pass_kgroup.c, land in the stages) */
  line(e, "asm volatile(\"bar.sync 1, %" PRId64 ";\" ::: \"memory\");", e->T);
}

/* The program's side of a wspec loop: iteration c waits for stage c % S's
 * full mbarrier (phase c / S), runs the body, and then frees the stage of
 * iteration c - wspec_lag, whose wgmma groups the body's wgmma.wait_group
 * has seen complete (release_stage).  With a late tail (wg_lag: wspec_lag
 * is 1), the iterations run in lag_trips (wspec_lag_iteration frees the
 * stage of c - 1 right after the gemm of c is issued, the tail of c - 1
 * touching no shared memory), and the last tail follows the loop.  Copies
 * prefetched through registers (pass_pipeline.c's reg_prefetchable) copy
 * iteration 0's elements before the loop, then a barrier; iteration c
 * loads c + 1's into registers before its wait and stores them into the
 * other copy of the buffer at its end, before the barrier that closes it
 * (pass_barrier.c). */
static void emit_tl_wspec_loop(E *e, const tl_stmt *s) {
  int64_t S = s->pipe_stages;
  int id = e->uid++, lag = s->wspec_lag, held = e->held;
  e->held = 0; /* an outer loop's set is not this loop's (held_a) */
  const char *var = vname(e, s->var);
  line(e, "{");
  e->indent++;
  line(e, "const long long tl_n%d = (long long)(%s), tl_s%d = (long long)(%s);", id, ex(e, s->extent), id,
       ex(e, s->start));
  held_a_loop(e, s);
  if (s->wg_lag) {
    assert(lag == 1);
    lag_trips(e, s, id, S("tl_c%d", id));
    line(e, "asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");");
    line(e, "if (tl_n%d > 0 && tl_n%d %% %d == 0)", id, id, s->wg_lag);
    emit_lag_tail(e, s, id, S("tl_n%d - 1", id), 1);
  } else {
    const tl_stmt *outer = e->pipe; /* for a late gemm (pass_overlap.c) */
    int outer_id = e->pipe_id, W = (int)(e->T / 128);
    e->pipe = s;
    e->pipe_id = id;
    if (s->pingpong) { /* warpgroup 0's first turn (pp_turn_wait) */
      line(e, "if ((int)tl_tid / 128 == %d) asm volatile(\"bar.arrive %d, 256;\" ::: \"memory\");", W - 1, PP_BAR);
      e->pp_wg = W;
    }
    bool rp = has_reg_prefetch(s);
    if (rp) { /* iteration 0's copies prefetched through registers, then a barrier (pass_barrier.c) */
      reg_prefetches(e, s, id, 0);
      barrier_line(e);
    }
    const char *saved_barrier = e->barrier;
    if (s->slices > 1)
      slices_open(e, s);
    if (s->slices > 1)
      line(e, "for (long long tl_c%d = tl_slice; tl_c%d < tl_n%d; tl_c%d += %d) {", id, id, id, id, s->slices);
    else
      line(e, "for (long long tl_c%d = 0; tl_c%d < tl_n%d; tl_c%d++) {", id, id, id, id);
    e->indent++;
    line(e, "const unsigned tl_g = tl_cit + (unsigned)tl_c%d;", id);
    if (rp) /* iteration c + 1's into registers, before the wait for the stage */
      reg_prefetches(e, s, id, 1);
    line(e, "tl_mbar_wait(%s, (unsigned)(tl_g / %" PRId64 ") & 1u);", mbar_of(e, s, S("(int)(tl_g %% %" PRId64 ")", S)),
         S);
    line(e, "const int %s = (int)(tl_s%d + tl_c%d);", var, id, id);
    stage_pointers(e, s, S("tl_g %% %" PRId64, S));
    /* the rotating buffers too (pass_pipeline.c: a pending group reads copy c % 2 while iteration c + 1
     * writes the other; copies prefetched through registers: this iteration's copy, written by the last) */
    rotate_pointers(e, s, S("tl_c%d %% 2", id));
    int nheld = has_held_a(s) ? 2 : 0; /* the body for even and odd c (held_a's two sets) */
    for (int p = 0; p < (nheld ? nheld : 1); p++) {
      if (nheld) {
        line(e, p ? "} else {" : "if (tl_c%d %% 2 == 0) {", id);
        e->indent++;
        e->held = 1 + p;
      }
      for (int i = 0; i < s->body.n && !e->failed; i++) {
        const tl_stmt *b = s->body.items[i];
        if (s->ov_gemm && b == s->ov_wait) /* the late gemm (pass_overlap.c), before what conflicts with it */
          wgmma_wait(e, s->ov_gemm->C, 0);
        if (!b->prefetch && !b->reg_prefetch)
          emit_stmt(e, b, true);
      }
      if (s->ov_gemm && !s->ov_wait)
        wgmma_wait(e, s->ov_gemm->C, 0);
      if (nheld)
        e->indent--;
    }
    if (nheld)
      line(e, "}");
    e->held = 0;
    emit_defer_in_loop(e, s, id); /* the last tile's deferred store, a panel under this iteration's gemm */
    if (rp) /* the registers into copy (c + 1) % 2, before the barrier that ends the iteration */
      reg_prefetches(e, s, id, 2);
    if (s->barrier_end) /* the next iteration conflicts with this one (pass_barrier.c) */
      barrier_line(e);
    int back = lag * (s->slices > 1 ? s->slices : 1); /* its slice's iteration lag iterations back */
    line(e, "%s{", lag ? S("if (tl_c%d >= %d) ", id, back) : "");
    e->indent++;
    release_stage(e, s, S("(int)((tl_g - %d) %% %" PRId64 ")", back, S));
    e->indent--;
    line(e, "}");
    e->indent--;
    line(e, "}");
    if (s->pingpong) { /* the turn left over */
      e->pp_wg = 0;
      line(e, "if ((int)tl_tid / 128 == 0) asm volatile(\"bar.sync %d, 256;\" ::: \"memory\");", PP_BAR);
    }
    if (s->ov_gemm) /* the last iteration's late gemm (pass_overlap.c), before its stage is freed */
      late_tail(e, s, id, S("tl_cit + (unsigned)(tl_n%d - 1)", id));
    e->pipe = outer;
    e->pipe_id = outer_id;
    drain_wgmma(e, s);
    if (s->slices > 1)
      slices_close(e, s);
    e->barrier = saved_barrier;
  }
  if (lag && s->slices <= 1) { /* the stages of the last iterations, their groups done: the producer may be on
                                 * the next tile (in slices the kernel is not persistent) */
    line(e, "for (long long tl_j = tl_n%d > %d ? tl_n%d - %d : 0; tl_j < tl_n%d; tl_j++) {", id, lag, id, lag, id);
    e->indent++;
    release_stage(e, s, S("(int)((tl_cit + (unsigned)tl_j) %% %" PRId64 ")", S));
    e->indent--;
    line(e, "}");
  }
  line(e, "tl_cit = (unsigned)((tl_cit + (unsigned long long)(tl_n%d > 0 ? tl_n%d : 0)) %% %" PRId64 "u);", id, id, 2 * S);
  emit_defer_after(e, s, id);
  e->indent--;
  line(e, "}");
  e->held = held;
}

/* A pipelined loop (pass_pipeline.c): its prefetched copies run
 * pipe_ahead iterations ahead into pipe_stages rotating stages of their
 * buffers, one cp.async group per iteration; iteration c waits for its own
 * group, then a barrier makes every thread's chunks visible (and tells
 * that no iteration still reads the stage the next prefetch overwrites:
 * pass_pipeline.c's argument, with a gemm's wgmma-groups pending across
 * iterations).  Those groups are waited for as the loop ends.  Bulk tensor
 * copies (pass_tma.c) complete on the stage's mbarrier instead: iteration
 * c, after the barrier and its own prefetch, waits for the phase of stage
 * c % S that its bit in tl_phN says, then flips the bit (so the loop may
 * run again, from any phase).  A wg_lag loop runs wg_lag iterations (an
 * even number) per trip, so that each names its copy of the gemm's C at
 * compile time (registers cannot be indexed at run time), each running the
 * previous iteration's tail after its gemm. */
static void emit_pipelined(E *e, const tl_stmt *s) {
  if (s->wspec) {
    emit_tl_wspec_loop(e, s);
    return;
  }
  bool early = e->early == s; /* its prologue is out already (emit_body) */
  int id = early ? e->early_id : e->uid++;
  bool cp = has_cp_async(s);
  if (s->mcast) /* the other blocks of the cluster done with what shares the stages' memory */
    cluster_barrier(e);
  line(e, "{");
  e->indent++;
  if (early)
    e->early = NULL;
  else
    emit_prologue(e, s, id);
  held_a_loop(e, s);
  reg_prefetches(e, s, id, 0);
  const char *c = S("tl_c%d", id);
  const tl_stmt *outer = e->pipe; /* for a late gemm (pass_overlap.c) */
  int outer_id = e->pipe_id;
  e->pipe = s;
  e->pipe_id = id;
  int held = e->held;
  e->held = 0; /* an outer loop's set is not this loop's (held_a) */
  if (!s->wg_lag && has_held_a(s)) { /* the body for even and for odd iterations (held_a's two sets) */
    line(e, "for (long long %s = 0; %s < tl_n%d; %s++) {", c, c, id, c);
    e->indent++;
    for (int p = 0; p < 2; p++) {
      line(e, p ? "} else {" : "if (%s %% 2 == 0) {", c);
      e->indent++;
      e->held = 1 + p;
      emit_iteration(e, s, id, c, -1);
      e->indent--;
    }
    line(e, "}");
    e->held = 0;
    e->indent--;
    line(e, "}");
  } else if (!s->wg_lag) {
    line(e, "for (long long %s = 0; %s < tl_n%d; %s++) {", c, c, id, c);
    e->indent++;
    emit_iteration(e, s, id, c, -1);
    e->indent--;
    line(e, "}");
  } else {
    lag_trips(e, s, id, c);
  }
  if (s->ov_gemm) /* the last iteration's late gemm (pass_overlap.c) */
    late_tail(e, s, id, S("tl_n%d - 1", id));
  e->pipe = outer;
  e->pipe_id = outer_id;
  if (cp)
    line(e, "asm volatile(\"cp.async.wait_group 0;\" ::: \"memory\");");
  if (s->wg_drain) { /* the groups its gemm left pending (pass_pipeline.c) */
    line(e, "asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");");
    if (s->wg_lag) { /* the tail of the last iteration when it ended a whole trip */
      line(e, "if (tl_n%d > 0 && tl_n%d %% %d == 0)", id, id, s->wg_lag);
      emit_lag_tail(e, s, id, S("tl_n%d - 1", id), 1);
    } else {
      for (int i = 0; i < s->body.n; i++)
        if (s->body.items[i]->kind == S_GEMM && s->body.items[i]->wg_pending)
          pin_regs(e, s->body.items[i]->C);
    }
  }
  e->indent--;
  line(e, "}");
  if (s->mcast)
    cluster_barrier(e);
  else
    barrier_line(e);
  e->held = held;
}

/* ---- a pipelined loop's first copies, issued early ---------------------------------------------
 * The prologue of pipelined loop L (the copies of its first pipe_ahead
 * iterations) goes before the statements ahead of L in its body where
 * these only move data between buffers by plain loads and stores, or fill
 * them: copies that are not cp.async or bulk tensor copies and write no
 * tensor, fills, and allocations of shared or fragment buffers (declared at
 * the kernel's top); none of the buffers they touch is written by L's
 * prefetched copies, has a view, or shares shared memory with what those
 * write (every stage).  Then the loads of those statements (a column of
 * group scales read before the loop, gemm_w4a16_splitk.json) wait on memory
 * together with L's first tiles instead of before them.  Results never
 * change: the prefetched copies read tensors nothing writes in between, and
 * write stages nothing touches in between.  Not for loops with a producer
 * warpgroup, multicast copies or a late tail (their prologues differ). */
static bool smem_overlap(const tl_sym *a, const tl_sym *b) {
  if (a->smem_offset < 0 || b->smem_offset < 0)
    return false;
  int64_t na = 1, nb = 1;
  for (int d = 0; d < a->ndim; d++)
    na *= a->dims[d];
  for (int d = 0; d < b->ndim; d++)
    nb *= b->dims[d];
  na = (int64_t)tl_dtype_bytes(a->dtype, (uint64_t)na) * (a->stages > 1 ? a->stages : 1);
  nb = (int64_t)tl_dtype_bytes(b->dtype, (uint64_t)nb) * (b->stages > 1 ? b->stages : 1);
  return a->smem_offset < b->smem_offset + nb && b->smem_offset < a->smem_offset + na;
}

/* May the prologue of L pass over buffer x (a copy's source or
 * destination, a fill's destination)? */
static bool early_passes(const tl_stmt *L, const tl_sym *x) {
  if (x->kind == SYM_TENSOR)
    return true; /* read: the caller refuses tensors written */
  if (x->view_of || x->viewed || x->scope == SCOPE_LOCAL)
    return false;
  for (int i = 0; i < L->body.n; i++) {
    const tl_stmt *c = L->body.items[i];
    if (!c->prefetch)
      continue;
    const tl_sym *d = c->dst->sym;
    if (d == x || (x->scope == SCOPE_SHARED && smem_overlap(x, d)) ||
        (x->scope == SCOPE_FRAGMENT && !x->in_regs && smem_overlap(x, d)))
      return false;
  }
  return true;
}

/* The first statement of b, at or before j, before which pipelined loop
 * b->items[j]'s prologue can be issued (j: not earlier). */
static int early_prologue(const tl_body *b, int j) {
  const tl_stmt *L = b->items[j];
  if (L->kind != S_LOOP || !L->pipe || L->wspec || L->mcast || L->wg_lag || L->pipe_ahead < 1)
    return j;
  int i = j;
  while (i > 0) {
    const tl_stmt *s = b->items[i - 1];
    bool ok = false;
    if (s->kind == S_ALLOC)
      ok = s->sym->scope != SCOPE_LOCAL;
    else if (s->kind == S_COPY)
      ok = !s->async_copy && !s->tma && !s->prefetch && !s->tma_store && s->dst->sym->kind != SYM_TENSOR &&
           early_passes(L, s->src->sym) && early_passes(L, s->dst->sym);
    else if (s->kind == S_FILL)
      ok = s->dst->sym->kind != SYM_TENSOR && early_passes(L, s->dst->sym);
    if (!ok)
      break;
    i--;
  }
  /* only where a statement that loads from memory is passed: else nothing waits less */
  for (int k = i; k < j; k++)
    if (b->items[k]->kind == S_COPY && b->items[k]->src->sym->kind == SYM_TENSOR)
      return i;
  return j;
}

static void emit_prologue(E *e, const tl_stmt *s, int id) {
  line(e, "const long long tl_n%d = (long long)(%s), tl_s%d = (long long)(%s);", id, ex(e, s->extent), id,
       ex(e, s->start));
  line(e, "#pragma unroll");
  line(e, "for (int tl_st = 0; tl_st < %" PRId64 "; tl_st++) {", s->pipe_ahead);
  e->indent++;
  prefetch_iteration(e, s, id, "tl_st", "tl_st");
  e->indent--;
  line(e, "}");
}

/* The index of the kernel body's last wspec loop, or -1: the statements before it are those before a wspec
 * loop (found once per body, not once per statement). */
static int last_wspec(const tl_body *b) {
  int at = -1;
  for (int j = 0; j < b->n; j++)
    if (b->items[j]->kind == S_LOOP && b->items[j]->wspec)
      at = j;
  return at;
}

static void emit_body(E *e, const tl_body *b, bool uniform) {
  int early_at = -1, early_loop = -1; /* statement index, pipelined loop index */
  int wspec_at = b == &e->prog->body && e->prog->slices > 1 ? last_wspec(b) : -1;
  for (int j = 0; j < b->n; j++)
    if (!e->early && (early_at = early_prologue(b, j)) < j) {
      early_loop = j;
      break;
    }
  for (int i = 0; i < b->n && !e->failed; i++) {
    if (i == early_at && early_loop > i) {
      e->early = b->items[early_loop];
      e->early_id = e->uid++;
      line(e, "/* the first copies of the pipelined loop below, issued before the statements ahead of it */");
      emit_prologue(e, e->early, e->early_id);
    }
    const tl_stmt *s = b->items[i];
    if (b == &e->prog->body && e->prog->slices > 1 && (i < wspec_at || s->slices > 1)) {
      /* the kernel's statements before a loop in slices are slice 0's (declarations: every slice's); the
       * loop's barrier before it is every slice's (slices_open) */
      bool decl = s->kind == S_LET || s->kind == S_ALLOC || s->kind == S_ALLOC_VAR || s->kind == S_VIEW;
      if (s->barrier_before && s->slices <= 1) {
        line(e, "if (tl_tid < %" PRId64 ") {", e->T);
        barrier_line(e);
        line(e, "}");
      }
      if (!decl && s->slices <= 1) {
        line(e, "if (tl_tid < %" PRId64 ") { /* slice 0's (the loop below runs in slices) */", e->T);
        e->indent++;
      }
      emit_stmt_body(e, s, uniform); /* its barrier before: above, or slices_open's */
      if (!decl && s->slices <= 1) {
        e->indent--;
        line(e, "}");
      }
    } else {
      emit_stmt(e, s, uniform);
    }
    pre_release(e, b->items[i]);
  }
}

/* ---- regions (pass_split.c) ---------------------------------------------------------------- */
/* How buffer b, a register fragment or a local buffer, is declared: its
 * element type, its name's prefix and its elements a thread holds. */
static const char *held(E *e, const tl_sym *b, const char **prefix, int64_t *n) {
  (void)e;
  *prefix = b->scope == SCOPE_LOCAL ? "l_" : "r_";
  if (b->scope == SCOPE_LOCAL) {
    *n = 1;
    for (int d = 0; d < b->ndim; d++)
      *n *= b->dims[d];
  } else {
    *n = b->packed ? b->per_thread / 2 : b->per_thread;
  }
  return b->scope == SCOPE_FRAGMENT && b->packed ? "unsigned" : crep((tl_type)b->dtype);
}

/* A region of the kernel's top level that pass_split.c marked: a noinline
 * lambda called once.  The register fragments and local buffers it uses
 * are copied into local arrays of the same names as it starts (through the
 * pointers tl_rp_X the kernel declares next to them) and back as it ends,
 * so that the region works on registers. */
static void emit_region(E *e, const tl_body *b, int from, int to) {
  const tl_stmt *first = b->items[from];
  for (int i = from; i < to; i++) /* its lets, computed before it (pass_split.c: hoistable) */
    if (b->items[i]->kind == S_LET)
      emit_stmt(e, b->items[i], true);
  line(e, "{ /* region %d (pass_split.c) */", first->region);
  e->indent++;
  line(e, "auto tl_region = [&]() __noinline__ {");
  e->indent++;
  for (int i = 0; i < first->nregion_frags; i++) {
    const tl_sym *f = first->region_frags[i];
    const char *prefix;
    int64_t n;
    const char *t = held(e, f, &prefix, &n);
    line(e, "%s %s%s[%" PRId64 "];", t, prefix, f->name, n);
    line(e, "#pragma unroll");
    line(e, "for (int tl_i = 0; tl_i < %" PRId64 "; tl_i++) %s%s[tl_i] = tl_rp_%s[tl_i];", n, prefix, f->name, f->name);
  }
  for (int i = from; i < to && !e->failed; i++)
    if (b->items[i]->kind != S_LET)
      emit_stmt(e, b->items[i], true);
  for (int i = 0; i < first->nregion_frags; i++) {
    const tl_sym *f = first->region_frags[i];
    const char *prefix;
    int64_t n;
    held(e, f, &prefix, &n);
    line(e, "#pragma unroll");
    line(e, "for (int tl_i = 0; tl_i < %" PRId64 "; tl_i++) tl_rp_%s[tl_i] = %s%s[tl_i];", n, f->name, prefix, f->name);
  }
  e->indent--;
  line(e, "};");
  line(e, "tl_region();");
  e->indent--;
  line(e, "}");
}

/* The pointer through which regions reach buffer b (pass_split.c), declared next to it. */
static void region_pointer(E *e, const tl_sym *b) {
  const char *prefix;
  int64_t n;
  const char *t = held(e, b, &prefix, &n);
  if (b->region_used)
    line(e, "%s *const tl_rp_%s = %s%s;", t, b->name, prefix, b->name);
}

/* The kernel's top level: its statements, the regions pass_split.c
 * marked each in its own noinline function. */
static void emit_top(E *e, const tl_body *b) {
  bool cut = false;
  for (int i = 0; i < b->n && !cut; i++)
    cut = b->items[i]->region != 0;
  if (!cut) { /* not cut (pass_split.c): a body as any other, a pipelined loop's early prologue included */
    emit_body(e, b, true);
    return;
  }
  for (int i = 0; i < b->n && !e->failed;) {
    int r = b->items[i]->region, j = i + 1;
    if (!r) {
      emit_stmt(e, b->items[i], true);
      i++;
      continue;
    }
    while (j < b->n && b->items[j]->region == r)
      j++;
    emit_region(e, b, i, j);
    i = j;
  }
}

/* ---- the kernel --------------------------------------------------------------------------- */
static void declare_buffers(E *e) {
  const tl_program *p = e->prog;
  if (p->smem_bytes > 0)
    line(e, "%s", e->d->smem);
  for (int i = 0; i < p->nbuffer_slots; i++) {
    const tl_sym *s = p->buffer_syms[i];
    if (s->scope == SCOPE_LOCAL)
      continue;
    if (s->scope == SCOPE_FRAGMENT && s->in_regs && s->packed)
      line(e, "unsigned r_%s[%" PRId64 "]; /* pairs of %s */", s->name, s->per_thread / 2, tl_dtype_name(s->dtype));
    else if (s->scope == SCOPE_FRAGMENT && s->in_regs && s->stages == 2) /* a wg_lag gemm's C: two copies */
      line(e, "%s r_%s_lag[2][%" PRId64 "];", crep((tl_type)s->dtype), s->name, s->per_thread);
    else if (s->scope == SCOPE_FRAGMENT && s->in_regs)
      line(e, "%s r_%s[%" PRId64 "];", crep((tl_type)s->dtype), s->name, s->per_thread);
    if (s->scope == SCOPE_FRAGMENT && s->in_regs)
      region_pointer(e, s);
    else {
      line(e, "%s *const tl_base_%s = (%s *)(tl_smem + %" PRId64 ");", srep(s->dtype), s->name, srep(s->dtype),
           s->smem_offset);
      line(e, "%s *const s_%s = tl_base_%s; (void)s_%s;", srep(s->dtype), s->name, s->name, s->name);
    }
  }
}

/* The prelude of a module: the dialect's, and the tensor maps' where some
 * kernel of the program takes them. */
static void emit_prelude(E *e) {
  put(e, e->d->prelude);
  bool tmaps = false;
  for (const tl_program *k = e->prog; k; k = k->next)
    tmaps |= k->ntmaps > 0;
  if (tmaps)
    put(e, tma_prelude(e));
  put(e, "\n");
}

/* Every kernel of the program, in order, in one module: one prelude, then
 * an entry point per kernel (each kernel's own tl_emit). */
char *tl_emit_module(tl_arena *a, const tl_program *prog, const tl_codegen *cg, tl_error *err) {
  char *src = tl_arena_strdup(a, "");
  for (const tl_program *k = prog; k; k = k->next) {
    char *one = tl_emit(a, k, cg, err);
    if (!one)
      return NULL;
    src = tl_arena_printf(a, "%s%s%s", src, k == prog ? "" : "\n", one);
  }
  return src;
}

char *tl_emit_cuda(tl_arena *a, const tl_program *prog, tl_error *err) {
  return tl_emit(a, prog, &tl_codegen_cuda, err);
}

char *tl_emit(tl_arena *a, const tl_program *prog, const tl_codegen *cg, tl_error *err) {
  E ee = {.a = a, .prog = prog, .err = err}, *e = &ee;
  e->d = cg->dialect == TL_DIALECT_HIP ? &dialect_hip : &dialect_cuda;
  e->barrier = e->d->barrier;
  e->T = prog->threads[0] * prog->threads[1] * prog->threads[2];
  tl_fold_fills(e->a, &prog->body, &e->folded);
  assert((prog->lowered & TL_RAN_ALL) == TL_RAN_ALL); /* pass_range, pass_barrier, pass_raster ran */
  if (prog->kernel_index == 0) /* the module's prelude, before its first kernel (tl_emit_module) */
    emit_prelude(e);
  /* signature: tensors as pointers, scalars by value, in params order */
  char *sig = tl_arena_strdup(a, "");
  for (int i = 0; i < prog->nparams; i++) {
    const tl_sym *s = prog->params[i];
    const char *decl = s->kind == SYM_TENSOR ? S("%s *__restrict__ g_%s", srep(s->dtype), s->name)
                                             : S("%s p_%s", s->dtype == TL_BOOL ? "unsigned char" : crep((tl_type)s->dtype), s->name);
    sig = tl_arena_printf(a, "%s%s%s", sig, i ? ", " : "", decl);
  }
  /* the tensor maps (pass_tma.c) after them, in the order of prog->tmaps */
  for (int i = 0; i < prog->ntmaps; i++)
    sig = tl_arena_printf(a, "%s%sconst __grid_constant__ tl_tensor_map tl_tmap%d", sig, sig[0] ? ", " : "", i);
  /* -maxrregcount is ignored for kernels with launch bounds, so a register
   * cap given as an option replaces them */
  const char *cluster = "";
  if (prog->cl_size > 1) /* the kernel's cluster or its multicast loop's (pass_cluster.c) */
    cluster = S("__cluster_dims__(%" PRId64 ", %" PRId64 ", %" PRId64 ") ", prog->cl[0], prog->cl[1], prog->cl[2]);
  const char *bounds = S(e->d->bounds, e->T);
  if (prog->wspec_threads) /* the registers at entry follow from the blocks per SM asked (pass_wspec.c) */
    bounds = S("__launch_bounds__(%" PRId64 ", %d) ", e->T * prog->slices + prog->wspec_threads, prog->wspec_blocks);
  else if (prog->max_registers && cg->dialect == TL_DIALECT_CUDA)
    bounds = "";
  else if (prog->max_registers) /* AMD: the launch bounds stay, with a cap on VGPRs */
    bounds = S("%s__attribute__((amdgpu_num_vgpr(%d))) ", bounds, prog->max_registers);
  line(e, "%s %s%s%s(%s) {", e->d->kernel, cluster, bounds, prog->entry, sig);
  e->indent++;
  /* a one-dimensional block takes the x index alone, so that the compiler
   * knows tl_tid's range from the launch bounds */
  if (e->T == prog->threads[0])
    line(e, "const int tl_tid = (int)%s;", e->d->tid[0]);
  else
    line(e, "const int tl_tid = (int)(%s + %" PRId64 " * (%s + %" PRId64 " * %s));", e->d->tid[0], prog->threads[0],
         e->d->tid[1], prog->threads[1], e->d->tid[2]);
  line(e, "(void)tl_tid;");
  /* programmatic dependent launch (compile.c sets the flag on sm_90 and later): a kernel after another
   * may be launched as the last blocks of that one exit (the driver starts it before that kernel's
   * end), and waits, before anything else, until that one has ended and its writes are visible, as a
   * launch after it would (griddepcontrol.wait does nothing where the launch was an ordinary one).  No
   * kernel triggers the next earlier (griddepcontrol.launch_dependents): the next kernel's blocks would
   * then wait on the multiprocessors while this one runs, which made a W4A16 split-K GEMM whose second
   * kernel has 512 blocks 20% slower on an H100 (bench/README.md) */
  if (prog->pdl_wait)
    line(e, "asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");");
  for (int i = 0; i < prog->nparams; i++) {
    const tl_sym *s = prog->params[i];
    if (s->kind == SYM_SCALAR)
      line(e, "const %s %s = %s;", crep((tl_type)s->dtype), vname(e, s),
           s->dtype == TL_BOOL ? S("p_%s != 0", s->name) : S("p_%s", s->name));
  }
  for (int i = 0; i < prog->nparams; i++) {
    const tl_sym *s = prog->params[i];
    if (s->kind == SYM_TENSOR)
      for (int d = 0; d < s->ndim; d++)
        line(e, "const long long g_%s_d%d = (long long)(%s); (void)g_%s_d%d;", s->name, d, ex(e, s->shape[d]), s->name, d);
  }
  if (prog->cl_axis >= 0) /* the block's rank in its cluster (pass_cluster.c: one axis over 1) */
    line(e, "unsigned tl_crank; asm(\"mov.u32 %%0, %%%%cluster_ctarank;\" : \"=r\"(tl_crank));");
  if (!prog->persistent)
    block_vars(e, e->d->bid, e->d->nblocks);
  if (prog->persistent) { /* the grid's tiles (pass_wspec.c): the launch starts fewer blocks */
    const char *g[3] = {"1", "1", "1"};
    for (int i = 0; i < prog->ngrid; i++)
      g[i] = ex(e, prog->grid[i]);
    line(e, "const long long tl_tg0 = (long long)(%s), tl_tg1 = (long long)(%s), tl_tg2 = (long long)(%s);", g[0], g[1],
         g[2]);
    line(e, "const long long tl_ntiles = tl_tg0 * tl_tg1 * tl_tg2;");
  }
  declare_buffers(e);
  declare_mbarriers(e);
  if (prog->epi_buffers == 2) /* the TMA stores' panels so far: the staging half of the next (emit_tma_store) */
    line(e, "unsigned tl_epi = 0; (void)tl_epi;");
  emit_producer(e);
  emit_defer_decls(e);
  if (prog->persistent)
    open_tiles(e);
  emit_top(e, &prog->body);
  if (prog->persistent) { /* the next tile's statements after this one's, after a barrier where needed */
    if (prog->tile_barrier)
      barrier_line(e);
    close_tiles(e);
  }
  emit_defer_rest(e);
  if (async_store_last(prog)) /* the shared memory its bulk stores read stays the block's until they are done */
    line(e, "if (tl_tid == 0) asm volatile(\"cp.async.bulk.wait_group 0;\" ::: \"memory\");");
  if (multicasts(prog)) /* no block exits while another may still copy into it or arrive on its mbarriers */
    cluster_barrier(e);
  e->indent--;
  line(e, "}");
  return e->failed ? NULL : e->out.buf;
}
