// DisconnectWatcher: cancels a request's work when its client hangs up.
//
// A client that gives up (git killed, Ctrl-C, a proxy timing out) closes its connection. While
// its request waits for admission or runs, one watcher thread polls the connection every 50 ms and
// calls the request's cancel function once the peer has closed it, so the job leaves the queue
// without ever taking a slot, or its git process is killed.
//
// FindConnectionSocket exists because httplib 0.11 (Debian 12) does not hand the socket to a
// handler: it finds the one descriptor whose local and peer addresses are the request's (a TCP
// connection's four-tuple is unique while it is open).
//
// Thread safety: Watch may be called from any thread; the returned guard must be destroyed on the
// thread that created it, before the connection's socket is closed (that is, before the handler
// returns).
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_DISCONNECT_WATCHER_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_DISCONNECT_WATCHER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace git_mirror {

// The socket of the open TCP connection local_addr:local_port <-> remote_addr:remote_port, or -1.
int FindConnectionSocket(const std::string& local_addr, int local_port,
                         const std::string& remote_addr, int remote_port);

class DisconnectWatcher {
 public:
  DisconnectWatcher();
  ~DisconnectWatcher();
  DisconnectWatcher(const DisconnectWatcher&) = delete;
  DisconnectWatcher& operator=(const DisconnectWatcher&) = delete;

  class Guard {
   public:
    Guard(DisconnectWatcher* watcher, std::uint64_t id) : watcher_(watcher), id_(id) {}
    Guard(Guard&& other) noexcept : watcher_(other.watcher_), id_(other.id_) {
      other.watcher_ = nullptr;
    }
    Guard(const Guard&) = delete;
    ~Guard();

   private:
    DisconnectWatcher* watcher_;
    std::uint64_t id_;
  };

  // Calls `cancel` (once, from the watcher thread) if the peer of `socket` closes the connection
  // before the guard is destroyed. A negative socket is never watched.
  Guard Watch(int socket, std::function<void()> cancel);

 private:
  struct Entry {
    int socket;
    std::function<void()> cancel;
  };
  void Loop();

  std::mutex mutex_;
  std::condition_variable stop_requested_;
  bool stopping_ = false;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, Entry> entries_;
  std::thread thread_;
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_DISCONNECT_WATCHER_H_
