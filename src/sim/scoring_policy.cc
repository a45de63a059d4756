#include "sim/scoring_policy.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fairgate/worker.h"

namespace fairgate::sim {
namespace {

// The seed's constants.
constexpr double kPerPriority = 1024;
constexpr double kPerSecondWaited = 16;
constexpr double kRarity = 500;
constexpr double kOnDemand = 4096;
constexpr double kOnDemandPerSecond = 32;

struct Worker {
  std::string name;
  WorkerConfig config;
  std::size_t listed = 0;  // its place in the trace: the tie rule
  int used = 0;            // slots of its running jobs
  bool present = false;
  std::uint64_t generation = 0;  // bumped at each removal: a lost job's completion is stale
};

struct Running {
  double t;
  std::uint64_t order;
  std::size_t job;
  std::size_t worker;
  std::uint64_t generation;
  int slots;
  bool operator>(const Running& o) const { return std::tie(t, order) > std::tie(o.t, o.order); }
};

}  // namespace

StatusOr<SimResult> SimulateScoring(const Trace& trace) {
  if (!trace.periodic.empty() || !trace.pauses.empty() ||
      trace.options.rule.adaptive_capacity.has_value()) {
    return absl::InvalidArgumentError(
        "the seed-004 policy runs traces of jobs and workers only (no periodic jobs, pauses or "
        "adaptive capacity)");
  }
  auto config_of = [&](const std::string& type) -> const JobTypeConfig* {
    for (const auto& [name, config] : trace.types) {
      if (name == type) return &config;
    }
    return nullptr;
  };
  std::vector<Worker> workers;
  if (trace.workers.empty()) {
    WorkerConfig all{trace.options.rule.max_concurrency, {}, {}};
    for (const auto& [name, config] : trace.types) all.types.push_back(name);
    workers.push_back({"", all, 0, 0, true, 0});
  } else {
    for (std::size_t i = 0; i < trace.workers.size(); ++i) {
      workers.push_back({trace.workers[i].name, trace.workers[i].config, i, 0, false, 0});
    }
  }
  // How many registered types each worker serves: the most specialised has the fewest.
  std::vector<std::size_t> served(workers.size(), 0);
  for (std::size_t w = 0; w < workers.size(); ++w) {
    for (const auto& [name, config] : trace.types)
      served[w] += WorkerServes(workers[w].config, name, config);
  }
  struct Change {
    double t;
    std::size_t worker;
    bool remove;
  };
  std::vector<Change> changes;
  for (std::size_t i = 0; i < trace.workers.size(); ++i) {
    changes.push_back({trace.workers[i].from, i, false});
    if (trace.workers[i].until) changes.push_back({*trace.workers[i].until, i, true});
  }
  std::stable_sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
    return std::tie(a.t, b.remove) < std::tie(b.t, a.remove);
  });

  SimResult result;
  result.jobs = trace.jobs;
  result.outcomes.resize(trace.jobs.size());
  std::vector<std::size_t> arrivals(trace.jobs.size());
  std::iota(arrivals.begin(), arrivals.end(), 0);
  std::stable_sort(arrivals.begin(), arrivals.end(), [&](std::size_t a, std::size_t b) {
    return trace.jobs[a].arrival < trace.jobs[b].arrival;
  });
  for (const TraceJob& job : trace.jobs) {
    if (config_of(job.type) == nullptr) {
      return absl::NotFoundError(absl::StrCat("unknown job type '", job.type, "'"));
    }
  }
  std::vector<std::size_t> pending;
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running;
  std::uint64_t order = 0;
  int slots_in_use = 0;
  const int capacity = trace.options.rule.max_concurrency;
  const bool named = !trace.workers.empty();
  std::size_t next = 0, next_change = 0;
  while (next < arrivals.size() || next_change < changes.size() || !running.empty()) {
    double t = std::numeric_limits<double>::infinity();
    if (next < arrivals.size()) t = trace.jobs[arrivals[next]].arrival;
    if (next_change < changes.size()) t = std::min(t, changes[next_change].t);
    if (!running.empty()) t = std::min(t, running.top().t);
    if (trace.until && t > *trace.until) break;
    bool removed_now = false;
    for (; next_change < changes.size() && changes[next_change].t == t; ++next_change) {
      Worker& w = workers[changes[next_change].worker];
      if (!changes[next_change].remove) {
        w.present = true;
        continue;
      }
      // Its running jobs are lost: they leave the queue of completions as they come up.
      w.present = false;
      w.used = 0;
      ++w.generation;
      removed_now = true;
    }
    for (; next < arrivals.size() && trace.jobs[arrivals[next]].arrival == t; ++next) {
      pending.push_back(arrivals[next]);
    }
    // Losses at this instant: every running job of a worker removed now.
    if (removed_now) {
      std::vector<Running> kept;
      while (!running.empty()) {
        Running r = running.top();
        running.pop();
        if (r.generation != workers[r.worker].generation) {
          slots_in_use -= r.slots;
          SimEvent event{t, SimEvent::Kind::kLost, r.job};
          event.worker = workers[r.worker].name;
          result.events.push_back(std::move(event));
          result.outcomes[r.job].lost_at = t;
          continue;
        }
        kept.push_back(r);
      }
      for (const Running& r : kept) running.push(r);
    }
    // Completions.
    while (!running.empty() && running.top().t <= t) {
      const Running done = running.top();
      running.pop();
      if (done.generation != workers[done.worker].generation) continue;  // lost, reported
      workers[done.worker].used -= done.slots;
      slots_in_use -= done.slots;
      result.events.push_back({t, SimEvent::Kind::kDone, done.job});
      result.outcomes[done.job].done_at = t;
    }
    // Decisions: the highest score among the jobs a worker with room serves, until none fits.
    for (;;) {
      std::optional<std::size_t> best;  // index in `pending`
      double best_score = 0;
      std::size_t best_worker = 0;
      for (std::size_t p = 0; p < pending.size(); ++p) {
        const TraceJob& job = trace.jobs[pending[p]];
        const JobTypeConfig& config = *config_of(job.type);
        if (slots_in_use + config.slots > capacity) continue;
        int free_slots = 0;
        std::optional<std::size_t> chosen;
        for (std::size_t w = 0; w < workers.size(); ++w) {
          const Worker& worker = workers[w];
          if (!worker.present || !WorkerServes(worker.config, job.type, config)) continue;
          const int free = worker.config.slots - worker.used;
          if (free < config.slots) continue;
          free_slots += free;
          if (!chosen || std::tie(served[w], worker.listed) <
                             std::tie(served[*chosen], workers[*chosen].listed)) {
            chosen = w;
          }
        }
        if (!chosen) continue;
        const double age = t - job.arrival;
        double score = kPerPriority * config.priority + kPerSecondWaited * age +
                       kRarity / static_cast<double>(free_slots);
        if (job.sync) score += kOnDemand + kOnDemandPerSecond * age;
        const bool better = !best || score > best_score ||
                            (score == best_score &&
                             std::tie(job.arrival, pending[p]) <
                                 std::tie(trace.jobs[pending[*best]].arrival, pending[*best]));
        if (better) {
          best = p;
          best_score = score;
          best_worker = *chosen;
        }
      }
      if (!best) break;
      const std::size_t job = pending[*best];
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(*best));
      const int slots = config_of(trace.jobs[job].type)->slots;
      Worker& worker = workers[best_worker];
      worker.used += slots;
      slots_in_use += slots;
      SimEvent event{t, SimEvent::Kind::kAdmit, job, config_of(trace.jobs[job].type)->priority};
      if (named) event.worker = worker.name;
      result.events.push_back(std::move(event));
      result.outcomes[job].admitted_at = t;
      running.push(
          {t + trace.jobs[job].duration, order++, job, best_worker, worker.generation, slots});
    }
  }
  return result;
}

}  // namespace fairgate::sim
