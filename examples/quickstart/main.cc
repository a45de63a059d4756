// fairgate quickstart: the whole API in one small program.
//
// A server registers its kinds of work once, then sends every unit of work through the scheduler:
// request handlers call RunSync (they wait, then run the job themselves), background work goes in
// with Submit. Run it: it prints what happens, in the order it happens.
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fairgate/context.h"
#include "fairgate/scheduler.h"

using namespace std::chrono_literals;

namespace {

std::mutex print_mutex;
void Say(const std::string& line) {
  std::lock_guard lock(print_mutex);
  std::cout << line << std::endl;
}

}  // namespace

int main() {
  fairgate::SchedulerOptions options;  // the default mode
  options.rule.max_concurrency = 4;    // at most 4 jobs at once, in total
  auto created = fairgate::Scheduler::Create(options);
  if (!created.ok()) {
    std::cerr << created.status() << "\n";
    return 1;
  }
  std::unique_ptr<fairgate::Scheduler> scheduler = *std::move(created);

  // Clones are foreground work (tier 4: at most 4 at once); repacks are background work (tier 1:
  // one at a time). Both are in the conflict group "git": never a clone and a repack of the same
  // repository at the same time.
  auto status = scheduler->RegisterType(
      "clone", {.default_cost = 2, .max_concurrency = 4, .conflict_group = "git", .priority = 4});
  if (status.ok()) {
    status = scheduler->RegisterType(
        "repack",
        {.default_cost = 10, .max_concurrency = 1, .conflict_group = "git", .priority = 1});
  }
  if (!status.ok()) {
    std::cerr << status << "\n";
    return 1;
  }

  // Background: a repack of linux.git, with a callback that learns how it went.
  std::atomic<bool> repack_reported{false};
  status = scheduler->Submit(
      {fairgate::TypeName("repack"), fairgate::JobId("linux.git")},
      [](const fairgate::Context& ctx) {
        Say("repack linux.git: running on a pool fiber");
        ctx.WaitFor(50ms);  // stands in for the work; stops early if the scheduler shuts down
        return fairgate::Status();
      },
      [&](const fairgate::Status& s) {
        Say("repack linux.git: reported " + std::string(s.ok() ? "OK" : s.ToString()));
        repack_reported = true;
      });
  if (!status.ok()) {
    std::cerr << status << "\n";
    return 1;
  }

  // Foreground: three clients clone from their own threads. alice's clone of linux.git waits for
  // the repack of linux.git (same id, same conflict group); the others start at once.
  std::vector<std::thread> clients;
  for (const char* client : {"alice", "bob", "carol"}) {
    clients.emplace_back([&, client] {
      const std::string name = client;
      const std::string repo = name == "alice" ? "linux.git"
                               : name == "bob" ? "git.git"
                                               : "tor.git";
      fairgate::Status s = scheduler->RunSync(
          fairgate::Context::Background(),
          {fairgate::TypeName("clone"), fairgate::JobId(repo), fairgate::FairnessKey(client)},
          [&](const fairgate::Context&) {
            Say(std::string(client) + ": cloning " + repo + " on the caller's own thread");
            std::this_thread::sleep_for(10ms);
            return fairgate::Status();
          });
      Say(std::string(client) + ": clone returned " + (s.ok() ? "OK" : s.ToString()));
    });
  }
  for (std::thread& t : clients) t.join();

  // Cancellation: a caller that gives up waiting returns at once, and is never charged.
  // Fill the one repack slot, then ask for another repack with a 20 ms deadline.
  std::atomic<bool> release{false};
  (void)scheduler->Submit({fairgate::TypeName("repack"), fairgate::JobId("git.git")},
                          [&](const fairgate::Context&) {
                            while (!release) std::this_thread::sleep_for(1ms);
                            return fairgate::Status();
                          });
  auto [ctx, cancel] = fairgate::WithTimeout(fairgate::Context::Background(), 20ms);
  fairgate::Status late = scheduler->RunSync(
      ctx, {fairgate::TypeName("repack"), fairgate::JobId("tor.git"), fairgate::FairnessKey("ops")},
      [](const fairgate::Context&) {
        Say("never printed: the deadline came first");
        return fairgate::Status();
      });
  cancel();
  Say("impatient repack returned " + late.ToString());
  release = true;

  // Shutdown: refuses new work, fails what is pending, waits for what runs.
  fairgate::Status shut = scheduler->Shutdown(fairgate::Context::Background());
  Say("shutdown: " + std::string(shut.ok() ? "OK" : shut.ToString()));
  fairgate::Status after =
      scheduler->Submit({fairgate::TypeName("repack"), fairgate::JobId("linux.git")},
                        [](const fairgate::Context&) { return fairgate::Status(); });
  Say("submit after shutdown: " + after.ToString());
  const fairgate::Snapshot snapshot = scheduler->Snapshot();
  Say("keys tracked: " + std::to_string(snapshot.keys_tracked) +
      ", estimates learned: " + std::to_string(snapshot.estimates_tracked));
  return repack_reported && late.code() == absl::StatusCode::kDeadlineExceeded &&
                 after.code() == absl::StatusCode::kUnavailable
             ? 0
             : 1;
}
