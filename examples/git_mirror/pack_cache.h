// PackCache: packs made and sent whole, kept on disk so that an identical request later is served
// from the file without running git (a hit takes no slot). Keyed like shared packs
// (MirrorServer::PackKey: the repository's fetch generation is part of the key); a repository's
// entries are dropped when a fetch changes it; past `limit` bytes in all, the least recently used
// go first, and at most `max_entries` are kept (each holds its file open: a descriptor). A dropped
// spool's file goes when its last reader is done with it.
//
// Thread safety: every method may be called from any thread at once.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_PACK_CACHE_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_PACK_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "spool.h"

namespace git_mirror {

class PackCache {
 public:
  PackCache(std::uint64_t limit, std::size_t max_entries)
      : limit_(limit), max_entries_(max_entries) {}

  // Keeps `spool` (whole, of `bytes`) under `key`, for `repository`; one larger than the limit
  // is not kept.
  void Put(const std::string& key, const std::string& repository, std::shared_ptr<Spool> spool,
           std::uint64_t bytes);
  // The spool kept under `key` (now the most recently used), or nullptr.
  std::shared_ptr<Spool> Get(const std::string& key);
  // Drops every entry of `repository`.
  void DropRepository(const std::string& repository);

  std::uint64_t bytes() const;
  std::uint64_t limit() const { return limit_; }
  std::uint64_t hits() const;

 private:
  struct Entry {
    std::string key;
    std::string repository;
    std::shared_ptr<Spool> spool;
    std::uint64_t bytes;
  };
  using Order = std::list<Entry>;  // most recently used first

  void EraseLocked(Order::iterator entry);

  const std::uint64_t limit_;
  const std::size_t max_entries_;
  mutable std::mutex mutex_;
  Order order_;
  std::map<std::string, Order::iterator> by_key_;
  std::uint64_t bytes_ = 0;
  std::uint64_t hits_ = 0;
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_PACK_CACHE_H_
