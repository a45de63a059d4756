// ReadCpuStallSeconds: the CPU pressure stall counter of Linux (pressure stall information).
//
// /proc/pressure/cpu holds a line `some avg10=... avg60=... avg300=... total=<microseconds>`:
// the total time in which at least one runnable task waited for a CPU. Its increase over an
// interval, divided by the interval, is the share of that interval under pressure: the signal of
// adaptive capacity (fairgate/adaptive_capacity.h). Internal to fairgate.
#ifndef FAIRGATE_RUNTIME_CPU_PRESSURE_H_
#define FAIRGATE_RUNTIME_CPU_PRESSURE_H_

#include <string>

#include "fairgate/status.h"

namespace fairgate::internal {

// The `some` total of `path`, in seconds. FailedPrecondition naming the path when it cannot be
// read (a kernel without PSI, a container that hides it), InvalidArgument when it has no such
// line.
StatusOr<double> ReadCpuStallSeconds(const std::string& path = "/proc/pressure/cpu");

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_CPU_PRESSURE_H_
