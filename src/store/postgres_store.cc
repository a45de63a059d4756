// The PostgreSQL store (fairgate/postgres_store.h), on libpq: one connection, text parameters
// and results (payloads as bytea, sent in binary), each method one transaction under the store's
// mutex, retried once on a fresh connection when the connection turned out to be broken.
#include "fairgate/postgres_store.h"

#include <libpq-fe.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace fairgate {
namespace {

constexpr int kSchemaVersion = 1;

// Creates the schema once per database, under an advisory lock so that replicas starting
// together do not race.
constexpr const char* kSchema = R"sql(
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
  SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM fairgate_schema);
)sql";

constexpr const char* kJobColumns =
    "sequence, type, id, fairness_key, payload, submitted_at, attempts, not_before, last_error";

struct ClearResult {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ClearResult>;
struct FinishConnection {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Connection = std::unique_ptr<PGconn, FinishConnection>;

std::string Number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

// One parameter: text, or bytes sent in binary (a bytea).
struct Param {
  std::string value;
  bool binary = false;
};

class PostgresStore final : public Store {
 public:
  static StatusOr<std::unique_ptr<Store>> Open(const std::string& conninfo) {
    if (conninfo.empty())
      return absl::InvalidArgumentError("PostgreSQL connection string is empty");
    auto store = std::unique_ptr<PostgresStore>(new PostgresStore(conninfo));
    std::lock_guard lock(store->mutex_);
    if (Status s = store->Connect(); !s.ok()) return s;
    Status schema = store->Retrying([&]() -> Status {
      if (Status s = store->Exec("BEGIN", {}, "begin creating the schema").status(); !s.ok()) {
        return s;
      }
      if (Status s = store->Exec(kSchema, {}, "create the schema").status(); !s.ok()) {
        (void)store->Exec("ROLLBACK", {}, "roll back");
        return s;
      }
      return store->Exec("COMMIT", {}, "commit the schema").status();
    });
    if (!schema.ok()) return schema;
    StatusOr<Result> version =
        store->Exec("SELECT max(version) FROM fairgate_schema", {}, "read the schema version");
    if (!version.ok()) return version.status();
    const int found = std::atoi(PQgetvalue(version->get(), 0, 0));
    if (found > kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat("PostgreSQL database has fairgate schema ",
                                                        "version ", found, ", newer than this ",
                                                        "fairgate's ", kSchemaVersion));
    }
    return std::unique_ptr<Store>(std::move(store));
  }

  StatusOr<std::uint64_t> AddJob(const StoredJob& job) override {
    std::lock_guard lock(mutex_);
    StatusOr<Result> r = RetryingExec(
        "INSERT INTO fairgate_durable_jobs (type, id, fairness_key, payload, submitted_at) "
        "VALUES ($1, $2, $3, $4, $5) RETURNING sequence",
        {{job.type}, {job.id}, {job.fairness_key}, {job.payload, true}, {Number(job.submitted_at)}},
        "store a durable job");
    if (!r.ok()) return r.status();
    return std::strtoull(PQgetvalue(r->get(), 0, 0), nullptr, 10);
  }

  StatusOr<std::uint32_t> BeginAttempt(std::uint64_t sequence) override {
    std::lock_guard lock(mutex_);
    StatusOr<Result> r = RetryingExec(
        "UPDATE fairgate_durable_jobs SET attempts = attempts + 1 "
        "WHERE sequence = $1 AND NOT dead RETURNING attempts",
        {{std::to_string(sequence)}}, "mark an attempt");
    if (!r.ok()) return r.status();
    if (PQntuples(r->get()) == 0) {
      return absl::NotFoundError(absl::StrCat("durable job ", sequence, " is not stored"));
    }
    return static_cast<std::uint32_t>(std::strtoul(PQgetvalue(r->get(), 0, 0), nullptr, 10));
  }

  Status RemoveJob(std::uint64_t sequence) override {
    std::lock_guard lock(mutex_);
    return RetryingExec("DELETE FROM fairgate_durable_jobs WHERE sequence = $1",
                        {{std::to_string(sequence)}}, "remove a durable job")
        .status();
  }

  Status DeferJob(std::uint64_t sequence, double not_before, std::string_view error) override {
    std::lock_guard lock(mutex_);
    return RetryingExec(
               "UPDATE fairgate_durable_jobs SET not_before = $1, last_error = $2 "
               "WHERE sequence = $3",
               {{Number(not_before)}, {std::string(error)}, {std::to_string(sequence)}},
               "defer a durable job")
        .status();
  }

  Status KillJob(std::uint64_t sequence, std::string_view error) override {
    std::lock_guard lock(mutex_);
    return RetryingExec(
               "UPDATE fairgate_durable_jobs SET dead = true, last_error = $1 WHERE sequence = $2",
               {{std::string(error)}, {std::to_string(sequence)}},
               "move a durable job to the dead jobs")
        .status();
  }

  StatusOr<std::vector<StoredJob>> LiveJobs() override { return Jobs(false); }
  StatusOr<std::vector<StoredJob>> DeadJobs() override { return Jobs(true); }

  Status SaveLearned(const LearnedState& changed, double forget_estimates_before,
                     double forget_keys_before) override {
    std::lock_guard lock(mutex_);
    return Retrying([&]() -> Status {
      if (Status s = Exec("BEGIN", {}, "begin a flush").status(); !s.ok()) return s;
      Status status = [&]() -> Status {
        for (const SavedEstimate& e : changed.estimates) {
          Status s = Exec(
                         "INSERT INTO fairgate_estimates VALUES ($1, $2, $3, $4) "
                         "ON CONFLICT (type, id) DO UPDATE SET seconds = EXCLUDED.seconds, "
                         "last_used = EXCLUDED.last_used",
                         {{e.type}, {e.id}, {Number(e.seconds)}, {Number(e.last_used)}},
                         "save an estimate")
                         .status();
          if (!s.ok()) return s;
        }
        for (const SavedKey& k : changed.keys) {
          Status s = Exec(
                         "INSERT INTO fairgate_keys VALUES ($1, $2, $3) "
                         "ON CONFLICT (key) DO UPDATE SET accumulated_cost = "
                         "EXCLUDED.accumulated_cost, idle_since = EXCLUDED.idle_since",
                         {{k.key}, {Number(k.accumulated_cost)}, {Number(k.idle_since)}},
                         "save a key's cost")
                         .status();
          if (!s.ok()) return s;
        }
        for (const SavedSchedule& p : changed.schedules) {
          Status s = Exec(
                         "INSERT INTO fairgate_schedules VALUES ($1, $2, $3) "
                         "ON CONFLICT (type, id) DO UPDATE SET last_run_end = "
                         "EXCLUDED.last_run_end",
                         {{p.type}, {p.id}, {Number(p.last_run_end)}}, "save a periodic schedule")
                         .status();
          if (!s.ok()) return s;
        }
        if (Status s = Exec("DELETE FROM fairgate_estimates WHERE last_used < $1",
                            {{Number(forget_estimates_before)}}, "forget old estimates")
                           .status();
            !s.ok()) {
          return s;
        }
        return Exec("DELETE FROM fairgate_keys WHERE idle_since < $1",
                    {{Number(forget_keys_before)}}, "forget idle keys")
            .status();
      }();
      if (!status.ok()) {
        (void)Exec("ROLLBACK", {}, "roll back a flush");
        return status;
      }
      return Exec("COMMIT", {}, "commit a flush").status();
    });
  }

  StatusOr<LearnedState> LoadLearned() override {
    std::lock_guard lock(mutex_);
    LearnedState state;
    StatusOr<Result> e = RetryingExec("SELECT type, id, seconds, last_used FROM fairgate_estimates",
                                      {}, "load estimates");
    if (!e.ok()) return e.status();
    for (int i = 0; i < PQntuples(e->get()); ++i) {
      state.estimates.push_back(
          {Text(*e, i, 0), Text(*e, i, 1), Double(*e, i, 2), Double(*e, i, 3)});
    }
    StatusOr<Result> k = RetryingExec("SELECT key, accumulated_cost, idle_since FROM fairgate_keys",
                                      {}, "load keys' costs");
    if (!k.ok()) return k.status();
    for (int i = 0; i < PQntuples(k->get()); ++i) {
      state.keys.push_back({Text(*k, i, 0), Double(*k, i, 1), Double(*k, i, 2)});
    }
    StatusOr<Result> p = RetryingExec("SELECT type, id, last_run_end FROM fairgate_schedules", {},
                                      "load periodic schedules");
    if (!p.ok()) return p.status();
    for (int i = 0; i < PQntuples(p->get()); ++i) {
      state.schedules.push_back({Text(*p, i, 0), Text(*p, i, 1), Double(*p, i, 2)});
    }
    return state;
  }

 private:
  explicit PostgresStore(std::string conninfo) : conninfo_(std::move(conninfo)) {}

  Status Connect() {
    lost_ = false;
    connection_.reset(PQconnectdb(conninfo_.c_str()));
    if (PQstatus(connection_.get()) != CONNECTION_OK) {
      Status s = absl::UnavailableError(
          absl::StrCat("PostgreSQL: connect: ", PQerrorMessage(connection_.get())));
      connection_.reset();
      return s;
    }
    return absl::OkStatus();
  }

  bool Broken() const {
    return lost_ || connection_ == nullptr || PQstatus(connection_.get()) != CONNECTION_OK;
  }

  // Runs `attempt` (one transaction); if it failed on a broken connection, reconnects and runs
  // it once more. A transaction cut by a broken connection was rolled back by the server.
  template <typename Attempt>
  auto Retrying(Attempt attempt) -> decltype(attempt()) {
    if (Broken()) {
      if (Status s = Connect(); !s.ok()) return s;
    }
    auto result = attempt();
    if (result.ok() || !Broken()) return result;
    if (Status s = Connect(); !s.ok()) return s;
    return attempt();
  }

  StatusOr<Result> RetryingExec(const char* sql, const std::vector<Param>& params,
                                const char* what) {
    return Retrying([&] { return Exec(sql, params, what); });
  }

  StatusOr<Result> Exec(const char* sql, const std::vector<Param>& params, const char* what) {
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
    for (const Param& p : params) {
      values.push_back(p.value.data());
      lengths.push_back(static_cast<int>(p.value.size()));
      formats.push_back(p.binary ? 1 : 0);
    }
    Result r(params.empty()
                 ? PQexec(connection_.get(), sql)
                 : PQexecParams(connection_.get(), sql, static_cast<int>(params.size()), nullptr,
                                values.data(), lengths.data(), formats.data(), 0));
    const ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return r;
    const char* state = r ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
    const std::string code = state != nullptr ? state : "";
    const std::string message =
        absl::StrCat("PostgreSQL: ", what, ": ", PQerrorMessage(connection_.get()));
    // No SQLSTATE: libpq's own failure, the connection lost (its status may still say OK).
    if (code.empty()) lost_ = true;
    if (Broken() || code.rfind("08", 0) == 0 || code.rfind("57P", 0) == 0) {
      return absl::UnavailableError(message);  // the connection, or the server shutting down
    }
    if (code == "53100") return absl::ResourceExhaustedError(message);  // disk full
    if (code == "25006" || code == "42501") return absl::FailedPreconditionError(message);
    return absl::InternalError(message);
  }

  StatusOr<std::vector<StoredJob>> Jobs(bool dead) {
    std::lock_guard lock(mutex_);
    const std::string sql =
        absl::StrCat("SELECT ", kJobColumns, " FROM fairgate_durable_jobs WHERE ",
                     dead ? "dead" : "NOT dead", " ORDER BY sequence");
    StatusOr<Result> r = RetryingExec(sql.c_str(), {}, "load durable jobs");
    if (!r.ok()) return r.status();
    std::vector<StoredJob> jobs;
    for (int i = 0; i < PQntuples(r->get()); ++i) {
      StoredJob job;
      job.sequence = std::strtoull(PQgetvalue(r->get(), i, 0), nullptr, 10);
      job.type = Text(*r, i, 1);
      job.id = Text(*r, i, 2);
      job.fairness_key = Text(*r, i, 3);
      std::size_t length = 0;
      unsigned char* bytes = PQunescapeBytea(
          reinterpret_cast<const unsigned char*>(PQgetvalue(r->get(), i, 4)), &length);
      if (bytes == nullptr) return absl::InternalError("PostgreSQL: a payload cannot be decoded");
      job.payload.assign(reinterpret_cast<const char*>(bytes), length);
      PQfreemem(bytes);
      job.submitted_at = Double(*r, i, 5);
      job.attempts =
          static_cast<std::uint32_t>(std::strtoul(PQgetvalue(r->get(), i, 6), nullptr, 10));
      job.not_before = Double(*r, i, 7);
      job.last_error = Text(*r, i, 8);
      jobs.push_back(std::move(job));
    }
    return jobs;
  }

  static std::string Text(const Result& r, int row, int column) {
    return std::string(PQgetvalue(r.get(), row, column),
                       static_cast<std::size_t>(PQgetlength(r.get(), row, column)));
  }
  static double Double(const Result& r, int row, int column) {
    return std::strtod(PQgetvalue(r.get(), row, column), nullptr);
  }

  const std::string conninfo_;
  std::mutex mutex_;  // one call at a time on the one connection
  Connection connection_;
  bool lost_ = false;  // a call failed in a way only a new connection can mend
};

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo) {
  return PostgresStore::Open(conninfo);
}

}  // namespace fairgate
