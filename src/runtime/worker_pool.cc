#include "runtime/worker_pool.h"

#include <bit>
#include <memory>
#include <mutex>

#include "boost/fiber/condition_variable.hpp"
#include "boost/fiber/fiber.hpp"
#include "boost/fiber/fixedsize_stack.hpp"
#include "boost/fiber/mutex.hpp"
#include "runtime/fiber_stack.h"

namespace fairgate::internal {
namespace {

// buffered_channel wants a power of two and keeps one slot free.
std::size_t ChannelCapacity(std::size_t max_queued) { return std::bit_ceil(max_queued + 2); }

}  // namespace

WorkerPool::WorkerPool(int threads, std::size_t max_queued, std::size_t stack_bytes)
    : stack_bytes_(stack_bytes), channel_(ChannelCapacity(max_queued)) {
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { WorkerMain(); });
}

WorkerPool::~WorkerPool() {
  channel_.close();
  for (std::thread& t : threads_) t.join();
}

bool WorkerPool::Post(Task task) {
  return channel_.push(std::move(task)) == boost::fibers::channel_op_status::success;
}

void WorkerPool::WorkerMain() {
  // The fibers this thread started and that have not finished: the thread must outlive them.
  boost::fibers::mutex mutex;
  boost::fibers::condition_variable all_done;
  int live = 0;

  Task task;
  while (channel_.pop(task) == boost::fibers::channel_op_status::success) {
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

}  // namespace fairgate::internal
