/*
 * test_elf.c - unit tests of compiler/elf.c, the ELF64 reader under the
 * cubin and code-object readers: a small image built here field by field
 * (section names, a note section, a symbol table, a NOBITS section and a
 * program header), read whole, then damaged one field at a time, each
 * damage refused with its own message.  test_cubin.c and test_hsaco.c check
 * the same reader again through real NVRTC and clang output.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "elf.h"

/* ---- building an image ------------------------------------------------- */

enum { IMG_MAX = 2048, NSECS = 6, SHOFF = 1024, PHOFF = 960 };

static void put(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

typedef struct image {
  unsigned char b[IMG_MAX];
  size_t n;
  size_t note_off, note_size; /* where the note section lies */
} image;

/* Appends bytes at the next 8-byte boundary; returns their offset. */
static size_t add(image *im, const void *data, size_t n) {
  im->n = (im->n + 7) & ~(size_t)7;
  size_t at = im->n;
  memcpy(im->b + at, data, n);
  im->n += n;
  return at;
}

static void section(image *im, int i, uint32_t name, uint32_t type, uint64_t off, uint64_t size, uint32_t link,
                    uint64_t entsize) {
  unsigned char *h = im->b + SHOFF + 64 * i;
  put(h, name, 4);
  put(h + 4, type, 4);
  put(h + 24, off, 8);
  put(h + 32, size, 8);
  put(h + 40, link, 4);
  put(h + 56, entsize, 8);
}

/* NULL, .shstrtab, .note, .strtab, .symtab, .bss (NOBITS, larger than the
 * image), and one program header over the notes. */
static void build(image *im) {
  memset(im, 0, sizeof *im);
  unsigned char *h = im->b;
  memcpy(h, "\177ELF", 4);
  h[4] = 2; /* ELF64 */
  h[5] = 1; /* little-endian */
  h[6] = 1; /* EV_CURRENT */
  h[7] = 0x41;
  h[8] = 8;
  put(h + 16, TL_ET_DYN, 2);
  put(h + 18, 190, 2);
  put(h + 20, 1, 4);
  put(h + 32, PHOFF, 8);
  put(h + 40, SHOFF, 8);
  put(h + 48, 0x06005a04, 4);
  put(h + 52, 64, 2);
  put(h + 54, 56, 2);
  put(h + 56, 1, 2);
  put(h + 58, 64, 2);
  put(h + 60, NSECS, 2);
  put(h + 62, 1, 2);
  im->n = 64;
  static const char shstr[] = "\0.shstrtab\0.note\0.strtab\0.symtab\0.bss";
  size_t shstr_off = add(im, shstr, sizeof shstr);
  /* two notes: the second's description padding is cut off by the section's end */
  unsigned char notes[64] = {0};
  put(notes, 7, 4);
  put(notes + 4, 5, 4);
  put(notes + 8, 32, 4);
  memcpy(notes + 12, "AMDGPU", 7);
  memcpy(notes + 20, "hello", 5);
  put(notes + 28, 4, 4);
  put(notes + 32, 2, 4);
  put(notes + 36, 2000, 4);
  memcpy(notes + 40, "abc", 4);
  memcpy(notes + 44, "xy", 2);
  im->note_size = 46;
  im->note_off = add(im, notes, im->note_size);
  static const char strs[] = "\0kernel\0data";
  size_t str_off = add(im, strs, sizeof strs);
  unsigned char syms[3 * 24] = {0};
  put(syms + 24, 1, 4);          /* "kernel" */
  syms[24 + 4] = 1 << 4 | 2;     /* STB_GLOBAL, STT_FUNC */
  syms[24 + 5] = 0x10;
  put(syms + 24 + 6, 2, 2);
  put(syms + 24 + 8, 0x100, 8);
  put(syms + 24 + 16, 64, 8);
  put(syms + 48, 8, 4);          /* "data" */
  syms[48 + 4] = 2 << 4 | 1;     /* STB_WEAK, STT_OBJECT */
  put(syms + 48 + 6, 5, 2);
  size_t sym_off = add(im, syms, sizeof syms);
  section(im, 1, 1, TL_SHT_STRTAB, shstr_off, sizeof shstr, 0, 0);
  section(im, 2, 11, TL_SHT_NOTE, im->note_off, im->note_size, 0, 0);
  section(im, 3, 17, TL_SHT_STRTAB, str_off, sizeof strs, 0, 0);
  section(im, 4, 25, TL_SHT_SYMTAB, sym_off, sizeof syms, 3, 24);
  section(im, 5, 33, TL_SHT_NOBITS, 0, 1u << 30, 0, 0);
  unsigned char *ph = im->b + PHOFF;
  put(ph, 4, 4); /* PT_NOTE */
  put(ph + 8, im->note_off, 8);
  put(ph + 32, im->note_size, 8);
  im->n = SHOFF + 64 * NSECS;
}

/* Opens and loads im; returns the status, err filled. */
static tl_status read_image(const image *im, tl_elf *e, tl_error *err) {
  tl_status st = tl_elf_open(e, im->b, im->n, "not an image", err);
  if (st == TL_OK)
    st = tl_elf_load(e);
  return st;
}

/* Builds the good image into im and reads it into e, which must succeed
 * (e keeps err for its later messages). */
static void read_good(image *im, tl_elf *e, tl_error *err) {
  build(im);
  tl_status st = read_image(im, e, err);
  if (st != TL_OK)
    fail_msg("the good image: %s: %s", tl_status_name(st), err->message);
}

/* ---- tests --------------------------------------------------------------- */

static void test_good_image(void **state) {
  (void)state;
  image im;
  tl_elf e;
  tl_error err;
  read_good(&im, &e, &err);
  assert_int_equal(e.machine, 190);
  assert_int_equal(e.type, TL_ET_DYN);
  assert_int_equal(e.os_abi, 0x41);
  assert_int_equal(e.abi_version, 8);
  assert_int_equal(e.flags, 0x06005a04);
  assert_int_equal(e.nsecs, NSECS);
  const char *names[NSECS] = {"", ".shstrtab", ".note", ".strtab", ".symtab", ".bss"};
  for (int i = 0; i < NSECS; i++)
    assert_string_equal(e.secs[i].name, names[i]);
  const tl_elf_section *bss = tl_elf_section_named(&e, ".bss");
  assert_non_null(bss);
  assert_null(bss->data); /* NOBITS: no bytes, whatever its size */
  assert_true(bss->size == 1u << 30);
  assert_null(tl_elf_section_named(&e, ".text"));

  /* strings */
  const tl_elf_section *strtab = tl_elf_section_named(&e, ".strtab");
  assert_string_equal(tl_elf_str(strtab, 1), "kernel");
  assert_string_equal(tl_elf_str(strtab, 3), "rnel");
  assert_null(tl_elf_str(strtab, strtab->n));
  assert_null(tl_elf_str(tl_elf_section_named(&e, ".note"), 0)); /* not a string table */

  /* symbols */
  const tl_elf_section *symtab = tl_elf_section_named(&e, ".symtab");
  tl_elf_sym sym;
  assert_int_equal(tl_elf_symbol(&e, symtab, 1, &sym), 1);
  assert_string_equal(sym.name, "kernel");
  assert_int_equal(sym.type, TL_STT_FUNC);
  assert_int_equal(sym.bind, TL_STB_GLOBAL);
  assert_int_equal(sym.other, 0x10);
  assert_int_equal(sym.shndx, 2);
  assert_true(sym.value == 0x100 && sym.size == 64);
  assert_int_equal(tl_elf_symbol(&e, symtab, 2, &sym), 1);
  assert_string_equal(sym.name, "data");
  assert_int_equal(sym.type, TL_STT_OBJECT);
  assert_int_equal(sym.bind, TL_STB_WEAK);

  /* notes: two, the last one's padding cut off */
  const tl_elf_section *notes = tl_elf_section_named(&e, ".note");
  size_t off = 0;
  tl_elf_note note;
  assert_int_equal(tl_elf_next_note(notes, &off, &note), 1);
  assert_int_equal(note.namesz, 7);
  assert_memory_equal(note.name, "AMDGPU", 7);
  assert_int_equal(note.type, 32);
  assert_int_equal(note.descsz, 5);
  assert_memory_equal(note.desc, "hello", 5);
  assert_int_equal(off, 28);
  assert_int_equal(tl_elf_next_note(notes, &off, &note), 1);
  assert_int_equal(note.type, 2000);
  assert_memory_equal(note.desc, "xy", 2);
  assert_int_equal(off, notes->n);
  assert_int_equal(tl_elf_next_note(notes, &off, &note), 0);
  tl_elf_close(&e);
  tl_elf_close(&e); /* twice is harmless */
  tl_elf_close(NULL);
}

static void test_bad_notes(void **state) {
  (void)state;
  image im;
  tl_elf e;
  tl_error err;
  read_good(&im, &e, &err);
  tl_elf_section s = *tl_elf_section_named(&e, ".note");
  size_t off = 0;
  tl_elf_note note;
  /* a description that runs past the section */
  unsigned char copy[64];
  memcpy(copy, s.data, s.n);
  put(copy + 32, 3, 4);
  s.data = copy;
  assert_int_equal(tl_elf_next_note(&s, &off, &note), 1);
  assert_int_equal(tl_elf_next_note(&s, &off, &note), -1);
  /* a name size near 2^32 does not wrap */
  put(copy + 32, 2, 4);
  put(copy + 28, 0xfffffffdu, 4);
  off = 0;
  assert_int_equal(tl_elf_next_note(&s, &off, &note), 1);
  assert_int_equal(tl_elf_next_note(&s, &off, &note), -1);
  /* fewer than a note header's 12 bytes left over */
  put(copy + 28, 4, 4);
  s.n = 28 + 5;
  off = 0;
  assert_int_equal(tl_elf_next_note(&s, &off, &note), 1);
  assert_int_equal(tl_elf_next_note(&s, &off, &note), -1);
  tl_elf_close(&e);
}

/* One damaged field of the image: where, its new value and width, and what
 * the error says. */
static void expect_refused(const char *what, size_t at, uint64_t value, int bytes, const char *says) {
  image im;
  build(&im);
  put(im.b + at, value, bytes);
  tl_elf e;
  tl_error err;
  tl_status st = read_image(&im, &e, &err);
  tl_elf_close(&e);
  if (st != TL_INVALID_ARG || strncmp(err.message, "not an image: ", 14) != 0 || !strstr(err.message, says))
    fail_msg("%s: %s: %s (wanted '%s')", what, tl_status_name(st), err.message, says);
}

static void test_damage(void **state) {
  (void)state;
  size_t sh = SHOFF;
  expect_refused("magic", 1, 'e', 1, "no ELF magic");
  expect_refused("class", 4, 1, 1, "not ELF64 (class 1)");
  expect_refused("data", 5, 2, 1, "not little-endian (data encoding 2)");
  expect_refused("EI_VERSION", 6, 0, 1, "unknown ELF version (0, e_version 1)");
  expect_refused("e_version", 20, 2, 4, "unknown ELF version (1, e_version 2)");
  expect_refused("e_ehsize", 52, 52, 2, "e_ehsize 52, not an ELF64 header's 64");
  expect_refused("e_shentsize", 58, 40, 2, "section header size 40, not 64");
  expect_refused("e_shnum 0", 60, 0, 2, "no section headers");
  expect_refused("e_shnum", 60, 7, 2, "the section header table (7 entries at offset 1024) runs past the end");
  expect_refused("e_shoff overflow", 40, UINT64_MAX - 8, 8, "the section header table (6 entries");
  expect_refused("e_shstrndx", 62, 6, 2, "section name table index 6 out of range (6 sections)");
  expect_refused("e_shstrndx not strtab", 62, 2, 2, "the section name table (section 2) is not a string table");
  expect_refused("section offset", sh + 64 * 3 + 24, 2000, 8, "section 3 (offset 2000, size 13) runs past the end");
  expect_refused("section size", sh + 64 * 2 + 32, UINT64_MAX, 8, "section 2 (offset");
  expect_refused("section name", sh + 64 * 4, 500, 4, "section 4 has a name outside the section name table");
  expect_refused("e_phentsize", 54, 32, 2, "program header size 32, not 56");
  expect_refused("e_phoff", 32, 1400, 8, "the program header table (1 entries at offset 1400) runs past the end");
  expect_refused("segment", PHOFF + 32, 4096, 8, "segment 0 (offset");
  /* a NOBITS section may claim any size; a NULL one any offset */
  image im;
  build(&im);
  put(im.b + sh + 24, 1u << 20, 8);
  tl_elf e;
  tl_error err;
  assert_int_equal(read_image(&im, &e, &err), TL_OK);
  tl_elf_close(&e);
  /* too short for a header */
  assert_int_equal(tl_elf_open(&e, im.b, 63, "not an image", &err), TL_INVALID_ARG);
  assert_string_equal(err.message, "not an image: 63 bytes, shorter than an ELF64 header");
  /* every truncation is refused, never read past */
  for (size_t n = 0; n < im.n; n++) {
    unsigned char *cut = malloc(n ? n : 1);
    assert_non_null(cut);
    memcpy(cut, im.b, n);
    tl_status st = tl_elf_open(&e, cut, n, "not an image", &err);
    if (st == TL_OK)
      st = tl_elf_load(&e);
    tl_elf_close(&e);
    free(cut);
    assert_int_equal(st, TL_INVALID_ARG);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good_image),
      cmocka_unit_test(test_bad_notes),
      cmocka_unit_test(test_damage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
