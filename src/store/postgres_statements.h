// The PostgreSQL store's schema and statements (postgres_store.cc): the SQL text, with the macros
// its statements share (the server's clock, the fencing condition, the claim's candidates). Only
// text: nothing here talks to a server. Internal to src/store.
#ifndef FAIRGATE_STORE_POSTGRES_STATEMENTS_H_
#define FAIRGATE_STORE_POSTGRES_STATEMENTS_H_

namespace fairgate::store::postgres {

inline constexpr int kSchemaVersion = 2;

// Creates the schema once per database, under an advisory lock so that replicas starting
// together do not race.
inline constexpr const char* kSchema = R"sql(
SELECT pg_advisory_xact_lock(7271234501);
CREATE TABLE IF NOT EXISTS fairgate_schema (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS fairgate_durable_jobs (
  sequence bigserial PRIMARY KEY,
  type text NOT NULL,
  id text NOT NULL,
  fairness_key text NOT NULL,
  payload bytea NOT NULL,
  submitted_at double precision NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  not_before double precision NOT NULL DEFAULT 0,
  last_error text NOT NULL DEFAULT '',
  dead boolean NOT NULL DEFAULT false
);
ALTER TABLE fairgate_durable_jobs
  ADD COLUMN IF NOT EXISTS holder text,
  ADD COLUMN IF NOT EXISTS lease_until double precision,
  ADD COLUMN IF NOT EXISTS token bigint;
CREATE SEQUENCE IF NOT EXISTS fairgate_lease_tokens;
CREATE TABLE IF NOT EXISTS fairgate_resource_leases (
  grp text NOT NULL,
  id text NOT NULL,
  slot integer NOT NULL,
  holder text NOT NULL,
  lease_until double precision NOT NULL,
  token bigint NOT NULL,
  PRIMARY KEY (grp, id, slot)
);
CREATE INDEX IF NOT EXISTS fairgate_resource_leases_token ON fairgate_resource_leases (token);
CREATE INDEX IF NOT EXISTS fairgate_durable_jobs_holder
  ON fairgate_durable_jobs (holder) WHERE holder IS NOT NULL;
CREATE INDEX IF NOT EXISTS fairgate_durable_jobs_queue
  ON fairgate_durable_jobs (type, fairness_key, sequence) WHERE NOT dead;
CREATE TABLE IF NOT EXISTS fairgate_estimates (
  type text NOT NULL,
  id text NOT NULL,
  seconds double precision NOT NULL,
  last_used double precision NOT NULL,
  PRIMARY KEY (type, id)
);
CREATE TABLE IF NOT EXISTS fairgate_keys (
  key text PRIMARY KEY,
  accumulated_cost double precision NOT NULL,
  idle_since double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS fairgate_schedules (
  type text NOT NULL,
  id text NOT NULL,
  last_run_end double precision NOT NULL,
  PRIMARY KEY (type, id)
);
INSERT INTO fairgate_schema (version)
  SELECT 2 WHERE NOT EXISTS (SELECT 1 FROM fairgate_schema);
UPDATE fairgate_schema SET version = 2 WHERE version < 2;
)sql";

// The server's clock, Unix seconds: the time of leases.
#define FAIRGATE_PG_NOW "extract(epoch from clock_timestamp())::double precision"

// The channel on which storing a job, or giving one back, notifies every replica's listener.
#define FAIRGATE_PG_JOBS_CHANNEL "fairgate_jobs"

// A row whose lease this replica may act on: its token is the one given ($n), or none for a job
// this replica never claimed.
#define FAIRGATE_PG_FENCED(n) " AND token IS NOT DISTINCT FROM $" #n "::bigint"

// A claim reads O(keys + claim size) rows, neither every job nor every key's first $3: the order
// is (tier, key's cost, sequence), and the claim wants its first 2 x $3 claimable jobs (M).
// - heads: each wanted type's keys with claimable jobs, each with its first claimable job nobody
//   holds (its head), found by one walk of the (type, fairness_key, sequence) index, one descent
//   per key (a loose index scan);
// - placed: the keys with their tiers and their costs as flushed, in (tier, cost, head) order.
//   The head of the key in place p has the p - 1 earlier heads before it, so only the first M
//   keys can offer, the key in place p at most M - p + 1 jobs;
// - known / bound: each key's first ceil(M / keys) jobs, at least M in all; the M-th of them in
//   claim order bounds the answer (M jobs come at or before it), so a key of a later tier or cost
//   offers nothing, and one of its tier and cost only jobs up to its sequence. Keys of equal cost
//   (every new key) interleave by sequence; this bound keeps each to its share;
// - offered: the jobs each key may offer, within those bounds and at most $3, with the jobs whose
//   lease lapsed from the holder index (the two sets never meet: a lapsed job still names its
//   holder, and a job nobody holds has no lease), which come first;
// - ranked / picked: the first M in claim order, read again, and the first $3 of them that no
//   other claim is locking, locked.
// The answer is the same as ordering every claimable job (tests/postgres_store_test.cc's
// comparison); `EXPLAIN ANALYZE` on 20,000 jobs of 100 keys, claims of 23 / 64 / 128: 1.0 / 2.0 /
// 2.9 ms, where every key offering its first $3 took 5.9 / 9.5 / 14.2 (bench/HISTORY.md).
// The candidates of a claim, in one macro so that both claims below share it: $1 the types, $2
// their tiers, $3 how many to claim, `wall` the
// number of the parameter that is the replica's wall clock (a retry's backoff is in it), `wanted`
// the SQL of the wanted types (columns type and tier, and any that `claimable` reads), `claimable`
// a condition on a job `j` that every offered job meets besides being due and not held.
#define FAIRGATE_PG_CLAIM_CANDIDATES(wall, wanted, claimable)                            \
  "WITH RECURSIVE wanted AS (" wanted                                                    \
  "), "                                                                                  \
  "heads AS ("                                                                           \
  "  SELECT w.type, w.tier, f.key, f.head FROM wanted w CROSS JOIN LATERAL ("            \
  "    SELECT j.fairness_key AS key, j.sequence AS head FROM fairgate_durable_jobs j "   \
  "    WHERE j.type = w.type AND NOT j.dead AND j.not_before <= $" #wall                 \
  " AND j.holder IS NULL AND " claimable                                                 \
  "    ORDER BY j.fairness_key, j.sequence LIMIT 1) f "                                  \
  "  UNION ALL "                                                                         \
  "  SELECT k.type, k.tier, f.key, f.head FROM heads k CROSS JOIN LATERAL ("             \
  "    SELECT j.fairness_key AS key, j.sequence AS head FROM fairgate_durable_jobs j "   \
  "    WHERE j.type = k.type AND NOT j.dead AND j.fairness_key > k.key "                 \
  "      AND j.not_before <= $" #wall " AND j.holder IS NULL AND " claimable             \
  "    ORDER BY j.fairness_key, j.sequence LIMIT 1) f), "                                \
  "placed AS MATERIALIZED (SELECT h.*, coalesce(c.accumulated_cost, 0) AS cost, "        \
  "  row_number() OVER (ORDER BY h.tier DESC, coalesce(c.accumulated_cost, 0), h.head) " \
  "  AS place FROM heads h LEFT JOIN fairgate_keys c ON c.key = h.key), "                \
  "known AS (SELECT tier, cost, head AS sequence FROM placed UNION ALL "                 \
  "  SELECT p.tier, p.cost, c.sequence FROM placed p "                                   \
  "  CROSS JOIN LATERAL (SELECT j.sequence FROM fairgate_durable_jobs j "                \
  "    WHERE j.type = p.type AND j.fairness_key = p.key AND NOT j.dead "                 \
  "      AND j.sequence > p.head AND j.not_before <= $" #wall                            \
  " AND j.holder IS NULL AND " claimable                                                 \
  "    ORDER BY j.sequence "                                                             \
  "    LIMIT ceil(2.0 * $3 / (SELECT count(*) FROM placed))::int - 1) c), "              \
  "bound AS (SELECT tier, cost, sequence FROM known "                                    \
  "  ORDER BY tier DESC, cost, sequence OFFSET 2 * $3 - 1 LIMIT 1), "                    \
  "bounded AS (SELECT p.*, CASE WHEN b.tier = p.tier AND b.cost = p.cost "               \
  "  THEN b.sequence ELSE 9223372036854775807 END AS last FROM placed p "                \
  "  LEFT JOIN bound b ON true WHERE p.place <= 2 * $3 AND (b.tier IS NULL "             \
  "    OR p.tier > b.tier OR (p.tier = b.tier AND p.cost <= b.cost))), "                 \
  "offered AS ("                                                                         \
  "  SELECT c.sequence, p.tier, false AS lapsed, p.cost FROM bounded p "                 \
  "  CROSS JOIN LATERAL (SELECT j.sequence FROM fairgate_durable_jobs j "                \
  "    WHERE j.type = p.type AND j.fairness_key = p.key AND NOT j.dead "                 \
  "      AND j.sequence BETWEEN p.head AND p.last AND j.not_before <= $" #wall           \
  " AND j.holder IS NULL AND " claimable                                                 \
  "    ORDER BY j.sequence LIMIT least($3, 2 * $3 - p.place + 1)) c "                    \
  "  UNION ALL "                                                                         \
  "  SELECT j.sequence, w.tier, true, coalesce(c.accumulated_cost, 0) "                  \
  "  FROM fairgate_durable_jobs j JOIN wanted w ON w.type = j.type "                     \
  "  LEFT JOIN fairgate_keys c ON c.key = j.fairness_key "                               \
  "  WHERE j.holder IS NOT NULL AND j.lease_until < " FAIRGATE_PG_NOW                    \
  "    AND NOT j.dead AND j.not_before <= $" #wall " AND " claimable                     \
  "), "                                                                                  \
  "ranked AS MATERIALIZED (SELECT sequence, lapsed, tier, cost FROM offered "            \
  "  ORDER BY lapsed DESC, tier DESC, cost, sequence LIMIT 2 * $3), "                    \
  "picked AS (SELECT j.sequence, j.type, j.id, r.lapsed, r.tier, r.cost FROM ranked r "  \
  "  JOIN fairgate_durable_jobs j ON j.sequence = r.sequence "                           \
  "  WHERE NOT j.dead AND (j.lease_until IS NULL OR j.lease_until < " FAIRGATE_PG_NOW    \
  ") "                                                                                   \
  "  ORDER BY r.lapsed DESC, r.tier DESC, r.cost, j.sequence "                           \
  "  LIMIT $3 FOR UPDATE OF j SKIP LOCKED) "

// A claim counts the attempt its replica will begin (SharedStore::ClaimJobs): one more attempt in
// the row, and the count before it in what the claim returns.
#define FAIRGATE_PG_COUNT_ATTEMPT "attempts = j.attempts + 1 "

// A claim of jobs that take no lease: the candidates above, claimed in one statement with their
// attempts counted. $4 the replica, $5 the lease's length, $6 the wall clock.
inline constexpr const char* kClaim = FAIRGATE_PG_CLAIM_CANDIDATES(
    6, "SELECT * FROM unnest($1::text[], $2::int[]) AS w(type, tier)", "true")
    "UPDATE fairgate_durable_jobs j SET holder = $4, "
    "  lease_until = " FAIRGATE_PG_NOW
    " + $5, token = nextval('fairgate_lease_tokens'), " FAIRGATE_PG_COUNT_ATTEMPT
    "FROM picked WHERE j.sequence = picked.sequence "
    "RETURNING j.sequence, j.type, j.id, j.fairness_key, j.payload, j.submitted_at, "
    "  j.attempts - 1, j.not_before, j.last_error, j.token";

// Whether job `j` could take the leases its type needs now (ClaimableType): its resource
// ($5 the group, $6 its conflict limit; '' for none) and its type's fleet-wide cap ($7 slots; 0
// for none) each have a slot that no unexpired lease holds. A job that could not is not offered,
// so that however many of them come first in the fair order, a claim finds the claimable ones
// behind them.
#define FAIRGATE_PG_LEASES_FREE                                                              \
  "NOT EXISTS (SELECT 1 FROM wanted b WHERE b.type = j.type AND ("                           \
  "  (b.grp <> '' AND (SELECT count(*) FROM fairgate_resource_leases l WHERE l.grp = b.grp " \
  "    AND l.id = j.id AND l.lease_until >= " FAIRGATE_PG_NOW                                \
  ") >= b.lim) OR "                                                                          \
  "  (b.cap > 0 AND (SELECT count(*) FROM fairgate_resource_leases l WHERE l.grp = $8 "      \
  "    AND l.id = j.type AND l.lease_until >= " FAIRGATE_PG_NOW ") >= b.cap)))"

// The first step of a claim whose jobs take leases (ClaimableType): the candidates whose leases
// are free now, locked, in claim order, for the replica to choose among by the leases it can take
// (counted again there: a candidate's and another's may need the same last slot). $4 the wall
// clock, $5-$7 per type its conflict group, conflict limit and fleet cap, $8 the cap's group.
inline constexpr const char* kClaimCandidates = FAIRGATE_PG_CLAIM_CANDIDATES(
    4,
    "SELECT * FROM unnest($1::text[], $2::int[], $5::text[], $6::int[], $7::int[]) "
    "AS w(type, tier, grp, lim, cap)",
    FAIRGATE_PG_LEASES_FREE) "SELECT sequence, type, id FROM picked ORDER BY lapsed DESC, tier "
                             "DESC, cost, sequence";

// Takes one free slot of resource ($1, $2) of $4 slots for replica $3 for $5 seconds, a slot
// whose lease lapsed counting as free; its fencing token, or no row when every slot is held.
inline constexpr const char* kTakeSlot =
    "WITH free AS (SELECT s FROM generate_series(0, $4::int - 1) AS s "
    "  WHERE NOT EXISTS (SELECT 1 FROM fairgate_resource_leases l WHERE l.grp = $1 "
    "    AND l.id = $2 AND l.slot = s AND l.lease_until >= " FAIRGATE_PG_NOW
    ") "
    "  ORDER BY s LIMIT 1) "
    "INSERT INTO fairgate_resource_leases "
    "SELECT $1, $2, s, $3, " FAIRGATE_PG_NOW
    " + $5, nextval('fairgate_lease_tokens') FROM free "
    "ON CONFLICT (grp, id, slot) DO UPDATE SET holder = EXCLUDED.holder, "
    "  lease_until = EXCLUDED.lease_until, token = EXCLUDED.token "
    "  WHERE fairgate_resource_leases.lease_until < " FAIRGATE_PG_NOW " RETURNING token";

// Gives back the resource leases whose fencing tokens are in the array parameter `tokens`: a
// claim's, or those a claim took for a job it then dropped.
#define FAIRGATE_PG_DROP_LEASES_BY_TOKEN(tokens) \
  "DELETE FROM fairgate_resource_leases WHERE token = ANY(" tokens "::bigint[])"
inline constexpr const char* kDropLeasesByToken = FAIRGATE_PG_DROP_LEASES_BY_TOKEN("$1");

// How long the server lets a transaction of this store sit idle between statements.
inline constexpr const char* kIdleInTransaction = "SET idle_in_transaction_session_timeout = 1000";

inline constexpr const char* kJobColumns =
    "sequence, type, id, fairness_key, payload, submitted_at, attempts, not_before, last_error";

}  // namespace fairgate::store::postgres

#endif  // FAIRGATE_STORE_POSTGRES_STATEMENTS_H_
