// Replicas sharing one PostgreSQL store, as real processes (fleet_replica.cc) on a real server
// (postgres_server.h), through the faults a fleet meets: a replica killed with SIGKILL while it
// holds leases, a replica stopped (SIGSTOP) past its lease and resumed, every database
// connection terminated, and a database restart. After all of them: every stored job ran to the
// end and left the store, nothing died, a lapsed lease went to another replica with a greater
// fencing token, the resumed replica's completions were refused, two attempts of one job overlap
// in time only where the first holder had been stopped, and so do two attempts on one repository
// (the replicas' conflict group is fleet-wide), the later always with the greater fencing token;
// the time to reclaim a dead or stopped replica's jobs is within lease_ttl + claim_interval + 1 s.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/postgres_store.h"
#include "fleet_rate_test_settings.h"
#include "postgres_server.h"
#include "runtime_test_util.h"
#include "temp_dir.h"

namespace fairgate {
namespace {
namespace fleet_fault_test {

constexpr double kLeaseTtl = 3.0;
constexpr double kClaimInterval = 0.2;

long long UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One attempt of a job as the replicas logged it; end is -1 while it has not ended.
struct Attempt {
  std::uint64_t token = 0;
  std::string replica;
  long long start = 0, end = -1;
  std::string id;            // the repository
  std::uint64_t fence = 0;   // the fencing token of its lease
  std::uint32_t number = 0;  // the attempt's number (DurableJob::attempt)
};

struct FleetLog {
  std::map<std::uint64_t, std::vector<Attempt>> attempts;  // by sequence, in start order
  std::map<std::string, long long> fenced;                 // from the exit lines
};

FleetLog Read(const std::string& path) {
  FleetLog log;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string event;
    words >> event;
    if (event == "exit") {
      std::string name, word;
      long long fenced = -1;
      words >> name >> word >> fenced;
      log.fenced[name] = fenced;
      continue;
    }
    std::uint64_t sequence = 0, token = 0;
    std::string replica;
    long long ms = 0;
    std::string id;
    std::uint64_t fence = 0;
    std::uint32_t number = 0;
    if (!(words >> sequence >> token >> replica >> ms >> id >> fence >> number)) {
      continue;  // cut by a kill
    }
    auto& attempts = log.attempts[sequence];
    if (event == "start") attempts.push_back({token, replica, ms, -1, id, fence, number});
    for (Attempt& a : attempts) {
      if (event == "end" && a.token == token) a.end = ms;
    }
  }
  return log;
}

// The jobs `replica` has begun and not ended.
std::set<std::uint64_t> InProgress(const FleetLog& log, const std::string& replica) {
  std::set<std::uint64_t> out;
  for (const auto& [sequence, attempts] : log.attempts) {
    for (const Attempt& a : attempts) {
      if (a.replica == replica && a.end < 0) out.insert(sequence);
    }
  }
  return out;
}

// Whether `replica` has begun a job in the last `ms` milliseconds that has not ended: a signal
// sent now finds it running (the jobs take 150 ms).
bool JustBegun(const FleetLog& log, const std::string& replica, long long ms) {
  const long long since = UnixMs() - ms;
  for (const auto& [sequence, attempts] : log.attempts) {
    for (const Attempt& a : attempts) {
      if (a.replica == replica && a.end < 0 && a.start >= since) return true;
    }
  }
  return false;
}

// When the last of `jobs` was begun again by another replica than `replica` after `since`; 0
// until all were.
long long LastRestart(const FleetLog& log, const std::set<std::uint64_t>& jobs,
                      const std::string& replica, long long since) {
  long long latest = 0;
  for (std::uint64_t sequence : jobs) {
    long long restart = 0;
    auto it = log.attempts.find(sequence);
    if (it == log.attempts.end()) return 0;
    for (const Attempt& a : it->second) {
      if (a.replica != replica && a.start >= since) restart = std::max(restart, a.start);
    }
    if (restart == 0) return 0;
    latest = std::max(latest, restart);
  }
  return latest;
}

// Whether every thread of process `pid` is stopped (by SIGSTOP).
bool AllThreadsStopped(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code error;
  int threads = 0;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t name_end = stat.rfind(')');  // the state follows the command's name
    if (name_end == std::string::npos || name_end + 2 >= stat.size()) return false;
    const char state = stat[name_end + 2];
    if (state != 'T' && state != 't') return false;
    ++threads;
  }
  return !error && threads > 0;
}

// `mode` (fleet_replica.cc): "" (durable jobs in a fleet-wide conflict group), "plain" (the
// replica's type takes no lease, and r0 dies as it removes "last") or "rate".
pid_t StartReplica(const std::string& conninfo, const std::string& name, const std::string& log,
                   const char* mode = nullptr) {
  const std::string ttl = std::to_string(kLeaseTtl), interval = std::to_string(kClaimInterval);
  const pid_t pid = fork();
  if (pid == 0) {
    execl(FAIRGATE_FLEET_REPLICA, FAIRGATE_FLEET_REPLICA, conninfo.c_str(), name.c_str(),
          log.c_str(), ttl.c_str(), interval.c_str(), mode, static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Kills and reaps the replicas left when a test ends, however it ends (a replica that ended is
// set to 0).
struct Reaper {
  std::map<std::string, pid_t>& pids;
  ~Reaper() {
    for (auto& [name, pid] : pids) {
      if (pid <= 0) continue;
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

TEST_CASE("Fleet.ReplicasSurviveKillStopAndDatabaseFaultsWithoutLosingOrOverlappingJobs") {
  testing::PostgresServer server;
  testing::TempDir dir;
  const std::string log_path = dir.path() + "/fleet.log";
  auto store = *OpenPostgresStore(server.conninfo(), {"test"});
  std::set<std::uint64_t> stored;
  auto add = [&](int count) {
    for (int i = 0; i < count; ++i) {
      StoredJob job;
      job.type = "work";
      job.id = "repo" + std::to_string(stored.size() % 17);
      job.fairness_key = "client" + std::to_string(stored.size() % 4);
      job.payload = "150";  // milliseconds
      stored.insert(*store->AddJob(job));
    }
  };
  add(150);
  // Whatever becomes of the test, no replica outlives it: one still running (or stopped) at the
  // end is killed and reaped. A reaped replica's pid is set to 0.
  std::map<std::string, pid_t> replicas;
  Reaper reaper{replicas};
  for (const char* name : {"r0", "r1", "r2"}) {
    replicas[name] = StartReplica(server.conninfo(), name, log_path);
    REQUIRE(replicas[name] > 0);
  }
  const auto guard = std::chrono::milliseconds(30000);

  // Sends `signal` to `name` while it runs jobs; returns when each of them has begun again on
  // another replica: when it was sent, those jobs, and how long the last took to begin again.
  // SIGSTOP: returns once every thread of the replica has stopped.
  struct Fault {
    long long at = 0;
    std::set<std::uint64_t> jobs;
    long long reclaim_ms = 0;
  };
  auto strike = [&](const std::string& name, int signal) {
    Fault f;
    REQUIRE(testing::Eventually([&] { return JustBegun(Read(log_path), name, 30); }, guard));
    REQUIRE(kill(replicas[name], signal) == 0);
    f.at = UnixMs();
    if (signal == SIGKILL) {
      REQUIRE(waitpid(replicas[name], nullptr, 0) == replicas[name]);
      replicas[name] = 0;
    } else {
      REQUIRE(testing::Eventually([&] { return AllThreadsStopped(replicas[name]); }, guard));
    }
    f.jobs = InProgress(Read(log_path), name);
    REQUIRE(!f.jobs.empty());
    REQUIRE(testing::Eventually([&] { return LastRestart(Read(log_path), f.jobs, name, f.at) > 0; },
                                guard));
    f.reclaim_ms = LastRestart(Read(log_path), f.jobs, name, f.at) - f.at;
    return f;
  };
  // SIGKILL r0 while it runs jobs: they are begun again elsewhere once the lease lapses.
  const Fault kill9 = strike("r0", SIGKILL);
  const long long killed_at = kill9.at;
  const std::set<std::uint64_t>& orphans = kill9.jobs;
  const long long reclaim_after_kill = kill9.reclaim_ms;
  // SIGSTOP r1 past its lease (SIGCONT after the database faults): its jobs went to r2, its
  // completions are fenced.
  const Fault stop = strike("r1", SIGSTOP);
  const long long stopped_at = stop.at;
  const long long reclaim_after_stop = stop.reclaim_ms;

  // Every connection of the replicas terminated by the server; then the server restarts.
  add(30);
  const int terminated =
      std::stoi(server.Sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"));
  CHECK(terminated >= 2);
  add(30);
  server.Stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server.Start();
  add(30);
  // r1 resumes once the server is up again, so that what it records of its stalled jobs reaches
  // the store and is refused, rather than failing on a server that is away. Every lease r1 had
  // taken when it stopped has a token up to the last one issued before it resumes: it sent no
  // statement in between (one it had sent may have been answered meanwhile).
  const std::uint64_t last_token_before_resuming =
      std::stoull(server.Sql("SELECT last_value FROM fairgate_lease_tokens"));
  REQUIRE(kill(replicas["r1"], SIGCONT) == 0);

  // All of it runs to the end: the store is left empty, nothing is dead.
  REQUIRE(testing::Eventually([&] { return store->LiveJobs()->empty(); },
                              std::chrono::milliseconds(90000)));
  CHECK(store->DeadJobs()->empty());
  for (const char* name : {"r1", "r2"}) {
    REQUIRE(kill(replicas[name], SIGTERM) == 0);
    int status = 0;
    REQUIRE(waitpid(replicas[name], &status, 0) == replicas[name]);
    replicas[name] = 0;
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }

  const FleetLog log = Read(log_path);
  // r1's stalled attempts: those of jobs it held when it stopped. It may have been stopped
  // anywhere, also between taking a job's leases and logging the attempt's start, so such an
  // attempt can start after its successor (the lease lapsed meanwhile): the fencing tokens are
  // what tell the stale writer, and the only attempts that may overlap another are these.
  auto stalled = [&](const Attempt& a) {
    return a.replica == "r1" && a.token <= last_token_before_resuming &&
           (a.end < 0 || a.end > stopped_at);
  };
  // When an attempt's holder stopped running it (the killed replica's attempts end with it).
  auto end_of = [&](const Attempt& a) {
    return a.replica == "r0" && (a.end < 0 || a.end > killed_at) ? killed_at : a.end;
  };
  int ended = 0;
  std::set<std::uint64_t> reclaimed_from_r1;
  for (std::uint64_t sequence : stored) {
    auto it = log.attempts.find(sequence);
    REQUIRE(it != log.attempts.end());
    std::vector<Attempt> attempts = it->second;
    std::sort(attempts.begin(), attempts.end(),
              [](const Attempt& x, const Attempt& y) { return x.token < y.token; });
    bool finished = false;
    for (std::size_t i = 0; i < attempts.size(); ++i) {
      finished |= attempts[i].end >= 0;
      if (i == 0) continue;
      const Attempt& earlier = attempts[i - 1];
      INFO("job " << sequence << ": " << earlier.replica << " (token " << earlier.token << ") then "
                  << attempts[i].replica << " (token " << attempts[i].token << ")");
      // Each claim has a token of its own.
      CHECK(attempts[i].token > earlier.token);
      if (stalled(earlier)) {
        reclaimed_from_r1.insert(sequence);
        continue;
      }
      // A later claim begins after the earlier attempt ended.
      CHECK(end_of(earlier) >= 0);
      CHECK(end_of(earlier) <= attempts[i].start);
    }
    CHECK(finished);
    ended += finished;
  }
  CHECK(ended == static_cast<int>(stored.size()));
  // One repository's attempts, whatever their jobs: the later always with the greater fencing
  // token, overlapping only where the earlier holder had been stopped past its lease.
  std::map<std::string, std::vector<Attempt>> by_repository;
  for (const auto& [sequence, attempts] : log.attempts) {
    for (const Attempt& a : attempts) by_repository[a.id].push_back(a);
  }
  for (auto& [id, attempts] : by_repository) {
    std::sort(attempts.begin(), attempts.end(),
              [](const Attempt& x, const Attempt& y) { return x.fence < y.fence; });
    for (std::size_t i = 1; i < attempts.size(); ++i) {
      const Attempt& earlier = attempts[i - 1];
      INFO(id << ": " << earlier.replica << " (fence " << earlier.fence << ") then "
              << attempts[i].replica << " (fence " << attempts[i].fence << ")");
      CHECK(attempts[i].fence > earlier.fence);
      if (stalled(earlier)) continue;
      CHECK(end_of(earlier) >= 0);
      CHECK(end_of(earlier) <= attempts[i].start);
    }
  }
  // Another replica claimed r1's stalled jobs again: r1's completion of each was refused.
  CHECK(!reclaimed_from_r1.empty());
  CHECK(log.fenced.at("r1") >= static_cast<long long>(reclaimed_from_r1.size()));
  // How soon is measured, not asserted (a loaded machine may take longer; bench/README.md has
  // the figures): that they were reclaimed at all, and fenced, is the test's.
  MESSAGE("reclaimed " << orphans.size() << " job(s) " << reclaim_after_kill
                       << " ms after SIGKILL and " << stop.jobs.size() << " job(s) "
                       << reclaim_after_stop << " ms after SIGSTOP (lease_ttl " << kLeaseTtl
                       << " s, claim_interval " << kClaimInterval << " s)");
}

// A replica acknowledges what succeeded in batches (the removals written together, off the
// workers), so a job can end well and its replica die before the commit that removes it. Here
// replica r0 is killed (SIGKILL, by its own store: fleet_replica.cc) in the call that would remove
// the job "last", after its handler returned OK, while other jobs it claimed wait.
// fairgate/durable.h's promise for that window: the jobs whose removal had committed never run
// again; every other job r0 held, ended or not, runs again on r1 once r0's leases lapse, with the
// next attempt number (r0's counted); nothing is lost, nothing dies.
TEST_CASE("Fleet.AReplicaKilledBeforeItsAcknowledgementsCommitLeavesThoseJobsToRunAgain") {
  testing::PostgresServer server;
  testing::TempDir dir;
  const std::string log_path = dir.path() + "/fleet.log";
  auto store = *OpenPostgresStore(server.conninfo(), {"test"});
  std::set<std::uint64_t> stored;
  auto add = [&](const std::string& key, const std::string& payload) {
    StoredJob job;
    job.type = "work";
    job.id = "repo" + std::to_string(stored.size());
    job.fairness_key = key;
    job.payload = payload;
    const std::uint64_t sequence = *store->AddJob(job);
    stored.insert(sequence);
    return sequence;
  };
  for (int i = 0; i < 60; ++i) add("client" + std::to_string(i % 3), "2");
  const std::uint64_t last = add("client0", "last");
  for (int i = 0; i < 20; ++i) add("client" + std::to_string(i % 3), "2");
  std::map<std::string, pid_t> replicas;
  Reaper reaper{replicas};
  replicas["r0"] = StartReplica(server.conninfo(), "r0", log_path, "plain");
  REQUIRE(replicas["r0"] > 0);
  int status = 0;
  REQUIRE(waitpid(replicas["r0"], &status, 0) == replicas["r0"]);
  replicas["r0"] = 0;
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);
  // What r0 left stored when it died, and what it had ended.
  std::set<std::uint64_t> left;
  // (Held in a variable: a loop over `*store->LiveJobs()` would read a destroyed temporary.)
  const std::vector<StoredJob> live = *store->LiveJobs();
  for (const StoredJob& job : live) left.insert(job.sequence);
  const FleetLog before = Read(log_path);
  std::set<std::uint64_t> ended_by_r0, unacknowledged;
  for (const auto& [sequence, attempts] : before.attempts) {
    for (const Attempt& a : attempts) {
      if (a.end >= 0) ended_by_r0.insert(sequence);
    }
  }
  for (std::uint64_t sequence : ended_by_r0) {
    if (left.contains(sequence)) unacknowledged.insert(sequence);
  }
  // "last" ended, and its acknowledgement never reached the store.
  REQUIRE(unacknowledged.contains(last));

  replicas["r1"] = StartReplica(server.conninfo(), "r1", log_path, "plain");
  REQUIRE(replicas["r1"] > 0);
  REQUIRE(testing::Eventually([&] { return store->LiveJobs()->empty(); },
                              std::chrono::milliseconds(60000)));
  CHECK(store->DeadJobs()->empty());
  REQUIRE(kill(replicas["r1"], SIGTERM) == 0);
  REQUIRE(waitpid(replicas["r1"], &status, 0) == replicas["r1"]);
  replicas["r1"] = 0;
  CHECK(WIFEXITED(status));

  const FleetLog log = Read(log_path);
  for (std::uint64_t sequence : stored) {
    CAPTURE(sequence);
    auto it = log.attempts.find(sequence);
    REQUIRE(it != log.attempts.end());
    std::vector<Attempt> on_r1;
    bool ended = false;
    std::uint32_t r0_attempts = 0;
    for (const Attempt& a : it->second) {
      ended |= a.end >= 0;
      if (a.replica == "r1") on_r1.push_back(a);
      if (a.replica == "r0") ++r0_attempts;
    }
    CHECK(ended);
    if (!left.contains(sequence)) {
      // Removed before the kill: acknowledged, never run again.
      CHECK(on_r1.empty());
      continue;
    }
    // Left stored: run on r1, once; numbered after r0's attempt when r0 began one.
    REQUIRE(on_r1.size() == 1);
    CHECK(on_r1[0].end >= 0);
    if (r0_attempts > 0) CHECK(on_r1[0].number == 2);
  }
  MESSAGE("r0 ended " << ended_by_r0.size() << " job(s) before it was killed, "
                      << unacknowledged.size()
                      << " of them not yet acknowledged (run again on r1)");
}

// The admissions' times (Unix seconds) in the "rate" replicas' log, by replica, each sorted.
std::map<std::string, std::vector<double>> Ticks(const std::string& path) {
  std::map<std::string, std::vector<double>> ticks;
  std::ifstream in(path);
  std::string word, name;
  long long us = 0;
  while (in >> word >> name >> us) {
    if (word == "tick") ticks[name].push_back(static_cast<double>(us) / 1e6);
  }
  for (auto& [replica, times] : ticks) std::sort(times.begin(), times.end());
  return ticks;
}

// The fleet's rate limit (FleetOptions::token_lease): three replicas, each with a backlog of jobs
// limited to r = 20 a second with a burst of b = 5 (`mode` "rate": by their type's rate limit;
// "key-rate": by their key's, one key for the whole fleet), lease tokens of one bucket in
// PostgreSQL, 2 at a time (L). Every window of w seconds holds at most b + r w + 3 L admissions of
// the whole fleet (plus one: each decision's time is read as it begins). One replica is killed
// (SIGKILL) with its lease; the other two go on under the same bound, taking what the dead one no
// longer takes.
void CheckTheFleetsRate(const char* mode) {
  testing::PostgresServer server;
  testing::TempDir dir;
  const std::string log_path = dir.path() + "/ticks.log";
  std::map<std::string, pid_t> replicas;
  Reaper reaper{replicas};
  for (const char* name : {"r0", "r1", "r2"}) {
    replicas[name] = StartReplica(server.conninfo(), name, log_path, mode);
    REQUIRE(replicas[name] > 0);
  }
  auto count = [&](const std::string& replica) {
    const auto ticks = Ticks(log_path);
    auto it = ticks.find(replica);
    return it == ticks.end() ? std::size_t{0} : it->second.size();
  };
  // All three at work, then r0 killed.
  REQUIRE(
      testing::Eventually([&] { return count("r0") >= 5 && count("r1") >= 5 && count("r2") >= 5; },
                          std::chrono::milliseconds(60000)));
  REQUIRE(kill(replicas["r0"], SIGKILL) == 0);
  REQUIRE(waitpid(replicas["r0"], nullptr, 0) == replicas["r0"]);
  replicas["r0"] = 0;
  const std::size_t survivors_at_kill = count("r1") + count("r2");
  REQUIRE(testing::Eventually([&] { return count("r1") + count("r2") >= survivors_at_kill + 40; },
                              std::chrono::milliseconds(60000)));
  for (const char* name : {"r1", "r2"}) {
    kill(replicas[name], SIGKILL);
    waitpid(replicas[name], nullptr, 0);
    replicas[name] = 0;
  }

  std::vector<double> all;
  for (const auto& [replica, times] : Ticks(log_path))
    all.insert(all.end(), times.begin(), times.end());
  std::sort(all.begin(), all.end());
  const RateLimit rate = testing::kTickRate;
  const double lease = std::floor(rate.per_second * testing::kTokenLease);
  for (const double w : {0.1, 0.25, 0.5, 1.0, 2.0}) {
    CAPTURE(w);
    const double bound = rate.burst + rate.per_second * w + 3 * lease + 1;
    std::size_t most = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const std::size_t n =
          std::lower_bound(all.begin() + i, all.end(), all[i] + w) - (all.begin() + i);
      most = std::max(most, n);
    }
    CHECK(static_cast<double>(most) <= bound);
    MESSAGE("w " << w << " s: at most " << most << " admissions (bound " << bound << ")");
  }
  MESSAGE(all.size() << " admissions in " << (all.back() - all.front()) << " s");
}

TEST_CASE("Fleet.ThreeReplicasStartNoMoreThanTheFleetsRateAndGoOnWhenOneIsKilled") {
  CheckTheFleetsRate("rate");
}

TEST_CASE("Fleet.AKeysRateIsTheFleetsAcrossThreeReplicasAndGoesOnWhenOneIsKilled") {
  CheckTheFleetsRate("key-rate");
}

}  // namespace fleet_fault_test
}  // namespace
}  // namespace fairgate
