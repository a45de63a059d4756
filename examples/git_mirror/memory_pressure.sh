#!/usr/bin/env bash
# The mirror in a cgroup with a memory limit, with and without --memory-high (README.md, "More
# than it can serve"): while client B clones a small repository every 2 s (and client A, with
# CONCURRENCY, keeps clones of a large one in flight), a `git repack` of the mirror's copy,
# started in the same cgroup as the mirror's own repacks run, takes most of the limit. Each run
# prints the cap before the repack, the lowest cap while it ran and how long after the working
# set passed --memory-high the cap first fell, the highest share of the limit in use (the
# kernel's figure, page cache included, and the working set fairgate reads: less the inactive
# file cache), the OOM killer's kills in the cgroup, the repack's exit status and the clients'
# clones.
#
# Needs root and a cgroup memory controller it can write: cgroup v2 with memory among its root's
# controllers, or a v1 memory hierarchy (with the v2 one beside it on a hybrid machine, where the
# server also gets a v2 cgroup of its own so that its pressure files are its own). Without them it
# says so and exits 77. Opt-in: not part of the test suite.
#
#   sudo bash examples/git_mirror/memory_pressure.sh [BUILD_DIR]     (default build/release)
# Knobs (environment): LIMIT_MIB (the cgroup's limit, default 320: the repack's working set
# peaks near 270 MiB), MEMORY_HIGH (0.8), CAPACITY
# (8), CONCURRENCY (A's clones in flight; 0, the default: A does not run, as A's clones would
# move the cap by CPU pressure too and hide which signal moved it), READ_RATE (bytes a second each of A's clones reads
# its pack at, 4 MiB: live but slow readers, whose git processes wait on their sockets, so that
# CPU pressure leaves the cap alone and memory decides), REPACK_WINDOW (the repack's --window,
# 100). The repack runs on the load's core: the server's core stays the server's and its git's.
set -euo pipefail
build=${1:-build/release}
source "$(dirname "$0")/load_setup.sh"
limit_mib=${LIMIT_MIB:-320}
memory_high=${MEMORY_HIGH:-0.8}
capacity=${CAPACITY:-8}
concurrency=${CONCURRENCY:-0}
window=${REPACK_WINDOW:-100}
read_rate=${READ_RATE:-4194304}

cgroups=()
remove_cgroups() {
  cleanup
  for dir in "${cgroups[@]}"; do rmdir "$dir" 2>/dev/null || true; done
}
trap remove_cgroups EXIT
# Makes the cgroups of one run (named by `$1`); sets `procs` (the cgroup.procs files a process
# joins), `usage_file`, `stat_file`, `inactive_key` and `oom_kills` (a command).
make_cgroups() {
  local name=fairgate-memory-$$-$1
  procs=()
  if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    local dir=/sys/fs/cgroup/$name
    mkdir "$dir" && cgroups+=("$dir")
    echo $((limit_mib << 20)) >"$dir/memory.max"
    procs=("$dir/cgroup.procs")
    usage_file=$dir/memory.current stat_file=$dir/memory.stat inactive_key=inactive_file
    oom_kills() { awk '$1 == "oom_kill" { print $2 }' "${cgroups[-1]}/memory.events"; }
  elif [[ -w /sys/fs/cgroup/memory ]]; then
    local dir=/sys/fs/cgroup/memory/$name
    mkdir "$dir" && cgroups+=("$dir")
    echo $((limit_mib << 20)) >"$dir/memory.limit_in_bytes"
    procs=("$dir/cgroup.procs")
    usage_file=$dir/memory.usage_in_bytes stat_file=$dir/memory.stat
    inactive_key=total_inactive_file
    oom_dir=$dir
    oom_kills() { awk '$1 == "oom_kill" { print $2 }' "$oom_dir/memory.oom_control"; }
    if [[ -w /sys/fs/cgroup/unified ]]; then
      mkdir "/sys/fs/cgroup/unified/$name" && cgroups+=("/sys/fs/cgroup/unified/$name")
      procs+=("/sys/fs/cgroup/unified/$name/cgroup.procs")
    fi
  else
    echo "memory_pressure.sh: needs root and a writable cgroup memory controller" >&2
    exit 77
  fi
}
# Runs "$@" in the cgroups of `procs`.
in_cgroups() {
  sh -c 'for f in '"${procs[*]}"'; do echo $$ > "$f"; done; exec "$@"' sh "$@"
}

# heavy.git: 48 files of 2 MiB that differ in a few bytes each (a repack's delta search holds a
# window of them in memory), stored whole; light.git: one line.
git init --quiet --initial-branch=main "$work/heavy.git"
python3 - "$work/heavy.git" <<'EOF'
import random, sys
random.seed(1)
base = random.randbytes(2 << 20)
for i in range(48):
    b = bytearray(base)
    for _ in range(2000):
        b[random.randrange(len(b))] = random.getrandbits(8)
    open(f"{sys.argv[1]}/blob{i}", "wb").write(b)
EOF
git -C "$work/heavy.git" add . && git -C "$work/heavy.git" commit --quiet -m one
git init --quiet --initial-branch=main "$work/light.git"
echo light >"$work/light.git/README"
git -C "$work/light.git" add . && git -C "$work/light.git" commit --quiet -m one

run() {  # run NAME [server flags...]
  local name=$1; shift
  make_cgroups "$name"
  rm -rf "$work/mirrors" "$work/samples"
  # Twice: the first makes the mirrors (a CPU-bound clone of each, which lowers the cap by CPU
  # pressure, and nothing waits for it to grow back); the second starts with the cap at capacity.
  for start in making-mirrors measured; do
    rm -f "$work/out" "$work/events"
    in_cgroups taskset -c "$server_cpu" "$server" --port 0 --fetch-interval 0 \
      --mirror-dir "$work/mirrors" --event-log "$work/events" --capacity "$capacity" \
      --client-header X-Client --trusted-proxy 127.0.0.1 --max-pending-per-client 5000 \
      --repo "heavy.git=$work/heavy.git" --repo "light.git=$work/light.git" \
      --adaptive-capacity-min 1 "$@" >"$work/out" 2>&1 &
    pid=$!
    for _ in $(seq 200); do grep -q "listening on" "$work/out" && break; sleep 0.05; done
    port=$(sed -n 's/.*listening on http:[^ ]*:\([0-9]*\).*/\1/p' "$work/out")
    [[ -n $port ]] || { cat "$work/out" >&2; return 1; }
    [[ $start == measured ]] && break
    for repository in heavy light; do
      git clone --quiet "http://127.0.0.1:$port/$repository.git" "$work/warm"
      rm -rf "$work/warm"
    done
    kill -TERM "$pid"; wait "$pid" || true; pid=
  done
  echo "== $name: limit $limit_mib MiB, capacity $capacity, A at $concurrency clones in flight, $*"
  local a_flags=(--alone)
  ((concurrency > 0)) && a_flags=(--heavy-concurrency "$concurrency")
  taskset -c "$load_cpu" "$load" --port "$port" --heavy heavy.git --light light.git \
    "${a_flags[@]}" --duration 40 --light-interval 2 --warmup 5 \
    --client-header X-Client --work-dir "$work/clones" --heavy-distinct \
    --heavy-read-rate "$read_rate" >"$work/load" &
  local load_pid=$! repack_status=0
  # The cap and the memory, four times a second, from before the repack to the end of the load.
  (
    while kill -0 "$load_pid" 2>/dev/null; do
      cap=$(curl -s "http://127.0.0.1:$port/metrics" | awk '$1 == "fairgate_capacity" { print $2 }')
      used=$(cat "$usage_file")
      inactive=$(awk -v k="$inactive_key" '$1 == k { print $2 }' "$stat_file")
      echo "$(date +%s.%N) ${cap:-nan} $used ${inactive:-0}"
      sleep 0.25
    done
  ) >"$work/samples" &
  local sampler=$!
  sleep 10
  local repack_start
  repack_start=$(date +%s.%N)
  in_cgroups taskset -c "$load_cpu" git -C "$work/mirrors/heavy.git" repack -a -d -f -q \
    --window="$window" --depth=50 || repack_status=$?
  local repack_end
  repack_end=$(date +%s.%N)
  wait "$load_pid" || true
  wait "$sampler" || true
  kill -TERM "$pid"; wait "$pid" || true; pid=
  python3 - "$work/samples" "$repack_start" "$repack_end" "$((limit_mib << 20))" \
    "$memory_high" <<'EOF'
import sys
start, end, limit, high = (float(a) for a in sys.argv[2:6])
rows = [l.split() for l in open(sys.argv[1])]
rows = [(float(t), float(c), float(u), float(i)) for t, c, u, i in rows if c != "nan"]
before = [c for t, c, u, i in rows if t < start]
during = [r for r in rows if start <= r[0] <= end + 1]
print("cap_before_repack: %g" % (before[-1] if before else float("nan")))
print("lowest_cap_during_repack: %g" % min((c for t, c, u, i in during), default=float("nan")))
print("peak_use_share: %.2f" % max((u / limit for t, c, u, i in during), default=0))
print("peak_working_set_share: %.2f" % max(((u - i) / limit for t, c, u, i in during), default=0))
over = next((t for t, c, u, i in during if (u - i) / limit > high), None)
cap0 = before[-1] if before else None
fell = next((t for t, c, u, i in during if cap0 is not None and c < cap0), None)
print("working_set_over_%g_at_s: %s" % (high, "never" if over is None else "%.2f" % (over - start)))
print("cap_first_fell_at_s: %s" % ("never" if fell is None else "%.2f" % (fell - start)))
print("repack_seconds: %.1f" % (end - start))
EOF
  echo "oom_kills: $(oom_kills)"
  echo "repack_exit: $repack_status"
  grep -E "b_clones|b_failed|b_median_s|a_completed_clones|a_errors" "$work/load"
}

run without-memory-high
run with-memory-high --memory-high "$memory_high"
