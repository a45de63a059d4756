#include "repository_set.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "as_absl.h"
#include "repo_path.h"

namespace git_mirror {

fairgate::Status RepositorySet::Add(std::string_view name, std::string_view url,
                                    std::string_view where) {
  if (auto s = ValidateRepositoryName(name); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(AsAbsl(where), ": ", s.message()));
  }
  if (url.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(where), ": repository '", AsAbsl(name), "' has no upstream URL"));
  }
  if (url.front() == '-') {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(where), ": upstream URL '", AsAbsl(url), "' starts with '-'"));
  }
  if (!upstreams_.emplace(std::string(name), std::string(url)).second) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(where), ": repository '", AsAbsl(name), "' is named twice"));
  }
  return absl::OkStatus();
}

fairgate::Status RepositorySet::AddFlag(std::string_view flag) {
  const std::size_t eq = flag.find('=');
  if (eq == std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--repo '", AsAbsl(flag), "': expected NAME=URL"));
  }
  return Add(flag.substr(0, eq), flag.substr(eq + 1), absl::StrCat("--repo '", AsAbsl(flag), "'"));
}

fairgate::Status RepositorySet::AddConfig(std::string_view text, std::string_view origin) {
  std::istringstream lines{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    const std::size_t space = trimmed.find_first_of(" \t");
    const std::string where = absl::StrCat(AsAbsl(origin), ":", number);
    if (space == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected 'NAME URL'"));
    }
    const absl::string_view url = absl::StripLeadingAsciiWhitespace(trimmed.substr(space));
    if (url.find_first_of(" \t") != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected 'NAME URL', found more than two fields"));
    }
    const absl::string_view name = trimmed.substr(0, space);
    if (auto s = Add(std::string_view(name.data(), name.size()),
                     std::string_view(url.data(), url.size()), where);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

fairgate::Status RepositorySet::AddConfigFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read config file '", path, "'"));
  std::ostringstream text;
  text << file.rdbuf();
  return AddConfig(text.str(), path);
}

const std::string* RepositorySet::UpstreamOf(std::string_view name) const {
  auto it = upstreams_.find(name);
  return it == upstreams_.end() ? nullptr : &it->second;
}

}  // namespace git_mirror
