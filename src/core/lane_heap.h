// A binary min-heap kept by std's heap algorithms, laid out so that the two children of a node
// share one cache line. Internal to src/core (LaneSet's storage).
//
// Over std::priority_queue it adds what a lazy set needs: replacing the top in one pass, keeping
// a subset in O(n), and reading the entries in place. The entries start one past a 64-byte
// boundary, so that the children of the entry at heap index i, at 2i + 1 and 2i + 2, are the
// vector's 2i + 2 and 2i + 3: on one line for entries of 32 bytes (two lines for 48), where a
// heap from the vector's start splits every pair of 32-byte children across two lines.
// A four-ary heap was measured too and lost: more instructions, no fewer misses (bench/README.md).
#ifndef FAIRGATE_CORE_LANE_HEAP_H_
#define FAIRGATE_CORE_LANE_HEAP_H_

#include <algorithm>
#include <cstddef>
#include <vector>

#include "boost/align/aligned_allocator.hpp"

namespace fairgate::core {

// `Entry` is ordered by its operator<. The least entry is the top.
template <typename Entry>
class LaneHeap {
 public:
  bool empty() const { return v_.size() <= kFirst; }
  std::size_t size() const { return empty() ? 0 : v_.size() - kFirst; }
  const Entry& top() const { return v_[kFirst]; }
  // The entries in heap order (for copies and checks).
  const Entry* begin() const { return empty() ? end() : v_.data() + kFirst; }
  const Entry* end() const { return v_.data() + v_.size(); }

  void push(const Entry& e) {
    if (v_.empty()) v_.resize(kFirst);
    v_.push_back(e);
    std::push_heap(v_.begin() + kFirst, v_.end(), After{});
  }
  void pop() {
    std::pop_heap(v_.begin() + kFirst, v_.end(), After{});
    v_.pop_back();
    if (empty()) v_.clear();
  }
  // Replaces the top with `e`: the top sinks to the back, where `e` takes its place and rises
  // (a step or two when `e` is late in the order, as a moved lane mostly is).
  void replace_top(const Entry& e) {
    std::pop_heap(v_.begin() + kFirst, v_.end(), After{});
    v_.back() = e;
    std::push_heap(v_.begin() + kFirst, v_.end(), After{});
  }
  // Keeps the entries `keep` accepts and restores the order in O(n).
  template <typename Keep>
  void filter(Keep keep) {
    if (empty()) return;
    v_.erase(
        std::remove_if(v_.begin() + kFirst, v_.end(), [&](const Entry& e) { return !keep(e); }),
        v_.end());
    if (empty()) {
      v_.clear();
    } else {
      std::make_heap(v_.begin() + kFirst, v_.end(), After{});
    }
  }
  void clear() { v_.clear(); }
  bool valid() const { return std::is_heap(begin(), end(), After{}); }

 private:
  // std's heaps put the greatest first: ordered by After, the least entry is the top.
  struct After {
    bool operator()(const Entry& a, const Entry& b) const { return b < a; }
  };
  static constexpr std::size_t kFirst = 1;  // index 0 is unused (see above)

  std::vector<Entry, boost::alignment::aligned_allocator<Entry, 64>> v_;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_LANE_HEAP_H_
