#include "core/join_points.h"

#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/queue_nodes.h"

namespace fairgate::core {

Job* JoinPoints::Join(absl::string_view id, bool running_too) {
  auto it = points_.find(id);
  if (it == points_.end()) return nullptr;
  Point& point = it->second;
  if (running_too && point.running != nullptr) return point.running;
  if (point.pending == nullptr) return nullptr;
  ++point.pending_callers;
  return point.pending;
}

void JoinPoints::Open(Job& job) {
  Point& point = points_[job.id];
  point.pending = &job;
  point.pending_callers = 1;
}

bool JoinPoints::LeaveCaller(const Job& job) { return --PointOf(job).pending_callers > 0; }

std::uint32_t JoinPoints::Callers(const Job& job) const { return PointOf(job).pending_callers; }

void JoinPoints::Withdraw(const Job& job) {
  Point& point = PointOf(job);
  point.pending = nullptr;
  point.pending_callers = 0;
  if (point.running == nullptr) points_.erase(job.id);
}

void JoinPoints::Start(Job& job) {
  Point& point = PointOf(job);
  point.pending = nullptr;
  point.pending_callers = 0;
  point.running = &job;
}

void JoinPoints::Complete(const Job& job) {
  auto it = points_.find(job.id);
  if (it == points_.end() || it->second.running != &job) return;
  it->second.running = nullptr;
  if (it->second.pending == nullptr) points_.erase(it);
}

JoinPoints::Point& JoinPoints::PointOf(const Job& job) {
  return const_cast<Point&>(static_cast<const JoinPoints*>(this)->PointOf(job));
}

const JoinPoints::Point& JoinPoints::PointOf(const Job& job) const {
  auto it = points_.find(job.id);
  FAIRGATE_CORE_CHECK(it != points_.end(), "a joinable job has no join point");
  return it->second;
}

StatusOr<std::size_t> JoinPoints::Check(const TypeState& owner) const {
  std::size_t pending_named = 0;
  for (const auto& [id, point] : points_) {
    const std::string where = absl::StrCat("the join point of (", owner.name, ", ", id, ")");
    if (point.pending == nullptr && point.running == nullptr) {
      return absl::InternalError(absl::StrCat(where, " names no job"));
    }
    for (const Job* job : {point.pending, point.running}) {
      if (job == nullptr) continue;
      const bool running = job == point.running;
      if (job->state == JobState::kFree || !job->joinable || job->type != &owner || job->id != id ||
          (job->state == JobState::kRunning) != running) {
        return absl::InternalError(absl::StrCat(where, " names the wrong job"));
      }
    }
    if ((point.pending != nullptr) != (point.pending_callers > 0)) {
      return absl::InternalError(
          absl::StrCat(where, " counts ", point.pending_callers, " callers"));
    }
    pending_named += point.pending != nullptr;
  }
  return pending_named;
}

}  // namespace fairgate::core
