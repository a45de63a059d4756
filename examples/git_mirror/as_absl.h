// AsAbsl: a std::string_view as Abseil's string_view, for absl::StrCat and friends (the name the
// core's own, internal helper has). Debian 12's Abseil is built with a string_view type of its own,
// which std::string_view does not convert to.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_AS_ABSL_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_AS_ABSL_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace git_mirror {

inline absl::string_view AsAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_AS_ABSL_H_
