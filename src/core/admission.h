// What AdmissionCore takes and hands out, as values: a request to enqueue, the decision on an
// admission (and what it passed over), a live job's view, the jobs it lets go of without a
// completion (expired, lost with their worker), an aging step and a sweep's counts. Internal to
// fairgate: the runtime and the simulator read them; core/admission_core.h has the operations.
#ifndef FAIRGATE_CORE_ADMISSION_H_
#define FAIRGATE_CORE_ADMISSION_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/job_table.h"

namespace fairgate::core {

// Whether a request may share the job of its (type, id) when the type coalesces
// (JobTypeConfig::coalesce); ignored for other types.
enum class Join : std::uint8_t {
  kNever,    // a job of its own, which no later request joins (Acquire)
  kPending,  // joins the pending joinable job of its id, if any (Submit)
  // Joins the joinable job of its id admitted last if it still runs, else the pending one
  // (RunSync).
  kPendingOrRunning,
};

struct EnqueueRequest {
  std::string_view type;
  std::string_view id;   // the resource the job works on; not empty
  std::string_view key;  // the fairness key; "" is a key like any other
  // Charge this instead of the learned estimate (finite, >= 0). The estimate still learns from
  // the job's completion.
  std::optional<double> cost;
  Join join = Join::kNever;
  // Refused (ResourceExhausted, fairgate::RetryAfter) rather than queued when a rate limit the
  // job is under has no token at `now` (JobOptions::refuse_without_token; the type's
  // JobTypeConfig::refuse_without_token does the same).
  bool refuse_without_token = false;
};

enum class EstimateSource { kExplicit, kLearned, kDefault };

// What a decision passed over to reach the job it admitted (see fairgate/evidence.h).
struct DecisionSkips {
  int global_cap = 0;  // types whose slots the global cap had no room for (multi-slot types)
  int tier_cap = 0;
  int type_cap = 0;
  int key_limit = 0;
  int conflict = 0;
  int worker = 0;      // types none of whose workers had room (with workers declared)
  int rate_limit = 0;  // types with pending jobs whose rate limit had no token
};

// An aging step, as the promotion log records it. The string views stay valid while the job
// lives.
struct Promotion {
  JobTicket ticket;
  std::string_view type, id, key;
  int from_priority = 0, to_priority = 0;
  double at = 0, arrival = 0;
};

// What NextAdmission decided. The string views stay valid until the job completes.
struct Admission {
  JobTicket ticket;
  std::string_view type;
  std::string_view id;
  std::string_view key;
  double charge = 0;   // the job's cost; the key's accumulated cost grows by charge / weight
  double weight = 1;   // the key's weight when it was charged
  double arrival = 0;  // when the job was enqueued
  int priority = 0;    // its type's tier
  int effective_priority = 0;  // the tier it was admitted from (higher if it aged)
  // Why it came first, for metrics and the evidence sink:
  std::uint32_t type_index = 0;   // registration order
  double accumulated_before = 0;  // the key's accumulated cost at the decision
  double sjf = 0;
  std::uint64_t seq = 0;
  bool reserved = false;            // its key was below min_running
  bool waited_on_conflict = false;  // it was set aside for a full resource at least once
  EstimateSource estimate_source = EstimateSource::kDefault;
  DecisionSkips skipped;
  // With workers declared: the worker it runs on (valid until the job completes or the worker is
  // removed), and whether it went there because its type starved and reserved that worker
  // (RuleOptions::sole_worker_reserve_after). Empty without workers.
  std::string_view worker;
  bool worker_reserved = false;
  // It ran over its tier's cap on a slot no admissible job wanted (RuleOptions::lending).
  bool borrowed = false;
};

// A live job as the core knows it, for the runtime's metrics and events. The string views stay
// valid while the job lives.
struct JobView {
  std::string_view type, id, key;
  std::uint32_t type_index = 0;
  int priority = 0;            // its type's tier
  int effective_priority = 0;  // the tier it orders in (pending) or was admitted from (running)
  double arrival = 0;
  bool running = false;
  double charge = 0;             // running: what it was charged (before the key's weight)
  std::string_view worker = {};  // running on a declared worker: its name
};

// A job the core has let go of without a completion, as it hands it over: it owns its names,
// the job itself is gone.
struct EndedJob {
  JobTicket ticket;  // names nothing any more; its slot says which job it was
  std::string type, id, key;
  std::uint32_t type_index = 0;
  int priority = 0;            // its type's tier
  int effective_priority = 0;  // the tier it was ordered in, or admitted from (higher if it aged)
  double arrival = 0;

 protected:
  // What both views share, valid while this job is neither moved nor destroyed.
  JobView BaseView() const;
};

// A job that left the queue because it was still pending at its type's max_queue_wait, as
// TakeExpired hands it over.
struct ExpiredJob : EndedJob {
  double expired_at = 0;  // arrival + max_queue_wait: when its limit was reached
  // Set when the job did not reach a queue-wait limit but was refused for want of a token: it
  // asked not to wait for one (refuse_without_token), came while a leased bucket it is under
  // (AdmissionCore::LeaseTokens, LeaseKeyTokens) awaited a lease, and the lease brought none;
  // the token is due then, and `token_of` names the bucket as a refusal at arrival would.
  std::optional<double> token_due;
  std::string token_of;
  // Not OK when it was refused by its type's shedding (JobTypeConfig::shedding: its queue stood
  // and it was the heaviest of its type's pending jobs): the refusal its callers get (WasShed).
  Status shed;
  // The job as a JobView (pending), valid while this ExpiredJob is neither moved nor destroyed.
  JobView View() const { return BaseView(); }
};

// A running job that ended with its worker (RemoveWorker).
struct LostJob : EndedJob {
  std::string worker;
  double charge = 0;  // what it was charged; its key keeps it
  // The job as a JobView (running), valid while this LostJob is neither moved nor destroyed.
  JobView View() const;
};

struct SweepResult {
  std::size_t keys_evicted = 0;
  std::size_t groups_evicted = 0;
  std::size_t estimates_evicted = 0;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_ADMISSION_H_
