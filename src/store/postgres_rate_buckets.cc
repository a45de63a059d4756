// PostgresStore's share of the fleet's rate limits: a lease of a bucket's tokens
// (SharedStore::TakeTokens; the statements are postgres_statements.h's kTakeTokens and
// kForgetFullBuckets).
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "store/postgres_statements.h"
#include "store/postgres_store.h"

namespace fairgate::store::postgres {

StatusOr<TokenLease> PostgresStore::TakeTokens(std::string_view bucket, const RateLimit& limit,
                                               int want) {
  if (Status s = ValidateRateLimit(limit, "rate limit"); !s.ok()) return s;
  if (!limit.limited()) {
    return absl::InvalidArgumentError("a fleet's rate limit needs per_second > 0");
  }
  if (want < 1) {
    return absl::InvalidArgumentError(absl::StrCat("tokens wanted must be >= 1, got ", want));
  }
  if (Status s = RequireText(absl::string_view(bucket.data(), bucket.size()),
                             "a fleet rate limit's bucket name");
      !s.ok()) {
    return s;
  }
  Session session = pool_.Take();
  Link& link = *session;
  bool sweep = false;
  {
    const double now =
        std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    std::lock_guard lock(buckets_mutex_);
    if (now >= next_bucket_sweep_) {
      next_bucket_sweep_ = now + kBucketSweepSeconds;
      sweep = true;
    }
  }
  // Best effort: a sweep that fails leaves rows that are as good as none, for the next one.
  if (sweep)
    pool_.RetryingExec(link, kForgetFullBuckets, {}, "forget full rate buckets").IgnoreError();
  // A retry after a lost answer may take tokens twice: the fleet then starts fewer jobs, never
  // more.
  StatusOr<Result> r = pool_.RetryingExec(link, kTakeTokens,
                                          {{std::string(bucket)},
                                           {Number(limit.per_second)},
                                           {Number(limit.burst)},
                                           {std::to_string(want)}},
                                          "take a rate limit's tokens");
  if (!r.ok()) return r.status();
  TokenLease lease;
  lease.taken = std::atoi(PQgetvalue(r->get(), 0, 0));
  const double left = std::strtod(PQgetvalue(r->get(), 0, 1), nullptr);
  if (left < 1) lease.next_in = (1 - left) / limit.per_second;
  return lease;
}

}  // namespace fairgate::store::postgres
