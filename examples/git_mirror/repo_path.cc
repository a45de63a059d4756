#include "repo_path.h"

#include "absl/strings/str_cat.h"
#include "as_absl.h"

namespace git_mirror {
namespace {

constexpr std::string_view kInfoRefs = "/info/refs";
constexpr std::string_view kUploadPack = "/git-upload-pack";

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

fairgate::Status ValidateRepositoryName(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("empty repository name");
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = name.find('/', start);
    const std::string_view component = name.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (component.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("repository name '", AsAbsl(name), "' has an empty path component"));
    }
    if (component == "." || component == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("repository name '", AsAbsl(name), "' contains '", AsAbsl(component), "'"));
    }
    if (component.front() == '-' || component.front() == '.') {
      return absl::InvalidArgumentError(absl::StrCat("repository name '", AsAbsl(name),
                                                     "' has a component starting with '",
                                                     AsAbsl(component.substr(0, 1)), "'"));
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '\\' || c == '%' || c == ':') {
      return absl::InvalidArgumentError(absl::StrCat(
          "repository name '", AsAbsl(name), "' contains a forbidden character (code ", u, ")"));
    }
  }
  return absl::OkStatus();
}

fairgate::StatusOr<GitRequestPath> ParseGitRequestPath(std::string_view path) {
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError("request path does not start with '/'");
  }
  GitRequestPath result;
  const std::string_view body = path.substr(1);
  std::string_view rest;
  if (EndsWith(body, kInfoRefs)) {
    result.endpoint = GitEndpoint::kInfoRefs;
    rest = body.substr(0, body.size() - kInfoRefs.size());
  } else if (EndsWith(body, kUploadPack)) {
    result.endpoint = GitEndpoint::kUploadPack;
    rest = body.substr(0, body.size() - kUploadPack.size());
  } else {
    if (body.empty()) return absl::NotFoundError("'/' is not a repository");
    // Still refuse escapes with 400, so that probing them never looks like a missing file.
    if (auto s = ValidateRepositoryName(body); !s.ok()) return s;
    return absl::NotFoundError(absl::StrCat(
        "'", AsAbsl(path), "' is not a smart-HTTP endpoint (info/refs, git-upload-pack)"));
  }
  if (auto s = ValidateRepositoryName(rest); !s.ok()) return s;
  result.repository = std::string(rest);
  return result;
}

}  // namespace git_mirror
