// OwnedJobName: a job's three names (fairgate/job_name.h) kept by the runtime past the call that
// gave them, in one buffer: inside the object up to kInline bytes in all (a name of every test
// and of the git mirror's own: "clone", "linux.git", a client address), else one allocation.
// What a Submit's or an Acquire's record keeps (runtime/job_record.h, JobRecord::name) and reads
// back as one JobName: the intake queues the job under it, the fleet-wide leases are taken by
// it. Internal to src/runtime.
#ifndef FAIRGATE_RUNTIME_OWNED_JOB_NAME_H_
#define FAIRGATE_RUNTIME_OWNED_JOB_NAME_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "fairgate/job_name.h"

namespace fairgate::internal {

class OwnedJobName {
 public:
  // Inline capacity: the object is one 64-byte cache line.
  static constexpr std::size_t kInline = 44;

  OwnedJobName() = default;
  explicit OwnedJobName(const JobName& name) { Assign(name); }
  OwnedJobName(const OwnedJobName&) = delete;
  OwnedJobName& operator=(const OwnedJobName&) = delete;

  // Keeps copies of `name`'s three names (which may not view this object's own).
  void Assign(const JobName& name) {
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
    type_size_ = static_cast<std::uint32_t>(name.type.size());
    id_size_ = static_cast<std::uint32_t>(name.id.size());
    key_size_ = static_cast<std::uint32_t>(name.fairness_key.size());
  }

  std::string_view type() const { return {data(), type_size_}; }
  std::string_view id() const { return {data() + type_size_, id_size_}; }
  std::string_view key() const { return {data() + type_size_ + id_size_, key_size_}; }
  // The names as the API's value; views of this object, valid until it changes or dies.
  JobName view() const { return JobName(TypeName(type()), JobId(id()), FairnessKey(key())); }
  // Whether the names live in an allocation of their own (past kInline bytes).
  bool allocated() const { return heap_ != nullptr; }

 private:
  static void Put(char* to, std::string_view from) {
    if (!from.empty()) std::memcpy(to, from.data(), from.size());
  }
  const char* data() const { return heap_ ? heap_.get() : inline_; }

  std::unique_ptr<char[]> heap_;
  std::uint32_t type_size_ = 0;
  std::uint32_t id_size_ = 0;
  std::uint32_t key_size_ = 0;
  char inline_[kInline];
};
static_assert(sizeof(OwnedJobName) == 64);

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_OWNED_JOB_NAME_H_
