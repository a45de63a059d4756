// fairgate/snapshot.h: a point-in-time picture of a scheduler's state, for tests, debugging and
// the `/debug` pages of a server.
//
// A snapshot is a copy: it does not change as the scheduler moves on, and costs
// O(types + tiers) to take.
#ifndef FAIRGATE_SNAPSHOT_H_
#define FAIRGATE_SNAPSHOT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fairgate {

struct TypeSnapshot {
  std::string name;
  int priority = 0;
  int max_concurrency = 0;
  int running = 0;
  std::int64_t pending = 0;
};

struct TierSnapshot {
  int priority = 0;  // also the tier's cap
  int running = 0;
  std::int64_t pending = 0;  // its own jobs, wherever aging has placed them
  std::int64_t aged_in = 0;  // pending jobs of lower tiers that aged into this one
};

struct Snapshot {
  int max_concurrency = 0;
  int running = 0;
  std::int64_t pending = 0;
  std::vector<TierSnapshot> tiers;  // highest priority first
  std::vector<TypeSnapshot> types;  // in registration order
  std::size_t keys_tracked = 0;
  std::size_t estimates_tracked = 0;
};

}  // namespace fairgate

#endif  // FAIRGATE_SNAPSHOT_H_
