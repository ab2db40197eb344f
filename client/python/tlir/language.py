"""tlir.language - TileLang's `T` namespace, translated to Tile IR.

`import tlir.language as T` in place of `import tilelang.language as T`.
Each T.* call made while a @T.prim_func is translated records a Tile IR
statement (proto/tile-ir-v1.md section 5) or builds an expression (section
6); names that TileLang has and Tile IR v1 cannot say raise an error that
names the construct and the Python line.

Needs: _ir (values, builder), _trace (the AST rewrite of prim_func and
macro bodies).
"""

from . import _ir, _options
from ._ir import (Call, DType, Expr, Region, Stmt, Var, builder, dtype_name, error,
                  region_text)
from ._trace import PrimFunc, macro, prim_func  # noqa: F401

# ---- dtypes ---------------------------------------------------------------

bool_ = DType("bool")
int8, int16, int32, int64 = (DType(n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (DType(n) for n in ("uint8", "uint16", "uint32", "uint64"))
float16, bfloat16, float32, float64 = (DType(n) for n in ("float16", "bfloat16", "float32", "float64"))
float8_e4m3, float8_e5m2 = DType("float8_e4m3"), DType("float8_e5m2")
float8_e4m3fn = float8_e4m3
float, half, double = float32, float16, float64  # noqa: A001  (TileLang's T.float)
globals()["bool"] = bool_


# ---- parameter annotations -------------------------------------------------

class Tensor:
    """T.Tensor(shape, dtype) / T.Buffer(shape, dtype): a tensor parameter;
    T.Tensor(shape, dtype, B.data) in a kernel: a view of B (T.view)."""
    def __new__(cls, shape, dtype="float32", *args, **kwargs):
        data = args[0] if args else kwargs.get("data")
        if data is None:
            return super().__new__(cls)
        if not isinstance(data, _ir.BufferData):
            raise error("T.Tensor(shape, dtype, data): data must be a buffer's .data (a view of that "
                        "buffer), not %r" % (data,))
        return _view(data.buf, shape, dtype, "T.Tensor(shape, dtype, %s.data)" % data.buf.name)

    def __init__(self, shape, dtype="float32", *args, **kwargs):
        if isinstance(shape, (int, Expr)):
            shape = (shape,)
        self.shape = tuple(shape)
        self.dtype = dtype_name(dtype)
        for k in kwargs:
            if k not in ("scope", "data", "strides", "elem_offset", "align", "offset_factor", "buffer_type"):
                raise error("T.Tensor(): unknown argument '%s'" % k)
        if kwargs.get("strides") is not None:
            raise error("T.Tensor(strides=...): Tile IR tensors are dense and row-major")

    def __class_getitem__(cls, item):
        shape, dtype = item
        return cls(shape, dtype)


Buffer_ = Tensor
globals()["Buffer"] = Tensor


class _Dynamic(Var):
    """T.dynamic('m') / T.symbolic('m'): a scalar parameter, bound at launch
    from the shapes of the tensors that use it."""
    def __init__(self, name, dtype="int32"):
        super().__init__(_ir.clean_name(name), "dynamic", dtype_name(dtype), provisional=False)


def dynamic(name, dtype="int32"):
    return _Dynamic(name, dtype)


symbolic = dynamic


# ---- the kernel -------------------------------------------------------------

class Kernel:
    """with T.Kernel(gx[, gy[, gz]], threads=N) as bx / (bx, by[, bz])."""
    def __init__(self, *grid, threads=128, prelude=None, is_cpu=False, cluster_dims=None, **kw):
        b = builder()
        if b.in_kernel():
            raise error("T.Kernel inside T.Kernel: a program's kernels run one after another, not nested")
        if not 1 <= len(grid) <= 3:
            raise error("T.Kernel takes 1 to 3 grid extents, not %d" % len(grid))
        if prelude is not None:
            raise error("T.Kernel(prelude=...): Tile IR v1 has no inline C source")
        if is_cpu:
            raise error("T.Kernel(is_cpu=True): Tile IR v1 is for GPU kernels only")
        for k in kw:
            raise error("T.Kernel(): unknown argument '%s'" % k)
        self.grid = list(grid)
        self.threads = list(threads) if isinstance(threads, (list, tuple)) else threads
        self.cluster = list(cluster_dims) if cluster_dims is not None else None
        self.loc = _ir.user_location()

    def __enter__(self):
        b = builder()
        b.kernel = self
        b.kernel_done = False
        b.kernels.append(self)
        self.body = []
        b.push(self.body)
        self.vars = []
        for i, want in enumerate(("bx", "by", "bz")[: len(self.grid)]):
            v = Var(want, "block")
            b.declare(v, want)
            self.vars.append(v)
        return self.vars[0] if len(self.vars) == 1 else tuple(self.vars)

    def __exit__(self, et, ev, tb):
        b = builder()
        if et is None:
            b.pop()
            b.kernel_done = True
        return False


def _loop(op, var_names, fields):
    """Records a loop statement; a generator so that `for v in ...:` runs the
    body once with symbolic vars, inside the loop's body list."""
    b = builder()
    body = []
    st = Stmt(op)
    b.emit(st)
    b.push(body)
    vs = []
    for want in var_names:
        v = Var(want, "loop")
        b.declare(v, want)
        vs.append(v)
    if op == "parallel":
        st["vars"] = vs
    else:
        st["var"] = vs[0]
    st.update((k, v) for k, v in fields.items() if v is not None)
    st["body"] = body
    b.loops.append(op)
    yield vs[0] if len(vs) == 1 else tuple(vs)
    b.loops.pop()
    b.pop()
    if op == "parallel":
        _merge_nested(st)
        if "parallel" not in b.loops:  # the outermost parallel loop: its nests are whole now
            for loop in _split_nested(b, st):
                _lift_atomics(b, loop, loop["vars"])


def _merge_nested(st):
    """`for i in T.Parallel(M): for j in T.Parallel(N): body`, the inner loop
    being all of the outer one's body, is `for i, j in T.Parallel(M, N):
    body` (Tile IR has no parallel loop inside another, 5.3)."""
    body = st["body"]
    if (len(body) == 1 and isinstance(body[0], Stmt) and body[0]["op"] == "parallel"
            and len(st["vars"]) + len(body[0]["vars"]) <= 8):
        inner = body[0]
        st["vars"] = st["vars"] + inner["vars"]
        st["extents"] = st["extents"] + inner["extents"]
        st["body"] = inner["body"]


def _walk(x, fn):
    """Calls fn on every expression, statement and buffer below x."""
    fn(x)
    if isinstance(x, (list, tuple)):
        for y in x:
            _walk(y, fn)
    elif isinstance(x, dict):
        for y in x.values():
            _walk(y, fn)
    elif isinstance(x, _ir.BinOp):
        _walk(x.a, fn), _walk(x.b, fn)
    elif isinstance(x, _ir.Unary):
        _walk(x.a, fn)
    elif isinstance(x, Call):
        _walk(x.args, fn)
    elif isinstance(x, _ir.Load):
        _walk(x.idx, fn)
    elif isinstance(x, _ir.Assign):
        _walk(x.lhs, fn), _walk(x.value, fn)
    elif isinstance(x, _AtomicElem):
        _walk(x.dst, fn), _walk(x.value, fn)


# statements whose operands are regions and whole buffers (tile operators,
# allocations, layouts): they read fragments as tile operators may
_REGION_OPS = {"copy", "fill", "clear", "gemm", "reduce", "cumsum", "cummax", "cummin", "atomic_add", "cluster_reduce",
               "annotate_layout", "use_swizzle", "view", "alloc_shared", "alloc_fragment", "alloc_local"}


def share_thread_read_fragments(body):
    """TileLang's `if mask[k] != 0:` on a fragment `mask` in thread-level
    code (outside T.Parallel) reads one element in every thread; TileLang
    gives such a fragment a layout replicated in every thread.  Tile IR's
    fragments are read only by tile operators and parallel loops (5.3), so
    a fragment whose element thread-level code reads is allocated in shared
    memory instead: the same values for every reader (barriers are placed
    for shared buffers, 9.1), and a read of a shared element is
    block-uniform, so such an `if` may hold tile operators.  A fragment
    that is a T.gemm accumulator must stay a fragment: its thread-level read
    is left for tlc check to refuse, with the way around it."""
    reads, accum, allocs = set(), set(), {}

    def see(stmts, par):
        for x in stmts:
            x = getattr(x, "op", x) if isinstance(x, _AtomicElem) else x
            if isinstance(x, _ir.Assign):
                if not par:
                    note(x.value)
                    note(x.lhs.idx if isinstance(x.lhs, _ir.Load) else [])
                continue
            if not isinstance(x, Stmt):
                continue
            op = x["op"]
            if op == "gemm":
                accum.add(x["C"])
            if op == "alloc_fragment":
                allocs[x["name"].name] = x
            if op in _REGION_OPS:
                continue
            for k, v in x.items():
                if k in ("body", "then", "else"):
                    see(v, par or op == "parallel")
                elif not par:
                    note(v)

    def note(v):
        _walk(v, lambda e: reads.add(e.buf.name) if isinstance(e, _ir.Load) and e.buf.scope == "fragment"
              else None)

    see(body, False)
    for name in reads:
        st = allocs.get(name)
        if st is None or name in accum:
            continue
        st["op"] = "alloc_shared"
        st["name"].scope = "shared"
        st["x-tlir"] = ("T.alloc_fragment in shared memory: thread-level code (outside T.Parallel) "
                        "reads its elements")


def _written(stmts):
    """Names of the buffers that stmts write (assignments and atomics)."""
    out = set()

    def see(x):
        if isinstance(x, _ir.Assign) and isinstance(x.lhs, _ir.Load):
            out.add(x.lhs.buf.name)
        elif isinstance(x, _AtomicElem):
            out.add(x.dst.buf.name)
        elif isinstance(x, Stmt) and x.get("op") == "atomic":
            out.add(str(x["dst"]).split("[")[0].strip())
    _walk(stmts, see)
    return out


def _split_nested(b, st):
    """`for i in T.Parallel(M):` whose body holds T.Parallel loops among other
    statements, TileLang's nested parallel loops, as Tile IR's parallel loops
    one after another (loop fission, 5.7): the statements between the inner
    loops over i, each inner loop over (i, j); iterations are independent
    (9.4), so each i's statements keep their order.  A let of the outer body
    is repeated in every later loop that uses it, so it must not read a
    buffer that the statements between write (an error says so).  Returns
    the loops that replace st (st alone when it has no inner loop)."""
    body = st["body"]
    if not any(isinstance(x, Stmt) and x.get("op") == "parallel" for x in body):
        return [st]
    segs, run = [], []
    for x in body:
        if isinstance(x, Stmt) and x.get("op") == "parallel":
            if run:
                segs.append(run)
            segs.append(x)
            run = []
        else:
            run.append(x)
    if run:
        segs.append(run)
    lets, loops = [], []  # lets: (let, index of the segment that defines it)
    for k, seg in enumerate(segs):
        stmts = seg["body"] if isinstance(seg, Stmt) else seg
        used = set()
        _walk(stmts, lambda x: used.add(id(x)) if isinstance(x, Var) else None)
        carried = []
        for let, at in reversed(lets):  # the latest first: a carried let carries the lets it uses
            if id(let["name"]) not in used:
                continue
            reads = set()
            _walk(let["value"], lambda x: reads.add(x.buf.name) if isinstance(x, _ir.Load) else None)
            between = [segs[i]["body"] if isinstance(segs[i], Stmt) else segs[i] for i in range(at, k)]
            clash = reads & _written(between)
            if clash:
                raise error("a T.Parallel loop inside a T.Parallel loop with more in its body: the let '%s' "
                            "reads '%s', which the outer body writes before a later inner loop uses the let; "
                            "read it again in the inner loop" % (let["name"].name, sorted(clash)[0]))
            carried.insert(0, let)
            _walk(let["value"], lambda x: used.add(id(x)) if isinstance(x, Var) else None)
        if isinstance(seg, Stmt):
            if len(st["vars"]) + len(seg["vars"]) > 8:
                raise error("T.Parallel loops nested deeper than 8 variables")
            loop = Stmt("parallel", vars=st["vars"] + seg["vars"], extents=st["extents"] + seg["extents"],
                        body=carried + seg["body"])
        else:
            loop = Stmt("parallel", vars=st["vars"], extents=st["extents"], body=carried + seg)
            lets += [(x, k) for x in seg if isinstance(x, Stmt) and x.get("op") == "let"]
        loop.loc = getattr(seg, "loc", None) or st.loc
        loops.append(loop)
    parent = b.bodies[-1]
    at = next(i for i, x in enumerate(parent) if x is st)
    parent[at:at + 1] = loops
    return loops


def _lift_atomics(b, st, vs):
    """A T.Parallel loop whose body is only element T.atomic_adds, each of the
    form atomic_add(G[..., base + v, ...], F[v1, ..., vn]) with every loop var
    once in G's indices, in the loop's order, and F indexed by exactly the
    vars, is the tile operator atomic_add(G[..., base:base + e, ...], F[0:e1,
    ...]): the same element additions, as one tile operator.  Any other body
    keeps its element atomics, as "atomic" statements (5.9)."""
    body = st["body"]
    lifted = []
    if body and all(isinstance(x, _AtomicElem) for x in body):
        ext = dict(zip(map(id, vs), st["extents"]))
        lifted = [a.lift(vs, ext) for a in body]
    if not lifted or None in lifted:
        _atomics_as_ops(body)
        return
    parent = b.bodies[-1]
    at = next(i for i, x in enumerate(parent) if x is st)
    parent[at:at + 1] = lifted


def _atomics_as_ops(stmts):
    """Every element atomic_add below stmts as an "atomic" statement."""
    for x in stmts:
        if isinstance(x, _AtomicElem):
            x.become_op()
        elif isinstance(x, Stmt):
            for key in ("body", "then", "else"):
                _atomics_as_ops(x.get(key, []))


def _split_var(e, vs):
    """(base, var) when e is var, base + var or var + base with base free of
    the loop vars; (e, None) when e has no loop var; None otherwise."""
    ids = {id(v) for v in vs}

    def uses(x):
        if isinstance(x, Var):
            return id(x) in ids
        if isinstance(x, _ir.BinOp):
            return uses(x.a) or uses(x.b)
        if isinstance(x, _ir.Unary):
            return uses(x.a)
        if isinstance(x, Call):
            return any(uses(y) for y in x.args)
        if isinstance(x, _ir.Load):
            return any(uses(y) for y in x.idx)
        return False
    if isinstance(e, Var) and id(e) in ids:
        return 0, e
    if not uses(e):
        return e, None
    if isinstance(e, _ir.BinOp) and e.op == "+":
        if isinstance(e.b, Var) and id(e.b) in ids and not uses(e.a):
            return e.a, e.b
        if isinstance(e.a, Var) and id(e.a) in ids and not uses(e.b):
            return e.b, e.a
    return None


class _AtomicElem:
    """T.atomic_add(G[idx], value) inside T.Parallel, kept as objects until
    the loop ends (_lift_atomics)."""
    def __init__(self, dst, value):
        self.dst, self.value, self.loc = dst, value, _ir.user_location()

    def become_op(self):
        """An element atomic where it stands (Tile IR's "atomic" statement)."""
        self.op = Stmt("atomic", type="add", dst=self.dst.render()[0], value=self.value)
        self.op.loc = self.loc

    def lift(self, vs, ext):
        items, seen = [], []
        for e in self.dst.idx:
            r = _split_var(e, vs)
            if r is None:
                return None
            base, v = r
            if v is None:
                items.append(base)
            else:
                seen.append(v)
                items.append(slice(base, base + ext[id(v)]) if not (isinstance(base, int) and base == 0)
                             else slice(0, ext[id(v)]))
        if [id(v) for v in seen] != [id(v) for v in vs]:
            return None
        src = self.value
        if not (isinstance(src, _ir.Load) and len(src.idx) == len(vs)
                and all(x is v for x, v in zip(src.idx, vs))):
            return None
        st = Stmt("atomic_add", dst=Region(self.dst.buf, items).render(),
                  src=Region(src.buf, [slice(0, ext[id(v)]) for v in vs]).render())
        st.loc = self.loc
        return st


def Parallel(*extents, coalesced_width=None, loop_layout=None):
    if not 1 <= len(extents) <= 8:
        raise error("T.Parallel takes 1 to 8 extents")
    _options.parallel_hints(coalesced_width, loop_layout)
    names = ["i", "j", "k", "l", "m", "n", "o", "p"][: len(extents)]
    return _loop("parallel", names, {"extents": list(extents)})


def _range_args(what, start, stop, step):
    if stop is None:
        start, stop = 0, start
    zero = not _ir.is_sym(start) and start == 0
    fields = {"extent": stop if zero else stop - start}
    if not zero:
        fields["start"] = start
    if step is not None and not (not _ir.is_sym(step) and step == 1):
        if not _ir.is_sym(step):
            if step == 0:
                raise error("%s: step is 0" % what)
            # extent = ceildiv(stop - start, step) in Python's range() sense
            span = stop - start
            fields["extent"] = ceildiv(span, step) if step > 0 else ceildiv(-span, -step)
        else:
            raise error("%s: a symbolic step needs the iteration count; give a constant step" % what)
        fields["step"] = step
    return fields


def serial(start, stop=None, step=None, annotations=None):
    return _loop("serial", ["k"], _range_args("T.serial", start, stop, step))


Serial = serial


def unroll(start, stop=None, step=None, explicit=False, unroll_factor=None, annotations=None):
    return _loop("unroll", ["k"], _range_args("T.unroll", start, stop, step))


def vectorized(start, stop=None, step=None):
    return _loop("vectorized", ["k"], _range_args("T.vectorized", start, stop, step))


def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None):
    if sync is not None or group is not None:
        raise error("T.Pipelined(sync=..., group=...): Tile IR v1 has 'order' and 'stage' only")
    f = _range_args("T.Pipelined", start, stop, None)
    f["num_stages"] = num_stages
    if order is not None:
        f["order"] = list(order)
    if stage is not None:
        f["stage"] = list(stage)
    return _loop("pipelined", ["k"], f)


def grid(*extents):
    raise error("T.grid: Tile IR v1 has no grid loop; nest T.serial loops")


# ---- allocations ------------------------------------------------------------

def _shape(shape, what):
    if isinstance(shape, (int, Expr)):
        shape = (shape,)
    shape = list(shape)
    if not 1 <= len(shape) <= 8:
        raise error("%s: a shape has 1 to 8 dimensions" % what)
    return shape


def _alloc(op, scope, shape, dtype, what):
    b = builder()
    buf = _ir.Buffer(scope, _shape(shape, what), dtype_name(dtype), scope)
    b.declare(buf, b.auto_name(scope))
    b.emit(Stmt(op, name=buf, shape=buf.shape, dtype=buf.dtype))
    return buf


def alloc_shared(shape, dtype, scope="shared.dyn"):
    return _alloc("alloc_shared", "shared", shape, dtype, "T.alloc_shared")


def alloc_fragment(shape, dtype, scope="local.fragment"):
    return _alloc("alloc_fragment", "fragment", shape, dtype, "T.alloc_fragment")


def alloc_local(shape, dtype, scope="local"):
    return _alloc("alloc_local", "local", shape, dtype, "T.alloc_local")


def _view(src, shape, dtype, what):
    """A Tile IR "view": a new name for src's memory (no copy), with its own
    shape and dtype of the same size in bytes (tlc check proves it)."""
    b = builder()
    if b is None or not b.in_kernel():
        raise error("%s outside T.Kernel: a Tile IR view is a statement of the kernel's body; "
                    "call it inside `with T.Kernel(...)`" % what)
    if not isinstance(src, _ir.Buffer):
        raise error("%s: the source must be a tensor or a buffer, not %r" % (what, src))
    if src.scope not in ("global", "shared"):
        raise error("%s: '%s' is a %s buffer; Tile IR views alias global tensors and shared buffers only "
                    "(fragment and local elements live in registers)" % (what, src.name, src.scope))
    shp = _shape(shape, what) if shape is not None else list(src.shape)
    dt = dtype_name(dtype) if dtype is not None else src.dtype
    buf = _ir.Buffer(src.scope, shp, dt, src.scope)
    fields = {"name": buf, "src": src}
    if shape is not None:
        fields["shape"] = shp
    if dtype is not None:
        fields["dtype"] = dt
    st = Stmt("view", **fields)
    if len(b.bodies) == 1:
        b.declare(buf, b.auto_name("view"))
        b.emit(st)
        return buf
    # Inside a loop or if: a Tile IR view stands in the kernel's body (5.4).
    # A view only names memory (no copy, nothing done where it stands), so
    # it is recorded before the kernel-level statement that holds this
    # point: the same meaning, if what it views and its shape are known
    # there.
    top = b.scopes[1]  # the kernel's scope (scopes[0]: the parameters)
    if getattr(src, "scope_set", None) not in (b.scopes[0], top):
        raise error("%s of '%s' inside a loop or if: '%s' is allocated there too; Tile IR views stand in the "
                    "kernel's body, so allocate '%s' at the kernel's top level" % (what, src.name, src.name,
                                                                                   src.name))
    inner = []
    _walk(shp, lambda x: inner.append(x.name) if isinstance(x, Var) and getattr(x, "scope_set", top)
          not in (b.scopes[0], top) else None)
    if inner:
        raise error("%s inside a loop or if: its shape uses '%s', a value of that loop or if; a view's shape "
                    "is fixed for the whole kernel" % (what, inner[0]))
    buf.name = b.fresh(b.auto_name("view"))
    top.add(buf.name)
    buf.scope_set, buf.hoisted = top, True
    body = b.kernel.body
    body.insert(len(body) - 1, st)
    return buf


def view(src, shape=None, dtype=None):
    """T.view(src, shape=None, dtype=None): src's memory with another shape
    and/or dtype, the same size in bytes (Tile IR's view)."""
    return _view(src, shape, dtype, "T.view")


def reshape(src, shape):
    """T.reshape(src, shape): src's memory with another shape (Tile IR's view)."""
    return _view(src, shape, None, "T.reshape")


class LocalVar(Var):
    """T.alloc_var: a per-thread mutable scalar; `x = value` assigns it
    (assign()).  One that a tile operator's region or fill value uses (grouped GEMM's
    `cur_batch_idx`, found by a loop of assignments) must be block-uniform,
    which Tile IR never holds an alloc_var to be (5.3); TileLang's programs
    assign such a variable the same value in every thread, so tlir then
    holds it in shared memory instead (share()): an element every thread
    reads, block-uniform (5.3), each assignment a parallel loop of one
    iteration (one store, for the whole block).  An assignment that is not
    block-level (under an `if` on the thread, in a parallel loop) then gets
    tlc check's error for a parallel loop there, with the reason appended."""
    NOTE = ("T.alloc_var in shared memory: a tile operator's region uses it, so it must be the same in every "
            "thread; each assignment is a parallel loop of one iteration")

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.shared, self.alloc, self.assigns = False, None, []

    def render(self):
        return (self.name + "[0]" if self.shared else self.name), _ir.P_PRIM

    def assign(self, value):
        b = builder()
        a = _ir.Assign(self, value)
        a.loc = _ir.user_location()
        st = self._one(a) if self.shared else a
        b.emit(st)
        self.assigns.append((b.bodies[-1], st))

    @staticmethod
    def _one(a):
        """`x[0] = value` as a parallel loop of one iteration."""
        b = builder()
        v = Var("_tlir_i", "loop")
        v.name = "_tlir_i%d" % b.counter
        b.counter += 1
        st = Stmt("parallel", vars=[v], extents=[1], body=[a])
        st.loc = a.loc
        st["x-tlir"] = LocalVar.NOTE
        return st

    def share(self):
        if self.shared or self.alloc is None:
            return
        self.shared = True
        parent, st = self.alloc
        st["op"], st["shape"], st["x-tlir"] = "alloc_shared", [1], LocalVar.NOTE
        init = st.pop("init", None)
        if init is not None:
            a = _ir.Assign(self, init)
            a.loc = st.loc
            parent.insert(next(i for i, x in enumerate(parent) if x is st) + 1, self._one(a))
        for parent, a in self.assigns:
            at = next((i for i, x in enumerate(parent) if x is a), None)
            if at is not None:
                parent[at] = self._one(a)


def alloc_var(dtype, init=None, scope="local.var"):
    b = builder()
    v = LocalVar("var", "alloc_var", dtype_name(dtype))
    b.declare(v, b.auto_name("var"))
    st = Stmt("alloc_var", name=v, dtype=v.dtype, init=init)
    b.emit(st)
    v.alloc = (b.bodies[-1], st)
    return v



# ---- tile operators ---------------------------------------------------------

def copy(src, dst, **hints):
    ev = _options.copy_hints(hints)
    st = Stmt("copy", src=region_text(src, "T.copy source"), dst=region_text(dst, "T.copy destination"))
    buf = src if isinstance(src, _ir.Buffer) else getattr(src, "buf", None)
    if ev and buf is not None and buf.scope == "global":  # Tile IR's hint is for copies that read a tensor
        st["eviction_policy"] = ev
    builder().emit(st)


def c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None):
    """T.c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad):
    TileLang's im2col load of a 2-D convolution (a TMA im2col copy on
    Hopper) as the parallel loop it computes: img is an N x H x W x C
    tensor, col a block_M x block_K shared (or fragment) tile; row i is the
    output pixel p = nhw_step * block_M + i (n, oh, ow in row-major order),
    column j the filter element q = c_step * block_K + j (kh, kw, c in
    row-major order), and col[i, j] = img[n, oh * stride - pad + kh *
    dilation, ow * stride - pad + kw * dilation, c], 0 outside the image
    (as TMA's out-of-bounds fill)."""
    what = "T.c2d_im2col"
    if not isinstance(img, _ir.Buffer) or img.scope != "global" or img.ndim != 4:
        raise error("%s: the image must be a 4-D (N, H, W, C) global tensor" % what)
    if not isinstance(col, _ir.Buffer) or col.scope not in ("shared", "fragment") or col.ndim != 2:
        raise error("%s: the column tile must be a whole 2-D shared or fragment buffer" % what)
    if img.dtype != col.dtype:
        raise error("%s: the image is %s but the column tile %s; TileLang's im2col copies without "
                    "converting" % (what, img.dtype, col.dtype))
    for name, v in (("kernel", kernel), ("stride", stride), ("dilation", dilation), ("pad", pad)):
        if _ir.is_sym(v) or not isinstance(v, int) or v < (0 if name == "pad" else 1):
            raise error("%s: %s must be a Python integer (%s), not %r"
                        % (what, name, ">= 0" if name == "pad" else ">= 1", v))
    if eviction_policy not in (None, "evict_normal", "evict_first", "evict_last"):
        raise error("%s: eviction_policy %r is not one of evict_normal, evict_first, evict_last"
                    % (what, eviction_policy))
    nb, h, w, c = img.shape
    oh = (h + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    ow = (w + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    bm, bk = col.shape
    for i, j in Parallel(bm, bk):
        p = nhw_step * bm + i
        q = c_step * bk + j
        n = p // (oh * ow)
        hh = p % (oh * ow) // ow * stride - pad + q // (kernel * c) * dilation
        ww = p % ow * stride - pad + q // c % kernel * dilation
        inside = And(And(And(hh >= 0, ww >= 0), And(hh < h, ww < w)), n < nb)
        col[i, j] = if_then_else(inside, img[n, hh, ww, q % c], 0)


def _fill_local(x, value):
    """T.fill / T.clear of a per-thread buffer (T.alloc_local) or scalar
    (T.alloc_var): TileLang stores every element in the thread that runs
    it, so this is an assignment (an unrolled loop of them for a buffer),
    thread-level code as written.  True when x is such a buffer."""
    if isinstance(x, LocalVar):
        x.assign(value)
        return True
    if not (isinstance(x, _ir.Buffer) and x.scope == "local"):
        return False
    names = ["i", "j", "k", "l", "m", "n", "o", "p"][: x.ndim]
    gens = []

    def nest(d, idx):
        if d == x.ndim:
            x[tuple(idx)] = value
            return
        g = _loop("unroll", [names[d]], {"extent": x.shape[d]})
        gens.append(g)
        v = next(g)
        nest(d + 1, idx + [v])
        next(g, None)  # the loop's body is done: close it

    nest(0, [])
    return True


def fill(buffer, value):
    if not _fill_local(buffer, value):
        _ir.share_vars(value)  # a tile operator's value is block-uniform too
        builder().emit(Stmt("fill", dst=region_text(buffer, "T.fill destination"), value=value))


def clear(buffer):
    if not _fill_local(buffer, 0):
        builder().emit(Stmt("clear", dst=region_text(buffer, "T.clear destination")))


class GemmWarpPolicy:
    Square = "square"
    FullRow = "full_row"
    FullCol = "full_col"


def _whole(x, what):
    if not isinstance(x, _ir.Buffer):
        raise error("%s must be a whole buffer in Tile IR v1 (gemm operands are not "
                    "regions); allocate a tile of the operand's shape" % what)
    if x.scope not in ("shared", "fragment"):
        raise error("%s must be a shared or fragment buffer, not %s" % (what, x.scope))
    return x.name


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0, mbar=None):
    if policy not in ("square", "full_row", "full_col"):
        raise error("T.gemm(policy=%r): Tile IR v1 has Square, FullRow and FullCol" % (policy,))
    _options.gemm_hints(wg_wait, mbar)
    st = Stmt("gemm", A=_whole(A, "T.gemm A"), B=_whole(B, "T.gemm B"), C=_whole(C, "T.gemm C"))
    if transpose_A is not False:
        st["transpose_A"] = transpose_A
    if transpose_B is not False:
        st["transpose_B"] = transpose_B
    if policy != "square":
        st["policy"] = policy
    if clear_accum is not False:
        st["clear_accum"] = clear_accum
    if k_pack != 1:
        st["k_pack"] = k_pack
    builder().emit(st)


def _ndim(x):
    if isinstance(x, _ir.Buffer):
        return x.ndim
    if isinstance(x, Region):
        return x.ndim
    raise error("a reduction operand must be a buffer or a slice of one")


def reduce(buffer, out, reduce_type, dim=-1, clear=True):
    if reduce_type not in ("sum", "max", "min", "abssum", "absmax", "bitand", "bitor", "bitxor"):
        raise error("T.reduce: unknown reduce type %r" % (reduce_type,))
    n = _ndim(buffer)
    if isinstance(dim, int) and dim < 0:
        dim += n
    st = Stmt("reduce", type=reduce_type, src=region_text(buffer, "T.reduce source"),
              dst=region_text(out, "T.reduce destination"), dim=dim)
    if clear is not True:
        st["clear"] = clear
    builder().emit(st)


def _reducer(kind):
    def f(buffer, out, dim=-1, clear=True):
        reduce(buffer, out, kind, dim, clear)
    f.__name__ = "reduce_" + kind
    return f


(reduce_max, reduce_min, reduce_sum, reduce_abssum, reduce_absmax, reduce_bitand, reduce_bitor,
 reduce_bitxor) = map(_reducer, ("max", "min", "sum", "abssum", "absmax", "bitand", "bitor", "bitxor"))


def cluster_reduce(buffer, reduce_type="sum"):
    """Tile IR's cluster_reduce (5.6): the fragment of the block of rank 0 of the kernel's thread-block cluster
    (T.Kernel(..., cluster_dims=...)) gets the sum (max, min) of every block's, in rank order; the others keep
    theirs. A statement of the kernel's body itself, on a whole float32 or int32 fragment."""
    if reduce_type not in ("sum", "max", "min"):
        raise error("T.cluster_reduce: unknown reduce type %r; it is 'sum', 'max' or 'min'" % (reduce_type,))
    builder().emit(Stmt("cluster_reduce", type=reduce_type, dst=region_text(buffer, "T.cluster_reduce buffer")))


def _scan(op, src, dst, dim, reverse):
    if dst is None:
        dst = src
    n = _ndim(src)
    if isinstance(dim, int) and dim < 0:
        dim += n
    st = Stmt(op, src=region_text(src, "T.%s source" % op),
              dst=region_text(dst, "T.%s destination" % op), dim=dim)
    if reverse is not False:
        st["reverse"] = reverse
    builder().emit(st)


def cumsum(src, dst=None, dim=0, reverse=False):
    _scan("cumsum", src, dst, dim, reverse)


def cummax(src, dst=None, dim=0, reverse=False):
    """Running maximum along dim (Tile IR's cummax, 5.6)."""
    _scan("cummax", src, dst, dim, reverse)


def cummin(src, dst=None, dim=0, reverse=False):
    _scan("cummin", src, dst, dim, reverse)


def _atomic_elem(kind, dst, value, return_prev):
    """An element atomic, Tile IR's "atomic" statement (5.9); with
    return_prev, the element's previous value (a let the Python name takes)."""
    b = builder()
    st = Stmt("atomic", type=kind, dst=dst.render()[0], value=value)
    v = None
    if return_prev:
        v = Var("prev", "let")
        b.declare(v, "prev")
        v.provisional = True
        st["old"] = v
    b.emit(st)
    return v


def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False):
    b = builder()
    elem = isinstance(dst, _ir.Load) and not isinstance(value, (_ir.Buffer, Region))
    if elem and "parallel" in b.loops and not return_prev:
        b.emit(_AtomicElem(dst, value))  # lifted to a tile operator when the loop ends, if it can be
        return None
    if elem:
        # an element and a value: TileLang's AtomicAdd of one element, in
        # thread-level code by every thread that runs it (gemv's
        # T.atomic_add(C_shared[tn], C_accum[0])), as Tile IR's atomic
        return _atomic_elem("add", dst, value, return_prev)
    if return_prev:
        raise error("T.atomic_add(return_prev=True) of a region: Tile IR's tile atomic_add returns nothing; "
                    "write it as element atomics")
    d = region_text(dst, "T.atomic_add destination")
    if isinstance(value, (_ir.Buffer, Region)):
        builder().emit(Stmt("atomic_add", dst=d, src=region_text(value, "T.atomic_add source")))
    else:
        builder().emit(Stmt("atomic_add", dst=d, value=value))


def _atomic_extreme(kind, dst, value, return_prev):
    if not isinstance(dst, _ir.Load) or isinstance(value, (_ir.Buffer, Region)):
        raise error("T.atomic_%s of a region: Tile IR has element atomic %s only; write it as a T.Parallel "
                    "loop of element T.atomic_%s calls" % (kind, kind, kind))
    if return_prev and "parallel" not in builder().loops:
        raise error("T.atomic_%s(return_prev=True) outside T.Parallel: every thread would run it; put it in "
                    "a T.Parallel loop" % kind)
    # outside T.Parallel every thread runs it, which a max or min does not mind
    return _atomic_elem(kind, dst, value, return_prev)


def _print(obj, msg="", warp_group_id=None, warp_id=None):
    """T.print(value, msg): Tile IR's print (one line per thread, or per
    iteration in T.Parallel); a buffer is printed element by element from a
    T.Parallel loop in TileLang's way, which Tile IR leaves to the program."""
    if isinstance(obj, (_ir.Buffer, Region)):
        raise error("T.print of a buffer: Tile IR prints values; print its elements from a T.Parallel loop "
                    "(T.print(x[i], msg))")
    if warp_group_id is not None or warp_id is not None:
        raise error("T.print(warp_group_id=..., warp_id=...): Tile IR prints from every thread that runs it; "
                    "put it under an if on T.get_thread_binding()")
    if isinstance(obj, str):  # T.print("text")
        obj, msg = None, obj + (" " + msg if msg else "")
    st = Stmt("print") if obj is None else Stmt("print", value=obj)
    if msg:
        st["msg"] = str(msg)
    builder().emit(st)


def device_assert(cond, msg=""):
    """T.device_assert(cond, msg): a run-time error (the interpreter) or a
    trap (the GPU) where cond is false; a Python condition is checked now."""
    if not isinstance(cond, Expr):
        if not cond:
            raise error("T.device_assert: the condition is false while translating%s" % (": " + msg if msg else ""))
        return
    st = Stmt("device_assert", cond=cond)
    if msg:
        st["msg"] = str(msg)
    builder().emit(st)


def atomic_max(dst, value, memory_order=None, return_prev=False):
    return _atomic_extreme("max", dst, value, return_prev)


def atomic_min(dst, value, memory_order=None, return_prev=False):
    return _atomic_extreme("min", dst, value, return_prev)


# ---- annotations ------------------------------------------------------------

class Layout:
    """T.Layout(shape, lambda i, j: (...)): a layout map."""
    def __init__(self, shape, forward_fn):
        self.shape, self.fn = _shape(shape, "T.Layout"), forward_fn


class _Swizzle:
    pass


SWIZZLE = _Swizzle()


def make_swizzled_layout(buffer, *args, **kwargs):
    return SWIZZLE


def _check_global_layout(buf, lay):
    """A layout on a global tensor (TileLang's dQ in flash attention's
    backward) changes only where its elements live; Tile IR v1 records it
    and keeps the tensor dense and row-major.  Every kernel that reads the
    tensor through the same layout then reads the same values as
    TileLang's; that holds when the map is one-to-one (checked here, on the
    tensor's shape, with NumPy)."""
    if not isinstance(lay, Layout):
        raise error("T.annotate_layout: '%s' is a global tensor; it takes a T.Layout index map (recorded and "
                    "ignored by Tile IR v1), not a swizzle" % buf.name)
    if not all(isinstance(d, int) for d in buf.shape):
        raise error("T.annotate_layout: '%s' has a dynamic shape, so tlir cannot check that its layout is "
                    "one-to-one (which ignoring a layout on global memory needs)" % buf.name)
    try:
        import numpy as np
    except ImportError:
        raise error("T.annotate_layout on the global tensor '%s' needs NumPy to check that the layout is "
                    "one-to-one" % buf.name) from None
    n = 1
    for d in buf.shape:
        n *= d
    if n == 0:
        return
    try:
        idx = [np.asarray(x, np.int64).ravel() for x in
               np.broadcast_arrays(*lay.fn(*np.indices(buf.shape, dtype=np.int64)))]
    except Exception as e:  # noqa: BLE001 - a map that NumPy cannot evaluate
        raise error("T.annotate_layout: the layout of the global tensor '%s' cannot be checked with NumPy "
                    "(%s: %s)" % (buf.name, type(e).__name__, e)) from None
    key = np.zeros(idx[0].shape if idx else (n,), np.int64)
    for x in idx:
        lo, hi = int(x.min()), int(x.max())
        if lo < 0:
            raise error("T.annotate_layout: the layout of the global tensor '%s' gives a negative index" % buf.name)
        key = key * (hi + 1) + x
    if key.size != n or np.unique(key).size != n:
        raise error("T.annotate_layout: the layout of the global tensor '%s' is not one-to-one, so ignoring it "
                    "would change what its readers see" % buf.name)


def annotate_layout(layout_map):
    b = builder()
    out = {}
    for buf, lay in layout_map.items():
        if not isinstance(buf, _ir.Buffer):
            raise error("T.annotate_layout: the keys are buffers, not %s" % type(buf).__name__)
        if buf.scope == "global":
            _check_global_layout(buf, lay)
        elif buf.scope != "shared":
            raise error("T.annotate_layout: '%s' is a %s buffer; Tile IR v1 lays out shared buffers (and records "
                        "index maps of global tensors)" % (buf.name, buf.scope))
        if lay is SWIZZLE:
            out[buf] = "swizzle"
        elif isinstance(lay, Layout):
            vs = [Var("v%d" % i, "layout", provisional=False) for i in range(len(lay.shape))]
            names = ["i", "j", "k", "l", "m", "n", "o", "p"]
            for v, n in zip(vs, names):
                v.name = n if not b.visible(n) else b.fresh(n)
            idx = lay.fn(*vs)
            idx = list(idx) if isinstance(idx, (list, tuple)) else [idx]
            out[buf] = {"vars": [v.name for v in vs], "index": idx}
        else:
            raise error("T.annotate_layout: the layout of '%s' is %s; Tile IR v1 has the "
                        "swizzle (make_swizzled_layout / make_mma_swizzle_layout) and "
                        "T.Layout index maps, not fragment layouts" % (buf.name, type(lay).__name__))
    b.emit(Stmt("annotate_layout", layouts=out))


def use_swizzle(panel_size, order="row", enable=True, num_xcds=0):
    order = _options.swizzle_order(order, num_xcds)
    st = Stmt("use_swizzle", panel_size=panel_size)
    if order != "row":
        st["order"] = order
    if enable is not True:
        st["enable"] = enable
    builder().emit(st)


def sync_threads(fence=False):
    """T.sync_threads(): a barrier of the block's threads; with fence=True
    (a Tile IR keyword: TileLang has no spelling of it) also a device-scope
    memory fence, Tile IR's "fence" (proto/tile-ir-v1.md 5.7): what blocks
    hand each other through an atomic counter needs one on each side (9.1)."""
    if fence is not True and fence is not False:
        raise error("T.sync_threads(fence=%r): True or False" % (fence,))
    st = Stmt("sync_threads")
    if fence:
        st["fence"] = True
    builder().emit(st)


syncthreads = sync_threads


# ---- functions --------------------------------------------------------------

def _fold(py, fn, *args):
    """Python-level folding when every argument is a Python number."""
    if not any(isinstance(a, Expr) for a in args):
        return py(*args)
    return Call(fn, args)


def ceildiv(a, b):
    return _fold(lambda x, y: -(-x // y), "ceildiv", a, b)


def max(a, b):  # noqa: A001
    return Call("max", [a, b])


def min(a, b):  # noqa: A001
    return Call("min", [a, b])


def abs(x):  # noqa: A001
    return Call("abs", [x])


def _math(fn):
    def f(x):
        return Call(fn, [x])
    f.__name__ = fn
    return f


exp, exp2, log, log2, sqrt, rsqrt, tanh, sigmoid, floor, ceil, round = (
    _math(n) for n in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid",
                       "floor", "ceil", "round"))
erf, sin, cos, tan, log1p, expm1, log10, trunc, isnan, isinf = (
    _math(n) for n in ("erf", "sin", "cos", "tan", "log1p", "expm1", "log10", "trunc",
                       "isnan", "isinf"))


def clamp(x, lo, hi):
    """T.clamp(x, lo, hi): min(max(x, lo), hi) (a NaN x gives lo)."""
    return Call("clamp", [x, lo, hi])


def pow(a, b):  # noqa: A001
    return Call("pow", [a, b])


def fma(a, b, c):
    return Call("fma", [a, b, c])


def if_then_else(cond, a, b):
    if not isinstance(cond, Expr):
        return a if cond else b
    return Call("if_then_else", [cond, a, b])


def infinity(dtype):
    return Call("infinity", [DType(dtype_name(dtype))])


def max_value(dtype):
    return Call("max_value", [DType(dtype_name(dtype))])


def min_value(dtype):
    return Call("min_value", [DType(dtype_name(dtype))])


def cast(value, dtype):
    """T.cast(value, dtype); TileLang's T.Cast(dtype, value) also."""
    if isinstance(value, (str, DType)) and not isinstance(dtype, (str, DType)):
        value, dtype = dtype, value
    return Call(dtype_name(dtype), [value])


Cast = cast


def reinterpret(a, b):
    """T.reinterpret(dtype, value) (TileLang's order) or (value, dtype)."""
    if isinstance(a, (str, DType)):
        a, b = b, a
    return Call("reinterpret", [a, DType(dtype_name(b))])


def get_thread_binding(dim=0):
    return Call("thread_binding", [dim])


def And(a, b):
    return _ir.BinOp("and", a, b)


def Or(a, b):
    return _ir.BinOp("or", a, b)


def Not(a):
    return _ir.Unary("not", a)


# ---- what Tile IR v1 cannot say ----------------------------------------------

_MISSING = {
    "atan": "function atan", "exp10": "function exp10",
    "alloc_reducer": "reducer buffers", "finalize_reducer": "reducer buffers",
    "attr": "TVM attributes (T.attr; with T.tvm_thread_allreduce, a sum across threads: add the threads' "
            "values into a shared buffer with T.atomic_add instead)",
    "tvm_thread_allreduce": "thread all-reduce intrinsic", "comm_reducer": "TVM reducers",
    "atomic_addx2": "vector atomics",
    "atomic_addx4": "vector atomics", "call_extern": "calls of external functions",
    "import_source": "inline C source", "ptx": "inline PTX", "call_intrin": "intrinsic calls",
    "Fragment": "fragment layouts", "Scope": "scopes", "while_loop": "while loops",
    "Persistent": "persistent loops", "ws": "warp specialization",
    "alloc_barrier": "barriers", "barrier_wait": "barriers", "mbarrier_wait_parity": "barriers",
    "tma_copy": "explicit TMA copies", "alloc_tmem": "tensor memory",
    "StridedTensor": "strided tensors", "gemm_sp": "sparse gemm", "wgmma_gemm": "raw wgmma",
    "shfl_xor": "warp shuffles", "shfl_down": "warp shuffles", "shfl_up": "warp shuffles",
    "empty": "eager-style outputs (T.empty)",
    "const": "eager-style constants (T.const)",
    "any_of": "any_of", "all_of": "all_of", "copysign": "copysign", "bitwise_and": "bitwise_and (use &)",
}


def __getattr__(name):
    what = _MISSING.get(name)
    if what is not None:
        raise error("T.%s: Tile IR v1 has no %s" % (name, what))
    if name.startswith("__"):
        raise AttributeError(name)
    raise error("T.%s is not part of tlir.language (Tile IR v1 cannot say it)" % name)


# ---- more of TileLang's names -------------------------------------------------

dtype = DType


def floordiv(a, b):
    return a // b


def floormod(a, b):
    return a % b


def truncdiv(a, b):
    raise error("T.truncdiv: Tile IR v1's '//' is floor division; there is no truncating division")


def thread_binding(start, stop=None, thread="threadIdx.x"):
    """TileLang's T.thread_binding(0, threads, thread="threadIdx.x")."""
    dims = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}
    if thread not in dims:
        raise error("T.thread_binding(thread=%r): Tile IR v1 binds threadIdx.x/y/z" % (thread,))
    return Call("thread_binding", [dims[thread]])


def no_set_max_nreg():
    """A register-allocation hint of TileLang (no change to results); Tile IR
    v1 has no such hint, so it records nothing."""


def disable_warp_group_reg_alloc():
    """As no_set_max_nreg."""


def alloc_global(shape, dtype, scope="global", zeroed=False):
    """A workspace buffer (Tile IR's "workspaces"): global memory that the
    runtime allocates for each launch (not zeroed, as TileLang's), shared by
    the program's kernels, which run in order.  zeroed=True (a Tile IR
    keyword) asks for Tile IR's "zeroed" workspace (3.1): all zeros at the
    start of every launch, which the program must leave all zeros again (a
    block that counts arrivals in it sets the count back)."""
    b = builder()
    shape = _shape(shape, "T.alloc_global")
    if zeroed is not True and zeroed is not False:
        raise error("T.alloc_global(zeroed=%r): True or False" % (zeroed,))
    buf = _ir.Buffer("workspace", shape, dtype_name(dtype), "global")
    buf.zeroed = zeroed
    keep = b.scopes
    b.scopes = b.scopes[:1]  # the kernel scope: every kernel sees it
    try:
        b.declare(buf, b.auto_name("workspace"))
    finally:
        b.scopes = keep
    b.workspaces.append(buf)
    return buf


print = _print  # noqa: A001  (TileLang's T.print; defined last: this module uses no builtin print)
