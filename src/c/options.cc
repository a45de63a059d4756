// fairgate/c.h's options: the versioned structs of a scheduler and of a type, filled with their
// defaults and read into SchedulerOptions and JobTypeConfig, with the callbacks they carry.
#include "fairgate/options.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "c/c_support.h"
#include "fairgate/adaptive_capacity.h"
#include "fairgate/evidence.h"
#include "fairgate/job_type.h"
#include "fairgate/latency_capacity.h"
#include "fairgate/observer.h"

using fairgate::Status;
using fairgate::c_api::CodeOf;
using fairgate::c_api::EnumValue;
using fairgate::c_api::Given;
using fairgate::c_api::GroupLimitsOf;
using fairgate::c_api::Guarded;
using fairgate::c_api::InitVersion;
using fairgate::c_api::KeyLimitsOf;
using fairgate::c_api::MessageOf;
using fairgate::c_api::StatusOf;
using fairgate::c_api::Strings;

namespace {

// An option of -1 (the preset's), 0 or 1 (c.h: reconcile, lending) into *out; -1 leaves it.
Status PresetOr(int value, const char* what, bool* out) {
  if (value == -1) return absl::OkStatus();
  if (value != 0 && value != 1) {
    return absl::InvalidArgumentError(std::string("options.") + what +
                                      " must be -1 (the preset's), 0 or 1, got " +
                                      std::to_string(value));
  }
  *out = value == 1;
  return absl::OkStatus();
}

// A reading from C (fairgate_reading_fn) as the C++ one; none for NULL.
std::function<fairgate::StatusOr<double>()> ReadingOf(fairgate_reading_fn read, void* user) {
  if (read == nullptr) return {};
  return [read, user]() -> fairgate::StatusOr<double> {
    double value = 0;
    const fairgate_code code = read(user, &value);
    if (code != FAIRGATE_OK) return StatusOf(code, "the reading function gave no reading");
    return value;
  };
}

static_assert(static_cast<int>(fairgate::JobEvent::Kind::kAdmit) == FAIRGATE_EVENT_ADMIT &&
              static_cast<int>(fairgate::JobEvent::Kind::kComplete) == FAIRGATE_EVENT_COMPLETE &&
              static_cast<int>(fairgate::JobEvent::Kind::kCancel) == FAIRGATE_EVENT_CANCEL &&
              static_cast<int>(fairgate::JobEvent::Kind::kReject) == FAIRGATE_EVENT_REJECT &&
              static_cast<int>(fairgate::JobEvent::Kind::kPromote) == FAIRGATE_EVENT_PROMOTE &&
              static_cast<int>(fairgate::JobEvent::Kind::kEvict) == FAIRGATE_EVENT_EVICT &&
              static_cast<int>(fairgate::JobEvent::Kind::kExpire) == FAIRGATE_EVENT_EXPIRE &&
              static_cast<int>(fairgate::JobEvent::Kind::kShed) == FAIRGATE_EVENT_SHED);

// options.on_event as an Observer.
class EventCallback final : public fairgate::Observer {
 public:
  EventCallback(fairgate_event_fn on_event, void* user) : on_event_(on_event), user_(user) {}

  void OnEvent(const fairgate::JobEvent& from) override {
    const std::string message = MessageOf(from.status);
    fairgate_event event{};
    event.kind = static_cast<fairgate_event_kind>(from.kind);
    event.time = from.time;
    event.type = from.type.c_str();
    event.id = from.id.c_str();
    event.fairness_key = from.key.c_str();
    event.tier = from.tier;
    event.effective_tier = from.effective_tier;
    event.charge = from.charge;
    event.accumulated_cost = from.accumulated_cost;
    event.wait = from.wait;
    event.run_time = from.run_time;
    event.code = CodeOf(from.status);
    event.message = message.c_str();
    event.worker = from.worker.c_str();
    on_event_(user_, &event);
  }

 private:
  fairgate_event_fn on_event_;
  void* user_;
};

// The fields version 3 of fairgate_options added, into `options`.
Status RestOf(const fairgate_options& c, fairgate::SchedulerOptions* options) {
  fairgate::RuleOptions& rule = options->rule;
  bool lending = rule.lending.has_value();
  if (Status s = PresetOr(c.lending, "lending", &lending); !s.ok()) return s;
  if (lending) {
    rule.lending = fairgate::TierLending{.kept_back = c.lending_kept_back};
  } else {
    rule.lending.reset();
  }
  if (c.aging != 0) {
    rule.aging = fairgate::AgingConfig{.grace = fairgate::Seconds(c.aging_grace_seconds),
                                       .interval = fairgate::Seconds(c.aging_interval_seconds),
                                       .ceiling = c.aging_ceiling};
  }
  rule.shortest_first = c.shortest_first != 0;
  rule.shortest_first_aging = c.shortest_first_aging;
  rule.default_key_limits = KeyLimitsOf(c.default_key_limits);
  rule.default_group_limits =
      GroupLimitsOf(c.default_group_max_running, c.default_group_min_running);
  if (rule.latency_capacity) {
    rule.latency_capacity->interval = fairgate::Seconds(c.latency_capacity_interval_seconds);
    rule.latency_capacity->remeasure_every = c.latency_capacity_remeasure_every;
  }
  if (c.adaptive_capacity_min > 0) {
    fairgate::AdaptiveCapacity adaptive;
    adaptive.min = c.adaptive_capacity_min;
    adaptive.interval = fairgate::Seconds(c.adaptive_capacity_interval_seconds);
    adaptive.high = c.adaptive_capacity_high;
    adaptive.low = c.adaptive_capacity_low;
    adaptive.decrease = c.adaptive_capacity_decrease;
    adaptive.stalled_seconds =
        ReadingOf(c.adaptive_stalled_seconds, c.adaptive_stalled_seconds_user);
    if (c.adaptive_signal_count > 0 && c.adaptive_signals == nullptr) {
      return absl::InvalidArgumentError("options.adaptive_signals is NULL, with a count of " +
                                        std::to_string(c.adaptive_signal_count));
    }
    for (size_t i = 0; i < c.adaptive_signal_count; ++i) {
      const fairgate_pressure_signal& from = c.adaptive_signals[i];
      const int source = EnumValue(from.source);
      if (source < FAIRGATE_PRESSURE_MEMORY_SOME || source > FAIRGATE_PRESSURE_MEMORY_USE) {
        return absl::InvalidArgumentError("options.adaptive_signals[" + std::to_string(i) +
                                          "].source must be a fairgate_pressure_source");
      }
      adaptive.signals.push_back({static_cast<fairgate::PressureSource>(source), from.high,
                                  from.low, ReadingOf(from.read, from.read_user)});
    }
    rule.adaptive_capacity = std::move(adaptive);
  } else if (c.adaptive_signal_count > 0) {
    return absl::InvalidArgumentError(
        "options.adaptive_signals are given without adaptive capacity (adaptive_capacity_min 0)");
  }
  rule.sole_worker_reserve_after = fairgate::Seconds(c.sole_worker_reserve_after_seconds);
  rule.sweep_batch = c.sweep_batch;
  fairgate::RuntimeOptions& runtime = options->runtime;
  runtime.fiber_stack_bytes = c.fiber_stack_bytes;
  runtime.sweep_interval = fairgate::Seconds(c.sweep_interval_seconds);
  runtime.observer_queue_limit = c.observer_queue_limit;
  if (c.on_event != nullptr) {
    runtime.observers.push_back(std::make_shared<EventCallback>(c.on_event, c.on_event_user));
  }
  if (c.warn != nullptr) {
    runtime.warn = [warn = c.warn, user = c.warn_user](std::string_view warning) {
      const std::string text(warning);
      warn(user, text.c_str());
    };
  }
  if (c.key_group != nullptr) {
    runtime.key_group = [key_group = c.key_group,
                         user = c.key_group_user](std::string_view key) -> std::string {
      const std::string name(key);
      char* group = key_group(user, name.c_str());
      if (group == nullptr) return {};
      std::string out(group);
      std::free(group);
      return out;
    };
  }
  options->fleet.token_lease = fairgate::Seconds(c.token_lease_seconds);
  if (c.on_evidence != nullptr && c.evidence_path != nullptr) {
    return absl::InvalidArgumentError("options.on_evidence and options.evidence_path are both set");
  }
  if (c.on_evidence != nullptr) {
    runtime.evidence = [on_evidence = c.on_evidence,
                        user = c.on_evidence_user](const fairgate::AdmissionEvidence& evidence) {
      const std::string line = fairgate::ToJsonLine(evidence);
      on_evidence(user, line.c_str());
    };
  }
  if (c.evidence_path != nullptr) {
    fairgate::StatusOr<fairgate::EvidenceSink> sink = fairgate::OpenEvidenceFile(c.evidence_path);
    if (!sink.ok()) return sink.status();
    runtime.evidence = *std::move(sink);
  }
  return absl::OkStatus();
}

// The fields version 2 of fairgate_options added, into `options`.
Status PersistenceAndFleetOf(const fairgate_options& c, fairgate::SchedulerOptions* options) {
  if (c.store != nullptr) options->persistence.store = c.store->impl;
  options->persistence.state_flush_interval = fairgate::Seconds(c.state_flush_seconds);
  fairgate::FleetOptions& fleet = options->fleet;
  fleet.lease_ttl = fairgate::Seconds(c.lease_ttl_seconds);
  fleet.claim_interval = fairgate::Seconds(c.claim_interval_seconds);
  fleet.max_claimed = c.max_claimed;
  if (Status s = Strings(c.fleet_conflict_groups, c.fleet_conflict_group_count,
                         "options.fleet_conflict_groups", &fleet.conflict_groups);
      !s.ok()) {
    return s;
  }
  std::vector<std::string> capped;
  if (Status s = Strings(c.fleet_capped_types, c.fleet_type_cap_count, "options.fleet_capped_types",
                         &capped);
      !s.ok()) {
    return s;
  }
  if (!capped.empty() && c.fleet_type_caps == nullptr) {
    return absl::InvalidArgumentError("options.fleet_type_caps is NULL, with a count of " +
                                      std::to_string(capped.size()));
  }
  for (std::size_t i = 0; i < capped.size(); ++i) {
    if (!fleet.type_caps.emplace(capped[i], c.fleet_type_caps[i]).second) {
      return absl::InvalidArgumentError("options.fleet_capped_types names \"" + capped[i] +
                                        "\" twice");
    }
  }
  return absl::OkStatus();
}

}  // namespace

extern "C" {

fairgate_code fairgate_options_init_version(fairgate_options* out, uint32_t version) {
  const fairgate::SchedulerOptions defaults = fairgate::SchedulerOptions::Default();
  const fairgate::RuleOptions& rule = defaults.rule;
  fairgate_options o{};
  fairgate_options* options = &o;
  options->seed_mode = 0;
  options->max_concurrency = rule.max_concurrency;
  options->alpha = rule.alpha;
  options->reconcile = -1;
  options->idle_catch_up = rule.idle_catch_up ? 1 : 0;
  options->key_ttl_seconds = rule.key_ttl.count();
  options->estimate_ttl_seconds = rule.estimate_ttl.count();
  options->max_pending_total = 0;
  options->max_pending_per_key = 0;
  options->latency_capacity_min = 0;
  options->rate_per_second = 0;
  options->rate_burst = 1;
  options->worker_threads = defaults.runtime.worker_threads;
  options->store = nullptr;
  options->state_flush_seconds = defaults.persistence.state_flush_interval.count();
  options->lease_ttl_seconds = defaults.fleet.lease_ttl.count();
  options->claim_interval_seconds = defaults.fleet.claim_interval.count();
  options->max_claimed = defaults.fleet.max_claimed;
  options->fleet_conflict_groups = nullptr;
  options->fleet_conflict_group_count = 0;
  options->fleet_capped_types = nullptr;
  options->fleet_type_caps = nullptr;
  options->fleet_type_cap_count = 0;
  options->lending = -1;
  options->lending_kept_back = fairgate::TierLending{}.kept_back;
  const fairgate::AgingConfig aging;
  options->aging = 0;
  options->aging_grace_seconds = aging.grace.count();
  options->aging_interval_seconds = aging.interval.count();
  options->aging_ceiling = aging.ceiling;
  options->shortest_first = rule.shortest_first ? 1 : 0;
  options->shortest_first_aging = rule.shortest_first_aging;
  options->default_key_limits = {0, 0, 0, 1, 0};
  options->default_group_max_running = 0;
  options->default_group_min_running = rule.default_group_limits.min_running;
  const fairgate::LatencyCapacity latency;
  options->latency_capacity_interval_seconds = latency.interval.count();
  options->latency_capacity_remeasure_every = latency.remeasure_every;
  const fairgate::AdaptiveCapacity adaptive;
  options->adaptive_capacity_min = 0;
  options->adaptive_capacity_interval_seconds = adaptive.interval.count();
  options->adaptive_capacity_high = adaptive.high;
  options->adaptive_capacity_low = adaptive.low;
  options->adaptive_capacity_decrease = adaptive.decrease;
  options->sole_worker_reserve_after_seconds = rule.sole_worker_reserve_after.count();
  options->sweep_batch = rule.sweep_batch;
  options->fiber_stack_bytes = defaults.runtime.fiber_stack_bytes;
  options->sweep_interval_seconds = defaults.runtime.sweep_interval.count();
  options->observer_queue_limit = defaults.runtime.observer_queue_limit;
  options->token_lease_seconds = defaults.fleet.token_lease.count();
  return InitVersion(out, o, version,
                     {offsetof(fairgate_options, store), offsetof(fairgate_options, lending),
                      sizeof(fairgate_options)});
}

fairgate_scheduler* fairgate_scheduler_create(const fairgate_options* c, fairgate_code* code,
                                              char** error) {
  fairgate_scheduler* out = nullptr;
  const fairgate_code result = Guarded(error, [&]() -> Status {
    if (c == nullptr) return absl::InvalidArgumentError("the options are NULL");
    if (c->version < 1 || c->version > FAIRGATE_OPTIONS_VERSION) {
      return absl::InvalidArgumentError(
          "options.version must be 1 to FAIRGATE_OPTIONS_VERSION (3), got " +
          std::to_string(c->version) + ": fill the options with fairgate_options_init");
    }
    fairgate::SchedulerOptions options =
        c->seed_mode ? fairgate::SchedulerOptions::Seed() : fairgate::SchedulerOptions::Default();
    fairgate::RuleOptions& rule = options.rule;
    rule.max_concurrency = c->max_concurrency;
    rule.alpha = c->alpha;
    if (Status s = PresetOr(c->reconcile, "reconcile", &rule.reconcile); !s.ok()) return s;
    rule.idle_catch_up = c->idle_catch_up != 0;
    rule.key_ttl = fairgate::Seconds(c->key_ttl_seconds);
    rule.estimate_ttl = fairgate::Seconds(c->estimate_ttl_seconds);
    if (c->max_pending_total > 0) rule.max_pending_total = c->max_pending_total;
    if (c->max_pending_per_key > 0) rule.max_pending_per_key = c->max_pending_per_key;
    if (c->latency_capacity_min > 0) {
      rule.latency_capacity = fairgate::LatencyCapacity{.min = c->latency_capacity_min};
    }
    rule.rate_limit = {c->rate_per_second, c->rate_burst};
    options.runtime.worker_threads = c->worker_threads;
    if (c->version >= 2) {
      if (Status s = PersistenceAndFleetOf(*c, &options); !s.ok()) return s;
    }
    if (c->version >= 3) {
      if (Status s = RestOf(*c, &options); !s.ok()) return s;
    }
    auto created = fairgate::Scheduler::Create(options);
    if (!created.ok()) return created.status();
    out = new fairgate_scheduler{*std::move(created)};
    return absl::OkStatus();
  });
  if (code != nullptr) *code = result;
  return out;
}

fairgate_code fairgate_type_config_init_version(fairgate_type_config* out, uint32_t version) {
  const fairgate::JobTypeConfig defaults;
  fairgate_type_config c{};
  fairgate_type_config* config = &c;
  config->default_cost = defaults.default_cost;
  config->max_concurrency = 0;
  config->conflict_group = nullptr;
  config->conflict_limit = defaults.conflict_limit;
  config->priority = defaults.priority;
  config->slots = defaults.slots;
  config->shortest_first = 0;
  config->max_queue_wait_seconds = 0;
  config->coalesce = FAIRGATE_COALESCE_OFF;
  config->tags = nullptr;
  config->tag_count = 0;
  config->rate_per_second = 0;
  config->rate_burst = 1;
  config->refuse_without_token = 0;
  config->shed_target_seconds = 0;
  config->shed_interval_seconds = 1;
  return InitVersion(out, c, version, {sizeof(fairgate_type_config)});
}

fairgate_code fairgate_register_type(fairgate_scheduler* scheduler, const char* name,
                                     const fairgate_type_config* c, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(
            {{scheduler, "the scheduler"}, {name, "the type's name"}, {c, "the type config"}});
        !s.ok()) {
      return s;
    }
    if (c->version != FAIRGATE_TYPE_CONFIG_VERSION) {
      return absl::InvalidArgumentError(
          "config.version must be FAIRGATE_TYPE_CONFIG_VERSION (1): fill the config with "
          "fairgate_type_config_init");
    }
    const int coalesce = EnumValue(c->coalesce);
    if (coalesce < FAIRGATE_COALESCE_OFF || coalesce > FAIRGATE_COALESCE_SUPERSEDE) {
      return absl::InvalidArgumentError("config.coalesce must be a fairgate_coalesce");
    }
    fairgate::JobTypeConfig config;
    config.default_cost = c->default_cost;
    config.max_concurrency =
        c->max_concurrency == 0 ? fairgate::JobTypeConfig::kNoLimit : c->max_concurrency;
    if (c->conflict_group != nullptr) config.conflict_group = c->conflict_group;
    config.conflict_limit = c->conflict_limit;
    config.priority = c->priority;
    config.slots = c->slots;
    config.shortest_first = c->shortest_first != 0;
    config.max_queue_wait = fairgate::Seconds(c->max_queue_wait_seconds);
    config.coalesce = static_cast<fairgate::Coalesce>(coalesce);
    if (Status s = Strings(c->tags, c->tag_count, "config.tags", &config.tags); !s.ok()) return s;
    config.rate_limit = {c->rate_per_second, c->rate_burst};
    config.refuse_without_token = c->refuse_without_token != 0;
    config.shedding = {fairgate::Seconds(c->shed_target_seconds),
                       fairgate::Seconds(c->shed_interval_seconds)};
    return scheduler->impl->RegisterType(name, config);
  });
}

}  // extern "C"
