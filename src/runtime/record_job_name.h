// RecordJobName: a call record's job names (fairgate/job_name.h), read back as one JobName. A
// Submit's or an Acquire's are kept, copied into one buffer: inside the object up to kInline
// bytes in all (a name of every test and of the git mirror's own: "clone", "linux.git", a client
// address), else one allocation. A RunSync's are borrowed: views of its caller's, which its call
// outlives every use of (copying them cost each RunSync about 100 instructions). Either way the
// object is one 64-byte cache line. What JobRecord::name holds (runtime/job_record.h): the intake
// queues a job by it, the fleet-wide leases are taken by it. Internal to src/runtime.
#ifndef FAIRGATE_RUNTIME_RECORD_JOB_NAME_H_
#define FAIRGATE_RUNTIME_RECORD_JOB_NAME_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "fairgate/job_name.h"

namespace fairgate::internal {

class RecordJobName {
 public:
  static constexpr std::size_t kInline = 40;

  RecordJobName() = default;
  RecordJobName(const RecordJobName&) = delete;
  RecordJobName& operator=(const RecordJobName&) = delete;

  // Keeps copies of `name`'s three names (which may not view this object's own).
  void Keep(const JobName& name) {
    const std::size_t total = name.type.size() + name.id.size() + name.fairness_key.size();
    heap_.reset();
    char* data = inline_;
    if (total > kInline) {
      heap_ = std::make_unique_for_overwrite<char[]>(total);
      data = heap_.get();
    }
    Put(data, name.type);
    Put(data + name.type.size(), name.id);
    Put(data + name.type.size() + name.id.size(), name.fairness_key);
    borrowed_ = false;
    SetSizes(name);
  }
  // Refers to `name`'s three names, which must outlive every use of this object's.
  void Borrow(const JobName& name) {
    heap_.reset();
    parts_[0] = name.type.data();
    parts_[1] = name.id.data();
    parts_[2] = name.fairness_key.data();
    borrowed_ = true;
    SetSizes(name);
  }

  // The names; views valid until this object changes or dies (or, borrowed, its names do).
  JobName view() const {
    if (borrowed_) {
      return JobName(TypeName({parts_[0], type_size_}), JobId({parts_[1], id_size_}),
                     FairnessKey({parts_[2], key_size_}));
    }
    const char* data = heap_ ? heap_.get() : inline_;
    return JobName(TypeName({data, type_size_}), JobId({data + type_size_, id_size_}),
                   FairnessKey({data + type_size_ + id_size_, key_size_}));
  }
  // Whether kept names live in an allocation of their own (past kInline bytes).
  bool allocated() const { return heap_ != nullptr; }

 private:
  static void Put(char* to, std::string_view from) {
    if (!from.empty()) std::memcpy(to, from.data(), from.size());
  }
  void SetSizes(const JobName& name) {
    type_size_ = static_cast<std::uint32_t>(name.type.size());
    id_size_ = static_cast<std::uint32_t>(name.id.size());
    key_size_ = static_cast<std::uint32_t>(name.fairness_key.size());
  }

  std::unique_ptr<char[]> heap_;
  std::uint32_t type_size_ = 0;
  std::uint32_t id_size_ = 0;
  std::uint32_t key_size_ = 0;
  bool borrowed_ = false;
  union {
    char inline_[kInline];
    const char* parts_[3];  // borrowed: where each name begins
  };
};
static_assert(sizeof(RecordJobName) == 64);

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_RECORD_JOB_NAME_H_
