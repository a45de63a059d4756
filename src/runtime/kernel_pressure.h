// The kernel's pressure signals for adaptive capacity (fairgate/adaptive_capacity.h): Linux's
// pressure stall information and a cgroup's memory use. Internal to fairgate.
//
// A pressure file (/proc/pressure/cpu, a cgroup's memory.pressure, ...) holds lines
// `some avg10=... avg60=... avg300=... total=<microseconds>` and `full ...`: the total time in
// which at least one task (some) or every non-idle task (full) stalled on the resource. Its
// increase over an interval, divided by the interval, is the share of that interval under
// pressure.
#ifndef FAIRGATE_RUNTIME_KERNEL_PRESSURE_H_
#define FAIRGATE_RUNTIME_KERNEL_PRESSURE_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fairgate/adaptive_capacity.h"
#include "fairgate/status.h"

namespace fairgate::internal {

// The total of `path`'s `line` ("some" or "full"), in seconds. FailedPrecondition naming the path
// when it cannot be read (a kernel without PSI, a container that hides it), InvalidArgument when
// it has no such line.
StatusOr<double> ReadStallSeconds(const std::string& path, const std::string& line = "some");
inline StatusOr<double> ReadCpuStallSeconds(const std::string& path = "/proc/pressure/cpu") {
  return ReadStallSeconds(path, "some");
}

// The directory of the process's own cgroup v2: the path of the `0::` line of `self_cgroup`
// under the first of `roots` where it is a cgroup v2 directory (it has cgroup.controllers), or
// nothing when the process is in the root cgroup, on cgroup v1 only, or the files are missing.
std::optional<std::string> OwnCgroupV2(const std::string& self_cgroup = "/proc/self/cgroup",
                                       const std::vector<std::string>& roots = {
                                           "/sys/fs/cgroup", "/sys/fs/cgroup/unified"});

// The directory of the process's own cgroup v1 memory controller (a hierarchy that still keeps
// memory on v1 while the rest is v2): the path of the `N:memory:` line of `self_cgroup` under
// `root` where it has memory.limit_in_bytes; nothing when there is no such line or directory.
std::optional<std::string> OwnMemoryCgroupV1(const std::string& self_cgroup = "/proc/self/cgroup",
                                             const std::string& root = "/sys/fs/cgroup/memory");

// The cgroup v2's memory in use against its limit, in [0, 1]: memory.current less the page
// cache the kernel would reclaim first (memory.stat's inactive_file; all of memory.current when
// memory.stat cannot be read), over memory.max. FailedPrecondition naming the file when one
// cannot be read or the cgroup has no limit (memory.max "max").
StatusOr<double> ReadMemoryUse(const std::string& cgroup_dir);
// The same of a cgroup v1 memory controller's directory: memory.usage_in_bytes less
// memory.stat's total_inactive_file, over the least of memory.limit_in_bytes and memory.stat's
// hierarchical_memory_limit (a parent's limit counts); none (the kernel's "unlimited", 2^63
// rounded to pages) is FailedPrecondition.
StatusOr<double> ReadMemoryUseV1(const std::string& memory_dir);

// The kernel's reading of `source` (CPU pressure's `some` when nullopt): from `cgroup_dir`'s files
// when given and readable, else the machine's /proc/pressure. Memory use needs a limit: the cgroup
// v2's where it has one, else `memory_v1`'s (FailedPrecondition with neither). The error of a
// first reading when it cannot be read now.
StatusOr<std::function<StatusOr<double>()>> KernelSignal(
    std::optional<PressureSource> source, const std::optional<std::string>& cgroup_dir,
    const std::optional<std::string>& memory_v1 = std::nullopt);

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_KERNEL_PRESSURE_H_
