// Spool: a pack on its way from git to a client, in a file on disk, so that making the pack (which
// holds a slot) does not wait for the client's network, and a slow reader costs the server a
// descriptor and disk, never a slot.
//
// git's output is appended as it comes; the client's side reads it back at its own pace. The file
// is unlinked as soon as it is made (a crash leaves nothing behind) and the bytes a client has
// taken are given back to the disk as it goes (a hole punched in the file, where the file system
// can), so a spool holds what is made and not yet sent.
//
// SpoolBudget: the bytes all spools together may hold (made, not yet sent). An append the budget
// has no room for waits (WhenRoom) until a reader sends, or a spool is dropped: the writer, and so
// git, then waits on its pipe as it would without a spool. A spool's own reader always frees room
// as it sends, so a pack larger than the budget still goes through.
//
// Thread safety: SpoolBudget's methods from any thread. A Spool from one strand at a time.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_SPOOL_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_SPOOL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
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
  // A new, empty spool in `dir` (which must exist).
  static fairgate::StatusOr<std::unique_ptr<Spool>> Create(const std::string& dir,
                                                           std::shared_ptr<SpoolBudget> budget);
  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // Appends `size` bytes: true once written; false if the budget has no room now (nothing
  // written: wait with budget().WhenRoom and try again); an error if the disk refuses.
  fairgate::StatusOr<bool> Append(const char* data, std::size_t size);
  // Reads up to `size` bytes at `offset` (at most size() - offset).
  fairgate::StatusOr<std::size_t> ReadAt(std::uint64_t offset, char* data, std::size_t size) const;
  // The reader has sent everything before `offset`: that part's room goes back to the budget.
  void Sent(std::uint64_t offset);

  std::uint64_t size() const { return size_; }
  SpoolBudget& budget() { return *budget_; }

 private:
  Spool(int fd, std::shared_ptr<SpoolBudget> budget) : fd_(fd), budget_(std::move(budget)) {}

  const int fd_;
  const std::shared_ptr<SpoolBudget> budget_;
  std::uint64_t size_ = 0;
  std::uint64_t sent_ = 0;     // bytes given back to the budget
  std::uint64_t punched_ = 0;  // bytes given back to the disk (a multiple of kPunchStep)
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_SPOOL_H_
