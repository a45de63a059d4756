// Workers through the Scheduler (fairgate/worker.h): the job's context and a permit name the
// worker its admission chose, a worker's removal ends its running jobs once with Unavailable and
// frees their slots at once, a late completion counts nowhere, and the snapshot shows who serves
// what. No test asserts how long anything took.
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/observer.h"
#include "fairgate/permit.h"
#include "fairgate/scheduler.h"
#include "runtime_test_util.h"
#include "test_job_types.h"

TEST_SUITE_BEGIN("runtime");

namespace fairgate {
namespace {
namespace scheduler_workers_test {

using namespace std::chrono_literals;
using testing::Eventually;
using testing::Gate;
using testing::Type;
using testing::Watchdog;

std::unique_ptr<Scheduler> Make(int capacity = 8) {
  SchedulerOptions options;
  options.rule.max_concurrency = capacity;
  auto scheduler = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE_MESSAGE(scheduler.ok(), scheduler.status().message());
  return *std::move(scheduler);
}

JobName Job(const char* type, const char* id, const char* key) {
  return {TypeName(type), JobId(id), FairnessKey(key)};
}

TEST_CASE("Scheduler.Workers.TheJobsContextNamesTheMostSpecialisedWorker") {
  // Before the scheduler, so that they outlive the jobs that use them.
  Gate done;
  Watchdog watchdog("workers context", 60s);
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("pdf", Type(8, 8)).ok());
  REQUIRE(scheduler->RegisterType("excel", Type(8, 8)).ok());
  REQUIRE(scheduler->AddWorker("both", WorkerConfig{1, {"pdf", "excel"}, {}}).ok());
  REQUIRE(scheduler->AddWorker("pdf-only", WorkerConfig{1, {"pdf"}, {}}).ok());
  std::string seen;
  REQUIRE(scheduler
              ->RunSync(Context::Background(), Job("pdf", "a", "k"),
                        [&](const Context& ctx) {
                          seen = std::string(ctx.Worker());
                          return absl::OkStatus();
                        })
              .ok());
  CHECK(seen == "pdf-only");
  // A Submit job's context too, and a context made from it inherits the name.
  std::string submitted, child;
  REQUIRE(scheduler
              ->Submit(Job("excel", "b", "k"),
                       [&](const Context& ctx) {
                         submitted = std::string(ctx.Worker());
                         child = std::string(WithCancel(ctx).first.Worker());
                         done.Open();
                         return absl::OkStatus();
                       })
              .ok());
  REQUIRE(done.Wait());
  CHECK(submitted == "both");
  CHECK(child == "both");
  // Without workers a context names none.
  auto plain = Make();
  REQUIRE(plain->RegisterType("pdf", Type(8, 8)).ok());
  std::string none = "unset";
  REQUIRE(plain
              ->RunSync(Context::Background(), Job("pdf", "a", "k"),
                        [&](const Context& ctx) {
                          none = std::string(ctx.Worker());
                          return absl::OkStatus();
                        })
              .ok());
  CHECK(none.empty());
}

// The permit of an Acquire admitted at once (its callback runs inside the call), or none.
std::optional<Permit> AcquireAtOnce(Scheduler& scheduler, const JobName& job) {
  std::optional<Permit> permit;
  REQUIRE(scheduler
              .Acquire(Context::Background(), job,
                       [&](StatusOr<Permit> p) {
                         REQUIRE(p.ok());
                         permit.emplace(*std::move(p));
                       })
              .ok());
  return permit;
}

TEST_CASE("Scheduler.Workers.APermitNamesItsWorker") {
  Watchdog watchdog("workers permit", 60s);
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("render", Type(8, 8)).ok());
  REQUIRE(scheduler->AddWorker("gpu-1", WorkerConfig{1, {"render"}, {}}).ok());
  std::optional<Permit> permit = AcquireAtOnce(*scheduler, Job("render", "a", "k"));
  REQUIRE(permit);
  CHECK(permit->Worker() == "gpu-1");
  permit->Release();
  CHECK(permit->Worker().empty());
}

// A permit's holder learns of its worker's removal from the permit's job context: it is
// cancelled with the loss, and a function registered on it (OnCancel) is called.
TEST_CASE("Scheduler.Workers.APermitsJobContextEndsWhenItsWorkerIsRemoved") {
  Watchdog watchdog("workers permit context", 60s);
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("render", Type(8, 8)).ok());
  // Admitted before any worker: nothing can end its context.
  std::optional<Permit> unplaced = AcquireAtOnce(*scheduler, Job("render", "a", "k"));
  REQUIRE(unplaced);
  CHECK(unplaced->JobContext().state() == nullptr);
  unplaced->Release();
  REQUIRE(scheduler->AddWorker("gpu-1", WorkerConfig{1, {"render"}, {}}).ok());
  std::optional<Permit> permit = AcquireAtOnce(*scheduler, Job("render", "b", "k"));
  REQUIRE(permit);
  const Context ctx = permit->JobContext();
  CHECK(ctx.Worker() == "gpu-1");
  CHECK_FALSE(ctx.Done());
  std::atomic<int> told{0};
  CancelCallback callback = OnCancel(ctx, [&] { ++told; });
  REQUIRE(scheduler->RemoveWorker("gpu-1").ok());
  REQUIRE(ctx.WaitFor(20s));
  CHECK(WorkerLost(ctx.Err()));
  REQUIRE(Eventually([&] { return told.load() == 1; }));
  CHECK(callback.Stop());
  permit->Release();  // completes nothing: the job ended at the removal
  CHECK(scheduler->Snapshot().running == 0);
  CHECK(permit->JobContext().state() == nullptr);  // empty now: Background
}

TEST_CASE("Scheduler.Workers.AVersatileWorkerStaysFreeForTheJobOnlyItCanRun") {
  Watchdog watchdog("workers versatile", 60s);
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("common", Type(8, 8)).ok());
  REQUIRE(scheduler->RegisterType("rare", Type(8, 8)).ok());
  REQUIRE(scheduler->AddWorker("versatile", WorkerConfig{1, {"common", "rare"}, {}}).ok());
  REQUIRE(scheduler->AddWorker("specialist", WorkerConfig{1, {"common"}, {}}).ok());
  Gate release_common;
  std::atomic<int> started{0};
  std::string common_worker;
  std::thread common([&] {
    (void)scheduler->RunSync(
        Context::Background(), Job("common", "c", "k"), [&](const Context& ctx) {
          common_worker = std::string(ctx.Worker());
          ++started;
          return release_common.Wait() ? absl::OkStatus() : absl::InternalError("gate");
        });
  });
  REQUIRE(Eventually([&] { return started.load() == 1; }));
  CHECK(common_worker == "specialist");
  // The rare job runs at once: the versatile worker was kept free.
  std::string rare_worker;
  REQUIRE(scheduler
              ->RunSync(Context::Background(), Job("rare", "r", "k2"),
                        [&](const Context& ctx) {
                          rare_worker = std::string(ctx.Worker());
                          return absl::OkStatus();
                        })
              .ok());
  CHECK(rare_worker == "versatile");
  release_common.Open();
  common.join();
}

TEST_CASE("Scheduler.Workers.RemovingAWorkerEndsItsJobsOnceWithUnavailable") {
  // Before the scheduler, so that they outlive the jobs that use them.
  std::mutex mutex;
  std::vector<Status> submit_results;
  bool submit_lost = false;  // WorkerLost of what the callback got (Own keeps no payload)
  Gate submit_done;
  Watchdog watchdog("workers removal", 60s);
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("build", Type(8, 8)).ok());
  REQUIRE(scheduler->AddWorker("arm-1", WorkerConfig{2, {"build"}, {}}).ok());
  REQUIRE(scheduler->AddWorker("arm-2", WorkerConfig{1, {"build"}, {}}).ok());
  // A RunSync and a Submit on arm-1, waiting for their worker's reply, which never comes: their
  // functions return when their context is cancelled.
  std::atomic<int> on_arm1{0};
  auto wait_for_worker = [&](const Context& ctx) -> Status {
    if (ctx.Worker() == "arm-1") ++on_arm1;
    ctx.WaitFor(20s);
    return ctx.Err().ok() ? absl::OkStatus() : absl::InternalError("the worker never answered");
  };
  std::optional<Status> sync_result;
  std::thread sync([&] {
    sync_result =
        scheduler->RunSync(Context::Background(), Job("build", "a", "k1"), wait_for_worker);
  });
  REQUIRE(scheduler
              ->Submit(Job("build", "b", "k2"), wait_for_worker,
                       [&](const Status& s) {
                         std::lock_guard lock(mutex);
                         submit_results.push_back(testing::Own(s));
                         submit_lost = WorkerLost(s);
                         submit_done.Open();
                       })
              .ok());
  REQUIRE(Eventually([&] { return on_arm1.load() == 2; }));
  CHECK(scheduler->Snapshot().running == 2);
  REQUIRE(scheduler->RemoveWorker("arm-1").ok());
  // Its slots left the accounting at once, before the functions returned.
  const fairgate::Snapshot after = scheduler->Snapshot();
  CHECK(after.running == 0);
  REQUIRE(after.workers.size() == 1);
  CHECK(after.workers[0].name == "arm-2");
  sync.join();
  REQUIRE(submit_done.Wait());
  REQUIRE(sync_result);
  CHECK(sync_result->code() == absl::StatusCode::kUnavailable);
  CHECK(WorkerLost(*sync_result));
  // It prints as what happened, nothing else (no payload in every log line).
  CHECK(sync_result->ToString() ==
        "UNAVAILABLE: worker 'arm-1' was removed while the job ran on it");
  // An Unavailable of the job's own is not a loss, nor another code with the same words.
  CHECK_FALSE(WorkerLost(absl::UnavailableError("the database went away")));
  CHECK_FALSE(WorkerLost(absl::InternalError(sync_result->message())));
  CHECK_FALSE(WorkerLost(absl::UnavailableError("worker '' was removed while the job ran on it")));
  {
    std::lock_guard lock(mutex);
    REQUIRE(submit_results.size() == 1);  // told once
    CHECK(submit_results[0].code() == absl::StatusCode::kUnavailable);
    CHECK(submit_lost);
  }
  // The late completions counted nowhere: nothing runs, and arm-2 takes the next job.
  CHECK(scheduler->Snapshot().running == 0);
  std::string next;
  REQUIRE(scheduler
              ->RunSync(Context::Background(), Job("build", "c", "k3"),
                        [&](const Context& ctx) {
                          next = std::string(ctx.Worker());
                          return absl::OkStatus();
                        })
              .ok());
  CHECK(next == "arm-2");
  CHECK(scheduler->RemoveWorker("arm-1").code() == absl::StatusCode::kNotFound);
}

TEST_CASE("Scheduler.Workers.ALostJobsLateEndTouchesNothingOfTheJobThatTookItsPlace") {
  Watchdog watchdog("workers late end", 60s);
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("t", Type(8, 8)).ok());
  REQUIRE(scheduler->AddWorker("w", WorkerConfig{1, {"t"}, {}}).ok());
  Gate first_started, release;
  std::optional<Status> first_result;
  std::thread first([&] {
    first_result =
        scheduler->RunSync(Context::Background(), Job("t", "a", "k1"), [&](const Context&) {
          first_started.Open();
          return release.Wait() ? absl::OkStatus() : absl::InternalError("gate");
        });
  });
  REQUIRE(first_started.Wait());
  REQUIRE(scheduler->RemoveWorker("w").ok());
  // The next job queues while no worker serves its type: it takes the lost job's place in the
  // scheduler's tables.
  std::atomic<bool> second_ran{false};
  std::thread second([&] {
    (void)scheduler->RunSync(Context::Background(), Job("t", "b", "k2"), [&](const Context&) {
      second_ran = true;
      return absl::OkStatus();
    });
  });
  REQUIRE(Eventually([&] { return scheduler->Snapshot().pending == 1; }));
  // The lost job's function returns (its worker never answered it): its end must not touch the
  // job waiting in its place.
  release.Open();
  first.join();
  REQUIRE(first_result);
  CHECK(first_result->code() == absl::StatusCode::kUnavailable);
  CHECK(scheduler->Snapshot().pending == 1);
  // The worker comes back under the same name (a restart) and the waiting job runs on it.
  REQUIRE(scheduler->AddWorker("w", WorkerConfig{1, {"t"}, {}}).ok());
  second.join();
  CHECK(second_ran.load());
  const fairgate::Snapshot s = scheduler->Snapshot();
  CHECK(s.running == 0);
  REQUIRE(s.workers.size() == 1);
  CHECK(s.workers[0].slots_in_use == 0);
}

TEST_CASE("Scheduler.Workers.ASubmitWithRequeueRunsAgainAfterItsWorkerIsLost") {
  // Before the scheduler, so that they outlive the jobs that use them.
  std::mutex mutex;
  std::vector<std::string> runs;
  std::vector<Status> results;
  Gate on_w1, told;
  Watchdog watchdog("workers requeue", 60s);
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("t", Type(8, 8)).ok());
  REQUIRE(scheduler->AddWorker("w1", WorkerConfig{1, {"t"}, {}}).ok());
  REQUIRE(scheduler->AddWorker("w2", WorkerConfig{1, {"t"}, {}}).ok());
  JobOptions options;
  options.requeue_on_worker_loss = true;
  REQUIRE(scheduler
              ->Submit(
                  Job("t", "a", "k"),
                  [&](const Context& ctx) {
                    {
                      std::lock_guard lock(mutex);
                      runs.emplace_back(ctx.Worker());
                    }
                    if (ctx.Worker() == "w1") {
                      on_w1.Open();
                      ctx.WaitFor(20s);  // its worker never answers
                    }
                    return absl::OkStatus();
                  },
                  [&](const Status& s) {
                    std::lock_guard lock(mutex);
                    results.push_back(testing::Own(s));
                    told.Open();
                  },
                  options)
              .ok());
  REQUIRE(on_w1.Wait());
  REQUIRE(scheduler->RemoveWorker("w1").ok());
  REQUIRE(told.Wait());
  std::lock_guard lock(mutex);
  CHECK(runs == std::vector<std::string>{"w1", "w2"});
  REQUIRE(results.size() == 1);  // told once, of the run that ended
  CHECK(results[0].ok());
}

// Each admission and completion an observer saw: "kind id on worker", " (lost)" after a
// completion by the loss of its worker.
std::shared_ptr<testing::EventLines> AdmitAndCompleteRecorder() {
  return std::make_shared<testing::EventLines>([](const JobEvent& e) -> std::string {
    if (e.kind != JobEvent::Kind::kAdmit && e.kind != JobEvent::Kind::kComplete) return "";
    return std::string(JobEventKindName(e.kind)) + " " + e.id + " on " + e.worker +
           (e.kind == JobEvent::Kind::kComplete && WorkerLost(e.status) ? " (lost)" : "");
  });
}

// Observers see each job's worker, and a lost job's completion at the removal, with the loss.
TEST_CASE("Scheduler.Workers.ObserversSeeEachJobsWorkerAndItsLoss") {
  Watchdog watchdog("workers events", 60s);
  auto recorder = AdmitAndCompleteRecorder();
  SchedulerOptions options;
  options.rule.max_concurrency = 4;
  options.runtime.observers.push_back(recorder);
  auto scheduler = *Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE(scheduler->RegisterType("t", Type(8, 8)).ok());
  REQUIRE(scheduler->AddWorker("w", WorkerConfig{1, {"t"}, {}}).ok());
  REQUIRE(scheduler
              ->RunSync(Context::Background(), Job("t", "a", "k"),
                        [](const Context&) { return absl::OkStatus(); })
              .ok());
  Gate started;
  std::thread lost([&] {
    (void)scheduler->RunSync(Context::Background(), Job("t", "b", "k"), [&](const Context& ctx) {
      started.Open();
      ctx.WaitFor(20s);
      return absl::OkStatus();
    });
  });
  REQUIRE(started.Wait());
  REQUIRE(scheduler->RemoveWorker("w").ok());
  lost.join();
  REQUIRE(Eventually([&] { return recorder->lines().size() == 4; }));
  CHECK(recorder->lines() == std::vector<std::string>{"admit a on w", "complete a on w",
                                                      "admit b on w", "complete b on w (lost)"});
}

TEST_CASE("Scheduler.Workers.TheSnapshotShowsWhoServesWhat") {
  auto scheduler = Make();
  REQUIRE(scheduler->RegisterType("render", JobTypeConfig{.priority = 8, .tags = {"gpu"}}).ok());
  REQUIRE(scheduler->RegisterType("index", Type(8, 8)).ok());
  REQUIRE(scheduler->AddWorker("g", WorkerConfig{2, {}, {"gpu"}}).ok());
  const fairgate::Snapshot s = scheduler->Snapshot();
  REQUIRE(s.workers.size() == 1);
  CHECK(s.workers[0].slots == 2);
  CHECK(s.workers[0].types == std::vector<std::string>{"render"});
  CHECK(s.types_without_worker == std::vector<std::string>{"index"});
  CHECK(ToJson(s).find("\"types_without_worker\":[\"index\"]") != std::string::npos);
  std::string metrics;
  scheduler->WriteMetrics(metrics);
  CHECK(metrics.find("fairgate_type_unserved{tier=\"8\",type=\"index\"} 1\n") != std::string::npos);
  CHECK(metrics.find("fairgate_type_unserved{tier=\"8\",type=\"render\"} 0\n") !=
        std::string::npos);
  CHECK(metrics.find("fairgate_worker_slots{worker=\"g\"} 2\n") != std::string::npos);
  CHECK(metrics.find("fairgate_worker_slots_in_use{worker=\"g\"} 0\n") != std::string::npos);
  CHECK(scheduler->AddWorker("bad", WorkerConfig{0, {"index"}, {}}).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(scheduler->UpdateWorker("nobody", WorkerConfig{1, {"index"}, {}}).code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("Scheduler.Workers.AWorkerTooNarrowForATypeItNamesIsWarnedOf") {
  std::vector<std::string> warnings;  // written by the calling thread only
  SchedulerOptions options;
  options.rule.max_concurrency = 8;
  options.runtime.warn = [&](std::string_view w) { warnings.emplace_back(w); };
  auto made = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE(made.ok());
  auto& scheduler = *made;
  // Caps that allow the type's max_concurrency: RegisterType has nothing of its own to warn of.
  JobTypeConfig wide = Type(4, 2);
  wide.slots = 2;
  REQUIRE(scheduler->RegisterType("wide", wide).ok());
  REQUIRE(scheduler->RegisterType("small", Type(4, 4)).ok());
  REQUIRE(warnings.empty());
  const std::string narrow_v =
      "worker 'v' names job type 'wide' but has 1 slot and its jobs take 2: it does not serve it "
      "(none of its jobs could run there)";
  REQUIRE(scheduler->AddWorker("v", WorkerConfig{1, {"wide", "small"}, {}}).ok());
  CHECK(warnings == std::vector<std::string>{narrow_v});
  CHECK(scheduler->Snapshot().types_without_worker == std::vector<std::string>{"wide"});
  // A type registered after the worker that names it: warned of at its registration.
  JobTypeConfig wider = Type(6, 2);
  wider.slots = 3;
  warnings.clear();
  REQUIRE(scheduler->UpdateWorker("v", WorkerConfig{2, {"wide", "small", "wider"}, {}}).ok());
  CHECK(warnings.empty());  // wider is not registered yet; wide fits now
  REQUIRE(scheduler->RegisterType("wider", wider).ok());
  CHECK(warnings == std::vector<std::string>{
                        "worker 'v' names job type 'wider' but has 2 slots and its jobs "
                        "take 3: it does not serve it (none of its jobs could run there)"});
  // Served now, wide's job runs on v.
  std::string seen;
  REQUIRE(scheduler
              ->RunSync(Context::Background(), Job("wide", "a", "k"),
                        [&](const Context& ctx) {
                          seen = std::string(ctx.Worker());
                          return absl::OkStatus();
                        })
              .ok());
  CHECK(seen == "v");
  CHECK(scheduler->Shutdown(Context::Background()).ok());
}

}  // namespace scheduler_workers_test
}  // namespace
}  // namespace fairgate

TEST_SUITE_END();
