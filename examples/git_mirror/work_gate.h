// WorkGate: the admission policy the git mirror sends every piece of work through.
//
// Two policies behind one interface, so the difference shows on the same server:
// - MakeFairgateGate: one fairgate::Scheduler. Clones (type "clone") and first mirrors
//   ("sync-clone") are foreground, keyed by client; fetches and repacks are background, keyed "".
//   "sync-clone", "fetch" and "repack" share the conflict group "git": never two of them on one
//   repository at once. Costs are learned per (type, repository), never configured.
// - MakeFifoGate: a plain FIFO semaphore of the same capacity. To stay correct it must still keep
//   git's writers apart, which it does as a server without fairgate would: a writer takes its slot,
//   then a per-repository lock (holding the slot while it waits for the lock).
//
// Thread safety: every method may be called from any thread at once. Run blocks the caller.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_WORK_GATE_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_WORK_GATE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "fairgate/context.h"
#include "fairgate/scheduler.h"
#include "fairgate/status.h"
#include "nlohmann/json.hpp"

namespace git_mirror {

inline constexpr std::string_view kClone = "clone";
inline constexpr std::string_view kSyncClone = "sync-clone";
inline constexpr std::string_view kFetch = "fetch";
inline constexpr std::string_view kRepack = "repack";

struct GateConfig {
  int capacity = 8;          // jobs running at once, all types together
  int sync_clone_slots = 2;  // first mirrors at once
  int background_slots = 2;  // fetches and repacks at once (their tier's cap)
  int repack_slots = 1;      // repacks at once, within background_slots
  // Jobs one client may have waiting; more are refused with ResourceExhausted (HTTP 429).
  std::size_t max_pending_per_client = 64;
  // fairgate only. Aging of fetches and repacks into the foreground tier (docs/ordering.md):
  // after `aging_grace`, then one tier per `aging_interval`; 0 interval: no aging. On by default
  // so that a flood of clones cannot keep a mirror from being fetched for ever.
  double aging_grace_seconds = 60;
  double aging_interval_seconds = 60;
  // fairgate only. Per-client limits (fairgate/key_limits.h); 0 max: capacity - 1 (at least 1),
  // so that one client never holds every slot and a newcomer waits for no one's whole clone.
  int client_max_running = 0;
  int client_min_running = 0;
};

class WorkGate {
 public:
  using JobFn = fairgate::Scheduler::JobFn;
  using DoneCallback = fairgate::Scheduler::DoneCallback;
  virtual ~WorkGate() = default;

  // Waits until the job is admitted, runs `fn` on the caller and returns its status; or returns
  // without running it: ctx.Err() when `ctx` ends first, ResourceExhausted when the client has
  // too many jobs waiting, Unavailable or Cancelled once the gate shuts down.
  virtual fairgate::Status Run(const fairgate::Context& ctx, std::string_view type,
                               std::string_view repository, std::string_view client,
                               const JobFn& fn) = 0;
  // Queues a background job. `done` is called exactly once, with fn's status or Cancelled, unless
  // Submit itself refuses (then never).
  virtual fairgate::Status Submit(std::string_view type, std::string_view repository, JobFn fn,
                                  DoneCallback done) = 0;
  // Running and waiting jobs, for /debug/scheduler.
  virtual nlohmann::json DebugState() const = 0;
  // The Prometheus text exposition, for /metrics.
  virtual std::string Metrics() const = 0;
  // Refuses new work, fails what waits, and waits for what runs.
  virtual void Shutdown() = 0;
};

fairgate::Status ValidateGateConfig(const GateConfig& config);
fairgate::StatusOr<std::unique_ptr<WorkGate>> MakeFairgateGate(const GateConfig& config);
fairgate::StatusOr<std::unique_ptr<WorkGate>> MakeFifoGate(const GateConfig& config);

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_WORK_GATE_H_
