// The shared store's claim rule for jobs that take fleet-wide leases (store/claim_planner.h),
// without a server: which candidates a claim takes, and the order it takes their leases in. The
// PostgreSQL store's tests (postgres_store_test.cc) run the same rule against the database.
#include "store/claim_planner.h"

#include <string>
#include <utility>
#include <vector>

#include "doctest/doctest.h"

namespace fairgate::store {
namespace {
namespace claim_planner_test {

ClaimCandidate Job(std::uint64_t sequence, std::vector<LeaseNeed> needs = {}) {
  return {sequence, std::move(needs)};
}

// The sequences of the chosen candidates, in the plan's order.
std::vector<std::uint64_t> Chosen(const std::vector<ClaimCandidate>& candidates,
                                  const ClaimPlan& plan) {
  std::vector<std::uint64_t> out;
  for (std::size_t i : plan.chosen) out.push_back(candidates[i].sequence);
  return out;
}

// Each take as "sequence:group/id", in the plan's order.
std::vector<std::string> Takes(const std::vector<ClaimCandidate>& candidates,
                               const ClaimPlan& plan) {
  std::vector<std::string> out;
  for (const ClaimPlan::Take& t : plan.takes) {
    const ClaimCandidate& c = candidates[plan.chosen[t.job]];
    out.push_back(std::to_string(c.sequence) + ":" + c.needs[t.need].group + "/" +
                  c.needs[t.need].id);
  }
  return out;
}

using Sequences = std::vector<std::uint64_t>;
using Names = std::vector<std::string>;

TEST_CASE("ClaimPlanner.TakesTheFirstMaxJobsInClaimOrderWhenEveryLeaseIsFree") {
  const std::vector<ClaimCandidate> candidates = {Job(7, {{"git", "a"}}), Job(3, {{"git", "b"}}),
                                                  Job(9), Job(4, {{"git", "c"}})};
  const ClaimPlan plan = PlanClaim(candidates, {}, 3);
  CHECK(Chosen(candidates, plan) == Sequences{7, 3, 9});
  CHECK(Takes(candidates, plan) == Names{"7:git/a", "3:git/b"});
}

TEST_CASE("ClaimPlanner.PassesOverAJobWhoseResourceIsFullAndTakesTheNext") {
  const std::vector<ClaimCandidate> candidates = {Job(1, {{"git", "busy"}}),
                                                  Job(2, {{"git", "free"}})};
  HeldSlots held;
  held[{"git", "busy"}] = 1;
  CHECK(Chosen(candidates, PlanClaim(candidates, held, 2)) == Sequences{2});
}

TEST_CASE("ClaimPlanner.CountsTheSlotsOfTheJobsItTakes") {
  // Three jobs on one repository of two slots, one held elsewhere: one more fits.
  const std::vector<ClaimCandidate> candidates = {
      Job(1, {{"git", "r", 2}}), Job(2, {{"git", "r", 2}}), Job(3, {{"git", "s", 2}})};
  HeldSlots held;
  held[{"git", "r"}] = 1;
  CHECK(Chosen(candidates, PlanClaim(candidates, held, 10)) == Sequences{1, 3});
}

TEST_CASE("ClaimPlanner.AJobNeedsEveryLeaseItNamesItsCapsSlotAndItsResource") {
  const std::vector<ClaimCandidate> candidates = {
      Job(1, {{"cap", "gc", 1}, {"git", "a"}}),  // the cap is full: passed over
      Job(2, {{"cap", "clone", 2}, {"git", "b"}}),
      Job(3, {{"cap", "clone", 2}, {"git", "b"}}),  // its resource went to job 2
      Job(4, {{"cap", "clone", 2}, {"git", "c"}}),
      Job(5, {{"cap", "clone", 2}, {"git", "d"}})};  // the cap's two slots went to 2 and 4
  HeldSlots held;
  held[{"cap", "gc"}] = 1;
  CHECK(Chosen(candidates, PlanClaim(candidates, held, 10)) == Sequences{2, 4});
}

TEST_CASE("ClaimPlanner.TakesNoMoreOfATypeThanItsBoundAndPassesOnToTheOthers") {
  // Type 0 bounded to one job (a replica that can run one more of a capped type), type 1 not
  // bounded, type 2 bounded by 0 (no bound).
  auto typed = [](std::uint64_t sequence, std::size_t type) {
    ClaimCandidate c = Job(sequence, {{"cap", "t" + std::to_string(type), 10}});
    c.type = type;
    return c;
  };
  const std::vector<ClaimCandidate> candidates = {
      typed(1, 0), typed(2, 0), typed(3, 1), typed(4, 0), typed(5, 1), typed(6, 2), typed(7, 2)};
  CHECK(Chosen(candidates, PlanClaim(candidates, {}, 10, {1, 0, 0})) == Sequences{1, 3, 5, 6, 7});
  CHECK(Chosen(candidates, PlanClaim(candidates, {}, 3, {2})) == Sequences{1, 2, 3});
  // A job of a bounded type passed over takes none of its leases' slots.
  HeldSlots held;
  held[{"cap", "t0"}] = 9;
  CHECK(Chosen(candidates, PlanClaim(candidates, held, 10, {2})) == Sequences{1, 3, 5, 6, 7});
}

TEST_CASE("ClaimPlanner.TakesLeasesInGroupAndIdOrderTiesInClaimOrder") {
  // Replicas that claim at once take their leases in one order, so none waits on another in a
  // cycle.
  const std::vector<ClaimCandidate> candidates = {Job(1, {{"cap", "clone", 4}, {"git", "z"}}),
                                                  Job(2, {{"cap", "clone", 4}, {"git", "a"}}),
                                                  Job(3, {{"git", "m"}})};
  const ClaimPlan plan = PlanClaim(candidates, {}, 10);
  CHECK(Takes(candidates, plan) ==
        Names{"1:cap/clone", "2:cap/clone", "2:git/a", "3:git/m", "1:git/z"});
}

TEST_CASE("ClaimPlanner.NothingToTakeIsAnEmptyPlan") {
  CHECK(PlanClaim({}, {}, 5).chosen.empty());
  const std::vector<ClaimCandidate> candidates = {Job(1, {{"git", "a"}})};
  const ClaimPlan none = PlanClaim(candidates, {}, 0);
  CHECK(none.chosen.empty());
  CHECK(none.takes.empty());
}

}  // namespace claim_planner_test
}  // namespace
}  // namespace fairgate::store
