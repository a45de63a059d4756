#include "core/key_table.h"

#include <iterator>

#include "core/check.h"

namespace fairgate::core {

KeyState& KeyTable::Add(absl::string_view name) {
  auto [it, inserted] = keys_.try_emplace(name);
  FAIRGATE_CORE_CHECK(inserted, "a key was added twice");
  KeyState& key = it->second;
  key.name = &it->first;
  if (!settings_.empty()) {
    if (auto settings = settings_.find(name); settings != settings_.end()) {
      key.settings = &settings->second;
    }
  }
  return key;
}

KeySettings& KeyTable::SettingsFor(absl::string_view name) {
  auto [it, inserted] = settings_.try_emplace(name);
  if (inserted) {
    if (KeyState* key = Find(name)) key->settings = &it->second;
  }
  return it->second;
}

void KeyTable::NotePaused(absl::string_view name, bool paused) {
  if (paused) {
    paused_.emplace(name);
  } else if (auto it = paused_.find(name); it != paused_.end()) {
    paused_.erase(it);
  }
}

std::size_t KeyTable::Evict(double now, double ttl, std::size_t batch,
                            std::vector<std::pair<std::string, double>>* evicted) {
  std::size_t count = 0;
  while (count < batch && !idle_.empty() && idle_.front().idle_since + ttl <= now) {
    KeyState& key = idle_.front();
    idle_.pop_front();
    if (evicted != nullptr) evicted->emplace_back(*key.name, key.acc);
    keys_.erase(keys_.find(*key.name));
    ++count;
  }
  // A table that once held a crowd of keys keeps its slots: give them back once it is mostly
  // empty (O(keys) now and then, amortized over the evictions that emptied it).
  if (count > 0 && keys_.capacity() > 4096 && keys_.size() < keys_.capacity() / 8) {
    keys_.rehash(0);
  }
  return count;
}

bool KeyTable::Restore(const SavedKey& saved, double idle_since) {
  if (Find(saved.key) != nullptr) return false;
  KeyState& key = Add(saved.key);
  key.acc = saved.accumulated_cost;
  key.idle_since = idle_since;
  auto place = idle_.end();  // the idle list stays in the order the keys became idle
  while (place != idle_.begin() && std::prev(place)->idle_since > idle_since) --place;
  idle_.insert(place, key);
  return true;
}

}  // namespace fairgate::core
