// RecordJobName (runtime/record_job_name.h): a call record's three names, kept in one buffer
// (inline up to its capacity, in one allocation past it) or borrowed, read back whole in every
// case. What the scheduler promises with it (names of any length queued whole from the intake)
// is tested in submit_intake_test.cc.
#include "runtime/record_job_name.h"

#include <string>

#include "doctest/doctest.h"

namespace fairgate {
namespace {
namespace record_job_name_test {

using internal::RecordJobName;

void CheckHolds(const RecordJobName& name, const std::string& type, const std::string& id,
                const std::string& key) {
  const JobName view = name.view();
  CHECK(view.type == type);
  CHECK(view.id == id);
  CHECK(view.fairness_key == key);
}

TEST_CASE("RecordJobName.KeptNamesUpToTheInlineCapacityNeedNoAllocation") {
  const std::string type = "clone";
  const std::string key = "10.0.0.7";
  // Exactly the capacity, and one byte past it.
  const std::string id(RecordJobName::kInline - type.size() - key.size(), 'r');
  RecordJobName exact;
  exact.Keep(JobName(TypeName(type), JobId(id), FairnessKey(key)));
  CheckHolds(exact, type, id, key);
  CHECK_FALSE(exact.allocated());
  const std::string longer = id + "x";
  RecordJobName past;
  past.Keep(JobName(TypeName(type), JobId(longer), FairnessKey(key)));
  CheckHolds(past, type, longer, key);
  CHECK(past.allocated());
}

TEST_CASE("RecordJobName.KeptNamesAreCopiesAndReassignmentKeepsEachApart") {
  RecordJobName name;
  CheckHolds(name, "", "", "");
  std::string type = "t";
  name.Keep(JobName(TypeName(type), JobId("r")));  // the key omitted, as the API allows
  type = "x";                                      // the caller's string changes: not the copy
  CheckHolds(name, "t", "r", "");
  // Long, then short again: the allocation is given back, nothing of the long names is read.
  const std::string id(300, 'i');
  const std::string key(200, 'k');
  name.Keep(JobName(TypeName("fetch"), JobId(id), FairnessKey(key)));
  CheckHolds(name, "fetch", id, key);
  CHECK(name.allocated());
  name.Keep(JobName(TypeName("ab"), JobId("c"), FairnessKey("d")));
  CheckHolds(name, "ab", "c", "d");
  CHECK_FALSE(name.allocated());
}

TEST_CASE("RecordJobName.BorrowedNamesAreTheCallersOfAnyLength") {
  const std::string type = "clone";
  const std::string id(300, 'i');  // past the inline capacity: still no copy
  std::string key = "alice";
  RecordJobName name;
  name.Keep(JobName(TypeName("long"), JobId(std::string(100, 'x'))));
  name.Borrow(JobName(TypeName(type), JobId(id), FairnessKey(key)));
  CHECK_FALSE(name.allocated());  // the kept names' allocation was given back
  CheckHolds(name, type, id, key);
  CHECK(name.view().id.data() == id.data());  // views of the caller's own strings
  key[0] = 'A';
  CHECK(name.view().fairness_key == "Alice");
  // Kept again after borrowing: copies once more.
  name.Keep(JobName(TypeName("t"), JobId("r"), FairnessKey("k")));
  CheckHolds(name, "t", "r", "k");
}

}  // namespace record_job_name_test
}  // namespace
}  // namespace fairgate
