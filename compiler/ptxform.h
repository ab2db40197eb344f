/*
 * ptxform.h - the PTX instructions both NVIDIA emitters print: emit_cuda.c
 * inside asm statements (its operands "%0", "%1", ...), emit_ptx.c with
 * registers.  One function per form, so that the two back ends cannot
 * drift apart; each returns one instruction, without the ';' (arena text;
 * no quote, backslash or newline, so that it may stand in a C string).
 */
#ifndef TL_PTXFORM_H
#define TL_PTXFORM_H

#include <stdbool.h>
#include <stdint.h>
#include "ir.h"

/* mbarrier.init of the mbarrier at shared address bar for `count` arrivals. */
const char *tl_ptx_mbar_init(tl_arena *a, const char *bar, const char *count);
/* The arrival that expects `bytes` more bytes of transactions on bar. */
const char *tl_ptx_expect_tx(tl_arena *a, const char *bar, const char *bytes);
/* An arrival on bar (of this CTA). */
const char *tl_ptx_mbar_arrive(tl_arena *a, const char *bar);
/* Predicate `pred`: bar completed the phase of parity `parity` (one try). */
const char *tl_ptx_mbar_try_wait(tl_arena *a, const char *pred, const char *bar, const char *parity);
/* A bulk tensor copy of a box of a rank-`rank` tensor map (generic address
 * `map`, coordinates `coords` innermost first, comma-separated) into shared
 * memory at dst, completing on mbarrier mbar; multicast to the CTAs of
 * `mask` (a 16-bit operand) when mask is not NULL; with the L2 cache policy
 * `hint` (a 64-bit operand: tl_ptx_createpolicy) when hint is not NULL. */
const char *tl_ptx_tma_load(tl_arena *a, int rank, const char *dst, const char *map, const char *coords,
                            const char *mbar, const char *mask, const char *hint);
/* createpolicy: into dst (64 bits) the L2 cache policy that gives every
 * access it goes with eviction priority `evict` (TL_EVICT_FIRST or
 * TL_EVICT_LAST; sm_80 and later). */
const char *tl_ptx_createpolicy(tl_arena *a, tl_evict evict, const char *dst);
/* cp.async of 16 bytes from global src to shared dst, src_size of them
 * read (the rest zero-filled; NULL: all 16), with the L2 cache policy
 * `hint` when it is not NULL. */
const char *tl_ptx_cp_async16(tl_arena *a, const char *dst, const char *src, const char *src_size, const char *hint);
/* wgmma.mma_async m64nNkK with dtype/operand types, accumulators `acc`
 * (comma-separated), A (a descriptor, or "{r0,r1,r2,r3}"), B's descriptor,
 * predicate scale_d, then `tail` (the immediate operands, each with its
 * leading ", "). */
const char *tl_ptx_wgmma(tl_arena *a, int64_t n, int k, const char *ctype, const char *abtype, const char *acc,
                         const char *A, const char *B, const char *scale_d, const char *tail);
/* The immediate operands after scale-d of a wgmma of es-byte operands:
 * 16-bit: scale A, scale B, (not with A from registers) transpose A,
 * transpose B; 8-bit float: the scales; integers: none. */
const char *tl_ptx_wgmma_tail(tl_arena *a, int es, bool ints, bool a_regs, bool trans_b);
/* setmaxnreg: the warpgroup's threads raise (inc) or lower their registers to count. */
const char *tl_ptx_setmaxnreg(tl_arena *a, bool inc, int count);

#endif
