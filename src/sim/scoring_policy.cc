#include "sim/scoring_policy.h"

#include <algorithm>
#include <cstdint>
#include <limits>
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

// One run of the seed's policy over a trace: an event loop (Run) over arrivals, worker changes
// and completions, each instant's handled in turn, then the instant's decisions.
class ScoringRun {
 public:
  explicit ScoringRun(const Trace& trace) : trace_(trace) {}

  StatusOr<SimResult> Run() {
    if (Status s = Prepare(); !s.ok()) return s;
    while (next_ < arrivals_.size() || next_change_ < changes_.size() || !running_.empty()) {
      double t = std::numeric_limits<double>::infinity();
      if (next_ < arrivals_.size()) t = trace_.jobs[arrivals_[next_]].arrival;
      if (next_change_ < changes_.size()) t = std::min(t, changes_[next_change_].t);
      if (!running_.empty()) t = std::min(t, running_.top().t);
      if (trace_.until && t > *trace_.until) break;
      const bool removed_now = ChangeWorkers(t);
      for (; next_ < arrivals_.size() && trace_.jobs[arrivals_[next_]].arrival == t; ++next_) {
        pending_.push_back(arrivals_[next_]);
      }
      if (removed_now) ReportLosses(t);
      TakeCompletions(t);
      Decide(t);
    }
    return std::move(result_);
  }

 private:
  struct Change {
    double t;
    std::size_t worker;
    bool remove;
  };
  // The best pending job for a worker with room at `t`: its index in pending_ and the worker.
  struct Choice {
    std::size_t pending;
    std::size_t worker;
  };

  const JobTypeConfig* ConfigOf(const std::string& type) const {
    for (const auto& [name, config] : trace_.types) {
      if (name == type) return &config;
    }
    return nullptr;
  }

  // The workers (or one that serves every type with the scheduler's slots), how many types each
  // serves, their changes in time order (removals first at one instant) and the arrival order.
  Status Prepare() {
    for (const TraceJob& job : trace_.jobs) {
      if (ConfigOf(job.type) == nullptr) {
        return absl::NotFoundError(absl::StrCat("unknown job type '", job.type, "'"));
      }
    }
    if (trace_.workers.empty()) {
      WorkerConfig all{trace_.options.rule.max_concurrency, {}, {}};
      for (const auto& [name, config] : trace_.types) all.types.push_back(name);
      workers_.push_back({"", all, 0, 0, true, 0});
    } else {
      for (std::size_t i = 0; i < trace_.workers.size(); ++i) {
        workers_.push_back({trace_.workers[i].name, trace_.workers[i].config, i, 0, false, 0});
      }
    }
    // How many registered types each worker serves: the most specialised has the fewest.
    served_.assign(workers_.size(), 0);
    for (std::size_t w = 0; w < workers_.size(); ++w) {
      for (const auto& [name, config] : trace_.types)
        served_[w] += WorkerServes(workers_[w].config, name, config);
    }
    for (std::size_t i = 0; i < trace_.workers.size(); ++i) {
      changes_.push_back({trace_.workers[i].from, i, false});
      if (trace_.workers[i].until) changes_.push_back({*trace_.workers[i].until, i, true});
    }
    std::stable_sort(changes_.begin(), changes_.end(), [](const Change& a, const Change& b) {
      return std::tie(a.t, b.remove) < std::tie(b.t, a.remove);
    });
    result_.jobs = trace_.jobs;
    result_.outcomes.resize(trace_.jobs.size());
    arrivals_ = JobsByArrival(trace_);
    return absl::OkStatus();
  }

  // The workers added and removed at `t`; whether one was removed.
  bool ChangeWorkers(double t) {
    bool removed = false;
    for (; next_change_ < changes_.size() && changes_[next_change_].t == t; ++next_change_) {
      Worker& w = workers_[changes_[next_change_].worker];
      if (!changes_[next_change_].remove) {
        w.present = true;
        continue;
      }
      // Its running jobs are lost: they leave the queue of completions as they come up.
      w.present = false;
      w.used = 0;
      ++w.generation;
      removed = true;
    }
    return removed;
  }

  // Losses at `t`: every running job of a worker removed now.
  void ReportLosses(double t) {
    std::vector<Running> kept;
    while (!running_.empty()) {
      Running r = running_.top();
      running_.pop();
      if (r.generation != workers_[r.worker].generation) {
        slots_in_use_ -= r.slots;
        SimEvent event{t, SimEvent::Kind::kLost, r.job};
        event.worker = workers_[r.worker].name;
        result_.events.push_back(std::move(event));
        result_.outcomes[r.job].lost_at = t;
        continue;
      }
      kept.push_back(r);
    }
    for (const Running& r : kept) running_.push(r);
  }

  void TakeCompletions(double t) {
    while (!running_.empty() && running_.top().t <= t) {
      const Running done = running_.top();
      running_.pop();
      if (done.generation != workers_[done.worker].generation) continue;  // lost, reported
      workers_[done.worker].used -= done.slots;
      slots_in_use_ -= done.slots;
      result_.events.push_back({t, SimEvent::Kind::kDone, done.job});
      result_.outcomes[done.job].done_at = t;
    }
  }

  // Decisions: the highest score among the jobs a worker with room serves, until none fits.
  void Decide(double t) {
    while (const std::optional<Choice> choice = Best(t)) {
      const std::size_t job = pending_[choice->pending];
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(choice->pending));
      const JobTypeConfig& config = *ConfigOf(trace_.jobs[job].type);
      Worker& worker = workers_[choice->worker];
      worker.used += config.slots;
      slots_in_use_ += config.slots;
      SimEvent event{t, SimEvent::Kind::kAdmit, job, config.priority};
      if (!trace_.workers.empty()) event.worker = worker.name;
      result_.events.push_back(std::move(event));
      result_.outcomes[job].admitted_at = t;
      running_.push({t + trace_.jobs[job].duration, order_++, job, choice->worker,
                     worker.generation, config.slots});
    }
  }

  // The pending job with the highest score at `t` among those a worker with room serves (ties:
  // the earlier arrival, then the earlier in the trace), on the most specialised such worker.
  std::optional<Choice> Best(double t) const {
    std::optional<Choice> best;
    double best_score = 0;
    for (std::size_t p = 0; p < pending_.size(); ++p) {
      const TraceJob& job = trace_.jobs[pending_[p]];
      const JobTypeConfig& config = *ConfigOf(job.type);
      if (slots_in_use_ + config.slots > trace_.options.rule.max_concurrency) continue;
      int free_slots = 0;
      std::optional<std::size_t> chosen;
      for (std::size_t w = 0; w < workers_.size(); ++w) {
        const Worker& worker = workers_[w];
        if (!worker.present || !WorkerServes(worker.config, job.type, config)) continue;
        const int free = worker.config.slots - worker.used;
        if (free < config.slots) continue;
        free_slots += free;
        if (!chosen || std::tie(served_[w], worker.listed) <
                           std::tie(served_[*chosen], workers_[*chosen].listed)) {
          chosen = w;
        }
      }
      if (!chosen) continue;
      const double age = t - job.arrival;
      double score = kPerPriority * config.priority + kPerSecondWaited * age +
                     kRarity / static_cast<double>(free_slots);
      if (job.sync) score += kOnDemand + kOnDemandPerSecond * age;
      const bool better =
          !best || score > best_score ||
          (score == best_score &&
           std::tie(job.arrival, pending_[p]) <
               std::tie(trace_.jobs[pending_[best->pending]].arrival, pending_[best->pending]));
      if (better) {
        best = Choice{p, *chosen};
        best_score = score;
      }
    }
    return best;
  }

  const Trace& trace_;
  std::vector<Worker> workers_;
  std::vector<std::size_t> served_;  // registered types each worker serves
  std::vector<Change> changes_;
  std::vector<std::size_t> arrivals_;  // job indices by arrival
  std::size_t next_ = 0, next_change_ = 0;
  std::vector<std::size_t> pending_;
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running_;
  std::uint64_t order_ = 0;
  int slots_in_use_ = 0;
  SimResult result_;
};

}  // namespace

StatusOr<SimResult> SimulateScoring(const Trace& trace) {
  if (!trace.periodic.empty() || !trace.pauses.empty() ||
      trace.options.rule.adaptive_capacity.has_value()) {
    return absl::InvalidArgumentError(
        "the seed-004 policy runs traces of jobs and workers only (no periodic jobs, pauses or "
        "adaptive capacity)");
  }
  return ScoringRun(trace).Run();
}

}  // namespace fairgate::sim
