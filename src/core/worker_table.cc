#include "core/worker_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/arguments.h"

namespace fairgate::core {
namespace {

Status Broken(std::string what) { return absl::InternalError(what); }

}  // namespace

StatusOr<bool> WorkerTable::Add(std::string_view name, const WorkerConfig& config) {
  if (auto it = by_name_.find(AsAbsl(name)); it != by_name_.end()) {
    if (it->second->config == config) return false;
    return absl::AlreadyExistsError(
        absl::StrCat("worker '", AsAbsl(name),
                     "' is already added with a different config (UpdateWorker changes it)"));
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
  worker->added = added_++;
  worker->slots.set_limit(config.slots);
  by_name_.emplace(worker->name, worker.get());
  *free = std::move(worker);
  in_use_ = true;
  return true;
}

WorkerState* WorkerTable::Find(std::string_view name) const {
  auto it = by_name_.find(AsAbsl(name));
  return it == by_name_.end() ? nullptr : it->second;
}

void WorkerTable::Update(WorkerState& worker, const WorkerConfig& config) {
  worker.config = config;
  worker.slots.set_limit(config.slots);
}

void WorkerTable::Remove(WorkerState& worker) {
  const std::uint16_t index = worker.index;
  by_name_.erase(worker.name);
  workers_[index].reset();
  while (!workers_.empty() && workers_.back() == nullptr) workers_.pop_back();
}

void WorkerTable::RebuildIndex(const Types& types) {
  for (auto& type : types) {
    type->workers.clear();
    type->workers_with_room = 0;
  }
  for (auto& worker : workers_) {
    if (worker == nullptr) continue;
    worker->served.clear();
    for (auto& type : types) {
      if (!WorkerServes(worker->config, type->name, type->config)) continue;
      worker->served.push_back(type.get());
      type->workers.push_back(worker.get());
      type->workers_with_room += Fits(*worker, *type);
    }
  }
  // Most specialised first: fewest types served, then the one added first.
  sole_types_.clear();
  for (auto& type : types) {
    std::sort(
        type->workers.begin(), type->workers.end(), [](const WorkerState* a, const WorkerState* b) {
          return std::pair(a->served.size(), a->added) < std::pair(b->served.size(), b->added);
        });
    if (type->workers.size() == 1) sole_types_.push_back(type.get());
  }
}

WorkerState* WorkerTable::Choose(const TypeState& type) const {
  for (WorkerState* w : type.workers) {
    if (!w->reserved && Fits(*w, type)) return w;
  }
  return nullptr;
}

void WorkerTable::Claim(TypeState& type, Job* job) {
  WorkerState& sole = *type.workers.front();
  if (!sole.reserved) {
    sole.reserved = true;
    reserved_.push_back(&sole);
  }
  if (sole.claimant == nullptr ||
      std::pair(type.starved_since, type.index) <
          std::pair(sole.claimant->starved_since, sole.claimant->index)) {
    sole.claimant = &type;
    sole.claimant_job = job;
  }
}

Job* WorkerTable::FirstClaim(WorkerState*& worker) const {
  const TypeState* first = nullptr;
  Job* first_job = nullptr;
  for (WorkerState* w : reserved_) {
    const TypeState* type = w->claimant;
    if (!Fits(*w, *type)) continue;
    if (first == nullptr || std::pair(type->starved_since, type->index) <
                                std::pair(first->starved_since, first->index)) {
      first = type;
      first_job = w->claimant_job;
      worker = w;
    }
  }
  return first_job;
}

void WorkerTable::ClearReservations() {
  for (WorkerState* w : reserved_) {
    w->reserved = false;
    w->claimant = nullptr;
    w->claimant_job = nullptr;
  }
  reserved_.clear();
}

std::vector<std::string> WorkerTable::NarrowWarnings(const Types& types, std::string_view worker,
                                                     std::string_view type) const {
  std::vector<std::string> warnings;
  for (const auto& w : workers_) {
    if (w == nullptr || (!worker.empty() && w->name != worker)) continue;
    for (const auto& t : types) {
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

Status WorkerTable::Check(const JobTable& jobs, const Types& types,
                          const absl::flat_hash_map<const Usage*, std::int64_t>& held_by) const {
  std::size_t on_workers = 0;
  for (const Job& job : jobs) {
    if (job.state == JobState::kFree || job.worker == 0) continue;
    if (job.state != JobState::kRunning) {
      return Broken(absl::StrCat("pending job ", job.seq, " names a worker"));
    }
    if (job.worker > workers_.size() || workers_[job.worker - 1] == nullptr ||
        !workers_[job.worker - 1]->running.contains(job.slot)) {
      return Broken(absl::StrCat("job ", job.seq, " runs on a worker that does not know it"));
    }
    ++on_workers;
  }
  // A job admitted before the first worker was added runs on none: that is not checked.
  std::size_t known = 0;
  for (const auto& worker : workers_) {
    if (worker == nullptr) continue;
    known += worker->running.size();
    if (Status s = CheckWorker(*worker, types, held_by); !s.ok()) return s;
  }
  if (known != on_workers) return Broken("a worker lists a job that does not run on it");
  if (!reserved_.empty()) return Broken("reservations outlived their decision");
  for (const auto& type : types) {
    if (Status s = CheckWorkersOf(*type); !s.ok()) return s;
  }
  std::size_t served_pairs = 0, listed_pairs = 0;
  for (const auto& worker : workers_) served_pairs += worker == nullptr ? 0 : worker->served.size();
  for (const auto& type : types) listed_pairs += type->workers.size();
  if (served_pairs != listed_pairs) return Broken("types and workers disagree on who serves what");
  return absl::OkStatus();
}

Status WorkerTable::CheckWorker(const WorkerState& worker, const Types& types,
                                const absl::flat_hash_map<const Usage*, std::int64_t>& held_by) {
  const auto it = held_by.find(&worker.slots);
  if (worker.slots.used() != (it == held_by.end() ? 0 : it->second) ||
      worker.slots.limit() != worker.config.slots) {
    return Broken(absl::StrCat("worker '", worker.name, "' counts ", worker.slots.used(),
                               " slots in use, its jobs hold ",
                               it == held_by.end() ? 0 : it->second));
  }
  if (worker.reserved || worker.claimant != nullptr) {
    return Broken(absl::StrCat("worker '", worker.name, "' is reserved outside a decision"));
  }
  std::size_t serves = 0;
  for (const auto& type : types) {
    const bool listed =
        std::find(worker.served.begin(), worker.served.end(), type.get()) != worker.served.end();
    bool named = std::find(worker.config.types.begin(), worker.config.types.end(), type->name) !=
                 worker.config.types.end();
    for (const std::string& tag : worker.config.tags) {
      named = named || std::find(type->config.tags.begin(), type->config.tags.end(), tag) !=
                           type->config.tags.end();
    }
    const bool fits = worker.config.slots >= type->config.slots;
    if (listed != (named && fits)) {
      return Broken(absl::StrCat("worker '", worker.name, "' serves type ", type->name,
                                 listed
                                     ? (named ? " but is narrower than it" : " without naming it")
                                     : " but does not list it"));
    }
    serves += listed;
  }
  if (serves != worker.served.size()) {
    return Broken(absl::StrCat("worker '", worker.name, "' lists a type twice"));
  }
  return absl::OkStatus();
}

Status WorkerTable::CheckWorkersOf(const TypeState& type) const {
  std::int32_t with_room = 0;
  for (std::size_t i = 0; i < type.workers.size(); ++i) {
    const WorkerState* w = type.workers[i];
    with_room += Fits(*w, type);
    if (std::find(w->served.begin(), w->served.end(), &type) == w->served.end()) {
      return Broken(absl::StrCat("type ", type.name, " lists worker '", w->name,
                                 "', which does not serve it"));
    }
    if (i > 0 && std::pair(type.workers[i - 1]->served.size(), type.workers[i - 1]->added) >=
                     std::pair(w->served.size(), w->added)) {
      return Broken(absl::StrCat("type ", type.name, "'s workers are not most specialised first"));
    }
  }
  if (with_room != type.workers_with_room) {
    return Broken(absl::StrCat("type ", type.name, " counts ", type.workers_with_room,
                               " workers with room, its workers say ", with_room));
  }
  const bool sole = std::find(sole_types_.begin(), sole_types_.end(), &type) != sole_types_.end();
  if (sole != (type.workers.size() == 1)) {
    return Broken(absl::StrCat("type ", type.name, " is listed as sole-served wrongly"));
  }
  return absl::OkStatus();
}

}  // namespace fairgate::core
