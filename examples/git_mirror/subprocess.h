// Spawn: starts a program with pipes for stdin, stdout and stderr, in its own process group,
// inheriting no other file descriptor (no client socket, no log file). RunProcess: runs one to
// completion, feeding it input and collecting its output, and kills it when a context is done.
//
// Contract: blocks the calling thread (a worker fiber's thread included) until the process exits
// or `ctx` is done; in the second case the process and everything it started (it runs in its own
// process group) is killed (SIGKILL), the process is reaped, and ctx.Err() is returned. The child's
// stdin, stdout and stderr are pipes; it inherits the environment, plus `extra_env` ("NAME=value"
// entries). Any number of threads may call it at once. The process must ignore SIGPIPE (the server
// does), or a child that exits before reading all its input would kill it.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_SUBPROCESS_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_SUBPROCESS_H_

#include <string>
#include <string_view>
#include <vector>

#include "fairgate/context.h"
#include "fairgate/status.h"

namespace git_mirror {

// A started child: its pid and the parent's ends of its pipes (close-on-exec, blocking), owned by
// the caller.
struct SpawnedProcess {
  int pid = -1;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// `argv[0]` is looked up in PATH; the environment is this process's plus `extra_env`. Errors:
// InvalidArgument for an empty argv, Internal when it cannot be started.
fairgate::StatusOr<SpawnedProcess> Spawn(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& extra_env);

struct ProcessResult {
  int exit_code = 0;  // the exit status; 128 + signal number if a signal ended it
  std::string out;
  std::string err;
};

// `argv[0]` is looked up in PATH. Errors: InvalidArgument for an empty argv, Internal when the
// process cannot be started, ctx.Err() when the context ends first.
fairgate::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                             std::string_view input, const fairgate::Context& ctx,
                                             const std::vector<std::string>& extra_env = {});

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_SUBPROCESS_H_
