// ParseGitRequestPath: which repository and which smart-HTTP endpoint a request path names.
//
// The mirror serves `/<repository>/info/refs` and `/<repository>/git-upload-pack`, where
// <repository> is one or more components such as `git.git` or `kernel/linux.git`. The path is the
// one the server hands over, already percent-decoded once. Whatever could make a name reach outside
// the mirror directory or be read by git as an option is refused with InvalidArgument (the server
// answers 400): empty components (`//`, a leading `//` that would make an absolute path), `.` and
// `..`, backslashes, colons, control characters, a `%` left after decoding (an encoded variant such
// as
// `%252e%252e`), and a component starting with `-` (git would read it as an option) or `.` (hidden
// files, and the mirror's own scratch directory). A well-formed path to neither endpoint is
// NotFound (404). Whether the repository is known is the caller's question.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_REPO_PATH_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_REPO_PATH_H_

#include <string>
#include <string_view>

#include "fairgate/status.h"

namespace git_mirror {

enum class GitEndpoint { kInfoRefs, kUploadPack };

struct GitRequestPath {
  std::string repository;
  GitEndpoint endpoint = GitEndpoint::kInfoRefs;
};

fairgate::StatusOr<GitRequestPath> ParseGitRequestPath(std::string_view path);

// Whether `name` is a safe repository name, by the same rules (for names in the configuration).
fairgate::Status ValidateRepositoryName(std::string_view name);

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_REPO_PATH_H_
