// Stores that pass every call to another store (a real SQLite or PostgreSQL one): a test derives
// from one and overrides the calls it watches or holds up.
#ifndef FAIRGATE_TESTS_FORWARDING_STORE_H_
#define FAIRGATE_TESTS_FORWARDING_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fairgate/status.h"
#include "fairgate/store.h"

namespace fairgate::testing {

// Every call of Store, on `Base` (Store or SharedStore), passed to `inner_`, but the queued calls
// (QueuesWrites, BeginAttemptsQueued, RemoveJobsQueued), which keep Store's defaults: a store
// derived from this one sees every mark and removal as a call of BeginAttempt(s) or
// RemoveJob(s), and the scheduler writes them from threads of its own.
template <typename Base>
class Forwarding : public Base {
 public:
  explicit Forwarding(std::shared_ptr<Base> inner) : inner_(std::move(inner)) {}

  StatusOr<std::uint64_t> AddJob(const StoredJob& job) override { return inner_->AddJob(job); }
  StatusOr<std::vector<std::uint64_t>> AddJobs(const std::vector<StoredJob>& jobs) override {
    return inner_->AddJobs(jobs);
  }
  StatusOr<std::uint32_t> BeginAttempt(std::uint64_t sequence) override {
    return inner_->BeginAttempt(sequence);
  }
  StatusOr<std::vector<StatusOr<std::uint32_t>>> BeginAttempts(
      const std::vector<std::uint64_t>& sequences) override {
    return inner_->BeginAttempts(sequences);
  }
  Status RemoveJob(std::uint64_t sequence) override { return inner_->RemoveJob(sequence); }
  StatusOr<std::vector<Status>> RemoveJobs(const std::vector<std::uint64_t>& sequences) override {
    return inner_->RemoveJobs(sequences);
  }
  Status DeferJob(std::uint64_t sequence, double not_before, std::string_view error) override {
    return inner_->DeferJob(sequence, not_before, error);
  }
  Status KillJob(std::uint64_t sequence, std::string_view error) override {
    return inner_->KillJob(sequence, error);
  }
  StatusOr<std::vector<StoredJob>> LiveJobs() override { return inner_->LiveJobs(); }
  StatusOr<std::vector<StoredJob>> DeadJobs() override { return inner_->DeadJobs(); }
  StatusOr<std::vector<StoredJob>> DeadJobsAfter(std::uint64_t after, std::size_t limit) override {
    return inner_->DeadJobsAfter(after, limit);
  }
  StatusOr<std::size_t> CountDeadJobs() override { return inner_->CountDeadJobs(); }
  StatusOr<StoredJob> ReviveJob(std::uint64_t sequence) override {
    return inner_->ReviveJob(sequence);
  }
  Status RemoveDeadJob(std::uint64_t sequence) override { return inner_->RemoveDeadJob(sequence); }
  Status BeginExclusiveUse() override { return inner_->BeginExclusiveUse(); }
  void EndExclusiveUse() override { inner_->EndExclusiveUse(); }
  Status SaveLearned(const LearnedState& changed, double forget_estimates_before,
                     double forget_keys_before) override {
    return inner_->SaveLearned(changed, forget_estimates_before, forget_keys_before);
  }
  StatusOr<LearnedState> LoadLearned() override { return inner_->LoadLearned(); }

 protected:
  std::shared_ptr<Base> inner_;
};

using ForwardingStore = Forwarding<Store>;

// And every call SharedStore adds but WaitForJobs, which keeps SharedStore's default
// (Unimplemented): replicas on this store claim every claim_interval, not when notified.
class ForwardingSharedStore : public Forwarding<SharedStore> {
 public:
  using Forwarding<SharedStore>::Forwarding;

  StatusOr<std::vector<StoredJob>> ClaimJobs(const std::vector<ClaimableType>& types,
                                             std::size_t max_jobs, double lease_seconds) override {
    return inner_->ClaimJobs(types, max_jobs, lease_seconds);
  }
  StatusOr<std::size_t> RenewLeases(double lease_seconds) override {
    return inner_->RenewLeases(lease_seconds);
  }
  Status ReleaseJob(std::uint64_t sequence) override { return inner_->ReleaseJob(sequence); }
  bool SurelyHolds(std::uint64_t sequence) override { return inner_->SurelyHolds(sequence); }
  Status CheckName(std::string_view name, std::string_view what) const override {
    return inner_->CheckName(name, what);
  }
  StatusOr<std::uint64_t> AcquireResource(std::string_view group, std::string_view id, int limit,
                                          double lease_seconds) override {
    return inner_->AcquireResource(group, id, limit, lease_seconds);
  }
  Status ReleaseResource(std::string_view group, std::string_view id,
                         std::uint64_t token) override {
    return inner_->ReleaseResource(group, id, token);
  }
  StatusOr<std::vector<SavedKey>> ShareKeyCosts(const std::vector<SavedKey>& charged,
                                                const std::vector<std::string>& keys) override {
    return inner_->ShareKeyCosts(charged, keys);
  }
  StatusOr<TokenLease> TakeTokens(std::string_view bucket, const RateLimit& limit,
                                  int want) override {
    return inner_->TakeTokens(bucket, limit, want);
  }
};

}  // namespace fairgate::testing

#endif  // FAIRGATE_TESTS_FORWARDING_STORE_H_
