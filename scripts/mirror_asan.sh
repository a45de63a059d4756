#!/usr/bin/env bash
# The git mirror example under AddressSanitizer and UndefinedBehaviorSanitizer, on demand: the asan
# preset that the test command builds leaves the mirror out (its Beast code is the largest build
# of the project, about four minutes of CI's two cores). This builds the asan preset's
# configuration with the mirror in its own tree (build/asan-mirror) and runs the mirror's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset asan -B build/asan-mirror -DFAIRGATE_BUILD_GIT_MIRROR=ON >/dev/null
cmake --build build/asan-mirror --target git_mirror_tests fairgate_git_mirror
ctest --test-dir build/asan-mirror/examples/git_mirror --output-on-failure -j "$(nproc)"
