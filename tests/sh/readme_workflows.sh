#!/bin/sh
# tests/sh/readme_workflows.sh - the README's CI-farm and release workflows
# ("A CI farm's prebuild.", "A release's bundle.") run as printed: each
# code block is taken from README.md, its server https://tlc.example:8470
# replaced by a real tlserverd on loopback (with tokens: TL_TOKEN a compile
# token, as a CI job sets it, and ADMIN_TOKEN an admin one), and run with
# sh -e in a folder laid out as the commands expect: kernels/ (gemm.json,
# tilus_add_one.json, a test_gemm.json the --exclude drops, the metadata
# tlclient compile -o writes), contrib/a/gemm_nt.json.
#
#  1. the CI farm's prebuild: exit 0; builds.jsonl holds one record per
#     build: gemm and gemm_nt 4 variants (-D block_M x num_stages) x 3
#     targets, tilus_add_one (which declares neither constant) 3, every one
#     compiled; test_gemm and the metadata not among them
#  2. the release's bundle: mkdir, create, verify, ls and push exit 0; the
#     bundle holds gemm's 2 variants and tilus_add_one for sm_80, sm_90 and
#     sm_90a (9 builds; test_gemm.json, the same program, gives the same
#     builds); push stores or finds all 9 on the server, refusing none
#
# Exit status: 0 pass, 1 fail, 77 skipped (no NVRTC, no clang for gfx942,
# no python3).

cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
tl_init readme_workflows.sh
tl_need python3
tl_built "$TL_BUILD/bin/tlclient" "$TL_BUILD/bin/tlserverd"
tl_need_nvrtc "the workflows compile for sm_80"
"$TL_BUILD/bin/tlc" targets 2>/dev/null | grep -q '^gfx942 ' || tl_skip "no clang for gfx942 (the CI farm's targets)"

# block TITLE: the first code block after the README paragraph starting with **TITLE**
block() {
  awk -v t="**$1**" 'index($0, t) == 1 { on = 1 } on && /^```$/ { if (inb) exit; inb = 1; next } inb' README.md
}
ADMIN=admin-token-0123456789abcdef
WRITER=compile-token-0123456789abcdef
printf '%s admin\n%s compile\n' "$ADMIN" "$WRITER" >"$TMP/tokens"
chmod 600 "$TMP/tokens"
tl_server server --workers 2 --tokens "$TMP/tokens"
W=$TMP/work
mkdir -p "$W/kernels/out" "$W/contrib/a" "$W/bin"
cp examples/gemm.json examples/tilus_add_one.json "$W/kernels/"
cp examples/gemm.json "$W/kernels/test_gemm.json"
printf '{"entry": "add_one", "target": "sm_80"}\n' >"$W/kernels/out/add_one.sm_80.json"
cp examples/gemm_nt.json "$W/contrib/a/"
ln -s "$(pwd)/$TL_BUILD/bin/tlclient" "$W/bin/tlclient"
# the README's commands with the server replaced; stdin, PATH and the tokens as a CI job has them
run_block() { # run_block TITLE NAME: the block into $TMP/NAME.sh, run in $W; its output in $TMP/NAME.out
  block "$1" | sed "s|https://tlc.example:8470|$URL|g" >"$TMP/$2.sh"
  [ -s "$TMP/$2.sh" ] && ok || bad "README.md has no code block after **$1**"
  (cd "$W" && PATH="$W/bin:$PATH" TL_TOKEN=$WRITER ADMIN_TOKEN=$ADMIN TL_CLIENT_CACHE="$TMP/client.db" \
    sh -e "$TMP/$2.sh") >"$TMP/$2.out" 2>&1
}

# ---- 1. the CI farm's prebuild ---------------------------------------------------------------------
run_block "A CI farm's prebuild." ci && ok || bad "the CI farm's prebuild: exit $?: $(cat "$TMP/ci.sh" "$TMP/ci.out")"
python3 - "$W/builds.jsonl" <<'EOF' && ok || bad "builds.jsonl: $(head -c 1500 "$W/builds.jsonl")"
import collections, json, sys
recs = [json.loads(line) for line in open(sys.argv[1])]
by = collections.Counter((r["program"].split("/")[-1], r["target"]) for r in recs)
want = {}
for t in ("sm_80", "sm_90a", "gfx942"):
    want[("gemm.json", t)] = want[("gemm_nt.json", t)] = 4
    want[("tilus_add_one.json", t)] = 1
assert dict(by) == want, dict(by)
assert all(r["status"] == "compiled" for r in recs), [r for r in recs if r["status"] != "compiled"][:2]
consts = {json.dumps(r["constants"], sort_keys=True) for r in recs if r["program"].endswith("/gemm.json")}
assert consts == {json.dumps({"block_M": m, "num_stages": s}, sort_keys=True) for m in (64, 128) for s in (2, 3)}, consts
EOF
has "$TMP/ci.out" "out/add_one.sm_80.json" "the metadata file is skipped with a note"
hasnt "$W/builds.jsonl" "test_gemm" "--exclude 'test_*' drops test_gemm.json"

# ---- 2. the release's bundle -----------------------------------------------------------------------
run_block "A release's bundle." release && ok ||
  bad "the release's bundle: exit $?: $(cat "$TMP/release.sh" "$TMP/release.out")"
has "$TMP/release.out" "release/kernels.tlb: 9 builds, 9 requests," "create writes 9 builds"
has "$TMP/release.out" "bundle verify: release/kernels.tlb: sound:" "verify says sound"
[ "$(grep -c '^build ' "$TMP/release.out")" = 9 ] && ok || bad "ls lists other than 9 builds: $(cat "$TMP/release.out")"
check "push stores or finds the 9 builds, refusing none" \
  "$(sed -n 's/^bundle push: release\/kernels.tlb: \([0-9]*\) stored, \([0-9]*\) present, 0 refused, .*/\1 \2/p' \
    "$TMP/release.out" | awk '{ print $1 + $2 }')" 9
tl_done
