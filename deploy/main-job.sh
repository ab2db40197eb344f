#!/bin/bash
# main-job.sh - the README's "main job": exercises what the project can do
# today on every example program, in clear steps, and says plainly whether
# each part worked.
#
#   deploy/main-job.sh [EXAMPLE.json...]      (default: examples/*.json)
#
# Steps:
#   1. preflight: the tlc binary and /usr/bin/python3 with numpy are there;
#   2. `tlc check FILE` on every example (must exit 0);
#   3. `tlc run FILE --interpret` on every example at small sizes, with
#      random inputs made by numpy; every output must be written back
#      without a NaN (tensors not given with --in start as NaN, so a NaN
#      left in an output means the program did not write that element).
#   4. tlserverd: start it on a free loopback port with a temporary
#      database, compile every example for sm_90a through it with curl
#      (POST /v1/compile), fetch each artifact (GET /v1/artifacts/ID) and
#      check that its bytes hash to its id, then stop it with SIGTERM (it
#      must exit 0).
#   5. tlclient: prebuild every example for sm_90a and compute_80 through
#      that server, download every binary into a fresh local cache
#      (--fetch; each artifact's SHA-256 is checked), and `cache verify` it.
#
# Prints one line per example and step with the time it took, then a
# summary; exits 1 if anything failed (2 if it could not start).  Each
# command's output goes to build/main-job/NAME.STEP.log.
#
# Environment: TLC (default build/bin/tlc), TLSERVERD (default
# build/bin/tlserverd), TL_SEED (the inputs' random seed, default 1),
# TL_MAIN_TIMEOUT (seconds per command, default 900).

set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2

TLC=${TLC:-build/bin/tlc}
TLSERVERD=${TLSERVERD:-build/bin/tlserverd}
TLCLIENT=${TLCLIENT:-build/bin/tlclient}
PY=/usr/bin/python3
SEED=${TL_SEED:-1}
TIMEOUT=${TL_MAIN_TIMEOUT:-900}
LOGDIR=build/main-job

if (($# > 0)); then
  EXAMPLES=("$@")
else
  EXAMPLES=(examples/*.json)
fi

npass=0
nfail=0
failures=()
job_start=$EPOCHREALTIME

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# --- helpers ---------------------------------------------------------------

header() {
  echo "== $*"
}

# seconds_since START: seconds elapsed since an $EPOCHREALTIME reading.
seconds_since() {
  awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'
}

# record OK|FAIL STEP NAME SECONDS LOG [NOTE]: counts and prints one result;
# on failure also the end of the log.
record() {
  local result=$1 step=$2 name=$3 secs=$4 log=$5 note=${6:-}
  if [[ $result == OK ]]; then
    npass=$((npass + 1))
    printf '  ok    %-6s %-28s %8ss%s\n' "$step" "$name" "$secs" "${note:+  $note}"
  else
    nfail=$((nfail + 1))
    failures+=("$step $name")
    printf '  FAIL  %-6s %-28s %8ss%s\n' "$step" "$name" "$secs" "${note:+  $note}"
    echo "  ---- last 20 lines of $log"
    tail -n 20 "$log" | sed 's/^/  | /'
    echo "  ----"
  fi
}

# small_sizes NAME: sets DEFS (-D options) and ARGS (--arg options) that make
# example NAME small enough for the interpreter.  Add new examples here.
small_sizes() {
  DEFS=()
  ARGS=()
  case $1 in
    gemm|gemm_nt|gemm_swizzle|dequant_gemm|dequant_gemm_threads|dequant_gemm_uint4|dequant_gemm_threads_uint4|gemm_int8|gemm_fp8_blockscaled|gemm_fp8)
      DEFS=(-D M=256 -D N=256 -D K=256) ;;
    gemm_w4a16)
      DEFS=(-D M=200 -D N=256 -D K=384) ;;
    flash_attention)
      DEFS=(-D batch=1 -D heads=2 -D seq_len=128 -D dim=64 -D block_M=64 -D block_N=64) ;;
    tilus_matmul)
      DEFS=(-D n_size=256 -D k_size=256)
      ARGS=(--arg m_size=77) ;;
    tilus_add_one)
      ARGS=(--arg n=1000) ;;
    *)
      return 1 ;;
  esac
}

# The numpy side: makes random inputs for a program and checks its outputs.
#   inputs.py gen PROGRAM DIR SEED [-D N=V | --arg N=V]...
#     writes DIR/NAME.npy for each input tensor, DIR/manifest.json, and prints
#     the tlc options (--in/--out NAME=FILE), one word a line;
#   inputs.py verify DIR
#     checks every output file against the manifest (shape, dtype, no NaN).
# Outputs are the tensor parameters the program writes (copy/fill/... dst,
# gemm C, assignment targets); one it also reads, or adds to atomically,
# gets an input too (zeros for atomic_add).  Shapes are evaluated with
# Python, whose expression syntax Tile IR's follows.
cat >"$WORK/inputs.py" <<'PYEOF'
import json, math, re, sys
import numpy as np

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\[[^\]]*\])?\s*(//|<<|>>|[-+*/%&|^])?=(?!=)")
WRITE_FIELDS = ("dst", "C")

def ceildiv(a, b):
    return -(-a // b)

def rnd(x):
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)

ENV = {"__builtins__": {}, "ceildiv": ceildiv, "min": min, "max": max, "abs": abs,
       "sqrt": math.sqrt, "rsqrt": lambda x: 1 / math.sqrt(x), "exp": math.exp,
       "exp2": lambda x: 2.0 ** x, "log": math.log, "log2": math.log2, "floor": math.floor,
       "ceil": math.ceil, "round": rnd, "pow": pow, "true": True, "false": False,
       "True": True, "False": False, "if_then_else": lambda c, a, b: a if c else b}

def value(text):
    if text in ("true", "True"): return True
    if text in ("false", "False"): return False
    try: return int(text, 0)
    except ValueError: return float(text)

def evaluate(expr, names):
    if isinstance(expr, (bool, int, float)):
        return expr
    return eval(expr, dict(ENV), names)

def constants(prog, defs):
    raw = dict(prog.get("constants", {}))
    raw.update(defs)
    done, todo = {}, dict(raw)
    while todo:
        progress = False
        for k, v in list(todo.items()):
            try:
                done[k] = evaluate(v, done)
            except NameError:
                continue
            del todo[k]
            progress = True
        if not progress:
            sys.exit("cannot evaluate constants: %s" % ", ".join(sorted(todo)))
    return done

def walk(node, writes, atomics, reads):
    """Collects written, atomically updated and read buffer names."""
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, str) and k in WRITE_FIELDS:
                m = IDENT.match(v.strip())
                if m:
                    writes.add(m.group(0))
                    if node.get("op") == "atomic_add":
                        atomics.add(m.group(0))
                reads.update(IDENT.findall(v[m.end():] if m else v))
            elif isinstance(v, str):
                reads.update(IDENT.findall(v))
            else:
                walk(v, writes, atomics, reads)
    elif isinstance(node, list):
        for x in node:
            if isinstance(x, str):
                m = ASSIGN.match(x)
                if m:
                    writes.add(m.group(1))
                    rest = x[m.end():]
                    if m.group(3):      # op= reads its target too
                        reads.add(m.group(1))
                    reads.update(IDENT.findall((m.group(2) or "") + " " + rest))
                else:
                    reads.update(IDENT.findall(x))
            else:
                walk(x, writes, atomics, reads)

def np_dtype(dt):
    """numpy dtype of the .npy file for a Tile IR dtype (bfloat16 and float8
    inputs are written as float32; tlc rounds them)."""
    m = {"bool": "?", "int8": "i1", "uint8": "u1", "int16": "<i2", "uint16": "<u2",
         "int32": "<i4", "uint32": "<u4", "int64": "<i8", "uint64": "<u8",
         "float16": "<f2", "float32": "<f4", "float64": "<f8",
         "bfloat16": "<f4", "float8_e4m3": "<f4", "float8_e5m2": "<f4"}
    m.update(PACKED)
    return np.dtype(m[dt][0] if dt in PACKED else m[dt])

# the packed dtypes and float8_e8m0: one element (or code) per byte, in range
# (proto/tile-ir-v1.md 9.6)
PACKED = {"int4": ("i1", -8, 7), "uint4": ("u1", 0, 15), "int2": ("i1", -2, 1), "uint2": ("u1", 0, 3),
          "int1": ("i1", -1, 0), "uint1": ("u1", 0, 1), "float4_e2m1": ("u1", 0, 15), "float8_e8m0": ("u1", 120, 135)}

def random_tensor(rng, dt, shape):
    nd = np_dtype(dt)
    if dt in PACKED:
        return rng.integers(PACKED[dt][1], PACKED[dt][2], size=shape, endpoint=True).astype(nd)
    if dt == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if nd.kind == "f":
        return rng.uniform(-1.0, 1.0, size=shape).astype(nd)
    info = np.iinfo(nd)
    lo, hi = (int(info.min), int(info.max)) if nd.itemsize == 1 else (max(int(info.min), -1000), 1000)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(nd)

def gen(prog_path, out_dir, seed, opts):
    prog = json.load(open(prog_path))
    defs, args = {}, {}
    for flag, kv in zip(opts[0::2], opts[1::2]):
        name, _, text = kv.partition("=")
        (defs if flag == "-D" else args)[name] = value(text)
    names = constants(prog, defs)
    params = prog.get("params", [])
    for p in params:
        if p["kind"] == "scalar":
            if p["name"] not in args:
                sys.exit("scalar parameter %s has no --arg value" % p["name"])
            names[p["name"]] = args[p["name"]]
    writes, atomics, reads = set(), set(), set()
    walk([prog.get("kernel", {})] + prog.get("kernels", []), writes, atomics, reads)
    rng = np.random.default_rng(seed)
    manifest, words = {}, []
    for p in params:
        if p["kind"] != "tensor":
            continue
        name, dt = p["name"], p["dtype"]
        shape = tuple(int(evaluate(d, names)) for d in p["shape"])
        is_out = name in writes
        path = "%s/%s.npy" % (out_dir, name)
        if not is_out or name in reads or name in atomics:
            arr = (np.zeros(shape, np_dtype(dt)) if name in atomics
                   else random_tensor(rng, dt, shape))
            np.save(path, arr)
            words += ["--in", "%s=%s" % (name, path)]
        if is_out:
            out = "%s/%s.out.npy" % (out_dir, name)
            words += ["--out", "%s=%s" % (name, out)]
            manifest[name] = {"file": out, "dtype": dt, "shape": list(shape)}
    if not manifest:
        sys.exit("found no output tensor in %s" % prog_path)
    json.dump(manifest, open("%s/manifest.json" % out_dir, "w"))
    print("\n".join(words))

def nan_count(arr, dt):
    if dt == "bfloat16":
        b = arr.astype(np.uint16)
        return int(np.count_nonzero(((b & 0x7F80) == 0x7F80) & ((b & 0x7F) != 0)))
    if dt == "float8_e4m3":
        return int(np.count_nonzero((arr.astype(np.uint8) & 0x7F) == 0x7F))
    if dt == "float8_e5m2":
        b = arr.astype(np.uint8)
        return int(np.count_nonzero(((b & 0x7C) == 0x7C) & ((b & 0x3) != 0)))
    if dt == "float8_e8m0":
        return int(np.count_nonzero(arr.astype(np.uint8) == 0xFF))
    if arr.dtype.kind == "f":
        return int(np.count_nonzero(np.isnan(arr)))
    return 0

def verify(out_dir):
    manifest = json.load(open("%s/manifest.json" % out_dir))
    bad = []
    for name, m in sorted(manifest.items()):
        try:
            arr = np.load(m["file"])
        except OSError as e:
            bad.append("%s: cannot read %s: %s" % (name, m["file"], e))
            continue
        if list(arr.shape) != m["shape"]:
            bad.append("%s: shape %s, expected %s" % (name, list(arr.shape), m["shape"]))
            continue
        n = nan_count(arr, m["dtype"])
        if n:
            bad.append("%s: %d of %d elements are NaN (not written?)" % (name, n, arr.size))
    for b in bad:
        print(b)
    return 1 if bad else 0

if sys.argv[1] == "gen":
    gen(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:])
elif sys.argv[1] == "verify":
    sys.exit(verify(sys.argv[2]))
else:
    sys.exit("usage: inputs.py gen|verify ...")
PYEOF

# --- step 1: preflight ------------------------------------------------------

header "step 1/5: preflight"
if [[ ! -x $TLC ]]; then
  echo "main-job.sh: $TLC not found; run 'make' first" >&2
  exit 2
fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then
  echo "main-job.sh: $PY has no numpy; run deploy/install-deps.sh as root" >&2
  exit 2
fi
if ((${#EXAMPLES[@]} == 0)) || [[ ! -e ${EXAMPLES[0]} ]]; then
  echo "main-job.sh: no example programs found" >&2
  exit 2
fi
mkdir -p "$LOGDIR"
echo "  $("$TLC" --version 2>&1 | head -n 1), numpy $("$PY" -c 'import numpy; print(numpy.__version__)'), ${#EXAMPLES[@]} examples, seed $SEED"

# --- step 2: tlc check --------------------------------------------------------

header "step 2/5: tlc check"
for file in "${EXAMPLES[@]}"; do
  name=$(basename "$file" .json)
  log=$LOGDIR/$name.check.log
  start=$EPOCHREALTIME
  timeout "$TIMEOUT" "$TLC" check "$file" >"$log" 2>&1
  rc=$?
  secs=$(seconds_since "$start")
  if ((rc == 0)); then
    record OK check "$name" "$secs" "$log"
  else
    record FAIL check "$name" "$secs" "$log" "(exit $rc)"
  fi
done

# --- step 3: tlc run --interpret at small sizes -----------------------------

header "step 3/5: tlc run --interpret (small sizes, random inputs)"
for file in "${EXAMPLES[@]}"; do
  name=$(basename "$file" .json)
  log=$LOGDIR/$name.run.log
  dir=$WORK/$name
  mkdir -p "$dir"
  if small_sizes "$name"; then
    note="${DEFS[*]} ${ARGS[*]}"
    note=${note# }
    note=${note% }
  else
    note="(default sizes: none set for this example in main-job.sh)"
  fi
  start=$EPOCHREALTIME
  echo "\$ inputs.py gen $file $dir $SEED ${DEFS[*]} ${ARGS[*]}" >"$log"
  if ! io=$("$PY" "$WORK/inputs.py" gen "$file" "$dir" "$SEED" "${DEFS[@]}" "${ARGS[@]}" 2>>"$log"); then
    record FAIL run "$name" "$(seconds_since "$start")" "$log" "(making inputs failed)"
    continue
  fi
  mapfile -t IO <<<"$io"
  cmd=("$TLC" run "$file" --interpret "${DEFS[@]}" "${ARGS[@]}" "${IO[@]}")
  echo "\$ ${cmd[*]}" >>"$log"
  start=$EPOCHREALTIME
  timeout "$TIMEOUT" "${cmd[@]}" >>"$log" 2>&1
  rc=$?
  secs=$(seconds_since "$start")
  if ((rc != 0)); then
    record FAIL run "$name" "$secs" "$log" "(exit $rc) $note"
  elif ! "$PY" "$WORK/inputs.py" verify "$dir" >>"$log" 2>&1; then
    record FAIL run "$name" "$secs" "$log" "(bad output) $note"
  else
    record OK run "$name" "$secs" "$log" "$note"
  fi
  rm -rf "$dir"
done

# --- step 4: compile and fetch through tlserverd ------------------------------

header "step 4/5: tlserverd: compile every example for sm_90a over HTTP, fetch and check the artifacts"
SERVER_PID=
server_log=$LOGDIR/tlserverd.log
start=$EPOCHREALTIME
if [[ ! -x $TLSERVERD ]]; then
  record FAIL server start "$(seconds_since "$start")" "$server_log" "($TLSERVERD not found; run 'make')"
else
  "$TLSERVERD" --listen 127.0.0.1:0 --port-file "$WORK/server.port" --db "$WORK/server.db" \
    --compile-timeout "$TIMEOUT" 2>"$server_log" &
  SERVER_PID=$!
  trap 'kill "$SERVER_PID" 2>/dev/null; rm -rf "$WORK"' EXIT
  for _ in $(seq 1500); do
    [[ -s $WORK/server.port ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.02
  done
  if [[ ! -s $WORK/server.port ]]; then
    record FAIL server start "$(seconds_since "$start")" "$server_log" "(it did not start)"
    SERVER_PID=
  else
    URL=http://127.0.0.1:$(cat "$WORK/server.port")
    record OK server start "$(seconds_since "$start")" "$server_log" "$URL"
  fi
fi
if [[ -n $SERVER_PID ]]; then
  for file in "${EXAMPLES[@]}"; do
    name=$(basename "$file" .json)
    log=$LOGDIR/$name.server.log
    start=$EPOCHREALTIME
    { printf '{"program": '; cat "$file"; printf ', "targets": ["sm_90a"]}'; } >"$WORK/request.json"
    echo "\$ curl -H 'Content-Type: application/json' --data-binary @request.json $URL/v1/compile" >"$log"
    code=$(curl -s -m "$TIMEOUT" -o "$WORK/answer.json" -w '%{http_code}' \
      -H 'Content-Type: application/json' --data-binary @"$WORK/request.json" "$URL/v1/compile")
    head -c 4000 "$WORK/answer.json" >>"$log"
    echo >>"$log"
    if [[ $code != 200 ]]; then
      record FAIL server "$name" "$(seconds_since "$start")" "$log" "(POST /v1/compile answered $code)"
      continue
    fi
    read -r art size ms < <("$PY" -c 'import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(r["artifact"], r["size"], r["compile_ms"])' "$WORK/answer.json" 2>>"$log")
    echo "\$ curl $URL/v1/artifacts/$art | sha256sum" >>"$log"
    got=$(curl -s -m "$TIMEOUT" "$URL/v1/artifacts/$art" | sha256sum | cut -d' ' -f1)
    echo "$got" >>"$log"
    if [[ -n ${art:-} && $got == "$art" ]]; then
      record OK server "$name" "$(seconds_since "$start")" "$log" "artifact ${art:0:12}..., $size bytes, compiled in ${ms%.*} ms"
    else
      record FAIL server "$name" "$(seconds_since "$start")" "$log" "(the artifact's bytes hash to ${got:0:12}..., not ${art:-?})"
    fi
  done

  # --- step 5: the client fetches every example through the server ----------
  header "step 5/5: tlclient: prebuild every example for sm_90a and compute_80 through the server, fetch into a local cache, verify it"
  LOCAL=$WORK/local.db
  log=$LOGDIR/client.prebuild.log
  start=$EPOCHREALTIME
  if timeout "$TIMEOUT" "$TLCLIENT" --server "$URL" --cache "$LOCAL" prebuild examples --target sm_90a,compute_80 \
    --fetch >"$log" 2>&1; then
    record OK client prebuild "$(seconds_since "$start")" "$log" "$(tail -n 1 "$log")"
  else
    record FAIL client prebuild "$(seconds_since "$start")" "$log"
  fi
  log=$LOGDIR/client.cache.log
  start=$EPOCHREALTIME
  if timeout "$TIMEOUT" "$TLCLIENT" --cache "$LOCAL" cache verify >"$log" 2>&1; then
    record OK client "cache verify" "$(seconds_since "$start")" "$log" "$(tail -n 1 "$log")"
  else
    record FAIL client "cache verify" "$(seconds_since "$start")" "$log"
  fi

  start=$EPOCHREALTIME
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID"
  rc=$?
  if ((rc == 0)); then
    record OK server stop "$(seconds_since "$start")" "$server_log" "(SIGTERM, exit 0)"
  else
    record FAIL server stop "$(seconds_since "$start")" "$server_log" "(exit $rc after SIGTERM)"
  fi
  SERVER_PID=
fi

# --- summary ------------------------------------------------------------------

header "summary: $npass passed, $nfail failed ($(seconds_since "$job_start")s); logs in $LOGDIR/"
for f in "${failures[@]}"; do
  echo "  failed: $f"
done
((nfail == 0))
