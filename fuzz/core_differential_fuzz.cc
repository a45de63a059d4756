// libFuzzer target: bytes become a scheduler configuration and a sequence of operations, run on
// AdmissionCore and on the ReferenceModel side by side by the differential driver the tests use
// (tests/differential_driver.h); the first difference in a status, an admission, a charge, an
// accumulated cost, an estimate, a MaxWaitToCeiling, a count or an aged job aborts with its
// description.
//
// Every extension is reachable: aging, shortest-first, weights, key limits, idle catch-up, rate
// limits, groups of keys.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>

#include "differential_driver.h"

namespace {

using fairgate::SchedulerOptions;
using fairgate::testing::Choices;
using fairgate::testing::DriverConfig;
using fairgate::testing::DriverResult;

// Choices read from the fuzzer's bytes; once they run out, every choice is the first one.
class FuzzedChoices : public Choices {
 public:
  explicit FuzzedChoices(FuzzedDataProvider& in) : in_(in) {}
  std::size_t Index(std::size_t n) override {
    return in_.ConsumeIntegralInRange<std::size_t>(0, n - 1);
  }
  bool Chance(double p) override { return in_.ConsumeProbability<double>() < p; }
  bool Exhausted() const override { return in_.remaining_bytes() == 0; }

 private:
  FuzzedDataProvider& in_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  FuzzedChoices choices(in);
  DriverConfig config;
  config.base = choices.Chance(0.5) ? SchedulerOptions::Seed() : SchedulerOptions::Default();
  config.extensions = true;
  config.draw_idle_catch_up = true;
  config.max_operations = 400;
  config.groups = choices.Chance(0.5);
  const DriverResult result = fairgate::testing::RunDifferential(choices, config);
  if (!result.difference.empty()) {
    std::fprintf(stderr, "core and reference model differ %s\n", result.difference.c_str());
    std::abort();
  }
  return 0;
}
