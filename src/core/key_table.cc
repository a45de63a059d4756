#include "core/key_table.h"

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
    keys_.erase(keys_.find(*key.name));
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
  const RateLimit& limit = LimitsOf(key).rate_limit;
  if (!limit.limited()) return;
  KeyBucket& bucket = buckets_.try_emplace(&key, KeyBucket{Tokens::Full(limit)}).first->second;
  bucket.tokens.Take(limit, now);
  if (!bucket.tokens.HasToken(limit, now)) Hold(key, bucket, limit);
}

void KeyTable::Hold(KeyState& key, KeyBucket& bucket, const RateLimit& limit) {
  bucket.held = true;
  ++held_count_;
  bucket.release_at = bucket.tokens.NextTokenAt(limit);
  held_.emplace(bucket.release_at, &key);
}

void KeyTable::Release(KeyState& key) {
  auto it = buckets_.find(&key);
  if (it == buckets_.end() || !it->second.held) return;
  held_.erase({it->second.release_at, &key});
  it->second.held = false;
  --held_count_;
}

// Whether a key is held depends on what its last take left, not on its limit: less than a token
// holds it until the next one under the limit in force (due at once if that is past: the next
// AdvanceTo lets it go), whatever limit it had when it was taken; without a limit nothing holds
// it. (What it left is kept when its limit goes, and holds it again if a limit comes back.)
void KeyTable::LimitsChanged(KeyState& key) {
  auto it = buckets_.find(&key);
  if (it == buckets_.end()) return;
  Release(key);
  const RateLimit& limit = LimitsOf(key).rate_limit;
  if (limit.limited() && it->second.tokens.left < 1) Hold(key, it->second, limit);
}

double KeyTable::TokensOf(const KeyState& key, double now) const {
  const RateLimit& limit = LimitsOf(key).rate_limit;
  if (!limit.limited()) return std::numeric_limits<double>::infinity();
  auto it = buckets_.find(&key);
  return it == buckets_.end() ? limit.burst : it->second.tokens.At(limit, now);
}

std::optional<double> KeyTable::MissingTokenAt(const KeyState& key, double now) const {
  const RateLimit& limit = LimitsOf(key).rate_limit;
  if (!limit.limited()) return std::nullopt;
  auto it = buckets_.find(&key);
  if (it == buckets_.end() || it->second.tokens.HasToken(limit, now)) return std::nullopt;
  return it->second.tokens.NextTokenAt(limit);
}

void KeyTable::ForgetBucket(KeyState& key) {
  if (buckets_.empty()) return;
  Release(key);
  buckets_.erase(&key);
}

Status KeyTable::CheckRates() const {
  std::size_t held = 0;
  for (const auto& [key, bucket] : buckets_) {
    if (!bucket.held) continue;
    ++held;
    if (!held_.contains({bucket.release_at, const_cast<KeyState*>(key)})) {
      return absl::InternalError(
          absl::StrCat("key '", *key->name, "' is held by its rate but not filed for release"));
    }
    if (bucket.release_at != bucket.tokens.NextTokenAt(LimitsOf(*key).rate_limit)) {
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
