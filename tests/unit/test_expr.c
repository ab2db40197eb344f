/*
 * test_expr.c - the expression language: Python precedence and
 * associativity, columns of nodes, and the typing rules of TILE-IR.md
 * sections 5-6 as the checker applies them (types of let values, folding
 * of constants, pinning of untyped constants).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "ir.h"

/* Parses text and prints it back fully parenthesized. */
static const char *roundtrip(tl_arena *a, const char *text) {
  tl_diags d = {.arena = a};
  tl_expr *e = tl_parse_expr(a, text, "/x", &d);
  if (!e)
    return d.n ? tl_arena_printf(a, "error:%d: %s", d.items[0].column, d.items[0].message) : "error";
  return tl_expr_str(a, e);
}

static void precedence(void **state) {
  static const char *const cases[][2] = {
      {"a + b * c", "(a + (b * c))"},
      {"a * b + c", "((a * b) + c)"},
      {"a - b - c", "((a - b) - c)"},
      {"a // b * c", "((a // b) * c)"},
      {"-a * b", "(-a * b)"},
      {"-x[i, j]", "-x[i, j]"},
      {"~a & b", "(~a & b)"},
      {"a | b ^ c & d", "(a | (b ^ (c & d)))"},
      {"a << b + c", "(a << (b + c))"},
      {"a & b << c", "(a & (b << c))"},
      {"a < b + c", "(a < (b + c))"},
      {"a == b | c", "(a == (b | c))"},
      {"not a == b", "not (a == b)"},
      {"not a and b", "(not a and b)"},
      {"a or b and c", "(a or (b and c))"},
      {"a and b or c", "((a and b) or c)"},
      {"(a + b) * c", "((a + b) * c)"},
      {"f(a, b + c)[0]", "error:12: only a name can be indexed or called"},
      {"min(a, b) * 2", "(min(a, b) * 2)"},
      {"- - a", "-(-a)"},
      {"+a", "a"},
      {"0x1F + 1", "(31 + 1)"},
      {"1e3", "1000"},
      {".5 + 1.", "(0.5 + 1)"},
      {"A[i, j,]", "A[i, j]"},
      {"a ** 2", "error:3: '**' is not allowed; use pow(a, b)"},
      {"a < b < c", "error:7: chained comparisons are not allowed; combine them with 'and'"},
      {"a if c else b", "error:3: conditional expressions are not allowed; use if_then_else(cond, a, b)"},
      {"A[i][j]", "error:5: write 'A[i, j]' with one pair of brackets, not 'A[i][j]'"},
      {"f(x=1)", "error:3: keyword arguments are not allowed; pass arguments by position"},
      {"0o17", "error:1: octal and binary literals are not allowed; write the number in decimal or with '0x'"},
      {"1_000", "error:1: '_' in numbers is not allowed; write the digits without it"},
      {"007", "error:1: leading zeros in a decimal literal are not allowed; write '7'"},
      {"a = b", "error:3: '=' is not allowed in an expression; use '==' to compare"},
      {"a b", "error:3: unexpected 'b'; is an operator missing?"},
      {"(a + b", "error:7: expected ')' but found end of expression"},
      {"", "error:1: expression is empty"},
      {"a !b", "error:3: '!' is not an operator; use 'not'"},
      {"9223372036854775808", "error:1: integer literal is too large (the limit is int64)"},
      {"A[0:1]", "error:4: slices are not allowed in an element access; index one element per dimension"},
  };
  tl_arena *a = tl_arena_new();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *got = roundtrip(a, cases[i][0]);
    if (strcmp(got, cases[i][1]) != 0)
      fail_msg("'%s': expected '%s', got '%s'", cases[i][0], cases[i][1], got);
  }
  tl_arena_free(a);
}

static void depth_limit(void **state) {
  tl_arena *a = tl_arena_new();
  char deep[400];
  memset(deep, '(', 200);
  deep[200] = 'x';
  memset(deep + 201, ')', 198);
  deep[399] = 0;
  const char *got = roundtrip(a, deep);
  assert_non_null(strstr(got, "nested too deeply"));
  char big[TL_MAX_EXPR_CHARS + 10];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = 0;
  assert_non_null(strstr(roundtrip(a, big), "characters long"));
  tl_arena_free(a);
}

static void columns(void **state) {
  tl_arena *a = tl_arena_new();
  tl_diags d = {.arena = a};
  tl_expr *e = tl_parse_expr(a, "a + b*c", "/p", &d);
  assert_non_null(e);
  assert_int_equal(e->column, 1);
  assert_int_equal(e->args[1]->column, 5);
  assert_int_equal(e->args[1]->args[1]->column, 7);
  assert_string_equal(e->args[1]->pointer, "/p");
  tl_region *r = tl_parse_region(a, "Q[bz, lo:hi, :, 3]", "/r", &d);
  assert_non_null(r);
  assert_int_equal(r->nwritten, 4);
  assert_false(r->is_slice[0]);
  assert_true(r->is_slice[1]);
  assert_true(r->is_slice[2]);
  assert_null(r->w_lo[2]);
  assert_null(r->w_hi[2]);
  assert_int_equal(r->w_col[3], 17);
  tl_expr *l, *rhs;
  int op;
  assert_true(tl_parse_assign(a, "C[i, j] //= x + 1", "/s", &d, &l, &op, &rhs));
  assert_int_equal(op, OP_FLOORDIV);
  assert_int_equal(l->kind, E_INDEX);
  assert_int_equal(rhs->column, 13);
  assert_int_equal(d.n, 0);
  assert_null(tl_parse_region(a, "A[0:4:2]", "/r", &d));
  assert_int_equal(d.n, 1);
  assert_string_equal(d.items[0].message, "slices with a step are not allowed");
  tl_arena_free(a);
}

/* A program whose body is a list of lets; returns the checked program. */
static tl_program *lets(tl_arena *a, const char *constants, const char *params, const char *body, tl_diags *d) {
  char *text = tl_arena_printf(a,
                               "{\"tlir\": 1, \"name\": \"t\", \"constants\": {%s}, \"params\": [%s], "
                               "\"kernel\": {\"grid\": [1], \"threads\": 32, \"block_vars\": [\"bx\"], \"body\": [%s]}}",
                               constants, params, body);
  return tl_load_program(a, text, strlen(text), NULL, 0, d);
}

static tl_type let_type(tl_program *p, const char *name) {
  for (int i = 0; i < p->nvalue_slots; i++)
    if (strcmp(p->value_syms[i]->name, name) == 0)
      return p->value_syms[i]->type;
  fail_msg("no let '%s'", name);
  return TL_TY_NONE;
}

static void typing(void **state) {
  static const struct {
    const char *value;
    tl_type type;
  } cases[] = {
      {"bx * 2", TL_INT32},
      {"bx * 5000000000", TL_INT64},      /* the constant does not fit int32 */
      {"bx * 1.5", TL_FLOAT32},           /* a real with an integer: float32 */
      {"h * 2", TL_FLOAT16},              /* an integer constant meets float16 */
      {"h * 0.5", TL_FLOAT16},            /* a real constant takes float16 */
      {"h + bf", TL_FLOAT32},             /* float16 with bfloat16 widens to float32 */
      {"e4 + e5", TL_FLOAT16},            /* the two float8 formats meet in float16 */
      {"e4 + h", TL_FLOAT16},
      {"e5 + bf", TL_BFLOAT16},
      {"i8 + i8", TL_INT32},              /* narrow integers promote */
      {"u32 + bx", TL_UINT32},            /* unsigned wins at equal width */
      {"u32 + i64", TL_INT64},            /* the wider signed holds every uint32 */
      {"u64 + i64", TL_UINT64},
      {"i8 << 2", TL_INT32},              /* a shift has its promoted left operand's type */
      {"i64 >> bx", TL_INT64},
      {"bx < 3", TL_BOOL},
      {"bx > 1 and bx < 4", TL_BOOL},
      {"exp(bx)", TL_FLOAT32},            /* math functions take integers as float32 */
      {"exp(h)", TL_FLOAT16},
      {"abs(i8)", TL_INT32},
      {"max(bx, i64)", TL_INT64},
      {"ceildiv(bx, 4)", TL_INT32},
      {"if_then_else(bx > 0, h, 1.0)", TL_FLOAT16},
      {"cast(bx, bfloat16)", TL_BFLOAT16},
      {"float8_e4m3(bx)", TL_FLOAT8_E4M3},
      {"reinterpret(h, uint16)", TL_UINT16},
      {"-i8", TL_INT32},
      {"thread_binding(0)", TL_INT32},
      {"pow(h, 2)", TL_FLOAT16},
      {"fma(h, f, 1.0)", TL_FLOAT32},
  };
  tl_arena *a = tl_arena_new();
  const char *params =
      "{\"name\": \"h\", \"kind\": \"scalar\", \"dtype\": \"float32\"}";
  (void)params;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    /* variables of every dtype, then the let under test */
    const char *body = tl_arena_printf(
        a,
        "{\"op\": \"alloc_var\", \"name\": \"h\", \"dtype\": \"float16\"},"
        "{\"op\": \"alloc_var\", \"name\": \"bf\", \"dtype\": \"bfloat16\"},"
        "{\"op\": \"alloc_var\", \"name\": \"f\", \"dtype\": \"float32\"},"
        "{\"op\": \"alloc_var\", \"name\": \"e4\", \"dtype\": \"float8_e4m3\"},"
        "{\"op\": \"alloc_var\", \"name\": \"e5\", \"dtype\": \"float8_e5m2\"},"
        "{\"op\": \"alloc_var\", \"name\": \"i8\", \"dtype\": \"int8\"},"
        "{\"op\": \"alloc_var\", \"name\": \"u32\", \"dtype\": \"uint32\"},"
        "{\"op\": \"alloc_var\", \"name\": \"i64\", \"dtype\": \"int64\"},"
        "{\"op\": \"alloc_var\", \"name\": \"u64\", \"dtype\": \"uint64\"},"
        "{\"op\": \"let\", \"name\": \"x\", \"value\": \"%s\"}",
        cases[i].value);
    tl_diags d = {.arena = a};
    tl_program *p = lets(a, "", "", body, &d);
    if (!p)
      fail_msg("'%s': %s", cases[i].value, d.n ? d.items[0].message : "failed");
    tl_type t = let_type(p, "x");
    if (t != cases[i].type)
      fail_msg("'%s': expected %s, got %s", cases[i].value, tl_type_name(cases[i].type), tl_type_name(t));
  }
  tl_arena_free(a);
}

static void folding(void **state) {
  tl_arena *a = tl_arena_new();
  tl_diags d = {.arena = a};
  /* constants fold in int64/float64, in any order, with floor semantics */
  tl_program *p = lets(a,
                       "\"a\": \"b * 3\", \"b\": 7, \"c\": \"-7 // 2\", \"m\": \"-7 % 3\", "
                       "\"s\": \"1.4426950408889634 / sqrt(dim)\", \"dim\": 64, \"big\": \"1 << 40\", "
                       "\"t\": \"a > 20 and not false\", \"cd\": \"ceildiv(-7, 2)\"",
                       "", "", &d);
  assert_non_null(p);
  struct {
    const char *name;
    tl_type type;
    double v;
  } want[] = {{"a", TL_TY_UINT, 21},     {"b", TL_TY_UINT, 7},   {"c", TL_TY_UINT, -4},
              {"m", TL_TY_UINT, 2},      {"s", TL_TY_UREAL, 1.4426950408889634 / 8},
              {"big", TL_TY_UINT, 1099511627776.0}, {"t", TL_BOOL, 1}, {"cd", TL_TY_UINT, -3}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    tl_sym *s = NULL;
    for (int k = 0; k < p->nconsts; k++)
      if (strcmp(p->consts[k]->name, want[i].name) == 0)
        s = p->consts[k];
    assert_non_null(s);
    if (s->type != want[i].type)
      fail_msg("%s: type %s", want[i].name, tl_type_name(s->type));
    double got = s->type == TL_TY_UREAL ? s->cval.f : (double)s->cval.i;
    if (got != want[i].v)
      fail_msg("%s: expected %.17g, got %.17g", want[i].name, want[i].v, got);
  }
  /* overrides change dependent constants */
  tl_define defs[] = {{"dim", "16"}, {"b", "-1"}};
  const char *text = "{\"tlir\": 1, \"name\": \"t\", \"constants\": {\"s\": \"1.0 / sqrt(dim)\", \"dim\": 64, "
                     "\"a\": \"b * 3\", \"b\": 7}, \"params\": [], \"kernel\": {\"grid\": [\"a + 4\"], "
                     "\"threads\": 32, \"block_vars\": [\"bx\"], \"body\": []}}";
  tl_diags d2 = {.arena = a};
  p = tl_load_program(a, text, strlen(text), defs, 2, &d2);
  assert_non_null(p);
  for (int k = 0; k < p->nconsts; k++) {
    if (strcmp(p->consts[k]->name, "s") == 0)
      assert_true(p->consts[k]->cval.f == 0.25);
    if (strcmp(p->consts[k]->name, "a") == 0)
      assert_int_equal(p->consts[k]->cval.i, -3);
  }
  assert_int_equal(p->grid[0]->kind, E_CONST);
  assert_int_equal(p->grid[0]->val.i, 1);
  tl_arena_free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(precedence), cmocka_unit_test(depth_limit), cmocka_unit_test(columns),
      cmocka_unit_test(typing),     cmocka_unit_test(folding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
