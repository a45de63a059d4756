// Rate limits (fairgate/rate_limit.h; docs/ordering.md, "Rate limits"): the bucket's arithmetic
// and its refusals of bad input, the core's decisions under a type's and the global bucket, what
// a decision passed over, and a scheduler that starts jobs held by a rate when their tokens come
// due with nothing else happening. The differential tests hold the core to the reference model
// under random rate limits as well.
#include "fairgate/rate_limit.h"

#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/admission_core.h"
#include "doctest/doctest.h"
#include "fairgate/evidence.h"
#include "fairgate/scheduler.h"
#include "runtime/fleet_rates.h"
#include "runtime_test_util.h"
#include "test_job_types.h"

namespace fairgate {
namespace {
namespace rate_limit_test {

using core::AdmissionCore;
using core::BucketName;
using core::JobTicket;
using testing::Type;

std::unique_ptr<AdmissionCore> MakeCore(RateLimit global = {}) {
  RuleOptions rule = RuleOptions::Seed();
  rule.max_concurrency = 16;
  rule.rate_limit = global;
  auto core = AdmissionCore::Create(rule);
  REQUIRE(core.ok());
  return *std::move(core);
}

JobTypeConfig Limited(RateLimit rate, int slots = 1) {
  JobTypeConfig config = Type(8, 8);
  config.rate_limit = rate;
  config.slots = slots;
  return config;
}

JobTicket Add(AdmissionCore& core, std::string_view type, std::string_view id, double now,
              std::string_view key = "k") {
  StatusOr<JobTicket> ticket = core.Enqueue({type, id, key}, now);
  REQUIRE_MESSAGE(ticket.ok(), ticket.status().message());
  return *ticket;
}

// The ids NextAdmission(now) admits, in order, until it admits nothing.
std::vector<std::string> AdmitAll(AdmissionCore& core, double now) {
  std::vector<std::string> ids;
  while (std::optional<core::Admission> a = core.NextAdmission(now)) ids.emplace_back(a->id);
  return ids;
}

TEST_CASE("RateLimit.ABadLimitIsRefusedNamingItsField") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const RateLimit& bad :
       {RateLimit{-1, 1}, RateLimit{nan, 1}, RateLimit{inf, 1}, RateLimit{1, 0.5},
        RateLimit{1, nan}, RateLimit{1, inf}, RateLimit{0, 0}}) {
    CAPTURE(bad.per_second);
    CAPTURE(bad.burst);
    const Status status = ValidateRateLimit(bad, "x.rate_limit");
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(status.message().find("x.rate_limit.") == 0);
    auto core = MakeCore();
    const Status registered = core->RegisterType("t", Limited(bad));
    CHECK(registered.code() == absl::StatusCode::kInvalidArgument);
    CHECK(registered.message().find("job type 't': rate_limit.") == 0);
    RuleOptions rule;
    rule.rate_limit = bad;
    CHECK(AdmissionCore::Create(rule).status().code() == absl::StatusCode::kInvalidArgument);
  }
  CHECK(ValidateRateLimit({}, "off").ok());             // no limit
  CHECK(ValidateRateLimit({0.25, 1}, "slow").ok());     // one every four seconds
  CHECK(ValidateRateLimit({1000, 1.5}, "tight").ok());  // a fractional burst
}

// A bucket of 2 a second holding 3: three admissions at once, then one every half second,
// the type's other jobs passed over (counted) and another type's served meanwhile.
TEST_CASE("Core.RateLimit.ATypeStartsItsBurstAtOnceThenOneJobATokenApart") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("clone", Limited({2, 3})).ok());
  REQUIRE(core->RegisterType("fetch", Type(8, 8)).ok());
  for (const char* id : {"a", "b", "c", "d", "e"}) Add(*core, "clone", id, 0);
  CHECK(AdmitAll(*core, 0) == std::vector<std::string>{"a", "b", "c"});
  CHECK(core->NextTokenAt(0) == 0.5);
  // Another type goes while the bucket refills; the decision says it passed over the clones.
  Add(*core, "fetch", "f", 0.1, "z");
  std::optional<core::Admission> fetch = core->NextAdmission(0.1);
  REQUIRE(fetch.has_value());
  CHECK(fetch->id == "f");
  CHECK(fetch->skipped.rate_limit == 1);
  CHECK(AdmitAll(*core, 0.49).empty());
  CHECK(AdmitAll(*core, 0.5) == std::vector<std::string>{"d"});
  CHECK(core->NextTokenAt(0.5) == 1.0);
  CHECK(AdmitAll(*core, 1.0) == std::vector<std::string>{"e"});
  CHECK_FALSE(core->NextTokenAt(1.0).has_value());  // nothing waits for a token
  const Snapshot s = core->TakeSnapshot(1.25);
  REQUIRE(s.types[0].rate_limit.has_value());
  CHECK(s.types[0].rate_limit->tokens == 0.5);
  CHECK(s.types[0].rate_limit->taken == 5);
  CHECK(s.types[0].rate_limit->refused == 4);  // at 0 (after c), 0.1, 0.49 and 0.5 (after d)
  CHECK_FALSE(s.types[1].rate_limit.has_value());
  CHECK_FALSE(s.rate_limit.has_value());
  CHECK(core->CheckInvariants().ok());
}

// A leased bucket (the fleet's, SharedStore::TakeTokens) does not fill with time: it holds what
// was granted, from none; it names itself to lease while jobs wait under it, and not when none
// does; a refusal says when the store said the next token is due; the timer is told of no token.
TEST_CASE("Core.RateLimit.ALeasedBucketHoldsWhatWasGrantedAndAsksForMore") {
  auto core = MakeCore({100, 100});
  REQUIRE(core->RegisterType("clone", Limited({2, 3})).ok());
  REQUIRE(core->RegisterType("fetch", Type(8, 8)).ok());
  CHECK(core->LeaseTokens("nope").code() == absl::StatusCode::kNotFound);
  CHECK(core->LeaseTokens("fetch").code() == absl::StatusCode::kFailedPrecondition);
  CHECK(core->GrantTokens(BucketName::Type("clone"), 1, 0, 0).code() ==
        absl::StatusCode::kFailedPrecondition);
  REQUIRE(core->LeaseTokens("clone").ok());
  REQUIRE(core->LeaseTokens("clone").ok());  // again: nothing changes
  CHECK(core->WantsTokens(0));               // its first lease, before any job waits
  REQUIRE(core->GrantTokens(BucketName::Type("clone"), 0, 1, 0).ok());
  CHECK(core->BucketsToLease().empty());  // none came, and nothing waits under it
  for (const char* id : {"a", "b", "c", "d"}) Add(*core, "clone", id, 0);
  CHECK(AdmitAll(*core, 10).empty());  // none granted yet, however long it has been
  CHECK_FALSE(core->NextTokenAt(10).has_value());
  CHECK(core->WantsTokens(10));
  REQUIRE(core->BucketsToLease().size() == 1);
  CHECK(core->BucketsToLease()[0].first == BucketName::Type("clone"));
  CHECK(core->BucketsToLease()[0].second == RateLimit{2, 3});
  CHECK(core->GrantTokens(BucketName::Type("clone"), -1, 0, 10).code() ==
        absl::StatusCode::kInvalidArgument);
  REQUIRE(core->GrantTokens(BucketName::Type("clone"), 2, 10, 10).ok());
  CHECK_FALSE(core->WantsTokens(10));
  CHECK(AdmitAll(*core, 10) == std::vector<std::string>{"a", "b"});
  CHECK(core->WantsTokens(10));  // used up, and jobs wait
  // The global bucket leased too: a grant of the type's is not enough alone.
  REQUIRE(core->LeaseTokens("").ok());
  REQUIRE(core->GrantTokens(BucketName::Type("clone"), 0, 12.5, 11)
              .ok());  // none: the next is due at 12.5
  core::EnqueueRequest impatient{"clone", "e", "k"};
  impatient.refuse_without_token = true;
  const Status refused = core->Enqueue(impatient, 11).status();
  CHECK(refused.code() == absl::StatusCode::kResourceExhausted);
  REQUIRE(RetryAfter(refused).has_value());
  CHECK(*RetryAfter(refused) == 1.5);
  REQUIRE(core->GrantTokens(BucketName::Type("clone"), 5, 0, 11).ok());
  CHECK(AdmitAll(*core, 11).empty());  // the global bucket has none
  CHECK(core->BucketsToLease().size() == 1);
  CHECK(core->BucketsToLease()[0].first == BucketName::Global());
  REQUIRE(core->GrantTokens(BucketName::Global(), 1, 0, 11).ok());
  CHECK(AdmitAll(*core, 11) == std::vector<std::string>{"c"});
  const Snapshot snapshot = core->TakeSnapshot(11);
  REQUIRE(snapshot.types[0].rate_limit.has_value());
  CHECK(snapshot.types[0].rate_limit->tokens == 4);
  CHECK(core->CheckInvariants().ok());
}

// A type whose calls are all refused without a token has nothing pending to want a lease for:
// the refusal itself asks for one, until the next grant.
TEST_CASE("Core.RateLimit.ARefusalForWantOfALeasedTokenAsksForALease") {
  auto core = MakeCore();
  JobTypeConfig impatient = Limited({2, 3});
  impatient.refuse_without_token = true;
  REQUIRE(core->RegisterType("clone", impatient).ok());
  REQUIRE(core->LeaseTokens("clone").ok());
  // The first lease brought none; the store says the next is due at 1.
  REQUIRE(core->GrantTokens(BucketName::Type("clone"), 0, 1, 0).ok());
  CHECK_FALSE(core->WantsTokens(0));
  const Status refused = core->Enqueue({"clone", "a", "k"}, 0).status();
  CHECK(refused.code() == absl::StatusCode::kResourceExhausted);
  CHECK(RetryAfter(refused) == 1.0);
  CHECK_FALSE(core->WantsTokens(0));  // it asks, but the store said not before 1
  CHECK(core->WantsTokens(1));
  REQUIRE(core->BucketsToLease().size() == 1);
  REQUIRE(core->GrantTokens(BucketName::Type("clone"), 1, 0, 0).ok());
  CHECK_FALSE(core->WantsTokens(0));
  std::optional<core::Admission> admitted;
  REQUIRE(core->EnqueueAndAdmit({"clone", "a", "k"}, 0, admitted).ok());
  CHECK(admitted.has_value());
  CHECK(core->WantsTokens(0));  // its last token used: the next lease in hand before it is needed
  REQUIRE(core->GrantTokens(BucketName::Type("clone"), 2, 0, 0).ok());
  CHECK_FALSE(core->WantsTokens(0));
}

// Which leases the runtime may take now: a bucket that asks, but whose store said its next token
// is due later, waits for that time (the runtime asks no sooner), and does not hide a bucket that
// wants its lease now (a key's first: its job is held until it comes).
TEST_CASE("Core.RateLimit.ABucketToldToWaitDoesNotHideOneThatWantsALeaseNow") {
  auto core = MakeCore();
  JobTypeConfig impatient = Limited({0.001, 3});
  impatient.refuse_without_token = true;
  REQUIRE(core->RegisterType("clone", impatient).ok());
  REQUIRE(core->RegisterType("fetch", Type(8, 8)).ok());
  KeyLimits limited;
  limited.rate_limit = {1, 2};
  REQUIRE(core->SetKeyLimits("client", limited).ok());
  REQUIRE(core->LeaseTokens("clone").ok());
  REQUIRE(core->LeaseKeyTokens().ok());
  REQUIRE(core->GrantTokens(BucketName::Type("clone"), 0, 1000, 0).ok());
  CHECK(core->Enqueue({"clone", "a", "k"}, 1).status().code() ==
        absl::StatusCode::kResourceExhausted);  // and the type's bucket asks
  CHECK(core->BucketsToLease().size() == 1);
  CHECK_FALSE(core->WantsTokens(1));
  Add(*core, "fetch", "b", 2, "client");
  REQUIRE(core->BucketsToLease().size() == 2);
  CHECK(core->WantsTokens(2));  // the key's first lease
  REQUIRE(core->GrantTokens(BucketName::Key("client"), 0, 3, 2).ok());
  CHECK_FALSE(core->WantsTokens(2.5));
  CHECK(core->WantsTokens(3));  // b still waits
  REQUIRE(core->GrantTokens(BucketName::Key("client"), 1, 3, 3).ok());
  CHECK(AdmitAll(*core, 3) == std::vector<std::string>{"b"});
  CHECK(core->WantsTokens(1000));
  CHECK(core->CheckInvariants().ok());
}

// A call that will not wait for a token is refused only when the fleet's bucket is known to have
// none: a type's or the global leased bucket without a token whose store said the next is due
// by now (or said nothing yet) has a lease on its way, and the call waits for it; a grant that
// leaves the bucket without a token refuses such calls under it (a type's: that type's; the
// global one's: every type's), naming the bucket and when the store said the next is due, while
// patient jobs wait on.
TEST_CASE("Core.RateLimit.ACallThatWillNotWaitWaitsForTheLeaseOnItsWay") {
  auto core = MakeCore({100, 100});  // the global bucket: leased from 2.5 on
  REQUIRE(core->RegisterType("clone", Limited({2, 3})).ok());
  REQUIRE(core->RegisterType("fetch", Type(8, 8)).ok());
  REQUIRE(core->LeaseTokens("clone").ok());
  core::EnqueueRequest impatient{"clone", "a", "k"};
  impatient.refuse_without_token = true;
  REQUIRE(core->Enqueue(impatient, 0).ok());  // no grant yet: a waits for the first
  REQUIRE(core->GrantTokens(BucketName::Type("clone"), 1, 0, 0).ok());
  CHECK(AdmitAll(*core, 0) == std::vector<std::string>{"a"});
  CHECK(core->WantsTokens(0));  // its last token used: the next lease is on its way
  impatient.id = "b";
  REQUIRE(core->Enqueue(impatient, 0.1).ok());  // the store had more at 0: b waits for the lease
  Add(*core, "clone", "c", 0.1);
  CHECK(core->TakeExpired().empty());
  REQUIRE(core->GrantTokens(BucketName::Type("clone"), 0, 2, 0.2).ok());  // none until 2
  std::vector<core::ExpiredJob> refused = core->TakeExpired();
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].id == "b");
  CHECK(refused[0].token_due == 2);
  CHECK(refused[0].expired_at == 0.2);
  CHECK(refused[0].token_of == "job type 'clone''s rate limit");
  CHECK(core->pending_jobs() == 1);  // c waits on
  impatient.id = "d";
  const Status at_once = core->Enqueue(impatient, 1).status();  // known empty until 2
  CHECK(at_once.code() == absl::StatusCode::kResourceExhausted);
  CHECK(RetryAfter(at_once) == 1.0);
  CHECK(core->CheckInvariants().ok());

  // The global bucket leased too: at 2.5 the type's token is due and the global bucket has had
  // no grant: e and a fetch that will not wait both wait; the global grant brings none and
  // refuses both, whatever their types; c waits on.
  REQUIRE(core->LeaseTokens("").ok());
  impatient.id = "e";
  REQUIRE(core->Enqueue(impatient, 2.5).ok());
  core::EnqueueRequest fetch{"fetch", "f", "k2"};
  fetch.refuse_without_token = true;
  REQUIRE(core->Enqueue(fetch, 2.5).ok());
  REQUIRE(core->GrantTokens(BucketName::Type("clone"), 1, 2.5, 2.5).ok());
  CHECK(core->TakeExpired().empty());  // the type's brought one
  REQUIRE(core->GrantTokens(BucketName::Global(), 0, 4, 2.6).ok());
  refused = core->TakeExpired();
  REQUIRE(refused.size() == 2);
  CHECK(refused[0].id == "e");
  CHECK(refused[1].id == "f");
  for (const core::ExpiredJob& job : refused) {
    CHECK(job.token_due == 4);
    CHECK(job.token_of == "the global rate limit");
  }
  CHECK(core->pending_jobs() == 1);
  REQUIRE(core->GrantTokens(BucketName::Global(), 1, 4, 4).ok());
  CHECK(AdmitAll(*core, 4) == std::vector<std::string>{"c"});
  CHECK(core->CheckInvariants().ok());
}

// A key's leased bucket (the fleet's) is made empty when the key's first job comes, holds the
// key until a grant brings a token while other keys are served, refuses a call only when the
// store said its next token is due later (before its first grant, and once that time has come,
// the lease on its way may bring one: the call waits for it, and is refused if it brings none),
// and asks for more only while the key has jobs waiting or has just used its last token.
TEST_CASE("Core.RateLimit.ALeasedKeyWaitsForItsGrantWhileOtherKeysAreServed") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("clone", Type(8, 8)).ok());
  KeyLimits limited;
  limited.rate_limit = {1, 2};
  REQUIRE(core->SetKeyLimits("heavy", limited).ok());
  REQUIRE(core->LeaseKeyTokens().ok());
  REQUIRE(core->LeaseKeyTokens().ok());                             // again: nothing changes
  CHECK_FALSE(core->WantsTokens(0));                                // no key has come yet
  CHECK(core->GrantTokens(BucketName::Key("gone"), 1, 0, 0).ok());  // untracked: nothing
  for (const char* id : {"a", "b", "c"}) Add(*core, "clone", id, 0, "heavy");
  Add(*core, "clone", "l", 0, "light");
  CHECK(AdmitAll(*core, 5) == std::vector<std::string>{"l"});
  CHECK_FALSE(core->NextTokenAt(5).has_value());  // no time brings it: a lease does
  REQUIRE(core->BucketsToLease().size() == 1);
  CHECK(core->BucketsToLease()[0].first == BucketName::Key("heavy"));
  CHECK(core->BucketsToLease()[0].second == RateLimit{1, 2});
  core::EnqueueRequest impatient{"clone", "d", "heavy"};
  impatient.refuse_without_token = true;
  REQUIRE(core->Enqueue(impatient, 5).ok());  // no grant yet: it waits for the first
  CHECK(core->CheckInvariants().ok());

  REQUIRE(core->GrantTokens(BucketName::Key("heavy"), 2, 6, 5).ok());
  CHECK(AdmitAll(*core, 5) == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(core->WantsTokens(5));  // used up, with c and d waiting: the store said 6
  CHECK(core->WantsTokens(6));
  // The lease d waited for brings none: d is refused, as it would have been had the key's bucket
  // been known empty when it came; c waits on.
  REQUIRE(core->GrantTokens(BucketName::Key("heavy"), 0, 7.5, 7).ok());
  const std::vector<core::ExpiredJob> lease_refused = core->TakeExpired();
  REQUIRE(lease_refused.size() == 1);
  CHECK(lease_refused[0].id == "d");
  CHECK(lease_refused[0].token_due == 7.5);
  CHECK(lease_refused[0].token_of == "fairness key 'heavy''s rate limit");
  CHECK(AdmitAll(*core, 7) == std::vector<std::string>{});
  CHECK_FALSE(core->WantsTokens(7));  // still waiting: it asks again, at 7.5
  CHECK(core->WantsTokens(7.5));
  impatient.id = "e";
  const Status refused = core->Enqueue(impatient, 7).status();  // the store said 7.5: refused
  CHECK(refused.code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(refused.message()).find("fairness key 'heavy'") != std::string::npos);
  REQUIRE(RetryAfter(refused).has_value());
  CHECK(*RetryAfter(refused) == 0.5);
  const Snapshot held = core->TakeSnapshot(7);
  CHECK(held.keys_held_by_rate == 1);
  CHECK(core->CheckInvariants().ok());
  REQUIRE(core->Enqueue(impatient, 7.5).ok());  // its token's time come: e waits for the lease
  CHECK(core->TakeExpired().empty());

  REQUIRE(core->GrantTokens(BucketName::Key("heavy"), 1, 0, 8).ok());
  CHECK(AdmitAll(*core, 8) == std::vector<std::string>{"c"});
  CHECK(core->TakeExpired().empty());  // the grant brought a token (c's): e is not refused
  // Its limit gone, the key is let go: e starts without a token.
  REQUIRE(core->SetKeyLimits("heavy", KeyLimits{}).ok());
  CHECK(AdmitAll(*core, 8) == std::vector<std::string>{"e"});
  CHECK_FALSE(core->WantsTokens(8));
  CHECK(core->CheckInvariants().ok());
  // Given one again while idle, it asks for a lease before its next job needs it.
  REQUIRE(core->SetKeyLimits("heavy", limited).ok());
  CHECK(core->WantsTokens(8));
  REQUIRE(core->GrantTokens(BucketName::Key("heavy"), 0, 9, 8).ok());
  CHECK_FALSE(core->WantsTokens(9));  // nothing waits: it does not ask again and again
  CHECK(core->CheckInvariants().ok());

  // A call that would not wait came before its key's first lease, which brought none: refused
  // then, with when the store said the next token is due; a patient one of the key waits on.
  REQUIRE(core->SetKeyLimits("late", limited).ok());
  impatient.key = "late";
  impatient.id = "f";
  REQUIRE(core->Enqueue(impatient, 8).ok());
  Add(*core, "clone", "g", 8, "late");
  CHECK(core->TakeExpired().empty());
  REQUIRE(core->GrantTokens(BucketName::Key("late"), 0, 9.25, 8.5).ok());
  const std::vector<core::ExpiredJob> refusals = core->TakeExpired();
  REQUIRE(refusals.size() == 1);
  CHECK(refusals[0].id == "f");
  CHECK(refusals[0].token_due == 9.25);
  CHECK(refusals[0].expired_at == 8.5);
  CHECK(core->pending_jobs() == 1);     // g
  CHECK_FALSE(core->WantsTokens(8.5));  // g waits: the key asks again at 9.25
  CHECK(core->WantsTokens(9.25));
  CHECK(core->CheckInvariants().ok());
}

// A fleet's bucket is named in the store by what it limits; a key or a type's name that is not
// printable ASCII (a NUL, bytes that are not UTF-8) by its bytes in hex, so that the database's
// text takes it whole.
TEST_CASE("FleetRates.ABucketsNameInTheStoreIsTextForAnyKeyOrType") {
  using internal::FleetRates;
  CHECK(FleetRates::StoreName(BucketName::Global()) == "global");
  CHECK(FleetRates::StoreName(BucketName::Type("clone")) == "type:clone");
  CHECK(FleetRates::StoreName(BucketName::Type("r\xc3\xa9pack\xff")) ==
        "type-hex:72c3a97061636bff");
  CHECK(FleetRates::StoreName(BucketName::Key("10.0.0.7")) == "key:10.0.0.7");
  CHECK(FleetRates::StoreName(BucketName::Key(std::string("a\0b", 3))) == "key-hex:610062");
  CHECK(FleetRates::StoreName(BucketName::Key("caf\xc3")) == "key-hex:636166c3");
}

TEST_CASE("Core.RateLimit.KeysAreLeasedBeforeAnyJob") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("clone", Type(8, 8)).ok());
  Add(*core, "clone", "a", 0);
  CHECK(core->LeaseKeyTokens().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(core->GrantTokens(BucketName::Key("k"), 1, 0, 0).code() ==
        absl::StatusCode::kFailedPrecondition);
}

// KeyLimits::rate_per_weight: a key of weight 2 under 1 a second per unit of weight starts a job
// every half second; its weight raised to 4 while it waits, its next token comes sooner, from
// what its last take left; a key of weight 1 under the same limit gains 1 a second.
TEST_CASE("Core.RateLimit.AKeysRatePerWeightFollowsItsWeight") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("clone", Type(8, 8)).ok());
  KeyLimits per_weight;
  per_weight.rate_limit = {1, 1};
  per_weight.rate_per_weight = true;
  for (const char* key : {"heavy", "light"}) REQUIRE(core->SetKeyLimits(key, per_weight).ok());
  REQUIRE(core->SetKeyWeight("heavy", 2).ok());
  for (const char* id : {"h1", "h2", "h3"}) Add(*core, "clone", id, 0, "heavy");
  for (const char* id : {"l1", "l2"}) Add(*core, "clone", id, 0, "light");
  CHECK(AdmitAll(*core, 0) == std::vector<std::string>{"h1", "l1"});
  CHECK(core->NextTokenAt(0) == 0.5);
  CHECK(AdmitAll(*core, 0.5) == std::vector<std::string>{"h2"});
  CHECK(core->KeyTokens("heavy", 0.5) == 0);
  REQUIRE(core->SetKeyWeight("heavy", 4).ok());  // 4 a second from 0.5: its token at 0.75
  CHECK(core->NextTokenAt(0.5) == 0.75);
  CHECK(core->KeyTokens("heavy", 0.625) == 0.5);
  CHECK(AdmitAll(*core, 0.75) == std::vector<std::string>{"h3"});
  CHECK(AdmitAll(*core, 0.99) == std::vector<std::string>{});
  CHECK(AdmitAll(*core, 1) == std::vector<std::string>{"l2"});
  CHECK(core->CheckInvariants().ok());
}

// The global bucket holds every type: one admission a second in all, in the order.
TEST_CASE("Core.RateLimit.TheGlobalBucketBoundsEveryAdmission") {
  auto core = MakeCore({1, 1});
  REQUIRE(core->RegisterType("clone", Type(8, 8)).ok());
  REQUIRE(core->RegisterType("fetch", Type(4, 8)).ok());
  Add(*core, "fetch", "f", 0);
  Add(*core, "clone", "c1", 0);
  Add(*core, "clone", "c2", 0);
  CHECK(AdmitAll(*core, 0) == std::vector<std::string>{"c1"});  // the higher tier first
  CHECK(core->NextTokenAt(0) == 1.0);
  CHECK(AdmitAll(*core, 0.999) == std::vector<std::string>{});
  CHECK(AdmitAll(*core, 1) == std::vector<std::string>{"c2"});
  CHECK(AdmitAll(*core, 2.5) == std::vector<std::string>{"f"});
  const Snapshot s = core->TakeSnapshot(2.5);
  REQUIRE(s.rate_limit.has_value());
  CHECK(s.rate_limit->taken == 3);
  CHECK(s.rate_limit->refused == 3);  // the decisions at 0 (after c1), 0.999 and 1 (after c2)
  CHECK(s.rate_limit->tokens == 0);
}

// One token an admission, whatever its slots; a request that joins a job starts nothing and
// takes none.
TEST_CASE("Core.RateLimit.AWideJobTakesOneTokenAndAJoinTakesNone") {
  auto core = MakeCore();
  REQUIRE(core->RegisterType("repack", Limited({1, 2}, /*slots=*/4)).ok());
  JobTypeConfig coalescing = Limited({1, 1});
  coalescing.priority = 4;  // a tier of its own: the repacks fill theirs
  coalescing.max_concurrency = 4;
  coalescing.coalesce = Coalesce::kJoin;
  REQUIRE(core->RegisterType("mirror", coalescing).ok());
  Add(*core, "repack", "r1", 0);
  Add(*core, "repack", "r2", 0);
  CHECK(AdmitAll(*core, 0) == std::vector<std::string>{"r1", "r2"});  // 8 slots, 2 tokens
  core::EnqueueRequest request{"mirror", "m", "a"};
  request.join = core::Join::kPending;
  const StatusOr<JobTicket> lead = core->Enqueue(request, 0);
  request.key = "b";
  const StatusOr<JobTicket> joined = core->Enqueue(request, 0);
  REQUIRE(lead.ok());
  REQUIRE(joined.ok());
  CHECK(*joined == *lead);
  CHECK(AdmitAll(*core, 0) == std::vector<std::string>{"m"});
  const Snapshot s = core->TakeSnapshot(0);
  CHECK(s.types[0].rate_limit->taken == 2);
  CHECK(s.types[1].rate_limit->taken == 1);
}

// NextTokenAt is a time at which the token is there, to the bit, for rates and bursts that are
// not exact in binary: a timer set to it always finds something to do.
TEST_CASE("Core.RateLimit.TheNextTokenIsThereAtTheTimeItIsDue") {
  for (const RateLimit& rate : {RateLimit{3.3, 1.5}, RateLimit{0.7, 1}, RateLimit{10.1, 2.2}}) {
    CAPTURE(rate.per_second);
    auto core = MakeCore();
    REQUIRE(core->RegisterType("t", Limited(rate)).ok());
    for (int i = 0; i < 40; ++i) Add(*core, "t", "j" + std::to_string(i), 0);
    double now = 0;
    // Admits what may start at `now`, each ended at once (the type's cap stays open).
    auto admit = [&](double at) {
      int n = 0;
      while (std::optional<core::Admission> a = core->NextAdmission(at)) {
        REQUIRE(core->Complete(a->ticket, 0, at).ok());
        ++n;
      }
      return n;
    };
    int admitted = admit(now);
    while (admitted < 40) {
      const std::optional<double> due = core->NextTokenAt(now);
      REQUIRE(due.has_value());
      CHECK(*due > now);
      CHECK(admit(std::nextafter(*due, 0.0)) == 0);
      now = *due;
      const int got = admit(now);
      CHECK(got == 1);
      admitted += got;
    }
  }
}

// A key over its rate (its own, or the default) is passed over while other keys are served, its
// jobs start a token apart, and the snapshot counts it held; changing its limit moves its
// release, and a key forgotten after key_ttl comes back with a full bucket.
TEST_CASE("Core.RateLimit.AKeyOverItsRateIsPassedOverWhileOtherKeysAreServed") {
  RuleOptions rule = RuleOptions::Seed();
  rule.max_concurrency = 16;
  rule.key_ttl = Seconds(10);
  rule.default_key_limits.rate_limit = {1, 1};  // every key: one a second
  auto created = AdmissionCore::Create(rule);
  REQUIRE(created.ok());
  AdmissionCore& core = **created;
  REQUIRE(core.RegisterType("clone", Type(8, 8)).ok());
  REQUIRE(core.SetKeyLimits("ci", KeyLimits{.rate_limit = {2, 2}}).ok());  // its own
  for (const char* id : {"c1", "c2", "c3", "c4"}) Add(core, "clone", id, 0, "ci");
  Add(core, "clone", "d1", 0, "dev");
  Add(core, "clone", "d2", 0, "dev");
  // ci's burst of 2 and dev's of 1; then both keys are held.
  CHECK(AdmitAll(core, 0) == std::vector<std::string>{"c1", "d1", "c2"});
  CHECK(core.TakeSnapshot(0).keys_held_by_rate == 2u);
  CHECK(core.KeyTokens("ci", 0) == 0.0);
  CHECK(core.NextTokenAt(0) == 0.5);
  std::optional<core::Admission> c3 = core.NextAdmission(0.5);
  REQUIRE(c3.has_value());
  CHECK(c3->id == "c3");
  CHECK(c3->skipped.key_limit == 1);  // dev's queue, held by its rate
  CHECK(AdmitAll(core, 1) == std::vector<std::string>{"d2", "c4"});
  // A limit changed while the key is held moves its release: ci took its token at 1 and holds
  // nothing; under 4 a second its next token is due at 1.25, not 1.5.
  Add(core, "clone", "c5", 1, "ci");
  CHECK(core.NextTokenAt(1) == 1.5);
  REQUIRE(core.SetKeyLimits("ci", KeyLimits{.rate_limit = {4, 1}}).ok());
  CHECK(core.NextTokenAt(1) == 1.25);
  CHECK(AdmitAll(core, 1.25) == std::vector<std::string>{"c5"});
  // Without a limit, nothing holds it.
  Add(core, "clone", "c6", 1.25, "ci");
  REQUIRE(core.SetKeyLimits("ci", KeyLimits{}).ok());
  CHECK(AdmitAll(core, 1.25) == std::vector<std::string>{"c6"});
  CHECK(core.CheckInvariants().ok());
}

TEST_CASE("Core.RateLimit.AKeyForgottenAfterItsTtlStartsAgainWithAFullBucket") {
  RuleOptions rule = RuleOptions::Seed();
  rule.max_concurrency = 4;
  rule.key_ttl = Seconds(1);
  rule.default_key_limits.rate_limit = {0.01, 1};  // one every 100 s
  auto created = AdmissionCore::Create(rule);
  REQUIRE(created.ok());
  AdmissionCore& core = **created;
  REQUIRE(core.RegisterType("clone", Type(4, 4)).ok());
  const JobTicket first = Add(core, "clone", "a", 0, "k");
  REQUIRE(core.NextAdmission(0).has_value());
  REQUIRE(core.Complete(first, 0, 0).ok());
  CHECK(core.KeyTokens("k", 0.5) == 0.005);
  core.Sweep(1);  // idle since 0, key_ttl 1: forgotten, with its bucket
  CHECK_FALSE(core.KeyTokens("k", 1).has_value());
  Add(core, "clone", "b", 2, "k");
  CHECK(AdmitAll(core, 2) == std::vector<std::string>{"b"});
  CHECK(core.CheckInvariants().ok());
}

// A request that would rather be refused than wait (EnqueueRequest::refuse_without_token, or the
// type's config) is refused with ResourceExhausted naming the first bucket without a token, and
// RetryAfter gives the wait until the latest of their next tokens; with tokens, it queues; a join
// takes no token and is never refused.
TEST_CASE("Core.RateLimit.ARequestThatWillNotWaitIsToldWhenItsTokenIsDue") {
  RuleOptions rule = RuleOptions::Seed();
  rule.max_concurrency = 8;
  auto created = AdmissionCore::Create(rule);
  REQUIRE(created.ok());
  AdmissionCore& core = **created;
  JobTypeConfig clone = Limited({4, 1});
  clone.coalesce = Coalesce::kJoin;
  REQUIRE(core.RegisterType("clone", clone).ok());
  REQUIRE(core.SetKeyLimits("ci", KeyLimits{.rate_limit = {0.5, 1}}).ok());
  core::EnqueueRequest request{"clone", "a", "ci"};
  request.join = core::Join::kPending;  // joins a pending job of its id, if there is one
  request.refuse_without_token = true;
  REQUIRE(core.Enqueue(request, 0).ok());  // both buckets full
  REQUIRE(core.NextAdmission(0).has_value());
  // The type's bucket refills at 0.25, the key's at 2: the wait is the later.
  request.id = "b";
  const Status refused = core.Enqueue(request, 0.1).status();
  CHECK(refused.code() == absl::StatusCode::kResourceExhausted);
  CHECK(refused.message().find("job type 'clone''s rate limit has no token") == 0);
  REQUIRE(RetryAfter(refused).has_value());
  CHECK(*RetryAfter(refused) == 2 - 0.1);
  // Another key waits only for the type's token; told so at 0.1, queued at 0.25.
  request.key = "dev";
  CHECK(RetryAfter(core.Enqueue(request, 0.1).status()) == 0.25 - 0.1);
  CHECK(core.Enqueue(request, 0.25).ok());
  // A join starts nothing: ci's request joins dev's pending "b" without a token.
  request.key = "ci";
  CHECK(core.Enqueue(request, 0.3).ok());
  // Without the flag, the same call queues and waits.
  core::EnqueueRequest waits{"clone", "c", "ci"};
  CHECK(core.Enqueue(waits, 0.3).ok());
  // Other statuses carry no wait.
  CHECK_FALSE(RetryAfter(absl::ResourceExhaustedError("full")).has_value());
  CHECK_FALSE(RetryAfter(absl::OkStatus()).has_value());
  CHECK(core.CheckInvariants().ok());
}

TEST_SUITE_BEGIN("runtime");

// A scheduler of 8 slots that keeps the evidence of its admissions, and Submits of no-op jobs
// that log their ids.
class Recorded {
 public:
  Recorded() {
    SchedulerOptions options;
    options.rule.max_concurrency = 8;
    options.runtime.evidence = [this](const AdmissionEvidence& e) {
      std::lock_guard lock(mutex_);
      decisions_.push_back(e);
    };
    auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
    REQUIRE(created.ok());
    scheduler_ = *std::move(created);
  }
  Scheduler& scheduler() { return *scheduler_; }
  void Submit(const char* type, const char* id, const char* key) {
    REQUIRE(scheduler_
                ->Submit({TypeName(type), JobId(id), FairnessKey(key)},
                         [this, id](const Context&) {
                           ran_.Add(id);
                           return absl::OkStatus();
                         })
                .ok());
  }
  // Waits for `n` jobs to have run, then shuts the scheduler down; their admissions' evidence.
  std::vector<AdmissionEvidence> RunAndShutDown(std::size_t n) {
    REQUIRE(testing::Eventually([&] { return ran_.entries().size() == n; }));
    REQUIRE(scheduler_->Shutdown(Context::Background()).ok());
    std::lock_guard lock(mutex_);
    return decisions_;
  }

 private:
  std::mutex mutex_;
  std::vector<AdmissionEvidence> decisions_;
  testing::Log ran_;
  std::unique_ptr<Scheduler> scheduler_;
};

// A scheduler decides again when a token is due (its timer: AdmissionCore::NextTokenAt), with
// no completion or enqueue to make it look: jobs queued at once under 20 a second start 50 ms
// apart, each at the first moment its token is there, and the snapshot, the metrics and the
// evidence show the bucket.
TEST_CASE("Scheduler.RateLimit.JobsHeldByARateStartWhenTheirTokensAreDue") {
  Recorded recorded;
  Scheduler& scheduler = recorded.scheduler();
  REQUIRE(scheduler.RegisterType("clone", Limited({20, 1})).ok());
  for (const char* id : {"a", "b", "c", "d"}) recorded.Submit("clone", id, "k");
  const std::vector<AdmissionEvidence> decisions = recorded.RunAndShutDown(4);
  REQUIRE(decisions.size() == 4);
  for (std::size_t i = 1; i < decisions.size(); ++i) {
    CAPTURE(i);
    CHECK(decisions[i].time - decisions[i - 1].time >= 0.05 - 1e-9);
    CHECK(decisions[i].skipped_rate_limit == 0);  // nothing else was pending
  }
  const Snapshot s = scheduler.Snapshot();
  REQUIRE(s.types[0].rate_limit.has_value());
  CHECK(s.types[0].rate_limit->taken == 4);
  CHECK(s.types[0].rate_limit->per_second == 20);
  CHECK(ToJson(s).find(R"("rate_limit":{"per_second":20.0,"burst":1.0,)") != std::string::npos);
  std::string metrics;
  scheduler.WriteMetrics(metrics);
  CHECK(metrics.find("fairgate_rate_limit_taken_total{type=\"clone\"} 4") != std::string::npos);
}

// A key over its rate waits for its token, on the timer, while another key is served at once.
TEST_CASE("Scheduler.RateLimit.AKeyOverItsRateWaitsForItsTokenWhileAnotherIsServed") {
  Recorded recorded;
  Scheduler& scheduler = recorded.scheduler();
  REQUIRE(scheduler.RegisterType("clone", Type(8, 8)).ok());
  REQUIRE(scheduler.SetKeyLimits("ci", KeyLimits{.rate_limit = {20, 1}}).ok());
  for (const char* id : {"c1", "c2", "c3"}) recorded.Submit("clone", id, "ci");
  recorded.Submit("clone", "d1", "dev");
  const std::vector<AdmissionEvidence> decisions = recorded.RunAndShutDown(4);
  REQUIRE(decisions.size() == 4);
  std::vector<double> ci;
  for (const AdmissionEvidence& e : decisions) {
    if (e.key == "ci") ci.push_back(e.time);
    if (e.key == "dev") CHECK(e.time == e.arrival);  // admitted as it came: no token to wait for
  }
  REQUIRE(ci.size() == 3);
  CHECK(ci[1] - ci[0] >= 0.05 - 1e-9);
  CHECK(ci[2] - ci[1] >= 0.05 - 1e-9);
}

// RunSync and Submit that will not wait for a token are refused at once, with when to try again;
// the refusals are counted as rejected; another key is served meanwhile.
TEST_CASE("Scheduler.RateLimit.ACallThatWillNotWaitIsRefusedWithWhenToTryAgain") {
  SchedulerOptions options;
  options.rule.max_concurrency = 4;
  auto created = Scheduler::Create(testing::WithPoolUnderTest(options));
  REQUIRE(created.ok());
  Scheduler& scheduler = **created;
  REQUIRE(scheduler.RegisterType("clone", Type(4, 4)).ok());
  REQUIRE(scheduler.SetKeyLimits("ci", KeyLimits{.rate_limit = {0.5, 1}}).ok());
  const JobOptions impatient{.refuse_without_token = true};
  auto ok = [](const Context&) { return absl::OkStatus(); };
  REQUIRE(scheduler
              .RunSync(Context::Background(), {TypeName("clone"), JobId("a"), FairnessKey("ci")},
                       ok, impatient)
              .ok());
  const Status refused = scheduler.RunSync(
      Context::Background(), {TypeName("clone"), JobId("b"), FairnessKey("ci")}, ok, impatient);
  CHECK(refused.code() == absl::StatusCode::kResourceExhausted);
  REQUIRE(RetryAfter(refused).has_value());
  CHECK(*RetryAfter(refused) > 0);
  CHECK(*RetryAfter(refused) <= 2);  // a token every 2 s
  const Status submitted = scheduler.Submit(
      {TypeName("clone"), JobId("c"), FairnessKey("ci")}, ok, [](const Status&) {}, impatient);
  CHECK(RetryAfter(submitted).has_value());
  CHECK(scheduler
            .RunSync(Context::Background(), {TypeName("clone"), JobId("d"), FairnessKey("dev")}, ok,
                     impatient)
            .ok());
  std::string metrics;
  scheduler.WriteMetrics(metrics);
  CHECK(metrics.find("fairgate_jobs_rejected_total{reason=\"resource_exhausted\"} 2") !=
        std::string::npos);
  REQUIRE(scheduler.Shutdown(Context::Background()).ok());
}

TEST_SUITE_END();

}  // namespace rate_limit_test
}  // namespace
}  // namespace fairgate
