/*
 * test_walk.c - the one walker over statements (tl_walk, ir.h).
 *
 * The walker runs over a checked program that nests a loop, an if with an
 * else and a parallel loop; every callback appends what it saw to a trace,
 * which is compared with the order ir.h promises: pre, the statement's
 * expressions, each body between enter_body and leave_body, post; SKIP and
 * STOP from each callback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "ir.h"

static const char prog_text[] =
    "{\"tlir\": 1, \"name\": \"k\",\n"
    " \"params\": [{\"name\": \"A\", \"kind\": \"tensor\", \"dtype\": \"float32\", \"shape\": [64]}],\n"
    " \"kernel\": {\"grid\": [1], \"threads\": 32, \"block_vars\": [\"bx\"], \"body\": [\n"
    "  {\"op\": \"alloc_shared\", \"name\": \"S\", \"shape\": [64], \"dtype\": \"float32\"},\n"
    "  {\"op\": \"copy\", \"src\": \"A[bx * 64:bx * 64 + 64]\", \"dst\": \"S\"},\n"
    "  {\"op\": \"serial\", \"var\": \"k\", \"extent\": 4, \"body\": [\n"
    "    {\"op\": \"if\", \"cond\": \"k > 1\", \"then\": [{\"op\": \"sync_threads\"}],\n"
    "     \"else\": [{\"op\": \"sync_threads\"}, {\"op\": \"sync_threads\"}]}]},\n"
    "  {\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [64], \"body\": [\"S[i] = S[i] * 2.0\"]},\n"
    "  {\"op\": \"copy\", \"src\": \"S\", \"dst\": \"A\"}]}}\n";

typedef struct {
  char trace[2048];
  const char *stop_at;  /* pointer of the statement whose pre (or post) says STOP */
  const char *skip_at;  /* ... whose pre says SKIP */
  bool stop_in_post;
  bool stop_at_expr_name; /* the expression callback stops at the first name */
  bool skip_index_args;   /* ... and skips the operands of buffer indices */
} rec;

/* The statement's pointer without the common "/kernel/body" prefix. */
static const char *short_ptr(const tl_stmt *s) { return s->pointer + strlen("/kernel/body"); }

static void add(rec *r, const char *fmt, ...) {
  size_t n = strlen(r->trace);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->trace + n, sizeof r->trace - n, fmt, ap);
  va_end(ap);
}

static tl_walk_act on_pre(tl_stmt *s, void *user) {
  rec *r = user;
  add(r, "pre %s %s; ", tl_stmt_kind_name(s->kind), short_ptr(s));
  if (r->stop_at && !r->stop_in_post && strcmp(s->pointer, r->stop_at) == 0)
    return TL_WALK_STOP;
  if (r->skip_at && strcmp(s->pointer, r->skip_at) == 0)
    return TL_WALK_SKIP;
  return TL_WALK_GO;
}

static tl_walk_act on_post(tl_stmt *s, void *user) {
  rec *r = user;
  add(r, "post %s; ", short_ptr(s));
  return r->stop_at && r->stop_in_post && strcmp(s->pointer, r->stop_at) == 0 ? TL_WALK_STOP : TL_WALK_GO;
}

static void on_enter(tl_stmt *s, int which, void *user) { add(user, "enter %s %d; ", short_ptr(s), which); }
static void on_leave(tl_stmt *s, int which, void *user) { add(user, "leave %s %d; ", short_ptr(s), which); }

static tl_walk_act on_expr(tl_expr *x, tl_stmt *s, void *user) {
  rec *r = user;
  tl_arena *a = tl_arena_new();
  add(r, "expr %s; ", tl_expr_str(a, x));
  tl_arena_free(a);
  if (r->stop_at_expr_name && x->kind == E_NAME)
    return TL_WALK_STOP;
  if (r->skip_index_args && x->kind == E_INDEX)
    return TL_WALK_SKIP;
  return TL_WALK_GO;
}

static tl_program *load(tl_arena *a) {
  tl_diags d = {.arena = a};
  tl_program *p = tl_load_program(a, prog_text, strlen(prog_text), NULL, 0, &d);
  if (!p)
    tl_diags_print(&d, "prog.json", stderr);
  assert_non_null(p);
  return p;
}

static const tl_walker stmts_only = {.pre = on_pre, .enter_body = on_enter, .leave_body = on_leave, .post = on_post};

static void visit_order(void **state) {
  tl_arena *a = tl_arena_new();
  tl_program *p = load(a);
  rec r = {0};
  assert_int_equal(tl_walk(&p->body, &stmts_only, &r), TL_WALK_GO);
  assert_string_equal(r.trace, "pre alloc /0; post /0; "
                               "pre copy /1; post /1; "
                               "pre loop /2; enter /2 0; "
                               "pre if /2/body/0; "
                               "enter /2/body/0 0; pre sync_threads /2/body/0/then/0; post /2/body/0/then/0; "
                               "leave /2/body/0 0; "
                               "enter /2/body/0 1; pre sync_threads /2/body/0/else/0; post /2/body/0/else/0; "
                               "pre sync_threads /2/body/0/else/1; post /2/body/0/else/1; leave /2/body/0 1; "
                               "post /2/body/0; leave /2 0; post /2; "
                               "pre parallel /3; enter /3 0; pre assign /3/body/0; post /3/body/0; leave /3 0; post /3; "
                               "pre copy /4; post /4; ");
  tl_arena_free(a);
}

static void skip_children(void **state) {
  tl_arena *a = tl_arena_new();
  tl_program *p = load(a);
  rec r = {.skip_at = "/kernel/body/2"};
  assert_int_equal(tl_walk(&p->body, &stmts_only, &r), TL_WALK_GO);
  /* the loop's pre, then its next sibling: neither its body nor its post */
  assert_string_equal(r.trace, "pre alloc /0; post /0; pre copy /1; post /1; pre loop /2; "
                               "pre parallel /3; enter /3 0; pre assign /3/body/0; post /3/body/0; leave /3 0; post /3; "
                               "pre copy /4; post /4; ");
  tl_arena_free(a);
}

static void stop_early(void **state) {
  tl_arena *a = tl_arena_new();
  tl_program *p = load(a);
  /* STOP from pre: nothing after it, not even the posts around it */
  rec r = {.stop_at = "/kernel/body/2/body/0/else/0"};
  assert_int_equal(tl_walk(&p->body, &stmts_only, &r), TL_WALK_STOP);
  assert_string_equal(r.trace, "pre alloc /0; post /0; pre copy /1; post /1; pre loop /2; enter /2 0; "
                               "pre if /2/body/0; enter /2/body/0 0; pre sync_threads /2/body/0/then/0; "
                               "post /2/body/0/then/0; leave /2/body/0 0; enter /2/body/0 1; "
                               "pre sync_threads /2/body/0/else/0; ");
  /* STOP from post */
  rec r2 = {.stop_at = "/kernel/body/1", .stop_in_post = true};
  assert_int_equal(tl_walk(&p->body, &stmts_only, &r2), TL_WALK_STOP);
  assert_string_equal(r2.trace, "pre alloc /0; post /0; pre copy /1; post /1; ");
  /* one statement and what it holds */
  rec r3 = {0};
  assert_int_equal(tl_walk_stmt(p->body.items[3], &stmts_only, &r3), TL_WALK_GO);
  assert_string_equal(r3.trace, "pre parallel /3; enter /3 0; pre assign /3/body/0; post /3/body/0; leave /3 0; post /3; ");
  tl_arena_free(a);
}

static void expressions(void **state) {
  tl_arena *a = tl_arena_new();
  tl_program *p = load(a);
  static const tl_walker w = {.pre = on_pre, .expr = on_expr};
  rec r = {0};
  assert_int_equal(tl_walk(&p->body, &w, &r), TL_WALK_GO);
  /* every node pre-order: the region's start (src of the first copy), the
   * loop's start, extent and step, the if's condition, the parallel
   * extents, the assignment's left side, then its right side */
  assert_string_equal(r.trace, "pre alloc /0; "
                               "pre copy /1; expr (bx * 64); expr bx; expr 64; "
                               "pre loop /2; expr 0; expr 4; expr 1; "
                               "pre if /2/body/0; expr (k > 1); expr k; expr 1; "
                               "pre sync_threads /2/body/0/then/0; pre sync_threads /2/body/0/else/0; "
                               "pre sync_threads /2/body/0/else/1; "
                               "pre parallel /3; expr 64; "
                               "pre assign /3/body/0; expr S[i]; expr i; expr (S[i] * 2); expr S[i]; expr i; expr 2; "
                               "pre copy /4; ");
  /* SKIP from expr skips the node's operands */
  rec r2 = {.skip_index_args = true};
  tl_walk_stmt(p->body.items[3], &w, &r2);
  assert_string_equal(r2.trace, "pre parallel /3; expr 64; pre assign /3/body/0; expr S[i]; expr (S[i] * 2); expr S[i]; "
                                "expr 2; ");
  /* STOP from expr ends the walk */
  rec r3 = {.stop_at_expr_name = true};
  assert_int_equal(tl_walk(&p->body, &w, &r3), TL_WALK_STOP);
  assert_string_equal(r3.trace, "pre alloc /0; pre copy /1; expr (bx * 64); expr bx; ");
  tl_arena_free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(visit_order), cmocka_unit_test(skip_children), cmocka_unit_test(stop_early),
      cmocka_unit_test(expressions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
