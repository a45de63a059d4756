#include "repository_set.h"

#include <string>

#include "doctest/doctest.h"

namespace git_mirror {
namespace {
namespace repository_set_test {

TEST_CASE("GitMirror.Repositories.FromFlagsAndConfig") {
  RepositorySet set;
  REQUIRE(set.AddFlag("git.git=https://example.org/git.git").ok());
  REQUIRE(set.AddConfig("# mirrors\n\nkernel/linux.git  /srv/upstream/linux.git\n"
                        "  tools.git\tfile:///srv/tools.git  \n",
                        "mirrors.conf")
              .ok());
  REQUIRE(set.all().size() == 3);
  CHECK(*set.UpstreamOf("git.git") == "https://example.org/git.git");
  CHECK(*set.UpstreamOf("kernel/linux.git") == "/srv/upstream/linux.git");
  CHECK(*set.UpstreamOf("tools.git") == "file:///srv/tools.git");
  CHECK(set.UpstreamOf("other.git") == nullptr);
}

TEST_CASE("GitMirror.Repositories.BadEntriesNameTheirPlace") {
  struct Case {
    std::string config;
    std::string message_part;
  };
  for (const Case& c : {
           Case{"a.git\n", "mirrors.conf:1: expected 'NAME URL'"},
           Case{"ok.git /x\nb.git /y extra\n", "mirrors.conf:2: expected 'NAME URL', found more"},
           Case{"../a.git /x\n", "mirrors.conf:1: repository name '../a.git' contains '..'"},
           Case{"a.git -oProxyCommand=x\n", "starts with '-'"},
           Case{"a.git /x\na.git /y\n", "mirrors.conf:2: repository 'a.git' is named twice"},
       }) {
    CAPTURE(c.config);
    RepositorySet set;
    const auto status = set.AddConfig(c.config, "mirrors.conf");
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(status.message()).find(c.message_part) != std::string::npos);
  }
  RepositorySet set;
  CHECK(std::string(set.AddFlag("no-equals").message()).find("expected NAME=URL") !=
        std::string::npos);
  CHECK(std::string(set.AddFlag("a.git=").message()).find("has no upstream URL") !=
        std::string::npos);
  CHECK(set.AddConfigFile("/nonexistent/mirrors.conf").code() == absl::StatusCode::kNotFound);
}

}  // namespace repository_set_test
}  // namespace
}  // namespace git_mirror
