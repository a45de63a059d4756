// fairgate/c.h's scheduler calls: shutdown, acquire and submit, a job's context and permit,
// periodic jobs, keys and groups, workers, pause and resume, and what it is doing.
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "c/c_support.h"
#include "fairgate/periodic.h"
#include "fairgate/snapshot.h"
#include "fairgate/worker.h"

using fairgate::Status;
using fairgate::c_api::Abort;
using fairgate::c_api::CodeOf;
using fairgate::c_api::Copy;
using fairgate::c_api::DoneOf;
using fairgate::c_api::Given;
using fairgate::c_api::GroupLimitsOf;
using fairgate::c_api::Guarded;
using fairgate::c_api::InitVersion;
using fairgate::c_api::JobFnOf;
using fairgate::c_api::KeyLimitsOf;
using fairgate::c_api::kRetryAfter;
using fairgate::c_api::kShed;
using fairgate::c_api::MessageOf;
using fairgate::c_api::NameOf;
using fairgate::c_api::NoJobOptions;
using fairgate::c_api::OptionsOf;
using fairgate::c_api::StatusOf;
using fairgate::c_api::Strings;
using fairgate::c_api::TailOf;
using fairgate::c_api::Tracked;
using fairgate::c_api::VersionIs;
using fairgate::c_api::WithTimeoutSeconds;

namespace {

// An Acquire's wait, shared by its handle and its callback.
struct AcquireState {
  fairgate::CancelFunc cancel;
};

// AddWorker (or, with `update`, UpdateWorker) from C's arguments.
fairgate_code SetWorker(fairgate_scheduler* scheduler, const char* name, int slots,
                        const char* const* types, size_t type_count, const char* const* tags,
                        size_t tag_count, char** error, bool update) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {name, "the worker's name"}}); !s.ok()) {
      return s;
    }
    fairgate::WorkerConfig config;
    config.slots = slots;
    if (Status s = Strings(types, type_count, "types", &config.types); !s.ok()) return s;
    if (Status s = Strings(tags, tag_count, "tags", &config.tags); !s.ok()) return s;
    return update ? scheduler->impl->UpdateWorker(name, config)
                  : scheduler->impl->AddWorker(name, config);
  });
}

}  // namespace

extern "C" {

void fairgate_free(char* string) { std::free(string); }

int fairgate_retry_after(const char* message, double* seconds) {
  const std::optional<std::string_view> tail = TailOf(message);
  if (!tail) return 0;
  std::string_view rest = *tail;
  if (rest.substr(0, kShed.size()) == kShed) rest.remove_prefix(kShed.size());
  if (rest.substr(0, kRetryAfter.size()) != kRetryAfter) return 0;
  rest.remove_prefix(kRetryAfter.size());
  const std::string number(rest);
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size()) return 0;
  if (seconds != nullptr) *seconds = value;
  return 1;
}

int fairgate_was_shed(const char* message) {
  const std::optional<std::string_view> tail = TailOf(message);
  return tail && tail->substr(0, kShed.size()) == kShed && fairgate_retry_after(message, nullptr);
}

fairgate_code fairgate_scheduler_shutdown(fairgate_scheduler* scheduler, double timeout_seconds,
                                          char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    return WithTimeoutSeconds(timeout_seconds, [&](const fairgate::Context& ctx) {
      return scheduler->impl->Shutdown(ctx);
    });
  });
}

fairgate_code fairgate_scheduler_drain(fairgate_scheduler* scheduler, double timeout_seconds,
                                       char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}}); !s.ok()) return s;
    return WithTimeoutSeconds(
        timeout_seconds, [&](const fairgate::Context& ctx) { return scheduler->impl->Drain(ctx); });
  });
}

void fairgate_scheduler_destroy(fairgate_scheduler* scheduler) {
  try {
    delete scheduler;  // the C++ destructor shuts down and waits
  } catch (...) {
    Abort("fairgate_scheduler_destroy");
  }
}

fairgate_code fairgate_acquire(fairgate_scheduler* scheduler, const fairgate_job* job,
                               fairgate_permit_callback on_admitted, void* user,
                               fairgate_pending** pending, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(scheduler, job); !s.ok()) return s;
    if (on_admitted == nullptr) return absl::InvalidArgumentError("the callback is NULL");
    auto [ctx, cancel] = fairgate::WithCancel(fairgate::Context::Background());
    auto state = std::make_shared<AcquireState>();
    state->cancel = cancel;
    Status status = scheduler->impl->Acquire(
        ctx, NameOf(*job),
        [on_admitted, user](fairgate::StatusOr<fairgate::Permit> permit) {
          if (permit.ok()) {
            on_admitted(user, new fairgate_permit{*std::move(permit)}, FAIRGATE_OK, "");
          } else {
            const std::string message = MessageOf(permit.status());
            on_admitted(user, nullptr, CodeOf(permit.status()), message.c_str());
          }
        },
        OptionsOf(*job));
    if (!status.ok()) {
      cancel();
      return status;
    }
    if (pending != nullptr) *pending = reinterpret_cast<fairgate_pending*>(new auto(state));
    return absl::OkStatus();
  });
}

void fairgate_pending_cancel(fairgate_pending* pending) {
  if (pending == nullptr) return;
  try {
    (*reinterpret_cast<std::shared_ptr<AcquireState>*>(pending))->cancel();
  } catch (...) {
    Abort("fairgate_acquire_cancel");
  }
}

void fairgate_pending_free(fairgate_pending* pending) {
  delete reinterpret_cast<std::shared_ptr<AcquireState>*>(pending);
}

fairgate_code fairgate_try_acquire(fairgate_scheduler* scheduler, const fairgate_job* job,
                                   fairgate_permit** permit, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(scheduler, job); !s.ok()) return s;
    if (permit == nullptr) return absl::InvalidArgumentError("the permit pointer is NULL");
    fairgate::StatusOr<fairgate::Permit> admitted =
        scheduler->impl->TryAcquire(NameOf(*job), OptionsOf(*job));
    if (!admitted.ok()) return admitted.status();
    *permit = new fairgate_permit{*std::move(admitted)};
    return absl::OkStatus();
  });
}

namespace {

// fairgate_permit_release and _release_unused: ends the job and frees the permit.
void EndPermit(fairgate_permit* permit, fairgate_code code, const char* message, bool used,
               const char* call) {
  if (permit == nullptr) return;
  try {
    const Status status = StatusOf(code, message);
    if (used) {
      permit->permit.Release(status);
    } else {
      permit->permit.ReleaseUnused(status);
    }
    delete permit;
  } catch (...) {
    Abort(call);
  }
}

}  // namespace

void fairgate_permit_release(fairgate_permit* permit, fairgate_code code, const char* message) {
  EndPermit(permit, code, message, /*used=*/true, "fairgate_permit_release");
}

void fairgate_permit_release_unused(fairgate_permit* permit, fairgate_code code,
                                    const char* message) {
  EndPermit(permit, code, message, /*used=*/false, "fairgate_permit_release_unused");
}

fairgate_code fairgate_submit(fairgate_scheduler* scheduler, const fairgate_job* job,
                              fairgate_job_fn run, fairgate_done_fn done, void* user,
                              char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(scheduler, job); !s.ok()) return s;
    if (run == nullptr) return absl::InvalidArgumentError("the job's function is NULL");
    return scheduler->impl->Submit(NameOf(*job), JobFnOf(run, user), DoneOf(done, user),
                                   OptionsOf(*job));
  });
}

fairgate_cancel* fairgate_cancel_new(void) {
  try {
    auto [ctx, fire] = fairgate::WithCancel(fairgate::Context::Background());
    return new fairgate_cancel{ctx, fire};
  } catch (...) {
    Abort("fairgate_cancel_new");
  }
}

void fairgate_cancel_fire(fairgate_cancel* cancel) {
  if (cancel == nullptr) return;
  try {
    cancel->fire();
  } catch (...) {
    Abort("fairgate_cancel_fire");
  }
}

void fairgate_cancel_free(fairgate_cancel* cancel) { delete cancel; }

const fairgate_context* fairgate_cancel_context(const fairgate_cancel* cancel) {
  return cancel == nullptr ? nullptr : &cancel->view;
}

fairgate_code fairgate_run_sync(fairgate_scheduler* scheduler, const fairgate_job* job,
                                fairgate_job_fn run, void* user, const fairgate_cancel* cancel,
                                double timeout_seconds, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(scheduler, job); !s.ok()) return s;
    if (run == nullptr) return absl::InvalidArgumentError("the job's function is NULL");
    return WithTimeoutSeconds(
        timeout_seconds,
        [&](const fairgate::Context& ctx) {
          return scheduler->impl->RunSync(ctx, NameOf(*job), JobFnOf(run, user), OptionsOf(*job));
        },
        cancel == nullptr ? fairgate::Context::Background() : cancel->ctx);
  });
}

fairgate_code fairgate_run_async(fairgate_scheduler* scheduler, const fairgate_job* job,
                                 fairgate_job_fn run, fairgate_done_fn done, void* user,
                                 const fairgate_cancel* cancel, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(scheduler, job); !s.ok()) return s;
    if (run == nullptr) return absl::InvalidArgumentError("the job's function is NULL");
    return scheduler->impl->RunAsync(
        cancel == nullptr ? fairgate::Context::Background() : cancel->ctx, NameOf(*job),
        JobFnOf(run, user), DoneOf(done, user), OptionsOf(*job));
  });
}

const fairgate_context* fairgate_permit_context(const fairgate_permit* permit) {
  if (permit == nullptr) return nullptr;
  permit->context.ctx = &permit->permit.JobContext();
  return &permit->context;
}

int fairgate_context_done(const fairgate_context* ctx) {
  return ctx != nullptr && ctx->ctx->Done() ? 1 : 0;
}

fairgate_code fairgate_context_err(const fairgate_context* ctx, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{ctx, "the context"}}); !s.ok()) return s;
    return ctx->ctx->Err();
  });
}

int fairgate_context_wait(const fairgate_context* ctx, double timeout_seconds) {
  if (ctx == nullptr) return 0;
  try {
    if (timeout_seconds < 0) {
      ctx->ctx->Wait();
      return 1;
    }
    return ctx->ctx->WaitFor(std::chrono::duration_cast<fairgate::Context::Clock::duration>(
               fairgate::Seconds(timeout_seconds)))
               ? 1
               : 0;
  } catch (...) {
    Abort("fairgate_context_wait");
  }
}

char* fairgate_context_worker(const fairgate_context* ctx) {
  return Copy(ctx == nullptr ? std::string_view() : ctx->ctx->Worker());
}

uint64_t fairgate_context_fencing_token(const fairgate_context* ctx) {
  return ctx == nullptr ? 0 : ctx->ctx->FencingToken();
}

fairgate_cancel_callback* fairgate_context_on_cancel(const fairgate_context* ctx,
                                                     fairgate_cancel_fn fn, void* user) {
  if (ctx == nullptr || fn == nullptr) return nullptr;
  try {
    return new fairgate_cancel_callback{fairgate::OnCancel(*ctx->ctx, [fn, user] { fn(user); })};
  } catch (...) {
    Abort("fairgate_context_on_cancel");
  }
}

int fairgate_cancel_callback_stop(fairgate_cancel_callback* callback) {
  if (callback == nullptr) return 0;
  const int ran = callback->callback.Stop() ? 1 : 0;
  delete callback;
  return ran;
}

fairgate_code fairgate_periodic_options_init_version(fairgate_periodic_options* out,
                                                     uint32_t version) {
  const fairgate::PeriodicOptions defaults;
  fairgate_periodic_options c{};
  fairgate_periodic_options* options = &c;
  options->jitter = defaults.jitter;
  options->first_run_at_once = defaults.first_run_at_once ? 1 : 0;
  return InitVersion(out, c, version, {sizeof(fairgate_periodic_options)});
}

fairgate_code fairgate_submit_every(fairgate_scheduler* scheduler, const fairgate_job* job,
                                    double interval_seconds, const fairgate_periodic_options* c,
                                    fairgate_job_fn run, fairgate_done_fn on_run, void* user,
                                    fairgate_periodic** periodic, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given(scheduler, job); !s.ok()) return s;
    if (run == nullptr) return absl::InvalidArgumentError("the job's function is NULL");
    if (Status s = NoJobOptions(*job, "job", "a periodic job"); !s.ok()) return s;
    fairgate::PeriodicOptions options;
    if (c != nullptr) {
      if (Status s =
              VersionIs(c->version, FAIRGATE_PERIODIC_OPTIONS_VERSION, "options",
                        "FAIRGATE_PERIODIC_OPTIONS_VERSION", "fairgate_periodic_options_init");
          !s.ok()) {
        return s;
      }
      options.jitter = c->jitter;
      options.first_run_at_once = c->first_run_at_once != 0;
    }
    options.on_run = DoneOf(on_run, user);
    fairgate::StatusOr<fairgate::PeriodicJob> scheduled = scheduler->impl->SubmitEvery(
        NameOf(*job), fairgate::Seconds(interval_seconds), JobFnOf(run, user), options);
    if (!scheduled.ok()) return scheduled.status();
    if (periodic != nullptr) *periodic = new fairgate_periodic{*std::move(scheduled)};
    return absl::OkStatus();
  });
}

void fairgate_periodic_stop(fairgate_periodic* periodic) {
  if (periodic == nullptr) return;
  try {
    periodic->job.Stop();
  } catch (...) {
    Abort("fairgate_periodic_stop");
  }
}

uint64_t fairgate_periodic_runs(const fairgate_periodic* periodic) {
  return periodic == nullptr ? 0 : periodic->job.runs();
}

void fairgate_periodic_free(fairgate_periodic* periodic) { delete periodic; }

fairgate_code fairgate_charge(fairgate_scheduler* scheduler, const char* fairness_key, double cost,
                              char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {fairness_key, "the fairness key"}});
        !s.ok()) {
      return s;
    }
    return scheduler->impl->Charge(fairness_key, cost);
  });
}

fairgate_code fairgate_set_key_weight(fairgate_scheduler* scheduler, const char* fairness_key,
                                      double weight, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {fairness_key, "the fairness key"}});
        !s.ok()) {
      return s;
    }
    return scheduler->impl->SetKeyWeight(fairness_key, weight);
  });
}

fairgate_code fairgate_set_key_limits(fairgate_scheduler* scheduler, const char* fairness_key,
                                      const fairgate_key_limits* c, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{scheduler, "the scheduler"},
                          {fairness_key, "the fairness key"},
                          {c, "the fairgate_key_limits"}});
        !s.ok()) {
      return s;
    }
    return scheduler->impl->SetKeyLimits(fairness_key, KeyLimitsOf(*c));
  });
}

fairgate_code fairgate_set_key_group(fairgate_scheduler* scheduler, const char* fairness_key,
                                     const char* group, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"},
                          {fairness_key, "the fairness key"},
                          {group, "the group"}});
        !s.ok()) {
      return s;
    }
    return scheduler->impl->SetKeyGroup(fairness_key, group);
  });
}

fairgate_code fairgate_set_group_weight(fairgate_scheduler* scheduler, const char* group,
                                        double weight, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {group, "the group"}}); !s.ok()) return s;
    return scheduler->impl->SetGroupWeight(group, weight);
  });
}

fairgate_code fairgate_set_group_limits(fairgate_scheduler* scheduler, const char* group,
                                        int max_running, int min_running, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {group, "the group"}}); !s.ok()) return s;
    return scheduler->impl->SetGroupLimits(group, GroupLimitsOf(max_running, min_running));
  });
}

int fairgate_accumulated_cost(fairgate_scheduler* scheduler, const char* fairness_key,
                              double* cost) {
  if (scheduler == nullptr || fairness_key == nullptr) return 0;
  return Tracked(cost, "fairgate_accumulated_cost",
                 [&] { return scheduler->impl->AccumulatedCost(fairness_key); });
}

int fairgate_group_accumulated_cost(fairgate_scheduler* scheduler, const char* group,
                                    double* cost) {
  if (scheduler == nullptr || group == nullptr) return 0;
  return Tracked(cost, "fairgate_group_accumulated_cost",
                 [&] { return scheduler->impl->GroupAccumulatedCost(group); });
}

int fairgate_estimate(fairgate_scheduler* scheduler, const char* type, const char* id,
                      double* seconds) {
  if (scheduler == nullptr || type == nullptr || id == nullptr) return 0;
  return Tracked(seconds, "fairgate_estimate", [&] {
    return scheduler->impl->Estimate(fairgate::TypeName(type), fairgate::JobId(id));
  });
}

fairgate_code fairgate_add_worker(fairgate_scheduler* scheduler, const char* name, int slots,
                                  const char* const* types, size_t type_count,
                                  const char* const* tags, size_t tag_count, char** error) {
  return SetWorker(scheduler, name, slots, types, type_count, tags, tag_count, error,
                   /*update=*/false);
}

fairgate_code fairgate_update_worker(fairgate_scheduler* scheduler, const char* name, int slots,
                                     const char* const* types, size_t type_count,
                                     const char* const* tags, size_t tag_count, char** error) {
  return SetWorker(scheduler, name, slots, types, type_count, tags, tag_count, error,
                   /*update=*/true);
}

fairgate_code fairgate_remove_worker(fairgate_scheduler* scheduler, const char* name,
                                     char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {name, "the worker's name"}}); !s.ok())
      return s;
    return scheduler->impl->RemoveWorker(name);
  });
}

fairgate_code fairgate_pause_type(fairgate_scheduler* scheduler, const char* type, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {type, "the type"}}); !s.ok()) return s;
    return scheduler->impl->PauseType(type);
  });
}

fairgate_code fairgate_resume_type(fairgate_scheduler* scheduler, const char* type, char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {type, "the type"}}); !s.ok()) return s;
    return scheduler->impl->ResumeType(type);
  });
}

fairgate_code fairgate_pause_key(fairgate_scheduler* scheduler, const char* fairness_key,
                                 char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {fairness_key, "the fairness key"}});
        !s.ok())
      return s;
    return scheduler->impl->PauseKey(fairness_key);
  });
}

fairgate_code fairgate_resume_key(fairgate_scheduler* scheduler, const char* fairness_key,
                                  char** error) {
  return Guarded(error, [&] {
    if (Status s = Given({{scheduler, "the scheduler"}, {fairness_key, "the fairness key"}});
        !s.ok())
      return s;
    return scheduler->impl->ResumeKey(fairness_key);
  });
}

char* fairgate_snapshot_json(fairgate_scheduler* scheduler) {
  if (scheduler == nullptr) return nullptr;
  try {
    return Copy(fairgate::ToJson(scheduler->impl->Snapshot()));
  } catch (...) {
    Abort("fairgate_snapshot_json");
  }
}

char* fairgate_snapshot_json_heaviest(fairgate_scheduler* scheduler, size_t heaviest_keys) {
  if (scheduler == nullptr) return nullptr;
  try {
    return Copy(fairgate::ToJson(scheduler->impl->Snapshot(heaviest_keys)));
  } catch (...) {
    Abort("fairgate_snapshot_json_heaviest");
  }
}

fairgate_code fairgate_max_wait_to_ceiling(fairgate_scheduler* scheduler, const char* type,
                                           double* seconds, char** error) {
  return Guarded(error, [&]() -> Status {
    if (Status s = Given({{scheduler, "the scheduler"}, {type, "the type"}, {seconds, "seconds"}});
        !s.ok()) {
      return s;
    }
    const fairgate::StatusOr<fairgate::Seconds> wait = scheduler->impl->MaxWaitToCeiling(type);
    if (!wait.ok()) return wait.status();
    *seconds = wait->count();
    return absl::OkStatus();
  });
}

char* fairgate_metrics_text(fairgate_scheduler* scheduler) {
  if (scheduler == nullptr) return nullptr;
  try {
    std::string text;
    scheduler->impl->WriteMetrics(text);
    return Copy(text);
  } catch (...) {
    Abort("fairgate_metrics_text");
  }
}

char* fairgate_permit_worker(const fairgate_permit* permit) {
  return Copy(permit == nullptr ? std::string_view() : permit->permit.Worker());
}

uint64_t fairgate_permit_fencing_token(const fairgate_permit* permit) {
  return permit == nullptr ? 0 : permit->permit.FencingToken();
}

}  // extern "C"
