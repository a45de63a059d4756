// fairgate/evidence.h: the reason for every admission, one JSON line each.
//
// With RuntimeOptions::evidence set, the scheduler hands over one AdmissionEvidence per
// admission: the job, its place in the order (the tuple of docs/ordering.md), the estimate it was
// charged and where that came from, and what the decision set aside to reach it. `fairgate sim
// --evidence FILE` writes the same records for a trace. The sink is called like an observer
// (fairgate/observer.h): outside the lock, from the delivery thread, in decision order.
//
// Thread safety: ToJsonLine is a pure function; an EvidenceSink from OpenEvidenceFile may be
// called from one thread at a time (as the scheduler does).
#ifndef FAIRGATE_EVIDENCE_H_
#define FAIRGATE_EVIDENCE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "fairgate/export.h"
#include "fairgate/status.h"

namespace fairgate {

struct AdmissionEvidence {
  double time = 0;
  std::string type, id, key;
  // The order tuple: (-effective_tier, aged ? 0 : 1, reserved ? 0 : 1, accumulated_cost, sjf,
  // arrival, seq).
  int tier = 0;
  int effective_tier = 0;
  bool aged = false;
  bool reserved = false;
  double accumulated_cost = 0;  // the key's, when the decision was made (before this charge)
  double sjf = 0;
  double arrival = 0;
  std::uint64_t seq = 0;
  // What it was charged, and where the estimate came from: "explicit" (the caller's cost),
  // "learned" (the (type, id) has completed before) or "default" (the type's default_cost).
  double estimate = 0;
  std::string estimate_source;
  double weight = 1;  // the key's; the accumulated cost grew by estimate / weight
  // What this decision passed over to reach the job, ahead of it in the order:
  int skipped_global_cap = 0;  // types with pending jobs whose slots the global cap had no room
                               // for (only multi-slot types; in the JSON only when not 0)
  int skipped_tier_cap = 0;    // tiers at their cap, with pending jobs, skipped whole; and types
                               // whose slots their tier had no room for
  int skipped_type_cap = 0;    // types at their cap, with pending jobs, skipped whole
  int skipped_key_limit = 0;   // queues of keys at their max_running or without a token of
                               // their rate limit: one per (key, type), or one per key for the
                               // types that share their tier's (one slot a job, a
                               // max_concurrency at least the tier's cap, not paused, no
                               // workers declared)
  int skipped_conflict = 0;    // jobs found first in their queue while their conflict resource
                               // was full, set aside in this decision
  int skipped_worker = 0;      // types with pending jobs none of whose workers had room
  int skipped_rate_limit = 0;  // types with pending jobs whose rate limit had no token
                               // (JobTypeConfig::rate_limit; in the JSON only when not 0)
  // With workers (fairgate/worker.h): the one it runs on, and whether it went there by its
  // type's sole-worker reservation (RuleOptions::sole_worker_reserve_after). In the JSON only
  // with workers.
  std::string worker;
  bool worker_reserved = false;
  // It ran over its tier's cap on a slot no admissible job wanted (RuleOptions::lending). In the
  // JSON only when true.
  bool borrowed = false;
};

// The record as one line of JSON, without the newline; keys in a fixed order.
FAIRGATE_EXPORT std::string ToJsonLine(const AdmissionEvidence& evidence);

using EvidenceSink = std::function<void(const AdmissionEvidence&)>;

// A sink that appends ToJsonLine records to `path`, flushed per line. InvalidArgument naming the
// path and the error if it cannot be opened.
FAIRGATE_EXPORT StatusOr<EvidenceSink> OpenEvidenceFile(const std::string& path);

}  // namespace fairgate

#endif  // FAIRGATE_EVIDENCE_H_
