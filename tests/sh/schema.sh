#!/bin/sh
# tests/sh/schema.sh - checks proto/tile-ir-v1.schema.json against programs.
#
# Every examples/*.json must be accepted by the schema (JSON Schema draft
# 2020-12, validated with /usr/bin/python3 and the python3-jsonschema module's
# Draft202012Validator), and each of the small bad programs written below
# must be rejected (unknown field, wrong op, missing required field, bad
# dtype, bad identifier, ...).  A few good variants check that the schema is
# not stricter than the spec (x- fields, every statement op).
#
# Run from anywhere: sh tests/sh/schema.sh.  Exit status: 0 success,
# 1 failure, 77 skipped (no /usr/bin/python3 or no jsonschema module).

PY=/usr/bin/python3
cd "$(dirname "$0")/../.." || exit 1
SCHEMA=proto/tile-ir-v1.schema.json

if [ ! -x "$PY" ]; then
  echo "schema.sh: skipped: $PY not found" >&2
  exit 77
fi
if ! "$PY" -c 'from jsonschema import Draft202012Validator' 2>/dev/null; then
  echo "schema.sh: skipped: the Python module jsonschema (with draft 2020-12) is missing; apt-get install python3-jsonschema" >&2
  exit 77
fi
if [ ! -f "$SCHEMA" ]; then
  echo "schema.sh: FAIL: $SCHEMA not found" >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/schema-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/good" "$tmp/bad"

# A small valid program; every bad program below is this one with one fault.
cat > "$tmp/good/base.json" <<'EOF'
{"tlir": 1, "name": "add_one", "constants": {"block_n": 128},
 "params": [{"name": "n", "kind": "scalar", "dtype": "int32"},
            {"name": "a", "kind": "tensor", "dtype": "float32", "shape": ["n"]}],
 "kernel": {"grid": ["ceildiv(n, block_n)"], "threads": 128, "block_vars": ["bx"],
            "body": [{"op": "alloc_fragment", "name": "r", "shape": ["block_n"], "dtype": "float32"},
                     {"op": "copy", "src": "a[bx * block_n]", "dst": "r"},
                     {"op": "parallel", "vars": ["i"], "extents": ["block_n"], "body": ["r[i] += 1.0"]},
                     {"op": "copy", "src": "r", "dst": "a[bx * block_n]"}]}}
EOF

# x- fields anywhere, and every op of the spec with all its optional fields.
cat > "$tmp/good/every_op.json" <<'EOF'
{"tlir": 1, "name": "every_op", "x-tool": {"any": [null, 1]},
 "constants": {"M": 64, "half": 0.5, "flag": true, "two_m": "2 * M"},
 "params": [{"name": "A", "kind": "tensor", "dtype": "float16", "shape": ["M", 64], "align": 128, "x-a": 1},
            {"name": "S", "kind": "tensor", "dtype": "float32", "shape": [64]},
            {"name": "s", "kind": "scalar", "dtype": "float32"}],
 "kernel": {"grid": [1, 1, 1], "threads": [32, 2, 2], "block_vars": ["bx", "by", "bz"],
            "cluster": [1, 1, "2 - 1"], "x-k": "kept",
            "body": [
   {"op": "use_swizzle", "panel_size": 4, "order": "column", "enable": "flag"},
   {"op": "alloc_shared", "name": "As", "shape": ["M", 64], "dtype": "float16", "x-s": 1},
   {"op": "alloc_shared", "name": "Bs", "shape": [64, 64], "dtype": "float16"},
   {"op": "alloc_fragment", "name": "C", "shape": ["M", 64], "dtype": "float32"},
   {"op": "alloc_fragment", "name": "R", "shape": ["M"], "dtype": "float32"},
   {"op": "alloc_local", "name": "L", "shape": [4], "dtype": "int8"},
   {"op": "alloc_var", "name": "v", "dtype": "int32", "init": 0},
   {"op": "alloc_var", "name": "w", "dtype": "float32"},
   {"op": "view", "name": "A2", "src": "A", "shape": ["M", 32], "dtype": "int32"},
   {"op": "view", "name": "S2", "src": "S", "x-v": 1},
   {"op": "let", "name": "t", "value": "thread_binding(0)"},
   {"op": "annotate_layout", "layouts": {"As": "swizzle",
      "Bs": {"vars": ["i", "j"], "index": ["i", "j ^ (i % 8)"], "x-m": 1}}},
   {"op": "copy", "src": "A[0:M, :]", "dst": "As"},
   {"op": "fill", "dst": "Bs", "value": "half"},
   {"op": "clear", "dst": "C"},
   {"op": "gemm", "A": "As", "B": "Bs", "C": "C", "transpose_A": false, "transpose_B": true,
    "policy": "full_col", "clear_accum": true, "k_pack": 1},
   {"op": "reduce", "type": "absmax", "src": "C", "dst": "R", "dim": 1, "clear": false},
   {"op": "cumsum", "src": "R", "dst": "R", "dim": 0, "reverse": true},
   {"op": "cummax", "src": "R", "dst": "R", "dim": 0},
   {"op": "cummin", "src": "R", "dst": "R", "dim": 0, "reverse": false},
   {"op": "atomic_add", "dst": "S", "src": "R"},
   {"op": "atomic_add", "dst": "S[0]", "value": 1.5},
   {"op": "cluster_reduce", "type": "sum", "dst": "C"},
   {"op": "pipelined", "var": "k", "extent": 2, "start": 0, "num_stages": 2,
    "order": [0, 1], "stage": [0, 1], "body": [
     {"op": "copy", "src": "A[k * 32, 0]", "dst": "As"},
     {"op": "sync_threads"}]},
   {"op": "serial", "var": "p", "extent": 4, "start": 0, "step": 1, "body": ["L[p] = int8(p)"]},
   {"op": "unroll", "var": "q", "extent": 4, "body": ["v += L[q]"]},
   {"op": "vectorized", "var": "u", "extent": 4, "body": ["L[u] <<= 1"]},
   {"op": "if", "cond": "t < 32 and v != 0", "then": ["w = s"], "else": ["w = -s"]},
   {"op": "parallel", "vars": ["i", "j"], "extents": ["M", 64], "body": [
     {"op": "let", "name": "x", "value": "C[i, j] * 2"},
     {"op": "atomic", "type": "max", "dst": "S[j]", "value": "x", "old": "o"},
     {"op": "print", "value": "o", "msg": "old value:"},
     {"op": "device_assert", "cond": "x == x", "msg": "x is not NaN"},
     {"op": "if", "cond": "x > 0", "then": ["C[i, j] = x"]}]}
 ]}}
EOF

# Every sub-byte and scale dtype, and TileLang's spellings (tile-ir-v1.md 7.1).
cat > "$tmp/good/packed_dtypes.json" <<'EOF'
{"tlir": 1, "name": "packed", "params": [
   {"name": "a", "kind": "tensor", "dtype": "int4", "shape": [2, 8]},
   {"name": "b", "kind": "tensor", "dtype": "uint4", "shape": [2, 8]},
   {"name": "c", "kind": "tensor", "dtype": "int2", "shape": [2, 8]},
   {"name": "d", "kind": "tensor", "dtype": "uint2", "shape": [2, 8]},
   {"name": "e", "kind": "tensor", "dtype": "int1", "shape": [2, 8]},
   {"name": "f", "kind": "tensor", "dtype": "uint1", "shape": [2, 8]},
   {"name": "g", "kind": "tensor", "dtype": "float4_e2m1", "shape": [2, 8]},
   {"name": "h", "kind": "tensor", "dtype": "float8_e8m0", "shape": [2, 8]},
   {"name": "i", "kind": "tensor", "dtype": "float8_e4m3fn", "shape": [2, 8]},
   {"name": "j", "kind": "tensor", "dtype": "float4_e2m1fn", "shape": [2, 8]},
   {"name": "k", "kind": "tensor", "dtype": "float8_e8m0fnu", "shape": [2, 8]}],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "alloc_shared", "name": "s", "shape": [2, 8], "dtype": "uint4"},
                     {"op": "copy", "src": "b", "dst": "s"}]}}
EOF

# Bad programs: each must be rejected, with an error at the given place (a
# jsonschema json_path), so that it fails for the reason its name gives.
# Several kernels sharing workspaces (proto/tile-ir-v1.md 3.1, 4.1).
cat > "$tmp/good/kernels_workspaces.json" <<'EOF'
{"tlir": 1, "name": "two", "params": [{"name": "n", "kind": "scalar", "dtype": "int32"},
                                      {"name": "a", "kind": "tensor", "dtype": "float32", "shape": ["n"]}],
 "workspaces": [{"name": "w", "dtype": "float32", "shape": ["n", 2], "x-note": 1}],
 "kernels": [{"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []},
             {"grid": ["n"], "threads": [32, 2], "block_vars": ["b"], "body": []}]}
EOF

bad() { cat > "$tmp/bad/$1.json" && printf '%s\n' "$2" > "$tmp/bad/$1.where"; }

bad kernel_and_kernels '$' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []},
 "kernels": [{"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}]}
EOF
bad kernels_empty '$.kernels' <<'EOF'
{"tlir": 1, "name": "k", "params": [], "kernels": []}
EOF
bad kernels_unknown_field '$.kernels[1]' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernels": [{"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []},
             {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": [], "stream": 1}]}
EOF
bad workspace_with_kind '$.workspaces[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [], "workspaces": [{"name": "w", "kind": "tensor", "dtype": "int8", "shape": [4]}],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad workspace_no_shape '$.workspaces[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [], "workspaces": [{"name": "w", "dtype": "int8"}],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF

bad unknown_field '$.kernel.body[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "alloc_shared", "name": "s", "shape": [4], "dtype": "float32", "dtyp": "x"}]}}
EOF
bad unknown_top_level_field '$' <<'EOF'
{"tlir": 1, "name": "k", "params": [], "constant": {"M": 1},
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad X_prefix_is_not_x_prefix '$' <<'EOF'
{"tlir": 1, "name": "k", "params": [], "X-note": 1,
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad wrong_op '$.kernel.body[0].op' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "alloc_global", "name": "s", "shape": [4], "dtype": "float32"}]}}
EOF
bad op_missing '$.kernel.body[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"name": "s", "shape": [4], "dtype": "float32"}]}}
EOF
bad missing_required_field '$.kernel.body[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "alloc_shared", "name": "s", "dtype": "float32"}]}}
EOF
bad missing_kernel '$' <<'EOF'
{"tlir": 1, "name": "k", "params": []}
EOF
bad bad_dtype '$.kernel.body[0].dtype' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "alloc_shared", "name": "s", "shape": [4], "dtype": "float17"}]}}
EOF
bad bad_packed_dtype '$.params[0].dtype' <<'EOF'
{"tlir": 1, "name": "k", "params": [{"name": "w", "kind": "tensor", "dtype": "uint3", "shape": [8]}],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad packed_scalar_dtype '$.params[0].dtype' <<'EOF'
{"tlir": 1, "name": "k", "params": [{"name": "w", "kind": "scalar", "dtype": "uint4"}],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad bad_scalar_dtype '$.params[0].dtype' <<'EOF'
{"tlir": 1, "name": "k", "params": [{"name": "h", "kind": "scalar", "dtype": "float16"}],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad bad_identifier '$.kernel.body[0].name' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "alloc_shared", "name": "2s", "shape": [4], "dtype": "float32"}]}}
EOF
bad reserved_identifier '$.params[0].name' <<'EOF'
{"tlir": 1, "name": "k", "params": [{"name": "float16", "kind": "scalar", "dtype": "int32"}],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad identifier_too_long '$.name' <<'EOF'
{"tlir": 1, "name": "k1234567890123456789012345678901234567890123456789012345678901234", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad bad_constant_name '$.constants' <<'EOF'
{"tlir": 1, "name": "k", "constants": {"block-n": 1}, "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad wrong_version '$.tlir' <<'EOF'
{"tlir": 2, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad scalar_with_shape '$.params[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [{"name": "n", "kind": "scalar", "dtype": "int32", "shape": [1]}],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad align_not_power_of_two '$.params[0].align' <<'EOF'
{"tlir": 1, "name": "k", "params": [{"name": "a", "kind": "tensor", "dtype": "int8", "shape": [4], "align": 24}],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad nine_dimensions '$.params[0].shape' <<'EOF'
{"tlir": 1, "name": "k", "params": [{"name": "a", "kind": "tensor", "dtype": "int8", "shape": [1,1,1,1,1,1,1,1,1]}],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad grid_four_dimensions '$.kernel.grid' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1, 1, 1, 1], "threads": 32, "block_vars": ["a", "b", "c", "d"], "body": []}}
EOF
bad block_vars_count '$.kernel.block_vars' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1, 1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad not_an_assignment '$.kernel.body[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": ["bx == 1"]}}
EOF
bad expression_is_null '$.kernel.body[0].value' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "let", "name": "z", "value": null}]}}
EOF
bad atomic_add_src_and_value '$.kernel.body[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [{"name": "a", "kind": "tensor", "dtype": "float32", "shape": [4]}],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "atomic_add", "dst": "a", "src": "a", "value": 1}]}}
EOF
bad bad_policy '$.kernel.body[0].policy' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "gemm", "A": "x", "B": "y", "C": "z", "policy": "FullRow"}]}}
EOF
bad parallel_vars_extents_differ '$.kernel.body[0].extents' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "parallel", "vars": ["i", "j"], "extents": [4], "body": []}]}}
EOF
bad order_not_integers '$.kernel.body[0].order[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "pipelined", "var": "k", "extent": 4, "order": ["0"], "body": ["bx = 1"]}]}}
EOF
bad x_key_in_constants '$.constants' <<'EOF'
{"tlir": 1, "name": "k", "constants": {"x-note": 1}, "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad line_break_in_expression '$.kernel.grid[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": ["1 +\n 1"], "threads": 32, "block_vars": ["bx"], "body": []}}
EOF
bad non_ascii_in_assignment '$.kernel.body[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": ["bx = 1 \u00d7 2"]}}
EOF
bad threads_too_many '$.kernel.threads' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 2048, "block_vars": ["bx"], "body": []}}
EOF
bad num_stages_too_many '$.kernel.body[0].num_stages' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "pipelined", "var": "k", "extent": 4, "num_stages": 17, "body": []}]}}
EOF
bad cluster_too_large '$.kernel.cluster[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [32], "threads": 32, "block_vars": ["bx"], "cluster": [32], "body": []}}
EOF
bad sync_threads_with_field '$.kernel.body[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"], "body": [{"op": "sync_threads", "all": true}]}}
EOF
bad bad_layout '$.kernel.body[0].layouts.s' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "annotate_layout", "layouts": {"s": "swizzled"}}]}}
EOF
bad unknown_field_in_nested_body '$.kernel.body[0].body[0]' <<'EOF'
{"tlir": 1, "name": "k", "params": [],
 "kernel": {"grid": [1], "threads": 32, "block_vars": ["bx"],
            "body": [{"op": "serial", "var": "i", "extent": 2, "body": [
                       {"op": "if", "cond": true, "then": [], "elif": []}]}]}}
EOF

set -- examples/*.json
if [ ! -f "$1" ]; then
  echo "schema.sh: FAIL: no examples/*.json found" >&2
  exit 1
fi

"$PY" - "$SCHEMA" "$tmp/bad" "$tmp"/good/*.json "$@" <<'EOF'
import json, os, sys
from jsonschema import Draft202012Validator

schema_path, bad_dir, good = sys.argv[1], sys.argv[2], sys.argv[3:]
failures = 0

def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)

schema = load(schema_path)
try:
    Draft202012Validator.check_schema(schema)
except Exception as e:  # the schema itself is not a valid draft 2020-12 schema
    print("FAIL %s: not a valid draft 2020-12 schema: %s" % (schema_path, e))
    sys.exit(1)
if schema.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
    print("FAIL %s: $schema is not draft 2020-12" % schema_path)
    sys.exit(1)

def refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            else:
                yield from refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from refs(v)

for r in sorted(set(refs(schema))):  # check_schema does not resolve them
    target = schema
    for part in r.split("/")[1:] if r.startswith("#/") else [None]:
        target = target.get(part) if isinstance(target, dict) and part is not None else None
    if target is None:
        print("FAIL %s: $ref %s does not resolve" % (schema_path, r))
        failures += 1
if failures:
    sys.exit(1)
validator = Draft202012Validator(schema)

for path in good:
    errors = sorted(validator.iter_errors(load(path)), key=lambda e: list(e.absolute_path))
    if errors:
        failures += 1
        print("FAIL %s: rejected but valid" % path)
        for e in errors[:5]:
            print("  at %s: %s" % (e.json_path, e.message[:300]))
    else:
        print("ok   %s accepted" % os.path.basename(path))

bad = sorted(n[:-5] for n in os.listdir(bad_dir) if n.endswith(".json"))
for name in bad:
    with open(os.path.join(bad_dir, name + ".where"), encoding="utf-8") as f:
        where = f.read().strip()
    errors = list(validator.iter_errors(load(os.path.join(bad_dir, name + ".json"))))
    at = [e for e in errors if e.json_path == where]
    if not errors:
        failures += 1
        print("FAIL bad/%s: accepted but invalid" % name)
    elif not at:
        failures += 1
        print("FAIL bad/%s: rejected, but not at %s:" % (name, where))
        for e in errors[:5]:
            print("  at %s: %s" % (e.json_path, e.message[:300]))
    else:
        print("ok   bad/%s rejected at %s (%s)" % (name, where, at[0].message[:70]))

if len(bad) < 5:
    failures += 1
    print("FAIL: only %d bad programs were written" % len(bad))

print("schema.sh: %d good, %d bad, %d failures" % (len(good), len(bad), failures))
sys.exit(1 if failures else 0)
EOF
