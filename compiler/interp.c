/*
 * interp.c - the reference interpreter of Tile IR: runs a checked program
 * (ir.h) on the CPU with the meaning of TILE-IR.md sections 3-6.  It is the
 * oracle of the GPU tests and the engine of `tlc run --interpret`.
 *
 * Blocks of the grid run one after another.  Inside a block, statements that
 * are block-level (tile operators, parallel loops, shared/fragment
 * allocations, annotations, sync_threads, and loops/ifs holding one of them)
 * run once, evaluating their expressions in the first active thread; every
 * other statement runs for all threads of the block in lock-step under an
 * active-thread mask: an assignment evaluates its indices and value for
 * every active thread before it stores anything, an `if` splits the mask,
 * and a loop whose bounds differ between threads runs while any thread still
 * has iterations.  A parallel loop runs its iterations one after another in
 * the first thread and, unless disabled, checks that they are independent
 * with generation-stamped shadow tables (a direct array for small buffers, a
 * hash table for large ones and for global tensors).  Across blocks, the
 * last plain store and read of each global element of a tensor the kernel
 * writes, and every block's atomic updates in run order, check that one
 * block's access to what another did was handed over as proto/tile-ir-v1.md
 * 9.1 allows (a fence and an atomic on each side: xaccess, xupdate).
 *
 * Storage: every value symbol has one tl_scalar per thread
 * (vals[slot * T + thread]); shared and fragment buffers are one byte array
 * per block, local buffers one per thread; buffers and tensors hold
 * elements in their dtype's bytes (tl_load/tl_store).  Fresh allocations are
 * filled with a poison (NaN for floats, 0xA5 bytes otherwise).  Arithmetic
 * is exact in int64/uint64 or double and then wrapped or rounded to the
 * expression's type with dtype.c's conversions.
 */
#include "interp.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 96                /* nested bodies (the parser allows 32) */
#define SHADOW_DIRECT_MAX 65536     /* elements: above this, shadows are hash tables */
#define XREC_DIRECT_MAX (1LL << 21) /* elements: above this, a tensor's 9.1 records are a hash table */
#define MAX_REGION_ELEMS (1LL << 34) /* elements one tile operator may touch */
#define MAX_BUFFER_BYTES (1LL << 32) /* all shared/fragment/local buffers of a program */

enum { MODE_STATIC, MODE_THREAD, MODE_BLOCK, MODE_PAR };

/* A key -> index table (keymap_get / keymap_put): open addressing with
 * linear probing on mix64 of a uint64 key, each slot the index of a
 * record in its owner's array.  A slot is live in the table's generation
 * only, so keymap_clear forgets every key at once. */
typedef struct kslot {
  uint64_t key, idx;
  uint32_t gen;
} kslot;

typedef struct keymap {
  kslot *s;
  uint64_t cap, used; /* slots (a power of two), live ones */
  uint32_t gen;       /* 0 until first used */
} keymap;

/* One element's accesses inside the current parallel loop run (gen): the
 * first two distinct writing and reading iterations (-1: none). */
typedef struct shent {
  uint64_t key;
  uint32_t gen;
  int64_t w1, w2, r1, r2;
} shent;

typedef struct shadow {
  shent *e;      /* direct: one per element; hashed: the n records of generation used_gen */
  uint64_t cap;  /* direct: elements; hashed: records allocated */
  bool hashed;
  uint64_t n;
  uint32_t used_gen;
  keymap km; /* hashed: element -> its record in e */
} shadow;

/* Cross-block handover (proto/tile-ir-v1.md 9.1): the last plain store
 * and the last plain read of a global element by the running kernel's
 * blocks (block index + 1: 0 none), with each block's fencing
 * sync_threads before it. */
typedef struct xrec {
  int64_t writer, reader;
  uint32_t wfence, rfence;
} xrec;

/* An element updated by atomics (a counter): who updated it since it was
 * last set back, and its resets. */
typedef struct xcnt {
  int64_t upd;      /* the first block to update it since it was last set back, or -1 */
  bool upd_many;    /* and another block did too */
  int64_t resetter; /* the last block that did, or -1 */
  size_t last_ev;   /* its last atomic update (an index in interp.xev) */
} xcnt;

typedef struct xent { /* element lin's records */
  uint64_t lin;
  xrec r;
  xcnt c;
} xent;

typedef struct xmap { /* the n records e, found by the element's linear index through km */
  xent *e;
  uint64_t n, cap;
  keymap km;
} xmap;

/* An atomic update of a global element by a block, in run order. */
typedef struct xevent {
  const tl_sym *sym; /* the tensor */
  uint64_t lin;
  uint32_t fence; /* the block's fencing sync_threads before it */
} xevent;

/* A block that ran and wrote or updated a global element: its atomic
 * updates (xev[ev0, ev1)) and its fencing sync_threads in all. */
typedef struct xblock {
  int64_t blk;
  size_t ev0, ev1;
  uint32_t fences;
} xblock;

typedef struct tinfo { /* a tensor argument */
  unsigned char *data;
  unsigned char *own;  /* a view's own copy (setup_views), freed with the interpreter */
  tl_dtype dt;
  size_t es;
  int64_t dim[TL_MAX_DIMS], stride[TL_MAX_DIMS];
  int64_t count;
  shadow sh;
  /* 9.1: the records of the elements the running kernel's blocks wrote or read, where some statement of it
   * writes the tensor (xw; else none are kept): an array by element (xr) up to XREC_DIRECT_MAX elements, else
   * a hash table (xm); the counters, where some atomic updates it (xa), in a hash table (xc) */
  bool xw, xa;
  xrec *xr;
  xmap xm, xc;
} tinfo;

typedef struct binfo { /* a buffer slot */
  const tl_sym *sym;
  unsigned char *data; /* local: T copies of nelem elements */
  tl_dtype dt;
  size_t es;
  int64_t nelem;
  int64_t stride[TL_MAX_DIMS];
  shadow sh;
} binfo;

/* A located element: p is NULL when it lies outside a global tensor. */
typedef struct loc {
  unsigned char *p;
  tl_dtype dt;
  const tl_sym *sym;
  shadow *sh;      /* independence shadow (tensors, shared, fragment) */
  uint64_t lin;    /* linear element index */
  int64_t nelem;
} loc;

/* One thread's pending store of a lock-step assignment. */
typedef struct pending {
  unsigned char *p; /* memory target, or NULL */
  tl_scalar *slot;  /* value-slot target, or NULL */
  tl_dtype dt;
  tl_scalar v;
  const tl_sym *xs; /* a global tensor's element (xs, xlin): the store is checked against 9.1 */
  uint64_t xlin;
} pending;

typedef struct interp {
  const tl_program *prog;
  const tl_arg *args;
  tl_error *err;
  int mode;
  bool check_par;
  int T;
  int64_t tdim[3];
  int64_t bidx[3];
  tl_scalar *vals;
  tinfo *tens;  /* per parameter index */
  binfo *bufs;  /* per buffer slot */
  pending *pend;
  unsigned char *full;
  unsigned char *masks[MAX_DEPTH][2];
  int64_t *lpool[MAX_DEPTH];
  int t0;       /* the thread that evaluates block-level expressions */
  /* parallel loops */
  uint32_t par_gen;
  uint32_t *slot_gen; /* value slots written inside the current parallel run */
  uint32_t *slot_ok;  /* value slots found uniform in the current parallel run */
  const tl_stmt *par_s;
  int64_t par_ext[TL_MAX_DIMS];
  int64_t par_iter;
  FILE *print_to;
  /* cross-block handover (9.1): blocks run one after another, so the last plain writer of each global element,
   * and each block's atomic updates in run order, say whether a later block's access was handed over */
  int64_t grid[3];
  int64_t blk;           /* the running block's linear index */
  uint32_t xfence;       /* its fencing sync_threads so far */
  bool xdirty;           /* it wrote a global element or updated one by an atomic */
  xevent *xev;           /* every block's atomic updates of global elements, in run order */
  size_t nxev, capxev, xev0; /* xev0: the running block's first */
  xblock *xb;            /* the blocks that ran and wrote or updated global elements, nxb of them */
  uint64_t nxb, capxb;
  keymap xbk;            /* a block's index (blk) -> its record in xb */
  /* cluster_reduce: the running block's rank in its cluster and the cluster's size; the blocks of a cluster run
   * with rank 0 last, and each other block leaves a copy of its fragment at each cluster_reduce, its rank's
   * part of that statement's csnap */
  int64_t crank, csize;
  struct csnap {
    const tl_stmt *s;
    unsigned char *data; /* csize copies of the fragment (rank 0's part unused) */
  } *cs;
  int ncs, capcs;
  /* scratch */
  void *scr[4];
  size_t scr_cap[4];
} interp;

#define TRY(x)                                                                                     \
  do {                                                                                             \
    tl_status st_ = (x);                                                                           \
    if (st_ != TL_OK)                                                                              \
      return st_;                                                                                  \
  } while (0)

/* ---- types ------------------------------------------------------------------ */
static tl_dtype ty_dtype(tl_type t) {
  if (t == TL_TY_UREAL)
    return TL_FLOAT64;
  if (t >= 0 && t < TL_DTYPE_COUNT)
    return (tl_dtype)t;
  return TL_INT64; /* TL_TY_UINT (and TL_TY_NONE, which check never leaves) */
}
static bool ty_float(tl_type t) { return tl_dtype_is_float(ty_dtype(t)); }
static bool ty_unsigned(tl_type t) {
  tl_dtype d = ty_dtype(t);
  return d == TL_UINT8 || d == TL_UINT16 || d == TL_UINT32 || d == TL_UINT64 || d == TL_UINT4 || d == TL_UINT2 ||
         d == TL_UINT1;
}
static bool ty_untyped(tl_type t) { return t == TL_TY_UINT || t == TL_TY_UREAL; }

static tl_scalar conv(tl_scalar v, tl_type from, tl_type to) {
  tl_dtype f = ty_dtype(from), d = ty_dtype(to);
  if (f == d && f != TL_BOOL)
    return v;
  return tl_convert(v, f, d);
}

static double to_f64(tl_scalar v, tl_type from) { return conv(v, from, TL_FLOAT64).f; }

static tl_scalar from_f64(double x, tl_type to) {
  tl_scalar v;
  v.f = x;
  return conv(v, TL_FLOAT64, to);
}

static int64_t to_i64(tl_scalar v, tl_type ty) {
  if (ty_float(ty)) {
    if (isnan(v.f))
      return 0;
    if (v.f >= 9.2e18)
      return INT64_MAX;
    if (v.f <= -9.2e18)
      return INT64_MIN;
    return (int64_t)v.f;
  }
  if (ty_unsigned(ty))
    return v.u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v.u;
  return v.i;
}

/* The common type of two operand types, untyped constants included (they
 * act as int32/int64 and float64 / the other float type, as the checker
 * pins them); the typed rule is the checker's tl_common_dtype. */
static tl_type common_type(tl_type a, tl_type b) {
  if (ty_untyped(a) && ty_untyped(b))
    return a == TL_TY_UREAL || b == TL_TY_UREAL ? TL_TY_UREAL : TL_TY_UINT;
  if (ty_untyped(a)) {
    tl_type x = a;
    a = b;
    b = x;
  }
  if (b == TL_TY_UREAL)
    return ty_float(a) ? a : TL_FLOAT32;
  if (b == TL_TY_UINT)
    return ty_float(a) ? a : (tl_type)tl_common_dtype(ty_dtype(a), TL_INT64);
  return (tl_type)tl_common_dtype(ty_dtype(a), ty_dtype(b));
}

static double round_ty(tl_type t, double x) {
  tl_dtype d = ty_dtype(t);
  return d == TL_FLOAT64 ? x : tl_round_to(d, x);
}

static void fmt_val(char *buf, size_t n, tl_scalar v, tl_type ty) {
  if (ty_float(ty))
    snprintf(buf, n, "%.9g", v.f);
  else if (ty_unsigned(ty))
    snprintf(buf, n, "%" PRIu64, v.u);
  else
    snprintf(buf, n, "%" PRId64, v.i);
}

/* ---- errors ------------------------------------------------------------------ */
static void fmt_iter(const interp *I, int64_t it, char *buf, size_t n) {
  const tl_stmt *s = I->par_s;
  int64_t idx[TL_MAX_DIMS];
  for (int v = s->nvars - 1; v >= 0; v--) {
    int64_t e = I->par_ext[v] > 0 ? I->par_ext[v] : 1;
    idx[v] = it % e;
    it /= e;
  }
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "(");
  for (int v = 0; v < s->nvars && k < n; v++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s=%" PRId64, v ? ", " : "", s->vars[v]->name, idx[v]);
  if (k < n)
    snprintf(buf + k, n - k, ")");
}

/* Where the interpreter is, for messages: "in block (bx, by, bz), thread t". */
static void fmt_where(const interp *I, int t, char *buf, size_t n) {
  if (I->mode == MODE_STATIC) {
    buf[0] = 0;
    return;
  }
  size_t k = (size_t)snprintf(buf, n, "; in block (%" PRId64 ", %" PRId64 ", %" PRId64 ")", I->bidx[0], I->bidx[1],
                              I->bidx[2]);
  if (k >= n)
    return;
  if (I->mode == MODE_THREAD) {
    if (I->tdim[1] > 1 || I->tdim[2] > 1)
      snprintf(buf + k, n - k, ", thread %d (x=%" PRId64 ", y=%" PRId64 ", z=%" PRId64 ")", t, t % I->tdim[0],
               t / I->tdim[0] % I->tdim[1], t / (I->tdim[0] * I->tdim[1]));
    else
      snprintf(buf + k, n - k, ", thread %d", t);
  } else if (I->mode == MODE_PAR && I->par_s) {
    char it[200];
    fmt_iter(I, I->par_iter, it, sizeof it);
    snprintf(buf + k, n - k, ", iteration %s of the parallel loop at %s", it, I->par_s->pointer);
  }
}

static tl_status rt_err(interp *I, const char *pointer, int column, int t, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static tl_status rt_err(interp *I, const char *pointer, int column, int t, const char *fmt, ...) {
  char msg[700], where[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fmt_where(I, t, where, sizeof where);
  return tl_error_set_at(I->err, TL_RUNTIME, pointer ? pointer : "", column, "%s%s", msg, where);
}

static tl_status nomem(interp *I) { return tl_error_set(I->err, TL_NOMEM, "the interpreter ran out of memory"); }

static const char *scope_word(const tl_sym *s) {
  if (s->kind == SYM_TENSOR)
    return "tensor";
  return s->scope == SCOPE_SHARED ? "shared buffer" : s->scope == SCOPE_FRAGMENT ? "fragment" : "local buffer";
}

/* ---- scratch memory ------------------------------------------------------------ */
static void *scratch(interp *I, int k, int64_t n, size_t es) {
  if (n < 0 || (uint64_t)n > SIZE_MAX / es / 2)
    return NULL;
  size_t need = (size_t)(n ? n : 1) * es;
  if (I->scr_cap[k] < need) {
    size_t cap = I->scr_cap[k] ? I->scr_cap[k] : 4096;
    while (cap < need)
      cap *= 2;
    void *p = realloc(I->scr[k], cap);
    if (!p)
      return NULL;
    I->scr[k] = p;
    I->scr_cap[k] = cap;
  }
  return I->scr[k];
}

static void poison_bytes(unsigned char *p, tl_dtype dt, size_t n) {
  size_t es = tl_dtype_size(dt);
  if (!tl_dtype_is_float(dt) || dt == TL_FLOAT4_E2M1) { /* float4_e2m1 has no NaN */
    memset(p, 0xA5, n * es);
    return;
  }
  unsigned char pat[8];
  tl_scalar nan;
  nan.f = NAN;
  tl_store(pat, dt, nan);
  for (size_t i = 0; i < n; i++)
    memcpy(p + i * es, pat, es);
}

static tl_scalar poison_scalar(tl_dtype dt) {
  unsigned char pat[8];
  poison_bytes(pat, dt, 1);
  return tl_load(pat, dt);
}

/* ---- independence shadows -------------------------------------------------------- */
static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= UINT64_C(0xff51afd7ed558ccd);
  x ^= x >> 33;
  return x;
}

static void keymap_clear(keymap *m) {
  m->used = 0;
  if (++m->gen == 0) { /* wrapped: every slot's generation could come back */
    if (m->s)
      memset(m->s, 0, m->cap * sizeof *m->s);
    m->gen = 1;
  }
}

static void keymap_free(keymap *m) {
  free(m->s);
  memset(m, 0, sizeof *m);
}

/* The index key maps to, or -1. */
static int64_t keymap_get(const keymap *m, uint64_t key) {
  if (!m->cap || !m->gen)
    return -1;
  uint64_t mask = m->cap - 1;
  for (uint64_t h = mix64(key) & mask; m->s[h].gen == m->gen; h = (h + 1) & mask)
    if (m->s[h].key == key)
      return (int64_t)m->s[h].idx;
  return -1;
}

/* Maps key, which it does not hold, to idx; false when out of memory. */
static bool keymap_put(keymap *m, uint64_t key, uint64_t idx) {
  if (!m->gen)
    m->gen = 1;
  if ((m->used + 1) * 2 > m->cap) {
    uint64_t cap = m->cap ? m->cap * 2 : 256;
    kslot *ns = calloc(cap, sizeof *ns);
    if (!ns)
      return false;
    for (uint64_t i = 0; i < m->cap; i++)
      if (m->s[i].gen == m->gen) {
        uint64_t h = mix64(m->s[i].key) & (cap - 1);
        while (ns[h].gen == m->gen)
          h = (h + 1) & (cap - 1);
        ns[h] = m->s[i];
      }
    free(m->s);
    m->s = ns;
    m->cap = cap;
  }
  uint64_t mask = m->cap - 1, h = mix64(key) & mask;
  while (m->s[h].gen == m->gen)
    h = (h + 1) & mask;
  m->s[h] = (kslot){.key = key, .idx = idx, .gen = m->gen};
  m->used++;
  return true;
}

/* Room for one more of an array *p of *cap elements of es bytes, n in use;
 * false when out of memory. */
static bool room_for_one(void **p, uint64_t *cap, uint64_t n, size_t es) {
  if (n < *cap)
    return true;
  uint64_t c = *cap ? *cap * 2 : 256;
  void *np = realloc(*p, c * es);
  if (!np)
    return false;
  *p = np;
  *cap = c;
  return true;
}

static void shent_init(shent *e, uint64_t key, uint32_t gen) {
  e->key = key;
  e->gen = gen;
  e->w1 = e->w2 = e->r1 = e->r2 = -1;
}

/* The entry of element lin for the current parallel run, or NULL on OOM. */
static shent *shadow_get(interp *I, shadow *sh, int64_t nelem, uint64_t lin) {
  uint32_t g = I->par_gen;
  if (!sh->e && !sh->hashed) {
    if (nelem <= SHADOW_DIRECT_MAX) {
      sh->e = calloc((size_t)(nelem > 0 ? nelem : 1), sizeof *sh->e);
      if (!sh->e)
        return NULL;
      sh->cap = (uint64_t)nelem;
    } else
      sh->hashed = true;
  }
  if (!sh->hashed) {
    shent *e = &sh->e[lin];
    if (e->gen != g)
      shent_init(e, lin, g);
    return e;
  }
  if (sh->used_gen != g) {
    keymap_clear(&sh->km);
    sh->n = 0;
    sh->used_gen = g;
  }
  int64_t i = keymap_get(&sh->km, lin);
  if (i < 0) {
    if (!room_for_one((void **)&sh->e, &sh->cap, sh->n, sizeof *sh->e) || !keymap_put(&sh->km, lin, sh->n))
      return NULL;
    i = (int64_t)sh->n++;
    shent_init(&sh->e[i], lin, g);
  }
  return &sh->e[i];
}

static void shadow_free(shadow *sh) {
  free(sh->e);
  keymap_free(&sh->km);
  memset(sh, 0, sizeof *sh);
}

static void fmt_elem(const interp *I, const loc *L, char *buf, size_t n) {
  const tl_sym *s = L->sym;
  const int64_t *dim = s->kind == SYM_TENSOR ? I->tens[s->param_index].dim : s->dims;
  int64_t idx[TL_MAX_DIMS];
  uint64_t lin = L->lin;
  for (int d = s->ndim - 1; d >= 0; d--) {
    uint64_t e = dim[d] > 0 ? (uint64_t)dim[d] : 1;
    idx[d] = (int64_t)(lin % e);
    lin /= e;
  }
  size_t k = 0;
  buf[0] = 0;
  for (int d = 0; d < s->ndim && k < n; d++)
    k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? ", " : "", idx[d]);
}

static tl_status indep_err(interp *I, const loc *L, const tl_expr *at, int64_t w, int64_t other, bool write_write) {
  char el[160], a[200], b[200];
  fmt_elem(I, L, el, sizeof el);
  fmt_iter(I, w, a, sizeof a);
  fmt_iter(I, other, b, sizeof b);
  int mode = I->mode;
  I->mode = MODE_BLOCK; /* the message names the iterations itself */
  tl_status st = rt_err(I, at->pointer, at->column, I->t0,
                        "iterations of the parallel loop at %s are not independent: element [%s] of '%s' is "
                        "written by iteration %s and %s %s",
                        I->par_s->pointer, el, L->sym->name, a,
                        write_write ? "written with a different value by" : "read by", b);
  I->mode = mode;
  return st;
}

/* Records a read (bytes NULL) or a write of bytes at L by the current
 * iteration, reporting a conflict with another iteration. */
static tl_status par_mark(interp *I, const loc *L, const unsigned char *bytes, const tl_expr *at) {
  shent *e = shadow_get(I, L->sh, L->nelem, L->lin);
  if (!e)
    return nomem(I);
  int64_t it = I->par_iter;
  int64_t ow = e->w1 >= 0 && e->w1 != it ? e->w1 : e->w2 >= 0 && e->w2 != it ? e->w2 : -1;
  if (!bytes) {
    if (ow >= 0)
      return indep_err(I, L, at, ow, it, false);
    if (e->r1 < 0)
      e->r1 = it;
    else if (e->r1 != it && e->r2 < 0)
      e->r2 = it;
    return TL_OK;
  }
  int64_t orr = e->r1 >= 0 && e->r1 != it ? e->r1 : e->r2 >= 0 && e->r2 != it ? e->r2 : -1;
  if (orr >= 0)
    return indep_err(I, L, at, it, orr, false);
  if (ow >= 0 && memcmp(bytes, L->p, tl_dtype_size(L->dt)) != 0)
    return indep_err(I, L, at, ow, it, true);
  if (e->w1 < 0)
    e->w1 = it;
  else if (e->w1 != it && e->w2 < 0)
    e->w2 = it;
  return TL_OK;
}

/* ---- cross-block handover (proto/tile-ir-v1.md 9.1) -------------------------------------- */
/* Blocks run one after another, so a block's access to a global element
 * that an earlier block of the kernel wrote (or, for a store, read) is
 * checked when it happens: that block must have run, after its access, a
 * fencing sync_threads and then an atomic on some counter; the running
 * block an atomic on that counter counting the other's update (no reset
 * of it in between), then a fencing sync_threads.  Only tensors that some
 * statement of the kernel writes are tracked, so reading the inputs costs
 * one test per element. */
static xent *xget(xmap *m, uint64_t lin, bool *oom) {
  int64_t i = keymap_get(&m->km, lin);
  if (i >= 0)
    return &m->e[i];
  if (!room_for_one((void **)&m->e, &m->cap, m->n, sizeof *m->e) || !keymap_put(&m->km, lin, m->n)) {
    *oom = true;
    return NULL;
  }
  xent *x = &m->e[m->n++];
  memset(x, 0, sizeof *x);
  x->lin = lin;
  x->c.upd = x->c.resetter = -1;
  return x;
}

static void xmap_free(xmap *m) {
  free(m->e);
  keymap_free(&m->km);
}

/* Element lin's records in tensor ti (NULL: out of memory). */
static xrec *xrec_of(tinfo *ti, uint64_t lin) {
  if (ti->count <= XREC_DIRECT_MAX) {
    if (!ti->xr && !(ti->xr = calloc((size_t)(ti->count > 0 ? ti->count : 1), sizeof *ti->xr)))
      return NULL;
    return &ti->xr[lin];
  }
  bool oom = false;
  xent *x = xget(&ti->xm, lin, &oom);
  return x ? &x->r : NULL;
}

static const xblock *xblock_of(const interp *I, int64_t blk) {
  int64_t i = keymap_get(&I->xbk, (uint64_t)blk);
  return i < 0 ? NULL : &I->xb[i];
}

/* At a block's end: keep its record if it accessed a tracked element. */
static tl_status xblock_end(interp *I) {
  if (!I->xdirty)
    return TL_OK;
  if (!room_for_one((void **)&I->xb, &I->capxb, I->nxb, sizeof *I->xb) ||
      !keymap_put(&I->xbk, (uint64_t)I->blk, I->nxb))
    return nomem(I);
  I->xb[I->nxb++] = (xblock){.blk = I->blk, .ev0 = I->xev0, .ev1 = I->nxev, .fences = I->xfence};
  return TL_OK;
}

static void fmt_block(const interp *I, int64_t blk, char *buf, size_t n) {
  int64_t gx = I->grid[0] > 0 ? I->grid[0] : 1, gy = I->grid[1] > 0 ? I->grid[1] : 1;
  snprintf(buf, n, "block (%" PRId64 ", %" PRId64 ", %" PRId64 ")", blk % gx, blk / gx % gy, blk / (gx * gy));
}

static void fmt_tensor_elem(const interp *I, const tl_sym *s, uint64_t lin, char *buf, size_t n) {
  loc L = {.sym = s, .lin = lin};
  char el[160];
  fmt_elem(I, &L, el, sizeof el);
  snprintf(buf, n, "%s[%s]", s->name, el);
}

/* Was what block w did to an element (`what`: its "store" or its "read",
 * after wfence of its fencing sync_threads) handed over to the running
 * block (9.1)?  If not, what is missing, in why. */
static bool xhanded(const interp *I, int64_t w, uint32_t wfence, const char *what, char *why, size_t n) {
  char wb[96], cn[200];
  fmt_block(I, w, wb, sizeof wb);
  const xblock *W = xblock_of(I, w);
  if (!W || W->fences <= wfence) {
    snprintf(why, n, "%s ran no fencing sync_threads after its %s", wb, what);
    return false;
  }
  int best = 0; /* how far the best counter got: 1 no atomic of ours on it, 2 no fence after ours */
  const xevent *early = NULL; /* an atomic of w's before the fence that follows its access */
  for (size_t i = W->ev0; i < W->ev1; i++) {
    const xevent *u = &I->xev[i];
    if (u->fence <= wfence) {
      early = early ? early : u;
      continue;
    }
    int got = 1; /* (an update of ours counts u: it comes later, and no block sets a counter back before every
                  * update has happened, xupdate) */
    for (size_t j = I->xev0; j < I->nxev; j++) {
      const xevent *v = &I->xev[j];
      if (v->sym != u->sym || v->lin != u->lin)
        continue;
      if (I->xfence > v->fence)
        return true;
      got = 2;
    }
    if (got > best) {
      best = got;
      fmt_tensor_elem(I, u->sym, u->lin, cn, sizeof cn);
    }
  }
  if (!best && early) {
    fmt_tensor_elem(I, early->sym, early->lin, cn, sizeof cn);
    snprintf(why, n, "%s ran no fencing sync_threads between its %s and its atomic on %s", wb, what, cn);
  } else if (!best)
    snprintf(why, n, "%s ran no atomic after its %s and a fencing sync_threads", wb, what);
  else if (best == 1)
    snprintf(why, n, "no atomic's old of this block counts the update of %s by %s after its %s and a fencing "
             "sync_threads (this block ran no atomic on %s)", cn, wb, what, cn);
  else
    snprintf(why, n, "this block ran no fencing sync_threads between its atomic on %s and this access", cn);
  return false;
}

/* A plain read (v NULL) or store of v (dtype dt) at element lin of global
 * tensor s, whose bytes are at p, by the running block (9.1, and 5.9 for an
 * element atomics update). */
static tl_status xaccess(interp *I, const tl_sym *s, uint64_t lin, const tl_scalar *v, tl_dtype dt,
                         const unsigned char *p, const char *ptr, int col, int t) {
  tinfo *ti = &I->tens[s->param_index];
  if (!ti->xw) /* only read in this kernel */
    return TL_OK;
  char el[200], ob[96], why[800];
  int64_t me = I->blk;
  if (ti->xa) { /* a counter? */
    bool oom = false;
    xent *c = xget(&ti->xc, lin, &oom);
    if (!c)
      return nomem(I);
    xcnt *x = &c->c;
    if (x->upd >= 0) { /* updated by atomics since it was last set back */
      bool others = x->upd_many || x->upd != me;
      fmt_tensor_elem(I, s, lin, el, sizeof el);
      if (x->upd != me)
        fmt_block(I, x->upd, ob, sizeof ob);
      else
        snprintf(ob, sizeof ob, "other blocks");
      if (!v && others)
        return rt_err(I, ptr, col, t,
                      "reads %s, which %s update%s by atomics in this kernel, with a plain read (9.1, 5.9: another "
                      "block reads it only through an atomic's old)", el, ob, x->upd != me ? "s" : "");
      if (v) { /* a store: the reset 9.1 allows, by the block whose atomic saw every update before it */
        if (!(x->last_ev >= I->xev0 && x->last_ev < I->nxev))
          return rt_err(I, ptr, col, t,
                        "writes %s, which %s update%s by atomics in this kernel, after the last update of it was "
                        "another block's (9.1: only the block whose atomic's old counts every other update may set "
                        "a counter back)", el, ob, x->upd != me ? "s" : "");
        x->resetter = me;
        x->upd = -1;
        x->upd_many = false;
      }
    }
  }
  xrec *r = xrec_of(ti, lin);
  if (!r)
    return nomem(I);
  bool same = false;
  if (v) {
    unsigned char b[8];
    tl_store(b, dt, *v);
    same = memcmp(b, p, ti->es) == 0; /* blocks may write the same value (9.1) */
  }
  int64_t o = -1;
  const char *how = NULL;
  if (r->writer && r->writer - 1 != me && !same && !xhanded(I, r->writer - 1, r->wfence, "store", why, sizeof why))
    o = r->writer - 1, how = "wrote";
  else if (v && r->reader && r->reader - 1 != me && !same &&
           !xhanded(I, r->reader - 1, r->rfence, "read", why, sizeof why))
    o = r->reader - 1, how = "read before";
  if (o >= 0) {
    fmt_tensor_elem(I, s, lin, el, sizeof el);
    fmt_block(I, o, ob, sizeof ob);
    return rt_err(I, ptr, col, t, "%s %s, which %s %s, without the handover of 9.1: %s",
                  v ? "writes a different value to" : "reads", el, ob, how, why);
  }
  if (v) {
    r->writer = me + 1;
    r->wfence = I->xfence;
  } else {
    r->reader = me + 1;
    r->rfence = I->xfence;
  }
  I->xdirty = true;
  return TL_OK;
}

/* tl_walk's pre: marks the tensors statement s writes (tinfo.xw) and those
 * atomics update (tinfo.xa). */
static tl_walk_act mark_written(tl_stmt *s, void *user) {
  interp *I = user;
  const tl_sym *t = NULL;
  switch (s->kind) {
  case S_ASSIGN: case S_ATOMIC:
    t = s->lhs && s->lhs->kind == E_INDEX ? s->lhs->sym : NULL;
    break;
  case S_COPY: case S_FILL: case S_REDUCE: case S_CUMSUM: case S_ATOMIC_ADD:
    t = s->dst ? s->dst->sym : NULL;
    break;
  default:
    break;
  }
  if (t && t->kind == SYM_TENSOR) {
    I->tens[t->param_index].xw = true;
    I->tens[t->param_index].xa |= s->kind == S_ATOMIC || s->kind == S_ATOMIC_ADD;
  }
  return TL_WALK_GO;
}

/* An atomic update of element lin of global tensor s by the running block. */
static tl_status xupdate(interp *I, const tl_sym *s, uint64_t lin, const char *ptr, int col, int t) {
  tinfo *ti = &I->tens[s->param_index];
  bool oom = false;
  xent *c = xget(&ti->xc, lin, &oom);
  xrec *r = c ? xrec_of(ti, lin) : NULL;
  if (!r)
    return nomem(I);
  xcnt *x = &c->c;
  int64_t me = I->blk;
  char el[200], ob[96];
  if (x->resetter >= 0 && x->resetter != me) {
    fmt_tensor_elem(I, s, lin, el, sizeof el);
    fmt_block(I, x->resetter, ob, sizeof ob);
    return rt_err(I, ptr, col, t,
                  "updates %s after %s set it back (9.1: a counter is set back once every update of the launch "
                  "has happened)", el, ob);
  }
  if ((r->writer && r->writer - 1 != me) || (r->reader && r->reader - 1 != me)) {
    bool w = r->writer && r->writer - 1 != me;
    fmt_tensor_elem(I, s, lin, el, sizeof el);
    fmt_block(I, (w ? r->writer : r->reader) - 1, ob, sizeof ob);
    return rt_err(I, ptr, col, t, "updates %s by an atomic, which %s %s in this kernel (5.9: no other block "
                  "reads or writes what atomics change, but through old and the reset of 9.1)", el, ob,
                  w ? "wrote with a plain store" : "read with a plain read");
  }
  if (I->nxev == I->capxev) {
    size_t cap = I->capxev ? I->capxev * 2 : 256;
    xevent *ne = realloc(I->xev, cap * sizeof *ne);
    if (!ne)
      return nomem(I);
    I->xev = ne;
    I->capxev = cap;
  }
  I->xev[I->nxev] = (xevent){.sym = s, .lin = lin, .fence = I->xfence};
  x->last_ev = I->nxev++;
  if (x->upd < 0)
    x->upd = me;
  else if (x->upd != me)
    x->upd_many = true;
  I->xdirty = true;
  return TL_OK;
}

/* ---- expressions ------------------------------------------------------------------ */
static tl_status eval(interp *I, const tl_expr *e, int t, tl_scalar *out);

static tl_status eval_i64(interp *I, const tl_expr *e, int t, int64_t *out) {
  tl_scalar v;
  TRY(eval(I, e, t, &v));
  *out = to_i64(v, e->type);
  return TL_OK;
}

static tl_status eval_truth(interp *I, const tl_expr *e, int t, bool *out) {
  tl_scalar v;
  TRY(eval(I, e, t, &v));
  *out = conv(v, e->type, TL_BOOL).i != 0;
  return TL_OK;
}

static tl_type sym_vtype(const tl_sym *s) {
  switch (s->kind) {
  case SYM_BLOCK_VAR: case SYM_LOOP_VAR: return TL_INT32;
  case SYM_VAR: case SYM_SCALAR: return (tl_type)s->dtype;
  default: return s->type;
  }
}

static unsigned char *buf_base(const interp *I, const tl_sym *s, int t) {
  const binfo *b = &I->bufs[s->slot];
  return b->data + (s->scope == SCOPE_LOCAL ? (size_t)t * (size_t)b->nelem * b->es : 0);
}

/* A value read inside a parallel loop must be the same in every thread. */
static tl_status par_uniform_slot(interp *I, const tl_sym *s, const tl_expr *at) {
  int slot = s->slot;
  if (I->slot_gen[slot] == I->par_gen || I->slot_ok[slot] == I->par_gen)
    return TL_OK;
  const tl_scalar *v = I->vals + (size_t)slot * (size_t)I->T;
  for (int t = 0; t < I->T; t++)
    if (v[t].u != v[I->t0].u) {
      char a[64], b[64];
      fmt_val(a, sizeof a, v[I->t0], sym_vtype(s));
      fmt_val(b, sizeof b, v[t], sym_vtype(s));
      return rt_err(I, at->pointer, at->column, I->t0,
                    "'%s' is read inside a parallel loop but differs between the threads of the block "
                    "(thread %d holds %s, thread %d holds %s)", s->name, I->t0, a, t, b);
    }
  I->slot_ok[slot] = I->par_gen;
  return TL_OK;
}

static tl_status read_name(interp *I, const tl_expr *e, int t, tl_scalar *out) {
  const tl_sym *s = e->sym;
  if (!s)
    return rt_err(I, e->pointer, e->column, t, "'%s' is not resolved (the program was not checked)",
                  e->name ? e->name : "?");
  tl_scalar v;
  tl_type ty;
  switch (s->kind) {
  case SYM_CONST:
    v = s->cval;
    ty = s->type;
    break;
  case SYM_SCALAR:
    v = I->args[s->param_index].scalar;
    ty = (tl_type)s->dtype;
    break;
  case SYM_BLOCK_VAR: case SYM_LOOP_VAR: case SYM_LET: case SYM_VAR:
    if (!I->vals || s->slot < 0 || s->slot >= I->prog->nvalue_slots)
      return rt_err(I, e->pointer, e->column, t, "'%s' has no value here; only constants and scalar parameters "
                                                 "may be used", s->name);
    if (I->mode == MODE_PAR && s->kind != SYM_BLOCK_VAR)
      TRY(par_uniform_slot(I, s, e));
    v = I->vals[(size_t)s->slot * (size_t)I->T + (size_t)t];
    ty = sym_vtype(s);
    break;
  default:
    return rt_err(I, e->pointer, e->column, t, "'%s' is not a value", s->name);
  }
  *out = conv(v, ty, e->type);
  return TL_OK;
}

/* Finds the element e (an E_INDEX) names for thread t. */
static tl_status locate(interp *I, const tl_expr *e, int t, loc *L) {
  const tl_sym *s = e->sym;
  memset(L, 0, sizeof *L);
  if (!s || (s->kind != SYM_TENSOR && s->kind != SYM_BUFFER))
    return rt_err(I, e->pointer, e->column, t, "'%s' is not a buffer", e->name ? e->name : "?");
  if (I->mode == MODE_STATIC || !I->tens)
    return rt_err(I, e->pointer, e->column, t, "buffer elements cannot be read here");
  if (e->nargs != s->ndim)
    return rt_err(I, e->pointer, e->column, t, "'%s' has %d dimensions but %d indices are given", s->name, s->ndim,
                  e->nargs);
  int64_t idx[TL_MAX_DIMS];
  for (int d = 0; d < s->ndim; d++)
    TRY(eval_i64(I, e->args[d], t, &idx[d]));
  L->sym = s;
  uint64_t lin = 0;
  if (s->kind == SYM_TENSOR) {
    tinfo *ti = &I->tens[s->param_index];
    L->dt = ti->dt;
    for (int d = 0; d < s->ndim; d++) {
      if (idx[d] < 0 || idx[d] >= ti->dim[d])
        return TL_OK; /* outside: reads 0, writes are dropped */
      lin += (uint64_t)idx[d] * (uint64_t)ti->stride[d];
    }
    L->p = ti->data + lin * ti->es;
    L->sh = &ti->sh;
    L->nelem = ti->count;
  } else {
    binfo *b = &I->bufs[s->slot];
    L->dt = b->dt;
    for (int d = 0; d < s->ndim; d++) {
      if (idx[d] < 0 || idx[d] >= s->dims[d])
        return rt_err(I, e->args[d]->pointer, e->args[d]->column, t,
                      "index %" PRId64 " is outside dimension %d of %s '%s' (size %" PRId64 ")", idx[d], d,
                      scope_word(s), s->name, s->dims[d]);
      lin += (uint64_t)idx[d] * (uint64_t)b->stride[d];
    }
    L->p = buf_base(I, s, t) + lin * b->es;
    L->sh = s->scope == SCOPE_LOCAL ? NULL : &b->sh;
    L->nelem = b->nelem;
  }
  L->lin = lin;
  return TL_OK;
}

/* A local buffer element read inside a parallel loop (the checker forbids
 * it; kept safe): it must be the same in every thread. */
static tl_status par_uniform_local(interp *I, const loc *L, const tl_expr *at) {
  const binfo *b = &I->bufs[L->sym->slot];
  const unsigned char *p0 = buf_base(I, L->sym, I->t0) + L->lin * b->es;
  for (int t = 0; t < I->T; t++)
    if (memcmp(buf_base(I, L->sym, t) + L->lin * b->es, p0, b->es) != 0)
      return rt_err(I, at->pointer, at->column, I->t0,
                    "local buffer '%s' is read inside a parallel loop but differs between threads %d and %d",
                    L->sym->name, I->t0, t);
  return TL_OK;
}

static tl_status read_index(interp *I, const tl_expr *e, int t, tl_scalar *out) {
  loc L;
  TRY(locate(I, e, t, &L));
  tl_scalar v;
  v.u = 0;
  if (L.p) {
    if (I->mode == MODE_PAR) {
      if (L.sym->kind == SYM_BUFFER && L.sym->scope == SCOPE_LOCAL)
        TRY(par_uniform_local(I, &L, e));
      else if (I->check_par && L.sh)
        TRY(par_mark(I, &L, NULL, e));
    }
    if (L.sym->kind == SYM_TENSOR && I->tens[L.sym->param_index].xw)
      TRY(xaccess(I, L.sym, L.lin, NULL, L.dt, L.p, e->pointer, e->column, t));
    v = tl_load(L.p, L.dt);
  }
  *out = conv(v, (tl_type)L.dt, e->type);
  return TL_OK;
}

static double py_mod(double x, double y) {
  if (y == 0)
    return NAN;
  double m = fmod(x, y);
  if (m != 0) {
    if ((y < 0) != (m < 0))
      m += y;
  } else
    m = copysign(0.0, y);
  return m;
}

static double py_floordiv(double x, double y) {
  if (y == 0)
    return x / y;
  double m = fmod(x, y), div = (x - m) / y;
  if (m != 0 && ((y < 0) != (m < 0)))
    div -= 1.0;
  if (div == 0)
    return copysign(0.0, x / y);
  double fd = floor(div);
  if (div - fd > 0.5)
    fd += 1.0;
  return fd;
}

static bool is_shift(int op) { return op == OP_SHL || op == OP_SHR; }
static bool is_cmp(int op) {
  return op == '<' || op == '>' || op == OP_LE || op == OP_GE || op == OP_EQ || op == OP_NE;
}

/* a OP b in type rt: a is of type rt; b too, except for shifts (type bt). */
static tl_status arith(interp *I, const tl_expr *at, int t, int op, tl_scalar a, tl_scalar b, tl_type bt, tl_type rt,
                       tl_scalar *out) {
  tl_dtype d = ty_dtype(rt);
  if (tl_dtype_is_float(d)) {
    double x = a.f, y = b.f, r;
    switch (op) {
    case '+': r = x + y; break;
    case '-': r = x - y; break;
    case '*': r = x * y; break;
    case '/': r = x / y; break;
    case OP_FLOORDIV: r = py_floordiv(x, y); break;
    case '%': r = py_mod(x, y); break;
    default:
      return rt_err(I, at->pointer, at->column, t, "operator '%s' is not defined for %s", tl_op_text(op),
                    tl_dtype_name(d));
    }
    out->f = round_ty(rt, r);
    return TL_OK;
  }
  bool uns = ty_unsigned(rt);
  tl_scalar r;
  if (is_shift(op)) {
    int bits = tl_dtype_bits(d);
    int64_t c = to_i64(b, bt);
    if (c < 0 || c >= bits)
      return rt_err(I, at->pointer, at->column, t, "shift count %" PRId64 " is outside [0, %d) for %s", c, bits,
                    tl_dtype_name(d));
    if (op == OP_SHL)
      r.u = a.u << c;
    else if (uns)
      r.u = a.u >> c;
    else
      r.i = a.i >= 0 ? a.i >> c : ~(~a.i >> c);
    *out = tl_convert(r, uns ? TL_UINT64 : TL_INT64, d);
    return TL_OK;
  }
  bool div = op == OP_FLOORDIV || op == '/' || op == '%';
  if (div && b.u == 0)
    return rt_err(I, at->pointer, at->column, t, "integer %s by zero", op == '%' ? "modulo" : "division");
  if (uns) {
    uint64_t x = a.u, y = b.u;
    switch (op) {
    case '+': r.u = x + y; break;
    case '-': r.u = x - y; break;
    case '*': r.u = x * y; break;
    case '/': case OP_FLOORDIV: r.u = x / y; break;
    case '%': r.u = x % y; break;
    case '&': r.u = x & y; break;
    case '|': r.u = x | y; break;
    case '^': r.u = x ^ y; break;
    default:
      return rt_err(I, at->pointer, at->column, t, "operator '%s' is not defined for %s", tl_op_text(op),
                    tl_dtype_name(d));
    }
    *out = tl_convert(r, TL_UINT64, d);
    return TL_OK;
  }
  int64_t x = a.i, y = b.i;
  switch (op) {
  case '+': r.u = (uint64_t)x + (uint64_t)y; break;
  case '-': r.u = (uint64_t)x - (uint64_t)y; break;
  case '*': r.u = (uint64_t)x * (uint64_t)y; break;
  case '/': case OP_FLOORDIV: case '%': {
    int64_t q, m;
    if (x == INT64_MIN && y == -1) {
      q = INT64_MIN;
      m = 0;
    } else {
      q = x / y;
      m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        q--;
        m += y;
      }
    }
    r.i = op == '%' ? m : q;
    break;
  }
  case '&': r.i = x & y; break;
  case '|': r.i = x | y; break;
  case '^': r.i = x ^ y; break;
  default:
    return rt_err(I, at->pointer, at->column, t, "operator '%s' is not defined for %s", tl_op_text(op),
                  tl_dtype_name(d));
  }
  *out = tl_convert(r, TL_INT64, d);
  return TL_OK;
}

/* Mathematical comparison of two integers (signed .i or unsigned .u). */
static int icmp(tl_scalar a, bool as, tl_scalar b, bool bs) {
  if (as && bs)
    return a.i < b.i ? -1 : a.i > b.i;
  if (!as && !bs)
    return a.u < b.u ? -1 : a.u > b.u;
  if (as)
    return a.i < 0 ? -1 : (uint64_t)a.i < b.u ? -1 : (uint64_t)a.i > b.u;
  return b.i < 0 ? 1 : a.u < (uint64_t)b.i ? -1 : a.u > (uint64_t)b.i;
}

static bool compare(int op, tl_scalar a, tl_type ta, tl_scalar b, tl_type tb) {
  tl_type ct = common_type(ta, tb);
  int c;
  if (ty_float(ct)) {
    double x = conv(a, ta, ct).f, y = conv(b, tb, ct).f;
    if (isnan(x) || isnan(y))
      return op == OP_NE;
    c = x < y ? -1 : x > y;
  } else {
    /* bool operands hold 0/1 in .i; normalise non-canonical ones */
    if (ty_dtype(ta) == TL_BOOL)
      a.i = a.u != 0;
    if (ty_dtype(tb) == TL_BOOL)
      b.i = b.u != 0;
    c = icmp(a, !ty_unsigned(ta), b, !ty_unsigned(tb));
  }
  switch (op) {
  case '<': return c < 0;
  case '>': return c > 0;
  case OP_LE: return c <= 0;
  case OP_GE: return c >= 0;
  case OP_EQ: return c == 0;
  default: return c != 0;
  }
}

static tl_status eval_binary(interp *I, const tl_expr *e, int t, tl_scalar *out) {
  int op = e->op;
  tl_scalar a, b, r;
  if (e->nargs != 2)
    return rt_err(I, e->pointer, e->column, t, "malformed operator node");
  const tl_expr *ea = e->args[0], *eb = e->args[1];
  if (op == OP_AND || op == OP_OR) {
    bool x, y = false;
    TRY(eval_truth(I, ea, t, &x));
    if (op == OP_AND ? x : !x)
      TRY(eval_truth(I, eb, t, &y));
    r.i = op == OP_AND ? (x && y) : (x || y);
    *out = conv(r, TL_BOOL, e->type);
    return TL_OK;
  }
  TRY(eval(I, ea, t, &a));
  TRY(eval(I, eb, t, &b));
  if (is_cmp(op)) {
    r.i = compare(op, a, ea->type, b, eb->type);
    *out = conv(r, TL_BOOL, e->type);
    return TL_OK;
  }
  tl_type rt = e->type;
  a = conv(a, ea->type, rt);
  if (!is_shift(op))
    b = conv(b, eb->type, rt);
  return arith(I, e, t, op, a, b, eb->type, rt, out);
}

static tl_status eval_unary(interp *I, const tl_expr *e, int t, tl_scalar *out) {
  tl_scalar a, r;
  if (e->nargs != 1)
    return rt_err(I, e->pointer, e->column, t, "malformed operator node");
  const tl_expr *ea = e->args[0];
  if (e->op == OP_NOT) {
    bool x;
    TRY(eval_truth(I, ea, t, &x));
    r.i = !x;
    *out = conv(r, TL_BOOL, e->type);
    return TL_OK;
  }
  TRY(eval(I, ea, t, &a));
  tl_type rt = e->type;
  a = conv(a, ea->type, rt);
  tl_dtype d = ty_dtype(rt);
  if (tl_dtype_is_float(d)) {
    if (e->op != '-')
      return rt_err(I, e->pointer, e->column, t, "'~' is not defined for %s", tl_dtype_name(d));
    out->f = -a.f;
    return TL_OK;
  }
  if (d == TL_BOOL)
    a.u = a.u != 0;
  r.u = e->op == '-' ? 0 - a.u : ~a.u;
  *out = tl_convert(r, ty_unsigned(rt) ? TL_UINT64 : TL_INT64, d);
  return TL_OK;
}

static tl_status eval_call(interp *I, const tl_expr *e, int t, tl_scalar *out) {
  tl_type rt = e->type;
  tl_scalar v[3], r;
  /* the arguments after check: a dtype argument is not one */
  int need = e->fn == FN_INFINITY || e->fn == FN_MAX_VALUE || e->fn == FN_MIN_VALUE ? 0
             : e->fn == FN_CAST || e->fn == FN_REINTERPRET                          ? 1
                                                                                    : tl_fn_nargs(e->fn);
  if ((unsigned)e->fn >= FN_COUNT || e->fn == FN_NONE || e->nargs < need)
    return rt_err(I, e->pointer, e->column, t, "malformed call of '%s'", e->name ? e->name : "?");
  const tl_expr *const *a = (const tl_expr *const *)e->args;
  switch (e->fn) {
  case FN_IF_THEN_ELSE: {
    bool c;
    TRY(eval_truth(I, a[0], t, &c));
    const tl_expr *side = c ? a[1] : a[2];
    TRY(eval(I, side, t, &r));
    *out = conv(r, side->type, rt);
    return TL_OK;
  }
  case FN_THREAD_BINDING: {
    int64_t d;
    TRY(eval_i64(I, a[0], t, &d));
    if (d < 0 || d > 2)
      return rt_err(I, e->pointer, e->column, t, "thread_binding takes 0, 1 or 2, not %" PRId64, d);
    if (I->mode == MODE_STATIC)
      return rt_err(I, e->pointer, e->column, t, "thread_binding cannot be used here");
    if (I->mode == MODE_PAR && I->tdim[d] > 1)
      return rt_err(I, e->pointer, e->column, t, "thread_binding(%" PRId64 ") is used inside a parallel loop, whose "
                                                 "iterations are not tied to threads", d);
    int64_t x = d == 0 ? t % I->tdim[0] : d == 1 ? t / I->tdim[0] % I->tdim[1] : t / (I->tdim[0] * I->tdim[1]);
    r.i = x;
    *out = conv(r, TL_INT32, rt);
    return TL_OK;
  }
  case FN_INFINITY:
  case FN_MAX_VALUE:
  case FN_MIN_VALUE: {
    tl_dtype d = e->dtype_arg;
    if ((unsigned)d >= TL_DTYPE_COUNT || (e->fn == FN_INFINITY && !tl_dtype_is_float(d)))
      return rt_err(I, e->pointer, e->column, t, "malformed call of '%s'", tl_fn_name(e->fn));
    if (e->fn == FN_INFINITY)
      r.f = d == TL_FLOAT8_E4M3 ? tl_dtype_max(d).f : INFINITY;
    else
      r = e->fn == FN_MAX_VALUE ? tl_dtype_max(d) : tl_dtype_min(d);
    *out = conv(r, (tl_type)d, rt);
    return TL_OK;
  }
  case FN_CAST:
  case FN_REINTERPRET: {
    tl_dtype d = e->dtype_arg;
    if ((unsigned)d >= TL_DTYPE_COUNT)
      return rt_err(I, e->pointer, e->column, t, "malformed call of '%s'", tl_fn_name(e->fn));
    TRY(eval(I, a[0], t, &r));
    if (e->fn == FN_CAST)
      r = conv(r, a[0]->type, (tl_type)d);
    else {
      tl_dtype f = ty_dtype(a[0]->type);
      if (tl_dtype_bits(f) != tl_dtype_bits(d))
        return rt_err(I, e->pointer, e->column, t, "reinterpret needs the same bit width (%s and %s)",
                      tl_dtype_name(f), tl_dtype_name(d));
      r = tl_reinterpret(r, f, d);
    }
    *out = conv(r, (tl_type)d, rt);
    return TL_OK;
  }
  default:
    break;
  }
  int n = need;
  for (int i = 0; i < n; i++)
    TRY(eval(I, a[i], t, &v[i]));
  tl_dtype d = ty_dtype(rt);
  switch (e->fn) {
  case FN_CEILDIV: {
    if (tl_dtype_is_float(d))
      return rt_err(I, e->pointer, e->column, t, "ceildiv is for integers");
    tl_scalar x = conv(v[0], a[0]->type, rt), y = conv(v[1], a[1]->type, rt);
    if (y.u == 0)
      return rt_err(I, e->pointer, e->column, t, "integer division by zero in ceildiv");
    if (ty_unsigned(rt))
      r.u = x.u / y.u + (x.u % y.u != 0);
    else if (x.i == INT64_MIN && y.i == -1)
      r.i = INT64_MIN;
    else {
      int64_t q = x.i / y.i;
      if (x.i % y.i != 0 && ((x.i < 0) == (y.i < 0)))
        q++;
      r.i = q;
    }
    *out = tl_convert(r, ty_unsigned(rt) ? TL_UINT64 : TL_INT64, d);
    return TL_OK;
  }
  case FN_ISNAN:
  case FN_ISINF: {
    tl_type at = a[0]->type;
    bool f = at == TL_TY_UREAL || (at >= 0 && at < TL_DTYPE_COUNT && tl_dtype_is_float((tl_dtype)at));
    double x = f ? conv(v[0], at, TL_FLOAT64).f : 0.0;
    r.i = e->fn == FN_ISNAN ? isnan(x) : isinf(x);
    *out = conv(r, TL_BOOL, rt);
    return TL_OK;
  }
  case FN_CLAMP: { /* min(max(x, lo), hi) */
    tl_scalar x = conv(v[0], a[0]->type, rt), lo = conv(v[1], a[1]->type, rt), hi = conv(v[2], a[2]->type, rt);
    if (tl_dtype_is_float(d))
      out->f = fmin(fmax(x.f, lo.f), hi.f);
    else {
      bool sg = !ty_unsigned(rt);
      tl_scalar m = icmp(x, sg, lo, sg) >= 0 ? x : lo;
      *out = icmp(m, sg, hi, sg) <= 0 ? m : hi;
    }
    return TL_OK;
  }
  case FN_MIN:
  case FN_MAX: {
    tl_scalar x = conv(v[0], a[0]->type, rt), y = conv(v[1], a[1]->type, rt);
    bool mn = e->fn == FN_MIN;
    if (tl_dtype_is_float(d))
      out->f = mn ? fmin(x.f, y.f) : fmax(x.f, y.f);
    else {
      int c = icmp(x, !ty_unsigned(rt), y, !ty_unsigned(rt));
      *out = (mn ? c <= 0 : c >= 0) ? x : y;
    }
    return TL_OK;
  }
  case FN_ABS: {
    tl_scalar x = conv(v[0], a[0]->type, rt);
    if (tl_dtype_is_float(d))
      out->f = fabs(x.f);
    else if (ty_unsigned(rt))
      *out = x;
    else {
      r.u = x.i < 0 ? 0 - x.u : x.u;
      *out = tl_convert(r, TL_INT64, d);
    }
    return TL_OK;
  }
  default:
    break;
  }
  /* math functions: arguments in the node's float type, computed in double */
  tl_type ft = tl_dtype_is_float(d) ? rt : TL_FLOAT64;
  double x[3];
  for (int i = 0; i < n; i++)
    x[i] = conv(v[i], a[i]->type, ft).f;
  double y;
  switch (e->fn) {
  case FN_POW: y = pow(x[0], x[1]); break;
  case FN_FMA: y = fma(x[0], x[1], x[2]); break;
  default:
    if (n != 1 || !tl_math1(e->fn, x[0], &y))
      return rt_err(I, e->pointer, e->column, t, "unknown function '%s'", tl_fn_name(e->fn));
  }
  *out = from_f64(y, rt);
  return TL_OK;
}

static tl_status eval(interp *I, const tl_expr *e, int t, tl_scalar *out) {
  switch (e->kind) {
  case E_CONST:
    *out = e->val;
    return TL_OK;
  case E_NAME:
    return read_name(I, e, t, out);
  case E_INDEX:
    return read_index(I, e, t, out);
  case E_UNARY:
    return eval_unary(I, e, t, out);
  case E_BINARY:
    return eval_binary(I, e, t, out);
  case E_CALL:
    return eval_call(I, e, t, out);
  }
  return rt_err(I, e->pointer, e->column, t, "malformed expression");
}

/* ---- assignments ---------------------------------------------------------------- */
static tl_scalar add_into(tl_scalar old, tl_dtype dt, tl_scalar v, tl_type vt);
static tl_status check_value_sym(interp *I, const tl_stmt *s, const tl_sym *y);
static tl_status check_buffer_sym(interp *I, const tl_stmt *s, const tl_sym *y);
static tl_status atomic_apply(interp *I, const tl_stmt *s, int t);
/* Computes thread t's store of assignment s into pd (no memory is written). */
static tl_status assign_prepare(interp *I, const tl_stmt *s, int t, pending *pd, loc *L) {
  const tl_expr *lhs = s->lhs;
  memset(pd, 0, sizeof *pd);
  memset(L, 0, sizeof *L);
  if (lhs->kind == E_NAME) {
    const tl_sym *y = lhs->sym;
    if (!y || y->kind != SYM_VAR || y->slot < 0 || y->slot >= I->prog->nvalue_slots)
      return rt_err(I, lhs->pointer, lhs->column, t, "only alloc_var variables and buffer elements can be assigned");
    if (I->mode == MODE_PAR)
      return rt_err(I, lhs->pointer, lhs->column, t, "variable '%s' is per-thread; a parallel loop may not assign it",
                    y->name);
    pd->slot = &I->vals[(size_t)y->slot * (size_t)I->T + (size_t)t];
    pd->dt = y->dtype;
  } else if (lhs->kind == E_INDEX) {
    TRY(locate(I, lhs, t, L));
    if (I->mode == MODE_PAR && L->sym->kind == SYM_BUFFER && L->sym->scope == SCOPE_LOCAL)
      return rt_err(I, lhs->pointer, lhs->column, t, "local buffer '%s' is per-thread; a parallel loop may not "
                                                     "assign it", L->sym->name);
    pd->p = L->p;
    pd->dt = L->dt;
    if (L->p && L->sym->kind == SYM_TENSOR) {
      pd->xs = L->sym;
      pd->xlin = L->lin;
    }
  } else
    return rt_err(I, s->pointer, 0, t, "malformed assignment");
  tl_scalar rhs;
  TRY(eval(I, s->value, t, &rhs));
  tl_type vt = s->value->type;
  /* the checker turned `x op= e` into `x = x op e`: value is what to store */
  pd->v = conv(rhs, vt, (tl_type)pd->dt);
  return TL_OK;
}

static void pending_store(const pending *pd) {
  if (pd->slot)
    *pd->slot = pd->v;
  else if (pd->p)
    tl_store(pd->p, pd->dt, pd->v);
}

/* Thread-level assignment: every active thread computes, then all store. */
static tl_status thread_assign(interp *I, const tl_stmt *s, const unsigned char *mask) {
  loc L;
  for (int t = 0; t < I->T; t++)
    if (mask[t])
      TRY(assign_prepare(I, s, t, &I->pend[t], &L));
  for (int t = 0; t < I->T; t++)
    if (mask[t]) {
      const pending *pd = &I->pend[t];
      if (pd->xs)
        TRY(xaccess(I, pd->xs, pd->xlin, &pd->v, pd->dt, pd->p, s->lhs->pointer, s->lhs->column, t));
      pending_store(pd);
    }
  return TL_OK;
}

/* An "atomic" statement in thread t (proto/tile-ir-v1.md 5.9): dst
 * becomes op(old, value) at once, and "old" gets its previous value (0 for
 * an element outside its tensor, which is not written).  Atomics are
 * exempt from the independence rules of parallel loops (9.4). */
static tl_status atomic_apply(interp *I, const tl_stmt *s, int t) {
  loc L;
  TRY(locate(I, s->lhs, t, &L));
  tl_scalar v, old, r;
  TRY(eval(I, s->value, t, &v));
  tl_dtype dt = s->lhs->sym->dtype;
  tl_type vt = s->value->type;
  old.u = 0;
  if (L.p)
    old = tl_load(L.p, dt);
  if (L.p && L.sym->kind == SYM_TENSOR)
    TRY(xupdate(I, L.sym, L.lin, s->lhs->pointer, s->lhs->column, t));
  if (s->atomic == TL_ATOMIC_ADD)
    r = add_into(old, dt, v, vt);
  else {
    tl_scalar x = conv(v, vt, (tl_type)dt);
    bool mx = s->atomic == TL_ATOMIC_MAX;
    if (tl_dtype_is_float(dt))
      r.f = mx ? fmax(old.f, x.f) : fmin(old.f, x.f);
    else {
      bool sg = !ty_unsigned((tl_type)dt);
      int c = icmp(old, sg, x, sg);
      r = (mx ? c >= 0 : c <= 0) ? old : x;
    }
  }
  if (L.p)
    tl_store(L.p, dt, r);
  if (s->sym) {
    TRY(check_value_sym(I, s, s->sym));
    I->vals[(size_t)s->sym->slot * (size_t)I->T + (size_t)t] = old;
    if (I->mode == MODE_PAR)
      I->slot_gen[s->sym->slot] = I->par_gen;
  }
  return TL_OK;
}

static tl_status par_assign(interp *I, const tl_stmt *s) {
  pending pd;
  loc L;
  TRY(assign_prepare(I, s, I->t0, &pd, &L));
  if (pd.p && I->check_par && L.sh) {
    unsigned char bytes[8];
    tl_store(bytes, pd.dt, pd.v);
    TRY(par_mark(I, &L, bytes, s->lhs));
  }
  if (pd.xs)
    TRY(xaccess(I, pd.xs, pd.xlin, &pd.v, pd.dt, pd.p, s->lhs->pointer, s->lhs->column, I->t0));
  pending_store(&pd);
  return TL_OK;
}

/* print and device_assert in thread t (proto/tile-ir-v1.md 5.10): a line
 * "print at POINTER; in block (...), thread t: MSG VALUE", or a run-time
 * error when the assertion fails. */
static tl_status print_or_assert(interp *I, const tl_stmt *s, int t) {
  tl_scalar v;
  v.u = 0;
  if (s->value)
    TRY(eval(I, s->value, t, &v));
  if (s->kind == S_ASSERT) {
    if (ty_float(s->value->type) ? v.f != 0 || v.f != v.f : v.u != 0)
      return TL_OK;
    return rt_err(I, s->value->pointer, s->value->column, t, "device_assert failed%s%s", s->msg ? ": " : "",
                  s->msg ? s->msg : "");
  }
  char where[300], val[64] = "";
  fmt_where(I, t, where, sizeof where);
  if (s->value) {
    if (s->value->type == TL_BOOL)
      snprintf(val, sizeof val, "%s", v.u ? "true" : "false");
    else
      fmt_val(val, sizeof val, v, s->value->type);
  }
  fprintf(I->print_to, "print at %s%s:%s%s%s%s\n", s->pointer, where, s->msg ? " " : "", s->msg ? s->msg : "",
          s->value ? " " : "", val);
  return TL_OK;
}

/* ---- regions and tile operators ------------------------------------------------------- */
/* A region as a row-major walk over its iterated dimensions (those of extent
 * other than 1, plus `keep`), each with its start, extent and stride. */
typedef struct view {
  const tl_sym *sym;
  unsigned char *base;
  tl_dtype dt;
  size_t es;
  bool global, dead; /* dead: a fixed dimension lies outside the tensor */
  int n;
  int64_t ext[TL_MAX_DIMS], lo[TL_MAX_DIMS], dim[TL_MAX_DIMS], stride[TL_MAX_DIMS];
  int64_t off;   /* offset of the fixed dimensions */
  int64_t total;
  int keep_pos;  /* position of `keep` among the iterated dims, or -1 */
} view;

static tl_status make_view(interp *I, const tl_region *r, int keep, int t0, view *v) {
  memset(v, 0, sizeof *v);
  v->keep_pos = -1;
  const tl_sym *s = r ? r->sym : NULL;
  if (!s || (s->kind != SYM_TENSOR && s->kind != SYM_BUFFER) || r->ndim != s->ndim)
    return rt_err(I, r ? r->pointer : "", 0, t0, "malformed region");
  const int64_t *dim, *stride;
  v->sym = s;
  if (s->kind == SYM_TENSOR) {
    tinfo *ti = &I->tens[s->param_index];
    v->base = ti->data;
    v->dt = ti->dt;
    v->es = ti->es;
    v->global = true;
    dim = ti->dim;
    stride = ti->stride;
  } else {
    binfo *b = &I->bufs[s->slot];
    v->base = buf_base(I, s, t0);
    v->dt = b->dt;
    v->es = b->es;
    dim = s->dims;
    stride = b->stride;
  }
  v->total = 1;
  for (int d = 0; d < s->ndim; d++) {
    int64_t lo = 0, ext = r->ext[d];
    if (r->lo[d])
      TRY(eval_i64(I, r->lo[d], t0, &lo));
    int col = r->lo[d] ? r->lo[d]->column : 0;
    const char *ptr = r->lo[d] ? r->lo[d]->pointer : r->pointer;
    if (ext < 1)
      return rt_err(I, r->pointer, col, t0, "region '%s' has extent %" PRId64 " in dimension %d", r->text ? r->text : s->name,
                    ext, d);
    if (!v->global) {
      if (lo < 0 || lo > dim[d] - ext)
        return rt_err(I, ptr, col, t0,
                      "region '%s' covers [%" PRId64 ", %" PRId64 ") of dimension %d of %s '%s', which has size %" PRId64,
                      r->text ? r->text : s->name, lo, lo + ext, d, scope_word(s), s->name, dim[d]);
    } else {
      if (lo > (INT64_C(1) << 62))
        lo = INT64_C(1) << 62;
      if (lo < -(INT64_C(1) << 62))
        lo = -(INT64_C(1) << 62);
      if (lo >= dim[d] || lo <= -ext)
        v->dead = true;
    }
    if (ext != 1 || d == keep) {
      if (d == keep)
        v->keep_pos = v->n;
      v->lo[v->n] = lo;
      v->ext[v->n] = ext;
      v->dim[v->n] = dim[d];
      v->stride[v->n] = stride[d];
      v->n++;
      if (v->total > MAX_REGION_ELEMS / ext)
        return rt_err(I, r->pointer, 0, t0, "region '%s' is too large", r->text ? r->text : s->name);
      v->total *= ext;
    } else if (!v->dead)
      v->off += lo * stride[d];
  }
  return TL_OK;
}

/* Squeezed extents (1s dropped). */
static int squeezed(const view *v, int skip, int64_t *out) {
  int m = 0;
  for (int i = 0; i < v->n; i++)
    if (i != skip && v->ext[i] != 1)
      out[m++] = v->ext[i];
  return m;
}

static bool same_shape(const view *a, int askip, const view *b) {
  int64_t x[TL_MAX_DIMS], y[TL_MAX_DIMS];
  int n = squeezed(a, askip, x), m = squeezed(b, -1, y);
  if (n != m)
    return false;
  for (int i = 0; i < n; i++)
    if (x[i] != y[i])
      return false;
  return true;
}

enum { W_GATHER, W_SCATTER, W_FILL };
/* what a walk over a global tensor is for 9.1 (xaccess, xupdate): plain accesses, or an atomic_add's read
 * and its update of each element */
enum { X_PLAIN, X_NONE, X_ATOMIC };

static const tl_scalar zero = {0};

typedef struct walk {
  const view *v;
  int mode;
  tl_scalar *vals;
  tl_scalar cval;
  int64_t i;
  interp *I;       /* with a global view: each element's access checked against 9.1 */
  int xm;
  const char *ptr; /* the statement, for messages */
  tl_status st;    /* the first such error */
} walk;

/* Element off of a global view, before its load (W_GATHER) or its store. */
static void walk_mark(walk *w, int64_t off) {
  if (w->st != TL_OK || w->xm == X_NONE)
    return;
  const view *v = w->v;
  unsigned char *p = v->base + (size_t)off * v->es;
  if (w->xm == X_ATOMIC)
    w->st = xupdate(w->I, v->sym, (uint64_t)off, w->ptr, 0, w->I->t0);
  else if (w->mode == W_GATHER)
    w->st = xaccess(w->I, v->sym, (uint64_t)off, NULL, v->dt, p, w->ptr, 0, w->I->t0);
  else
    w->st = xaccess(w->I, v->sym, (uint64_t)off, w->mode == W_SCATTER ? &w->vals[w->i] : &w->cval, v->dt, p, w->ptr,
                    0, w->I->t0);
}

static void walk_rec(walk *w, int d, int64_t off, bool ok) {
  const view *v = w->v;
  if (d == v->n) { /* a region with no iterated dimension: one element */
    if (ok && w->I)
      walk_mark(w, off);
    if (w->mode == W_GATHER) {
      tl_scalar x;
      x.u = 0;
      w->vals[w->i] = ok ? tl_load(v->base + (size_t)off * v->es, v->dt) : x;
    } else if (ok)
      tl_store(v->base + (size_t)off * v->es, v->dt, w->mode == W_SCATTER ? w->vals[w->i] : w->cval);
    w->i++;
    return;
  }
  int64_t lo = v->lo[d], dim = v->dim[d], st = v->stride[d], ext = v->ext[d];
  if (d < v->n - 1) {
    for (int64_t k = 0; k < ext; k++) {
      int64_t c = lo + k;
      bool ok2 = ok && c >= 0 && c < dim;
      walk_rec(w, d + 1, ok2 ? off + c * st : 0, ok2);
    }
    return;
  }
  for (int64_t k = 0; k < ext; k++, w->i++) {
    int64_t c = lo + k;
    bool ok2 = ok && c >= 0 && c < dim;
    if (ok2 && w->I)
      walk_mark(w, off + c * st);
    if (w->mode == W_GATHER) {
      tl_scalar x;
      x.u = 0;
      w->vals[w->i] = ok2 ? tl_load(v->base + (size_t)(off + c * st) * v->es, v->dt) : x;
    } else if (ok2)
      tl_store(v->base + (size_t)(off + c * st) * v->es, v->dt, w->mode == W_SCATTER ? w->vals[w->i] : w->cval);
  }
}

/* Walks view v (gathering into vals, scattering vals or filling with
 * cval); a global one's accesses are checked against 9.1 as xm says, in
 * statement s. */
static tl_status view_walk(interp *I, const tl_stmt *s, int xm, const view *v, int mode, tl_scalar *vals,
                           tl_scalar cval) {
  bool x = v->global && (xm == X_ATOMIC || (xm == X_PLAIN && I->tens[v->sym->param_index].xw));
  walk w = {v, mode, vals, cval, 0, x ? I : NULL, xm, s->pointer, TL_OK};
  walk_rec(&w, 0, v->off, !v->dead);
  return w.st;
}

static tl_status shape_err(interp *I, const tl_stmt *s, int t0) {
  return rt_err(I, s->pointer, 0, t0, "the regions of '%s' do not match", s->op_name ? s->op_name : "operator");
}

static tl_status op_copy(interp *I, const tl_stmt *s, int t0) {
  view sv, dv;
  TRY(make_view(I, s->src, -1, t0, &sv));
  TRY(make_view(I, s->dst, -1, t0, &dv));
  if (!same_shape(&sv, -1, &dv))
    return shape_err(I, s, t0);
  tl_scalar *buf = scratch(I, 0, sv.total, sizeof *buf);
  if (!buf)
    return nomem(I);
  TRY(view_walk(I, s, X_PLAIN, &sv, W_GATHER, buf, zero));
  if (sv.dt != dv.dt)
    for (int64_t i = 0; i < sv.total; i++)
      buf[i] = tl_convert(buf[i], sv.dt, dv.dt);
  TRY(view_walk(I, s, X_PLAIN, &dv, W_SCATTER, buf, zero));
  return TL_OK;
}

static tl_status op_fill(interp *I, const tl_stmt *s, int t0) {
  view dv;
  TRY(make_view(I, s->dst, -1, t0, &dv));
  tl_scalar v;
  v.u = 0;
  if (s->value) {
    TRY(eval(I, s->value, t0, &v));
    v = conv(v, s->value->type, (tl_type)dv.dt);
  }
  TRY(view_walk(I, s, X_PLAIN, &dv, W_FILL, NULL, v));
  return TL_OK;
}

static tl_status op_gemm(interp *I, const tl_stmt *s, int t0) {
  const tl_sym *A = s->A, *B = s->B, *C = s->C;
  if (!A || !B || !C || A->kind != SYM_BUFFER || B->kind != SYM_BUFFER || C->kind != SYM_BUFFER || A->ndim != 2 ||
      B->ndim != 2 || C->ndim != 2)
    return rt_err(I, s->pointer, 0, t0, "gemm's operands must be 2-D buffers");
  int64_t M = C->dims[0], N = C->dims[1];
  int64_t am = s->trans_a ? A->dims[1] : A->dims[0], K = s->trans_a ? A->dims[0] : A->dims[1];
  int64_t bk = s->trans_b ? B->dims[1] : B->dims[0], bn = s->trans_b ? B->dims[0] : B->dims[1];
  if (am != M || bn != N || bk != K)
    return rt_err(I, s->pointer, 0, t0, "gemm shapes do not match");
  const unsigned char *pa = buf_base(I, A, t0), *pb = buf_base(I, B, t0);
  unsigned char *pc = buf_base(I, C, t0);
  size_t ea = tl_dtype_size(A->dtype), eb = tl_dtype_size(B->dtype), ec = tl_dtype_size(C->dtype);
  bool ints = !tl_dtype_is_float(A->dtype) && !tl_dtype_is_float(B->dtype) && !tl_dtype_is_float(C->dtype);
  /* op(A) as [M][K] and op(B) transposed as [N][K], so the inner loop is contiguous */
  if (ints) {
    int64_t *a = scratch(I, 1, M * K, sizeof *a), *b = scratch(I, 2, N * K, sizeof *b);
    if (!a || !b)
      return nomem(I);
    for (int64_t m = 0; m < M; m++)
      for (int64_t k = 0; k < K; k++)
        a[m * K + k] = conv(tl_load(pa + (size_t)(s->trans_a ? k * M + m : m * K + k) * ea, A->dtype),
                            (tl_type)A->dtype, TL_INT64).i;
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < K; k++)
        b[n * K + k] = conv(tl_load(pb + (size_t)(s->trans_b ? n * K + k : k * N + n) * eb, B->dtype),
                            (tl_type)B->dtype, TL_INT64).i;
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        const int64_t *ar = a + m * K, *br = b + n * K;
        uint64_t acc = 0;
        for (int64_t k = 0; k < K; k++)
          acc += (uint64_t)ar[k] * (uint64_t)br[k];
        unsigned char *p = pc + (size_t)(m * N + n) * ec;
        if (!s->clear_accum)
          acc += (uint64_t)conv(tl_load(p, C->dtype), (tl_type)C->dtype, TL_INT64).i;
        tl_scalar r;
        r.u = acc;
        tl_store(p, C->dtype, tl_convert(r, TL_INT64, C->dtype));
      }
    return TL_OK;
  }
  double *a = scratch(I, 1, M * K, sizeof *a), *b = scratch(I, 2, N * K, sizeof *b);
  if (!a || !b)
    return nomem(I);
  for (int64_t m = 0; m < M; m++)
    for (int64_t k = 0; k < K; k++)
      a[m * K + k] = to_f64(tl_load(pa + (size_t)(s->trans_a ? k * M + m : m * K + k) * ea, A->dtype), A->dtype);
  for (int64_t n = 0; n < N; n++)
    for (int64_t k = 0; k < K; k++)
      b[n * K + k] = to_f64(tl_load(pb + (size_t)(s->trans_b ? n * K + k : k * N + n) * eb, B->dtype), B->dtype);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      const double *ar = a + m * K, *br = b + n * K;
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t k = 0;
      for (; k + 4 <= K; k += 4) {
        s0 += ar[k] * br[k];
        s1 += ar[k + 1] * br[k + 1];
        s2 += ar[k + 2] * br[k + 2];
        s3 += ar[k + 3] * br[k + 3];
      }
      for (; k < K; k++)
        s0 += ar[k] * br[k];
      double acc = (s0 + s1) + (s2 + s3);
      unsigned char *p = pc + (size_t)(m * N + n) * ec;
      if (!s->clear_accum)
        acc += to_f64(tl_load(p, C->dtype), C->dtype);
      tl_store(p, C->dtype, from_f64(acc, C->dtype));
    }
  return TL_OK;
}

/* Reduction state: floats in double, integers in int64 (or uint64). */
typedef struct red {
  int type;
  bool fl, uns, any;
  double f;
  int64_t i;
  uint64_t u;
} red;

static void red_add(red *r, tl_scalar x, tl_type xt) {
  if (r->fl) {
    double v = to_f64(x, xt);
    if (r->type == RED_ABSSUM || r->type == RED_ABSMAX)
      v = fabs(v);
    if (!r->any)
      r->f = v;
    else if (r->type == RED_SUM || r->type == RED_ABSSUM)
      r->f += v;
    else if (r->type == RED_MIN)
      r->f = fmin(r->f, v);
    else
      r->f = fmax(r->f, v);
  } else if (r->uns) {
    uint64_t v = conv(x, xt, TL_UINT64).u;
    if (!r->any)
      r->u = v;
    else if (r->type >= RED_BITAND)
      r->u = r->type == RED_BITAND ? r->u & v : r->type == RED_BITOR ? r->u | v : r->u ^ v;
    else if (r->type == RED_SUM || r->type == RED_ABSSUM)
      r->u += v;
    else if (r->type == RED_MIN)
      r->u = v < r->u ? v : r->u;
    else
      r->u = v > r->u ? v : r->u;
  } else {
    int64_t v = conv(x, xt, TL_INT64).i;
    if ((r->type == RED_ABSSUM || r->type == RED_ABSMAX) && v < 0)
      v = (int64_t)(0 - (uint64_t)v);
    if (!r->any)
      r->i = v;
    else if (r->type >= RED_BITAND)
      r->i = r->type == RED_BITAND ? r->i & v : r->type == RED_BITOR ? r->i | v : r->i ^ v;
    else if (r->type == RED_SUM || r->type == RED_ABSSUM)
      r->i = (int64_t)((uint64_t)r->i + (uint64_t)v);
    else if (r->type == RED_MIN)
      r->i = v < r->i ? v : r->i;
    else
      r->i = v > r->i ? v : r->i;
  }
  r->any = true;
}

static tl_scalar red_result(const red *r, tl_dtype to) {
  tl_scalar v;
  if (r->fl)
    return from_f64(r->f, to);
  if (r->uns) {
    v.u = r->u;
    return tl_convert(v, TL_UINT64, to);
  }
  v.i = r->i;
  return tl_convert(v, TL_INT64, to);
}

static tl_status op_reduce(interp *I, const tl_stmt *s, int t0) {
  if (!s->src || s->dim < 0 || s->dim >= s->src->ndim)
    return rt_err(I, s->pointer, 0, t0, "reduce's dim is out of range");
  view sv, dv;
  TRY(make_view(I, s->src, s->dim, t0, &sv));
  TRY(make_view(I, s->dst, -1, t0, &dv));
  int p = sv.keep_pos;
  if (!same_shape(&sv, p, &dv))
    return shape_err(I, s, t0);
  int64_t R = sv.ext[p], outer = 1, inner = 1;
  for (int i = 0; i < p; i++)
    outer *= sv.ext[i];
  for (int i = p + 1; i < sv.n; i++)
    inner *= sv.ext[i];
  tl_scalar *src = scratch(I, 0, sv.total, sizeof *src), *dst = scratch(I, 1, dv.total, sizeof *dst);
  if (!src || !dst)
    return nomem(I);
  TRY(view_walk(I, s, X_PLAIN, &sv, W_GATHER, src, zero));
  if (!s->clear)
    TRY(view_walk(I, s, X_PLAIN, &dv, W_GATHER, dst, zero));
  bool fl = tl_dtype_is_float(sv.dt) || tl_dtype_is_float(dv.dt);
  bool uns = !fl && (sv.dt == TL_UINT64 || dv.dt == TL_UINT64);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      red r = {(int)s->reduce_type, fl, uns, false, 0, 0, 0};
      for (int64_t k = 0; k < R; k++)
        red_add(&r, src[(o * R + k) * inner + i], (tl_type)sv.dt);
      tl_scalar *d = &dst[o * inner + i];
      if (!s->clear) {
        /* combine with the old value: old + sum, max(old, max), ... */
        red c = r;
        c.type = r.type == RED_ABSSUM ? RED_SUM : r.type == RED_ABSMAX ? RED_MAX : r.type;
        c.any = false;
        red_add(&c, *d, (tl_type)dv.dt);
        if (c.fl) {
          tl_scalar x;
          x.f = r.f;
          red_add(&c, x, TL_FLOAT64);
        } else if (c.uns) {
          tl_scalar x;
          x.u = r.u;
          red_add(&c, x, TL_UINT64);
        } else {
          tl_scalar x;
          x.i = r.i;
          red_add(&c, x, TL_INT64);
        }
        r = c;
      }
      *d = red_result(&r, dv.dt);
    }
  TRY(view_walk(I, s, X_PLAIN, &dv, W_SCATTER, dst, zero));
  return TL_OK;
}

static tl_status op_cumsum(interp *I, const tl_stmt *s, int t0) {
  if (!s->src || s->dim < 0 || s->dim >= s->src->ndim)
    return rt_err(I, s->pointer, 0, t0, "cumsum's dim is out of range");
  view sv, dv;
  TRY(make_view(I, s->src, s->dim, t0, &sv));
  TRY(make_view(I, s->dst, -1, t0, &dv));
  if (!same_shape(&sv, -1, &dv))
    return shape_err(I, s, t0);
  int p = sv.keep_pos;
  int64_t R = sv.ext[p], outer = 1, inner = 1;
  for (int i = 0; i < p; i++)
    outer *= sv.ext[i];
  for (int i = p + 1; i < sv.n; i++)
    inner *= sv.ext[i];
  tl_scalar *buf = scratch(I, 0, sv.total, sizeof *buf);
  if (!buf)
    return nomem(I);
  TRY(view_walk(I, s, X_PLAIN, &sv, W_GATHER, buf, zero));
  bool fl = tl_dtype_is_float(sv.dt) || tl_dtype_is_float(dv.dt);
  bool uns = !fl && (sv.dt == TL_UINT64 || dv.dt == TL_UINT64);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      red r = {(int)s->reduce_type, fl, uns, false, 0, 0, 0};
      for (int64_t j = 0; j < R; j++) {
        int64_t k = s->reverse ? R - 1 - j : j;
        tl_scalar *x = &buf[(o * R + k) * inner + i];
        red_add(&r, *x, (tl_type)sv.dt);
        *x = red_result(&r, dv.dt);
      }
    }
  TRY(view_walk(I, s, X_PLAIN, &dv, W_SCATTER, buf, zero));
  return TL_OK;
}

static tl_scalar add_into(tl_scalar old, tl_dtype dt, tl_scalar v, tl_type vt) {
  if (tl_dtype_is_float(dt) || ty_float(vt))
    return from_f64(to_f64(old, (tl_type)dt) + to_f64(v, vt), (tl_type)dt);
  tl_scalar x = conv(v, vt, (tl_type)dt), r;
  r.u = conv(old, (tl_type)dt, TL_INT64).u + conv(x, (tl_type)dt, TL_INT64).u;
  return tl_convert(r, TL_INT64, dt);
}

static tl_status op_atomic_add(interp *I, const tl_stmt *s, int t0) {
  view dv;
  TRY(make_view(I, s->dst, -1, t0, &dv));
  tl_scalar *old = scratch(I, 0, dv.total, sizeof *old);
  if (!old)
    return nomem(I);
  TRY(view_walk(I, s, X_NONE, &dv, W_GATHER, old, zero));
  if (s->src) {
    view sv;
    TRY(make_view(I, s->src, -1, t0, &sv));
    if (!same_shape(&sv, -1, &dv))
      return shape_err(I, s, t0);
    tl_scalar *src = scratch(I, 1, sv.total, sizeof *src);
    if (!src)
      return nomem(I);
    TRY(view_walk(I, s, X_PLAIN, &sv, W_GATHER, src, zero));
    for (int64_t i = 0; i < dv.total; i++)
      old[i] = add_into(old[i], dv.dt, src[i], (tl_type)sv.dt);
  } else {
    tl_scalar v;
    v.u = 0;
    tl_type vt = TL_INT32;
    if (s->value) {
      TRY(eval(I, s->value, t0, &v));
      vt = s->value->type;
    }
    for (int64_t i = 0; i < dv.total; i++)
      old[i] = add_into(old[i], dv.dt, v, vt);
  }
  TRY(view_walk(I, s, X_ATOMIC, &dv, W_SCATTER, old, zero));
  return TL_OK;
}

/* cluster_reduce (proto/tile-ir-v1.md 5.6): the block of rank 0, which
 * runs after the others of its cluster, combines their copies into its
 * fragment in rank order; another block leaves its copy. */
static tl_status op_cluster_reduce(interp *I, const tl_stmt *s, int t0) {
  const tl_sym *X = s->dst->sym;
  TRY(check_buffer_sym(I, s, X));
  if (I->csize <= 1)
    return TL_OK;
  const binfo *b = &I->bufs[X->slot];
  size_t bytes = (size_t)b->nelem * b->es;
  struct csnap *c = NULL;
  for (int i = 0; i < I->ncs && !c; i++)
    if (I->cs[i].s == s)
      c = &I->cs[i];
  if (!c) {
    if (I->ncs == I->capcs) {
      int cap = I->capcs ? 2 * I->capcs : 4;
      struct csnap *g = realloc(I->cs, (size_t)cap * sizeof *g);
      if (!g)
        return nomem(I);
      I->cs = g;
      I->capcs = cap;
    }
    c = &I->cs[I->ncs];
    c->s = s;
    c->data = malloc(bytes * (size_t)I->csize + 1);
    if (!c->data)
      return nomem(I);
    I->ncs++;
  }
  if (I->crank != 0) {
    memcpy(c->data + bytes * (size_t)I->crank, b->data, bytes);
    return TL_OK;
  }
  bool fl = X->dtype == TL_FLOAT32;
  for (int64_t q = 1; q < I->csize; q++)
    for (int64_t k = 0; k < b->nelem; k++) {
      unsigned char *p = b->data + (size_t)k * b->es;
      const unsigned char *o = c->data + bytes * (size_t)q + (size_t)k * b->es;
      if (fl) {
        float x, y;
        memcpy(&x, p, 4);
        memcpy(&y, o, 4);
        x = s->reduce_type == RED_MAX ? fmaxf(x, y) : s->reduce_type == RED_MIN ? fminf(x, y) : x + y;
        memcpy(p, &x, 4);
      } else {
        int32_t x, y;
        memcpy(&x, p, 4);
        memcpy(&y, o, 4);
        x = s->reduce_type == RED_MAX ? (x > y ? x : y)
          : s->reduce_type == RED_MIN ? (x < y ? x : y)
                                      : (int32_t)((uint32_t)x + (uint32_t)y);
        memcpy(p, &x, 4);
      }
    }
  (void)t0;
  return TL_OK;
}

static void poison_alloc(interp *I, const tl_sym *b, const unsigned char *mask) {
  const binfo *bi = &I->bufs[b->slot];
  if (b->scope != SCOPE_LOCAL) {
    poison_bytes(bi->data, bi->dt, (size_t)bi->nelem);
    return;
  }
  for (int t = 0; t < I->T; t++)
    if (mask[t])
      poison_bytes(buf_base(I, b, t), bi->dt, (size_t)bi->nelem);
}

/* ---- statements ------------------------------------------------------------------------ */
static tl_status exec_body(interp *I, const tl_body *b, const unsigned char *mask, int depth);

static bool is_block_stmt(const tl_stmt *s) {
  if (s->kind == S_ALLOC)
    return s->sym && s->sym->scope != SCOPE_LOCAL;
  if (s->kind == S_IF || s->kind == S_LOOP)
    return s->block_level;
  return tl_stmt_kind_flags(s->kind) & TL_KIND_TILE;
}

static tl_status check_value_sym(interp *I, const tl_stmt *s, const tl_sym *y) {
  if (!y || y->slot < 0 || y->slot >= I->prog->nvalue_slots)
    return rt_err(I, s->pointer, 0, I->t0, "malformed '%s' statement", s->op_name ? s->op_name : "?");
  return TL_OK;
}

static tl_status check_buffer_sym(interp *I, const tl_stmt *s, const tl_sym *y) {
  if (!y || y->kind != SYM_BUFFER || y->slot < 0 || y->slot >= I->prog->nbuffer_slots)
    return rt_err(I, s->pointer, 0, I->t0, "malformed '%s' statement", s->op_name ? s->op_name : "?");
  return TL_OK;
}

static void set_loop_var(interp *I, const tl_sym *v, int t, int64_t start, int64_t k, int64_t step) {
  tl_scalar x;
  x.u = (uint64_t)start + (uint64_t)k * (uint64_t)step;
  I->vals[(size_t)v->slot * (size_t)I->T + (size_t)t] = tl_convert(x, TL_INT64, TL_INT32);
}

static unsigned char *mask_at(interp *I, int depth, int which) {
  if (!I->masks[depth][which])
    I->masks[depth][which] = malloc((size_t)I->T);
  return I->masks[depth][which];
}

static tl_status exec_thread(interp *I, const tl_stmt *s, const unsigned char *mask, int depth) {
  int T = I->T;
  switch (s->kind) {
  case S_ASSIGN:
    return thread_assign(I, s, mask);
  case S_ATOMIC: /* one thread after another, in thread order */
    for (int t = 0; t < T; t++)
      if (mask[t])
        TRY(atomic_apply(I, s, t));
    return TL_OK;
  case S_PRINT:
  case S_ASSERT:
    for (int t = 0; t < T; t++)
      if (mask[t])
        TRY(print_or_assert(I, s, t));
    return TL_OK;
  case S_LET:
  case S_ALLOC_VAR: {
    TRY(check_value_sym(I, s, s->sym));
    tl_type to = sym_vtype(s->sym);
    for (int t = 0; t < T; t++) {
      if (!mask[t])
        continue;
      tl_scalar v;
      if (s->value) {
        TRY(eval(I, s->value, t, &v));
        v = conv(v, s->value->type, to);
      } else
        v = poison_scalar(ty_dtype(to));
      I->vals[(size_t)s->sym->slot * (size_t)T + (size_t)t] = v;
    }
    return TL_OK;
  }
  case S_ALLOC:
    TRY(check_buffer_sym(I, s, s->sym));
    poison_alloc(I, s->sym, mask);
    return TL_OK;
  case S_VIEW: /* its memory is its buffer's, from the start (setup_views, interp_setup) */
    return TL_OK;
  case S_IF: {
    unsigned char *tm = mask_at(I, depth, 0), *em = mask_at(I, depth, 1);
    if (!tm || !em)
      return nomem(I);
    bool anyt = false, anye = false;
    for (int t = 0; t < T; t++) {
      tm[t] = em[t] = 0;
      if (!mask[t])
        continue;
      bool c;
      TRY(eval_truth(I, s->value, t, &c));
      tm[t] = c;
      em[t] = !c;
      anyt |= c;
      anye |= !c;
    }
    if (anyt)
      TRY(exec_body(I, &s->body, tm, depth + 1));
    if (anye && s->has_else)
      TRY(exec_body(I, &s->else_body, em, depth + 1));
    return TL_OK;
  }
  case S_LOOP: {
    TRY(check_value_sym(I, s, s->var));
    if (!I->lpool[depth])
      I->lpool[depth] = malloc(3 * (size_t)T * sizeof(int64_t));
    unsigned char *m2 = mask_at(I, depth, 0);
    if (!I->lpool[depth] || !m2)
      return nomem(I);
    int64_t *st = I->lpool[depth], *ex = st + T, *sp = ex + T, most = 0;
    for (int t = 0; t < T; t++) {
      if (!mask[t])
        continue;
      TRY(eval_i64(I, s->start, t, &st[t]));
      TRY(eval_i64(I, s->extent, t, &ex[t]));
      TRY(eval_i64(I, s->step, t, &sp[t]));
      if (ex[t] > 0 && sp[t] == 0)
        return rt_err(I, s->step->pointer, s->step->column, t, "the step of the loop is 0");
      if (ex[t] > most)
        most = ex[t];
    }
    for (int64_t k = 0; k < most; k++) {
      bool any = false;
      for (int t = 0; t < T; t++) {
        m2[t] = mask[t] && k < ex[t];
        if (m2[t]) {
          any = true;
          set_loop_var(I, s->var, t, st[t], k, sp[t]);
        }
      }
      if (!any)
        break;
      TRY(exec_body(I, &s->body, m2, depth + 1));
    }
    return TL_OK;
  }
  default:
    return rt_err(I, s->pointer, 0, I->t0, "'%s' cannot run as thread-level code", s->op_name ? s->op_name : "?");
  }
}

static tl_status exec_par_body(interp *I, const tl_body *b, int depth);

static tl_status exec_par_stmt(interp *I, const tl_stmt *s, int depth) {
  int t0 = I->t0;
  switch (s->kind) {
  case S_ASSIGN:
    return par_assign(I, s);
  case S_ATOMIC:
    return atomic_apply(I, s, t0);
  case S_PRINT:
  case S_ASSERT:
    return print_or_assert(I, s, t0);
  case S_LET: {
    TRY(check_value_sym(I, s, s->sym));
    tl_scalar v;
    TRY(eval(I, s->value, t0, &v));
    I->vals[(size_t)s->sym->slot * (size_t)I->T + (size_t)t0] = conv(v, s->value->type, sym_vtype(s->sym));
    I->slot_gen[s->sym->slot] = I->par_gen;
    return TL_OK;
  }
  case S_IF: {
    bool c;
    TRY(eval_truth(I, s->value, t0, &c));
    if (c)
      return exec_par_body(I, &s->body, depth + 1);
    if (s->has_else)
      return exec_par_body(I, &s->else_body, depth + 1);
    return TL_OK;
  }
  case S_LOOP: {
    TRY(check_value_sym(I, s, s->var));
    int64_t st, ex, sp;
    TRY(eval_i64(I, s->start, t0, &st));
    TRY(eval_i64(I, s->extent, t0, &ex));
    TRY(eval_i64(I, s->step, t0, &sp));
    if (ex > 0 && sp == 0)
      return rt_err(I, s->step->pointer, s->step->column, t0, "the step of the loop is 0");
    for (int64_t k = 0; k < ex; k++) {
      set_loop_var(I, s->var, t0, st, k, sp);
      I->slot_gen[s->var->slot] = I->par_gen;
      TRY(exec_par_body(I, &s->body, depth + 1));
    }
    return TL_OK;
  }
  default:
    return rt_err(I, s->pointer, 0, t0, "'%s' is not allowed inside a parallel loop", s->op_name ? s->op_name : "?");
  }
}

static tl_status exec_par_body(interp *I, const tl_body *b, int depth) {
  if (depth >= MAX_DEPTH)
    return rt_err(I, b->n ? b->items[0]->pointer : "", 0, I->t0, "statements nest too deeply");
  for (int i = 0; i < b->n; i++)
    TRY(exec_par_stmt(I, b->items[i], depth));
  return TL_OK;
}

static void reset_par_stamps(interp *I) {
  for (int p = 0; p < I->prog->nparams + I->prog->nviews; p++)
    shadow_free(&I->tens[p].sh);
  for (int b = 0; b < I->prog->nbuffer_slots; b++)
    shadow_free(&I->bufs[b].sh);
  memset(I->slot_gen, 0, (size_t)I->prog->nvalue_slots * sizeof *I->slot_gen);
  memset(I->slot_ok, 0, (size_t)I->prog->nvalue_slots * sizeof *I->slot_ok);
}

static tl_status op_parallel(interp *I, const tl_stmt *s, int t0, int depth) {
  if (I->par_s)
    return rt_err(I, s->pointer, 0, t0, "parallel loops may not nest");
  if (s->nvars < 1 || s->nvars > TL_MAX_DIMS)
    return rt_err(I, s->pointer, 0, t0, "a parallel loop has 1 to %d variables", TL_MAX_DIMS);
  int64_t ext[TL_MAX_DIMS], total = 1;
  for (int v = 0; v < s->nvars; v++) {
    TRY(check_value_sym(I, s, s->vars[v]));
    TRY(eval_i64(I, s->extents[v], t0, &ext[v]));
    if (ext[v] < 0)
      ext[v] = 0;
    if (ext[v] && total > INT64_MAX / ext[v])
      return rt_err(I, s->pointer, 0, t0, "the parallel loop has too many iterations");
    total *= ext[v];
  }
  if (++I->par_gen == 0) {
    reset_par_stamps(I);
    I->par_gen = 1;
  }
  I->par_s = s;
  memcpy(I->par_ext, ext, sizeof ext);
  I->mode = MODE_PAR;
  I->t0 = t0;
  int64_t idx[TL_MAX_DIMS] = {0};
  tl_status st = TL_OK;
  for (int64_t it = 0; it < total && st == TL_OK; it++) {
    I->par_iter = it;
    for (int v = 0; v < s->nvars; v++) {
      int slot = s->vars[v]->slot;
      I->vals[(size_t)slot * (size_t)I->T + (size_t)t0].i = idx[v];
      I->slot_gen[slot] = I->par_gen;
    }
    st = exec_par_body(I, &s->body, depth + 1);
    for (int v = s->nvars - 1; v >= 0; v--) {
      if (++idx[v] < ext[v])
        break;
      idx[v] = 0;
    }
  }
  I->par_s = NULL;
  I->mode = MODE_BLOCK;
  return st;
}

static tl_status exec_block(interp *I, const tl_stmt *s, const unsigned char *mask, int t0, int depth) {
  switch (s->kind) {
  case S_ALLOC:
    TRY(check_buffer_sym(I, s, s->sym));
    poison_alloc(I, s->sym, mask);
    return TL_OK;
  case S_COPY: return op_copy(I, s, t0);
  case S_FILL: return op_fill(I, s, t0);
  case S_GEMM: return op_gemm(I, s, t0);
  case S_REDUCE: return op_reduce(I, s, t0);
  case S_CUMSUM: return op_cumsum(I, s, t0);
  case S_CLUSTER_REDUCE: return op_cluster_reduce(I, s, t0);
  case S_ATOMIC_ADD: return op_atomic_add(I, s, t0);
  case S_PARALLEL: return op_parallel(I, s, t0, depth);
  case S_SYNC_THREADS: /* lock-step needs no barrier; a fence counts for 9.1's handover (xhanded) */
    I->xfence += s->fence;
    return TL_OK;
  case S_ANNOTATE_LAYOUT: case S_USE_SWIZZLE:
    return TL_OK; /* hints */
  case S_IF: {
    bool c;
    TRY(eval_truth(I, s->value, t0, &c));
    if (c)
      return exec_body(I, &s->body, mask, depth + 1);
    if (s->has_else)
      return exec_body(I, &s->else_body, mask, depth + 1);
    return TL_OK;
  }
  case S_LOOP: {
    TRY(check_value_sym(I, s, s->var));
    int64_t st, ex, sp;
    TRY(eval_i64(I, s->start, t0, &st));
    TRY(eval_i64(I, s->extent, t0, &ex));
    TRY(eval_i64(I, s->step, t0, &sp));
    if (ex > 0 && sp == 0)
      return rt_err(I, s->step->pointer, s->step->column, t0, "the step of the loop is 0");
    for (int64_t k = 0; k < ex; k++) {
      for (int t = 0; t < I->T; t++)
        set_loop_var(I, s->var, t, st, k, sp);
      TRY(exec_body(I, &s->body, mask, depth + 1));
    }
    return TL_OK;
  }
  default:
    return exec_thread(I, s, mask, depth);
  }
}

static tl_status exec_body(interp *I, const tl_body *b, const unsigned char *mask, int depth) {
  if (depth >= MAX_DEPTH)
    return rt_err(I, b->n ? b->items[0]->pointer : "", 0, I->t0, "statements nest too deeply");
  int t0 = 0;
  while (t0 < I->T && !mask[t0])
    t0++;
  if (t0 == I->T)
    return TL_OK;
  for (int i = 0; i < b->n; i++) {
    const tl_stmt *s = b->items[i];
    I->t0 = t0;
    if (is_block_stmt(s)) {
      I->mode = MODE_BLOCK;
      TRY(exec_block(I, s, mask, t0, depth));
    } else {
      I->mode = MODE_THREAD;
      TRY(exec_thread(I, s, mask, depth));
    }
  }
  return TL_OK;
}

/* ---- entry points ------------------------------------------------------------------------ */
static tl_status check_scalars(const tl_program *prog, const tl_arg *args, tl_error *err) {
  for (int p = 0; p < prog->nparams; p++) {
    const tl_sym *s = prog->params[p];
    if (s->kind != SYM_SCALAR)
      continue;
    tl_scalar v = args[p].scalar;
    bool ok = true;
    switch (s->dtype) {
    case TL_BOOL: ok = v.u == 0 || v.u == 1; break;
    case TL_FLOAT32: ok = isnan(v.f) || tl_f32_round(v.f) == v.f; break;
    case TL_FLOAT64: case TL_INT64: case TL_UINT64: break;
    default: ok = tl_convert(v, s->dtype, s->dtype).u == v.u; break;
    }
    if (!ok)
      return tl_error_set(err, TL_INVALID_ARG, "scalar argument '%s' is not a %s value", s->name,
                          tl_dtype_name(s->dtype));
  }
  return TL_OK;
}

static tl_status static_eval(const tl_program *prog, const tl_arg *args, const tl_expr *e, int64_t *out,
                             tl_error *err) {
  interp S;
  memset(&S, 0, sizeof S);
  S.prog = prog;
  S.args = args;
  S.err = err;
  S.mode = MODE_STATIC;
  S.T = 1;
  S.tdim[0] = S.tdim[1] = S.tdim[2] = 1;
  tl_status st = eval_i64(&S, e, 0, out);
  if (st != TL_OK && err)
    err->code = TL_INVALID_ARG;
  return st == TL_OK ? TL_OK : TL_INVALID_ARG;
}

static tl_status sym_shape(const tl_program *prog, const tl_sym *s, const tl_arg *args, int64_t shape[TL_MAX_DIMS],
                           tl_error *err);

tl_status tl_tensor_shape(const tl_program *prog, int p, const tl_arg *args, int64_t shape[TL_MAX_DIMS],
                          tl_error *err) {
  if (!prog || p < 0 || p >= prog->nparams || prog->params[p]->kind != SYM_TENSOR)
    return tl_error_set(err, TL_INVALID_ARG, "parameter %d is not a tensor", p);
  return sym_shape(prog, prog->params[p], args, shape, err);
}

/* The dimensions of tensor (or tensor view) s at this launch. */
static tl_status sym_shape(const tl_program *prog, const tl_sym *s, const tl_arg *args, int64_t shape[TL_MAX_DIMS],
                           tl_error *err) {
  bool dynamic = false;
  for (int d = 0; d < s->ndim; d++)
    dynamic |= s->shape[d] && s->shape[d]->kind != E_CONST;
  if (dynamic && !args)
    return tl_error_set(err, TL_INVALID_ARG, "tensor '%s' has a dynamic shape; its scalar arguments are needed",
                        s->name);
  if (args)
    TRY(check_scalars(prog, args, err));
  for (int d = 0; d < s->ndim; d++) {
    int64_t v = s->dims[d];
    if (s->shape[d])
      TRY(static_eval(prog, args, s->shape[d], &v, err));
    if (v < 0)
      return tl_error_set_at(err, TL_INVALID_ARG, s->shape[d] ? s->shape[d]->pointer : s->pointer,
                             s->shape[d] ? s->shape[d]->column : 0,
                             "dimension %d of tensor '%s' is %" PRId64 "; it must not be negative", d, s->name, v);
    shape[d] = v;
  }
  /* a packed type's rows are whole bytes (proto/tile-ir-v1.md 7.1) */
  int per = tl_dtype_is_packed(s->dtype) ? 8 / tl_dtype_bits(s->dtype) : 1;
  if (s->ndim > 0 && shape[s->ndim - 1] % per != 0) {
    const tl_expr *x = s->shape[s->ndim - 1];
    return tl_error_set_at(err, TL_INVALID_ARG, x ? x->pointer : s->pointer, x ? x->column : 0,
                           "the innermost dimension of tensor '%s' is %" PRId64 ", which is not a multiple of %d: "
                           "%s packs %d elements per byte and its rows are whole bytes",
                           s->name, shape[s->ndim - 1], per, tl_dtype_name(s->dtype), per);
  }
  return TL_OK;
}

tl_status tl_grid_size(const tl_program *prog, const tl_arg *args, int64_t grid[3], tl_error *err) {
  if (!prog)
    return tl_error_set(err, TL_INVALID_ARG, "no program");
  if (args)
    TRY(check_scalars(prog, args, err));
  for (int d = 0; d < 3; d++) {
    grid[d] = 1;
    if (d >= prog->ngrid || !prog->grid[d])
      continue;
    if (prog->grid[d]->kind != E_CONST && !args)
      return tl_error_set(err, TL_INVALID_ARG, "the grid depends on scalar arguments");
    TRY(static_eval(prog, args, prog->grid[d], &grid[d], err));
    if (grid[d] < 0 || grid[d] > INT32_MAX)
      return tl_error_set_at(err, TL_INVALID_ARG, prog->grid[d]->pointer, prog->grid[d]->column,
                             "grid dimension %d is %" PRId64 "; it must be from 0 to %d", d, grid[d], INT32_MAX);
  }
  return TL_OK;
}

static void interp_free(interp *I) {
  const tl_program *prog = I->prog;
  if (I->tens)
    for (int p = 0; p < prog->nparams + prog->nviews; p++) {
      shadow_free(&I->tens[p].sh);
      free(I->tens[p].xr);
      xmap_free(&I->tens[p].xm);
      xmap_free(&I->tens[p].xc);
      free(I->tens[p].own);
    }
  free(I->xev);
  free(I->xb);
  keymap_free(&I->xbk);
  if (I->bufs)
    for (int b = 0; b < prog->nbuffer_slots; b++) {
      if (!prog->buffer_syms[b] || !prog->buffer_syms[b]->view_of) /* a view's is its buffer's */
        free(I->bufs[b].data);
      shadow_free(&I->bufs[b].sh);
    }
  free(I->tens);
  free(I->bufs);
  free(I->vals);
  free(I->pend);
  free(I->full);
  free(I->slot_gen);
  free(I->slot_ok);
  for (int d = 0; d < MAX_DEPTH; d++) {
    free(I->masks[d][0]);
    free(I->masks[d][1]);
    free(I->lpool[d]);
  }
  for (int k = 0; k < 4; k++)
    free(I->scr[k]);
}

/* The row-major strides of tensor (or view) s from its dimensions, and its
 * element count. */
static tl_status row_major(tinfo *ti, const tl_sym *s, int64_t *count, tl_error *err) {
  int64_t n = 1;
  for (int d = s->ndim - 1; d >= 0; d--) {
    ti->stride[d] = n;
    if (ti->dim[d] && n > INT64_MAX / 16 / ti->dim[d])
      return tl_error_set(err, TL_INVALID_ARG, "%s '%s' is too large", s->view_of ? "view" : "tensor", s->name);
    n *= ti->dim[d];
  }
  *count = n;
  return TL_OK;
}

/* The views of tensors (tl_program.views): the tensor's data with the
 * view's dtype and dimensions, at index nparams + k of the tensor table.
 * The checker proved the sizes equal; a launch that breaks it is reported. */
static tl_status setup_views(interp *I, const tl_program *prog, tl_arg *args, tl_error *err) {
  for (int k = 0; k < prog->nviews; k++) {
    const tl_sym *s = prog->views[k], *r = s->view_of;
    if (!r || r->kind != SYM_TENSOR || r->param_index < 0 || r->param_index >= prog->nparams ||
        s->param_index != prog->nparams + k)
      return tl_error_set(err, TL_INVALID_ARG, "the program was not checked (view %d)", k);
    tinfo *ti = &I->tens[s->param_index];
    const tinfo *ri = &I->tens[r->param_index];
    TRY(sym_shape(prog, s, args, ti->dim, err));
    int64_t count;
    TRY(row_major(ti, s, &count, err));
    if ((uint64_t)count * (uint64_t)tl_dtype_bits(s->dtype) != (uint64_t)ri->count * (uint64_t)tl_dtype_bits(r->dtype))
      return tl_error_set_at(err, TL_INVALID_ARG, s->pointer, 0, "the view '%s' has %" PRId64 " elements of %s but "
                             "'%s' has %" PRId64 " of %s: not the same size", s->name, count, tl_dtype_name(s->dtype),
                             r->name, ri->count, tl_dtype_name(r->dtype));
    ti->data = ri->data;
    ti->dt = s->dtype;
    ti->es = tl_dtype_size(s->dtype);
    ti->count = count;
    if (tl_dtype_bits(s->dtype) != tl_dtype_bits(r->dtype) &&
        (tl_dtype_is_packed(s->dtype) || tl_dtype_is_packed(r->dtype))) {
      /* packed elements one per byte on both sides: a copy through the device
       * layout (the checker made both read-only) */
      size_t dev = (size_t)tl_dtype_bytes(r->dtype, (uint64_t)ri->count);
      unsigned char *tmp = malloc(dev ? dev : 1);
      ti->own = malloc((size_t)count * ti->es + 1);
      if (!tmp || !ti->own) {
        free(tmp);
        return nomem(I);
      }
      tl_pack(r->dtype, ri->data, (uint64_t)ri->count, tmp);
      tl_unpack(s->dtype, tmp, (uint64_t)count, ti->own);
      free(tmp);
      ti->data = ti->own;
    }
  }
  return TL_OK;
}

static tl_status interp_setup(interp *I, const tl_program *prog, tl_arg *args, tl_error *err) {
  int64_t T = 1;
  for (int d = 0; d < 3; d++) {
    I->tdim[d] = prog->threads[d] > 0 ? prog->threads[d] : 1;
    T *= I->tdim[d];
    if (T > TL_MAX_THREADS)
      return tl_error_set(err, TL_INVALID_ARG, "the block has more than %d threads", TL_MAX_THREADS);
  }
  I->T = (int)T;
  TRY(check_scalars(prog, args, err));
  size_t np = (size_t)(prog->nparams + prog->nviews > 0 ? prog->nparams + prog->nviews : 1);
  size_t nv = (size_t)(prog->nvalue_slots > 0 ? prog->nvalue_slots : 1);
  size_t nb = (size_t)(prog->nbuffer_slots > 0 ? prog->nbuffer_slots : 1);
  I->tens = calloc(np, sizeof *I->tens);
  I->bufs = calloc(nb, sizeof *I->bufs);
  I->vals = calloc(nv * (size_t)T, sizeof *I->vals);
  I->slot_gen = calloc(nv, sizeof *I->slot_gen);
  I->slot_ok = calloc(nv, sizeof *I->slot_ok);
  I->pend = calloc((size_t)T, sizeof *I->pend);
  I->full = malloc((size_t)T);
  if (!I->tens || !I->bufs || !I->vals || !I->slot_gen || !I->slot_ok || !I->pend || !I->full)
    return nomem(I);
  memset(I->full, 1, (size_t)T);
  for (int p = 0; p < prog->nparams; p++) {
    const tl_sym *s = prog->params[p];
    if (s->kind != SYM_TENSOR)
      continue;
    tinfo *ti = &I->tens[p];
    TRY(tl_tensor_shape(prog, p, args, ti->dim, err));
    int64_t count;
    TRY(row_major(ti, s, &count, err));
    if ((uint64_t)count != (uint64_t)args[p].count)
      return tl_error_set(err, TL_INVALID_ARG, "tensor '%s' needs %" PRId64 " elements but %zu are given", s->name,
                          count, args[p].count);
    if (count > 0 && !args[p].data)
      return tl_error_set(err, TL_INVALID_ARG, "tensor '%s' has no data", s->name);
    ti->data = args[p].data;
    ti->dt = s->dtype;
    ti->es = tl_dtype_size(s->dtype);
    ti->count = count;
  }
  TRY(setup_views(I, prog, args, err));
  int64_t total = 0;
  for (int b = 0; b < prog->nbuffer_slots; b++) {
    const tl_sym *s = prog->buffer_syms[b];
    binfo *bi = &I->bufs[b];
    if (!s || s->kind != SYM_BUFFER || s->slot != b || s->ndim < 0 || s->ndim > TL_MAX_DIMS)
      return tl_error_set(err, TL_INVALID_ARG, "the program was not checked (buffer slot %d)", b);
    bi->sym = s;
    bi->dt = s->dtype;
    bi->es = tl_dtype_size(s->dtype);
    int64_t n = 1;
    for (int d = s->ndim - 1; d >= 0; d--) {
      bi->stride[d] = n;
      if (s->dims[d] < 1 || n > MAX_BUFFER_BYTES / s->dims[d])
        return tl_error_set(err, TL_LIMIT, "buffer '%s' is too large for the interpreter", s->name);
      n *= s->dims[d];
    }
    bi->nelem = n;
    if (s->view_of) { /* the memory of the shared buffer it views, set up before it */
      bi->data = I->bufs[s->view_of->slot].data;
      continue;
    }
    int64_t bytes = n * (int64_t)bi->es * (s->scope == SCOPE_LOCAL ? T : 1);
    total += bytes;
    if (bytes > MAX_BUFFER_BYTES || total > MAX_BUFFER_BYTES)
      return tl_error_set(err, TL_LIMIT, "the program's buffers are too large for the interpreter");
    bi->data = malloc((size_t)bytes);
    if (!bi->data)
      return nomem(I);
    poison_bytes(bi->data, bi->dt, (size_t)(bytes / (int64_t)bi->es));
  }
  for (int v = 0; v < prog->nvalue_slots; v++) {
    const tl_sym *s = prog->value_syms[v];
    if (!s || s->slot != v)
      return tl_error_set(err, TL_INVALID_ARG, "the program was not checked (value slot %d)", v);
    if (s->kind == SYM_SCALAR)
      for (int t = 0; t < T; t++)
        I->vals[(size_t)v * (size_t)T + (size_t)t] = args[s->param_index].scalar;
  }
  return TL_OK;
}

/* Runs block (x, y, z), of rank `rank` in its cluster, to its end. */
static tl_status run_block(interp *I, const tl_program *prog, int64_t x, int64_t y, int64_t z, int64_t rank) {
  const int64_t *grid = I->grid;
  tl_status st;
  I->crank = rank;
  I->bidx[0] = x;
  I->bidx[1] = y;
  I->bidx[2] = z;
  for (int d = 0; d < 3; d++) {
    const tl_sym *bv = prog->block_vars[d];
    if (!bv || bv->slot < 0 || bv->slot >= prog->nvalue_slots)
      continue;
    tl_scalar v;
    v.i = I->bidx[d];
    for (int t = 0; t < I->T; t++)
      I->vals[(size_t)bv->slot * (size_t)I->T + (size_t)t] = v;
  }
  I->mode = MODE_BLOCK;
  I->blk = x + grid[0] * (y + grid[1] * z);
  I->xfence = 0;
  I->xdirty = false;
  I->xev0 = I->nxev;
  st = exec_body(I, &prog->body, I->full, 0);
  if (st == TL_OK)
    st = xblock_end(I);
  return st;
}

/* One kernel: every block of its grid.  args: one per param, the
 * workspaces' included. */
static tl_status interpret_kernel(const tl_program *prog, tl_arg *args, const tl_interp_options *opts, tl_error *err) {
  if (prog->nparams > 0 && !args)
    return tl_error_set(err, TL_INVALID_ARG, "the program has %d parameters but no arguments are given",
                        prog->nparams);
  interp I;
  memset(&I, 0, sizeof I);
  I.prog = prog;
  I.args = args;
  I.err = err;
  I.mode = MODE_STATIC;
  I.check_par = opts ? opts->check_parallel != 0 : true;
  I.print_to = opts && opts->print_to ? opts->print_to : stderr;
  tl_status st = interp_setup(&I, prog, args, err);
  int64_t grid[3] = {0, 0, 0};
  if (st == TL_OK)
    st = tl_grid_size(prog, args, grid, err);
  memcpy(I.grid, grid, sizeof grid);
  if (st == TL_OK)
    tl_walk((tl_body *)&prog->body, &(tl_walker){.pre = mark_written}, &I);
  /* with a cluster_reduce, cluster by cluster (x fastest), each one's blocks in rank order from the last to 0
   * (the rank as CUDA's %cluster_ctarank: x fastest); otherwise block by block, x fastest */
  const int64_t *cl = prog->cluster;
  I.csize = prog->cluster_reduce ? cl[0] * cl[1] * cl[2] : 1;
  for (int d = 0; st == TL_OK && d < 3; d++)
    if (grid[d] % cl[d]) /* proto/tile-ir-v1.md 4: checked here where the grid is not constant */
      st = tl_error_set_at(err, TL_RUNTIME, prog->kptr, 0, "grid dimension %d is %lld, which is not a multiple of the "
                           "cluster's %lld", d, (long long)grid[d], (long long)cl[d]);
  const int64_t step[3] = {I.csize > 1 ? cl[0] : 1, I.csize > 1 ? cl[1] : 1, I.csize > 1 ? cl[2] : 1};
  for (int64_t z = 0; st == TL_OK && z < grid[2]; z += step[2])
    for (int64_t y = 0; st == TL_OK && y < grid[1]; y += step[1])
      for (int64_t x = 0; st == TL_OK && x < grid[0]; x += step[0])
        for (int64_t r = I.csize - 1; st == TL_OK && r >= 0; r--) /* (x, y, z): the cluster's first block */
          st = run_block(&I, prog, x + r % step[0], y + r / step[0] % step[1], z + r / step[0] / step[1],
                         I.csize > 1 ? r : 0);
  for (int i = 0; i < I.ncs; i++)
    free(I.cs[i].data);
  free(I.cs);
  interp_free(&I);
  if (st == TL_OK)
    tl_error_clear(err);
  return st;
}

/* The program's kernels in order (proto/tile-ir-v1.md 4.1), on the caller's
 * tensors and the workspaces, allocated here for the run and poisoned like
 * a tensor not given (9.6): a workspace is not zeroed, except a "zeroed"
 * one (3.1), which must also be all zero bytes again after the last kernel. */
tl_status tl_interpret(const tl_program *prog, tl_arg *args, const tl_interp_options *opts, tl_error *err) {
  if (!prog)
    return tl_error_set(err, TL_INVALID_ARG, "no program");
  if (!prog->next && !prog->nworkspaces)
    return interpret_kernel(prog, args, opts, err);
  int nu = tl_user_params(prog);
  if (nu > 0 && !args)
    return tl_error_set(err, TL_INVALID_ARG, "the program has %d parameters but no arguments are given", nu);
  tl_arg *all = calloc((size_t)prog->nparams + 1, sizeof *all);
  if (!all)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  tl_status st = TL_OK;
  for (int p = 0; p < nu; p++)
    all[p] = args[p];
  int64_t total = 0;
  for (int p = nu; st == TL_OK && p < prog->nparams; p++) {
    const tl_sym *s = prog->params[p];
    int64_t shape[TL_MAX_DIMS], n = 1;
    if ((st = tl_tensor_shape(prog, p, all, shape, err)) != TL_OK)
      break;
    for (int d = 0; d < s->ndim; d++)
      n = shape[d] && n > MAX_BUFFER_BYTES / shape[d] ? MAX_BUFFER_BYTES + 1 : n * shape[d];
    total += n * (int64_t)tl_dtype_size(s->dtype);
    if (total > MAX_BUFFER_BYTES) {
      st = tl_error_set_at(err, TL_LIMIT, s->pointer, 0, "the workspaces up to '%s' are too large for the "
                           "interpreter (%lld bytes at most)", s->name, (long long)MAX_BUFFER_BYTES);
      break;
    }
    all[p].count = (size_t)n;
    all[p].data = malloc((size_t)(n ? n : 1) * tl_dtype_size(s->dtype));
    if (!all[p].data)
      st = tl_error_set(err, TL_NOMEM, "out of memory");
    else if (s->ws_zeroed)
      memset(all[p].data, 0, (size_t)n * tl_dtype_size(s->dtype));
    else
      poison_bytes(all[p].data, s->dtype, (size_t)n);
  }
  for (const tl_program *k = prog; st == TL_OK && k; k = k->next)
    st = interpret_kernel(k, all, opts, err);
  for (int p = nu; st == TL_OK && p < prog->nparams; p++) {
    const tl_sym *s = prog->params[p];
    size_t nb = all[p].count * tl_dtype_size(s->dtype);
    const unsigned char *b = all[p].data;
    for (size_t i = 0; s->ws_zeroed && i < nb; i++)
      if (b[i]) {
        st = tl_error_set_at(err, TL_RUNTIME, s->pointer, 0,
                             "the run left byte %zu of workspace '%s' nonzero: a \"zeroed\" workspace must be all "
                             "zero again when the launch ends (a block that counts in it resets its count)",
                             i, s->name);
        break;
      }
  }
  for (int p = nu; p < prog->nparams; p++)
    free(all[p].data);
  free(all);
  return st;
}
