// Spool: a pack on its way from git to its clients, in a file on disk, so that making the pack
// (which holds a slot) does not wait for any client's network, and a slow reader costs the server
// a descriptor and disk, never a slot.
//
// One writer appends git's output as it comes; any number of readers read it back, each at its
// own pace (every request that asked for exactly this pack while it was being made: Join). The
// file is unlinked as soon as it is made (a crash leaves nothing behind), and the bytes every
// reader has taken are given back to the disk as they go (a hole punched in the file, where the
// file system can), so a spool holds what is made and not yet sent to its slowest reader.
//
// Joining is possible until the spool closes to joiners: when the writer ends, or when the
// budget has no room for an append (from then on what the readers have taken is given back; a
// spool open to joiners keeps its start for them). A spool that keeps its bytes whole (up to
// KeepWhole's limit: no holes punched) and ended well may be joined after its end too: that is
// a cached pack (pack_cache.h).
//
// SpoolBudget: the bytes all spools together may hold. An append the budget has no room for
// waits (WhenRoom) until a reader sends or a spool is dropped: the writer, and so git, then waits
// on its pipe as it would without a spool. A spool's own readers free room as they send, so a
// pack larger than the budget still goes through.
//
// Thread safety: every method of both classes may be called from any thread; Append and End from
// one writer at a time. A reader's `wake` runs on the executor it gave.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_SPOOL_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_SPOOL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "boost/asio/any_io_executor.hpp"
#include "fairgate/status.h"

namespace git_mirror {

class SpoolBudget {
 public:
  explicit SpoolBudget(std::uint64_t limit) : limit_(limit) {}
  // Counts `bytes` more if they fit; false (nothing counted) if not.
  bool TryTake(std::uint64_t bytes);
  // Gives `bytes` back and wakes every waiter.
  void Give(std::uint64_t bytes);
  // Runs `ready` on `executor` once bytes have been given back after this call.
  void WhenRoom(boost::asio::any_io_executor executor, std::function<void()> ready);
  std::uint64_t held() const;
  std::uint64_t limit() const { return limit_; }

 private:
  const std::uint64_t limit_;
  mutable std::mutex mutex_;
  std::uint64_t held_ = 0;
  std::vector<std::pair<boost::asio::any_io_executor, std::function<void()>>> waiting_;
};

class Spool {
 public:
  using ReaderId = int;
  // What a reader sees: the bytes written so far, and once the writer has ended, how.
  struct View {
    std::uint64_t size = 0;
    bool ended = false;
    fairgate::Status outcome;  // once ended: OK, or what to answer a client not yet answered
  };

  // A new, empty spool in `dir` (which must exist).
  static fairgate::StatusOr<std::shared_ptr<Spool>> Create(const std::string& dir,
                                                           std::shared_ptr<SpoolBudget> budget);
  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // The writer. Append: true once written; false if the budget has no room now (nothing
  // written: wait with budget().WhenRoom and try again); an error if the disk refuses.
  fairgate::StatusOr<bool> Append(const char* data, std::size_t size);
  // No more bytes will come; `outcome` is what readers act on. Wakes every reader.
  void End(fairgate::Status outcome);
  // Runs `abandoned` (on `executor`) if the last reader leaves before End: nobody wants the pack.
  void OnAbandoned(boost::asio::any_io_executor executor, std::function<void()> abandoned);

  // Keeps every byte on disk (no holes punched, and all of them counted in the budget) while
  // the spool holds at most `limit` bytes; past it, or when the budget runs short, it stops
  // keeping and gives back as usual. Call before the first Append.
  void KeepWhole(std::uint64_t limit);
  // A whole spool taken into a cache: its bytes leave the spool budget (the cache counts them).
  void HandOver();
  // Whether it ended well with every byte still on disk: it can be read again from the start.
  bool whole() const;

  // A reader, starting at the first byte; nullopt once the spool is closed to joiners, unless it
  // is whole().
  std::optional<ReaderId> Join(boost::asio::any_io_executor executor, std::function<void()> wake);
  void Leave(ReaderId reader);
  // The reader has sent everything before `offset`.
  void Sent(ReaderId reader, std::uint64_t offset);
  // The reader found nothing new to send: its `wake` runs once more is written, or at End.
  void WaitForMore(ReaderId reader);
  View view() const;
  // Reads up to `size` bytes at `offset` (0 past the end).
  fairgate::StatusOr<std::size_t> ReadAt(std::uint64_t offset, char* data, std::size_t size) const;

  bool open_to_joiners() const;
  SpoolBudget& budget() { return *budget_; }

 private:
  struct Reader {
    boost::asio::any_io_executor executor;
    std::function<void()> wake;
    std::uint64_t sent = 0;
    bool waiting = false;
  };
  Spool(int fd, std::shared_ptr<SpoolBudget> budget) : fd_(fd), budget_(std::move(budget)) {}
  // Gives back what every reader has taken (once closed to joiners, unless kept whole). Under
  // the mutex.
  void GiveBackLocked();
  bool WholeLocked() const;
  void WakeLocked(std::vector<std::pair<boost::asio::any_io_executor, std::function<void()>>>& out);

  const int fd_;
  const std::shared_ptr<SpoolBudget> budget_;
  mutable std::mutex mutex_;
  std::uint64_t size_ = 0;
  std::uint64_t given_back_ = 0;  // bytes given back to the budget
  std::uint64_t punched_ = 0;     // bytes given back to the disk
  std::uint64_t keep_limit_ = 0;  // no holes while size_ is at most this
  bool open_ = true;
  bool ended_ = false;
  fairgate::Status outcome_;
  std::map<ReaderId, Reader> readers_;
  ReaderId next_reader_ = 0;
  std::optional<std::pair<boost::asio::any_io_executor, std::function<void()>>> abandoned_;
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_SPOOL_H_
