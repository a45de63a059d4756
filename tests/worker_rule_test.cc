// Workers in the rule (fairgate/worker.h; docs/ordering.md, "Workers"): cases worked out by hand
// for the assignment, the pass-over, tags, changes and losses of workers, and the property test
// of the rare-job bound over random traces. The differential tests
// (CoreDifferential.Workers*) compare all of it with the reference model besides.
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
#include "fairgate/evidence.h"
#include "fairgate/options.h"
#include "runtime/admission_evidence.h"

namespace fairgate {
namespace {
namespace worker_rule_test {

using core::AdmissionCore;
using core::JobTicket;

std::unique_ptr<AdmissionCore> MakeCore(int capacity = 16, double reserve_after = 30) {
  SchedulerOptions options;
  options.rule.max_concurrency = capacity;
  options.rule.sole_worker_reserve_after = Seconds(reserve_after);
  return std::move(*AdmissionCore::Create(options.rule));
}

JobTypeConfig Type(int priority = 16, std::vector<std::string> tags = {}) {
  JobTypeConfig config;
  config.priority = priority;
  config.max_concurrency = 16;
  config.tags = std::move(tags);
  return config;
}

WorkerConfig Worker(int slots, std::vector<std::string> types, std::vector<std::string> tags = {}) {
  return WorkerConfig{slots, std::move(types), std::move(tags)};
}

JobTicket Enqueue(AdmissionCore& core, const std::string& type, const std::string& key,
                  double now) {
  auto ticket = core.Enqueue({type, "r", key}, now);
  REQUIRE(ticket.ok());
  return *ticket;
}

TEST_CASE("Workers.NoneDeclaredChangesNothing") {
  auto core = MakeCore(2);
  REQUIRE(core->RegisterType("a", Type()).ok());
  Enqueue(*core, "a", "k", 0);
  auto admission = core->NextAdmission(0);
  REQUIRE(admission);
  CHECK(admission->worker.empty());
  CHECK_FALSE(core->workers_in_use());
  CHECK(core->TypesWithoutWorker().empty());
}

TEST_CASE("Workers.TheMostSpecialisedWorkerWithRoomTakesTheJob") {
  auto core = MakeCore();
  for (const char* t : {"pdf", "excel", "index"}) REQUIRE(core->RegisterType(t, Type()).ok());
  // Added most versatile first, so that the choice is by specialisation, not by age.
  REQUIRE(core->AddWorker("c", Worker(1, {"pdf", "excel", "index"})).ok());
  REQUIRE(core->AddWorker("b", Worker(1, {"pdf", "excel"})).ok());
  REQUIRE(core->AddWorker("a", Worker(1, {"pdf"})).ok());
  std::vector<std::string> got;
  for (int i = 0; i < 3; ++i) {
    Enqueue(*core, "pdf", "k" + std::to_string(i), 0);
    auto admission = core->NextAdmission(0);
    REQUIRE(admission);
    got.emplace_back(admission->worker);
  }
  CHECK(got == std::vector<std::string>{"a", "b", "c"});
  // Every worker that serves pdf is busy: the fourth waits, and an index job, which only c
  // serves, waits for c too.
  Enqueue(*core, "pdf", "k3", 0);
  CHECK_FALSE(core->NextAdmission(0));
  CHECK(core->CheckInvariants().ok());
}

TEST_CASE("Workers.TiesGoToTheWorkerAddedFirst") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("pdf", Type()).ok());
  REQUIRE(core->AddWorker("second", Worker(1, {"pdf"})).ok());
  REQUIRE(core->AddWorker("first", Worker(1, {"pdf"})).ok());
  Enqueue(*core, "pdf", "k", 0);
  CHECK(core->NextAdmission(0)->worker == "second");  // added first, whatever its name
}

TEST_CASE("Workers.AJobWithoutAFreeCompatibleSlotIsPassedOverNotWaitedOn") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("gpu", Type()).ok());
  REQUIRE(core->RegisterType("cpu", Type()).ok());
  REQUIRE(core->AddWorker("g", Worker(1, {"gpu"})).ok());
  REQUIRE(core->AddWorker("c", Worker(2, {"cpu"})).ok());
  Enqueue(*core, "gpu", "k", 0);
  REQUIRE(core->NextAdmission(0)->worker == "g");
  // The next gpu job is first in the order (its key is the lightest), but g is busy: the cpu
  // jobs behind it go.
  Enqueue(*core, "gpu", "light", 1);
  Enqueue(*core, "cpu", "heavy", 2);
  Enqueue(*core, "cpu", "heavy", 3);
  REQUIRE(core->SetAccumulatedCost("heavy", 100).ok());
  auto first = core->NextAdmission(3);
  auto second = core->NextAdmission(3);
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first->type == "cpu");
  CHECK(first->skipped.worker == 1);  // the gpu type, skipped for want of a worker
  CHECK(second->type == "cpu");
  CHECK_FALSE(core->NextAdmission(3));
}

TEST_CASE("Workers.ServeTypesThroughTheirTags") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("render", Type(16, {"gpu"})).ok());
  REQUIRE(core->RegisterType("index", Type(16, {"cpu"})).ok());
  REQUIRE(core->AddWorker("g", Worker(1, {}, {"gpu"})).ok());
  CHECK(core->TypesWithoutWorker() == std::vector<std::string>{"index"});
  // A type registered after the worker is served by its tags too.
  REQUIRE(core->RegisterType("train", Type(16, {"gpu"})).ok());
  Enqueue(*core, "index", "k", 0);
  CHECK_FALSE(core->NextAdmission(0));  // nobody serves index
  Enqueue(*core, "train", "k", 0);
  auto admission = core->NextAdmission(0);
  REQUIRE(admission);
  CHECK(admission->type == "train");
  CHECK(admission->worker == "g");
}

TEST_CASE("Workers.BadOrConflictingDeclarationsAreRefused") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("a", Type()).ok());
  CHECK(core->AddWorker("", Worker(1, {"a"})).code() == absl::StatusCode::kInvalidArgument);
  CHECK(core->AddWorker("w", Worker(0, {"a"})).code() == absl::StatusCode::kInvalidArgument);
  CHECK(core->AddWorker("w", Worker(1, {})).code() == absl::StatusCode::kInvalidArgument);
  CHECK(core->AddWorker("w", Worker(1, {""})).code() == absl::StatusCode::kInvalidArgument);
  CHECK(core->AddWorker("w", Worker(1, {"a"}, {""})).code() == absl::StatusCode::kInvalidArgument);
  CHECK_FALSE(core->workers_in_use());  // nothing refused turned them on
  REQUIRE(core->AddWorker("w", Worker(1, {"a"})).ok());
  CHECK(core->AddWorker("w", Worker(1, {"a"})).ok());  // the same again: nothing to do
  CHECK(core->AddWorker("w", Worker(2, {"a"})).code() == absl::StatusCode::kAlreadyExists);
  CHECK(core->UpdateWorker("nobody", Worker(1, {"a"})).code() == absl::StatusCode::kNotFound);
  CHECK(core->RemoveWorker("nobody", 0).status().code() == absl::StatusCode::kNotFound);
  JobTypeConfig bad = Type(16, {""});
  CHECK(core->RegisterType("b", bad).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Workers.UpdatingAWorkerKeepsItsRunningJobs") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("a", Type()).ok());
  REQUIRE(core->RegisterType("b", Type()).ok());
  REQUIRE(core->AddWorker("w", Worker(2, {"a"})).ok());
  const JobTicket running = Enqueue(*core, "a", "k", 0);
  REQUIRE(core->NextAdmission(0));
  // One slot, serving b only: the a job keeps its slot, so nothing more fits.
  REQUIRE(core->UpdateWorker("w", Worker(1, {"b"})).ok());
  Enqueue(*core, "b", "k", 0);
  CHECK_FALSE(core->NextAdmission(0));
  REQUIRE(core->Complete(running, 1, 1).ok());
  auto admission = core->NextAdmission(1);
  REQUIRE(admission);
  CHECK(admission->type == "b");
  CHECK(core->CheckInvariants().ok());
}

TEST_CASE("Workers.RemovingAWorkerEndsItsRunningJobsOnceAndALateCompletionIsANoOp") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("a", Type()).ok());
  REQUIRE(core->AddWorker("w", Worker(2, {"a"})).ok());
  REQUIRE(core->AddWorker("v", Worker(1, {"a"})).ok());
  const JobTicket first = Enqueue(*core, "a", "k1", 0);
  const JobTicket second = Enqueue(*core, "a", "k2", 0);
  const JobTicket third = Enqueue(*core, "a", "k3", 0);
  for (int i = 0; i < 3; ++i) REQUIRE(core->NextAdmission(0));
  // w (added first, as specialised as v) took the first two.
  CHECK(core->Describe(first)->worker == "w");
  CHECK(core->Describe(third)->worker == "v");
  const double charged = *core->AccumulatedCost("k1");
  auto lost = core->RemoveWorker("w", 5);
  REQUIRE(lost.ok());
  REQUIRE(lost->size() == 2);
  CHECK((*lost)[0].ticket == first);
  CHECK((*lost)[1].ticket == second);
  CHECK((*lost)[0].worker == "w");
  CHECK((*lost)[0].key == "k1");
  CHECK(core->TakeSnapshot(0).running == 1);
  CHECK(core->TakeSnapshot(0).slots_in_use == 1);
  // The lost job's key keeps its charge; its estimate learned nothing.
  CHECK(*core->AccumulatedCost("k1") == charged);
  CHECK(core->Estimate("a", "r") == 1.0);  // still the type's default_cost
  // A late completion of a lost job changes nothing and is refused.
  CHECK(core->Complete(first, 5, 6).code() == absl::StatusCode::kNotFound);
  CHECK(core->TakeSnapshot(0).running == 1);
  // A worker of the same name comes back: new slots, nothing of the old ones.
  REQUIRE(core->AddWorker("w", Worker(1, {"a"})).ok());
  const JobTicket fourth = Enqueue(*core, "a", "k4", 6);
  auto admission = core->NextAdmission(6);
  REQUIRE(admission);
  CHECK(admission->ticket == fourth);
  CHECK(admission->worker == "w");
  CHECK(core->CheckInvariants().ok());
}

TEST_CASE("Workers.WithEveryWorkerGoneNothingRuns") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("a", Type()).ok());
  REQUIRE(core->AddWorker("w", Worker(1, {"a"})).ok());
  REQUIRE(core->RemoveWorker("w", 0).ok());
  Enqueue(*core, "a", "k", 0);
  CHECK_FALSE(core->NextAdmission(0));
  CHECK(core->TypesWithoutWorker() == std::vector<std::string>{"a"});
}

TEST_CASE("Workers.AStarvingSoleServedTypeReservesItsWorker") {
  // The seed's straggler: a low-tier type that only the versatile worker v serves, behind a
  // stream of high-tier jobs that the specialist s serves too.
  auto core = MakeCore(16, /*reserve_after=*/10);
  REQUIRE(core->RegisterType("rare", Type(1)).ok());
  REQUIRE(core->RegisterType("common", Type(8)).ok());
  REQUIRE(core->AddWorker("s", Worker(1, {"common"})).ok());
  REQUIRE(core->AddWorker("v", Worker(1, {"common", "rare"})).ok());
  std::map<std::string, JobTicket> on;  // worker -> its running job
  auto fill = [&](double now) {
    while (auto a = core->NextAdmission(now)) on[std::string(a->worker)] = a->ticket;
  };
  Enqueue(*core, "rare", "r", 0);
  for (int i = 0; i < 4; ++i) Enqueue(*core, "common", "c", 0);
  fill(0);
  REQUIRE(core->Describe(on["v"])->type == "common");  // the higher tier first
  // Before the rare type starves, v's room goes to the higher tier, as without workers.
  Enqueue(*core, "common", "c", 5);
  REQUIRE(core->Complete(on["v"], 5, 5).ok());
  fill(5);
  CHECK(core->Describe(on["v"])->type == "common");
  // At 10 s it starves: s's room still goes to common, and v's next room to rare.
  REQUIRE(core->Complete(on["s"], 10, 11).ok());
  fill(11);
  CHECK(core->Describe(on["s"])->type == "common");
  REQUIRE(core->Complete(on["v"], 7, 12).ok());
  auto admission = core->NextAdmission(12);
  REQUIRE(admission);
  CHECK(admission->type == "rare");
  CHECK(admission->worker == "v");
  CHECK(admission->worker_reserved);
  // The evidence record says so.
  const std::string line = ToJsonLine(internal::ToEvidence(*admission, 12));
  CHECK(line.find(R"("worker":"v","worker_reserved":true)") != std::string::npos);
  CHECK(core->CheckInvariants().ok());
}

TEST_CASE("Workers.AReservationDoesNotHoldAWorkerForAJobSomethingElseHoldsBack") {
  // The rare type's only job waits on its key's limit: v must not idle for it.
  auto core = MakeCore(16, /*reserve_after=*/1);
  REQUIRE(core->RegisterType("rare", Type(1)).ok());
  REQUIRE(core->RegisterType("common", Type(8)).ok());
  REQUIRE(core->AddWorker("v", Worker(2, {"common", "rare"})).ok());
  REQUIRE(core->SetKeyLimits("r", KeyLimits{1, 0}).ok());
  REQUIRE(core->RegisterType("other", Type(8)).ok());
  REQUIRE(core->AddWorker("o", Worker(1, {"other"})).ok());
  Enqueue(*core, "other", "r", 0);
  REQUIRE(core->NextAdmission(0)->worker == "o");  // key r is at its limit from now
  Enqueue(*core, "rare", "r", 0);
  Enqueue(*core, "common", "c", 5);
  auto admission = core->NextAdmission(5);
  REQUIRE(admission);
  CHECK(admission->type == "common");
  CHECK(admission->worker == "v");
}

JobTypeConfig Wide(int slots, int priority = 16) {
  JobTypeConfig config = Type(priority);
  config.slots = slots;
  return config;
}

TEST_CASE("Workers.AWorkerNarrowerThanATypeDoesNotServeItNorIsHeldForIt") {
  // v (1 slot) names wide (2 slots) and rare. wide's jobs could never run on v: they must not
  // reserve it, so the rare job v can run goes at once.
  auto core = MakeCore(16, /*reserve_after=*/1);
  REQUIRE(core->RegisterType("wide", Wide(2)).ok());
  REQUIRE(core->RegisterType("rare", Type()).ok());
  REQUIRE(core->AddWorker("v", Worker(1, {"wide", "rare"})).ok());
  CHECK(
      core->NarrowWorkerWarnings("", "") ==
      std::vector<std::string>{"worker 'v' names job type 'wide' but has 1 slot and its jobs "
                               "take 2: it does not serve it (none of its jobs could run there)"});
  CHECK(core->NarrowWorkerWarnings("v", "rare").empty());
  CHECK(core->TypesWithoutWorker() == std::vector<std::string>{"wide"});
  CHECK_FALSE(core->TypeServed("wide"));
  const JobTicket wide = Enqueue(*core, "wide", "k", 0);
  CHECK_FALSE(core->NextAdmission(0));
  Enqueue(*core, "rare", "k", 2);
  auto admission = core->NextAdmission(2);
  REQUIRE(admission);
  CHECK(admission->type == "rare");
  CHECK(admission->worker == "v");
  CHECK(core->CheckInvariants().ok());
  // A worker wide enough serves it, and its job goes there.
  REQUIRE(core->AddWorker("big", Worker(2, {"wide"})).ok());
  CHECK(core->TypesWithoutWorker().empty());
  admission = core->NextAdmission(3);
  REQUIRE(admission);
  CHECK(admission->ticket == wide);
  CHECK(admission->worker == "big");
  // Narrowed below the type, big no longer serves it; its running job goes on.
  REQUIRE(core->UpdateWorker("big", Worker(1, {"wide"})).ok());
  CHECK(core->TypesWithoutWorker() == std::vector<std::string>{"wide"});
  CHECK(core->NarrowWorkerWarnings("big", "").size() == 1);
  CHECK(core->CheckInvariants().ok());
}

// What the bound does not cover (docs/ordering.md, "Workers"): a multi-slot rare type whose global
// cap the other workers' jobs keep full. Capacity 3 = w2 (2 slots: c and the 2-slot r) + w1 (1
// slot: c); c jobs always waiting. Each time a c job on w2 ends one global slot is free, r does
// not fit it, nothing reserves w2, and the next c job takes the slot: r waits for ever. With
// capacity 4 the reservation engages and r goes within the bound.
TEST_CASE("Workers.AMultiSlotRareTypeBehindAFullGlobalCapIsNotCoveredByTheBound") {
  for (const int capacity : {3, 4}) {
    CAPTURE(capacity);
    auto core = MakeCore(capacity, /*reserve_after=*/1);
    REQUIRE(core->RegisterType("c", Type()).ok());
    REQUIRE(core->RegisterType("r", Wide(2)).ok());
    REQUIRE(core->AddWorker("w2", Worker(2, {"c", "r"})).ok());
    REQUIRE(core->AddWorker("w1", Worker(1, {"c"})).ok());
    std::vector<std::pair<JobTicket, std::string>> running;  // in admission order
    std::optional<double> r_admitted;
    auto fill = [&](double now) {
      while (auto a = core->NextAdmission(now)) {
        if (a->type == "r") r_admitted = now;
        running.emplace_back(a->ticket, std::string(a->worker));
      }
    };
    for (int i = 0; i < 8; ++i) Enqueue(*core, "c", "c", 0);
    fill(0);
    Enqueue(*core, "r", "r", 0);
    // Every second the oldest job on w2 ends (D = 1 s on w2), and a c job arrives.
    for (int t = 1; t <= 30 && !r_admitted; ++t) {
      auto on_w2 = std::find_if(running.begin(), running.end(),
                                [](const auto& job) { return job.second == "w2"; });
      REQUIRE(on_w2 != running.end());
      REQUIRE(core->Complete(on_w2->first, 1, t).ok());
      running.erase(on_w2);
      Enqueue(*core, "c", "c", t);
      fill(t);
      CHECK(core->CheckInvariants().ok());
    }
    if (capacity == 3) {
      CHECK_FALSE(r_admitted);
    } else {
      REQUIRE(r_admitted);
      CHECK(*r_admitted <= 1 + 1 * 1);  // R + k x D (k = 1) from r's clock, which starts at 0
    }
  }
}

// A claim goes before the order (docs/ordering.md, "Workers"): the reserved worker's claimant is
// admitted although a job of a higher tier comes first in the order and a free worker could run
// it, and it takes the last global slot from that job.
TEST_CASE("Workers.AClaimGoesBeforeTheOrderAndTakesItsGlobalSlot") {
  auto core = MakeCore(/*capacity=*/2, /*reserve_after=*/1);
  REQUIRE(core->RegisterType("rare", Type(1)).ok());
  REQUIRE(core->RegisterType("common", Type(8)).ok());
  REQUIRE(core->AddWorker("s", Worker(1, {"common"})).ok());
  REQUIRE(core->AddWorker("o", Worker(1, {"common"})).ok());
  REQUIRE(core->AddWorker("v", Worker(1, {"common", "rare"})).ok());
  Enqueue(*core, "rare", "r", 0);
  for (int i = 0; i < 3; ++i) Enqueue(*core, "common", "c", 0);
  std::map<std::string, JobTicket> on;
  while (auto a = core->NextAdmission(0)) on[std::string(a->worker)] = a->ticket;
  REQUIRE(on.size() == 2);  // s and o run common jobs; the global cap is full
  REQUIRE(core->Complete(on["s"], 1, 2).ok());
  auto admission = core->NextAdmission(2);
  REQUIRE(admission);
  CHECK(admission->type == "rare");
  CHECK(admission->worker == "v");
  CHECK(admission->worker_reserved);
  // s is free and a common job is first in the order, but the claim took the global slot.
  CHECK_FALSE(core->NextAdmission(2));
  CHECK(core->CheckInvariants().ok());
}

// The rare-job bound (docs/ordering.md, "Workers"): let R be sole_worker_reserve_after, W a
// worker, k the number of types W alone serves, and D the longest a job runs. While a type W
// alone serves has jobs pending that nothing but workers holds back, one of its jobs is admitted
// within R + k x D of the later of its last admission and the time its jobs started waiting,
// whatever arrives in any tier. Random traces: common types in random tiers served by W and by
// other workers, arriving faster than they can run, and 1-3 rare types only W serves, in random
// tiers, with no cap, key limit or conflict that could hold them; the core runs them with random
// durations up to D, and the bound is checked at every event. With the reservation off, the
// same traces break it: the check can fail.
struct BoundRun {
  double worst_ratio = 0;  // the longest starvation seen, over R + k x D
  int rare_admitted = 0;
};

BoundRun RunBoundTrace(std::uint64_t seed, double reserve_after) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const double R = 10, D = 4;
  SchedulerOptions options;
  options.rule.max_concurrency = 64;  // no global cap in the way: workers are the limit
  options.rule.sole_worker_reserve_after = Seconds(reserve_after);
  auto core = std::move(*AdmissionCore::Create(options.rule));
  const std::vector<int> tiers{20, 40, 64};  // each tier's cap above every worker's slots
  const int rare_types = 1 + pick(3), common_types = 1 + pick(3);
  std::vector<std::string> rare, common;
  for (int i = 0; i < rare_types; ++i) {
    rare.push_back("rare" + std::to_string(i));
    JobTypeConfig config = Type(tiers[pick(3)]);
    config.max_concurrency = 64;
    REQUIRE(core->RegisterType(rare.back(), config).ok());
  }
  for (int i = 0; i < common_types; ++i) {
    common.push_back("common" + std::to_string(i));
    JobTypeConfig config = Type(tiers[pick(3)]);
    config.max_concurrency = 64;
    REQUIRE(core->RegisterType(common.back(), config).ok());
  }
  // W serves every rare type and some common ones; the others serve common types only.
  WorkerConfig w{1 + pick(2), rare, {}};
  for (const auto& c : common) {
    if (pick(2) == 0) w.types.push_back(c);
  }
  w.types.push_back(common[0]);
  REQUIRE(core->AddWorker("W", w).ok());
  // S0 serves every common type, so that W alone serves the rare ones only.
  for (int i = 0, n = 1 + pick(3); i < n; ++i) {
    WorkerConfig other{1 + pick(3), {}, {}};
    for (const auto& c : common) {
      if (i == 0 || pick(2) == 0) other.types.push_back(c);
    }
    if (other.types.empty()) other.types.push_back(common[0]);
    REQUIRE(core->AddWorker("S" + std::to_string(i), other).ok());
  }
  const double k = rare_types, bound = R + k * D;
  struct Running {
    double ends;
    JobTicket ticket;
    double elapsed;
  };
  std::vector<Running> running;
  std::map<std::string, int> pending;           // rare type -> its pending jobs
  std::map<std::string, double> waiting_since;  // rare type -> the clock of the bound
  BoundRun result;
  double now = 0, next_common = 0, next_rare = uniform(0, 30);
  const double end = 600;
  while (now < end) {
    // The next event: a completion, a common arrival (a stream faster than the workers), a rare
    // arrival (now and then).
    double next = std::min(next_common, next_rare);
    for (const Running& r : running) next = std::min(next, r.ends);
    now = next;
    for (auto it = running.begin(); it != running.end();) {
      if (it->ends <= now) {
        REQUIRE(core->Complete(it->ticket, it->elapsed, now).ok());
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    if (now >= next_common) {
      for (int i = 0; i < 3; ++i) {
        const std::string key = "c" + std::to_string(pick(50));
        REQUIRE(core->Enqueue({common[pick(common_types)], "r", key}, now).ok());
      }
      next_common = now + uniform(0.1, 1);
    }
    if (now >= next_rare) {
      const std::string& type = rare[pick(rare_types)];
      REQUIRE(core->Enqueue({type, "r", "rare-key-" + std::to_string(pick(5))}, now).ok());
      if (pending[type]++ == 0) waiting_since[type] = now;
      next_rare = now + uniform(5, 60);
    }
    while (auto a = core->NextAdmission(now)) {
      const double elapsed = uniform(0.01, D);
      running.push_back({now + elapsed, a->ticket, elapsed});
      const std::string type(a->type);
      if (pending.count(type) > 0) {
        --pending[type];
        waiting_since[type] = now;
        ++result.rare_admitted;
      }
    }
    for (const auto& [type, n] : pending) {
      if (n > 0)
        result.worst_ratio = std::max(result.worst_ratio, (now - waiting_since[type]) / bound);
    }
  }
  REQUIRE(core->CheckInvariants().ok());
  return result;
}

TEST_CASE("Workers.RareJobBoundHoldsInEveryRandomTrace") {
  constexpr int kTraces = 300;
  double worst = 0;
  int admitted = 0;
  for (int seed = 0; seed < kTraces; ++seed) {
    CAPTURE(seed);
    const BoundRun run = RunBoundTrace(seed, 10);
    CHECK(run.worst_ratio <= 1.0);
    worst = std::max(worst, run.worst_ratio);
    admitted += run.rare_admitted;
  }
  CHECK(admitted > kTraces * 5);  // the rare types did run: the bound was tested
  MESSAGE("longest starvation: ", worst, " of the bound");
}

TEST_CASE("Workers.RareJobBoundBreaksWithoutTheReservation") {
  int broken = 0;
  for (int seed = 0; seed < 300; ++seed) {
    broken += RunBoundTrace(seed, std::numeric_limits<double>::infinity()).worst_ratio > 1.0;
  }
  CHECK(broken > 30);
  MESSAGE("traces that break the bound without the reservation: ", broken, " of 300");
}

}  // namespace worker_rule_test
}  // namespace
}  // namespace fairgate
