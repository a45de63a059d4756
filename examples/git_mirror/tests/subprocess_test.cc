#include "subprocess.h"

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "doctest/doctest.h"

namespace git_mirror {
namespace {
namespace subprocess_test {

using namespace std::chrono_literals;

TEST_CASE("GitMirror.Process.FeedsInputAndCollectsOutput") {
  std::string input(1 << 20, 'x');  // larger than a pipe buffer, both ways
  auto result = RunProcess({"sh", "-c", "cat; echo oops >&2; exit 3"}, input,
                           fairgate::Context::Background());
  REQUIRE(result.ok());
  CHECK(result->exit_code == 3);
  CHECK(result->out == input);
  CHECK(result->err == "oops\n");
}

TEST_CASE("GitMirror.Process.ExtraEnvironmentReachesTheChild") {
  auto result = RunProcess({"sh", "-c", "printf %s \"$MIRROR_TEST\""}, "",
                           fairgate::Context::Background(), {"MIRROR_TEST=yes"});
  REQUIRE(result.ok());
  CHECK(result->out == "yes");
}

// Whether process `pid` has ended (gone, or a zombie waiting for its new parent to reap it).
bool Ended(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string skip, state;
  if (!(stat >> skip >> skip >> state)) return true;
  return state == "Z";
}

TEST_CASE("GitMirror.Process.ADoneContextKillsTheProcessAndWhatItStarted") {
  char dir[] = "/tmp/fairgate-process-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string pid_file = std::string(dir) + "/pid";
  auto [ctx, cancel] = fairgate::WithTimeout(fairgate::Context::Background(), 300ms);
  // The shell starts a child that would outlive a kill of the shell alone.
  auto result = RunProcess({"sh", "-c", "sleep 30 & echo $! > " + pid_file + "; wait"}, "", ctx);
  CHECK(result.status().code() == absl::StatusCode::kDeadlineExceeded);
  cancel();
  std::string pid;
  std::ifstream(pid_file) >> pid;
  REQUIRE(!pid.empty());
  bool ended = false;
  for (int i = 0; i < 200 && !ended; ++i) {
    ended = Ended(pid);
    if (!ended) std::this_thread::sleep_for(10ms);
  }
  CHECK(ended);
  std::filesystem::remove_all(dir);
}

TEST_CASE("GitMirror.Process.AChildThatStopsReadingEarlyIsFine") {
  std::string input(1 << 20, 'y');
  auto result = RunProcess({"head", "-c", "10"}, input, fairgate::Context::Background());
  REQUIRE(result.ok());
  CHECK(result->out == std::string(10, 'y'));
}

TEST_CASE("GitMirror.Process.BadCommandsAreStatuses") {
  CHECK(RunProcess({}, "", fairgate::Context::Background()).status().code() ==
        absl::StatusCode::kInvalidArgument);
  auto missing = RunProcess({"no-such-program-here"}, "", fairgate::Context::Background());
  CHECK(missing.status().code() == absl::StatusCode::kInternal);
  CHECK(std::string(missing.status().message()).find("no-such-program-here") != std::string::npos);
}

}  // namespace subprocess_test
}  // namespace
}  // namespace git_mirror
