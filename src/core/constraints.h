// The admissibility conditions of the core, as one kind of object. Internal to src/core.
//
// Every condition that can hold a job back is a capacity and the share of it that running jobs
// hold: a Usage. A running job holds, and only holds, the usages that AdmissionCore::ForEachHold
// lists (the one list: admission acquires exactly what it names, completion releases exactly
// what it names):
//
//   constraint       usage                   amount     capacity
//   global cap       AdmissionCore::slots_   its slots  capacity() (max_concurrency or SetCapacity)
//   tier cap         TierState::slots        its slots  the tier's priority
//   type cap         TypeState::running      1          JobTypeConfig::max_concurrency
//   key limit        KeyState::running       1          KeyLimits::max_running of the key
//   conflict limit   Resource::running       1          JobTypeConfig::conflict_limit of the group
//
// Each is checked at the coarsest level of the order where it is the same for every job there,
// so a job that must wait is set aside with the others that must, where the release that frees
// it finds them:
//
//   the global, tier and type caps depend on the type only: NextAdmission skips the type's lane
//     set whole (AdmissionCore::TypeFits), and the next decision looks again;
//   the key limit depends on the key only: SyncLane unlinks ("holds") the key's lanes, and the
//     completion that frees the key relinks them (Rekey);
//   the conflict limit depends on the job's id: FrontOf parks a head whose resource is full in
//     a parked lane of the resource's wait group, whose best lane stands in the lane set as one
//     entry (the group's proxy) exactly while the resource has room (AdmissionCore::SyncProxy).
//
// src/core/README.md has the same table with the costs.
#ifndef FAIRGATE_CORE_CONSTRAINTS_H_
#define FAIRGATE_CORE_CONSTRAINTS_H_

#include <cstdint>

namespace fairgate::core {

// What the running jobs hold of one capacity. The capacity itself is configuration and lives
// where it is set (options, type, key settings, conflict group), so it is passed in.
class Usage {
 public:
  // Whether `amount` more fits under `capacity`.
  bool Fits(std::int32_t amount, std::int32_t capacity) const { return used_ + amount <= capacity; }
  bool Full(std::int32_t capacity) const { return used_ >= capacity; }
  void Acquire(std::int32_t amount) { used_ += amount; }
  void Release(std::int32_t amount) { used_ -= amount; }
  std::int32_t used() const { return used_; }

 private:
  std::int32_t used_ = 0;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_CONSTRAINTS_H_
