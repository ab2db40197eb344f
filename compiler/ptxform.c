/*
 * ptxform.c - the PTX instructions both NVIDIA emitters print (ptxform.h).
 */
#include "ptxform.h"

const char *tl_ptx_mbar_init(tl_arena *a, const char *bar, const char *count) {
  return tl_arena_printf(a, "mbarrier.init.shared::cta.b64 [%s], %s", bar, count);
}

const char *tl_ptx_expect_tx(tl_arena *a, const char *bar, const char *bytes) {
  return tl_arena_printf(a, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%s], %s", bar, bytes);
}

const char *tl_ptx_mbar_arrive(tl_arena *a, const char *bar) {
  return tl_arena_printf(a, "mbarrier.arrive.shared::cta.b64 _, [%s]", bar);
}

const char *tl_ptx_mbar_try_wait(tl_arena *a, const char *pred, const char *bar, const char *parity) {
  return tl_arena_printf(a, "mbarrier.try_wait.parity.shared::cta.b64 %s, [%s], %s", pred, bar, parity);
}

const char *tl_ptx_tma_load(tl_arena *a, int rank, const char *dst, const char *map, const char *coords,
                            const char *mbar, const char *mask, const char *hint) {
  return tl_arena_printf(a,
                         "cp.async.bulk.tensor.%dd.shared::cluster.global.mbarrier::complete_tx::bytes%s%s [%s], "
                         "[%s, {%s}], [%s]%s%s%s%s",
                         rank, mask ? ".multicast::cluster" : "", hint ? ".L2::cache_hint" : "", dst, map, coords, mbar,
                         mask ? ", " : "", mask ? mask : "", hint ? ", " : "", hint ? hint : "");
}

const char *tl_ptx_createpolicy(tl_arena *a, tl_evict evict, const char *dst) {
  return tl_arena_printf(a, "createpolicy.fractional.L2::%s.b64 %s, 1.0", evict == TL_EVICT_LAST ? "evict_last" : "evict_first",
                         dst);
}

const char *tl_ptx_cp_async16(tl_arena *a, const char *dst, const char *src, const char *src_size, const char *hint) {
  return tl_arena_printf(a, "cp.async.cg.shared.global%s [%s], [%s], 16%s%s%s%s", hint ? ".L2::cache_hint" : "", dst, src,
                         src_size ? ", " : "", src_size ? src_size : "", hint ? ", " : "", hint ? hint : "");
}

const char *tl_ptx_wgmma(tl_arena *a, int64_t n, int k, const char *ctype, const char *abtype, const char *acc,
                         const char *A, const char *B, const char *scale_d, const char *tail) {
  return tl_arena_printf(a, "wgmma.mma_async.sync.aligned.m64n%lldk%d.%s.%s.%s {%s}, %s, %s, %s%s", (long long)n, k,
                         ctype, abtype, abtype, acc, A, B, scale_d, tail);
}

const char *tl_ptx_wgmma_tail(tl_arena *a, int es, bool ints, bool a_regs, bool trans_b) {
  if (es == 2)
    return tl_arena_printf(a, ", 1, 1%s, %d", a_regs ? "" : ", 0", trans_b ? 0 : 1);
  return ints ? "" : ", 1, 1";
}

const char *tl_ptx_setmaxnreg(tl_arena *a, bool inc, int count) {
  return tl_arena_printf(a, "setmaxnreg.%s.sync.aligned.u32 %d", inc ? "inc" : "dec", count);
}
