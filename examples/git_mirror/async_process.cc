#include "async_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "subprocess.h"

namespace git_mirror {
namespace {

constexpr std::size_t kMaxErr = 64 * 1024;

int ExitCodeOf(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

fairgate::StatusOr<std::shared_ptr<AsyncProcess>> AsyncProcess::Start(
    boost::asio::any_io_executor executor, const std::vector<std::string>& argv,
    const std::vector<std::string>& extra_env) {
  auto spawned = Spawn(argv, extra_env);
  if (!spawned.ok()) return spawned.status();
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, spawned->pid, 0));
  if (pidfd < 0) {
    const int error = errno;
    kill(-spawned->pid, SIGKILL);
    waitpid(spawned->pid, nullptr, 0);
    for (int fd : {spawned->stdin_fd, spawned->stdout_fd, spawned->stderr_fd}) close(fd);
    return absl::InternalError(absl::StrCat("pidfd_open: ", std::strerror(error)));
  }
  fcntl(pidfd, F_SETFD, FD_CLOEXEC);
  std::shared_ptr<AsyncProcess> process(new AsyncProcess(std::move(executor), spawned->pid,
                                                         spawned->stdin_fd, spawned->stdout_fd,
                                                         spawned->stderr_fd, pidfd));
  process->ReadErr();
  return process;
}

AsyncProcess::AsyncProcess(boost::asio::any_io_executor executor, int pid, int in, int out, int err,
                           int pidfd)
    : pid_(pid),
      in_(executor, in),
      out_(executor, out),
      err_pipe_(executor, err),
      pidfd_(executor, pidfd) {
  boost::system::error_code ignored;
  in_.non_blocking(true, ignored);
  out_.non_blocking(true, ignored);
  err_pipe_.non_blocking(true, ignored);
}

AsyncProcess::~AsyncProcess() {
  if (!reaped_) {
    kill(-pid_, SIGKILL);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

void AsyncProcess::CloseIn() {
  boost::system::error_code ignored;
  in_.close(ignored);
}

void AsyncProcess::Kill() {
  if (!reaped_) kill(-pid_, SIGKILL);
}

void AsyncProcess::ReadErr() {
  err_pipe_.async_read_some(
      boost::asio::buffer(err_buffer_),
      [self = shared_from_this()](boost::system::error_code error, std::size_t n) {
        self->err_.append(self->err_buffer_, n);
        if (self->err_.size() > kMaxErr) {
          self->err_.erase(0, self->err_.size() - kMaxErr);
        }
        if (error) {
          self->err_open_ = false;
          return self->MaybeExited();
        }
        self->ReadErr();
      });
}

void AsyncProcess::AsyncWaitExit(std::function<void(int)> done) {
  on_exit_ = std::move(done);
  pidfd_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                    [self = shared_from_this()](boost::system::error_code) {
                      int status = 0;
                      pid_t r;
                      while ((r = waitpid(self->pid_, &status, 0)) < 0 && errno == EINTR) {
                      }
                      self->reaped_ = true;
                      self->exit_code_ = r == self->pid_ ? ExitCodeOf(status) : 255;
                      self->exited_ = true;
                      self->MaybeExited();
                    });
}

void AsyncProcess::MaybeExited() {
  if (!exited_ || err_open_ || !on_exit_) return;
  std::exchange(on_exit_, nullptr)(exit_code_);
}

}  // namespace git_mirror
