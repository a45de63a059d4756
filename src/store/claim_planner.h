// PlanClaim: which durable jobs a claim whose types take fleet-wide leases takes, and in what
// order it takes their leases. A pure function of what the shared store read (the candidates in
// claim order and the slots their leases' resources hold now), so that the rule is tested without
// a server (tests/claim_planner_test.cc); the PostgreSQL store reads, plans and then takes, in one
// transaction (postgres_store.cc, ClaimWithLeases). Internal to src/store.
#ifndef FAIRGATE_STORE_CLAIM_PLANNER_H_
#define FAIRGATE_STORE_CLAIM_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace fairgate::store {

// A fleet-wide lease a job needs: one of the `limit` slots of (group, id). A type's fleet cap is
// the group kFleetCapGroup with the type as its id; a conflict group's resource is (group, id).
struct LeaseNeed {
  std::string group, id;
  int limit = 1;
};

// A job the claim may take, in claim order, with the leases it needs (the cap's slot first, then
// its resource's) and its type (an index into PlanClaim's `type_max`).
struct ClaimCandidate {
  std::uint64_t sequence = 0;
  std::vector<LeaseNeed> needs;
  std::size_t type = 0;
};

// Slots held now (unexpired leases) by (group, id); a resource not listed holds none.
using HeldSlots = absl::flat_hash_map<std::pair<std::string, std::string>, int>;

struct ClaimPlan {
  // The candidates taken (indexes into the candidates), in claim order: the first `max_jobs`
  // whose every lease has a slot left, counting the slots of those taken before them, and whose
  // type has not had its `type_max` taken (ClaimableType::max_jobs; 0 or missing: no bound).
  std::vector<std::size_t> chosen;
  // Every lease of the chosen jobs, in (group, id) order (ties in claim order), so that replicas
  // claiming at once never wait on each other in a cycle: `job` indexes `chosen`, `need` that
  // job's needs.
  struct Take {
    std::size_t job = 0;
    std::size_t need = 0;
  };
  std::vector<Take> takes;
};

ClaimPlan PlanClaim(const std::vector<ClaimCandidate>& candidates, HeldSlots held,
                    std::size_t max_jobs, const std::vector<std::size_t>& type_max = {});

}  // namespace fairgate::store

#endif  // FAIRGATE_STORE_CLAIM_PLANNER_H_
