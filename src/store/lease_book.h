// LeaseBook: what one replica of a shared store holds, by its own account. Internal to src/store.
//
// A shared store's rows say who holds what (a job's holder, lease and fencing token; a
// resource's lease slots); the book is the replica's side of it: the token of every job it
// claimed and is not done with, the resource leases taken with each claim, the leases it took
// through AcquireResource, which of them it keeps renewing, and until when each claim is surely
// its own by its own clock (so that BeginAttempt needs no round trip then).
//
// Its rules, which a store's calls follow:
// - A claim is kept until the job is done with (removed, deferred, killed, released, or found
//   gone): Forget. A call the server refused or never answered keeps its token (forgotten, the
//   replica would act on the job again once nobody holds it: a token of none matches a job given
//   back) but stops renewing it, so its lease lapses unless a later try of the call succeeds.
// - The leases taken with a claim go back with the job (TakeClaimLeases), or, when the server
//   refused the call (another replica holds the job now), are no longer this replica's to give
//   (Refused).
// - Thread-safe: every method takes the book's own mutex, only for the book, never across a
//   round trip to the server.
#ifndef FAIRGATE_STORE_LEASE_BOOK_H_
#define FAIRGATE_STORE_LEASE_BOOK_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace fairgate::store {

class LeaseBook {
 public:
  using Clock = std::chrono::steady_clock;

  // A claim of the job `sequence` with `token`, which counted attempt number `attempt`, with the
  // resource leases `resources` taken with it, surely this replica's until `sure_until`. Replaces
  // an earlier claim of the same job.
  void Claimed(std::uint64_t sequence, std::uint64_t token, std::vector<std::uint64_t> resources,
               std::uint32_t attempt, Clock::time_point sure_until);
  // Whether this replica claimed the job and is not done with it.
  bool Holds(std::uint64_t sequence) const;
  // The token this replica holds the job with, if it holds it.
  std::optional<std::uint64_t> TokenOf(std::uint64_t sequence) const;
  // Whether the claim counted an attempt that has not begun (a job given back or killed unrun
  // gives it back).
  bool AttemptUnbegun(std::uint64_t sequence) const;

  // BeginAttempt's local half. While the claim is surely this replica's at `now`, its counted
  // attempt begins here: `attempt` is its number (and the claim counts none from now). Else
  // `counted` says whether the claim counted one (the server confirms it: AttemptConfirmed).
  struct LocalBegin {
    std::optional<std::uint32_t> attempt;
    bool counted = false;
  };
  LocalBegin BeginLocally(std::uint64_t sequence, Clock::time_point now);
  // The server confirmed the counted attempt: the claim counts none from now.
  void AttemptConfirmed(std::uint64_t sequence);

  // Whether this replica holds the claim and it is surely its own at `now` (claimed or last
  // renewed recently enough, and still renewed).
  bool SurelyHolds(std::uint64_t sequence, Clock::time_point now) const;
  // Until when the claim is surely this replica's, if it holds it and still renews it.
  std::optional<Clock::time_point> SurelyHeldUntil(std::uint64_t sequence) const;

  // What ends a claim (the four below) acts on the claim of the job made with token `of` when
  // one is given, and leaves a later claim of the same job alone: once a call freed the job
  // (deferred, given back), this replica's next claim may take it before the call is done with
  // the claim it was made for.

  // The claim is no longer renewed: its lease lapses, unless a later call ends it first.
  void StopRenewing(std::uint64_t sequence, std::optional<std::uint64_t> of = std::nullopt);
  // The claim is over: forgotten, with whatever leases were taken with it.
  void Forget(std::uint64_t sequence, std::optional<std::uint64_t> of = std::nullopt);
  // The leases taken with the claim (empty for a job not held).
  std::vector<std::uint64_t> ClaimLeases(std::uint64_t sequence) const;
  // The leases taken with the claim, to give back now: the book no longer holds them.
  std::vector<std::uint64_t> TakeClaimLeases(std::uint64_t sequence,
                                             std::optional<std::uint64_t> of = std::nullopt);
  // The server refused a call on the job (another replica holds it now): not renewed, and the
  // leases taken with the claim are no longer this replica's.
  void Refused(std::uint64_t sequence, std::optional<std::uint64_t> of = std::nullopt);

  // What RenewLeases renews: the tokens of the claims still renewed, and every resource lease
  // (those taken with them, and AcquireResource's).
  struct Renewal {
    std::vector<std::uint64_t> jobs;
    std::vector<std::uint64_t> resources;
  };
  Renewal ToRenew() const;
  // The server renewed the job's lease: surely this replica's until `sure_until`.
  void Renewed(std::uint64_t sequence, Clock::time_point sure_until);

  // AcquireResource's leases, kept and renewed until released.
  void AddResourceLease(std::uint64_t token);
  void DropResourceLease(std::uint64_t token);

 private:
  struct Claim {
    std::uint64_t token = 0;
    bool renew = true;
    std::vector<std::uint64_t> resources;  // the resource leases taken with it
    std::uint32_t counted = 0;             // the attempt it counted, until begun (then 0)
    Clock::time_point sure_until;
  };

  // The claim of `sequence` made with token `of` (any claim of it when `of` is not given), or
  // claims_.end(). Under mutex_.
  absl::flat_hash_map<std::uint64_t, Claim>::iterator Find(std::uint64_t sequence,
                                                           std::optional<std::uint64_t> of);

  mutable std::mutex mutex_;  // guards what follows
  absl::flat_hash_map<std::uint64_t, Claim> claims_;
  absl::flat_hash_set<std::uint64_t> resource_leases_;
};

}  // namespace fairgate::store

#endif  // FAIRGATE_STORE_LEASE_BOOK_H_
