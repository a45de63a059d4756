#include "http_metrics.h"

#include "absl/strings/str_cat.h"

namespace git_mirror {

void HttpMetrics::Request(std::string_view route, unsigned status) {
  std::lock_guard lock(mutex_);
  ++requests_[{std::string(route), status}];
}

void HttpMetrics::BytesSent(std::string_view route, std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  bytes_sent_[std::string(route)] += bytes;
}

void HttpMetrics::TransferCut(std::string_view route, std::string_view reason) {
  std::lock_guard lock(mutex_);
  ++transfers_cut_[{std::string(route), std::string(reason)}];
}

void HttpMetrics::ConnectionOpened() {
  std::lock_guard lock(mutex_);
  ++open_;
  ++opened_total_;
}

void HttpMetrics::ConnectionClosed() {
  std::lock_guard lock(mutex_);
  --open_;
}

void HttpMetrics::ConnectionDropped(std::string_view reason) {
  std::lock_guard lock(mutex_);
  ++dropped_[std::string(reason)];
}

void HttpMetrics::AcceptFailed() {
  std::lock_guard lock(mutex_);
  ++accept_failures_;
}

void HttpMetrics::ShowBodyBudget(std::shared_ptr<const BodyBudget> budget) {
  std::lock_guard lock(mutex_);
  body_budget_ = std::move(budget);
}

std::uint64_t HttpMetrics::accept_failures() const {
  std::lock_guard lock(mutex_);
  return accept_failures_;
}

std::uint64_t HttpMetrics::transfers_cut() const {
  std::lock_guard lock(mutex_);
  std::uint64_t n = 0;
  for (const auto& [labels, count] : transfers_cut_) n += count;
  return n;
}

std::int64_t HttpMetrics::connections_open() const {
  std::lock_guard lock(mutex_);
  return open_;
}

void HttpMetrics::Write(std::string& out) const {
  std::lock_guard lock(mutex_);
  auto family = [&](const char* name, const char* type, const char* help) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  };
  family("git_mirror_http_requests_total", "counter",
         "HTTP requests answered, by route and status.");
  for (const auto& [labels, n] : requests_) {
    absl::StrAppend(&out, "git_mirror_http_requests_total{code=\"", labels.second, "\",route=\"",
                    labels.first, "\"} ", n, "\n");
  }
  family("git_mirror_http_response_bytes_total", "counter",
         "Bytes of response bodies sent, by route.");
  for (const auto& [route, n] : bytes_sent_) {
    absl::StrAppend(&out, "git_mirror_http_response_bytes_total{route=\"", route, "\"} ", n, "\n");
  }
  family("git_mirror_http_transfers_cut_total", "counter",
         "Responses cut before their end, by route and reason.");
  for (const auto& [labels, n] : transfers_cut_) {
    absl::StrAppend(&out, "git_mirror_http_transfers_cut_total{reason=\"", labels.second,
                    "\",route=\"", labels.first, "\"} ", n, "\n");
  }
  family("git_mirror_http_connections_open", "gauge", "Connections open now.");
  absl::StrAppend(&out, "git_mirror_http_connections_open ", open_, "\n");
  family("git_mirror_http_connections_total", "counter", "Connections accepted.");
  absl::StrAppend(&out, "git_mirror_http_connections_total ", opened_total_, "\n");
  family("git_mirror_http_connections_dropped_total", "counter",
         "Connections closed by a limit, by reason.");
  for (const auto& [reason, n] : dropped_) {
    absl::StrAppend(&out, "git_mirror_http_connections_dropped_total{reason=\"", reason, "\"} ", n,
                    "\n");
  }
  family("git_mirror_http_accept_failures_total", "counter",
         "Accepts that failed for want of descriptors or memory (each followed by a pause).");
  absl::StrAppend(&out, "git_mirror_http_accept_failures_total ", accept_failures_, "\n");
  if (body_budget_ == nullptr) return;
  family("git_mirror_http_request_body_bytes", "gauge",
         "Bytes of request bodies held now, as sent and inflated, all connections together.");
  absl::StrAppend(&out, "git_mirror_http_request_body_bytes ", body_budget_->held(), "\n");
  family("git_mirror_http_request_body_bytes_limit", "gauge",
         "The budget for request bodies held at once.");
  absl::StrAppend(&out, "git_mirror_http_request_body_bytes_limit ", body_budget_->limit(), "\n");
}

}  // namespace git_mirror
