// fairgate/c.h's shared conversions (c_support.h).
#include "c/c_support.h"

#include <cstdio>
#include <cstdlib>

#include "fairgate/rate_limit.h"
#include "fairgate/shedding.h"

namespace fairgate::c_api {

// Every FAIRGATE_JOB_* flag.
constexpr std::uint32_t kJobFlags = FAIRGATE_JOB_JOIN_RUNNING |
                                    FAIRGATE_JOB_REQUEUE_ON_WORKER_LOSS |
                                    FAIRGATE_JOB_REFUSE_WITHOUT_TOKEN;

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

std::optional<std::string_view> TailOf(const char* message) {
  if (message == nullptr) return std::nullopt;
  const std::string_view text(message);
  const std::size_t at = text.rfind(kTailStart);
  if (at == std::string_view::npos || text.back() != ']') return std::nullopt;
  return text.substr(at + kTailStart.size(), text.size() - 1 - (at + kTailStart.size()));
}

fairgate_code Answer(const Status& status, char** error) {
  if (!status.ok() && error != nullptr) *error = Copy(MessageOf(status));
  return CodeOf(status);
}

Status StatusOf(fairgate_code code, const char* message) {
  if (code == FAIRGATE_OK) return absl::OkStatus();
  const int value = static_cast<int>(code);
  const absl::StatusCode status_code =
      value > 0 && value <= 16 ? static_cast<absl::StatusCode>(value) : absl::StatusCode::kUnknown;
  return Status(status_code, message == nullptr ? "" : message);
}

Status Given(std::initializer_list<std::pair<const void*, const char*>> pointers) {
  for (const auto& [pointer, what] : pointers) {
    if (pointer == nullptr) return absl::InvalidArgumentError(std::string(what) + " is NULL");
  }
  return absl::OkStatus();
}

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

[[noreturn]] void Abort(const char* what) {
  std::fprintf(stderr, "fairgate: %s threw; aborting\n", what);
  std::abort();
}

fairgate::JobName NameOf(const fairgate_job& job) {
  return {fairgate::TypeName(job.type), fairgate::JobId(job.id),
          fairgate::FairnessKey(job.fairness_key)};
}

fairgate::JobOptions OptionsOf(const fairgate_job& job) {
  fairgate::JobOptions options;
  if (!(job.cost < 0)) options.cost = job.cost;  // NaN too: refused as the C++ refuses it
  options.join_running = (job.flags & FAIRGATE_JOB_JOIN_RUNNING) != 0;
  options.requeue_on_worker_loss = (job.flags & FAIRGATE_JOB_REQUEUE_ON_WORKER_LOSS) != 0;
  options.refuse_without_token = (job.flags & FAIRGATE_JOB_REFUSE_WITHOUT_TOKEN) != 0;
  return options;
}

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

Status Given(const fairgate_scheduler* scheduler, const fairgate_job* job) {
  if (Status s = Given({{scheduler, "the scheduler"}, {job, "the job"}}); !s.ok()) return s;
  return NamesAndFlagsOf(*job, "job");
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

Status VersionIs(std::uint32_t got, std::uint32_t want, const char* what, const char* macro,
                 const char* init) {
  if (got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(std::string(what) + ".version must be " + macro + " (" +
                                    std::to_string(want) + "), got " + std::to_string(got) +
                                    ": fill it with " + init);
}

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

std::function<void(const Status&)> DoneOf(fairgate_done_fn done, void* user) {
  if (done == nullptr) return {};
  return [done, user](const Status& status) {
    const std::string message = MessageOf(status);
    done(user, CodeOf(status), message.c_str());
  };
}

}  // namespace fairgate::c_api
