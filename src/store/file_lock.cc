#include "store/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace fairgate::store {
namespace {

// What the system says of `error`, for a status.
std::string Reason(int error) { return std::error_code(error, std::generic_category()).message(); }

// A failure to take the lock on `path` for the system's `error`: PermissionDenied when the
// caller may not, else Unavailable.
Status Failed(const char* what, const std::string& path, int error) {
  const std::string message =
      absl::StrCat("cannot ", what, " the lock file ", path, ": ", Reason(error));
  if (error == EACCES || error == EPERM || error == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  return absl::UnavailableError(message);
}

// The process id the holder wrote in the file; 0 if none is there (yet).
long HolderOf(int fd) {
  char text[32] = {};
  const ssize_t read = pread(fd, text, sizeof(text) - 1, 0);
  return read > 0 ? std::strtol(text, nullptr, 10) : 0;
}

}  // namespace

StatusOr<FileLock> FileLock::Take(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Failed("open", path, errno);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const long holder = HolderOf(fd);
    close(fd);
    if (error != EWOULDBLOCK) return Failed("lock", path, error);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is held by ",
                     holder == getpid() ? std::string("this process")
                     : holder > 0       ? absl::StrCat("process ", holder)
                                        : std::string("another process")));
  }
  // The holder's id, for a refusal's message: a failure to write it takes nothing from the lock.
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) == 0) (void)!pwrite(fd, pid.data(), pid.size(), 0);
  return FileLock(fd);
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) close(fd_);  // drops the lock
}

}  // namespace fairgate::store
