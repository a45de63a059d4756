#include "runtime/fleet_costs.h"

#include <utility>
#include <vector>

namespace fairgate::internal {

void FleetCosts::Share() {
  std::lock_guard lock(mutex_);
  std::vector<SavedKey> charged;
  std::vector<std::string> busy;
  absl::flat_hash_map<std::string, double> collected;  // each key's cost as collected
  absl::flat_hash_map<std::string, double> shared;     // only the keys still tracked
  for (Submission::KeyCost& key : scheduler_.KeyCosts()) {
    auto it = shared_.find(key.key);
    const double base = it == shared_.end() ? 0 : it->second;
    const double delta = key.cost - base;
    if (delta != 0 || key.busy) busy.push_back(key.key);
    if (delta != 0) charged.push_back({key.key, delta, key.idle_since_wall});
    collected[key.key] = key.cost;
    shared[key.key] = base;
  }
  shared_ = std::move(shared);
  if (busy.empty()) return;
  StatusOr<std::vector<SavedKey>> totals = keeper_.shared_store()->ShareKeyCosts(charged, busy);
  if (!totals.ok()) {
    keeper_.CountError(StateKeeper::Operation::kShare);
    return;
  }
  const std::vector<bool> applied = scheduler_.SetFleetCosts(*totals, collected);
  for (std::size_t i = 0; i < totals->size(); ++i) {
    if (applied[i]) shared_[(*totals)[i].key] = (*totals)[i].accumulated_cost;
  }
}

}  // namespace fairgate::internal
