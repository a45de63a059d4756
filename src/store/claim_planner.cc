#include "store/claim_planner.h"

#include <algorithm>
#include <tuple>

namespace fairgate::store {

ClaimPlan PlanClaim(const std::vector<ClaimCandidate>& candidates, HeldSlots held,
                    std::size_t max_jobs, const std::vector<std::size_t>& type_max) {
  ClaimPlan plan;
  std::vector<std::size_t> taken(type_max.size(), 0);  // of each bounded type
  for (std::size_t i = 0; i < candidates.size() && plan.chosen.size() < max_jobs; ++i) {
    const std::size_t type = candidates[i].type;
    const bool bounded = type < type_max.size() && type_max[type] > 0;
    if (bounded && taken[type] == type_max[type]) continue;
    const std::vector<LeaseNeed>& needs = candidates[i].needs;
    const bool free = std::all_of(needs.begin(), needs.end(), [&](const LeaseNeed& n) {
      return held[{n.group, n.id}] < n.limit;
    });
    if (!free) continue;
    for (const LeaseNeed& n : needs) ++held[{n.group, n.id}];
    if (bounded) ++taken[type];
    plan.chosen.push_back(i);
  }
  for (std::size_t j = 0; j < plan.chosen.size(); ++j) {
    for (std::size_t k = 0; k < candidates[plan.chosen[j]].needs.size(); ++k) {
      plan.takes.push_back({j, k});
    }
  }
  auto need = [&](const ClaimPlan::Take& t) -> const LeaseNeed& {
    return candidates[plan.chosen[t.job]].needs[t.need];
  };
  std::stable_sort(plan.takes.begin(), plan.takes.end(),
                   [&](const ClaimPlan::Take& a, const ClaimPlan::Take& b) {
                     return std::tie(need(a).group, need(a).id) <
                            std::tie(need(b).group, need(b).id);
                   });
  return plan;
}

}  // namespace fairgate::store
