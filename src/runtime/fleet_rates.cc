#include "runtime/fleet_rates.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "metrics/prometheus_writer.h"
#include "runtime/thread_name.h"

namespace fairgate::internal {

FleetRates::FleetRates(StateKeeper& keeper, double lease_seconds, double retry_seconds,
                       Wanted wanted, Grant grant)
    : keeper_(keeper),
      store_(*keeper.shared_store()),
      lease_seconds_(lease_seconds),
      retry_after_failure_(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(retry_seconds))),
      wanted_(std::move(wanted)),
      grant_(std::move(grant)) {}

FleetRates::~FleetRates() { Stop(); }

void FleetRates::StartThread() {
  std::lock_guard lock(mutex_);
  if (!thread_.joinable() && !stop_) {
    thread_ = std::thread([this] {
      NameThisThread("fg-fleet-rates");
      Run();
    });
  }
}

void FleetRates::Stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void FleetRates::Wake() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  wake_.notify_one();
}

std::string FleetRates::StoreName(const core::BucketName& bucket) {
  // A key, or a type's name, is any bytes; a database's name is text: a name that is not all
  // printable ASCII is written as its bytes in hex, the same on every replica, so that no store
  // refuses it.
  auto named = [&](const char* plain_prefix, const char* hex_prefix) {
    const bool plain = std::all_of(bucket.name.begin(), bucket.name.end(),
                                   [](char c) { return c >= 0x20 && c <= 0x7e; });
    return plain ? absl::StrCat(plain_prefix, bucket.name)
                 : absl::StrCat(hex_prefix, absl::BytesToHexString(bucket.name));
  };
  switch (bucket.of) {
    case core::BucketName::Of::kGlobal:
      return "global";
    case core::BucketName::Of::kType:
      return named("type:", "type-hex:");
    case core::BucketName::Of::kKey:
      return named("key:", "key-hex:");
  }
  return "";
}

int FleetRates::LeaseSize(const RateLimit& limit, double lease_seconds) {
  const double size = std::floor(limit.per_second * lease_seconds);
  return static_cast<int>(std::clamp(size, 1.0, std::max(1.0, std::floor(limit.burst))));
}

void FleetRates::WriteMetrics(std::string& out) const {
  std::uint64_t leases, empty;
  {
    std::lock_guard lock(mutex_);
    leases = leases_;
    empty = empty_leases_;
  }
  metrics::PrometheusWriter w(out);
  w.Family("fairgate_rate_leases_total", "counter",
           "Leases of the fleet's rate limits' tokens taken from the shared store, by whether "
           "they brought any (empty: the fleet's bucket had none; failures are counted in "
           "fairgate_store_errors_total).");
  w.Sample("fairgate_rate_leases_total", {{"result", "tokens"}}, static_cast<double>(leases));
  w.Sample("fairgate_rate_leases_total", {{"result", "empty"}}, static_cast<double>(empty));
}

void FleetRates::Run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (!woken_) {
      // Asleep until woken, or until the first bucket the store said had no token is due.
      Clock::time_point until = Clock::time_point::max();
      for (const auto& [bucket, at] : retry_at_) until = std::min(until, at);
      if (until == Clock::time_point::max()) {
        wake_.wait(lock, [&] { return stop_ || woken_; });
      } else {
        wake_.wait_until(lock, until, [&] { return stop_ || woken_; });
      }
      if (stop_) break;
    }
    woken_ = false;
    lock.unlock();
    TakeWanted();
    lock.lock();
  }
}

void FleetRates::TakeWanted() {
  const std::vector<std::pair<core::BucketName, RateLimit>> wanted = wanted_();
  // Buckets that were told to wait and are no longer wanted (a key forgotten, or served by a
  // grant of the tokens it waited for): their times are dropped once passed.
  std::erase_if(retry_at_, [now = Clock::now()](const auto& retry) { return retry.second <= now; });
  for (const auto& [bucket, limit] : wanted) {
    const Clock::time_point now = Clock::now();
    const std::string name = StoreName(bucket);
    auto retry = retry_at_.find(name);
    if (retry != retry_at_.end() && retry->second > now) continue;
    StatusOr<TokenLease> taken = store_.TakeTokens(name, limit, LeaseSize(limit, lease_seconds_));
    TokenLease lease;
    if (taken.ok()) {
      lease = *taken;
      std::lock_guard lock(mutex_);
      ++(lease.taken > 0 ? leases_ : empty_leases_);
    } else {
      // No token to be had until the store answers: as a lease that brought none, its next token
      // due at the next try (a call that will not wait is refused then, not held through an
      // outage).
      keeper_.CountError(StateKeeper::Operation::kRateLease);
      lease.next_in = std::chrono::duration<double>(retry_after_failure_).count();
    }
    if (lease.taken > 0 && lease.next_in <= 0) {
      retry_at_.erase(name);
    } else {
      // The store's bucket was left without a token: not before its next (and not in a loop if
      // it says "now"), as the table tells this thread of the bucket no sooner either.
      retry_at_[name] = now + std::max(std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(lease.next_in)),
                                       Clock::duration(std::chrono::milliseconds(1)));
    }
    grant_(bucket, lease);
  }
}

}  // namespace fairgate::internal
