// HttpServer: the mirror's front door, an event-driven HTTP/1.1 server on Boost.Asio and
// Boost.Beast. A connection costs no thread, whether it is being read, waits for admission, or
// streams a response: every connection is a few objects on one io_context, and its handlers run
// on its own strand. Nothing is queued in front of the handler: a request is handed over as soon
// as its header and body have been read.
//
// Limits (HttpLimits), each enforced per connection:
// - a request's header must arrive within `header_timeout` of its first byte, and be at most
//   `max_header_bytes` (else 431 and the connection closes);
// - a body at most `max_body_bytes` as sent (413), and, if gzip-encoded, at most
//   `max_inflated_body_bytes` once inflated (413); other encodings get 415;
// - a connection with no request for `idle_timeout` is closed (between keep-alive requests, and
//   before the first one);
// - a body must arrive, and a response be taken, at `min_transfer_rate` bytes per second, with
//   `transfer_grace` of slack (rate_floor.h): judged on the bytes that have really moved, those
//   of a body as read and those of a response as acknowledged by the client's TCP, never on when
//   one write completes (which may wait for megabytes in the kernel's buffer to drain). So a
//   client at or above the rate is never cut, whatever its receive window, and one that stops
//   (or trickles a body) is cut after about the grace (`body_timeout` and `write_timeout`);
// - the request bodies held by all connections together, as sent and once inflated, stay within
//   `body_memory` bytes (body_budget.h): a body the budget has no room for is answered 503 with
//   Retry-After. A body is held once: inflating replaces what was sent, and the handler takes
//   the body out of its exchange (TakeBody) with its share of the budget;
// - the listen backlog is `listen_backlog`; at most `max_connections` connections are open, and at
//   most `max_connections_per_client` from one peer address (trusted proxies excepted). A
//   connection over a limit is answered 503 (over all) or 429 (per client) and closed. A server
//   keeps `max_connections` below its descriptor limit (ConnectionLimitWithin); if accepting
//   still fails for want of descriptors or memory, the accept loop waits 100 ms before it tries
//   again (counted as `accept_failures`) rather than spinning.
//
// The client of a request: the peer address, or, when the peer is a trusted proxy (an address or
// a CIDR network of `trusted_proxies`) and `client_header` is set and present, the entries of all
// that header's lines in order (proxies that append a line of their own, HAProxy's, and those
// that append to the last line read alike), read from the right: the first entry that is not a
// trusted proxy is the client (the address the outermost trusted proxy saw); entries a client
// wrote itself, to the left of it, are never believed. All trusted: the leftmost.
// The client's group (a tenant, client_group.h): when the peer is a trusted proxy and
// `group_header` is set and present, the last entry of that header's lines (what the proxy
// nearest to the server wrote); else none.
//
// Thread safety: Listen, then Start; Stop* and the counters from any thread. Destroy it after
// its io_context has stopped running (its connections may outlive it until the io_context
// destroys their last handlers; they share nothing with it but `metrics` and a registry). An
// HttpExchange is used on its strand only (every handler callback already runs there).
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_HTTP_SERVER_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_HTTP_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "body_budget.h"
#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/http/message.hpp"
#include "boost/beast/http/string_body.hpp"
#include "fairgate/status.h"
#include "http_metrics.h"

namespace git_mirror {

struct HttpLimits {
  std::chrono::milliseconds header_timeout{std::chrono::seconds(10)};
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_body_bytes = 8 * 1024 * 1024;
  std::size_t max_inflated_body_bytes = 64 * 1024 * 1024;
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(60)};
  std::size_t min_transfer_rate = 4 * 1024;  // bytes per second
  std::chrono::milliseconds transfer_grace{std::chrono::seconds(30)};
  int listen_backlog = 1024;
  // SO_SNDBUF of each connection, bytes; 0: the kernel's (which grows a slow reader's buffer to
  // net.ipv4.tcp_wmem's maximum, 4 MiB by default).
  int send_buffer_bytes = 0;
  int max_connections = 4096;
  int max_connections_per_client = 64;
  std::size_t body_memory = 128 * 1024 * 1024;  // request bodies held at once, all connections
  int retry_after_seconds = 5;                  // the Retry-After of every 429 and 503 for load
  std::string client_header;                    // e.g. "X-Forwarded-For"; empty: peer address only
  std::vector<std::string> trusted_proxies;     // addresses or CIDR networks
  std::string group_header;  // e.g. "X-Tenant": the client's group; empty: none (header comment)
};

// OK, or InvalidArgument naming the bad field (a trusted proxy that does not parse included).
fairgate::Status ValidateHttpLimits(const HttpLimits& limits);

// The most connections a process may keep open with `descriptor_limit` descriptors of which
// `reserved` are kept for everything else (git's pipes, files, the store), each connection taking
// `per_connection` (its socket, and the file it is served from): `requested` if that fits, else
// what does; InvalidArgument if not even one connection fits.
fairgate::StatusOr<int> ConnectionLimitWithin(int requested, std::uint64_t descriptor_limit,
                                              std::uint64_t reserved, std::uint64_t per_connection);

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using Headers = std::vector<std::pair<std::string, std::string>>;
using WriteDone = std::function<void(bool ok)>;

// One request and its response. The body of the request is inflated already.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual const HttpRequest& request() const = 0;
  // Takes the request's body out (request().body() is empty after), still counted against the
  // server's body budget until the returned value is destroyed.
  virtual RequestBody TakeBody() = 0;
  // The client and its group, "" for none (see the header comment), and the peer address.
  virtual const std::string& client() const = 0;
  virtual const std::string& group() const = 0;
  virtual const std::string& peer() const = 0;
  // The strand every callback of this exchange runs on.
  virtual boost::asio::any_io_executor executor() const = 0;
  // The route label for metrics; set by the handler before responding ("other" by default).
  virtual void set_route(std::string route) = 0;

  // A whole response; the connection then serves its next request, or closes.
  virtual void Respond(unsigned status, std::string_view content_type, std::string body,
                       const Headers& headers = {}) = 0;
  // A streamed (chunked) response: the header, then chunks, then the end. `done(false)` means the
  // client is gone or too slow (the connection is closed, and counted as a transfer cut); only
  // one write at a time.
  virtual void StartStream(unsigned status, std::string_view content_type, const Headers& headers,
                           WriteDone done) = 0;
  virtual void WriteChunk(const void* data, std::size_t size, WriteDone done) = 0;
  virtual void FinishStream(WriteDone done) = 0;
  // Ends a started stream without its last chunk (the client sees an incomplete response) and
  // closes the connection.
  virtual void Abort() = 0;

  // `on_gone` runs (once, on the strand) if the client closes its connection before a response
  // has started: a waiting request can then give up its place.
  virtual void OnClientGone(std::function<void()> on_gone) = 0;
};

using HttpHandler = std::function<void(std::shared_ptr<HttpExchange>)>;

class HttpServer {
 public:
  // `metrics` is shared with the connections, which may outlive the server by a little (until
  // the io_context has destroyed their last handler).
  HttpServer(boost::asio::io_context& io, HttpLimits limits, std::shared_ptr<HttpMetrics> metrics,
             HttpHandler handler);
  ~HttpServer();

  // Binds host:port (0: any free port) with the configured backlog; returns the port.
  fairgate::StatusOr<int> Listen(const std::string& host, int port);
  // Starts accepting (on the io_context's threads).
  void Start();
  // Stops accepting new connections; open ones go on.
  void StopAccepting();
  // Closes every connection that is not in the middle of a response.
  void CloseIdle();
  // Closes every connection.
  void CloseAll();
  int open_connections() const;

 private:
  class Connection;
  struct Shared;
  void Accept();
  bool Trusted(const boost::asio::ip::address& peer) const;
  void CloseConnections(bool only_idle);

  boost::asio::io_context& io_;
  const std::shared_ptr<Shared> shared_;  // what connections use: limits, metrics, registry
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_pause_;  // on the acceptor's strand
  std::atomic<bool> stopped_accepting_{false};
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_HTTP_SERVER_H_
