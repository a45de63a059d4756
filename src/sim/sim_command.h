// RunSimCommand: `fairgate sim TRACE... [--events OUT.jsonl]`, separated from main() so that the
// tests run it in-process.
//
// For each trace it prints a heading and the per-key table of FormatKeyTable to `out`. With
// `events_path` (one trace only) it writes the events as JSON lines there ("-": to `out`).
// Returns the process exit status: 0 on success, 2 on bad input, with one line on `err` naming
// the file and, for a trace error, the job index and field.
#ifndef FAIRGATE_SIM_SIM_COMMAND_H_
#define FAIRGATE_SIM_SIM_COMMAND_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace fairgate::sim {

int RunSimCommand(const std::vector<std::string>& traces,
                  const std::optional<std::string>& events_path, std::ostream& out,
                  std::ostream& err);

}  // namespace fairgate::sim

#endif  // FAIRGATE_SIM_SIM_COMMAND_H_
