// Benchmarks of the runtime: what RunSync and Submit cost per job, end to end (admission, the
// wake-up of the waiter or the pool, running a no-op, completion).
//
// BM_SubmitNoop/capacity:C       submit a batch of no-op jobs, wait for every callback.
// BM_RunSyncFibers/fibers:F      F fibers on one thread each loop RunSync, F keys, capacity 50.
// BM_RunSyncThreads/threads:T    T plain threads each loop RunSync, T keys, capacity 50.
// items/s counts jobs.
#include <atomic>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "boost/fiber/fiber.hpp"
#include "fairgate/scheduler.h"

namespace fairgate {
namespace {

std::unique_ptr<Scheduler> Make(int capacity) {
  SchedulerOptions options;
  options.max_concurrency = capacity;
  auto scheduler = *Scheduler::Create(options);
  (void)scheduler->RegisterType(
      "noop", {.default_cost = 1, .max_concurrency = capacity, .priority = capacity});
  return scheduler;
}

Status Noop(const Context&) { return absl::OkStatus(); }

void BM_SubmitNoop(benchmark::State& state) {
  const int capacity = static_cast<int>(state.range(0));
  constexpr int kBatch = 20000;
  auto scheduler = Make(capacity);
  std::atomic<int> done{0};
  for (auto _ : state) {
    done = 0;
    for (int i = 0; i < kBatch; ++i) {
      if (!scheduler->Submit("noop", "repo", "", Noop, [&](const Status&) { ++done; }).ok()) {
        state.SkipWithError("refused");
        return;
      }
    }
    while (done.load(std::memory_order_acquire) < kBatch) std::this_thread::yield();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_SubmitNoop)
    ->ArgName("capacity")
    ->Arg(64)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_RunSyncFibers(benchmark::State& state) {
  const int fibers = static_cast<int>(state.range(0));
  constexpr int kPerFiber = 100;
  auto scheduler = Make(50);
  for (auto _ : state) {
    std::vector<boost::fibers::fiber> running;
    for (int f = 0; f < fibers; ++f) {
      running.emplace_back([&, f] {
        const std::string key = "client" + std::to_string(f);
        for (int i = 0; i < kPerFiber; ++i) {
          (void)scheduler->RunSync(Context::Background(), "noop", "repo", key, Noop);
        }
      });
    }
    for (auto& f : running) f.join();
  }
  state.SetItemsProcessed(state.iterations() * fibers * kPerFiber);
}
BENCHMARK(BM_RunSyncFibers)
    ->ArgName("fibers")
    ->Arg(1000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_RunSyncThreads(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  constexpr int kPerThread = 20;
  auto scheduler = Make(50);
  for (auto _ : state) {
    std::vector<std::thread> running;
    for (int t = 0; t < threads; ++t) {
      running.emplace_back([&, t] {
        const std::string key = "client" + std::to_string(t);
        for (int i = 0; i < kPerThread; ++i) {
          (void)scheduler->RunSync(Context::Background(), "noop", "repo", key, Noop);
        }
      });
    }
    for (auto& t : running) t.join();
  }
  state.SetItemsProcessed(state.iterations() * threads * kPerThread);
}
BENCHMARK(BM_RunSyncThreads)
    ->ArgName("threads")
    ->Arg(1000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fairgate

BENCHMARK_MAIN();
