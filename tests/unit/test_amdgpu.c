/*
 * test_amdgpu.c - unit tests of the AMD toolchain driver (compiler/amdgpu.c):
 * finding the toolchain, the targets it accepts, compiling real HIP C to
 * code objects with the installed clang and ld.lld, its failures (syntax
 * errors, bad targets, the time limit, which ends every process of the
 * tool's group), the private temporary directory,
 * offload bundles, and llvm-objdump; then the AMD back end as a whole
 * (tl_compile for gfx targets): every example program compiles for gfx90a,
 * gfx942 and gfx1100, and for gfx1201 where the toolchain accepts it (clang
 * 19 does), and the HIP prelude's math is checked against libm on the host.
 *
 * What is checked comes from sources independent of the driver: the ELF
 * header bytes read here, the code object reader (compiler/hsaco.c, which
 * has its own tests), llvm-objdump's disassembly, and clang's own
 * offload-bundle output.  The compile tests skip, saying why, when no
 * toolchain is found.  The "no toolchain" path runs everywhere: one test
 * runs this program again with TL_CLANG and TL_HIPRTC pointing nowhere and
 * checks that every toolchain test skips visibly and the rest pass; others
 * point TL_HIPRTC at a library that is not hiprtc.  No AMD GPU is needed or
 * used: whether the code objects run is for tests/gpu/ on an AMD machine.
 *
 * For each example build, what is checked comes from the program's JSON
 * and from the code object itself: an ELF for EM_AMDGPU with the target's
 * processor (header bytes read here), its metadata note naming the kernel
 * with one explicit argument per parameter, of the size and kind the
 * parameter ABI (proto/kernel-meta.md section 3) gives; the metadata's
 * resources equal the note's figures; llvm-objdump finds the kernel, and
 * MFMA (gfx90a, gfx942) or WMMA (gfx1100, gfx1201) instructions in the GEMM
 * examples (test_amd_layouts.c checks the layouts themselves).  Files are found under
 * $TL_SRCDIR when it is set, else relative to the current directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amdgpu.h"
#include "hsaco.h"
#include "prelude_hip.h"
#include "tlcompiler.h"

#define CHILD_ENV "TL_TEST_AMDGPU_CHILD"
#define TOOLCHAIN_TEST_COUNT 13 /* the tests in TOOLCHAIN_TESTS (main) */

static tl_amdgpu *amd; /* NULL when no AMD toolchain is found */
static char amd_missing[TL_ERROR_MESSAGE_MAX];

static const char add_one_src[] =
    "extern \"C\" __attribute__((global)) void add_one(float *a, int n) {\n"
    "  int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();\n"
    "  if (i < n) a[i] += 1.0f;\n"
    "}\n";

#define NEED_AMD()                                                                                 \
  do {                                                                                             \
    if (!amd) {                                                                                    \
      printf("skipping: no AMD toolchain here: %s\n", amd_missing);                               \
      skip();                                                                                      \
    }                                                                                              \
  } while (0)

static int group_setup(void **state) {
  (void)state;
  tl_error err;
  if (tl_amdgpu_open(&amd, &err) != TL_OK) {
    assert_int_equal(err.code, TL_NO_TOOLCHAIN);
    snprintf(amd_missing, sizeof amd_missing, "%s", err.message);
    fprintf(stderr, "NOTE: AMD toolchain tests will skip: %s\n", amd_missing);
  }
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  tl_amdgpu_close(amd);
  amd = NULL;
  return 0;
}

static void compile_ok(const char *src, const char *target, tl_amdgpu_result *r) {
  tl_error err;
  tl_error_clear(&err);
  if (tl_amdgpu_compile(amd, src, target, r, &err) != TL_OK)
    fail_msg("compiling for %s: %s", target, err.message);
  assert_non_null(r->code);
  assert_true(r->code_size > 64);
  assert_non_null(r->log);
  assert_string_equal(r->target, target);
  assert_true(r->wall_ms > 0.0);
}

/* Runs a command line through the shell and returns its stdout (malloc'd). */
static char *run_cmd(const char *cmd, int *status) {
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t cap = 1 << 16, n = 0;
  char *out = malloc(cap);
  assert_non_null(out);
  for (size_t r; (r = fread(out + n, 1, cap - n - 1, p)) > 0;) {
    n += r;
    if (n + 1 >= cap) {
      cap *= 2;
      out = realloc(out, cap);
      assert_non_null(out);
    }
  }
  out[n] = 0;
  int st = pclose(p);
  if (status)
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

/* ---- no toolchain needed ------------------------------------------------------ */

/* The row of a known target (target.h). */
static tl_target known(const char *name) {
  tl_target t;
  if (tl_target_parse(name, &t, NULL) != TL_OK)
    fail_msg("%s is not a known target", name);
  return t;
}


/* TL_HIPRTC and TL_CLANG pointing nowhere: TL_NO_TOOLCHAIN naming both. */
static void test_no_toolchain(void **state) {
  (void)state;
  char *old_rtc = getenv("TL_HIPRTC") ? strdup(getenv("TL_HIPRTC")) : NULL;
  char *old_clang = getenv("TL_CLANG") ? strdup(getenv("TL_CLANG")) : NULL;
  setenv("TL_HIPRTC", "/nonexistent/libhiprtc.so.6", 1);
  setenv("TL_CLANG", "/nonexistent/clang-19", 1);
  tl_amdgpu *h = (tl_amdgpu *)1;
  tl_error err;
  assert_int_equal(tl_amdgpu_open(&h, &err), TL_NO_TOOLCHAIN);
  assert_null(h);
  assert_int_equal(err.code, TL_NO_TOOLCHAIN);
  assert_non_null(strstr(err.message, "/nonexistent/libhiprtc.so.6 (not found)"));
  assert_non_null(strstr(err.message, "/nonexistent/clang-19 (not found)"));

  /* A library that is not hiprtc: named with the first function it lacks. */
  setenv("TL_HIPRTC", "libc.so.6", 1);
  assert_int_equal(tl_amdgpu_open(&h, &err), TL_NO_TOOLCHAIN);
  assert_non_null(strstr(err.message, "libc.so.6 (lacks hiprtcGetErrorString)"));

  /* A directory without hiprtc; an empty variable. */
  setenv("TL_HIPRTC", "/", 1);
  assert_int_equal(tl_amdgpu_open(&h, &err), TL_NO_TOOLCHAIN);
  assert_non_null(strstr(err.message, "//libhiprtc.so.6 (not found)"));
  setenv("TL_HIPRTC", "", 1);
  setenv("TL_CLANG", "", 1);
  assert_int_equal(tl_amdgpu_open(&h, &err), TL_NO_TOOLCHAIN);
  assert_non_null(strstr(err.message, "TL_HIPRTC is set but empty"));
  assert_non_null(strstr(err.message, "TL_CLANG is set but empty"));

  /* A program that is not clang. */
  setenv("TL_HIPRTC", "/nonexistent", 1);
  setenv("TL_CLANG", "/bin/true", 1);
  assert_int_equal(tl_amdgpu_open(&h, &err), TL_NO_TOOLCHAIN);
  assert_non_null(strstr(err.message, "/bin/true (no clang version in its --version)"));

  if (old_rtc)
    setenv("TL_HIPRTC", old_rtc, 1);
  else
    unsetenv("TL_HIPRTC");
  if (old_clang)
    setenv("TL_CLANG", old_clang, 1);
  else
    unsetenv("TL_CLANG");
  free(old_rtc);
  free(old_clang);
  assert_int_equal(tl_amdgpu_open(NULL, &err), TL_INVALID_ARG);
  tl_amdgpu_close(NULL);
}

/* Malformed bundles are refused without reading outside them. */
static void test_bundle_damage(void **state) {
  (void)state;
  unsigned char b[200];
  memset(b, 0, sizeof b);
  memcpy(b, "__CLANG_OFFLOAD_BUNDLE__", 24);
  size_t off, size;
  tl_error err;
  assert_true(tl_amdgpu_is_bundle(b, sizeof b));
  assert_false(tl_amdgpu_is_bundle(b, 23));
  /* zero entries */
  assert_int_equal(tl_amdgpu_unbundle(b, sizeof b, "gfx90a", &off, &size, &err), TL_INVALID_ARG);
  /* one entry whose id length runs far past the end */
  b[24] = 1;
  b[32 + 16] = 0xff;
  b[32 + 17] = 0xff;
  assert_int_equal(tl_amdgpu_unbundle(b, sizeof b, "gfx90a", &off, &size, &err), TL_INVALID_ARG);
  /* an entry for gfx90a whose code runs past the end */
  const char *id = "hipv4-amdgcn-amd-amdhsa--gfx90a";
  memset(b + 32, 0, sizeof b - 32);
  b[32] = 150;     /* offset */
  b[40] = 100;     /* size: 150 + 100 > 200 */
  b[48] = (unsigned char)strlen(id);
  memcpy(b + 56, id, strlen(id));
  assert_int_equal(tl_amdgpu_unbundle(b, sizeof b, "gfx90a", &off, &size, &err), TL_INVALID_ARG);
  b[40] = 50;
  assert_int_equal(tl_amdgpu_unbundle(b, sizeof b, "gfx90a", &off, &size, &err), TL_OK);
  assert_int_equal(off, 150);
  assert_int_equal(size, 50);
  assert_int_equal(tl_amdgpu_unbundle(b, sizeof b, "gfx942", &off, &size, &err), TL_NOT_FOUND);
  assert_int_equal(tl_amdgpu_unbundle(b, sizeof b, "gfx90", &off, &size, &err), TL_NOT_FOUND);
  /* every truncation of it */
  for (size_t n = 0; n < 56 + strlen(id); n++)
    assert_int_not_equal(tl_amdgpu_unbundle(b, n, "gfx90a", &off, &size, &err), TL_OK);
  memcpy(b, "CCOB", 4);
  assert_int_equal(tl_amdgpu_unbundle(b, sizeof b, "gfx90a", &off, &size, &err), TL_UNSUPPORTED);
}

/* ---- with a toolchain ----------------------------------------------------------- */

static void test_open_and_targets(void **state) {
  (void)state;
  NEED_AMD();
  const char *desc = tl_amdgpu_description(amd);
  int major = 0, minor = -1;
  tl_amdgpu_version(amd, &major, &minor);
  print_message("AMD toolchain: %s\n", desc);
  if (tl_amdgpu_toolchain_kind(amd) == TL_AMDGPU_CLANG) {
    assert_true(major >= 19);
    char want[32];
    snprintf(want, sizeof want, "clang %d.%d.", major, minor);
    assert_memory_equal(desc, want, strlen(want));
    /* The path in the description is a clang whose --version agrees. */
    const char *open_paren = strchr(desc, '(');
    assert_non_null(open_paren);
    char path[512];
    snprintf(path, sizeof path, "%.*s", (int)(strlen(open_paren + 1) - 1), open_paren + 1);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "'%s' --version", path);
    int status;
    char *out = run_cmd(cmd, &status);
    assert_int_equal(status, 0);
    char version[32];
    snprintf(version, sizeof version, "clang version %d.%d.", major, minor);
    assert_non_null(strstr(out, version));
    free(out);
  } else {
    assert_int_equal(tl_amdgpu_toolchain_kind(amd), TL_AMDGPU_HIPRTC);
    assert_memory_equal(desc, "hiprtc ", 7);
  }
  const char *const *list;
  size_t n;
  tl_error err;
  assert_int_equal(tl_amdgpu_targets(amd, &list, &n, &err), TL_OK);
  assert_null(list[n]);
  char names[128] = "";
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(known(list[i]).vendor, TL_VENDOR_AMD);
    assert_true(tl_amdgpu_accepts(amd, list[i]));
    strcat(names, " ");
    strcat(names, list[i]);
  }
  print_message("targets offered:%s\n", names);
  /* What docs/DESIGN.md promises of clang 19: gfx90a, gfx942 and gfx1100. */
  assert_true(tl_amdgpu_accepts(amd, "gfx90a"));
  assert_true(tl_amdgpu_accepts(amd, "gfx942"));
  assert_true(tl_amdgpu_accepts(amd, "gfx1100"));
  assert_false(tl_amdgpu_accepts(amd, "sm_80"));
  assert_false(tl_amdgpu_accepts(amd, "gfx900"));
  assert_false(tl_amdgpu_accepts(NULL, "gfx90a"));
  /* Each known target not listed is one this clang refuses: ask it directly. */
  const char *all[] = {"gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"};
  if (tl_amdgpu_toolchain_kind(amd) == TL_AMDGPU_CLANG) {
    const char *open_paren = strchr(desc, '(');
    for (size_t i = 0; i < 5; i++) {
      char cmd[700];
      snprintf(cmd, sizeof cmd,
               "'%.*s' -x hip --cuda-device-only -nogpulib -nogpuinc --offload-arch=%s -fsyntax-only /dev/null "
               ">/dev/null 2>&1; echo $?",
               (int)(strlen(open_paren + 1) - 1), open_paren + 1, all[i]);
      char *out = run_cmd(cmd, NULL);
      assert_int_equal(atoi(out) == 0, tl_amdgpu_accepts(amd, all[i]));
      free(out);
    }
  }
  /* Each refused target has a reason, each accepted one none; a clang
   * older than 20 does not know gfx950 and says so. */
  for (size_t i = 0; i < 5; i++) {
    const char *why = tl_amdgpu_refusal(amd, all[i]);
    assert_int_equal(why == NULL, tl_amdgpu_accepts(amd, all[i]));
    if (why) {
      print_message("%s not offered: %s\n", all[i], why);
      assert_non_null(strstr(why, tl_amdgpu_description(amd)));
      assert_non_null(strstr(why, all[i]));
    }
  }
  tl_amdgpu_version(amd, &major, &minor);
  if (tl_amdgpu_toolchain_kind(amd) == TL_AMDGPU_CLANG && major < 20) {
    const char *why = tl_amdgpu_refusal(amd, "gfx950");
    assert_non_null(why);
    assert_non_null(strstr(why, "does not know gfx950 (LLVM added it in clang 20): it needs clang 20 or newer, or "
                                "ROCm's hiprtc"));
  }
  assert_null(tl_amdgpu_refusal(amd, "gfx900"));
  assert_null(tl_amdgpu_refusal(NULL, "gfx950"));
  assert_null(tl_amdgpu_refusal(amd, NULL));
}

/* The three CI targets: an ELF for EM_AMDGPU with the target's
 * processor, whose metadata names the kernel and its arguments. */
static void test_compile_targets(void **state) {
  (void)state;
  NEED_AMD();
  const char *targets[] = {"gfx90a", "gfx942", "gfx1100", "gfx1201"};
  for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
    if (!tl_amdgpu_accepts(amd, targets[i])) {
      print_message("%s: not accepted by %s, not compiled\n", targets[i], tl_amdgpu_description(amd));
      assert_string_equal(targets[i], "gfx1201"); /* the three above are required */
      continue;
    }
    tl_amdgpu_result r = {0};
    compile_ok(add_one_src, targets[i], &r);
    const unsigned char *e = r.code;
    /* The ELF header, read here byte by byte. */
    assert_memory_equal(e, "\177ELF", 4);
    assert_int_equal(e[4], 2);                  /* ELFCLASS64 */
    assert_int_equal(e[5], 1);                  /* little-endian */
    assert_int_equal(e[7], 64);                 /* ELFOSABI_AMDGPU_HSA */
    assert_int_equal(e[8], 3);                  /* ELFABIVERSION_AMDGPU_HSA_V5: code object v5 */
    assert_int_equal(e[16] | e[17] << 8, 3);    /* ET_DYN */
    assert_int_equal(e[18] | e[19] << 8, 224);  /* EM_AMDGPU */
    assert_int_equal(e[48], known(targets[i]).amd_mach);
    tl_hsaco_info info;
    tl_error err;
    if (tl_hsaco_inspect(r.code, r.code_size, &info, &err) != TL_OK)
      fail_msg("%s: %s", targets[i], err.message);
    assert_int_equal(tl_hsaco_check_target(&info, targets[i], &err), TL_OK);
    assert_int_equal(info.code_object_version, 5);
    assert_int_equal(info.nkernels, 1);
    const tl_hsaco_kernel *k = tl_hsaco_find(&info, "add_one");
    assert_non_null(k);
    assert_string_equal(k->symbol, "add_one.kd");
    assert_int_equal(k->nexplicit, 2);
    assert_string_equal(k->args[0].value_kind, "global_buffer");
    assert_int_equal(k->args[0].offset, 0);
    assert_int_equal(k->args[0].size, 8);
    assert_string_equal(k->args[1].value_kind, "by_value");
    assert_int_equal(k->args[1].offset, 8);
    assert_int_equal(k->args[1].size, 4);
    assert_int_equal(k->wavefront_size, known(targets[i]).warp);
    assert_int_equal(k->group_segment_fixed_size, 0);
    assert_true(k->vgpr_count >= 1 && k->sgpr_count >= 1);
    print_message("%s: %zu bytes in %.0f ms, %d VGPRs, %d SGPRs, wave%d\n", targets[i], r.code_size, r.wall_ms,
                  k->vgpr_count, k->sgpr_count, k->wavefront_size);
    tl_hsaco_info_free(&info);
    tl_amdgpu_result_free(&r);
  }
}

static void test_syntax_error(void **state) {
  (void)state;
  NEED_AMD();
  tl_amdgpu_result r = {0};
  tl_error err;
  const char *src = "extern \"C\" __attribute__((global)) void k(float *a) {\n  a[0] = ;\n}\n";
  assert_int_equal(tl_amdgpu_compile(amd, src, "gfx90a", &r, &err), TL_TOOLCHAIN);
  assert_int_equal(err.code, TL_TOOLCHAIN);
  assert_null(r.code);
  assert_int_equal(r.code_size, 0);
  assert_non_null(r.log);
  assert_int_equal(r.log_len, strlen(r.log));
  /* The error, with the file's own name (not the private directory's). */
  assert_non_null(strstr(r.log, "kernel.hip:2:10: error: expected expression"));
  assert_non_null(strstr(err.message, "kernel.hip:2:10: error: expected expression"));
  assert_null(strstr(r.log, "tl-amdgpu-"));
  tl_amdgpu_result_free(&r);
  /* out may be NULL */
  assert_int_equal(tl_amdgpu_compile(amd, src, "gfx90a", NULL, &err), TL_TOOLCHAIN);
  /* A link error: an undefined device function. */
  const char *undef = "extern \"C\" __attribute__((device)) float missing(float);\n"
                      "extern \"C\" __attribute__((global)) void k(float *a) { a[0] = missing(a[1]); }\n";
  assert_int_equal(tl_amdgpu_compile(amd, undef, "gfx942", &r, &err), TL_TOOLCHAIN);
  assert_non_null(strstr(err.message, "could not link"));
  assert_non_null(strstr(r.log, "symbol: missing"));
  tl_amdgpu_result_free(&r);
}

static void test_bad_target(void **state) {
  (void)state;
  NEED_AMD();
  tl_amdgpu_result r = {0};
  tl_error err;
  const char *bad[] = {"sm_80", "gfx900", "gfx90a:xnack-", "", "gfx1100 "};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(tl_amdgpu_compile(amd, add_one_src, bad[i], &r, &err), TL_INVALID_ARG);
    assert_non_null(strstr(err.message, "gfx90a, gfx942, gfx950, gfx1100, gfx1201"));
    assert_null(r.code);
    tl_amdgpu_result_free(&r);
  }
  /* A known target the toolchain refuses (gfx950 before clang 20): the
   * message says why. */
  if (!tl_amdgpu_accepts(amd, "gfx950")) {
    assert_int_equal(tl_amdgpu_compile(amd, add_one_src, "gfx950", &r, &err), TL_UNSUPPORTED);
    assert_non_null(strstr(err.message, tl_amdgpu_refusal(amd, "gfx950")));
    assert_non_null(strstr(err.message, "; it accepts gfx90a, gfx942"));
  } else {
    print_message("gfx950 is accepted here: the TL_UNSUPPORTED case is not reachable\n");
  }
  assert_int_equal(tl_amdgpu_compile(amd, NULL, "gfx90a", &r, &err), TL_INVALID_ARG);
  assert_int_equal(tl_amdgpu_compile(NULL, add_one_src, "gfx90a", &r, &err), TL_INVALID_ARG);
  assert_int_equal(tl_amdgpu_compile(amd, add_one_src, NULL, &r, &err), TL_INVALID_ARG);
}

/* The private directories are removed, after successes, failures and
 * time-outs; a time-out is TL_TIMEOUT. */
static void test_tmpdir_and_timeout(void **state) {
  (void)state;
  NEED_AMD();
  if (tl_amdgpu_toolchain_kind(amd) != TL_AMDGPU_CLANG) {
    printf("skipping: hiprtc runs in-process (no temporary files, no time limit)\n");
    skip();
  }
  char dir[] = "/tmp/test_amdgpu-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char *old = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
  setenv("TMPDIR", dir, 1);
  tl_amdgpu_result r = {0};
  tl_error err;
  compile_ok(add_one_src, "gfx90a", &r);
  tl_amdgpu_result_free(&r);
  assert_int_equal(tl_amdgpu_compile(amd, "syntax error", "gfx90a", &r, &err), TL_TOOLCHAIN);
  tl_amdgpu_result_free(&r);
  tl_amdgpu_set_timeout(amd, 1);
  assert_int_equal(tl_amdgpu_compile(amd, add_one_src, "gfx90a", &r, &err), TL_TIMEOUT);
  assert_non_null(strstr(err.message, "time limit"));
  assert_null(r.code);
  tl_amdgpu_result_free(&r);
  tl_amdgpu_set_timeout(amd, TL_AMDGPU_TIMEOUT_MS);
  if (old)
    setenv("TMPDIR", old, 1);
  else
    unsetenv("TMPDIR");
  free(old);
  DIR *d = opendir(dir);
  assert_non_null(d);
  int left = 0;
  for (struct dirent *de; (de = readdir(d));)
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
      left++, print_message("left behind: %s/%s\n", dir, de->d_name);
  closedir(d);
  rmdir(dir);
  assert_int_equal(left, 0);
}

/* The time limit ends the whole group, not only its leader: a tool whose
 * child (as clang -cc1 is the clang driver's) holds 768 MiB, and so takes
 * 0.1 to 0.3 s to die after SIGKILL, is dead when tl_amdgpu_compile answers
 * TL_TIMEOUT.  The tool is a script named as TL_CLANG: clang itself for the
 * probes, and for a compile (-c) this program in its HOG_ENV mode, started
 * in the background, and a wait. */
#define HOG_ENV "TL_TEST_AMDGPU_HOG"
#define HOG_BYTES ((size_t)768 << 20)

static int hog_main(const char *pidfile) {
  char *p = malloc(HOG_BYTES);
  if (!p)
    return 1;
  for (size_t i = 0; i < HOG_BYTES; i += 4096) /* every page resident */
    p[i] = 1;
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s.tmp", pidfile);
  FILE *f = fopen(tmp, "w");
  if (!f)
    return 1;
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  rename(tmp, pidfile);
  for (;;)
    pause();
}

/* 1 when process pid runs (exists and is not a zombie). */
static int process_runs(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *rp = strrchr(buf, ')');
  return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

static void test_timeout_kills_the_group(void **state) {
  (void)state;
  NEED_AMD();
  if (tl_amdgpu_toolchain_kind(amd) != TL_AMDGPU_CLANG) {
    printf("skipping: hiprtc runs in-process (no tool to time out)\n");
    skip();
  }
  const char *desc = tl_amdgpu_description(amd), *lp = strrchr(desc, '('), *rp = strrchr(desc, ')');
  assert_true(lp && rp && rp > lp + 1);
  char clang[PATH_MAX], self[PATH_MAX], tool[PATH_MAX], pidfile[PATH_MAX];
  snprintf(clang, sizeof clang, "%.*s", (int)(rp - lp - 1), lp + 1);
  ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(sn > 0);
  self[sn] = 0;
  char dir[] = "/tmp/test_amdgpu-hog-XXXXXX";
  assert_non_null(mkdtemp(dir));
  snprintf(tool, sizeof tool, "%s/clang", dir);
  snprintf(pidfile, sizeof pidfile, "%s/hog.pid", dir);
  FILE *f = fopen(tool, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\ncase \" $* \" in *\" -c \"*) ;; *) exec '%s' \"$@\" ;; esac\n"
             "%s='%s' '%s' &\nwait\n", clang, HOG_ENV, pidfile, self);
  fclose(f);
  chmod(tool, 0755);
  char *old = getenv("TL_CLANG") ? strdup(getenv("TL_CLANG")) : NULL;
  setenv("TL_CLANG", tool, 1);
  tl_amdgpu *h = NULL;
  tl_error err;
  tl_status st = tl_amdgpu_open(&h, &err);
  if (old)
    setenv("TL_CLANG", old, 1);
  else
    unsetenv("TL_CLANG");
  free(old);
  assert_int_equal(st, TL_OK);
  tl_amdgpu_set_timeout(h, 5000); /* the child has its memory well before (0.2 s here; ASan builds slower) */
  tl_amdgpu_result r = {0};
  st = tl_amdgpu_compile(h, add_one_src, "gfx90a", &r, &err);
  tl_amdgpu_result_free(&r);
  tl_amdgpu_close(h);
  int pid = 0;
  f = fopen(pidfile, "r");
  if (f) {
    if (fscanf(f, "%d", &pid) != 1)
      pid = 0;
    fclose(f);
  }
  int runs = pid > 0 && process_runs(pid);
  if (runs)
    kill(pid, SIGKILL);
  unlink(pidfile);
  unlink(tool);
  rmdir(dir);
  print_message("time-out: %s; the tool's child %d %s\n", err.message, pid, runs ? "still ran" : "had died");
  assert_int_equal(st, TL_TIMEOUT);
  assert_true(pid > 0); /* the child had its memory before the limit (else the machine is too slow for 5 s) */
  assert_false(runs);
}

/* clang's own offload bundle for two targets: each entry found, and each
 * is the code object for its target. */
static void test_bundle_from_clang(void **state) {
  (void)state;
  NEED_AMD();
  if (tl_amdgpu_toolchain_kind(amd) != TL_AMDGPU_CLANG) {
    printf("skipping: needs clang to make a bundle\n");
    skip();
  }
  char dir[] = "/tmp/test_amdgpu-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char src[64], obj[64];
  snprintf(src, sizeof src, "%s/k.hip", dir);
  snprintf(obj, sizeof obj, "%s/k.o", dir);
  FILE *f = fopen(src, "w");
  assert_non_null(f);
  fputs(add_one_src, f);
  fclose(f);
  const char *desc = tl_amdgpu_description(amd);
  const char *p = strchr(desc, '(');
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "'%.*s' -x hip --cuda-device-only -nogpulib -nogpuinc --offload-arch=gfx90a --offload-arch=gfx1100 -O1 "
           "-c '%s' -o '%s' 2>&1",
           (int)(strlen(p + 1) - 1), p + 1, src, obj);
  int status;
  char *out = run_cmd(cmd, &status);
  if (status != 0)
    fail_msg("clang failed: %s", out);
  free(out);
  f = fopen(obj, "rb");
  assert_non_null(f);
  static unsigned char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  unlink(src);
  unlink(obj);
  rmdir(dir);
  assert_true(tl_amdgpu_is_bundle(buf, n));
  const char *targets[] = {"gfx90a", "gfx1100"};
  for (int i = 0; i < 2; i++) {
    size_t off, size;
    tl_error err;
    assert_int_equal(tl_amdgpu_unbundle(buf, n, targets[i], &off, &size, &err), TL_OK);
    tl_hsaco_info info;
    if (tl_hsaco_inspect(buf + off, size, &info, &err) != TL_OK)
      fail_msg("%s entry: %s", targets[i], err.message);
    assert_string_equal(info.processor, targets[i]);
    assert_non_null(tl_hsaco_find(&info, "add_one"));
    tl_hsaco_info_free(&info);
  }
  size_t off, size;
  assert_int_equal(tl_amdgpu_unbundle(buf, n, "gfx942", &off, &size, NULL), TL_NOT_FOUND);
}

static void test_disassemble(void **state) {
  (void)state;
  NEED_AMD();
  tl_amdgpu_result r = {0};
  compile_ok(add_one_src, "gfx90a", &r);
  char *text = NULL;
  tl_error err;
  tl_status st = tl_amdgpu_disassemble(r.code, r.code_size, "gfx90a", &text, &err);
  if (st == TL_NO_TOOLCHAIN) {
    tl_amdgpu_result_free(&r);
    printf("skipping: %s\n", err.message);
    skip();
  }
  if (st != TL_OK)
    fail_msg("%s", err.message);
  /* The kernel's label and what it must do: load, add 1.0, store, end. */
  assert_non_null(strstr(text, "<add_one>:"));
  assert_non_null(strstr(text, "global_load_dword"));
  assert_non_null(strstr(text, "v_add_f32"));
  assert_non_null(strstr(text, "global_store_dword"));
  assert_non_null(strstr(text, "s_endpgm"));
  free(text);
  /* Bytes that are not a code object: llvm-objdump's own error. */
  static const unsigned char junk[64] = {1, 2, 3};
  assert_int_equal(tl_amdgpu_disassemble(junk, sizeof junk, "gfx90a", &text, &err), TL_TOOLCHAIN);
  assert_null(text);
  assert_int_equal(tl_amdgpu_disassemble(r.code, r.code_size, "sm_80", &text, &err), TL_INVALID_ARG);
  tl_amdgpu_result_free(&r);
}

typedef struct job {
  char target[16];
  tl_amdgpu_result r;
  tl_status st;
  tl_error err;
} job;

static void *compile_thread(void *arg) {
  job *j = arg;
  j->st = tl_amdgpu_compile(amd, add_one_src, j->target, &j->r, &j->err);
  return NULL;
}

/* Compiles on several threads at once share one handle. */
static void test_threads(void **state) {
  (void)state;
  NEED_AMD();
  job j[4];
  pthread_t th[4];
  const char *t[4] = {"gfx90a", "gfx942", "gfx1100", "gfx90a"};
  for (int i = 0; i < 4; i++) {
    memset(&j[i], 0, sizeof j[i]);
    snprintf(j[i].target, sizeof j[i].target, "%s", t[i]);
    assert_int_equal(pthread_create(&th[i], NULL, compile_thread, &j[i]), 0);
  }
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) {
    if (j[i].st != TL_OK)
      fail_msg("thread %d (%s): %s", i, t[i], j[i].err.message);
    assert_string_equal(j[i].r.target, t[i]);
    tl_hsaco_info info;
    assert_int_equal(tl_hsaco_inspect(j[i].r.code, j[i].r.code_size, &info, NULL), TL_OK);
    assert_string_equal(info.processor, t[i]);
    tl_hsaco_info_free(&info);
  }
  for (int i = 0; i < 4; i++)
    tl_amdgpu_result_free(&j[i].r);
}

/* ---- the back end: tl_compile for gfx targets ------------------------------------ */

static const char *srcdir(void) {
  const char *d = getenv("TL_SRCDIR");
  return d && *d ? d : ".";
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char *p = malloc(cap + 1);
  for (size_t r; p && (r = fread(p + n, 1, cap - n, f)) > 0;) {
    n += r;
    if (n == cap) {
      char *q = realloc(p, 2 * cap + 1);
      if (!q) {
        free(p);
        p = NULL;
        break;
      }
      p = q;
      cap *= 2;
    }
  }
  fclose(f);
  if (p) {
    p[n] = 0;
    *len = n;
  }
  return p;
}

/* One compile of an example for a target, run on a worker thread. */
typedef struct ex_job {
  char name[64];
  const char *target;
  char *text;
  size_t len;
  const tl_define *defs;
  int ndefs;
  tl_build *b;
  tl_status st;
  tl_error err;
} ex_job;

static void *ex_compile(void *arg) {
  ex_job *j = arg;
  tl_diags diags = {.arena = tl_arena_new()};
  tl_compile_request req = {.program = j->text, .program_len = j->len, .defines = j->defs, .ndefines = j->ndefs,
                            .target = j->target};
  j->st = tl_compile(&req, &j->b, &diags, &j->err);
  tl_arena_free(diags.arena);
  return NULL;
}

static ex_job *queue;
static int nqueue, next_job;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;

static void *ex_worker(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&queue_lock);
    int i = next_job < nqueue ? next_job++ : -1;
    pthread_mutex_unlock(&queue_lock);
    if (i < 0)
      return NULL;
    ex_compile(&queue[i]);
  }
}

/* The size and value kind the parameter ABI gives a parameter. */
static void abi_of(json_t *param, uint32_t *size, const char **kind) {
  const char *k = json_string_value(json_object_get(param, "kind"));
  const char *dt = json_string_value(json_object_get(param, "dtype"));
  if (strcmp(k, "tensor") == 0) {
    *size = 8;
    *kind = "global_buffer";
  } else {
    *size = strcmp(dt, "int64") == 0 ? 8 : strcmp(dt, "bool") == 0 ? 1 : 4;
    *kind = "by_value";
  }
}

/* Checks one build against the program (doc) and its own code object. */
static void check_amd_build(const ex_job *j, json_t *doc) {
  const tl_build *b = j->b;
  const unsigned char *e = b->binary;
  const tl_target tt = known(j->target), *t = &tt;
  assert_true(b->binary_size > 64);
  assert_memory_equal(e, "\177ELF", 4);
  assert_int_equal(e[18] | e[19] << 8, 224); /* EM_AMDGPU */
  assert_int_equal(e[8], 3);                 /* code object v5 */
  assert_int_equal(e[48], t->amd_mach);
  tl_hsaco_info hi;
  tl_error err;
  if (tl_hsaco_inspect(b->binary, b->binary_size, &hi, &err) != TL_OK)
    fail_msg("%s/%s: %s", j->name, j->target, err.message);
  /* a program of several kernels has the entries NAME_0, NAME_1, ... (one "kernel" keeps NAME, with workspaces
   * too: tile-ir-v1.md 4.1), each taking the params and then one pointer per workspace (kernel-meta.md section 6) */
  const char *name = json_string_value(json_object_get(doc, "name"));
  json_t *kernels = json_object_get(doc, "kernels"), *ws = json_object_get(doc, "workspaces");
  size_t nk = kernels ? json_array_size(kernels) : 1, nws = ws ? json_array_size(ws) : 0;
  char entry[300];
  const tl_hsaco_kernel *k = NULL;
  json_t *params = json_object_get(doc, "params");
  for (size_t ki = nk; ki-- > 0;) { /* the first kernel last: k is its for the metadata's checks */
    if (kernels)
      snprintf(entry, sizeof entry, "%s_%zu", name, ki);
    else
      snprintf(entry, sizeof entry, "%s", name);
    k = tl_hsaco_find(&hi, entry);
    if (!k)
      fail_msg("%s/%s: the code object has no kernel %s", j->name, j->target, entry);
    assert_int_equal(k->nexplicit, json_array_size(params) + nws);
    uint32_t off = 0;
    for (size_t i = 0; i < k->nexplicit; i++) {
      uint32_t size = 8;
      const char *kind = "global_buffer";
      if (i < json_array_size(params))
        abi_of(json_array_get(params, i), &size, &kind);
      off = (off + size - 1) / size * size; /* C's layout: each at a multiple of its size */
      if (k->args[i].size != size || k->args[i].offset != off || strcmp(k->args[i].value_kind, kind) != 0)
        fail_msg("%s/%s %s: argument %zu is %s of %u bytes at %u, the ABI says %s of %u at %u", j->name, j->target,
                 entry, i, k->args[i].value_kind, k->args[i].size, k->args[i].offset, kind, size, off);
      off += size;
    }
    assert_int_equal(k->wavefront_size, t->warp);
  }
  /* our metadata */
  json_t *m = json_loads(b->meta, 0, NULL);
  assert_non_null(m);
  assert_string_equal(json_string_value(json_object_get(m, "binary")), "hsaco");
  assert_string_equal(json_string_value(json_object_get(m, "target")), j->target);
  assert_string_equal(json_string_value(json_object_get(m, "entry")), entry);
  assert_string_equal(json_string_value(json_object_get(json_object_get(m, "versions"), "toolchain")),
                      tl_compiler_target_toolchain(j->target));
  json_t *mp = json_object_get(m, "params");
  assert_int_equal(json_array_size(mp), json_array_size(params));
  for (size_t i = 0; i < json_array_size(mp); i++)
    assert_string_equal(json_string_value(json_object_get(json_array_get(mp, i), "name")),
                        json_string_value(json_object_get(json_array_get(params, i), "name")));
  json_t *res = json_object_get(m, "resources");
  int agprs = k->agpr_count > 0 ? k->agpr_count : 0;
  assert_int_equal(json_integer_value(json_object_get(res, "registers")), k->vgpr_count + agprs);
  assert_int_equal(json_integer_value(json_object_get(res, "vgprs")), k->vgpr_count);
  assert_int_equal(json_integer_value(json_object_get(res, "sgprs")), k->sgpr_count);
  assert_int_equal(json_integer_value(json_object_get(res, "static_shared_bytes")), k->group_segment_fixed_size);
  assert_int_equal(json_integer_value(json_object_get(res, "local_bytes")), k->private_segment_fixed_size);
  assert_int_equal(json_integer_value(json_object_get(res, "wavefront_size")), k->wavefront_size);
  json_int_t dyn = json_integer_value(json_object_get(json_object_get(m, "launch"), "dynamic_shared_bytes"));
  assert_true(dyn + (json_int_t)k->group_segment_fixed_size <= t->smem_bytes);
  /* the HIP C it was made from */
  assert_non_null(strstr(b->source, "__attribute__((global))"));
  assert_null(strstr(b->source, "asm"));
  json_decref(m);
  tl_hsaco_info_free(&hi);
}

/* Every example compiles for gfx90a, gfx942 and gfx1100, and gfx1201 when
 * the toolchain accepts it (flash_attention with tiles that fit 64 KiB of
 * LDS: at its default ones it needs more, and that must be a clear
 * TL_LIMIT). */
static void test_examples(void **state) {
  (void)state;
  NEED_AMD();
  const char *targets[] = {"gfx90a", "gfx942", "gfx1100", "gfx1201"};
  int nt = tl_compiler_target_toolchain("gfx1201") ? 4 : 3;
  if (nt == 3)
    print_message("gfx1201 is not offered here: the examples are compiled for the other three only\n");
  static const tl_define small_fa[] = {{"block_M", "64"}, {"block_N", "64"}};
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/examples", srcdir());
  DIR *d = opendir(dir);
  assert_non_null(d);
  int nex = 0;
  char *names[64];
  json_t *docs[64];
  char *texts[64];
  size_t lens[64];
  for (struct dirent *de; (de = readdir(d)) && nex < 64;) {
    size_t l = strlen(de->d_name);
    if (l <= 5 || strcmp(de->d_name + l - 5, ".json") != 0)
      continue;
    char path[4500];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    texts[nex] = slurp(path, &lens[nex]);
    assert_non_null(texts[nex]);
    docs[nex] = json_loadb(texts[nex], lens[nex], 0, NULL);
    assert_non_null(docs[nex]);
    names[nex] = strndup(de->d_name, l - 5);
    nex++;
  }
  closedir(d);
  assert_true(nex >= 8);
  nqueue = nex * nt + 1;
  next_job = 0;
  queue = calloc((size_t)nqueue, sizeof *queue);
  assert_non_null(queue);
  for (int i = 0; i < nex; i++)
    for (int t = 0; t < nt; t++) {
      ex_job *j = &queue[i * nt + t];
      snprintf(j->name, sizeof j->name, "%s", names[i]);
      j->target = targets[t];
      j->text = texts[i];
      j->len = lens[i];
      if (strcmp(names[i], "flash_attention") == 0) {
        j->defs = small_fa;
        j->ndefs = 2;
      }
    }
  int fa = -1;
  for (int i = 0; i < nex; i++)
    if (strcmp(names[i], "flash_attention") == 0)
      fa = i;
  assert_true(fa >= 0);
  ex_job *lim = &queue[nex * nt]; /* flash_attention at its default tiles */
  snprintf(lim->name, sizeof lim->name, "flash_attention");
  lim->target = "gfx90a";
  lim->text = texts[fa];
  lim->len = lens[fa];
  pthread_t th[3];
  for (int i = 0; i < 3; i++)
    assert_int_equal(pthread_create(&th[i], NULL, ex_worker, NULL), 0);
  for (int i = 0; i < 3; i++)
    pthread_join(th[i], NULL);
  int bad = 0;
  for (int q = 0; q < nex * nt; q++) {
    ex_job *j = &queue[q];
    if (j->st != TL_OK) {
      print_message("FAIL %s for %s: %s: %s\n", j->name, j->target, tl_status_name(j->st), j->err.message);
      bad++;
      continue;
    }
    check_amd_build(j, docs[q / nt]);
    print_message("ok   %-22s %-8s %6zu bytes, %.0f ms\n", j->name, j->target, j->b->binary_size, j->b->compile_ms);
  }
  assert_int_equal(lim->st, TL_LIMIT);
  assert_non_null(strstr(lim->err.message, "gfx90a allows 65536"));
  for (int q = 0; q < nqueue; q++)
    tl_build_free(queue[q].b);
  free(queue);
  queue = NULL;
  for (int i = 0; i < nex; i++) {
    free(names[i]);
    free(texts[i]);
    json_decref(docs[i]);
  }
  assert_int_equal(bad, 0);
}

/* The GEMM examples run on the matrix cores: llvm-objdump shows v_mfma in
 * their code for gfx90a and gfx942 and v_wmma for gfx1100 and gfx1201
 * (where offered), from the builtins of each (gemm lowered by op_gemm_amd
 * in emit_cuda.c: ..._w32 on gfx11, ..._w32_gfx12 on gfx12).  The code
 * still uses LDS (ds_ instructions) and the barrier. */
static void test_gemm_matrix_cores(void **state) {
  (void)state;
  NEED_AMD();
  const char *names[] = {"gemm", "gemm_swizzle", "dequant_gemm"};
  const char *targets[] = {"gfx90a", "gfx942", "gfx1100", "gfx1201"};
  for (int x = 0; x < 3; x++) {
    char path[4300];
    snprintf(path, sizeof path, "%s/examples/%s.json", srcdir(), names[x]);
    size_t len;
    char *text = slurp(path, &len);
    assert_non_null(text);
    for (int t = 0; t < 4; t++) {
      if (t == 3 && !tl_compiler_target_toolchain(targets[t])) { /* gfx1201 where offered */
        print_message("%s for gfx1201: not offered here\n", names[x]);
        continue;
      }
      ex_job j = {.target = targets[t], .text = text, .len = len};
      snprintf(j.name, sizeof j.name, "%s", names[x]);
      ex_compile(&j);
      if (j.st != TL_OK)
        fail_msg("%s for %s: %s", names[x], targets[t], j.err.message);
      char *dis = NULL;
      tl_error err;
      tl_status st = tl_amdgpu_disassemble(j.b->binary, j.b->binary_size, targets[t], &dis, &err);
      if (st == TL_NO_TOOLCHAIN) {
        tl_build_free(j.b);
        free(text);
        printf("skipping: %s\n", err.message);
        skip();
      }
      assert_int_equal(st, TL_OK);
      const char *want = t < 2 ? "v_mfma_f32_16x16x16" : "v_wmma_f32_16x16x16";
      if (!strstr(dis, want))
        fail_msg("%s for %s: no %s in the disassembly", names[x], targets[t], want);
      assert_null(strstr(dis, t < 2 ? "v_wmma" : "v_mfma"));
      const char *builtin = t < 2 ? "__builtin_amdgcn_mfma_f32_16x16x16" : "__builtin_amdgcn_wmma_f32_16x16x16";
      const char *at = strstr(j.b->source, builtin);
      assert_non_null(at);
      /* gfx12's builtins end in _gfx12, gfx11's do not */
      const char *paren = strchr(at, '(');
      assert_non_null(paren);
      bool gfx12 = paren - at > 6 && strncmp(paren - 6, "_gfx12", 6) == 0;
      assert_true(gfx12 == (t == 3));
      assert_non_null(strstr(dis, "s_barrier"));
      assert_non_null(strstr(dis, "ds_read") ? strstr(dis, "ds_read") : strstr(dis, "ds_load"));
      print_message("%s for %s: %s\n", names[x], targets[t], want);
      free(dis);
      tl_build_free(j.b);
    }
    free(text);
  }
}

/* The HIP prelude's math, compiled for the host with the same clang and run
 * against libm: float64 exp, exp2, log, log2, pow, tanh within 4 ulp,
 * fmod/fmodf exact, float32 tanh and pow within 1 ulp, special values. */
static void test_prelude_math(void **state) {
  (void)state;
  NEED_AMD();
  if (tl_amdgpu_toolchain_kind(amd) != TL_AMDGPU_CLANG) {
    printf("skipping: needs clang to build the host program\n");
    skip();
  }
  char dir[] = "/tmp/test_amdgpu-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char src[64], exe[64];
  snprintf(src, sizeof src, "%s/math.cc", dir);
  snprintf(exe, sizeof exe, "%s/math", dir);
  FILE *f = fopen(src, "w");
  assert_non_null(f);
  fputs("#include <math.h>\n#include <stdio.h>\n#include <stdint.h>\n#include <string.h>\n"
        "#define TL_DEV static inline\n", f);
  fputs(tl_prelude_hip, f);
  fputs("static uint64_t st = 88172645463325252ull;\n"
        "static uint64_t rnd(void) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return st; }\n"
        "static double u01(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }\n"
        "static double ulps(double got, double want) {\n"
        "  if (want != want) return got != got ? 0 : 1e30;\n"
        "  if (isinf(want) || want == 0) return got == want && signbit(got) == signbit(want) ? 0 : 1e30;\n"
        "  double u = fabs(want) < 2.2250738585072014e-308 ? 4.9406564584124654e-324 : ldexp(1.0, ilogb(want) - 52);\n"
        "  return fabs(got - want) / u;\n"
        "}\n"
        "static double ulpsf(float got, double want) {\n"
        "  float w = (float)want;\n"
        "  if (want != want) return got != got ? 0 : 1e30;\n"
        "  if (isinf(w) || w == 0) return got == w ? 0 : 1e30;\n"
        "  double u = fabs(w) < 1.17549435e-38 ? 1.4e-45 : ldexp(1.0, ilogb(w) - 23);\n"
        "  return fabs((double)got - want) / u;\n"
        "}\n"
        "#define MAXU(i, e) do { double m_ = (e); if (m_ > mx[i]) mx[i] = m_; } while (0)\n"
        "int main(void) {\n"
        "  double mx[10] = {0};\n"
        "  for (int i = 0; i < 300000; i++) {\n"
        "    double u = u01(), xe = (u - 0.5) * 1500, xl = ldexp(1.0 + u01(), (int)(rnd() % 2100) - 1074);\n"
        "    double xt = (u01() - 0.5) * (i % 2 ? 50 : 2), y = (u01() - 0.5) * 40;\n"
        "    double px = ldexp(1.0 + u01(), (int)(rnd() % 40) - 20) * (i % 3 ? 1 : -1), py = i % 3 ? y : rint(y);\n"
        "    uint64_t b = rnd(); double x; memcpy(&x, &b, 8);\n"
        "    uint32_t fb = (uint32_t)rnd(), gb = (uint32_t)rnd(); float fx, fy; memcpy(&fx, &fb, 4); memcpy(&fy, &gb, 4);\n"
        "    MAXU(0, ulps(tl_exp(xe), exp(xe))); MAXU(1, ulps(tl_exp2(xe), exp2(xe)));\n"
        "    MAXU(2, ulps(tl_log(xl), log(xl))); MAXU(3, ulps(tl_log2(xl), log2(xl)));\n"
        "    MAXU(4, ulps(tl_pow(px, py), pow(px, py))); MAXU(5, ulps(tl_tanh(xt), tanh(xt)));\n"
        "    double fm = fmod(x, xl); MAXU(6, fm != fm ? (tl_fmod(x, xl) != tl_fmod(x, xl) ? 0 : 1e30) : tl_fmod(x, xl) == fm ? 0 : 1e30);\n"
        "    double ff = fmod((double)fx, (double)fy); MAXU(7, ff != ff ? (tl_fmodf(fx, fy) != tl_fmodf(fx, fy) ? 0 : 1e30) : (double)tl_fmodf(fx, fy) == ff ? 0 : 1e30);\n"
        "    MAXU(8, ulpsf(tl_tanhf((float)xt), tanh((double)(float)xt)));\n"
        "    MAXU(9, ulpsf(tl_powf((float)px, (float)py), pow((double)(float)px, (double)(float)py)));\n"
        "  }\n"
        "  const double sp[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, 2.0, 0.5, 3.0, -3.0, 1e-310, 709.7, 710, -745, 1024, -1075};\n"
        "  int bad = 0;\n"
        "  for (int i = 0; i < 17; i++) for (int k = 0; k < 17; k++) {\n"
        "    double a = sp[i], c = sp[k];\n"
        "    bad += ulps(tl_pow(a, c), pow(a, c)) > 1;\n"
        "    double g = tl_fmod(a, c), w = fmod(a, c); bad += !(g != g && w != w) && (g != w || signbit(g) != signbit(w));\n"
        "    if (k == 0) bad += (ulps(tl_exp(a), exp(a)) > 1) + (ulps(tl_exp2(a), exp2(a)) > 1) + (ulps(tl_log(a), log(a)) > 2) +\n"
        "                       (ulps(tl_log2(a), log2(a)) > 2) + (ulps(tl_tanh(a), tanh(a)) > 4);\n"
        "  }\n"
        "  printf(\"%g %g %g %g %g %g %g %g %g %g %d\\n\", mx[0], mx[1], mx[2], mx[3], mx[4], mx[5], mx[6], mx[7], mx[8], mx[9], bad);\n"
        "  return 0;\n"
        "}\n", f);
  fclose(f);
  const char *desc = tl_amdgpu_description(amd);
  const char *p = strchr(desc, '(');
  char cmd[600];
  snprintf(cmd, sizeof cmd, "'%.*s' -x c++ -std=c++17 -O2 -o '%s' '%s' -lm 2>&1 && '%s'", (int)(strlen(p + 1) - 1),
           p + 1, exe, src, exe);
  int status;
  char *out = run_cmd(cmd, &status);
  unlink(src);
  unlink(exe);
  rmdir(dir);
  if (status != 0)
    fail_msg("the host math program failed: %s", out);
  double m[10];
  int bad = -1;
  assert_int_equal(sscanf(out, "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %d", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5],
                          &m[6], &m[7], &m[8], &m[9], &bad),
                   11);
  print_message("max ulp vs libm: exp %g, exp2 %g, log %g, log2 %g, pow %g, tanh %g, fmod %g, fmodf %g, tanhf %g, "
                "powf %g; special cases wrong: %d\n",
                m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8], m[9], bad);
  free(out);
  assert_true(m[0] <= 2 && m[1] <= 2 && m[2] <= 2 && m[3] <= 2 && m[4] <= 2 && m[5] <= 4);
  assert_true(m[6] == 0 && m[7] == 0);
  assert_true(m[8] <= 1 && m[9] <= 1);
  assert_int_equal(bad, 0);
}

/* tlc compile --target gfx90a with --emit hip, hsaco (the default) and
 * meta; --emit cuda is refused for a gfx target. */
static void test_tlc(void **state) {
  (void)state;
  NEED_AMD();
  const char *build = getenv("TL_BUILD");
  char rel[4200], tlc[PATH_MAX], prog[PATH_MAX], cmd[9000];
  snprintf(rel, sizeof rel, "%s/bin/tlc", build && *build ? build : "build");
  if (access(rel, X_OK) != 0 || !realpath(rel, tlc)) {
    printf("skipping: %s is not built\n", rel);
    skip();
  }
  snprintf(rel, sizeof rel, "%s/examples/tilus_add_one.json", srcdir());
  assert_non_null(realpath(rel, prog));
  char dir[] = "/tmp/test_amdgpu-XXXXXX";
  assert_non_null(mkdtemp(dir));
  int status;
  snprintf(cmd, sizeof cmd, "'%s' compile '%s' --target gfx90a --emit hip", tlc, prog);
  char *out = run_cmd(cmd, &status);
  assert_int_equal(status, 0);
  assert_non_null(strstr(out, "__attribute__((global))"));
  free(out);
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' compile '%s' --target gfx90a 2>&1", dir, tlc, prog);
  out = run_cmd(cmd, &status);
  assert_int_equal(status, 0);
  assert_non_null(strstr(out, "wrote add_one.gfx90a.hsaco"));
  free(out);
  char path[128];
  snprintf(path, sizeof path, "%s/add_one.gfx90a.hsaco", dir);
  size_t n;
  char *bin = slurp(path, &n);
  assert_non_null(bin);
  tl_hsaco_info hi;
  assert_int_equal(tl_hsaco_inspect(bin, n, &hi, NULL), TL_OK);
  assert_string_equal(hi.processor, "gfx90a");
  assert_non_null(tl_hsaco_find(&hi, "add_one"));
  tl_hsaco_info_free(&hi);
  free(bin);
  unlink(path);
  rmdir(dir);
  snprintf(cmd, sizeof cmd, "'%s' compile '%s' --target gfx1100 --emit meta", tlc, prog);
  out = run_cmd(cmd, &status);
  assert_int_equal(status, 0);
  json_t *m = json_loads(out, 0, NULL);
  assert_non_null(m);
  assert_string_equal(json_string_value(json_object_get(m, "binary")), "hsaco");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(m, "resources"), "wavefront_size")), 32);
  json_decref(m);
  free(out);
  snprintf(cmd, sizeof cmd, "'%s' compile '%s' --target gfx90a --emit cuda 2>&1", tlc, prog);
  out = run_cmd(cmd, &status);
  assert_int_equal(status, 2);
  assert_non_null(strstr(out, "--emit cuda needs an sm_ or compute_ target"));
  free(out);
  snprintf(cmd, sizeof cmd, "'%s' targets", tlc);
  out = run_cmd(cmd, &status);
  assert_int_equal(status, 0);
  /* gfx90a's row: name, binary, warp, shared memory, features, toolchain */
  const char *row = strstr(out, "\ngfx90a ");
  assert_non_null(row);
  char line[512];
  snprintf(line, sizeof line, "%.*s", (int)strcspn(row + 1, "\n"), row + 1);
  if (!strstr(line, " hsaco ") || !strstr(line, " 64 ") || !strstr(line, " 65536 ") || !strstr(line, " bf16-mma ") ||
      !(strstr(line, " clang ") || strstr(line, " hiprtc ")))
    fail_msg("tlc targets' gfx90a row: %s", line);
  /* gfx950 where this toolchain refuses it: listed as not offered, with
   * the reason, and a compile for it fails saying the same */
  const char *why = tl_amdgpu_refusal(amd, "gfx950");
  if (why) {
    char line[1200];
    snprintf(line, sizeof line, "\n# not offered: gfx950: %s\n", why);
    if (!strstr(out, line))
      fail_msg("tlc targets does not say why gfx950 is not offered:\n%s", out);
    assert_null(strstr(out, "\ngfx950 "));
  } else {
    assert_null(strstr(out, "not offered: gfx950"));
  }
  free(out);
  if (why) {
    snprintf(cmd, sizeof cmd, "'%s' compile '%s' --target gfx950 2>&1", tlc, prog);
    out = run_cmd(cmd, &status);
    assert_int_equal(status, 1);
    char msg[1200];
    snprintf(msg, sizeof msg, "error: target 'gfx950' is not offered here: %s", why);
    if (!strstr(out, msg))
      fail_msg("tlc compile --target gfx950 does not say why:\n%s", out);
    free(out);
  }
}

/* This program again without a toolchain: every toolchain test skips,
 * saying why, and the others pass. */
static void test_run_without_toolchain(void **state) {
  (void)state;
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fd[1], 1);
    dup2(fd[1], 2);
    close(fd[0]);
    close(fd[1]);
    setenv(CHILD_ENV, "1", 1);
    setenv("TL_CLANG", "/nonexistent/clang", 1);
    setenv("TL_HIPRTC", "/nonexistent/libhiprtc.so", 1);
    execl("/proc/self/exe", "test_amdgpu", (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  size_t cap = 1 << 20, n = 0;
  char *out = malloc(cap + 1);
  assert_non_null(out);
  for (ssize_t r; (r = read(fd[0], out + n, cap - n)) > 0;)
    n += (size_t)r;
  close(fd[0]);
  out[n] = 0;
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  int skipped = 0;
  for (const char *p = out; (p = strstr(p, "skipping: no AMD toolchain here: no AMD toolchain: hiprtc: tried "
                                           "/nonexistent/libhiprtc.so (not found)"));
       p++)
    skipped++;
  int clean = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !strstr(out, "[  FAILED  ]");
  if (!clean || skipped != TOOLCHAIN_TEST_COUNT)
    print_message("---- the child's output ----\n%s----\n", out);
  free(out);
  assert_true(clean);
  assert_int_equal(skipped, TOOLCHAIN_TEST_COUNT);
  print_message("without a toolchain: %d tests skipped with a reason\n", skipped);
}

int main(void) {
#define TOOLCHAIN_TESTS                                                                            \
  cmocka_unit_test(test_open_and_targets), cmocka_unit_test(test_compile_targets),                \
      cmocka_unit_test(test_syntax_error), cmocka_unit_test(test_bad_target),                      \
      cmocka_unit_test(test_tmpdir_and_timeout), cmocka_unit_test(test_timeout_kills_the_group),   \
      cmocka_unit_test(test_bundle_from_clang),                                                    \
      cmocka_unit_test(test_disassemble), cmocka_unit_test(test_threads),                          \
      cmocka_unit_test(test_examples), cmocka_unit_test(test_gemm_matrix_cores),                  \
      cmocka_unit_test(test_prelude_math), cmocka_unit_test(test_tlc)
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_toolchain),
      cmocka_unit_test(test_bundle_damage), TOOLCHAIN_TESTS,
      cmocka_unit_test(test_run_without_toolchain),
  };
  const struct CMUnitTest child_tests[] = {
      cmocka_unit_test(test_no_toolchain),
      cmocka_unit_test(test_bundle_damage), TOOLCHAIN_TESTS,
  };
  if (getenv(HOG_ENV))
    return hog_main(getenv(HOG_ENV));
  if (getenv(CHILD_ENV))
    return cmocka_run_group_tests(child_tests, group_setup, group_teardown);
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
