// Claimer: a replica's side of a shared store (SharedStore, fairgate/store.h). On a thread of
// its own it claims durable jobs while the replica holds fewer than its limit, every
// claim_interval or at once when poked (a job stored or finished here, or stored or given back
// by any replica: a second thread listens for the store's notifications), and renews the leases
// it holds every third of their time. A third thread calls `share` every claim_interval (the
// scheduler shares its keys' costs with the fleet), or less often, up to twenty times less, for
// a share that takes more than a twentieth of that (kShareSpacing): a share of many keys, or one
// held up by the store, delays neither a claim nor a renewal.
//
// It never takes the scheduler's lock itself: `types`, `queue` and `share` are the scheduler's,
// `types` and `queue` called on the claimer's thread (or on the caller's, for Start's first
// claim), `share` on the sharer's.
//
// Thread safety: every method may be called from any thread.
#ifndef FAIRGATE_RUNTIME_CLAIMER_H_
#define FAIRGATE_RUNTIME_CLAIMER_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "fairgate/store.h"
#include "runtime/state_keeper.h"

namespace fairgate::internal {

class Claimer {
 public:
  // How many jobs the replica holds at most, claimed and not yet finished: between min_held and
  // max_held (>= min_held, >= 1), as many as it can start soon: min_held, plus eight times the
  // jobs that finished during the last claim's round trip (enough for that many round trips: a
  // claim costs the store mostly per claim, not per job), or twice the last target when the
  // claim began with nothing held and took all it asked for (its jobs finished before it began).
  // Equal bounds fix it.
  struct Settings {
    double lease_seconds = 10;
    double claim_interval_seconds = 1;
    std::size_t min_held = 1;
    std::size_t max_held = 1;
  };
  // The types to claim now (empty: claim nothing, e.g. while shutting down).
  using Types = std::function<std::vector<ClaimableType>()>;
  // Takes claimed jobs; gives back (Store::ReleaseJob, then Released) those it cannot queue.
  using Queue = std::function<void(std::vector<StoredJob> jobs)>;
  using Share = std::function<void()>;

  // The next share starts at least this many times the last one's length after it ended, so
  // that sharing takes at most a twenty-first of the store's time, but never more than this many
  // claim intervals after it (a share held up by an outage is not followed by one an hour later).
  // A share's length grows with the keys it carries: with 10,000 keys charged each second, each
  // share held the PostgreSQL store's lock on every key for 40-189 ms (median 86), during which
  // no claim or store of the fleet's went on; so spaced, 1.22x the jobs a second went through
  // (bench/README.md, "Durable jobs worked end to end").
  static constexpr int kShareSpacing = 20;

  Claimer(StateKeeper& keeper, Settings settings, Types types, Queue queue, Share share);
  ~Claimer();  // Stop()
  Claimer(const Claimer&) = delete;
  Claimer& operator=(const Claimer&) = delete;

  // Starts the threads (once).
  void StartThread();
  // Claims once on the caller's thread: how many jobs it claimed, or the store's status (the
  // failure is counted).
  StatusOr<std::size_t> ClaimNow();
  // Runs `open` (what makes jobs claimable: the end of Recover), then claims as ClaimNow does,
  // with no claim of the thread in between: the jobs due at the opening are this claim's.
  StatusOr<std::size_t> OpenAndClaim(const std::function<void()>& open);
  // Claims as soon as the thread can (a job was stored here, or one finished).
  void Poke();
  // A claimed job is finished or was given back: one less held. With `claim_again`, once the
  // replica holds at most half its target, claims as soon as it can, unless a claim of jobs that
  // take no leases, under way meanwhile, brought it back above half (not for a job given back
  // because it could not be queued: that would spin).
  void Done(bool claim_again);
  // Stops the threads (idempotent), after the share under way if one is. Leases still held
  // lapse after their time.
  void Stop();

 private:
  void Loop();
  void Listen();
  void ShareLoop();
  StatusOr<std::size_t> Claim();  // claim_mutex_ held

  StateKeeper& keeper_;
  const Settings settings_;
  const std::chrono::steady_clock::duration interval_;  // settings_.claim_interval_seconds
  const Types types_;
  const Queue queue_;
  const Share share_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::size_t held_ = 0;        // claimed and not yet Done
  std::size_t target_ = 0;      // how many to hold now (Settings)
  std::uint64_t finished_ = 0;  // jobs Done so far
  bool poked_ = false;
  bool refill_ = false;  // held fell to half the target (Done)
  bool stop_ = false;
  std::mutex claim_mutex_;  // one claim at a time
  std::thread thread_;
  std::condition_variable wake_listener_;  // Stop, for a listener waiting out an outage
  std::thread listener_;                   // pokes the claim when any replica stores a job
  std::condition_variable wake_sharer_;    // Stop, for the sharer waiting for its next share
  std::thread sharer_;                     // calls share_ (ShareLoop)
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_CLAIMER_H_
