// fairgate-pool-dispatcher: the dispatcher of the worker pool example (README.md).
#include <csignal>
#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "fairgate/scheduler.h"
#include "pool_dispatcher.h"

int main(int argc, char** argv) {
  CLI::App app("the dispatcher of the fairgate worker pool example");
  std::string socket_path;
  int capacity = 64;
  double reserve_after = 30;
  app.add_option("--socket", socket_path, "the Unix socket workers and clients connect to")
      ->required();
  app.add_option("--capacity", capacity, "jobs running at once, at most")
      ->check(CLI::Range(1, 4096));
  app.add_option("--reserve-after", reserve_after,
                 "seconds after which a type one worker alone serves reserves it")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  fairgate::SchedulerOptions options;
  options.rule.max_concurrency = capacity;
  options.rule.sole_worker_reserve_after = fairgate::Seconds(reserve_after);
  // One thread per slot: a job's function blocks its thread while it waits for its worker.
  options.runtime.worker_threads = capacity;
  auto scheduler = fairgate::Scheduler::Create(options);
  if (!scheduler.ok()) {
    std::cerr << "fairgate-pool-dispatcher: " << scheduler.status() << "\n";
    return 2;
  }
  // The stand-in job types, both in one tier: render (sleeps) and index (hashes).
  for (const char* type : {"render", "index"}) {
    const fairgate::JobTypeConfig config{
        .default_cost = 1, .max_concurrency = capacity, .priority = capacity};
    if (fairgate::Status s = (*scheduler)->RegisterType(type, config); !s.ok()) {
      std::cerr << "fairgate-pool-dispatcher: " << s << "\n";
      return 2;
    }
  }
  worker_pool::PoolDispatcher dispatcher(**scheduler, std::cout);
  // SIGTERM or SIGINT: stop serving and leave.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    dispatcher.Stop();
  });
  fairgate::Status served = dispatcher.Serve(socket_path);
  if (!served.ok()) {
    std::cerr << "fairgate-pool-dispatcher: " << served << "\n";
    kill(getpid(), SIGTERM);  // let the stopper thread end
  }
  stopper.join();
  return served.ok() ? 0 : 1;
}
