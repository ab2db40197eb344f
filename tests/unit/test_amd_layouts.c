/*
 * test_amd_layouts.c - the AMD matrix-core layouts (ir.h: TL_LAYOUT_MFMA,
 * TL_LAYOUT_WMMA, TL_LAYOUT_WMMA_GFX12) checked on the CPU against the
 * instructions' documented semantics, written out here independently of
 * the emitter:
 *   v_mfma_f32_16x16x16f16 / bf16_1k (wave64): lane l, item v of A holds
 *     A[l % 16][4 * (l / 16) + v], of B holds B[4 * (l / 16) + v][l % 16],
 *     of C/D holds D[4 * (l / 16) + v][l % 16];
 *   v_wmma_f32_16x16x16_f16_w32 / bf16_w32 (gfx11, wave32): lane l, item v
 *     of A holds A[l % 16][v], of B holds B[v][l % 16] (lanes 16-31 repeat
 *     lanes 0-15), of C/D holds D[2 * v + l / 16][l % 16];
 *   v_wmma_f32_16x16x16_f16_w32_gfx12 / bf16_w32_gfx12 (gfx12, wave32), as
 *     the calculator's InstCalcGfx12 puts it: element k of A's row i (of
 *     B's column i) is in lane 16 * ((k / 4) % 2) + i, VGPR 2 * (k / 8) +
 *     (k / 2) % 2, half k % 2 (item = 2 * VGPR + half); C/D holds
 *     D[8 * (l / 16) + v][l % 16].
 * Source: AMD's matrix instruction calculator
 * (github.com/ROCm/amd_matrix_instruction_calculator; amd_layout.c, above
 * tl_amd_operand_map, lists the other sources that agree).  Some of its
 * output is copied below as printed (`matrix_calculator.py --architecture
 * ARCH --instruction INSTR --wavefront W --matrix-layout -A|-B|-D --csv`,
 * rows of a few lanes) and checked against both the formulas above and the
 * emitter's maps.
 *
 * The emitter's maps must equal the documented ones item for item
 * (tl_amd_operand_map for A and B, tl_amd_frag_map of one tile for C/D) and
 * be one-to-one (WMMA's A and B on gfx11: each element exactly twice, in
 * lanes l and l + 16).  Then, for every gemm the place pass lowers to
 * matrix cores in the examples (gfx90a, gfx942, gfx1100, gfx1201) and a few shapes
 * set up here, a whole gemm is simulated: each wavefront's lanes load their
 * operand items where the emitter's maps (tl_amd_tile_origin,
 * tl_amd_operand_map) say, the instruction is applied by the documented
 * semantics above, each lane's results land in the registers the gemm
 * lowering writes, and the emitter's element map (tl_amd_frag_map, which
 * elem_of prints) must then name, for every thread and local index, the
 * element whose exact product it holds; the map must also cover C once.
 * Integer-valued data make the sums exact.  What this cannot show: that the
 * hardware does what the documentation says (only an AMD GPU can).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"
#include "pass.h"

/* The documented semantics.  op 0: A (returns m, k), 1: B (k, n), 2: C (m, n). */
static void doc_map(int layout, int op, int l, int v, int *x, int *y) {
  if (layout == TL_LAYOUT_MFMA) {
    int kk = 4 * (l / 16) + v;
    if (op == 0) { *x = l % 16; *y = kk; }
    else if (op == 1) { *x = kk; *y = l % 16; }
    else { *x = 4 * (l / 16) + v; *y = l % 16; }
  } else if (layout == TL_LAYOUT_WMMA) {
    if (op == 0) { *x = l % 16; *y = v; }
    else if (op == 1) { *x = v; *y = l % 16; }
    else { *x = 2 * v + l / 16; *y = l % 16; }
  } else { /* gfx12: item v is half v % 2 of VGPR g = v / 2; invert the lane and VGPR of k */
    int g = v / 2, kk = 8 * (g / 2) + 4 * (l / 16) + 2 * (g % 2) + v % 2;
    if (op == 0) { *x = l % 16; *y = kk; }
    else if (op == 1) { *x = kk; *y = l % 16; }
    else { *x = 8 * (l / 16) + v; *y = l % 16; }
  }
}

/* Rows of the calculator's output (see the top of the file): lane, then the
 * elements its items hold, in item order. */
typedef struct calc_row {
  int layout;
  char op; /* 'A', 'B' or 'D' */
  int lane;
  const char *row;
} calc_row;

static const calc_row calc_rows[] = {
    /* --architecture cdna2 --instruction v_mfma_f32_16x16x16f16 --wavefront 64 */
    {TL_LAYOUT_MFMA, 'A', 0, "A[0][0],A[0][1],A[0][2],A[0][3]"},
    {TL_LAYOUT_MFMA, 'A', 17, "A[1][4],A[1][5],A[1][6],A[1][7]"},
    {TL_LAYOUT_MFMA, 'A', 34, "A[2][8],A[2][9],A[2][10],A[2][11]"},
    {TL_LAYOUT_MFMA, 'A', 63, "A[15][12],A[15][13],A[15][14],A[15][15]"},
    {TL_LAYOUT_MFMA, 'B', 5, "B[0][5],B[1][5],B[2][5],B[3][5]"},
    {TL_LAYOUT_MFMA, 'B', 34, "B[8][2],B[9][2],B[10][2],B[11][2]"},
    {TL_LAYOUT_MFMA, 'B', 63, "B[12][15],B[13][15],B[14][15],B[15][15]"},
    {TL_LAYOUT_MFMA, 'D', 17, "D[4][1],D[5][1],D[6][1],D[7][1]"},
    {TL_LAYOUT_MFMA, 'D', 34, "D[8][2],D[9][2],D[10][2],D[11][2]"},
    {TL_LAYOUT_MFMA, 'D', 63, "D[12][15],D[13][15],D[14][15],D[15][15]"},
    /* --architecture rdna3 --instruction v_wmma_f32_16x16x16_f16 --wavefront 32 */
    {TL_LAYOUT_WMMA, 'A', 5,
     "A[5][0],A[5][1],A[5][2],A[5][3],A[5][4],A[5][5],A[5][6],A[5][7],A[5][8],A[5][9],A[5][10],A[5][11],A[5][12],"
     "A[5][13],A[5][14],A[5][15]"},
    {TL_LAYOUT_WMMA, 'A', 17,
     "A[1][0],A[1][1],A[1][2],A[1][3],A[1][4],A[1][5],A[1][6],A[1][7],A[1][8],A[1][9],A[1][10],A[1][11],A[1][12],"
     "A[1][13],A[1][14],A[1][15]"},
    {TL_LAYOUT_WMMA, 'B', 20,
     "B[0][4],B[1][4],B[2][4],B[3][4],B[4][4],B[5][4],B[6][4],B[7][4],B[8][4],B[9][4],B[10][4],B[11][4],B[12][4],"
     "B[13][4],B[14][4],B[15][4]"},
    {TL_LAYOUT_WMMA, 'D', 5, "D[0][5],D[2][5],D[4][5],D[6][5],D[8][5],D[10][5],D[12][5],D[14][5]"},
    {TL_LAYOUT_WMMA, 'D', 17, "D[1][1],D[3][1],D[5][1],D[7][1],D[9][1],D[11][1],D[13][1],D[15][1]"},
    {TL_LAYOUT_WMMA, 'D', 31, "D[1][15],D[3][15],D[5][15],D[7][15],D[9][15],D[11][15],D[13][15],D[15][15]"},
    /* --architecture rdna4 --instruction v_wmma_f32_16x16x16_f16 --wavefront 32 */
    {TL_LAYOUT_WMMA_GFX12, 'A', 0, "A[0][0],A[0][1],A[0][2],A[0][3],A[0][8],A[0][9],A[0][10],A[0][11]"},
    {TL_LAYOUT_WMMA_GFX12, 'A', 17, "A[1][4],A[1][5],A[1][6],A[1][7],A[1][12],A[1][13],A[1][14],A[1][15]"},
    {TL_LAYOUT_WMMA_GFX12, 'A', 31, "A[15][4],A[15][5],A[15][6],A[15][7],A[15][12],A[15][13],A[15][14],A[15][15]"},
    {TL_LAYOUT_WMMA_GFX12, 'B', 5, "B[0][5],B[1][5],B[2][5],B[3][5],B[8][5],B[9][5],B[10][5],B[11][5]"},
    {TL_LAYOUT_WMMA_GFX12, 'B', 20, "B[4][4],B[5][4],B[6][4],B[7][4],B[12][4],B[13][4],B[14][4],B[15][4]"},
    {TL_LAYOUT_WMMA_GFX12, 'D', 5, "D[0][5],D[1][5],D[2][5],D[3][5],D[4][5],D[5][5],D[6][5],D[7][5]"},
    {TL_LAYOUT_WMMA_GFX12, 'D', 17, "D[8][1],D[9][1],D[10][1],D[11][1],D[12][1],D[13][1],D[14][1],D[15][1]"},
    {TL_LAYOUT_WMMA_GFX12, 'D', 31, "D[8][15],D[9][15],D[10][15],D[11][15],D[12][15],D[13][15],D[14][15],D[15][15]"},
};

static const int all_layouts[] = {TL_LAYOUT_MFMA, TL_LAYOUT_WMMA, TL_LAYOUT_WMMA_GFX12};
#define NLAYOUTS (int)(sizeof all_layouts / sizeof *all_layouts)

static int wave_of(int lay) { return lay == TL_LAYOUT_MFMA ? 64 : 32; }
static int acc_items(int lay) { return lay == TL_LAYOUT_MFMA ? 4 : 8; }

static tl_sym frag(int lay, int64_t M, int64_t N, int wm, int wn);

/* Where the emitter puts lane l, item v of operand op (0 A, 1 B: (m or k,
 * k or n) as doc_map) or of the accumulator of one 16 x 16 tile (2). */
static void emitter_map(int lay, int op, int l, int v, int *x, int *y) {
  tl_amd_coord p, q;
  if (op < 2) {
    tl_amd_operand_map(lay, op == 1, &p, &q);
    int mn = (int)tl_amd_coord_eval(&p, l, v), k = (int)tl_amd_coord_eval(&q, l, v);
    *x = op == 0 ? mn : k;
    *y = op == 0 ? k : mn;
  } else {
    tl_sym C = frag(lay, 16, 16, 1, 1);
    tl_amd_frag_map(&C, &p, &q);
    *x = (int)tl_amd_coord_eval(&p, l, v);
    *y = (int)tl_amd_coord_eval(&q, l, v);
  }
}

/* The calculator's rows: the formulas of doc_map and the emitter's maps
 * both give every element as printed. */
static void test_calculator_rows(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof calc_rows / sizeof *calc_rows; i++) {
    const calc_row *c = &calc_rows[i];
    int op = c->op == 'A' ? 0 : c->op == 'B' ? 1 : 2;
    int items = op < 2 ? tl_amd_operand_items(c->layout) : acc_items(c->layout), v = 0;
    for (const char *p = c->row; *p; v++) {
      char name;
      int x, y, used = 0;
      if (sscanf(p, "%c[%d][%d]%n", &name, &x, &y, &used) != 3 || name != c->op)
        fail_msg("calc_rows[%zu]: cannot read '%s'", i, p);
      p += used;
      if (*p == ',')
        p++;
      assert_true(v < items);
      int dx, dy, ex, ey;
      doc_map(c->layout, op, c->lane, v, &dx, &dy);
      emitter_map(c->layout, op, c->lane, v, &ex, &ey);
      if (dx != x || dy != y || ex != x || ey != y)
        fail_msg("calc_rows[%zu] (%c, lane %d, item %d): the calculator has %c[%d][%d], the formula [%d][%d], "
                 "the emitter [%d][%d]", i, c->op, c->lane, v, c->op, x, y, dx, dy, ex, ey);
    }
    assert_int_equal(v, items);
  }
}

/* The emitter's maps equal the documented ones for every lane and item,
 * and cover each element of the 16 x 16 tile once (gfx11 WMMA's A and B:
 * twice, in lanes l and l + 16, item for item; gfx12's once, 8 items). */
static void test_maps_documented(void **state) {
  (void)state;
  for (int q = 0; q < NLAYOUTS; q++) {
    int lay = all_layouts[q], W = wave_of(lay);
    for (int op = 0; op < 3; op++) {
      int items = op < 2 ? tl_amd_operand_items(lay) : acc_items(lay);
      int seen[16][16] = {{0}};
      for (int l = 0; l < W; l++)
        for (int v = 0; v < items; v++) {
          int dx, dy, ex, ey;
          doc_map(lay, op, l, v, &dx, &dy);
          emitter_map(lay, op, l, v, &ex, &ey);
          if (dx != ex || dy != ey)
            fail_msg("layout %d, operand %d, lane %d, item %d: documented [%d][%d], emitter [%d][%d]", lay, op, l, v,
                     dx, dy, ex, ey);
          assert_true(ex >= 0 && ex < 16 && ey >= 0 && ey < 16);
          seen[ex][ey]++;
          if (lay == TL_LAYOUT_WMMA && op < 2 && l >= 16) { /* the upper half-wave repeats the lower */
            int rx, ry;
            emitter_map(lay, op, l - 16, v, &rx, &ry);
            assert_true(rx == ex && ry == ey);
          }
        }
      int want = lay == TL_LAYOUT_WMMA && op < 2 ? 2 : 1;
      assert_int_equal(W * items, 256 * want);
      for (int x = 0; x < 16; x++)
        for (int y = 0; y < 16; y++)
          assert_int_equal(seen[x][y], want);
    }
  }
}

/* Simulates C (+)= A . B for fragment C of its layout with K = 16 * ksteps,
 * and checks every register of every thread. */
static void simulate(const tl_sym *C, int64_t threads, int ksteps) {
  int lay = C->reg_layout;
  int W = wave_of(lay), E = acc_items(lay), items = tl_amd_operand_items(lay);
  assert_int_equal(items, lay == TL_LAYOUT_MFMA ? 4 : lay == TL_LAYOUT_WMMA ? 16 : 8);
  int64_t M = C->dims[0], N = C->dims[1], K = 16 * (int64_t)ksteps, MI = C->mma_mi, NI = C->mma_ni;
  assert_int_equal(threads, (int64_t)C->mma_wm * C->mma_wn * W);
  assert_int_equal(C->per_thread, MI * NI * E);
  long long *A = calloc((size_t)(M * K), sizeof *A), *B = calloc((size_t)(K * N), sizeof *B);
  long long *reg = calloc((size_t)(threads * C->per_thread), sizeof *reg);
  int *seen = calloc((size_t)(M * N), sizeof *seen);
  assert_true(A && B && reg && seen);
  for (int64_t i = 0; i < M * K; i++)
    A[i] = (i * 7919) % 13 - 6;
  for (int64_t i = 0; i < K * N; i++)
    B[i] = (i * 104729) % 11 - 5;
  tl_amd_coord orow, ocol, amn, ak, bmn, bk, frow, fcol;
  tl_amd_tile_origin(C, &orow, &ocol);
  tl_amd_operand_map(lay, false, &amn, &ak);
  tl_amd_operand_map(lay, true, &bmn, &bk);
  tl_amd_frag_map(C, &frow, &fcol);
  long long a[64][16], b[64][16];
  for (int64_t w0 = 0; w0 < threads; w0 += W) /* each wavefront */
    for (int64_t i = 0; i < MI; i++)
      for (int64_t j = 0; j < NI; j++)
        for (int ks = 0; ks < ksteps; ks++) {
          /* the loads the gemm lowering emits, lane by lane */
          for (int l = 0; l < W; l++)
            for (int v = 0; v < items; v++) {
              int64_t t = w0 + l;
              int64_t ar = tl_amd_coord_eval(&orow, t, i * E * NI) + tl_amd_coord_eval(&amn, l, v);
              int64_t ac = 16 * ks + tl_amd_coord_eval(&ak, l, v);
              int64_t bc = tl_amd_coord_eval(&ocol, t, j * E) + tl_amd_coord_eval(&bmn, l, v);
              int64_t br = 16 * ks + tl_amd_coord_eval(&bk, l, v);
              assert_true(ar >= 0 && ar < M && ac >= 0 && ac < K && bc >= 0 && bc < N && br >= 0 && br < K);
              a[l][v] = A[ar * K + ac];
              b[l][v] = B[br * N + bc];
            }
          /* the instruction, as documented: the tile operands from the lanes */
          long long ta[16][16], tb[16][16];
          int have_a[16][16] = {{0}}, have_b[16][16] = {{0}};
          for (int l = 0; l < W; l++)
            for (int v = 0; v < items; v++) {
              int x, y;
              doc_map(lay, 0, l, v, &x, &y);
              if (have_a[x][y])
                assert_true(ta[x][y] == a[l][v]); /* WMMA: lanes 16-31 must repeat 0-15 */
              ta[x][y] = a[l][v];
              have_a[x][y] = 1;
              doc_map(lay, 1, l, v, &x, &y);
              if (have_b[x][y])
                assert_true(tb[x][y] == b[l][v]);
              tb[x][y] = b[l][v];
              have_b[x][y] = 1;
            }
          for (int x = 0; x < 16; x++)
            for (int y = 0; y < 16; y++)
              assert_true(have_a[x][y] && have_b[x][y]);
          for (int l = 0; l < W; l++)
            for (int v = 0; v < E; v++) {
              int m, n;
              doc_map(lay, 2, l, v, &m, &n);
              long long d = 0;
              for (int k = 0; k < 16; k++)
                d += ta[m][k] * tb[k][n];
              reg[(w0 + l) * C->per_thread + (i * NI + j) * E + v] += d; /* tl_c[tl_u], tl_c = &r_C[(i*NI+j)*E] */
            }
        }
  /* the element map must name the element each register holds */
  for (int64_t t = 0; t < threads; t++)
    for (int64_t r = 0; r < C->per_thread; r++) {
      int64_t row = tl_amd_coord_eval(&frow, t, r), col = tl_amd_coord_eval(&fcol, t, r);
      assert_true(row >= 0 && row < M && col >= 0 && col < N);
      long long want = 0;
      for (int64_t k = 0; k < K; k++)
        want += A[row * K + k] * B[k * N + col];
      if (reg[t * C->per_thread + r] != want)
        fail_msg("thread %lld, register %lld: holds %lld, element (%lld, %lld) is %lld", (long long)t, (long long)r,
                 reg[t * C->per_thread + r], (long long)row, (long long)col, want);
      seen[row * N + col]++;
    }
  for (int64_t e = 0; e < M * N; e++)
    assert_int_equal(seen[e], 1);
  free(A);
  free(B);
  free(reg);
  free(seen);
}

static tl_sym frag(int lay, int64_t M, int64_t N, int wm, int wn) {
  int E = acc_items(lay);
  tl_sym s = {.name = "C", .kind = SYM_BUFFER, .scope = SCOPE_FRAGMENT, .dtype = TL_FLOAT32, .ndim = 2,
              .in_regs = true, .reg_layout = lay, .mma_wm = wm, .mma_wn = wn};
  s.dims[0] = M;
  s.dims[1] = N;
  s.mma_mi = M / wm / 16;
  s.mma_ni = N / wn / 16;
  s.per_thread = s.mma_mi * s.mma_ni * E;
  return s;
}

/* Shapes set up here: one tile, several tiles, wavefront grids both ways. */
static void test_shapes(void **state) {
  (void)state;
  for (int q = 0; q < NLAYOUTS; q++) {
    int W = wave_of(all_layouts[q]);
    struct { int64_t M, N; int wm, wn; } sh[] = {{16, 16, 1, 1}, {32, 48, 1, 1}, {64, 64, 2, 2}, {128, 64, 4, 1},
                                                 {32, 128, 1, 4}, {64, 32, 2, 1}};
    for (size_t i = 0; i < sizeof sh / sizeof *sh; i++) {
      tl_sym C = frag(all_layouts[q], sh[i].M, sh[i].N, sh[i].wm, sh[i].wn);
      simulate(&C, (int64_t)sh[i].wm * sh[i].wn * W, 2);
    }
  }
}

/* The layouts differ from one another (so that checking one against the
 * other's documentation would fail): MFMA's and WMMA's accumulators, and
 * gfx11's and gfx12's WMMA accumulators and operands. */
static void test_wrong_map_detected(void **state) {
  (void)state;
  tl_amd_coord r1, c1, r2, c2, r3, c3;
  tl_sym a = frag(TL_LAYOUT_MFMA, 32, 32, 1, 1), b = frag(TL_LAYOUT_WMMA, 32, 32, 1, 1),
         c = frag(TL_LAYOUT_WMMA_GFX12, 32, 32, 1, 1);
  tl_amd_frag_map(&a, &r1, &c1);
  tl_amd_frag_map(&b, &r2, &c2);
  tl_amd_frag_map(&c, &r3, &c3);
  int differ = 0, differ12 = 0, kdiffer = 0;
  for (int t = 0; t < 32; t++)
    for (int r = 0; r < 4; r++)
      differ += tl_amd_coord_eval(&r1, t, r) != tl_amd_coord_eval(&r2, t, r);
  for (int t = 0; t < 32; t++)
    for (int r = 0; r < 8; r++)
      differ12 += tl_amd_coord_eval(&r2, t, r) != tl_amd_coord_eval(&r3, t, r);
  tl_amd_operand_map(TL_LAYOUT_WMMA, false, &r1, &c1);
  tl_amd_operand_map(TL_LAYOUT_WMMA_GFX12, false, &r2, &c2);
  for (int l = 0; l < 32; l++)
    for (int v = 0; v < 8; v++)
      kdiffer += tl_amd_coord_eval(&c1, l, v) != tl_amd_coord_eval(&c2, l, v);
  assert_true(differ > 0 && differ12 > 0 && kdiffer > 0);
}

static char *slurp(const char *path, size_t *len) {
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)n + 1);
  if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
    free(p);
    p = NULL;
  }
  if (p)
    p[n] = 0;
  fclose(f);
  *len = (size_t)n;
  return p;
}

/* Simulates every gemm of b that is on matrix cores (their C must have
 * layout lay); returns how many there are. */
static int gemms(tl_body *b, int64_t threads, int lay) {
  int n = 0;
  for (int i = 0; i < b->n; i++) {
    tl_stmt *s = b->items[i];
    if (s->kind == S_GEMM && s->use_amd_mma) {
      int64_t K = s->trans_a ? s->A->dims[0] : s->A->dims[1];
      assert_int_equal(K % 16, 0);
      assert_true(!s->A->in_regs && !s->B->in_regs && s->C->in_regs);
      assert_int_equal(s->C->reg_layout, lay);
      simulate(s->C, threads, (int)(K / 16));
      n++;
    }
    n += gemms(&s->body, threads, lay) + gemms(&s->else_body, threads, lay);
  }
  return n;
}

/* Every gemm of the examples that the place pass puts on matrix cores. */
static void test_examples(void **state) {
  (void)state;
  const char *src = getenv("TL_SRCDIR") ? getenv("TL_SRCDIR") : ".";
  const char *names[] = {"gemm", "gemm_swizzle", "gemm_nt", "dequant_gemm", "dequant_gemm_threads", "flash_attention",
                         "tilus_matmul"};
  const char *targets[] = {"gfx90a", "gfx942", "gfx1100", "gfx1201"};
  static const tl_define small_fa[] = {{"block_M", "64"}, {"block_N", "64"}};
  int total = 0, mfma = 0, wmma = 0, wmma12 = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    for (int t = 0; t < 4; t++) {
      char path[4200];
      snprintf(path, sizeof path, "%s/examples/%s.json", src, names[i]);
      size_t len = 0;
      char *text = slurp(path, &len);
      assert_non_null(text);
      tl_arena *a = tl_arena_new();
      tl_diags d = {.arena = a};
      bool fa = strcmp(names[i], "flash_attention") == 0;
      tl_program *prog = tl_load_program(a, text, len, fa ? small_fa : NULL, fa ? 2 : 0, &d);
      assert_non_null(prog);
      tl_codegen cg;
      int64_t lim;
      tl_error err;
      assert_int_equal(tl_codegen_for(targets[t], &cg, &lim, &err), TL_OK);
      assert_int_equal(tl_pass_place_for(prog, lim, &cg, &err), TL_OK);
      static const int lays[4] = {TL_LAYOUT_MFMA, TL_LAYOUT_MFMA, TL_LAYOUT_WMMA, TL_LAYOUT_WMMA_GFX12};
      int n = gemms(&prog->body, prog->threads[0] * prog->threads[1] * prog->threads[2], lays[t]);
      total += n;
      if (t < 2)
        mfma += n;
      else if (t == 2)
        wmma += n;
      else
        wmma12 += n;
      print_message("%-22s %-8s %d gemm(s) on matrix cores\n", names[i], targets[t], n);
      tl_arena_free(a);
      free(text);
    }
  assert_true(mfma > 0 && wmma > 0 && wmma12 > 0 && total == mfma + wmma + wmma12);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calculator_rows),
      cmocka_unit_test(test_maps_documented),
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_wrong_map_detected),
      cmocka_unit_test(test_examples),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
