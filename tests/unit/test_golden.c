/*
 * test_golden.c - golden tests of the CUDA C and HIP C that the back end
 * emits.
 *
 * tests/golden/ holds small programs (NAME.json) and the source the back end
 * gave for each when it was last reviewed (NAME.cu).  This test runs the
 * pipeline as tl_compile does up to code generation, without NVRTC --
 * tl_load_program, (tl_pass_kgroup for a named target,) tl_pass_place, tl_pass_pipeline with the largest shared
 * memory of any target (232448 bytes, sm_90/sm_100), tl_pass_tma (for a
 * named target), tl_pass_range, tl_pass_barrier, tl_pass_raster,
 * tl_emit_cuda, the verifier (verify.c) after each pass -- and
 * compares the text byte for byte with NAME.cu, printing a unified diff
 * (diff -u) when it differs.  A change of the emitter thus shows as a diff
 * to review, and generation is checked to be deterministic (two runs give
 * the same bytes).
 *
 * With TL_GOLDEN_UPDATE=1 in the environment it rewrites every NAME.cu
 * instead of comparing (`make golden-update`); review the result with
 * `git diff tests/golden`.
 *
 * The same programs in the HIP dialect are in NAME.hip: the passes and the
 * emitter as tl_compile runs them for gfx942 (tl_codegen_for: HIP C,
 * wavefronts of 64, the target's 64 KiB of LDS).  A few programs also have
 * NAME.TARGET.hip for another AMD target whose lowering differs, or
 * NAME.TARGET.cu for another NVIDIA target (the table `extra` below:
 * gemm_small for gfx1201, RDNA4's WMMA, and for sm_90a, wgmma); those
 * compile for their target where it is offered.
 *
 * Where NVRTC is installed, every golden program is also compiled for
 * sm_80 through tl_compile, and the cubin must hold the kernel (each
 * program's "name" is its file name, NAME): a golden
 * file that NVRTC rejects is no use.  Likewise for gfx942 where an AMD
 * toolchain is (clang 19 or hiprtc): the code object must hold the kernel
 * (and for each NAME.TARGET.hip whose target the toolchain offers).
 * Without a toolchain those tests skip and say why.
 *
 * Files are found under $TL_SRCDIR when it is set, else relative to the
 * current directory (the repository root under `make test`).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubin.h"
#include "hsaco.h"
#include "pass.h"
#include "tlcompiler.h"

#define SMEM_LIMIT 232448        /* what tl_compile uses for sm_90 and sm_100 */
#define MAX_GOLDEN_BYTES (4u << 20)
#define MIN_GOLDEN 4             /* fewer files means some went missing */

static char dir[4096];
static char *names[256]; /* stems of tests/golden/NAME.json, sorted */
static int nnames;

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char *p = malloc(cap + 1);
  for (size_t r; p && (r = fread(p + n, 1, cap - n, f)) > 0;) {
    n += r;
    if (n == cap) {
      char *q = cap < MAX_GOLDEN_BYTES ? realloc(p, 2 * cap + 1) : NULL;
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

static bool write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return false;
  size_t n = strlen(text);
  bool ok = fwrite(text, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n > k && strcmp(s + n - k, suffix) == 0;
}

static int group_setup(void **state) {
  (void)state;
  const char *src = getenv("TL_SRCDIR");
  snprintf(dir, sizeof dir, "%s/tests/golden", src && *src ? src : ".");
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "cannot open %s (set TL_SRCDIR to the repository root, or run from there)\n", dir);
    return -1;
  }
  for (struct dirent *e; (e = readdir(d)) && nnames < 256;)
    if (has_suffix(e->d_name, ".json"))
      names[nnames++] = strndup(e->d_name, strlen(e->d_name) - 5);
  closedir(d);
  qsort(names, (size_t)nnames, sizeof names[0], cmp_str);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  for (int i = 0; i < nnames; i++)
    free(names[i]);
  nnames = 0;
  return 0;
}

#define HIP_TARGET "gfx942"   /* the target of the .hip files */

/* The two kinds of golden file. */
static const char *const kinds[2] = {".cu", ".hip"};

/* Golden sources for other targets: tests/golden/NAME.TARGET.hip (AMD) or
 * NAME.TARGET.cu (NVIDIA). */
static const struct {
  const char *name, *target;
} extra[] = {
    {"gemm_small", "gfx1201"}, /* WMMA with gfx12's operand and accumulator layouts */
    {"gemm_small", "sm_90a"},  /* wgmma: one warpgroup, a group in flight across K tiles, the 64-byte swizzle on TMA
                                  ("k_group": 1: one K tile of 32 a stage, tests/sh/tlc_kgroup.sh has the groups);
                                  warp-specialized and persistent (pass_wspec.c) */
};
#define NEXTRA (int)(sizeof extra / sizeof *extra)

/* The stages after pass_pipeline, as tl_compile runs them (pass_tma for
 * a target: with no target, the CUDA C is sm_80's, which has no TMA), each
 * verified (verify.c) like the stages before them. */
static tl_status lower(tl_program *prog, const tl_codegen *cg, int64_t smem, tl_error *err) {
  const tl_codegen *vcg = cg ? cg : &tl_codegen_cuda;
  tl_status st;
  if ((st = tl_verify(prog, "place", vcg, err)) != TL_OK || (st = tl_verify(prog, "pipeline", vcg, err)) != TL_OK)
    return st;
  if (cg) {
    tl_pass_tma(prog, smem, cg);
    if ((st = tl_verify(prog, "tma", vcg, err)) != TL_OK)
      return st;
    tl_pass_cluster(prog, cg);
    tl_pass_wspec(prog, smem, cg);
    if ((st = tl_verify(prog, "wspec", vcg, err)) != TL_OK)
      return st;
    tl_pass_store(prog, smem, cg);
  }
  tl_pass_range(prog);
  if ((st = tl_verify(prog, "range", vcg, err)) != TL_OK || (st = tl_pass_barrier(prog, err)) != TL_OK ||
      (st = tl_verify(prog, "barrier", vcg, err)) != TL_OK)
    return st;
  tl_pass_raster(prog);
  return TL_OK;
}

/* Runs the front end and the back end up to CUDA C (target NULL) or HIP C
 * for target; the text is malloc'd.  NULL (with a message printed) when a
 * stage fails. */
/* tl_pass_kgroup, as tl_compile runs it before pass_place (it cannot fail). */
static bool kgroup(tl_program *prog, int64_t smem, const tl_codegen *cg) {
  tl_pass_kgroup(prog, smem, cg);
  return true;
}

static char *emit(const char *name, const char *target) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s.json", dir, name);
  size_t len;
  char *text = read_file(path, &len);
  if (!text) {
    print_message("%s: cannot read\n", path);
    return NULL;
  }
  tl_arena *arena = tl_arena_new();
  tl_diags diags = {.arena = arena};
  tl_error err = {0};
  tl_codegen cg;
  int64_t lds = 0;
  char *out = NULL;
  tl_program *prog = tl_load_program(arena, text, len, NULL, 0, &diags);
  if (!prog) {
    print_message("%s: the program is invalid:\n", path);
    tl_diags_print(&diags, path, stdout);
  } else if (!target && (tl_pass_place(prog, SMEM_LIMIT, &err) != TL_OK ||
                         tl_pass_pipeline(prog, SMEM_LIMIT, &err) != TL_OK)) {
    print_message("%s: a pass failed: %s: %s\n", path, tl_status_name(err.code), err.message);
  } else if (target && (tl_codegen_for(target, &cg, &lds, &err) != TL_OK || !kgroup(prog, lds, &cg) ||
                     tl_pass_place_for(prog, lds, &cg, &err) != TL_OK ||
                     tl_pass_pipeline_for(prog, lds, &cg, &err) != TL_OK)) {
    print_message("%s: a pass failed for %s: %s: %s\n", path, target, tl_status_name(err.code), err.message);
  } else if (lower(prog, target ? &cg : NULL, lds, &err) != TL_OK) {
    print_message("%s: a stage after pass_pipeline failed or did not verify: %s: %s: %s\n", path,
                  tl_status_name(err.code), err.pointer, err.message);
  } else {
    const char *src = target ? tl_emit(arena, prog, &cg, &err) : tl_emit_cuda(arena, prog, &err);
    if (!src)
      print_message("%s: the emitter failed: %s: %s\n", path, tl_status_name(err.code), err.message);
    else
      out = strdup(src);
  }
  tl_arena_free(arena);
  free(text);
  return out;
}

/* Prints `diff -u` of the expected and the emitted text. */
static void print_diff(const char *name, const char *ext, const char *expected, const char *got) {
  char a[] = "/tmp/tl-golden-expected-XXXXXX", b[] = "/tmp/tl-golden-emitted-XXXXXX";
  int fa = mkstemp(a), fb = mkstemp(b);
  if (fa < 0 || fb < 0) {
    print_message("(cannot make temporary files for the diff)\n");
    if (fa >= 0) {
      close(fa);
      unlink(a);
    }
    if (fb >= 0) {
      close(fb);
      unlink(b);
    }
    return;
  }
  close(fa);
  close(fb);
  if (write_file(a, expected) && write_file(b, got)) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "diff -u --label 'tests/golden/%s%s' --label 'emitted' '%s' '%s' 2>&1", name, ext, a, b);
    FILE *p = popen(cmd, "r");
    if (p) {
      char line[4096];
      int lines = 0;
      while (fgets(line, sizeof line, p))
        if (lines++ < 400)
          print_message("%s", line);
      if (lines > 400)
        print_message("... (%d more lines of diff)\n", lines - 400);
      pclose(p);
    }
  }
  unlink(a);
  unlink(b);
}

/* The emitted source matches NAME.cu, NAME.hip and NAME.TARGET.hip (or,
 * when updating, replaces them). */
static void test_golden_sources(void **state) {
  (void)state;
  const char *u = getenv("TL_GOLDEN_UPDATE");
  bool update = u && strcmp(u, "1") == 0;
  if (nnames < MIN_GOLDEN)
    fail_msg("only %d programs in %s; expected at least %d", nnames, dir, MIN_GOLDEN);
  for (int x = 0; x < NEXTRA; x++) {
    bool found = false;
    for (int i = 0; i < nnames; i++)
      found |= strcmp(names[i], extra[x].name) == 0;
    if (!found)
      fail_msg("extra golden %s.%s.hip: there is no %s.json", extra[x].name, extra[x].target, extra[x].name);
  }
  int bad = 0, total = 2 * nnames + NEXTRA;
  for (int j = 0; j < total; j++) {
    const char *name, *target;
    char ext[64];
    if (j < 2 * nnames) {
      name = names[j / 2];
      target = j % 2 ? HIP_TARGET : NULL;
      snprintf(ext, sizeof ext, "%s", kinds[j % 2]);
    } else {
      name = extra[j - 2 * nnames].name;
      target = extra[j - 2 * nnames].target;
      snprintf(ext, sizeof ext, ".%s%s", target, tl_target_is_amd_name(target) ? ".hip" : ".cu");
    }
    char *got = emit(name, target);
    if (!got) {
      bad++;
      continue;
    }
    char *again = emit(name, target);
    if (!again || strcmp(got, again) != 0) {
      print_message("FAIL %s: two runs of the emitter gave different text\n", name);
      bad++;
      free(got);
      free(again);
      continue;
    }
    free(again);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, ext);
    size_t len;
    char *want = read_file(path, &len);
    if (update) {
      if (want && strcmp(want, got) == 0) {
        print_message("same    %s%s\n", name, ext);
      } else if (write_file(path, got)) {
        print_message("updated %s%s (%zu bytes)\n", name, ext, strlen(got));
      } else {
        print_message("FAIL %s: cannot write %s\n", name, path);
        bad++;
      }
    } else if (!want) {
      print_message("FAIL %s: %s is missing; run `make golden-update` and review it\n", name, path);
      bad++;
    } else if (strlen(want) != len || strcmp(want, got) != 0) {
      print_message("FAIL %s: the emitted source differs from %s%s:\n", name, name, ext);
      print_diff(name, ext, want, got);
      bad++;
    } else {
      print_message("ok   %s%s (%zu bytes)\n", name, ext, len);
    }
    free(want);
    free(got);
  }
  if (bad)
    fail_msg("%d of %d golden sources %s; if the change is intended, run `make golden-update` and review "
             "`git diff tests/golden`",
             bad, total, update ? "could not be updated" : "differ or failed");
}

/* Every NAME.cu and NAME.hip has its NAME.json, every NAME.TARGET.hip its
 * row in `extra` (no stale files). */
static void test_no_orphans(void **state) {
  (void)state;
  DIR *d = opendir(dir);
  assert_non_null(d);
  int orphans = 0;
  for (struct dirent *e; (e = readdir(d));) {
    int k = has_suffix(e->d_name, ".cu") ? 0 : has_suffix(e->d_name, ".hip") ? 1 : -1;
    if (k < 0)
      continue;
    size_t n = strlen(e->d_name) - strlen(kinds[k]);
    bool found = false;
    for (int i = 0; i < nnames && !found; i++)
      found = strlen(names[i]) == n && strncmp(names[i], e->d_name, n) == 0;
    for (int x = 0; x < NEXTRA && !found; x++) {
      char want[256];
      snprintf(want, sizeof want, "%s.%s%s", extra[x].name, extra[x].target,
               tl_target_is_amd_name(extra[x].target) ? ".hip" : ".cu");
      found = strcmp(want, e->d_name) == 0;
    }
    if (!found) {
      print_message("%s/%s has no .json beside it\n", dir, e->d_name);
      orphans++;
    }
  }
  closedir(d);
  assert_int_equal(orphans, 0);
}

/* NVRTC accepts each golden program for sm_80 and the cubin holds it. */
static void test_golden_compile(void **state) {
  (void)state;
  tl_error err;
  const char *desc;
  if (!tl_compiler_targets(&desc, &err) || !tl_compiler_target_toolchain("sm_80")) {
    printf("skipping: no NVRTC here: %s\n", tl_compiler_targets(&desc, &err) ? "sm_80 is not offered" : err.message);
    skip();
  }
  int bad = 0;
  for (int i = 0; i < nnames; i++) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.json", dir, names[i]);
    size_t len;
    char *text = read_file(path, &len);
    assert_non_null(text);
    tl_diags diags = {.arena = tl_arena_new()};
    tl_compile_request req = {.program = text, .program_len = len, .target = "sm_80"};
    tl_build *b = NULL;
    tl_status st = tl_compile(&req, &b, &diags, &err);
    if (st != TL_OK) {
      print_message("FAIL %s for sm_80: %s: %s\n", names[i], tl_status_name(st), err.message);
      tl_diags_print(&diags, path, stdout);
      bad++;
    } else {
      tl_cubin_info ci;
      if (tl_cubin_inspect(b->binary, b->binary_size, &ci, &err) != TL_OK) {
        print_message("FAIL %s: not a cubin: %s\n", names[i], err.message);
        bad++;
      } else {
        const tl_cubin_kernel *k = tl_cubin_find(&ci, names[i]);
        if (ci.arch != 80 || !k || k->registers <= 0) {
          print_message("FAIL %s: the cubin is for sm_%d and %s kernel %s with registers\n", names[i], ci.arch,
                        k ? "has" : "lacks", names[i]);
          bad++;
        } else {
          print_message("ok   %s: sm_80 cubin, kernel %s, %d registers, %.0f ms\n", names[i], k->name, k->registers,
                        b->compile_ms);
        }
        tl_cubin_info_free(&ci);
      }
    }
    tl_build_free(b);
    tl_arena_free(diags.arena);
    free(text);
  }
  /* the NVIDIA targets of `extra`: their cubin holds the kernel, built from the golden source */
  for (int x = 0; x < NEXTRA; x++) {
    if (tl_target_is_amd_name(extra[x].target))
      continue;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.json", dir, extra[x].name);
    size_t len;
    char *text = read_file(path, &len);
    assert_non_null(text);
    tl_diags diags = {.arena = tl_arena_new()};
    /* the CUDA back end (the golden source is its CUDA C; auto may build it through emit_ptx.c) */
    tl_compile_request req = {.program = text, .program_len = len, .target = extra[x].target, .backend = "cuda"};
    tl_build *b = NULL;
    tl_cubin_info ci = {0};
    char *want = emit(extra[x].name, extra[x].target);
    if (tl_compile(&req, &b, &diags, &err) != TL_OK) {
      print_message("FAIL %s for %s: %s\n", extra[x].name, extra[x].target, err.message);
      bad++;
    } else if (tl_cubin_inspect(b->binary, b->binary_size, &ci, &err) != TL_OK || !tl_cubin_find(&ci, extra[x].name)) {
      print_message("FAIL %s for %s: the cubin lacks the kernel\n", extra[x].name, extra[x].target);
      bad++;
    } else if (!want || strcmp(want, b->source) != 0) {
      print_message("FAIL %s: tl_compile's CUDA C for %s is not the golden test's\n", extra[x].name, extra[x].target);
      bad++;
    } else {
      print_message("ok   %s: %s cubin, %.0f ms\n", extra[x].name, extra[x].target, b->compile_ms);
    }
    tl_cubin_info_free(&ci);
    free(want);
    tl_build_free(b);
    tl_arena_free(diags.arena);
    free(text);
  }
  assert_int_equal(bad, 0);
}

/* Compiles golden program name for AMD target through tl_compile: the code
 * object must be for target, hold the kernel, and come from the HIP C the
 * golden test emits.  Returns 0, or 1 (with a message) on failure. */
static int compile_hip(const char *name, const char *target) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s.json", dir, name);
  size_t len;
  char *text = read_file(path, &len);
  assert_non_null(text);
  tl_error err;
  tl_diags diags = {.arena = tl_arena_new()};
  tl_compile_request req = {.program = text, .program_len = len, .target = target};
  tl_build *b = NULL;
  tl_status st = tl_compile(&req, &b, &diags, &err);
  tl_hsaco_info hi;
  int bad = 0;
  if (st != TL_OK) {
    print_message("FAIL %s for %s: %s: %s\n", name, target, tl_status_name(st), err.message);
    tl_diags_print(&diags, path, stdout);
    bad = 1;
  } else if (tl_hsaco_inspect(b->binary, b->binary_size, &hi, &err) != TL_OK) {
    print_message("FAIL %s: not a code object: %s\n", name, err.message);
    bad = 1;
  } else {
    const tl_hsaco_kernel *k = tl_hsaco_find(&hi, name);
    char *want = emit(name, target);
    if (strcmp(hi.processor, target) != 0 || !k || k->vgpr_count <= 0) {
      print_message("FAIL %s: the code object is for %s and %s kernel %s\n", name, hi.processor,
                    k ? "has" : "lacks", name);
      bad = 1;
    } else if (!want || strcmp(want, b->source) != 0) {
      print_message("FAIL %s: tl_compile's HIP C for %s is not the golden test's\n", name, target);
      bad = 1;
    } else {
      print_message("ok   %s: %s code object, kernel %s, %d VGPRs, %d SGPRs, %.0f ms\n", name, target, k->name,
                    k->vgpr_count, k->sgpr_count, b->compile_ms);
    }
    free(want);
    tl_hsaco_info_free(&hi);
  }
  tl_build_free(b);
  tl_arena_free(diags.arena);
  free(text);
  return bad;
}

/* The AMD toolchain accepts each golden program for gfx942, and each of
 * `extra` for its target where that is offered; the code object holds the
 * kernel, with one argument per parameter. */
static void test_golden_compile_hip(void **state) {
  (void)state;
  tl_error err;
  const char *desc;
  if (!tl_compiler_targets(&desc, &err) || !tl_compiler_target_toolchain(HIP_TARGET)) {
    printf("skipping: no AMD toolchain offers %s here\n", HIP_TARGET);
    skip();
  }
  int bad = 0;
  for (int i = 0; i < nnames; i++)
    bad += compile_hip(names[i], HIP_TARGET);
  for (int x = 0; x < NEXTRA; x++) {
    if (!tl_target_is_amd_name(extra[x].target))
      continue; /* test_golden_compile's */
    if (tl_compiler_target_toolchain(extra[x].target))
      bad += compile_hip(extra[x].name, extra[x].target);
    else
      print_message("%s.%s.hip: %s is not offered here, not compiled\n", extra[x].name, extra[x].target,
                    extra[x].target);
  }
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_sources),
      cmocka_unit_test(test_no_orphans),
      cmocka_unit_test(test_golden_compile),
      cmocka_unit_test(test_golden_compile_hip),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
