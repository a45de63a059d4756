#include "core/group_table.h"

#include "core/check.h"

namespace fairgate::core {

GroupTable::~GroupTable() {
  idle_.clear();  // safe-mode hooks: unlinked before their nodes die
  for (auto& [name, group] : groups_) {
    while (GroupPresence* presence = group.presences) {
      group.presences = presence->next_in_group;
      delete presence;
    }
  }
}

GroupSettings& GroupTable::SettingsFor(absl::string_view name) {
  auto [it, inserted] = settings_.try_emplace(name);
  if (inserted) it->second.name = &it->first;
  return it->second;
}

GroupState& GroupTable::Track(GroupSettings& settings) {
  if (settings.state != nullptr) return *settings.state;
  auto [it, inserted] = groups_.try_emplace(*settings.name);
  FAIRGATE_CORE_CHECK(inserted, "a group was tracked twice");
  it->second.settings = &settings;
  settings.state = &it->second;
  return it->second;
}

std::size_t GroupTable::Evict(double now, double ttl, std::size_t batch) {
  std::size_t count = 0;
  while (count < batch && !idle_.empty() && idle_.front().idle_since + ttl <= now) {
    GroupState& group = idle_.front();
    idle_.pop_front();
    FAIRGATE_CORE_CHECK(group.presences == nullptr, "an idle group still stood in a lane set");
    group.settings->state = nullptr;
    groups_.erase(groups_.find(*group.settings->name));
    ++count;
  }
  return count;
}

}  // namespace fairgate::core
