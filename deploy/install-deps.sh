#!/bin/bash
# install-deps.sh - installs the Debian 12 packages this project needs to
# build, test and fuzz (run as root).
#
# It asks dpkg which of the packages below are missing and prints nothing at
# all when none is.  Otherwise it runs `apt-get update` once and installs the
# missing ones, printing one line that names them.  Run as another user it
# succeeds only when nothing is missing, and says what to do otherwise.
# Safe to run any number of times (bootstrap.sh and .ci/run both call it).

set -euo pipefail

# Every package the project needs, and why.
PACKAGES=(
  build-essential       # gcc, make, libc headers: builds everything
  pkg-config            # finds library flags (libmicrohttpd, libcurl)
  libjansson-dev        # JSON parsing/printing: compiler, server, client
  libsqlite3-dev        # the content-addressed cache (libtlcache)
  sqlite3               # the sqlite3 shell: inspecting caches in tests and by hand
  libssl-dev            # libcrypto's SHA-256 for build keys and artifact ids
  libcmocka-dev         # the unit-test framework (tests/unit)
  libmicrohttpd-dev     # the HTTP server library of tlserverd
  libcurl4-openssl-dev  # the HTTP client library of libtlclient
  curl                  # end-to-end tests drive the server with curl too
  clang                 # `make fuzz` (libFuzzer) and a second compiler
  libclang-rt-14-dev    # clang 14's libFuzzer and sanitizer runtimes
  clang-19              # the AMD back end's compiler: HIP C to AMDGPU code (gfx90a, gfx942, gfx1100, gfx1201)
  lld-19                # ld.lld-19: links the AMDGPU object into a code object (HSACO)
  llvm-19               # llvm-objdump-19 / llvm-readelf-19: tests look at AMDGPU code objects with them
  python3-numpy         # tests cross-check results with real numpy (/usr/bin/python3)
  python3-jsonschema    # tests validate programs against proto/tile-ir-v1.schema.json
  python3-matplotlib    # bench/plot.py: the PNG of a gpu_bench.py run
  valgrind              # leak checks of commands in tests
  wrk                   # bench/server.sh: HTTP load generator for the artifact GET benchmark
  nginx-light           # bench/server.sh: the static-file server tlserverd is compared with
  libhiredis-dev        # the Redis client of tlserverd's shared tier (--tier)
  redis-server          # the shared tier's store: deploy/cluster.sh and tests/sh/cluster.sh
  haproxy               # deploy/cluster.sh: one address in front of the replicas
  chromium              # tests/sh/server_status_page.sh: loads the status page headless and checks its screenshot
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
  # "ii " = wanted install, currently installed, no error.
  if [[ "$status" != "ii "* ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

if ((EUID != 0)); then
  echo "install-deps.sh: missing packages: ${missing[*]}" >&2
  echo "install-deps.sh: run this script as root (e.g. sudo $0) to install them" >&2
  exit 1
fi

echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# apt's chatter (debconf notes and the like) is shown only if it fails.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { apt-get update -qq && apt-get install -y -qq "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-deps.sh: apt-get failed; see its output above" >&2
  exit 1
fi
