// EstimateTable: the learned cost of each (job type, job id), with least-recently-used eviction.
//
// An estimate starts at its type's default cost and learns from each completion with
// `est = alpha * observed + (1.0 - alpha) * est`, exactly that expression in doubles. Reading an
// estimate to charge a job and learning from a completion both count as a use. Evict removes, from
// the least recently used end, estimates unused for at least `ttl`, at most `budget` of them, and
// stops at the first one that is still fresh: O(1) per use and per eviction.
//
// Deterministic and single-threaded; time is an argument.
#ifndef FAIRGATE_CORE_ESTIMATE_TABLE_H_
#define FAIRGATE_CORE_ESTIMATE_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/container/node_hash_map.h"
#include "boost/intrusive/list.hpp"
#include "core/indexed_name.h"

namespace fairgate::core {

class EstimateTable {
 public:
  EstimateTable() = default;
  EstimateTable(const EstimateTable&) = delete;
  EstimateTable& operator=(const EstimateTable&) = delete;

  // The estimate to charge a job of (type, id) with, creating it at `default_cost` when absent.
  // `learned` (if given) tells whether it has learned from a completion yet.
  double Use(std::uint32_t type, absl::string_view id, double default_cost, double now,
             bool* learned = nullptr);

  // Learns `observed` seconds for (type, id), starting from `default_cost` when absent.
  void Learn(std::uint32_t type, absl::string_view id, double default_cost, double observed,
             double alpha, double now);

  // Evicts up to `budget` estimates unused since `now - ttl` or earlier; returns how many.
  std::size_t Evict(double now, double ttl, std::size_t budget);

  // The current estimate, if (type, id) is tracked. Does not count as a use.
  std::optional<double> Find(std::uint32_t type, absl::string_view id) const;

  std::size_t size() const { return entries_.size(); }

  // Calls `visit(type, id, value, last_used)` for each estimate used at or after `since`, most
  // recently used first: O(those estimates).
  template <typename Visit>
  void ForEachUsedSince(double since, Visit visit) const {
    for (auto it = lru_.rbegin(); it != lru_.rend() && it->last_used >= since; ++it) {
      visit(it->name->index, absl::string_view(it->name->name), it->value, it->last_used);
    }
  }

  // Puts back a learned estimate last used at `last_used`, in its place in the recency order.
  // False (and nothing changes) when (type, id) is already tracked. O(1) when restored in the
  // order they were used, O(estimates) at worst.
  bool Restore(std::uint32_t type, absl::string_view id, double value, double last_used);

 private:
  struct Entry {
    boost::intrusive::list_member_hook<> lru_hook;
    const IndexedName* name = nullptr;  // the map's own key, for eviction
    double value = 0;
    double last_used = 0;
    bool learned = false;
  };
  using LruList = boost::intrusive::list<
      Entry,
      boost::intrusive::member_hook<Entry, boost::intrusive::list_member_hook<>, &Entry::lru_hook>>;

  Entry& Touch(std::uint32_t type, absl::string_view id, double default_cost, double now);

  absl::node_hash_map<IndexedName, Entry, IndexedNameHash, IndexedNameEq> entries_;
  LruList lru_;  // least recently used first
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_ESTIMATE_TABLE_H_
