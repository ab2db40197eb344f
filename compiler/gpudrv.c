/*
 * gpudrv.c - what gpudrv.h's runtimes share, written once: argument
 * checks, binding the device before each call, the module and function
 * bookkeeping, the checks before a launch, memory, streams and events.
 * The runtime calls themselves are the driver table entries of cudadrv.c
 * and hipdrv.c.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpudrv.h"

struct tl_gpu {
  const tl_gpu_driver *drv;
  void *rt;
  tl_gpu_device info;
};

struct tl_gpu_func {
  tl_gpu_module *mod;
  void *fn;
  int static_smem; /* static shared memory, read at lookup */
  int max_threads; /* the kernel's thread limit, read at lookup (0: unknown) */
  char *name;
  tl_gpu_func *next;
};

struct tl_gpu_module {
  tl_gpu *g;
  void *mod;
  char log[TL_GPU_JIT_LOG];
  pthread_mutex_t lock; /* guards the function list */
  tl_gpu_func *funcs;
};

struct tl_gpu_event {
  tl_gpu *g;
  void *ev;
};

/* Makes g's device current on this thread. */
static tl_status bind(tl_gpu *g, tl_error *err) { return g->drv->bind(g->rt, err); }

/* ---- opening ---------------------------------------------------------------------- */

static tl_status open_one(const tl_gpu_driver *drv, int ordinal, tl_gpu **out, tl_error *err) {
  tl_gpu *g = calloc(1, sizeof *g);
  if (!g)
    return tl_error_set(err, TL_NOMEM, "out of memory opening the %s runtime", drv->name);
  g->drv = drv;
  tl_status st = drv->open(ordinal, &g->rt, &g->info, err);
  if (st != TL_OK) {
    free(g);
    return st;
  }
  g->info.api = drv->api;
  g->info.ordinal = ordinal;
  if (!g->info.max_shared_per_block_optin)
    g->info.max_shared_per_block_optin = g->info.max_shared_per_block;
  *out = g;
  return TL_OK;
}

tl_status tl_gpu_open(tl_gpu_api api, int ordinal, tl_gpu **out, tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_open: NULL argument");
  *out = NULL;
  if (ordinal < 0)
    return tl_error_set(err, TL_INVALID_ARG, "device ordinal %d is negative", ordinal);
  if (api == TL_GPU_CUDA)
    return open_one(&tl_gpu_cuda_driver, ordinal, out, err);
  if (api == TL_GPU_HIP)
    return open_one(&tl_gpu_hip_driver, ordinal, out, err);
  /* any: CUDA, and when it has no device, HIP */
  tl_error cerr, herr;
  tl_error_clear(&cerr);
  tl_error_clear(&herr);
  tl_status st = open_one(&tl_gpu_cuda_driver, ordinal, out, &cerr);
  if (st != TL_NO_DEVICE) {
    if (st != TL_OK && err)
      *err = cerr;
    return st;
  }
  st = open_one(&tl_gpu_hip_driver, ordinal, out, &herr);
  if (st == TL_NO_DEVICE)
    return tl_error_set(err, TL_NO_DEVICE, "%.500s; %.500s", cerr.message, herr.message);
  if (st != TL_OK && err)
    *err = herr;
  return st;
}

void tl_gpu_close(tl_gpu *g) {
  if (!g)
    return;
  g->drv->close(g->rt);
  free(g);
}

const tl_gpu_device *tl_gpu_device_info(const tl_gpu *g) { return g ? &g->info : NULL; }
tl_gpu_api tl_gpu_get_api(const tl_gpu *g) { return g ? g->info.api : TL_GPU_ANY; }
int tl_gpu_arch(const tl_gpu *g) { return g ? g->info.arch : 0; }
const char *tl_gpu_arch_name(const tl_gpu *g) { return g ? g->info.arch_name : ""; }

/* ---- modules and functions -------------------------------------------------------- */

tl_status tl_gpu_load(tl_gpu *g, const void *image, size_t n, tl_gpu_module **out, tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_load: NULL argument");
  *out = NULL;
  if (!g || !image || n == 0)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_load: no image given");
  if (n > TL_GPU_MAX_IMAGE)
    return tl_error_set(err, TL_TOO_LARGE, "image of %zu bytes is over the limit of %u", n, TL_GPU_MAX_IMAGE);
  tl_status st = bind(g, err);
  if (st != TL_OK)
    return st;
  tl_gpu_module *m = calloc(1, sizeof *m);
  if (!m)
    return tl_error_set(err, TL_NOMEM, "out of memory loading a module");
  if ((st = g->drv->load(g->rt, image, n, &m->mod, m->log, err)) != TL_OK) {
    free(m);
    return st;
  }
  m->log[TL_GPU_JIT_LOG - 1] = 0;
  m->g = g;
  pthread_mutex_init(&m->lock, NULL);
  *out = m;
  return TL_OK;
}

const char *tl_gpu_module_log(const tl_gpu_module *m) { return m ? m->log : ""; }

void tl_gpu_unload(tl_gpu_module *m) {
  if (!m)
    return;
  for (tl_gpu_func *f = m->funcs, *next; f; f = next) {
    next = f->next;
    free(f->name);
    free(f);
  }
  if (bind(m->g, NULL) == TL_OK)
    m->g->drv->unload(m->g->rt, m->mod);
  pthread_mutex_destroy(&m->lock);
  free(m);
}

/* One attribute, 0 when the runtime is not asked for it or does not answer. */
static int fattr_or_zero(tl_gpu *g, void *fn, tl_gpu_fattr which) {
  int v = 0;
  if (g->drv->fattr(g->rt, fn, which, &v, NULL) != TL_OK || v < 0)
    return 0;
  return v;
}

tl_status tl_gpu_function(tl_gpu_module *m, const char *name, tl_gpu_func **out, tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_function: NULL argument");
  *out = NULL;
  if (!m || !name || !*name)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_function: no module or name");
  if (strlen(name) > TL_GPU_MAX_NAME)
    return tl_error_set(err, TL_LIMIT, "kernel name longer than %d bytes", TL_GPU_MAX_NAME);
  tl_gpu *g = m->g;
  pthread_mutex_lock(&m->lock);
  for (tl_gpu_func *f = m->funcs; f; f = f->next) {
    if (strcmp(f->name, name) == 0) {
      pthread_mutex_unlock(&m->lock);
      *out = f;
      return TL_OK;
    }
  }
  void *fn = NULL;
  tl_status st = bind(g, err);
  if (st == TL_OK) {
    st = g->drv->function(g->rt, m->mod, name, &fn, err);
    if (st == TL_NOT_FOUND)
      tl_error_set(err, TL_NOT_FOUND, "the module has no kernel named '%.200s'", name);
  }
  tl_gpu_func *f = NULL;
  if (st == TL_OK) {
    f = calloc(1, sizeof *f);
    if (f)
      f->name = strdup(name);
    if (!f || !f->name) {
      free(f);
      f = NULL;
      st = tl_error_set(err, TL_NOMEM, "out of memory looking up a kernel");
    }
  }
  if (st == TL_OK) {
    f->mod = m;
    f->fn = fn;
    f->static_smem = fattr_or_zero(g, fn, TL_FATTR_SHARED_BYTES);
    f->max_threads = fattr_or_zero(g, fn, TL_FATTR_MAX_THREADS);
    f->next = m->funcs;
    m->funcs = f;
    *out = f;
  }
  pthread_mutex_unlock(&m->lock);
  return st;
}

tl_status tl_gpu_function_attrs(tl_gpu_func *fn, tl_gpu_func_attrs *out, tl_error *err) {
  if (!fn || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_function_attrs: NULL argument");
  tl_gpu *g = fn->mod->g;
  tl_status st = bind(g, err);
  if (st != TL_OK)
    return st;
  int v[TL_FATTR_COUNT];
  for (int i = 0; i < TL_FATTR_COUNT; i++) {
    if ((st = g->drv->fattr(g->rt, fn->fn, (tl_gpu_fattr)i, &v[i], err)) != TL_OK)
      return st;
    if (v[i] < 0)
      v[i] = 0;
  }
  *out = (tl_gpu_func_attrs){
      .num_regs = v[TL_FATTR_NUM_REGS],
      .local_bytes = v[TL_FATTR_LOCAL_BYTES],
      .shared_bytes = v[TL_FATTR_SHARED_BYTES],
      .const_bytes = v[TL_FATTR_CONST_BYTES],
      .max_threads = v[TL_FATTR_MAX_THREADS],
      .max_dynamic_shared = v[TL_FATTR_MAX_DYNAMIC_SHARED],
      .ptx_version = v[TL_FATTR_PTX_VERSION],
      .binary_version = v[TL_FATTR_BINARY_VERSION],
  };
  return TL_OK;
}

/* The checks before a launch that need only the device's and the kernel's
 * figures. */
static tl_status launch_checks(const tl_gpu_func *fn, const unsigned grid[3], const unsigned block[3],
                               unsigned dyn_smem, tl_error *err) {
  const tl_gpu *g = fn->mod->g;
  const tl_gpu_driver *drv = g->drv;
  const tl_gpu_device *d = &g->info;
  static const char dims[] = "xyz";
  for (int i = 0; i < 3; i++)
    if (grid[i] == 0 || block[i] == 0)
      return tl_error_set(err, TL_INVALID_ARG, "launch of %s with a zero dimension: grid %ux%ux%u, block %ux%ux%u",
                          fn->name, grid[0], grid[1], grid[2], block[0], block[1], block[2]);
  unsigned long long threads = (unsigned long long)block[0] * block[1] * block[2];
  unsigned long long limit = (unsigned long long)d->max_threads_per_block;
  if (fn->max_threads > 0 && (limit == 0 || (unsigned long long)fn->max_threads < limit))
    limit = (unsigned long long)fn->max_threads;
  if (limit > 0 && threads > limit)
    return tl_error_set(err, TL_LIMIT, "block of %llu threads for %s is over its limit of %llu by %llu", threads,
                        fn->name, limit, threads - limit);
  for (int i = 0; i < 3; i++) {
    if (d->max_block_dim[i] > 0 && block[i] > (unsigned)d->max_block_dim[i])
      return tl_error_set(err, TL_LIMIT, "block dimension %c of %s is %u, over the device's %d by %u", dims[i],
                          fn->name, block[i], d->max_block_dim[i], block[i] - (unsigned)d->max_block_dim[i]);
    unsigned long long items = (unsigned long long)grid[i] * block[i];
    if (drv->items_32bit && items > 0xffffffffull)
      return tl_error_set(err, TL_LIMIT,
                          "grid dimension %c of %s spans %llu work-items (%u blocks of %u), over "
                          "the 4294967295 an AMD dispatch can count by %llu",
                          dims[i], fn->name, items, grid[i], block[i], items - 0xffffffffull);
  }
  unsigned long long smem = (unsigned long long)dyn_smem + (unsigned)fn->static_smem;
  unsigned long long smax = (unsigned long long)d->max_shared_per_block_optin;
  if (smax > 0 && smem > smax)
    return tl_error_set(err, TL_LIMIT,
                        "%s needs %llu bytes of %s (%d static + %u dynamic), over the device's %llu per %s by %llu",
                        fn->name, smem, drv->smem_name, fn->static_smem, dyn_smem, smax, drv->block_name,
                        smem - smax);
  return TL_OK;
}

tl_status tl_gpu_launch(tl_gpu_func *fn, const unsigned grid[3], const unsigned block[3], unsigned dyn_smem,
                        tl_gpu_stream stream, void **args, tl_error *err) {
  return tl_gpu_launch_ex(fn, grid, block, dyn_smem, stream, args, 0, err);
}

tl_status tl_gpu_launch_ex(tl_gpu_func *fn, const unsigned grid[3], const unsigned block[3], unsigned dyn_smem,
                           tl_gpu_stream stream, void **args, unsigned flags, tl_error *err) {
  if (!fn || !grid || !block)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_launch: NULL argument");
  tl_status st = launch_checks(fn, grid, block, dyn_smem, err);
  if (st != TL_OK)
    return st;
  tl_gpu *g = fn->mod->g;
  if ((st = bind(g, err)) != TL_OK)
    return st;
  return g->drv->launch(g->rt, fn->fn, grid, block, dyn_smem, stream, args, flags, err);
}

tl_status tl_gpu_tensor_map(tl_gpu *g, const tl_gpu_tmap *m, void *out, tl_error *err) {
  if (!g || !m || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_tensor_map: NULL argument");
  if ((uintptr_t)out % 64)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_tensor_map: the tensor map must be 64-byte aligned");
  if (!g->drv->tensor_map)
    return tl_error_set(err, TL_UNSUPPORTED, "%s has no tensor maps", g->drv->name);
  tl_status st = bind(g, err);
  return st != TL_OK ? st : g->drv->tensor_map(g->rt, m, out, err);
}

/* ---- memory, streams, events ------------------------------------------------------ */

tl_status tl_gpu_alloc(tl_gpu *g, size_t bytes, tl_gpu_ptr *out, tl_error *err) {
  if (!g || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_alloc: NULL argument");
  *out = 0;
  if (bytes == 0)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_alloc: zero bytes");
  tl_status st = bind(g, err);
  return st != TL_OK ? st : g->drv->alloc(g->rt, bytes, out, err);
}

void tl_gpu_free(tl_gpu *g, tl_gpu_ptr p) {
  if (g && p && bind(g, NULL) == TL_OK)
    g->drv->free(g->rt, p);
}

tl_status tl_gpu_upload(tl_gpu *g, tl_gpu_ptr dst, const void *src, size_t bytes, tl_error *err) {
  if (!g || (!src && bytes))
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_upload: NULL argument");
  if (bytes == 0)
    return TL_OK;
  tl_status st = bind(g, err);
  return st != TL_OK ? st : g->drv->upload(g->rt, dst, src, bytes, err);
}

tl_status tl_gpu_download(tl_gpu *g, void *dst, tl_gpu_ptr src, size_t bytes, tl_error *err) {
  if (!g || (!dst && bytes))
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_download: NULL argument");
  if (bytes == 0)
    return TL_OK;
  tl_status st = bind(g, err);
  return st != TL_OK ? st : g->drv->download(g->rt, dst, src, bytes, err);
}

tl_status tl_gpu_memset8(tl_gpu *g, tl_gpu_ptr dst, unsigned char value, size_t bytes, tl_error *err) {
  if (!g)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_memset8: NULL handle");
  if (bytes == 0)
    return TL_OK;
  tl_status st = bind(g, err);
  return st != TL_OK ? st : g->drv->memset8(g->rt, dst, value, bytes, err);
}

tl_status tl_gpu_stream_create(tl_gpu *g, tl_gpu_stream *out, tl_error *err) {
  if (!g || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_stream_create: NULL argument");
  *out = NULL;
  tl_status st = bind(g, err);
  return st != TL_OK ? st : g->drv->stream_create(g->rt, out, err);
}

void tl_gpu_stream_destroy(tl_gpu *g, tl_gpu_stream s) {
  if (g && s && bind(g, NULL) == TL_OK)
    g->drv->stream_destroy(g->rt, s);
}

tl_status tl_gpu_stream_sync(tl_gpu *g, tl_gpu_stream s, tl_error *err) {
  if (!g)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_stream_sync: NULL handle");
  tl_status st = bind(g, err);
  return st != TL_OK ? st : g->drv->stream_sync(g->rt, s, err);
}

tl_status tl_gpu_sync(tl_gpu *g, tl_error *err) {
  if (!g)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_sync: NULL handle");
  tl_status st = bind(g, err);
  return st != TL_OK ? st : g->drv->sync(g->rt, err);
}

tl_status tl_gpu_event_create(tl_gpu *g, tl_gpu_event **out, tl_error *err) {
  if (!g || !out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_event_create: NULL argument");
  *out = NULL;
  tl_status st = bind(g, err);
  if (st != TL_OK)
    return st;
  tl_gpu_event *e = calloc(1, sizeof *e);
  if (!e)
    return tl_error_set(err, TL_NOMEM, "out of memory creating an event");
  if ((st = g->drv->event_create(g->rt, &e->ev, err)) != TL_OK) {
    free(e);
    return st;
  }
  e->g = g;
  *out = e;
  return TL_OK;
}

tl_status tl_gpu_event_record(tl_gpu_event *ev, tl_gpu_stream s, tl_error *err) {
  if (!ev)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_event_record: NULL event");
  tl_status st = bind(ev->g, err);
  return st != TL_OK ? st : ev->g->drv->event_record(ev->g->rt, ev->ev, s, err);
}

tl_status tl_gpu_event_elapsed(tl_gpu_event *start, tl_gpu_event *end, float *ms, tl_error *err) {
  if (!start || !end || !ms || start->g != end->g)
    return tl_error_set(err, TL_INVALID_ARG, "tl_gpu_event_elapsed: bad arguments");
  tl_gpu *g = end->g;
  tl_status st = bind(g, err);
  return st != TL_OK ? st : g->drv->event_elapsed(g->rt, start->ev, end->ev, ms, err);
}

void tl_gpu_event_destroy(tl_gpu_event *ev) {
  if (!ev)
    return;
  if (bind(ev->g, NULL) == TL_OK)
    ev->g->drv->event_destroy(ev->g->rt, ev->ev);
  free(ev);
}
