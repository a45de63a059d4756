// WorkGate: the admission policy the git mirror sends every piece of work through.
//
// Two policies behind one interface, so the difference shows on the same server:
// - MakeFairgateGate: one fairgate::Scheduler. Clones (type "clone"), ref listings ("refs") and
//   first mirrors ("sync-clone") are foreground, keyed by client; fetches and repacks are
//   background, keyed "".
//   "sync-clone", "fetch" and "repack" share the conflict group "git": never two of them on one
//   repository at once. Costs are learned per (type, repository), never configured. With a
//   database (GateConfig::database) the replicas of one mirror share one fair scheduler.
// - MakeFifoGate: a plain FIFO semaphore of the same capacity. To stay correct it must still keep
//   git's writers apart, which it does as a server without fairgate would: a writer takes its slot,
//   then a per-repository lock (holding the slot while it waits for the lock).
//
// Foreground requests are admitted asynchronously (Acquire): a waiting request costs no thread,
// and the slot it gets is held until the response has been sent (Slot). Background work runs on
// the gate's own threads (Submit).
//
// Thread safety: every method may be called from any thread at once.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_WORK_GATE_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_WORK_GATE_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "fairgate/context.h"
#include "fairgate/scheduler.h"
#include "fairgate/status.h"
#include "nlohmann/json.hpp"

namespace git_mirror {

inline constexpr std::string_view kClone = "clone";
inline constexpr std::string_view kRefs = "refs";
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
  // fairgate only. Rate limits (fairgate/rate_limit.h), 0: none. `client_rate`: git requests
  // that run git (a clone over protocol v2 makes three: the advertisement, the ref listing and
  // the pack; a first mirror one more) one client may start per second, after a burst of
  // `client_burst`; `rate`: packs all clients together may start per second, after a burst of
  // `burst`. A request over a limit is refused at once with 429 and a Retry-After that says when
  // its token is due. A request answered from the pack cache runs nothing and takes no token;
  // maintenance (fetches, repacks: client "") is not limited.
  double client_rate = 0;
  double client_burst = 4;
  double rate = 0;
  double burst = 1;
  // fairgate only. 0: the cap is `capacity`. Else adaptive capacity
  // (fairgate/adaptive_capacity.h): the cap follows CPU, memory and io pressure (the worst; the
  // server's own cgroup's when it runs in one) between this and `capacity`, so that clones (git
  // pack-objects is CPU-bound, and may take gigabytes) do not oversubscribe the machine.
  int adaptive_min = 0;
  // fairgate only, with `adaptive_min`. 0: off. Else the cap follows the server's cgroup's memory
  // in use against its limit too (fairgate::PressureSource::kMemoryUse): it shrinks while more
  // than this share of the limit is in use and may grow below it less 0.1, so that git
  // processes are not started into the kernel's OOM killer. In (0, 1]; the server must run in a
  // cgroup with a memory limit (v2, or a v1 memory controller), else it does not start.
  double memory_high = 0;
  // fairgate only. 0: off. Else the latency rule (fairgate/latency_capacity.h): the cap follows
  // how much slower clones and fetches run than they did unloaded, between this and `capacity`,
  // starting at this; no threshold to set. Not with `adaptive_min`.
  int latency_min = 0;
  // fairgate only. 0: off. Else shedding (fairgate/shedding.h) of ref listings and packs: while
  // the oldest waiting request of one of them has waited over this many seconds for
  // `shed_interval` seconds, the heaviest client's latest requests are refused with 503 and a
  // Retry-After of `shed_interval` (rounded up), new and waiting alike, while lighter clients
  // are served.
  double shed_target = 0;
  double shed_interval = 1;
  // fairgate only. A SQLite file that keeps the learned costs of clones and fetches, the clients'
  // accumulated costs and the fetch schedule across restarts (fairgate/store.h); empty: none.
  std::string state_file;
  // fairgate only. A PostgreSQL database (a libpq connection string or postgresql:// URL) shared
  // by the replicas of one mirror (fairgate/postgres_store.h): it keeps what state_file keeps,
  // for all of them, and makes two things fleet-wide: a client's accumulated cost (its clones on
  // every replica count, shared about once a second) and the conflict group "git" (no two
  // replicas run a first mirror, fetch or repack of one repository at once). The replicas share
  // their mirror directory. Empty: none; exclusive with state_file.
  std::string database;
  // fairgate only. Groups of clients (client_group.h): "prefix:V4/V6" puts a client named by its
  // address in its address's network, so that clones spread over a network's addresses take one
  // share, and run no more jobs together than one client may; "header:NAME" puts a key
  // "G,client" (ClientGroups::KeyOf: a trusted proxy's header NAME said G) in group G; "": none.
  std::string client_group;
  // fairgate only, with `database`: this replica's name in the leases it holds, unique among the
  // replicas that run at once. Empty: host name, process id and a random suffix.
  std::string replica;
};

// A slot held by a foreground request: released exactly once, by Release, ReleaseUnused or the
// destructor (as OK). Move-only; the release may happen on any thread.
class Slot {
 public:
  // `used`: false when the request did none of its work (ReleaseUnused).
  using ReleaseFn = std::function<void(const fairgate::Status&, bool used)>;
  Slot() = default;
  explicit Slot(ReleaseFn release) : release_(std::move(release)) {}
  Slot(Slot&& other) noexcept : release_(std::exchange(other.release_, nullptr)) {}
  Slot& operator=(Slot&& other) noexcept {
    if (this != &other) {
      Release(absl::OkStatus());
      release_ = std::exchange(other.release_, nullptr);
    }
    return *this;
  }
  ~Slot() { Release(absl::OkStatus()); }
  bool held() const { return release_ != nullptr; }
  // Completes the job with `status` (what the policy's metrics and learning see); no-op if empty.
  void Release(const fairgate::Status& status) { End(status, /*used=*/true); }
  // Gives the slot back without having started the work (its client went away as it was
  // admitted): the policy learns nothing from it (fairgate: Permit::ReleaseUnused).
  void ReleaseUnused(const fairgate::Status& status) { End(status, /*used=*/false); }

 private:
  void End(const fairgate::Status& status, bool used) {
    if (ReleaseFn release = std::exchange(release_, nullptr)) release(status, used);
  }

  ReleaseFn release_;
};

class WorkGate {
 public:
  using JobFn = fairgate::Scheduler::JobFn;
  using DoneCallback = fairgate::Scheduler::DoneCallback;
  using SlotCallback = std::function<void(fairgate::StatusOr<Slot>)>;
  using CancelFn = std::function<void()>;
  virtual ~WorkGate() = default;

  // Queues a foreground job and returns at once: a function that cancels the wait (harmless once
  // admitted), or the refusal (ResourceExhausted when the client has too many jobs waiting,
  // Unavailable once the gate shuts down), and then `on_admitted` is never called. Otherwise
  // `on_admitted` is called exactly once, from any thread (inside Acquire too), with a Slot, or
  // with Cancelled when the wait was cancelled or the gate shut down.
  virtual fairgate::StatusOr<CancelFn> Acquire(std::string_view type, std::string_view repository,
                                               std::string_view client,
                                               SlotCallback on_admitted) = 0;

  // Queues a job run on the gate's threads, under `client` ("" for maintenance). `done` is called
  // exactly once, with fn's status or Cancelled, unless Submit itself refuses (then never).
  virtual fairgate::Status Submit(std::string_view type, std::string_view repository,
                                  std::string_view client, JobFn fn, DoneCallback done) = 0;
  // Runs `fn` as background job (type, repository) of `client` every `interval`, the next run
  // `interval` after the previous one ended, never two at once; `on_run` (may be empty) gets each
  // run's status. Returns a function that stops it (call it before the gate is destroyed), or the
  // refusal. The fairgate gate spreads the first runs over one interval and jitters the others
  // (fairgate/periodic.h); the FIFO gate runs every one a whole interval after its start.
  virtual fairgate::StatusOr<CancelFn> SubmitEvery(std::string_view type,
                                                   std::string_view repository,
                                                   std::string_view client,
                                                   std::chrono::milliseconds interval, JobFn fn,
                                                   DoneCallback on_run) = 0;
  // Running and waiting jobs, for /debug/scheduler.
  virtual nlohmann::json DebugState() const = 0;
  // The learned cost of (type, repository) in seconds, if the policy learns one (fairgate).
  virtual std::optional<double> Estimate(std::string_view type,
                                         std::string_view repository) const = 0;
  // Charges `client` `seconds` of work done without a slot (a pack served from the cache), so
  // that its later requests wait behind those of clients it has outdone (fairgate); the FIFO
  // gate keeps no account and ignores it.
  virtual fairgate::Status Charge(std::string_view client, double seconds) = 0;
  // The Prometheus text exposition, for /metrics.
  virtual std::string Metrics() const = 0;
  // Refuses new work, fails what waits, cancels the context given to running Submit jobs, and
  // waits for what runs (held slots included).
  virtual void Shutdown() = 0;
};

fairgate::Status ValidateGateConfig(const GateConfig& config);
fairgate::StatusOr<std::unique_ptr<WorkGate>> MakeFairgateGate(const GateConfig& config);
fairgate::StatusOr<std::unique_ptr<WorkGate>> MakeFifoGate(const GateConfig& config);

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_WORK_GATE_H_
