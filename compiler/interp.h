/*
 * interp.h - the reference interpreter: runs a checked tile program on the
 * CPU with the exact meaning of proto/tile-ir-v1.md.  It is the oracle of
 * every GPU test and a debugging tool (`tlc run --interpret`).
 */
#ifndef TL_INTERP_H
#define TL_INTERP_H

#include <stdio.h>
#include "ir.h"

/* One argument per parameter, in the program's params order. */
typedef struct tl_arg {
  tl_scalar scalar; /* SCALAR: the value, of the parameter's dtype (see dtype.h) */
  void *data;       /* TENSOR: host memory, dense row-major, elements of the param's dtype */
  size_t count;     /* TENSOR: number of elements available at data */
} tl_arg;

typedef struct tl_interp_options {
  int check_parallel; /* report parallel-loop independence violations (default on: 1) */
  FILE *print_to;     /* where print statements write (NULL: standard error) */
} tl_interp_options;

/* Evaluates the shape of tensor parameter `p` (an index into prog->params)
 * given the scalar arguments.  TL_INVALID_ARG when a dimension is negative. */
tl_status tl_tensor_shape(const tl_program *prog, int p, const tl_arg *args, int64_t shape[TL_MAX_DIMS],
                          tl_error *err);

/* Evaluates the grid (number of blocks in x, y, z; missing dims are 1). */
tl_status tl_grid_size(const tl_program *prog, const tl_arg *args, int64_t grid[3], tl_error *err);

/* Runs every block of the grid.  Each tensor's count must equal the
 * product of its shape (TL_INVALID_ARG otherwise).  Run-time errors
 * (an index outside a shared/fragment/local buffer, integer division by
 * zero, a shift count out of range, a parallel loop whose iterations are
 * not independent, ...) return TL_RUNTIME with the JSON Pointer and column
 * of the offending expression and the block/thread where it happened.
 * opts may be NULL (defaults). */
tl_status tl_interpret(const tl_program *prog, tl_arg *args, const tl_interp_options *opts,
                       tl_error *err);

#endif
