/*
 * meta.c - the kernel metadata on the client side: parsing and validating
 * the JSON that compile.c's metadata() writes beside every binary, and
 * evaluating its expressions so that a kernel can be launched with nothing
 * else (no program, no compiler stage beyond the expression parser).
 *
 * How the grid and the shapes are computed: the metadata holds every grid
 * dimension and tensor dimension either as a JSON integer or as the
 * checked expression printed back as text, in which constants are already
 * folded and the only names left are scalar parameters
 * ("ceildiv(n, 128)").  Each string is parsed once, at load, with the
 * compiler's own expression parser (tl_parse_expr), its names are resolved
 * against the scalar parameters and its functions checked, and it is then
 * evaluated here for each launch with Tile IR's integer rules: literals are
 * untyped (int64, an overflow is an error, as when the checker folds), a
 * parameter has its dtype (int32 or int64), mixed operands take the wider
 * type, typed arithmetic wraps, `//` and `%` are floor division and floor
 * modulo.  tests/unit/test_client_meta.c checks this evaluator against the
 * reference interpreter's tl_grid_size and tl_tensor_shape.  This was
 * chosen over re-checking the whole program because a client that fetches
 * by build key has no program, and over a second parser because the
 * grammar must not drift.
 *
 * The launch plan (tl_launch_plan_make) turns the arguments into the
 * values cuLaunchKernel wants, with every check that needs no GPU.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

#define META_TEXT_MAX ((size_t)1 << 20)
#define ENTRY_MAX 256
#define SMEM_MAX ((int64_t)1 << 30)

/* ---- parsing ------------------------------------------------------------------------ */

typedef struct {
  tl_meta *m;
  tl_error *err;
} P;

static tl_status bad(P *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tl_status bad(P *p, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return tl_error_set(p->err, TL_CORRUPT, "kernel metadata: %s", buf);
}

static int find_scalar(const tl_meta *m, const char *name) {
  for (int i = 0; i < m->nparams; i++)
    if (!m->params[i].is_tensor && strcmp(m->params[i].name, name) == 0)
      return i;
  return -1;
}

/* Checks a parsed expression: names are scalar parameters of an integer or
 * bool dtype, calls are the integer functions, no element accesses.  Names
 * are looked up again by name at evaluation (a kernel has few parameters). */
static tl_status check_expr(P *p, const tl_expr *e, const char *where) {
  switch (e->kind) {
  case E_CONST:
    if (e->type != TL_TY_UINT && e->type != TL_BOOL)
      return bad(p, "%s: only integer and boolean literals may appear", where);
    return TL_OK;
  case E_NAME: {
    int i = find_scalar(p->m, e->name);
    if (i < 0)
      return bad(p, "%s: '%s' is not a scalar parameter", where, e->name);
    tl_dtype d = p->m->params[i].dtype;
    if (d != TL_INT32 && d != TL_INT64 && d != TL_BOOL)
      return tl_error_set(p->err, TL_UNSUPPORTED, "kernel metadata: %s: parameter '%s' is %s; launch expressions "
                          "use int32, int64 and bool parameters", where, e->name, tl_dtype_name(d));
    return TL_OK;
  }
  case E_INDEX:
    return bad(p, "%s: an element access cannot appear", where);
  case E_UNARY:
    return check_expr(p, e->args[0], where);
  case E_BINARY:
    if (e->op == '/')
      return bad(p, "%s: '/' between integers", where);
    tl_status st = check_expr(p, e->args[0], where);
    return st != TL_OK ? st : check_expr(p, e->args[1], where);
  case E_CALL: {
    static const struct {
      const char *name;
      int nargs;
    } fns[] = {{"ceildiv", 2}, {"min", 2}, {"max", 2}, {"abs", 1}, {"if_then_else", 3}};
    int k = -1;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
      if (strcmp(e->name, fns[i].name) == 0)
        k = (int)i;
    if (k < 0)
      return tl_error_set(p->err, TL_UNSUPPORTED, "kernel metadata: %s: function '%s' is not evaluated by the client",
                          where, e->name);
    if (e->nargs != fns[k].nargs)
      return bad(p, "%s: %s takes %d arguments, not %d", where, e->name, fns[k].nargs, e->nargs);
    for (int i = 0; i < e->nargs; i++) {
      tl_status st = check_expr(p, e->args[i], where);
      if (st != TL_OK)
        return st;
    }
    return TL_OK;
  }
  }
  return bad(p, "%s: unknown expression", where);
}

/* An integer or an expression string. */
static tl_status parse_dim(P *p, json_t *v, const char *where, tl_expr **out) {
  tl_meta *m = p->m;
  if (json_is_integer(v)) {
    tl_expr *e = tl_arena_alloc(m->arena, sizeof *e);
    e->kind = E_CONST;
    e->type = TL_TY_UINT;
    e->val.i = (int64_t)json_integer_value(v);
    e->pointer = "";
    *out = e;
    return TL_OK;
  }
  const char *text = json_string_value(v);
  if (!text)
    return bad(p, "%s is neither an integer nor an expression string", where);
  if (strlen(text) > TL_MAX_EXPR_CHARS)
    return bad(p, "%s is longer than %d characters", where, TL_MAX_EXPR_CHARS);
  tl_diags diags = {.arena = m->arena};
  tl_expr *e = tl_parse_expr(m->arena, text, "", &diags);
  if (!e)
    return bad(p, "%s: '%.200s': %s", where, text, diags.n ? diags.items[0].message : "syntax error");
  tl_status st = check_expr(p, e, where);
  if (st != TL_OK)
    return st;
  *out = e;
  return TL_OK;
}

static tl_status parse_int_array(P *p, json_t *arr, const char *what, int min_n, int64_t lo, int64_t hi, int64_t out[3],
                                 int *n) {
  if (!json_is_array(arr) || json_array_size(arr) < (size_t)min_n || json_array_size(arr) > 3)
    return bad(p, "%s must be a list of %d to 3 integers", what, min_n);
  *n = (int)json_array_size(arr);
  out[0] = out[1] = out[2] = 1;
  for (int i = 0; i < *n; i++) {
    json_t *v = json_array_get(arr, (size_t)i);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
      return bad(p, "%s[%d] must be an integer from %lld to %lld", what, i, (long long)lo, (long long)hi);
    out[i] = (int64_t)json_integer_value(v);
  }
  return TL_OK;
}

static tl_status parse_param(P *p, json_t *v, int i, tl_meta_param *out) {
  char where[64];
  snprintf(where, sizeof where, "params[%d]", i);
  if (!json_is_object(v))
    return bad(p, "%s is not an object", where);
  const char *name = json_string_value(json_object_get(v, "name"));
  const char *kind = json_string_value(json_object_get(v, "kind"));
  const char *dtype = json_string_value(json_object_get(v, "dtype"));
  if (!name || !*name || strlen(name) > TL_MAX_NAME)
    return bad(p, "%s.name must be a name of 1 to %d characters", where, TL_MAX_NAME);
  out->name = tl_arena_strdup(p->m->arena, name);
  if (!kind || (strcmp(kind, "tensor") && strcmp(kind, "scalar")))
    return bad(p, "%s (%s).kind must be \"tensor\" or \"scalar\"", where, name);
  out->is_tensor = strcmp(kind, "tensor") == 0;
  if (!dtype || !tl_dtype_parse(dtype, &out->dtype))
    return bad(p, "%s (%s).dtype is not a Tile IR dtype", where, name);
  if (!out->is_tensor) {
    if (out->dtype != TL_INT32 && out->dtype != TL_INT64 && out->dtype != TL_FLOAT32 && out->dtype != TL_BOOL)
      return tl_error_set(p->err, TL_UNSUPPORTED,
                          "kernel metadata: scalar parameter '%s' is %s; the launcher passes int32, int64, float32 "
                          "and bool",
                          name, dtype);
    return TL_OK;
  }
  json_t *align = json_object_get(v, "align");
  out->align = align ? (int64_t)json_integer_value(align) : 16;
  if ((align && !json_is_integer(align)) || out->align < 1 || out->align > 4096 || (out->align & (out->align - 1)))
    return bad(p, "%s (%s).align must be a power of two from 1 to 4096", where, name);
  return TL_OK;
}

/* ---- tensor maps (format 2) ------------------------------------------------------------ */

/* The index of `name` in names[n], or -1. */
static int name_index(const char *name, const char *const *names, int n) {
  for (int i = 0; name && i < n; i++)
    if (strcmp(name, names[i]) == 0)
      return i;
  return -1;
}

/* cuda.h's CUtensorMapDataType for a Tile IR dtype: the element's size
 * (and, for the float and 32/64-bit integer types, its kind; a copy moves
 * bits either way). */
static int tmap_dtype(tl_dtype d) {
  switch (d) {
  case TL_FLOAT16: return 6;
  case TL_BFLOAT16: return 9;
  case TL_FLOAT32: return 7;
  case TL_FLOAT64: return 8;
  case TL_INT32: return 3;
  case TL_UINT32: return 2;
  case TL_INT64: return 5;
  case TL_UINT64: return 4;
  default: return tl_dtype_size(d) == 1 ? 0 : 1; /* UINT8, UINT16 */
  }
}

/* Byte offset of each parameter in the parameter buffer (C's layout,
 * proto/kernel-meta.md section 3); returns the end of the last one. */
static int64_t params_end(const tl_meta *m) {
  int64_t off = 0;
  for (int i = 0; i < m->nparams; i++) {
    const tl_meta_param *q = &m->params[i];
    int64_t n = q->is_tensor ? 8 : q->dtype == TL_BOOL ? 1 : (int64_t)tl_dtype_size(q->dtype);
    off = (off + n - 1) / n * n + n;
  }
  return off;
}

static tl_status parse_tmap(P *p, json_t *v, int i, int64_t *off) {
  tl_meta *m = p->m;
  tl_meta_tmap *t = &m->tmaps[i];
  char where[64];
  snprintf(where, sizeof where, "tensor_maps[%d]", i);
  if (!json_is_object(v))
    return bad(p, "%s is not an object", where);
  const char *param = json_string_value(json_object_get(v, "param"));
  t->param = -1;
  for (int k = 0; param && k < m->nparams; k++)
    if (m->params[k].is_tensor && strcmp(m->params[k].name, param) == 0)
      t->param = k;
  if (t->param < 0)
    return bad(p, "%s.param must name a tensor parameter", where);
  const tl_meta_param *q = &m->params[t->param];
  const char *dtype = json_string_value(json_object_get(v, "dtype"));
  tl_dtype dt;
  if (!dtype || !tl_dtype_parse(dtype, &dt) || dt != q->dtype)
    return bad(p, "%s.dtype must be its tensor's, %s", where, tl_dtype_name(q->dtype));
  json_t *rank = json_object_get(v, "rank");
  t->rank = (int)json_integer_value(rank);
  if (!json_is_integer(rank) || t->rank < 1 || t->rank > TL_GPU_TMAP_RANK_MAX || t->rank != q->ndim)
    return bad(p, "%s.rank must be its tensor's dimensions (%d), from 1 to %d", where, q->ndim, TL_GPU_TMAP_RANK_MAX);
  json_t *dims = json_object_get(v, "global_dims"), *strides = json_object_get(v, "global_strides");
  json_t *box = json_object_get(v, "box"), *es = json_object_get(v, "element_strides");
  if (!json_is_array(dims) || json_array_size(dims) != (size_t)t->rank || !json_is_array(box) ||
      json_array_size(box) != (size_t)t->rank || !json_is_array(es) || json_array_size(es) != (size_t)t->rank)
    return bad(p, "%s: global_dims, box and element_strides must have rank (%d) entries", where, t->rank);
  if (!json_is_array(strides) || json_array_size(strides) != (size_t)(t->rank - 1))
    return bad(p, "%s.global_strides must have rank - 1 (%d) entries", where, t->rank - 1);
  tl_gpu_tmap *e = &t->enc;
  e->dtype = tmap_dtype(q->dtype);
  e->rank = t->rank;
  int64_t esize = (int64_t)tl_dtype_size(q->dtype);
  for (int d = 0; d < t->rank; d++) {
    char w[96];
    snprintf(w, sizeof w, "%s.global_dims[%d]", where, d);
    tl_status st = parse_dim(p, json_array_get(dims, (size_t)d), w, &t->dims[d]);
    if (st == TL_OK && d + 1 < t->rank) {
      snprintf(w, sizeof w, "%s.global_strides[%d]", where, d);
      st = parse_dim(p, json_array_get(strides, (size_t)d), w, &t->strides[d]);
    }
    if (st != TL_OK)
      return st;
    json_t *b = json_array_get(box, (size_t)d), *s = json_array_get(es, (size_t)d);
    if (!json_is_integer(b) || json_integer_value(b) < 1 || json_integer_value(b) > 256)
      return bad(p, "%s.box[%d] must be an integer from 1 to 256", where, d);
    if (!json_is_integer(s) || json_integer_value(s) < 1 || json_integer_value(s) > 8)
      return bad(p, "%s.element_strides[%d] must be an integer from 1 to 8", where, d);
    e->box[d] = (uint32_t)json_integer_value(b);
    e->elem_strides[d] = (uint32_t)json_integer_value(s);
  }
  static const char *const interleaves[] = {"none"}, *const swizzles[] = {"none", "32B", "64B", "128B"},
                           *const l2s[] = {"none", "64B", "128B", "256B"}, *const fills[] = {"zero", "nan"};
  e->interleave = name_index(json_string_value(json_object_get(v, "interleave")), interleaves, 1);
  e->swizzle = name_index(json_string_value(json_object_get(v, "swizzle")), swizzles, 4);
  e->l2_promotion = name_index(json_string_value(json_object_get(v, "l2_promotion")), l2s, 4);
  e->oob_fill = name_index(json_string_value(json_object_get(v, "oob_fill")), fills, 2);
  if (e->interleave < 0 || e->swizzle < 0 || e->l2_promotion < 0 || e->oob_fill < 0)
    return bad(p, "%s: interleave must be \"none\", swizzle \"none\", \"32B\", \"64B\" or \"128B\", l2_promotion "
               "\"none\", \"64B\", \"128B\" or \"256B\", oob_fill \"zero\" or \"nan\"", where);
  if (e->box[0] * esize % 16)
    return bad(p, "%s: the box's inner dimension is %lld bytes, not a multiple of 16", where, (long long)(e->box[0] * esize));
  if (e->swizzle && e->box[0] * esize > (16 << e->swizzle))
    return bad(p, "%s: the box's inner dimension (%lld bytes) is wider than its swizzle (%d bytes)", where,
               (long long)(e->box[0] * esize), 16 << e->swizzle);
  if (e->oob_fill == 1 && e->dtype != 6 && e->dtype != 7 && e->dtype != 8 && e->dtype != 9)
    return bad(p, "%s: oob_fill \"nan\" needs a float dtype", where);
  json_t *o = json_object_get(v, "offset");
  t->offset = -1;
  if (!o)
    return TL_OK;
  if (!json_is_integer(o) || json_integer_value(o) < *off || json_integer_value(o) % 16 || json_integer_value(o) > 4096)
    return bad(p, "%s.offset must be a multiple of 16 from %lld (after the params and the maps before it) to 4096",
               where, (long long)*off);
  t->offset = (int64_t)json_integer_value(o);
  *off = t->offset + TL_GPU_TMAP_BYTES;
  return TL_OK;
}

/* Format 3 (proto/kernel-meta.md section 6): "workspaces" and "kernels".
 * Each kernel is parsed as the metadata of one kernel (format 1, or 2 with
 * its tensor maps) whose params are the program's, then the workspaces as
 * tensors: the ABI of its entry point. */
static tl_status parse_kernels(P *p, json_t *doc) {
  tl_meta *m = p->m;
  json_t *ks = json_object_get(doc, "kernels"), *ws = json_object_get(doc, "workspaces");
  if (!json_is_array(ks) || json_array_size(ks) < 1 || json_array_size(ks) > TL_META_KERNELS_MAX)
    return bad(p, "kernels must be a list of 1 to %d kernels", TL_META_KERNELS_MAX);
  if (!json_is_array(ws) || json_array_size(ws) > TL_MAX_WORKSPACES ||
      m->nparams + json_array_size(ws) > TL_KERNEL_PARAMS_MAX)
    return bad(p, "workspaces must be a list of at most %d workspaces (%d parameters and workspaces together)",
               TL_MAX_WORKSPACES, TL_KERNEL_PARAMS_MAX);
  json_t *abi = json_copy(json_object_get(doc, "params"));
  size_t i;
  json_t *v;
  json_array_foreach(ws, i, v) {
    json_t *w = json_is_object(v) ? json_copy(v) : json_object();
    json_t *z = json_object_get(w, "zeroed"); /* the launcher's, not the entry point's */
    if (z && !json_is_boolean(z)) {
      json_decref(w);
      json_decref(abi);
      return bad(p, "workspaces[%zu].zeroed must be true or false", i);
    }
    m->ws_zeroed[i] = z && json_is_true(z);
    json_object_del(w, "zeroed");
    json_object_set_new(w, "kind", json_string("tensor"));
    json_array_append_new(abi, w);
  }
  tl_status st = TL_OK;
  json_array_foreach(ks, i, v) {
    if (!json_is_object(v)) {
      st = bad(p, "kernels[%zu] is not an object", i);
      break;
    }
    json_t *one = json_pack("{s:i, s:O, s:O, s:O, s:O}", "format", json_object_get(v, "tensor_maps") ? 2 : 1,
                            "params", abi, "entry", json_object_get(v, "entry") ? json_object_get(v, "entry")
                                                                              : json_null(),
                            "launch", json_object_get(v, "launch") ? json_object_get(v, "launch") : json_null(),
                            "binary", json_object_get(doc, "binary") ? json_object_get(doc, "binary") : json_null());
    if (json_object_get(v, "tensor_maps"))
      json_object_set(one, "tensor_maps", json_object_get(v, "tensor_maps"));
    char *text = one ? json_dumps(one, JSON_COMPACT) : NULL;
    json_decref(one);
    if (!text) {
      st = tl_error_set(p->err, TL_NOMEM, "out of memory");
      break;
    }
    st = tl_meta_parse(text, &m->kernels[i], p->err);
    free(text);
    if (st != TL_OK) {
      tl_error_set(p->err, st, "kernels[%zu]: %s", i, p->err ? p->err->message : "");
      break;
    }
    m->nkernels = (int)i + 1;
  }
  json_decref(abi);
  m->nworkspaces = (int)json_array_size(ws);
  return st;
}

/* "format" (1, or 2 with "tensor_maps", or 3) and the tensor maps. */
static tl_status parse_tmaps(P *p, json_t *doc) {
  tl_meta *m = p->m;
  json_t *format = json_object_get(doc, "format"), *maps = json_object_get(doc, "tensor_maps");
  m->format = format ? (int)json_integer_value(format) : 1;
  if (format && (!json_is_integer(format) || m->format < 1 || m->format > 3))
    return tl_error_set(p->err, TL_UNSUPPORTED, "kernel metadata: format %s is not one this client knows (1 to 3)",
                        json_is_integer(format) ? "above 3" : "not an integer");
  if (m->format == 3)
    return maps ? bad(p, "format 3 has its tensor maps in its kernels, not at the top level") : parse_kernels(p, doc);
  if ((m->format == 2) != (maps != NULL))
    return bad(p, "tensor_maps must be present exactly in format 2");
  if (!maps)
    return TL_OK;
  if (!json_is_array(maps) || json_array_size(maps) < 1 || json_array_size(maps) > TL_META_TMAPS_MAX)
    return bad(p, "tensor_maps must be a list of 1 to %d tensor maps", TL_META_TMAPS_MAX);
  m->ntmaps = (int)json_array_size(maps);
  int64_t off = params_end(m);
  for (int i = 0; i < m->ntmaps; i++) {
    tl_status st = parse_tmap(p, json_array_get(maps, (size_t)i), i, &off);
    if (st != TL_OK)
      return st;
  }
  return TL_OK;
}

tl_status tl_meta_parse(const char *text, tl_meta **out, tl_error *err) {
  tl_error_clear(err);
  *out = NULL;
  if (!text)
    return tl_error_set(err, TL_INVALID_ARG, "kernel metadata: none given");
  size_t len = strlen(text);
  if (len > META_TEXT_MAX)
    return tl_error_set(err, TL_TOO_LARGE, "kernel metadata: %zu bytes; the limit is %zu", len, META_TEXT_MAX);
  json_error_t jerr;
  json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!doc)
    return tl_error_set(err, TL_BAD_JSON, "kernel metadata is not JSON: line %d: %s", jerr.line, jerr.text);
  tl_meta *m = calloc(1, sizeof *m);
  if (!m) {
    json_decref(doc);
    return tl_error_set(err, TL_NOMEM, "out of memory");
  }
  m->arena = tl_arena_new();
  P p = {m, err};
  tl_status st = TL_OK;
  const char *entry = json_string_value(json_object_get(doc, "entry"));
  const char *target = json_string_value(json_object_get(doc, "target"));
  const char *binary = json_string_value(json_object_get(doc, "binary"));
  json_t *params = json_object_get(doc, "params");
  json_t *launch = json_object_get(doc, "launch");
  if (!json_is_object(doc)) {
    st = bad(&p, "not an object");
    goto done;
  }
  if (!entry || !*entry || strlen(entry) > ENTRY_MAX) {
    st = bad(&p, "entry must be a name of 1 to %d characters", ENTRY_MAX);
    goto done;
  }
  m->entry = tl_arena_strdup(m->arena, entry);
  m->target = tl_arena_strdup(m->arena, target ? target : "");
  m->ptx = binary && strcmp(binary, "ptx") == 0;
  if (!json_is_array(params) || json_array_size(params) > TL_KERNEL_PARAMS_MAX) {
    st = bad(&p, "params must be a list of at most %d parameters", TL_KERNEL_PARAMS_MAX);
    goto done;
  }
  m->nparams = (int)json_array_size(params);
  m->params = tl_arena_alloc(m->arena, sizeof *m->params * (size_t)(m->nparams ? m->nparams : 1));
  for (int i = 0; i < m->nparams; i++)
    if ((st = parse_param(&p, json_array_get(params, (size_t)i), i, &m->params[i])) != TL_OK)
      goto done;
  for (int i = 0; i < m->nparams; i++)
    for (int j = 0; j < i; j++)
      if (strcmp(m->params[i].name, m->params[j].name) == 0) {
        st = bad(&p, "parameter '%s' appears twice", m->params[i].name);
        goto done;
      }
  /* shapes after all params are known: they refer to scalars by name */
  for (int i = 0; i < m->nparams; i++) {
    tl_meta_param *q = &m->params[i];
    if (!q->is_tensor)
      continue;
    json_t *shape = json_object_get(json_array_get(params, (size_t)i), "shape");
    if (!json_is_array(shape) || json_array_size(shape) < 1 || json_array_size(shape) > TL_KERNEL_DIMS_MAX) {
      st = bad(&p, "params[%d] (%s).shape must be a list of 1 to %d dimensions", i, q->name, TL_KERNEL_DIMS_MAX);
      goto done;
    }
    q->ndim = (int)json_array_size(shape);
    for (int d = 0; d < q->ndim; d++) {
      char where[128];
      snprintf(where, sizeof where, "params[%d] (%s).shape[%d]", i, q->name, d);
      if ((st = parse_dim(&p, json_array_get(shape, (size_t)d), where, &q->shape[d])) != TL_OK)
        goto done;
    }
  }
  if (!json_is_object(launch)) {
    st = bad(&p, "launch must be an object");
    goto done;
  }
  json_t *grid = json_object_get(launch, "grid");
  if (!json_is_array(grid) || json_array_size(grid) < 1 || json_array_size(grid) > 3) {
    st = bad(&p, "launch.grid must be a list of 1 to 3 dimensions");
    goto done;
  }
  m->ngrid = (int)json_array_size(grid);
  for (int d = 0; d < m->ngrid; d++) {
    char where[64];
    snprintf(where, sizeof where, "launch.grid[%d]", d);
    if ((st = parse_dim(&p, json_array_get(grid, (size_t)d), where, &m->grid[d])) != TL_OK)
      goto done;
  }
  int nblock;
  if ((st = parse_int_array(&p, json_object_get(launch, "block"), "launch.block", 1, 1, TL_MAX_THREADS, m->block,
                            &nblock)) != TL_OK)
    goto done;
  if (m->block[0] * m->block[1] * m->block[2] > TL_MAX_THREADS) {
    st = bad(&p, "launch.block has %lld threads; the limit is %d",
             (long long)(m->block[0] * m->block[1] * m->block[2]), TL_MAX_THREADS);
    goto done;
  }
  json_t *smem = json_object_get(launch, "dynamic_shared_bytes");
  if (smem && (!json_is_integer(smem) || json_integer_value(smem) < 0 || json_integer_value(smem) > SMEM_MAX)) {
    st = bad(&p, "launch.dynamic_shared_bytes must be an integer from 0 to %lld", (long long)SMEM_MAX);
    goto done;
  }
  m->dyn_smem = smem ? (int64_t)json_integer_value(smem) : 0;
  json_t *cluster = json_object_get(launch, "cluster");
  if (cluster &&
      (st = parse_int_array(&p, cluster, "launch.cluster", 1, 1, 64, m->cluster, &m->ncluster)) != TL_OK)
    goto done;
  json_t *pers = json_object_get(launch, "persistent");
  if (pers && (!json_is_integer(pers) || json_integer_value(pers) < 1 || json_integer_value(pers) > 64)) {
    st = bad(&p, "launch.persistent must be an integer from 1 to 64 (blocks per multiprocessor)");
    goto done;
  }
  m->persistent = pers ? (int)json_integer_value(pers) : 0;
  json_t *prog = json_object_get(launch, "programmatic");
  if (prog && !json_is_boolean(prog)) {
    st = bad(&p, "launch.programmatic must be a boolean");
    goto done;
  }
  m->programmatic = json_is_true(prog);
  st = parse_tmaps(&p, doc);
done:
  json_decref(doc);
  if (st != TL_OK) {
    tl_meta_free(m);
    return st;
  }
  *out = m;
  return TL_OK;
}

void tl_meta_free(tl_meta *m) {
  if (!m)
    return;
  for (int i = 0; i < m->nkernels; i++)
    tl_meta_free(m->kernels[i]);
  tl_arena_free(m->arena);
  free(m);
}

/* ---- evaluation ----------------------------------------------------------------------- */

typedef enum { TY_UNTYPED, TY_I32, TY_I64, TY_BOOL } ty;

typedef struct {
  int64_t v;
  ty t;
} val;

typedef struct {
  const tl_meta *m;
  const tl_kernel_arg *args;
  const char *where;
  tl_error *err;
} E;

static tl_status rt(E *x, const tl_expr *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static tl_status rt(E *x, const tl_expr *e, const char *fmt, ...) {
  char buf[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return tl_error_set(x->err, TL_RUNTIME, "%s of kernel '%s' (column %d): %s", x->where, x->m->entry, e->column, buf);
}

static int64_t wrap(int64_t v, ty t) { return t == TY_I32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)v : v; }

/* The type an untyped integer takes where it meets a typed operand: int32,
 * or int64 when its value does not fit (proto/tile-ir-v1.md 7.2). */
static ty pin(val v) {
  if (v.t != TY_UNTYPED)
    return v.t;
  return v.v >= INT32_MIN && v.v <= INT32_MAX ? TY_I32 : TY_I64;
}

/* The common type of two operands (untyped only when both are). */
static ty common(val a, val b) {
  if (a.t == TY_UNTYPED && b.t == TY_UNTYPED)
    return TY_UNTYPED;
  ty x = pin(a), y = pin(b);
  return x == TY_I64 || y == TY_I64 ? TY_I64 : TY_I32;
}

static int64_t floordiv(int64_t x, int64_t y) {
  if (x == INT64_MIN && y == -1)
    return INT64_MIN;
  int64_t q = x / y;
  if (x % y != 0 && ((x % y < 0) != (y < 0)))
    q--;
  return q;
}

static int64_t floormod(int64_t x, int64_t y) {
  if (y == -1)
    return 0;
  int64_t r = x % y;
  if (r != 0 && ((r < 0) != (y < 0)))
    r += y;
  return r;
}

static tl_status eval(E *x, const tl_expr *e, val *out);

static tl_status eval_int(E *x, const tl_expr *e, val *out) {
  tl_status st = eval(x, e, out);
  if (st == TL_OK && out->t == TY_BOOL)
    return rt(x, e, "a boolean is used as a number");
  return st;
}

static tl_status arith(E *x, const tl_expr *e, int op, val a, val b, val *out) {
  bool shift = op == OP_SHL || op == OP_SHR;
  ty t = shift ? pin(a) : common(a, b); /* a shift has its left operand's type, as in C */
  int64_t p = t == TY_UNTYPED ? a.v : wrap(a.v, t);
  int64_t q = shift || t == TY_UNTYPED ? b.v : wrap(b.v, t);
  int64_t r = 0;
  bool ovf = false;
  switch (op) {
  case '+':
    if (t == TY_UNTYPED)
      ovf = __builtin_add_overflow(p, q, &r);
    else
      r = (int64_t)((uint64_t)p + (uint64_t)q);
    break;
  case '-':
    if (t == TY_UNTYPED)
      ovf = __builtin_sub_overflow(p, q, &r);
    else
      r = (int64_t)((uint64_t)p - (uint64_t)q);
    break;
  case '*':
    if (t == TY_UNTYPED)
      ovf = __builtin_mul_overflow(p, q, &r);
    else
      r = (int64_t)((uint64_t)p * (uint64_t)q);
    break;
  case OP_FLOORDIV:
  case '%':
    if (q == 0)
      return rt(x, e, "integer %s by zero", op == '%' ? "modulo" : "division");
    if (t == TY_UNTYPED && p == INT64_MIN && q == -1)
      ovf = true;
    r = op == '%' ? floormod(p, q) : floordiv(p, q);
    break;
  case '&': r = p & q; break;
  case '|': r = p | q; break;
  case '^': r = p ^ q; break;
  case OP_SHL:
  case OP_SHR: {
    int bits = t == TY_I32 ? 32 : 64;
    if (q < 0 || q >= bits)
      return rt(x, e, "shift count %lld is outside [0, %d)", (long long)q, bits);
    if (op == OP_SHR)
      r = p >= 0 ? p >> q : ~(~p >> q);
    else {
      r = (int64_t)((uint64_t)p << q);
      if (t == TY_UNTYPED && (r >> q) != p)
        ovf = true;
    }
    break;
  }
  default:
    return rt(x, e, "operator '%s' is not evaluated by the client", tl_op_text(op));
  }
  if (ovf)
    return rt(x, e, "integer overflow (untyped constants are int64)");
  out->t = t;
  out->v = t == TY_UNTYPED ? r : wrap(r, t);
  return TL_OK;
}

static bool is_cmp(int op) {
  return op == '<' || op == '>' || op == OP_LE || op == OP_GE || op == OP_EQ || op == OP_NE;
}

static tl_status eval(E *x, const tl_expr *e, val *out) {
  tl_status st;
  switch (e->kind) {
  case E_CONST:
    out->v = e->val.i;
    out->t = e->type == TL_BOOL ? TY_BOOL : TY_UNTYPED;
    return TL_OK;
  case E_NAME: {
    int i = find_scalar(x->m, e->name);
    if (i < 0)
      return rt(x, e, "'%s' is not a scalar parameter", e->name); /* checked at parse: not reached */
    tl_dtype d = x->m->params[i].dtype;
    out->v = x->args[i].i;
    out->t = d == TL_INT32 ? TY_I32 : d == TL_INT64 ? TY_I64 : TY_BOOL;
    return TL_OK;
  }
  case E_UNARY: {
    val a;
    if ((st = eval(x, e->args[0], &a)) != TL_OK)
      return st;
    if (e->op == OP_NOT) {
      out->t = TY_BOOL;
      out->v = a.v == 0;
      return TL_OK;
    }
    if (a.t == TY_BOOL)
      return rt(x, e, "a boolean is used as a number");
    out->t = a.t;
    if (e->op == '~')
      out->v = a.t == TY_UNTYPED ? ~a.v : wrap(~a.v, a.t);
    else if (a.t == TY_UNTYPED) {
      if (a.v == INT64_MIN)
        return rt(x, e, "integer overflow (untyped constants are int64)");
      out->v = -a.v;
    } else
      out->v = wrap((int64_t)(0 - (uint64_t)a.v), a.t);
    return TL_OK;
  }
  case E_BINARY: {
    val a, b;
    if (e->op == OP_AND || e->op == OP_OR) {
      if ((st = eval(x, e->args[0], &a)) != TL_OK)
        return st;
      bool l = a.v != 0;
      if ((e->op == OP_AND && !l) || (e->op == OP_OR && l)) {
        out->t = TY_BOOL;
        out->v = l;
        return TL_OK;
      }
      if ((st = eval(x, e->args[1], &b)) != TL_OK)
        return st;
      out->t = TY_BOOL;
      out->v = b.v != 0;
      return TL_OK;
    }
    if ((st = eval(x, e->args[0], &a)) != TL_OK || (st = eval(x, e->args[1], &b)) != TL_OK)
      return st;
    if (is_cmp(e->op)) {
      if ((a.t == TY_BOOL) != (b.t == TY_BOOL) && e->op != OP_EQ && e->op != OP_NE)
        return rt(x, e, "a boolean is compared with a number");
      ty t = common(a, b);
      int64_t p = t == TY_I32 ? wrap(a.v, t) : a.v, q = t == TY_I32 ? wrap(b.v, t) : b.v;
      int c = p < q ? -1 : p > q;
      out->t = TY_BOOL;
      out->v = e->op == '<' ? c < 0 : e->op == '>' ? c > 0 : e->op == OP_LE ? c <= 0 : e->op == OP_GE ? c >= 0
             : e->op == OP_EQ ? c == 0 : c != 0;
      return TL_OK;
    }
    if (a.t == TY_BOOL || b.t == TY_BOOL)
      return rt(x, e, "a boolean is used as a number");
    return arith(x, e, e->op, a, b, out);
  }
  case E_CALL: {
    val v[3];
    if (strcmp(e->name, "if_then_else") == 0) {
      if ((st = eval(x, e->args[0], &v[0])) != TL_OK)
        return st;
      if ((st = eval(x, e->args[1], &v[1])) != TL_OK || (st = eval(x, e->args[2], &v[2])) != TL_OK)
        return st;
      ty t = v[1].t == TY_BOOL && v[2].t == TY_BOOL ? TY_BOOL : common(v[1], v[2]);
      out->t = t;
      out->v = v[0].v ? v[1].v : v[2].v;
      if (t == TY_I32)
        out->v = wrap(out->v, t);
      return TL_OK;
    }
    for (int i = 0; i < e->nargs; i++)
      if ((st = eval_int(x, e->args[i], &v[i])) != TL_OK)
        return st;
    if (strcmp(e->name, "abs") == 0) {
      out->t = v[0].t;
      if (v[0].t == TY_UNTYPED && v[0].v == INT64_MIN)
        return rt(x, e, "integer overflow (untyped constants are int64)");
      out->v = v[0].v < 0 ? wrap((int64_t)(0 - (uint64_t)v[0].v), v[0].t) : v[0].v;
      return TL_OK;
    }
    ty t = common(v[0], v[1]);
    int64_t p = t == TY_UNTYPED ? v[0].v : wrap(v[0].v, t), q = t == TY_UNTYPED ? v[1].v : wrap(v[1].v, t);
    out->t = t;
    if (strcmp(e->name, "min") == 0)
      out->v = p < q ? p : q;
    else if (strcmp(e->name, "max") == 0)
      out->v = p > q ? p : q;
    else { /* ceildiv */
      if (q == 0)
        return rt(x, e, "integer division by zero in ceildiv");
      if (p == INT64_MIN && q == -1) {
        if (t == TY_UNTYPED)
          return rt(x, e, "integer overflow (untyped constants are int64)");
        out->v = wrap(p, t);
        return TL_OK;
      }
      int64_t r = p / q;
      if (p % q != 0 && ((p < 0) == (q < 0)))
        r++;
      out->v = t == TY_UNTYPED ? r : wrap(r, t);
    }
    return TL_OK;
  }
  case E_INDEX:
    break;
  }
  return rt(x, e, "unexpected expression");
}

/* Checks the scalar arguments (count, kinds, ranges): the expressions read them. */
static tl_status check_args(const tl_meta *m, const tl_kernel_arg *args, int nargs, bool tensors, tl_error *err) {
  if (nargs != m->nparams || (nargs && !args))
    return tl_error_set(err, TL_INVALID_ARG, "kernel '%s' takes %d arguments, not %d", m->entry, m->nparams, nargs);
  for (int i = 0; i < nargs; i++) {
    const tl_meta_param *q = &m->params[i];
    const tl_kernel_arg *a = &args[i];
    if (q->is_tensor) {
      if (tensors && a->kind != TL_ARG_TENSOR)
        return tl_error_set(err, TL_INVALID_ARG, "argument %d of kernel '%s' ('%s') is a tensor: use tl_arg_tensor",
                            i, m->entry, q->name);
      continue;
    }
    bool want_float = q->dtype == TL_FLOAT32;
    if (a->kind != (want_float ? TL_ARG_FLOAT : TL_ARG_INT))
      return tl_error_set(err, TL_INVALID_ARG, "argument %d of kernel '%s' ('%s') is %s: use %s", i, m->entry,
                          q->name, tl_dtype_name(q->dtype), want_float ? "tl_arg_float" : "tl_arg_int");
    if ((q->dtype == TL_INT32 && (a->i < INT32_MIN || a->i > INT32_MAX)) ||
        (q->dtype == TL_BOOL && a->i != 0 && a->i != 1))
      return tl_error_set(err, TL_INVALID_ARG, "argument %d of kernel '%s' ('%s' = %lld) is not a valid %s", i,
                          m->entry, q->name, (long long)a->i, tl_dtype_name(q->dtype));
  }
  return TL_OK;
}

tl_status tl_meta_grid(const tl_meta *m, const tl_kernel_arg *args, int nargs, int64_t grid[3], tl_error *err) {
  tl_error_clear(err);
  tl_status st = check_args(m, args, nargs, false, err);
  if (st != TL_OK)
    return st;
  for (int d = 0; d < 3; d++) {
    grid[d] = 1;
    if (d >= m->ngrid)
      continue;
    char where[32];
    snprintf(where, sizeof where, "grid[%d]", d);
    E x = {m, args, where, err};
    val v;
    if ((st = eval_int(&x, m->grid[d], &v)) != TL_OK)
      return st;
    if (v.v < 0 || v.v > INT32_MAX)
      return tl_error_set(err, TL_INVALID_ARG, "grid dimension %d of kernel '%s' is %lld; it must be from 0 to %d", d,
                          m->entry, (long long)v.v, INT32_MAX);
    grid[d] = v.v;
  }
  return TL_OK;
}

tl_status tl_meta_shape(const tl_meta *m, int param, const tl_kernel_arg *args, int nargs,
                        int64_t shape[TL_KERNEL_DIMS_MAX], tl_error *err) {
  tl_error_clear(err);
  if (param < 0 || param >= m->nparams || !m->params[param].is_tensor)
    return tl_error_set(err, TL_INVALID_ARG, "parameter %d of kernel '%s' is not a tensor", param, m->entry);
  tl_status st = check_args(m, args, nargs, false, err);
  if (st != TL_OK)
    return st;
  const tl_meta_param *q = &m->params[param];
  for (int d = 0; d < q->ndim; d++) {
    char where[128];
    snprintf(where, sizeof where, "dimension %d of tensor '%s'", d, q->name);
    E x = {m, args, where, err};
    val v;
    if ((st = eval_int(&x, q->shape[d], &v)) != TL_OK)
      return st;
    if (v.v < 0)
      return tl_error_set(err, TL_INVALID_ARG, "dimension %d of tensor '%s' is %lld; it must not be negative", d,
                          q->name, (long long)v.v);
    shape[d] = v.v;
  }
  return TL_OK;
}

/* ---- workspaces (format 3) ---------------------------------------------------------------- */
tl_status tl_meta_workspaces(const tl_meta *m, const tl_kernel_arg *args, int nargs, uint64_t *offsets,
                             uint64_t *total, tl_error *err) {
  tl_error_clear(err);
  *total = 0;
  tl_status st = check_args(m, args, nargs, false, err);
  if (st != TL_OK || !m->nkernels)
    return st;
  const tl_meta *k = m->kernels[0];
  tl_kernel_arg all[TL_KERNEL_PARAMS_MAX];
  for (int i = 0; i < k->nparams; i++)
    all[i] = i < nargs ? args[i] : tl_arg_tensor(0);
  for (int j = 0; j < m->nworkspaces; j++) {
    const tl_meta_param *q = &k->params[nargs + j];
    int64_t shape[TL_KERNEL_DIMS_MAX];
    if ((st = tl_meta_shape(k, nargs + j, all, k->nparams, shape, err)) != TL_OK)
      return st;
    double n = 1;
    for (int d = 0; d < q->ndim; d++)
      n *= (double)shape[d];
    double bytes = n * tl_dtype_bits(q->dtype) / 8;
    offsets[j] = *total;
    if ((double)*total + bytes > (double)TL_MAX_WORKSPACE_BYTES)
      return tl_error_set(err, TL_LIMIT, "the workspaces of kernel '%s' take more than %lld bytes up to '%s'; the "
                          "limit is %lld", m->entry, (long long)TL_MAX_WORKSPACE_BYTES, q->name,
                          (long long)TL_MAX_WORKSPACE_BYTES);
    uint64_t b = tl_dtype_bytes(q->dtype, (uint64_t)n);
    *total += (b + TL_META_WORKSPACE_ALIGN - 1) / TL_META_WORKSPACE_ALIGN * TL_META_WORKSPACE_ALIGN;
  }
  return TL_OK;
}

/* ---- the launch plan ------------------------------------------------------------------------ */

/* The arguments of tensor map t for tensor pointer ptr: its dimensions and
 * strides evaluated and checked as cuTensorMapEncodeTiled demands. */
static tl_status tmap_plan(const tl_meta *m, const tl_meta_tmap *t, const tl_kernel_arg *args, int nargs,
                           tl_gpu_tmap *out, tl_error *err) {
  const tl_meta_param *q = &m->params[t->param];
  *out = t->enc;
  out->addr = args[t->param].ptr;
  (void)nargs;
  if (out->addr % 16)
    return tl_error_set(err, TL_INVALID_ARG, "tensor '%s' of kernel '%s' is at 0x%llx; its tensor map needs 16-byte "
                        "alignment", q->name, m->entry, (unsigned long long)out->addr);
  for (int d = 0; d < t->rank; d++) {
    char where[96];
    snprintf(where, sizeof where, "dimension %d of the tensor map of '%s'", d, q->name);
    E x = {m, args, where, err};
    val v;
    tl_status st = eval_int(&x, t->dims[d], &v);
    if (st != TL_OK)
      return st;
    if (v.v < 1 || v.v > ((int64_t)1 << 32))
      return tl_error_set(err, TL_INVALID_ARG, "tensor '%s' of kernel '%s' has %lld elements in dimension %d "
                          "(innermost first); its tensor map needs 1 to 2^32", q->name, m->entry, (long long)v.v, d);
    out->dims[d] = (uint64_t)v.v;
    if (d + 1 == t->rank)
      break;
    /* the row pitch of a dense tensor, in 64 bits (the expression's own
     * arithmetic may wrap: it has the scalars' types) */
    double dense_f = (double)tl_dtype_size(q->dtype);
    for (int k = 0; k <= d; k++)
      dense_f *= (double)out->dims[k];
    snprintf(where, sizeof where, "stride %d of the tensor map of '%s'", d, q->name);
    if ((st = eval_int(&x, t->strides[d], &v)) != TL_OK)
      return st;
    if ((double)v.v != dense_f)
      return tl_error_set(err, TL_INVALID_ARG, "the tensor map of tensor '%s' of kernel '%s' has a row pitch of %lld "
                          "bytes in dimension %d, but the tensor's dense layout gives %.0f (an expression of the "
                          "metadata overflowed its type?)", q->name, m->entry, (long long)v.v, d + 1, dense_f);
    if (v.v < 16 || v.v % 16 || v.v >= ((int64_t)1 << 40))
      return tl_error_set(err, TL_INVALID_ARG, "tensor '%s' of kernel '%s' has a row pitch of %lld bytes in dimension "
                          "%d (innermost first); its tensor map needs a multiple of 16 below 2^40 (compile with "
                          "\"tma\": false on the pipelined loop to copy it with cp.async)",
                          q->name, m->entry, (long long)v.v, d + 1);
    out->strides[d] = (uint64_t)v.v;
  }
  return TL_OK;
}

tl_status tl_launch_plan_make(const tl_meta *m, const tl_kernel_arg *args, int nargs, tl_launch_plan *plan,
                              tl_error *err) {
  tl_error_clear(err);
  memset(plan, 0, sizeof *plan);
  tl_status st = check_args(m, args, nargs, true, err);
  if (st != TL_OK)
    return st;
  int64_t grid[3];
  if ((st = tl_meta_grid(m, args, nargs, grid, err)) != TL_OK)
    return st;
  /* the binary fixes its cluster (__cluster_dims__), so a plain launch applies it: whole clusters only */
  for (int d = 0; d < m->ncluster; d++)
    if (m->cluster[d] > 1 && grid[d] % m->cluster[d])
      return tl_error_set(err, TL_INVALID_ARG, "grid dimension %d of kernel '%s' is %lld, which is not a multiple of "
                          "its thread-block cluster's %lld", d, m->entry, (long long)grid[d], (long long)m->cluster[d]);
  if (grid[1] > 65535 || grid[2] > 65535)
    return tl_error_set(err, TL_LIMIT, "the grid (%lld, %lld, %lld) of kernel '%s' is larger than CUDA allows "
                        "(2^31-1, 65535, 65535)", (long long)grid[0], (long long)grid[1], (long long)grid[2], m->entry);
  for (int d = 0; d < 3; d++) {
    plan->grid[d] = (unsigned)grid[d];
    plan->block[d] = (unsigned)m->block[d];
    plan->empty |= grid[d] == 0;
  }
  plan->dyn_smem = (unsigned)m->dyn_smem;
  for (int i = 0; i < nargs; i++) {
    const tl_meta_param *q = &m->params[i];
    tl_launch_value *v = &plan->values[i];
    if (q->is_tensor) {
      if (args[i].ptr % (uint64_t)q->align)
        return tl_error_set(err, TL_INVALID_ARG,
                            "tensor '%s' of kernel '%s' is at 0x%llx, which breaks its promised alignment of %lld "
                            "bytes (%llu bytes off)",
                            q->name, m->entry, (unsigned long long)args[i].ptr, (long long)q->align,
                            (unsigned long long)(args[i].ptr % (uint64_t)q->align));
      v->ptr = args[i].ptr;
    } else {
      switch (q->dtype) {
      case TL_INT32: v->i32 = (int32_t)args[i].i; break;
      case TL_INT64: v->i64 = args[i].i; break;
      case TL_FLOAT32: v->f32 = (float)args[i].f; break;
      default: v->b = args[i].i != 0; break;
      }
    }
    plan->kargs[i] = v;
  }
  if (plan->empty) /* nothing runs: a tensor may well be empty */
    return TL_OK;
  plan->ntmaps = m->ntmaps;
  for (int j = 0; j < m->ntmaps; j++) {
    if ((st = tmap_plan(m, &m->tmaps[j], args, nargs, &plan->tmap_args[j], err)) != TL_OK)
      return st;
    plan->kargs[nargs + j] = plan->tmaps[j];
  }
  return TL_OK;
}

/* ---- targets and architectures ----------------------------------------------------------- */

bool tl_target_runs_on(const char *target, int arch) {
  if (!target)
    return false;
  bool sm = strncmp(target, "sm_", 3) == 0, compute = strncmp(target, "compute_", 8) == 0;
  if (!sm && !compute)
    return false;
  const char *p = target + (sm ? 3 : 8);
  int v = 0, digits = 0;
  while (*p >= '0' && *p <= '9' && digits < 4) {
    v = v * 10 + (*p++ - '0');
    digits++;
  }
  char suffix = *p;
  if (digits < 2 || (suffix && suffix != 'a' && suffix != 'f') || (suffix && p[1]))
    return false;
  if (suffix == 'a')
    return arch == v;
  if (compute && !suffix)
    return arch >= v;
  /* sm_NN and sm_NNf, compute_NNf: binary compatible within a major version */
  return arch / 10 == v / 10 && arch % 10 >= v % 10;
}
