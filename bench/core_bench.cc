// Benchmarks of the admission core alone: no threads, no clock.
//
// BM_AdmitComplete keeps a backlog of `pending` jobs over `keys` fairness keys and a full set of
// running jobs; each iteration completes the oldest running job, enqueues one new job (so the
// backlog stays the same) and admits the next one. items/s counts iterations, i.e. one admission
// plus one completion. bytes_per_pending_job is what the backlog holds per job, from a counting
// allocator.
#include <algorithm>
#include <cstddef>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/container/btree_set.h"
#include "benchmark/benchmark.h"
#include "core/admission_core.h"
#include "core_workload.h"
#include "counting_allocator.h"

namespace fairgate {
namespace {

using bench::Enqueue;
using bench::MakeCore;
using bench::Workload;

void BM_AdmitComplete(benchmark::State& state) {
  const int pending = static_cast<int>(state.range(0));
  const int keys = static_cast<int>(state.range(1));
  const int ids = static_cast<int>(state.range(2));
  Workload w(keys, ids);
  auto core = MakeCore();
  double now = 0;
  const std::int64_t before = bench::BytesInUse();
  for (int i = 0; i < pending; ++i) Enqueue(*core, w, now);
  const std::int64_t backlog_bytes = bench::BytesInUse() - before;
  std::deque<core::JobTicket> running;
  while (auto a = core->NextAdmission(now)) running.push_back(a->ticket);
  for (auto _ : state) {
    now += 0.001;
    if (!running.empty()) {
      if (!core->Complete(running.front(), 1.0 + (w.rng() % 100) * 0.1, now).ok()) std::abort();
      running.pop_front();
    }
    Enqueue(*core, w, now);
    if (auto a = core->NextAdmission(now)) running.push_back(a->ticket);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["bytes_per_pending_job"] =
      static_cast<double>(backlog_bytes) / static_cast<double>(pending);
  state.counters["pending"] = static_cast<double>(core->TakeSnapshot(0).pending);
}
BENCHMARK(BM_AdmitComplete)
    ->ArgNames({"pending", "keys", "ids"})
    ->ArgsProduct({{1000, 10000, 100000, 1000000}, {10, 10000, 1000000}, {1000}})
    ->Args({100000, 10000, 100000});

// BM_AdmitComplete with `workers` workers of mixed capabilities (fairgate/worker.h; 0: none):
// a quarter serve every type, a quarter clones only, a quarter clones and archives, a quarter
// fetches only, 1 slot each but every fourth 2, and one more type ("gc", 1 job in 50) that one
// worker alone serves, so that each decision also looks for a starving rare type. The global cap
// is the workers' slots; the tiers' caps are the workload's (48 + 16 slots).
void BM_AdmitCompleteWorkers(benchmark::State& state) {
  const int pending = static_cast<int>(state.range(0));
  const int keys = static_cast<int>(state.range(1));
  const int workers = static_cast<int>(state.range(2));
  Workload w(keys, 1000);
  int slots = 0;
  for (int i = 0; i < workers; ++i) slots += i % 4 == 0 ? 2 : 1;
  auto core = MakeCore(std::max(slots, bench::kCapacity));
  (void)core->RegisterType("gc", {.default_cost = 5, .max_concurrency = 4, .priority = 16});
  const std::vector<std::vector<std::string>> kinds{
      {"clone", "archive", "fetch"}, {"clone"}, {"clone", "archive"}, {"fetch"}};
  for (int i = 0; i < workers; ++i) {
    WorkerConfig config{i % 4 == 0 ? 2 : 1, kinds[static_cast<std::size_t>(i % 4)], {}};
    if (i == 0) config.types.push_back("gc");
    if (!core->AddWorker("worker-" + std::to_string(i), config).ok()) std::abort();
  }
  auto enqueue = [&](double now) {
    if (workers > 0 && w.rng() % 50 == 0) {
      if (!core->Enqueue({"gc", w.Id(), w.Key()}, now).ok()) std::abort();
    } else {
      Enqueue(*core, w, now);
    }
  };
  double now = 0;
  for (int i = 0; i < pending; ++i) enqueue(now);
  std::deque<core::JobTicket> running;
  while (auto a = core->NextAdmission(now)) running.push_back(a->ticket);
  for (auto _ : state) {
    now += 0.001;
    if (!running.empty()) {
      if (!core->Complete(running.front(), 1.0 + (w.rng() % 100) * 0.1, now).ok()) std::abort();
      running.pop_front();
    }
    enqueue(now);
    while (auto a = core->NextAdmission(now)) running.push_back(a->ticket);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["pending"] = static_cast<double>(core->TakeSnapshot(0).pending);
  state.counters["running"] = static_cast<double>(running.size());
}
BENCHMARK(BM_AdmitCompleteWorkers)
    ->ArgNames({"pending", "keys", "workers"})
    ->ArgsProduct({{1000, 100000}, {10000}, {0, 100}});

// A herd on one resource (bench::Herd): items/s counts completions of the running clone, each
// followed by the admission of the next of `waiters` waiting on the same repository.
void BM_ConflictHerd(benchmark::State& state) {
  bench::Herd herd(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state) herd.Step();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ConflictHerd)
    ->ArgNames({"waiters", "keys"})
    ->ArgsProduct({{100, 10000}, {1, 100}})
    ->Args({10000, 10000});

// A scheduler with room: each iteration enqueues a job of one of `keys` keys, admits it (nothing
// else is pending) and completes it, as a RunSync into a pool with room does. With `one_call`,
// through EnqueueAndAdmit, which admits such a job without putting it in the order; without, as
// Enqueue then NextAdmission. items/s counts jobs.
void BM_UncontendedAdmission(benchmark::State& state) {
  const bool one_call = state.range(0) != 0;
  const int keys = static_cast<int>(state.range(1));
  auto core = MakeCore();
  std::vector<std::string> names;
  for (int i = 0; i < keys; ++i) names.push_back("client-" + std::to_string(i));
  double now = 0;
  int i = 0;
  for (auto _ : state) {
    now += 0.001;
    const core::EnqueueRequest request{"archive", "repo", names[static_cast<std::size_t>(i)]};
    i = (i + 1) % keys;
    std::optional<core::Admission> admitted;
    if (one_call) {
      if (!core->EnqueueAndAdmit(request, now, admitted).ok()) std::abort();
    } else {
      if (!core->Enqueue(request, now).ok()) std::abort();
      admitted = core->NextAdmission(now);
    }
    if (!admitted || !core->Complete(admitted->ticket, 1.0, now).ok()) std::abort();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_UncontendedAdmission)
    ->ArgNames({"one_call", "keys"})
    ->ArgsProduct({{0, 1}, {1, 1000}});

// The floor under BM_AdmitComplete: moving one lane of the core's lane order to a later place
// among `entries` others, which is what charging a key costs per lane it has. `heap:1` is the
// core's LaneSet (a heap whose lanes know their positions: the entry moves down in place);
// `heap:0` is what the core used before it, an absl::btree_set of the same 48-byte entries (an
// erase and an insert). items/s counts moves.
void BM_LaneRelink(benchmark::State& state) {
  const auto entries = static_cast<std::size_t>(state.range(0));
  const bool heap = state.range(1) != 0;
  std::mt19937_64 rng(7);
  core::LaneSet set;
  absl::btree_set<core::LaneEntry> tree;
  std::vector<core::Lane> lanes(entries);
  for (std::size_t i = 0; i < entries; ++i) {
    core::Lane& lane = lanes[i];
    lane.order = {{core::kUnreservedRank, rng() % 1000000}, {core::kNoSjf, rng(), i}};
    if (heap) {
      set.insert(lane);
    } else {
      tree.insert({lane.order, &lane});
    }
  }
  for (auto _ : state) {
    core::Lane& lane = lanes[rng() % entries];
    if (heap) {
      lane.order.key.acc += rng() % 1000;
      set.Relink(lane);
      benchmark::DoNotOptimize(set.front());
    } else {
      tree.erase({lane.order, &lane});
      lane.order.key.acc += rng() % 1000;
      tree.insert({lane.order, &lane});
      benchmark::DoNotOptimize(tree.begin()->lane);
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LaneRelink)
    ->ArgNames({"entries", "heap"})
    ->ArgsProduct({{10, 1000, 10000, 100000}, {0, 1}});

// Memory of a key that has nothing pending or running but is still remembered (its accumulated
// cost), per key: keys that each ran one job and went idle.
void BM_IdleKeyMemory(benchmark::State& state) {
  const int keys = static_cast<int>(state.range(0));
  double per_key = 0;
  for (auto _ : state) {
    auto core = MakeCore();
    std::vector<std::string> names;
    for (int i = 0; i < keys; ++i)
      names.push_back("10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256));
    // Warm the estimate and resource tables, so that only the keys are measured below.
    for (int i = 0; i < 3; ++i) {
      auto t = core->Enqueue({"archive", "repo", "warm"}, 0);
      auto a = core->NextAdmission(0);
      if (!t.ok() || !a || !core->Complete(a->ticket, 1, 0).ok()) std::abort();
    }
    const std::int64_t before = bench::BytesInUse();
    for (int i = 0; i < keys; ++i) {
      auto t = core->Enqueue({"archive", "repo", names[i]}, 0);
      auto a = core->NextAdmission(0);
      if (!t.ok() || !a || !core->Complete(a->ticket, 1, 0).ok()) std::abort();
    }
    per_key = static_cast<double>(bench::BytesInUse() - before) / keys;
    if (core->TakeSnapshot(0).keys_tracked != static_cast<std::size_t>(keys) + 1) std::abort();
  }
  state.SetItemsProcessed(state.iterations() * keys);
  state.counters["bytes_per_idle_key"] = per_key;
}
BENCHMARK(BM_IdleKeyMemory)
    ->ArgName("keys")
    ->Arg(10000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond);

// The floor under the large rows of BM_AdmitComplete: one load from a cache line that is not in
// the cache, on this machine. The lines of `megabytes` of memory form one random cycle, and each
// load reads the address of the next, so no two overlap. items/s counts loads.
void BM_DependentLoad(benchmark::State& state) {
  struct alignas(64) Line {
    std::size_t next;
  };
  const auto lines = static_cast<std::size_t>(state.range(0)) * 1024 * 1024 / sizeof(Line);
  std::vector<std::size_t> order(lines);
  for (std::size_t i = 0; i < lines; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  std::vector<Line> memory(lines);
  for (std::size_t i = 0; i < lines; ++i) memory[order[i]].next = order[(i + 1) % lines];
  std::size_t at = order[0];
  for (auto _ : state) {
    at = memory[at].next;
    benchmark::DoNotOptimize(at);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DependentLoad)->ArgName("megabytes")->Arg(1)->Arg(2)->Arg(8)->Arg(32);

}  // namespace
}  // namespace fairgate

BENCHMARK_MAIN();
