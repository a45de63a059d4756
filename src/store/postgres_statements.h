// The PostgreSQL store's schema and statements (postgres_store.cc): the SQL text, with the macros
// its statements share (the server's clock, the fencing condition, the claim's candidates). Only
// text: nothing here talks to a server. Internal to src/store.
#ifndef FAIRGATE_STORE_POSTGRES_STATEMENTS_H_
#define FAIRGATE_STORE_POSTGRES_STATEMENTS_H_

namespace fairgate::store::postgres {

inline constexpr int kSchemaVersion = 13;

// Creates the schema once per database, under an advisory lock so that replicas starting
// together do not race.
// Taken by every store that opens, for the transaction that reads and makes the schema.
inline constexpr const char* kSchemaLock = "SELECT pg_advisory_xact_lock(7271234501)";
// Whether the database has a schema, and its version.
inline constexpr const char* kSchemaExists = "SELECT to_regclass('fairgate_schema') IS NOT NULL";
inline constexpr const char* kSchemaVersionOf =
    "SELECT coalesce(max(version), 0) FROM fairgate_schema";

inline constexpr const char* kSchema = R"sql(
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
-- Version 3: each (type, key)'s first ready job (its head: not dead, held by nobody, never
-- deferred) with the key's cost, so that a claim reads the keys in claim order from one index
-- instead of every key (FAIRGATE_PG_CLAIM_CANDIDATES). Triggers keep it in the statements that
-- change jobs or keys' costs, under a lock per key (fairgate_lock_keys) that orders them.
CREATE TABLE IF NOT EXISTS fairgate_key_heads (
  fairness_key text NOT NULL,
  type text NOT NULL,
  head bigint NOT NULL,
  cost double precision NOT NULL,
  PRIMARY KEY (fairness_key, type)
);
CREATE INDEX IF NOT EXISTS fairgate_key_heads_order ON fairgate_key_heads (type, cost, head);
CREATE INDEX IF NOT EXISTS fairgate_durable_jobs_ready ON fairgate_durable_jobs
  (type, fairness_key, sequence) WHERE NOT dead AND holder IS NULL AND not_before = 0;
CREATE INDEX IF NOT EXISTS fairgate_durable_jobs_deferred ON fairgate_durable_jobs
  (type, not_before) WHERE NOT dead AND holder IS NULL AND not_before > 0;
-- Locks the keys for the transaction, in one order whoever takes them: a refresh of their heads,
-- a change of their costs and a store of their jobs (which takes them shared) never interleave
-- (each statement after it sees the other's commit). Version 6: a set of more than 1,000 keys
-- takes two locks that stand for every key instead of one lock a key: a server's lock table has
-- room for 64 locks a connection by default (max_locks_per_transaction), and a transaction that
-- locked 15,000 keys one by one failed "out of shared memory" (a replica sharing the costs of
-- that many keys charged in one claim interval). Every set takes (727124, 0) first: a large
-- exclusive set takes it alone, exclusively, and so waits for every other. A smaller set takes it
-- shared, then, if exclusive, (727124, 1) shared, then each key (727123, its hash) in the set's
-- mode. A large shared set (a store of many keys' jobs) takes (727124, 0) shared and (727124, 1)
-- exclusively: it waits for the small exclusive sets and the large sets, not for smaller stores.
-- A transaction takes its largest set first: one that holds a small set and then asks for a large
-- one waits for every other while some may wait for it (the server ends one as deadlocked), which
-- is why a flush locks every key it saves or forgets at once (PostgresStore::SaveLearned).
CREATE OR REPLACE FUNCTION fairgate_lock_key_set(keys text[], shared boolean) RETURNS void
LANGUAGE plpgsql AS $f$
DECLARE
  hashes integer[] := ARRAY(SELECT DISTINCT hashtext(k) FROM unnest(keys) AS k ORDER BY 1);
BEGIN
  IF cardinality(hashes) = 0 THEN
    RETURN;
  ELSIF cardinality(hashes) > 1000 AND NOT shared THEN
    PERFORM pg_advisory_xact_lock(727124, 0);
  ELSIF cardinality(hashes) > 1000 THEN
    PERFORM pg_advisory_xact_lock_shared(727124, 0);
    PERFORM pg_advisory_xact_lock(727124, 1);
  ELSIF shared THEN
    PERFORM pg_advisory_xact_lock_shared(727124, 0);
    PERFORM pg_advisory_xact_lock_shared(727123, h) FROM unnest(hashes) AS h;
  ELSE
    PERFORM pg_advisory_xact_lock_shared(727124, 0);
    PERFORM pg_advisory_xact_lock_shared(727124, 1);
    PERFORM pg_advisory_xact_lock(727123, h) FROM unnest(hashes) AS h;
  END IF;
END $f$;
CREATE OR REPLACE FUNCTION fairgate_lock_keys(keys text[]) RETURNS void LANGUAGE sql AS $f$
  SELECT fairgate_lock_key_set(keys, false)
$f$;
-- Recomputes the heads of the (type, key) pairs given: one statement, which moves a head, drops
-- the pair of a key with no ready job left and adds one that has one again.
CREATE OR REPLACE FUNCTION fairgate_refresh_heads(types text[], keys text[]) RETURNS void
LANGUAGE plpgsql AS $f$
BEGIN
  PERFORM fairgate_lock_keys(keys);
  WITH p AS (SELECT DISTINCT * FROM unnest(types, keys) AS u(type, key)),
  f AS (SELECT p.type, p.key, (SELECT j.sequence FROM fairgate_durable_jobs j
      WHERE j.type = p.type AND j.fairness_key = p.key AND NOT j.dead AND j.holder IS NULL
        AND j.not_before = 0 ORDER BY j.sequence LIMIT 1) AS head FROM p),
  gone AS (DELETE FROM fairgate_key_heads h USING f
    WHERE f.head IS NULL AND h.fairness_key = f.key AND h.type = f.type)
  INSERT INTO fairgate_key_heads (fairness_key, type, head, cost)
    SELECT f.key, f.type, f.head, coalesce(c.accumulated_cost, 0)
    FROM f LEFT JOIN fairgate_keys c ON c.key = f.key WHERE f.head IS NOT NULL
    ON CONFLICT (fairness_key, type) DO UPDATE SET head = EXCLUDED.head
      WHERE fairgate_key_heads.head <> EXCLUDED.head;
END $f$;
-- The jobs' trigger: the pairs of the rows stored, deleted, or whose readiness changed, each
-- refreshed once per statement (a purge of many jobs refreshes each key once). Jobs
-- stored can only lower a head (the least of the old head and theirs), without a recount.
CREATE OR REPLACE FUNCTION fairgate_jobs_changed() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  IF TG_OP = 'INSERT' THEN
    -- Stores share the keys' locks (they only lower heads, and commute); a pair whose head is
    -- already lower is left alone, without locking its row, so that stores to one key do not
    -- wait for each other's commits.
    PERFORM fairgate_lock_key_set(array_agg(fairness_key), true) FROM new_rows
      WHERE NOT dead AND holder IS NULL AND not_before = 0;
    INSERT INTO fairgate_key_heads (fairness_key, type, head, cost)
      SELECT n.key, n.type, n.head, coalesce(c.accumulated_cost, 0)
      FROM (SELECT fairness_key AS key, type, min(sequence) AS head FROM new_rows
            WHERE NOT dead AND holder IS NULL AND not_before = 0 GROUP BY 1, 2) n
      LEFT JOIN fairgate_keys c ON c.key = n.key
      WHERE NOT EXISTS (SELECT 1 FROM fairgate_key_heads h
        WHERE h.fairness_key = n.key AND h.type = n.type AND h.head < n.head)
      ON CONFLICT (fairness_key, type) DO UPDATE
        SET head = least(fairgate_key_heads.head, EXCLUDED.head);
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM fairgate_refresh_heads(array_agg(type), array_agg(fairness_key)) FROM
      (SELECT DISTINCT type, fairness_key FROM old_rows WHERE NOT dead AND holder IS NULL
         AND not_before = 0) p HAVING count(*) > 0;
  ELSE
    -- The rows whose pair or readiness changed, the old pair and the new, found by set
    -- differences (hashed or sorted), not by joining the two transition tables: the planner
    -- takes each for one row and may join them by a nested loop, quadratic in the rows (the
    -- keys' trigger did: one statement saving 20,000 keys' costs compared 400 million pairs).
    PERFORM fairgate_refresh_heads(array_agg(type), array_agg(fairness_key)) FROM
      (WITH n AS (SELECT sequence, type, fairness_key,
          NOT dead AND holder IS NULL AND not_before = 0 AS ready FROM new_rows),
        o AS (SELECT sequence, type, fairness_key,
          NOT dead AND holder IS NULL AND not_before = 0 AS ready FROM old_rows)
       SELECT DISTINCT type, fairness_key FROM ((SELECT * FROM n EXCEPT SELECT * FROM o)
         UNION ALL (SELECT * FROM o EXCEPT SELECT * FROM n)) d) p HAVING count(*) > 0;
  END IF;
  RETURN NULL;
END $f$;
-- Emptied tables (TRUNCATE fires no row trigger): no heads, or no costs.
CREATE OR REPLACE FUNCTION fairgate_jobs_truncated() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  DELETE FROM fairgate_key_heads;
  RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION fairgate_keys_truncated() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE fairgate_key_heads SET cost = 0 WHERE cost <> 0;
  RETURN NULL;
END $f$;
-- The keys' trigger: the heads of the keys whose costs changed take their new costs.
CREATE OR REPLACE FUNCTION fairgate_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
  changed text[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(key) INTO changed FROM new_rows;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(key) INTO changed FROM old_rows;
  ELSE
    -- A set difference, not a join of the transition tables (see fairgate_jobs_changed).
    SELECT array_agg(key) INTO changed FROM (SELECT key, accumulated_cost FROM new_rows
      EXCEPT SELECT key, accumulated_cost FROM old_rows) d;
  END IF;
  IF changed IS NULL THEN RETURN NULL; END IF;
  PERFORM fairgate_lock_keys(changed);
  UPDATE fairgate_key_heads h SET cost = coalesce(c.accumulated_cost, 0)
    FROM unnest(changed) AS k(key) LEFT JOIN fairgate_keys c ON c.key = k.key
    WHERE h.fairness_key = k.key;
  RETURN NULL;
END $f$;
CREATE OR REPLACE TRIGGER fairgate_jobs_stored AFTER INSERT ON fairgate_durable_jobs
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION fairgate_jobs_changed();
CREATE OR REPLACE TRIGGER fairgate_jobs_updated AFTER UPDATE ON fairgate_durable_jobs
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION fairgate_jobs_changed();
CREATE OR REPLACE TRIGGER fairgate_jobs_deleted AFTER DELETE ON fairgate_durable_jobs
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION fairgate_jobs_changed();
CREATE OR REPLACE TRIGGER fairgate_jobs_truncated AFTER TRUNCATE ON fairgate_durable_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION fairgate_jobs_truncated();
CREATE OR REPLACE TRIGGER fairgate_keys_truncated AFTER TRUNCATE ON fairgate_keys
  FOR EACH STATEMENT EXECUTE FUNCTION fairgate_keys_truncated();
CREATE OR REPLACE TRIGGER fairgate_keys_stored AFTER INSERT ON fairgate_keys
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION fairgate_keys_changed();
CREATE OR REPLACE TRIGGER fairgate_keys_updated AFTER UPDATE ON fairgate_keys
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION fairgate_keys_changed();
CREATE OR REPLACE TRIGGER fairgate_keys_deleted AFTER DELETE ON fairgate_keys
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION fairgate_keys_changed();
-- A database of an earlier version: the heads of the jobs it has.
INSERT INTO fairgate_key_heads (fairness_key, type, head, cost)
  SELECT j.fairness_key, j.type, min(j.sequence), coalesce(min(c.accumulated_cost), 0)
  FROM fairgate_durable_jobs j LEFT JOIN fairgate_keys c ON c.key = j.fairness_key
  WHERE NOT j.dead AND j.holder IS NULL AND j.not_before = 0
    AND EXISTS (SELECT 1 FROM fairgate_schema WHERE version < 3)
  GROUP BY j.fairness_key, j.type
  ON CONFLICT DO NOTHING;
-- Version 4: the fleet's rate limits' buckets (SharedStore::TakeTokens): the tokens the last
-- take left, when (the server's clock, Unix seconds), how many it took, and when the bucket is
-- full again (a full bucket's row is as good as none: the sweep deletes it).
CREATE TABLE IF NOT EXISTS fairgate_rate_buckets (
  name text PRIMARY KEY,
  tokens double precision NOT NULL,
  at double precision NOT NULL,
  taken integer NOT NULL DEFAULT 0,
  full_at double precision NOT NULL DEFAULT 0
);
-- Version 5: groups of keys' costs summed over the fleet (SharedStore::ShareGroupCosts), as
-- fairgate_keys holds keys'.
CREATE TABLE IF NOT EXISTS fairgate_groups (
  name text PRIMARY KEY,
  accumulated_cost double precision NOT NULL,
  idle_since double precision NOT NULL
);
-- Version 7: the replicas that wait for jobs (their last claim came back short), each with when
-- it last said so (`seen`, the server's clock, Unix seconds). Storing jobs notifies the replicas'
-- listeners only while one waits, seen within the last minute (fairgate_notify_waiting):
-- PostgreSQL commits notifying transactions one at a time over the whole server, so 8 producers
-- notifying at every store committed about as many jobs a second as one. The producers take
-- (727125, 1) shared before they look; a replica that begins to wait takes it exclusively once its
-- row is committed, and claims after that (PostgresStore::WaitForJobs): a job is then either in
-- that claim (its producer, holding the lock, had to commit first) or stored by a transaction
-- that looked after the row was there, and notified. In a function of its own, declared
-- VOLATILE, so that its look takes a snapshot after the lock, not the calling statement's.
CREATE TABLE IF NOT EXISTS fairgate_waiting (
  replica text PRIMARY KEY,
  seen double precision NOT NULL
);
CREATE OR REPLACE FUNCTION fairgate_notify_waiting() RETURNS void
LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(727125, 1);
  IF EXISTS (SELECT 1 FROM fairgate_waiting
             WHERE seen > extract(epoch from clock_timestamp()) - 60) THEN
    PERFORM pg_notify('fairgate_jobs', '');
  END IF;
END $f$;
-- Version 8: the dead jobs by sequence, so that a page of them (PostgresStore::DeadJobsAfter) or
-- their count reads them only, not every live job's row too (a live job's writes do not touch
-- it).
CREATE INDEX IF NOT EXISTS fairgate_durable_jobs_dead ON fairgate_durable_jobs (sequence)
  WHERE dead;
-- Version 9: each stored job marked with a number its store chose for it before sending the
-- statement that stored it, so that after a connection broke before that statement's reply the
-- store can tell whether it committed (PostgresStore::StoreOnce). Not indexed: looked up only
-- then. NULL in the rows of earlier versions.
ALTER TABLE fairgate_durable_jobs ADD COLUMN IF NOT EXISTS stored_by bigint;
-- Version 10: the same for a resource's lease taken by AcquireResource (kTakeSlot), so that its
-- store can tell whether a take whose reply was lost took a slot. NULL for a claim's.
ALTER TABLE fairgate_resource_leases ADD COLUMN IF NOT EXISTS taken_by bigint;
-- Version 11: no index of every live job by (type, key, sequence). The first claims read each
-- key's first jobs from it; since version 3 a claim reads the ready jobs' index and the heads
-- instead, and nothing read it, yet it was one of the three index entries that every job stored
-- and every row a claim updated wrote.
DROP INDEX IF EXISTS fairgate_durable_jobs_queue;
-- Version 12: every text column compared bytewise (COLLATE "C"), whatever the database's
-- collation. fairgate only looks names up and orders them among its own statements, never for a
-- reader, so a linguistic order bought nothing: under a database's ICU en-US collation its
-- comparisons cost 10,000 clients' jobs a sixth of their rate (bench/HISTORY.md), and its
-- indexes would have to be rebuilt whenever the system's collation library changed its order.
-- A collation alone changes no row: the indexes on these columns are rebuilt, the tables are not.
ALTER TABLE fairgate_durable_jobs ALTER COLUMN type TYPE text COLLATE "C",
  ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN fairness_key TYPE text COLLATE "C",
  ALTER COLUMN last_error TYPE text COLLATE "C", ALTER COLUMN holder TYPE text COLLATE "C";
ALTER TABLE fairgate_resource_leases ALTER COLUMN grp TYPE text COLLATE "C",
  ALTER COLUMN id TYPE text COLLATE "C", ALTER COLUMN holder TYPE text COLLATE "C";
ALTER TABLE fairgate_estimates ALTER COLUMN type TYPE text COLLATE "C",
  ALTER COLUMN id TYPE text COLLATE "C";
ALTER TABLE fairgate_keys ALTER COLUMN key TYPE text COLLATE "C";
ALTER TABLE fairgate_schedules ALTER COLUMN type TYPE text COLLATE "C",
  ALTER COLUMN id TYPE text COLLATE "C";
ALTER TABLE fairgate_key_heads ALTER COLUMN fairness_key TYPE text COLLATE "C",
  ALTER COLUMN type TYPE text COLLATE "C";
ALTER TABLE fairgate_rate_buckets ALTER COLUMN name TYPE text COLLATE "C";
ALTER TABLE fairgate_groups ALTER COLUMN name TYPE text COLLATE "C";
ALTER TABLE fairgate_waiting ALTER COLUMN replica TYPE text COLLATE "C";
-- Changing a column's type drops its statistics: a database migrated from an earlier version is
-- analyzed again here, so that the plans made after the migration do not wait for autovacuum's
-- next analyze (which a quiet table may not have for days). A new database has nothing to
-- analyze (its version is written below).
DO $f$ BEGIN
  IF EXISTS (SELECT 1 FROM fairgate_schema WHERE version < 12) THEN
    ANALYZE fairgate_durable_jobs, fairgate_resource_leases, fairgate_estimates, fairgate_keys,
      fairgate_schedules, fairgate_key_heads, fairgate_rate_buckets, fairgate_groups,
      fairgate_waiting;
  END IF;
END $f$;
-- Version 13: the tables whose rows every job, claim or cost share changes are vacuumed by
-- autovacuum once 1,000 of their rows are dead, whatever their size, and at full speed (no cost
-- delay). Each job leaves dead rows in the jobs' table and, at 10,000 clients, in the heads', and
-- every claim reads past their index entries until a vacuum. With the server's defaults (a fifth
-- of a table dead, a vacuum paced by 2 ms pauses) the jobs' table grew to 400-600 MB in two
-- minutes of 16,000-26,000 jobs a second with 4,000 of them live, and 10,000 clients' rate fell
-- from 17-19 k to 15.6 k jobs a second; with these, 335 MB and 16.5 k (bench/README.md,
-- BM_DurableSteady). A large table is vacuumed as soon as a small one is. Autovacuum still comes
-- at most once a minute (the server's autovacuum_naptime). A database migrated from an earlier
-- version takes these settings too, replacing any the tables had.
DO $f$
DECLARE
  churned text;
BEGIN
  FOREACH churned IN ARRAY ARRAY['fairgate_durable_jobs', 'fairgate_key_heads', 'fairgate_keys',
      'fairgate_groups', 'fairgate_resource_leases', 'fairgate_rate_buckets'] LOOP
    EXECUTE format('ALTER TABLE %I SET (autovacuum_vacuum_scale_factor = 0, '
      'autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0)', churned);
  END LOOP;
END $f$;
INSERT INTO fairgate_schema (version)
  SELECT 13 WHERE NOT EXISTS (SELECT 1 FROM fairgate_schema);
UPDATE fairgate_schema SET version = 13 WHERE version < 13;
)sql";

// A replica that waits for jobs (WaitForJobs), in fairgate_waiting: says so, or again ($1 its
// name); then waits for the stores that looked before its row was there
// (kWaitForEarlierStores); then stops waiting (kDeleteWaitingRow).
inline constexpr const char* kWriteWaitingRow =
    "INSERT INTO fairgate_waiting (replica, seen) VALUES ($1, "
    "extract(epoch from clock_timestamp())) ON CONFLICT (replica) DO UPDATE SET seen = "
    "EXCLUDED.seen";
inline constexpr const char* kWaitForEarlierStores = "SELECT pg_advisory_xact_lock(727125, 1)";
inline constexpr const char* kDeleteWaitingRow = "DELETE FROM fairgate_waiting WHERE replica = $1";

// The server's clock, Unix seconds: the time of leases.
#define FAIRGATE_PG_NOW "extract(epoch from clock_timestamp())::double precision"

// The channel on which storing a job, giving one back or giving back a lease notifies every
// replica's listener, while a replica waits for jobs (fairgate_notify_waiting, whose text names
// it too).
#define FAIRGATE_PG_JOBS_CHANNEL "fairgate_jobs"

// A row whose lease this replica may act on: its token is the one given ($n), or none for a job
// this replica never claimed.
#define FAIRGATE_PG_FENCED(n) " AND token IS NOT DISTINCT FROM $" #n "::bigint"

// Parameter number `n` of a statement, as SQL.
#define FAIRGATE_PG_PARAM(n) "$" #n

// The jobs that the claim's `known` reads of placed key `p` (FAIRGATE_PG_CLAIM_CANDIDATES): its
// head, then its next ceil(M / (group x keys of the group)) - 1 jobs that are `ready`, in sequence
// order. M the parameter numbered `m`.
#define FAIRGATE_PG_KNOWN_JOBS(m, ready) \
  "CROSS JOIN LATERAL (SELECT p.head AS sequence UNION ALL ("                       \
  "  SELECT j.sequence FROM fairgate_durable_jobs j "                               \
  "  WHERE j.type = p.type AND j.fairness_key = p.key AND NOT j.dead "              \
  "    AND j.sequence > p.head AND " ready                                          \
  "  ORDER BY j.sequence LIMIT ceil(" FAIRGATE_PG_PARAM(m) "::numeric "             \
  "    / (p.grp * p.grp_keys))::int - 1)) c "

// The candidates of a claim: its first M claimable jobs in claim order (M the parameter numbered
// `m`, at least $3), (tier, key's cost, sequence), each key's jobs in sequence order from its head
// (its first claimable job).
// - keyed: each wanted type's keys with claimable jobs, with their heads and costs (`keyed`, one
//   of the two below);
// - placed: those keys in (tier, cost, head) order. The head of the key in place p has the p - 1
//   earlier heads before it, so only the first M keys can offer, the key in place p at most
//   M - p + 1 jobs;
// - streamed / cut / known / bound: the first jobs of the placed keys, at least M in all; the M-th
//   of them in claim order bounds the answer (M jobs come at or before it), so a key of a later
//   tier or cost offers nothing, and one of its tier and cost only jobs up to its sequence. Keys of
//   equal cost (every new key) interleave by sequence; this bound keeps each to its share. The g-th
//   group of keys of one tier and cost, of n keys, reads ceil(M / (g n)) jobs of each (its head and
//   FAIRGATE_PG_KNOWN_JOBS): M for the first group, M / 2 for the second..., so that where the
//   keys' costs differ (clients charged different amounts) the bound falls in the first groups, not
//   after every key (at 100 keys of distinct costs, 200 jobs each, a claim of 400 offered 19,808
//   jobs with ceil(M / keys) each, 800 now). The keys are read in place order and the reading stops
//   at M jobs (`streamed`, the LIMIT stopping the loop over the keys), in the group of the key it
//   stopped at (`cut`), whose keys from that one on are read whole again (the one it stopped at may
//   have been cut short): every job of a later group comes after every job of that group, so the
//   M-th job of what is read is the one reading every key would find (where it stops changes only
//   how much is read: any M jobs read bound the answer), and at most M plus that group's share
//   (M / g) is read, not M (1 + 1/2 + ... + 1/groups): at 100 keys of distinct costs a claim of
//   256 read 256 jobs of 2 keys, not 1,319 of 100 (a claim with leases of 4,000 candidates 4,200,
//   not 10,394). The bound is materialized: each placed key reads it, and a plan that took the keys
//   for one row (the heads' statistics of a table still empty) read the sorted `known` again up to
//   the bound's place for each key: at 100 keys a claim of 400 took 21 ms, 16 ms with the bound
//   read once (scripts/explain_claims.sh, CLAIM=plain HEADS=stale);
// - offered: the jobs each key may offer, within those bounds and at most `per_key` (SQL: $3,
//   as many as a claim takes, when `pool` keeps every candidate), with the jobs whose
//   lease lapsed from the holder index (the two sets never meet: a lapsed job still names its
//   holder, and a job nobody holds has no lease), which come first, and `more` (SQL of further
//   offered rows, or nothing);
// - ranked / pool / picked: the first M in claim order, read again, those of them that may be
//   claimed (`pool`, the SQL of a CTE of that name over `ranked`: all, or fewer), and the first $3
//   of those that no other claim is locking, locked: the rest for replicas claiming at once.
// The answer is the same as ordering every claimable job (tests/postgres_store_test.cc's
// comparison). $1 the types, $2 their tiers, $3 how many to claim, `wall` the number of the
// parameter that is the replica's wall clock (a retry's backoff is in it), `wanted` the SQL of
// the wanted types (columns type and tier, and any that `claimable` reads), `ready` the condition
// on a job `j` of a key's sequence of claimable jobs (its head's too) besides not being dead, and
// `claimable` one that every offered job meets besides being due and not held.
#define FAIRGATE_PG_CLAIM_CANDIDATES(m, wall, wanted, keyed, ready, claimable, more, pool, \
                                     per_key)                                              \
  "WITH RECURSIVE wanted AS (" wanted "), " keyed                                       \
  "placed AS MATERIALIZED (SELECT k.*, "                                                \
  "  row_number() OVER (ORDER BY k.tier DESC, k.cost, k.head) AS place, "               \
  "  dense_rank() OVER (ORDER BY k.tier DESC, k.cost) AS grp, "                         \
  "  count(*) OVER (PARTITION BY k.tier, k.cost) AS grp_keys FROM keyed k), "           \
  "streamed AS MATERIALIZED (SELECT p.place, p.grp, p.tier, p.cost, c.sequence "      \
  "  FROM (SELECT * FROM placed ORDER BY place) p "                                     \
  FAIRGATE_PG_KNOWN_JOBS(m, ready) " LIMIT " FAIRGATE_PG_PARAM(m) "), "                 \
  "cut AS (SELECT max(place) AS place, max(grp) AS grp FROM streamed), "               \
  "known AS (SELECT s.tier, s.cost, s.sequence FROM streamed s JOIN cut e "            \
  "  ON s.place < e.place UNION ALL "                                                   \
  "  SELECT p.tier, p.cost, c.sequence FROM cut e JOIN placed p "                      \
  "  ON p.grp = e.grp AND p.place >= e.place " FAIRGATE_PG_KNOWN_JOBS(m, ready) "), "   \
  "bound AS MATERIALIZED (SELECT tier, cost, sequence FROM known "                      \
  "  ORDER BY tier DESC, cost, sequence "                                              \
  "  OFFSET " FAIRGATE_PG_PARAM(m) "::int - 1 LIMIT 1), "                              \
  "bounded AS (SELECT p.*, CASE WHEN b.tier = p.tier AND b.cost = p.cost "              \
  "  THEN b.sequence ELSE 9223372036854775807 END AS last FROM placed p "               \
  "  LEFT JOIN bound b ON true "                                                       \
  "  WHERE p.place <= " FAIRGATE_PG_PARAM(m) " AND (b.tier IS NULL "                   \
  "    OR p.tier > b.tier OR (p.tier = b.tier AND p.cost <= b.cost))), "                \
  "offered AS ("                                                                        \
  "  SELECT c.sequence, p.tier, false AS lapsed, p.cost, p.type, c.id FROM bounded p "  \
  "  CROSS JOIN LATERAL (SELECT j.sequence, j.id FROM fairgate_durable_jobs j "         \
  "    WHERE j.type = p.type AND j.fairness_key = p.key AND NOT j.dead "                \
  "      AND j.sequence BETWEEN p.head AND p.last AND " ready                           \
  "    ORDER BY j.sequence "                                                           \
  "    LIMIT least(" per_key ", " FAIRGATE_PG_PARAM(m) "::int - p.place + 1)) c "      \
  "  UNION ALL "                                                                        \
  "  SELECT j.sequence, w.tier, true, coalesce(c.accumulated_cost, 0), j.type, j.id "   \
  "  FROM fairgate_durable_jobs j JOIN wanted w ON w.type = j.type "                    \
  "  LEFT JOIN fairgate_keys c ON c.key = j.fairness_key "                              \
  "  WHERE j.holder IS NOT NULL AND j.lease_until < " FAIRGATE_PG_NOW                   \
  "    AND NOT j.dead AND j.not_before <= $" #wall " AND " claimable more               \
  "), "                                                                                 \
  "ranked AS MATERIALIZED (SELECT sequence, lapsed, tier, cost, type, id FROM offered " \
  "  ORDER BY lapsed DESC, tier DESC, cost, sequence "                                 \
  "  LIMIT " FAIRGATE_PG_PARAM(m) "), " pool                                            \
  "picked AS (SELECT j.sequence, j.type, j.id, r.lapsed, r.tier, r.cost FROM pool r "   \
  "  JOIN fairgate_durable_jobs j ON j.sequence = r.sequence "                          \
  "  WHERE NOT j.dead AND (j.lease_until IS NULL OR j.lease_until < " FAIRGATE_PG_NOW   \
  ") "                                                                                  \
  "  ORDER BY r.lapsed DESC, r.tier DESC, r.cost, j.sequence "                          \
  "  LIMIT $3 FOR UPDATE OF j SKIP LOCKED) "

// A claim counts the attempt its replica will begin (SharedStore::ClaimJobs): one more attempt in
// the row, and the count before it in what the claim returns.
#define FAIRGATE_PG_COUNT_ATTEMPT "attempts = j.attempts + 1 "

// A claim's keys from the heads table (fairgate_key_heads): each wanted type's first M keys in
// (cost, head) order (M the parameter numbered `m`), one index read, whatever the number of keys.
// Its heads are jobs never deferred (not_before 0); the deferred ones that are due are offered on
// their own (FAIRGATE_PG_DEFERRED_DUE), read from their index: O(claim size + due retries) rows.
#define FAIRGATE_PG_KEYED_BY_HEADS(m)                                          \
  "keyed AS (SELECT w.type, w.tier, h.fairness_key AS key, h.head, h.cost "    \
  "  FROM wanted w CROSS JOIN LATERAL (SELECT h.fairness_key, h.head, h.cost " \
  "    FROM fairgate_key_heads h WHERE h.type = w.type "                       \
  "    ORDER BY h.cost, h.head LIMIT " FAIRGATE_PG_PARAM(m) ") h), "
#define FAIRGATE_PG_READY "j.not_before = 0 AND j.holder IS NULL"
#define FAIRGATE_PG_DEFERRED_DUE(wall)                                    \
  " UNION ALL "                                                           \
  "  SELECT j.sequence, w.tier, false, coalesce(c.accumulated_cost, 0), " \
  "    j.type, j.id "                                                     \
  "  FROM fairgate_durable_jobs j JOIN wanted w ON w.type = j.type "      \
  "  LEFT JOIN fairgate_keys c ON c.key = j.fairness_key "                \
  "  WHERE NOT j.dead AND j.holder IS NULL AND j.not_before > 0 "         \
  "    AND j.not_before <= $" #wall

// A claim of jobs that take no lease: the candidates above, claimed in one statement with their
// attempts counted. $4 the replica, $5 the lease's length, $6 the wall clock, $7 M, how many
// candidates it reads (PostgresStore::ClaimJobs: $3 or 2 x $3). Each row claimed also says how
// many candidates there were (more than the rows: some were passed over, locked by other claims).
inline constexpr const char* kClaim = FAIRGATE_PG_CLAIM_CANDIDATES(
    7, 6, "SELECT * FROM unnest($1::text[], $2::int[]) AS w(type, tier)",
    FAIRGATE_PG_KEYED_BY_HEADS(7), FAIRGATE_PG_READY, "true", FAIRGATE_PG_DEFERRED_DUE(6),
    "pool AS (SELECT * FROM ranked), ", "$3")
    "UPDATE fairgate_durable_jobs j SET holder = $4, "
    "  lease_until = " FAIRGATE_PG_NOW
    " + $5, token = nextval('fairgate_lease_tokens'), " FAIRGATE_PG_COUNT_ATTEMPT
    "FROM picked WHERE j.sequence = picked.sequence "
    "RETURNING j.sequence, j.type, j.id, j.fairness_key, j.payload, j.submitted_at, "
    "  j.attempts - 1, j.not_before, j.last_error, j.token, (SELECT count(*) FROM ranked)";

// The jobs replica $1 holds with tokens above $2, the greatest it knows of, as kClaim returns
// its jobs (none passed over): what a claim whose reply was lost claimed.
inline constexpr const char* kClaimedUnknown =
    "SELECT sequence, type, id, fairness_key, payload, submitted_at, attempts - 1, not_before, "
    "  last_error, token, count(*) OVER () FROM fairgate_durable_jobs "
    "WHERE holder = $1 AND token > $2::bigint AND NOT dead ORDER BY sequence";

// The renewal of the leases of the jobs replica $1 holds with tokens $3: until $2 seconds from now.
// Their sequences. A row that another statement is changing (a removal on another connection of
// the replica, finishing the job; another replica's claim, the lease having lapsed) is passed over,
// left to the next renewal: waiting for it, a renewal that held rows the other statement wanted
// deadlocked with it (the server broke the cycle after a second by failing one; seen in
// fleet_bench's runs, a renewal beside a batch of removals).
inline constexpr const char* kRenewJobLeases =
    "UPDATE fairgate_durable_jobs SET lease_until = " FAIRGATE_PG_NOW
    " + $2 WHERE sequence = ANY(ARRAY(SELECT sequence FROM fairgate_durable_jobs "
    "  WHERE holder = $1 AND token = ANY($3::bigint[]) FOR UPDATE SKIP LOCKED)) "
    "RETURNING sequence";

// The first job of key `h` (a row of fairgate_key_heads) from its head on that is ready (never
// deferred, held by nobody) and `claimable`, with `upto` a further condition on its sequence.
#define FAIRGATE_PG_FIRST_CLAIMABLE(upto, claimable)                             \
  "SELECT j.sequence AS head FROM fairgate_durable_jobs j "                      \
  "WHERE j.type = h.type AND j.fairness_key = h.fairness_key AND NOT j.dead "    \
  "  AND j.sequence >= h.head " upto " AND " FAIRGATE_PG_READY " AND " claimable \
  " "                                                                            \
  "ORDER BY j.sequence LIMIT 1"

// A claim's keys when a key's first ready job may not be claimable (`claimable`: its leases are
// free now, FAIRGATE_PG_LEASES_FREE): each wanted type's first M keys in the order of (cost, first
// claimable job), M the parameter numbered `m`, from the heads table without reading every key.
// - scanned: the keys in the heads' (cost, head) order, each with its first claimable job (a key
//   with none is passed over), the first M of them: they stop at a key (c, h) of the index.
// - edge: per type, that last cost c, the last head h read at c, and the latest first claimable
//   job `last` among the scanned keys at c.
// A key not scanned has a higher cost, or cost c and a head after h, so its first claimable job is
// after h too; the scanned keys are M keys that all come no later than (c, last). So the first M
// keys of the order are among the scanned ones and those at cost c whose heads lie in (h, last]
// with a claimable job by `last`: one range of the index, empty unless a scanned key at c had
// its first ready jobs blocked. keyed: the first M of both, per type. Rows read: O(claim size +
// blocked keys and jobs passed over), whatever the number of keys.
#define FAIRGATE_PG_KEYED_BY_CLAIMABLE_HEADS(claimable, m) \
  "scanned AS MATERIALIZED (SELECT w.type, w.tier, s.key, s.first, s.head, s.cost "             \
  "  FROM wanted w CROSS JOIN LATERAL ("                                                         \
  "    SELECT h.fairness_key AS key, h.head AS first, f.head, h.cost "                           \
  "    FROM fairgate_key_heads h CROSS JOIN LATERAL (" FAIRGATE_PG_FIRST_CLAIMABLE(              \
      "", claimable) ") f "                                                                      \
  "    WHERE h.type = w.type ORDER BY h.cost, h.head "                                           \
  "    LIMIT " FAIRGATE_PG_PARAM(m) ") s), "                                                     \
  "edge AS (SELECT DISTINCT ON (s.type) s.type, s.tier, s.cost, s.first, "                     \
  "  max(s.head) OVER (PARTITION BY s.type, s.cost) AS last "                                    \
  "  FROM scanned s ORDER BY s.type, s.cost DESC, s.first DESC), "                               \
  "keyed AS (SELECT r.type, r.tier, r.key, r.head, r.cost FROM ("                                \
  "  SELECT u.*, row_number() OVER (PARTITION BY u.type ORDER BY u.cost, u.head) AS rank FROM (" \
  "    SELECT type, tier, key, head, cost FROM scanned UNION ALL "                               \
  "    SELECT e.type, e.tier, b.key, b.head, e.cost FROM edge e CROSS JOIN LATERAL ("            \
  "      SELECT h.fairness_key AS key, f.head FROM fairgate_key_heads h "                        \
  "      CROSS JOIN LATERAL (" FAIRGATE_PG_FIRST_CLAIMABLE("AND j.sequence <= e.last",           \
                                                           claimable) ") f "                     \
  "      WHERE h.type = e.type AND h.cost = e.cost AND h.head > e.first "                        \
  "        AND h.head <= e.last) b) u) r "                                                       \
  "  WHERE r.rank <= " FAIRGATE_PG_PARAM(m) "), "

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
// clock, $5-$7 per type its conflict group, conflict limit and fleet cap, $8 the cap's group,
// $9 M, how many it reads ($3 the most it locks; PostgresStore::ClaimWithLeases), $10 per type
// whether its jobs are `sure`: taken whenever their resource has a free slot (no fleet cap, no
// bound on its jobs in a claim). Each row also says how many candidates there were (more than
// the rows, short of $3: some were locked by other transactions).
// Of the first M, a job of a resource of L slots that comes after L sure jobs of that resource
// is not a candidate (`pool`): in claim order (store::PlanClaim) each of those L jobs takes one
// of the resource's slots, or is passed over because they are all held, or comes after the
// claim is full, so none is left for the job. Left in, such jobs were locked for nothing: a
// client's later jobs on the repositories its first jobs needed filled a claim's candidates,
// and (before claims with leases ran one at a time) a replica claiming at once found them
// locked and took those repositories' next jobs, whose slots the first claim then held, instead
// of other repositories' (bench/HISTORY.md, BM_DurableWorkedLeased).
inline constexpr const char* kClaimCandidates = FAIRGATE_PG_CLAIM_CANDIDATES(
    9, 4,
    "SELECT * FROM unnest($1::text[], $2::int[], $5::text[], $6::int[], $7::int[], "
    "  $10::bool[]) AS w(type, tier, grp, lim, cap, sure)",
    FAIRGATE_PG_KEYED_BY_CLAIMABLE_HEADS(FAIRGATE_PG_LEASES_FREE, 9),
    FAIRGATE_PG_READY " AND " FAIRGATE_PG_LEASES_FREE, FAIRGATE_PG_LEASES_FREE,
    FAIRGATE_PG_DEFERRED_DUE(4) " AND " FAIRGATE_PG_LEASES_FREE,
    "pool AS MATERIALIZED (SELECT r.* FROM (SELECT r.*, w.grp, w.lim, "
    "  count(*) FILTER (WHERE w.sure) OVER (PARTITION BY w.grp, r.id "
    "    ORDER BY r.lapsed DESC, r.tier DESC, r.cost, r.sequence "
    "    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before "
    "  FROM ranked r JOIN wanted w ON w.type = r.type) r "
    "  WHERE r.grp = '' OR r.before < r.lim), ",
    "$9")
    "SELECT sequence, type, id, (SELECT count(*) FROM pool) FROM picked "
    "ORDER BY lapsed DESC, tier DESC, cost, sequence";

// Taken first by every claim whose jobs take leases, for its transaction: such claims run one at
// a time over the database (one lock, numbered beside the keys' locks above), each after the last
// one's commit. Claims read the same first jobs of the fair order, so one that ran beside another
// found that one's candidates locked (SKIP LOCKED), read past them, often took nothing or read
// again, and spent up to 1.7 times the server's time a job; two replicas claimed fewer jobs a
// second than one (bench/HISTORY.md, claims with leases one at a time). A replica stopped in its
// claim holds the lock no longer than its session's idle_in_transaction_session_timeout
// (kSessionSettings). Claims without leases run at once: for them waiting measured no better.
inline constexpr const char* kLockLeasedClaims = "SELECT pg_advisory_xact_lock(727125, 0)";

// Takes one free slot of resource ($1, $2) of $4 slots for replica $3 for $5 seconds, a slot
// whose lease lapsed counting as free, marked $6 (taken_by; NULL within a claim); its fencing
// token, or no row when every slot is held.
inline constexpr const char* kTakeSlot =
    "WITH free AS (SELECT s FROM generate_series(0, $4::int - 1) AS s "
    "  WHERE NOT EXISTS (SELECT 1 FROM fairgate_resource_leases l WHERE l.grp = $1 "
    "    AND l.id = $2 AND l.slot = s AND l.lease_until >= " FAIRGATE_PG_NOW
    ") "
    "  ORDER BY s LIMIT 1) "
    "INSERT INTO fairgate_resource_leases (grp, id, slot, holder, lease_until, token, taken_by) "
    "SELECT $1, $2, s, $3, " FAIRGATE_PG_NOW
    " + $5, nextval('fairgate_lease_tokens'), $6::bigint FROM free "
    "ON CONFLICT (grp, id, slot) DO UPDATE SET holder = EXCLUDED.holder, "
    "  lease_until = EXCLUDED.lease_until, token = EXCLUDED.token, "
    "  taken_by = EXCLUDED.taken_by "
    "  WHERE fairgate_resource_leases.lease_until < " FAIRGATE_PG_NOW " RETURNING token";
// The token of the slot of resource ($1, $2) that the take marked $3 took, if it did: what a
// take whose reply was lost took.
inline constexpr const char* kSlotTakenBy =
    "SELECT token FROM fairgate_resource_leases WHERE grp = $1 AND id = $2 AND taken_by = $3";

// How many of the $3 slots of resource ($1, $2) no unexpired lease holds.
inline constexpr const char* kCountFreeSlots =
    "SELECT count(*) FROM generate_series(0, $3::int - 1) AS s "
    "WHERE NOT EXISTS (SELECT 1 FROM fairgate_resource_leases l WHERE l.grp = $1 "
    "  AND l.id = $2 AND l.slot = s AND l.lease_until >= " FAIRGATE_PG_NOW ")";

// Takes, of each resource in the arrays ($1 its group, $2 its id, $3 its slots, $4 how many to
// take), that many free slots for replica $5 for $6 seconds, a slot whose lease lapsed counting
// as free, the resources in the arrays' order (a claim's, in (group, id) order, so that replicas
// claiming at once never wait on each other in a cycle) and each resource's slots in order.
// Returns each slot taken: the resource's place in the arrays (from 1) and its fencing token;
// fewer than asked of a resource where every slot is held, or where another replica took one
// since this statement read it as free.
inline constexpr const char* kTakeSlots =
    "WITH wanted AS (SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::int[]) "
    "  WITH ORDINALITY AS w(grp, id, lim, count, place)), "
    "free AS (SELECT w.place, w.grp, w.id, f.s FROM wanted w CROSS JOIN LATERAL ("
    "  SELECT s FROM generate_series(0, w.lim - 1) AS s "
    "  WHERE NOT EXISTS (SELECT 1 FROM fairgate_resource_leases l WHERE l.grp = w.grp "
    "    AND l.id = w.id AND l.slot = s AND l.lease_until >= " FAIRGATE_PG_NOW
    ") "
    "  ORDER BY s LIMIT w.count) f), "
    "taken AS (INSERT INTO fairgate_resource_leases "
    "  SELECT grp, id, s, $5, " FAIRGATE_PG_NOW
    " + $6, nextval('fairgate_lease_tokens'), NULL "
    "  FROM free ORDER BY place, s "
    "  ON CONFLICT (grp, id, slot) DO UPDATE SET holder = EXCLUDED.holder, "
    "    lease_until = EXCLUDED.lease_until, token = EXCLUDED.token, taken_by = NULL "
    "    WHERE fairgate_resource_leases.lease_until < " FAIRGATE_PG_NOW
    "  RETURNING grp, id, slot, token) "
    "SELECT w.place, t.token FROM taken t JOIN wanted w ON w.grp = t.grp AND w.id = t.id "
    "ORDER BY w.place, t.slot";

// Gives back the resource leases whose fencing tokens are in the array parameter `tokens`: a
// claim's, or those a claim took for a job it then dropped.
#define FAIRGATE_PG_DROP_LEASES_BY_TOKEN(tokens) \
  "DELETE FROM fairgate_resource_leases WHERE token = ANY(" tokens "::bigint[])"
// Within a claim's transaction, of leases it took: nobody saw them, so nobody is told.
inline constexpr const char* kDropLeasesByToken = FAIRGATE_PG_DROP_LEASES_BY_TOKEN("$1");
// A lease given back may let a waiting replica claim a job it held back: the replicas that wait
// are told (fairgate_notify_waiting), once, if any lease was. In statements of their own only:
// a transaction that held locks before it (a claim's) and then queued for the advisory lock
// behind a replica beginning to wait could close a cycle with a store that waits for them.
#define FAIRGATE_PG_NOTIFY_IF_FREED \
  "(SELECT fairgate_notify_waiting() WHERE EXISTS (SELECT 1 FROM freed))"
inline constexpr const char* kGiveBackLeasesByToken =
    "WITH freed AS (" FAIRGATE_PG_DROP_LEASES_BY_TOKEN("$1") " RETURNING 1) "
    "SELECT " FAIRGATE_PG_NOTIFY_IF_FREED;

// Each connection's settings, set once it connects: how long the server lets a transaction of
// this store sit idle between statements, and no JIT compilation. This store's statements read
// and write a claim's or a batch's rows by index in milliseconds, but the planner's estimates
// of some (a claim with leases: lateral reads per key, a row count for every generate_series)
// pass jit_above_cost, and PostgreSQL then compiled the statement on each execution: 33 ms of a
// 63 ms claim with leases, 25 ms of a 1 ms take of a claim's leases (bench/HISTORY.md).
inline constexpr const char* kSessionSettings =
    "SET idle_in_transaction_session_timeout = 1000; SET jit = off";

inline constexpr const char* kJobColumns =
    "sequence, type, id, fairness_key, payload, submitted_at, attempts, not_before, last_error";

// The time the statement began, Unix seconds: one value however often a statement reads it (the
// clock_timestamp() of FAIRGATE_PG_NOW moves between the expressions of one row).
#define FAIRGATE_PG_STATEMENT_TIME "extract(epoch from statement_timestamp())::double precision"
// A take of up to $4 tokens from bucket $1 under the limit ($2 a second, burst $3), one
// statement: the tokens at the statement's time t are least(burst, tokens + (t - at) * rate), or
// the burst for a bucket without a row; it takes their whole part, at most $4, keeps the rest,
// and notes when the bucket is full again. Concurrent takes of one bucket wait for each other's
// row lock and compute from the row they find (a t before the row's `at`, as a take that waited
// for a later one's lock has, gains nothing), so no token is given twice. Returns (taken, tokens
// left).
#define FAIRGATE_PG_BUCKET_AT \
  "least($3::float8, b.tokens + greatest(0, " FAIRGATE_PG_STATEMENT_TIME " - b.at) * $2::float8)"
#define FAIRGATE_PG_BUCKET_TAKEN "least($4::int, floor(" FAIRGATE_PG_BUCKET_AT "))"
#define FAIRGATE_PG_NEW_TAKEN "least($4::int, floor($3::float8))"
inline constexpr const char* kTakeTokens =
    "INSERT INTO fairgate_rate_buckets AS b (name, tokens, at, taken, full_at) "
    "VALUES ($1, $3::float8 - " FAIRGATE_PG_NEW_TAKEN ", " FAIRGATE_PG_STATEMENT_TIME
    ", " FAIRGATE_PG_NEW_TAKEN "::int, " FAIRGATE_PG_STATEMENT_TIME " + " FAIRGATE_PG_NEW_TAKEN
    " / $2::float8) "
    "ON CONFLICT (name) DO UPDATE SET "
    "taken = " FAIRGATE_PG_BUCKET_TAKEN
    "::int, "
    "tokens = " FAIRGATE_PG_BUCKET_AT " - " FAIRGATE_PG_BUCKET_TAKEN
    ", "
    "at = greatest(b.at, " FAIRGATE_PG_STATEMENT_TIME
    "), "
    "full_at = greatest(b.at, " FAIRGATE_PG_STATEMENT_TIME
    ") + ($3::float8 - (" FAIRGATE_PG_BUCKET_AT " - " FAIRGATE_PG_BUCKET_TAKEN
    ")) / $2::float8 "
    "RETURNING taken, tokens";
// The rows of full buckets: as good as none (kTakeTokens starts a bucket without a row full), so
// that a fleet that has seen a million clients' keys keeps rows only for those taking now. A
// take that changed a row since the statement began is seen by it (the row is checked again).
inline constexpr const char* kForgetFullBuckets =
    "DELETE FROM fairgate_rate_buckets WHERE full_at <= " FAIRGATE_PG_STATEMENT_TIME;

}  // namespace fairgate::store::postgres

#endif  // FAIRGATE_STORE_POSTGRES_STATEMENTS_H_
