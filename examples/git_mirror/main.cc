// fairgate-git-mirror: a read-only git smart-HTTP mirror whose work is admitted by fairgate.
// See README.md beside this file for a walk-through.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "mirror_server.h"

int main(int argc, char** argv) {
  CLI::App app{"fairgate-git-mirror: a read-only git mirror over smart HTTP, admitted by fairgate"};
  std::string listen_host = "127.0.0.1";
  int port = 8080;
  std::string policy = "fairgate";
  std::vector<std::string> repo_flags;
  std::string config_file;
  git_mirror::MirrorOptions options;
  git_mirror::GateConfig gate_config;
  double fetch_interval = 60, request_timeout = 600;
  app.add_option("--host", listen_host, "address to listen on")->capture_default_str();
  app.add_option("--port", port, "port to listen on; 0 picks a free one")->capture_default_str();
  app.add_option("--mirror-dir", options.mirror_dir, "where the mirrors live")->required();
  app.add_option("--repo", repo_flags, "a repository to serve, NAME=URL (repeatable)");
  app.add_option("--config", config_file, "a file of 'NAME URL' lines, one repository each");
  app.add_option("--policy", policy, "admission: fairgate, or fifo to compare")
      ->check(CLI::IsMember({"fairgate", "fifo"}))
      ->capture_default_str();
  app.add_option("--capacity", gate_config.capacity, "jobs running at once")->capture_default_str();
  app.add_option("--sync-clone-slots", gate_config.sync_clone_slots, "first mirrors at once")
      ->capture_default_str();
  app.add_option("--background-slots", gate_config.background_slots, "fetches and repacks at once")
      ->capture_default_str();
  app.add_option("--max-pending-per-client", gate_config.max_pending_per_client,
                 "requests one client may have waiting; more get 429")
      ->capture_default_str();
  app.add_option("--aging-grace", gate_config.aging_grace_seconds,
                 "seconds before a waiting fetch or repack starts to age (fairgate)")
      ->capture_default_str();
  app.add_option("--aging-interval", gate_config.aging_interval_seconds,
                 "seconds per tier a waiting fetch or repack rises; 0: no aging (fairgate)")
      ->capture_default_str();
  app.add_option("--client-max-running", gate_config.client_max_running,
                 "jobs one client may run at once; 0: capacity - 1 (fairgate)")
      ->capture_default_str();
  app.add_option("--client-min-running", gate_config.client_min_running,
                 "jobs a client running fewer than this gets first in its tier (fairgate)")
      ->capture_default_str();
  app.add_option("--client-header", options.client_header,
                 "header naming the client (behind a proxy); default: the peer address");
  app.add_option("--fetch-interval", fetch_interval, "seconds between fetches; 0: never")
      ->capture_default_str();
  app.add_option("--repack-after", options.repack_after, "fetches between repacks")
      ->capture_default_str();
  app.add_option("--request-timeout", request_timeout, "seconds a request may wait and run")
      ->capture_default_str();
  app.add_option("--retry-after", options.retry_after_seconds, "Retry-After of a 429, seconds")
      ->capture_default_str();
  app.add_option("--http-threads", options.http_threads, "requests served at once")
      ->capture_default_str();
  app.add_option("--event-log", options.event_log, "append what happens here, as JSON lines");
  CLI11_PARSE(app, argc, argv);

  // Signals: SIGPIPE would kill the server when a git process exits early; SIGINT and SIGTERM
  // stop it cleanly, from a thread that waits for them (blocked everywhere else: so
  // before any thread starts, since threads inherit the mask).
  signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto fail = [](const fairgate::Status& status) {
    std::cerr << "fairgate-git-mirror: " << status.message() << "\n";
    return 2;
  };
  git_mirror::RepositorySet repositories;
  for (const std::string& flag : repo_flags) {
    if (auto s = repositories.AddFlag(flag); !s.ok()) return fail(s);
  }
  if (!config_file.empty()) {
    if (auto s = repositories.AddConfigFile(config_file); !s.ok()) return fail(s);
  }
  if (repositories.all().empty()) {
    return fail(absl::InvalidArgumentError("no repository to serve: give --repo or --config"));
  }
  if (!(fetch_interval >= 0) || !(request_timeout > 0)) {
    return fail(absl::InvalidArgumentError(
        "--fetch-interval must be >= 0 and --request-timeout > 0 (seconds)"));
  }
  options.fetch_interval = std::chrono::milliseconds(static_cast<long long>(fetch_interval * 1e3));
  options.request_timeout =
      std::chrono::milliseconds(static_cast<long long>(request_timeout * 1e3));

  auto gate = policy == "fifo" ? git_mirror::MakeFifoGate(gate_config)
                               : git_mirror::MakeFairgateGate(gate_config);
  if (!gate.ok()) return fail(gate.status());
  auto server =
      git_mirror::MirrorServer::Create(std::move(repositories), options, std::move(*gate));
  if (!server.ok()) return fail(server.status());

  auto bound = (*server)->Bind(listen_host, port);
  if (!bound.ok()) return fail(bound.status());
  std::printf("fairgate-git-mirror: listening on http://%s:%d (policy %s)\n", listen_host.c_str(),
              *bound, policy.c_str());
  std::fflush(stdout);
  std::thread stopper([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    (*server)->Stop();
  });
  (*server)->Serve();
  // If Serve returned on its own, this wakes the stopper; if a signal stopped it, this one stays
  // pending (blocked in every thread) and dies with the process.
  kill(getpid(), SIGTERM);
  stopper.join();
  return 0;
}
