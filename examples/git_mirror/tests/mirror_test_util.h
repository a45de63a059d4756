// Helpers for the git mirror's tests: temporary directories, upstream repositories made with
// real git, a MirrorServer on an ephemeral loopback port, raw HTTP, and a hook that holds packs.
// Nothing here waits for a duration to pass as an assertion: waits are for conditions, bounded.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_TESTS_MIRROR_TEST_UTIL_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_TESTS_MIRROR_TEST_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "mirror_server.h"
#include "nlohmann/json.hpp"
#include "subprocess.h"

namespace git_mirror::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

inline constexpr const char* kClientHeader = "X-Client";

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "fairgate-mirror-test-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// Runs git and requires it to succeed; returns its output.
inline std::string Git(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"git"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto result = RunProcess(argv, "", fairgate::Context::Background(),
                           {"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org",
                            "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org"});
  REQUIRE(result.ok());
  INFO("git ", args.front(), ": ", result->err);
  REQUIRE(result->exit_code == 0);
  return result->out;
}

// An upstream repository with `commits` commits on main.
inline fs::path MakeUpstream(const fs::path& dir, const std::string& name, int commits) {
  const fs::path repo = dir / name;
  Git({"init", "--quiet", "--initial-branch=main", repo.string()});
  for (int i = 0; i < commits; ++i) {
    std::ofstream(repo / ("file" + std::to_string(i % 3) + ".txt"), std::ios::app)
        << name << " line " << i << "\n";
    Git({"-C", repo.string(), "add", "."});
    Git({"-C", repo.string(), "commit", "--quiet", "-m", "commit " + std::to_string(i)});
  }
  return repo;
}

// Waits for `condition`, at most 60 s (a bound for a stuck test, not a timing assertion).
inline bool Eventually(const std::function<bool()>& condition) {
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

inline std::vector<json> ReadEvents(const fs::path& log) {
  std::vector<json> events;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) events.push_back(json::parse(line));
  return events;
}

// A pack-objects hook that holds every pack until `release` exists, leaving a `held.*` file per
// held clone: it keeps a clone's slot busy for as long as a test needs.
struct PackHold {
  fs::path dir;
  fs::path script;
  explicit PackHold(const fs::path& d) : dir(d / "hold") {
    fs::create_directories(dir);
    script = dir / "hook.sh";
    std::ofstream(script) << "#!/bin/sh\n"
                          << "mktemp " << dir.string() << "/held.XXXXXX >/dev/null\n"
                          << "while [ ! -e " << dir.string() << "/release ]; do sleep 0.02; done\n"
                          << "exec \"$@\"\n";
    fs::permissions(script, fs::perms::owner_all);
    // Command-line scope (protected): upload-pack honours the hook only from there or above.
    setenv("GIT_CONFIG_COUNT", "1", 1);
    setenv("GIT_CONFIG_KEY_0", "uploadpack.packObjectsHook", 1);
    setenv("GIT_CONFIG_VALUE_0", script.string().c_str(), 1);
  }
  ~PackHold() {
    Release();
    unsetenv("GIT_CONFIG_COUNT");
    unsetenv("GIT_CONFIG_KEY_0");
    unsetenv("GIT_CONFIG_VALUE_0");
  }
  int Held() const {
    int n = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      n += entry.path().filename().string().starts_with("held.");
    }
    return n;
  }
  void Release() const { std::ofstream(dir / "release") << "go\n"; }
};

// Makes `hold` hold the mirror's own clones and fetches from a path or file:// upstream too, for
// as long as it lives: git hides command-line config from a local transport's upload-pack, so
// the hook comes from a global config file (GIT_CONFIG_GLOBAL) instead.
struct GlobalPackHold {
  GlobalPackHold(const PackHold& hold, const fs::path& dir) {
    const fs::path config = dir / "global.gitconfig";
    std::ofstream(config) << "[uploadpack]\n\tpackObjectsHook = " << hold.script.string() << "\n";
    setenv("GIT_CONFIG_GLOBAL", config.c_str(), 1);
  }
  ~GlobalPackHold() { unsetenv("GIT_CONFIG_GLOBAL"); }
  GlobalPackHold(const GlobalPackHold&) = delete;
  GlobalPackHold& operator=(const GlobalPackHold&) = delete;
};

// `text` as one gzip member, made with zlib.
inline std::string Gzip(const std::string& text) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A response read whole from a raw connection.
struct RawResponse {
  int status = 0;
  std::string head;  // the status line and headers
  std::string body;  // as sent (chunked framing included, if any)
};

// Sends `request` as is (no client library that could normalise the path) and reads until the
// server closes the connection.
inline RawResponse RawHttp(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof buffer, 0)) > 0;) response.append(buffer, n);
  close(fd);
  REQUIRE(response.size() > 12);
  RawResponse r;
  r.status = std::stoi(response.substr(9, 3));
  const std::size_t body = response.find("\r\n\r\n");
  r.head = response.substr(0, body);
  if (body != std::string::npos) r.body = response.substr(body + 4);
  return r;
}

inline RawResponse RawGet(int port, const std::string& target, const std::string& headers = "") {
  return RawHttp(port, "GET " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" +
                           headers + "\r\n");
}

// The value of one sample line of the Prometheus text, or -1 if absent.
inline double Metric(int port, const std::string& sample) {
  const std::string body = "\n" + RawGet(port, "/metrics").body;
  const std::size_t at = body.find("\n" + sample + " ");
  if (at == std::string::npos) return -1;
  return std::stod(body.substr(at + sample.size() + 2));
}

struct ServerUnderTest {
  TempDir tmp;
  fs::path event_log = tmp.path / "events.jsonl";
  std::unique_ptr<MirrorServer> server;
  int port = 0;
  std::thread serving;

  // `configure` may change the options (and prepare the mirror directory) before the start;
  // `host` is the address it listens on (Url names 127.0.0.1 whatever it is).
  ServerUnderTest(const RepositorySet& repositories, const GateConfig& gate_config,
                  std::chrono::milliseconds fetch_interval = 0ms, bool fifo = false,
                  int repack_after = 10,
                  const std::function<void(MirrorOptions&)>& configure = nullptr,
                  const std::string& host = "127.0.0.1") {
    MirrorOptions options;
    options.mirror_dir = (tmp.path / "mirrors").string();
    options.http.client_header = kClientHeader;
    options.http.trusted_proxies = {"127.0.0.1"};
    options.fetch_interval = fetch_interval;
    options.repack_after = repack_after;
    options.event_log = event_log.string();
    options.debug_show_clients = true;  // tests read the clients' names there
    // No cache of finished packs unless a test asks: most tests count git's runs.
    options.pack_cache_bytes = 0;
    if (configure) configure(options);
    auto gate = fifo ? MakeFifoGate(gate_config) : MakeFairgateGate(gate_config);
    REQUIRE(gate.ok());
    auto created = MirrorServer::Create(repositories, options, std::move(*gate));
    REQUIRE(created.ok());
    server = std::move(*created);
    auto bound = server->Bind(host, 0);
    REQUIRE(bound.ok());
    port = *bound;
    serving = std::thread([this] { server->Serve(); });
  }
  ~ServerUnderTest() {
    server->Stop();
    serving.join();
  }
  std::string Url(const std::string& repository) const {
    return "http://127.0.0.1:" + std::to_string(port) + "/" + repository;
  }
  std::vector<json> Events() const { return ReadEvents(event_log); }
  json Debug() const {
    RawResponse response = RawGet(port, "/debug/scheduler");
    REQUIRE(response.status == 200);
    return json::parse(response.body);
  }
};

// `options` go to git clone (a request that differs from a plain clone's, e.g. "--depth=1", is
// not one that shares a plain clone's pack).
inline fairgate::StatusOr<ProcessResult> Clone(
    const std::string& url, const fs::path& target, const std::string& client,
    const fairgate::Context& ctx = fairgate::Context::Background(),
    const std::vector<std::string>& options = {}) {
  std::vector<std::string> argv = {"git", "-c",
                                   std::string("http.extraHeader=") + kClientHeader + ": " + client,
                                   "clone", "--quiet"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back(url);
  argv.push_back(target.string());
  return RunProcess(argv, "", ctx, {"GIT_TERMINAL_PROMPT=0"});
}

// A work directory with one upstream repository, and the set that serves it under its name.
struct OneUpstream {
  TempDir work;
  fs::path upstream;
  RepositorySet repositories;
  explicit OneUpstream(int commits, const std::string& name = "tools.git")
      : upstream(MakeUpstream(work.path, name, commits)) {
    REQUIRE(repositories.AddFlag(name + "=" + upstream.string()).ok());
  }
};

// Clones `url` as `client` into `target` and requires git to succeed.
inline void RequireClone(const std::string& url, const fs::path& target,
                         const std::string& client) {
  auto r = Clone(url, target, client);
  REQUIRE(r.ok());
  INFO(r->err);
  CHECK(r->exit_code == 0);
}

inline void RequireSameContent(const fs::path& upstream, const fs::path& clone) {
  CHECK(Git({"-C", clone.string(), "rev-parse", "HEAD"}) ==
        Git({"-C", upstream.string(), "rev-parse", "HEAD"}));
  CHECK(Git({"-C", clone.string(), "ls-tree", "-r", "HEAD"}) ==
        Git({"-C", upstream.string(), "ls-tree", "-r", "HEAD"}));
  CHECK(Git({"-C", clone.string(), "status", "--porcelain"}).empty());
}

// A mirror of one upstream, `tools.git`, whose mirror exists already (one clone went through),
// and whose packs are held from then on until `hold.Release()`.
struct HeldMirror {
  TempDir work;
  fs::path upstream = MakeUpstream(work.path, "tools.git", 3);
  PackHold hold{work.path};
  std::unique_ptr<ServerUnderTest> mirror;
  int warm_holds = 0;

  explicit HeldMirror(const GateConfig& config) {
    RepositorySet repositories;
    REQUIRE(repositories.AddFlag("tools.git=" + upstream.string()).ok());
    hold.Release();  // the first clone makes the mirror and goes through
    mirror = std::make_unique<ServerUnderTest>(repositories, config);
    REQUIRE(Clone(mirror->Url("tools.git"), work.path / "warm", "warm")->exit_code == 0);
    fs::remove(hold.dir / "release");
    warm_holds = hold.Held();
  }
  // Packs held since the warm-up: clones that hold a slot now.
  int Held() const { return hold.Held() - warm_holds; }
};

// A pack request as git makes it, for `client`; `agent` names it, so that no two are identical
// (identical requests would share one pack, or be served from the cache).
inline RawResponse RawPackRequest(int port, const std::string& head, const std::string& client,
                                  const std::string& agent) {
  auto pkt = [](const std::string& line) {
    char length[5];
    std::snprintf(length, sizeof length, "%04zx", line.size() + 4);
    return length + line;
  };
  const std::string body = pkt("want " + head.substr(0, 40) + " ofs-delta agent=" + agent + "\n") +
                           "0000" + pkt("done\n");
  return RawHttp(port,
                 "POST /tools.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
                     std::string(kClientHeader) + ": " + client +
                     "\r\nContent-Type: application/x-git-upload-pack-request\r\n"
                     "Content-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body);
}

}  // namespace git_mirror::testing

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_TESTS_MIRROR_TEST_UTIL_H_
