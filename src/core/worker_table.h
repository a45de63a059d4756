// WorkerTable: the declared workers (fairgate/worker.h), who serves what, the room of each for
// each type, and the reservation of a worker by a rare type that starves (docs/ordering.md,
// "Workers"). Internal to src/core: a part of AdmissionCore, which decides; the table keeps its
// own state consistent and answers the worker level of the one list (core/constraints.h).
//
// A worker's index is its place in the table (reused once it is removed); a running job names
// its worker by index + 1 (Job::worker, 0: none). The types' side of the index (each type's
// workers, most specialised first, and how many have room for one of its jobs) lives in the
// types' nodes (TypeState::workers, workers_with_room); the table keeps it and nothing else
// writes it.
#ifndef FAIRGATE_CORE_WORKER_TABLE_H_
#define FAIRGATE_CORE_WORKER_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/constraints.h"
#include "core/job_table.h"
#include "core/queue_nodes.h"
#include "fairgate/status.h"
#include "fairgate/worker.h"

namespace fairgate::core {

class WorkerTable {
 public:
  using Types = std::vector<std::unique_ptr<TypeState>>;

  // Whether a worker was ever added: from then on a job is admitted only onto one.
  bool in_use() const { return in_use_; }

  // Adds a worker (the config validated by the caller). Idempotent for an equal config (no
  // change: false); AlreadyExists for a different one; ResourceExhausted past 65535 workers.
  // True when it was added; the index is not rebuilt (RebuildIndex).
  StatusOr<bool> Add(std::string_view name, const WorkerConfig& config);
  // The worker of that name, or null.
  WorkerState* Find(std::string_view name) const;
  // Changes a worker's config and slots; the index is not rebuilt.
  static void Update(WorkerState& worker, const WorkerConfig& config);
  // Forgets a worker whose running jobs have all ended; the index is not rebuilt.
  void Remove(WorkerState& worker);
  // The worker a running job holds, or null.
  WorkerState* Of(const Job& job) const {
    return job.worker == 0 ? nullptr : workers_[job.worker - 1].get();
  }
  // Every worker by index, null where one was removed.
  const std::vector<std::unique_ptr<WorkerState>>& all() const { return workers_; }

  // Rebuilds who serves what (WorkerState::served, TypeState::workers and workers_with_room,
  // sole_types()) after a worker or a type came or went, or a worker changed: O(workers x types).
  void RebuildIndex(const Types& types);
  // The types exactly one worker serves, in registration order: the ones that may reserve it.
  const std::vector<TypeState*>& sole_types() const { return sole_types_; }

  // The worker level for one worker: whether `worker` has room for a job of `type`. The room
  // counts, the choice of a worker and the reservation all ask it.
  static bool Fits(const WorkerState& worker, const TypeState& type) {
    return worker.slots.Fits(type.config.slots);
  }
  // The worker level of the one list: whether a worker that serves the type has room for one of
  // its jobs and is not reserved in this decision for another type. O(1) unless a worker is.
  Blocker BlockerFor(const TypeState& type) const {
    const bool room = reserved_.empty() ? type.workers_with_room > 0 : Choose(type) != nullptr;
    return room ? Blocker::kNone : Blocker::kNoWorker;
  }
  // The worker an admission of `type` goes to now: the first of its workers (the most
  // specialised) with room and not reserved; null if none. O(the type's workers).
  WorkerState* Choose(const TypeState& type) const;
  // Runs `change` (to what `job`'s worker holds) and keeps the room counts of the types that
  // worker serves current: O(the types it serves).
  template <typename Change>
  void ChangeUse(const Job& job, Change change) {
    WorkerState* w = Of(job);
    if (w == nullptr) {
      change();
      return;
    }
    for (TypeState* t : w->served) t->workers_with_room -= Fits(*w, *t);
    change();
    for (TypeState* t : w->served) t->workers_with_room += Fits(*w, *t);
  }

  // The reservation of RuleOptions::sole_worker_reserve_after, made per decision. Claim: `type`,
  // which one worker alone serves and which starves, has `job` first and held back by nothing
  // but its worker: the worker is reserved in this decision, and its room goes to the type of
  // its own that starved longest (ties: registered first), its claimant.
  void Claim(TypeState& type, Job* job);
  // Across the reserved workers that have room for their claimant's job, the claimant that
  // starved longest: its job, with `worker` set to its worker; null if none has room.
  Job* FirstClaim(WorkerState*& worker) const;
  bool reserving() const { return !reserved_.empty(); }
  // Ends the decision's reservations.
  void ClearReservations();

  // One sentence for each worker that names a registered type it is too narrow to serve, of the
  // worker `worker` and the type `type` (empty: any), by worker and then type order.
  std::vector<std::string> NarrowWarnings(const Types& types, std::string_view worker,
                                          std::string_view type) const;

  // Its share of CheckInvariants: each worker holds what the jobs on it hold (`held_by`: what
  // the running jobs hold of each constraint; its slots may have been lowered below that), knows
  // exactly its running jobs, serves what its config names, and each type's workers and their
  // room count are what the workers say; no job runs on a worker without workers, or pending on
  // one; no reservation outlives its decision. Internal naming the first broken one.
  Status Check(const JobTable& jobs, const Types& types,
               const absl::flat_hash_map<const Usage*, std::int64_t>& held_by) const;

 private:
  // Check's parts: one worker's slots, reservation and the types it serves; one type's workers,
  // their order and room count, and whether it is sole-served.
  static Status CheckWorker(const WorkerState& worker, const Types& types,
                            const absl::flat_hash_map<const Usage*, std::int64_t>& held_by);
  Status CheckWorkersOf(const TypeState& type) const;
  // By index (null where one was removed; its index is reused), and by name.
  std::vector<std::unique_ptr<WorkerState>> workers_;
  absl::flat_hash_map<std::string, WorkerState*> by_name_;
  std::uint64_t added_ = 0;  // AddWorker calls that added one: the tie rule of assignment
  bool in_use_ = false;
  std::vector<TypeState*> sole_types_;
  std::vector<WorkerState*> reserved_;  // reserved in the current decision (empty outside one)
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_WORKER_TABLE_H_
