#include "sim/simulator.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <queue>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/admission_core.h"
#include "nlohmann/json.hpp"

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
const JobTypeConfig& ConfigOf(const Trace& trace, const std::string& type) {
  static const JobTypeConfig kUnregistered;
  for (const auto& [name, config] : trace.types) {
    if (name == type) return config;
  }
  return kUnregistered;
}

}  // namespace

StatusOr<SimResult> Simulate(const Trace& trace, bool with_evidence) {
  StatusOr<std::unique_ptr<core::AdmissionCore>> created =
      core::AdmissionCore::Create(trace.options);
  if (!created.ok()) return created.status();
  core::AdmissionCore& core = **created;
  for (const auto& [name, config] : trace.types) {
    if (Status s = core.RegisterType(name, config); !s.ok()) return s;
  }
  for (const auto& [name, key] : trace.keys) {
    if (key.weight) {
      if (Status s = core.SetKeyWeight(name, *key.weight); !s.ok()) return s;
    }
    if (key.limits) {
      if (Status s = core.SetKeyLimits(name, *key.limits); !s.ok()) return s;
    }
  }

  SimResult result;
  // Every job: the trace's, then the runs of its periodic jobs as they arrive.
  std::vector<TraceJob>& jobs = result.jobs;
  jobs = trace.jobs;
  std::vector<std::size_t> arrivals(trace.jobs.size());
  std::iota(arrivals.begin(), arrivals.end(), 0);
  std::stable_sort(arrivals.begin(), arrivals.end(), [&](std::size_t a, std::size_t b) {
    return trace.jobs[a].arrival < trace.jobs[b].arrival;
  });
  // Pauses and resumes by time, ties in file order (a pause before its own resume).
  struct PauseChange {
    double t;
    const TracePause* pause;
    bool resume;
  };
  std::vector<PauseChange> pause_changes;
  for (const TracePause& pause : trace.pauses) {
    pause_changes.push_back({pause.from, &pause, false});
    if (pause.until) pause_changes.push_back({*pause.until, &pause, true});
  }
  std::stable_sort(pause_changes.begin(), pause_changes.end(),
                   [](const PauseChange& a, const PauseChange& b) { return a.t < b.t; });
  std::size_t next_change = 0;
  // Workers added and removed by time; at one instant removals first, then additions, each in
  // file order (a worker replaced at t is gone before its successor comes).
  struct WorkerChange {
    double t;
    const TraceWorker* worker;
    bool remove;
  };
  std::vector<WorkerChange> worker_changes;
  for (const TraceWorker& worker : trace.workers) {
    worker_changes.push_back({worker.from, &worker, false});
    if (worker.until) worker_changes.push_back({*worker.until, &worker, true});
  }
  std::stable_sort(worker_changes.begin(), worker_changes.end(),
                   [](const WorkerChange& a, const WorkerChange& b) {
                     return std::tie(a.t, b.remove) < std::tie(b.t, a.remove);
                   });
  std::size_t next_worker_change = 0;
  // Jobs lost with their worker: their completions, still queued, change nothing.
  std::vector<core::JobTicket> lost_tickets;

  // What each live ticket's slot holds: the trace jobs that share it (coalescing), the one that
  // queued it first.
  struct LiveJob {
    core::JobTicket ticket;
    std::vector<std::size_t> calls;
  };
  std::vector<LiveJob> live;
  // Periodic jobs: when each one's next run arrives (none once its runs are all queued), and
  // which periodic job a run belongs to.
  std::vector<std::optional<double>> next_run(trace.periodic.size());
  std::vector<int> runs_queued(trace.periodic.size(), 0);
  for (std::size_t p = 0; p < trace.periodic.size(); ++p) next_run[p] = trace.periodic[p].first;
  std::vector<std::optional<std::size_t>> periodic_of(trace.jobs.size());
  // A run that ended (done or expired) at `t`: its periodic job's next one arrives an interval
  // later, so that two runs of one periodic job never overlap.
  auto run_ended = [&](std::size_t job, double t) {
    if (!periodic_of[job]) return;
    const std::size_t p = *periodic_of[job];
    if (runs_queued[p] < trace.periodic[p].runs) next_run[p] = t + trace.periodic[p].interval;
  };
  auto next_periodic = [&] {
    double at = std::numeric_limits<double>::infinity();
    for (const std::optional<double>& run : next_run) {
      if (run) at = std::min(at, *run);
    }
    return at;
  };
  // The expiries the core has taken (a pause or a resume takes those due first, as does every
  // decision): reported before the next enqueue can reuse their slots.
  auto report_expired = [&](double t) {
    for (const core::ExpiredJob& expired : core.TakeExpired()) {
      const std::vector<std::size_t> calls = std::move(live[expired.ticket.slot].calls);
      result.events.push_back({t, SimEvent::Kind::kExpire, calls.front()});
      for (std::size_t job : calls) {
        result.outcomes[job].expired_at = t;
        run_ended(job, t);
      }
    }
  };
  std::priority_queue<PendingCompletion, std::vector<PendingCompletion>, std::greater<>> running;
  std::uint64_t admissions = 0;

  // The machine (trace.cores): the slots in use, and for adaptive capacity the time since its
  // last tick during which they were more than the cores (some job waited for a CPU).
  int slots_running = 0;
  double overloaded = 0, last_t = 0;
  const std::optional<AdaptiveCapacity>& adaptive = trace.options.rule.adaptive_capacity;
  // The k-th interval ends at k * interval (a product, not a sum of k intervals, which drifts).
  std::int64_t ticks = 0;
  auto tick_at = [&](std::int64_t k) {
    return adaptive ? static_cast<double>(k) * adaptive->interval.count()
                    : std::numeric_limits<double>::infinity();
  };
  double next_tick = tick_at(1);
  // With nothing else left to happen, nothing runs, so every later interval's pressure is 0:
  // ticks go on only while the rule would still change the cap at that pressure (it raises it,
  // by one, while jobs are pending and `low` is above 0), so they end, at max_concurrency at the
  // latest.
  auto cap_may_grow = [&] {
    return adaptive && NextCapacity(*adaptive, core.capacity(), trace.options.rule.max_concurrency,
                                    /*pressure=*/0.0, core.pending_jobs() > 0) != core.capacity();
  };

  result.outcomes.resize(trace.jobs.size());
  std::size_t next = 0;
  while (next < arrivals.size() || !running.empty() || next_change < pause_changes.size() ||
         next_worker_change < worker_changes.size() || core.NextExpiryAt() || cap_may_grow() ||
         std::isfinite(next_periodic())) {
    double t = std::numeric_limits<double>::infinity();
    if (!running.empty()) t = running.top().t;
    if (next_worker_change < worker_changes.size()) {
      t = std::min(t, worker_changes[next_worker_change].t);
    }
    if (next < arrivals.size()) t = std::min(t, trace.jobs[arrivals[next]].arrival);
    t = std::min(t, next_periodic());
    if (next_change < pause_changes.size()) t = std::min(t, pause_changes[next_change].t);
    if (std::optional<double> expiry = core.NextExpiryAt()) t = std::min(t, *expiry);
    t = std::min(t, next_tick);
    if (trace.until && t > *trace.until) break;

    core.Sweep(t);
    if (trace.cores && slots_running > *trace.cores) overloaded += t - last_t;
    last_t = t;
    if (t == next_tick) {  // adaptive capacity's rule, on the pressure of the interval
      const int current = core.capacity();
      const int capacity =
          NextCapacity(*adaptive, current, trace.options.rule.max_concurrency,
                       overloaded / adaptive->interval.count(), core.pending_jobs() > 0);
      if (capacity != current) {
        if (Status s = core.SetCapacity(capacity); !s.ok()) return s;
        result.capacity_changes.emplace_back(t, capacity);
      }
      overloaded = 0;
      next_tick = tick_at(++ticks + 1);
    }
    for (; next_change < pause_changes.size() && pause_changes[next_change].t == t; ++next_change) {
      const PauseChange& change = pause_changes[next_change];
      const TracePause& pause = *change.pause;
      const Status s =
          pause.type
              ? (change.resume ? core.ResumeType(*pause.type, t) : core.PauseType(*pause.type, t))
              : (change.resume ? core.ResumeKey(*pause.key, t) : core.PauseKey(*pause.key, t));
      if (!s.ok()) return s;
    }
    for (; next_worker_change < worker_changes.size() && worker_changes[next_worker_change].t == t;
         ++next_worker_change) {
      const WorkerChange& change = worker_changes[next_worker_change];
      if (!change.remove) {
        if (Status s = core.AddWorker(change.worker->name, change.worker->config); !s.ok()) {
          return s;
        }
        continue;
      }
      StatusOr<std::vector<core::LostJob>> lost = core.RemoveWorker(change.worker->name, t);
      if (!lost.ok()) return lost.status();
      for (const core::LostJob& job : *lost) {
        const std::vector<std::size_t> calls = std::move(live[job.ticket.slot].calls);
        lost_tickets.push_back(job.ticket);
        slots_running -= ConfigOf(trace, job.type).slots;
        SimEvent event{t, SimEvent::Kind::kLost, calls.front()};
        event.worker = job.worker;
        result.events.push_back(std::move(event));
        for (std::size_t call : calls) {
          result.outcomes[call].lost_at = t;
          run_ended(call, t);
        }
      }
    }
    report_expired(t);
    // This instant's arrivals: the trace's in file order, then periodic runs in file order.
    std::vector<std::size_t> arriving;
    for (; next < arrivals.size() && trace.jobs[arrivals[next]].arrival == t; ++next) {
      arriving.push_back(arrivals[next]);
    }
    for (std::size_t p = 0; p < trace.periodic.size(); ++p) {
      if (next_run[p] != t) continue;
      const TracePeriodic& periodic = trace.periodic[p];
      jobs.push_back(
          {periodic.type, periodic.id, periodic.key, t, periodic.duration, periodic.cost});
      result.outcomes.emplace_back();
      periodic_of.push_back(p);
      ++runs_queued[p];
      next_run[p].reset();  // the next one is due when this one ends
      arriving.push_back(jobs.size() - 1);
    }
    for (std::size_t index : arriving) {
      const TraceJob& job = jobs[index];
      StatusOr<core::JobTicket> ticket =
          core.Enqueue({job.type, job.id, job.key, job.cost,
                        job.sync ? core::Join::kPendingOrRunning : core::Join::kPending},
                       t);
      if (!ticket.ok()) {
        return absl::Status(
            ticket.status().code(),
            index < trace.jobs.size()
                ? absl::StrCat("job ", index, ": ", ticket.status().message())
                : absl::StrCat("periodic ", *periodic_of[index], ": ", ticket.status().message()));
      }
      if (ticket->slot >= live.size()) live.resize(ticket->slot + 1);
      LiveJob& slot = live[ticket->slot];
      if (!slot.calls.empty() && slot.ticket == *ticket) {  // it joined the job of its id
        result.events.push_back({t, SimEvent::Kind::kJoin, index});
        // A job that already runs: its wait for admission is over at once.
        const std::optional<double>& started = result.outcomes[slot.calls.front()].admitted_at;
        if (started) result.outcomes[index].admitted_at = t;
        slot.calls.push_back(index);
      } else {
        slot = {*ticket, {index}};
      }
    }
    do {
      while (!running.empty() && running.top().t == t) {
        const PendingCompletion done = running.top();
        running.pop();
        if (auto lost = std::find(lost_tickets.begin(), lost_tickets.end(), done.ticket);
            lost != lost_tickets.end()) {
          lost_tickets.erase(lost);  // ended when its worker went
          continue;
        }
        const std::vector<std::size_t> calls = std::move(live[done.ticket.slot].calls);
        if (Status s = core.Complete(done.ticket, done.run_time, t); !s.ok()) return s;
        slots_running -= ConfigOf(trace, jobs[done.job].type).slots;
        result.events.push_back({t, SimEvent::Kind::kDone, calls.front()});
        for (std::size_t job : calls) {
          result.outcomes[job].done_at = t;
          run_ended(job, t);
        }
      }
      core.AdvanceTo(t);
      report_expired(t);
      std::vector<PendingCompletion> started;  // run times set once all of this instant's are in
      while (std::optional<core::Admission> admitted = core.NextAdmission(t)) {
        const std::vector<std::size_t>& calls = live[admitted->ticket.slot].calls;
        result.events.push_back({t, SimEvent::Kind::kAdmit, calls.front(),
                                 admitted->effective_priority, admitted->waited_on_conflict,
                                 std::string(admitted->worker)});
        if (with_evidence) result.evidence.push_back(core::ToEvidence(*admitted, t));
        for (std::size_t job : calls) result.outcomes[job].admitted_at = t;
        // The call whose function runs it, as the runtime chooses: the first that waits (sync),
        // else the first Submit (join) or the latest (supersede). Its duration is the job's.
        auto runner = std::find_if(calls.begin(), calls.end(),
                                   [&](std::size_t job) { return jobs[job].sync; });
        if (runner == calls.end()) {
          runner = ConfigOf(trace, jobs[calls.front()].type).coalesce == Coalesce::kSupersede
                       ? calls.end() - 1
                       : calls.begin();
        }
        slots_running += ConfigOf(trace, jobs[*runner].type).slots;
        started.push_back({t, admissions++, *runner, admitted->ticket, jobs[*runner].duration});
      }
      // On an oversubscribed machine the jobs started now run slower, by the slots in use now.
      const double stretch =
          trace.cores ? std::max(1.0, static_cast<double>(slots_running) / *trace.cores) : 1.0;
      for (PendingCompletion& job : started) {
        job.run_time *= stretch;
        job.t = t + job.run_time;
        running.push(job);
      }
    } while (!running.empty() && running.top().t == t);
  }
  return result;
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
  const std::string worker =
      event.worker.empty() ? std::string() : absl::StrCat(",\"worker\":", Quoted(event.worker));
  return absl::StrCat("{\"t\":", FormatNumber(event.t), ",\"event\":\"",
                      event.kind == SimEvent::Kind::kAdmit    ? "admit"
                      : event.kind == SimEvent::Kind::kDone   ? "done"
                      : event.kind == SimEvent::Kind::kExpire ? "expire"
                      : event.kind == SimEvent::Kind::kLost   ? "lost"
                                                              : "join",
                      "\",\"type\":", Quoted(job.type), ",\"id\":", Quoted(job.id),
                      ",\"key\":", Quoted(job.key), tiers, worker, "}");
}

std::string FormatKeyTable(const SimResult& result) {
  struct Row {
    std::string key;
    std::size_t jobs = 0, admitted = 0;
    double total_wait = 0, worst_wait = 0;
  };
  std::vector<Row> rows;
  for (std::size_t i = 0; i < result.jobs.size(); ++i) {
    const TraceJob& job = result.jobs[i];
    auto it =
        std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.key == job.key; });
    if (it == rows.end()) it = rows.insert(rows.end(), Row{job.key});
    ++it->jobs;
    if (const auto& admitted = result.outcomes[i].admitted_at) {
      const double wait = *admitted - job.arrival;
      ++it->admitted;
      it->total_wait += wait;
      it->worst_wait = std::max(it->worst_wait, wait);
    }
  }
  std::string out = absl::StrFormat("  %-16s %6s %9s %10s %11s\n", "key", "jobs", "admitted",
                                    "mean wait", "worst wait");
  for (const Row& row : rows) {
    const std::string mean =
        row.admitted ? absl::StrFormat("%.2f", row.total_wait / row.admitted) : std::string("-");
    const std::string worst =
        row.admitted ? absl::StrFormat("%.2f", row.worst_wait) : std::string("-");
    absl::StrAppendFormat(&out, "  %-16s %6d %9d %10s %11s\n", Quoted(row.key), row.jobs,
                          row.admitted, mean, worst);
  }
  return out;
}

}  // namespace fairgate::sim
