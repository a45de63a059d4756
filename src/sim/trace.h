// Trace: a workload for the simulator, read from the JSON format of DESIGN.md.
//
// ParseTrace checks everything before the simulator runs: a missing or wrong-typed field, an
// unknown field, an unknown job type, a negative or non-finite number, a type given twice with
// different configs. Its error is one line naming the file, the job index (or type) and the field,
// as InvalidArgument.
#ifndef FAIRGATE_SIM_TRACE_H_
#define FAIRGATE_SIM_TRACE_H_

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fairgate/group_limits.h"
#include "fairgate/job_type.h"
#include "fairgate/key_limits.h"
#include "fairgate/options.h"
#include "fairgate/status.h"
#include "fairgate/worker.h"

namespace fairgate::sim {

struct TraceJob {
  std::string type;
  std::string id;
  std::string key;
  double arrival = 0;
  double duration = 0;
  std::optional<double> cost;  // explicit charge; else the learned estimate
  // A caller that waits for the job (RunSync) rather than a Submit: with a coalescing type it
  // also joins a running job of its id, and runs the job itself when it is the first such caller.
  bool sync = false;
};

// What the trace sets for one fairness key (SetKeyWeight, SetKeyLimits, SetKeyGroup).
struct TraceKey {
  std::optional<double> weight;
  std::optional<KeyLimits> limits;
  std::optional<std::string> group;  // non-empty
};

// What the trace sets for one group of keys (SetGroupWeight, SetGroupLimits).
struct TraceGroup {
  std::optional<double> weight;
  std::optional<GroupLimits> limits;
};

// A pause of one job type or one fairness key (PauseType, PauseKey) from `from` until `until`
// (for good without it).
struct TracePause {
  std::optional<std::string> type;  // exactly one of type and key
  std::optional<std::string> key;
  double from = 0;
  std::optional<double> until;  // >= from
};

// A periodic job (Scheduler::SubmitEvery): its first run arrives at `first`, each later one
// `interval` after the previous run ended (done or expired), so that runs never overlap; `runs`
// runs in all. Each run is a Submit of (type, id) by `key` that lasts `duration`.
struct TracePeriodic {
  std::string type;
  std::string id;
  std::string key;
  double interval = 0;  // > 0
  double duration = 0;
  double first = 0;
  int runs = 1;                // >= 1
  std::optional<double> cost;  // as TraceJob::cost
};

// A worker (fairgate/worker.h) present from `from` (AddWorker) until `until` (RemoveWorker:
// the jobs running on it then are lost), for good without it.
struct TraceWorker {
  std::string name;
  WorkerConfig config;
  double from = 0;
  std::optional<double> until;  // > from
};

struct Trace {
  std::string mode;  // "seed" or "default"
  SchedulerOptions options;
  std::vector<std::pair<std::string, JobTypeConfig>> types;  // in file order
  std::vector<std::pair<std::string, TraceKey>> keys;        // in name order
  std::vector<std::pair<std::string, TraceGroup>> groups;    // in name order
  std::vector<TraceJob> jobs;                                // in file order
  std::vector<TracePause> pauses;                            // in file order
  std::vector<TracePeriodic> periodic;                       // in file order
  std::vector<TraceWorker> workers;                          // in file order
  std::optional<double> until;                               // nothing after this instant happens
  // A machine with this many cores: a job runs its duration times max(1, slots in use / cores),
  // the slots in use counted when it is admitted (it and everything running then).
  std::optional<int> cores;
  // And with this much memory (any unit): a running job of a type with memory m (type_memory)
  // holds m of it, and a job runs its duration times the larger of the cores' factor and
  // max(1, memory in use / memory), counted likewise (a machine that pages).
  std::optional<double> memory;
  std::map<std::string, double> type_memory;  // the types' "memory", where given
};

// Parses `text`; `file` names it in error messages.
StatusOr<Trace> ParseTrace(std::string_view text, std::string_view file);

// The group the trace puts `key` in (keys.*.group), or null.
const std::string* GroupOf(const Trace& trace, std::string_view key);

// Reads and parses the file at `path`.
StatusOr<Trace> LoadTrace(const std::string& path);

// The indexes of the trace's jobs in order of arrival (ties in file order): how every policy
// replays them.
std::vector<std::size_t> JobsByArrival(const Trace& trace);

}  // namespace fairgate::sim

#endif  // FAIRGATE_SIM_TRACE_H_
