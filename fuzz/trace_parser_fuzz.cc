// libFuzzer target: any bytes given to the trace parser get a trace or an InvalidArgument, never
// a crash; a trace that parses also simulates without a crash, and its events are well formed.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "sim/simulator.h"
#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto trace = fairgate::sim::ParseTrace(text, "fuzz.json");
  if (!trace.ok()) {
    if (trace.status().code() != absl::StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "a bad trace was not InvalidArgument: %s\n",
                   trace.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  // Bound the work of one input: the simulator is event-driven, so jobs, not times, cost.
  std::size_t jobs = trace->jobs.size();
  for (const auto& periodic : trace->periodic) jobs += static_cast<std::size_t>(periodic.runs);
  if (jobs > 2000) return 0;
  // Adaptive capacity's rule runs every interval while anything is left to happen: bound the
  // number of intervals by the latest instant a trace could reach.
  if (const auto& adaptive = trace->options.rule.adaptive_capacity) {
    double horizon = 0;
    for (const auto& job : trace->jobs) horizon += job.arrival + job.duration;
    for (const auto& periodic : trace->periodic) {
      horizon += periodic.first + periodic.runs * (periodic.interval + periodic.duration);
    }
    // Durations stretch by at most the capacity on an oversubscribed machine.
    horizon *= trace->options.rule.max_concurrency;
    if (horizon / adaptive->interval.count() > 1e6) return 0;
  }
  auto result = fairgate::sim::Simulate(*trace, /*with_evidence=*/true);
  if (!result.ok()) return 0;  // a job refused by the core (a full queue) is a status too
  for (const auto& event : result->events) {
    if (fairgate::sim::FormatEvent(*trace, *result, event).front() != '{') std::abort();
  }
  return 0;
}
