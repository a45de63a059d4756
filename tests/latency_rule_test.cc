// The latency rule (fairgate/latency_capacity.h, core::LatencyRule), worked by hand: each call is
// one interval's end, with the runs completed in it. Baselines of 1 s unless said otherwise.
#include "core/latency_rule.h"

#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/rule_options.h"

namespace fairgate::core {
namespace {
namespace latency_rule_test {

// `n` runs of `type`, admitted at `start`, each taking `run_time`.
std::vector<RunSample> Runs(const std::string& type, double start, double run_time, int n = 3) {
  return std::vector<RunSample>(n, RunSample{type, start, run_time});
}

LatencyCapacity Rule(int min = 1, int remeasure_every = 1000) {
  return {.min = min, .interval = Seconds(1), .remeasure_every = remeasure_every};
}

TEST_CASE("LatencyCapacity.Rule.GrowsByAQuarterWhileRunsKeepTheirSpeedAndWorkWaits") {
  LatencyRule rule(Rule(), 32);
  CHECK(rule.Next(1, 1, true, {}) == 1);  // nothing completed: nothing known
  // Each interval's runs were admitted after the last change, at the baseline's speed.
  std::vector<int> caps;
  int cap = 1;
  for (int t = 2; t <= 11; ++t) {
    cap = rule.Next(t, cap, true, Runs("clone", t - 0.5, 1.0));
    caps.push_back(cap);
  }
  // + max(1, cap / 4): 1 2 3 4 5 6 7 8, then 10, 12, 15.
  CHECK(caps == std::vector<int>{2, 3, 4, 5, 6, 7, 8, 10, 12, 15});
  CHECK(rule.gradient() == 1);
  // Nothing waits: no reason to grow. Never above max_concurrency.
  CHECK(rule.Next(12, 15, false, Runs("clone", 11.5, 1.0)) == 15);
  LatencyRule small(Rule(), 3);
  CHECK(small.Next(1, 3, true, Runs("clone", 0.5, 1.0)) == 3);
}

TEST_CASE("LatencyCapacity.Rule.ASlowdownShrinksTheCapToTheKnee") {
  LatencyRule rule(Rule(), 32);
  CHECK(rule.Next(1, 8, true, Runs("clone", 0.2, 1.0)) == 10);  // baseline 1; grows
  // Runs admitted at 1.0, after the change, take 2.5 s: past a knee of 4 (10 / 4).
  CHECK(rule.Next(4, 10, true, Runs("clone", 1.0, 2.5)) == 4);
  CHECK(rule.gradient() == doctest::Approx(0.4));
  // Runs admitted before that change (at 3.9: under the cap of 10) say nothing about 4.
  CHECK(rule.Next(5, 4, true, Runs("clone", 3.9, 2.5)) == 4);
  // Within 10 % of the baseline is not a slowdown: with work waiting it probes one slot more.
  CHECK(rule.Next(6, 4, true, Runs("clone", 4.5, 1.09)) == 5);
  // Never below min, and a shrink takes at least one slot.
  LatencyRule floor(Rule(3), 32);
  CHECK(floor.Next(1, 4, true, Runs("clone", 0.5, 1.0)) == 5);
  CHECK(floor.Next(2, 5, true, Runs("clone", 1.5, 10.0)) == 3);
  LatencyRule gentle(Rule(), 32);
  CHECK(gentle.Next(1, 8, true, Runs("clone", 0.5, 1.0)) == 10);
  CHECK(gentle.Next(2, 10, true, Runs("clone", 1.5, 1.15)) == 9);  // round(10 / 1.15) = 9
}

TEST_CASE("LatencyCapacity.Rule.AfterTheFirstSlowdownItProbesOneSlotAtATimeBackingOffOnFailure") {
  LatencyRule rule(Rule(), 32);
  double t = 1;
  int cap = rule.Next(t, 4, true, Runs("clone", 0.5, 1.0));  // 5
  REQUIRE(cap == 5);
  // The knee is 4: at 5, runs take 1.25 s; shrinks to round(5 * 0.8) = 4.
  auto interval = [&](double run_time) {
    t += 1;
    cap = rule.Next(t, cap, true, Runs("clone", t - 0.5, run_time));
    return cap;
  };
  auto at_knee = [](int cap) { return cap <= 4 ? 1.0 : 1.25; };
  CHECK(interval(1.25) == 4);
  // First probe at once (spacing 1); each fails, so the next comes 2 intervals later, then 4,
  // then 8, then 16.
  std::vector<int> caps;
  for (int i = 0; i < 20; ++i) caps.push_back(interval(at_knee(cap)));
  CHECK(caps == std::vector<int>{5, 4, 4, 5, 4, 4, 4, 4, 5, 4, 4, 4, 4, 4, 4, 4, 4, 5, 4, 4});
  // The machine has room now (runs keep their speed at 5): the rule finds out at its next probe
  // (16 intervals after the last), which passes, and then probes again at once, one slot an
  // interval.
  caps.clear();
  for (int i = 0; i < 20; ++i) caps.push_back(interval(1.0));
  CHECK(caps == std::vector<int>{4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 6, 7, 8, 9, 10});
  // The spacing is bounded by remeasure_every.
  LatencyRule bounded(Rule(1, 4), 32);
  int c = bounded.Next(1, 4, true, Runs("clone", 0.5, 1.0));  // 5
  double u = 1;
  int probes = 0;
  for (int i = 0; i < 40; ++i) {
    u += 1;
    const bool remeasuring = bounded.remeasuring();
    const int next = bounded.Next(u, c, true, Runs("clone", u - 0.5, c <= 4 ? 1.0 : 1.25));
    if (!remeasuring && next > c && !bounded.remeasuring()) ++probes;
    c = next;
  }
  CHECK(probes >= 5);  // at least one every 4 + 4 intervals, never backing off for good
}

TEST_CASE("LatencyCapacity.Rule.BaselinesAreReMeasuredAtAHalvedCapAndReplaceOnesThatNoLongerHold") {
  LatencyRule rule(Rule(1, 4), 32);
  // Intervals 1-3: at the baseline; the cap grows 8 -> 10 -> 12 -> 15.
  CHECK(rule.Next(1, 8, true, Runs("clone", 0.5, 1.0)) == 10);
  CHECK(rule.Next(2, 10, true, Runs("clone", 1.5, 1.0)) == 12);
  CHECK(rule.Next(3, 12, true, Runs("clone", 2.5, 1.0)) == 15);
  // The 4th: re-measuring, at half the cap (whatever the runs say).
  CHECK(rule.Next(4, 15, true, Runs("clone", 3.5, 1.0)) == 7);
  CHECK(rule.remeasuring());
  // Runs admitted before it began do not count; it waits for ones admitted since.
  CHECK(rule.Next(5, 7, true, Runs("clone", 3.9, 5.0)) == 7);
  // The jobs became 2x slower for good: their median is the new baseline, the cap goes back.
  CHECK(rule.Next(6, 7, true, Runs("clone", 4.5, 2.0)) == 15);
  CHECK_FALSE(rule.remeasuring());
  // At 2 s, no slowdown: it grows (by a quarter: it had seen no slowdown yet).
  CHECK(rule.Next(7, 15, true, Runs("clone", 6.5, 2.0)) == 18);
  // No run admitted since the re-measurement began completes within three intervals: the old
  // baselines stay and the cap goes back.
  CHECK(rule.Next(8, 18, true, Runs("clone", 7.5, 2.0)) == 22);
  CHECK(rule.Next(9, 22, true, {}) == 22);   // nothing completed: nothing known
  CHECK(rule.Next(10, 22, true, {}) == 11);  // the 4th interval again
  CHECK(rule.Next(11, 11, true, {}) == 11);
  CHECK(rule.Next(12, 11, true, Runs("clone", 8.0, 2.0)) == 11);  // admitted before it began
  CHECK(rule.Next(13, 11, true, {}) == 22);
}

TEST_CASE("LatencyCapacity.Rule.EachTypeHasItsOwnBaselineAndTheMedianDiscountsOutliers") {
  LatencyRule rule(Rule(), 32);
  // A 1 s type and a 3 s one, each at its own baseline: no slowdown, although 3 > 1.
  std::vector<RunSample> runs = Runs("fetch", 0.5, 1.0);
  for (double run_time : {3.0, 3.0, 30.0}) runs.push_back({"clone", 0.5, run_time});
  CHECK(rule.Next(1, 8, true, runs) == 10);
  // The clone's baseline is its median, 3: one run 10x slower does not move it.
  runs = Runs("fetch", 1.5, 1.0);
  for (double run_time : {3.0, 3.0, 30.0}) runs.push_back({"clone", 1.5, run_time});
  CHECK(rule.Next(2, 10, true, runs) == 12);
  CHECK(rule.gradient() == 1);
  // Three fetches at 2x and one clone at 1x: the gradient is their mean, (3 * 0.5 + 1) / 4.
  runs = Runs("fetch", 2.5, 2.0);
  runs.push_back({"clone", 2.5, 3.0});
  CHECK(rule.Next(3, 12, true, runs) == 8);  // round(12 * 0.625) = 7.5 -> 8
  CHECK(rule.gradient() == doctest::Approx(0.625));
}

TEST_CASE("LatencyCapacity.Options.BadRulesAreRefusedNamingTheField") {
  auto refusal = [](LatencyCapacity latency, int max_concurrency = 4) {
    return std::string(ValidateLatencyCapacity(latency, max_concurrency).message());
  };
  CHECK(refusal({.min = 0}) == "latency_capacity.min must be in [1, max_concurrency 4], got 0");
  CHECK(refusal({.min = 5}) == "latency_capacity.min must be in [1, max_concurrency 4], got 5");
  CHECK(refusal({.interval = Seconds(0)}) ==
        "latency_capacity.interval must be finite and > 0, got 0");
  CHECK(refusal({.remeasure_every = 1}) ==
        "latency_capacity.remeasure_every must be >= 2 intervals, got 1");
  CHECK(ValidateLatencyCapacity({}, 4).ok());
  // In the rule's options: named from the rule, and not with adaptive capacity.
  RuleOptions rule;
  rule.latency_capacity = LatencyCapacity{.min = 9};
  CHECK(std::string(ValidateRuleOptions(rule).message()) ==
        "rule.latency_capacity.min must be in [1, max_concurrency 8], got 9");
  rule.latency_capacity = LatencyCapacity{};
  rule.adaptive_capacity = AdaptiveCapacity{};
  CHECK(std::string(ValidateRuleOptions(rule).message()) ==
        "rule.latency_capacity and rule.adaptive_capacity: at most one rule may move the cap");
}

}  // namespace latency_rule_test
}  // namespace
}  // namespace fairgate::core
