#include "sim/sim_command.h"

#include <fstream>

#include "sim/simulator.h"
#include "sim/trace.h"

namespace fairgate::sim {

int RunSimCommand(const std::vector<std::string>& traces,
                  const std::optional<std::string>& events_path, std::ostream& out,
                  std::ostream& err) {
  if (traces.empty()) {
    err << "fairgate sim: no trace given\n";
    return 2;
  }
  if (events_path && traces.size() != 1) {
    err << "fairgate sim: --events takes exactly one trace, got " << traces.size() << "\n";
    return 2;
  }
  for (const std::string& path : traces) {
    StatusOr<Trace> trace = LoadTrace(path);
    if (!trace.ok()) {
      err << "fairgate sim: " << trace.status().message() << "\n";
      return 2;
    }
    StatusOr<SimResult> result = Simulate(*trace);
    if (!result.ok()) {
      err << "fairgate sim: " << path << ": " << result.status().message() << "\n";
      return 2;
    }
    out << path << " (" << trace->mode << " mode, " << trace->jobs.size() << " jobs, capacity "
        << trace->options.max_concurrency << ")\n"
        << FormatKeyTable(*trace, *result) << "\n";
    if (events_path) {
      std::ofstream file;
      std::ostream* sink = &out;
      if (*events_path != "-") {
        file.open(*events_path, std::ios::trunc);
        if (!file) {
          err << "fairgate sim: " << *events_path << ": cannot open for writing\n";
          return 2;
        }
        sink = &file;
      }
      for (const SimEvent& event : result->events) *sink << FormatEvent(*trace, event) << "\n";
      sink->flush();
      if (!*sink) {
        err << "fairgate sim: " << *events_path << ": write failed\n";
        return 2;
      }
    }
  }
  return 0;
}

}  // namespace fairgate::sim
