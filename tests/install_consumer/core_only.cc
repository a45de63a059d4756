#include <iostream>

#include "fairgate/job_type.h"
#include "fairgate/options.h"

int main() {
  fairgate::JobTypeConfig clone{.default_cost = 10, .max_concurrency = 8, .priority = 8};
  const bool ok = fairgate::ValidateJobType("clone", clone).ok() &&
                  fairgate::ValidateOptions(fairgate::SchedulerOptions::Seed()).ok() &&
                  !fairgate::ValidateJobType("", clone).ok();
  std::cout << (ok ? "ok" : "wrong") << "\n";
  return ok ? 0 : 1;
}
