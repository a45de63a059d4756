// The core's checks of its callers' arguments, shared by its files, and its conversion to
// Abseil's strings, which the layers above it (metrics, the simulator) use too. Internal: not
// installed.
#ifndef FAIRGATE_CORE_ARGUMENTS_H_
#define FAIRGATE_CORE_ARGUMENTS_H_

#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "fairgate/status.h"

namespace fairgate::core {

// The public API takes std::string_view; the core's tables are keyed by absl::string_view.
inline absl::string_view AsAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

[[gnu::cold, gnu::noinline]] inline Status NotFinite(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(what, " is not finite"));
}

// InvalidArgument naming `what` unless the time `t` is finite. Inlined: every enqueue and
// completion asks it.
inline Status CheckTime(double t, absl::string_view what) {
  if (!std::isfinite(t)) [[unlikely]] {
    return NotFinite(what);
  }
  return absl::OkStatus();
}

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_ARGUMENTS_H_
