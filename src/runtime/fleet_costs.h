// FleetCosts: the keys' accumulated costs shared across replicas (Store::ShareKeyCosts), a
// service on the scheduler's Submission. Internal to src/runtime; exists only with a shared
// store.
//
// Each share adds to the fleet's totals what this replica charged each key since its last share,
// and sets each busy key's cost here to the fleet's total plus what was charged here meanwhile.
// It runs on the claimer's thread (after each claim) and at Shutdown; a failure is counted, and
// its charges go with the next share.
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
    shared_[key] = cost;
  }

  void Share();

 private:
  Submission& scheduler_;
  StateKeeper& keeper_;
  std::mutex mutex_;  // one share at a time; guards shared_
  // Each tracked key's cost as the fleet had it at the last share: what a share subtracts to find
  // what was charged here since.
  absl::flat_hash_map<std::string, double> shared_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_FLEET_COSTS_H_
