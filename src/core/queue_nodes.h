// The nodes AdmissionCore links together. Internal to src/core.
//
// The pending jobs of a tier are grouped by type, then by fairness key:
//
//   TierState ── TypeState ── lanes: one Lane per key with ready jobs of that type, ordered by
//                                    (reservation rank, key's accumulated cost, head's order)
//                             Lane ── ready: that key's jobs of that type, by (sjf, arrival, seq)
//            └─ aged groups: one per type of a lower tier whose jobs aged into this tier, each
//                            a set of lanes ordered the same way
//
// A Lane is one (key, type, effective tier). The order is core/order.h's AdmissionOrder: a lane's
// ready jobs are ordered by their JobPlace (sjf, arrival, seq), a set of lanes by the whole order
// of each lane's head, its key's place (reservation rank, accumulated cost) first. A key at its
// max_running has no lane linked at all.
//
// The first job in the order of one type is the head of its first lane, and the first of a tier
// is the least of its types' firsts, so NextAdmission touches O(types) nodes.
// A job whose conflict resource is full is parked: it moves to a parked lane, (key, type, tier,
// resource), kept in the resource's wait group for its lane set. While the resource has room the
// group stands in the lane set as one entry, its proxy, at the place of its best parked lane; when
// the proxy comes first, that lane's first job returns home and goes. A release relinks one proxy
// per lane set the resource has waiters in, however many wait. A key's accumulated cost is part
// of its lanes' sort key, so changing it relinks each of the key's lanes (one per type it has ready
// jobs of, and one per (type, resource) it has parked jobs on).
//
// Both orders hold small entries that copy their sort key, so that a comparison reads the entry
// instead of chasing a pointer into a job or a key. A lane's jobs are a B-tree of ReadyEntry
// (absl::btree_set). A lane set is a binary heap of LaneEntry in which each lane knows its
// position (LaneSet): a charge, which moves each of the key's lanes, moves each entry down from
// where it is, without the search from the root that a B-tree paid.
#ifndef FAIRGATE_CORE_QUEUE_NODES_H_
#define FAIRGATE_CORE_QUEUE_NODES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "boost/intrusive/list.hpp"
#include "boost/intrusive/set.hpp"
#include "core/check.h"
#include "core/constraints.h"
#include "core/estimate_table.h"
#include "core/indexed_name.h"
#include "core/join_points.h"
#include "core/lane_heap.h"
#include "core/order.h"
#include "core/shed_watch.h"
#include "core/token_bucket.h"
#include "fairgate/group_limits.h"
#include "fairgate/job_type.h"
#include "fairgate/key_limits.h"
#include "fairgate/worker.h"

namespace fairgate::core {

namespace bi = boost::intrusive;
using SetHook = bi::set_member_hook<bi::link_mode<bi::safe_link>>;
using ListHook = bi::list_member_hook<bi::link_mode<bi::safe_link>>;

struct KeyState;
class LaneSet;
struct Lane;
struct Resource;
struct TierState;
struct TypeState;

struct WaitGroup;
struct GroupPresence;
struct GroupState;

// kReady: in its home lane. kParked: in a parked lane (its resource was full when it came first).
enum class JobState : std::uint8_t { kFree, kReady, kParked, kRunning };

struct Job {
  union {
    Lane* lane = nullptr;  // while kReady (its home lane) or kParked (a parked lane)
    // While running: the estimate entry its charge was read from, held so that its completion
    // learns without a lookup (null when it was charged an explicit cost).
    EstimateTable::Entry* estimate;
  };
  KeyState* key = nullptr;
  TypeState* type = nullptr;
  Resource* resource = nullptr;  // null when the type has no conflict group
  std::string id;
  double arrival = 0;
  std::uint64_t seq = 0;
  // Pending and running jobs need different facts; they share the memory (16 bytes per job of a
  // large backlog). NextAdmission reads the pending ones before it writes the running ones.
  union {
    double explicit_cost = 0;  // while pending, if has_explicit_cost
    double charge;             // while running: what it was charged
  };
  union {
    double sjf = 0;  // while pending: its place within its key (its estimate if shortest-first)
    double weight;   // while running: its key's weight when it was charged
  };
  union {
    std::uint32_t promotions = 0;     // while pending: aging steps taken
    std::int32_t effective_priority;  // while running: the tier it was admitted from
  };
  std::uint32_t slot = 0;  // index in the core's job table
  std::uint32_t generation = 0;
  JobState state = JobState::kFree;
  // Flags, one bit each: with `state` they fit in the padding after `generation`.
  bool has_explicit_cost : 1 = false;
  bool promotion_scheduled : 1 = false;
  bool was_parked : 1 = false;  // set aside for a full resource at least once
  bool joinable : 1 = false;    // in its type's join points (JobTypeConfig::coalesce)
  // Asked not to wait for a token (refuse_without_token): refused, pending, when its key's first
  // lease brings none (AdmissionCore::LeaseKeyTokens).
  bool impatient : 1 = false;
  // While running on a declared worker: its index in the core's worker table plus 1; 0 without
  // workers. In the padding after the flags.
  std::uint16_t worker = 0;
};
static_assert(sizeof(Job) == 112, "a pending job's size is stated in bench/HISTORY.md");

// A ready job's place in its lane, copied so that the lane's order and its head are read without
// touching the jobs. Seqs are unique, so entries are too.
struct ReadyEntry {
  JobPlace place;
  Job* job = nullptr;
  bool operator<(const ReadyEntry& o) const { return place < o.place; }
};
inline ReadyEntry ReadyEntryOf(const Job& job) {
  return {{SortableBits(job.sjf), SortableBits(job.arrival), job.seq}, const_cast<Job*>(&job)};
}

// A lane's jobs, by their place. Most lanes hold one job at a time (a client whose calls wait for
// each other, a backlog spread over more keys than jobs): that one is kept in the lane itself,
// and a B-tree (a node allocated and freed under the runtime's lock per job) is made only when a
// second job arrives; it is kept until the lane empties (bench/HISTORY.md).
class LaneJobs {
 public:
  bool empty() const { return only_.job == nullptr && more_.empty(); }
  // The first job's entry; the lane must not be empty.
  const ReadyEntry& front() const { return more_.empty() ? only_ : *more_.begin(); }
  // A lane's jobs mostly arrive in its order and leave from its front (FIFO within a key): an
  // insert is tried at the end first and an erase at the front, each found without a search from
  // the root (bench/HISTORY.md).
  void insert(const ReadyEntry& e) {
    if (!more_.empty()) {
      more_.insert(more_.end(), e);  // a hint: anywhere else, absl searches as insert(e) does
    } else if (only_.job == nullptr) {
      only_ = e;
    } else {
      more_.insert(only_);
      more_.insert(e);
      only_ = ReadyEntry{};
    }
  }
  // `e` must be in the lane.
  void erase(const ReadyEntry& e) {
    if (more_.empty()) {
      FAIRGATE_CORE_CHECK(only_.job == e.job, "a lane erased a job it does not hold");
      only_ = ReadyEntry{};
    } else if (more_.begin()->job == e.job) {
      more_.erase(more_.begin());
    } else {
      more_.erase(e);
    }
  }
  bool contains(const ReadyEntry& e) const {
    if (!more_.empty()) return more_.contains(e);
    return only_.job != nullptr && only_.job == e.job && only_.place == e.place;
  }
  // Calls `visit(job)` for each job, in the lane's order.
  template <typename Visit>
  void ForEach(Visit visit) const {
    if (only_.job != nullptr) visit(*only_.job);
    for (const ReadyEntry& e : more_) visit(*e.job);
  }

 private:
  ReadyEntry only_;  // the lane's one job while `more_` is empty (job null: none)
  absl::btree_set<ReadyEntry> more_;
};

// A lane's entry in its set: the lane's place, copied when the lane is linked so that comparisons
// read only the entry (its key's place, then its head's), and the lane.
struct LaneEntry {
  AdmissionOrder order;
  Lane* lane = nullptr;
  bool operator<(const LaneEntry& o) const { return order < o.order; }
};

// A LaneEntry whose rank is kUnreservedRank and whose sjf is kNoSjf, without those two fields.
// Its fields are the order's others, in the order's order, so it compares as the LaneEntry it
// stands for (Expand; tests/order_test.cc checks that on random entries).
struct CompactLaneEntry {
  std::uint64_t acc = 0;
  std::uint64_t arrival = 0;
  std::uint64_t seq = 0;
  Lane* lane = nullptr;

  AdmissionOrder Order() const { return {{kUnreservedRank, acc}, {kNoSjf, arrival, seq}}; }
  LaneEntry Expand() const { return {Order(), lane}; }
  bool operator<(const CompactLaneEntry& o) const {
    if (acc != o.acc) return acc < o.acc;
    if (arrival != o.arrival) return arrival < o.arrival;
    return seq < o.seq;
  }
  static bool Fits(const AdmissionOrder& order) {
    return order.key.rank == kUnreservedRank && order.job.sjf == kNoSjf;
  }
};

// A lane's entry in a set that holds a group's stand-in (GroupPresence): the group's place first,
// then the lane's. A key's own lane and a stand-in whose group place is its key place compare as
// LaneEntry does; a set takes this layout only when a lane's group place differs from its key's.
struct GroupedLaneEntry {
  KeyPlace group;
  AdmissionOrder order;
  Lane* lane = nullptr;
  [[gnu::always_inline]] bool operator<(const GroupedLaneEntry& o) const {
    if (group.rank != o.group.rank) return group.rank < o.group.rank;
    if (group.acc != o.group.acc) return group.acc < o.group.acc;
    return order < o.order;
  }
};

// A GroupedLaneEntry whose ranks (the group's and the key's) are kUnreservedRank and whose sjf is
// kNoSjf, without those three fields, as CompactLaneEntry is a LaneEntry: its fields in the
// order's order, so that it compares as the GroupedLaneEntry it stands for (Expand;
// tests/order_test.cc checks that on random entries).
struct CompactGroupedLaneEntry {
  std::uint64_t group_acc = 0;
  std::uint64_t acc = 0;
  std::uint64_t arrival = 0;
  std::uint64_t seq = 0;
  Lane* lane = nullptr;

  GroupedLaneEntry Expand() const {
    return {{kUnreservedRank, group_acc}, {{kUnreservedRank, acc}, {kNoSjf, arrival, seq}}, lane};
  }
  [[gnu::always_inline]] bool operator<(const CompactGroupedLaneEntry& o) const {
    if (group_acc != o.group_acc) return group_acc < o.group_acc;
    if (acc != o.acc) return acc < o.acc;
    if (arrival != o.arrival) return arrival < o.arrival;
    return seq < o.seq;
  }
  static bool Fits(const KeyPlace& group, const AdmissionOrder& order) {
    return group.rank == kUnreservedRank && CompactLaneEntry::Fits(order);
  }
};

static_assert(sizeof(ReadyEntry) == 32, "8 ready jobs to a B-tree node");
static_assert(sizeof(LaneEntry) == 48, "a lane's entry: its place and the lane");
static_assert(sizeof(CompactLaneEntry) == 32, "two compact lane entries to a cache line");
static_assert(sizeof(GroupedLaneEntry) == 64, "a grouped lane entry: a cache line");
static_assert(sizeof(CompactGroupedLaneEntry) == 40, "a compact grouped entry: 24 bytes less");

// The place in the order of a lane's group: its key's place for a key's own lane (a key without
// a group is a group of its own); a stand-in's group's; a wait group's proxy's, its best lane's
// group place. Defined below, with the stand-ins.
KeyPlace GroupPlaceOf(const Lane& lane);

// The jobs of one key and one type in one effective tier (its type's own, or one it aged into):
// a home lane; in its own tier, a type that shares its tier's lanes (TypeState::home) has one
// lane per key with the other sharing types. A parked lane holds those of them that wait on one
// full resource, in the resource's wait group. A wait group's proxy is a Lane too, with no key: it
// stands for the group in the home lane set.
//
// A key's lanes are visited in turn at each charge of the key (Rekey) and at each enqueue
// (LaneFor), a cache miss each at large backlogs: what those visits read (the next lane, the set
// that names the lane's type, tier and resource, its place there and its position) is in the lane's
// first 72 bytes, so a visit touches one cache line or two, where it touched up to three
// (bench/HISTORY.md). Aligning lanes to a line would make it one, but aligned allocation cost
// more than it saved where lanes come and go at each job.
struct Lane {
  Lane* next_in_key = nullptr;  // the key's next lane (home and parked)
  // Its type's home set or the aged group's; a parked lane: its wait group's; a lane of a key of
  // a group: its group's stand-in's (GroupPresence::lanes) in that set.
  LaneSet* set = nullptr;
  WaitGroup* group = nullptr;  // a parked lane's, a proxy's or a stand-in's wait group; null: home
  AdmissionOrder order;        // its place in `set`, while linked
  std::uint32_t heap_index = 0;  // its entry's position in `set`'s heap, while linked
  std::int32_t pending = 0;
  KeyState* key = nullptr;    // null for a proxy
  TypeState* type = nullptr;  // in a tier's shared set: the type of the job that made it
  TierState* tier = nullptr;  // the effective tier
  LaneJobs ready;             // its jobs, by their place (parked ones too, in a parked lane)
  bool linked = false;        // linked while `ready` is not empty and the key is admissible (a
                              // proxy: while its group has a linked lane and its resource room)
  bool held = false;          // a home lane not linked only because its key is at max_running
  bool presence = false;      // a group's stand-in (a GroupPresence; key null)
};
static_assert(offsetof(Lane, heap_index) == 64 && sizeof(Lane) == 160,
              "what a walk over a key's lanes reads is in a lane's first 72 bytes");

// The lanes of one type (or one aged group, one wait group, or one group's stand-in), in order,
// as a binary min-heap of their entries (LaneHeap) in which each lane knows its entry's position
// (Lane::heap_index). Charging a key moves each of its lanes to a later place: here that is its
// entry moved down from where it is, in one pass, where a B-tree paid a search from the root and
// a rebalance for an erase and again for an insert (bench/README.md). The front is the heap's top.
//
// Most sets never hold a lane of a reserved key (no key has a min_running) or a head with an sjf
// (the type is not shortest-first); those keep 32-byte compact entries, two to a cache line. A
// set chooses by itself: it starts compact and takes the full layout, for good, when the first
// lane arrives that the compact one cannot hold (O(lanes), once), and a grouped layout likewise
// when the first lane arrives whose group place is not its key place (a group's stand-in): the
// compact grouped one (CompactGroupedLaneEntry, 40 bytes) while no group or key is reserved and no
// head has an sjf, else the full grouped one (GroupedLaneEntry, 64 bytes). The order is the same
// in every layout.
class LaneSet {
 public:
  bool empty() const {
    if (compact_) return compact_heap_.empty();
    if (!grouped_) return full_heap_.empty();
    return compact_grouped_ ? compact_grouped_heap_.empty() : grouped_heap_.empty();
  }
  std::size_t size() const {
    if (compact_) return compact_heap_.size();
    if (!grouped_) return full_heap_.size();
    return compact_grouped_ ? compact_grouped_heap_.size() : grouped_heap_.size();
  }
  // The first lane; the set must not be empty.
  Lane* front() const {
    if (compact_) return compact_heap_.top().lane;
    if (!grouped_) return full_heap_.top().lane;
    return compact_grouped_ ? compact_grouped_heap_.top().lane : grouped_heap_.top().lane;
  }
  // The group place of the first lane's entry; the set must not be empty.
  KeyPlace front_group() const {
    if (compact_) return compact_heap_.top().Order().key;
    if (!grouped_) return full_heap_.top().order.key;
    return compact_grouped_ ? KeyPlace{kUnreservedRank, compact_grouped_heap_.top().group_acc}
                            : grouped_heap_.top().group;
  }
  // Links `lane`, which is not in the set, at `lane.order` (and its group place). A key's own
  // lane in a set whose layout holds it (every lane of a set with no group) takes the first
  // branch or the second. `kGrouping` false: no group was ever named, so the set is in neither
  // grouped layout (LaneIndex's hot paths).
  template <bool kGrouping = true>
  [[gnu::always_inline]] void insert(Lane& lane) {
    if (compact_ && lane.key != nullptr && CompactLaneEntry::Fits(lane.order)) {
      compact_heap_.push(Compact(lane));
    } else if (!compact_ && !(kGrouping && grouped_) && lane.key != nullptr) {
      full_heap_.push({lane.order, &lane});
    } else {
      InsertOther(lane);
    }
  }
  // Unlinks `lane`, which is in the set.
  void erase(const Lane& lane) {
    if (compact_) {
      compact_heap_.erase(lane.heap_index);
    } else if (!grouped_) {
      full_heap_.erase(lane.heap_index);
    } else if (compact_grouped_) {
      compact_grouped_heap_.erase(lane.heap_index);
    } else {
      grouped_heap_.erase(lane.heap_index);
    }
  }
  // Moves `lane`, which is in the set, to its `order` (or group place), which changed.
  // `kGrouping` as for insert.
  template <bool kGrouping = true>
  [[gnu::always_inline]] void Relink(Lane& lane) {
    if (compact_ && lane.key != nullptr && CompactLaneEntry::Fits(lane.order)) {
      compact_heap_.update(lane.heap_index, Compact(lane));
    } else if (!compact_ && !(kGrouping && grouped_) && lane.key != nullptr) {
      full_heap_.update(lane.heap_index, {lane.order, &lane});
    } else {
      RelinkOther(lane);
    }
  }
  // Relink for a group's stand-in, whose group place `place` changed or its order.
  void RelinkStandIn(GroupPresence& stand_in);
  // Whether `lane` is in the set at its `order` and group place.
  bool contains(const Lane& lane) const;
  bool compact() const { return compact_; }
  // Either grouped layout; the compact one.
  bool grouped() const { return grouped_; }
  bool compact_grouped() const { return compact_grouped_; }
  // The group stand-in whose members this set holds, or null (a type's, tier's, aged group's or
  // wait group's set).
  GroupPresence* presence() const { return presence_; }
  void set_presence(GroupPresence* presence) { presence_ = presence; }
  // Calls `f(lane)` for each lane, in order (from a sorted copy: not for hot paths).
  template <typename F>
  void ForEach(F f) const {
    std::vector<GroupedLaneEntry> sorted;
    if (compact_) {
      for (const CompactLaneEntry& e : compact_heap_) {
        sorted.push_back({e.Order().key, e.Order(), e.lane});
      }
    } else if (!grouped_) {
      for (const LaneEntry& e : full_heap_) sorted.push_back({e.order.key, e.order, e.lane});
    } else if (compact_grouped_) {
      for (const CompactGroupedLaneEntry& e : compact_grouped_heap_) sorted.push_back(e.Expand());
    } else {
      sorted.assign(grouped_heap_.begin(), grouped_heap_.end());
    }
    std::sort(sorted.begin(), sorted.end());
    for (const GroupedLaneEntry& e : sorted) f(e.lane);
  }
  // Whether the heap is in order and each lane knows its entry's position (CheckInvariants).
  bool valid() const {
    if (compact_) return compact_heap_.valid();
    if (!grouped_) return full_heap_.valid();
    return compact_grouped_ ? compact_grouped_heap_.valid() : grouped_heap_.valid();
  }

 private:
  static CompactLaneEntry Compact(Lane& lane) {
    return {lane.order.key.acc, lane.order.job.arrival, lane.order.job.seq, &lane};
  }
  static CompactGroupedLaneEntry CompactGrouped(const KeyPlace& group, Lane& lane) {
    return {group.acc, lane.order.key.acc, lane.order.job.arrival, lane.order.job.seq, &lane};
  }
  // insert and Relink for a lane the set's layout may not hold (a stand-in, a proxy, a place
  // the compact layout cannot hold) or in the grouped layout: the layout first, then the entry.
  [[gnu::noinline]] void InsertOther(Lane& lane);
  [[gnu::noinline]] void RelinkOther(Lane& lane);
  // Takes the layout `lane` needs, if the set's cannot hold it.
  void Fit(const Lane& lane);
  void MakeFull() {
    for (const CompactLaneEntry& c : compact_heap_) full_heap_.push(c.Expand());
    compact_heap_.clear();
    compact_ = false;
  }
  void MakeCompactGrouped() {
    for (const CompactLaneEntry& c : compact_heap_) {
      compact_grouped_heap_.push({c.acc, c.acc, c.arrival, c.seq, c.lane});
    }
    compact_heap_.clear();
    compact_ = false;
    grouped_ = true;
    compact_grouped_ = true;
  }
  void MakeGrouped() {
    if (compact_) MakeFull();
    for (const LaneEntry& e : full_heap_) grouped_heap_.push({e.order.key, e.order, e.lane});
    full_heap_.clear();
    for (const CompactGroupedLaneEntry& e : compact_grouped_heap_) grouped_heap_.push(e.Expand());
    compact_grouped_heap_.clear();
    grouped_ = true;
    compact_grouped_ = false;
  }

  // The layout, which only moves forward: compact; full (neither compact nor grouped); compact
  // grouped (grouped and compact_grouped_); grouped (its full form). Compact to full or compact
  // grouped, either to grouped.
  bool compact_ = true;
  bool grouped_ = false;
  bool compact_grouped_ = false;
  GroupPresence* presence_ = nullptr;
  LaneHeap<LaneEntry> full_heap_;
  LaneHeap<CompactLaneEntry> compact_heap_;
  LaneHeap<CompactGroupedLaneEntry> compact_grouped_heap_;
  LaneHeap<GroupedLaneEntry> grouped_heap_;
};

// The parked lanes of one resource whose home lanes are in one lane set.
struct WaitGroup {
  Resource* resource = nullptr;
  LaneSet lanes;   // its parked lanes, ordered as home lanes are
  Lane proxy;      // linked into the home lane set while `lanes` has one and the resource has room
  KeyPlace place;  // while the proxy is linked: the group place of `lanes`' first entry
};

// A group's stand-in in one lane set (its parent): the group's keys' lanes of that set are in
// `lanes`, not in the parent, and the stand-in is linked in the parent at the group's place and
// its best lane's order, exactly while `lanes` has a linked lane. So a charge to a group moves
// one entry per set its keys have lanes in, however many keys it has, and a charge to one of its
// keys moves that key's lanes among the group's keys only. A stand-in in a wait group's set has
// that group as its Lane::group, so that the group's proxy follows it. While its group is at its
// max_running, a stand-in with lanes is not linked; in a home set (no wait group) it is then
// held, as a key's lane is (TierState::held_lanes).
struct GroupPresence : Lane {
  GroupState* owner = nullptr;
  LaneSet lanes;          // its keys' lanes of the parent set
  KeyPlace place;         // while linked: its group's place
  std::int32_t refs = 0;  // lanes whose set is `lanes`; freed at 0
  GroupPresence* next_in_group = nullptr;
};

inline KeyPlace GroupPlaceOf(const Lane& lane) {
  if (lane.key != nullptr) return lane.order.key;
  if (lane.presence) return static_cast<const GroupPresence&>(lane).place;
  return lane.group->place;
}

inline void LaneSet::Fit(const Lane& lane) {
  if (grouped_ && !compact_grouped_) return;
  const KeyPlace group = GroupPlaceOf(lane);
  if (compact_grouped_) {
    if (!CompactGroupedLaneEntry::Fits(group, lane.order)) MakeGrouped();
  } else if (lane.key == nullptr && !(group == lane.order.key)) {
    if (compact_ && CompactGroupedLaneEntry::Fits(group, lane.order)) {
      MakeCompactGrouped();
    } else {
      MakeGrouped();
    }
  } else if (compact_ && !CompactLaneEntry::Fits(lane.order)) {
    MakeFull();
  }
}

inline void LaneSet::RelinkStandIn(GroupPresence& stand_in) {
  if (compact_grouped_ && CompactGroupedLaneEntry::Fits(stand_in.place, stand_in.order)) {
    compact_grouped_heap_.update(stand_in.heap_index, CompactGrouped(stand_in.place, stand_in));
  } else if (grouped_ && !compact_grouped_) {
    grouped_heap_.update(stand_in.heap_index, {stand_in.place, stand_in.order, &stand_in});
  } else {
    RelinkOther(stand_in);
  }
}

inline bool LaneSet::contains(const Lane& lane) const {
  if (lane.heap_index >= size()) return false;
  if (compact_grouped_) {
    const GroupedLaneEntry e = compact_grouped_heap_.at(lane.heap_index).Expand();
    return e.lane == &lane && e.order == lane.order && e.group == GroupPlaceOf(lane);
  }
  if (grouped_) {
    const GroupedLaneEntry& e = grouped_heap_.at(lane.heap_index);
    return e.lane == &lane && e.order == lane.order && e.group == GroupPlaceOf(lane);
  }
  // Outside the grouped layout a lane's group place is its key place.
  const bool key_place = lane.key != nullptr || GroupPlaceOf(lane) == lane.order.key;
  if (compact_) {
    const CompactLaneEntry& e = compact_heap_.at(lane.heap_index);
    return e.lane == &lane && e.Order() == lane.order && key_place;
  }
  const LaneEntry& e = full_heap_.at(lane.heap_index);
  return e.lane == &lane && e.order == lane.order && key_place;
}

struct GroupTierPresence;

// The presence of one key among the keys with pending jobs in one tier (for idle catch-up): in
// the tier's keys_by_acc, or for a key of a group in its group's presence there
// (PresenceSetOf).
struct TierPresence {
  SetHook tier_hook;
  KeyState* key = nullptr;
  TierState* tier = nullptr;
  std::int64_t pending = 0;
  TierPresence* next_in_key = nullptr;  // the key's next presence
  GroupTierPresence* group = nullptr;   // its group's presence in the tier; null: no group
};

// What a caller set for one key (SetKeyWeight, SetKeyLimits). Kept for good: it is configuration,
// as many entries as the caller made, not one per key seen.
struct GroupSettings;

struct KeySettings {
  double weight = 1;
  KeyLimits limits;
  bool has_limits = false;         // else the options' default_key_limits apply
  bool paused = false;             // PauseKey: none of its jobs is admitted (kKeyPaused), none ages
  GroupSettings* group = nullptr;  // SetKeyGroup: the group it belongs to; null: a group of its own
  bool group_set = false;          // SetKeyGroup named it (or none): the runtime's rule does not
  bool group_by_rule = false;      // `group` is the runtime's rule's (SetKeyGroupByRule)
};

// What a caller set for one group of keys (SetKeyGroup, SetGroupWeight): kept for good, as key
// settings are.
struct GroupSettings {
  const std::string* name = nullptr;  // the key of its map entry
  double weight = 1;
  GroupLimits limits;           // SetGroupLimits
  bool has_limits = false;      // else the rule's default_group_limits apply
  GroupState* state = nullptr;  // while the group is tracked (GroupTable)
};

// One group of keys (a tenant), tracked while one of its keys has a job pending or running and
// then until it has been idle for key_ttl, as a key is. Its place in the order is its
// accumulated cost (what its keys were charged, each charge divided by the group's weight);
// it stands in each lane set its keys have lanes in as one entry (a GroupPresence).
struct GroupState {
  ListHook idle_hook;  // in the group table's idle list while nothing of it is pending or running
  GroupSettings* settings = nullptr;
  double acc = 0;
  double idle_since = 0;
  std::int32_t pending = 0;            // its keys' pending jobs
  Usage running;                       // its keys' running jobs
  GroupPresence* presences = nullptr;  // one per lane set its keys have lanes in
  GroupTierPresence* tiers = nullptr;  // one per tier its keys have pending jobs in; idle catch-up
};

// One fairness key. Kept small (72 bytes, plus its name as the map's key; the allocator hands out
// the same block for 64 and 72): a server may remember a million idle clients. Lanes and
// presences are owned through these lists and freed as soon as they are empty, so an idle key
// holds nothing else. Counts fit 32 bits: 2^31 pending jobs would need hundreds of gigabytes.
struct KeyState {
  ListHook idle_hook;                 // in the core's idle list while nothing is pending or running
  const std::string* name = nullptr;  // the key of its map entry
  double acc = 0;
  double idle_since = 0;
  std::int32_t pending = 0;
  Usage running;          // the key limit's usage: its running jobs (the limit: its settings')
  Lane* lanes = nullptr;  // one per type it has pending jobs of
  TierPresence* tiers = nullptr;  // one per tier it has pending jobs in; only with idle catch-up
  const KeySettings* settings = nullptr;  // null: weight 1, the default limits
};

static_assert(sizeof(KeyState) == 72, "a key's size is stated above and in src/core/README.md");

struct PresenceOrder {
  bool operator()(const TierPresence& a, const TierPresence& b) const {
    return a.key->acc < b.key->acc;
  }
};
using PresenceSet =
    bi::multiset<TierPresence, bi::member_hook<TierPresence, SetHook, &TierPresence::tier_hook>,
                 bi::compare<PresenceOrder>>;

// The presence of one group among the keys without a group and the groups with pending jobs in
// one tier (for idle catch-up), ordered by its cost in TierState::groups_by_acc; its keys'
// presences in the tier are in `keys`, ordered by theirs. Freed when `keys` empties.
struct GroupTierPresence {
  SetHook tier_hook;  // in TierState::groups_by_acc
  GroupState* group = nullptr;
  TierState* tier = nullptr;
  PresenceSet keys;
  GroupTierPresence* next_in_group = nullptr;  // the group's next presence
};

struct GroupPresenceOrder {
  bool operator()(const GroupTierPresence& a, const GroupTierPresence& b) const {
    return a.group->acc < b.group->acc;
  }
};
using GroupPresenceSet =
    bi::multiset<GroupTierPresence,
                 bi::member_hook<GroupTierPresence, SetHook, &GroupTierPresence::tier_hook>,
                 bi::compare<GroupPresenceOrder>>;

using IdleKeyList = bi::list<KeyState, bi::member_hook<KeyState, ListHook, &KeyState::idle_hook>>;

struct WorkerState;

struct TypeState {
  std::string name;
  JobTypeConfig config;
  std::uint32_t index = 0;
  std::uint32_t conflict_group = 0;  // 0: none
  TierState* tier = nullptr;
  Constraint running;  // the type cap: its running jobs, against its max_concurrency
  TokenBucket rate;    // its rate limit (JobTypeConfig::rate_limit): a token per admission
  std::int64_t pending = 0;
  bool paused = false;  // PauseType: none of its jobs is admitted (Blocker::kTypePaused), none ages
  LaneSet lanes;
  // Where its lanes in its own tier are: `lanes`, or its tier's `shared` set while it shares
  // (TypeTable::Shares: only a type whose own cap cannot hold a job back in a decision).
  LaneSet* home = &lanes;
  JoinPoints join_points;  // none unless it coalesces
  // With workers: those that serve it, most specialised first (fewest types served, then the
  // one added first), and how many of them have room for one of its jobs.
  std::vector<WorkerState*> workers;
  std::int32_t workers_with_room = 0;
  // Since when it has had pending jobs and none admitted: the later of its last admission and
  // the enqueue that found it with none pending (RuleOptions::sole_worker_reserve_after).
  double starved_since = 0;
  // With JobTypeConfig::shedding: whether its queue stands; null without.
  std::unique_ptr<ShedWatch> shed;
};

// A declared worker (fairgate/worker.h).
struct WorkerState {
  std::string name;
  WorkerConfig config;
  std::uint16_t index = 0;  // in the core's worker table; Job::worker is index + 1
  std::uint64_t added = 0;  // when it was added, in AddWorker calls: the tie rule of assignment
  Constraint slots;         // the worker's slots: its running jobs', against config.slots
  std::vector<TypeState*> served;              // the registered types it serves
  absl::flat_hash_set<std::uint32_t> running;  // the job slots of its running jobs
  // In a decision only: a type it alone serves starves (the reservation of RuleOptions::
  // sole_worker_reserve_after): no other type's job goes on it.
  bool reserved = false;
  TypeState* claimant = nullptr;  // which of them its room goes to, and that type's first job
  Job* claimant_job = nullptr;
};

// The lanes of one lower-tier type whose jobs aged into a tier.
struct AgedGroup {
  TypeState* type = nullptr;
  LaneSet lanes;
};

struct TierState {
  int priority = 0;             // also the tier's cap, in slots
  Constraint slots;             // the tier cap: the slots its running jobs take, against priority
  std::int64_t pending = 0;     // its own jobs
  std::int64_t aged_in = 0;     // jobs of lower tiers that aged into it
  std::int64_t held_lanes = 0;  // lanes here of keys at their max_running, with ready jobs
  std::vector<TypeState*> types;
  std::vector<std::unique_ptr<AgedGroup>> aged;  // one per lower type that aged in, ever
  // With idle catch-up: the keys without a group, and the groups, with pending jobs here.
  PresenceSet keys_by_acc;
  GroupPresenceSet groups_by_acc;
  // The lanes of the types that share (TypeState::home): one per key for all of them, so that a
  // charge moves one lane here instead of one per type.
  LaneSet shared;
};

// The set a key's presence in a tier is in.
inline PresenceSet& PresenceSetOf(TierPresence& presence) {
  return presence.group != nullptr ? presence.group->keys : presence.tier->keys_by_acc;
}

// One (conflict group, job id): at most `limit` of its jobs run at a time.
struct Resource {
  const IndexedName* name = nullptr;  // the map's own key, for erasure
  // One per lane set that jobs parked on it came from, created as needed, kept while it lives.
  std::vector<std::unique_ptr<WaitGroup>> groups;
  std::int64_t refs = 0;  // pending + running jobs that name it
  Constraint running{1};  // the conflict limit: its running jobs, against the group's limit
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_QUEUE_NODES_H_
