// One replica of the fleet that fleet_fault_test.cc starts, kills, stops and resumes: a scheduler
// on the shared PostgreSQL store that runs durable "work" jobs, each sleeping its payload's
// milliseconds, and logs each attempt (unbuffered appends of one line each, so a kill cuts at
// most the line being written; lines of several replicas interleave whole). Its conflict group
// "repo" is fleet-wide: no two replicas run jobs of one id at once while their leases hold.
//
// Usage: fleet_replica CONNINFO NAME LOG LEASE_TTL CLAIM_INTERVAL [plain|rate|key-rate]
// Log lines: "start SEQ TOKEN NAME MS ID FENCE ATTEMPT" when the handler begins an attempt and
// "end SEQ TOKEN NAME MS ID FENCE ATTEMPT" when it is about to return OK (MS: Unix milliseconds;
// TOKEN the job's lease, FENCE the fencing token of its repository's lease); on SIGTERM it shuts
// down and writes "exit NAME fenced F" (F: completions the store refused because another replica
// held the lease).
//
// "plain": the type has no conflict group (its claims take no lease), and the replica named r0
// dies between a job's end and its acknowledgement: the job whose payload is "last" returns OK at
// once, and the store call that would remove it (the batch of removals that holds it) kills the
// process (SIGKILL) instead of reaching the database. Elsewhere "last" just returns OK.
//
// "rate": no durable jobs; the replica submits kRateJobs no-op jobs of the type "tick", whose
// rate limit is the fleet's (kTickRate; FleetOptions::token_lease kTokenLease), and logs each
// admission as "tick NAME US" (US: the decision's time, Unix microseconds: the scheduler's clock
// is the wall clock here, so the replicas' times compare) until it is killed. "key-rate": the
// same, but the rate limit is the key's: every replica's jobs have the key "client", whose
// KeyLimits::rate_limit is kTickRate, and the type has none.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fairgate/postgres_store.h"
#include "fairgate/scheduler.h"
#include "fleet_rate_test_settings.h"
#include "forwarding_store.h"

namespace {

int log_fd = -1;
std::atomic<std::uint64_t> last_job = 0;  // the sequence of the job whose payload is "last"

// r0's store in "plain" mode: the real one, but a call that would remove "last" kills the
// process instead. (WaitForJobs is passed on too: the replica is woken by stored jobs.)
class DyingStore : public fairgate::testing::ForwardingSharedStore {
 public:
  using ForwardingSharedStore::ForwardingSharedStore;
  fairgate::StatusOr<std::vector<fairgate::Status>> RemoveJobs(
      const std::vector<std::uint64_t>& sequences) override {
    DieAtLast(sequences);
    return inner_->RemoveJobs(sequences);
  }
  fairgate::Status RemoveJob(std::uint64_t sequence) override {
    DieAtLast({sequence});
    return inner_->RemoveJob(sequence);
  }
  fairgate::Status WaitForJobs(double timeout_seconds) override {
    return inner_->WaitForJobs(timeout_seconds);
  }

 private:
  static void DieAtLast(const std::vector<std::uint64_t>& sequences) {
    const std::uint64_t last = last_job;
    if (last != 0 && std::find(sequences.begin(), sequences.end(), last) != sequences.end()) {
      raise(SIGKILL);
    }
  }
};

void Write(const std::string& line) {
  const std::string text = line + "\n";
  if (write(log_fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::abort();
}

long long UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int Fail(const std::string& what, const fairgate::Status& status) {
  std::fprintf(stderr, "fleet_replica: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

// fairgate_durable_jobs_total{outcome="fenced"} of the scheduler.
std::string Fenced(const fairgate::Scheduler& scheduler) {
  std::string metrics;
  scheduler.WriteMetrics(metrics);
  const std::string name = "fairgate_durable_jobs_total{outcome=\"fenced\"} ";
  const std::size_t at = metrics.find(name);
  if (at == std::string::npos) return "?";
  return metrics.substr(at + name.size(), metrics.find('\n', at) - at - name.size());
}

}  // namespace

// The "rate" mode's replica: see the file's comment.
int RunRate(fairgate::SchedulerOptions options, const std::string& name, bool per_key) {
  options.runtime.clock = [] {
    return fairgate::Seconds(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  };
  options.runtime.evidence = [name](const fairgate::AdmissionEvidence& e) {
    Write("tick " + name + " " + std::to_string(static_cast<long long>(e.time * 1e6)));
  };
  options.fleet.token_lease = fairgate::Seconds(fairgate::testing::kTokenLease);
  auto created = fairgate::Scheduler::Create(options);
  if (!created.ok()) return Fail("create", created.status());
  fairgate::Scheduler& scheduler = **created;
  fairgate::JobTypeConfig tick{.max_concurrency = 8, .priority = 8};
  if (per_key) {
    fairgate::KeyLimits limits;
    limits.rate_limit = fairgate::testing::kTickRate;
    if (fairgate::Status s = scheduler.SetKeyLimits("client", limits); !s.ok()) {
      return Fail("set the key's limits", s);
    }
  } else {
    tick.rate_limit = fairgate::testing::kTickRate;
  }
  if (fairgate::Status s = scheduler.RegisterType("tick", tick); !s.ok()) {
    return Fail("register", s);
  }
  for (int i = 0; i < fairgate::testing::kRateJobs; ++i) {
    const fairgate::Status s = scheduler.Submit(
        {fairgate::TypeName("tick"), fairgate::JobId(std::to_string(i)),
         fairgate::FairnessKey(per_key ? "client" : name)},
        [](const fairgate::Context&) { return absl::OkStatus(); }, [](const fairgate::Status&) {});
    if (!s.ok()) return Fail("submit", s);
  }
  for (;;) pause();  // until killed
}

int main(int argc, char** argv) {
  const std::string mode = argc == 7 ? argv[6] : "";
  if (argc != 6 && !(argc == 7 && (mode == "plain" || mode == "rate" || mode == "key-rate"))) {
    std::fprintf(
        stderr,
        "usage: fleet_replica CONNINFO NAME LOG LEASE_TTL CLAIM_INTERVAL [plain|rate|key-rate]\n");
    return 2;
  }
  const bool plain = mode == "plain";
  const std::string name = argv[2];
  log_fd = open(argv[3], O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (log_fd < 0) return 2;
  // SIGTERM is taken by sigwait below: blocked before any thread starts, so every thread has it
  // blocked.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);

  auto store = fairgate::OpenPostgresStore(argv[1], {name});
  if (!store.ok()) return Fail("open the store", store.status());
  fairgate::SchedulerOptions options;
  std::shared_ptr<fairgate::SharedStore> shared(*std::move(store));
  if (plain && name == "r0") shared = std::make_shared<DyingStore>(std::move(shared));
  options.persistence.store = shared;
  options.rule.max_concurrency = 2;
  options.fleet.lease_ttl = fairgate::Seconds(std::atof(argv[4]));
  options.fleet.claim_interval = fairgate::Seconds(std::atof(argv[5]));
  options.persistence.state_flush_interval = fairgate::Seconds(0.2);
  options.runtime.warn = [](std::string_view) {};
  if (mode == "rate" || mode == "key-rate") {
    options.rule.max_concurrency = 8;
    return RunRate(options, name, mode == "key-rate");
  }
  if (!plain) options.fleet.conflict_groups = {"repo"};
  auto created = fairgate::Scheduler::Create(options);
  if (!created.ok()) return Fail("create", created.status());
  fairgate::Scheduler& scheduler = **created;
  if (fairgate::Status s = scheduler.RegisterType(
          "work", {.max_concurrency = 2, .conflict_group = plain ? "" : "repo", .priority = 2});
      !s.ok()) {
    return Fail("register", s);
  }
  fairgate::Status registered = scheduler.RegisterDurable(
      "work", [&](const fairgate::DurableJob& job, const fairgate::Context& ctx) {
        const std::string attempt =
            std::to_string(job.sequence) + " " + std::to_string(job.lease_token) + " " + name + " ";
        const std::string resource = " " + std::string(job.id) + " " +
                                     std::to_string(ctx.FencingToken()) + " " +
                                     std::to_string(job.attempt);
        Write("start " + attempt + std::to_string(UnixMs()) + resource);
        if (job.payload == "last") {
          last_job = job.sequence;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(job.payload.data())));
        }
        Write("end " + attempt + std::to_string(UnixMs()) + resource);
        return absl::OkStatus();
      });
  if (!registered.ok()) return Fail("register the handler", registered);
  if (auto recovered = scheduler.Recover(); !recovered.ok()) {
    return Fail("recover", recovered.status());
  }
  int signal = 0;
  sigwait(&term, &signal);
  (void)scheduler.Shutdown(fairgate::Context::Background());
  Write("exit " + name + " fenced " + Fenced(scheduler));
  return 0;
}
