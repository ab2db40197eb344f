/*
 * device.c - libtlclient's GPU side: a tl_device is a CUDA device opened
 * through the compiler's driver loader (compiler/cudadrv.h: libcuda.so.1
 * with dlopen, the primary context), a tl_kernel an artifact loaded on it.
 * Launching goes through the launch plan of meta.c, so every check that
 * needs no GPU (arguments, ranges, alignment, grid limits) is made, and
 * tested, without one; this file only adds the target/architecture check
 * before loading and the driver calls.  HIP (libamdhip64) is not here yet:
 * the compiler has no AMD back end so far.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../compiler/cudadrv.h"
#include "internal.h"

struct tl_device {
  tl_cuda *cuda;
};

struct tl_kernel {
  tl_device *dev;
  tl_cuda_module *mod;
  tl_cuda_func *fn;
  tl_meta *meta;
  char target[TL_CLIENT_TARGET_MAX + 1];
};

tl_status tl_device_open(int ordinal, tl_device **out, tl_error *err) {
  tl_error_clear(err);
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_open: out is NULL");
  *out = NULL;
  tl_device *d = calloc(1, sizeof *d);
  if (!d)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  tl_status st = tl_cuda_open(ordinal, &d->cuda, err);
  if (st != TL_OK) {
    free(d);
    return st;
  }
  *out = d;
  return TL_OK;
}

void tl_device_free(tl_device *d) {
  if (!d)
    return;
  tl_cuda_close(d->cuda);
  free(d);
}

int tl_device_arch(const tl_device *d) { return d ? tl_cuda_arch(d->cuda) : 0; }
const char *tl_device_name(const tl_device *d) { return d ? tl_cuda_device_info(d->cuda)->name : NULL; }

tl_status tl_client_get_for_device(tl_client *c, const tl_client_request *req, const tl_device *d, tl_artifact **out,
                                   tl_error *err) {
  if (!d) {
    if (out)
      *out = NULL;
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_get_for_device: no device");
  }
  return tl_client_get_for_arch(c, req, tl_device_arch(d), out, err);
}

tl_status tl_device_alloc(tl_device *d, size_t bytes, uint64_t *ptr, tl_error *err) {
  tl_error_clear(err);
  if (!d || !ptr)
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_alloc: NULL argument");
  *ptr = 0;
  return tl_cuda_alloc(d->cuda, bytes ? bytes : 1, ptr, err);
}

void tl_device_mem_free(tl_device *d, uint64_t ptr) {
  if (d && ptr)
    tl_cuda_free(d->cuda, ptr);
}

tl_status tl_device_upload(tl_device *d, uint64_t dst, const void *src, size_t bytes, tl_error *err) {
  tl_error_clear(err);
  if (!d || (bytes && (!src || !dst)))
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_upload: NULL argument");
  return bytes ? tl_cuda_upload(d->cuda, dst, src, bytes, err) : TL_OK;
}

tl_status tl_device_download(tl_device *d, void *dst, uint64_t src, size_t bytes, tl_error *err) {
  tl_error_clear(err);
  if (!d || (bytes && (!src || !dst)))
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_download: NULL argument");
  return bytes ? tl_cuda_download(d->cuda, dst, src, bytes, err) : TL_OK;
}

tl_status tl_device_sync(tl_device *d, tl_error *err) {
  tl_error_clear(err);
  if (!d)
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_sync: no device");
  return tl_cuda_sync(d->cuda, err);
}

tl_status tl_kernel_load(tl_device *d, const tl_artifact *a, tl_kernel **out, tl_error *err) {
  tl_error_clear(err);
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_load: out is NULL");
  *out = NULL;
  if (!d || !a)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_load: NULL argument");
  int arch = tl_device_arch(d);
  if (!tl_target_runs_on(a->target, arch))
    return tl_error_set(err, TL_UNSUPPORTED, "kernel '%s' was built for %s, which cannot run on this GPU (%s, sm_%d)",
                        a->meta->entry, a->target, tl_device_name(d), arch);
  tl_kernel *k = calloc(1, sizeof *k);
  if (!k)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  k->dev = d;
  snprintf(k->target, sizeof k->target, "%s", a->target);
  tl_status st = tl_meta_parse(a->metadata, &k->meta, err);
  if (st == TL_OK)
    st = tl_cuda_load(d->cuda, a->bytes, a->n, &k->mod, err);
  if (st == TL_OK)
    st = tl_cuda_function(k->mod, k->meta->entry, &k->fn, err);
  if (st != TL_OK) {
    tl_kernel_free(k);
    return st;
  }
  *out = k;
  return TL_OK;
}

tl_status tl_kernel_launch(tl_kernel *k, const tl_kernel_arg *args, int nargs, void *stream, tl_error *err) {
  tl_error_clear(err);
  if (!k)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_launch: no kernel");
  tl_launch_plan plan;
  tl_status st = tl_launch_plan_make(k->meta, args, nargs, &plan, err);
  if (st != TL_OK || plan.empty)
    return st;
  return tl_cuda_launch(k->fn, plan.grid, plan.block, plan.dyn_smem, stream, plan.kargs, err);
}

void tl_kernel_free(tl_kernel *k) {
  if (!k)
    return;
  tl_cuda_unload(k->mod);
  tl_meta_free(k->meta);
  free(k);
}
