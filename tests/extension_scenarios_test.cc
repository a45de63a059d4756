// The extensions of the original rule (docs/ordering.md), each shown by the outcome a user would
// care about, on simulated traces, with the mechanism on and off. Nothing here measures real time.
#include <algorithm>
#include <map>
#include <random>
#include <string>

#include "core/admission_core.h"
#include "doctest/doctest.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace fairgate::sim {
namespace {
namespace extension_scenarios_test {

Trace Base(int capacity, bool seed_mode = true) {
  Trace trace;
  trace.mode = seed_mode ? "seed" : "default";
  trace.options = seed_mode ? SchedulerOptions::Seed() : SchedulerOptions::Default();
  trace.options.rule.max_concurrency = capacity;
  return trace;
}

void AddType(Trace& trace, const std::string& name, int priority, int cap, bool sjf = false) {
  JobTypeConfig config;
  config.priority = priority;
  config.max_concurrency = cap;
  config.shortest_first = sjf;
  trace.types.emplace_back(name, config);
}

void AddJob(Trace& trace, const std::string& type, const std::string& key, double arrival,
            double duration, std::optional<double> cost = std::nullopt) {
  trace.jobs.push_back(
      {type, "j" + std::to_string(trace.jobs.size()), key, arrival, duration, cost});
}

SimResult Run(const Trace& trace) {
  StatusOr<SimResult> result = Simulate(trace);
  REQUIRE_MESSAGE(result.ok(), result.status().message());
  return *std::move(result);
}

double MaxWaitToCeiling(const Trace& trace, const std::string& type) {
  auto core = core::AdmissionCore::Create(trace.options.rule);
  REQUIRE(core.ok());
  for (const auto& [name, config] : trace.types) REQUIRE((*core)->RegisterType(name, config).ok());
  StatusOr<double> wait = (*core)->MaxWaitToCeiling(type);
  REQUIRE(wait.ok());
  return *wait;
}

// Foreground work from two clients keeps both slots busy for 100 s; one background job arrives
// at t = 1.
Trace ForegroundFlood() {
  Trace trace = Base(2);
  AddType(trace, "clone", 8, 8);
  AddType(trace, "repack", 1, 1);
  for (int i = 0; i < 100; ++i) {
    AddJob(trace, "clone", "alice", i, 3);
    AddJob(trace, "clone", "bob", i, 3);
  }
  AddJob(trace, "repack", "", 1, 4);
  return trace;
}

TEST_CASE("Extensions.Aging.BackgroundStartsWithinMaxWaitToCeilingPlusTheLongestJob") {
  Trace trace = ForegroundFlood();
  const std::size_t repack = trace.jobs.size() - 1;
  const double longest = 3;

  const double waited_without = *Run(trace).outcomes[repack].admitted_at - 1;
  trace.options.rule.aging = AgingConfig{Seconds(5), Seconds(5), 8};
  const double bound = MaxWaitToCeiling(trace, "repack") + longest;
  CHECK(MaxWaitToCeiling(trace, "repack") == 10);  // grace 5 + one step of 5
  const SimResult with = Run(trace);
  const double waited_with = *with.outcomes[repack].admitted_at - 1;
  MESSAGE("repack waited ", waited_without, " s without aging, ", waited_with,
          " s with aging (bound ", bound, " s)");
  CHECK(waited_with <= bound);
  CHECK(waited_without > bound);  // without aging it waits for the whole flood
  // Caps did not move: the repack never ran beside another background job, and the two
  // clients' clones all ran.
  for (std::size_t i = 0; i < repack; ++i) CHECK(with.outcomes[i].done_at.has_value());
}

TEST_CASE("Extensions.Aging.EffectiveTierIsInTheEvents") {
  Trace trace = ForegroundFlood();
  trace.options.rule.aging = AgingConfig{Seconds(5), Seconds(5), 8};
  const SimResult result = Run(trace);
  for (const SimEvent& e : result.events) {
    if (e.kind == SimEvent::Kind::kAdmit && e.job == trace.jobs.size() - 1) {
      CHECK(FormatEvent(trace, result, e).find("\"tier\":1,\"effective_tier\":8") !=
            std::string::npos);
    }
  }
}

TEST_CASE("Extensions.Weights.TwoBackloggedKeysGetServiceInProportion") {
  Trace trace = Base(1);
  AddType(trace, "sync", 1, 1);
  for (int i = 0; i < 400; ++i) {
    AddJob(trace, "sync", "prod", 0, 1, 1.0);
    AddJob(trace, "sync", "backup", 0, 1, 1.0);
  }
  trace.until = 200;
  auto served = [&](const SimResult& r) {
    std::map<std::string, double> n;
    for (std::size_t i = 0; i < trace.jobs.size(); ++i)
      n[trace.jobs[i].key] += r.outcomes[i].done_at.has_value();
    return n;
  };
  auto equal = served(Run(trace));
  trace.keys.push_back({"prod", TraceKey{3.0, std::nullopt}});
  auto weighted = served(Run(trace));
  const double ratio = weighted["prod"] / weighted["backup"];
  MESSAGE("prod:backup jobs served in 200 s: ", equal["prod"], ":", equal["backup"],
          " with equal weights, ", weighted["prod"], ":", weighted["backup"], " with 3:1");
  CHECK(std::abs(ratio / 3 - 1) <= 0.05);
  CHECK(std::abs(equal["prod"] / equal["backup"] - 1) <= 0.05);
}

// How many jobs of `key` run at once, at most, over the whole schedule.
int MostRunning(const Trace& trace, const SimResult& result, const std::string& key) {
  int running = 0, most = 0;
  for (const SimEvent& e : result.events) {
    if (trace.jobs[e.job].key != key) continue;
    running += e.kind == SimEvent::Kind::kAdmit ? 1 : -1;
    most = std::max(most, running);
  }
  return most;
}

TEST_CASE("Extensions.Limits.AKeyWithMaxRunningTwoNeverHoldsThreeSlots") {
  Trace trace = Base(4);
  AddType(trace, "clone", 8, 4);
  for (int i = 0; i < 10; ++i) AddJob(trace, "clone", "greedy", 0, 2);
  for (int i = 0; i < 4; ++i) AddJob(trace, "clone", "other", 3 + i, 1);
  const int without = MostRunning(trace, Run(trace), "greedy");
  trace.keys.push_back({"greedy", TraceKey{std::nullopt, KeyLimits{.max_running = 2}}});
  const SimResult with = Run(trace);
  MESSAGE("greedy held at most ", without, " slots without a limit, ",
          MostRunning(trace, with, "greedy"), " with max_running 2");
  CHECK(without == 4);
  CHECK(MostRunning(trace, with, "greedy") == 2);
  // Every job still ran: the limit holds a key back, it does not drop its work.
  for (const JobOutcome& o : with.outcomes) CHECK(o.done_at.has_value());
}

TEST_CASE("Extensions.Limits.AKeyBelowMinRunningGetsTheNextFreeSlotInItsTier") {
  Trace trace = Base(2);
  AddType(trace, "clone", 8, 2);
  AddJob(trace, "clone", "vip", 0, 1, 100.0);  // vip has used a lot
  AddJob(trace, "clone", "a", 0, 5, 1.0);
  AddJob(trace, "clone", "a", 0.5, 1, 1.0);
  AddJob(trace, "clone", "b", 0.5, 1, 1.0);
  AddJob(trace, "clone", "vip", 0.5, 1, 1.0);
  auto next_at_1 = [&](const SimResult& r) {
    for (const SimEvent& e : r.events) {
      if (e.t == 1 && e.kind == SimEvent::Kind::kAdmit) return trace.jobs[e.job].key;
    }
    return std::string("none");
  };
  CHECK(next_at_1(Run(trace)) == "b");  // the least accumulated cost
  trace.keys.push_back({"vip", TraceKey{std::nullopt, KeyLimits{.min_running = 1}}});
  CHECK(next_at_1(Run(trace)) == "vip");  // its reservation
}

TEST_CASE("Extensions.ShortestFirst.LowersAKeysMeanCompletionAndTheLongJobStillRuns") {
  auto make = [](bool sjf) {
    Trace trace = Base(1, /*seed_mode=*/false);
    AddType(trace, "build", 1, 1, sjf);
    AddJob(trace, "build", "k", 0, 20, 20.0);  // the long one comes first
    for (int i = 0; i < 10; ++i) AddJob(trace, "build", "k", 0, 1, 1.0);
    return trace;
  };
  auto mean_completion = [](const SimResult& r) {
    double sum = 0;
    for (const JobOutcome& o : r.outcomes) sum += *o.done_at;
    return sum / static_cast<double>(r.outcomes.size());
  };
  const SimResult fifo = Run(make(false));
  const SimResult sjf = Run(make(true));
  MESSAGE("mean completion: ", mean_completion(fifo), " s in arrival order, ", mean_completion(sjf),
          " s shortest-first");
  CHECK(mean_completion(sjf) < mean_completion(fifo));
  CHECK(mean_completion(fifo) == 25);
  CHECK(mean_completion(sjf) == doctest::Approx(85.0 / 11));
  CHECK(sjf.outcomes[0].done_at == 30.0);  // the long job ran, last
}

// Shortest-first with its aging term (RuleOptions::shortest_first_aging = a): a job J of
// estimated cost c is passed by no job of its own key and type that arrived more than c / a
// after J, in whatever tier, with aging across tiers on or off and a higher tier backlogged by
// other keys. Without the term (a = 0) the same traces let a key's later short jobs pass its
// long one without end.
TEST_CASE("Extensions.ShortestFirstAging.PropertyNoJobIsPassedByItsKeysJobsFromPastItsHorizon") {
  std::mt19937_64 rng(2027);
  auto pick = [&](std::initializer_list<double> v) {
    return *(v.begin() + std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng));
  };
  long pairs = 0, late_passes_without = 0;
  for (int n = 0; n < 200; ++n) {
    CAPTURE(n);
    const int capacity = std::uniform_int_distribution<int>(1, 3)(rng);
    Trace trace = Base(capacity, std::uniform_int_distribution<int>(0, 1)(rng) == 0);
    AddType(trace, "top", 4, capacity, true);  // the ceiling tier's own type
    AddType(trace, "low", 1, 1, true);
    AddType(trace, "flood", 4, capacity);  // other keys' work in the top tier
    const double a = pick({0.1, 0.5, 2});
    if (pick({0, 1}) == 1) trace.options.rule.aging = AgingConfig{Seconds(1), Seconds(2), 4};
    std::uniform_real_distribution<double> cost(0.1, 8);
    for (double t = 0; t < 80; t += pick({0.1, 0.5, 1})) {
      const double c = cost(rng);
      const std::string type = pick({0, 0, 1, 2}) == 0 ? "top" : (pick({0, 1}) ? "low" : "flood");
      const std::string key = type == "flood" ? "f" : "k" + std::to_string(int(pick({0, 1})));
      AddJob(trace, type, key, t, c, c);
    }
    auto late_passes = [&](double aging, long* checked) {
      trace.options.rule.shortest_first_aging = aging;
      const SimResult r = Run(trace);
      long passes = 0;
      for (std::size_t j = 0; j < trace.jobs.size(); ++j) {
        const TraceJob& jj = trace.jobs[j];
        if (jj.type == "flood") continue;
        const double horizon = jj.arrival + *jj.cost / a;  // the bound of the term `a`
        for (std::size_t k = 0; k < trace.jobs.size(); ++k) {
          const TraceJob& kk = trace.jobs[k];
          if (k == j || kk.type != jj.type || kk.key != jj.key) continue;
          const double k_at = *r.outcomes[k].admitted_at;
          // K went while J waited (J had arrived and was not admitted yet).
          if (jj.arrival <= k_at && k_at < *r.outcomes[j].admitted_at) {
            if (checked) ++*checked;
            passes += kk.arrival >= horizon;
          }
        }
      }
      return passes;
    };
    CHECK(late_passes(a, &pairs) == 0);
    late_passes_without += late_passes(0, nullptr);
  }
  MESSAGE(pairs, " passes checked against their horizon; without the aging term, ",
          late_passes_without, " passes by jobs that came after it");
  CHECK(pairs > 1000);
  CHECK(late_passes_without > 0);  // the property is not true of shortest-first alone
}

TEST_CASE("Extensions.Aging.PropertyNoBackgroundJobWaitsPastItsBound") {
  std::mt19937_64 rng(2026);
  auto pick = [&](std::initializer_list<double> v) {
    return *(v.begin() + std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng));
  };
  int traces = 0, background_jobs = 0, exceeded_without_aging = 0;
  for (int n = 0; n < 300; ++n) {
    const int capacity = std::uniform_int_distribution<int>(1, 4)(rng);
    Trace trace = Base(capacity, std::uniform_int_distribution<int>(0, 1)(rng) == 0);
    AddType(trace, "fg", 8, capacity, pick({0, 1}) == 1);
    AddType(trace, "bg", 1, 1);
    trace.options.rule.shortest_first = pick({0, 0, 1}) == 1;
    const double longest = pick({1, 3, 6});
    const AgingConfig aging{Seconds(pick({0, 1, 3})), Seconds(pick({0.5, 2, 5})), 8};
    trace.options.rule.aging = aging;
    const double bound = MaxWaitToCeiling(trace, "bg") + longest;
    // A flood of foreground jobs from a few keys, random lengths up to `longest`, some with
    // random weights and limits.
    const int keys = std::uniform_int_distribution<int>(1, 5)(rng);
    for (int k = 0; k < keys; ++k) {
      if (pick({0, 1}) == 1) {
        trace.keys.push_back({"k" + std::to_string(k),
                              TraceKey{pick({0.5, 1, 3}), KeyLimits{.max_running = 1 + k}}});
      }
    }
    std::uniform_real_distribution<double> length(0.1, longest);
    for (double t = 0; t < 120; t += pick({0.05, 0.1, 0.3})) {
      AddJob(trace, "fg",
             "k" + std::to_string(std::uniform_int_distribution<int>(0, keys - 1)(rng)), t,
             length(rng));
    }
    // Background jobs far enough apart that each is the only one pending or running.
    std::vector<std::size_t> background;
    for (double t = pick({0, 2}); t < 100; t += bound + 4) {
      background.push_back(trace.jobs.size());
      AddJob(trace, "bg", "", t, pick({0.1, 1, 2}));
    }
    const SimResult with = Run(trace);
    for (std::size_t j : background) {
      CAPTURE(n);
      REQUIRE(with.outcomes[j].admitted_at.has_value());
      CHECK(*with.outcomes[j].admitted_at - trace.jobs[j].arrival <= bound + 1e-9);
      ++background_jobs;
    }
    trace.options.rule.aging.reset();
    const SimResult without = Run(trace);
    for (std::size_t j : background) {
      const auto& at = without.outcomes[j].admitted_at;
      exceeded_without_aging += !at || *at - trace.jobs[j].arrival > bound;
    }
    ++traces;
  }
  MESSAGE(traces, " traces, ", background_jobs,
          " background jobs, all within their bound with "
          "aging; ",
          exceeded_without_aging, " past it without");
  CHECK(background_jobs > 1000);
  CHECK(exceeded_without_aging > background_jobs / 2);  // the flood does starve them otherwise
}

}  // namespace extension_scenarios_test
}  // namespace
}  // namespace fairgate::sim
