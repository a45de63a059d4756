// How many bytes of what was written to a TCP socket its peer has acknowledged: the bytes the
// client has really taken, as against those still in the server's send buffer.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_TCP_PROGRESS_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_TCP_PROGRESS_H_

#include <cstdint>
#include <optional>

namespace git_mirror {

// The socket's count of bytes acknowledged by the peer since it opened (Linux's TCP_INFO
// `tcpi_bytes_acked`), or nullopt if the kernel does not tell (not TCP, or too old).
std::optional<std::uint64_t> TcpBytesAcked(int fd);

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_TCP_PROGRESS_H_
