// A JobTypeConfig in one line, for tests.
#ifndef FAIRGATE_TESTS_TEST_JOB_TYPES_H_
#define FAIRGATE_TESTS_TEST_JOB_TYPES_H_

#include <string>
#include <utility>

#include "fairgate/job_type.h"

namespace fairgate::testing {

inline JobTypeConfig Type(int priority, int max_concurrency, std::string group = "",
                          double default_cost = 1) {
  return JobTypeConfig{.default_cost = default_cost,
                       .max_concurrency = max_concurrency,
                       .conflict_group = std::move(group),
                       .priority = priority};
}

}  // namespace fairgate::testing

#endif  // FAIRGATE_TESTS_TEST_JOB_TYPES_H_
