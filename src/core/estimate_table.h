// EstimateTable: the learned cost of each (job type, job id), with least-recently-used eviction.
//
// An estimate starts at its type's default cost and learns from each completion with
// `est = alpha * observed + (1.0 - alpha) * est`, exactly that expression in doubles. Reading an
// estimate to charge a job and learning from a completion both count as a use. Evict removes, from
// the least recently used end, estimates unused for at least `ttl`, at most `budget` of them, and
// stops at the first one that is still fresh: O(1) per use and per eviction.
//
// A running job may hold the entry it was charged from (UseAndHold), so that its completion
// learns through the hold without a second lookup (LearnHeld: about 120 instructions of the
// scheduler's lock per job, bench/HISTORY.md). Holding changes nothing the table tells: an entry
// evicted while held leaves the table as any other (a later use starts again from the default
// cost) and stays alive only for its holders, whose LearnHeld then learns as Learn would, into
// whatever entry the (type, id) has by then.
//
// Deterministic and single-threaded; time is an argument.
#ifndef FAIRGATE_CORE_ESTIMATE_TABLE_H_
#define FAIRGATE_CORE_ESTIMATE_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
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

  // One (type, id)'s estimate. A holder reads its `value`; everything else is the table's.
  struct Entry;
  // Use, and a hold on the entry it read, for one LearnHeld to give back.
  Entry* UseAndHold(std::uint32_t type, absl::string_view id, double default_cost, double now,
                    bool* learned);
  // Learn for the (type, id) of a held entry, then gives the hold back: the same as Learn, with
  // no lookup unless the entry was evicted while held.
  void LearnHeld(Entry* held, double default_cost, double observed, double alpha, double now);
  // Gives a hold back without learning anything (a job whose worker was lost never completed).
  void DropHold(Entry* held);
  // Whether `held` is held and names (type, id) (for the core's invariants).
  static bool Holds(const Entry* held, std::uint32_t type, absl::string_view id);

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

  struct Entry {
    boost::intrusive::list_member_hook<> lru_hook;
    const IndexedName* name = nullptr;  // the map's own key, for eviction
    double value = 0;
    double last_used = 0;
    std::uint32_t holds = 0;  // running jobs charged from it (UseAndHold, not yet LearnHeld)
    bool learned = false;
    bool evicted = false;  // out of the table, alive in evicted_held_ for its holds
  };

 private:
  using LruList = boost::intrusive::list<
      Entry,
      boost::intrusive::member_hook<Entry, boost::intrusive::list_member_hook<>, &Entry::lru_hook>>;

  Entry& Touch(std::uint32_t type, absl::string_view id, double default_cost, double now);
  // A use of a tracked entry at `now`: it becomes the most recently used.
  void MarkUsed(Entry& entry, double now) {
    lru_.erase(lru_.iterator_to(entry));
    entry.last_used = now;
    lru_.push_back(entry);
  }
  // `est = alpha * observed + (1.0 - alpha) * est`, exactly.
  static void LearnInto(Entry& entry, double observed, double alpha) {
    entry.value = alpha * observed + (1.0 - alpha) * entry.value;
    entry.learned = true;
  }

  using Map = absl::node_hash_map<IndexedName, Entry, IndexedNameHash, IndexedNameEq>;
  Map entries_;
  LruList lru_;  // least recently used first
  // Entries evicted while held, kept (nodes out of entries_, so their addresses and names stay)
  // until their last hold is given back.
  absl::flat_hash_map<const Entry*, Map::node_type> evicted_held_;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_ESTIMATE_TABLE_H_
