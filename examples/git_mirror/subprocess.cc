#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace git_mirror {
namespace {

// How often a waiting RunProcess looks at its context.
constexpr int kPollMillis = 20;

struct Pipe {
  int read = -1;
  int write = -1;
  ~Pipe() {
    if (read >= 0) close(read);
    if (write >= 0) close(write);
  }
  bool Open() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    read = fds[0];
    write = fds[1];
    return true;
  }
  void CloseWrite() {
    close(write);
    write = -1;
  }
};

fairgate::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Reads what is there into `into`; false at end of file.
bool Drain(int fd, std::string& into) {
  char buffer[65536];
  const ssize_t n = read(fd, buffer, sizeof buffer);
  if (n > 0) {
    into.append(buffer, static_cast<std::size_t>(n));
    return true;
  }
  return n < 0 && (errno == EINTR || errno == EAGAIN);
}

}  // namespace

fairgate::StatusOr<SpawnedProcess> Spawn(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& extra_env) {
  if (argv.empty()) return absl::InvalidArgumentError("Spawn: empty argv");
  Pipe in, out, err;
  if (!in.Open() || !out.Open() || !err.Open()) return Errno("pipe");

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.read, 0);
  posix_spawn_file_actions_adddup2(&actions, out.write, 1);
  posix_spawn_file_actions_adddup2(&actions, err.write, 2);
  // Nothing else crosses: descriptors opened without close-on-exec (a library's, or a socket
  // accepted by another thread at this very moment) are closed in the child too.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  for (const std::string& e : extra_env) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  // Its own process group, so that a kill reaches what it starts too (git runs helpers:
  // git-remote-http holds a clone's connection, upload-pack runs pack-objects).
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = 0;
  const int spawn_error =
      posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawn_error != 0) {
    return absl::InternalError(
        absl::StrCat("cannot start '", argv[0], "': ", std::strerror(spawn_error)));
  }
  SpawnedProcess spawned;
  spawned.pid = pid;
  spawned.stdin_fd = std::exchange(in.write, -1);
  spawned.stdout_fd = std::exchange(out.read, -1);
  spawned.stderr_fd = std::exchange(err.read, -1);
  return spawned;  // the child's ends close with the Pipes
}

fairgate::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                             std::string_view input, const fairgate::Context& ctx,
                                             const std::vector<std::string>& extra_env) {
  if (argv.empty()) return absl::InvalidArgumentError("RunProcess: empty argv");
  if (ctx.Done()) return ctx.Err();
  auto spawned = Spawn(argv, extra_env);
  if (!spawned.ok()) return spawned.status();
  const pid_t pid = spawned->pid;
  Pipe in, out, err;
  in.write = spawned->stdin_fd;
  out.read = spawned->stdout_fd;
  err.read = spawned->stderr_fd;
  fcntl(in.write, F_SETFL, O_NONBLOCK);

  ProcessResult result;
  std::size_t written = 0;
  if (input.empty()) in.CloseWrite();
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    if (ctx.Done()) {
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return ctx.Err();
    }
    pollfd fds[3];
    nfds_t n = 0;
    if (out_open) fds[n++] = {out.read, POLLIN, 0};
    if (err_open) fds[n++] = {err.read, POLLIN, 0};
    if (in.write >= 0) fds[n++] = {in.write, POLLOUT, 0};
    if (poll(fds, n, kPollMillis) < 0 && errno != EINTR) {
      const fairgate::Status error = Errno("poll");
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return error;
    }
    for (nfds_t i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == out.read) {
        out_open = Drain(out.read, result.out);
      } else if (fds[i].fd == err.read) {
        err_open = Drain(err.read, result.err);
      } else if (fds[i].revents & (POLLERR | POLLHUP)) {
        in.CloseWrite();  // the child stopped reading: it has what it wanted
      } else {
        const ssize_t w = write(in.write, input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<std::size_t>(w);
        if (written == input.size() || (w < 0 && errno != EAGAIN && errno != EINTR)) {
          in.CloseWrite();
        }
      }
    }
  }
  if (in.write >= 0) in.CloseWrite();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Errno("waitpid");
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace git_mirror
