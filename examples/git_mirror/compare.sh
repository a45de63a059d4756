#!/usr/bin/env bash
# The noisy-neighbour comparison of README.md, on this machine, on loopback only. Client A keeps
# 100, then 1,000 clones of a 64 MiB repository in flight (fairgate-git-mirror-load reads each
# pack to its end without unpacking it); client B clones a small repository with real git every
# 2 s. B's clone times under --policy fairgate and --policy fifo, and with A not running at all.
#
# The server runs on core 0 and the load (A's event loop and B's git) on core 1 (taskset), so
# that the load cannot starve the server of CPU; git processes the server starts inherit core 0.
#
#   bash examples/git_mirror/compare.sh [BUILD_DIR]        (default build/release)
# Knobs (environment): DURATION (s, default 60), CAPACITY (8), CONCURRENCY ("100 1000"),
# HEAVY_MIB (64), LIGHT_KIB (B's repository: 0, the default, is one line of text; else that many
# KiB of random bytes), SERVER_FLAGS (more flags for the server, e.g. "--pack-cache-bytes 0"),
# LOAD_FLAGS (flags for the load tool; default "--heavy-distinct": A's clones all differ, so none
# is shared or served from the cache and each takes a slot, as a thousand different clones would;
# LOAD_FLAGS= makes them identical; "--heavy-distinct --heavy-rate R" makes A an open loop of R
# clones a second, CONCURRENCY then naming the run only).
#
# Besides the load tool's figures (B's whole clone, as B's git saw it), each run prints B's server
# side: from the event log, the seconds from the server taking each of B's pack requests (before
# any wait for a slot) to its last byte handed to B's socket ("b_server_median_s",
# "b_server_worst_s", over the "b_server_sent" that were sent in time), how many were served
# from the pack cache ("b_hits"), and for those that ran git how long they waited for a slot
# ("b_slot_wait_median_s", "b_slot_wait_worst_s").
set -euo pipefail
build=${1:-build/release}
source "$(dirname "$0")/load_setup.sh"
duration=${DURATION:-60}
capacity=${CAPACITY:-8}
concurrency=${CONCURRENCY:-100 1000}
heavy_mib=${HEAVY_MIB:-64}
light_kib=${LIGHT_KIB:-0}
read -r -a server_flags <<<"${SERVER_FLAGS:-}"
read -r -a load_flags <<<"${LOAD_FLAGS---heavy-distinct}"

# heavy.git: HEAVY_MIB of incompressible files over 16 commits; light.git: one small file (and
# LIGHT_KIB of random bytes).
git init --quiet --initial-branch=main "$work/heavy.git"
for i in $(seq 16); do
  head -c $((heavy_mib * 1024 * 1024 / 16)) /dev/urandom > "$work/heavy.git/blob$i"
  git -C "$work/heavy.git" add . && git -C "$work/heavy.git" commit --quiet -m "c$i"
done
git -C "$work/heavy.git" repack -a -d -q
git init --quiet --initial-branch=main "$work/light.git"
echo light > "$work/light.git/README"
((light_kib > 0)) && head -c $((light_kib * 1024)) /dev/urandom > "$work/light.git/blob"
git -C "$work/light.git" add . && git -C "$work/light.git" commit --quiet -m c1

run() {  # run POLICY CONCURRENCY [--alone]
  local policy=$1 n=$2; shift 2
  rm -rf "$work/mirrors" "$work/out" "$work/clones" "$work/events"
  taskset -c "$server_cpu" "$server" --port 0 --policy "$policy" --capacity "$capacity" \
    --client-header X-Client --trusted-proxy 127.0.0.1 --max-pending-per-client 5000 \
    --fetch-interval 0 --mirror-dir "$work/mirrors" --event-log "$work/events" \
    --repo "heavy.git=$work/heavy.git" --repo "light.git=$work/light.git" \
    "${server_flags[@]}" >"$work/out" &
  pid=$!
  for _ in $(seq 200); do grep -q "listening on" "$work/out" && break; sleep 0.05; done
  local port
  port=$(sed -n 's/.*listening on http:[^ ]*:\([0-9]*\).*/\1/p' "$work/out")
  # Make both mirrors (and let fairgate learn each clone's cost) before measuring.
  git clone --quiet "http://127.0.0.1:$port/heavy.git" "$work/warm-heavy" && rm -rf "$work/warm-heavy"
  git clone --quiet "http://127.0.0.1:$port/light.git" "$work/warm-light" && rm -rf "$work/warm-light"
  # Only what happens from here on counts for B's server side.
  local warm_lines
  warm_lines=$(wc -l <"$work/events")
  echo "== $policy, A at $n clones in flight $* ${SERVER_FLAGS:-} ${load_flags[*]}"
  taskset -c "$load_cpu" "$load" --port "$port" --heavy heavy.git --light light.git \
    --heavy-concurrency "$n" --duration "$duration" --light-interval 2 --warmup 5 \
    --client-header X-Client --server-pid "$pid" --work-dir "$work/clones" "${load_flags[@]}" \
    "$@" || true
  kill -TERM "$pid"; wait "$pid" || true; pid=
  tail -n +$((warm_lines + 1)) "$work/events" | python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin]
b = [e for e in lines if e["client"] == "B" and e["type"] == "clone"]
sent = sorted(e["seconds"] for e in b if e["event"] == "sent")
pick = lambda q: sent[int(q * (len(sent) - 1) + 0.5)] if sent else float("nan")
print("b_server_sent: %d" % len(sent))
print("b_server_median_s: %.4f" % pick(0.5))
print("b_server_worst_s: %.4f" % pick(1.0))
print("b_hits: %d" % sum(e["event"] == "hit" for e in b))
waits = sorted(e["seconds"] for e in b if e["event"] == "start")
if waits:
    print("b_slot_wait_median_s: %.4f" % waits[int(0.5 * (len(waits) - 1) + 0.5)])
    print("b_slot_wait_worst_s: %.4f" % waits[-1])'
}

run fairgate 1 --alone
for n in $concurrency; do
  run fairgate "$n"
  run fifo "$n"
done
