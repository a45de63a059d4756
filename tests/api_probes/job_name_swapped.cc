// Must not compile: a job's id given where its type belongs (Build.SwappedJobNamesDoNotCompile).
#include "fairgate/scheduler.h"

namespace fairgate {

Status Probe(Scheduler& scheduler) {
  return scheduler.RunSync(Context::Background(),
                           {JobId("linux.git"), TypeName("clone"), FairnessKey("alice")},
                           [](const Context&) { return absl::OkStatus(); });
}

}  // namespace fairgate
