// store::FileLock: an exclusive lock (flock(2)) on a file of its own, held until the object is
// destroyed, that says which process holds it. The SQLite store's guard against two schedulers
// working one file's jobs (SqliteStore::BeginExclusiveUse).
//
// The kernel drops the lock when the holding process ends, however it ends (kill -9 included), so
// a process restarted after a crash takes it at once. Two opens of the file conflict also within
// one process. A lock file of its own, never the database: closing any descriptor of a SQLite
// database drops the POSIX locks that SQLite holds on it. The file holds the holder's process id
// (informational: a refusal names it), and is left in place when the lock is dropped. The
// descriptor is closed at exec; a child forked without exec shares the lock until it exits.
#ifndef FAIRGATE_STORE_FILE_LOCK_H_
#define FAIRGATE_STORE_FILE_LOCK_H_

#include <string>

#include "fairgate/status.h"

namespace fairgate::store {

class FileLock {
 public:
  // Takes the lock on `path` (made if absent) without waiting. FailedPrecondition while another
  // open of the file holds it, "<path> is held by process <pid>" (or "by this process"); for a
  // file that cannot be made or locked, PermissionDenied when the caller may not (or the file
  // system is read-only), else Unavailable, with the system's reason.
  static StatusOr<FileLock> Take(const std::string& path);

  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;  // open with the lock held; -1 once moved from
};

}  // namespace fairgate::store

#endif  // FAIRGATE_STORE_FILE_LOCK_H_
