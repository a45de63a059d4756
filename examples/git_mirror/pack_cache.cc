#include "pack_cache.h"

#include <utility>

namespace git_mirror {

void PackCache::Put(const std::string& key, const std::string& repository,
                    std::shared_ptr<Spool> spool, std::uint64_t bytes) {
  if (bytes > limit_ || max_entries_ == 0) return;
  std::lock_guard lock(mutex_);
  if (auto it = by_key_.find(key); it != by_key_.end()) EraseLocked(it->second);
  order_.push_front(Entry{key, repository, std::move(spool), bytes});
  by_key_[key] = order_.begin();
  bytes_ += bytes;
  while (bytes_ > limit_ || by_key_.size() > max_entries_) EraseLocked(std::prev(order_.end()));
}

std::shared_ptr<Spool> PackCache::Get(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  ++hits_;
  return it->second->spool;
}

void PackCache::DropRepository(const std::string& repository) {
  std::lock_guard lock(mutex_);
  for (auto it = order_.begin(); it != order_.end();) {
    auto next = std::next(it);
    if (it->repository == repository) EraseLocked(it);
    it = next;
  }
}

std::uint64_t PackCache::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

std::uint64_t PackCache::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

void PackCache::EraseLocked(Order::iterator entry) {
  bytes_ -= entry->bytes;
  by_key_.erase(entry->key);
  order_.erase(entry);
}

}  // namespace git_mirror
