/*
 * elf.c - the ELF64 reader of elf.h: the file header, the section and
 * program header tables, string tables, symbols and notes, every offset
 * checked against the image before it is used.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elf.h"

uint16_t tl_elf_rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
uint32_t tl_elf_rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
uint64_t tl_elf_rd64(const unsigned char *p) { return (uint64_t)tl_elf_rd32(p) | (uint64_t)tl_elf_rd32(p + 4) << 32; }

int tl_elf_in_range(uint64_t off, uint64_t len, uint64_t n) { return off <= n && len <= n - off; }

tl_status tl_elf_bad(const tl_elf *e, const char *fmt, ...) {
  char msg[640];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return tl_error_set(e->err, TL_INVALID_ARG, "%s: %s", e->what, msg);
}

tl_status tl_elf_open(tl_elf *e, const void *img, size_t n, const char *what, tl_error *err) {
  memset(e, 0, sizeof *e);
  e->img = img;
  e->n = n;
  e->what = what;
  e->err = err;
  const unsigned char *h = img;
  if (n < TL_ELF_EHDR_SIZE)
    return tl_elf_bad(e, "%zu bytes, shorter than an ELF64 header", n);
  if (memcmp(h, "\177ELF", 4) != 0)
    return tl_elf_bad(e, "no ELF magic");
  if (h[4] != 2)
    return tl_elf_bad(e, "not ELF64 (class %u)", h[4]);
  if (h[5] != 1)
    return tl_elf_bad(e, "not little-endian (data encoding %u)", h[5]);
  if (h[6] != 1 || tl_elf_rd32(h + 20) != 1)
    return tl_elf_bad(e, "unknown ELF version (%u, e_version %u)", h[6], tl_elf_rd32(h + 20));
  e->os_abi = h[7];
  e->abi_version = h[8];
  e->type = tl_elf_rd16(h + 16);
  e->machine = tl_elf_rd16(h + 18);
  e->flags = tl_elf_rd32(h + 48);
  return TL_OK;
}

const char *tl_elf_str(const tl_elf_section *s, uint64_t off) {
  if (s->type != TL_SHT_STRTAB || off >= s->n)
    return NULL;
  const char *p = (const char *)s->data + off;
  return memchr(p, 0, s->n - off) ? p : NULL;
}

static tl_status load_sections(tl_elf *e, uint64_t shoff, unsigned shnum, unsigned shstrndx) {
  if (shnum == 0)
    return tl_elf_bad(e, "no section headers");
  if (shnum > TL_ELF_MAX_SECTIONS)
    return tl_elf_bad(e, "%u sections, more than %u", shnum, (unsigned)TL_ELF_MAX_SECTIONS);
  if (!tl_elf_in_range(shoff, (uint64_t)shnum * TL_ELF_SHDR_SIZE, e->n))
    return tl_elf_bad(e, "the section header table (%u entries at offset %llu) runs past the end (%zu bytes)",
                      shnum, (unsigned long long)shoff, e->n);
  if (shstrndx >= shnum)
    return tl_elf_bad(e, "section name table index %u out of range (%u sections)", shstrndx, shnum);
  e->secs = calloc(shnum, sizeof *e->secs);
  if (!e->secs)
    return tl_error_set(e->err, TL_NOMEM, "out of memory reading an ELF image");
  e->nsecs = shnum;
  for (unsigned i = 0; i < shnum; i++) {
    const unsigned char *h = e->img + shoff + (uint64_t)i * TL_ELF_SHDR_SIZE;
    tl_elf_section *s = &e->secs[i];
    s->type = tl_elf_rd32(h + 4);
    s->addr = tl_elf_rd64(h + 16);
    uint64_t off = tl_elf_rd64(h + 24);
    s->size = tl_elf_rd64(h + 32);
    s->link = tl_elf_rd32(h + 40);
    s->info = tl_elf_rd32(h + 44);
    s->entsize = tl_elf_rd64(h + 56);
    if (s->type != TL_SHT_NOBITS && s->type != TL_SHT_NULL) {
      if (!tl_elf_in_range(off, s->size, e->n))
        return tl_elf_bad(e, "section %u (offset %llu, size %llu) runs past the end (%zu bytes)", i,
                          (unsigned long long)off, (unsigned long long)s->size, e->n);
      s->data = e->img + off;
      s->n = (size_t)s->size;
    }
  }
  const tl_elf_section *shstr = &e->secs[shstrndx];
  if (shstr->type != TL_SHT_STRTAB)
    return tl_elf_bad(e, "the section name table (section %u) is not a string table", shstrndx);
  for (unsigned i = 0; i < shnum; i++) {
    e->secs[i].name = tl_elf_str(shstr, tl_elf_rd32(e->img + shoff + (uint64_t)i * TL_ELF_SHDR_SIZE));
    if (!e->secs[i].name)
      return tl_elf_bad(e, "section %u has a name outside the section name table", i);
  }
  return TL_OK;
}

static tl_status check_segments(tl_elf *e, uint64_t phoff, unsigned phentsize, unsigned phnum) {
  if (phnum == 0)
    return TL_OK;
  if (phentsize != TL_ELF_PHDR_SIZE)
    return tl_elf_bad(e, "program header size %u, not %d", phentsize, TL_ELF_PHDR_SIZE);
  if (!tl_elf_in_range(phoff, (uint64_t)phnum * TL_ELF_PHDR_SIZE, e->n))
    return tl_elf_bad(e, "the program header table (%u entries at offset %llu) runs past the end (%zu bytes)",
                      phnum, (unsigned long long)phoff, e->n);
  for (unsigned i = 0; i < phnum; i++) {
    const unsigned char *h = e->img + phoff + (uint64_t)i * TL_ELF_PHDR_SIZE;
    uint64_t off = tl_elf_rd64(h + 8), filesz = tl_elf_rd64(h + 32);
    if (!tl_elf_in_range(off, filesz, e->n))
      return tl_elf_bad(e, "segment %u (offset %llu, size %llu) runs past the end (%zu bytes)", i,
                        (unsigned long long)off, (unsigned long long)filesz, e->n);
  }
  return TL_OK;
}

tl_status tl_elf_load(tl_elf *e) {
  const unsigned char *h = e->img;
  unsigned ehsize = tl_elf_rd16(h + 52), shentsize = tl_elf_rd16(h + 58), shnum = tl_elf_rd16(h + 60);
  if (ehsize != TL_ELF_EHDR_SIZE)
    return tl_elf_bad(e, "e_ehsize %u, not an ELF64 header's %d", ehsize, TL_ELF_EHDR_SIZE);
  if (shnum && shentsize != TL_ELF_SHDR_SIZE)
    return tl_elf_bad(e, "section header size %u, not %d", shentsize, TL_ELF_SHDR_SIZE);
  tl_status st = load_sections(e, tl_elf_rd64(h + 40), shnum, tl_elf_rd16(h + 62));
  if (st != TL_OK)
    return st;
  return check_segments(e, tl_elf_rd64(h + 32), tl_elf_rd16(h + 54), tl_elf_rd16(h + 56));
}

void tl_elf_close(tl_elf *e) {
  if (!e)
    return;
  free(e->secs);
  e->secs = NULL;
  e->nsecs = 0;
}

const tl_elf_section *tl_elf_section_named(const tl_elf *e, const char *name) {
  for (size_t i = 0; i < e->nsecs; i++)
    if (strcmp(e->secs[i].name, name) == 0)
      return &e->secs[i];
  return NULL;
}

int tl_elf_symbol(const tl_elf *e, const tl_elf_section *s, size_t i, tl_elf_sym *out) {
  const unsigned char *p = s->data + i * TL_ELF_SYM_SIZE;
  out->name = s->link < e->nsecs ? tl_elf_str(&e->secs[s->link], tl_elf_rd32(p)) : NULL;
  out->type = p[4] & 0xf;
  out->bind = p[4] >> 4;
  out->other = p[5];
  out->shndx = tl_elf_rd16(p + 6);
  out->value = tl_elf_rd64(p + 8);
  out->size = tl_elf_rd64(p + 16);
  return out->name != NULL;
}

int tl_elf_next_note(const tl_elf_section *s, size_t *off, tl_elf_note *out) {
  if (*off >= s->n)
    return 0;
  if (s->n - *off < 12)
    return -1;
  const unsigned char *p = s->data + *off;
  out->namesz = tl_elf_rd32(p);
  out->descsz = tl_elf_rd32(p + 4);
  out->type = tl_elf_rd32(p + 8);
  uint64_t name_off = *off + 12;
  uint64_t name_pad = ((uint64_t)out->namesz + 3) & ~(uint64_t)3;
  uint64_t desc_pad = ((uint64_t)out->descsz + 3) & ~(uint64_t)3;
  if (!tl_elf_in_range(name_off, name_pad, s->n) || !tl_elf_in_range(name_off + name_pad, out->descsz, s->n))
    return -1;
  out->name = s->data + name_off;
  out->desc = s->data + name_off + name_pad;
  uint64_t next = name_off + name_pad + desc_pad;
  *off = next > s->n ? s->n : (size_t)next; /* the last note's padding may be cut off */
  return 1;
}
