#include "runtime/fleet_costs.h"

#include <utility>
#include <vector>

namespace fairgate::internal {

void FleetCosts::Share() {
  std::lock_guard lock(mutex_);
  ShareOf(Submission::CostsOf::kKeys, keys_);
  if (!groups_.unsupported) ShareOf(Submission::CostsOf::kGroups, groups_);
}

void FleetCosts::ShareOf(Submission::CostsOf of, Shared& kind) {
  std::vector<SavedKey> charged;
  std::vector<std::string> busy;
  absl::flat_hash_map<std::string, double> collected;  // each one's cost as collected
  absl::flat_hash_map<std::string, double> shared;     // only those still tracked
  for (Submission::KeyCost& one : scheduler_.KeyCosts(of)) {
    auto it = kind.shared.find(one.key);
    const double base = it == kind.shared.end() ? 0 : it->second;
    const double delta = one.cost - base;
    if (delta != 0 || one.busy) busy.push_back(one.key);
    if (delta != 0) charged.push_back({one.key, delta, one.idle_since_wall});
    collected[one.key] = one.cost;
    shared[one.key] = base;
  }
  kind.shared = std::move(shared);
  if (busy.empty()) return;
  SharedStore& store = *keeper_.shared_store();
  StatusOr<std::vector<SavedKey>> totals = of == Submission::CostsOf::kKeys
                                               ? store.ShareKeyCosts(charged, busy)
                                               : store.ShareGroupCosts(charged, busy);
  if (!totals.ok()) {
    if (of == Submission::CostsOf::kGroups && absl::IsUnimplemented(totals.status())) {
      kind.unsupported = true;
      return;
    }
    keeper_.CountError(StateKeeper::Operation::kShare);
    return;
  }
  const std::vector<bool> applied = scheduler_.SetFleetCosts(of, *totals, collected);
  for (std::size_t i = 0; i < totals->size(); ++i) {
    if (applied[i]) kind.shared[(*totals)[i].key] = (*totals)[i].accumulated_cost;
  }
}

}  // namespace fairgate::internal
