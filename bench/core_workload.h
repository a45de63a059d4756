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

inline std::unique_ptr<core::AdmissionCore> MakeCore() {
  SchedulerOptions options = SchedulerOptions::Default();
  options.max_concurrency = kCapacity;
  auto core = *core::AdmissionCore::Create(options);
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

inline void Enqueue(core::AdmissionCore& core, Workload& w, double now) {
  static const char* kTypes[] = {"clone", "archive", "clone", "fetch"};
  auto ticket = core.Enqueue({kTypes[w.rng() % 4], w.Id(), w.Key()}, now);
  if (!ticket.ok()) std::abort();
}

}  // namespace fairgate::bench

#endif  // FAIRGATE_BENCH_CORE_WORKLOAD_H_
