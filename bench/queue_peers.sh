#!/usr/bin/env bash
# fairgate's durable jobs side by side with graphile-worker 0.17 and pg-boss 10.4 (Node.js, from
# the npm registry) on one temporary PostgreSQL 15 server with fsync on (PostgreSQL's defaults),
# and fairgate on SQLite beside them: enqueue from 1 and 8 clients (fairgate's 8 also through one
# store), a batch of 1,000, 20,000 no-op jobs worked by one process at concurrency 8 and by two
# (of 100 clients; fairgate and graphile-worker also of 10,000, graphile-worker's as named
# queues; fairgate's clients at cost 0 and charged beforehand; fairgate's 10,000 against its 100
# in turns within one run), and enqueue-to-start on an idle system. Three interleaved rounds;
# prints every run, then the medians.
#
# Not part of the build or the tests: it needs Node.js and npm (the peers are installed into
# BUILD_DIR/queue_peers on first use). The server runs on core 0, every client on core 1.
#
#   bash bench/queue_peers.sh [BUILD_DIR]      (default build/release; ROUNDS=3)
set -euo pipefail
build=$(realpath "${1:-build/release}")
source_dir=$(realpath "$(dirname "$0")/..")
rounds=${ROUNDS:-3}
fleet=$build/bench/fleet_bench
durable=$build/bench/durable_bench
[[ -x $fleet && -x $durable ]] || { echo "build first: bash scripts/build.sh release" >&2; exit 2; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "needs node and npm" >&2; exit 2; }

peers=$build/queue_peers
if [[ ! -d $peers/node_modules/graphile-worker || ! -d $peers/node_modules/pg-boss ]]; then
  mkdir -p "$peers"
  npm install --prefix "$peers" --no-audit --no-fund --silent \
    graphile-worker@0.17.3 pg-boss@10.4.2 pg@8 >/dev/null
fi
export NODE_PATH=$peers/node_modules

work=$(mktemp -d)
chmod 755 "$work"
cleanup() {
  "$source_dir/scripts/pg_temp.sh" stop "$work" || true
  rm -rf "$work"
}
trap cleanup EXIT
conninfo=$(FAIRGATE_PG_FSYNC=on FAIRGATE_PG_CPUS=0 "$source_dir/scripts/pg_temp.sh" start "$work")
for db in fairgate graphile pgboss; do
  psql "$conninfo" -q -c "CREATE DATABASE $db" >/dev/null
done
fairgate_db="host=$work dbname=fairgate user=fairgate"
url() { echo "postgresql:///$1?host=$work&user=fairgate"; }

results=$work/results
: >"$results"
record() {  # record WORKLOAD SYSTEM VALUE
  echo "$1 | $2 | $3" | tee -a "$results"
}
# The items/s of a Google Benchmark row (its `items_per_second=` field), per second.
items() {
  grep -E "^$1 " | sed -n 's/.*items_per_second=\([0-9.]*\)\([kM]*\)\/s.*/\1 \2/p' |
    awk '{ m = $2 == "k" ? 1e3 : $2 == "M" ? 1e6 : 1; printf "%.0f", $1 * m }'
}
gbench() {  # gbench BINARY FILTER [ENV...]
  local binary=$1 filter=$2
  shift 2
  env "$@" taskset -c 1 "$binary" --benchmark_filter="$filter" --benchmark_min_time=3 2>/dev/null
}
peer() {  # peer SYSTEM COMMAND ARGS...
  local system=$1 command=$2
  shift 2
  taskset -c 1 node "$source_dir/bench/queue_peers/peers.cjs" "$command" "$system" \
    "$(url "$system")" "$@"
}

for round in $(seq "$rounds"); do
  echo "== round $round"
  out=$(gbench "$fleet" 'BM_AddJob/real_time/threads:(1|8)$|BM_AddJobSharedStore' \
    FAIRGATE_PG_CONNINFO="$fairgate_db")
  record "enqueue, 1 client" fairgate "$(items 'BM_AddJob/real_time/threads:1' <<<"$out")"
  # A store each (a connection each, as 8 processes would have), and 8 threads sharing one store
  # (as the peers' 8 clients share one pool of connections in one process).
  record "enqueue, 8 clients" fairgate "$(items 'BM_AddJob/real_time/threads:8' <<<"$out")"
  record "enqueue, 8 clients, one store" fairgate \
    "$(items 'BM_AddJobSharedStore/real_time/threads:8' <<<"$out")"
  for system in graphile pgboss; do
    record "enqueue, 1 client" "$system" "$(peer "$system" enqueue 1 3)"
    record "enqueue, 8 clients" "$system" "$(peer "$system" enqueue 8 3)"
  done
  out=$(gbench "$fleet" 'BM_AddJobs/batch:1000' FAIRGATE_PG_CONNINFO="$fairgate_db")
  record "enqueue, batch of 1,000" fairgate "$(items 'BM_AddJobs/batch:1000/real_time' <<<"$out")"
  for system in graphile pgboss; do
    record "enqueue, batch of 1,000" "$system" "$(peer "$system" batch 1000 3)"
  done
  # fairgate's clients at cost 0 (a fleet with no history: claims take the clients' jobs in their
  # order of arrival), and charged distinct costs beforehand (a fleet that has run a while: claims
  # take the cheapest client's jobs first).
  out=$(gbench "$fleet" 'BM_DurableWorked/' FAIRGATE_PG_CONNINFO="$fairgate_db")
  worked() {  # worked REPLICAS CLAIMED CLIENTS CHARGED
    items "BM_DurableWorked/replicas:$1/claimed:$2/clients:$3/charged:$4/iterations:1/manual_time" <<<"$out"
  }
  for replicas in 1 2; do
    record "20,000 worked, $replicas process(es), at cost 0" fairgate "$(worked "$replicas" 0 100 0)"
    record "20,000 worked, $replicas process(es), charged" fairgate "$(worked "$replicas" 0 100 1)"
    record "20,000 worked, $replicas process(es), claimed 64" fairgate "$(worked "$replicas" 64 100 0)"
  done
  record "20,000 worked, 1 process, 1 client" fairgate "$(worked 1 0 1 0)"
  record "20,000 worked, 1 process, 10,000 clients at cost 0" fairgate "$(worked 1 0 10000 0)"
  record "20,000 worked, 1 process, 10,000 clients charged" fairgate "$(worked 1 0 10000 1)"
  # 10,000 clients against 100 in turns within one run (BM_ManyClientsAgainstHundred, six
  # iterations of both): the ratio of the two rates, which the server's and the disk's drift
  # between two runs taken apart does not move.
  out=$(gbench "$fleet" 'BM_ManyClientsAgainstHundred/' FAIRGATE_PG_CONNINFO="$fairgate_db")
  for charged in 0 1; do
    label="at cost 0"
    [[ $charged == 1 ]] && label=charged
    record "10,000 clients over 100, in turns, $label" fairgate "$(grep -E \
      "^BM_ManyClientsAgainstHundred/clients:10000/charged:$charged/" <<<"$out" |
      sed -n 's/.*many_over_100=\([0-9.]*\).*/\1/p')"
  done
  for variant in plain fast; do
    record "20,000 worked, 1 process, 10,000 clients (named queues), $variant" graphile \
      "$(peer graphile work 20000 1 "$variant" 10000)"
  done
  for system in graphile pgboss; do
    for processes in 1 2; do
      for variant in plain fast; do
        # pg-boss taking one job per fetch runs about 16 a second (8 pollers, each fetching again
        # only after its polling interval of 0.5 s, its least): 1,000 jobs, not 20,000.
        jobs=20000
        [[ $system == pgboss && $variant == plain ]] && jobs=1000
        record "20,000 worked, $processes process(es), $variant" "$system" \
          "$(peer "$system" work "$jobs" "$processes" "$variant")"
      done
    done
  done
  out=$(gbench "$fleet" 'BM_EnqueueToStart' FAIRGATE_PG_CONNINFO="$fairgate_db")
  record "enqueue to start" fairgate "$(grep -E '^BM_EnqueueToStart' <<<"$out" |
    sed -n 's/.*\(cold_max_ms=[0-9.]*\).*\(p50_ms=[0-9.]*\).*\(p99_ms=[0-9.]*\).*/\2 \3 \1/p')"
  for system in graphile pgboss; do
    record "enqueue to start" "$system" "$(peer "$system" latency 100)"
  done
  # fairgate on SQLite (a file in /tmp, synchronous = FULL).
  out=$(gbench "$durable" 'BM_SubmitDurableConcurrently|BM_SubmitDurableBatch/batch:1000|BM_DurableThroughCompletion/submitters:./full:1')
  record "SQLite enqueue, 1 client" fairgate "$(items 'BM_SubmitDurableConcurrently/threads:1/full:1/real_time' <<<"$out")"
  record "SQLite enqueue, 8 clients" fairgate "$(items 'BM_SubmitDurableConcurrently/threads:8/full:1/real_time' <<<"$out")"
  record "SQLite batch of 1,000" fairgate "$(items 'BM_SubmitDurableBatch/batch:1000/full:1/real_time' <<<"$out")"
  record "SQLite end to end, 1 client" fairgate "$(items 'BM_DurableThroughCompletion/submitters:1/full:1/real_time' <<<"$out")"
  record "SQLite end to end, 8 clients" fairgate "$(items 'BM_DurableThroughCompletion/submitters:8/full:1/real_time' <<<"$out")"
done

echo "== medians of $rounds rounds"
python3 - "$results" <<'PY'
import collections, re, statistics, sys
rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    workload, system, value = [part.strip() for part in line.split("|", 2)]
    rows.setdefault((workload, system), []).append(value)
for (workload, system), values in rows.items():
    numbers = [re.findall(r"[-\d.]+", v) for v in values]
    if all(numbers) and len({len(n) for n in numbers}) == 1:
        medians = [statistics.median(float(n[i]) for n in numbers) for i in range(len(numbers[0]))]
        print(f"{workload} | {system} | {' / '.join(f'{m:g}' for m in medians)}   ({'; '.join(values)})")
    else:
        print(f"{workload} | {system} | {'; '.join(values)}")
PY
