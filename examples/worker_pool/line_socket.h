// LineSocket: one connected Unix stream socket read and written a line at a time, the transport
// of the worker pool's protocol (README.md). Writes from several threads are whole lines, never
// interleaved; one thread reads.
#ifndef FAIRGATE_EXAMPLES_WORKER_POOL_LINE_SOCKET_H_
#define FAIRGATE_EXAMPLES_WORKER_POOL_LINE_SOCKET_H_

#include <mutex>
#include <optional>
#include <string>

namespace worker_pool {

class LineSocket {
 public:
  explicit LineSocket(int fd) : fd_(fd) {}
  ~LineSocket();
  LineSocket(const LineSocket&) = delete;
  LineSocket& operator=(const LineSocket&) = delete;

  // Connects to the socket at `path`; null (errno set) if it cannot.
  static std::optional<int> Connect(const std::string& path);
  // Sends `line` and a newline; false once the peer is gone.
  bool Send(const std::string& line);
  // The next line without its newline; nothing at end of stream or on an error.
  std::optional<std::string> Receive();
  // Ends both directions: a reader blocked in Receive returns nothing.
  void Shutdown();

 private:
  const int fd_;
  std::mutex write_mutex_;
  std::string buffer_;  // read, not yet returned
};

}  // namespace worker_pool

#endif  // FAIRGATE_EXAMPLES_WORKER_POOL_LINE_SOCKET_H_
