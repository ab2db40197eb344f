#!/bin/sh
# tests/sh/server_cubin_hsaco.sh - one compile request to a real tlserverd
# for an NVIDIA and an AMD target at once: both build, the answer keeps the
# targets' order, and each artifact served is the binary its target wants
# (an ELF for EM_CUDA, 190, and for EM_AMDGPU, 224) whose bytes hash to its
# id.  Exit 0 pass, 1 fail, 77 skip (NVRTC or the AMD toolchain missing).
cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
tl_init server_cubin_hsaco.sh
PY=/usr/bin/python3
"$TL_BUILD/bin/tlc" targets >"$TMP/targets" 2>/dev/null
grep -q "^sm_80\b" "$TMP/targets" && grep -q "^gfx90a\b" "$TMP/targets" ||
  tl_skip "needs NVRTC (sm_80) and the AMD toolchain (gfx90a): tlc targets does not list both"
fail() { tail -5 "$TMP/server.log"; tl_fail "$*"; }
tl_server server --log-format off
WORK=$TMP
$PY -c 'import json; print(json.dumps({"program": json.load(open("examples/gemm.json")),
  "targets": ["sm_80", "gfx90a"], "constants": {"M": 256, "N": 256, "K": 256}}))' >"$WORK/req.json"
code=$(curl -s -o "$WORK/ans.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary @"$WORK/req.json" "$URL/v1/compile")
[ "$code" = 200 ] || fail "POST /v1/compile answered $code: $(head -c 300 "$WORK/ans.json")"
$PY - "$WORK/ans.json" "$URL" "$WORK" <<'PYEOF' || exit 1
import hashlib, json, sys, urllib.request
ans, url, work = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
res = ans["results"]
assert [r["target"] for r in res] == ["sm_80", "gfx90a"], [r["target"] for r in res]
for r, machine, kind in zip(res, (190, 224), ("cubin", "hsaco")):
    assert r["status"] == "ok", r
    data = urllib.request.urlopen(f"{url}/v1/artifacts/{r['artifact']}").read()
    assert hashlib.sha256(data).hexdigest() == r["artifact"], "bytes do not hash to the id"
    assert data[:4] == b"\x7fELF" and int.from_bytes(data[18:20], "little") == machine, (r["target"], data[:20])
    assert r["meta"]["binary"] == kind and r["meta"]["target"] == r["target"], r["meta"]["binary"]
print("server_cubin_hsaco: one request, a cubin (EM_CUDA) and an HSACO (EM_AMDGPU), both verified")
PYEOF
