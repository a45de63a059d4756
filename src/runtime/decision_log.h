// DecisionLog: what the scheduler's decisions look like from outside: the counters and
// histograms of WriteMetrics, the observers' events and the evidence records. One method per
// decision, each fed by the core's own description of the job (core::Admission, core::JobView,
// core::Promotion), so the runtime keeps no copy of what the core knows. Internal to fairgate.
//
// Called under the scheduler's lock, in decision order; Post hands what a decision gathered to
// the delivery thread before the lock is released, so observers see decisions in order. Events
// are built only when an observer listens, evidence only when a sink does.
//
// Not thread-safe: the scheduler's lock guards it (Flush and TakeDropped excepted, see
// EventDelivery).
#ifndef FAIRGATE_RUNTIME_DECISION_LOG_H_
#define FAIRGATE_RUNTIME_DECISION_LOG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/admission_core.h"
#include "fairgate/options.h"
#include "fairgate/snapshot.h"
#include "fairgate/status.h"
#include "metrics/scheduler_metrics.h"
#include "runtime/event_delivery.h"

namespace fairgate::internal {

class DecisionLog {
 public:
  DecisionLog(const SchedulerOptions& options, core::AdmissionCore& core);

  void TypeRegistered(std::string_view name, int priority);
  // A call refused before its job was queued.
  void Rejected(std::string_view type, std::string_view id, std::string_view key, const Status& why,
                double now);
  void Enqueued(const core::JobView& job);
  // A job admitted by the very call that queued it, as its admission describes it: the same
  // count as Enqueued(JobView), without asking the core to describe the job again.
  void Enqueued(const core::Admission& admitted) { metrics_.Enqueued(admitted.type_index); }
  // A call that joined `job` (coalescing): counted, no event (the job's own events tell its story).
  void Joined(const core::JobView& job) { metrics_.Joined(job.type_index); }
  // Adaptive capacity could not read its signal: the cap stays for this interval.
  void CapacitySignalFailed() { metrics_.CapacitySignalFailed(); }
  // The aging steps this admission took come first, then the admission.
  void Admitted(const core::Admission& admission, double now);
  // `job` as described before the core completed it.
  void Completed(const core::JobView& job, const Status& status, double run_time, double now);
  // A pending job that left without running; `job` as described before the core cancelled it.
  void Cancelled(const core::JobView& job, const Status& why, double now);
  // A pending job reached its type's max_queue_wait: an expiry in the metrics, a kExpire event
  // with `why` (DeadlineExceeded).
  void Expired(const core::JobView& job, const Status& why, double now);
  // A pending job refused by its type's shedding: a kShed event with `why` (the core counts it).
  void Shed(const core::JobView& job, const Status& why, double now);
  void Evicted(const core::SweepResult& swept, std::vector<std::pair<std::string, double>>& keys,
               double now);
  // The aging steps the core took since the last call (AdvanceTo), as events.
  void Promotions(double now);
  // Whether aging steps wait for Promotions.
  bool PromotionsPending() const { return !promotions_.empty(); }
  // Hands the gathered events and evidence to the delivery thread, in order.
  void Post();

  // Whether `Evicted` wants the evicted keys' names.
  bool wants_events() const { return delivery_.wants_events(); }
  // Snapshot's counters, per type in registration order, and the totals.
  const metrics::SchedulerMetrics& metrics() const { return metrics_; }
  // The metrics in the Prometheus text format, the state read at `now`.
  void WriteMetrics(std::string& out, double now);
  // Outside the lock: waits until everything posted has been delivered.
  void Flush() { delivery_.Flush(); }

 private:
  JobEvent EventOf(JobEvent::Kind kind, const core::JobView& job, double now) const;
  // The event of a pending job that left without running: kCancel or kExpire.
  void LeftPendingEvent(JobEvent::Kind kind, const core::JobView& job, const Status& why,
                        double now);

  core::AdmissionCore& core_;
  metrics::SchedulerMetrics metrics_;
  EventDelivery delivery_;
  std::vector<JobEvent> events_;
  std::vector<AdmissionEvidence> evidence_;
  std::vector<core::Promotion> promotions_;  // filled by the core when observed
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_DECISION_LOG_H_
