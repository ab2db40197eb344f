/*
 * cubin.c - the cubin reader of cubin.h: header and e_flags checks, section and
 * symbol tables, the .nv.info attribute records, the .nv.compat section and
 * the NVIDIA notes, gathered into one tl_cubin_info per image.
 *
 * Every field is read with the bounds-checked helpers below; a section's
 * contents are only touched through a (pointer, size) pair that was checked
 * against the image once, in load_sections.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin.h"

/* ---- ELF constants (the subset used) --------------------------------- */

enum {
  EHDR_SIZE = 64,
  SHDR_SIZE = 64,
  PHDR_SIZE = 56,
  SYM_SIZE = 24,
  SHT_NULL = 0,
  SHT_SYMTAB = 2,
  SHT_STRTAB = 3,
  SHT_NOTE = 7,
  SHT_NOBITS = 8,
  STT_FUNC = 2,
  STB_GLOBAL = 1,
  STB_WEAK = 2,
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

/* ---- bounds-checked reading ------------------------------------------ */

typedef struct span {
  const unsigned char *p;
  size_t n;
} span;

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* 1 if [off, off+len) lies within n bytes. */
static int in_range(uint64_t off, uint64_t len, uint64_t n) { return off <= n && len <= n - off; }

typedef struct section {
  const char *name;  /* inside .shstrtab, NUL-terminated */
  uint32_t type;
  uint32_t link, info;
  uint64_t size;     /* sh_size (for NOBITS: the size it would have) */
  uint64_t entsize;
  span data;         /* checked contents; empty for NOBITS / NULL */
} section;

typedef struct reader {
  span img;
  tl_error *err;
  section *secs;
  size_t nsecs;
} reader;

static tl_status bad(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tl_status bad(reader *r, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return tl_error_set(r->err, TL_INVALID_ARG, "not a cubin: %s", msg);
}

/* The NUL-terminated string at off in a string section, or NULL. */
static const char *str_at(const section *s, uint64_t off) {
  if (s->type != SHT_STRTAB || off >= s->data.n)
    return NULL;
  const char *p = (const char *)s->data.p + off;
  return memchr(p, 0, s->data.n - off) ? p : NULL;
}

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

/* ---- sections --------------------------------------------------------- */

static tl_status load_sections(reader *r, uint64_t shoff, unsigned shnum, unsigned shstrndx) {
  const unsigned char *img = r->img.p;
  if (shnum == 0)
    return bad(r, "no section headers");
  if (shnum > TL_CUBIN_MAX_SECTIONS)
    return bad(r, "%u sections, more than %u", shnum, (unsigned)TL_CUBIN_MAX_SECTIONS);
  if (!in_range(shoff, (uint64_t)shnum * SHDR_SIZE, r->img.n))
    return bad(r, "section header table (%u entries at offset %llu) runs past the end (%zu bytes)",
               shnum, (unsigned long long)shoff, r->img.n);
  if (shstrndx >= shnum)
    return bad(r, "section name table index %u out of range (%u sections)", shstrndx, shnum);
  r->secs = calloc(shnum, sizeof *r->secs);
  if (!r->secs)
    return tl_error_set(r->err, TL_NOMEM, "out of memory reading a cubin");
  r->nsecs = shnum;
  for (unsigned i = 0; i < shnum; i++) {
    const unsigned char *h = img + shoff + (uint64_t)i * SHDR_SIZE;
    section *s = &r->secs[i];
    s->type = rd32(h + 4);
    uint64_t off = rd64(h + 24);
    s->size = rd64(h + 32);
    s->link = rd32(h + 40);
    s->info = rd32(h + 44);
    s->entsize = rd64(h + 56);
    if (s->type != SHT_NOBITS && s->type != SHT_NULL) {
      if (!in_range(off, s->size, r->img.n))
        return bad(r, "section %u (offset %llu, size %llu) runs past the end (%zu bytes)", i,
                   (unsigned long long)off, (unsigned long long)s->size, r->img.n);
      s->data.p = img + off;
      s->data.n = (size_t)s->size;
    }
  }
  const section *shstr = &r->secs[shstrndx];
  if (shstr->type != SHT_STRTAB)
    return bad(r, "section name table (section %u) is not a string table", shstrndx);
  for (unsigned i = 0; i < shnum; i++) {
    const unsigned char *h = img + shoff + (uint64_t)i * SHDR_SIZE;
    r->secs[i].name = str_at(shstr, rd32(h));
    if (!r->secs[i].name)
      return bad(r, "section %u has a name outside the section name table", i);
  }
  return TL_OK;
}

/* Checks the program header table (NVIDIA's tools put it last) and that
 * every segment's file contents lie inside the image. */
static tl_status check_segments(reader *r, uint64_t phoff, unsigned phentsize, unsigned phnum) {
  if (phnum == 0)
    return TL_OK;
  if (phentsize != PHDR_SIZE)
    return bad(r, "program header size %u, not %d", phentsize, PHDR_SIZE);
  if (!in_range(phoff, (uint64_t)phnum * PHDR_SIZE, r->img.n))
    return bad(r, "program header table (%u entries at offset %llu) runs past the end (%zu bytes)",
               phnum, (unsigned long long)phoff, r->img.n);
  for (unsigned i = 0; i < phnum; i++) {
    const unsigned char *h = r->img.p + phoff + (uint64_t)i * PHDR_SIZE;
    uint64_t off = rd64(h + 8), filesz = rd64(h + 32);
    if (!in_range(off, filesz, r->img.n))
      return bad(r, "segment %u (offset %llu, size %llu) runs past the end (%zu bytes)", i,
                 (unsigned long long)off, (unsigned long long)filesz, r->img.n);
  }
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
  if (*off + 4 > s->data.n)
    return 0;
  const unsigned char *p = s->data.p + *off;
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
    if (!in_range(*off + 4, rec->value, s->data.n))
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
  while (off + 12 <= s->data.n) {
    const unsigned char *p = s->data.p + off;
    uint32_t namesz = rd32(p), descsz = rd32(p + 4), type = rd32(p + 8);
    uint64_t name_pad = ((uint64_t)namesz + 3) & ~(uint64_t)3;
    uint64_t desc_pad = ((uint64_t)descsz + 3) & ~(uint64_t)3;
    if (!in_range(off + 12, name_pad, s->data.n) ||
        !in_range(off + 12 + name_pad, descsz, s->data.n))
      return bad(r, "note in section %s runs past its section", s->name);
    const unsigned char *desc = p + 12 + name_pad;
    int nvidia = namesz >= 6 && memcmp(p + 12, "NVIDIA", 6) == 0;
    if (nvidia && type == NT_CUDA_TKINFO) {
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
    } else if (nvidia && type == NT_CUDA_CUINFO && descsz >= 4 && rd16(desc) == 2) {
      *note_arch = rd16(desc + 2);
    }
    if (!in_range(off + 12 + name_pad, desc_pad, s->data.n))
      break; /* the last note's padding may be cut off */
    off += 12 + name_pad + desc_pad;
  }
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
  int step;
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
    default:
      break;
    }
  }
  if (step < 0)
    return bad(r, "a record of %s runs past its section", s->name);
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
  const unsigned char *img = r->img.p;
  size_t n = r->img.n;
  if (n < EHDR_SIZE)
    return bad(r, "%zu bytes, shorter than an ELF64 header", n);
  if (memcmp(img, "\177ELF", 4) != 0)
    return bad(r, "no ELF magic");
  if (img[4] != 2)
    return bad(r, "not ELF64 (class %u)", img[4]);
  if (img[5] != 1)
    return bad(r, "not little-endian (data encoding %u)", img[5]);
  if (img[6] != 1 || rd32(img + 20) != 1)
    return bad(r, "unknown ELF version");
  if (rd16(img + 18) != TL_EM_CUDA)
    return bad(r, "e_machine is %u, not EM_CUDA (%d)", rd16(img + 18), TL_EM_CUDA);
  out->os_abi = img[7];
  if (out->os_abi != ELFOSABI_CUDA && out->os_abi != ELFOSABI_CUDA_V2)
    return bad(r, "OS ABI 0x%02x is not CUDA's (0x%02x or 0x%02x)", (unsigned)out->os_abi,
               ELFOSABI_CUDA, ELFOSABI_CUDA_V2);
  out->abi_version = img[8];
  out->e_flags = rd32(img + 48);
  int accel = 0;
  tl_status st = tl_cubin_decode_flags(out->abi_version, out->e_flags, &out->arch, &accel, r->err);
  if (st != TL_OK)
    return st;
  if (out->abi_version == TL_CUDA_ABI_V1)
    out->virtual_arch = (int)((out->e_flags >> 16) & 0xff);
  if (rd16(img + 52) < EHDR_SIZE)
    return bad(r, "e_ehsize %u is smaller than an ELF64 header", rd16(img + 52));
  if (rd16(img + 58) != SHDR_SIZE)
    return bad(r, "section header size %u, not %d", rd16(img + 58), SHDR_SIZE);
  st = load_sections(r, rd64(img + 40), rd16(img + 60), rd16(img + 62));
  if (st != TL_OK)
    return st;
  st = check_segments(r, rd64(img + 32), rd16(img + 54), rd16(img + 56));
  if (st != TL_OK)
    return st;

  /* The symbol table. */
  const section *symtab = NULL, *strtab = NULL;
  for (size_t i = 0; i < r->nsecs; i++) {
    if (r->secs[i].type != SHT_SYMTAB)
      continue;
    if (symtab)
      return bad(r, "more than one symbol table");
    symtab = &r->secs[i];
  }
  if (!symtab)
    return bad(r, "no symbol table");
  if (symtab->entsize != SYM_SIZE || symtab->data.n % SYM_SIZE != 0)
    return bad(r, "symbol table entry size %llu or size %zu is wrong",
               (unsigned long long)symtab->entsize, symtab->data.n);
  if (symtab->link >= r->nsecs || r->secs[symtab->link].type != SHT_STRTAB)
    return bad(r, "symbol table's string table (section %u) is not a string table", symtab->link);
  strtab = &r->secs[symtab->link];
  size_t nsyms = symtab->data.n / SYM_SIZE;
  if (nsyms > MAX_SYMBOLS)
    return tl_error_set(r->err, TL_LIMIT, "cubin has %zu symbols, more than %d", nsyms, MAX_SYMBOLS);

  int *sym_kernel = malloc((nsyms ? nsyms : 1) * sizeof *sym_kernel);
  if (!sym_kernel)
    return tl_error_set(r->err, TL_NOMEM, "out of memory reading a cubin");
  int reserved_marker = 0;
  size_t nk = 0;
  for (size_t i = 0; i < nsyms; i++) {
    const unsigned char *sp = symtab->data.p + i * SYM_SIZE;
    sym_kernel[i] = -1;
    const char *name = str_at(strtab, rd32(sp));
    if (!name) {
      free(sym_kernel);
      return bad(r, "symbol %zu has a name outside its string table", i);
    }
    if (starts_with(name, ".nv.reservedSmem") || starts_with(name, "__nv_reservedSMEM"))
      reserved_marker = 1;
    unsigned stinfo = sp[4], other = sp[5], shndx = rd16(sp + 6);
    unsigned type = stinfo & 0xf, bind = stinfo >> 4;
    if (type != STT_FUNC || !(other & STO_CUDA_ENTRY) || (bind != STB_GLOBAL && bind != STB_WEAK))
      continue;
    if (shndx == 0 || shndx >= r->nsecs) {
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
  for (size_t i = 0; i < r->nsecs; i++)
    if (starts_with(r->secs[i].name, ".nv.shared.reserved."))
      reserved_marker = 1;

  out->kernels = calloc(nk ? nk : 1, sizeof *out->kernels);
  if (!out->kernels) {
    free(sym_kernel);
    return tl_error_set(r->err, TL_NOMEM, "out of memory reading a cubin");
  }
  for (size_t i = 0; i < nsyms; i++) {
    if (sym_kernel[i] < 0)
      continue;
    const unsigned char *sp = symtab->data.p + i * SYM_SIZE;
    tl_cubin_kernel *k = &out->kernels[sym_kernel[i]];
    k->name = strdup(str_at(strtab, rd32(sp)));
    if (!k->name) {
      free(sym_kernel);
      return tl_error_set(r->err, TL_NOMEM, "out of memory reading a cubin");
    }
    out->nkernels++;
    k->registers = k->max_registers = k->barriers = k->param_bytes = -1;
    k->min_stack_bytes = k->max_stack_bytes = -1;
    k->code_bytes = r->secs[rd16(sp + 6)].size;
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
  for (size_t i = 0; i < r->nsecs && st == TL_OK; i++) {
    const section *s = &r->secs[i];
    tl_cubin_kernel *k;
    if (strcmp(s->name, ".nv.info") == 0) {
      st = read_global_info(r, s, sym_kernel, nsyms, out);
    } else if (strcmp(s->name, ".nv.compat") == 0) {
      compat_accel = read_compat_accel(s);
    } else if (s->type == SHT_NOTE) {
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
  reader r = {{bytes, n}, err, NULL, 0};
  tl_status st = inspect(&r, out);
  free(r.secs);
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
