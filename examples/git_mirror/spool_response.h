// SpoolResponse: one client's response served from a spool (spool.h) at the client's own pace:
// the header (and a prefix) once the first bytes are there, chunks as the spool grows, the end
// once the writer has ended well. If the writer fails before anything was sent, the client gets
// the writer's outcome as an error answer; if after, an incomplete response (so it never takes a
// truncated pack for a whole one).
//
// Lifetime: shared, held by its pending operations. Runs on its exchange's strand.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_SPOOL_RESPONSE_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_SPOOL_RESPONSE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fairgate/status.h"
#include "http_server.h"
#include "spool.h"

namespace git_mirror {

class SpoolResponse : public std::enable_shared_from_this<SpoolResponse> {
 public:
  // How it ended: OK (sent whole), Unavailable (the client went away or was too slow), or the
  // writer's failure.
  using Done = std::function<void(const fairgate::Status&)>;
  // Answers an error to a client whose response has not started.
  using ReplyError = std::function<void(HttpExchange&, const fairgate::Status&)>;

  // Joins `spool` for `exchange`; nullptr if the spool is closed to joiners.
  static std::shared_ptr<SpoolResponse> Join(std::shared_ptr<Spool> spool,
                                             std::shared_ptr<HttpExchange> exchange,
                                             std::string content_type, std::string prefix,
                                             ReplyError reply_error, Done done);
  // Begins sending (and watching for the client leaving).
  void Start();
  // The client is gone or too slow: leaves the spool; reports Unavailable.
  void Cut();

 private:
  SpoolResponse(std::shared_ptr<Spool> spool, std::shared_ptr<HttpExchange> exchange,
                std::string content_type, std::string prefix, ReplyError reply_error, Done done);
  void Pump();
  void End(const fairgate::Status& status);

  const std::shared_ptr<Spool> spool_;
  const std::shared_ptr<HttpExchange> exchange_;
  const std::string content_type_;
  const std::string prefix_;
  const ReplyError reply_error_;
  const Done done_;
  Spool::ReaderId reader_ = 0;
  std::vector<char> buffer_;  // allocated while it streams
  std::uint64_t sent_ = 0;
  bool streaming_ = false, sending_ = false, ended_ = false;
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_SPOOL_RESPONSE_H_
