// The figures that compare two policies on one trace (docs/simulator.md, "Two policies side by
// side"): waits per type, per group of keys and of on-demand jobs, utilisation, fairness across
// keys, jobs lost.
#ifndef FAIRGATE_SIM_POLICY_SUMMARY_H_
#define FAIRGATE_SIM_POLICY_SUMMARY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "sim/simulator.h"
#include "sim/trace.h"

namespace fairgate::sim {

struct Waits {
  std::size_t jobs = 0;
  std::size_t waiting = 0;  // never admitted by the end: counted with the wait they had then
  double mean = 0, worst = 0;
};

struct PolicySummary {
  double end = 0;                                    // the last event, or `until`
  std::vector<std::pair<std::string, Waits>> types;  // in the trace's order
  // Per group of keys the trace names (keys.*.group), in name order: its keys' jobs' waits.
  std::vector<std::pair<std::string, Waits>> groups;
  Waits on_demand;  // the `sync` jobs
  // Slot-seconds of running jobs over the slot-seconds the workers (or the capacity) offered.
  double utilisation = 0;
  // Fairness across keys: the longest mean wait of a *light* key, one that queued fewer than half
  // as many jobs as the heaviest key did (none: 0). A fair rule serves a key that asks for less
  // than its share at once, whatever a heavy key queued; first come, first served makes it wait
  // behind the heavy key's backlog.
  double light_key_wait = 0;
  bool has_light_keys = false;
  std::size_t lost = 0;
  std::size_t shed = 0;  // refused by their types' shedding (JobTypeConfig::shedding)
  // With a machine (Trace::cores): the jobs done by the end, per second of it, and how much
  // slower than their duration they ran (run time / duration, of the jobs done with a duration
  // above 0; nearest rank): what a rule that moves the cap trades.
  bool machine = false;
  std::size_t done = 0;
  double done_per_second = 0;
  double slowdown_p50 = 0, slowdown_p99 = 0;
};

PolicySummary SummarizePolicy(const Trace& trace, const SimResult& result);
// The summary as a few lines of text, for `fairgate sim --summary`.
std::string FormatSummary(const PolicySummary& summary);

}  // namespace fairgate::sim

#endif  // FAIRGATE_SIM_POLICY_SUMMARY_H_
