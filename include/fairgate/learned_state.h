// fairgate/learned_state.h: what a scheduler has learned and keeps across restarts through its
// store (fairgate/store.h): the estimates of (type, id) and the fairness keys' accumulated costs,
// as records. The core hands them out and takes them back; a store keeps them.
//
// Thread safety: plain value types; nothing blocks, owns a resource or needs shutting down. Times
// are Unix seconds, as a store keeps them.
#ifndef FAIRGATE_LEARNED_STATE_H_
#define FAIRGATE_LEARNED_STATE_H_

#include <string>

namespace fairgate {

// A learned estimate of (type, id) and when it was last used (Unix seconds).
struct SavedEstimate {
  std::string type, id;
  double seconds = 0;
  double last_used = 0;
  friend bool operator==(const SavedEstimate&, const SavedEstimate&) = default;
};

// A fairness key's accumulated cost, and since when it has had nothing pending or running (Unix
// seconds; the flush time for a key that was busy).
struct SavedKey {
  std::string key;
  double accumulated_cost = 0;
  double idle_since = 0;
  friend bool operator==(const SavedKey&, const SavedKey&) = default;
};

}  // namespace fairgate

#endif  // FAIRGATE_LEARNED_STATE_H_
