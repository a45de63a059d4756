// AdmissionCore, one behaviour at a time. The differential tests cover random sequences; these
// pin down each promise of DESIGN.md with a situation small enough to reason about by hand.
#include "core/admission_core.h"

#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/evidence.h"
#include "fairgate/options.h"
#include "fairgate/snapshot.h"
#include "runtime/admission_evidence.h"
#include "test_job_types.h"

namespace fairgate::core {
namespace {
namespace admission_core_test {

std::unique_ptr<AdmissionCore> MakeCore(SchedulerOptions options = SchedulerOptions::Seed()) {
  auto core = AdmissionCore::Create(options.rule);
  REQUIRE(core.ok());
  return *std::move(core);
}

using testing::Type;

JobTicket Add(AdmissionCore& core, std::string_view type, std::string_view id,
              std::string_view key = "", std::optional<double> cost = std::nullopt,
              double now = 0) {
  StatusOr<JobTicket> ticket = core.Enqueue({type, id, key, cost}, now);
  REQUIRE_MESSAGE(ticket.ok(), ticket.status().message());
  return *ticket;
}

// Admits until nothing is admissible; returns "type/id/key" of each admission.
std::vector<std::string> AdmitAll(AdmissionCore& core, double now = 0,
                                  std::vector<JobTicket>* tickets = nullptr) {
  std::vector<std::string> out;
  while (auto a = core.NextAdmission(now)) {
    out.push_back(std::string(a->type) + "/" + std::string(a->id) + "/" + std::string(a->key));
    if (tickets) tickets->push_back(a->ticket);
  }
  return out;
}

using Names = std::vector<std::string>;

TEST_CASE("Core.RegisterType.RefusesBadConfigsNamingTheField") {
  auto core = MakeCore();
  auto message = [&](std::string_view name, JobTypeConfig c) {
    Status s = core->RegisterType(name, c);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  CHECK(message("", Type(1, 1)) == "job type name is empty");
  CHECK(message("t", Type(0, 1)) == "job type 't': priority must be >= 1, got 0");
  CHECK(message("t", Type(1, 0)) == "job type 't': max_concurrency must be >= 1, got 0");
  CHECK(message("t", Type(1, 1, "", -1)) ==
        "job type 't': default_cost must be finite and >= 0, got -1");
  CHECK(message("t", Type(1, 1, "", std::nan(""))).find("default_cost") != std::string::npos);
  CHECK(message("t", Type(1, 1, "", INFINITY)).find("default_cost") != std::string::npos);
  CHECK(core->TakeSnapshot(0).types.empty());
}

TEST_CASE("Core.RegisterType.SameConfigIsIdempotentDifferentConfigIsAlreadyExists") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("clone", Type(8, 8, "git", 10)).ok());
  CHECK(core->RegisterType("clone", Type(8, 8, "git", 10)).ok());
  Status s = core->RegisterType("clone", Type(8, 4, "git", 10));
  CHECK(s.code() == absl::StatusCode::kAlreadyExists);
  CHECK(s.message() == "job type 'clone' is already registered with a different config");
  CHECK(core->TakeSnapshot(0).types.size() == 1);
  CHECK(core->TakeSnapshot(0).types[0].max_concurrency == 8);
}

TEST_CASE("Core.Enqueue.RefusesBadInputAndChangesNothing") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("t", Type(1, 1)).ok());
  auto code = [&](EnqueueRequest r, double now = 0) { return core->Enqueue(r, now).status(); };
  CHECK(code({"nope", "a", "k"}).code() == absl::StatusCode::kNotFound);
  CHECK(code({"nope", "a", "k"}).message() == "unknown job type 'nope'");
  CHECK(code({"t", "", "k"}).message() == "job id is empty");
  CHECK(code({"t", "a", "k", -1.0}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(code({"t", "a", "k", std::nan("")}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(code({"t", "a", "k", INFINITY}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(code({"t", "a", "k"}, NAN).code() == absl::StatusCode::kInvalidArgument);
  const Snapshot s = core->TakeSnapshot(0);
  CHECK(s.pending == 0);
  CHECK(s.keys_tracked == 0);
}

TEST_CASE("Core.Caps.GlobalTierAndTypeCapsAreNeverExceeded") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 5;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("clone", Type(8, 2)).ok());
  REQUIRE(core->RegisterType("fetch", Type(3, 2)).ok());
  REQUIRE(core->RegisterType("gc", Type(3, 2)).ok());
  for (int i = 0; i < 4; ++i) {
    Add(*core, "clone", "c" + std::to_string(i));
    Add(*core, "fetch", "f" + std::to_string(i));
    Add(*core, "gc", "g" + std::to_string(i));
  }
  // clone: type cap 2. Tier 3 holds fetch and gc: tier cap 3, each type cap 2; one key, so
  // they go in enqueue order (f0, g0, f1). Global cap 5.
  CHECK(AdmitAll(*core) == Names{"clone/c0/", "clone/c1/", "fetch/f0/", "gc/g0/", "fetch/f1/"});
  const Snapshot s = core->TakeSnapshot(0);
  CHECK(s.running == 5);
  REQUIRE(s.tiers.size() == 2);
  CHECK(s.tiers[0].priority == 8);
  CHECK(s.tiers[0].running == 2);
  CHECK(s.tiers[1].running == 3);
  CHECK(s.pending == 7);
}

TEST_CASE("Core.Order.HigherTierFirstThenLeastChargedKeyThenArrival") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 1;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("bg", Type(1, 1)).ok());
  REQUIRE(core->RegisterType("fg", Type(2, 1)).ok());
  Add(*core, "bg", "b", "", 1.0, 0);
  Add(*core, "fg", "a1", "heavy", 5.0, 1);
  Add(*core, "fg", "a2", "heavy", 5.0, 2);
  Add(*core, "fg", "l1", "light", 1.0, 3);
  std::vector<std::string> order;
  for (int i = 0; i < 4; ++i) {
    auto a = core->NextAdmission(10);
    REQUIRE(a.has_value());
    order.push_back(std::string(a->id));
    REQUIRE(core->Complete(a->ticket, 1, 10).ok());
  }
  // fg first; heavy's a1 arrived first (both at 0); then light (0 < 5) before heavy's a2.
  CHECK(order == std::vector<std::string>{"a1", "l1", "a2", "b"});
  CHECK(core->AccumulatedCost("heavy") == 10.0);
  CHECK(core->AccumulatedCost("light") == 1.0);
}

// Types whose own cap cannot hold a job back before their tier's (one slot a job, a cap at least
// the tier's) keep one lane per key together (src/core/README.md). That changes no decision: a
// paused one is passed over, and so is every type once workers make their room per type.
TEST_CASE("Core.Order.TypesSharingTheirTiersLanesKeepTheOrderThroughAPauseAndTheFirstWorker") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 1;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("clone", Type(3, 3)).ok());    // shares tier 3's lanes
  REQUIRE(core->RegisterType("archive", Type(3, 3)).ok());  // shares them too
  REQUIRE(core->RegisterType("fetch", Type(3, 1)).ok());    // its cap can bind: lanes of its own
  Add(*core, "clone", "c1", "a", 1.0, 0);
  Add(*core, "archive", "r1", "a", 1.0, 1);
  Add(*core, "clone", "c2", "a", 1.0, 2);
  Add(*core, "fetch", "f1", "b", 5.0, 3);
  Add(*core, "archive", "r2", "b", 1.0, 4);
  auto next = [&](double now) {
    std::optional<Admission> a = core->NextAdmission(now);
    REQUIRE(a.has_value());
    REQUIRE(core->Complete(a->ticket, a->charge, now).ok());
    REQUIRE(core->CheckInvariants().ok());
    return std::string(a->id);
  };
  // The paused clones are passed over, a's archive between them goes; b is charged 5 by f1.
  REQUIRE(core->PauseType("clone", 5).ok());
  REQUIRE(core->CheckInvariants().ok());
  CHECK(next(5) == "r1");  // a (0) before b (0) by arrival: r1 at 1, f1 at 3
  CHECK(next(5) == "f1");  // a's clones paused: b's fetch (3) before its archive (4)
  REQUIRE(core->ResumeType("clone", 6).ok());
  REQUIRE(core->CheckInvariants().ok());
  CHECK(next(6) == "c1");  // a at 1 before b at 5, c1 its first
  // Workers from now on: every type in lanes of its own, the order the same.
  REQUIRE(core->AddWorker("w", WorkerConfig{1, {"clone", "archive", "fetch"}, {}}).ok());
  REQUIRE(core->CheckInvariants().ok());
  CHECK(next(7) == "c2");  // a at 2 before b at 5
  CHECK(next(7) == "r2");
  CHECK_FALSE(core->NextAdmission(7).has_value());
}

// A key at its max_running is passed over queue by queue: one per type, or one for all the types
// that share their tier's lanes (fairgate/evidence.h, skipped_key_limit).
TEST_CASE("Core.KeyLimit.AKeyAtItsLimitIsCountedOnceForTheTypesThatShareItsLane") {
  for (const bool share : {true, false}) {
    CAPTURE(share);
    SchedulerOptions options = SchedulerOptions::Seed();
    options.rule.max_concurrency = 4;
    auto core = MakeCore(options);
    const int cap = share ? 4 : 2;  // at least the tier's cap (4) shares, 2 does not
    REQUIRE(core->RegisterType("clone", Type(4, cap)).ok());
    REQUIRE(core->RegisterType("archive", Type(4, cap)).ok());
    REQUIRE(core->SetKeyLimits("a", KeyLimits{.max_running = 1}).ok());
    Add(*core, "clone", "c1", "a", 1.0, 0);
    REQUIRE(AdmitAll(*core, 0) == Names{"clone/c1/a"});
    Add(*core, "clone", "c2", "a", 1.0, 1);
    Add(*core, "archive", "r1", "a", 1.0, 1);
    Add(*core, "clone", "c3", "b", 1.0, 2);
    std::optional<Admission> admitted = core->NextAdmission(2);
    REQUIRE(admitted.has_value());
    CHECK(admitted->id == "c3");
    CHECK(admitted->skipped.key_limit == (share ? 1 : 2));
    CHECK(core->CheckInvariants().ok());
  }
}

TEST_CASE("Core.Conflict.SameIdSameGroupNeverOverlap") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("clone", Type(8, 8, "git")).ok());
  REQUIRE(core->RegisterType("repack", Type(4, 3, "git")).ok());
  REQUIRE(core->RegisterType("verify", Type(4, 3, "fsck")).ok());
  REQUIRE(core->RegisterType("stat", Type(4, 3)).ok());
  Add(*core, "clone", "repo1", "dev1");
  Add(*core, "repack", "repo1");
  Add(*core, "repack", "repo2");
  Add(*core, "verify", "repo1");
  Add(*core, "stat", "repo1");
  std::vector<JobTicket> tickets;
  // repack repo1 waits for the clone of repo1; a different id, a different group and no group
  // at all do not conflict.
  CHECK(AdmitAll(*core, 0, &tickets) ==
        Names{"clone/repo1/dev1", "repack/repo2/", "verify/repo1/", "stat/repo1/"});
  REQUIRE(core->Complete(tickets[0], 3, 3).ok());
  CHECK(AdmitAll(*core, 3) == Names{"repack/repo1/"});
}

TEST_CASE("Core.Conflict.ParkedJobsComeBackInTheirOriginalOrder") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 1;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("fetch", Type(1, 1, "git")).ok());
  REQUIRE(core->RegisterType("push", Type(1, 1, "git")).ok());
  JobTicket first = Add(*core, "fetch", "r", "", 0.0, 0);
  REQUIRE(core->NextAdmission(0).has_value());
  // All on the resource that is busy: each is parked when it reaches the front.
  Add(*core, "push", "r", "", 0.0, 1);
  Add(*core, "fetch", "r", "", 0.0, 2);
  Add(*core, "push", "r", "", 0.0, 3);
  CHECK_FALSE(core->NextAdmission(3).has_value());
  std::vector<double> arrivals;
  JobTicket running = first;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(core->Complete(running, 1, 4 + i).ok());
    auto a = core->NextAdmission(4 + i);
    REQUIRE(a.has_value());
    CHECK_FALSE(core->NextAdmission(4 + i).has_value());  // the resource is busy again
    arrivals.push_back(a->arrival);
    running = a->ticket;
  }
  CHECK(arrivals == std::vector<double>{1, 2, 3});
}

TEST_CASE("Core.ConflictLimit.AtMostNJobsOfAGroupRunOnOneIdInTheFairOrder") {
  SchedulerOptions options = SchedulerOptions::Seed();
  auto core = MakeCore(options);
  JobTypeConfig clone{.conflict_group = "git", .conflict_limit = 2};
  clone.priority = 8;
  clone.max_concurrency = 8;
  REQUIRE(core->RegisterType("clone", clone).ok());
  for (const char* key : {"a", "a", "a", "b", "c"}) Add(*core, "clone", "linux", key, 1.0);
  Add(*core, "clone", "git", "a", 1.0);
  std::vector<JobTicket> tickets;
  // Two on linux.git (a, then b: a was charged by its first), and git.git beside them.
  CHECK(AdmitAll(*core, 0, &tickets) == Names{"clone/linux/a", "clone/linux/b", "clone/git/a"});
  CHECK(core->CheckInvariants().ok());
  // One ends: the least-charged waiting key goes (c has run nothing), then a, then a.
  REQUIRE(core->Complete(tickets[0], 1, 1).ok());
  CHECK(AdmitAll(*core, 1, &tickets) == Names{"clone/linux/c"});
  REQUIRE(core->Complete(tickets[1], 1, 2).ok());
  CHECK(AdmitAll(*core, 2, &tickets) == Names{"clone/linux/a"});
  REQUIRE(core->Complete(tickets[3], 1, 3).ok());
  CHECK(AdmitAll(*core, 3, &tickets) == Names{"clone/linux/a"});
  CHECK(core->CheckInvariants().ok());
}

TEST_CASE("Core.ConflictLimit.EveryTypeOfAGroupGivesTheSameLimit") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("clone", {.conflict_group = "git", .conflict_limit = 3}).ok());
  Status s = core->RegisterType("repack", {.conflict_group = "git"});
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() ==
        "job type 'repack': conflict_limit 1 differs from 3, the limit of conflict group 'git'");
  CHECK(core->RegisterType("fetch", {.conflict_group = "git", .conflict_limit = 3}).ok());
  CHECK(core->RegisterType("fsck", {.conflict_group = "db"}).ok());
  CHECK(core->RegisterType("stat", {.conflict_limit = 2}).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Core.Conflict.AHerdOnOneResourceIsServedInTheFairOrder") {
  // Two keys with five jobs each on one repository, one at a time: each release lets the key
  // that has been charged less go next, so they alternate, however many are parked.
  SchedulerOptions options = SchedulerOptions::Seed();
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("clone", Type(8, 8, "git")).ok());
  for (int i = 0; i < 5; ++i) Add(*core, "clone", "linux", "a", 1.0, 0);
  for (int i = 0; i < 5; ++i) Add(*core, "clone", "linux", "b", 1.0, 0);
  std::string keys;
  double now = 0;
  for (auto a = core->NextAdmission(now); a; a = core->NextAdmission(now)) {
    keys += a->key;
    CHECK_FALSE(core->NextAdmission(now).has_value());  // the others stay parked
    CHECK(core->CheckInvariants().ok());
    now += 1;
    REQUIRE(core->Complete(a->ticket, 1, now).ok());
  }
  CHECK(keys == "ababababab");
}

TEST_CASE("Core.Slots.AWideJobTakesItsSlotsOfTheGlobalAndTierCaps") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 4;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("repack", {.max_concurrency = 2, .priority = 4, .slots = 3}).ok());
  REQUIRE(core->RegisterType("clone", Type(4, 4)).ok());
  REQUIRE(core->RegisterType("gc", {.max_concurrency = 2, .priority = 2, .slots = 2}).ok());
  Add(*core, "repack", "huge", "bg", 1.0);
  Add(*core, "clone", "a", "k1", 1.0);
  Add(*core, "clone", "b", "k2", 1.0);
  std::vector<JobTicket> tickets;
  // The repack (first in the order: every key at 0, it arrived first) takes 3 of the 4 slots;
  // one clone fits beside it, the other waits.
  CHECK(AdmitAll(*core, 0, &tickets) == Names{"repack/huge/bg", "clone/a/k1"});
  Snapshot s = core->TakeSnapshot(0);
  CHECK(s.running == 2);
  CHECK(s.slots_in_use == 4);
  CHECK(s.tiers[0].slots_in_use == 4);
  REQUIRE(core->Complete(tickets[0], 1, 1).ok());  // the repack ends: three slots free again
  Add(*core, "gc", "x", "bg", 1.0, 1);
  // The clone goes (higher tier), and the 2-slot gc fits the 2 slots left and its own tier.
  CHECK(AdmitAll(*core, 1, &tickets) == Names{"clone/b/k2", "gc/x/bg"});
  CHECK(core->TakeSnapshot(0).slots_in_use == 4);
  CHECK(core->CheckInvariants().ok());
}

TEST_CASE("Core.Slots.ANarrowerJobGoesWhileAWideOneDoesNotFitAndTheSkipIsCounted") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 4;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("repack", {.max_concurrency = 1, .priority = 8, .slots = 3}).ok());
  REQUIRE(core->RegisterType("clone", Type(8, 8)).ok());
  REQUIRE(core->RegisterType("fetch", {.max_concurrency = 2, .priority = 2, .slots = 2}).ok());
  Add(*core, "clone", "a", "k1", 1.0, 0);
  Add(*core, "clone", "b", "k1", 1.0, 0);
  REQUIRE(AdmitAll(*core).size() == 2);
  // The repack comes first in the order (its key has run nothing) but needs 3 of the 2 free
  // slots: the clone behind it goes, and the decision says why the repack was passed over.
  Add(*core, "repack", "huge", "bg", 1.0, 1);
  Add(*core, "clone", "c", "k1", 1.0, 1);
  auto a = core->NextAdmission(1);
  REQUIRE(a.has_value());
  CHECK(a->type == "clone");
  CHECK(a->skipped.global_cap == 1);
  CHECK(internal::ToEvidence(*a, 1).skipped_global_cap == 1);
  // A 2-slot fetch in a tier of priority 2 with the tier empty, but one global slot left.
  Add(*core, "fetch", "r", "bg2", 1.0, 1);
  CHECK_FALSE(core->NextAdmission(1).has_value());
  CHECK(core->CheckInvariants().ok());
}

TEST_CASE("Core.Order.ABlockedJobNeverBlocksTheJobsBehindIt") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 4;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("repack", Type(4, 1, "git")).ok());
  REQUIRE(core->RegisterType("fetch", Type(4, 4, "git")).ok());
  Add(*core, "repack", "r1");
  REQUIRE(core->NextAdmission(0).has_value());
  Add(*core, "repack", "r2");  // type cap
  Add(*core, "fetch", "r1");   // conflict
  Add(*core, "fetch", "r3");   // admissible, behind both
  CHECK(AdmitAll(*core) == Names{"fetch/r3/"});
}

// Coalescing (JobTypeConfig::coalesce): requests for an id whose job is pending share it.
TEST_CASE("Core.Coalesce.RequestsForAPendingIdShareOneJobChargedOnceToItsCreator") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 1;
  auto core = MakeCore(options);
  JobTypeConfig mirror = Type(1, 1, "", 4);
  mirror.coalesce = Coalesce::kJoin;
  REQUIRE(core->RegisterType("mirror", mirror).ok());
  REQUIRE(core->RegisterType("other", Type(1, 1)).ok());
  const JobTicket busy = Add(*core, "other", "x", "z");
  REQUIRE(core->NextAdmission(0).has_value());  // the one slot is taken: the rest wait
  auto enqueue = [&](std::string_view id, std::string_view key, Join join) {
    StatusOr<JobTicket> t = core->Enqueue({"mirror", id, key, std::nullopt, join}, 1);
    REQUIRE(t.ok());
    return *t;
  };
  const JobTicket first = enqueue("linux", "a", Join::kPending);
  CHECK(enqueue("linux", "b", Join::kPending) == first);
  CHECK(enqueue("linux", "c", Join::kPendingOrRunning) == first);
  CHECK(core->Callers(first).value() == 3);
  // A request that may not join, and another id, are jobs of their own.
  CHECK(enqueue("linux", "d", Join::kNever) != first);
  CHECK(enqueue("git", "a", Join::kPending) != first);
  const Snapshot pending = core->TakeSnapshot(0);
  CHECK(pending.pending == 3);
  CHECK(pending.keys_tracked == 3);  // z, a and d: the joiners b and c are not tracked

  REQUIRE(core->Complete(busy, 1, 2).ok());
  const std::optional<Admission> admitted = core->NextAdmission(2);
  REQUIRE(admitted.has_value());
  CHECK(admitted->ticket == first);
  CHECK(admitted->key == "a");
  CHECK(core->AccumulatedCost("a") == 4.0);  // charged once, to the key that created it
  CHECK(core->AccumulatedCost("b") == std::nullopt);
  // While it runs, a RunSync-like request joins it; a Submit-like one queues a new job.
  CHECK(enqueue("linux", "e", Join::kPendingOrRunning) == first);
  const JobTicket next = enqueue("linux", "e", Join::kPending);
  CHECK(next != first);
  CHECK(enqueue("linux", "f", Join::kPendingOrRunning) == first);  // the running one first
  CHECK(core->Callers(first).status().code() ==
        absl::StatusCode::kNotFound);  // running: not counted
  REQUIRE(core->Complete(first, 3, 5).ok());
  CHECK(enqueue("linux", "f", Join::kPendingOrRunning) == next);  // now the pending one
  CHECK(core->CheckInvariants().ok());
}

TEST_CASE("Core.Coalesce.AJoinedJobLeavesWithItsLastCaller") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 1;
  auto core = MakeCore(options);
  JobTypeConfig mirror = Type(1, 1);
  mirror.coalesce = Coalesce::kSupersede;  // the core treats both kinds alike
  mirror.max_queue_wait = Seconds(10);
  REQUIRE(core->RegisterType("mirror", mirror).ok());
  REQUIRE(core->RegisterType("other", Type(1, 1)).ok());
  Add(*core, "other", "x");
  REQUIRE(core->NextAdmission(0).has_value());
  const JobTicket job = *core->Enqueue({"mirror", "r", "a", std::nullopt, Join::kPending}, 0);
  REQUIRE(core->Enqueue({"mirror", "r", "b", std::nullopt, Join::kPending}, 4).ok());
  CHECK(core->Cancel(job, 5).ok());
  CHECK(core->Callers(job).value() == 1);
  CHECK(core->TakeSnapshot(0).pending == 1);
  CHECK(core->Cancel(job, 6).ok());  // the last caller: the job leaves, uncharged
  CHECK(core->Callers(job).status().code() == absl::StatusCode::kNotFound);
  CHECK(core->TakeSnapshot(0).pending == 0);
  CHECK(core->AccumulatedCost("a") == 0.0);
  // A joined job keeps its creator's arrival: it expires at 7 + 10 with all its callers, though
  // the joiner came at 12.
  const JobTicket again = *core->Enqueue({"mirror", "r", "a", std::nullopt, Join::kPending}, 7);
  REQUIRE(core->Enqueue({"mirror", "r", "b", std::nullopt, Join::kPending}, 12).ok());
  core->AdvanceTo(17);
  const std::vector<ExpiredJob> expired = core->TakeExpired();
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].ticket == again);
  CHECK(expired[0].expired_at == 17);
  CHECK(core->CheckInvariants().ok());
}

TEST_CASE("Core.Cancel.APendingJobLeavesUnchargedARunningOneIsRefused") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 1;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("t", Type(1, 1, "git", 5)).ok());
  JobTicket a = Add(*core, "t", "r", "k");
  JobTicket b = Add(*core, "t", "r", "k");
  JobTicket c = Add(*core, "t", "x", "k");
  REQUIRE(core->NextAdmission(0).has_value());  // a runs; b will be parked, c is ready
  CHECK(core->AccumulatedCost("k") == 5.0);
  CHECK(core->Cancel(a, 1).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(core->NextAdmission(1) == std::nullopt);  // parks b on the busy resource
  CHECK(core->Cancel(b, 1).ok());
  CHECK(core->Cancel(c, 1).ok());
  CHECK(core->Cancel(c, 1).code() == absl::StatusCode::kNotFound);
  CHECK(core->AccumulatedCost("k") == 5.0);
  CHECK(core->TakeSnapshot(0).pending == 0);
  REQUIRE(core->Complete(a, 1, 2).ok());
  CHECK(core->NextAdmission(2) == std::nullopt);
}

TEST_CASE("Core.QueueWait.AJobStillPendingAtItsLimitExpiresUnchargedParkedOrNot") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 1;
  auto core = MakeCore(options);
  JobTypeConfig limited = Type(1, 1, "git", 5);
  limited.max_queue_wait = Seconds(2);
  REQUIRE(core->RegisterType("t", limited).ok());
  REQUIRE(core->RegisterType("free", Type(1, 1)).ok());
  CHECK(core->NextExpiryAt() == std::nullopt);
  JobTicket a = Add(*core, "t", "r", "a", std::nullopt, 0);
  JobTicket b = Add(*core, "t", "r", "b", std::nullopt, 0.5);  // parked behind a on r
  CHECK(core->NextExpiryAt() == 2.0);
  REQUIRE(AdmitAll(*core, 0.5) == Names{"t/r/a"});  // a is admitted before its limit
  CHECK(core->NextExpiryAt() == 2.5);
  JobTicket c = Add(*core, "t", "x", "c", std::nullopt, 1);
  Add(*core, "free", "y", "d", std::nullopt, 1);  // no limit: never expires
  CHECK_FALSE(core->StepDueBy(2.4));
  core->AdvanceTo(2.4);
  CHECK(core->TakeExpired().empty());
  // At 2.5 b has waited exactly its limit: it leaves; c (limit reached at 3) stays.
  CHECK(core->StepDueBy(2.5));
  core->AdvanceTo(2.5);
  CHECK(core->StepDueBy(2.5));  // b waits to be taken
  std::vector<ExpiredJob> expired = core->TakeExpired();
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].key == "b");
  CHECK(expired[0].ticket == b);
  CHECK(expired[0].arrival == 0.5);
  CHECK(expired[0].expired_at == 2.5);
  CHECK(core->TakeExpired().empty());  // taken once
  CHECK_FALSE(core->StepDueBy(2.9));
  CHECK(core->Describe(b) == std::nullopt);
  CHECK(core->AccumulatedCost("b") == 0.0);
  CHECK(core->NextExpiryAt() == 3.0);
  // NextAdmission expires what is due first: at 3, c is gone before a's slot frees.
  REQUIRE(core->Complete(a, 1, 3).ok());
  CHECK(AdmitAll(*core, 3) == Names{"free/y/d"});
  expired = core->TakeExpired();
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].ticket == c);
  CHECK(core->NextExpiryAt() == std::nullopt);
  CHECK(core->CheckInvariants().ok());
}

TEST_CASE("Core.Pause.APausedJobIsNotAdmittedAndItsAgingClockStops") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 1;
  options.rule.aging = AgingConfig{Seconds(0), Seconds(2), 5};
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("high", Type(5, 1)).ok());
  REQUIRE(core->RegisterType("low", Type(1, 1)).ok());
  JobTicket busy = Add(*core, "high", "x", "h", std::nullopt, 0);
  REQUIRE(AdmitAll(*core, 0) == Names{"high/x/h"});
  Add(*core, "low", "y", "l", std::nullopt, 0);  // would rise one tier at 2
  REQUIRE(core->PauseType("low", 1).ok());
  core->AdvanceTo(10);
  auto aged_into_five = [&] { return core->TakeSnapshot(0).tiers[0].aged_in; };
  CHECK(aged_into_five() == 0);  // paused at 1 after one second of waiting: no step
  REQUIRE(core->ResumeType("low", 10).ok());
  CHECK_FALSE(core->StepDueBy(10.9));
  core->AdvanceTo(10.9);
  CHECK(aged_into_five() == 0);  // one more second of waiting is due at 11
  CHECK(core->StepDueBy(11));
  core->AdvanceTo(11);
  CHECK(aged_into_five() == 1);
  // A paused key: its job stays pending while a slot is free.
  REQUIRE(core->PauseKey("l", 11).ok());
  REQUIRE(core->Complete(busy, 1, 11).ok());
  CHECK(AdmitAll(*core, 11).empty());
  CHECK(core->TakeSnapshot(0).paused_keys == std::vector<std::string>{"l"});
  REQUIRE(core->ResumeKey("l", 12).ok());
  CHECK(AdmitAll(*core, 12) == Names{"low/y/l"});
  CHECK(core->PauseType("nope", 12).code() == absl::StatusCode::kNotFound);
  // A queue-wait limit keeps running while its job is paused.
  JobTypeConfig limited = Type(1, 1);
  limited.max_queue_wait = Seconds(1);
  REQUIRE(core->RegisterType("limited", limited).ok());
  REQUIRE(core->PauseType("limited", 12).ok());
  JobTicket waiting = Add(*core, "limited", "z", "m", std::nullopt, 12);
  core->AdvanceTo(13);
  std::vector<ExpiredJob> expired = core->TakeExpired();
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].ticket == waiting);
  CHECK(core->CheckInvariants().ok());
}

TEST_CASE("Core.Complete.RefusesPendingStaleAndBadElapsed") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("t", Type(1, 1)).ok());
  JobTicket a = Add(*core, "t", "r");
  JobTicket b = Add(*core, "t", "s");
  REQUIRE(core->NextAdmission(0)->ticket == a);
  CHECK(core->Complete(b, 1, 1).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(core->Complete(a, -1, 1).code() == absl::StatusCode::kInvalidArgument);
  CHECK(core->Complete(a, NAN, 1).code() == absl::StatusCode::kInvalidArgument);
  CHECK(core->Complete(a, 1, INFINITY).code() == absl::StatusCode::kInvalidArgument);
  CHECK(core->TakeSnapshot(0).running == 1);
  REQUIRE(core->Complete(a, 1, 1).ok());
  // The ticket of a finished job names nothing, even once its slot is reused.
  CHECK(core->Complete(a, 1, 1).code() == absl::StatusCode::kNotFound);
  Add(*core, "t", "u");
  CHECK(core->Cancel(a, 1).code() == absl::StatusCode::kNotFound);
  CHECK(core->Complete(JobTicket{999, 0}, 1, 1).code() == absl::StatusCode::kNotFound);
}

TEST_CASE("Core.Estimate.LearnsAnEwmaFromObservedCosts") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.alpha = 0.5;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("clone", Type(1, 1, "", 10)).ok());
  CHECK_FALSE(core->Estimate("clone", "linux").has_value());
  Add(*core, "clone", "linux", "a");
  auto first = core->NextAdmission(0);
  CHECK(first->charge == 10);  // the default cost
  REQUIRE(core->Complete(first->ticket, 30, 30).ok());
  CHECK(core->Estimate("clone", "linux") == 20.0);  // 0.5 * 30 + 0.5 * 10
  Add(*core, "clone", "linux", "b", std::nullopt, 30);
  auto second = core->NextAdmission(30);
  CHECK(second->charge == 20.0);
  REQUIRE(core->Complete(second->ticket, 2, 32).ok());
  CHECK(core->Estimate("clone", "linux") == 11.0);  // 0.5 * 2 + 0.5 * 20
  // An explicit cost is charged instead, and the estimate still learns from the run.
  Add(*core, "clone", "linux", "c", 100.0, 32);
  auto third = core->NextAdmission(32);
  CHECK(third->charge == 100.0);
  REQUIRE(core->Complete(third->ticket, 1, 33).ok());
  CHECK(core->Estimate("clone", "linux") == 6.0);
  CHECK(core->Estimate("clone", "git") == std::nullopt);
}

TEST_CASE("Core.Reconcile.KeyEndsChargedWhatItsJobReallyCost") {
  for (bool reconcile : {false, true}) {
    CAPTURE(reconcile);
    SchedulerOptions options = SchedulerOptions::Seed();
    options.rule.reconcile = reconcile;
    auto core = MakeCore(options);
    REQUIRE(core->RegisterType("clone", Type(1, 1, "", 2)).ok());
    Add(*core, "clone", "linux", "a");
    auto a = core->NextAdmission(0);
    CHECK(core->AccumulatedCost("a") == 2.0);
    REQUIRE(core->Complete(a->ticket, 50, 50).ok());
    CHECK(core->AccumulatedCost("a") == (reconcile ? 50.0 : 2.0));
  }
}

// A run that says nothing of its cost (a fenced durable attempt): the key keeps what it was
// charged at admission, the estimate learns nothing, and the slot is free again.
TEST_CASE("Core.CompleteUnmeasured.KeepsTheAdmissionChargeAndLearnsNothing") {
  auto core = MakeCore(SchedulerOptions::Default());  // reconciliation on
  REQUIRE(core->RegisterType("clone", Type(1, 1, "", 2)).ok());
  Add(*core, "clone", "linux", "a");
  auto a = core->NextAdmission(0);
  REQUIRE(a);
  Add(*core, "clone", "git", "b");
  CHECK(!core->NextAdmission(1));  // the type's one slot is a's
  JobView completed;
  REQUIRE(core->CompleteUnmeasured(a->ticket, 50, completed).ok());
  CHECK(completed.id == "linux");
  CHECK(core->AccumulatedCost("a") == 2.0);  // measured, it would be 50
  CHECK(core->Estimate("clone", "linux") == 2.0);
  CHECK(core->NextAdmission(50));  // the slot is free again
  JobView unused;
  CHECK(core->CompleteUnmeasured(a->ticket, 51, unused).code() == absl::StatusCode::kNotFound);
}

// A job given back unused (its caller went away as it was admitted): its key and group are
// charged back what its admission charged them, with or without reconciliation, its estimate
// learns nothing, and its slot is free again. Measured at no time instead, the estimate would
// fall toward 0.
TEST_CASE("Core.CompleteUnused.ChargesBackTheAdmissionAndLearnsNothing") {
  for (bool reconcile : {false, true}) {
    CAPTURE(reconcile);
    SchedulerOptions options = SchedulerOptions::Seed();
    options.rule.reconcile = reconcile;
    auto core = MakeCore(options);
    REQUIRE(core->RegisterType("clone", Type(1, 1, "", 2)).ok());
    REQUIRE(core->SetKeyWeight("a", 4).ok());
    REQUIRE(core->SetKeyGroup("a", "tenant", 0).ok());
    // A first run of linux teaches its estimate 10 and leaves a charged.
    Add(*core, "clone", "linux", "a");
    auto first = core->NextAdmission(0);
    REQUIRE(first);
    REQUIRE(core->Complete(first->ticket, 10, 10).ok());
    const double estimate = *core->Estimate("clone", "linux");
    const double key_before = *core->AccumulatedCost("a");
    const double group_before = *core->GroupAccumulatedCost("tenant");
    Add(*core, "clone", "linux", "a", std::nullopt, 11);
    auto second = core->NextAdmission(11);
    REQUIRE(second);
    CHECK(second->charge == estimate);
    CHECK(*core->AccumulatedCost("a") == key_before + estimate / 4);
    Add(*core, "clone", "git", "b", std::nullopt, 12);
    CHECK(!core->NextAdmission(12));  // the type's one slot is the second run's
    JobView completed;
    REQUIRE(core->CompleteUnused(second->ticket, 30, completed).ok());
    CHECK(completed.id == "linux");
    CHECK(completed.charge == 0);
    CHECK(*core->AccumulatedCost("a") == key_before);
    CHECK(*core->GroupAccumulatedCost("tenant") == group_before);
    CHECK(*core->Estimate("clone", "linux") == estimate);
    CHECK(core->CheckInvariants().ok());
    auto next = core->NextAdmission(30);  // the slot is free again
    REQUIRE(next);
    CHECK(core->Describe(next->ticket)->id == "git");
    CHECK(core->CompleteUnused(second->ticket, 31, completed).code() ==
          absl::StatusCode::kNotFound);
    // A pending job is not running: it cannot be given back.
    const JobTicket pending = Add(*core, "clone", "y", "c", std::nullopt, 32);
    CHECK(core->CompleteUnused(pending, 32, completed).code() ==
          absl::StatusCode::kFailedPrecondition);
  }
}

TEST_CASE("Core.Limits.FullQueuesRefuseWithResourceExhaustedAndDropNothing") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_pending_total = 3;
  options.rule.max_pending_per_key = 2;
  options.rule.max_concurrency = 1;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("t", Type(1, 1)).ok());
  Add(*core, "t", "1", "a");
  Add(*core, "t", "2", "a");
  Status per_key = core->Enqueue({"t", "3", "a"}, 0).status();
  CHECK(per_key.code() == absl::StatusCode::kResourceExhausted);
  CHECK(per_key.message() == "fairness key 'a' already has max_pending_per_key (2) jobs pending");
  Add(*core, "t", "4", "b");
  Status total = core->Enqueue({"t", "5", "c"}, 0).status();
  CHECK(total.code() == absl::StatusCode::kResourceExhausted);
  CHECK(total.message() == "max_pending_total (3) jobs are already pending");
  CHECK_FALSE(core->AccumulatedCost("c").has_value());  // a refused key is not tracked
  // Running jobs do not count against the pending bounds.
  auto running = core->NextAdmission(0);
  REQUIRE(running.has_value());
  Add(*core, "t", "6", "c");
  CHECK(core->TakeSnapshot(0).pending == 3);
}

TEST_CASE("Core.Ttl.IdleKeysAreForgottenAfterKeyTtlInBoundedBatches") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.key_ttl = Seconds(10);
  options.rule.sweep_batch = 2;
  options.rule.max_concurrency = 8;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("t", Type(8, 8)).ok());
  std::vector<JobTicket> tickets;
  for (const char* key : {"a", "b", "c", "d", "e"}) Add(*core, "t", key, key);
  AdmitAll(*core, 0, &tickets);
  for (std::size_t i = 0; i < 4; ++i) REQUIRE(core->Complete(tickets[i], 1, 1).ok());  // a..d
  CHECK(core->Sweep(10.5).keys_evicted == 0);  // idle since 1: not yet 10 s
  CHECK(core->Sweep(11).keys_evicted == 2);    // bounded: a, b
  CHECK(core->AccumulatedCost("a") == std::nullopt);
  CHECK(core->AccumulatedCost("c") == 1.0);
  CHECK(core->Sweep(11).keys_evicted == 2);    // c, d
  CHECK(core->Sweep(1000).keys_evicted == 0);  // e still runs: never forgotten
  CHECK(core->AccumulatedCost("e") == 1.0);
  CHECK(core->TakeSnapshot(0).keys_tracked == 1);
  // A forgotten key starts again from zero.
  Add(*core, "t", "z", "a", std::nullopt, 1000);
  CHECK(core->AccumulatedCost("a") == 0.0);
}

TEST_CASE("Core.Ttl.AKeyThatComesBackBeforeItsTtlKeepsItsCost") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.key_ttl = Seconds(10);
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("t", Type(1, 8, "", 3)).ok());
  Add(*core, "t", "x", "a");
  REQUIRE(core->Complete(core->NextAdmission(0)->ticket, 1, 1).ok());
  Add(*core, "t", "y", "a", std::nullopt, 9);  // active again
  CHECK(core->Sweep(100).keys_evicted == 0);
  CHECK(core->AccumulatedCost("a") == 3.0);
}

TEST_CASE("Core.Ttl.UnusedEstimatesAreForgottenAfterEstimateTtl") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.estimate_ttl = Seconds(100);
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("t", Type(1, 8, "", 1)).ok());
  Add(*core, "t", "old");
  REQUIRE(core->Complete(core->NextAdmission(0)->ticket, 11, 11).ok());
  Add(*core, "t", "new", "", std::nullopt, 50);
  REQUIRE(core->Complete(core->NextAdmission(50)->ticket, 21, 71).ok());
  CHECK(core->Sweep(110).estimates_evicted == 0);
  CHECK(core->Sweep(111).estimates_evicted == 1);
  CHECK(core->Estimate("t", "old") == std::nullopt);
  CHECK(core->Estimate("t", "new").has_value());
  CHECK(core->TakeSnapshot(0).estimates_tracked == 1);
}

TEST_CASE("Core.IdleCatchUp.ANewKeyStartsAtTheLeastCostPendingInItsTier") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.idle_catch_up = true;
  options.rule.max_concurrency = 1;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("t", Type(1, 1)).ok());
  REQUIRE(core->RegisterType("other", Type(2, 1)).ok());
  Add(*core, "t", "1", "a", 4.0);
  Add(*core, "t", "2", "a", 4.0);
  Add(*core, "t", "3", "b", 6.0);
  Add(*core, "t", "4", "b", 6.0);
  AdmitAll(*core);  // a's job 1 runs: a at 4, b at 0 pending
  Add(*core, "t", "5", "c");
  CHECK(core->AccumulatedCost("c") == 0.0);  // least pending in the tier is b's 0
  Add(*core, "t", "6", "c");                 // c is no longer idle: unchanged
  // In a tier where nobody is pending, nothing changes.
  Add(*core, "other", "7", "d");
  CHECK(core->AccumulatedCost("d") == 0.0);
}

// One slot, types t and u; key a's jobs a1 and a2 of t, then key b's b1 and b2 of u (seed rule:
// no reconciliation, a completion charges nothing more).
std::unique_ptr<AdmissionCore> MakeTwoKeysCore(
    SchedulerOptions options = SchedulerOptions::Seed()) {
  options.rule.max_concurrency = 1;
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("t", Type(1, 1)).ok());
  REQUIRE(core->RegisterType("u", Type(1, 1)).ok());
  for (const char* id : {"1", "2"}) {
    Add(*core, "t", std::string("a") + id, "a");
    Add(*core, "u", std::string("b") + id, "b");
  }
  return core;
}

// Admits the next job at 0 and completes it after 1 s; its id.
std::string AdmitAndComplete(AdmissionCore& core) {
  auto a = core.NextAdmission(0);
  REQUIRE(a.has_value());
  const std::string id(a->id);
  REQUIRE(core.Complete(a->ticket, 1, 0).ok());
  return id;
}

TEST_CASE("Core.SetAccumulatedCost.MovesAKeysPendingJobsToTheirNewPlace") {
  auto core = MakeTwoKeysCore();
  // Other replicas charged a: b goes first, for its jobs of both lanes.
  CHECK(*core->SetAccumulatedCost("a", 10));
  CHECK(core->CheckInvariants().ok());
  auto next = [&] { return AdmitAndComplete(*core); };
  CHECK(next() == "b1");  // b at 1 now
  CHECK(*core->SetAccumulatedCost("b", 20));
  CHECK(core->AccumulatedCost("b") == 20.0);
  CHECK(next() == "a1");
  CHECK(next() == "a2");
  CHECK(next() == "b2");
  CHECK(core->CheckInvariants().ok());
  CHECK_FALSE(*core->SetAccumulatedCost("nobody", 1));  // not tracked: nothing to move
  CHECK_FALSE(core->AccumulatedCost("nobody").has_value());
  CHECK(core->SetAccumulatedCost("a", -1).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(core->SetAccumulatedCost("a", std::nan("")).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Core.Charge.AddsWorkDoneWithoutAJobToTheKeyAndMovesItsJobs") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.key_ttl = Seconds(10);
  auto core = MakeTwoKeysCore(options);
  // a was first; a charge of 3 puts both of its lanes behind b.
  REQUIRE(core->Charge("a", 3, 0).ok());
  CHECK(core->AccumulatedCost("a") == 3.0);
  CHECK(core->CheckInvariants().ok());
  auto next = [&] { return AdmitAndComplete(*core); };
  CHECK(next() == "b1");  // b at 1
  CHECK(next() == "b2");  // b at 2, still below a's 3
  CHECK(next() == "a1");
  // Divided by the key's weight, as an admission's charge is.
  REQUIRE(core->SetKeyWeight("b", 4).ok());
  REQUIRE(core->Charge("b", 2, 0).ok());
  CHECK(core->AccumulatedCost("b") == 2.5);
  CHECK(core->CheckInvariants().ok());
  // Refused, and nothing charged: a cost that is not finite and >= 0, a time that is not finite.
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    CHECK(core->Charge("b", bad, 0).code() == absl::StatusCode::kInvalidArgument);
  }
  CHECK(core->Charge("b", 1, std::nan("")).code() == absl::StatusCode::kInvalidArgument);
  CHECK(core->AccumulatedCost("b") == 2.5);
  CHECK_FALSE(core->AccumulatedCost("never").has_value());
  // A key not tracked becomes tracked, idle from the charge; a later charge restarts its clock.
  REQUIRE(core->Charge("cached", 0.5, 1).ok());
  CHECK(core->AccumulatedCost("cached") == 0.5);
  REQUIRE(core->Charge("cached", 0.5, 8).ok());
  core->Sweep(15);  // 14 s after the first charge, 7 after the second: kept
  CHECK(core->AccumulatedCost("cached") == 1.0);
  core->Sweep(18);
  CHECK_FALSE(core->AccumulatedCost("cached").has_value());
  CHECK(core->CheckInvariants().ok());
}

// One slot; clones (tier 8, estimated at 2) and repacks (tier 1), which age into tier 8 after
// 2 s pending.
std::unique_ptr<AdmissionCore> MakeCloneAndAgingRepackCore() {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 1;
  options.rule.aging = AgingConfig{Seconds(1), Seconds(1), 8};
  auto core = MakeCore(options);
  REQUIRE(core->RegisterType("clone", Type(8, 8, "", 2)).ok());
  REQUIRE(core->RegisterType("repack", Type(1, 1)).ok());
  return core;
}

TEST_CASE("Core.Describe.TellsWhatTheCoreKnowsOfALiveJobAndNothingOfAFinishedOne") {
  auto core = MakeCloneAndAgingRepackCore();
  const JobTicket clone = *core->Enqueue({"clone", "linux", "alice"}, 0);
  const JobTicket repack = *core->Enqueue({"repack", "git", "", 5.0}, 0);
  REQUIRE(core->NextAdmission(0)->ticket == clone);
  core->AdvanceTo(2);  // the repack ages into tier 8
  const std::optional<JobView> running = core->Describe(clone);
  REQUIRE(running.has_value());
  CHECK(running->type == "clone");
  CHECK(running->id == "linux");
  CHECK(running->key == "alice");
  CHECK(running->running);
  CHECK(running->charge == 2);
  CHECK(running->priority == 8);
  CHECK(running->effective_priority == 8);
  const std::optional<JobView> pending = core->Describe(repack);
  REQUIRE(pending.has_value());
  CHECK_FALSE(pending->running);
  CHECK(pending->priority == 1);
  CHECK(pending->effective_priority == 8);
  CHECK(pending->arrival == 0);
  CHECK(pending->type_index == 1);
  REQUIRE(core->Complete(clone, 1, 3).ok());
  CHECK_FALSE(core->Describe(clone).has_value());
  // Admitted from the tier it aged into: the running job remembers that tier.
  REQUIRE(core->NextAdmission(3)->ticket == repack);
  CHECK(core->Describe(repack)->effective_priority == 8);
  CHECK(core->Describe(repack)->charge == 5);
}

TEST_CASE("Core.Complete.DescribesTheJobItEndsAsDescribeDidJustBefore") {
  auto core = MakeCloneAndAgingRepackCore();
  const JobTicket clone = *core->Enqueue({"clone", "linux", "alice"}, 0);
  const JobTicket repack = *core->Enqueue({"repack", "git", "bob", 5.0}, 0.5);
  REQUIRE(core->NextAdmission(0.5)->ticket == clone);

  // A job that did not complete leaves the view as it was.
  JobView untouched;
  untouched.type_index = 99;
  CHECK(core->Complete(repack, 1, 1, untouched).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(core->Complete(JobTicket{1000, 0}, 1, 1, untouched).code() == absl::StatusCode::kNotFound);
  CHECK(core->Complete(clone, -1, 1, untouched).code() == absl::StatusCode::kInvalidArgument);
  CHECK(untouched.type_index == 99);
  CHECK(untouched.type.empty());

  // The running clone, and the repack admitted from the tier it aged into (its effective tier
  // differs from its own, its charge is its explicit cost).
  auto check_completion_describes = [&](JobTicket ticket, double now) {
    const std::optional<JobView> before = core->Describe(ticket);
    REQUIRE(before.has_value());
    JobView completed;
    REQUIRE(core->Complete(ticket, 1, now, completed).ok());
    CHECK_FALSE(core->Describe(ticket).has_value());
    // Read after the completion: the views outlive the job until the next enqueue.
    CHECK(completed.type == before->type);
    CHECK(completed.id == before->id);
    CHECK(completed.key == before->key);
    CHECK(completed.type_index == before->type_index);
    CHECK(completed.priority == before->priority);
    CHECK(completed.effective_priority == before->effective_priority);
    CHECK(completed.arrival == before->arrival);
    CHECK(completed.running);
    CHECK(completed.charge == before->charge);
  };
  check_completion_describes(clone, 3);
  core->AdvanceTo(3);
  REQUIRE(core->NextAdmission(3)->ticket == repack);
  REQUIRE(core->Describe(repack)->effective_priority == 8);
  REQUIRE(core->Describe(repack)->priority == 1);
  check_completion_describes(repack, 4);
}

TEST_CASE("Core.Snapshot.CountsPerTierAndType") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("a", Type(2, 1)).ok());
  REQUIRE(core->RegisterType("b", Type(5, 2)).ok());
  REQUIRE(core->RegisterType("c", Type(2, 1)).ok());
  Add(*core, "a", "1");
  Add(*core, "a", "2");
  Add(*core, "b", "3");
  AdmitAll(*core);
  const Snapshot s = core->TakeSnapshot(0);
  CHECK(s.max_concurrency == 8);
  CHECK(s.running == 2);
  CHECK(s.pending == 1);
  REQUIRE(s.tiers.size() == 2);
  CHECK(s.tiers[0].priority == 5);
  CHECK(s.tiers[1].priority == 2);
  CHECK(s.tiers[1].pending == 1);
  REQUIRE(s.types.size() == 3);
  CHECK(s.types[0].name == "a");
  CHECK(s.types[0].running == 1);
  CHECK(s.types[0].pending == 1);
  CHECK(s.types[2].name == "c");
  CHECK(s.keys_tracked == 1);
}

// EnqueueAndAdmit against Enqueue followed (when that queued a new job) by NextAdmission, on two
// cores given the same random sequences: the same tickets, the same admissions with every field
// of their evidence, the same snapshots, costs, estimates and expiries. The differential tests
// check the decisions against the reference model; this checks what the model does not know
// (the evidence of a job admitted without entering the order).
TEST_CASE("Core.EnqueueAndAdmit.IsEnqueueThenNextAdmission") {
  // Under the sanitizers (several times slower) a tenth of the seeds, as the differential tests
  // do: they look for memory errors, which fewer runs find as well.
#if FAIRGATE_SANITIZED
  constexpr std::uint64_t kSeeds = 30;
#else
  constexpr std::uint64_t kSeeds = 300;
#endif
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
    SchedulerOptions options = SchedulerOptions::Seed();
    options.rule.max_concurrency = 1 + pick(5);
    options.rule.key_ttl = Seconds(1 + pick(4));
    options.rule.estimate_ttl = Seconds(1 + pick(4));
    options.rule.idle_catch_up = chance(0.5);
    options.rule.shortest_first = chance(0.2);
    if (chance(0.5)) options.rule.aging = AgingConfig{Seconds(pick(3)), Seconds(0.5 + pick(3)), 3};
    if (chance(0.3)) options.rule.default_key_limits = {1 + pick(2), pick(2)};
    auto a = MakeCore(options);
    auto b = MakeCore(options);
    const std::vector<std::string> types{"t0", "t1", "t2", "t3"};
    for (const std::string& name : types) {
      JobTypeConfig config =
          Type(1 + pick(3), 1 + pick(3), chance(0.5) ? "git" : "", static_cast<double>(pick(4)));
      if (!config.conflict_group.empty()) config.conflict_limit = 1 + pick(2);
      if (chance(0.3)) config.slots = 1 + pick(2);
      if (chance(0.2)) config.max_queue_wait = Seconds(1 + pick(3));
      if (chance(0.2)) config.coalesce = Coalesce::kJoin;
      REQUIRE(a->RegisterType(name, config).code() == b->RegisterType(name, config).code());
    }
    const std::vector<std::string> keys{"a", "b", "c", "d"};
    std::vector<JobTicket> running, queued;
    double now = 0;
    auto same_admission = [&](const std::optional<Admission>& x,
                              const std::optional<Admission>& y) {
      REQUIRE(x.has_value() == y.has_value());
      if (!x) return;
      CHECK(x->ticket == y->ticket);
      CHECK(x->weight == y->weight);
      CHECK(ToJsonLine(internal::ToEvidence(*x, now)) == ToJsonLine(internal::ToEvidence(*y, now)));
      running.push_back(x->ticket);
    };
    for (int op = 0; op < 200; ++op) {
      CAPTURE(op);
      const int kind = pick(100);
      if (kind < 10) {
        now += std::vector<double>{0, 0.5, 1, 2.5}[static_cast<std::size_t>(pick(4))];
      } else if (kind < 50) {
        const std::string id = "r" + std::to_string(pick(4));
        const EnqueueRequest request{types[static_cast<std::size_t>(pick(4))], id,
                                     keys[static_cast<std::size_t>(pick(4))],
                                     chance(0.3) ? std::optional<double>(pick(5)) : std::nullopt,
                                     chance(0.3) ? Join::kPendingOrRunning : Join::kPending};
        std::optional<Admission> got;
        const StatusOr<JobTicket> x = a->EnqueueAndAdmit(request, now, got);
        const std::int64_t live = b->pending_jobs() + b->TakeSnapshot(0).running;
        const StatusOr<JobTicket> y = b->Enqueue(request, now);
        REQUIRE(x.status().code() == y.status().code());
        if (!x.ok()) continue;
        REQUIRE(*x == *y);
        queued.push_back(*x);
        const bool new_job = b->pending_jobs() + b->TakeSnapshot(0).running > live;
        same_admission(got, new_job ? b->NextAdmission(now) : std::nullopt);
      } else if (kind < 65) {
        same_admission(a->NextAdmission(now), b->NextAdmission(now));
      } else if (kind < 85) {
        if (running.empty()) continue;
        const std::size_t i = static_cast<std::size_t>(pick(static_cast<int>(running.size())));
        const double elapsed = pick(4);
        REQUIRE(a->Complete(running[i], elapsed, now).code() ==
                b->Complete(running[i], elapsed, now).code());
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (kind < 90) {
        if (queued.empty()) continue;
        const JobTicket t = queued[static_cast<std::size_t>(pick(static_cast<int>(queued.size())))];
        REQUIRE(a->Cancel(t, now).code() == b->Cancel(t, now).code());
      } else if (kind < 94) {
        const std::string& key = keys[static_cast<std::size_t>(pick(4))];
        const KeyLimits limits{pick(3), pick(2)};
        REQUIRE(a->SetKeyLimits(key, limits).ok() == b->SetKeyLimits(key, limits).ok());
        const double weight = 0.5 + pick(3);
        REQUIRE(a->SetKeyWeight(key, weight).ok() == b->SetKeyWeight(key, weight).ok());
      } else if (kind < 97) {
        const bool pause = chance(0.5);
        const std::string& type = types[static_cast<std::size_t>(pick(4))];
        const std::string& key = keys[static_cast<std::size_t>(pick(4))];
        if (chance(0.5)) {
          REQUIRE((pause ? a->PauseType(type, now) : a->ResumeType(type, now)).ok() ==
                  (pause ? b->PauseType(type, now) : b->ResumeType(type, now)).ok());
        } else {
          REQUIRE((pause ? a->PauseKey(key, now) : a->ResumeKey(key, now)).ok() ==
                  (pause ? b->PauseKey(key, now) : b->ResumeKey(key, now)).ok());
        }
      } else if (kind < 99) {
        const SweepResult x = a->Sweep(now);
        const SweepResult y = b->Sweep(now);
        CHECK(x.keys_evicted == y.keys_evicted);
        CHECK(x.estimates_evicted == y.estimates_evicted);
      } else {
        const int capacity = 1 + pick(options.rule.max_concurrency);
        REQUIRE(a->SetCapacity(capacity).ok() == b->SetCapacity(capacity).ok());
      }
      REQUIRE(a->CheckInvariants().ok());
      REQUIRE(b->CheckInvariants().ok());
      std::vector<JobTicket> expired_a, expired_b;
      for (const ExpiredJob& e : a->TakeExpired()) expired_a.push_back(e.ticket);
      for (const ExpiredJob& e : b->TakeExpired()) expired_b.push_back(e.ticket);
      CHECK(expired_a == expired_b);
      CHECK(ToJson(a->TakeSnapshot(0)) == ToJson(b->TakeSnapshot(0)));
      CHECK(a->HeaviestKeys(10) == b->HeaviestKeys(10));
      for (const std::string& type : types) {
        for (const std::string id : {"r0", "r1", "r2", "r3"}) {
          CHECK(a->Estimate(type, id) == b->Estimate(type, id));
        }
      }
    }
  }
}

}  // namespace admission_core_test
}  // namespace
}  // namespace fairgate::core
