// fairgate-git-mirror: a read-only git smart-HTTP mirror whose work is admitted by fairgate.
// See README.md beside this file for a walk-through.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <thread>
#include <tuple>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "client_group.h"
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
  double fetch_interval = 60, request_timeout = 600, shutdown_grace = 30;
  double header_timeout = 10, idle_timeout = 60, transfer_grace = 30;
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
  app.add_option("--client-group", gate_config.client_group,
                 "prefix:V4/V6: a client named by its address is one of its network's (its IPv4 "
                 "/V4, its IPv6 /V6), and a network's clients take one share together and run at "
                 "most --client-max-running jobs together, so that clones spread over many "
                 "addresses count as one client's (fairgate); e.g. prefix:24/48. header:NAME: "
                 "the group is what a --trusted-proxy peer's header NAME says (its last entry), "
                 "e.g. the organisation of the user it authenticated");
  app.add_option("--client-min-running", gate_config.client_min_running,
                 "jobs a client running fewer than this gets first in its tier (fairgate)")
      ->capture_default_str();
  app.add_option("--client-rate", gate_config.client_rate,
                 "git requests that run git (a clone makes three) one client may start per "
                 "second; 0: no limit; over it: 429 with Retry-After when its token is due "
                 "(fairgate)")
      ->capture_default_str();
  app.add_option("--client-burst", gate_config.client_burst,
                 "requests one client may start at once under --client-rate (fairgate)")
      ->capture_default_str();
  app.add_option("--rate", gate_config.rate,
                 "packs all clients may start per second; 0: no limit; over it: 429 with "
                 "Retry-After (fairgate)")
      ->capture_default_str();
  app.add_option("--burst", gate_config.burst,
                 "packs that may start at once under --rate (fairgate)")
      ->capture_default_str();
  app.add_option("--adaptive-capacity-min", gate_config.adaptive_min,
                 "0: the cap is --capacity; else it follows CPU, memory and io pressure (the "
                 "worst) between this and --capacity (fairgate)")
      ->capture_default_str();
  app.add_option("--memory-high", gate_config.memory_high,
                 "0: off; else, with --adaptive-capacity-min, the cap also shrinks while more than "
                 "this share of the server's cgroup's memory limit is in use (page cache the "
                 "kernel reclaims first left out), and may grow below it less 0.1; the server "
                 "must run in a cgroup with a memory limit (fairgate)")
      ->capture_default_str();
  app.add_option("--latency-capacity-min", gate_config.latency_min,
                 "0: off; else the cap follows how much slower clones run than unloaded (no "
                 "threshold), between this and --capacity, starting at this; not with "
                 "--adaptive-capacity-min (fairgate)")
      ->capture_default_str();
  app.add_option("--shed-target", gate_config.shed_target,
                 "0: off; else when the oldest waiting ref listing or pack has waited over this "
                 "many seconds for --shed-interval, the heaviest client's latest requests are "
                 "refused with 503 and Retry-After while lighter ones are served (fairgate)")
      ->capture_default_str();
  app.add_option("--shed-interval", gate_config.shed_interval,
                 "seconds a queue must stand over --shed-target before shedding; also the "
                 "Retry-After of a shed request (fairgate)")
      ->capture_default_str();
  app.add_option("--state", gate_config.state_file,
                 "a SQLite file keeping learned costs, clients' costs and the fetch schedule "
                 "across restarts (fairgate)");
  app.add_option("--database", gate_config.database,
                 "a PostgreSQL database (libpq connection string or postgresql:// URL) shared by "
                 "the replicas of one mirror, with one --mirror-dir: clients' costs and repository "
                 "exclusion are fleet-wide; exclusive with --state (fairgate)");
  app.add_option("--replica", gate_config.replica,
                 "this replica's name, unique among those sharing --database; default: host "
                 "name, process id and a random suffix (fairgate)");
  app.add_option("--client-header", options.http.client_header,
                 "header naming the client, honoured only from --trusted-proxy peers (e.g. "
                 "X-Forwarded-For: its last entry); else the peer address names the client");
  app.add_option("--trusted-proxy", options.http.trusted_proxies,
                 "an address or CIDR network whose --client-header is believed (repeatable)");
  app.add_option("--fetch-interval", fetch_interval, "seconds between fetches; 0: never")
      ->capture_default_str();
  app.add_option("--repack-after", options.repack_after, "fetches between repacks")
      ->capture_default_str();
  app.add_option("--request-timeout", request_timeout, "seconds a request may wait and run")
      ->capture_default_str();
  app.add_option("--retry-after", options.http.retry_after_seconds, "Retry-After of a 429, seconds")
      ->capture_default_str();
  app.add_option("--io-threads", options.io_threads, "threads running the event loop")
      ->capture_default_str();
  app.add_option("--shutdown-grace", shutdown_grace,
                 "seconds a stop lets running fetches, repacks and transfers go on")
      ->capture_default_str();
  app.add_option("--header-timeout", header_timeout,
                 "seconds from a request's first byte to the end of its header")
      ->capture_default_str();
  app.add_option("--max-header-bytes", options.http.max_header_bytes,
                 "largest request header; larger: 431")
      ->capture_default_str();
  app.add_option("--max-body-bytes", options.http.max_body_bytes,
                 "largest request body as sent; larger: 413")
      ->capture_default_str();
  app.add_option("--max-inflated-body-bytes", options.http.max_inflated_body_bytes,
                 "largest gzip request body once inflated; larger: 413")
      ->capture_default_str();
  app.add_option("--idle-timeout", idle_timeout,
                 "seconds a connection may wait for its next request")
      ->capture_default_str();
  app.add_option("--min-transfer-rate", options.http.min_transfer_rate,
                 "bytes per second a client must send a body and take a response at")
      ->capture_default_str();
  app.add_option("--transfer-grace", transfer_grace,
                 "seconds of slack in the rate floor: a stalled transfer is cut after about this")
      ->capture_default_str();
  app.add_option("--listen-backlog", options.http.listen_backlog, "the listen queue's length")
      ->capture_default_str();
  app.add_option("--send-buffer-bytes", options.http.send_buffer_bytes,
                 "each connection's kernel send buffer; 0: the kernel's, which grows")
      ->capture_default_str();
  app.add_option("--max-connections", options.http.max_connections,
                 "connections open at once; lowered to fit the open-file limit (said at start)")
      ->capture_default_str();
  app.add_option("--pack-cache-bytes", options.pack_cache_bytes,
                 "bytes of finished packs kept for identical requests (served without git); "
                 "0: none")
      ->capture_default_str();
  app.add_option("--hit-charge", options.hit_charge_seconds,
                 "seconds charged to a client for each pack served from the cache")
      ->capture_default_str();
  app.add_option("--git-nice", options.git_nice,
                 "niceness above the server's own of a client's git runs beyond its first and "
                 "of the server's own git (0: the server's; up to 19)")
      ->capture_default_str();
  app.add_option("--spool-bytes", options.spool_bytes,
                 "bytes of packs made and not yet sent that spool files may hold; past it git "
                 "waits for readers")
      ->capture_default_str();
  app.add_flag("--share-packs,!--no-share-packs", options.share_packs,
               "identical pack requests while the pack is being made share one git run")
      ->capture_default_str();
  app.add_option("--body-memory", options.http.body_memory,
                 "bytes of request bodies (as sent and inflated) held at once by all connections; "
                 "past it: 503")
      ->capture_default_str();
  app.add_option("--debug-allow", options.debug_allow,
                 "an address or CIDR network of clients that may read /debug/ (repeatable; "
                 "default loopback; others get 403)");
  app.add_flag("--debug-show-clients", options.debug_show_clients,
               "name the heaviest clients on /debug/scheduler (default: pseudonyms)");
  app.add_option("--max-connections-per-client", options.http.max_connections_per_client,
                 "connections open at once from one peer address (trusted proxies excepted)")
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
  for (const auto& [name, value, positive] : {std::tuple{"--fetch-interval", fetch_interval, false},
                                              {"--request-timeout", request_timeout, true},
                                              {"--shutdown-grace", shutdown_grace, false},
                                              {"--header-timeout", header_timeout, true},
                                              {"--idle-timeout", idle_timeout, true},
                                              {"--transfer-grace", transfer_grace, true}}) {
    if (!(positive ? value > 0 : value >= 0) || value > 1e9) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          name, " must be ", positive ? "> 0" : ">= 0", " seconds (got ", value, ")")));
    }
  }
  auto millis = [](double seconds) {
    return std::chrono::milliseconds(static_cast<long long>(seconds * 1e3));
  };
  options.fetch_interval = millis(fetch_interval);
  options.request_timeout = millis(request_timeout);
  options.shutdown_grace = millis(shutdown_grace);
  options.http.header_timeout = millis(header_timeout);
  options.http.idle_timeout = millis(idle_timeout);
  options.http.transfer_grace = millis(transfer_grace);
  auto gate = policy == "fifo" ? git_mirror::MakeFifoGate(gate_config)
                               : git_mirror::MakeFairgateGate(gate_config);
  if (!gate.ok()) return fail(gate.status());
  if (auto groups = git_mirror::ClientGroups::Parse(gate_config.client_group);
      groups.ok() && !groups->header().empty()) {
    if (options.http.trusted_proxies.empty()) {
      return fail(
          absl::InvalidArgumentError("--client-group header:NAME needs --trusted-proxy: the header "
                                     "is believed only from one"));
    }
    options.http.group_header = groups->header();
  }
  // Every waiting client holds a socket: allow as many descriptors as the system lets us, and
  // keep the connections below that.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    if (files.rlim_cur < files.rlim_max) {
      files.rlim_cur = files.rlim_max;
      setrlimit(RLIMIT_NOFILE, &files);
      getrlimit(RLIMIT_NOFILE, &files);
    }
    // Kept for git's pipes (four per running job), the mirrors' files, the store and the kept
    // packs; each connection takes two (its socket, and the spool file it is served from).
    const std::uint64_t reserved =
        64 + 4 * static_cast<std::uint64_t>(gate_config.capacity) +
        (options.pack_cache_bytes > 0 ? git_mirror::MirrorOptions::kMaxKeptPacks : 0);
    auto connections = git_mirror::ConnectionLimitWithin(options.http.max_connections,
                                                         files.rlim_cur, reserved, 2);
    if (!connections.ok()) return fail(connections.status());
    if (*connections < options.http.max_connections) {
      std::fprintf(stderr,
                   "fairgate-git-mirror: --max-connections lowered from %d to %d: the open-file "
                   "limit is %llu, and %llu descriptors are kept for git, files and kept packs, "
                   "two per connection\n",
                   options.http.max_connections, *connections,
                   static_cast<unsigned long long>(files.rlim_cur),
                   static_cast<unsigned long long>(reserved));
      options.http.max_connections = *connections;
    }
  }
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
