/*
 * test_kinds.c - the tables of statement kinds and ops (TL_STMT_KINDS,
 * TL_STMT_OPS in ir.h): every kind has its own name, every op name is found
 * by tl_stmt_op_lookup and parses to its kind with the fields of its row,
 * and an unknown op gets the diagnostic (with its "did you mean") that
 * `tlc check` prints.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "ir.h"

static void kind_table(void **state) {
  /* every kind has a distinct name */
  for (int k = 0; k < TL_STMT_KIND_COUNT; k++) {
    assert_non_null(tl_stmt_kind_name((tl_stmt_kind)k));
    assert_string_not_equal(tl_stmt_kind_name((tl_stmt_kind)k), "?");
    for (int j = 0; j < k; j++)
      assert_string_not_equal(tl_stmt_kind_name((tl_stmt_kind)k), tl_stmt_kind_name((tl_stmt_kind)j));
  }
  assert_string_equal(tl_stmt_kind_name(S_LOOP), "loop");
  assert_true(tl_stmt_kind_flags(S_IF) & TL_KIND_ELSE);
  assert_true(tl_stmt_kind_flags(S_PARALLEL) & TL_KIND_BODY);
  assert_false(tl_stmt_kind_flags(S_COPY) & TL_KIND_BODY);
  assert_string_equal(tl_stmt_kind_name((tl_stmt_kind)TL_STMT_KIND_COUNT), "?");
  /* every op: found by its name, "op" its first field, a NULL among its fields */
  for (int i = 0; i < TL_STMT_OP_COUNT; i++) {
    const tl_stmt_op_info *o = &tl_stmt_ops[i];
    assert_int_equal(tl_stmt_op_lookup(o->name), i);
    assert_string_equal(o->fields[0], "op");
    bool ended = false;
    for (int f = 0; f < TL_MAX_OP_FIELDS; f++)
      ended |= o->fields[f] == NULL;
    assert_true(ended);
    assert_true(o->kind != S_ASSIGN); /* an assignment is a string, not an op */
  }
  assert_int_equal(tl_stmt_op_lookup("assign"), -1);
  assert_int_equal(tl_stmt_op_lookup("Copy"), -1);
  assert_int_equal(tl_stmt_op_lookup(""), -1);
}

/* Parses a kernel whose body is `stmt` and returns the first diagnostic as
 * `tlc check` prints it, or the kind name and op name of the statement. */
static const char *parse_one(tl_arena *a, const char *stmt) {
  const char *text = tl_arena_printf(a,
                                     "{\"tlir\": 1, \"name\": \"k\", \"params\": [], \"kernel\": {\"grid\": [1], "
                                     "\"threads\": 32, \"block_vars\": [\"bx\"], \"body\": [%s]}}",
                                     stmt);
  tl_diags d = {.arena = a};
  tl_program *p = tl_parse(a, text, strlen(text), &d);
  if (!p) {
    assert_true(d.n > 0);
    return tl_arena_printf(a, "%s: %s", d.items[0].pointer, d.items[0].message);
  }
  assert_int_equal(p->body.n, 1);
  const tl_stmt *s = p->body.items[0];
  return tl_arena_printf(a, "%s %s", tl_stmt_kind_name(s->kind), s->op_name);
}

static void ops_parse(void **state) {
  tl_arena *a = tl_arena_new();
  /* one well-formed statement per op, parsed to the op's kind */
  static const char *const stmts[][2] = {
      {"{\"op\": \"alloc_shared\", \"name\": \"S\", \"shape\": [4], \"dtype\": \"float32\"}", "alloc alloc_shared"},
      {"{\"op\": \"alloc_fragment\", \"name\": \"F\", \"shape\": [4], \"dtype\": \"float32\"}", "alloc alloc_fragment"},
      {"{\"op\": \"alloc_local\", \"name\": \"L\", \"shape\": [4], \"dtype\": \"float32\"}", "alloc alloc_local"},
      {"{\"op\": \"alloc_var\", \"name\": \"v\", \"dtype\": \"int32\"}", "alloc_var alloc_var"},
      {"{\"op\": \"let\", \"name\": \"x\", \"value\": 1}", "let let"},
      {"{\"op\": \"copy\", \"src\": \"A\", \"dst\": \"B\"}", "copy copy"},
      {"{\"op\": \"fill\", \"dst\": \"B\", \"value\": 0}", "fill fill"},
      {"{\"op\": \"clear\", \"dst\": \"B\"}", "fill clear"},
      {"{\"op\": \"gemm\", \"A\": \"A\", \"B\": \"B\", \"C\": \"C\"}", "gemm gemm"},
      {"{\"op\": \"reduce\", \"type\": \"sum\", \"src\": \"A\", \"dst\": \"B\", \"dim\": 0}", "reduce reduce"},
      {"{\"op\": \"cumsum\", \"src\": \"A\", \"dst\": \"B\", \"dim\": 0}", "cumsum cumsum"},
      {"{\"op\": \"atomic_add\", \"dst\": \"B\", \"value\": 1}", "atomic_add atomic_add"},
      {"{\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [4], \"body\": []}", "parallel parallel"},
      {"{\"op\": \"pipelined\", \"var\": \"k\", \"extent\": 4, \"body\": []}", "loop pipelined"},
      {"{\"op\": \"serial\", \"var\": \"k\", \"extent\": 4, \"body\": []}", "loop serial"},
      {"{\"op\": \"unroll\", \"var\": \"k\", \"extent\": 4, \"body\": []}", "loop unroll"},
      {"{\"op\": \"vectorized\", \"var\": \"k\", \"extent\": 4, \"body\": []}", "loop vectorized"},
      {"{\"op\": \"if\", \"cond\": \"bx > 0\", \"then\": []}", "if if"},
      {"{\"op\": \"annotate_layout\", \"layouts\": {\"S\": \"swizzle\"}}", "annotate_layout annotate_layout"},
      {"{\"op\": \"use_swizzle\", \"panel_size\": 4}", "use_swizzle use_swizzle"},
      {"{\"op\": \"sync_threads\"}", "sync_threads sync_threads"},
      {"{\"op\": \"atomic\", \"type\": \"add\", \"dst\": \"B[0]\", \"value\": 1}", "atomic atomic"},
      {"{\"op\": \"cummax\", \"src\": \"A\", \"dst\": \"B\", \"dim\": 0}", "cumsum cummax"},
      {"{\"op\": \"cummin\", \"src\": \"A\", \"dst\": \"B\", \"dim\": 0}", "cumsum cummin"},
      {"{\"op\": \"print\", \"value\": 1, \"msg\": \"x\"}", "print print"},
      {"{\"op\": \"device_assert\", \"cond\": 1}", "device_assert device_assert"},
      {"{\"op\": \"view\", \"name\": \"V\", \"src\": \"A\", \"dtype\": \"int32\"}", "view view"},
      {"{\"op\": \"cluster_reduce\", \"type\": \"sum\", \"dst\": \"F\"}", "cluster_reduce cluster_reduce"},
      {"\"x[0] = 1\"", "assign assignment"},
  };
  int nops = 0;
  for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
    assert_string_equal(parse_one(a, stmts[i][0]), stmts[i][1]);
    nops += stmts[i][0][0] == '{';
  }
  assert_int_equal(nops, TL_STMT_OP_COUNT); /* one case per op: a new op needs its case here */
  /* unknown ops: the did-you-mean hint, or none when nothing is close */
  static const char *const bad[][2] = {
      {"gem", "/kernel/body/0/op: unknown op 'gem'; did you mean 'gemm'?"},
      {"alloc_shard", "/kernel/body/0/op: unknown op 'alloc_shard'; did you mean 'alloc_shared'?"},
      {"alloc_fragmnt", "/kernel/body/0/op: unknown op 'alloc_fragmnt'; did you mean 'alloc_fragment'?"},
      {"serail", "/kernel/body/0/op: unknown op 'serail'; did you mean 'serial'?"},
      {"cler", "/kernel/body/0/op: unknown op 'cler'; did you mean 'clear'?"},
      {"assign", "/kernel/body/0/op: unknown op 'assign'"},
      {"nop", "/kernel/body/0/op: unknown op 'nop'"},
      {"loop", "/kernel/body/0/op: unknown op 'loop'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_string_equal(parse_one(a, tl_arena_printf(a, "{\"op\": \"%s\"}", bad[i][0])), bad[i][1]);
  /* the fields of an op come from its row, in its order */
  assert_string_equal(parse_one(a, "{\"op\": \"copy\", \"src\": \"A\", \"dst\": \"B\", \"srcs\": 1}"),
                      "/kernel/body/0/srcs: unknown field 'srcs' in 'copy'; did you mean 'src'?");
  assert_string_equal(parse_one(a, "{\"op\": \"sync_threads\", \"barrier\": 1}"),
                      "/kernel/body/0/barrier: unknown field 'barrier' in 'sync_threads'; the fields are: op, fence "
                      "(and any 'x-' field)");
  assert_string_equal(parse_one(a, "{\"op\": \"serial\", \"var\": \"k\", \"extent\": 4, \"body\": [], \"zzz\": 1}"),
                      "/kernel/body/0/zzz: unknown field 'zzz' in 'serial'; the fields are: op, var, extent, start, "
                      "step, body (and any 'x-' field)");
  tl_arena_free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(kind_table), cmocka_unit_test(ops_parse)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
