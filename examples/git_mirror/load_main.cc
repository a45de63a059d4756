// fairgate-git-mirror-load: the noisy-neighbour experiment against a running mirror.
//
// Client A runs --heavy-parallel clones of the heavy repository at once, in a loop, for as long
// as the experiment lasts. Client B, after --warmup seconds, clones the light repository
// --light-clones times, one at a time, --light-interval seconds apart, and the tool prints how
// long B's clones took (median and worst). With --alone, A does nothing: B's time on an idle
// server. Clients are told apart by a header (--client-header, as given to the server).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "subprocess.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Clones `url` into a fresh directory under `work_dir` as `client`, removes it, returns seconds.
double CloneOnce(const std::string& url, const std::string& header, const std::string& client,
                 const fs::path& work_dir, int serial, bool& ok) {
  const fs::path target = work_dir / (client + "-" + std::to_string(serial));
  const auto start = Clock::now();
  auto result =
      git_mirror::RunProcess({"git", "-c", "http.extraHeader=" + header + ": " + client, "clone",
                              "--quiet", url, target.string()},
                             "", fairgate::Context::Background(), {"GIT_TERMINAL_PROMPT=0"});
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ok = result.ok() && result->exit_code == 0;
  if (!ok) {
    std::cerr << "clone of " << url << " as " << client
              << " failed: " << (result.ok() ? result->err : result.status().ToString()) << "\n";
  }
  std::error_code ignored;
  fs::remove_all(target, ignored);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fairgate-git-mirror-load: one heavy client against one light one"};
  std::string base_url, heavy, light, header = "X-Client", work_dir;
  int heavy_parallel = 40, light_clones = 10;
  double light_interval = 1.0, warmup = 2.0;
  bool alone = false;
  app.add_option("--url", base_url, "the mirror, e.g. http://127.0.0.1:8080")->required();
  app.add_option("--heavy", heavy, "repository client A clones")->required();
  app.add_option("--light", light, "repository client B clones")->required();
  app.add_option("--heavy-parallel", heavy_parallel, "A's clones at once")->capture_default_str();
  app.add_option("--light-clones", light_clones, "B's clones")->capture_default_str();
  app.add_option("--light-interval", light_interval, "seconds between B's clones")
      ->capture_default_str();
  app.add_option("--warmup", warmup, "seconds A runs before B starts")->capture_default_str();
  app.add_option("--client-header", header, "header naming the client")->capture_default_str();
  app.add_option("--work-dir", work_dir, "scratch directory for the clones")->required();
  app.add_flag("--alone", alone, "B alone: A does not run");
  CLI11_PARSE(app, argc, argv);
  if (heavy_parallel < 1 || light_clones < 1 || light_interval < 0 || warmup < 0) {
    std::cerr << "fairgate-git-mirror-load: counts must be >= 1 and times >= 0\n";
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  fs::create_directories(work_dir);

  std::atomic<bool> done{false};
  std::atomic<int> heavy_clones{0}, failures{0};
  std::vector<std::thread> heavy_clients;
  if (!alone) {
    for (int i = 0; i < heavy_parallel; ++i) {
      heavy_clients.emplace_back([&, i] {
        for (int serial = 0; !done; ++serial) {
          bool ok = false;
          CloneOnce(base_url + "/" + heavy, header, "a", work_dir, i * 1000000 + serial, ok);
          if (!done) (ok ? heavy_clones : failures)++;
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  }
  std::vector<double> light_seconds;
  for (int i = 0; i < light_clones; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::duration<double>(light_interval));
    bool ok = false;
    const double s = CloneOnce(base_url + "/" + light, header, "b", work_dir, i, ok);
    if (ok)
      light_seconds.push_back(s);
    else
      failures++;
  }
  done = true;
  for (auto& t : heavy_clients) t.join();

  std::sort(light_seconds.begin(), light_seconds.end());
  if (light_seconds.empty()) {
    std::cerr << "fairgate-git-mirror-load: every clone of B failed\n";
    return 1;
  }
  const std::size_t n = light_seconds.size();
  const double median =
      n % 2 ? light_seconds[n / 2] : (light_seconds[n / 2 - 1] + light_seconds[n / 2]) / 2;
  std::printf("light clones (client b): %zu, median %.3f s, worst %.3f s\n", light_seconds.size(),
              median, light_seconds.back());
  std::printf("heavy clones (client a) completed meanwhile: %d; failed clones: %d\n",
              heavy_clones.load(), failures.load());
  return failures == 0 ? 0 : 1;
}
