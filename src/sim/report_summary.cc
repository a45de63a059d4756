// The report's figures (sim/report.h, Summarize): per key, per type, and over the run.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "sim/report.h"

namespace fairgate::sim {
namespace {

// Nearest-rank percentile of an ascending, non-empty vector.
double Percentile(const std::vector<double>& sorted, double p) {
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const std::size_t index = static_cast<std::size_t>(std::max(1.0, rank)) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

// Sorts `waits` and sets the mean, p50, p99 and worst of them (all 0 when there are none).
template <typename Report>
void SetWaits(Report& report, std::vector<double>& waits) {
  std::sort(waits.begin(), waits.end());
  if (waits.empty()) return;
  double total = 0;
  for (const double w : waits) total += w;
  report.mean_wait = total / static_cast<double>(waits.size());
  report.p50_wait = Percentile(waits, 50);
  report.p99_wait = Percentile(waits, 99);
  report.worst_wait = waits.back();
}

// What Summarize gathers of one type before it reduces it.
struct TypeTally {
  std::vector<double> waits;
  double run_total = 0;
  std::size_t runs = 0;
  std::vector<double> joined_end_to_end;
};

// A type's figures from its tally.
void FinishType(TypeReport& type, TypeTally& tally) {
  SetWaits(type, tally.waits);
  if (tally.runs > 0) type.mean_run = tally.run_total / static_cast<double>(tally.runs);
  std::vector<double>& e2e = tally.joined_end_to_end;
  std::sort(e2e.begin(), e2e.end());
  if (!e2e.empty()) {
    type.joined_p50_end_to_end = Percentile(e2e, 50);
    type.joined_p99_end_to_end = Percentile(e2e, 99);
  }
}

// The types of the trace, in its order, and each one's index among them.
std::vector<TypeReport> TypesOf(const Trace& trace, std::map<std::string, std::size_t>& index) {
  std::vector<TypeReport> types;
  for (const auto& [name, config] : trace.types) {
    index.emplace(name, types.size());
    TypeReport& type = types.emplace_back();
    type.type = name;
    type.priority = config.priority;
  }
  return types;
}

}  // namespace

ReportSummary Summarize(const Trace& trace, const SimResult& result) {
  ReportSummary summary;
  std::vector<bool> joined(result.jobs.size(), false);  // it joined another's run
  for (const SimEvent& e : result.events) {
    if (e.kind == SimEvent::Kind::kJoin) joined[e.job] = true;
  }
  std::map<std::string, std::size_t> key_index, type_index;
  summary.types = TypesOf(trace, type_index);
  std::vector<TypeTally> tallies(summary.types.size());
  std::vector<double> slowdown_sum;
  std::vector<std::size_t> slowdown_n;
  double first_arrival = result.jobs.empty() ? 0 : result.jobs[0].arrival, last_done = 0;
  double busy = 0;
  for (std::size_t i = 0; i < result.jobs.size(); ++i) {
    const TraceJob& job = result.jobs[i];
    first_arrival = std::min(first_arrival, job.arrival);
    auto [it, inserted] = key_index.try_emplace(job.key, summary.keys.size());
    if (inserted) {
      summary.keys.emplace_back().key = job.key;
      slowdown_sum.push_back(0);
      slowdown_n.push_back(0);
    }
    KeyReport& k = summary.keys[it->second];
    const std::size_t t = type_index.at(job.type);
    TypeReport& type = summary.types[t];
    TypeTally& tally = tallies[t];
    ++k.jobs;
    ++type.jobs;
    type.joined += joined[i];
    const JobOutcome& o = result.outcomes[i];
    if (!o.admitted_at) continue;
    ++k.admitted;
    ++type.admitted;
    const double wait = *o.admitted_at - job.arrival;
    k.waits.push_back(wait);
    tally.waits.push_back(wait);
    if (job.duration > 0) {
      slowdown_sum[it->second] += (wait + job.duration) / job.duration;
      ++slowdown_n[it->second];
    }
    if (!o.done_at) continue;
    if (joined[i]) {  // its run is its lead's: counted there
      tally.joined_end_to_end.push_back(*o.done_at - job.arrival);
      continue;
    }
    busy += *o.done_at - *o.admitted_at;
    last_done = std::max(last_done, *o.done_at);
    tally.run_total += *o.done_at - *o.admitted_at;
    ++tally.runs;
  }
  double sum = 0, sum_squares = 0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < summary.keys.size(); ++i) {
    KeyReport& k = summary.keys[i];
    SetWaits(k, k.waits);
    if (slowdown_n[i] > 0) {
      k.mean_slowdown = slowdown_sum[i] / static_cast<double>(slowdown_n[i]);
      sum += k.mean_slowdown;
      sum_squares += k.mean_slowdown * k.mean_slowdown;
      ++n;
    }
  }
  // The groups, in name order: each key's figures added to its group's.
  std::map<std::string, std::pair<GroupReport, std::vector<double>>> groups;
  for (const KeyReport& k : summary.keys) {
    const std::string* group = GroupOf(trace, k.key);
    if (group == nullptr) continue;
    auto& [report, waits] = groups[*group];
    report.group = *group;
    ++report.keys;
    report.jobs += k.jobs;
    report.admitted += k.admitted;
    waits.insert(waits.end(), k.waits.begin(), k.waits.end());
  }
  for (auto& [name, entry] : groups) {
    SetWaits(entry.first, entry.second);
    summary.groups.push_back(std::move(entry.first));
  }
  for (std::size_t t = 0; t < summary.types.size(); ++t) {
    FinishType(summary.types[t], tallies[t]);
    summary.coalesced |= summary.types[t].joined > 0;
  }
  summary.jain_index =
      n > 0 && sum_squares > 0 ? sum * sum / (static_cast<double>(n) * sum_squares) : 1;
  summary.span = std::max(0.0, last_done - first_arrival);
  summary.utilization =
      summary.span > 0 ? busy / (trace.options.rule.max_concurrency * summary.span) : 0;
  return summary;
}

}  // namespace fairgate::sim
