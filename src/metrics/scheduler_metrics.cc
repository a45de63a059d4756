#include "metrics/scheduler_metrics.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "metrics/prometheus_writer.h"

namespace fairgate::metrics {

void SecondsHistogram::Observe(double seconds) {
  // The first bucket takes one comparison: a server with room admits without waiting, and a
  // short job's run falls there too. The search is the rest (about 50 instructions per call,
  // under the scheduler's lock, twice per job).
  const std::size_t at =
      seconds <= kBounds[0]
          ? 0
          : static_cast<std::size_t>(std::lower_bound(kBounds.begin(), kBounds.end(), seconds) -
                                     kBounds.begin());
  counts_[at]++;
  sum_ += seconds;
  count_++;
}

std::vector<std::uint64_t> SecondsHistogram::Cumulative() const {
  std::vector<std::uint64_t> cumulative(kBounds.size());
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < cumulative.size(); ++i) cumulative[i] = running += counts_[i];
  return cumulative;
}

std::string StatusCodeLabel(absl::StatusCode code) {
  return absl::AsciiStrToLower(absl::StatusCodeToString(code));
}

void SchedulerMetrics::AddType(std::uint32_t index, const std::string& name, int priority) {
  if (index < types_.size()) return;  // registered again with the same config
  types_.resize(index + 1);
  types_[index].name = name;
  types_[index].priority = priority;
}

void SchedulerMetrics::Admitted(std::uint32_t type, double wait, bool waited_on_conflict,
                                bool borrowed) {
  TypeCounts& t = types_[type];
  t.admitted++;
  t.borrowed += borrowed;
  t.wait.Observe(wait);
  if (waited_on_conflict) {
    waited_conflict_++;
  } else if (wait > 0) {
    waited_capacity_++;
  }
}

void SchedulerMetrics::Completed(std::uint32_t type, absl::StatusCode status, double run_time) {
  TypeCounts& t = types_[type];
  const auto code = static_cast<std::size_t>(status);  // canonical; kUnknown if ever not
  t.completed[code < kStatusCodes ? code : static_cast<std::size_t>(absl::StatusCode::kUnknown)]++;
  t.run.Observe(run_time);
}

void SchedulerMetrics::Write(std::string& out, const Snapshot& snapshot,
                             std::uint64_t promotions) const {
  PrometheusWriter w(out);
  std::vector<std::string> tiers;  // the label text of each type's tier
  for (const TypeCounts& t : types_) tiers.push_back(absl::StrCat(t.priority));
  WriteJobCounts(w, tiers);
  WriteGauges(w, snapshot);
  WriteHistogramsAndTotals(w, tiers, snapshot, promotions);
}

void SchedulerMetrics::WriteJobCounts(PrometheusWriter& w,
                                      const std::vector<std::string>& tiers) const {
  auto per_type = [&](const char* name, const char* help, auto value) {
    w.Family(name, "counter", help);
    for (std::size_t i = 0; i < types_.size(); ++i) {
      w.Sample(name, {{"tier", tiers[i]}, {"type", types_[i].name}},
               static_cast<double>(value(types_[i])));
    }
  };
  per_type("fairgate_jobs_enqueued_total", "Jobs accepted into the queue.",
           [](const TypeCounts& t) { return t.enqueued; });
  per_type("fairgate_jobs_admitted_total", "Jobs admitted to run.",
           [](const TypeCounts& t) { return t.admitted; });
  per_type("fairgate_jobs_borrowed_total",
           "Jobs admitted over their tier's cap, on slots no admissible job wanted (lending).",
           [](const TypeCounts& t) { return t.borrowed; });
  per_type("fairgate_jobs_cancelled_total",
           "Pending jobs that left the queue without running (context done, or shutdown).",
           [](const TypeCounts& t) { return t.cancelled; });
  per_type("fairgate_jobs_expired_total",
           "Pending jobs that left the queue at their type's max_queue_wait, without running.",
           [](const TypeCounts& t) { return t.expired; });
  per_type("fairgate_jobs_joined_total",
           "Calls that joined a pending or running job of their id instead of queueing one "
           "(coalescing).",
           [](const TypeCounts& t) { return t.joined; });

  w.Family("fairgate_jobs_completed_total", "counter",
           "Jobs that ran, by the status they returned.");
  for (std::size_t i = 0; i < types_.size(); ++i) {
    for (std::size_t code = 0; code < kStatusCodes; ++code) {
      const std::uint64_t n = types_[i].completed[code];
      if (n == 0) continue;  // as before: a code appears once a job has returned it
      const std::string status = StatusCodeLabel(static_cast<absl::StatusCode>(code));
      w.Sample("fairgate_jobs_completed_total",
               {{"status", status}, {"tier", tiers[i]}, {"type", types_[i].name}},
               static_cast<double>(n));
    }
  }
  w.Family("fairgate_jobs_rejected_total", "counter",
           "Calls refused before queueing, by reason (the status code).");
  for (const auto& [code, n] : rejected_) {
    const std::string reason = StatusCodeLabel(code);
    w.Sample("fairgate_jobs_rejected_total", {{"reason", reason}}, static_cast<double>(n));
  }
  w.Family("fairgate_jobs_waited_total", "counter",
           "Admitted jobs that had to wait, by why: a busy conflict resource, or capacity (a "
           "global, tier, type or key cap, or jobs ahead).");
  w.Sample("fairgate_jobs_waited_total", {{"reason", "capacity"}},
           static_cast<double>(waited_capacity_));
  w.Sample("fairgate_jobs_waited_total", {{"reason", "conflict"}},
           static_cast<double>(waited_conflict_));
}

void SchedulerMetrics::WriteGauges(PrometheusWriter& w, const Snapshot& snapshot) const {
  auto gauge_per_type = [&](const char* name, const char* help, auto value) {
    w.Family(name, "gauge", help);
    for (const TypeSnapshot& t : snapshot.types) {
      const std::string tier = absl::StrCat(t.priority);
      w.Sample(name, {{"tier", tier}, {"type", t.name}}, static_cast<double>(value(t)));
    }
  };
  gauge_per_type("fairgate_jobs_pending", "Jobs waiting for admission.",
                 [](const TypeSnapshot& t) { return t.pending; });
  gauge_per_type("fairgate_jobs_running", "Jobs running.",
                 [](const TypeSnapshot& t) { return t.running; });
  gauge_per_type("fairgate_type_paused", "1 while the type is paused (PauseType), else 0.",
                 [](const TypeSnapshot& t) { return t.paused ? 1 : 0; });
  // Shedding (JobTypeConfig::shedding): only for the types that have it.
  if (std::any_of(snapshot.types.begin(), snapshot.types.end(),
                  [](const TypeSnapshot& t) { return t.shedding.has_value(); })) {
    w.Family("fairgate_type_shedding", "gauge",
             "1 while the type's queue stands over its shedding target and it refuses its "
             "heaviest keys' work, else 0 (types with JobTypeConfig::shedding).");
    for (const TypeSnapshot& t : snapshot.types) {
      if (t.shedding) {
        w.Sample("fairgate_type_shedding", {{"type", t.name}}, t.shedding->standing ? 1 : 0);
      }
    }
    w.Family("fairgate_jobs_shed_total", "counter",
             "Jobs refused by their type's shedding: calls at their arrival (counted in "
             "fairgate_jobs_rejected_total too) and pending jobs taken from the queue, the "
             "heaviest keys' first.");
    for (const TypeSnapshot& t : snapshot.types) {
      if (t.shedding) {
        w.Sample("fairgate_jobs_shed_total", {{"type", t.name}},
                 static_cast<double>(t.shedding->shed));
      }
    }
  }
  gauge_per_type("fairgate_type_unserved",
                 "1 while workers are declared and none serves the type (its jobs wait for one), "
                 "else 0.",
                 [&](const TypeSnapshot& t) {
                   const auto& unserved = snapshot.types_without_worker;
                   return std::find(unserved.begin(), unserved.end(), t.name) != unserved.end() ? 1
                                                                                                : 0;
                 });
  w.Family("fairgate_worker_slots", "gauge", "A declared worker's slots (AddWorker).");
  for (const WorkerSnapshot& worker : snapshot.workers) {
    w.Sample("fairgate_worker_slots", {{"worker", worker.name}}, static_cast<double>(worker.slots));
  }
  w.Family("fairgate_worker_slots_in_use", "gauge", "A declared worker's slots its jobs hold.");
  for (const WorkerSnapshot& worker : snapshot.workers) {
    w.Sample("fairgate_worker_slots_in_use", {{"worker", worker.name}},
             static_cast<double>(worker.slots_in_use));
  }
  // Rate limits (fairgate/rate_limit.h): the global one as type "", a type's by its name; only
  // those set, and the families only with one (a scheduler without keeps its output's shape).
  std::vector<std::pair<std::string, const RateSnapshot*>> rates;
  if (snapshot.rate_limit) rates.emplace_back("", &*snapshot.rate_limit);
  for (const TypeSnapshot& t : snapshot.types) {
    if (t.rate_limit) rates.emplace_back(t.name, &*t.rate_limit);
  }
  // Each family with its kind, help and what it reads of a bucket.
  const struct {
    const char* name;
    const char* kind;
    const char* help;
    double (*value)(const RateSnapshot&);
  } families[] = {
      {"fairgate_rate_limit_tokens", "gauge",
       "A rate limit's tokens now (type \"\": the global one).",
       [](const RateSnapshot& r) { return r.tokens; }},
      {"fairgate_rate_limit_taken_total", "counter",
       "Admissions that took a token of the rate limit.",
       [](const RateSnapshot& r) { return static_cast<double>(r.taken); }},
      {"fairgate_rate_limit_refused_total", "counter",
       "Decisions that passed over pending jobs for want of the rate limit's token.",
       [](const RateSnapshot& r) { return static_cast<double>(r.refused); }},
  };
  for (const auto& family : families) {
    if (rates.empty()) break;
    w.Family(family.name, family.kind, family.help);
    for (const auto& [type, r] : rates) w.Sample(family.name, {{"type", type}}, family.value(*r));
  }
  if (snapshot.keys_held_by_rate) {
    w.Family("fairgate_keys_held_by_rate", "gauge",
             "Fairness keys whose rate limit has no token now (KeyLimits::rate_limit).");
    w.Sample("fairgate_keys_held_by_rate", {}, static_cast<double>(*snapshot.keys_held_by_rate));
  }
  w.Family("fairgate_keys_paused", "gauge", "Fairness keys paused now (PauseKey).");
  w.Sample("fairgate_keys_paused", {}, static_cast<double>(snapshot.paused_keys.size()));
  w.Family("fairgate_jobs_aged_in", "gauge",
           "Pending jobs of lower tiers that aged into this tier.");
  for (const TierSnapshot& t : snapshot.tiers) {
    const std::string tier = absl::StrCat(t.priority);
    w.Sample("fairgate_jobs_aged_in", {{"tier", tier}}, static_cast<double>(t.aged_in));
  }
  w.Family("fairgate_capacity", "gauge",
           "The global cap in force, in slots (below max_concurrency while adaptive capacity "
           "lowers it).");
  w.Sample("fairgate_capacity", {}, snapshot.capacity);
  w.Family("fairgate_capacity_max", "gauge", "max_concurrency: the most the global cap may be.");
  w.Sample("fairgate_capacity_max", {}, snapshot.max_concurrency);
  w.Family("fairgate_capacity_signal_errors_total", "counter",
           "Times adaptive capacity could not read CPU pressure (the cap stayed).");
  w.Sample("fairgate_capacity_signal_errors_total", {},
           static_cast<double>(capacity_signal_errors_));
}

void SchedulerMetrics::WriteHistogramsAndTotals(PrometheusWriter& w,
                                                const std::vector<std::string>& tiers,
                                                const Snapshot& snapshot,
                                                std::uint64_t promotions) const {
  auto histograms = [&](const char* name, const char* help, auto member) {
    w.Family(name, "histogram", help);
    for (std::size_t i = 0; i < types_.size(); ++i) {
      const SecondsHistogram& h = types_[i].*member;
      w.Histogram(name, {{"tier", tiers[i]}, {"type", types_[i].name}}, SecondsHistogram::kBounds,
                  h.Cumulative(), h.sum(), h.count());
    }
  };
  histograms("fairgate_queue_wait_seconds", "Time from enqueue to admission, admitted jobs.",
             &TypeCounts::wait);
  histograms("fairgate_run_seconds", "Time jobs ran, from admission to completion.",
             &TypeCounts::run);

  w.Family("fairgate_keys_tracked", "gauge",
           "Fairness keys remembered (pending, running or idle).");
  w.Sample("fairgate_keys_tracked", {}, static_cast<double>(snapshot.keys_tracked));
  w.Family("fairgate_keys_evicted_total", "counter",
           "Idle fairness keys forgotten by the TTL sweep.");
  w.Sample("fairgate_keys_evicted_total", {}, static_cast<double>(keys_evicted_));
  w.Family("fairgate_estimates_tracked", "gauge", "Learned costs remembered, per (type, id).");
  w.Sample("fairgate_estimates_tracked", {}, static_cast<double>(snapshot.estimates_tracked));
  w.Family("fairgate_aging_promotions_total", "counter",
           "Aging steps: a pending job rising one tier in the order.");
  w.Sample("fairgate_aging_promotions_total", {}, static_cast<double>(promotions));
  w.Family("fairgate_observer_events_dropped_total", "counter",
           "Events not delivered to observers because they fell too far behind.");
  w.Sample("fairgate_observer_events_dropped_total", {},
           static_cast<double>(observer_events_dropped_));
}

}  // namespace fairgate::metrics
