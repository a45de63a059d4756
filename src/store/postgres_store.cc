// PostgresStore (store/postgres_store.h): opening a store, its jobs (added, begun, and ended by
// fenced statements), waiting for jobs stored elsewhere; OpenPostgresStore.
#include "fairgate/postgres_store.h"

#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "store/claim_planner.h"
#include "store/job_size.h"
#include "store/lease_book.h"
#include "store/postgres_connection.h"
#include "store/postgres_statements.h"
#include "store/postgres_store.h"

namespace fairgate::store::postgres {
namespace {

// This process's default replica name: host, process id and a random part.
std::string DefaultReplicaName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  std::random_device random;
  return absl::StrCat(host, "/", getpid(), "/", absl::Hex(random(), absl::kZeroPad8));
}

// Runs `sql` on the listener's connection, with `param` as $1 if given: whether it succeeded.
// Gives up after `give_up_seconds` without an answer, if that is given (>= 0).
bool RunOnListener(PGconn* c, const char* sql, const std::string* param,
                   double give_up_seconds = -1) {
  const char* values[1] = {param != nullptr ? param->c_str() : nullptr};
  if (PQsendQueryParams(c, sql, param != nullptr ? 1 : 0, nullptr, values, nullptr, nullptr, 0) ==
      0) {
    return false;
  }
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration<double>(std::max(0.0, give_up_seconds));
  while (PQconsumeInput(c) != 0 && PQisBusy(c) != 0) {
    int wait_ms = -1;
    if (give_up_seconds >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            end - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return false;
      wait_ms = static_cast<int>(left);
    }
    pollfd fd{PQsocket(c), POLLIN, 0};
    if (poll(&fd, 1, wait_ms) < 0 && errno != EINTR) return false;
  }
  if (PQisBusy(c) != 0) return false;  // the connection broke
  bool ok = true;
  while (PGresult* r = PQgetResult(c)) {
    const ExecStatusType status = PQresultStatus(r);
    ok &= status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    PQclear(r);
  }
  return ok;
}

}  // namespace

PostgresStore::~PostgresStore() {
  // The stores stop notifying for this replica now, not a minute from now; at most a second's
  // wait for a server that does not answer (the row then lapses).
  std::lock_guard lock(listen_mutex_);
  if (waiting_row_ && listener_ != nullptr && PQstatus(listener_.get()) == CONNECTION_OK) {
    (void)RunOnListener(listener_.get(), kDeleteWaitingRow, &replica_, 1.0);
  }
}

StatusOr<std::unique_ptr<SharedStore>> PostgresStore::Open(const std::string& conninfo,
                                                           const PostgresStoreOptions& options) {
  if (conninfo.empty()) return absl::InvalidArgumentError("PostgreSQL connection string is empty");
  // A malformed string is the caller's mistake, not a server that may come back: say so
  // before trying to connect.
  char* malformed = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &malformed);
  if (parsed == nullptr) {
    const std::string why = malformed != nullptr
                                ? std::string(absl::StripTrailingAsciiWhitespace(malformed))
                                : "out of memory";
    PQfreemem(malformed);
    return absl::InvalidArgumentError(
        absl::StrCat("PostgreSQL connection string is malformed: ", why));
  }
  PQconninfoFree(parsed);
  if (options.connections < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PostgreSQL store: connections must be >= 1, got ", options.connections));
  }
  if (options.max_job_bytes < 1 || options.max_job_bytes > kPostgresMaxJobBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("PostgreSQL store: max_job_bytes must be in [1, ", kPostgresMaxJobBytes,
                     "], got ", options.max_job_bytes));
  }
  if (Status s = RequireText(options.replica, "the replica's name"); !s.ok()) return s;
  auto store = std::unique_ptr<PostgresStore>(
      new PostgresStore(conninfo, options.replica.empty() ? DefaultReplicaName() : options.replica,
                        static_cast<std::size_t>(options.connections), options.max_job_bytes));
  Session session = store->pool_.Take();
  Link& link = *session;
  if (Status s = store->pool_.Connect(link); !s.ok()) return s;
  // Under a lock that every opening store takes, so that two replicas starting at once do not
  // both create it; and only when the database's schema is older than this fairgate's: the
  // statements that make it (CREATE TRIGGER, the migrations) lock the tables against the writes
  // of replicas already at work, and ran again by each replica that opened, they deadlocked with
  // them.
  Status schema = store->pool_.Transaction(link, "create the schema", [&]() -> Status {
    if (StatusOr<Result> locked = Exec(link, kSchemaLock, {}, "lock the schema"); !locked.ok()) {
      return locked.status();
    }
    StatusOr<Result> exists = Exec(link, kSchemaExists, {}, "look for the schema");
    if (!exists.ok()) return exists.status();
    if (std::string_view(PQgetvalue(exists->get(), 0, 0)) == "t") {
      StatusOr<Result> current = Exec(link, kSchemaVersionOf, {}, "read the schema version");
      if (!current.ok()) return current.status();
      if (std::atoi(PQgetvalue(current->get(), 0, 0)) >= kSchemaVersion) return absl::OkStatus();
    }
    return Exec(link, kSchema, {}, "create the schema").status();
  });
  if (!schema.ok()) return schema;
  StatusOr<Result> version =
      Exec(link, "SELECT max(version) FROM fairgate_schema", {}, "read the schema version");
  if (!version.ok()) return version.status();
  const int found = std::atoi(PQgetvalue(version->get(), 0, 0));
  if (found > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat("PostgreSQL database has fairgate schema ",
                                                      "version ", found, ", newer than this ",
                                                      "fairgate's ", kSchemaVersion));
  }
  return std::unique_ptr<SharedStore>(std::move(store));
}

StatusOr<std::uint64_t> PostgresStore::AddJob(const StoredJob& job) {
  if (Status s = Storable(job); !s.ok()) return s;
  return adds_.Write(job);
}

StatusOr<std::uint64_t> PostgresStore::AddOneJob(const StoredJob& job) {
  Session session = pool_.Take();
  Link& link = *session;
  const std::int64_t mark = NextMarks(1);
  StatusOr<std::vector<std::uint64_t>> stored = StoreOnce(
      link, mark, 1, "store a durable job", [&]() -> StatusOr<std::vector<std::uint64_t>> {
        // The notification, made while a replica waits, wakes every replica's listener
        // (WaitForJobs) at the commit.
        StatusOr<Result> r = Exec(link,
                                  "WITH stored AS (INSERT INTO fairgate_durable_jobs "
                                  "(type, id, fairness_key, payload, submitted_at, stored_by) "
                                  "VALUES ($1, $2, $3, $4, $5, $6) RETURNING sequence) "
                                  "SELECT sequence, fairgate_notify_waiting() FROM stored",
                                  {{job.type},
                                   {job.id},
                                   {job.fairness_key},
                                   {job.payload, true},
                                   {Number(job.submitted_at)},
                                   {std::to_string(mark)}},
                                  "store a durable job");
        if (!r.ok()) return r.status();
        return std::vector<std::uint64_t>{std::strtoull(PQgetvalue(r->get(), 0, 0), nullptr, 10)};
      });
  if (!stored.ok()) return stored.status();
  return stored->front();
}

std::int64_t PostgresStore::NextMarks(std::size_t count) {
  return next_mark_.fetch_add(static_cast<std::int64_t>(count), std::memory_order_relaxed);
}

std::int64_t PostgresStore::FirstMark() {
  // Anywhere in [1, 2^61]: two stores' marks meet only where one's count reaches the other's
  // start (at a million jobs a second, a store counts 2^45 in a year: a share of 2^-16 of the
  // range), and a meeting matters only to a lookup after a lost reply (StoreOnce) that would then
  // find the other store's jobs. Nor does the count overflow a bigint in any lifetime.
  std::random_device random;
  std::mt19937_64 bits((std::uint64_t{random()} << 32) | random());
  return std::uniform_int_distribution<std::int64_t>(1, std::int64_t{1} << 61)(bits);
}

// `store` runs the statement that stores `count` jobs marked `first`, `first` + 1, ... in their
// order, and returns their sequence numbers. When the connection breaks under it, the
// statement may have committed before the break lost its reply: the jobs marked so are looked
// up on a new connection (a read of the whole table, which no index serves: this happens only
// then) before the statement runs again. Found, they are the answer: 0 for a job already
// claimed, run and removed by a replica meanwhile, whose number is not known any more. None
// found, the statement runs again (so a job stored and already removed is stored again: it runs
// again, as at least once allows).
StatusOr<std::vector<std::uint64_t>> PostgresStore::StoreOnce(
    Link& link, std::int64_t first, std::size_t count, const char* what,
    const std::function<StatusOr<std::vector<std::uint64_t>>()>& store) {
  using Answer = StatusOr<std::vector<std::uint64_t>>;
  return pool_.RetryingUnlessFound(link, store, [&]() -> std::optional<Answer> {
    StatusOr<Result> r =
        Exec(link,
             "SELECT stored_by - $1::bigint, sequence FROM fairgate_durable_jobs "
             "WHERE stored_by >= $1::bigint AND stored_by < $1::bigint + $2::bigint",
             {{std::to_string(first)}, {std::to_string(count)}},
             absl::StrCat(what, ": look up whether it was stored").c_str());
    if (!r.ok()) return r.status();
    if (PQntuples(r->get()) == 0) return std::nullopt;
    std::vector<std::uint64_t> sequences(count, 0);
    for (int row = 0; row < PQntuples(r->get()); ++row) {
      sequences[std::strtoull(PQgetvalue(r->get(), row, 0), nullptr, 10)] =
          std::strtoull(PQgetvalue(r->get(), row, 1), nullptr, 10);
    }
    return sequences;
  });
}

StatusOr<std::vector<std::uint64_t>> PostgresStore::AddJobs(const std::vector<StoredJob>& jobs) {
  if (jobs.empty()) return std::vector<std::uint64_t>{};
  std::vector<const StoredJob*> storable;
  storable.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (Status s = Storable(jobs[i]); !s.ok()) {
      return Status(s.code(), absl::StrCat("job ", i, " of the batch: ", s.message()));
    }
    storable.push_back(&jobs[i]);
  }
  return StoreJobs(storable, "store a batch of durable jobs");
}

// One statement: the sequence numbers are drawn first and given out in ascending order to the
// jobs in their order (the order nextval ran in is not what numbers them), then the rows go in
// from arrays, one parameter per column.
StatusOr<std::vector<std::uint64_t>> PostgresStore::StoreJobs(
    const std::vector<const StoredJob*>& jobs, const char* what) {
  // What the statement carries, counted before the payloads' hex is made: each array's elements
  // as TextArray writes them (quoted, `"` and `\` escaped), and 8 bytes an element for the
  // header the server gives each in the array it makes of them.
  auto quoted = [](const std::string& text) {
    return text.size() + 3 +
           static_cast<std::size_t>(std::count_if(text.begin(), text.end(),
                                                  [](char c) { return c == '"' || c == '\\'; }));
  };
  std::size_t carried = 0;
  for (const StoredJob* job : jobs) {
    carried += quoted(job->type) + quoted(job->id) + quoted(job->fairness_key) +
               2 * job->payload.size() + 3 + 32 + 5 * 8;
  }
  if (carried > kMaxStatementBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("PostgreSQL store: ", what, ": its ", jobs.size(), " jobs take ", carried,
                     " bytes as its statement carries them (payloads as hex text), more than ",
                     kMaxStatementBytes, " in one statement: store them in smaller batches"));
  }
  std::vector<std::string> types, ids, keys, payloads, submitted;
  for (const StoredJob* job : jobs) {
    types.push_back(job->type);
    ids.push_back(job->id);
    keys.push_back(job->fairness_key);
    payloads.push_back(absl::BytesToHexString(job->payload));
    submitted.push_back(Number(job->submitted_at));
  }
  Session session = pool_.Take();
  Link& link = *session;
  const std::int64_t first = NextMarks(jobs.size());
  return StoreOnce(link, first, jobs.size(), what, [&]() -> StatusOr<std::vector<std::uint64_t>> {
    return StoreMarked(link, first, types, ids, keys, payloads, submitted, what);
  });
}

StatusOr<std::vector<std::uint64_t>> PostgresStore::StoreMarked(
    Link& link, std::int64_t first, const std::vector<std::string>& types,
    const std::vector<std::string>& ids, const std::vector<std::string>& keys,
    const std::vector<std::string>& payloads, const std::vector<std::string>& submitted,
    const char* what) {
  StatusOr<Result> r =
      Exec(link,
           "WITH numbers AS MATERIALIZED (SELECT nextval(pg_get_serial_sequence("
           "'fairgate_durable_jobs', 'sequence')) AS sequence "
           "FROM generate_series(1, cardinality($1::text[]))), "
           "ranked AS (SELECT sequence, row_number() OVER (ORDER BY sequence) AS n FROM numbers), "
           "stored AS (INSERT INTO fairgate_durable_jobs "
           "(sequence, type, id, fairness_key, payload, submitted_at, stored_by) "
           "SELECT r.sequence, j.type, j.id, j.fairness_key, decode(j.payload, 'hex'), "
           "j.submitted_at, $6::bigint + j.n - 1 "
           "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], "
           "$5::double precision[]) WITH ORDINALITY AS j(type, id, fairness_key, payload, "
           "submitted_at, n) JOIN ranked r USING (n) RETURNING sequence) "
           "SELECT sequence, (SELECT fairgate_notify_waiting()) FROM stored ORDER BY sequence",
           {{TextArray(types)},
            {TextArray(ids)},
            {TextArray(keys)},
            {TextArray(payloads)},
            {TextArray(submitted)},
            {std::to_string(first)}},
           what);
  if (!r.ok()) return r.status();
  std::vector<std::uint64_t> sequences;
  sequences.reserve(types.size());
  for (int row = 0; row < PQntuples(r->get()); ++row) {
    sequences.push_back(std::strtoull(PQgetvalue(r->get(), row, 0), nullptr, 10));
  }
  if (sequences.size() != types.size()) {
    return absl::InternalError(absl::StrCat("PostgreSQL: ", what, ": ", types.size(), " given, ",
                                            sequences.size(), " stored"));
  }
  return sequences;
}

// The attempt a claim counted is confirmed here without a round trip while the lease is surely
// this replica's; after that (a replica that stalled), the server checks the lease.
StatusOr<std::uint32_t> PostgresStore::BeginAttempt(std::uint64_t sequence) {
  const LeaseBook::LocalBegin local = book_.BeginLocally(sequence, SteadyClock::now());
  if (local.attempt) return *local.attempt;
  const bool counted = local.counted;
  Session session = pool_.Take();
  Link& link = *session;
  // Exactly once: run again after a lost reply, the statement would count the attempt twice.
  StatusOr<Result> r = pool_.ExactlyOnce(
      link,
      "UPDATE fairgate_durable_jobs SET attempts = attempts + $3 "
      "WHERE sequence = $1 AND NOT dead" FAIRGATE_PG_FENCED(2) " AND (token IS NULL OR "
      "lease_until > " FAIRGATE_PG_NOW ") RETURNING attempts",
      {{std::to_string(sequence)}, TokenOf(sequence), {counted ? "0" : "1"}}, "mark an attempt");
  if (!r.ok()) return r.status();
  if (counted && PQntuples(r->get()) > 0) book_.AttemptConfirmed(sequence);
  if (PQntuples(r->get()) == 0) {
    // Not begun after its lease passed (even if nobody claimed it yet): no longer renewed, so
    // that another replica may claim it; the leases taken with the claim are given back.
    book_.StopRenewing(sequence);
    GiveBackClaimLeases(link, sequence);
    return Refusal(link, sequence, "mark an attempt of");
  }
  return static_cast<std::uint32_t>(std::strtoul(PQgetvalue(r->get(), 0, 0), nullptr, 10));
}

Status PostgresStore::RemoveJob(std::uint64_t sequence) {
  Session session = pool_.Take();
  Link& link = *session;
  return Finish(
      link, sequence,
      "DELETE FROM fairgate_durable_jobs WHERE sequence = $1" FAIRGATE_PG_FENCED(2) " RETURNING 1",
      {}, "remove", /*missing_is_ok=*/true);
}

// One statement, so one commit: the jobs this replica holds with their tokens (or that nobody
// holds) are deleted, and every lease taken with their claims is given back (as RemoveJob
// does, also for a job refused). The jobs not deleted are looked up once, for their refusals.
// (`sequence = ANY($1)` makes the deletion an index scan whatever the planner thinks of the
// table's size: joined only to the arrays, it read the whole table while its statistics were
// those of a smaller one.)
StatusOr<std::vector<Status>> PostgresStore::RemoveJobs(
    const std::vector<std::uint64_t>& sequences) {
  std::vector<Status> removed(sequences.size());
  if (sequences.empty()) return removed;
  std::vector<std::string> numbers, tokens, resources;
  std::vector<std::optional<std::uint64_t>> claims;  // each job's token
  std::vector<std::optional<SteadyClock::time_point>> sure_until;
  for (std::uint64_t sequence : sequences) {
    numbers.push_back(std::to_string(sequence));
    const std::optional<std::uint64_t> token = book_.TokenOf(sequence);
    claims.push_back(token);
    sure_until.push_back(book_.SurelyHeldUntil(sequence));
    tokens.push_back(token ? std::to_string(*token) : "NULL");
    for (std::uint64_t lease : book_.ClaimLeases(sequence)) {
      resources.push_back(std::to_string(lease));
    }
  }
  Session session = pool_.Take();
  Link& link = *session;
  // Leases given back wake the listeners of the replicas that wait for jobs (WaitForJobs): a job
  // that waited for one (a fleet-wide cap's slot, a repository's) may be claimed now.
  bool rerun = false;
  StatusOr<Result> r = pool_.RetryingExec(
      link,
      "WITH gone AS (DELETE FROM fairgate_durable_jobs j USING unnest($1::bigint[], "
      "$2::bigint[]) AS r(sequence, token) WHERE j.sequence = ANY($1::bigint[]) "
      "AND j.sequence = r.sequence "
      "AND j.token IS NOT DISTINCT FROM r.token RETURNING j.sequence), "
      "freed AS (" FAIRGATE_PG_DROP_LEASES_BY_TOKEN("$3") " RETURNING 1) "
      "SELECT sequence, " FAIRGATE_PG_NOTIFY_IF_FREED " FROM gone",
      {{TextArray(numbers)},
       {absl::StrCat("{", absl::StrJoin(tokens, ","), "}")},  // NULL unquoted: no token
       {TextArray(resources)}},
      "remove durable jobs", &rerun);
  if (!r.ok()) {
    // Not renewed from now on, as a failed RemoveJob's: the jobs' leases and the claims'
    // lapse, unless a later try gives them back first.
    for (std::size_t i = 0; i < sequences.size(); ++i) book_.StopRenewing(sequences[i], claims[i]);
    return r.status();
  }
  absl::flat_hash_set<std::uint64_t> gone;
  for (int i = 0; i < PQntuples(r->get()); ++i) {
    gone.insert(std::strtoull(PQgetvalue(r->get(), i, 0), nullptr, 10));
  }
  std::vector<std::string> left;
  for (std::uint64_t sequence : sequences) {
    if (!gone.contains(sequence)) left.push_back(std::to_string(sequence));
  }
  absl::flat_hash_set<std::uint64_t> stored;  // of those left: still stored, another's now
  Status looked_up;  // a failure is the status of each job left: tried again on its own
  if (!left.empty()) {
    StatusOr<Result> found =
        Exec(link,
             "SELECT sequence FROM fairgate_durable_jobs WHERE sequence = ANY($1::bigint[]) "
             "AND NOT dead",
             {{TextArray(left)}}, "look up durable jobs");
    looked_up = found.status();
    for (int i = 0; found.ok() && i < PQntuples(found->get()); ++i) {
      stored.insert(std::strtoull(PQgetvalue(found->get(), i, 0), nullptr, 10));
    }
  }
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    const std::uint64_t sequence = sequences[i];
    // The claim's leases were given back with the batch: the book forgets them in each case.
    if (!gone.contains(sequence) && !looked_up.ok()) {
      removed[i] = looked_up;
      (void)book_.TakeClaimLeases(sequence, claims[i]);
      continue;
    }
    // As Refusal: gone although this replica still held it (another claimed it after this
    // one's lease passed, and finished it) is a refusal too; gone and never held is done.
    if (gone.contains(sequence) ||
        (!stored.contains(sequence) &&
         (!book_.Holds(sequence) || RanBeforeTheBreak(rerun, sure_until[i])))) {
      book_.Forget(sequence, claims[i]);
      continue;
    }
    removed[i] = LeaseLost("remove", sequence);
    book_.Refused(sequence, claims[i]);
  }
  return removed;
}

Status PostgresStore::DeferJob(std::uint64_t sequence, double not_before, std::string_view error) {
  Session session = pool_.Take();
  Link& link = *session;
  return Finish(link, sequence,
                "UPDATE fairgate_durable_jobs SET not_before = $3, last_error = $4, "
                "holder = NULL, lease_until = NULL, token = NULL "
                "WHERE sequence = $1" FAIRGATE_PG_FENCED(2) " RETURNING 1",
                {{Number(not_before)}, {AsText(absl::string_view(error.data(), error.size()))}},
                "defer", false);
}

Status PostgresStore::KillJob(std::uint64_t sequence, std::string_view error) {
  Session session = pool_.Take();
  Link& link = *session;
  return Finish(link, sequence,
                "UPDATE fairgate_durable_jobs SET dead = true, last_error = $3, "
                "attempts = attempts - $4, holder = NULL, lease_until = NULL, token = NULL "
                "WHERE sequence = $1" FAIRGATE_PG_FENCED(2) " RETURNING 1",
                {{AsText(absl::string_view(error.data(), error.size()))}, UnbegunAttempt(sequence)},
                "move to the dead jobs", false);
}

StatusOr<std::size_t> PostgresStore::CountDeadJobs() {
  Session session = pool_.Take();
  Link& link = *session;
  StatusOr<Result> r = pool_.RetryingExec(
      link, "SELECT count(*) FROM fairgate_durable_jobs WHERE dead", {}, "count dead jobs");
  if (!r.ok()) return r.status();
  return static_cast<std::size_t>(std::strtoull(PQgetvalue(r->get(), 0, 0), nullptr, 10));
}

// The dead job's row is ready again (the jobs' trigger gives its key a head), and the replicas
// waiting for jobs are told.
StatusOr<StoredJob> PostgresStore::ReviveJob(std::uint64_t sequence) {
  Session session = pool_.Take();
  Link& link = *session;
  const std::string sql = absl::StrCat(
      "UPDATE fairgate_durable_jobs SET dead = false, attempts = 0, not_before = 0 "
      "WHERE sequence = $1 AND dead RETURNING ",
      kJobColumns, ", fairgate_notify_waiting()");
  // Exactly once: run again after a lost reply, the statement would find the job live and say
  // it is not dead.
  StatusOr<Result> r =
      pool_.ExactlyOnce(link, sql.c_str(), {{std::to_string(sequence)}}, "revive a dead job");
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) == 0) return NoDeadJob(sequence);
  return JobAt(*r, 0);
}

Status PostgresStore::RemoveDeadJob(std::uint64_t sequence) {
  Session session = pool_.Take();
  Link& link = *session;
  // Exactly once, as ReviveJob.
  StatusOr<Result> r = pool_.ExactlyOnce(
      link, "DELETE FROM fairgate_durable_jobs WHERE sequence = $1 AND dead RETURNING 1",
      {{std::to_string(sequence)}}, "remove a dead job");
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) == 0) return NoDeadJob(sequence);
  return absl::OkStatus();
}

Status PostgresStore::NoDeadJob(std::uint64_t sequence) {
  return absl::NotFoundError(
      absl::StrCat("PostgreSQL store: no dead job has sequence number ", sequence));
}

Status PostgresStore::ReleaseJob(std::uint64_t sequence) {
  Session session = pool_.Take();
  Link& link = *session;
  // Given back: any replica may claim it at once (the replicas that wait for jobs are told).
  return Finish(link, sequence,
                "UPDATE fairgate_durable_jobs SET attempts = attempts - $3, holder = NULL, "
                "lease_until = NULL, token = NULL WHERE sequence = $1" FAIRGATE_PG_FENCED(
                    2) " RETURNING fairgate_notify_waiting()",
                {UnbegunAttempt(sequence)}, "release", false);
}

Status PostgresStore::WaitForJobs(double timeout_seconds) {
  std::lock_guard lock(listen_mutex_);
  PGconn* c = listener_.get();
  bool fresh = false;
  if (c == nullptr || PQstatus(c) != CONNECTION_OK) {
    listener_.reset(PQconnectdb(pool_.conninfo().c_str()));
    c = listener_.get();
    Result listen(PQstatus(c) == CONNECTION_OK ? PQexec(c, "LISTEN " FAIRGATE_PG_JOBS_CHANNEL)
                                               : nullptr);
    if (listen == nullptr || PQresultStatus(listen.get()) != PGRES_COMMAND_OK) {
      Status s =
          absl::UnavailableError(absl::StrCat("PostgreSQL: listen for stored jobs: ", ErrorOf(c)));
      listener_.reset();
      return s;
    }
    // Jobs stored before this connection listened were not notified to it: a claim now finds
    // them. The row is made again, as if new: whether the last connection made it is not known.
    fresh = true;
    waiting_row_ = false;
  }
  auto broken = [&](const char* what) {
    Status s = absl::UnavailableError(absl::StrCat("PostgreSQL: ", what, ": ", ErrorOf(c)));
    listener_.reset();
    return s;
  };
  const bool waits = waits_for_jobs_.load(std::memory_order_relaxed);
  const SteadyClock::time_point now = SteadyClock::now();
  if (waits && (!waiting_row_ || now - waiting_seen_ > kWaitingLapse)) {
    if (!RunOnListener(c, kWriteWaitingRow, &replica_)) {
      return broken("say the replica waits for jobs");
    }
    // The stores that looked before the row was there did not notify: once they have committed,
    // a claim finds their jobs.
    if (!RunOnListener(c, kWaitForEarlierStores, nullptr)) {
      return broken("wait for the stores under way");
    }
    waiting_row_ = true;
    waiting_seen_ = now;
    return absl::OkStatus();
  }
  if (fresh) return absl::OkStatus();
  if (waits && now - waiting_seen_ > kWaitingSeenEvery) {
    if (!RunOnListener(c, kWriteWaitingRow, &replica_)) {
      return broken("say the replica waits for jobs");
    }
    waiting_seen_ = now;
  } else if (!waits && waiting_row_) {
    if (!RunOnListener(c, kDeleteWaitingRow, &replica_)) return broken("say the replica is busy");
    waiting_row_ = false;
  }
  // Whether a notification came (read from the connection so far); each is taken once.
  auto notified = [&] {
    bool any = false;
    while (PGnotify* n = PQnotifies(c)) {
      any = true;
      PQfreemem(n);
    }
    return any;
  };
  if (!PQconsumeInput(c)) {
    listener_.reset();
    return absl::UnavailableError("PostgreSQL: listen for stored jobs: the connection broke");
  }
  if (notified()) return absl::OkStatus();
  pollfd fd{PQsocket(c), POLLIN, 0};
  const int ready = poll(&fd, 1, static_cast<int>(std::max(0.0, timeout_seconds) * 1000));
  if (ready < 0 && errno != EINTR) {
    listener_.reset();
    return absl::UnavailableError("PostgreSQL: listen for stored jobs: poll failed");
  }
  if (ready > 0 && !PQconsumeInput(c)) {
    listener_.reset();
    return absl::UnavailableError("PostgreSQL: listen for stored jobs: the connection broke");
  }
  if (notified()) return absl::OkStatus();
  return absl::DeadlineExceededError("no job was stored");
}

// PostgreSQL's text cannot hold a NUL byte (and libpq would cut a parameter at the first one) or
// what is not UTF-8: a job's names with either are refused rather than stored cut short, or
// failing the statement of a group of stores. (The payload is bytea.)
Status PostgresStore::Storable(const StoredJob& job) const {
  if (Status s = CheckJobSize(job, max_job_bytes_, "PostgreSQL store"); !s.ok()) return s;
  for (const auto& [name, value] : {std::pair<const char*, const std::string*>{"type", &job.type},
                                    {"id", &job.id},
                                    {"fairness key", &job.fairness_key}}) {
    if (value->find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("PostgreSQL store: the job's ", name,
                                                     " holds a NUL byte, which PostgreSQL's text "
                                                     "cannot"));
    }
    if (!TextCanHold(*value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PostgreSQL store: the job's ", name, " is not UTF-8, which PostgreSQL's text must be"));
    }
  }
  return absl::OkStatus();
}

double PostgresStore::WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

StatusOr<std::vector<StoredJob>> PostgresStore::Jobs(bool dead) {
  const std::string sql = absl::StrCat("SELECT ", kJobColumns, " FROM fairgate_durable_jobs WHERE ",
                                       dead ? "dead" : "NOT dead", " ORDER BY sequence");
  return JobsOf(sql.c_str(), {});
}

// From the dead jobs' index (fairgate_durable_jobs_dead). The numbers as bigint: those above it as
// the largest.
StatusOr<std::vector<StoredJob>> PostgresStore::DeadJobsAfter(std::uint64_t after,
                                                              std::size_t limit) {
  constexpr std::uint64_t kLargest = std::numeric_limits<std::int64_t>::max();
  const std::string sql = absl::StrCat("SELECT ", kJobColumns,
                                       " FROM fairgate_durable_jobs WHERE dead AND sequence > $1 "
                                       "ORDER BY sequence LIMIT $2");
  return JobsOf(sql.c_str(), {{std::to_string(std::min<std::uint64_t>(after, kLargest))},
                              {std::to_string(std::min<std::uint64_t>(limit, kLargest))}});
}

// The jobs a query of kJobColumns returns.
StatusOr<std::vector<StoredJob>> PostgresStore::JobsOf(const char* sql,
                                                       const std::vector<Param>& params) {
  Session session = pool_.Take();
  Link& link = *session;
  StatusOr<Result> r = pool_.RetryingExec(link, sql, params, "load durable jobs");
  if (!r.ok()) return r.status();
  std::vector<StoredJob> jobs;
  for (int i = 0; i < PQntuples(r->get()); ++i) {
    StatusOr<StoredJob> job = JobAt(*r, i);
    if (!job.ok()) return job.status();
    jobs.push_back(*std::move(job));
  }
  return jobs;
}

// The job in row `row` of a result whose first columns are kJobColumns.
StatusOr<StoredJob> PostgresStore::JobAt(const Result& r, int row) {
  StoredJob job;
  job.sequence = std::strtoull(PQgetvalue(r.get(), row, 0), nullptr, 10);
  job.type = Text(r, row, 1);
  job.id = Text(r, row, 2);
  job.fairness_key = Text(r, row, 3);
  std::size_t length = 0;
  unsigned char* bytes =
      PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r.get(), row, 4)), &length);
  if (bytes == nullptr) return absl::InternalError("PostgreSQL: a payload cannot be decoded");
  job.payload.assign(reinterpret_cast<const char*>(bytes), length);
  PQfreemem(bytes);
  job.submitted_at = Double(r, row, 5);
  job.attempts = static_cast<std::uint32_t>(std::strtoul(PQgetvalue(r.get(), row, 6), nullptr, 10));
  job.not_before = Double(r, row, 7);
  job.last_error = Text(r, row, 8);
  return job;
}

// The token this replica holds `sequence` with, as a parameter: NULL if it holds none.
Param PostgresStore::TokenOf(std::uint64_t sequence) const {
  return TokenParam(book_.TokenOf(sequence));
}

Param PostgresStore::TokenParam(std::optional<std::uint64_t> token) {
  if (!token) return {"", false, true};
  return {std::to_string(*token)};
}

// As a parameter: 1 when this replica's claim of `sequence` counted an attempt that never began
// (a job given back or killed unrun gives it back), else 0.
Param PostgresStore::UnbegunAttempt(std::uint64_t sequence) const {
  return {book_.AttemptUnbegun(sequence) ? "1" : "0"};
}

// Why a fenced statement changed no row: the job is not stored (NotFound) or its lease is or
// was another's since this replica claimed it (Aborted).
Status PostgresStore::Refusal(Link& link, std::uint64_t sequence, const char* what) {
  StatusOr<Result> r =
      Exec(link, "SELECT 1 FROM fairgate_durable_jobs WHERE sequence = $1 AND NOT dead",
           {{std::to_string(sequence)}}, "look up a durable job");
  if (!r.ok()) return r.status();
  // Gone although this replica still holds a claim of it: another replica claimed it after
  // this one's lease passed, and finished it. That is a refusal too.
  if (PQntuples(r->get()) == 0 && !book_.Holds(sequence)) {
    return absl::NotFoundError(absl::StrCat("durable job ", sequence, " is not stored"));
  }
  return LeaseLost(what, sequence);
}

// So when the claim the call was made for is still surely this replica's: no other replica can
// have changed the job's row since the first run (fenced by the claim's token) began, nor could
// this one claim it again unless that run freed it.
bool PostgresStore::RanBeforeTheBreak(bool rerun,
                                      std::optional<SteadyClock::time_point> sure_until) {
  return rerun && sure_until && SteadyClock::now() < *sure_until;
}

// The refusal of `what` ("remove", "defer", ...) done to a job whose lease this replica lost.
Status PostgresStore::LeaseLost(const char* what, std::uint64_t sequence) const {
  return absl::AbortedError(absl::StrCat("PostgreSQL: cannot ", what, " durable job ", sequence,
                                         ": replica ", replica_, " no longer holds its lease"));
}

// Runs the fenced statement `sql` ($1 the sequence, $2 the token, `more` from $3) that ends
// this replica's part in a job, and forgets the job's token once it is done with it. The
// leases taken with the claim are given back whatever the outcome (after a failure to reach
// the server they lapse: no longer renewed).
Status PostgresStore::Finish(Link& link, std::uint64_t sequence, const char* sql,
                             std::vector<Param> more, const char* what, bool missing_is_ok) {
  // The claim this call ends: once the statement freed the job, this replica's next claim may
  // take it before the call is done here, and that claim is left alone (LeaseBook).
  const std::optional<std::uint64_t> token = book_.TokenOf(sequence);
  const std::optional<SteadyClock::time_point> sure_until = book_.SurelyHeldUntil(sequence);
  std::vector<Param> params = {{std::to_string(sequence)}, TokenParam(token)};
  for (Param& p : more) params.push_back(std::move(p));
  bool rerun = false;
  StatusOr<Result> r =
      pool_.RetryingExec(link, sql, params, absl::StrCat(what, " a durable job").c_str(), &rerun);
  Status status = r.status();
  if (r.ok() && PQntuples(r->get()) == 0) {
    status =
        RanBeforeTheBreak(rerun, sure_until) ? absl::OkStatus() : Refusal(link, sequence, what);
    if (missing_is_ok && status.code() == absl::StatusCode::kNotFound) status = absl::OkStatus();
  }
  // The claim's leases go back with it. When the server was unreachable they are kept, not
  // renewed: the caller's next try of the same call (the scheduler tries again) gives them back
  // with the job, and if none succeeds before they lapse, they lapse.
  if (r.ok()) GiveBackClaimLeases(link, sequence, token);
  if (status.ok() || status.code() == absl::StatusCode::kNotFound) {
    book_.Forget(sequence, token);
  } else {
    // Kept after a refusal or a failure (LeaseBook's rules): not renewed, the lease lapses and
    // another replica runs the job again (at least once) unless a later try of the call
    // succeeds first, rather than this one holding a job it is done with for ever.
    book_.StopRenewing(sequence, token);
  }
  return status;
}

std::string PostgresStore::Text(const Result& r, int row, int column) {
  return std::string(PQgetvalue(r.get(), row, column),
                     static_cast<std::size_t>(PQgetlength(r.get(), row, column)));
}

double PostgresStore::Double(const Result& r, int row, int column) {
  return std::strtod(PQgetvalue(r.get(), row, column), nullptr);
}

}  // namespace fairgate::store::postgres

namespace fairgate {

StatusOr<std::unique_ptr<SharedStore>> OpenPostgresStore(const std::string& conninfo,
                                                         const PostgresStoreOptions& options) {
  return store::postgres::PostgresStore::Open(conninfo, options);
}

}  // namespace fairgate
