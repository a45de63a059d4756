#include "runtime/write_retries.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "runtime/thread_name.h"

namespace fairgate::internal {
namespace {

constexpr WriteRetries::Clock::duration kMaxBackoff = std::chrono::seconds(5);

}  // namespace

bool WriteRetries::Retryable(const Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
      return false;
    default:
      return true;
  }
}

Status WriteRetries::Run(StateKeeper::Operation operation, Write write) {
  Status status = write();
  if (Retryable(status)) Keep({operation, std::move(write), kFirstBackoff});
  return status;
}

void WriteRetries::Keep(Kept kept) {
  std::lock_guard lock(mutex_);
  if (stopped_) return;  // shutting down: left as the store has it
  const Clock::time_point due = Clock::now() + kept.backoff;
  const bool earliest = kept_.empty() || due < kept_.begin()->first;
  kept_.emplace(due, std::move(kept));
  if (!thread_.joinable()) {
    thread_ = std::thread([this] {
      NameThisThread("fg-retries");
      Loop();
    });
  } else if (earliest) {
    wake_.notify_one();
  }
}

void WriteRetries::Loop() {
  std::unique_lock lock(mutex_);
  while (!stopped_) {
    if (kept_.empty()) {
      wake_.wait(lock);
      continue;
    }
    if (wake_.wait_until(lock, kept_.begin()->first) == std::cv_status::no_timeout) continue;
    std::vector<Kept> due;
    const Clock::time_point now = Clock::now();
    while (!kept_.empty() && kept_.begin()->first <= now) {
      due.push_back(std::move(kept_.begin()->second));
      kept_.erase(kept_.begin());
    }
    lock.unlock();
    for (Kept& kept : due) {
      if (!Retryable(kept.write())) continue;  // done, or refused for good
      keeper_.CountError(kept.operation);
      kept.backoff = std::min(kept.backoff * 2, kMaxBackoff);
      lock.lock();
      if (!stopped_) kept_.emplace(Clock::now() + kept.backoff, std::move(kept));
      lock.unlock();
    }
    lock.lock();
  }
}

void WriteRetries::Stop() {
  std::multimap<Clock::time_point, Kept> last;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    last.swap(kept_);
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  for (auto& [due, kept] : last) {
    if (Retryable(kept.write())) keeper_.CountError(kept.operation);
  }
}

std::size_t WriteRetries::waiting() const {
  std::lock_guard lock(mutex_);
  return kept_.size();
}

}  // namespace fairgate::internal
