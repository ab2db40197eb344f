/*
 * test_target.c - unit tests of compiler/target.c: the parse of target
 * names, the table's rows against the figures their sources give (the
 * CUDA C++ Programming Guide's compute capability table, the PTX ISA's
 * target requirements, LLVM's AMDGPU processor table), and the view the
 * passes read (tl_codegen_of).  No toolchain needed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "pass.h"
#include "target.h"

static void test_parse(void **state) {
  (void)state;
  static const struct {
    const char *in;
    tl_status st;
    tl_vendor vendor;
    int arch;
    char variant;
    tl_binary_kind binary;
  } rows[] = {
      {"sm_75", TL_OK, TL_VENDOR_NVIDIA, 75, 0, TL_BINARY_CUBIN},
      {"sm_80", TL_OK, TL_VENDOR_NVIDIA, 80, 0, TL_BINARY_CUBIN},
      {"sm_90a", TL_OK, TL_VENDOR_NVIDIA, 90, 'a', TL_BINARY_CUBIN},
      {"sm_100f", TL_OK, TL_VENDOR_NVIDIA, 100, 'f', TL_BINARY_CUBIN},
      {"sm_121a", TL_OK, TL_VENDOR_NVIDIA, 121, 'a', TL_BINARY_CUBIN},
      {"compute_80", TL_OK, TL_VENDOR_NVIDIA, 80, 0, TL_BINARY_PTX},
      {"compute_90a", TL_OK, TL_VENDOR_NVIDIA, 90, 'a', TL_BINARY_PTX},
      {"gfx90a", TL_OK, TL_VENDOR_AMD, 0x90a, 0, TL_BINARY_HSACO},
      {"gfx1201", TL_OK, TL_VENDOR_AMD, 0x1201, 0, TL_BINARY_HSACO},
      /* well-formed, not in the table */
      {"sm_50", TL_UNSUPPORTED, 0, 0, 0, 0},
      {"sm_99", TL_UNSUPPORTED, 0, 0, 0, 0},
      {"sm_80a", TL_UNSUPPORTED, 0, 0, 0, 0}, /* sm_80 has no 'a' variant */
      {"sm_90f", TL_UNSUPPORTED, 0, 0, 0, 0},
      {"compute_99", TL_UNSUPPORTED, 0, 0, 0, 0},
      {"gfx900", TL_UNSUPPORTED, 0, 0, 0, 0},
      {"gfx90a:xnack-", TL_UNSUPPORTED, 0, 0, 0, 0},
      /* malformed */
      {"sm_8", TL_INVALID_ARG, 0, 0, 0, 0},
      {"sm_1000", TL_INVALID_ARG, 0, 0, 0, 0},
      {"sm_090", TL_INVALID_ARG, 0, 0, 0, 0},
      {"sm_90b", TL_INVALID_ARG, 0, 0, 0, 0},
      {"sm_90aa", TL_INVALID_ARG, 0, 0, 0, 0},
      {"sm90", TL_INVALID_ARG, 0, 0, 0, 0},
      {"compute_", TL_INVALID_ARG, 0, 0, 0, 0},
      {"", TL_INVALID_ARG, 0, 0, 0, 0},
      {"SM_80", TL_INVALID_ARG, 0, 0, 0, 0},
      {"sm_80 ", TL_INVALID_ARG, 0, 0, 0, 0},
      {"GFX90A", TL_INVALID_ARG, 0, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    tl_target t;
    tl_error err;
    tl_status st = tl_target_parse(rows[i].in, &t, &err);
    if (st != rows[i].st)
      fail_msg("'%s': %s, not %s (%s)", rows[i].in, tl_status_name(st), tl_status_name(rows[i].st), err.message);
    if (st == TL_INVALID_ARG) {
      assert_non_null(strstr(err.message, "is not a target name"));
      continue;
    }
    if (st == TL_UNSUPPORTED) {
      assert_non_null(strstr(err.message, "is not a target this compiler knows (it knows sm_75, sm_80"));
      assert_non_null(strstr(err.message, "sm_90[a], sm_100[af]"));
      assert_non_null(strstr(err.message, "gfx1201"));
      continue;
    }
    assert_string_equal(t.name, rows[i].in);
    assert_int_equal(t.vendor, rows[i].vendor);
    assert_int_equal(t.arch, rows[i].arch);
    assert_int_equal(t.variant, rows[i].variant);
    assert_int_equal(t.binary, rows[i].binary);
    assert_int_equal(t.dialect, rows[i].vendor == TL_VENDOR_AMD ? TL_DIALECT_HIP : TL_DIALECT_CUDA);
  }
  tl_target t;
  assert_int_equal(tl_target_parse(NULL, &t, NULL), TL_INVALID_ARG);
  assert_true(tl_target_is_amd_name("gfx942"));
  assert_false(tl_target_is_amd_name("gfx"));
  assert_false(tl_target_is_amd_name("sm_90a"));
  assert_false(tl_target_is_amd_name(NULL));
}

/* What each target may use, from the PTX ISA's requirements. */
static void test_features(void **state) {
  (void)state;
  static const struct {
    const char *name, *features;
  } rows[] = {
      {"sm_75", "ldmatrix"},
      {"compute_75", "ldmatrix"},
      {"sm_80", "ldmatrix mma cp.async bf16-mma int8-mma"},
      {"sm_86", "ldmatrix mma cp.async bf16-mma int8-mma"},
      {"sm_89", "ldmatrix mma cp.async bf16-mma int8-mma fp8-mma"},
      {"sm_90", "ldmatrix mma cp.async bf16-mma int8-mma fp8-mma tma clusters pdl"},
      {"sm_90a", "ldmatrix mma cp.async bf16-mma int8-mma fp8-mma tma clusters pdl wgmma"},
      {"compute_90a", "ldmatrix mma cp.async bf16-mma int8-mma fp8-mma tma clusters pdl wgmma"},
      {"sm_100a", "ldmatrix mma cp.async bf16-mma int8-mma fp8-mma tma clusters pdl"},
      {"sm_120f", "ldmatrix mma cp.async bf16-mma int8-mma fp8-mma tma clusters pdl"},
      {"gfx942", "bf16-mma"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    tl_target t;
    assert_int_equal(tl_target_parse(rows[i].name, &t, NULL), TL_OK);
    char buf[256];
    if (strcmp(tl_target_features_str(&t, " ", buf, sizeof buf), rows[i].features) != 0)
      fail_msg("%s: features '%s', not '%s'", rows[i].name, buf, rows[i].features);
  }
  for (int b = 0; b < TL_FEATURE_COUNT_; b++) {
    assert_non_null(tl_feature_name(b));
    assert_non_null(tl_feature_what(b));
  }
  assert_null(tl_feature_name(TL_FEATURE_COUNT_));
}

/* Limits and the AMD rows (EF_AMDGPU_MACH as LLVM's BinaryFormat/ELF.h lists them). */
static void test_rows(void **state) {
  (void)state;
  static const struct {
    const char *name;
    int64_t smem;
    int warp, mach;
    tl_amd_matrix matrix;
  } rows[] = {
      {"sm_75", 65536, 32, 0, TL_AMD_MATRIX_NONE},     {"sm_80", 166912, 32, 0, TL_AMD_MATRIX_NONE},
      {"sm_86", 101376, 32, 0, TL_AMD_MATRIX_NONE},    {"sm_87", 166912, 32, 0, TL_AMD_MATRIX_NONE},
      {"sm_89", 101376, 32, 0, TL_AMD_MATRIX_NONE},    {"sm_90a", 232448, 32, 0, TL_AMD_MATRIX_NONE},
      {"sm_120", 101376, 32, 0, TL_AMD_MATRIX_NONE},   {"gfx90a", 65536, 64, 0x3f, TL_AMD_MATRIX_MFMA},
      {"gfx942", 65536, 64, 0x4c, TL_AMD_MATRIX_MFMA}, {"gfx950", 163840, 64, 0x4f, TL_AMD_MATRIX_MFMA},
      {"gfx1100", 65536, 32, 0x41, TL_AMD_MATRIX_WMMA}, {"gfx1201", 65536, 32, 0x4e, TL_AMD_MATRIX_WMMA_GFX12},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    tl_target t;
    assert_int_equal(tl_target_parse(rows[i].name, &t, NULL), TL_OK);
    assert_int_equal(t.smem_bytes, rows[i].smem);
    assert_int_equal(t.warp, rows[i].warp);
    assert_int_equal(t.amd_matrix, rows[i].matrix);
    assert_true(t.regs_per_thread >= 255);
    if (t.vendor == TL_VENDOR_AMD) {
      assert_int_equal(t.amd_mach, rows[i].mach);
      const tl_target *r = tl_target_by_amd_mach(rows[i].mach);
      assert_non_null(r);
      assert_string_equal(r->name, rows[i].name);
    } else {
      assert_int_equal(t.regs_per_block, 65536);
    }
  }
  assert_null(tl_target_by_amd_mach(0));
  /* the table: names unique, NVIDIA's first, then AMD's */
  size_t n;
  const tl_target *table = tl_target_table(&n);
  assert_true(n >= 18 && n <= TL_TARGET_ROWS_MAX);
  for (size_t i = 0; i < n; i++) {
    for (size_t j = i + 1; j < n; j++)
      assert_string_not_equal(table[i].name, table[j].name);
    if (i)
      assert_true(table[i - 1].vendor <= table[i].vendor);
  }
  tl_target t;
  assert_int_equal(tl_target_parse("sm_90a", &t, NULL), TL_OK);
  char *j = tl_target_json(&t);
  assert_non_null(j);
  assert_string_equal(j, "{\"vendor\":\"nvidia\",\"arch\":90,\"variant\":\"a\",\"family\":\"Hopper\",\"binary\":"
                         "\"cubin\",\"dialect\":\"cuda\",\"warp\":32,\"features\":[\"ldmatrix\",\"mma\",\"cp.async\","
                         "\"bf16-mma\",\"int8-mma\",\"fp8-mma\",\"tma\",\"clusters\",\"pdl\",\"wgmma\"],\"amd_matrix\":\"none\","
                         "\"shared_bytes\":232448,\"registers_per_thread\":255,\"registers_per_block\":65536}");
  free(j);
}

/* The passes' view: sm_75 gets neither mma.sync nor cp.async (the issue's
 * sm_75 toolchain error), sm_80 NVIDIA's full set. */
static void test_codegen_view(void **state) {
  (void)state;
  tl_target t;
  assert_int_equal(tl_target_parse("sm_75", &t, NULL), TL_OK);
  tl_codegen cg = tl_codegen_of(&t);
  assert_int_equal(cg.dialect, TL_DIALECT_CUDA);
  assert_int_equal(cg.warp, 32);
  assert_false(cg.mma);
  assert_false(cg.async_copy);
  assert_false(cg.wgmma);
  assert_false(cg.int8_mma || cg.fp8_mma);
  assert_int_equal(tl_target_parse("sm_80", &t, NULL), TL_OK);
  cg = tl_codegen_of(&t);
  assert_memory_equal(&cg, &tl_codegen_cuda, sizeof cg);
  assert_true(cg.int8_mma);
  assert_false(cg.fp8_mma); /* float8 mma.sync from sm_89 */
  assert_int_equal(tl_target_parse("sm_89", &t, NULL), TL_OK);
  assert_true(tl_codegen_of(&t).fp8_mma);
  assert_int_equal(tl_target_parse("sm_120", &t, NULL), TL_OK);
  assert_true(tl_codegen_of(&t).fp8_mma && tl_codegen_of(&t).int8_mma);
  assert_int_equal(tl_target_parse("compute_90a", &t, NULL), TL_OK);
  assert_true(tl_codegen_of(&t).wgmma);
  assert_int_equal(tl_target_parse("sm_100a", &t, NULL), TL_OK);
  assert_false(tl_codegen_of(&t).wgmma);
  assert_int_equal(tl_target_parse("gfx1100", &t, NULL), TL_OK);
  cg = tl_codegen_of(&t);
  assert_int_equal(cg.dialect, TL_DIALECT_HIP);
  assert_int_equal(cg.warp, 32);
  assert_false(cg.mma || cg.async_copy || cg.wgmma);
  assert_int_equal(cg.amd_matrix, TL_AMD_MATRIX_WMMA);
  int64_t lim;
  tl_error err;
  assert_int_equal(tl_codegen_for("gfx950", &cg, &lim, &err), TL_OK);
  assert_int_equal(lim, 163840);
  assert_int_equal(tl_codegen_for("sm_7", &cg, &lim, &err), TL_INVALID_ARG);
}

/* A device's target: the 'a' variant where it adds what the code generator
 * uses (sm_90a: wgmma), else the plain cubin target, for any arch. */
static void test_for_arch(void **state) {
  (void)state;
  static const struct {
    int arch;
    const char *want;
  } cases[] = {{90, "sm_90a"}, {80, "sm_80"}, {75, "sm_75"}, {89, "sm_89"}, {100, "sm_100"}, {120, "sm_120"}, {95, "sm_95"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char t[16];
    tl_target_for_arch(cases[i].arch, t, sizeof t);
    assert_string_equal(t, cases[i].want);
  }
  char small[6];
  tl_target_for_arch(90, small, sizeof small); /* truncated, terminated */
  assert_string_equal(small, "sm_90");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_features),
      cmocka_unit_test(test_rows),
      cmocka_unit_test(test_codegen_view),
      cmocka_unit_test(test_for_arch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
