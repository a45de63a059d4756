// fairgate/c.h over the C++ library: each C call converts its arguments, calls the C++ one and
// converts the answer; no exception crosses the C boundary (one that would is
// FAIRGATE_INTERNAL, or for a call with no status to return, a message on stderr and abort).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fairgate/adaptive_capacity.h"
#include "fairgate/c.h"
#include "fairgate/durable.h"
#include "fairgate/evidence.h"
#include "fairgate/latency_capacity.h"
#include "fairgate/observer.h"
#include "fairgate/options.h"
#include "fairgate/periodic.h"
#include "fairgate/postgres_store.h"
#include "fairgate/rate_limit.h"
#include "fairgate/scheduler.h"
#include "fairgate/shedding.h"
#include "fairgate/snapshot.h"
#include "fairgate/sqlite_store.h"
#include "fairgate/store.h"

struct fairgate_scheduler {
  std::unique_ptr<fairgate::Scheduler> impl;
};

struct fairgate_permit {
  fairgate::Permit permit;
};

struct fairgate_context {
  const fairgate::Context* ctx;
};

struct fairgate_periodic {
  fairgate::PeriodicJob job;
};

struct fairgate_store {
  std::shared_ptr<fairgate::Store> impl;
};

namespace {

using fairgate::Status;

// An Acquire's wait, shared by its handle and its callback.
struct AcquireState {
  fairgate::CancelFunc cancel;
};

char* Copy(std::string_view text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out == nullptr) return nullptr;
  if (!text.empty())
    std::memcpy(out, text.data(), text.size());  // an empty view's data may be null
  out[text.size()] = '\0';
  return out;
}

fairgate_code CodeOf(const Status& status) {
  return static_cast<fairgate_code>(static_cast<int>(status.code()));
}

// The tail a message takes for what a C++ caller reads from its status's payloads (c.h:
// fairgate_retry_after, fairgate_was_shed): " [fairgate: shed; retry_after=S]" or
// " [fairgate: retry_after=S]".
constexpr std::string_view kTailStart = " [fairgate: ";
constexpr std::string_view kShed = "shed; ";
constexpr std::string_view kRetryAfter = "retry_after=";

// `status`'s message for C: with that tail when it carries a retry-after.
std::string MessageOf(const Status& status) {
  std::string message(status.message());
  if (const std::optional<double> after = fairgate::RetryAfter(status)) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.17g", *after);
    message.append(kTailStart);
    if (fairgate::WasShed(status)) message.append(kShed);
    message.append(kRetryAfter).append(seconds).append("]");
  }
  return message;
}

// The tail of `message` after kTailStart, without its "]" (nothing if it has none).
std::optional<std::string_view> TailOf(const char* message) {
  if (message == nullptr) return std::nullopt;
  const std::string_view text(message);
  const std::size_t at = text.rfind(kTailStart);
  if (at == std::string_view::npos || text.back() != ']') return std::nullopt;
  return text.substr(at + kTailStart.size(), text.size() - 1 - (at + kTailStart.size()));
}

// `status` as the C call's answer: its code, and its message into *error when it failed.
fairgate_code Answer(const Status& status, char** error) {
  if (!status.ok() && error != nullptr) *error = Copy(MessageOf(status));
  return CodeOf(status);
}

// A C code and message as a Status; an unknown code is Unknown.
Status StatusOf(fairgate_code code, const char* message) {
  if (code == FAIRGATE_OK) return absl::OkStatus();
  const int value = static_cast<int>(code);
  const absl::StatusCode status_code =
      value > 0 && value <= 16 ? static_cast<absl::StatusCode>(value) : absl::StatusCode::kUnknown;
  return Status(status_code, message == nullptr ? "" : message);
}

// The pointers a call needs (c.h, "NULL"): the first that is NULL refused, by name.
Status Given(std::initializer_list<std::pair<const void*, const char*>> pointers) {
  for (const auto& [pointer, what] : pointers) {
    if (pointer == nullptr) return absl::InvalidArgumentError(std::string(what) + " is NULL");
  }
  return absl::OkStatus();
}

// `count` strings from `strings` into *out; a NULL array of some strings, or a NULL string in
// it, refused, named by `what`.
Status Strings(const char* const* strings, size_t count, const char* what,
               std::vector<std::string>* out) {
  if (count > 0 && strings == nullptr) {
    return absl::InvalidArgumentError(std::string(what) + " is NULL, with a count of " +
                                      std::to_string(count));
  }
  out->clear();
  for (size_t i = 0; i < count; ++i) {
    if (strings[i] == nullptr) {
      return absl::InvalidArgumentError(std::string(what) + "[" + std::to_string(i) + "] is NULL");
    }
    out->emplace_back(strings[i]);
  }
  return absl::OkStatus();
}

// Runs `call` (returning a Status), turning an exception into FAIRGATE_INTERNAL.
template <typename Call>
fairgate_code Guarded(char** error, Call&& call) {
  try {
    return Answer(call(), error);
  } catch (const std::exception& e) {
    return Answer(absl::InternalError(std::string("fairgate's C interface: ") + e.what()), error);
  } catch (...) {
    return Answer(absl::InternalError("fairgate's C interface: an unknown exception"), error);
  }
}

// For calls with nothing to return a failure through.
[[noreturn]] void Abort(const char* what) {
  std::fprintf(stderr, "fairgate: %s threw; aborting\n", what);
  std::abort();
}

fairgate::JobName NameOf(const fairgate_job& job) {
  return {fairgate::TypeName(job.type), fairgate::JobId(job.id),
          fairgate::FairnessKey(job.fairness_key)};
}

constexpr std::uint32_t kJobFlags = FAIRGATE_JOB_JOIN_RUNNING |
                                    FAIRGATE_JOB_REQUEUE_ON_WORKER_LOSS |
                                    FAIRGATE_JOB_REFUSE_WITHOUT_TOKEN;

fairgate::JobOptions OptionsOf(const fairgate_job& job) {
  fairgate::JobOptions options;
  if (!(job.cost < 0)) options.cost = job.cost;  // NaN too: refused as the C++ refuses it
  options.join_running = (job.flags & FAIRGATE_JOB_JOIN_RUNNING) != 0;
  options.requeue_on_worker_loss = (job.flags & FAIRGATE_JOB_REQUEUE_ON_WORKER_LOSS) != 0;
  options.refuse_without_token = (job.flags & FAIRGATE_JOB_REFUSE_WITHOUT_TOKEN) != 0;
  return options;
}

// A job's names, each given, and flags that are all known; `what` names the job.
Status NamesAndFlagsOf(const fairgate_job& job, const std::string& what) {
  if (job.type == nullptr) return absl::InvalidArgumentError(what + ".type is NULL");
  if (job.id == nullptr) return absl::InvalidArgumentError(what + ".id is NULL");
  if (job.fairness_key == nullptr) {
    return absl::InvalidArgumentError(what + ".fairness_key is NULL");
  }
  if ((job.flags & ~kJobFlags) != 0) {
    return absl::InvalidArgumentError(what + ".flags has bits no FAIRGATE_JOB_* names: " +
                                      std::to_string(job.flags & ~kJobFlags));
  }
  return absl::OkStatus();
}

// The scheduler and the job a job call needs, with each of the job's names.
Status Given(const fairgate_scheduler* scheduler, const fairgate_job* job) {
  if (Status s = Given({{scheduler, "the scheduler"}, {job, "the job"}}); !s.ok()) return s;
  return NamesAndFlagsOf(*job, "job");
}

// A C enum field's value as an int, read without loading it as the enum: a C caller may store a
// value the enum does not name, which C++ may not load as one (a refusal must read it first).
template <typename Enum>
int EnumValue(const Enum& field) {
  static_assert(sizeof(Enum) == sizeof(int));
  int value;
  std::memcpy(&value, &field, sizeof value);
  return value;
}

fairgate::KeyLimits KeyLimitsOf(const fairgate_key_limits& c) {
  fairgate::KeyLimits limits;
  limits.max_running = c.max_running == 0 ? fairgate::KeyLimits::kNoLimit : c.max_running;
  limits.min_running = c.min_running;
  limits.rate_limit = {c.rate_per_second, c.rate_burst == 0 ? 1.0 : c.rate_burst};
  limits.rate_per_weight = c.rate_per_weight != 0;
  return limits;
}

fairgate::GroupLimits GroupLimitsOf(int max_running, int min_running) {
  fairgate::GroupLimits limits;
  limits.max_running = max_running == 0 ? fairgate::GroupLimits::kNoLimit : max_running;
  limits.min_running = min_running;
  return limits;
}

// An option of -1 (the preset's), 0 or 1 (c.h: reconcile, lending) into *out; -1 leaves it.
Status PresetOr(int value, const char* what, bool* out) {
  if (value == -1) return absl::OkStatus();
  if (value != 0 && value != 1) {
    return absl::InvalidArgumentError(std::string("options.") + what +
                                      " must be -1 (the preset's), 0 or 1, got " +
                                      std::to_string(value));
  }
  *out = value == 1;
  return absl::OkStatus();
}

// A reading from C (fairgate_reading_fn) as the C++ one; none for NULL.
std::function<fairgate::StatusOr<double>()> ReadingOf(fairgate_reading_fn read, void* user) {
  if (read == nullptr) return {};
  return [read, user]() -> fairgate::StatusOr<double> {
    double value = 0;
    const fairgate_code code = read(user, &value);
    if (code != FAIRGATE_OK) return StatusOf(code, "the reading function gave no reading");
    return value;
  };
}

static_assert(static_cast<int>(fairgate::JobEvent::Kind::kAdmit) == FAIRGATE_EVENT_ADMIT &&
              static_cast<int>(fairgate::JobEvent::Kind::kComplete) == FAIRGATE_EVENT_COMPLETE &&
              static_cast<int>(fairgate::JobEvent::Kind::kCancel) == FAIRGATE_EVENT_CANCEL &&
              static_cast<int>(fairgate::JobEvent::Kind::kReject) == FAIRGATE_EVENT_REJECT &&
              static_cast<int>(fairgate::JobEvent::Kind::kPromote) == FAIRGATE_EVENT_PROMOTE &&
              static_cast<int>(fairgate::JobEvent::Kind::kEvict) == FAIRGATE_EVENT_EVICT &&
              static_cast<int>(fairgate::JobEvent::Kind::kExpire) == FAIRGATE_EVENT_EXPIRE &&
              static_cast<int>(fairgate::JobEvent::Kind::kShed) == FAIRGATE_EVENT_SHED);

// options.on_event as an Observer.
class EventCallback final : public fairgate::Observer {
 public:
  EventCallback(fairgate_event_fn on_event, void* user) : on_event_(on_event), user_(user) {}

  void OnEvent(const fairgate::JobEvent& from) override {
    const std::string message = MessageOf(from.status);
    fairgate_event event{};
    event.kind = static_cast<fairgate_event_kind>(from.kind);
    event.time = from.time;
    event.type = from.type.c_str();
    event.id = from.id.c_str();
    event.fairness_key = from.key.c_str();
    event.tier = from.tier;
    event.effective_tier = from.effective_tier;
    event.charge = from.charge;
    event.accumulated_cost = from.accumulated_cost;
    event.wait = from.wait;
    event.run_time = from.run_time;
    event.code = CodeOf(from.status);
    event.message = message.c_str();
    event.worker = from.worker.c_str();
    on_event_(user_, &event);
  }

 private:
  fairgate_event_fn on_event_;
  void* user_;
};

// The fields version 3 of fairgate_options added, into `options`.
Status RestOf(const fairgate_options& c, fairgate::SchedulerOptions* options) {
  fairgate::RuleOptions& rule = options->rule;
  bool lending = rule.lending.has_value();
  if (Status s = PresetOr(c.lending, "lending", &lending); !s.ok()) return s;
  if (lending) {
    rule.lending = fairgate::TierLending{.kept_back = c.lending_kept_back};
  } else {
    rule.lending.reset();
  }
  if (c.aging != 0) {
    rule.aging = fairgate::AgingConfig{.grace = fairgate::Seconds(c.aging_grace_seconds),
                                       .interval = fairgate::Seconds(c.aging_interval_seconds),
                                       .ceiling = c.aging_ceiling};
  }
  rule.shortest_first = c.shortest_first != 0;
  rule.shortest_first_aging = c.shortest_first_aging;
  rule.default_key_limits = KeyLimitsOf(c.default_key_limits);
  rule.default_group_limits =
      GroupLimitsOf(c.default_group_max_running, c.default_group_min_running);
  if (rule.latency_capacity) {
    rule.latency_capacity->interval = fairgate::Seconds(c.latency_capacity_interval_seconds);
    rule.latency_capacity->remeasure_every = c.latency_capacity_remeasure_every;
  }
  if (c.adaptive_capacity_min > 0) {
    fairgate::AdaptiveCapacity adaptive;
    adaptive.min = c.adaptive_capacity_min;
    adaptive.interval = fairgate::Seconds(c.adaptive_capacity_interval_seconds);
    adaptive.high = c.adaptive_capacity_high;
    adaptive.low = c.adaptive_capacity_low;
    adaptive.decrease = c.adaptive_capacity_decrease;
    adaptive.stalled_seconds =
        ReadingOf(c.adaptive_stalled_seconds, c.adaptive_stalled_seconds_user);
    if (c.adaptive_signal_count > 0 && c.adaptive_signals == nullptr) {
      return absl::InvalidArgumentError("options.adaptive_signals is NULL, with a count of " +
                                        std::to_string(c.adaptive_signal_count));
    }
    for (size_t i = 0; i < c.adaptive_signal_count; ++i) {
      const fairgate_pressure_signal& from = c.adaptive_signals[i];
      const int source = EnumValue(from.source);
      if (source < FAIRGATE_PRESSURE_MEMORY_SOME || source > FAIRGATE_PRESSURE_MEMORY_USE) {
        return absl::InvalidArgumentError("options.adaptive_signals[" + std::to_string(i) +
                                          "].source must be a fairgate_pressure_source");
      }
      adaptive.signals.push_back({static_cast<fairgate::PressureSource>(source), from.high,
                                  from.low, ReadingOf(from.read, from.read_user)});
    }
    rule.adaptive_capacity = std::move(adaptive);
  } else if (c.adaptive_signal_count > 0) {
    return absl::InvalidArgumentError(
        "options.adaptive_signals are given without adaptive capacity (adaptive_capacity_min 0)");
  }
  rule.sole_worker_reserve_after = fairgate::Seconds(c.sole_worker_reserve_after_seconds);
  rule.sweep_batch = c.sweep_batch;
  fairgate::RuntimeOptions& runtime = options->runtime;
  runtime.fiber_stack_bytes = c.fiber_stack_bytes;
  runtime.sweep_interval = fairgate::Seconds(c.sweep_interval_seconds);
  runtime.observer_queue_limit = c.observer_queue_limit;
  if (c.on_event != nullptr) {
    runtime.observers.push_back(std::make_shared<EventCallback>(c.on_event, c.on_event_user));
  }
  if (c.warn != nullptr) {
    runtime.warn = [warn = c.warn, user = c.warn_user](std::string_view warning) {
      const std::string text(warning);
      warn(user, text.c_str());
    };
  }
  if (c.key_group != nullptr) {
    runtime.key_group = [key_group = c.key_group,
                         user = c.key_group_user](std::string_view key) -> std::string {
      const std::string name(key);
      char* group = key_group(user, name.c_str());
      if (group == nullptr) return {};
      std::string out(group);
      std::free(group);
      return out;
    };
  }
  options->fleet.token_lease = fairgate::Seconds(c.token_lease_seconds);
  if (c.on_evidence != nullptr && c.evidence_path != nullptr) {
    return absl::InvalidArgumentError("options.on_evidence and options.evidence_path are both set");
  }
  if (c.on_evidence != nullptr) {
    runtime.evidence = [on_evidence = c.on_evidence,
                        user = c.on_evidence_user](const fairgate::AdmissionEvidence& evidence) {
      const std::string line = fairgate::ToJsonLine(evidence);
      on_evidence(user, line.c_str());
    };
  }
  if (c.evidence_path != nullptr) {
    fairgate::StatusOr<fairgate::EvidenceSink> sink = fairgate::OpenEvidenceFile(c.evidence_path);
    if (!sink.ok()) return sink.status();
    runtime.evidence = *std::move(sink);
  }
  return absl::OkStatus();
}

// The fields version 2 of fairgate_options added, into `options`.
Status PersistenceAndFleetOf(const fairgate_options& c, fairgate::SchedulerOptions* options) {
  if (c.store != nullptr) options->persistence.store = c.store->impl;
  options->persistence.state_flush_interval = fairgate::Seconds(c.state_flush_seconds);
  fairgate::FleetOptions& fleet = options->fleet;
  fleet.lease_ttl = fairgate::Seconds(c.lease_ttl_seconds);
  fleet.claim_interval = fairgate::Seconds(c.claim_interval_seconds);
  fleet.max_claimed = c.max_claimed;
  if (Status s = Strings(c.fleet_conflict_groups, c.fleet_conflict_group_count,
                         "options.fleet_conflict_groups", &fleet.conflict_groups);
      !s.ok()) {
    return s;
  }
  std::vector<std::string> capped;
  if (Status s = Strings(c.fleet_capped_types, c.fleet_type_cap_count, "options.fleet_capped_types",
                         &capped);
      !s.ok()) {
    return s;
  }
  if (!capped.empty() && c.fleet_type_caps == nullptr) {
    return absl::InvalidArgumentError("options.fleet_type_caps is NULL, with a count of " +
                                      std::to_string(capped.size()));
  }
  for (std::size_t i = 0; i < capped.size(); ++i) {
    if (!fleet.type_caps.emplace(capped[i], c.fleet_type_caps[i]).second) {
      return absl::InvalidArgumentError("options.fleet_capped_types names \"" + capped[i] +
                                        "\" twice");
    }
  }
  return absl::OkStatus();
}

// A versioned struct's version checked: `what`.version must be `want` (`macro`), as `init` sets.
Status VersionIs(std::uint32_t got, std::uint32_t want, const char* what, const char* macro,
                 const char* init) {
  if (got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(std::string(what) + ".version must be " + macro + " (" +
                                    std::to_string(want) + "), got " + std::to_string(got) +
                                    ": fill it with " + init);
}

// What an _init_version call writes (c.h, "Options"): the fields of `version` (the first
// `sizes[version - 1]` bytes of `full`, whose version field is set to it) into *out, or nothing
// and FAIRGATE_INVALID_ARGUMENT for a NULL struct or an unknown version.
template <typename T>
fairgate_code InitVersion(T* out, T full, std::uint32_t version,
                          std::initializer_list<std::size_t> sizes) {
  if (out == nullptr || version < 1 || version > sizes.size()) return FAIRGATE_INVALID_ARGUMENT;
  full.version = version;
  std::memcpy(static_cast<void*>(out), &full, sizes.begin()[version - 1]);
  return FAIRGATE_OK;
}

// A store's handle from `open` (the store, or why there is none), and the code of a failure:
// what the calls that open stores share.
template <typename Open>
fairgate_store* StoreFrom(fairgate_code* code, char** error, Open&& open) {
  fairgate_store* out = nullptr;
  const fairgate_code result = Guarded(error, [&]() -> Status {
    fairgate::StatusOr<std::unique_ptr<fairgate::Store>> store = open();
    if (!store.ok()) return store.status();
    out = new fairgate_store{std::shared_ptr<fairgate::Store>(*std::move(store))};
    return absl::OkStatus();
  });
  if (code != nullptr) *code = result;
  return out;
}

// A stored job's bytes as C's: a copy ending at an added NUL, or an error when memory ran out.
Status CopyInto(std::string_view text, char** out) {
  *out = Copy(text);
  if (*out == nullptr) return absl::ResourceExhaustedError("out of memory copying a stored job");
  return absl::OkStatus();
}

void FreeStoredJobs(fairgate_stored_job* jobs, std::size_t count) {
  if (jobs == nullptr) return;
  for (std::size_t i = 0; i < count; ++i) {
    std::free(jobs[i].type);
    std::free(jobs[i].id);
    std::free(jobs[i].fairness_key);
    std::free(jobs[i].payload);
    std::free(jobs[i].last_error);
  }
  std::free(jobs);
}

// `stored` as an array of C's (NULL when empty), or an error with nothing left allocated.
Status StoredJobsOf(const std::vector<fairgate::StoredJob>& stored, fairgate_stored_job** out) {
  *out = nullptr;
  if (stored.empty()) return absl::OkStatus();
  auto* jobs = static_cast<fairgate_stored_job*>(std::calloc(stored.size(), sizeof **out));
  if (jobs == nullptr) return absl::ResourceExhaustedError("out of memory listing stored jobs");
  for (std::size_t i = 0; i < stored.size(); ++i) {
    const fairgate::StoredJob& from = stored[i];
    fairgate_stored_job& to = jobs[i];
    to.sequence = from.sequence;
    to.payload_size = from.payload.size();
    to.submitted_at = from.submitted_at;
    to.attempts = from.attempts;
    Status s = CopyInto(from.type, &to.type);
    if (s.ok()) s = CopyInto(from.id, &to.id);
    if (s.ok()) s = CopyInto(from.fairness_key, &to.fairness_key);
    if (s.ok()) s = CopyInto(from.payload, &to.payload);
    if (s.ok()) s = CopyInto(from.last_error, &to.last_error);
    if (!s.ok()) {
      FreeStoredJobs(jobs, i + 1);  // calloc's NULLs free as nothing
      return s;
    }
  }
  *out = jobs;
  return absl::OkStatus();
}

// A durable job's payload from C: NULL only with a size of 0.
Status PayloadOf(const void* payload, std::size_t size, const std::string& what,
                 std::string_view* out) {
  if (payload == nullptr && size > 0) {
    return absl::InvalidArgumentError(what + " is NULL, with a size of " + std::to_string(size));
  }
  *out = size == 0 ? std::string_view() : std::string_view(static_cast<const char*>(payload), size);
  return absl::OkStatus();
}

// A durable or periodic job takes no JobOptions (SubmitDurable and SubmitEvery have none): a
// cost hint or a flag given is refused rather than dropped. `kind`: "a durable job", "a periodic
// job".
Status NoJobOptions(const fairgate_job& job, const std::string& what, const char* kind) {
  if (!(job.cost < 0)) {
    return absl::InvalidArgumentError(what + ".cost must be < 0 for " + kind +
                                      " (it takes no cost hint: its estimate is learned), got " +
                                      std::to_string(job.cost));
  }
  if (job.flags != 0) {
    return absl::InvalidArgumentError(what + ".flags must be 0 for " + kind +
                                      " (it takes no JobOptions), got " +
                                      std::to_string(job.flags));
  }
  return absl::OkStatus();
}

// A C job's body as the C++ one: `run` with `user`, its code and message as the job's status.
fairgate::Scheduler::JobFn JobFnOf(fairgate_job_fn run, void* user) {
  return [run, user](const fairgate::Context& ctx) {
    const fairgate_context context{&ctx};
    char* message = nullptr;
    const fairgate_code code = run(user, &context, &message);
    Status status = StatusOf(code, message);
    std::free(message);
    return status;
  };
}

// A C done callback as the C++ one (none for NULL).
std::function<void(const Status&)> DoneOf(fairgate_done_fn done, void* user) {
  if (done == nullptr) return {};
  return [done, user](const Status& status) {
    const std::string message = MessageOf(status);
    done(user, CodeOf(status), message.c_str());
  };
}

// A context that ends after `timeout_seconds` (< 0: never) for `call`, cancelled after it.
template <typename Call>
Status WithTimeoutSeconds(double timeout_seconds, Call&& call) {
  if (timeout_seconds < 0) return call(fairgate::Context::Background());
  auto [ctx, cancel] =
      fairgate::WithTimeout(fairgate::Context::Background(),
                            std::chrono::duration_cast<fairgate::Context::Clock::duration>(
                                fairgate::Seconds(timeout_seconds)));
  Status status = call(ctx);
  cancel();
  return status;
}

// AddWorker (or, with `update`, UpdateWorker) from C's arguments.
fairgate_code SetWorker(fairgate_scheduler* scheduler, const char* name, int slots,
                        const char* const* types, size_t type_count, const char* const* tags,
                        size_t tag_count, char** error, bool update) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {name, "the worker's name"}}); !s.ok()) {
      return s;
    }
    fairgate::WorkerConfig config;
    config.slots = slots;
    if (Status s = Strings(types, type_count, "types", &config.types); !s.ok()) return s;
    if (Status s = Strings(tags, tag_count, "tags", &config.tags); !s.ok()) return s;
    return update ? scheduler->impl->UpdateWorker(name, config)
                  : scheduler->impl->AddWorker(name, config);
  });
}

// What a query that answers only when its subject is tracked returns: 1 and *out with the
// value found, else 0; `what` names the call for an abort.
template <typename Query>
int Tracked(double* out, const char* what, Query&& query) {
  try {
    const std::optional<double> found = query();
    if (!found) return 0;
    if (out != nullptr) *out = *found;
    return 1;
  } catch (...) {
    Abort(what);
  }
}

}  // namespace

extern "C" {

void fairgate_free(char* string) { std::free(string); }

int fairgate_retry_after(const char* message, double* seconds) {
  const std::optional<std::string_view> tail = TailOf(message);
  if (!tail) return 0;
  std::string_view rest = *tail;
  if (rest.substr(0, kShed.size()) == kShed) rest.remove_prefix(kShed.size());
  if (rest.substr(0, kRetryAfter.size()) != kRetryAfter) return 0;
  rest.remove_prefix(kRetryAfter.size());
  const std::string number(rest);
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size()) return 0;
  if (seconds != nullptr) *seconds = value;
  return 1;
}

int fairgate_was_shed(const char* message) {
  const std::optional<std::string_view> tail = TailOf(message);
  return tail && tail->substr(0, kShed.size()) == kShed && fairgate_retry_after(message, nullptr);
}

fairgate_code fairgate_options_init_version(fairgate_options* out, uint32_t version) {
  const fairgate::SchedulerOptions defaults = fairgate::SchedulerOptions::Default();
  const fairgate::RuleOptions& rule = defaults.rule;
  fairgate_options o{};
  fairgate_options* options = &o;
  options->seed_mode = 0;
  options->max_concurrency = rule.max_concurrency;
  options->alpha = rule.alpha;
  options->reconcile = -1;
  options->idle_catch_up = rule.idle_catch_up ? 1 : 0;
  options->key_ttl_seconds = rule.key_ttl.count();
  options->estimate_ttl_seconds = rule.estimate_ttl.count();
  options->max_pending_total = 0;
  options->max_pending_per_key = 0;
  options->latency_capacity_min = 0;
  options->rate_per_second = 0;
  options->rate_burst = 1;
  options->worker_threads = defaults.runtime.worker_threads;
  options->store = nullptr;
  options->state_flush_seconds = defaults.persistence.state_flush_interval.count();
  options->lease_ttl_seconds = defaults.fleet.lease_ttl.count();
  options->claim_interval_seconds = defaults.fleet.claim_interval.count();
  options->max_claimed = defaults.fleet.max_claimed;
  options->fleet_conflict_groups = nullptr;
  options->fleet_conflict_group_count = 0;
  options->fleet_capped_types = nullptr;
  options->fleet_type_caps = nullptr;
  options->fleet_type_cap_count = 0;
  options->lending = -1;
  options->lending_kept_back = fairgate::TierLending{}.kept_back;
  const fairgate::AgingConfig aging;
  options->aging = 0;
  options->aging_grace_seconds = aging.grace.count();
  options->aging_interval_seconds = aging.interval.count();
  options->aging_ceiling = aging.ceiling;
  options->shortest_first = rule.shortest_first ? 1 : 0;
  options->shortest_first_aging = rule.shortest_first_aging;
  options->default_key_limits = {0, 0, 0, 1, 0};
  options->default_group_max_running = 0;
  options->default_group_min_running = rule.default_group_limits.min_running;
  const fairgate::LatencyCapacity latency;
  options->latency_capacity_interval_seconds = latency.interval.count();
  options->latency_capacity_remeasure_every = latency.remeasure_every;
  const fairgate::AdaptiveCapacity adaptive;
  options->adaptive_capacity_min = 0;
  options->adaptive_capacity_interval_seconds = adaptive.interval.count();
  options->adaptive_capacity_high = adaptive.high;
  options->adaptive_capacity_low = adaptive.low;
  options->adaptive_capacity_decrease = adaptive.decrease;
  options->sole_worker_reserve_after_seconds = rule.sole_worker_reserve_after.count();
  options->sweep_batch = rule.sweep_batch;
  options->fiber_stack_bytes = defaults.runtime.fiber_stack_bytes;
  options->sweep_interval_seconds = defaults.runtime.sweep_interval.count();
  options->observer_queue_limit = defaults.runtime.observer_queue_limit;
  options->token_lease_seconds = defaults.fleet.token_lease.count();
  return InitVersion(out, o, version,
                     {offsetof(fairgate_options, store), offsetof(fairgate_options, lending),
                      sizeof(fairgate_options)});
}

fairgate_scheduler* fairgate_scheduler_create(const fairgate_options* c, fairgate_code* code,
                                              char** error) {
  fairgate_scheduler* out = nullptr;
  const fairgate_code result = Guarded(error, [&]() -> Status {
    if (c == nullptr) return absl::InvalidArgumentError("the options are NULL");
    if (c->version < 1 || c->version > FAIRGATE_OPTIONS_VERSION) {
      return absl::InvalidArgumentError(
          "options.version must be 1 to FAIRGATE_OPTIONS_VERSION (3), got " +
          std::to_string(c->version) + ": fill the options with fairgate_options_init");
    }
    fairgate::SchedulerOptions options =
        c->seed_mode ? fairgate::SchedulerOptions::Seed() : fairgate::SchedulerOptions::Default();
    fairgate::RuleOptions& rule = options.rule;
    rule.max_concurrency = c->max_concurrency;
    rule.alpha = c->alpha;
    if (Status s = PresetOr(c->reconcile, "reconcile", &rule.reconcile); !s.ok()) return s;
    rule.idle_catch_up = c->idle_catch_up != 0;
    rule.key_ttl = fairgate::Seconds(c->key_ttl_seconds);
    rule.estimate_ttl = fairgate::Seconds(c->estimate_ttl_seconds);
    if (c->max_pending_total > 0) rule.max_pending_total = c->max_pending_total;
    if (c->max_pending_per_key > 0) rule.max_pending_per_key = c->max_pending_per_key;
    if (c->latency_capacity_min > 0) {
      rule.latency_capacity = fairgate::LatencyCapacity{.min = c->latency_capacity_min};
    }
    rule.rate_limit = {c->rate_per_second, c->rate_burst};
    options.runtime.worker_threads = c->worker_threads;
    if (c->version >= 2) {
      if (Status s = PersistenceAndFleetOf(*c, &options); !s.ok()) return s;
    }
    if (c->version >= 3) {
      if (Status s = RestOf(*c, &options); !s.ok()) return s;
    }
    auto created = fairgate::Scheduler::Create(options);
    if (!created.ok()) return created.status();
    out = new fairgate_scheduler{*std::move(created)};
    return absl::OkStatus();
  });
  if (code != nullptr) *code = result;
  return out;
}

fairgate_code fairgate_scheduler_shutdown(fairgate_scheduler* scheduler, double timeout_seconds,
                                          char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    return WithTimeoutSeconds(timeout_seconds, [&](const fairgate::Context& ctx) {
      return scheduler->impl->Shutdown(ctx);
    });
  });
}

fairgate_code fairgate_scheduler_drain(fairgate_scheduler* scheduler, double timeout_seconds,
                                       char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    return WithTimeoutSeconds(
        timeout_seconds, [&](const fairgate::Context& ctx) { return scheduler->impl->Drain(ctx); });
  });
}

void fairgate_scheduler_destroy(fairgate_scheduler* scheduler) {
  try {
    delete scheduler;  // the C++ destructor shuts down and waits
  } catch (...) {
    Abort("fairgate_scheduler_destroy");
  }
}

fairgate_code fairgate_type_config_init_version(fairgate_type_config* out, uint32_t version) {
  const fairgate::JobTypeConfig defaults;
  fairgate_type_config c{};
  fairgate_type_config* config = &c;
  config->default_cost = defaults.default_cost;
  config->max_concurrency = 0;
  config->conflict_group = nullptr;
  config->conflict_limit = defaults.conflict_limit;
  config->priority = defaults.priority;
  config->slots = defaults.slots;
  config->shortest_first = 0;
  config->max_queue_wait_seconds = 0;
  config->coalesce = FAIRGATE_COALESCE_OFF;
  config->tags = nullptr;
  config->tag_count = 0;
  config->rate_per_second = 0;
  config->rate_burst = 1;
  config->refuse_without_token = 0;
  config->shed_target_seconds = 0;
  config->shed_interval_seconds = 1;
  return InitVersion(out, c, version, {sizeof(fairgate_type_config)});
}

fairgate_code fairgate_register_type(fairgate_scheduler* scheduler, const char* name,
                                     const fairgate_type_config* c, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(
            {{scheduler, "the scheduler"}, {name, "the type's name"}, {c, "the type config"}});
        !s.ok()) {
      return s;
    }
    if (c->version != FAIRGATE_TYPE_CONFIG_VERSION) {
      return absl::InvalidArgumentError(
          "config.version must be FAIRGATE_TYPE_CONFIG_VERSION (1): fill the config with "
          "fairgate_type_config_init");
    }
    const int coalesce = EnumValue(c->coalesce);
    if (coalesce < FAIRGATE_COALESCE_OFF || coalesce > FAIRGATE_COALESCE_SUPERSEDE) {
      return absl::InvalidArgumentError("config.coalesce must be a fairgate_coalesce");
    }
    fairgate::JobTypeConfig config;
    config.default_cost = c->default_cost;
    config.max_concurrency =
        c->max_concurrency == 0 ? fairgate::JobTypeConfig::kNoLimit : c->max_concurrency;
    if (c->conflict_group != nullptr) config.conflict_group = c->conflict_group;
    config.conflict_limit = c->conflict_limit;
    config.priority = c->priority;
    config.slots = c->slots;
    config.shortest_first = c->shortest_first != 0;
    config.max_queue_wait = fairgate::Seconds(c->max_queue_wait_seconds);
    config.coalesce = static_cast<fairgate::Coalesce>(coalesce);
    if (Status s = Strings(c->tags, c->tag_count, "config.tags", &config.tags); !s.ok()) return s;
    config.rate_limit = {c->rate_per_second, c->rate_burst};
    config.refuse_without_token = c->refuse_without_token != 0;
    config.shedding = {fairgate::Seconds(c->shed_target_seconds),
                       fairgate::Seconds(c->shed_interval_seconds)};
    return scheduler->impl->RegisterType(name, config);
  });
}

fairgate_code fairgate_acquire(fairgate_scheduler* scheduler, const fairgate_job* job,
                               fairgate_permit_callback on_admitted, void* user,
                               fairgate_pending** pending, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(scheduler, job); !s.ok()) return s;
    if (on_admitted == nullptr) return absl::InvalidArgumentError("the callback is NULL");
    auto [ctx, cancel] = fairgate::WithCancel(fairgate::Context::Background());
    auto state = std::make_shared<AcquireState>();
    state->cancel = cancel;
    Status status = scheduler->impl->Acquire(
        ctx, NameOf(*job),
        [on_admitted, user](fairgate::StatusOr<fairgate::Permit> permit) {
          if (permit.ok()) {
            on_admitted(user, new fairgate_permit{*std::move(permit)}, FAIRGATE_OK, "");
          } else {
            const std::string message = MessageOf(permit.status());
            on_admitted(user, nullptr, CodeOf(permit.status()), message.c_str());
          }
        },
        OptionsOf(*job));
    if (!status.ok()) {
      cancel();
      return status;
    }
    if (pending != nullptr) *pending = reinterpret_cast<fairgate_pending*>(new auto(state));
    return absl::OkStatus();
  });
}

void fairgate_pending_cancel(fairgate_pending* pending) {
  if (pending == nullptr) return;
  try {
    (*reinterpret_cast<std::shared_ptr<AcquireState>*>(pending))->cancel();
  } catch (...) {
    Abort("fairgate_acquire_cancel");
  }
}

void fairgate_pending_free(fairgate_pending* pending) {
  delete reinterpret_cast<std::shared_ptr<AcquireState>*>(pending);
}

fairgate_code fairgate_try_acquire(fairgate_scheduler* scheduler, const fairgate_job* job,
                                   fairgate_permit** permit, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(scheduler, job); !s.ok()) return s;
    if (permit == nullptr) return absl::InvalidArgumentError("the permit pointer is NULL");
    // Admitted inside Acquire itself, or not at all: cancelled at once when Acquire returns
    // without a permit. One admitted in between (by another thread's release) is released
    // unused.
    struct Outcome {
      std::mutex mutex;
      bool gave_up = false;
      std::optional<fairgate::Permit> permit;
    };
    auto outcome = std::make_shared<Outcome>();
    auto [ctx, cancel] = fairgate::WithCancel(fairgate::Context::Background());
    Status status = scheduler->impl->Acquire(
        ctx, NameOf(*job),
        [outcome](fairgate::StatusOr<fairgate::Permit> admitted) {
          if (!admitted.ok()) return;
          std::unique_lock lock(outcome->mutex);
          if (outcome->gave_up) {
            lock.unlock();
            admitted->Release(absl::CancelledError("fairgate_try_acquire gave up before"));
            return;
          }
          outcome->permit = *std::move(admitted);
        },
        OptionsOf(*job));
    if (!status.ok()) {
      cancel();
      return status;
    }
    {
      std::lock_guard lock(outcome->mutex);
      if (outcome->permit) {
        *permit = new fairgate_permit{*std::move(outcome->permit)};
        cancel();
        return absl::OkStatus();
      }
      outcome->gave_up = true;
    }
    cancel();
    return absl::ResourceExhaustedError(
        "the job is not admissible now (fairgate_try_acquire does not wait)");
  });
}

void fairgate_permit_release(fairgate_permit* permit, fairgate_code code, const char* message) {
  if (permit == nullptr) return;
  try {
    permit->permit.Release(StatusOf(code, message));
    delete permit;
  } catch (...) {
    Abort("fairgate_permit_release");
  }
}

fairgate_code fairgate_submit(fairgate_scheduler* scheduler, const fairgate_job* job,
                              fairgate_job_fn run, fairgate_done_fn done, void* user,
                              char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(scheduler, job); !s.ok()) return s;
    if (run == nullptr) return absl::InvalidArgumentError("the job's function is NULL");
    return scheduler->impl->Submit(NameOf(*job), JobFnOf(run, user), DoneOf(done, user),
                                   OptionsOf(*job));
  });
}

int fairgate_context_done(const fairgate_context* ctx) {
  return ctx != nullptr && ctx->ctx->Done() ? 1 : 0;
}

fairgate_code fairgate_context_err(const fairgate_context* ctx, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{ctx, "the context"}}); !s.ok()) return s;
    return ctx->ctx->Err();
  });
}

int fairgate_context_wait(const fairgate_context* ctx, double timeout_seconds) {
  if (ctx == nullptr) return 0;
  try {
    if (timeout_seconds < 0) {
      ctx->ctx->Wait();
      return 1;
    }
    return ctx->ctx->WaitFor(std::chrono::duration_cast<fairgate::Context::Clock::duration>(
               fairgate::Seconds(timeout_seconds)))
               ? 1
               : 0;
  } catch (...) {
    Abort("fairgate_context_wait");
  }
}

char* fairgate_context_worker(const fairgate_context* ctx) {
  return Copy(ctx == nullptr ? std::string_view() : ctx->ctx->Worker());
}

uint64_t fairgate_context_fencing_token(const fairgate_context* ctx) {
  return ctx == nullptr ? 0 : ctx->ctx->FencingToken();
}

fairgate_code fairgate_periodic_options_init_version(fairgate_periodic_options* out,
                                                     uint32_t version) {
  const fairgate::PeriodicOptions defaults;
  fairgate_periodic_options c{};
  fairgate_periodic_options* options = &c;
  options->jitter = defaults.jitter;
  options->first_run_at_once = defaults.first_run_at_once ? 1 : 0;
  return InitVersion(out, c, version, {sizeof(fairgate_periodic_options)});
}

fairgate_code fairgate_submit_every(fairgate_scheduler* scheduler, const fairgate_job* job,
                                    double interval_seconds, const fairgate_periodic_options* c,
                                    fairgate_job_fn run, fairgate_done_fn on_run, void* user,
                                    fairgate_periodic** periodic, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(scheduler, job); !s.ok()) return s;
    if (run == nullptr) return absl::InvalidArgumentError("the job's function is NULL");
    if (Status s = NoJobOptions(*job, "job", "a periodic job"); !s.ok()) return s;
    fairgate::PeriodicOptions options;
    if (c != nullptr) {
      if (Status s =
              VersionIs(c->version, FAIRGATE_PERIODIC_OPTIONS_VERSION, "options",
                        "FAIRGATE_PERIODIC_OPTIONS_VERSION", "fairgate_periodic_options_init");
          !s.ok()) {
        return s;
      }
      options.jitter = c->jitter;
      options.first_run_at_once = c->first_run_at_once != 0;
    }
    options.on_run = DoneOf(on_run, user);
    fairgate::StatusOr<fairgate::PeriodicJob> scheduled = scheduler->impl->SubmitEvery(
        NameOf(*job), fairgate::Seconds(interval_seconds), JobFnOf(run, user), options);
    if (!scheduled.ok()) return scheduled.status();
    if (periodic != nullptr) *periodic = new fairgate_periodic{*std::move(scheduled)};
    return absl::OkStatus();
  });
}

void fairgate_periodic_stop(fairgate_periodic* periodic) {
  if (periodic == nullptr) return;
  try {
    periodic->job.Stop();
  } catch (...) {
    Abort("fairgate_periodic_stop");
  }
}

uint64_t fairgate_periodic_runs(const fairgate_periodic* periodic) {
  return periodic == nullptr ? 0 : periodic->job.runs();
}

void fairgate_periodic_free(fairgate_periodic* periodic) { delete periodic; }

fairgate_code fairgate_charge(fairgate_scheduler* scheduler, const char* fairness_key, double cost,
                              char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {fairness_key, "the fairness key"}});
        !s.ok()) {
      return s;
    }
    return scheduler->impl->Charge(fairness_key, cost);
  });
}

fairgate_code fairgate_set_key_weight(fairgate_scheduler* scheduler, const char* fairness_key,
                                      double weight, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {fairness_key, "the fairness key"}});
        !s.ok()) {
      return s;
    }
    return scheduler->impl->SetKeyWeight(fairness_key, weight);
  });
}

fairgate_code fairgate_set_key_limits(fairgate_scheduler* scheduler, const char* fairness_key,
                                      const fairgate_key_limits* c, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{scheduler, "the scheduler"},
                          {fairness_key, "the fairness key"},
                          {c, "the fairgate_key_limits"}});
        !s.ok()) {
      return s;
    }
    return scheduler->impl->SetKeyLimits(fairness_key, KeyLimitsOf(*c));
  });
}

fairgate_code fairgate_set_key_group(fairgate_scheduler* scheduler, const char* fairness_key,
                                     const char* group, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"},
                          {fairness_key, "the fairness key"},
                          {group, "the group"}});
        !s.ok()) {
      return s;
    }
    return scheduler->impl->SetKeyGroup(fairness_key, group);
  });
}

fairgate_code fairgate_set_group_weight(fairgate_scheduler* scheduler, const char* group,
                                        double weight, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {group, "the group"}}); !s.ok()) return s;
    return scheduler->impl->SetGroupWeight(group, weight);
  });
}

fairgate_code fairgate_set_group_limits(fairgate_scheduler* scheduler, const char* group,
                                        int max_running, int min_running, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {group, "the group"}}); !s.ok()) return s;
    return scheduler->impl->SetGroupLimits(group, GroupLimitsOf(max_running, min_running));
  });
}

int fairgate_accumulated_cost(fairgate_scheduler* scheduler, const char* fairness_key,
                              double* cost) {
  if (scheduler == nullptr || fairness_key == nullptr) return 0;
  return Tracked(cost, "fairgate_accumulated_cost",
                 [&] { return scheduler->impl->AccumulatedCost(fairness_key); });
}

int fairgate_group_accumulated_cost(fairgate_scheduler* scheduler, const char* group,
                                    double* cost) {
  if (scheduler == nullptr || group == nullptr) return 0;
  return Tracked(cost, "fairgate_group_accumulated_cost",
                 [&] { return scheduler->impl->GroupAccumulatedCost(group); });
}

int fairgate_estimate(fairgate_scheduler* scheduler, const char* type, const char* id,
                      double* seconds) {
  if (scheduler == nullptr || type == nullptr || id == nullptr) return 0;
  return Tracked(seconds, "fairgate_estimate", [&] {
    return scheduler->impl->Estimate(fairgate::TypeName(type), fairgate::JobId(id));
  });
}

fairgate_code fairgate_add_worker(fairgate_scheduler* scheduler, const char* name, int slots,
                                  const char* const* types, size_t type_count,
                                  const char* const* tags, size_t tag_count, char** error) {
  return SetWorker(scheduler, name, slots, types, type_count, tags, tag_count, error,
                   /*update=*/false);
}

fairgate_code fairgate_update_worker(fairgate_scheduler* scheduler, const char* name, int slots,
                                     const char* const* types, size_t type_count,
                                     const char* const* tags, size_t tag_count, char** error) {
  return SetWorker(scheduler, name, slots, types, type_count, tags, tag_count, error,
                   /*update=*/true);
}

fairgate_code fairgate_remove_worker(fairgate_scheduler* scheduler, const char* name,
                                     char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {name, "the worker's name"}}); !s.ok())
      return s;
    return scheduler->impl->RemoveWorker(name);
  });
}

fairgate_code fairgate_pause_type(fairgate_scheduler* scheduler, const char* type, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {type, "the type"}}); !s.ok()) return s;
    return scheduler->impl->PauseType(type);
  });
}

fairgate_code fairgate_resume_type(fairgate_scheduler* scheduler, const char* type, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {type, "the type"}}); !s.ok()) return s;
    return scheduler->impl->ResumeType(type);
  });
}

fairgate_code fairgate_pause_key(fairgate_scheduler* scheduler, const char* fairness_key,
                                 char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {fairness_key, "the fairness key"}});
        !s.ok())
      return s;
    return scheduler->impl->PauseKey(fairness_key);
  });
}

fairgate_code fairgate_resume_key(fairgate_scheduler* scheduler, const char* fairness_key,
                                  char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {fairness_key, "the fairness key"}});
        !s.ok())
      return s;
    return scheduler->impl->ResumeKey(fairness_key);
  });
}

char* fairgate_snapshot_json(fairgate_scheduler* scheduler) {
  if (scheduler == nullptr) return nullptr;
  try {
    return Copy(fairgate::ToJson(scheduler->impl->Snapshot()));
  } catch (...) {
    Abort("fairgate_snapshot_json");
  }
}

char* fairgate_snapshot_json_heaviest(fairgate_scheduler* scheduler, size_t heaviest_keys) {
  if (scheduler == nullptr) return nullptr;
  try {
    return Copy(fairgate::ToJson(scheduler->impl->Snapshot(heaviest_keys)));
  } catch (...) {
    Abort("fairgate_snapshot_json_heaviest");
  }
}

fairgate_code fairgate_max_wait_to_ceiling(fairgate_scheduler* scheduler, const char* type,
                                           double* seconds, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{scheduler, "the scheduler"}, {type, "the type"}, {seconds, "seconds"}});
        !s.ok()) {
      return s;
    }
    const fairgate::StatusOr<fairgate::Seconds> wait = scheduler->impl->MaxWaitToCeiling(type);
    if (!wait.ok()) return wait.status();
    *seconds = wait->count();
    return absl::OkStatus();
  });
}

char* fairgate_metrics_text(fairgate_scheduler* scheduler) {
  if (scheduler == nullptr) return nullptr;
  try {
    std::string text;
    scheduler->impl->WriteMetrics(text);
    return Copy(text);
  } catch (...) {
    Abort("fairgate_metrics_text");
  }
}

fairgate_code fairgate_sqlite_options_init_version(fairgate_sqlite_options* out, uint32_t version) {
  const fairgate::SqliteStoreOptions defaults;
  fairgate_sqlite_options c{};
  fairgate_sqlite_options* options = &c;
  options->synchronous = defaults.synchronous == fairgate::SqliteStoreOptions::Sync::kFull
                             ? FAIRGATE_SQLITE_SYNC_FULL
                             : FAIRGATE_SQLITE_SYNC_NORMAL;
  options->busy_timeout_seconds = defaults.busy_timeout.count();
  options->max_job_bytes = defaults.max_job_bytes;
  return InitVersion(out, c, version, {sizeof(fairgate_sqlite_options)});
}

fairgate_store* fairgate_sqlite_store_open(const char* path, const fairgate_sqlite_options* c,
                                           fairgate_code* code, char** error) {
  return StoreFrom(code, error, [&]() -> fairgate::StatusOr<std::unique_ptr<fairgate::Store>> {
    if (Status s = Given({{path, "the path"}}); !s.ok()) return s;
    fairgate::SqliteStoreOptions options;
    if (c != nullptr) {
      if (Status s = VersionIs(c->version, FAIRGATE_SQLITE_OPTIONS_VERSION, "options",
                               "FAIRGATE_SQLITE_OPTIONS_VERSION", "fairgate_sqlite_options_init");
          !s.ok()) {
        return s;
      }
      if (c->synchronous != FAIRGATE_SQLITE_SYNC_FULL &&
          c->synchronous != FAIRGATE_SQLITE_SYNC_NORMAL) {
        return absl::InvalidArgumentError("options.synchronous must be a fairgate_sqlite_sync");
      }
      options.synchronous = c->synchronous == FAIRGATE_SQLITE_SYNC_FULL
                                ? fairgate::SqliteStoreOptions::Sync::kFull
                                : fairgate::SqliteStoreOptions::Sync::kNormal;
      options.busy_timeout = fairgate::Seconds(c->busy_timeout_seconds);
      options.max_job_bytes = c->max_job_bytes;
    }
    return fairgate::OpenSqliteStore(path, options);
  });
}

fairgate_code fairgate_postgres_options_init_version(fairgate_postgres_options* out,
                                                     uint32_t version) {
  const fairgate::PostgresStoreOptions defaults;
  fairgate_postgres_options c{};
  fairgate_postgres_options* options = &c;
  options->replica = nullptr;
  options->connections = defaults.connections;
  options->max_job_bytes = defaults.max_job_bytes;
  return InitVersion(out, c, version, {sizeof(fairgate_postgres_options)});
}

fairgate_store* fairgate_postgres_store_open(const char* conninfo,
                                             const fairgate_postgres_options* c,
                                             fairgate_code* code, char** error) {
  return StoreFrom(code, error, [&]() -> fairgate::StatusOr<std::unique_ptr<fairgate::Store>> {
    if (Status s = Given({{conninfo, "the connection string"}}); !s.ok()) return s;
    fairgate::PostgresStoreOptions options;
    if (c != nullptr) {
      if (Status s =
              VersionIs(c->version, FAIRGATE_POSTGRES_OPTIONS_VERSION, "options",
                        "FAIRGATE_POSTGRES_OPTIONS_VERSION", "fairgate_postgres_options_init");
          !s.ok()) {
        return s;
      }
      if (c->replica != nullptr) options.replica = c->replica;
      options.connections = c->connections;
      options.max_job_bytes = c->max_job_bytes;
    }
    return fairgate::OpenPostgresStore(conninfo, options);
  });
}

void fairgate_store_free(fairgate_store* store) {
  try {
    delete store;  // the store closes here unless a scheduler still holds it
  } catch (...) {
    Abort("fairgate_store_free");
  }
}

fairgate_code fairgate_retry_policy_init_version(fairgate_retry_policy* out, uint32_t version) {
  const fairgate::RetryPolicy defaults;
  fairgate_retry_policy c{};
  fairgate_retry_policy* policy = &c;
  policy->max_attempts = defaults.max_attempts;
  policy->initial_backoff_seconds = defaults.initial_backoff.count();
  policy->max_backoff_seconds = defaults.max_backoff.count();
  policy->multiplier = defaults.multiplier;
  return InitVersion(out, c, version, {sizeof(fairgate_retry_policy)});
}

fairgate_code fairgate_register_durable(fairgate_scheduler* scheduler, const char* type,
                                        fairgate_durable_fn handler, void* user,
                                        const fairgate_retry_policy* c, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{scheduler, "the scheduler"}, {type, "the type"}}); !s.ok()) return s;
    if (handler == nullptr) return absl::InvalidArgumentError("the handler is NULL");
    fairgate::RetryPolicy retry;
    if (c != nullptr) {
      if (Status s = VersionIs(c->version, FAIRGATE_RETRY_POLICY_VERSION, "retry",
                               "FAIRGATE_RETRY_POLICY_VERSION", "fairgate_retry_policy_init");
          !s.ok()) {
        return s;
      }
      retry.max_attempts = c->max_attempts;
      retry.initial_backoff = fairgate::Seconds(c->initial_backoff_seconds);
      retry.max_backoff = fairgate::Seconds(c->max_backoff_seconds);
      retry.multiplier = c->multiplier;
    }
    return scheduler->impl->RegisterDurable(
        type,
        [handler, user](const fairgate::DurableJob& job, const fairgate::Context& ctx) {
          // C reads names to a NUL: copies that end with one (the views need not).
          const std::string type(job.type), id(job.id), key(job.fairness_key);
          const fairgate_durable_job given{job.sequence,
                                           type.c_str(),
                                           id.c_str(),
                                           key.c_str(),
                                           job.payload.empty() ? "" : job.payload.data(),
                                           job.payload.size(),
                                           job.attempt,
                                           job.lease_token};
          const fairgate_context context{&ctx};
          char* message = nullptr;
          const fairgate_code code = handler(user, &given, &context, &message);
          Status status = StatusOf(code, message);
          std::free(message);
          return status;
        },
        retry);
  });
}

fairgate_code fairgate_recover(fairgate_scheduler* scheduler, fairgate_recovery_report* report,
                               char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    fairgate::StatusOr<fairgate::RecoveryReport> found = scheduler->impl->Recover();
    if (!found.ok()) return found.status();
    if (report != nullptr) {
      *report = {found->queued, found->deferred, found->without_handler, found->dead};
    }
    return absl::OkStatus();
  });
}

fairgate_code fairgate_submit_durable(fairgate_scheduler* scheduler, const fairgate_job* job,
                                      const void* payload, size_t payload_size, uint64_t* sequence,
                                      char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(scheduler, job); !s.ok()) return s;
    if (Status s = NoJobOptions(*job, "job", "a durable job"); !s.ok()) return s;
    std::string_view bytes;
    if (Status s = PayloadOf(payload, payload_size, "the payload", &bytes); !s.ok()) return s;
    fairgate::StatusOr<std::uint64_t> stored = scheduler->impl->SubmitDurable(NameOf(*job), bytes);
    if (!stored.ok()) return stored.status();
    if (sequence != nullptr) *sequence = *stored;
    return absl::OkStatus();
  });
}

fairgate_code fairgate_submit_durable_batch(fairgate_scheduler* scheduler,
                                            const fairgate_durable_submission* jobs, size_t count,
                                            uint64_t* sequences, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    if (jobs == nullptr && count > 0) {
      return absl::InvalidArgumentError("the jobs are NULL, with a count of " +
                                        std::to_string(count));
    }
    std::vector<fairgate::DurableSubmission> batch;
    batch.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const fairgate_durable_submission& given = jobs[i];
      const std::string what = "jobs[" + std::to_string(i) + "]";
      if (Status s = NamesAndFlagsOf(given.job, what + ".job"); !s.ok()) return s;
      if (Status s = NoJobOptions(given.job, what + ".job", "a durable job"); !s.ok()) return s;
      std::string_view bytes;
      if (Status s = PayloadOf(given.payload, given.payload_size, what + ".payload", &bytes);
          !s.ok()) {
        return s;
      }
      batch.push_back({NameOf(given.job), bytes});
    }
    fairgate::StatusOr<std::vector<std::uint64_t>> stored =
        scheduler->impl->SubmitDurableBatch(batch);
    if (!stored.ok()) return stored.status();
    if (sequences != nullptr) std::copy(stored->begin(), stored->end(), sequences);
    return absl::OkStatus();
  });
}

fairgate_code fairgate_dead_jobs(fairgate_scheduler* scheduler, uint64_t after, size_t limit,
                                 fairgate_stored_job** jobs, size_t* count, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{scheduler, "the scheduler"}, {jobs, "jobs"}, {count, "count"}});
        !s.ok()) {
      return s;
    }
    *jobs = nullptr;
    *count = 0;
    fairgate::StatusOr<std::vector<fairgate::StoredJob>> page =
        scheduler->impl->DeadJobs(after, limit);
    if (!page.ok()) return page.status();
    if (Status s = StoredJobsOf(*page, jobs); !s.ok()) return s;
    *count = page->size();
    return absl::OkStatus();
  });
}

void fairgate_stored_jobs_free(fairgate_stored_job* jobs, size_t count) {
  FreeStoredJobs(jobs, count);
}

fairgate_code fairgate_retry_dead_job(fairgate_scheduler* scheduler, uint64_t sequence,
                                      char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    return scheduler->impl->RetryDeadJob(sequence);
  });
}

fairgate_code fairgate_remove_dead_job(fairgate_scheduler* scheduler, uint64_t sequence,
                                       char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    return scheduler->impl->RemoveDeadJob(sequence);
  });
}

fairgate_code fairgate_flush_state(fairgate_scheduler* scheduler, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    return scheduler->impl->FlushState();
  });
}

char* fairgate_permit_worker(const fairgate_permit* permit) {
  return Copy(permit == nullptr ? std::string_view() : permit->permit.Worker());
}

uint64_t fairgate_permit_fencing_token(const fairgate_permit* permit) {
  return permit == nullptr ? 0 : permit->permit.FencingToken();
}

}  // extern "C"
