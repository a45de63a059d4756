#!/usr/bin/env bash
# Every hostile and sloppy client at once against one mirror (defaults but the load's client
# header): client A as 1,000 distinct slow readers at 64 KiB/s and as 1,000 identical clones at
# full speed, and attacks.py's slowloris, idle connections, trickled bodies, gzip bombs, pipelined
# requests, rotating X-Forwarded-For names and /debug/ probes, while client B clones a small
# repository every 2 s with real git. Prints B's clone times, what each attack got, and the
# server's peak resident memory. On loopback only.
#
# The server runs on core 0 and every client on core 1 (taskset), so that the load cannot starve
# the server of CPU; git processes the server starts inherit core 0.
#
#   bash examples/git_mirror/all_attacks.sh [BUILD_DIR]     (default build/release)
# Knobs (environment): DURATION (s, default 60), HEAVY_MIB (2).
set -euo pipefail
build=${1:-build/release}
source "$(dirname "$0")/load_setup.sh"
duration=${DURATION:-60}
heavy_mib=${HEAVY_MIB:-2}

make_repositories "$work" "$heavy_mib"

# Client names come from X-Client on the load's own address (127.0.0.1) and from
# X-Forwarded-For through it; the attacks connect from 127.0.1.x, which nobody trusts and
# /debug/ does not answer.
start_mirror --client-header X-Client --trusted-proxy 127.0.0.1 --debug-allow 127.0.0.1/32 \
  --max-pending-per-client 5000

echo "== all at once for $duration s"
taskset -c "$load_cpu" python3 "$(dirname "$0")/attacks.py" --port "$port" --repo heavy.git \
  --duration "$duration" >"$work/attacks" 2>&1 &
attacks=$!
# A second load tool: A's identical clones at full speed (its B clones once, at the end of the
# warm-up, and is not reported).
taskset -c "$load_cpu" "$load" --port "$port" --heavy heavy.git --light light.git \
  --heavy-concurrency 1000 --duration "$duration" --warmup 5 --light-interval "$duration" \
  --work-dir "$work/clones-identical" >"$work/identical" 2>&1 &
identical=$!
taskset -c "$load_cpu" "$load" --port "$port" --heavy heavy.git --light light.git \
  --heavy-concurrency 1000 --heavy-read-rate 65536 --heavy-distinct --duration "$duration" \
  --light-interval 2 --warmup 5 --client-header X-Client --server-pid "$pid" \
  --work-dir "$work/clones" || true
wait "$attacks" "$identical" || true
echo "-- identical clones at full speed:"
grep -E "^a_" "$work/identical" || true
echo "-- attacks:"
cat "$work/attacks"
echo "-- server: $(grep -E "VmHWM|Threads" "/proc/$pid/status" | tr -s ' \t' ' ' | tr '\n' ' ')"
kill -TERM "$pid"; wait "$pid" || true; pid=
