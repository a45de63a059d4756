#include "fairgate/job_type.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace fairgate {

Status ValidateJobType(std::string_view name, const JobTypeConfig& config) {
  if (name.empty()) return absl::InvalidArgumentError("job type name is empty");
  const absl::string_view n(name.data(), name.size());
  if (config.priority < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("job type '", n, "': priority must be >= 1, got ", config.priority));
  }
  if (config.max_concurrency < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job type '", n, "': max_concurrency must be >= 1, got ", config.max_concurrency));
  }
  if (config.slots < 1 || config.slots > config.priority) {
    return absl::InvalidArgumentError(
        absl::StrCat("job type '", n, "': slots must be >= 1 and at most its priority (",
                     config.priority, "), got ", config.slots));
  }
  if (config.conflict_limit < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job type '", n, "': conflict_limit must be >= 1, got ", config.conflict_limit));
  }
  if (config.conflict_limit != 1 && config.conflict_group.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job type '", n, "': conflict_limit ", config.conflict_limit, " needs a conflict_group"));
  }
  if (const double wait = config.max_queue_wait.count(); !std::isfinite(wait) || wait < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job type '", n, "': max_queue_wait must be finite and >= 0, got ", wait));
  }
  if (config.coalesce != Coalesce::kOff && config.coalesce != Coalesce::kJoin &&
      config.coalesce != Coalesce::kSupersede) {
    return absl::InvalidArgumentError(absl::StrCat("job type '", n, "': coalesce ",
                                                   static_cast<int>(config.coalesce),
                                                   " is not one of kOff, kJoin, kSupersede"));
  }
  if (!std::isfinite(config.default_cost) || config.default_cost < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job type '", n, "': default_cost must be finite and >= 0, got ", config.default_cost));
  }
  for (const std::string& tag : config.tags) {
    if (tag.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("job type '", n, "': a tag is empty"));
    }
  }
  if (Status s = ValidateRateLimit(config.rate_limit, "rate_limit"); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("job type '", n, "': ", s.message()));
  }
  if (Status s = ValidateShedding(config.shedding, "shedding"); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("job type '", n, "': ", s.message()));
  }
  return absl::OkStatus();
}

std::vector<std::string> JobTypeWarnings(std::string_view name, const JobTypeConfig& config,
                                         int max_concurrency, bool tiers_lend) {
  std::vector<std::string> warnings;
  const absl::string_view n(name.data(), name.size());
  const int slots = config.slots > 0 ? config.slots : 1;
  const int tier_allows = config.priority / slots;
  const int global_allows = max_concurrency / slots;
  const bool capped = config.max_concurrency != JobTypeConfig::kNoLimit;
  if (capped && tier_allows < config.max_concurrency) {
    warnings.push_back(absl::StrCat(
        "job type '", n, "': max_concurrency is ", config.max_concurrency, " but its tier's cap (",
        "priority ", config.priority, ", in slots; the type takes ", slots,
        " per job) lets at most ", tier_allows, " of its jobs run at once",
        tiers_lend ? " while other tiers' jobs want the slots; more run only as borrowers of idle "
                     "slots (rule.lending)"
                   : ""));
  }
  if (capped && global_allows < config.max_concurrency && global_allows < tier_allows) {
    warnings.push_back(absl::StrCat(
        "job type '", n, "': max_concurrency is ", config.max_concurrency,
        " but the global cap (max_concurrency ", max_concurrency, ", in slots; the type takes ",
        slots, " per job) lets at most ", global_allows, " of its jobs run at once"));
  }
  JobTypeConfig given_nothing;  // the defaults, with this type's cost: the newcomer's {}
  given_nothing.default_cost = config.default_cost;
  if (config == given_nothing && max_concurrency > 1 && !tiers_lend) {
    warnings.push_back(absl::StrCat(
        "job type '", n,
        "': runs one job at a time (priority 1, the default, is its tier's cap in slots, and "
        "the rule's tiers do not lend), though the scheduler has ",
        max_concurrency, " slots; give it a priority at least the jobs it should run at once"));
  }
  if (config.priority > max_concurrency) {
    warnings.push_back(absl::StrCat("job type '", n, "': its tier's cap (priority ",
                                    config.priority, ") is above the global cap (max_concurrency ",
                                    max_concurrency, "): the tier never has more than ",
                                    max_concurrency, " slots in use"));
  }
  return warnings;
}

}  // namespace fairgate
