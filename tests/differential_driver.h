// The differential driver: one configuration and one sequence of operations, drawn from a source
// of choices, run on AdmissionCore and on the ReferenceModel side by side, comparing everything
// the model knows after every operation: each status, each admission (which job, what charge),
// every accumulated cost, every estimate, MaxWaitToCeiling of every type, the pending, running,
// key and estimate counts, and the jobs aged into each tier; and the core's own invariants
// (AdmissionCore::CheckInvariants) after every operation. Every other enqueue goes through
// EnqueueAndAdmit, the runtime's call, its admission compared as NextAdmission's would be.
//
// The same driver serves the random differential tests (tests/core_differential_test.cc, choices
// from a seeded generator) and the fuzzer (fuzz/core_differential_fuzz.cc, choices from its
// bytes), so the two cannot drift apart.
#ifndef FAIRGATE_TESTS_DIFFERENTIAL_DRIVER_H_
#define FAIRGATE_TESTS_DIFFERENTIAL_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fairgate/options.h"

namespace fairgate::testing {

// Where the driver's decisions come from.
class Choices {
 public:
  virtual ~Choices() = default;
  // A number in [0, n), n >= 1.
  virtual std::size_t Index(std::size_t n) = 0;
  // True with probability `p`.
  virtual bool Chance(double p) = 0;
  // Whether the sequence must end now (a fuzzer's bytes are used up).
  virtual bool Exhausted() const = 0;

  template <typename T>
  const T& Pick(const std::vector<T>& values) {
    return values[Index(values.size())];
  }
  int Between(int low, int high) {
    return low + static_cast<int>(Index(static_cast<std::size_t>(high - low + 1)));
  }
};

// Choices from a seeded generator: the same seed, the same sequence.
class RandomChoices : public Choices {
 public:
  explicit RandomChoices(std::uint64_t seed) : rng_(seed) {}
  std::size_t Index(std::size_t n) override {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }
  bool Chance(double p) override { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  bool Exhausted() const override { return false; }

 private:
  std::mt19937_64 rng_;
};

struct DriverConfig {
  // The preset and switches the sequence starts from; the driver draws the sizes, the TTLs, the
  // queue bounds and the types.
  SchedulerOptions base;
  // Also draw aging, shortest-first, default key limits, weights and per-key limits, conflict
  // limits, multi-slot types, queue-wait limits, pauses of types and keys, coalescing types with
  // requests that join, and changes of the global cap in force (SetCapacity).
  bool extensions = false;
  // Also draw idle catch-up (else it is the base's).
  bool draw_idle_catch_up = false;
  // Also draw workers (fairgate/worker.h): types with tags, workers added, changed and removed
  // (with their running jobs) along the sequence, and the sole-worker reservation's wait.
  bool workers = false;
  // Also draw groups of keys (AdmissionCore::SetKeyGroup, SetGroupWeight): keys put in one of
  // three groups or none, at the start and along the sequence, with or without jobs.
  bool groups = false;
  int max_operations = 120;
};

struct DriverResult {
  int operations = 0;
  int admissions = 0;
  int expiries = 0;          // jobs that reached their queue-wait limit
  int sheds = 0;             // pending jobs refused by their type's shedding (of the expiries)
  int shed_refusals = 0;     // calls refused at their arrival by their type's shedding
  int joins = 0;             // requests that joined a job (coalescing)
  int capacity_changes = 0;  // SetCapacity calls both accepted
  int lost = 0;              // running jobs ended by a worker's removal
  int worker_reserved = 0;   // admissions made by a sole-worker reservation
  int borrowed = 0;          // admissions over a tier's cap (RuleOptions::lending)
  int group_moves = 0;       // keys with jobs moved to another group
  // Empty when the core and the model agreed throughout; else the first difference, with the
  // operation it came after.
  std::string difference;
};

DriverResult RunDifferential(Choices& choices, const DriverConfig& config);

}  // namespace fairgate::testing

#endif  // FAIRGATE_TESTS_DIFFERENTIAL_DRIVER_H_
