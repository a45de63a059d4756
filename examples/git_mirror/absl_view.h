// AbslView: a std::string_view as Abseil's string_view, for absl::StrCat and friends. Debian 12's
// Abseil is built with a string_view type of its own, which std::string_view does not convert to.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_ABSL_VIEW_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_ABSL_VIEW_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace git_mirror {

inline absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_ABSL_VIEW_H_
