// Submission: what a service built on the scheduler may ask of it. Internal to src/runtime.
//
// The runtime has three layers. The admission table (admission_table.h: the core, its lock and
// the records of the calls it decides), the calls that go through it (RunSync, Submit, Acquire:
// Scheduler::Impl), and services built on Submit: periodic runs (periodic_runs.h), durable jobs
// (durable_jobs.h), the state keeper (state_keeper.h), the fleet's claims and leases (claimer.h,
// fleet_leases.h). A service reaches the scheduler only through this interface: each call takes the
// scheduler's lock itself, briefly, and no service ever holds that lock, so a service's own lock
// may be held across these calls (a service's lock comes before the scheduler's, never after).
//
// Thread safety: every method may be called from any thread or fiber at once.
#ifndef FAIRGATE_RUNTIME_SUBMISSION_H_
#define FAIRGATE_RUNTIME_SUBMISSION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/latency_rule.h"
#include "fairgate/job_options.h"
#include "fairgate/scheduler.h"
#include "fairgate/status.h"
#include "fairgate/store.h"

namespace fairgate::internal {

class Submission {
 public:
  virtual ~Submission() = default;

  // What a service's job may bring beyond Scheduler::Submit's.
  struct ServiceJob {
    // The fencing token of the fleet-wide leases a claimed durable job's claim took (0: none),
    // which it then runs under instead of taking its own.
    std::uint64_t claimed_leases = 0;
    // Not null: read once the job's fn has returned, on the thread that ran it; true when its run
    // says nothing of its cost (AdmissionCore::CompleteUnmeasured: a durable attempt that was
    // fenced). The service keeps the flag alive as long as the fn.
    const bool* unmeasured = nullptr;
  };
  // Queues a background job as Scheduler::Submit does, with its refusals (Unavailable once
  // Shutdown or Drain began).
  virtual Status Submit(std::string_view type, std::string_view id, std::string_view key,
                        Scheduler::JobFn fn, Scheduler::DoneCallback done,
                        const JobOptions& options, const ServiceJob& service) = 0;

  // OK while the scheduler accepts calls; else Unavailable, saying whether it drains or is shut
  // down.
  virtual Status Open() const = 0;

  // What the rule knows of a registered type; nothing for an unknown one.
  struct TypeInfo {
    int priority = 1;
    bool paused = false;
    bool served = true;  // false while workers are declared and none serves the type
    // How many of its jobs may run here at once: its max_concurrency, within the global cap in
    // force (by its slots).
    int at_once = 1;
  };
  virtual std::optional<TypeInfo> Type(std::string_view type) const = 0;

  // The service's next due time may have moved earlier: the timer asks every service again.
  virtual void WakeTimer() = 0;

  // What a rule that moves the global cap reads, in one decision.
  struct CapacityInputs {
    int current = 0;            // the cap in force
    bool work_waiting = false;  // whether jobs wait for admission
    double now = 0;             // the scheduler's clock, as the runs' times are
    // With the latency rule (RuleOptions::latency_capacity): the measured runs completed since
    // the last call (at most AdmissionTable::kMaxRunSamples of them); else empty.
    std::vector<core::RunSample> runs;
  };
  // Adaptive capacity and the latency rule (capacity_controller.h, latency_controller.h): sets
  // the global cap in force to `next(inputs)`, in one decision; a cap that grew admits what it has
  // room for.
  virtual void ChangeCapacity(const std::function<int(const CapacityInputs&)>& next) = 0;
  // Adaptive capacity could not read its signal: counted in the metrics.
  virtual void CountCapacitySignalFailed() = 0;

  // The fleet's shared costs (fleet_costs.h), of keys or of groups of keys. Every tracked key's
  // (group's) accumulated cost, since when it has been idle (Unix seconds) and whether it is busy
  // (has jobs pending or running), read in one decision.
  enum class CostsOf { kKeys, kGroups };
  struct KeyCost {
    std::string key;  // or group
    double cost = 0;
    double idle_since_wall = 0;
    bool busy = false;
  };
  virtual std::vector<KeyCost> KeyCosts(CostsOf of) = 0;
  // For each of `totals` (the fleet's costs) whose key (group) is still tracked, in one decision:
  // its cost becomes the total plus what it was charged here since `collected` (its cost as
  // KeyCosts read it; never below 0). Whether each total was applied, in order.
  virtual std::vector<bool> SetFleetCosts(
      CostsOf of, const std::vector<SavedKey>& totals,
      const absl::flat_hash_map<std::string, double>& collected) = 0;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_SUBMISSION_H_
