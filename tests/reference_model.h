// ReferenceModel: the admission rule of DESIGN.md written as plainly as possible, for the
// differential tests. Every operation scans everything (O(n)); nothing is cached or indexed, so
// that each line can be checked against the text of the rule by reading it.
//
// It mirrors AdmissionCore's API and its documented tie-breaks: idle keys are evicted in the order
// they became idle and estimates in the order they were last used, each sweep stopping at the
// first that is still fresh and after `sweep_batch` evictions.
#ifndef FAIRGATE_TESTS_REFERENCE_MODEL_H_
#define FAIRGATE_TESTS_REFERENCE_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "fairgate/job_type.h"
#include "fairgate/options.h"
#include "fairgate/status.h"

namespace fairgate::testing {

class ReferenceModel {
 public:
  struct Admission {
    int job;
    double charge;
  };

  explicit ReferenceModel(const SchedulerOptions& options) : options_(options) {}

  Status RegisterType(const std::string& name, const JobTypeConfig& config);
  // Returns the model's id of the job.
  StatusOr<int> Enqueue(const std::string& type, const std::string& id, const std::string& key,
                        std::optional<double> cost, double now);
  Status Cancel(int job, double now);
  std::optional<Admission> NextAdmission(double now);
  Status Complete(int job, double elapsed, double now);
  // Returns (keys evicted, estimates evicted).
  std::pair<std::size_t, std::size_t> Sweep(double now);

  std::optional<double> AccumulatedCost(const std::string& key) const;
  std::optional<double> Estimate(const std::string& type, const std::string& id) const;
  const std::map<std::string, double> Keys() const;
  std::size_t estimates_tracked() const { return estimates_.size(); }
  std::int64_t pending() const;
  std::int64_t running() const;

 private:
  struct ModelJob {
    std::string type, id, key;
    std::optional<double> cost;
    double arrival = 0;
    std::uint64_t seq = 0;
    bool running = false;
    double charge = 0;
  };
  struct ModelKey {
    double acc = 0;
    double idle_since = 0;
    std::uint64_t idle_order = 0;
  };
  struct ModelEstimate {
    double value = 0;
    double last_used = 0;
    std::uint64_t use_order = 0;
  };

  bool KeyBusy(const std::string& key) const;
  bool Admissible(const ModelJob& job) const;
  double& UseEstimate(const ModelJob& job, double now);
  void MaybeIdle(const std::string& key, double now);

  SchedulerOptions options_;
  std::map<std::string, JobTypeConfig> types_;
  std::map<int, ModelJob> jobs_;  // pending and running
  std::map<std::string, ModelKey> keys_;
  std::map<std::pair<std::string, std::string>, ModelEstimate> estimates_;
  int next_job_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t next_order_ = 0;
};

}  // namespace fairgate::testing

#endif  // FAIRGATE_TESTS_REFERENCE_MODEL_H_
