#include "fairgate/rule_options.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace fairgate {
namespace {

bool PositiveFinite(Seconds s) { return std::isfinite(s.count()) && s.count() > 0; }

}  // namespace

Status ValidateRuleOptions(const RuleOptions& rule) {
  if (rule.max_concurrency < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule.max_concurrency must be >= 1, got ", rule.max_concurrency));
  }
  // Written so that NaN fails too.
  if (!(rule.alpha > 0 && rule.alpha <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule.alpha must be in (0, 1], got ", rule.alpha));
  }
  if (!PositiveFinite(rule.key_ttl)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule.key_ttl must be finite and > 0 seconds, got ", rule.key_ttl.count()));
  }
  if (!PositiveFinite(rule.estimate_ttl)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rule.estimate_ttl must be finite and > 0 seconds, got ", rule.estimate_ttl.count()));
  }
  if (rule.sweep_batch < 1) return absl::InvalidArgumentError("rule.sweep_batch must be >= 1");
  if (rule.max_pending_total < 1) {
    return absl::InvalidArgumentError("rule.max_pending_total must be >= 1");
  }
  if (rule.max_pending_per_key < 1) {
    return absl::InvalidArgumentError("rule.max_pending_per_key must be >= 1");
  }
  if (!std::isfinite(rule.shortest_first_aging) || rule.shortest_first_aging < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rule.shortest_first_aging must be finite and >= 0, got ", rule.shortest_first_aging));
  }
  if (!(rule.sole_worker_reserve_after.count() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule.sole_worker_reserve_after must be > 0 seconds (infinity: never), got ",
                     rule.sole_worker_reserve_after.count()));
  }
  if (Status s = ValidateRateLimit(rule.rate_limit, "rule.rate_limit"); !s.ok()) return s;
  if (rule.adaptive_capacity) {
    if (Status s = ValidateAdaptiveCapacity(*rule.adaptive_capacity, rule.max_concurrency);
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("rule.", s.message()));
    }
  }
  if (rule.latency_capacity) {
    if (rule.adaptive_capacity) {
      return absl::InvalidArgumentError(
          "rule.latency_capacity and rule.adaptive_capacity: at most one rule may move the cap");
    }
    if (Status s = ValidateLatencyCapacity(*rule.latency_capacity, rule.max_concurrency); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("rule.", s.message()));
    }
  }
  if (rule.lending && !(rule.lending->kept_back >= 0 && rule.lending->kept_back < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rule.lending.kept_back must be in [0, 1), got ", rule.lending->kept_back));
  }
  if (rule.aging) {
    const AgingConfig& a = *rule.aging;
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
  if (Status s = ValidateKeyLimits(rule.default_key_limits); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("rule.default_key_limits: ", s.message()));
  }
  if (Status s = ValidateGroupLimits(rule.default_group_limits); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("rule.default_group_limits: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace fairgate
