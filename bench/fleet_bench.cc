// Benchmarks of the PostgreSQL store that replicas share (fairgate/postgres_store.h), on a
// throwaway server started by scripts/pg_temp.sh in a temporary directory (Unix socket; fsync
// off, as in the tests: the figures are the protocol's and the server's CPU, not a disk's). Set
// FAIRGATE_PG_CPUS to pin the server (and run this program under taskset elsewhere), or
// FAIRGATE_PG_CONNINFO to use a server that is already running (bench/queue_peers.sh's, with
// fsync on).
//
// BM_AddJob/threads:N            one durable job stored at a time from each of N threads (a
//                                store each): what SubmitDurable on PostgreSQL costs the caller
//                                (with one thread its latency is 1 / the rate).
// BM_AddJobSharedStore/threads:N one durable job stored at a time from each of N threads that
//                                share one store: the calls made at once share a statement.
// BM_AddJobs/batch:B             B jobs stored in one statement and commit (AddJobs: what
//                                SubmitDurableBatch costs). items/s: jobs.
// BM_ClaimCycle/backlog:B/leases:L/threads:N  N replicas (a store each: one connection, its
//                                own thread) each storing a job, claiming one, marking its
//                                attempt and removing it, again and again, over a backlog of B
//                                jobs that claims take the oldest of; with L 1 each claim also
//                                takes its repository's conflict lease in its transaction.
//                                items/s: jobs through the whole cycle, all replicas together.
// Counter: server_cpu_us_per_job, the CPU time of the server's processes per job (its postmaster
// and the postmaster's children, autovacuum's included, from /proc; 0 if the server's processes
// are not on this machine).
// BM_DurableWorked/replicas:R/claimed:C/clients:K/charged:H  20,000 jobs of K clients (fairness
//                                keys: 1, 100 or 10,000) stored beforehand, worked to completion
//                                by R replicas in this process (max_concurrency 8 each,
//                                max_claimed C, 0: the default) with a no-op handler. H 0: every
//                                client at cost 0, a fleet with no history (a claim takes the
//                                clients' jobs in their order of arrival); 1: client i charged
//                                (i + 1) ms before, a fleet that has run a while (a claim takes
//                                the cheapest client's jobs first: within a run, too short for
//                                what it charges to be shared, one client's after another's).
//                                items/s: jobs done;
//                                counters: the server's CPU per job, the replicas' claims and
//                                the share of them that took nothing (empty_claims_pct).
// BM_ManyClientsAgainstHundred/clients:K/charged:H  BM_DurableWorked with one replica at 100
//                                clients and at K in turns within one run; counters: each
//                                part's jobs/s and their ratio, over all iterations and the
//                                median of the iterations'.
// BM_DurableWorkedLeased/replicas:R/clients:K/repositories:P  the same, charged, with the default
//                                max_claimed, 1, 2, 4, 8 or 16 replicas (their claims with leases
//                                run one at a time), the jobs over P repositories (1,000 or one
//                                each), each job taking its repository's fleet-wide conflict
//                                lease (one slot) with its claim.
// BM_DurableSteady/clients:K/seconds:S  jobs of K clients stored and worked at once for S
//                                seconds, nothing emptied between (a producer keeps about 4,000
//                                waiting; one replica works them): what the tables' churn leaves
//                                until autovacuum comes. items/s: jobs done; counters: the first
//                                and last 10 s's rates, the server's CPU per job (its stores
//                                too), the heads' and jobs' tables at the end (KiB); each 10 s's
//                                rate on stderr.
// BM_FleetCap/replicas:R         100 jobs of 100 ms worked by R replicas of one slot each under
//                                a fleet-wide cap of 2 on their type. items/s: jobs done;
//                                counters: the most at once, the share of empty claims.
// BM_EnqueueToStart              a job stored by another process (a store of its own, as a
//                                producer without a scheduler), from AddJob's call until an idle
//                                replica's handler starts it (claim_interval 1 s, the default:
//                                the database's notification wakes the claim). Manual time: the
//                                mean; counters p50_ms and p99_ms, and cold_max_ms: the slowest
//                                of the 3 jobs run first, apart (the sessions' first plans).
#include <dirent.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "fairgate/postgres_store.h"
#include "fairgate/scheduler.h"

namespace fairgate {
namespace {

std::string dir;       // the server's directory
std::string conninfo;  // how to reach it

std::string Script(const std::string& command) {
  const std::string line =
      std::string(FAIRGATE_SOURCE_DIR) + "/scripts/pg_temp.sh " + command + " '" + dir + "'";
  std::FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) std::abort();
  std::string out;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  pclose(pipe);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string Sql(const std::string& sql) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  PGresult* r = PQexec(c, sql.c_str());
  std::string value = PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  PQfinish(c);
  return value;
}

// The server's postmaster: the parent of a backend of it. Its process id, 0 if not found.
pid_t postmaster = 0;

// Fields 3 (state) to 17 (cstime) of the process's stat(5), from the text after its name's
// closing parenthesis (a name may hold spaces or parentheses); empty if it has gone.
std::vector<std::string> StatFields(const std::filesystem::path& process) {
  std::ifstream stat(process / "stat");
  std::string line;
  if (!std::getline(stat, line)) return {};
  const auto close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(line.substr(close + 2));
  std::vector<std::string> fields;
  for (std::string field; fields.size() < 15 && rest >> field;) fields.push_back(field);
  if (fields.size() < 15) return {};
  return fields;
}

pid_t Postmaster() {
  const std::string backend = Sql("SELECT pg_backend_pid()");
  if (backend.empty()) return 0;
  const std::vector<std::string> fields = StatFields(std::filesystem::path("/proc") / backend);
  return fields.empty() ? 0 : static_cast<pid_t>(std::stol(fields[1]));
}

// CPU time (user + system) of the server's processes, in microseconds: the postmaster and its
// children, with the time of the children they reaped, so that a backend that exits (a store
// closed, a connection dropped) moves its time to the postmaster's and the sum does not fall.
// Only this server's: other servers on the machine (a test suite's, starting and stopping) are
// not counted, whose processes come and go with their time.
double ServerCpuMicros() {
  if (postmaster == 0) return 0;
  const std::string parent = std::to_string(postmaster);
  double ticks = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::vector<std::string> fields = StatFields(entry.path());
    if (fields.empty() || (name != parent && fields[1] != parent)) continue;
    // Fields 14-17 of stat(5): utime, stime, and the reaped children's cutime, cstime.
    for (int i = 14; i <= 17; ++i) ticks += std::stod(fields[i - 3]);
  }
  return ticks * 1e6 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The value of the sample named `name` (with its labels) in Prometheus text, 0 if absent.
double Sample(const std::string& metrics, const std::string& name) {
  const std::size_t at = metrics.find("\n" + name + " ");
  if (at == std::string::npos) return 0;
  return std::strtod(metrics.c_str() + at + name.size() + 2, nullptr);
}

// Shuts the replicas down and destroys them (a scheduler's destruction waits for its listener's
// slice: the caller keeps this untimed), adding their empty claims and claims with jobs up.
void ShutDown(std::vector<std::unique_ptr<Scheduler>>& fleet, double& claims_empty,
              double& claims_with_jobs) {
  for (auto& worker : fleet) {
    (void)worker->Shutdown(Context::Background());
    std::string metrics;
    worker->WriteMetrics(metrics);
    claims_empty += Sample(metrics, "fairgate_claims_total{result=\"empty\"}");
    claims_with_jobs += Sample(metrics, "fairgate_claims_total{result=\"jobs\"}");
  }
  fleet.clear();
}

// The planner's statistics of the jobs and the keys' heads, as autovacuum keeps them in a
// server that has run a while: a run is shorter than autovacuum's naptime (a minute), and the
// tables were just emptied and filled. With the heads' statistics of an empty table, a claim's
// plan at 10,000 keys reads and sorts every head instead of the first of one index (about 3 ms
// more for a claim of 400; bench/HISTORY.md, the claim's bound materialized).
void AnalyzeAsAutovacuumWould() { Sql("ANALYZE fairgate_durable_jobs, fairgate_key_heads"); }

StoredJob Job(int i, int clients = 100, int repositories = 1000) {
  StoredJob job;
  job.type = "fetch";
  job.id = "repo" + std::to_string(i % repositories);
  job.fairness_key = "client" + std::to_string(i % clients);
  job.payload = "payload";
  return job;
}

void BM_AddJob(benchmark::State& state) {
  // Each thread a producer of its own: a store, so a connection, each.
  auto store = *OpenPostgresStore(conninfo, {"bench" + std::to_string(state.thread_index())});
  if (state.thread_index() == 0) Sql("DELETE FROM fairgate_durable_jobs");
  int i = state.thread_index() * 1000000;
  for (auto _ : state) {
    if (!store->AddJob(Job(i++)).ok()) std::abort();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AddJob)->Threads(1)->Threads(8)->UseRealTime();

// N threads storing single jobs on one store (a server's request threads sharing it): the calls
// made at once share a statement and commit.
void BM_AddJobSharedStore(benchmark::State& state) {
  static std::unique_ptr<SharedStore> store;
  if (state.thread_index() == 0) {
    store = *OpenPostgresStore(conninfo, {"bench"});
    Sql("DELETE FROM fairgate_durable_jobs");
  }
  int i = state.thread_index() * 1000000;
  for (auto _ : state) {  // the loop starts once every thread is here, the store open
    if (!store->AddJob(Job(i++)).ok()) std::abort();
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) store.reset();  // after every thread's loop has ended
}
BENCHMARK(BM_AddJobSharedStore)->Threads(8)->UseRealTime();

// AddJobs of B jobs: one statement and one commit per batch. items/s counts jobs.
void BM_AddJobs(benchmark::State& state) {
  auto store = *OpenPostgresStore(conninfo, {"bench"});
  Sql("DELETE FROM fairgate_durable_jobs");
  std::vector<StoredJob> batch;
  for (int i = 0; i < state.range(0); ++i) batch.push_back(Job(i));
  for (auto _ : state) {
    if (!store->AddJobs(batch).ok()) std::abort();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_AddJobs)->ArgName("batch")->Arg(100)->Arg(1000)->UseRealTime();

// `leases` 1: the type's jobs take a fleet-wide conflict lease of their repository (one slot) in
// the claim's transaction, and give it back with the job.
void BM_ClaimCycle(benchmark::State& state) {
  const int backlog = static_cast<int>(state.range(0));
  const bool leases = state.range(1) != 0;
  static double cpu_before = 0;
  if (state.thread_index() == 0) {
    // Each benchmark starts from empty tables with no dead rows left by the one before.
    Sql("TRUNCATE fairgate_durable_jobs, fairgate_resource_leases");
    auto filler = *OpenPostgresStore(conninfo, {"filler"});
    for (int i = 0; i < backlog; ++i) {
      if (!filler->AddJob(Job(i)).ok()) std::abort();
    }
    AnalyzeAsAutovacuumWould();
    cpu_before = ServerCpuMicros();
  }
  auto store = *OpenPostgresStore(conninfo, {"replica" + std::to_string(state.thread_index())});
  const std::vector<ClaimableType> types = {{"fetch", 1, leases ? "repo" : "", 1, 0}};
  int i = 0;
  for (auto _ : state) {
    // Replicas' jobs take turns over the repositories, so that two replicas' jobs of one
    // repository rarely meet (with leases, the second would wait for the first's claim).
    if (!store->AddJob(Job(i++ * state.threads() + state.thread_index())).ok()) std::abort();
    StatusOr<std::vector<StoredJob>> claimed = store->ClaimJobs(types, 1, 30);
    if (!claimed.ok()) std::abort();
    for (const StoredJob& job : *claimed) {
      if (!store->BeginAttempt(job.sequence).ok() || !store->RemoveJob(job.sequence).ok()) {
        std::abort();
      }
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    // Counters are summed over threads: thread 0 alone reports, per job of every thread.
    const double jobs = static_cast<double>(state.iterations()) * state.threads();
    state.counters["server_cpu_us_per_job"] =
        benchmark::Counter((ServerCpuMicros() - cpu_before) / jobs);
  }
}
BENCHMARK(BM_ClaimCycle)
    ->ArgNames({"backlog", "leases"})
    ->ArgsProduct({{0, 10000}, {0, 1}})
    ->Threads(1)
    ->Threads(4)
    ->Threads(8)
    ->UseRealTime();

// Replica r's options: a store of its own (named "worker<r>"), `slots` jobs at once, no warnings.
SchedulerOptions ReplicaOptions(int r, int slots) {
  SchedulerOptions o;
  o.persistence.store =
      std::shared_ptr<Store>(*OpenPostgresStore(conninfo, {"worker" + std::to_string(r)}));
  o.rule.max_concurrency = slots;
  o.runtime.warn = [](std::string_view) {};
  return o;
}

// N jobs of K clients stored beforehand (AddJobs, batches of 1,000), then worked to completion
// by R replicas in this process (a scheduler and a store each, max_concurrency 8, max_claimed C:
// 0 for its default) with a no-op handler; the time from their Recover until every job ran and
// the table is empty. The jobs take turns over `repositories` (their ids). With `leases`, the
// type is in a fleet-wide conflict group: each job takes its repository's lease (one slot) in its
// claim's transaction and gives it back with the job.
struct WorkedRun {
  double seconds = 0;        // the timed part
  double server_cpu_us = 0;  // the server's CPU over the timed part
  double claims_empty = 0, claims_with_jobs = 0;
  bool each_once = true;  // every job ran once
};
constexpr int kWorkedJobs = 20000;

WorkedRun WorkOnce(int replicas, int claimed, int clients, bool charged, bool leases,
                   int repositories) {
  WorkedRun run;
  // The keys' costs too, then those the run asks for, whatever ran before: costs left by an
  // earlier run (shared at its end, and the clients of one run are named as another's) decided
  // in what order a claim took the clients' jobs, and the first run on a new server differed
  // from the rest.
  Sql("TRUNCATE fairgate_durable_jobs, fairgate_resource_leases, fairgate_keys");
  if (charged) {
    Sql("INSERT INTO fairgate_keys (key, accumulated_cost, idle_since) SELECT 'client' || i, "
        "(i + 1) * 0.001, extract(epoch from now()) FROM generate_series(0, " +
        std::to_string(clients - 1) + ") AS i");
  }
  {
    auto filler = *OpenPostgresStore(conninfo, {"filler"});
    std::vector<StoredJob> batch;
    for (int i = 0; i < kWorkedJobs; ++i) {
      batch.push_back(Job(i, clients, repositories));
      if (batch.size() == 1000) {
        if (!filler->AddJobs(batch).ok()) std::abort();
        batch.clear();
      }
    }
  }
  AnalyzeAsAutovacuumWould();
  std::atomic<int> runs{0};
  std::vector<std::unique_ptr<Scheduler>> fleet;
  for (int r = 0; r < replicas; ++r) {
    SchedulerOptions o = ReplicaOptions(r, 8);
    o.fleet.max_claimed = claimed;
    if (leases) o.fleet.conflict_groups = {"repo"};
    auto worker = *Scheduler::Create(o);
    JobTypeConfig fetch{.max_concurrency = 8, .priority = 2};
    if (leases) fetch.conflict_group = "repo";
    if (!worker->RegisterType("fetch", fetch).ok()) std::abort();
    (void)worker->RegisterDurable("fetch", [&](const DurableJob&, const Context&) {
      runs.fetch_add(1, std::memory_order_relaxed);
      return absl::OkStatus();
    });
    fleet.push_back(std::move(worker));
  }
  // One connection for the whole wait: a new one every poll would start a server process each
  // time, on the cores the replicas and the server share.
  PGconn* watcher = PQconnectdb(conninfo.c_str());
  auto stored = [&] {
    PGresult* r = PQexec(watcher, "SELECT count(*) FROM fairgate_durable_jobs");
    const std::string count = PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "?";
    PQclear(r);
    return count;
  };
  const auto began = std::chrono::steady_clock::now();
  const double cpu_before = ServerCpuMicros();
  for (auto& worker : fleet) {
    if (!worker->Recover().ok()) std::abort();
  }
  while (runs.load() < kWorkedJobs) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  while (stored() != "0") std::this_thread::sleep_for(std::chrono::milliseconds(2));
  run.server_cpu_us = ServerCpuMicros() - cpu_before;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  PQfinish(watcher);
  run.each_once = runs.load() == kWorkedJobs;
  ShutDown(fleet, run.claims_empty, run.claims_with_jobs);
  return run;
}

// items/s: jobs done, all replicas together; counters: the server's CPU per job, the replicas'
// claims and the share of them that took nothing (empty_claims_pct).
void WorkDurable(benchmark::State& state, int replicas, int claimed, int clients, bool charged,
                 bool leases, int repositories = 1000) {
  double server_cpu = 0;
  double claims_empty = 0, claims_with_jobs = 0;
  for (auto _ : state) {
    const WorkedRun run = WorkOnce(replicas, claimed, clients, charged, leases, repositories);
    if (!run.each_once) state.SkipWithError("a job ran more than once");
    state.SetIterationTime(run.seconds);
    server_cpu += run.server_cpu_us;
    claims_empty += run.claims_empty;
    claims_with_jobs += run.claims_with_jobs;
  }
  const double jobs = static_cast<double>(state.iterations() * kWorkedJobs);
  state.SetItemsProcessed(state.iterations() * kWorkedJobs);
  state.counters["server_cpu_us_per_job"] = benchmark::Counter(server_cpu / jobs);
  state.counters["claims"] = benchmark::Counter(claims_empty + claims_with_jobs);
  state.counters["empty_claims_pct"] =
      benchmark::Counter(100 * claims_empty / std::max(1.0, claims_empty + claims_with_jobs));
}
void BM_DurableWorked(benchmark::State& state) {
  WorkDurable(state, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
              static_cast<int>(state.range(2)), state.range(3) != 0, false);
}
BENCHMARK(BM_DurableWorked)
    ->ArgNames({"replicas", "claimed", "clients", "charged"})
    ->ArgsProduct({{1, 2}, {0}, {100}, {0, 1}})
    ->Args({1, 64, 100, 0})
    ->Args({2, 64, 100, 0})
    ->Args({1, 0, 1, 0})
    ->Args({1, 0, 10000, 0})
    ->Args({1, 0, 10000, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

// BM_DurableWorked with one replica at 100 clients and at K, in turns within one run (which goes
// first alternating by iteration), so that the two rates meet the same server and disk: on this
// VM the same run moved by up to a third from one minute to the next, and the ratio of two
// figures taken apart moved as much. Manual time: both parts. Counters: each part's jobs/s over
// all iterations (rate_100, rate_many), their ratio (many_over_100), and the median of the
// iterations' own ratios (many_over_100_median); each iteration's two rates on stderr.
void BM_ManyClientsAgainstHundred(benchmark::State& state) {
  const int many = static_cast<int>(state.range(0));
  const bool charged = state.range(1) != 0;
  double seconds_100 = 0, seconds_many = 0;
  std::vector<double> ratios;
  bool many_first = false;
  for (auto _ : state) {
    WorkedRun hundred, crowd;
    if (many_first) crowd = WorkOnce(1, 0, many, charged, false, 1000);
    hundred = WorkOnce(1, 0, 100, charged, false, 1000);
    if (!many_first) crowd = WorkOnce(1, 0, many, charged, false, 1000);
    if (!hundred.each_once || !crowd.each_once) state.SkipWithError("a job ran more than once");
    state.SetIterationTime(hundred.seconds + crowd.seconds);
    seconds_100 += hundred.seconds;
    seconds_many += crowd.seconds;
    ratios.push_back(hundred.seconds / crowd.seconds);
    std::fprintf(
        stderr,
        "BM_ManyClientsAgainstHundred/clients:%d/charged:%d: %s first, %.1f k / %.1f k jobs/s\n",
        many, charged ? 1 : 0, many_first ? "many" : "100", kWorkedJobs / hundred.seconds / 1e3,
        kWorkedJobs / crowd.seconds / 1e3);
    many_first = !many_first;
  }
  const double jobs = static_cast<double>(state.iterations() * kWorkedJobs);
  state.SetItemsProcessed(2 * state.iterations() * kWorkedJobs);
  state.counters["rate_100"] = benchmark::Counter(jobs / seconds_100);
  state.counters["rate_many"] = benchmark::Counter(jobs / seconds_many);
  state.counters["many_over_100"] = benchmark::Counter(seconds_100 / seconds_many);
  std::sort(ratios.begin(), ratios.end());
  const std::size_t n = ratios.size();
  state.counters["many_over_100_median"] = benchmark::Counter(
      n == 0 ? 0 : (n % 2 == 1 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2));
}
BENCHMARK(BM_ManyClientsAgainstHundred)
    ->ArgNames({"clients", "charged"})
    ->ArgsProduct({{10000}, {0, 1}})
    ->Iterations(6)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

// BM_DurableWorked's jobs and replicas, each job taking its repository's fleet-wide conflict
// lease: what a git mirror's fleet does with fetches that exclude a repack. 1,000 repositories
// (20 jobs each, a client's jobs on 10 of them at 100 clients), or a repository per job.
void BM_DurableWorkedLeased(benchmark::State& state) {
  WorkDurable(state, static_cast<int>(state.range(0)), 0, static_cast<int>(state.range(1)), true,
              true, static_cast<int>(state.range(2)));
}
BENCHMARK(BM_DurableWorkedLeased)
    ->ArgNames({"replicas", "clients", "repositories"})
    ->ArgsProduct({{1, 2, 4, 8, 16}, {100, 10000}, {1000, 20000}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

// Jobs of K clients stored and worked at once for S seconds, as a fleet that runs for hours does:
// a producer (a store of its own) keeps about 4,000 jobs waiting, in batches of 200, while one
// replica (max_concurrency 8) works them with a no-op handler. Nothing is emptied in between, so
// what the tables' churn leaves (dead rows and index entries, until autovacuum comes) weighs on
// the claims as it would in production. items/s: jobs done over the S seconds; counters: the
// first and last 10 s's rates (k/s) and their ratio, the server's CPU per job, and the heads' and
// jobs' tables with their indexes at the end (KiB).
void BM_DurableSteady(benchmark::State& state) {
  const int clients = static_cast<int>(state.range(0));
  const auto length = std::chrono::seconds(state.range(1));
  constexpr int kBatch = 200;
  constexpr int kWaiting = 4000;
  constexpr auto kWindow = std::chrono::seconds(10);
  double server_cpu = 0, first = 0, last = 0;
  std::int64_t done = 0;
  if (length < 2 * kWindow) {
    state.SkipWithError("seconds must cover two windows of 10 s");
    return;
  }
  for (auto _ : state) {
    state.PauseTiming();
    Sql("TRUNCATE fairgate_durable_jobs, fairgate_resource_leases, fairgate_keys");
    std::atomic<std::int64_t> runs{0}, stored{0};
    SchedulerOptions o;
    o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(conninfo, {"worker0"}));
    o.rule.max_concurrency = 8;
    o.runtime.warn = [](std::string_view) {};
    auto worker = *Scheduler::Create(o);
    if (!worker->RegisterType("fetch", {.max_concurrency = 8, .priority = 2}).ok()) std::abort();
    (void)worker->RegisterDurable("fetch", [&](const DurableJob&, const Context&) {
      runs.fetch_add(1, std::memory_order_relaxed);
      return absl::OkStatus();
    });
    std::atomic<bool> stop{false};
    auto producer = *OpenPostgresStore(conninfo, {"producer"});
    std::thread feeding([&] {
      std::vector<StoredJob> batch;
      for (int i = 0; !stop.load();) {
        if (stored.load() - runs.load() >= kWaiting) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        batch.clear();
        for (int j = 0; j < kBatch; ++j) batch.push_back(Job(i++, clients));
        if (!producer->AddJobs(batch).ok()) std::abort();
        stored.fetch_add(kBatch);
      }
    });
    while (stored.load() < kWaiting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    state.ResumeTiming();
    const double cpu_before = ServerCpuMicros();
    const std::int64_t runs_before = runs.load();
    const auto start = std::chrono::steady_clock::now();
    if (!worker->Recover().ok()) std::abort();
    std::vector<std::int64_t> windows;  // jobs done by the end of each window
    for (auto end = start + kWindow; end <= start + length; end += kWindow) {
      std::this_thread::sleep_until(end);
      windows.push_back(runs.load() - runs_before);
    }
    server_cpu += ServerCpuMicros() - cpu_before;
    done += windows.back();
    state.PauseTiming();
    stop = true;
    feeding.join();
    const double seconds = std::chrono::duration<double>(kWindow).count();
    std::fprintf(stderr, "BM_DurableSteady/clients:%d: k jobs/s by 10 s:", clients);
    for (std::size_t w = 0; w < windows.size(); ++w) {
      const std::int64_t before = w == 0 ? 0 : windows[w - 1];
      std::fprintf(stderr, " %.1f", static_cast<double>(windows[w] - before) / seconds / 1000);
    }
    std::fprintf(stderr, "\n");
    first = static_cast<double>(windows.front()) / seconds / 1000;
    last = static_cast<double>(windows.back() - windows[windows.size() - 2]) / seconds / 1000;
    state.counters["heads_kib"] =
        std::stod(Sql("SELECT pg_total_relation_size('fairgate_key_heads') / 1024"));
    state.counters["jobs_kib"] =
        std::stod(Sql("SELECT pg_total_relation_size('fairgate_durable_jobs') / 1024"));
    (void)worker->Shutdown(Context::Background());
    worker.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(done);
  state.counters["first_10s_kps"] = first;
  state.counters["last_10s_kps"] = last;
  state.counters["last_over_first"] = first > 0 ? last / first : 0;
  state.counters["server_cpu_us_per_job"] =
      benchmark::Counter(server_cpu / static_cast<double>(std::max<std::int64_t>(done, 1)));
}
BENCHMARK(BM_DurableSteady)
    ->ArgNames({"clients", "seconds"})
    ->Args({100, 120})
    ->Args({10000, 120})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// N jobs of 100 ms of 10 clients, stored beforehand, worked by R replicas in this process of one
// slot each (max_concurrency 1) under a fleet-wide cap of 2 on their type: the cap, not the
// replicas, bounds what runs at once once there are two. items/s: jobs done, all replicas
// together (one replica: 10/s at most; two or more: 20/s at most); counters: the most jobs that
// ran at once, and the share of claims that took nothing.
void BM_FleetCap(benchmark::State& state) {
  const int replicas = static_cast<int>(state.range(0));
  constexpr int kJobs = 100;
  constexpr auto kRun = std::chrono::milliseconds(100);
  double claims_empty = 0, claims_with_jobs = 0;
  std::atomic<int> running{0}, most{0};
  for (auto _ : state) {
    state.PauseTiming();
    Sql("TRUNCATE fairgate_durable_jobs, fairgate_resource_leases");
    {
      auto filler = *OpenPostgresStore(conninfo, {"filler"});
      std::vector<StoredJob> batch;
      for (int i = 0; i < kJobs; ++i) {
        StoredJob job = Job(i, 10);
        job.id = "repo" + std::to_string(i);
        batch.push_back(job);
      }
      if (!filler->AddJobs(batch).ok()) std::abort();
    }
    std::atomic<int> runs{0};
    std::vector<std::unique_ptr<Scheduler>> fleet;
    for (int r = 0; r < replicas; ++r) {
      SchedulerOptions o = ReplicaOptions(r, 1);
      o.fleet.type_caps = {{"fetch", 2}};
      auto worker = *Scheduler::Create(o);
      (void)worker->RegisterType("fetch", {.max_concurrency = 1});
      (void)worker->RegisterDurable("fetch", [&](const DurableJob&, const Context&) {
        const int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(kRun);
        --running;
        runs.fetch_add(1);
        return absl::OkStatus();
      });
      fleet.push_back(std::move(worker));
    }
    state.ResumeTiming();
    for (auto& worker : fleet) {
      if (!worker->Recover().ok()) std::abort();
    }
    while (runs.load() < kJobs) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    state.PauseTiming();
    ShutDown(fleet, claims_empty, claims_with_jobs);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kJobs);
  state.counters["most_at_once"] = benchmark::Counter(most.load());
  state.counters["empty_claims_pct"] =
      benchmark::Counter(100 * claims_empty / std::max(1.0, claims_empty + claims_with_jobs));
}
BENCHMARK(BM_FleetCap)
    ->ArgName("replicas")
    ->Arg(1)
    ->Arg(3)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_EnqueueToStart(benchmark::State& state) {
  constexpr std::size_t kColdJobs = 3;
  Sql("DELETE FROM fairgate_durable_jobs");
  SchedulerOptions o;
  o.persistence.store = std::shared_ptr<Store>(*OpenPostgresStore(conninfo, {"worker"}));
  o.runtime.warn = [](std::string_view) {};
  auto worker = *Scheduler::Create(o);
  std::mutex mutex;
  std::condition_variable started;
  std::int64_t runs = 0;
  (void)worker->RegisterType("fetch", {.max_concurrency = 8, .priority = 2});
  (void)worker->RegisterDurable("fetch", [&](const DurableJob&, const Context&) {
    {
      std::lock_guard lock(mutex);
      ++runs;
    }
    started.notify_all();
    return absl::OkStatus();
  });
  if (!worker->Recover().ok()) std::abort();
  auto producer = *OpenPostgresStore(conninfo, {"producer"});
  int i = 0;
  // Seconds from a job's store to its start; nothing if it did not start within 10 s.
  auto enqueue_to_start = [&]() -> std::optional<double> {
    std::unique_lock lock(mutex);
    const std::int64_t before = runs;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    if (!producer->AddJob(Job(i++)).ok()) std::abort();
    lock.lock();
    if (!started.wait_for(lock, std::chrono::seconds(10), [&] { return runs > before; })) {
      return std::nullopt;
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // The first jobs after the replicas' start pay their sessions' first plans of the claim and
  // of the triggers' statements (tens of ms): reported apart, not in the percentiles.
  std::vector<double> cold;
  for (std::size_t warm = 0; warm < kColdJobs; ++warm) {
    const std::optional<double> seconds = enqueue_to_start();
    if (!seconds) {
      state.SkipWithError("a stored job did not start within 10 s");  // the loop is not entered
      break;
    }
    cold.push_back(*seconds);
  }
  std::vector<double> latencies;
  for (auto _ : state) {
    const std::optional<double> seconds = enqueue_to_start();
    if (!seconds) {
      state.SkipWithError("a stored job did not start within 10 s");
      break;
    }
    state.SetIterationTime(*seconds);
    latencies.push_back(*seconds);
  }
  (void)worker->Shutdown(Context::Background());
  if (latencies.empty()) return;
  std::sort(latencies.begin(), latencies.end());
  auto at = [&](double q) {
    return latencies[std::min(latencies.size() - 1,
                              static_cast<std::size_t>(q * latencies.size()))];
  };
  state.counters["p50_ms"] = at(0.5) * 1000;
  state.counters["p99_ms"] = at(0.99) * 1000;
  state.counters["cold_max_ms"] = *std::max_element(cold.begin(), cold.end()) * 1000;
}
BENCHMARK(BM_EnqueueToStart)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(200);

}  // namespace
}  // namespace fairgate

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::string t = (std::filesystem::temp_directory_path() / "fairgate-pg-bench-XXXXXX").string();
  if (mkdtemp(t.data()) == nullptr) return 1;
  fairgate::dir = t;
  chmod(t.c_str(), 0755);
  // FAIRGATE_PG_CONNINFO: a server already running (the side-by-side script's), left running.
  const char* given = std::getenv("FAIRGATE_PG_CONNINFO");
  fairgate::conninfo = given != nullptr ? given : fairgate::Script("start");
  if (fairgate::conninfo.empty()) return 1;
  fairgate::postmaster = fairgate::Postmaster();
  if (fairgate::postmaster == 0) {
    std::fprintf(stderr,
                 "fleet_bench: the server's processes are not found: server_cpu_us_per_job is 0\n");
  }
  benchmark::RunSpecifiedBenchmarks();
  if (given == nullptr) fairgate::Script("stop");
  std::filesystem::remove_all(t);
  return 0;
}
