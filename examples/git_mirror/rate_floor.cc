#include "rate_floor.h"

#include <algorithm>

namespace git_mirror {

RateFloor::RateFloor(std::uint64_t rate, Clock::duration grace)
    : rate_(static_cast<double>(rate)),
      capacity_(static_cast<double>(rate) * std::chrono::duration<double>(grace).count()),
      credit_(capacity_) {}

void RateFloor::Start(Clock::time_point now) {
  if (running_) return;
  running_ = true;
  since_ = now;
}

void RateFloor::Stop(Clock::time_point now) {
  if (!running_) return;
  credit_ = CreditAt(now);
  since_ = now;
  running_ = false;
}

void RateFloor::Moved(std::uint64_t total, Clock::time_point now) {
  const double fresh = total > moved_ ? static_cast<double>(total - moved_) : 0.0;
  moved_ = std::max(moved_, total);
  credit_ = std::min(capacity_, CreditAt(now) + fresh);
  since_ = now;
}

RateFloor::Clock::duration RateFloor::Left(Clock::time_point now) const {
  const double credit = CreditAt(now);
  if (credit < 1) return Clock::duration::zero();  // less than a byte: spent
  if (!running_) return Clock::duration::max();
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(credit / rate_));
}

double RateFloor::CreditAt(Clock::time_point now) const {
  if (!running_ || now <= since_) return credit_;
  return credit_ - rate_ * std::chrono::duration<double>(now - since_).count();
}

}  // namespace git_mirror
