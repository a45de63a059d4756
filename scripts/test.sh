#!/usr/bin/env bash
# The whole test suite: first the runtime's lock contracts under clang's thread-safety analysis
# (scripts/thread_safety.sh, seconds), then builds the release preset and runs every test with
# CTest (the tests of the lock build_tree beside the rest), then the same suite under
# AddressSanitizer and UndefinedBehaviorSanitizer, then the runtime's tests under
# ThreadSanitizer (the thread build of the runtime, runtime/waiting.h), then the libFuzzer
# targets for a bounded time (scripts/fuzz.sh). Each stage's header says how long the run has
# taken so far, so that a slow stage shows in CI's log.
#
# Each preset's tests leave part of the machine idle (they wait on servers, clients and timers),
# so the next preset is built beside them, niced, in what they leave; what is left of that build
# runs at full speed once they end. A build's output is printed only when it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
logs=$(mktemp -d)
build_pid=
# The build beside the tests runs in a process group of its own (setsid), stopped whole if the
# run ends first (a failed stage).
stop_build() {
  if [[ -n $build_pid ]]; then kill -- -"$build_pid" 2>/dev/null || true; fi
  rm -rf "$logs"
}
trap stop_build EXIT
# start_build PRESET: configures and builds PRESET (the fuzz targets for "fuzz"), niced, in the
# background; finish_build PRESET waits for it.
start_build() {
  local preset=$1
  if [[ $preset == fuzz ]]; then
    setsid nice -n 10 scripts/fuzz.sh --build-only >"$logs/$preset" 2>&1 &
  else
    setsid nice -n 10 bash -c 'cmake --preset "$1" && cmake --build --preset "$1"' build \
      "$preset" >"$logs/$preset" 2>&1 &
  fi
  build_pid=$!
}
finish_build() {
  local preset=$1 status=0
  wait "$build_pid" || status=$?
  build_pid=
  if [[ $status -ne 0 ]]; then
    cat "$logs/$preset"
    echo "== $preset: the build failed"
    exit 1
  fi
  echo "== $preset: built beside the tests before it (${SECONDS} s in)"
}

scripts/thread_safety.sh
echo "== release: build (${SECONDS} s in)"
scripts/build.sh release >/dev/null
start_build asan
echo "== release: test (${SECONDS} s in)"
# The tests of the lock build_tree (label build_tree: the install tests and the build probes)
# run one at a time, and the Debian packages' test builds fairgate again, niced, in a tree of its
# own. In one of CTest's slots it left the rest of the suite the other alone for most of its five
# minutes, while the suite by itself leaves about 45 % of the machine idle: so these run beside
# it, their output printed after.
serial_log=build/release/build_tree_tests.log
ctest --preset release -L build_tree >"$serial_log" 2>&1 &
serial_pid=$!
suite_status=0
ctest --preset release -j "$jobs" -LE build_tree || suite_status=$?
serial_status=0
wait "$serial_pid" || serial_status=$?
echo "== release: the tests of the lock build_tree, run beside the rest (${SECONDS} s in)"
cat "$serial_log"
if [[ $suite_status -ne 0 || $serial_status -ne 0 ]]; then exit 1; fi

finish_build asan
start_build tsan
echo "== asan: test (${SECONDS} s in)"
ctest --preset asan -j "$jobs"

finish_build tsan
start_build fuzz
echo "== tsan: test (${SECONDS} s in)"
ctest --preset tsan -j "$jobs"

finish_build fuzz
echo "== fuzz (${SECONDS} s in)"
scripts/fuzz.sh
echo "== done in ${SECONDS} s"
