// PostgresStore: the shared store on PostgreSQL (fairgate/postgres_store.h), on libpq. Internal
// to src/store; its calls are defined in three files: postgres_store.cc (opening, jobs and their
// fenced ends, waiting for jobs), postgres_claims.cc (claims, leases and their renewal) and
// postgres_learned.cc (learned state and keys' costs summed over replicas).
//
// A pool of connections, each call one transaction on a connection of its own for the call,
// retried once on a fresh connection when that one turned out to be broken, after learning what
// the first try did when it may have committed (fairgate/postgres_store.h); text parameters and
// results (payloads as bytea, sent in binary), statements with parameters prepared once per
// connection (store/postgres_connection.h; their text: store/postgres_statements.h).
//
// Leases are three columns of a job's row: its holder (a replica's name), until when (the
// server's clock, Unix seconds) and its fencing token. A replica remembers the token of every job
// it claimed until it removes, defers, kills or releases it (its LeaseBook); each of those, and
// BeginAttempt, applies only where the row's token is still that one (or, for a job it never
// claimed, still none), so a holder whose job was claimed again by another replica changes
// nothing.
#ifndef FAIRGATE_STORE_POSTGRES_STORE_H_
#define FAIRGATE_STORE_POSTGRES_STORE_H_

#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "fairgate/postgres_store.h"
#include "fairgate/store.h"
#include "store/claim_planner.h"
#include "store/grouped_writes.h"
#include "store/lease_book.h"
#include "store/postgres_connection.h"

namespace fairgate::store::postgres {

class PostgresStore final : public SharedStore {
 public:
  using SteadyClock = std::chrono::steady_clock;
  using Session = ConnectionPool::Session;

  // Deletes the replica's row in fairgate_waiting, if it has one (waiting at most a second).
  ~PostgresStore() override;

  // OpenPostgresStore (fairgate/postgres_store.h): connects, creates the schema if it is not
  // there, and refuses a database whose schema is newer than this fairgate's.
  static StatusOr<std::unique_ptr<SharedStore>> Open(const std::string& conninfo,
                                                     const PostgresStoreOptions& options);

  // fairgate/store.h's calls, whose contracts are there.

  // Calls made at once from many threads share one statement (AddJobs'), its commit and one
  // notification (adds_); a call alone is a statement of one job.
  StatusOr<std::uint64_t> AddJob(const StoredJob& job) override;

  // One statement (StoreJobs).
  StatusOr<std::vector<std::uint64_t>> AddJobs(const std::vector<StoredJob>& jobs) override;

  // The attempt a claim counted is confirmed here without a round trip while the lease is surely
  // this replica's; after that (a replica that stalled), the server checks the lease.
  StatusOr<std::uint32_t> BeginAttempt(std::uint64_t sequence) override;
  Status RemoveJob(std::uint64_t sequence) override;

  // One statement, so one commit: the jobs this replica holds with their tokens (or that nobody
  // holds) are deleted, and every lease taken with their claims is given back (as RemoveJob
  // does, also for a job refused). The jobs not deleted are looked up once, for their refusals.
  StatusOr<std::vector<Status>> RemoveJobs(const std::vector<std::uint64_t>& sequences) override;
  Status DeferJob(std::uint64_t sequence, double not_before, std::string_view error) override;
  Status KillJob(std::uint64_t sequence, std::string_view error) override;
  Status ReleaseJob(std::uint64_t sequence) override;
  // From the lease book: no round trip.
  bool SurelyHolds(std::uint64_t sequence) override {
    return book_.SurelyHolds(sequence, SteadyClock::now());
  }
  // While the replica waits for jobs (its last claim came back short) its row in
  // fairgate_waiting says so, and stores notify: made, and then kept seen, here. A wait that
  // makes the row (or makes it again after a lapse) first waits for the stores that looked
  // before it was there (kWaitForEarlierStores), and returns OK at once, for the claim that
  // finds their jobs. While the replica does not wait, its row is deleted.
  Status WaitForJobs(double timeout_seconds) override;
  // PostgreSQL's text: UTF-8 without a NUL byte (RequireText).
  Status CheckName(std::string_view name, std::string_view what) const override {
    return RequireText(absl::string_view(name.data(), name.size()),
                       absl::string_view(what.data(), what.size()));
  }
  StatusOr<std::uint64_t> AcquireResource(std::string_view group, std::string_view id, int limit,
                                          double lease_seconds) override;
  Status ReleaseResource(std::string_view group, std::string_view id, std::uint64_t token) override;
  StatusOr<std::vector<SavedKey>> ShareKeyCosts(const std::vector<SavedKey>& charged,
                                                const std::vector<std::string>& keys) override;
  StatusOr<std::vector<SavedKey>> ShareGroupCosts(const std::vector<SavedKey>& charged,
                                                  const std::vector<std::string>& groups) override;
  // One statement (kTakeTokens, which makes the bucket's row, full, if it has none); now and
  // then (kBucketSweepSeconds) a second deletes the rows of full buckets (kForgetFullBuckets).
  StatusOr<TokenLease> TakeTokens(std::string_view bucket, const RateLimit& limit,
                                  int want) override;
  // A claim that comes back short (fewer jobs than asked) leaves the replica waiting for jobs
  // (waits_for_jobs_, WaitForJobs); one that comes back whole, not.
  StatusOr<std::vector<StoredJob>> ClaimJobs(const std::vector<ClaimableType>& types,
                                             std::size_t max_jobs, double lease_seconds) override;
  StatusOr<std::size_t> RenewLeases(double lease_seconds) override;
  StatusOr<std::vector<StoredJob>> LiveJobs() override { return Jobs(false); }
  StatusOr<std::vector<StoredJob>> DeadJobs() override { return Jobs(true); }
  StatusOr<std::vector<StoredJob>> DeadJobsAfter(std::uint64_t after, std::size_t limit) override;
  StatusOr<std::size_t> CountDeadJobs() override;
  StatusOr<StoredJob> ReviveJob(std::uint64_t sequence) override;
  Status RemoveDeadJob(std::uint64_t sequence) override;

  Status SaveLearned(const LearnedState& changed, double forget_estimates_before,
                     double forget_keys_before) override;
  StatusOr<LearnedState> LoadLearned() override;

 private:
  PostgresStore(std::string conninfo, std::string replica, std::size_t connections,
                std::size_t max_job_bytes)
      : pool_(std::move(conninfo), connections),
        replica_(std::move(replica)),
        max_job_bytes_(max_job_bytes) {}

  // The claim itself: ClaimJobs adds what its size tells WaitForJobs.
  StatusOr<std::vector<StoredJob>> Claim(const std::vector<ClaimableType>& asked,
                                         std::size_t max_jobs, double lease_seconds);
  // One job in its own statement and commit.
  StatusOr<std::uint64_t> AddOneJob(const StoredJob& job);
  // The most bytes AddJobs' statement carries in its parameters: the server refuses a message of
  // more than 1 GiB (and an array of more), which leaves room for the rest of the message.
  static constexpr std::size_t kMaxStatementBytes = 1'000'000'000;
  // AddJobs' statement, for jobs already found Storable; `what` names it in errors.
  // InvalidArgument, before anything is sent, when its parameters would take more than
  // kMaxStatementBytes.
  StatusOr<std::vector<std::uint64_t>> StoreJobs(const std::vector<const StoredJob*>& jobs,
                                                 const char* what);
  // StoreJobs' statement, its arrays made, the jobs marked from `first`.
  StatusOr<std::vector<std::uint64_t>> StoreMarked(Link& link, std::int64_t first,
                                                   const std::vector<std::string>& types,
                                                   const std::vector<std::string>& ids,
                                                   const std::vector<std::string>& keys,
                                                   const std::vector<std::string>& payloads,
                                                   const std::vector<std::string>& submitted,
                                                   const char* what);
  // Runs `store` so that its jobs are stored once whatever reply a broken connection loses.
  StatusOr<std::vector<std::uint64_t>> StoreOnce(
      Link& link, std::int64_t first, std::size_t count, const char* what,
      const std::function<StatusOr<std::vector<std::uint64_t>>()>& store);
  // `count` marks (fairgate_durable_jobs.stored_by, fairgate_resource_leases.taken_by) for rows
  // about to be written: the first.
  std::int64_t NextMarks(std::size_t count);
  static std::int64_t FirstMark();

  // PostgreSQL's text cannot hold a NUL byte, and libpq would cut a parameter at the first one:
  // a job's names with one are refused rather than stored cut short. (The payload is bytea.) A
  // job above max_job_bytes_ is refused too.
  Status Storable(const StoredJob& job) const;
  static double WallSeconds();
  // NotFound: "PostgreSQL store: no dead job has sequence number N".
  static Status NoDeadJob(std::uint64_t sequence);
  StatusOr<std::vector<StoredJob>> Jobs(bool dead);
  StatusOr<std::vector<StoredJob>> JobsOf(const char* sql, const std::vector<Param>& params);

  // The job in row `row` of a result whose first columns are kJobColumns.
  static StatusOr<StoredJob> JobAt(const Result& r, int row);

  // The token this replica holds `sequence` with, as a parameter: NULL if it holds none.
  Param TokenOf(std::uint64_t sequence) const;
  static Param TokenParam(std::optional<std::uint64_t> token);

  // As a parameter: 1 when this replica's claim of `sequence` counted an attempt that never began
  // (a job given back or killed unrun gives it back), else 0.
  Param UnbegunAttempt(std::uint64_t sequence) const;

  // Until when a lease of `lease_seconds` given by a statement sent now is surely this
  // replica's (LeaseBook::BeginLocally).
  static SteadyClock::time_point SureUntil(double lease_seconds);

  // Why a fenced statement changed no row: the job is not stored (NotFound) or its lease is or
  // was another's since this replica claimed it (Aborted).
  Status Refusal(Link& link, std::uint64_t sequence, const char* what);

  // The refusal of `what` ("remove", "defer", ...) done to a job whose lease this replica lost.
  Status LeaseLost(const char* what, std::uint64_t sequence) const;
  // Whether a fenced statement on a job that changed no row when run again after a broken
  // connection (`rerun`) had done its work in the first run, whose reply the break lost, given
  // until when the claim it was made for was surely this replica's as the call began.
  static bool RanBeforeTheBreak(bool rerun, std::optional<SteadyClock::time_point> sure_until);

  // Runs the fenced statement `sql` ($1 the sequence, $2 the token, `more` from $3) that ends
  // this replica's part in a job, and forgets the job's token once it is done with it. The
  // leases taken with the claim are given back whatever the outcome (after a failure to reach
  // the server they lapse: no longer renewed).
  Status Finish(Link& link, std::uint64_t sequence, const char* sql, std::vector<Param> more,
                const char* what, bool missing_is_ok);

  // Gives back the leases taken with this replica's claim of `sequence` (the one made with token
  // `of`, when given; a failure leaves them to lapse: the book no longer renews them).
  void GiveBackClaimLeases(Link& link, std::uint64_t sequence,
                           std::optional<std::uint64_t> of = std::nullopt);

  // The body of a claim whose types take leases, in the claim's transaction: waits for any other
  // such claim under way (kLockLeasedClaims), locks the candidates in claim order
  // (kClaimCandidates), chooses the first max_jobs whose leases have a free slot (counted once
  // for all of them: store::PlanClaim), takes those leases in (group, id) order (so that it
  // never waits in a cycle with another replica taking leases), drops a job whose lease another
  // replica took meanwhile (with the leases it took), and claims the rest: `jobs`, and the
  // tokens of each one's leases in `taken`. How many candidates it locks: wide_leased_claims_.
  Status ClaimWithLeases(Link& link, const std::vector<ClaimableType>& types,
                         const std::vector<std::string>& names,
                         const std::vector<std::string>& tiers, std::size_t max_jobs,
                         double lease_seconds, std::vector<StoredJob>& jobs,
                         absl::flat_hash_map<std::uint64_t, std::vector<std::uint64_t>>& taken);

  // One statement of a claim of jobs that take no lease (kClaim): up to `max_jobs` of the first
  // `candidates` in claim order that no other claim is locking, appended to `jobs`.
  struct UnleasedClaim {
    std::size_t claimed = 0;
    // Whether candidates may have been passed over, locked by other claims: fewer claimed than
    // there were candidates, or none claimed (a claim that takes nothing returns no count).
    bool passed_over = false;
  };
  StatusOr<UnleasedClaim> ClaimUnleased(Link& link, const std::vector<std::string>& names,
                                        const std::vector<std::string>& tiers, std::size_t max_jobs,
                                        std::size_t candidates, double lease_seconds,
                                        SteadyClock::time_point sure_until,
                                        std::vector<StoredJob>& jobs);

  // Whether a claim takes every job of `type` whose resource has a free slot when the plan
  // reaches it (store::PlanClaim): one that takes no fleet cap's slot and is not bounded in a
  // claim. kClaimCandidates leaves out what such jobs leave no slot for.
  static bool Sure(const ClaimableType& type);
  // ClaimWithLeases' first step: up to `locked` candidates, locked, in claim order, each with
  // the leases it needs (its type's fleet cap, then its resource), of the first `read` in claim
  // order (the others locked by claims under way); `passed_over`: whether it locked fewer than
  // `locked` while others were there to read (locked by other claims), or none.
  StatusOr<std::vector<ClaimCandidate>> LockCandidates(Link& link,
                                                       const std::vector<ClaimableType>& types,
                                                       const std::vector<std::string>& names,
                                                       const std::vector<std::string>& tiers,
                                                       std::size_t locked, std::size_t read,
                                                       bool& passed_over);

  // ClaimWithLeases' second step: the slots held now (unexpired leases) of every resource the
  // candidates need.
  StatusOr<HeldSlots> CountHeldSlots(Link& link, const std::vector<ClaimCandidate>& candidates);

  // ClaimWithLeases' third step: takes the plan's leases in its order, into `tokens`. A job one
  // of whose leases another replica took since the slots were counted is dropped, and the
  // leases it took are given back. Returns the sequences of the jobs that have all theirs.
  StatusOr<std::vector<std::string>> TakePlannedLeases(
      Link& link, const std::vector<ClaimCandidate>& candidates, const ClaimPlan& plan,
      double lease_seconds, std::vector<std::vector<std::uint64_t>>& tokens);
  // Takes one free slot of `need`'s resource, trying the next free one when another replica took
  // the one it picked meanwhile: its fencing token, 0 when every slot is held. `retrying`: each
  // statement retried on a broken connection (not inside a transaction).
  StatusOr<std::uint64_t> TakeSlot(Link& link, const LeaseNeed& need, double lease_seconds,
                                   bool retrying = false);
  // How many of `need`'s resource's slots no unexpired lease holds (kCountFreeSlots).
  StatusOr<int> FreeSlots(Link& link, const LeaseNeed& need);
  // ShareKeyCosts and ShareGroupCosts, by their statements (postgres_learned.cc).
  struct CostStatements;
  static const CostStatements kKeyCosts, kGroupCosts;
  StatusOr<std::vector<SavedKey>> ShareCosts(const CostStatements& sql,
                                             const std::vector<SavedKey>& charged,
                                             const std::vector<std::string>& names);
  static std::string Text(const Result& r, int row, int column);
  static double Double(const Result& r, int row, int column);

  // The connections: at most the options' `connections`, each used by one call at a time.
  ConnectionPool pool_;
  const std::string replica_;
  const std::size_t max_job_bytes_;  // PostgresStoreOptions::max_job_bytes
  LeaseBook book_;  // this replica's claims and leases (thread-safe, its own mutex)
  // The next mark: a job's stored_by (StoreOnce), a slot's taken_by (TakeSlot).
  std::atomic<std::int64_t> next_mark_{FirstMark()};
  // AddJob's calls from many threads at once, a group a statement. A PostgreSQL server commits
  // notifying transactions one at a time, so jobs stored one a statement from 8 threads made no
  // more commits a second than from one thread (bench/README.md).
  GroupedWrites<StoredJob, std::uint64_t> adds_{
      [this](const StoredJob& job) { return AddOneJob(job); },
      [this](const std::vector<const StoredJob*>& jobs) {
        return StoreJobs(jobs, "store a group of durable jobs");
      }};
  // Whether the next claim without leases reads twice its size in candidates, for replicas
  // claiming at once to share (ClaimJobs): until a claim came back whole, and again once one
  // came back short.
  std::atomic<bool> wide_claims_{true};
  std::mutex claim_mutex_;  // held by each claim (Claim); guards tokens_seen_
  // The greatest fencing token a claim of this replica was given: a claim whose reply was lost
  // gave greater ones (ClaimUnleased).
  std::uint64_t tokens_seen_ = 0;
  // Whether the next claim with leases of n jobs reads 8 n candidates, and locks 4 n of them
  // for its plan to choose among (n when every type is Sure), rather than n of 2 n: until a
  // claim with leases came back whole, and again once one came back short (ClaimWithLeases).
  // Where a claim's first 2 n hold fewer than n jobs of distinct resources with free slots (a
  // key's jobs sharing repositories), the claim is short and the next reads more.
  std::atomic<bool> wide_leased_claims_{true};

  static constexpr double kBucketSweepSeconds = 60;
  std::mutex buckets_mutex_;  // guards next_bucket_sweep_
  // When TakeTokens next deletes the full buckets' rows (steady clock, seconds).
  double next_bucket_sweep_ = 0;
  // Whether the last claim came back short: the replica may have taken every job it could, and
  // waits for more (WaitForJobs says so in fairgate_waiting). True until a claim says otherwise.
  std::atomic<bool> waits_for_jobs_{true};
  std::mutex listen_mutex_;  // guards the listener and its row; WaitForJobs runs on one thread
  Connection listener_;      // LISTENs on FAIRGATE_PG_JOBS_CHANNEL; connected on first wait
  // Whether this replica's row in fairgate_waiting is there, and when the listener last wrote
  // it: it writes it again every kWaitingSeenEvery; past kWaitingLapse since then, it makes it
  // again as a new row (the stores stop reading a row not seen for a minute).
  bool waiting_row_ = false;
  SteadyClock::time_point waiting_seen_{};
  static constexpr std::chrono::seconds kWaitingSeenEvery{5};
  static constexpr std::chrono::seconds kWaitingLapse{30};
};

}  // namespace fairgate::store::postgres

#endif  // FAIRGATE_STORE_POSTGRES_STORE_H_
