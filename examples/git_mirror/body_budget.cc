#include "body_budget.h"

#include <utility>

namespace git_mirror {

bool BodyBudget::TryTake(std::size_t bytes) {
  std::size_t held = held_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ - held) return false;
  } while (!held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
  return true;
}

void BodyBudget::Give(std::size_t bytes) { held_.fetch_sub(bytes, std::memory_order_relaxed); }

BodyLease::BodyLease(BodyLease&& other) noexcept
    : budget_(std::move(other.budget_)), bytes_(std::exchange(other.bytes_, 0)) {}

BodyLease& BodyLease::operator=(BodyLease&& other) noexcept {
  if (this != &other) {
    Resize(0);
    budget_ = std::move(other.budget_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

BodyLease::~BodyLease() { Resize(0); }

bool BodyLease::Resize(std::size_t bytes) {
  if (budget_ == nullptr) {
    bytes_ = bytes;
    return true;
  }
  if (bytes > bytes_ && !budget_->TryTake(bytes - bytes_)) return false;
  if (bytes < bytes_) budget_->Give(bytes_ - bytes);
  bytes_ = bytes;
  return true;
}

}  // namespace git_mirror
