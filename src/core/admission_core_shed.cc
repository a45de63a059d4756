// AdmissionCore's shedding (JobTypeConfig::shedding, fairgate/shedding.h): the choice of the
// pending job to refuse, and the refusals a standing queue makes at arrivals and admissions.
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "core/admission_core.h"
#include "core/token_bucket.h"

namespace fairgate::core {
namespace {

// The first two fields of a shedding place: (its group's cost, or `key_acc` for a key of no
// group; `key_acc`), by the key's settings (null: none); a group not tracked costs 0 (a key with
// pending jobs has its group tracked).
std::pair<double, double> CostsOf(const KeySettings* settings, double key_acc) {
  if (settings == nullptr || settings->group == nullptr) return {key_acc, key_acc};
  const GroupState* group = settings->group->state;
  return {group != nullptr ? group->acc : 0, key_acc};
}

}  // namespace

Job* AdmissionCore::HeaviestPending(const TypeState& type, ShedPlace* place) {
  if (type.pending == 0) return nullptr;
  Job* heaviest = nullptr;
  ShedPlace most;
  for (const auto& entry : keys_) {
    const KeyState& key = entry.second;
    if (key.pending == 0) continue;
    // Plain copies: clang 14 cannot capture a structured binding in a lambda.
    const std::pair<double, double> costs = CostsOf(key.settings, key.acc);
    const double group_acc = costs.first;
    const double key_acc = costs.second;
    for (Lane* lane = key.lanes; lane != nullptr; lane = lane->next_in_key) {
      lane->ready.ForEach([&](Job& job) {
        if (job.type != &type) return;
        const ShedPlace at{group_acc, key_acc, job.arrival, job.seq};
        if (heaviest == nullptr || at > most) heaviest = &job, most = at;
      });
    }
  }
  FAIRGATE_CORE_CHECK(heaviest != nullptr, "a type with pending jobs had none in its keys' lanes");
  if (place != nullptr) *place = most;
  return heaviest;
}

ExpiredJob AdmissionCore::ShedJob(Job& job, double now) {
  ExpiredJob shed = ExpiredOf(job, now);
  const TypeState& type = *job.type;
  shed.shed = ShedStatus(
      absl::StrCat("job type '", type.name, "' shed this pending job: its key had consumed the ",
                   "most of the type's pending jobs while its queue stood over its target"),
      type.config.shedding.interval.count());
  Withdraw(job, now);
  return shed;
}

StatusOr<std::optional<ExpiredJob>> AdmissionCore::ShedHeaviest(std::string_view type, double now) {
  if (Status s = CheckTime(now, "shed time"); !s.ok()) return s;
  StatusOr<TypeState*> found = types_.FindOrError(type);
  if (!found.ok()) return found.status();
  Job* heaviest = HeaviestPending(**found, nullptr);
  if (heaviest == nullptr) return std::nullopt;
  return std::optional<ExpiredJob>(ShedJob(*heaviest, now));
}

Status AdmissionCore::ShedForArrival(TypeState& type, std::string_view key_name,
                                     const KeyState* key, double now) {
  ShedWatch& watch = *type.shed;
  if (!watch.Stands(now)) return absl::OkStatus();
  ShedPlace heaviest_place;
  Job* heaviest = HeaviestPending(type, &heaviest_place);
  // The call's key as it stands: not tracked, cost 0 (its group still by its settings).
  const auto [group_acc, key_acc] = key != nullptr
                                        ? CostsOf(key->settings, key->acc)
                                        : CostsOf(keys_.FindSettings(AsAbsl(key_name)), 0);
  const ShedPlace arriving{group_acc, key_acc, now, next_seq_};
  watch.CountRefusal();
  if (heaviest == nullptr || arriving > heaviest_place) {
    return ShedRefusal(type, now);
  }
  expired_.push_back(ShedJob(*heaviest, now));
  return absl::OkStatus();
}

void AdmissionCore::ShedAfterAdmission(TypeState& type, double now) {
  if (!type.shed->Stands(now)) return;
  Job* heaviest = HeaviestPending(type, nullptr);
  if (heaviest == nullptr) return;
  type.shed->CountRefusal();
  expired_.push_back(ShedJob(*heaviest, now));
}

Status AdmissionCore::ShedRefusal(const TypeState& type, double now) const {
  const ShedWatch& watch = *type.shed;
  return ShedStatus(absl::StrCat("job type '", type.name,
                                 "' is shedding load (its queue has stood over its shedding ",
                                 "target of ", watch.target(), " s for ", now - watch.late_since(),
                                 " s) and this call's key has consumed the most"),
                    watch.interval());
}

}  // namespace fairgate::core
