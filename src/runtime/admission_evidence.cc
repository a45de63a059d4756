#include "runtime/admission_evidence.h"

#include <string>

namespace fairgate::internal {

AdmissionEvidence ToEvidence(const core::Admission& a, double now) {
  AdmissionEvidence e;
  e.time = now;
  e.type = std::string(a.type);
  e.id = std::string(a.id);
  e.key = std::string(a.key);
  e.tier = a.priority;
  e.effective_tier = a.effective_priority;
  e.aged = a.effective_priority != a.priority;
  e.reserved = a.reserved;
  e.accumulated_cost = a.accumulated_before;
  e.sjf = a.sjf;
  e.arrival = a.arrival;
  e.seq = a.seq;
  e.estimate = a.charge;
  e.estimate_source = a.estimate_source == core::EstimateSource::kExplicit  ? "explicit"
                      : a.estimate_source == core::EstimateSource::kLearned ? "learned"
                                                                            : "default";
  e.weight = a.weight;
  e.skipped_global_cap = a.skipped.global_cap;
  e.skipped_tier_cap = a.skipped.tier_cap;
  e.skipped_type_cap = a.skipped.type_cap;
  e.skipped_key_limit = a.skipped.key_limit;
  e.skipped_conflict = a.skipped.conflict;
  e.skipped_worker = a.skipped.worker;
  e.skipped_rate_limit = a.skipped.rate_limit;
  e.worker = std::string(a.worker);
  e.worker_reserved = a.worker_reserved;
  e.borrowed = a.borrowed;
  return e;
}

}  // namespace fairgate::internal
