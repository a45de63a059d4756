#include "fairgate/periodic.h"

#include "runtime/periodic_state.h"

namespace fairgate {

void PeriodicJob::Stop() {
  if (state_) state_->stopped = true;
}

std::uint64_t PeriodicJob::runs() const { return state_ ? state_->runs.load() : 0; }

}  // namespace fairgate
