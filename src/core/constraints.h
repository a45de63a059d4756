// The admissibility conditions of the core, as one kind of object and one list. Internal to
// src/core.
//
// Every condition that can hold a job back is a capacity and the share of it that running jobs
// hold: a Constraint, which keeps both. A running job holds, and only holds, what
// AdmissionCore::ForEachHold lists (admission acquires exactly what it names, completion releases
// exactly what it names, CheckInvariants recounts exactly what it names):
//
//   constraint       object                  amount     limit
//   global cap       TypeTable::global_cap() its slots  max_concurrency, or what SetCapacity set
//   tier cap         TierState::slots        its slots  the tier's priority (a borrower, with
//                                                       RuleOptions::lending, runs past it)
//   type cap         TypeState::running      1          JobTypeConfig::max_concurrency
//   key limit        KeyState::running       1          KeyLimits::max_running of the key (*)
//   conflict limit   Resource::running       1          JobTypeConfig::conflict_limit of the group
//   worker           WorkerState::slots      its slots  WorkerConfig::slots of its worker (**)
//
// Rate limits (fairgate/rate_limit.h) are constraints of the list too, but over time: nothing
// running holds a token, so they are in no ForEachHold; an admission takes one of each bucket it
// is under (AdmissionCore::ChargeAndHold), and a bucket without one has no room until its next
// token is due (AdmissionCore::NextTokenAt tells the caller when to decide again):
//
//   constraint       object                  takes      limit
//   global rate      TypeTable::global_rate  1 token    RuleOptions::rate_limit
//   type rate        TypeState::rate         1 token    JobTypeConfig::rate_limit
//   key rate         KeyTable's bucket       1 token    KeyLimits::rate_limit of the key
//
// A key's bucket holds its key from the take that leaves it without a token until AdvanceTo
// reaches the next one (KeyTable::ReleaseDue), its lanes unlinked meanwhile as for its limit.
//
// (*) The key limit's usage is a bare Usage in the key and its limit lives in the key's settings,
// or in the options for a key without settings of its own: a key is kept at 72 bytes (a server
// may remember a million idle clients), and nearly every key shares the default limit.
//
// (**) With workers declared only. A job holds the one worker its admission named: the type level
// asks whether any worker serving the type has room (TypeState::workers_with_room, kept by
// WorkerTable::ChangeUse), and the admission takes the most specialised of those.
//
// Pauses hold nothing and have no amount: a paused type or key has no room at all.
//
// Whether a job may run is answered in one place, AdmissionCore::BlockerOf and its three levels
// (TypeTable::BlockerOf, KeyTable::BlockerOf, LaneIndex::IdBlocker), which name the first
// constraint without room, a Blocker. Each level is checked where it is the same for every job
// there, so a job that must wait is set aside with the others that must, where the release that
// frees it finds them:
//
//   - the type level (its pause, the tier, global and type caps, a worker with room) depends on
//     the type only: NextAdmission skips the type's lane set whole (TypeTable::Fits), and the
//     next decision looks again;
//   - the key level (its pause, its max_running) depends on the key only: LaneIndex::SyncLane
//     unlinks ("holds") the key's lanes, and the completion that frees the key relinks them
//     (LaneIndex::Rekey);
//   - the id level (the conflict limit) depends on the job's id: LaneIndex::FrontOf parks a head
//     whose resource is full in a parked lane of the resource's wait group, whose best lane
//     stands in the lane set as one entry (the group's proxy) exactly while the resource has
//     room (LaneIndex::SyncProxy).
//
// src/core/README.md has the same table with the costs.
#ifndef FAIRGATE_CORE_CONSTRAINTS_H_
#define FAIRGATE_CORE_CONSTRAINTS_H_

#include <cstdint>

namespace fairgate::core {

// What the running jobs hold of one capacity.
class Usage {
 public:
  void Acquire(std::int32_t amount) { used_ += amount; }
  void Release(std::int32_t amount) { used_ -= amount; }
  std::int32_t used() const { return used_; }

 private:
  std::int32_t used_ = 0;
};

// A capacity and what the running jobs hold of it. A limit may be lowered below what is held
// (SetCapacity): nothing running is stopped, and nothing more fits until enough is released.
class Constraint : public Usage {
 public:
  Constraint() = default;
  explicit Constraint(std::int32_t limit) : limit_(limit) {}
  // Whether `amount` more fits.
  bool Fits(std::int32_t amount) const { return used() + amount <= limit_; }
  // Whether nothing more fits (not even an amount of 1).
  bool Full() const { return used() >= limit_; }
  std::int32_t limit() const { return limit_; }
  void set_limit(std::int32_t limit) { limit_ = limit; }

 private:
  std::int32_t limit_ = 0;
};

// The first constraint of the one list that has no room for a job, in the order the list checks
// them; kNone when every one has room. The order of the type level is the order the skip counts
// of a decision (fairgate/evidence.h) name a type's cap by.
enum class Blocker : std::uint8_t {
  kNone,
  // The type level.
  kTypePaused,
  kTierCap,
  kGlobalCap,
  kTypeCap,
  kGlobalRate,  // the global rate limit's bucket has no token
  kTypeRate,    // the type's rate limit's bucket has no token
  kNoWorker,    // no worker that serves the type has room for its slots (with workers only)
  // The key level.
  kKeyPaused,
  kKeyLimit,
  kKeyRate,     // the key's rate limit's bucket has no token (KeyLimits::rate_limit)
  kGroupLimit,  // the key's group runs its max_running (GroupLimits)
  // The id level.
  kConflictLimit,
  kCount,  // not a constraint: how many Blocker values there are. Keep it last.
};

// Where a constraint is checked: for a whole type, a whole key, or one job's id.
enum class BlockerLevel : std::uint8_t { kNone, kType, kKey, kId };

constexpr BlockerLevel LevelOf(Blocker blocker) {
  switch (blocker) {
    case Blocker::kTypePaused:
    case Blocker::kTierCap:
    case Blocker::kGlobalCap:
    case Blocker::kTypeCap:
    case Blocker::kGlobalRate:
    case Blocker::kTypeRate:
    case Blocker::kNoWorker:
      return BlockerLevel::kType;
    case Blocker::kKeyPaused:
    case Blocker::kKeyLimit:
    case Blocker::kKeyRate:
    case Blocker::kGroupLimit:
      return BlockerLevel::kKey;
    case Blocker::kConflictLimit:
      return BlockerLevel::kId;
    case Blocker::kNone:
    case Blocker::kCount:
      return BlockerLevel::kNone;
  }
  return BlockerLevel::kNone;
}

// A new constraint, step by step (src/core/README.md has the same recipe):
//
//  1. Its object: a Constraint (or a Usage whose limit lives elsewhere) in the part it belongs
//     to, and a line in AdmissionCore::ForEachHold if a running job holds it, so admission,
//     completion and CheckInvariants acquire, release and recount it.
//  2. Its Blocker, before kCount at the place of its level, and its case in LevelOf.
//  3. Its check in its level's function (TypeTable::CapBlocker or BlockerOf,
//     KeyTable::BlockerOf, LaneIndex::IdBlocker): BlockerOf, and so the pick, the fast path and
//     CheckInvariants, ask it there.
//  4. A type-level one: its case in TypeTable::SharingMaySkip, which says when the tier's
//     shared lane set may leave it unchecked (false when in doubt: the type keeps lanes of its
//     own), and its skip count in CountCapSkip. The core is built with -Werror=switch, so
//     steps 2 and 4 cannot be forgotten.
//  5. Its row in tests/constraint_recipe_test.cc, which fails to compile without one for every
//     Blocker: a job of a type that would share, held back by it and admitted once it has room.
//  6. What releases it must say so: a key-level one relinks the key's lanes (Rekey), an id-level
//     one reopens its resource's wait groups (Reopen); a type-level one needs nothing, as
//     NextAdmission looks at every type again.

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_CONSTRAINTS_H_
