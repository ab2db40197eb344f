#!/bin/sh
# tests/sh/server_ready.sh - /readyz and /metrics reflect whether tlserverd
# can do its work: runs the "ready" group of tests/attacks/http_attacks.py
# against servers on free loopback ports: one without any toolchain
# (TL_NVRTC, TL_CLANG and TL_HIPRTC pointing nowhere), one whose database
# folder is made read-only while it runs (as nobody, through setpriv, when
# run as root; once more with a disk probe's file left in the folder, as when
# the folder turns read-only between a probe's creating and removing it),
# one whose database lives on an 8 MiB tmpfs of its own mount
# namespace (unshare) that is filled and emptied.  Each must answer 503
# with the reason, show it in /metrics, and be ready again once the cause
# is gone.
#
# Exit status: 0 pass, 1 fail, 77 skipped (no python3, or a row that cannot
# run here: the last line on stderr says which).

exec "$(dirname "$0")/server_attacks.sh" ready
