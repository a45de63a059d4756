// LeaseBook: one replica's claims and leases.
#include "store/lease_book.h"

#include <utility>

namespace fairgate::store {

void LeaseBook::Claimed(std::uint64_t sequence, std::uint64_t token,
                        std::vector<std::uint64_t> resources, std::uint32_t attempt,
                        Clock::time_point sure_until) {
  std::lock_guard lock(mutex_);
  claims_[sequence] = {token, true, std::move(resources), attempt, sure_until};
}

bool LeaseBook::Holds(std::uint64_t sequence) const {
  std::lock_guard lock(mutex_);
  return claims_.contains(sequence);
}

std::optional<std::uint64_t> LeaseBook::TokenOf(std::uint64_t sequence) const {
  std::lock_guard lock(mutex_);
  auto it = claims_.find(sequence);
  if (it == claims_.end()) return std::nullopt;
  return it->second.token;
}

bool LeaseBook::AttemptUnbegun(std::uint64_t sequence) const {
  std::lock_guard lock(mutex_);
  auto it = claims_.find(sequence);
  return it != claims_.end() && it->second.counted > 0;
}

LeaseBook::LocalBegin LeaseBook::BeginLocally(std::uint64_t sequence, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  auto it = claims_.find(sequence);
  if (it == claims_.end() || it->second.counted == 0) return {};
  if (now < it->second.sure_until) return {std::exchange(it->second.counted, 0u), true};
  return {std::nullopt, true};
}

bool LeaseBook::SurelyHolds(std::uint64_t sequence, Clock::time_point now) const {
  std::lock_guard lock(mutex_);
  auto it = claims_.find(sequence);
  return it != claims_.end() && it->second.renew && now < it->second.sure_until;
}

std::optional<LeaseBook::Clock::time_point> LeaseBook::SurelyHeldUntil(
    std::uint64_t sequence) const {
  std::lock_guard lock(mutex_);
  auto it = claims_.find(sequence);
  if (it == claims_.end() || !it->second.renew) return std::nullopt;
  return it->second.sure_until;
}

absl::flat_hash_map<std::uint64_t, LeaseBook::Claim>::iterator LeaseBook::Find(
    std::uint64_t sequence, std::optional<std::uint64_t> of) {
  auto it = claims_.find(sequence);
  if (it != claims_.end() && of && it->second.token != *of) return claims_.end();
  return it;
}

void LeaseBook::AttemptConfirmed(std::uint64_t sequence) {
  std::lock_guard lock(mutex_);
  if (auto it = claims_.find(sequence); it != claims_.end()) it->second.counted = 0;
}

void LeaseBook::StopRenewing(std::uint64_t sequence, std::optional<std::uint64_t> of) {
  std::lock_guard lock(mutex_);
  if (auto it = Find(sequence, of); it != claims_.end()) it->second.renew = false;
}

void LeaseBook::Forget(std::uint64_t sequence, std::optional<std::uint64_t> of) {
  std::lock_guard lock(mutex_);
  if (auto it = Find(sequence, of); it != claims_.end()) claims_.erase(it);
}

std::vector<std::uint64_t> LeaseBook::ClaimLeases(std::uint64_t sequence) const {
  std::lock_guard lock(mutex_);
  auto it = claims_.find(sequence);
  return it == claims_.end() ? std::vector<std::uint64_t>{} : it->second.resources;
}

std::vector<std::uint64_t> LeaseBook::TakeClaimLeases(std::uint64_t sequence,
                                                      std::optional<std::uint64_t> of) {
  std::lock_guard lock(mutex_);
  auto it = Find(sequence, of);
  if (it == claims_.end()) return {};
  return std::exchange(it->second.resources, {});
}

void LeaseBook::Refused(std::uint64_t sequence, std::optional<std::uint64_t> of) {
  std::lock_guard lock(mutex_);
  auto it = Find(sequence, of);
  if (it == claims_.end()) return;
  it->second.renew = false;
  it->second.resources.clear();
}

LeaseBook::Renewal LeaseBook::ToRenew() const {
  Renewal renewal;
  std::lock_guard lock(mutex_);
  for (const auto& [sequence, claim] : claims_) {
    if (!claim.renew) continue;
    renewal.jobs.push_back(claim.token);
    renewal.resources.insert(renewal.resources.end(), claim.resources.begin(),
                             claim.resources.end());
  }
  renewal.resources.insert(renewal.resources.end(), resource_leases_.begin(),
                           resource_leases_.end());
  return renewal;
}

void LeaseBook::Renewed(std::uint64_t sequence, Clock::time_point sure_until) {
  std::lock_guard lock(mutex_);
  if (auto it = claims_.find(sequence); it != claims_.end()) it->second.sure_until = sure_until;
}

void LeaseBook::AddResourceLease(std::uint64_t token) {
  std::lock_guard lock(mutex_);
  resource_leases_.insert(token);
}

void LeaseBook::DropResourceLease(std::uint64_t token) {
  std::lock_guard lock(mutex_);
  resource_leases_.erase(token);
}

}  // namespace fairgate::store
