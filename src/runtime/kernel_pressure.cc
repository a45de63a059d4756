#include "runtime/kernel_pressure.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace fairgate::internal {

namespace {

// The first line of `path`, without its newline; nothing when it cannot be read.
std::optional<std::string> FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

}  // namespace

StatusOr<double> ReadStallSeconds(const std::string& path, const std::string& line_kind) {
  std::ifstream in(path);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", path, " (pressure stall information)"));
  }
  const std::string prefix = absl::StrCat(line_kind, " ");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream fields(line);
    for (std::string field; fields >> field;) {
      std::uint64_t micros = 0;
      if (field.rfind("total=", 0) == 0 && absl::SimpleAtoi(field.substr(6), &micros)) {
        return static_cast<double>(micros) / 1e6;
      }
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, " has no `", line_kind, " ... total=` line"));
}

std::optional<std::string> OwnCgroupV2(const std::string& self_cgroup,
                                       const std::vector<std::string>& roots) {
  std::ifstream in(self_cgroup);
  for (std::string line; std::getline(in, line);) {
    absl::string_view path(line);
    if (!absl::ConsumePrefix(&path, "0::")) continue;
    if (path.empty() || path == "/") return std::nullopt;
    for (const std::string& root : roots) {
      const std::string dir = absl::StrCat(root, path);
      std::error_code error;
      if (std::filesystem::exists(dir + "/cgroup.controllers", error)) return dir;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

StatusOr<double> ReadMemoryUse(const std::string& cgroup_dir) {
  const std::string current_path = cgroup_dir + "/memory.current";
  const std::string max_path = cgroup_dir + "/memory.max";
  const std::optional<std::string> current = FirstLine(current_path);
  const std::optional<std::string> max = FirstLine(max_path);
  double used = 0, limit = 0;
  if (!current || !absl::SimpleAtod(*current, &used)) {
    return absl::FailedPreconditionError(absl::StrCat("cannot read ", current_path));
  }
  if (!max || *max == "max" || !absl::SimpleAtod(*max, &limit) || limit <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(max_path, " is not a limit (memory use needs one)"));
  }
  return std::clamp(used / limit, 0.0, 1.0);
}

StatusOr<std::function<StatusOr<double>()>> KernelSignal(
    std::optional<PressureSource> source, const std::optional<std::string>& cgroup_dir) {
  std::function<StatusOr<double>()> read;
  if (source == PressureSource::kMemoryUse) {
    if (!cgroup_dir) {
      return absl::FailedPreconditionError(
          "memory use needs the process's own cgroup v2 with a memory.max, and it runs in none");
    }
    read = [dir = *cgroup_dir] { return ReadMemoryUse(dir); };
  } else {
    std::string resource = "cpu";
    std::string line = "some";
    if (source) {
      const bool memory =
          *source == PressureSource::kMemorySome || *source == PressureSource::kMemoryFull;
      resource = memory ? "memory" : "io";
      const bool full =
          *source == PressureSource::kMemoryFull || *source == PressureSource::kIoFull;
      line = full ? "full" : "some";
    }
    auto reader = [line](std::string path) -> std::function<StatusOr<double>()> {
      return [path = std::move(path), line] { return ReadStallSeconds(path, line); };
    };
    // The cgroup's own, where it can be read (a kernel may turn a cgroup's pressure off); else
    // the machine's.
    if (cgroup_dir) {
      read = reader(absl::StrCat(*cgroup_dir, "/", resource, ".pressure"));
      if (read().ok()) return read;
    }
    read = reader(absl::StrCat("/proc/pressure/", resource));
  }
  if (StatusOr<double> probe = read(); !probe.ok()) return probe.status();
  return read;
}

}  // namespace fairgate::internal
