// fairgate/c.h's stores and durable jobs: opening a SQLite or PostgreSQL store, a durable type's
// handler, recovery, submissions, and the dead jobs a page at a time.
#include "fairgate/durable.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "c/c_support.h"
#include "fairgate/postgres_store.h"
#include "fairgate/sqlite_store.h"

using fairgate::Status;
using fairgate::c_api::Abort;
using fairgate::c_api::Copy;
using fairgate::c_api::Given;
using fairgate::c_api::Guarded;
using fairgate::c_api::InitVersion;
using fairgate::c_api::NameOf;
using fairgate::c_api::NamesAndFlagsOf;
using fairgate::c_api::NoJobOptions;
using fairgate::c_api::StatusOf;
using fairgate::c_api::VersionIs;

namespace {

// A store's handle from `open` (the store, or why there is none), and the code of a failure:
// what the calls that open stores share.
template <typename Open>
fairgate_store* StoreFrom(fairgate_code* code, char** error, Open&& open) {
  fairgate_store* out = nullptr;
  const fairgate_code result = Guarded(error, [&]() -> Status {
    fairgate::StatusOr<std::unique_ptr<fairgate::Store>> store = open();
    if (!store.ok()) return store.status();
    out = new fairgate_store{std::shared_ptr<fairgate::Store>(*std::move(store))};
    return absl::OkStatus();
  });
  if (code != nullptr) *code = result;
  return out;
}

// A stored job's bytes as C's: a copy ending at an added NUL, or an error when memory ran out.
Status CopyInto(std::string_view text, char** out) {
  *out = Copy(text);
  if (*out == nullptr) return absl::ResourceExhaustedError("out of memory copying a stored job");
  return absl::OkStatus();
}

void FreeStoredJobs(fairgate_stored_job* jobs, std::size_t count) {
  if (jobs == nullptr) return;
  for (std::size_t i = 0; i < count; ++i) {
    std::free(jobs[i].type);
    std::free(jobs[i].id);
    std::free(jobs[i].fairness_key);
    std::free(jobs[i].payload);
    std::free(jobs[i].last_error);
  }
  std::free(jobs);
}

// `stored` as an array of C's (NULL when empty), or an error with nothing left allocated.
Status StoredJobsOf(const std::vector<fairgate::StoredJob>& stored, fairgate_stored_job** out) {
  *out = nullptr;
  if (stored.empty()) return absl::OkStatus();
  auto* jobs = static_cast<fairgate_stored_job*>(std::calloc(stored.size(), sizeof **out));
  if (jobs == nullptr) return absl::ResourceExhaustedError("out of memory listing stored jobs");
  for (std::size_t i = 0; i < stored.size(); ++i) {
    const fairgate::StoredJob& from = stored[i];
    fairgate_stored_job& to = jobs[i];
    to.sequence = from.sequence;
    to.payload_size = from.payload.size();
    to.submitted_at = from.submitted_at;
    to.attempts = from.attempts;
    Status s = CopyInto(from.type, &to.type);
    if (s.ok()) s = CopyInto(from.id, &to.id);
    if (s.ok()) s = CopyInto(from.fairness_key, &to.fairness_key);
    if (s.ok()) s = CopyInto(from.payload, &to.payload);
    if (s.ok()) s = CopyInto(from.last_error, &to.last_error);
    if (!s.ok()) {
      FreeStoredJobs(jobs, i + 1);  // calloc's NULLs free as nothing
      return s;
    }
  }
  *out = jobs;
  return absl::OkStatus();
}

// A durable job's payload from C: NULL only with a size of 0.
Status PayloadOf(const void* payload, std::size_t size, const std::string& what,
                 std::string_view* out) {
  if (payload == nullptr && size > 0) {
    return absl::InvalidArgumentError(what + " is NULL, with a size of " + std::to_string(size));
  }
  *out = size == 0 ? std::string_view() : std::string_view(static_cast<const char*>(payload), size);
  return absl::OkStatus();
}

}  // namespace

extern "C" {

fairgate_code fairgate_sqlite_options_init_version(fairgate_sqlite_options* out, uint32_t version) {
  const fairgate::SqliteStoreOptions defaults;
  fairgate_sqlite_options c{};
  fairgate_sqlite_options* options = &c;
  options->synchronous = defaults.synchronous == fairgate::SqliteStoreOptions::Sync::kFull
                             ? FAIRGATE_SQLITE_SYNC_FULL
                             : FAIRGATE_SQLITE_SYNC_NORMAL;
  options->busy_timeout_seconds = defaults.busy_timeout.count();
  options->max_job_bytes = defaults.max_job_bytes;
  return InitVersion(out, c, version, {sizeof(fairgate_sqlite_options)});
}

fairgate_store* fairgate_sqlite_store_open(const char* path, const fairgate_sqlite_options* c,
                                           fairgate_code* code, char** error) {
  return StoreFrom(code, error, [&]() -> fairgate::StatusOr<std::unique_ptr<fairgate::Store>> {
    if (Status s = Given({{path, "the path"}}); !s.ok()) return s;
    fairgate::SqliteStoreOptions options;
    if (c != nullptr) {
      if (Status s = VersionIs(c->version, FAIRGATE_SQLITE_OPTIONS_VERSION, "options",
                               "FAIRGATE_SQLITE_OPTIONS_VERSION", "fairgate_sqlite_options_init");
          !s.ok()) {
        return s;
      }
      if (c->synchronous != FAIRGATE_SQLITE_SYNC_FULL &&
          c->synchronous != FAIRGATE_SQLITE_SYNC_NORMAL) {
        return absl::InvalidArgumentError("options.synchronous must be a fairgate_sqlite_sync");
      }
      options.synchronous = c->synchronous == FAIRGATE_SQLITE_SYNC_FULL
                                ? fairgate::SqliteStoreOptions::Sync::kFull
                                : fairgate::SqliteStoreOptions::Sync::kNormal;
      options.busy_timeout = fairgate::Seconds(c->busy_timeout_seconds);
      options.max_job_bytes = c->max_job_bytes;
    }
    return fairgate::OpenSqliteStore(path, options);
  });
}

fairgate_code fairgate_postgres_options_init_version(fairgate_postgres_options* out,
                                                     uint32_t version) {
  const fairgate::PostgresStoreOptions defaults;
  fairgate_postgres_options c{};
  fairgate_postgres_options* options = &c;
  options->replica = nullptr;
  options->connections = defaults.connections;
  options->max_job_bytes = defaults.max_job_bytes;
  return InitVersion(out, c, version, {sizeof(fairgate_postgres_options)});
}

fairgate_store* fairgate_postgres_store_open(const char* conninfo,
                                             const fairgate_postgres_options* c,
                                             fairgate_code* code, char** error) {
  return StoreFrom(code, error, [&]() -> fairgate::StatusOr<std::unique_ptr<fairgate::Store>> {
    if (Status s = Given({{conninfo, "the connection string"}}); !s.ok()) return s;
    fairgate::PostgresStoreOptions options;
    if (c != nullptr) {
      if (Status s =
              VersionIs(c->version, FAIRGATE_POSTGRES_OPTIONS_VERSION, "options",
                        "FAIRGATE_POSTGRES_OPTIONS_VERSION", "fairgate_postgres_options_init");
          !s.ok()) {
        return s;
      }
      if (c->replica != nullptr) options.replica = c->replica;
      options.connections = c->connections;
      options.max_job_bytes = c->max_job_bytes;
    }
    return fairgate::OpenPostgresStore(conninfo, options);
  });
}

void fairgate_store_free(fairgate_store* store) {
  try {
    delete store;  // the store closes here unless a scheduler still holds it
  } catch (...) {
    Abort("fairgate_store_free");
  }
}

fairgate_code fairgate_retry_policy_init_version(fairgate_retry_policy* out, uint32_t version) {
  const fairgate::RetryPolicy defaults;
  fairgate_retry_policy c{};
  fairgate_retry_policy* policy = &c;
  policy->max_attempts = defaults.max_attempts;
  policy->initial_backoff_seconds = defaults.initial_backoff.count();
  policy->max_backoff_seconds = defaults.max_backoff.count();
  policy->multiplier = defaults.multiplier;
  return InitVersion(out, c, version, {sizeof(fairgate_retry_policy)});
}

fairgate_code fairgate_register_durable(fairgate_scheduler* scheduler, const char* type,
                                        fairgate_durable_fn handler, void* user,
                                        const fairgate_retry_policy* c, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{scheduler, "the scheduler"}, {type, "the type"}}); !s.ok()) return s;
    if (handler == nullptr) return absl::InvalidArgumentError("the handler is NULL");
    fairgate::RetryPolicy retry;
    if (c != nullptr) {
      if (Status s = VersionIs(c->version, FAIRGATE_RETRY_POLICY_VERSION, "retry",
                               "FAIRGATE_RETRY_POLICY_VERSION", "fairgate_retry_policy_init");
          !s.ok()) {
        return s;
      }
      retry.max_attempts = c->max_attempts;
      retry.initial_backoff = fairgate::Seconds(c->initial_backoff_seconds);
      retry.max_backoff = fairgate::Seconds(c->max_backoff_seconds);
      retry.multiplier = c->multiplier;
    }
    return scheduler->impl->RegisterDurable(
        type,
        [handler, user](const fairgate::DurableJob& job, const fairgate::Context& ctx) {
          // C reads names to a NUL: copies that end with one (the views need not).
          const std::string type(job.type), id(job.id), key(job.fairness_key);
          const fairgate_durable_job given{job.sequence,
                                           type.c_str(),
                                           id.c_str(),
                                           key.c_str(),
                                           job.payload.empty() ? "" : job.payload.data(),
                                           job.payload.size(),
                                           job.attempt,
                                           job.lease_token};
          const fairgate_context context{&ctx};
          char* message = nullptr;
          const fairgate_code code = handler(user, &given, &context, &message);
          Status status = StatusOf(code, message);
          std::free(message);
          return status;
        },
        retry);
  });
}

fairgate_code fairgate_recover(fairgate_scheduler* scheduler, fairgate_recovery_report* report,
                               char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    fairgate::StatusOr<fairgate::RecoveryReport> found = scheduler->impl->Recover();
    if (!found.ok()) return found.status();
    if (report != nullptr) {
      *report = {found->queued, found->deferred, found->without_handler, found->dead};
    }
    return absl::OkStatus();
  });
}

fairgate_code fairgate_submit_durable(fairgate_scheduler* scheduler, const fairgate_job* job,
                                      const void* payload, size_t payload_size, uint64_t* sequence,
                                      char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(scheduler, job); !s.ok()) return s;
    if (Status s = NoJobOptions(*job, "job", "a durable job"); !s.ok()) return s;
    std::string_view bytes;
    if (Status s = PayloadOf(payload, payload_size, "the payload", &bytes); !s.ok()) return s;
    fairgate::StatusOr<std::uint64_t> stored = scheduler->impl->SubmitDurable(NameOf(*job), bytes);
    if (!stored.ok()) return stored.status();
    if (sequence != nullptr) *sequence = *stored;
    return absl::OkStatus();
  });
}

fairgate_code fairgate_submit_durable_batch(fairgate_scheduler* scheduler,
                                            const fairgate_durable_submission* jobs, size_t count,
                                            uint64_t* sequences, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    if (jobs == nullptr && count > 0) {
      return absl::InvalidArgumentError("the jobs are NULL, with a count of " +
                                        std::to_string(count));
    }
    std::vector<fairgate::DurableSubmission> batch;
    batch.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const fairgate_durable_submission& given = jobs[i];
      const std::string what = "jobs[" + std::to_string(i) + "]";
      if (Status s = NamesAndFlagsOf(given.job, what + ".job"); !s.ok()) return s;
      if (Status s = NoJobOptions(given.job, what + ".job", "a durable job"); !s.ok()) return s;
      std::string_view bytes;
      if (Status s = PayloadOf(given.payload, given.payload_size, what + ".payload", &bytes);
          !s.ok()) {
        return s;
      }
      batch.push_back({NameOf(given.job), bytes});
    }
    fairgate::StatusOr<std::vector<std::uint64_t>> stored =
        scheduler->impl->SubmitDurableBatch(batch);
    if (!stored.ok()) return stored.status();
    if (sequences != nullptr) std::copy(stored->begin(), stored->end(), sequences);
    return absl::OkStatus();
  });
}

fairgate_code fairgate_dead_jobs(fairgate_scheduler* scheduler, uint64_t after, size_t limit,
                                 fairgate_stored_job** jobs, size_t* count, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{scheduler, "the scheduler"}, {jobs, "jobs"}, {count, "count"}});
        !s.ok()) {
      return s;
    }
    *jobs = nullptr;
    *count = 0;
    fairgate::StatusOr<std::vector<fairgate::StoredJob>> page =
        scheduler->impl->DeadJobs(after, limit);
    if (!page.ok()) return page.status();
    if (Status s = StoredJobsOf(*page, jobs); !s.ok()) return s;
    *count = page->size();
    return absl::OkStatus();
  });
}

void fairgate_stored_jobs_free(fairgate_stored_job* jobs, size_t count) {
  FreeStoredJobs(jobs, count);
}

fairgate_code fairgate_retry_dead_job(fairgate_scheduler* scheduler, uint64_t sequence,
                                      char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    return scheduler->impl->RetryDeadJob(sequence);
  });
}

fairgate_code fairgate_remove_dead_job(fairgate_scheduler* scheduler, uint64_t sequence,
                                       char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    return scheduler->impl->RemoveDeadJob(sequence);
  });
}

fairgate_code fairgate_flush_state(fairgate_scheduler* scheduler, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    return scheduler->impl->FlushState();
  });
}

}  // extern "C"
