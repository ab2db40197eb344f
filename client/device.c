/*
 * device.c - libtlclient's GPU side: a tl_device is a CUDA device opened
 * through the compiler's driver loader (compiler/cudadrv.h: libcuda.so.1
 * with dlopen, the primary context) or, when there is no CUDA device, an
 * AMD one through the HIP loader (compiler/hipdrv.h: libamdhip64 with
 * dlopen); a tl_kernel an artifact loaded on it (a cubin or PTX through
 * cuModuleLoadDataEx, an HSACO through hipModuleLoadData).  Launching goes
 * through the launch plan of meta.c, so every check that needs no GPU
 * (arguments, ranges, alignment, grid limits) is made, and tested, without
 * one, and both runtimes get the same packed arguments; this file only adds
 * the target/architecture check before loading and the runtime calls.
 *
 * Targets: a CUDA device takes sm_NN / compute_NN as tl_target_runs_on
 * says and asks the server through tl_client_get_for_arch; an AMD device
 * takes only a code object for its own gfx name ("gfx90a", gcnArchName up
 * to its first ':') and asks the server for exactly that target.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../compiler/cudadrv.h"
#include "../compiler/hipdrv.h"
#include "internal.h"

struct tl_device {
  tl_cuda *cuda; /* exactly one of cuda and hip is set */
  tl_hip *hip;
  char arch_name[TL_CLIENT_TARGET_MAX + 1]; /* "sm_90" or "gfx90a" */
};

struct tl_kernel {
  tl_device *dev;
  tl_cuda_module *mod;
  tl_cuda_func *fn;
  tl_hip_module *hmod;
  tl_hip_func *hfn;
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
  tl_error cerr;
  tl_error_clear(&cerr);
  tl_status st = tl_cuda_open(ordinal, &d->cuda, &cerr);
  if (st == TL_OK) {
    snprintf(d->arch_name, sizeof d->arch_name, "sm_%d", tl_cuda_arch(d->cuda));
    *out = d;
    return TL_OK;
  }
  if (st != TL_NO_DEVICE) {
    /* a CUDA driver with devices answered (a bad ordinal, a driver failure) */
    free(d);
    if (err)
      *err = cerr;
    return st;
  }
  /* no CUDA device: an AMD GPU through HIP */
  tl_error herr;
  tl_error_clear(&herr);
  st = tl_hip_open(ordinal, &d->hip, &herr);
  if (st == TL_OK) {
    snprintf(d->arch_name, sizeof d->arch_name, "%s", tl_hip_arch(d->hip));
    *out = d;
    return TL_OK;
  }
  free(d);
  if (st == TL_NO_DEVICE)
    return tl_error_set(err, TL_NO_DEVICE, "%.500s; %.500s", cerr.message, herr.message);
  if (err)
    *err = herr;
  return st;
}

void tl_device_free(tl_device *d) {
  if (!d)
    return;
  tl_cuda_close(d->cuda);
  tl_hip_close(d->hip);
  free(d);
}

int tl_device_arch(const tl_device *d) { return d && d->cuda ? tl_cuda_arch(d->cuda) : 0; }

const char *tl_device_arch_name(const tl_device *d) { return d ? d->arch_name : NULL; }

tl_device_api tl_device_get_api(const tl_device *d) {
  return !d ? TL_DEVICE_API_NONE : d->hip ? TL_DEVICE_API_HIP : TL_DEVICE_API_CUDA;
}

const char *tl_device_name(const tl_device *d) {
  if (!d)
    return NULL;
  return d->hip ? tl_hip_device_info(d->hip)->name : tl_cuda_device_info(d->cuda)->name;
}

tl_status tl_client_get_for_device(tl_client *c, const tl_client_request *req, const tl_device *d, tl_artifact **out,
                                   tl_error *err) {
  if (!d) {
    if (out)
      *out = NULL;
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_get_for_device: no device");
  }
  if (!d->hip)
    return tl_client_get_for_arch(c, req, tl_device_arch(d), out, err);
  /* AMD: only the device's own gfx target runs on it (no PTX-like fallback) */
  tl_error e;
  tl_error_clear(&e);
  tl_status st = tl_client_get(c, req, d->arch_name, out, &e);
  if (st == TL_UNSUPPORTED && strncmp(e.pointer, "/targets", 8) == 0) {
    tl_error_set_at(err, st, e.pointer, 0, "%.700s; this GPU (%.120s) is an AMD %s and runs only code objects built for %s",
                    e.message, tl_device_name(d), d->arch_name, d->arch_name);
    return st;
  }
  if (st != TL_OK && err)
    *err = e;
  return st;
}

tl_status tl_device_alloc(tl_device *d, size_t bytes, uint64_t *ptr, tl_error *err) {
  tl_error_clear(err);
  if (!d || !ptr)
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_alloc: NULL argument");
  *ptr = 0;
  if (d->hip)
    return tl_hip_alloc(d->hip, bytes ? bytes : 1, ptr, err);
  return tl_cuda_alloc(d->cuda, bytes ? bytes : 1, ptr, err);
}

void tl_device_mem_free(tl_device *d, uint64_t ptr) {
  if (d && ptr) {
    if (d->hip)
      tl_hip_free(d->hip, ptr);
    else
      tl_cuda_free(d->cuda, ptr);
  }
}

tl_status tl_device_upload(tl_device *d, uint64_t dst, const void *src, size_t bytes, tl_error *err) {
  tl_error_clear(err);
  if (!d || (bytes && (!src || !dst)))
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_upload: NULL argument");
  if (!bytes)
    return TL_OK;
  return d->hip ? tl_hip_upload(d->hip, dst, src, bytes, err) : tl_cuda_upload(d->cuda, dst, src, bytes, err);
}

tl_status tl_device_download(tl_device *d, void *dst, uint64_t src, size_t bytes, tl_error *err) {
  tl_error_clear(err);
  if (!d || (bytes && (!src || !dst)))
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_download: NULL argument");
  if (!bytes)
    return TL_OK;
  return d->hip ? tl_hip_download(d->hip, dst, src, bytes, err) : tl_cuda_download(d->cuda, dst, src, bytes, err);
}

tl_status tl_device_sync(tl_device *d, tl_error *err) {
  tl_error_clear(err);
  if (!d)
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_sync: no device");
  return d->hip ? tl_hip_sync(d->hip, err) : tl_cuda_sync(d->cuda, err);
}

tl_status tl_kernel_load(tl_device *d, const tl_artifact *a, tl_kernel **out, tl_error *err) {
  tl_error_clear(err);
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_load: out is NULL");
  *out = NULL;
  if (!d || !a)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_load: NULL argument");
  if (d->hip) {
    if (strcmp(a->target, d->arch_name) != 0)
      return tl_error_set(err, TL_UNSUPPORTED, "kernel '%s' was built for %s, which cannot run on this GPU (%s, %s)",
                          a->meta->entry, a->target, tl_device_name(d), d->arch_name);
  } else {
    int arch = tl_device_arch(d);
    if (!tl_target_runs_on(a->target, arch))
      return tl_error_set(err, TL_UNSUPPORTED, "kernel '%s' was built for %s, which cannot run on this GPU (%s, sm_%d)",
                          a->meta->entry, a->target, tl_device_name(d), arch);
  }
  tl_kernel *k = calloc(1, sizeof *k);
  if (!k)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  k->dev = d;
  snprintf(k->target, sizeof k->target, "%s", a->target);
  tl_status st = tl_meta_parse(a->metadata, &k->meta, err);
  if (d->hip) {
    if (st == TL_OK)
      st = tl_hip_load(d->hip, a->bytes, a->n, &k->hmod, err);
    if (st == TL_OK)
      st = tl_hip_function(k->hmod, k->meta->entry, &k->hfn, err);
  } else {
    if (st == TL_OK)
      st = tl_cuda_load(d->cuda, a->bytes, a->n, &k->mod, err);
    if (st == TL_OK)
      st = tl_cuda_function(k->mod, k->meta->entry, &k->fn, err);
  }
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
  if (k->hfn)
    return tl_hip_launch(k->hfn, plan.grid, plan.block, plan.dyn_smem, stream, plan.kargs, err);
  return tl_cuda_launch(k->fn, plan.grid, plan.block, plan.dyn_smem, stream, plan.kargs, err);
}

void tl_kernel_free(tl_kernel *k) {
  if (!k)
    return;
  tl_cuda_unload(k->mod);
  tl_hip_unload(k->hmod);
  tl_meta_free(k->meta);
  free(k);
}
