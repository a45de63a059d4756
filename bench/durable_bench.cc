// Benchmarks of what a store costs (fairgate/store.h, the SQLite store), on a real file in the
// temporary directory.
//
// BM_SubmitDurable/full:F            SubmitDurable from one thread into a paused type: the cost
//                                    of storing a job (one transaction), F: synchronous=FULL
//                                    (1) or NORMAL (0). items/s counts jobs stored.
// BM_SubmitDurableConcurrently/threads:T/full:F  the same from T threads at once, 64 jobs each
//                                    per iteration: concurrent calls share a commit (group
//                                    commit), so the rate grows with T where one fsync bounds one
//                                    caller. items/s counts jobs stored.
// BM_SubmitDurableBatch/batch:B/full:F  SubmitDurableBatch of B jobs from one thread into a
//                                    paused type: one commit per batch. items/s counts jobs.
// BM_DurableThroughCompletion/full:F the same jobs run by a no-op handler until the store is
//                                    empty: store, mark the attempt, remove. items/s: jobs done.
// BM_Recover/jobs:N                  Create + RegisterType + RegisterDurable + Recover of a file
//                                    holding N stored jobs (queued, paused). items/s: jobs.
// BM_RunSyncWhileFlushing/keys:K/flush_ms:M  RunSync no-ops from one thread over K keys, with
//                                    the state flushed every M ms (0: no store at all).
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "fairgate/scheduler.h"
#include "fairgate/sqlite_store.h"

namespace fairgate {
namespace {

class TempFile {
 public:
  TempFile() {
    std::string t = (std::filesystem::temp_directory_path() / "fairgate-bench-XXXXXX").string();
    if (mkdtemp(t.data()) == nullptr) std::abort();
    dir_ = t;
  }
  ~TempFile() { std::filesystem::remove_all(dir_); }
  std::string path() const { return dir_ + "/state.db"; }

 private:
  std::string dir_;
};

SchedulerOptions StateOptions(const std::string& path, bool full) {
  SchedulerOptions options;
  options.persistence.store = *OpenSqliteStore(
      path,
      {.synchronous = full ? SqliteStoreOptions::Sync::kFull : SqliteStoreOptions::Sync::kNormal});
  options.rule.max_concurrency = 8;
  options.runtime.worker_threads = 2;
  options.runtime.warn = [](std::string_view) {};
  return options;
}

Status Noop(const DurableJob&, const Context&) { return absl::OkStatus(); }

std::unique_ptr<Scheduler> Durable(const SchedulerOptions& options, bool paused) {
  auto s = *Scheduler::Create(options);
  (void)s->RegisterType("fetch", {.max_concurrency = 8, .priority = 8});
  (void)s->RegisterDurable("fetch", Noop);
  if (paused) (void)s->PauseType("fetch");
  if (!s->Recover().ok()) std::abort();
  return s;
}

void BM_SubmitDurable(benchmark::State& state) {
  TempFile file;
  auto s = Durable(StateOptions(file.path(), state.range(0) != 0), true);
  std::int64_t n = 0;
  const std::string payload(64, 'p');
  for (auto _ : state) {
    if (!s->SubmitDurable({TypeName("fetch"), JobId("repo" + std::to_string(n % 1000)),
                           FairnessKey("k" + std::to_string(n % 10))},
                          payload)
             .ok()) {
      state.SkipWithError("SubmitDurable failed");
      break;
    }
    ++n;
  }
  state.SetItemsProcessed(n);
}
BENCHMARK(BM_SubmitDurable)->ArgName("full")->Arg(0)->Arg(1)->UseRealTime();

void BM_SubmitDurableConcurrently(benchmark::State& state) {
  TempFile file;
  auto s = Durable(StateOptions(file.path(), state.range(1) != 0), true);
  const int threads = static_cast<int>(state.range(0));
  constexpr int kPerThread = 64;
  const std::string payload(64, 'p');
  std::atomic<bool> failed{false};
  std::int64_t n = 0;
  for (auto _ : state) {
    std::vector<std::thread> submitters;
    for (int t = 0; t < threads; ++t) {
      submitters.emplace_back([&, t, first = n] {
        for (int i = 0; i < kPerThread; ++i) {
          const std::int64_t id = first + t * kPerThread + i;
          if (!s->SubmitDurable({TypeName("fetch"), JobId("repo" + std::to_string(id % 1000)),
                                 FairnessKey("k" + std::to_string(id % 10))},
                                payload)
                   .ok()) {
            failed = true;
          }
        }
      });
    }
    for (std::thread& t : submitters) t.join();
    n += threads * kPerThread;
    if (failed) {
      state.SkipWithError("SubmitDurable failed");
      break;
    }
  }
  state.SetItemsProcessed(n);
}
BENCHMARK(BM_SubmitDurableConcurrently)
    ->ArgNames({"threads", "full"})
    ->ArgsProduct({{1, 8}, {1}})
    ->UseRealTime();

void BM_SubmitDurableBatch(benchmark::State& state) {
  TempFile file;
  auto s = Durable(StateOptions(file.path(), state.range(1) != 0), true);
  const std::size_t size = static_cast<std::size_t>(state.range(0));
  const std::string payload(64, 'p');
  std::vector<std::string> ids, keys;
  for (std::size_t i = 0; i < size; ++i) {
    ids.push_back("repo" + std::to_string(i % 1000));
    keys.push_back("k" + std::to_string(i % 10));
  }
  std::vector<DurableSubmission> batch;
  for (std::size_t i = 0; i < size; ++i)
    batch.push_back({{TypeName("fetch"), JobId(ids[i]), FairnessKey(keys[i])}, payload});
  for (auto _ : state) {
    if (!s->SubmitDurableBatch(batch).ok()) {
      state.SkipWithError("SubmitDurableBatch failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(size));
}
BENCHMARK(BM_SubmitDurableBatch)
    ->ArgNames({"batch", "full"})
    ->ArgsProduct({{100, 1000}, {1}})
    ->UseRealTime();

void BM_DurableThroughCompletion(benchmark::State& state) {
  TempFile file;
  auto s = Durable(StateOptions(file.path(), state.range(0) != 0), false);
  auto reader = *OpenSqliteStore(file.path());
  std::int64_t n = 0;
  constexpr int kBatch = 200;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i, ++n) {
      (void)s->SubmitDurable({TypeName("fetch"), JobId("repo" + std::to_string(n % 1000))}, "");
    }
    while (!reader->LiveJobs()->empty())
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  state.SetItemsProcessed(n);
}
BENCHMARK(BM_DurableThroughCompletion)->ArgName("full")->Arg(0)->Arg(1)->UseRealTime();

void BM_Recover(benchmark::State& state) {
  TempFile file;
  const int jobs = static_cast<int>(state.range(0));
  {
    // Filled through the store in one go (NORMAL: the figure is recovery, not this).
    auto store = *OpenSqliteStore(file.path(), {.synchronous = SqliteStoreOptions::Sync::kNormal});
    StoredJob job;
    job.type = "fetch";
    job.payload = std::string(64, 'p');
    for (int i = 0; i < jobs; ++i) {
      job.id = "repo" + std::to_string(i % 1000);
      job.fairness_key = "k" + std::to_string(i % 100);
      if (!store->AddJob(job).ok()) std::abort();
    }
  }
  for (auto _ : state) {
    auto s = *Scheduler::Create(StateOptions(file.path(), true));
    (void)s->RegisterType("fetch", {.max_concurrency = 8, .priority = 8});
    (void)s->RegisterDurable("fetch", Noop);
    (void)s->PauseType("fetch");
    auto report = s->Recover();
    if (!report.ok() || report->queued != static_cast<std::size_t>(jobs)) {
      state.SkipWithError("Recover did not queue every job");
      break;
    }
    state.PauseTiming();
    s.reset();  // shuts down: the jobs stay stored
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * jobs);
}
BENCHMARK(BM_Recover)->ArgName("jobs")->Arg(100000)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RunSyncWhileFlushing(benchmark::State& state) {
  TempFile file;
  const int keys = static_cast<int>(state.range(0));
  const int flush_ms = static_cast<int>(state.range(1));
  SchedulerOptions options;
  options.rule.max_concurrency = 8;
  options.runtime.warn = [](std::string_view) {};
  if (flush_ms > 0) {
    options = StateOptions(file.path(), true);
    options.persistence.state_flush_interval = Seconds(flush_ms / 1000.0);
  }
  auto s = *Scheduler::Create(options);
  (void)s->RegisterType("clone", {.max_concurrency = 8, .priority = 8});
  std::int64_t n = 0;
  for (auto _ : state) {
    (void)s->RunSync(Context::Background(),
                     {TypeName("clone"), JobId("repo" + std::to_string(n % 1000)),
                      FairnessKey("k" + std::to_string(n % keys))},
                     [](const Context&) { return absl::OkStatus(); });
    ++n;
  }
  state.SetItemsProcessed(n);
}
BENCHMARK(BM_RunSyncWhileFlushing)
    ->ArgNames({"keys", "flush_ms"})
    ->Args({10000, 0})
    ->Args({10000, 1000})
    ->Args({10000, 100})
    ->UseRealTime();

}  // namespace
}  // namespace fairgate

BENCHMARK_MAIN();
