// FleetCosts: the keys' and groups' accumulated costs shared across replicas
// (SharedStore::ShareKeyCosts, ShareGroupCosts), a service on the scheduler's Submission.
// Internal to src/runtime; exists only with a shared store.
//
// Each share adds to the fleet's totals what this replica charged each key (group) since its last
// share, and sets each busy key's (group's) cost here to the fleet's total plus what was charged
// here meanwhile. Groups are shared only once one is tracked, and not at all by a store that
// does not share them (Unimplemented: not an error). It runs on the claimer's sharer thread
// (Claimer::ShareLoop) and at Shutdown; a failure is counted, and its charges go with the next
// share.
//
// Thread safety: every method may be called from any thread at once; one share runs at a time
// (its lock, never held by the scheduler's callers, comes before the scheduler's).
#ifndef FAIRGATE_RUNTIME_FLEET_COSTS_H_
#define FAIRGATE_RUNTIME_FLEET_COSTS_H_

#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "runtime/state_keeper.h"
#include "runtime/submission.h"

namespace fairgate::internal {

class FleetCosts {
 public:
  FleetCosts(Submission& scheduler, StateKeeper& keeper) : scheduler_(scheduler), keeper_(keeper) {}

  // A key's cost restored from the store at start: already the fleet's, so only what is charged
  // here from now on is shared.
  void Restored(const std::string& key, double cost) {
    std::lock_guard lock(mutex_);
    keys_.shared[key] = cost;
  }

  void Share();

 private:
  // What one kind (keys, groups) had at its last share.
  struct Shared {
    // Each tracked key's (group's) cost as the fleet had it at the last share: what a share
    // subtracts to find what was charged here since.
    absl::flat_hash_map<std::string, double> shared;
    bool unsupported = false;  // the store said Unimplemented: not asked again
  };
  void ShareOf(Submission::CostsOf of, Shared& kind);

  Submission& scheduler_;
  StateKeeper& keeper_;
  std::mutex mutex_;  // one share at a time; guards keys_ and groups_
  Shared keys_;
  Shared groups_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_FLEET_COSTS_H_
