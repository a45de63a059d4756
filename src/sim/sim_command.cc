#include "sim/sim_command.h"

#include <fstream>

#include "sim/policy_summary.h"
#include "sim/report.h"
#include "sim/scoring_policy.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace fairgate::sim {

namespace {

// Writes one line per item to `path` ("-": `out`); false (with a line on `err`) on failure.
template <typename Items, typename Format>
bool WriteLines(const std::string& path, const Items& items, Format format, std::ostream& out,
                std::ostream& err) {
  std::ofstream file;
  std::ostream* sink = &out;
  if (path != "-") {
    file.open(path, std::ios::trunc);
    if (!file) {
      err << "fairgate sim: " << path << ": cannot open for writing\n";
      return false;
    }
    sink = &file;
  }
  for (const auto& item : items) *sink << format(item) << "\n";
  sink->flush();
  if (!*sink) {
    err << "fairgate sim: " << path << ": write failed\n";
    return false;
  }
  return true;
}

}  // namespace

int RunSimCommand(const std::vector<std::string>& traces, const SimOutputs& outputs,
                  std::ostream& out, std::ostream& err) {
  if (traces.empty()) {
    err << "fairgate sim: no trace given\n";
    return 2;
  }
  for (const auto& [name, given] : {std::pair{"--events", outputs.events.has_value()},
                                    std::pair{"--evidence", outputs.evidence.has_value()},
                                    std::pair{"--report", outputs.report.has_value()}}) {
    if (given && traces.size() != 1) {
      err << "fairgate sim: " << name << " takes exactly one trace, got " << traces.size() << "\n";
      return 2;
    }
  }
  if (outputs.policy != "fairgate" && outputs.policy != "seed004") {
    err << "fairgate sim: --policy must be fairgate or seed004, got '" << outputs.policy << "'\n";
    return 2;
  }
  if (outputs.policy == "seed004" && outputs.evidence) {
    err << "fairgate sim: --evidence needs --policy fairgate (seed004 has no order to record)\n";
    return 2;
  }
  for (const std::string& path : traces) {
    StatusOr<Trace> trace = LoadTrace(path);
    if (!trace.ok()) {
      err << "fairgate sim: " << trace.status().message() << "\n";
      return 2;
    }
    StatusOr<SimResult> result = outputs.policy == "seed004"
                                     ? SimulateScoring(*trace)
                                     : Simulate(*trace, outputs.evidence.has_value());
    if (!result.ok()) {
      err << "fairgate sim: " << path << ": " << result.status().message() << "\n";
      return 2;
    }
    out << path << " (" << trace->mode << " mode, " << trace->jobs.size() << " jobs, capacity "
        << trace->options.rule.max_concurrency << ")\n"
        << FormatKeyTable(*result);
    if (outputs.summary) out << FormatSummary(SummarizePolicy(*trace, *result));
    if (!result->capacity_changes.empty()) {  // adaptive capacity: where the cap went, and when
      out << "  capacity (from " << trace->options.rule.max_concurrency << "):";
      const char* separator = " ";
      for (const auto& [t, capacity] : result->capacity_changes) {
        out << separator << capacity << " at " << FormatNumber(t);
        separator = ", ";
      }
      out << "\n";
    }
    out << "\n";
    if (outputs.events &&
        !WriteLines(
            *outputs.events, result->events,
            [&](const SimEvent& e) { return FormatEvent(*trace, *result, e); }, out, err)) {
      return 2;
    }
    if (outputs.evidence &&
        !WriteLines(
            *outputs.evidence, result->evidence,
            [](const AdmissionEvidence& e) { return ToJsonLine(e); }, out, err)) {
      return 2;
    }
    if (outputs.report) {
      if (Status s = WriteReport(*outputs.report, path, *trace, *result); !s.ok()) {
        err << "fairgate sim: " << s.message() << "\n";
        return 2;
      }
      out << "report: " << *outputs.report << "/index.html\n";
    }
  }
  return 0;
}

int RunSimCommand(const std::vector<std::string>& traces,
                  const std::optional<std::string>& events_path, std::ostream& out,
                  std::ostream& err) {
  return RunSimCommand(traces, SimOutputs{events_path, std::nullopt, std::nullopt}, out, err);
}

}  // namespace fairgate::sim
