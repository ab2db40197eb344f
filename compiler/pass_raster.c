/*
 * pass_raster.c - block rasterization for L2 locality (use_swizzle): the
 * order in which the blocks of a 2-D grid take their block indices.
 *
 * An enabled use_swizzle at the top level of the body makes the blocks
 * walk stripes of panel_size block rows (block columns with order
 * "column") one column (row) at a time, so that blocks running at the same
 * time share the tiles they read.  The map is a bijection of the grid, so
 * results do not change (blocks are independent).  The last enabled
 * use_swizzle of the top level counts; one nested in a loop or an if, or a
 * grid of one dimension, or block variables not named for x and y, leave
 * the grid order.
 *
 * Needs: a checked program (use_swizzle's panel_size folded to a constant).
 * Produces: tl_program.raster_panel (0: grid order) and raster_column;
 *           TL_RAN_RASTER in tl_program.lowered.
 * Keeps: everything else.
 */
#include "ir.h"
#include "pass.h"

void tl_pass_raster(tl_program *prog) {
  const tl_stmt *raster = NULL;
  for (int i = 0; i < prog->body.n; i++)
    if (prog->body.items[i]->kind == S_USE_SWIZZLE && prog->body.items[i]->enable)
      raster = prog->body.items[i];
  prog->raster_panel = 0;
  prog->raster_column = false;
  if (raster && prog->ngrid >= 2 && prog->block_vars[0] && prog->block_vars[1]) {
    prog->raster_panel = raster->panel_size->val.i;
    prog->raster_column = raster->order_column;
  }
  prog->lowered |= TL_RAN_RASTER;
}
