/*
 * cubin.c - the cubin reader of cubin.h: the CUDA checks of the header and
 * e_flags, the kernels in the symbol table, the .nv.info attribute records,
 * the .nv.compat section and the NVIDIA notes, gathered into one
 * tl_cubin_info per image.  The ELF64 structure itself (header, section and
 * program header tables, string tables, symbols, notes) is read by elf.c,
 * shared with the AMDGPU code-object reader.
 *
 * Every field is read with the bounds-checked helpers of elf.h; a section's
 * contents are only touched through the (data, n) pair that tl_elf_load
 * checked against the image once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin.h"
#include "elf.h"

/* ---- constants (the subset used) ------------------------------------ */

enum {
  STO_CUDA_ENTRY = 0x10,
  ELFOSABI_CUDA = 0x33,
  ELFOSABI_CUDA_V2 = 0x41,
  /* e_flags */
  EF_CUDA_ACCELERATORS_V1 = 0x800,
  EF_CUDA_ACCELERATORS_V2 = 0x8,
  /* .nv.info record formats */
  EIFMT_NVAL = 1,
  EIFMT_BVAL = 2,
  EIFMT_HVAL = 3,
  EIFMT_SVAL = 4,
  /* .nv.info attributes */
  EIATTR_MAX_THREADS = 0x05,
  EIATTR_REQNTID = 0x10,
  EIATTR_FRAME_SIZE = 0x11,
  EIATTR_MIN_STACK_SIZE = 0x12,
  EIATTR_KPARAM_INFO = 0x17,
  EIATTR_CBANK_PARAM_SIZE = 0x19,
  EIATTR_MAXREG_COUNT = 0x1b,
  EIATTR_MAX_STACK_SIZE = 0x23,
  EIATTR_REGCOUNT = 0x2f,
  EIATTR_NUM_BARRIERS = 0x4c,
  /* .nv.compat attribute seen to flag sm_NNa images (NVRTC 13.0) */
  EICOMPAT_ACCELERATOR_TARGET = 0x09,
  /* NVIDIA note types */
  NT_CUDA_CUINFO = 1000,
  NT_CUDA_TKINFO = 2000,
  /* the shared-memory window ptxas reserves at the start of .nv.shared.<k> */
  RESERVED_SMEM_WINDOW = 1024,
  MAX_SYMBOLS = 1 << 20,
};

#define rd16 tl_elf_rd16
#define rd32 tl_elf_rd32
#define in_range tl_elf_in_range

typedef tl_elf_section section;

typedef struct span {
  const unsigned char *p;
  size_t n;
} span;

typedef struct reader {
  tl_elf elf;
  tl_error *err;
} reader;

#define bad(r, ...) tl_elf_bad(&(r)->elf, __VA_ARGS__)

static int starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Finds needle (nl bytes) in hay (hl bytes); returns its offset or -1. */
static long find_bytes(const unsigned char *hay, size_t hl, const char *needle, size_t nl) {
  if (nl == 0 || nl > hl)
    return -1;
  for (size_t i = 0; i + nl <= hl; i++)
    if (hay[i] == (unsigned char)needle[0] && memcmp(hay + i, needle, nl) == 0)
      return (long)i;
  return -1;
}

/* ---- e_flags ---------------------------------------------------------- */

tl_status tl_cubin_decode_flags(int abi_version, uint32_t e_flags, int *arch, int *accel,
                                tl_error *err) {
  int a, acc;
  if (abi_version == TL_CUDA_ABI_V1) {
    a = (int)(e_flags & 0xff);
    acc = (e_flags & EF_CUDA_ACCELERATORS_V1) != 0;
  } else if (abi_version == TL_CUDA_ABI_V2) {
    a = (int)((e_flags >> 8) & 0xff);
    acc = (e_flags & EF_CUDA_ACCELERATORS_V2) != 0;
  } else {
    return tl_error_set(err, TL_INVALID_ARG,
                        "not a cubin: unknown CUDA ELF ABI version %d (known: %d, %d)", abi_version,
                        TL_CUDA_ABI_V1, TL_CUDA_ABI_V2);
  }
  if (a < 20)
    return tl_error_set(err, TL_INVALID_ARG,
                        "not a cubin: e_flags 0x%08x give no sm architecture (%d) under ABI version %d",
                        (unsigned)e_flags, a, abi_version);
  if (arch)
    *arch = a;
  if (accel)
    *accel = acc;
  return TL_OK;
}

/* ---- .nv.info records ------------------------------------------------- */

typedef struct record {
  int fmt, attr;
  unsigned value;   /* the u16 of NVAL/BVAL/HVAL records */
  span data;        /* the data of SVAL records */
} record;

/* Steps to the next record at *off in s; 1 with *rec filled, 0 at the end
 * (or at an unknown format), -1 when a record runs past the section. */
static int next_record(const section *s, size_t *off, record *rec) {
  if (*off + 4 > s->n)
    return 0;
  const unsigned char *p = s->data + *off;
  rec->fmt = p[0];
  rec->attr = p[1];
  rec->value = rd16(p + 2);
  rec->data.p = NULL;
  rec->data.n = 0;
  switch (rec->fmt) {
  case EIFMT_NVAL:
  case EIFMT_BVAL:
  case EIFMT_HVAL:
    *off += 4;
    return 1;
  case EIFMT_SVAL:
    if (!in_range(*off + 4, rec->value, s->n))
      return -1;
    rec->data.p = p + 4;
    rec->data.n = rec->value;
    *off += 4 + (size_t)rec->value;
    return 1;
  default:
    return 0;
  }
}

/* ---- the notes -------------------------------------------------------- */

/* Reads the NVIDIA notes of one SHT_NOTE section: the toolkit string and
 * ptxas's "-arch sm_NN[af]" from the tkinfo note (*tool_arch and
 * *tool_variant), the sm number from the cuinfo note (*note_arch); each
 * stays 0 when absent. */
static tl_status read_notes(reader *r, const section *s, tl_cubin_info *info, int *note_arch,
                            int *tool_arch, int *tool_variant) {
  size_t off = 0;
  tl_elf_note note;
  int step;
  while ((step = tl_elf_next_note(s, &off, &note)) > 0) {
    const unsigned char *desc = note.desc;
    uint32_t descsz = note.descsz;
    int nvidia = note.namesz >= 6 && memcmp(note.name, "NVIDIA", 6) == 0;
    if (nvidia && note.type == NT_CUDA_TKINFO) {
      long at = find_bytes(desc, descsz, "Cuda compilation tools", 22);
      if (at >= 0) {
        size_t len = 0;
        while ((size_t)at + len < descsz && desc[at + len] && len + 1 < sizeof info->toolkit)
          len++;
        memcpy(info->toolkit, desc + at, len);
        info->toolkit[len] = 0;
      }
      at = find_bytes(desc, descsz, "-arch sm_", 9);
      if (at >= 0) {
        size_t i = (size_t)at + 9;
        int a = 0, nd = 0;
        while (i < descsz && desc[i] >= '0' && desc[i] <= '9' && nd < 4) {
          a = a * 10 + (desc[i++] - '0');
          nd++;
        }
        if (nd >= 2 && nd <= 3) {
          *tool_variant = i < descsz && (desc[i] == 'a' || desc[i] == 'f') ? desc[i] : 0;
          *tool_arch = a;
        }
      }
    } else if (nvidia && note.type == NT_CUDA_CUINFO && descsz >= 4 && rd16(desc) == 2) {
      *note_arch = rd16(desc + 2);
    }
  }
  if (step < 0)
    return bad(r, "a note in section %s runs past its section", s->name);
  return TL_OK;
}

/* ---- the whole image -------------------------------------------------- */

void tl_cubin_info_free(tl_cubin_info *info) {
  if (!info)
    return;
  for (size_t i = 0; i < info->nkernels; i++)
    free(info->kernels[i].name);
  free(info->kernels);
  memset(info, 0, sizeof *info);
}

const tl_cubin_kernel *tl_cubin_find(const tl_cubin_info *info, const char *name) {
  if (!info || !name)
    return NULL;
  for (size_t i = 0; i < info->nkernels; i++)
    if (strcmp(info->kernels[i].name, name) == 0)
      return &info->kernels[i];
  return NULL;
}

/* A kernel's name and index, for the sorted lookup table. */
typedef struct kname {
  const char *name;
  size_t index;
} kname;

static int cmp_kname(const void *a, const void *b) {
  return strcmp(((const kname *)a)->name, ((const kname *)b)->name);
}

/* The kernel whose name is section name `sec` after `prefix`, or NULL. */
static tl_cubin_kernel *kernel_named(tl_cubin_info *info, const kname *sorted, const char *sec,
                                     const char *prefix) {
  size_t pl = strlen(prefix);
  if (strncmp(sec, prefix, pl) != 0 || info->nkernels == 0)
    return NULL;
  kname key = {sec + pl, 0};
  const kname *hit = bsearch(&key, sorted, info->nkernels, sizeof *sorted, cmp_kname);
  return hit ? &info->kernels[hit->index] : NULL;
}

/* Applies one per-kernel .nv.info.<name> section to k. */
static tl_status read_kernel_info(reader *r, const section *s, tl_cubin_kernel *k) {
  size_t off = 0;
  record rec;
  int step, top0 = 0, *top = &top0;
  uint64_t seen[TL_CUBIN_PARAMS_MAX / 64] = {0}; /* KPARAM_INFO ordinals met */
  while ((step = next_record(s, &off, &rec)) > 0) {
    switch (rec.attr) {
    case EIATTR_MAX_THREADS:
    case EIATTR_REQNTID:
      if (rec.fmt == EIFMT_SVAL && rec.data.n >= 12) {
        uint32_t *dst = rec.attr == EIATTR_MAX_THREADS ? k->max_threads : k->req_threads;
        for (int i = 0; i < 3; i++)
          dst[i] = rd32(rec.data.p + 4 * i);
      }
      break;
    case EIATTR_MAXREG_COUNT:
      if (rec.fmt == EIFMT_HVAL)
        k->max_registers = (int)rec.value;
      break;
    case EIATTR_NUM_BARRIERS:
      if (rec.fmt == EIFMT_BVAL || rec.fmt == EIFMT_HVAL)
        k->barriers = (int)(rec.value & (rec.fmt == EIFMT_BVAL ? 0xffu : 0xffffu));
      break;
    case EIATTR_CBANK_PARAM_SIZE:
      if (rec.fmt == EIFMT_HVAL)
        k->param_bytes = (int)rec.value;
      break;
    case EIATTR_KPARAM_INFO:
      if (rec.fmt == EIFMT_SVAL && rec.data.n >= 12) {
        uint32_t ord = rd16(rec.data.p + 4), flags = rd32(rec.data.p + 8);
        if (ord < TL_CUBIN_PARAMS_MAX) {
          k->param_offset[ord] = rd16(rec.data.p + 6);
          k->param_size[ord] = (uint16_t)((flags >> 18) & 0x3fff);
          seen[ord / 64] |= 1ull << (ord % 64);
          if ((int)ord >= *top)
            *top = (int)ord + 1;
        }
      }
      break;
    default:
      break;
    }
  }
  if (step < 0)
    return bad(r, "a record of %s runs past its section", s->name);
  k->nparams = *top;
  for (int i = 0; i < *top; i++)
    if (!(seen[i / 64] >> (i % 64) & 1))
      k->nparams = 0; /* a gap: not a list to trust */
  return TL_OK;
}

/* Applies the module-wide .nv.info section (records keyed by symbol). */
static tl_status read_global_info(reader *r, const section *s, const int *sym_kernel,
                                  size_t nsyms, tl_cubin_info *info) {
  size_t off = 0;
  record rec;
  int step;
  while ((step = next_record(s, &off, &rec)) > 0) {
    if (rec.fmt != EIFMT_SVAL || rec.data.n < 8)
      continue;
    uint32_t sym = rd32(rec.data.p), val = rd32(rec.data.p + 4);
    if (sym >= nsyms || sym_kernel[sym] < 0)
      continue; /* a device function's figures */
    tl_cubin_kernel *k = &info->kernels[sym_kernel[sym]];
    switch (rec.attr) {
    case EIATTR_REGCOUNT:
      k->registers = val > 0xffff ? -1 : (int)val;
      break;
    case EIATTR_FRAME_SIZE:
      k->local_bytes = val;
      break;
    case EIATTR_MIN_STACK_SIZE:
      k->min_stack_bytes = val;
      break;
    case EIATTR_MAX_STACK_SIZE:
      k->max_stack_bytes = val;
      break;
    default:
      break;
    }
  }
  if (step < 0)
    return bad(r, "a record of %s runs past its section", s->name);
  return TL_OK;
}

/* Reads the .nv.compat section's accelerator attribute (-1 if absent). */
static int read_compat_accel(const section *s) {
  size_t off = 0;
  record rec;
  while (next_record(s, &off, &rec) > 0)
    if (rec.attr == EICOMPAT_ACCELERATOR_TARGET && rec.fmt == EIFMT_BVAL)
      return (rec.value & 0xff) != 0;
  return -1;
}

static tl_status inspect(reader *r, tl_cubin_info *out) {
  tl_elf *e = &r->elf;
  if (e->machine != TL_EM_CUDA)
    return bad(r, "e_machine is %u, not EM_CUDA (%d)", e->machine, TL_EM_CUDA);
  out->os_abi = (int)e->os_abi;
  if (out->os_abi != ELFOSABI_CUDA && out->os_abi != ELFOSABI_CUDA_V2)
    return bad(r, "OS ABI 0x%02x is not CUDA's (0x%02x or 0x%02x)", (unsigned)out->os_abi,
               ELFOSABI_CUDA, ELFOSABI_CUDA_V2);
  out->abi_version = (int)e->abi_version;
  out->e_flags = e->flags;
  int accel = 0;
  tl_status st = tl_cubin_decode_flags(out->abi_version, out->e_flags, &out->arch, &accel, r->err);
  if (st != TL_OK)
    return st;
  if (out->abi_version == TL_CUDA_ABI_V1)
    out->virtual_arch = (int)((out->e_flags >> 16) & 0xff);
  if ((st = tl_elf_load(e)) != TL_OK)
    return st;
  section *secs = e->secs;
  size_t nsecs = e->nsecs;

  /* The symbol table. */
  const section *symtab = NULL, *strtab = NULL;
  for (size_t i = 0; i < nsecs; i++) {
    if (secs[i].type != TL_SHT_SYMTAB)
      continue;
    if (symtab)
      return bad(r, "more than one symbol table");
    symtab = &secs[i];
  }
  if (!symtab)
    return bad(r, "no symbol table");
  if (symtab->entsize != TL_ELF_SYM_SIZE || symtab->n % TL_ELF_SYM_SIZE != 0)
    return bad(r, "symbol table entry size %llu or size %zu is wrong",
               (unsigned long long)symtab->entsize, symtab->n);
  if (symtab->link >= nsecs || secs[symtab->link].type != TL_SHT_STRTAB)
    return bad(r, "symbol table's string table (section %u) is not a string table", symtab->link);
  strtab = &secs[symtab->link];
  size_t nsyms = symtab->n / TL_ELF_SYM_SIZE;
  if (nsyms > MAX_SYMBOLS)
    return tl_error_set(r->err, TL_LIMIT, "cubin has %zu symbols, more than %d", nsyms, MAX_SYMBOLS);

  int *sym_kernel = malloc((nsyms ? nsyms : 1) * sizeof *sym_kernel);
  if (!sym_kernel)
    return tl_error_set(r->err, TL_NOMEM, "out of memory reading a cubin");
  int reserved_marker = 0;
  size_t nk = 0;
  for (size_t i = 0; i < nsyms; i++) {
    const unsigned char *sp = symtab->data + i * TL_ELF_SYM_SIZE;
    sym_kernel[i] = -1;
    const char *name = tl_elf_str(strtab, rd32(sp));
    if (!name) {
      free(sym_kernel);
      return bad(r, "symbol %zu has a name outside its string table", i);
    }
    if (starts_with(name, ".nv.reservedSmem") || starts_with(name, "__nv_reservedSMEM"))
      reserved_marker = 1;
    unsigned stinfo = sp[4], other = sp[5], shndx = rd16(sp + 6);
    unsigned type = stinfo & 0xf, bind = stinfo >> 4;
    if (type != TL_STT_FUNC || !(other & STO_CUDA_ENTRY) || (bind != TL_STB_GLOBAL && bind != TL_STB_WEAK))
      continue;
    if (shndx == 0 || shndx >= nsecs) {
      free(sym_kernel);
      return bad(r, "kernel symbol %zu has section index %u out of range", i, shndx);
    }
    if (!*name || strlen(name) >= TL_CUBIN_MAX_NAME) {
      free(sym_kernel);
      return bad(r, "kernel symbol %zu has an empty or over-long name", i);
    }
    if (nk >= TL_CUBIN_MAX_KERNELS) {
      free(sym_kernel);
      return tl_error_set(r->err, TL_LIMIT, "cubin has more than %d kernels", TL_CUBIN_MAX_KERNELS);
    }
    sym_kernel[i] = (int)nk++;
  }
  for (size_t i = 0; i < nsecs; i++)
    if (starts_with(secs[i].name, ".nv.shared.reserved."))
      reserved_marker = 1;

  out->kernels = calloc(nk ? nk : 1, sizeof *out->kernels);
  if (!out->kernels) {
    free(sym_kernel);
    return tl_error_set(r->err, TL_NOMEM, "out of memory reading a cubin");
  }
  for (size_t i = 0; i < nsyms; i++) {
    if (sym_kernel[i] < 0)
      continue;
    const unsigned char *sp = symtab->data + i * TL_ELF_SYM_SIZE;
    tl_cubin_kernel *k = &out->kernels[sym_kernel[i]];
    k->name = strdup(tl_elf_str(strtab, rd32(sp)));
    if (!k->name) {
      free(sym_kernel);
      return tl_error_set(r->err, TL_NOMEM, "out of memory reading a cubin");
    }
    out->nkernels++;
    k->registers = k->max_registers = k->barriers = k->param_bytes = -1;
    k->min_stack_bytes = k->max_stack_bytes = -1;
    k->code_bytes = secs[rd16(sp + 6)].size;
  }

  /* Kernel names sorted, for looking up .nv.info.<name>/.nv.shared.<name>. */
  kname *sorted = malloc((out->nkernels ? out->nkernels : 1) * sizeof *sorted);
  if (!sorted) {
    free(sym_kernel);
    return tl_error_set(r->err, TL_NOMEM, "out of memory reading a cubin");
  }
  for (size_t j = 0; j < out->nkernels; j++)
    sorted[j] = (kname){out->kernels[j].name, j};
  qsort(sorted, out->nkernels, sizeof *sorted, cmp_kname);
  for (size_t j = 1; j < out->nkernels; j++) {
    if (strcmp(sorted[j - 1].name, sorted[j].name) == 0) {
      st = bad(r, "kernel '%.200s' is defined twice", sorted[j].name);
      free(sorted);
      free(sym_kernel);
      return st;
    }
  }

  /* Per-kernel sections, global attributes, compat flags, notes. */
  int compat_accel = -1, note_arch = 0, tool_arch = 0, tool_variant = 0;
  for (size_t i = 0; i < nsecs && st == TL_OK; i++) {
    const section *s = &secs[i];
    tl_cubin_kernel *k;
    if (strcmp(s->name, ".nv.info") == 0) {
      st = read_global_info(r, s, sym_kernel, nsyms, out);
    } else if (strcmp(s->name, ".nv.compat") == 0) {
      compat_accel = read_compat_accel(s);
    } else if (s->type == TL_SHT_NOTE) {
      st = read_notes(r, s, out, &note_arch, &tool_arch, &tool_variant);
    } else if ((k = kernel_named(out, sorted, s->name, ".nv.info.")) != NULL) {
      st = read_kernel_info(r, s, k);
    } else if ((k = kernel_named(out, sorted, s->name, ".nv.shared.")) != NULL) {
      if (s->size > UINT32_MAX)
        st = bad(r, "shared memory section %s of %llu bytes", s->name, (unsigned long long)s->size);
      else
        k->shared_section_bytes = (uint32_t)s->size;
    }
  }
  free(sorted);
  free(sym_kernel);
  if (st != TL_OK)
    return st;
  if (note_arch && note_arch != out->arch)
    return bad(r, "the cuinfo note says sm_%d but e_flags say sm_%d", note_arch, out->arch);
  /* ptxas's command line only speaks for this image when its arch agrees. */
  int note_variant = tool_arch == out->arch ? tool_variant : 0;

  for (size_t j = 0; j < out->nkernels; j++) {
    tl_cubin_kernel *k = &out->kernels[j];
    k->shared_bytes = k->shared_section_bytes;
    if (out->arch >= 90 && reserved_marker && k->shared_bytes >= RESERVED_SMEM_WINDOW)
      k->shared_bytes -= RESERVED_SMEM_WINDOW;
  }
  out->arch_specific = accel || compat_accel == 1 || note_variant == 'a';
  out->family_specific = !out->arch_specific && note_variant == 'f';
  snprintf(out->target, sizeof out->target, "sm_%d%s", out->arch,
           out->arch_specific ? "a" : out->family_specific ? "f" : "");
  return TL_OK;
}

tl_status tl_cubin_inspect(const void *bytes, size_t n, tl_cubin_info *out, tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cubin_inspect: NULL output");
  memset(out, 0, sizeof *out);
  if (!bytes && n)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cubin_inspect: NULL image");
  if (n > TL_CUBIN_MAX_BYTES)
    return tl_error_set(err, TL_TOO_LARGE, "cubin of %zu bytes is over the limit of %u", n,
                        TL_CUBIN_MAX_BYTES);
  reader r = {.err = err};
  tl_status st = tl_elf_open(&r.elf, bytes, n, "not a cubin", err);
  if (st == TL_OK)
    st = inspect(&r, out);
  tl_elf_close(&r.elf);
  if (st != TL_OK)
    tl_cubin_info_free(out);
  return st;
}

tl_status tl_cubin_check_target(const tl_cubin_info *info, const char *target, tl_error *err) {
  if (!info || !target)
    return tl_error_set(err, TL_INVALID_ARG, "tl_cubin_check_target: NULL argument");
  int arch = 0, nd = 0;
  const char *p = target;
  if (strncmp(p, "sm_", 3) != 0)
    return tl_error_set(err, TL_INVALID_ARG, "'%.32s' is not an sm_ target", target);
  for (p += 3; *p >= '0' && *p <= '9' && nd < 4; p++, nd++)
    arch = arch * 10 + (*p - '0');
  char variant = (*p == 'a' || *p == 'f') ? *p++ : 0;
  if (nd < 2 || nd > 3 || *p)
    return tl_error_set(err, TL_INVALID_ARG, "'%.32s' is not an sm_ target", target);
  /* An sm_NNa cubin does not serve an sm_NN request, nor the reverse.  A
   * family cubin is only recognised by its toolkit note: without one, an
   * sm_NNf request accepts a plain sm_NN cubin. */
  char have = info->arch_specific ? 'a' : info->family_specific ? 'f' : 0;
  int ok = info->arch == arch &&
           (have == variant || (variant == 'f' && have == 0 && !info->toolkit[0]));
  if (!ok)
    return tl_error_set(err, TL_INVALID_ARG, "the cubin is for %s, not %s", info->target, target);
  return TL_OK;
}
