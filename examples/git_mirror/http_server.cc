#include "http_server.h"

#include <algorithm>
#include <cstdint>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/chunk_encode.hpp"
#include "boost/beast/http/empty_body.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/serializer.hpp"
#include "boost/beast/http/write.hpp"
#include "network_set.h"
#include "rate_floor.h"
#include "request_body.h"
#include "tcp_progress.h"

namespace git_mirror {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// How long the accept loop pauses when the process is out of descriptors or memory.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

// The bytes a string keeps on the heap (none while its text fits in the string itself).
std::size_t HeapBytes(const std::string& text) {
  return text.capacity() > std::string().capacity() ? text.capacity() : 0;
}

bool OutOfResources(const boost::system::error_code& error) {
  return error == asio::error::no_descriptors ||
         error == boost::system::errc::too_many_files_open_in_system ||
         error == asio::error::no_buffer_space || error == asio::error::no_memory;
}

// The head every response of this server has.
template <typename Body>
void FillHead(http::response<Body>& response, std::string_view content_type, const Headers& headers,
              bool keep_alive) {
  response.set(http::field::server, "fairgate-git-mirror");
  response.set(http::field::content_type, std::string(content_type));
  for (const auto& [name, value] : headers) response.set(name, value);
  response.keep_alive(keep_alive);
}

}  // namespace

fairgate::Status ValidateHttpLimits(const HttpLimits& l) {
  auto positive = [](auto d) { return d.count() > 0; };
  if (!positive(l.header_timeout)) return absl::InvalidArgumentError("header timeout must be > 0");
  if (!positive(l.idle_timeout)) return absl::InvalidArgumentError("idle timeout must be > 0");
  if (!positive(l.transfer_grace)) return absl::InvalidArgumentError("transfer grace must be > 0");
  if (l.retry_after_seconds < 1) return absl::InvalidArgumentError("retry-after must be >= 1");
  if (l.max_header_bytes < 1024) {
    return absl::InvalidArgumentError("max header bytes must be at least 1024");
  }
  if (l.max_body_bytes < 1 || l.max_inflated_body_bytes < 1) {
    return absl::InvalidArgumentError("body limits must be at least 1 byte");
  }
  if (l.body_memory < l.max_body_bytes + l.max_inflated_body_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("body memory (", l.body_memory,
                     ") must hold at least one request at its limits: max body "
                     "bytes + max inflated body bytes = ",
                     l.max_body_bytes + l.max_inflated_body_bytes));
  }
  if (l.min_transfer_rate < 1) {
    return absl::InvalidArgumentError("min transfer rate must be at least 1 byte per second");
  }
  if (l.listen_backlog < 1) return absl::InvalidArgumentError("listen backlog must be at least 1");
  if (l.send_buffer_bytes < 0) return absl::InvalidArgumentError("send buffer bytes must be >= 0");
  if (l.max_connections < 1 || l.max_connections_per_client < 1) {
    return absl::InvalidArgumentError("connection limits must be at least 1");
  }
  return NetworkSet::Parse(l.trusted_proxies, "trusted proxy").status();
}

fairgate::StatusOr<int> ConnectionLimitWithin(int requested, std::uint64_t descriptor_limit,
                                              std::uint64_t reserved,
                                              std::uint64_t per_connection) {
  if (descriptor_limit < reserved + per_connection) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the open-file limit (", descriptor_limit, ") leaves no descriptor for a connection: ",
        reserved, " are kept for git's pipes, files and the store; raise it (ulimit -n)"));
  }
  return static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(requested),
                                                  (descriptor_limit - reserved) / per_connection));
}

// What the connections share with the server, and may use after it is gone.
struct HttpServer::Shared {
  HttpLimits limits;
  std::shared_ptr<HttpMetrics> metrics;
  HttpHandler handler;
  std::shared_ptr<BodyBudget> body_budget;

  NetworkSet trusted;

  bool Trusted(const asio::ip::address& peer) const { return trusted.Contains(peer); }

  std::mutex mutex;  // guards what follows
  std::map<std::string, int> per_peer;
  std::map<Connection*, std::weak_ptr<Connection>> connections;
};

class HttpServer::Connection : public HttpExchange,
                               public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<Shared> shared, tcp::socket socket, std::string peer,
             bool counted_for_peer, bool trusted)
      : shared_(std::move(shared)),
        limits_(shared_->limits),
        socket_(std::move(socket)),
        read_timer_(socket_.get_executor()),
        write_timer_(socket_.get_executor()),
        peer_(std::move(peer)),
        counted_for_peer_(counted_for_peer),
        trusted_(trusted),
        body_lease_(shared_->body_budget) {
    shared_->metrics->ConnectionOpened();
  }

  ~Connection() override {
    shared_->metrics->ConnectionClosed();
    std::lock_guard lock(shared_->mutex);
    shared_->connections.erase(this);
    if (counted_for_peer_ && --shared_->per_peer[peer_] == 0) shared_->per_peer.erase(peer_);
  }

  void Start() {
    asio::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->ReadNext(); });
  }

  // Refuses the connection with a short answer and closes it.
  void Refuse(unsigned status, std::string message) {
    asio::dispatch(socket_.get_executor(), [self = shared_from_this(), status, message] {
      self->keep_alive_ = false;
      self->Respond(
          status, "text/plain; charset=utf-8", message + "\n",
          status == 429 || status == 503
              ? Headers{{"Retry-After", std::to_string(self->limits_.retry_after_seconds)}}
              : Headers{});
    });
  }

  // From any thread. `only_idle`: only if it is waiting for a request.
  void Close(bool only_idle) {
    asio::dispatch(socket_.get_executor(), [self = shared_from_this(), only_idle] {
      if (only_idle && !self->idle_) return;
      self->Shut();
    });
  }

  // HttpExchange.
  const HttpRequest& request() const override { return request_; }
  RequestBody TakeBody() override {
    RequestBody body{std::move(request_.body()), std::move(body_lease_)};
    request_.body() = std::string();
    body_lease_ = BodyLease(shared_->body_budget);
    return body;
  }
  const std::string& client() const override { return client_; }
  const std::string& group() const override { return group_; }
  const std::string& peer() const override { return peer_; }
  asio::any_io_executor executor() const override {
    return const_cast<tcp::socket&>(socket_).get_executor();
  }
  void set_route(std::string route) override { route_ = std::move(route); }

  void Respond(unsigned status, std::string_view content_type, std::string body,
               const Headers& headers) override {
    responding_ = true;
    auto response =
        std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
    FillHead(*response, content_type, headers, keep_alive_);
    response->body() = std::move(body);
    response->prepare_payload();
    // A HEAD is answered with the head a GET would get, Content-Length included, and no body.
    if (head_) response->body().clear();
    const std::size_t size = response->body().size();
    BeginWrite();
    http::async_write(socket_, *response,
                      [self = shared_from_this(), response, status, size](
                          boost::system::error_code error, std::size_t) {
                        self->EndWrite();
                        self->shared_->metrics->Request(self->route_, status);
                        if (error) return self->Shut();
                        self->shared_->metrics->BytesSent(self->route_, size);
                        self->AfterResponse();
                      });
  }

  void StartStream(unsigned status, std::string_view content_type, const Headers& headers,
                   WriteDone done) override {
    responding_ = true;
    stream_status_ = status;
    stream_header_ =
        std::make_unique<http::response<http::empty_body>>(static_cast<http::status>(status), 11);
    // An HTTP/1.0 client knows no chunks: its stream is the raw bytes, ended by closing.
    stream_raw_ = request_.version() < 11;
    if (stream_raw_) keep_alive_ = false;
    FillHead(*stream_header_, content_type, headers, keep_alive_);
    stream_header_->chunked(!stream_raw_);
    stream_serializer_ =
        std::make_unique<http::response_serializer<http::empty_body>>(*stream_header_);
    BeginWrite();
    http::async_write_header(
        socket_, *stream_serializer_,
        [self = shared_from_this(), done = std::move(done)](
            boost::system::error_code error, std::size_t) { self->StreamWritten(error, 0, done); });
  }

  void WriteChunk(const void* data, std::size_t size, WriteDone done) override {
    BeginWrite();
    auto written = [self = shared_from_this(), size, done = std::move(done)](
                       boost::system::error_code error, std::size_t) {
      self->StreamWritten(error, size, done);
    };
    if (stream_raw_) {
      asio::async_write(socket_, asio::const_buffer(data, size), std::move(written));
    } else {
      asio::async_write(socket_, http::make_chunk(asio::const_buffer(data, size)),
                        std::move(written));
    }
  }

  void FinishStream(WriteDone done) override {
    auto finished = [self = shared_from_this(), done = std::move(done)](
                        boost::system::error_code error, std::size_t) {
      self->EndWrite();
      if (error) {
        self->CutTransfer();
        return done(false);
      }
      self->shared_->metrics->Request(self->route_, self->stream_status_);
      done(true);
      self->AfterResponse();  // closes a raw stream's connection: that is its end
    };
    BeginWrite();
    if (stream_raw_) {
      asio::post(socket_.get_executor(),
                 [finished = std::move(finished)]() mutable { finished({}, 0); });
    } else {
      asio::async_write(socket_, http::make_chunk_last(), std::move(finished));
    }
  }

  void Abort() override {
    shared_->metrics->TransferCut(route_, "server_error");
    shared_->metrics->Request(route_, stream_status_);
    Shut();
  }

  void OnClientGone(std::function<void()> on_gone) override {
    if (gone_ && !responding_) return on_gone();
    on_gone_ = std::move(on_gone);
  }

 private:
  // Waits for the next request: idle until its first byte, then its header within the header
  // timeout.
  void ReadNext() {
    idle_ = true;
    responding_ = false;
    route_ = "other";
    on_gone_ = nullptr;
    gone_ = false;
    if (buffer_.size() > 0) return ReadHeader();
    ArmRead(limits_.idle_timeout, "idle_timeout");
    socket_.async_read_some(
        buffer_.prepare(4096),
        [self = shared_from_this()](boost::system::error_code error, std::size_t n) {
          self->DisarmRead();
          if (error) return self->Shut();
          self->buffer_.commit(n);
          self->ReadHeader();
        });
  }

  void ReadHeader() {
    idle_ = false;
    head_ = false;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
    parser_->body_limit(limits_.max_body_bytes);
    ArmRead(limits_.header_timeout, "header_timeout");
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](boost::system::error_code error, std::size_t) {
          self->DisarmRead();
          if (error == http::error::header_limit) {
            return self->Fail(431, "the request header is larger than the limit");
          }
          if (error == http::error::body_limit) {
            return self->Fail(413, "the request body is larger than the limit");
          }
          if (error) {
            if (self->read_timed_out_) return self->Shut();
            if (error == http::error::end_of_stream || error == asio::error::eof ||
                error == asio::error::connection_reset || error == asio::error::operation_aborted) {
              return self->Shut();
            }
            return self->Fail(400, "malformed HTTP request");
          }
          self->ReadBody();
        });
  }

  // Reads the body piece by piece, each piece counted against the body budget (a Content-Length
  // body's storage is reserved whole at its header), at the rate floor.
  void ReadBody() {
    if (!HoldBody(HeapBytes(parser_->get().body()))) return;
    if (parser_->is_done()) return Dispatch();
    read_floor_.emplace(limits_.min_transfer_rate, limits_.transfer_grace);
    body_read_ = 0;
    read_floor_->Start(Clock::now());
    WatchReadFloor();
    ReadBodySome();
  }

  void ReadBodySome() {
    http::async_read_some(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](boost::system::error_code error, std::size_t n) {
          if (self->closed_) return;
          self->body_read_ += n;
          self->read_floor_->Moved(self->body_read_, Clock::now());
          if (error == http::error::body_limit) {
            self->DisarmRead();
            return self->Fail(413, "the request body is larger than the limit");
          }
          if (error) {
            self->DisarmRead();
            // Gone: nobody to answer. Otherwise the body's framing is wrong (a bad chunk size,
            // say): 400, naming it.
            if (error == http::error::partial_message || error == http::error::end_of_stream ||
                error == asio::error::eof || error == asio::error::connection_reset ||
                error == asio::error::operation_aborted) {
              return self->Shut();
            }
            return self->Fail(400, "malformed request body: " + error.message());
          }
          if (!self->HoldBody(HeapBytes(self->parser_->get().body()))) return self->DisarmRead();
          if (!self->parser_->is_done()) return self->ReadBodySome();
          self->DisarmRead();
          self->read_floor_.reset();
          self->Dispatch();
        });
  }

  // Cuts the body's read once the client falls below the rate floor.
  void WatchReadFloor() {
    read_timed_out_ = false;
    read_timer_.expires_after(read_floor_->Left(Clock::now()));
    read_timer_.async_wait([self = shared_from_this(),
                            generation = ++read_generation_](boost::system::error_code error) {
      if (error || generation != self->read_generation_ || !self->read_floor_) return;
      if (self->read_floor_->Left(Clock::now()) > Clock::duration::zero()) {
        return self->WatchReadFloor();
      }
      self->read_timed_out_ = true;
      self->shared_->metrics->ConnectionDropped("body_timeout");
      self->Shut();
    });
  }

  // Counts `bytes` of body storage against the budget; if it has no room, answers 503 and
  // returns false.
  bool HoldBody(std::size_t bytes) {
    if (body_lease_.Resize(bytes)) return true;
    RefuseForBodyMemory();
    return false;
  }
  void RefuseForBodyMemory() {
    shared_->metrics->ConnectionDropped("body_memory");
    Fail(503, "the server is holding as many request bodies as it may; retry later",
         {{"Retry-After", std::to_string(limits_.retry_after_seconds)}});
  }

  void Dispatch() {
    request_ = parser_->release();
    parser_.reset();
    head_ = request_.method() == http::verb::head;
    keep_alive_ = request_.keep_alive();
    const auto encoding = request_[http::field::content_encoding];
    if (!encoding.empty() &&
        !absl::EqualsIgnoreCase(absl::string_view(encoding.data(), encoding.size()), "identity")) {
      if (!absl::EqualsIgnoreCase(absl::string_view(encoding.data(), encoding.size()), "gzip")) {
        return Fail(415, "only gzip request bodies are accepted");
      }
      const std::size_t sent = HeapBytes(request_.body());
      auto inflated =
          InflateGzip(request_.body(), limits_.max_inflated_body_bytes,
                      [this, sent](std::size_t bytes) { return body_lease_.Resize(sent + bytes); });
      if (!inflated.ok()) {
        const auto code = inflated.status().code();
        if (code == absl::StatusCode::kUnavailable) return RefuseForBodyMemory();
        return Fail(code == absl::StatusCode::kResourceExhausted ? 413 : 400,
                    std::string(inflated.status().message()));
      }
      request_.body() = *std::move(inflated);  // what was sent is freed here: one copy held
      body_lease_.Resize(HeapBytes(request_.body()));
      request_.erase(http::field::content_encoding);
    }
    // Watch the connection while the handler works: an end of stream before the response starts
    // means the client has gone. Bytes that arrive (a pipelined request) stay in the buffer. A
    // request already in the buffer (pipelined in the same packets) is not watched for: the
    // client waits for this answer and sends nothing more, so the watch would never end, and
    // the next request would wait behind it for ever; it is read once this answer is sent.
    client_ = ClientOf();
    group_ = GroupOf();
    if (buffer_.size() > 0) return shared_->handler(shared_from_this());
    watching_ = true;
    socket_.async_read_some(
        buffer_.prepare(4096),
        [self = shared_from_this()](boost::system::error_code error, std::size_t n) {
          self->watching_ = false;
          self->buffer_.commit(n);
          if (error && !self->closed_) {
            self->gone_ = true;
            if (!self->responding_ && self->on_gone_) std::exchange(self->on_gone_, nullptr)();
          }
          if (self->next_after_watch_) {
            self->next_after_watch_ = false;
            self->DisarmRead();
            if (error) return self->Shut();
            self->ReadNext();
          }
        });
    shared_->handler(shared_from_this());
  }

  std::string ClientOf() const {
    if (!trusted_ || limits_.client_header.empty()) return peer_;
    std::vector<std::string> entries;  // every line's, in order
    for (auto [line, end] = request_.equal_range(limits_.client_header); line != end; ++line) {
      const auto value = line->value();
      for (absl::string_view entry : absl::StrSplit(absl::string_view(value.data(), value.size()),
                                                    ',', absl::SkipWhitespace())) {
        entries.emplace_back(absl::StripAsciiWhitespace(entry));
      }
    }
    if (entries.empty()) return peer_;
    for (auto entry = entries.rbegin(); entry != entries.rend(); ++entry) {
      boost::system::error_code error;
      const asio::ip::address address = asio::ip::make_address(*entry, error);
      if (error || !shared_->Trusted(address)) return *entry;
    }
    return entries.front();
  }

  std::string GroupOf() const {
    if (!trusted_ || limits_.group_header.empty()) return "";
    std::string last;
    for (auto [line, end] = request_.equal_range(limits_.group_header); line != end; ++line) {
      const auto value = line->value();
      for (absl::string_view entry : absl::StrSplit(absl::string_view(value.data(), value.size()),
                                                    ',', absl::SkipWhitespace())) {
        last = std::string(absl::StripAsciiWhitespace(entry));
      }
    }
    return last;
  }

  void AfterResponse() {
    stream_serializer_.reset();
    stream_header_.reset();
    write_floor_.reset();
    request_.body() = std::string();  // what the handler left of the body
    body_lease_.Resize(0);
    on_gone_ = nullptr;
    if (!keep_alive_ || gone_) return Shut();
    if (watching_) {
      // The watch read is still out: it becomes the wait for the next request.
      next_after_watch_ = true;
      idle_ = true;
      ArmRead(limits_.idle_timeout, "idle_timeout");
      return;
    }
    ReadNext();
  }

  void StreamWritten(boost::system::error_code error, std::size_t size, const WriteDone& done) {
    EndWrite();
    if (error) {
      CutTransfer();
      return done(false);
    }
    shared_->metrics->BytesSent(route_, size);
    done(true);
  }

  void CutTransfer() {
    shared_->metrics->TransferCut(route_, write_timed_out_ ? "write_timeout" : "client_gone");
    shared_->metrics->Request(route_, stream_status_);
    Shut();
  }

  // Answers an error and closes the connection.
  void Fail(unsigned status, std::string message, const Headers& headers = {}) {
    keep_alive_ = false;
    route_ = "other";
    parser_.reset();
    request_.body() = std::string();
    body_lease_.Resize(0);
    Respond(status, "text/plain; charset=utf-8", message + "\n", headers);
  }

  void Shut() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    read_timer_.cancel();
    write_timer_.cancel();
    // Dropped either way: it holds the handler's state, which holds this exchange.
    std::function<void()> on_gone = std::exchange(on_gone_, nullptr);
    if (!responding_ && on_gone) on_gone();
  }

  void ArmRead(Clock::duration after, const char* reason) {
    read_timed_out_ = false;
    read_timer_.expires_after(after);
    read_timer_.async_wait([self = shared_from_this(), generation = ++read_generation_,
                            reason](boost::system::error_code error) {
      if (error || generation != self->read_generation_) return;
      self->read_timed_out_ = true;
      self->shared_->metrics->ConnectionDropped(reason);
      self->Shut();
    });
  }
  void DisarmRead() {
    ++read_generation_;
    read_timer_.cancel();
  }
  // A write of the response is out: the client is waited on until it completes. The response's
  // rate floor counts what the client's TCP has acknowledged since the response began.
  void BeginWrite() {
    const auto now = Clock::now();
    if (!write_floor_) {
      write_floor_.emplace(limits_.min_transfer_rate, limits_.transfer_grace);
      acked_at_start_ = Acked();
    }
    write_floor_->Start(now);
    WatchWriteFloor();
  }
  void EndWrite() {
    ++write_generation_;
    write_timer_.cancel();
    if (!write_floor_) return;
    const auto now = Clock::now();
    write_floor_->Moved(Acked() - acked_at_start_, now);
    write_floor_->Stop(now);
  }
  void WatchWriteFloor() {
    write_timed_out_ = false;
    write_timer_.expires_after(write_floor_->Left(Clock::now()));
    write_timer_.async_wait([self = shared_from_this(),
                             generation = ++write_generation_](boost::system::error_code error) {
      if (error || generation != self->write_generation_ || !self->write_floor_) return;
      const auto now = Clock::now();
      self->write_floor_->Moved(self->Acked() - self->acked_at_start_, now);
      if (self->write_floor_->Left(now) > Clock::duration::zero()) {
        return self->WatchWriteFloor();
      }
      self->write_timed_out_ = true;
      self->Shut();
    });
  }
  // Bytes the client's TCP has acknowledged on this connection (the last count the kernel gave:
  // it always gives one for a TCP socket on Linux, which is all this server listens on).
  std::uint64_t Acked() {
    if (closed_) return acked_seen_;
    if (auto acked = TcpBytesAcked(socket_.native_handle())) {
      acked_seen_ = std::max(acked_seen_, *acked);
    }
    return acked_seen_;
  }

  const std::shared_ptr<Shared> shared_;
  const HttpLimits& limits_;
  tcp::socket socket_;
  asio::steady_timer read_timer_, write_timer_;
  std::uint64_t read_generation_ = 0, write_generation_ = 0;
  bool read_timed_out_ = false, write_timed_out_ = false;
  const std::string peer_;
  const bool counted_for_peer_;
  const bool trusted_;

  BodyLease body_lease_;                 // the body of the request being read or answered
  std::optional<RateFloor> read_floor_;  // while a body is read
  std::uint64_t body_read_ = 0;
  std::optional<RateFloor> write_floor_;  // while a response is written
  std::uint64_t acked_at_start_ = 0, acked_seen_ = 0;

  boost::beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest request_;
  std::string client_;
  std::string group_;
  std::string route_ = "other";
  bool keep_alive_ = true;
  bool stream_raw_ = false;  // the stream under way is written without chunks (HTTP/1.0)
  bool head_ = false;        // the request being answered is a HEAD
  std::unique_ptr<http::response<http::empty_body>> stream_header_;
  std::unique_ptr<http::response_serializer<http::empty_body>> stream_serializer_;
  unsigned stream_status_ = 0;

  bool idle_ = true;         // between requests (Close(only_idle) reads it on the strand)
  bool responding_ = false;  // a response has started: a gone client no longer cancels
  bool watching_ = false;
  bool next_after_watch_ = false;
  bool gone_ = false;
  bool closed_ = false;
  std::function<void()> on_gone_;
};

HttpServer::HttpServer(asio::io_context& io, HttpLimits limits,
                       std::shared_ptr<HttpMetrics> metrics, HttpHandler handler)
    : io_(io),
      shared_(std::make_shared<Shared>()),
      acceptor_(asio::make_strand(io)),
      accept_pause_(acceptor_.get_executor()) {
  shared_->limits = std::move(limits);
  shared_->metrics = std::move(metrics);
  shared_->body_budget = std::make_shared<BodyBudget>(shared_->limits.body_memory);
  shared_->metrics->ShowBodyBudget(shared_->body_budget);
  shared_->handler = std::move(handler);
  // Validated by ValidateHttpLimits; a list that does not parse trusts nobody.
  shared_->trusted =
      NetworkSet::Parse(shared_->limits.trusted_proxies, "trusted proxy").value_or(NetworkSet());
}

HttpServer::~HttpServer() {
  if (!stopped_accepting_.exchange(true)) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);  // the owner stopped the io_context first (see the header)
  }
  CloseAll();
}

fairgate::StatusOr<int> HttpServer::Listen(const std::string& host, int port) {
  boost::system::error_code error;
  const asio::ip::address address = asio::ip::make_address(host, error);
  if (error) return absl::InvalidArgumentError(absl::StrCat("'", host, "' is not an IP address"));
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  acceptor_.open(endpoint.protocol(), error);
  if (!error) acceptor_.set_option(asio::socket_base::reuse_address(true), error);
  if (!error) acceptor_.bind(endpoint, error);
  if (!error) acceptor_.listen(shared_->limits.listen_backlog, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host, ":", port, ": ", error.message()));
  }
  return acceptor_.local_endpoint().port();
}

void HttpServer::Start() {
  asio::dispatch(acceptor_.get_executor(), [this] { Accept(); });
}

bool HttpServer::Trusted(const asio::ip::address& peer) const { return shared_->Trusted(peer); }

void HttpServer::Accept() {
  if (!acceptor_.is_open()) return;
  // Each connection gets a strand of its own: its handlers never run at once.
  acceptor_.async_accept(
      asio::make_strand(io_), [this](boost::system::error_code error, tcp::socket socket) {
        if (error == asio::error::operation_aborted || !acceptor_.is_open()) return;
        if (!error) {
          boost::system::error_code ignored;
          const asio::ip::address address = socket.remote_endpoint(ignored).address();
          std::string peer =
              address.is_v6() && address.to_v6().is_v4_mapped()
                  ? asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()).to_string()
                  : address.to_string();
          if (shared_->limits.send_buffer_bytes > 0) {
            socket.set_option(
                asio::socket_base::send_buffer_size(shared_->limits.send_buffer_bytes), ignored);
          }
          const bool trusted = Trusted(address);
          unsigned refuse = 0;
          std::shared_ptr<Connection> connection;
          {
            std::lock_guard lock(shared_->mutex);
            const bool counted = !trusted;
            if (static_cast<int>(shared_->connections.size()) >= shared_->limits.max_connections) {
              refuse = 503;
            } else if (counted &&
                       shared_->per_peer[peer] >= shared_->limits.max_connections_per_client) {
              refuse = 429;
            }
            if (counted && refuse == 0) ++shared_->per_peer[peer];
            connection = std::make_shared<Connection>(shared_, std::move(socket), peer,
                                                      counted && refuse == 0, trusted);
            shared_->connections.emplace(connection.get(), connection);
          }
          if (refuse == 0) {
            connection->Start();
          } else {
            shared_->metrics->ConnectionDropped(refuse == 429 ? "per_client_limit" : "total_limit");
            connection->Refuse(refuse, refuse == 429 ? "too many connections from this client"
                                                     : "too many connections");
          }
        }
        // An error must not stop the loop. Out of descriptors or memory, the pending connection
        // stays in the backlog and every accept would fail at once: pause before the next.
        if (OutOfResources(error)) {
          shared_->metrics->AcceptFailed();
          accept_pause_.expires_after(kAcceptPause);
          accept_pause_.async_wait([this](boost::system::error_code waited) {
            if (!waited) Accept();
          });
          return;
        }
        Accept();
      });
}

void HttpServer::StopAccepting() {
  if (stopped_accepting_.exchange(true)) return;
  // The acceptor belongs to its strand: close it there, and wait for that (bounded: if the
  // io_context no longer runs, close it here, where nothing else can touch it any more).
  std::promise<void> done;
  auto finished = done.get_future();
  asio::dispatch(acceptor_.get_executor(), [this, &done] {
    boost::system::error_code ignored;
    accept_pause_.cancel();
    acceptor_.close(ignored);
    done.set_value();
  });
  if (finished.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
  }
}

void HttpServer::CloseIdle() { CloseConnections(/*only_idle=*/true); }

void HttpServer::CloseAll() { CloseConnections(/*only_idle=*/false); }

void HttpServer::CloseConnections(bool only_idle) {
  std::vector<std::shared_ptr<Connection>> all;
  {
    std::lock_guard lock(shared_->mutex);
    for (auto& [raw, weak] : shared_->connections) {
      if (auto c = weak.lock()) all.push_back(std::move(c));
    }
  }
  for (auto& c : all) c->Close(only_idle);
}

int HttpServer::open_connections() const {
  std::lock_guard lock(shared_->mutex);
  return static_cast<int>(shared_->connections.size());
}

}  // namespace git_mirror
