#include "fairgate/options.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace fairgate {

SchedulerOptions SchedulerOptions::Seed() {
  SchedulerOptions options;
  options.reconcile = false;
  options.idle_catch_up = false;
  return options;
}

SchedulerOptions SchedulerOptions::Default() { return SchedulerOptions{}; }

namespace {

bool PositiveFinite(Seconds s) { return std::isfinite(s.count()) && s.count() > 0; }

}  // namespace

Status ValidateOptions(const SchedulerOptions& options) {
  if (options.max_concurrency < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_concurrency must be >= 1, got ", options.max_concurrency));
  }
  // Written so that NaN fails too.
  if (!(options.alpha > 0 && options.alpha <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("alpha must be in (0, 1], got ", options.alpha));
  }
  if (!PositiveFinite(options.key_ttl)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key_ttl must be finite and > 0 seconds, got ", options.key_ttl.count()));
  }
  if (!PositiveFinite(options.estimate_ttl)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "estimate_ttl must be finite and > 0 seconds, got ", options.estimate_ttl.count()));
  }
  if (options.sweep_batch < 1) return absl::InvalidArgumentError("sweep_batch must be >= 1");
  if (options.max_pending_total < 1) {
    return absl::InvalidArgumentError("max_pending_total must be >= 1");
  }
  if (options.max_pending_per_key < 1) {
    return absl::InvalidArgumentError("max_pending_per_key must be >= 1");
  }
  if (options.worker_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_threads must be >= 0, got ", options.worker_threads));
  }
  if (options.fiber_stack_bytes < 16 * 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("fiber_stack_bytes must be >= 16384, got ", options.fiber_stack_bytes));
  }
  if (!std::isfinite(options.shortest_first_aging) || options.shortest_first_aging < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shortest_first_aging must be finite and >= 0, got ", options.shortest_first_aging));
  }
  if (options.adaptive_capacity) {
    if (Status s = ValidateAdaptiveCapacity(*options.adaptive_capacity, options.max_concurrency);
        !s.ok()) {
      return s;
    }
  }
  if (options.aging) {
    const AgingConfig& a = *options.aging;
    if (!(std::isfinite(a.grace.count()) && a.grace.count() >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("aging.grace must be finite and >= 0 seconds, got ", a.grace.count()));
    }
    if (!PositiveFinite(a.interval)) {
      return absl::InvalidArgumentError(
          absl::StrCat("aging.interval must be finite and > 0 seconds, got ", a.interval.count()));
    }
    if (a.ceiling < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("aging.ceiling must be a priority >= 1, got ", a.ceiling));
    }
  }
  if (Status s = ValidateKeyLimits(options.default_key_limits); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("default_key_limits: ", s.message()));
  }
  if (options.observer_queue_limit < 1) {
    return absl::InvalidArgumentError("observer_queue_limit must be >= 1");
  }
  for (const auto& observer : options.observers) {
    if (!observer) return absl::InvalidArgumentError("observers: an observer is null");
  }
  if (!PositiveFinite(options.sweep_interval)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sweep_interval must be finite and > 0 seconds, got ", options.sweep_interval.count()));
  }
  if (!PositiveFinite(options.state_flush_interval)) {
    return absl::InvalidArgumentError(
        absl::StrCat("state_flush_interval must be finite and > 0 seconds, got ",
                     options.state_flush_interval.count()));
  }
  if (!PositiveFinite(options.lease_ttl)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease_ttl must be finite and > 0 seconds, got ", options.lease_ttl.count()));
  }
  if (!PositiveFinite(options.claim_interval)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "claim_interval must be finite and > 0 seconds, got ", options.claim_interval.count()));
  }
  if (options.max_claimed < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_claimed must be >= 0, got ", options.max_claimed));
  }
  if (!options.fleet_conflict_groups.empty() && (!options.store || !options.store->AsShared())) {
    return absl::InvalidArgumentError(
        "fleet_conflict_groups needs a shared store (SchedulerOptions::store: the PostgreSQL "
        "store)");
  }
  if (!options.fleet_type_caps.empty() && (!options.store || !options.store->AsShared())) {
    return absl::InvalidArgumentError(
        "fleet_type_caps needs a shared store (SchedulerOptions::store: the PostgreSQL store)");
  }
  for (const auto& [type, cap] : options.fleet_type_caps) {
    if (cap < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("fleet_type_caps of '", type, "' must be >= 1, got ", cap));
    }
  }
  for (const std::string& group : options.fleet_conflict_groups) {
    if (group.empty()) return absl::InvalidArgumentError("a fleet_conflict_groups entry is empty");
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
