#include "mirror_server.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "httplib.h"
#include "repo_path.h"
#include "subprocess.h"

namespace git_mirror {
namespace {

namespace fs = std::filesystem;

// The HTTP status a Status should be answered with, when its code alone would say it wrong.
constexpr absl::string_view kHttpStatusPayload = "fairgate.git-mirror/http-status";
constexpr std::size_t kMaxClientLength = 256;

fairgate::Status WithHttpStatus(fairgate::Status status, int http) {
  status.SetPayload(kHttpStatusPayload, absl::Cord(absl::StrCat(http)));
  return status;
}

int HttpStatusOf(const fairgate::Status& status) {
  if (auto payload = status.GetPayload(kHttpStatusPayload)) {
    int http = 0;
    if (absl::SimpleAtoi(std::string(*payload), &http)) return http;
  }
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kCancelled:  // shutting down, or the client has gone
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

// The last lines git printed, without trailing blanks: its message, for the client.
std::string GitMessage(const std::string& err) {
  std::string message(absl::StripTrailingAsciiWhitespace(err));
  if (message.size() > 2000) message = message.substr(message.size() - 2000);
  return message.empty() ? "git printed nothing" : message;
}

std::string PktLine(std::string_view payload) {
  char length[5];
  std::snprintf(length, sizeof length, "%04zx", payload.size() + 4);
  return absl::StrCat(length, absl::string_view(payload.data(), payload.size()));
}

// The client's Git-Protocol header, passed to git as GIT_PROTOCOL when it is well formed.
std::vector<std::string> GitProtocolEnv(const httplib::Request& request) {
  const std::string value = request.get_header_value("Git-Protocol");
  if (value.empty() || value.size() > 256) return {};
  for (const char c : value) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '=' && c != ':' && c != '.' &&
        c != '-' && c != '_') {
      return {};
    }
  }
  return {"GIT_PROTOCOL=" + value};
}

// Whether a protocol v2 request only lists refs (`command=ls-refs`): the v2 form of the ref
// advertisement, not admitted either.
bool IsRefListing(const std::string& body) {
  constexpr std::string_view kCommand = "command=ls-refs";
  return body.size() >= 4 + kCommand.size() &&
         std::string_view(body).substr(4, kCommand.size()) == kCommand;
}

}  // namespace

fairgate::Status ValidateMirrorOptions(const MirrorOptions& o) {
  if (o.mirror_dir.empty()) return absl::InvalidArgumentError("the mirror directory is not set");
  if (o.fetch_interval.count() < 0) {
    return absl::InvalidArgumentError("the fetch interval must be >= 0");
  }
  if (o.repack_after < 1) return absl::InvalidArgumentError("repack-after must be at least 1");
  if (o.request_timeout.count() <= 0) {
    return absl::InvalidArgumentError("the request timeout must be > 0");
  }
  if (o.retry_after_seconds < 1) return absl::InvalidArgumentError("retry-after must be >= 1");
  if (o.http_threads < 2) return absl::InvalidArgumentError("http threads must be at least 2");
  return absl::OkStatus();
}

fairgate::StatusOr<std::unique_ptr<MirrorServer>> MirrorServer::Create(
    RepositorySet repositories, MirrorOptions options, std::unique_ptr<WorkGate> gate) {
  if (auto s = ValidateMirrorOptions(options); !s.ok()) return s;
  std::error_code error;
  fs::create_directories(fs::path(options.mirror_dir) / ".incoming", error);
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create the mirror directory '",
                                                   options.mirror_dir, "': ", error.message()));
  }
  auto log = EventLog::Open(options.event_log);
  if (!log.ok()) return log.status();
  return std::unique_ptr<MirrorServer>(new MirrorServer(std::move(repositories), std::move(options),
                                                        std::move(gate), std::move(*log)));
}

MirrorServer::MirrorServer(RepositorySet repositories, MirrorOptions options,
                           std::unique_ptr<WorkGate> gate, std::unique_ptr<EventLog> log)
    : repositories_(std::move(repositories)),
      options_(std::move(options)),
      gate_(std::move(gate)),
      log_(std::move(log)),
      http_(std::make_unique<httplib::Server>()) {
  // Mirrors made by an earlier run are served (and fetched) as they are.
  for (const auto& [name, url] : repositories_.all()) {
    if (fs::exists(fs::path(MirrorPath(name)) / "HEAD")) fetches_[name] = 0;
  }
  const int threads = options_.http_threads;
  // Each waiting clone holds a thread: too few threads would queue requests FIFO inside httplib,
  // before the gate could order them.
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->Get(".*", [this](const httplib::Request& q, httplib::Response& r) { HandleGet(q, r); });
  http_->Post(".*", [this](const httplib::Request& q, httplib::Response& r) { HandlePost(q, r); });
}

MirrorServer::~MirrorServer() { Stop(); }

fairgate::StatusOr<int> MirrorServer::Bind(const std::string& host, int port) {
  const int bound = port == 0 ? http_->bind_to_any_port(host) : port;
  if (bound < 0 || (port != 0 && !http_->bind_to_port(host, port))) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port));
  }
  return bound;
}

void MirrorServer::Serve() {
  if (options_.fetch_interval.count() > 0) maintainer_ = std::thread([this] { Maintain(); });
  http_->listen_after_bind();
}

void MirrorServer::Stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  stop_requested_.notify_all();
  if (maintainer_.joinable()) maintainer_.join();
  http_->stop();
  gate_->Shutdown();
}

std::string MirrorServer::MirrorPath(const std::string& repository) const {
  return (fs::path(options_.mirror_dir) / repository).string();
}

bool MirrorServer::IsMirrored(const std::string& repository) const {
  std::lock_guard lock(mutex_);
  return fetches_.contains(repository);
}

std::string MirrorServer::ClientOf(const httplib::Request& request) const {
  if (!options_.client_header.empty() && request.has_header(options_.client_header.c_str())) {
    std::string value(
        absl::StripAsciiWhitespace(request.get_header_value(options_.client_header.c_str())));
    if (!value.empty()) return value;
  }
  return request.remote_addr;
}

WorkGate::JobFn MirrorServer::Logged(std::string type, std::string repository, std::string client,
                                     WorkGate::JobFn fn, std::shared_ptr<bool> started) {
  return
      [this, type = std::move(type), repository = std::move(repository), client = std::move(client),
       fn = std::move(fn), started = std::move(started)](const fairgate::Context& ctx) {
        *started = true;
        log_->Record("start", type, repository, client);
        fairgate::Status status = fn(ctx);
        log_->Record("end", type, repository, client, &status);
        return status;
      };
}

void MirrorServer::RecordOutcome(std::string_view type, const std::string& repository,
                                 const std::string& client, bool started,
                                 const fairgate::Status& status) {
  if (started) return;  // its start and end are in the log already
  const bool refused = status.code() == absl::StatusCode::kResourceExhausted ||
                       status.code() == absl::StatusCode::kUnavailable;
  log_->Record(refused ? "refused" : "cancelled", type, repository, client, &status);
}

fairgate::Status MirrorServer::EnsureMirrored(const fairgate::Context& ctx,
                                              const std::string& repository,
                                              const std::string& client) {
  if (IsMirrored(repository)) return absl::OkStatus();
  const std::string url = *repositories_.UpstreamOf(repository);
  auto make_mirror = [this, repository, url](const fairgate::Context& job_ctx) {
    // Another request may have made it while this one waited: sync-clones of one repository
    // share the conflict group, so they ran one after the other.
    if (IsMirrored(repository)) return absl::OkStatus();
    std::string scratch = (fs::path(options_.mirror_dir) / ".incoming" / "XXXXXX").string();
    if (mkdtemp(scratch.data()) == nullptr) {
      return absl::InternalError(
          absl::StrCat("cannot make a scratch directory in '", options_.mirror_dir, "/.incoming'"));
    }
    const std::string incoming = scratch + "/mirror.git";
    auto result = RunProcess({"git", "clone", "--mirror", "--quiet", "--", url, incoming}, "",
                             job_ctx, {"GIT_TERMINAL_PROMPT=0"});
    fairgate::Status status;
    if (!result.ok()) {
      status = result.status();
    } else if (result->exit_code != 0) {
      status = WithHttpStatus(
          absl::UnavailableError(absl::StrCat("cannot mirror '", repository,
                                              "' from its upstream: ", GitMessage(result->err))),
          502);
    } else {
      std::error_code error;
      const fs::path target = MirrorPath(repository);
      fs::create_directories(target.parent_path(), error);
      if (!error) fs::rename(incoming, target, error);
      if (error) {
        status = absl::InternalError(
            absl::StrCat("cannot move the new mirror into place: ", error.message()));
      } else {
        std::lock_guard lock(mutex_);
        fetches_.emplace(repository, 0);
      }
    }
    std::error_code ignored;
    fs::remove_all(scratch, ignored);
    return status;
  };
  auto started = std::make_shared<bool>(false);
  fairgate::Status status =
      gate_->Run(ctx, kSyncClone, repository, client,
                 Logged(std::string(kSyncClone), repository, client, make_mirror, started));
  RecordOutcome(kSyncClone, repository, client, *started, status);
  return status;
}

namespace {

void Reply(httplib::Response& response, const fairgate::Status& status, int retry_after) {
  response.status = HttpStatusOf(status);
  if (response.status == 429) response.set_header("Retry-After", absl::StrCat(retry_after));
  response.set_content(absl::StrCat(status.message(), "\n"), "text/plain; charset=utf-8");
}

// A request being served: its client, its context (the request's deadline, cancelled too when the
// client hangs up) and the watch on its connection, for the handler's scope.
class Serving {
 public:
  Serving(const httplib::Request& request, std::string client, std::chrono::milliseconds timeout,
          DisconnectWatcher& watcher)
      : client_(std::move(client)),
        context_(fairgate::WithTimeout(fairgate::Context::Background(), timeout)),
        watch_(watcher.Watch(FindConnectionSocket(request.local_addr, request.local_port,
                                                  request.remote_addr, request.remote_port),
                             context_.second)) {}
  ~Serving() { context_.second(); }
  const std::string& client() const { return client_; }
  const fairgate::Context& ctx() const { return context_.first; }

 private:
  std::string client_;
  std::pair<fairgate::Context, fairgate::CancelFunc> context_;
  DisconnectWatcher::Guard watch_;
};

}  // namespace

fairgate::Status MirrorServer::Refusal(const httplib::Request& request,
                                       const fairgate::StatusOr<GitRequestPath>& path,
                                       GitEndpoint expected) const {
  if (!path.ok()) return path.status();
  if (path->endpoint != expected) {
    return WithHttpStatus(
        absl::InvalidArgumentError(expected == GitEndpoint::kInfoRefs ? "git-upload-pack takes POST"
                                                                      : "info/refs takes GET"),
        405);
  }
  if (repositories_.UpstreamOf(path->repository) == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown repository '", path->repository, "'"));
  }
  if (ClientOf(request).size() > kMaxClientLength) {
    return absl::InvalidArgumentError("the client header is too long");
  }
  return absl::OkStatus();
}

void MirrorServer::HandleGet(const httplib::Request& request, httplib::Response& response) {
  if (request.path == "/metrics") {
    response.set_content(gate_->Metrics(), "text/plain; version=0.0.4; charset=utf-8");
    return;
  }
  if (request.path == "/debug/scheduler") {
    nlohmann::json state = gate_->DebugState();
    nlohmann::json repositories = nlohmann::json::array();
    for (const auto& [name, url] : repositories_.all()) {
      repositories.push_back({{"name", name}, {"mirrored", IsMirrored(name)}});
    }
    state["repositories"] = repositories;
    response.set_content(state.dump(2) + "\n", "application/json");
    return;
  }
  auto path = ParseGitRequestPath(request.path);
  fairgate::Status refusal = Refusal(request, path, GitEndpoint::kInfoRefs);
  if (refusal.ok() && request.get_param_value("service") != "git-upload-pack") {
    refusal = absl::PermissionDeniedError(
        "this mirror is read-only: it serves only service=git-upload-pack (smart HTTP)");
  }
  if (!refusal.ok()) return Reply(response, refusal, options_.retry_after_seconds);

  Serving serving(request, ClientOf(request), options_.request_timeout, watcher_);
  const fairgate::Context& ctx = serving.ctx();
  fairgate::Status status = EnsureMirrored(ctx, path->repository, serving.client());
  if (!status.ok()) return Reply(response, status, options_.retry_after_seconds);
  const std::vector<std::string> env = GitProtocolEnv(request);
  auto result = RunProcess(
      {"git", "upload-pack", "--stateless-rpc", "--advertise-refs", MirrorPath(path->repository)},
      "", ctx, env);
  if (!result.ok()) return Reply(response, result.status(), options_.retry_after_seconds);
  if (result->exit_code != 0) {
    return Reply(
        response,
        absl::InternalError(absl::StrCat("git upload-pack failed: ", GitMessage(result->err))),
        options_.retry_after_seconds);
  }
  const bool v2 = !env.empty() && env.front().find("version=2") != std::string::npos;
  std::string body = v2 ? std::move(result->out)
                        : absl::StrCat(PktLine("# service=git-upload-pack\n"), "0000", result->out);
  response.set_header("Cache-Control", "no-cache");
  response.set_content(std::move(body), "application/x-git-upload-pack-advertisement");
}

void MirrorServer::HandlePost(const httplib::Request& request, httplib::Response& response) {
  auto path = ParseGitRequestPath(request.path);
  fairgate::Status refusal = Refusal(request, path, GitEndpoint::kUploadPack);
  if (refusal.ok() &&
      request.get_header_value("Content-Type") != "application/x-git-upload-pack-request") {
    refusal = WithHttpStatus(
        absl::InvalidArgumentError("expected Content-Type application/x-git-upload-pack-request"),
        415);
  }
  if (!refusal.ok()) return Reply(response, refusal, options_.retry_after_seconds);

  Serving serving(request, ClientOf(request), options_.request_timeout, watcher_);
  const fairgate::Context& ctx = serving.ctx();
  const std::string& client = serving.client();
  fairgate::Status status = EnsureMirrored(ctx, path->repository, client);
  std::string pack;
  if (status.ok()) {
    const std::string mirror = MirrorPath(path->repository);
    const std::vector<std::string> env = GitProtocolEnv(request);
    auto serve = [&](const fairgate::Context& job_ctx) -> fairgate::Status {
      auto result =
          RunProcess({"git", "upload-pack", "--stateless-rpc", mirror}, request.body, job_ctx, env);
      if (!result.ok()) return result.status();
      if (result->exit_code != 0) {
        return absl::InternalError(
            absl::StrCat("git upload-pack failed: ", GitMessage(result->err)));
      }
      pack = std::move(result->out);
      return absl::OkStatus();
    };
    if (IsRefListing(request.body)) {
      status = serve(ctx);
    } else {
      auto started = std::make_shared<bool>(false);
      status = gate_->Run(ctx, kClone, path->repository, client,
                          Logged(std::string(kClone), path->repository, client, serve, started));
      RecordOutcome(kClone, path->repository, client, *started, status);
    }
  }
  if (!status.ok()) return Reply(response, status, options_.retry_after_seconds);
  response.set_header("Cache-Control", "no-cache");
  response.set_content(std::move(pack), "application/x-git-upload-pack-result");
}

void MirrorServer::Maintain() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    stop_requested_.wait_for(lock, options_.fetch_interval);
    if (stopping_) break;
    std::vector<std::string> mirrored;
    for (const auto& [name, fetches] : fetches_) mirrored.push_back(name);
    lock.unlock();
    for (const std::string& name : mirrored) SubmitMaintenance(kFetch, name);
    lock.lock();
  }
}

void MirrorServer::SubmitMaintenance(std::string_view type, const std::string& repository) {
  const std::string in_flight = absl::StrCat(std::string(type), " ", repository);
  {
    std::lock_guard lock(mutex_);
    // One of each per repository at a time: a slow upstream must not pile fetches up.
    if (stopping_ || !maintenance_in_flight_.insert(in_flight).second) return;
  }
  std::vector<std::string> argv = {"git", "-C", MirrorPath(repository)};
  if (type == kFetch) {
    argv.insert(argv.end(), {"fetch", "--prune", "--quiet", "origin"});
  } else {
    argv.insert(argv.end(), {"repack", "-a", "-d", "-q"});
  }
  auto work = [argv, repository, type = std::string(type)](const fairgate::Context& ctx) {
    auto result = RunProcess(argv, "", ctx, {"GIT_TERMINAL_PROMPT=0"});
    if (!result.ok()) return result.status();
    if (result->exit_code != 0) {
      return absl::UnavailableError(
          absl::StrCat(type, " of '", repository, "' failed: ", GitMessage(result->err)));
    }
    return absl::OkStatus();
  };
  auto started = std::make_shared<bool>(false);
  auto done = [this, type = std::string(type), repository, in_flight,
               started](const fairgate::Status& status) {
    RecordOutcome(type, repository, "", *started, status);
    bool repack = false;
    {
      std::lock_guard lock(mutex_);
      maintenance_in_flight_.erase(in_flight);
      if (type == kFetch && status.ok()) {
        repack = ++fetches_[repository] % options_.repack_after == 0;
      }
    }
    if (repack) SubmitMaintenance(kRepack, repository);
  };
  fairgate::Status status = gate_->Submit(
      type, repository, Logged(std::string(type), repository, "", work, started), done);
  if (!status.ok()) {
    RecordOutcome(type, repository, "", false, status);
    std::lock_guard lock(mutex_);
    maintenance_in_flight_.erase(in_flight);
  }
}

}  // namespace git_mirror
