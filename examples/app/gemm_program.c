/*
 * gemm_program.c - examples/gemm.json, embedded in the example application
 * at build time (the assembler's .incbin, relative to the repository root
 * where make runs), so that the application carries its kernel's source and
 * nothing else: no compiler, no files.  The Makefile makes this object
 * depend on examples/gemm.json.
 */
#include <stddef.h>

__asm__(".section .rodata\n"
        ".balign 16\n"
        ".globl tl_app_gemm_json\n"
        "tl_app_gemm_json:\n"
        ".incbin \"examples/gemm.json\"\n"
        ".globl tl_app_gemm_json_end\n"
        "tl_app_gemm_json_end:\n"
        ".byte 0\n"
        ".previous\n");
