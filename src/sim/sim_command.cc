#include "sim/sim_command.h"

#include <filesystem>
#include <fstream>
#include <tuple>

#include "absl/strings/str_cat.h"
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

// Makes the directories `path` needs: the directory itself (`directory`) or its parent. Refuses
// a file where a directory must be and a directory where a file must be.
Status PrepareOutput(const std::string& path, bool directory) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path parent = directory ? target : target.parent_path();
  std::error_code error;
  if (!parent.empty() && !fs::is_directory(parent, error)) {
    if (fs::exists(parent, error)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": ", parent.string(), " is not a directory"));
    }
    fs::create_directories(parent, error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat(path, ": cannot make the directory ",
                                                        parent.string(), ": ", error.message()));
    }
  }
  if (!directory && fs::is_directory(target, error)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": is a directory, not a file"));
  }
  return absl::OkStatus();
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
  // Before the simulation, which may take long: every output can be written. Missing
  // directories are made for each alike (a report's own, a file's parent).
  for (const auto& [name, path, directory] : {std::tuple{"--events", outputs.events, false},
                                              std::tuple{"--evidence", outputs.evidence, false},
                                              std::tuple{"--report", outputs.report, true}}) {
    if (!path || *path == "-") continue;
    if (Status s = PrepareOutput(*path, directory); !s.ok()) {
      err << "fairgate sim: " << name << " " << s.message() << "\n";
      return 2;
    }
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
    if (!result->capacity_changes.empty()) {  // a rule that moves the cap: where it went, and when
      const std::optional<LatencyCapacity>& latency = trace->options.rule.latency_capacity;
      out << "  capacity (from " << (latency ? latency->min : trace->options.rule.max_concurrency)
          << "):";
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
