// The recipe for a new constraint (core/constraints.h, src/core/README.md), held to: one row per
// constraint of the one list, each a job of a type that would share its tier's lanes with a
// sibling type (one slot a job, a max_concurrency at least its tier's cap) unless the recipe
// says otherwise, held back by that constraint while the sibling's jobs of the same tier and key
// run, and admitted once the constraint has room. A Blocker without a row does not compile
// (the static_assert below), and a type-level one without its case in TypeTable::SharingMaySkip
// does not either (-Werror=switch): a constraint added as the recipe says is honoured by sharing
// types.
#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <set>
#include <string_view>

#include "core/admission_core.h"
#include "doctest/doctest.h"
#include "test_job_types.h"

namespace fairgate::core {
namespace {
namespace constraint_recipe_test {

using testing::Type;

std::unique_ptr<AdmissionCore> MakeCore(int max_concurrency = 8, RateLimit rate_limit = {}) {
  RuleOptions rule = RuleOptions::Seed();
  rule.max_concurrency = max_concurrency;
  rule.rate_limit = rate_limit;
  auto core = AdmissionCore::Create(rule);
  REQUIRE(core.ok());
  REQUIRE((*core)->RegisterType("sibling", Type(2, 2)).ok());  // shares tier 2's lanes
  return *std::move(core);
}

JobTicket Add(AdmissionCore& core, std::string_view type, std::string_view id = "x",
              std::string_view key = "k") {
  StatusOr<JobTicket> ticket = core.Enqueue({type, id, key}, 0);
  REQUIRE_MESSAGE(ticket.ok(), ticket.status().message());
  return *ticket;
}

// Admits everything admissible: `held` must not be among it, `sibling` (if given) must. Then
// `release` gives the constraint room, and `held` must be admitted.
void HeldUntilReleased(AdmissionCore& core, JobTicket held, std::optional<JobTicket> sibling,
                       const std::function<void()>& release) {
  bool sibling_ran = false;
  while (std::optional<Admission> a = core.NextAdmission(0)) {
    CHECK_FALSE(a->ticket == held);
    sibling_ran |= sibling.has_value() && a->ticket == *sibling;
  }
  CHECK(sibling_ran == sibling.has_value());
  REQUIRE(core.Describe(held).has_value());
  CHECK_FALSE(core.Describe(held)->running);
  CHECK(core.CheckInvariants().ok());
  release();
  bool held_ran = false;
  while (std::optional<Admission> a = core.NextAdmission(1)) held_ran |= a->ticket == held;
  CHECK(held_ran);
  CHECK(core.CheckInvariants().ok());
}

void Complete(AdmissionCore& core, JobTicket ticket) { REQUIRE(core.Complete(ticket, 1, 1).ok()); }

struct Row {
  Blocker blocker;
  std::function<void()> run;
};

const std::array kRows = {
    Row{Blocker::kTypePaused,
        [] {
          auto core = MakeCore();
          REQUIRE(core->RegisterType("held", Type(2, 2)).ok());
          const JobTicket held = Add(*core, "held");
          const JobTicket sibling = Add(*core, "sibling");
          REQUIRE(core->PauseType("held", 0).ok());
          HeldUntilReleased(*core, held, sibling,
                            [&] { REQUIRE(core->ResumeType("held", 1).ok()); });
        }},
    Row{Blocker::kTierCap,
        [] {
          auto core = MakeCore();
          REQUIRE(core->RegisterType("held", Type(2, 2)).ok());
          const JobTicket first = Add(*core, "sibling");
          Add(*core, "sibling");  // the tier's two slots go to these
          const JobTicket held = Add(*core, "held");
          HeldUntilReleased(*core, held, first, [&] { Complete(*core, first); });
        }},
    Row{Blocker::kGlobalCap,
        [] {
          auto core = MakeCore(/*max_concurrency=*/1);
          REQUIRE(core->RegisterType("held", Type(2, 2)).ok());
          const JobTicket sibling = Add(*core, "sibling");  // takes the one global slot
          const JobTicket held = Add(*core, "held");
          HeldUntilReleased(*core, held, sibling, [&] { Complete(*core, sibling); });
        }},
    Row{Blocker::kTypeCap,
        [] {
          // Its cap below its tier's: the recipe keeps it out of the shared set.
          auto core = MakeCore();
          REQUIRE(core->RegisterType("held", Type(2, 1)).ok());
          const JobTicket first = Add(*core, "held");
          const JobTicket held = Add(*core, "held");
          const JobTicket sibling = Add(*core, "sibling");
          REQUIRE(core->NextAdmission(0)->ticket == first);
          HeldUntilReleased(*core, held, sibling, [&] { Complete(*core, first); });
        }},
    // The rates' rows: NextAdmission(1) comes a second after the decisions at 0, when the next
    // token of a bucket of one a second is due; nothing else releases them.
    Row{Blocker::kGlobalRate,
        [] {
          auto core = MakeCore(8, RateLimit{.per_second = 1, .burst = 1});
          REQUIRE(core->RegisterType("held", Type(2, 2)).ok());
          const JobTicket first = Add(*core, "held");
          const JobTicket held = Add(*core, "held");
          REQUIRE(core->NextAdmission(0)->ticket == first);  // the bucket's one token
          CHECK(core->NextTokenAt(0) == 1.0);
          HeldUntilReleased(*core, held, std::nullopt, [] {});
        }},
    Row{Blocker::kTypeRate,
        [] {
          // With a rate of its own, it keeps lanes of its own (the recipe's step 4).
          auto core = MakeCore();
          JobTypeConfig config = Type(2, 2);
          config.rate_limit = {.per_second = 1, .burst = 1};
          REQUIRE(core->RegisterType("held", config).ok());
          const JobTicket first = Add(*core, "held");
          const JobTicket held = Add(*core, "held");
          const JobTicket sibling = Add(*core, "sibling");
          REQUIRE(core->NextAdmission(0)->ticket == first);
          Complete(*core, first);  // the tier's slots free again: only the rate holds `held`
          CHECK(core->NextTokenAt(0) == 1.0);
          HeldUntilReleased(*core, held, sibling, [] {});
        }},
    Row{Blocker::kNoWorker,
        [] {
          auto core = MakeCore();
          REQUIRE(core->RegisterType("held", Type(2, 2)).ok());
          REQUIRE(core->AddWorker("w", WorkerConfig{.slots = 2, .types = {"sibling"}}).ok());
          const JobTicket held = Add(*core, "held");
          const JobTicket sibling = Add(*core, "sibling");
          HeldUntilReleased(*core, held, sibling, [&] {
            REQUIRE(core->AddWorker("v", WorkerConfig{.slots = 1, .types = {"held"}}).ok());
          });
        }},
    Row{Blocker::kKeyPaused,
        [] {
          auto core = MakeCore();
          REQUIRE(core->RegisterType("held", Type(2, 2)).ok());
          const JobTicket held = Add(*core, "held", "x", "paused");
          const JobTicket sibling = Add(*core, "sibling");
          REQUIRE(core->PauseKey("paused", 0).ok());
          HeldUntilReleased(*core, held, sibling,
                            [&] { REQUIRE(core->ResumeKey("paused", 1).ok()); });
        }},
    Row{Blocker::kKeyLimit,
        [] {
          auto core = MakeCore();
          REQUIRE(core->RegisterType("held", Type(2, 2)).ok());
          REQUIRE(core->SetKeyLimits("k", KeyLimits{.max_running = 1}).ok());
          const JobTicket sibling = Add(*core, "sibling");
          const JobTicket held = Add(*core, "held");
          HeldUntilReleased(*core, held, sibling, [&] { Complete(*core, sibling); });
        }},
    Row{Blocker::kKeyRate,
        [] {
          // The key took its one token at 0; another key's job goes meanwhile; the token is due
          // at 1, when NextAdmission(1) comes.
          auto core = MakeCore();
          REQUIRE(core->RegisterType("held", Type(2, 2)).ok());
          REQUIRE(core->SetKeyLimits("k", KeyLimits{.rate_limit = {1, 1}}).ok());
          const JobTicket first = Add(*core, "held");
          const JobTicket held = Add(*core, "held");
          const JobTicket sibling = Add(*core, "sibling", "y", "other");
          REQUIRE(core->NextAdmission(0)->ticket == first);
          Complete(*core, first);
          CHECK(core->NextTokenAt(0) == 1.0);
          HeldUntilReleased(*core, held, sibling, [] {});
        }},
    Row{Blocker::kGroupLimit,
        [] {
          // Keys "k" and "other" of one group that runs one job at a time.
          auto core = MakeCore();
          REQUIRE(core->RegisterType("held", Type(2, 2)).ok());
          REQUIRE(core->SetGroupLimits("g", GroupLimits{.max_running = 1}).ok());
          REQUIRE(core->SetKeyGroup("k", "g", 0).ok());
          REQUIRE(core->SetKeyGroup("other", "g", 0).ok());
          const JobTicket sibling = Add(*core, "sibling", "y", "other");
          const JobTicket held = Add(*core, "held");
          HeldUntilReleased(*core, held, sibling, [&] { Complete(*core, sibling); });
        }},
    Row{Blocker::kConflictLimit,
        [] {
          auto core = MakeCore();
          REQUIRE(core->RegisterType("held", Type(2, 2, "repo")).ok());
          const JobTicket first = Add(*core, "held", "x");
          const JobTicket held = Add(*core, "held", "x");
          const JobTicket sibling = Add(*core, "sibling", "x");
          REQUIRE(core->NextAdmission(0)->ticket == first);
          HeldUntilReleased(*core, held, sibling, [&] { Complete(*core, first); });
        }},
};

// One row for every Blocker but kNone: a new constraint needs its row to compile.
static_assert(kRows.size() == static_cast<std::size_t>(Blocker::kCount) - 1);

TEST_CASE("Core.ConstraintRecipe.EveryConstraintHasItsRowOnce") {
  std::set<Blocker> seen;
  for (const Row& row : kRows) {
    CHECK(row.blocker != Blocker::kNone);
    CHECK(seen.insert(row.blocker).second);
  }
}

TEST_CASE("Core.ConstraintRecipe.EachConstraintHoldsBackATypeThatWouldShare") {
  for (const Row& row : kRows) {
    CAPTURE(static_cast<int>(row.blocker));
    row.run();
  }
}

}  // namespace constraint_recipe_test
}  // namespace
}  // namespace fairgate::core
