/*
 * elf.h - the ELF64 reader that the cubin reader (cubin.c) and the AMDGPU
 * code-object reader (hsaco.c) share: the file header, the section table
 * with its names, the program header table, string tables, symbols and
 * notes, each checked against the image before it is read.
 *
 * What a tl_elf holds after tl_elf_open and tl_elf_load is trusted: every
 * section's contents (data, n) lie inside the image, every section name is
 * a NUL-terminated string inside .shstrtab, every segment's file contents
 * lie inside the image.  Everything else read from the image goes through
 * tl_elf_in_range or the accessors below.  Only little-endian ELF64 is
 * read (both vendors' device code is).
 *
 * Errors are TL_INVALID_ARG with the message "WHAT: PROBLEM", WHAT being
 * the caller's name for what it expects ("not a cubin", "not an AMDGPU
 * code object"), so each reader keeps its own wording; TL_NOMEM.
 */
#ifndef TL_ELF_READER_H
#define TL_ELF_READER_H

#include <stddef.h>
#include <stdint.h>
#include "../proto/tl_error.h"

/* Limits and sizes. */
#define TL_ELF_MAX_SECTIONS 65280 /* below SHN_LORESERVE */
#define TL_ELF_EHDR_SIZE 64
#define TL_ELF_SHDR_SIZE 64
#define TL_ELF_PHDR_SIZE 56
#define TL_ELF_SYM_SIZE 24

enum { /* the section types and symbol fields the readers use */
  TL_SHT_NULL = 0,
  TL_SHT_SYMTAB = 2,
  TL_SHT_STRTAB = 3,
  TL_SHT_NOTE = 7,
  TL_SHT_NOBITS = 8,
  TL_SHT_DYNSYM = 11,
  TL_ET_REL = 1,
  TL_ET_DYN = 3,
  TL_STT_OBJECT = 1,
  TL_STT_FUNC = 2,
  TL_STB_GLOBAL = 1,
  TL_STB_WEAK = 2,
};

typedef struct tl_elf_section {
  const char *name;          /* inside .shstrtab, NUL-terminated */
  uint32_t type, link, info;
  uint64_t addr, size;       /* sh_size (for NOBITS: the size it would have) */
  uint64_t entsize;
  const unsigned char *data; /* checked contents; NULL for NOBITS and NULL sections */
  size_t n;                  /* bytes of data */
} tl_elf_section;

typedef struct tl_elf {
  const unsigned char *img;
  size_t n;
  const char *what;          /* message prefix: "not a cubin" */
  tl_error *err;
  /* the file header */
  unsigned type, machine;    /* e_type, e_machine */
  unsigned os_abi, abi_version; /* EI_OSABI, EI_ABIVERSION */
  uint32_t flags;            /* e_flags */
  /* after tl_elf_load */
  tl_elf_section *secs;      /* malloc'd; tl_elf_close frees */
  size_t nsecs;
} tl_elf;

typedef struct tl_elf_sym {
  const char *name;          /* inside the symbol table's string table */
  unsigned type, bind, other; /* st_info & 0xf, st_info >> 4, st_other */
  unsigned shndx;
  uint64_t value, size;
} tl_elf_sym;

typedef struct tl_elf_note {
  const unsigned char *name; /* namesz bytes (the owner, with its NUL) */
  uint32_t namesz, type;
  const unsigned char *desc; /* descsz bytes */
  uint32_t descsz;
} tl_elf_note;

/* Little-endian reads of 2, 4 and 8 bytes (the caller checked the range). */
uint16_t tl_elf_rd16(const unsigned char *p);
uint32_t tl_elf_rd32(const unsigned char *p);
uint64_t tl_elf_rd64(const unsigned char *p);

/* 1 when [off, off + len) lies within n bytes (no overflow). */
int tl_elf_in_range(uint64_t off, uint64_t len, uint64_t n);

/* Fills err with TL_INVALID_ARG "WHAT: MESSAGE" and returns it. */
tl_status tl_elf_bad(const tl_elf *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reads the identification and the file header of img[0, n): at least an
 * ELF64 header's bytes, the magic, class ELF64, little-endian, version 1.
 * The caller then checks the machine, OS ABI, ABI version and type in the
 * order its messages want.  Holds nothing to free yet (tl_elf_close is
 * harmless). */
tl_status tl_elf_open(tl_elf *e, const void *img, size_t n, const char *what, tl_error *err);

/* Checks the header sizes, reads the section table (1 to
 * TL_ELF_MAX_SECTIONS sections inside the image, each section's contents
 * inside it, names inside a string-table .shstrtab) and checks the program
 * header table and every segment's file contents.  Free with
 * tl_elf_close, also on failure. */
tl_status tl_elf_load(tl_elf *e);

/* Frees what tl_elf_load allocated.  Accepts NULL. */
void tl_elf_close(tl_elf *e);

/* The NUL-terminated string at off in string section s, or NULL when s is
 * not a string table or the string does not end inside it. */
const char *tl_elf_str(const tl_elf_section *s, uint64_t off);

/* The first section of that name, or NULL. */
const tl_elf_section *tl_elf_section_named(const tl_elf *e, const char *name);

/* Symbol i of symbol table s (its entries checked by the caller to be
 * s->n / TL_ELF_SYM_SIZE): 1 when its name lies inside the linked string
 * table, 0 when not (out->name is then NULL). */
int tl_elf_symbol(const tl_elf *e, const tl_elf_section *s, size_t i, tl_elf_sym *out);

/* Steps through the notes of section s from *off: 1 with *out filled and
 * *off at the next note, 0 at the end, -1 when a note runs past the
 * section (the last note's padding may be cut off; fewer than 12 bytes
 * left over count as running past). */
int tl_elf_next_note(const tl_elf_section *s, size_t *off, tl_elf_note *out);

#endif
