// One life of the process that durable_crash_test.cc kills with SIGKILL: it recovers the durable
// jobs a previous life left in the state file, submits new ones, and writes what it does to a log
// (unbuffered appends, so what a kill interrupts is only ever the last line).
//
// Usage: durable_crash_child STATE LOG LIFE FIRST COUNT
// Log lines: "life L" before Recover, "recovered Q deferred D" after it, "ack ID" once
// SubmitDurable(ID), or the SubmitDurableBatch that held ID, returned (ids go one at a time or in
// batches of 2-4, in order), "run ID ATTEMPT" when the handler starts, "done ID" when it is about
// to return OK, "fail ID" when it is about to fail, "idle" when COUNT is 0 and nothing is left to
// run (then it exits 0). The handler fails the first attempt of every id divisible by 5 (retried
// after 5 ms) and takes 0-2 ms; one slot and one worker, so jobs run one at a time in the
// scheduler's order.
//
// Usage: durable_crash_child STATE LOG cut MAX_ATTEMPTS SUBMIT
// A payload that kills its process: the type "cut" (RetryPolicy::max_attempts MAX_ATTEMPTS) has a
// handler that logs "run ID ATTEMPT" and then never returns (the test kills the process, as a
// crashing payload would). The life recovers, logs "recovered Q deferred D dead X", submits job
// "c" if SUBMIT is 1, and exits 0 with "idle" once the store has nothing left to run.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fairgate/scheduler.h"
#include "fairgate/sqlite_store.h"

namespace {

int log_fd = -1;

void Write(const std::string& line) {
  const std::string text = line + "\n";
  if (write(log_fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::abort();
}

int Fail(const std::string& what, const fairgate::Status& status) {
  std::fprintf(stderr, "durable_crash_child: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

// A scheduler of one slot and one worker on the state file, with `type` registered.
fairgate::StatusOr<std::unique_ptr<fairgate::Scheduler>> OpenScheduler(const std::string& state,
                                                                       const char* type) {
  fairgate::SchedulerOptions options;
  auto store = fairgate::OpenSqliteStore(state);
  if (!store.ok()) return store.status();
  options.persistence.store = *std::move(store);
  options.rule.max_concurrency = 1;
  options.runtime.worker_threads = 1;
  options.persistence.state_flush_interval = fairgate::Seconds(0.01);
  options.runtime.warn = [](std::string_view) {};
  auto created = fairgate::Scheduler::Create(options);
  if (!created.ok()) return created.status();
  if (fairgate::Status s = (*created)->RegisterType(type, {.max_concurrency = 1, .priority = 4});
      !s.ok()) {
    return s;
  }
  return created;
}

// Waits until the state file has no live job (then logs "idle" and returns 0), or for ever if
// `wait_for_ever` (a life that is to be killed).
int WaitUntilIdle(const std::string& state, bool wait_for_ever) {
  auto reader = fairgate::OpenSqliteStore(state);
  if (!reader.ok()) return Fail("open a reader", reader.status());
  for (;;) {
    auto live = (*reader)->LiveJobs();
    if (!live.ok()) return Fail("read", live.status());
    if (!wait_for_ever && live->empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Write("idle");
  return 0;
}

int RunCut(const std::string& state, int max_attempts, bool submit) {
  auto opened = OpenScheduler(state, "cut");
  if (!opened.ok()) return Fail("open", opened.status());
  fairgate::Scheduler& scheduler = **opened;
  fairgate::Status registered = scheduler.RegisterDurable(
      "cut",
      [](const fairgate::DurableJob& job, const fairgate::Context&) -> fairgate::Status {
        Write("run " + std::string(job.id) + " " + std::to_string(job.attempt));
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // until killed
      },
      {.max_attempts = static_cast<std::uint32_t>(max_attempts)});
  if (!registered.ok()) return Fail("register durable", registered);
  auto report = scheduler.Recover();
  if (!report.ok()) return Fail("recover", report.status());
  Write("recovered " + std::to_string(report->queued) + " deferred " +
        std::to_string(report->deferred) + " dead " + std::to_string(report->dead));
  if (submit) {
    auto sequence = scheduler.SubmitDurable({fairgate::TypeName("cut"), fairgate::JobId("c")}, "");
    if (!sequence.ok()) return Fail("submit", sequence.status());
    Write("ack c");
  }
  return WaitUntilIdle(state, /*wait_for_ever=*/false);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[3]) == "cut") {
    log_fd = open(argv[2], O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (log_fd < 0) return 2;
    return RunCut(argv[1], std::atoi(argv[4]), std::string(argv[5]) == "1");
  }
  if (argc != 6) {
    std::fprintf(stderr, "usage: durable_crash_child STATE LOG LIFE FIRST COUNT\n");
    return 2;
  }
  const std::string state = argv[1];
  log_fd = open(argv[2], O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (log_fd < 0) return 2;
  const std::string life = argv[3];
  const int first = std::atoi(argv[4]);
  const int count = std::atoi(argv[5]);

  auto opened = OpenScheduler(state, "work");
  if (!opened.ok()) return Fail("open", opened.status());
  fairgate::Scheduler& scheduler = **opened;
  std::mt19937 random(std::random_device{}());
  const fairgate::RetryPolicy retry{.max_attempts = 1000,
                                    .initial_backoff = fairgate::Seconds(0.005),
                                    .max_backoff = fairgate::Seconds(0.005)};
  fairgate::Status registered = scheduler.RegisterDurable(
      "work",
      [&](const fairgate::DurableJob& job, const fairgate::Context&) {
        Write("run " + std::string(job.id) + " " + std::to_string(job.attempt));
        if (std::stoi(std::string(job.id)) % 5 == 0 && job.attempt == 1) {
          Write("fail " + std::string(job.id));
          return absl::UnavailableError("the first attempt of every fifth job fails");
        }
        std::this_thread::sleep_for(std::chrono::microseconds(random() % 2000));
        Write("done " + std::string(job.id));
        return absl::OkStatus();
      },
      retry);
  if (!registered.ok()) return Fail("register durable", registered);
  Write("life " + life);  // recovered jobs may start running before Recover returns
  auto report = scheduler.Recover();
  if (!report.ok()) return Fail("recover", report.status());
  Write("recovered " + std::to_string(report->queued) + " deferred " +
        std::to_string(report->deferred));
  // One at a time, or in batches of 2-4 (SubmitDurableBatch), in id order either way.
  for (int id = first; id < first + count;) {
    const int size = std::min<int>(1 + static_cast<int>(random() % 4), first + count - id);
    std::vector<std::string> names;
    for (int i = id; i < id + size; ++i) names.push_back(std::to_string(i));
    if (size == 1) {
      auto sequence = scheduler.SubmitDurable(
          {fairgate::TypeName("work"), fairgate::JobId(names[0])}, names[0]);
      if (!sequence.ok()) return Fail("submit", sequence.status());
    } else {
      std::vector<fairgate::DurableSubmission> batch;
      for (const std::string& name : names)
        batch.push_back({{fairgate::TypeName("work"), fairgate::JobId(name)}, name});
      auto sequences = scheduler.SubmitDurableBatch(batch);
      if (!sequences.ok()) return Fail("submit a batch", sequences.status());
    }
    for (const std::string& name : names) Write("ack " + name);
    id += size;
  }
  // Until killed; the last life (no new jobs) waits until the store has nothing left to run.
  return WaitUntilIdle(state, /*wait_for_ever=*/count > 0);
}
