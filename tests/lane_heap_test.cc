// core/lane_heap.h against a sorted vector: random pushes, pops, top replacements and filters,
// from empty to several levels deep and back; and the two children of a node on one cache line.
#include "core/lane_heap.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "doctest/doctest.h"

namespace fairgate::core {
namespace {

struct Entry {
  std::uint64_t key = 0;
  std::uint64_t id = 0;  // unique, so that the model's order is total
  std::uint64_t pad[2] = {};
  bool operator<(const Entry& o) const { return key != o.key ? key < o.key : id < o.id; }
};
static_assert(sizeof(Entry) == 32);

TEST_CASE("LaneHeap.MatchesASortedModel") {
  std::mt19937_64 rng(23);
  LaneHeap<Entry> heap;
  std::vector<Entry> model;  // sorted
  std::uint64_t id = 0;
  for (int step = 0; step < 40000; ++step) {
    // Grow to a few hundred entries (four levels), then drain, twice over.
    const bool grow = (step / 10000) % 2 == 0 ? rng() % 3 != 0 : rng() % 3 == 0;
    const auto op = rng() % 10;
    if (model.empty() || (grow && op < 6)) {
      const Entry e{rng() % 50, id++};
      heap.push(e);
      model.insert(std::upper_bound(model.begin(), model.end(), e), e);
    } else if (op < 7) {
      // A top replaced, mostly by a later entry (as a moved front lane), sometimes an earlier.
      const Entry e{rng() % 5 == 0 ? model.front().key / 2 : model.front().key + rng() % 20, id++};
      heap.replace_top(e);
      model.erase(model.begin());
      model.insert(std::upper_bound(model.begin(), model.end(), e), e);
    } else if (op < 9 || !grow) {
      heap.pop();
      model.erase(model.begin());
    } else {
      const std::uint64_t drop = rng() % 7;
      heap.filter([&](const Entry& e) { return e.id % 7 != drop; });
      std::erase_if(model, [&](const Entry& e) { return e.id % 7 == drop; });
    }
    REQUIRE(heap.size() == model.size());
    REQUIRE(heap.valid());
    if (!model.empty()) CHECK(heap.top().id == model.front().id);
    std::vector<Entry> held(heap.begin(), heap.end());
    std::sort(held.begin(), held.end());
    CHECK(std::equal(held.begin(), held.end(), model.begin(), model.end(),
                     [](const Entry& a, const Entry& b) { return a.id == b.id; }));
  }
}

TEST_CASE("LaneHeap.TheTwoChildrenOfANodeShareACacheLine") {
  LaneHeap<Entry> heap;
  for (std::uint64_t i = 0; i < 100; ++i) heap.push({i, i});
  // Heap index i has its children at 2i + 1 and 2i + 2: each such pair starts on a line.
  for (std::size_t i = 0; 2 * i + 2 < heap.size(); ++i) {
    CHECK(reinterpret_cast<std::uintptr_t>(heap.begin() + 2 * i + 1) % 64 == 0);
  }
}

}  // namespace
}  // namespace fairgate::core
