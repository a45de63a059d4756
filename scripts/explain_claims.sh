#!/usr/bin/env bash
# EXPLAIN (ANALYZE, BUFFERS) of the first statement of a PostgreSQL claim whose jobs take leases
# (kClaimCandidates, src/store/postgres_statements.h): 20,000 "fetch" jobs on 400 repositories of
# one conflict group (limit 1), over 100 and then 10,000 keys whose costs are 0-3, for claims of
# 23, 64 and 128 jobs (their candidates: 4 x as many); each measured three times in a rolled-back
# transaction, the last printed. On a throwaway server (scripts/pg_temp.sh).
#
#   scripts/explain_claims.sh [REV ...]   # the statement as in each git revision (`work-tree`:
#                                         # as it is in the work tree; none: the work tree)
#
# CLAIM=plain measures instead the claim of jobs that take no lease (kClaim: one statement, its
# triggers included), of 100, 200 and 400 jobs (SIZES='...': others), over keys whose costs all
# differ (COSTS=equal: every key at cost 0, a fleet with no history, where a claim at 10,000 keys
# takes each job from a key of its own), five times each in one session, the median printed with
# the five, reading as many candidates as it claims (CANDIDATES=wide: twice as many;
# PostgresStore::ClaimJobs). HEADS=stale leaves the keys' heads with the statistics of their
# empty table (a server whose autovacuum has not analyzed them since the keys came), where by
# default every table is analyzed after filling.
# PGOPTIONS='-c plan_cache_mode=force_generic_plan -c enable_seqscan=off -c enable_bitmapscan=off'
# measures the plans the store runs both claims on instead: PostgreSQL's generic plans, reading by
# index scans (OnGenericIndexPlans, src/store/postgres_connection.h). The sessions
# run without JIT, as the store's do (kSessionSettings): a generic plan's estimates are higher, and
# with JIT on the server compiled the claim with leases for about 100 ms before each run.
# Each revision's statements are compiled into a small printer (g++, the repository's headers).
set -euo pipefail
case "${CLAIM:-leases}/${COSTS:-distinct}" in
  leases/distinct | plain/distinct | plain/equal) ;;
  *) echo "explain_claims.sh: CLAIM is leases or plain, COSTS (with CLAIM=plain) distinct or equal" >&2
     exit 2 ;;
esac
case "${HEADS:-fresh}/${CANDIDATES:-narrow}" in
  fresh/narrow | fresh/wide | stale/narrow | stale/wide) ;;
  *) echo "explain_claims.sh: HEADS is fresh or stale, CANDIDATES narrow or wide" >&2; exit 2 ;;
esac
read -r -a given_sizes <<<"${SIZES:-}"
for size in "${given_sizes[@]}"; do
  if [[ ! $size =~ ^[1-9][0-9]*$ ]]; then
    echo "explain_claims.sh: SIZES holds claim sizes (whole numbers from 1), not '$size'" >&2
    exit 2
  fi
done
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
chmod 755 "$work"  # the server runs as `postgres` when this runs as root
dir="$work/pg"
mkdir "$dir"
cleanup() {
  bash "$top/scripts/pg_temp.sh" stop "$dir" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
revisions=("$@")
if [[ ${#revisions[@]} -eq 0 ]]; then revisions=(work-tree); fi
cat >"$work/print.cc" <<'CC'
#include <cstdio>
#include STATEMENTS
int main(int, char** argv) {
  using namespace fairgate::store::postgres;
  std::puts(argv[1][0] == 's' ? kSchema : argv[1][0] == 'p' ? kClaim : kClaimCandidates);
}
CC
for rev in "${revisions[@]}"; do
  header="$work/$rev.h"
  if [[ $rev == work-tree ]]; then
    cp "$top/src/store/postgres_statements.h" "$header"
  else
    git -C "$top" show "$rev:src/store/postgres_statements.h" >"$header"
  fi
  g++ -std=c++20 -I"$top/src" -I"$top/include" -DSTATEMENTS="\"$header\"" "$work/print.cc" \
    -o "$work/print-$rev"
done
conn=$(bash "$top/scripts/pg_temp.sh" start "$dir" | tail -1)
export PGOPTIONS="-c jit=off ${PGOPTIONS:-}"
q() { psql "$conn" -X -q -v ON_ERROR_STOP=1 "$@"; }
"$work/print-${revisions[0]}" schema | q >/dev/null
claim=${CLAIM:-leases}
heads=${HEADS:-fresh}
if [[ $claim == plain ]]; then sizes=(100 200 400) rounds=5; else sizes=(23 64 128) rounds=3; fi
if [[ ${#given_sizes[@]} -gt 0 ]]; then sizes=("${given_sizes[@]}"); fi
for keys in 100 10000; do
  q -c "TRUNCATE fairgate_durable_jobs, fairgate_keys, fairgate_key_heads, fairgate_resource_leases"
  if [[ $heads == stale ]]; then q -c "ANALYZE fairgate_key_heads"; fi
  if [[ $claim == plain && ${COSTS:-distinct} == equal ]]; then
    :  # no key has a row: every key's cost is 0
  elif [[ $claim == plain ]]; then
    q -c "INSERT INTO fairgate_keys SELECT 'k' || k, k, 0 FROM generate_series(0, $keys - 1) k"
  else
    q -c "INSERT INTO fairgate_keys SELECT 'k' || k, k % 4, 0 FROM generate_series(0, $keys - 1) k"
  fi
  q -c "INSERT INTO fairgate_durable_jobs (type, id, fairness_key, payload, submitted_at)
        SELECT 'fetch', 'r' || (i % 400), 'k' || ((i * 7919) % $keys), '', 0
        FROM generate_series(1, 20000) i"
  if [[ $heads == stale ]]; then q -c "ANALYZE fairgate_durable_jobs"; else q -c "ANALYZE"; fi
  for rev in "${revisions[@]}"; do
    statement=$("$work/print-$rev" "$claim")
    for n in "${sizes[@]}"; do
      if [[ $claim == plain ]]; then
        arguments="'{fetch}', '{2}', $n, 'replica', 30, 1e10"
        # Since kClaim took its candidates' number ($7): as many as the claim (a replica claiming
        # alone; CANDIDATES=wide: twice as many, as after a claim that came back short).
        candidates=$n
        if [[ ${CANDIDATES:-narrow} == wide ]]; then candidates=$((2 * n)); fi
        if [[ $statement == *'$7'* ]]; then arguments+=", $candidates"; fi
      else
        arguments="'{fetch}', '{2}', $((4 * n)), 1e10, '{repo}', '{1}', '{0}', ''"
        if [[ $statement == *'$9'* ]]; then arguments+=", $((8 * n))"; fi
        # Since kClaimCandidates took whether each type's jobs are sure ($10): "fetch" is.
        if [[ $statement == *'$10'* ]]; then arguments+=", '{t}'"; fi
      fi
      if [[ $claim == plain ]]; then
        # One session, as a replica's pooled connection: the triggers' plans made once (a new
        # session makes them again, 2-4 ms of a claim), each claim rolled back and the jobs'
        # dead rows vacuumed before the next; timing off (only the whole is printed).
        session=(-c "PREPARE c AS $statement")
        for ((round = 0; round < rounds; ++round)); do
          session+=(-c "VACUUM fairgate_durable_jobs, fairgate_key_heads" -c "BEGIN"
            -c "EXPLAIN (ANALYZE, TIMING OFF) EXECUTE c($arguments)" -c "ROLLBACK")
        done
        times=($(q -t -A "${session[@]}" | sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p'))
        echo "$keys keys, $rev, claim of $n: median $(printf '%s\n' "${times[@]}" | sort -n |
          sed -n 3p) ms of $(printf '%s ' "${times[@]}")"
      else
        for ((round = 0; round < rounds; ++round)); do
          out=$(q -t -A -c "BEGIN" -c "PREPARE c AS $statement" \
            -c "EXPLAIN (ANALYZE, BUFFERS) EXECUTE c($arguments)" -c "ROLLBACK")
        done
        echo "$keys keys, $rev, claim of $n: $(echo "$out" | grep -E 'Planning Time|Execution Time' | tr '\n' ' ')"
      fi
    done
  done
done
