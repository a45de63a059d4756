// fairgate/job_name.h: a job's names as one value: the type it is of, its id and the fairness key
// it is charged to.
//
// Each name is a type of its own, built explicitly from a string, so names given in the wrong
// order do not compile:
//
//   scheduler->RunSync(ctx, {TypeName("clone"), JobId("linux.git"), FairnessKey(client)}, fn);
//   scheduler->RunSync(ctx, {JobId("linux.git"), TypeName("clone"), ...}, fn);  // does not compile
//
// - the type names a registered JobTypeConfig (its caps, tier, conflict group);
// - the id is what the job is about (a repository): estimates are learned per (type, id), a
//   conflict group's resource is (group, id), coalescing joins jobs of one (type, id);
// - the fairness key is who is charged for it (a client); omitted, the key "".
//
// Thread safety: plain values. Ownership: views; the scheduler copies what it keeps before the
// call that took them returns.
#ifndef FAIRGATE_JOB_NAME_H_
#define FAIRGATE_JOB_NAME_H_

#include <string_view>

namespace fairgate {

struct TypeName {
  constexpr explicit TypeName(std::string_view value) : value(value) {}
  std::string_view value;
};

struct JobId {
  constexpr explicit JobId(std::string_view value) : value(value) {}
  std::string_view value;
};

struct FairnessKey {
  constexpr explicit FairnessKey(std::string_view value) : value(value) {}
  std::string_view value;
};

struct JobName {
  constexpr JobName(TypeName type, JobId id, FairnessKey fairness_key = FairnessKey({}))
      : type(type.value), id(id.value), fairness_key(fairness_key.value) {}
  std::string_view type;
  std::string_view id;
  std::string_view fairness_key;
};

}  // namespace fairgate

#endif  // FAIRGATE_JOB_NAME_H_
