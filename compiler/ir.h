/*
 * ir.h - the in-memory form of a tile program, shared by every stage of the
 * compiler: the parser (parse.c, expr.c) builds it, the checker (check.c)
 * resolves and types it, the interpreter (interp.c) and the back ends read
 * it.  Everything of one program lives in one arena and is freed at once.
 *
 * Two states:
 *   - parsed: names are strings (tl_expr.name), nothing is typed;
 *   - checked (after tl_check succeeded): every name is resolved to a
 *     tl_sym, every expression has a type, constants are folded into
 *     E_CONST nodes, regions have constant extents, every symbol that holds
 *     a run-time value has a slot.  The contracts below say "after check".
 *
 * Every node keeps the RFC 6901 JSON Pointer of the JSON value it came
 * from; expression nodes also keep their 1-based column in that string.
 */
#ifndef TL_IR_H
#define TL_IR_H

#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "dtype.h"
#include "../proto/tl_error.h"

/* ---- limits (proto/tile-ir-v1.md, "Limits") ----------------------------- */
#define TL_MAX_PROGRAM_BYTES (4u << 20)
#define TL_MAX_JSON_DEPTH 64
#define TL_MAX_STMT_DEPTH 32
#define TL_MAX_STMTS 65536
#define TL_MAX_NAME 64
#define TL_MAX_EXPR_CHARS 4096
#define TL_MAX_EXPR_DEPTH 64
#define TL_MAX_DIMS 8
#define TL_MAX_PARAMS 256
#define TL_MAX_CONSTANTS 1024
#define TL_MAX_THREADS 1024
#define TL_MAX_DIAGS 1000
#define TL_MAX_KERNELS 16      /* kernels of one program ("kernels") */
#define TL_MAX_SLICES 4        /* a pipelined loop's "slices" (named barriers 1 to slices + 1: pass_wspec.c) */
#define TL_MAX_SLICE_SUMS 16   /* the gemm sums (distinct C) of a loop in slices */
#define TL_MAX_WORKSPACES 16   /* workspace buffers of one program ("workspaces") */
#define TL_MAX_WORKSPACE_BYTES ((int64_t)1 << 34) /* all workspaces of a launch together (16 GiB) */

/* ---- arena ----------------------------------------------------------------- */
typedef struct tl_arena tl_arena;
tl_arena *tl_arena_new(void);
void tl_arena_free(tl_arena *a); /* accepts NULL */
/* Zeroed memory; aborts on out-of-memory (an arena is for one compile of a
 * program whose size is limited, so exhaustion is not an input error). */
void *tl_arena_alloc(tl_arena *a, size_t n);
char *tl_arena_strdup(tl_arena *a, const char *s);
char *tl_arena_strndup(tl_arena *a, const char *s, size_t n);
char *tl_arena_printf(tl_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *tl_arena_vprintf(tl_arena *a, const char *fmt, va_list ap);
/* Text grown in an arena, always NUL-terminated (the emitters' output). */
typedef struct tl_text {
  char *buf;
  size_t len, cap;
} tl_text;
void tl_text_put(tl_arena *a, tl_text *t, const char *s);
/* Growable array of pointers in an arena. */
typedef struct tl_vec {
  void **items;
  int n, cap;
} tl_vec;
void tl_vec_push(tl_arena *a, tl_vec *v, void *item);

/* ---- diagnostics ----------------------------------------------------------- */
/* One diagnostic: `FILE:POINTER[:COLUMN]: error: MESSAGE` when pointer is set,
 * `FILE:LINE:COLUMN: error: MESSAGE` for malformed JSON (line > 0). */
typedef struct tl_diag {
  const char *pointer; /* JSON Pointer ("" = whole document), or NULL for JSON syntax errors */
  int line;            /* JSON syntax errors: 1-based line */
  int column;          /* 1-based column inside an expression string (0 = none), or JSON column */
  const char *message;
} tl_diag;

typedef struct tl_diags {
  tl_arena *arena;
  tl_diag *items;
  int n, cap;
  bool truncated; /* more than TL_MAX_DIAGS were reported */
} tl_diags;

void tl_diag_add(tl_diags *d, const char *pointer, int column, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Formats d as the lines `tlc check` prints (file is the name to show). */
void tl_diags_print(const tl_diags *d, const char *file, void *fp /* FILE* */);

/* ---- types of expressions ------------------------------------------------- */
/* A type is a tl_dtype, or one of the two "untyped" kinds that folded
 * constant expressions have until they meet a typed operand (TILE-IR.md 6:
 * constants fold in int64/float64). */
enum { TL_TY_UINT = TL_DTYPE_COUNT, /* untyped integer, value in .i (int64) */
       TL_TY_UREAL,                 /* untyped real, value in .f (float64) */
       TL_TY_NONE };
typedef int tl_type;
const char *tl_type_name(tl_type t); /* "int32", "integer constant", "real constant" */

/* ---- symbols ------------------------------------------------------------- */
typedef enum tl_sym_kind {
  SYM_CONST,     /* a constant: value in .cval, type .type (untyped int/real or bool) */
  SYM_SCALAR,    /* a scalar parameter (int32/int64/float32/bool) */
  SYM_TENSOR,    /* a tensor parameter (global memory) */
  SYM_BLOCK_VAR, /* bx, by, bz: int32 */
  SYM_LOOP_VAR,  /* serial/unroll/vectorized/pipelined/parallel variable: int32 */
  SYM_LET,       /* immutable named value; type .type */
  SYM_VAR,       /* alloc_var: per-thread mutable scalar of .dtype */
  SYM_BUFFER,    /* alloc_shared / alloc_fragment / alloc_local */
} tl_sym_kind;

typedef enum tl_scope { SCOPE_NONE, SCOPE_GLOBAL, SCOPE_SHARED, SCOPE_FRAGMENT, SCOPE_LOCAL } tl_scope;

typedef struct tl_expr tl_expr;
typedef struct tl_stmt tl_stmt;

/* A shared-memory layout given by annotate_layout. */
typedef struct tl_layout {
  bool swizzle;          /* "swizzle" */
  int nvars;             /* explicit map: vars -> index expressions */
  struct tl_sym **vars;  /* loop-var-like symbols bound to the element's indices */
  int nindex;
  tl_expr **index;       /* the storage index (one or more dimensions) */
  const char *pointer;
} tl_layout;

typedef struct tl_sym {
  const char *name;
  tl_sym_kind kind;
  const char *pointer; /* where it is declared */
  tl_dtype dtype;      /* element/value dtype (SCALAR, TENSOR, VAR, BUFFER) */
  tl_type type;        /* value type (CONST, LET, SCALAR, VAR, BLOCK_VAR, LOOP_VAR) */
  tl_scalar cval;      /* SYM_CONST: the folded value */
  tl_scope scope;      /* TENSOR: GLOBAL; BUFFER: SHARED/FRAGMENT/LOCAL */
  int ndim;            /* TENSOR, BUFFER */
  tl_expr *shape[TL_MAX_DIMS]; /* TENSOR: dimension expressions over constants and scalar params
                                  (after check: typed; E_CONST when static) */
  int64_t dims[TL_MAX_DIMS];   /* BUFFER: folded extents; TENSOR: folded extent or -1 when dynamic */
  int64_t align;               /* TENSOR: promised alignment in bytes (default 16) */
  int param_index;             /* SCALAR, TENSOR: position in params (ABI order) */
  bool workspace;              /* TENSOR: a workspace buffer ("workspaces"): global memory the runtime
                                  allocates for each launch, not an argument; the last
                                  prog->nworkspaces params */
  bool ws_zeroed;              /* TENSOR, a workspace: "zeroed": all zeros at the start of every launch,
                                  and left so by it (proto/tile-ir-v1.md 3.1) */
  int slot;                    /* after check: value slot (SCALAR, BLOCK_VAR, LOOP_VAR, LET, VAR)
                                  in [0, prog->nvalue_slots), or buffer slot (BUFFER) in
                                  [0, prog->nbuffer_slots); -1 for CONST and TENSOR */
  bool varying;                /* after check: may differ between threads of a block
                                  (depends on thread_binding, an alloc_var or alloc_local) */
  bool thread_dep;             /* after check: varying through thread_binding or a local buffer
                                  (not only through alloc_var values) */
  tl_layout *layout;           /* BUFFER (shared): from annotate_layout, or NULL */
  struct tl_sym *view_of;      /* after check, a view (op "view"): the tensor or shared buffer whose
                                  memory it is (never itself a view); NULL for every other symbol */
  bool viewed;                 /* after check: a tensor or shared buffer some view aliases (it and
                                  its views stay row-major: no swizzle, TMA or pipeline stages) */
  tl_layout *global_layout;    /* TENSOR: annotate_layout on a global buffer: recorded, and ignored (it
                                  changes only where elements live; proto/tile-ir-v1.md 5.7) */
  tl_expr *init;               /* VAR: initial value or NULL; LET: its value */
  /* after pass_place (back ends): where a buffer lives */
  bool in_regs;                /* FRAGMENT held in registers, blocked layout: thread t holds
                                  flat elements [t * per_thread, (t + 1) * per_thread) */
  int64_t per_thread;          /* in_regs: elements per thread */
  int64_t smem_offset;         /* SHARED, and FRAGMENT not in_regs: byte offset in the block's
                                  dynamic shared memory (-1 if none) */
  int reg_layout;              /* in_regs: TL_LAYOUT_BLOCKED, or TL_LAYOUT_MMA: the accumulator
                                  layout of mma.m16n8k16 over a grid of mma_wm x mma_wn warps,
                                  each holding mma_mi x mma_ni tiles of 16 x 8 */
  int mma_wm, mma_wn;
  int64_t mma_mi, mma_ni;
  bool mma_interleaved;        /* TL_LAYOUT_MMA (and _ROWS), mma_mi > 1 only: the warps' row tiles
                                  interleave, tile i of warp row wm holding rows
                                  [(i * mma_wm + wm) * 16, +16) instead of [(wm * mma_mi + i) * 16,
                                  +16): wgmma's accumulator when a warpgroup issues mma_mi m64
                                  instructions (each covers 64 consecutive rows, 16 per warp);
                                  tl_mma_row_strides is the one formula */
  bool packed;                 /* in_regs, TL_LAYOUT_MMA, 16-bit floats: held as pairs of values
                                  (unsigned r_X[per_thread / 2], local indices 2i and 2i + 1 in
                                  word i, the lower first); only written whole by a copy from
                                  a fragment of the same layout and read as the A operand of
                                  gemms taking A from registers (pass_place.c) */
  bool tma_dst;                /* after pass_tma: written by bulk tensor copies in a swizzle (128-,
                                  64- or 32-byte), so 1024-byte aligned like a wgmma operand */
  bool wgmma_op;               /* swizzled operand of a wgmma gemm: rows of 64 elements in the
                                  128-byte swizzle mode (wider rows are stored as panels of 64
                                  columns, one after another), 1024-byte aligned */
  bool swizzled;               /* smem 2-D 16-bit buffer stored with the XOR swizzle of 16-byte
                                  chunks (tl_swz in prelude_cuda.h) */
  bool rotates;                /* after pass_pipeline: a shared buffer that one parallel loop of a
                                  software-pipelined loop's body writes whole each iteration and
                                  that the loop's wgmma gemm reads with its group left in flight,
                                  or the buffer of a reg_prefetch copy: `stages` (2) copies,
                                  iteration c using copy c % 2 (pass_pipeline.c: rotatable) */
  int64_t stages;              /* after pass_pipeline: copies of a shared buffer that a pipelined
                                  loop rotates through (1 when not pipelined); of a fragment in
                                  registers: 2 for the C of a wg_lag loop's gemm (its two copies)
                                  and for the fragment of a lag_load copy */
  bool has_range;              /* after pass_range: the value of a block, loop or let variable
                                  lies in [rlo, rhi] */
  int64_t rlo, rhi;
  bool region_used;            /* after pass_split: a register fragment or local buffer of the
                                  kernel's top level that some region copies in and out */
} tl_sym;

/* TL_LAYOUT_MMA_ROWS: a 1-D fragment indexed by the rows of an mma-layout
 * fragment (one warp along N): thread t holds the 2 * mma_mi rows its
 * accumulator tiles touch, (t / 32) * 16 * mma_mi + (r / 2) * 16 +
 * (t % 32) / 4 + (r % 2) * 8 for local index r, the same in the 4 lanes of
 * a quad. */
enum { TL_LAYOUT_BLOCKED, TL_LAYOUT_MMA, TL_LAYOUT_MMA_ROWS, TL_LAYOUT_MFMA, TL_LAYOUT_WMMA, TL_LAYOUT_WMMA_GFX12 };

/* The rows of an mma-layout fragment (TL_LAYOUT_MMA or TL_LAYOUT_MMA_ROWS):
 * tile i of the warps in warp row wm starts at row wm * *warp_stride +
 * i * *tile_stride, that is wm * mma_mi * 16 + i * 16, or (i * mma_wm + wm)
 * * 16 when the tiles interleave (mma_interleaved; pass_place.c).  The one
 * description every consumer of the layout reads (ir.c). */
void tl_mma_row_strides(const tl_sym *s, int64_t *warp_stride, int64_t *tile_stride);

/* The symbol whose memory s is: s itself, or the tensor or shared buffer a
 * view aliases.  Every question of "the same memory" asks it (barriers,
 * the verifier). */
static inline const tl_sym *tl_mem_root(const tl_sym *s) { return s && s->view_of ? s->view_of : s; }

/* The AMD matrix-core layouts (HIP targets only; pass_place.c chooses them,
 * amd_layout.c describes them, emit_cuda.c lowers them).  All cover a grid
 * of mma_wm x mma_wn wavefronts (wavefront w = t / W at (w / mma_wn, w % mma_wn)), each
 * holding mma_mi x mma_ni tiles of 16 x 16; local index r is tile
 * r / E, (r / E) / mma_ni down and (r / E) % mma_ni across, item r % E:
 *   TL_LAYOUT_MFMA: the accumulator of v_mfma_f32_16x16x16{f16,bf16_1k}
 *     (W = 64, E = 4): lane l, item v holds tile row (l / 16) * 4 + v,
 *     column l % 16;
 *   TL_LAYOUT_WMMA: the accumulator of v_wmma_f32_16x16x16_{f16,bf16} in
 *     wave32 on gfx11 (W = 32, E = 8): lane l, item v holds tile row
 *     2 * v + l / 16, column l % 16;
 *   TL_LAYOUT_WMMA_GFX12: the same instructions in wave32 on gfx12 (RDNA4;
 *     builtins ..._w32_gfx12) (W = 32, E = 8): lane l, item v holds tile row
 *     8 * (l / 16) + v, column l % 16.
 * tl_amd_frag_map is the one description of these maps: the emitter prints
 * it and the tests evaluate it.  The instructions' lane maps are AMD's
 * (its matrix instruction calculator; amd_layout.c lists the sources by
 * tl_amd_operand_map and tests/unit/test_amd_layouts.c checks against
 * them). */

/* One coordinate as a sum of terms ((x / div) % mod) * mul, x the thread
 * index in the block (or the lane) when of_r is false, the local index (or
 * the operand's item) when true; mod 0 means no modulo. */
typedef struct tl_amd_term {
  bool of_r;
  int64_t div, mod, mul;
} tl_amd_term;
typedef struct tl_amd_coord {
  int n;
  tl_amd_term t[8];
} tl_amd_coord;
/* True for the AMD matrix-core layouts (TL_LAYOUT_MFMA, TL_LAYOUT_WMMA,
 * TL_LAYOUT_WMMA_GFX12) (amd_layout.c, like every tl_amd_ function here). */
bool tl_amd_layout(int layout);
/* The lanes of a wavefront of such a layout (64 for MFMA, 32 for WMMA) and
 * the accumulator items each lane holds per 16 x 16 tile (4 or 8). */
int tl_amd_layout_wave(int layout);
int tl_amd_layout_items(int layout);
/* The row and column of the element that thread t holds at local index r
 * of fragment s (in_regs, reg_layout one of tl_amd_layout's; asserts
 * otherwise). */
void tl_amd_frag_map(const tl_sym *s, tl_amd_coord *row, tl_amd_coord *col);
/* The origin (top left element) of the 16 x 16 tile holding local index r
 * of thread t: the part of tl_amd_frag_map that the gemm lowering also uses
 * for the rows of A and the columns of B each tile reads. */
void tl_amd_tile_origin(const tl_sym *s, tl_amd_coord *row, tl_amd_coord *col);
/* The operand of one matrix instruction (layout TL_LAYOUT_MFMA,
 * TL_LAYOUT_WMMA or TL_LAYOUT_WMMA_GFX12 says which): lane l, item v of
 * operand A supplies A[mn][k] of the 16 x 16 tile (mn a row), of operand B
 * (b true) supplies B[k][mn] (mn a column).  Items: 4 (MFMA), 16 (WMMA on
 * gfx11: lanes 16-31 repeat lanes 0-15) or 8 (WMMA on gfx12). */
void tl_amd_operand_map(int layout, bool b, tl_amd_coord *mn, tl_amd_coord *k);
/* The items per lane of an operand of layout's instruction (4, 16 or 8). */
int tl_amd_operand_items(int layout);
/* The value of c for x (thread or lane) and r (local index or item). */
int64_t tl_amd_coord_eval(const tl_amd_coord *c, int64_t x, int64_t r);

/* ---- expressions ------------------------------------------------------------ */
typedef enum tl_expr_kind {
  E_CONST, /* a literal or folded constant: .val, .type */
  E_NAME,  /* parsed: .name; checked: .sym (SCALAR, BLOCK_VAR, LOOP_VAR, LET, VAR) */
  E_INDEX, /* buffer element .sym[args...]: parsed .name; checked .sym (TENSOR or BUFFER) */
  E_UNARY, /* .op in {'-', '~', OP_NOT}; args[0] */
  E_BINARY,/* .op; args[0], args[1] */
  E_CALL,  /* parsed: .name; checked: .fn, .dtype_arg (infinity/max_value/min_value/cast/
              reinterpret), args (a dtype argument is not in args after check) */
} tl_expr_kind;

/* Binary and unary operators (single-character ones are their ASCII code). */
enum {
  OP_FLOORDIV = 256, /* // */
  OP_SHL,            /* << */
  OP_SHR,            /* >> */
  OP_LE, OP_GE, OP_EQ, OP_NE, /* '<' and '>' are their ASCII codes */
  OP_AND, OP_OR, OP_NOT,
};

/* The functions of expressions (proto/tile-ir-v1.md 6.5), one row each:
 * X(ID, "name", arguments (as written: a dtype argument counts), reserved).
 * The checker, the interpreter and IR dumps read this table.  "reserved" is 1
 * for the functions of the first version, whose names programs may not
 * declare; later ones are 0, so that adding one never breaks a program that
 * names a value like it (7.5). */
#define TL_FNS(X)                                                                                          \
  X(FN_CEILDIV, "ceildiv", 2, 1) X(FN_MIN, "min", 2, 1) X(FN_MAX, "max", 2, 1) X(FN_ABS, "abs", 1, 1)         \
  X(FN_EXP, "exp", 1, 1) X(FN_EXP2, "exp2", 1, 1) X(FN_LOG, "log", 1, 1) X(FN_LOG2, "log2", 1, 1)            \
  X(FN_SQRT, "sqrt", 1, 1) X(FN_RSQRT, "rsqrt", 1, 1) X(FN_TANH, "tanh", 1, 1)                              \
  X(FN_SIGMOID, "sigmoid", 1, 1) X(FN_FLOOR, "floor", 1, 1) X(FN_CEIL, "ceil", 1, 1)                        \
  X(FN_ROUND, "round", 1, 1) X(FN_POW, "pow", 2, 1) X(FN_FMA, "fma", 3, 1)                                  \
  X(FN_IF_THEN_ELSE, "if_then_else", 3, 1) X(FN_INFINITY, "infinity", 1, 1)                                \
  X(FN_MAX_VALUE, "max_value", 1, 1) X(FN_MIN_VALUE, "min_value", 1, 1) X(FN_CAST, "cast", 2, 1)            \
  X(FN_REINTERPRET, "reinterpret", 2, 1) X(FN_THREAD_BINDING, "thread_binding", 1, 1)                       \
  X(FN_ERF, "erf", 1, 0) X(FN_SIN, "sin", 1, 0) X(FN_COS, "cos", 1, 0) X(FN_TAN, "tan", 1, 0)               \
  X(FN_LOG1P, "log1p", 1, 0) X(FN_EXPM1, "expm1", 1, 0) X(FN_LOG10, "log10", 1, 0)                          \
  X(FN_TRUNC, "trunc", 1, 0) X(FN_ISNAN, "isnan", 1, 0) X(FN_ISINF, "isinf", 1, 0)                          \
  X(FN_CLAMP, "clamp", 3, 0)

typedef enum tl_fn {
  FN_NONE,
#define TL_X(id, name, nargs, reserved) id,
  TL_FNS(TL_X)
#undef TL_X
  FN_COUNT
} tl_fn;
/* The arguments a call of f takes as written, and whether its name is
 * reserved (TL_FNS). */
int tl_fn_nargs(tl_fn f);
bool tl_fn_reserved(tl_fn f);
/* Floor division and its remainder (the sign of b), as // and % compute on
 * integers (proto/tile-ir-v1.md 6): b nonzero, not INT64_MIN // -1. */
int64_t tl_floordiv64(int64_t a, int64_t b);
int64_t tl_floormod64(int64_t a, int64_t b);
/* Sets *y to the float64 value of math function f of one argument (exp ..
 * round, erf .. trunc) at x, as the checker folds it and the interpreter
 * computes it: the C library's function (proto/tile-ir-v1.md 9.6).  Returns
 * false (and sets nothing) when f is not such a function. */
bool tl_math1(tl_fn f, double x, double *y);
const char *tl_fn_name(tl_fn f);

struct tl_expr {
  tl_expr_kind kind;
  int op;              /* E_UNARY, E_BINARY */
  tl_type type;        /* after check: the type the node evaluates in (a tl_dtype, or
                          TL_TY_UINT/TL_TY_UREAL only for folded constants that never met a
                          typed operand, e.g. a whole constant extent) */
  int column;          /* 1-based column of the node's first character in its string */
  const char *pointer; /* JSON Pointer of the string (or number) it came from */
  tl_scalar val;       /* E_CONST */
  const char *name;    /* parsed: E_NAME, E_INDEX, E_CALL */
  tl_sym *sym;         /* checked: E_NAME, E_INDEX */
  tl_fn fn;            /* checked: E_CALL */
  tl_dtype dtype_arg;  /* checked: E_CALL of infinity/max_value/min_value/cast/reinterpret */
  int nargs;
  tl_expr **args;
  /* after pass_range (integer expressions only) */
  bool has_range;      /* the value lies in [rlo, rhi] whatever the run-time values */
  int64_t rlo, rhi;
  bool no_wrap;        /* a signed +, - or * whose result provably fits its type: printed as
                          plain arithmetic instead of the wrapping form */
  uint8_t inside;      /* an E_INDEX of a tensor: bit d set where index d provably lies in
                          [0, dims[d]) (its bounds guard left out; TL_MAX_DIMS is 8) */
};

/* ---- regions ----------------------------------------------------------------- */
/* A region of a buffer or tensor: after check, ndim == sym->ndim and for each
 * dimension d the elements lo[d] .. lo[d]+ext[d]-1 (lo an int32/int64
 * expression, ext a constant >= 1; lo == NULL means 0). */
typedef struct tl_region {
  const char *text;    /* the region string as written */
  const char *pointer;
  const char *name;    /* parsed buffer name */
  tl_sym *sym;         /* checked */
  int ndim;
  tl_expr *lo[TL_MAX_DIMS];
  int64_t ext[TL_MAX_DIMS];
  /* parsed form: per written index either a single index (is_slice false,
   * start in lo_expr), or a slice lo:hi (either may be NULL) */
  int nwritten;
  bool is_slice[TL_MAX_DIMS];
  tl_expr *w_lo[TL_MAX_DIMS], *w_hi[TL_MAX_DIMS];
  int w_col[TL_MAX_DIMS];
  bool whole;          /* written as a bare name */
  /* after pass_range, for a tensor's region: dimension d provably lies inside the tensor
   * (its start's range plus the extent within a constant dimension), so its bounds guard
   * is dropped; a dimension not proven keeps its guard */
  bool inside[TL_MAX_DIMS];
} tl_region;

/* ---- statements ---------------------------------------------------------- */
/* The statement kinds, one row each: X(KIND, name in IR dumps, flags).  The
 * fields each kind uses are listed at tl_stmt.  Flags:
 *   TL_KIND_TILE: block-level by its kind (a tile operator, a parallel loop,
 *     an annotation, sync_threads; an alloc is block-level by its scope and
 *     a loop or if by what it holds: tl_stmt.block_level);
 *   TL_KIND_BODY: has a body (.body); TL_KIND_ELSE: may have .else_body.
 *   S_ALLOC:       alloc_shared/alloc_fragment/alloc_local: .sym (BUFFER)
 *   S_ALLOC_VAR:   .sym (VAR), .value = init or NULL
 *   S_LET:         .sym (LET), .value
 *   S_COPY:        .src, .dst
 *   S_FILL:        fill and clear: .dst, .value (clear: constant 0)
 *   S_GEMM:        .A .B .C, .trans_a, .trans_b, .policy, .clear_accum, .k_pack
 *   S_REDUCE:      .reduce_type, .src, .dst, .dim, .clear
 *   S_CUMSUM:      .src, .dst, .dim, .reverse
 *   S_CLUSTER_REDUCE: .reduce_type (sum, max or min), .dst (a whole register fragment)
 *   S_ATOMIC_ADD:  .dst, and .src or .value
 *   S_PARALLEL:    .nvars, .vars, .extents, .body
 *   S_LOOP:        serial/unroll/vectorized/pipelined: .loop_kind, .var, .start, .extent,
 *                  .step, .body; pipelined: .num_stages, .order, .stage
 *   S_IF:          .value = cond, .body = then, .else_body
 *   S_ANNOTATE_LAYOUT: .layout_syms/.layouts: the buffers' sym->layout is set
 *   S_USE_SWIZZLE: .panel_size, .order_column, .enable
 *   S_SYNC_THREADS
 *   S_ASSIGN:      .lhs (E_INDEX or E_NAME of a VAR), .assign_op (0 for '='), .value */
enum { TL_KIND_TILE = 1, TL_KIND_BODY = 2, TL_KIND_ELSE = 4 };
#define TL_STMT_KINDS(X)                                                                                   \
  X(S_ALLOC, "alloc", 0)                                                                                   \
  X(S_ALLOC_VAR, "alloc_var", 0)                                                                           \
  X(S_LET, "let", 0)                                                                                       \
  X(S_COPY, "copy", TL_KIND_TILE)                                                                          \
  X(S_FILL, "fill", TL_KIND_TILE)                                                                          \
  X(S_GEMM, "gemm", TL_KIND_TILE)                                                                          \
  X(S_REDUCE, "reduce", TL_KIND_TILE)                                                                      \
  X(S_CUMSUM, "cumsum", TL_KIND_TILE)                                                                      \
  X(S_ATOMIC_ADD, "atomic_add", TL_KIND_TILE)                                                              \
  X(S_PARALLEL, "parallel", TL_KIND_TILE | TL_KIND_BODY)                                                   \
  X(S_LOOP, "loop", TL_KIND_BODY)                                                                          \
  X(S_IF, "if", TL_KIND_BODY | TL_KIND_ELSE)                                                               \
  X(S_ANNOTATE_LAYOUT, "annotate_layout", TL_KIND_TILE)                                                    \
  X(S_USE_SWIZZLE, "use_swizzle", TL_KIND_TILE)                                                            \
  X(S_SYNC_THREADS, "sync_threads", TL_KIND_TILE)                                                          \
  X(S_ATOMIC, "atomic", 0)                                                                                 \
  X(S_ASSIGN, "assign", 0)                                                                                 \
  X(S_PRINT, "print", 0)                                                                                   \
  X(S_ASSERT, "device_assert", 0)                                                                          \
  X(S_VIEW, "view", 0)                                                                                     \
  X(S_CLUSTER_REDUCE, "cluster_reduce", TL_KIND_TILE)

typedef enum tl_stmt_kind {
#define TL_X(kind, name, flags) kind,
  TL_STMT_KINDS(TL_X)
#undef TL_X
} tl_stmt_kind;
/* (not in tl_stmt_kind, so that a switch over the kinds needs no case for it) */
#define TL_X(kind, name, flags) +1
enum { TL_STMT_KIND_COUNT = 0 TL_STMT_KINDS(TL_X) };
#undef TL_X

/* The name of a kind in IR dumps ("alloc", "loop", ...), and its TL_KIND_*
 * flags (ir.c). */
const char *tl_stmt_kind_name(tl_stmt_kind k);
/* The PTX name of a matrix instruction's operand or accumulator type:
 * "f16", "bf16", "e4m3", "e5m2", "s8", "u8", "s32", "f32"; NULL for the
 * other dtypes. */
const char *tl_mma_ptx_type(tl_dtype t);
unsigned tl_stmt_kind_flags(tl_stmt_kind k);

/* The ops of Tile IR v1 as written in a program's "op" field
 * (proto/tile-ir-v1.md 5), one row each: X(ID, "op", KIND, the fields its
 * object may have, "op" first, in the order "unknown field" messages list
 * them).  Several ops share a kind (alloc_shared/alloc_fragment/alloc_local,
 * fill/clear, the four loops); an assignment is a string, not an op.  The
 * order is the order of "did you mean" hints among equally close names. */
#define TL_STMT_OPS(X)                                                                                     \
  X(OP_ALLOC_SHARED, "alloc_shared", S_ALLOC, "op", "name", "shape", "dtype")                              \
  X(OP_ALLOC_FRAGMENT, "alloc_fragment", S_ALLOC, "op", "name", "shape", "dtype")                          \
  X(OP_ALLOC_LOCAL, "alloc_local", S_ALLOC, "op", "name", "shape", "dtype")                                \
  X(OP_ALLOC_VAR, "alloc_var", S_ALLOC_VAR, "op", "name", "dtype", "init")                                 \
  X(OP_LET, "let", S_LET, "op", "name", "value")                                                           \
  X(OP_COPY, "copy", S_COPY, "op", "src", "dst", "tma", "eviction_policy")                                 \
  X(OP_FILL, "fill", S_FILL, "op", "dst", "value")                                                         \
  X(OP_CLEAR, "clear", S_FILL, "op", "dst")                                                                \
  X(OP_GEMM, "gemm", S_GEMM, "op", "A", "B", "C", "transpose_A", "transpose_B", "policy", "clear_accum",   \
    "k_pack")                                                                                              \
  X(OP_REDUCE, "reduce", S_REDUCE, "op", "type", "src", "dst", "dim", "clear")                             \
  X(OP_CUMSUM, "cumsum", S_CUMSUM, "op", "src", "dst", "dim", "reverse")                                   \
  X(OP_ATOMIC_ADD, "atomic_add", S_ATOMIC_ADD, "op", "dst", "src", "value")                                \
  X(OP_PARALLEL, "parallel", S_PARALLEL, "op", "vars", "extents", "body")                                  \
  X(OP_PIPELINED, "pipelined", S_LOOP, "op", "var", "extent", "start", "num_stages", "tma",                        \
    "warp_specialize", "order", "stage", "overlap", "pingpong", "cluster", "k_group", "slices", "body")                                                                                \
  X(OP_SERIAL, "serial", S_LOOP, "op", "var", "extent", "start", "step", "body")                           \
  X(OP_UNROLL, "unroll", S_LOOP, "op", "var", "extent", "start", "step", "body")                           \
  X(OP_VECTORIZED, "vectorized", S_LOOP, "op", "var", "extent", "start", "step", "body")                   \
  X(OP_IF, "if", S_IF, "op", "cond", "then", "else")                                                       \
  X(OP_ANNOTATE_LAYOUT, "annotate_layout", S_ANNOTATE_LAYOUT, "op", "layouts")                             \
  X(OP_USE_SWIZZLE, "use_swizzle", S_USE_SWIZZLE, "op", "panel_size", "order", "enable")                   \
  X(OP_SYNC_THREADS, "sync_threads", S_SYNC_THREADS, "op", "fence")                                        \
  X(OP_ATOMIC, "atomic", S_ATOMIC, "op", "type", "dst", "value", "old")                                    \
  X(OP_CUMMAX, "cummax", S_CUMSUM, "op", "src", "dst", "dim", "reverse")                                   \
  X(OP_CUMMIN, "cummin", S_CUMSUM, "op", "src", "dst", "dim", "reverse")                                   \
  X(OP_PRINT, "print", S_PRINT, "op", "value", "msg")                                                      \
  X(OP_DEVICE_ASSERT, "device_assert", S_ASSERT, "op", "cond", "msg")                                      \
  X(OP_VIEW, "view", S_VIEW, "op", "name", "src", "shape", "dtype")                                      \
  X(OP_CLUSTER_REDUCE, "cluster_reduce", S_CLUSTER_REDUCE, "op", "type", "dst")

typedef enum tl_stmt_op {
#define TL_X(id, name, kind, ...) id,
  TL_STMT_OPS(TL_X)
#undef TL_X
  TL_STMT_OP_COUNT
} tl_stmt_op;

#define TL_MAX_MSG 256     /* characters of a print or device_assert "msg" */
#define TL_MAX_OP_FIELDS 16 /* the most fields a row of TL_STMT_OPS lists, and its NULL */
typedef struct tl_stmt_op_info {
  const char *name;                          /* as written in "op" */
  tl_stmt_kind kind;
  const char *fields[TL_MAX_OP_FIELDS];      /* NULL-terminated */
} tl_stmt_op_info;
extern const tl_stmt_op_info tl_stmt_ops[TL_STMT_OP_COUNT]; /* indexed by tl_stmt_op (ir.c) */
/* The op named name, or -1 when there is none. */
int tl_stmt_op_lookup(const char *name);

/* Walking statements: one walker for every traversal of a body (ir.c).
 * tl_walk visits the statements of a body in document order, each one
 * before and after what it holds:
 *   1. pre(s): TL_WALK_GO goes on with 2-4; TL_WALK_SKIP goes on with s's
 *      next sibling (s's expressions, bodies and post are not visited);
 *   2. expr(x, s) on every node of every expression s holds, pre-order:
 *      .lhs, .value, .start, .extent, .step, the parallel .extents, then
 *      the index expressions (lo) of .src and .dst (after check; parsed
 *      regions have none); TL_WALK_SKIP here skips x's operands;
 *   3. its bodies, by the kind's TL_KIND_BODY / TL_KIND_ELSE (the else body
 *      only when has_else): each between enter_body(s, which) and
 *      leave_body(s, which), which 0 for .body and 1 for .else_body;
 *   4. post(s).
 * Any callback may be NULL (then: go on).  TL_WALK_STOP from pre, expr or
 * post ends the walk at once: no further callback is called, not even the
 * post of the statements around. */
typedef struct tl_body tl_body;
typedef enum tl_walk_act { TL_WALK_GO, TL_WALK_SKIP, TL_WALK_STOP } tl_walk_act;
typedef struct tl_walker {
  tl_walk_act (*pre)(tl_stmt *s, void *user);
  tl_walk_act (*expr)(tl_expr *x, tl_stmt *s, void *user);
  void (*enter_body)(tl_stmt *s, int which, void *user);
  void (*leave_body)(tl_stmt *s, int which, void *user);
  tl_walk_act (*post)(tl_stmt *s, void *user);
} tl_walker;
/* Walks the statements of body b (or statement s) and all they hold.
 * Returns TL_WALK_STOP when a callback stopped the walk, else TL_WALK_GO.
 * The walk does not change the tree; callbacks may change the statements
 * they are given, not the bodies being walked. */
tl_walk_act tl_walk(tl_body *b, const tl_walker *w, void *user);
tl_walk_act tl_walk_stmt(tl_stmt *s, const tl_walker *w, void *user);
/* Visits every node of expression x (NULL: none) pre-order with fn, with
 * the same meaning of its answers (stmt is passed through to fn). */
tl_walk_act tl_walk_expr(tl_expr *x, tl_walk_act (*fn)(tl_expr *x, tl_stmt *stmt, void *user), tl_stmt *stmt,
                         void *user);
/* Does expression x (NULL: none) name s at any node (a variable, a let, a buffer or tensor it indexes)? */
bool tl_expr_names(const tl_expr *x, const tl_sym *s);

typedef enum tl_loop_kind { LOOP_SERIAL, LOOP_UNROLL, LOOP_VECTORIZED, LOOP_PIPELINED } tl_loop_kind;
/* The combining operation of a reduce (its "type") or of a cumsum, cummax or cummin. */
typedef enum tl_reduce_type {
  RED_SUM, RED_MAX, RED_MIN, RED_ABSSUM, RED_ABSMAX, RED_BITAND, RED_BITOR, RED_BITXOR
} tl_reduce_type;
/* The read-modify-write of an "atomic" statement (TL_ATOMIC_NONE: a plain assignment). */
typedef enum tl_atomic_kind { TL_ATOMIC_NONE, TL_ATOMIC_ADD, TL_ATOMIC_MAX, TL_ATOMIC_MIN } tl_atomic_kind;
typedef enum tl_gemm_policy { POLICY_SQUARE, POLICY_FULL_ROW, POLICY_FULL_COL } tl_gemm_policy;
/* A copy's "eviction_policy": how the L2 keeps the lines it reads (a hint; TL_EVICT_NAMES spells them) */
typedef enum tl_evict { TL_EVICT_NORMAL, TL_EVICT_FIRST, TL_EVICT_LAST } tl_evict;
#define TL_EVICT_NAMES {"evict_normal", "evict_first", "evict_last"}

typedef struct tl_body {
  int n;
  tl_stmt **items;
} tl_body;

/* A packed read P[..., g(j)] of a dequantizing loop into a register fragment D of
 * the mma layout (tl_stmt.vec_dequant 2) whose last index g(j) is not j itself
 * (pass_place.c: pair_map proves this for every thread): the thread whose
 * first column is jt (its warp's columns and 2 (lane % 4): emit_cuda.c's
 * mma_row_col_split) finds its pair at columns jt + 8u, jt + 8u + 1 (u the
 * pair's 8-column tile of the warp's mma_ni) at elements lo[u] and hi[u] of
 * P's row counted from the first element of the chunk that holds element
 * g(jt); both in one 32-bit word, lo below hi. */
typedef struct tl_pair_map {
  const tl_expr *read; /* the E_INDEX of P */
  int64_t chunk;       /* P's elements in a chunk of 16, 8 or 4 bytes, the load a thread makes */
  int64_t n;           /* D's mma_ni: the pairs' 8-column tiles */
  int64_t *lo, *hi;    /* n of each */
} tl_pair_map;

struct tl_stmt {
  tl_stmt_kind kind;
  const char *pointer; /* of the statement */
  const char *op_name; /* the "op" as written ("clear", "unroll", ...), or "assignment" */
  bool block_level;    /* after check: a tile operator, parallel loop, shared/fragment alloc,
                          sync_threads, annotation, or a loop/if containing one; such a
                          statement runs once per block with a uniform control path */

  tl_sym *sym;         /* S_ALLOC, S_ALLOC_VAR, S_LET, S_VIEW (the view) */
  const char *view_src; /* S_VIEW: the name of the buffer viewed; its dtype and shape when the
                          view gives none: view_keep_dtype, view_keep_shape */
  bool view_keep_dtype, view_keep_shape;
  tl_expr *value;      /* S_LET, S_ALLOC_VAR init, S_FILL, S_ATOMIC_ADD value, S_IF cond,
                          S_ASSIGN right-hand side, S_PRINT value (or NULL), S_ASSERT cond */
  const char *msg;     /* S_PRINT, S_ASSERT: the "msg" (printable ASCII), or NULL */
  tl_region *src, *dst;
  tl_evict evict;      /* copy: its "eviction_policy", the L2 policy of the lines it reads from a tensor */

  /* gemm */
  tl_sym *A, *B, *C;
  const char *a_name, *b_name, *c_name; /* parsed */
  bool trans_a, trans_b, clear_accum;
  tl_gemm_policy policy;
  int k_pack;

  /* reduce, cumsum */
  tl_reduce_type reduce_type;
  int dim;
  bool clear, reverse;
  bool by_rows;        /* after pass_place: reduce row by row with warp shuffles */
  bool use_mma;        /* after pass_place: gemm lowered to mma.sync + ldmatrix */
  bool use_wgmma;      /* after pass_place: (with use_mma) gemm lowered to wgmma.mma_async m64nNk16 (k32 for 8-bit),
                          one warpgroup per 64 rows of C, B (and A, unless a_regs) read from shared memory */
  bool use_amd_mma;    /* after pass_place: gemm lowered to MFMA or WMMA (C's reg_layout says which) */
  const char *why_not_wgmma; /* after pass_place, where the target has wgmma: why this gemm does
                          not run on it (NULL when it does) */
  int wg_pending;      /* after pass_pipeline, a gemm on wgmma: the wgmma groups left in flight
                          when it ends (the N of its wgmma.wait_group; pass_pipeline.c says when
                          N > 0 is safe) */
  const char *pend_why; /* after pass_pipeline, a gemm on wgmma in a pipelined loop that waits for 0
                          though it might leave its group in flight: why (NULL otherwise) */
  bool wg_drain;       /* after pass_pipeline: a pipelined loop whose gemm leaves groups in flight;
                          they are waited for (wgmma.wait_group 0) as the loop ends */
  int wg_lag;          /* after pass_pipeline, a pipe loop with wg_drain: 0, or its gemm clears C
                          each iteration and the loop's other statements that are not prefetched
                          (the tail, which reads C) run one iteration late, after the next
                          iteration's gemm is issued, from the other of two register copies of C,
                          in trips of wg_lag (even) iterations (pass_pipeline.c at lag_gemm) */
  const char *lag_why; /* after pass_pipeline, a pipe loop with one clearing wgmma gemm that is not
                          wg_lag: why not (for --emit ir) */
  int64_t pipe_stages; /* after pass_pipeline, a pipe loop: the stages of its prefetched buffers */
  int64_t pipe_ahead;  /* after pass_pipeline, a pipe loop: how many iterations ahead its copies
                          are issued (pipe_stages - 1, or pipe_stages - 1 - wg_pending) */
  bool a_regs;         /* after pass_place: that gemm takes A from registers (A in C's row layout) */
  bool ov_late;        /* after pass_overlap: a gemm on wgmma issued one iteration late, after its loop's other
                          gemm on wgmma (that gemm's ov_gemm); the last iteration's after the loop */
  tl_stmt *ov_gemm;    /* after pass_overlap: on that other gemm and on the loop, the late gemm */
  tl_stmt *ov_wait;    /* after pass_overlap, a loop with ov_gemm: the statement of its body before which the
                          late gemm is waited for (NULL: at the end of the body) */
  tl_stmt *uni_all, *uni_none; /* after pass_uniform, a parallel loop choosing by an affine comparison: the loop
                          with the comparison true, and false (emitted where it holds on the whole tile, or
                          nowhere) */
  int64_t *uni_lo, *uni_hi; /* ... the values of its variables where P - Q is least and greatest */
  bool rs_refused;     /* pass_place: wgmma with A from registers was chosen, then A could not stay in
                          registers: the program is placed again with this gemm off wgmma */
  const char *mma_why;   /* after pass_place: why a gemm is not on the matrix cores (static text), or NULL */
  bool async_copy;     /* after pass_pipeline: a global -> shared copy in 16-byte cp.async chunks */
  int byte_copy;       /* after pass_pipeline: a copy of a packed dtype moved as bytes, this many (1 to 16) at
                          a time; 0: element by element */
  int vec_dequant;     /* after pass_place, a parallel loop: 0, or how many iterations of its innermost var
                          run at a time (8, 16 or 32): each packed sub-byte operand read as one load (up to
                          16 bytes), converted 8 elements at a time to 16-bit float pairs (prmt, lop3,
                          fma.f16x2), the arithmetic on pairs (f16x2, bf16x2), each 8 results stored as
                          one 16-byte vector; 2: into a register fragment, each thread its own pairs
                          of elements (pass_place.c: dequant_loop says when) */
  tl_pair_map *pair_maps; /* after pass_place, a vec_dequant 2 loop: its packed reads whose last index is not
                          the loop's last variable itself, with where each thread's pairs lie (pass_place.c:
                          pair_map) */
  int npair_maps;
  const tl_expr *vec_read; /* after pass_place, a parallel loop over a blocked register fragment: the one
                          read of a tensor of 4-byte elements that the CUDA back end makes 4 elements at a
                          time, as one 16-byte vector (pass_place.c: vec_read_of says when), or NULL */
  bool vec_once;       /* after pass_place, a vec_dequant loop of 16 or 32: its other reads (a group's scale)
                          are the same for all of them, and read once per 16 or 32 (pass_place.c: vec_once) */
  bool prefetch;       /* after pass_pipeline: issued ahead by its pipelined loop */
  bool reg_prefetch;   /* after pass_pipeline: a copy from a tensor into a shared buffer of a software-
                          pipelined loop that cp.async cannot move (elements not in 16-byte chunks, such
                          as a column of scales): each thread loads its elements for iteration c + 1 into
                          registers during iteration c and stores them, as the iteration ends, into the
                          other of the buffer's two copies (rotates); at most TL_REG_PREFETCH elements per
                          thread (pass_pipeline.c: reg_prefetchable) */
  bool lag_load;       /* after pass_pipeline, a statement of a wg_lag loop's tail that only loads from
                          tensors into registers (a copy into a register fragment, a let of tensor
                          elements): issued for iteration c as c starts, into copy c % 2 (the
                          fragment's stages 2; a let's value in tl_lagv_NAME[2], v_NAME being its C
                          name), which the tail of c reads, so the loads' latency hides under the
                          gemms (pass_pipeline.c: lag_loadable) */
  bool pipe;           /* after pass_pipeline: a pipelined loop with prefetched copies */
  bool tma;            /* after pass_tma: a prefetched copy issued as bulk tensor copies
                          (cp.async.bulk.tensor) through tensor map tma_map by one thread,
                          completing on its loop's mbarriers; on a loop: some copy is */
  int tma_map;         /* tma copy: index in tl_program.tmaps */
  const char *tma_why; /* after pass_tma, on a target with TMA: why a cp.async copy is not one */
  int mbar;            /* tma loop: its first mbarrier (one per stage) in tl_program's */
  bool no_tma;         /* pipelined: "tma": false (the program refuses TMA for the loop) */
  bool no_wspec;       /* pipelined: "warp_specialize": false (no producer warpgroup for the loop) */
  bool wspec;          /* after pass_wspec, a tma loop: its bulk tensor copies are issued by a
                          producer warpgroup of its own, ahead of the program's threads, through
                          full mbarriers (mbar..) and empty ones (wspec_empty..), one per stage;
                          on a let of the kernel's body: the producer evaluates it too */
  int wspec_empty;     /* wspec loop: its first "stage is free" mbarrier in tl_program's */
  bool wspec_threads;  /* wspec loop: its body reads the stages otherwise than through wgmma, so every
                          thread frees a stage itself, after a proxy fence (its reads are the
                          generic proxy's, the next copy into the stage the async proxy's) */
  int wspec_lag;       /* wspec loop: iterations after which a stage is released (the wgmma
                          groups its gemms leave in flight) */
  bool wspec_pre;      /* after pass_wspec, a copy of the kernel's body before its wspec loop: issued
                          by the producer too, tile by tile, as a bulk tensor copy (tma_map) into copy
                          (tile % pre_stages) of its buffer, completing on full mbarrier pre_mbar +
                          that copy; the program's threads wait for it there and free the copy on
                          mbarrier pre_mbar + pre_stages + it after pre_last, its last reader */
  int pre_mbar, pre_stages;
  bool pre_threads;    /* wspec_pre: a reader reads the buffer otherwise than through wgmma, so every
                          thread frees it (after a proxy fence), not every warp */
  const tl_stmt *pre_last; /* wspec_pre: the last statement of the body reading the buffer (or itself) */
  const char *wspec_why; /* after pass_wspec, on a target that could: why a tma loop is not (static
                          text or the program's arena) */
  int pingpong_req;    /* pipelined: "pingpong": 1 true, 0 false, -1 not given (pass_wspec.c decides) */
  bool pingpong;       /* after pass_wspec, a wspec loop: the program's warpgroups take turns issuing the
                          body's gemms on wgmma (named barriers; FlashAttention-3's scheduler barriers) */
  const char *pingpong_why; /* after pass_wspec, a wspec loop that does not: why (static text) */
  int64_t slices_req;  /* pipelined: "slices", 1 to 4 (1: not given) */
  int slices;          /* after pass_wspec, the wspec loop: its iterations run in that many slices of the
                          program's threads (slice s: iterations s, s + slices, ...; the block has
                          slices times the program's threads, then the producer), each slice's gemms
                          summing into its own copy of their C, added into slice 0's after the loop,
                          which alone runs the statements after it; 0 or 1: not (pass_wspec.c) */
  const char *slices_why; /* after pass_wspec, a loop that asked for slices and does not run in them: why */
  const tl_sym *slice_buf; /* slices > 1: the staged buffer (all its stages) whose memory holds the slices'
                          sums after the loop, on their way into slice 0's */
  bool store_asked;    /* copy: "tma": true (a TMA store of a register fragment's tile: pass_store.c) */
  bool tma_store;      /* after pass_store: that copy is staged in shared memory, 128-byte panels, each stored
                          by one bulk tensor copy through tensor map store_map */
  int store_map;       /* tma_store copy: index in tl_program.tmaps */
  bool store_async;    /* after pass_store: a tma_store copy that ends the kernel's body: its last stores are
                          not waited for (the kernel waits for them before it exits) */
  const char *store_why; /* after pass_store, a copy that asked on a target with TMA: why it is not a TMA store */
  bool store_defer;    /* after pass_store, a store_async copy of a persistent kernel with a wspec loop: its
                          pairs are converted into registers at the end of the tile and staged and stored
                          under the next tile's gemms, panel p after that loop's iteration p issued its own */
  const char *defer_why; /* after pass_store, a store_async copy that is not store_defer: why (static text) */
  int ncl_req;         /* pipelined: entries of its "cluster" (0: not given) */
  int64_t cl_req[3];   /* ... after check: the thread-block cluster shape it asks for, each 1 to 16 */
  bool mcast;          /* after pass_cluster: a tma loop whose copies (some) are multicast across the
                          kernel's cluster (tl_program.cl); on a tma copy: it is, the block of rank r
                          of the cluster copying part r of the box (its tma_map's box, 1 / cl_size of
                          the rows) into every block's stage */
  const char *cluster_why; /* after pass_cluster: on a tma loop, why its copies are not multicast (or why
                          its "cluster" is not used); on a tma copy of a multicast loop, why it is not */
  int overlap;         /* pipelined: "overlap": 1 true, 0 false, -1 not given (pass_overlap.c decides) */
  int64_t k_group;     /* pipelined: "k_group": the K tiles a stage holds (1: one), 0 not given
                          (pass_kgroup.c decides) */
  int kgroup;          /* after pass_kgroup: on a pipelined loop, the consecutive K tiles each iteration
                          (stage) now holds (its copies' boxes and buffers g times wider in K), 0 when
                          not grouped; on kgroup_tail, the g of the loop it follows */
  struct tl_stmt *kgroup_rest; /* after pass_kgroup, a grouped loop: the serial loop after it that runs
                          the last tiles (its extent mod g) one at a time, or NULL */
  bool kgroup_tail;    /* after pass_kgroup: that serial loop */
  const char *kgroup_why; /* after pass_kgroup, a pipelined loop with K tiles under 128 bytes that is not
                          grouped: why not (for --emit ir) */
  int region;          /* after pass_split, a statement of the kernel's top level: the region (1, 2, ...)
                          it belongs to, 0 for none; a region's statements are consecutive */
  struct tl_sym **region_frags; /* after pass_split, the first statement of a region: the register
                          fragments and local buffers the region uses (copied in and out) */
  int nregion_frags;
  bool barrier_before; /* after pass_barrier: a block barrier goes just before the statement */
  bool barrier_end;    /* after pass_barrier: a serial loop ends each iteration with a barrier */

  /* loops */
  tl_loop_kind loop_kind;
  int nvars;
  tl_sym **vars;       /* S_PARALLEL */
  tl_expr **extents;   /* S_PARALLEL */
  tl_sym *var;         /* S_LOOP */
  tl_expr *start, *extent, *step; /* S_LOOP (start/step never NULL after parse: default 0/1) */
  int64_t num_stages;
  int norder;
  int64_t *order, *stage;
  tl_body body, else_body;
  bool has_else;

  /* annotate_layout */
  int nlayouts;
  tl_sym **layout_syms;
  const char **layout_names; /* parsed */
  tl_layout **layouts;

  /* use_swizzle */
  tl_expr *panel_size;
  bool order_column, enable;

  /* sync_threads */
  bool fence;          /* after check: "fence": also a device-scope memory fence (proto/tile-ir-v1.md 5.7) */

  /* parsed option fields, folded by the checker into the typed fields above
   * (each may be NULL when absent): JSON booleans/integers or constant
   * expression strings. */
  struct {
    tl_expr *trans_a, *trans_b, *clear_accum, *k_pack, *dim, *clear, *reverse, *num_stages, *enable, *tma, *wspec, *overlap,
        *k_group, *pingpong, *fence, *slices;
    tl_expr *cluster[3];
  } raw;
  const char *reduce_type_name, *policy_name, *order_name; /* parsed strings */

  /* assignment; an "atomic" statement has the fields of one: lhs (its "dst" element)
   * becomes atomic(lhs, value), and sym is its "old" (a let of lhs's previous value) or NULL */
  tl_atomic_kind atomic;
  const char *atomic_name; /* parsed "type" */
  tl_expr *lhs;
  int assign_op;       /* 0 for '=', else the binary operator of 'op='; after check, .value of
                          'x op= e' is the binary node 'x op e' (its left operand a copy of .lhs),
                          so that .value is always the value to store */
};

/* ---- tensor maps (pass_tma.c) ---------------------------------------------- */
#define TL_MAX_TMAPS 8   /* tensor maps per kernel */
#define TL_TMAP_RANK_MAX 5
/* One tensor map: a tiled view of tensor param `tensor` that copies boxes
 * of box[] elements (innermost dimension first, as cuTensorMapEncodeTiled
 * takes them) into shared memory, with the 128-, 64- or 32-byte swizzle or none;
 * out-of-bounds elements read as zero.  The kernel takes it as a
 * `const __grid_constant__` parameter after the program's params. */
typedef struct tl_tmap {
  const struct tl_sym *tensor;
  int rank;                         /* the tensor's ndim */
  int64_t box[TL_TMAP_RANK_MAX];    /* innermost first */
  int swizzle;                      /* the swizzle's span in bytes: 128, 64 or 32 (CU_TENSOR_MAP_SWIZZLE_128B,
                                       64B, 32B), 0 for none */
  int packed;                       /* elements per byte: 2 to 8 for a packed sub-byte dtype, whose map moves
                                       bytes (its innermost dimension, box[0] and coordinate count bytes); 1 (or
                                       0) for whole-byte elements */
} tl_tmap;

/* ---- program --------------------------------------------------------------- */
typedef struct tl_program {
  tl_arena *arena;
  const char *name;
  const char *entry;   /* the kernel's symbol in the binary: name, or tl_k_NAME when name is not a safe
                          C++ symbol (tl_kernel_symbol in parse.c; proto/kernel-meta.md "entry") */
  int nconsts;
  tl_sym **consts;     /* in document order */
  int nparams;
  int nviews;
  tl_sym **views;      /* after check: the views of tensors (SYM_TENSOR, view_of set), param_index
                          nparams + their position here (the interpreter's tensor table) */
  tl_sym **params;     /* ABI order: TENSOR and SCALAR, then the workspaces (TENSOR, .workspace) */
  int nworkspaces;     /* the last nworkspaces params are workspaces: the caller passes the first
                          nparams - nworkspaces (tl_user_params) */
  /* several kernels (proto/tile-ir-v1.md 4.1): each is a program of its own (its own copy of
   * the constants, params and workspaces), run in order on one stream; the first heads the list */
  struct tl_program *next; /* the kernel launched after this one, or NULL */
  int kernel_index, nkernels; /* this kernel's place in the list, and its length (1: "kernel") */
  const char *kptr;    /* the kernel object's JSON Pointer: "/kernel" or "/kernels/I" */
  int ngrid;
  tl_expr *grid[3];
  tl_expr *threads_expr[3];
  int nthreads_dims;
  int64_t threads[3];  /* after check: folded (missing dims are 1); pass_threads.c may grow threads[0] */
  int64_t threads_asked; /* after pass_threads: the program's threads[0] where it grew them, else 0 */
  const char *threads_why; /* after pass_threads: a gemm's C too large for registers, and why the threads
                              stay the program's (or NULL) */
  tl_sym *block_vars[3];
  int ncluster;
  tl_expr *cluster_expr[3]; /* the kernel's "cluster" as parsed (constant int-exprs) */
  int64_t cluster[3];  /* after check: the kernel's "cluster" (1s where not given) */
  bool cluster_reduce; /* after check: the body has a cluster_reduce (proto/tile-ir-v1.md 5.6) */
  int64_t cl[3];       /* after pass_cluster: the cluster shape the kernel is launched with (the kernel's
                          "cluster", or its multicast loop's), 1s for none */
  int cl_axis;         /* ... the one grid axis whose extent in cl is over 1, or -1 */
  int64_t cl_size;     /* ... the blocks of a cluster (the product of cl) */
  tl_expr *persistent_expr; /* "persistent" (parsed), or NULL */
  bool no_persistent;  /* after check: "persistent": false */
  tl_body body;
  int nstmts;          /* the first kernel's: the statements of every kernel, nested ones included (the
                          parser's count, at most TL_MAX_STMTS; tl_compile_request.max_statements) */
  /* after check */
  int nvalue_slots;
  int nbuffer_slots;
  tl_sym **value_syms;   /* nvalue_slots entries: the symbol of each value slot */
  tl_sym **buffer_syms;  /* nbuffer_slots entries */
  /* after pass_place */
  int64_t smem_bytes;    /* dynamic shared memory of one block */
  int64_t scratch_offset, scratch_bytes; /* shared scratch for cross-thread exchanges */
  int max_registers;     /* compile option: registers per thread (0: the toolchain's choice) */
  bool no_wg_lag;        /* set by tl_compile before the passes: no pipelined loop runs its tail one
                            iteration late (pass_pipeline.c's lag_gemm); its build with it spilled */
  bool no_tight_wspec;   /* set by tl_compile before the passes: pass_wspec gives a producer warpgroup only its
                            usual register budget; its build with the tight one spilled */
  int wspec_max_blocks;  /* set by tl_compile before the passes: at most this many blocks per SM for a producer
                            warpgroup (0: no limit); its build with more spilled (pass_wspec.c) */
  /* after pass_tma: the tensor maps the kernel takes after its params, and
   * its mbarriers (8 bytes each, in shared memory at mbar_offset) */
  int ntmaps;
  struct tl_tmap *tmaps;
  int nmbar;
  int64_t mbar_offset;
  int64_t epi_offset, epi_bytes; /* after pass_store: the staging buffer of its TMA stores (0 bytes: none) */
  int epi_buffers;       /* after pass_store: panels the staging buffer holds, 1 or 2 (each filled while the
                            other's store reads it) */
  /* after pass_wspec: a producer warpgroup (wspec loops) */
  int64_t wspec_threads; /* threads the launch adds after the program's (128), or 0 */
  int wspec_regs[2];     /* setmaxnreg: registers per thread of the producer, of the program's threads
                            (0: none, the block's launch registers stay) */
  int wspec_blocks;      /* blocks per SM the launch bounds ask for (the registers at entry follow) */
  bool wspec_tight;      /* after pass_wspec: the producer's budget is the tight one (pass_wspec.c) */
  int slices;            /* after pass_wspec: its wspec loop's slices (tl_stmt.slices), 1 where none: the block's
                            program threads are slices times threads[0] */
  bool persistent;       /* after pass_wspec: a persistent kernel: at most wspec_blocks blocks per SM
                            walk the grid's tiles (the blocks of the program's grid) in order */
  /* set by compile.c before the CUDA C emitter runs (tl_codegen.pdl: sm_90 and later): programmatic
   * dependent launch between the kernels of a program (proto/tile-ir-v1.md 4.1) */
  bool pdl_wait;         /* a kernel after another: its threads wait for that one to end first (griddepcontrol.wait),
                            so the launcher may launch it early (kernel-meta.md launch.programmatic) */
  /* after tl_check_target: what makes the kernel far slower than it could
   * be (a fragment too large for registers), for the metadata's "warnings"
   * and `tlc compile`'s standard error; never an error */
  tl_diags warnings;
  /* after pass_barrier */
  bool fence_async;      /* some gemm runs on wgmma: every barrier is preceded by
                            fence.proxy.async, making the threads' shared-memory writes
                            visible to it */
  bool tile_barrier;     /* a persistent kernel: a barrier between one tile's statements and the next's
                            (their shared memory conflicts; else none) */
  /* after pass_raster: block rasterization (use_swizzle) */
  int64_t raster_panel;  /* stripes of this many block rows (columns); 0: blocks in grid order */
  bool raster_column;    /* stripes of block columns, walked row by row */
  bool reverse_x;        /* no stripes: the blocks take the x block variable in reverse (heaviest first) */
  bool raster_chosen;    /* the stripes are pass_raster.c's choice for a gemm (no use_swizzle given) */
  const char *raster_why; /* a gemm's grid that pass_raster.c would stripe but leaves in grid order: why */
  /* after pass_split: the statements of the kernel (nested ones counted), the regions of its top
   * level emitted as functions of their own (0: none), and why none (NULL: the kernel has fewer
   * than TL_SPLIT_MIN_STATEMENTS statements) */
  int64_t split_statements; /* before pass_split: its threshold (compile.c: the option, or TL_SPLIT_MIN_STATEMENTS) */
  int64_t nstatements;
  int nregions;
  const char *split_why;
  unsigned lowered;      /* the analyses of pass.h that ran (TL_RAN_ bits); tl_emit needs all */
  /* before the "emit" stage (compile.c), an NVIDIA target: the back end that builds the program,
   * "ptx" (emit_ptx.c) or "cuda" (emit_cuda.c), the one asked for ("auto", "cuda" or "ptx": the
   * build key's), and why not "ptx" (NULL: not asked, or it is) */
  const char *backend, *backend_mode, *backend_why;
} tl_program;

/* The kernel's warp-specialized loop (pass_wspec.c: at its top level), or NULL. */
const tl_stmt *tl_wspec_loop(const tl_program *p);
/* The fills that a gemm on wgmma clears C instead of (both NVIDIA emitters: scale-d false in its first k
 * step, the same results without C's registers written twice), then those gemms, pushed onto out: a
 * whole-buffer fill of zeros (or a constant if whose side taken is that fill alone: flash attention's mask
 * or clear) just before the gemm of its buffer in the same body, the gemm not late (pass_overlap.c) and
 * not clearing C itself. */
void tl_fold_fills(tl_arena *a, const tl_body *b, tl_vec *out);
/* Is item in v? */
bool tl_vec_has(const tl_vec *v, const void *item);

/* The analyses between pass_pipeline and the emitter (pass.h), as bits of
 * tl_program.lowered. */
/* pass_split.c: a kernel of at least this many statements (nested ones counted; the compile
 * option split_statements, at most TL_SPLIT_MAX_STATEMENTS, says another number) has runs of
 * about TL_SPLIT_REGION_STATEMENTS statements of its top level emitted as functions of their own */
#define TL_SPLIT_MIN_STATEMENTS 1024
#define TL_SPLIT_MAX_STATEMENTS 1000000
#define TL_SPLIT_REGION_STATEMENTS 16

enum { TL_RAN_RANGE = 1, TL_RAN_BARRIER = 2, TL_RAN_RASTER = 4, TL_RAN_ALL = 7, TL_RAN_PIPELINE = 8, TL_RAN_SPLIT = 16 };

/* A constant override: -D NAME=VALUE on the command line, or one member of
 * a compile request's "constants".  value is JSON text of a number or a
 * boolean (e.g. "256", "0.5", "true"). */
typedef struct tl_define {
  const char *name;
  const char *value;
} tl_define;

/* The params a caller passes: all but the workspaces. */
static inline int tl_user_params(const tl_program *p) { return p->nparams - p->nworkspaces; }

/* ---- stages ----------------------------------------------------------------- */
/* Parses JSON text into a parsed program (parse.c).  Returns NULL and adds
 * diagnostics on malformed JSON (one diagnostic with line and column) or
 * on structural errors (as many as found).  The program is allocated in
 * `arena`. */
tl_program *tl_parse(tl_arena *arena, const char *text, size_t len, tl_diags *diags);

/* Parses one expression string (expr.c).  pointer is the JSON Pointer of
 * the string; on a syntax error adds a diagnostic with its column and
 * returns NULL. */
tl_expr *tl_parse_expr(tl_arena *arena, const char *text, const char *pointer, tl_diags *diags);
/* Parses a region string ("A", "A[i, j]", "Q[b, lo:hi, :]"). */
tl_region *tl_parse_region(tl_arena *arena, const char *text, const char *pointer, tl_diags *diags);
/* Parses an assignment statement string ("C[i, j] += x"). */
bool tl_parse_assign(tl_arena *arena, const char *text, const char *pointer, tl_diags *diags,
                     tl_expr **lhs, int *op, tl_expr **rhs);
/* True when the n bytes at s spell a keyword (expr.c): every Python keyword
 * (and, class, for, None, True, ...) and the literals true and false.  Such
 * words are never names (proto/tile-ir-v1.md 7.5). */
bool tl_is_keyword(const char *s, size_t n);

/* Resolves, types and folds a parsed program, applying the overrides
 * (check.c).  Returns false when any diagnostic was added. */
bool tl_check(tl_program *prog, const tl_define *defs, int ndefs, tl_diags *diags);

/* What holds between the kernels of a checked program of several (check.c):
 * a layout on a global buffer given the same in every kernel.  False when
 * diagnostics were added. */
bool tl_check_kernels(tl_program *prog, tl_diags *diags);

/* Convenience: parse + check.  Returns NULL when diagnostics were added. */
tl_program *tl_load_program(tl_arena *arena, const char *text, size_t len, const tl_define *defs,
                            int ndefs, tl_diags *diags);

/* The candidate closest to name (edit distance at most about a third of
 * its length), or NULL: for "did you mean" hints. */
const char *tl_closest(const char *name, const char *const *cands, int n);

/* Appends a JSON Pointer reference token (escaping '~' and '/'). */
const char *tl_ptr_key(tl_arena *a, const char *base, const char *key);
const char *tl_ptr_index(tl_arena *a, const char *base, int index);

/* A deep copy of an expression tree (checking folds trees in place). */
tl_expr *tl_expr_copy(tl_arena *a, const tl_expr *e);

/* The common type of two typed operands (TILE-IR.md sections 5-6): floats
 * widen, an integer with a float is the float, integers follow C's usual
 * arithmetic conversions.  The one copy of the rule (check.c). */
tl_dtype tl_common_dtype(tl_dtype a, tl_dtype b);

/* Prints the program as the back end sees it (statements with their
 * pointers, buffers with their placement, copies, gemms and loops with what
 * the passes decided): `tlc compile --dump PASS` and `--emit ir`. */
void tl_dump_program(const tl_program *prog, void *fp /* FILE* */);

/* Prints an expression back as source text (for messages and dumps). */
char *tl_expr_str(tl_arena *a, const tl_expr *e);
/* The source spelling of an operator ("//", "and", "+"). */
const char *tl_op_text(int op);

#endif
