// fairgate-pool-ask: a client of the worker pool example (README.md). Sends each JOB line given
// on the command line to the dispatcher, one after another on one connection, and prints each
// reply. Exit status 1 if a job did not end with DONE.
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "line_socket.h"

int main(int argc, char** argv) {
  CLI::App app("asks the worker pool's dispatcher for jobs");
  std::string socket_path;
  std::vector<std::string> jobs;
  app.add_option("--socket", socket_path, "the dispatcher's Unix socket")->required();
  app.add_option("jobs", jobs, "JOB lines: \"JOB <type> <id> <key> <seconds>\"")->required();
  CLI11_PARSE(app, argc, argv);
  std::optional<int> fd = worker_pool::LineSocket::Connect(socket_path);
  if (!fd) {
    std::perror(("fairgate-pool-ask: " + socket_path).c_str());
    return 1;
  }
  worker_pool::LineSocket socket(*fd);
  int failed = 0;
  for (const std::string& job : jobs) {
    std::optional<std::string> reply;
    if (socket.Send(job)) reply = socket.Receive();
    std::cout << reply.value_or("ERR no reply") << std::endl;
    failed += !reply || reply->rfind("DONE ", 0) != 0;
  }
  return failed == 0 ? 0 : 1;
}
