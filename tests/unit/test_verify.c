/*
 * test_verify.c - the verifier between passes (compiler/verify.c).
 *
 * Each test runs the real passes on a real program, checks that the
 * verifier accepts what they made, then breaks one promise of one pass in
 * the IR on purpose (a barrier removed, a placement cleared, a guard marked
 * inside without proof, a range narrowed, a stage count made to disagree,
 * a gemm path the target lacks) and checks that the check of that pass
 * catches it: TL_INTERNAL, naming the pass, pointing at the statement.
 * The last tests go through tl_compile: a dump hook breaks the IR after a
 * stage, and the verifier, asked by the request or by TL_VERIFY=1, stops
 * the compile with the internal error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include "pass.h"
#include "tlcompiler.h"

/* A copy into shared memory read by a parallel loop (a barrier before it),
 * a serial loop rewriting the buffer every iteration (a barrier before it
 * and at the end of each iteration), and a copy out (a barrier before it);
 * A has a run-time length (its guard stays), B a constant one that the
 * grid keeps every block inside (its guard is proven away). */
static const char small_text[] =
    "{\"tlir\": 1, \"name\": \"k\",\n"
    " \"params\": [{\"name\": \"A\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [\"n\"]},\n"
    "            {\"name\": \"B\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [256]},\n"
    "            {\"name\": \"n\", \"kind\": \"scalar\", \"dtype\": \"int32\"}],\n"
    " \"kernel\": {\"grid\": [4], \"threads\": 64, \"block_vars\": [\"bx\"], \"body\": [\n"
    "  {\"op\": \"alloc_shared\", \"name\": \"S\", \"shape\": [64], \"dtype\": \"float32\"},\n"
    "  {\"op\": \"copy\", \"src\": \"A[bx * 64:bx * 64 + 64]\", \"dst\": \"S\"},\n"
    "  {\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [64], \"body\": [\"S[i] = S[i] * 2.0\"]},\n"
    "  {\"op\": \"serial\", \"var\": \"k\", \"extent\": 4, \"body\": [\n"
    "    {\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [64], \"body\": [\"S[i] = S[i] + 1.0\"]}]},\n"
    "  {\"op\": \"copy\", \"src\": \"S\", \"dst\": \"B[bx * 64:bx * 64 + 64]\"}]}}\n";

typedef struct {
  tl_arena *arena;
  tl_program *prog;
  tl_codegen cg;
  char *text; /* malloc'd when read from a file */
} job;

/* Loads text (or the file examples/NAME.json) with the constant overrides
 * and runs the passes as tl_compile does for target, verifying each. */
static void run_passes(job *j, const char *text, const char *example, const tl_define *defs, int ndefs,
                       const char *target) {
  memset(j, 0, sizeof *j);
  if (example) {
    char path[4200];
    const char *src = getenv("TL_SRCDIR");
    snprintf(path, sizeof path, "%s/examples/%s.json", src ? src : ".", example);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    j->text = calloc(1, 1 << 20);
    size_t n = fread(j->text, 1, (1 << 20) - 1, f);
    fclose(f);
    assert_true(n > 0);
    text = j->text;
  }
  j->arena = tl_arena_new();
  tl_diags d = {.arena = j->arena};
  tl_error err = {0};
  int64_t smem;
  assert_int_equal(tl_codegen_for(target, &j->cg, &smem, &err), TL_OK);
  j->prog = tl_load_program(j->arena, text, strlen(text), defs, ndefs, &d);
  if (!j->prog)
    tl_diags_print(&d, "prog.json", stderr);
  assert_non_null(j->prog);
  assert_int_equal(tl_pass_place_for(j->prog, smem, &j->cg, &err), TL_OK);
  assert_int_equal(tl_verify(j->prog, "place", &j->cg, &err), TL_OK);
  assert_int_equal(tl_pass_pipeline_for(j->prog, smem, &j->cg, &err), TL_OK);
  assert_int_equal(tl_verify(j->prog, "pipeline", &j->cg, &err), TL_OK);
  tl_pass_tma(j->prog, smem, &j->cg);
  assert_int_equal(tl_verify(j->prog, "tma", &j->cg, &err), TL_OK);
  tl_pass_cluster(j->prog, &j->cg);
  tl_pass_wspec(j->prog, smem, &j->cg);
  assert_int_equal(tl_verify(j->prog, "wspec", &j->cg, &err), TL_OK);
  tl_pass_store(j->prog, smem, &j->cg);
  tl_pass_range(j->prog);
  assert_int_equal(tl_verify(j->prog, "range", &j->cg, &err), TL_OK);
  tl_pass_uniform(j->prog);
  assert_int_equal(tl_verify(j->prog, "uniform", &j->cg, &err), TL_OK);
  assert_int_equal(tl_pass_barrier(j->prog, &err), TL_OK);
  assert_int_equal(tl_verify(j->prog, "barrier", &j->cg, &err), TL_OK);
}

static void job_free(job *j) {
  tl_arena_free(j->arena);
  free(j->text);
}

typedef struct {
  const char *pointer;
  tl_stmt *found;
} finder;

static tl_walk_act find_pre(tl_stmt *s, void *user) {
  finder *f = user;
  if (strcmp(s->pointer, f->pointer) == 0) {
    f->found = s;
    return TL_WALK_STOP;
  }
  return TL_WALK_GO;
}

/* The statement at pointer. */
static tl_stmt *stmt_at(tl_program *p, const char *pointer) {
  finder f = {pointer, NULL};
  static const tl_walker w = {.pre = find_pre};
  tl_walk(&p->body, &w, &f);
  assert_non_null(f.found);
  return f.found;
}

/* The buffer named name. */
static tl_sym *buffer(tl_program *p, const char *name) {
  for (int i = 0; i < p->nbuffer_slots; i++)
    if (strcmp(p->buffer_syms[i]->name, name) == 0)
      return p->buffer_syms[i];
  fail_msg("no buffer %s", name);
  return NULL;
}

/* The verifier, after stage, fails at pointer with a message naming the stage. */
static void caught(job *j, const char *stage, const char *pointer) {
  tl_error err = {0};
  assert_int_equal(tl_verify(j->prog, stage, &j->cg, &err), TL_INTERNAL);
  assert_int_equal(err.code, TL_INTERNAL);
  print_message("caught: %s: %s\n", err.pointer, err.message);
  assert_string_equal(err.pointer, pointer);
  char want[64];
  snprintf(want, sizeof want, "verifier: after %s: ", stage);
  assert_non_null(strstr(err.message, want));
}

/* pass_split.c on a small kernel with a threshold of 2 statements: its
 * four statements after the alloc make one region; the verifier catches a
 * region not numbered in order, a statement inside a body marked, and a
 * wrong count. */
static void regions_broken(void **state) {
  (void)state;
  job j;
  run_passes(&j, small_text, NULL, NULL, 0, "sm_80");
  j.prog->split_statements = 2;
  tl_pass_split(j.prog, &j.cg);
  tl_error err = {0};
  assert_int_equal(tl_verify(j.prog, "split", &j.cg, &err), TL_OK);
  assert_int_equal(j.prog->nregions, 1);
  tl_stmt *last = stmt_at(j.prog, "/kernel/body/4"), *inner = stmt_at(j.prog, "/kernel/body/3/body/0");
  assert_int_equal(stmt_at(j.prog, "/kernel/body/0")->region, 0);
  assert_int_equal(last->region, 1);
  last->region = 2; /* a second region without its list of fragments, and not counted */
  caught(&j, "split", "/kernel/body/4");
  last->region = 1;
  inner->region = 1;
  caught(&j, "split", "/kernel/body/3/body/0");
  inner->region = 0;
  j.prog->nregions = 2;
  caught(&j, "split", "");
  job_free(&j);
}

/* pass_uniform.c on parallel loops whose one statement assigns a constant
 * or a plain expression (no comparison to split): it leaves them alone (it
 * read the arguments of a call that a constant does not have, and crashed). */
static const char const_fill_text[] =
    "{\"tlir\": 1, \"name\": \"k\",\n"
    " \"params\": [{\"name\": \"A\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [256]}],\n"
    " \"kernel\": {\"grid\": [4], \"threads\": 64, \"block_vars\": [\"bx\"], \"body\": [\n"
    "  {\"op\": \"alloc_fragment\", \"name\": \"F\", \"shape\": [64], \"dtype\": \"float32\"},\n"
    "  {\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [64], \"body\": [\"F[i] = 0.0\"]},\n"
    "  {\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [64], \"body\": [\"A[bx * 64 + i] = F[i] + 1.0\"]}]}}\n";

static void uniform_leaves_plain_assignments(void **state) {
  (void)state;
  job j;
  run_passes(&j, const_fill_text, NULL, NULL, 0, "sm_80");
  assert_null(stmt_at(j.prog, "/kernel/body/1")->uni_all);
  assert_null(stmt_at(j.prog, "/kernel/body/2")->uni_all);
  job_free(&j);
}

/* ---- barrier ---- */
static void barriers_where_expected(void **state) {
  (void)state;
  job j;
  run_passes(&j, small_text, NULL, NULL, 0, "sm_80");
  assert_true(stmt_at(j.prog, "/kernel/body/2")->barrier_before);
  assert_true(stmt_at(j.prog, "/kernel/body/3")->barrier_end);
  /* the loop's last iteration ended with a barrier: the copy out needs none */
  assert_false(stmt_at(j.prog, "/kernel/body/4")->barrier_before);
  job_free(&j);
}

/* After serial loops (pass_barrier.c): one whose iterations end with a
 * barrier leaves pending only what was pending before it, so what follows
 * needs no barrier for its body; one without leaves its body's accesses
 * pending; a loop around a loop that ends with a barrier needs none of its
 * own at the end for that inner loop's accesses. */
static const char loops_text[] =
    "{\"tlir\": 1, \"name\": \"k\",\n"
    " \"params\": [{\"name\": \"A\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [256]},\n"
    "            {\"name\": \"B\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [256]},\n"
    "            {\"name\": \"C\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [256]}],\n"
    " \"kernel\": {\"grid\": [4], \"threads\": 64, \"block_vars\": [\"bx\"], \"body\": [\n"
    "  {\"op\": \"alloc_shared\", \"name\": \"S\", \"shape\": [64], \"dtype\": \"float32\"},\n"
    "  {\"op\": \"alloc_fragment\", \"name\": \"F\", \"shape\": [64], \"dtype\": \"float32\"},\n"
    "  {\"op\": \"copy\", \"src\": \"A[bx * 64:bx * 64 + 64]\", \"dst\": \"S\"},\n"
    "  {\"op\": \"serial\", \"var\": \"k\", \"extent\": 4, \"body\": [\n"
    "    {\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [64], \"body\": [\"S[i] = S[i] + 1.0\"]}]},\n"
    "  {\"op\": \"copy\", \"src\": \"S\", \"dst\": \"B[bx * 64:bx * 64 + 64]\"},\n"
    "  {\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [64], \"body\": [\"F[i] = 0.0\"]},\n"
    "  {\"op\": \"serial\", \"var\": \"k\", \"extent\": 4, \"body\": [\n"
    "    {\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [64], \"body\": [\"F[i] = F[i] + S[(i + k) % 64]\"]}]},\n"
    "  {\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [64], \"body\": [\"S[i] = F[i]\"]},\n"
    "  {\"op\": \"serial\", \"var\": \"j\", \"extent\": 2, \"body\": [\n"
    "    {\"op\": \"serial\", \"var\": \"k\", \"extent\": 2, \"body\": [\n"
    "      {\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [64], \"body\": [\"S[i] = S[63 - i] * 2.0\"]}]}]},\n"
    "  {\"op\": \"copy\", \"src\": \"S\", \"dst\": \"C[bx * 64:bx * 64 + 64]\"}]}}\n";

static void barriers_after_serial_loops(void **state) {
  (void)state;
  job j;
  run_passes(&j, loops_text, NULL, NULL, 0, "sm_80"); /* and the verifier agrees with each choice */
  tl_stmt *rewrite = stmt_at(j.prog, "/kernel/body/3"), *reads = stmt_at(j.prog, "/kernel/body/6");
  tl_stmt *outer = stmt_at(j.prog, "/kernel/body/8"), *inner = stmt_at(j.prog, "/kernel/body/8/body/0");
  assert_true(rewrite->barrier_before && rewrite->barrier_end);
  assert_false(stmt_at(j.prog, "/kernel/body/4")->barrier_before); /* after a loop ending with a barrier */
  assert_false(reads->barrier_before);
  assert_false(reads->barrier_end); /* its iterations only read S */
  assert_true(stmt_at(j.prog, "/kernel/body/7")->barrier_before); /* other threads' reads of S are pending */
  assert_true(outer->barrier_before);
  assert_true(inner->barrier_end);
  assert_false(outer->barrier_end); /* the inner loop's barrier ends each outer iteration too */
  assert_false(stmt_at(j.prog, "/kernel/body/9")->barrier_before);
  /* each of those is needed: without it the verifier finds the conflict */
  inner->barrier_end = false;
  caught(&j, "barrier", "/kernel/body/8/body/0/body/0");
  job_free(&j);
  run_passes(&j, loops_text, NULL, NULL, 0, "sm_80");
  stmt_at(j.prog, "/kernel/body/7")->barrier_before = false;
  caught(&j, "barrier", "/kernel/body/7");
  job_free(&j);
}

static void barrier_removed(void **state) {
  (void)state;
  job j;
  run_passes(&j, small_text, NULL, NULL, 0, "sm_80");
  stmt_at(j.prog, "/kernel/body/2")->barrier_before = false;
  caught(&j, "barrier", "/kernel/body/2");
  job_free(&j);
  run_passes(&j, small_text, NULL, NULL, 0, "sm_80");
  stmt_at(j.prog, "/kernel/body/3")->barrier_before = false; /* the loop's first iteration meets body/2's writes */
  caught(&j, "barrier", "/kernel/body/3/body/0");
  job_free(&j);
}

static void loop_end_barrier_removed(void **state) {
  (void)state;
  job j;
  run_passes(&j, small_text, NULL, NULL, 0, "sm_80");
  stmt_at(j.prog, "/kernel/body/3")->barrier_end = false; /* iteration k + 1 rewrites what k wrote */
  caught(&j, "barrier", "/kernel/body/3/body/0");
  job_free(&j);
}

static void barrier_inside_parallel(void **state) {
  (void)state;
  job j;
  run_passes(&j, small_text, NULL, NULL, 0, "sm_80");
  stmt_at(j.prog, "/kernel/body/2/body/0")->barrier_before = true; /* not every thread gets there */
  caught(&j, "barrier", "/kernel/body/2/body/0");
  job_free(&j);
}

/* ---- place ---- */
static void placement_cleared(void **state) {
  (void)state;
  job j;
  run_passes(&j, small_text, NULL, NULL, 0, "sm_80");
  buffer(j.prog, "S")->smem_offset = -1;
  caught(&j, "place", "/kernel/body/0");
  job_free(&j);
}

static void fragment_layout_broken(void **state) {
  (void)state;
  job j;
  run_passes(&j, NULL, "gemm", NULL, 0, "sm_80");
  tl_sym *c = buffer(j.prog, "C_local");
  assert_true(c->in_regs && c->reg_layout == TL_LAYOUT_MMA);
  c->mma_mi++; /* tiles that no longer cover C's rows */
  caught(&j, "place", c->pointer);
  job_free(&j);
}

static tl_walk_act first_gemm(tl_stmt *s, void *user) {
  if (s->kind != S_GEMM)
    return TL_WALK_GO;
  *(tl_stmt **)user = s;
  return TL_WALK_STOP;
}

static void gemm_path_target_lacks(void **state) {
  (void)state;
  job j;
  run_passes(&j, NULL, "gemm", NULL, 0, "sm_80");
  tl_stmt *g = NULL;
  static const tl_walker w = {.pre = first_gemm};
  tl_walk(&j.prog->body, &w, &g);
  assert_non_null(g);
  assert_true(g->use_mma && !g->use_wgmma);
  g->use_wgmma = true; /* sm_80 has no wgmma */
  caught(&j, "place", g->pointer);
  g->use_wgmma = false;
  g->A->in_regs = true; /* A in registers that the gemm reads from shared memory */
  caught(&j, "place", g->pointer);
  job_free(&j);
}

/* ---- pipeline ---- */
static void stages_disagree(void **state) {
  (void)state;
  /* three stages asked, two fit sm_80's shared memory: the loop rotates through two */
  tl_define three = {"num_stages", "3"};
  job j;
  run_passes(&j, NULL, "flash_attention", &three, 1, "sm_80");
  tl_sym *k = buffer(j.prog, "K_shared"), *v = buffer(j.prog, "V_shared");
  assert_int_equal(k->stages, 2);
  assert_int_equal(v->stages, 2);
  k->stages = 3; /* K's third stage would overlap V */
  caught(&j, "pipeline", v->pointer);
  tl_pass_smem(j.prog); /* laid out again with room for it: still not the loop's stages */
  tl_error err = {0};
  assert_int_equal(tl_verify(j.prog, "pipeline", &j.cg, &err), TL_INTERNAL);
  print_message("caught: %s: %s\n", err.pointer, err.message);
  assert_non_null(strstr(err.message, "stages its loop rotates through"));
  job_free(&j);
}

static void prefetched_buffer_read_outside(void **state) {
  (void)state;
  job j;
  run_passes(&j, NULL, "gemm", NULL, 0, "sm_80");
  tl_stmt *loop = NULL;
  for (int i = 0; i < j.prog->body.n; i++)
    if (j.prog->body.items[i]->pipe)
      loop = j.prog->body.items[i];
  assert_non_null(loop);
  tl_stmt *copy = NULL;
  for (int i = 0; i < loop->body.n && !copy; i++)
    if (loop->body.items[i]->prefetch)
      copy = loop->body.items[i];
  assert_non_null(copy);
  /* the copy after the loop now reads the prefetched buffer (whose stage is not waited for there) */
  tl_stmt *last = j.prog->body.items[j.prog->body.n - 1];
  assert_int_equal(last->kind, S_COPY);
  last->src->sym = copy->dst->sym;
  caught(&j, "pipeline", last->pointer);
  job_free(&j);
}


/* The pipelined loop of the program's top level and its first prefetched copy. */
static tl_stmt *pipe_loop(job *j, tl_stmt **copy) {
  tl_stmt *loop = NULL;
  for (int i = 0; i < j->prog->body.n; i++)
    if (j->prog->body.items[i]->pipe)
      loop = j->prog->body.items[i];
  assert_non_null(loop);
  *copy = NULL;
  for (int i = 0; i < loop->body.n && !*copy; i++)
    if (loop->body.items[i]->prefetch)
      *copy = loop->body.items[i];
  assert_non_null(*copy);
  return loop;
}

/* Expects the verifier after stage to fail with a message holding what. */
static void caught_saying(job *j, const char *stage, const char *pointer, const char *what) {
  tl_error err = {0};
  caught(j, stage, pointer);
  assert_int_equal(tl_verify(j->prog, stage, &j->cg, &err), TL_INTERNAL);
  if (!strstr(err.message, what))
    fail_msg("'%s' does not say '%s'", err.message, what);
}

/* sm_90a's gemm: wgmma with one group pending across K tiles, two m64 row
 * tiles per warp (interleaved), TMA copies of A and B with mbarriers. */
static void wgmma_pending_rule(void **state) {
  (void)state;
  job j;
  run_passes(&j, NULL, "gemm", NULL, 0, "sm_90a");
  tl_stmt *copy, *loop = pipe_loop(&j, &copy), *g = NULL;
  static const tl_walker w = {.pre = first_gemm};
  tl_walk(&loop->body, &w, &g);
  assert_non_null(g);
  assert_true(g->use_wgmma && g->wg_pending == 1 && loop->wg_drain);
  assert_true(loop->pipe_ahead + g->wg_pending <= loop->pipe_stages - 1);
  g->wg_pending = 2; /* the next prefetch would overwrite a stage the older pending group reads */
  caught_saying(&j, "pipeline", loop->pointer, "pending wgmma group reads");
  g->wg_pending = 1;
  g->clear_accum = true; /* writing C's registers while a group is pending */
  caught_saying(&j, "pipeline", g->pointer, "pending across iterations");
  g->clear_accum = false;
  loop->wg_drain = false; /* the epilogue would read unfinished accumulators */
  caught(&j, "pipeline", g->pointer);
  loop->wg_drain = true;
  copy->dst->sym->stages = loop->pipe_stages - 1; /* the buffers' stages, not the loop's */
  caught_saying(&j, "pipeline", copy->pointer, "stages its loop rotates through");
  job_free(&j);
}

/* sm_90a's float8 gemm with DeepGEMM's promotion: the gemm clears C each K
 * tile, the promotion runs one iteration late on two register copies of C
 * (pass_pipeline.c's lag_gemm); the verifier holds the loop to that. */
static void wgmma_lag_rule(void **state) {
  (void)state;
  job j;
  run_passes(&j, NULL, "gemm_fp8_blockscaled", NULL, 0, "sm_90a");
  tl_stmt *copy, *loop = pipe_loop(&j, &copy), *g = NULL;
  static const tl_walker w = {.pre = first_gemm};
  tl_walk(&loop->body, &w, &g);
  assert_non_null(g);
  assert_true(g->use_wgmma && g->clear_accum && g->wg_pending == 1 && loop->wg_drain);
  assert_int_equal(loop->wg_lag, 4);
  assert_int_equal(g->C->stages, 2);
  assert_null(loop->lag_why);
  g->C->stages = 1; /* one copy: the next gemm would overwrite the C the late promotion reads */
  caught_saying(&j, "pipeline", g->pointer, "pending across iterations");
  g->C->stages = 2;
  loop->wg_lag = 3; /* copies alternate by trip position: a trip is an even number of iterations */
  caught_saying(&j, "pipeline", g->pointer, "pending across iterations");
  loop->wg_lag = 0; /* a clearing gemm with a group pending, its C read in the loop */
  caught(&j, "pipeline", loop->body.items[loop->body.n - 1]->pointer);
  loop->wg_lag = 4;
  tl_stmt *ld = NULL; /* the copy of scale_a's column, loaded an iteration early into sa's two copies */
  for (int i = 0; i < loop->body.n; i++)
    if (loop->body.items[i]->lag_load && loop->body.items[i]->kind == S_COPY)
      ld = loop->body.items[i];
  assert_non_null(ld);
  assert_int_equal(ld->dst->sym->stages, 2);
  ld->dst->sym->stages = 1; /* one copy: the next iteration's load would overwrite what the late tail reads */
  caught_saying(&j, "pipeline", ld->pointer, "two register copies");
  ld->dst->sym->stages = 2;
  g->clear_accum = false; /* the late promotion needs the gemm's C cleared every iteration */
  caught_saying(&j, "pipeline", g->pointer, "pending across iterations");
  job_free(&j);
}

static void wgmma_accumulator_interleaved(void **state) {
  (void)state;
  job j;
  run_passes(&j, NULL, "gemm", NULL, 0, "sm_90a");
  tl_sym *c = buffer(j.prog, "C_local");
  assert_true(c->mma_mi > 1 && c->mma_interleaved); /* 128 rows, 4 warps: two m64 tiles */
  tl_stmt *g = NULL;
  static const tl_walker w = {.pre = first_gemm};
  tl_walk(&j.prog->body, &w, &g);
  c->mma_interleaved = false; /* mma.sync's order, which wgmma does not write */
  caught_saying(&j, "place", g->pointer, "wgmma's accumulator layout");
  c->mma_interleaved = true;
  c->reg_layout = TL_LAYOUT_BLOCKED; /* only mma layouts interleave */
  caught(&j, "place", c->pointer);
  job_free(&j);
}

static void tma_maps_and_mbarriers(void **state) {
  (void)state;
  job j;
  run_passes(&j, NULL, "gemm", NULL, 0, "sm_90a");
  tl_stmt *copy, *loop = pipe_loop(&j, &copy);
  /* A's 64-byte rows in the 64-byte swizzle, B's panels of 64 columns; the loop warp-specialized (its
   * empty mbarriers after the full ones) */
  assert_true(copy->tma && loop->tma && j.prog->ntmaps == 2 && j.prog->tmaps[copy->tma_map].swizzle == 64);
  assert_true(loop->wspec && j.prog->nmbar == 2 * loop->pipe_stages);
  int map = copy->tma_map;
  copy->tma_map = j.prog->ntmaps; /* past the program's maps */
  caught_saying(&j, "tma", copy->pointer, "tensor map");
  copy->tma_map = map;
  int64_t box0 = j.prog->tmaps[map].box[0];
  j.prog->tmaps[map].box[0] = 512; /* over the hardware's 256 */
  caught(&j, "tma", copy->pointer);
  j.prog->tmaps[map].box[0] = box0;
  loop->mbar = j.prog->nmbar - (int)loop->pipe_stages + 1; /* its last stage's mbarrier past the program's */
  caught_saying(&j, "tma", loop->pointer, "mbarriers");
  loop->mbar = 0;
  j.prog->mbar_offset -= 8; /* the mbarriers over the last buffer */
  caught(&j, "tma", "");
  j.prog->mbar_offset += 8;
  copy->tma = false; /* the loop waits on mbarriers that none of its copies arrives on */
  bool other = false;
  for (int i = 0; i < loop->body.n; i++)
    other |= loop->body.items[i]->tma;
  if (!other)
    caught(&j, "tma", loop->pointer);
  copy->tma = true;
  tl_error err = {0};
  assert_int_equal(tl_verify(j.prog, "tma", &j.cg, &err), TL_OK);
  j.cg.tma = false; /* sm_80 has no TMA */
  caught(&j, "tma", "");
  job_free(&j);
}

/* sm_90a's gemm with 64-wide K tiles: both copies on TMA, so a producer
 * warpgroup issues them (pass_wspec.c); each broken promise is caught. */
static void wspec_producer(void **state) {
  (void)state;
  job j;
  tl_define d[] = {{"block_K", "64"}};
  run_passes(&j, NULL, "gemm", d, 1, "sm_90a");
  tl_stmt *copy, *loop = pipe_loop(&j, &copy);
  assert_true(loop->wspec && loop->tma && j.prog->wspec_threads == 128 && j.prog->nmbar == 2 * loop->pipe_stages);
  assert_true(loop->wspec_empty == loop->mbar + loop->pipe_stages && loop->wspec_lag == 1);
  /* one block of 256 threads per SM starts with 255 registers a thread: no setmaxnreg gives more */
  assert_true(j.prog->wspec_blocks == 1 && j.prog->wspec_regs[1] == 0);
  loop->wspec_empty = loop->mbar + 1; /* the empty mbarriers over the full ones */
  caught_saying(&j, "wspec", loop->pointer, "empty mbarriers");
  loop->wspec_empty = loop->mbar + (int)loop->pipe_stages;
  j.prog->wspec_threads = 0; /* a wspec loop without its producer */
  caught(&j, "wspec", loop->pointer);
  j.prog->wspec_threads = 128;
  j.prog->wspec_regs[1] = 236; /* setmaxnreg takes multiples of 8 */
  caught(&j, "wspec", loop->pointer);
  j.prog->wspec_regs[1] = 0;
  copy->tma = false; /* a copy the producer does not issue */
  caught_saying(&j, "wspec", copy->pointer, "not a bulk tensor copy");
  copy->tma = true;
  tl_error err = {0};
  assert_int_equal(tl_verify(j.prog, "wspec", &j.cg, &err), TL_OK);
  j.cg.wgmma = false; /* sm_90 has no setmaxnreg */
  caught(&j, "wspec", loop->pointer);
  job_free(&j);
  /* sm_90: TMA, and the loop stays the program's threads' */
  run_passes(&j, NULL, "gemm", d, 1, "sm_90");
  loop = pipe_loop(&j, &copy);
  assert_true(loop->tma && !loop->wspec && j.prog->wspec_threads == 0 && j.prog->nmbar == loop->pipe_stages);
  job_free(&j);
}

/* examples/gemm_w4a16_sliced.json: its K loop in 3 slices of 128 threads (pass_wspec.c), 6 stages, two a
 * slice; the verifier catches slices a persistent kernel runs, stages the slices would share, and a sums'
 * buffer the loop does not stage. */
static void wspec_slices(void **state) {
  (void)state;
  job j;
  run_passes(&j, NULL, "gemm_w4a16_sliced", NULL, 0, "sm_90a");
  tl_stmt *copy, *loop = pipe_loop(&j, &copy);
  assert_true(loop->wspec && loop->slices == 3 && j.prog->slices == 3 && !j.prog->persistent &&
              loop->pipe_stages == 6 && loop->slice_buf != NULL && !loop->pingpong);
  tl_error err = {0};
  assert_int_equal(tl_verify(j.prog, "wspec", &j.cg, &err), TL_OK);
  j.prog->persistent = true; /* tiles walked by blocks whose slices return after the loop */
  caught_saying(&j, "wspec", loop->pointer, "slices");
  j.prog->persistent = false;
  loop->pipe_stages = 4; /* slices sharing stages */
  caught_saying(&j, "wspec", loop->pointer, "slices");
  loop->pipe_stages = 6;
  const tl_sym *buf = loop->slice_buf;
  loop->slice_buf = j.prog->params[0]; /* the sums through memory the loop does not stage */
  caught_saying(&j, "wspec", loop->pointer, "slices");
  loop->slice_buf = buf;
  j.prog->slices = 5; /* more than TL_MAX_SLICES */
  caught_saying(&j, "wspec", loop->pointer, "slices");
  j.prog->slices = 3;
  assert_int_equal(tl_verify(j.prog, "wspec", &j.cg, &err), TL_OK);
  job_free(&j);
  /* asked for 4 slices, 6 stages: refused, and said why */
  tl_define d[] = {{"slices", "4"}};
  run_passes(&j, NULL, "gemm_w4a16_sliced", d, 1, "sm_90a");
  loop = pipe_loop(&j, &copy);
  assert_true(loop->wspec && loop->slices == 1 && j.prog->slices == 1 && loop->slices_why &&
              strstr(loop->slices_why, "not a multiple of its 4 slices"));
  job_free(&j);
}

/* A persistent kernel (pass_wspec.c) gets no barrier after its
 * warp-specialized loop, and one between tiles only where its shared
 * memory asks (pass_barrier.c): none for the gemm (stages on mbarriers,
 * the epilogue from registers), none for flash attention either, whose Q
 * tile the producer copies (wspec_pre, on mbarriers of its own); were the
 * program's threads to copy it (the next tile rewriting a buffer the last
 * one read) with no barrier, the verifier, running the next tile after
 * this one, catches the conflict. */
static void persistent_tile_barrier(void **state) {
  (void)state;
  job j;
  tl_define d[] = {{"block_K", "64"}};
  run_passes(&j, NULL, "gemm", d, 1, "sm_90a");
  tl_stmt *copy, *loop = pipe_loop(&j, &copy);
  assert_true(j.prog->persistent && loop->wspec && !j.prog->tile_barrier);
  for (int i = 0; i < j.prog->body.n; i++)
    assert_false(j.prog->body.items[i]->barrier_before);
  job_free(&j);
  run_passes(&j, NULL, "flash_attention", NULL, 0, "sm_90a");
  assert_true(j.prog->persistent && !j.prog->tile_barrier);
  tl_stmt *q = stmt_at(j.prog, "/kernel/body/12");
  assert_true(q->kind == S_COPY && q->wspec_pre && !strcmp(q->dst->sym->name, "Q_shared"));
  q->wspec_pre = false;
  tl_error err = {0};
  assert_int_equal(tl_verify(j.prog, "barrier", &j.cg, &err), TL_INTERNAL);
  print_message("caught: %s: %s\n", err.pointer, err.message);
  assert_non_null(strstr(err.message, "verifier: after barrier: "));
  job_free(&j);
}

/* Flash attention's Q copy, the producer's too (pass_wspec.c's pre copies): the verifier catches its mbarriers
 * overlapping the loop's, its buffer without its second copy, and a pre copy inside a body. */
static void pre_copy_promises(void **state) {
  (void)state;
  job j;
  tl_define d[] = {{"dim", "64"}};
  run_passes(&j, NULL, "flash_attention", d, 1, "sm_90a");
  tl_stmt *q = stmt_at(j.prog, "/kernel/body/12");
  assert_true(q->wspec_pre && q->pre_stages == 2 && q->dst->sym->stages == 2);
  tl_error err = {0};
  assert_int_equal(tl_verify(j.prog, "wspec", &j.cg, &err), TL_OK);
  int m = q->pre_mbar;
  q->pre_mbar = 0; /* the loop's full mbarriers */
  caught_saying(&j, "wspec", "/kernel/body/12", "a copy the producer issues before its loop");
  q->pre_mbar = m;
  q->dst->sym->stages = 1;
  caught_saying(&j, "wspec", "/kernel/body/12", "a copy the producer issues before its loop");
  q->dst->sym->stages = 2;
  tl_stmt *k = stmt_at(j.prog, "/kernel/body/17/body/0");
  k->wspec_pre = true;
  caught_saying(&j, "wspec", "/kernel/body/17/body/0", "is not of the kernel's body");
  job_free(&j);
}

/* A uint4 tile takes half a byte per element in shared memory. */
static void packed_shared_bytes(void **state) {
  (void)state;
  job j;
  run_passes(&j, NULL, "../tests/golden/packed_w4", NULL, 0, "sm_80"); /* accepted at 512 bytes, not 1024 */
  tl_sym *ws = buffer(j.prog, "Ws");
  assert_int_equal(ws->dtype, TL_UINT4);
  j.prog->mbar_offset = j.prog->scratch_offset = ws->smem_offset + 16 * 64 / 2 - 16; /* 16 bytes short */
  caught(&j, "pipeline", "");
  job_free(&j);
}

/* ---- range ---- */
static void guard_marked_inside(void **state) {
  (void)state;
  job j;
  run_passes(&j, small_text, NULL, NULL, 0, "sm_80");
  tl_stmt *in = stmt_at(j.prog, "/kernel/body/1"), *out = stmt_at(j.prog, "/kernel/body/4");
  assert_false(in->src->inside[0]); /* A's length is known at run time only */
  assert_true(out->dst->inside[0]); /* B[bx * 64 +: 64] with bx < 4 */
  in->src->inside[0] = true;
  caught(&j, "range", "/kernel/body/1");
  job_free(&j);
}

/* An assignment's elements: B[bx * 64 + i] with bx < 4 and i < 64 is proven inside B's 256, A's index
 * against its run-time length keeps its guard; marking A's inside is caught. */
static const char elem_text[] =
    "{\"tlir\": 1, \"name\": \"k\",\n"
    " \"params\": [{\"name\": \"A\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [\"n\"]},\n"
    "            {\"name\": \"B\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [256]},\n"
    "            {\"name\": \"n\", \"kind\": \"scalar\", \"dtype\": \"int32\"}],\n"
    " \"kernel\": {\"grid\": [4], \"threads\": 64, \"block_vars\": [\"bx\"], \"body\": [\n"
    "  {\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [64], \"body\": [\"B[bx * 64 + i] = A[bx * 64 + i] * 2.0\"]}]}}\n";

static void elem_marked_inside(void **state) {
  (void)state;
  job j;
  run_passes(&j, elem_text, NULL, NULL, 0, "sm_80");
  tl_stmt *as = stmt_at(j.prog, "/kernel/body/0/body/0");
  assert_int_equal(as->kind, S_ASSIGN);
  assert_int_equal(as->lhs->inside, 1); /* B[bx * 64 + i]: proven */
  tl_expr *a = as->value->args[0];
  assert_int_equal(a->kind, E_INDEX);
  assert_int_equal(a->inside, 0); /* A's length is known at run time only */
  a->inside = 1;
  caught(&j, "range", "/kernel/body/0/body/0");
  job_free(&j);
}

static void range_narrowed(void **state) {
  (void)state;
  job j;
  run_passes(&j, small_text, NULL, NULL, 0, "sm_80");
  tl_stmt *loop = stmt_at(j.prog, "/kernel/body/3");
  assert_true(loop->var->has_range);
  assert_int_equal(loop->var->rhi, 3);
  loop->var->rhi = 2; /* k reaches 3 */
  caught(&j, "range", "/kernel/body/3");
  job_free(&j);
  run_passes(&j, small_text, NULL, NULL, 0, "sm_80");
  tl_sym *bx = j.prog->block_vars[0];
  bx->rhi = 2; /* the grid has 4 blocks */
  tl_error err = {0};
  assert_int_equal(tl_verify(j.prog, "range", &j.cg, &err), TL_INTERNAL);
  print_message("caught: %s: %s\n", err.pointer, err.message);
  assert_non_null(strstr(err.message, "block variable 'bx'"));
  job_free(&j);
}

/* ---- through tl_compile ---- */
typedef struct {
  const char *stage, *pointer;
  int calls;
} breaker;

/* Removes the barrier before the statement at b->pointer after b->stage. */
static void break_barrier(void *user, const char *stage, const tl_program *prog) {
  breaker *b = user;
  if (strcmp(stage, b->stage) != 0)
    return;
  b->calls++;
  stmt_at((tl_program *)prog, b->pointer)->barrier_before = false;
}

static tl_status compile_broken(bool verify, tl_error *err) {
  breaker b = {"barrier", "/kernel/body/2", 0};
  tl_compile_request req = {.program = small_text, .program_len = strlen(small_text), .target = "sm_80",
                            .dump = break_barrier, .dump_user = &b, .source_only = true, .verify = verify};
  tl_diags diags = {.arena = tl_arena_new()};
  tl_build *out = NULL;
  memset(err, 0, sizeof *err);
  tl_status st = tl_compile(&req, &out, &diags, err);
  if (st == TL_NO_TOOLCHAIN || st == TL_UNSUPPORTED) {
    print_message("skipping: no toolchain offers sm_80 here: %s\n", err->message);
    tl_arena_free(diags.arena);
    skip();
  }
  assert_int_equal(b.calls, 1);
  tl_build_free(out);
  tl_arena_free(diags.arena);
  return st;
}

static void compile_stops_at_broken_pass(void **state) {
  (void)state;
  const char *saved = getenv("TL_VERIFY");
  char *keep = saved ? strdup(saved) : NULL;
  tl_error err;
  unsetenv("TL_VERIFY");
  assert_int_equal(compile_broken(false, &err), TL_OK); /* not asked: the broken IR goes through */
  assert_int_equal(compile_broken(true, &err), TL_INTERNAL);
  assert_string_equal(err.pointer, "/kernel/body/2");
  assert_non_null(strstr(err.message, "after barrier"));
  setenv("TL_VERIFY", "1", 1);
  assert_int_equal(compile_broken(false, &err), TL_INTERNAL);
  assert_string_equal(err.pointer, "/kernel/body/2");
  setenv("TL_VERIFY", "0", 1);
  assert_int_equal(compile_broken(false, &err), TL_OK);
  if (keep)
    setenv("TL_VERIFY", keep, 1);
  else
    unsetenv("TL_VERIFY");
  free(keep);
}

/* Loops nested as deep as programs may nest them (TL_MAX_STMT_DEPTH), each
 * rewriting shared memory: the barrier check runs each body once, not once
 * per iteration of every loop around it (which would be 2^depth runs). */
static void deep_loops_verify_fast(void **state) {
  (void)state;
  enum { DEPTH = TL_MAX_STMT_DEPTH - 3 };
  char *text = malloc(64 * 1024);
  assert_non_null(text);
  int n = snprintf(text, 64 * 1024,
                   "{\"tlir\": 1, \"name\": \"k\", \"params\": [{\"name\": \"A\", \"kind\": \"tensor\", "
                   "\"dtype\": \"float32\", \"shape\": [64]}], \"kernel\": {\"grid\": [1], \"threads\": 64, "
                   "\"block_vars\": [\"bx\"], \"body\": [{\"op\": \"alloc_shared\", \"name\": \"S\", "
                   "\"shape\": [64], \"dtype\": \"float32\"}, {\"op\": \"copy\", \"src\": \"A\", \"dst\": \"S\"}");
  for (int d = 0; d < DEPTH; d++)
    n += snprintf(text + n, (size_t)(64 * 1024 - n), ", {\"op\": \"serial\", \"var\": \"k%d\", \"extent\": 2, "
                  "\"body\": [{\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [64], "
                  "\"body\": [\"S[i] = S[i] + 1.0\"]}", d);
  for (int d = 0; d < DEPTH; d++)
    n += snprintf(text + n, (size_t)(64 * 1024 - n), "]}");
  snprintf(text + n, (size_t)(64 * 1024 - n), ", {\"op\": \"copy\", \"src\": \"S\", \"dst\": \"A\"}]}}");
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  job j;
  run_passes(&j, text, NULL, NULL, 0, "sm_80");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  print_message("%d nested loops: passes and verifier in %.3f s\n", DEPTH, s);
  assert_true(s < 10.0);
  /* the innermost loop's iterations rewrite S: its end barrier is needed */
  tl_stmt *inner = j.prog->body.items[2];
  for (int d = 1; d < DEPTH; d++)
    inner = inner->body.items[1];
  assert_true(inner->barrier_end);
  inner->barrier_end = false;
  tl_error err = {0};
  assert_int_equal(tl_verify(j.prog, "barrier", &j.cg, &err), TL_INTERNAL);
  print_message("caught: %s: %s\n", err.pointer, err.message);
  job_free(&j);
  free(text);
}

/* Every example verifies on the targets with each code path. */
static void examples_verify(void **state) {
  (void)state;
  static const char *const names[] = {"gemm", "gemm_nt", "gemm_swizzle", "flash_attention", "dequant_gemm",
                                      "dequant_gemm_threads", "tilus_add_one", "tilus_matmul"};
  static const char *const targets[] = {"sm_90a", "sm_80", "gfx942", "gfx1100", "gfx1201"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
      if (strcmp(names[i], "flash_attention") == 0 && targets[t][0] == 'g')
        continue; /* more LDS than AMD's 64 KiB */
      job j;
      run_passes(&j, NULL, names[i], NULL, 0, targets[t]);
      job_free(&j);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(uniform_leaves_plain_assignments),
      cmocka_unit_test(barriers_where_expected), cmocka_unit_test(barriers_after_serial_loops),
      cmocka_unit_test(barrier_removed),
      cmocka_unit_test(loop_end_barrier_removed), cmocka_unit_test(barrier_inside_parallel),
      cmocka_unit_test(placement_cleared),        cmocka_unit_test(fragment_layout_broken),
      cmocka_unit_test(gemm_path_target_lacks),   cmocka_unit_test(stages_disagree),
      cmocka_unit_test(prefetched_buffer_read_outside), cmocka_unit_test(guard_marked_inside), cmocka_unit_test(elem_marked_inside),
      cmocka_unit_test(range_narrowed),           cmocka_unit_test(compile_stops_at_broken_pass),
      cmocka_unit_test(deep_loops_verify_fast),   cmocka_unit_test(examples_verify),
      cmocka_unit_test(wgmma_pending_rule),       cmocka_unit_test(wgmma_lag_rule),
      cmocka_unit_test(wgmma_accumulator_interleaved),
      cmocka_unit_test(tma_maps_and_mbarriers),   cmocka_unit_test(packed_shared_bytes),
      cmocka_unit_test(wspec_producer),           cmocka_unit_test(regions_broken),
      cmocka_unit_test(persistent_tile_barrier),
      cmocka_unit_test(pre_copy_promises),        cmocka_unit_test(wspec_slices),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
