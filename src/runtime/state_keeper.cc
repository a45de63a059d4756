#include "runtime/state_keeper.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <tuple>

#include "metrics/prometheus_writer.h"
#include "runtime/thread_name.h"

namespace fairgate::internal {

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

StatusOr<std::unique_ptr<StateKeeper>> StateKeeper::Open(const SchedulerOptions& options) {
  std::shared_ptr<Store> store = options.persistence.store;
  if (!store) return std::unique_ptr<StateKeeper>();
  StatusOr<LearnedState> loaded = store->LoadLearned();
  if (!loaded.ok()) return loaded.status();
  return std::unique_ptr<StateKeeper>(
      new StateKeeper(std::move(store), options, *std::move(loaded)));
}

StateKeeper::StateKeeper(std::shared_ptr<Store> store, const SchedulerOptions& options,
                         LearnedState loaded)
    : store_(std::move(store)),
      estimate_ttl_(options.rule.estimate_ttl.count()),
      key_ttl_(options.rule.key_ttl.count()) {
  std::sort(
      loaded.estimates.begin(), loaded.estimates.end(),
      [](const SavedEstimate& a, const SavedEstimate& b) { return a.last_used < b.last_used; });
  for (SavedEstimate& e : loaded.estimates) {
    std::string type = e.type;
    estimates_by_type_[type].push_back(std::move(e));
  }
  keys_ = std::move(loaded.keys);
  std::sort(keys_.begin(), keys_.end(),
            [](const SavedKey& a, const SavedKey& b) { return a.idle_since < b.idle_since; });
  for (const SavedSchedule& s : loaded.schedules) last_run_end_[{s.type, s.id}] = s.last_run_end;
}

StateKeeper::~StateKeeper() { StopFlusher(); }

std::vector<SavedEstimate> StateKeeper::TakeEstimates(std::string_view type) {
  std::lock_guard lock(mutex_);
  auto it = estimates_by_type_.find(type);
  if (it == estimates_by_type_.end()) return {};
  std::vector<SavedEstimate> out = std::move(it->second);
  estimates_by_type_.erase(it);
  return out;
}

std::vector<SavedKey> StateKeeper::TakeKeys() {
  std::lock_guard lock(mutex_);
  return std::exchange(keys_, {});
}

std::optional<double> StateKeeper::LastRunEnd(std::string_view type, std::string_view id) const {
  std::lock_guard lock(mutex_);
  auto it = last_run_end_.find(std::pair<std::string, std::string>(type, id));
  if (it == last_run_end_.end()) return std::nullopt;
  return it->second;
}

void StateKeeper::RunEnded(std::string_view type, std::string_view id, double wall) {
  std::lock_guard lock(mutex_);
  last_run_end_[{std::string(type), std::string(id)}] = wall;
  runs_unflushed_.push_back({std::string(type), std::string(id), wall});
}

void StateKeeper::StartFlusher(Seconds interval, Collect collect) {
  {
    std::lock_guard lock(flush_mutex_);
    collect_ = std::move(collect);
  }
  flusher_ = std::thread([this, interval] {
    NameThisThread("fg-flusher");
    FlusherLoop(interval);
  });
}

void StateKeeper::FlusherLoop(Seconds interval) {
  std::unique_lock lock(flusher_mutex_);
  const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval);
  auto next = std::chrono::steady_clock::now() + period;
  while (!flusher_wake_.wait_until(lock, next, [&] { return stop_flusher_; })) {
    lock.unlock();
    (void)Flush();  // a failure is counted; the next flush writes the same changes again
    lock.lock();
    next = std::chrono::steady_clock::now() + period;
  }
}

void StateKeeper::StopFlusher() {
  {
    std::lock_guard lock(flusher_mutex_);
    stop_flusher_ = true;
  }
  flusher_wake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

Status StateKeeper::Flush() {
  std::lock_guard flush_lock(flush_mutex_);
  Collected collected;
  if (collect_) collected = collect_(mark_);
  std::vector<SavedSchedule> runs;
  {
    std::lock_guard lock(mutex_);
    runs.swap(runs_unflushed_);
  }
  collected.state.schedules = runs;
  const double wall = WallNow();
  Status status = store_->SaveLearned(collected.state, wall - estimate_ttl_, wall - key_ttl_);
  if (!status.ok()) {
    CountError(Operation::kFlush);
    std::lock_guard lock(mutex_);  // written with the next flush, before what ended since
    runs_unflushed_.insert(runs_unflushed_.begin(), runs.begin(), runs.end());
    return status;
  }
  if (collect_) mark_ = collected.mark;
  flushes_.fetch_add(1, std::memory_order_relaxed);
  return status;
}

void StateKeeper::WriteMetrics(std::string& out) const {
  metrics::PrometheusWriter w(out);
  static constexpr std::string_view kOperations[] = {
      "add_job", "begin_attempt", "remove_job", "defer_job", "kill_job", "load",      "flush",
      "claim",   "renew",         "release",    "share",     "resource", "rate_lease"};
  static_assert(std::size(kOperations) == std::tuple_size_v<decltype(errors_)>);
  w.Family("fairgate_store_errors_total", "counter",
           "Store operations that failed (the scheduler went on in memory), by operation.");
  for (std::size_t i = 0; i < errors_.size(); ++i) {
    w.Sample("fairgate_store_errors_total", {{"operation", kOperations[i]}},
             static_cast<double>(errors_[i].load(std::memory_order_relaxed)));
  }
  static constexpr std::string_view kOutcomes[] = {"stored", "succeeded", "retried",
                                                   "dead",   "claimed",   "fenced"};
  static_assert(std::size(kOutcomes) == std::tuple_size_v<decltype(outcomes_)>);
  w.Family("fairgate_durable_jobs_total", "counter",
           "Durable jobs stored by SubmitDurable or claimed from a shared store, and attempts "
           "that succeeded, were retried, ended dead, or were fenced (another replica held "
           "the job's lease by then).");
  for (std::size_t i = 0; i < outcomes_.size(); ++i) {
    w.Sample("fairgate_durable_jobs_total", {{"outcome", kOutcomes[i]}},
             static_cast<double>(outcomes_[i].load(std::memory_order_relaxed)));
  }
  if (store_->AsShared() != nullptr) {
    w.Family("fairgate_claims_total", "counter",
             "Claims of durable jobs from the shared store that succeeded, by whether they took "
             "any job (empty: nothing was claimable, or other replicas' claims held it).");
    w.Sample("fairgate_claims_total", {{"result", "empty"}},
             static_cast<double>(claims_[0].load(std::memory_order_relaxed)));
    w.Sample("fairgate_claims_total", {{"result", "jobs"}},
             static_cast<double>(claims_[1].load(std::memory_order_relaxed)));
  }
  w.Family("fairgate_state_flushes_total", "counter",
           "Flushes of learned estimates, costs and schedules to the store that succeeded.");
  w.Sample("fairgate_state_flushes_total", {},
           static_cast<double>(flushes_.load(std::memory_order_relaxed)));
}

}  // namespace fairgate::internal
