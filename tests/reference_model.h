// ReferenceModel: the admission rule of DESIGN.md written as plainly as possible, for the
// differential tests. Every operation scans everything (O(n)); nothing is cached or indexed, so
// that each line can be checked against the text of the rule by reading it.
//
// The extensions of docs/ordering.md are here in the same plain style: the effective tier is
// computed from the job's wait at each decision (no promotion queue), and the order is the
// tuple of that document, built and compared whole.
//
// It mirrors AdmissionCore's API and its documented tie-breaks: idle keys are evicted in the order
// they became idle and estimates in the order they were last used, each sweep stopping at the
// first that is still fresh and after `sweep_batch` evictions.
#ifndef FAIRGATE_TESTS_REFERENCE_MODEL_H_
#define FAIRGATE_TESTS_REFERENCE_MODEL_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fairgate/group_limits.h"
#include "fairgate/job_type.h"
#include "fairgate/key_limits.h"
#include "fairgate/options.h"
#include "fairgate/status.h"
#include "fairgate/worker.h"

namespace fairgate::testing {

class ReferenceModel {
 public:
  struct Admission {
    int job;
    double charge;
    std::string worker;            // with workers: the one it runs on
    bool worker_reserved = false;  // it went there by its type's sole-worker reservation
    bool borrowed = false;         // over its tier's cap, on a slot none wanted (lending)
  };

  // As core::Join: whether a request of a coalescing type may share its id's job.
  enum class Join { kNever, kPending, kPendingOrRunning };

  explicit ReferenceModel(const SchedulerOptions& options) : options_(options) {}

  Status RegisterType(const std::string& name, const JobTypeConfig& config);
  // Returns the model's id of the job: the one it joined, if it joined one.
  // `refuse`: refused (ResourceExhausted, with RetryAfter) when a rate limit the job is under
  // has no token at `now`.
  StatusOr<int> Enqueue(const std::string& type, const std::string& id, const std::string& key,
                        std::optional<double> cost, double now, Join join = Join::kNever,
                        bool refuse = false);
  // The wait the last refusal for want of a token named (RetryAfter).
  double retry_after() const { return retry_after_; }
  // A pending job several requests stand for loses one; the last one's Cancel removes it.
  Status Cancel(int job, double now);
  // As AdmissionCore::ShedHeaviest: the pending job of `type` with the greatest (group's cost,
  // key's cost, arrival, seq) leaves with all its requests; its id, or nothing. (A type's
  // shedding, JobTypeConfig::shedding, refuses the same job at an Enqueue or after an admission
  // while its queue stands: into the expired list, docs/ordering.md "Shedding".)
  StatusOr<std::optional<int>> ShedHeaviest(const std::string& type, double now);
  // How many requests a pending job stands for; NotFound unless pending.
  StatusOr<int> Callers(int job) const;
  // Expires the jobs due by `now` first, as AdvanceTo does.
  std::optional<Admission> NextAdmission(double now);
  // Every pending job still pending at its type's max_queue_wait by `now` leaves, uncharged, in
  // the order the limits were reached (ties by enqueue order), into the expired list.
  void AdvanceTo(double now);
  // The model's ids of the jobs expired since the last call, in that order.
  std::vector<int> TakeExpired();
  Status Complete(int job, double elapsed, double now);
  // A running job ends unmeasured: its key keeps the charge made at admission, its estimate is
  // not touched.
  Status CompleteUnmeasured(int job, double now);
  // A running job given back unused: its key and group are charged back what its admission
  // charged them (reconciled to no time, whatever the rule says), its estimate is not touched.
  Status CompleteUnused(int job, double now);
  // Returns (keys evicted, estimates evicted).
  std::pair<std::size_t, std::size_t> Sweep(double now);
  Status SetKeyWeight(const std::string& key, double weight);
  // Adds cost / the key's weight to its accumulated cost; the key is tracked from then, and an
  // idle one is idle from `now`.
  Status Charge(const std::string& key, double cost, double now);
  Status SetKeyLimits(const std::string& key, const KeyLimits& limits);
  // Groups of keys (docs/ordering.md, "Groups"): a key's group ("": none, a group of its own)
  // and a group's weight. A group is tracked while one of its keys has a job, and from a charge
  // of one of them, until it has been idle for key_ttl.
  Status SetKeyGroup(const std::string& key, const std::string& group, double now);
  Status SetGroupWeight(const std::string& group, double weight);
  // A group's limits count its keys' running jobs (by their groups now).
  Status SetGroupLimits(const std::string& group, const GroupLimits& limits);
  std::optional<double> GroupAccumulatedCost(const std::string& group) const;
  std::size_t groups_tracked() const { return groups_.size(); }
  // How many groups the last Sweep forgot.
  std::size_t groups_evicted() const { return groups_evicted_; }
  // A paused type's or key's jobs are not admissible and do not age (AdvanceTo(now) first).
  Status PauseType(const std::string& type, double now);
  Status ResumeType(const std::string& type, double now);
  Status PauseKey(const std::string& key, double now);
  Status ResumeKey(const std::string& key, double now);
  StatusOr<double> MaxWaitToCeiling(const std::string& type) const;
  // The tokens at `now` of the rate limit of `key`.
  double KeyTokens(const std::string& key, double now) const {
    if (RateOf(key).per_second == 0) return std::numeric_limits<double>::infinity();
    return Tokens(RateOf(key), KeyBucket(key), now);
  }
  // The tokens at `now` of the rate limit of `type` ("": the global one).
  double TokensOf(const std::string& type, double now) const {
    return type.empty() ? Tokens(options_.rule.rate_limit, global_rate_, now)
                        : Tokens(types_.at(type).rate_limit, type_rates_.at(type), now);
  }
  const RateLimit& rate_limit() const { return options_.rule.rate_limit; }
  // Workers (fairgate/worker.h), as AdmissionCore's: once one is added, a job needs a worker
  // that serves its type with room for its slots, and goes to the most specialised (fewest
  // registered types served, then added first) that is not reserved. A type served by exactly
  // one worker, with pending jobs and none admitted for sole_worker_reserve_after, reserves it
  // while one of its jobs is admissible but for workers; a reserved worker takes only its
  // claimant's jobs (the type that starved longest, then registered first).
  Status AddWorker(const std::string& name, const WorkerConfig& config);
  Status UpdateWorker(const std::string& name, const WorkerConfig& config);
  // The model's ids of the running jobs that ended with it, in enqueue order.
  StatusOr<std::vector<int>> RemoveWorker(const std::string& name, double now);
  // The global cap in force: a lower one admits nothing more until the slots in use are below it.
  Status SetCapacity(int capacity);
  // Pending jobs that aged into each registered priority, at `now`.
  std::map<int, std::int64_t> AgedIn(double now) const;

  std::optional<double> AccumulatedCost(const std::string& key) const;
  std::optional<double> Estimate(const std::string& type, const std::string& id) const;
  const std::map<std::string, double> Keys() const;
  std::size_t estimates_tracked() const { return estimates_.size(); }
  std::int64_t pending() const;
  std::int64_t running() const;
  std::int64_t slots_in_use() const;  // the slots of the running jobs

 private:
  struct ModelJob {
    std::string type, id, key;
    std::optional<double> cost;
    double arrival = 0;
    std::uint64_t seq = 0;
    double sjf = 0;
    bool running = false;
    double charge = 0;
    double weight = 1;
    double paused_total = 0;  // time spent paused, before paused_since if paused now
    double paused_since = 0;
    bool joinable = false;  // later requests of its id may join it
    int callers = 1;        // while pending: the requests it stands for
    std::string worker;     // while running, with workers: the one it runs on
  };
  struct ModelWorker {
    WorkerConfig config;
    std::uint64_t added = 0;
  };
  struct ModelSettings {
    double weight = 1;
    std::optional<KeyLimits> limits;
    bool paused = false;
    std::string group;  // "": none
  };
  struct ModelGroup {
    double acc = 0;
    double idle_since = 0;
    std::uint64_t idle_order = 0;
  };
  struct ModelKey {
    double acc = 0;
    double idle_since = 0;
    std::uint64_t idle_order = 0;
  };
  struct ModelEstimate {
    double value = 0;
    double last_used = 0;
    std::uint64_t use_order = 0;
  };

  bool KeyBusy(const std::string& key) const;
  // Shedding (docs/ordering.md): per type with a target, its oldest pending job (arrival, seq)
  // as last observed and the time from which that oldest has waited the target without a break.
  struct ShedState {
    std::optional<std::pair<double, std::uint64_t>> oldest;
    double late_since = std::numeric_limits<double>::infinity();
  };
  // After any change of the pending jobs at `now`: each shedding type's oldest pending job, and
  // when it changed, late_since (that job's arrival + target if it has waited less than the
  // target, or the queue was empty; else kept).
  void ObserveShedding(double now);
  bool Stands(const std::string& type, double now) const;
  using ShedPlace = std::tuple<double, double, double, std::uint64_t>;
  // The pending job of `type` with the greatest (group's cost, key's cost, arrival, seq).
  std::optional<int> Heaviest(const std::string& type, ShedPlace* place) const;
  // A pending job refused by shedding at `now`: it leaves, into the expired list.
  void Shed(int job, double now);
  // The key's group, "" if none.
  std::string GroupOf(const std::string& key) const {
    auto it = settings_.find(key);
    return it != settings_.end() ? it->second.group : std::string();
  }
  int GroupRunning(const std::string& group) const;
  GroupLimits GroupLimitsOf(const std::string& group) const;
  // Whether a job of one of the group's keys (by their groups now) is pending or running.
  bool GroupBusy(const std::string& group) const;
  // A tracked group with nothing of its keys pending or running is idle from `now`.
  void MaybeIdleGroup(const std::string& group, double now);
  double GroupWeight(const std::string& group) const {
    auto it = group_weights_.find(group);
    return it != group_weights_.end() ? it->second : 1.0;
  }
  // The key's group, tracked (cost 0) if it was not; "" if none.
  std::string TrackGroupOf(const std::string& key);
  bool Paused(const ModelJob& job) const;
  // Applies `change` to the pauses and stops or restarts the aging clocks it changes.
  template <typename Change>
  void ChangePause(double now, Change change);
  // Every constraint but the workers has room for the job at `now` (the rate limits' tokens).
  // `borrowing`: as a borrower (docs/ordering.md, "Lending"): instead of its tier's cap, the
  // running slots and its own leave floor(kept_back * capacity) slots free.
  bool Admissible(const ModelJob& job, double now, bool borrowing = false) const;
  // A rate limit's bucket (docs/ordering.md, "Rate limits"): the tokens its last take left, and
  // when that was; full at first.
  struct Bucket {
    double tokens = 0;
    double at = 0;
  };
  // Its tokens at `now`; whether an admission may take one; the take.
  static double Tokens(const RateLimit& limit, const Bucket& bucket, double now);
  static bool HasToken(const RateLimit& limit, const Bucket& bucket, double now);
  static void Take(const RateLimit& limit, Bucket& bucket, double now);
  // When a bucket without a token at `now` next has one: the first double at which HasToken
  // holds, from at + (1 - tokens) / per_second up.
  static double NextTokenAt(const RateLimit& limit, const Bucket& bucket);
  // It names the type (or one of its tags) and has at least the type's slots.
  bool Serves(const ModelWorker& worker, const std::string& type) const;
  // The workers that serve `type`, most specialised first.
  std::vector<std::string> WorkersOf(const std::string& type) const;
  int FreeSlots(const std::string& worker) const;
  KeyLimits LimitsOf(const std::string& key) const;
  // Its limits' rate limit, per_second times its weight when rate_per_weight.
  RateLimit RateOf(const std::string& key) const;
  int RunningOf(const std::string& key) const;
  // The registered priorities, highest first.
  std::vector<int> Priorities() const;
  // How many tiers above its own a pending job stands in at `now`.
  int AgingSteps(const ModelJob& job, double now) const;
  // How many tiers above `priority` a job may rise.
  int MaxSteps(int priority) const;
  double& UseEstimate(const ModelJob& job, double now);
  void MaybeIdle(const std::string& key, double now);

  SchedulerOptions options_;
  std::map<std::string, JobTypeConfig> types_;
  std::vector<std::string> type_order_;  // registration order
  std::map<std::string, double> starved_since_;
  std::map<std::string, ModelWorker> workers_;
  bool workers_in_use_ = false;
  std::uint64_t workers_added_ = 0;
  std::set<std::string> paused_types_;
  std::map<int, ModelJob> jobs_;  // pending and running
  std::map<std::string, ModelKey> keys_;
  std::map<std::pair<std::string, std::string>, ModelEstimate> estimates_;
  std::map<std::string, ModelSettings> settings_;
  std::map<std::string, double> group_weights_;  // SetGroupWeight; 1 when not set
  std::map<std::string, GroupLimits> group_limits_;
  std::map<std::string, ModelGroup> groups_;  // tracked
  std::size_t groups_evicted_ = 0;
  std::vector<int> expired_;
  std::map<std::string, ShedState> shed_;  // the types with shedding on
  // The joinable job of each (type, id) admitted last (it may have completed since).
  std::map<std::pair<std::string, std::string>, int> last_admitted_joinable_;
  int capacity_ = options_.rule.max_concurrency;
  Bucket global_rate_{options_.rule.rate_limit.burst, 0};
  std::map<std::string, Bucket> type_rates_;  // from registration, full
  // Keys' buckets (KeyLimits::rate_limit), from a key's first take under a limit until the key is
  // forgotten; a key without one has a full bucket.
  std::map<std::string, Bucket> key_rates_;
  double retry_after_ = 0;
  // The key's bucket, full if it has none.
  Bucket KeyBucket(const std::string& key) const {
    auto it = key_rates_.find(key);
    return it != key_rates_.end() ? it->second : Bucket{RateOf(key).burst, 0};
  }
  int next_job_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t next_order_ = 0;
};

}  // namespace fairgate::testing

#endif  // FAIRGATE_TESTS_REFERENCE_MODEL_H_
