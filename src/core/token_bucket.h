// TokenBucket: a RateLimit's state (fairgate/rate_limit.h). Internal to src/core.
//
// Deterministic, as the core is: the tokens are a function of the last take and of the time
// asked about, computed by one expression (docs/ordering.md, "Rate limits", has it), so that the
// reference model of the differential tests, computing the same, agrees to the bit. Tokens (the
// expression, on a limit and a state) serve a key's bucket too, whose limit is the key's
// (KeyLimits::rate_limit) and whose state KeyTable keeps apart from the key.
#ifndef FAIRGATE_CORE_TOKEN_BUCKET_H_
#define FAIRGATE_CORE_TOKEN_BUCKET_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "fairgate/rate_limit.h"
#include "fairgate/status.h"

namespace fairgate::core {

// A bucket's state under a limit: the tokens its last take left, and when that was; a bucket
// nothing has taken from holds `burst` (Full).
struct Tokens {
  double left = 0;
  double at = 0;

  static Tokens Full(const RateLimit& limit) { return {limit.burst, 0}; }
  // The tokens at `now` (>= at): what the last take left plus what was gained since, at most
  // `burst`.
  double At(const RateLimit& limit, double now) const {
    return std::min(limit.burst, left + (now - at) * limit.per_second);
  }
  bool HasToken(const RateLimit& limit, double now) const { return At(limit, now) >= 1; }
  // A take at `now` (HasToken is the caller's to check).
  void Take(const RateLimit& limit, double now) { *this = {At(limit, now) - 1, now}; }
  // The first time at which HasToken holds, after a take that left less than a token: computed,
  // then nudged up to the first double where the expression gives a whole token, so that a timer
  // set to it always finds one.
  double NextTokenAt(const RateLimit& limit) const {
    double t = at + (1 - left) / limit.per_second;
    while (!HasToken(limit, t)) t = std::nextafter(t, std::numeric_limits<double>::infinity());
    return t;
  }
};

// The refusal of a call that asked not to wait for a token (JobOptions::refuse_without_token):
// ResourceExhausted naming `what` lacked one, with `seconds` until it is due as the payload
// fairgate::RetryAfter reads (rate_limit.cc, beside it).
Status RefusedForToken(std::string_view what, double seconds);
// `status` (a refusal) with `seconds` as the payload RetryAfter reads.
Status WithRetryAfter(Status status, double seconds);
// What such a refusal names as lacking the token: the global bucket, a type's, a key's.
inline constexpr std::string_view kGlobalRateName = "the global rate limit";
std::string TypeRateName(std::string_view type);
std::string KeyRateName(std::string_view key);

// Which leased bucket (AdmissionCore::BucketsToLease, GrantTokens): the global rate limit's, a
// type's or a key's, by the type's or the key's name.
struct BucketName {
  enum class Of { kGlobal, kType, kKey };
  Of of = Of::kGlobal;
  std::string name;

  static BucketName Global() { return {}; }
  static BucketName Type(std::string_view type) { return {Of::kType, std::string(type)}; }
  static BucketName Key(std::string_view key) { return {Of::kKey, std::string(key)}; }
  friend bool operator==(const BucketName&, const BucketName&) = default;
};

// A bucket with its limit and its counts: the global rate limit's and each type's. A *leased*
// bucket (a fleet's, fairgate/store.h: SharedStore::TakeTokens) does not fill with time: it holds
// the tokens the runtime granted it (Grant), from none, and tells no time a token is due (the
// runtime's lease is what brings them), only when the store said one would be (NextTokenAt).
class TokenBucket {
 public:
  TokenBucket() = default;
  explicit TokenBucket(const RateLimit& limit) : limit_(limit), tokens_(Tokens::Full(limit)) {}

  bool limited() const { return limit_.limited(); }
  const RateLimit& limit() const { return limit_; }

  // The tokens at `now` (infinity without a limit).
  double TokensAt(double now) const {
    if (!limited()) return std::numeric_limits<double>::infinity();
    return leased_ ? tokens_.left : tokens_.At(limit_, now);
  }
  // Whether an admission at `now` may take a token.
  bool HasToken(double now) const { return TokensAt(now) >= 1; }
  // An admission at `now` takes one (HasToken(now) is the caller's to check).
  void Take(double now) {
    if (!limited()) return;
    if (leased_) {
      tokens_.left -= 1;
      if (tokens_.left < 1) asked_ = true;  // used up: the next lease in hand before it is needed
    } else {
      tokens_.Take(limit_, now);
    }
    ++taken_;
  }
  // The first time at or after `now` at which HasToken holds: when an admission held back by
  // this bucket may go. A leased bucket without a token: the time the store last said one would
  // be due (at least `now`).
  double NextTokenAt(double now) const {
    if (HasToken(now)) return now;
    return std::max(now, leased_ ? due_ : tokens_.NextTokenAt(limit_));
  }
  // Leased and without a token, with the store's last word that the next is due by `now` (or no
  // word yet): the lease on its way may bring one, and a call that will not wait for a token
  // waits for that lease (AdmissionCore::GrantTokens refuses it if the lease brings none).
  bool AwaitsLease(double now) const { return leased_ && !HasToken(now) && due_ <= now; }
  // Leasing: from now on the bucket holds what Grant gives it, from none; it asks for its first
  // lease at once.
  void Lease() {
    leased_ = true;
    asked_ = true;
    tokens_ = {0, 0};
  }
  bool leased() const { return leased_; }
  // Adds `tokens` (a lease) to a leased bucket; `due`: when the store says its next token is due.
  void Grant(double tokens, double due) {
    tokens_.left += tokens;
    due_ = due;
    asked_ = false;
  }
  // A leased bucket wants a lease, whatever is pending (AdmissionCore::BucketsToLease), from
  // when it is leased, a take uses its last token or a call is refused for want of one, until
  // the next grant (one that brings none too: an idle replica does not ask again and again).
  void Ask() { asked_ = true; }
  bool asked() const { return asked_; }
  std::uint64_t taken() const { return taken_; }
  // A decision passed over jobs under this bucket for want of a token.
  void CountRefusal() { ++refused_; }
  std::uint64_t refused() const { return refused_; }

 private:
  RateLimit limit_;
  Tokens tokens_;
  bool leased_ = false;
  bool asked_ = false;  // leased: it wants a lease whatever is pending (Ask)
  double due_ = 0;      // leased: when the store said the next token is due
  std::uint64_t taken_ = 0;
  std::uint64_t refused_ = 0;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_TOKEN_BUCKET_H_
