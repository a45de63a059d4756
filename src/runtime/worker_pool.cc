#include "runtime/worker_pool.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>

#if !FAIRGATE_RUNTIME_THREADS
#include "boost/fiber/condition_variable.hpp"
#include "boost/fiber/fiber.hpp"
#include "boost/fiber/mutex.hpp"
#include "runtime/fiber_stack.h"
#endif
#include "runtime/thread_name.h"

namespace fairgate::internal {
namespace {

// Half the workers, at least one, and no more than half the cores.
int MaxSearching(int threads) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, std::min(threads, cores) / 2);
}

}  // namespace

WorkerPool::WorkerPool(int threads, std::size_t stack_bytes)
    : stack_bytes_(stack_bytes),
      max_searching_(MaxSearching(threads)),
      parkers_(std::make_unique<Parker[]>(threads)) {
  parked_.reserve(threads);
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, parker = &parkers_[i]] {
      NameThisThread("fg-worker");
      WorkerMain(*parker);
    });
  }
}

WorkerPool::~WorkerPool() {
  std::vector<Parker*> parked;
  {
    std::unique_lock lock(mutex_);
    closed_ = true;
    parked.swap(parked_);
    waking_ += static_cast<int>(parked.size());
  }
  for (Parker* parker : parked) parker->Unpark();
  for (std::thread& t : threads_) t.join();
}

bool WorkerPool::Post(Task task) {
  Parker* wake = nullptr;
  {
    std::unique_lock lock(mutex_);
    if (closed_) return false;
    queue_.push_back(std::move(task));
    queued_.store(queue_.size(), std::memory_order_seq_cst);
    if (searching_.load(std::memory_order_seq_cst) == 0 && waking_ == 0 && !parked_.empty()) {
      wake = parked_.back();
      parked_.pop_back();
      ++waking_;
      ++wakes_.by_post;
    }
  }
  if (wake != nullptr) wake->Unpark();
  return true;
}

WorkerPool::Wakes WorkerPool::wakes() const {
  std::unique_lock lock(mutex_);
  return wakes_;
}

int WorkerPool::parked() const {
  std::unique_lock lock(mutex_);
  return static_cast<int>(parked_.size());
}

bool WorkerPool::Search() {
  if (searching_.fetch_add(1, std::memory_order_seq_cst) >= max_searching_) {
    searching_.fetch_sub(1, std::memory_order_seq_cst);
    return false;
  }
  const auto until = std::chrono::steady_clock::now() + kSearch;
  bool found = false;
  while (!(found = queued_.load(std::memory_order_seq_cst) > 0) &&
         std::chrono::steady_clock::now() < until) {
    YieldToOthers();
  }
  // Stops searching before it looks under the lock: see the header.
  searching_.fetch_sub(1, std::memory_order_seq_cst);
  return found;
}

bool WorkerPool::Take(Parker& parker, Task& task) {
  Parker* wake = nullptr;
  {
    std::unique_lock lock(mutex_);
    bool searched = false;
    while (queue_.empty()) {
      if (closed_) return false;
      if (!searched) {
        lock.unlock();
        Search();
        lock.lock();
        searched = true;
        continue;
      }
      parked_.push_back(&parker);
      lock.unlock();
      parker.Park();  // until a Post, another worker or closing takes it off parked_
      lock.lock();
      --waking_;
      searched = false;  // woken: this worker searches again before it parks again
    }
    task = std::move(queue_.front());
    queue_.pop_front();
    queued_.store(queue_.size(), std::memory_order_seq_cst);
    if (!queue_.empty() && searching_.load(std::memory_order_seq_cst) == 0 && waking_ == 0 &&
        !parked_.empty()) {
      wake = parked_.back();
      parked_.pop_back();
      ++waking_;
      ++wakes_.by_worker;
    }
  }
  if (wake != nullptr) wake->Unpark();
  return true;
}

#if FAIRGATE_RUNTIME_THREADS

void WorkerPool::WorkerMain(Parker& parker) {
  Task task;
  while (Take(parker, task)) {
    task();
    task = nullptr;
  }
}

#else

void WorkerPool::WorkerMain(Parker& parker) {
  parker.AdoptThisThread();
  // The fibers this thread started and that have not finished: the thread must outlive them.
  boost::fibers::mutex mutex;
  boost::fibers::condition_variable all_done;
  int live = 0;

  Task task;
  while (Take(parker, task)) {
    {
      std::unique_lock lock(mutex);
      ++live;
    }
    auto bounds = std::make_unique<StackBounds>();
    StackBounds* stack = bounds.get();
    boost::fibers::fiber(boost::fibers::launch::dispatch, std::allocator_arg,
                         BoundedStackAllocator(stack_bytes_, stack),
                         [&, task = std::move(task), bounds = std::move(bounds)]() mutable {
                           {
                             CurrentFiberStack current(bounds.get());
                             task();
                           }
                           task = nullptr;
                           std::unique_lock lock(mutex);
                           if (--live == 0) all_done.notify_all();
                         })
        .detach();
  }
  std::unique_lock lock(mutex);
  all_done.wait(lock, [&] { return live == 0; });
}

#endif

}  // namespace fairgate::internal
