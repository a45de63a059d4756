// The nodes AdmissionCore links together. Internal to src/core.
//
// The pending jobs of a tier are grouped by type, then by fairness key:
//
//   TierState ── TypeState ── lanes: one Lane per key with ready jobs of that type, ordered by
//                                    (key's accumulated cost, head job's arrival, head job's seq)
//                             Lane ── ready: that key's jobs of that type, by (arrival, seq)
//
// The first job in the order (acc, arrival, seq) of one type is the head of its first lane, and
// the first of a tier is the least of its types' firsts, so NextAdmission touches O(types) nodes.
// A job whose conflict resource is busy is parked on the Resource and returns to its lane when the
// resource frees. A key's accumulated cost is part of its lanes' sort key, so changing it unlinks
// and relinks each of the key's lanes (one per type it has ready jobs of).
#ifndef FAIRGATE_CORE_QUEUE_NODES_H_
#define FAIRGATE_CORE_QUEUE_NODES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "boost/intrusive/list.hpp"
#include "boost/intrusive/set.hpp"
#include "core/indexed_name.h"
#include "fairgate/job_type.h"

namespace fairgate::core {

namespace bi = boost::intrusive;
using SetHook = bi::set_member_hook<bi::link_mode<bi::safe_link>>;
using ListHook = bi::list_member_hook<bi::link_mode<bi::safe_link>>;

struct KeyState;
struct Lane;
struct Resource;
struct TierState;
struct TypeState;

enum class JobState : std::uint8_t { kFree, kReady, kParked, kRunning };

struct Job {
  SetHook lane_hook;     // in Lane::ready while kReady
  ListHook wait_hook;    // in Resource::waiters while kParked
  Lane* lane = nullptr;  // while kReady or kParked
  KeyState* key = nullptr;
  TypeState* type = nullptr;
  Resource* resource = nullptr;  // null when the type has no conflict group
  std::string id;
  double arrival = 0;
  std::uint64_t seq = 0;
  double explicit_cost = 0;
  double charge = 0;       // while kRunning
  std::uint32_t slot = 0;  // index in the core's job table
  std::uint32_t generation = 0;
  JobState state = JobState::kFree;
  bool has_explicit_cost = false;
};

struct ByArrival {
  bool operator()(const Job& a, const Job& b) const {
    if (a.arrival != b.arrival) return a.arrival < b.arrival;
    return a.seq < b.seq;
  }
};
using ReadyJobs =
    bi::set<Job, bi::member_hook<Job, SetHook, &Job::lane_hook>, bi::compare<ByArrival>>;
using WaitList = bi::list<Job, bi::member_hook<Job, ListHook, &Job::wait_hook>>;

// The jobs of one key and one type.
struct Lane {
  SetHook type_hook;  // in TypeState::lanes while `ready` is not empty
  KeyState* key = nullptr;
  TypeState* type = nullptr;
  ReadyJobs ready;
  std::int64_t pending = 0;  // ready + parked
};

// The presence of one key among the keys with pending jobs in one tier (for idle catch-up).
struct TierPresence {
  SetHook tier_hook;  // in TierState::keys_by_acc
  KeyState* key = nullptr;
  TierState* tier = nullptr;
  std::int64_t pending = 0;
};

struct KeyState {
  ListHook idle_hook;  // in the core's idle list while nothing is pending or running
  std::string name;
  double acc = 0;
  double idle_since = 0;
  std::int64_t pending = 0;
  std::int64_t running = 0;
  std::vector<std::unique_ptr<Lane>> lanes;          // one per type with pending jobs
  std::vector<std::unique_ptr<TierPresence>> tiers;  // only with idle catch-up
};

struct LaneOrder {
  bool operator()(const Lane& a, const Lane& b) const {
    if (a.key->acc != b.key->acc) return a.key->acc < b.key->acc;
    return ByArrival{}(*a.ready.begin(), *b.ready.begin());
  }
};
using LaneSet =
    bi::set<Lane, bi::member_hook<Lane, SetHook, &Lane::type_hook>, bi::compare<LaneOrder>>;

struct PresenceOrder {
  bool operator()(const TierPresence& a, const TierPresence& b) const {
    return a.key->acc < b.key->acc;
  }
};
using PresenceSet =
    bi::multiset<TierPresence, bi::member_hook<TierPresence, SetHook, &TierPresence::tier_hook>,
                 bi::compare<PresenceOrder>>;

using IdleKeyList = bi::list<KeyState, bi::member_hook<KeyState, ListHook, &KeyState::idle_hook>>;

struct TypeState {
  std::string name;
  JobTypeConfig config;
  std::uint32_t index = 0;
  std::uint32_t conflict_group = 0;  // 0: none
  TierState* tier = nullptr;
  int running = 0;
  std::int64_t pending = 0;
  LaneSet lanes;
};

struct TierState {
  int priority = 0;
  int running = 0;
  std::int64_t pending = 0;
  std::vector<TypeState*> types;
  PresenceSet keys_by_acc;  // keys with pending jobs here; only with idle catch-up
};

// One (conflict group, job id): at most one of its jobs runs at a time.
struct Resource {
  const IndexedName* name = nullptr;  // the map's own key, for erasure
  WaitList waiters;                   // jobs that reached the front while it was busy, parked
  std::int64_t refs = 0;              // pending + running jobs that name it
  bool busy = false;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_QUEUE_NODES_H_
