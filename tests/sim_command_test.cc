// `fairgate sim`: tables on stdout, events where asked, exit status 2 with one line on bad input.
#include "sim/sim_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "doctest/doctest.h"

namespace fairgate::sim {
namespace {
namespace sim_command_test {

const std::string kData = FAIRGATE_TEST_DATA_DIR;
const std::string kSeed4 = kData + "/scenarios/seed-4-conflict-exclusion.json";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("SimCommand.Run.PrintsOneTablePerTrace") {
  std::ostringstream out, err;
  const std::string seed2 = kData + "/scenarios/seed-2-two-client-burst.json";
  CHECK(RunSimCommand({kSeed4, seed2}, std::nullopt, out, err) == 0);
  CHECK(err.str().empty());
  const std::string text = out.str();
  CHECK(text.find(kSeed4 + " (seed mode, 4 jobs, capacity 8)") != std::string::npos);
  CHECK(text.find(seed2 + " (seed mode, 16 jobs, capacity 8)") != std::string::npos);
  CHECK(text.find("\"clientB\"") != std::string::npos);
}

TEST_CASE("SimCommand.Run.SaysWhereAnAdaptiveCapWentAndOnlyThen") {
  const std::string examples = std::string(FAIRGATE_SOURCE_DIR) + "/docs/examples/";
  std::ostringstream on, off, err;
  CHECK(RunSimCommand({examples + "adaptive-capacity-on.json"}, std::nullopt, on, err) == 0);
  CHECK(on.str().find("  capacity (from 8): 4 at 1, 2 at 2, ") != std::string::npos);
  CHECK(RunSimCommand({examples + "adaptive-capacity-off.json"}, std::nullopt, off, err) == 0);
  CHECK(off.str().find("capacity (from") == std::string::npos);
}

TEST_CASE("SimCommand.Policy.Seed004WithASummaryAndBadPoliciesRefused") {
  const std::string rare =
      std::string(FAIRGATE_SOURCE_DIR) + "/docs/examples/workers-rare-type.json";
  std::ostringstream out, err;
  SimOutputs outputs;
  outputs.policy = "seed004";
  outputs.summary = true;
  CHECK(RunSimCommand({rare}, outputs, out, err) == 0);
  CHECK(out.str().find("  wait of index: mean 66.43, worst 178.90\n") != std::string::npos);
  CHECK(out.str().find("  longest mean wait of a light key: 66.43\n") != std::string::npos);
  std::ostringstream bad_out, bad_err;
  outputs.policy = "fifo";
  CHECK(RunSimCommand({rare}, outputs, bad_out, bad_err) == 2);
  CHECK(bad_err.str() == "fairgate sim: --policy must be fairgate or seed004, got 'fifo'\n");
  std::ostringstream ev_out, ev_err;
  outputs.policy = "seed004";
  outputs.evidence = "-";
  CHECK(RunSimCommand({rare}, outputs, ev_out, ev_err) == 2);
  CHECK(ev_err.str().find("--evidence needs --policy fairgate") != std::string::npos);
}

TEST_CASE("SimCommand.Events.WrittenToTheFileAsJsonLines") {
  const std::string path =
      (std::filesystem::temp_directory_path() / "fairgate_sim_command_events.jsonl").string();
  std::ostringstream out, err;
  REQUIRE(RunSimCommand({kSeed4}, path, out, err) == 0);
  CHECK(ReadFile(path) == ReadFile(kData + "/scenarios/seed-4-conflict-exclusion.expected.jsonl"));
  std::remove(path.c_str());
}

TEST_CASE("SimCommand.Events.DashMeansStandardOutput") {
  std::ostringstream out, err;
  REQUIRE(RunSimCommand({kSeed4}, std::string("-"), out, err) == 0);
  CHECK(out.str().find(ReadFile(kData + "/scenarios/seed-4-conflict-exclusion.expected.jsonl")) !=
        std::string::npos);
}

void ExpectUsageError(const std::vector<std::string>& traces,
                      const std::optional<std::string>& events, const std::string& message) {
  std::ostringstream out, err;
  CHECK(RunSimCommand(traces, events, out, err) == 2);
  const std::string printed = err.str();
  CHECK(printed == message + "\n");
  CHECK(std::count(printed.begin(), printed.end(), '\n') == 1);
}

TEST_CASE("SimCommand.BadInput.ExitStatus2WithOneLine") {
  ExpectUsageError({}, std::nullopt, "fairgate sim: no trace given");
  ExpectUsageError({kSeed4, kSeed4}, std::string("x.jsonl"),
                   "fairgate sim: --events takes exactly one trace, got 2");
  ExpectUsageError({kData + "/nope.json"}, std::nullopt,
                   "fairgate sim: " + kData + "/nope.json: cannot open the file");
  ExpectUsageError({kData + "/bad/unknown-type.json"}, std::nullopt,
                   "fairgate sim: " + kData +
                       "/bad/unknown-type.json: job 1: field 'type': unknown job type 'clone'");
  // Outputs are checked before the simulation: a file where a directory must be, a directory
  // where a file must be; a trace directory is named as one.
  ExpectUsageError(
      {kSeed4}, kSeed4 + "/events.jsonl",
      "fairgate sim: --events " + kSeed4 + "/events.jsonl: " + kSeed4 + " is not a directory");
  ExpectUsageError({kSeed4}, kData,
                   "fairgate sim: --events " + kData + ": is a directory, not a file");
  ExpectUsageError({kData}, std::nullopt,
                   "fairgate sim: " + kData + ": is a directory, not a trace file");
}

TEST_CASE("SimCommand.Outputs.MissingDirectoriesAreMadeForEveryOutputAlike") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fairgate-sim-outputs-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  SimOutputs outputs;
  outputs.events = (dir / "a/b/events.jsonl").string();
  outputs.evidence = (dir / "c/evidence.jsonl").string();
  outputs.report = (dir / "d/e").string();
  std::ostringstream out, err;
  CHECK(RunSimCommand({kSeed4}, outputs, out, err) == 0);
  CHECK(err.str().empty());
  CHECK_FALSE(ReadFile(*outputs.events).empty());
  CHECK_FALSE(ReadFile(*outputs.evidence).empty());
  CHECK(std::filesystem::exists(dir / "d/e/index.html"));
  std::filesystem::remove_all(dir);
}

}  // namespace sim_command_test
}  // namespace
}  // namespace fairgate::sim
