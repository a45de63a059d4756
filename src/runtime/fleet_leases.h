// FleetLeases: the leases a job takes in a shared store (SharedStore) before it runs, so that
// what holds for one replica holds for the fleet:
// - a conflict group named in FleetOptions::conflict_groups: one of the conflict_limit
//   slots of the job's resource (group, id);
// - a type with a fleet-wide cap (FleetOptions::type_caps): one of the cap's slots,
//   the resource (kFleetCapGroup, type).
// A job takes the cap's slot first, then its resource's; if the resource is held elsewhere it
// gives the cap's slot back and tries both again after a backoff (5 ms, doubling up to
// claim_interval), so a job waiting for a repository never holds a fleet-wide slot meanwhile.
// The leases are renewed by the replica's claimer with its other leases and given back after
// the run. The job's context carries the fencing token of the last lease taken (its resource's,
// or its cap slot's when it has no fleet-wide group).
//
// Thread safety: every method may be called from any thread.
#ifndef FAIRGATE_RUNTIME_FLEET_LEASES_H_
#define FAIRGATE_RUNTIME_FLEET_LEASES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "fairgate/context.h"
#include "fairgate/job_type.h"
#include "fairgate/options.h"
#include "fairgate/status.h"
#include "fairgate/store.h"
#include "runtime/state_keeper.h"
#include "runtime/write_retries.h"

namespace fairgate::internal {

class FleetLeases {
 public:
  // `writes` gives a lease back again when the store failed the first time.
  FleetLeases(StateKeeper& keeper, WriteRetries& writes, const SchedulerOptions& options);

  // Records what jobs of `type` need, from its configuration (a type registered again replaces
  // it).
  void TypeRegistered(std::string_view type, const JobTypeConfig& config);
  // Whether jobs of `type` take any lease.
  bool Needed(std::string_view type) const;
  // Whether jobs of `type` take a slot of a fleet-wide cap.
  bool Capped(std::string_view type) const;
  // Sets what jobs of claimable.type take (ClaimableType: a shared store takes it with a claim).
  void DescribeNeeds(ClaimableType& claimable) const;

  // What a running job holds.
  struct Held {
    struct Lease {
      std::string group, id;
      std::uint64_t token = 0;
    };
    std::vector<Lease> leases;
    std::optional<Context> ctx;  // the job's context, with the fencing token
  };
  // Takes the leases job (type, id) needs, waiting while they are held elsewhere. OK (with
  // `held` filled, or empty if it needs none), or what ends the job: ctx's error, the store's
  // InvalidArgument for a name it cannot hold, or Unavailable naming the lease when the store
  // fails.
  Status Enter(std::string_view type, std::string_view id, const Context& ctx, Held& held);
  // Gives back what `held` holds (a failure is counted; the lease then lapses).
  void Leave(Held& held);

 private:
  struct Needs {
    std::string group;  // empty: no fleet-wide conflict group
    int limit = 1;
    int cap = 0;  // 0: no fleet-wide cap
  };
  // One lease: its token (0 when every slot is held), or Unavailable.
  StatusOr<std::uint64_t> Take(const std::string& group, std::string_view id, int slots);

  StateKeeper& keeper_;
  WriteRetries& writes_;
  const std::vector<std::string> groups_;
  const std::map<std::string, int, std::less<>> caps_;
  const double lease_seconds_;
  const double longest_wait_seconds_;

  mutable std::mutex mutex_;  // guards needs_
  absl::flat_hash_map<std::string, Needs> needs_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_FLEET_LEASES_H_
