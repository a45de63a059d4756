// Groups of keys (tenants; AdmissionCore::SetKeyGroup, docs/ordering.md "Groups"): a client that
// spreads its work over many keys gets one group's share, not one per key; each tenant's admitted
// cost stays near its weighted share in every window in which all have work pending; a key moves
// between groups with its jobs; a group is forgotten as a key is; bad input is refused. The
// differential tests hold the core to the reference model with groups drawn at random
// (CoreDifferential.Groups*).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/admission_core.h"
#include "doctest/doctest.h"
#include "test_job_types.h"

namespace fairgate {
namespace {
namespace groups_test {

using core::AdmissionCore;
using testing::Type;

// `capacity` slots, and type "clone" that may take them all.
std::unique_ptr<AdmissionCore> MakeCore(RuleOptions rule = RuleOptions::Seed(), int capacity = 1) {
  rule.max_concurrency = capacity;
  auto core = AdmissionCore::Create(rule);
  REQUIRE(core.ok());
  REQUIRE((*core)->RegisterType("clone", Type(capacity, capacity)).ok());
  return *std::move(core);
}

void Add(AdmissionCore& core, const std::string& key, const std::string& id, double now,
         double cost = 1) {
  REQUIRE(core.Enqueue({"clone", id, key, cost}, now).ok());
}

// Admits and completes one job at a time (each run costs what it was charged), `n` times or until
// nothing is pending; returns the keys admitted, in order.
std::vector<std::string> RunSerially(AdmissionCore& core, int n, double& now) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) {
    std::optional<core::Admission> a = core.NextAdmission(now);
    if (!a) break;
    keys.emplace_back(a->key);
    now += 1;
    REQUIRE(core.Complete(a->ticket, a->charge, now).ok());
  }
  return keys;
}

// Tenant "farm" spreads its backlog over 20 keys; three others have one key each.
std::map<std::string, int> AdmissionsByTenant(bool groups) {
  auto core = MakeCore();
  double now = 0;
  for (int k = 0; k < 20; ++k) {
    const std::string key = "farm-" + std::to_string(k);
    if (groups) REQUIRE(core->SetKeyGroup(key, "farm", now).ok());
    for (int j = 0; j < 30; ++j) Add(*core, key, key + "/" + std::to_string(j), now);
  }
  for (const std::string key : {"alice", "bob", "carol"}) {
    for (int j = 0; j < 200; ++j) Add(*core, key, key + "/" + std::to_string(j), now);
  }
  std::map<std::string, int> by_tenant;
  std::map<std::string, int> by_farm_key;
  for (const std::string& key : RunSerially(*core, 400, now)) {
    const bool farm = key.rfind("farm-", 0) == 0;
    ++by_tenant[farm ? "farm" : key];
    if (farm) ++by_farm_key[key];
  }
  // Within the farm (as among keys without groups), its keys take turns.
  for (const auto& [key, n] : by_farm_key) {
    CAPTURE(key);
    CHECK(n >= by_tenant["farm"] / 20);
    CHECK(n <= by_tenant["farm"] / 20 + 1);
  }
  REQUIRE(core->CheckInvariants().ok());
  return by_tenant;
}

TEST_CASE("Core.Groups.ATenantOfManyKeysGetsOneShareNotOnePerKey") {
  // Without groups, the 20 keys take 20 turns in 23: the farm gets most of the server.
  std::map<std::string, int> flat = AdmissionsByTenant(false);
  CHECK(flat["farm"] > 330);
  CHECK(flat["alice"] < 25);
  MESSAGE("400 clones without groups: farm ", flat["farm"], ", alice ", flat["alice"], ", bob ",
          flat["bob"], ", carol ", flat["carol"]);
  // In one group, the farm takes one turn in four, like each single-key tenant.
  std::map<std::string, int> grouped = AdmissionsByTenant(true);
  for (const std::string tenant : {"farm", "alice", "bob", "carol"}) {
    CAPTURE(tenant);
    CHECK(grouped[tenant] == 100);
  }
}

// The property of docs/ordering.md ("Groups"): over any window in which every tenant has work
// pending, tenant g's admitted cost A_g differs from its weighted share w_g / W * A of the
// window's admitted cost A by at most (1 - w_g / W + (k - 1) w_g / W) c_max (below 2 c_max), the
// first tenant spreading its deep backlog over many keys and the others with one key each.
// Returns the worst deviation seen, in units of the largest job cost.
double WorstDeviation(std::uint64_t seed, bool equal_costs, bool equal_weights) {
  std::mt19937_64 rng(seed);
  auto core = MakeCore();
  const int tenants = 2 + static_cast<int>(rng() % 4);
  std::vector<double> weights(tenants, 1.0);
  if (!equal_weights) {
    for (double& w : weights) w = 1 + static_cast<double>(rng() % 3);
  }
  double now = 0;
  double c_max = 0;
  std::map<std::string, int> tenant_of;
  int id = 0;
  for (int t = 0; t < tenants; ++t) {
    const std::string group = "t" + std::to_string(t);
    REQUIRE(core->SetGroupWeight(group, weights[t]).ok());
    const int keys = t == 0 ? 10 + static_cast<int>(rng() % 40) : 1;
    const int per_key = t == 0 ? 40 : 400;  // each tenant outlasts the run
    for (int k = 0; k < keys; ++k) {
      const std::string key = group + "-" + std::to_string(k);
      tenant_of[key] = t;
      REQUIRE(core->SetKeyGroup(key, group, now).ok());
      for (int j = 0; j < per_key; ++j) {
        const double cost = equal_costs ? 1.0 : 0.5 + static_cast<double>(rng() % 8) * 0.5;
        c_max = std::max(c_max, cost);
        Add(*core, key, std::to_string(id++), now, cost);
      }
    }
  }
  // A_g after each admission.
  std::vector<std::vector<double>> admitted(1, std::vector<double>(tenants, 0.0));
  for (int i = 0; i < 300; ++i) {
    std::optional<core::Admission> a = core->NextAdmission(now);
    REQUIRE(a.has_value());
    admitted.push_back(admitted.back());
    admitted.back()[tenant_of.at(std::string(a->key))] += a->charge;
    now += 1;
    REQUIRE(core->Complete(a->ticket, a->charge, now).ok());
  }
  REQUIRE(core->CheckInvariants().ok());
  double total_weight = 0;
  for (double w : weights) total_weight += w;
  double worst = 0;
  for (std::size_t s = 0; s < admitted.size(); ++s) {
    for (std::size_t t = s + 1; t < admitted.size(); ++t) {
      double window = 0;
      for (int g = 0; g < tenants; ++g) window += admitted[t][g] - admitted[s][g];
      for (int g = 0; g < tenants; ++g) {
        const double share = weights[g] / total_weight * window;
        worst = std::max(worst, std::abs(admitted[t][g] - admitted[s][g] - share) / c_max);
        const double bound = 1 - weights[g] / total_weight +
                             (tenants - 1) * weights[g] / total_weight;  // in units of c_max
        REQUIRE(std::abs(admitted[t][g] - admitted[s][g] - share) <= bound * c_max + 1e-9);
      }
    }
  }
  return worst;
}

TEST_CASE("Core.Groups.EachTenantsAdmittedCostStaysNearItsWeightedShareInEveryWindow") {
  double worst_equal = 0, worst_weighted = 0, worst_any = 0;
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    CAPTURE(seed);
    worst_equal = std::max(worst_equal, WorstDeviation(seed, true, true));
    worst_weighted = std::max(worst_weighted, WorstDeviation(seed, true, false));
    worst_any = std::max(worst_any, WorstDeviation(seed, false, false));
  }
  // Equal costs and weights: the tenants take turns, so no window is more than one job off.
  CHECK(worst_equal < 1);
  MESSAGE("worst deviation from the weighted share, in job costs: equal costs and weights ",
          worst_equal, ", equal costs ", worst_weighted, ", any ", worst_any);
}

TEST_CASE("Core.Groups.AKeyMovedToAnotherGroupTakesItsPendingJobsAndItsPlaceThere") {
  auto core = MakeCore();
  double now = 0;
  // Group "heavy" has been charged 10, group "light" 1; "solo" (a group of its own) 5.
  REQUIRE(core->SetKeyGroup("h", "heavy", now).ok());
  REQUIRE(core->SetKeyGroup("l", "light", now).ok());
  REQUIRE(core->Charge("h", 10, now).ok());
  REQUIRE(core->Charge("l", 1, now).ok());
  REQUIRE(core->Charge("solo", 5, now).ok());
  REQUIRE(core->SetKeyGroup("mover", "heavy", now).ok());
  Add(*core, "mover", "m1", now);
  Add(*core, "mover", "m2", now);
  Add(*core, "solo", "s1", now);
  // In "heavy" (10), the mover goes after "solo" (5).
  CHECK(core->GroupAccumulatedCost("heavy") == 10.0);
  // Moved with its jobs pending, to "light" (1): it goes first.
  REQUIRE(core->SetKeyGroup("mover", "light", now).ok());
  REQUIRE(core->CheckInvariants().ok());
  std::vector<std::string> order = RunSerially(*core, 3, now);
  CHECK(order == std::vector<std::string>{"mover", "mover", "solo"});
  // Its admissions were charged to "light", not "heavy".
  CHECK(core->GroupAccumulatedCost("light") == 3.0);
  CHECK(core->GroupAccumulatedCost("heavy") == 10.0);
  // Out of every group, it is a group of its own again (its own cost, 2).
  REQUIRE(core->SetKeyGroup("mover", "", now).ok());
  Add(*core, "mover", "m3", now);
  Add(*core, "l", "l1", now);  // "light" is at 3
  CHECK(RunSerially(*core, 2, now) == std::vector<std::string>{"mover", "l"});
  REQUIRE(core->CheckInvariants().ok());
}

// Shedding's choice (AdmissionCore::ShedHeaviest): the pending job whose group has consumed the
// most goes first, then within it the key's, then the latest; a key of no group is a group of its
// own.
TEST_CASE("Core.Groups.ShedHeaviestTakesTheHeaviestGroupsKeysLatestJobFirst") {
  auto core = MakeCore();
  double now = 0;
  // Group "farm" has consumed 20 in all, its key "f1" 2 of it; "solo" alone 10; "dev" 1.
  REQUIRE(core->SetKeyGroup("f1", "farm", now).ok());
  REQUIRE(core->SetKeyGroup("f2", "farm", now).ok());
  REQUIRE(core->Charge("f1", 2, now).ok());
  REQUIRE(core->Charge("f2", 18, now).ok());
  REQUIRE(core->Charge("solo", 10, now).ok());
  REQUIRE(core->Charge("dev", 1, now).ok());
  Add(*core, "dev", "d1", now);
  Add(*core, "solo", "s1", now);
  Add(*core, "f1", "a", now);
  now = 1;
  Add(*core, "f1", "b", now);
  // The farm (20) before solo (10), although f1's own cost (2) is below solo's; f1's latest first.
  std::vector<std::string> shed;
  for (int i = 0; i < 5; ++i) {
    auto job = core->ShedHeaviest("clone", now);
    REQUIRE(job.ok());
    if (!job->has_value()) break;
    shed.push_back((*job)->id);
    REQUIRE(core->CheckInvariants().ok());
  }
  CHECK(shed == std::vector<std::string>{"b", "a", "s1", "d1"});
  CHECK(core->pending_jobs() == 0);
  CHECK(core->ShedHeaviest("nope", now).status().code() == absl::StatusCode::kNotFound);
  // Shed jobs were charged nothing.
  CHECK(core->AccumulatedCost("f1") == 2.0);
}

TEST_CASE("Core.Groups.ARunningJobCountsInItsKeysGroupAndIsReconciledThere") {
  RuleOptions rule = RuleOptions::Seed();
  rule.reconcile = true;
  auto core = MakeCore(rule);
  double now = 0;
  REQUIRE(core->SetKeyGroup("k", "a", now).ok());
  REQUIRE(core->SetGroupWeight("b", 2).ok());
  Add(*core, "k", "j", now, 1);
  std::optional<core::Admission> a = core->NextAdmission(now);
  REQUIRE(a.has_value());
  CHECK(core->GroupAccumulatedCost("a") == 1.0);
  // Moved while its job runs: the job counts in "b" now, and "a" has nothing of the key's.
  REQUIRE(core->SetKeyGroup("k", "b", now).ok());
  REQUIRE(core->CheckInvariants().ok());
  // It ran 5 for a charge of 1: "b" is reconciled by (5 - 1) / its weight 2.
  REQUIRE(core->Complete(a->ticket, 5, now + 1).ok());
  CHECK(core->GroupAccumulatedCost("a") == 1.0);
  CHECK(core->GroupAccumulatedCost("b") == 2.0);
  REQUIRE(core->CheckInvariants().ok());
}

TEST_CASE("Core.Groups.AGroupAtItsMaxRunningHoldsAllItsKeysWhileOthersRun") {
  auto core = MakeCore(RuleOptions::Seed(), 4);
  AdmissionCore& c = *core;
  REQUIRE(c.SetGroupLimits("farm", GroupLimits{.max_running = 2}).ok());
  for (const std::string key : {"f1", "f2", "f3"}) {
    REQUIRE(c.SetKeyGroup(key, "farm", 0).ok());
    for (int j = 0; j < 2; ++j) Add(c, key, key + std::to_string(j), 0);
  }
  Add(c, "alice", "a0", 0);
  std::vector<core::Admission> running;
  while (std::optional<core::Admission> a = c.NextAdmission(0)) running.push_back(*a);
  // Two of the farm's (its limit) and alice's one: the fourth slot stays free, as nothing else
  // is admissible; each decision passed the farm's held stand-in over (counted as a key limit).
  REQUIRE(running.size() == 3);
  CHECK(std::count_if(running.begin(), running.end(),
                      [](const core::Admission& a) { return a.key[0] == 'f'; }) == 2);
  REQUIRE(c.CheckInvariants().ok());
  // A farm job ends: one more of the farm's starts.
  for (const core::Admission& a : running) {
    if (a.key[0] != 'f') continue;
    REQUIRE(c.Complete(a.ticket, 1, 1).ok());
    break;
  }
  std::optional<core::Admission> next = c.NextAdmission(1);
  REQUIRE(next.has_value());
  CHECK(next->key[0] == 'f');
  CHECK_FALSE(c.NextAdmission(1).has_value());
  // A higher limit lets the farm use the free slot.
  REQUIRE(c.SetGroupLimits("farm", GroupLimits{.max_running = 3}).ok());
  CHECK(c.NextAdmission(1).has_value());
  REQUIRE(c.CheckInvariants().ok());
}

TEST_CASE("Core.Groups.EveryGroupWithoutLimitsOfItsOwnHasTheRulesDefault") {
  RuleOptions rule = RuleOptions::Seed();
  rule.default_group_limits.max_running = 1;
  auto core = MakeCore(rule, 4);
  for (const std::string key : {"a1", "a2", "b1"}) {
    REQUIRE(core->SetKeyGroup(key, key.substr(0, 1), 0).ok());
    Add(*core, key, key, 0);
    Add(*core, key, key + "'", 0);
  }
  REQUIRE(core->SetGroupLimits("b", GroupLimits{.max_running = 2}).ok());  // b's own
  Add(*core, "loner", "l", 0);  // no group: no group's limit
  std::map<std::string, int> running;
  while (std::optional<core::Admission> a = core->NextAdmission(0))
    ++running[std::string(a->key.substr(0, 1))];
  CHECK(running["a"] == 1);
  CHECK(running["b"] == 2);
  CHECK(running["l"] == 1);
  REQUIRE(core->CheckInvariants().ok());
}

TEST_CASE("Core.Groups.AGroupBelowItsMinRunningGoesFirstWhateverItsCost") {
  auto core = MakeCore();
  double now = 0;
  REQUIRE(core->SetKeyGroup("f1", "farm", now).ok());
  REQUIRE(core->Charge("f1", 10, now).ok());  // the farm is far behind alice in cost
  REQUIRE(core->SetGroupLimits("farm", GroupLimits{.min_running = 1}).ok());
  Add(*core, "alice", "a1", now);
  Add(*core, "alice", "a2", now);
  Add(*core, "f1", "f", now);
  // Running nothing, the farm is reserved: it goes before alice, who is at cost 0.
  std::optional<core::Admission> a = core->NextAdmission(now);
  REQUIRE(a.has_value());
  CHECK(a->key == "f1");
  REQUIRE(core->CheckInvariants().ok());
}

TEST_CASE("Core.Groups.AGroupIdleForKeyTtlIsForgottenWithItsCost") {
  RuleOptions rule = RuleOptions::Seed();
  rule.key_ttl = Seconds(10);
  auto core = MakeCore(rule);
  REQUIRE(core->SetKeyGroup("k", "g", 0).ok());
  CHECK(core->groups_tracked() == 0);  // named, not yet tracked: nothing of it has run
  REQUIRE(core->Charge("k", 4, 1).ok());
  CHECK(core->GroupAccumulatedCost("g") == 4.0);
  Add(*core, "k", "j", 2);
  std::optional<core::Admission> a = core->NextAdmission(2);
  REQUIRE(a.has_value());
  REQUIRE(core->Complete(a->ticket, 1, 3).ok());  // idle from 3
  CHECK(core->Sweep(12.5).groups_evicted == 0);
  CHECK(core->Sweep(13).groups_evicted == 1);
  CHECK_FALSE(core->GroupAccumulatedCost("g").has_value());
  CHECK(core->groups_tracked() == 0);
  // Its weight and its keys stay: a new job tracks it again, from cost 0.
  Add(*core, "k", "j2", 20);
  CHECK(core->GroupAccumulatedCost("g") == 0.0);
}

// The fleet's share (SharedStore::ShareGroupCosts) sets a tracked group's cost to the fleet's:
// its keys' jobs take their places by it at once, in every lane set the group stands in.
TEST_CASE("Core.Groups.AGroupsCostSetFromOutsideReordersItsKeysJobs") {
  auto core = MakeCore(RuleOptions::Seed(), 2);
  REQUIRE(core->RegisterType("fetch", Type(2, 1)).ok());  // the clone's tier
  for (const std::string key : {"a1", "a2"}) REQUIRE(core->SetKeyGroup(key, "A", 0).ok());
  REQUIRE(core->SetKeyGroup("b1", "B", 0).ok());
  Add(*core, "a1", "a1-clone", 0);
  REQUIRE(core->Enqueue({"fetch", "a2-fetch", "a2", 1}, 0).ok());
  Add(*core, "b1", "b1-clone", 0);
  REQUIRE(core->Enqueue({"fetch", "b1-fetch", "b1", 1}, 0).ok());
  CHECK(core->SetGroupAccumulatedCost("A", 5).value() == true);
  CHECK(core->SetGroupAccumulatedCost("B", 2).value() == true);
  CHECK(core->SetGroupAccumulatedCost("C", 1).value() == false);  // not tracked: nothing done
  CHECK(core->SetGroupAccumulatedCost("A", -1).status().code() ==
        absl::StatusCode::kInvalidArgument);
  REQUIRE(core->CheckInvariants().ok());
  std::vector<SavedKey> groups = core->GroupCosts(0);
  std::sort(groups.begin(), groups.end(),
            [](const SavedKey& x, const SavedKey& y) { return x.key < y.key; });
  CHECK(groups == std::vector<SavedKey>{{"A", 5, 0}, {"B", 2, 0}});  // busy: idle since now
  // B (2) before A (5), in both types' lane sets.
  std::vector<std::string> order;
  for (int i = 0; i < 4; ++i) {
    std::optional<core::Admission> a = core->NextAdmission(1);
    REQUIRE(a.has_value());
    order.emplace_back(a->key);
    REQUIRE(core->Complete(a->ticket, 0, 1).ok());
  }
  CHECK(order == std::vector<std::string>{"b1", "b1", "a1", "a2"});
  REQUIRE(core->CheckInvariants().ok());
}

TEST_CASE("Core.Groups.ARulesGroupLastsWhileItsKeyIsTrackedAndACallersGroupWins") {
  RuleOptions rule = RuleOptions::Seed();
  rule.key_ttl = Seconds(10);
  auto core = MakeCore(rule);
  // The runtime asks its rule of a key it does not track, and says what it answered.
  CHECK(core->NeedsKeyGroup("10.0.0.1"));
  REQUIRE(core->SetKeyGroupByRule("10.0.0.1", "10.0.0").ok());
  Add(*core, "10.0.0.1", "j", 0);
  CHECK_FALSE(core->NeedsKeyGroup("10.0.0.1"));  // tracked: asked no more
  std::optional<core::Admission> a = core->NextAdmission(0);
  REQUIRE(a.has_value());
  CHECK(core->GroupAccumulatedCost("10.0.0") == 1.0);
  REQUIRE(core->Complete(a->ticket, 1, 1).ok());
  // Forgotten after key_ttl idle, the key forgets the rule's group with it (and the group, idle
  // as long, its cost): back without the rule, it is a group of its own.
  CHECK(core->Sweep(11).keys_evicted == 1);
  CHECK(core->NeedsKeyGroup("10.0.0.1"));
  Add(*core, "10.0.0.1", "j2", 12);
  CHECK_FALSE(core->GroupAccumulatedCost("10.0.0").has_value());
  // A group the caller named is never the rule's to change, nor a "none" the caller set.
  REQUIRE(core->SetKeyGroup("k", "mine", 12).ok());
  REQUIRE(core->SetKeyGroup("loner", "", 12).ok());
  CHECK_FALSE(core->NeedsKeyGroup("k"));
  CHECK_FALSE(core->NeedsKeyGroup("loner"));
  REQUIRE(core->SetKeyGroupByRule("k", "theirs").ok());
  Add(*core, "k", "k1", 12);
  CHECK(core->GroupAccumulatedCost("mine") == 0.0);
  CHECK_FALSE(core->GroupAccumulatedCost("theirs").has_value());
  // A tracked key's group is no rule's to set.
  CHECK(core->SetKeyGroupByRule("10.0.0.1", "10.0.0").code() ==
        absl::StatusCode::kFailedPrecondition);
  REQUIRE(core->CheckInvariants().ok());
}

TEST_CASE("Core.Groups.ARulesAnswerForKeysNeverKeptLeavesNothingBehind") {
  RuleOptions rule = RuleOptions::Seed();
  rule.key_ttl = Seconds(10);
  auto core = MakeCore(rule);
  // The runtime asks its rule of a key, the call is then refused before the key is tracked, and
  // it drops the answer (AdmissionTable's refusal paths): a flood of such keys keeps nothing.
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250);
    REQUIRE(core->SetKeyGroupByRule(key, "10.0." + std::to_string(i / 250)).ok());
    core->ForgetKeyGroupByRule(key);
  }
  CHECK(core->key_settings_kept() == 0);
  // A caller's settings are kept whatever the rule; a tracked key's rule group is kept until
  // its eviction.
  REQUIRE(core->SetKeyWeight("mine", 2).ok());
  REQUIRE(core->SetKeyGroupByRule("10.1.0.1", "10.1.0").ok());
  Add(*core, "10.1.0.1", "j", 0);
  core->ForgetKeyGroupByRule("10.1.0.1");  // tracked: not forgotten
  core->ForgetKeyGroupByRule("mine");      // the caller's: not forgotten
  CHECK(core->key_settings_kept() == 2);
  std::optional<core::Admission> a = core->NextAdmission(0);
  REQUIRE(a.has_value());
  REQUIRE(core->Complete(a->ticket, 1, 1).ok());
  CHECK(core->Sweep(11).keys_evicted == 1);
  CHECK(core->key_settings_kept() == 1);
}

TEST_CASE("Core.Groups.BadInputIsRefusedWithAStatusThatSaysWhat") {
  auto core = MakeCore();
  for (double weight : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                        std::numeric_limits<double>::quiet_NaN()}) {
    const Status s = core->SetGroupWeight("g", weight);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(s.message()).find("group weight") != std::string::npos);
  }
  CHECK(core->SetGroupWeight("", 2).code() == absl::StatusCode::kInvalidArgument);
  for (const GroupLimits& limits :
       {GroupLimits{.max_running = 0}, GroupLimits{.max_running = 2, .min_running = 3},
        GroupLimits{.min_running = -1}}) {
    const Status s = core->SetGroupLimits("g", limits);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(s.message()).find("group's m") != std::string::npos);
  }
  CHECK(core->SetKeyGroup("k", "g", std::numeric_limits<double>::quiet_NaN()).code() ==
        absl::StatusCode::kInvalidArgument);
  RuleOptions bad_default = RuleOptions::Seed();
  bad_default.default_group_limits.max_running = 0;
  const auto refused = AdmissionCore::Create(bad_default);
  REQUIRE_FALSE(refused.ok());
  CHECK(std::string(refused.status().message()).find("rule.default_group_limits") !=
        std::string::npos);
}

// Idle catch-up with groups (docs/ordering.md, "Groups"): a group that returns from idle starts
// at no less than the least cost among the groups (and keys without one) waiting in the tier;
// a key that returns, at no less than the least among its own group's keys waiting there. So a
// tenant that slept does not take every turn when it wakes, and neither does a new key of a
// busy tenant inside it.
TEST_CASE("Core.Groups.IdleCatchUpIsAmongGroupsThenAmongAGroupsKeys") {
  RuleOptions rule = RuleOptions::Seed();
  rule.idle_catch_up = true;
  auto core = MakeCore(rule);
  double now = 0;
  for (const std::string key : {"a1", "a2", "a3"}) REQUIRE(core->SetKeyGroup(key, "A", 0).ok());
  REQUIRE(core->SetKeyGroup("b1", "B", 0).ok());
  // The lone key "solo" and A's a1 have run and wait again; B never ran.
  REQUIRE(core->Charge("a1", 10, now).ok());  // a1 10, A 10
  REQUIRE(core->Charge("solo", 6, now).ok());
  Add(*core, "solo", "solo-j", now);  // nothing waits: stays at 6
  Add(*core, "a1", "a1-j", now);      // A wakes above the least (6): stays at 10
  CHECK(core->AccumulatedCost("solo") == 6.0);
  CHECK(core->GroupAccumulatedCost("A") == 10.0);
  // B wakes: it starts at the least of A (10) and solo (6), and b1 with it (b1 is B's only key).
  Add(*core, "b1", "b1-j", now);
  CHECK(core->GroupAccumulatedCost("B") == 6.0);
  CHECK(core->AccumulatedCost("b1") == 0.0);  // B had no key waiting: nothing to catch up to
  // a2 wakes inside A, which is busy: A keeps its cost, a2 starts at a1's 10.
  Add(*core, "a2", "a2-j", now);
  CHECK(core->GroupAccumulatedCost("A") == 10.0);
  CHECK(core->AccumulatedCost("a2") == 10.0);
  // A group's cost set from outside (the fleet's) is the one the next wake reads.
  REQUIRE(core->SetGroupAccumulatedCost("A", 3).value());
  REQUIRE(core->CheckInvariants().ok());
  Add(*core, "newcomer", "n-j", now);  // no group: the least of A (3), B (6), solo (6)
  CHECK(core->AccumulatedCost("newcomer") == 3.0);
  CHECK(RunSerially(*core, 6, now).size() == 5);
  REQUIRE(core->CheckInvariants().ok());
}

}  // namespace groups_test
}  // namespace
}  // namespace fairgate
