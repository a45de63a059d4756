// Durable jobs under kill -9: a real process (durable_crash_child.cc) is started on one state
// file again and again, submits jobs, and is killed with SIGKILL at a random point of its life;
// a last life runs what is left. Jobs are submitted one at a time and in batches. From the log the
// lives wrote: no acknowledged job is lost, no job is done without having run, attempt numbers only
// grow, and each life runs the jobs it recovered in the order they were stored.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/scheduler.h"
#include "fairgate/sqlite_store.h"
#include "runtime_test_util.h"
#include "temp_dir.h"
#include "test_job_types.h"

namespace fairgate {
namespace {
namespace durable_crash_test {

pid_t StartChild(std::vector<std::string> args) {
  args.insert(args.begin(), FAIRGATE_DURABLE_CRASH_CHILD);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives a test that failed or was aborted
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

pid_t Start(const std::string& state, const std::string& log, int life, int first, int count) {
  return StartChild(
      {state, log, std::to_string(life), std::to_string(first), std::to_string(count)});
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Whether `log` gets the line `line` within the usual patience.
bool LogGets(const std::string& log, const std::string& line) {
  return testing::Eventually([&] { return ReadAll(log).find(line + "\n") != std::string::npos; });
}

TEST_CASE("DurableCrash.KillNineAtRandomPointsLosesNoAcknowledgedJobAndKeepsTheStoredOrder") {
  testing::Watchdog watchdog("the kill -9 test", std::chrono::seconds(240));
  testing::TempDir dir;
  const std::string state = dir.path() + "/state.db";
  const std::string log = dir.path() + "/log";
  constexpr int kLives = 30;
  constexpr int kJobsPerLife = 20;
  std::mt19937 random(20261123);
  int killed_while_running = 0;
  for (int life = 0; life < kLives; ++life) {
    const pid_t pid = Start(state, log, life, life * kJobsPerLife, kJobsPerLife);
    REQUIRE(pid > 0);
    // Killed at a random point after it opened its scheduler (a sanitizer build starts slowly):
    // during Recover, the submissions or the runs.
    const std::string started = "life " + std::to_string(life) + "\n";
    REQUIRE(testing::Eventually([&] {
      std::ifstream in(log);
      const std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      return text.find(started) != std::string::npos;
    }));
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 60));
    REQUIRE(kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ++killed_while_running;
  }
  const pid_t last = Start(state, log, kLives, 0, 0);
  int status = 0;
  REQUIRE(waitpid(last, &status, 0) == last);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(killed_while_running == kLives);  // none had finished (or failed) before its kill

  // Read the lives' log.
  std::ifstream in(log);
  std::set<int> acked, done;
  std::map<int, int> last_attempt;
  int attempts_that_did_not_grow = 0, done_without_run = 0, lives = 0, out_of_order = 0;
  int recovered_total = 0, checked_lives = 0, skipped_at_recovery = 0, kills_mid_run = 0;
  // The life being read: what Recover reported (-1 until it returned), the jobs acknowledged
  // and not done when it began, and the ids it ran, first runs only, in order.
  int recovered = -1, deferred = 0;
  std::set<int> pending_before, ran_this_life, open_runs;
  std::vector<int> first_runs;
  // The jobs recovered and due at once run first, one at a time, in stored order (their ids
  // grow with their sequence: one thread submitted them in id order), until the kill.
  auto end_life = [&] {
    if (lives == 0) return;
    kills_mid_run += static_cast<int>(open_runs.size());
    if (recovered < 0 || deferred != 0) return;  // killed inside Recover, or some wait a backoff
    ++checked_lives;
    recovered_total += recovered;
    const std::size_t n = std::min<std::size_t>(first_runs.size(), recovered);
    std::set<int> seen;
    for (std::size_t i = 0; i < n; ++i) {
      const int id = first_runs[i];
      if (i > 0 && id <= first_runs[i - 1]) ++out_of_order;
      seen.insert(id);
      // A prefix of the stored order: no job acknowledged before this life, not done, and
      // stored before this one was passed over.
      for (int before : pending_before) {
        if (before >= id) break;
        if (!seen.count(before)) ++skipped_at_recovery;
      }
    }
  };
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string what;
    words >> what;
    int id = 0;
    if (what == "life") {
      end_life();
      ++lives;
      recovered = -1;
      deferred = 0;
      first_runs.clear();
      ran_this_life.clear();
      open_runs.clear();
      pending_before.clear();
      for (int a : acked) {
        if (!done.count(a)) pending_before.insert(a);
      }
    } else if (what == "recovered") {
      std::string word;
      words >> recovered >> word >> deferred;
    } else if (what == "ack") {
      words >> id;
      acked.insert(id);
    } else if (what == "run") {
      int attempt = 0;
      words >> id >> attempt;
      if (attempt <= last_attempt[id]) ++attempts_that_did_not_grow;
      last_attempt[id] = attempt;
      if (ran_this_life.insert(id).second) first_runs.push_back(id);
      open_runs.insert(id);
    } else if (what == "fail") {
      words >> id;
      open_runs.erase(id);
    } else if (what == "done") {
      words >> id;
      if (!open_runs.count(id)) ++done_without_run;
      open_runs.erase(id);
      done.insert(id);
    }
  }
  end_life();
  MESSAGE("lives: ", lives, ", jobs acknowledged: ", acked.size(), ", recovered: ", recovered_total,
          ", lives whose recovery order was checked: ", checked_lives,
          ", runs cut short by a kill: ", kills_mid_run);
  CHECK(lives == kLives + 1);
  CHECK(acked.size() > 0);
  CHECK(recovered_total > 0);
  CHECK(checked_lives > kLives / 2);
  // No acknowledged job was lost: each one ran to the end.
  for (int id : acked) {
    INFO("job ", id);
    CHECK(done.count(id) == 1);
  }
  CHECK(done_without_run == 0);
  CHECK(attempts_that_did_not_grow == 0);
  CHECK(out_of_order == 0);
  CHECK(skipped_at_recovery == 0);
  // Nothing is left, and nothing died (every job succeeds by its second attempt).
  auto store = *OpenSqliteStore(state);
  CHECK(store->LiveJobs()->empty());
  CHECK(store->DeadJobs()->empty());
}

// A payload that kills its process (here: the test kills it while its handler runs) must not
// loop restart after restart: every attempt begun counts, also one a crash cut short, and a job
// whose last allowed attempt was cut short is dead at the next Recover, never run again.
TEST_CASE("DurableCrash.APayloadThatKillsItsProcessRunsAtMostMaxAttemptsTimes") {
  testing::Watchdog watchdog("the crashing payload test", std::chrono::seconds(120));
  for (const int max_attempts : {1, 2}) {
    CAPTURE(max_attempts);
    testing::TempDir dir;
    const std::string state = dir.path() + "/state.db";
    const std::string log = dir.path() + "/log";
    auto cut_life = [&](bool submit) {
      return StartChild({state, log, "cut", std::to_string(max_attempts), submit ? "1" : "0"});
    };
    // Each allowed attempt begins and is killed mid-run.
    for (int attempt = 1; attempt <= max_attempts; ++attempt) {
      const pid_t pid = cut_life(/*submit=*/attempt == 1);
      REQUIRE(pid > 0);
      REQUIRE(LogGets(log, "run c " + std::to_string(attempt)));
      REQUIRE(kill(pid, SIGKILL) == 0);
      int status = 0;
      REQUIRE(waitpid(pid, &status, 0) == pid);
      if (attempt > 1)
        CHECK(ReadAll(log).find("recovered 1 deferred 0 dead 0\n") != std::string::npos);
    }
    // The next life finds it spent: dead at Recover, not queued, its handler not called, and
    // nothing left to run (it exits; were the job run again, its handler would never return).
    const pid_t last = cut_life(/*submit=*/false);
    const bool idle = LogGets(log, "idle");
    if (!idle) kill(last, SIGKILL);
    int status = 0;
    REQUIRE(waitpid(last, &status, 0) == last);
    REQUIRE(idle);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    const std::string text = ReadAll(log);
    CHECK(text.find("recovered 0 deferred 0 dead 1\nidle\n") != std::string::npos);
    CHECK(text.find("run c " + std::to_string(max_attempts + 1)) == std::string::npos);
    auto store = *OpenSqliteStore(state);
    CHECK(store->LiveJobs()->empty());
    auto dead = store->DeadJobs();
    REQUIRE(dead.ok());
    REQUIRE(dead->size() == 1);
    CHECK(dead->front().attempts == static_cast<std::uint32_t>(max_attempts));
    CHECK(dead->front().last_error.find("interrupted") != std::string::npos);
  }
}

// A scheduler of another process (this test's) on the file is refused while the child's works
// its jobs, naming the child, and recovers them once the child is gone, however it ended (here:
// kill -9, its job's first attempt under way).
TEST_CASE("DurableCrash.AnotherProcessRecoversTheJobsOnlyOnceTheirProcessIsGone") {
  testing::Watchdog watchdog("the two processes test", std::chrono::seconds(120));
  testing::TempDir dir;
  const std::string state = dir.path() + "/state.db";
  const std::string log = dir.path() + "/log";
  const pid_t child = StartChild({state, log, "cut", "3", "1"});
  REQUIRE(child > 0);
  REQUIRE(LogGets(log, "run c 1"));
  SchedulerOptions options;
  options.persistence.store = *OpenSqliteStore(state);
  auto scheduler = *Scheduler::Create(options);
  REQUIRE(scheduler->RegisterType("cut", testing::Type(1, 1)).ok());
  std::atomic<std::uint32_t> attempt{0};
  REQUIRE(scheduler
              ->RegisterDurable("cut",
                                [&](const DurableJob& job, const Context&) {
                                  attempt = job.attempt;
                                  return absl::OkStatus();
                                })
              .ok());
  const Status refused = scheduler->Recover().status();
  INFO(refused.ToString());
  CHECK(refused.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(refused.message().find("held by process " + std::to_string(child)) != std::string::npos);
  REQUIRE(kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  StatusOr<RecoveryReport> report = scheduler->Recover();
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(report->queued == 1);
  CHECK(testing::Eventually([&] { return attempt.load() == 2; }));  // the first was cut short
  REQUIRE(scheduler->Shutdown(Context::Background()).ok());
  CHECK((*OpenSqliteStore(state))->LiveJobs()->empty());
}

}  // namespace durable_crash_test
}  // namespace
}  // namespace fairgate
