// The FIFO policy, for comparison: one counting semaphore that hands out slots strictly in
// arrival order, whatever the client or the job. Background jobs each get a thread that waits in
// the same queue.
#include <chrono>
#include <condition_variable>
#include <cstdint>
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

class FifoGate : public WorkGate {
 public:
  explicit FifoGate(const GateConfig& config) : config_(config), free_(config.capacity) {}
  ~FifoGate() override { Shutdown(); }

  // Strictly FIFO: the type and the repository play no part.
  fairgate::StatusOr<CancelFn> Acquire(std::string_view, std::string_view, std::string_view client,
                                       SlotCallback on_admitted) override {
    std::unique_lock lock(mutex_);
    if (shutting_down_) return absl::UnavailableError("the gate is shutting down");
    if (waiters_.empty() && free_ > 0) {
      --free_;
      lock.unlock();
      on_admitted(MakeSlot());
      return CancelFn([] {});
    }
    std::size_t waiting_for_client = 0;
    for (const Waiter& w : waiters_) waiting_for_client += w.client == client;
    if (waiting_for_client >= config_.max_pending_per_client) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "client '", std::string(client), "' already has ", waiting_for_client, " jobs waiting"));
    }
    const std::uint64_t id = next_id_++;
    waiters_.push_back({id, std::string(client), std::move(on_admitted)});
    return CancelFn([this, id] { Cancel(id); });
  }

  fairgate::Status Submit(std::string_view type, std::string_view repository,
                          std::string_view client, JobFn fn, DoneCallback done) override {
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
                     client = std::string(client), fn = std::move(fn), done = std::move(done)] {
          fairgate::Status status = RunBlocking(type, repository, client, fn);
          if (done) done(status);
          std::lock_guard lock(mutex_);
          worker.finished = true;
        });
    return absl::OkStatus();
  }

  // A timer thread per periodic job, as a server without fairgate would run one: a whole
  // interval after its start, then after each run.
  fairgate::StatusOr<CancelFn> SubmitEvery(std::string_view type, std::string_view repository,
                                           std::string_view client,
                                           std::chrono::milliseconds interval, JobFn fn,
                                           DoneCallback on_run) override {
    std::lock_guard lock(mutex_);
    if (shutting_down_) return absl::UnavailableError("the gate is shutting down");
    auto stopped = std::make_shared<bool>(false);  // under mutex_
    Worker& worker = threads_.emplace_back();
    worker.thread = std::thread([this, &worker, stopped, interval, type = std::string(type),
                                 repository = std::string(repository), client = std::string(client),
                                 fn = std::move(fn), on_run = std::move(on_run)] {
      std::unique_lock lock(mutex_);
      while (!periodic_wake_.wait_for(lock, interval, [&] { return shutting_down_ || *stopped; })) {
        lock.unlock();
        fairgate::Status status = RunBlocking(type, repository, client, fn);
        if (on_run) on_run(status);
        lock.lock();
      }
      worker.finished = true;
    });
    return CancelFn([this, stopped] {
      {
        std::lock_guard lock(mutex_);
        *stopped = true;
      }
      periodic_wake_.notify_all();
    });
  }

  nlohmann::json DebugState() const override {
    std::lock_guard lock(mutex_);
    return {{"policy", "fifo"},
            {"max_concurrency", config_.capacity},
            {"running", config_.capacity - free_},
            {"pending", waiters_.size()}};
  }

  std::optional<double> Estimate(std::string_view, std::string_view) const override {
    return std::nullopt;  // a FIFO learns nothing
  }

  fairgate::Status Charge(std::string_view, double) override {
    return absl::OkStatus();  // a FIFO keeps no account of its clients
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
    std::deque<Waiter> refused;
    {
      std::lock_guard lock(mutex_);
      shutting_down_ = true;
      workers.splice(workers.end(), threads_);
      refused.swap(waiters_);
    }
    periodic_wake_.notify_all();
    for (Waiter& w : refused) w.on_admitted(absl::CancelledError("the gate shut down"));
    background_.second();
    for (Worker& w : workers) w.thread.join();
    // Held slots: wait until every one has been released.
    std::unique_lock lock(mutex_);
    all_free_.wait(lock, [&] { return free_ == config_.capacity; });
  }

 private:
  struct Waiter {
    std::uint64_t id;
    std::string client;
    SlotCallback on_admitted;
  };
  struct Worker {
    std::thread thread;
    bool finished = false;
  };

  Slot MakeSlot() {
    return Slot([this](const fairgate::Status&, bool) { Release(); });
  }

  void Cancel(std::uint64_t id) {
    SlotCallback callback;
    {
      std::lock_guard lock(mutex_);
      for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
        if (it->id != id) continue;
        callback = std::move(it->on_admitted);
        waiters_.erase(it);
        break;
      }
    }
    if (callback) callback(absl::CancelledError("the wait was cancelled"));
  }

  // A freed slot goes to the first waiter, or back to the pool.
  void Release() {
    SlotCallback next;
    {
      std::lock_guard lock(mutex_);
      if (waiters_.empty()) {
        ++free_;
        all_free_.notify_all();
        return;
      }
      next = std::move(waiters_.front().on_admitted);
      waiters_.pop_front();
    }
    next(MakeSlot());
  }

  // A background job: its turn in the same queue, then (for git's writers) the repository's lock,
  // as a server without fairgate would keep writers apart; it holds its slot while it waits.
  fairgate::Status RunBlocking(const std::string& type, const std::string& repository,
                               const std::string& client, const JobFn& fn) {
    std::mutex m;
    std::condition_variable cv;
    std::optional<fairgate::StatusOr<Slot>> result;
    auto cancel = Acquire(type, repository, client, [&](fairgate::StatusOr<Slot> slot) {
      std::lock_guard lock(m);
      result.emplace(std::move(slot));
      cv.notify_all();
    });
    if (!cancel.ok()) return cancel.status();
    {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return result.has_value(); });
    }
    if (!result->ok()) return result->status();
    Slot slot = **std::move(result);
    std::mutex* repository_lock = nullptr;
    if (type != kClone && type != kRefs) {
      {
        std::lock_guard lock(mutex_);
        repository_lock = &writers_[repository];
      }
      repository_lock->lock();  // not under mutex_: that would stall every other caller
    }
    fairgate::Status status;
    try {
      status = fn(background_.first);
    } catch (...) {
      status = absl::InternalError("the job threw an exception");
    }
    if (repository_lock) repository_lock->unlock();
    slot.Release(status);
    return status;
  }

  const GateConfig config_;
  mutable std::mutex mutex_;
  std::condition_variable all_free_;
  std::condition_variable periodic_wake_;  // a periodic job stopped, or the gate shuts down
  int free_;
  std::uint64_t next_id_ = 1;
  std::deque<Waiter> waiters_;
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
  // What only fairgate keeps is refused rather than ignored: a FIFO replica would neither keep
  // nor share it.
  if (!config.state_file.empty() || !config.database.empty()) {
    return absl::InvalidArgumentError(
        "the FIFO policy keeps no state: a state file or database needs the fairgate policy");
  }
  return std::unique_ptr<WorkGate>(new FifoGate(config));
}

}  // namespace git_mirror
