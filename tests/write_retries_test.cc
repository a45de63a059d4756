// WriteRetries (src/runtime/write_retries.h): a store write that fails is tried again until it
// succeeds or is refused for good, and shutting down tries what is left once more. Against a
// real SQLite store (the keeper's); the writes themselves are the test's, so that their failures
// can be chosen.
#include "runtime/write_retries.h"

#include <atomic>
#include <chrono>
#include <memory>

#include "doctest/doctest.h"
#include "fairgate/sqlite_store.h"
#include "runtime_test_util.h"
#include "temp_dir.h"

// The runtime's tests: CTest labels them "runtime", and runs them again on other pools and
// under ThreadSanitizer (tests/CMakeLists.txt).
TEST_SUITE_BEGIN("runtime");

namespace fairgate::internal {
namespace {
namespace write_retries_test {

std::unique_ptr<StateKeeper> Keeper(const testing::TempDir& dir) {
  SchedulerOptions options;
  options.persistence.store = *OpenSqliteStore(dir.path() + "/state.db");
  return *StateKeeper::Open(options);
}

TEST_CASE("WriteRetries.AFailedWriteIsTriedAgainUntilItSucceeds") {
  testing::TempDir dir;
  auto keeper = Keeper(dir);
  WriteRetries writes(*keeper);
  std::atomic<int> tries{0};
  // Down for its first three tries, then up.
  const Status first = writes.Run(StateKeeper::Operation::kRemoveJob, [&]() -> Status {
    return ++tries <= 3 ? absl::UnavailableError("down") : absl::OkStatus();
  });
  CHECK(first.code() == absl::StatusCode::kUnavailable);  // the first try's status
  REQUIRE(testing::Eventually([&] { return tries == 4 && writes.waiting() == 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(tries == 4);  // done: never tried again
}

TEST_CASE("WriteRetries.ARefusalForGoodIsNotTriedAgain") {
  testing::TempDir dir;
  auto keeper = Keeper(dir);
  WriteRetries writes(*keeper);
  for (const Status& refusal :
       {absl::NotFoundError("gone"), absl::AbortedError("fenced"),
        absl::InvalidArgumentError("bad"), absl::FailedPreconditionError("read-only")}) {
    CAPTURE(refusal);
    int tries = 0;
    CHECK(writes.Run(StateKeeper::Operation::kRemoveJob, [&] {
      ++tries;
      return refusal;
    }) == refusal);
    CHECK(writes.waiting() == 0);
    CHECK(tries == 1);
  }
}

TEST_CASE("WriteRetries.AfterStopNothingIsKeptOrTriedAgain") {
  testing::TempDir dir;
  auto keeper = Keeper(dir);
  WriteRetries writes(*keeper);
  std::atomic<int> tries{0};
  (void)writes.Run(StateKeeper::Operation::kRemoveJob, [&] {
    ++tries;
    return absl::UnavailableError("down for good");
  });
  REQUIRE(testing::Eventually([&] { return tries >= 2; }));  // tried again in the background
  writes.Stop();
  const int after_stop = tries;
  CHECK(writes.waiting() == 0);
  (void)writes.Run(StateKeeper::Operation::kRemoveJob, [&] {
    ++tries;
    return absl::UnavailableError("after the stop");
  });
  CHECK(writes.waiting() == 0);  // not kept once stopped
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(tries == after_stop + 1);
}

}  // namespace write_retries_test
}  // namespace
}  // namespace fairgate::internal

TEST_SUITE_END();
