// What every store (fairgate/store.h) must do, checked the same way for each implementation:
// `open` returns a new connection to the same storage each time it is called.
#ifndef FAIRGATE_TESTS_STORE_CONTRACT_H_
#define FAIRGATE_TESTS_STORE_CONTRACT_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "doctest/doctest.h"
#include "fairgate/store.h"

namespace fairgate::testing {

using OpenStore = std::function<std::unique_ptr<Store>()>;

inline StoredJob TestJob(std::string id, std::string payload) {
  StoredJob job;
  job.type = "fetch";
  job.id = std::move(id);
  job.fairness_key = "alice";
  job.payload = std::move(payload);
  job.submitted_at = 1000.5;
  return job;
}

// Jobs keep their fields (binary payloads byte for byte), their order and their attempts across
// connections; dead jobs are listed apart; sequence numbers never go back, also after the newest
// job was removed.
inline void CheckJobsAcrossConnections(const OpenStore& open) {
  const std::string binary("\0binary\xff'\\", 10);
  std::uint64_t first = 0, second = 0, third = 0;
  {
    std::unique_ptr<Store> store = open();
    first = *store->AddJob(TestJob("a.git", binary));
    second = *store->AddJob(TestJob("b.git", ""));
    third = *store->AddJob(TestJob("c.git", "x"));
    CHECK(first < second);
    CHECK(second < third);
    CHECK(*store->BeginAttempt(second) == 1u);
    CHECK(*store->BeginAttempt(second) == 2u);
    CHECK(store->DeferJob(second, 2000.25, "UNAVAILABLE: try later").ok());
    CHECK(store->KillJob(third, "INTERNAL: broken").ok());
    CHECK(store->BeginAttempt(third).status().code() == absl::StatusCode::kNotFound);
    CHECK(store->BeginAttempt(third + 100).status().code() == absl::StatusCode::kNotFound);
  }
  std::unique_ptr<Store> store = open();
  auto live = *store->LiveJobs();
  REQUIRE(live.size() == 2);
  CHECK(live[0].sequence == first);
  CHECK(live[0].payload == binary);
  CHECK(live[1].sequence == second);
  CHECK(live[1].id == "b.git");
  CHECK(live[1].fairness_key == "alice");
  CHECK(live[1].attempts == 2u);
  CHECK(live[1].not_before == 2000.25);
  CHECK(live[1].last_error == "UNAVAILABLE: try later");
  CHECK(live[1].submitted_at == 1000.5);
  auto dead = *store->DeadJobs();
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].sequence == third);
  CHECK(dead[0].payload == "x");
  CHECK(dead[0].last_error == "INTERNAL: broken");
  CHECK(store->RemoveJob(third).ok());
  CHECK(store->RemoveJob(first).ok());
  CHECK(*store->AddJob(TestJob("d.git", "")) > third);
  CHECK(open()->LiveJobs()->back().id == "d.git");
}

// A batch (AddJobs) is stored whole, in its order, with sequence numbers after every earlier one
// and before every later one; its fields survive whatever they hold (quotes, backslashes, commas,
// braces, the word NULL, empty strings; binary payloads byte for byte); an empty batch stores
// nothing. A batch of removals (RemoveJobs) removes what it names and nothing else.
inline void CheckBatches(const OpenStore& open) {
  std::unique_ptr<Store> store = open();
  const std::uint64_t before = *store->AddJob(TestJob("before.git", ""));
  CHECK(store->AddJobs({})->empty());
  const std::vector<std::string> ids{"a\"quoted\"", "b\\back", "c,comma", "{d}", "NULL", "f g"};
  const std::vector<std::string> payloads{std::string("\0\xff\x01", 3), "", "\"", "\\", "NULL",
                                          std::string(5000, 'x')};
  std::vector<StoredJob> batch;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    StoredJob job = TestJob(ids[i], payloads[i]);
    job.fairness_key = i % 2 == 0 ? "" : "key \"" + std::to_string(i);
    job.submitted_at = 2000.25 + static_cast<double>(i);
    batch.push_back(job);
  }
  StatusOr<std::vector<std::uint64_t>> sequences = store->AddJobs(batch);
  REQUIRE_MESSAGE(sequences.ok(), sequences.status().ToString());
  REQUIRE(sequences->size() == batch.size());
  CHECK(sequences->front() > before);
  CHECK(std::is_sorted(sequences->begin(), sequences->end()));
  CHECK(std::adjacent_find(sequences->begin(), sequences->end()) == sequences->end());
  const std::uint64_t after = *store->AddJob(TestJob("after.git", ""));
  CHECK(after > sequences->back());
  auto live = *open()->LiveJobs();
  REQUIRE(live.size() == batch.size() + 2);
  CHECK(live.front().id == "before.git");
  CHECK(live.back().id == "after.git");
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const StoredJob& got = live[i + 1];
    CHECK(got.sequence == (*sequences)[i]);
    CHECK(got.type == batch[i].type);
    CHECK(got.id == batch[i].id);
    CHECK(got.fairness_key == batch[i].fairness_key);
    CHECK(got.payload == batch[i].payload);
    CHECK(got.submitted_at == batch[i].submitted_at);
    CHECK(got.attempts == 0u);
  }
  // A batch of removals: each job removed as RemoveJob would (one not stored is fine), the rest
  // left as they were, also for another connection.
  std::vector<std::uint64_t> removed = {(*sequences)[0], after, (*sequences)[2], 987654321};
  StatusOr<std::vector<Status>> statuses = store->RemoveJobs(removed);
  REQUIRE_MESSAGE(statuses.ok(), statuses.status().ToString());
  REQUIRE(statuses->size() == removed.size());
  for (const Status& s : *statuses) CHECK_MESSAGE(s.ok(), s.ToString());
  CHECK(store->RemoveJobs({})->empty());
  std::vector<std::string> left;
  const std::vector<StoredJob> live_after = *open()->LiveJobs();
  for (const StoredJob& job : live_after) left.push_back(job.id);
  CHECK(left == std::vector<std::string>{"before.git", ids[1], ids[3], ids[4], ids[5]});
}

// Learned state is replaced row by row by name, and rows past their TTL are forgotten.
inline void CheckLearnedState(const OpenStore& open) {
  {
    std::unique_ptr<Store> store = open();
    LearnedState state;
    state.estimates = {{"clone", "linux.git", 120, 500}, {"clone", "git.git", 3, 100}};
    state.keys = {{"alice", 40, 500}, {"bob", 2, 100}};
    state.schedules = {{"fetch", "linux.git", 450}};
    CHECK(store->SaveLearned(state, 0, 0).ok());
    LearnedState later;
    later.estimates = {{"clone", "linux.git", 130.125, 600}};
    later.schedules = {{"fetch", "linux.git", 650}};
    // Estimates used before 200 and keys idle since before 200 are forgotten.
    CHECK(store->SaveLearned(later, 200, 200).ok());
  }
  LearnedState loaded = *open()->LoadLearned();
  REQUIRE(loaded.estimates.size() == 1);
  CHECK(loaded.estimates[0] == SavedEstimate{"clone", "linux.git", 130.125, 600});
  REQUIRE(loaded.keys.size() == 1);
  CHECK(loaded.keys[0] == SavedKey{"alice", 40, 500});
  REQUIRE(loaded.schedules.size() == 1);
  CHECK(loaded.schedules[0] == SavedSchedule{"fetch", "linux.git", 650});
}

}  // namespace fairgate::testing

#endif  // FAIRGATE_TESTS_STORE_CONTRACT_H_
