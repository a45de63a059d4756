#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan), replays their regression inputs and seed
# corpora, then fuzzes each for FAIRGATE_FUZZ_SECONDS (default 30) on a scratch copy of its
# corpus. An input that fails is kept in build/fuzz/findings/: add it to fuzz/regressions/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FAIRGATE_FUZZ_SECONDS:-30}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz >/dev/null
ctest --preset fuzz
mkdir -p build/fuzz/findings
for target in core_differential trace_parser; do
  scratch=$(mktemp -d)
  cp fuzz/corpus/$target/* "$scratch/"
  echo "== fuzzing $target for ${seconds}s"
  log=build/fuzz/findings/${target}.log
  status=0
  build/fuzz/fuzz/${target}_fuzz -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 \
    -artifact_prefix=build/fuzz/findings/${target}- "$scratch" >"$log" 2>&1 || status=$?
  rm -rf "$scratch"
  grep -E "^(Done|stat::number_of_executed_units)" "$log" || true
  if [[ $status -ne 0 ]]; then
    tail -40 "$log"
    echo "$target: the fuzzer found a failing input (see build/fuzz/findings/)"
    exit 1
  fi
done
