// SchedulerMetrics: the counters and histograms behind Scheduler::WriteMetrics.
//
// The runtime updates them under its lock, at the decisions they count (O(1) each, no allocation
// after a type's first job); Write turns them, with a snapshot of the core, into the Prometheus
// text format. Names are under `fairgate_`, in base units (seconds), counters end in `_total`.
// Labels are bounded: job type, tier (a priority), status code, refusal reason, wait reason. No
// label ever holds a fairness key or a job id.
//
// Not thread-safe: the scheduler's lock guards it.
#ifndef FAIRGATE_METRICS_SCHEDULER_METRICS_H_
#define FAIRGATE_METRICS_SCHEDULER_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "fairgate/snapshot.h"
#include "metrics/prometheus_writer.h"

namespace fairgate::metrics {

// absl::StatusCode's canonical codes, kOk (0) to kUnauthenticated (16).
inline constexpr std::size_t kStatusCodes = 17;

// Counts per fixed upper bound, seconds.
class SecondsHistogram {
 public:
  // From a millisecond (an admission without waiting) to ten minutes (a clone of a big
  // repository).
  static constexpr std::array<double, 13> kBounds = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1,
                                                     5,     10,    30,   60,   300, 600};
  void Observe(double seconds);
  // Cumulative counts per bound, as the exposition format wants them.
  std::vector<std::uint64_t> Cumulative() const;
  double sum() const { return sum_; }
  std::uint64_t count() const { return count_; }

 private:
  std::array<std::uint64_t, kBounds.size() + 1> counts_{};  // the last: above every bound
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

class SchedulerMetrics {
 public:
  // Types are numbered in registration order, as the core numbers them.
  void AddType(std::uint32_t index, const std::string& name, int priority);

  void Enqueued(std::uint32_t type) { types_[type].enqueued++; }
  void Rejected(absl::StatusCode reason) { rejected_[reason]++; }
  // `borrowed`: over its tier's cap, on a lent slot (RuleOptions::lending).
  void Admitted(std::uint32_t type, double wait, bool waited_on_conflict, bool borrowed);
  void Completed(std::uint32_t type, absl::StatusCode status, double run_time);
  void Cancelled(std::uint32_t type) { types_[type].cancelled++; }
  void Expired(std::uint32_t type) { types_[type].expired++; }
  void Joined(std::uint32_t type) { types_[type].joined++; }
  void KeysEvicted(std::uint64_t n) { keys_evicted_ += n; }
  void CapacitySignalFailed() { ++capacity_signal_errors_; }
  void ObserverEventsDropped(std::uint64_t n) { observer_events_dropped_ += n; }

  // Appends the exposition. `promotions` is the core's count of aging steps.
  void Write(std::string& out, const Snapshot& snapshot, std::uint64_t promotions) const;

  struct TypeCounts {
    std::string name;
    int priority = 0;
    std::uint64_t enqueued = 0, admitted = 0, cancelled = 0, expired = 0, joined = 0, borrowed = 0;
    // By status code: absl::Status::code() is one of the 17 canonical codes (it maps any other
    // to kUnknown), so an array indexed by code, not a map to search per completion.
    std::array<std::uint64_t, kStatusCodes> completed{};
    SecondsHistogram wait, run;
  };
  const std::vector<TypeCounts>& types() const { return types_; }
  std::uint64_t waited_on_conflict() const { return waited_conflict_; }
  std::uint64_t waited_on_capacity() const { return waited_capacity_; }
  std::uint64_t keys_evicted() const { return keys_evicted_; }
  const std::map<absl::StatusCode, std::uint64_t>& rejected() const { return rejected_; }

 private:
  // Write's parts, in the exposition's order: the jobs' counters by type, tier and status; the
  // gauges (pending, running, paused, workers, capacity); the wait and run histograms and the
  // totals of keys, estimates, aging and observers. `tiers`: each type's tier as a label.
  void WriteJobCounts(PrometheusWriter& w, const std::vector<std::string>& tiers) const;
  void WriteGauges(PrometheusWriter& w, const Snapshot& snapshot) const;
  void WriteHistogramsAndTotals(PrometheusWriter& w, const std::vector<std::string>& tiers,
                                const Snapshot& snapshot, std::uint64_t promotions) const;

  std::vector<TypeCounts> types_;
  std::map<absl::StatusCode, std::uint64_t> rejected_;
  std::uint64_t keys_evicted_ = 0;
  std::uint64_t capacity_signal_errors_ = 0;
  std::uint64_t waited_conflict_ = 0;
  std::uint64_t waited_capacity_ = 0;
  std::uint64_t observer_events_dropped_ = 0;
};

// "ok", "cancelled", "resource_exhausted", ...: a status code as a label value.
std::string StatusCodeLabel(absl::StatusCode code);

}  // namespace fairgate::metrics

#endif  // FAIRGATE_METRICS_SCHEDULER_METRICS_H_
