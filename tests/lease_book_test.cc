// A replica's own account of its claims and leases (store/lease_book.h), without a server: what
// it renews, what it gives back, and when an attempt begins without a round trip. The PostgreSQL
// store's tests (postgres_store_test.cc, fleet_fault_test.cc) run the same rules against the
// database.
#include "store/lease_book.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "doctest/doctest.h"

namespace fairgate::store {
namespace {
namespace lease_book_test {

using Clock = LeaseBook::Clock;
using Tokens = std::vector<std::uint64_t>;

Tokens Sorted(Tokens tokens) {
  std::sort(tokens.begin(), tokens.end());
  return tokens;
}

TEST_CASE("LeaseBook.AClaimIsHeldWithItsTokenUntilForgotten") {
  LeaseBook book;
  CHECK_FALSE(book.Holds(7));
  CHECK_FALSE(book.TokenOf(7).has_value());
  book.Claimed(7, 70, {}, 1, Clock::now());
  CHECK(book.Holds(7));
  CHECK(book.TokenOf(7) == 70u);
  // A later claim of the same job (after this replica's own lease lapsed) replaces the first.
  book.Claimed(7, 71, {}, 2, Clock::now());
  CHECK(book.TokenOf(7) == 71u);
  book.Forget(7);
  CHECK_FALSE(book.Holds(7));
  CHECK(book.ToRenew().jobs.empty());
}

// A call that freed the job (deferred it, gave it back) ends the claim it was made for, not the
// claim this replica made of the job since: that one is still held, renewed, with its leases.
TEST_CASE("LeaseBook.EndingAClaimByItsTokenLeavesALaterClaimOfTheJob") {
  LeaseBook book;
  const Clock::time_point later = Clock::now() + std::chrono::seconds(60);
  book.Claimed(7, 70, {700}, 1, later);
  CHECK(book.SurelyHeldUntil(7) == later);
  book.Claimed(7, 71, {710}, 2, later);
  book.StopRenewing(7, 70);
  book.Refused(7, 70);
  CHECK(book.TakeClaimLeases(7, 70).empty());
  book.Forget(7, 70);
  CHECK(book.TokenOf(7) == 71u);
  CHECK(book.SurelyHolds(7, Clock::now()));
  CHECK(book.ToRenew().jobs == Tokens{71});
  CHECK(book.ToRenew().resources == Tokens{710});
  // By its own token, or with none given, the claim ends.
  book.StopRenewing(7, 71);
  CHECK_FALSE(book.SurelyHeldUntil(7).has_value());
  CHECK(book.TakeClaimLeases(7) == Tokens{710});
  book.Forget(7, 71);
  CHECK_FALSE(book.Holds(7));
}

TEST_CASE("LeaseBook.AnAttemptBeginsLocallyOnlyWhileTheClaimIsSurelyHeld") {
  LeaseBook book;
  const Clock::time_point now = Clock::now();
  book.Claimed(1, 10, {}, 3, now + std::chrono::seconds(10));
  book.Claimed(2, 20, {}, 5, now - std::chrono::seconds(1));  // a replica that stalled
  CHECK(book.AttemptUnbegun(1));

  const LeaseBook::LocalBegin sure = book.BeginLocally(1, now);
  CHECK(sure.attempt == 3u);
  CHECK_FALSE(book.AttemptUnbegun(1));
  // Begun once: a second begin is the server's to count.
  const LeaseBook::LocalBegin again = book.BeginLocally(1, now);
  CHECK_FALSE(again.attempt.has_value());
  CHECK_FALSE(again.counted);

  const LeaseBook::LocalBegin unsure = book.BeginLocally(2, now);
  CHECK_FALSE(unsure.attempt.has_value());
  CHECK(unsure.counted);  // the claim counted it: the server confirms, without counting anew
  CHECK(book.AttemptUnbegun(2));
  book.AttemptConfirmed(2);
  CHECK_FALSE(book.AttemptUnbegun(2));

  const LeaseBook::LocalBegin unknown = book.BeginLocally(3, now);
  CHECK_FALSE(unknown.attempt.has_value());
  CHECK_FALSE(unknown.counted);
}

TEST_CASE("LeaseBook.RenewsTheClaimsItKeepsWithTheirLeasesAndItsOwnResourceLeases") {
  LeaseBook book;
  const Clock::time_point now = Clock::now();
  book.Claimed(1, 10, {100, 101}, 1, now);
  book.Claimed(2, 20, {200}, 1, now);
  book.Claimed(3, 30, {}, 1, now);
  book.AddResourceLease(900);
  book.AddResourceLease(901);
  book.DropResourceLease(901);

  LeaseBook::Renewal renewal = book.ToRenew();
  CHECK(Sorted(renewal.jobs) == Tokens{10, 20, 30});
  CHECK(Sorted(renewal.resources) == Tokens{100, 101, 200, 900});

  // A call the server never answered: kept, not renewed (job and claim leases lapse).
  book.StopRenewing(2);
  // A refusal: not renewed, and the claim's leases are another's now.
  book.Refused(3);
  renewal = book.ToRenew();
  CHECK(renewal.jobs == Tokens{10});
  CHECK(Sorted(renewal.resources) == Tokens{100, 101, 900});
  CHECK(book.Holds(2));
  CHECK(book.Holds(3));
  CHECK(book.ClaimLeases(2) == Tokens{200});  // kept for a later try to give back
  CHECK(book.ClaimLeases(3).empty());
}

TEST_CASE("LeaseBook.AClaimsLeasesAreGivenBackOnce") {
  LeaseBook book;
  book.Claimed(1, 10, {100, 101}, 1, Clock::now());
  CHECK(book.ClaimLeases(1) == Tokens{100, 101});
  CHECK(book.TakeClaimLeases(1) == Tokens{100, 101});
  CHECK(book.TakeClaimLeases(1).empty());
  CHECK(book.Holds(1));  // the job itself is still held
  CHECK(book.ToRenew().resources.empty());
  CHECK(book.TakeClaimLeases(2).empty());  // a job never claimed
}

TEST_CASE("LeaseBook.ARenewalExtendsHowLongAClaimIsSurelyHeld") {
  LeaseBook book;
  const Clock::time_point now = Clock::now();
  book.Claimed(1, 10, {}, 4, now - std::chrono::seconds(1));
  book.Renewed(1, now + std::chrono::seconds(10));
  CHECK(book.BeginLocally(1, now).attempt == 4u);
  book.Renewed(2, now);  // a job not held: nothing
  CHECK_FALSE(book.Holds(2));
}

// What the scheduler asks when a handler returns (SharedStore::SurelyHolds): a claim is surely
// this replica's until its claim's or last renewal's time, and not once it stopped renewing it.
TEST_CASE("LeaseBook.AClaimIsSurelyHeldUntilItsLeaseTimeAndNotOnceItIsNoLongerRenewed") {
  LeaseBook book;
  const Clock::time_point now = Clock::now();
  CHECK_FALSE(book.SurelyHolds(1, now));  // never claimed
  book.Claimed(1, 10, {}, 1, now + std::chrono::seconds(5));
  CHECK(book.SurelyHolds(1, now));
  CHECK_FALSE(book.SurelyHolds(1, now + std::chrono::seconds(5)));  // a stall past it
  book.Renewed(1, now + std::chrono::seconds(10));
  CHECK(book.SurelyHolds(1, now + std::chrono::seconds(5)));
  book.StopRenewing(1);
  CHECK_FALSE(book.SurelyHolds(1, now));
  book.Claimed(2, 20, {}, 1, now + std::chrono::seconds(5));
  book.Forget(2);
  CHECK_FALSE(book.SurelyHolds(2, now));
}

}  // namespace lease_book_test
}  // namespace
}  // namespace fairgate::store
