"""_trace.py - translates a @T.prim_func to a Tile IR document.

Needs: the function's source file (inspect), _ir.
Produces: PrimFunc, holding the Tile IR document (a dict in the order of
proto/tile-ir-v1.md) and the Python file:line of each statement, keyed by
its JSON Pointer.
How: the function's source is parsed with `ast` and rewritten in four
places, then compiled with its own file name and line numbers and run once
with tracing objects for its parameters (closure values and globals as
they are: Python-level metaprogramming runs as Python):
  * `if c:` runs as Python when c is a Python value, and records a Tile IR
    `if` (both branches traced) when c is a tile value;
  * `a if c else b`, `and`, `or`, `not` likewise (if_then_else, and/or/not);
  * `x = value` names what it binds: an allocation or loop var takes the
    Python name, a tile expression becomes a `let`, and assigning an
    alloc_var records an assignment;
  * `for ... in range(...)` inside the kernel is a T.serial loop, and the
    targets of `for` and `with ... as` name their vars.
Errors are TlirError at the Python file:line of the construct.
"""

import ast
import copy
import functools
import inspect
import textwrap

from . import _ir
from ._ir import Buffer, Expr, Stmt, TlirError, Var, error


# ---- runtime helpers the rewritten code calls ------------------------------

def _h_if(c):
    """Returns None for a Python condition, else the open Tile IR if."""
    if not isinstance(c, Expr):
        return None
    st = Stmt("if", cond=c, then=[])
    _ir.builder().emit(st)
    return st


class _Branch:
    def __init__(self, st, key):
        self.st, self.key = st, key

    def __enter__(self):
        self.st.setdefault(self.key, [])
        _ir.builder().push(self.st[self.key])

    def __exit__(self, et, ev, tb):
        if et is None:
            _ir.builder().pop()
        return False


def _h_then(st):
    return _Branch(st, "then")


def _h_else(st):
    return _Branch(st, "else")


def _h_ifexp(c, a, b):
    if not isinstance(c, Expr):
        return a() if c else b()
    return _ir.Call("if_then_else", [c, a(), b()])


def _h_and(*fs):
    v = fs[0]()
    for f in fs[1:]:
        if isinstance(v, Expr):
            v = _ir.BinOp("and", v, f())
        elif not v:
            return v
        else:
            v = f()
    return v


def _h_or(*fs):
    v = fs[0]()
    for f in fs[1:]:
        if isinstance(v, Expr):
            v = _ir.BinOp("or", v, f())
        elif v:
            return v
        else:
            v = f()
    return v


def _h_not(v):
    if isinstance(v, Expr):
        return _ir.Unary("not", v)
    return not v


def _h_range(*args):
    b = _ir.builder(required=False)
    if b is None or not b.in_kernel():
        return range(*args)
    from . import language as T
    if len(args) == 3:
        return T.serial(args[0], args[1], args[2])
    return T.serial(*args)


def _h_name(names, vals):
    """Gives the vars a `for`/`with` target binds their Python names."""
    b = _ir.builder(required=False)
    if b is None:
        return
    if not isinstance(names, tuple):
        names, vals = (names,), (vals,)
    elif not isinstance(vals, tuple) or len(vals) != len(names):
        return
    todo = [(n, v) for n, v in zip(names, vals)
            if isinstance(v, (Var, Buffer)) and getattr(v, "provisional", False)]
    for n, v in todo:  # free every provisional name first: (bz, bx, by) = (bx, by, bz)
        v.scope_set.discard(v.name)
    for n, v in todo:
        if n is not None:
            b.rename(v, n)
        else:
            v.scope_set.add(v.name)


def _h_assign(name, value, prev):
    b = _ir.builder(required=False)
    if b is not None and not b.in_kernel() and isinstance(value, Buffer) and any(value is w for w in b.workspaces) \
            and getattr(value, "provisional", False):
        b.rename(value, name)  # glse = T.alloc_global(...) before the kernels
        return value
    if b is None or not b.in_kernel():
        return value
    from .language import LocalVar
    if isinstance(prev, LocalVar) and not isinstance(value, (Buffer, LocalVar)) \
            and getattr(prev, "scope_set", None) is not None and b.visible(prev.name):
        prev.assign(value)
        return prev
    if isinstance(value, (Var, Buffer)) and getattr(value, "provisional", False):
        b.rename(value, name)
        return value
    if isinstance(value, Expr) and not isinstance(value, Var):
        v = Var(name, "let")
        b.declare(v, name)
        v.provisional, v.value = False, value  # (_ir.pure_value reads it)
        b.emit(Stmt("let", name=v, value=value))
        return v
    return value


HELPERS = {"__tlir_if": _h_if, "__tlir_then": _h_then, "__tlir_else": _h_else,
           "__tlir_ifexp": _h_ifexp, "__tlir_and": _h_and, "__tlir_or": _h_or,
           "__tlir_not": _h_not, "__tlir_range": _h_range, "__tlir_name": _h_name,
           "__tlir_assign": _h_assign}


# ---- the AST rewrite --------------------------------------------------------

def _call(name, *args):
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[])


def _lam(e):
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                         kw_defaults=[], kwarg=None, defaults=[]), body=e)


def _target_names(t):
    if isinstance(t, ast.Name):
        return ast.Constant(t.id)
    if isinstance(t, (ast.Tuple, ast.List)):
        return ast.Tuple(elts=[ast.Constant(e.id) if isinstance(e, ast.Name) else ast.Constant(None)
                               for e in t.elts], ctx=ast.Load())
    return None


def _target_value(t):
    if isinstance(t, ast.Name):
        return ast.Name(id=t.id, ctx=ast.Load())
    return ast.Tuple(elts=[ast.Name(id=e.id, ctx=ast.Load()) if isinstance(e, ast.Name)
                           else ast.Constant(None) for e in t.elts], ctx=ast.Load())


class _Rewriter(ast.NodeTransformer):
    def __init__(self):
        self.n = 0

    def visit_FunctionDef(self, node):
        if getattr(self, "top_done", False):
            return node  # nested defs are left alone (a T.macro rewrites its own)
        self.top_done = True
        node.decorator_list = []
        self.generic_visit(node)
        return node

    def visit_If(self, node):
        self.generic_visit(node)
        self.n += 1
        c, v = "__tlir_c%d" % self.n, "__tlir_v%d" % self.n
        load = lambda n: ast.Name(id=n, ctx=ast.Load())
        store = lambda n: ast.Name(id=n, ctx=ast.Store())
        then = ast.With(items=[ast.withitem(context_expr=_call("__tlir_then", load(c)))],
                        body=copy.deepcopy(node.body))
        sym = [then]
        if node.orelse:
            sym.append(ast.With(items=[ast.withitem(context_expr=_call("__tlir_else", load(c)))],
                                body=copy.deepcopy(node.orelse)))
        out = [ast.Assign(targets=[store(v)], value=node.test),
               ast.Assign(targets=[store(c)], value=_call("__tlir_if", load(v))),
               ast.If(test=ast.Compare(left=load(c), ops=[ast.Is()], comparators=[ast.Constant(None)]),
                      body=[ast.If(test=load(v), body=node.body, orelse=node.orelse)],
                      orelse=sym)]
        for st in out:
            ast.copy_location(st, node)
        return out

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return ast.copy_location(_call("__tlir_ifexp", node.test, _lam(node.body), _lam(node.orelse)), node)

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        fn = "__tlir_and" if isinstance(node.op, ast.And) else "__tlir_or"
        return ast.copy_location(_call(fn, *[_lam(v) for v in node.values]), node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call("__tlir_not", node.operand), node)
        return node

    def visit_Assign(self, node):
        self.generic_visit(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            n = node.targets[0].id
            prev = ast.Call(func=ast.Attribute(value=_call("locals"), attr="get", ctx=ast.Load()),
                            args=[ast.Constant(n)], keywords=[])
            node.value = _call("__tlir_assign", ast.Constant(n), node.value, prev)
        return node

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if isinstance(node.target, ast.Name):
            n = node.target.id
            val = ast.BinOp(left=ast.Name(id=n, ctx=ast.Load()), op=node.op, right=node.value)
            new = ast.Assign(targets=[ast.Name(id=n, ctx=ast.Store())],
                             value=_call("__tlir_assign", ast.Constant(n), val, ast.Name(id=n, ctx=ast.Load())))
            return ast.copy_location(new, node)
        return node

    def visit_For(self, node):
        self.generic_visit(node)
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            node.iter = ast.copy_location(_call("__tlir_range", *it.args), it)
        names = _target_names(node.target)
        if names is not None:
            node.body.insert(0, ast.copy_location(
                ast.Expr(_call("__tlir_name", names, _target_value(node.target))), node))
        return node

    def visit_While(self, node):
        self.generic_visit(node)
        return node

    def visit_With(self, node):
        self.generic_visit(node)
        for item in reversed(node.items):
            if item.optional_vars is not None:
                names = _target_names(item.optional_vars)
                if names is not None:
                    node.body.insert(0, ast.copy_location(
                        ast.Expr(_call("__tlir_name", names, _target_value(item.optional_vars))), node))
        return node


def namespace(fn, scope=None):
    """fn's globals, then `scope`, then its closure values, in one dict."""
    ns = dict(fn.__globals__)
    ns.update(scope or {})
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            ns[name] = cell.cell_contents
        except ValueError:  # a cell not yet bound
            pass
    return ns


_rewritten = {}  # fn.__code__ -> (code object of the rewritten def, its name)


def rewrite(fn):
    """fn rewritten as above; returns a function with the same closure
    values (as globals of its own namespace).  The rewrite is done once per
    function (code object); each call binds the closure values anew."""
    if fn.__code__ not in _rewritten:
        _rewritten[fn.__code__] = _rewrite_code(fn)
    code, name = _rewritten[fn.__code__]
    ns = namespace(fn)
    ns.update(HELPERS)
    exec(code, ns)
    new = ns[name]
    new.__defaults__ = fn.__defaults__
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


def _rewrite_code(fn):
    try:
        lines, first = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or fn.__code__.co_filename
    except (OSError, TypeError):
        raise TlirError("the source of '%s' cannot be read (tlir translates the function's "
                        "source; define it in a .py file)" % fn.__name__,
                        fn.__code__.co_filename, fn.__code__.co_firstlineno)
    src = textwrap.dedent("".join(lines))
    tree = ast.parse(src)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise TlirError("'%s' is not a def" % fn.__name__, file, first)
    # annotations were evaluated when fn was defined; the copy needs none
    a = fdef.args
    for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
        if arg is not None:
            arg.annotation = None
    fdef.returns = None
    _Rewriter().visit(tree)
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, first - 1)
    return compile(tree, file, "exec"), fdef.name


def _as_tlir_error(e, fn):
    """A Python exception raised while tracing, at the user's line."""
    if isinstance(e, TlirError):
        return e
    import os
    import sysconfig
    tb = e.__traceback__
    file, line = fn.__code__.co_filename, fn.__code__.co_firstlineno
    # the innermost frame of the user's code: not this package, not the
    # standard library or installed packages (numpy raising inside itself)
    lib = tuple(os.path.abspath(p) + os.sep for p in {
        sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")} | {"/usr/lib/python3/dist-packages"})
    while tb is not None:
        fn_ = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if os.path.dirname(fn_) != _ir._PKG_DIR and not fn_.startswith(lib) and not fn_.startswith("<"):
            file, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
        tb = tb.tb_next
    return TlirError("%s: %s" % (type(e).__name__, e), file, line)


# ---- T.macro ----------------------------------------------------------------

def macro(fn):
    """T.macro: a helper inlined where a prim_func calls it."""
    cache = []

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not cache:
            cache.append(rewrite(fn))
        return cache[0](*args, **kwargs)
    return call


# ---- T.prim_func -----------------------------------------------------------

class PrimFunc:
    """A translated @T.prim_func: `doc` is the Tile IR document, `lines`
    maps JSON Pointers of statements to (file, line), `params` lists the
    declared Python parameters in order (name, kind, dtype, shape)."""

    def __init__(self, fn, name=None, scope=None):
        from .language import Tensor, share_thread_read_fragments
        self.fn = fn
        self.name = _ir.clean_name(name or fn.__name__)
        self.file = fn.__code__.co_filename
        self.line = fn.__code__.co_firstlineno
        b = _ir.Builder()
        b.scopes.append(set())  # the kernel scope
        sig = inspect.signature(fn)
        args = []
        self.params = []
        dyn = []
        try:
            for p in sig.parameters.values():
                ann = p.annotation
                if isinstance(ann, str) and not isinstance(ann, _ir.DType):
                    if ann in _ir.DTYPES or ann in _ir.DTYPE_ALIASES:  # x: "int32"
                        ann = _ir.DType(_ir.dtype_name(ann))
                    else:  # from __future__ import annotations
                        ann = self._eval_annotation(ann, fn, scope)
                if isinstance(ann, type) and issubclass(ann, Tensor):
                    raise TlirError("parameter '%s': T.Tensor needs a shape and dtype" % p.name,
                                    self.file, self.line)
                if isinstance(ann, Tensor):
                    buf = Buffer(p.name, ann.shape, ann.dtype, "global", provisional=False)
                    b.declare(buf, p.name)
                    for d in ann.shape:
                        self._dyn(d, dyn)
                    args.append(buf)
                    self.params.append({"name": buf.name, "kind": "tensor", "dtype": ann.dtype,
                                        "shape": list(ann.shape), "py": p.name})
                elif isinstance(ann, (str, _ir.DType)):
                    dt = _ir.dtype_name(ann)
                    if dt not in ("int32", "int64", "float32", "bool"):
                        raise TlirError("parameter '%s': a scalar parameter is int32, int64, "
                                        "float32 or bool, not %s" % (p.name, dt), self.file, self.line)
                    v = Var(p.name, "scalar", dt, provisional=False)
                    b.declare(v, p.name)
                    args.append(v)
                    self.params.append({"name": v.name, "kind": "scalar", "dtype": dt, "py": p.name})
                else:
                    raise TlirError("parameter '%s' needs an annotation: T.Tensor(shape, dtype) or "
                                    "a scalar dtype such as T.int32" % p.name, self.file, self.line)
            for v in dyn:
                if b.visible(v.name):
                    raise TlirError("T.dynamic('%s') has the name of another parameter" % v.name,
                                    self.file, self.line)
                b.scopes[0].add(v.name)
            self.dynamic = [v.name for v in dyn]
            body_fn = rewrite(fn)
            old = _ir.set_builder(b)
            try:
                body_fn(*args)
            except Exception as e:  # noqa: BLE001 - every error becomes file:line
                raise _as_tlir_error(e, fn) from None
            finally:
                _ir.set_builder(old)
            if b.kernel is None:
                raise TlirError("the prim_func has no 'with T.Kernel(...)'", self.file, self.line)
            for k in b.kernels:
                share_thread_read_fragments(k.body)
            self.doc, self.lines = self._document(b, dyn)
        except TlirError:
            raise

    def _eval_annotation(self, text, fn, scope):
        ns = namespace(fn, scope)
        old = _ir.set_builder(None)
        try:
            return eval(text, ns)
        except Exception as e:  # noqa: BLE001
            raise TlirError("annotation '%s': %s: %s" % (text, type(e).__name__, e),
                            self.file, self.line) from None
        finally:
            _ir.set_builder(old)

    @staticmethod
    def _dyn(d, out):
        from .language import _Dynamic

        def walk(x):
            if isinstance(x, _Dynamic):
                if all(v is not x for v in out):
                    if any(v.name == x.name for v in out):
                        raise error("two T.dynamic symbols are named '%s'" % x.name)
                    out.append(x)
            elif isinstance(x, _ir.BinOp):
                walk(x.a)
                walk(x.b)
            elif isinstance(x, _ir.Call):
                for a in x.args:
                    walk(a)
            elif isinstance(x, _ir.Unary):
                walk(x.a)
            elif isinstance(x, Expr):
                raise error("a tensor dimension may use T.dynamic symbols, not %s" % _ir.render(x))
        walk(d)

    def _document(self, b, dyn):
        lines = {}
        params = []
        for p in self.params:
            q = {"name": p["name"], "kind": p["kind"], "dtype": p["dtype"]}
            if p["kind"] == "tensor":
                q["shape"] = [_val(d) for d in p["shape"]]
            params.append(q)
        for v in dyn:
            params.append({"name": v.name, "kind": "scalar", "dtype": v.dtype})
        kerns = [self._kernel(k, "/kernels/%d" % i if len(b.kernels) > 1 else "/kernel", lines)
                 for i, k in enumerate(b.kernels)]
        doc = {"tlir": 1, "name": self.name,
               "x-source": "%s:%d (tlir)" % (_shown_path(self.file), self.line),
               "params": params}
        if b.workspaces:
            doc["workspaces"] = [dict({"name": w.name, "dtype": w.dtype, "shape": [_val(d) for d in w.shape]},
                                      **({"zeroed": True} if getattr(w, "zeroed", False) else {}))
                                 for w in b.workspaces]
        if len(kerns) > 1:
            doc["kernels"] = kerns
        else:
            doc["kernel"] = kerns[0]
        return doc, lines

    @staticmethod
    def _kernel(k, ptr, lines):
        """One T.Kernel as a Tile IR kernel object at JSON Pointer ptr."""
        kern = {"grid": [_val(g) for g in k.grid],
                "threads": [_val(t) for t in k.threads] if isinstance(k.threads, list) else _val(k.threads),
                "block_vars": [v.name for v in k.vars]}
        if k.cluster is not None:
            kern["cluster"] = [_val(c) for c in k.cluster]
        kern["body"] = _body(k.body, ptr + "/body", lines)
        lines[ptr] = k.loc
        return kern

    def script(self):
        return _ir.dumps(self.doc)

    def note(self, pointer):
        """The `x-tlir` note of the statement at a JSON Pointer (what tlir
        made of the Python there, when that is not what was written), or
        None."""
        x = self.doc
        for part in [p for p in pointer.split("/") if p]:
            if isinstance(x, list) and part.isdigit() and int(part) < len(x):
                x = x[int(part)]
            elif isinstance(x, dict) and part in x:
                x = x[part]
            else:
                return None
        return x.get("x-tlir") if isinstance(x, dict) else None

    def locate(self, pointer):
        """(file, line) of the statement holding a JSON Pointer."""
        p = pointer
        while p:
            if p in self.lines and self.lines[p][0]:
                return self.lines[p]
            p = p.rsplit("/", 1)[0]
        return self.file, self.line


def _shown_path(p):
    """p relative to the working directory when it lies below it."""
    import os
    r = os.path.relpath(p)
    return p if r.startswith("..") else r


def _val(x):
    """A field value: Python literals stay JSON literals, tile values become
    expression strings."""
    if isinstance(x, Buffer):
        return x.name
    if isinstance(x, Expr):  # a var's name, or x[0] for an alloc_var held in shared memory
        return _ir.render(x)
    if isinstance(x, _ir.DType):
        return x.name
    if isinstance(x, bool) or isinstance(x, int):
        return x
    if isinstance(x, float):
        return _ir.render(x) if x != x or x in (float("inf"), float("-inf")) else x
    if isinstance(x, str):
        return x
    if isinstance(x, list):
        return [_val(v) for v in x]
    if isinstance(x, dict):
        return {(k.name if isinstance(k, Buffer) else k): _val(v) for k, v in x.items()}
    raise error("a Python %s cannot be a Tile IR field value" % type(x).__name__)


def _body(stmts, ptr, lines):
    out = []
    for i, st in enumerate(stmts):
        st = getattr(st, "op", st)  # an element atomic_add left in a parallel body
        p = "%s/%d" % (ptr, i)
        lines[p] = st.loc
        if isinstance(st, _ir.Assign):
            lhs = _ir.render(st.lhs)  # a var's name (x[0] for one held in shared memory) or an element
            out.append("%s = %s" % (lhs, _ir.render(st.value)))
            continue
        o = {}
        for k, v in st.items():
            if k in ("body", "then", "else"):
                o[k] = _body(v, p + "/" + k, lines)
            elif k == "vars":
                o[k] = [x.name for x in v]
            elif k in ("name", "var", "old") and isinstance(v, Var):  # what the statement declares
                o[k] = v.name
            else:
                o[k] = _val(v)
        out.append(o)
    return out


def prim_func(fn=None, *, private=False, check_well_formed=True):
    """@T.prim_func: translates the function at once."""
    import sys
    scope = dict(sys._getframe(1).f_locals)  # for string annotations
    if fn is None:
        return lambda f: PrimFunc(f, scope=scope)
    return PrimFunc(fn, scope=scope)
