#!/usr/bin/env bash
# The whole test suite: first the runtime's lock contracts under clang's thread-safety analysis
# (scripts/thread_safety.sh, seconds), then builds the release preset and runs every test with
# CTest, then the same suite under AddressSanitizer and UndefinedBehaviorSanitizer, then the
# runtime's tests under ThreadSanitizer (the thread build of the runtime, runtime/waiting.h), then
# the libFuzzer targets for a bounded time (scripts/fuzz.sh). Each stage's header says how long
# the run has taken so far, so that a slow stage shows in CI's log.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
scripts/thread_safety.sh
for preset in release asan tsan; do
  echo "== $preset: build (${SECONDS} s in)"
  scripts/build.sh "$preset" >/dev/null
  echo "== $preset: test (${SECONDS} s in)"
  ctest --preset "$preset" -j "$jobs"
done
echo "== fuzz (${SECONDS} s in)"
scripts/fuzz.sh
echo "== done in ${SECONDS} s"
