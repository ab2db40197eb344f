/*
 * device.c - libtlclient's GPU side: a tl_device is a GPU opened through the
 * compiler's runtime interface (compiler/gpudrv.h: a CUDA device through
 * libcuda.so.1 or, when there is no CUDA device, an AMD one through
 * libamdhip64, both with dlopen); a tl_kernel an artifact loaded on it (a
 * cubin or PTX, or an HSACO) through the launcher of launch.c, which `tlc
 * run --device` uses too.  Launching goes through the launch plan of
 * meta.c, so every check that needs no GPU (arguments, ranges, alignment,
 * grid limits) is made, and tested, without one, and both runtimes get the
 * same packed arguments.
 *
 * Targets: a CUDA device takes sm_NN / compute_NN as tl_target_runs_on
 * says and asks the server through tl_client_get_for_arch (for the target
 * compiler/target.c's tl_target_for_arch names: sm_90a on a
 * compute-capability-9.0 GPU); an AMD device
 * takes only a code object for its own gfx name ("gfx90a", gcnArchName up
 * to its first ':') and asks the server for exactly that target.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../compiler/gpudrv.h"
#include "internal.h"
#include "launch.h"

struct tl_device {
  tl_gpu *gpu;
};

static bool is_hip(const tl_device *d) { return tl_gpu_get_api(d->gpu) == TL_GPU_HIP; }

tl_status tl_device_open(int ordinal, tl_device **out, tl_error *err) {
  tl_error_clear(err);
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_open: out is NULL");
  *out = NULL;
  tl_device *d = calloc(1, sizeof *d);
  if (!d)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  tl_status st = tl_gpu_open(TL_GPU_ANY, ordinal, &d->gpu, err);
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
  tl_gpu_close(d->gpu);
  free(d);
}

int tl_device_arch(const tl_device *d) { return d ? tl_gpu_arch(d->gpu) : 0; }

const char *tl_device_arch_name(const tl_device *d) { return d ? tl_gpu_arch_name(d->gpu) : NULL; }

tl_device_api tl_device_get_api(const tl_device *d) {
  return !d ? TL_DEVICE_API_NONE : is_hip(d) ? TL_DEVICE_API_HIP : TL_DEVICE_API_CUDA;
}

const char *tl_device_name(const tl_device *d) { return d ? tl_gpu_device_info(d->gpu)->name : NULL; }

void tl_device_description(const tl_device *d, char *out, size_t cap) {
  if (cap)
    snprintf(out, cap, "%s (%s)", d ? tl_device_name(d) : "no device", d ? tl_device_arch_name(d) : "-");
}

tl_status tl_client_get_for_device(tl_client *c, const tl_client_request *req, const tl_device *d, tl_artifact **out,
                                   tl_error *err) {
  if (!d) {
    if (out)
      *out = NULL;
    return tl_error_set(err, TL_INVALID_ARG, "tl_client_get_for_device: no device");
  }
  if (c && c->tuning && !c->tuning_applied) { /* the record for this device, when tuning is on */
    char desc[512];
    tl_device_description(d, desc, sizeof desc);
    tl_tuned t;
    if (tl_tuning_apply(c, req, strcmp(c->tuning, "auto") == 0 ? desc : c->tuning, &t)) {
      c->tuning_applied = true;
      tl_status st = tl_client_get_for_device(c, &t.req, d, out, err);
      c->tuning_applied = false;
      tl_tuned_free(&t);
      return st;
    }
  }
  if (!is_hip(d))
    return tl_client_get_for_arch(c, req, tl_device_arch(d), out, err);
  /* AMD: only the device's own gfx target runs on it (no PTX-like fallback) */
  tl_error e;
  tl_error_clear(&e);
  tl_status st = tl_client_get(c, req, tl_device_arch_name(d), out, &e);
  if (st == TL_UNSUPPORTED && strncmp(e.pointer, "/targets", 8) == 0) {
    tl_error_set_at(err, st, e.pointer, 0, "%.700s; this GPU (%.120s) is an AMD %s and runs only code objects built for %s",
                    e.message, tl_device_name(d), tl_device_arch_name(d), tl_device_arch_name(d));
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
  return tl_gpu_alloc(d->gpu, bytes ? bytes : 1, ptr, err);
}

void tl_device_mem_free(tl_device *d, uint64_t ptr) {
  if (d && ptr)
    tl_gpu_free(d->gpu, ptr);
}

tl_status tl_device_upload(tl_device *d, uint64_t dst, const void *src, size_t bytes, tl_error *err) {
  tl_error_clear(err);
  if (!d || (bytes && (!src || !dst)))
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_upload: NULL argument");
  return tl_gpu_upload(d->gpu, dst, src, bytes, err);
}

tl_status tl_device_download(tl_device *d, void *dst, uint64_t src, size_t bytes, tl_error *err) {
  tl_error_clear(err);
  if (!d || (bytes && (!src || !dst)))
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_download: NULL argument");
  return tl_gpu_download(d->gpu, dst, src, bytes, err);
}

tl_status tl_device_sync(tl_device *d, tl_error *err) {
  tl_error_clear(err);
  if (!d)
    return tl_error_set(err, TL_INVALID_ARG, "tl_device_sync: no device");
  return tl_gpu_sync(d->gpu, err);
}

tl_status tl_kernel_load(tl_device *d, const tl_artifact *a, tl_kernel **out, tl_error *err) {
  tl_error_clear(err);
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_load: out is NULL");
  *out = NULL;
  if (!d || !a)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_load: NULL argument");
  return tl_kernel_load_image(d->gpu, a->target, a->bytes, a->n, a->metadata, out, err);
}

tl_status tl_kernel_load_binary(tl_device *d, const char *target, const void *bytes, size_t n,
                                const char *metadata, tl_kernel **out, tl_error *err) {
  tl_error_clear(err);
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_load_binary: out is NULL");
  *out = NULL;
  if (!d || !target || !bytes || !n || !metadata)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_load_binary: NULL argument or no bytes");
  return tl_kernel_load_image(d->gpu, target, bytes, n, metadata, out, err);
}
