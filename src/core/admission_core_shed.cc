// AdmissionCore::ShedHeaviest: shedding's choice of the pending job to refuse.
#include <optional>
#include <tuple>

#include "core/admission_core.h"
#include "core/group_table.h"

namespace fairgate::core {

StatusOr<std::optional<ExpiredJob>> AdmissionCore::ShedHeaviest(std::string_view type, double now) {
  if (Status s = CheckTime(now, "shed time"); !s.ok()) return s;
  StatusOr<TypeState*> found = types_.FindOrError(type);
  if (!found.ok()) return found.status();
  const TypeState* shed_type = *found;
  if (shed_type->pending == 0) return std::nullopt;
  Job* heaviest = nullptr;
  std::tuple<double, double, double, std::uint64_t> most;
  for (const auto& [name, key] : keys_) {
    if (key.pending == 0) continue;
    const GroupState* group = GroupTable::Of(key);
    // Plain copies: clang 14 cannot capture a structured binding in a lambda.
    const double key_acc = key.acc;
    const double group_acc = group != nullptr ? group->acc : key_acc;
    for (Lane* lane = key.lanes; lane != nullptr; lane = lane->next_in_key) {
      lane->ready.ForEach([&](Job& job) {
        if (job.type != shed_type) return;
        const auto place = std::make_tuple(group_acc, key_acc, job.arrival, job.seq);
        if (heaviest == nullptr || place > most) heaviest = &job, most = place;
      });
    }
  }
  FAIRGATE_CORE_CHECK(heaviest != nullptr, "a type with pending jobs had none in its keys' lanes");
  ExpiredJob shed = ExpiredOf(*heaviest, now);
  Withdraw(*heaviest, now);
  return std::optional<ExpiredJob>(std::move(shed));
}

}  // namespace fairgate::core
