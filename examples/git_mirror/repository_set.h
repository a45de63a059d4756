// RepositorySet: the upstream repositories a mirror serves, by name.
//
// Names come from `--repo NAME=URL` flags and from a config file of `NAME URL` lines (blank lines
// and lines starting with '#' are ignored). Any URL git accepts works (the tests use local paths).
// Names follow ValidateRepositoryName; a name given twice, an empty URL or one starting with '-'
// (git would read it as an option) is refused with InvalidArgument naming the line or flag.
#ifndef FAIRGATE_EXAMPLES_GIT_MIRROR_REPOSITORY_SET_H_
#define FAIRGATE_EXAMPLES_GIT_MIRROR_REPOSITORY_SET_H_

#include <map>
#include <string>
#include <string_view>

#include "fairgate/status.h"

namespace git_mirror {

class RepositorySet {
 public:
  // Adds "NAME=URL" (a command-line flag).
  fairgate::Status AddFlag(std::string_view flag);
  // Adds every line of a config file; `origin` names it in errors.
  fairgate::Status AddConfig(std::string_view text, std::string_view origin);
  fairgate::Status AddConfigFile(const std::string& path);

  // The upstream URL of `name`, or null if the mirror does not serve it.
  const std::string* UpstreamOf(std::string_view name) const;
  const std::map<std::string, std::string, std::less<>>& all() const { return upstreams_; }

 private:
  fairgate::Status Add(std::string_view name, std::string_view url, std::string_view where);
  std::map<std::string, std::string, std::less<>> upstreams_;
};

}  // namespace git_mirror

#endif  // FAIRGATE_EXAMPLES_GIT_MIRROR_REPOSITORY_SET_H_
