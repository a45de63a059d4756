#include "sim/simulator.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <queue>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/admission_core.h"
#include "core/join_points.h"
#include "core/latency_rule.h"
#include "fairgate/shedding.h"
#include "nlohmann/json.hpp"
#include "runtime/admission_evidence.h"

namespace fairgate::sim {
namespace {

struct PendingCompletion {
  double t;
  std::uint64_t admission_order;
  std::size_t job;
  core::JobTicket ticket;
  double run_time;  // its duration, stretched by an oversubscribed machine
  bool operator>(const PendingCompletion& o) const {
    return std::tie(t, admission_order) > std::tie(o.t, o.admission_order);
  }
};

std::string Quoted(const std::string& s) { return nlohmann::json(s).dump(); }

// The configuration of `type` in the trace (a default one for a type it does not register,
// which the core refuses before anything asks).
// The memory a running job of `type` holds on the trace's machine (Trace::type_memory).
double TypeMemoryOf(const Trace& trace, const std::string& type) {
  auto it = trace.type_memory.find(type);
  return it == trace.type_memory.end() ? 0 : it->second;
}

const JobTypeConfig& ConfigOf(const Trace& trace, const std::string& type) {
  static const JobTypeConfig kUnregistered;
  for (const auto& [name, config] : trace.types) {
    if (name == type) return config;
  }
  return kUnregistered;
}

// One replay of a trace: the core, the events still to come and what happened so far. Run is
// the event loop (simulator.h gives the order of an instant); each kind of event has its
// handler, which the loop calls at the instant the event is due.
class Simulation {
 public:
  Simulation(const Trace& trace, bool with_evidence, core::AdmissionCore& core)
      : trace_(trace), with_evidence_(with_evidence), core_(core) {
    if (const std::optional<LatencyCapacity>& rule = trace.options.rule.latency_capacity) {
      latency_.emplace(*rule, trace.options.rule.max_concurrency);
    }
  }

  StatusOr<SimResult> Run() {
    Prepare();
    while (HasWork()) {
      const double t = NextInstant();
      if (trace_.until && t > *trace_.until) break;
      core_.Sweep(t);
      if (trace_.cores && slots_running_ > *trace_.cores) overloaded_ += t - last_t_;
      if (trace_.memory && memory_running_ > *trace_.memory) paging_ += t - last_t_;
      last_t_ = t;
      if (t == next_tick_) {
        if (Status s = TickCapacity(t); !s.ok()) return s;
      }
      if (Status s = ChangePauses(t); !s.ok()) return s;
      if (Status s = ChangeWorkers(t); !s.ok()) return s;
      ReportExpired(t);
      if (Status s = Arrive(t); !s.ok()) return s;
      do {
        if (Status s = CompleteDue(t); !s.ok()) return s;
        core_.AdvanceTo(t);
        ReportExpired(t);
        AdmitAll(t);
      } while (!running_.empty() && running_.top().t == t);
    }
    return std::move(result_);
  }

 private:
  struct PauseChange {
    double t;
    const TracePause* pause;
    bool resume;
  };
  struct WorkerChange {
    double t;
    const TraceWorker* worker;
    bool remove;
  };
  // What each live ticket's slot holds: the trace jobs that share it (coalescing), the one that
  // queued it first.
  struct LiveJob {
    core::JobTicket ticket;
    std::vector<std::size_t> calls;
  };

  // The trace's events in the order they happen: arrivals by time (ties in file order); pauses
  // and resumes by time (ties in file order: a pause before its own resume); workers added and
  // removed by time, at one instant removals first, then additions, each in file order (a worker
  // replaced at t is gone before its successor comes).
  void Prepare() {
    result_.jobs = trace_.jobs;
    result_.outcomes.resize(trace_.jobs.size());
    arrivals_ = JobsByArrival(trace_);
    for (const TracePause& pause : trace_.pauses) {
      pause_changes_.push_back({pause.from, &pause, false});
      if (pause.until) pause_changes_.push_back({*pause.until, &pause, true});
    }
    std::stable_sort(pause_changes_.begin(), pause_changes_.end(),
                     [](const PauseChange& a, const PauseChange& b) { return a.t < b.t; });
    for (const TraceWorker& worker : trace_.workers) {
      worker_changes_.push_back({worker.from, &worker, false});
      if (worker.until) worker_changes_.push_back({*worker.until, &worker, true});
    }
    std::stable_sort(worker_changes_.begin(), worker_changes_.end(),
                     [](const WorkerChange& a, const WorkerChange& b) {
                       return std::tie(a.t, b.remove) < std::tie(b.t, a.remove);
                     });
    next_run_.resize(trace_.periodic.size());
    runs_queued_.assign(trace_.periodic.size(), 0);
    for (std::size_t p = 0; p < trace_.periodic.size(); ++p)
      next_run_[p] = trace_.periodic[p].first;
    periodic_of_.resize(trace_.jobs.size());
    next_tick_ = TickAt(1);
  }

  // Whether anything is left to happen.
  bool HasWork() const {
    return next_arrival_ < arrivals_.size() || !running_.empty() ||
           next_pause_ < pause_changes_.size() || next_worker_ < worker_changes_.size() ||
           core_.NextExpiryAt() || core_.NextTokenAt(last_t_) || CapMayGrow() ||
           std::isfinite(NextPeriodicRun());
  }

  // The next instant at which something happens.
  double NextInstant() const {
    double t = std::numeric_limits<double>::infinity();
    if (!running_.empty()) t = running_.top().t;
    if (next_worker_ < worker_changes_.size()) t = std::min(t, worker_changes_[next_worker_].t);
    if (next_arrival_ < arrivals_.size()) {
      t = std::min(t, trace_.jobs[arrivals_[next_arrival_]].arrival);
    }
    t = std::min(t, NextPeriodicRun());
    if (next_pause_ < pause_changes_.size()) t = std::min(t, pause_changes_[next_pause_].t);
    if (std::optional<double> expiry = core_.NextExpiryAt()) t = std::min(t, *expiry);
    // A rate limit's token that pending jobs wait for: a decision then.
    if (std::optional<double> token = core_.NextTokenAt(last_t_)) t = std::min(t, *token);
    return std::min(t, next_tick_);
  }

  double MemoryOf(const std::string& type) const { return TypeMemoryOf(trace_, type); }

  // Adaptive capacity and the latency rule: the k-th interval ends at k * interval (a product,
  // not a sum of k intervals, which drifts).
  double TickAt(std::int64_t k) const {
    const RuleOptions& rule = trace_.options.rule;
    if (rule.adaptive_capacity)
      return static_cast<double>(k) * rule.adaptive_capacity->interval.count();
    if (rule.latency_capacity)
      return static_cast<double>(k) * rule.latency_capacity->interval.count();
    return std::numeric_limits<double>::infinity();
  }
  // With nothing else left to happen, nothing runs, so every later interval's pressure is 0 and
  // no job completes in it: ticks go on only while the rule would still change the cap (adaptive
  // capacity raises it, by one, while jobs are pending and `low` is above 0; the latency rule
  // only returns from a re-measurement), so they end, at max_concurrency at the latest.
  bool CapMayGrow() const {
    const std::optional<AdaptiveCapacity>& adaptive = trace_.options.rule.adaptive_capacity;
    if (latency_) {
      core::LatencyRule rule = *latency_;
      return rule.Next(next_tick_, core_.capacity(), core_.pending_jobs() > 0, {}) !=
             core_.capacity();
    }
    return adaptive &&
           NextCapacityOfAll(*adaptive, core_.capacity(), trace_.options.rule.max_concurrency,
                             /*cpu=*/0.0, Readings(*adaptive, /*paging=*/0.0),
                             core_.pending_jobs() > 0) != core_.capacity();
  }
  // The memory signals of an interval in which the machine paged for `paging` of the time
  // (Trace::memory): memory pressure is that share, memory use what the running jobs hold now.
  std::vector<std::optional<double>> Readings(const AdaptiveCapacity& adaptive,
                                              double paging) const {
    std::vector<std::optional<double>> readings;
    for (const PressureSignal& signal : adaptive.signals) {
      readings.push_back(signal.source == PressureSource::kMemoryUse
                             ? std::min(1.0, memory_running_ / *trace_.memory)
                             : paging);
    }
    return readings;
  }
  // Adaptive capacity's rule, on the pressures of the interval that ends at `t`: CPU's, the time
  // during which the slots in use were more than the machine's cores, and memory's (Readings).
  // The latency rule's instead: on the jobs completed in the interval (their run times, stretched
  // by the machine).
  Status TickCapacity(double t) {
    const int current = core_.capacity();
    int capacity;
    if (latency_) {
      capacity = latency_->Next(t, current, core_.pending_jobs() > 0, completed_runs_);
      completed_runs_.clear();
    } else {
      const AdaptiveCapacity& adaptive = *trace_.options.rule.adaptive_capacity;
      const double interval = adaptive.interval.count();
      capacity = NextCapacityOfAll(adaptive, current, trace_.options.rule.max_concurrency,
                                   overloaded_ / interval, Readings(adaptive, paging_ / interval),
                                   core_.pending_jobs() > 0);
    }
    if (capacity != current) {
      if (Status s = core_.SetCapacity(capacity); !s.ok()) return s;
      result_.capacity_changes.emplace_back(t, capacity);
    }
    overloaded_ = 0;
    paging_ = 0;
    next_tick_ = TickAt(++ticks_ + 1);
    return absl::OkStatus();
  }

  // The pauses and resumes due at `t`.
  Status ChangePauses(double t) {
    for (; next_pause_ < pause_changes_.size() && pause_changes_[next_pause_].t == t;
         ++next_pause_) {
      const PauseChange& change = pause_changes_[next_pause_];
      const TracePause& pause = *change.pause;
      const Status s =
          pause.type
              ? (change.resume ? core_.ResumeType(*pause.type, t) : core_.PauseType(*pause.type, t))
              : (change.resume ? core_.ResumeKey(*pause.key, t) : core_.PauseKey(*pause.key, t));
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // The workers added and removed at `t`; a removal ends the jobs running on the worker.
  Status ChangeWorkers(double t) {
    for (; next_worker_ < worker_changes_.size() && worker_changes_[next_worker_].t == t;
         ++next_worker_) {
      const WorkerChange& change = worker_changes_[next_worker_];
      if (!change.remove) {
        if (Status s = core_.AddWorker(change.worker->name, change.worker->config); !s.ok()) {
          return s;
        }
        continue;
      }
      StatusOr<std::vector<core::LostJob>> lost = core_.RemoveWorker(change.worker->name, t);
      if (!lost.ok()) return lost.status();
      for (const core::LostJob& job : *lost) {
        const std::vector<std::size_t> calls = std::move(live_[job.ticket.slot].calls);
        lost_tickets_.push_back(job.ticket);
        slots_running_ -= ConfigOf(trace_, job.type).slots;
        memory_running_ -= MemoryOf(job.type);
        SimEvent event{t, SimEvent::Kind::kLost, calls.front()};
        event.worker = job.worker;
        result_.events.push_back(std::move(event));
        for (std::size_t call : calls) {
          result_.outcomes[call].lost_at = t;
          RunEnded(call, t);
        }
      }
    }
    return absl::OkStatus();
  }

  // The expiries the core has taken (a pause or a resume takes those due first, as does every
  // decision): reported before the next enqueue can reuse their slots.
  void ReportExpired(double t) {
    for (const core::ExpiredJob& expired : core_.TakeExpired()) {
      const std::vector<std::size_t> calls = std::move(live_[expired.ticket.slot].calls);
      const bool shed = !expired.shed.ok();
      result_.events.push_back(
          {t, shed ? SimEvent::Kind::kShed : SimEvent::Kind::kExpire, calls.front()});
      for (std::size_t job : calls) {
        (shed ? result_.outcomes[job].shed_at : result_.outcomes[job].expired_at) = t;
        RunEnded(job, t);
      }
    }
  }

  // Periodic jobs: when the next run of any is due (infinity for none).
  double NextPeriodicRun() const {
    double at = std::numeric_limits<double>::infinity();
    for (const std::optional<double>& run : next_run_) {
      if (run) at = std::min(at, *run);
    }
    return at;
  }
  // A job that ended (done, expired or lost) at `t`: if it was a periodic job's run, that job's
  // next run arrives an interval later, so that two runs of one periodic job never overlap.
  void RunEnded(std::size_t job, double t) {
    if (!periodic_of_[job]) return;
    const std::size_t p = *periodic_of_[job];
    if (runs_queued_[p] < trace_.periodic[p].runs) next_run_[p] = t + trace_.periodic[p].interval;
  }

  // This instant's arrivals, enqueued: the trace's in file order, then the periodic runs due, in
  // file order.
  Status Arrive(double t) {
    std::vector<std::size_t> arriving;
    for (; next_arrival_ < arrivals_.size() && trace_.jobs[arrivals_[next_arrival_]].arrival == t;
         ++next_arrival_) {
      arriving.push_back(arrivals_[next_arrival_]);
    }
    std::vector<TraceJob>& jobs = result_.jobs;
    for (std::size_t p = 0; p < trace_.periodic.size(); ++p) {
      if (next_run_[p] != t) continue;
      const TracePeriodic& periodic = trace_.periodic[p];
      jobs.push_back(
          {periodic.type, periodic.id, periodic.key, t, periodic.duration, periodic.cost});
      result_.outcomes.emplace_back();
      periodic_of_.push_back(p);
      ++runs_queued_[p];
      next_run_[p].reset();  // the next one is due when this one ends
      arriving.push_back(jobs.size() - 1);
    }
    for (std::size_t index : arriving) {
      if (Status s = Enqueue(index, t); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Enqueues job `index` at `t`; a job that joins the job of its id (coalescing) shares its slot.
  Status Enqueue(std::size_t index, double t) {
    const TraceJob& job = result_.jobs[index];
    StatusOr<core::JobTicket> ticket =
        core_.Enqueue({job.type, job.id, job.key, job.cost,
                       job.sync ? core::Join::kPendingOrRunning : core::Join::kPending},
                      t);
    if (WasShed(ticket.status())) {  // refused by its type's shedding: an outcome, not an error
      result_.events.push_back({t, SimEvent::Kind::kRefuse, index});
      result_.outcomes[index].shed_at = t;
      RunEnded(index, t);
      return absl::OkStatus();
    }
    // A job shed in this one's place leaves first: this one may have its slot.
    if (ticket.ok()) ReportExpired(t);
    if (!ticket.ok()) {
      return absl::Status(
          ticket.status().code(),
          index < trace_.jobs.size()
              ? absl::StrCat("job ", index, ": ", ticket.status().message())
              : absl::StrCat("periodic ", *periodic_of_[index], ": ", ticket.status().message()));
    }
    if (ticket->slot >= live_.size()) live_.resize(ticket->slot + 1);
    LiveJob& slot = live_[ticket->slot];
    if (!slot.calls.empty() && slot.ticket == *ticket) {  // it joined the job of its id
      SimEvent& joined = result_.events.emplace_back(SimEvent{t, SimEvent::Kind::kJoin, index});
      joined.lead = slot.calls.front();
      // A job that already runs: its wait for admission is over at once.
      const std::optional<double>& started = result_.outcomes[slot.calls.front()].admitted_at;
      if (started) result_.outcomes[index].admitted_at = t;
      slot.calls.push_back(index);
    } else {
      slot = {*ticket, {index}};
    }
    return absl::OkStatus();
  }

  // The completions due at `t`, in the order their jobs were admitted (a job lost with its
  // worker has ended already: its completion changes nothing).
  Status CompleteDue(double t) {
    while (!running_.empty() && running_.top().t == t) {
      const PendingCompletion done = running_.top();
      running_.pop();
      if (auto lost = std::find(lost_tickets_.begin(), lost_tickets_.end(), done.ticket);
          lost != lost_tickets_.end()) {
        lost_tickets_.erase(lost);
        continue;
      }
      const std::vector<std::size_t> calls = std::move(live_[done.ticket.slot].calls);
      if (Status s = core_.Complete(done.ticket, done.run_time, t); !s.ok()) return s;
      if (latency_) {
        completed_runs_.push_back({result_.jobs[done.job].type,
                                   *result_.outcomes[calls.front()].admitted_at, done.run_time});
      }
      slots_running_ -= ConfigOf(trace_, result_.jobs[done.job].type).slots;
      memory_running_ -= MemoryOf(result_.jobs[done.job].type);
      result_.events.push_back({t, SimEvent::Kind::kDone, calls.front()});
      for (std::size_t job : calls) {
        result_.outcomes[job].done_at = t;
        RunEnded(job, t);
      }
    }
    return absl::OkStatus();
  }

  // Admits until nothing is admissible at `t`. A coalesced job runs for the duration of the call
  // the runtime would run (core::ChooseRunner); the jobs started at one instant run slower on an
  // oversubscribed machine, by the slots in use once they all started.
  void AdmitAll(double t) {
    const std::vector<TraceJob>& jobs = result_.jobs;
    std::vector<PendingCompletion> started;
    while (std::optional<core::Admission> admitted = core_.NextAdmission(t)) {
      const std::vector<std::size_t>& calls = live_[admitted->ticket.slot].calls;
      result_.events.push_back({t, SimEvent::Kind::kAdmit, calls.front(),
                                admitted->effective_priority, admitted->waited_on_conflict,
                                admitted->borrowed, std::string(admitted->worker)});
      if (with_evidence_) result_.evidence.push_back(internal::ToEvidence(*admitted, t));
      for (std::size_t job : calls) result_.outcomes[job].admitted_at = t;
      const std::size_t runner =
          *core::ChooseRunner(calls, ConfigOf(trace_, jobs[calls.front()].type).coalesce,
                              [&](std::size_t job) { return jobs[job].sync; });
      slots_running_ += ConfigOf(trace_, jobs[runner].type).slots;
      memory_running_ += MemoryOf(jobs[runner].type);
      started.push_back({t, admissions_++, runner, admitted->ticket, jobs[runner].duration});
      ReportExpired(t);  // a job its type's shedding refused after this admission
    }
    double stretch =
        trace_.cores ? std::max(1.0, static_cast<double>(slots_running_) / *trace_.cores) : 1.0;
    if (trace_.memory) stretch = std::max(stretch, memory_running_ / *trace_.memory);
    for (PendingCompletion& job : started) {
      job.run_time *= stretch;
      job.t = t + job.run_time;
      running_.push(job);
    }
  }

  const Trace& trace_;
  const bool with_evidence_;
  core::AdmissionCore& core_;
  SimResult result_;
  // The events to come, each list in its order (Prepare), and how far each has been taken.
  std::vector<std::size_t> arrivals_;  // indexes of trace_.jobs
  std::size_t next_arrival_ = 0;
  std::vector<PauseChange> pause_changes_;
  std::size_t next_pause_ = 0;
  std::vector<WorkerChange> worker_changes_;
  std::size_t next_worker_ = 0;
  // Periodic jobs: when each one's next run arrives (none once its runs are all queued, or while
  // one runs), how many were queued, and which periodic job a job is a run of (by job index).
  std::vector<std::optional<double>> next_run_;
  std::vector<int> runs_queued_;
  std::vector<std::optional<std::size_t>> periodic_of_;
  // Live jobs by ticket slot; the running ones by completion time; jobs lost with their worker,
  // whose completions, still queued, change nothing.
  std::vector<LiveJob> live_;
  std::priority_queue<PendingCompletion, std::vector<PendingCompletion>, std::greater<>> running_;
  std::vector<core::JobTicket> lost_tickets_;
  std::uint64_t admissions_ = 0;
  // The machine (Trace::cores): the slots in use, and for adaptive capacity the time since its
  // last tick during which they were more than the cores (some job waited for a CPU).
  int slots_running_ = 0;
  double overloaded_ = 0, last_t_ = 0;
  // With Trace::memory: the memory the running jobs hold, and the time since the last tick
  // during which it was more than the machine's (some job waited for memory).
  double memory_running_ = 0;
  double paging_ = 0;
  std::int64_t ticks_ = 0;
  // With the latency rule (RuleOptions::latency_capacity): the rule and the runs completed since
  // its last interval ended.
  std::optional<core::LatencyRule> latency_;
  std::vector<core::RunSample> completed_runs_;
  double next_tick_ = std::numeric_limits<double>::infinity();
};

}  // namespace

StatusOr<SimResult> Simulate(const Trace& trace, bool with_evidence) {
  if (trace.options.rule.adaptive_capacity) {
    for (const PressureSignal& signal : trace.options.rule.adaptive_capacity->signals) {
      const bool memory = signal.source == PressureSource::kMemorySome ||
                          signal.source == PressureSource::kMemoryUse;
      if (!memory || !trace.memory) {
        return absl::InvalidArgumentError(
            "adaptive_capacity.signals: the simulator's machine models CPU and, with memory, "
            "memory some and memory use only");
      }
    }
  }
  StatusOr<std::unique_ptr<core::AdmissionCore>> created =
      core::AdmissionCore::Create(trace.options.rule);
  if (!created.ok()) return created.status();
  core::AdmissionCore& core = **created;
  for (const auto& [name, config] : trace.types) {
    if (Status s = core.RegisterType(name, config); !s.ok()) return s;
  }
  for (const auto& [name, group] : trace.groups) {
    if (group.weight) {
      if (Status s = core.SetGroupWeight(name, *group.weight); !s.ok()) return s;
    }
    if (group.limits) {
      if (Status s = core.SetGroupLimits(name, *group.limits); !s.ok()) return s;
    }
  }
  for (const auto& [name, key] : trace.keys) {
    if (key.group) {
      if (Status s = core.SetKeyGroup(name, *key.group, 0); !s.ok()) return s;
    }
    if (key.weight) {
      if (Status s = core.SetKeyWeight(name, *key.weight); !s.ok()) return s;
    }
    if (key.limits) {
      if (Status s = core.SetKeyLimits(name, *key.limits); !s.ok()) return s;
    }
  }
  return Simulation(trace, with_evidence, core).Run();
}

std::string FormatNumber(double value) {
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<long long>(value));
  }
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, end);
}

std::string FormatEvent(const Trace& trace, const SimResult& result, const SimEvent& event) {
  const TraceJob& job = result.jobs[event.job];
  std::string tiers;
  if (trace.options.rule.aging && event.kind == SimEvent::Kind::kAdmit) {
    tiers = absl::StrCat(",\"tier\":", ConfigOf(trace, job.type).priority,
                         ",\"effective_tier\":", event.effective_priority);
  }
  std::string worker =
      event.worker.empty() ? std::string() : absl::StrCat(",\"worker\":", Quoted(event.worker));
  // The key's group, when the trace puts it in one (traces without groups keep their events).
  if (const std::string* group = GroupOf(trace, job.key)) {
    worker = absl::StrCat(",\"group\":", Quoted(*group), worker);
  }
  // Only for a borrower (RuleOptions::lending): traces without lending keep their events.
  if (event.borrowed) tiers += ",\"borrowed\":true";
  return absl::StrCat("{\"t\":", FormatNumber(event.t), ",\"event\":\"",
                      event.kind == SimEvent::Kind::kAdmit    ? "admit"
                      : event.kind == SimEvent::Kind::kDone   ? "done"
                      : event.kind == SimEvent::Kind::kExpire ? "expire"
                      : event.kind == SimEvent::Kind::kLost   ? "lost"
                      : event.kind == SimEvent::Kind::kRefuse ? "refuse"
                      : event.kind == SimEvent::Kind::kShed   ? "shed"
                                                              : "join",
                      "\",\"type\":", Quoted(job.type), ",\"id\":", Quoted(job.id),
                      ",\"key\":", Quoted(job.key), tiers, worker, "}");
}

std::string FormatKeyTable(const SimResult& result) {
  struct Row {
    std::string key;
    std::size_t jobs = 0, admitted = 0, shed = 0;
    double total_wait = 0, worst_wait = 0;
  };
  std::vector<Row> rows;
  bool any_shed = false;
  for (std::size_t i = 0; i < result.jobs.size(); ++i) {
    const TraceJob& job = result.jobs[i];
    auto it =
        std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.key == job.key; });
    if (it == rows.end()) it = rows.insert(rows.end(), Row{job.key});
    ++it->jobs;
    if (result.outcomes[i].shed_at) {
      ++it->shed;
      any_shed = true;
    }
    if (const auto& admitted = result.outcomes[i].admitted_at) {
      const double wait = *admitted - job.arrival;
      ++it->admitted;
      it->total_wait += wait;
      it->worst_wait = std::max(it->worst_wait, wait);
    }
  }
  // The shed column only where a type shed (traces without shedding keep their tables).
  std::string out = absl::StrFormat("  %-16s %6s %9s %10s %11s", "key", "jobs", "admitted",
                                    "mean wait", "worst wait");
  out += any_shed ? absl::StrFormat(" %6s\n", "shed") : "\n";
  for (const Row& row : rows) {
    const std::string mean =
        row.admitted ? absl::StrFormat("%.2f", row.total_wait / row.admitted) : std::string("-");
    const std::string worst =
        row.admitted ? absl::StrFormat("%.2f", row.worst_wait) : std::string("-");
    absl::StrAppendFormat(&out, "  %-16s %6d %9d %10s %11s", Quoted(row.key), row.jobs,
                          row.admitted, mean, worst);
    out += any_shed ? absl::StrFormat(" %6d\n", row.shed) : "\n";
  }
  return out;
}

}  // namespace fairgate::sim
