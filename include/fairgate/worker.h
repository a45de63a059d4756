// fairgate/worker.h: a worker, where jobs run (docs/ordering.md, "Workers").
//
// Without workers, fairgate admits jobs into `max_concurrency` slots that serve every type. A
// server whose workers are not interchangeable (GPU and CPU hosts, storage nodes that hold some
// repositories, build machines per architecture) declares them: a worker has a name, a number of
// slots and the types it names, by name or through the tags a type carries (JobTypeConfig::tags);
// it serves those of them it can hold a job of (WorkerServes). Once a worker is declared, a job is
// admitted only onto a worker that serves its type and has room for its slots, and the admission
// names that worker; every other constraint (global, tier and type caps, key limits, conflicts)
// still applies.
//
// Thread safety: a plain value type.
#ifndef FAIRGATE_WORKER_H_
#define FAIRGATE_WORKER_H_

#include <string>
#include <string_view>
#include <vector>

#include "fairgate/export.h"
#include "fairgate/job_type.h"
#include "fairgate/status.h"

namespace fairgate {

struct WorkerConfig {
  // Jobs of its types it runs at once, in slots (JobTypeConfig::slots). >= 1, at most 65535.
  int slots = 1;
  // The job types it serves by name. A name not registered yet is kept: the worker serves the
  // type once it is registered.
  std::vector<std::string> types;
  // It also serves every type that carries one of these tags (JobTypeConfig::tags).
  std::vector<std::string> tags;

  friend bool operator==(const WorkerConfig&, const WorkerConfig&) = default;
};

// Whether `worker` names the job type `type` of config `type_config`: in `types`, or through one
// of the type's tags; whatever its slots.
FAIRGATE_EXPORT bool WorkerNames(const WorkerConfig& worker, std::string_view type,
                                 const JobTypeConfig& type_config);

// Whether `worker` serves the job type `type`: it names it and has at least the type's slots, so
// that one of its jobs fits. A worker that names a type wider than itself does not serve it: none
// of its jobs could ever run there, so it is neither offered them nor held back for them
// (docs/ordering.md, "Workers"); Scheduler::AddWorker, UpdateWorker and RegisterType warn of such a
// pair.
FAIRGATE_EXPORT bool WorkerServes(const WorkerConfig& worker, std::string_view type,
                                  const JobTypeConfig& type_config);

// OK when `name` and `config` describe a valid worker, else InvalidArgument naming what is wrong:
// an empty name, slots out of range, an empty type name or tag, or no type and no tag at all.
FAIRGATE_EXPORT Status ValidateWorker(std::string_view name, const WorkerConfig& config);

// The Unavailable a job gets when its worker `worker` is removed while it runs
// (Scheduler::RemoveWorker): "worker '<worker>' was removed while the job ran on it", no payload,
// so it prints as just that. WorkerLost: whether a status is one (Unavailable with that message),
// as opposed to an Unavailable of the job's own.
FAIRGATE_EXPORT Status WorkerLostError(std::string_view worker);
FAIRGATE_EXPORT bool WorkerLost(const Status& status);

}  // namespace fairgate

#endif  // FAIRGATE_WORKER_H_
