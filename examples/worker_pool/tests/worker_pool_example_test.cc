// The worker pool example with real processes: a dispatcher and workers that register over a
// Unix socket. A versatile worker stays free for the job only it can run; a worker killed with
// SIGKILL mid-job loses its job to fairgate at once, the job runs again on another worker, and
// no job is lost or runs twice at once. Every process is bounded in time and killed at the end.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "line_socket.h"

extern char** environ;

namespace {

using namespace std::chrono_literals;

// A child process whose output goes to a file; killed (SIGKILL) and reaped when destroyed.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::string& output) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int error = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE_MESSAGE(error == 0, "cannot start ", argv[0]);
  }
  ~Process() { Kill(); }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Eventually(const std::function<bool()>& condition, std::chrono::seconds guard = 20s) {
  const auto end = std::chrono::steady_clock::now() + guard;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A dispatcher in a temporary directory, and the workers started against it.
class Pool {
 public:
  Pool() {
    dir_ = std::filesystem::temp_directory_path() /
           ("fairgate-worker-pool-" + std::to_string(::getpid()) + "-" + std::to_string(next_++));
    std::filesystem::create_directories(dir_);
    socket_ = (dir_ / "pool.sock").string();
    dispatcher_ = std::make_unique<Process>(
        std::vector<std::string>{WORKER_POOL_DISPATCHER, "--socket", socket_}, log_path());
    REQUIRE(Eventually([&] { return Read(log_path()).find("listening") != std::string::npos; }));
  }
  ~Pool() {
    workers_.clear();
    dispatcher_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string log_path() const { return (dir_ / "dispatcher.log").string(); }
  std::string log() const { return Read(log_path()); }
  Process& AddWorker(const std::string& name, const std::string& types, int slots = 1) {
    workers_[name] = std::make_unique<Process>(
        std::vector<std::string>{WORKER_POOL_WORKER, "--socket", socket_, "--name", name, "--types",
                                 types, "--slots", std::to_string(slots)},
        (dir_ / (name + ".log")).string());
    REQUIRE(Eventually([&] { return log().find("worker+ " + name + "\n") != std::string::npos; }));
    return *workers_[name];
  }
  // Asks for a job on a connection of its own, in a thread; the reply lands in `reply`.
  std::thread Ask(const std::string& job, std::string& reply) {
    return std::thread([this, job, &reply] {
      std::optional<int> fd = worker_pool::LineSocket::Connect(socket_);
      if (!fd) {
        reply = "cannot connect";
        return;
      }
      worker_pool::LineSocket socket(*fd);
      socket.Send(job);
      reply = socket.Receive().value_or("no reply");
    });
  }

 private:
  static inline int next_ = 0;
  std::filesystem::path dir_;
  std::string socket_;
  std::unique_ptr<Process> dispatcher_;
  std::map<std::string, std::unique_ptr<Process>> workers_;
};

TEST_CASE("AVersatileWorkerStaysFreeForTheJobOnlyItCanRun") {
  Pool pool;
  pool.AddWorker("versatile", "render,index");
  pool.AddWorker("renderer", "render");
  std::string render_reply, index_reply;
  std::thread render = pool.Ask("JOB render frame-1 studio 2", render_reply);
  REQUIRE(Eventually([&] { return pool.log().find("start 1 render") != std::string::npos; }));
  // The render went to the specialist: the index job, which only the versatile worker serves,
  // runs at once and ends while the render still runs.
  std::thread index = pool.Ask("JOB index docs search 0.1", index_reply);
  index.join();
  CHECK(index_reply == "DONE index docs versatile");
  CHECK(pool.log().find("end 1\n") == std::string::npos);  // the render is still running
  render.join();
  CHECK(render_reply == "DONE render frame-1 renderer");
}

TEST_CASE("AWorkerKilledMidJobLosesItAndItRunsOnceElsewhere") {
  Pool pool;
  Process& doomed = pool.AddWorker("arm-1", "render");
  pool.AddWorker("arm-2", "render");
  // Four 1-second renders from four clients on two one-slot workers.
  std::vector<std::string> replies(4);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(
        pool.Ask("JOB render frame-" + std::to_string(i) + " client-" + std::to_string(i) + " 1",
                 replies[static_cast<std::size_t>(i)]));
  }
  REQUIRE(Eventually([&] {
    for (const std::string& line : Lines(pool.log())) {
      if (line.rfind("start ", 0) == 0 && line.size() > 6 &&
          line.compare(line.size() - 6, 6, " arm-1") == 0) {
        return true;
      }
    }
    return false;
  }));
  doomed.Kill();  // SIGKILL, mid-job
  for (std::thread& c : clients) c.join();
  // Nothing lost: every client got its render done, the one on arm-1 again on arm-2.
  for (int i = 0; i < 4; ++i) {
    CHECK(replies[static_cast<std::size_t>(i)] ==
          "DONE render frame-" + std::to_string(i) + " arm-2");
  }
  const std::string log = pool.log();
  CHECK(log.find("worker- arm-1\n") != std::string::npos);
  CHECK(log.find("lost ") != std::string::npos);
  CHECK(log.find("retry render frame-") != std::string::npos);
  // Nothing run twice at once: per id, each start is followed by its end or loss before the
  // next start of that id; and each id ends exactly once.
  std::map<std::string, std::string> running;  // id -> job running it
  std::map<std::string, std::string> id_of;    // job -> id
  std::map<std::string, int> ended;
  for (const std::string& line : Lines(log)) {
    std::istringstream in(line);
    std::string event, job, type, id;
    in >> event >> job;
    if (event == "start") {
      in >> type >> id;
      CHECK_MESSAGE(running.count(id) == 0, id, " started while it ran");
      running[id] = job;
      id_of[job] = id;
    } else if (event == "end" || event == "lost") {
      REQUIRE(id_of.count(job) == 1);
      running.erase(id_of[job]);
      if (event == "end") ++ended[id_of[job]];
    }
  }
  CHECK(ended.size() == 4);
  for (const auto& [id, n] : ended) CHECK_MESSAGE(n == 1, id);
}

}  // namespace
