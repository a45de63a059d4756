// The mirror's front door under clients that misbehave or are merely slow, on real sockets on
// loopback: transfers that hold their slot to the last byte, slow readers that are served and
// stalled ones that are cut (and counted), header and idle deadlines, size limits, connection
// limits, the listen backlog, trusted proxies, what git children inherit, leftovers of an
// interrupted run, and the shutdown grace. Every wait is for a condition, with a bound.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "mirror_server.h"
#include "mirror_test_util.h"
#include "request_body.h"

namespace git_mirror {
namespace {
namespace front_door_test {

using namespace git_mirror::testing;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

// An upstream whose one commit holds `megabytes` of incompressible data: its pack is that large.
fs::path MakeLargeUpstream(const fs::path& dir, const std::string& name, int megabytes) {
  const fs::path repo = dir / name;
  Git({"init", "--quiet", "--initial-branch=main", repo.string()});
  std::mt19937_64 random(42);
  std::ofstream out(repo / "blob.bin", std::ios::binary);
  for (int i = 0; i < megabytes * 1024 * 128; ++i) {
    const std::uint64_t word = random();
    out.write(reinterpret_cast<const char*>(&word), sizeof word);
  }
  out.close();
  Git({"-C", repo.string(), "add", "."});
  Git({"-C", repo.string(), "commit", "--quiet", "-m", "large"});
  return repo;
}

std::string Pkt(const std::string& payload) {
  char length[5];
  std::snprintf(length, sizeof length, "%04zx", payload.size() + 4);
  return length + payload;
}

// A protocol v0 fetch of `sha`, as git sends it: one want, a flush, done.
std::string WantRequest(const std::string& repository, const std::string& sha,
                        const std::string& client) {
  const std::string body = Pkt("want " + sha + " ofs-delta\n") + "0000" + Pkt("done\n");
  return "POST /" + repository + "/git-upload-pack HTTP/1.1\r\nHost: x\r\n" + kClientHeader + ": " +
         client + "\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A client connection whose reading the test paces itself.
class RawConnection {
 public:
  // `receive_buffer`: SO_RCVBUF in bytes (0: the system's), so that little is buffered for it.
  explicit RawConnection(int port, int receive_buffer = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    if (receive_buffer > 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  }
  // To `host`, a loopback address of either family ("127.0.0.1", "::1").
  RawConnection(int port, const std::string& host) {
    addrinfo hints{};
    hints.ai_flags = AI_NUMERICHOST;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    REQUIRE(getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) == 0);
    fd_ = socket(found->ai_family, SOCK_STREAM, 0);
    const int connected = fd_ >= 0 ? connect(fd_, found->ai_addr, found->ai_addrlen) : -1;
    freeaddrinfo(found);
    REQUIRE(connected == 0);
  }
  ~RawConnection() { close(fd_); }
  void Send(const std::string& data) const {
    REQUIRE(send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size()));
  }
  // Whether a send still goes through (false once the server has closed the connection).
  bool TrySend(const std::string& data) const {
    return send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }
  // Reads up to `max` bytes, waiting at most `guard`; empty at end of stream or on timeout.
  std::string Read(std::size_t max, std::chrono::milliseconds guard = 20s) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(guard.count())) <= 0) return "";
    std::string data(max, '\0');
    const ssize_t n = recv(fd_, data.data(), max, 0);
    if (n <= 0) {
      closed_ = true;
      return "";
    }
    data.resize(static_cast<std::size_t>(n));
    received_ += data;
    return data;
  }
  // Waits (bounded) until the server closes the connection; true if it did.
  bool WaitClosed(std::chrono::milliseconds guard = 30s) {
    const auto give_up = std::chrono::steady_clock::now() + guard;
    while (!closed_ && std::chrono::steady_clock::now() < give_up) Read(65536, 100ms);
    return closed_;
  }
  const std::string& received() const { return received_; }
  bool closed() const { return closed_; }

 private:
  int fd_ = -1;
  bool closed_ = false;
  std::string received_;
};

bool HasEvent(const ServerUnderTest& mirror, const std::string& event, const std::string& type,
              const std::string& status_prefix = "") {
  for (const json& e : mirror.Events()) {
    if (e["event"] != event || e["type"] != type) continue;
    if (status_prefix.empty()) return true;
    if (e.contains("status") && e["status"].get<std::string>().rfind(status_prefix, 0) == 0) {
      return true;
    }
  }
  return false;
}

// A mirror of one large repository, mirrored already, with transfer limits set by `configure`.
struct LargeMirror {
  TempDir work;
  fs::path upstream;
  std::string sha;
  std::unique_ptr<ServerUnderTest> mirror;

  LargeMirror(int megabytes, const std::function<void(MirrorOptions&)>& configure) {
    upstream = MakeLargeUpstream(work.path, "big.git", megabytes);
    sha = Git({"-C", upstream.string(), "rev-parse", "main"});
    sha.pop_back();
    RepositorySet repositories;
    REQUIRE(repositories.AddFlag("big.git=" + upstream.string()).ok());
    mirror = std::make_unique<ServerUnderTest>(repositories, GateConfig{.capacity = 2}, 0ms, false,
                                               10, configure);
    // Make the mirror first (the sync-clone), with the ref listing.
    REQUIRE(RawGet(mirror->port, "/big.git/info/refs?service=git-upload-pack").status == 200);
  }
};

TEST_CASE("GitMirror.Transfer.ASlotCoversMakingThePackNotSendingIt") {
  LargeMirror large(8, nullptr);
  ServerUnderTest& mirror = *large.mirror;
  RawConnection client(mirror.port, 4096);
  client.Send(WantRequest("big.git", large.sha, "slow"));
  REQUIRE(client.Read(1024).size() > 0);  // the transfer has begun
  // git has made the pack long before this client takes it: its job has ended, its slot is free,
  // and the pack waits in the spool.
  REQUIRE(Eventually([&] { return HasEvent(mirror, "end", "clone", "OK"); }));
  CHECK(mirror.Debug()["running"] == 0);
  CHECK(client.received().size() < 1024u * 1024);
  CHECK(Metric(mirror.port, "git_mirror_spool_bytes") > 4.0 * 1024 * 1024);
  // The client reads the rest, all of it.
  while (client.received().find("\r\n0\r\n\r\n") == std::string::npos && !client.closed()) {
    if (client.Read(1 << 20).empty() && client.closed()) break;
  }
  CHECK(client.received().find("PACK") != std::string::npos);
  CHECK(client.received().size() > 8u * 1024 * 1024);
  REQUIRE(Eventually([&] { return HasEvent(mirror, "sent", "clone"); }));
  CHECK(Metric(mirror.port, "git_mirror_http_response_bytes_total{route=\"upload_pack\"}") >
        8.0 * 1024 * 1024);
  CHECK(Metric(mirror.port, "git_mirror_spool_bytes") == 0);
}

TEST_CASE("GitMirror.Transfer.AClientThatStopsReadingIsCutWithoutHavingHeldASlot") {
  LargeMirror large(16, [](MirrorOptions& o) {
    o.http.transfer_grace = 1s;
    o.http.min_transfer_rate = 1024 * 1024;
  });
  ServerUnderTest& mirror = *large.mirror;
  RawConnection client(mirror.port, 4096);
  client.Send(WantRequest("big.git", large.sha, "stalled"));
  REQUIRE(client.Read(1024).size() > 0);
  // It reads nothing more. The pack was made (a job that ended well), then the server gives up on
  // the client: the transfer is cut, logged and counted, and its spool is dropped.
  REQUIRE(Eventually([&] { return HasEvent(mirror, "cut", "clone", "UNAVAILABLE"); }));
  CHECK(HasEvent(mirror, "end", "clone", "OK"));
  CHECK(
      Metric(
          mirror.port,
          "git_mirror_http_transfers_cut_total{reason=\"write_timeout\",route=\"upload_pack\"}") ==
      1);
  CHECK(Metric(mirror.port,
               "fairgate_jobs_completed_total{status=\"ok\",tier=\"3\",type=\"clone\"}") >= 1);
  CHECK(mirror.Debug()["running"] == 0);
  CHECK(Metric(mirror.port, "git_mirror_spool_bytes") == 0);
  CHECK_FALSE(HasEvent(mirror, "sent", "clone"));
}

TEST_CASE("GitMirror.Transfer.APackOverAQuarterOfTheCacheIsNotKept") {
  for (const std::uint64_t cache : {std::uint64_t{16} << 20, std::uint64_t{2} << 20}) {
    CAPTURE(cache);
    // A pack of about a megabyte: kept by a 16 MiB cache, not by a 2 MiB one (a quarter: 512 KiB).
    LargeMirror large(1, [&](MirrorOptions& o) { o.pack_cache_bytes = cache; });
    ServerUnderTest& mirror = *large.mirror;
    for (int i = 0; i < 2; ++i) {
      RawConnection client(mirror.port);
      client.Send(WantRequest("big.git", large.sha, "reader-" + std::to_string(i)));
      while (client.received().find("\r\n0\r\n\r\n") == std::string::npos && !client.closed()) {
        client.Read(1 << 20);
      }
      CHECK(client.received().size() > 1024u * 1024);
    }
    int starts = 0, hits = 0;
    for (const json& e : mirror.Events()) {
      starts += e["type"] == "clone" && e["event"] == "start";
      hits += e["type"] == "clone" && e["event"] == "hit";
    }
    const bool kept = cache == (std::uint64_t{16} << 20);
    CHECK(starts == (kept ? 1 : 2));
    CHECK(hits == (kept ? 1 : 0));
  }
}

TEST_CASE("GitMirror.Transfer.SlowReadersHoldNoSlots") {
  // Four clients stop reading their clones of a large repository at capacity 2, with a grace of
  // a minute: while they hang on, another client's clone goes through (streamed from the spool,
  // their packs hold no slot).
  LargeMirror large(8, [](MirrorOptions& o) { o.http.transfer_grace = 60s; });
  ServerUnderTest& mirror = *large.mirror;
  std::vector<std::unique_ptr<RawConnection>> stalled;
  for (int i = 0; i < 4; ++i) {
    stalled.push_back(std::make_unique<RawConnection>(mirror.port, 4096));
    stalled.back()->Send(WantRequest("big.git", large.sha, "stalled-" + std::to_string(i)));
    REQUIRE(stalled.back()->Read(1024).size() > 0);
  }
  REQUIRE(Eventually([&] { return mirror.Debug()["running"] == 0; }));
  RequireClone(mirror.Url("big.git"), large.work.path / "patient", "patient");
  CHECK(Metric(mirror.port,
               "git_mirror_http_transfers_cut_total{reason=\"write_timeout\","
               "route=\"upload_pack\"}") == -1);
  for (auto& c : stalled) CHECK_FALSE(c->closed());
}

TEST_CASE("GitMirror.Transfer.APackLargerThanTheSpoolBudgetStillGoesThrough") {
  // A budget of 1 MiB against an 8 MB pack: git waits on its pipe for the reader to take some,
  // and the reader's progress gives the room back.
  LargeMirror large(8, [](MirrorOptions& o) { o.spool_bytes = 1024 * 1024; });
  ServerUnderTest& mirror = *large.mirror;
  RawConnection client(mirror.port);
  client.Send(WantRequest("big.git", large.sha, "big-reader"));
  double highest = 0;
  while (client.received().find("\r\n0\r\n\r\n") == std::string::npos && !client.closed()) {
    client.Read(256 * 1024);
    highest = std::max(highest, Metric(mirror.port, "git_mirror_spool_bytes"));
  }
  CHECK(client.received().size() > 8u * 1024 * 1024);
  CHECK(highest <= 1024 * 1024);
  REQUIRE(Eventually([&] { return HasEvent(mirror, "sent", "clone"); }));
  CHECK(Metric(mirror.port, "git_mirror_spool_bytes") == 0);
}

TEST_CASE("GitMirror.Transfer.ASlowButLiveClientIsNotCut") {
  // The client reads 32 KiB every 100 ms (about 320 KiB/s); the floor is 128 KiB/s.
  LargeMirror large(1, [](MirrorOptions& o) {
    o.http.transfer_grace = 500ms;
    o.http.min_transfer_rate = 128 * 1024;
  });
  ServerUnderTest& mirror = *large.mirror;
  RawConnection client(mirror.port, 4096);
  client.Send(WantRequest("big.git", large.sha, "slow"));
  while (client.received().find("\r\n0\r\n\r\n") == std::string::npos && !client.closed()) {
    client.Read(32 * 1024);
    std::this_thread::sleep_for(100ms);
  }
  CHECK_FALSE(client.closed());
  REQUIRE(Eventually([&] { return HasEvent(mirror, "end", "clone", "OK"); }));
  CHECK(Metric(mirror.port,
               "git_mirror_http_transfers_cut_total{reason=\"write_timeout\","
               "route=\"upload_pack\"}") == -1);
}

TEST_CASE("GitMirror.Transfer.AReaderAboveTheFloorIsNotCutWhateverTheKernelBuffers") {
  // A large send buffer (as the kernel grows one for a slow reader): a write of the next piece
  // completes only once much of it has drained, seconds after the client began to take it. The
  // client reads steadily at four times the floor; what it has taken, not when a write
  // completes, is what counts. (Judged by write completions, it was cut once the buffer had
  // filled.)
  LargeMirror large(6, [](MirrorOptions& o) {
    o.http.transfer_grace = 2s;
    o.http.min_transfer_rate = 64 * 1024;
    o.http.send_buffer_bytes = 2 * 1024 * 1024;  // the kernel makes it 4 MiB
  });
  ServerUnderTest& mirror = *large.mirror;
  RawConnection client(mirror.port);
  client.Send(WantRequest("big.git", large.sha, "steady"));
  const auto start = std::chrono::steady_clock::now();
  std::size_t taken = 0;
  while (client.received().find("\r\n0\r\n\r\n") == std::string::npos && !client.closed()) {
    // Paced to 256 KiB/s (four times the floor) from the start, in reads of at most 32 KiB.
    const auto due = start + std::chrono::microseconds(taken * 1'000'000 / (256 * 1024));
    std::this_thread::sleep_until(due);
    taken += client.Read(32 * 1024).size();
  }
  CHECK_FALSE(client.closed());
  CHECK(client.received().size() > 6u * 1024 * 1024);
  REQUIRE(Eventually([&] { return HasEvent(mirror, "end", "clone", "OK"); }));
  CHECK(Metric(mirror.port,
               "git_mirror_http_transfers_cut_total{reason=\"write_timeout\","
               "route=\"upload_pack\"}") == -1);
}

TEST_CASE("GitMirror.FrontDoor.SlowHeadersNeitherBlockOthersNorStayOpen") {
  OneUpstream one(2);
  auto& [work, upstream, repositories] = one;
  ServerUnderTest mirror(repositories, GateConfig{}, 0ms, false, 10,
                         [](MirrorOptions& o) { o.http.header_timeout = 1s; });
  // 200 clients start a request and send its header a byte at a time, slowly.
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 200; ++i) {
    slow.push_back(std::make_unique<RawConnection>(mirror.port));
    slow.back()->Send("GET /tools.git/info/refs?service=git-upload-pack HTTP/1.1\r\nH");
  }
  // Another client is served meanwhile.
  RequireClone(mirror.Url("tools.git"), work.path / "c", "patient");
  // Each slow one is closed at its header deadline, however it trickles.
  for (auto& c : slow) {
    (void)c->TrySend("o");
    CHECK(c->WaitClosed());
  }
  CHECK(Metric(mirror.port,
               "git_mirror_http_connections_dropped_total{reason=\"header_timeout\"}") == 200);
}

TEST_CASE("GitMirror.FrontDoor.OversizedAndMalformedRequestsAreRefused") {
  OneUpstream one(2);
  auto& [work, upstream, repositories] = one;
  ServerUnderTest mirror(repositories, GateConfig{}, 0ms, false, 10, [](MirrorOptions& o) {
    o.http.max_body_bytes = 4096;
    o.http.max_inflated_body_bytes = 64 * 1024;
  });
  auto post = [&](const std::string& body, const std::string& extra_headers = "") {
    return RawHttp(mirror.port,
                   "POST /tools.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                   "Content-Type: application/x-git-upload-pack-request\r\n" +
                       extra_headers + "Content-Length: " + std::to_string(body.size()) +
                       "\r\n\r\n" + body);
  };
  SUBCASE("a header over the limit is 431") {
    const std::string big(20000, 'a');
    CHECK(RawGet(mirror.port, "/tools.git/info/refs?service=git-upload-pack",
                 "X-Big: " + big + "\r\n")
              .status == 431);
  }
  SUBCASE("a body over the limit is 413") { CHECK(post(std::string(8192, '0')).status == 413); }
  SUBCASE("a gzip body that inflates past the limit is 413") {
    const std::string bomb = Gzip(std::string(1 << 20, '0'));  // 1 MiB of zeros: ~1 KiB sent
    CHECK(bomb.size() < 4096);
    CHECK(post(bomb, "Content-Encoding: gzip\r\n").status == 413);
  }
  SUBCASE("a gzip body is inflated, and bad gzip is 400") {
    CHECK(post("not gzip at all", "Content-Encoding: gzip\r\n").status == 400);
    CHECK(post(Gzip("garbage"), "Content-Encoding: gzip\r\n").status == 400);  // not pkt-lines
  }
  SUBCASE("another encoding is 415") {
    CHECK(post("0000", "Content-Encoding: br\r\n").status == 415);
  }
  SUBCASE("a body that is not pkt-lines is 400, before git sees it") {
    for (const std::string body : {"garbage", "00", "zzzz0000", "0003", "00ffwant", "0009want\n"}) {
      CAPTURE(body);
      CHECK(post(body).status == 400);
    }
  }
  SUBCASE("a well-framed request for an unknown object gets git's own error packet") {
    auto r = post(Pkt("want 0123456789012345678901234567890123456789\n") + "0000" + Pkt("done\n"));
    CHECK(r.body.find("ERR") != std::string::npos);
    CHECK(r.body.find("not our ref") != std::string::npos);
    CHECK(r.body.find(mirror.tmp.path.string()) == std::string::npos);
    REQUIRE(Eventually([&] { return HasEvent(mirror, "end", "clone", "INTERNAL"); }));
  }
  SUBCASE("a chunked body with a bad chunk size is 400") {
    CHECK(RawHttp(mirror.port,
                  "POST /tools.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                  "Content-Type: application/x-git-upload-pack-request\r\n"
                  "Transfer-Encoding: chunked\r\n\r\nzz\r\n0000\r\n0\r\n\r\n")
              .status == 400);
  }
  SUBCASE("a request that is not HTTP is 400") {
    CHECK(RawHttp(mirror.port, "HELLO\r\n\r\n").status == 400);
  }
  // The server still serves.
  RequireClone(mirror.Url("tools.git"), work.path / "after", "x");
}

// A POST of the upload-pack service whose body is `length` bytes, sent by the caller.
std::string PostHeader(std::size_t length, const std::string& extra_headers = "") {
  return "POST /tools.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
         "Content-Type: application/x-git-upload-pack-request\r\n" +
         extra_headers + "Content-Length: " + std::to_string(length) + "\r\n\r\n";
}

TEST_CASE("GitMirror.FrontDoor.ABodyIsReadAtTheRateFloor") {
  OneUpstream one(1);
  auto& [work, upstream, repositories] = one;
  ServerUnderTest mirror(repositories, GateConfig{}, 0ms, false, 10, [](MirrorOptions& o) {
    o.http.transfer_grace = 1s;
    o.http.min_transfer_rate = 32 * 1024;
  });
  SUBCASE("a body trickled far below the floor is cut after about the grace") {
    RawConnection trickle(mirror.port);
    trickle.Send(PostHeader(8'000'000));
    // 10 bytes every 100 ms, for as long as the server listens (bounded by WaitClosed's guard).
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    while (!trickle.closed() && std::chrono::steady_clock::now() < give_up) {
      if (!trickle.TrySend("0000000000")) break;
      trickle.Read(4096, 100ms);
    }
    CHECK(trickle.WaitClosed());
    CHECK(Metric(mirror.port,
                 "git_mirror_http_connections_dropped_total{reason=\"body_timeout\"}") == 1);
  }
  SUBCASE("a body sent at twice the floor is read whole and answered") {
    // 128 KiB of flush packets (well-framed), in 8 KiB pieces at 64 KiB/s: four seconds, four
    // times the grace, so one deadline for all of it would not be what lets it through.
    const std::string body(128 * 1024, '0');
    RawConnection steady(mirror.port);
    steady.Send(PostHeader(body.size()));
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t sent = 0; sent < body.size(); sent += 8192) {
      std::this_thread::sleep_until(start + std::chrono::microseconds(sent * 1'000'000 / 65536));
      REQUIRE(steady.TrySend(body.substr(sent, 8192)));
    }
    CHECK(steady.WaitClosed());
    CHECK(steady.received().rfind("HTTP/1.1 200", 0) == 0);
    CHECK(Metric(mirror.port,
                 "git_mirror_http_connections_dropped_total{reason=\"body_timeout\"}") == -1);
  }
}

TEST_CASE("GitMirror.FrontDoor.RequestBodiesStayWithinTheServersBudget") {
  OneUpstream one(1);
  auto& [work, upstream, repositories] = one;
  constexpr std::size_t kInflated = 64 * 1024;
  ServerUnderTest mirror(repositories, GateConfig{}, 0ms, false, 10, [](MirrorOptions& o) {
    o.http.max_body_bytes = 16 * 1024;
    o.http.max_inflated_body_bytes = kInflated;
    o.http.body_memory = 16 * 1024 + kInflated;  // one request at its limits, no more
  });
  const std::string body_metric = "git_mirror_http_request_body_bytes";
  // A gzip body of flush packets that inflates to the limit (a few hundred bytes sent).
  const std::string packed = Gzip(std::string(kInflated, '0'));
  const std::string gzip_request = PostHeader(packed.size(), "Content-Encoding: gzip\r\n") + packed;
  // One client has begun a 16 KiB body: its storage is counted from its header on.
  RawConnection holder(mirror.port);
  holder.Send(PostHeader(16 * 1024));
  holder.Send(std::string(1024, '0'));
  REQUIRE(Eventually([&] { return Metric(mirror.port, body_metric) >= 16 * 1024; }));
  // A body that would inflate past what is left is refused for now, 503 with Retry-After.
  RawResponse refused = RawHttp(mirror.port, gzip_request);
  CHECK(refused.status == 503);
  CHECK(refused.head.find("Retry-After: 5") != std::string::npos);
  CHECK(Metric(mirror.port, "git_mirror_http_connections_dropped_total{reason=\"body_memory\"}") ==
        1);
  // Once the first body is whole and answered, its bytes are given back, and the same request
  // goes through.
  holder.Send(std::string(15 * 1024, '0'));
  CHECK(holder.WaitClosed());
  CHECK(holder.received().rfind("HTTP/1.1 200", 0) == 0);
  INFO("held: ", Metric(mirror.port, body_metric));
  REQUIRE(Eventually([&] { return Metric(mirror.port, body_metric) == 0; }));
  CHECK(RawHttp(mirror.port, gzip_request).status == 200);
  REQUIRE(Eventually([&] { return Metric(mirror.port, body_metric) == 0; }));
  CHECK(Metric(mirror.port, "git_mirror_http_request_body_bytes_limit") == 16 * 1024 + kInflated);
}

TEST_CASE("GitMirror.FrontDoor.AWaitingRequestsBodyIsHeldOnceAndGivenBackWhenGitHasIt") {
  HeldMirror held(
      GateConfig{.capacity = 1, .sync_clone_slots = 1, .background_slots = 1, .repack_slots = 1});
  ServerUnderTest& mirror = *held.mirror;
  std::thread first([&] { (void)Clone(mirror.Url("tools.git"), held.work.path / "a", "a"); });
  REQUIRE(Eventually([&] { return held.Held() == 1; }));
  // A request of 60 KiB of flush packets waits behind the held clone: its body is held, counted
  // once (not a second time for git's input).
  const std::string body(60 * 1024, '0');
  RawConnection waiting(mirror.port);
  waiting.Send(PostHeader(body.size()) + body);
  REQUIRE(Eventually([&] { return mirror.Debug()["pending"] == 1; }));
  const double held_bytes = Metric(mirror.port, "git_mirror_http_request_body_bytes");
  CHECK(held_bytes >= 60 * 1024);
  CHECK(held_bytes < 2 * 60 * 1024);
  held.hold.Release();
  first.join();
  CHECK(waiting.WaitClosed());
  REQUIRE(
      Eventually([&] { return Metric(mirror.port, "git_mirror_http_request_body_bytes") == 0; }));
}

// Not under the sanitizers: UBSan checks a pointer by writing it to a pipe of its own, which a
// process out of descriptors cannot open (it then reports the pointer as bad).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

TEST_CASE("GitMirror.FrontDoor.OutOfDescriptorsTheAcceptLoopPausesInsteadOfSpinning" *
          doctest::skip(kSanitized)) {
  OneUpstream one(1);
  auto& [work, upstream, repositories] = one;
  ServerUnderTest mirror(repositories, GateConfig{});
  // The client's socket is made first; then this process (the server's too) is filled to its
  // descriptor limit, lowered for the purpose; then the client connects (connecting takes no new
  // descriptor): the server's accept fails for want of one.
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(client >= 0);
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
  rlimit lowered = before;
  lowered.rlim_cur = std::min<rlim_t>(before.rlim_cur, 4096);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  std::vector<int> filler;
  for (int fd; (fd = dup(client)) >= 0;) filler.push_back(fd);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(mirror.port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  // A spinning loop fails its accept hundreds of thousands of times a second; this one waits
  // 100 ms between tries. Watched for about a second (the bound: at most 30 tries).
  REQUIRE(Eventually([&] { return mirror.server->http_metrics().accept_failures() >= 1; }));
  std::this_thread::sleep_for(1s);
  const std::uint64_t failures = mirror.server->http_metrics().accept_failures();
  for (int fd : filler) close(fd);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &before) == 0);
  CHECK(failures >= 2);
  CHECK(failures <= 30);
  // With descriptors back, the waiting connection is accepted and answered.
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  REQUIRE(send(client, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  pollfd p{client, POLLIN, 0};
  REQUIRE(poll(&p, 1, 20000) == 1);
  char head[12];
  CHECK(recv(client, head, sizeof head, MSG_WAITALL) == sizeof head);
  CHECK(std::string(head, sizeof head) == "HTTP/1.1 200");
  close(client);
  CHECK(Metric(mirror.port, "git_mirror_http_accept_failures_total") == failures);
}

TEST_CASE("GitMirror.FrontDoor.TheConnectionLimitIsKeptBelowTheDescriptorLimit") {
  CHECK(ConnectionLimitWithin(4096, 1024, 96, 2).value() == 464);
  CHECK(ConnectionLimitWithin(100, 1024, 96, 2).value() == 100);
  CHECK(ConnectionLimitWithin(100, 98, 96, 2).value() == 1);
  const auto none = ConnectionLimitWithin(100, 97, 96, 2);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("open-file limit (97)") != std::string_view::npos);
}

TEST_CASE("GitMirror.FrontDoor.DebugIsServedOnlyToAllowedNetworksAndHidesClientsUnlessAsked") {
  OneUpstream one(1);
  auto& [work, upstream, repositories] = one;
  auto debug_as = [](const ServerUnderTest& mirror, const std::string& client) {
    return RawGet(mirror.port, "/debug/scheduler",
                  std::string(kClientHeader) + ": " + client + "\r\n");
  };
  auto list_refs_as = [](const ServerUnderTest& mirror, const std::string& client) {
    REQUIRE(RawGet(mirror.port, "/tools.git/info/refs?service=git-upload-pack",
                   std::string(kClientHeader) + ": " + client + "\r\n")
                .status == 200);
  };
  SUBCASE("by default: loopback only, clients as pseudonyms") {
    ServerUnderTest mirror(repositories, GateConfig{}, 0ms, false, 10,
                           [](MirrorOptions& o) { o.debug_show_clients = false; });
    list_refs_as(mirror, "192.0.2.7");
    const RawResponse outsider = debug_as(mirror, "203.0.113.5");
    CHECK(outsider.status == 403);
    CHECK(outsider.body.find("running") == std::string::npos);
    CHECK(debug_as(mirror, "not-an-address").status == 403);
    CHECK(RawGet(mirror.port, "/debug/other", std::string(kClientHeader) + ": 203.0.113.5\r\n")
              .status == 403);
    const RawResponse local = debug_as(mirror, "127.0.0.1");
    REQUIRE(local.status == 200);
    CHECK(local.body.find("192.0.2.7") == std::string::npos);
    const json state = json::parse(local.body);
    REQUIRE(state["heaviest_keys"].size() == 1);
    const std::string pseudonym = state["heaviest_keys"][0]["key"];
    CHECK(pseudonym.rfind("client-", 0) == 0);
    // The same client keeps its pseudonym while the server runs.
    CHECK(json::parse(debug_as(mirror, "::1").body)["heaviest_keys"][0]["key"] == pseudonym);
  }
  SUBCASE("allowed networks and names on request") {
    ServerUnderTest mirror(repositories, GateConfig{}, 0ms, false, 10, [](MirrorOptions& o) {
      o.debug_allow = {"203.0.113.0/24"};
      o.debug_show_clients = true;
    });
    list_refs_as(mirror, "192.0.2.7");
    CHECK(debug_as(mirror, "127.0.0.1").status == 403);
    const RawResponse allowed = debug_as(mirror, "203.0.113.5");
    REQUIRE(allowed.status == 200);
    CHECK(json::parse(allowed.body)["heaviest_keys"][0]["key"] == "192.0.2.7");
  }
  SUBCASE("a network that does not parse is refused at the start") {
    MirrorOptions options;
    options.mirror_dir = (work.path / "m").string();
    options.debug_allow = {"10.0.0.0/33"};
    const fairgate::Status s = ValidateMirrorOptions(options);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(s.message() == "debug-allow network '10.0.0.0/33' is not an address or CIDR network");
  }
}

TEST_CASE("GitMirror.FrontDoor.IdleConnectionsAreClosed") {
  OneUpstream one(1);
  auto& [work, upstream, repositories] = one;
  ServerUnderTest mirror(repositories, GateConfig{}, 0ms, false, 10,
                         [](MirrorOptions& o) { o.http.idle_timeout = 300ms; });
  SUBCASE("a connection that never sends a request") {
    RawConnection silent(mirror.port);
    CHECK(silent.WaitClosed());
  }
  SUBCASE("a kept-alive connection after its response") {
    RawConnection kept(mirror.port);
    kept.Send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(kept.Read(4096).rfind("HTTP/1.1 200", 0) == 0);
    CHECK(kept.WaitClosed());
  }
  CHECK(Metric(mirror.port, "git_mirror_http_connections_dropped_total{reason=\"idle_timeout\"}") ==
        1);
}

TEST_CASE("GitMirror.FrontDoor.ConnectionsPerClientAreLimitedButNotForTrustedProxies") {
  OneUpstream one(1);
  auto& [work, upstream, repositories] = one;
  for (const bool trusted : {false, true}) {
    CAPTURE(trusted);
    ServerUnderTest mirror(repositories, GateConfig{}, 0ms, false, 10, [&](MirrorOptions& o) {
      o.http.max_connections_per_client = 2;
      o.http.retry_after_seconds = 7;
      if (!trusted) o.http.trusted_proxies.clear();
    });
    // Accepted in order: the third is judged after the first two are open.
    auto first = std::make_unique<RawConnection>(mirror.port);
    RawConnection second(mirror.port);
    RawConnection third(mirror.port);
    if (trusted) {
      third.Send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
      CHECK(third.Read(4096).rfind("HTTP/1.1 200", 0) == 0);
      continue;
    }
    const std::string refused = third.Read(4096);
    CHECK(refused.rfind("HTTP/1.1 429", 0) == 0);
    CHECK(refused.find("Retry-After: 7\r\n") != std::string::npos);  // as configured
    CHECK(third.WaitClosed());
    first.reset();  // a slot for this client again
    REQUIRE(Eventually([&] {
      RawConnection again(mirror.port);
      again.Send("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      return again.Read(4096).rfind("HTTP/1.1 200", 0) == 0;
    }));
  }
}

// Behind a proxy every client comes from the proxy's address: a trusted proxy is never limited as
// one client, whichever form the listener reports its address in (IPv4; IPv4-mapped IPv6 on a
// dual-stack listener, trusted in either form; IPv6), and each request is the client its header
// names. The same connections from an address that is not trusted are limited (the control).
TEST_CASE("GitMirror.FrontDoor.ATrustedProxyIsNeverLimitedAsAClientInAnyAddressFamily") {
  OneUpstream one(1);
  struct Family {
    const char* name;
    const char* listen;
    const char* connect;
    const char* trusted;
  };
  for (const Family& family :
       {Family{"IPv4", "127.0.0.1", "127.0.0.1", "127.0.0.1"},
        Family{"IPv4-mapped", "::", "127.0.0.1", "127.0.0.1"},
        Family{"IPv4-mapped, trusted so", "::", "127.0.0.1", "::ffff:127.0.0.1"},
        Family{"IPv6", "::1", "::1", "::1"}}) {
    for (const bool trusted : {true, false}) {
      CAPTURE(family.name);
      CAPTURE(trusted);
      ServerUnderTest mirror(
          one.repositories, GateConfig{}, 0ms, false, 10,
          [&](MirrorOptions& o) {
            o.http.max_connections_per_client = 2;
            o.http.trusted_proxies = {trusted ? family.trusted : "192.0.2.1"};
          },
          family.listen);
      // Three times the per-client limit, all open at once before any is answered.
      std::vector<std::unique_ptr<RawConnection>> open;
      for (int i = 0; i < 6; ++i) {
        open.push_back(std::make_unique<RawConnection>(mirror.port, std::string(family.connect)));
      }
      int served = 0, refused = 0;
      for (int i = 0; i < 6; ++i) {
        if (!open[i]->TrySend(
                "GET /tools.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: x\r\n" +
                std::string(kClientHeader) + ": client" + std::to_string(i) + "\r\n\r\n")) {
          ++refused;  // already answered 429 and closed
          continue;
        }
        const std::string answer = open[i]->Read(4096);
        if (answer.rfind("HTTP/1.1 200", 0) == 0) ++served;
        if (answer.rfind("HTTP/1.1 429", 0) == 0) ++refused;
      }
      if (trusted) {
        CHECK(served == 6);
        // Every request was the client its header named, not the proxy.
        std::set<std::string> clients;
        for (const json& e : mirror.Events()) {
          if (e.contains("client")) clients.insert(e["client"].get<std::string>());
        }
        for (int i = 0; i < 6; ++i) CHECK(clients.count("client" + std::to_string(i)) == 1);
        CHECK(clients.count(family.connect) == 0);
      } else {
        CHECK(served == 2);
        CHECK(refused == 4);
      }
    }
  }
}

// The head of a response and what follows it, once the server has closed the connection.
std::pair<std::string, std::string> HeadAndBodyUntilClosed(RawConnection& connection) {
  REQUIRE(connection.WaitClosed());
  const std::string& all = connection.received();
  const std::size_t end = all.find("\r\n\r\n");
  REQUIRE(end != std::string::npos);
  return {all.substr(0, end + 2), all.substr(end + 4)};
}

TEST_CASE("GitMirror.FrontDoor.AHeadRequestIsAnsweredWithoutABody") {
  OneUpstream one(1);
  ServerUnderTest mirror(one.repositories, GateConfig{});
  RawConnection connection(mirror.port);
  connection.Send(
      "HEAD /tools.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: x\r\n"
      "Connection: close\r\n\r\n");
  const auto [head, body] = HeadAndBodyUntilClosed(connection);
  CHECK(head.rfind("HTTP/1.1 405", 0) == 0);
  CHECK(head.find("Content-Length: ") != std::string::npos);  // what a GET would be sent
  CHECK(body.empty());
}

TEST_CASE("GitMirror.FrontDoor.AnHttp10ClientGetsItsStreamWithoutChunks") {
  OneUpstream one(1);
  ServerUnderTest mirror(one.repositories, GateConfig{});
  RawConnection connection(mirror.port);
  connection.Send("GET /tools.git/info/refs?service=git-upload-pack HTTP/1.0\r\nHost: x\r\n\r\n");
  const auto [head, body] = HeadAndBodyUntilClosed(connection);  // the end of the stream
  CHECK(head.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(head.find("chunked") == std::string::npos);
  // The ref advertisement itself, first byte on: no chunk size in front of it.
  CHECK(body.rfind("001e# service=git-upload-pack\n0000", 0) == 0);
  CHECK(body.find("refs/heads/main") != std::string::npos);
}

TEST_CASE("GitMirror.FrontDoor.PipelinedRequestsAreAnsweredInOrder") {
  OneUpstream one(1);
  ServerUnderTest mirror(one.repositories, GateConfig{});
  RawConnection connection(mirror.port);
  // Both requests in one write: the second is in the server's buffer before the first is
  // answered.
  connection.Send(
      "GET /tools.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  REQUIRE(connection.WaitClosed());
  const std::string& all = connection.received();
  const std::size_t first = all.find("HTTP/1.1 200");
  const std::size_t second = all.find("HTTP/1.1 200", first + 1);
  REQUIRE(second != std::string::npos);
  CHECK(all.find("# service=git-upload-pack") < second);      // the ref listing first
  CHECK(all.find("fairgate_", second) != std::string::npos);  // then the metrics
}

TEST_CASE("GitMirror.FrontDoor.TheListenBacklogIsTheConfiguredOne") {
  OneUpstream one(1);
  auto& [work, upstream, repositories] = one;
  ServerUnderTest mirror(repositories, GateConfig{}, 0ms, false, 10,
                         [](MirrorOptions& o) { o.http.listen_backlog = 37; });
  // For a listening socket, ss shows the backlog as its Send-Q.
  auto ss = RunProcess({"ss", "-Hltn", "sport = :" + std::to_string(mirror.port)}, "",
                       fairgate::Context::Background());
  REQUIRE(ss.ok());
  REQUIRE(ss->exit_code == 0);
  INFO(ss->out);
  CHECK(ss->out.find(" 37 ") != std::string::npos);
}

TEST_CASE("GitMirror.FrontDoor.TheClientHeaderIsBelievedOnlyFromTrustedProxies") {
  OneUpstream one(1);
  auto& [work, upstream, repositories] = one;
  auto client_of = [&](std::vector<std::string> trusted, const std::string& header,
                       const std::string& value) {
    ServerUnderTest mirror(repositories, GateConfig{}, 0ms, false, 10, [&](MirrorOptions& o) {
      o.http.client_header = header;
      o.http.trusted_proxies = trusted;
    });
    REQUIRE(RawGet(mirror.port, "/tools.git/info/refs?service=git-upload-pack",
                   header + ": " + value + "\r\n")
                .status == 200);
    for (const json& e : mirror.Events()) {
      if (e["type"] == "refs" && e["event"] == "start") return e["client"].get<std::string>();
    }
    return std::string("none");
  };
  CHECK(client_of({}, "X-Client", "mallory") == "127.0.0.1");
  CHECK(client_of({"10.0.0.0/8"}, "X-Client", "mallory") == "127.0.0.1");
  CHECK(client_of({"127.0.0.1"}, "X-Client", "alice") == "alice");
  CHECK(client_of({"127.0.0.0/8"}, "X-Forwarded-For", "6.6.6.6, 192.0.2.7") == "192.0.2.7");
  // A proxy that appends a line of its own (HAProxy's `option forwardfor`) behind the one the
  // client wrote: the client's line is not believed.
  CHECK(client_of({"127.0.0.0/8"}, "X-Forwarded-For", "6.6.6.6\r\nX-Forwarded-For: 192.0.2.7") ==
        "192.0.2.7");
  // Behind two trusted proxies: the address the outer one saw.
  CHECK(client_of({"127.0.0.0/8", "10.0.0.0/8"}, "X-Forwarded-For",
                  "6.6.6.6, 192.0.2.7\r\nX-Forwarded-For: 10.1.2.3") == "192.0.2.7");
  // The ref listing was admitted under that client, as a job of its own type.
  ServerUnderTest mirror(repositories, GateConfig{});
  REQUIRE(RawGet(mirror.port, "/tools.git/info/refs?service=git-upload-pack",
                 std::string(kClientHeader) + ": lister\r\n")
              .status == 200);
  CHECK(mirror.Debug()["heaviest_keys"][0]["key"] == "lister");
  CHECK(Metric(mirror.port,
               "fairgate_jobs_completed_total{status=\"ok\",tier=\"8\",type=\"refs\"}") == 1);
}

TEST_CASE("GitMirror.FrontDoor.TheGroupHeaderIsBelievedOnlyFromTrustedProxies") {
  OneUpstream one(1);
  auto& [work, upstream, repositories] = one;
  // The key the scheduler charged for a ref listing sent with `headers` from 127.0.0.1.
  auto key_of = [&](std::vector<std::string> trusted, const std::string& headers) {
    GateConfig config;
    config.client_group = "header:X-Tenant";
    ServerUnderTest mirror(repositories, config, 0ms, false, 10, [&](MirrorOptions& o) {
      o.http.client_header = "X-Client";
      o.http.trusted_proxies = trusted;
      o.http.group_header = "X-Tenant";
    });
    const int status =
        RawGet(mirror.port, "/tools.git/info/refs?service=git-upload-pack", headers).status;
    if (status != 200) return "HTTP " + std::to_string(status);
    return mirror.Debug()["heaviest_keys"][0]["key"].get<std::string>();
  };
  CHECK(key_of({"127.0.0.1"}, "X-Client: alice\r\nX-Tenant: acme\r\n") == "acme,alice");
  // The proxy's own line, the last, names the group; a client's line before it is not believed.
  CHECK(key_of({"127.0.0.1"}, "X-Client: alice\r\nX-Tenant: evil\r\nX-Tenant: acme\r\n") ==
        "acme,alice");
  CHECK(key_of({"127.0.0.1"}, "X-Client: alice\r\n") == "alice");  // no group named
  CHECK(key_of({"10.0.0.0/8"}, "X-Client: alice\r\nX-Tenant: acme\r\n") == "127.0.0.1");
  CHECK(key_of({"127.0.0.1"}, "X-Client: alice\r\nX-Tenant: " + std::string(300, 'a') + "\r\n") ==
        "HTTP 400");
}

TEST_CASE("GitMirror.Hygiene.GitChildrenInheritNoSocketAndNoLogFile") {
  OneUpstream one(2);
  auto& [work, upstream, repositories] = one;
  // A pack-objects hook that records the descriptors it was started with.
  const fs::path fds = work.path / "fds.txt";
  const fs::path hook = work.path / "hook.sh";
  std::ofstream(hook) << "#!/bin/sh\nfor f in /proc/$$/fd/*; do readlink \"$f\"; done > " << fds
                      << "\nexec \"$@\"\n";
  fs::permissions(hook, fs::perms::owner_all);
  setenv("GIT_CONFIG_COUNT", "1", 1);
  setenv("GIT_CONFIG_KEY_0", "uploadpack.packObjectsHook", 1);
  setenv("GIT_CONFIG_VALUE_0", hook.string().c_str(), 1);
  {
    ServerUnderTest mirror(repositories, GateConfig{});
    // Other connections are open while the clone runs: none of them may reach git.
    RawConnection idle(mirror.port);
    auto r = Clone(mirror.Url("tools.git"), work.path / "c", "x");
    REQUIRE(r.ok());
    CHECK(r->exit_code == 0);
    std::ifstream in(fds);
    const std::string seen((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(seen);
    CHECK_FALSE(seen.empty());
    CHECK(seen.find("socket:") == std::string::npos);
    CHECK(seen.find("events.jsonl") == std::string::npos);
  }
  unsetenv("GIT_CONFIG_COUNT");
  unsetenv("GIT_CONFIG_KEY_0");
  unsetenv("GIT_CONFIG_VALUE_0");
}

TEST_CASE("GitMirror.Hygiene.LeftoversOfAnInterruptedRunAreRemovedAtStart") {
  OneUpstream one(2);
  auto& [work, upstream, repositories] = one;
  std::vector<fs::path> leftovers;
  auto prepare = [&](MirrorOptions& o) {
    const fs::path mirror = fs::path(o.mirror_dir) / "tools.git";
    Git({"clone", "--quiet", "--mirror", upstream.string(), mirror.string()});
    leftovers = {mirror / "objects/pack/tmp_pack_Xa81",
                 mirror / "objects/pack/.tmp-1234-pack",
                 mirror / "packed-refs.lock",
                 mirror / "refs/heads/main.lock",
                 mirror / "config.lock",
                 fs::path(o.mirror_dir) / ".incoming/Qx81/mirror.git/HEAD"};
    for (const fs::path& p : leftovers) {
      fs::create_directories(p.parent_path());
      std::ofstream(p) << "half-written\n";
    }
    fs::create_directories(mirror / "objects/incoming-abc123/pack");
  };
  ServerUnderTest mirror(repositories, GateConfig{}, 0ms, false, 10, prepare);
  for (const fs::path& p : leftovers) {
    CAPTURE(p.string());
    CHECK_FALSE(fs::exists(p));
  }
  CHECK_FALSE(fs::exists(mirror.tmp.path / "mirrors/tools.git/objects/incoming-abc123"));
  CHECK(fs::exists(mirror.tmp.path / "mirrors/tools.git/HEAD"));  // the mirror itself stays
  RequireClone(mirror.Url("tools.git"), work.path / "c", "x");
  RequireSameContent(upstream, work.path / "c");
}

TEST_CASE("GitMirror.Shutdown.ARunningFetchFinishesWithinTheGraceAndIsKilledAfterIt") {
  for (const bool release : {true, false}) {
    CAPTURE(release);
    TempDir work;
    const fs::path upstream = MakeUpstream(work.path, "tools.git", 2);
    RepositorySet repositories;
    REQUIRE(repositories.AddFlag("tools.git=" + upstream.string()).ok());
    auto mirror = std::make_unique<ServerUnderTest>(
        repositories, GateConfig{}, 50ms, false, 1000,
        [&](MirrorOptions& o) { o.shutdown_grace = release ? 60s : 300ms; });
    REQUIRE(Clone(mirror->Url("tools.git"), work.path / "c", "x")->exit_code == 0);
    // From now on the mirror's fetches run an upload-pack that waits for a file to exist (git
    // strips config from the environment of a local upload-pack, so this goes in the mirror).
    const fs::path held = work.path / "held", go = work.path / "go";
    const fs::path script = work.path / "slow-upload-pack.sh";
    std::ofstream(script) << "#!/bin/sh\ntouch " << held << "\nwhile [ ! -e " << go
                          << " ]; do sleep 0.02; done\nexec git-upload-pack \"$@\"\n";
    fs::permissions(script, fs::perms::owner_all);
    Git({"--git-dir", (mirror->tmp.path / "mirrors/tools.git").string(), "config",
         "remote.origin.uploadpack", script.string()});
    std::ofstream(upstream / "new.txt") << "new\n";
    Git({"-C", upstream.string(), "add", "."});
    Git({"-C", upstream.string(), "commit", "--quiet", "-m", "new"});
    REQUIRE(Eventually([&] { return fs::exists(held); }));  // a fetch is running, held
    std::atomic<bool> stopped{false};
    std::thread stopper([&] {
      mirror->server->Stop();
      stopped = true;
    });
    if (release) {
      // Stop waits for the held fetch; once it may go on, it completes and Stop returns.
      std::this_thread::sleep_for(300ms);  // a chance for a Stop that did not wait to return
      CHECK_FALSE(stopped.load());
      std::ofstream(go) << "go\n";
    }
    stopper.join();
    std::string last_fetch;  // the status of the last fetch to end: the held one
    for (const json& e : mirror->Events()) {
      if (e["event"] == "end" && e["type"] == "fetch") last_fetch = e["status"];
    }
    if (release) {
      CHECK(last_fetch == "OK");
      CHECK(Git({"--git-dir", (mirror->tmp.path / "mirrors/tools.git").string(), "rev-parse",
                 "main"}) == Git({"-C", upstream.string(), "rev-parse", "main"}));
    } else {
      CHECK(last_fetch.rfind("CANCELLED", 0) == 0);  // killed at the end of the grace
    }
    mirror.reset();
  }
}

}  // namespace front_door_test
}  // namespace
}  // namespace git_mirror
