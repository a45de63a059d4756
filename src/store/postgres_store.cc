// The PostgreSQL store (fairgate/postgres_store.h), on libpq: a pool of connections, each call
// one transaction on a connection of its own for the call, retried once on a fresh connection
// when that one turned out to be broken; text parameters and results (payloads as bytea, sent
// in binary), statements with parameters prepared once per connection.
//
// Leases are three columns of a job's row: its holder (a replica's name), until when (the
// server's clock, Unix seconds) and its fencing token. A replica remembers the token of every job
// it claimed until it removes, defers, kills or releases it; each of those, and BeginAttempt,
// applies only where the row's token is still that one (or, for a job it never claimed, still
// none), so a holder whose job was claimed again by another replica changes nothing.
#include "fairgate/postgres_store.h"

#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
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
#include "store/lease_book.h"
#include "store/postgres_connection.h"
#include "store/postgres_statements.h"

namespace fairgate::store::postgres {
namespace {

using Session = ConnectionPool::Session;

// This process's default replica name: host, process id and a random part.
std::string DefaultReplicaName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  std::random_device random;
  return absl::StrCat(host, "/", getpid(), "/", absl::Hex(random(), absl::kZeroPad8));
}

class PostgresStore final : public SharedStore {
 public:
  using SteadyClock = std::chrono::steady_clock;

  static StatusOr<std::unique_ptr<SharedStore>> Open(const std::string& conninfo,
                                                     const PostgresStoreOptions& options) {
    if (conninfo.empty())
      return absl::InvalidArgumentError("PostgreSQL connection string is empty");
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
    auto store = std::unique_ptr<PostgresStore>(new PostgresStore(
        conninfo, options.replica.empty() ? DefaultReplicaName() : options.replica,
        static_cast<std::size_t>(options.connections)));
    Session session = store->pool_.Take();
    Link& link = *session;
    if (Status s = store->pool_.Connect(link); !s.ok()) return s;
    Status schema = store->pool_.Transaction(link, "create the schema", [&] {
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

  StatusOr<std::uint64_t> AddJob(const StoredJob& job) override {
    if (Status s = Storable(job); !s.ok()) return s;
    Session session = pool_.Take();
    Link& link = *session;
    // The notification wakes every replica's listener (WaitForJobs) at the commit.
    StatusOr<Result> r = pool_.RetryingExec(
        link,
        "WITH stored AS (INSERT INTO fairgate_durable_jobs "
        "(type, id, fairness_key, payload, submitted_at) "
        "VALUES ($1, $2, $3, $4, $5) RETURNING sequence) "
        "SELECT sequence, pg_notify('" FAIRGATE_PG_JOBS_CHANNEL "', '') FROM stored",
        {{job.type}, {job.id}, {job.fairness_key}, {job.payload, true}, {Number(job.submitted_at)}},
        "store a durable job");
    if (!r.ok()) return r.status();
    return std::strtoull(PQgetvalue(r->get(), 0, 0), nullptr, 10);
  }

  // One statement: the batch's sequence numbers are drawn first and given out in ascending order
  // to the jobs in the order of the batch (the order nextval ran in is not what numbers them),
  // then the rows go in from arrays, one parameter per column.
  StatusOr<std::vector<std::uint64_t>> AddJobs(const std::vector<StoredJob>& jobs) override {
    if (jobs.empty()) return std::vector<std::uint64_t>{};
    std::vector<std::string> types, ids, keys, payloads, submitted;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const StoredJob& job = jobs[i];
      if (Status s = Storable(job); !s.ok()) {
        return Status(s.code(), absl::StrCat("job ", i, " of the batch: ", s.message()));
      }
      types.push_back(job.type);
      ids.push_back(job.id);
      keys.push_back(job.fairness_key);
      payloads.push_back(absl::BytesToHexString(job.payload));
      submitted.push_back(Number(job.submitted_at));
    }
    Session session = pool_.Take();
    Link& link = *session;
    StatusOr<Result> r = pool_.RetryingExec(
        link,
        "WITH numbers AS MATERIALIZED (SELECT nextval(pg_get_serial_sequence("
        "'fairgate_durable_jobs', 'sequence')) AS sequence "
        "FROM generate_series(1, cardinality($1::text[]))), "
        "ranked AS (SELECT sequence, row_number() OVER (ORDER BY sequence) AS n FROM numbers), "
        "stored AS (INSERT INTO fairgate_durable_jobs "
        "(sequence, type, id, fairness_key, payload, submitted_at) "
        "SELECT r.sequence, j.type, j.id, j.fairness_key, decode(j.payload, 'hex'), "
        "j.submitted_at FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], "
        "$5::double precision[]) WITH ORDINALITY AS j(type, id, fairness_key, payload, "
        "submitted_at, n) JOIN ranked r USING (n) RETURNING sequence) "
        "SELECT sequence, pg_notify('" FAIRGATE_PG_JOBS_CHANNEL
        "', '') FROM stored "
        "ORDER BY sequence",
        {{TextArray(types)},
         {TextArray(ids)},
         {TextArray(keys)},
         {TextArray(payloads)},
         {TextArray(submitted)}},
        "store a batch of durable jobs");
    if (!r.ok()) return r.status();
    std::vector<std::uint64_t> sequences;
    sequences.reserve(jobs.size());
    for (int row = 0; row < PQntuples(r->get()); ++row) {
      sequences.push_back(std::strtoull(PQgetvalue(r->get(), row, 0), nullptr, 10));
    }
    if (sequences.size() != jobs.size()) {
      return absl::InternalError(
          absl::StrCat("PostgreSQL: store a batch of durable jobs: ", jobs.size(), " given, ",
                       sequences.size(), " stored"));
    }
    return sequences;
  }

  // The attempt a claim counted is confirmed here without a round trip while the lease is surely
  // this replica's; after that (a replica that stalled), the server checks the lease.
  StatusOr<std::uint32_t> BeginAttempt(std::uint64_t sequence) override {
    const LeaseBook::LocalBegin local = book_.BeginLocally(sequence, SteadyClock::now());
    if (local.attempt) return *local.attempt;
    const bool counted = local.counted;
    Session session = pool_.Take();
    Link& link = *session;
    StatusOr<Result> r = pool_.RetryingExec(
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

  Status RemoveJob(std::uint64_t sequence) override {
    Session session = pool_.Take();
    Link& link = *session;
    return Finish(link, sequence,
                  "DELETE FROM fairgate_durable_jobs WHERE sequence = $1" FAIRGATE_PG_FENCED(
                      2) " RETURNING 1",
                  {}, "remove", /*missing_is_ok=*/true);
  }

  // One statement, so one commit: the jobs this replica holds with their tokens (or that nobody
  // holds) are deleted, and every lease taken with their claims is given back (as RemoveJob
  // does, also for a job refused). The jobs not deleted are looked up once, for their refusals.
  StatusOr<std::vector<Status>> RemoveJobs(const std::vector<std::uint64_t>& sequences) override {
    std::vector<Status> removed(sequences.size());
    if (sequences.empty()) return removed;
    std::vector<std::string> numbers, tokens, resources;
    for (std::uint64_t sequence : sequences) {
      numbers.push_back(std::to_string(sequence));
      const std::optional<std::uint64_t> token = book_.TokenOf(sequence);
      tokens.push_back(token ? std::to_string(*token) : "NULL");
      for (std::uint64_t lease : book_.ClaimLeases(sequence)) {
        resources.push_back(std::to_string(lease));
      }
    }
    Session session = pool_.Take();
    Link& link = *session;
    StatusOr<Result> r = pool_.RetryingExec(
        link,
        "WITH gone AS (DELETE FROM fairgate_durable_jobs j USING unnest($1::bigint[], "
        "$2::bigint[]) AS r(sequence, token) WHERE j.sequence = r.sequence "
        "AND j.token IS NOT DISTINCT FROM r.token RETURNING j.sequence), "
        "freed AS (" FAIRGATE_PG_DROP_LEASES_BY_TOKEN("$3") ") SELECT sequence FROM gone",
        {{TextArray(numbers)},
         {absl::StrCat("{", absl::StrJoin(tokens, ","), "}")},  // NULL unquoted: no token
         {TextArray(resources)}},
        "remove durable jobs");
    if (!r.ok()) {
      // Not renewed from now on, as a failed RemoveJob's: the jobs' leases and the claims'
      // lapse, unless a later try gives them back first.
      for (std::uint64_t sequence : sequences) book_.StopRenewing(sequence);
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
      (void)book_.TakeClaimLeases(sequence);  // given back with the batch, whatever else
      if (!gone.contains(sequence) && !looked_up.ok()) {
        removed[i] = looked_up;
        continue;
      }
      // As Refusal: gone although this replica still held it (another claimed it after this
      // one's lease passed, and finished it) is a refusal too; gone and never held is done.
      if (gone.contains(sequence) || (!stored.contains(sequence) && !book_.Holds(sequence))) {
        book_.Forget(sequence);
        continue;
      }
      removed[i] = LeaseLost("remove", sequence);
      book_.Refused(sequence);
    }
    return removed;
  }

  Status DeferJob(std::uint64_t sequence, double not_before, std::string_view error) override {
    Session session = pool_.Take();
    Link& link = *session;
    return Finish(link, sequence,
                  "UPDATE fairgate_durable_jobs SET not_before = $3, last_error = $4, "
                  "holder = NULL, lease_until = NULL, token = NULL "
                  "WHERE sequence = $1" FAIRGATE_PG_FENCED(2) " RETURNING 1",
                  {{Number(not_before)}, {std::string(error)}}, "defer", false);
  }

  Status KillJob(std::uint64_t sequence, std::string_view error) override {
    Session session = pool_.Take();
    Link& link = *session;
    return Finish(link, sequence,
                  "UPDATE fairgate_durable_jobs SET dead = true, last_error = $3, "
                  "attempts = attempts - $4, holder = NULL, lease_until = NULL, token = NULL "
                  "WHERE sequence = $1" FAIRGATE_PG_FENCED(2) " RETURNING 1",
                  {{std::string(error)}, UnbegunAttempt(sequence)}, "move to the dead jobs", false);
  }

  Status ReleaseJob(std::uint64_t sequence) override {
    Session session = pool_.Take();
    Link& link = *session;
    // Given back: any replica may claim it at once (the notification wakes their listeners).
    return Finish(link, sequence,
                  "UPDATE fairgate_durable_jobs SET attempts = attempts - $3, holder = NULL, "
                  "lease_until = NULL, token = NULL WHERE sequence = $1" FAIRGATE_PG_FENCED(
                      2) " RETURNING pg_notify('" FAIRGATE_PG_JOBS_CHANNEL "', '')",
                  {UnbegunAttempt(sequence)}, "release", false);
  }

  Status WaitForJobs(double timeout_seconds) override {
    std::lock_guard lock(listen_mutex_);
    PGconn* c = listener_.get();
    if (c == nullptr || PQstatus(c) != CONNECTION_OK) {
      listener_.reset(PQconnectdb(pool_.conninfo().c_str()));
      c = listener_.get();
      Result listen(PQstatus(c) == CONNECTION_OK ? PQexec(c, "LISTEN " FAIRGATE_PG_JOBS_CHANNEL)
                                                 : nullptr);
      if (listen == nullptr || PQresultStatus(listen.get()) != PGRES_COMMAND_OK) {
        Status s = absl::UnavailableError(
            absl::StrCat("PostgreSQL: listen for stored jobs: ", ErrorOf(c)));
        listener_.reset();
        return s;
      }
      // Jobs stored before this connection listened were not notified to it: a claim now finds
      // them.
      return absl::OkStatus();
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

  StatusOr<std::uint64_t> AcquireResource(std::string_view group, std::string_view id, int limit,
                                          double lease_seconds) override {
    Session session = pool_.Take();
    Link& link = *session;
    // Two replicas may pick the same free slot; the one that loses finds it taken, and tries
    // the next free one: at most `limit` rounds.
    for (int round = 0; round < std::max(limit, 1); ++round) {
      StatusOr<Result> r = pool_.RetryingExec(link, kTakeSlot,
                                              {{std::string(group)},
                                               {std::string(id)},
                                               {replica_},
                                               {std::to_string(limit)},
                                               {Number(lease_seconds)}},
                                              "take a resource's lease");
      if (!r.ok()) return r.status();
      if (PQntuples(r->get()) == 1) {
        const std::uint64_t token = std::strtoull(PQgetvalue(r->get(), 0, 0), nullptr, 10);
        book_.AddResourceLease(token);
        return token;
      }
      StatusOr<Result> free =
          Exec(link,
               "SELECT count(*) FROM generate_series(0, $3::int - 1) AS s "
               "WHERE NOT EXISTS (SELECT 1 FROM fairgate_resource_leases l WHERE l.grp = $1 "
               "  AND l.id = $2 AND l.slot = s AND l.lease_until >= " FAIRGATE_PG_NOW ")",
               {{std::string(group)}, {std::string(id)}, {std::to_string(limit)}},
               "count a resource's free slots");
      if (!free.ok()) return free.status();
      if (std::atoi(PQgetvalue(free->get(), 0, 0)) == 0) return 0;
    }
    return 0;
  }

  Status ReleaseResource(std::string_view group, std::string_view id,
                         std::uint64_t token) override {
    Session session = pool_.Take();
    Link& link = *session;
    book_.DropResourceLease(token);
    return pool_
        .RetryingExec(
            link, "DELETE FROM fairgate_resource_leases WHERE grp = $1 AND id = $2 AND token = $3",
            {{std::string(group)}, {std::string(id)}, {std::to_string(token)}},
            "release a resource's lease")
        .status();
  }

  StatusOr<std::vector<SavedKey>> ShareKeyCosts(const std::vector<SavedKey>& charged,
                                                const std::vector<std::string>& keys) override {
    std::vector<std::string> names, costs, idle;
    for (const SavedKey& k : charged) {
      names.push_back(k.key);
      costs.push_back(Number(k.accumulated_cost));
      idle.push_back(Number(k.idle_since));
    }
    Session session = pool_.Take();
    Link& link = *session;
    std::vector<SavedKey> totals;
    Status status = pool_.Transaction(link, "share keys' costs", [&]() -> Status {
      totals.clear();
      // In key order, so that replicas sharing at once lock the rows in one order.
      if (!names.empty()) {
        Status added =
            Exec(link,
                 "INSERT INTO fairgate_keys (key, accumulated_cost, idle_since) "
                 "SELECT key, cost, idle FROM unnest($1::text[], $2::double precision[], "
                 "$3::double precision[]) AS c(key, cost, idle) ORDER BY key "
                 "ON CONFLICT (key) DO UPDATE SET accumulated_cost = greatest(0, "
                 "fairgate_keys.accumulated_cost + EXCLUDED.accumulated_cost), "
                 "idle_since = greatest(fairgate_keys.idle_since, EXCLUDED.idle_since)",
                 {{TextArray(names)}, {TextArray(costs)}, {TextArray(idle)}}, "add keys' costs")
                .status();
        if (!added.ok()) return added;
        // A key the store did not have yet (or had forgotten) starts at what was added.
        added = Exec(link,
                     "UPDATE fairgate_keys SET accumulated_cost = 0 "
                     "WHERE accumulated_cost < 0 AND key = ANY($1::text[])",
                     {{TextArray(names)}}, "add keys' costs")
                    .status();
        if (!added.ok()) return added;
      }
      StatusOr<Result> r = Exec(link,
                                "SELECT key, accumulated_cost, idle_since FROM fairgate_keys "
                                "WHERE key = ANY($1::text[])",
                                {{TextArray(keys)}}, "read keys' costs");
      if (!r.ok()) return r.status();
      for (int i = 0; i < PQntuples(r->get()); ++i) {
        totals.push_back({Text(*r, i, 0), Double(*r, i, 1), Double(*r, i, 2)});
      }
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return totals;
  }

  StatusOr<std::vector<StoredJob>> ClaimJobs(const std::vector<ClaimableType>& types,
                                             std::size_t max_jobs, double lease_seconds) override {
    std::vector<StoredJob> jobs;
    if (types.empty() || max_jobs == 0) return jobs;
    std::vector<std::string> names, tiers;
    bool leases = false;
    for (const ClaimableType& t : types) {
      names.push_back(t.type);
      tiers.push_back(std::to_string(t.priority));
      leases |= t.fleet_cap > 0 || !t.conflict_group.empty();
    }
    Session session = pool_.Take();
    Link& link = *session;
    const SteadyClock::time_point sure_until = SureUntil(lease_seconds);
    if (leases) {
      absl::flat_hash_map<std::uint64_t, std::vector<std::uint64_t>> taken;
      Status claimed = pool_.Transaction(link, "claim durable jobs", [&] {
        return ClaimWithLeases(link, types, names, tiers, max_jobs, lease_seconds, jobs, taken);
      });
      if (!claimed.ok()) return claimed;
      for (const StoredJob& job : jobs) {
        book_.Claimed(job.sequence, job.lease_token, std::move(taken[job.sequence]),
                      job.attempts + 1, sure_until);
      }
      return jobs;
    }
    StatusOr<Result> r = pool_.RetryingExec(link, kClaim,
                                            {{TextArray(names)},
                                             {TextArray(tiers)},
                                             {std::to_string(max_jobs)},
                                             {replica_},
                                             {Number(lease_seconds)},
                                             {Number(WallSeconds())}},
                                            "claim durable jobs");
    if (!r.ok()) return r.status();
    for (int i = 0; i < PQntuples(r->get()); ++i) {
      StatusOr<StoredJob> job = JobAt(*r, i);
      if (!job.ok()) return job.status();
      job->lease_token = std::strtoull(PQgetvalue(r->get(), i, 9), nullptr, 10);
      book_.Claimed(job->sequence, job->lease_token, {}, job->attempts + 1, sure_until);
      jobs.push_back(*std::move(job));
    }
    std::sort(jobs.begin(), jobs.end(),
              [](const StoredJob& a, const StoredJob& b) { return a.sequence < b.sequence; });
    return jobs;
  }

  StatusOr<std::size_t> RenewLeases(double lease_seconds) override {
    Session session = pool_.Take();
    Link& link = *session;
    const LeaseBook::Renewal renewal = book_.ToRenew();
    std::vector<std::string> renewed, resources;
    for (std::uint64_t token : renewal.jobs) renewed.push_back(std::to_string(token));
    for (std::uint64_t token : renewal.resources) resources.push_back(std::to_string(token));
    std::size_t held = 0;
    // `sql`: $1 the replica, $2 the lease's length, $3 the tokens; the jobs' renewal returns
    // their sequences.
    auto renew = [&](const char* sql, const std::vector<std::string>& tokens) -> StatusOr<Result> {
      if (tokens.empty()) return Result();
      StatusOr<Result> r = pool_.RetryingExec(
          link, sql, {{replica_}, {Number(lease_seconds)}, {TextArray(tokens)}}, "renew leases");
      if (r.ok())
        held += static_cast<std::size_t>(std::strtoull(PQcmdTuples(r->get()), nullptr, 10));
      return r;
    };
    const SteadyClock::time_point sure_until = SureUntil(lease_seconds);
    StatusOr<Result> jobs = renew("UPDATE fairgate_durable_jobs SET lease_until = " FAIRGATE_PG_NOW
                                  " + $2 WHERE holder = $1 AND token = ANY($3::bigint[]) "
                                  "RETURNING sequence",
                                  renewed);
    if (!jobs.ok()) return jobs.status();
    if (*jobs != nullptr) {
      for (int i = 0; i < PQntuples(jobs->get()); ++i) {
        book_.Renewed(std::strtoull(PQgetvalue(jobs->get(), i, 0), nullptr, 10), sure_until);
      }
    }
    if (StatusOr<Result> r =
            renew("UPDATE fairgate_resource_leases SET lease_until = " FAIRGATE_PG_NOW
                  " + $2 WHERE holder = $1 AND token = ANY($3::bigint[])",
                  resources);
        !r.ok()) {
      return r.status();
    }
    return held;
  }

  StatusOr<std::vector<StoredJob>> LiveJobs() override { return Jobs(false); }
  StatusOr<std::vector<StoredJob>> DeadJobs() override { return Jobs(true); }

  Status SaveLearned(const LearnedState& changed, double forget_estimates_before,
                     double forget_keys_before) override {
    Session session = pool_.Take();
    Link& link = *session;
    return pool_.Transaction(link, "flush", [&]() -> Status {
      for (const SavedEstimate& e : changed.estimates) {
        Status s =
            Exec(link,
                 "INSERT INTO fairgate_estimates VALUES ($1, $2, $3, $4) "
                 "ON CONFLICT (type, id) DO UPDATE SET seconds = EXCLUDED.seconds, "
                 "last_used = EXCLUDED.last_used",
                 {{e.type}, {e.id}, {Number(e.seconds)}, {Number(e.last_used)}}, "save an estimate")
                .status();
        if (!s.ok()) return s;
      }
      for (const SavedKey& k : changed.keys) {
        Status s = Exec(link,
                        "INSERT INTO fairgate_keys VALUES ($1, $2, $3) "
                        "ON CONFLICT (key) DO UPDATE SET accumulated_cost = "
                        "EXCLUDED.accumulated_cost, idle_since = EXCLUDED.idle_since",
                        {{k.key}, {Number(k.accumulated_cost)}, {Number(k.idle_since)}},
                        "save a key's cost")
                       .status();
        if (!s.ok()) return s;
      }
      for (const SavedSchedule& p : changed.schedules) {
        Status s = Exec(link,
                        "INSERT INTO fairgate_schedules VALUES ($1, $2, $3) "
                        "ON CONFLICT (type, id) DO UPDATE SET last_run_end = "
                        "EXCLUDED.last_run_end",
                        {{p.type}, {p.id}, {Number(p.last_run_end)}}, "save a periodic schedule")
                       .status();
        if (!s.ok()) return s;
      }
      if (Status s = Exec(link, "DELETE FROM fairgate_estimates WHERE last_used < $1",
                          {{Number(forget_estimates_before)}}, "forget old estimates")
                         .status();
          !s.ok()) {
        return s;
      }
      return Exec(link, "DELETE FROM fairgate_keys WHERE idle_since < $1",
                  {{Number(forget_keys_before)}}, "forget idle keys")
          .status();
    });
  }

  StatusOr<LearnedState> LoadLearned() override {
    Session session = pool_.Take();
    Link& link = *session;
    LearnedState state;
    StatusOr<Result> e = pool_.RetryingExec(
        link, "SELECT type, id, seconds, last_used FROM fairgate_estimates", {}, "load estimates");
    if (!e.ok()) return e.status();
    for (int i = 0; i < PQntuples(e->get()); ++i) {
      state.estimates.push_back(
          {Text(*e, i, 0), Text(*e, i, 1), Double(*e, i, 2), Double(*e, i, 3)});
    }
    StatusOr<Result> k =
        pool_.RetryingExec(link, "SELECT key, accumulated_cost, idle_since FROM fairgate_keys", {},
                           "load keys' costs");
    if (!k.ok()) return k.status();
    for (int i = 0; i < PQntuples(k->get()); ++i) {
      state.keys.push_back({Text(*k, i, 0), Double(*k, i, 1), Double(*k, i, 2)});
    }
    StatusOr<Result> p =
        pool_.RetryingExec(link, "SELECT type, id, last_run_end FROM fairgate_schedules", {},
                           "load periodic schedules");
    if (!p.ok()) return p.status();
    for (int i = 0; i < PQntuples(p->get()); ++i) {
      state.schedules.push_back({Text(*p, i, 0), Text(*p, i, 1), Double(*p, i, 2)});
    }
    return state;
  }

 private:
  PostgresStore(std::string conninfo, std::string replica, std::size_t connections)
      : pool_(std::move(conninfo), connections), replica_(std::move(replica)) {}

  // PostgreSQL's text cannot hold a NUL byte, and libpq would cut a parameter at the first one:
  // a job's names with one are refused rather than stored cut short. (The payload is bytea.)
  static Status Storable(const StoredJob& job) {
    for (const auto& [name, value] : {std::pair<const char*, const std::string*>{"type", &job.type},
                                      {"id", &job.id},
                                      {"fairness key", &job.fairness_key}}) {
      if (value->find('\0') != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("PostgreSQL store: the job's ", name,
                                                       " holds a NUL byte, which PostgreSQL's text "
                                                       "cannot"));
      }
    }
    return absl::OkStatus();
  }

  static double WallSeconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  StatusOr<std::vector<StoredJob>> Jobs(bool dead) {
    Session session = pool_.Take();
    Link& link = *session;
    const std::string sql =
        absl::StrCat("SELECT ", kJobColumns, " FROM fairgate_durable_jobs WHERE ",
                     dead ? "dead" : "NOT dead", " ORDER BY sequence");
    StatusOr<Result> r = pool_.RetryingExec(link, sql.c_str(), {}, "load durable jobs");
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
  static StatusOr<StoredJob> JobAt(const Result& r, int row) {
    StoredJob job;
    job.sequence = std::strtoull(PQgetvalue(r.get(), row, 0), nullptr, 10);
    job.type = Text(r, row, 1);
    job.id = Text(r, row, 2);
    job.fairness_key = Text(r, row, 3);
    std::size_t length = 0;
    unsigned char* bytes = PQunescapeBytea(
        reinterpret_cast<const unsigned char*>(PQgetvalue(r.get(), row, 4)), &length);
    if (bytes == nullptr) return absl::InternalError("PostgreSQL: a payload cannot be decoded");
    job.payload.assign(reinterpret_cast<const char*>(bytes), length);
    PQfreemem(bytes);
    job.submitted_at = Double(r, row, 5);
    job.attempts =
        static_cast<std::uint32_t>(std::strtoul(PQgetvalue(r.get(), row, 6), nullptr, 10));
    job.not_before = Double(r, row, 7);
    job.last_error = Text(r, row, 8);
    return job;
  }

  // The token this replica holds `sequence` with, as a parameter: NULL if it holds none.
  Param TokenOf(std::uint64_t sequence) const {
    const std::optional<std::uint64_t> token = book_.TokenOf(sequence);
    if (!token) return {"", false, true};
    return {std::to_string(*token)};
  }

  // As a parameter: 1 when this replica's claim of `sequence` counted an attempt that never began
  // (a job given back or killed unrun gives it back), else 0.
  Param UnbegunAttempt(std::uint64_t sequence) const {
    return {book_.AttemptUnbegun(sequence) ? "1" : "0"};
  }

  // Until when a lease of `lease_seconds` given by a statement sent now is surely this
  // replica's (LeaseBook::BeginLocally).
  static SteadyClock::time_point SureUntil(double lease_seconds) {
    return SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                    std::chrono::duration<double>(lease_seconds * 0.9));
  }

  // Why a fenced statement changed no row: the job is not stored (NotFound) or its lease is or
  // was another's since this replica claimed it (Aborted).
  Status Refusal(Link& link, std::uint64_t sequence, const char* what) {
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

  // The refusal of `what` ("remove", "defer", ...) done to a job whose lease this replica lost.
  Status LeaseLost(const char* what, std::uint64_t sequence) const {
    return absl::AbortedError(absl::StrCat("PostgreSQL: cannot ", what, " durable job ", sequence,
                                           ": replica ", replica_, " no longer holds its lease"));
  }

  // Runs the fenced statement `sql` ($1 the sequence, $2 the token, `more` from $3) that ends
  // this replica's part in a job, and forgets the job's token once it is done with it. The
  // leases taken with the claim are given back whatever the outcome (after a failure to reach
  // the server they lapse: no longer renewed).
  Status Finish(Link& link, std::uint64_t sequence, const char* sql, std::vector<Param> more,
                const char* what, bool missing_is_ok) {
    std::vector<Param> params = {{std::to_string(sequence)}, TokenOf(sequence)};
    for (Param& p : more) params.push_back(std::move(p));
    StatusOr<Result> r =
        pool_.RetryingExec(link, sql, params, absl::StrCat(what, " a durable job").c_str());
    Status status = r.status();
    if (r.ok() && PQntuples(r->get()) == 0) {
      status = Refusal(link, sequence, what);
      if (missing_is_ok && status.code() == absl::StatusCode::kNotFound) status = absl::OkStatus();
    }
    // The claim's leases go back with it. When the server was unreachable they are kept, not
    // renewed: the caller's next try of the same call (the scheduler tries again) gives them back
    // with the job, and if none succeeds before they lapse, they lapse.
    if (r.ok()) GiveBackClaimLeases(link, sequence);
    if (status.ok() || status.code() == absl::StatusCode::kNotFound) {
      book_.Forget(sequence);
    } else {
      // Kept after a refusal or a failure (LeaseBook's rules): not renewed, the lease lapses and
      // another replica runs the job again (at least once) unless a later try of the call
      // succeeds first, rather than this one holding a job it is done with for ever.
      book_.StopRenewing(sequence);
    }
    return status;
  }

  // Gives back the leases taken with this replica's claim of `sequence` (a failure leaves them
  // to lapse: the book no longer renews them).
  void GiveBackClaimLeases(Link& link, std::uint64_t sequence) {
    std::vector<std::string> resources;
    for (std::uint64_t token : book_.TakeClaimLeases(sequence)) {
      resources.push_back(std::to_string(token));
    }
    if (resources.empty()) return;
    (void)pool_.RetryingExec(link, kDropLeasesByToken, {{TextArray(resources)}},
                             "release a claim's leases");
  }

  // The body of a claim whose types take leases, in the claim's transaction: locks the
  // candidates in claim order (kClaimCandidates), chooses the first max_jobs whose leases have a
  // free slot (counted once for all of them: store::PlanClaim), takes those leases in (group, id)
  // order (so that replicas claiming at once never wait on each other in a cycle), drops a job
  // whose lease another replica took meanwhile (with the leases it took), and claims the rest:
  // `jobs`, and the tokens of each one's leases in `taken`.
  Status ClaimWithLeases(Link& link, const std::vector<ClaimableType>& types,
                         const std::vector<std::string>& names,
                         const std::vector<std::string>& tiers, std::size_t max_jobs,
                         double lease_seconds, std::vector<StoredJob>& jobs,
                         absl::flat_hash_map<std::uint64_t, std::vector<std::uint64_t>>& taken) {
    jobs.clear();
    taken.clear();
    StatusOr<std::vector<ClaimCandidate>> candidates =
        LockCandidates(link, types, names, tiers, max_jobs);
    if (!candidates.ok()) return candidates.status();
    StatusOr<HeldSlots> held = CountHeldSlots(link, *candidates);
    if (!held.ok()) return held.status();
    const ClaimPlan plan = PlanClaim(*candidates, *std::move(held), max_jobs);
    // The tokens of each chosen job's leases, in the order of its needs; 0 where none was taken.
    std::vector<std::vector<std::uint64_t>> tokens(plan.chosen.size());
    for (std::size_t j = 0; j < plan.chosen.size(); ++j) {
      tokens[j].assign((*candidates)[plan.chosen[j]].needs.size(), 0);
    }
    StatusOr<std::vector<std::string>> claimed =
        TakePlannedLeases(link, *candidates, plan, lease_seconds, tokens);
    if (!claimed.ok()) return claimed.status();
    if (claimed->empty()) return absl::OkStatus();
    StatusOr<Result> r =
        Exec(link,
             "UPDATE fairgate_durable_jobs j SET holder = $2, lease_until = " FAIRGATE_PG_NOW
             " + $3, token = nextval('fairgate_lease_tokens'), " FAIRGATE_PG_COUNT_ATTEMPT
             "WHERE sequence = ANY($1::bigint[]) "
             "RETURNING sequence, type, id, fairness_key, payload, submitted_at, attempts - 1, "
             "  not_before, last_error, token",
             {{TextArray(*claimed)}, {replica_}, {Number(lease_seconds)}}, "claim durable jobs");
    if (!r.ok()) return r.status();
    absl::flat_hash_map<std::uint64_t, std::size_t> index;
    for (std::size_t j = 0; j < plan.chosen.size(); ++j) {
      index[(*candidates)[plan.chosen[j]].sequence] = j;
    }
    for (int i = 0; i < PQntuples(r->get()); ++i) {
      StatusOr<StoredJob> job = JobAt(*r, i);
      if (!job.ok()) return job.status();
      job->lease_token = std::strtoull(PQgetvalue(r->get(), i, 9), nullptr, 10);
      const std::vector<std::uint64_t>& leases = tokens[index.at(job->sequence)];
      // The last lease taken is the resource's when it has one (taken after the cap's).
      job->resource_token = leases.empty() ? 0 : leases.back();
      taken[job->sequence] = leases;
      jobs.push_back(*std::move(job));
    }
    std::sort(jobs.begin(), jobs.end(),
              [](const StoredJob& a, const StoredJob& b) { return a.sequence < b.sequence; });
    return absl::OkStatus();
  }

  // ClaimWithLeases' first step: the candidates, locked, in claim order, each with the leases it
  // needs (its type's fleet cap, then its resource).
  StatusOr<std::vector<ClaimCandidate>> LockCandidates(Link& link,
                                                       const std::vector<ClaimableType>& types,
                                                       const std::vector<std::string>& names,
                                                       const std::vector<std::string>& tiers,
                                                       std::size_t max_jobs) {
    absl::flat_hash_map<std::string, const ClaimableType*> by_name;
    std::vector<std::string> groups_of, limits_of, caps_of;
    for (const ClaimableType& t : types) {
      by_name[t.type] = &t;
      groups_of.push_back(t.conflict_group);
      limits_of.push_back(std::to_string(t.conflict_limit));
      caps_of.push_back(std::to_string(t.fleet_cap));
    }
    StatusOr<Result> c = Exec(link, kClaimCandidates,
                              {{TextArray(names)},
                               {TextArray(tiers)},
                               {std::to_string(max_jobs * 4)},
                               {Number(WallSeconds())},
                               {TextArray(groups_of)},
                               {TextArray(limits_of)},
                               {TextArray(caps_of)},
                               {std::string(kFleetCapGroup)}},
                              "claim durable jobs");
    if (!c.ok()) return c.status();
    std::vector<ClaimCandidate> candidates;
    for (int i = 0; i < PQntuples(c->get()); ++i) {
      ClaimCandidate candidate{std::strtoull(PQgetvalue(c->get(), i, 0), nullptr, 10), {}};
      const ClaimableType& t = *by_name.at(Text(*c, i, 1));
      if (t.fleet_cap > 0)
        candidate.needs.push_back({std::string(kFleetCapGroup), t.type, t.fleet_cap});
      if (!t.conflict_group.empty()) {
        candidate.needs.push_back({t.conflict_group, Text(*c, i, 2), t.conflict_limit});
      }
      candidates.push_back(std::move(candidate));
    }
    return candidates;
  }

  // ClaimWithLeases' second step: the slots held now (unexpired leases) of every resource the
  // candidates need.
  StatusOr<HeldSlots> CountHeldSlots(Link& link, const std::vector<ClaimCandidate>& candidates) {
    std::vector<std::string> groups, ids;
    for (const ClaimCandidate& candidate : candidates) {
      for (const LeaseNeed& n : candidate.needs) {
        groups.push_back(n.group);
        ids.push_back(n.id);
      }
    }
    HeldSlots held;
    if (groups.empty()) return held;
    StatusOr<Result> h =
        Exec(link,
             "SELECT l.grp, l.id, count(*) FROM fairgate_resource_leases l "
             "JOIN (SELECT DISTINCT * FROM unnest($1::text[], $2::text[]) AS r(grp, id)) r "
             "ON l.grp = r.grp AND l.id = r.id WHERE l.lease_until >= " FAIRGATE_PG_NOW
             " GROUP BY l.grp, l.id",
             {{TextArray(groups)}, {TextArray(ids)}}, "count resources' leases");
    if (!h.ok()) return h.status();
    for (int i = 0; i < PQntuples(h->get()); ++i) {
      held[{Text(*h, i, 0), Text(*h, i, 1)}] = std::atoi(PQgetvalue(h->get(), i, 2));
    }
    return held;
  }

  // ClaimWithLeases' third step: takes the plan's leases in its order, into `tokens`. A job one
  // of whose leases another replica took since the slots were counted is dropped, and the
  // leases it took are given back. Returns the sequences of the jobs that have all theirs.
  StatusOr<std::vector<std::string>> TakePlannedLeases(
      Link& link, const std::vector<ClaimCandidate>& candidates, const ClaimPlan& plan,
      double lease_seconds, std::vector<std::vector<std::uint64_t>>& tokens) {
    std::vector<bool> lost(plan.chosen.size(), false);
    for (const ClaimPlan::Take& take : plan.takes) {
      if (lost[take.job]) continue;
      const LeaseNeed& need = candidates[plan.chosen[take.job]].needs[take.need];
      StatusOr<Result> t = Exec(link, kTakeSlot,
                                {{need.group},
                                 {need.id},
                                 {replica_},
                                 {std::to_string(need.limit)},
                                 {Number(lease_seconds)}},
                                "take a resource's lease");
      if (!t.ok()) return t.status();
      if (PQntuples(t->get()) == 1) {
        tokens[take.job][take.need] = std::strtoull(PQgetvalue(t->get(), 0, 0), nullptr, 10);
      } else {
        lost[take.job] = true;  // another replica took the last slot since it was counted
      }
    }
    std::vector<std::string> claimed, dropped;
    for (std::size_t j = 0; j < plan.chosen.size(); ++j) {
      if (!lost[j]) {
        claimed.push_back(std::to_string(candidates[plan.chosen[j]].sequence));
        continue;
      }
      for (std::uint64_t token : tokens[j]) {
        if (token != 0) dropped.push_back(std::to_string(token));
      }
    }
    if (!dropped.empty()) {
      Status s = Exec(link, kDropLeasesByToken, {{TextArray(dropped)}}, "release a claim's leases")
                     .status();
      if (!s.ok()) return s;
    }
    return claimed;
  }

  static std::string Text(const Result& r, int row, int column) {
    return std::string(PQgetvalue(r.get(), row, column),
                       static_cast<std::size_t>(PQgetlength(r.get(), row, column)));
  }
  static double Double(const Result& r, int row, int column) {
    return std::strtod(PQgetvalue(r.get(), row, column), nullptr);
  }

  // The connections: at most the options' `connections`, each used by one call at a time.
  ConnectionPool pool_;
  const std::string replica_;

  LeaseBook book_;  // this replica's claims and leases (thread-safe, its own mutex)

  std::mutex listen_mutex_;  // guards the listener; WaitForJobs runs on one thread
  Connection listener_;      // LISTENs on FAIRGATE_PG_JOBS_CHANNEL; connected on first wait
};

}  // namespace
}  // namespace fairgate::store::postgres

namespace fairgate {

StatusOr<std::unique_ptr<SharedStore>> OpenPostgresStore(const std::string& conninfo,
                                                         const PostgresStoreOptions& options) {
  return store::postgres::PostgresStore::Open(conninfo, options);
}

}  // namespace fairgate
