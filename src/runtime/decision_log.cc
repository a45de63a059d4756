#include "runtime/decision_log.h"

#include "runtime/admission_evidence.h"
#include "runtime/detached_status.h"

namespace fairgate::internal {
namespace {

// An event about the job (type, id, key) at `now`; the rest is the caller's.
JobEvent EventAbout(JobEvent::Kind kind, double now, std::string_view type, std::string_view id,
                    std::string_view key) {
  JobEvent e;
  e.kind = kind;
  e.time = now;
  e.type = std::string(type);
  e.id = std::string(id);
  e.key = std::string(key);
  return e;
}

}  // namespace

DecisionLog::DecisionLog(const SchedulerOptions& options, core::AdmissionCore& core)
    : core_(core),
      delivery_(options.runtime.observers, options.runtime.evidence,
                options.runtime.observer_queue_limit) {
  if (delivery_.wants_events()) core_.set_promotion_log(&promotions_);
}

void DecisionLog::TypeRegistered(std::string_view name, int priority) {
  metrics_.AddType(*core_.TypeIndex(name), std::string(name), priority);
}

JobEvent DecisionLog::EventOf(JobEvent::Kind kind, const core::JobView& job, double now) const {
  JobEvent e = EventAbout(kind, now, job.type, job.id, job.key);
  e.tier = job.priority;
  e.effective_tier = job.effective_priority;
  e.charge = job.charge;
  e.wait = now - job.arrival;
  e.worker = std::string(job.worker);
  return e;
}

void DecisionLog::Rejected(std::string_view type, std::string_view id, std::string_view key,
                           const Status& why, double now) {
  metrics_.Rejected(why.code());
  if (!delivery_.wants_events()) return;
  JobEvent e = EventAbout(JobEvent::Kind::kReject, now, type, id, key);
  e.status = Detached(why);  // read and freed on the delivery thread
  events_.push_back(std::move(e));
}

void DecisionLog::Enqueued(const core::JobView& job) { metrics_.Enqueued(job.type_index); }

void DecisionLog::Admitted(const core::Admission& a, double now) {
  metrics_.Admitted(a.type_index, now - a.arrival, a.waited_on_conflict, a.borrowed);
  Promotions(now);
  if (delivery_.wants_events()) {
    const core::JobView job{.type = a.type,
                            .id = a.id,
                            .key = a.key,
                            .type_index = a.type_index,
                            .priority = a.priority,
                            .effective_priority = a.effective_priority,
                            .arrival = a.arrival,
                            .running = true,
                            .charge = a.charge,
                            .worker = a.worker};
    JobEvent e = EventOf(JobEvent::Kind::kAdmit, job, now);
    e.accumulated_cost = a.accumulated_before + a.charge / a.weight;
    events_.push_back(std::move(e));
  }
  if (delivery_.wants_evidence()) evidence_.push_back(ToEvidence(a, now));
}

void DecisionLog::Completed(const core::JobView& job, const Status& status, double run_time,
                            double now) {
  metrics_.Completed(job.type_index, status.code(), run_time);
  if (!delivery_.wants_events()) return;
  JobEvent e = EventOf(JobEvent::Kind::kComplete, job, now);
  e.wait = 0;
  e.run_time = run_time;
  e.status = Detached(status);  // read and freed on the delivery thread
  e.accumulated_cost = core_.AccumulatedCost(job.key).value_or(0);
  events_.push_back(std::move(e));
}

void DecisionLog::Cancelled(const core::JobView& job, const Status& why, double now) {
  metrics_.Cancelled(job.type_index);
  LeftPendingEvent(JobEvent::Kind::kCancel, job, why, now);
}

void DecisionLog::Expired(const core::JobView& job, const Status& why, double now) {
  metrics_.Expired(job.type_index);
  LeftPendingEvent(JobEvent::Kind::kExpire, job, why, now);
}

void DecisionLog::Shed(const core::JobView& job, const Status& why, double now) {
  LeftPendingEvent(JobEvent::Kind::kShed, job, why, now);
}

void DecisionLog::LeftPendingEvent(JobEvent::Kind kind, const core::JobView& job, const Status& why,
                                   double now) {
  if (!delivery_.wants_events()) return;
  JobEvent e = EventOf(kind, job, now);
  e.accumulated_cost = core_.AccumulatedCost(job.key).value_or(0);
  e.status = Detached(why);  // read and freed on the delivery thread
  events_.push_back(std::move(e));
}

void DecisionLog::Evicted(const core::SweepResult& swept,
                          std::vector<std::pair<std::string, double>>& keys, double now) {
  metrics_.KeysEvicted(swept.keys_evicted);
  for (auto& [key, acc] : keys) {
    JobEvent e = EventAbout(JobEvent::Kind::kEvict, now, "", "", "");
    e.key = std::move(key);
    e.accumulated_cost = acc;
    events_.push_back(std::move(e));
  }
}

void DecisionLog::Promotions(double now) {
  for (const core::Promotion& p : promotions_) {
    JobEvent e = EventAbout(JobEvent::Kind::kPromote, now, p.type, p.id, p.key);
    e.tier = p.from_priority;
    e.effective_tier = p.to_priority;
    e.accumulated_cost = core_.AccumulatedCost(p.key).value_or(0);
    e.wait = p.at - p.arrival;
    events_.push_back(std::move(e));
  }
  promotions_.clear();
}

void DecisionLog::Post() { delivery_.Post(events_, evidence_); }

void DecisionLog::WriteMetrics(std::string& out, double now) {
  metrics_.ObserverEventsDropped(delivery_.TakeDropped());
  metrics_.Write(out, core_.TakeSnapshot(now), core_.promotions_total());
}

}  // namespace fairgate::internal
