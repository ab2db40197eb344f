/*
 * target.h - what a target is: the one table of every target this compiler
 * knows (target.c), and the parse of a target name into a tl_target.
 *
 * Everybody reads it: the target checks (tl_check_target, check_target.c), the
 * passes and the emitter (tl_codegen_of, pass.h), the toolchain drivers
 * (nvrtc.c, amdgpu.c: which names they may offer), compile.c (which
 * toolchain builds a target), `tlc targets` and the server's /v1/info.
 *
 * Names.  NVIDIA: sm_N (a cubin), compute_N (PTX), each with an optional
 * 'a' (architecture-specific, e.g. sm_90a) or 'f' (family-specific, e.g.
 * sm_100f) suffix where the architecture has that variant; N is 10 * major
 * + minor (75, 80, 90, 100, 120 ...).  AMD: gfxNNN (gfx90a, gfx942,
 * gfx950, gfx1100, gfx1201), a code object (HSACO).  A name is parsed once
 * (tl_target_parse); a well-formed name of an architecture the table does
 * not have is refused as unknown, with the list of those it has.
 *
 * Limits named here: a target name is at most TL_TARGET_NAME_MAX - 1
 * bytes; the table holds TL_TARGET_ROWS_MAX rows at most.
 */
#ifndef TL_TARGET_H
#define TL_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include "../proto/tl_error.h"

#define TL_TARGET_NAME_MAX 24 /* bytes of a target name, with NUL */
#define TL_TARGET_ROWS_MAX 32 /* rows of the table (architectures) */

typedef enum tl_vendor { TL_VENDOR_NVIDIA, TL_VENDOR_AMD } tl_vendor;

/* What a compile for the target gives. */
typedef enum tl_binary_kind { TL_BINARY_CUBIN, TL_BINARY_PTX, TL_BINARY_HSACO } tl_binary_kind;

/* The source language the emitter writes: CUDA C (NVRTC) or HIP C (clang, hiprtc). */
typedef enum tl_dialect { TL_DIALECT_CUDA, TL_DIALECT_HIP } tl_dialect;

/* AMD's matrix cores.  MFMA: CDNA's v_mfma_* (wave64); WMMA: RDNA3's
 * v_wmma_* in wave32 (gfx11 operand layouts); WMMA_GFX12: RDNA4's
 * (builtins ..._w32_gfx12), whose operand layouts differ from gfx11's
 * (ir.h: TL_LAYOUT_WMMA_GFX12). */
typedef enum tl_amd_matrix {
  TL_AMD_MATRIX_NONE,
  TL_AMD_MATRIX_MFMA,
  TL_AMD_MATRIX_WMMA,
  TL_AMD_MATRIX_WMMA_GFX12
} tl_amd_matrix;

/* The features a target may have: name, wire name (tlc targets, /v1/info),
 * what it is.  The generated code uses a feature only where the target has
 * it; a program that needs one the target lacks is a checker error. */
#define TL_TARGET_FEATURES(X)                                                                 \
  X(LDMATRIX, "ldmatrix", "ldmatrix.sync (sm_75 and later)")                                  \
  X(MMA, "mma", "mma.sync m16n8k16 with float16/bfloat16 operands (sm_80 and later)")         \
  X(CP_ASYNC, "cp.async", "cp.async copies from global to shared memory (sm_80 and later)")   \
  X(BF16_MMA, "bf16-mma", "bfloat16 matrix operands (sm_80 and later; MFMA, WMMA)")          \
  X(INT8_MMA, "int8-mma", "mma.sync m16n8k32 with int8/uint8 operands into int32 (sm_80 and later)") \
  X(FP8_MMA, "fp8-mma", "mma.sync m16n8k32 with float8 e4m3/e5m2 operands (sm_89 and later)") \
  X(TMA, "tma", "the tensor memory accelerator, cp.async.bulk.tensor (sm_90 and later)")     \
  X(CLUSTERS, "clusters", "thread-block clusters (sm_90 and later)")                          \
  X(PDL, "pdl", "programmatic dependent launch, griddepcontrol (sm_90 and later)")          \
  X(WGMMA, "wgmma", "wgmma.mma_async (sm_90a, compute_90a)")

enum {
#define TL_FEATURE_ENUM_(name, wire, what) TL_FEATURE_BIT_##name,
  TL_TARGET_FEATURES(TL_FEATURE_ENUM_)
#undef TL_FEATURE_ENUM_
  TL_FEATURE_COUNT_
};
#define TL_FEATURE(name) (1u << TL_FEATURE_BIT_##name)

/* One target.  A row of the table is an architecture (its base name, no
 * variant); tl_target_parse gives the target for one name: the row with
 * its name, variant, binary kind and the variant's features. */
typedef struct tl_target {
  char name[TL_TARGET_NAME_MAX]; /* canonical name: "sm_90a", "compute_80", "gfx942" */
  tl_vendor vendor;
  int arch;              /* NVIDIA: 10 * major + minor (90); AMD: the gfx number read as hex (0x90a) */
  char variant;          /* 0, 'a' or 'f' (NVIDIA) */
  const char *variants;  /* row: the variants the architecture has, "", "a" or "af" */
  tl_binary_kind binary;
  tl_dialect dialect;
  const char *family;    /* "Turing", "Hopper", "CDNA3", "RDNA4" ... */
  int warp;              /* threads per warp (wavefront): 32, or 64 on CDNA */
  unsigned features;     /* TL_FEATURE() bits */
  unsigned a_features;   /* row: what the 'a' variant adds (wgmma on sm_90a) */
  tl_amd_matrix amd_matrix;
  int64_t smem_bytes;    /* shared memory (LDS) one block may use, with the opt-in */
  int regs_per_thread;   /* 32-bit registers one thread may use */
  int regs_per_block;    /* 32-bit registers one block may use (NVIDIA); 0 where none is stated (AMD) */
  int amd_mach;          /* AMD: EF_AMDGPU_MACH_* of the code object's e_flags */
  int min_clang;         /* AMD: the first clang (major version) that knows it */
} tl_target;

/* The table: every architecture this compiler knows, NVIDIA's by arch then
 * AMD's, *count rows. */
const tl_target *tl_target_table(size_t *count);

/* Parses a target name (see above) into *out.  A name that is not of the
 * forms above is TL_INVALID_ARG ("'x' is not a target name ..."); a
 * well-formed name the table does not have (sm_50, sm_91a, gfx900) is
 * TL_UNSUPPORTED naming those it has.  NULL is TL_INVALID_ARG. */
tl_status tl_target_parse(const char *s, tl_target *out, tl_error *err);

/* The row of an AMD target whose EF_AMDGPU_MACH value is mach, or NULL. */
const tl_target *tl_target_by_amd_mach(int mach);

/* 1 if s looks like an AMD target ("gfx" and a digit), else 0. */
int tl_target_is_amd_name(const char *s);

/* The cubin target for an NVIDIA GPU of compute capability arch (10 *
 * major + minor, e.g. 90), written into out (cap bytes, 16 is enough):
 * sm_ARCHa when the table's row for arch gives its 'a' variant features
 * the code generator uses (sm_90a: wgmma), else sm_ARCH (also for an arch
 * the table lacks).  The one place that maps a device to its target:
 * `tlc run --device` and libtlclient's tl_client_get_for_arch (and so
 * tl_client_get_for_device and tlclient run) ask for it. */
void tl_target_for_arch(int arch, char *out, size_t cap);

/* Does t have every feature of mask? */
static inline int tl_target_has(const tl_target *t, unsigned mask) { return (t->features & mask) == mask; }

/* The wire name of feature bit i ("cp.async"), and what it is; NULL past the last. */
const char *tl_feature_name(int bit);
const char *tl_feature_what(int bit);

/* Writes t's features as wire names separated by sep into buf ("" when
 * none); returns buf. */
char *tl_target_features_str(const tl_target *t, const char *sep, char *buf, size_t cap);

/* A JSON object describing t, for /v1/info and `tlc targets --json`:
 * {"vendor", "arch", "variant", "binary", "dialect", "family", "warp",
 * "features": [...], "amd_matrix", "shared_bytes", "registers_per_thread",
 * "registers_per_block"}; malloc'd text, NULL when out of memory. */
char *tl_target_json(const tl_target *t);

#endif
