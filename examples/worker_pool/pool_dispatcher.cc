#include "pool_dispatcher.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace worker_pool {

PoolDispatcher::~PoolDispatcher() { Stop(); }

void PoolDispatcher::Log(const std::string& line) {
  std::lock_guard lock(log_mutex_);
  log_ << line << std::endl;
}

fairgate::Status PoolDispatcher::Serve(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  ::unlink(path.c_str());
  listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener_ < 0 ||
      ::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener_, 128) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", path, ": ", std::strerror(errno)));
  }
  Log("listening " + path);
  while (!stopping_) {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (stopping_) break;
      return absl::UnavailableError(absl::StrCat("accept: ", std::strerror(errno)));
    }
    auto socket = std::make_shared<LineSocket>(fd);
    std::lock_guard lock(mutex_);
    threads_.emplace_back([this, socket] { Handle(socket); });
  }
  return absl::OkStatus();
}

void PoolDispatcher::Stop() {
  if (stopping_.exchange(true)) return;
  if (listener_ >= 0) ::shutdown(listener_, SHUT_RDWR);
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    for (auto& [name, worker] : workers_) worker->socket->Shutdown();
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
  if (listener_ >= 0) ::close(listener_);
}

void PoolDispatcher::Handle(std::shared_ptr<LineSocket> socket) {
  std::optional<std::string> first = socket->Receive();
  if (!first) return;
  if (first->rfind("WORKER ", 0) == 0) {
    ServeWorker(std::move(socket), *first);
  } else {
    ServeClient(std::move(socket), *first);
  }
}

void PoolDispatcher::ServeWorker(std::shared_ptr<LineSocket> socket, const std::string& hello) {
  std::istringstream in(hello);
  std::string verb, name, types;
  int slots = 0;
  if (!(in >> verb >> name >> slots >> types)) {
    (void)socket->Send("ERR bad WORKER line");
    return;
  }
  fairgate::WorkerConfig config{slots, absl::StrSplit(types, ','), {}};
  auto worker = std::make_shared<Worker>();
  worker->name = name;
  worker->socket = socket;
  {
    std::lock_guard lock(mutex_);
    if (workers_.count(name) > 0) {
      (void)socket->Send("ERR worker " + name + " is already connected");
      return;
    }
    workers_[name] = worker;
  }
  if (fairgate::Status s = scheduler_.AddWorker(name, config); !s.ok()) {
    (void)socket->Send("ERR " + std::string(s.message()));
    std::lock_guard lock(mutex_);
    workers_.erase(name);
    return;
  }
  Log("worker+ " + name);
  while (std::optional<std::string> line = socket->Receive()) {
    std::istringstream done(*line);
    std::string word;
    std::uint64_t job = 0;
    if (!(done >> word >> job) || word != "DONE") continue;
    std::lock_guard lock(worker->mutex);
    if (auto it = worker->waiting.find(job); it != worker->waiting.end()) {
      it->second.set_value();
      worker->waiting.erase(it);
    }
  }
  // The connection closed (the worker stopped or was killed): its slots and its running jobs
  // leave fairgate at once; their functions see their contexts cancelled.
  {
    std::lock_guard lock(mutex_);
    workers_.erase(name);
  }
  (void)scheduler_.RemoveWorker(name);
  Log("worker- " + name);
}

void PoolDispatcher::ServeClient(std::shared_ptr<LineSocket> socket, std::string first) {
  for (std::optional<std::string> line = std::move(first); line; line = socket->Receive()) {
    std::istringstream in(*line);
    std::string verb, type, id, key;
    double seconds = 0;
    if (!(in >> verb >> type >> id >> key >> seconds) || verb != "JOB" || seconds < 0) {
      (void)socket->Send("ERR bad JOB line: " + *line);
      continue;
    }
    std::string worker;
    fairgate::Status status;
    for (int attempt = 1; attempt <= 3; ++attempt) {
      status = scheduler_.RunSync(
          fairgate::Context::Background(),
          {fairgate::TypeName(type), fairgate::JobId(id), fairgate::FairnessKey(key)},
          [&](const fairgate::Context& ctx) {
            worker = std::string(ctx.Worker());
            return RunOnWorker(ctx, type, id, seconds);
          });
      if (!fairgate::WorkerLost(status) || stopping_) break;
      Log("retry " + type + " " + id);  // its worker was lost: ask again, so it is not lost
    }
    (void)socket->Send(status.ok() ? "DONE " + type + " " + id + " " + worker
                                   : "ERR " + type + " " + id + " " + status.ToString());
  }
}

fairgate::Status PoolDispatcher::RunOnWorker(const fairgate::Context& ctx, const std::string& type,
                                             const std::string& id, double seconds) {
  std::shared_ptr<Worker> worker;
  {
    std::lock_guard lock(mutex_);
    if (auto it = workers_.find(std::string(ctx.Worker())); it != workers_.end()) {
      worker = it->second;
    }
  }
  if (!worker) return absl::UnavailableError("worker " + std::string(ctx.Worker()) + " is gone");
  const std::uint64_t job = next_job_++;
  std::future<void> done;
  {
    std::lock_guard lock(worker->mutex);
    done = worker->waiting[job].get_future();
  }
  Log(absl::StrCat("start ", job, " ", type, " ", id, " ", worker->name));
  if (!worker->socket->Send(absl::StrCat("RUN ", job, " ", type, " ", id, " ", seconds))) {
    ctx.WaitFor(std::chrono::seconds(5));  // the connection is closing: its removal comes
  }
  while (done.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
    if (ctx.Done()) {
      Log(absl::StrCat("lost ", job, " ", worker->name));
      std::lock_guard lock(worker->mutex);
      worker->waiting.erase(job);
      return ctx.Err();
    }
  }
  Log(absl::StrCat("end ", job));
  return absl::OkStatus();
}

}  // namespace worker_pool
