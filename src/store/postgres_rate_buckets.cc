// PostgresStore's share of the fleet's rate limits: a lease of a bucket's tokens
// (SharedStore::TakeTokens; the statements are postgres_statements.h's kMakeBucket and
// kTakeTokens).
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
  const std::string name(bucket);
  Session session = pool_.Take();
  Link& link = *session;
  bool made;
  {
    std::lock_guard lock(buckets_mutex_);
    made = buckets_made_.contains(name);
  }
  if (!made) {
    StatusOr<Result> r = pool_.RetryingExec(link, kMakeBucket, {{name}, {Number(limit.burst)}},
                                            "make a rate bucket");
    if (!r.ok()) return r.status();
    std::lock_guard lock(buckets_mutex_);
    buckets_made_.insert(name);
  }
  // A retry after a lost answer may take tokens twice: the fleet then starts fewer jobs, never
  // more.
  StatusOr<Result> r = pool_.RetryingExec(
      link, kTakeTokens,
      {{name}, {Number(limit.per_second)}, {Number(limit.burst)}, {std::to_string(want)}},
      "take a rate limit's tokens");
  if (!r.ok()) return r.status();
  if (PQntuples(r->get()) != 1) {
    std::lock_guard lock(buckets_mutex_);
    buckets_made_.erase(name);  // its row was deleted: made again by the next take
    return absl::UnavailableError(absl::StrCat("rate bucket '", name, "' has no row"));
  }
  TokenLease lease;
  lease.taken = std::atoi(PQgetvalue(r->get(), 0, 0));
  const double left = std::strtod(PQgetvalue(r->get(), 0, 1), nullptr);
  if (left < 1) lease.next_in = (1 - left) / limit.per_second;
  return lease;
}

}  // namespace fairgate::store::postgres
