// SchedulerOptions: the presets are what DESIGN.md's table says, and every bad value is refused
// by name rather than replaced.
#include "fairgate/options.h"

#include <cmath>
#include <string>

#include "core/admission_core.h"
#include "doctest/doctest.h"

namespace fairgate {
namespace {
namespace options_test {

TEST_CASE("Options.Presets.SeedTurnsOffReconcileDefaultTurnsItOn") {
  const SchedulerOptions seed = SchedulerOptions::Seed();
  const SchedulerOptions def = SchedulerOptions::Default();
  CHECK_FALSE(seed.rule.reconcile);
  CHECK_FALSE(seed.rule.idle_catch_up);
  CHECK(def.rule.reconcile);
  CHECK_FALSE(def.rule.idle_catch_up);
  for (const SchedulerOptions& o : {seed, def}) {
    CHECK(o.rule.alpha == 0.3);
    CHECK(o.rule.key_ttl == Seconds(600));
    CHECK(o.rule.estimate_ttl == Seconds(3600));
    CHECK(ValidateOptions(o).ok());
  }
}

TEST_CASE("Options.Validate.EveryBadValueIsRefusedByName") {
  struct Case {
    std::string field;
    void (*mutate)(SchedulerOptions&);
  };
  const Case cases[] = {
      {"rule.max_concurrency", [](SchedulerOptions& o) { o.rule.max_concurrency = 0; }},
      {"rule.alpha", [](SchedulerOptions& o) { o.rule.alpha = 0; }},
      {"rule.alpha", [](SchedulerOptions& o) { o.rule.alpha = 1.0001; }},
      {"rule.alpha", [](SchedulerOptions& o) { o.rule.alpha = std::nan(""); }},
      {"rule.alpha", [](SchedulerOptions& o) { o.rule.alpha = -0.3; }},
      {"rule.key_ttl", [](SchedulerOptions& o) { o.rule.key_ttl = Seconds(0); }},
      {"rule.key_ttl", [](SchedulerOptions& o) { o.rule.key_ttl = Seconds(INFINITY); }},
      {"rule.estimate_ttl", [](SchedulerOptions& o) { o.rule.estimate_ttl = Seconds(-1); }},
      {"rule.sweep_batch", [](SchedulerOptions& o) { o.rule.sweep_batch = 0; }},
      {"rule.max_pending_total", [](SchedulerOptions& o) { o.rule.max_pending_total = 0; }},
      {"rule.max_pending_per_key", [](SchedulerOptions& o) { o.rule.max_pending_per_key = 0; }},
      {"runtime.worker_threads", [](SchedulerOptions& o) { o.runtime.worker_threads = -1; }},
      {"runtime.fiber_stack_bytes",
       [](SchedulerOptions& o) { o.runtime.fiber_stack_bytes = 1024; }},
      {"runtime.sweep_interval",
       [](SchedulerOptions& o) { o.runtime.sweep_interval = Seconds(0); }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.field);
    SchedulerOptions options;
    c.mutate(options);
    Status s = ValidateOptions(options);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(s.message()).rfind(c.field, 0) == 0);
    // The rule's are the core's to refuse too (ValidateRuleOptions names them alike).
    if (c.field.rfind("rule.", 0) == 0) {
      CHECK(ValidateRuleOptions(options.rule).message() == s.message());
      CHECK(core::AdmissionCore::Create(options.rule).status().code() ==
            absl::StatusCode::kInvalidArgument);
    } else {
      CHECK(ValidateRuleOptions(options.rule).ok());
    }
  }
  SchedulerOptions alpha_one;
  alpha_one.rule.alpha = 1;  // (0, 1] includes 1
  CHECK(ValidateOptions(alpha_one).ok());
}

}  // namespace options_test
}  // namespace
}  // namespace fairgate
