/*
 * amd_layout.c - AMD's matrix-core register layouts (ir.h): where each lane
 * of a wavefront holds the elements of an accumulator fragment
 * (TL_LAYOUT_MFMA, TL_LAYOUT_WMMA, TL_LAYOUT_WMMA_GFX12) and the items of
 * the A and B operands of one matrix instruction, as sums of terms
 * ((x / div) % mod) * mul.  The one description of these maps: pass_place.c
 * chooses the layouts, emit_cuda.c prints the maps, and
 * tests/unit/test_amd_layouts.c evaluates them against AMD's own tables.
 * Pure functions of the layout; no state.
 */
#include <assert.h>
#include "ir.h"

static void term(tl_amd_coord *c, bool of_r, int64_t div, int64_t mod, int64_t mul) {
  assert(c->n < (int)(sizeof c->t / sizeof c->t[0]));
  c->t[c->n++] = (tl_amd_term){.of_r = of_r, .div = div, .mod = mod, .mul = mul};
}

bool tl_amd_layout(int layout) {
  return layout == TL_LAYOUT_MFMA || layout == TL_LAYOUT_WMMA || layout == TL_LAYOUT_WMMA_GFX12;
}

int tl_amd_layout_wave(int layout) { return layout == TL_LAYOUT_MFMA ? 64 : 32; }
int tl_amd_layout_items(int layout) { return layout == TL_LAYOUT_MFMA ? 4 : 8; }

void tl_amd_tile_origin(const tl_sym *s, tl_amd_coord *row, tl_amd_coord *col) {
  int64_t W = tl_amd_layout_wave(s->reg_layout), E = tl_amd_layout_items(s->reg_layout);
  int64_t wn = s->mma_wn, MI = s->mma_mi, NI = s->mma_ni;
  row->n = col->n = 0;
  term(row, false, W * wn, 0, MI * 16);
  term(row, true, E * NI, 0, 16);
  term(col, false, W, wn, NI * 16);
  term(col, true, E, NI, 16);
}

void tl_amd_frag_map(const tl_sym *s, tl_amd_coord *row, tl_amd_coord *col) {
  assert(tl_amd_layout(s->reg_layout));
  tl_amd_tile_origin(s, row, col);
  if (s->reg_layout == TL_LAYOUT_MFMA) { /* lane l, item v: row (l / 16) * 4 + v, column l % 16 */
    term(row, false, 16, 4, 4);
    term(row, true, 1, 4, 1);
  } else if (s->reg_layout == TL_LAYOUT_WMMA) { /* lane l, item v: row 2 * v + l / 16, column l % 16 */
    term(row, true, 1, 8, 2);
    term(row, false, 16, 2, 1);
  } else { /* gfx12: lane l, item v: row 8 * (l / 16) + v, column l % 16 */
    term(row, false, 16, 2, 8);
    term(row, true, 1, 8, 1);
  }
  term(col, false, 1, 16, 1);
}

int tl_amd_operand_items(int layout) {
  return layout == TL_LAYOUT_MFMA ? 4 : layout == TL_LAYOUT_WMMA ? 16 : 8;
}

/* Where the maps come from (item v of an operand is element v of the
 * builtin's vector: half 0 of VGPR 0, half 1 of VGPR 0, half 0 of VGPR 1, ...;
 * of the accumulator, VGPR v):
 *   MFMA v_mfma_f32_16x16x16f16 / bf16_1k (gfx90a; on gfx942 also
 *     v_mfma_f32_16x16x16_f16 / _bf16), wave64: A[l % 16][4 * (l / 16) + v],
 *     B[4 * (l / 16) + v][l % 16], C/D[4 * (l / 16) + v][l % 16].
 *     Confirmed by AMD's matrix instruction calculator
 *     (github.com/ROCm/amd_matrix_instruction_calculator, matrix_calculator.py,
 *     `--architecture cdna2|cdna3 --matrix-layout -A|-B|-C|-D`, every lane and
 *     item compared), by TileLang (tile-ai/tilelang,
 *     tilelang/intrinsics/mfma_layout.py: thread_id_shared_access_64x4_to_16x16
 *     _layout_A / _B / _C_m_n) and, for C/D, by llama.cpp
 *     (ggml-org/llama.cpp, ggml/src/ggml-cuda/mma.cuh, tile<16, 16> under
 *     AMD_MFMA_AVAILABLE: i = 4 * (lane / 16) + l, j = lane % 16).
 *   WMMA v_wmma_f32_16x16x16_f16 / bf16 on gfx11 (RDNA3), wave32:
 *     A[l % 16][v], B[v][l % 16] with 16 items (lanes 16-31 hold the same as
 *     lanes 0-15), C/D[2 * v + l / 16][l % 16] with 8.  Confirmed by the
 *     calculator (`--architecture rdna3 --wavefront 32`, every lane and item);
 *     C/D also by llama.cpp's mma.cuh (RDNA3: i = 2 * l + lane / 16), by
 *     ROCm/FlyDSL pull request 485 (checked on a gfx1151: "lane n, val v ->
 *     M = 2*v + n/16") and by Modular's docs (docs.modular.com,
 *     mojo/kernels/nn/attention/gpu/amd/buffers_rdna/get_rdna_fragment_layout).
 *     GPUOpen's "How to accelerate AI applications on RDNA 3 using WMMA"
 *     (gpuopen.com/learn/wmma_on_rdna3/) points to the calculator for these
 *     register maps.
 *   WMMA on gfx12 (RDNA4), wave32, __builtin_amdgcn_wmma_f32_16x16x16_{f16,
 *     bf16}_w32_gfx12 (8 halves of A and of B, 8 floats of C/D per lane):
 *     A[l % 16][k], B[k][l % 16] with k = 8 * (v / 4) + 4 * (l / 16) + v % 4
 *     (lanes 0-15 hold k 0-3 and 8-11, lanes 16-31 k 4-7 and 12-15),
 *     C/D[8 * (l / 16) + v][l % 16].  From the calculator
 *     (`--architecture rdna4 --wavefront 32`, every lane and item; its
 *     InstCalcGfx12 class gives the A/B lane as 16 * ((k / 4) % 2) + i and
 *     the VGPR as 2 * (k / 8) + (k / 2) % 2).  C/D also by llama.cpp's
 *     mma.cuh (RDNA4: i = 8 * (lane / 16) + l, j = lane % 16).  GPUOpen's
 *     "Using the Matrix Cores of AMD RDNA 4 architecture GPUs"
 *     (gpuopen.com/learn/using_matrix_core_amd_rdna4/) announces the new
 *     layouts.  llama.cpp gives each lane 8 consecutive k of A and B instead
 *     (lanes 0-15 k 0-7): A and B share the k order, so both give the same
 *     product; the calculator's order is used here. */
void tl_amd_operand_map(int layout, bool b, tl_amd_coord *mn, tl_amd_coord *k) {
  (void)b; /* A's rows and B's columns are laid out alike in both instructions */
  mn->n = k->n = 0;
  term(mn, false, 1, 16, 1); /* row of A / column of B: l % 16 */
  if (layout == TL_LAYOUT_MFMA) {
    term(k, false, 16, 4, 4); /* k = (l / 16) * 4 + v */
    term(k, true, 1, 4, 1);
  } else if (layout == TL_LAYOUT_WMMA) {
    term(k, true, 1, 16, 1); /* k = v: every lane holds all 16 (lanes 16-31 repeat 0-15) */
  } else {
    term(k, true, 4, 2, 8); /* gfx12: k = 8 * (v / 4) + 4 * (l / 16) + v % 4 */
    term(k, false, 16, 2, 4);
    term(k, true, 1, 4, 1);
  }
}

int64_t tl_amd_coord_eval(const tl_amd_coord *c, int64_t x, int64_t r) {
  int64_t v = 0;
  for (int i = 0; i < c->n; i++) {
    const tl_amd_term *t = &c->t[i];
    int64_t y = (t->of_r ? r : x) / t->div;
    if (t->mod)
      y %= t->mod;
    v += y * t->mul;
  }
  return v;
}
