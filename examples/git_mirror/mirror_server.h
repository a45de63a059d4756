// MirrorServer: a read-only git smart-HTTP server over local mirrors of upstream repositories,
// with every piece of work admitted by one WorkGate.
//
// Endpoints:
//   GET  /<repo>/info/refs?service=git-upload-pack   the ref advertisement
//   POST /<repo>/git-upload-pack                       a fetch or clone: the pack
//   GET  /debug/scheduler                              the gate's state as JSON
//   GET  /metrics                                      the gate's metrics (Prometheus text)
// The work, and how it is admitted (see work_gate.h for the types):
//   - the first request for a repository makes its mirror (`git clone --mirror`): "sync-clone",
//     foreground, waited for by that request;
//   - each POST runs `git upload-pack --stateless-rpc` on the mirror: "clone", foreground, keyed by
//     the client (the `client_header` if set and present, else the peer address), the repository as
//     the job id, the request's deadline (`request_timeout`) and its connection as the context;
//   - every `fetch_interval` each mirror is fetched ("fetch", background), and repacked with
//     `git repack -a -d` ("repack", background) after every `repack_after` fetches.
// The ref advertisement (GET info/refs, and with protocol v2 the POST of `command=ls-refs`) is
// not admitted: it reads a few refs, takes milliseconds, and admitting it would charge a clone
// twice and teach the clone's estimate the cost of listing refs.
//
// Answers: 404 for an unknown repository or endpoint, 400 for a path that could escape the mirror
// directory, 403 for any service but git-upload-pack, 502 with git's message when the upstream
// cannot be mirrored, 429 with Retry-After when the gate refuses for load, 503 while shutting
// down, 504 when the request's deadline passes first. A client that disconnects while its clone
// waits has its job cancelled: it never takes a slot (its event log line is "cancelled").
//
// Thread safety: Create, Bind, then Serve on one thread; Stop from any thread.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_MIRROR_SERVER_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_MIRROR_SERVER_H_

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "disconnect_watcher.h"
#include "event_log.h"
#include "fairgate/context.h"
#include "fairgate/status.h"
#include "repo_path.h"
#include "repository_set.h"
#include "work_gate.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace git_mirror {

struct MirrorOptions {
  std::string mirror_dir;     // where mirrors live; created if missing
  std::string client_header;  // e.g. "X-Forwarded-For"; empty: the peer address
  std::chrono::milliseconds fetch_interval{std::chrono::seconds(60)};  // 0: never fetch
  int repack_after = 10;  // fetches between repacks; at least 1
  std::chrono::milliseconds request_timeout{std::chrono::minutes(10)};
  int retry_after_seconds = 5;  // the Retry-After of a 429
  std::string event_log;        // JSON-lines file; empty: none
  int http_threads = 128;       // requests served at once (waiting ones included)
};

fairgate::Status ValidateMirrorOptions(const MirrorOptions& options);

class MirrorServer {
 public:
  static fairgate::StatusOr<std::unique_ptr<MirrorServer>> Create(RepositorySet repositories,
                                                                  MirrorOptions options,
                                                                  std::unique_ptr<WorkGate> gate);
  ~MirrorServer();

  // Binds host:port (port 0: any free port) and returns the port.
  fairgate::StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Stop; starts the periodic fetches.
  void Serve();
  // Stops serving and maintenance, shuts the gate down (waiting jobs fail, running ones finish).
  void Stop();

 private:
  MirrorServer(RepositorySet repositories, MirrorOptions options, std::unique_ptr<WorkGate> gate,
               std::unique_ptr<EventLog> log);

  void HandleGet(const httplib::Request& request, httplib::Response& response);
  void HandlePost(const httplib::Request& request, httplib::Response& response);
  std::string ClientOf(const httplib::Request& request) const;
  // Why a request to `expected` cannot be served (bad path, wrong method, unknown repository, an
  // overlong client name), or OK.
  fairgate::Status Refusal(const httplib::Request& request,
                           const fairgate::StatusOr<GitRequestPath>& path,
                           GitEndpoint expected) const;
  std::string MirrorPath(const std::string& repository) const;
  bool IsMirrored(const std::string& repository) const;
  // Makes the mirror of `repository` if it does not exist yet, as a "sync-clone" of `client`.
  fairgate::Status EnsureMirrored(const fairgate::Context& ctx, const std::string& repository,
                                  const std::string& client);
  // Wraps a job so that the event log sees its start and end; `started` is set when it starts.
  WorkGate::JobFn Logged(std::string type, std::string repository, std::string client,
                         WorkGate::JobFn fn, std::shared_ptr<bool> started);
  void RecordOutcome(std::string_view type, const std::string& repository,
                     const std::string& client, bool started, const fairgate::Status& status);
  void Maintain();
  void SubmitMaintenance(std::string_view type, const std::string& repository);

  const RepositorySet repositories_;
  const MirrorOptions options_;
  std::unique_ptr<WorkGate> gate_;
  std::unique_ptr<EventLog> log_;
  std::unique_ptr<httplib::Server> http_;
  DisconnectWatcher watcher_;

  mutable std::mutex mutex_;
  std::condition_variable stop_requested_;
  bool stopping_ = false;
  std::map<std::string, int> fetches_;           // per mirrored repository, since the start
  std::set<std::string> maintenance_in_flight_;  // "type repository"
  std::thread maintainer_;
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_MIRROR_SERVER_H_
