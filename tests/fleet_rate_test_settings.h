// The fleet's rate limit that fleet_fault_test.cc's replicas in "rate" mode (fleet_replica.cc)
// run under, shared by the test and the replica so that the bound the test checks is the one the
// replicas were given.
#ifndef FAIRGATE_TESTS_FLEET_RATE_TEST_SETTINGS_H_
#define FAIRGATE_TESTS_FLEET_RATE_TEST_SETTINGS_H_

#include "fairgate/rate_limit.h"

namespace fairgate::testing {

inline constexpr RateLimit kTickRate{20, 5};  // 20 a second, a burst of 5, for the fleet
inline constexpr double kTokenLease = 0.1;    // a lease: 2 tokens (20 x 0.1)
inline constexpr int kRateJobs = 100000;      // each replica's backlog: more than a test runs

}  // namespace fairgate::testing

#endif  // FAIRGATE_TESTS_FLEET_RATE_TEST_SETTINGS_H_
