#include "disconnect_watcher.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <vector>

namespace git_mirror {
namespace {

// "addr", port of a socket address, as httplib spells them.
bool Describe(const sockaddr_storage& a, std::string& addr, int& port) {
  char text[INET6_ADDRSTRLEN];
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    if (!inet_ntop(AF_INET, &in.sin_addr, text, sizeof text)) return false;
    port = ntohs(in.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    if (!inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text)) return false;
    port = ntohs(in6.sin6_port);
  } else {
    return false;
  }
  addr = text;
  return true;
}

bool Matches(int fd, const std::string& local_addr, int local_port, const std::string& remote_addr,
             int remote_port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  std::string addr;
  int port = 0;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || !Describe(a, addr, port) ||
      port != local_port || addr != local_addr) {
    return false;
  }
  len = sizeof a;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0 && Describe(a, addr, port) &&
         port == remote_port && addr == remote_addr;
}

}  // namespace

int FindConnectionSocket(const std::string& local_addr, int local_port,
                         const std::string& remote_addr, int remote_port) {
  // Handler threads serve one connection after another; the last one found is the usual answer.
  thread_local int last = -1;
  if (last >= 0 && Matches(last, local_addr, local_port, remote_addr, remote_port)) return last;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (Matches(static_cast<int>(fd), local_addr, local_port, remote_addr, remote_port)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  last = found;
  return found;
}

DisconnectWatcher::DisconnectWatcher() : thread_([this] { Loop(); }) {}

DisconnectWatcher::~DisconnectWatcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_requested_.notify_all();
  thread_.join();
}

DisconnectWatcher::Guard DisconnectWatcher::Watch(int socket, std::function<void()> cancel) {
  if (socket < 0) return Guard(nullptr, 0);
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_id_++;
  entries_.emplace(id, Entry{socket, std::move(cancel)});
  return Guard(this, id);
}

DisconnectWatcher::Guard::~Guard() {
  if (watcher_ == nullptr) return;
  // Under the lock, so that the watcher never polls this socket after the guard is gone.
  std::lock_guard lock(watcher_->mutex_);
  watcher_->entries_.erase(id_);
}

void DisconnectWatcher::Loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    stop_requested_.wait_for(lock, std::chrono::milliseconds(50));
    if (stopping_ || entries_.empty()) continue;
    std::vector<pollfd> fds;
    std::vector<std::uint64_t> ids;
    for (const auto& [id, entry] : entries_) {
      fds.push_back({entry.socket, POLLRDHUP, 0});
      ids.push_back(id);
    }
    poll(fds.data(), fds.size(), 0);
    std::vector<std::function<void()>> to_cancel;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
        auto it = entries_.find(ids[i]);
        to_cancel.push_back(std::move(it->second.cancel));
        entries_.erase(it);
      }
    }
    // Cancel functions only mark contexts done, but run them unlocked all the same.
    lock.unlock();
    for (auto& cancel : to_cancel) cancel();
    lock.lock();
  }
}

}  // namespace git_mirror
