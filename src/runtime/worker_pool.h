// WorkerPool: threads that run tasks, one pool per scheduler.
//
// Each worker runs the tasks it takes from the pool's queue as fibers on its own thread (round
// robin, under runtime/parker.h's scheduling algorithm), launched with `dispatch` so a task starts
// before the worker looks for another; nothing migrates between threads and no process-wide
// scheduler state is touched, so several pools (several schedulers) live in one process. A task
// that blocks its thread in a system call holds only that thread. With FAIRGATE_RUNTIME_THREADS
// (runtime/waiting.h) a worker runs each task on the thread itself: no fibers, for
// ThreadSanitizer. The queue and the wake protocol below are the same code in both.
//
// The wake protocol: waking a sleeping thread costs microseconds, so a Post wakes a worker only
// when no worker is already awake looking for work, and never more than one at a time:
// - a worker that finds the queue empty first *searches*: it polls the queue's size without the
//   lock for up to kSearch, yielding to its thread's other fibers in between, and only then
//   parks (runtime/parker.h: its thread sleeps once its other fibers wait too). At most half the
//   workers (at least one; no more than half the cores) search at once, so an idle pool spins on
//   few cores, briefly, then sleeps;
// - Post queues the task under the lock and unparks one parked worker only if nobody searches
//   and no wake is already on its way (`waking_`): a burst of Posts wakes at most one worker,
//   and a searching worker takes the burst's tasks with no wake at all;
// - a worker that takes a task and leaves more behind, with nobody searching and no wake on its
//   way, wakes one more: the pool grows to the work, one worker at a time, paid for by workers
//   rather than by the poster.
// The parked workers are a stack (`parked_`): the one woken is the last to have parked, whose
// thread is the likeliest still to be warm. A wake is handed to one worker: the waker takes it
// off the stack under the lock and unparks it after releasing the lock, so no lock is held
// across the system call that wakes a thread.
// No wake-up is lost: Post reads `searching_` after queueing under the lock, and a searcher
// stops searching (decrements) before it takes the lock to check the queue and park; so either
// the searcher's check sees the task, or Post sees no searcher and the parked worker (pushed
// under the same lock) and unparks it; an Unpark that comes before its Park is kept.
// Thread safety: Post may be called from any thread or fiber. The destructor must not be called
// from one of the pool's own tasks.
#ifndef FAIRGATE_RUNTIME_WORKER_POOL_H_
#define FAIRGATE_RUNTIME_WORKER_POOL_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/parker.h"
#include "runtime/waiting.h"

namespace fairgate::internal {

class WorkerPool {
 public:
  using Task = std::function<void()>;

  // How long a worker that found nothing polls for work before it parks.
  static constexpr std::chrono::microseconds kSearch{50};

  WorkerPool(int threads, std::size_t stack_bytes);
  // Lets the workers run what was posted and the fibers they started, then joins them.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task` to run on one of the workers; never blocks. Returns false once closing.
  bool Post(Task task);

  int threads() const { return static_cast<int>(threads_.size()); }

  // How many times a parked worker was woken, by Post and by another worker; for tests and
  // benchmarks.
  struct Wakes {
    std::uint64_t by_post = 0;
    std::uint64_t by_worker = 0;
  };
  Wakes wakes() const;
  // How many workers are parked now; for tests.
  int parked() const;

 private:
  void WorkerMain(Parker& parker);
  // Takes the next task, searching and parking while there is none; false once closed and
  // empty. Wakes one more worker when it leaves work behind and nobody will take it.
  bool Take(Parker& parker, Task& task);
  // Polls for a task for up to kSearch, unless enough workers search already; true if one was
  // queued meanwhile.
  bool Search();

  const std::size_t stack_bytes_;
  const int max_searching_;

  const std::unique_ptr<Parker[]> parkers_;  // one per worker

  mutable ShortMutex mutex_;  // guards what follows, up to the atomics
  std::deque<Task> queue_;
  bool closed_ = false;
  std::vector<Parker*> parked_;  // the parked workers, the last to park on top
  int waking_ = 0;               // unparked and not yet awake: each will look at the queue
  Wakes wakes_;

  std::atomic<std::size_t> queued_{0};  // queue_.size(), for searchers that hold no lock
  std::atomic<int> searching_{0};

  std::vector<std::thread> threads_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_WORKER_POOL_H_
