#include "mirror_server.h"

#include <stdlib.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "async_process.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/write.hpp"
#include "client_group.h"
#include "fairgate/rate_limit.h"
#include "fairgate/shedding.h"
#include "repo_path.h"
#include "request_body.h"
#include "spool_response.h"
#include "subprocess.h"

namespace git_mirror {
namespace {

namespace fs = std::filesystem;
namespace asio = boost::asio;

// The HTTP status a Status should be answered with, when its code alone would say it wrong, and
// the message a client may see, when the status's own message is for the server's eyes only.
constexpr absl::string_view kHttpStatusPayload = "fairgate.git-mirror/http-status";
constexpr absl::string_view kClientMessagePayload = "fairgate.git-mirror/client-message";
constexpr std::size_t kMaxClientLength = 256;

// The gate's fairness key of a request: its client, in its group if a trusted proxy named one
// (client_group.h).
std::string KeyOf(const HttpExchange& exchange) {
  return ClientGroups::KeyOf(exchange.client(), exchange.group());
}
constexpr std::size_t kTransferBuffer = 64 * 1024;
// Requests with larger bodies (fetches with many haves) are not shared: rarely identical, and
// their key would hold the body.
constexpr std::size_t kMaxSharedRequestBody = 64 * 1024;

fairgate::Status WithHttpStatus(fairgate::Status status, int http) {
  status.SetPayload(kHttpStatusPayload, absl::Cord(absl::StrCat(http)));
  return status;
}

fairgate::Status WithClientMessage(fairgate::Status status, std::string_view message) {
  status.SetPayload(kClientMessagePayload,
                    absl::Cord(absl::string_view(message.data(), message.size())));
  return status;
}

int HttpStatusOf(const fairgate::Status& status) {
  if (auto payload = status.GetPayload(kHttpStatusPayload)) {
    int http = 0;
    if (absl::SimpleAtoi(std::string(*payload), &http)) return http;
  }
  // Refused by shedding: the server is over what it can serve in time (the client may retry
  // after Retry-After), not this client over a limit of its own.
  if (fairgate::WasShed(status)) return 503;
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
    case absl::StatusCode::kCancelled:  // shutting down
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string ClientMessageOf(const fairgate::Status& status) {
  if (auto payload = status.GetPayload(kClientMessagePayload)) return std::string(*payload);
  return std::string(status.message());
}

// The last lines git printed, without trailing blanks: its message, for the server's log.
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
std::vector<std::string> GitProtocolEnv(const HttpRequest& request) {
  const auto header = request["Git-Protocol"];
  const std::string value(header.data(), header.size());
  if (value.empty() || value.size() > 256) return {};
  for (const char c : value) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '=' && c != ':' && c != '.' &&
        c != '-' && c != '_') {
      return {};
    }
  }
  return {"GIT_PROTOCOL=" + value};
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes once; an invalid escape is kept as it is (the path check refuses a '%'). In a
// path (`in_path`) an encoded '/' stays encoded, so that the path check refuses it: a slash the
// client hid from the server's path syntax is never a path separator.
std::string PercentDecode(std::string_view text, bool in_path) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
        HexValue(text[i + 2]) >= 0 &&
        !(in_path && HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]) == '/')) {
      out.push_back(static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2])));
      i += 2;
    } else if (!in_path && text[i] == '+') {  // a space in a query
      out.push_back(' ');
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// The decoded path and query parameters of a request target.
std::pair<std::string, std::map<std::string, std::string>> ParseTarget(std::string_view target) {
  const std::size_t question = target.find('?');
  std::map<std::string, std::string> query;
  if (question != std::string_view::npos) {
    std::string_view rest = target.substr(question + 1);
    while (!rest.empty()) {
      const std::size_t amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      const std::size_t eq = pair.find('=');
      query[PercentDecode(pair.substr(0, eq), false)] =
          eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1), false);
      if (amp == std::string_view::npos) break;
      rest = rest.substr(amp + 1);
    }
  }
  return {PercentDecode(target.substr(0, question), true), std::move(query)};
}

// Whether git refused what the client sent (rather than failing on its own).
bool IsClientError(const std::string& err) {
  for (const char* sign : {"protocol error", "bad line length", "not our ref", "expected ",
                           "unknown capability", "invalid ", "bad pack"}) {
    if (err.find(sign) != std::string::npos) return true;
  }
  return false;
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
  if (o.io_threads < 1) return absl::InvalidArgumentError("io threads must be at least 1");
  if (o.shutdown_grace.count() < 0) {
    return absl::InvalidArgumentError("the shutdown grace must be >= 0");
  }
  if (!(o.hit_charge_seconds >= 0 && std::isfinite(o.hit_charge_seconds))) {
    return absl::InvalidArgumentError("the hit charge must be finite and >= 0 seconds");
  }
  if (o.git_nice < 0 || o.git_nice > 19) {
    return absl::InvalidArgumentError(
        absl::StrCat("git nice must be 0 to 19 (0: the server's own), got ", o.git_nice));
  }
  if (o.spool_bytes < (std::uint64_t{1} << 20)) {
    return absl::InvalidArgumentError("spool bytes must be at least 1 MiB (1048576)");
  }
  if (auto s = NetworkSet::Parse(o.debug_allow, "debug-allow network"); !s.ok()) {
    return s.status();
  }
  return ValidateHttpLimits(o.http);
}

int RemoveStaleLeftovers(const std::string& mirror_dir) {
  int removed = 0;
  std::error_code error;
  auto remove = [&](const fs::path& p) {
    std::error_code ignored;
    if (fs::remove_all(p, ignored) > 0) ++removed;
  };
  const fs::path incoming = fs::path(mirror_dir) / ".incoming";
  for (fs::directory_iterator it(incoming, error), end; !error && it != end; it.increment(error)) {
    remove(it->path());
  }
  // A spool file is unlinked as soon as it is made; one a crash caught in between stays.
  const fs::path spools = fs::path(mirror_dir) / ".spool";
  error.clear();
  for (fs::directory_iterator it(spools, error), end; !error && it != end; it.increment(error)) {
    remove(it->path());
  }
  std::vector<fs::path> doomed;
  error.clear();
  for (fs::recursive_directory_iterator it(mirror_dir, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (it->path().parent_path() == incoming) continue;
    const std::string parent = it->path().parent_path().filename().string();
    const bool in_pack_dir = parent == "pack";
    if (absl::EndsWith(name, ".lock") ||
        (in_pack_dir && (absl::StartsWith(name, "tmp_") || absl::StartsWith(name, ".tmp-"))) ||
        (parent == "objects" && absl::StartsWith(name, "incoming-") && it->is_directory())) {
      doomed.push_back(it->path());
      if (it->is_directory()) it.disable_recursion_pending();
    }
  }
  for (const fs::path& p : doomed) remove(p);
  return removed;
}

// One git run (a ref listing or a pack) for one or more identical requests: offers its spool to
// them at once, waits for its slot without a thread, runs `git upload-pack` into the spool, and
// ends its job when git ends (its clients are served from the spool by their SpoolResponses, at
// their own pace). Runs on its first exchange's strand.
class MirrorServer::Request : public std::enable_shared_from_this<Request> {
 public:
  struct Spec {
    std::string type;
    std::string repository;
    std::vector<std::string> argv;
    std::vector<std::string> env;
    RequestBody input;   // taken from the exchange (one copy), given back once git has it
    std::string prefix;  // sent before git's output
    std::string content_type;
    std::string pack_key;  // identical requests share a run (empty: not shared)
  };

  Request(MirrorServer& server, std::shared_ptr<HttpExchange> exchange, Spec spec)
      : server_(server),
        exchange_(std::move(exchange)),
        spec_(std::move(spec)),
        timer_(exchange_->executor()) {}

  // Joins the pack of an identical request being made, if there is one; else starts a request
  // of its own.
  static void StartOrJoin(MirrorServer& server, const std::shared_ptr<HttpExchange>& exchange,
                          Spec spec) {
    spec.pack_key =
        server.PackKey(spec.type, spec.repository, spec.argv, spec.env, spec.input.bytes);
    if (auto spool = server.FindPack(spec.pack_key, KeyOf(*exchange))) {
      if (auto response = server.Respond(spool, exchange, spec.type, spec.repository,
                                         spec.content_type, spec.prefix)) {
        server.log_->Record("joined", spec.type, spec.repository, exchange->client());
        return response->Start();
      }
    }
    if (!spec.pack_key.empty()) {
      if (auto spool = server.pack_cache_.Get(spec.pack_key)) {
        if (auto response = server.Respond(spool, exchange, spec.type, spec.repository,
                                           spec.content_type, spec.prefix)) {
          server.log_->Record("hit", spec.type, spec.repository, exchange->client());
          // Validated >= 0 and finite: the gate cannot refuse it.
          (void)server.gate_->Charge(KeyOf(*exchange), server.options_.hit_charge_seconds);
          return response->Start();
        }
      }
    }
    std::make_shared<Request>(server, exchange, std::move(spec))->Start();
  }

  // Makes the spool its clients read from (offered to identical requests at once, so that they
  // join it while it waits for its turn too), then waits for admission.
  void Start() {
    auto self = shared_from_this();
    auto spool = Spool::Create(server_.SpoolDir(), server_.spool_budget_);
    if (!spool.ok()) {
      std::fprintf(stderr, "fairgate-git-mirror: %s\n",
                   std::string(spool.status().message()).c_str());
      return server_.Reply(*exchange_, absl::InternalError("the pack could not be spooled"));
    }
    spool_ = *std::move(spool);
    // A pack that may be cached keeps its bytes (up to a quarter of the cache).
    if (!spec_.pack_key.empty()) spool_->KeepWhole(server_.options_.pack_cache_bytes / 4);
    // Nobody reads it any more (every client went away or was cut): stop waiting, or stop git.
    spool_->OnAbandoned(exchange_->executor(), [self] {
      self->gone_ = true;
      if (!self->admitted_ && self->cancel_) self->cancel_();
      if (self->process_) self->process_->Kill();
    });
    auto response = server_.Respond(spool_, exchange_, spec_.type, spec_.repository,
                                    spec_.content_type, spec_.prefix);
    if (!spec_.pack_key.empty()) server_.OfferPack(spec_.pack_key, KeyOf(*exchange_), spool_);
    response->Start();  // a new spool is open to joiners: never nullptr here
    timer_.expires_after(server_.options_.request_timeout);
    timer_.async_wait([self](boost::system::error_code error) {
      if (error || self->admitted_) return;
      self->timed_out_ = true;
      if (self->cancel_) self->cancel_();
    });
    auto cancel = server_.gate_->Acquire(
        spec_.type, spec_.repository, KeyOf(*exchange_),
        [self, executor = exchange_->executor()](fairgate::StatusOr<Slot> slot) {
          asio::post(executor,
                     [self, slot = std::move(slot)]() mutable { self->Admitted(std::move(slot)); });
        });
    if (!cancel.ok()) {
      timer_.cancel();
      admitted_ = true;
      server_.RecordOutcome(spec_.type, spec_.repository, exchange_->client(), false,
                            cancel.status());
      return EndSpool(cancel.status());  // its clients are answered with it
    }
    cancel_ = *std::move(cancel);
  }

 private:
  void Admitted(fairgate::StatusOr<Slot> slot) {
    admitted_ = true;
    cancel_ = nullptr;
    timer_.cancel();
    const std::string& client = exchange_->client();
    if (!slot.ok()) {
      // The wait was cancelled by this request (every client gone, timed out) or ended by the
      // shutdown (Cancelled); otherwise the gate's own answer is the client's: shed (the queue
      // stood and this client had consumed the most: 503 with Retry-After), refused for want of
      // a token (the fleet's bucket, awaited while its lease was on its way, had none: 429 with
      // Retry-After), or the fleet's store failed (503).
      const fairgate::Status why =
          gone_ ? absl::CancelledError("the client went away")
          : timed_out_
              ? absl::DeadlineExceededError("the request waited longer than the request timeout")
          : absl::IsCancelled(slot.status()) ? absl::UnavailableError("the server is shutting down")
                                             : slot.status();
      server_.RecordOutcome(spec_.type, spec_.repository, client, false, why);
      return EndSpool(why);
    }
    slot_ = *std::move(slot);
    const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - taken_;
    server_.log_->Record("start", spec_.type, spec_.repository, client, nullptr, waited.count());
    if (!spec_.pack_key.empty()) server_.PackRunning(spec_.pack_key, spool_);
    if (gone_) {
      EndSpool(absl::CancelledError("the client went away"));
      // Given back unused: a pack never made teaches the repository's estimate nothing.
      return Finish(absl::UnavailableError("the client went away before its turn"),
                    /*used=*/false);
    }
    // A client's only git run at the server's niceness, its others below (MirrorOptions::git_nice).
    git_counted_ = true;
    const bool only = server_.ClientGitStarts(client);
    auto process =
        AsyncProcess::Start(exchange_->executor(), server_.Niced(spec_.argv, !only), spec_.env);
    if (!process.ok()) {
      std::fprintf(stderr, "fairgate-git-mirror: %s\n",
                   std::string(process.status().message()).c_str());
      EndSpool(absl::InternalError("git could not be started"));
      return Finish(process.status(), /*used=*/false);  // no pack made: nothing to learn
    }
    process_ = *std::move(process);
    auto self = shared_from_this();
    if (spec_.input.bytes.empty()) {
      process_->CloseIn();
    } else {
      asio::async_write(process_->in(), asio::buffer(spec_.input.bytes),
                        [self](boost::system::error_code, std::size_t) {
                          // An error means git stopped reading: it has what it wanted.
                          self->process_->CloseIn();
                          self->spec_.input = RequestBody();  // back to the body budget
                        });
    }
    ReadOut();
  }

  // No more comes to the spool: its clients get what it holds and `outcome`, and no identical
  // request joins it any more.
  void EndSpool(const fairgate::Status& outcome) {
    if (!spec_.pack_key.empty()) server_.WithdrawPack(spec_.pack_key, spool_);
    spool_->End(outcome);
  }

  // git's output goes to the spool as fast as git makes it, whatever its readers do.
  void ReadOut() {
    process_->out().async_read_some(
        asio::buffer(buffer_.data(), buffer_.size()),
        [self = shared_from_this()](boost::system::error_code error, std::size_t n) {
          if (n > 0) return self->Spooled(n);
          if (!error) return self->ReadOut();
          self->process_->AsyncWaitExit([self](int exit_code) { self->Exited(exit_code); });
        });
  }

  // Puts the n bytes in the buffer into the spool (waiting for room in the spool budget if it
  // has none: git then waits on its pipe), then reads on.
  void Spooled(std::size_t n) {
    if (failed_) return;
    auto appended = spool_->Append(buffer_.data(), n);
    if (!appended.ok()) {
      std::fprintf(stderr, "fairgate-git-mirror: %s\n",
                   std::string(appended.status().message()).c_str());
      failed_ = true;
      return process_->Kill();  // Exited reports it
    }
    if (!*appended) {
      return spool_->budget().WhenRoom(exchange_->executor(),
                                       [self = shared_from_this(), n] { self->Spooled(n); });
    }
    ReadOut();
  }

  // git has ended: the pack is made (or not), and the slot goes back now, whatever its readers
  // still have to send: the cost the gate learns is the time to make the pack.
  void Exited(int exit_code) {
    if (exit_code == 0 && !failed_) {
      EndSpool(absl::OkStatus());
      if (!spec_.pack_key.empty() && spool_->whole()) {
        spool_->HandOver();
        server_.pack_cache_.Put(spec_.pack_key, spec_.repository, spool_, spool_->view().size);
      }
      return Finish(absl::OkStatus());
    }
    const std::string message =
        failed_ ? "the pack could not be spooled" : GitMessage(process_->err());
    if (!gone_) {
      std::fprintf(stderr, "fairgate-git-mirror: git upload-pack of '%s' exited with %d: %s\n",
                   spec_.repository.c_str(), exit_code, message.c_str());
    }
    // What a client whose response has not started is told.
    EndSpool(!failed_ && IsClientError(process_->err())
                 ? absl::InvalidArgumentError("malformed request: git could not read it")
                 : absl::InternalError("git upload-pack failed"));
    if (gone_) {
      return Finish(
          absl::UnavailableError("the transfer was cut: the client went away or read too slowly"));
    }
    Finish(absl::InternalError(
        absl::StrCat("git upload-pack exited with ", exit_code, ": ", message)));
  }

  // Ends the request's job with `status`; `used` false when git never ran (the slot is given
  // back unused, and the repository's estimate learns nothing from it).
  void Finish(const fairgate::Status& status, bool used = true) {
    if (finished_) return;
    finished_ = true;
    if (git_counted_) server_.ClientGitEnded(exchange_->client());
    server_.log_->Record("end", spec_.type, spec_.repository, exchange_->client(), &status);
    if (used) {
      slot_.Release(status);
    } else {
      slot_.ReleaseUnused(status);
    }
  }

  MirrorServer& server_;
  const std::shared_ptr<HttpExchange> exchange_;
  Spec spec_;  // only its input changes: given back once written
  asio::steady_timer timer_;
  const std::chrono::steady_clock::time_point taken_ = std::chrono::steady_clock::now();
  WorkGate::CancelFn cancel_;
  Slot slot_;
  std::shared_ptr<AsyncProcess> process_;
  std::array<char, kTransferBuffer> buffer_;  // git's output on its way to the spool
  std::shared_ptr<Spool> spool_;
  bool admitted_ = false, timed_out_ = false, gone_ = false;
  bool failed_ = false, finished_ = false;
  bool git_counted_ = false;  // in the server's count of its client's git runs until Finish
};

fairgate::StatusOr<std::unique_ptr<MirrorServer>> MirrorServer::Create(
    RepositorySet repositories, MirrorOptions options, std::unique_ptr<WorkGate> gate) {
  if (auto s = ValidateMirrorOptions(options); !s.ok()) return s;
  std::error_code error;
  fs::create_directories(fs::path(options.mirror_dir) / ".incoming", error);
  if (!error) fs::create_directories(fs::path(options.mirror_dir) / ".spool", error);
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create the mirror directory '",
                                                   options.mirror_dir, "': ", error.message()));
  }
  if (const int removed = RemoveStaleLeftovers(options.mirror_dir); removed > 0) {
    std::fprintf(stderr, "fairgate-git-mirror: removed %d leftovers of an interrupted run\n",
                 removed);
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
      // Validated by Create; a list that does not parse allows nobody.
      debug_allow_(
          NetworkSet::Parse(options_.debug_allow, "debug-allow network").value_or(NetworkSet())),
      spool_budget_(std::make_shared<SpoolBudget>(options_.spool_bytes)),
      pack_cache_(options_.pack_cache_bytes, MirrorOptions::kMaxKeptPacks),
      gate_(std::move(gate)),
      log_(std::move(log)) {
  // Mirrors made by an earlier run are served (and fetched) as they are.
  for (const auto& [name, url] : repositories_.all()) {
    if (fs::exists(fs::path(MirrorPath(name)) / "HEAD")) fetches_[name] = 0;
  }
  http_ = std::make_unique<HttpServer>(
      io_, options_.http, http_metrics_,
      [this](std::shared_ptr<HttpExchange> exchange) { Handle(exchange); });
}

MirrorServer::~MirrorServer() { Stop(); }

fairgate::StatusOr<int> MirrorServer::Bind(const std::string& host, int port) {
  return http_->Listen(host, port);
}

void MirrorServer::Serve() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    serving_ = true;
  }
  std::vector<std::string> mirrored;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, fetches] : fetches_) mirrored.push_back(name);
  }
  for (const std::string& name : mirrored) StartFetching(name);
  auto work = asio::make_work_guard(io_);
  // Under the lock: a Stop() that has begun starts no thread here, and one that begins later
  // finds every thread started here (and joins it: a thread left joinable ends the process).
  std::unique_lock lock(mutex_);
  if (!stopping_) {
    http_->Start();
    for (int i = 0; i < options_.io_threads; ++i) io_threads_.emplace_back([this] { io_.run(); });
  }
  stop_requested_.wait(lock, [&] { return stopped_; });
}

void MirrorServer::Stop() {
  {
    std::unique_lock lock(mutex_);
    if (stopping_) {
      stop_requested_.wait(lock, [&] { return stopped_; });
      return;
    }
    stopping_ = true;
  }
  stop_requested_.notify_all();
  std::map<std::string, WorkGate::CancelFn> fetching;
  {
    std::lock_guard lock(mutex_);
    fetching.swap(fetching_);
  }
  for (auto& [name, stop] : fetching) stop();
  http_->StopAccepting();
  http_->CloseIdle();
  // Waiting requests are answered 503; running work may finish within the grace.
  std::mutex m;
  std::condition_variable cv;
  bool gate_done = false;
  std::thread shutdown([&] {
    gate_->Shutdown();
    std::lock_guard lock(m);
    gate_done = true;
    cv.notify_all();
  });
  {
    std::unique_lock lock(m);
    if (!cv.wait_for(lock, options_.shutdown_grace, [&] { return gate_done; })) {
      lock.unlock();
      work_.second();     // kills the server's own git work
      http_->CloseAll();  // cuts transfers: their slots are released with the failure
    }
  }
  shutdown.join();
  http_->CloseAll();
  // Let the loop finish what the closes started (bounded), then stop it.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (http_->open_connections() > 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (int open = http_->open_connections(); open > 0) {
    std::fprintf(stderr, "fairgate-git-mirror: %d connections still open at stop\n", open);
  }
  io_.stop();
  std::vector<std::thread> io_threads;
  {
    std::lock_guard lock(mutex_);
    io_threads.swap(io_threads_);
  }
  for (std::thread& t : io_threads) t.join();
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  stop_requested_.notify_all();
}

std::string MirrorServer::MirrorPath(const std::string& repository) const {
  return (fs::path(options_.mirror_dir) / repository).string();
}

bool MirrorServer::IsMirrored(const std::string& repository) const {
  std::lock_guard lock(mutex_);
  return fetches_.contains(repository);
}

bool MirrorServer::IsMirroredOrAdopt(const std::string& repository) {
  if (IsMirrored(repository)) return true;
  if (!fs::exists(fs::path(MirrorPath(repository)) / "HEAD")) return false;
  {
    std::lock_guard lock(mutex_);
    fetches_.try_emplace(repository, 0);
  }
  StartFetching(repository);
  return true;
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
  // Did not run, yet succeeded: it joined another request's run (a coalescing type).
  if (status.ok()) return log_->Record("joined", type, repository, client, &status);
  const bool refused = status.code() == absl::StatusCode::kResourceExhausted ||
                       status.code() == absl::StatusCode::kUnavailable;
  log_->Record(refused ? "refused" : "cancelled", type, repository, client, &status);
}

void MirrorServer::EnsureMirrored(const std::shared_ptr<HttpExchange>& exchange,
                                  const std::string& repository,
                                  std::function<void(const fairgate::Status&)> then) {
  if (IsMirroredOrAdopt(repository)) return then(absl::OkStatus());
  const std::string url = *repositories_.UpstreamOf(repository);
  // Runs on the gate's threads (git clone blocks its thread), with the server's work context:
  // a first mirror benefits every later client, so it goes on if this one leaves.
  auto make_mirror = [this, repository, url](const fairgate::Context&) {
    // Another request (or replica) may have made it while this one waited: sync-clones of one
    // repository share the conflict group, so they ran one after the other.
    if (IsMirroredOrAdopt(repository)) return absl::OkStatus();
    std::string scratch = (fs::path(options_.mirror_dir) / ".incoming" / "XXXXXX").string();
    if (mkdtemp(scratch.data()) == nullptr) {
      return absl::InternalError("cannot make a scratch directory for a new mirror");
    }
    const std::string incoming = scratch + "/mirror.git";
    auto result =
        RunProcess(Niced({"git", "clone", "--mirror", "--quiet", "--", url, incoming}, true), "",
                   work_.first, {"GIT_TERMINAL_PROMPT=0"});
    fairgate::Status status;
    if (!result.ok()) {
      status = result.status();
    } else if (result->exit_code != 0) {
      // The message names the upstream: for the log; the client is told less.
      status = WithClientMessage(
          WithHttpStatus(
              absl::UnavailableError(absl::StrCat(
                  "cannot mirror '", repository, "' from its upstream: ", GitMessage(result->err))),
              502),
          absl::StrCat("cannot mirror '", repository,
                       "' from its upstream (the server's log says why)"));
    } else {
      std::error_code error;
      const fs::path target = MirrorPath(repository);
      fs::create_directories(target.parent_path(), error);
      if (!error) fs::rename(incoming, target, error);
      if (error) {
        status = WithClientMessage(absl::InternalError(absl::StrCat(
                                       "cannot move the new mirror into place: ", error.message())),
                                   "cannot store the new mirror");
      } else {
        {
          std::lock_guard lock(mutex_);
          fetches_.emplace(repository, 0);
        }
        StartFetching(repository);
      }
    }
    std::error_code ignored;
    fs::remove_all(scratch, ignored);
    if (!status.ok()) {
      std::fprintf(stderr, "fairgate-git-mirror: %s\n", std::string(status.message()).c_str());
    }
    return status;
  };
  const std::string client = exchange->client();
  auto started = std::make_shared<bool>(false);
  auto done = [this, repository, client, started, executor = exchange->executor(),
               then](const fairgate::Status& status) {
    RecordOutcome(kSyncClone, repository, client, *started, status);
    asio::post(executor, [then, status] { then(status); });
  };
  fairgate::Status submitted = gate_->Submit(
      kSyncClone, repository, KeyOf(*exchange),
      Logged(std::string(kSyncClone), repository, client, make_mirror, started), done);
  if (!submitted.ok()) {
    RecordOutcome(kSyncClone, repository, client, false, submitted);
    then(submitted);
  }
}

std::string MirrorServer::SpoolDir() const { return options_.mirror_dir + "/.spool"; }

std::string MirrorServer::PackKey(const std::string& type, const std::string& repository,
                                  const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env,
                                  const std::string& body) const {
  if (!options_.share_packs || body.size() > kMaxSharedRequestBody) return "";
  int generation = 0;
  {
    std::lock_guard lock(mutex_);
    if (auto it = fetches_.find(repository); it != fetches_.end()) generation = it->second;
  }
  const std::string nul(1, '\0');
  return absl::StrCat(type, nul, repository, nul, generation, nul, absl::StrJoin(argv, "\x01"), nul,
                      absl::StrJoin(env, "\x01"), nul, body);
}

std::shared_ptr<Spool> MirrorServer::FindPack(const std::string& key, const std::string& client) {
  if (key.empty()) return nullptr;
  std::lock_guard lock(mutex_);
  auto it = packs_in_making_.find(key);
  if (it == packs_in_making_.end()) return nullptr;
  std::shared_ptr<Spool> spool = it->second.spool.lock();
  if (spool == nullptr || !spool->open_to_joiners()) {
    packs_in_making_.erase(it);
    return nullptr;
  }
  // Waiting for its turn, a pack is joined only by its own client: another would wait at that
  // client's place in the order, not its own.
  if (!it->second.running && it->second.client != client) return nullptr;
  return spool;
}

void MirrorServer::OfferPack(const std::string& key, const std::string& client,
                             std::shared_ptr<Spool> spool) {
  std::lock_guard lock(mutex_);
  packs_in_making_[key] = PackInMaking{spool, client, false};
}

void MirrorServer::PackRunning(const std::string& key, const std::shared_ptr<Spool>& spool) {
  std::lock_guard lock(mutex_);
  auto it = packs_in_making_.find(key);
  if (it != packs_in_making_.end() && it->second.spool.lock() == spool) it->second.running = true;
}

void MirrorServer::WithdrawPack(const std::string& key, const std::shared_ptr<Spool>& spool) {
  std::lock_guard lock(mutex_);
  auto it = packs_in_making_.find(key);
  if (it != packs_in_making_.end() && it->second.spool.lock() == spool) packs_in_making_.erase(it);
}

std::shared_ptr<SpoolResponse> MirrorServer::Respond(
    std::shared_ptr<Spool> spool, std::shared_ptr<HttpExchange> exchange, const std::string& type,
    const std::string& repository, const std::string& content_type, const std::string& prefix) {
  const std::string client = exchange->client();
  const auto taken = std::chrono::steady_clock::now();
  return SpoolResponse::Join(
      std::move(spool), std::move(exchange), content_type, prefix,
      [this](HttpExchange& to, const fairgate::Status& status) { Reply(to, status); },
      [this, type, repository, client, taken](const fairgate::Status& status) {
        if (status.ok()) {
          const std::chrono::duration<double> took = std::chrono::steady_clock::now() - taken;
          return log_->Record("sent", type, repository, client, nullptr, took.count());
        }
        if (status.code() == absl::StatusCode::kUnavailable) {
          log_->Record("cut", type, repository, client, &status);
        }
      });
}

void MirrorServer::Reply(HttpExchange& exchange, const fairgate::Status& status) const {
  const int http = HttpStatusOf(status);
  Headers headers;
  const std::optional<double> due = fairgate::RetryAfter(status);
  if (http == 429 || (http == 503 && due)) {
    // A rate limit's refusal says when its token is due, shedding's its interval (whole seconds,
    // rounded up); a refusal for load says the configured time.
    headers.emplace_back("Retry-After",
                         absl::StrCat(due ? std::max(1, static_cast<int>(std::ceil(*due)))
                                          : options_.http.retry_after_seconds));
  }
  exchange.Respond(http, "text/plain; charset=utf-8", absl::StrCat(ClientMessageOf(status), "\n"),
                   headers);
}

fairgate::Status MirrorServer::Refusal(const HttpExchange& exchange,
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
  if (exchange.client().size() > kMaxClientLength) {
    return absl::InvalidArgumentError("the client header is too long");
  }
  if (exchange.group().size() > kMaxClientLength) {
    return absl::InvalidArgumentError("the group header is too long");
  }
  return absl::OkStatus();
}

void MirrorServer::Handle(const std::shared_ptr<HttpExchange>& exchange) {
  const HttpRequest& request = exchange->request();
  const std::string_view target(request.target().data(), request.target().size());
  auto [path, query] = ParseTarget(target);
  if (request.method() == boost::beast::http::verb::get) return HandleGet(exchange, path, query);
  constexpr std::string_view kFetchHook = "/hooks/fetch/";
  if (request.method() == boost::beast::http::verb::post && path.starts_with(kFetchHook)) {
    return HandleFetchHook(exchange, path.substr(kFetchHook.size()));
  }
  if (request.method() == boost::beast::http::verb::post) return HandlePost(exchange, path);
  Reply(*exchange, WithHttpStatus(absl::InvalidArgumentError("only GET and POST are served"), 405));
}

namespace {

// Pushes and the dumb protocol: refused whatever the repository, as the README says.
bool IsPushOrDumb(const std::string& path, const std::map<std::string, std::string>& query,
                  bool post) {
  if (absl::EndsWith(path, "/git-receive-pack")) return true;
  if (absl::EndsWith(path, "/info/refs")) {
    auto service = query.find("service");
    return post || service == query.end() || service->second != "git-upload-pack";
  }
  for (const char* dumb : {"/HEAD", "/objects/", "/info/packs", "/info/alternates"}) {
    if (absl::StrContains(path, dumb)) return true;
  }
  return false;
}

// A push or the dumb protocol is 403, unless the path is refused for something more basic first
// (400 for a path that could escape, 404 for an unknown repository, 405 for a wrong method).
fairgate::Status ReadOnly(fairgate::Status refusal,
                          const fairgate::StatusOr<GitRequestPath>& parsed, const std::string& path,
                          const std::map<std::string, std::string>& query, bool post) {
  const bool path_unknown = !parsed.ok() && parsed.status().code() == absl::StatusCode::kNotFound;
  if ((refusal.ok() || path_unknown) && IsPushOrDumb(path, query, post)) {
    return absl::PermissionDeniedError(
        "this mirror is read-only: it serves only git-upload-pack over smart HTTP (no pushes, no "
        "dumb protocol)");
  }
  return refusal;
}

}  // namespace

void MirrorServer::HandleGet(const std::shared_ptr<HttpExchange>& exchange, const std::string& path,
                             const std::map<std::string, std::string>& query) {
  if (path == "/metrics") {
    exchange->set_route("metrics");
    std::string text = gate_->Metrics();
    http_metrics_->Write(text);
    absl::StrAppend(&text,
                    "# HELP git_mirror_spool_bytes Bytes of packs made and not yet sent, held in "
                    "spool files.\n# TYPE git_mirror_spool_bytes gauge\ngit_mirror_spool_bytes ",
                    spool_budget_->held(),
                    "\n# HELP git_mirror_spool_bytes_limit The spools' "
                    "budget.\n# TYPE git_mirror_spool_bytes_limit gauge\n"
                    "git_mirror_spool_bytes_limit ",
                    spool_budget_->limit(), "\n");
    absl::StrAppend(&text,
                    "# HELP git_mirror_pack_cache_bytes Bytes of finished packs kept for identical "
                    "requests.\n# TYPE git_mirror_pack_cache_bytes gauge\n"
                    "git_mirror_pack_cache_bytes ",
                    pack_cache_.bytes(),
                    "\n# HELP git_mirror_pack_cache_hits_total Requests served from a kept pack, "
                    "without git.\n# TYPE git_mirror_pack_cache_hits_total counter\n"
                    "git_mirror_pack_cache_hits_total ",
                    pack_cache_.hits(), "\n");
    return exchange->Respond(200, "text/plain; version=0.0.4; charset=utf-8", std::move(text));
  }
  if (absl::StartsWith(path, "/debug/")) {
    exchange->set_route("debug");
    if (!debug_allow_.Contains(exchange->client())) {
      return Reply(*exchange, absl::PermissionDeniedError(
                                  "/debug/ is served only to the networks of --debug-allow"));
    }
  }
  if (path == "/debug/scheduler") {
    nlohmann::json state = gate_->DebugState();
    if (!options_.debug_show_clients && state.contains("heaviest_keys")) {
      for (nlohmann::json& key : state["heaviest_keys"]) {
        key["key"] = absl::StrCat(
            "client-", absl::Hex(absl::Hash<std::string>{}(key["key"].get<std::string>())));
      }
    }
    nlohmann::json repositories = nlohmann::json::array();
    for (const auto& [name, url] : repositories_.all()) {
      nlohmann::json entry = {{"name", name}, {"mirrored", IsMirrored(name)}};
      // What the policy learned each kind of work on it costs, in seconds.
      nlohmann::json estimates = nlohmann::json::object();
      for (std::string_view type : {kClone, kRefs, kSyncClone, kFetch, kRepack}) {
        if (std::optional<double> e = gate_->Estimate(type, name))
          estimates[std::string(type)] = *e;
      }
      entry["estimate_seconds"] = estimates;
      repositories.push_back(std::move(entry));
    }
    state["repositories"] = repositories;
    state["http_connections_open"] = http_metrics_->connections_open();
    return exchange->Respond(200, "application/json", state.dump(2) + "\n");
  }
  exchange->set_route("info_refs");
  auto parsed = ParseGitRequestPath(path);
  const fairgate::Status refusal = ReadOnly(Refusal(*exchange, parsed, GitEndpoint::kInfoRefs),
                                            parsed, path, query, /*post=*/false);
  if (!refusal.ok()) return Reply(*exchange, refusal);
  const std::string repository = parsed->repository;
  EnsureMirrored(exchange, repository, [this, exchange, repository](const fairgate::Status& s) {
    if (!s.ok()) return Reply(*exchange, s);
    Request::Spec spec;
    spec.type = std::string(kRefs);
    spec.repository = repository;
    spec.env = GitProtocolEnv(exchange->request());
    spec.argv = {"git", "upload-pack", "--stateless-rpc", "--advertise-refs",
                 MirrorPath(repository)};
    const bool v2 = !spec.env.empty() && spec.env.front().find("version=2") != std::string::npos;
    if (!v2) spec.prefix = absl::StrCat(PktLine("# service=git-upload-pack\n"), "0000");
    spec.content_type = "application/x-git-upload-pack-advertisement";
    Request::StartOrJoin(*this, exchange, std::move(spec));
  });
}

void MirrorServer::HandlePost(const std::shared_ptr<HttpExchange>& exchange,
                              const std::string& path) {
  exchange->set_route("upload_pack");
  const HttpRequest& request = exchange->request();
  auto parsed = ParseGitRequestPath(path);
  fairgate::Status refusal = ReadOnly(Refusal(*exchange, parsed, GitEndpoint::kUploadPack), parsed,
                                      path, {}, /*post=*/true);
  const auto content_type = request[boost::beast::http::field::content_type];
  if (refusal.ok() && std::string_view(content_type.data(), content_type.size()) !=
                          "application/x-git-upload-pack-request") {
    refusal = WithHttpStatus(
        absl::InvalidArgumentError("expected Content-Type application/x-git-upload-pack-request"),
        415);
  }
  if (refusal.ok()) refusal = ValidatePktLines(request.body());
  if (!refusal.ok()) return Reply(*exchange, refusal);
  const std::string repository = parsed->repository;
  EnsureMirrored(exchange, repository, [this, exchange, repository](const fairgate::Status& s) {
    if (!s.ok()) return Reply(*exchange, s);
    Request::Spec spec;
    spec.type = std::string(IsRefListing(exchange->request().body()) ? kRefs : kClone);
    spec.repository = repository;
    spec.env = GitProtocolEnv(exchange->request());
    spec.argv = {"git", "upload-pack", "--stateless-rpc", MirrorPath(repository)};
    spec.input = exchange->TakeBody();
    spec.content_type = "application/x-git-upload-pack-result";
    Request::StartOrJoin(*this, exchange, std::move(spec));
  });
}

std::vector<std::string> MirrorServer::Niced(std::vector<std::string> argv, bool niced) const {
  if (niced && options_.git_nice > 0) {
    argv.insert(argv.begin(), {"nice", "-n", std::to_string(options_.git_nice)});
  }
  return argv;
}

bool MirrorServer::ClientGitStarts(const std::string& client) {
  std::lock_guard lock(mutex_);
  return git_runs_[client]++ == 0;
}

void MirrorServer::ClientGitEnded(const std::string& client) {
  std::lock_guard lock(mutex_);
  auto it = git_runs_.find(client);
  if (it != git_runs_.end() && --it->second == 0) git_runs_.erase(it);
}

fairgate::Status MirrorServer::RunMaintenance(std::string_view what, const std::string& repository,
                                              std::vector<std::string> git_args) const {
  std::vector<std::string> argv = {"git", "-C", MirrorPath(repository)};
  argv.insert(argv.end(), git_args.begin(), git_args.end());
  argv = Niced(std::move(argv), true);
  // The server's work context, not the gate's: a shutdown lets running maintenance finish
  // within the grace instead of killing it at once.
  auto result = RunProcess(argv, "", work_.first, {"GIT_TERMINAL_PROMPT=0"});
  if (!result.ok()) return result.status();
  if (result->exit_code != 0) {
    return absl::UnavailableError(absl::StrCat(std::string(what), " of '", repository,
                                               "' failed: ", GitMessage(result->err)));
  }
  return absl::OkStatus();
}

void MirrorServer::StartFetching(const std::string& repository) {
  if (options_.fetch_interval.count() <= 0) return;
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || !serving_ || fetching_.contains(repository)) return;
  }
  auto started = std::make_shared<bool>(false);
  fairgate::StatusOr<WorkGate::CancelFn> stop =
      gate_->SubmitEvery(kFetch, repository, "", options_.fetch_interval,
                         FetchJob(repository, started), FetchDone(repository, started));
  if (!stop.ok()) {
    RecordOutcome(kFetch, repository, "", false, stop.status());
    return;
  }
  std::unique_lock lock(mutex_);
  if (stopping_) {  // Stop began meanwhile and has already stopped the others
    lock.unlock();
    (*stop)();
    return;
  }
  fetching_.emplace(repository, *std::move(stop));
}

WorkGate::JobFn MirrorServer::FetchJob(const std::string& repository,
                                       std::shared_ptr<bool> started) {
  auto fetch = [this, repository](const fairgate::Context&) {
    return RunMaintenance(kFetch, repository, {"fetch", "--prune", "--quiet", "origin"});
  };
  return Logged(std::string(kFetch), repository, "", fetch, std::move(started));
}

WorkGate::DoneCallback MirrorServer::FetchDone(const std::string& repository,
                                               std::shared_ptr<bool> started) {
  return [this, repository, started](const fairgate::Status& status) {
    RecordOutcome(kFetch, repository, "", *started, status);
    const bool ran = *started;
    *started = false;  // a periodic job's next run sets it again (its runs never overlap)
    bool repack = false;
    if (status.ok() && ran) {
      std::lock_guard lock(mutex_);
      repack = ++fetches_[repository] % options_.repack_after == 0;
    }
    // Its packs were made from the mirror before the fetch (and their keys name the old
    // generation): they would never be asked for again.
    if (status.ok() && ran) pack_cache_.DropRepository(repository);
    if (repack) SubmitRepack(repository);
  };
}

void MirrorServer::HandleFetchHook(const std::shared_ptr<HttpExchange>& exchange,
                                   const std::string& repository) {
  exchange->set_route("fetch_hook");
  if (fairgate::Status valid = ValidateRepositoryName(repository); !valid.ok()) {
    return Reply(*exchange, valid);
  }
  if (repositories_.UpstreamOf(repository) == nullptr) {
    return Reply(*exchange,
                 absl::NotFoundError(absl::StrCat("unknown repository '", repository, "'")));
  }
  if (!IsMirroredOrAdopt(repository)) {  // its first clone will fetch everything there is
    return exchange->Respond(200, "text/plain; charset=utf-8",
                             absl::StrCat("'", repository, "' is not mirrored yet\n"));
  }
  // Any number of notifications while a fetch waits make that one fetch (fetch coalesces); one
  // that comes while a fetch runs queues the next, which will see what was pushed since.
  auto started = std::make_shared<bool>(false);
  fairgate::Status queued = gate_->Submit(kFetch, repository, "", FetchJob(repository, started),
                                          FetchDone(repository, started));
  if (!queued.ok()) {
    RecordOutcome(kFetch, repository, "", false, queued);
    return Reply(*exchange, queued);
  }
  exchange->Respond(202, "text/plain; charset=utf-8",
                    absl::StrCat("a fetch of '", repository, "' is queued\n"));
}

void MirrorServer::SubmitRepack(const std::string& repository) {
  {
    std::lock_guard lock(mutex_);
    // One per repository at a time: a slow repack must not pile repacks up.
    if (stopping_ || !repacks_in_flight_.insert(repository).second) return;
  }
  auto work = [this, repository](const fairgate::Context&) {
    return RunMaintenance(kRepack, repository, {"repack", "-a", "-d", "-q"});
  };
  auto started = std::make_shared<bool>(false);
  auto done = [this, repository, started](const fairgate::Status& status) {
    RecordOutcome(kRepack, repository, "", *started, status);
    std::lock_guard lock(mutex_);
    repacks_in_flight_.erase(repository);
  };
  fairgate::Status status = gate_->Submit(
      kRepack, repository, "", Logged(std::string(kRepack), repository, "", work, started), done);
  if (!status.ok()) {
    RecordOutcome(kRepack, repository, "", false, status);
    std::lock_guard lock(mutex_);
    repacks_in_flight_.erase(repository);
  }
}

}  // namespace git_mirror
