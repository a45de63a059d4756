// The report of `fairgate sim TRACE --report DIR`: what a capacity planner looks at instead of
// reading events.
//
// Summarize (report_summary.cc) computes, per fairness key (in order of first appearance) and per
// group of keys the trace names: jobs,
// jobs admitted, the mean, p50, p99 and worst wait of admitted jobs, and the mean slowdown
// (wait + run) / run over admitted jobs with a run time above zero; per job type the same waits
// and what TypeReport says; over the keys, Jain's fairness index of their mean slowdowns,
// (sum x)^2 / (n * sum x^2), which is 1 when every key is slowed alike and 1/n when one key takes
// all the delay; and the utilization, busy slot-seconds / (capacity * span), span being from the
// first arrival to the last completion. Percentiles are nearest-rank.
//
// RenderHtml draws one self-contained page of a bounded height, whatever the capacity and the
// number of keys: the summary, a table of the keys (at most kMaxKeys: with more, those whose p99
// wait is highest), a table of the types (with the coalesced requests' end-to-end time when some
// joined a run), a timeline of the slots over time and the waits of each key shown in the table
// (one dot per job, ticks at p50 and p99), as inline SVG. The timeline has a row for each slot
// (or worker slot) that ran something, at most kMaxRows: with more, each row stands for a group
// of slots, each slot a thin lane in it. Each run is a bar coloured by its key, with its type's
// colour along its foot and its type's name on it when it fits (and how many requests joined it);
// a red outline marks a job that waited on a busy conflict resource, a dashed outline one that
// aged into a higher tier, a dotted one a job lost with its worker.
#ifndef FAIRGATE_SIM_REPORT_H_
#define FAIRGATE_SIM_REPORT_H_

#include <string>
#include <vector>

#include "fairgate/status.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace fairgate::sim {

struct KeyReport {
  std::string key;
  std::size_t jobs = 0, admitted = 0;
  double mean_wait = 0, p50_wait = 0, p99_wait = 0, worst_wait = 0;
  double mean_slowdown = 0;   // 0 when no admitted job ran for a positive time
  std::vector<double> waits;  // of the admitted jobs, ascending
};

// Per job type (in the trace's order): its jobs' waits as for a key, the mean run time of the
// runs it queued, and, for a coalescing type, the requests that joined another's run and how long
// they took from arrival to that run's end.
struct TypeReport {
  std::string type;
  int priority = 0;
  std::size_t jobs = 0, admitted = 0;
  double mean_wait = 0, p50_wait = 0, p99_wait = 0, worst_wait = 0;
  double mean_run = 0;     // of its runs that completed (not the requests that joined one)
  std::size_t joined = 0;  // requests that joined another's run
  double joined_p50_end_to_end = 0, joined_p99_end_to_end = 0;  // of those whose run completed
};

// Per group of keys the trace names (keys.*.group; in name order): its keys that had jobs, and the
// waits of their jobs as for a key.
struct GroupReport {
  std::string group;
  std::size_t keys = 0, jobs = 0, admitted = 0;
  double mean_wait = 0, p50_wait = 0, p99_wait = 0, worst_wait = 0;
};

struct ReportSummary {
  std::vector<KeyReport> keys;
  std::vector<GroupReport> groups;  // empty when the trace puts no key in a group
  std::vector<TypeReport> types;
  bool coalesced = false;  // some request joined another's run
  double jain_index = 1;
  double utilization = 0;
  double span = 0;
};

ReportSummary Summarize(const Trace& trace, const SimResult& result);

// The most rows the timeline has, and the most keys the key table and the waits show.
inline constexpr std::size_t kMaxRows = 40;
inline constexpr std::size_t kMaxKeys = 20;

std::string RenderHtml(const std::string& title, const Trace& trace, const SimResult& result,
                       const ReportSummary& summary);

// Writes DIR/index.html (creating DIR); InvalidArgument naming the path when it cannot.
Status WriteReport(const std::string& dir, const std::string& title, const Trace& trace,
                   const SimResult& result);

}  // namespace fairgate::sim

#endif  // FAIRGATE_SIM_REPORT_H_
