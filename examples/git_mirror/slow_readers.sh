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

git init --quiet --initial-branch=main "$work/heavy.git"
head -c $((heavy_mib * 1024 * 1024)) /dev/urandom > "$work/heavy.git/blob"
git -C "$work/heavy.git" add . && git -C "$work/heavy.git" commit --quiet -m one
git init --quiet --initial-branch=main "$work/light.git"
echo light > "$work/light.git/README"
git -C "$work/light.git" add . && git -C "$work/light.git" commit --quiet -m one

clone_starts() {
  grep '"event":"start"' "$work/events" | grep -c '"type":"clone"' || true
}

run() {  # run alone|beside
  rm -rf "$work/mirrors" "$work/out" "$work/clones" "$work/events"
  taskset -c "$server_cpu" "$server" --port 0 --capacity "$capacity" \
    --client-header X-Client --trusted-proxy 127.0.0.1 --max-pending-per-client 5000 \
    --fetch-interval 0 --mirror-dir "$work/mirrors" --event-log "$work/events" \
    --repo "heavy.git=$work/heavy.git" --repo "light.git=$work/light.git" >"$work/out" &
  pid=$!
  for _ in $(seq 200); do grep -q "listening on" "$work/out" && break; sleep 0.05; done
  local port
  port=$(sed -n 's/.*listening on http:[^ ]*:\([0-9]*\).*/\1/p' "$work/out")
  git clone --quiet "http://127.0.0.1:$port/heavy.git" "$work/warm" && rm -rf "$work/warm"
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
