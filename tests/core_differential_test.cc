// Drives AdmissionCore and the ReferenceModel with the same random operation sequences and
// requires the same answers: every status code, every admission (which job, what charge), and
// after every operation the same accumulated cost for every key, the same tracked keys and
// estimates, the same pending and running counts.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/admission_core.h"
#include "doctest/doctest.h"
#include "reference_model.h"

namespace fairgate {
namespace {

using core::AdmissionCore;
using core::JobTicket;
using testing::ReferenceModel;

struct Tracked {
  JobTicket ticket;
  int model_job;
  enum { kPending, kRunning, kGone } state;
};

template <typename T>
const T& Pick(std::mt19937_64& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
}

bool Chance(std::mt19937_64& rng, double p) {
  return std::uniform_real_distribution<double>(0, 1)(rng) < p;
}

// Mostly a job in `preferred` state; sometimes any job, to compare the refusals too.
Tracked* PickJob(std::mt19937_64& rng, std::vector<Tracked>& jobs, int preferred) {
  if (jobs.empty()) return nullptr;
  if (!Chance(rng, 0.1)) {
    std::vector<Tracked*> matching;
    for (Tracked& j : jobs) {
      if (j.state == preferred) matching.push_back(&j);
    }
    if (!matching.empty()) return Pick(rng, matching);
  }
  return &jobs[std::uniform_int_distribution<std::size_t>(0, jobs.size() - 1)(rng)];
}

// Runs one random sequence; returns the number of admissions it compared. With `extensions`,
// the options, types and operations also draw on aging, shortest-first, weights and key limits.
int RunSequence(std::uint64_t seed, SchedulerOptions options, bool extensions = false) {
  std::mt19937_64 rng(seed);
  if (extensions) {
    if (Chance(rng, 0.7)) {
      options.aging = AgingConfig{Seconds(Pick(rng, std::vector<double>{0, 1, 2.5})),
                                  Seconds(Pick(rng, std::vector<double>{0.5, 1, 3})),
                                  Pick(rng, std::vector<int>{1, 2, 3, 5, 10})};
    }
    options.shortest_first = Chance(rng, 0.2);
    if (Chance(rng, 0.3)) {
      const int max = std::uniform_int_distribution<int>(1, 3)(rng);
      options.default_key_limits = {max, std::uniform_int_distribution<int>(0, max)(rng)};
    }
  }
  options.max_concurrency = std::uniform_int_distribution<int>(1, 6)(rng);
  options.alpha = Pick(rng, std::vector<double>{0.3, 0.5, 1.0, 0.123});
  options.key_ttl = Seconds(Pick(rng, std::vector<double>{1, 3, 8, 20}));
  options.estimate_ttl = Seconds(Pick(rng, std::vector<double>{1, 5, 12, 30}));
  options.sweep_batch = std::uniform_int_distribution<std::size_t>(1, 3)(rng);
  if (Chance(rng, 0.3)) options.max_pending_total = std::uniform_int_distribution<int>(3, 25)(rng);
  if (Chance(rng, 0.3)) options.max_pending_per_key = std::uniform_int_distribution<int>(1, 8)(rng);

  auto created = AdmissionCore::Create(options);
  REQUIRE(created.ok());
  AdmissionCore& core = **created;
  ReferenceModel model(options);

  const int type_count = std::uniform_int_distribution<int>(1, 5)(rng);
  std::vector<std::string> types;
  for (int i = 0; i < type_count; ++i) {
    JobTypeConfig config;
    config.priority = Pick(rng, std::vector<int>{1, 2, 3, 5});
    config.max_concurrency = std::uniform_int_distribution<int>(1, 3)(rng);
    config.conflict_group = Pick(rng, std::vector<std::string>{"", "git", "git", "db"});
    config.default_cost = Pick(rng, std::vector<double>{0, 1, 2.5, 10});
    config.shortest_first = extensions && Chance(rng, 0.4);
    const std::string name = "t" + std::to_string(i);
    REQUIRE(core.RegisterType(name, config).ok());
    REQUIRE(model.RegisterType(name, config).ok());
    types.push_back(name);
  }
  for (const std::string& type : types) {
    StatusOr<double> got = core.MaxWaitToCeiling(type);
    StatusOr<double> want = model.MaxWaitToCeiling(type);
    REQUIRE(got.ok());
    REQUIRE(want.ok());
    REQUIRE(*got == *want);
  }
  types.push_back("unknown");
  REQUIRE(core.MaxWaitToCeiling("unknown").status().code() == absl::StatusCode::kNotFound);
  const std::vector<std::string> keys{"", "a", "b", "c", "d", "e"};
  const std::vector<std::string> ids{"r0", "r1", "r2", "r3", "r4", ""};
  const std::vector<double> costs{0, 1, 3.5, 7, 0.1, -1, std::nan("")};

  std::vector<Tracked> jobs;
  double now = 0;
  int admissions = 0;

  auto admit_one = [&]() {
    std::optional<core::Admission> got = core.NextAdmission(now);
    std::optional<ReferenceModel::Admission> want = model.NextAdmission(now);
    REQUIRE(got.has_value() == want.has_value());
    if (!got) return false;
    Tracked* t = nullptr;
    for (Tracked& j : jobs) {
      if (j.state == Tracked::kPending && j.ticket == got->ticket) t = &j;
    }
    REQUIRE(t != nullptr);
    REQUIRE(t->model_job == want->job);
    REQUIRE(got->charge == want->charge);
    t->state = Tracked::kRunning;
    ++admissions;
    return true;
  };

  for (int op = 0; op < 120; ++op) {
    const int kind = std::uniform_int_distribution<int>(0, 99)(rng);
    if (kind < 12) {
      now += Pick(rng, std::vector<double>{0, 0, 0.5, 1, 2, 4.75});
    } else if (kind < 50) {
      const std::string type = Chance(rng, 0.04) ? "unknown" : Pick(rng, types);
      const std::string id = Chance(rng, 0.02) ? "" : Pick(rng, ids);
      const std::string key = Pick(rng, keys);
      std::optional<double> cost;
      if (Chance(rng, 0.3)) cost = Pick(rng, costs);
      StatusOr<JobTicket> got = core.Enqueue({type, id, key, cost}, now);
      StatusOr<int> want = model.Enqueue(type, id, key, cost, now);
      REQUIRE(got.status().code() == want.status().code());
      if (got.ok()) jobs.push_back({*got, *want, Tracked::kPending});
    } else if (kind < 68) {
      const int n = Chance(rng, 0.3) ? 1 : 1000;
      for (int i = 0; i < n && admit_one(); ++i) {
      }
    } else if (kind < 88) {
      Tracked* picked = PickJob(rng, jobs, Tracked::kRunning);
      if (picked == nullptr) continue;
      Tracked& t = *picked;
      const double elapsed = Pick(rng, std::vector<double>{0, 1, 2, 4.25, 0.3, 9});
      Status got = core.Complete(t.ticket, elapsed, now);
      Status want = model.Complete(t.model_job, elapsed, now);
      REQUIRE(got.code() == want.code());
      if (got.ok()) t.state = Tracked::kGone;
    } else if (extensions && kind < 92) {
      const std::string key = Pick(rng, keys);
      if (Chance(rng, 0.5)) {
        const double weight = Pick(rng, std::vector<double>{0.5, 1, 2, 3, 0.3, 0, -1});
        REQUIRE(core.SetKeyWeight(key, weight).code() == model.SetKeyWeight(key, weight).code());
      } else {
        const KeyLimits limits{std::uniform_int_distribution<int>(0, 3)(rng),
                               std::uniform_int_distribution<int>(-1, 2)(rng)};
        REQUIRE(core.SetKeyLimits(key, limits).code() == model.SetKeyLimits(key, limits).code());
      }
    } else if (kind < 96) {
      Tracked* picked = PickJob(rng, jobs, Tracked::kPending);
      if (picked == nullptr) continue;
      Tracked& t = *picked;
      Status got = core.Cancel(t.ticket, now);
      Status want = model.Cancel(t.model_job, now);
      REQUIRE(got.code() == want.code());
      if (got.ok()) t.state = Tracked::kGone;
    } else {
      core::SweepResult got = core.Sweep(now);
      auto [keys_evicted, estimates_evicted] = model.Sweep(now);
      REQUIRE(got.keys_evicted == keys_evicted);
      REQUIRE(got.estimates_evicted == estimates_evicted);
    }

    core.AdvanceTo(now);
    const Snapshot snapshot = core.TakeSnapshot();
    const auto aged_in = model.AgedIn(now);
    REQUIRE(snapshot.tiers.size() == aged_in.size());
    for (const TierSnapshot& tier : snapshot.tiers)
      REQUIRE(tier.aged_in == aged_in.at(tier.priority));
    REQUIRE(snapshot.pending == model.pending());
    REQUIRE(snapshot.running == model.running());
    const auto model_keys = model.Keys();
    REQUIRE(snapshot.keys_tracked == model_keys.size());
    for (const auto& [key, acc] : model_keys) {
      std::optional<double> core_acc = core.AccumulatedCost(key);
      REQUIRE(core_acc.has_value());
      REQUIRE(*core_acc == acc);
    }
    REQUIRE(snapshot.estimates_tracked == model.estimates_tracked());
    for (std::size_t t = 0; t + 1 < types.size(); ++t) {
      for (const std::string& id : ids)
        REQUIRE(core.Estimate(types[t], id) == model.Estimate(types[t], id));
    }
  }
  return admissions;
}

constexpr int kSequences = 10000;

void RunMode(const SchedulerOptions& options, std::uint64_t salt, bool extensions = false) {
  long admissions = 0;
  for (int i = 0; i < kSequences; ++i) {
    CAPTURE(i);
    admissions += RunSequence(salt * 1000003 + i, options, extensions);
  }
  // The sequences must exercise admission for the comparison to mean anything.
  CHECK(admissions > kSequences * 10);
}

TEST_CASE("CoreDifferential.SeedMode.MatchesReferenceModel") {
  RunMode(SchedulerOptions::Seed(), 1);
}

TEST_CASE("CoreDifferential.DefaultMode.MatchesReferenceModel") {
  RunMode(SchedulerOptions::Default(), 2);
}

TEST_CASE("CoreDifferential.IdleCatchUp.MatchesReferenceModel") {
  SchedulerOptions options = SchedulerOptions::Default();
  options.idle_catch_up = true;
  RunMode(options, 3);
}

TEST_CASE("CoreDifferential.Extensions.MatchReferenceModel") {
  RunMode(SchedulerOptions::Default(), 5, true);
}

TEST_CASE("CoreDifferential.ExtensionsWithIdleCatchUp.MatchReferenceModel") {
  SchedulerOptions options = SchedulerOptions::Default();
  options.idle_catch_up = true;
  RunMode(options, 6, true);
}

TEST_CASE("CoreDifferential.SeedModeWithIdleCatchUp.MatchesReferenceModel") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.idle_catch_up = true;
  RunMode(options, 4);
}

}  // namespace
}  // namespace fairgate
