#!/usr/bin/env bash
# Runs the fiber-callers stress case (issue 46) many times beside a CPU hog on every core, each
# run bounded, and counts the runs that hang. A run that has not ended within its limit is a hang:
# the script prints every thread's stack (gdb), then, for every futex the threads sleep on, the
# threads waiting there and the mutex owner's thread id (the word at offset 8 of a glibc mutex),
# marking an owner that is itself among the waiters (a lock held by a fiber that was suspended
# while it held it), and kills the run.
#
#   scripts/hang_hunt.sh [runs] [preset]    # defaults: 100 runs, release
#
# Environment: BIN (the test binary; default the preset's), FIBER_THREADS (the rounds' fiber
# threads, in turn; default "1 2 8"), SECONDS_PER_RUN (default 2), LIMIT (seconds before a run
# counts as hung; default 45), HOGS (CPU hog processes; default nproc), FILTER (the doctest case;
# default the stress case of issue 46).
# Exits 1 if any run hung or failed. Opt-in: not part of the test command.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-100}
preset=${2:-release}
bin=${BIN:-build/$preset/tests/fairgate_tests}
limit=${LIMIT:-45}
seconds=${SECONDS_PER_RUN:-2}
filter=${FILTER:-Stress.Runtime.FiberCallersUnderRotatingParentCancellationsNeverStopTheScheduler}
[[ -x $bin ]] || { echo "hang_hunt: $bin is not built (scripts/build.sh $preset)" >&2; exit 2; }
command -v gdb >/dev/null || { echo "hang_hunt: gdb is missing (apt-get install gdb)" >&2; exit 2; }

out=$(mktemp -d /tmp/hang_hunt.XXXXXX)
hogs=()
cleanup() {
  ((${#hogs[@]})) && kill "${hogs[@]}" 2>/dev/null
  [[ -n ${pid:-} ]] && kill -9 "$pid" 2>/dev/null
}
trap cleanup EXIT
for ((i = 0; i < ${HOGS:-$(nproc)}; i++)); do
  bash -c 'while :; do :; done' &
  hogs+=($!)
done

# For each thread asleep in a futex call (rdi: the futex's address), the address and the word at
# offset 8 (a glibc mutex's owner); grouped by address, owner marked when it waits there too.
cat >"$out/owners.py" <<'EOF'
import gdb
waits = {}
for thread in gdb.selected_inferior().threads():
    thread.switch()
    frame = gdb.newest_frame()
    lwp = thread.ptid[1]
    try:
        rax = int(frame.read_register("orig_rax"))
    except Exception:
        continue
    if rax != 202:  # futex
        continue
    addr = int(frame.read_register("rdi")) & 0xFFFFFFFFFFFFFFFF
    try:
        owner = int(gdb.parse_and_eval("*(int*)%d" % (addr + 8)))
    except Exception:
        owner = -1
    waits.setdefault(addr, {"owner": owner, "lwps": []})["lwps"].append(lwp)
for addr, w in sorted(waits.items(), key=lambda kv: -len(kv[1]["lwps"])):
    mark = " <- the owner waits on its own lock" if w["owner"] in w["lwps"] else ""
    print("futex 0x%x: %d waiters %s, owner word %d%s"
          % (addr, len(w["lwps"]), w["lwps"][:8], w["owner"], mark))
EOF

hangs=0
failures=0
rounds=(${FIBER_THREADS:-1 2 8})
for ((run = 1; run <= runs; run++)); do
  threads=${rounds[$(((run - 1) % ${#rounds[@]}))]}
  FAIRGATE_STRESS_SECONDS=$seconds FAIRGATE_STRESS_FIBER_THREADS=$threads \
    "$bin" -tc="$filter" >"$out/run.log" 2>&1 &
  pid=$!
  waited=0
  while kill -0 "$pid" 2>/dev/null && ((waited < limit * 10)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    hangs=$((hangs + 1))
    echo "== run $run ($threads fiber threads): HUNG after ${limit}s; stacks in $out/hang$run.txt"
    gdb -p "$pid" -batch -ex "thread apply all bt 30" -ex "source $out/owners.py" \
      >"$out/hang$run.txt" 2>&1
    grep "^futex" "$out/hang$run.txt" | head -5
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  elif ! wait "$pid"; then
    failures=$((failures + 1))
    echo "== run $run ($threads fiber threads): FAILED; log in $out/fail$run.txt"
    cp "$out/run.log" "$out/fail$run.txt"
  fi
  pid=
  ((run % 10 == 0)) && echo "runs $run: hangs $hangs, failures $failures"
done
echo "hang_hunt: $runs runs of $filter ($seconds s each, beside ${#hogs[@]} CPU hogs): $hangs hung, $failures failed"
((hangs == 0 && failures == 0))
