// AsyncProcess: a child process (Spawn) driven from an event loop. Its stdin and stdout are Asio
// stream descriptors on the caller's executor; its stderr is collected (the last 64 KiB) by the
// object itself; its exit is awaited through a pidfd, so no thread ever blocks on it.
//
// Lifetime: shared; every pending operation holds it. Dropping the last reference to a process
// that has not been reaped kills its process group and reaps it. Use on one strand.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_ASYNC_PROCESS_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_ASYNC_PROCESS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/posix/stream_descriptor.hpp"
#include "fairgate/status.h"

namespace git_mirror {

class AsyncProcess : public std::enable_shared_from_this<AsyncProcess> {
 public:
  static fairgate::StatusOr<std::shared_ptr<AsyncProcess>> Start(
      boost::asio::any_io_executor executor, const std::vector<std::string>& argv,
      const std::vector<std::string>& extra_env);
  ~AsyncProcess();
  AsyncProcess(const AsyncProcess&) = delete;
  AsyncProcess& operator=(const AsyncProcess&) = delete;

  boost::asio::posix::stream_descriptor& in() { return in_; }
  boost::asio::posix::stream_descriptor& out() { return out_; }
  // What it printed on stderr so far (the last 64 KiB).
  const std::string& err() const { return err_; }
  void CloseIn();
  // SIGKILL to its process group (harmless once it has exited).
  void Kill();
  // Calls `done(exit status)` once, when it has exited and its stderr is read to the end: the
  // exit code, or 128 + the signal that ended it.
  void AsyncWaitExit(std::function<void(int exit_code)> done);

 private:
  AsyncProcess(boost::asio::any_io_executor executor, int pid, int in, int out, int err, int pidfd);
  void ReadErr();
  void MaybeExited();

  const int pid_;
  bool reaped_ = false;
  int exit_code_ = -1;
  bool err_open_ = true;
  bool exited_ = false;
  boost::asio::posix::stream_descriptor in_, out_, err_pipe_, pidfd_;
  std::string err_;
  char err_buffer_[4096];
  std::function<void(int)> on_exit_;
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_ASYNC_PROCESS_H_
