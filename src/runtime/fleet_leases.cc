#include "runtime/fleet_leases.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace fairgate::internal {

FleetLeases::FleetLeases(StateKeeper& keeper, WriteRetries& writes, const SchedulerOptions& options)
    : keeper_(keeper),
      writes_(writes),
      groups_(options.fleet.conflict_groups),
      caps_(options.fleet.type_caps.begin(), options.fleet.type_caps.end()),
      lease_seconds_(options.fleet.lease_ttl.count()),
      longest_wait_seconds_(options.fleet.claim_interval.count()) {}

void FleetLeases::TypeRegistered(std::string_view type, const JobTypeConfig& config) {
  Needs needs;
  if (std::find(groups_.begin(), groups_.end(), config.conflict_group) != groups_.end()) {
    needs.group = config.conflict_group;
    needs.limit = config.conflict_limit;
  }
  if (auto cap = caps_.find(type); cap != caps_.end()) needs.cap = cap->second;
  std::lock_guard lock(mutex_);
  if (needs.group.empty() && needs.cap == 0) {
    needs_.erase(absl::string_view(type.data(), type.size()));
  } else {
    needs_[std::string(type)] = needs;
  }
}

bool FleetLeases::Needed(std::string_view type) const {
  std::lock_guard lock(mutex_);
  return needs_.contains(absl::string_view(type.data(), type.size()));
}

bool FleetLeases::Capped(std::string_view type) const {
  std::lock_guard lock(mutex_);
  auto it = needs_.find(absl::string_view(type.data(), type.size()));
  return it != needs_.end() && it->second.cap > 0;
}

void FleetLeases::DescribeNeeds(ClaimableType& claimable) const {
  std::lock_guard lock(mutex_);
  auto it = needs_.find(claimable.type);
  if (it == needs_.end()) return;
  claimable.conflict_group = it->second.group;
  claimable.conflict_limit = it->second.limit;
  claimable.fleet_cap = it->second.cap;
}

StatusOr<std::uint64_t> FleetLeases::Take(const std::string& group, std::string_view id,
                                          int slots) {
  StatusOr<std::uint64_t> token =
      keeper_.shared_store()->AcquireResource(group, id, slots, lease_seconds_);
  if (token.ok()) return token;
  // A name the store cannot hold fails this job alone, as it would at every try.
  if (absl::IsInvalidArgument(token.status())) return token.status();
  keeper_.CountError(StateKeeper::Operation::kResource);
  return absl::UnavailableError(absl::StrCat("cannot take the fleet-wide lease of ", group, " '",
                                             absl::string_view(id.data(), id.size()),
                                             "': ", token.status().message()));
}

Status FleetLeases::Enter(std::string_view type, std::string_view id, const Context& ctx,
                          Held& held) {
  Needs needs;
  {
    std::lock_guard lock(mutex_);
    auto it = needs_.find(absl::string_view(type.data(), type.size()));
    if (it == needs_.end()) return absl::OkStatus();
    needs = it->second;
  }
  using std::chrono::duration;
  auto wait = duration<double>(0.005);
  const auto longest = std::max(wait, duration<double>(longest_wait_seconds_));
  for (;;) {
    bool taken = true;
    if (needs.cap > 0) {
      StatusOr<std::uint64_t> slot = Take(std::string(kFleetCapGroup), type, needs.cap);
      if (!slot.ok()) return slot.status();
      if (*slot != 0) {
        held.leases.push_back({std::string(kFleetCapGroup), std::string(type), *slot});
      } else {
        taken = false;
      }
    }
    if (taken && !needs.group.empty()) {
      StatusOr<std::uint64_t> resource = Take(needs.group, id, needs.limit);
      if (!resource.ok()) {
        Leave(held);
        return resource.status();
      }
      if (*resource != 0) {
        held.leases.push_back({needs.group, std::string(id), *resource});
      } else {
        taken = false;
      }
    }
    if (taken) {
      held.ctx = WithFencingToken(ctx, held.leases.back().token);
      return absl::OkStatus();
    }
    Leave(held);  // a cap's slot is not kept while the resource is held elsewhere
    if (ctx.WaitFor(std::chrono::duration_cast<Context::Clock::duration>(wait))) {
      return ctx.Err();
    }
    wait = std::min(wait * 2, longest);
  }
}

void FleetLeases::Leave(Held& held) {
  // Given back while the store is down, a lease is given back again once it is up (WriteRetries),
  // rather than held by nobody until it lapses.
  SharedStore* store = keeper_.shared_store();
  for (const Held::Lease& lease : held.leases) {
    Status released = writes_.Run(StateKeeper::Operation::kResource, [store, lease] {
      return store->ReleaseResource(lease.group, lease.id, lease.token);
    });
    if (!released.ok()) keeper_.CountError(StateKeeper::Operation::kResource);
  }
  held = {};
}

}  // namespace fairgate::internal
