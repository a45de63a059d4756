#!/usr/bin/env bash
# The whole test suite: first the runtime's lock contracts under clang's thread-safety analysis
# (scripts/thread_safety.sh, seconds), then builds the release preset and runs every test with
# CTest (the tests of the lock build_tree beside the rest), then the same suite under
# AddressSanitizer and UndefinedBehaviorSanitizer, then the runtime's tests under
# ThreadSanitizer (the thread build of the runtime, runtime/waiting.h), then the libFuzzer
# targets for a bounded time (scripts/fuzz.sh). Each stage's header says how long the run has
# taken so far, so that a slow stage shows in CI's log. The tests labelled "extended" (the Debian
# packages' test, the runtime's tests on a pool of 2 threads) are left to
# scripts/test_extended.sh: with them CI took 35 minutes on its two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
scripts/thread_safety.sh
for preset in release asan tsan; do
  echo "== $preset: build (${SECONDS} s in)"
  scripts/build.sh "$preset" >/dev/null
  echo "== $preset: test (${SECONDS} s in)"
  if [[ $preset != release ]]; then
    ctest --preset "$preset" -j "$jobs" -LE extended
    continue
  fi
  # The tests of the lock build_tree (label build_tree: the install test and the build probes)
  # run one at a time, beside the rest of the suite rather than in one of its slots, which
  # leaves about 45 % of the machine idle (its tests wait on servers, clients and timers); their
  # output is printed after.
  serial_log=build/release/build_tree_tests.log
  ctest --preset release -L build_tree -LE extended >"$serial_log" 2>&1 &
  serial_pid=$!
  suite_status=0
  ctest --preset release -j "$jobs" -LE 'build_tree|extended' || suite_status=$?
  serial_status=0
  wait "$serial_pid" || serial_status=$?
  echo "== release: the tests of the lock build_tree, run beside the rest (${SECONDS} s in)"
  cat "$serial_log"
  if [[ $suite_status -ne 0 || $serial_status -ne 0 ]]; then exit 1; fi
done
echo "== fuzz (${SECONDS} s in)"
scripts/fuzz.sh
echo "== done in ${SECONDS} s"
