#!/usr/bin/env bash
# The git mirror's noisy neighbour against the Go front (this directory) and the C++ mirror
# (examples/git_mirror), with the same repositories, the same load and the same capacity: client
# A keeps CONCURRENCY clones of a HEAVY_MIB MiB repository in flight for DURATION seconds, client
# B clones a small one with real git every 2 s; B's clone times are printed for each server, and
# for B alone. Server on core 0, load on core 1 (load_setup.sh), loopback only.
#
#   bash go/fairgate/examples/mirror/compare.sh [BUILD_DIR]   # DURATION=30 CONCURRENCY=100
set -euo pipefail
build=$(cd "${1:-build/release}" && pwd)
source "$(dirname "$0")/../../../../examples/git_mirror/load_setup.sh"
duration=${DURATION:-30}
concurrency=${CONCURRENCY:-100}
capacity=${CAPACITY:-8}
make_repositories "$work" "${HEAVY_MIB:-16}"
git clone --quiet --bare "$work/heavy.git" "$work/heavy-bare.git"
git clone --quiet --bare "$work/light.git" "$work/light-bare.git"
front=$work/go-mirror
(cd "$(dirname "$0")" && CGO_CFLAGS="-I$PWD/../../../../include -I$build/include" \
  CGO_LDFLAGS="-L$build -Wl,-rpath,$build" go build -o "$front" .)

# measure NAME COMMAND...: starts the server, waits for its port, runs B alone once and then the
# load, and prints B's figures.
measure() {
  local name=$1; shift
  taskset -c "$server_cpu" "$@" >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 200); do grep -q "listening on" "$work/out" && break; sleep 0.05; done
  local port
  port=$(sed -n 's/.*listening on http:[^ ]*:\([0-9]*\).*/\1/p' "$work/out")
  git clone --quiet "http://127.0.0.1:$port/heavy.git" "$work/warm" && rm -rf "$work/warm"
  for mode in --alone ""; do
    echo "== $name, B ${mode:-beside A at $concurrency clones in flight}"
    rm -rf "$work/clones"
    taskset -c "$load_cpu" "$load" --port "$port" --heavy heavy.git --light light.git \
      --heavy-concurrency "$concurrency" --duration "$duration" --light-interval 2 --warmup 5 \
      --client-header X-Client --server-pid "$pid" --work-dir "$work/clones" --heavy-distinct \
      $mode | grep -E "^b_|^a_" || true
  done
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=
}

measure "Go front" "$front" -capacity "$capacity" -client-header X-Client \
  -repo "heavy.git=$work/heavy-bare.git" -repo "light.git=$work/light-bare.git"
measure "C++ mirror" "$server" --port 0 --policy fairgate --capacity "$capacity" \
  --client-header X-Client --trusted-proxy 127.0.0.1 --max-pending-per-client 5000 \
  --fetch-interval 0 --mirror-dir "$work/mirrors" \
  --repo "heavy.git=$work/heavy.git" --repo "light.git=$work/light.git"
