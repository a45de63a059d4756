#include <iostream>

#include "fairgate/job_type.h"
#include "fairgate/rule_options.h"
#include "fairgate/version.h"

int main() {
  fairgate::JobTypeConfig clone{.default_cost = 10, .max_concurrency = 8, .priority = 8};
  const bool ok = fairgate::ValidateJobType("clone", clone).ok() &&
                  fairgate::ValidateRuleOptions(fairgate::RuleOptions::Seed()).ok() &&
                  !fairgate::ValidateRuleOptions({.max_concurrency = 0}).ok() &&
                  !fairgate::ValidateJobType("", clone).ok() &&
                  // The installed header's version is the installed library's.
                  fairgate::Version() == FAIRGATE_VERSION_STRING && FAIRGATE_VERSION >= 100;
  std::cout << (ok ? "ok" : "wrong") << "\n";
  return ok ? 0 : 1;
}
