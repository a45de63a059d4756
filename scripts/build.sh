#!/usr/bin/env bash
# Configures and builds one CMake preset (default: release) after installing the dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
scripts/setup.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
