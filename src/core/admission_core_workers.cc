// AdmissionCore's workers (fairgate/worker.h): adding, changing and removing them, and the index
// of who serves what that the type level and the assignment read (docs/ordering.md, "Workers").
#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/admission_core.h"
#include "core/arguments.h"
#include "core/check.h"

namespace fairgate::core {

Status AdmissionCore::AddWorker(std::string_view name, const WorkerConfig& config) {
  if (Status s = ValidateWorker(name, config); !s.ok()) return s;
  const bool first = !workers_.in_use();
  StatusOr<bool> added = workers_.Add(name, config);
  if (!added.ok() || !*added) return added.status();
  if (first) {  // a worker's room is per type: no type shares its tier's lanes from now on
    for (const auto& type : types_.all()) Rehome(*type);
  }
  workers_.RebuildIndex(types_.all());
  return absl::OkStatus();
}

Status AdmissionCore::UpdateWorker(std::string_view name, const WorkerConfig& config) {
  WorkerState* worker = workers_.Find(name);
  if (worker == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown worker '", AsAbsl(name), "'"));
  }
  if (Status s = ValidateWorker(name, config); !s.ok()) return s;
  WorkerTable::Update(*worker, config);
  workers_.RebuildIndex(types_.all());
  return absl::OkStatus();
}

JobView LostJob::View() const {
  JobView view = BaseView();
  view.running = true;
  view.charge = charge;
  view.worker = worker;
  return view;
}

StatusOr<std::vector<LostJob>> AdmissionCore::RemoveWorker(std::string_view name, double now) {
  if (!std::isfinite(now)) return absl::InvalidArgumentError("removal time is not finite");
  WorkerState* found = workers_.Find(name);
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown worker '", AsAbsl(name), "'"));
  }
  WorkerState& worker = *found;
  std::vector<Job*> running;
  running.reserve(worker.running.size());
  for (std::uint32_t slot : worker.running) running.push_back(&jobs_.At(slot));
  std::sort(running.begin(), running.end(),
            [](const Job* a, const Job* b) { return a->seq < b->seq; });
  std::vector<LostJob> lost;
  lost.reserve(running.size());
  for (Job* job : running) {
    const JobView view = ViewOf(*job);
    lost.push_back(
        {{TicketOf(*job), std::string(view.type), std::string(view.id), std::string(view.key),
          view.type_index, view.priority, view.effective_priority, view.arrival},
         worker.name,
         view.charge});
    EndRunning(*job, nullptr, now);
  }
  FAIRGATE_CORE_CHECK(worker.running.empty() && worker.slots.used() == 0,
                      "a removed worker still held jobs");
  workers_.Remove(worker);
  workers_.RebuildIndex(types_.all());
  return lost;
}

bool AdmissionCore::TypeServed(std::string_view name) const {
  const TypeState* type = types_.Find(name);
  if (type == nullptr) return false;
  return !workers_.in_use() || !type->workers.empty();
}

std::vector<std::string> AdmissionCore::TypesWithoutWorker() const {
  std::vector<std::string> names;
  if (!workers_.in_use()) return names;
  for (const auto& type : types_.all()) {
    if (type->workers.empty()) names.push_back(type->name);
  }
  return names;
}

std::vector<std::string> AdmissionCore::NarrowWorkerWarnings(std::string_view worker,
                                                             std::string_view type) const {
  return workers_.NarrowWarnings(types_.all(), worker, type);
}

}  // namespace fairgate::core
