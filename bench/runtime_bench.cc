// Benchmarks of the runtime: what RunSync and Submit cost per job, end to end (admission, the
// wake-up of the waiter or the pool, running a no-op, completion).
//
// The four workloads of the runtime's table (bench/README.md), each repeated 5 times with the
// minimum and the median reported, so that a bimodal one shows:
// BM_SubmitBurst/capacity:C/jobs:N         N no-op Submits from one thread into an idle pool,
//                                          until all ran; submit_ns is what the submitter paid
//                                          per call.
// BM_SubmitBacklog/capacity:C/backlog:N/.. the pool drains N jobs already queued.
// BM_RunSyncThreads/threads:T              T plain threads each loop RunSync, T keys, capacity
//                                          50; the wait is from the call to fn's start.
// BM_RunSyncFibers/fibers:F/threads:T      the same from F fibers spread over T threads.
// items/s counts jobs; cpu_ns_per_job is the CPU time of every thread of the process (user and
// system) per job, which the VM's noise moves less than the elapsed time.
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "boost/fiber/fiber.hpp"
#include "fairgate/evidence.h"
#include "fairgate/observer.h"
#include "fairgate/scheduler.h"

namespace fairgate {
namespace {

std::unique_ptr<Scheduler> Make(int capacity, int worker_threads = 0) {
  SchedulerOptions options;
  options.rule.max_concurrency = capacity;
  options.runtime.worker_threads = worker_threads;
  auto scheduler = *Scheduler::Create(options);
  (void)scheduler->RegisterType(
      "noop", {.default_cost = 1, .max_concurrency = capacity, .priority = capacity});
  return scheduler;
}

Status Noop(const Context&) { return absl::OkStatus(); }

// CPU time used by the whole process (every thread), user and system, in seconds.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// The smallest of a statistic's repetitions: with the median, it shows a bimodal benchmark.
double Min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// Waits, without spinning, until Arrive has been called `count` times. Arrive wakes the waiter
// only when what it waits for has happened: a wake per job would put a futex call and a thread
// switch of the benchmark's own into every job measured.
class Countdown {
 public:
  explicit Countdown(int count) : total_(count), left_(count) {}
  void Arrive() {
    bool reached;
    {
      std::lock_guard lock(mutex_);
      --left_;
      reached = left_ == until_;
    }
    if (reached) cv_.notify_all();
  }
  // Waits until `arrived` have arrived (all, by default). One waiter at a time.
  void Wait(int arrived = -1) {
    std::unique_lock lock(mutex_);
    until_ = arrived < 0 ? 0 : total_ - arrived;
    cv_.wait(lock, [&] { return left_ <= until_; });
    until_ = -1;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  const int total_;
  int left_;
  int until_ = -1;  // the count of left_ that the waiter waits for; -1: nobody waits
};

// CPU time of the calling thread, in seconds.
double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

// Binds the calling thread to CPU `own` and every other thread of the process (the scheduler's
// workers and timer) to CPU `others`, until destroyed, when every thread may run anywhere again.
class PinThreads {
 public:
  PinThreads(int own, int others) {
    const long self = syscall(SYS_gettid);
    Pin(self, own);
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      const long tid = std::stol(task.path().filename().string());
      if (tid != self) Pin(tid, others);
    }
  }
  ~PinThreads() {
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      Pin(std::stol(task.path().filename().string()), -1);
    }
  }
  PinThreads(const PinThreads&) = delete;
  PinThreads& operator=(const PinThreads&) = delete;

 private:
  static void Pin(long tid, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    const int cpus = static_cast<int>(std::thread::hardware_concurrency());
    for (int c = 0; c < cpus; ++c) {
      if (cpu < 0 || c == cpu % cpus) CPU_SET(c, &set);
    }
    (void)sched_setaffinity(static_cast<pid_t>(tid), sizeof(set), &set);
  }
};

// `jobs` no-op jobs handed to the scheduler by `queue(scheduler, ran)` (Submit or RunAsync), each
// told its end by `ran`; measured from the first call until the last job ran.
template <typename Queue>
void Burst(benchmark::State& state, Queue queue) {
  const int capacity = static_cast<int>(state.range(0));
  const int jobs = static_cast<int>(state.range(1));
  auto scheduler = Make(capacity);
  // pinned:1: the submitting thread has CPU 0 to itself and the scheduler's threads share CPU 1,
  // as a request thread on a larger machine would not share its core with the background pool.
  std::optional<PinThreads> pinned;
  if (state.range(2) != 0) pinned.emplace(0, 1);
  double submitting = 0;      // seconds in Submit calls, all iterations
  double submitting_cpu = 0;  // CPU seconds of the submitting thread in them
  double cpu = 0;             // CPU seconds of every thread, all iterations
  // The last job's callback wakes the benchmark's thread, which sleeps until then rather than
  // take CPU from the workers. The callback captures one pointer, so that std::function holds it
  // without a heap allocation of the benchmark's own in every Submit measured.
  struct Finish {
    std::atomic<int> done{0};
    int jobs = 0;
    std::mutex mutex;
    std::condition_variable all_ran;
  } finish;
  finish.jobs = jobs;
  auto ran = [&finish](const Status&) {
    if (finish.done.fetch_add(1, std::memory_order_acq_rel) + 1 < finish.jobs) return;
    std::lock_guard lock(finish.mutex);
    finish.all_ran.notify_one();
  };
  for (auto _ : state) {
    const double cpu_start = ProcessCpuSeconds();
    finish.done = 0;
    const auto start = std::chrono::steady_clock::now();
    const double thread_cpu_start = ThreadCpuSeconds();
    for (int i = 0; i < jobs; ++i) {
      if (!queue(*scheduler, ran).ok()) {
        state.SkipWithError("refused");
        return;
      }
    }
    submitting_cpu += ThreadCpuSeconds() - thread_cpu_start;
    submitting += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    {
      std::unique_lock lock(finish.mutex);
      finish.all_ran.wait(lock,
                          [&] { return finish.done.load(std::memory_order_acquire) == jobs; });
    }
    cpu += ProcessCpuSeconds() - cpu_start;
  }
  state.SetItemsProcessed(state.iterations() * jobs);
  const double all = static_cast<double>(state.iterations()) * jobs;
  state.counters["submit_ns"] = submitting * 1e9 / all;
  state.counters["submit_cpu_ns"] = submitting_cpu * 1e9 / all;
  state.counters["cpu_ns_per_job"] = cpu * 1e9 / all;
}

void BM_SubmitBurst(benchmark::State& state) {
  Burst(state, [](Scheduler& scheduler, const Scheduler::DoneCallback& ran) {
    return scheduler.Submit({TypeName("noop"), JobId("repo")}, Noop, ran);
  });
}
BENCHMARK(BM_SubmitBurst)
    ->ArgNames({"capacity", "jobs", "pinned"})
    ->Args({64, 100000, 0})
    ->Args({64, 100000, 1})
    ->Repetitions(5)
    ->ComputeStatistics("min", Min)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The same burst of RunAsync calls: a RunSync with nobody waiting, each settled by a
// continuation on the thread that decided it and run on a pool fiber.
void BM_RunAsyncBurst(benchmark::State& state) {
  Burst(state, [](Scheduler& scheduler, const Scheduler::DoneCallback& ran) {
    return scheduler.RunAsync(Context::Background(), {TypeName("noop"), JobId("repo")}, Noop, ran);
  });
}
BENCHMARK(BM_RunAsyncBurst)
    ->ArgNames({"capacity", "jobs", "pinned"})
    ->Args({64, 100000, 0})
    ->Repetitions(5)
    ->ComputeStatistics("min", Min)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Draining a backlog: the pool is held busy while `backlog` no-op jobs queue up, then released;
// the time measured is from the release until the last callback. Each completion admits the next
// job, which runs on the same fiber: this is the pool's throughput when work is waiting.
void BM_SubmitBacklog(benchmark::State& state) {
  const int capacity = static_cast<int>(state.range(0));
  const int backlog = static_cast<int>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  auto scheduler = Make(capacity, threads);
  double cpu = 0;  // CPU seconds of every thread while draining, all iterations
  for (auto _ : state) {
    // Every job of this iteration, the holders too, reports to `done` before the next begins.
    Countdown held(capacity), done(capacity + backlog);
    auto count = [&](const Status&) { done.Arrive(); };
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    for (int i = 0; i < capacity; ++i) {
      (void)scheduler->Submit(
          {TypeName("noop"), JobId("hold")},
          [&, released](const Context&) {
            held.Arrive();
            released.wait();  // blocks this worker's thread until the backlog is in place
            return absl::OkStatus();
          },
          count);
    }
    held.Wait(std::min(capacity, threads > 0 ? threads : capacity));
    for (int i = 0; i < backlog; ++i) {
      if (!scheduler
               ->Submit(
                   {TypeName("noop"), JobId("repo"), FairnessKey("key" + std::to_string(i % 1000))},
                   Noop, count)
               .ok()) {
        state.SkipWithError("refused");
        return;
      }
    }
    // With every slot held, the Submits above may still wait in the scheduler's intake; a
    // snapshot queues them in the core, so that what is timed is the drain of a queued backlog.
    if (scheduler->Snapshot().pending != backlog) {
      state.SkipWithError("the backlog is not queued");
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ProcessCpuSeconds();
    release.set_value();
    done.Wait();
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    cpu += ProcessCpuSeconds() - cpu_start;
  }
  state.SetItemsProcessed(state.iterations() * backlog);
  state.counters["cpu_ns_per_job"] =
      cpu * 1e9 / (static_cast<double>(state.iterations()) * backlog);
}
BENCHMARK(BM_SubmitBacklog)
    ->ArgNames({"capacity", "backlog", "threads"})
    ->Args({64, 100000, 0})
    ->Args({64, 100000, 2})
    ->Args({64, 100000, 8})
    ->Repetitions(5)
    ->ComputeStatistics("min", Min)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

using SteadyClock = std::chrono::steady_clock;

double Micros(SteadyClock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// The value below which `fraction` of `samples` lie.
double Percentile(std::vector<double> samples, double fraction) {
  if (samples.empty()) return 0;
  const std::size_t at =
      std::min(samples.size() - 1, static_cast<std::size_t>(fraction * samples.size()));
  std::nth_element(samples.begin(), samples.begin() + at, samples.end());
  return samples[at];
}

void ReportPercentiles(benchmark::State& state, const std::vector<double>& micros,
                       const std::string& what) {
  state.counters[what + "_p50_us"] = Percentile(micros, 0.50);
  state.counters[what + "_p99_us"] = Percentile(micros, 0.99);
}

// Plain threads each calling RunSync in a loop; the wait is from the call to fn's start.
void BM_RunSyncThreads(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  constexpr int kPerThread = 200;  // so that starting 1,000 threads is a small part
  auto scheduler = Make(50);
  std::vector<double> waits(static_cast<std::size_t>(threads) * kPerThread);
  for (auto _ : state) {
    std::vector<std::thread> running;
    for (int t = 0; t < threads; ++t) {
      running.emplace_back([&, t] {
        const std::string key = "client" + std::to_string(t);
        for (int i = 0; i < kPerThread; ++i) {
          const auto called = SteadyClock::now();
          double& wait = waits[static_cast<std::size_t>(t) * kPerThread + i];
          (void)scheduler->RunSync(Context::Background(),
                                   {TypeName("noop"), JobId("repo"), FairnessKey(key)},
                                   [&](const Context&) {
                                     wait = Micros(SteadyClock::now() - called);
                                     return absl::OkStatus();
                                   });
        }
      });
    }
    for (auto& t : running) t.join();
  }
  state.SetItemsProcessed(state.iterations() * threads * kPerThread);
  ReportPercentiles(state, waits, "wait");
}
BENCHMARK(BM_RunSyncThreads)
    ->ArgName("threads")
    ->Arg(1000)
    ->Repetitions(5)
    ->ComputeStatistics("min", Min)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Fibers each calling RunSync in a loop, spread evenly over `threads` plain threads (each runs
// its fibers with Boost.Fiber's default scheduler); the wait is from the call to fn's start.
void BM_RunSyncFibers(benchmark::State& state) {
  const int fibers = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  constexpr int kPerFiber = 100;
  auto scheduler = Make(50);
  std::vector<double> waits(static_cast<std::size_t>(fibers) * kPerFiber);
  double cpu = 0;  // CPU seconds of every thread, all iterations
  for (auto _ : state) {
    const double cpu_start = ProcessCpuSeconds();
    std::vector<std::thread> running;
    for (int t = 0; t < threads; ++t) {
      running.emplace_back([&, t] {
        std::vector<boost::fibers::fiber> own;
        for (int f = t; f < fibers; f += threads) {
          own.emplace_back([&, f] {
            const std::string key = "client" + std::to_string(f);
            for (int i = 0; i < kPerFiber; ++i) {
              const auto called = SteadyClock::now();
              double& wait = waits[static_cast<std::size_t>(f) * kPerFiber + i];
              (void)scheduler->RunSync(Context::Background(),
                                       {TypeName("noop"), JobId("repo"), FairnessKey(key)},
                                       [&](const Context&) {
                                         wait = Micros(SteadyClock::now() - called);
                                         return absl::OkStatus();
                                       });
            }
          });
        }
        for (auto& f : own) f.join();
      });
    }
    for (auto& t : running) t.join();
    cpu += ProcessCpuSeconds() - cpu_start;
  }
  state.SetItemsProcessed(state.iterations() * fibers * kPerFiber);
  state.counters["cpu_ns_per_job"] =
      cpu * 1e9 / (static_cast<double>(state.iterations()) * fibers * kPerFiber);
  ReportPercentiles(state, waits, "wait");
}
BENCHMARK(BM_RunSyncFibers)
    ->ArgNames({"fibers", "threads"})
    ->Args({1000, 2})
    ->Repetitions(5)
    ->ComputeStatistics("min", Min)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Dispatch latency on the pool: from the moment a job becomes admissible to its fn's start.
//  - chained: capacity 1 and a queue of Submit jobs; a job is admissible when the one before it
//    completes, measured from the end of that job's fn (the completion, its callback and the
//    admission are all inside);
//  - after_runsync: a RunSync caller's job holds the one slot and a Submit job waits; measured
//    from the end of the RunSync job's fn, through the caller's completion, to the pool;
//  - idle_pool: Submit to an idle scheduler, measured from the call.
void BM_DispatchLatency(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  constexpr int kJobs = 2000;
  std::vector<double> latencies;
  for (auto _ : state) {
    auto scheduler = Make(1);
    latencies.clear();
    std::vector<SteadyClock::time_point> ended(kJobs), started(kJobs);
    Countdown done(kJobs);
    if (mode == 0) {
      std::promise<void> release;
      std::shared_future<void> released = release.get_future().share();
      (void)scheduler->Submit({TypeName("noop"), JobId("hold")}, [released](const Context&) {
        released.wait();
        return absl::OkStatus();
      });
      for (int i = 0; i < kJobs; ++i) {
        (void)scheduler->Submit(
            {TypeName("noop"), JobId("repo")},
            [&, i](const Context&) {
              started[i] = SteadyClock::now();
              ended[i] = SteadyClock::now();
              return absl::OkStatus();
            },
            [&](const Status&) { done.Arrive(); });
      }
      release.set_value();
      done.Wait();
      for (int i = 1; i < kJobs; ++i) latencies.push_back(Micros(started[i] - ended[i - 1]));
    } else {
      for (int i = 0; i < kJobs; ++i) {
        SteadyClock::time_point from;
        std::promise<void> ran;
        if (mode == 1) {
          // The RunSync job submits the background job while it holds the slot.
          (void)scheduler->RunSync(Context::Background(),
                                   {TypeName("noop"), JobId("fg"), FairnessKey("client")},
                                   [&](const Context&) {
                                     (void)scheduler->Submit(
                                         {TypeName("noop"), JobId("bg")},
                                         [&](const Context&) {
                                           started[i] = SteadyClock::now();
                                           ran.set_value();
                                           return absl::OkStatus();
                                         },
                                         nullptr);
                                     from = SteadyClock::now();
                                     return absl::OkStatus();
                                   });
        } else {
          from = SteadyClock::now();
          (void)scheduler->Submit(
              {TypeName("noop"), JobId("bg")},
              [&](const Context&) {
                started[i] = SteadyClock::now();
                ran.set_value();
                return absl::OkStatus();
              },
              nullptr);
        }
        ran.get_future().wait();
        latencies.push_back(Micros(started[i] - from));
      }
    }
  }
  state.SetItemsProcessed(state.iterations() * kJobs);
  ReportPercentiles(state, latencies, "latency");
}
BENCHMARK(BM_DispatchLatency)
    ->ArgName("mode")
    ->Arg(0)  // chained
    ->Arg(1)  // after_runsync
    ->Arg(2)  // idle_pool
    ->Iterations(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// What watching costs per job: RunSync of no-ops from one thread (admission, run, completion),
// mode 0 with nothing watching, 1 with a no-op observer, 2 with an evidence sink that formats each
// record as its JSON line (and drops it), 3 with both. The delivery thread does the observer's and
// the sink's work; this thread pays for building the events and handing them over.
void BM_Watched(benchmark::State& state) {
  struct NoopObserver : Observer {
    void OnEvent(const JobEvent&) override {}
  };
  const int mode = static_cast<int>(state.range(0));
  SchedulerOptions options;
  options.rule.max_concurrency = 8;
  if (mode & 1) options.runtime.observers = {std::make_shared<NoopObserver>()};
  if (mode & 2) {
    options.runtime.evidence = [](const AdmissionEvidence& e) {
      benchmark::DoNotOptimize(ToJsonLine(e));
    };
  }
  auto scheduler = *Scheduler::Create(options);
  (void)scheduler->RegisterType("noop", {.default_cost = 1, .max_concurrency = 8, .priority = 8});
  for (auto _ : state) {
    (void)scheduler->RunSync(Context::Background(),
                             {TypeName("noop"), JobId("repo"), FairnessKey("client")}, Noop);
  }
  (void)scheduler->Shutdown(Context::Background());  // counts the delivery's work too
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Watched)->ArgName("mode")->DenseRange(0, 3)->UseRealTime();

}  // namespace
}  // namespace fairgate

BENCHMARK_MAIN();
