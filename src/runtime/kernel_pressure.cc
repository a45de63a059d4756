#include "runtime/kernel_pressure.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

// The value of `key`'s line (`key value`) of a memory.stat; nothing when it has none.
std::optional<double> StatOf(const std::string& path, absl::string_view key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    absl::string_view rest(line);
    double value = 0;
    if (absl::ConsumePrefix(&rest, key) && absl::ConsumePrefix(&rest, " ") &&
        absl::SimpleAtod(rest, &value)) {
      return value;
    }
  }
  return std::nullopt;
}

// The number `path` holds on its first line; FailedPrecondition naming it when it cannot be read
// or holds something else ("max", a cgroup v2's "no limit", among them: `what` says why then).
StatusOr<double> NumberIn(const std::string& path, absl::string_view what) {
  const std::optional<std::string> line = FirstLine(path);
  double value = 0;
  if (!line || !absl::SimpleAtod(*line, &value)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " ", what));
  }
  return value;
}

// (used - reclaimable) / limit, in [0, 1].
double UseOf(double used, std::optional<double> reclaimable, double limit) {
  return std::clamp((used - reclaimable.value_or(0)) / limit, 0.0, 1.0);
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

std::optional<std::string> OwnMemoryCgroupV1(const std::string& self_cgroup,
                                             const std::string& root) {
  std::ifstream in(self_cgroup);
  for (std::string line; std::getline(in, line);) {
    // `hierarchy-id:controllers:path`, the controllers comma-separated.
    const std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    const std::vector<absl::string_view> controllers = absl::StrSplit(fields[1], ',');
    if (!absl::c_linear_search(controllers, "memory")) continue;
    const std::string dir = absl::StrCat(root, fields[2]);
    std::error_code error;
    if (std::filesystem::exists(dir + "/memory.limit_in_bytes", error)) return dir;
    return std::nullopt;
  }
  return std::nullopt;
}

StatusOr<double> ReadMemoryUseV1(const std::string& memory_dir) {
  const std::string limit_path = memory_dir + "/memory.limit_in_bytes";
  const std::string stat_path = memory_dir + "/memory.stat";
  StatusOr<double> used = NumberIn(memory_dir + "/memory.usage_in_bytes", "cannot be read");
  if (!used.ok()) return used.status();
  StatusOr<double> limit = NumberIn(limit_path, "cannot be read");
  if (!limit.ok()) return limit.status();
  if (const std::optional<double> inherited = StatOf(stat_path, "hierarchical_memory_limit")) {
    *limit = std::min(*limit, *inherited);
  }
  // The kernel's "no limit" is the largest page-aligned signed 64-bit value: anything near it.
  if (*limit <= 0 || *limit >= 0x1p62) {
    return absl::FailedPreconditionError(
        absl::StrCat(limit_path, " is not a limit, nor is a parent's (memory use needs one)"));
  }
  return UseOf(*used, StatOf(stat_path, "total_inactive_file"), *limit);
}

StatusOr<double> ReadMemoryUse(const std::string& cgroup_dir) {
  StatusOr<double> used = NumberIn(cgroup_dir + "/memory.current", "cannot be read");
  if (!used.ok()) return used.status();
  StatusOr<double> limit =
      NumberIn(cgroup_dir + "/memory.max", "is not a limit (memory use needs one)");
  if (!limit.ok()) return limit.status();
  if (*limit <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(cgroup_dir, "/memory.max is not a limit"));
  }
  return UseOf(*used, StatOf(cgroup_dir + "/memory.stat", "inactive_file"), *limit);
}

StatusOr<std::function<StatusOr<double>()>> KernelSignal(
    std::optional<PressureSource> source, const std::optional<std::string>& cgroup_dir,
    const std::optional<std::string>& memory_v1) {
  std::function<StatusOr<double>()> read;
  if (source == PressureSource::kMemoryUse) {
    // The cgroup v2's limit where it has one; else (memory still on cgroup v1) the v1 one's.
    if (cgroup_dir && ReadMemoryUse(*cgroup_dir).ok()) {
      read = [dir = *cgroup_dir] { return ReadMemoryUse(dir); };
    } else if (memory_v1) {
      read = [dir = *memory_v1] { return ReadMemoryUseV1(dir); };
    } else if (cgroup_dir) {
      read = [dir = *cgroup_dir] { return ReadMemoryUse(dir); };  // says why it cannot
    } else {
      return absl::FailedPreconditionError(
          "memory use needs the process's own cgroup (v2 with a memory.max, or a cgroup v1 "
          "memory controller with a limit), and it runs in none");
    }
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
