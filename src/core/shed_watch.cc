#include "core/shed_watch.h"

namespace fairgate::core {

void ShedWatch::Enter(double arrival, std::uint64_t seq, double now) {
  const bool was_empty = pending_.empty();
  const auto [it, inserted] = pending_.insert({arrival, seq});
  if (it == pending_.begin()) OldestChanged(was_empty, now);
}

void ShedWatch::Leave(double arrival, std::uint64_t seq, double now) {
  auto it = pending_.find({arrival, seq});
  if (it == pending_.end()) return;
  const bool oldest = it == pending_.begin();
  pending_.erase(it);
  if (oldest) OldestChanged(false, now);
}

void ShedWatch::OldestChanged(bool was_empty, double now) {
  if (pending_.empty()) {
    late_since_ = std::numeric_limits<double>::infinity();
    return;
  }
  const double arrival = pending_.begin()->first;
  if (was_empty || now - arrival < target_) late_since_ = arrival + target_;
}

}  // namespace fairgate::core
