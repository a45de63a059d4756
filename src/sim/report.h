// The report of `fairgate sim TRACE --report DIR`: what a capacity planner looks at instead of
// reading events.
//
// Summarize computes, per fairness key (in order of first appearance): jobs, jobs admitted, the
// mean, p50, p99 and worst wait of admitted jobs, and the mean slowdown (wait + run) / run over
// admitted jobs with a run time above zero; over the keys, Jain's fairness index of their mean
// slowdowns, (sum x)^2 / (n * sum x^2), which is 1 when every key is slowed alike and 1/n when one
// key takes all the delay; and the utilization, busy slot-seconds / (capacity * span), span being
// from the first arrival to the last completion. Percentiles are nearest-rank.
//
// RenderHtml draws one self-contained page: the summary table, a timeline of the slots over time
// (one row per slot, each job a bar coloured by its key; a red outline marks a job that waited on
// a busy conflict resource, a dashed outline one that aged into a higher tier) and the waits of
// each key (one dot per job, ticks at p50 and p99), as inline SVG.
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

struct ReportSummary {
  std::vector<KeyReport> keys;
  double jain_index = 1;
  double utilization = 0;
  double span = 0;
};

ReportSummary Summarize(const Trace& trace, const SimResult& result);

std::string RenderHtml(const std::string& title, const Trace& trace, const SimResult& result,
                       const ReportSummary& summary);

// Writes DIR/index.html (creating DIR); InvalidArgument naming the path when it cannot.
Status WriteReport(const std::string& dir, const std::string& title, const Trace& trace,
                   const SimResult& result);

}  // namespace fairgate::sim

#endif  // FAIRGATE_SIM_REPORT_H_
