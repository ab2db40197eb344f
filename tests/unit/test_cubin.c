/*
 * test_cubin.c - unit tests of compiler/cubin.c, the cubin reader.
 *
 * Three sources of cubins: images assembled here field by field (so every
 * figure the reader reports is known in advance, with no toolchain), real
 * cubins from the installed NVRTC for every architecture it accepts (the
 * e_flags layouts as NVIDIA writes them; skipped visibly without NVRTC),
 * and damaged copies of both: every truncation, targeted corruptions of
 * each header field and offset, and random byte mutations, none of which
 * may crash, read out of bounds (run under `make SANITIZE=address,undefined`)
 * or be taken for a valid cubin when the damage breaks a checked rule.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin.h"
#include "nvrtc.h"

/* ---- assembling ELF images ------------------------------------------- */

typedef struct buf {
  unsigned char *p;
  size_t n, cap;
} buf;

static void put(buf *b, const void *data, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    assert_non_null(b->p);
  }
  if (n)
    memcpy(b->p + b->n, data, n);
  b->n += n;
}
static void put8(buf *b, unsigned v) {
  unsigned char c = (unsigned char)v;
  put(b, &c, 1);
}
static void put16(buf *b, unsigned v) {
  put8(b, v & 0xff);
  put8(b, (v >> 8) & 0xff);
}
static void put32(buf *b, uint32_t v) {
  put16(b, v & 0xffff);
  put16(b, v >> 16);
}
static void put64(buf *b, uint64_t v) {
  put32(b, (uint32_t)v);
  put32(b, (uint32_t)(v >> 32));
}
static void wr32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}
static void wr64(unsigned char *p, uint64_t v) {
  wr32(p, (uint32_t)v);
  wr32(p + 4, (uint32_t)(v >> 32));
}
static uint64_t rd64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

enum { SHT_PROGBITS = 1, SHT_SYMTAB = 2, SHT_STRTAB = 3, SHT_NOTE = 7, SHT_NOBITS = 8,
       SHT_CUDA_INFO = 0x70000000, SHT_CUDA_COMPAT = 0x70000086 };

typedef struct sec {
  char name[96];
  uint32_t type;
  buf data;          /* contents (ignored for NOBITS) */
  uint64_t size;     /* NOBITS size */
  uint32_t link, info;
  uint64_t entsize;
} sec;

/* Lays out a header, the sections' contents and the section header table
 * (last, as NVIDIA's tools do).  Section 0 must be the null section and
 * section 1 .shstrtab, whose contents are made here. */
static unsigned char *link_elf(sec *secs, int nsec, int osabi, int abi, uint32_t flags,
                               size_t *len) {
  buf shstr = {0};
  uint32_t name_off[64];
  put8(&shstr, 0);
  for (int i = 0; i < nsec; i++) {
    name_off[i] = i == 0 ? 0 : (uint32_t)shstr.n;
    if (i > 0)
      put(&shstr, secs[i].name, strlen(secs[i].name) + 1);
  }
  secs[1].data = shstr;
  buf out = {0};
  unsigned char ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1, (unsigned char)osabi,
                             (unsigned char)abi};
  put(&out, ident, 16);
  put16(&out, 2);     /* ET_EXEC */
  put16(&out, 190);   /* EM_CUDA */
  put32(&out, 1);     /* EV_CURRENT */
  put64(&out, 0);     /* entry */
  put64(&out, 0);     /* phoff */
  put64(&out, 0);     /* shoff, patched */
  put32(&out, flags);
  put16(&out, 64);    /* ehsize */
  put16(&out, 56);    /* phentsize */
  put16(&out, 0);     /* phnum */
  put16(&out, 64);    /* shentsize */
  put16(&out, (unsigned)nsec);
  put16(&out, 1);     /* shstrndx */
  uint64_t offs[64];
  for (int i = 0; i < nsec; i++) {
    while (out.n % 8)
      put8(&out, 0);
    offs[i] = out.n;
    if (secs[i].type != SHT_NOBITS && i > 0)
      put(&out, secs[i].data.p, secs[i].data.n);
  }
  while (out.n % 8)
    put8(&out, 0);
  wr64(out.p + 40, out.n);
  for (int i = 0; i < nsec; i++) {
    put32(&out, name_off[i]);
    put32(&out, secs[i].type);
    put64(&out, 0);
    put64(&out, 0);
    put64(&out, i == 0 ? 0 : offs[i]);
    put64(&out, secs[i].type == SHT_NOBITS ? secs[i].size : secs[i].data.n);
    put32(&out, secs[i].link);
    put32(&out, secs[i].info);
    put64(&out, 1);
    put64(&out, secs[i].entsize);
  }
  for (int i = 0; i < nsec; i++)
    free(secs[i].data.p);
  *len = out.n;
  return out.p;
}

/* What a synthetic cubin holds. */
typedef struct kspec {
  const char *name;
  int regs, frame, min_stack;
  uint32_t shared_section;
  unsigned max_threads; /* 0: no EIATTR_MAX_THREADS */
  int maxreg, params, barriers;
} kspec;

typedef struct spec {
  int abi;
  uint32_t flags;
  int compat_accel;        /* -1: no .nv.compat */
  const char *tool_arch;   /* "-arch sm_90a " in a tkinfo note, or NULL */
  int cuinfo_arch;         /* sm in a cuinfo note, 0: none */
  int reserved_section;    /* add .nv.shared.reserved.0 */
  int nk;
  kspec k[4];
} spec;

static void info_rec(buf *b, int fmt, int attr, unsigned v16) {
  put8(b, (unsigned)fmt);
  put8(b, (unsigned)attr);
  put16(b, v16);
}

static void note(buf *b, uint32_t type, const void *desc, uint32_t descsz) {
  put32(b, 12);
  put32(b, descsz);
  put32(b, type);
  put(b, "NVIDIA Corp\0", 12);
  put(b, desc, descsz);
  while (b->n % 4)
    put8(b, 0);
}

static unsigned char *make_cubin(const spec *s, size_t *len) {
  sec secs[64];
  memset(secs, 0, sizeof secs);
  int n = 0;
  n++; /* null */
  snprintf(secs[n++].name, sizeof secs[0].name, ".shstrtab");
  secs[1].type = SHT_STRTAB;
  int strtab = n++, symtab = n++;
  snprintf(secs[strtab].name, sizeof secs[0].name, ".strtab");
  secs[strtab].type = SHT_STRTAB;
  snprintf(secs[symtab].name, sizeof secs[0].name, ".symtab");
  secs[symtab].type = SHT_SYMTAB;
  secs[symtab].link = (uint32_t)strtab;
  secs[symtab].entsize = 24;
  int info = n++;
  snprintf(secs[info].name, sizeof secs[0].name, ".nv.info");
  secs[info].type = SHT_CUDA_INFO;
  secs[info].link = (uint32_t)symtab;
  if (s->compat_accel >= 0) {
    snprintf(secs[n].name, sizeof secs[0].name, ".nv.compat");
    secs[n].type = SHT_CUDA_COMPAT;
    info_rec(&secs[n].data, 2, 2, 1);                 /* an unrelated BVAL */
    info_rec(&secs[n].data, 2, 9, (unsigned)s->compat_accel);
    info_rec(&secs[n].data, 4, 0x0b, 8);              /* an SVAL */
    put64(&secs[n].data, 9);
    n++;
  }
  if (s->tool_arch || s->cuinfo_arch) {
    snprintf(secs[n].name, sizeof secs[0].name, ".note.nv.tkinfo");
    secs[n].type = SHT_NOTE;
    if (s->tool_arch) {
      buf d = {0};
      uint32_t hdr[6] = {2, 0, 1, 7, 54, 102};
      for (int i = 0; i < 6; i++)
        put32(&d, hdr[i]);
      const char strs[] = "\0ptxas\0Cuda compilation tools, release 13.0, V13.0.88\0branch\0";
      put(&d, strs, sizeof strs);
      put(&d, s->tool_arch, strlen(s->tool_arch) + 1);
      note(&secs[n].data, 2000, d.p, (uint32_t)d.n);
      free(d.p);
    }
    if (s->cuinfo_arch) {
      unsigned char d[8] = {2, 0, (unsigned char)s->cuinfo_arch, 0, 0x82, 0, 0, 0};
      note(&secs[n].data, 1000, d, 8);
    }
    n++;
  }
  if (s->reserved_section) {
    snprintf(secs[n].name, sizeof secs[0].name, ".nv.shared.reserved.0");
    secs[n].type = SHT_NOBITS;
    n++;
  }
  /* Symbols: null, a local device function (not a kernel), the kernels. */
  buf *st = &secs[strtab].data, *sy = &secs[symtab].data;
  put8(st, 0);
  for (int i = 0; i < 24; i++)
    put8(sy, 0);
  int text_first = n;
  uint32_t helper_name = (uint32_t)st->n;
  put(st, "$helper", 8);
  put32(sy, helper_name);
  put8(sy, 0x02); /* LOCAL FUNC */
  put8(sy, 0);
  put16(sy, (unsigned)text_first);
  put64(sy, 0);
  put64(sy, 16);
  /* .nv.info record for the helper: must be ignored. */
  info_rec(&secs[info].data, 4, 0x2f, 8);
  put32(&secs[info].data, 1);
  put32(&secs[info].data, 99);
  for (int k = 0; k < s->nk; k++) {
    const kspec *ks = &s->k[k];
    int text = n++;
    snprintf(secs[text].name, sizeof secs[0].name, ".text.%s", ks->name);
    secs[text].type = SHT_PROGBITS;
    for (int i = 0; i < 64 * (k + 1); i++)
      put8(&secs[text].data, (unsigned)i);
    uint32_t nm = (uint32_t)st->n;
    put(st, ks->name, strlen(ks->name) + 1);
    uint32_t symidx = (uint32_t)(sy->n / 24);
    put32(sy, nm);
    put8(sy, 0x12); /* GLOBAL FUNC */
    put8(sy, 0x10); /* STO_CUDA_ENTRY */
    put16(sy, (unsigned)text);
    put64(sy, 0);
    put64(sy, secs[text].data.n);
    buf *gi = &secs[info].data;
    info_rec(gi, 4, 0x2f, 8); /* REGCOUNT */
    put32(gi, symidx);
    put32(gi, (uint32_t)ks->regs);
    info_rec(gi, 4, 0x11, 8); /* FRAME_SIZE */
    put32(gi, symidx);
    put32(gi, (uint32_t)ks->frame);
    info_rec(gi, 4, 0x12, 8); /* MIN_STACK_SIZE */
    put32(gi, symidx);
    put32(gi, (uint32_t)ks->min_stack);
    int ki = n++;
    snprintf(secs[ki].name, sizeof secs[0].name, ".nv.info.%s", ks->name);
    secs[ki].type = SHT_CUDA_INFO;
    secs[ki].link = (uint32_t)symtab;
    secs[ki].info = (uint32_t)text;
    buf *pi = &secs[ki].data;
    info_rec(pi, 4, 0x37, 4); /* CUDA_API_VERSION */
    put32(pi, 0x82);
    info_rec(pi, 3, 0x1b, (unsigned)ks->maxreg);
    info_rec(pi, 2, 0x4c, (unsigned)ks->barriers);
    info_rec(pi, 3, 0x19, (unsigned)ks->params);
    info_rec(pi, 1, 0x50, 0); /* an NVAL */
    if (ks->max_threads) {
      info_rec(pi, 4, 0x05, 12);
      put32(pi, ks->max_threads);
      put32(pi, 1);
      put32(pi, 1);
    }
    if (ks->shared_section) {
      int sh = n++;
      snprintf(secs[sh].name, sizeof secs[0].name, ".nv.shared.%s", ks->name);
      secs[sh].type = SHT_NOBITS;
      secs[sh].size = ks->shared_section;
      secs[sh].info = (uint32_t)text;
    }
  }
  return link_elf(secs, n, s->abi == 8 ? 0x41 : 0x33, s->abi, s->flags, len);
}

/* The synthetic cubin most tests start from: sm_90a, ABI v2, two kernels. */
static const spec base_spec = {
    8, 0x06005a04, 1, "-arch sm_90a ", 90, 1, 2,
    {{"gemm", 128, 16, 16, 0x400 + 49152, 256, 255, 28, 1},
     {"_Z4tinyPf", 10, 0, 0, 0, 0, 32, 8, 0}}};

/* ---- reading what was written ----------------------------------------- */

static void test_synthetic(void **state) {
  (void)state;
  size_t n;
  unsigned char *img = make_cubin(&base_spec, &n);
  tl_cubin_info info;
  tl_error err;
  tl_status st = tl_cubin_inspect(img, n, &info, &err);
  if (st != TL_OK)
    fail_msg("%s", err.message);
  assert_int_equal(info.arch, 90);
  assert_int_equal(info.arch_specific, 1);
  assert_int_equal(info.family_specific, 0);
  assert_string_equal(info.target, "sm_90a");
  assert_int_equal(info.abi_version, 8);
  assert_int_equal(info.os_abi, 0x41);
  assert_int_equal(info.e_flags, 0x06005a04);
  assert_string_equal(info.toolkit, "Cuda compilation tools, release 13.0, V13.0.88");
  assert_int_equal(info.nkernels, 2);
  const tl_cubin_kernel *g = tl_cubin_find(&info, "gemm");
  assert_non_null(g);
  assert_int_equal(g->registers, 128);
  assert_int_equal(g->local_bytes, 16);
  assert_int_equal(g->min_stack_bytes, 16);
  assert_int_equal(g->max_stack_bytes, -1);
  assert_int_equal(g->shared_section_bytes, 1024 + 49152);
  assert_int_equal(g->shared_bytes, 49152); /* the reserved window taken off */
  assert_int_equal(g->max_threads[0], 256);
  assert_int_equal(g->max_threads[1], 1);
  assert_int_equal(g->req_threads[0], 0);
  assert_int_equal(g->max_registers, 255);
  assert_int_equal(g->param_bytes, 28);
  assert_int_equal(g->barriers, 1);
  assert_int_equal(g->code_bytes, 64);
  const tl_cubin_kernel *t = tl_cubin_find(&info, "_Z4tinyPf");
  assert_non_null(t);
  assert_int_equal(t->registers, 10);
  assert_int_equal(t->shared_bytes, 0);
  assert_int_equal(t->shared_section_bytes, 0);
  assert_int_equal(t->max_threads[0], 0);
  assert_int_equal(t->code_bytes, 128);
  assert_null(tl_cubin_find(&info, "$helper"));
  assert_null(tl_cubin_find(&info, "gem"));
  assert_int_equal(tl_cubin_check_target(&info, "sm_90a", &err), TL_OK);
  assert_int_equal(tl_cubin_check_target(&info, "sm_90", &err), TL_INVALID_ARG);
  assert_string_equal(err.message, "the cubin is for sm_90a, not sm_90");
  assert_int_equal(tl_cubin_check_target(&info, "sm_80", &err), TL_INVALID_ARG);
  assert_int_equal(tl_cubin_check_target(&info, "compute_90a", &err), TL_INVALID_ARG);
  tl_cubin_info_free(&info);
  assert_int_equal(info.nkernels, 0);
  assert_null(info.kernels);
  tl_cubin_info_free(NULL);
  free(img);
}

/* Where the 'a' comes from, and the shared-memory window rule. */
static void test_variants_and_window(void **state) {
  (void)state;
  static const struct {
    int abi;
    uint32_t flags;
    int compat;
    const char *tool;
    int reserved;
    const char *target;
    uint32_t shared; /* of gemm, whose section is 1024 + 49152 */
  } rows[] = {
      /* v2, sm_90: the note and .nv.compat decide */
      {8, 0x06005a04, 0, "-arch sm_90 ", 1, "sm_90", 49152},
      {8, 0x06005a04, 1, NULL, 1, "sm_90a", 49152},
      {8, 0x06005a04, -1, "-arch sm_90a ", 1, "sm_90a", 49152},
      {8, 0x06005a0c, -1, NULL, 1, "sm_90a", 49152},        /* EF_CUDA_ACCELERATORS (v2) */
      {8, 0x06005a04, -1, NULL, 0, "sm_90", 1024 + 49152}, /* no reserved marker */
      {8, 0x06006402, 0, "-arch sm_100f ", 1, "sm_100f", 49152},
      {8, 0x06007802, 1, "-arch sm_120a ", 1, "sm_120a", 49152},
      {8, 0x06006402, 0, "-arch sm_90a ", 1, "sm_100", 49152}, /* the note is not for it */
      /* v2, sm_80: no window before sm_90 */
      {8, 0x06005004, 0, "-arch sm_80 ", 1, "sm_80", 1024 + 49152},
      /* v1 (CUDA 12): sm in the low byte, 0x800 for 'a' */
      {7, 0x005a055a, -1, NULL, 1, "sm_90", 49152},
      {7, 0x005a0d5a, -1, NULL, 1, "sm_90a", 49152},
      {7, 0x00500550, -1, NULL, 1, "sm_80", 1024 + 49152},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    spec s = base_spec;
    s.abi = rows[i].abi;
    s.flags = rows[i].flags;
    s.compat_accel = rows[i].compat;
    s.tool_arch = rows[i].tool;
    s.cuinfo_arch = 0;
    s.reserved_section = rows[i].reserved;
    size_t n;
    unsigned char *img = make_cubin(&s, &n);
    tl_cubin_info info;
    tl_error err;
    if (tl_cubin_inspect(img, n, &info, &err) != TL_OK)
      fail_msg("row %zu: %s", i, err.message);
    assert_string_equal(info.target, rows[i].target);
    assert_int_equal(tl_cubin_find(&info, "gemm")->shared_bytes, rows[i].shared);
    assert_int_equal(tl_cubin_check_target(&info, rows[i].target, &err), TL_OK);
    if (rows[i].abi == 7)
      assert_int_equal(info.virtual_arch, (int)((rows[i].flags >> 16) & 0xff));
    tl_cubin_info_free(&info);
    free(img);
  }
}

/* e_flags decoding, layout by layout.  The v2 values are those NVRTC 13.0
 * writes (see cubin.h); the v1 ones follow LLVM's EF_CUDA_* definitions. */
static void test_decode_flags(void **state) {
  (void)state;
  static const struct {
    int abi;
    uint32_t flags;
    int arch, accel;
  } ok[] = {
      {8, 0x06004b04, 75, 0},  {8, 0x06005004, 80, 0},  {8, 0x06005604, 86, 0},
      {8, 0x06005704, 87, 0},  {8, 0x06005804, 88, 0},  {8, 0x06005904, 89, 0},
      {8, 0x06005a04, 90, 0},  {8, 0x06006402, 100, 0}, {8, 0x06006702, 103, 0},
      {8, 0x06006e02, 110, 0}, {8, 0x06007802, 120, 0}, {8, 0x06007902, 121, 0},
      {8, 0x0600640a, 100, 1}, {8, 0x00005a08, 90, 1},
      {7, 0x00500550, 80, 0},  {7, 0x00560556, 86, 0},  {7, 0x00590559, 89, 0},
      {7, 0x005a055a, 90, 0},  {7, 0x005a0d5a, 90, 1},  {7, 0x004b054b, 75, 0},
      {7, 0x00000514, 20, 0},
  };
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    int arch = -1, accel = -1;
    tl_error err;
    if (tl_cubin_decode_flags(ok[i].abi, ok[i].flags, &arch, &accel, &err) != TL_OK)
      fail_msg("0x%08x: %s", (unsigned)ok[i].flags, err.message);
    assert_int_equal(arch, ok[i].arch);
    assert_int_equal(accel, ok[i].accel);
  }
  static const struct {
    int abi;
    uint32_t flags;
    const char *msg;
  } bad[] = {
      {6, 0x06005a04, "unknown CUDA ELF ABI version 6"},
      {9, 0x06005a04, "unknown CUDA ELF ABI version 9"},
      {0, 0x0000005a, "unknown CUDA ELF ABI version 0"},
      {8, 0x00000004, "give no sm architecture (0)"},
      {8, 0x0000135a, "give no sm architecture (19)"},
      {7, 0x00005a00, "give no sm architecture (0)"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    tl_error err;
    int arch = 0, accel = 0;
    assert_int_equal(tl_cubin_decode_flags(bad[i].abi, bad[i].flags, &arch, &accel, &err),
                     TL_INVALID_ARG);
    if (!strstr(err.message, bad[i].msg))
      fail_msg("0x%08x: got '%s'", (unsigned)bad[i].flags, err.message);
  }
}

/* Real cubins from NVRTC, one per accepted sm_ target. */
static void test_nvrtc_every_arch(void **state) {
  (void)state;
  tl_nvrtc *nv = NULL;
  tl_error err;
  if (tl_nvrtc_open(&nv, &err) != TL_OK) {
    printf("skipping: %s\n", err.message);
    skip();
  }
  const char *const *targets;
  size_t nt;
  assert_int_equal(tl_nvrtc_targets(nv, &targets, &nt, &err), TL_OK);
  const char *src = "extern \"C\" __global__ void k(float *a) { a[threadIdx.x] *= 2.0f; }\n";
  int count = 0;
  for (size_t i = 0; i < nt; i++) {
    tl_target t;
    assert_int_equal(tl_target_parse(targets[i], &t, &err), TL_OK);
    if (t.binary == TL_BINARY_PTX)
      continue;
    tl_nvrtc_result res = {0};
    if (tl_nvrtc_compile(nv, src, "k.cu", targets[i], NULL, 0, &res, &err) != TL_OK)
      fail_msg("%s: %s", targets[i], err.message);
    tl_cubin_info info;
    if (tl_cubin_inspect(res.code, res.code_size, &info, &err) != TL_OK)
      fail_msg("%s: %s", targets[i], err.message);
    printf("%-8s ABI v%d e_flags 0x%08x -> %s\n", targets[i], info.abi_version - 6,
           (unsigned)info.e_flags, info.target);
    assert_int_equal(info.arch, t.arch);
    assert_string_equal(info.target, targets[i]);
    assert_int_equal(tl_cubin_check_target(&info, targets[i], &err), TL_OK);
    assert_non_null(tl_cubin_find(&info, "k"));
    tl_cubin_info_free(&info);
    tl_nvrtc_result_free(&res);
    count++;
  }
  assert_true(count >= 4);
  tl_nvrtc_close(nv);
}

/* ---- damage ------------------------------------------------------------ */

static void expect_reject(const unsigned char *img, size_t n, const char *what, const char *msg) {
  tl_cubin_info info;
  tl_error err;
  tl_status st = tl_cubin_inspect(img, n, &info, &err);
  if (st == TL_OK) {
    tl_cubin_info_free(&info);
    fail_msg("%s: accepted", what);
  }
  assert_int_equal(info.nkernels, 0);
  assert_null(info.kernels);
  if (msg && !strstr(err.message, msg))
    fail_msg("%s: message '%s' lacks '%s'", what, err.message, msg);
}

/* Patches one copy of img and checks it is rejected. */
static void patched(const unsigned char *img, size_t n, size_t at, const void *bytes, size_t len,
                    const char *what, const char *msg) {
  unsigned char *c = malloc(n);
  assert_non_null(c);
  memcpy(c, img, n);
  assert_true(at + len <= n);
  memcpy(c + at, bytes, len);
  expect_reject(c, n, what, msg);
  free(c);
}

static void test_header_damage(void **state) {
  (void)state;
  size_t n;
  unsigned char *img = make_cubin(&base_spec, &n);
  uint64_t shoff = rd64(img + 40);
  unsigned char b1;
  unsigned char b8[8];
  expect_reject(img, 0, "empty", "shorter than an ELF64 header");
  expect_reject(NULL, 0, "NULL", NULL);
  b1 = 'X';
  patched(img, n, 1, &b1, 1, "magic", "no ELF magic");
  b1 = 1;
  patched(img, n, 4, &b1, 1, "ELF32", "not ELF64");
  b1 = 2;
  patched(img, n, 5, &b1, 1, "big-endian", "not little-endian");
  b1 = 0;
  patched(img, n, 6, &b1, 1, "version", "unknown ELF version");
  b1 = 0;
  patched(img, n, 7, &b1, 1, "OS ABI", "OS ABI 0x00");
  b1 = 5;
  patched(img, n, 8, &b1, 1, "ABI version", "unknown CUDA ELF ABI version 5");
  unsigned char m[2] = {62, 0};
  patched(img, n, 18, m, 2, "x86-64 machine", "e_machine is 62");
  wr32(b8, 0x06000004);
  patched(img, n, 48, b8, 4, "no sm in e_flags", "no sm architecture");
  unsigned char sz[2] = {40, 0};
  patched(img, n, 58, sz, 2, "shentsize", "section header size 40");
  patched(img, n, 52, sz, 2, "ehsize", "e_ehsize 40");
  unsigned char zero2[2] = {0, 0};
  patched(img, n, 60, zero2, 2, "no sections", "no section headers");
  unsigned char many[2] = {0xff, 0xff};
  patched(img, n, 60, many, 2, "shnum too big", NULL);
  unsigned char idx[2] = {200, 0};
  patched(img, n, 62, idx, 2, "shstrndx", "section name table index 200");
  unsigned char idx3[2] = {3, 0}; /* .symtab is not a string table */
  patched(img, n, 62, idx3, 2, "shstrndx not strtab", "not a string table");
  wr64(b8, n);
  patched(img, n, 40, b8, 8, "shoff at end", "section header table");
  /* Program headers (the synthetic image has none): a table past the end,
   * a wrong entry size, a segment whose contents run past the end. */
  {
    unsigned char *c = malloc(n);
    assert_non_null(c);
    memcpy(c, img, n);
    wr64(c + 32, (uint64_t)n - 10); /* e_phoff */
    c[54] = 56;                      /* e_phentsize */
    c[56] = 1;                       /* e_phnum */
    expect_reject(c, n, "phoff past end", "program header table (1 entries");
    c[54] = 40;
    expect_reject(c, n, "phentsize", "program header size 40");
    /* a program header written over the padding-free start of the image
     * after the ELF header (the .shstrtab contents): p_filesz too big */
    c[54] = 56;
    wr64(c + 32, 64);
    memset(c + 64, 0, 56);
    wr64(c + 64 + 32, (uint64_t)n + 100);
    expect_reject(c, n, "segment past end", "segment 0");
    free(c);
  }
  wr64(b8, UINT64_MAX - 10);
  patched(img, n, 40, b8, 8, "shoff overflow", "section header table");

  /* Section headers: offsets, sizes, names, links. */
  size_t sh = (size_t)shoff;
  for (int i = 1; i < 6; i++) {
    unsigned char *h = img + sh + 64 * (size_t)i;
    (void)h;
    wr64(b8, UINT64_MAX - 7);
    patched(img, n, sh + 64 * (size_t)i + 24, b8, 8, "sh_offset overflow", "runs past the end");
    wr64(b8, (uint64_t)n + 1);
    patched(img, n, sh + 64 * (size_t)i + 32, b8, 8, "sh_size past end", "runs past the end");
    wr32(b8, 0x7fffffff);
    patched(img, n, sh + 64 * (size_t)i, b8, 4, "sh_name", "outside the section name table");
  }
  /* .symtab (section 3): entsize, link. */
  wr64(b8, 16);
  patched(img, n, sh + 64 * 3 + 56, b8, 8, "symtab entsize", "symbol table entry size 16");
  wr32(b8, 77);
  patched(img, n, sh + 64 * 3 + 40, b8, 4, "symtab link", "not a string table");
  wr32(b8, 3);
  patched(img, n, sh + 64 * 3 + 40, b8, 4, "symtab link to itself", "not a string table");
  unsigned char nul4[4] = {0, 0, 0, 0};
  patched(img, n, sh + 64 * 3 + 4, nul4, 4, "no symtab", "no symbol table");
  free(img);
}

/* Damage inside sections: symbols, .nv.info records, notes. */
static void test_content_damage(void **state) {
  (void)state;
  size_t n;
  unsigned char *img = make_cubin(&base_spec, &n);
  size_t sh = (size_t)rd64(img + 40);
  size_t symoff = (size_t)rd64(img + sh + 64 * 3 + 24);
  size_t stroff_sz = (size_t)rd64(img + sh + 64 * 2 + 32);
  unsigned char b[8];
  /* The kernel symbol (index 2): name out of range, section out of range. */
  wr32(b, (uint32_t)stroff_sz + 5);
  patched(img, n, symoff + 24 * 2, b, 4, "symbol name", "name outside its string table");
  unsigned char shx[2] = {0xf0, 0x00};
  patched(img, n, symoff + 24 * 2 + 6, shx, 2, "symbol section", "section index 240 out of range");
  unsigned char shx0[2] = {0, 0};
  patched(img, n, symoff + 24 * 2 + 6, shx0, 2, "symbol section 0", "out of range");
  /* Two kernels of one name: point the second kernel symbol's name at the
   * first's. */
  unsigned char nm[4];
  memcpy(nm, img + symoff + 24 * 2, 4);
  patched(img, n, symoff + 24 * 3, nm, 4, "kernel twice", "kernel 'gemm' is defined twice");
  /* The .nv.info section (4): an SVAL whose size runs past the section. */
  size_t infooff = (size_t)rd64(img + sh + 64 * 4 + 24);
  unsigned char big[2] = {0xff, 0x7f};
  patched(img, n, infooff + 2, big, 2, "SVAL size", "runs past its section");
  /* An unknown record format stops parsing, without error. */
  unsigned char *c = malloc(n);
  memcpy(c, img, n);
  c[infooff] = 0x09;
  tl_cubin_info info;
  tl_error err;
  assert_int_equal(tl_cubin_inspect(c, n, &info, &err), TL_OK);
  assert_int_equal(tl_cubin_find(&info, "gemm")->registers, -1);
  tl_cubin_info_free(&info);
  free(c);
  /* Notes: a size that runs past the section. */
  size_t noteoff = (size_t)rd64(img + sh + 64 * 6 + 24);
  wr32(b, 0x10000);
  patched(img, n, noteoff + 4, b, 4, "note descsz", "runs past its section");
  /* A cuinfo note that disagrees with e_flags. */
  spec s = base_spec;
  s.cuinfo_arch = 80;
  size_t n2;
  unsigned char *img2 = make_cubin(&s, &n2);
  expect_reject(img2, n2, "cuinfo mismatch", "the cuinfo note says sm_80 but e_flags say sm_90");
  free(img2);
  free(img);
}

/* Every truncation of a cubin is rejected (the section headers come last). */
static void truncations(const unsigned char *img, size_t n, const char *what) {
  for (size_t len = 0; len < n; len++) {
    char label[64];
    snprintf(label, sizeof label, "%s truncated to %zu", what, len);
    unsigned char *c = malloc(len ? len : 1); /* exact size, for ASan */
    assert_non_null(c);
    memcpy(c, img, len);
    expect_reject(c, len, label, NULL);
    free(c);
  }
}

/* Random mutations: must not crash; what is accepted must be coherent. */
static void mutations(const unsigned char *img, size_t n, unsigned seed, int rounds) {
  unsigned char *c = malloc(n);
  assert_non_null(c);
  srand(seed);
  int accepted = 0;
  for (int r = 0; r < rounds; r++) {
    memcpy(c, img, n);
    int flips = 1 + rand() % 8;
    for (int f = 0; f < flips; f++) {
      size_t at = (size_t)rand() % n;
      switch (rand() % 4) {
      case 0: c[at] ^= (unsigned char)(1u << (rand() % 8)); break;
      case 1: c[at] = (unsigned char)rand(); break;
      case 2: c[at] = 0xff; break;
      default: c[at] = 0; break;
      }
    }
    tl_cubin_info info;
    tl_error err;
    if (tl_cubin_inspect(c, n, &info, &err) == TL_OK) {
      accepted++;
      assert_true(info.arch >= 20 && info.arch <= 255);
      assert_true(info.nkernels <= TL_CUBIN_MAX_KERNELS);
      for (size_t k = 0; k < info.nkernels; k++) {
        assert_non_null(info.kernels[k].name);
        assert_true(strlen(info.kernels[k].name) < TL_CUBIN_MAX_NAME);
      }
      tl_cubin_info_free(&info);
    } else {
      assert_true(err.code != TL_OK);
      assert_true(err.message[0] != 0);
    }
  }
  printf("mutations: %d of %d damaged copies still read as cubins\n", accepted, rounds);
  free(c);
}

static void test_truncation_and_mutation(void **state) {
  (void)state;
  size_t n;
  unsigned char *img = make_cubin(&base_spec, &n);
  truncations(img, n, "synthetic");
  mutations(img, n, 12345, 20000);
  free(img);
  /* The same on a real cubin, when NVRTC is here. */
  tl_nvrtc *nv = NULL;
  tl_error err;
  if (tl_nvrtc_open(&nv, &err) != TL_OK) {
    printf("%s: real-cubin damage not tested\n", err.message);
    return;
  }
  static const char *const targets[] = {"sm_80", "sm_90a", "sm_120"};
  for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
    if (!tl_nvrtc_accepts(nv, targets[i]))
      continue;
    tl_nvrtc_result res = {0};
    assert_int_equal(tl_nvrtc_compile(nv,
                                      "extern \"C\" __global__ void k(float *a) {\n"
                                      "  __shared__ float s[32]; s[threadIdx.x & 31] = a[0];\n"
                                      "  __syncthreads(); a[threadIdx.x] = s[threadIdx.x ^ 1]; }\n",
                                      "k.cu", targets[i], NULL, 0, &res, &err),
                     TL_OK);
    truncations(res.code, res.code_size, targets[i]);
    mutations(res.code, res.code_size, 777 + (unsigned)i, 10000);
    tl_nvrtc_result_free(&res);
  }
  tl_nvrtc_close(nv);
}

static void test_limits(void **state) {
  (void)state;
  tl_cubin_info info;
  tl_error err;
  unsigned char small[64] = {0};
  assert_int_equal(tl_cubin_inspect(small, (size_t)TL_CUBIN_MAX_BYTES + 1, &info, &err),
                   TL_TOO_LARGE);
  assert_int_equal(tl_cubin_inspect(small, sizeof small, NULL, &err), TL_INVALID_ARG);
  assert_null(tl_cubin_find(NULL, "x"));
  assert_int_equal(tl_cubin_check_target(NULL, "sm_80", &err), TL_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_synthetic),
      cmocka_unit_test(test_variants_and_window),
      cmocka_unit_test(test_decode_flags),
      cmocka_unit_test(test_nvrtc_every_arch),
      cmocka_unit_test(test_header_damage),
      cmocka_unit_test(test_content_damage),
      cmocka_unit_test(test_truncation_and_mutation),
      cmocka_unit_test(test_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
