// The control of job_name_swapped.cc: the same call with the names in order compiles.
#include "fairgate/scheduler.h"

namespace fairgate {

Status Probe(Scheduler& scheduler) {
  return scheduler.RunSync(Context::Background(),
                           {TypeName("clone"), JobId("linux.git"), FairnessKey("alice")},
                           [](const Context&) { return absl::OkStatus(); });
}

}  // namespace fairgate
