/*
 * pass.h - the back-end passes and code generators, in pipeline order
 * (compile.c calls them one after another).  Each pass's own file says what
 * it needs, what it produces and what it keeps.
 */
#ifndef TL_PASS_H
#define TL_PASS_H

#include "ir.h"
#include "target.h"

/* What the target's code may use: a view of the target (target.h) that
 * the passes and the emitter read; tl_codegen_of makes it.  The passes
 * never choose what the target lacks, so every program still compiles (on
 * the portable paths). */
typedef struct tl_codegen {
  tl_dialect dialect; /* CUDA C (NVRTC) or HIP C (clang, hiprtc) */
  int warp;           /* threads per warp: 32, or 64 on CDNA */
  bool mma;           /* mma.sync m16n8k16 + ldmatrix (NVIDIA, sm_80 and later) */
  bool async_copy;    /* cp.async (NVIDIA, sm_80 and later) */
  bool int8_mma;      /* mma.sync m16n8k32 with s8/u8 operands (with mma: sm_80 and later) */
  bool fp8_mma;       /* mma.sync m16n8k32 with e4m3/e5m2 operands (with mma: sm_89 and later) */
  bool wgmma;         /* wgmma.mma_async (sm_90a, compute_90a), every operand type of the above */
  bool tma;           /* cp.async.bulk.tensor and mbarrier transactions (sm_90 and later) */
  bool pdl;           /* griddepcontrol: programmatic dependent launch (CUDA, sm_90 and later) */
  char wgmma_variant[TL_TARGET_NAME_MAX + 1]; /* no wgmma here, but the 'a' variant of the target has it ("sm_90a"
                             for sm_90, "compute_90a" for compute_90; else ""): --emit ir says
                             so at each gemm pass_place.c puts on mma.sync */
  int amd_matrix;     /* tl_amd_matrix (target.h): MFMA, WMMA or WMMA_GFX12, 0 for none */
} tl_codegen;
/* NVIDIA's from sm_80: CUDA, warps of 32, mma.sync (f16, bf16, int8) and cp.async (emit_cuda.c). */
extern const tl_codegen tl_codegen_cuda;
/* compile.c: what t's code may use. */
tl_codegen tl_codegen_of(const tl_target *t);
/* compile.c: what target's code may use, and the shared memory (LDS) one
 * block may use there (tl_target_parse, then tl_codegen_of).
 * TL_INVALID_ARG or TL_UNSUPPORTED for a target name it does not know. */
tl_status tl_codegen_for(const char *target, tl_codegen *cg, int64_t *smem_limit, tl_error *err);

/* pass_kgroup.c: a pipelined loop of tile copies and gemms whose K tiles
 * are under 128 bytes holds several consecutive ones per stage (wider
 * buffers and boxes, a loop over groups, and a serial loop of the last
 * tiles that do not fill one), where cg's target has wgmma and TMA and
 * the stages fit in smem_limit bytes; tl_stmt.kgroup, kgroup_rest,
 * kgroup_tail, kgroup_why. */
void tl_pass_kgroup(tl_program *prog, int64_t smem_limit, const tl_codegen *cg);

/* The most elements a thread holds of a register fragment (pass_place.c):
 * a larger fragment lives in shared memory (tl_warn_target says so). */
#define TL_MAX_REG_ELEMS 128

/* pass_threads.c: where a gemm's C would take more than TL_MAX_REG_ELEMS
 * elements a thread and the program's results cannot depend on its thread
 * count, doubles the block's threads (up to TL_THREADS_GROWN_MAX) until it
 * fits; tl_program.threads_asked, threads_why. */
#define TL_THREADS_GROWN_MAX 256
void tl_pass_threads(tl_program *prog, const tl_codegen *cg);

/* pass_place.c: registers or shared memory for every buffer, for a target
 * with smem_limit bytes of shared memory per block.  tl_pass_place is
 * tl_pass_place_for with tl_codegen_cuda. */
tl_status tl_pass_place(tl_program *prog, int64_t smem_limit, tl_error *err);
tl_status tl_pass_place_for(tl_program *prog, int64_t smem_limit, const tl_codegen *cg, tl_error *err);
/* Do register fragments a and b hold the same elements in every thread
 * (same shape, layout and layout parameters)? */
bool tl_same_reg_layout(const tl_sym *a, const tl_sym *b);
/* True when a reduce of a register fragment runs row by row with warp
 * shuffles (see pass_place.c and emit_cuda.c). */
bool tl_reduce_by_rows(const tl_stmt *s);
/* 32-bit registers per thread that the register fragments of prog take
 * (after pass_place; a packed fragment counts half its elements). */
int64_t tl_reg_words(const tl_program *prog);

/* pass_pipeline.c: cp.async copies and software pipelining, with as many
 * stages as fit in smem_limit bytes of shared memory per block. */
tl_status tl_pass_pipeline(tl_program *prog, int64_t smem_limit, tl_error *err);
/* The same for cg's target: without async copies nothing is pipelined. */
tl_status tl_pass_pipeline_for(tl_program *prog, int64_t smem_limit, const tl_codegen *cg, tl_error *err);
/* pass_pipeline.c: is integer expression x provably a multiple of v (NULL,
 * meaning 0, is)? */
bool tl_multiple_of(const tl_expr *x, int64_t v);
/* Does statement s (or anything in it) read or write buffer b? */
bool tl_stmt_touches(const tl_stmt *s, const tl_sym *b);
/* Is w a parallel loop over buf's shape whose one assignment stores buf[vars...] (every element, once)? */
bool tl_writes_whole(const tl_stmt *w, const tl_sym *buf);
/* pass_overlap.c: in software-pipelined loops with two gemms on wgmma, the
 * second issued one iteration late, after the first, and waited for only
 * where the body needs it (FlashAttention-3's overlap of softmax and P V),
 * where the loop asks ("overlap": true) and its dependences allow; then
 * tl_pass_smem. */
void tl_pass_overlap(tl_program *prog, int64_t smem_limit, const tl_codegen *cg);
/* pass_tma.c: which prefetched copies run as bulk tensor copies on cg's
 * target, the tensor maps and mbarriers they need (tl_program.tmaps,
 * nmbar), then tl_pass_smem; none when they would take shared memory over
 * smem_limit bytes. */
void tl_pass_tma(tl_program *prog, int64_t smem_limit, const tl_codegen *cg);
/* The tensor map that copy s (global into a shared buffer, filling it) would take, or why none (pass_tma.c's
 * conditions but the loop's): *map its index in prog->tmaps, added when new. */
const char *tl_tma_map_of(tl_program *prog, const tl_stmt *s, int *map);
/* pass_cluster.c: the thread-block cluster the kernel is launched with
 * (tl_program.cl, cl_axis, cl_size: the kernel's "cluster" or a tma loop's)
 * and the bulk tensor copies multicast across it (tl_stmt.mcast,
 * cluster_why; their part tensor maps in tl_program.tmaps). */
void tl_pass_cluster(tl_program *prog, const tl_codegen *cg);
/* pass_wspec.c: a producer warpgroup for the bulk tensor copies of the
 * kernel's one tma loop where cg's target has wgmma (sm_90a) and the loop
 * qualifies (tl_stmt.wspec, wspec_why; tl_program.wspec_threads,
 * wspec_regs, wspec_blocks; its mbarriers after the others), then
 * tl_pass_smem; none when they would take shared memory over smem_limit. */
void tl_pass_wspec(tl_program *prog, int64_t smem_limit, const tl_codegen *cg);
/* pass_store.c: the copies of a register fragment's tile to a tensor that
 * ask for TMA stores ("tma": true) and qualify (tl_stmt.tma_store,
 * store_map, store_why; tl_program.epi_bytes, their staging buffer), then
 * tl_pass_smem; none when the buffer would take shared memory over
 * smem_limit bytes. */
void tl_pass_store(tl_program *prog, int64_t smem_limit, const tl_codegen *cg);
/* pass_place.c: offsets of the shared buffers (after pass_pipeline). */
void tl_pass_smem(tl_program *prog);

/* check_target.c: does the placed and pipelined program fit target t
 * (clusters, shared memory)?  Each misfit is a diagnostic with a pointer
 * into the program; *err has the first (TL_UNSUPPORTED or TL_LIMIT). */
tl_status tl_check_target(const tl_program *prog, const tl_target *t, tl_diags *diags, tl_error *err);

/* check_target.c: the program's performance warnings (tl_program.warnings,
 * in its arena): each fragment too large for registers, saying what it
 * costs (its gemm off the matrix cores) and what would fit. */
void tl_warn_target(tl_program *prog);

/* pass_range.c: value ranges of the integer expressions, and which bounds
 * guards of global accesses they prove unnecessary (annotations on the
 * symbols, expressions and regions; ir.h). */
void tl_pass_range(tl_program *prog);
/* pass_uniform.c: a parallel loop writing if_then_else(P op Q, a, b) with
 * P - Q affine in its variables gets the loops that write a and b alone,
 * which the emitter takes where the comparison holds on the whole tile or
 * nowhere (tl_stmt.uni_all, uni_none). */
void tl_pass_uniform(tl_program *prog);
/* pass_barrier.c: where the block barriers go (tl_stmt.barrier_before,
 * barrier_end; tl_program.fence_async).  TL_UNSUPPORTED, with the
 * statement's pointer, for a statement that depends on shared or global
 * memory written earlier under the same thread-dependent control. */
tl_status tl_pass_barrier(tl_program *prog, tl_error *err);
/* Does reduction s (by rows) end in the row registers of its destination
 * straight from the quads' shuffles, with no exchange through the scratch
 * (pass_barrier.c)? */
bool tl_reduce_in_quads(const tl_stmt *s);
/* May x differ between the threads of a block (thread_binding, alloc_var
 * values, local buffers) (pass_barrier.c)? */
bool tl_expr_varying(const tl_expr *x);
/* pass_split.c: a kernel of at least TL_SPLIT_MIN_STATEMENTS statements
 * (nested ones counted) has its top level cut into regions of about
 * TL_SPLIT_REGION_STATEMENTS statements, each emitted as a function of its
 * own (NVIDIA targets), so that NVRTC's and ptxas's time grows linearly
 * with the kernel (tl_program.nregions, split_why; tl_stmt.region). */
void tl_pass_split(tl_program *prog, const tl_codegen *cg);

/* pass_raster.c: the order of the blocks for use_swizzle
 * (tl_program.raster_panel, raster_column). */
void tl_pass_raster(tl_program *prog);
/* emit_cuda.c: the CUDA C text of a program placed, pipelined and lowered
 * (pass_range, pass_barrier, pass_raster) for tl_codegen_cuda (self-contained: no includes).
 * Returns NULL with *err set for constructs it cannot lower.  It only
 * prints: every decision is an annotation of the passes. */
char *tl_emit_cuda(tl_arena *a, const tl_program *prog, tl_error *err);
/* The text in cg's dialect (CUDA C, or HIP C for AMD targets), of a
 * program placed, pipelined and lowered for the same cg. */
char *tl_emit(tl_arena *a, const tl_program *prog, const tl_codegen *cg, tl_error *err);
/* Every kernel of prog's list (prog->next...) in one module: one prelude,
 * then each kernel's entry point in order. */
char *tl_emit_module(tl_arena *a, const tl_program *prog, const tl_codegen *cg, tl_error *err);

/* The register fragment whose elements a parallel loop's iterations are:
 * the first its body b indexes (other than by rows of an mma layout when
 * the loop has two variables, two_d), or NULL (then the loop runs
 * cooperatively) (ir.c; emit_cuda.c and emit_ptx.c iterate by it). */
const tl_sym *tl_body_owner(const tl_body *b, bool two_d);
/* emit_ptx.c: the PTX text of a program placed and lowered as for
 * tl_emit, for target t, when every statement is in its subset (the file's
 * header lists it); else NULL with *err TL_UNSUPPORTED naming the first
 * statement outside it (its pointer in err->pointer).  It only prints.
 * *whole: the PTX must be assembled as a whole program (ptxas.h: setmaxnreg,
 * or wgmma beside a subroutine call); no_whole, when not NULL, says why it
 * cannot be, and such a program is refused. */
#define TL_PTX_MAX_PER_THREAD 64 /* elements of one register fragment of the blocked layout a thread holds */
#define TL_PTX_MAX_ACC 256       /* ... of the mma layout (a wgmma accumulator) */
char *tl_emit_ptx(tl_arena *a, const tl_program *prog, const tl_target *t, const char *no_whole, bool *whole,
                  tl_error *err);
/* Can emit_ptx.c build for t (sm_80 to sm_90a cubins)?  If not, *why says so. */
bool tl_ptx_target_ok(const tl_target *t, const char **why);

/* verify.c: does prog keep what the pass `stage` (a name of
 * tl_compile_stages: place, pipeline, overlap, tma, wspec, range, uniform, barrier; the others
 * promise nothing checked) promises, for cg's target?  TL_OK, or TL_INTERNAL with
 * *err naming the stage and pointing at the statement (or buffer) where it
 * does not.  Changes nothing.  tl_compile runs it after each stage when
 * TL_VERIFY=1 or tl_compile_request.verify. */
tl_status tl_verify(const tl_program *prog, const char *stage, const tl_codegen *cg, tl_error *err);

#endif
