#!/usr/bin/env python3
"""tests/sh/collectives.py - checks that every block barrier and warp shuffle
in generated CUDA or HIP C is reached by every thread that it waits for.

    python3 tests/sh/collectives.py [--count] FILE.cu|FILE.hip...

A barrier (`__syncthreads();`, `tl_syncthreads();`) or a shuffle
(`__shfl*_sync(...)`, `tl_shfl_xor(...)`) that only some threads reach hangs
the block or the warp on sm_70 and later (and reads inactive lanes on AMD):
TileLang's top-k never finished on an H100 because the integer max of a row
reduction put its shuffle in the unchosen arm of a `?:` (issue 10).  Two
rules, checked in the kernel's body (the prelude's helpers are skipped):

1. form: a barrier is a statement of its own; a shuffle is the whole right
   side of an assignment (`T x = SHFL(...);`), never an operand of `?:`,
   `&&` or `||`, which would run it in only some threads.
2. control: no enclosing `if`, `else`, `for` or `while` depends on the
   thread, and no thread-dependent `break`, `continue` or `return` comes
   before it in an enclosing loop (or the kernel).  A value depends on the
   thread when it mentions the thread's index (`tl_tid`, `threadIdx`, the
   AMD work-item id, the lane) or a name assigned from one: scalars, and
   the per-thread arrays `r_*` (fragment registers) and `l_*` (local
   buffers); also every scalar or per-thread array assigned under
   thread-dependent control.  A loop variable declared in its header
   (`for (int i = 0; ...)`) is a fresh name there: the header depends on
   the thread only through its other names.  The analysis ignores the order of statements
   (a name once thread-dependent is so everywhere), so it may refuse code
   that is fine; it never accepts a barrier under an `if` on the thread.
   Each kernel of a file (a program of several) starts with no `return`
   seen (a warp-specialized kernel's producer returns at its end).
   One kind of `if` on the thread is warp-uniform: `if (tl_tid >= N)` or
   `if (tl_tid < N)` with N a multiple of 32 (the producer warpgroup of a
   warp-specialized kernel, pass_wspec.c) splits the block between whole
   warps, so a shuffle after or under it is reached by every lane of its
   warp; a block barrier is not (the other warps are elsewhere).

It reads the emitter's layout of statements: one statement per line, a
control header either ending in `{` or governing the next line (or the rest
of its own line).  Prints one line per violation, FILE:LINE: RULE: TEXT,
and exits 1 if any; --count prints "N barriers, N shuffles checked" last.
"""
import re, sys

BARRIER = re.compile(r"\b(__syncthreads|tl_syncthreads)\s*\(")
SHUFFLE = re.compile(r"\b(__shfl\w*_sync|tl_shfl_xor)\s*\(")
BARRIER_STMT = re.compile(r"^(__syncthreads|tl_syncthreads)\(\);$")
WARP_IF = re.compile(r"^if\s*\(\s*tl_tid\s*(>=|<)\s*(\d+)\s*\)$")
SHUFFLE_STMT = re.compile(r"^(const\s+)?([A-Za-z_][\w ]*\s)?[A-Za-z_]\w*\s*=\s*(__shfl\w*_sync|tl_shfl_xor)\((.*)\);$")
THREAD = re.compile(r"\b(tl_tid|threadIdx|__builtin_amdgcn_workitem_id_[xyz]|__builtin_amdgcn_mbcnt_\w+|tl_lane|__lane_id)\b")
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
HEADER = re.compile(r"^(if|for|while)\s*\(")


def parens(s, i):
    """The index just past the parenthesis that closes the one at s[i]."""
    depth = 0
    for j in range(i, len(s)):
        depth += {"(": 1, ")": -1}.get(s[j], 0)
        if depth == 0:
            return j + 1
    return len(s)


def statements(line):
    """The statements of a line, split at the semicolons outside parentheses
    and string literals, each with its semicolon."""
    out, depth, quote, start = [], 0, False, 0
    for i, ch in enumerate(line):
        if quote:
            quote = not (ch == '"' and line[i - 1] != "\\")
        elif ch == '"':
            quote = True
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ";" and depth == 0:
            out.append(line[start:i + 1].strip())
            start = i + 1
    if line[start:].strip():
        out.append(line[start:].strip())
    return out


def top_assign(stmt):
    """(lhs, rhs) of an assignment or initialized declaration, else None."""
    depth = 0
    for i, ch in enumerate(stmt):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "=" and depth == 0:
            prev, nxt = stmt[i - 1] if i else "", stmt[i + 1] if i + 1 < len(stmt) else ""
            if nxt == "=" or prev in "=!<>" and not stmt[:i].endswith(("<<", ">>")):
                continue
            return stmt[:i].rstrip("+-*/%&|^<> "), stmt[i + 1:]
    return None


class Kernel:
    def __init__(self, path, lines):
        self.path, self.lines = path, lines  # (line number, text) of the body
        self.tainted = set()
        self.div_loops = set()  # loops (by header line) left by a thread-dependent break
        self.errors, self.barriers, self.shuffles = [], 0, 0

    def dep(self, text):
        if THREAD.search(text):
            return True
        return any(t in self.tainted for t in IDENT.findall(text))

    def taint(self, name):
        if name not in self.tainted:
            self.tainted.add(name)
            self.changed = True

    def statement(self, no, stmt, divergent, loops, report, warp=False):
        if report and BARRIER.search(stmt):
            self.barriers += 1
            if not BARRIER_STMT.match(stmt):
                self.errors.append(f"{self.path}:{no}: form: a barrier inside an expression: {stmt}")
            elif divergent or warp:
                self.errors.append(f"{self.path}:{no}: control: a barrier under thread-dependent control: {stmt}")
        if report and SHUFFLE.search(stmt):
            self.shuffles += 1
            m = SHUFFLE_STMT.match(stmt)
            if not m or SHUFFLE.search(m.group(4)) or re.search(r"\?|&&|\|\|", m.group(4)):
                self.errors.append(f"{self.path}:{no}: form: a shuffle that is not a whole assignment: {stmt}")
            elif divergent:
                self.errors.append(f"{self.path}:{no}: control: a shuffle under thread-dependent control: {stmt}")
        if re.match(r"^(break|continue)\s*;", stmt) and divergent and loops:
            if loops[-1] not in self.div_loops:
                self.div_loops.add(loops[-1])
                self.changed = True
        if re.match(r"^return\b", stmt) and divergent:
            self.div_return = True
        elif re.match(r"^return\b", stmt) and warp:
            self.warp_return = True
        a = top_assign(stmt)
        if a:
            lhs, rhs = a
            m = re.search(r"([A-Za-z_]\w*)\s*(\[.*\])?\s*$", lhs)
            if m and (m.group(2) is None or m.group(1).startswith(("r_", "l_"))) and not lhs.lstrip().startswith("*"):
                if divergent or self.dep(rhs) or (m.group(2) and self.dep(m.group(2))):
                    self.taint(m.group(1))

    def walk(self, report):
        self.changed, self.div_return, self.warp_return = False, False, False
        stack = []  # frames: (kind, divergent, header line)
        pending = []  # brace-less headers governing the next statement: (divergent, is_loop, line)
        for no, text in self.lines:
            if text.startswith('extern "C"'):  # the next kernel of a program: a return of the last one ends there
                self.div_return, self.warp_return, stack, pending = False, False, [], []
                continue
            line = re.sub(r"/\*.*?\*/|//.*$", "", text).strip()
            if not line or line.startswith("#"):
                continue
            while line.startswith("}"):
                kind, div, hline = stack.pop() if stack else ("block", False, 0)
                line = line[1:].strip()
                if line.startswith("else"):
                    rest = line[4:].strip()
                    if rest == "{":
                        stack.append(("else", div, hline))
                        line = ""
                    else:
                        line = rest  # else if (...) ...: its header is the if's
                        pending.append((div, False, hline))
            if not line:
                continue
            inside = [f[1] or (f[0] == "loop" and f[2] in self.div_loops) for f in stack] + [p[0] for p in pending]
            divergent = any(x is True for x in inside) or self.div_return  # "warp": a warp-uniform if
            warp = any(x == "warp" for x in inside) or self.warp_return
            loops = [f[2] for f in stack if f[0] == "loop"] + [p[2] for p in pending if p[1]]
            while True:
                m = HEADER.match(line)
                if not m:
                    break
                end = parens(line, line.index("("))
                head, line = line[:end], line[end:].strip()
                is_loop = m.group(1) != "if"
                hdiv = self.dep(head)
                w = WARP_IF.match(head)
                if w and int(w.group(2)) % 32 == 0:
                    hdiv = "warp"
                if is_loop:  # the loop's variable is as thread-dependent as its header
                    init = head[head.index("(") + 1:].split(";")[0]
                    a = top_assign(init)
                    own = re.match(r"^\s*(?:const\s+)?(?:unsigned\s+|long\s+)*(?:int|long|char|short|unsigned)\s+([A-Za-z_]\w*)\s*$",
                                   a[0]) if a else None
                    if own:  # declared here: a fresh variable, as dependent as the rest of its header
                        hdiv = self.dep(re.sub(r"\b%s\b" % own.group(1), " ", head))
                    if a and (hdiv or divergent or self.dep(a[1])):
                        mm = re.search(r"([A-Za-z_]\w*)\s*$", a[0])
                        if mm:
                            self.taint(mm.group(1))
                            hdiv = True
                divergent = divergent or hdiv is True or (is_loop and no in self.div_loops)
                warp = warp or hdiv == "warp"
                if is_loop:
                    loops = loops + [no]
                if line == "{":  # a braced body: the brace-less headers before it govern all of it
                    stack.append(("loop" if is_loop else "if", level([hdiv] + [p[0] for p in pending]), no))
                    pending = []
                    line = ""
                    break
                if not line:
                    pending.append((hdiv, is_loop, no))
                    break
            if not line:
                continue
            if line == "{":
                stack.append(("block", level([p[0] for p in pending]), no))
                pending = []
                continue
            pending = []
            for stmt in statements(line):
                self.statement(no, stmt, divergent, loops, report, warp)

    def check(self):
        for _ in range(50):
            self.walk(False)
            if not self.changed:
                break
        self.walk(True)


def level(divs):
    """True if any is thread-dependent, else "warp" if any is warp-uniform, else False."""
    return True if any(d is True for d in divs) else "warp" if "warp" in divs else False


def kernel_lines(path):
    lines, inside = [], False
    for no, text in enumerate(open(path, encoding="utf-8"), 1):
        if not inside:
            if text.startswith('extern "C"') and text.rstrip().endswith("{"):
                inside = True
            continue
        lines.append((no, text))
    return lines


def main(argv):
    count = "--count" in argv
    files = [a for a in argv if a != "--count"]
    errors, barriers, shuffles = [], 0, 0
    for f in files:
        k = Kernel(f, kernel_lines(f))
        if not k.lines:
            errors.append(f"{f}:1: no kernel found (a line starting 'extern \"C\"' and ending in '{{')")
            continue
        k.check()
        errors += k.errors
        barriers += k.barriers
        shuffles += k.shuffles
    for e in errors:
        print(e)
    if count:
        print(f"{barriers} barriers, {shuffles} shuffles checked in {len(files)} files")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
