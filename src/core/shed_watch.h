// ShedWatch: whether a type's queue stands (JobTypeConfig::shedding, fairgate/shedding.h).
// Internal to src/core.
//
// It keeps the type's pending jobs by arrival and `late_since`: the time from which its oldest
// pending job has waited at least the target without a break. When the oldest changes at t (a
// job enters an empty queue, or the oldest leaves) to one that arrived at a: if t - a < target,
// or the queue was empty, late_since = a + target (when that job will have waited the target);
// else it is kept (the new oldest had waited the target already, so the wait never dropped below
// it). The queue stands at t when it is not empty and t >= late_since + interval.
// docs/ordering.md ("Shedding") states the same.
#ifndef FAIRGATE_CORE_SHED_WATCH_H_
#define FAIRGATE_CORE_SHED_WATCH_H_

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/container/btree_set.h"
#include "fairgate/shedding.h"
#include "fairgate/status.h"

namespace fairgate::core {

// A refusal by shedding: ResourceExhausted with `message`, RetryAfter `retry_after` and the mark
// WasShed reads (shedding.cc).
Status ShedStatus(std::string message, double retry_after);

class ShedWatch {
 public:
  explicit ShedWatch(const Shedding& shedding)
      : target_(shedding.target.count()), interval_(shedding.interval.count()) {}

  // A job (arrival, seq) enters or leaves the type's pending jobs at `now`.
  void Enter(double arrival, std::uint64_t seq, double now);
  void Leave(double arrival, std::uint64_t seq, double now);
  bool Stands(double now) const { return !pending_.empty() && now >= late_since_ + interval_; }
  double late_since() const { return late_since_; }
  // For CheckInvariants: how many jobs it watches, and whether it watches this one.
  std::size_t size() const { return pending_.size(); }
  bool Watches(double arrival, std::uint64_t seq) const {
    return pending_.contains({arrival, seq});
  }
  double interval() const { return interval_; }
  double target() const { return target_; }
  // Jobs refused by shedding: calls at their arrival and pending jobs taken from the queue.
  std::uint64_t refused() const { return refused_; }
  void CountRefusal() { ++refused_; }

 private:
  void OldestChanged(bool was_empty, double now);

  const double target_;
  const double interval_;
  absl::btree_set<std::pair<double, std::uint64_t>> pending_;
  double late_since_ = std::numeric_limits<double>::infinity();
  std::uint64_t refused_ = 0;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_SHED_WATCH_H_
