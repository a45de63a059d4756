// FleetRates: the fleet's rate limits, on a shared store (SharedStore::TakeTokens,
// fairgate/store.h). With a shared store the global rate limit's bucket, every rate-limited
// type's and every rate-limited key's are the fleet's: the core's bucket is leased
// (AdmissionCore::LeaseTokens, LeaseKeyTokens) and holds only the tokens this replica took. When a
// decision leaves a leased bucket without a token while jobs wait under it, the table wakes this
// component's thread (Wake), which takes a lease of the store's bucket (what the rate gives in
// FleetOptions::token_lease, at least one token and at most the burst) and grants it, and the table
// decides again. A store with none says when its next token is due, and the thread takes again
// then, not before; a store that fails is asked again after claim_interval, and its failure is
// granted as a lease that brought none, the next token due then. So the fleet starts at
// most burst + rate x w jobs of a bucket in any w seconds, plus one lease per replica
// (FleetOptions::token_lease states the bound).
//
// It never takes the scheduler's lock itself: `wanted` and `grant` are the scheduler's, called on
// its thread; Wake takes only this component's own lock (a leaf: the table calls it under its
// lock).
//
// Thread safety: every method may be called from any thread.
#ifndef FAIRGATE_RUNTIME_FLEET_RATES_H_
#define FAIRGATE_RUNTIME_FLEET_RATES_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/token_bucket.h"
#include "fairgate/rate_limit.h"
#include "fairgate/store.h"
#include "runtime/state_keeper.h"

namespace fairgate::internal {

class FleetRates {
 public:
  using Clock = std::chrono::steady_clock;
  // The leased buckets that want tokens now, with their limits.
  using Wanted = std::function<std::vector<std::pair<core::BucketName, RateLimit>>()>;
  // Gives a bucket the tokens a lease took (and when the store said the next is due).
  using Grant = std::function<void(const core::BucketName& bucket, const TokenLease& lease)>;

  // `keeper`'s store is shared; its failures are counted there (kRateLease).
  FleetRates(StateKeeper& keeper, double lease_seconds, double retry_seconds, Wanted wanted,
             Grant grant);
  ~FleetRates();  // Stop()
  FleetRates(const FleetRates&) = delete;
  FleetRates& operator=(const FleetRates&) = delete;

  void StartThread();
  // Stops and joins the thread (once; later calls do nothing).
  void Stop();
  // A leased bucket wants a lease that may be taken now (AdmissionTable::LeaseRates).
  void Wake();

  // The bucket's name in the store: "global", or "type:" and the type's name, or "key:" and the
  // key's ("type-hex:" or "key-hex:" and its bytes in hex when it is not all printable ASCII).
  static std::string StoreName(const core::BucketName& bucket);
  // How many tokens a lease asks for: what `limit` gives in `lease_seconds`, at least 1 and at
  // most the burst.
  static int LeaseSize(const RateLimit& limit, double lease_seconds);

  // Appends fairgate_rate_leases_total: the leases taken, by whether they brought tokens.
  void WriteMetrics(std::string& out) const;

 private:
  void Run();
  // One round: a lease for each bucket that wants tokens and whose retry time has come.
  void TakeWanted();

  StateKeeper& keeper_;
  SharedStore& store_;
  const double lease_seconds_;
  const Clock::duration retry_after_failure_;
  const Wanted wanted_;
  const Grant grant_;
  // By store name; the thread's own: no lock. A bucket no longer wanted leaves once its time
  // has passed.
  std::map<std::string, Clock::time_point> retry_at_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool woken_ = false;
  bool stop_ = false;
  std::uint64_t leases_ = 0;        // that brought a token or more
  std::uint64_t empty_leases_ = 0;  // that brought none
  std::thread thread_;
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_FLEET_RATES_H_
