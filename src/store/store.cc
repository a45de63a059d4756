// The defaults of fairgate/store.h's shared-store methods, for stores that are not shared.
#include "fairgate/store.h"

#include "absl/strings/str_cat.h"

namespace fairgate {
namespace {

Status NotShared(const char* what) {
  return absl::UnimplementedError(
      absl::StrCat(what, ": this store is not shared (only a shared store hands out leases)"));
}

}  // namespace

StatusOr<std::vector<StoredJob>> Store::ClaimJobs(const std::vector<ClaimableType>&, std::size_t,
                                                  double) {
  return NotShared("ClaimJobs");
}

StatusOr<std::size_t> Store::RenewLeases(double) { return NotShared("RenewLeases"); }

Status Store::ReleaseJob(std::uint64_t) { return NotShared("ReleaseJob"); }

StatusOr<std::uint64_t> Store::AcquireResource(std::string_view, std::string_view, int, double) {
  return NotShared("AcquireResource");
}

Status Store::ReleaseResource(std::string_view, std::string_view, std::uint64_t) {
  return NotShared("ReleaseResource");
}

StatusOr<std::vector<SavedKey>> Store::ShareKeyCosts(const std::vector<SavedKey>&,
                                                     const std::vector<std::string>&) {
  return NotShared("ShareKeyCosts");
}

}  // namespace fairgate
