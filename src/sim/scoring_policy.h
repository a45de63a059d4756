// The scoring policy of seed 004 (../shared/seeds/004-affinity-scoring-anti-starvation.txt), as a
// second policy of the simulator, to compare with fairgate's rule on the same traces
// (docs/simulator.md, "Two policies side by side").
//
// At each decision, among the pending jobs that some worker with room serves (and that fit the
// global cap), the one with the highest score goes, onto the most specialised worker with room
// (fewest types served, then listed first). The score, in the seed's constants:
//
//   1024 x priority + 16 x age + 500 / compatible free slots + (sync ? 4096 + 32 x age : 0)
//
// where priority is the type's `priority`, age the seconds since the job arrived, compatible free
// slots the free slots of the workers that serve its type, and a `sync` job is an on-demand one
// (a caller waits). Ties go to the earlier arrival, then file order. That is all it knows: it has
// no fairness keys, no tier or type caps, no conflict groups, no learned costs and no coalescing
// (each job is its own); a worker removed loses its running jobs, as in fairgate. Without workers
// in the trace, one worker of `capacity` slots serves every type.
#ifndef FAIRGATE_SIM_SCORING_POLICY_H_
#define FAIRGATE_SIM_SCORING_POLICY_H_

#include "fairgate/status.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace fairgate::sim {

// Replays `trace` under seed 004's scoring. The events and outcomes are those of Simulate, so
// the same tables and reports apply; there is no evidence (no order tuple to record).
// InvalidArgument for what the policy cannot run: periodic jobs, pauses, adaptive capacity.
StatusOr<SimResult> SimulateScoring(const Trace& trace);

}  // namespace fairgate::sim

#endif  // FAIRGATE_SIM_SCORING_POLICY_H_
