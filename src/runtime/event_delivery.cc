#include "runtime/event_delivery.h"

#include <utility>

#include "runtime/thread_name.h"

namespace fairgate::internal {

EventDelivery::EventDelivery(std::vector<std::shared_ptr<Observer>> observers,
                             EvidenceSink evidence, std::size_t limit)
    : observers_(std::move(observers)), evidence_(std::move(evidence)), limit_(limit) {
  if (wants_events() || wants_evidence()) {
    thread_ = std::thread([this] {
      NameThisThread("fg-events");
      Loop();
    });
  }
}

EventDelivery::~EventDelivery() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

void EventDelivery::Post(std::vector<JobEvent>& events, std::vector<AdmissionEvidence>& evidence) {
  if (events.empty() && evidence.empty()) return;
  {
    std::lock_guard lock(mutex_);
    for (JobEvent& e : events) {
      if (events_.size() + records_.size() >= limit_) {
        ++dropped_;
      } else {
        events_.push_back(std::move(e));
      }
    }
    for (AdmissionEvidence& r : evidence) {
      if (events_.size() + records_.size() >= limit_) {
        ++dropped_;
      } else {
        records_.push_back(std::move(r));
      }
    }
    ++posted_;
  }
  events.clear();
  evidence.clear();
  work_.notify_one();
}

void EventDelivery::Flush() {
  if (!thread_.joinable()) return;
  std::unique_lock lock(mutex_);
  const std::uint64_t target = posted_;
  idle_.wait(lock, [&] { return delivered_ >= target; });
}

std::uint64_t EventDelivery::TakeDropped() {
  std::lock_guard lock(mutex_);
  return std::exchange(dropped_, 0);
}

void EventDelivery::Loop() {
  std::vector<JobEvent> events;
  std::vector<AdmissionEvidence> records;
  std::unique_lock lock(mutex_);
  while (true) {
    work_.wait(lock, [&] { return stopping_ || delivered_ < posted_; });
    if (delivered_ == posted_ && stopping_) return;
    events.swap(events_);
    records.swap(records_);
    const std::uint64_t batch = posted_;
    lock.unlock();
    for (const JobEvent& e : events) {
      for (const auto& observer : observers_) {
        try {
          observer->OnEvent(e);
        } catch (...) {
          // Documented: an observer's exception is dropped.
        }
      }
    }
    for (const AdmissionEvidence& r : records) {
      try {
        evidence_(r);
      } catch (...) {
      }
    }
    events.clear();
    records.clear();
    lock.lock();
    delivered_ = batch;
    idle_.notify_all();
  }
}

}  // namespace fairgate::internal
