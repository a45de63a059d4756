// GroupedWrites (src/store/grouped_writes.h), with writes the tests make: a call alone writes at
// once, calls made while a write is under way share the next one in queue order, a group that
// fails leaves each call to write its own item (so a bad item fails its own call only), and calls
// from many threads at once each have their item written exactly once. The PostgreSQL store's
// tests run the same calls against a server (postgres_store_test.cc).
#include "store/grouped_writes.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "runtime_test_util.h"

// In the doctest suite "store" (it starts no scheduler): CTest runs it under ThreadSanitizer with
// the runtime's tests, not again on other pools (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate::store {
namespace {
namespace grouped_writes_test {

const doctest::test_suite kStoreAlone("store");

// The writes a GroupedWrites<int, int> made, each answering an item's tenfold; the first write
// alone (WriteOne) can be held until a gate opens, so that calls queue behind it.
struct Writes {
  std::mutex mutex;
  std::vector<int> alone;                // the items written alone, in the order written
  std::vector<std::vector<int>> groups;  // the groups written, each in its order
  testing::Gate* hold_first = nullptr;   // the first write alone waits for it to open
  bool first_began = false;
  bool answer_one_short = false;  // a group's write answers for one item fewer than it had
  int refused = -1;               // an item that WriteOne refuses (and a group holding it fails)

  GroupedWrites<int, int> Grouped() {
    return GroupedWrites<int, int>(
        [this](const int& item) -> StatusOr<int> {
          testing::Gate* hold = nullptr;
          {
            std::lock_guard lock(mutex);
            alone.push_back(item);
            if (!first_began) hold = hold_first;
            first_began = true;
          }
          if (hold != nullptr && !hold->Wait()) return absl::InternalError("the gate never opened");
          if (item == refused) return absl::InvalidArgumentError("item refused");
          return item * 10;
        },
        [this](const std::vector<const int*>& items) -> StatusOr<std::vector<int>> {
          std::vector<int> group, outs;
          for (const int* item : items) {
            group.push_back(*item);
            outs.push_back(*item * 10);
          }
          std::lock_guard lock(mutex);
          groups.push_back(group);
          for (int item : group) {
            if (item == refused) return absl::UnavailableError("group refused");
          }
          if (answer_one_short) outs.pop_back();
          return outs;
        });
  }

  bool FirstBegan() {
    std::lock_guard lock(mutex);
    return first_began;
  }
};

// Holds the first write, then makes one call per item, each from a thread of its own and each
// queued before the next is made (so the queue's order is the items'), then lets the first write
// end. Returns each call's answer, the first's at [0].
std::vector<StatusOr<int>> QueueBehindAHeldWrite(Writes& writes, GroupedWrites<int, int>& grouped,
                                                 const std::vector<int>& items) {
  testing::Gate gate;
  writes.hold_first = &gate;
  std::vector<StatusOr<int>> answers(items.size() + 1, absl::UnknownError("no answer"));
  std::vector<std::thread> callers;
  callers.emplace_back([&] { answers[0] = grouped.Write(0); });
  REQUIRE(testing::Eventually([&] { return writes.FirstBegan(); }));
  for (std::size_t i = 0; i < items.size(); ++i) {
    callers.emplace_back([&, i] { answers[i + 1] = grouped.Write(items[i]); });
    REQUIRE(testing::Eventually([&] { return grouped.Queued() == i + 1; }));
  }
  gate.Open();
  for (std::thread& caller : callers) caller.join();
  CHECK(grouped.Queued() == 0);
  return answers;
}

TEST_CASE("GroupedWrites.ACallAloneWritesItsItemAtOnceAlone" * kStoreAlone) {
  Writes writes;
  GroupedWrites<int, int> grouped = writes.Grouped();
  CHECK(grouped.Write(4).value() == 40);
  CHECK(grouped.Write(5).value() == 50);
  CHECK(writes.alone == std::vector<int>{4, 5});
  CHECK(writes.groups.empty());
}

TEST_CASE("GroupedWrites.CallsMadeDuringAWriteShareTheNextInTheirOrder" * kStoreAlone) {
  Writes writes;
  GroupedWrites<int, int> grouped = writes.Grouped();
  const std::vector<StatusOr<int>> answers = QueueBehindAHeldWrite(writes, grouped, {3, 1, 2});
  for (std::size_t i = 0; i < answers.size(); ++i) {
    REQUIRE(answers[i].ok());
  }
  CHECK(answers[0].value() == 0);
  CHECK(answers[1].value() == 30);
  CHECK(answers[2].value() == 10);
  CHECK(answers[3].value() == 20);
  CHECK(writes.alone == std::vector<int>{0});
  CHECK(writes.groups == std::vector<std::vector<int>>{{3, 1, 2}});
}

// One call queued alone behind a write is written alone: no group statement for one item.
TEST_CASE("GroupedWrites.ACallQueuedAloneIsWrittenAlone" * kStoreAlone) {
  Writes writes;
  GroupedWrites<int, int> grouped = writes.Grouped();
  const std::vector<StatusOr<int>> answers = QueueBehindAHeldWrite(writes, grouped, {7});
  CHECK(answers[1].value() == 70);
  CHECK(writes.alone == std::vector<int>{0, 7});
  CHECK(writes.groups.empty());
}

// A group that fails as a whole (here, because one of its items is refused) is written again
// item by item, each by its own call: the refused item fails its call, the others are written.
TEST_CASE("GroupedWrites.AGroupThatFailsLeavesEachCallToWriteItsItemAlone" * kStoreAlone) {
  Writes writes;
  writes.refused = 2;
  GroupedWrites<int, int> grouped = writes.Grouped();
  const std::vector<StatusOr<int>> answers = QueueBehindAHeldWrite(writes, grouped, {1, 2, 3});
  CHECK(answers[1].value() == 10);
  CHECK(answers[2].status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(answers[2].status().message() == "item refused");
  CHECK(answers[3].value() == 30);
  CHECK(writes.groups == std::vector<std::vector<int>>{{1, 2, 3}});
  std::vector<int> alone = writes.alone;
  std::sort(alone.begin() + 1, alone.end());  // the calls wrote theirs at once
  CHECK(alone == std::vector<int>{0, 1, 2, 3});
}

// A group whose write answers another number of items than it was given fails each call: which
// answer is whose is not known, and the items may be stored, so none is written again.
TEST_CASE("GroupedWrites.AGroupAnsweredForAnotherNumberOfItemsFailsEachCall" * kStoreAlone) {
  Writes writes;
  writes.answer_one_short = true;
  GroupedWrites<int, int> grouped = writes.Grouped();
  const std::vector<StatusOr<int>> answers = QueueBehindAHeldWrite(writes, grouped, {1, 2});
  CHECK(answers[0].value() == 0);
  for (std::size_t i = 1; i < 3; ++i) {
    CHECK(answers[i].status().code() == absl::StatusCode::kInternal);
    CHECK(answers[i].status().message() == "a group of 2 writes answered 1 times");
  }
}

// Many threads at once: every call is answered for its own item, and each item is written
// exactly once, alone or in one group.
TEST_CASE("GroupedWrites.CallsFromManyThreadsAtOnceHaveEachItemWrittenOnce" * kStoreAlone) {
  Writes writes;
  GroupedWrites<int, int> grouped = writes.Grouped();
  constexpr int kThreads = 8, kEach = 500;
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const int item = t * kEach + i;
        StatusOr<int> answer = grouped.Write(item);
        if (!answer.ok() || *answer != item * 10) ++wrong[t];
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  CHECK(wrong == std::vector<int>(kThreads, 0));
  std::map<int, int> written;
  for (int item : writes.alone) ++written[item];
  for (const std::vector<int>& group : writes.groups) {
    for (int item : group) ++written[item];
  }
  CHECK(written.size() == static_cast<std::size_t>(kThreads * kEach));
  int twice = 0;
  for (const auto& [item, times] : written) twice += times != 1;
  CHECK(twice == 0);
  MESSAGE(writes.alone.size(), " written alone, ", writes.groups.size(), " groups");
}

}  // namespace grouped_writes_test
}  // namespace
}  // namespace fairgate::store

TEST_SUITE_END();
