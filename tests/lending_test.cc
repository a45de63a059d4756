// Tiers that lend idle slots (RuleOptions::lending; docs/ordering.md, "Lending"): a tier of
// priority 1 uses an idle server up to the slots kept back, a job of another tier takes those at
// once, the bound on what borrowers do to a job that waits for the global cap, the refusal of a
// bad share, and a scheduler's count of its borrowers. The differential tests hold the core to the
// reference model with and without lending.
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/admission_core.h"
#include "doctest/doctest.h"
#include "fairgate/options.h"
#include "fairgate/scheduler.h"
#include "runtime_test_util.h"
#include "test_job_types.h"

namespace fairgate {
namespace {
namespace lending_test {

using core::AdmissionCore;
using testing::Type;

std::unique_ptr<AdmissionCore> MakeCore(const RuleOptions& rule) {
  auto core = AdmissionCore::Create(rule);
  REQUIRE_MESSAGE(core.ok(), core.status().message());
  return *std::move(core);
}

RuleOptions Lending(int capacity, std::optional<TierLending> lending) {
  RuleOptions rule;
  rule.max_concurrency = capacity;
  rule.lending = lending;
  return rule;
}

// Whether each admission NextAdmission(now) makes, until it admits nothing, borrowed its slot.
std::vector<bool> AdmitAll(AdmissionCore& core, double now) {
  std::vector<bool> borrowed;
  while (std::optional<core::Admission> a = core.NextAdmission(now))
    borrowed.push_back(a->borrowed);
  return borrowed;
}

void Enqueue(AdmissionCore& core, std::string_view type, int n, double now) {
  for (int i = 0; i < n; ++i) {
    const std::string id = std::string(type) + std::to_string(i);
    REQUIRE(core.Enqueue({type, id, "k"}, now).ok());
  }
}

TEST_CASE("Lending.ATypeOfPriorityOneUsesAnIdleServerUpToTheSlotsKeptBack") {
  // 8 slots, a quarter kept back: 2. The tier's own slot, then 5 borrowers (6 + 1 > 8 - 2).
  auto core = MakeCore(Lending(8, TierLending{}));
  REQUIRE(core->RegisterType("report", Type(1, 8)).ok());
  Enqueue(*core, "report", 10, 0);
  CHECK(AdmitAll(*core, 0) == std::vector<bool>{false, true, true, true, true, true});
  CHECK(core->TakeSnapshot(0).tiers[0].slots_in_use == 6);
  CHECK(core->CheckInvariants().ok());

  // The default rule lends; seed mode and a rule without lending keep the tier at its cap.
  CHECK(RuleOptions().lending == TierLending{0.25});
  CHECK_FALSE(RuleOptions::Seed().lending.has_value());
  for (const RuleOptions& off : {Lending(8, std::nullopt), RuleOptions::Seed()}) {
    RuleOptions rule = off;
    rule.max_concurrency = 8;
    auto strict = MakeCore(rule);
    REQUIRE(strict->RegisterType("report", Type(1, 8)).ok());
    Enqueue(*strict, "report", 10, 0);
    CHECK(AdmitAll(*strict, 0) == std::vector<bool>{false});
  }

  // Nothing kept back: every slot; a share rounded down: floor(0.34 * 8) = 2 kept.
  auto all = MakeCore(Lending(8, TierLending{0}));
  REQUIRE(all->RegisterType("report", Type(1, 8)).ok());
  Enqueue(*all, "report", 10, 0);
  CHECK(AdmitAll(*all, 0).size() == 8);
  auto rounded = MakeCore(Lending(8, TierLending{0.34}));
  REQUIRE(rounded->RegisterType("report", Type(1, 8)).ok());
  Enqueue(*rounded, "report", 10, 0);
  CHECK(AdmitAll(*rounded, 0).size() == 6);
}

TEST_CASE("Lending.ABorrowerIsHeldByItsTypesCapAndTheCapacityInForce") {
  auto core = MakeCore(Lending(8, TierLending{}));
  REQUIRE(core->RegisterType("report", Type(1, 3)).ok());  // its own cap: 3 jobs
  Enqueue(*core, "report", 10, 0);
  CHECK(AdmitAll(*core, 0) == std::vector<bool>{false, true, true});

  // A lower capacity keeps back its own share: 4 slots, 1 kept back, so 3 run.
  auto lowered = MakeCore(Lending(8, TierLending{}));
  REQUIRE(lowered->SetCapacity(4).ok());
  REQUIRE(lowered->RegisterType("report", Type(1, 8)).ok());
  Enqueue(*lowered, "report", 10, 0);
  CHECK(AdmitAll(*lowered, 0).size() == 3);
  CHECK(lowered->CheckInvariants().ok());
}

TEST_CASE("Lending.AJobOfAnotherTierTakesTheSlotsKeptBackAtOnce") {
  auto core = MakeCore(Lending(8, TierLending{}));
  REQUIRE(core->RegisterType("report", Type(1, 8)).ok());
  REQUIRE(core->RegisterType("clone", Type(8, 8)).ok());
  Enqueue(*core, "report", 10, 0);
  REQUIRE(AdmitAll(*core, 0).size() == 6);
  // Two clones fit the kept-back slots, within their tier's cap: not borrowers.
  Enqueue(*core, "clone", 3, 1);
  CHECK(AdmitAll(*core, 1) == std::vector<bool>{false, false});
  // The fast path (nothing else pending) admits a borrower as NextAdmission would.
  auto idle = MakeCore(Lending(8, TierLending{}));
  REQUIRE(idle->RegisterType("report", Type(1, 8)).ok());
  std::optional<core::Admission> first, second;
  REQUIRE(idle->EnqueueAndAdmit({"report", "r0", "k"}, 0, first).ok());
  REQUIRE(idle->EnqueueAndAdmit({"report", "r1", "k"}, 0, second).ok());
  REQUIRE(first.has_value());
  REQUIRE(second.has_value());
  CHECK_FALSE(first->borrowed);
  CHECK(second->borrowed);
  CHECK(idle->CheckInvariants().ok());
}

// The bound of docs/ordering.md: a borrower starts only at a decision where no job is admissible
// within its tier's cap, and leaves floor(kept_back * C) slots free; so no borrower starts while a
// job of at most kept-back + 1 slots waits for nothing but the global cap. Random workloads of
// three tiers, one- and two-slot types, random capacities and shares; at each borrower's
// admission, every pending job is checked from the outside (what runs, by tier and type).
TEST_CASE("Lending.NoBorrowerStartsWhileAJobThatFitsTheSlotsKeptBackWaitsForTheGlobalCapAlone") {
  struct Kind {
    const char* name;
    JobTypeConfig config;
  };
  const std::vector<Kind> kinds = {
      {"low", {.max_concurrency = 6, .priority = 1}},
      {"wide", {.max_concurrency = 3, .priority = 2, .slots = 2}},
      {"mid", {.max_concurrency = 2, .priority = 2}},
      {"high", {.max_concurrency = 6, .priority = 4}},
  };
  long borrowers = 0, waits_checked = 0;
  for (std::uint32_t seed = 1; seed <= 300; ++seed) {
    CAPTURE(seed);
    std::mt19937 random(seed);
    auto draw = [&](int low, int high) {
      return std::uniform_int_distribution<int>(low, high)(random);
    };
    const int capacity = draw(2, 8);
    const double share = std::vector<double>{0, 0.25, 0.34, 0.5}[draw(0, 3)];
    const int kept = static_cast<int>(std::floor(share * capacity));
    auto core = MakeCore(Lending(capacity, TierLending{share}));
    for (const Kind& kind : kinds) REQUIRE(core->RegisterType(kind.name, kind.config).ok());
    // By the ticket's slot, which no two live jobs share.
    std::map<std::uint32_t, const Kind*> pending;
    std::map<std::uint32_t, std::pair<core::JobTicket, const Kind*>> running;
    auto running_slots = [&](auto pick) {
      int n = 0;
      for (const auto& [slot, job] : running) n += pick(*job.second) ? job.second->config.slots : 0;
      return n;
    };
    double now = 0;
    for (int step = 0; step < 200; ++step) {
      now += 0.5;
      if (draw(0, 2) != 0 || running.empty()) {
        const Kind& kind = kinds[draw(0, static_cast<int>(kinds.size()) - 1)];
        const std::string key = "k" + std::to_string(draw(0, 3));
        StatusOr<core::JobTicket> t = core->Enqueue({kind.name, std::to_string(step), key}, now);
        REQUIRE(t.ok());
        pending[t->slot] = &kind;
      } else {
        auto it = std::next(running.begin(), draw(0, static_cast<int>(running.size()) - 1));
        REQUIRE(core->Complete(it->second.first, 1, now).ok());
        running.erase(it);
      }
      while (std::optional<core::Admission> a = core->NextAdmission(now)) {
        const Kind* kind = pending.at(a->ticket.slot);
        const int tier_slots = running_slots(
            [&](const Kind& k) { return k.config.priority == kind->config.priority; });
        const int all_slots = running_slots([](const Kind&) { return true; });
        if (!a->borrowed) {
          CHECK(tier_slots + kind->config.slots <= kind->config.priority);
        } else {
          ++borrowers;
          CHECK(tier_slots + kind->config.slots > kind->config.priority);
          CHECK(all_slots + kind->config.slots <= capacity - kept);
          // No pending job with room in its tier's and type's caps and at most kept + 1 slots:
          // such a job would fit the global cap here, and would have gone first.
          for (const auto& [slot, other] : pending) {
            if (slot == a->ticket.slot) continue;
            const int other_tier = running_slots(
                [&](const Kind& k) { return k.config.priority == other->config.priority; });
            const int other_type =
                running_slots([&](const Kind& k) { return &k == other; }) / other->config.slots;
            const bool waits_for_global_cap_alone =
                other_tier + other->config.slots <= other->config.priority &&
                other_type < other->config.max_concurrency;
            if (other->config.slots <= kept + 1) {
              ++waits_checked;
              CHECK_FALSE(waits_for_global_cap_alone);
            }
          }
        }
        running[a->ticket.slot] = {a->ticket, kind};
        pending.erase(a->ticket.slot);
      }
      REQUIRE(core->CheckInvariants().ok());
    }
  }
  // The workloads must make borrowers, and pending jobs beside them, for the check to mean much.
  CHECK(borrowers > 1000);
  CHECK(waits_checked > 1000);
  MESSAGE("borrowers ", borrowers, ", pending jobs checked beside them ", waits_checked);
}

TEST_CASE("Lending.ABadShareIsRefusedNamingItsField") {
  for (const double bad : {-0.1, 1.0, 2.0, std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(bad);
    SchedulerOptions options;
    options.rule.lending = TierLending{bad};
    const Status status = ValidateOptions(options);
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(status.message().find("rule.lending.kept_back must be in [0, 1)") == 0);
    CHECK(AdmissionCore::Create(options.rule).status().code() ==
          absl::StatusCode::kInvalidArgument);
  }
}

TEST_SUITE_BEGIN("runtime");

// A scheduler of 4 slots with the default rule (a quarter kept back: 1) and a type registered
// with the defaults (no cap of its own, priority 1): four RunSync callers, three of them run at
// once, two as borrowers; the fourth waits. Nothing is warned of. The snapshot, the metrics and
// the evidence count the borrowers.
TEST_CASE("Scheduler.Lending.ATypeRegisteredWithTheDefaultsRunsOnTheIdleSlotsButTheOneKeptBack") {
  SchedulerOptions options;
  options.rule.max_concurrency = 4;
  std::atomic<int> borrowed_evidence{0};
  options.runtime.evidence = [&](const AdmissionEvidence& e) { borrowed_evidence += e.borrowed; };
  auto warnings = std::make_shared<std::vector<std::string>>();
  options.runtime.warn = [warnings](std::string_view w) { warnings->emplace_back(w); };
  auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE(created.ok());
  Scheduler& scheduler = **created;
  REQUIRE(scheduler.RegisterType("report", {}).ok());
  CHECK(warnings->empty());
  std::atomic<int> inside{0};
  std::atomic<bool> release{false};
  std::vector<std::thread> callers;
  for (int i = 0; i < 4; ++i) {
    callers.emplace_back([&, i] {
      const Status s =
          scheduler.RunSync(Context::Background(),
                            {TypeName("report"), JobId("r" + std::to_string(i)), FairnessKey("k")},
                            [&](const Context&) {
                              ++inside;
                              testing::Eventually([&] { return release.load(); });
                              return absl::OkStatus();
                            });
      CHECK(s.ok());
    });
  }
  REQUIRE(testing::Eventually([&] {
    const Snapshot s = scheduler.Snapshot();
    return inside.load() == 3 && s.pending == 1;
  }));
  const Snapshot s = scheduler.Snapshot();
  CHECK(s.running == 3);
  CHECK(s.types[0].borrowed == 2);
  CHECK(s.tiers[0].slots_in_use == 3);  // over the tier's cap of 1
  std::string metrics;
  scheduler.WriteMetrics(metrics);
  CHECK(metrics.find("fairgate_jobs_borrowed_total{tier=\"1\",type=\"report\"} 2") !=
        std::string::npos);
  release = true;
  for (std::thread& t : callers) t.join();
  CHECK(inside.load() == 4);
  REQUIRE(scheduler.Shutdown(Context::Background()).ok());
  CHECK(borrowed_evidence.load() >= 2);  // the fourth may have borrowed as well, or not
}

TEST_SUITE_END();

}  // namespace lending_test
}  // namespace
}  // namespace fairgate
