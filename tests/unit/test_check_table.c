/*
 * test_check_table.c - the table of bad programs (tests/check/bad.txt) and
 * the examples, run through the front end in-process.
 *
 * For every case of the table (its format is described at the top of
 * bad.txt) the program is loaded with tl_load_program and its overrides,
 * the diagnostics are printed with tl_diags_print as `tlc check` would print
 * them (file name "prog.json"), and the text is compared exactly with the
 * case's expected lines.  A mismatch prints the case's name and line, the
 * expected and the actual text, and a line diff.  Cases marked
 * `# KNOWN-BAD` are diagnostics the checker is known to get wrong: their
 * expected text is what the checker should print; they are counted and
 * listed, not failed, and a KNOWN-BAD case that now matches fails the test
 * (so that the mark is removed once the checker is fixed).  The table must
 * hold at least MIN_CASES cases.
 *
 * Every .json file in examples/ must load with no diagnostic at all.
 *
 * Files are found under $TL_SRCDIR when it is set, else relative to the
 * current directory (make test runs from the repository root).
 * TL_CHECK_TABLE_DUMP=1 prints every case with the output the checker gives
 * now, in the table's format (to help write new cases; judge it first).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <glob.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define MIN_CASES 50
#define MAX_DEFS 16
#define MAX_TABLE_BYTES (8u << 20)

typedef struct {
  char *name;
  int line;        /* line of the "###" header in bad.txt */
  bool known_bad;
  tl_define defs[MAX_DEFS];
  int ndefs;
  char *program;   /* the program text: its lines, each ending in '\n' */
  char *expected;  /* the expected output: its lines, each ending in '\n' */
} tcase;

typedef struct {
  tcase *cases;
  int n, cap;
} table;

/* ---- small helpers ------------------------------------------------------ */

static const char *srcdir(void) {
  const char *d = getenv("TL_SRCDIR");
  return d && *d ? d : ".";
}

static char *path_in_src(const char *rel) {
  const char *d = srcdir();
  size_t n = strlen(d) + 1 + strlen(rel) + 1;
  char *p = malloc(n);
  assert_non_null(p);
  snprintf(p, n, "%s/%s", d, rel);
  return p;
}

/* Reads a whole file; NULL (with a message) when it cannot. */
static char *read_all(const char *path, size_t *len, size_t limit) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    print_message("cannot open %s\n", path);
    return NULL;
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  assert_non_null(buf);
  for (;;) {
    if (n == cap) {
      if (cap >= limit) {
        print_message("%s is larger than %zu bytes\n", path, limit);
        free(buf);
        fclose(f);
        return NULL;
      }
      cap *= 2;
      buf = realloc(buf, cap + 1);
      assert_non_null(buf);
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  bool err = ferror(f);
  fclose(f);
  if (err) {
    print_message("cannot read %s\n", path);
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

/* A growable string. */
typedef struct {
  char *s;
  size_t n, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1)
      cap *= 2;
    b->s = realloc(b->s, cap);
    assert_non_null(b->s);
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

static char *sb_take(sbuf *b) {
  if (!b->s)
    sb_add(b, "", 0);
  char *s = b->s;
  memset(b, 0, sizeof *b);
  return s;
}

static char *xstrndup(const char *s, size_t n) {
  char *p = malloc(n + 1);
  assert_non_null(p);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

static bool starts_with(const char *line, size_t len, const char *prefix) {
  size_t n = strlen(prefix);
  return len >= n && memcmp(line, prefix, n) == 0;
}

static bool is_line(const char *line, size_t len, const char *word) {
  return len == strlen(word) && memcmp(line, word, len) == 0;
}

/* ---- the table file --------------------------------------------------------- */

static void free_table(table *t) {
  for (int i = 0; i < t->n; i++) {
    tcase *c = &t->cases[i];
    free(c->name);
    for (int k = 0; k < c->ndefs; k++) {
      free((char *)c->defs[k].name);
      free((char *)c->defs[k].value);
    }
    free(c->program);
    free(c->expected);
  }
  free(t->cases);
  memset(t, 0, sizeof *t);
}

/* Parses the table text.  Returns false, after printing FILE:LINE and the
 * problem, when the file does not follow the format. */
static bool parse_table(const char *file, const char *text, size_t len, table *t) {
  enum { HEADER, CASE_HEAD, PROGRAM, EXPECTED } state = HEADER;
  sbuf prog = {0}, exp = {0};
  tcase *cur = NULL;
  int lineno = 0;
  bool ok = true;
  const char *p = text, *end = text + len;
  while (ok && p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    const char *line = p;
    p = nl ? nl + 1 : end;
    lineno++;
    if (n > 0 && line[n - 1] == '\r') {
      print_message("%s:%d: carriage return at the end of a line\n", file, lineno);
      ok = false;
      break;
    }
    if (starts_with(line, n, "###")) {
      /* a new case; finish the one before */
      if (cur && state != EXPECTED) {
        print_message("%s:%d: case \"%s\" (line %d) has no '---' line\n", file, lineno, cur->name, cur->line);
        ok = false;
        break;
      }
      if (cur) {
        cur->program = sb_take(&prog);
        cur->expected = sb_take(&exp);
      }
      if (n < 5 || line[3] != ' ') {
        print_message("%s:%d: a case starts with '### NAME'\n", file, lineno);
        ok = false;
        break;
      }
      if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->cases = realloc(t->cases, sizeof(tcase) * (size_t)t->cap);
        assert_non_null(t->cases);
      }
      cur = &t->cases[t->n++];
      memset(cur, 0, sizeof *cur);
      cur->name = xstrndup(line + 4, n - 4);
      cur->line = lineno;
      for (int i = 0; i < t->n - 1; i++)
        if (strcmp(t->cases[i].name, cur->name) == 0) {
          print_message("%s:%d: case name '%s' is used twice (first at line %d)\n", file, lineno, cur->name,
                      t->cases[i].line);
          ok = false;
        }
      state = CASE_HEAD;
      continue;
    }
    switch (state) {
    case HEADER:
      break; /* the documentation at the top */
    case CASE_HEAD:
      if (starts_with(line, n, "#")) {
        if (is_line(line, n, "# KNOWN-BAD") || starts_with(line, n, "# KNOWN-BAD "))
          cur->known_bad = true;
        break; /* a note about the case */
      }
      if (starts_with(line, n, "-D ")) {
        const char *eq = memchr(line + 3, '=', n - 3);
        if (!eq || eq == line + 3) {
          print_message("%s:%d: an override line is '-D NAME=VALUE'\n", file, lineno);
          ok = false;
          break;
        }
        if (cur->ndefs == MAX_DEFS) {
          print_message("%s:%d: more than %d overrides\n", file, lineno, MAX_DEFS);
          ok = false;
          break;
        }
        cur->defs[cur->ndefs].name = xstrndup(line + 3, (size_t)(eq - (line + 3)));
        cur->defs[cur->ndefs].value = xstrndup(eq + 1, (size_t)(line + n - (eq + 1)));
        cur->ndefs++;
        break;
      }
      state = PROGRAM; /* this line is the first of the program */
      /* fall through */
    case PROGRAM:
      if (is_line(line, n, "---")) {
        state = EXPECTED;
        break;
      }
      sb_add(&prog, line, n);
      sb_add(&prog, "\n", 1);
      break;
    case EXPECTED:
      sb_add(&exp, line, n);
      sb_add(&exp, "\n", 1);
      break;
    }
  }
  if (ok && cur) {
    if (state != EXPECTED) {
      print_message("%s: case \"%s\" (line %d) has no '---' line\n", file, cur->name, cur->line);
      ok = false;
    } else {
      cur->program = sb_take(&prog);
      cur->expected = sb_take(&exp);
    }
  }
  free(prog.s);
  free(exp.s);
  if (!ok)
    return false;
  /* Cases are separated by blank lines: drop the trailing blank lines of
   * each expected text; an empty expected text is a mistake in the table
   * (this is a table of bad programs). */
  for (int i = 0; i < t->n; i++) {
    tcase *c = &t->cases[i];
    size_t m = strlen(c->expected);
    while (m > 0 && c->expected[m - 1] == '\n' && (m == 1 || c->expected[m - 2] == '\n'))
      c->expected[--m] = 0;
    if (m == 0) {
      print_message("%s:%d: case \"%s\" expects no diagnostic; every case of the table must expect one\n", file,
                  c->line, c->name);
      ok = false;
    }
  }
  return ok;
}

/* ---- running a case ----------------------------------------------------------- */

/* Loads text with the overrides; returns what `tlc check` would print for
 * it (malloc'd).  *consistent is false when tl_load_program's result
 * disagrees with the diagnostics (NULL with none, or a program with some). */
static char *run_program(const char *text, size_t len, const tl_define *defs, int ndefs, bool *consistent) {
  tl_arena *arena = tl_arena_new();
  tl_diags diags = {.arena = arena};
  tl_program *prog = tl_load_program(arena, text, len, defs, ndefs, &diags);
  *consistent = (prog == NULL) == (diags.n > 0 || diags.truncated);
  char *out = NULL;
  size_t outlen = 0;
  FILE *f = open_memstream(&out, &outlen);
  assert_non_null(f);
  tl_diags_print(&diags, "prog.json", f);
  assert_int_equal(fclose(f), 0);
  tl_arena_free(arena);
  return out;
}

/* Splits text into lines (pointers into a copy); returns the count. */
static int split_lines(char *text, char ***out) {
  int n = 0, cap = 16;
  char **v = malloc(sizeof(char *) * (size_t)cap);
  assert_non_null(v);
  char *p = text;
  while (*p) {
    char *nl = strchr(p, '\n');
    if (n == cap) {
      cap *= 2;
      v = realloc(v, sizeof(char *) * (size_t)cap);
      assert_non_null(v);
    }
    v[n++] = p;
    if (!nl)
      break;
    *nl = 0;
    p = nl + 1;
  }
  *out = v;
  return n;
}

/* Prints a line diff (longest common subsequence) of expected and got:
 * "  " common, "- " expected only, "+ " got only. */
static void print_diff(const char *expected, const char *got) {
  char *a = xstrndup(expected, strlen(expected)), *b = xstrndup(got, strlen(got));
  char **la, **lb;
  int na = split_lines(a, &la), nb = split_lines(b, &lb);
  int *lcs = calloc((size_t)(na + 1) * (size_t)(nb + 1), sizeof(int));
  assert_non_null(lcs);
#define L(i, j) lcs[(size_t)(i) * (size_t)(nb + 1) + (size_t)(j)]
  for (int i = na - 1; i >= 0; i--)
    for (int j = nb - 1; j >= 0; j--)
      L(i, j) = strcmp(la[i], lb[j]) == 0 ? L(i + 1, j + 1) + 1
                : L(i + 1, j) >= L(i, j + 1) ? L(i + 1, j) : L(i, j + 1);
  int i = 0, j = 0;
  while (i < na || j < nb) {
    if (i < na && j < nb && strcmp(la[i], lb[j]) == 0) {
      print_message("    %s\n", la[i]);
      i++, j++;
    } else if (i < na && (j == nb || L(i + 1, j) >= L(i, j + 1))) {
      print_message("  - %s\n", la[i++]);
    } else {
      print_message("  + %s\n", lb[j++]);
    }
  }
#undef L
  free(lcs);
  free(la);
  free(lb);
  free(a);
  free(b);
}

static void print_indented(const char *text) {
  const char *p = text;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    print_message("    %.*s\n", (int)n, p);
    p = nl ? nl + 1 : p + n;
  }
}

/* ---- tests ---------------------------------------------------------------------- */

static void test_table(void **state) {
  (void)state;
  char *file = path_in_src("tests/check/bad.txt");
  size_t len = 0;
  char *text = read_all(file, &len, MAX_TABLE_BYTES);
  if (!text) {
    free(file);
    fail_msg("cannot read the table (set TL_SRCDIR to the repository root, or run from there)");
  }
  table t = {0};
  bool parsed = parse_table(file, text, len, &t);
  free(text);
  if (!parsed) {
    free_table(&t);
    free(file);
    fail_msg("the table does not follow its format (see above)");
  }
  bool dump = getenv("TL_CHECK_TABLE_DUMP") && *getenv("TL_CHECK_TABLE_DUMP");
  int npass = 0, nfail = 0, nknown = 0, nfixed = 0;
  for (int i = 0; i < t.n; i++) {
    tcase *c = &t.cases[i];
    bool consistent;
    char *got = run_program(c->program, strlen(c->program), c->defs, c->ndefs, &consistent);
    bool match = consistent && strcmp(got, c->expected) == 0;
    if (dump) {
      /* plain stdio: cmocka's print_message cuts long texts */
      printf("### %s\n%s", c->name, c->known_bad ? "# KNOWN-BAD\n" : "");
      for (int k = 0; k < c->ndefs; k++)
        printf("-D %s=%s\n", c->defs[k].name, c->defs[k].value);
      printf("%s---\n%s\n", c->program, got);
    }
    if (dump) {
      /* only the dump; the summary below still counts */
      if (c->known_bad)
        match ? nfixed++ : nknown++;
      else
        match ? npass++ : nfail++;
    } else if (c->known_bad) {
      if (match) {
        nfixed++;
        print_message("FIXED  %s:%d: case \"%s\" is marked KNOWN-BAD but now gives the expected output; remove the "
                    "'# KNOWN-BAD' line\n", file, c->line, c->name);
      } else {
        nknown++;
        print_message("KNOWN-BAD (expected to fail)  %s:%d: %s\n", file, c->line, c->name);
        print_message("  expected:\n");
        print_indented(c->expected);
        print_message("  got:\n");
        print_indented(got);
      }
    } else if (match) {
      npass++;
    } else {
      nfail++;
      print_message("FAIL  %s:%d: case \"%s\"\n", file, c->line, c->name);
      if (!consistent)
        print_message("  tl_load_program %s\n", got[0] ? "returned a program although it reported diagnostics"
                                                     : "returned NULL without any diagnostic");
      print_message("  expected:\n");
      print_indented(c->expected);
      print_message("  got:\n");
      print_indented(got);
      print_message("  diff (- expected, + got):\n");
      print_diff(c->expected, got);
    }
    free(got);
  }
  print_message("check table: %d cases: %d passed, %d failed, %d known-bad (expected failures), %d known-bad now "
                "fixed\n", t.n, npass, nfail, nknown, nfixed);
  int ncases = t.n;
  free_table(&t);
  free(file);
  if (ncases < MIN_CASES)
    print_message("the table has %d cases; it must have at least %d\n", ncases, MIN_CASES);
  if (ncases < MIN_CASES || nfail > 0 || nfixed > 0)
    fail_msg("%d case(s) failed, %d KNOWN-BAD case(s) now pass, %d case(s) in the table (at least %d needed)", nfail,
             nfixed, ncases, MIN_CASES);
}

static void test_examples_load_clean(void **state) {
  (void)state;
  char *pattern = path_in_src("examples/*.json");
  glob_t g;
  int rc = glob(pattern, 0, NULL, &g);
  free(pattern);
  if (rc != 0)
    fail_msg("no examples/*.json found under %s", srcdir());
  int bad = 0;
  for (size_t i = 0; i < g.gl_pathc; i++) {
    size_t len = 0;
    char *text = read_all(g.gl_pathv[i], &len, TL_MAX_PROGRAM_BYTES + 1);
    if (!text) {
      bad++;
      continue;
    }
    bool consistent;
    char *got = run_program(text, len, NULL, 0, &consistent);
    if (got[0] || !consistent) {
      bad++;
      print_message("FAIL  %s does not load cleanly:\n%s", g.gl_pathv[i], got);
    }
    free(got);
    free(text);
  }
  print_message("examples: %zu loaded, %d with diagnostics\n", g.gl_pathc, bad);
  globfree(&g);
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_examples_load_clean),
      cmocka_unit_test(test_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
