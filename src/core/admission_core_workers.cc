// AdmissionCore's workers (fairgate/worker.h): adding, changing and removing them, and the index
// of who serves what that the type level and the assignment read (docs/ordering.md, "Workers").
#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/admission_core.h"
#include "core/check.h"

namespace fairgate::core {
namespace {

absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

Status AdmissionCore::AddWorker(std::string_view name, const WorkerConfig& config) {
  if (Status s = ValidateWorker(name, config); !s.ok()) return s;
  if (auto it = workers_by_name_.find(AsAbsl(name)); it != workers_by_name_.end()) {
    if (it->second->config == config) return absl::OkStatus();
    return absl::AlreadyExistsError(
        absl::StrCat("worker '", AsAbsl(name),
                     "' is already added with a different config (UpdateWorker "
                     "changes it)"));
  }
  auto free = std::find(workers_.begin(), workers_.end(), nullptr);
  if (free == workers_.end()) {
    if (workers_.size() >= 65535) {
      return absl::ResourceExhaustedError("at most 65535 workers can be added at once");
    }
    free = workers_.insert(workers_.end(), nullptr);
  }
  auto worker = std::make_unique<WorkerState>();
  worker->name = std::string(name);
  worker->config = config;
  worker->index = static_cast<std::uint16_t>(free - workers_.begin());
  worker->added = workers_added_++;
  worker->slots.set_limit(config.slots);
  workers_by_name_.emplace(worker->name, worker.get());
  *free = std::move(worker);
  const bool first = !workers_in_use_;
  workers_in_use_ = true;
  if (first) {  // a worker's room is per type: no type shares its tier's lanes from now on
    for (const auto& type : types_) Rehome(*type);
  }
  RebuildWorkerIndex();
  return absl::OkStatus();
}

Status AdmissionCore::UpdateWorker(std::string_view name, const WorkerConfig& config) {
  auto it = workers_by_name_.find(AsAbsl(name));
  if (it == workers_by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown worker '", AsAbsl(name), "'"));
  }
  if (Status s = ValidateWorker(name, config); !s.ok()) return s;
  WorkerState& worker = *it->second;
  worker.config = config;
  worker.slots.set_limit(config.slots);
  RebuildWorkerIndex();
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
  auto it = workers_by_name_.find(AsAbsl(name));
  if (it == workers_by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown worker '", AsAbsl(name), "'"));
  }
  WorkerState& worker = *it->second;
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
  const std::uint16_t index = worker.index;
  workers_by_name_.erase(it);
  workers_[index].reset();
  while (!workers_.empty() && workers_.back() == nullptr) workers_.pop_back();
  RebuildWorkerIndex();
  return lost;
}

bool AdmissionCore::TypeServed(std::string_view name) const {
  auto it = types_by_name_.find(AsAbsl(name));
  if (it == types_by_name_.end()) return false;
  return !workers_in_use_ || !it->second->workers.empty();
}

std::vector<std::string> AdmissionCore::TypesWithoutWorker() const {
  std::vector<std::string> names;
  if (!workers_in_use_) return names;
  for (const auto& type : types_) {
    if (type->workers.empty()) names.push_back(type->name);
  }
  return names;
}

std::vector<std::string> AdmissionCore::NarrowWorkerWarnings(std::string_view worker,
                                                             std::string_view type) const {
  std::vector<std::string> warnings;
  for (const auto& w : workers_) {
    if (w == nullptr || (!worker.empty() && w->name != worker)) continue;
    for (const auto& t : types_) {
      if (!type.empty() && t->name != type) continue;
      if (w->config.slots >= t->config.slots || !WorkerNames(w->config, t->name, t->config)) {
        continue;
      }
      warnings.push_back(absl::StrCat(
          "worker '", w->name, "' names job type '", t->name, "' but has ", w->config.slots,
          w->config.slots == 1 ? " slot" : " slots", " and its jobs take ", t->config.slots,
          ": it does not serve it (none of its jobs could run there)"));
    }
  }
  return warnings;
}

void AdmissionCore::RebuildWorkerIndex() {
  for (auto& type : types_) {
    type->workers.clear();
    type->workers_with_room = 0;
  }
  for (auto& worker : workers_) {
    if (worker == nullptr) continue;
    worker->served.clear();
    for (auto& type : types_) {
      if (!WorkerServes(worker->config, type->name, type->config)) continue;
      worker->served.push_back(type.get());
      type->workers.push_back(worker.get());
      type->workers_with_room += WorkerFits(*worker, *type);
    }
  }
  // Most specialised first: fewest types served, then the one added first.
  sole_types_.clear();
  for (auto& type : types_) {
    std::sort(
        type->workers.begin(), type->workers.end(), [](const WorkerState* a, const WorkerState* b) {
          return std::pair(a->served.size(), a->added) < std::pair(b->served.size(), b->added);
        });
    if (type->workers.size() == 1) sole_types_.push_back(type.get());
  }
}

}  // namespace fairgate::core
