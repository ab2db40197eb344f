#!/bin/sh
# tests/sh/main_job.sh - the README's main job (deploy/main-job.sh, what
# deploy/bootstrap.sh runs after the build) passes on every example as a
# fresh machine runs it: tlc check, tlc run --interpret at small sizes on
# numpy's random inputs (every output written, no NaN), compiles through a
# real tlserverd with the artifacts' hashes checked, and tlclient's
# prebuild, fetch and cache verify.  It fails when an example's inputs
# cannot be made (constants inputs.py cannot evaluate, a program of
# several kernels) or any step fails.
#
# Exit status: 0 pass, 1 fail, 77 skipped (no NVRTC, no /usr/bin/python3
# with numpy).

cd "$(dirname "$0")/../.." || exit 1
. tests/sh/lib.sh
tl_init main_job.sh
tl_built "$TL_BUILD/bin/tlc" "$TL_BUILD/bin/tlserverd" "$TL_BUILD/bin/tlclient"
/usr/bin/python3 -c 'import numpy' 2>/dev/null || tl_skip "no /usr/bin/python3 with numpy"
tl_need_nvrtc "the main job compiles every example for sm_90a"
TLC=$TL_BUILD/bin/tlc TLSERVERD=$TL_BUILD/bin/tlserverd TLCLIENT=$TL_BUILD/bin/tlclient \
  bash deploy/main-job.sh >"$TMP/out" 2>&1
rc=$?
check "deploy/main-job.sh's exit status" "$rc" 0
n=$(ls examples/*.json | wc -l)
has "$TMP/out" "summary: $((3 * n + 4)) passed, 0 failed" "every example through every step ($n examples)"
[ "$nfail" -eq 0 ] || tail -40 "$TMP/out"
tl_done
