#include "repo_path.h"

#include "doctest/doctest.h"

namespace git_mirror {
namespace {
namespace repo_path_test {

TEST_CASE("GitMirror.Path.NamesTheRepositoryAndTheEndpoint") {
  auto refs = ParseGitRequestPath("/git.git/info/refs");
  REQUIRE(refs.ok());
  CHECK(refs->repository == "git.git");
  CHECK(refs->endpoint == GitEndpoint::kInfoRefs);
  auto pack = ParseGitRequestPath("/kernel/linux.git/git-upload-pack");
  REQUIRE(pack.ok());
  CHECK(pack->repository == "kernel/linux.git");
  CHECK(pack->endpoint == GitEndpoint::kUploadPack);
}

TEST_CASE("GitMirror.Path.EscapesAreInvalidArgument") {
  // Paths as the server hands them over: percent-decoded once.
  for (const char* path : {
           "/../etc/passwd/info/refs",    // parent directory
           "/a/../../b/info/refs",        // parent in the middle
           "//etc/passwd/info/refs",      // an absolute path after the leading slash
           "/./git.git/info/refs",        // current directory
           "/%2e%2e/info/refs",           // double-encoded '..', decoded once
           "/%2fetc%2fpasswd/info/refs",  // double-encoded slashes
           "/a\\..\\b/info/refs",         // backslashes
           "/-upload-pack=x/info/refs",   // would be read by git as an option
           "/.incoming/x/info/refs",      // hidden: the mirror's scratch directory
           "/git.git//info/refs",         // empty component
           "/a:b/info/refs",              // colon
           "/a\x01/info/refs",            // control character
           "/../../etc/passwd",           // an escape to no endpoint is still 400
       }) {
    const std::string shown = path;
    CAPTURE(shown);
    auto parsed = ParseGitRequestPath(path);
    CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("GitMirror.Path.OtherEndpointsAreNotFound") {
  for (const char* path : {"/", "/info/refs", "/git.git", "/git.git/objects/info/packs",
                           "/git.git/HEAD", "/git.git/git-receive-pack"}) {
    const std::string shown = path;
    CAPTURE(shown);
    CHECK(ParseGitRequestPath(path).status().code() == absl::StatusCode::kNotFound);
  }
}

TEST_CASE("GitMirror.Path.ErrorsNameWhatIsWrong") {
  auto parsed = ParseGitRequestPath("/a/../b/info/refs");
  CHECK(std::string(parsed.status().message()).find("'..'") != std::string::npos);
}

}  // namespace repo_path_test
}  // namespace
}  // namespace git_mirror
