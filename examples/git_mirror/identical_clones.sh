#!/usr/bin/env bash
# Client A as many concurrent identical clones of one repository (one commit), with packs shared
# and finished ones kept (--share-packs and --pack-cache-bytes, the defaults) and with neither
# (--no-share-packs): A's clones per second, git upload-pack runs (the event log's clone starts;
# each run is one pack-objects), and the server's CPU seconds per clone (its own and its git
# children's, from /proc). On loopback only.
#
# The server runs on core 0 and the load on core 1 (taskset), so that the load cannot starve the
# server of CPU; git processes the server starts inherit core 0.
#
#   bash examples/git_mirror/identical_clones.sh [BUILD_DIR]     (default build/release)
# Knobs (environment): DURATION (s, default 30), CAPACITY (8), CONCURRENCY (1000), HEAVY_MIB (16),
# MODES (the runs, default "--share-packs --no-share-packs").
set -euo pipefail
build=${1:-build/release}
source "$(dirname "$0")/load_setup.sh"
duration=${DURATION:-30}
capacity=${CAPACITY:-8}
concurrency=${CONCURRENCY:-1000}
heavy_mib=${HEAVY_MIB:-16}

make_repositories "$work" "$heavy_mib"

# CPU seconds of a process and its reaped children (utime, stime, cutime, cstime).
cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15 + $16 + $17) / hz }' "/proc/$1/stat"
}

run() {  # run SHARE_FLAG
  rm -rf "$work/clones"
  start_mirror --capacity "$capacity" "$1" \
    --client-header X-Client --trusted-proxy 127.0.0.1 --max-pending-per-client 5000
  local cpu_before starts_before busy_before
  cpu_before=$(cpu_seconds "$pid")
  busy_before=$(core_busy_seconds "$server_cpu")
  starts_before=$(clone_starts)
  echo "== $1, A at $concurrency identical clones in flight"
  taskset -c "$load_cpu" "$load" --port "$port" --heavy heavy.git --light light.git \
    --heavy-concurrency "$concurrency" --duration "$duration" --light-interval 2 --warmup 5 \
    --client-header X-Client --server-pid "$pid" --work-dir "$work/clones" | tee "$work/report" ||
    true
  local cpu_after starts_after busy_after
  cpu_after=$(cpu_seconds "$pid")
  busy_after=$(core_busy_seconds "$server_cpu")
  starts_after=$(clone_starts)
  echo "git upload-pack runs for clones: $((starts_after - starts_before)); server CPU seconds" \
    "(with git's): $(awk -v a="$cpu_before" -v b="$cpu_after" 'BEGIN { printf "%.1f", b - a }');" \
    "server core busy seconds: $(awk -v a="$busy_before" -v b="$busy_after" 'BEGIN { printf "%.1f", b - a }')"
  kill -TERM "$pid"; wait "$pid" || true; pid=
}

for mode in ${MODES:---share-packs --no-share-packs}; do run "$mode"; done
