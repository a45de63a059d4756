#include "spool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"

namespace git_mirror {

namespace {
// The sent part is given back to the disk a megabyte at a time (one system call per megabyte).
constexpr std::uint64_t kPunchStep = 1 << 20;
}  // namespace

bool SpoolBudget::TryTake(std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes > limit_ - held_) return false;
  held_ += bytes;
  return true;
}

void SpoolBudget::Give(std::uint64_t bytes) {
  std::vector<std::pair<boost::asio::any_io_executor, std::function<void()>>> waiting;
  {
    std::lock_guard lock(mutex_);
    held_ -= bytes;
    waiting.swap(waiting_);
  }
  for (auto& [executor, ready] : waiting) boost::asio::post(executor, std::move(ready));
}

void SpoolBudget::WhenRoom(boost::asio::any_io_executor executor, std::function<void()> ready) {
  std::lock_guard lock(mutex_);
  waiting_.emplace_back(std::move(executor), std::move(ready));
}

std::uint64_t SpoolBudget::held() const {
  std::lock_guard lock(mutex_);
  return held_;
}

fairgate::StatusOr<std::shared_ptr<Spool>> Spool::Create(const std::string& dir,
                                                         std::shared_ptr<SpoolBudget> budget) {
  std::string path = dir + "/pack-XXXXXX";
  const int fd = mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot make a spool file in '", dir, "': ", std::strerror(errno)));
  }
  unlink(path.c_str());  // gone when closed, whatever happens to the process
  return std::shared_ptr<Spool>(new Spool(fd, std::move(budget)));
}

Spool::~Spool() {
  close(fd_);
  budget_->Give(size_ - given_back_);
}

fairgate::StatusOr<bool> Spool::Append(const char* data, std::size_t size) {
  if (!budget_->TryTake(size)) {
    {
      // Keeping the start for joiners (or every byte, for a cache) may be what holds the room:
      // stop that, give back what the readers have taken, and try once more.
      std::lock_guard lock(mutex_);
      if (!open_ && keep_limit_ == 0) return false;
      open_ = false;
      keep_limit_ = 0;
      GiveBackLocked();
    }
    if (!budget_->TryTake(size)) return false;
  }
  std::uint64_t at;
  {
    std::lock_guard lock(mutex_);
    at = size_;
  }
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      budget_->Give(size);
      return absl::InternalError(absl::StrCat("cannot write a spool file: ", std::strerror(error)));
    }
    done += static_cast<std::size_t>(n);
  }
  std::vector<std::pair<boost::asio::any_io_executor, std::function<void()>>> wake;
  {
    std::lock_guard lock(mutex_);
    size_ += size;
    WakeLocked(wake);
  }
  for (auto& [executor, fn] : wake) boost::asio::post(executor, std::move(fn));
  return true;
}

void Spool::End(fairgate::Status outcome) {
  std::vector<std::pair<boost::asio::any_io_executor, std::function<void()>>> wake;
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
    outcome_ = std::move(outcome);
    abandoned_.reset();
    if (open_) {
      open_ = false;
      GiveBackLocked();
    }
    WakeLocked(wake);
  }
  for (auto& [executor, fn] : wake) boost::asio::post(executor, std::move(fn));
}

void Spool::OnAbandoned(boost::asio::any_io_executor executor, std::function<void()> abandoned) {
  std::lock_guard lock(mutex_);
  abandoned_.emplace(std::move(executor), std::move(abandoned));
}

void Spool::KeepWhole(std::uint64_t limit) {
  std::lock_guard lock(mutex_);
  keep_limit_ = limit;
}

void Spool::HandOver() {
  std::lock_guard lock(mutex_);
  if (size_ > given_back_) budget_->Give(size_ - given_back_);
  given_back_ = size_;
}

bool Spool::whole() const {
  std::lock_guard lock(mutex_);
  return WholeLocked();
}

bool Spool::WholeLocked() const {
  return ended_ && outcome_.ok() && punched_ == 0 && size_ <= keep_limit_;
}

std::optional<Spool::ReaderId> Spool::Join(boost::asio::any_io_executor executor,
                                           std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  if (!open_ && !WholeLocked()) return std::nullopt;
  const ReaderId id = next_reader_++;
  readers_.emplace(id, Reader{std::move(executor), std::move(wake)});
  return id;
}

void Spool::Leave(ReaderId reader) {
  std::optional<std::pair<boost::asio::any_io_executor, std::function<void()>>> abandoned;
  {
    std::lock_guard lock(mutex_);
    if (readers_.erase(reader) == 0) return;
    if (readers_.empty() && !ended_) {
      open_ = false;  // a pack nobody reads is not one to join
      abandoned = std::exchange(abandoned_, std::nullopt);
    }
    GiveBackLocked();
  }
  if (abandoned) boost::asio::post(abandoned->first, std::move(abandoned->second));
}

void Spool::Sent(ReaderId reader, std::uint64_t offset) {
  std::lock_guard lock(mutex_);
  auto it = readers_.find(reader);
  if (it == readers_.end() || offset <= it->second.sent) return;
  it->second.sent = offset;
  GiveBackLocked();
}

void Spool::WaitForMore(ReaderId reader) {
  std::vector<std::pair<boost::asio::any_io_executor, std::function<void()>>> wake;
  {
    std::lock_guard lock(mutex_);
    auto it = readers_.find(reader);
    if (it == readers_.end()) return;
    it->second.waiting = true;
    // More may have come (or the end) since the reader looked.
    if (it->second.sent < size_ || ended_) WakeLocked(wake);
  }
  for (auto& [executor, fn] : wake) boost::asio::post(executor, std::move(fn));
}

Spool::View Spool::view() const {
  std::lock_guard lock(mutex_);
  return View{size_, ended_, outcome_};
}

bool Spool::open_to_joiners() const {
  std::lock_guard lock(mutex_);
  return open_;
}

void Spool::GiveBackLocked() {
  if (open_) return;                 // joiners start at the first byte: keep it all
  if (size_ <= keep_limit_) return;  // kept whole for a cache: counted until handed over
  std::uint64_t taken = size_;       // by every reader (all of it, when none is left)
  for (const auto& [id, reader] : readers_) taken = std::min(taken, reader.sent);
  if (taken <= given_back_) return;
  budget_->Give(taken - given_back_);
  given_back_ = taken;
  const std::uint64_t punch_to = taken / kPunchStep * kPunchStep;
  if (punch_to > punched_) {
    // Where the file system cannot punch holes, the file keeps its blocks until it is closed.
    (void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(punched_),
                    static_cast<off_t>(punch_to - punched_));
    punched_ = punch_to;
  }
}

void Spool::WakeLocked(
    std::vector<std::pair<boost::asio::any_io_executor, std::function<void()>>>& out) {
  for (auto& [id, reader] : readers_) {
    if (!reader.waiting) continue;
    reader.waiting = false;
    out.emplace_back(reader.executor, reader.wake);
  }
}

fairgate::StatusOr<std::size_t> Spool::ReadAt(std::uint64_t offset, char* data,
                                              std::size_t size) const {
  {
    std::lock_guard lock(mutex_);
    if (offset >= size_) return 0;
    size = static_cast<std::size_t>(std::min<std::uint64_t>(size, size_ - offset));
  }
  for (;;) {
    const ssize_t n = pread(fd_, data, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InternalError(absl::StrCat("cannot read a spool file: ", std::strerror(errno)));
    }
    return static_cast<std::size_t>(n);
  }
}

}  // namespace git_mirror
