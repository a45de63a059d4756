// A binary min-heap whose entries know where they are, laid out so that the two children of a
// node share one cache line. Internal to src/core (LaneSet's storage).
//
// Each entry points to an object with a `heap_index` (a Lane) that the heap keeps equal to the
// entry's position, so an entry is moved up or down in place when its order changes, and erased
// from the middle, without a search and without leaving a stale copy behind. Written here
// because std's heap algorithms cannot report where they move an entry, and Boost.Heap's mutable
// heaps keep their entries in list nodes behind handles (an allocation and a pointer chase per
// entry). Lazy heaps (a move pushes a new entry and leaves the old one to be popped when it
// surfaces) were on main before this one and cost more (bench/HISTORY.md).
//
// The entries start one past a 64-byte boundary, so that the children of heap position i, at
// 2i + 1 and 2i + 2, are the vector's 2i + 2 and 2i + 3: on one line for 32-byte entries.
#ifndef FAIRGATE_CORE_LANE_HEAP_H_
#define FAIRGATE_CORE_LANE_HEAP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "boost/align/aligned_allocator.hpp"

namespace fairgate::core {

// `Entry` is ordered by its operator< and has a member `lane`, a pointer to an object with a
// `std::uint32_t heap_index`. The least entry is the top.
template <typename Entry>
class LaneHeap {
 public:
  bool empty() const { return v_.size() <= kFirst; }
  std::size_t size() const { return empty() ? 0 : v_.size() - kFirst; }
  const Entry& top() const { return v_[kFirst]; }
  const Entry& at(std::size_t i) const { return v_[kFirst + i]; }
  // The entries in heap order (for copies and checks).
  const Entry* begin() const { return empty() ? end() : v_.data() + kFirst; }
  const Entry* end() const { return v_.data() + v_.size(); }

  [[gnu::always_inline]] void push(const Entry& e) {
    if (v_.empty()) v_.resize(kFirst);
    v_.push_back(e);
    Up(v_.size() - 1, e);
  }
  // Removes the entry at heap position `i`.
  [[gnu::always_inline]] void erase(std::size_t i) {
    const std::size_t p = kFirst + i;
    const Entry last = v_.back();
    v_.pop_back();
    // The unused first element stays when the heap empties: a set that empties and fills again
    // (a key with one job at a time) would otherwise pay the vector's out-of-line resize each time.
    if (p == v_.size()) return;
    Settle(p, last);
  }
  // The entry at heap position `i` becomes `e` (the same object, a new place) and moves to it.
  [[gnu::always_inline]] void update(std::size_t i, const Entry& e) { Settle(kFirst + i, e); }
  void clear() { v_.clear(); }
  // Whether every entry is no less than its parent and knows its position.
  bool valid() const {
    for (std::size_t p = kFirst; p < v_.size(); ++p) {
      if (v_[p].lane->heap_index != p - kFirst) return false;
      if (p > kFirst && v_[p] < v_[Parent(p)]) return false;
    }
    return true;
  }

 private:
  static constexpr std::size_t kFirst = 1;  // index 0 is unused (see above)
  static std::size_t Parent(std::size_t p) { return (p - kFirst - 1) / 2 + kFirst; }
  static std::size_t FirstChild(std::size_t p) { return 2 * (p - kFirst) + 1 + kFirst; }

  void Put(std::size_t p, const Entry& e) {
    v_[p] = e;
    e.lane->heap_index = static_cast<std::uint32_t>(p - kFirst);
  }
  // `e` goes to position `p` or wherever the order then takes it, up or down.
  [[gnu::always_inline]] void Settle(std::size_t p, const Entry& e) {
    if (p > kFirst && e < v_[Parent(p)]) {
      Up(p, e);
    } else {
      Down(p, e);
    }
  }
  [[gnu::always_inline]] void Up(std::size_t p, Entry e) {
    while (p > kFirst) {
      const std::size_t parent = Parent(p);
      if (!(e < v_[parent])) break;
      Put(p, v_[parent]);
      p = parent;
    }
    Put(p, e);
  }
  [[gnu::always_inline]] void Down(std::size_t p, Entry e) {
    const std::size_t n = v_.size();
    for (std::size_t c; (c = FirstChild(p)) < n;) {
      if (c + 1 < n && v_[c + 1] < v_[c]) ++c;
      if (!(v_[c] < e)) break;
      Put(p, v_[c]);
      p = c;
    }
    Put(p, e);
  }

  std::vector<Entry, boost::alignment::aligned_allocator<Entry, 64>> v_;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_LANE_HEAP_H_
