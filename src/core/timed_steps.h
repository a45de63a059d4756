// TimedSteps: the pending jobs' steps that come due with time, aging steps and queue-wait
// expiries, and the pause clocks aging reads. Internal to src/core.
//
// Each kind is a queue of the pending jobs that have one, by when it comes due, then by enqueue
// order. A due time is recomputed from the job whenever it is needed, never stored in the job
// (the same expression gives the same double every time): an expiry is due at arrival +
// max_queue_wait; an aging step at arrival + the time it spent paused + grace + (steps taken + 1)
// x interval. What a due step does (withdraw the job, move it a tier up) is the core's: this part
// only keeps the order and the clocks, and counts the aging steps taken (logging them for
// observers when asked).
#ifndef FAIRGATE_CORE_TIMED_STEPS_H_
#define FAIRGATE_CORE_TIMED_STEPS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "core/admission.h"
#include "core/queue_nodes.h"
#include "fairgate/rule_options.h"
#include "fairgate/status.h"

namespace fairgate::core {

class TimedSteps {
 public:
  explicit TimedSteps(const std::optional<AgingConfig>& aging) : aging_(aging) {}

  // Queue-wait expiry: for jobs whose type has a max_queue_wait.
  static bool Expires(const Job& job) { return job.type->config.max_queue_wait.count() > 0; }
  static double ExpiryAt(const Job& job) {
    return job.arrival + job.type->config.max_queue_wait.count();
  }
  void ScheduleExpiry(Job& job) {
    if (Expires(job)) expiries_.insert(EntryOf(job, ExpiryAt(job)));
  }
  void UnscheduleExpiry(Job& job) {
    if (Expires(job)) expiries_.erase(EntryOf(job, ExpiryAt(job)));
  }
  // The first job whose queue-wait limit is reached by `now` (still queued here), or null.
  Job* ExpiryDueBy(double now) const {
    return !expiries_.empty() && ExpiryAt(*expiries_.begin()->job) <= now ? expiries_.begin()->job
                                                                          : nullptr;
  }
  std::optional<double> NextExpiryAt() const {
    if (expiries_.empty()) return std::nullopt;
    return ExpiryAt(*expiries_.begin()->job);
  }

  // Aging: for pending jobs that can rise (the core decides: aging on, not paused, a tier above).
  // Only with aging configured.
  double NextStepAt(const Job& job) const {
    return (job.arrival + PausedTotal(job)) + aging_->grace.count() +
           static_cast<double>(job.promotions + 1) * aging_->interval.count();
  }
  void SchedulePromotion(Job& job) {
    promotions_.insert(EntryOf(job, NextStepAt(job)));
    job.promotion_scheduled = true;
  }
  // Unschedules the job's aging step, if it has one.
  void UnschedulePromotion(Job& job) {
    if (!job.promotion_scheduled) return;
    promotions_.erase(EntryOf(job, NextStepAt(job)));
    job.promotion_scheduled = false;
  }
  // Unschedules and returns the first job whose aging step is due by `now`, or null.
  Job* TakePromotionDueBy(double now) {
    if (promotions_.empty() || NextStepAt(*promotions_.begin()->job) > now) return nullptr;
    Job* job = promotions_.begin()->job;
    promotions_.erase(promotions_.begin());
    job->promotion_scheduled = false;
    return job;
  }
  bool PromotionDueBy(double now) const {
    return !promotions_.empty() && NextStepAt(*promotions_.begin()->job) <= now;
  }
  // The aging steps taken: counted, and recorded in `log` once one is set (null: nowhere), for
  // observers. CountPromotion counts one and says whether to describe it to LogPromotion.
  void set_promotion_log(std::vector<Promotion>* log) { promotion_log_ = log; }
  std::uint64_t promotions_taken() const { return promotions_taken_; }
  bool CountPromotion() {
    ++promotions_taken_;
    return promotion_log_ != nullptr;
  }
  void LogPromotion(Promotion promotion) { promotion_log_->push_back(std::move(promotion)); }

  // Pause clocks (with aging): aging counts only the time a job was not paused. A clock exists
  // from a pending job's first pause until it leaves the pending jobs; kept aside (empty unless
  // pauses are used) rather than in every Job.
  void StopClock(const Job& job, double now) { clocks_[&job].since = now; }
  void RestartClock(const Job& job, double now) {
    Clock& clock = clocks_[&job];
    clock.total += now - clock.since;
  }
  void Forget(const Job& job) {
    if (!clocks_.empty()) clocks_.erase(&job);
  }
  // How long the job was paused before its current pause (0 if never).
  double PausedTotal(const Job& job) const {
    if (clocks_.empty()) return 0;
    auto it = clocks_.find(&job);
    return it == clocks_.end() ? 0 : it->second.total;
  }

  // Part of AdmissionCore::CheckInvariants: whether each queue holds `job` at its due time, and
  // whether the queues hold `promoting` and `expiring` jobs, no more, and only pending jobs have
  // clocks.
  bool HasPromotion(const Job& job) const {
    return promotions_.contains(EntryOf(job, NextStepAt(job)));
  }
  bool HasExpiry(const Job& job) const { return expiries_.contains(EntryOf(job, ExpiryAt(job))); }
  Status CheckSizes(std::size_t promoting, std::size_t expiring) const;

 private:
  // A job in a queue, by due time, then enqueue order.
  struct Entry {
    std::uint64_t at = 0;  // SortableBits
    std::uint64_t seq = 0;
    Job* job = nullptr;
    bool operator<(const Entry& o) const {
      if (at != o.at) return at < o.at;
      return seq < o.seq;
    }
  };
  static Entry EntryOf(const Job& job, double at) {
    return {SortableBits(at), job.seq, const_cast<Job*>(&job)};
  }
  struct Clock {
    double total = 0;  // paused before the current pause
    double since = 0;  // when the current pause began
  };

  const std::optional<AgingConfig> aging_;
  absl::btree_set<Entry> promotions_;  // empty without aging
  absl::btree_set<Entry> expiries_;
  absl::flat_hash_map<const Job*, Clock> clocks_;
  std::vector<Promotion>* promotion_log_ = nullptr;
  std::uint64_t promotions_taken_ = 0;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_TIMED_STEPS_H_
