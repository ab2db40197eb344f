"""_ir.py - the values a traced TileLang function works on, and the builder
that records Tile IR statements.

Needs: nothing outside the standard library.
Produces: Expr trees (rendered to Tile IR expression strings only when the
document is written, so that names given later, by assignment, are the ones
printed), Var and Buffer handles, and Builder, which holds the statement
lists being filled, the scopes of names (Tile IR forbids shadowing,
proto/tile-ir-v1.md 5.2) and the Python file:line of every statement.
Keeps: the builder of the function being traced in a module global
(`current()`); tracing is single-threaded.
"""

import math
import os
import sys

# Raised for every error the front end reports; file and line name the
# Python source of the construct.
class TlirError(Exception):
    def __init__(self, message, file=None, line=None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line

    def __str__(self):
        if self.file:
            return "%s:%s: error: %s" % (self.file, self.line, self.message)
        return "error: " + self.message


_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def user_location(skip_pkg=True):
    """The innermost stack frame outside this package: (file, line)."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not (skip_pkg and os.path.dirname(os.path.abspath(fn)) == _PKG_DIR) and not fn.startswith("<frozen"):
            return fn, f.f_lineno
        f = f.f_back
    return None, None


def error(message):
    """A TlirError at the user's current line."""
    file, line = user_location()
    return TlirError(message, file, line)


# ---- dtypes -------------------------------------------------------------

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2")
# The packed sub-byte types and the scale type (proto/tile-ir-v1.md 7.1.2):
# dtypes of tensors, buffers and views (T.view(W, dtype="uint4")); not
# reserved names.
PACKED_DTYPES = ("int4", "uint4", "int2", "uint2", "int1", "float4_e2m1", "float8_e8m0")
# TileLang / TVM spellings that mean a Tile IR dtype.
DTYPE_ALIASES = {"float": "float32", "half": "float16", "double": "float64", "int": "int32",
                 "float8_e4m3fn": "float8_e4m3", "e4m3_float8": "float8_e4m3",
                 "e5m2_float8": "float8_e5m2", "bf16": "bfloat16", "fp16": "float16",
                 "fp32": "float32", "uint1": "bool"}


def dtype_name(d, what="dtype"):
    """The Tile IR name of a dtype given as a string or a DType."""
    if isinstance(d, DType):
        return d.name
    if isinstance(d, str):
        d = str(d)
        d2 = DTYPE_ALIASES.get(d, d)
        if d2 in DTYPES or d2 in PACKED_DTYPES:
            return d2
        raise error("unknown %s '%s' (Tile IR v1 has %s)" % (what, d, ", ".join(DTYPES + PACKED_DTYPES)))
    raise error("%s must be a dtype name or T.<dtype>, not %s" % (what, type(d).__name__))


class DType(str):
    """T.float16 and friends: the dtype's name as a string (TileLang code
    compares and iterates them as strings), and a cast when called
    (T.float16(x))."""
    @property
    def name(self):
        return str.__str__(self)

    def __repr__(self):
        return "T." + self.name

    def __eq__(self, other):
        if isinstance(other, str):
            return self.name == DTYPE_ALIASES.get(str(other), str(other))
        return NotImplemented

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = str.__hash__

    def __call__(self, x=0):
        return Call(self.name, [x])

    @property
    def bits(self):
        return DTYPE_BITS[self.name]


DTYPE_BITS = {"bool": 8, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8,
              "uint16": 16, "uint32": 32, "uint64": 64, "float16": 16, "bfloat16": 16,
              "float32": 32, "float64": 64, "float8_e4m3": 8, "float8_e5m2": 8, "int4": 4, "uint4": 4,
              "int2": 2, "uint2": 2, "int1": 1, "float4_e2m1": 4, "float8_e8m0": 8}


# ---- expressions --------------------------------------------------------

# Precedence levels of proto/tile-ir-v1.md 6.2, low to high.
P_OR, P_AND, P_NOT, P_CMP, P_BOR, P_BXOR, P_BAND, P_SHIFT, P_SUM, P_TERM, P_UNARY, P_PRIM = range(1, 13)
BINOPS = {"or": P_OR, "and": P_AND, "<": P_CMP, "<=": P_CMP, ">": P_CMP, ">=": P_CMP,
          "==": P_CMP, "!=": P_CMP, "|": P_BOR, "^": P_BXOR, "&": P_BAND, "<<": P_SHIFT,
          ">>": P_SHIFT, "+": P_SUM, "-": P_SUM, "*": P_TERM, "/": P_TERM, "//": P_TERM,
          "%": P_TERM}


def is_sym(x):
    return isinstance(x, Expr)


def lit_text(v):
    """(text, precedence) of a Python literal in Tile IR syntax."""
    if isinstance(v, bool):
        return ("true" if v else "false"), P_PRIM
    if isinstance(v, int):
        if v < 0:
            return "-" + str(-v), P_UNARY
        return str(v), P_PRIM
    if isinstance(v, float):
        if math.isinf(v) or math.isnan(v):
            raise error("the Python float %r has no Tile IR literal; use T.infinity(dtype)" % v)
        r = repr(abs(v))
        if "." not in r and "e" not in r:
            r += ".0"
        return (("-" + r) if math.copysign(1.0, v) < 0 else r), (P_UNARY if v < 0 else P_PRIM)
    if isinstance(v, DType):
        return v.name, P_PRIM
    raise error("a Python %s cannot be used in a Tile IR expression" % type(v).__name__)


def text(x):
    """(text, precedence) of an Expr or a Python literal."""
    if isinstance(x, Expr):
        return x.render()
    return lit_text(x)


def render(x):
    return text(x)[0]


def wrap(x, min_prec):
    t, p = text(x)
    return t if p >= min_prec else "(" + t + ")"


class Expr:
    """A symbolic Tile IR value.  Python operators build bigger ones."""
    __hash__ = object.__hash__

    def render(self):
        raise NotImplementedError

    def __bool__(self):
        raise error("the truth of a tile value ('%s') is not known while the program is "
                    "translated: a Python 'if', 'while', 'and', 'or', 'not', chained comparison "
                    "or builtin min/max on it; use T.if_then_else, T.min/T.max, or a Tile IR "
                    "'if' (a plain 'if' statement in the kernel)" % render(self))

    def __index__(self):
        raise error("a tile value ('%s') used where Python needs an int (range(), a list "
                    "index, a shape); use T.serial(...) for a loop over it" % render(self))

    def __iter__(self):
        raise error("a tile value ('%s') cannot be iterated in Python" % render(self))

    def __float__(self):
        raise error("a tile value ('%s') has no Python float value" % render(self))

    __int__ = __index__

    def __pow__(self, o):
        raise error("'**' has no Tile IR form; use T.pow(a, b)")
    __rpow__ = __pow__

    def __matmul__(self, o):
        raise error("'@' has no Tile IR form; use T.gemm on buffers")
    __rmatmul__ = __matmul__

    def astype(self, dtype):
        """TVM's PrimExpr.astype: the value converted (T.cast)."""
        return Call(dtype_name(dtype), [self])

    def __neg__(self): return Unary("-", self)
    def __pos__(self): return self
    def __invert__(self): return Unary("~", self)
    def __abs__(self): return Call("abs", [self])


def _binop(op):
    def f(self, other):
        return BinOp(op, self, other)

    def r(self, other):
        return BinOp(op, other, self)
    return f, r


for _name, _op in (("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/"),
                   ("floordiv", "//"), ("mod", "%"), ("and", "&"), ("or", "|"),
                   ("xor", "^"), ("lshift", "<<"), ("rshift", ">>")):
    _f, _r = _binop(_op)
    setattr(Expr, "__%s__" % _name, _f)
    setattr(Expr, "__r%s__" % _name, _r)
for _name, _op in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "=="), ("ne", "!=")):
    setattr(Expr, "__%s__" % _name, _binop(_op)[0])


class BinOp(Expr):
    def __init__(self, op, a, b):
        for v in (a, b):
            if not isinstance(v, (Expr, int, float, bool, DType)):
                raise error("operator '%s' applied to a Python %s and a tile value"
                            % (op, type(v).__name__))
            if isinstance(v, float):
                lit_text(v)  # an infinite or NaN float is an error here, at its line
        self.op, self.a, self.b = op, a, b

    def render(self):
        p = BINOPS[self.op]
        if p == P_CMP:  # no chaining: both sides above comparison level
            return "%s %s %s" % (wrap(self.a, p + 1), self.op, wrap(self.b, p + 1)), p
        return "%s %s %s" % (wrap(self.a, p), self.op, wrap(self.b, p + 1)), p


class Unary(Expr):
    def __init__(self, op, a):
        self.op, self.a = op, a

    def render(self):
        if self.op == "not":
            return "not " + wrap(self.a, P_NOT), P_NOT
        return self.op + wrap(self.a, P_UNARY), P_UNARY


class Call(Expr):
    def __init__(self, fn, args):
        self.fn, self.args = fn, list(args)
        for a in self.args:
            if not isinstance(a, (Expr, int, float, bool, DType)):
                raise error("argument of %s(...) is a Python %s, not a number or tile value"
                            % (fn, type(a).__name__))
            if isinstance(a, float):
                lit_text(a)

    def render(self):
        return "%s(%s)" % (self.fn, ", ".join(render(a) for a in self.args)), P_PRIM


class Var(Expr):
    """A named scalar: block var, loop var, scalar parameter, let, alloc_var.
    The name may be given later (by the Python name it is assigned to)."""
    def __init__(self, name, kind, dtype="int32", provisional=True):
        self.name, self.kind, self.dtype, self.provisional = name, kind, dtype, provisional

    def render(self):
        return self.name, P_PRIM


class Load(Expr):
    """B[i, j]: an element read, and (as an operand of a tile operator) a
    start point region."""
    def __init__(self, buf, idx):
        self.buf, self.idx = buf, idx

    def render(self):
        return "%s[%s]" % (self.buf.name, ", ".join(render(i) for i in self.idx)), P_PRIM


def pure_value(x):
    """x with every let it names replaced by the let's value, when that is
    made of constants, block, loop and scalar names and such lets only (no
    buffer element, no alloc_var: values that may change between the let
    and the use); else x itself.  A slice `kv_start:kv_end` of two lets so
    becomes `a + k * n:a + (k + 1) * n`, whose extent tlc check can fold."""
    def sub(e):
        if isinstance(e, Var):
            if e.kind != "let":
                return e if e.kind in ("block", "loop", "scalar", "dynamic") else None
            v = getattr(e, "value", None)
            return None if v is None else sub(v)
        if isinstance(e, BinOp):
            a, b = sub(e.a), sub(e.b)
            return None if a is None or b is None else BinOp(e.op, a, b)
        if isinstance(e, Unary):
            a = sub(e.a)
            return None if a is None else Unary(e.op, a)
        if isinstance(e, Call):
            args = [sub(a) for a in e.args]
            return None if any(a is None for a in args) else Call(e.fn, args)
        if isinstance(e, Expr):
            return None
        return e  # a Python number or dtype
    r = sub(x)
    return x if r is None else r


class Region:
    """B[a:b, i, :]: a slice region (an operand of a tile operator)."""
    def __init__(self, buf, items):
        self.buf, self.items = buf, items

    def render(self):
        out = []
        for it in self.items:
            if isinstance(it, slice):
                lo = "" if it.start is None else render(pure_value(it.start))
                hi = "" if it.stop is None else render(pure_value(it.stop))
                out.append(lo + ":" + hi)
            else:
                out.append(render(it))
        return "%s[%s]" % (self.buf.name, ", ".join(out))

    @property
    def ndim(self):
        return len(self.items)


class Buffer:
    """A global tensor (a parameter) or an allocation."""
    __hash__ = object.__hash__

    def __init__(self, name, shape, dtype, scope, provisional=True):
        self.name, self.shape, self.dtype, self.scope = name, list(shape), dtype, scope
        self.provisional = provisional

    @property
    def ndim(self):
        return len(self.shape)

    def _items(self, idx):
        items = list(idx) if isinstance(idx, tuple) else [idx]
        for it in items:
            if isinstance(it, slice) and it.step is not None:
                raise error("a slice with a step ('%s[a:b:c]') has no Tile IR form" % self.name)
            if it is Ellipsis or it is None:
                raise error("'...' and None are not Tile IR indices")
        if len(items) != len(self.shape):
            raise error("'%s' has %d dimensions but %d indices were given"
                        % (self.name, len(self.shape), len(items)))
        return items

    def __getitem__(self, idx):
        items = self._items(idx)
        if any(isinstance(i, slice) for i in items):
            return Region(self, items)
        return Load(self, items)

    def __setitem__(self, idx, value):
        items = self._items(idx)
        if any(isinstance(i, slice) for i in items):
            raise error("assignment to a slice of '%s'; use T.copy or T.fill" % self.name)
        if isinstance(value, (Buffer, Region)):
            raise error("assignment of a buffer to an element of '%s'; use T.copy" % self.name)
        b = builder()
        if self.scope == "fragment" and "parallel" not in b.loops:
            # TileLang's `frag[i] = v` outside T.Parallel: every thread stores
            # the same element.  Tile IR reaches fragments only from tile
            # operators and parallel loops (5.3), so this is a parallel loop
            # of one iteration: the same meaning, block-level semantics.
            v = Var("_i", "loop")
            st = Stmt("parallel")
            b.emit(st)
            body = []
            b.push(body)
            b.declare(v, "_i")
            st["vars"], st["extents"], st["body"] = [v], [1], body
            b.emit(Assign(Load(self, items), value))
            b.pop()
            return
        b.emit(Assign(Load(self, items), value))

    def __bool__(self):
        return True

    @property
    def data(self):
        """B.data: B's memory, for TileLang's T.Tensor(shape, dtype, B.data)
        (a view of B)."""
        return BufferData(self)

    def __iter__(self):
        raise error("buffer '%s' cannot be iterated in Python" % self.name)

    def __repr__(self):
        return "Buffer(%s, %s, %s)" % (self.name, self.shape, self.dtype)

    def render(self):
        return self.name


class BufferData:
    """B.data: the memory of buffer B, usable only as T.Tensor's data."""
    def __init__(self, buf):
        self.buf = buf


class Assign:
    """A statement string 'LHS = EXPR'."""
    def __init__(self, lhs, value):
        if isinstance(value, float):
            lit_text(value)
        self.lhs, self.value = lhs, value


def share_vars(x):
    """Every T.alloc_var that x (a region or an element) uses, itself or
    through lets, held in shared memory: a tile operator's region must be
    block-uniform (language.LocalVar.share)."""
    if isinstance(x, Region):
        for it in x.items:
            for y in ((it.start, it.stop) if isinstance(it, slice) else (it,)):
                share_vars(y)
    elif isinstance(x, Load):
        for y in x.idx:
            share_vars(y)
    elif isinstance(x, BinOp):
        share_vars(x.a)
        share_vars(x.b)
    elif isinstance(x, Unary):
        share_vars(x.a)
    elif isinstance(x, Call):
        for y in x.args:
            share_vars(y)
    elif isinstance(x, Var):
        if hasattr(x, "share"):
            x.share()
        elif getattr(x, "value", None) is not None:
            share_vars(x.value)


def region_text(x, what):
    share_vars(x)
    if isinstance(x, Buffer):
        if x.scope == "local" or x.scope == "var":
            raise error("%s: a local buffer ('%s') cannot be a tile operator's operand" % (what, x.name))
        return x.name
    if isinstance(x, Region):
        return x.render()
    if isinstance(x, Load):
        return x.render()[0]
    raise error("%s must be a buffer, an element or a slice of one, not %s"
                % (what, type(x).__name__))


# ---- names --------------------------------------------------------------

RESERVED = set(DTYPES) | {
    "and", "or", "not", "true", "false", "True", "False", "if", "else", "None", "in", "is",
    "lambda", "ceildiv", "min", "max", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt",
    "tanh", "sigmoid", "floor", "ceil", "round", "pow", "fma", "if_then_else", "infinity",
    "max_value", "min_value", "cast", "reinterpret", "thread_binding",
    # later functions: not reserved in Tile IR, but a value named like one
    # would hide the function from the calls in its scope (7.5)
    "erf", "sin", "cos", "tan", "log1p", "expm1", "log10", "trunc", "isnan", "isinf", "clamp"}


def clean_name(n):
    n = "".join(c if (c.isascii() and (c.isalnum() or c == "_")) else "_" for c in n) or "v"
    if n[0].isdigit():
        n = "v" + n
    n = n[:56]
    if n in RESERVED:
        n += "_"
    return n


# ---- the builder --------------------------------------------------------

_current = None


def builder(required=True):
    if _current is None and required:
        raise error("this T.* call makes a statement and is only allowed while a "
                    "@T.prim_func (or a T.macro it calls) is being translated")
    return _current


class Stmt(dict):
    """One op object; `loc` is its Python (file, line)."""
    def __init__(self, op, **fields):
        super().__init__(op=op)
        for k, v in fields.items():
            if isinstance(v, float):
                lit_text(v)
            if v is not None:
                self[k] = v
        self.loc = user_location()


class Builder:
    def __init__(self):
        self.bodies = []        # stack of statement lists being filled
        self.scopes = []        # stack of sets of names declared there
        self.params = []
        self.kernel = None      # the T.Kernel record being (or last) entered
        self.kernel_done = False
        self.kernels = []       # every T.Kernel, in order (a program's kernels run one after another)
        self.workspaces = []    # T.alloc_global buffers
        self.counter = 0
        self.loops = []         # kinds of the loops around the current statement

    # scopes
    def visible(self, name):
        return any(name in s for s in self.scopes)

    def fresh(self, want):
        base = clean_name(want)
        n, i = base, 1
        while self.visible(n):
            n = "%s_%d" % (base, i)
            i += 1
        return n

    def declare(self, obj, want):
        obj.name = self.fresh(want)
        self.scopes[-1].add(obj.name)
        obj.scope_set = self.scopes[-1]

    def rename(self, obj, want):
        """Give a provisionally named Var or Buffer its Python name."""
        if not getattr(obj, "provisional", False):
            return
        s = obj.scope_set
        s.discard(obj.name)
        saved = self.scopes
        # the name must be free in the scope it was declared in and above
        idx = next(i for i, x in enumerate(self.scopes) if x is s) if any(x is s for x in self.scopes) else None
        # (a view hoisted to the kernel's body from a loop, language._view,
        # must also be free where it was written: keep every scope)
        if idx is not None and not getattr(obj, "hoisted", False):
            self.scopes = self.scopes[: idx + 1]
        try:
            obj.name = self.fresh(want)
        finally:
            self.scopes = saved
        s.add(obj.name)
        obj.provisional = False

    def auto_name(self, prefix):
        self.counter += 1
        return "%s_%d" % (prefix, self.counter)

    # statements
    def in_kernel(self):
        return self.kernel is not None and not self.kernel_done

    def emit(self, st):
        if not self.in_kernel():
            raise error("statements must be inside 'with T.Kernel(...)'")
        if not isinstance(st, Stmt):
            st.loc = user_location()
        self.bodies[-1].append(st)
        return st

    def push(self, body):
        self.bodies.append(body)
        self.scopes.append(set())

    def pop(self):
        self.bodies.pop()
        self.scopes.pop()


def set_builder(b):
    global _current
    old = _current
    _current = b
    return old


def dumps(value, indent=0, width=100):
    """JSON text with each value on one line when it fits in `width`
    (statements one per line, as in examples/)."""
    import json
    flat = json.dumps(value, separators=(", ", ": "))
    if len(flat) + indent <= width or not isinstance(value, (dict, list)) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = ["%s%s: %s" % (pad, json.dumps(k), dumps(v, indent + 2, width)) for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + dumps(v, indent + 2, width) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
