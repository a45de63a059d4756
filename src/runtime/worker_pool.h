// WorkerPool: threads that run tasks as fibers, one pool per scheduler.
//
// Each worker thread keeps Boost.Fiber's default round_robin scheduler, blocks its main fiber on
// the pool's buffered_channel, and runs each task it pops as a new fiber on that same thread,
// launched with `dispatch` so the task starts before the thread pops another. Nothing migrates
// between threads and no process-wide scheduler state is touched, so several pools (several
// schedulers) live in one process; an idle pool sleeps in the channel and uses no CPU. A task
// that blocks its thread in a system call holds only that thread; the other threads keep popping.
//
// With FAIRGATE_RUNTIME_THREADS (runtime/waiting.h) each worker runs the tasks it pops one after
// the other on the thread itself, from a mutex-guarded queue: no fibers, for ThreadSanitizer.
//
// Thread safety: Post may be called from any thread or fiber. Close and the destructor must not
// be called from one of the pool's own tasks.
#ifndef FAIRGATE_RUNTIME_WORKER_POOL_H_
#define FAIRGATE_RUNTIME_WORKER_POOL_H_

#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

#if FAIRGATE_RUNTIME_THREADS
#include <condition_variable>
#include <deque>
#include <mutex>
#else
#include "boost/fiber/buffered_channel.hpp"
#endif

namespace fairgate::internal {

class WorkerPool {
 public:
  using Task = std::function<void()>;

  // `max_queued`: how many tasks may wait in the channel at once; Post never blocks below it.
  WorkerPool(int threads, std::size_t max_queued, std::size_t stack_bytes);
  // Closes the channel, lets every worker finish the fibers it started, and joins the threads.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task` to run as a fiber on one of the workers. Returns false once closed.
  bool Post(Task task);

  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void WorkerMain();

  const std::size_t stack_bytes_;
#if FAIRGATE_RUNTIME_THREADS
  std::mutex mutex_;
  std::condition_variable posted_;
  std::deque<Task> queue_;
  bool closed_ = false;
#else
  boost::fibers::buffered_channel<Task> channel_;
#endif
  std::vector<std::thread> threads_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_WORKER_POOL_H_
