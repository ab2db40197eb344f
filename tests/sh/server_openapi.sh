#!/bin/sh
# tests/sh/server_openapi.sh - proto/openapi.yaml against the real server.
#
# Loads the OpenAPI file (PyYAML), checks that every schema in it is a valid
# JSON Schema (draft 2020-12), then starts build/bin/tlserverd on a free
# loopback port and sends it one request of each kind (successes and
# failures); each JSON answer must be valid against the schema the OpenAPI
# file gives for that path, method and status, and each status must be one
# the file lists for that operation.  Requests in the compile request schema
# (the examples) must be valid against CompileRequest too.
#
# Exit status: 0 pass, 1 fail, 77 skipped (no /usr/bin/python3 with yaml
# and jsonschema, or the server offers fewer than two targets; it compiles
# for sm_80 and sm_90a with NVRTC, else for the first two targets offered).

cd "$(dirname "$0")/../.." || exit 1
TL_BUILD=${TL_BUILD:-build}
PY=/usr/bin/python3
if ! "$PY" -c 'import yaml; from jsonschema import Draft202012Validator' 2>/dev/null; then
  echo "server_openapi.sh: skipped: /usr/bin/python3 lacks yaml or jsonschema (python3-yaml, python3-jsonschema)" >&2
  exit 77
fi
[ -x "$TL_BUILD/bin/tlserverd" ] || { echo "server_openapi.sh: FAIL: $TL_BUILD/bin/tlserverd not built" >&2; exit 1; }

exec "$PY" - "$TL_BUILD/bin/tlserverd" <<'PYEOF'
import json, os, re, subprocess, sys, tempfile, urllib.request, urllib.error
import yaml
from jsonschema import Draft202012Validator, RefResolver

server_bin = sys.argv[1]
root = os.getcwd()
spec_path = os.path.join(root, "proto/openapi.yaml")
spec = yaml.safe_load(open(spec_path))
tile = json.load(open(os.path.join(root, "proto/tile-ir-v1.schema.json")))
# Its $id is a URN, which Python's urljoin cannot resolve "#/..." against;
# the file's own URL serves as its base instead.
tile.pop("$id", None)
base = "file://" + spec_path
store = {
    base: spec,
    "file://" + os.path.join(root, "proto/tile-ir-v1.schema.json"): tile,
}
resolver = RefResolver(base, spec, store=store)

fails = 0
passes = 0
def check(cond, what):
    global fails, passes
    if cond:
        passes += 1
    else:
        fails += 1
        print("FAIL:", what, file=sys.stderr)

assert spec["openapi"].startswith("3.1"), spec["openapi"]
for name, schema in spec["components"]["schemas"].items():
    try:
        Draft202012Validator.check_schema(schema)
        passes += 1
    except Exception as e:
        check(False, "schema %s is not valid JSON Schema: %s" % (name, e))

def validate(instance, schema, what):
    v = Draft202012Validator(schema, resolver=resolver)
    errs = sorted(v.iter_errors(instance), key=lambda e: list(e.path))
    check(not errs, "%s: %s" % (what, "; ".join("%s at %s" % (e.message[:200], list(e.path)) for e in errs[:3])))

def resolve(obj):
    while isinstance(obj, dict) and "$ref" in obj:
        ref = obj["$ref"]
        assert ref.startswith("#/"), ref
        node = spec
        for part in ref[2:].split("/"):
            node = node[part]
        obj = node
    return obj

def operation(path):
    for template, item in spec["paths"].items():
        rx = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(rx, path):
            return item
    return None

# examples of compile requests are valid CompileRequests
req_schema = {"$ref": base + "#/components/schemas/CompileRequest"}
for f in sorted(os.listdir("examples")):
    if f.endswith(".json"):
        validate({"program": json.load(open("examples/" + f)), "targets": ["sm_90a"]}, req_schema,
                 "examples/%s as a compile request" % f)

skipped = None
tmp = tempfile.mkdtemp()
sys.path.insert(0, "tests/attacks")
import tlprocs  # noqa: E402
proc, port, log = tlprocs.start_server(server_bin, tmp, "server", ["--workers", "1"])
try:
    url = "http://127.0.0.1:%d" % port

    def call(method, path, body=None, headers=None):
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        h = dict(headers or {})
        if data is not None and "Content-Type" not in h:
            h["Content-Type"] = "application/json"
        r = urllib.request.Request(url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(r, timeout=120) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def exercise(method, path, body=None, headers=None, want=None):
        status, hdrs, data = call(method, path, body, headers)
        what = "%s %s -> %d" % (method, path[:60], status)
        if want is not None:
            check(status == want, "%s, wanted %d: %s" % (what, want, data[:300]))
        item = operation(path)
        check(item is not None, "%s: path not in the OpenAPI file" % what)
        if item is None:
            return status, data
        op = item.get(method.lower())
        if op is None and status == 405:  # a method the path does not have
            op = {"responses": {"405": {"$ref": "#/components/responses/MethodNotAllowed"}}}
        check(op is not None, "%s: method not in the OpenAPI file" % what)
        if op is None:
            return status, data
        resp = op["responses"].get(str(status))
        check(resp is not None, "%s: status not listed in the OpenAPI file" % what)
        if resp is None:
            return status, data
        resp = resolve(resp)
        content = resp.get("content", {})
        ctype = (hdrs.get("Content-Type") or "").split(";")[0].strip()
        if "application/json" in content and ctype == "application/json":
            validate(json.loads(data), content["application/json"]["schema"], what)
        elif content:
            check(ctype in content, "%s: content type %r not in %s" % (what, ctype, list(content)))
        return status, data

    add_one = json.load(open("examples/tilus_add_one.json"))
    exercise("GET", "/healthz", want=200)
    st, data = exercise("GET", "/v1/info", want=200)
    info = json.loads(data)
    # two targets the server offers: sm_80 and sm_90a with NVRTC, else the
    # first two of another toolchain (clang's gfx targets); none: a skip
    offered = info["targets"]
    pair = ["sm_80", "sm_90a"] if "sm_80" in offered and "sm_90a" in offered else offered[:2]
    if len(pair) < 2:
        skipped = "the server offers fewer than two targets (no toolchain here): %s" % offered
        raise StopIteration
    exercise("GET", "/readyz", want=200)
    exercise("GET", "/metrics", want=200)
    st, data = exercise("POST", "/v1/compile", {"program": add_one, "targets": pair}, want=200)
    res = json.loads(data)["results"]
    # the compiler's identity: tlc --version, /v1/info, the metadata and the key manifest agree
    tlc = os.path.join(os.path.dirname(server_bin), "tlc")
    ver = subprocess.run([tlc, "--version"], capture_output=True, text=True).stdout.splitlines()
    check(ver and ver[0] == info["compiler"] + " (Tile IR 1)", "tlc --version %r, /v1/info compiler %r" % (ver, info["compiler"]))
    check(len(ver) > 1 and ver[1] == "compiler digest " + info["compiler_digest"], "tlc --version %r" % ver)
    check(info["compiler"].endswith("+" + info["compiler_digest"][:16]), "identity %r" % info["compiler"])
    for r in res:
        check(r["meta"]["versions"]["compiler"] == info["compiler"], "metadata %r" % r["meta"]["versions"])
    st, data = exercise("POST", "/v1/compile", {"program": add_one, "targets": pair[:1]}, want=200)
    check(json.loads(data)["results"][0]["cached"] is True, "second compile not cached")
    st, data = exercise("GET", "/v1/kernels/" + res[0]["key"], want=200)
    check(json.loads(data)["manifest"].split("\n")[1] == "compiler " + info["compiler"], "manifest %r" % data[:300])
    exercise("GET", "/v1/artifacts/" + res[1]["artifact"], want=200)
    exercise("GET", "/v1/artifacts/" + res[1]["artifact"], headers={"Range": "bytes=0-3"}, want=206)
    exercise("GET", "/v1/artifacts/" + res[1]["artifact"], headers={"Range": "bytes=99999999-"}, want=416)
    exercise("GET", "/v1/artifacts/" + res[1]["artifact"], headers={"If-None-Match": '"%s"' % res[1]["artifact"]}, want=304)
    exercise("GET", "/v1/artifacts/" + "0" * 64, want=404)
    exercise("GET", "/v1/artifacts/xyz", want=400)
    exercise("GET", "/v1/kernels/" + "0" * 64, want=404)
    exercise("DELETE", "/v1/artifacts/" + "0" * 64, want=405)
    exercise("POST", "/v1/compile", b"{", want=400)
    exercise("POST", "/v1/compile", {"program": add_one}, want=400)
    exercise("POST", "/v1/compile", {"program": add_one, "targets": pair[:1]}, headers={"Content-Type": "text/plain"}, want=415)
    exercise("POST", "/v1/compile", {"program": add_one, "targets": ["sm_1"]}, want=422)
    bad = dict(add_one, kernel=dict(add_one["kernel"], threads="x +"))
    st, data = exercise("POST", "/v1/compile", {"program": bad, "targets": pair}, want=422)
    e = json.loads(data)["error"]
    check(e["code"] == "invalid_program" and e["diagnostics"], "422 without diagnostics: %s" % data[:300])
    exercise("POST", "/v1/compile", b"[" * 100 + b"]" * 100, want=413)
    # POST /v1/bundles: a bundle of the build above, written here from proto/bundle.md
    import hashlib, struct
    def bundle_of(manifest, meta, blob):
        key = hashlib.sha256(manifest.encode()).hexdigest()
        rec = json.dumps({"key": key, "artifact": hashlib.sha256(blob).hexdigest(), "manifest": manifest,
                          "metadata": json.dumps(meta), "compile_ms": 1}).encode()
        body = b"".join(k + bytes(7) + struct.pack("<Q", len(p)) + hashlib.sha256(p).digest() + p
                        for k, p in ((b"A", blob), (b"B", rec)))
        out = b"TLBUNDLE" + struct.pack("<IIQ", 1, 2, 24 + len(body) + 32) + body
        return out + hashlib.sha256(out).digest()
    kern = json.loads(exercise("GET", "/v1/kernels/" + res[0]["key"], want=200)[1])
    blob = call("GET", "/v1/artifacts/" + kern["artifact"])[2]
    octet = {"Content-Type": "application/octet-stream"}
    good = bundle_of(kern["manifest"], kern["meta"], blob)
    st, data = exercise("POST", "/v1/bundles", good, headers=octet, want=200)
    check(json.loads(data)["builds"][0]["status"] == "present", "bundle import: %s" % data[:300])
    exercise("POST", "/v1/bundles", good[:-10], headers=octet, want=400)
    exercise("POST", "/v1/bundles", good, want=415)
    other = kern["manifest"].replace("compiler " + info["compiler"], "compiler tlc 0.1.0+ffffffffffffffff")
    st, data = exercise("POST", "/v1/bundles", bundle_of(other, kern["meta"], blob), headers=octet, want=422)
    check(json.loads(data)["builds"][0]["status"] == "refused", "another compiler's bundle: %s" % data[:300])
    exercise("GET", "/v1/bundles", want=405)
    # tunings: a record keyed by its own fields
    shape, dev, prog = {"N": 64}, "fake timer (sm_80)", "ab" * 32
    tkey = hashlib.sha256(("tl-tuning 1\nprogram %s\nshape %s\ndevice %s\n" % (
        prog, json.dumps(shape, separators=(",", ":")), dev)).encode()).hexdigest()
    rec = {"key": tkey, "program": prog, "shape": shape, "device": dev, "constants": {"block_n": 64}, "ms": 1.5,
           "candidates": []}
    exercise("POST", "/v1/tunings", rec, want=200)
    st, data = exercise("GET", "/v1/tunings/" + tkey, want=200)
    check(json.loads(data) == rec, "the tuning record comes back as posted: %s" % data[:300])
    exercise("POST", "/v1/tunings", dict(rec, device="other"), want=400)
    exercise("POST", "/v1/tunings", b"{", want=400)
    exercise("POST", "/v1/tunings", rec, headers={"Content-Type": "text/plain"}, want=415)
    exercise("GET", "/v1/tunings/" + "0" * 64, want=404)
    exercise("GET", "/v1/tunings/xyz", want=400)
except StopIteration:
    pass
finally:
    tlprocs.stop(proc, 60)
    log.close()
    if fails:
        sys.stderr.write(open(os.path.join(tmp, "server.log")).read()[-3000:])
    subprocess.call(["rm", "-rf", tmp])

print("server_openapi.sh: %d passed, %d failed" % (passes, fails))
if skipped and not fails:
    print("server_openapi.sh: skipped: " + skipped, file=sys.stderr)
    sys.exit(77)
sys.exit(1 if fails else 0)
PYEOF
