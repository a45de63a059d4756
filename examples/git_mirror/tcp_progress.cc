// Linux's own tcp_info: glibc's <netinet/tcp.h> stops before `tcpi_bytes_acked`, and the two
// cannot be included together, so this file includes only the kernel's.
#include "tcp_progress.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace git_mirror {

std::optional<std::uint64_t> TcpBytesAcked(int fd) {
  tcp_info info{};
  socklen_t size = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0) return std::nullopt;
  if (size < offsetof(tcp_info, tcpi_bytes_acked) + sizeof info.tcpi_bytes_acked) {
    return std::nullopt;
  }
  return info.tcpi_bytes_acked;
}

}  // namespace git_mirror
