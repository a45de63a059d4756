// core/lane_heap.h against a model: random pushes, erases and updates, from empty to several
// levels deep and back, each entry's position kept; and the two children of a node on one line.
#include "core/lane_heap.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "doctest/doctest.h"

namespace fairgate::core {
namespace {
namespace lane_heap_test {

struct Item {
  std::uint32_t heap_index = 0;
};
struct Entry {
  std::uint64_t key = 0;
  std::uint64_t id = 0;  // unique, so that the model's order is total
  Item* lane = nullptr;
  std::uint64_t pad = 0;
  bool operator<(const Entry& o) const { return key != o.key ? key < o.key : id < o.id; }
};
static_assert(sizeof(Entry) == 32);

TEST_CASE("LaneHeap.MatchesASortedModelAndKeepsEachEntrysPosition") {
  // Random pushes, erases (of the top and of others) and updates (later and earlier, of the top
  // and of others), growing to a few hundred entries and draining, twice over: the top and the
  // entries are the model's, and each item knows where its entry is.
  std::mt19937_64 rng(23);
  LaneHeap<Entry> heap;
  std::vector<std::unique_ptr<Item>> items;
  std::vector<Entry> model;  // one per item in the heap, in no order
  std::uint64_t id = 0;
  for (int step = 0; step < 40000; ++step) {
    const bool grow = (step / 10000) % 2 == 0 ? rng() % 3 != 0 : rng() % 3 == 0;
    const auto op = rng() % 10;
    if (model.empty() || (grow && op < 5)) {
      items.push_back(std::make_unique<Item>());
      const Entry e{rng() % 50, id++, items.back().get()};
      heap.push(e);
      model.push_back(e);
    } else if (op < 8) {
      const std::size_t i =
          rng() % 2 == 0 ? static_cast<std::size_t>(std::find_if(model.begin(), model.end(),
                                                                 [&](const Entry& m) {
                                                                   return m.lane == heap.top().lane;
                                                                 }) -
                                                    model.begin())
                         : rng() % model.size();
      Entry& e = model[i];
      e.key = rng() % 5 == 0 ? e.key / 2 : e.key + rng() % 20;
      e.id = id++;
      heap.update(e.lane->heap_index, e);
    } else {
      const std::size_t i = rng() % model.size();
      heap.erase(model[i].lane->heap_index);
      model.erase(model.begin() + static_cast<std::ptrdiff_t>(i));
    }
    REQUIRE(heap.size() == model.size());
    REQUIRE(heap.valid());  // in order, and every item's heap_index is its entry's position
    if (!model.empty()) {
      CHECK(heap.top().id == std::min_element(model.begin(), model.end())->id);
    }
    std::vector<Entry> held(heap.begin(), heap.end());
    std::sort(held.begin(), held.end());
    std::vector<Entry> sorted = model;
    std::sort(sorted.begin(), sorted.end());
    CHECK(std::equal(held.begin(), held.end(), sorted.begin(), sorted.end(),
                     [](const Entry& a, const Entry& b) { return a.id == b.id; }));
  }
}

TEST_CASE("LaneHeap.TheTwoChildrenOfANodeShareACacheLine") {
  LaneHeap<Entry> heap;
  std::vector<Item> items(100);
  for (std::uint64_t i = 0; i < items.size(); ++i) heap.push({i, i, &items[i]});
  // Heap position i has its children at 2i + 1 and 2i + 2: each such pair starts on a line.
  for (std::size_t i = 0; 2 * i + 2 < heap.size(); ++i) {
    CHECK(reinterpret_cast<std::uintptr_t>(heap.begin() + 2 * i + 1) % 64 == 0);
  }
}

}  // namespace lane_heap_test
}  // namespace
}  // namespace fairgate::core
