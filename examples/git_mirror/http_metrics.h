// HttpMetrics: what the mirror's front door did, in the Prometheus text format, beside the
// scheduler's own metrics on /metrics. Labels are the route (info_refs, upload_pack, metrics,
// debug, other), the HTTP status and a reason word: never a client, a repository or a path.
//
// Thread safety: every method may be called from any thread at once.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_HTTP_METRICS_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_HTTP_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "body_budget.h"

namespace git_mirror {

class HttpMetrics {
 public:
  void Request(std::string_view route, unsigned status);
  void BytesSent(std::string_view route, std::uint64_t bytes);
  // A response that could not be sent whole: "write_timeout" (too slow), "client_gone".
  void TransferCut(std::string_view route, std::string_view reason);
  void ConnectionOpened();
  void ConnectionClosed();
  // A connection closed at once: "per_client" or "total" limit, "header_timeout", "idle_timeout".
  void ConnectionDropped(std::string_view reason);
  // An accept that failed for want of descriptors or memory (the loop then pauses).
  void AcceptFailed();
  // The budget whose holding and limit the exposition shows (the server's, set once).
  void ShowBodyBudget(std::shared_ptr<const BodyBudget> budget);
  // Appends the exposition.
  void Write(std::string& out) const;

  std::uint64_t transfers_cut() const;
  std::int64_t connections_open() const;
  std::uint64_t accept_failures() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, unsigned>, std::uint64_t> requests_;
  std::map<std::string, std::uint64_t> bytes_sent_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> transfers_cut_;
  std::map<std::string, std::uint64_t> dropped_;
  std::int64_t open_ = 0;
  std::uint64_t opened_total_ = 0;
  std::uint64_t accept_failures_ = 0;
  std::shared_ptr<const BodyBudget> body_budget_;
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_HTTP_METRICS_H_
