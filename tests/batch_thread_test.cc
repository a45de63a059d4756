// BatchThread (src/runtime/batch_thread.h): what callers queue is written in batches, in queue
// order, at most a batch's size at a time, what was queued while a batch was written makes the
// next one, Stop writes what is left, a Queue after Stop is refused, and the thread bears the
// name it was given.
#include "runtime/batch_thread.h"

#include <pthread.h>

#include <mutex>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "runtime_test_util.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate::internal {
namespace {
namespace batch_thread_test {

TEST_CASE("BatchThread.WritesWhatWasQueuedInBatchesInOrderAndTheRestAtStop") {
  std::mutex mutex;
  std::vector<std::vector<int>> batches;
  testing::Gate first_written;  // the first batch is held until this opens
  bool writing_first = false;
  BatchThread<int> thread("fg-test-batch", 3, [&](std::vector<int>& batch) {
    bool first = false;
    {
      std::lock_guard lock(mutex);
      first = batches.empty();
      batches.push_back(batch);
      writing_first = first;
    }
    if (first) CHECK(first_written.Wait());
  });
  REQUIRE(thread.Queue(1));
  REQUIRE(testing::Eventually([&] {
    std::lock_guard lock(mutex);
    return writing_first;
  }));
  for (int i = 2; i <= 8; ++i) REQUIRE(thread.Queue(i));  // while the first batch is written
  first_written.Open();
  thread.Stop();
  CHECK(!thread.Queue(9));
  thread.Stop();  // idempotent
  std::lock_guard lock(mutex);
  CHECK(batches == std::vector<std::vector<int>>{{1}, {2, 3, 4}, {5, 6, 7}, {8}});
}

TEST_CASE("BatchThread.StoppedBeforeAnythingWasQueuedStartsNoThreadAndRefusesQueues") {
  int written = 0;
  BatchThread<int> thread("fg-test-batch", 3, [&](std::vector<int>& batch) {
    written += static_cast<int>(batch.size());
  });
  thread.Stop();
  CHECK(!thread.Queue(1));
  CHECK(written == 0);
}

TEST_CASE("BatchThread.WritesOnAThreadOfTheNameItWasGiven") {
  std::string name;
  BatchThread<int> thread("fg-test-batch", 3, [&](std::vector<int>&) {
    char buffer[16] = {};
    CHECK(pthread_getname_np(pthread_self(), buffer, sizeof buffer) == 0);
    name = buffer;
  });
  REQUIRE(thread.Queue(1));
  thread.Stop();  // joins the thread: `name` is written
  CHECK(name == "fg-test-batch");
}

}  // namespace batch_thread_test
}  // namespace
}  // namespace fairgate::internal

TEST_SUITE_END();
