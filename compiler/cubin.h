/*
 * cubin.h - a small validating reader of cubins (NVIDIA's ELF device code),
 * for checking what NVRTC produced and for the resource figures of each
 * kernel (there is no cuobjdump where the compiler runs).
 *
 * What is checked: ELF64, little-endian, EV_CURRENT, e_machine EM_CUDA
 * (190), OS ABI 0x33 or 0x41, a known CUDA ABI version, a plausible sm
 * architecture in e_flags, the section header table and every section
 * (except NOBITS) inside the image, the program header table and every
 * segment's file contents inside the image, section names inside
 * .shstrtab, the symbol table's entries and names inside their sections,
 * every .nv.info record inside its section.  Anything else is TL_INVALID_ARG naming what
 * is wrong; nothing read from the image is trusted as an offset without a
 * bounds check.
 *
 * e_flags, two layouts, chosen by EI_ABIVERSION (facts from LLVM's
 * BinaryFormat/ELF.h, checked against NVRTC 13.0 output):
 *   ABI version 7 (ELFABIVERSION_CUDA_V1; CUDA 12 and earlier): the sm
 *     number in bits 0-7 (EF_CUDA_SM: 0x5a = sm_90), EF_CUDA_TEXMODE_*
 *     0x100/0x200, EF_CUDA_64BIT_ADDRESS 0x400, EF_CUDA_ACCELERATORS 0x800
 *     (sm_90a), the virtual (PTX) sm in bits 16-23.
 *   ABI version 8 (ELFABIVERSION_CUDA_V2; CUDA 12.8+ for sm_100 and later,
 *     CUDA 13 for every architecture): the sm number in bits 8-15
 *     (EF_CUDA_SM_MASK 0xff00: 0x5a00 = sm_90, 0x6400 = sm_100),
 *     EF_CUDA_ACCELERATORS 0x8 in the low byte.  Seen with NVRTC 13.0:
 *     sm_80 0x06005004, sm_90 and sm_90a both 0x06005a04, sm_100(a)
 *     0x06006402, sm_120(a) 0x06007802 -- the 'a' bit is NOT set.
 * So the 'a' (architecture-specific) flag is taken from any of: the e_flags
 * accelerator bit of the layout in use; the .nv.compat section's attribute
 * 9 (1 for sm_90a/sm_100a/sm_120a, 0 for sm_90/sm_100/sm_100f with NVRTC
 * 13.0); ptxas's own command line "-arch sm_NNa" recorded in the
 * .note.nv.tkinfo note (when its sm number is the image's).  The 'f'
 * (family) flag only shows in that note.  A .note.nv.cuinfo note whose sm
 * number disagrees with e_flags makes the image invalid.
 *
 * Kernels are the global or weak STT_FUNC symbols marked as entries
 * (st_other bit 0x10, STO_CUDA_ENTRY; NVIDIA puts each in .text.<name>);
 * a name defined twice makes the image invalid.  Their figures:
 *   registers      EIATTR_REGCOUNT (0x2f) in .nv.info, keyed by symbol
 *   local_bytes    EIATTR_FRAME_SIZE (0x11): per-thread local memory, the
 *                  stack frame that holds spills and local arrays (what
 *                  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES reports)
 *   min/max stack  EIATTR_MIN_STACK_SIZE (0x12), EIATTR_MAX_STACK_SIZE (0x23)
 *   shared_bytes   size of .nv.shared.<name>; from sm_90 on, ptxas puts a
 *                  1 KiB reserved window at the start of that section
 *                  whenever the kernel uses shared memory at all (seen with
 *                  NVRTC 13.0: 80 bytes of __shared__ give a 0x450 section
 *                  on sm_90/sm_100/sm_120, 0x50 on sm_80), so for arch >= 90
 *                  with a .nv.shared.reserved.* section or the
 *                  .nv.reservedSmem symbols present, 1024 is taken off; the
 *                  stored size stays in shared_section_bytes.  The result
 *                  equals ptxas's "bytes smem" on sm_75..sm_120
 *                  (tests/unit/test_nvrtc.c); tests/gpu/cuda_smoke.c checks
 *                  it against the driver's CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
 *   per-kernel .nv.info.<name>: EIATTR_MAX_THREADS (0x05, __launch_bounds__),
 *                  EIATTR_REQNTID (0x10), EIATTR_MAXREG_COUNT (0x1b),
 *                  EIATTR_NUM_BARRIERS (0x4c), EIATTR_CBANK_PARAM_SIZE (0x19),
 *                  EIATTR_KPARAM_INFO (0x17: per parameter {u32 index, u16
 *                  ordinal, u16 offset, u32 flags}, its size in bits 18..31
 *                  of flags; the offset is in the parameter buffer, where
 *                  ptxas aligns a parameter relative to the constant bank,
 *                  so a 64-byte aligned one need not be at a multiple of 64).
 * An .nv.info record is {u8 format, u8 attribute, u16 value-or-size}: format
 * 4 (EIFMT_SVAL) is followed by `size` bytes of data; 1, 2 and 3 (EIFMT_NVAL,
 * BVAL, HVAL) hold their value in the u16.  Parsing of a section stops at an
 * unknown format (kept, not an error: newer toolkits may add some); a record
 * that runs past its section is an error.
 */
#ifndef TL_CUBIN_H
#define TL_CUBIN_H

#include <stddef.h>
#include <stdint.h>
#include "../proto/tl_error.h"
#include "elf.h"

/* Limits. */
#define TL_CUBIN_MAX_BYTES    (1u << 30) /* image size */
#define TL_CUBIN_MAX_SECTIONS TL_ELF_MAX_SECTIONS
#define TL_CUBIN_MAX_KERNELS  4096
#define TL_CUBIN_MAX_NAME     4096       /* bytes of a kernel name */

/* The cubin's e_machine and the two CUDA ELF ABI versions. */
#define TL_EM_CUDA 190
#define TL_CUDA_ABI_V1 7
#define TL_CUDA_ABI_V2 8

#define TL_CUBIN_PARAMS_MAX 512 /* EIATTR_KPARAM_INFO ordinals read; a kernel with more reads as none */
typedef struct tl_cubin_kernel {
  char *name;                   /* symbol name (mangled unless extern "C"), malloc'd */
  int registers;                /* EIATTR_REGCOUNT, -1 if absent */
  uint32_t shared_bytes;        /* static shared memory, reserved window excluded */
  uint32_t shared_section_bytes;/* size of .nv.shared.<name>, 0 if none */
  uint32_t local_bytes;         /* EIATTR_FRAME_SIZE: local memory per thread */
  int64_t min_stack_bytes;      /* EIATTR_MIN_STACK_SIZE, -1 if absent */
  int64_t max_stack_bytes;      /* EIATTR_MAX_STACK_SIZE, -1 if absent */
  uint32_t max_threads[3];      /* EIATTR_MAX_THREADS, zeros if absent */
  uint32_t req_threads[3];      /* EIATTR_REQNTID, zeros if absent */
  int max_registers;            /* EIATTR_MAXREG_COUNT, -1 if absent */
  int barriers;                 /* EIATTR_NUM_BARRIERS, -1 if absent */
  int param_bytes;              /* EIATTR_CBANK_PARAM_SIZE, -1 if absent */
  int nparams;                  /* parameters EIATTR_KPARAM_INFO describes: ordinals 0..nparams-1
                                   all present (0 if absent or with a gap) */
  uint16_t param_offset[TL_CUBIN_PARAMS_MAX]; /* by ordinal: offset in the parameter buffer */
  uint16_t param_size[TL_CUBIN_PARAMS_MAX];   /* by ordinal: bytes */
  uint64_t code_bytes;          /* size of .text.<name> */
} tl_cubin_kernel;

typedef struct tl_cubin_info {
  int arch;              /* sm number: 80, 90, 100, 120 ... */
  int arch_specific;     /* 1 for an sm_NNa cubin */
  int family_specific;   /* 1 for an sm_NNf cubin (only known from the note) */
  char target[16];       /* "sm_90a" */
  int abi_version;       /* EI_ABIVERSION: TL_CUDA_ABI_V1 or _V2 */
  int os_abi;            /* EI_OSABI */
  uint32_t e_flags;
  int virtual_arch;      /* PTX sm in e_flags (ABI v1 only), 0 if none */
  char toolkit[96];      /* e.g. "Cuda compilation tools, release 13.0, V13.0.88", or "" */
  size_t nkernels;
  tl_cubin_kernel *kernels; /* malloc'd array, in symbol-table order */
} tl_cubin_info;

/* Decodes the architecture of an EM_CUDA e_flags under ABI version
 * abi_version (see above): *arch the sm number, *accel 1 when the
 * layout's accelerator ('a') bit is set.  TL_INVALID_ARG for an unknown ABI
 * version or an sm number outside 20..255. */
tl_status tl_cubin_decode_flags(int abi_version, uint32_t e_flags, int *arch, int *accel,
                                tl_error *err);

/* Reads and checks the cubin in bytes[0, n).  On success fills *out (free
 * with tl_cubin_info_free).  Malformed input is TL_INVALID_ARG ("not a
 * cubin: ..."), too big TL_TOO_LARGE, too many kernels TL_LIMIT, TL_NOMEM.
 * On failure *out holds nothing to free. */
tl_status tl_cubin_inspect(const void *bytes, size_t n, tl_cubin_info *out, tl_error *err);

/* Frees what info holds and zeroes it.  Accepts NULL. */
void tl_cubin_info_free(tl_cubin_info *info);

/* The kernel called name, or NULL. */
const tl_cubin_kernel *tl_cubin_find(const tl_cubin_info *info, const char *name);

/* Checks that info is for target ("sm_90a": same sm number, and the 'a' or
 * 'f' flag where the target has one).  TL_INVALID_ARG saying both when not. */
tl_status tl_cubin_check_target(const tl_cubin_info *info, const char *target, tl_error *err);

#endif
