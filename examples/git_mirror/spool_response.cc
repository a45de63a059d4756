#include "spool_response.h"

#include <cstdio>
#include <utility>

namespace git_mirror {

namespace {
constexpr std::size_t kChunk = 64 * 1024;
}  // namespace

std::shared_ptr<SpoolResponse> SpoolResponse::Join(std::shared_ptr<Spool> spool,
                                                   std::shared_ptr<HttpExchange> exchange,
                                                   std::string content_type, std::string prefix,
                                                   ReplyError reply_error, Done done) {
  std::shared_ptr<SpoolResponse> response(
      new SpoolResponse(std::move(spool), std::move(exchange), std::move(content_type),
                        std::move(prefix), std::move(reply_error), std::move(done)));
  std::weak_ptr<SpoolResponse> weak = response;
  auto reader = response->spool_->Join(response->exchange_->executor(), [weak] {
    if (auto self = weak.lock()) self->Pump();
  });
  if (!reader) return nullptr;
  response->reader_ = *reader;
  return response;
}

SpoolResponse::SpoolResponse(std::shared_ptr<Spool> spool, std::shared_ptr<HttpExchange> exchange,
                             std::string content_type, std::string prefix, ReplyError reply_error,
                             Done done)
    : spool_(std::move(spool)),
      exchange_(std::move(exchange)),
      content_type_(std::move(content_type)),
      prefix_(std::move(prefix)),
      reply_error_(std::move(reply_error)),
      done_(std::move(done)) {}

void SpoolResponse::Start() {
  // Held by the exchange until the response starts, or the client leaves.
  exchange_->OnClientGone([self = shared_from_this()] { self->Cut(); });
  Pump();
}

void SpoolResponse::Pump() {
  if (sending_ || ended_) return;
  const Spool::View view = spool_->view();
  auto self = shared_from_this();
  if (view.ended && !view.outcome.ok()) {
    if (!streaming_) {
      reply_error_(*exchange_, view.outcome);
    } else {
      exchange_->Abort();  // too late for a status: the client sees an incomplete response
    }
    return End(view.outcome);
  }
  if (sent_ == view.size && !view.ended) return spool_->WaitForMore(reader_);
  if (!streaming_) {
    streaming_ = true;
    sending_ = true;
    return exchange_->StartStream(
        200, content_type_, {{"Cache-Control", "no-cache"}}, [self](bool ok) {
          auto then = [self](bool written) {
            self->sending_ = false;
            if (!written) return self->Cut();
            self->Pump();
          };
          if (!ok || self->prefix_.empty()) return then(ok);
          self->exchange_->WriteChunk(self->prefix_.data(), self->prefix_.size(), then);
        });
  }
  if (sent_ == view.size) {  // ended well, all sent
    sending_ = true;
    return exchange_->FinishStream([self](bool done) {
      if (!done) return self->Cut();
      self->End(absl::OkStatus());
    });
  }
  if (buffer_.empty()) buffer_.resize(kChunk);
  auto read = spool_->ReadAt(sent_, buffer_.data(), buffer_.size());
  if (!read.ok() || *read == 0) {
    std::fprintf(
        stderr, "fairgate-git-mirror: %s\n",
        read.ok() ? "a spool file came up short" : std::string(read.status().message()).c_str());
    exchange_->Abort();
    return End(absl::InternalError("the spool could not be read"));
  }
  sending_ = true;
  exchange_->WriteChunk(buffer_.data(), *read, [self, n = *read](bool ok) {
    self->sending_ = false;
    if (!ok) return self->Cut();
    self->sent_ += n;
    self->spool_->Sent(self->reader_, self->sent_);
    self->Pump();
  });
}

void SpoolResponse::Cut() {
  End(absl::UnavailableError("the transfer was cut: the client went away or read too slowly"));
}

void SpoolResponse::End(const fairgate::Status& status) {
  if (ended_) return;
  ended_ = true;
  buffer_ = {};
  spool_->Leave(reader_);
  done_(status);
}

}  // namespace git_mirror
