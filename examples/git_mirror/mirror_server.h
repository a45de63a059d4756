// MirrorServer: a read-only git smart-HTTP server over local mirrors of upstream repositories,
// with every piece of work admitted by one WorkGate, behind an event-driven front door
// (http_server.h).
//
// Endpoints:
//   GET  /<repo>/info/refs?service=git-upload-pack   the ref advertisement ("refs")
//   POST /<repo>/git-upload-pack                       a fetch or clone: the pack ("clone"); with
//                                                      protocol v2, `command=ls-refs` is "refs"
//   GET  /debug/scheduler                              the gate's state as JSON, only for
//                                                      `debug_allow` clients, and without their
//                                                      names unless `debug_show_clients`
//   GET  /metrics                                      the gate's and the front door's metrics
// The work, and how it is admitted (see work_gate.h for the types):
//   - the first request for a repository makes its mirror (`git clone --mirror`): "sync-clone",
//     foreground, keyed by that request's client, run on the gate's threads;
//   - each request runs `git upload-pack --stateless-rpc` on the mirror, admitted asynchronously
//     under the client's key with the repository as the job id: a waiting request costs no
//     thread. Its slot is held while git makes the pack, which goes to a spool file (spool.h) as
//     fast as git writes it; the slot goes back when git ends, and the client is served from the
//     spool at its own pace, holding a connection and a file, not a slot. So the cost fairgate
//     learns is the time to make that repository's pack, and a slow reader meters nothing;
//   - each mirror is fetched ("fetch", background) `fetch_interval` after its last fetch ended, as
//     a periodic job of the gate (WorkGate::SubmitEvery: with fairgate, the first fetches of the
//     mirrors are spread over one interval and later ones jittered, so they do not all start
//     together), and repacked with `git repack -a -d` ("repack", background) after every
//     `repack_after` fetches.
//
// Answers: 400 for a malformed request (a bad path, a body that is not pkt-lines, bad gzip), 403
// for anything but the upload-pack service (pushes, the dumb protocol), 404 for an unknown
// repository or endpoint, 405/415 for a wrong method or content type, 413/431 past the size
// limits, 429 with Retry-After when the gate refuses for load, 502 when the upstream cannot be
// mirrored, 503 while shutting down, 504 when the request waited longer than `request_timeout`.
// No answer names an upstream URL or a path on the server; git's own messages go to the server's
// stderr and the event log only. A client that disconnects while its request waits has its job
// cancelled: it never takes a slot (its event log line is "cancelled"). A transfer that fails
// (client gone, too slow) while git makes the pack stops git and ends the job with Unavailable;
// one that fails after is logged as "cut" (the job ended when the pack was made).
//
// Start-up removes what an interrupted run left in the mirrors (`tmp_pack_*`, `*.lock`, scratch
// clones). Stop: stops accepting, fails waiting requests (503), lets running work finish for up to
// `shutdown_grace`, then kills git and closes the connections that remain.
//
// Thread safety: Create, Bind, then Serve on one thread; Stop from any thread.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_MIRROR_SERVER_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_MIRROR_SERVER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "event_log.h"
#include "fairgate/context.h"
#include "fairgate/status.h"
#include "http_metrics.h"
#include "http_server.h"
#include "network_set.h"
#include "pack_cache.h"
#include "repo_path.h"
#include "repository_set.h"
#include "spool.h"
#include "spool_response.h"
#include "work_gate.h"

namespace git_mirror {

struct MirrorOptions {
  std::string mirror_dir;  // where mirrors live; created if missing
  std::chrono::milliseconds fetch_interval{std::chrono::seconds(60)};  // 0: never fetch
  int repack_after = 10;  // fetches between repacks; at least 1
  // How long a request may wait for admission (504 after that).
  std::chrono::milliseconds request_timeout{std::chrono::minutes(10)};
  std::string event_log;  // JSON-lines file; empty: none
  int io_threads = 2;     // threads running the event loop
  // How long Stop lets running fetches, repacks and transfers go on before killing them.
  std::chrono::milliseconds shutdown_grace{std::chrono::seconds(30)};
  // Who may read /debug/*: clients (after trusted proxies, see http_server.h) in these networks;
  // others get 403. Empty: nobody.
  std::vector<std::string> debug_allow = {"127.0.0.0/8", "::1"};
  // Whether /debug/scheduler names the heaviest clients; if not, each is shown as a pseudonym
  // (a hash of its name, stable while the process runs, so one client can be followed).
  bool debug_show_clients = false;
  // Bytes of packs made and not yet sent that the spools (spool.h, in `<mirror_dir>/.spool`) may
  // hold in all; past it, git waits on its pipe (holding its slot) until a reader takes some.
  std::uint64_t spool_bytes = std::uint64_t{1} << 30;
  // Whether identical pack requests while the pack is being made share it (one git run).
  bool share_packs = true;
  // Bytes of finished packs kept (in `<mirror_dir>/.spool`, unlinked) for identical requests
  // later: a hit is served without git and takes no slot. A pack over a quarter of it is not
  // kept; 0: none. Needs share_packs.
  std::uint64_t pack_cache_bytes = std::uint64_t{1} << 30;
  // Seconds charged to a client's account for each pack served from the cache (a hit takes no
  // slot and runs no git, but reading a kept pack is not free); >= 0.
  double hit_charge_seconds = 0.01;
  // The niceness of git runs beyond a client's first, and of the server's own (first mirrors,
  // fetches, repacks), above the server's niceness (nice(1); 0: the server's, 1 to 19). Packs take
  // whole cores: the server's threads, which send every response (cache hits, shared packs, ref
  // listings), must not wait for a core behind them, nor a client's one pack behind another
  // client's many. A client's only git run runs at the server's niceness. Without it, 8
  // pack-objects beside the server's event loop on one core made each write of a cached pack wait
  // a scheduling turn (README.md, "With the pack cache, shared packs and a trusted proxy").
  int git_nice = 10;
  // At most this many finished packs are kept (each holds a descriptor).
  static constexpr std::size_t kMaxKeptPacks = 64;
  HttpLimits http;
};

fairgate::Status ValidateMirrorOptions(const MirrorOptions& options);

// Removes what an interrupted git left in the mirrors under `mirror_dir`: `objects/pack/tmp_*`
// and `.tmp-*` files, `objects/incoming-*` quarantines, `*.lock` files, and scratch clones in
// `.incoming`. Returns how many it removed. Only for a directory no git process is using.
int RemoveStaleLeftovers(const std::string& mirror_dir);

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
  // See the header comment. Idempotent; returns once everything has stopped.
  void Stop();

  const HttpMetrics& http_metrics() const { return *http_metrics_; }

 private:
  class Request;
  friend class Request;
  MirrorServer(RepositorySet repositories, MirrorOptions options, std::unique_ptr<WorkGate> gate,
               std::unique_ptr<EventLog> log);

  void Handle(const std::shared_ptr<HttpExchange>& exchange);
  void HandleGet(const std::shared_ptr<HttpExchange>& exchange, const std::string& path,
                 const std::map<std::string, std::string>& query);
  void HandlePost(const std::shared_ptr<HttpExchange>& exchange, const std::string& path);
  // POST /hooks/fetch/<repository>: the upstream changed (a push webhook); queues a fetch of it,
  // coalesced with a fetch that waits, and answers 202 at once.
  void HandleFetchHook(const std::shared_ptr<HttpExchange>& exchange,
                       const std::string& repository);
  void Reply(HttpExchange& exchange, const fairgate::Status& status) const;
  std::string SpoolDir() const;
  // Identical pack requests while the pack is being made share it (one job, one git run, every
  // client reading the spool as it grows). The key: the type, the repository and its fetch
  // generation (the mirror changes only by its fetches), git's command, the protocol and the
  // request body; empty (never shared) for a body over 64 KiB.
  std::string PackKey(const std::string& type, const std::string& repository,
                      const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      const std::string& body) const;
  // The spool of `key` that `client` may join: open to joiners, and either running or
  // `client`'s own (waiting for its turn, a pack is joined only by its own client: another would
  // wait at that client's place in the order); else nullptr.
  std::shared_ptr<Spool> FindPack(const std::string& key, const std::string& client);
  void OfferPack(const std::string& key, const std::string& client, std::shared_ptr<Spool> spool);
  void PackRunning(const std::string& key, const std::shared_ptr<Spool>& spool);
  void WithdrawPack(const std::string& key, const std::shared_ptr<Spool>& spool);
  // A response to `exchange` from `spool` (logged "sent" or "cut" when it ends); nullptr if the
  // spool is closed to joiners.
  std::shared_ptr<SpoolResponse> Respond(std::shared_ptr<Spool> spool,
                                         std::shared_ptr<HttpExchange> exchange,
                                         const std::string& type, const std::string& repository,
                                         const std::string& content_type,
                                         const std::string& prefix);
  // Why a request to `expected` cannot be served (bad path, wrong method, unknown repository, an
  // overlong client name), or OK.
  fairgate::Status Refusal(const HttpExchange& exchange,
                           const fairgate::StatusOr<GitRequestPath>& path,
                           GitEndpoint expected) const;
  std::string MirrorPath(const std::string& repository) const;
  bool IsMirrored(const std::string& repository) const;
  // Whether the mirror of `repository` is in place, made by this server or by another replica on
  // the same mirror directory (a mirror appears whole: it is renamed into place); one found on
  // disk is served and fetched from then on.
  bool IsMirroredOrAdopt(const std::string& repository);
  // Makes the mirror of `repository` if it does not exist yet, as a "sync-clone" of `client`,
  // then calls `then` on the exchange's strand with the outcome.
  void EnsureMirrored(const std::shared_ptr<HttpExchange>& exchange, const std::string& repository,
                      std::function<void(const fairgate::Status&)> then);
  // Wraps a job so that the event log sees its start and end; `started` is set when it starts.
  WorkGate::JobFn Logged(std::string type, std::string repository, std::string client,
                         WorkGate::JobFn fn, std::shared_ptr<bool> started);
  // The event of a job that did not start (`started` false; else nothing): "joined" when it
  // succeeded all the same (another request's run served it), else "refused" or "cancelled".
  // A joined request whose shared run failed is logged "cancelled" with that run's status.
  void RecordOutcome(std::string_view type, const std::string& repository,
                     const std::string& client, bool started, const fairgate::Status& status);
  // `argv` to run at MirrorOptions::git_nice above the server's own niceness (`nice -n`), when
  // `niced`; else as it is.
  std::vector<std::string> Niced(std::vector<std::string> argv, bool niced) const;
  // A client's git run starts (true: its only one now, which runs at the server's niceness) and
  // ends: counted in git_runs_.
  bool ClientGitStarts(const std::string& client);
  void ClientGitEnded(const std::string& client);
  // Runs `git -C <its mirror> <git_args>` for fetch or repack `what`: Unavailable if git fails.
  fairgate::Status RunMaintenance(std::string_view what, const std::string& repository,
                                  std::vector<std::string> git_args) const;
  // Starts the periodic fetch of a mirrored repository (once; not after Stop began).
  void StartFetching(const std::string& repository);
  // A fetch of `repository` as a job, logged (`started` is set when it starts), and what ends
  // it: its outcome in the log, and every --repack-after successful fetches a repack. Periodic
  // and notified fetches are the same job.
  WorkGate::JobFn FetchJob(const std::string& repository, std::shared_ptr<bool> started);
  WorkGate::DoneCallback FetchDone(const std::string& repository, std::shared_ptr<bool> started);
  // Queues a repack of `repository`, unless one is queued or running.
  void SubmitRepack(const std::string& repository);

  const RepositorySet repositories_;
  const MirrorOptions options_;
  const NetworkSet debug_allow_;
  const std::shared_ptr<SpoolBudget> spool_budget_;
  PackCache pack_cache_;
  // Declared before the event loop: destroyed after it, so that a slot released while the loop's
  // last handlers are destroyed still has its gate.
  std::unique_ptr<WorkGate> gate_;
  std::unique_ptr<EventLog> log_;
  const std::shared_ptr<HttpMetrics> http_metrics_ = std::make_shared<HttpMetrics>();
  // The context of the server's own git work (first mirrors, fetches, repacks): cancelled when
  // the shutdown grace runs out, which kills their processes.
  const std::pair<fairgate::Context, fairgate::CancelFunc> work_ =
      fairgate::WithCancel(fairgate::Context::Background());
  boost::asio::io_context io_;
  std::unique_ptr<HttpServer> http_;
  std::vector<std::thread> io_threads_;  // under mutex_: started by Serve, joined by Stop

  mutable std::mutex mutex_;
  std::condition_variable stop_requested_;
  bool serving_ = false;
  bool stopping_ = false;
  bool stopped_ = false;
  std::map<std::string, int> fetches_;                  // per mirrored repository, since the start
  std::set<std::string> repacks_in_flight_;             // repositories
  std::map<std::string, WorkGate::CancelFn> fetching_;  // the periodic fetches' stop functions
  struct PackInMaking {
    std::weak_ptr<Spool> spool;
    std::string client;  // whose request made it
    bool running = false;
  };
  std::map<std::string, PackInMaking> packs_in_making_;  // by PackKey
  std::map<std::string, int> git_runs_;  // per client, its git runs started and not ended
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_MIRROR_SERVER_H_
