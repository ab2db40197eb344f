/*
 * expr.c - the expression language of Tile IR: a lexer and a Pratt parser
 * with Python's precedence (TILE-IR.md section 5), and the two other
 * string forms built on it: regions ("Q[bz, lo:hi, :]") and assignment
 * statements ("C[i, j] += x").
 *
 * The parser produces untyped, unresolved trees (names as strings); the
 * checker resolves and types them.  Every node records the 1-based column
 * of its first character, so every later error can point into the string.
 * Python forms that Tile IR does not have (0o17, 1_000, **, a if c else b,
 * chained comparisons, A[i][j], keyword arguments) are errors that say
 * what to write instead.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ir.h"

/* ---- lexer ---------------------------------------------------------------- */
typedef enum {
  T_EOF, T_INT, T_REAL, T_NAME, T_OP, T_ASSIGN, /* '=' or 'op=' */
} tok_kind;

typedef struct {
  tok_kind kind;
  int op;       /* T_OP: operator or punctuation ('(' ')' '[' ']' ',' ':'); T_ASSIGN: 0 or op */
  int col;      /* 1-based */
  int len;
  const char *s;
  uint64_t ival;
  double rval;
} token;

typedef struct {
  tl_arena *arena;
  tl_diags *diags;
  const char *text;
  const char *pointer;
  token *toks;
  int ntoks, pos;
  int depth;
  bool failed;
} parser;

static void perr(parser *p, int col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void perr(parser *p, int col, const char *fmt, ...) {
  if (p->failed)
    return; /* one syntax error per string: the rest would be noise */
  p->failed = true;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  tl_diag_add(p->diags, p->pointer, col, "%s", buf);
}

/* Every Python keyword (keyword.kwlist of Python 3.12; the soft keywords
 * match, case and _ are names there and here), and the lowercase literals
 * of Tile IR. */
static const char *const keywords[] = {
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def",
    "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is",
    "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
    "true", "false",
};

bool tl_is_keyword(const char *s, size_t n) {
  for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
    if (strlen(keywords[i]) == n && strncmp(s, keywords[i], n) == 0)
      return true;
  return false;
}

static bool is_name_start(int c) { return isalpha(c) || c == '_'; }
static bool is_name_char(int c) { return isalnum(c) || c == '_'; }

/* Multi-character operators, longest first. */
static const struct {
  const char *text;
  tok_kind kind;
  int op;
} ops[] = {
    {"//=", T_ASSIGN, OP_FLOORDIV}, {"<<=", T_ASSIGN, OP_SHL}, {">>=", T_ASSIGN, OP_SHR},
    {"**", T_OP, -1},               {"//", T_OP, OP_FLOORDIV}, {"<<", T_OP, OP_SHL},
    {">>", T_OP, OP_SHR},           {"<=", T_OP, OP_LE},       {">=", T_OP, OP_GE},
    {"==", T_OP, OP_EQ},            {"!=", T_OP, OP_NE},       {"+=", T_ASSIGN, '+'},
    {"-=", T_ASSIGN, '-'},          {"*=", T_ASSIGN, '*'},     {"/=", T_ASSIGN, '/'},
    {"%=", T_ASSIGN, '%'},          {"&=", T_ASSIGN, '&'},     {"|=", T_ASSIGN, '|'},
    {"^=", T_ASSIGN, '^'},          {"=", T_ASSIGN, 0},
};

static bool lex_number(parser *p, const char *s, int col, token *t) {
  const char *start = s;
  t->col = col;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s += 2;
    if (!isxdigit((unsigned char)*s)) {
      perr(p, col, "hexadecimal literal needs digits after '0x'");
      return false;
    }
    uint64_t v = 0;
    for (; isxdigit((unsigned char)*s); s++) {
      int d = isdigit((unsigned char)*s) ? *s - '0' : (tolower((unsigned char)*s) - 'a' + 10);
      if (v > (UINT64_MAX >> 4)) {
        perr(p, col, "integer literal is too large (the limit is int64)");
        return false;
      }
      v = v << 4 | (uint64_t)d;
    }
    if (*s == '_') {
      perr(p, col, "'_' in numbers is not allowed; write the digits without it");
      return false;
    }
    if (is_name_char((unsigned char)*s)) {
      perr(p, (int)(col + (s - start)), "unexpected '%c' after a number", *s);
      return false;
    }
    if (v > INT64_MAX) {
      perr(p, col, "integer literal is too large (the limit is int64)");
      return false;
    }
    t->kind = T_INT;
    t->ival = v;
    t->len = (int)(s - start);
    return true;
  }
  if (s[0] == '0' && (s[1] == 'o' || s[1] == 'O' || s[1] == 'b' || s[1] == 'B')) {
    perr(p, col, "octal and binary literals are not allowed; write the number in decimal or with '0x'");
    return false;
  }
  bool real = false;
  const char *q = s;
  while (isdigit((unsigned char)*q))
    q++;
  if (*q == '.') {
    real = true;
    q++;
    while (isdigit((unsigned char)*q))
      q++;
  }
  if (*q == 'e' || *q == 'E') {
    const char *e = q + 1;
    if (*e == '+' || *e == '-')
      e++;
    if (!isdigit((unsigned char)*e)) {
      perr(p, (int)(col + (q - start)), "exponent of a real literal needs digits");
      return false;
    }
    while (isdigit((unsigned char)*e))
      e++;
    q = e;
    real = true;
  }
  if (*q == '_') {
    perr(p, col, "'_' in numbers is not allowed; write the digits without it");
    return false;
  }
  if (is_name_char((unsigned char)*q) || *q == '.') {
    perr(p, (int)(col + (q - start)), "unexpected '%c' after a number", *q);
    return false;
  }
  t->len = (int)(q - start);
  char buf[128];
  if (t->len >= (int)sizeof buf) {
    perr(p, col, "number literal is too long");
    return false;
  }
  memcpy(buf, start, (size_t)t->len);
  buf[t->len] = 0;
  if (real) {
    errno = 0;
    t->kind = T_REAL;
    t->rval = strtod(buf, NULL);
    if (isinf(t->rval)) {
      perr(p, col, "real literal '%s' is out of range", buf);
      return false;
    }
    return true;
  }
  if (t->len > 1 && buf[0] == '0') {
    const char *digits = buf + strspn(buf, "0");
    perr(p, col, "leading zeros in a decimal literal are not allowed; write '%s'", *digits ? digits : "0");
    return false;
  }
  errno = 0;
  unsigned long long v = strtoull(buf, NULL, 10);
  if (errno == ERANGE || v > INT64_MAX) {
    perr(p, col, "integer literal is too large (the limit is int64)");
    return false;
  }
  t->kind = T_INT;
  t->ival = v;
  return true;
}

static bool lex(parser *p) {
  const char *s = p->text;
  size_t n = strlen(s);
  if (n > TL_MAX_EXPR_CHARS) {
    perr(p, 0, "expression is %zu characters long; the limit is %d", n, TL_MAX_EXPR_CHARS);
    return false;
  }
  p->toks = tl_arena_alloc(p->arena, sizeof(token) * (n + 1));
  p->ntoks = 0;
  size_t i = 0;
  int brackets = 0;   /* '(' and '[' open now */
  int line_break = 0; /* column of a line break outside brackets after a token, or 0 */
  while (i < n) {
    unsigned char c = (unsigned char)s[i];
    int col = (int)i + 1;
    if (c == ' ' || c == '\t') {
      i++;
      continue;
    }
    /* Python's rule: a line break inside brackets is whitespace; outside
     * them it ends the expression, so only blank lines may come before the
     * first token or after the last one. */
    if (c == '\n' || c == '\r') {
      if (brackets == 0 && p->ntoks > 0 && !line_break)
        line_break = col;
      i++;
      continue;
    }
    if (line_break) {
      perr(p, line_break, "a line break outside brackets ends the expression; write it on one line, or put the "
                          "part that spans lines in parentheses");
      return false;
    }
    token *t = &p->toks[p->ntoks];
    memset(t, 0, sizeof *t);
    t->s = s + i;
    t->col = col;
    if (isdigit(c) || (c == '.' && isdigit((unsigned char)s[i + 1]))) {
      if (!lex_number(p, s + i, col, t))
        return false;
      i += (size_t)t->len;
      p->ntoks++;
      continue;
    }
    if (is_name_start(c)) {
      size_t j = i;
      while (j < n && is_name_char((unsigned char)s[j]))
        j++;
      t->kind = T_NAME;
      t->len = (int)(j - i);
      i = j;
      p->ntoks++;
      continue;
    }
    bool found = false;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
      size_t l = strlen(ops[k].text);
      if (strncmp(s + i, ops[k].text, l) == 0) {
        if (ops[k].op == -1) {
          perr(p, col, "'**' is not allowed; use pow(a, b)");
          return false;
        }
        t->kind = ops[k].kind;
        t->op = ops[k].op;
        t->len = (int)l;
        i += l;
        found = true;
        break;
      }
    }
    if (!found) {
      if ((c == '&' || c == '|') && s[i + 1] == c) {
        perr(p, col, "'%c%c' is not an operator; use '%s'", c, c, c == '&' ? "and" : "or");
        return false;
      }
      if (strchr("+-*/%&|^~<>()[],:", c) && c) {
        t->kind = T_OP;
        t->op = c;
        t->len = 1;
        i++;
        if (c == '(' || c == '[')
          brackets++;
        else if ((c == ')' || c == ']') && brackets > 0)
          brackets--;
      } else if (c == '!') {
        perr(p, col, "'!' is not an operator; use 'not'");
        return false;
      } else if (c == '"' || c == '\'') {
        perr(p, col, "strings are not allowed in expressions");
        return false;
      } else if (c >= 0x20 && c < 0x7f) {
        perr(p, col, "unexpected character '%c'", c);
        return false;
      } else {
        perr(p, col, "unexpected character (byte 0x%02x); expressions are ASCII", c);
        return false;
      }
    }
    p->ntoks++;
  }
  token *t = &p->toks[p->ntoks];
  memset(t, 0, sizeof *t);
  t->kind = T_EOF;
  t->col = (int)n + 1;
  t->s = s + n;
  return true;
}

/* ---- parser --------------------------------------------------------------- */
static token *peek(parser *p) { return &p->toks[p->pos]; }
static token *next(parser *p) {
  token *t = &p->toks[p->pos];
  if (t->kind != T_EOF)
    p->pos++;
  return t;
}
static bool is_op(token *t, int op) { return t->kind == T_OP && t->op == op; }
static bool is_word(token *t, const char *w) {
  return t->kind == T_NAME && (size_t)t->len == strlen(w) && strncmp(t->s, w, (size_t)t->len) == 0;
}

static const char *tok_desc(parser *p, token *t) {
  if (t->kind == T_EOF)
    return "end of expression";
  return tl_arena_printf(p->arena, "'%.*s'", t->len, t->s);
}

static tl_expr *new_expr(parser *p, tl_expr_kind k, int col) {
  tl_expr *e = tl_arena_alloc(p->arena, sizeof *e);
  e->kind = k;
  e->column = col;
  e->pointer = p->pointer;
  e->type = TL_TY_NONE;
  return e;
}

static tl_expr *parse_bp(parser *p, int minbp);

/* Binding powers: higher binds tighter (TILE-IR.md section 5). */
static int infix_bp(token *t) {
  if (t->kind == T_NAME) {
    if (is_word(t, "or"))
      return 1;
    if (is_word(t, "and"))
      return 2;
    return 0;
  }
  if (t->kind != T_OP)
    return 0;
  switch (t->op) {
  case '<': case '>': case OP_LE: case OP_GE: case OP_EQ: case OP_NE: return 4;
  case '|': return 5;
  case '^': return 6;
  case '&': return 7;
  case OP_SHL: case OP_SHR: return 8;
  case '+': case '-': return 9;
  case '*': case '/': case OP_FLOORDIV: case '%': return 10;
  }
  return 0;
}

static bool is_comparison(int op) {
  return op == '<' || op == '>' || op == OP_LE || op == OP_GE || op == OP_EQ || op == OP_NE;
}

static tl_expr *parse_args(parser *p, tl_expr *e, int close) {
  tl_vec args = {0};
  if (!is_op(peek(p), close)) {
    for (;;) {
      token *t = peek(p);
      if (t->kind == T_NAME && p->toks[p->pos + 1].kind == T_ASSIGN && p->toks[p->pos + 1].op == 0) {
        perr(p, t->col, "keyword arguments are not allowed; pass arguments by position");
        return NULL;
      }
      if (close == ']' && is_op(t, ':')) {
        perr(p, t->col, "slices are not allowed in an element access; index one element per dimension");
        return NULL;
      }
      tl_expr *a = parse_bp(p, 1);
      if (!a)
        return NULL;
      if (close == ']' && is_op(peek(p), ':')) {
        perr(p, peek(p)->col, "slices are not allowed in an element access; index one element per dimension");
        return NULL;
      }
      tl_vec_push(p->arena, &args, a);
      if (is_op(peek(p), ',')) {
        next(p);
        if (is_op(peek(p), close))
          break; /* trailing comma */
        continue;
      }
      break;
    }
  }
  token *t = peek(p);
  if (!is_op(t, close)) {
    perr(p, t->col, "expected '%c' or ',' but found %s", close, tok_desc(p, t));
    return NULL;
  }
  next(p);
  if (close == ']' && args.n == 0) {
    perr(p, t->col, "an element access needs at least one index");
    return NULL;
  }
  e->nargs = args.n;
  e->args = (tl_expr **)args.items;
  return e;
}

static tl_expr *parse_primary(parser *p) {
  token *t = next(p);
  switch (t->kind) {
  case T_INT: {
    tl_expr *e = new_expr(p, E_CONST, t->col);
    e->type = TL_TY_UINT;
    e->val.i = (int64_t)t->ival;
    return e;
  }
  case T_REAL: {
    tl_expr *e = new_expr(p, E_CONST, t->col);
    e->type = TL_TY_UREAL;
    e->val.f = t->rval;
    return e;
  }
  case T_NAME: {
    if (is_word(t, "true") || is_word(t, "True") || is_word(t, "false") || is_word(t, "False")) {
      tl_expr *e = new_expr(p, E_CONST, t->col);
      e->type = TL_BOOL;
      e->val.i = t->s[0] == 't' || t->s[0] == 'T';
      return e;
    }
    if (tl_is_keyword(t->s, (size_t)t->len)) {
      perr(p, t->col, "unexpected keyword '%.*s'", t->len, t->s);
      return NULL;
    }
    if (t->len > TL_MAX_NAME) {
      perr(p, t->col, "name is %d characters long; the limit is %d", t->len, TL_MAX_NAME);
      return NULL;
    }
    const char *name = tl_arena_strndup(p->arena, t->s, (size_t)t->len);
    if (is_op(peek(p), '(')) {
      next(p);
      tl_expr *e = new_expr(p, E_CALL, t->col);
      e->name = name;
      if (!parse_args(p, e, ')'))
        return NULL;
      if (is_op(peek(p), '[') || is_op(peek(p), '(')) {
        perr(p, peek(p)->col, "only a name can be indexed or called");
        return NULL;
      }
      return e;
    }
    if (is_op(peek(p), '[')) {
      next(p);
      tl_expr *e = new_expr(p, E_INDEX, t->col);
      e->name = name;
      if (!parse_args(p, e, ']'))
        return NULL;
      if (is_op(peek(p), '[')) {
        perr(p, peek(p)->col, "write '%s[i, j]' with one pair of brackets, not '%s[i][j]'", name, name);
        return NULL;
      }
      return e;
    }
    tl_expr *e = new_expr(p, E_NAME, t->col);
    e->name = name;
    return e;
  }
  case T_OP:
    if (t->op == '(') {
      tl_expr *e = parse_bp(p, 1);
      if (!e)
        return NULL;
      token *c = peek(p);
      if (is_op(c, ',')) {
        perr(p, c->col, "tuples are not allowed");
        return NULL;
      }
      if (!is_op(c, ')')) {
        perr(p, c->col, "expected ')' but found %s", tok_desc(p, c));
        return NULL;
      }
      next(p);
      if (is_op(peek(p), '[') || is_op(peek(p), '(')) {
        perr(p, peek(p)->col, "only a name can be indexed or called");
        return NULL;
      }
      return e;
    }
    if (t->op == '-' || t->op == '~' || t->op == '+') {
      tl_expr *a = parse_bp(p, 11);
      if (!a)
        return NULL;
      if (t->op == '+')
        return a;
      tl_expr *e = new_expr(p, E_UNARY, t->col);
      e->op = t->op;
      e->nargs = 1;
      e->args = tl_arena_alloc(p->arena, sizeof(tl_expr *));
      e->args[0] = a;
      return e;
    }
    break;
  case T_ASSIGN:
    perr(p, t->col, "'%.*s' is not allowed in an expression%s", t->len, t->s,
         t->op == 0 ? "; use '==' to compare" : "");
    return NULL;
  case T_EOF:
    perr(p, t->col, "expression ends too early");
    return NULL;
  }
  perr(p, t->col, "unexpected %s", tok_desc(p, t));
  return NULL;
}

static tl_expr *parse_bp(parser *p, int minbp) {
  if (++p->depth > TL_MAX_EXPR_DEPTH) {
    perr(p, peek(p)->col, "expression is nested too deeply (the limit is %d)", TL_MAX_EXPR_DEPTH);
    p->depth--;
    return NULL;
  }
  tl_expr *lhs;
  token *t = peek(p);
  if (is_word(t, "not") && minbp > 3) {
    /* as in Python, 'not' binds looser than comparisons and arithmetic */
    perr(p, t->col, "'not' cannot stand here without parentheses; write '(not ...)'");
    p->depth--;
    return NULL;
  }
  if (is_word(t, "not")) {
    next(p);
    tl_expr *a = parse_bp(p, 3);
    if (!a) {
      p->depth--;
      return NULL;
    }
    lhs = new_expr(p, E_UNARY, t->col);
    lhs->op = OP_NOT;
    lhs->nargs = 1;
    lhs->args = tl_arena_alloc(p->arena, sizeof(tl_expr *));
    lhs->args[0] = a;
  } else {
    lhs = parse_primary(p);
  }
  while (lhs) {
    token *o = peek(p);
    if (is_word(o, "if")) {
      perr(p, o->col, "conditional expressions are not allowed; use if_then_else(cond, a, b)");
      lhs = NULL;
      break;
    }
    int bp = infix_bp(o);
    if (bp == 0 || bp < minbp)
      break;
    next(p);
    int op = o->kind == T_NAME ? (is_word(o, "or") ? OP_OR : OP_AND) : o->op;
    /* left associative: the right side binds one tighter; comparisons do
     * not chain, so their right side must not contain one either. */
    tl_expr *rhs = parse_bp(p, bp + 1);
    if (!rhs) {
      lhs = NULL;
      break;
    }
    tl_expr *e = new_expr(p, E_BINARY, lhs->column);
    e->op = op;
    e->nargs = 2;
    e->args = tl_arena_alloc(p->arena, 2 * sizeof(tl_expr *));
    e->args[0] = lhs;
    e->args[1] = rhs;
    lhs = e;
    if (is_comparison(op) && infix_bp(peek(p)) == 4) {
      perr(p, peek(p)->col, "chained comparisons are not allowed; combine them with 'and'");
      lhs = NULL;
      break;
    }
  }
  p->depth--;
  return lhs;
}

static bool init_parser(parser *p, tl_arena *arena, const char *text, const char *pointer, tl_diags *diags) {
  memset(p, 0, sizeof *p);
  p->arena = arena;
  p->diags = diags;
  p->text = text;
  p->pointer = pointer;
  return lex(p);
}

static bool expect_end(parser *p) {
  token *t = peek(p);
  if (t->kind == T_ASSIGN) {
    perr(p, t->col, "'%.*s' is not allowed in an expression%s", t->len, t->s, t->op == 0 ? "; use '==' to compare" : "");
    return false;
  }
  if (t->kind != T_EOF) {
    if (t->kind == T_NAME && p->pos > 0 &&
        (p->toks[p->pos - 1].kind == T_NAME || p->toks[p->pos - 1].kind == T_INT))
      perr(p, t->col, "unexpected %s; is an operator missing?", tok_desc(p, t));
    else
      perr(p, t->col, "unexpected %s after the expression", tok_desc(p, t));
    return false;
  }
  return true;
}

tl_expr *tl_parse_expr(tl_arena *arena, const char *text, const char *pointer, tl_diags *diags) {
  parser p;
  if (!init_parser(&p, arena, text, pointer, diags))
    return NULL;
  if (p.toks[0].kind == T_EOF) {
    perr(&p, 1, "expression is empty");
    return NULL;
  }
  tl_expr *e = parse_bp(&p, 1);
  if (!e || !expect_end(&p))
    return NULL;
  return e;
}

/* ---- regions ---------------------------------------------------------------- */
tl_region *tl_parse_region(tl_arena *arena, const char *text, const char *pointer, tl_diags *diags) {
  parser p;
  if (!init_parser(&p, arena, text, pointer, diags))
    return NULL;
  tl_region *r = tl_arena_alloc(arena, sizeof *r);
  r->text = text;
  r->pointer = pointer;
  token *t = next(&p);
  if (t->kind != T_NAME) {
    perr(&p, t->col, "a region starts with a buffer name, not %s", tok_desc(&p, t));
    return NULL;
  }
  if (t->len > TL_MAX_NAME) {
    perr(&p, t->col, "name is %d characters long; the limit is %d", t->len, TL_MAX_NAME);
    return NULL;
  }
  r->name = tl_arena_strndup(arena, t->s, (size_t)t->len);
  if (peek(&p)->kind == T_EOF) {
    r->whole = true;
    return r;
  }
  if (!is_op(peek(&p), '[')) {
    perr(&p, peek(&p)->col, "expected '[' or the end of the region after '%s', found %s", r->name,
         tok_desc(&p, peek(&p)));
    return NULL;
  }
  next(&p);
  for (;;) {
    if (r->nwritten == TL_MAX_DIMS) {
      perr(&p, peek(&p)->col, "a region has at most %d indices", TL_MAX_DIMS);
      return NULL;
    }
    int d = r->nwritten++;
    r->w_col[d] = peek(&p)->col;
    tl_expr *lo = NULL, *hi = NULL;
    if (!is_op(peek(&p), ':')) {
      if (is_op(peek(&p), ']') || is_op(peek(&p), ',')) {
        perr(&p, peek(&p)->col, "expected an index or a slice, found %s", tok_desc(&p, peek(&p)));
        return NULL;
      }
      lo = parse_bp(&p, 1);
      if (!lo)
        return NULL;
    }
    if (is_op(peek(&p), ':')) {
      next(&p);
      r->is_slice[d] = true;
      if (!is_op(peek(&p), ',') && !is_op(peek(&p), ']') && !is_op(peek(&p), ':')) {
        hi = parse_bp(&p, 1);
        if (!hi)
          return NULL;
      }
      if (is_op(peek(&p), ':')) {
        perr(&p, peek(&p)->col, "slices with a step are not allowed");
        return NULL;
      }
    }
    r->w_lo[d] = lo;
    r->w_hi[d] = hi;
    if (is_op(peek(&p), ',')) {
      next(&p);
      if (is_op(peek(&p), ']'))
        break;
      continue;
    }
    break;
  }
  t = peek(&p);
  if (!is_op(t, ']')) {
    perr(&p, t->col, "expected ']' or ',' but found %s", tok_desc(&p, t));
    return NULL;
  }
  next(&p);
  if (is_op(peek(&p), '[')) {
    perr(&p, peek(&p)->col, "write '%s[i, j]' with one pair of brackets, not '%s[i][j]'", r->name, r->name);
    return NULL;
  }
  if (!expect_end(&p))
    return NULL;
  return r;
}

/* ---- assignments ------------------------------------------------------------ */
bool tl_parse_assign(tl_arena *arena, const char *text, const char *pointer, tl_diags *diags,
                     tl_expr **lhs, int *op, tl_expr **rhs) {
  parser p;
  if (!init_parser(&p, arena, text, pointer, diags))
    return false;
  int eq = -1;
  for (int i = 0; i < p.ntoks; i++)
    if (p.toks[i].kind == T_ASSIGN) {
      eq = i;
      break;
    }
  if (eq < 0) {
    perr(&p, 1, "a string statement is an assignment 'LHS = EXPR' (or 'LHS op= EXPR'), and this one has no '='");
    return false;
  }
  token *t = peek(&p);
  if (t->kind != T_NAME) {
    perr(&p, t->col, "the left side of an assignment is a name or an element 'name[i, ...]'");
    return false;
  }
  /* Parse the left side as a primary, then require the '='. */
  tl_expr *l = parse_primary(&p);
  if (!l)
    return false;
  if (l->kind != E_NAME && l->kind != E_INDEX) {
    perr(&p, l->column, "the left side of an assignment is a name or an element 'name[i, ...]'");
    return false;
  }
  token *a = next(&p);
  if (a->kind != T_ASSIGN) {
    perr(&p, a->col, "expected '=' after the left side, found %s", tok_desc(&p, a));
    return false;
  }
  *op = a->op;
  if (peek(&p)->kind == T_EOF) {
    perr(&p, peek(&p)->col, "the assignment has no right side");
    return false;
  }
  tl_expr *r = parse_bp(&p, 1);
  if (!r || !expect_end(&p))
    return false;
  *lhs = l;
  *rhs = r;
  return true;
}
