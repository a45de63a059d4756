#include "fairgate/options.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "fairgate/store.h"

namespace fairgate {

SchedulerOptions SchedulerOptions::Seed() {
  SchedulerOptions options;
  options.rule = RuleOptions::Seed();
  return options;
}

SchedulerOptions SchedulerOptions::Default() { return SchedulerOptions{}; }

namespace {

bool PositiveFinite(Seconds s) { return std::isfinite(s.count()) && s.count() > 0; }

}  // namespace

Status ValidateOptions(const SchedulerOptions& options) {
  if (Status s = ValidateRuleOptions(options.rule); !s.ok()) return s;
  if (options.runtime.worker_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("runtime.worker_threads must be >= 0, got ", options.runtime.worker_threads));
  }
  if (options.runtime.fiber_stack_bytes < 16 * 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "runtime.fiber_stack_bytes must be >= 16384, got ", options.runtime.fiber_stack_bytes));
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
  SharedStore* const shared =
      options.persistence.store ? options.persistence.store->AsShared() : nullptr;
  if (!options.fleet.conflict_groups.empty() && shared == nullptr) {
    return absl::InvalidArgumentError(
        "fleet.conflict_groups needs a shared store (persistence.store: the PostgreSQL store)");
  }
  if (!options.fleet.type_caps.empty() && shared == nullptr) {
    return absl::InvalidArgumentError(
        "fleet.type_caps needs a shared store (persistence.store: the PostgreSQL store)");
  }
  if (!PositiveFinite(options.fleet.token_lease)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet.token_lease must be finite and > 0 seconds, got ",
                     options.fleet.token_lease.count()));
  }
  // Below, `shared` is there (checked above). A name it cannot hold would fail every job that
  // takes its lease.
  auto storable = [&](const std::string& name, const char* what) {
    return shared->CheckName(name, absl::StrCat(what, " \"", absl::CHexEscape(name), "\""));
  };
  for (const auto& [type, cap] : options.fleet.type_caps) {
    if (cap < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("fleet.type_caps of '", type, "' must be >= 1, got ", cap));
    }
    if (Status s = storable(type, "fleet.type_caps' type"); !s.ok()) return s;
  }
  for (const std::string& group : options.fleet.conflict_groups) {
    if (group.empty()) return absl::InvalidArgumentError("a fleet.conflict_groups entry is empty");
    if (Status s = storable(group, "the fleet.conflict_groups entry"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace fairgate
