// What every store (fairgate/store.h) must do, checked the same way for each implementation:
// `open` returns a new connection to the same storage each time it is called. Below them, what
// every shared store (SharedStore) must do besides.
#ifndef FAIRGATE_TESTS_STORE_CONTRACT_H_
#define FAIRGATE_TESTS_STORE_CONTRACT_H_

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
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
  // A batch of attempts: each counted as BeginAttempt would, in the order given (a job twice is
  // counted twice; one not stored is NotFound and leaves the others counted), also for another
  // connection.
  const std::vector<std::uint64_t> begun = {(*sequences)[1], (*sequences)[3], 987654321,
                                            (*sequences)[1]};
  StatusOr<std::vector<StatusOr<std::uint32_t>>> attempts = store->BeginAttempts(begun);
  REQUIRE_MESSAGE(attempts.ok(), attempts.status().ToString());
  REQUIRE(attempts->size() == begun.size());
  CHECK((*attempts)[0].value_or(0) == 1u);
  CHECK((*attempts)[1].value_or(0) == 1u);
  CHECK((*attempts)[2].status().code() == absl::StatusCode::kNotFound);
  CHECK((*attempts)[3].value_or(0) == 2u);
  CHECK(store->BeginAttempts({})->empty());
  std::vector<std::uint32_t> counted;
  const std::vector<StoredJob> live_counted = *open()->LiveJobs();
  for (const StoredJob& job : live_counted) counted.push_back(job.attempts);
  CHECK(counted == std::vector<std::uint32_t>{0, 2, 1, 0, 0});
}

// A store opened with max_job_bytes 100 stores a job of 100 bytes (type, id, fairness key and
// payload together) whole, and refuses one of 101, alone or in a batch, with InvalidArgument naming
// its size and the bound, storing nothing of it.
inline void CheckJobsAboveTheBoundAreRefused(const OpenStore& open_bounded_to_100) {
  std::unique_ptr<Store> store = open_bounded_to_100();
  // "fetch" and "alice": 10 bytes, the id 5.
  const StoredJob fits = TestJob("a.git", std::string(85, 'p'));
  const StoredJob over = TestJob("b.git", std::string(86, 'p'));
  StatusOr<std::uint64_t> stored = store->AddJob(fits);
  REQUIRE_MESSAGE(stored.ok(), stored.status().ToString());
  const Status single = store->AddJob(over).status();
  CHECK(single.code() == absl::StatusCode::kInvalidArgument);
  CHECK_MESSAGE(single.message().find("the job is 101 bytes (its payload 86,") != std::string::npos,
                single.message());
  CHECK(single.message().find("more than max_job_bytes (100)") != std::string::npos);
  const Status batch = store->AddJobs({TestJob("c.git", ""), over}).status();
  CHECK(batch.code() == absl::StatusCode::kInvalidArgument);
  CHECK_MESSAGE(batch.message().find("job 1 of the batch: ") != std::string::npos, batch.message());
  CHECK(batch.message().find("the job is 101 bytes") != std::string::npos);
  const std::vector<StoredJob> live = *open_bounded_to_100()->LiveJobs();
  REQUIRE(live.size() == 1);
  CHECK(live[0].sequence == *stored);
  CHECK(live[0].payload == fits.payload);
}

// A dead job revived lives again whole, its attempts from 0 and its last error kept; a dead job
// removed is gone; neither touches a live job or a number not stored (NotFound), and a removed
// newest job's number is not given again.
inline void CheckDeadJobsAreRevivedOrRemoved(const OpenStore& open) {
  std::unique_ptr<Store> store = open();
  const std::string binary("\0dead\xff", 6);
  const std::uint64_t a = *store->AddJob(TestJob("a.git", binary));
  const std::uint64_t b = *store->AddJob(TestJob("b.git", "b"));
  const std::uint64_t live = *store->AddJob(TestJob("live.git", "c"));
  CHECK(*store->BeginAttempt(a) == 1u);
  CHECK(*store->BeginAttempt(a) == 2u);
  REQUIRE(store->KillJob(a, "INTERNAL: bad pack").ok());
  REQUIRE(store->KillJob(b, "INTERNAL: gone").ok());
  CHECK(*store->CountDeadJobs() == 2u);
  for (std::uint64_t absent : {live, live + 1000}) {
    CHECK(store->ReviveJob(absent).status().code() == absl::StatusCode::kNotFound);
    CHECK(store->RemoveDeadJob(absent).code() == absl::StatusCode::kNotFound);
  }
  StatusOr<StoredJob> revived = store->ReviveJob(a);
  REQUIRE_MESSAGE(revived.ok(), revived.status().ToString());
  CHECK(revived->sequence == a);
  CHECK(revived->id == "a.git");
  CHECK(revived->payload == binary);
  CHECK(revived->attempts == 0u);
  CHECK(revived->not_before == 0);
  CHECK(revived->last_error == "INTERNAL: bad pack");
  CHECK(store->ReviveJob(a).status().code() == absl::StatusCode::kNotFound);  // live now
  const Status removed = store->RemoveDeadJob(b);
  CHECK_MESSAGE(removed.ok(), removed.ToString());
  CHECK(store->RemoveDeadJob(b).code() == absl::StatusCode::kNotFound);
  std::unique_ptr<Store> other = open();
  const std::vector<StoredJob> live_jobs = *other->LiveJobs();
  REQUIRE(live_jobs.size() == 2);
  CHECK(live_jobs[0].sequence == a);
  CHECK(live_jobs[0].attempts == 0u);
  CHECK(live_jobs[0].payload == binary);
  CHECK(live_jobs[1].sequence == live);
  CHECK(other->DeadJobs()->empty());
  CHECK(*other->CountDeadJobs() == 0u);
  // The newest job, dead and removed: its number is not given again.
  const std::uint64_t newest = *store->AddJob(TestJob("newest.git", ""));
  REQUIRE(store->KillJob(newest, "INTERNAL: no").ok());
  REQUIRE(store->RemoveDeadJob(newest).ok());
  CHECK(*open()->AddJob(TestJob("after.git", "")) > newest);
  CHECK(open()->DeadJobs()->empty());
}

// A page of the dead jobs is the part of their whole list (DeadJobs) after a number, cut at a
// limit, wherever the number falls (a dead job's, a live one's, none's) and whatever the limit;
// walking the pages reads each dead job once, in sequence order.
inline void CheckDeadJobsArePaged(const OpenStore& open) {
  std::unique_ptr<Store> store = open();
  std::vector<std::uint64_t> stored;
  for (int i = 0; i < 12; ++i) {
    stored.push_back(*store->AddJob(TestJob(std::to_string(i) + ".git", std::string(i, 'p'))));
  }
  // Dead out of their order, live ones between them, and one dead job revived.
  for (int i : {7, 1, 2, 10, 4, 11, 5}) {
    REQUIRE(store->KillJob(stored[i], "INTERNAL: job " + std::to_string(i)).ok());
  }
  REQUIRE(store->ReviveJob(stored[5]).ok());
  std::unique_ptr<Store> reader = open();
  const std::vector<StoredJob> all = *reader->DeadJobs();
  std::vector<std::uint64_t> dead;
  for (const StoredJob& job : all) dead.push_back(job.sequence);
  CHECK(dead == std::vector<std::uint64_t>{stored[1], stored[2], stored[4], stored[7], stored[10],
                                           stored[11]});
  std::vector<std::uint64_t> afters = {0, stored.back() + 1, UINT64_MAX};
  afters.insert(afters.end(), stored.begin(), stored.end());
  for (std::uint64_t after : afters) {
    for (std::size_t limit :
         {std::size_t{1}, std::size_t{2}, std::size_t{5}, all.size(), all.size() + 1, SIZE_MAX}) {
      std::vector<StoredJob> expected;
      for (const StoredJob& job : all) {
        if (job.sequence > after && expected.size() < limit) expected.push_back(job);
      }
      StatusOr<std::vector<StoredJob>> page = reader->DeadJobsAfter(after, limit);
      REQUIRE_MESSAGE(page.ok(), page.status().ToString());
      REQUIRE(page->size() == expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i) {
        CHECK((*page)[i].sequence == expected[i].sequence);
        CHECK((*page)[i].id == expected[i].id);
        CHECK((*page)[i].payload == expected[i].payload);
        CHECK((*page)[i].last_error == expected[i].last_error);
      }
    }
  }
  std::vector<std::uint64_t> walked;
  std::uint64_t after = 0;
  for (;;) {
    const std::vector<StoredJob> page = *reader->DeadJobsAfter(after, 4);
    for (const StoredJob& job : page) walked.push_back(job.sequence);
    if (page.size() < 4) break;
    after = page.back().sequence;
  }
  CHECK(walked == dead);
}

// Learned state is replaced row by row by name (the last value of a name given twice in one
// save), and rows past their TTL are forgotten.
inline void CheckLearnedState(const OpenStore& open) {
  {
    std::unique_ptr<Store> store = open();
    LearnedState state;
    state.estimates = {{"clone", "linux.git", 120, 500}, {"clone", "git.git", 3, 100}};
    state.keys = {{"alice", 40, 500}, {"bob", 2, 100}};
    state.schedules = {{"fetch", "linux.git", 450}};
    CHECK(store->SaveLearned(state, 0, 0).ok());
    LearnedState later;
    later.estimates = {{"clone", "linux.git", 125, 550},
                       {"clone", "a,b \"c\" {d}\\", 7, 600},
                       {"clone", "linux.git", 130.125, 600}};
    later.schedules = {{"fetch", "linux.git", 600}, {"fetch", "linux.git", 650}};
    // Estimates used before 200 and keys idle since before 200 are forgotten.
    CHECK(store->SaveLearned(later, 200, 200).ok());
  }
  LearnedState loaded = *open()->LoadLearned();
  std::sort(loaded.estimates.begin(), loaded.estimates.end(),
            [](const SavedEstimate& x, const SavedEstimate& y) { return x.id < y.id; });
  REQUIRE(loaded.estimates.size() == 2);
  CHECK(loaded.estimates[0] == SavedEstimate{"clone", "a,b \"c\" {d}\\", 7, 600});
  CHECK(loaded.estimates[1] == SavedEstimate{"clone", "linux.git", 130.125, 600});
  REQUIRE(loaded.keys.size() == 1);
  CHECK(loaded.keys[0] == SavedKey{"alice", 40, 500});
  REQUIRE(loaded.schedules.size() == 1);
  CHECK(loaded.schedules[0] == SavedSchedule{"fetch", "linux.git", 650});
}

// The shared half of the interface (fairgate/store.h, SharedStore): claims in fair order, leases
// and their fencing tokens, batched removals, keys' costs summed over replicas. `open(replica)`
// returns a new handle, of the replica of that name, on the same storage, which holds nothing at
// first. A second shared store passes these as the PostgreSQL store does
// (postgres_store_test.cc). What a crash leaves is a contract too
// (CheckACrashedReplicasClaimsAndLeasesLapse); what a scheduler on a killed replica leaves is
// checked through processes in fleet_fault_test.cc.
using OpenSharedStore = std::function<std::unique_ptr<SharedStore>(const std::string& replica)>;

// A job of `type` on `id` for `key`, as TestJob's otherwise.
inline StoredJob StoredJobOf(std::string type, std::string id, std::string key) {
  StoredJob job = TestJob(std::move(id), "");
  job.type = std::move(type);
  job.fairness_key = std::move(key);
  return job;
}

inline std::vector<std::string> IdsOf(const std::vector<StoredJob>& jobs) {
  std::vector<std::string> ids;
  for (const StoredJob& job : jobs) ids.push_back(job.id);
  return ids;
}

inline void CheckClaimsInFairOrderEachJobToOneReplica(const OpenSharedStore& open) {
  auto a = open("a");
  auto b = open("b");
  CHECK(a->AsShared() != nullptr);
  // heavy has spent more than light; clone is the higher tier.
  REQUIRE(a->SaveLearned({{}, {{"heavy", 50, 0}, {"light", 5, 0}}, {}}, 0, 0).ok());
  for (const char* id : {"f1", "f2"}) REQUIRE(a->AddJob(StoredJobOf("fetch", id, "light")).ok());
  REQUIRE(a->AddJob(StoredJobOf("clone", "c-heavy", "heavy")).ok());
  REQUIRE(a->AddJob(StoredJobOf("clone", "c-light", "light")).ok());
  REQUIRE(a->AddJob(StoredJobOf("clone", "c-new", "new")).ok());  // a key never charged: cost 0
  REQUIRE(a->AddJob(StoredJobOf("other", "o", "new")).ok());      // a type neither replica claims
  const std::vector<ClaimableType> types = {{"fetch", 1}, {"clone", 2}};
  std::vector<StoredJob> first = *a->ClaimJobs(types, 3, 10);
  std::vector<StoredJob> second = *b->ClaimJobs(types, 10, 10);
  std::vector<StoredJob> none = *a->ClaimJobs(types, 10, 10);
  // Each batch comes back in sequence order; together they are the claim order.
  CHECK(IdsOf(first) == std::vector<std::string>{"c-heavy", "c-light", "c-new"});
  CHECK(IdsOf(second) == std::vector<std::string>{"f1", "f2"});
  CHECK(none.empty());
  // Tokens are distinct, and every token of a claim is greater than those of earlier claims.
  std::set<std::uint64_t> first_tokens, second_tokens;
  for (const StoredJob& job : first) first_tokens.insert(job.lease_token);
  for (const StoredJob& job : second) second_tokens.insert(job.lease_token);
  CHECK(first_tokens.size() == 3);
  CHECK(second_tokens.size() == 2);
  CHECK(*first_tokens.begin() > 0);
  CHECK(*second_tokens.begin() > *first_tokens.rbegin());
  // Two jobs of one batch: claimed one at a time, the cheaper key comes first.
  REQUIRE(a->ReleaseJob(first[0].sequence).ok());
  REQUIRE(a->ReleaseJob(first[1].sequence).ok());
  CHECK(IdsOf(*b->ClaimJobs(types, 1, 10)) == std::vector<std::string>{"c-light"});
  CHECK(IdsOf(*b->ClaimJobs(types, 1, 10)) == std::vector<std::string>{"c-heavy"});
  // One key's backlog: a claim of three takes its three oldest.
  std::vector<std::uint64_t> backlog;
  for (int i = 0; i < 5; ++i) backlog.push_back(*a->AddJob(StoredJobOf("archive", "x", "solo")));
  std::vector<StoredJob> three = *a->ClaimJobs({{"archive", 1}}, 3, 10);
  REQUIRE(three.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(three[i].sequence == backlog[i]);
  // A type's bound (ClaimableType::max_jobs) holds within a larger claim, which goes on to the
  // other types' jobs: the archive jobs first (the tier above), one of them, then a fetch.
  REQUIRE(a->AddJob(StoredJobOf("fetch", "f3", "light")).ok());
  ClaimableType bounded{"archive", 2};
  bounded.max_jobs = 1;
  std::vector<StoredJob> mixed = *b->ClaimJobs({bounded, {"fetch", 1}}, 10, 10);
  REQUIRE(mixed.size() == 2);
  CHECK(mixed[0].sequence == backlog[3]);
  CHECK(mixed[1].id == "f3");
}

inline void CheckALapsedClaimGoesToAnotherReplicaAndFencesTheOld(const OpenSharedStore& open) {
  auto a = open("a");
  auto b = open("b");
  const std::vector<ClaimableType> types = {{"fetch", 1}};
  const std::uint64_t lapsing = *a->AddJob(StoredJobOf("fetch", "lapsing", "k"));
  std::vector<StoredJob> held = *a->ClaimJobs(types, 1, 0.3);
  REQUIRE(held.size() == 1);
  REQUIRE(*a->BeginAttempt(lapsing) == 1u);  // a runs it, then stalls past its lease
  CHECK(b->ClaimJobs(types, 10, 10)->empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  // It had been admitted once: it comes before jobs never claimed, even of a higher tier.
  const std::uint64_t urgent = *a->AddJob(StoredJobOf("clone", "urgent", "k"));
  std::vector<StoredJob> reclaimed = *b->ClaimJobs({{"fetch", 1}, {"clone", 5}}, 1, 30);
  REQUIRE(reclaimed.size() == 1);
  CHECK(reclaimed[0].sequence == lapsing);
  CHECK(reclaimed[0].lease_token > held[0].lease_token);
  CHECK(reclaimed[0].attempts == 1u);  // a's attempt counts
  // Everything a does with it now is refused and changes nothing.
  for (const Status& refused :
       {a->BeginAttempt(lapsing).status(), a->RemoveJob(lapsing), a->DeferJob(lapsing, 0, "x"),
        a->KillJob(lapsing, "x"), a->ReleaseJob(lapsing)}) {
    INFO(refused.ToString());
    CHECK(refused.code() == absl::StatusCode::kAborted);
    CHECK(refused.message().find("no longer holds its lease") != std::string::npos);
  }
  CHECK(*b->BeginAttempt(lapsing) == 2u);
  // b's retry gives it back with a backoff: nobody may claim it before then, and a's old token
  // still changes nothing.
  REQUIRE(b->DeferJob(lapsing, 4e9, "failed").ok());
  CHECK(a->ClaimJobs(types, 10, 30)->empty());
  CHECK(a->RemoveJob(lapsing).code() == absl::StatusCode::kAborted);
  REQUIRE(a->RemoveJob(urgent).ok());  // nobody claimed it: anyone may remove it
  auto live = *a->LiveJobs();
  REQUIRE(live.size() == 1);
  CHECK(live[0].last_error == "failed");
  CHECK(live[0].attempts == 2u);
  // A renewed lease does not lapse; a released job may be claimed at once.
  const std::uint64_t renewed = *a->AddJob(StoredJobOf("fetch", "renewed", "k"));
  REQUIRE(a->ClaimJobs(types, 1, 0.3)->size() == 1);
  CHECK(*a->RenewLeases(30) == 1u);  // only what a still holds
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  CHECK(b->ClaimJobs(types, 10, 30)->empty());
  REQUIRE(a->ReleaseJob(renewed).ok());
  CHECK(IdsOf(*b->ClaimJobs(types, 10, 30)) == std::vector<std::string>{"renewed"});
  CHECK(b->RemoveJob(renewed).ok());
}

// A batch of removals is one statement: it removes the jobs this replica holds and those nobody
// holds, refuses one another replica claimed after this one's lease passed, and gives back the
// leases the claims took, so that another replica may take the repository at once.
inline void CheckABatchOfRemovals(const OpenSharedStore& open) {
  auto a = open("a");
  auto b = open("b");
  const ClaimableType fetch{"fetch", 1, "repo", 1, 0};
  const std::uint64_t held = *a->AddJob(StoredJobOf("fetch", "linux.git", "k"));
  REQUIRE(a->ClaimJobs({fetch}, 1, 30)->size() == 1);
  const std::uint64_t lost = *a->AddJob(StoredJobOf("fetch", "git.git", "k"));
  REQUIRE(a->ClaimJobs({fetch}, 1, 0.2)->size() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE(b->ClaimJobs({fetch}, 1, 30)->size() == 1);  // git.git, a's lease over
  const std::uint64_t unheld =
      *a->AddJob(StoredJobOf("archive", "free.git", "k"));  // nobody claims it
  const std::uint64_t next = *a->AddJob(StoredJobOf("fetch", "linux.git", "k"));
  CHECK(b->ClaimJobs({fetch}, 1, 30)->empty());  // linux.git's lease is a's
  StatusOr<std::vector<Status>> removed = a->RemoveJobs({held, lost, unheld, 987654321});
  REQUIRE(removed.ok());
  REQUIRE(removed->size() == 4);
  CHECK((*removed)[0].ok());
  CHECK((*removed)[1].code() == absl::StatusCode::kAborted);
  CHECK((*removed)[1].message().find("no longer holds its lease") != std::string::npos);
  CHECK((*removed)[2].ok());
  CHECK((*removed)[3].ok());  // not stored: nothing to remove
  std::vector<std::uint64_t> left;
  const std::vector<StoredJob> live = *b->LiveJobs();  // held: `*b->LiveJobs()` would dangle
  for (const StoredJob& job : live) left.push_back(job.sequence);
  CHECK(left == std::vector<std::uint64_t>{lost, next});
  std::vector<StoredJob> after = *b->ClaimJobs({fetch}, 1, 30);  // linux.git is free again
  REQUIRE(after.size() == 1);
  CHECK(after[0].sequence == next);
}

inline void CheckKeysCostsAreSummedOverReplicas(const OpenSharedStore& open) {
  auto a = open("a");
  auto b = open("b");
  CHECK(a->ShareKeyCosts({{"alice", 5, 100}}, {"alice"})->at(0).accumulated_cost == 5.0);
  auto totals = *b->ShareKeyCosts({{"alice", 3, 50}, {"bob", 1, 100}}, {"alice", "bob", "carol"});
  std::sort(totals.begin(), totals.end(),
            [](const SavedKey& x, const SavedKey& y) { return x.key < y.key; });
  // carol was never charged: not returned. idle_since only moves forward.
  CHECK(totals == std::vector<SavedKey>{{"alice", 8, 100}, {"bob", 1, 100}});
  // A refund (a job cheaper than its estimate) lowers the total, never below 0; a key the
  // store does not have starts at 0.
  CHECK(a->ShareKeyCosts({{"bob", -4, 100}, {"dave", -1, 100}}, {"bob", "dave"})->size() == 2);
  CHECK(*a->ShareKeyCosts({}, {"bob"}) == std::vector<SavedKey>{{"bob", 0, 100}});
  CHECK(*a->ShareKeyCosts({}, {"dave"}) == std::vector<SavedKey>{{"dave", 0, 100}});
}

// Groups' costs are summed as keys' are, and kept apart from them: a group and a key of one name
// are two totals.
inline void CheckGroupsCostsAreSummedOverReplicasApartFromKeys(const OpenSharedStore& open) {
  auto a = open("a");
  auto b = open("b");
  CHECK(a->ShareGroupCosts({{"acme", 5, 100}}, {"acme"})->at(0).accumulated_cost == 5.0);
  auto totals = *b->ShareGroupCosts({{"acme", 3, 50}, {"globex", 1, 100}}, {"acme", "globex", "x"});
  std::sort(totals.begin(), totals.end(),
            [](const SavedKey& x, const SavedKey& y) { return x.key < y.key; });
  CHECK(totals == std::vector<SavedKey>{{"acme", 8, 100}, {"globex", 1, 100}});
  CHECK(a->ShareKeyCosts({{"acme", 2, 100}}, {"acme"})->at(0).accumulated_cost == 2.0);
  CHECK(a->ShareGroupCosts({{"globex", -4, 100}}, {"acme", "globex"})->size() == 2);
  CHECK(*a->ShareGroupCosts({}, {"globex"}) == std::vector<SavedKey>{{"globex", 0, 100}});
  CHECK(*a->ShareGroupCosts({}, {"acme"}) == std::vector<SavedKey>{{"acme", 8, 100}});
  // Forgotten with the keys idle since before forget_keys_before.
  REQUIRE(a->SaveLearned({}, 0, 101).ok());
  CHECK(a->ShareGroupCosts({}, {"acme", "globex"})->empty());
}

inline void CheckResourceLeases(const OpenSharedStore& open) {
  auto a = open("a");
  auto b = open("b");
  const std::uint64_t first = *a->AcquireResource("repo", "linux.git", 1, 30);
  CHECK(first > 0);
  CHECK(*b->AcquireResource("repo", "linux.git", 1, 30) == 0u);  // held
  CHECK(*b->AcquireResource("repo", "git.git", 1, 30) > first);  // another id is free
  REQUIRE(a->ReleaseResource("repo", "linux.git", first).ok());
  const std::uint64_t second = *b->AcquireResource("repo", "linux.git", 1, 30);
  CHECK(second > first);
  // With a limit of 2, two holders at once, never three.
  const std::uint64_t x = *a->AcquireResource("fetch", "r", 2, 30);
  const std::uint64_t y = *b->AcquireResource("fetch", "r", 2, 30);
  CHECK(x > 0);
  CHECK(y > x);
  CHECK(*a->AcquireResource("fetch", "r", 2, 30) == 0u);
  // A lease that is not renewed lapses; its old holder's release leaves the new holder's alone.
  const std::uint64_t lapsing = *a->AcquireResource("repo", "mesa.git", 1, 0.3);
  const std::uint64_t renewed = *a->AcquireResource("repo", "gcc.git", 1, 0.3);
  REQUIRE(lapsing > 0);
  REQUIRE(a->ReleaseResource("repo", "mesa.git", 0).ok());  // no such token: nothing
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(a->ReleaseResource("repo", "mesa.git", lapsing).ok());  // a gives up mesa
  const std::uint64_t mesa = *b->AcquireResource("repo", "mesa.git", 1, 0.3);
  CHECK(mesa > renewed);
  CHECK(*a->RenewLeases(30) >= 1u);  // gcc (and a's fetch slot), not mesa
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  CHECK(*b->AcquireResource("repo", "gcc.git", 1, 30) == 0u);                  // renewed: still a's
  const std::uint64_t taken = *a->AcquireResource("repo", "mesa.git", 1, 30);  // b's lapsed
  CHECK(taken > mesa);
  REQUIRE(b->ReleaseResource("repo", "mesa.git", mesa).ok());  // stale: a keeps it
  CHECK(*b->AcquireResource("repo", "mesa.git", 1, 30) == 0u);
}

inline void CheckAClaimTakesItsJobsLeases(const OpenSharedStore& open) {
  auto a = open("a");
  auto b = open("b");
  auto c = open("c");
  auto add = [&](const std::string& type, const std::string& id, const std::string& key) {
    StoredJob job;
    job.type = type;
    job.id = id;
    job.fairness_key = key;
    return *a->AddJob(job);
  };
  auto sequences = [](const std::vector<StoredJob>& jobs) {
    std::vector<std::uint64_t> out;
    for (const StoredJob& j : jobs) out.push_back(j.sequence);
    return out;
  };
  const ClaimableType fetch{"fetch", 1, "repo", 1, 0};
  const std::uint64_t linux1 = add("fetch", "linux.git", "k1");
  const std::uint64_t linux2 = add("fetch", "linux.git", "k2");
  const std::uint64_t git = add("fetch", "git.git", "k3");
  // linux.git is held (a RunSync fetch on replica a, say): only git.git's job is claimed.
  const std::uint64_t held = *a->AcquireResource("repo", "linux.git", 1, 30);
  std::vector<StoredJob> claimed = *b->ClaimJobs({fetch}, 10, 30);
  REQUIRE(sequences(claimed) == std::vector<std::uint64_t>{git});
  CHECK(claimed[0].resource_token > held);
  CHECK(*a->AcquireResource("repo", "git.git", 1, 30) == 0u);  // the claim holds git.git
  // Once it is free, one job of it is claimed, not two (one slot); nobody else gets the other.
  REQUIRE(a->ReleaseResource("repo", "linux.git", held).ok());
  claimed = *b->ClaimJobs({fetch}, 10, 30);
  REQUIRE(sequences(claimed) == std::vector<std::uint64_t>{linux1});
  const std::uint64_t linux1_fence = claimed[0].resource_token;
  CHECK(linux1_fence > held);
  CHECK(c->ClaimJobs({fetch}, 10, 30)->empty());
  // The lease goes back with the job: removed, its repository's next job can be claimed.
  REQUIRE(b->RemoveJob(linux1).ok());
  claimed = *c->ClaimJobs({fetch}, 10, 30);
  REQUIRE(sequences(claimed) == std::vector<std::uint64_t>{linux2});
  CHECK(claimed[0].resource_token > linux1_fence);
  // Given back unrun, too; and a limit of 2 lets two jobs of one repository be claimed at once.
  REQUIRE(c->ReleaseJob(linux2).ok());
  const std::uint64_t linux3 = add("fetch", "linux.git", "k4");
  claimed = *b->ClaimJobs({{"fetch", 1, "repo", 2, 0}}, 10, 30);
  CHECK(sequences(claimed) == std::vector<std::uint64_t>{linux2, linux3});
  // A fleet-wide cap's slots are taken the same way: one of type "repack" at a time.
  const ClaimableType repack{"repack", 1, "", 1, 1};
  const std::uint64_t r1 = add("repack", "x.git", "k1");
  const std::uint64_t r2 = add("repack", "y.git", "k2");
  claimed = *a->ClaimJobs({repack}, 10, 30);
  REQUIRE(sequences(claimed) == std::vector<std::uint64_t>{r1});
  CHECK(claimed[0].resource_token > 0u);
  CHECK(b->ClaimJobs({repack}, 10, 30)->empty());
  REQUIRE(a->DeferJob(r1, 4e9, "later").ok());  // a retry far off: gives the slot back
  CHECK(sequences(*b->ClaimJobs({repack}, 10, 30)) == std::vector<std::uint64_t>{r2});
  // The claim's leases are renewed with it, and lapse with it.
  const std::uint64_t mesa = add("fetch", "mesa.git", "k5");
  claimed = *c->ClaimJobs({fetch}, 10, 0.4);
  REQUIRE(sequences(claimed) == std::vector<std::uint64_t>{mesa});
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  CHECK(*c->RenewLeases(0.4) >= 2u);  // the job and its lease
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  CHECK(*a->AcquireResource("repo", "mesa.git", 1, 30) == 0u);  // renewed: still c's
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(*a->AcquireResource("repo", "mesa.git", 1, 30) > claimed[0].resource_token);  // lapsed
}

// What a crash leaves: a replica that stops without a word (its process killed; here its handle
// dropped, which sends nothing) leaves its claims and leases to lapse. Until they do, nobody
// else may claim its jobs or take its leases; once they have, another replica claims each of its
// jobs once, with a greater token, every claim it made counted as an attempt (begun or not: an
// attempt may begin without a round trip while a lease is surely held), and takes its resources.
// Nothing is lost and nothing runs twice at once.
inline void CheckACrashedReplicasClaimsAndLeasesLapse(const OpenSharedStore& open) {
  auto a = open("a");
  auto b = open("b");
  const ClaimableType fetch{"fetch", 1, "repo", 1, 0};
  const ClaimableType archive{"archive", 1};
  const std::uint64_t begun = *a->AddJob(StoredJobOf("fetch", "linux.git", "k1"));
  const std::uint64_t unbegun = *a->AddJob(StoredJobOf("fetch", "git.git", "k2"));
  const std::uint64_t plain = *a->AddJob(StoredJobOf("archive", "x", "k3"));
  constexpr std::chrono::seconds kLease(2);
  const auto claimed_at = std::chrono::steady_clock::now();
  std::vector<StoredJob> claimed = *a->ClaimJobs({fetch, archive}, 10, kLease.count());
  REQUIRE(claimed.size() == 3);
  std::uint64_t newest_token = 0;
  for (const StoredJob& job : claimed) newest_token = std::max(newest_token, job.lease_token);
  REQUIRE(*a->BeginAttempt(begun) == 1u);
  const std::uint64_t own = *a->AcquireResource("repo", "mesa.git", 1, kLease.count());
  REQUIRE(own > 0u);
  a.reset();  // the crash: nothing given back, nothing renewed

  // Until the leases lapse, a's jobs and resources are still a's. (A check, not a wait: if the
  // server is slow enough for them to lapse first, the wait below still holds.)
  std::vector<StoredJob> reclaimed = *b->ClaimJobs({fetch, archive}, 10, 30);
  if (reclaimed.empty()) {
    const std::uint64_t taken = *b->AcquireResource("repo", "linux.git", 1, 30);
    if (taken != 0) {  // only once a's lease has lapsed; given back for the claim below
      CHECK(std::chrono::steady_clock::now() - claimed_at >= kLease);
      REQUIRE(b->ReleaseResource("repo", "linux.git", taken).ok());
    }
  }
  // Then b claims each of them once (bounded).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (reclaimed.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::vector<StoredJob> more = *b->ClaimJobs({fetch, archive}, 10, 30);
    reclaimed.insert(reclaimed.end(), more.begin(), more.end());
    if (reclaimed.size() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(reclaimed.size() == 3);
  std::set<std::uint64_t> sequences;
  for (const StoredJob& job : reclaimed) {
    INFO(job.id);
    sequences.insert(job.sequence);
    CHECK(job.lease_token > newest_token);
    CHECK(job.attempts == 1u);  // a's claim counted one, begun (linux.git) or not
    if (job.sequence != plain) CHECK(job.resource_token > own);  // the repository's lease too
  }
  CHECK(sequences == std::set<std::uint64_t>{begun, unbegun, plain});
  // a's own resource lease lapses too (taken just after the claim): mesa.git can be taken.
  std::uint64_t mesa = 0;
  while (mesa == 0 && std::chrono::steady_clock::now() < deadline) {
    mesa = *b->AcquireResource("repo", "mesa.git", 1, 30);
    if (mesa == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(mesa > own);
  CHECK(b->ClaimJobs({fetch, archive}, 10, 30)->empty());
  CHECK(*b->BeginAttempt(begun) == 2u);
  const std::vector<Status> removed = *b->RemoveJobs({begun, unbegun, plain});
  for (const Status& s : removed) CHECK(s.ok());
  CHECK(b->LiveJobs()->empty());
}

}  // namespace fairgate::testing

#endif  // FAIRGATE_TESTS_STORE_CONTRACT_H_
