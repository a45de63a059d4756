// fairgate-pool-worker: a worker process of the worker pool example (README.md). It connects to
// the dispatcher's Unix socket, says which job types it serves and how many jobs it runs at once,
// and then runs what it is sent, replying when each job ends. The job types are stand-ins:
// "render" sleeps for the job's seconds, "index" hashes a buffer over and over for that long.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "line_socket.h"

namespace {

void Render(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

std::size_t Index(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::string buffer(64 * 1024, 'x');
  std::size_t digest = 0;
  while (std::chrono::steady_clock::now() < end) {
    digest ^= std::hash<std::string>{}(buffer);
    buffer[digest % buffer.size()] = static_cast<char>(digest);
  }
  return digest;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("a worker of the fairgate worker pool example");
  std::string socket_path, name, types;
  int slots = 1;
  app.add_option("--socket", socket_path, "the dispatcher's Unix socket")->required();
  app.add_option("--name", name, "this worker's name")->required();
  app.add_option("--types", types, "the job types it serves, comma-separated")->required();
  app.add_option("--slots", slots, "jobs it runs at once")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  std::optional<int> fd = worker_pool::LineSocket::Connect(socket_path);
  if (!fd) {
    std::perror(("fairgate-pool-worker: " + socket_path).c_str());
    return 1;
  }
  worker_pool::LineSocket socket(*fd);
  if (!socket.Send("WORKER " + name + " " + std::to_string(slots) + " " + types)) return 1;
  std::vector<std::thread> running;
  while (std::optional<std::string> line = socket.Receive()) {
    std::istringstream in(*line);
    std::string verb, job, type, id;
    double seconds = 0;
    if (!(in >> verb >> job >> type >> id >> seconds) || verb != "RUN") {
      std::cerr << "fairgate-pool-worker: unexpected line '" << *line << "'\n";
      return 1;
    }
    running.emplace_back([&socket, job, type, seconds] {
      if (type == "index") {
        (void)Index(seconds);
      } else {
        Render(seconds);
      }
      (void)socket.Send("DONE " + job + " OK");
    });
  }
  // The dispatcher went away: finish what runs, then leave.
  for (std::thread& t : running) t.join();
  return 0;
}
