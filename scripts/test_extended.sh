#!/usr/bin/env bash
# The tests the test command (scripts/test.sh) leaves out for CI's time, CTest label "extended":
# the Debian packages built, installed with dpkg, used by consumers and removed
# (Install.DebPackagesInstallAndServeAConsumer, about 7 minutes, needs root) and the runtime's
# tests on a pool of 2 worker threads (RuntimeOnPool.2Workers). Builds the release preset first.
# Run it before a change to packaging, installation or the pool, and before a release.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh release >/dev/null
ctest --preset release -j "$(nproc)" -L extended
