/*
 * test_compile.c - unit tests of libtlcompiler's public API (tlcompiler.h):
 * tl_compile, tl_compile_key (and tl_compile_key_as) and tl_compiler_targets, run on the real
 * examples with the installed NVRTC.
 *
 * What the CI asks for (no GPU there): every example program
 * (examples/NAME.json) compiles for sm_80, sm_90a and compute_80.  Each build is checked against
 * sources independent of the compiler's own bookkeeping: the cubin's ELF
 * header and notes (tl_cubin_inspect: architecture, the 'a' flag, the
 * kernel and its registers), the PTX text (.target and .entry), the
 * program's own JSON (entry, parameters in ABI order, grid and block
 * evaluated here from the program's expressions with a small evaluator,
 * a lower bound on shared memory from its alloc_shared statements), and a
 * SHA-256 computed here with libcrypto.  The build key is checked for what
 * docs/DESIGN.md section 4 promises: stable for the same request, blind to
 * formatting and 'x-' fields, sensitive to constants, target and options.
 * The failure cases check the status codes of tlcompiler.h.
 *
 * Without NVRTC every test skips and prints why.  That path is tested too:
 * one test runs this program again with TL_NVRTC pointing nowhere, and the
 * child checks that the API answers TL_NO_TOOLCHAIN.
 *
 * Files are found under $TL_SRCDIR when it is set, else relative to the
 * current directory (the repository root under `make test`).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cubin.h"
#include "tlcompiler.h"

#define CHILD_ENV "TL_TEST_COMPILE_CHILD"
#define NVRTC_TEST_COUNT 15 /* the tests in NVRTC_TESTS (main) */

/* ---- state shared by the tests ------------------------------------------ */

static const char *const *targets; /* NULL when NVRTC is missing */
static const char *toolchain_desc;
static char missing[TL_ERROR_MESSAGE_MAX];

typedef struct example {
  char *name; /* file stem: "gemm" */
  char *text;
  size_t len;
  json_t *doc;
} example;

static example *examples;
static int nexamples;

#define NEED_NVRTC()                                                          \
  do {                                                                        \
    if (!targets) {                                                           \
      printf("skipping: no NVRTC here: %s\n", missing);                       \
      skip();                                                                 \
    }                                                                         \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *srcdir(void) {
  const char *d = getenv("TL_SRCDIR");
  return d && *d ? d : ".";
}

/* Reads a whole file (NUL-terminated); NULL when it cannot. */
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char *p = malloc(cap + 1);
  for (size_t r; p && (r = fread(p + n, 1, cap - n, f)) > 0;) {
    n += r;
    if (n == cap) {
      char *q = cap < (64u << 20) ? realloc(p, 2 * cap + 1) : NULL;
      if (!q) {
        free(p);
        p = NULL;
        break;
      }
      p = q;
      cap *= 2;
    }
  }
  fclose(f);
  if (p) {
    p[n] = 0;
    *len = n;
  }
  return p;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void load_examples(void) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/examples", srcdir());
  DIR *d = opendir(dir);
  if (!d)
    return;
  char *names[256];
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) && n < 256;) {
    size_t l = strlen(e->d_name);
    if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0)
      names[n++] = strndup(e->d_name, l - 5);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof names[0], cmp_str);
  examples = calloc((size_t)n, sizeof *examples);
  for (int i = 0; i < n; i++) {
    example *x = &examples[nexamples];
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.json", dir, names[i]);
    x->text = read_file(path, &x->len);
    x->doc = x->text ? json_loadb(x->text, x->len, 0, NULL) : NULL;
    if (!x->doc) {
      fprintf(stderr, "cannot read %s as JSON\n", path);
      free(x->text);
      free(names[i]);
      continue;
    }
    x->name = names[i];
    nexamples++;
  }
}

static const example *find_example(const char *name) {
  for (int i = 0; i < nexamples; i++)
    if (strcmp(examples[i].name, name) == 0)
      return &examples[i];
  fail_msg("examples/%s.json is missing", name);
  return NULL;
}

static int group_setup(void **state) {
  (void)state;
  tl_error err;
  targets = tl_compiler_targets(&toolchain_desc, &err);
  if (targets && !tl_compiler_target_toolchain("sm_80")) { /* only AMD's toolchain is here */
    targets = NULL;
    tl_error_set(&err, TL_NO_TOOLCHAIN, "no NVRTC offers sm_80 (the targets offered are AMD's)");
  }
  if (!targets) {
    snprintf(missing, sizeof missing, "%s", err.message);
    fprintf(stderr, "NOTE: the compile tests will skip: no NVRTC here: %s\n", missing);
  }
  load_examples();
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  for (int i = 0; i < nexamples; i++) {
    free(examples[i].name);
    free(examples[i].text);
    json_decref(examples[i].doc);
  }
  free(examples);
  examples = NULL;
  nexamples = 0;
  return 0;
}

/* ---- compiling ------------------------------------------------------------ */

typedef struct outcome {
  tl_status st;
  tl_build *b;
  tl_error err;
  tl_diags diags;
} outcome;

static void do_compile(outcome *o, const char *text, size_t len, const tl_define *defs, int nd, const char *target,
                       const char *options) {
  memset(o, 0, sizeof *o);
  o->diags.arena = tl_arena_new();
  tl_compile_request req = {.program = text, .program_len = len, .defines = defs, .ndefines = nd, .target = target, .options_json = options};
  o->b = (tl_build *)(uintptr_t)1; /* must be reset to NULL on failure */
  o->st = tl_compile(&req, &o->b, &o->diags, &o->err);
  if (o->st != TL_OK)
    assert_null(o->b);
}

static void outcome_free(outcome *o) {
  tl_build_free(o->b);
  tl_arena_free(o->diags.arena);
  memset(o, 0, sizeof *o);
}

static void print_diags(const outcome *o) {
  for (int i = 0; i < o->diags.n; i++)
    print_message("  diag %s:%d: %s\n", o->diags.items[i].pointer ? o->diags.items[i].pointer : "(json)",
                  o->diags.items[i].column, o->diags.items[i].message);
}

static bool verbose_keys = true; /* print why tl_compile_key failed */

/* Key and manifest of a request through tl_compile_key (manifest malloc'd). */
static tl_status key_of(const char *text, size_t len, const tl_define *defs, int nd, const char *target,
                        const char *options, char key[65], char **manifest) {
  tl_diags d = {.arena = tl_arena_new()};
  tl_error err;
  tl_compile_request req = {.program = text, .program_len = len, .defines = defs, .ndefines = nd, .target = target, .options_json = options};
  *manifest = NULL;
  tl_status st = tl_compile_key(&req, key, manifest, &d, &err);
  if (st != TL_OK && verbose_keys) {
    print_message("tl_compile_key(%s): %s: %s\n", target ? target : "NULL", tl_status_name(st), err.message);
    for (int i = 0; i < d.n; i++)
      print_message("  diag %s: %s\n", d.items[i].pointer ? d.items[i].pointer : "(json)", d.items[i].message);
  }
  tl_arena_free(d.arena);
  return st;
}

/* key_of for a request expected to fail: quiet, and nothing comes back. */
static tl_status key_fails(const char *text, size_t len, const char *target, const char *options) {
  char key[65], *manifest;
  verbose_keys = false;
  tl_status st = key_of(text, len, NULL, 0, target, options, key, &manifest);
  verbose_keys = true;
  assert_null(manifest);
  return st;
}

static void assert_hex64(const char *s) {
  assert_non_null(s);
  assert_int_equal(strlen(s), 64);
  for (int i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      fail_msg("'%s' is not lowercase hex (character %d)", s, i);
}

static void sha256_hex(const void *p, size_t n, char out[65]) {
  unsigned char md[32];
  unsigned int mdlen = 0;
  assert_int_equal(EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL), 1);
  assert_int_equal(mdlen, 32);
  for (int i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* ---- a small evaluator of Tile IR integer expressions ------------------- */
/* Independent of the checker: it evaluates the parsed (unchecked) tree of
 * the program's own strings, with the names bound here. */

typedef struct env {
  const char *name[TL_MAX_CONSTANTS + TL_MAX_PARAMS];
  int64_t val[TL_MAX_CONSTANTS + TL_MAX_PARAMS];
  bool known[TL_MAX_CONSTANTS + TL_MAX_PARAMS];
  int n;
} env;

static int env_find(const env *v, const char *name) {
  for (int i = 0; i < v->n; i++)
    if (strcmp(v->name[i], name) == 0)
      return i;
  return -1;
}

static void env_set(env *v, const char *name, bool known, int64_t val) {
  int i = env_find(v, name);
  if (i < 0) {
    assert_true(v->n < (int)(sizeof v->name / sizeof v->name[0]));
    i = v->n++;
    v->name[i] = name;
  }
  v->known[i] = known;
  v->val[i] = val;
}

static bool eval(const tl_expr *e, const env *v, int64_t *out) {
  int64_t a, b;
  switch (e->kind) {
  case E_CONST:
    if (e->type == TL_TY_UINT || e->type == TL_BOOL) {
      *out = e->val.i;
      return true;
    }
    return false;
  case E_NAME: {
    int i = env_find(v, e->name);
    if (i < 0 || !v->known[i])
      return false;
    *out = v->val[i];
    return true;
  }
  case E_UNARY:
    if (e->op != '-' || !eval(e->args[0], v, &a))
      return false;
    *out = -a;
    return true;
  case E_BINARY:
    if (!eval(e->args[0], v, &a) || !eval(e->args[1], v, &b))
      return false;
    switch (e->op) {
    case '+': *out = a + b; return true;
    case '-': *out = a - b; return true;
    case '*': *out = a * b; return true;
    case OP_FLOORDIV:
      if (b == 0)
        return false;
      *out = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
      return true;
    case '%':
      if (b == 0)
        return false;
      *out = a % b + (((a % b != 0) && ((a < 0) != (b < 0))) ? b : 0);
      return true;
    case '<': *out = a < b; return true;
    case '>': *out = a > b; return true;
    case OP_LE: *out = a <= b; return true;
    case OP_GE: *out = a >= b; return true;
    case OP_EQ: *out = a == b; return true;
    case OP_NE: *out = a != b; return true;
    default:
      return false;
    }
  case E_CALL:
    if (strcmp(e->name, "if_then_else") == 0 && e->nargs == 3) {
      if (!eval(e->args[0], v, &a))
        return false;
      return eval(e->args[a ? 1 : 2], v, out);
    }
    if (e->nargs != 2 || !eval(e->args[0], v, &a) || !eval(e->args[1], v, &b))
      return false;
    if (strcmp(e->name, "ceildiv") == 0 && b > 0) {
      *out = a / b + (a % b > 0);
      return true;
    }
    if (strcmp(e->name, "min") == 0) {
      *out = a < b ? a : b;
      return true;
    }
    if (strcmp(e->name, "max") == 0) {
      *out = a > b ? a : b;
      return true;
    }
    return false;
  default:
    return false;
  }
}

/* Evaluates a JSON integer or expression string; false when not an integer
 * expression over known names. */
static bool eval_json(tl_arena *a, const json_t *j, const env *v, int64_t *out) {
  if (json_is_integer(j)) {
    *out = json_integer_value(j);
    return true;
  }
  if (json_is_boolean(j)) {
    *out = json_is_true(j);
    return true;
  }
  if (!json_is_string(j))
    return false;
  tl_diags d = {.arena = a};
  tl_expr *e = tl_parse_expr(a, json_string_value(j), "", &d);
  return e && eval(e, v, out);
}

/* The names an expression string uses (parsed with tl_parse_expr); each
 * must satisfy ok(name, ctx). */
static bool names_ok(const tl_expr *e, bool (*ok)(const char *, const void *), const void *ctx) {
  if (e->kind == E_NAME || e->kind == E_INDEX)
    if (e->kind == E_INDEX || !ok(e->name, ctx))
      return false;
  for (int i = 0; i < e->nargs; i++)
    if (!names_ok(e->args[i], ok, ctx))
      return false;
  return true;
}

static bool is_scalar_param(const char *name, const void *ctx) {
  const json_t *params = ctx;
  size_t i;
  json_t *p;
  json_array_foreach(params, i, p) {
    if (strcmp(json_string_value(json_object_get(p, "name")), name) == 0)
      return strcmp(json_string_value(json_object_get(p, "kind")), "scalar") == 0;
  }
  return false;
}

static const char *define_of(const tl_define *defs, int nd, const char *name) {
  const char *value = NULL;
  for (int d = 0; d < nd; d++)
    if (strcmp(defs[d].name, name) == 0)
      value = defs[d].value; /* the last one wins */
  return value;
}

/* The program's constants with the overrides applied (folded where they
 * are integer expressions), and its scalar parameters (unknown). */
static void program_env(tl_arena *a, const json_t *doc, const tl_define *defs, int nd, env *v) {
  memset(v, 0, sizeof *v);
  json_t *consts = json_object_get(doc, "constants");
  const char *name;
  json_t *c;
  json_object_foreach(consts, name, c) env_set(v, name, false, 0);
  size_t i;
  json_t *p;
  json_array_foreach(json_object_get(doc, "params"), i, p) env_set(v, json_string_value(json_object_get(p, "name")), false, 0);
  /* constants may refer to each other in any order: iterate to a fixpoint */
  for (int round = 0; round <= v->n; round++) {
    bool changed = false;
    json_object_foreach(consts, name, c) {
      int k = env_find(v, name);
      if (v->known[k])
        continue;
      int64_t x = 0;
      const char *def = define_of(defs, nd, name);
      bool ok;
      if (def && (strcmp(def, "true") == 0 || strcmp(def, "false") == 0)) {
        x = def[0] == 't';
        ok = true;
      } else if (def) {
        char *end;
        x = strtoll(def, &end, 10);
        ok = end != def && *end == 0;
      } else {
        ok = eval_json(a, c, v, &x);
      }
      if (ok) {
        env_set(v, name, true, x);
        changed = true;
      }
    }
    if (!changed)
      break;
  }
}

/* Device bits of one element (4 for uint4: packed two per byte). */
static int64_t dtype_bits(const char *dt) {
  tl_dtype t;
  assert_true(tl_dtype_parse(dt, &t));
  return tl_dtype_bits(t);
}

/* Sum of the sizes of every alloc_shared in body (nested bodies too) whose
 * shape evaluates; *all false when some did not. */
static int64_t shared_lower_bound(tl_arena *a, const json_t *body, const env *v, bool *all) {
  int64_t sum = 0;
  size_t i;
  json_t *s;
  json_array_foreach(body, i, s) {
    if (!json_is_object(s))
      continue;
    const char *op = json_string_value(json_object_get(s, "op"));
    if (op && strcmp(op, "alloc_shared") == 0) {
      int64_t n = dtype_bits(json_string_value(json_object_get(s, "dtype")));
      size_t d;
      json_t *ext;
      json_array_foreach(json_object_get(s, "shape"), d, ext) {
        int64_t x;
        if (!eval_json(a, ext, v, &x)) {
          *all = false;
          n = 0;
          break;
        }
        n *= x;
      }
      sum += n / 8;
    }
    static const char *const nested[] = {"body", "then", "else"};
    for (int k = 0; k < 3; k++)
      if (json_is_array(json_object_get(s, nested[k])))
        sum += shared_lower_bound(a, json_object_get(s, nested[k]), v, all);
  }
  return sum;
}

/* ---- checking one build ------------------------------------------------------ */

static bool is_sm(const char *target) { return strncmp(target, "sm_", 3) == 0; }

/* Checks a metadata expression (an integer, or a string over scalar
 * parameters) against the program's expression for the same value: equal
 * for the program's constants and for several values of the scalars. */
static void check_expr_entry(tl_arena *a, const char *what, const json_t *got, const json_t *prog_expr, const json_t *params,
                             const env *base) {
  if (json_is_integer(got)) {
    int64_t want;
    if (eval_json(a, prog_expr, base, &want))
      if (json_integer_value(got) != want)
        fail_msg("%s: metadata says %lld, the program's '%s' is %lld", what, (long long)json_integer_value(got),
                 json_is_string(prog_expr) ? json_string_value(prog_expr) : "(number)", (long long)want);
    return;
  }
  if (!json_is_string(got))
    fail_msg("%s is neither an integer nor an expression string", what);
  tl_diags d = {.arena = a};
  tl_expr *e = tl_parse_expr(a, json_string_value(got), "", &d);
  if (!e)
    fail_msg("%s: '%s' does not parse as a Tile IR expression", what, json_string_value(got));
  if (!names_ok(e, is_scalar_param, params))
    fail_msg("%s: '%s' uses a name that is not a scalar parameter", what, json_string_value(got));
  static const int64_t values[] = {1, 7, 300, 4096};
  int compared = 0;
  for (int k = 0; k < 4; k++) {
    env v = *base;
    size_t i;
    json_t *p;
    json_array_foreach(params, i, p) if (strcmp(json_string_value(json_object_get(p, "kind")), "scalar") == 0)
        env_set(&v, json_string_value(json_object_get(p, "name")), true, values[k]);
    int64_t x, want;
    if (!eval(e, &v, &x))
      fail_msg("%s: '%s' cannot be evaluated from the scalar arguments", what, json_string_value(got));
    if (!eval_json(a, prog_expr, &v, &want))
      continue;
    if (x != want)
      fail_msg("%s: '%s' gives %lld with scalars = %lld; the program's expression gives %lld", what,
               json_string_value(got), (long long)x, (long long)values[k], (long long)want);
    compared++;
  }
  assert_true(compared > 0);
}

/* The entry point of kernel KI of program DOC: its name, or NAME_KI in a program of several kernels or with
 * workspaces (proto/kernel-meta.md section 6). */
static void entry_of(const json_t *doc, size_t ki, char *out, size_t n) {
  const char *name = json_string_value(json_object_get(doc, "name"));
  if (json_object_get(doc, "kernels")) /* one "kernel" keeps the name, with workspaces too (tile-ir-v1.md 4.1) */
    snprintf(out, n, "%s_%zu", name, ki);
  else
    snprintf(out, n, "%s", name);
}

/* One kernel's launch and resources in the metadata (mk: the metadata, or its kernels[I]) against the
 * program's kernel object and, for cubins, the kernel ENTRY in the binary. */
static void check_kernel_meta(const example *x, const char *target, tl_arena *a, env *base, json_t *pparams,
                              const json_t *kernel, const json_t *mk, const char *entry, const tl_cubin_info *ci) {
  /* launch configuration */
  json_t *launch = json_object_get(mk, "launch");
  assert_true(json_is_object(launch));
  json_t *grid = json_object_get(launch, "grid"), *pgrid = json_object_get(kernel, "grid");
  assert_true(json_is_array(grid));
  assert_int_equal(json_array_size(grid), json_array_size(pgrid));
  for (size_t i = 0; i < json_array_size(grid); i++) {
    char what[128];
    snprintf(what, sizeof what, "%s/%s: launch.grid[%zu]", x->name, target, i);
    check_expr_entry(a, what, json_array_get(grid, i), json_array_get(pgrid, i), pparams, base);
  }
  json_t *block = json_object_get(launch, "block"), *pthreads = json_object_get(kernel, "threads");
  assert_true(json_is_array(block));
  assert_int_equal(json_array_size(block), 3);
  int64_t total = 1;
  for (size_t i = 0; i < 3; i++) {
    json_t *bi = json_array_get(block, i);
    assert_true(json_is_integer(bi));
    assert_true(json_integer_value(bi) >= 1);
    total *= json_integer_value(bi);
    const json_t *want_j = json_is_array(pthreads) ? json_array_get(pthreads, i) : i == 0 ? pthreads : NULL;
    int64_t want = 1;
    /* in x, a warp-specialized kernel's producer warpgroup too (pass_wspec.c; sm_90a, compute_90a), after
     * the program's threads once per slice of a loop that runs in slices */
    json_int_t producer = i == 0 ? json_integer_value(json_object_get(launch, "producer_threads")) : 0;
    json_int_t slices = i == 0 && json_object_get(launch, "slices") ? json_integer_value(json_object_get(launch, "slices")) : 1;
    assert_true(producer == 0 || (producer == 128 && strstr(target, "_90a")));
    assert_true(slices == 1 || (slices >= 2 && slices <= 4 && producer == 128));
    if (!want_j || eval_json(a, want_j, base, &want))
      assert_int_equal(json_integer_value(bi), want * slices + producer);
  }
  assert_in_range(total, 1, 1024);
  json_t *dyn = json_object_get(launch, "dynamic_shared_bytes");
  assert_true(json_is_integer(dyn));
  bool all = true;
  int64_t lower = shared_lower_bound(a, json_object_get(kernel, "body"), base, &all);
  if (json_integer_value(dyn) < lower)
    fail_msg("%s/%s: dynamic_shared_bytes %lld is less than the program's alloc_shared bytes %lld", x->name, target,
             (long long)json_integer_value(dyn), (long long)lower);
  assert_in_range(json_integer_value(dyn), 0, 232448);
  json_t *pcluster = json_object_get(kernel, "cluster");
  if (pcluster)
    assert_true(json_equal(json_object_get(launch, "cluster"), pcluster));

  /* resources: for cubins, the figures of the kernel in the binary */
  json_t *res = json_object_get(mk, "resources");
  assert_true(json_is_object(res));
  if (ci) {
    const tl_cubin_kernel *k = tl_cubin_find(ci, entry);
    assert_non_null(k);
    assert_true(json_is_integer(json_object_get(res, "registers")));
    assert_int_equal(json_integer_value(json_object_get(res, "registers")), k->registers);
    assert_int_equal(json_integer_value(json_object_get(res, "local_bytes")), k->local_bytes);
    assert_int_equal(json_integer_value(json_object_get(res, "static_shared_bytes")), k->shared_bytes);
    static const char *const spills[] = {"spill_store_bytes", "spill_load_bytes", "stack_frame_bytes"};
    for (int i = 0; i < 3; i++) {
      json_t *s = json_object_get(res, spills[i]);
      assert_true(json_is_integer(s));
      assert_true(json_integer_value(s) >= 0);
    }
    /* the stack frame is the cubin's own record, whatever the log says */
    assert_int_equal(json_integer_value(json_object_get(res, "stack_frame_bytes")), k->local_bytes);
  } else {
    assert_null(json_object_get(res, "registers"));
  }
}

static void check_meta(const example *x, const tl_define *defs, int nd, const char *target, const tl_build *b,
                       const tl_cubin_info *ci) {
  json_error_t jerr;
  json_t *m = json_loads(b->meta, JSON_REJECT_DUPLICATES, &jerr);
  if (!m)
    fail_msg("%s/%s: metadata is not JSON: %s", x->name, target, jerr.text);
  assert_true(json_is_object(m));
  tl_arena *a = tl_arena_new();
  env base;
  program_env(a, x->doc, defs, nd, &base);
  const json_t *doc = x->doc;
  /* a program of several kernels, or with workspaces: format 3, the entries NAME_0, NAME_1, ..., the
   * metadata's kernels[I] each (its entry, launch and resources), its entry, launch and resources the
   * first kernel's (proto/kernel-meta.md section 6) */
  json_t *pkernels = json_object_get(doc, "kernels");
  bool multi = pkernels || json_object_get(doc, "workspaces");
  size_t nk = pkernels ? json_array_size(pkernels) : 1;
  char entry[300];
  entry_of(doc, 0, entry, sizeof entry);

  /* format 2 exactly when the kernel takes tensor maps, 3 for several kernels (proto/kernel-meta.md) */
  assert_true(json_is_integer(json_object_get(m, "format")));
  assert_int_equal(json_integer_value(json_object_get(m, "format")),
                   multi ? 3 : json_object_get(m, "tensor_maps") ? 2 : 1);
  assert_string_equal(json_string_value(json_object_get(m, "entry")), entry);
  assert_string_equal(json_string_value(json_object_get(m, "target")), target);
  assert_string_equal(json_string_value(json_object_get(m, "binary")), is_sm(target) ? "cubin" : "ptx");

  /* parameters, in the program's (ABI) order */
  json_t *params = json_object_get(m, "params"), *pparams = json_object_get(doc, "params");
  assert_true(json_is_array(params));
  assert_int_equal(json_array_size(params), json_array_size(pparams));
  for (size_t i = 0; i < json_array_size(params); i++) {
    json_t *p = json_array_get(params, i), *q = json_array_get(pparams, i);
    assert_string_equal(json_string_value(json_object_get(p, "name")), json_string_value(json_object_get(q, "name")));
    assert_string_equal(json_string_value(json_object_get(p, "kind")), json_string_value(json_object_get(q, "kind")));
    assert_string_equal(json_string_value(json_object_get(p, "dtype")), json_string_value(json_object_get(q, "dtype")));
    if (strcmp(json_string_value(json_object_get(q, "kind")), "tensor") == 0) {
      json_t *shape = json_object_get(p, "shape"), *pshape = json_object_get(q, "shape");
      assert_true(json_is_array(shape));
      assert_int_equal(json_array_size(shape), json_array_size(pshape));
      for (size_t d = 0; d < json_array_size(shape); d++) {
        char what[160];
        snprintf(what, sizeof what, "%s/%s: params[%zu].shape[%zu]", x->name, target, i, d);
        check_expr_entry(a, what, json_array_get(shape, d), json_array_get(pshape, d), pparams, &base);
      }
      json_int_t align = json_integer_value(json_object_get(p, "align"));
      json_int_t want = json_is_integer(json_object_get(q, "align")) ? json_integer_value(json_object_get(q, "align")) : 16;
      assert_int_equal(align, want);
    } else {
      assert_null(json_object_get(p, "shape"));
    }
  }

  json_t *mkernels = json_object_get(m, "kernels");
  if (multi) {
    assert_true(json_is_array(mkernels));
    assert_int_equal(json_array_size(mkernels), nk);
    assert_true(json_equal(json_object_get(m, "launch"), json_object_get(json_array_get(mkernels, 0), "launch")));
    assert_true(json_equal(json_object_get(m, "resources"), json_object_get(json_array_get(mkernels, 0), "resources")));
  } else {
    assert_null(mkernels);
  }
  for (size_t ki = 0; ki < nk; ki++) {
    const json_t *kernel = pkernels ? json_array_get(pkernels, ki) : json_object_get(doc, "kernel");
    const json_t *mk = multi ? json_array_get(mkernels, ki) : m;
    entry_of(doc, ki, entry, sizeof entry);
    if (multi)
      assert_string_equal(json_string_value(json_object_get(mk, "entry")), entry);
    check_kernel_meta(x, target, a, &base, pparams, kernel, mk, entry, ci);
  }

  json_t *ver = json_object_get(m, "versions");
  /* the compiler's identity: the release and 16 hex digits of the Makefile's digest */
  const char *id = json_string_value(json_object_get(ver, "compiler"));
  assert_string_equal(id, tl_compiler_id);
  assert_int_equal(strlen(id), strlen("tlc " TL_COMPILER_VERSION "+") + 16);
  assert_memory_equal(id + strlen("tlc " TL_COMPILER_VERSION "+"), tl_compiler_digest, 16);
  assert_int_equal(strspn(tl_compiler_digest, "0123456789abcdef"), 64);
  assert_int_equal(strlen(tl_compiler_digest), 64);
  /* the key's toolchain line: the vendor's toolchain where it may build, then nvJitLink's where it may
   * assemble the PTX back end's cubin; the back end asked for beside the one chosen (NVIDIA) */
  const char *backend = json_string_value(json_object_get(m, "backend"));
  const char *tool = json_string_value(json_object_get(ver, "toolchain")), *vendor = tl_compiler_target_toolchain(target);
  assert_non_null(tool);
  assert_int_equal(!backend, !json_object_get(m, "backend_requested"));
  if (backend && strcmp(backend, "ptx") == 0) /* emit_ptx.c, and nvJitLink for a cubin */
    assert_true(is_sm(target) ? strstr(tool, "nvJitLink ") != NULL
                              : strcmp(tool, vendor) == 0 || strcmp(tool, "tlc emit_ptx.c (PTX ISA 8.0)") == 0);
  else
    assert_true(strncmp(tool, vendor, strlen(vendor)) == 0 &&
                (!tool[strlen(vendor)] || strncmp(tool + strlen(vendor), "; nvJitLink ", 12) == 0));
  assert_true(json_is_number(json_object_get(m, "compile_ms")));
  assert_true(json_number_value(json_object_get(m, "compile_ms")) >= 0);
  assert_true(json_is_string(json_object_get(m, "log")));
  tl_arena_free(a);
  json_decref(m);
}

/* Everything a successful build must satisfy. */
static void check_build(const example *x, const tl_define *defs, int nd, const char *target, const char *options,
                        const tl_build *b) {
  char entry[300];
  entry_of(x->doc, 0, entry, sizeof entry);
  assert_non_null(b);
  assert_string_equal(b->target, target);
  assert_hex64(b->key);
  assert_non_null(b->manifest);
  assert_non_null(b->source);
  /* CUDA C, or PTX from the PTX back end (compile.c: the metadata says which) */
  json_t *bm = b->meta ? json_loads(b->meta, 0, NULL) : NULL;
  const char *chosen = json_string_value(json_object_get(bm, "backend"));
  assert_non_null(strstr(b->source, chosen && strcmp(chosen, "ptx") == 0 ? ".visible .entry" : "__global__"));
  json_decref(bm);
  assert_non_null(strstr(b->source, entry));
  assert_non_null(b->log);
  assert_true(b->compile_ms >= 0);

  /* the key is the one tl_compile_key gives, and the manifest hashes to it */
  char key[65], *manifest;
  assert_int_equal(key_of(x->text, x->len, defs, nd, target, options, key, &manifest), TL_OK);
  assert_string_equal(key, b->key);
  assert_string_equal(manifest, b->manifest);
  char line[160];
  snprintf(line, sizeof line, "tl-build-key 1\ncompiler %s\ntoolchain ", tl_compiler_id);
  assert_memory_equal(b->manifest, line, strlen(line));
  char h[65];
  sha256_hex(b->manifest, strlen(b->manifest), h);
  assert_string_equal(h, b->key);
  free(manifest);

  /* the artifact id is the SHA-256 of the binary */
  assert_non_null(b->binary);
  assert_true(b->binary_size > 0);
  sha256_hex(b->binary, b->binary_size, h);
  assert_string_equal(h, b->artifact);

  tl_cubin_info ci = {0};
  if (is_sm(target)) {
    /* ELF header by hand: 64-bit, little-endian, EM_CUDA */
    assert_true(b->binary_size > 64);
    assert_memory_equal(b->binary, "\x7f" "ELF", 4);
    assert_int_equal(b->binary[4], 2);
    assert_int_equal(b->binary[5], 1);
    assert_int_equal(b->binary[18] | b->binary[19] << 8, TL_EM_CUDA);
    tl_error err;
    if (tl_cubin_inspect(b->binary, b->binary_size, &ci, &err) != TL_OK)
      fail_msg("%s/%s: not a valid cubin: %s", x->name, target, err.message);
    int arch = atoi(target + 3);
    bool accel = target[strlen(target) - 1] == 'a';
    assert_int_equal(ci.arch, arch);
    assert_int_equal(ci.arch_specific, accel);
    if (tl_cubin_check_target(&ci, target, &err) != TL_OK)
      fail_msg("%s/%s: %s", x->name, target, err.message);
    const tl_cubin_kernel *k = tl_cubin_find(&ci, entry);
    if (!k)
      fail_msg("%s/%s: kernel '%s' is not in the cubin", x->name, target, entry);
    assert_true(k->registers > 0);
  } else {
    /* PTX: .target sm_NN and .entry NAME( */
    char *ptx = strndup((const char *)b->binary, b->binary_size);
    assert_non_null(ptx);
    char want[320];
    snprintf(want, sizeof want, "\n.target sm_%s", target + strlen("compute_"));
    const char *t = strstr(ptx, want);
    if (!t || !(t[strlen(want)] == '\n' || t[strlen(want)] == ',' || t[strlen(want)] == ' '))
      fail_msg("%s/%s: the PTX has no line '%s'", x->name, target, want + 1);
    snprintf(want, sizeof want, ".entry %s(", entry);
    if (!strstr(ptx, want))
      fail_msg("%s/%s: the PTX has no '%s'", x->name, target, want);
    free(ptx);
  }
  check_meta(x, defs, nd, target, b, is_sm(target) ? &ci : NULL);
  tl_cubin_info_free(&ci);
}

/* ---- the tests ------------------------------------------------------------------ */

/* The CI requirement: every example for sm_80, sm_90a, compute_80. */
static void test_examples_compile(void **state) {
  (void)state;
  NEED_NVRTC();
  assert_true(nexamples >= 8);
  static const char *const tlist[] = {"sm_80", "sm_90a", "compute_80"};
  double t0 = now_s();
  for (int i = 0; i < nexamples; i++) {
    for (int t = 0; t < 3; t++) {
      double t1 = now_s();
      outcome o;
      do_compile(&o, examples[i].text, examples[i].len, NULL, 0, tlist[t], NULL);
      if (o.st != TL_OK) {
        print_diags(&o);
        fail_msg("%s for %s: %s: %s", examples[i].name, tlist[t], tl_status_name(o.st), o.err.message);
      }
      check_build(&examples[i], NULL, 0, tlist[t], NULL, o.b);
      print_message("ok   %-22s %-10s %6zu bytes  %.2fs\n", examples[i].name, tlist[t], o.b->binary_size,
                    now_s() - t1);
      outcome_free(&o);
    }
  }
  print_message("%d examples x 3 targets in %.1fs\n", nexamples, now_s() - t0);
}

/* sm_75 (Turing) has ldmatrix but neither mma.sync m16n8k16 nor cp.async
 * (both sm_80): the passes choose the portable paths, so every example
 * and every GPU test program builds for sm_75 and compute_75 and the
 * source uses neither (issue 10: it used to fail inside ptxas).
 * flash_attention at its default sizes needs more shared memory than
 * sm_75 has (test_target_misfits); it is built here at smaller sizes. */
static void test_sm75(void **state) {
  (void)state;
  NEED_NVRTC();
  static const char *const tlist[] = {"sm_75", "compute_75"};
  tl_define small[] = {{"dim", "64"}, {"block_M", "64"}, {"block_N", "32"}};
  example gemm_bt = {.name = (char *)"gemm_bt"};
  char path[4200];
  snprintf(path, sizeof path, "%s/tests/gpu/programs/gemm_bt.json", srcdir());
  gemm_bt.text = read_file(path, &gemm_bt.len);
  assert_non_null(gemm_bt.text);
  gemm_bt.doc = json_loadb(gemm_bt.text, gemm_bt.len, 0, NULL);
  assert_non_null(gemm_bt.doc);
  for (int i = 0; i <= nexamples; i++) {
    const example *x = i < nexamples ? &examples[i] : &gemm_bt;
    bool fa = strcmp(x->name, "flash_attention") == 0;
    for (int t = 0; t < 2; t++) {
      outcome o;
      do_compile(&o, x->text, x->len, fa ? small : NULL, fa ? 3 : 0, tlist[t], NULL);
      if (o.st != TL_OK) {
        print_diags(&o);
        fail_msg("%s for %s: %s: %s", x->name, tlist[t], tl_status_name(o.st), o.err.message);
      }
      check_build(x, fa ? small : NULL, fa ? 3 : 0, tlist[t], NULL, o.b);
      if (strstr(o.b->source, "cp.async") || strstr(o.b->source, "mma.sync"))
        fail_msg("%s for %s: the source uses cp.async or mma.sync", x->name, tlist[t]);
      print_message("ok   %-22s %-10s %6zu bytes\n", x->name, tlist[t], o.b->binary_size);
      outcome_free(&o);
    }
  }
  json_decref(gemm_bt.doc);
  free(gemm_bt.text);
}

/* What a target lacks is a diagnostic with a pointer into the program
 * (the server's 422), never a toolchain error: (program, target, status,
 * pointer, the exact message). */
static void test_target_misfits(void **state) {
  (void)state;
  NEED_NVRTC();
  const example *gemm = find_example("gemm"), *fa = find_example("flash_attention");
  json_t *doc = json_deep_copy(gemm->doc);
  json_object_set_new(json_object_get(doc, "kernel"), "cluster", json_pack("[ii]", 2, 1));
  char *clustered = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  tl_define big[] = {{"dim", "256"}};
  static const char *const fa_sm75 =
      "the kernel needs 133640 bytes of shared memory per block ('Q_shared' takes 32768 of them) and sm_75 allows "
      "65536: 68104 bytes too many (use smaller tiles, fewer stages, or a target with more shared memory)";
  static const char *const fa_sm86 =
      "the kernel needs 197640 bytes of shared memory per block ('Q_shared' takes 65536 of them) and sm_86 allows "
      "101376: 96264 bytes too many (use smaller tiles, fewer stages, or a target with more shared memory)";
  const struct {
    const char *what, *text;
    const tl_define *defs;
    int nd;
    const char *target;
    tl_status st;
    const char *pointer, *message;
  } rows[] = {
      {"flash_attention", fa->text, NULL, 0, "sm_75", TL_LIMIT, "/kernel/body/0", fa_sm75},
      {"flash_attention dim=256", fa->text, big, 1, "sm_86", TL_LIMIT, "/kernel/body/0", fa_sm86},
      {"gemm in clusters", clustered, NULL, 0, "sm_80", TL_UNSUPPORTED, "/kernel/cluster",
       "thread-block clusters need sm_90 or later, not sm_80"},
      {"gemm in clusters", clustered, NULL, 0, "compute_89", TL_UNSUPPORTED, "/kernel/cluster",
       "thread-block clusters need sm_90 or later, not compute_89"},
      {"gemm in clusters", clustered, NULL, 0, "gfx942", TL_UNSUPPORTED, "/kernel/cluster",
       "thread-block clusters are NVIDIA's (sm_90 or later); gfx942 has none"},
      {"gemm in clusters", clustered, NULL, 0, "sm_90", TL_OK, NULL, NULL},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    if (!tl_compiler_target_toolchain(rows[i].target)) {
      print_message("skip %s for %s: not offered here\n", rows[i].what, rows[i].target);
      continue;
    }
    outcome o;
    do_compile(&o, rows[i].text, strlen(rows[i].text), rows[i].defs, rows[i].nd, rows[i].target, NULL);
    if (o.st != rows[i].st)
      fail_msg("%s for %s: %s, not %s (%s)", rows[i].what, rows[i].target, tl_status_name(o.st),
               tl_status_name(rows[i].st), o.err.message);
    if (rows[i].st != TL_OK) {
      assert_int_equal(o.diags.n, 1);
      assert_string_equal(o.diags.items[0].pointer, rows[i].pointer);
      assert_string_equal(o.diags.items[0].message, rows[i].message);
      assert_string_equal(o.err.pointer, rows[i].pointer);
      assert_string_equal(o.err.message, rows[i].message);
    }
    print_message("ok   %s for %s: %s\n", rows[i].what, rows[i].target, rows[i].message ? rows[i].message : "built");
    outcome_free(&o);
  }
  free(clustered);
}

/* -D sizes, and a dynamic grid: the metadata follows the constants. */
static void test_defines_compile(void **state) {
  (void)state;
  NEED_NVRTC();
  const example *fa = find_example("flash_attention");
  tl_define small[] = {{"batch", "1"}, {"heads", "2"}, {"seq_len", "100"}, {"dim", "64"}, {"block_M", "64"},
                       {"block_N", "64"}, {"threads", "128"}, {"is_causal", "true"}};
  outcome o;
  do_compile(&o, fa->text, fa->len, small, 8, "sm_86", NULL);
  if (o.st != TL_OK)
    fail_msg("flash_attention with small sizes for sm_86: %s: %s", tl_status_name(o.st), o.err.message);
  check_build(fa, small, 8, "sm_86", NULL, o.b);
  outcome_free(&o);
  const example *mm = find_example("tilus_matmul");
  tl_define mmd[] = {{"n_size", "256"}, {"k_size", "128"}};
  do_compile(&o, mm->text, mm->len, mmd, 2, "compute_80", NULL);
  assert_int_equal(o.st, TL_OK);
  check_build(mm, mmd, 2, "compute_80", NULL, o.b);
  outcome_free(&o);
}

/* The same request twice: the same key, manifest, source and binary bytes. */
static void test_deterministic(void **state) {
  (void)state;
  NEED_NVRTC();
  static const struct {
    const char *example, *target;
  } cases[] = {{"tilus_add_one", "sm_80"}, {"gemm", "sm_90a"}, {"dequant_gemm_threads", "compute_80"},
               {"tilus_matmul", "sm_80"}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const example *x = find_example(cases[c].example);
    outcome o1, o2;
    do_compile(&o1, x->text, x->len, NULL, 0, cases[c].target, NULL);
    do_compile(&o2, x->text, x->len, NULL, 0, cases[c].target, NULL);
    assert_int_equal(o1.st, TL_OK);
    assert_int_equal(o2.st, TL_OK);
    assert_string_equal(o1.b->key, o2.b->key);
    assert_string_equal(o1.b->manifest, o2.b->manifest);
    assert_string_equal(o1.b->source, o2.b->source);
    if (o1.b->binary_size != o2.b->binary_size || memcmp(o1.b->binary, o2.b->binary, o1.b->binary_size) != 0)
      fail_msg("%s for %s: two compiles gave different binaries", x->name, cases[c].target);
    assert_string_equal(o1.b->artifact, o2.b->artifact);
    outcome_free(&o1);
    outcome_free(&o2);
  }
}

/* Adds x- fields at every level where the format allows them. */
static void add_x_fields(json_t *doc) {
  json_object_set_new(doc, "x-note", json_string("added by test_compile \xc3\xa9"));
  size_t i;
  json_t *p;
  json_array_foreach(json_object_get(doc, "params"), i, p) json_object_set_new(p, "x-p", json_pack("[i, n]", (int)i));
  json_t *k = json_object_get(doc, "kernel");
  json_object_set_new(k, "x-k", json_pack("{s: b}", "a", 1));
  json_array_foreach(json_object_get(k, "body"), i, p) if (json_is_object(p))
      json_object_set_new(p, "x-s", json_integer((json_int_t)i));
}

/* Formatting and x- fields do not change the key; the same final
 * constants give the same key however they were reached. */
static void test_key_ignores_formatting(void **state) {
  (void)state;
  NEED_NVRTC();
  for (int i = 0; i < nexamples; i++) {
    const example *x = &examples[i];
    char k0[65], *m0;
    assert_int_equal(key_of(x->text, x->len, NULL, 0, "sm_80", NULL, k0, &m0), TL_OK);
    assert_hex64(k0);
    json_t *copy = json_deep_copy(x->doc);
    char *variants[4];
    variants[0] = json_dumps(x->doc, JSON_INDENT(7));
    variants[1] = json_dumps(x->doc, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
    add_x_fields(copy);
    variants[2] = json_dumps(copy, JSON_INDENT(2) | JSON_SORT_KEYS);
    variants[3] = json_dumps(copy, JSON_COMPACT);
    for (int v = 0; v < 4; v++) {
      char k[65], *m;
      assert_non_null(variants[v]);
      assert_true(strlen(variants[v]) != x->len || memcmp(variants[v], x->text, x->len) != 0);
      assert_int_equal(key_of(variants[v], strlen(variants[v]), NULL, 0, "sm_80", NULL, k, &m), TL_OK);
      if (strcmp(k, k0) != 0)
        fail_msg("%s: variant %d of the same program changed the key", x->name, v);
      assert_string_equal(m, m0);
      free(m);
      free(variants[v]);
    }
    json_decref(copy);
    free(m0);
  }
}

static void key_ok(const example *x, const tl_define *d, int nd, const char *target, const char *options, char key[65]) {
  char *m;
  assert_int_equal(key_of(x->text, x->len, d, nd, target, options, key, &m), TL_OK);
  assert_hex64(key);
  free(m);
}

/* Constants, target and options change the key. */
static void test_key_changes(void **state) {
  (void)state;
  NEED_NVRTC();
  const example *x = find_example("tilus_add_one");
  char k0[65], k[65], k2[65];
  key_ok(x, NULL, 0, "sm_80", NULL, k0);

  tl_define d64 = {"block_n", "64"}, d128 = {"block_n", "128"};
  key_ok(x, &d64, 1, "sm_80", NULL, k);
  assert_string_not_equal(k, k0);
  key_ok(x, &d128, 1, "sm_80", NULL, k); /* the default value: same final constants */
  assert_string_equal(k, k0);

  /* gemm: each constant matters, including one only the shapes use */
  const example *g = find_example("gemm");
  char g0[65];
  key_ok(g, NULL, 0, "sm_90a", NULL, g0);
  static const tl_define changed[] = {{"M", "512"},      {"N", "512"},      {"K", "512"},        {"block_M", "64"},
                                      {"block_N", "64"}, {"block_K", "64"}, {"num_stages", "2"}};
  char seen[7][65];
  for (int i = 0; i < 7; i++) {
    tl_define d = changed[i];
    key_ok(g, &d, 1, "sm_90a", NULL, seen[i]);
    assert_string_not_equal(seen[i], g0);
    for (int j = 0; j < i; j++)
      assert_string_not_equal(seen[i], seen[j]);
  }

  /* targets */
  static const char *const tl[] = {"sm_80", "sm_86", "sm_90", "sm_90a", "compute_80", "compute_90a"};
  char tk[6][65];
  for (int i = 0; i < 6; i++) {
    key_ok(x, NULL, 0, tl[i], NULL, tk[i]);
    for (int j = 0; j < i; j++)
      if (strcmp(tk[i], tk[j]) == 0)
        fail_msg("targets %s and %s give the same key", tl[i], tl[j]);
  }
  assert_string_equal(tk[0], k0);

  /* options: none and {} are the same; key order does not matter; values do */
  key_ok(x, NULL, 0, "sm_80", "{}", k);
  assert_string_equal(k, k0);
  key_ok(x, NULL, 0, "sm_80", "{\"max_registers\": 64}", k);
  assert_string_not_equal(k, k0);
  key_ok(x, NULL, 0, "sm_80", "{\"max_registers\": 64, \"debug\": true}", k);
  key_ok(x, NULL, 0, "sm_80", " { \"debug\" : true , \"max_registers\" : 64 } ", k2);
  assert_string_equal(k, k2);
  key_ok(x, NULL, 0, "sm_80", "{\"fast_compile\": \"min\"}", k);
  key_ok(x, NULL, 0, "sm_80", "{\"fast_compile\": \"mid\"}", k2);
  assert_string_not_equal(k, k0);
  assert_string_not_equal(k, k2);

  /* the back end (compile.c): the key names the one asked for, and for an NVIDIA target that may be
   * built by the PTX back end nvJitLink's identity beside NVRTC's (it is chosen when building) */
  char *mp, *mc;
  assert_int_equal(key_of(x->text, x->len, NULL, 0, "sm_80", NULL, k, &mp), TL_OK);
  setenv("TL_BACKEND", "cuda", 1);
  assert_int_equal(key_of(x->text, x->len, NULL, 0, "sm_80", NULL, k2, &mc), TL_OK);
  unsetenv("TL_BACKEND");
  assert_non_null(strstr(mc, "\nbackend cuda\n"));
  assert_non_null(strstr(mp, "\nbackend auto\n"));
  assert_string_not_equal(k, k2);
  assert_null(strstr(mc, "nvJitLink "));
  if (!strstr(mp, "; nvJitLink "))
    print_message("no nvJitLink here: %s", mp);
  free(mp);
  free(mc);
  verbose_keys = false;
  assert_int_equal(key_of(x->text, x->len, NULL, 0, "sm_80", "{\"backend\": \"nvcc\"}", k, &mp), TL_INVALID_ARG);
  assert_int_equal(key_of(x->text, x->len, NULL, 0, "sm_75", "{\"backend\": \"ptx\"}", k, &mp), TL_UNSUPPORTED);
  verbose_keys = true;

  /* the program: renaming the kernel changes the key */
  json_t *copy = json_deep_copy(x->doc);
  json_object_set_new(copy, "name", json_string("add_one_renamed"));
  char *text = json_dumps(copy, 0), *m;
  assert_int_equal(key_of(text, strlen(text), NULL, 0, "sm_80", NULL, k, &m), TL_OK);
  assert_string_not_equal(k, k0);
  free(m);
  free(text);
  json_decref(copy);

  /* tl_compile_key_as: with this compiler and the target's toolchain, the
   * key and manifest of tl_compile_key; another compiler's identity or
   * toolchain, the same manifest but for that line (and another key) */
  char *m0 = NULL, *ma = NULL;
  tl_define dd = {"block_n", "64"};
  assert_int_equal(key_of(x->text, x->len, &dd, 1, "sm_80", "{\"debug\": true}", k0, &m0), TL_OK);
  tl_compile_request req = {.program = x->text, .program_len = x->len, .defines = &dd, .ndefines = 1,
                            .target = "sm_80", .options_json = "{\"debug\": true}"};
  tl_diags dg = {.arena = tl_arena_new()};
  tl_error err;
  const char *desc = tl_compiler_target_toolchain("sm_80");
  assert_non_null(desc);
  assert_int_equal(tl_compile_key_as(&req, tl_compiler_id, desc, k, &ma, &dg, &err), TL_OK);
  assert_string_equal(k, k0);
  assert_string_equal(ma, m0);
  free(ma);
  assert_int_equal(tl_compile_key_as(&req, "tlc 0.0.9+0123456789abcdef", desc, k, &ma, &dg, &err), TL_OK);
  assert_string_not_equal(k, k0);
  assert_non_null(strstr(ma, "\ncompiler tlc 0.0.9+0123456789abcdef\n"));
  assert_string_equal(strstr(ma, "\ntoolchain "), strstr(m0, "\ntoolchain "));
  free(ma);
  assert_int_equal(tl_compile_key_as(&req, tl_compiler_id, "NVRTC 99.0 (elsewhere)", k, &ma, &dg, &err), TL_OK);
  assert_string_not_equal(k, k0);
  assert_non_null(strstr(ma, "\ntoolchain NVRTC 99.0 (elsewhere)\nbackend auto\ntarget sm_80\n"));
  free(ma);
  ma = NULL;
  /* ... and for a build the PTX back end made (auto: tilus_add_one is in its subset), the key of
   * tl_compile from its metadata's compiler, toolchain and back end asked for */
  tl_compile_request rq = {.program = x->text, .program_len = x->len, .target = "sm_80"};
  tl_build *b = NULL;
  assert_int_equal(tl_compile(&rq, &b, &dg, &err), TL_OK);
  json_t *bm = json_loads(b->meta, 0, NULL);
  json_t *ver = json_object_get(bm, "versions");
  if (strcmp(json_string_value(json_object_get(bm, "backend")), "ptx") != 0)
    print_message("built by %s here: %s\n", json_string_value(json_object_get(bm, "backend")),
                  json_string_value(json_object_get(bm, "backend_why_not_ptx")));
  rq.backend = json_string_value(json_object_get(bm, "backend_requested"));
  assert_string_equal(rq.backend, "auto");
  assert_int_equal(tl_compile_key_as(&rq, json_string_value(json_object_get(ver, "compiler")),
                                     json_string_value(json_object_get(ver, "toolchain")), k, &ma, &dg, &err),
                   TL_OK);
  assert_string_equal(k, b->key);
  assert_string_equal(ma, b->manifest);
  free(ma);
  ma = NULL;
  json_decref(bm);
  tl_build_free(b);
  assert_int_equal(tl_compile_key_as(&req, "two\nlines", desc, k, &ma, &dg, &err), TL_INVALID_ARG);
  req.target = "sm_1";
  assert_int_equal(tl_compile_key_as(&req, tl_compiler_id, desc, k, &ma, &dg, &err), TL_UNSUPPORTED);
  assert_null(ma);
  free(m0);
  tl_arena_free(dg.arena);
}

/* The parameter ABI (proto/kernel-meta.md): every scalar dtype and a
 * tensor, in program order, read back from the PTX's .entry and the
 * cubin's parameter bank; a grid over int64 and bool scalars. */
static const char abi_program[] =
    "{\"tlir\": 1, \"name\": \"abi\", \"params\": [\n"
    "  {\"name\": \"flag\", \"kind\": \"scalar\", \"dtype\": \"bool\"},\n"
    "  {\"name\": \"n\", \"kind\": \"scalar\", \"dtype\": \"int64\"},\n"
    "  {\"name\": \"x\", \"kind\": \"tensor\", \"dtype\": \"bfloat16\", \"shape\": [\"n\", 3], \"align\": 64},\n"
    "  {\"name\": \"s\", \"kind\": \"scalar\", \"dtype\": \"float32\"},\n"
    "  {\"name\": \"m\", \"kind\": \"scalar\", \"dtype\": \"int32\"}],\n"
    " \"kernel\": {\"grid\": [\"ceildiv(n, 256) * m\", \"if_then_else(flag, 2, 1)\", 3], \"threads\": [64, 2],\n"
    "            \"block_vars\": [\"bx\", \"by\", \"bz\"], \"body\": [\n"
    "   {\"op\": \"if\", \"cond\": \"bx * 256 < n\", \"then\": [\"x[bx * 256, by] = bfloat16(s * float32(m))\"]}]}}\n";

static void test_param_abi(void **state) {
  (void)state;
  NEED_NVRTC();
  example x = {"abi", (char *)abi_program, strlen(abi_program), json_loads(abi_program, 0, NULL)};
  assert_non_null(x.doc);
  outcome o;
  do_compile(&o, x.text, x.len, NULL, 0, "compute_80", NULL);
  if (o.st != TL_OK)
    fail_msg("abi for compute_80: %s: %s", tl_status_name(o.st), o.err.message);
  check_build(&x, NULL, 0, "compute_80", NULL, o.b);
  /* the .entry's parameter list, in order */
  char *ptx = strndup((const char *)o.b->binary, o.b->binary_size);
  const char *p = strstr(ptx, ".entry abi(");
  assert_non_null(p);
  static const char *const want[5][3] = {{".u8", ".s8", ".b8"},
                                         {".u64", ".s64", ".b64"},
                                         {".u64", ".b64", ".u64"},
                                         {".f32", ".f32", ".b32"},
                                         {".u32", ".s32", ".b32"}};
  for (int i = 0; i < 5; i++) {
    char name[32];
    snprintf(name, sizeof name, "abi_param_%d", i);
    const char *q = strstr(p, name);
    if (!q)
      fail_msg("the PTX entry has no %s", name);
    const char *line = q;
    while (line > p && line[-1] != '\n')
      line--;
    bool ok = false;
    for (int k = 0; k < 3; k++) {
      char t[48];
      snprintf(t, sizeof t, ".param %s %s", want[i][k], name);
      ok |= strncmp(line + strspn(line, " \t"), t, strlen(t)) == 0;
    }
    if (!ok)
      fail_msg("parameter %d: '%.*s' is not a %s", i, (int)strcspn(line, "\n"), line, want[i][0]);
  }
  assert_null(strstr(p, "abi_param_5"));
  free(ptx);
  outcome_free(&o);
  /* the cubin: bool at 0, int64 at 8, pointer at 16, float at 24, int32 at 28 */
  do_compile(&o, x.text, x.len, NULL, 0, "sm_80", NULL);
  assert_int_equal(o.st, TL_OK);
  check_build(&x, NULL, 0, "sm_80", NULL, o.b);
  tl_cubin_info ci;
  assert_int_equal(tl_cubin_inspect(o.b->binary, o.b->binary_size, &ci, NULL), TL_OK);
  const tl_cubin_kernel *k = tl_cubin_find(&ci, "abi");
  assert_non_null(k);
  if (k->param_bytes >= 0)
    assert_int_equal(k->param_bytes, 32);
  tl_cubin_info_free(&ci);
  outcome_free(&o);
  json_decref(x.doc);
}

/* An option that reaches the toolchain: max_registers caps the cubin's count. */
static void test_max_registers(void **state) {
  (void)state;
  NEED_NVRTC();
  const example *x = find_example("tilus_matmul");
  outcome o;
  do_compile(&o, x->text, x->len, NULL, 0, "sm_80", "{\"max_registers\": 64}");
  if (o.st != TL_OK)
    fail_msg("max_registers 64: %s: %s", tl_status_name(o.st), o.err.message);
  check_build(x, NULL, 0, "sm_80", "{\"max_registers\": 64}", o.b);
  tl_cubin_info ci;
  assert_int_equal(tl_cubin_inspect(o.b->binary, o.b->binary_size, &ci, NULL), TL_OK);
  const tl_cubin_kernel *k = tl_cubin_find(&ci, "tilus_matmul");
  assert_non_null(k);
  int registers = k->registers;
  tl_cubin_info_free(&ci);
  outcome_free(&o);
  print_message("tilus_matmul sm_80 with max_registers 64: %d registers\n", registers);
  assert_in_range(registers, 1, 64);
}

/* fast_compile reaches NVRTC as --Ofast-compile: each level gives a build
 * of its own, another cubin than the default one (NVRTC 13.0 schedules
 * even the one-line kernel differently). */
static void test_fast_compile(void **state) {
  (void)state;
  NEED_NVRTC();
  const example *x = find_example("tilus_add_one");
  outcome base;
  do_compile(&base, x->text, x->len, NULL, 0, "sm_80", NULL);
  assert_int_equal(base.st, TL_OK);
  static const char *const levels[] = {"{\"fast_compile\": \"min\"}", "{\"fast_compile\": \"mid\"}",
                                       "{\"fast_compile\": \"max\"}"};
  for (size_t i = 0; i < sizeof levels / sizeof *levels; i++) {
    outcome o;
    do_compile(&o, x->text, x->len, NULL, 0, "sm_80", levels[i]);
    if (o.st != TL_OK)
      fail_msg("%s: %s: %s", levels[i], tl_status_name(o.st), o.err.message);
    check_build(x, NULL, 0, "sm_80", levels[i], o.b);
    if (o.b->binary_size == base.b->binary_size && memcmp(o.b->binary, base.b->binary, o.b->binary_size) == 0)
      fail_msg("%s gave the default build's cubin: the option did not reach NVRTC", levels[i]);
    outcome_free(&o);
  }
  outcome_free(&base);
}

static void test_unknown_target(void **state) {
  (void)state;
  NEED_NVRTC();
  const example *x = find_example("tilus_add_one");
  static const char *const bad[] = {"sm_99", "sm_81", "gfx900", "sm_80x", "", "compute_99"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    outcome o;
    do_compile(&o, x->text, x->len, NULL, 0, bad[i], NULL);
    if (o.st != TL_UNSUPPORTED)
      fail_msg("target '%s': %s, not unsupported", bad[i], tl_status_name(o.st));
    assert_true(strlen(o.err.message) > 0);
    outcome_free(&o);
    assert_int_equal(key_fails(x->text, x->len, bad[i], NULL), TL_UNSUPPORTED);
  }
  outcome o;
  do_compile(&o, x->text, x->len, NULL, 0, NULL, NULL);
  assert_int_equal(o.st, TL_UNSUPPORTED);
  outcome_free(&o);
  /* every target offered is accepted by tl_compile_key */
  int n = 0;
  for (const char *const *t = targets; *t; t++, n++) {
    char k[65], *m;
    assert_int_equal(key_of(x->text, x->len, NULL, 0, *t, NULL, k, &m), TL_OK);
    free(m);
  }
  assert_true(n >= 2);
}

static void test_invalid_program(void **state) {
  (void)state;
  NEED_NVRTC();
  static const struct {
    const char *text, *pointer, *word;
  } cases[] = {
      /* a name that is not defined */
      {"{\"tlir\": 1, \"name\": \"k\", \"params\": [{\"name\": \"a\", \"kind\": \"tensor\", \"dtype\": \"float32\", "
       "\"shape\": [128]}], \"kernel\": {\"grid\": [1], \"threads\": 128, \"block_vars\": [\"bx\"], \"body\": ["
       "{\"op\": \"alloc_fragment\", \"name\": \"r\", \"shape\": [128], \"dtype\": \"float32\"},"
       "{\"op\": \"parallel\", \"vars\": [\"i\"], \"extents\": [128], \"body\": [\"r[i] = undefined_name\"]}]}}",
       "/kernel/body/1/body/0", "undefined_name"},
      /* gemm shapes that do not agree */
      {"{\"tlir\": 1, \"name\": \"k\", \"params\": [], \"kernel\": {\"grid\": [1], \"threads\": 128, "
       "\"block_vars\": [\"bx\"], \"body\": ["
       "{\"op\": \"alloc_shared\", \"name\": \"A\", \"shape\": [64, 32], \"dtype\": \"float16\"},"
       "{\"op\": \"alloc_shared\", \"name\": \"B\", \"shape\": [16, 64], \"dtype\": \"float16\"},"
       "{\"op\": \"alloc_fragment\", \"name\": \"C\", \"shape\": [64, 64], \"dtype\": \"float32\"},"
       "{\"op\": \"gemm\", \"A\": \"A\", \"B\": \"B\", \"C\": \"C\"}]}}",
       "/kernel/body/3", NULL},
      /* not a Tile IR program at all */
      {"[1, 2, 3]", "", NULL},
      {"{\"tlir\": 2, \"name\": \"k\", \"params\": [], \"kernel\": {\"grid\": [1], \"threads\": 32, "
       "\"block_vars\": [\"bx\"], \"body\": []}}",
       "/tlir", NULL},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    outcome o;
    do_compile(&o, cases[c].text, strlen(cases[c].text), NULL, 0, "sm_80", NULL);
    if (o.st != TL_BAD_PROGRAM)
      fail_msg("case %zu: %s, not invalid_program (%s)", c, tl_status_name(o.st), o.err.message);
    assert_true(o.diags.n >= 1);
    bool at = false, word = !cases[c].word;
    for (int i = 0; i < o.diags.n; i++) {
      assert_non_null(o.diags.items[i].pointer);
      assert_non_null(o.diags.items[i].message);
      at |= strncmp(o.diags.items[i].pointer, cases[c].pointer, strlen(cases[c].pointer)) == 0;
      word |= cases[c].word && strstr(o.diags.items[i].message, cases[c].word);
    }
    if (!at || !word) {
      print_diags(&o);
      fail_msg("case %zu: no diagnostic at %s%s%s", c, cases[c].pointer, cases[c].word ? " naming " : "",
               cases[c].word ? cases[c].word : "");
    }
    outcome_free(&o);
    /* tl_compile_key says the same */
    tl_diags d = {.arena = tl_arena_new()};
    tl_compile_request req = {.program = cases[c].text, .program_len = strlen(cases[c].text), .target = "sm_80"};
    char k[65], *m = NULL;
    assert_int_equal(tl_compile_key(&req, k, &m, &d, NULL), TL_BAD_PROGRAM);
    assert_null(m);
    assert_true(d.n >= 1);
    tl_arena_free(d.arena);
  }
  /* a define of a constant the program does not have */
  const example *x = find_example("gemm");
  tl_define d = {"no_such_constant", "1"};
  outcome o;
  do_compile(&o, x->text, x->len, &d, 1, "sm_80", NULL);
  assert_int_equal(o.st, TL_BAD_PROGRAM);
  assert_true(o.diags.n >= 1);
  outcome_free(&o);
}

static void test_malformed_json(void **state) {
  (void)state;
  NEED_NVRTC();
  static const char *const cases[] = {
      "{\"tlir\": 1, \"name\": ",
      "",
      "{\"tlir\": 1,\n \"name\": \"k\",\n \"params\": [}",
      "{\"tlir\": 1, \"name\": \"k\", \"name\": \"k2\"}", /* duplicate key */
      "not json at all",
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    outcome o;
    do_compile(&o, cases[c], strlen(cases[c]), NULL, 0, "sm_80", NULL);
    if (o.st != TL_BAD_JSON) {
      print_diags(&o);
      fail_msg("case %zu ('%s'): %s, not malformed_json", c, cases[c], tl_status_name(o.st));
    }
    assert_true(o.diags.n >= 1);
    assert_null(o.diags.items[0].pointer);
    assert_true(o.diags.items[0].line >= 1);
    outcome_free(&o);
  }
}

static void test_bad_options(void **state) {
  (void)state;
  NEED_NVRTC();
  const example *x = find_example("tilus_add_one");
  static const struct {
    const char *options, *word;
  } cases[] = {
      {"not json", NULL},
      {"[1]", NULL},
      {"42", NULL},
      {"{\"fast\": true}", "fast"},
      {"{\"max_registers\": 8}", "max_registers"},
      {"{\"max_registers\": 1000}", "max_registers"},
      {"{\"max_registers\": \"64\"}", "max_registers"},
      {"{\"debug\": 1}", "debug"},
      {"{\"fast_compile\": \"fast\"}", "fast_compile"},
      {"{\"fast_compile\": 1}", "fast_compile"},
      {"{\"fast_compile\": \"MIN\"}", "fast_compile"},
      {"{\"debug\": true, \"debug\": false}", NULL},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    outcome o;
    do_compile(&o, x->text, x->len, NULL, 0, "sm_80", cases[c].options);
    if (o.st != TL_INVALID_ARG)
      fail_msg("options %s: %s, not invalid_argument", cases[c].options, tl_status_name(o.st));
    if (cases[c].word && !strstr(o.err.message, cases[c].word))
      fail_msg("options %s: the message '%s' does not name '%s'", cases[c].options, o.err.message, cases[c].word);
    outcome_free(&o);
    assert_int_equal(key_fails(x->text, x->len, "sm_80", cases[c].options), TL_INVALID_ARG);
  }
}

/* flash_attention with dim = 256 (Q, K and V tiles of 64 KiB each) needs
 * more shared memory than an sm_86 block may have (99 KiB = 101376 bytes),
 * even with its probabilities in registers: TL_LIMIT, saying by how much.
 * (At its default sizes it fits, since P then stays in registers.) */
static void test_shared_memory_limit(void **state) {
  (void)state;
  NEED_NVRTC();
  const example *x = find_example("flash_attention");
  outcome o;
  tl_define big[] = {{"dim", "256"}};
  do_compile(&o, x->text, x->len, big, 1, "sm_86", NULL);
  if (o.st != TL_LIMIT)
    fail_msg("flash_attention for sm_86: %s, not limit_exceeded (%s)", tl_status_name(o.st), o.err.message);
  print_message("message: %s\n", o.err.message);
  assert_non_null(strstr(o.err.message, "sm_86"));
  assert_non_null(strstr(o.err.message, "bytes"));
  /* the numbers in the message: one is the limit, one what is needed, one
   * the difference */
  long long nums[16];
  int n = 0;
  for (const char *p = o.err.message; *p && n < 16; p++)
    if (isdigit((unsigned char)*p) && (p == o.err.message || !isalnum((unsigned char)p[-1]) ) &&
        !(p >= o.err.message + 3 && strncmp(p - 3, "sm_", 3) == 0)) {
      nums[n++] = strtoll(p, NULL, 10);
      while (isdigit((unsigned char)p[1]))
        p++;
    }
  bool limit = false, by = false;
  for (int i = 0; i < n; i++) {
    limit |= nums[i] == 101376;
    for (int j = 0; j < n; j++)
      by |= nums[i] > 101376 && nums[j] > 0 && nums[i] - 101376 == nums[j];
  }
  if (!limit || !by)
    fail_msg("the message does not give the limit (101376) and by how many bytes it is exceeded: %s", o.err.message);
  outcome_free(&o);
  /* tl_compile_key does not generate code, so it does not know yet */
  char k[65], *m;
  assert_int_equal(key_of(x->text, x->len, NULL, 0, "sm_86", NULL, k, &m), TL_OK);
  free(m);
}

/* Run in the child (TL_NVRTC pointing nowhere): the API says why. */
static void test_no_toolchain(void **state) {
  (void)state;
  assert_null(targets);
  assert_true(strlen(missing) > 0);
  const example *x = find_example("tilus_add_one");
  outcome o;
  do_compile(&o, x->text, x->len, NULL, 0, "sm_80", NULL);
  assert_int_equal(o.st, TL_NO_TOOLCHAIN);
  assert_true(strlen(o.err.message) > 0);
  outcome_free(&o);
  assert_int_equal(key_fails(x->text, x->len, "sm_80", NULL), TL_NO_TOOLCHAIN);
  tl_error err;
  const char *desc = NULL;
  if (tl_compiler_targets(&desc, &err)) { /* TL_NVRTC hidden, but clang or hiprtc is here */
    printf("skipping the no-toolchain-at-all part: an AMD toolchain is here (%s)\n", desc);
    skip();
  }
  assert_int_equal(err.code, TL_NO_TOOLCHAIN);
  printf("no toolchain, as expected: %s\n", err.message);
}

/* Runs this program again without NVRTC: every NVRTC test must skip with a
 * reason, and the API must answer TL_NO_TOOLCHAIN (test_no_toolchain). */
static void test_without_nvrtc(void **state) {
  (void)state;
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fd[1], 1);
    dup2(fd[1], 2);
    close(fd[0]);
    close(fd[1]);
    setenv("TL_NVRTC", "/nonexistent/libnvrtc.so.13", 1);
    setenv("TL_NVJITLINK", "/nonexistent/libnvJitLink.so.13", 1); /* nor the PTX back end's assembler */
    setenv("TL_CLANG", "/nonexistent/clang-19", 1); /* and no AMD toolchain: none at all */
    setenv("TL_HIPRTC", "/nonexistent/libhiprtc.so.6", 1);
    setenv(CHILD_ENV, "1", 1);
    execl("/proc/self/exe", "test_compile", (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  size_t cap = 1 << 20, n = 0;
  char *out = malloc(cap + 1);
  assert_non_null(out);
  for (ssize_t r; (r = read(fd[0], out + n, cap - n)) > 0;)
    n += (size_t)r;
  close(fd[0]);
  out[n] = 0;
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !strstr(out, "[  FAILED  ]") &&
               strstr(out, "no toolchain, as expected");
  int skipped = 0;
  for (const char *p = out; (p = strstr(p, "skipping: no NVRTC here")); p++)
    skipped++;
  if (!clean || skipped != NVRTC_TEST_COUNT)
    print_message("---- the child's output ----\n%s----\n", out);
  free(out);
  if (!clean)
    fail_msg("the run without NVRTC did not pass");
  print_message("without NVRTC: %d tests skipped with a reason\n", skipped);
  assert_int_equal(skipped, NVRTC_TEST_COUNT);
}

int main(void) {
  /* NVRTC tests: they skip when it is missing */
#define NVRTC_TESTS                                                                            \
  cmocka_unit_test(test_examples_compile), cmocka_unit_test(test_defines_compile),               \
      cmocka_unit_test(test_deterministic), cmocka_unit_test(test_key_ignores_formatting),       \
      cmocka_unit_test(test_key_changes), cmocka_unit_test(test_max_registers), cmocka_unit_test(test_fast_compile),                  \
      cmocka_unit_test(test_unknown_target), cmocka_unit_test(test_invalid_program),             \
      cmocka_unit_test(test_malformed_json), cmocka_unit_test(test_bad_options),                 \
      cmocka_unit_test(test_shared_memory_limit), cmocka_unit_test(test_param_abi),              \
      cmocka_unit_test(test_sm75), cmocka_unit_test(test_target_misfits)
  const struct CMUnitTest with_nvrtc[] = {NVRTC_TESTS, cmocka_unit_test(test_without_nvrtc)};
  const struct CMUnitTest without_nvrtc[] = {NVRTC_TESTS, cmocka_unit_test(test_no_toolchain)};
  /* Which list: the child always runs without; otherwise it depends on
   * whether NVRTC is here (then the child run covers the missing case). */
  if (sizeof with_nvrtc / sizeof with_nvrtc[0] != NVRTC_TEST_COUNT + 1) {
    fprintf(stderr, "test_compile: NVRTC_TEST_COUNT is out of date\n");
    return 1;
  }
  bool have = !getenv(CHILD_ENV) && tl_compiler_targets(NULL, NULL) != NULL && tl_compiler_target_toolchain("sm_80");
  if (have)
    return cmocka_run_group_tests(with_nvrtc, group_setup, group_teardown);
  return cmocka_run_group_tests(without_nvrtc, group_setup, group_teardown);
}
