/*
 * hsaco.h - a small validating reader of AMDGPU code objects (HSACO: the
 * ELF shared objects that hipModuleLoadData takes), for checking what the
 * AMD toolchain produced and for the resource figures of each kernel (no
 * ROCm tools exist where the compiler runs).  The counterpart of cubin.h.
 *
 * What is checked: ELF64, little-endian, EV_CURRENT, e_machine EM_AMDGPU
 * (224), OS ABI ELFOSABI_AMDGPU_HSA (64), ABI version 2..4 (code object
 * v4..v6; clang 19 writes v5 = 3), e_type ET_DYN, a known processor in
 * e_flags (EF_AMDGPU_MACH, the low byte: target.h's table), the section and
 * program header tables and every section (except NOBITS) and segment
 * inside the image, section names inside .shstrtab, symbols and their
 * names inside their sections, every note inside its section.  Exactly one
 * NT_AMDGPU_METADATA (32) note of owner "AMDGPU" must be present; its
 * description is MessagePack (a map), read by tl_msgpack_to_json below,
 * and must hold:
 *   amdhsa.version  [major, minor] (v5: [1, 2])
 *   amdhsa.target   "amdgcn-amd-amdhsa--gfxNNN[:feature+-...]", whose
 *                   processor must be e_flags's
 *   amdhsa.kernels  an array of maps, each with .name, .symbol, .args
 *                   (.size, .offset, .value_kind; .name, .address_space
 *                   optional), .sgpr_count, .vgpr_count, (.agpr_count),
 *                   .group_segment_fixed_size, .private_segment_fixed_size,
 *                   .kernarg_segment_size, .kernarg_segment_align,
 *                   .wavefront_size, .max_flat_workgroup_size,
 *                   (.sgpr_spill_count, .vgpr_spill_count,
 *                   .uses_dynamic_stack).
 * Each kernel is then checked against the binary itself: its .symbol
 * ("NAME.kd") is a defined 64-byte object whose bytes (the kernel
 * descriptor, AMDGPUUsage "Kernel Descriptor") give the same
 * group_segment_fixed_size, private_segment_fixed_size and kernarg_size
 * as the note and the same wavefront size (kernel_code_properties bit 10,
 * ENABLE_WAVEFRONT_SIZE32); every argument lies inside the kernarg segment.
 * Anything else is TL_INVALID_ARG naming what is wrong; nothing read from
 * the image is trusted as an offset or a count without a bounds check.
 */
#ifndef TL_HSACO_H
#define TL_HSACO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "../proto/tl_error.h"
#include "elf.h"

/* Limits. */
#define TL_HSACO_MAX_BYTES    (1u << 30)
#define TL_HSACO_MAX_SECTIONS TL_ELF_MAX_SECTIONS
#define TL_HSACO_MAX_KERNELS  4096
#define TL_HSACO_MAX_ARGS     1024      /* per kernel */
#define TL_MSGPACK_MAX_DEPTH  32
#define TL_MSGPACK_MAX_BYTES  (16u << 20)

#define TL_EM_AMDGPU 224
#define TL_ELFOSABI_AMDGPU_HSA 64
#define TL_NT_AMDGPU_METADATA 32

typedef struct tl_hsaco_arg {
  char *name;          /* .name, or NULL when the note has none (HIP kernels') */
  uint32_t offset;     /* .offset in the kernarg segment */
  uint32_t size;       /* .size */
  char value_kind[32]; /* .value_kind: "global_buffer", "by_value", "hidden_block_count_x", ... */
  char address_space[16]; /* .address_space ("global", ...) or "" */
} tl_hsaco_arg;

typedef struct tl_hsaco_kernel {
  char *name;                 /* .name */
  char *symbol;               /* .symbol: the kernel descriptor's symbol, "NAME.kd" */
  int sgpr_count, vgpr_count; /* .sgpr_count, .vgpr_count */
  int agpr_count;             /* .agpr_count, -1 if absent (targets without AGPRs) */
  int sgpr_spill_count, vgpr_spill_count; /* -1 if absent */
  uint32_t group_segment_fixed_size;   /* static LDS bytes */
  uint32_t private_segment_fixed_size; /* scratch bytes per work-item */
  uint32_t kernarg_segment_size, kernarg_segment_align;
  int wavefront_size;         /* 32 or 64 */
  int max_flat_workgroup_size;
  int uses_dynamic_stack;     /* 0 or 1 */
  size_t nargs;
  tl_hsaco_arg *args;         /* malloc'd, in the note's order (explicit, then hidden) */
  size_t nexplicit;           /* leading args whose value_kind is not hidden_* */
  uint32_t kd_rsrc1, kd_rsrc2, kd_rsrc3; /* COMPUTE_PGM_RSRC1..3 from the descriptor */
  uint16_t kd_code_properties;
} tl_hsaco_kernel;

typedef struct tl_hsaco_info {
  uint32_t e_flags;
  int mach;                 /* e_flags & 0xff */
  char processor[16];       /* "gfx90a" */
  const char *xnack;        /* "unsupported", "any", "off", "on" (static strings) */
  const char *sramecc;
  int abi_version;          /* EI_ABIVERSION */
  int code_object_version;  /* abi_version + 2 */
  int md_version[2];        /* amdhsa.version */
  char target_id[128];      /* amdhsa.target */
  size_t nkernels;
  tl_hsaco_kernel *kernels; /* malloc'd, in the note's order */
} tl_hsaco_info;

/* Reads and checks the code object in bytes[0, n).  On success fills *out
 * (free with tl_hsaco_info_free).  Malformed input is TL_INVALID_ARG ("not
 * an AMDGPU code object: ..."), too big TL_TOO_LARGE, too many kernels or
 * arguments TL_LIMIT, TL_NOMEM.  On failure *out holds nothing to free. */
tl_status tl_hsaco_inspect(const void *bytes, size_t n, tl_hsaco_info *out, tl_error *err);

void tl_hsaco_info_free(tl_hsaco_info *info); /* accepts NULL; zeroes *info */

/* The kernel called name, or NULL. */
const tl_hsaco_kernel *tl_hsaco_find(const tl_hsaco_info *info, const char *name);

/* Checks that info is for target ("gfx90a": the same processor in e_flags
 * and amdhsa.target).  TL_INVALID_ARG saying both when not. */
tl_status tl_hsaco_check_target(const tl_hsaco_info *info, const char *target, tl_error *err);

/* Converts one MessagePack value, which must fill bytes[0, n) exactly, to
 * JSON (*out, a new reference).  Maps need string keys (no NUL, no
 * duplicates); strings must be UTF-8; integers must fit int64; nil, bool,
 * float32/64, str, array and map are read; bin and ext are refused.
 * Nesting deeper than TL_MSGPACK_MAX_DEPTH, input over TL_MSGPACK_MAX_BYTES,
 * truncation and trailing bytes are TL_INVALID_ARG with the byte offset;
 * TL_NOMEM.  Never reads outside bytes[0, n). */
tl_status tl_msgpack_to_json(const void *bytes, size_t n, json_t **out, tl_error *err);

#endif
