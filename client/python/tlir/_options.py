"""tlir/_options.py - TileLang's option names and what Tile IR makes of
them (proto/tile-ir-v1.md, appendix C, has the table).

Each option is mapped to the Tile IR field that has its meaning, accepted
as what Tile IR does anyway, accepted without effect (a debugging or
toolchain knob that changes neither results nor the program), or refused
with an error that says why.  Pass configs (`tilelang.compile(...,
pass_configs=...)`, `@tilelang.jit(pass_configs=...)`) apply to every
pipelined loop of the program; the hints of T.copy, T.Parallel, T.gemm and
T.use_swizzle are handled where they are given (language.py calls here).
"""
import copy as _copy

from ._ir import Stmt, TlirError, builder, error

_NO_EFFECT = "accepted without effect"

# key -> (what tlir does, why); the values each key takes are checked in
# pass_config_fields.
PASS_CONFIGS = {
    "tl.disable_warp_specialized": "each pipelined loop's 'warp_specialize' is its negation",
    "tl.disable_tma_lower": "each pipelined loop's 'tma' is its negation",
    "tl.enable_fast_math": "accepted: compiled Tile IR already has the latitude of 8.3 (the GPU's fast exp2, "
                           "log2, rsqrt, tanh) and no more, whatever the value",
    "tl.config_index_bitwidth": "32 or 64 accepted: Tile IR fixes its index types (int32 loop variables, 64-bit "
                                "global offsets)",
    "tl.dynamic_alignment": "16 accepted (Tile IR's default 'align' of a tensor); other values refused",
    "tl.device_compile_flags": "refused unless empty: tlc chooses the toolchain's flags (they are part of every "
                               "build key)",
    "tl.ptxas_register_usage_level": _NO_EFFECT + " (a register-allocation knob of ptxas)",
    "tl.enable_ptxas_verbose_output": _NO_EFFECT + " (tlc's metadata gives registers and spills)",
    "tl.disable_dynamic_tail_split": _NO_EFFECT + " (Tile IR guards partial tiles itself, 9.5)",
    "tl.disable_safe_memory_legalize": _NO_EFFECT + " (Tile IR keeps its bounds guards, 9.5)",
    "tl.disable_data_race_check": _NO_EFFECT + " (a TileLang debugging check)",
    "tl.disable_prelower_semantic_check": _NO_EFFECT + " (a TileLang debugging check)",
    "tl.disable_buffer_init_check": _NO_EFFECT + " (a TileLang debugging check)",
    "tl.ast_print_enable": _NO_EFFECT + " (TileLang debugging output)",
    "tl.layout_visualization_enable": _NO_EFFECT + " (TileLang debugging output)",
    "tl.layout_visualization_formats": _NO_EFFECT + " (TileLang debugging output)",
    "tl.debug_merge_shared_memory_allocations": _NO_EFFECT + " (TileLang debugging output)",
    "tl.enable_aggressive_shared_memory_merge": _NO_EFFECT + " (tlc lays out shared memory itself)",
    "tl.Simplify": _NO_EFFECT + " (tlc folds and simplifies itself)",
    "tl.force_let_inline": _NO_EFFECT + " (tlc folds and simplifies itself)",
    "tl.enable_aggressive_loop_unswitching": _NO_EFFECT + " (tlc splits its parallel loops itself)",
}


def _key(k):
    return getattr(k, "value", k)  # a PassConfigKey member or its string


def pass_config_fields(pass_configs, compile_flags=None):
    """The fields every pipelined loop gets from pass_configs; TlirError for
    a refused or unknown one."""
    fields = {}
    if compile_flags:
        raise TlirError("compile_flags=%r: tlc chooses the toolchain's flags (they are part of every build key); "
                        "Tile IR has no extra compiler flags" % (compile_flags,))
    for k, v in (pass_configs or {}).items():
        key = _key(k)
        if key not in PASS_CONFIGS:
            raise TlirError("pass config '%s' is unknown to tlir; it knows %s" % (key, ", ".join(sorted(PASS_CONFIGS))))
        if key == "tl.disable_warp_specialized":
            fields["warp_specialize"] = not v
        elif key == "tl.disable_tma_lower":
            fields["tma"] = not v
        elif key == "tl.config_index_bitwidth" and v not in (32, 64):
            raise TlirError("pass config tl.config_index_bitwidth=%r: 32 or 64" % (v,))
        elif key == "tl.dynamic_alignment" and v != 16:
            raise TlirError("pass config tl.dynamic_alignment=%r: Tile IR's alignment is each tensor's 'align' "
                            "(16 bytes by default); only 16 has that meaning" % (v,))
        elif key == "tl.device_compile_flags" and v:
            raise TlirError("pass config tl.device_compile_flags: tlc chooses the toolchain's flags (they are part "
                            "of every build key); Tile IR has no extra compiler flags")
    return fields


def _pipelined_loops(body):
    for st in body:
        if not isinstance(st, dict):
            continue
        if st.get("op") == "pipelined":
            yield st
        for k in ("body", "then", "else"):
            if isinstance(st.get(k), list):
                yield from _pipelined_loops(st[k])


def apply_pass_configs(func, pass_configs, compile_flags=None):
    """func, or a copy of it whose pipelined loops carry the fields
    pass_configs ask for."""
    fields = pass_config_fields(pass_configs, compile_flags)
    if not fields:
        return func
    f = _copy.copy(func)
    f.doc = _copy.deepcopy(func.doc)
    for loop in _pipelined_loops(f.doc["kernel"]["body"]):
        loop.update(fields)
    return f


# ---- hints of the language's statements ------------------------------------------

def _enclosing(op):
    """The innermost open loop statement of kind op, or None."""
    b = builder()
    for i in range(len(b.bodies) - 1, 0, -1):
        parent = b.bodies[i - 1]
        st = parent[-1] if parent else None
        if isinstance(st, Stmt) and st.get("body") is b.bodies[i] and st.get("op") == op:
            return st
    return None


def _width(what, w):
    if w is not None and (not isinstance(w, int) or w < 1 or w & (w - 1)):
        raise error("%s(coalesced_width=%r): a power of two" % (what, w))


def copy_hints(hints):
    """T.copy's keyword arguments: disable_tma=True turns TMA off for the
    enclosing T.Pipelined loop ('tma': false; outside one Tile IR issues no
    bulk tensor copy anyway); eviction_policy is returned for the copy's
    'eviction_policy' (None for evict_normal); coalesced_width, loop_layout
    and annotations are hints Tile IR chooses itself."""
    known = ("coalesced_width", "disable_tma", "eviction_policy", "loop_layout", "annotations")
    for k in hints:
        if k not in known:
            raise error("T.copy(): unknown argument '%s'" % k)
    _width("T.copy", hints.get("coalesced_width"))
    ev = hints.get("eviction_policy")
    if ev not in (None, "evict_normal", "evict_first", "evict_last"):
        raise error("T.copy(eviction_policy=%r): one of evict_normal, evict_first, evict_last" % (ev,))
    if hints.get("disable_tma"):
        loop = _enclosing("pipelined")
        if loop is not None:
            loop["tma"] = False
    return None if ev == "evict_normal" else ev


def parallel_hints(coalesced_width, loop_layout):
    """T.Parallel's hints: the compiler chooses vector widths (from alignment)
    and the layout of a parallel loop (from its fragments)."""
    _width("T.Parallel", coalesced_width)


def gemm_hints(wg_wait, mbar):
    """T.gemm's wg_wait: 0 (wait for the gemm) and -1 (issue it and wait
    later) both mean a gemm whose results the next readers see, which is
    Tile IR's gemm (the compiler keeps wgmma groups in flight only where
    that holds); a count of groups left in flight, and mbar, have no form."""
    if wg_wait not in (0, -1):
        raise error("T.gemm(wg_wait=%r): Tile IR's compiler chooses how many wgmma groups stay in flight "
                    "(its statements see the gemm's results as written); wg_wait 0 and -1 are accepted" % (wg_wait,))
    if mbar is not None:
        raise error("T.gemm(mbar=...): Tile IR has no barrier objects; the compiler places the gemm's waits")


def swizzle_order(order, num_xcds=0):
    """T.use_swizzle's order ('row', or 'column' / 'col') as Tile IR's."""
    if num_xcds:
        raise error("T.use_swizzle(num_xcds=%r): Tile IR's use_swizzle has no chiplet (XCD) remapping" % (num_xcds,))
    if order == "row":
        return "row"
    if order in ("column", "col"):
        return "column"
    raise error("T.use_swizzle(order=%r): 'row' or 'column'" % (order,))
