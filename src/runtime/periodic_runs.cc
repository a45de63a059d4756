#include "runtime/periodic_runs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/job_record.h"

namespace fairgate::internal {

StatusOr<std::shared_ptr<PeriodicState>> PeriodicRuns::SubmitEvery(const JobName& job,
                                                                   Seconds interval,
                                                                   Scheduler::JobFn fn,
                                                                   const PeriodicOptions& options) {
  const std::string_view type = job.type, id = job.id;
  if (!fn) return absl::InvalidArgumentError("job function is empty");
  if (id.empty()) return absl::InvalidArgumentError("job id is empty");
  if (!std::isfinite(interval.count()) || interval.count() <= 0 || interval.count() > 1e8) {
    return absl::InvalidArgumentError(
        absl::StrCat("interval must be finite and in (0, 1e8] seconds, got ", interval.count()));
  }
  if (!(options.jitter >= 0 && options.jitter < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("jitter must be in [0, 1), got ", options.jitter));
  }
  if (Status open = scheduler_.Open(); !open.ok()) return open;
  if (!scheduler_.Type(type)) {
    return absl::NotFoundError(
        absl::StrCat("unknown job type '", absl::string_view(type.data(), type.size()), "'"));
  }
  auto state = std::make_shared<PeriodicState>();
  state->type = std::string(type);
  state->id = std::string(id);
  state->fairness_key = std::string(job.fairness_key);
  state->interval = interval;
  state->fn = std::move(fn);
  state->options = options;
  bool earliest = false;
  {
    std::lock_guard lock(mutex_);
    // The first run after a random part of one interval, unless asked at once; with a store
    // that knows when the last run ended, one interval after that end (a restart keeps the
    // schedule), and if that has passed, after a random part of one interval as at a first
    // start, so that jobs overdue after a long stop do not all start together.
    double first = options.first_run_at_once ? 0.0 : interval.count() * UniformLocked(0.0, 1.0);
    if (keeper_ != nullptr && !options.first_run_at_once) {
      if (std::optional<double> last = keeper_->LastRunEnd(type, id)) {
        const double due_in = *last + interval.count() - WallNow();
        if (due_in > 0) first = std::min(due_in, interval.count());
      }
    }
    earliest = ScheduleLocked(state, first);
  }
  if (earliest) scheduler_.WakeTimer();
  return state;
}

PeriodicRuns::Clock::time_point PeriodicRuns::NextDue() const {
  std::lock_guard lock(mutex_);
  return due_.empty() ? Clock::time_point::max() : due_.begin()->first;
}

void PeriodicRuns::RunDue(Clock::time_point now) {
  std::vector<std::shared_ptr<PeriodicState>> due;
  {
    std::lock_guard lock(mutex_);
    while (!due_.empty() && due_.begin()->first <= now) {
      due.push_back(std::move(due_.begin()->second));
      due_.erase(due_.begin());
    }
  }
  for (const auto& state : due) {
    if (!state->stopped) QueueRun(state);
  }
}

void PeriodicRuns::QueueRun(const std::shared_ptr<PeriodicState>& state) {
  auto ended = [this, state](const Status& status) {
    if (keeper_ != nullptr) keeper_->RunEnded(state->type, state->id, WallNow());
    ++state->runs;
    if (state->options.on_run) InvokeDone(state->options.on_run, status);
    ScheduleNext(state);
  };
  Status queued =
      scheduler_.Submit(state->type, state->id, state->fairness_key, state->fn, ended, {}, {});
  if (queued.code() == absl::StatusCode::kUnavailable) return;  // shutting down: runs stop
  if (!queued.ok()) ended(queued);
}

void PeriodicRuns::ScheduleNext(const std::shared_ptr<PeriodicState>& state) {
  if (state->stopped || !scheduler_.Open().ok()) return;
  bool earliest = false;
  {
    std::lock_guard lock(mutex_);
    const double jitter = state->options.jitter;
    const double factor = jitter > 0 ? 1.0 + UniformLocked(-jitter, jitter) : 1.0;
    earliest = ScheduleLocked(state, state->interval.count() * factor);
  }
  if (earliest) scheduler_.WakeTimer();
}

bool PeriodicRuns::ScheduleLocked(const std::shared_ptr<PeriodicState>& state, double after) {
  const auto due = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(after));
  const auto entry = due_.emplace(due, state);  // before begin(): operands are unordered
  return entry == due_.begin();
}

}  // namespace fairgate::internal
