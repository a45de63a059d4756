// fairgate-git-mirror-load: the noisy-neighbour experiment against a running mirror.
//
// Client A keeps --heavy-concurrency clones of the heavy repository in flight for --duration
// seconds. Its clones speak git's smart-HTTP protocol themselves (the ref advertisement, then one
// want of the advertised HEAD) and read each pack to its end without unpacking it, all on one
// event-loop thread: a thousand clones in flight cost the load generator almost no CPU, so that it
// does not starve the server (run the two on different cores with taskset, as compare.sh does).
// With --heavy-read-rate, each of A's clones reads its pack at that many bytes a second (a slow
// but live reader); with --heavy-distinct, each clone's request names its own agent, so that no
// two are identical and none is shared or served from the mirror's cache. With --heavy-sources N,
// A's clones come from N addresses of 127.0.5.0/24 in turn (127.0.5.1 to 127.0.5.N) and send no
// client header: the server names each by its address, one client spread over a /24.
// With --heavy-rate R, A is an open loop instead: it starts R clones a second, each on its own,
// however many are in flight, and a refused or shed clone is not tried again (its client gone);
// A's started clones are printed too (a_started).
// Client B, after --warmup seconds, clones the light repository with real `git`, one clone at a
// time, starting one every --light-interval seconds (or when the previous one ends, if later),
// until the duration is over. With --alone, A does nothing: B's time on an idle server.
//
// Printed at the end, one `key: value` line each: B's clone times (count, median, p90, worst, and
// how many were still running when the time was up: such a clone counts in the percentiles with
// the time it had taken so far, a lower bound), A's completed clones and bytes, A's refusals
// (429), the clones the server shed (503, with --shed-target) and errors, and with --server-pid the
// server's peak resident memory and peak thread count. Everything stays on loopback: the URL must
// name 127.0.0.0/8 or ::1.
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <thread>
#include <utility>  // before Asio's awaitable.hpp, which needs std::exchange
#include <vector>

#include "CLI/CLI.hpp"
#include "boost/asio/awaitable.hpp"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/connect.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http.hpp"
#include "subprocess.h"

namespace {

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// How A's clones read and ask.
struct HeavyReading {
  double bytes_per_second = 0;  // 0: as fast as it comes
  bool distinct = false;        // each request its own (an agent capability naming the clone)
};

struct HeavyStats {
  // refused: 429 (a limit of A's own); shed: 503 (the server shed A's work, --shed-target).
  std::atomic<long> completed{0}, refused{0}, shed{0}, errors{0};
  std::atomic<long long> bytes{0};
};

std::string Pkt(const std::string& payload) {
  char length[5];
  std::snprintf(length, sizeof length, "%04zx", payload.size() + 4);
  return length + payload;
}

// The object id of the first ref in a protocol v0 advertisement (after the service line).
std::string FirstAdvertisedId(const std::string& body) {
  std::size_t at = 0;
  bool past_service = false;
  while (at + 4 <= body.size()) {
    const int length = std::stoi(body.substr(at, 4), nullptr, 16);
    if (length == 0) {
      at += 4;
      past_service = true;
      continue;
    }
    if (past_service && length >= 44) return body.substr(at + 4, 40);
    at += static_cast<std::size_t>(length);
  }
  return "";
}

// One clone by A: the advertisement, then the pack, read to its end and dropped.
// `source`: the address A's clone connects from (unspecified: the system's choice); `header`:
// the header naming A (empty: none, the server names A by its address).
asio::awaitable<void> HeavyClone(const tcp::endpoint& server, const asio::ip::address& source,
                                 const std::string& repository, const std::string& header,
                                 const HeavyReading& reading, HeavyStats& stats) {
  static std::atomic<long> serial{0};
  tcp::socket socket(co_await asio::this_coro::executor);
  if (!source.is_unspecified()) {
    socket.open(server.protocol());
    socket.bind(tcp::endpoint(source, 0));
  }
  co_await socket.async_connect(server, asio::use_awaitable);
  boost::beast::flat_buffer buffer;

  http::request<http::empty_body> get(http::verb::get,
                                      "/" + repository + "/info/refs?service=git-upload-pack", 11);
  get.set(http::field::host, "mirror");
  if (!header.empty()) get.set(header, "A");
  co_await http::async_write(socket, get, asio::use_awaitable);
  http::response<http::string_body> advertisement;
  co_await http::async_read(socket, buffer, advertisement, asio::use_awaitable);
  if (advertisement.result_int() == 429 || advertisement.result_int() == 503) {
    ++(advertisement.result_int() == 429 ? stats.refused : stats.shed);
    co_return;
  }
  const std::string id = FirstAdvertisedId(advertisement.body());
  if (advertisement.result_int() != 200 || id.size() != 40) {
    ++stats.errors;
    co_return;
  }

  http::request<http::string_body> post(http::verb::post, "/" + repository + "/git-upload-pack",
                                        11);
  post.set(http::field::host, "mirror");
  if (!header.empty()) post.set(header, "A");
  post.set(http::field::content_type, "application/x-git-upload-pack-request");
  const std::string agent = reading.distinct ? " agent=load-" + std::to_string(++serial) : "";
  post.body() = Pkt("want " + id + " ofs-delta" + agent + "\n") + "0000" + Pkt("done\n");
  post.prepare_payload();
  co_await http::async_write(socket, post, asio::use_awaitable);
  http::response_parser<http::buffer_body> pack;
  // No limit, given as the largest one: Boost 1.74's parser compares a Content-Length with an
  // unset limit as greater (a 503's short body failed with "body limit exceeded").
  pack.body_limit(std::numeric_limits<std::uint64_t>::max());
  co_await http::async_read_header(socket, buffer, pack, asio::use_awaitable);
  static thread_local char sink[1 << 16];
  // A slow reader takes an eighth of a second's worth at a time and waits until its bytes so far
  // are due at its rate.
  const std::size_t piece =
      reading.bytes_per_second > 0
          ? std::clamp<std::size_t>(static_cast<std::size_t>(reading.bytes_per_second / 8), 1024,
                                    sizeof sink)
          : sizeof sink;
  const auto reading_since = Clock::now();
  long long read = 0;
  asio::steady_timer pace(co_await asio::this_coro::executor);
  while (!pack.is_done()) {
    pack.get().body().data = sink;
    pack.get().body().size = piece;
    boost::system::error_code error;
    co_await http::async_read(socket, buffer, pack,
                              asio::redirect_error(asio::use_awaitable, error));
    if (error && error != http::error::need_buffer) throw boost::system::system_error(error);
    const auto got = static_cast<long long>(piece - pack.get().body().size);
    stats.bytes += got;
    read += got;
    if (reading.bytes_per_second > 0) {
      pace.expires_at(reading_since +
                      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                          static_cast<double>(read) / reading.bytes_per_second)));
      co_await pace.async_wait(asio::use_awaitable);
    }
  }
  if (pack.get().result_int() == 429) {
    ++stats.refused;
  } else if (pack.get().result_int() == 503) {
    ++stats.shed;
  } else if (pack.get().result_int() == 200) {
    ++stats.completed;
  } else {
    ++stats.errors;
  }
}

// One of A's clone loops: clone after clone until the deadline. A refused or shed clone backs
// off 1 s.
asio::awaitable<void> HeavyLoop(tcp::endpoint server, asio::ip::address source,
                                std::string repository, std::string header, HeavyReading reading,
                                HeavyStats& stats, Clock::time_point deadline) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (Clock::now() < deadline) {
    const long refused = stats.refused + stats.shed;
    try {
      co_await HeavyClone(server, source, repository, header, reading, stats);
    } catch (const std::exception&) {
      if (Clock::now() < deadline) ++stats.errors;
    }
    if (stats.refused + stats.shed != refused) {
      timer.expires_after(std::chrono::seconds(1));
      co_await timer.async_wait(asio::use_awaitable);
    }
  }
}

// A as an open loop: a clone every 1/`per_second` s until the deadline, each on its own.
asio::awaitable<void> HeavyArrivals(tcp::endpoint server, std::vector<asio::ip::address> sources,
                                    std::string repository, std::string header,
                                    HeavyReading reading, HeavyStats& stats, double per_second,
                                    Clock::time_point deadline, long& started) {
  const auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  const auto gap =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1 / per_second));
  for (auto next = Clock::now(); next < deadline; next += gap) {
    timer.expires_at(next);
    co_await timer.async_wait(asio::use_awaitable);
    const asio::ip::address source = sources[static_cast<std::size_t>(started) % sources.size()];
    ++started;
    asio::co_spawn(
        executor,
        [=, &stats]() -> asio::awaitable<void> {
          try {
            co_await HeavyClone(server, source, repository, header, reading, stats);
          } catch (const std::exception&) {
            if (Clock::now() < deadline) ++stats.errors;
          }
        },
        asio::detached);
  }
}

// The server's peak resident memory (VmHWM, KiB) and its threads now, from /proc.
std::pair<long, long> ServerMemoryAndThreads(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  long hwm = -1, threads = -1;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) hwm = std::stol(line.substr(6));
    if (line.rfind("Threads:", 0) == 0) threads = std::stol(line.substr(8));
  }
  return {hwm, threads};
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t i = std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fairgate-git-mirror-load: one heavy client against one light one"};
  std::string host = "127.0.0.1", heavy, light, header = "X-Client", work_dir;
  int port = 0, heavy_concurrency = 100, server_pid = 0;
  double duration = 60, light_interval = 2, warmup = 5;
  bool alone = false;
  HeavyReading reading;
  app.add_option("--host", host, "the mirror's loopback address")->capture_default_str();
  app.add_option("--port", port, "the mirror's port")->required();
  app.add_option("--heavy", heavy, "repository client A clones")->required();
  app.add_option("--light", light, "repository client B clones")->required();
  app.add_option("--heavy-concurrency", heavy_concurrency, "A's clones in flight at once")
      ->capture_default_str();
  app.add_option("--duration", duration, "seconds the experiment lasts")->capture_default_str();
  app.add_option("--light-interval", light_interval, "seconds between the starts of B's clones")
      ->capture_default_str();
  app.add_option("--warmup", warmup, "seconds A runs before B starts")->capture_default_str();
  app.add_option("--client-header", header, "header naming the client (the server must trust it)")
      ->capture_default_str();
  app.add_option("--server-pid", server_pid, "the server's pid, for its memory and threads");
  app.add_option("--work-dir", work_dir, "scratch directory for B's clones")->required();
  app.add_flag("--alone", alone, "B alone: A does not run");
  int heavy_sources = 0;
  app.add_option("--heavy-sources", heavy_sources,
                 "A's clones from this many addresses of 127.0.5.0/24 in turn, without the client "
                 "header (0: from the system's choice, with it)")
      ->check(CLI::Range(0, 254));
  app.add_option("--heavy-read-rate", reading.bytes_per_second,
                 "bytes a second each of A's clones reads its pack at; 0: as fast as it comes")
      ->capture_default_str();
  app.add_flag("--heavy-distinct", reading.distinct,
               "each of A's clones asks its own request (never shared or cached)");
  double heavy_rate = 0;
  app.add_option("--heavy-rate", heavy_rate,
                 "A starts this many clones a second, however many are in flight, and tries none "
                 "again (an open loop; --heavy-concurrency is then unused); 0: a closed loop")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  boost::system::error_code error;
  const asio::ip::address address = asio::ip::make_address(host, error);
  if (error || !address.is_loopback()) {
    std::cerr << "fairgate-git-mirror-load: --host must be a loopback address\n";
    return 2;
  }
  if (heavy_concurrency < 1 || !(duration > 0) || !(light_interval >= 0) || !(warmup >= 0) ||
      warmup >= duration || !(reading.bytes_per_second >= 0) ||
      !(heavy_rate == 0 || (heavy_rate >= 0.01 && std::isfinite(heavy_rate)))) {
    std::cerr << "fairgate-git-mirror-load: need concurrency >= 1, duration > warmup >= 0, "
                 "interval >= 0, read rate >= 0, a heavy rate of 0 or a finite one >= 0.01\n";
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  // A thousand clones in flight are a thousand sockets.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  fs::create_directories(work_dir);
  const auto start = Clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration));

  // A: every clone loop on one event-loop thread.
  HeavyStats stats;
  asio::io_context io;
  const tcp::endpoint server(address, static_cast<unsigned short>(port));
  std::vector<asio::ip::address> sources;
  for (int i = 0; i < std::max(1, heavy_sources); ++i) {
    sources.push_back(heavy_sources == 0 ? asio::ip::address()
                                         : asio::ip::address(asio::ip::make_address_v4(
                                               "127.0.5." + std::to_string(1 + i))));
  }
  const std::string heavy_header = heavy_sources == 0 ? header : std::string();
  long started = 0;
  if (!alone && heavy_rate > 0) {
    asio::co_spawn(io,
                   HeavyArrivals(server, sources, heavy, heavy_header, reading, stats, heavy_rate,
                                 deadline, started),
                   asio::detached);
  } else if (!alone) {
    for (int i = 0; i < heavy_concurrency; ++i) {
      asio::co_spawn(io,
                     HeavyLoop(server, sources[static_cast<std::size_t>(i) % sources.size()], heavy,
                               heavy_header, reading, stats, deadline),
                     asio::detached);
    }
  }
  // At the deadline, A's clones in flight are abandoned (their connections close).
  asio::steady_timer stop_heavy(io, deadline);
  stop_heavy.async_wait([&](boost::system::error_code) { io.stop(); });
  std::thread heavy_thread([&] { io.run(); });

  // The server's footprint, sampled.
  std::atomic<bool> sampling{true};
  long peak_threads = 0;
  std::thread sampler([&] {
    while (sampling && server_pid > 0) {
      peak_threads = std::max(peak_threads, ServerMemoryAndThreads(server_pid).second);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  // B: real git clones, one at a time, each bounded by the deadline.
  std::this_thread::sleep_until(
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup)));
  const std::string url = "http://" + host + ":" + std::to_string(port) + "/" + light;
  auto [ctx, cancel] = fairgate::WithDeadline(fairgate::Context::Background(), deadline);
  std::vector<double> light_seconds;
  int unfinished = 0, light_failures = 0;
  for (int serial = 0; Clock::now() < deadline; ++serial) {
    const auto began = Clock::now();
    const fs::path target = fs::path(work_dir) / ("b-" + std::to_string(serial));
    auto result = git_mirror::RunProcess({"git", "-c", "http.extraHeader=" + header + ": B",
                                          "clone", "--quiet", url, target.string()},
                                         "", ctx, {"GIT_TERMINAL_PROMPT=0"});
    const double seconds = std::chrono::duration<double>(Clock::now() - began).count();
    std::error_code ignored;
    fs::remove_all(target, ignored);
    if (!result.ok()) {
      ++unfinished;  // still running at the deadline: at least `seconds`
      light_seconds.push_back(seconds);
      break;
    }
    if (result->exit_code != 0) {
      ++light_failures;
      std::cerr << "B's clone failed: " << result->err << "\n";
    } else {
      light_seconds.push_back(seconds);
    }
    std::this_thread::sleep_until(began + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(light_interval)));
  }
  cancel();
  heavy_thread.join();
  sampling = false;
  sampler.join();

  std::printf("b_clones: %zu\n", light_seconds.size() - static_cast<std::size_t>(unfinished));
  std::printf("b_unfinished_at_deadline: %d\n", unfinished);
  std::printf("b_failed: %d\n", light_failures);
  std::printf("b_median_s: %.3f\n", Percentile(light_seconds, 0.5));
  std::printf("b_p90_s: %.3f\n", Percentile(light_seconds, 0.9));
  std::printf("b_worst_s: %.3f\n", Percentile(light_seconds, 1.0));
  if (heavy_rate > 0) std::printf("a_started: %ld\n", started);
  std::printf("a_completed_clones: %ld\n", stats.completed.load());
  std::printf("a_mib_received: %.1f\n", static_cast<double>(stats.bytes) / (1 << 20));
  std::printf("a_refused: %ld\n", stats.refused.load());
  std::printf("a_shed: %ld\n", stats.shed.load());
  std::printf("a_errors: %ld\n", stats.errors.load());
  if (server_pid > 0) {
    std::printf("server_peak_rss_mib: %.1f\n",
                static_cast<double>(ServerMemoryAndThreads(server_pid).first) / 1024);
    std::printf("server_peak_threads: %ld\n", peak_threads);
  }
  return light_failures == 0 ? 0 : 1;
}
