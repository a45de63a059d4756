// PoolDispatcher: the dispatcher of the worker pool example (README.md). Worker processes
// connect to its Unix socket and register with their capabilities (fairgate's AddWorker); a
// connection that closes removes its worker (RemoveWorker), whose running jobs fairgate ends at
// once. Clients connect to the same socket and ask for jobs; each is run through fairgate's
// RunSync, in fairgate's order, on the worker fairgate assigns, and a job lost with its worker
// is asked for again, up to three times, so that none is lost.
//
// Protocol, one line each way (README.md has it in full):
//   worker -> dispatcher  WORKER <name> <slots> <type>[,<type>...]   then  DONE <job> OK
//   dispatcher -> worker  RUN <job> <type> <id> <seconds>
//   client -> dispatcher  JOB <type> <id> <key> <seconds>
//   dispatcher -> client  DONE <type> <id> <worker>  |  ERR <type> <id> <status>
// What happens is written to `log`, a line per event: worker+ / worker- <name>, start <job>
// <type> <id> <worker>, end <job>, lost <job> <worker>, retry <type> <id>.
#ifndef FAIRGATE_EXAMPLES_WORKER_POOL_POOL_DISPATCHER_H_
#define FAIRGATE_EXAMPLES_WORKER_POOL_POOL_DISPATCHER_H_

#include <atomic>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "fairgate/scheduler.h"
#include "line_socket.h"

namespace worker_pool {

class PoolDispatcher {
 public:
  PoolDispatcher(fairgate::Scheduler& scheduler, std::ostream& log)
      : scheduler_(scheduler), log_(log) {}
  ~PoolDispatcher();
  // Listens on `path` (replacing a stale socket file) and serves until Stop.
  fairgate::Status Serve(const std::string& path);
  void Stop();

 private:
  struct Worker {
    std::string name;
    std::shared_ptr<LineSocket> socket;
    std::mutex mutex;
    std::map<std::uint64_t, std::promise<void>> waiting;  // jobs sent, not yet done
  };
  void Handle(std::shared_ptr<LineSocket> socket);
  void ServeWorker(std::shared_ptr<LineSocket> socket, const std::string& hello);
  void ServeClient(std::shared_ptr<LineSocket> socket, std::string line);
  // A job's function under RunSync: sends it to the worker its context names and waits for its
  // end, or for its context to end (the worker was removed: Unavailable).
  fairgate::Status RunOnWorker(const fairgate::Context& ctx, const std::string& type,
                               const std::string& id, double seconds);
  void Log(const std::string& line);

  fairgate::Scheduler& scheduler_;
  std::ostream& log_;
  std::mutex log_mutex_;
  std::mutex mutex_;  // workers_, threads_
  std::map<std::string, std::shared_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
  std::atomic<std::uint64_t> next_job_{1};
  std::atomic<bool> stopping_{false};
  int listener_ = -1;
};

}  // namespace worker_pool

#endif  // FAIRGATE_EXAMPLES_WORKER_POOL_POOL_DISPATCHER_H_
