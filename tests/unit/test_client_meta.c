/*
 * test_client_meta.c - libtlclient's kernel metadata without a server or a
 * GPU: parsing and validation (client/meta.c), the evaluation of the grid
 * and shape expressions against the reference interpreter's own
 * tl_grid_size / tl_tensor_shape (on every example compiled for real when
 * NVRTC is here, and on a program made to stress the integer rules: floor
 * division and modulo, int32 wrap-around, int64, min/max/abs/ceildiv,
 * if_then_else over a bool), the launch plan (argument kinds, ranges,
 * alignment of tensor pointers, grid limits, the values handed to the
 * driver), and which targets run on which architecture.
 *
 * Random arguments come from a seeded generator; the seed is printed and
 * TL_TEST_SEED=<n> replays it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../../client/internal.h"
#include "../../compiler/cubin.h"
#include "../../compiler/interp.h"
#include "../../compiler/tlcompiler.h"

static uint64_t rng_state;

static uint64_t rng(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1DULL;
}

static const char *src_dir(void) {
  const char *s = getenv("TL_SRCDIR");
  return s && *s ? s : ".";
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* The metadata compile.c writes, for the parts the client reads, made from
 * a checked program the same way (E_CONST as an integer, else the checked
 * expression printed back): lets the expression tests run without NVRTC. */
static char *meta_of(const tl_program *prog) {
  json_t *m = json_object();
  json_object_set_new(m, "entry", json_string(prog->name));
  json_object_set_new(m, "target", json_string("sm_90"));
  json_object_set_new(m, "binary", json_string("cubin"));
  json_t *params = json_array();
  for (int i = 0; i < prog->nparams; i++) {
    const tl_sym *s = prog->params[i];
    json_t *p = json_object();
    json_object_set_new(p, "name", json_string(s->name));
    json_object_set_new(p, "kind", json_string(s->kind == SYM_TENSOR ? "tensor" : "scalar"));
    json_object_set_new(p, "dtype", json_string(tl_dtype_name(s->dtype)));
    if (s->kind == SYM_TENSOR) {
      json_t *shape = json_array();
      for (int d = 0; d < s->ndim; d++)
        json_array_append_new(shape, s->shape[d]->kind == E_CONST ? json_integer(s->shape[d]->val.i)
                                                                   : json_string(tl_expr_str(prog->arena, s->shape[d])));
      json_object_set_new(p, "shape", shape);
      json_object_set_new(p, "align", json_integer(s->align));
    }
    json_array_append_new(params, p);
  }
  json_object_set_new(m, "params", params);
  json_t *launch = json_object(), *grid = json_array();
  for (int i = 0; i < prog->ngrid; i++)
    json_array_append_new(grid, prog->grid[i]->kind == E_CONST ? json_integer(prog->grid[i]->val.i)
                                                              : json_string(tl_expr_str(prog->arena, prog->grid[i])));
  json_object_set_new(launch, "grid", grid);
  json_object_set_new(launch, "block", json_pack("[III]", (json_int_t)prog->threads[0], (json_int_t)prog->threads[1],
                                                 (json_int_t)prog->threads[2]));
  json_object_set_new(launch, "dynamic_shared_bytes", json_integer(0));
  json_object_set_new(m, "launch", launch);
  char *text = json_dumps(m, JSON_SORT_KEYS);
  json_decref(m);
  return text;
}

/* A random value for a scalar of dtype d: mostly small, sometimes near the
 * type's edges (to reach int32 wrap-around), sometimes negative. */
static int64_t random_scalar(tl_dtype d) {
  uint64_t r = rng();
  switch (r % 8) {
  case 0: return -(int64_t)(rng() % 50);
  case 1:
    if (d == TL_INT32)
      return (int64_t)(int32_t)(uint32_t)rng();
    return (int64_t)(rng() >> (rng() % 64));
  case 2: return d == TL_INT32 ? INT32_MAX - (int64_t)(rng() % 3) : (int64_t)(rng() % 100000000000ULL);
  default: return (int64_t)(rng() % 5000);
  }
}

/* Compares the client's evaluation with the interpreter's for nrounds random
 * argument sets.  Returns how many rounds had every value defined. */
static int compare_with_interp(const tl_program *prog, const tl_meta *m, int nrounds) {
  assert_int_equal(m->nparams, prog->nparams);
  int defined = 0;
  for (int round = 0; round < nrounds; round++) {
    tl_arg args[TL_MAX_PARAMS];
    tl_kernel_arg kargs[TL_KERNEL_PARAMS_MAX];
    memset(args, 0, sizeof args);
    memset(kargs, 0, sizeof kargs);
    for (int i = 0; i < prog->nparams; i++) {
      const tl_sym *s = prog->params[i];
      if (s->kind == SYM_TENSOR) {
        kargs[i] = tl_arg_tensor(0);
        continue;
      }
      int64_t v = s->dtype == TL_BOOL ? (int64_t)(rng() % 2) : random_scalar(s->dtype);
      args[i].scalar.i = v;
      kargs[i] = tl_arg_int(v);
    }
    int64_t g1[3], g2[3];
    tl_error e1, e2;
    tl_status s1 = tl_grid_size(prog, args, g1, &e1);
    tl_status s2 = tl_meta_grid(m, kargs, m->nparams, g2, &e2);
    if ((s1 == TL_OK) != (s2 == TL_OK))
      fail_msg("grid of %s: interpreter %s (%s), client %s (%s)", prog->name, tl_strerror(s1),
               s1 ? e1.message : "", tl_strerror(s2), s2 ? e2.message : "");
    bool ok = s1 == TL_OK;
    for (int d = 0; ok && d < 3; d++)
      if (g1[d] != g2[d])
        fail_msg("grid[%d] of %s: interpreter %lld, client %lld", d, prog->name, (long long)g1[d], (long long)g2[d]);
    for (int p = 0; p < prog->nparams; p++) {
      if (prog->params[p]->kind != SYM_TENSOR)
        continue;
      int64_t a[TL_MAX_DIMS], b[TL_KERNEL_DIMS_MAX];
      s1 = tl_tensor_shape(prog, p, args, a, &e1);
      s2 = tl_meta_shape(m, p, kargs, m->nparams, b, &e2);
      if ((s1 == TL_OK) != (s2 == TL_OK))
        fail_msg("shape of %s.%s: interpreter %s (%s), client %s (%s)", prog->name, prog->params[p]->name,
                 tl_strerror(s1), s1 ? e1.message : "", tl_strerror(s2), s2 ? e2.message : "");
      ok &= s1 == TL_OK;
      for (int d = 0; s1 == TL_OK && d < prog->params[p]->ndim; d++)
        if (a[d] != b[d])
          fail_msg("dim %d of %s.%s: interpreter %lld, client %lld", d, prog->name, prog->params[p]->name,
                   (long long)a[d], (long long)b[d]);
    }
    defined += ok;
  }
  return defined;
}

static const char stress_program[] =
    "{\"tlir\": 1, \"name\": \"exprs\", \"constants\": {\"c\": 7, \"big\": 3000000000},\n"
    " \"params\": [\n"
    "  {\"name\": \"n\", \"kind\": \"scalar\", \"dtype\": \"int32\"},\n"
    "  {\"name\": \"m\", \"kind\": \"scalar\", \"dtype\": \"int64\"},\n"
    "  {\"name\": \"f\", \"kind\": \"scalar\", \"dtype\": \"bool\"},\n"
    "  {\"name\": \"t\", \"kind\": \"tensor\", \"dtype\": \"float32\",\n"
    "   \"shape\": [\"n * 3 + 1\", \"ceildiv(m, c)\", \"abs(n) % 5 + m // 3\", \"abs((n * 65536) // 65536)\",\n"
    "             \"min(n, c * 2) + max(-n, 2)\", \"abs(n + big) // 2\", \"abs((n << 3) >> 1)\", \"-n // c + n\"]},\n"
    "  {\"name\": \"u\", \"kind\": \"tensor\", \"dtype\": \"int8\", \"shape\": [\"if_then_else(f, n, c)\", 5]}\n"
    " ],\n"
    " \"kernel\": {\"grid\": [\"ceildiv(n, 128)\", \"(n & 1023) % c + (n ^ 5) // 4\", \"m % 1000 - n % 3\"],\n"
    "            \"threads\": 32, \"block_vars\": [\"bx\", \"by\", \"bz\"], \"body\": []}}\n";

static void test_eval_stress_program(void **state) {
  (void)state;
  tl_arena *arena = tl_arena_new();
  tl_diags diags = {.arena = arena};
  tl_program *prog = tl_load_program(arena, stress_program, strlen(stress_program), NULL, 0, &diags);
  if (!prog) {
    tl_diags_print(&diags, "stress", stderr);
    fail_msg("the stress program does not check");
  }
  char *text = meta_of(prog);
  tl_meta *m = NULL;
  tl_error err;
  if (tl_meta_parse(text, &m, &err) != TL_OK)
    fail_msg("%s\n%s", err.message, text);
  int defined = compare_with_interp(prog, m, 3000);
  printf("stress program: %d of 3000 argument sets fully defined\n", defined);
  assert_true(defined > 300); /* the comparison is not only of errors */
  tl_meta_free(m);
  free(text);
  tl_arena_free(arena);
}

/* Every example compiled for real (compute_80: PTX, quick), at its default
 * constants and at the sizes of tests/gpu/check_examples.py. */
static void test_eval_examples(void **state) {
  (void)state;
  tl_error err;
  const char *tool;
  (void)tool;
  if (!tl_compiler_targets(&tool, &err) || !tl_compiler_target_toolchain("compute_80")) {
    printf("skipping: no NVRTC here (compute_80 is not offered): the examples' real metadata is not "
           "evaluated (the stress program covers the evaluator)\n");
    skip();
  }
  static const struct {
    const char *name;
    tl_define defs[6];
    int ndefs;
  } cases[] = {
      {"tilus_add_one", {{0}}, 0},
      {"tilus_matmul", {{"n_size", "256"}, {"k_size", "256"}}, 2},
      {"gemm", {{"M", "200"}, {"N", "136"}, {"K", "72"}}, 3},
      {"gemm_nt", {{"M", "130"}, {"N", "257"}, {"K", "33"}}, 3},
      {"gemm_swizzle", {{0}}, 0},
      {"dequant_gemm", {{"M", "136"}, {"N", "200"}, {"K", "72"}}, 3},
      {"dequant_gemm_threads", {{0}}, 0},
      {"flash_attention", {{"batch", "1"}, {"heads", "2"}, {"seq_len", "100"}, {"dim", "64"}, {"block_M", "64"},
                           {"block_N", "64"}}, 6},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/%s.json", src_dir(), cases[i].name);
    char *text = read_text(path);
    assert_non_null(text);
    tl_compile_request req = {.program = text, .program_len = strlen(text), .defines = cases[i].defs,
                              .ndefines = cases[i].ndefs, .target = "compute_80"};
    tl_arena *arena = tl_arena_new();
    tl_diags diags = {.arena = arena};
    tl_build *b = NULL;
    if (tl_compile(&req, &b, &diags, &err) != TL_OK)
      fail_msg("%s: %s", cases[i].name, err.message);
    tl_program *prog = tl_load_program(arena, text, strlen(text), cases[i].defs, cases[i].ndefs, &diags);
    assert_non_null(prog);
    tl_meta *m = NULL;
    if (tl_meta_parse(b->meta, &m, &err) != TL_OK)
      fail_msg("%s: %s", cases[i].name, err.message);
    assert_string_equal(m->entry, prog->name);
    assert_true(m->ptx);
    for (int d = 0; d < 3; d++)
      assert_int_equal(m->block[d], prog->threads[d]);
    int defined = compare_with_interp(prog, m, 200);
    printf("%s: %d of 200 argument sets fully defined\n", cases[i].name, defined);
    assert_true(defined > 0);
    tl_meta_free(m);
    tl_build_free(b);
    tl_arena_free(arena);
    free(text);
  }
}

/* ---- validation ----------------------------------------------------------------------- */

static const char good_meta[] =
    "{\"entry\": \"k\", \"target\": \"sm_90\", \"binary\": \"cubin\",\n"
    " \"params\": [{\"name\": \"n\", \"kind\": \"scalar\", \"dtype\": \"int32\"},\n"
    "            {\"name\": \"x\", \"kind\": \"scalar\", \"dtype\": \"float32\"},\n"
    "            {\"name\": \"big\", \"kind\": \"scalar\", \"dtype\": \"int64\"},\n"
    "            {\"name\": \"on\", \"kind\": \"scalar\", \"dtype\": \"bool\"},\n"
    "            {\"name\": \"a\", \"kind\": \"tensor\", \"dtype\": \"float16\", \"shape\": [\"n\", 64], \"align\": 16},\n"
    "            {\"name\": \"b\", \"kind\": \"tensor\", \"dtype\": \"int8\", \"shape\": [\"big\"], \"align\": 128}],\n"
    " \"launch\": {\"grid\": [\"ceildiv(n, 64)\", \"big // 2\", 3], \"block\": [128, 2, 1], \"dynamic_shared_bytes\": 100000}}";

static void test_parse_good(void **state) {
  (void)state;
  tl_meta *m = NULL;
  tl_error err;
  assert_int_equal(tl_meta_parse(good_meta, &m, &err), TL_OK);
  assert_string_equal(m->entry, "k");
  assert_int_equal(m->nparams, 6);
  assert_false(m->ptx);
  assert_int_equal(m->ngrid, 3);
  assert_int_equal(m->block[0] * m->block[1] * m->block[2], 256);
  assert_int_equal(m->dyn_smem, 100000);
  assert_int_equal(m->params[5].align, 128);
  assert_int_equal(m->params[4].ndim, 2);
  tl_meta_free(m);
  tl_meta_free(NULL);
}

/* One edit of a metadata text and what parsing it must give. */
typedef struct {
  const char *from, *to;
  tl_status want;
  const char *says; /* in the message */
} edit_case;

/* Parses base with the first occurrence of each case's from replaced by
 * its to, and checks the outcome. */
static void check_edits(const char *base, const edit_case *cases, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *at = strstr(base, cases[i].from);
    assert_non_null(at);
    char buf[4096];
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - base), base, cases[i].to, at + strlen(cases[i].from));
    tl_meta *m = NULL;
    tl_error err;
    tl_status st = tl_meta_parse(buf, &m, &err);
    if (st == TL_OK)
      tl_meta_free(m);
    else
      assert_null(m);
    if (st != cases[i].want || !strstr(err.message, cases[i].says))
      fail_msg("case %zu (%s -> %s): got %s '%s', want %s with '%s'", i, cases[i].from, cases[i].to, tl_strerror(st),
               st ? err.message : "", tl_strerror(cases[i].want), cases[i].says);
  }
}

static void test_parse_bad(void **state) {
  (void)state;
  static const edit_case cases[] = {
      {"\"entry\": \"k\"", "\"entry\": 5", TL_CORRUPT, "entry"},
      {"\"launch\": {", "\"launchx\": {", TL_CORRUPT, "launch must be"},
      {"\"align\": 128", "\"align\": 100", TL_CORRUPT, "power of two"},
      {"\"align\": 128", "\"align\": 8192", TL_CORRUPT, "power of two"},
      {"\"dtype\": \"int8\"", "\"dtype\": \"int9\"", TL_CORRUPT, "dtype"},
      {"\"kind\": \"scalar\", \"dtype\": \"int32\"", "\"kind\": \"scalar\", \"dtype\": \"float16\"", TL_UNSUPPORTED,
       "float16"},
      {"\"ceildiv(n, 64)\"", "\"ceildiv(n, 64\"", TL_CORRUPT, "grid[0]"},
      {"\"ceildiv(n, 64)\"", "\"foo(n)\"", TL_UNSUPPORTED, "foo"},
      {"\"ceildiv(n, 64)\"", "\"ceildiv(n)\"", TL_CORRUPT, "ceildiv takes 2"},
      {"\"ceildiv(n, 64)\"", "\"q + 1\"", TL_CORRUPT, "'q' is not a scalar parameter"},
      {"\"ceildiv(n, 64)\"", "\"a + 1\"", TL_CORRUPT, "'a' is not a scalar parameter"},
      {"\"ceildiv(n, 64)\"", "\"x + 1\"", TL_UNSUPPORTED, "float32"},
      {"\"ceildiv(n, 64)\"", "\"n / 2\"", TL_CORRUPT, "'/'"},
      {"\"ceildiv(n, 64)\"", "\"n + 0.5\"", TL_CORRUPT, "literals"},
      {"\"ceildiv(n, 64)\"", "\"a[0]\"", TL_CORRUPT, "element access"},
      {"\"ceildiv(n, 64)\"", "null", TL_CORRUPT, "neither"},
      {"[128, 2, 1]", "[2048, 1, 1]", TL_CORRUPT, "block[0]"},
      {"[128, 2, 1]", "[64, 32, 1]", TL_CORRUPT, "threads"},
      {"100000}", "-1}", TL_CORRUPT, "dynamic_shared_bytes"},
      {"[\"big\"]", "[]", TL_CORRUPT, "shape"},
      {"\"name\": \"x\"", "\"name\": \"n\"", TL_CORRUPT, "twice"},
      {"{\"entry\"", "[{\"entry\"", TL_BAD_JSON, "not JSON"},
  };
  check_edits(good_meta, cases, sizeof cases / sizeof cases[0]);
  tl_meta *m = NULL;
  tl_error err;
  assert_int_equal(tl_meta_parse(NULL, &m, &err), TL_INVALID_ARG);
  assert_int_equal(tl_meta_parse("", &m, &err), TL_BAD_JSON);
  assert_int_equal(tl_meta_parse("{}", &m, &err), TL_CORRUPT);
  assert_null(m);
}

/* ---- the launch plan ---------------------------------------------------------------------- */

static void test_launch_plan_checks(void **state) {
  (void)state;
  tl_meta *m = NULL;
  tl_error err;
  /* grid[1] = big // 2 must stay within CUDA's 65535 for y */
  assert_int_equal(tl_meta_parse(good_meta, &m, &err), TL_OK);
  tl_kernel_arg args[6] = {tl_arg_int(130), tl_arg_float(0.1),       tl_arg_int(1000),
                           tl_arg_int(1),   tl_arg_tensor(0x7f0000), tl_arg_tensor(0x10080)};
  tl_launch_plan plan;
  assert_int_equal(tl_launch_plan_make(m, args, 6, &plan, &err), TL_OK);
  assert_int_equal(plan.grid[0], 3);
  assert_int_equal(plan.grid[1], 500);
  assert_int_equal(plan.grid[2], 3);
  assert_int_equal(plan.block[0], 128);
  assert_int_equal(plan.block[1], 2);
  assert_int_equal(plan.dyn_smem, 100000);
  assert_false(plan.empty);
  /* the values the driver gets, each behind its pointer */
  assert_int_equal(*(int32_t *)plan.kargs[0], 130);
  assert_true(*(float *)plan.kargs[1] == 0.1f);
  assert_int_equal(*(int64_t *)plan.kargs[2], 1000);
  assert_int_equal(*(unsigned char *)plan.kargs[3], 1);
  assert_int_equal(*(uint64_t *)plan.kargs[4], 0x7f0000);
  assert_int_equal(*(uint64_t *)plan.kargs[5], 0x10080);

  struct {
    int index;
    tl_kernel_arg arg;
    tl_status want;
    const char *says;
  } bad[] = {
      {4, tl_arg_tensor(0x7f0008), TL_INVALID_ARG, "alignment of 16 bytes (8 bytes off)"},
      {5, tl_arg_tensor(0x10040), TL_INVALID_ARG, "alignment of 128"},
      {0, tl_arg_float(1.0), TL_INVALID_ARG, "tl_arg_int"},
      {1, tl_arg_int(1), TL_INVALID_ARG, "tl_arg_float"},
      {4, tl_arg_int(1), TL_INVALID_ARG, "tl_arg_tensor"},
      {0, tl_arg_int(1LL << 31), TL_INVALID_ARG, "not a valid int32"},
      {3, tl_arg_int(2), TL_INVALID_ARG, "not a valid bool"},
      {2, tl_arg_int(200000), TL_LIMIT, "larger than CUDA allows"},
      {0, tl_arg_int(-100), TL_INVALID_ARG, "grid dimension 0"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tl_kernel_arg a[6];
    memcpy(a, args, sizeof a);
    a[bad[i].index] = bad[i].arg;
    tl_status st = tl_launch_plan_make(m, a, 6, &plan, &err);
    if (st != bad[i].want || !strstr(err.message, bad[i].says))
      fail_msg("case %zu: got %s '%s', want %s with '%s'", i, tl_strerror(st), st ? err.message : "",
               tl_strerror(bad[i].want), bad[i].says);
  }
  assert_int_equal(tl_launch_plan_make(m, args, 5, &plan, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "takes 6 arguments, not 5"));
  assert_int_equal(tl_launch_plan_make(m, NULL, 6, &plan, &err), TL_INVALID_ARG);
  /* an empty grid is a launch of nothing */
  args[0] = tl_arg_int(0);
  assert_int_equal(tl_launch_plan_make(m, args, 6, &plan, &err), TL_OK);
  assert_true(plan.empty);
  tl_meta_free(m);

  /* a persistent kernel: blocks per SM, parsed; anything else refused saying so */
  char pbuf[4096];
  const char *pat = strstr(good_meta, "\"dynamic_shared_bytes\"");
  snprintf(pbuf, sizeof pbuf, "%.*s\"persistent\": 2, %s", (int)(pat - good_meta), good_meta, pat);
  assert_int_equal(tl_meta_parse(pbuf, &m, &err), TL_OK);
  assert_int_equal(m->persistent, 2);
  tl_meta_free(m);
  snprintf(pbuf, sizeof pbuf, "%.*s\"persistent\": 0, %s", (int)(pat - good_meta), good_meta, pat);
  assert_int_equal(tl_meta_parse(pbuf, &m, &err), TL_CORRUPT);
  assert_non_null(strstr(err.message, "launch.persistent"));
  /* a kernel that waits for the one before it: parsed; not a boolean refused saying so */
  assert_int_equal(tl_meta_parse(good_meta, &m, &err), TL_OK);
  assert_false(m->programmatic);
  tl_meta_free(m);
  snprintf(pbuf, sizeof pbuf, "%.*s\"programmatic\": true, %s", (int)(pat - good_meta), good_meta, pat);
  assert_int_equal(tl_meta_parse(pbuf, &m, &err), TL_OK);
  assert_true(m->programmatic);
  tl_meta_free(m);
  snprintf(pbuf, sizeof pbuf, "%.*s\"programmatic\": 1, %s", (int)(pat - good_meta), good_meta, pat);
  assert_int_equal(tl_meta_parse(pbuf, &m, &err), TL_CORRUPT);
  assert_non_null(strstr(err.message, "launch.programmatic must be a boolean"));

  /* thread-block clusters: the binary fixes them, so a plain launch of whole clusters applies them; a grid
   * that is not whole clusters is refused saying so */
  char buf[4096];
  const char *at = strstr(good_meta, "\"dynamic_shared_bytes\"");
  snprintf(buf, sizeof buf, "%.*s\"cluster\": [2, 1, 1], %s", (int)(at - good_meta), good_meta, at);
  assert_int_equal(tl_meta_parse(buf, &m, &err), TL_OK);
  args[0] = tl_arg_int(130);
  assert_int_equal(tl_launch_plan_make(m, args, 6, &plan, &err), TL_INVALID_ARG);
  assert_non_null(strstr(err.message, "grid dimension 0 of kernel 'k' is 3, which is not a multiple of its thread-block "
                                      "cluster's 2"));
  args[0] = tl_arg_int(128);
  assert_int_equal(tl_launch_plan_make(m, args, 6, &plan, &err), TL_OK);
  assert_int_equal(plan.grid[0], 2);
  tl_meta_free(m);
}

static void test_eval_errors(void **state) {
  (void)state;
  const char *text =
      "{\"entry\": \"k\", \"params\": [{\"name\": \"n\", \"kind\": \"scalar\", \"dtype\": \"int32\"}],"
      " \"launch\": {\"grid\": [\"100 // n\", \"9223372036854775807 + n\"],"
      " \"block\": [32]}}";
  tl_meta *m = NULL;
  tl_error err;
  assert_int_equal(tl_meta_parse(text, &m, &err), TL_OK);
  int64_t g[3];
  tl_kernel_arg a = tl_arg_int(0);
  assert_int_equal(tl_meta_grid(m, &a, 1, g, &err), TL_RUNTIME);
  assert_non_null(strstr(err.message, "division by zero"));
  assert_non_null(strstr(err.message, "grid[0]"));
  a = tl_arg_int(1);
  /* 9223372036854775807 + n: the literal does not fit int32, so it is int64
   * and the typed int64 sum wraps to a negative grid dimension */
  assert_int_equal(tl_meta_grid(m, &a, 1, g, &err), TL_INVALID_ARG);
  if (!strstr(err.message, "grid dimension 1 of kernel 'k' is -9223372036854775808"))
    fail_msg("%s", err.message);
  tl_meta_free(m);
  /* only untyped operands: an overflow is an error, as when the checker folds */
  text = "{\"entry\": \"k\", \"params\": [{\"name\": \"n\", \"kind\": \"scalar\", \"dtype\": \"int32\"}],"
         " \"launch\": {\"grid\": [\"(9223372036854775807 + 1) * 0 + n\"], \"block\": [32]}}";
  assert_int_equal(tl_meta_parse(text, &m, &err), TL_OK);
  assert_int_equal(tl_meta_grid(m, &a, 1, g, &err), TL_RUNTIME);
  assert_non_null(strstr(err.message, "overflow"));
  tl_meta_free(m);
}

/* Damaged metadata (random byte edits of a good one) never crashes the
 * parser, and what it accepts evaluates without crashing either (run it
 * under make SANITIZE=address,undefined). */
static void test_parse_mutations(void **state) {
  (void)state;
  static const char alphabet[] = "0123456789-+*/%()[]{},:\"nNabz_ <>=!&|^~.eE";
  size_t len = strlen(good_meta);
  char *buf = malloc(len + 64);
  assert_non_null(buf);
  int accepted = 0;
  for (int round = 0; round < 20000; round++) {
    memcpy(buf, good_meta, len + 1);
    size_t n = len;
    int edits = 1 + (int)(rng() % 4);
    for (int k = 0; k < edits; k++) {
      size_t at = (size_t)(rng() % n);
      switch (rng() % 3) {
      case 0: buf[at] = alphabet[rng() % (sizeof alphabet - 1)]; break;
      case 1: memmove(buf + at, buf + at + 1, n - at); n--; break;
      default:
        if (n + 1 < len + 63) {
          memmove(buf + at + 1, buf + at, n - at + 1);
          buf[at] = alphabet[rng() % (sizeof alphabet - 1)];
          n++;
        }
      }
    }
    tl_meta *m = NULL;
    tl_error err;
    if (tl_meta_parse(buf, &m, &err) != TL_OK) {
      assert_null(m);
      assert_true(err.message[0] != 0);
      continue;
    }
    accepted++;
    tl_kernel_arg args[TL_KERNEL_PARAMS_MAX];
    for (int i = 0; i < m->nparams; i++)
      args[i] = m->params[i].is_tensor ? tl_arg_tensor((rng() % 4) * 64)
                : m->params[i].dtype == TL_FLOAT32 ? tl_arg_float(1.5)
                : m->params[i].dtype == TL_BOOL ? tl_arg_int((int64_t)(rng() % 2))
                : tl_arg_int(random_scalar(m->params[i].dtype == TL_INT64 ? TL_INT64 : TL_INT32));
    tl_launch_plan plan;
    int64_t g[3], shape[TL_KERNEL_DIMS_MAX];
    tl_launch_plan_make(m, args, m->nparams, &plan, &err);
    tl_meta_grid(m, args, m->nparams, g, &err);
    for (int i = 0; i < m->nparams; i++)
      tl_meta_shape(m, i, args, m->nparams, shape, &err);
    tl_meta_free(m);
  }
  printf("%d of 20000 damaged metadata texts were still valid\n", accepted);
  free(buf);
}

/* ---- tensor maps (format 2) ------------------------------------------------------------- */

static const char tmap_meta[] =
    "{\"format\": 2, \"entry\": \"k\", \"target\": \"sm_90a\", \"binary\": \"cubin\",\n"
    " \"params\": [{\"name\": \"n\", \"kind\": \"scalar\", \"dtype\": \"int32\"},\n"
    "            {\"name\": \"w\", \"kind\": \"scalar\", \"dtype\": \"int32\"},\n"
    "            {\"name\": \"a\", \"kind\": \"tensor\", \"dtype\": \"float16\", \"shape\": [\"n\", \"w\"], \"align\": 16}],\n"
    " \"launch\": {\"grid\": [\"ceildiv(n, 128)\"], \"block\": [256, 1, 1], \"dynamic_shared_bytes\": 1024},\n"
    " \"tensor_maps\": [{\"param\": \"a\", \"dtype\": \"float16\", \"rank\": 2, \"global_dims\": [\"w\", \"n\"],\n"
    "   \"global_strides\": [\"(w) * 2\"], \"box\": [64, 128], \"element_strides\": [1, 1], \"interleave\": \"none\",\n"
    "   \"swizzle\": \"128B\", \"l2_promotion\": \"256B\", \"oob_fill\": \"zero\", \"offset\": 64}]}";

static void test_tmap_parse(void **state) {
  (void)state;
  tl_meta *m = NULL;
  tl_error err;
  assert_int_equal(tl_meta_parse(tmap_meta, &m, &err), TL_OK);
  assert_int_equal(m->format, 2);
  assert_int_equal(m->ntmaps, 1);
  const tl_meta_tmap *t = &m->tmaps[0];
  assert_int_equal(t->param, 2);
  assert_int_equal(t->rank, 2);
  assert_int_equal(t->offset, 64);
  assert_int_equal(t->enc.dtype, 6); /* CU_TENSOR_MAP_DATA_TYPE_FLOAT16 */
  assert_int_equal(t->enc.swizzle, 3); /* CU_TENSOR_MAP_SWIZZLE_128B */
  assert_int_equal(t->enc.l2_promotion, 3);
  assert_int_equal(t->enc.oob_fill, 0); /* zeros */
  assert_int_equal(t->enc.box[0], 64);
  assert_int_equal(t->enc.box[1], 128);
  tl_meta_free(m);
  static const edit_case cases[] = {
      {"\"format\": 2", "\"format\": 4", TL_UNSUPPORTED, "format above 3"},
      {"\"format\": 2", "\"format\": 3", TL_CORRUPT, "format 3 has its tensor maps in its kernels"},
      {"\"format\": 2", "\"format\": 1", TL_CORRUPT, "exactly in format 2"},
      {"\"param\": \"a\"", "\"param\": \"n\"", TL_CORRUPT, "name a tensor"},
      {"\"dtype\": \"float16\", \"rank\"", "\"dtype\": \"bfloat16\", \"rank\"", TL_CORRUPT, "its tensor's, float16"},
      {"\"rank\": 2", "\"rank\": 3", TL_CORRUPT, "rank must be"},
      {"[\"(w) * 2\"]", "[]", TL_CORRUPT, "rank - 1 (1)"},
      {"[\"(w) * 2\"]", "[\"q * 2\"]", TL_CORRUPT, "'q' is not a scalar"},
      {"[64, 128]", "[64, 257]", TL_CORRUPT, "box[1] must be an integer from 1 to 256"},
      {"[64, 128]", "[4, 128]", TL_CORRUPT, "8 bytes, not a multiple of 16"},
      {"[1, 1]", "[1, 9]", TL_CORRUPT, "element_strides[1]"},
      {"\"128B\"", "\"64B\"", TL_CORRUPT, "wider than its swizzle (64 bytes)"},
      {"\"128B\"", "\"256B\"", TL_CORRUPT, "swizzle"},
      {"\"zero\"", "\"nan\", \"x\": 0", TL_OK, ""},
      {"\"offset\": 64", "\"offset\": 8", TL_CORRUPT, "multiple of 16 from 16"},
      {"\"offset\": 64", "\"offset\": 72", TL_CORRUPT, "multiple of 16"},
      {"\"offset\": 64", "\"offset\": 48", TL_OK, ""},
      {", \"offset\": 64", "", TL_OK, ""},
  };
  check_edits(tmap_meta, cases, sizeof cases / sizeof cases[0]);
  /* a float fill needs a float dtype */
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", tmap_meta);
  for (char *p = buf; (p = strstr(p, "\"float16\"")) != NULL;)
    memcpy(p, "\"int16\"  ", 9);
  assert_int_equal(tl_meta_parse(buf, &m, &err), TL_OK); /* int16 moves as UINT16 */
  assert_int_equal(m->tmaps[0].enc.dtype, 1);
  tl_meta_free(m);
  char *at = strstr(buf, "\"zero\"");
  memcpy(at, "\"nan\" ", 6);
  assert_int_equal(tl_meta_parse(buf, &m, &err), TL_CORRUPT);
  assert_non_null(strstr(err.message, "needs a float dtype"));
}

static void test_tmap_plan(void **state) {
  (void)state;
  tl_meta *m = NULL;
  tl_error err;
  assert_int_equal(tl_meta_parse(tmap_meta, &m, &err), TL_OK);
  tl_kernel_arg args[3] = {tl_arg_int(1000), tl_arg_int(200), tl_arg_tensor(0x7f0000)};
  tl_launch_plan plan;
  assert_int_equal(tl_launch_plan_make(m, args, 3, &plan, &err), TL_OK);
  assert_int_equal(plan.ntmaps, 1);
  const tl_gpu_tmap *t = &plan.tmap_args[0];
  assert_int_equal(t->addr, 0x7f0000);
  assert_int_equal(t->rank, 2);
  assert_int_equal(t->dims[0], 200); /* innermost first */
  assert_int_equal(t->dims[1], 1000);
  assert_int_equal(t->strides[0], 400);
  assert_int_equal(t->box[0], 64);
  assert_int_equal(t->elem_strides[1], 1);
  /* the driver gets the map's 128 bytes, 64-byte aligned, after the params */
  assert_ptr_equal(plan.kargs[3], plan.tmaps[0]);
  assert_int_equal((uintptr_t)plan.kargs[3] % 64, 0);
  assert_int_equal(*(uint64_t *)plan.kargs[2], 0x7f0000);
  struct {
    int64_t n, w;
    uint64_t ptr;
    tl_status want;
    const char *says;
  } bad[] = {
      {1000, 33, 0x7f0000, TL_INVALID_ARG, "row pitch of 66 bytes in dimension 1"},
      {1000, 4, 0x7f0000, TL_INVALID_ARG, "row pitch of 8 bytes"},
      {1000, 0, 0x7f0000, TL_INVALID_ARG, "0 elements in dimension 0"},
      {1000, 200, 0x7f0008, TL_INVALID_ARG, "alignment of 16 bytes"},
      {1000, (1LL << 29) + 8, 0x7f0000, TL_OK, ""},
      {1000, (1LL << 31) - 8, 0x7f0000, TL_INVALID_ARG, "dense layout"}, /* w * 2 wraps in int32 */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tl_kernel_arg a[3] = {tl_arg_int(bad[i].n), tl_arg_int(bad[i].w), tl_arg_tensor(bad[i].ptr)};
    tl_status st = tl_launch_plan_make(m, a, 3, &plan, &err);
    if (st != bad[i].want || (st != TL_OK && !strstr(err.message, bad[i].says)))
      fail_msg("case %zu: got %s '%s', want %s with '%s'", i, tl_strerror(st), st ? err.message : "",
               tl_strerror(bad[i].want), bad[i].says);
  }
  /* nothing to launch: an empty tensor is fine */
  tl_kernel_arg empty[3] = {tl_arg_int(0), tl_arg_int(0), tl_arg_tensor(0x7f0000)};
  assert_int_equal(tl_launch_plan_make(m, empty, 3, &plan, &err), TL_OK);
  assert_true(plan.empty);
  tl_meta_free(m);
}

/* The metadata the compiler writes for a gemm on TMA (sm_90a), against the
 * cubin: the maps' offsets end where the cubin's parameter bank does, and
 * the plan for a dynamic M. */
static void test_tmap_compiled(void **state) {
  (void)state;
  tl_error err;
  const char *tool;
  if (!tl_compiler_targets(&tool, &err) || !tl_compiler_target_toolchain("sm_90a")) {
    printf("SKIP: no NVRTC for sm_90a here\n");
    return;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/gpu/programs/gemm_dyn.json", src_dir());
  char *text = read_text(path);
  assert_non_null(text);
  tl_define defs[] = {{"N", "136"}, {"K", "72"}};
  tl_compile_request req = {.program = text, .program_len = strlen(text), .defines = defs, .ndefines = 2,
                            .target = "sm_90a"};
  tl_arena *arena = tl_arena_new();
  tl_diags diags = {.arena = arena};
  tl_build *b = NULL;
  if (tl_compile(&req, &b, &diags, &err) != TL_OK)
    fail_msg("gemm_dyn: %s", err.message);
  tl_meta *m = NULL;
  if (tl_meta_parse(b->meta, &m, &err) != TL_OK)
    fail_msg("gemm_dyn: %s", err.message);
  assert_int_equal(m->format, 2);
  assert_int_equal(m->ntmaps, 2);
  tl_cubin_info info;
  assert_int_equal(tl_cubin_inspect(b->binary, b->binary_size, &info, &err), TL_OK);
  const tl_cubin_kernel *k = tl_cubin_find(&info, "matmul_dyn");
  assert_non_null(k);
  /* where the cubin puts them: ptxas aligns them to 64 bytes in the
   * constant bank, whose parameters start at 0x210 on sm_90 */
  assert_int_equal(k->nparams, 6);
  assert_int_equal(m->tmaps[0].offset, k->param_offset[4]);
  assert_int_equal(m->tmaps[1].offset, k->param_offset[5]);
  assert_int_equal(k->param_size[4], 128);
  assert_int_equal(k->param_bytes, m->tmaps[1].offset + 128);
  tl_cubin_info_free(&info);
  tl_kernel_arg args[4] = {tl_arg_int(1000), tl_arg_tensor(0x100000), tl_arg_tensor(0x200000), tl_arg_tensor(0x300000)};
  tl_launch_plan plan;
  assert_int_equal(tl_launch_plan_make(m, args, 4, &plan, &err), TL_OK);
  const tl_gpu_tmap *a = &plan.tmap_args[0], *bm = &plan.tmap_args[1];
  assert_int_equal(a->addr, 0x100000);
  assert_int_equal(a->dims[0], 72);
  assert_int_equal(a->dims[1], 1000); /* M, given at launch */
  assert_int_equal(a->strides[0], 144);
  assert_int_equal(a->box[0], 64); /* one 128-byte swizzled row of A's tile per row */
  assert_int_equal(a->box[1], 128);
  assert_int_equal(bm->dims[0], 136);
  assert_int_equal(bm->strides[0], 272);
  assert_int_equal(bm->box[0], 64); /* B's 128 columns in two panels of 64 */
  assert_int_equal(bm->box[1], 64);
  assert_int_equal(a->swizzle, 3);
  assert_ptr_equal(plan.kargs[4], plan.tmaps[0]);
  assert_ptr_equal(plan.kargs[5], plan.tmaps[1]);
  args[0] = tl_arg_int(0);
  assert_int_equal(tl_launch_plan_make(m, args, 4, &plan, &err), TL_OK);
  assert_true(plan.empty);
  tl_meta_free(m);
  tl_build_free(b);
  tl_arena_free(arena);
  free(text);
}

/* Format 3 (proto/kernel-meta.md section 6): a program of two kernels
 * sharing a workspace whose shape depends on a scalar, compiled for real:
 * each kernel's entry and launch, the ABI of each (the params, then the
 * workspace), the workspaces' placement and sizes for a launch, and what a
 * parser refuses. */
static void test_kernels_workspaces(void **state) {
  (void)state;
  tl_error err;
  const char *tool;
  if (!tl_compiler_targets(&tool, &err) || !tl_compiler_target_toolchain("sm_80")) {
    printf("SKIP: no NVRTC for sm_80 here\n");
    return;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/gpu/programs/split_rowsum.json", src_dir());
  char *text = read_text(path);
  assert_non_null(text);
  tl_compile_request req = {.program = text, .program_len = strlen(text), .target = "sm_80"};
  tl_arena *arena = tl_arena_new();
  tl_diags diags = {.arena = arena};
  tl_build *b = NULL;
  if (tl_compile(&req, &b, &diags, &err) != TL_OK)
    fail_msg("split_rowsum: %s", err.message);
  tl_meta *m = NULL;
  if (tl_meta_parse(b->meta, &m, &err) != TL_OK)
    fail_msg("split_rowsum: %s", err.message);
  assert_int_equal(m->format, 3);
  assert_int_equal(m->nparams, 3); /* m, X, Y: the caller's */
  assert_int_equal(m->nkernels, 2);
  assert_int_equal(m->nworkspaces, 1);
  assert_string_equal(m->entry, "split_rowsum_0");
  assert_string_equal(m->kernels[0]->entry, "split_rowsum_0");
  assert_string_equal(m->kernels[1]->entry, "split_rowsum_1");
  for (int k = 0; k < 2; k++) { /* each entry takes the params, then the workspace */
    assert_int_equal(m->kernels[k]->nparams, 4);
    assert_string_equal(m->kernels[k]->params[3].name, "W");
    assert_true(m->kernels[k]->params[3].is_tensor);
    assert_int_equal(m->kernels[k]->params[3].align, 256);
  }
  assert_int_equal(m->kernels[0]->block[0], 128);
  assert_int_equal(m->kernels[1]->block[0], 64);
  tl_kernel_arg args[3] = {tl_arg_int(200), tl_arg_tensor(0x100000), tl_arg_tensor(0x200000)};
  uint64_t off[TL_MAX_WORKSPACES], total = 0;
  assert_int_equal(tl_meta_workspaces(m, args, 3, off, &total, &err), TL_OK);
  assert_int_equal(off[0], 0);
  assert_int_equal(total, 3328); /* 4 x 200 float32 = 3200 bytes, to a multiple of 256 */
  int64_t grid[3];
  assert_int_equal(tl_meta_grid(m->kernels[0], (tl_kernel_arg[]){args[0], args[1], args[2], tl_arg_tensor(0)}, 4,
                                grid, &err), TL_OK);
  assert_int_equal(grid[0], 4);
  assert_int_equal(grid[1], 4);
  assert_int_equal(tl_meta_workspaces(m, args, 2, off, &total, &err), TL_INVALID_ARG); /* the caller's count */
  tl_meta_free(m);
  /* a top-level tensor_maps, and a kernel that is not an object */
  json_t *doc = json_loads(b->meta, 0, NULL);
  json_object_set_new(doc, "tensor_maps", json_array());
  char *t = json_dumps(doc, 0);
  assert_int_equal(tl_meta_parse(t, &m, &err), TL_CORRUPT);
  assert_non_null(strstr(err.message, "format 3 has its tensor maps in its kernels"));
  free(t);
  json_object_del(doc, "tensor_maps");
  json_array_set_new(json_object_get(doc, "kernels"), 1, json_string("k"));
  t = json_dumps(doc, 0);
  assert_int_equal(tl_meta_parse(t, &m, &err), TL_CORRUPT);
  assert_non_null(strstr(err.message, "kernels[1] is not an object"));
  free(t);
  json_object_set_new(doc, "format", json_integer(4));
  t = json_dumps(doc, 0);
  assert_int_equal(tl_meta_parse(t, &m, &err), TL_UNSUPPORTED);
  free(t);
  json_decref(doc);
  tl_build_free(b);
  tl_arena_free(arena);
  free(text);
}

static void test_targets_run_on(void **state) {
  (void)state;
  static const struct {
    const char *target;
    int arch;
    bool runs;
  } cases[] = {
      {"sm_90", 90, true},         {"sm_90a", 90, true},        {"sm_90a", 100, false}, {"sm_80", 86, true},
      {"sm_86", 80, false},        {"sm_80", 90, false},        {"sm_90", 80, false},   {"compute_80", 90, true},
      {"compute_80", 120, true},   {"compute_90", 80, false},   {"compute_90a", 90, true},
      {"compute_90a", 100, false}, {"sm_100f", 103, true},      {"sm_100f", 110, false},
      {"sm_", 90, false},          {"sm_9", 90, false},         {"gfx942", 90, false},  {"sm_90b", 90, false},
      {"sm_90ab", 90, false},      {"compute_75", 75, true},    {NULL, 90, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (tl_target_runs_on(cases[i].target, cases[i].arch) != cases[i].runs)
      fail_msg("%s on %d: want %s", cases[i].target ? cases[i].target : "NULL", cases[i].arch,
               cases[i].runs ? "runs" : "does not run");
}

int main(void) {
  const char *s = getenv("TL_TEST_SEED");
  rng_state = s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) * 2654435761ULL;
  if (!rng_state)
    rng_state = 1;
  printf("# seed %llu (TL_TEST_SEED=%llu repeats it)\n", (unsigned long long)rng_state,
         (unsigned long long)rng_state);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_good),
      cmocka_unit_test(test_parse_bad),
      cmocka_unit_test(test_eval_stress_program),
      cmocka_unit_test(test_eval_errors),
      cmocka_unit_test(test_launch_plan_checks),
      cmocka_unit_test(test_targets_run_on),
      cmocka_unit_test(test_parse_mutations),
      cmocka_unit_test(test_eval_examples),
      cmocka_unit_test(test_tmap_parse),
      cmocka_unit_test(test_tmap_plan),
      cmocka_unit_test(test_tmap_compiled),
      cmocka_unit_test(test_kernels_workspaces),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
