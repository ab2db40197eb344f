/*
 * pass.h - the back-end passes and code generators, in pipeline order
 * (compile.c calls them one after another).  Each pass's own file says what
 * it needs, what it produces and what it keeps.
 */
#ifndef TL_PASS_H
#define TL_PASS_H

#include "ir.h"

/* pass_place.c: registers or shared memory for every buffer. */
tl_status tl_pass_place(tl_program *prog, tl_error *err);
/* Do register fragments a and b hold the same elements in every thread
 * (same shape, layout and layout parameters)? */
bool tl_same_reg_layout(const tl_sym *a, const tl_sym *b);
/* True when a reduce of a register fragment runs row by row with warp
 * shuffles (see pass_place.c and emit_cuda.c). */
bool tl_reduce_by_rows(const tl_stmt *s);

/* pass_pipeline.c: cp.async copies and software pipelining, with as many
 * stages as fit in smem_limit bytes of shared memory per block. */
tl_status tl_pass_pipeline(tl_program *prog, int64_t smem_limit, tl_error *err);
/* pass_place.c: offsets of the shared buffers (after pass_pipeline). */
void tl_pass_smem(tl_program *prog);

/* emit_cuda.c: the CUDA C text of a placed program (self-contained: no
 * includes).  Returns NULL with *err set for constructs it cannot lower. */
char *tl_emit_cuda(tl_arena *a, const tl_program *prog, tl_error *err);

#endif
