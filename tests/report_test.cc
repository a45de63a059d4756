// The simulator's report: the figures of its summary worked out by hand, and the page it draws.
#include "sim/report.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "doctest/doctest.h"
#include "sim/sim_command.h"

namespace fairgate::sim {
namespace {
namespace report_test {

// How many times `what` occurs in `text`.
std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

// Capacity 1; a and b each send a 2-second job at t = 0, a's first; c a 1-second job at t = 1.
// Seed mode: a runs 0-2, then b (same cost, earlier arrival than c) 2-4, then c 4-5.
Trace ThreeKeys() {
  StatusOr<Trace> trace = ParseTrace(R"({"mode": "seed", "capacity": 1,
    "types": {"t": {"priority": 1, "max_concurrency": 1}},
    "jobs": [{"type": "t", "id": "x", "key": "a", "arrival": 0, "duration": 2},
             {"type": "t", "id": "y", "key": "b", "arrival": 0, "duration": 2},
             {"type": "t", "id": "z", "key": "<c>", "arrival": 1, "duration": 1}]})",
                                     "three.json");
  REQUIRE(trace.ok());
  return *trace;
}

TEST_CASE("Report.Summary.WaitsSlowdownsJainAndUtilization") {
  const Trace trace = ThreeKeys();
  const SimResult result = *Simulate(trace);
  const ReportSummary s = Summarize(trace, result);
  REQUIRE(s.keys.size() == 3);
  CHECK(s.keys[0].key == "a");
  CHECK(s.keys[0].mean_wait == 0);
  CHECK(s.keys[0].mean_slowdown == 1);  // (0 + 2) / 2
  CHECK(s.keys[1].worst_wait == 2);
  CHECK(s.keys[1].mean_slowdown == 2);  // (2 + 2) / 2
  CHECK(s.keys[2].p50_wait == 3);       // arrived at 1, admitted at 4
  CHECK(s.keys[2].p99_wait == 3);
  CHECK(s.keys[2].mean_slowdown == 4);  // (3 + 1) / 1
  // Jain over (1, 2, 4): 49 / (3 * 21).
  CHECK(s.jain_index == doctest::Approx(49.0 / 63));
  CHECK(s.utilization == 1);  // the slot was busy from 0 to 5
  CHECK(s.span == 5);
}

TEST_CASE("Report.Summary.GroupsOfKeysGatherTheirKeysWaits") {
  StatusOr<Trace> trace = ParseTrace(R"({"mode": "seed", "capacity": 1,
    "types": {"clone": {"priority": 1, "max_concurrency": 1}},
    "keys": {"farm-1": {"group": "farm"}, "farm-2": {"group": "farm"}},
    "jobs": [
      {"type": "clone", "id": "f1", "key": "farm-1", "arrival": 0, "duration": 1},
      {"type": "clone", "id": "f2", "key": "farm-2", "arrival": 0, "duration": 1},
      {"type": "clone", "id": "a", "key": "alice", "arrival": 0, "duration": 1}]})",
                                     "t.json");
  REQUIRE(trace.ok());
  StatusOr<SimResult> result = Simulate(*trace);
  REQUIRE(result.ok());
  const ReportSummary summary = Summarize(*trace, *result);
  // farm-1 first (0), alice (1), farm-2 (2): the group's waits are 0 and 2.
  REQUIRE(summary.groups.size() == 1);
  const GroupReport& farm = summary.groups[0];
  CHECK(farm.group == "farm");
  CHECK(farm.keys == 2);
  CHECK(farm.jobs == 2);
  CHECK(farm.admitted == 2);
  CHECK(farm.mean_wait == 1.0);
  CHECK(farm.worst_wait == 2.0);
  const std::string html = RenderHtml("t", *trace, *result, summary);
  CHECK(html.find("<h2>Groups of keys</h2>") != std::string::npos);
}

TEST_CASE("Report.Summary.PercentilesAreNearestRank") {
  Trace trace = ThreeKeys();
  trace.jobs.clear();
  for (int i = 0; i < 100; ++i) trace.jobs.push_back({"t", "x", "k", 0, 1, std::nullopt});
  const ReportSummary s = Summarize(trace, *Simulate(trace));
  CHECK(s.keys[0].p50_wait == 49);  // the 50th of waits 0, 1, ..., 99
  CHECK(s.keys[0].p99_wait == 98);
  CHECK(s.keys[0].worst_wait == 99);
}

TEST_CASE("Report.Html.OnePageWithTheTableAndBothPictures") {
  const Trace trace = ThreeKeys();
  const SimResult result = *Simulate(trace);
  const std::string html = RenderHtml("three <keys>", trace, result, Summarize(trace, result));
  CHECK(html.find("<title>three &lt;keys&gt;</title>") != std::string::npos);
  CHECK(html.find("&lt;c&gt;") != std::string::npos);  // key names are escaped
  CHECK(html.find("<c>") == std::string::npos);
  std::size_t svgs = 0;
  for (std::size_t at = 0; (at = html.find("<svg", at)) != std::string::npos; ++at) ++svgs;
  CHECK(svgs == 2);
  CHECK(Count(html, "</title></rect>") == 3);                  // a bar per job
  CHECK(Count(html, "height=\"4\" fill=\"#222222\"/>") == 3);  // each with its type's stripe
  CHECK(Count(html, ">t</text>") == 3);  // and its type's name, as each bar is wide enough
}

// The axis labels of a page, in order: the text of each centred <text> element.
std::vector<std::string> AxisLabels(const std::string& html) {
  std::vector<std::string> labels;
  const std::string open = "text-anchor=\"middle\">";
  for (std::size_t at = 0; (at = html.find(open, at)) != std::string::npos;) {
    at += open.size();
    labels.push_back(html.substr(at, html.find('<', at) - at));
  }
  return labels;
}

// A timeline of 6.45 s is labelled 0, 1, ..., 6 (not 0.645, 1.29, ..., 6.45), and the waits'
// axis, up to 3.2 s, 0, 0.5, ..., 3.
TEST_CASE("Report.Html.AxisTicksAreRoundNumbers") {
  StatusOr<Trace> trace = ParseTrace(R"({"mode": "seed", "capacity": 1,
    "types": {"t": {"priority": 1, "max_concurrency": 1}},
    "jobs": [{"type": "t", "id": "x", "key": "a", "arrival": 0, "duration": 3.2},
             {"type": "t", "id": "y", "key": "b", "arrival": 0, "duration": 3.25}]})",
                                     "round.json");
  REQUIRE(trace.ok());
  const SimResult result = *Simulate(*trace);
  const std::vector<std::string> labels =
      AxisLabels(RenderHtml("round", *trace, result, Summarize(*trace, result)));
  const std::vector<std::string> expected = {"0", "1",   "2", "3",   "4", "5",   "6",   // 6.45 s
                                             "0", "0.5", "1", "1.5", "2", "2.5", "3"};  // 3.2 s
  CHECK(labels == expected);
}

TEST_CASE("Report.Html.WithWorkersOneRowPerWorkerSlotAndLostJobsDotted") {
  // gpu (2 slots) runs a and b from 0 and is removed at 1: both are lost; cpu runs c 0-1.
  StatusOr<Trace> trace = ParseTrace(R"({"capacity": 4,
    "types": {"t": {"priority": 4, "max_concurrency": 4}},
    "workers": [{"name": "gpu", "slots": 2, "types": ["t"], "until": 1},
                {"name": "cpu", "types": ["t"]}],
    "jobs": [{"type": "t", "id": "x", "key": "a", "arrival": 0, "duration": 2},
             {"type": "t", "id": "y", "key": "b", "arrival": 0, "duration": 2},
             {"type": "t", "id": "z", "key": "c", "arrival": 0, "duration": 1}]})",
                                     "workers.json");
  REQUIRE(trace.ok());
  const SimResult result = *Simulate(*trace);
  const std::string html = RenderHtml("workers", *trace, result, Summarize(*trace, result));
  CHECK(html.find("<h2>Workers over time</h2>") != std::string::npos);
  for (const char* row : {">gpu 1<", ">gpu 2<", ">cpu 1<"}) {
    CHECK_MESSAGE(html.find(row) != std::string::npos, row);
  }
  std::size_t dotted = 0;
  for (std::size_t at = 0; (at = html.find("stroke-dasharray=\"1 2\"", at)) != std::string::npos;
       ++at) {
    ++dotted;
  }
  CHECK(dotted == 2);  // a's and b's jobs, lost with gpu
}

// Capacity 1. a's mirror of linux runs 0-4; b's (at 1) and c's (at 3) join it (they wait for
// it: sync) and end with it, 3 s and 1 s after they came; a's gc waits for the slot until 4 and
// runs 4-5.
TEST_CASE("Report.Summary.TypesAndTheCoalescedRequestsEndToEnd") {
  StatusOr<Trace> trace = ParseTrace(R"({"mode": "default", "capacity": 1,
    "types": {"mirror": {"priority": 1, "max_concurrency": 1, "coalesce": "join"},
              "gc": {"priority": 1, "max_concurrency": 1}},
    "jobs": [{"type": "mirror", "id": "linux", "key": "a", "arrival": 0, "duration": 4,
              "sync": true},
             {"type": "gc", "id": "x", "key": "a", "arrival": 0, "duration": 1},
             {"type": "mirror", "id": "linux", "key": "b", "arrival": 1, "duration": 4,
              "sync": true},
             {"type": "mirror", "id": "linux", "key": "c", "arrival": 3, "duration": 4,
              "sync": true}]})",
                                     "coalesced.json");
  REQUIRE(trace.ok());
  const SimResult result = *Simulate(*trace);
  const ReportSummary s = Summarize(*trace, result);
  REQUIRE(s.types.size() == 2);
  const TypeReport& mirror = s.types[0];
  CHECK(mirror.type == "mirror");
  CHECK(mirror.jobs == 3);
  CHECK(mirror.admitted == 3);
  CHECK(mirror.joined == 2);
  CHECK(mirror.worst_wait == 0);             // the joiners' run was under way when they came
  CHECK(mirror.mean_run == 4);               // one run, not three
  CHECK(mirror.joined_p50_end_to_end == 1);  // nearest rank of (1, 3)
  CHECK(mirror.joined_p99_end_to_end == 3);
  const TypeReport& gc = s.types[1];
  CHECK(gc.jobs == 1);
  CHECK(gc.joined == 0);
  CHECK(gc.worst_wait == 4);
  CHECK(gc.mean_run == 1);
  CHECK(s.coalesced);
  // The slot was busy 0-5 once: a run that requests joined counts once.
  CHECK(s.utilization == 1);
  const std::string html = RenderHtml("coalesced", *trace, result, s);
  CHECK(Count(html, "<th>joined a run</th>") == 1);
  CHECK(Count(html, ">mirror +2</text>") == 1);  // the run's bar names its type and joiners
  CHECK(Count(html, " +2 joined</title>") == 1);
  CHECK(Count(html, "</title></rect>") == 2);  // two runs: mirror's and gc's
}

// Capacity 1,000 and 300 jobs of 100 keys at once: 300 slots run something, drawn 8 to a row
// (38 rows), the other 700 not at all; the key table and the waits show the keys whose p99
// wait is highest, 20 of them; the charts stay within the height of their bounds' rows.
TEST_CASE("Report.Html.ThePageIsBoundedWhateverTheCapacityAndTheKeys") {
  StatusOr<Trace> parsed = ParseTrace(R"({"mode": "default", "capacity": 1000,
    "types": {"t": {"priority": 1000, "max_concurrency": 1000}}, "jobs": []})",
                                      "wide.json");
  REQUIRE(parsed.ok());
  Trace trace = *parsed;
  for (int i = 0; i < 300; ++i) {
    trace.jobs.push_back(
        {"t", absl::StrCat("r", i), absl::StrCat("k", i % 100), 0, 1.0 + (i % 7), std::nullopt});
  }
  const SimResult result = *Simulate(trace);
  const std::string html = RenderHtml("wide", trace, result, Summarize(trace, result));
  CHECK(Count(html, "300 of 1000 slots ran something; each row holds up to 8") == 1);
  CHECK(Count(html, ">slot 1 - slot 8</text>") == 1);
  CHECK(Count(html, ">slot 297 - slot 300</text>") == 1);  // the last row, of 4
  CHECK(Count(html, "slot 301") == 0);
  CHECK(Count(html, "</title></rect>") == 300);  // every run still drawn, in its lane
  CHECK(Count(html, "<tr><td><span class=\"swatch\"") == kMaxKeys);
  CHECK(Count(html, "The 20 of 100 keys whose p99 wait is highest") == 1);
  const std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" height=\"";
  std::size_t charts = 0;
  for (std::size_t at = 0; (at = html.find(svg, at)) != std::string::npos; ++charts) {
    at += svg.size();
    const int height = std::stoi(html.substr(at, html.find('"', at) - at));
    CHECK(height <= 10 + static_cast<int>(charts == 0 ? kMaxRows : kMaxKeys) * 22 + 40);
  }
  CHECK(charts == 2);
}

// A small capacity draws only the slots that ran something: 2 of 8.
TEST_CASE("Report.Html.OnlyTheSlotsThatRanSomethingHaveRows") {
  StatusOr<Trace> trace = ParseTrace(R"({"mode": "seed", "capacity": 8,
    "types": {"t": {"priority": 8, "max_concurrency": 8}},
    "jobs": [{"type": "t", "id": "x", "key": "a", "arrival": 0, "duration": 2},
             {"type": "t", "id": "y", "key": "b", "arrival": 0, "duration": 1},
             {"type": "t", "id": "z", "key": "c", "arrival": 1, "duration": 1}]})",
                                     "small.json");
  REQUIRE(trace.ok());
  const SimResult result = *Simulate(*trace);
  const std::string html = RenderHtml("small", *trace, result, Summarize(*trace, result));
  CHECK(Count(html, "2 of 8 slots ran something.") == 1);  // c reuses b's slot
  CHECK(Count(html, ">slot 1</text>") == 1);
  CHECK(Count(html, ">slot 2</text>") == 1);
  CHECK(Count(html, ">slot 3</text>") == 0);
}

TEST_CASE("SimCommand.ReportAndEvidenceAreWrittenWhereAsked") {
  const auto dir = std::filesystem::temp_directory_path() / "fairgate_sim_report_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string trace =
      std::string(FAIRGATE_TEST_DATA_DIR) + "/scenarios/seed-4-conflict-exclusion.json";
  std::ostringstream out, err;
  SimOutputs outputs;
  outputs.report = (dir / "report").string();
  outputs.evidence = (dir / "evidence.jsonl").string();
  REQUIRE(RunSimCommand({trace}, outputs, out, err) == 0);
  CHECK(std::filesystem::file_size(dir / "report" / "index.html") > 1000);
  std::ifstream evidence(dir / "evidence.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(evidence, line)) {
    CHECK(line.rfind("{\"t\":", 0) == 0);
    CHECK(line.find("\"estimate_source\":") != std::string::npos);
    ++lines;
  }
  CHECK(lines == 4);  // one per admission: the trace's four jobs all run
  std::ostringstream out2, err2;
  SimOutputs two;
  two.report = (dir / "r2").string();
  CHECK(RunSimCommand({trace, trace}, two, out2, err2) == 2);
  CHECK(err2.str() == "fairgate sim: --report takes exactly one trace, got 2\n");
  std::filesystem::remove_all(dir);
}

}  // namespace report_test
}  // namespace
}  // namespace fairgate::sim
