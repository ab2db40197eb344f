/*
 * test_amd_layouts.c - the AMD matrix-core layouts (ir.h: TL_LAYOUT_MFMA,
 * TL_LAYOUT_WMMA) checked on the CPU against the instructions' documented
 * semantics, written out here independently of the emitter:
 *   v_mfma_f32_16x16x16f16 / bf16_1k (wave64): lane l, item v of A holds
 *     A[l % 16][4 * (l / 16) + v], of B holds B[4 * (l / 16) + v][l % 16],
 *     of C/D holds D[4 * (l / 16) + v][l % 16];
 *   v_wmma_f32_16x16x16_f16_w32 / bf16_w32 (gfx11, wave32): lane l, item v
 *     of A holds A[l % 16][v], of B holds B[v][l % 16] (lanes 16-31 repeat
 *     lanes 0-15), of C/D holds D[2 * v + l / 16][l % 16].
 * For every gemm the place pass lowers to matrix cores in the examples
 * (gfx90a, gfx942, gfx1100) and a few shapes set up here, a whole gemm is
 * simulated: each wavefront's lanes load their operand items where the
 * emitter's maps (tl_amd_tile_origin, tl_amd_operand_map) say, the
 * instruction is applied by the documented semantics above, each lane's
 * results land in the registers the gemm lowering writes, and the emitter's
 * element map (tl_amd_frag_map, which elem_of prints) must then name, for
 * every thread and local index, the element whose exact product it holds;
 * the map must also cover C once.  Integer-valued data make the sums exact.
 * What this cannot show: that the hardware does what the documentation says
 * (only an AMD GPU can).
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
  } else {
    if (op == 0) { *x = l % 16; *y = v; }
    else if (op == 1) { *x = v; *y = l % 16; }
    else { *x = 2 * v + l / 16; *y = l % 16; }
  }
}

/* Simulates C (+)= A . B for fragment C of its layout with K = 16 * ksteps,
 * and checks every register of every thread. */
static void simulate(const tl_sym *C, int64_t threads, int ksteps) {
  int lay = C->reg_layout;
  int W = lay == TL_LAYOUT_MFMA ? 64 : 32, E = lay == TL_LAYOUT_MFMA ? 4 : 8, items = tl_amd_operand_items(lay);
  assert_int_equal(items, lay == TL_LAYOUT_MFMA ? 4 : 16);
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
  int E = lay == TL_LAYOUT_MFMA ? 4 : 8;
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
  int lays[2] = {TL_LAYOUT_MFMA, TL_LAYOUT_WMMA};
  for (int q = 0; q < 2; q++) {
    int W = lays[q] == TL_LAYOUT_MFMA ? 64 : 32;
    struct { int64_t M, N; int wm, wn; } sh[] = {{16, 16, 1, 1}, {32, 48, 1, 1}, {64, 64, 2, 2}, {128, 64, 4, 1},
                                                 {32, 128, 1, 4}, {64, 32, 2, 1}};
    for (size_t i = 0; i < sizeof sh / sizeof *sh; i++) {
      tl_sym C = frag(lays[q], sh[i].M, sh[i].N, sh[i].wm, sh[i].wn);
      simulate(&C, (int64_t)sh[i].wm * sh[i].wn * W, 2);
    }
  }
}

/* A deliberately wrong map must fail the simulation's checks: the test can
 * fail (a fragment declared MFMA but simulated with WMMA's accumulator). */
static void test_wrong_map_detected(void **state) {
  (void)state;
  tl_amd_coord r1, c1, r2, c2;
  tl_sym a = frag(TL_LAYOUT_MFMA, 32, 32, 1, 1), b = frag(TL_LAYOUT_WMMA, 32, 32, 1, 1);
  tl_amd_frag_map(&a, &r1, &c1);
  tl_amd_frag_map(&b, &r2, &c2);
  int differ = 0;
  for (int t = 0; t < 32; t++)
    for (int r = 0; r < 4; r++)
      differ += tl_amd_coord_eval(&r1, t, r) != tl_amd_coord_eval(&r2, t, r);
  assert_true(differ > 0);
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

static int gemms(tl_body *b, int64_t threads) {
  int n = 0;
  for (int i = 0; i < b->n; i++) {
    tl_stmt *s = b->items[i];
    if (s->kind == S_GEMM && s->use_amd_mma) {
      int64_t K = s->trans_a ? s->A->dims[0] : s->A->dims[1];
      assert_int_equal(K % 16, 0);
      assert_true(!s->A->in_regs && !s->B->in_regs && s->C->in_regs);
      simulate(s->C, threads, (int)(K / 16));
      n++;
    }
    n += gemms(&s->body, threads) + gemms(&s->else_body, threads);
  }
  return n;
}

/* Every gemm of the examples that the place pass puts on matrix cores. */
static void test_examples(void **state) {
  (void)state;
  const char *src = getenv("TL_SRCDIR") ? getenv("TL_SRCDIR") : ".";
  const char *names[] = {"gemm", "gemm_swizzle", "gemm_nt", "dequant_gemm", "dequant_gemm_threads", "flash_attention",
                         "tilus_matmul"};
  const char *targets[] = {"gfx90a", "gfx942", "gfx1100"};
  static const tl_define small_fa[] = {{"block_M", "64"}, {"block_N", "64"}};
  int total = 0, mfma = 0, wmma = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    for (int t = 0; t < 3; t++) {
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
      int n = gemms(&prog->body, prog->threads[0] * prog->threads[1] * prog->threads[2]);
      total += n;
      if (t < 2)
        mfma += n;
      else
        wmma += n;
      print_message("%-22s %-8s %d gemm(s) on matrix cores\n", names[i], targets[t], n);
      tl_arena_free(a);
      free(text);
    }
  assert_true(mfma > 0 && wmma > 0 && total == mfma + wmma);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_wrong_map_detected),
      cmocka_unit_test(test_examples),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
