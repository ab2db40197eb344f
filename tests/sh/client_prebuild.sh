#!/bin/sh
# tests/sh/client_prebuild.sh - `tlclient prebuild` as a CI job runs it, and
# `tlclient explain`, against a real tlserverd on a free loopback port with
# a temporary database and real compiles (NVRTC).
#
#  1. a -D matrix: 2 programs x -D M=128,256 x -D N=128,256 (K fixed) for one
#     target gives 8 --json records, each program the 4 choices of (M, N),
#     every record valid against proto/prebuild-record.schema.json; again:
#     all hits with the same keys
#  2. a broken program: status error, the checker's diagnostic, exit 1
#  3. an unreachable server: exit 3, records status error/skipped
#  4. the metadata files `tlclient compile -o DIR` writes are not taken as
#     programs when found in a directory or by a pattern (a note says so);
#     named, one is built and fails (exit 1); patterns and --exclude
#  5. usage: a -D constant no program declares, -D given twice, a pattern
#     that matches nothing: exit 2; a program without the constant is built
#     once, with a note
#  6. explain: a hit (the key that prebuild reported, and its manifest), a
#     KEY, a miss after changing a constant, the target and the back end asked for
#     (each names only the input that differs), usage errors
#
# Exit status: 0 pass, 1 fail, 77 skipped (no NVRTC, or no python3 with jsonschema).

cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
CLIENT=$TL_BUILD/bin/tlclient
SERVER=$TL_BUILD/bin/tlserverd
TLC=$TL_BUILD/bin/tlc
PY=/usr/bin/python3
SCHEMA=proto/prebuild-record.schema.json
tl_init client_prebuild.sh
tl_built "$CLIENT" "$SERVER" "$TLC"
tl_need_nvrtc "the server cannot compile"
"$PY" -c 'from jsonschema import Draft202012Validator' 2>/dev/null ||
  tl_skip "no $PY with the jsonschema module (apt-get install python3-jsonschema)"

tl_server server --workers 2
export TL_SERVER=$URL
export TL_CLIENT_CACHE="$TMP/local.db"
unset TL_TOKEN


# records DESCRIPTION FILE CHECK: every line of FILE is a record valid against the
# schema, and the Python expression CHECK holds for the list of records `r`
records() {
  if "$PY" - "$SCHEMA" "$2" "$3" >"$TMP/py.out" 2>&1 <<'PYEOF'
import json, sys
from jsonschema import Draft202012Validator
schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
v = Draft202012Validator(schema)
r = [json.loads(line) for line in open(sys.argv[2]) if line.strip()]
for rec in r:
    errs = list(v.iter_errors(rec))
    if errs:
        sys.exit("record %s: %s" % (json.dumps(rec), errs[0].message))
if not eval("(" + sys.argv[3] + ")"):
    sys.exit("check failed: %s\nrecords: %s" % (sys.argv[3], json.dumps(r, indent=1)))
PYEOF
  then ok; else bad "$1: $(cat "$TMP/py.out" | head -c 1500)"; fi
}

# ---- 1. the -D matrix -----------------------------------------------------------------
mkdir -p "$TMP/progs"
cp examples/gemm.json examples/gemm_nt.json "$TMP/progs/"
run_client 0 "prebuild a matrix" prebuild "$TMP/progs" --target sm_80 -D M=128,256 -D N=128,256 -D K=64 --json --jobs 2
cp "$TMP/out" "$TMP/matrix1"
records "the matrix records" "$TMP/matrix1" '
len(r) == 8 and all(x["status"] in ("compiled", "hit") and x["target"] == "sm_80" for x in r)
and all(sorted((x["constants"]["M"], x["constants"]["N"]) for x in r if x["program"].endswith(p))
        == [(128, 128), (128, 256), (256, 128), (256, 256)] for p in ("/gemm.json", "/gemm_nt.json"))
and all(x["constants"]["K"] == 64 and list(x["constants"]) == ["M", "N", "K"] for x in r)
and len(set(x["key"] for x in r)) == 8'
has "$TMP/err" "prebuild: 8 builds (2 programs, 8 with their constants, x 1 target)" "the matrix summary on stderr"
run_client 0 "prebuild the matrix again" prebuild "$TMP/progs" --target sm_80 -D M=128,256 -D N=128,256 -D K=64 --json
records "the second run is all hits with the same keys" "$TMP/out" "
all(x['status'] == 'hit' for x in r) and len(r) == 8 and
sorted(x['key'] for x in r) == sorted(json.loads(l)['key'] for l in open('$TMP/matrix1'))"
# without --json: one line per build, naming its constants
run_client 0 "prebuild a matrix, plain" prebuild "$TMP/progs/gemm.json" --target sm_80 -D M=128,256 -D N=128 -D K=64
has "$TMP/out" "gemm.json M=256 N=128 K=64" "a plain line names its constants"

# ---- 2. a broken program --------------------------------------------------------------
printf '{"tlir": 1, "name": "broken", "params": [], "kernel": {"grid": ["zz"], "threads": 32, "block_vars": ["bx"], "body": []}}' \
  >"$TMP/progs/broken.json"
run_client 1 "prebuild with a broken program" prebuild "$TMP/progs" --target sm_80 -D M=128 -D N=128 -D K=64 --json
records "the broken program's record" "$TMP/out" '
len(r) == 3 and [x["status"] for x in r if x["program"].endswith("/broken.json")] == ["error"]
and all(x["error"] == "invalid_program" and any("unknown name '"'"'zz'"'"'" in d for d in x["diagnostics"])
        and x["constants"] == {} for x in r if x["status"] == "error")
and sum(x["status"] == "hit" for x in r) == 2'
has "$TMP/err" "broken.json does not declare the constant M" "the note on a constant a program lacks"
rm "$TMP/progs/broken.json"

# ---- 3. an unreachable server ----------------------------------------------------------
run_client 3 "prebuild against no server" --server http://127.0.0.1:1 --retries 0 --cache none \
  prebuild "$TMP/progs" --target sm_80,sm_90 --json
records "the unreachable server's records" "$TMP/out" '
len(r) == 4 and all(x["status"] in ("error", "skipped") and x["error"] == "network_error" for x in r)
and any(x["status"] == "error" for x in r)'
run_client 3 "prebuild against no server, plain" --server http://127.0.0.1:1 --retries 0 --cache none \
  prebuild "$TMP/progs/gemm.json" --target sm_80

# ---- 4. metadata files are not programs; patterns and --exclude -------------------------
mkdir -p "$TMP/tree/out"
cp examples/tilus_add_one.json "$TMP/tree/"
run_client 0 "compile -o" compile "$TMP/tree/tilus_add_one.json" --target sm_80 -o "$TMP/tree/out"
META=$(ls "$TMP/tree/out/"*.json | head -n 1)
[ -f "$META" ] && ok || bad "compile -o wrote no metadata: $(ls -R "$TMP/tree")"
run_client 0 "prebuild a directory holding metadata" prebuild "$TMP/tree" --target sm_80 --json
records "only the program is built" "$TMP/out" 'len(r) == 1 and r[0]["program"].endswith("/tree/tilus_add_one.json")'
has "$TMP/err" "skipped $META: not a Tile IR program" "the note on a metadata file"
run_client 0 "prebuild by a pattern" prebuild "$TMP/tree/*" --target sm_80 --json
records "a pattern skips the metadata too" "$TMP/out" 'len(r) == 1'
run_client 1 "prebuild a metadata file named" prebuild "$META" --target sm_80 --json
records "a named metadata file is built and fails" "$TMP/out" 'len(r) == 1 and r[0]["status"] == "error"'
run_client 0 "prebuild with --exclude" prebuild "$TMP/progs" "$TMP/tree" --exclude 'gemm_nt*' --exclude '*/out' \
  --target sm_80 -D M=128 -D N=128 -D K=64 --json
records "--exclude leaves out a program" "$TMP/out" '
sorted(x["program"].rsplit("/", 1)[1] for x in r) == ["gemm.json", "tilus_add_one.json"]'
hasnt "$TMP/err" "not a Tile IR program" "an excluded directory is not walked"

# ---- 5. usage ----------------------------------------------------------------------------
run_client 2 "a constant no program declares" prebuild "$TMP/tree" --target sm_80 -D block_q=1,2
has "$TMP/err" "no program declares the constant block_q" "the usage error names the constant"
run_client 2 "-D given twice" prebuild "$TMP/progs" --target sm_80 -D M=128 -D M=256
run_client 2 "a pattern that matches nothing" prebuild "$TMP/nothing/*.json" --target sm_80
run_client 2 "a path that does not exist" prebuild "$TMP/missing" --target sm_80
run_client 2 "nothing but metadata" prebuild "$TMP/tree/out" --target sm_80
run_client 2 "--exclude on compile" compile "$TMP/tree/tilus_add_one.json" --target sm_80 --exclude x
run_client 0 "prebuild --help" prebuild --help
has "$TMP/out" "3 the server could not be reached" "the exit statuses in the help"

# ---- 6. explain ------------------------------------------------------------------------------
run_client 0 "prebuild --fetch" prebuild examples/tilus_add_one.json --target sm_80 -D block_n=64 --fetch --json
KEY=$("$PY" -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())["key"])' "$TMP/out")
run_client 0 "explain a hit" explain examples/tilus_add_one.json --target sm_80 -D block_n=64
has "$TMP/out" "key      $KEY" "explain computes the server's key"
has "$TMP/out" "status   hit" "explain a hit"
has "$TMP/out" "constants  {\"block_n\":64}" "explain prints the manifest"
has "$TMP/out" "backend    auto" "explain prints the manifest's backend line"
run_client 0 "explain a key" explain "$KEY"
has "$TMP/out" "build $KEY" "explain KEY"
has "$TMP/out" "target     sm_80" "explain KEY prints the manifest"
run_client 1 "explain a miss: another constant" explain examples/tilus_add_one.json --target sm_80 -D block_n=32
has "$TMP/out" "status   miss" "explain a miss"
has "$TMP/out" "constants: block_n=32 here, the cache has block_n=64" "explain names the differing constant"
hasnt "$TMP/out" "target:" "explain names only what differs"
run_client 1 "explain a miss: another target" explain examples/tilus_add_one.json --target sm_90 -D block_n=64
has "$TMP/out" "target: sm_90 here, the cache has sm_80 (built for another target)" "explain names the target"
hasnt "$TMP/out" "constants:" "explain names only the target"
export TL_BACKEND=cuda # the back end asked for: the key's backend line, and nothing else, differs
run_client 1 "explain a miss: another back end" explain examples/tilus_add_one.json --target sm_80 -D block_n=64
unset TL_BACKEND
has "$TMP/out" "backend: cuda here, the cache has auto (another back end asked for" "explain names the back end"
hasnt "$TMP/out" "options:" "explain names only the back end"
run_client 1 "explain an unknown key" explain 0000000000000000000000000000000000000000000000000000000000000000
has "$TMP/err" "has no build with key" "explain an unknown key"
run_client 2 "explain without --target" explain examples/tilus_add_one.json
run_client 2 "explain KEY with -D" explain "$KEY" -D block_n=1
run_client 0 "explain --help" explain --help
has "$TMP/out" "usage: tlclient explain KEY" "explain --help"
run_client 1 "explain an invalid program" explain "$TMP/tree/out/$(basename "$META")" --target sm_80

tl_done
