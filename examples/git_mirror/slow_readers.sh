#!/usr/bin/env bash
# Client A as many distinct slow readers: each of its clones asks its own request (never shared
# or served from the cache) and reads its pack at READ_RATE bytes a second; client B clones a
# small repository every 2 s with real git. Prints B's clone times alone and beside A, A's clones,
# git upload-pack runs and the server's peak memory. On loopback only.
#
# The server runs on core 0 and the load on core 1 (taskset), so that the load cannot starve the
# server of CPU; git processes the server starts inherit core 0.
#
#   bash examples/git_mirror/slow_readers.sh [BUILD_DIR]     (default build/release)
# Knobs (environment): DURATION (s, default 60), CAPACITY (8), CONCURRENCY (1000),
# READ_RATE (bytes/s, 65536), HEAVY_MIB (2).
set -euo pipefail
build=${1:-build/release}
source "$(dirname "$0")/load_setup.sh"
duration=${DURATION:-60}
capacity=${CAPACITY:-8}
concurrency=${CONCURRENCY:-1000}
read_rate=${READ_RATE:-65536}
heavy_mib=${HEAVY_MIB:-2}

make_repositories "$work" "$heavy_mib"

run() {  # run alone|beside
  rm -rf "$work/clones"
  start_mirror --capacity "$capacity" \
    --client-header X-Client --trusted-proxy 127.0.0.1 --max-pending-per-client 5000
  local starts_before
  starts_before=$(clone_starts)
  local flags=(--heavy-concurrency "$concurrency" --heavy-read-rate "$read_rate" --heavy-distinct)
  if [[ $1 == alone ]]; then
    flags=(--alone)
    echo "== B alone"
  else
    echo "== B beside A: $concurrency distinct clones reading at $read_rate B/s"
  fi
  taskset -c "$load_cpu" "$load" --port "$port" --heavy heavy.git --light light.git \
    --duration "$duration" --light-interval 2 --warmup 5 "${flags[@]}" \
    --client-header X-Client --server-pid "$pid" --work-dir "$work/clones" || true
  echo "git upload-pack runs for clones: $(( $(clone_starts) - starts_before ))"
  kill -TERM "$pid"; wait "$pid" || true; pid=
}

run alone
run beside
