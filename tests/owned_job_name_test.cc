// OwnedJobName (runtime/owned_job_name.h): a Submit or Acquire record's three names kept in one
// buffer, inline up to its capacity and in one allocation past it, read back whole in either case.
// What the scheduler promises with it (names of any length queued whole from the intake) is tested
// in submit_intake_test.cc.
#include "runtime/owned_job_name.h"

#include <string>

#include "doctest/doctest.h"

namespace fairgate {
namespace {

using internal::OwnedJobName;

void CheckHolds(const OwnedJobName& name, const std::string& type, const std::string& id,
                const std::string& key) {
  CHECK(name.type() == type);
  CHECK(name.id() == id);
  CHECK(name.key() == key);
  const JobName view = name.view();
  CHECK(view.type == type);
  CHECK(view.id == id);
  CHECK(view.fairness_key == key);
}

TEST_CASE("OwnedJobName.NamesUpToTheInlineCapacityNeedNoAllocation") {
  const std::string type = "clone";
  const std::string key = "10.0.0.7";
  // Exactly the capacity, and one byte past it.
  const std::string id(OwnedJobName::kInline - type.size() - key.size(), 'r');
  OwnedJobName exact{JobName(TypeName(type), JobId(id), FairnessKey(key))};
  CheckHolds(exact, type, id, key);
  CHECK_FALSE(exact.allocated());
  const std::string longer = id + "x";
  OwnedJobName past{JobName(TypeName(type), JobId(longer), FairnessKey(key))};
  CheckHolds(past, type, longer, key);
  CHECK(past.allocated());
}

TEST_CASE("OwnedJobName.EmptyNamesAndReassignmentKeepEachNameApart") {
  OwnedJobName name;
  CheckHolds(name, "", "", "");
  // The key omitted, as the API allows.
  name.Assign(JobName(TypeName("t"), JobId("r")));
  CheckHolds(name, "t", "r", "");
  // Long, then short again: the allocation is given back, nothing of the long names is read.
  const std::string id(300, 'i');
  const std::string key(200, 'k');
  name.Assign(JobName(TypeName("fetch"), JobId(id), FairnessKey(key)));
  CheckHolds(name, "fetch", id, key);
  CHECK(name.allocated());
  name.Assign(JobName(TypeName("ab"), JobId("c"), FairnessKey("d")));
  CheckHolds(name, "ab", "c", "d");
  CHECK_FALSE(name.allocated());
}

}  // namespace
}  // namespace fairgate
