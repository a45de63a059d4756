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
  if (trace->jobs.size() > 2000) return 0;
  auto result = fairgate::sim::Simulate(*trace, /*with_evidence=*/true);
  if (!result.ok()) return 0;  // a job refused by the core (a full queue) is a status too
  for (const auto& event : result->events) {
    if (fairgate::sim::FormatEvent(*trace, event).front() != '{') std::abort();
  }
  return 0;
}
