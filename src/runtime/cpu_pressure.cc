#include "runtime/cpu_pressure.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace fairgate::internal {

StatusOr<double> ReadCpuStallSeconds(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", path, " (CPU pressure stall information)"));
  }
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("some ", 0) != 0) continue;
    std::istringstream fields(line);
    for (std::string field; fields >> field;) {
      std::uint64_t micros = 0;
      if (field.rfind("total=", 0) == 0 && absl::SimpleAtoi(field.substr(6), &micros)) {
        return static_cast<double>(micros) / 1e6;
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(path, " has no `some ... total=` line"));
}

}  // namespace fairgate::internal
