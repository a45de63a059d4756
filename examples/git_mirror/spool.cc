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

fairgate::StatusOr<std::unique_ptr<Spool>> Spool::Create(const std::string& dir,
                                                         std::shared_ptr<SpoolBudget> budget) {
  std::string path = dir + "/pack-XXXXXX";
  const int fd = mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot make a spool file in '", dir, "': ", std::strerror(errno)));
  }
  unlink(path.c_str());  // gone when closed, whatever happens to the process
  return std::unique_ptr<Spool>(new Spool(fd, std::move(budget)));
}

Spool::~Spool() {
  close(fd_);
  budget_->Give(size_ - sent_);
}

fairgate::StatusOr<bool> Spool::Append(const char* data, std::size_t size) {
  if (!budget_->TryTake(size)) return false;
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(size_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      budget_->Give(size);
      return absl::InternalError(absl::StrCat("cannot write a spool file: ", std::strerror(error)));
    }
    done += static_cast<std::size_t>(n);
  }
  size_ += size;
  return true;
}

fairgate::StatusOr<std::size_t> Spool::ReadAt(std::uint64_t offset, char* data,
                                              std::size_t size) const {
  if (offset >= size_) return 0;
  size = static_cast<std::size_t>(std::min<std::uint64_t>(size, size_ - offset));
  for (;;) {
    const ssize_t n = pread(fd_, data, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InternalError(absl::StrCat("cannot read a spool file: ", std::strerror(errno)));
    }
    return static_cast<std::size_t>(n);
  }
}

void Spool::Sent(std::uint64_t offset) {
  if (offset <= sent_) return;
  budget_->Give(offset - sent_);
  sent_ = offset;
  const std::uint64_t punch_to = offset / kPunchStep * kPunchStep;
  if (punch_to > punched_) {
    // Where the file system cannot punch holes, the file keeps its blocks until it is closed.
    (void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(punched_),
                    static_cast<off_t>(punch_to - punched_));
    punched_ = punch_to;
  }
}

}  // namespace git_mirror
