// fairgate/observer.h: what a scheduler did, told to code of yours as it happens.
//
// An Observer receives one JobEvent per decision: a job admitted, completed, cancelled while
// pending, expired at its type's max_queue_wait while pending, rejected at the door, aged one tier
// up (with aging), and a fairness key evicted by the TTL sweep. Register observers in
// RuntimeOptions::observers.
//
// Contract:
// - Observers run outside the scheduler's lock, on one delivery thread per scheduler, in the order
//   the decisions were made. They cannot stall admission: decisions append the event to a queue
//   and move on. If an observer falls behind by more than RuntimeOptions::observer_queue_limit
//   events, newer events are dropped (and counted in fairgate_observer_events_dropped_total).
// - OnEvent may call the scheduler's const methods and Submit/RunSync from another thread, but it
//   must not block for long (it delays the events after it), and must not call Shutdown, Drain or
//   the destructor (they wait for the delivery thread). An exception escaping OnEvent is caught and
//   dropped.
// - Events delivered before Shutdown returns: every event of a decision made before it.
//
// Thread safety: OnEvent is called from the delivery thread only, never concurrently.
#ifndef FAIRGATE_OBSERVER_H_
#define FAIRGATE_OBSERVER_H_

#include <string>

#include "fairgate/export.h"
#include "fairgate/status.h"

namespace fairgate {

struct JobEvent {
  // kExpire is last so that the values of the others stay what they were before it existed.
  // kShed: a pending job refused by its type's shedding (JobTypeConfig::shedding); a call refused
  // so at its arrival is a kReject whose status WasShed (fairgate/shedding.h).
  enum class Kind { kAdmit, kComplete, kCancel, kReject, kPromote, kEvict, kExpire, kShed };
  Kind kind = Kind::kAdmit;
  double time = 0;  // the scheduler's clock, seconds
  // The job (for kEvict: only `key` is set).
  std::string type;
  std::string id;
  std::string key;
  int tier = 0;            // its type's priority
  int effective_tier = 0;  // the tier it orders in (above `tier` once it aged)
  // kAdmit, kComplete: what the job was charged (before the key's weight); at a kComplete, 0 for
  // a permit given back unused (Permit::ReleaseUnused: the charge was given back).
  double charge = 0;
  double accumulated_cost = 0;  // the key's accumulated cost after the event
  double wait = 0;      // kAdmit, kCancel, kExpire, kShed, kPromote: seconds since it was enqueued
  double run_time = 0;  // kComplete: seconds it ran
  // kComplete: the job's status; kCancel, kExpire, kReject, kShed: why (kCancel: Cancelled or the
  // context's error; kExpire: DeadlineExceeded, naming max_queue_wait; kShed: ResourceExhausted,
  // with RetryAfter). A job lost with its
  // worker completes at the worker's removal with WorkerLostError (fairgate/worker.h).
  Status status;
  // kAdmit, kComplete, with workers declared: the worker it runs on (fairgate/worker.h).
  std::string worker;
};

class FAIRGATE_EXPORT Observer {
 public:
  virtual ~Observer() = default;
  virtual void OnEvent(const JobEvent& event) = 0;
};

// "admit", "complete", "cancel", "reject", "promote", "evict", "expire".
FAIRGATE_EXPORT const char* JobEventKindName(JobEvent::Kind kind);

}  // namespace fairgate

#endif  // FAIRGATE_OBSERVER_H_
