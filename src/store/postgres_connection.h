// The PostgreSQL store's connections (postgres_store.cc): libpq's handles, a pool of connections
// each used by one call at a time, and statements run on one, prepared once per connection and
// retried once on a fresh connection when it turned out to be broken (a transaction not run
// again if the server says it committed). Knows nothing of jobs or leases. Internal to src/store.
#ifndef FAIRGATE_STORE_POSTGRES_CONNECTION_H_
#define FAIRGATE_STORE_POSTGRES_CONNECTION_H_

#include <libpq-fe.h>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "fairgate/status.h"

namespace fairgate::store::postgres {

// libpq's message of the connection's last error, without the newline it ends with.
absl::string_view ErrorOf(const PGconn* connection);

struct ClearResult {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ClearResult>;
struct FinishConnection {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Connection = std::unique_ptr<PGconn, FinishConnection>;

// One connection of a store's pool and what belongs to it. Connected on first use.
struct Link {
  Connection pg;
  bool lost = false;  // a call failed in a way only a new connection can mend
  absl::flat_hash_map<std::string, std::string> prepared;  // SQL -> its statement's name
};

// A double as text that reads back to the same double.
std::string Number(double value);

// One parameter: text, or bytes sent in binary (a bytea), or SQL NULL.
struct Param {
  std::string value;
  bool binary = false;
  bool null = false;
};

// A text[] literal of `items`.
std::string TextArray(const std::vector<std::string>& items);

// Whether PostgreSQL's text holds `s` as it is: UTF-8 without a NUL byte. A UTF8 database refuses
// what is not UTF-8 (failing the statement that passed it), and libpq cuts a text parameter at a
// NUL.
bool TextCanHold(absl::string_view s);
// OK if TextCanHold(s), else InvalidArgument: "PostgreSQL store: <what> must be UTF-8 ...".
Status RequireText(absl::string_view s, absl::string_view what);
// `s` as PostgreSQL's text can hold it: each byte that is not part of a UTF-8 character, and each
// NUL, replaced by U+FFFD. For what fairgate writes for people to read (an attempt's error,
// which quotes whatever a handler's status says), where refusing would lose the whole of it.
std::string AsText(absl::string_view s);

// Whether `link` must be connected again before it is used.
bool Broken(const Link& link);

// Runs one statement on `link` (prepared once per connection when it has parameters): its result,
// or a status for what went wrong (`what` names it): Unavailable for the connection or a server
// shutting down (the link is then marked lost), ResourceExhausted for a full disk,
// FailedPrecondition for a read-only server or a missing privilege, Internal otherwise.
StatusOr<Result> Exec(Link& link, const char* sql, const std::vector<Param>& params,
                      const char* what);

// Runs `statement` (statements on `link`) on plans that PostgreSQL makes once a connection and
// that read each table by an index scan where an index serves (plan_cache_mode =
// force_generic_plan, enable_seqscan = off and enable_bitmapscan = off, for its triggers'
// statements too), then gives the session its own settings back. Once a connection: the server
// would otherwise plan a prepared statement again for each call's arguments whenever it judged a
// custom plan better (1-2 ms a claim). By index: a plan made once must not depend on how large a
// table was when it was made. A claim planned over a few thousand jobs, its statistics saying so,
// joined its candidates with a sequential scan of the whole table, dead rows too, and kept it as
// the jobs' churn grew the table until autovacuum's next analyze: claims from 2.5 to 25 ms in a
// minute (bench/README.md, "How a claim reads"). By an index scan, not a bitmap scan: an index scan
// marks the entries of rows dead to everyone as it passes them, and later scans step over them; a
// bitmap scan does not, so a plan made over an empty holder index (a fresh database) read again, at
// every claim, every entry each finished job had left there since the last vacuum: claims from 23
// to 82 ms in the first minute. Two round trips more. Within a transaction too: when `statement`
// fails there, the settings are undone with the rest by the transaction's rollback. A server
// without plan_cache_mode (before PostgreSQL 12) runs `statement` as it would have.
template <typename Statement>
auto OnGenericIndexPlans(Link& link, Statement statement) -> decltype(statement()) {
  Exec(link,
       "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; "
       "SET enable_bitmapscan = off",
       {}, "use generic plans that read by index")
      .status()
      .IgnoreError();
  auto result = statement();
  if (!Broken(link)) {
    Exec(link, "RESET plan_cache_mode; RESET enable_seqscan; RESET enable_bitmapscan", {},
         "use the session's plans")
        .status()
        .IgnoreError();
  }
  return result;
}

// How long ConnectionPool::Committed waits for a transaction whose COMMIT's reply was lost to be
// committed or aborted.
inline constexpr double kCommittedWaitSeconds = 5;

// At most `max_links` connections to `conninfo`, each used by one call at a time.
class ConnectionPool {
 public:
  ConnectionPool(std::string conninfo, std::size_t max_links)
      : conninfo_(std::move(conninfo)), max_links_(max_links) {}
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  const std::string& conninfo() const { return conninfo_; }

  // A connection of the pool, held for one call and given back after it.
  class Session {
   public:
    Session(ConnectionPool* pool, std::unique_ptr<Link> link)
        : pool_(pool), link_(std::move(link)) {}
    ~Session() { pool_->Return(std::move(link_)); }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    Link& operator*() { return *link_; }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<Link> link_;
  };

  // An idle connection, or a new one while fewer than max_links_ exist; waits otherwise.
  Session Take();

  // Connects `link` (again): a new connection, its statements to be prepared anew.
  Status Connect(Link& link);

  // Runs `attempt` (one statement, its own transaction) on `link`, connecting it first if it is
  // not connected; if it failed on a broken connection, reconnects and runs it once more. The
  // server may have committed the first run before the break lost its reply: `attempt` is run
  // so only where a second run does no harm (reads, idempotent writes), or where the caller
  // learns what the first did (the fenced ends of a job by `rerun`; the stores and claims of jobs
  // by RetryingUnlessFound); for the others see Transaction.
  // `rerun`, if given, is set when the statement ran a second time after the first run broke
  // the connection (so the first may have taken effect).
  template <typename Attempt>
  auto Retrying(Link& link, Attempt attempt, bool* rerun = nullptr) -> decltype(attempt()) {
    if (Broken(link)) {
      if (Status s = Connect(link); !s.ok()) return s;
    }
    auto result = attempt();
    if (result.ok() || !Broken(link)) return result;
    if (Status s = Connect(link); !s.ok()) return s;
    if (rerun != nullptr) *rerun = true;
    return attempt();
  }

  // Retrying, for a write that leaves a trace its caller can find (a mark it stored): on the run
  // after a break, `lookup` runs first, and if it returns an answer (the first run committed
  // before the break lost its reply, and this is what it did) that is the call's; if it returns
  // none, `attempt` runs again. `lookup` returns std::optional of `attempt`'s type: a failed
  // lookup's status is an answer.
  template <typename Attempt, typename Lookup>
  auto RetryingUnlessFound(Link& link, Attempt attempt, Lookup lookup) -> decltype(attempt()) {
    bool again = false;
    return Retrying(link, [&]() -> decltype(attempt()) {
      if (std::exchange(again, true)) {
        std::optional<decltype(attempt())> found = lookup();
        if (found.has_value()) return *std::move(found);
      }
      return attempt();
    });
  }

  // Runs `body` (statements on `link`) as one transaction: BEGIN, the body, then COMMIT, or
  // ROLLBACK when the body fails. When the connection breaks before the COMMIT was sent, the
  // server rolled the transaction back, and it is run once more on a new connection. When it
  // breaks after (the COMMIT's reply lost), the transaction may have taken effect: its id, read
  // just before the COMMIT, is looked up on a new connection (Committed), and the call is OK
  // without running `body` again if it committed, run once more if it did not, and Unavailable
  // if that cannot be known. So a transaction is applied once whatever reply a break loses, and
  // what `body` left in its outputs is its committed run's. `body` must set its outputs afresh
  // each time it runs. One round trip more than the statements: the id's.
  template <typename Body>
  Status Transaction(Link& link, const char* what, Body body) {
    for (int run = 0;; ++run) {
      if (Broken(link)) {
        if (Status s = Connect(link); !s.ok()) return s;
      }
      std::string id;  // the transaction's id; empty while it has none (it wrote nothing)
      bool committing = false;
      Status status = Exec(link, "BEGIN", {}, what).status();
      if (status.ok()) status = body();
      if (status.ok()) {
        StatusOr<std::string> assigned = AssignedId(link, what);
        status = assigned.status();
        if (assigned.ok()) id = *std::move(assigned);
      }
      if (status.ok()) {
        committing = true;
        status = Exec(link, "COMMIT", {}, what).status();
      } else if (!Broken(link)) {
        (void)Exec(link, "ROLLBACK", {}, what);
      }
      if (status.ok() || !Broken(link)) return status;
      if (committing) {
        // Nothing written: nothing to apply again, and what the body read stands.
        if (id.empty()) return absl::OkStatus();
        if (Status s = Connect(link); !s.ok()) return Unknown(what, s);
        StatusOr<bool> committed = Committed(link, id, what);
        if (!committed.ok()) return committed.status();
        if (*committed) return absl::OkStatus();
      }
      if (run > 0) return status;
    }
  }

  // A single-statement write as Transaction runs it: applied once whatever reply a break loses
  // (three round trips more than Retrying, for statements whose second run would do harm).
  StatusOr<Result> ExactlyOnce(Link& link, const char* sql, const std::vector<Param>& params,
                               const char* what) {
    Result result;
    Status status = Transaction(link, what, [&]() -> Status {
      StatusOr<Result> r = Exec(link, sql, params, what);
      if (!r.ok()) return r.status();
      result = *std::move(r);
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return result;
  }

  // Exec, as Retrying runs it.
  StatusOr<Result> RetryingExec(Link& link, const char* sql, const std::vector<Param>& params,
                                const char* what, bool* rerun = nullptr) {
    return Retrying(
        link, [&] { return Exec(link, sql, params, what); }, rerun);
  }

 private:
  void Return(std::unique_ptr<Link> link);
  // The id of the transaction under way on `link`, or "" if it has none (has written nothing).
  static StatusOr<std::string> AssignedId(Link& link, const char* what);
  // Whether transaction `id`, whose COMMIT a broken connection's backend may still be finishing,
  // committed: asked of the server (pg_xact_status) until it says committed or aborted, for at
  // most kCommittedWaitSeconds.
  static StatusOr<bool> Committed(Link& link, const std::string& id, const char* what);
  // Unavailable: whether `what` took effect is not known (`reconnect` failed after its COMMIT's
  // reply was lost).
  static Status Unknown(const char* what, const Status& reconnect);

  const std::string conninfo_;
  const std::size_t max_links_;
  std::mutex mutex_;  // guards idle_ and links_
  std::condition_variable returned_;
  std::vector<std::unique_ptr<Link>> idle_;
  std::size_t links_ = 0;  // made so far
};

}  // namespace fairgate::store::postgres

#endif  // FAIRGATE_STORE_POSTGRES_CONNECTION_H_
