#!/bin/sh
# tests/sh/server_cubin_hsaco.sh - one compile request to a real tlserverd
# for an NVIDIA and an AMD target at once: both build, the answer keeps the
# targets' order, and each artifact served is the binary its target wants
# (an ELF for EM_CUDA, 190, and for EM_AMDGPU, 224) whose bytes hash to its
# id.  Exit 0 pass, 1 fail, 77 skip (NVRTC or the AMD toolchain missing).
B=${TL_BUILD:-build}
PY=/usr/bin/python3
"$B/bin/tlc" targets >/tmp/tl_targets.$$ 2>/dev/null
if ! grep -q "^sm_80\b" /tmp/tl_targets.$$ || ! grep -q "^gfx90a\b" /tmp/tl_targets.$$; then
  rm -f /tmp/tl_targets.$$
  echo "needs NVRTC (sm_80) and the AMD toolchain (gfx90a): tlc targets does not list both" >&2
  exit 77
fi
rm -f /tmp/tl_targets.$$
WORK=$(mktemp -d)
trap 'kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; [ -f "$WORK/log" ] && tail -5 "$WORK/log"; exit 1; }
"$B/bin/tlserverd" --listen 127.0.0.1:0 --port-file "$WORK/port" --db "$WORK/cache.db" --log-format off \
  >"$WORK/log" 2>&1 &
PID=$!
i=0
while [ ! -s "$WORK/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$WORK/port" ] || fail "the server did not start"
URL=http://127.0.0.1:$(cat "$WORK/port")
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
