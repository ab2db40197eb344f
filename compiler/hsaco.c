/*
 * hsaco.c - the code-object reader of hsaco.h: ELF header and e_flags
 * checks, section, segment and symbol tables, the AMDGPU notes, a
 * MessagePack-to-JSON reader for the metadata note, the metadata's kernels
 * and arguments, and each kernel's descriptor checked against its entry.
 *
 * The ELF64 structure itself (header, section and program header tables,
 * string tables, symbols, notes) is read by elf.c, shared with the cubin
 * reader; a section's contents are only touched through the (data, n) pair
 * that tl_elf_load checked against the image once.  The MessagePack reader is
 * recursive with a depth limit and checks every length against the bytes
 * left before it reads or allocates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amdgpu.h"
#include "elf.h"
#include "hsaco.h"

enum {
  SHN_UNDEF = 0,
  KD_SIZE = 64,
  KD_WAVE32 = 1 << 10, /* kernel_code_properties: ENABLE_WAVEFRONT_SIZE32 */
  MAX_SYMBOLS = 1 << 20,
};

#define rd16 tl_elf_rd16
#define rd32 tl_elf_rd32
#define rd64 tl_elf_rd64
#define in_range tl_elf_in_range

typedef tl_elf_section section;

typedef struct reader {
  tl_elf elf;
  tl_error *err;
} reader;

#define bad(r, ...) tl_elf_bad(&(r)->elf, __VA_ARGS__)

static char *dupn(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = 0;
  }
  return d;
}

/* ---- MessagePack -------------------------------------------------------------- */

typedef struct mp {
  const unsigned char *p;
  size_t n, off;
  tl_error *err;
} mp;

static tl_status mp_bad(mp *m, const char *what) {
  return tl_error_set(m->err, TL_INVALID_ARG, "bad MessagePack at byte %zu: %s", m->off, what);
}

/* Reads a big-endian unsigned of w bytes (1, 2, 4, 8). */
static int mp_uint(mp *m, int w, uint64_t *v) {
  if (m->n - m->off < (size_t)w)
    return 0;
  uint64_t x = 0;
  for (int i = 0; i < w; i++)
    x = x << 8 | m->p[m->off + (size_t)i];
  m->off += (size_t)w;
  *v = x;
  return 1;
}

static tl_status mp_value(mp *m, int depth, json_t **out);

static tl_status mp_string(mp *m, uint64_t len, json_t **out) {
  if (len > m->n - m->off)
    return mp_bad(m, "a string runs past the end");
  json_t *s = json_stringn((const char *)m->p + m->off, (size_t)len);
  if (!s)
    return mp_bad(m, "a string is not UTF-8");
  m->off += (size_t)len;
  *out = s;
  return TL_OK;
}

static tl_status mp_array(mp *m, uint64_t count, int depth, json_t **out) {
  if (count > m->n - m->off) /* every element takes at least one byte */
    return mp_bad(m, "an array is longer than the bytes left");
  json_t *a = json_array();
  if (!a)
    return tl_error_set(m->err, TL_NOMEM, "out of memory");
  for (uint64_t i = 0; i < count; i++) {
    json_t *v = NULL;
    tl_status st = mp_value(m, depth + 1, &v);
    if (st != TL_OK || json_array_append_new(a, v) != 0) {
      json_decref(a);
      return st != TL_OK ? st : tl_error_set(m->err, TL_NOMEM, "out of memory");
    }
  }
  *out = a;
  return TL_OK;
}

static tl_status mp_map(mp *m, uint64_t count, int depth, json_t **out) {
  if (count > (m->n - m->off) / 2)
    return mp_bad(m, "a map is longer than the bytes left");
  json_t *o = json_object();
  if (!o)
    return tl_error_set(m->err, TL_NOMEM, "out of memory");
  for (uint64_t i = 0; i < count; i++) {
    size_t at = m->off;
    json_t *k = NULL, *v = NULL;
    tl_status st = mp_value(m, depth + 1, &k);
    if (st == TL_OK && !json_is_string(k)) {
      m->off = at;
      st = mp_bad(m, "a map key is not a string");
    }
    if (st == TL_OK && strlen(json_string_value(k)) != json_string_length(k)) {
      m->off = at;
      st = mp_bad(m, "a map key holds a NUL byte");
    }
    if (st == TL_OK && json_object_get(o, json_string_value(k))) {
      m->off = at;
      st = mp_bad(m, "a map key appears twice");
    }
    if (st == TL_OK)
      st = mp_value(m, depth + 1, &v);
    if (st == TL_OK && json_object_set_new(o, json_string_value(k), v) != 0) {
      v = NULL;
      st = tl_error_set(m->err, TL_NOMEM, "out of memory");
    }
    json_decref(k);
    if (st != TL_OK) {
      json_decref(o);
      return st;
    }
  }
  *out = o;
  return TL_OK;
}

static tl_status mp_value(mp *m, int depth, json_t **out) {
  *out = NULL;
  if (depth > TL_MSGPACK_MAX_DEPTH)
    return mp_bad(m, "nested too deeply");
  if (m->off >= m->n)
    return mp_bad(m, "the data ends where a value was expected");
  unsigned b = m->p[m->off++];
  uint64_t v;
  if (b <= 0x7f)
    return (*out = json_integer((json_int_t)b)) ? TL_OK : tl_error_set(m->err, TL_NOMEM, "out of memory");
  if (b >= 0xe0)
    return (*out = json_integer((json_int_t)(int8_t)b)) ? TL_OK : tl_error_set(m->err, TL_NOMEM, "out of memory");
  if ((b & 0xf0) == 0x80)
    return mp_map(m, b & 0x0f, depth, out);
  if ((b & 0xf0) == 0x90)
    return mp_array(m, b & 0x0f, depth, out);
  if ((b & 0xe0) == 0xa0)
    return mp_string(m, b & 0x1f, out);
  switch (b) {
  case 0xc0: *out = json_null(); return TL_OK;
  case 0xc2: *out = json_false(); return TL_OK;
  case 0xc3: *out = json_true(); return TL_OK;
  case 0xca:
  case 0xcb: {
    if (!mp_uint(m, b == 0xca ? 4 : 8, &v))
      return mp_bad(m, "a float runs past the end");
    double d;
    if (b == 0xca) {
      uint32_t u = (uint32_t)v;
      float f;
      memcpy(&f, &u, sizeof f);
      d = f;
    } else {
      memcpy(&d, &v, sizeof d);
    }
    *out = json_real(d);
    if (!*out)
      return mp_bad(m, "a float is not finite");
    return TL_OK;
  }
  case 0xcc: case 0xcd: case 0xce: case 0xcf: {
    int w = 1 << (b - 0xcc);
    if (!mp_uint(m, w, &v))
      return mp_bad(m, "an integer runs past the end");
    if (v > (uint64_t)INT64_MAX)
      return mp_bad(m, "an integer does not fit 64 signed bits");
    return (*out = json_integer((json_int_t)v)) ? TL_OK : tl_error_set(m->err, TL_NOMEM, "out of memory");
  }
  case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
    int w = 1 << (b - 0xd0);
    if (!mp_uint(m, w, &v))
      return mp_bad(m, "an integer runs past the end");
    int64_t s = w == 1 ? (int8_t)v : w == 2 ? (int16_t)v : w == 4 ? (int32_t)v : (int64_t)v;
    return (*out = json_integer((json_int_t)s)) ? TL_OK : tl_error_set(m->err, TL_NOMEM, "out of memory");
  }
  case 0xd9: case 0xda: case 0xdb:
    if (!mp_uint(m, 1 << (b - 0xd9), &v))
      return mp_bad(m, "a string length runs past the end");
    return mp_string(m, v, out);
  case 0xdc: case 0xdd:
    if (!mp_uint(m, b == 0xdc ? 2 : 4, &v))
      return mp_bad(m, "an array length runs past the end");
    return mp_array(m, v, depth, out);
  case 0xde: case 0xdf:
    if (!mp_uint(m, b == 0xde ? 2 : 4, &v))
      return mp_bad(m, "a map length runs past the end");
    return mp_map(m, v, depth, out);
  default:
    m->off--;
    return mp_bad(m, b == 0xc1 ? "the byte 0xc1 is never used" : "bin and ext values are not read here");
  }
}

tl_status tl_msgpack_to_json(const void *bytes, size_t n, json_t **out, tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_msgpack_to_json: NULL argument");
  *out = NULL;
  if (!bytes && n)
    return tl_error_set(err, TL_INVALID_ARG, "tl_msgpack_to_json: NULL bytes");
  if (n > TL_MSGPACK_MAX_BYTES)
    return tl_error_set(err, TL_INVALID_ARG, "MessagePack of %zu bytes, over the limit of %u", n,
                        TL_MSGPACK_MAX_BYTES);
  mp m = {bytes, n, 0, err};
  json_t *v = NULL;
  tl_status st = mp_value(&m, 0, &v);
  if (st != TL_OK)
    return st;
  if (m.off != n) {
    json_decref(v);
    return mp_bad(&m, "bytes follow the value");
  }
  *out = v;
  return TL_OK;
}

/* ---- ELF ------------------------------------------------------------------------- */

/* Finds the metadata note (there must be exactly one) and its description. */
static tl_status find_metadata(reader *r, const unsigned char **desc, size_t *dn) {
  int found = 0;
  for (size_t i = 0; i < r->elf.nsecs; i++) {
    const section *s = &r->elf.secs[i];
    if (s->type != TL_SHT_NOTE)
      continue;
    size_t off = 0;
    tl_elf_note note;
    int step;
    while ((step = tl_elf_next_note(s, &off, &note)) > 0) {
      if (note.namesz == 7 && memcmp(note.name, "AMDGPU", 7) == 0 && note.type == TL_NT_AMDGPU_METADATA) {
        if (found++)
          return bad(r, "two NT_AMDGPU_METADATA notes");
        *desc = note.desc;
        *dn = note.descsz;
      }
    }
    if (step < 0)
      return bad(r, "a note in %s runs past its section", s->name);
  }
  if (!found)
    return bad(r, "no NT_AMDGPU_METADATA note (owner \"AMDGPU\", type %d)", TL_NT_AMDGPU_METADATA);
  return TL_OK;
}

/* Looks up a defined symbol by name in .symtab or .dynsym: its value and size. */
static int find_symbol(reader *r, const char *want, unsigned type, uint64_t *value, uint64_t *size) {
  for (size_t i = 0; i < r->elf.nsecs; i++) {
    const section *s = &r->elf.secs[i];
    if ((s->type != TL_SHT_SYMTAB && s->type != TL_SHT_DYNSYM) || s->link >= r->elf.nsecs)
      continue;
    size_t count = s->n / TL_ELF_SYM_SIZE;
    if (count > MAX_SYMBOLS)
      count = MAX_SYMBOLS;
    for (size_t k = 1; k < count; k++) {
      tl_elf_sym sym;
      if (!tl_elf_symbol(&r->elf, s, k, &sym) || strcmp(sym.name, want) != 0 || sym.type != type ||
          sym.shndx == SHN_UNDEF)
        continue;
      *value = sym.value;
      *size = sym.size;
      return 1;
    }
  }
  return 0;
}

/* The n bytes at virtual address addr, from the section holding them. */
static const unsigned char *bytes_at(reader *r, uint64_t addr, size_t n) {
  for (size_t i = 0; i < r->elf.nsecs; i++) {
    const section *s = &r->elf.secs[i];
    if (!s->data || s->type == TL_SHT_NOBITS || addr < s->addr)
      continue;
    if (in_range(addr - s->addr, n, s->n))
      return s->data + (addr - s->addr);
  }
  return NULL;
}

/* ---- metadata -------------------------------------------------------------------- */

/* An integer member of obj in [lo, hi]; absent gives *v = dflt when optional. */
static tl_status md_int(reader *r, json_t *obj, const char *where, const char *key, int optional, int64_t lo,
                        int64_t hi, int64_t dflt, int64_t *v) {
  json_t *x = json_object_get(obj, key);
  if (!x) {
    if (optional) {
      *v = dflt;
      return TL_OK;
    }
    return bad(r, "%s lacks %s", where, key);
  }
  if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
    return bad(r, "%s has %s that is not an integer from %lld to %lld", where, key, (long long)lo, (long long)hi);
  *v = json_integer_value(x);
  return TL_OK;
}

static tl_status md_str(reader *r, json_t *obj, const char *where, const char *key, int optional,
                        const char **v) {
  json_t *x = json_object_get(obj, key);
  *v = NULL;
  if (!x)
    return optional ? TL_OK : bad(r, "%s lacks %s", where, key);
  if (!json_is_string(x) || json_string_length(x) == 0 || strlen(json_string_value(x)) != json_string_length(x))
    return bad(r, "%s has %s that is not a non-empty string", where, key);
  *v = json_string_value(x);
  return TL_OK;
}

static tl_status read_args(reader *r, json_t *kern, const char *kname, tl_hsaco_kernel *k) {
  json_t *args = json_object_get(kern, ".args");
  if (!args)
    return TL_OK;
  if (!json_is_array(args))
    return bad(r, "kernel %s: .args is not an array", kname);
  size_t n = json_array_size(args);
  if (n > TL_HSACO_MAX_ARGS)
    return tl_error_set(r->err, TL_LIMIT, "kernel %s has %zu arguments, more than %d", kname, n, TL_HSACO_MAX_ARGS);
  if (n == 0)
    return TL_OK;
  k->args = calloc(n, sizeof *k->args);
  if (!k->args)
    return tl_error_set(r->err, TL_NOMEM, "out of memory");
  k->nargs = n;
  int explicit_done = 0;
  for (size_t i = 0; i < n; i++) {
    json_t *a = json_array_get(args, i);
    char where[96];
    snprintf(where, sizeof where, "kernel %.40s argument %zu", kname, i);
    if (!json_is_object(a))
      return bad(r, "%s is not a map", where);
    tl_hsaco_arg *x = &k->args[i];
    int64_t v;
    tl_status st;
    if ((st = md_int(r, a, where, ".offset", 0, 0, UINT32_MAX, 0, &v)) != TL_OK)
      return st;
    x->offset = (uint32_t)v;
    if ((st = md_int(r, a, where, ".size", 0, 0, UINT32_MAX, 0, &v)) != TL_OK)
      return st;
    x->size = (uint32_t)v;
    if ((uint64_t)x->offset + x->size > k->kernarg_segment_size)
      return bad(r, "%s (offset %u, size %u) lies outside the kernarg segment (%u bytes)", where, x->offset,
                 x->size, k->kernarg_segment_size);
    const char *s;
    if ((st = md_str(r, a, where, ".value_kind", 0, &s)) != TL_OK)
      return st;
    if (strlen(s) >= sizeof x->value_kind)
      return bad(r, "%s has a .value_kind longer than %zu bytes", where, sizeof x->value_kind - 1);
    snprintf(x->value_kind, sizeof x->value_kind, "%s", s);
    if ((st = md_str(r, a, where, ".address_space", 1, &s)) != TL_OK)
      return st;
    if (s)
      snprintf(x->address_space, sizeof x->address_space, "%s", s);
    if ((st = md_str(r, a, where, ".name", 1, &s)) != TL_OK)
      return st;
    if (s && !(x->name = dupn(s, strlen(s))))
      return tl_error_set(r->err, TL_NOMEM, "out of memory");
    if (strncmp(x->value_kind, "hidden_", 7) == 0)
      explicit_done = 1;
    else if (!explicit_done)
      k->nexplicit++;
  }
  return TL_OK;
}

static tl_status read_kernel(reader *r, json_t *kern, size_t idx, int mach_wave, tl_hsaco_kernel *k) {
  char where[96];
  snprintf(where, sizeof where, "amdhsa.kernels[%zu]", idx);
  if (!json_is_object(kern))
    return bad(r, "%s is not a map", where);
  const char *name, *symbol;
  tl_status st;
  if ((st = md_str(r, kern, where, ".name", 0, &name)) != TL_OK ||
      (st = md_str(r, kern, where, ".symbol", 0, &symbol)) != TL_OK)
    return st;
  if (!(k->name = dupn(name, strlen(name))) || !(k->symbol = dupn(symbol, strlen(symbol))))
    return tl_error_set(r->err, TL_NOMEM, "out of memory");
  snprintf(where, sizeof where, "kernel %.60s", name);
  struct {
    const char *key;
    int optional;
    int64_t lo, hi, dflt;
    int64_t v;
  } f[] = {
      {".sgpr_count", 0, 0, 1024, 0, 0},
      {".vgpr_count", 0, 0, 1024, 0, 0},
      {".agpr_count", 1, 0, 1024, -1, 0},
      {".sgpr_spill_count", 1, 0, INT32_MAX, -1, 0},
      {".vgpr_spill_count", 1, 0, INT32_MAX, -1, 0},
      {".group_segment_fixed_size", 0, 0, UINT32_MAX, 0, 0},
      {".private_segment_fixed_size", 0, 0, UINT32_MAX, 0, 0},
      {".kernarg_segment_size", 0, 0, UINT32_MAX, 0, 0},
      {".kernarg_segment_align", 0, 1, 4096, 0, 0},
      {".wavefront_size", 0, 32, 64, 0, 0},
      {".max_flat_workgroup_size", 0, 1, 1024, 0, 0},
  };
  for (size_t i = 0; i < sizeof f / sizeof *f; i++)
    if ((st = md_int(r, kern, where, f[i].key, f[i].optional, f[i].lo, f[i].hi, f[i].dflt, &f[i].v)) != TL_OK)
      return st;
  k->sgpr_count = (int)f[0].v;
  k->vgpr_count = (int)f[1].v;
  k->agpr_count = (int)f[2].v;
  k->sgpr_spill_count = (int)f[3].v;
  k->vgpr_spill_count = (int)f[4].v;
  k->group_segment_fixed_size = (uint32_t)f[5].v;
  k->private_segment_fixed_size = (uint32_t)f[6].v;
  k->kernarg_segment_size = (uint32_t)f[7].v;
  k->kernarg_segment_align = (uint32_t)f[8].v;
  k->wavefront_size = (int)f[9].v;
  k->max_flat_workgroup_size = (int)f[10].v;
  if (k->wavefront_size != 32 && k->wavefront_size != 64)
    return bad(r, "%s has .wavefront_size %d (32 or 64 expected)", where, k->wavefront_size);
  if (mach_wave == 64 && k->wavefront_size != 64)
    return bad(r, "%s has .wavefront_size %d on a wave64-only processor", where, k->wavefront_size);
  json_t *dyn = json_object_get(kern, ".uses_dynamic_stack");
  if (dyn && !json_is_boolean(dyn))
    return bad(r, "%s has .uses_dynamic_stack that is not a boolean", where);
  k->uses_dynamic_stack = dyn && json_is_true(dyn);
  if ((st = read_args(r, kern, name, k)) != TL_OK)
    return st;

  /* The kernel descriptor must agree with the note. */
  uint64_t addr = 0, size = 0, faddr = 0, fsize = 0;
  if (!find_symbol(r, symbol, TL_STT_OBJECT, &addr, &size))
    return bad(r, "%s: its descriptor symbol %.80s is not defined", where, symbol);
  if (size != KD_SIZE)
    return bad(r, "%s: its descriptor %.80s is %llu bytes, not %d", where, symbol, (unsigned long long)size, KD_SIZE);
  const unsigned char *kd = bytes_at(r, addr, KD_SIZE);
  if (!kd)
    return bad(r, "%s: its descriptor %.80s lies outside every section", where, symbol);
  uint32_t group = rd32(kd), priv = rd32(kd + 4), kernarg = rd32(kd + 8);
  if (group != k->group_segment_fixed_size || priv != k->private_segment_fixed_size ||
      kernarg != k->kernarg_segment_size)
    return bad(r,
               "%s: the descriptor's segment sizes (group %u, private %u, kernarg %u) disagree with the metadata "
               "(%u, %u, %u)",
               where, group, priv, kernarg, k->group_segment_fixed_size, k->private_segment_fixed_size,
               k->kernarg_segment_size);
  k->kd_rsrc3 = rd32(kd + 44);
  k->kd_rsrc1 = rd32(kd + 48);
  k->kd_rsrc2 = rd32(kd + 52);
  k->kd_code_properties = rd16(kd + 56);
  int kd_wave = (k->kd_code_properties & KD_WAVE32) ? 32 : 64;
  if (kd_wave != k->wavefront_size)
    return bad(r, "%s: the descriptor says wave%d, the metadata wave%d", where, kd_wave, k->wavefront_size);
  if (!find_symbol(r, name, TL_STT_FUNC, &faddr, &fsize))
    return bad(r, "%s: no code symbol of that name", where);
  int64_t entry = (int64_t)rd64(kd + 16);
  if ((uint64_t)((int64_t)addr + entry) != faddr)
    return bad(r, "%s: the descriptor's code entry (descriptor %+lld) is not the kernel's code", where,
               (long long)entry);
  return TL_OK;
}

static const char *feature_name(unsigned v) {
  switch (v) {
  case 1: return "any";
  case 2: return "off";
  case 3: return "on";
  default: return "unsupported";
  }
}

static tl_status read_metadata(reader *r, const unsigned char *desc, size_t dn, tl_hsaco_info *out) {
  json_t *md = NULL;
  tl_error merr;
  tl_status st = tl_msgpack_to_json(desc, dn, &md, &merr);
  if (st == TL_NOMEM)
    return tl_error_set(r->err, TL_NOMEM, "out of memory");
  if (st != TL_OK)
    return bad(r, "its metadata note: %s", merr.message);
  if (!json_is_object(md)) {
    json_decref(md);
    return bad(r, "its metadata note is not a map");
  }
  json_t *ver = json_object_get(md, "amdhsa.version");
  if (!json_is_array(ver) || json_array_size(ver) != 2 || !json_is_integer(json_array_get(ver, 0)) ||
      !json_is_integer(json_array_get(ver, 1))) {
    json_decref(md);
    return bad(r, "amdhsa.version is not [major, minor]");
  }
  out->md_version[0] = (int)json_integer_value(json_array_get(ver, 0));
  out->md_version[1] = (int)json_integer_value(json_array_get(ver, 1));
  const char *target;
  if ((st = md_str(r, md, "the metadata", "amdhsa.target", 0, &target)) != TL_OK) {
    json_decref(md);
    return st;
  }
  const char *pre = "amdgcn-amd-amdhsa--";
  size_t pl = strlen(pre), ml = strlen(out->processor);
  if (strncmp(target, pre, pl) != 0 || strncmp(target + pl, out->processor, ml) != 0 ||
      (target[pl + ml] != 0 && target[pl + ml] != ':')) {
    st = bad(r, "amdhsa.target \"%.100s\" is not for %s, the processor in e_flags", target, out->processor);
    json_decref(md);
    return st;
  }
  snprintf(out->target_id, sizeof out->target_id, "%s", target);
  json_t *kernels = json_object_get(md, "amdhsa.kernels");
  if (!json_is_array(kernels)) {
    json_decref(md);
    return bad(r, "amdhsa.kernels is missing or not an array");
  }
  size_t nk = json_array_size(kernels);
  if (nk > TL_HSACO_MAX_KERNELS) {
    json_decref(md);
    return tl_error_set(r->err, TL_LIMIT, "%zu kernels, more than %d", nk, TL_HSACO_MAX_KERNELS);
  }
  if (nk) {
    out->kernels = calloc(nk, sizeof *out->kernels);
    if (!out->kernels) {
      json_decref(md);
      return tl_error_set(r->err, TL_NOMEM, "out of memory");
    }
  }
  const tl_target *t = tl_target_by_amd_mach(out->mach);
  for (size_t i = 0; i < nk; i++) {
    out->nkernels = i + 1;
    if ((st = read_kernel(r, json_array_get(kernels, i), i, t && t->warp == 64 ? 64 : 0, &out->kernels[i])) !=
        TL_OK) {
      json_decref(md);
      return st;
    }
    for (size_t j = 0; j < i; j++)
      if (strcmp(out->kernels[j].name, out->kernels[i].name) == 0) {
        st = bad(r, "kernel %.80s is listed twice", out->kernels[i].name);
        json_decref(md);
        return st;
      }
  }
  json_decref(md);
  return TL_OK;
}

/* ---- the whole ------------------------------------------------------------------- */

tl_status tl_hsaco_inspect(const void *bytes, size_t n, tl_hsaco_info *out, tl_error *err) {
  if (!out)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hsaco_inspect: NULL argument");
  memset(out, 0, sizeof *out);
  if (!bytes)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hsaco_inspect: NULL bytes");
  if (n > TL_HSACO_MAX_BYTES)
    return tl_error_set(err, TL_TOO_LARGE, "a code object of %zu bytes is over the limit of %u", n,
                        TL_HSACO_MAX_BYTES);
  reader r = {.err = err};
  tl_elf *e = &r.elf;
  tl_status st = tl_elf_open(e, bytes, n, "not an AMDGPU code object", err);
  if (st != TL_OK)
    return st;
  if (e->os_abi != TL_ELFOSABI_AMDGPU_HSA)
    return bad(&r, "OS ABI %u, not AMDGPU HSA (%d)", e->os_abi, TL_ELFOSABI_AMDGPU_HSA);
  if (e->abi_version < 2 || e->abi_version > 4)
    return bad(&r, "ABI version %u: code object v%u (v4 to v6 are read)", e->abi_version, e->abi_version + 2u);
  if (e->machine != TL_EM_AMDGPU)
    return bad(&r, "e_machine is %u, not EM_AMDGPU (%d)", e->machine, TL_EM_AMDGPU);
  if (e->type != TL_ET_DYN)
    return bad(&r, "ELF type %u, not a shared object (%d)", e->type, TL_ET_DYN);
  out->abi_version = (int)e->abi_version;
  out->code_object_version = (int)e->abi_version + 2;
  out->e_flags = e->flags;
  out->mach = (int)(out->e_flags & 0xff);
  const tl_target *t = tl_target_by_amd_mach(out->mach);
  if (!t)
    return bad(&r, "e_flags 0x%08x name processor 0x%02x, which is not one of this project's targets",
               (unsigned)out->e_flags, (unsigned)out->mach);
  snprintf(out->processor, sizeof out->processor, "%.*s", (int)sizeof out->processor - 1, t->name);
  out->xnack = feature_name((out->e_flags >> 8) & 3);
  out->sramecc = feature_name((out->e_flags >> 10) & 3);
  if ((st = tl_elf_load(e)) != TL_OK)
    goto fail;
  const unsigned char *desc = NULL;
  size_t dn = 0;
  if ((st = find_metadata(&r, &desc, &dn)) != TL_OK)
    goto fail;
  if ((st = read_metadata(&r, desc, dn, out)) != TL_OK)
    goto fail;
  tl_elf_close(e);
  return TL_OK;
fail:
  tl_elf_close(e);
  tl_hsaco_info_free(out);
  return st;
}

void tl_hsaco_info_free(tl_hsaco_info *info) {
  if (!info)
    return;
  for (size_t i = 0; i < info->nkernels; i++) {
    tl_hsaco_kernel *k = &info->kernels[i];
    free(k->name);
    free(k->symbol);
    for (size_t j = 0; j < k->nargs; j++)
      free(k->args[j].name);
    free(k->args);
  }
  free(info->kernels);
  memset(info, 0, sizeof *info);
}

const tl_hsaco_kernel *tl_hsaco_find(const tl_hsaco_info *info, const char *name) {
  for (size_t i = 0; info && name && i < info->nkernels; i++)
    if (strcmp(info->kernels[i].name, name) == 0)
      return &info->kernels[i];
  return NULL;
}

tl_status tl_hsaco_check_target(const tl_hsaco_info *info, const char *target, tl_error *err) {
  if (!info || !target)
    return tl_error_set(err, TL_INVALID_ARG, "tl_hsaco_check_target: NULL argument");
  if (strcmp(info->processor, target) != 0)
    return tl_error_set(err, TL_INVALID_ARG, "the code object is for %s (%s), not %s", info->processor,
                        info->target_id, target);
  return TL_OK;
}
