// SchedulerOptions: the presets are what DESIGN.md's table says, and every bad value is refused
// by name rather than replaced.
#include "fairgate/options.h"

#include <cmath>
#include <string>

#include "core/admission_core.h"
#include "doctest/doctest.h"

namespace fairgate {
namespace {

TEST_CASE("Options.Presets.SeedTurnsOffReconcileDefaultTurnsItOn") {
  const SchedulerOptions seed = SchedulerOptions::Seed();
  const SchedulerOptions def = SchedulerOptions::Default();
  CHECK_FALSE(seed.reconcile);
  CHECK_FALSE(seed.idle_catch_up);
  CHECK(def.reconcile);
  CHECK_FALSE(def.idle_catch_up);
  for (const SchedulerOptions& o : {seed, def}) {
    CHECK(o.alpha == 0.3);
    CHECK(o.key_ttl == Seconds(600));
    CHECK(o.estimate_ttl == Seconds(3600));
    CHECK(ValidateOptions(o).ok());
  }
}

TEST_CASE("Options.Validate.EveryBadValueIsRefusedByName") {
  struct Case {
    std::string field;
    void (*mutate)(SchedulerOptions&);
  };
  const Case cases[] = {
      {"max_concurrency", [](SchedulerOptions& o) { o.max_concurrency = 0; }},
      {"alpha", [](SchedulerOptions& o) { o.alpha = 0; }},
      {"alpha", [](SchedulerOptions& o) { o.alpha = 1.0001; }},
      {"alpha", [](SchedulerOptions& o) { o.alpha = std::nan(""); }},
      {"alpha", [](SchedulerOptions& o) { o.alpha = -0.3; }},
      {"key_ttl", [](SchedulerOptions& o) { o.key_ttl = Seconds(0); }},
      {"key_ttl", [](SchedulerOptions& o) { o.key_ttl = Seconds(INFINITY); }},
      {"estimate_ttl", [](SchedulerOptions& o) { o.estimate_ttl = Seconds(-1); }},
      {"sweep_batch", [](SchedulerOptions& o) { o.sweep_batch = 0; }},
      {"max_pending_total", [](SchedulerOptions& o) { o.max_pending_total = 0; }},
      {"max_pending_per_key", [](SchedulerOptions& o) { o.max_pending_per_key = 0; }},
      {"worker_threads", [](SchedulerOptions& o) { o.worker_threads = -1; }},
      {"fiber_stack_bytes", [](SchedulerOptions& o) { o.fiber_stack_bytes = 1024; }},
      {"sweep_interval", [](SchedulerOptions& o) { o.sweep_interval = Seconds(0); }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.field);
    SchedulerOptions options;
    c.mutate(options);
    Status s = ValidateOptions(options);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(s.message()).rfind(c.field, 0) == 0);
    // The core refuses to start with them.
    CHECK(core::AdmissionCore::Create(options).status().code() ==
          absl::StatusCode::kInvalidArgument);
  }
  SchedulerOptions alpha_one;
  alpha_one.alpha = 1;  // (0, 1] includes 1
  CHECK(ValidateOptions(alpha_one).ok());
}

}  // namespace
}  // namespace fairgate
