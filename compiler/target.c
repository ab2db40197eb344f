/*
 * target.c - the one table of targets (target.h) and the parse of a
 * target name.
 *
 * Sources of the figures.  NVIDIA: the CUDA C++ Programming Guide's table
 * of compute capabilities (shared memory per block with the opt-in: 64 KiB
 * on 7.5, 163 KiB on 8.0/8.7, 99 KiB on 8.6/8.9/12.x, 227 KiB on
 * 9.0/10.x/11.0; 255 registers per thread and 64 Ki per block everywhere)
 * and the PTX ISA's target requirements of each instruction the emitter
 * writes (ldmatrix: sm_75; mma.sync m16n8k16 with f16/bf16 operands,
 * m16n8k32 with s8/u8 operands and cp.async: sm_80; m16n8k32 with
 * e4m3/e5m2 operands: sm_89, and so every later architecture, sm_90,
 * sm_100 and sm_120 included (ptxas 13.0 refuses it below sm_89 and takes
 * it from sm_89 to sm_121); cp.async.bulk.tensor and clusters: sm_90;
 * wgmma, with f16/bf16, e4m3/e5m2 and s8/u8 operands: sm_90a).  sm_88's
 * limits are not published: it gets the 48 KiB every architecture allows.
 * AMD: the LLVM AMDGPU back end's processor table (EF_AMDGPU_MACH values from BinaryFormat/ELF.h; gfx950
 * from LLVM 20, which added it), LDS per workgroup (64 KiB, 160 KiB on
 * CDNA4), 512 VGPRs+AGPRs per lane on CDNA's unified register file, 256
 * VGPRs on RDNA; AMD states no per-workgroup register limit (a
 * workgroup's waves share the CU's register file), so regs_per_block is 0.
 *
 * Only architectures the installed NVRTC 13.0 and clang 19 build for (and
 * gfx950, which needs clang 20) are in the table: an older NVRTC's sm_50 ..
 * sm_72 are refused as unknown rather than guessed at, since the generated
 * code was never compiled for them here.
 */
#include "target.h"
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define NV(ARCH, FAMILY, VARIANTS, FEATURES, A_FEATURES, SMEM)                                          \
  {.name = "sm_" #ARCH, .vendor = TL_VENDOR_NVIDIA, .arch = ARCH, .variants = VARIANTS,                  \
   .binary = TL_BINARY_CUBIN, .dialect = TL_DIALECT_CUDA, .family = FAMILY, .warp = 32,                  \
   .features = (FEATURES), .a_features = (A_FEATURES), .smem_bytes = (SMEM), .regs_per_thread = 255,    \
   .regs_per_block = 65536}
#define AMD(NAME, ARCH, FAMILY, MACH, WAVE, MATRIX, LDS, REGS, MIN_CLANG)                                 \
  {.name = NAME, .vendor = TL_VENDOR_AMD, .arch = ARCH, .variants = "", .binary = TL_BINARY_HSACO,      \
   .dialect = TL_DIALECT_HIP, .family = FAMILY, .warp = WAVE, .features = TL_FEATURE(BF16_MMA),         \
   .amd_matrix = MATRIX, .smem_bytes = LDS, .regs_per_thread = REGS, .regs_per_block = 0,               \
   .amd_mach = MACH, .min_clang = MIN_CLANG}

/* What each NVIDIA generation adds. */
#define F75 TL_FEATURE(LDMATRIX)
#define F80 (F75 | TL_FEATURE(MMA) | TL_FEATURE(CP_ASYNC) | TL_FEATURE(BF16_MMA) | TL_FEATURE(INT8_MMA))
#define F89 (F80 | TL_FEATURE(FP8_MMA))
#define F90 (F89 | TL_FEATURE(TMA) | TL_FEATURE(CLUSTERS) | TL_FEATURE(PDL))

static const tl_target table[] = {
    NV(75, "Turing", "", F75, 0, 65536),
    NV(80, "Ampere", "", F80, 0, 166912),
    NV(86, "Ampere", "", F80, 0, 101376),
    NV(87, "Ampere", "", F80, 0, 166912),
    NV(88, "Ampere", "", F80, 0, 49152),
    NV(89, "Ada", "", F89, 0, 101376),
    NV(90, "Hopper", "a", F90, TL_FEATURE(WGMMA), 232448),
    NV(100, "Blackwell", "af", F90, 0, 232448),
    NV(101, "Blackwell", "af", F90, 0, 232448),
    NV(103, "Blackwell", "af", F90, 0, 232448),
    NV(110, "Blackwell", "af", F90, 0, 232448),
    NV(120, "Blackwell", "af", F90, 0, 101376),
    NV(121, "Blackwell", "af", F90, 0, 101376),
    AMD("gfx90a", 0x90a, "CDNA2", 0x03f, 64, TL_AMD_MATRIX_MFMA, 65536, 512, 19),
    AMD("gfx942", 0x942, "CDNA3", 0x04c, 64, TL_AMD_MATRIX_MFMA, 65536, 512, 19),
    AMD("gfx950", 0x950, "CDNA4", 0x04f, 64, TL_AMD_MATRIX_MFMA, 163840, 512, 20),
    AMD("gfx1100", 0x1100, "RDNA3", 0x041, 32, TL_AMD_MATRIX_WMMA, 65536, 256, 19),
    AMD("gfx1201", 0x1201, "RDNA4", 0x04e, 32, TL_AMD_MATRIX_WMMA_GFX12, 65536, 256, 19),
};
#define NROWS (sizeof table / sizeof *table)
_Static_assert(NROWS <= TL_TARGET_ROWS_MAX, "the target table outgrew TL_TARGET_ROWS_MAX");

const tl_target *tl_target_table(size_t *count) {
  *count = NROWS;
  return table;
}

int tl_target_is_amd_name(const char *s) { return s && strncmp(s, "gfx", 3) == 0 && s[3] >= '0' && s[3] <= '9'; }

const tl_target *tl_target_by_amd_mach(int mach) {
  for (size_t i = 0; i < NROWS; i++)
    if (table[i].vendor == TL_VENDOR_AMD && table[i].amd_mach == mach)
      return &table[i];
  return NULL;
}

void tl_target_for_arch(int arch, char *out, size_t cap) {
  for (size_t i = 0; i < NROWS; i++)
    if (table[i].vendor == TL_VENDOR_NVIDIA && table[i].arch == arch && table[i].a_features) {
      snprintf(out, cap, "sm_%da", arch);
      return;
    }
  snprintf(out, cap, "sm_%d", arch);
}

/* "sm_75, sm_80, ..., sm_90[a], sm_100[af], ..., gfx1201" */
static void known_names(char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (size_t i = 0; i < NROWS && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%s%s%s%s", i ? ", " : "", table[i].name,
                          table[i].variants[0] ? "[" : "", table[i].variants, table[i].variants[0] ? "]" : "");
}

tl_status tl_target_parse(const char *s, tl_target *out, tl_error *err) {
  if (!s || !out)
    return tl_error_set(err, TL_INVALID_ARG, "no target given");
  if (tl_target_is_amd_name(s)) {
    for (size_t i = 0; i < NROWS; i++)
      if (table[i].vendor == TL_VENDOR_AMD && strcmp(table[i].name, s) == 0) {
        *out = table[i];
        return TL_OK;
      }
  } else {
    int ptx = strncmp(s, "compute_", 8) == 0;
    const char *p = ptx ? s + 8 : strncmp(s, "sm_", 3) == 0 ? s + 3 : NULL;
    int digits = 0, arch = 0;
    while (p && p[digits] >= '0' && p[digits] <= '9' && digits < 4)
      arch = arch * 10 + (p[digits++] - '0');
    char variant = p && (p[digits] == 'a' || p[digits] == 'f') ? p[digits] : 0;
    if (!p || digits < 2 || digits > 3 || p[0] == '0' || p[digits + (variant != 0)])
      return tl_error_set(err, TL_INVALID_ARG,
                          "'%.64s' is not a target name (expected sm_N, sm_Na, sm_Nf, compute_N, compute_Na, "
                          "compute_Nf or gfxNNN, e.g. sm_90a or gfx942)",
                          s);
    for (size_t i = 0; i < NROWS; i++)
      if (table[i].vendor == TL_VENDOR_NVIDIA && table[i].arch == arch &&
          (!variant || strchr(table[i].variants, variant))) {
        *out = table[i];
        snprintf(out->name, sizeof out->name, "%s_%d%s", ptx ? "compute" : "sm", arch,
                 variant == 'a' ? "a" : variant == 'f' ? "f" : "");
        out->variant = variant;
        out->binary = ptx ? TL_BINARY_PTX : TL_BINARY_CUBIN;
        if (variant == 'a')
          out->features |= out->a_features;
        return TL_OK;
      }
  }
  char names[512];
  known_names(names, sizeof names);
  return tl_error_set(err, TL_UNSUPPORTED, "'%.64s' is not a target this compiler knows (it knows %s, and compute_ for each sm_)", s, names);
}

static const char *const feature_names[] = {
#define TL_FEATURE_NAME_(name, wire, what) wire,
    TL_TARGET_FEATURES(TL_FEATURE_NAME_)
#undef TL_FEATURE_NAME_
};
static const char *const feature_whats[] = {
#define TL_FEATURE_WHAT_(name, wire, what) what,
    TL_TARGET_FEATURES(TL_FEATURE_WHAT_)
#undef TL_FEATURE_WHAT_
};

const char *tl_feature_name(int bit) { return bit >= 0 && bit < TL_FEATURE_COUNT_ ? feature_names[bit] : NULL; }
const char *tl_feature_what(int bit) { return bit >= 0 && bit < TL_FEATURE_COUNT_ ? feature_whats[bit] : NULL; }

char *tl_target_features_str(const tl_target *t, const char *sep, char *buf, size_t cap) {
  size_t n = 0;
  if (!cap)
    return buf;
  buf[0] = 0;
  for (int b = 0; b < TL_FEATURE_COUNT_ && n < cap; b++)
    if (t->features & (1u << b))
      n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? sep : "", feature_names[b]);
  return buf;
}

char *tl_target_json(const tl_target *t) {
  static const char *const binaries[] = {"cubin", "ptx", "hsaco"};
  static const char *const matrices[] = {"none", "mfma", "wmma", "wmma-gfx12"};
  json_t *o = json_object(), *f = json_array();
  for (int b = 0; b < TL_FEATURE_COUNT_; b++)
    if (t->features & (1u << b))
      json_array_append_new(f, json_string(feature_names[b]));
  char variant[2] = {t->variant, 0};
  json_object_set_new(o, "vendor", json_string(t->vendor == TL_VENDOR_AMD ? "amd" : "nvidia"));
  json_object_set_new(o, "arch", json_integer(t->arch));
  json_object_set_new(o, "variant", json_string(variant));
  json_object_set_new(o, "family", json_string(t->family));
  json_object_set_new(o, "binary", json_string(binaries[t->binary]));
  json_object_set_new(o, "dialect", json_string(t->dialect == TL_DIALECT_HIP ? "hip" : "cuda"));
  json_object_set_new(o, "warp", json_integer(t->warp));
  json_object_set_new(o, "features", f);
  json_object_set_new(o, "amd_matrix", json_string(matrices[t->amd_matrix]));
  json_object_set_new(o, "shared_bytes", json_integer(t->smem_bytes));
  json_object_set_new(o, "registers_per_thread", json_integer(t->regs_per_thread));
  json_object_set_new(o, "registers_per_block", json_integer(t->regs_per_block));
  char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  return text;
}
