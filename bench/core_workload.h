// The workload of the core benchmarks: the git mirror's job types over a backlog of clients and
// repositories, shared by core_bench (timed) and core_instructions (counted under callgrind).
#ifndef FAIRGATE_BENCH_CORE_WORKLOAD_H_
#define FAIRGATE_BENCH_CORE_WORKLOAD_H_

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/admission_core.h"

namespace fairgate::bench {

inline constexpr int kCapacity = 64;

struct Workload {
  std::vector<std::string> keys;
  std::vector<std::string> ids;
  std::mt19937_64 rng{42};

  Workload(int key_count, int id_count) {
    for (int i = 0; i < key_count; ++i) keys.push_back("client-" + std::to_string(i));
    for (int i = 0; i < id_count; ++i) ids.push_back("repo-" + std::to_string(i) + ".git");
  }
  const std::string& Key() { return keys[rng() % keys.size()]; }
  const std::string& Id() { return ids[rng() % ids.size()]; }
};

// `key_rate`: every key's rate limit (KeyLimits::rate_limit; off by default).
inline std::unique_ptr<core::AdmissionCore> MakeCore(int capacity = kCapacity,
                                                     RateLimit key_rate = {}) {
  RuleOptions rule;
  rule.max_concurrency = capacity;
  rule.default_key_limits.rate_limit = key_rate;
  auto core = *core::AdmissionCore::Create(rule);
  // Two tiers; clones and fetches share a conflict group, as in the git mirror.
  (void)core->RegisterType(
      "clone",
      {.default_cost = 10, .max_concurrency = 48, .conflict_group = "git", .priority = 48});
  (void)core->RegisterType("archive", {.default_cost = 3, .max_concurrency = 48, .priority = 48});
  (void)core->RegisterType(
      "fetch",
      {.default_cost = 20, .max_concurrency = 16, .conflict_group = "git", .priority = 16});
  return core;
}

// A herd on one resource: `waiters` clones of one repository (exclusive: conflict_limit 1) from
// `keys` clients, one running at a time. Each step completes the running clone, enqueues a new
// one (the herd stays the same size) and admits the next. After each operation it asks for
// admissions until there is none, as the runtime does: the question asked while the repository
// is busy is what finds the waiters at the front and parks them.
class Herd {
 public:
  Herd(int waiters, int keys) : keys_(keys) {
    RuleOptions rule;
    rule.max_concurrency = kCapacity;
    core_ = *core::AdmissionCore::Create(rule);
    (void)core_->RegisterType(
        "clone",
        {.default_cost = 10, .max_concurrency = 48, .conflict_group = "git", .priority = 48});
    for (int i = 0; i < waiters; ++i) Add();
    if (!AdmitAll()) std::abort();
  }
  void Step() {
    now_ += 0.001;
    if (!core_->Complete(running_, 1.0, now_).ok()) std::abort();
    if (!AdmitAll()) std::abort();
    Add();
    if (AdmitAll()) std::abort();  // the repository is busy
  }
  core::AdmissionCore& core() { return *core_; }

 private:
  // Whether one job was admitted (never more: they all share one repository).
  bool AdmitAll() {
    bool admitted = false;
    while (auto a = core_->NextAdmission(now_)) {
      if (admitted) std::abort();
      running_ = a->ticket;
      admitted = true;
    }
    return admitted;
  }
  void Add() {
    const std::string key = "client-" + std::to_string(next_++ % keys_);
    if (!core_->Enqueue({"clone", "linux.git", key}, now_).ok()) std::abort();
  }
  int keys_;
  int next_ = 0;
  double now_ = 0;
  std::unique_ptr<core::AdmissionCore> core_;
  core::JobTicket running_;
};

inline void Enqueue(core::AdmissionCore& core, Workload& w, double now) {
  static const char* kTypes[] = {"clone", "archive", "clone", "fetch"};
  auto ticket = core.Enqueue({kTypes[w.rng() % 4], w.Id(), w.Key()}, now);
  if (!ticket.ok()) std::abort();
}

}  // namespace fairgate::bench

#endif  // FAIRGATE_BENCH_CORE_WORKLOAD_H_
