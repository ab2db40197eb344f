/*
 * parse.c - JSON text to a parsed tl_program (stage 1 of docs/DESIGN.md section 3).
 *
 * Reads the document with jansson (duplicate keys and NaN/Infinity are
 * errors), then walks it once, building the IR of ir.h: symbols for
 * constants, parameters and allocations, statements with their regions and
 * expressions (parsed by expr.c).  It checks the document's structure: the
 * fields each object may and must have and their JSON types, the limits of
 * proto/tile-ir-v1.md, and identifiers.  Names are not resolved and nothing
 * is typed here: that is check.c's work.  Every error is collected with its
 * JSON Pointer; parsing goes on after an error so that one run reports them
 * all.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include "ir.h"

typedef struct {
  tl_arena *arena;
  tl_diags *diags;
  tl_program *prog;
  int nstmts;
} P;

#define ERR(ptr, ...) tl_diag_add(p->diags, (ptr), 0, __VA_ARGS__)

static const char *json_kind(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a real number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  case JSON_NULL: return "null";
  }
  return "a value";
}

/* ---- identifiers -------------------------------------------------------------- */
/* Reserved (proto/tile-ir-v1.md 7.5): every Python keyword and the
 * lowercase literals (tl_is_keyword), the first version's function names
 * and dtypes. */
static bool is_reserved(const char *s) {
  if (tl_is_keyword(s, strlen(s)))
    return true;
  tl_dtype t; /* the dtypes v1 started with; later ones and aliases are not reserved */
  if (tl_dtype_parse(s, &t) && tl_dtype_is_reserved(t) && strcmp(s, tl_dtype_name(t)) == 0)
    return true;
  for (int f = 1; f < FN_COUNT; f++)
    if (tl_fn_reserved((tl_fn)f) && strcmp(s, tl_fn_name((tl_fn)f)) == 0)
      return true;
  return false;
}

/* Checks an identifier; reports and returns false if it is not one. */
static bool check_ident(P *p, const char *s, const char *ptr, const char *what) {
  size_t n = strlen(s);
  bool ok = n > 0 && (s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z'));
  for (size_t i = 1; ok && i < n; i++)
    ok = s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
         (s[i] >= '0' && s[i] <= '9');
  if (!ok) {
    ERR(ptr, "%s '%s' is not an identifier (letters, digits and '_', not starting with a digit)", what, s);
    return false;
  }
  if (n > TL_MAX_NAME) {
    ERR(ptr, "%s is %zu characters long; the limit is %d", what, n, TL_MAX_NAME);
    return false;
  }
  if (is_reserved(s)) {
    ERR(ptr, "%s '%s' is a reserved word (a keyword, function or dtype name)", what, s);
    return false;
  }
  return true;
}

/* The kernel's symbol for program name s: s itself, or "tl_k_" + s when s
 * would not be one in the C++ that NVRTC and hiprtc compile: a C++
 * keyword or alternative token, `main`, a CUDA/HIP built-in variable, or a
 * name reserved to the implementation (`__x`, `_X`) or to the generated
 * code's helpers (`tl_`, `TL_`). */
static const char *kernel_symbol(tl_arena *a, const char *s) {
  static const char *const words[] = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
      "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
      "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default",
      "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false",
      "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new",
      "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected", "public",
      "register", "reinterpret_cast", "requires", "restrict", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true",
      "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
      "wchar_t", "while", "xor", "xor_eq", "main", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize",
      "half", "half2", "nv_bfloat16", "printf", "malloc", "free", "assert", NULL};
  bool bad = (s[0] == '_' && (s[1] == '_' || (s[1] >= 'A' && s[1] <= 'Z'))) || strncmp(s, "tl_", 3) == 0 ||
             strncmp(s, "TL_", 3) == 0;
  for (int i = 0; !bad && words[i]; i++)
    bad = strcmp(s, words[i]) == 0;
  return bad ? tl_arena_printf(a, "tl_k_%s", s) : s;
}

/* ---- fields of objects ---------------------------------------------------------- */
/* Reports every member of obj that is not in `allowed` (NULL-terminated)
 * and does not start with "x-". */
static void check_fields(P *p, json_t *obj, const char *ptr, const char *what, const char *const *allowed) {
  const char *key;
  json_t *v;
  int n = 0;
  while (allowed[n])
    n++;
  json_object_foreach(obj, key, v) {
    if (strncmp(key, "x-", 2) == 0)
      continue;
    bool known = false;
    for (int i = 0; i < n; i++)
      known |= strcmp(key, allowed[i]) == 0;
    if (known)
      continue;
    const char *hint = tl_closest(key, allowed, n);
    const char *kp = tl_ptr_key(p->arena, ptr, key);
    if (hint)
      ERR(kp, "unknown field '%s' in %s; did you mean '%s'?", key, what, hint);
    else {
      char list[512] = "";
      for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", allowed[i]);
      ERR(kp, "unknown field '%s' in %s; the fields are: %s (and any 'x-' field)", key, what, list);
    }
  }
}

static json_t *need(P *p, json_t *obj, const char *key, const char *ptr, const char *what) {
  json_t *v = json_object_get(obj, key);
  if (!v)
    ERR(ptr, "%s has no '%s' field", what, key);
  return v;
}

static const char *get_string(P *p, json_t *obj, const char *key, const char *ptr, const char *what,
                              bool required) {
  json_t *v = required ? need(p, obj, key, ptr, what) : json_object_get(obj, key);
  if (!v)
    return NULL;
  if (!json_is_string(v)) {
    ERR(tl_ptr_key(p->arena, ptr, key), "'%s' must be a string, not %s", key, json_kind(v));
    return NULL;
  }
  return tl_arena_strdup(p->arena, json_string_value(v));
}

/* An expression: a string in expression syntax, a JSON number or boolean. */
static tl_expr *expr_value(P *p, json_t *v, const char *ptr) {
  tl_expr *e;
  switch (json_typeof(v)) {
  case JSON_STRING:
    if (strlen(json_string_value(v)) != json_string_length(v)) {
      ERR(ptr, "expression contains a NUL character");
      return NULL;
    }
    return tl_parse_expr(p->arena, json_string_value(v), ptr, p->diags);
  case JSON_INTEGER:
    e = tl_arena_alloc(p->arena, sizeof *e);
    e->kind = E_CONST;
    e->type = TL_TY_UINT;
    e->val.i = json_integer_value(v);
    e->pointer = ptr;
    return e;
  case JSON_REAL:
    e = tl_arena_alloc(p->arena, sizeof *e);
    e->kind = E_CONST;
    e->type = TL_TY_UREAL;
    e->val.f = json_real_value(v);
    e->pointer = ptr;
    return e;
  case JSON_TRUE:
  case JSON_FALSE:
    e = tl_arena_alloc(p->arena, sizeof *e);
    e->kind = E_CONST;
    e->type = TL_BOOL;
    e->val.i = json_is_true(v);
    e->pointer = ptr;
    return e;
  default:
    ERR(ptr, "expected an expression (a string, number or boolean), found %s", json_kind(v));
    return NULL;
  }
}

static tl_expr *get_expr(P *p, json_t *obj, const char *key, const char *ptr, const char *what, bool required) {
  json_t *v = required ? need(p, obj, key, ptr, what) : json_object_get(obj, key);
  if (!v)
    return NULL;
  return expr_value(p, v, tl_ptr_key(p->arena, ptr, key));
}

/* A list of expressions (shape, grid, extents): 1..maxn entries. */
static int get_expr_list(P *p, json_t *v, const char *ptr, const char *what, int maxn, tl_expr **out) {
  if (!json_is_array(v)) {
    ERR(ptr, "%s must be a list, not %s", what, json_kind(v));
    return -1;
  }
  size_t n = json_array_size(v);
  if (n == 0 || n > (size_t)maxn) {
    ERR(ptr, "%s has %zu entries; it must have 1 to %d", what, n, maxn);
    return -1;
  }
  for (size_t i = 0; i < n; i++)
    out[i] = expr_value(p, json_array_get(v, i), tl_ptr_index(p->arena, ptr, (int)i));
  return (int)n;
}

static bool get_dtype(P *p, json_t *obj, const char *ptr, const char *what, tl_dtype *out) {
  const char *s = get_string(p, obj, "dtype", ptr, what, true);
  if (!s)
    return false;
  if (tl_dtype_parse(s, out))
    return true;
  const char *names[TL_DTYPE_COUNT];
  for (int i = 0; i < TL_DTYPE_COUNT; i++)
    names[i] = tl_dtype_name((tl_dtype)i);
  const char *hint = tl_closest(s, names, TL_DTYPE_COUNT);
  const char *dp = tl_ptr_key(p->arena, ptr, "dtype");
  if (hint)
    ERR(dp, "unknown dtype '%s'; did you mean '%s'?", s, hint);
  else
    ERR(dp, "unknown dtype '%s'; the dtypes are bool, int8, uint8, int16, uint16, int32, uint32, int64, "
            "uint64, float16, bfloat16, float32, float64, float8_e4m3, float8_e5m2, int4, uint4, int2, uint2, "
            "int1, uint1, float4_e2m1, float8_e8m0", s);
  return false;
}

static tl_sym *new_sym(P *p, const char *name, tl_sym_kind kind, const char *ptr) {
  tl_sym *s = tl_arena_alloc(p->arena, sizeof *s);
  s->name = name;
  s->kind = kind;
  s->pointer = ptr;
  s->slot = -1;
  s->param_index = -1;
  s->type = TL_TY_NONE;
  return s;
}

/* ---- statements -------------------------------------------------------------- */
static void parse_body(P *p, json_t *v, const char *ptr, tl_body *out, int depth);


static tl_region *get_region(P *p, json_t *obj, const char *key, const char *ptr, const char *what, bool required) {
  json_t *v = required ? need(p, obj, key, ptr, what) : json_object_get(obj, key);
  if (!v)
    return NULL;
  const char *rp = tl_ptr_key(p->arena, ptr, key);
  if (!json_is_string(v)) {
    ERR(rp, "'%s' must be a region string such as \"A\" or \"A[i, j]\", not %s", key, json_kind(v));
    return NULL;
  }
  return tl_parse_region(p->arena, tl_arena_strdup(p->arena, json_string_value(v)), rp, p->diags);
}

static tl_expr *get_flag(P *p, json_t *obj, const char *key, const char *ptr) {
  json_t *v = json_object_get(obj, key);
  if (!v)
    return NULL;
  const char *fp = tl_ptr_key(p->arena, ptr, key);
  if (!json_is_boolean(v) && !json_is_string(v)) {
    ERR(fp, "'%s' must be true or false, not %s", key, json_kind(v));
    return NULL;
  }
  return expr_value(p, v, fp);
}

static tl_expr *get_int_field(P *p, json_t *obj, const char *key, const char *ptr, bool required, const char *what) {
  json_t *v = required ? need(p, obj, key, ptr, what) : json_object_get(obj, key);
  if (!v)
    return NULL;
  const char *fp = tl_ptr_key(p->arena, ptr, key);
  if (!json_is_integer(v) && !json_is_string(v)) {
    ERR(fp, "'%s' must be an integer or a constant expression, not %s", key, json_kind(v));
    return NULL;
  }
  return expr_value(p, v, fp);
}

static tl_layout *parse_layout(P *p, json_t *v, const char *ptr) {
  tl_layout *l = tl_arena_alloc(p->arena, sizeof *l);
  l->pointer = ptr;
  if (json_is_string(v)) {
    if (strcmp(json_string_value(v), "swizzle") != 0) {
      ERR(ptr, "a layout is \"swizzle\" or {\"vars\": [...], \"index\": [...]}, not \"%s\"", json_string_value(v));
      return NULL;
    }
    l->swizzle = true;
    return l;
  }
  if (!json_is_object(v)) {
    ERR(ptr, "a layout is \"swizzle\" or {\"vars\": [...], \"index\": [...]}, not %s", json_kind(v));
    return NULL;
  }
  static const char *const fields[] = {"vars", "index", NULL};
  check_fields(p, v, ptr, "a layout map", fields);
  json_t *vars = need(p, v, "vars", ptr, "a layout map");
  json_t *index = need(p, v, "index", ptr, "a layout map");
  if (!vars || !index)
    return NULL;
  const char *vp = tl_ptr_key(p->arena, ptr, "vars");
  if (!json_is_array(vars) || json_array_size(vars) == 0 || json_array_size(vars) > TL_MAX_DIMS) {
    ERR(vp, "'vars' must be a list of 1 to %d names", TL_MAX_DIMS);
    return NULL;
  }
  l->nvars = (int)json_array_size(vars);
  l->vars = tl_arena_alloc(p->arena, sizeof(tl_sym *) * (size_t)l->nvars);
  for (int i = 0; i < l->nvars; i++) {
    json_t *n = json_array_get(vars, (size_t)i);
    const char *np = tl_ptr_index(p->arena, vp, i);
    if (!json_is_string(n)) {
      ERR(np, "a layout variable must be a name, not %s", json_kind(n));
      return NULL;
    }
    const char *name = tl_arena_strdup(p->arena, json_string_value(n));
    if (!check_ident(p, name, np, "layout variable"))
      return NULL;
    l->vars[i] = new_sym(p, name, SYM_LOOP_VAR, np);
    l->vars[i]->type = TL_INT32;
  }
  l->index = tl_arena_alloc(p->arena, sizeof(tl_expr *) * TL_MAX_DIMS);
  l->nindex = get_expr_list(p, index, tl_ptr_key(p->arena, ptr, "index"), "'index'", TL_MAX_DIMS, l->index);
  return l->nindex < 0 ? NULL : l;
}

/* s's reduce_type from its "type" (the index of reduce_type_name in names,
 * n of them); an error naming `what` and listing `list` if none. */
static bool reduce_type(P *p, tl_stmt *s, const char *ptr, const char *const *names, int n, const char *what,
                        const char *list) {
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], s->reduce_type_name) == 0) {
      s->reduce_type = (tl_reduce_type)i;
      return true;
    }
  ERR(tl_ptr_key(p->arena, ptr, "type"), "unknown %s '%s'; it is %s", what, s->reduce_type_name, list);
  return false;
}

static tl_stmt *parse_stmt(P *p, json_t *v, const char *ptr, int depth) {
  if (++p->nstmts > TL_MAX_STMTS) {
    if (p->nstmts == TL_MAX_STMTS + 1)
      ERR(ptr, "the program has more than %d statements", TL_MAX_STMTS);
    return NULL;
  }
  tl_stmt *s = tl_arena_alloc(p->arena, sizeof *s);
  s->pointer = ptr;
  if (json_is_string(v)) {
    s->kind = S_ASSIGN;
    s->op_name = "assignment";
    if (!tl_parse_assign(p->arena, tl_arena_strdup(p->arena, json_string_value(v)), ptr, p->diags, &s->lhs,
                         &s->assign_op, &s->value))
      return NULL;
    return s;
  }
  if (!json_is_object(v)) {
    ERR(ptr, "a statement is an object with an \"op\" field or an assignment string, not %s", json_kind(v));
    return NULL;
  }
  json_t *opv = json_object_get(v, "op");
  if (!opv) {
    ERR(ptr, "statement has no 'op' field");
    return NULL;
  }
  if (!json_is_string(opv)) {
    ERR(tl_ptr_key(p->arena, ptr, "op"), "'op' must be a string, not %s", json_kind(opv));
    return NULL;
  }
  const char *op = json_string_value(opv);
  int id = tl_stmt_op_lookup(op);
  if (id < 0) {
    const char *names[TL_STMT_OP_COUNT];
    for (int i = 0; i < TL_STMT_OP_COUNT; i++)
      names[i] = tl_stmt_ops[i].name;
    const char *hint = tl_closest(op, names, TL_STMT_OP_COUNT);
    if (hint)
      ERR(tl_ptr_key(p->arena, ptr, "op"), "unknown op '%s'; did you mean '%s'?", op, hint);
    else
      ERR(tl_ptr_key(p->arena, ptr, "op"), "unknown op '%s'", op);
    return NULL;
  }
  const tl_stmt_op_info *of = &tl_stmt_ops[id];
  s->kind = of->kind;
  s->op_name = of->name;
  const char *what = tl_arena_printf(p->arena, "'%s'", of->name);
  check_fields(p, v, ptr, what, of->fields);
  switch (s->kind) {
  case S_ALLOC: {
    const char *name = get_string(p, v, "name", ptr, what, true);
    tl_dtype dt = TL_FLOAT32;
    bool okd = get_dtype(p, v, ptr, what, &dt);
    json_t *shape = need(p, v, "shape", ptr, what);
    if (!name || !check_ident(p, name, tl_ptr_key(p->arena, ptr, "name"), "buffer name"))
      return NULL;
    tl_sym *b = new_sym(p, name, SYM_BUFFER, ptr);
    b->dtype = dt;
    b->scope = id == OP_ALLOC_SHARED ? SCOPE_SHARED : id == OP_ALLOC_FRAGMENT ? SCOPE_FRAGMENT : SCOPE_LOCAL;
    if (shape) {
      b->ndim = get_expr_list(p, shape, tl_ptr_key(p->arena, ptr, "shape"), "'shape'", TL_MAX_DIMS, b->shape);
      if (b->ndim < 0)
        return NULL;
    }
    s->sym = b;
    return okd && shape ? s : NULL;
  }
  case S_VIEW: {
    const char *name = get_string(p, v, "name", ptr, what, true);
    s->view_src = get_string(p, v, "src", ptr, what, true);
    tl_dtype dt = TL_FLOAT32;
    s->view_keep_dtype = !json_object_get(v, "dtype");
    bool okd = s->view_keep_dtype || get_dtype(p, v, ptr, what, &dt);
    json_t *shape = json_object_get(v, "shape");
    s->view_keep_shape = !shape;
    if (!name || !check_ident(p, name, tl_ptr_key(p->arena, ptr, "name"), "view name") || !s->view_src)
      return NULL;
    tl_sym *b = new_sym(p, name, SYM_BUFFER, ptr);
    b->dtype = dt;
    if (shape) {
      b->ndim = get_expr_list(p, shape, tl_ptr_key(p->arena, ptr, "shape"), "'shape'", TL_MAX_DIMS, b->shape);
      if (b->ndim < 0)
        return NULL;
    }
    s->sym = b;
    return okd ? s : NULL;
  }
  case S_ALLOC_VAR: {
    const char *name = get_string(p, v, "name", ptr, what, true);
    tl_dtype dt = TL_INT32;
    bool okd = get_dtype(p, v, ptr, what, &dt);
    s->value = get_expr(p, v, "init", ptr, what, false);
    if (!name || !check_ident(p, name, tl_ptr_key(p->arena, ptr, "name"), "variable name") || !okd)
      return NULL;
    s->sym = new_sym(p, name, SYM_VAR, ptr);
    s->sym->dtype = dt;
    s->sym->type = (tl_type)dt;
    s->sym->init = s->value;
    return s;
  }
  case S_LET: {
    const char *name = get_string(p, v, "name", ptr, what, true);
    s->value = get_expr(p, v, "value", ptr, what, true);
    if (!name || !check_ident(p, name, tl_ptr_key(p->arena, ptr, "name"), "name") || !s->value)
      return NULL;
    s->sym = new_sym(p, name, SYM_LET, ptr);
    s->sym->init = s->value;
    return s;
  }
  case S_COPY: {
    s->src = get_region(p, v, "src", ptr, what, true);
    s->dst = get_region(p, v, "dst", ptr, what, true);
    s->raw.tma = get_flag(p, v, "tma", ptr);
    const char *ev = get_string(p, v, "eviction_policy", ptr, what, false);
    if (ev) {
      static const char *const names[] = TL_EVICT_NAMES;
      int k = 0;
      while (k < 3 && strcmp(ev, names[k]))
        k++;
      if (k < 3)
        s->evict = (tl_evict)k;
      else
        ERR(tl_ptr_key(p->arena, ptr, "eviction_policy"),
            "unknown eviction policy '%s'; it is \"evict_normal\", \"evict_first\" or \"evict_last\"", ev);
    }
    return s->src && s->dst ? s : NULL;
  }
  case S_FILL: {
    s->dst = get_region(p, v, "dst", ptr, what, true);
    if (id == OP_FILL)
      s->value = get_expr(p, v, "value", ptr, what, true);
    else {
      s->value = tl_arena_alloc(p->arena, sizeof(tl_expr));
      s->value->kind = E_CONST;
      s->value->type = TL_TY_UINT;
      s->value->pointer = ptr;
    }
    return s->dst && s->value ? s : NULL;
  }
  case S_GEMM: {
    s->a_name = get_string(p, v, "A", ptr, what, true);
    s->b_name = get_string(p, v, "B", ptr, what, true);
    s->c_name = get_string(p, v, "C", ptr, what, true);
    s->raw.trans_a = get_flag(p, v, "transpose_A", ptr);
    s->raw.trans_b = get_flag(p, v, "transpose_B", ptr);
    s->raw.clear_accum = get_flag(p, v, "clear_accum", ptr);
    s->raw.k_pack = get_int_field(p, v, "k_pack", ptr, false, what);
    s->policy_name = get_string(p, v, "policy", ptr, what, false);
    s->k_pack = 1;
    if (s->policy_name) {
      if (strcmp(s->policy_name, "square") == 0)
        s->policy = POLICY_SQUARE;
      else if (strcmp(s->policy_name, "full_row") == 0)
        s->policy = POLICY_FULL_ROW;
      else if (strcmp(s->policy_name, "full_col") == 0)
        s->policy = POLICY_FULL_COL;
      else
        ERR(tl_ptr_key(p->arena, ptr, "policy"), "unknown gemm policy '%s'; it is \"square\", \"full_row\" or \"full_col\"",
            s->policy_name);
    }
    return s->a_name && s->b_name && s->c_name ? s : NULL;
  }
  case S_REDUCE: {
    s->reduce_type_name = get_string(p, v, "type", ptr, what, true);
    s->src = get_region(p, v, "src", ptr, what, true);
    s->dst = get_region(p, v, "dst", ptr, what, true);
    s->raw.dim = get_int_field(p, v, "dim", ptr, true, what);
    s->raw.clear = get_flag(p, v, "clear", ptr);
    s->clear = true;
    static const char *const types[] = {[RED_SUM] = "sum",       [RED_MAX] = "max",     [RED_MIN] = "min",
                                        [RED_ABSSUM] = "abssum", [RED_ABSMAX] = "absmax", [RED_BITAND] = "bitand",
                                        [RED_BITOR] = "bitor",   [RED_BITXOR] = "bitxor"};
    if (s->reduce_type_name && !reduce_type(p, s, ptr, types, 8, "reduction", "\"sum\", \"max\", \"min\", "
                                            "\"abssum\", \"absmax\", \"bitand\", \"bitor\" or \"bitxor\""))
      return NULL;
    return s->reduce_type_name && s->src && s->dst && s->raw.dim ? s : NULL;
  }
  case S_CLUSTER_REDUCE: {
    s->reduce_type_name = get_string(p, v, "type", ptr, what, true);
    s->dst = get_region(p, v, "dst", ptr, what, true);
    static const char *const ctypes[] = {[RED_SUM] = "sum", [RED_MAX] = "max", [RED_MIN] = "min"};
    if (s->reduce_type_name && !reduce_type(p, s, ptr, ctypes, 3, "cluster reduction", "\"sum\", \"max\" or \"min\""))
      return NULL;
    return s->reduce_type_name && s->dst ? s : NULL;
  }
  case S_CUMSUM: {
    s->src = get_region(p, v, "src", ptr, what, true);
    s->dst = get_region(p, v, "dst", ptr, what, true);
    s->raw.dim = get_int_field(p, v, "dim", ptr, true, what);
    s->raw.reverse = get_flag(p, v, "reverse", ptr);
    s->reduce_type = id == OP_CUMMAX ? RED_MAX : id == OP_CUMMIN ? RED_MIN : RED_SUM;
    return s->src && s->dst && s->raw.dim ? s : NULL;
  }
  case S_ATOMIC_ADD: {
    s->dst = get_region(p, v, "dst", ptr, what, true);
    bool has_src = json_object_get(v, "src"), has_value = json_object_get(v, "value");
    if (has_src == has_value) {
      ERR(ptr, "'atomic_add' needs exactly one of 'src' (a region) and 'value' (an expression)");
      return NULL;
    }
    if (has_src)
      s->src = get_region(p, v, "src", ptr, what, true);
    else
      s->value = get_expr(p, v, "value", ptr, what, true);
    return s->dst && (s->src || s->value) ? s : NULL;
  }
  case S_PARALLEL: {
    json_t *vars = need(p, v, "vars", ptr, what);
    json_t *ext = need(p, v, "extents", ptr, what);
    json_t *body = need(p, v, "body", ptr, what);
    if (!vars || !ext || !body)
      return NULL;
    const char *vp = tl_ptr_key(p->arena, ptr, "vars");
    if (!json_is_array(vars) || json_array_size(vars) == 0 || json_array_size(vars) > TL_MAX_DIMS) {
      ERR(vp, "'vars' must be a list of 1 to %d names", TL_MAX_DIMS);
      return NULL;
    }
    s->nvars = (int)json_array_size(vars);
    s->vars = tl_arena_alloc(p->arena, sizeof(tl_sym *) * (size_t)s->nvars);
    bool ok = true;
    for (int i = 0; i < s->nvars; i++) {
      json_t *n = json_array_get(vars, (size_t)i);
      const char *np = tl_ptr_index(p->arena, vp, i);
      if (!json_is_string(n)) {
        ERR(np, "a loop variable must be a name, not %s", json_kind(n));
        ok = false;
        continue;
      }
      const char *name = tl_arena_strdup(p->arena, json_string_value(n));
      ok &= check_ident(p, name, np, "loop variable");
      s->vars[i] = new_sym(p, name, SYM_LOOP_VAR, np);
      s->vars[i]->type = TL_INT32;
    }
    s->extents = tl_arena_alloc(p->arena, sizeof(tl_expr *) * TL_MAX_DIMS);
    const char *ep = tl_ptr_key(p->arena, ptr, "extents");
    int ne = get_expr_list(p, ext, ep, "'extents'", TL_MAX_DIMS, s->extents);
    if (ne >= 0 && ne != s->nvars) {
      ERR(ep, "'extents' has %d entries but 'vars' has %d; give one extent per variable", ne, s->nvars);
      ok = false;
    }
    parse_body(p, body, tl_ptr_key(p->arena, ptr, "body"), &s->body, depth);
    return ok && ne == s->nvars ? s : NULL;
  }
  case S_LOOP: {
    s->loop_kind = id == OP_PIPELINED ? LOOP_PIPELINED : id == OP_SERIAL ? LOOP_SERIAL : id == OP_UNROLL ? LOOP_UNROLL
                                                                                                   : LOOP_VECTORIZED;
    const char *name = get_string(p, v, "var", ptr, what, true);
    s->extent = get_expr(p, v, "extent", ptr, what, true);
    s->start = get_expr(p, v, "start", ptr, what, false);
    if (s->loop_kind != LOOP_PIPELINED)
      s->step = get_expr(p, v, "step", ptr, what, false);
    json_t *body = need(p, v, "body", ptr, what);
    bool ok = name && check_ident(p, name, tl_ptr_key(p->arena, ptr, "var"), "loop variable") && s->extent;
    if (name) {
      s->var = new_sym(p, name, SYM_LOOP_VAR, tl_ptr_key(p->arena, ptr, "var"));
      s->var->type = TL_INT32;
    }
    if (s->loop_kind == LOOP_PIPELINED) {
      s->raw.num_stages = get_int_field(p, v, "num_stages", ptr, false, what);
      s->raw.tma = get_flag(p, v, "tma", ptr);
      s->raw.wspec = get_flag(p, v, "warp_specialize", ptr);
      s->raw.overlap = get_flag(p, v, "overlap", ptr);
      s->raw.pingpong = get_flag(p, v, "pingpong", ptr);
      s->raw.k_group = get_int_field(p, v, "k_group", ptr, false, what);
      s->raw.slices = get_int_field(p, v, "slices", ptr, false, what);
      json_t *cl = json_object_get(v, "cluster");
      if (cl) {
        int n = get_expr_list(p, cl, tl_ptr_key(p->arena, ptr, "cluster"), "'cluster'", 3, s->raw.cluster);
        if (n > 0)
          s->ncl_req = n;
        else
          ok = false;
      }
      for (int which = 0; which < 2; which++) {
        const char *key = which ? "stage" : "order";
        json_t *l = json_object_get(v, key);
        if (!l)
          continue;
        const char *lp = tl_ptr_key(p->arena, ptr, key);
        if (!json_is_array(l) || json_array_size(l) > TL_MAX_STMTS) {
          ERR(lp, "'%s' must be a list of integers, one per body statement", key);
          ok = false;
          continue;
        }
        int n = (int)json_array_size(l);
        int64_t *vals = tl_arena_alloc(p->arena, sizeof(int64_t) * (size_t)(n + 1));
        for (int i = 0; i < n; i++) {
          json_t *x = json_array_get(l, (size_t)i);
          if (!json_is_integer(x)) {
            ERR(tl_ptr_index(p->arena, lp, i), "'%s' entries must be integers, not %s", key, json_kind(x));
            ok = false;
          } else
            vals[i] = json_integer_value(x);
        }
        if (which)
          s->stage = vals;
        else
          s->order = vals;
        if (s->norder && s->norder != n) {
          ERR(lp, "'order' and 'stage' must have the same length");
          ok = false;
        }
        s->norder = n;
      }
    }
    if (body)
      parse_body(p, body, tl_ptr_key(p->arena, ptr, "body"), &s->body, depth);
    return ok && body ? s : NULL;
  }
  case S_IF: {
    s->value = get_expr(p, v, "cond", ptr, what, true);
    json_t *then = need(p, v, "then", ptr, what);
    if (then)
      parse_body(p, then, tl_ptr_key(p->arena, ptr, "then"), &s->body, depth);
    json_t *els = json_object_get(v, "else");
    if (els) {
      s->has_else = true;
      parse_body(p, els, tl_ptr_key(p->arena, ptr, "else"), &s->else_body, depth);
    }
    return s->value && then ? s : NULL;
  }
  case S_ANNOTATE_LAYOUT: {
    json_t *ls = need(p, v, "layouts", ptr, what);
    if (!ls)
      return NULL;
    const char *lp = tl_ptr_key(p->arena, ptr, "layouts");
    const char *key;
    json_t *lv;
    size_t n = 0; /* entries other than the ignored x- keys */
    if (json_is_object(ls))
      json_object_foreach(ls, key, lv) n += strncmp(key, "x-", 2) != 0;
    if (!json_is_object(ls) || n == 0) {
      ERR(lp, "'layouts' must be a non-empty object mapping buffer names to layouts");
      return NULL;
    }
    s->layout_names = tl_arena_alloc(p->arena, sizeof(char *) * n);
    s->layouts = tl_arena_alloc(p->arena, sizeof(tl_layout *) * n);
    s->layout_syms = tl_arena_alloc(p->arena, sizeof(tl_sym *) * n);
    bool ok = true;
    json_object_foreach(ls, key, lv) {
      if (strncmp(key, "x-", 2) == 0)
        continue; /* ignored, as x- fields are everywhere */
      const char *kp = tl_ptr_key(p->arena, lp, key);
      s->layout_names[s->nlayouts] = tl_arena_strdup(p->arena, key);
      s->layouts[s->nlayouts] = parse_layout(p, lv, kp);
      ok &= s->layouts[s->nlayouts] != NULL;
      s->nlayouts++;
    }
    return ok ? s : NULL;
  }
  case S_USE_SWIZZLE: {
    s->panel_size = get_int_field(p, v, "panel_size", ptr, true, what);
    s->order_name = get_string(p, v, "order", ptr, what, false);
    s->raw.enable = get_flag(p, v, "enable", ptr);
    s->enable = true;
    if (s->order_name) {
      if (strcmp(s->order_name, "column") == 0)
        s->order_column = true;
      else if (strcmp(s->order_name, "row") != 0)
        ERR(tl_ptr_key(p->arena, ptr, "order"), "'order' is \"row\" or \"column\", not \"%s\"", s->order_name);
    }
    return s->panel_size ? s : NULL;
  }
  case S_ATOMIC: {
    static const char *const kinds[] = {[TL_ATOMIC_ADD] = "add", [TL_ATOMIC_MAX] = "max", [TL_ATOMIC_MIN] = "min"};
    s->atomic_name = get_string(p, v, "type", ptr, what, true);
    s->lhs = get_expr(p, v, "dst", ptr, what, true);
    s->value = get_expr(p, v, "value", ptr, what, true);
    const char *old = get_string(p, v, "old", ptr, what, false);
    for (int k = TL_ATOMIC_ADD; s->atomic_name && k <= TL_ATOMIC_MIN; k++)
      if (strcmp(s->atomic_name, kinds[k]) == 0)
        s->atomic = (tl_atomic_kind)k;
    if (s->atomic_name && !s->atomic)
      ERR(tl_ptr_key(p->arena, ptr, "type"), "'type' of 'atomic' is \"add\", \"max\" or \"min\", not \"%s\"",
          s->atomic_name);
    if (s->lhs && s->lhs->kind != E_INDEX) {
      ERR(tl_ptr_key(p->arena, ptr, "dst"), "the 'dst' of 'atomic' is one element of a buffer, 'name[i, ...]'");
      return NULL;
    }
    if (old) {
      if (!check_ident(p, old, tl_ptr_key(p->arena, ptr, "old"), "name"))
        return NULL;
      s->sym = new_sym(p, old, SYM_LET, ptr);
    }
    return s->atomic && s->lhs && s->value ? s : NULL;
  }
  case S_PRINT:
  case S_ASSERT: {
    if (s->kind == S_ASSERT)
      s->value = get_expr(p, v, "cond", ptr, what, true);
    else if (json_object_get(v, "value"))
      s->value = get_expr(p, v, "value", ptr, what, true);
    s->msg = get_string(p, v, "msg", ptr, what, false);
    const char *mp = tl_ptr_key(p->arena, ptr, "msg");
    size_t n = s->msg ? strlen(s->msg) : 0;
    for (size_t i = 0; i < n; i++)
      if (s->msg[i] < ' ' || s->msg[i] > '~') {
        ERR(mp, "'msg' holds printable ASCII only (character %zu is not)", i + 1);
        return NULL;
      }
    if (n > TL_MAX_MSG) {
      ERR(mp, "'msg' is %zu characters long; the limit is %d", n, TL_MAX_MSG);
      return NULL;
    }
    return s->kind == S_PRINT || s->value ? s : NULL;
  }
  case S_SYNC_THREADS:
    s->raw.fence = get_flag(p, v, "fence", ptr);
    break;
  case S_ASSIGN:
    break;
  }
  return s;
}

static void parse_body(P *p, json_t *v, const char *ptr, tl_body *out, int depth) {
  if (depth + 1 > TL_MAX_STMT_DEPTH) {
    ERR(ptr, "statements are nested too deeply (the limit is %d levels)", TL_MAX_STMT_DEPTH);
    return;
  }
  if (!json_is_array(v)) {
    ERR(ptr, "a body must be a list of statements, not %s", json_kind(v));
    return;
  }
  size_t n = json_array_size(v);
  tl_vec items = {0};
  for (size_t i = 0; i < n; i++) {
    tl_stmt *s = parse_stmt(p, json_array_get(v, i), tl_ptr_index(p->arena, ptr, (int)i), depth + 1);
    if (s)
      tl_vec_push(p->arena, &items, s);
  }
  out->n = items.n;
  out->items = (tl_stmt **)items.items;
}

/* ---- top level -------------------------------------------------------------- */
static void parse_constants(P *p, json_t *v) {
  if (!json_is_object(v)) {
    ERR("/constants", "'constants' must be an object mapping names to values, not %s", json_kind(v));
    return;
  }
  /* keys starting with "x-" are ignored, as x- fields are everywhere
   * (TILE-IR.md 1; proto/tile-ir-v1.md 1.4) */
  const char *key;
  json_t *val;
  size_t n = 0;
  json_object_foreach(v, key, val) n += strncmp(key, "x-", 2) != 0;
  if (n > TL_MAX_CONSTANTS) {
    ERR("/constants", "the program has %zu constants; the limit is %d", n, TL_MAX_CONSTANTS);
    return;
  }
  p->prog->consts = tl_arena_alloc(p->arena, sizeof(tl_sym *) * (n + 1));
  json_object_foreach(v, key, val) {
    if (strncmp(key, "x-", 2) == 0)
      continue;
    const char *cp = tl_ptr_key(p->arena, "/constants", key);
    const char *name = tl_arena_strdup(p->arena, key);
    if (!check_ident(p, name, cp, "constant name"))
      continue;
    tl_sym *c = new_sym(p, name, SYM_CONST, cp);
    c->init = expr_value(p, val, cp);
    if (!c->init)
      continue;
    p->prog->consts[p->prog->nconsts++] = c;
  }
}

static void parse_params(P *p, json_t *v) {
  if (!json_is_array(v)) {
    ERR("/params", "'params' must be a list, not %s", json_kind(v));
    return;
  }
  size_t n = json_array_size(v);
  if (n > TL_MAX_PARAMS) {
    ERR("/params", "the kernel has %zu parameters; the limit is %d", n, TL_MAX_PARAMS);
    return;
  }
  p->prog->params = tl_arena_alloc(p->arena, sizeof(tl_sym *) * (n + 1));
  for (size_t i = 0; i < n; i++) {
    json_t *pv = json_array_get(v, i);
    const char *pp = tl_ptr_index(p->arena, "/params", (int)i);
    if (!json_is_object(pv)) {
      ERR(pp, "a parameter must be an object, not %s", json_kind(pv));
      continue;
    }
    const char *kind = get_string(p, pv, "kind", pp, "a parameter", true);
    bool tensor = kind && strcmp(kind, "tensor") == 0;
    if (kind && !tensor && strcmp(kind, "scalar") != 0) {
      ERR(tl_ptr_key(p->arena, pp, "kind"), "a parameter's kind is \"tensor\" or \"scalar\", not \"%s\"", kind);
      continue;
    }
    if (!kind)
      continue;
    static const char *const tfields[] = {"name", "kind", "dtype", "shape", "align", NULL};
    static const char *const sfields[] = {"name", "kind", "dtype", NULL};
    check_fields(p, pv, pp, tensor ? "a tensor parameter" : "a scalar parameter", tensor ? tfields : sfields);
    const char *name = get_string(p, pv, "name", pp, "a parameter", true);
    tl_dtype dt = TL_INT32;
    bool okd = get_dtype(p, pv, pp, "a parameter", &dt);
    if (!name || !check_ident(p, name, tl_ptr_key(p->arena, pp, "name"), "parameter name"))
      continue;
    tl_sym *s = new_sym(p, name, tensor ? SYM_TENSOR : SYM_SCALAR, pp);
    s->dtype = dt;
    s->param_index = (int)i;
    if (tensor) {
      s->scope = SCOPE_GLOBAL;
      s->align = 16;
      json_t *shape = need(p, pv, "shape", pp, "a tensor parameter");
      if (shape)
        s->ndim = get_expr_list(p, shape, tl_ptr_key(p->arena, pp, "shape"), "'shape'", TL_MAX_DIMS, s->shape);
      if (!shape || s->ndim < 0)
        continue;
      json_t *al = json_object_get(pv, "align");
      if (al) {
        json_int_t a = json_is_integer(al) ? json_integer_value(al) : 0;
        if (a <= 0 || (a & (a - 1)) != 0 || a > 4096) {
          ERR(tl_ptr_key(p->arena, pp, "align"), "'align' must be a power of two from 1 to 4096 (bytes)");
          continue;
        }
        s->align = a;
      }
    } else if (okd && dt != TL_INT32 && dt != TL_INT64 && dt != TL_FLOAT32 && dt != TL_BOOL) {
      ERR(tl_ptr_key(p->arena, pp, "dtype"), "a scalar parameter is int32, int64, float32 or bool, not %s",
          tl_dtype_name(dt));
      continue;
    }
    if (!okd)
      continue;
    s->type = (tl_type)dt;
    p->prog->params[p->prog->nparams++] = s;
  }
}

/* "workspaces": global buffers that are not parameters (proto/tile-ir-v1.md
 * 3.1), appended to params after the parameters as tensors marked
 * .workspace, so that every stage after this one sees them as tensors. */
static void parse_workspaces(P *p, json_t *v) {
  if (!json_is_array(v) || json_array_size(v) > TL_MAX_WORKSPACES) {
    ERR("/workspaces", "'workspaces' must be a list of at most %d workspace buffers", TL_MAX_WORKSPACES);
    return;
  }
  tl_program *prog = p->prog;
  size_t n = json_array_size(v);
  tl_sym **all = tl_arena_alloc(p->arena, sizeof(tl_sym *) * ((size_t)prog->nparams + n + 1));
  for (int i = 0; i < prog->nparams; i++)
    all[i] = prog->params[i];
  prog->params = all;
  for (size_t i = 0; i < n; i++) {
    json_t *wv = json_array_get(v, i);
    const char *wp = tl_ptr_index(p->arena, "/workspaces", (int)i);
    if (!json_is_object(wv)) {
      ERR(wp, "a workspace must be an object, not %s", json_kind(wv));
      continue;
    }
    static const char *const fields[] = {"name", "dtype", "shape", "zeroed", NULL};
    check_fields(p, wv, wp, "a workspace", fields);
    const char *name = get_string(p, wv, "name", wp, "a workspace", true);
    tl_dtype dt = TL_INT32;
    bool okd = get_dtype(p, wv, wp, "a workspace", &dt);
    json_t *shape = need(p, wv, "shape", wp, "a workspace");
    if (!name || !check_ident(p, name, tl_ptr_key(p->arena, wp, "name"), "workspace name") || !okd || !shape)
      continue;
    tl_sym *s = new_sym(p, name, SYM_TENSOR, wp);
    s->dtype = dt;
    s->type = (tl_type)dt;
    s->scope = SCOPE_GLOBAL;
    s->align = 256; /* the launcher's placement (proto/kernel-meta.md 6) */
    s->workspace = true;
    json_t *z = json_object_get(wv, "zeroed");
    if (z && !json_is_boolean(z))
      ERR(tl_ptr_key(p->arena, wp, "zeroed"), "'zeroed' must be true or false, not %s", json_kind(z));
    s->ws_zeroed = z && json_is_true(z);
    s->ndim = get_expr_list(p, shape, tl_ptr_key(p->arena, wp, "shape"), "'shape'", TL_MAX_DIMS, s->shape);
    if (s->ndim < 0)
      continue;
    s->param_index = prog->nparams;
    prog->params[prog->nparams++] = s;
    prog->nworkspaces++;
  }
}

/* One kernel object at kp ("/kernel", or "/kernels/I" of several). */
static void parse_kernel(P *p, json_t *k, const char *kp) {
#define KP(f) tl_ptr_key(p->arena, kp, f)
  if (!json_is_object(k)) {
    ERR(kp, "%s must be an object, not %s", strcmp(kp, "/kernel") ? "a kernel" : "'kernel'", json_kind(k));
    return;
  }
  static const char *const fields[] = {"grid", "threads", "block_vars", "cluster", "persistent", "body", NULL};
  check_fields(p, k, kp, "'kernel'", fields);
  tl_program *prog = p->prog;
  json_t *grid = need(p, k, "grid", kp, "'kernel'");
  if (grid)
    prog->ngrid = get_expr_list(p, grid, KP("grid"), "'grid'", 3, prog->grid);
  json_t *threads = need(p, k, "threads", kp, "'kernel'");
  if (threads) {
    if (json_is_array(threads))
      prog->nthreads_dims = get_expr_list(p, threads, KP("threads"), "'threads'", 3, prog->threads_expr);
    else if ((prog->threads_expr[0] = expr_value(p, threads, KP("threads"))))
      prog->nthreads_dims = 1;
  }
  json_t *bv = need(p, k, "block_vars", kp, "'kernel'");
  if (bv) {
    if (!json_is_array(bv) || json_array_size(bv) == 0 || json_array_size(bv) > 3)
      ERR(KP("block_vars"), "'block_vars' must be a list of 1 to 3 names");
    else if (prog->ngrid > 0 && json_array_size(bv) != (size_t)prog->ngrid)
      ERR(KP("block_vars"), "'block_vars' has %zu names but 'grid' has %d dimensions; give one name per dimension",
          json_array_size(bv), prog->ngrid);
    else
      for (size_t i = 0; i < json_array_size(bv); i++) {
        json_t *n = json_array_get(bv, i);
        const char *np = tl_ptr_index(p->arena, KP("block_vars"), (int)i);
        if (!json_is_string(n)) {
          ERR(np, "a block variable must be a name, not %s", json_kind(n));
          continue;
        }
        const char *name = tl_arena_strdup(p->arena, json_string_value(n));
        if (!check_ident(p, name, np, "block variable"))
          continue;
        prog->block_vars[i] = new_sym(p, name, SYM_BLOCK_VAR, np);
        prog->block_vars[i]->type = TL_INT32;
      }
  }
  prog->persistent_expr = get_flag(p, k, "persistent", kp);
  json_t *cl = json_object_get(k, "cluster");
  if (cl) { /* constant int-exprs, each 1 to 16 (check.c) */
    int n = get_expr_list(p, cl, KP("cluster"), "'cluster'", 3, prog->cluster_expr);
    if (n > 0)
      prog->ncluster = n;
  }
  json_t *body = need(p, k, "body", kp, "'kernel'");
  if (body)
    parse_body(p, body, KP("body"), &prog->body, 0);
}
#undef KP

/* The path from the top-level value down to one value: step i is the
 * member key (or, when key is NULL, the array index) taken at depth i + 1. */
typedef struct {
  const char *key[TL_MAX_JSON_DEPTH + 1];
  size_t index[TL_MAX_JSON_DEPTH + 1];
} json_path;

/* Finds the first array or object (in document order) nested deeper than
 * TL_MAX_JSON_DEPTH (v itself is at `depth`; the top-level value is at 1);
 * on success path holds the steps to it.  The recursion stops at the limit
 * + 1 levels. */
static bool too_deep(json_t *v, int depth, json_path *path) {
  if (!json_is_array(v) && !json_is_object(v))
    return false;
  if (depth > TL_MAX_JSON_DEPTH)
    return true;
  size_t i;
  const char *key;
  json_t *x;
  if (json_is_array(v)) {
    json_array_foreach(v, i, x) {
      path->key[depth - 1] = NULL;
      path->index[depth - 1] = i;
      if (too_deep(x, depth + 1, path))
        return true;
    }
  } else {
    json_object_foreach(v, key, x) {
      path->key[depth - 1] = key;
      if (too_deep(x, depth + 1, path))
        return true;
    }
  }
  return false;
}

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* Reports a document jansson could not read, in the LINE:COLUMN form
 * (proto/tile-ir-v1.md 11): 1-based, columns counted in characters.
 * jansson gives the place of the last character it read, which at the end
 * of the text (nothing read yet on the last line, say) is column 0: an
 * error at the end of the file is reported at the end of the file, the
 * place after its last character.  Messages naming jansson's own flags are
 * said in the words of the spec. */
static void json_syntax_error(tl_diags *diags, const char *text, size_t len, const json_error_t *jerr) {
  const char *msg = jerr->text;
  int line = jerr->line, column = jerr->column;
  size_t ml = strlen(msg);
  static const char eof_tail[] = "near end of file";
  bool at_eof = (ml >= sizeof eof_tail - 1 && strcmp(msg + ml - (sizeof eof_tail - 1), eof_tail) == 0) ||
                starts_with(msg, "premature end of input");
  if (at_eof) {
    line = 1;
    column = 1;
    for (size_t i = 0; i < len; i++)
      if (text[i] == '\n') {
        line++;
        column = 1;
      } else if (((unsigned char)text[i] & 0xC0) != 0x80) {
        column++; /* the first byte of a character */
      }
  }
  if (line < 1)
    line = 1;
  if (column < 1)
    column = 1; /* nothing read yet on this line: its first column */
  if (starts_with(msg, "\\u0000 is not allowed"))
    msg = "a string contains the character U+0000 (NUL), which is not allowed";
  else if (starts_with(msg, "NUL byte in object key"))
    msg = "an object key contains the character U+0000 (NUL), which is not allowed";
  else if (starts_with(msg, "maximum parsing depth reached"))
    msg = tl_arena_printf(diags->arena, "the document is nested more than %d levels deep", TL_MAX_JSON_DEPTH);
  tl_diag_add(diags, NULL, column, "%s", msg);
  if (diags->n > 0 && !diags->items[diags->n - 1].pointer)
    diags->items[diags->n - 1].line = line;
}

/* The top level of kernel i of nk (name, constants, params, workspaces)
 * into prog, which becomes p->prog.  Each kernel of a program has its own
 * copy (check.c types and folds them in place); the diagnostics of the
 * copies after the first, which would repeat the first's, are dropped. */
static void parse_program(P *p, json_t *root, tl_program *prog, int i, int nk) {
  tl_diags *keep = p->diags, scratch = {.arena = p->arena};
  bool several = json_object_get(root, "kernels") != NULL;
  if (i > 0)
    p->diags = &scratch;
  prog->arena = p->arena;
  prog->kernel_index = i;
  prog->nkernels = nk;
  prog->kptr = several ? tl_ptr_index(p->arena, "/kernels", i) : "/kernel";
  p->prog = prog;
  prog->name = get_string(p, root, "name", "", "the program", true);
  if (prog->name && check_ident(p, prog->name, "/name", "kernel name"))
    prog->entry = kernel_symbol(p->arena, several ? tl_arena_printf(p->arena, "%s_%d", prog->name, i) : prog->name);
  json_t *c = json_object_get(root, "constants");
  if (c)
    parse_constants(p, c);
  json_t *params = need(p, root, "params", "", "the program");
  if (params)
    parse_params(p, params);
  json_t *ws = json_object_get(root, "workspaces");
  if (ws)
    parse_workspaces(p, ws);
  p->diags = keep;
}

tl_program *tl_parse(tl_arena *arena, const char *text, size_t len, tl_diags *diags) {
  if (len > TL_MAX_PROGRAM_BYTES) {
    tl_diag_add(diags, "", 0, "the program is %zu bytes; the limit is %u", len, TL_MAX_PROGRAM_BYTES);
    return NULL;
  }
  json_error_t jerr;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    json_syntax_error(diags, text, len, &jerr);
    return NULL;
  }
  P pp = {.arena = arena, .diags = diags}, *p = &pp;
  int before = diags->n;
  tl_program *prog = tl_arena_alloc(arena, sizeof *prog);
  prog->cl[0] = prog->cl[1] = prog->cl[2] = 1; /* no cluster until pass_cluster.c says */
  prog->cl_axis = -1;
  prog->cl_size = 1;
  prog->arena = arena;
  p->prog = prog;
  if (!json_is_object(root)) {
    ERR("", "a tile program is a JSON object, not %s", json_kind(root));
    goto done;
  }
  json_path path;
  if (too_deep(root, 1, &path)) {
    /* reported at the first value past the limit (proto/tile-ir-v1.md 11) */
    const char *deep = "";
    for (int d = 0; d < TL_MAX_JSON_DEPTH; d++)
      deep = path.key[d] ? tl_ptr_key(arena, deep, path.key[d]) : tl_ptr_index(arena, deep, (int)path.index[d]);
    ERR(deep, "the document is nested more than %d levels deep", TL_MAX_JSON_DEPTH);
    goto done;
  }
  static const char *const fields[] = {"tlir", "name", "constants", "params", "workspaces", "kernel", "kernels", NULL};
  check_fields(p, root, "", "the program", fields);
  json_t *ver = json_object_get(root, "tlir");
  if (!ver)
    ERR("", "the program has no 'tlir' field; add \"tlir\": 1");
  else if (!json_is_integer(ver))
    ERR("/tlir", "'tlir' must be the integer 1, not %s", json_kind(ver));
  else if (json_integer_value(ver) != 1)
    ERR("/tlir", "unsupported format version %lld; this compiler reads \"tlir\": 1",
        (long long)json_integer_value(ver));
  json_t *k = json_object_get(root, "kernel"), *ks = json_object_get(root, "kernels");
  int nk = 1;
  if (k && ks) {
    ERR("/kernels", "the program has both 'kernel' and 'kernels'; give one kernel as 'kernel' or a list as 'kernels'");
    goto done;
  }
  if (ks && (!json_is_array(ks) || json_array_size(ks) < 1 || json_array_size(ks) > TL_MAX_KERNELS)) {
    ERR("/kernels", "'kernels' must be a list of 1 to %d kernels", TL_MAX_KERNELS);
    goto done;
  }
  if (ks)
    nk = (int)json_array_size(ks);
  tl_program **link = &prog;
  for (int i = 0; i < nk; i++) {
    if (i > 0)
      *link = tl_arena_alloc(arena, sizeof **link);
    parse_program(p, root, *link, i, nk);
    if (ks)
      parse_kernel(p, json_array_get(ks, (size_t)i), p->prog->kptr);
    else if ((k = need(p, root, "kernel", "", "the program")))
      parse_kernel(p, k, "/kernel");
    link = &(*link)->next;
  }
done:
  json_decref(root);
  prog->nstmts = p->nstmts;
  return diags->n > before ? NULL : prog;
}

tl_program *tl_load_program(tl_arena *arena, const char *text, size_t len, const tl_define *defs, int ndefs,
                            tl_diags *diags) {
  tl_program *prog = tl_parse(arena, text, len, diags);
  if (!prog)
    return NULL;
  bool ok = true;
  for (tl_program *k = prog; k; k = k->next) { /* every kernel; the first reports the constants' errors */
    int before = diags->n;
    ok &= tl_check(k, defs, ndefs, diags);
    if (k == prog)
      continue;
    size_t n = strlen(k->kptr);
    int keep = before;
    for (int i = before; i < diags->n; i++) /* the others only their own */
      if (strncmp(diags->items[i].pointer, k->kptr, n) == 0 && strchr("/", diags->items[i].pointer[n]))
        diags->items[keep++] = diags->items[i];
    diags->n = keep;
  }
  return ok && tl_check_kernels(prog, diags) ? prog : NULL;
}
