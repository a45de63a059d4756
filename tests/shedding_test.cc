// Shedding (fairgate/shedding.h; docs/ordering.md, "Shedding"): when a type's queue stands, the
// heaviest keys' work is refused, at the arrival of a call and from the queue; worked by hand on
// the core, then through a scheduler, whose callers, events and metrics say so. The differential
// tests hold the core to the reference model under random shedding as well.
#include "fairgate/shedding.h"

#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/admission_core.h"
#include "doctest/doctest.h"
#include "fairgate/observer.h"
#include "fairgate/rate_limit.h"
#include "fairgate/scheduler.h"
#include "runtime_test_util.h"
#include "test_job_types.h"

namespace fairgate {
namespace {
namespace shedding_test {

using core::AdmissionCore;
using testing::Type;

// One job at a time (a tier of 1 slot, no lending), shedding with `target` and `interval`.
JobTypeConfig Shedding1(double target, double interval) {
  JobTypeConfig config = Type(1, 1);
  config.shedding = {Seconds(target), Seconds(interval)};
  return config;
}

std::unique_ptr<AdmissionCore> MakeCore() {
  RuleOptions rule = RuleOptions::Seed();
  rule.max_concurrency = 4;
  auto core = AdmissionCore::Create(rule);
  REQUIRE(core.ok());
  return *std::move(core);
}

void Add(AdmissionCore& core, std::string_view id, double now, std::string_view key) {
  StatusOr<core::JobTicket> ticket = core.Enqueue({"clone", id, key}, now);
  REQUIRE_MESSAGE(ticket.ok(), ticket.status().message());
}

// The jobs admitted, by id, to complete them by.
struct Admitted {
  std::map<std::string, core::JobTicket> tickets;
  // The id NextAdmission(now) admits ("" if none).
  std::string Next(AdmissionCore& core, double now) {
    std::optional<core::Admission> a = core.NextAdmission(now);
    if (!a) return "";
    tickets[std::string(a->id)] = a->ticket;
    return std::string(a->id);
  }
  void Complete(AdmissionCore& core, const std::string& id, double now) {
    REQUIRE(core.Complete(tickets.at(id), 1, now).ok());
  }
};

std::vector<std::string> ShedIds(AdmissionCore& core) {
  std::vector<std::string> ids;
  for (const core::ExpiredJob& job : core.TakeExpired()) {
    CHECK(WasShed(job.shed));
    CHECK(RetryAfter(job.shed) == 2.0);
    ids.emplace_back(job.id);
  }
  return ids;
}

TEST_CASE("Shedding.BadSettingsAreRefusedNamingTheirField") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [target, interval, field] :
       std::vector<std::tuple<double, double, std::string>>{{-1, 1, "shedding.target"},
                                                            {nan, 1, "shedding.target"},
                                                            {inf, 1, "shedding.target"},
                                                            {1, 0, "shedding.interval"},
                                                            {1, -2, "shedding.interval"},
                                                            {1, inf, "shedding.interval"}}) {
    CAPTURE(target);
    CAPTURE(interval);
    auto core = MakeCore();
    const Status refused = core->RegisterType("clone", Shedding1(target, interval));
    CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(refused.message()).find(field) != std::string::npos);
  }
  CHECK(ValidateShedding({}, "shedding").ok());  // off
  CHECK_FALSE(WasShed(absl::ResourceExhaustedError("full")));
}

// Target 1 s, interval 2 s. The heavy key's four jobs queue at 0 and the first runs; the oldest
// waiting (h2) reaches the target at 1, so the queue stands from 3. A heavy call then is refused
// (its key is the heaviest, and its job the latest); a light call takes the place of the heavy
// key's latest pending job; each admission sheds the heaviest pending job too, until the queue
// is empty; a new queue starts its clock again.
TEST_CASE("Shedding.AStandingQueueRefusesTheHeaviestKeysLatestWorkFirst") {
  auto core = MakeCore();
  Admitted admitted;
  REQUIRE(core->RegisterType("clone", Shedding1(1, 2)).ok());
  REQUIRE(core->Charge("heavy", 100, 0).ok());
  for (const char* id : {"h1", "h2", "h3", "h4"}) Add(*core, id, 0, "heavy");
  CHECK(admitted.Next(*core, 0) == "h1");
  Add(*core, "h5", 2.9, "heavy");  // not standing yet: 2.9 < 1 + 2
  CHECK(core->TakeExpired().empty());
  CHECK_FALSE(core->TakeSnapshot(2.9).types[0].shedding->standing);

  const Status refused = core->Enqueue({"clone", "h6", "heavy"}, 3).status();
  CHECK(refused.code() == absl::StatusCode::kResourceExhausted);
  CHECK(WasShed(refused));
  CHECK(RetryAfter(refused) == 2.0);
  CHECK(std::string(refused.message()).find("job type 'clone' is shedding load") !=
        std::string::npos);
  CHECK(core->TakeSnapshot(3).types[0].shedding->standing);

  Add(*core, "l1", 3, "light");  // lighter than every pending job: h5 goes in its place
  CHECK(ShedIds(*core) == std::vector<std::string>{"h5"});
  admitted.Complete(*core, "h1", 3);
  CHECK(admitted.Next(*core, 3) == "l1");  // the light key first; then the queue still stands:
  CHECK(ShedIds(*core) == std::vector<std::string>{"h4"});  // the heavy key's latest goes
  admitted.Complete(*core, "l1", 3.5);
  CHECK(admitted.Next(*core, 3.5) == "h2");  // h3, the oldest now, had waited 3.5 s: still
  CHECK(ShedIds(*core) == std::vector<std::string>{"h3"});  // standing, and h3 is the heaviest
  CHECK(core->pending_jobs() == 0);
  CHECK_FALSE(core->TakeSnapshot(3.5).types[0].shedding->standing);

  // An empty queue stood for nothing: the next job waits its own target and interval.
  Add(*core, "h7", 4, "heavy");
  Add(*core, "h8", 5.9, "heavy");  // h7 reached the target at 5: standing from 7
  CHECK(core->TakeExpired().empty());
  CHECK(core->Enqueue({"clone", "h9", "heavy"}, 7).status().code() ==
        absl::StatusCode::kResourceExhausted);
  const Snapshot snapshot = core->TakeSnapshot(7);
  REQUIRE(snapshot.types[0].shedding.has_value());
  CHECK(snapshot.types[0].shedding->shed == 5);  // h6 and h9 at arrival; h5, h4, h3 queued
  CHECK(core->CheckInvariants().ok());
}

// A queue whose oldest job is admitted, leaving one that has waited less than the target, did
// not stand: its clock starts again from that job. And a request that joins a queued job of its
// id (coalescing) is never refused.
TEST_CASE("Shedding.AQueueThatDropsBelowItsTargetStartsAgain") {
  auto core = MakeCore();
  Admitted admitted;
  JobTypeConfig config = Shedding1(1, 2);
  config.coalesce = Coalesce::kJoin;
  REQUIRE(core->RegisterType("clone", config).ok());
  Add(*core, "r", 0, "k");
  CHECK(admitted.Next(*core, 0) == "r");
  Add(*core, "j1", 0, "k");  // the oldest: late from 1, standing from 3
  // j2 may be joined; once the oldest, it is late from 2.5.
  REQUIRE(core->Enqueue({"clone", "j2", "k", {}, core::Join::kPending}, 1.5).ok());
  admitted.Complete(*core, "r", 1.6);
  CHECK(admitted.Next(*core, 1.6) == "j1");  // j2 has waited 0.1 s: the clock starts again
  Add(*core, "j3", 3, "k");                  // at 3 the queue does not stand (2.5 + 2 = 4.5)
  CHECK(core->TakeExpired().empty());
  StatusOr<core::JobTicket> joined =
      core->Enqueue({"clone", "j2", "k", {}, core::Join::kPending}, 4.5);
  REQUIRE(joined.ok());  // standing now, but a join adds no job
  CHECK(core->Enqueue({"clone", "j4", "k"}, 4.5).status().code() ==
        absl::StatusCode::kResourceExhausted);  // j4 would be the heaviest: refused
  CHECK(core->TakeExpired().empty());
  CHECK(core->CheckInvariants().ok());
}

TEST_SUITE_BEGIN("runtime");

// Records each kShed and kReject event as "kind id".
std::shared_ptr<testing::EventLines> ShedAndRejectRecorder() {
  return std::make_shared<testing::EventLines>([](const JobEvent& e) -> std::string {
    if (e.kind != JobEvent::Kind::kShed && e.kind != JobEvent::Kind::kReject) return "";
    return std::string(JobEventKindName(e.kind)) + " " + e.id +
           (WasShed(e.status) ? "" : " (not shed)");
  });
}

// Through a scheduler on a clock the test moves: a holder keeps the one slot while the heavy key
// queues three jobs at 0. At 3 the queue stands: the heavy key's next Submit is refused at once
// (503-worthy: WasShed, RetryAfter 2); a light key's is queued and the heavy key's latest
// pending job leaves, its callback told the same; when the holder ends, the light job runs and
// the heavy key's next latest is shed; its oldest runs. Events, snapshot and metrics count them.
TEST_CASE("Scheduler.Shedding.TheHeaviestKeysCallersAreRefusedAndTheLightOneIsServed") {
  testing::Watchdog watchdog("shedding", std::chrono::seconds(60));
  testing::TestClock clock;
  auto recorder = ShedAndRejectRecorder();
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.max_concurrency = 4;
  options.runtime.clock = clock.Fn();
  options.runtime.observers = {recorder};
  auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE(created.ok());
  std::unique_ptr<Scheduler> scheduler = *std::move(created);
  REQUIRE(scheduler->RegisterType("clone", Shedding1(1, 2)).ok());
  REQUIRE(scheduler->Charge("heavy", 100).ok());
  testing::Gate gate;
  testing::Log ran;
  std::mutex mutex;
  std::map<std::string, Status> told;
  auto submit = [&](const char* id, const char* key, Scheduler::JobFn fn = nullptr) {
    return scheduler->Submit(
        {TypeName("clone"), JobId(id), FairnessKey(key)},
        fn ? fn
           : [&, id](const Context&) {
               ran.Add(id);
               return absl::OkStatus();
             },
        [&, id](const Status& status) {
          std::lock_guard lock(mutex);
          told[id] = status;
        });
  };
  auto told_of = [&](const char* id) {
    std::lock_guard lock(mutex);
    return told.count(id) > 0;
  };
  REQUIRE(submit("holder", "holder", testing::HoldUntil(gate)).ok());
  REQUIRE(testing::Eventually([&] { return scheduler->Snapshot().types[0].running == 1; }));
  for (const char* id : {"h1", "h2", "h3"}) REQUIRE(submit(id, "heavy").ok());
  REQUIRE(testing::Eventually([&] { return scheduler->Snapshot().types[0].pending == 3; }));

  clock.Set(3);
  const Status refused = submit("h4", "heavy");
  CHECK(refused.code() == absl::StatusCode::kResourceExhausted);
  CHECK(WasShed(refused));
  CHECK(RetryAfter(refused) == 2.0);
  REQUIRE(submit("l1", "light").ok());
  REQUIRE(testing::Eventually([&] { return told_of("h3"); }));
  gate.Open();
  REQUIRE(testing::Eventually([&] { return told_of("holder") && told_of("l1") && told_of("h1"); }));
  CHECK(ran.entries() == std::vector<std::string>{"l1", "h1"});
  {
    std::lock_guard lock(mutex);
    for (const char* id : {"h3", "h2"}) {
      CAPTURE(id);
      REQUIRE(told.count(id) == 1);
      CHECK(WasShed(told[id]));
      CHECK(RetryAfter(told[id]) == 2.0);
    }
    CHECK(told["l1"].ok());
    CHECK(told["h1"].ok());
  }
  const Snapshot snapshot = scheduler->Snapshot();
  REQUIRE(snapshot.types[0].shedding.has_value());
  CHECK(snapshot.types[0].shedding->shed == 3);
  CHECK(ToJson(snapshot).find(R"("shedding":{"standing":false,"shed":3})") != std::string::npos);
  std::string metrics;
  scheduler->WriteMetrics(metrics);
  CHECK(metrics.find("fairgate_jobs_shed_total{type=\"clone\"} 3") != std::string::npos);
  CHECK(metrics.find("fairgate_type_shedding{type=\"clone\"} 0") != std::string::npos);
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());
  CHECK(recorder->lines() == std::vector<std::string>{"reject h4", "shed h3", "shed h2"});
}

TEST_SUITE_END();

}  // namespace shedding_test
}  // namespace
}  // namespace fairgate
