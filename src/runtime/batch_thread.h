// BatchThread: what callers queue, taken in batches by a thread of its own. Internal to
// src/runtime: the writers of durable jobs' removals (RemovalWriter) and of their attempts' marks
// (AttemptMarker) stand on it.
//
// The thread starts on the first Queue. It takes everything queued by then, at most `max_batch`
// items in queue order, and hands the batch to `write`; what is queued meanwhile makes the next
// batch. Stop lets the thread write what is queued, then joins it; a Queue after Stop is refused
// (the caller writes the item itself).
//
// Thread safety: Queue and Stop may be called from any thread, `write` runs on the thread with no
// lock of this class held. The lock is a thread lock held for a few steps (never across a wait
// of a fiber, nor while `write` runs).
#ifndef FAIRGATE_RUNTIME_BATCH_THREAD_H_
#define FAIRGATE_RUNTIME_BATCH_THREAD_H_

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace fairgate::internal {

// Starts a thread named `name` (runtime/thread_name.h) that calls `run(arg)` (batch_thread.cc).
// Out of the template on purpose: a thread started from a class template's member instantiates
// std::thread's state with that template's types, whose type information the shared library then
// exports (visibility hidden does not reach it; tests/install_consumer/deb.sh checks the exports).
std::thread StartThread(const char* name, void (*run)(void* arg), void* arg);

template <typename Item>
class BatchThread {
 public:
  using Write = std::function<void(std::vector<Item>& batch)>;

  // `name`: the thread's (runtime/thread_name.h), a string that outlives the object.
  BatchThread(const char* name, std::size_t max_batch, Write write)
      : name_(name), max_batch_(max_batch), write_(std::move(write)) {}
  ~BatchThread() { Stop(); }
  BatchThread(const BatchThread&) = delete;
  BatchThread& operator=(const BatchThread&) = delete;

  // Queues `item` for the thread (started here on first use); false, and nothing queued, once
  // stopped.
  bool Queue(Item item) {
    bool wake = false;
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return false;
      queued_.push_back(std::move(item));
      if (!thread_.joinable()) thread_ = StartThread(name_, &BatchThread::RunLoop, this);
      wake = queued_.size() == 1;
    }
    if (wake) wake_.notify_one();
    return true;
  }

  // Writes what is queued, then stops the thread (idempotent).
  void Stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      stopped_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  static void RunLoop(void* self) { static_cast<BatchThread*>(self)->Loop(); }
  void Loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopped_ || !queued_.empty(); });
      if (queued_.empty()) return;  // stopped, with nothing left to write
      std::vector<Item> batch;
      if (queued_.size() <= max_batch_) {
        batch.swap(queued_);
      } else {
        batch.assign(std::make_move_iterator(queued_.begin()),
                     std::make_move_iterator(queued_.begin() + max_batch_));
        queued_.erase(queued_.begin(), queued_.begin() + max_batch_);
      }
      lock.unlock();
      write_(batch);
      lock.lock();
    }
  }

  const char* const name_;
  const std::size_t max_batch_;
  const Write write_;
  std::mutex mutex_;              // guards what follows
  std::condition_variable wake_;  // the thread: something queued, or Stop
  std::vector<Item> queued_;
  bool stopped_ = false;
  std::thread thread_;  // started under mutex_ (before stopped_), joined by Stop
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_BATCH_THREAD_H_
