// The size of a durable job as the stores bound it: its type, id, fairness key and payload
// together (SqliteStoreOptions::max_job_bytes, PostgresStoreOptions::max_job_bytes). Internal to
// src/store: each store checks a job with CheckJobSize before it writes anything of it.
#ifndef FAIRGATE_STORE_JOB_SIZE_H_
#define FAIRGATE_STORE_JOB_SIZE_H_

#include <cstddef>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "fairgate/status.h"
#include "fairgate/store.h"

namespace fairgate::store {

inline std::size_t JobBytes(const StoredJob& job) {
  return job.type.size() + job.id.size() + job.fairness_key.size() + job.payload.size();
}

// OK, or InvalidArgument naming the job's size and the store's bound: "<store>: the job is N
// bytes (...), more than max_job_bytes (M)".
inline Status CheckJobSize(const StoredJob& job, std::size_t max_job_bytes,
                           absl::string_view store) {
  const std::size_t bytes = JobBytes(job);
  if (bytes <= max_job_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      store, ": the job is ", bytes, " bytes (its payload ", job.payload.size(),
      ", with its type, id and fairness key), more than max_job_bytes (", max_job_bytes, ")"));
}

}  // namespace fairgate::store

#endif  // FAIRGATE_STORE_JOB_SIZE_H_
