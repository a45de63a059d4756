// The fairgate policy: one Scheduler, five job types.
#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client_group.h"
#include "fairgate/postgres_store.h"
#include "fairgate/rate_limit.h"
#include "fairgate/shedding.h"
#include "fairgate/sqlite_store.h"
#include "work_gate.h"

namespace git_mirror {
namespace {

class FairgateGate : public WorkGate {
 public:
  explicit FairgateGate(std::unique_ptr<fairgate::Scheduler> scheduler)
      : scheduler_(std::move(scheduler)) {}
  ~FairgateGate() override { Shutdown(); }

  fairgate::StatusOr<CancelFn> Acquire(std::string_view type, std::string_view repository,
                                       std::string_view client, SlotCallback on_admitted) override {
    auto [ctx, cancel] = fairgate::WithCancel(fairgate::Context::Background());
    // Over a rate limit, refused at once (429, Retry-After when the token is due) rather than
    // held in the queue.
    fairgate::Status status = scheduler_->Acquire(
        ctx, {fairgate::TypeName(type), fairgate::JobId(repository), fairgate::FairnessKey(client)},
        [on_admitted = std::move(on_admitted)](fairgate::StatusOr<fairgate::Permit> permit) {
          if (!permit.ok()) return on_admitted(permit.status());
          auto held = std::make_shared<fairgate::Permit>(*std::move(permit));
          on_admitted(Slot([held](const fairgate::Status& s, bool used) {
            if (used) {
              held->Release(s);
            } else {
              held->ReleaseUnused(s);
            }
          }));
        },
        {.cost = std::nullopt, .refuse_without_token = true});
    if (!status.ok()) {
      cancel();
      return status;
    }
    return CancelFn(std::move(cancel));
  }

  fairgate::Status Submit(std::string_view type, std::string_view repository,
                          std::string_view client, JobFn fn, DoneCallback done) override {
    // A first mirror already being made is what every later request for it waits for: join it.
    return scheduler_->Submit(
        {fairgate::TypeName(type), fairgate::JobId(repository), fairgate::FairnessKey(client)},
        std::move(fn), std::move(done), {.cost = std::nullopt, .join_running = type == kSyncClone});
  }

  fairgate::StatusOr<CancelFn> SubmitEvery(std::string_view type, std::string_view repository,
                                           std::string_view client,
                                           std::chrono::milliseconds interval, JobFn fn,
                                           DoneCallback on_run) override {
    fairgate::PeriodicOptions options;
    options.on_run = std::move(on_run);
    fairgate::StatusOr<fairgate::PeriodicJob> job = scheduler_->SubmitEvery(
        {fairgate::TypeName(type), fairgate::JobId(repository), fairgate::FairnessKey(client)},
        fairgate::Seconds(interval), std::move(fn), options);
    if (!job.ok()) return job.status();
    return CancelFn([job = *std::move(job)]() mutable { job.Stop(); });
  }

  nlohmann::json DebugState() const override {
    // The scheduler's own JSON (fairgate/snapshot.h), with the ten heaviest clients.
    nlohmann::json state = nlohmann::json::parse(fairgate::ToJson(scheduler_->Snapshot(10)));
    state["policy"] = "fairgate";
    return state;
  }

  std::optional<double> Estimate(std::string_view type,
                                 std::string_view repository) const override {
    return scheduler_->Estimate(fairgate::TypeName(type), fairgate::JobId(repository));
  }

  fairgate::Status Charge(std::string_view client, double seconds) override {
    return scheduler_->Charge(client, seconds);
  }

  std::string Metrics() const override {
    std::string out;
    scheduler_->WriteMetrics(out);
    return out;
  }

  void Shutdown() override { (void)scheduler_->Shutdown(fairgate::Context::Background()); }

 private:
  std::unique_ptr<fairgate::Scheduler> scheduler_;
};

}  // namespace

fairgate::Status ValidateGateConfig(const GateConfig& c) {
  if (c.capacity < 1) return absl::InvalidArgumentError("capacity must be at least 1");
  if (c.sync_clone_slots < 1 || c.sync_clone_slots > c.capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("sync-clone slots must be in [1, capacity ", c.capacity, "]"));
  }
  if (c.background_slots < 1 || c.background_slots > c.capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("background slots must be in [1, capacity ", c.capacity, "]"));
  }
  if (c.repack_slots < 1 || c.repack_slots > c.background_slots) {
    return absl::InvalidArgumentError(
        absl::StrCat("repack slots must be in [1, background slots ", c.background_slots, "]"));
  }
  if (c.max_pending_per_client < 1) {
    return absl::InvalidArgumentError("max pending per client must be at least 1");
  }
  if (!(c.aging_grace_seconds >= 0) || !(c.aging_interval_seconds >= 0)) {
    return absl::InvalidArgumentError("aging grace and interval must be >= 0 seconds");
  }
  if (c.client_max_running < 0 || c.client_min_running < 0) {
    return absl::InvalidArgumentError("client limits must be >= 0");
  }
  for (const auto& [limit, name] :
       {std::pair{fairgate::RateLimit{c.client_rate, c.client_burst}, "client rate"},
        std::pair{fairgate::RateLimit{c.rate, c.burst}, "rate"}}) {
    if (auto s = fairgate::ValidateRateLimit(limit, name); !s.ok()) return s;
  }
  if (c.adaptive_min < 0 || c.adaptive_min > c.capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("the adaptive capacity's minimum must be in [0, capacity ", c.capacity, "]"));
  }
  if (c.latency_min < 0 || c.latency_min > c.capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("the latency rule's minimum must be in [0, capacity ", c.capacity, "]"));
  }
  if (!(c.memory_high >= 0 && c.memory_high <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the memory threshold must be in (0, 1], or 0 for none; got ", c.memory_high));
  }
  if (c.memory_high > 0 && c.adaptive_min == 0) {
    return absl::InvalidArgumentError(
        "a memory threshold moves the adaptive capacity: it needs --adaptive-capacity-min");
  }
  if (c.latency_min > 0 && c.adaptive_min > 0) {
    return absl::InvalidArgumentError(
        "adaptive capacity and the latency rule are exclusive: one rule moves the cap");
  }
  if (!c.database.empty() && !c.state_file.empty()) {
    return absl::InvalidArgumentError(
        "a state file and a database are exclusive: the database keeps the state");
  }
  if (c.database.empty() && !c.replica.empty()) {
    return absl::InvalidArgumentError("a replica name needs a database");
  }
  return ClientGroups::Parse(c.client_group).status();
}

fairgate::StatusOr<std::unique_ptr<WorkGate>> MakeFairgateGate(const GateConfig& c) {
  if (auto s = ValidateGateConfig(c); !s.ok()) return s;
  fairgate::SchedulerOptions options;  // the default mode: reconcile, learned estimates
  options.rule.max_concurrency = c.capacity;
  options.rule.max_pending_per_key = c.max_pending_per_client;
  // First mirrors, fetches and repacks wait for git processes and hold their worker thread while
  // they do.
  options.runtime.worker_threads = c.background_slots + c.sync_clone_slots;
  // A tier's priority is also its cap: foreground may use every slot, background its own share.
  // The background's share is the worker threads its git processes hold, so its tier does not
  // borrow idle slots past it (RuleOptions::lending, on in the default rule).
  options.rule.lending.reset();
  const int foreground = std::max(c.capacity, c.background_slots + 1);
  const int background = c.background_slots;
  if (c.aging_interval_seconds > 0) {
    options.rule.aging =
        fairgate::AgingConfig{fairgate::Seconds(c.aging_grace_seconds),
                              fairgate::Seconds(c.aging_interval_seconds), foreground};
  }
  options.rule.default_key_limits.max_running =
      c.client_max_running > 0 ? c.client_max_running : std::max(1, c.capacity - 1);
  options.rule.default_key_limits.min_running = c.client_min_running;
  options.rule.default_key_limits.rate_limit = {c.client_rate, c.client_burst};
  if (auto s = fairgate::ValidateKeyLimits(options.rule.default_key_limits); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("client limits: ", s.message()));
  }
  if (const ClientGroups groups = *ClientGroups::Parse(c.client_group); groups.enabled()) {
    options.runtime.key_group = [groups](std::string_view client) {
      return groups.GroupOf(client);
    };
    // A network's clients together run no more than one client may: no party holds every slot
    // by spreading over addresses.
    options.rule.default_group_limits.max_running = options.rule.default_key_limits.max_running;
  }
  if (c.adaptive_min > 0) {
    fairgate::AdaptiveCapacity adaptive;  // the rule's defaults: every second, by CPU pressure
    adaptive.min = c.adaptive_min;
    // And by memory and io pressure: a clone's pack-objects can take gigabytes, and a repack
    // reads the whole repository.
    adaptive.signals = fairgate::DefaultPressureSignals();
    if (c.memory_high > 0) {
      // A level, read each second: pressure stalls come too late where there is no swap and
      // little cache (a repack in a cgroup at its limit is killed within a second or two).
      adaptive.signals.push_back({.source = fairgate::PressureSource::kMemoryUse,
                                  .high = c.memory_high,
                                  .low = std::max(0.0, c.memory_high - 0.1),
                                  .read = {}});  // empty: the kernel's reading
    }
    options.rule.adaptive_capacity = adaptive;
  }
  if (c.latency_min > 0) {
    // Every second: a clone of a small repository takes well under one.
    options.rule.latency_capacity = fairgate::LatencyCapacity{.min = c.latency_min};
  }
  if (!c.state_file.empty()) {
    auto store = fairgate::OpenSqliteStore(c.state_file);
    if (!store.ok()) return store.status();
    options.persistence.store = *std::move(store);
  }
  if (!c.database.empty()) {
    auto store = fairgate::OpenPostgresStore(c.database, {.replica = c.replica});
    if (!store.ok()) {
      return fairgate::Status(store.status().code(),
                              absl::StrCat("database: ", store.status().message()));
    }
    options.persistence.store = std::shared_ptr<fairgate::Store>(*std::move(store));
    // Mirrors are on storage the replicas share: a repository's writers exclude each other
    // across all of them.
    options.fleet.conflict_groups = {"git"};
  }
  auto scheduler = fairgate::Scheduler::Create(options);
  if (!scheduler.ok()) return scheduler.status();
  const fairgate::Shedding shedding{fairgate::Seconds(c.shed_target),
                                    fairgate::Seconds(c.shed_interval)};
  const struct {
    std::string_view name;
    fairgate::JobTypeConfig config;
  } types[] = {
      {kClone,
       {.default_cost = 1,
        .max_concurrency = c.capacity,
        .conflict_group = "",
        .priority = foreground,
        .rate_limit = {c.rate, c.burst},
        .shedding = shedding}},
      // A ref listing reads a few refs: cheap, but admitted and charged like any request, so
      // that a client looping on it is counted and ordered with everyone else.
      {kRefs,
       {.default_cost = 0.01,
        .max_concurrency = c.capacity,
        .conflict_group = "",
        .priority = foreground,
        .shedding = shedding}},
      // Coalesced: clients asking at once for a repository not mirrored yet share one clone.
      {kSyncClone,
       {.default_cost = 10,
        .max_concurrency = c.sync_clone_slots,
        .conflict_group = "git",
        .priority = foreground,
        .coalesce = fairgate::Coalesce::kJoin}},
      // Coalesced: notifications that come while a fetch waits (and its periodic run) share it.
      {kFetch,
       {.default_cost = 5,
        .max_concurrency = background,
        .conflict_group = "git",
        .priority = background,
        .coalesce = fairgate::Coalesce::kJoin}},
      {kRepack,
       {.default_cost = 20,
        .max_concurrency = c.repack_slots,
        .conflict_group = "git",
        .priority = background}},
  };
  for (const auto& t : types) {
    if (auto s = (*scheduler)->RegisterType(t.name, t.config); !s.ok()) return s;
  }
  // Maintenance runs under client "": the clients' rate limit is not its.
  fairgate::KeyLimits maintenance = options.rule.default_key_limits;
  maintenance.rate_limit = {};
  if (auto s = (*scheduler)->SetKeyLimits("", maintenance); !s.ok()) return s;
  // The learned costs came back with the types; the mirror stores no durable jobs, but Recover is
  // the defined point after which the state is in use.
  if (!c.state_file.empty() || !c.database.empty()) {
    if (auto recovered = (*scheduler)->Recover(); !recovered.ok()) return recovered.status();
  }
  return std::unique_ptr<WorkGate>(new FairgateGate(std::move(*scheduler)));
}

}  // namespace git_mirror
