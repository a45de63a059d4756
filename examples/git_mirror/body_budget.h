// BodyBudget: the memory that request bodies held by the whole server may take, as sent and once
// inflated, whatever clients send: each request is within its own limits, but many at once, or
// one client's gzip bodies that each inflate a thousandfold, must not add up past this.
//
// A BodyLease counts one request's body against the budget for as long as it lives: it grows as
// the body is read or inflated (a step the budget has no room for is refused, and the request is
// answered 503), shrinks when the body is dropped, and gives everything back when destroyed. A
// body handed from the front door to the work it is for carries its lease along (RequestBody),
// so the bytes stay counted until git has read them.
//
// Thread safety: BodyBudget's methods may be called from any thread at once; a lease is used by
// one thread at a time.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_BODY_BUDGET_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_BODY_BUDGET_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

namespace git_mirror {

class BodyBudget {
 public:
  explicit BodyBudget(std::size_t limit) : limit_(limit) {}
  // Counts `bytes` more if the total stays within the limit; false (nothing counted) otherwise.
  bool TryTake(std::size_t bytes);
  void Give(std::size_t bytes);
  std::size_t held() const { return held_.load(std::memory_order_relaxed); }
  std::size_t limit() const { return limit_; }

 private:
  const std::size_t limit_;
  std::atomic<std::size_t> held_{0};
};

class BodyLease {
 public:
  BodyLease() = default;  // counts against nothing: any size is allowed
  explicit BodyLease(std::shared_ptr<BodyBudget> budget) : budget_(std::move(budget)) {}
  BodyLease(BodyLease&& other) noexcept;
  BodyLease& operator=(BodyLease&& other) noexcept;
  ~BodyLease();

  // Counts exactly `bytes` from now on; false if growing to it would pass the budget (then the
  // count is unchanged).
  bool Resize(std::size_t bytes);
  std::size_t bytes() const { return bytes_; }

 private:
  std::shared_ptr<BodyBudget> budget_;
  std::size_t bytes_ = 0;
};

// A request's body taken from its exchange, still counted.
struct RequestBody {
  std::string bytes;
  BodyLease lease;
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_BODY_BUDGET_H_
