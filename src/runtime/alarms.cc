#include "runtime/alarms.h"

#include <utility>
#include <vector>

namespace fairgate::internal {

Alarms::Id Alarms::Add(Clock::time_point at, std::function<void()> fire, bool& earliest) {
  std::lock_guard lock(mutex_);
  const Id id{at, next_++};
  const auto entry = due_.emplace(id, std::move(fire)).first;
  earliest = entry == due_.begin();
  return id;
}

void Alarms::Remove(const Id& id) {
  std::lock_guard lock(mutex_);
  due_.erase(id);
}

Alarms::Clock::time_point Alarms::NextDue() const {
  std::lock_guard lock(mutex_);
  return due_.empty() ? Clock::time_point::max() : due_.begin()->first.first;
}

void Alarms::RunDue(Clock::time_point now) {
  std::vector<std::function<void()>> due;
  {
    std::lock_guard lock(mutex_);
    while (!due_.empty() && due_.begin()->first.first <= now) {
      due.push_back(std::move(due_.begin()->second));
      due_.erase(due_.begin());
    }
  }
  for (const std::function<void()>& fire : due) fire();
}

}  // namespace fairgate::internal
