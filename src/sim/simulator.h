// Simulate: replays a Trace in virtual time through the same AdmissionCore the runtime uses.
//
// Event-driven, no tick loop: an event loop (simulator.cc, Simulation::Run) with one handler per
// kind of event. At each instant: a TTL sweep, then adaptive capacity's rule if an interval ends
// then, then the pauses and resumes of that instant (file order), then the workers removed (their
// running jobs lost) and added at that instant, then the arrivals of that instant in file order
// (then the periodic runs due, in file order: each arrives an interval after its previous run
// ended), then its completions in the order the jobs were admitted, then the expiries due (jobs
// still pending at their type's max_queue_wait leave, in the order their limits were reached),
// then admissions until none is possible (and again, should a zero-length job complete at the
// same instant). The instants are the arrivals, the completions, the queue-wait limits, the
// pauses and resumes, the workers' changes and adaptive capacity's intervals. A job's observed
// cost is its duration (stretched on an oversubscribed machine, Trace::cores). A job of a
// coalescing type joins the job of its id as a Submit does (a `sync` one as a RunSync does); a
// coalesced job runs for the duration of the call whose function the runtime would run
// (core::ChooseRunner, which the runtime asks too; fairgate/scheduler.h, "Coalescing"). Nothing
// after `until` happens.
#ifndef FAIRGATE_SIM_SIMULATOR_H_
#define FAIRGATE_SIM_SIMULATOR_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "fairgate/evidence.h"
#include "fairgate/status.h"
#include "sim/trace.h"

namespace fairgate::sim {

struct SimEvent {
  // kRefuse: refused at its arrival by its type's shedding; kShed: taken from the queue by it.
  enum class Kind { kAdmit, kDone, kExpire, kJoin, kLost, kRefuse, kShed };
  double t = 0;
  Kind kind = Kind::kAdmit;
  // Index in SimResult::jobs. Admit, done and expire name the job that queued it; the jobs that
  // joined it (coalescing) have a join event each, at their arrival.
  std::size_t job = 0;
  int effective_priority = 0;       // admit: the tier it was admitted from (above its own if aged)
  bool waited_on_conflict = false;  // admit: it was set aside for a busy resource first
  bool borrowed = false;            // admit: over its tier's cap, on a lent slot (lending)
  std::string worker = {};  // admit, lost: the worker it runs on (with workers in the trace)
  std::size_t lead = 0;     // join: the job it joined (the one that queued the run)
};

// What became of one trace job; a job that joined another (coalescing) shares its outcome from
// its arrival on.
struct JobOutcome {
  std::optional<double> admitted_at;
  std::optional<double> done_at;
  std::optional<double> expired_at;  // it left the queue at its type's max_queue_wait
  std::optional<double> lost_at;     // its worker was removed while it ran
  std::optional<double> shed_at;     // refused by its type's shedding (at arrival or queued)
};

struct SimResult {
  // Every job: the trace's (same indexes), then each run of a periodic job, in order of arrival.
  std::vector<TraceJob> jobs;
  std::vector<SimEvent> events;             // in the order they happened
  std::vector<JobOutcome> outcomes;         // one per job of `jobs`
  std::vector<AdmissionEvidence> evidence;  // one per admission, with `with_evidence`
  // With adaptive capacity: (when, the new cap) at each change, in time order.
  std::vector<std::pair<double, int>> capacity_changes;
};

StatusOr<SimResult> Simulate(const Trace& trace, bool with_evidence = false);

// One event as a JSON line (without the newline):
// {"t":0,"event":"admit","type":"repack","id":"r1","key":""}
// With aging on, an admit event also has "tier" (its type's) and "effective_tier" (the tier it
// was admitted from). A job that reached its type's max_queue_wait has an "expire" event, a job
// that joined another a "join" event; a job its type's shedding refused at its arrival a "refuse"
// event, one it took from the queue a "shed" event.
std::string FormatEvent(const Trace& trace, const SimResult& result, const SimEvent& event);

// Per fairness key, in order of first appearance: jobs, jobs admitted, mean and worst wait
// (admission minus arrival) of the admitted ones; and, when a type shed any, the jobs shed.
std::string FormatKeyTable(const SimResult& result);

// A number as the events print it: whole numbers without a decimal point, others in the
// shortest form that reads back to the same double.
std::string FormatNumber(double value);

}  // namespace fairgate::sim

#endif  // FAIRGATE_SIM_SIMULATOR_H_
