/*
 * fake_amdhip64.h - what the tests share with the fake HIP runtime of
 * fake_amdhip64.c: the record of the last kernel launch it received, the
 * functions a test reaches through dlsym to read and steer it, and
 * fake_hip_build(), which compiles the fake into a shared library with the
 * system's C compiler (so the tests that load it need nothing prepared).
 *
 * The fake is a real shared library, opened by compiler/hipdrv.c with
 * dlopen like libamdhip64, that answers with fixed values: it exists to
 * test the loader's plumbing (symbols, error translation, the properties
 * layouts, the packing of kernel arguments), not HIP.  Its device memory
 * is host memory, so its one real "kernel", fake_axpy(float *y, const
 * float *x, float a, int n): y[i] += a * x[i] for i < min(n, grid.x *
 * block.x), runs on the CPU.  Built with -DFAKE_ROCM5 it exports what ROCm
 * 5's runtime does (no hipGetDevicePropertiesR0600; hipGetDeviceProperties
 * with ROCm 5's layout); otherwise what ROCm 6's does (both names, the
 * plain one with ROCm 5's layout as libamdhip64.so.6 has it).
 *
 * Environment read by the fake at each call:
 *   FAKE_HIP_DEVICES     number of devices (default 1; 0: hipInit answers
 *                        hipErrorNoDevice)
 *   FAKE_HIP_ARCH        gcnArchName (default "gfx90a:sramecc+:xnack-")
 *   FAKE_HIP_INIT_ERROR  a hipError_t for hipInit to return
 */
#ifndef FAKE_AMDHIP64_H
#define FAKE_AMDHIP64_H

#include <stddef.h>
#include <stdint.h>

#define FAKE_HIP_MAX_ARGS 32
#define FAKE_HIP_ARG_BYTES 16

/* The last hipModuleLaunchKernel the fake accepted. */
typedef struct fake_hip_launch {
  int count;                      /* launches accepted so far */
  char kernel[128];
  unsigned grid[3], block[3];
  unsigned shared_bytes;
  void *stream;
  int extra_given;                /* `extra` was not NULL */
  int nargs;                      /* as fake_hip_set_arg_sizes said */
  unsigned char args[FAKE_HIP_MAX_ARGS][FAKE_HIP_ARG_BYTES]; /* each *kernelParams[i], copied */
} fake_hip_launch;

/* Exported by the fake, for tests (through dlsym):
 *   void fake_hip_last_launch(fake_hip_launch *out);
 *   void fake_hip_set_arg_sizes(const int *sizes, int n);  bytes of each
 *        argument the next launches copy from kernelParams
 *   int  fake_hip_calls(const char *function);   times a function was called
 *   int  fake_hip_live(const char *what);        "allocations", "modules",
 *        "streams", "events" not yet released */
typedef void (*fake_hip_last_launch_fn)(fake_hip_launch *out);
typedef void (*fake_hip_set_arg_sizes_fn)(const int *sizes, int n);
typedef int (*fake_hip_calls_fn)(const char *function);
typedef int (*fake_hip_live_fn)(const char *what);

#ifdef FAKE_HIP_BUILDER
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Compiles srcdir/tests/hip/fake_amdhip64.c into outdir/NAME with `cc
 * -shared -fPIC` and the extra flags.  Returns 0 and the library's path in
 * path; 1 when no C compiler is found (why says so: a reason to skip); -1
 * when the build fails (why holds the command). */
static int fake_hip_build(const char *srcdir, const char *outdir, const char *name,
                          const char *flags, char *path, size_t cap, char *why, size_t whycap) {
  if (system("command -v cc >/dev/null 2>&1") != 0) {
    snprintf(why, whycap, "no C compiler (cc) to build the fake libamdhip64 with");
    return 1;
  }
  snprintf(path, cap, "%s/%s", outdir, name);
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -O1 -g -shared -fPIC %s "
           "-I'%s/tests/hip' -o '%s' '%s/tests/hip/fake_amdhip64.c' -Wl,-soname,%s",
           flags, srcdir, path, srcdir, name);
  if (system(cmd) != 0 || access(path, R_OK) != 0) {
    snprintf(why, whycap, "building the fake libamdhip64 failed: %.*s", (int)(whycap > 64 ? whycap - 64 : 0), cmd);
    return -1;
  }
  return 0;
}

static void fake_put(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

/* A minimal ELF64 little-endian code object: the header (e_type, e_machine,
 * e_flags as given), a string table holding names[0..nnames) and a section
 * header table of two entries (null, the string table), in that order.
 * malloc'd; *n is its size.  What the fake's hipModuleLoadData reads: the
 * header, the size from the section headers, kernels by name. */
static unsigned char *fake_hip_code_object(unsigned type, unsigned machine, unsigned flags,
                                           const char *const *names, int nnames, size_t *n) {
  size_t strtab = 1;
  for (int i = 0; i < nnames; i++)
    strtab += strlen(names[i]) + 1;
  size_t shoff = (64 + strtab + 7) / 8 * 8;
  *n = shoff + 2 * 64;
  unsigned char *b = calloc(1, *n);
  if (!b)
    return NULL;
  memcpy(b, "\177ELF", 4);
  b[4] = 2; /* ELFCLASS64 */
  b[5] = 1; /* ELFDATA2LSB */
  b[6] = 1; /* EV_CURRENT */
  b[7] = 64; /* ELFOSABI_AMDGPU_HSA */
  b[8] = 3;  /* ABI version: code object v5 */
  fake_put(b + 16, type, 2);
  fake_put(b + 18, machine, 2);
  fake_put(b + 20, 1, 4);
  fake_put(b + 40, shoff, 8);
  fake_put(b + 48, flags, 4);
  fake_put(b + 52, 64, 2);  /* e_ehsize */
  fake_put(b + 58, 64, 2);  /* e_shentsize */
  fake_put(b + 60, 2, 2);   /* e_shnum */
  fake_put(b + 62, 1, 2);   /* e_shstrndx */
  size_t at = 65;
  for (int i = 0; i < nnames; i++) {
    memcpy(b + at, names[i], strlen(names[i]) + 1);
    at += strlen(names[i]) + 1;
  }
  unsigned char *sh = b + shoff + 64;
  fake_put(sh + 4, 3, 4);        /* SHT_STRTAB */
  fake_put(sh + 24, 64, 8);      /* sh_offset */
  fake_put(sh + 32, strtab, 8);  /* sh_size */
  return b;
}
#endif

#endif
