#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan), replays their regression inputs and seed
# corpora, then fuzzes each for FAIRGATE_FUZZ_SECONDS (default 30) on a scratch copy of its
# corpus. An input that fails is kept in build/fuzz/findings/: add it to fuzz/regressions/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FAIRGATE_FUZZ_SECONDS:-30}
cmake --preset fuzz >/dev/null
# The two targets alone: the stores and the C interface, which neither links, are not built.
cmake --build --preset fuzz --target core_differential_fuzz trace_parser_fuzz >/dev/null
ctest --preset fuzz
mkdir -p build/fuzz/findings
# The targets run side by side (one per core) for the same time.
fuzz_one() {
  local target=$1 scratch log status=0
  scratch=$(mktemp -d)
  cp fuzz/corpus/$target/* "$scratch/"
  log=build/fuzz/findings/${target}.log
  build/fuzz/fuzz/${target}_fuzz -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 \
    -artifact_prefix=build/fuzz/findings/${target}- "$scratch" >"$log" 2>&1 || status=$?
  rm -rf "$scratch"
  echo "== fuzzed $target for ${seconds}s"
  grep -E "^(Done|stat::number_of_executed_units)" "$log" || true
  if [[ $status -ne 0 ]]; then
    tail -40 "$log"
    echo "$target: the fuzzer found a failing input (see build/fuzz/findings/)"
    return 1
  fi
}
pids=()
for target in core_differential trace_parser; do
  fuzz_one "$target" &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
exit $failed
