// core::LatencyRule: the rule of fairgate/latency_capacity.h, a deterministic function of the run
// times it is given and the instants it is applied at. The runtime (latency_controller.h) and the
// simulator apply it; neither reads a clock for it but its own.
//
// Thread safety: none; its caller serialises it.
#ifndef FAIRGATE_CORE_LATENCY_RULE_H_
#define FAIRGATE_CORE_LATENCY_RULE_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "fairgate/latency_capacity.h"

namespace fairgate::core {

// One completed job the rule learns from, in the caller's clock (seconds).
struct RunSample {
  std::string type;
  double start = 0;     // when it was admitted
  double run_time = 0;  // from admission to completion, >= 0
};

class LatencyRule {
 public:
  // `rule` valid under `max_concurrency` (ValidateLatencyCapacity).
  LatencyRule(const LatencyCapacity& rule, int max_concurrency);

  // The cap after the interval that ends at `now`, from `current` (the cap in force), with
  // `work_waiting` whether jobs wait for admission and `runs` the jobs completed in the interval
  // (in any order). `now` does not go back between calls.
  int Next(double now, int current, bool work_waiting, const std::vector<RunSample>& runs);

  // The gradient of the last interval that had one (1 before any).
  double gradient() const { return gradient_; }
  // Whether the baselines are being re-measured (the cap held low).
  bool remeasuring() const { return phase_ == Phase::kRemeasuring; }

 private:
  enum class Phase { kStarting, kSteady, kRemeasuring };
  // The cap `next` from `current`, remembering `now` as the instant of the change.
  int ChangeTo(double now, int current, int next);

  LatencyCapacity rule_;
  int max_concurrency_;
  Phase phase_ = Phase::kStarting;
  absl::flat_hash_map<std::string, double> baseline_;  // per type
  double changed_at_;                                  // runs admitted before it are not counted
  int intervals_since_remeasure_ = 0;
  // Re-measuring: the phase and the cap to return to, and the intervals waited so far.
  Phase phase_before_ = Phase::kStarting;
  int saved_cap_ = 0;
  int remeasure_waited_ = 0;
  // Probes (after the first slowdown): intervals to wait before the next, the spacing after a
  // failed one, and whether the last change was a probe not yet judged.
  int probe_in_ = 1;
  int probe_spacing_ = 1;
  bool probing_ = false;
  double gradient_ = 1;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_LATENCY_RULE_H_
