#include "sim/policy_summary.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fairgate::sim {
namespace {

void Add(Waits& waits, double wait, bool waiting) {
  waits.mean += wait;  // a sum until Finish
  waits.worst = std::max(waits.worst, wait);
  ++waits.jobs;
  waits.waiting += waiting;
}

void Finish(Waits& waits) {
  if (waits.jobs > 0) waits.mean /= static_cast<double>(waits.jobs);
}

int SlotsOf(const Trace& trace, const std::string& type) {
  for (const auto& [name, config] : trace.types) {
    if (name == type) return config.slots;
  }
  return 1;
}

}  // namespace

PolicySummary SummarizePolicy(const Trace& trace, const SimResult& result) {
  PolicySummary s;
  for (const SimEvent& e : result.events) s.end = std::max(s.end, e.t);
  if (trace.until) s.end = *trace.until;
  for (const auto& [name, config] : trace.types) s.types.push_back({name, Waits{}});
  std::map<std::string, Waits> keys, groups;
  double busy = 0;
  std::vector<double> slowdowns;
  for (std::size_t i = 0; i < result.jobs.size(); ++i) {
    const TraceJob& job = result.jobs[i];
    const JobOutcome& o = result.outcomes[i];
    if (o.done_at && *o.done_at <= s.end) {
      ++s.done;
      if (job.duration > 0) slowdowns.push_back((*o.done_at - *o.admitted_at) / job.duration);
    }
    if (job.arrival > s.end) continue;
    if (o.expired_at) continue;  // left the queue at its limit: no wait to compare
    if (o.shed_at) {             // refused by shedding: no wait to compare either
      ++s.shed;
      continue;
    }
    const bool waiting = !o.admitted_at;
    const double wait = (waiting ? s.end : *o.admitted_at) - job.arrival;
    for (auto& [name, waits] : s.types) {
      if (name == job.type) Add(waits, wait, waiting);
    }
    if (job.sync) Add(s.on_demand, wait, waiting);
    Add(keys[job.key], wait, waiting);
    if (const std::string* group = GroupOf(trace, job.key)) Add(groups[*group], wait, waiting);
    if (o.admitted_at) {
      const double until = o.done_at ? *o.done_at : o.lost_at ? *o.lost_at : s.end;
      busy += (std::min(until, s.end) - *o.admitted_at) * SlotsOf(trace, job.type);
    }
    s.lost += o.lost_at.has_value();
  }
  for (auto& [name, waits] : s.types) Finish(waits);
  for (auto& [name, waits] : groups) {
    Finish(waits);
    s.groups.emplace_back(name, waits);
  }
  Finish(s.on_demand);
  double offered = 0;
  if (trace.workers.empty()) {
    offered = trace.options.rule.max_concurrency * s.end;
  } else {
    for (const TraceWorker& w : trace.workers) {
      const double until = w.until ? std::min(*w.until, s.end) : s.end;
      offered += w.config.slots * std::max(0.0, until - std::min(w.from, s.end));
    }
  }
  s.utilisation = offered > 0 ? busy / offered : 0;
  s.machine = trace.cores.has_value();
  if (s.end > 0) s.done_per_second = static_cast<double>(s.done) / s.end;
  if (!slowdowns.empty()) {
    std::sort(slowdowns.begin(), slowdowns.end());
    auto rank = [&](double p) {
      const auto at =
          static_cast<std::size_t>(std::ceil(p * static_cast<double>(slowdowns.size())));
      return slowdowns[std::max<std::size_t>(at, 1) - 1];
    };
    s.slowdown_p50 = rank(0.5);
    s.slowdown_p99 = rank(0.99);
  }
  std::size_t heaviest = 0;
  for (auto& [key, waits] : keys) {
    Finish(waits);
    heaviest = std::max(heaviest, waits.jobs);
  }
  for (const auto& [key, waits] : keys) {
    if (2 * waits.jobs >= heaviest) continue;
    s.has_light_keys = true;
    s.light_key_wait = std::max(s.light_key_wait, waits.mean);
  }
  return s;
}

std::string FormatSummary(const PolicySummary& s) {
  auto waits = [](const Waits& w) {
    if (w.jobs == 0) return std::string("-");
    return absl::StrFormat(
        "mean %.2f, worst %.2f%s", w.mean, w.worst,
        w.waiting > 0 ? absl::StrCat(" (", w.waiting, " still waiting)") : std::string());
  };
  std::string out;
  for (const auto& [name, w] : s.types) {
    absl::StrAppend(&out, "  wait of ", name, ": ", waits(w), "\n");
  }
  for (const auto& [name, w] : s.groups) {
    absl::StrAppend(&out, "  wait of group ", name, ": ", waits(w), "\n");
  }
  absl::StrAppend(&out, "  wait of on-demand jobs: ", waits(s.on_demand), "\n");
  absl::StrAppend(&out, "  longest mean wait of a light key: ",
                  s.has_light_keys ? absl::StrFormat("%.2f", s.light_key_wait) : "-", "\n");
  absl::StrAppend(&out, absl::StrFormat("  utilisation %.3f, lost %d", s.utilisation, s.lost));
  // Only where a type shed (traces without shedding keep their summaries).
  absl::StrAppend(&out, s.shed > 0 ? absl::StrFormat(", shed %d\n", s.shed) : "\n");
  if (s.machine) {
    absl::StrAppend(
        &out, absl::StrFormat("  done %d (%.2f per second), slowdown p50 %.2f, p99 %.2f\n", s.done,
                              s.done_per_second, s.slowdown_p50, s.slowdown_p99));
  }
  return out;
}

}  // namespace fairgate::sim
