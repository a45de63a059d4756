#include "differential_driver.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "core/admission_core.h"
#include "reference_model.h"

namespace fairgate::testing {
namespace {

using core::AdmissionCore;
using core::JobTicket;

// One request both accepted. Requests that joined one job (coalescing) share its ticket.
struct Tracked {
  JobTicket ticket;
  int model_job;
  enum { kPending, kRunning, kGone } state;
};

// Mostly a job in `preferred` state; sometimes any job, to compare the refusals too.
Tracked* PickJob(Choices& choices, std::vector<Tracked>& jobs, int preferred) {
  if (jobs.empty()) return nullptr;
  if (!choices.Chance(0.1)) {
    std::vector<Tracked*> matching;
    for (Tracked& j : jobs) {
      if (j.state == preferred) matching.push_back(&j);
    }
    if (!matching.empty()) return matching[choices.Index(matching.size())];
  }
  return &jobs[choices.Index(jobs.size())];
}

template <typename T>
std::string Show(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string Show(const std::optional<double>& value) {
  return value ? Show(*value) : std::string("none");
}

// One run: the core, the model, the jobs both know, and the first difference.
class Run {
 public:
  Run(Choices& choices, const DriverConfig& config) : choices_(choices), config_(config) {}

  DriverResult Go() {
    SchedulerOptions options = DrawOptions();
    auto created = AdmissionCore::Create(options.rule);
    if (!created.ok()) {
      Fail("Create refused valid options: " + created.status().ToString());
      return result_;
    }
    core_ = std::move(*created);
    model_.emplace(options);
    if (!RegisterTypes()) return result_;
    if (config_.workers) {
      for (int i = choices_.Between(0, 3); i > 0; --i) {
        if (!ChangeWorkers()) return result_;
      }
    }
    for (int op = 0; op < config_.max_operations && !choices_.Exhausted(); ++op) {
      result_.operations = op + 1;
      if (!Operate() || !Compare()) return result_;
      if (Status broken = core_->CheckInvariants(); !broken.ok()) {
        Fail(std::string(broken.message()));
        return result_;
      }
    }
    return result_;
  }

 private:
  SchedulerOptions DrawOptions() {
    SchedulerOptions options = config_.base;
    if (config_.extensions) {
      if (choices_.Chance(0.7)) {
        options.rule.aging = AgingConfig{Seconds(choices_.Pick(std::vector<double>{0, 1, 2.5})),
                                         Seconds(choices_.Pick(std::vector<double>{0.5, 1, 3})),
                                         choices_.Pick(std::vector<int>{1, 2, 3, 5, 10})};
      }
      options.rule.shortest_first = choices_.Chance(0.2);
      if (choices_.Chance(0.4)) {
        options.rule.shortest_first_aging = choices_.Pick(std::vector<double>{0.1, 0.5, 2, 0.37});
      }
      if (choices_.Chance(0.3)) {
        const int max = choices_.Between(1, 3);
        options.rule.default_key_limits = {max, choices_.Between(0, max)};
      }
      if (choices_.Chance(0.1)) {
        options.rule.default_key_limits.rate_limit = DrawRateLimit();
        options.rule.default_key_limits.rate_per_weight = choices_.Chance(0.5);
      }
    }
    if (config_.groups && choices_.Chance(0.3)) {
      const int max = choices_.Between(1, 3);
      options.rule.default_group_limits = {max, choices_.Between(0, max)};
    }
    if (config_.draw_idle_catch_up) options.rule.idle_catch_up = choices_.Chance(0.5);
    if (config_.workers) {
      options.rule.sole_worker_reserve_after = Seconds(choices_.Pick(
          std::vector<double>{0.5, 1, 3, 2.25, std::numeric_limits<double>::infinity()}));
    }
    options.rule.max_concurrency = choices_.Between(1, 6);
    options.rule.alpha = choices_.Pick(std::vector<double>{0.3, 0.5, 1.0, 0.123});
    options.rule.key_ttl = Seconds(choices_.Pick(std::vector<double>{1, 3, 8, 20}));
    options.rule.estimate_ttl = Seconds(choices_.Pick(std::vector<double>{1, 5, 12, 30}));
    options.rule.sweep_batch = static_cast<std::size_t>(choices_.Between(1, 3));
    if (choices_.Chance(0.3)) options.rule.max_pending_total = choices_.Between(3, 25);
    if (choices_.Chance(0.3)) options.rule.max_pending_per_key = choices_.Between(1, 8);
    if (config_.extensions && choices_.Chance(0.1)) options.rule.rate_limit = DrawRateLimit();
    // Lending (on in the default rule, off in seed mode) with shares whose products round both
    // ways, and off.
    if (config_.extensions && choices_.Chance(0.5)) {
      const double kept_back = choices_.Pick(std::vector<double>{-1, 0, 0.25, 0.34, 0.5, 0.9});
      options.rule.lending.reset();
      if (kept_back >= 0) options.rule.lending = TierLending{kept_back};
    }
    return options;
  }

  // A rate limit (fairgate/rate_limit.h) of a few tokens a second, so that the decisions a few
  // seconds apart find some buckets empty and some refilled; fractions that are not exact in
  // binary too, where the arithmetic of core and model must agree to the bit.
  RateLimit DrawRateLimit() {
    return {choices_.Pick(std::vector<double>{0.5, 1, 2, 3.3, 7}),
            choices_.Pick(std::vector<double>{1, 1.5, 2, 4})};
  }

  bool RegisterTypes() {
    const int type_count = choices_.Between(1, 5);
    std::vector<std::string> registered;
    // A group's conflict limit, drawn once per group so that its types usually agree; now and
    // then a type gives another, which both must refuse.
    const int git_limit = config_.extensions ? choices_.Between(1, 3) : 1;
    const int db_limit = config_.extensions ? choices_.Between(1, 2) : 1;
    for (int i = 0; i < type_count; ++i) {
      JobTypeConfig config;
      config.priority = choices_.Pick(std::vector<int>{1, 2, 3, 5});
      config.max_concurrency = choices_.Between(1, 3);
      config.conflict_group = choices_.Pick(std::vector<std::string>{"", "git", "git", "db"});
      config.default_cost = choices_.Pick(std::vector<double>{0, 1, 2.5, 10});
      config.shortest_first = config_.extensions && choices_.Chance(0.4);
      if (config_.extensions) {
        if (!config.conflict_group.empty()) {
          config.conflict_limit = choices_.Chance(0.1)             ? choices_.Between(1, 3)
                                  : config.conflict_group == "git" ? git_limit
                                                                   : db_limit;
        }
        if (choices_.Chance(0.3)) config.slots = choices_.Between(1, 3);
        if (choices_.Chance(0.3)) {
          config.max_queue_wait = Seconds(choices_.Pick(std::vector<double>{0.5, 1, 3, 6}));
        }
        if (choices_.Chance(0.4)) {
          config.coalesce = choices_.Chance(0.5) ? Coalesce::kJoin : Coalesce::kSupersede;
        }
        if (choices_.Chance(0.15)) config.rate_limit = DrawRateLimit();
        // Shedding, with targets and intervals that the driver's steps of time cross.
        if (choices_.Chance(0.25)) {
          config.shedding = {Seconds(choices_.Pick(std::vector<double>{0.5, 1, 2.5})),
                             Seconds(choices_.Pick(std::vector<double>{0.5, 1, 3}))};
        }
      }
      if (config_.workers) {
        for (const std::string tag : {"cpu", "gpu"}) {
          if (choices_.Chance(0.3)) config.tags.push_back(tag);
        }
      }
      const std::string name = "t" + std::to_string(i);
      const Status got = core_->RegisterType(name, config);
      const Status want = model_->RegisterType(name, config);
      if (got.code() != want.code()) return Fail("RegisterType " + name + ": " + got.ToString());
      types_.push_back(name);  // refused ones too: enqueues of them must be refused alike
      if (got.ok()) registered.push_back(name);
    }
    // The bound depends on the configuration alone: every type's, and a refusal for a stranger.
    for (const std::string& type : registered) {
      StatusOr<double> got = core_->MaxWaitToCeiling(type);
      StatusOr<double> want = model_->MaxWaitToCeiling(type);
      if (!got.ok() || !want.ok() || *got != *want) {
        return Fail("MaxWaitToCeiling(" + type + "): core " + Show(got.value_or(-1)) + ", model " +
                    Show(want.value_or(-1)));
      }
    }
    if (core_->MaxWaitToCeiling("unknown").status().code() != absl::StatusCode::kNotFound) {
      return Fail("MaxWaitToCeiling of an unknown type is not NotFound");
    }
    return true;
  }

  bool AdmitOne(bool& admitted) {
    const bool full = core_->full();
    std::optional<core::Admission> got = core_->NextAdmission(now_);
    admitted = got.has_value();
    return CompareAdmission(full, got, model_->NextAdmission(now_));
  }

  // One decision of both: whether a job is admitted, which, and its charge. `full`: whether the
  // core said its cap was full before it.
  bool CompareAdmission(bool full, const std::optional<core::Admission>& got,
                        const std::optional<ReferenceModel::Admission>& want) {
    if (full && got) return Fail("a job was admitted while full() said the cap was full");
    if (got.has_value() != want.has_value()) {
      return Fail(std::string("whether a job is admitted: core ") + (got ? "yes" : "no") +
                  ", model " + (want ? "yes" : "no"));
    }
    if (!got) return true;
    Tracked* t = nullptr;
    for (Tracked& j : jobs_) {
      if (j.state == Tracked::kPending && j.ticket == got->ticket) t = &j;
    }
    if (t == nullptr) return Fail("the core admitted a job that is not pending");
    if (t->model_job != want->job) {
      return Fail("which job is admitted: core's is the model's job " + Show(t->model_job) +
                  ", the model's is " + Show(want->job));
    }
    if (got->charge != want->charge) {
      return Fail("the charge: core " + Show(got->charge) + ", model " + Show(want->charge));
    }
    if (got->worker != want->worker || got->worker_reserved != want->worker_reserved) {
      return Fail("the worker: core '" + std::string(got->worker) + "'" +
                  (got->worker_reserved ? " (reserved)" : "") + ", model '" + want->worker + "'" +
                  (want->worker_reserved ? " (reserved)" : ""));
    }
    if (got->borrowed != want->borrowed) {
      return Fail(std::string("whether it borrowed a slot: core ") +
                  (got->borrowed ? "yes" : "no") + ", model " + (want->borrowed ? "yes" : "no"));
    }
    result_.worker_reserved += got->worker_reserved;
    result_.borrowed += got->borrowed;
    SetState(got->ticket, Tracked::kPending, Tracked::kRunning);
    ++result_.admissions;
    return true;
  }

  // Adds, changes or removes a worker (now and then a bad or unknown one), both sides.
  bool ChangeWorkers() {
    const std::string name = choices_.Pick(std::vector<std::string>{"w0", "w1", "w2", "w3"});
    const std::size_t what = choices_.Index(10);
    if (what < 3) {
      StatusOr<std::vector<core::LostJob>> got = core_->RemoveWorker(name, now_);
      StatusOr<std::vector<int>> want = model_->RemoveWorker(name, now_);
      if (got.status().code() != want.status().code()) {
        return Fail("RemoveWorker(" + name + "): core " + got.status().ToString() + ", model " +
                    want.status().ToString());
      }
      if (!got.ok()) return true;
      if (got->size() != want->size()) {
        return Fail("RemoveWorker(" + name + ") ended " + Show(got->size()) + " jobs, the model " +
                    Show(want->size()));
      }
      for (std::size_t i = 0; i < got->size(); ++i) {
        Tracked* t = nullptr;
        for (Tracked& j : jobs_) {
          if (j.state == Tracked::kRunning && j.ticket == (*got)[i].ticket) t = &j;
        }
        if (t == nullptr || t->model_job != (*want)[i]) {
          return Fail("RemoveWorker(" + name + "): lost job " + Show(i) + " differs");
        }
        SetState((*got)[i].ticket, Tracked::kRunning, Tracked::kGone);
        ++result_.lost;
      }
      return true;
    }
    WorkerConfig config;
    config.slots = choices_.Chance(0.03) ? 0 : choices_.Between(1, 3);
    for (const std::string& type : types_) {
      if (choices_.Chance(0.4)) config.types.push_back(type);
    }
    if (choices_.Chance(0.3)) config.types.push_back("not-registered");
    for (const std::string tag : {"cpu", "gpu"}) {
      if (choices_.Chance(0.25)) config.tags.push_back(tag);
    }
    const bool update = what < 5;
    const Status got = update ? core_->UpdateWorker(name, config) : core_->AddWorker(name, config);
    const Status want =
        update ? model_->UpdateWorker(name, config) : model_->AddWorker(name, config);
    if (got.code() != want.code()) {
      return Fail(std::string(update ? "UpdateWorker(" : "AddWorker(") + name + "): core " +
                  got.ToString() + ", model " + want.ToString());
    }
    return true;
  }

  bool Operate() {
    if (config_.workers && choices_.Chance(0.08)) return ChangeWorkers();
    const std::size_t kind = choices_.Index(100);
    if (kind < 12) {
      now_ += choices_.Pick(std::vector<double>{0, 0, 0.5, 1, 2, 4.75});
    } else if (kind < 50) {
      const std::vector<std::string> ids{"r0", "r1", "r2", "r3", "r4"};
      const std::string type = choices_.Chance(0.04) ? "unknown" : choices_.Pick(types_);
      const std::string id = choices_.Chance(0.02) ? "" : choices_.Pick(ids);
      const std::string key = choices_.Pick(keys_);
      std::optional<double> cost;
      if (choices_.Chance(0.3)) {
        cost = choices_.Pick(std::vector<double>{0, 1, 3.5, 7, 0.1, -1, std::nan("")});
      }
      const std::size_t join = config_.extensions ? choices_.Index(3) : 0;
      // A call that would rather be refused than wait for a token (JobOptions).
      const bool refuse = config_.extensions && choices_.Chance(0.2);
      const core::EnqueueRequest request{type,  id, key, cost, static_cast<core::Join>(join),
                                         refuse};
      // Every other enqueue is the runtime's EnqueueAndAdmit, against the model's Enqueue and,
      // when that queued a new job, NextAdmission (chosen by the count, not drawn, so that a
      // seed or a fuzzer's input draws the same sequence as before the call existed).
      const bool and_admit = result_.operations % 2 == 1;
      std::optional<core::Admission> first;
      StatusOr<JobTicket> got =
          and_admit ? core_->EnqueueAndAdmit(request, now_, first) : core_->Enqueue(request, now_);
      StatusOr<int> want = model_->Enqueue(type, id, key, cost, now_,
                                           static_cast<ReferenceModel::Join>(join), refuse);
      if (got.status().code() != want.status().code()) {
        return Fail("Enqueue status: core " + got.status().ToString() + ", model " +
                    want.status().ToString());
      }
      // A refusal for want of a token, and the wait it names, to the bit.
      const std::optional<double> retry = RetryAfter(got.status());
      const bool model_retry = !want.ok() && (want.status().message() == "no token" ||
                                              want.status().message() == "shed");
      if (retry.has_value() != model_retry || (retry && *retry != model_->retry_after())) {
        return Fail("Enqueue's wait for a token: core " + got.status().ToString() + ", model " +
                    (model_retry ? Show(model_->retry_after()) : "none"));
      }
      result_.shed_refusals += !want.ok() && want.status().message() == "shed";
      const std::size_t known = jobs_.size();
      if (got.ok() && !Enqueued(*got, *want)) return false;
      const bool new_job = got.ok() && jobs_.back().state == Tracked::kPending &&
                           std::none_of(jobs_.begin(), jobs_.begin() + known,
                                        [&](const Tracked& j) { return j.ticket == *got; });
      if (and_admit) {
        if (!new_job && first) return Fail("EnqueueAndAdmit admitted after no new job");
        if (new_job && !CompareAdmission(false, first, model_->NextAdmission(now_))) return false;
      }
    } else if (kind < 68) {
      const int n = choices_.Chance(0.3) ? 1 : 1000;
      bool admitted = true;
      for (int i = 0; i < n && admitted;) {
        if (!AdmitOne(admitted)) return false;
        ++i;
      }
    } else if (kind < 88) {
      Tracked* t = PickJob(choices_, jobs_, Tracked::kRunning);
      if (t == nullptr) return true;
      const double elapsed = choices_.Pick(std::vector<double>{0, 1, 2, 4.25, 0.3, 9});
      // Now and then a run that says nothing of its cost (a fenced durable attempt), or a job
      // given back unused (its caller gone as it was admitted).
      enum class End { kMeasured, kUnmeasured, kUnused };
      const End end = !config_.extensions || !choices_.Chance(0.15) ? End::kMeasured
                      : choices_.Chance(0.5)                        ? End::kUnmeasured
                                                                    : End::kUnused;
      core::JobView completed;
      Status got, want;
      switch (end) {
        case End::kMeasured:
          got = core_->Complete(t->ticket, elapsed, now_);
          want = model_->Complete(t->model_job, elapsed, now_);
          break;
        case End::kUnmeasured:
          got = core_->CompleteUnmeasured(t->ticket, now_, completed);
          want = model_->CompleteUnmeasured(t->model_job, now_);
          break;
        case End::kUnused:
          got = core_->CompleteUnused(t->ticket, now_, completed);
          want = model_->CompleteUnused(t->model_job, now_);
          if (got.ok() && completed.charge != 0) return Fail("CompleteUnused's view charged");
          break;
      }
      if (got.code() != want.code()) {
        return Fail("Complete status: core " + got.ToString() + ", model " + want.ToString());
      }
      if (got.ok()) SetState(t->ticket, Tracked::kRunning, Tracked::kGone);
    } else if (config_.groups && kind < 92 && choices_.Chance(0.5)) {
      if (!DrawGroupChange()) return false;
    } else if (config_.extensions && kind < 92) {
      const std::string key = choices_.Pick(keys_);
      if (choices_.Chance(0.35)) {
        // Pause or resume a type (now and then an unknown one) or a key.
        const bool pause = choices_.Chance(0.5);
        Status got, want;
        if (choices_.Chance(0.5)) {
          const std::string type = choices_.Chance(0.05) ? "unknown" : choices_.Pick(types_);
          got = pause ? core_->PauseType(type, now_) : core_->ResumeType(type, now_);
          want = pause ? model_->PauseType(type, now_) : model_->ResumeType(type, now_);
        } else {
          got = pause ? core_->PauseKey(key, now_) : core_->ResumeKey(key, now_);
          want = pause ? model_->PauseKey(key, now_) : model_->ResumeKey(key, now_);
        }
        if (got.code() != want.code()) {
          return Fail("pause/resume status: core " + got.ToString() + ", model " + want.ToString());
        }
      } else if (choices_.Chance(0.25)) {
        // Adaptive capacity's lever: the global cap in force, now and then out of range.
        const int capacity = choices_.Between(0, 7);
        const Status got = core_->SetCapacity(capacity);
        const Status want = model_->SetCapacity(capacity);
        if (got.code() != want.code()) {
          return Fail("SetCapacity(" + Show(capacity) + "): core " + got.ToString() + ", model " +
                      want.ToString());
        }
        if (got.ok()) ++result_.capacity_changes;
      } else if (choices_.Chance(0.3)) {
        // A charge without a job (a cache hit's), to a tracked key or a new one, now and then
        // out of range.
        const std::string charged = choices_.Chance(0.2) ? "charged-" + key : key;
        const double cost = choices_.Pick(std::vector<double>{0.5, 1, 3, 0, 0.25, -1});
        const Status got = core_->Charge(charged, cost, now_);
        const Status want = model_->Charge(charged, cost, now_);
        if (got.code() != want.code()) {
          return Fail("Charge status: core " + got.ToString() + ", model " + want.ToString());
        }
      } else if (choices_.Chance(0.5)) {
        const double weight = choices_.Pick(std::vector<double>{0.5, 1, 2, 3, 0.3, 0, -1});
        if (core_->SetKeyWeight(key, weight).code() != model_->SetKeyWeight(key, weight).code()) {
          return Fail("SetKeyWeight status");
        }
      } else {
        KeyLimits limits{choices_.Between(0, 3), choices_.Between(-1, 2)};
        // A rate of its own now and then, or an invalid one, which both must refuse.
        if (choices_.Chance(0.3)) {
          limits.rate_limit = choices_.Chance(0.1) ? RateLimit{1, 0.5} : DrawRateLimit();
          limits.rate_per_weight = choices_.Chance(0.5);  // the rate follows SetKeyWeight
        }
        if (core_->SetKeyLimits(key, limits).code() != model_->SetKeyLimits(key, limits).code()) {
          return Fail("SetKeyLimits status");
        }
      }
    } else if (kind < 94) {
      Tracked* t = PickJob(choices_, jobs_, Tracked::kPending);
      if (t == nullptr) return true;
      const Status got = core_->Cancel(t->ticket, now_);
      const Status want = model_->Cancel(t->model_job, now_);
      if (got.code() != want.code()) {
        return Fail("Cancel status: core " + got.ToString() + ", model " + want.ToString());
      }
      // The ticket names the job, not the request: a Cancel through the ticket of a request that
      // has left removes another of the job's requests.
      if (got.ok() && t->state != Tracked::kPending) {
        for (Tracked& j : jobs_) {
          if (j.ticket == t->ticket && j.state == Tracked::kPending) t = &j;
        }
      }
      if (got.ok()) t->state = Tracked::kGone;
    } else if (kind < 96) {
      // Shedding's choice: the pending job of a type whose key has consumed the most leaves,
      // with every request that joined it.
      const std::string type = choices_.Chance(0.05) ? "unknown" : choices_.Pick(types_);
      StatusOr<std::optional<core::ExpiredJob>> got = core_->ShedHeaviest(type, now_);
      StatusOr<std::optional<int>> want = model_->ShedHeaviest(type, now_);
      if (got.status().code() != want.status().code()) {
        return Fail("ShedHeaviest(" + type + "): core " + got.status().ToString() + ", model " +
                    want.status().ToString());
      }
      if (got.ok() && got->has_value() != want->has_value()) {
        return Fail("ShedHeaviest(" + type + "): core shed " + (got->has_value() ? "one" : "none") +
                    ", the model " + (want->has_value() ? "one" : "none"));
      }
      if (got.ok() && got->has_value()) {
        bool tracked = false;
        for (Tracked& j : jobs_) {
          if (j.ticket != (*got)->ticket || j.state != Tracked::kPending) continue;
          if (j.model_job != **want) {
            return Fail("ShedHeaviest(" + type + "): core and model shed different jobs");
          }
          j.state = Tracked::kGone;
          tracked = true;
        }
        if (!tracked) return Fail("ShedHeaviest(" + type + ") shed a job no request stands for");
      }
    } else {
      const core::SweepResult got = core_->Sweep(now_);
      const auto [keys_evicted, estimates_evicted] = model_->Sweep(now_);
      if (got.groups_evicted != model_->groups_evicted()) {
        return Fail("Sweep: core evicted " + Show(got.groups_evicted) + " groups, the model " +
                    Show(model_->groups_evicted()));
      }
      if (got.keys_evicted != keys_evicted || got.estimates_evicted != estimates_evicted) {
        return Fail("Sweep: core evicted " + Show(got.keys_evicted) + " keys and " +
                    Show(got.estimates_evicted) + " estimates, the model " + Show(keys_evicted) +
                    " and " + Show(estimates_evicted));
      }
    }
    return true;
  }

  // A key put in a group (or in none), or a group's weight, now and then invalid.
  bool DrawGroupChange() {
    if (choices_.Chance(0.2)) {
      // Limits, now and then out of range.
      const GroupLimits limits{choices_.Between(0, 3), choices_.Between(-1, 2)};
      const std::string group = choices_.Pick(groups_);
      const Status got = core_->SetGroupLimits(group, limits);
      const Status want = model_->SetGroupLimits(group, limits);
      if (got.code() != want.code()) {
        return Fail("SetGroupLimits status: core " + got.ToString() + ", model " + want.ToString());
      }
      return true;
    }
    if (choices_.Chance(0.2)) {
      const std::string group = choices_.Pick(groups_);
      const double weight = choices_.Pick(std::vector<double>{0.5, 1, 2, 3, 0, -1});
      const Status got = core_->SetGroupWeight(group, weight);
      const Status want = model_->SetGroupWeight(group, weight);
      if (got.code() != want.code()) {
        return Fail("SetGroupWeight status: core " + got.ToString() + ", model " + want.ToString());
      }
      return true;
    }
    const std::string key = choices_.Pick(keys_);
    const std::string group = choices_.Pick(groups_);
    const bool busy = std::any_of(jobs_.begin(), jobs_.end(), [&](const Tracked& j) {
      const std::optional<core::JobView> job = core_->Describe(j.ticket);
      return j.state != Tracked::kGone && job && job->key == key;
    });
    const Status got = core_->SetKeyGroup(key, group, now_);
    const Status want = model_->SetKeyGroup(key, group, now_);
    if (got.code() != want.code()) {
      return Fail("SetKeyGroup status: core " + got.ToString() + ", model " + want.ToString());
    }
    if (got.ok() && busy) ++result_.group_moves;
    return true;
  }

  // Everything the model knows, after an operation.
  bool Compare() {
    // StepDueBy tells whether AdvanceTo has anything to do (the runtime skips the question of an
    // admission into a full pool on it): it expires a job or takes an aging step exactly when so.
    const bool due = core_->StepDueBy(now_);
    const std::int64_t pending = core_->pending_jobs();
    const std::uint64_t promotions = core_->promotions_total();
    core_->AdvanceTo(now_);
    model_->AdvanceTo(now_);
    const bool stepped =
        core_->pending_jobs() != pending || core_->promotions_total() != promotions;
    // Jobs shed by the operation (never by AdvanceTo) wait for TakeExpired: a step to take too.
    bool shed = false;
    if (!CompareExpired(&shed) || !CompareCallers()) return false;
    if (due != (stepped || shed)) {
      return Fail(std::string("StepDueBy said ") + (due ? "a step" : "no step") +
                  " was due, AdvanceTo " + (due ? "took none" : "took one"));
    }
    const Snapshot snapshot = core_->TakeSnapshot(now_);
    // The rate limits' tokens, to the bit: the same arithmetic (docs/ordering.md).
    if (snapshot.rate_limit.has_value() != model_->rate_limit().limited() ||
        (snapshot.rate_limit && snapshot.rate_limit->tokens != model_->TokensOf("", now_))) {
      return Fail("the global rate limit's tokens: core " +
                  Show(snapshot.rate_limit ? snapshot.rate_limit->tokens : -1) + ", model " +
                  Show(model_->TokensOf("", now_)));
    }
    for (const TypeSnapshot& type : snapshot.types) {
      if (type.rate_limit && type.rate_limit->tokens != model_->TokensOf(type.name, now_)) {
        return Fail("type " + type.name + "'s rate limit's tokens: core " +
                    Show(type.rate_limit->tokens) + ", model " +
                    Show(model_->TokensOf(type.name, now_)));
      }
    }
    if (snapshot.pending != model_->pending() || snapshot.running != model_->running() ||
        snapshot.slots_in_use != model_->slots_in_use()) {
      return Fail("pending/running/slots: core " + Show(snapshot.pending) + "/" +
                  Show(snapshot.running) + "/" + Show(snapshot.slots_in_use) + ", model " +
                  Show(model_->pending()) + "/" + Show(model_->running()) + "/" +
                  Show(model_->slots_in_use()));
    }
    const auto aged_in = model_->AgedIn(now_);
    if (snapshot.tiers.size() != aged_in.size()) return Fail("the number of tiers");
    for (const TierSnapshot& tier : snapshot.tiers) {
      if (tier.aged_in != aged_in.at(tier.priority)) {
        return Fail("jobs aged into tier " + Show(tier.priority) + ": core " + Show(tier.aged_in) +
                    ", model " + Show(aged_in.at(tier.priority)));
      }
    }
    const auto model_keys = model_->Keys();
    if (snapshot.keys_tracked != model_keys.size()) {
      return Fail("keys tracked: core " + Show(snapshot.keys_tracked) + ", model " +
                  Show(model_keys.size()));
    }
    for (const auto& [key, acc] : model_keys) {
      const std::optional<double> got = core_->AccumulatedCost(key);
      if (got != acc) {
        return Fail("accumulated cost of '" + key + "': core " + Show(got) + ", model " +
                    Show(acc));
      }
      // A key's rate limit's tokens, to the bit (a key without one: none).
      const std::optional<double> tokens = core_->KeyTokens(key, now_);
      const double want = model_->KeyTokens(key, now_);
      if (tokens.has_value() != std::isfinite(want) || (tokens && *tokens != want)) {
        return Fail("rate limit tokens of key '" + key + "': core " + Show(tokens.value_or(-1)) +
                    ", model " + Show(want));
      }
    }
    if (core_->groups_tracked() != model_->groups_tracked()) {
      return Fail("groups tracked: core " + Show(core_->groups_tracked()) + ", model " +
                  Show(model_->groups_tracked()));
    }
    for (const std::string& group : groups_) {
      if (core_->GroupAccumulatedCost(group) != model_->GroupAccumulatedCost(group)) {
        return Fail("accumulated cost of group '" + group + "': core " +
                    Show(core_->GroupAccumulatedCost(group)) + ", model " +
                    Show(model_->GroupAccumulatedCost(group)));
      }
    }
    if (snapshot.estimates_tracked != model_->estimates_tracked()) {
      return Fail("estimates tracked: core " + Show(snapshot.estimates_tracked) + ", model " +
                  Show(model_->estimates_tracked()));
    }
    for (const std::string& type : types_) {
      for (const std::string id : {"r0", "r1", "r2", "r3", "r4"}) {
        const std::optional<double> got = core_->Estimate(type, id);
        const std::optional<double> want = model_->Estimate(type, id);
        if (got != want) {
          return Fail("estimate of (" + type + ", " + id + "): core " + Show(got) + ", model " +
                      Show(want));
        }
      }
    }
    return true;
  }

  // The jobs both expired since the last comparison: the same ones, in the same order.
  bool CompareExpired(bool* shed) {
    const std::vector<core::ExpiredJob> got = core_->TakeExpired();
    const std::vector<int> want = model_->TakeExpired();
    if (got.size() != want.size()) {
      return Fail("jobs expired: core " + Show(got.size()) + ", model " + Show(want.size()));
    }
    for (std::size_t i = 0; i < got.size(); ++i) {
      Tracked* t = nullptr;
      for (Tracked& j : jobs_) {
        if (j.state == Tracked::kPending && j.ticket == got[i].ticket) t = &j;
      }
      if (t == nullptr) return Fail("the core expired a job that was not pending");
      if (t->model_job != want[i]) {
        return Fail("expired job " + Show(i) + ": core's is the model's job " + Show(t->model_job) +
                    ", the model's is " + Show(want[i]));
      }
      SetState(got[i].ticket, Tracked::kPending, Tracked::kGone);  // every request it stood for
      ++result_.expiries;
      result_.sheds += !got[i].shed.ok();
      *shed |= !got[i].shed.ok();
    }
    return true;
  }

  // A request both accepted: a new job for both, or both joined the same one.
  bool Enqueued(JobTicket ticket, int model_job) {
    const Tracked* joined = nullptr;
    for (const Tracked& j : jobs_) {
      if (j.state != Tracked::kGone && (j.ticket == ticket || j.model_job == model_job)) {
        joined = &j;
      }
    }
    if (joined != nullptr && (joined->ticket != ticket || joined->model_job != model_job)) {
      return Fail("whether a request joins a job: the core's answer is " +
                  std::string(joined->ticket == ticket ? "a job it has" : "a new job") +
                  ", the model's " +
                  (joined->model_job == model_job ? "a job it has" : "a new job"));
    }
    if (joined != nullptr) ++result_.joins;
    jobs_.push_back({ticket, model_job, joined != nullptr ? joined->state : Tracked::kPending});
    return true;
  }

  // Every request of the job `ticket` names in state `from` goes to `to`.
  void SetState(JobTicket ticket, decltype(Tracked::state) from, decltype(Tracked::state) to) {
    for (Tracked& j : jobs_) {
      if (j.ticket == ticket && j.state == from) j.state = to;
    }
  }

  // Each pending job stands for as many requests as joined it and have not left: the core's and
  // the model's count, and the driver's own.
  bool CompareCallers() {
    for (const Tracked& t : jobs_) {
      if (t.state != Tracked::kPending) continue;
      std::uint32_t requests = 0;
      for (const Tracked& j : jobs_)
        requests += j.state == Tracked::kPending && j.ticket == t.ticket;
      const StatusOr<std::uint32_t> got = core_->Callers(t.ticket);
      const StatusOr<int> want = model_->Callers(t.model_job);
      if (!got.ok() || !want.ok() || *got != requests ||
          static_cast<std::uint32_t>(*want) != requests) {
        return Fail("callers of model job " + Show(t.model_job) + ": core " +
                    Show(got.value_or(0)) + ", model " + Show(want.value_or(0)) + ", requests " +
                    Show(requests));
      }
    }
    return true;
  }

  bool Fail(std::string what) {
    result_.difference =
        "after operation " + Show(result_.operations) + " at t=" + Show(now_) + ": " + what;
    return false;
  }

  Choices& choices_;
  const DriverConfig& config_;
  std::unique_ptr<AdmissionCore> core_;
  std::optional<ReferenceModel> model_;
  std::vector<std::string> types_;
  const std::vector<std::string> keys_{"", "a", "b", "c", "d", "e"};
  const std::vector<std::string> groups_{"", "g", "h", "i"};  // "": none
  std::vector<Tracked> jobs_;
  double now_ = 0;
  DriverResult result_;
};

}  // namespace

DriverResult RunDifferential(Choices& choices, const DriverConfig& config) {
  return Run(choices, config).Go();
}

}  // namespace fairgate::testing
