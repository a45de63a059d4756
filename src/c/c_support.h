// The C interface's shared parts, internal to src/c: the handles behind fairgate/c.h's opaque
// types, and the conversions between C's arguments and answers and the C++ library's that each
// of its units (scheduler.cc, options.cc, durable.cc) uses.
#ifndef FAIRGATE_C_C_SUPPORT_H_
#define FAIRGATE_C_C_SUPPORT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fairgate/c.h"
#include "fairgate/context.h"
#include "fairgate/group_limits.h"
#include "fairgate/job_name.h"
#include "fairgate/job_options.h"
#include "fairgate/key_limits.h"
#include "fairgate/periodic.h"
#include "fairgate/permit.h"
#include "fairgate/scheduler.h"
#include "fairgate/seconds.h"
#include "fairgate/status.h"
#include "fairgate/store.h"

// The handles behind c.h's opaque types.
struct fairgate_scheduler {
  std::unique_ptr<fairgate::Scheduler> impl;
};

struct fairgate_context {
  const fairgate::Context* ctx;
};

struct fairgate_permit {
  fairgate::Permit permit;
  mutable fairgate_context context{nullptr};  // the permit's JobContext, once asked for
};

struct fairgate_cancel_callback {
  fairgate::CancelCallback callback;
};

struct fairgate_periodic {
  fairgate::PeriodicJob job;
};

struct fairgate_store {
  std::shared_ptr<fairgate::Store> impl;
};

struct fairgate_cancel {
  fairgate::Context ctx;  // done once fired
  fairgate::CancelFunc fire;
  fairgate_context view{&ctx};  // ctx for the context calls (fairgate_cancel_context)
};

namespace fairgate::c_api {

// `text` as a C string the caller frees with free (fairgate_free); NULL when memory ran out.
char* Copy(std::string_view text);

// `status`'s code as C's (the values are absl's).
fairgate_code CodeOf(const Status& status);

// The tail a message takes for what a C++ caller reads from its status's payloads (c.h:
// fairgate_retry_after, fairgate_was_shed): " [fairgate: shed; retry_after=S]" or
// " [fairgate: retry_after=S]".
inline constexpr std::string_view kTailStart = " [fairgate: ";
inline constexpr std::string_view kShed = "shed; ";
inline constexpr std::string_view kRetryAfter = "retry_after=";

// `status`'s message for C: with that tail when it carries a retry-after.
std::string MessageOf(const Status& status);

// The tail of `message` after kTailStart, without its "]" (nothing if it has none).
std::optional<std::string_view> TailOf(const char* message);

// `status` as the C call's answer: its code, and its message into *error when it failed.
fairgate_code Answer(const Status& status, char** error);

// A C code and message as a Status; an unknown code is Unknown.
Status StatusOf(fairgate_code code, const char* message);

// The pointers a call needs (c.h, "NULL"): the first that is NULL refused, by name.
Status Given(std::initializer_list<std::pair<const void*, const char*>> pointers);

// `count` strings from `strings` into *out; a NULL array of some strings, or a NULL string in
// it, refused, named by `what`.
Status Strings(const char* const* strings, size_t count, const char* what,
               std::vector<std::string>* out);

// For calls with nothing to return a failure through.
[[noreturn]] void Abort(const char* what);

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

// A C job's names, and its cost hint and flags as JobOptions.
fairgate::JobName NameOf(const fairgate_job& job);
fairgate::JobOptions OptionsOf(const fairgate_job& job);

// A job's names, each given, and flags that are all known; `what` names the job.
Status NamesAndFlagsOf(const fairgate_job& job, const std::string& what);

// The scheduler and the job a job call needs, with each of the job's names.
Status Given(const fairgate_scheduler* scheduler, const fairgate_job* job);

// A C enum field's value as an int, read without loading it as the enum: a C caller may store a
// value the enum does not name, which C++ may not load as one (a refusal must read it first).
template <typename Enum>
int EnumValue(const Enum& field) {
  static_assert(sizeof(Enum) == sizeof(int));
  int value;
  std::memcpy(&value, &field, sizeof value);
  return value;
}

// C's limits of a key, and of a group (a max_running of 0: no limit).
fairgate::KeyLimits KeyLimitsOf(const fairgate_key_limits& c);
fairgate::GroupLimits GroupLimitsOf(int max_running, int min_running);

// A versioned struct's version checked: `what`.version must be `want` (`macro`), as `init` sets.
Status VersionIs(std::uint32_t got, std::uint32_t want, const char* what, const char* macro,
                 const char* init);

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

// A durable or periodic job takes no JobOptions (SubmitDurable and SubmitEvery have none): a
// cost hint or a flag given is refused rather than dropped. `kind`: "a durable job", "a periodic
// job".
Status NoJobOptions(const fairgate_job& job, const std::string& what, const char* kind);

// A C job's body as the C++ one: `run` with `user`, its code and message as the job's status.
fairgate::Scheduler::JobFn JobFnOf(fairgate_job_fn run, void* user);

// A C done callback as the C++ one (none for NULL).
std::function<void(const Status&)> DoneOf(fairgate_done_fn done, void* user);

// `parent`, or one made from it that ends after `timeout_seconds` (< 0: never), for `call`,
// cancelled after it.
template <typename Call>
Status WithTimeoutSeconds(double timeout_seconds, Call&& call,
                          const fairgate::Context& parent = fairgate::Context::Background()) {
  if (timeout_seconds < 0) return call(parent);
  auto [ctx, cancel] =
      fairgate::WithTimeout(parent, std::chrono::duration_cast<fairgate::Context::Clock::duration>(
                                        fairgate::Seconds(timeout_seconds)));
  Status status = call(ctx);
  cancel();
  return status;
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

}  // namespace fairgate::c_api

#endif  // FAIRGATE_C_C_SUPPORT_H_
