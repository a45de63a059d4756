#include "core/key_table.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/check.h"

namespace fairgate::core {

KeyState& KeyTable::Add(absl::string_view name) {
  auto [it, inserted] = keys_.try_emplace(name);
  FAIRGATE_CORE_CHECK(inserted, "a key was added twice");
  KeyState& key = it->second;
  key.name = &it->first;
  if (!settings_.empty()) {
    if (auto settings = settings_.find(name); settings != settings_.end()) {
      key.settings = &settings->second;
    }
  }
  return key;
}

void KeyTable::ForgetRuleOnlySettings(absl::string_view name) {
  auto it = settings_.find(name);
  if (it == settings_.end() || Find(name) != nullptr) return;
  const KeySettings& s = it->second;
  if (s.group_by_rule && s.weight == 1 && !s.has_limits && !s.paused) settings_.erase(it);
}

KeySettings& KeyTable::SettingsFor(absl::string_view name) {
  auto [it, inserted] = settings_.try_emplace(name);
  if (inserted) {
    if (KeyState* key = Find(name)) key->settings = &it->second;
  }
  return it->second;
}

void KeyTable::NotePaused(absl::string_view name, bool paused) {
  if (paused) {
    paused_.emplace(name);
  } else if (auto it = paused_.find(name); it != paused_.end()) {
    paused_.erase(it);
  }
}

std::size_t KeyTable::Evict(double now, double ttl, std::size_t batch,
                            std::vector<std::pair<std::string, double>>* evicted) {
  std::size_t count = 0;
  while (count < batch && !idle_.empty() && idle_.front().idle_since + ttl <= now) {
    KeyState& key = idle_.front();
    idle_.pop_front();
    if (evicted != nullptr) evicted->emplace_back(*key.name, key.acc);
    ForgetBucket(key);
    const std::string name = *key.name;
    keys_.erase(keys_.find(name));
    ForgetRuleOnlySettings(name);
    ++count;
  }
  // A table that once held a crowd of keys keeps its slots: give them back once it is mostly
  // empty (O(keys) now and then, amortized over the evictions that emptied it).
  if (count > 0 && keys_.capacity() > 4096 && keys_.size() < keys_.capacity() / 8) {
    keys_.rehash(0);
  }
  return count;
}

void KeyTable::TakeToken(KeyState& key, double now) {
  const RateLimit limit = RateOf(key);
  if (!limit.limited()) return;
  if (leased_) {
    auto it = buckets_.find(&key);
    FAIRGATE_CORE_CHECK(it != buckets_.end() && it->second.tokens.left >= 1,
                        "a key was admitted without a leased token");
    it->second.tokens.left -= 1;
    // Used up: the next lease asked for before the key needs it.
    if (it->second.tokens.left < 1) HoldLeased(key, it->second);
    return;
  }
  KeyBucket& bucket = buckets_.try_emplace(&key, KeyBucket{Tokens::Full(limit)}).first->second;
  bucket.tokens.Take(limit, now);
  if (!bucket.tokens.HasToken(limit, now)) Hold(key, bucket, limit);
}

void KeyTable::HoldLeased(KeyState& key, KeyBucket& bucket) {
  if (!bucket.held) {
    bucket.held = true;
    ++held_count_;
  }
  SetAsked(key, bucket, true);
}

void KeyTable::SetAsked(KeyState& key, const KeyBucket& bucket, bool asked) {
  if (asked) {
    asking_.emplace(bucket.at, &key);
  } else {
    asking_.erase({bucket.at, &key});
  }
}

void KeyTable::Arrive(KeyState& key) {
  if (!leased_ || !RateOf(key).limited()) return;
  KeyBucket& bucket = buckets_.try_emplace(&key).first->second;
  if (bucket.tokens.left < 1) HoldLeased(key, bucket);
}

void KeyTable::AskFor(KeyState& key) {
  if (!leased_) return;
  auto it = buckets_.find(&key);
  if (it != buckets_.end() && it->second.tokens.left < 1) SetAsked(key, it->second, true);
}

bool KeyTable::GrantFrees(const KeyState& key, double tokens) const {
  auto it = buckets_.find(&key);
  return it != buckets_.end() && it->second.held && it->second.tokens.left + tokens >= 1;
}

bool KeyTable::Grant(KeyState& key, double tokens, double due) {
  auto it = buckets_.find(&key);
  if (it == buckets_.end()) return false;
  KeyBucket& bucket = it->second;
  SetAsked(key, bucket, false);  // filed by `at`, which changes
  bucket.tokens.left += tokens;
  bucket.at = due;
  if (bucket.tokens.left >= 1) {
    if (bucket.held) {
      bucket.held = false;
      --held_count_;
    }
  } else {
    // An idle key does not ask again and again; one with jobs waiting does (the runtime asks
    // the store no sooner than it said the next token would be due).
    SetAsked(key, bucket, key.pending > 0);
  }
  return bucket.tokens.left < 1;
}

void KeyTable::Hold(KeyState& key, KeyBucket& bucket, const RateLimit& limit) {
  bucket.held = true;
  ++held_count_;
  bucket.at = bucket.tokens.NextTokenAt(limit);
  held_.emplace(bucket.at, &key);
}

void KeyTable::Release(KeyState& key) {
  auto it = buckets_.find(&key);
  if (it == buckets_.end() || !it->second.held) return;
  if (!leased_) held_.erase({it->second.at, &key});
  it->second.held = false;
  --held_count_;
}

// Whether a key is held depends on what its last take left, not on its limit: less than a token
// holds it until the next one under the limit in force (due at once if that is past: the next
// AdvanceTo lets it go), whatever limit it had when it was taken; without a limit nothing holds
// it. (What it left is kept when its limit goes, and holds it again if a limit comes back.)
//
// Leased, a key given a limit gets its bucket, empty and asking, as if it arrived; one whose
// limit goes is let go, its tokens kept.
void KeyTable::LimitsChanged(KeyState& key) {
  if (leased_) {
    if (RateOf(key).limited()) {
      Arrive(key);
    } else {
      Release(key);  // nothing without a bucket
      if (auto it = buckets_.find(&key); it != buckets_.end()) SetAsked(key, it->second, false);
    }
    return;
  }
  auto it = buckets_.find(&key);
  if (it == buckets_.end()) return;
  Release(key);
  const RateLimit limit = RateOf(key);
  if (limit.limited() && it->second.tokens.left < 1) Hold(key, it->second, limit);
}

double KeyTable::TokensOf(const KeyState& key, double now) const {
  const RateLimit limit = RateOf(key);
  if (!limit.limited()) return std::numeric_limits<double>::infinity();
  auto it = buckets_.find(&key);
  if (leased_) return it == buckets_.end() ? 0 : it->second.tokens.left;
  return it == buckets_.end() ? limit.burst : it->second.tokens.At(limit, now);
}

std::optional<double> KeyTable::MissingTokenAt(const KeyState& key, double now) const {
  const RateLimit limit = RateOf(key);
  if (!limit.limited()) return std::nullopt;
  auto it = buckets_.find(&key);
  if (leased_) {
    // Without a token, the store's last word decides: a token due by `now` (or no word yet) is
    // what the lease on its way may bring; one due later is missing until then.
    if (it == buckets_.end() || it->second.tokens.left >= 1 || it->second.at <= now) {
      return std::nullopt;
    }
    return it->second.at;
  }
  if (it == buckets_.end() || it->second.tokens.HasToken(limit, now)) return std::nullopt;
  return it->second.tokens.NextTokenAt(limit);
}

void KeyTable::ForgetBucket(KeyState& key) {
  if (buckets_.empty()) return;
  auto it = buckets_.find(&key);
  if (it == buckets_.end()) return;
  Release(key);
  SetAsked(key, it->second, false);
  buckets_.erase(it);
}

Status KeyTable::CheckRates() const {
  if (leased_) return CheckLeasedRates();
  std::size_t held = 0;
  for (const auto& [key, bucket] : buckets_) {
    if (!bucket.held) continue;
    ++held;
    if (!held_.contains({bucket.at, const_cast<KeyState*>(key)})) {
      return absl::InternalError(
          absl::StrCat("key '", *key->name, "' is held by its rate but not filed for release"));
    }
    if (bucket.at != bucket.tokens.NextTokenAt(RateOf(*key))) {
      return absl::InternalError(
          absl::StrCat("key '", *key->name, "' is filed for release at another time"));
    }
  }
  if (held != held_.size() || held != held_count_) {
    return absl::InternalError(
        absl::StrCat(held_.size(), " keys filed for release, ", held, " held by their rates"));
  }
  return absl::OkStatus();
}

Status KeyTable::CheckLeasedRates() const {
  if (!held_.empty()) return absl::InternalError("a leased key is filed for release at a time");
  std::size_t held = 0;
  std::size_t asking = 0;
  for (const auto& [key, bucket] : buckets_) {
    const bool limited = RateOf(*key).limited();
    if (bucket.held != (limited && bucket.tokens.left < 1)) {
      return absl::InternalError(absl::StrCat("key '", *key->name, "' is ",
                                              bucket.held ? "" : "not ", "held with ",
                                              bucket.tokens.left, " tokens"));
    }
    const bool asked = asking_.contains({bucket.at, key});
    if (bucket.held && key->pending > 0 && !asked) {
      return absl::InternalError(
          absl::StrCat("key '", *key->name, "' waits for tokens without asking for a lease"));
    }
    held += bucket.held;
    asking += asked;
  }
  if (held != held_count_ || asking != asking_.size()) {
    return absl::InternalError(absl::StrCat(held_count_, " keys counted held, ", held, " held; ",
                                            asking_.size(), " asking, ", asking,
                                            " of them with a bucket"));
  }
  for (const auto& [name, key] : keys_) {
    if (key.pending > 0 && RateOf(key).limited() && !buckets_.contains(&key)) {
      return absl::InternalError(
          absl::StrCat("key '", name, "' has jobs pending under a rate and no leased bucket"));
    }
  }
  return absl::OkStatus();
}

bool KeyTable::Restore(const SavedKey& saved, double idle_since) {
  if (Find(saved.key) != nullptr) return false;
  KeyState& key = Add(saved.key);
  key.acc = saved.accumulated_cost;
  key.idle_since = idle_since;
  auto place = idle_.end();  // the idle list stays in the order the keys became idle
  while (place != idle_.begin() && std::prev(place)->idle_since > idle_since) --place;
  idle_.insert(place, key);
  return true;
}

}  // namespace fairgate::core
