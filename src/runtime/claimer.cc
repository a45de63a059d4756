#include "runtime/claimer.h"

#include <algorithm>
#include <utility>

#include "runtime/thread_name.h"

namespace fairgate::internal {

Claimer::Claimer(StateKeeper& keeper, Settings settings, Types types, Queue queue, Share share)
    : keeper_(keeper),
      settings_(settings),
      interval_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(settings.claim_interval_seconds))),
      types_(std::move(types)),
      queue_(std::move(queue)),
      share_(std::move(share)),
      target_(settings.min_held) {}

Claimer::~Claimer() { Stop(); }

void Claimer::StartThread() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] {
    NameThisThread("fg-claimer");
    Loop();
  });
  listener_ = std::thread([this] {
    NameThisThread("fg-listener");
    Listen();
  });
  sharer_ = std::thread([this] {
    NameThisThread("fg-sharer");
    ShareLoop();
  });
}

// A job stored or given back by any replica pokes the claim at once (SharedStore::WaitForJobs),
// so that it does not wait for the next claim_interval; with a store that cannot tell, the
// listener ends at once. It waits at most kListenSlice at a time, to see Stop.
void Claimer::Listen() {
  constexpr double kListenSlice = 0.2;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
    }
    const Status waited = keeper_.shared_store()->WaitForJobs(kListenSlice);
    if (waited.ok()) {
      Poke();
    } else if (waited.code() == absl::StatusCode::kUnimplemented) {
      return;
    } else if (waited.code() != absl::StatusCode::kDeadlineExceeded) {
      // Cannot listen now (the server is down): the claims go on every claim_interval; try
      // again after one.
      std::unique_lock lock(mutex_);
      wake_listener_.wait_for(lock, std::chrono::duration<double>(settings_.claim_interval_seconds),
                              [&] { return stop_; });
    }
  }
}

void Claimer::Poke() {
  {
    std::lock_guard lock(mutex_);
    poked_ = true;
  }
  wake_.notify_one();
}

void Claimer::Done(bool claim_again) {
  {
    std::lock_guard lock(mutex_);
    if (held_ > 0) --held_;
    ++finished_;
    // Claims in batches: one claim's round trip for each job freed would take a job or two at a
    // time. Half the target held still keeps the workers busy while the claim is under way.
    if (!claim_again || held_ > target_ / 2) return;
    refill_ = true;
  }
  wake_.notify_one();
}

void Claimer::Stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  wake_listener_.notify_all();
  wake_sharer_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (listener_.joinable()) listener_.join();
  if (sharer_.joinable()) sharer_.join();
}

StatusOr<std::size_t> Claimer::ClaimNow() {
  std::lock_guard claim_lock(claim_mutex_);
  return Claim();
}

StatusOr<std::size_t> Claimer::OpenAndClaim(const std::function<void()>& open) {
  std::lock_guard claim_lock(claim_mutex_);
  open();
  return Claim();
}

StatusOr<std::size_t> Claimer::Claim() {
  std::size_t room = 0;
  std::uint64_t finished_before = 0;
  bool dry = false;  // nothing held: the workers wait for this claim
  {
    std::lock_guard lock(mutex_);
    room = target_ - std::min(held_, target_);
    finished_before = finished_;
    dry = held_ == 0;
  }
  if (room == 0) return 0;
  std::vector<ClaimableType> types = types_();
  if (types.empty()) return 0;
  // Its jobs take leases (a fleet-wide conflict group or cap): such a claim costs the store
  // mostly per job (each job's resource probed, its lease taken), not per claim.
  const bool leased = std::any_of(types.begin(), types.end(), [](const ClaimableType& t) {
    return !t.conflict_group.empty() || t.fleet_cap > 0;
  });
  StatusOr<std::vector<StoredJob>> claimed =
      keeper_.shared_store()->ClaimJobs(types, room, settings_.lease_seconds);
  if (!claimed.ok()) {
    keeper_.CountError(StateKeeper::Operation::kClaim);
    return claimed.status();
  }
  const std::size_t count = claimed->size();
  keeper_.CountClaim(count > 0);
  {
    std::lock_guard lock(mutex_);
    held_ += count;
    const std::uint64_t drained = finished_ - finished_before;
    std::uint64_t target = settings_.min_held + 8 * drained;
    // Jobs that finish before the next claim begins drain nothing during it: a replica that ran
    // dry and got all it asked for (more may be waiting) doubles what it holds instead.
    if (dry && count == room) target = std::max<std::uint64_t>(target, 2 * target_);
    target_ = static_cast<std::size_t>(
        std::clamp<std::uint64_t>(target, settings_.min_held, settings_.max_held));
    // A refill asked for during a claim of leased jobs is not left for half the target (Loop):
    // claiming at once the few jobs left room for costs little more a job than a larger claim,
    // and without it BM_DurableWorkedLeased ran 7-10 % slower (bench/HISTORY.md).
    if (refill_ && leased) poked_ = true;
  }
  keeper_.Count(StateKeeper::Outcome::kClaimed, count);
  if (count > 0) queue_(*std::move(claimed));
  return count;
}

void Claimer::Loop() {
  using Clock = std::chrono::steady_clock;
  const auto renew_every = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(settings_.lease_seconds / 3));
  auto next_claim = Clock::now() + interval_;
  auto next_renew = Clock::now() + renew_every;
  std::unique_lock lock(mutex_);
  while (!stop_) {
    // A refill asked for while a claim was under way (held fell to half the target before its
    // jobs were counted) is dropped if that claim brought held above half again: claiming at
    // once took the few jobs the claim had left room for, at the cost of a whole claim (100-jobs
    // claims alternated with 400-jobs ones in fleet_bench, 80 claims where 40 did). Not after
    // a claim of leased jobs (Claim).
    const auto refill = [&] { return refill_ && held_ <= target_ / 2; };
    wake_.wait_until(lock, std::min(next_claim, next_renew),
                     [&] { return stop_ || poked_ || refill() || Clock::now() >= next_renew; });
    if (stop_) break;
    const auto now = Clock::now();
    const bool renew = now >= next_renew;
    const bool claim = poked_ || refill() || now >= next_claim;
    poked_ = false;
    refill_ = false;
    lock.unlock();
    if (renew) {
      next_renew = now + renew_every;
      if (!keeper_.shared_store()->RenewLeases(settings_.lease_seconds).ok()) {
        keeper_.CountError(StateKeeper::Operation::kRenew);
      }
    }
    if (claim) {
      next_claim = now + interval_;
      (void)ClaimNow();  // a failure is counted; tried again at the next interval
    }
    lock.lock();
  }
}

void Claimer::ShareLoop() {
  using Clock = std::chrono::steady_clock;
  auto next_share = Clock::now() + interval_;
  std::unique_lock lock(mutex_);
  while (!wake_sharer_.wait_until(lock, next_share, [&] { return stop_; })) {
    lock.unlock();
    const auto began = Clock::now();
    share_();
    const auto ended = Clock::now();
    next_share =
        std::max(began + interval_, ended + kShareSpacing * std::min(ended - began, interval_));
    lock.lock();
  }
}

}  // namespace fairgate::internal
