#include "core/estimate_table.h"

#include <iterator>
#include <string>

namespace fairgate::core {

EstimateTable::Entry& EstimateTable::Touch(std::uint32_t type, absl::string_view id,
                                           double default_cost, double now) {
  auto it = entries_.find(IndexedNameView{type, id});
  if (it == entries_.end()) {
    it = entries_.emplace(IndexedName{type, std::string(id)}, Entry{}).first;
    it->second.name = &it->first;
    it->second.value = default_cost;
    it->second.last_used = now;
    lru_.push_back(it->second);
  } else {
    MarkUsed(it->second, now);
  }
  return it->second;
}

double EstimateTable::Use(std::uint32_t type, absl::string_view id, double default_cost, double now,
                          bool* learned) {
  const Entry& entry = Touch(type, id, default_cost, now);
  if (learned != nullptr) *learned = entry.learned;
  return entry.value;
}

void EstimateTable::Learn(std::uint32_t type, absl::string_view id, double default_cost,
                          double observed, double alpha, double now) {
  LearnInto(Touch(type, id, default_cost, now), observed, alpha);
}

EstimateTable::Entry* EstimateTable::UseAndHold(std::uint32_t type, absl::string_view id,
                                                double default_cost, double now, bool* learned) {
  Entry& entry = Touch(type, id, default_cost, now);
  ++entry.holds;
  *learned = entry.learned;
  return &entry;
}

void EstimateTable::LearnHeld(Entry* held, double default_cost, double observed, double alpha,
                              double now) {
  if (held->evicted) {
    // No longer the (type, id)'s entry: learn into the one it has now, as Learn does. The node
    // (and the name read here) lives until the last hold is given back.
    Learn(held->name->index, held->name->name, default_cost, observed, alpha, now);
    if (--held->holds == 0) evicted_held_.erase(held);
    return;
  }
  --held->holds;
  MarkUsed(*held, now);
  LearnInto(*held, observed, alpha);
}

void EstimateTable::DropHold(Entry* held) {
  if (--held->holds == 0 && held->evicted) evicted_held_.erase(held);
}

bool EstimateTable::Holds(const Entry* held, std::uint32_t type, absl::string_view id) {
  return held->holds > 0 && held->name->index == type && held->name->name == id;
}

std::size_t EstimateTable::Evict(double now, double ttl, std::size_t budget) {
  std::size_t evicted = 0;
  while (evicted < budget && !lru_.empty() && lru_.front().last_used + ttl <= now) {
    Entry& entry = lru_.front();
    lru_.pop_front();
    const IndexedName* name = entry.name;
    auto it = entries_.find(name->view());
    if (entry.holds > 0) {
      entry.evicted = true;
      evicted_held_.emplace(&entry, entries_.extract(it));
    } else {
      entries_.erase(it);
    }
    ++evicted;
  }
  return evicted;
}

bool EstimateTable::Restore(std::uint32_t type, absl::string_view id, double value,
                            double last_used) {
  auto [it, inserted] = entries_.try_emplace(IndexedName{type, std::string(id)});
  if (!inserted) return false;
  Entry& entry = it->second;
  entry.name = &it->first;
  entry.value = value;
  entry.last_used = last_used;
  entry.learned = true;
  auto place = lru_.end();  // before the first entry used later than it
  while (place != lru_.begin() && std::prev(place)->last_used > last_used) --place;
  lru_.insert(place, entry);
  return true;
}

std::optional<double> EstimateTable::Find(std::uint32_t type, absl::string_view id) const {
  auto it = entries_.find(IndexedNameView{type, id});
  if (it == entries_.end()) return std::nullopt;
  return it->second.value;
}

}  // namespace fairgate::core
