/*
 * fuzz_check.c - the libFuzzer target of the front end: loads the input
 * bytes as a tile program (tl_load_program: JSON parsing, the expression
 * parser, the checker) and frees everything.  Nothing is printed; the
 * diagnostics are formatted into a memory stream and thrown away, so that
 * their printing is exercised too.
 *
 * An input may start with up to MAX_DEFS lines "-D NAME=VALUE\n": each is
 * a constant override (as `tlc check -D`), and the program is the rest.
 * The corpus seeds of tests/check/bad.txt use this for their overrides.
 *
 * Built two ways: `make fuzz` (clang -fsanitize=fuzzer, build/fuzz/) and,
 * with replay_main.c, as build/tests/fuzz_replay, which `make test` runs on
 * tests/fuzz/corpus.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define MAX_DEFS 4
#define MAX_DEF_LINE 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tl_define defs[MAX_DEFS];
  char *owned[MAX_DEFS];
  int ndefs = 0;
  const char *text = (const char *)data;
  /* leading "-D NAME=VALUE\n" lines */
  while (ndefs < MAX_DEFS && size >= 3 && memcmp(text, "-D ", 3) == 0) {
    const char *nl = memchr(text, '\n', size < MAX_DEF_LINE ? size : MAX_DEF_LINE);
    if (!nl)
      break;
    size_t n = (size_t)(nl - text) - 3;
    const char *eq = memchr(text + 3, '=', n);
    if (!eq || eq == text + 3 || memchr(text + 3, '\0', n))
      break;
    char *line = malloc(n + 1);
    if (!line)
      abort();
    memcpy(line, text + 3, n);
    line[n] = 0;
    line[eq - (text + 3)] = 0;
    owned[ndefs] = line;
    defs[ndefs].name = line;
    defs[ndefs].value = line + (eq - (text + 3)) + 1;
    ndefs++;
    size -= (size_t)(nl + 1 - text);
    text = nl + 1;
  }
  tl_arena *arena = tl_arena_new();
  tl_diags diags = {.arena = arena};
  tl_program *prog = tl_load_program(arena, text, size, defs, ndefs, &diags);
  /* the contract of tl_load_program: a program exactly when no diagnostic */
  if ((prog == NULL) != (diags.n > 0 || diags.truncated))
    abort();
  char *out = NULL;
  size_t outlen = 0;
  FILE *f = open_memstream(&out, &outlen);
  if (f) {
    tl_diags_print(&diags, "prog.json", f);
    fclose(f);
    free(out);
  }
  tl_arena_free(arena);
  for (int i = 0; i < ndefs; i++)
    free(owned[i]);
  return 0;
}
