// WorkerPool for the thread runtime (FAIRGATE_RUNTIME_THREADS): each task runs on a worker
// thread itself. Built instead of worker_pool.cc by the `tsan` preset.
#include <utility>

#include "runtime/worker_pool.h"

namespace fairgate::internal {

WorkerPool::WorkerPool(int threads, std::size_t /*max_queued*/, std::size_t stack_bytes)
    : stack_bytes_(stack_bytes) {
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { WorkerMain(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  posted_.notify_all();
  for (std::thread& t : threads_) t.join();
}

bool WorkerPool::Post(Task task) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return false;
    queue_.push_back(std::move(task));
  }
  posted_.notify_one();
  return true;
}

void WorkerPool::WorkerMain() {
  std::unique_lock lock(mutex_);
  while (true) {
    posted_.wait(lock, [&] { return closed_ || !queue_.empty(); });
    if (queue_.empty()) return;  // closed, and nothing left to run
    Task task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    task();
    task = nullptr;
    lock.lock();
  }
}

}  // namespace fairgate::internal
