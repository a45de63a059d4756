// EventDelivery: hands a scheduler's events to its observers and evidence sink on a thread of
// its own, so that code outside fairgate never runs under the scheduler's lock and can never
// stall admission.
//
// Decisions hand over batches with Post (a swap of vectors, under a small mutex); the delivery
// thread calls each observer, then the sink, in the order the batches were posted. When more
// than `limit` events wait, Post drops the newest and counts them (dropped()). Flush waits
// until everything posted before it has been delivered; the destructor flushes, then joins.
#ifndef FAIRGATE_RUNTIME_EVENT_DELIVERY_H_
#define FAIRGATE_RUNTIME_EVENT_DELIVERY_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fairgate/evidence.h"
#include "fairgate/observer.h"

namespace fairgate::internal {

class EventDelivery {
 public:
  EventDelivery(std::vector<std::shared_ptr<Observer>> observers, EvidenceSink evidence,
                std::size_t limit);
  ~EventDelivery();
  EventDelivery(const EventDelivery&) = delete;
  EventDelivery& operator=(const EventDelivery&) = delete;

  bool wants_events() const { return !observers_.empty(); }
  bool wants_evidence() const { return static_cast<bool>(evidence_); }

  // Takes the contents of both vectors (leaving them empty).
  void Post(std::vector<JobEvent>& events, std::vector<AdmissionEvidence>& evidence);
  // Waits until everything posted so far has been delivered.
  void Flush();
  // Events dropped since the last call.
  std::uint64_t TakeDropped();

 private:
  void Loop();

  const std::vector<std::shared_ptr<Observer>> observers_;
  const EvidenceSink evidence_;
  const std::size_t limit_;

  std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable idle_;
  std::vector<JobEvent> events_;
  std::vector<AdmissionEvidence> records_;
  std::uint64_t posted_ = 0, delivered_ = 0;  // batches
  std::uint64_t dropped_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_EVENT_DELIVERY_H_
