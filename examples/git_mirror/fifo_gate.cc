// The FIFO policy, for comparison: one counting semaphore that hands out slots strictly in
// arrival order, whatever the client or the job. Background jobs each get a thread that waits in
// the same queue.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "work_gate.h"

namespace git_mirror {
namespace {

using namespace std::chrono_literals;

class FifoGate : public WorkGate {
 public:
  explicit FifoGate(const GateConfig& config) : config_(config), free_(config.capacity) {}
  ~FifoGate() override { Shutdown(); }

  fairgate::Status Run(const fairgate::Context& ctx, std::string_view type,
                       std::string_view repository, std::string_view client,
                       const JobFn& fn) override {
    if (auto s = Acquire(ctx, client); !s.ok()) return s;
    fairgate::Status status = RunHoldingSlot(ctx, type, repository, fn);
    Release();
    return status;
  }

  fairgate::Status Submit(std::string_view type, std::string_view repository, JobFn fn,
                          DoneCallback done) override {
    std::lock_guard lock(mutex_);
    if (shutting_down_) return absl::UnavailableError("the gate is shutting down");
    std::erase_if(threads_, [](Worker& w) {
      if (!w.finished) return false;
      w.thread.join();
      return true;
    });
    Worker& worker = threads_.emplace_back();
    worker.thread =
        std::thread([this, &worker, type = std::string(type), repository = std::string(repository),
                     fn = std::move(fn), done = std::move(done)] {
          fairgate::Status status = Run(background_.first, type, repository, "", fn);
          if (done) done(status);
          std::lock_guard lock(mutex_);
          worker.finished = true;
        });
    return absl::OkStatus();
  }

  nlohmann::json DebugState() const override {
    std::lock_guard lock(mutex_);
    return {{"policy", "fifo"},
            {"max_concurrency", config_.capacity},
            {"running", config_.capacity - free_},
            {"pending", waiters_.size()}};
  }

  std::string Metrics() const override {
    std::lock_guard lock(mutex_);
    return absl::StrCat(
        "# HELP git_mirror_fifo_running Jobs holding a slot of the FIFO semaphore.\n"
        "# TYPE git_mirror_fifo_running gauge\n"
        "git_mirror_fifo_running ",
        config_.capacity - free_,
        "\n# HELP git_mirror_fifo_waiting Jobs waiting for a slot of the FIFO semaphore.\n"
        "# TYPE git_mirror_fifo_waiting gauge\n"
        "git_mirror_fifo_waiting ",
        waiters_.size(), "\n");
  }

  void Shutdown() override {
    std::list<Worker> workers;
    {
      std::lock_guard lock(mutex_);
      shutting_down_ = true;
      workers.splice(workers.end(), threads_);
    }
    background_.second();
    changed_.notify_all();
    for (Worker& w : workers) w.thread.join();
  }

 private:
  struct Waiter {
    std::string client;
    bool granted = false;
  };
  struct Worker {
    std::thread thread;
    bool finished = false;
  };

  fairgate::Status Acquire(const fairgate::Context& ctx, std::string_view client) {
    std::unique_lock lock(mutex_);
    if (shutting_down_) return absl::UnavailableError("the gate is shutting down");
    if (waiters_.empty() && free_ > 0) {
      --free_;
      return absl::OkStatus();
    }
    std::size_t waiting_for_client = 0;
    for (const Waiter* w : waiters_) waiting_for_client += w->client == client;
    if (waiting_for_client >= config_.max_pending_per_client) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "client '", std::string(client), "' already has ", waiting_for_client, " jobs waiting"));
    }
    Waiter me{std::string(client)};
    waiters_.push_back(&me);
    // Contexts have no callback to wake this condition variable; look at them now and then.
    while (!me.granted && !shutting_down_ && !ctx.Done()) changed_.wait_for(lock, 20ms);
    if (me.granted) return absl::OkStatus();
    std::erase(waiters_, &me);
    return shutting_down_ ? absl::CancelledError("the gate shut down") : ctx.Err();
  }

  void Release() {
    std::lock_guard lock(mutex_);
    if (waiters_.empty()) {
      ++free_;
      return;
    }
    waiters_.front()->granted = true;
    waiters_.pop_front();
    changed_.notify_all();
  }

  fairgate::Status RunHoldingSlot(const fairgate::Context& ctx, std::string_view type,
                                  std::string_view repository, const JobFn& fn) {
    std::mutex* repository_lock = nullptr;
    if (type != kClone) {
      {
        std::lock_guard lock(mutex_);
        repository_lock = &writers_[std::string(repository)];
      }
      repository_lock->lock();  // not under mutex_: that would stall every other caller
    }
    fairgate::Status status;
    try {
      status = fn(ctx);
    } catch (...) {
      status = absl::InternalError("the job threw an exception");
    }
    if (repository_lock) repository_lock->unlock();
    return status;
  }

  const GateConfig config_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int free_;
  std::deque<Waiter*> waiters_;
  std::map<std::string, std::mutex> writers_;  // never erased: one per repository served
  std::list<Worker> threads_;
  bool shutting_down_ = false;
  // Background jobs' context: cancelled by Shutdown, as the scheduler does.
  const std::pair<fairgate::Context, fairgate::CancelFunc> background_ =
      fairgate::WithCancel(fairgate::Context::Background());
};

}  // namespace

fairgate::StatusOr<std::unique_ptr<WorkGate>> MakeFifoGate(const GateConfig& config) {
  if (auto s = ValidateGateConfig(config); !s.ok()) return s;
  return std::unique_ptr<WorkGate>(new FifoGate(config));
}

}  // namespace git_mirror
