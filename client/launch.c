/*
 * launch.c - the launcher of launch.h: loading a kernel from its binary and
 * metadata on a GPU of gpudrv.h, and launching it through the launch plan
 * of meta.c.  Shared by libtlclient (device.c) and `tlc run --device`.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "launch.h"

struct tl_kernel {
  tl_gpu *gpu;
  tl_gpu_module *mod;
  tl_gpu_func *fn;
  tl_meta *meta;
  /* format 3: each kernel's function, and the workspaces of the last launch, kept for the next
   * (one allocation, grown when a launch needs more) */
  tl_gpu_func *fns[TL_META_KERNELS_MAX];
  tl_gpu_ptr ws;
  uint64_t ws_bytes;
  uint64_t ws_off[TL_MAX_WORKSPACES + 1]; /* the last launch's placement (+1: its total), where the
                                             "zeroed" workspaces hold zeros */
  bool ws_placed;
};

/* Whether a binary for target runs on the device. */
static tl_status check_target(tl_gpu *gpu, const char *entry, const char *target, tl_error *err) {
  const tl_gpu_device *d = tl_gpu_device_info(gpu);
  bool ok = d->api == TL_GPU_HIP ? strcmp(target, d->arch_name) == 0 : tl_target_runs_on(target, d->arch);
  if (!ok)
    return tl_error_set(err, TL_UNSUPPORTED, "kernel '%s' was built for %s, which cannot run on this GPU (%s, %s)",
                        entry, target, d->name, d->arch_name);
  return TL_OK;
}

tl_status tl_kernel_load_image(tl_gpu *gpu, const char *target, const void *image, size_t n, const char *metadata,
                               tl_kernel **out, tl_error *err) {
  tl_error_clear(err);
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_load: out is NULL");
  *out = NULL;
  if (!gpu || !target || !image || !metadata)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_load: NULL argument");
  tl_kernel *k = calloc(1, sizeof *k);
  if (!k)
    return tl_error_set(err, TL_NOMEM, "out of memory");
  k->gpu = gpu;
  tl_status st = tl_meta_parse(metadata, &k->meta, err);
  if (st == TL_OK)
    st = check_target(gpu, k->meta->entry, target, err);
  if (st == TL_OK)
    st = tl_gpu_load(gpu, image, n, &k->mod, err);
  if (st == TL_OK)
    st = tl_gpu_function(k->mod, k->meta->entry, &k->fn, err);
  for (int i = 0; st == TL_OK && i < k->meta->nkernels; i++)
    st = tl_gpu_function(k->mod, k->meta->kernels[i]->entry, &k->fns[i], err);
  if (st != TL_OK) {
    tl_kernel_free(k);
    return st;
  }
  *out = k;
  return TL_OK;
}

tl_status tl_kernel_grid(const tl_kernel *k, const tl_kernel_arg *args, int nargs, int64_t grid[3], tl_error *err) {
  if (!k)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_grid: no kernel");
  return tl_meta_grid(k->meta, args, nargs, grid, err);
}

/* One kernel m of k (k->meta itself, or one of its format-3 kernels) with
 * every argument of its entry point. */
static tl_status launch_one(tl_kernel *k, const tl_meta *m, tl_gpu_func *fn, const tl_kernel_arg *args, int nargs,
                            void *stream, tl_error *err) {
  tl_launch_plan plan;
  tl_status st = tl_launch_plan_make(m, args, nargs, &plan, err);
  if (st != TL_OK || plan.empty)
    return st;
  int sms = tl_gpu_device_info(k->gpu)->multiprocessors;
  if (m->persistent && sms > 0) { /* a persistent kernel walks its grid's tiles with fewer blocks */
    uint64_t tiles = (uint64_t)plan.grid[0] * plan.grid[1] * plan.grid[2], cap = (uint64_t)sms * m->persistent;
    /* TL_PERSISTENT_BLOCKS=N starts at most N (SMs left to other streams' kernels, or tests of the walk) */
    const char *pb = getenv("TL_PERSISTENT_BLOCKS");
    if (pb && *pb) {
      char *end;
      errno = 0;
      unsigned long long n = strtoull(pb, &end, 10);
      if (*end || errno || n < 1 || n > 0x7fffffffu || *pb == '-' || *pb == '+')
        return tl_error_set(err, TL_INVALID_ARG, "TL_PERSISTENT_BLOCKS=%s: not a whole number from 1 to 2^31 - 1",
                            pb);
      if (n < cap)
        cap = n;
    }
    plan.grid[0] = (unsigned)(tiles < cap ? tiles : cap);
    plan.grid[1] = plan.grid[2] = 1;
  }
  for (int j = 0; j < plan.ntmaps; j++) /* built per launch: the dimensions may be dynamic */
    if ((st = tl_gpu_tensor_map(k->gpu, &plan.tmap_args[j], plan.tmaps[j], err)) != TL_OK)
      return st;
  /* launch.programmatic: the kernel waits for the one before it, so it may start early (TL_PROGRAMMATIC=0
   * launches it as any other, to compare) */
  const char *pdl = getenv("TL_PROGRAMMATIC");
  bool early = m->programmatic && !(pdl && strcmp(pdl, "0") == 0);
  return tl_gpu_launch_ex(fn, plan.grid, plan.block, plan.dyn_smem, stream, plan.kargs,
                          early ? TL_GPU_LAUNCH_PROGRAMMATIC : 0, err);
}

/* The "zeroed" workspaces at off[] (proto/tile-ir-v1.md 3.1): a launch
 * leaves them all zeros, so they are set only where they were not this
 * placement before: after a new allocation, or another shape's offsets.
 * Launches before this one may still run on the old placement: the device
 * is synchronized first, and after (the memset is not on their stream). */
static tl_status zero_workspaces(tl_kernel *k, const uint64_t *off, uint64_t total, tl_error *err) {
  const tl_meta *m = k->meta;
  bool any = false, same = k->ws_placed && k->ws_off[m->nworkspaces] == total;
  for (int j = 0; j < m->nworkspaces; j++) {
    any = any || m->ws_zeroed[j];
    same = same && k->ws_off[j] == off[j];
  }
  if (!any || same)
    return TL_OK;
  tl_status st = tl_gpu_sync(k->gpu, err);
  for (int j = 0; st == TL_OK && j < m->nworkspaces; j++)
    if (m->ws_zeroed[j])
      st = tl_gpu_memset8(k->gpu, k->ws + off[j], 0, (size_t)((j + 1 < m->nworkspaces ? off[j + 1] : total) - off[j]),
                          err);
  if (st == TL_OK)
    st = tl_gpu_sync(k->gpu, err);
  if (st != TL_OK)
    return st;
  for (int j = 0; j < m->nworkspaces; j++)
    k->ws_off[j] = off[j];
  k->ws_off[m->nworkspaces] = total;
  k->ws_placed = true;
  return TL_OK;
}

tl_status tl_kernel_check_zeroed(tl_kernel *k, tl_error *err) {
  const tl_meta *m = k->meta;
  tl_status st = TL_OK;
  for (int j = 0; st == TL_OK && k->ws_placed && j < m->nworkspaces; j++) {
    if (!m->ws_zeroed[j])
      continue;
    size_t n = (size_t)((j + 1 < m->nworkspaces ? k->ws_off[j + 1] : k->ws_off[m->nworkspaces]) - k->ws_off[j]);
    unsigned char *b = malloc(n ? n : 1);
    if (!b)
      return tl_error_set(err, TL_NOMEM, "out of memory reading workspace '%s'", m->kernels[0]->params[m->nparams + j].name);
    st = tl_gpu_download(k->gpu, b, k->ws + k->ws_off[j], n, err);
    for (size_t i = 0; st == TL_OK && i < n; i++)
      if (b[i])
        st = tl_error_set(err, TL_RUNTIME, "the launch left byte %zu of workspace '%s' nonzero: a \"zeroed\" workspace "
                          "must be all zero again when a launch ends (a block that counts in it resets its count)",
                          i, m->kernels[0]->params[m->nparams + j].name);
    free(b);
  }
  return st;
}

/* Format 3: the workspaces (k's allocation, grown when this launch needs
 * more than the last; "zeroed" ones set to zero where needed), then every
 * kernel in order on stream. */
static tl_status launch_kernels(tl_kernel *k, const tl_kernel_arg *args, int nargs, void *stream, tl_error *err) {
  const tl_meta *m = k->meta;
  uint64_t off[TL_MAX_WORKSPACES], total;
  tl_status st = tl_meta_workspaces(m, args, nargs, off, &total, err);
  if (st != TL_OK)
    return st;
  if (total > k->ws_bytes) {
    if (k->ws) { /* launches before this one may still use the old allocation */
      if ((st = tl_gpu_sync(k->gpu, err)) != TL_OK)
        return st;
      tl_gpu_free(k->gpu, k->ws);
      k->ws = 0;
      k->ws_bytes = 0;
      k->ws_placed = false;
    }
    if ((st = tl_gpu_alloc(k->gpu, total, &k->ws, err)) != TL_OK)
      return st;
    k->ws_bytes = total;
  }
  if ((st = zero_workspaces(k, off, total, err)) != TL_OK)
    return st;
  tl_kernel_arg all[TL_KERNEL_PARAMS_MAX];
  for (int i = 0; i < nargs; i++)
    all[i] = args[i];
  for (int j = 0; j < m->nworkspaces; j++)
    all[nargs + j] = tl_arg_tensor(k->ws + off[j]);
  for (int i = 0; st == TL_OK && i < m->nkernels; i++)
    st = launch_one(k, m->kernels[i], k->fns[i], all, nargs + m->nworkspaces, stream, err);
  return st;
}

tl_status tl_kernel_launch(tl_kernel *k, const tl_kernel_arg *args, int nargs, void *stream, tl_error *err) {
  tl_error_clear(err);
  if (!k)
    return tl_error_set(err, TL_INVALID_ARG, "tl_kernel_launch: no kernel");
  if (k->meta->nkernels)
    return launch_kernels(k, args, nargs, stream, err);
  return launch_one(k, k->meta, k->fn, args, nargs, stream, err);
}

void tl_kernel_free(tl_kernel *k) {
  if (!k)
    return;
  if (k->ws)
    tl_gpu_free(k->gpu, k->ws);
  tl_gpu_unload(k->mod);
  tl_meta_free(k->meta);
  free(k);
}
