// RunSimCommand: `fairgate sim TRACE... [--events OUT.jsonl] [--evidence OUT.jsonl]
// [--report DIR]`, separated from main() so that the tests run it in-process.
//
// For each trace it prints a heading and the per-key table of FormatKeyTable to `out`. With
// `events` (one trace only) it writes the events as JSON lines there ("-": to `out`); with
// `evidence` (one trace only) the evidence record of each admission (fairgate/evidence.h), the
// same records a scheduler's evidence sink gets; with `report` (one trace only) the HTML report
// of sim/report.h into that directory.
// Returns the process exit status: 0 on success, 2 on bad input, with one line on `err` naming
// the file and, for a trace error, the job index and field.
#ifndef FAIRGATE_SIM_SIM_COMMAND_H_
#define FAIRGATE_SIM_SIM_COMMAND_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace fairgate::sim {

struct SimOutputs {
  std::optional<std::string> events;
  std::optional<std::string> evidence;
  std::optional<std::string> report;
  // "fairgate" (the admission core) or "seed004" (seed 004's scoring, sim/scoring_policy.h).
  std::string policy = "fairgate";
  bool summary = false;  // also print the figures of sim/policy_summary.h
};

int RunSimCommand(const std::vector<std::string>& traces, const SimOutputs& outputs,
                  std::ostream& out, std::ostream& err);

// The same with only `--events`.
int RunSimCommand(const std::vector<std::string>& traces,
                  const std::optional<std::string>& events_path, std::ostream& out,
                  std::ostream& err);

}  // namespace fairgate::sim

#endif  // FAIRGATE_SIM_SIM_COMMAND_H_
