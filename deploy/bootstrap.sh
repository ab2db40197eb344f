#!/bin/bash
# bootstrap.sh - the README's first command: from a fresh Debian 12 machine
# (as root) to a built tree that has run its main job.
#
#   1. deploy/install-deps.sh   the Debian packages (silent when all are there)
#   2. make                     every library and command into build/
#   3. deploy/main-job.sh       check and interpret every example program
#
# Stops at the first step that fails.  `make test` is the second command.

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "== bootstrap 1/3: dependencies (deploy/install-deps.sh)"
./deploy/install-deps.sh

echo "== bootstrap 2/3: build (make)"
make -j"$(nproc)"

echo "== bootstrap 3/3: main job (deploy/main-job.sh)"
./deploy/main-job.sh
