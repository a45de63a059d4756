#include "fairgate/options.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace fairgate {

SchedulerOptions SchedulerOptions::Seed() {
  SchedulerOptions options;
  options.rule.reconcile = false;
  options.rule.idle_catch_up = false;
  return options;
}

SchedulerOptions SchedulerOptions::Default() { return SchedulerOptions{}; }

namespace {

bool PositiveFinite(Seconds s) { return std::isfinite(s.count()) && s.count() > 0; }

}  // namespace

Status ValidateOptions(const SchedulerOptions& options) {
  if (options.rule.max_concurrency < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule.max_concurrency must be >= 1, got ", options.rule.max_concurrency));
  }
  // Written so that NaN fails too.
  if (!(options.rule.alpha > 0 && options.rule.alpha <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule.alpha must be in (0, 1], got ", options.rule.alpha));
  }
  if (!PositiveFinite(options.rule.key_ttl)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rule.key_ttl must be finite and > 0 seconds, got ", options.rule.key_ttl.count()));
  }
  if (!PositiveFinite(options.rule.estimate_ttl)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule.estimate_ttl must be finite and > 0 seconds, got ",
                     options.rule.estimate_ttl.count()));
  }
  if (options.rule.sweep_batch < 1)
    return absl::InvalidArgumentError("rule.sweep_batch must be >= 1");
  if (options.rule.max_pending_total < 1) {
    return absl::InvalidArgumentError("rule.max_pending_total must be >= 1");
  }
  if (options.rule.max_pending_per_key < 1) {
    return absl::InvalidArgumentError("rule.max_pending_per_key must be >= 1");
  }
  if (options.runtime.worker_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("runtime.worker_threads must be >= 0, got ", options.runtime.worker_threads));
  }
  if (options.runtime.fiber_stack_bytes < 16 * 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "runtime.fiber_stack_bytes must be >= 16384, got ", options.runtime.fiber_stack_bytes));
  }
  if (!std::isfinite(options.rule.shortest_first_aging) || options.rule.shortest_first_aging < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule.shortest_first_aging must be finite and >= 0, got ",
                     options.rule.shortest_first_aging));
  }
  if (!(options.rule.sole_worker_reserve_after.count() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule.sole_worker_reserve_after must be > 0 seconds (infinity: never), got ",
                     options.rule.sole_worker_reserve_after.count()));
  }
  if (options.rule.adaptive_capacity) {
    if (Status s =
            ValidateAdaptiveCapacity(*options.rule.adaptive_capacity, options.rule.max_concurrency);
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("rule.", s.message()));
    }
  }
  if (options.rule.aging) {
    const AgingConfig& a = *options.rule.aging;
    if (!(std::isfinite(a.grace.count()) && a.grace.count() >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rule.aging.grace must be finite and >= 0 seconds, got ", a.grace.count()));
    }
    if (!PositiveFinite(a.interval)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rule.aging.interval must be finite and > 0 seconds, got ", a.interval.count()));
    }
    if (a.ceiling < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("rule.aging.ceiling must be a priority >= 1, got ", a.ceiling));
    }
  }
  if (Status s = ValidateKeyLimits(options.rule.default_key_limits); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("rule.default_key_limits: ", s.message()));
  }
  if (options.runtime.observer_queue_limit < 1) {
    return absl::InvalidArgumentError("runtime.observer_queue_limit must be >= 1");
  }
  for (const auto& observer : options.runtime.observers) {
    if (!observer) return absl::InvalidArgumentError("runtime.observers: an observer is null");
  }
  if (!PositiveFinite(options.runtime.sweep_interval)) {
    return absl::InvalidArgumentError(
        absl::StrCat("runtime.sweep_interval must be finite and > 0 seconds, got ",
                     options.runtime.sweep_interval.count()));
  }
  if (!PositiveFinite(options.persistence.state_flush_interval)) {
    return absl::InvalidArgumentError(
        absl::StrCat("persistence.state_flush_interval must be finite and > 0 seconds, got ",
                     options.persistence.state_flush_interval.count()));
  }
  if (!PositiveFinite(options.fleet.lease_ttl)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fleet.lease_ttl must be finite and > 0 seconds, got ", options.fleet.lease_ttl.count()));
  }
  if (!PositiveFinite(options.fleet.claim_interval)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet.claim_interval must be finite and > 0 seconds, got ",
                     options.fleet.claim_interval.count()));
  }
  if (options.fleet.max_claimed < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet.max_claimed must be >= 0, got ", options.fleet.max_claimed));
  }
  if (!options.fleet.conflict_groups.empty() &&
      (!options.persistence.store || !options.persistence.store->AsShared())) {
    return absl::InvalidArgumentError(
        "fleet.conflict_groups needs a shared store (persistence.store: the PostgreSQL store)");
  }
  if (!options.fleet.type_caps.empty() &&
      (!options.persistence.store || !options.persistence.store->AsShared())) {
    return absl::InvalidArgumentError(
        "fleet.type_caps needs a shared store (persistence.store: the PostgreSQL store)");
  }
  for (const auto& [type, cap] : options.fleet.type_caps) {
    if (cap < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("fleet.type_caps of '", type, "' must be >= 1, got ", cap));
    }
  }
  for (const std::string& group : options.fleet.conflict_groups) {
    if (group.empty()) return absl::InvalidArgumentError("a fleet.conflict_groups entry is empty");
  }
  return absl::OkStatus();
}

}  // namespace fairgate

namespace fairgate {

Status ValidateKeyLimits(const KeyLimits& limits) {
  if (limits.max_running < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_running must be >= 1, got ", limits.max_running));
  }
  if (limits.min_running < 0 || limits.min_running > limits.max_running) {
    return absl::InvalidArgumentError(absl::StrCat("min_running must be in [0, max_running ",
                                                   limits.max_running, "], got ",
                                                   limits.min_running));
  }
  return absl::OkStatus();
}

Status ValidateKeyWeight(double weight) {
  if (!(std::isfinite(weight) && weight > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key weight must be finite and > 0, got ", weight));
  }
  return absl::OkStatus();
}

}  // namespace fairgate
