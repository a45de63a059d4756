/* fairgate/c.h: fairgate's C interface, for C programs and for other languages' bindings.
 *
 * A C99 interface over the C++ library, in its own shared library (libfairgate_c.so, target
 * fairgate::c), with the same meaning as the C++ calls it names; their headers say the rest.
 *
 * Handles. Every object is an opaque pointer made by one call and ended by one other:
 * fairgate_scheduler_create / fairgate_scheduler_destroy, a fairgate_permit by an admission /
 * fairgate_permit_release, a fairgate_pending by fairgate_acquire / fairgate_pending_free, a
 * fairgate_store by fairgate_sqlite_store_open or fairgate_postgres_store_open /
 * fairgate_store_free, a fairgate_periodic by fairgate_submit_every / fairgate_periodic_free, a
 * fairgate_cancel by fairgate_cancel_new / fairgate_cancel_free, a fairgate_cancel_callback by
 * fairgate_context_on_cancel / fairgate_cancel_callback_stop. A handle is never freed for you,
 * and a freed one is not touched again.
 *
 * Errors. A call that can fail returns a fairgate_code (FAIRGATE_OK, or the code of the C++
 * Status: the values are absl's) and, when `error` is not NULL and the call failed, sets *error to
 * a message naming what was wrong (a string the caller frees with fairgate_free); on success
 * *error is left alone.
 *
 * NULL. A NULL handle, struct, callback or string that a call needs is refused with
 * FAIRGATE_INVALID_ARGUMENT and a message naming it ("the scheduler is NULL", "job.id is
 * NULL"): an empty name is "", never NULL. NULL is taken only where this header says what it
 * means (`error`, `code`, `pending`, a type's conflict_group, a release's message, `done`,
 * `on_run`, `periodic`, the options struct of a store, a durable type or a periodic job (the
 * defaults), a payload of 0 bytes, the durable calls' `sequence`, `sequences` and `report`, and
 * fairgate_run_sync's `cancel`, the options' callbacks and evidence_path: on_event, warn,
 * key_group, the readings, on_evidence). An array with a count above 0 must not be NULL nor hold a
 * NULL string. A call with no code to return does nothing for a NULL handle:
 * fairgate_snapshot_json, fairgate_snapshot_json_heaviest and fairgate_metrics_text return NULL,
 * fairgate_accumulated_cost, fairgate_group_accumulated_cost, fairgate_estimate,
 * fairgate_periodic_runs and the fencing tokens 0, fairgate_permit_worker and
 * fairgate_context_worker "", fairgate_context_done 0, fairgate_context_wait 0 at once,
 * fairgate_permit_context and fairgate_cancel_context NULL and fairgate_cancel_callback_stop 0.
 *
 * Strings. Every string passed in (names, messages) is copied before the call returns; the
 * caller keeps its own, and so is every payload. A string returned (fairgate_snapshot_json,
 * fairgate_metrics_text, *error) is the caller's, freed with fairgate_free; an array of stored
 * jobs (fairgate_dead_jobs) is freed with fairgate_stored_jobs_free. A message or a durable job
 * passed to a callback is valid during the callback only.
 *
 * Callbacks. Each has a `void* user` given with it, passed back unchanged. They run, as the C++
 * ones do, on the thread that made the decision: inside the call itself (an acquire admitted at
 * once), inside whatever freed a slot (a permit's release, a job's return), on the scheduler's
 * timer (a deadline, a lowered cap raised again), or on a pool thread (a submitted job's body, a
 * durable job's handler). A callback must be quick, must not block, and may call the scheduler
 * (release its permit, acquire again) but must not destroy it. A permit callback and a done
 * callback are called exactly once for each call that returned FAIRGATE_OK; none for a call that
 * failed.
 *
 * Fibers. A pool thread runs many jobs as fibers (fiber_stack_bytes), so a job's body, a durable
 * handler or a periodic run may be on a fiber, and a call that waits suspends that fiber while
 * another runs on the same thread: fairgate_context_wait, and fairgate_context_done, _err,
 * _on_cancel and fairgate_cancel_callback_stop when another thread holds the context's lock at
 * that moment. C code does not see it. A language runtime that keeps state per OS thread and runs
 * its own code inside the callback (Go's cgo callbacks) must not make such a call from that code:
 * its runtime then finds a second callback on the same thread. Make it before entering that
 * runtime and after leaving it, or run that code on a thread of the runtime's own and wait for
 * it in C on a cancellation's context (fairgate_cancel_context), as go/fairgate does
 * (go/fairgate/offload.h): then the job holds no pool thread while it waits either.
 *
 * Shutdown. fairgate_scheduler_shutdown stops taking calls (later ones fail with
 * FAIRGATE_UNAVAILABLE), calls every pending acquire's callback and every queued job's done
 * callback with FAIRGATE_CANCELLED, cancels the running jobs' contexts, and returns once they have
 * all returned and every permit has been released; fairgate_scheduler_destroy shuts down first if
 * that was not done. So every callback has been called when destroy returns, and none after.
 *
 * Thread safety: every call may be made from any thread at once, except that a handle is not used
 * after (or while) it is freed.
 */
#ifndef FAIRGATE_C_H_
#define FAIRGATE_C_H_

#include <stddef.h>
#include <stdint.h>

#if defined(FAIRGATE_C_BUILDING)
#define FAIRGATE_C_EXPORT __attribute__((visibility("default")))
#else
#define FAIRGATE_C_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The codes of absl::StatusCode, which the C++ library's Status carries. */
typedef enum fairgate_code {
  FAIRGATE_OK = 0,
  FAIRGATE_CANCELLED = 1,
  FAIRGATE_UNKNOWN = 2,
  FAIRGATE_INVALID_ARGUMENT = 3,
  FAIRGATE_DEADLINE_EXCEEDED = 4,
  FAIRGATE_NOT_FOUND = 5,
  FAIRGATE_ALREADY_EXISTS = 6,
  FAIRGATE_PERMISSION_DENIED = 7,
  FAIRGATE_RESOURCE_EXHAUSTED = 8,
  FAIRGATE_FAILED_PRECONDITION = 9,
  FAIRGATE_ABORTED = 10,
  FAIRGATE_OUT_OF_RANGE = 11,
  FAIRGATE_UNIMPLEMENTED = 12,
  FAIRGATE_INTERNAL = 13,
  FAIRGATE_UNAVAILABLE = 14,
  FAIRGATE_DATA_LOSS = 15,
  FAIRGATE_UNAUTHENTICATED = 16
} fairgate_code;

typedef struct fairgate_scheduler fairgate_scheduler;
typedef struct fairgate_permit fairgate_permit;
typedef struct fairgate_pending fairgate_pending;
typedef struct fairgate_context fairgate_context;

/* Frees a string fairgate returned (NULL: nothing). */
FAIRGATE_C_EXPORT void fairgate_free(char* string);

/* What a refusal says besides its code (the C++ RetryAfter, fairgate/rate_limit.h, and WasShed,
 * fairgate/shedding.h). A message fairgate gives (in *error, or to a permit or done callback) for
 * a call refused for want of a rate limit's token or by shedding, or for a job shed from the
 * queue, ends in " [fairgate: retry_after=S]", or " [fairgate: shed; retry_after=S]" when shed, S
 * the seconds after which the call may succeed. fairgate_retry_after returns 1 and sets *seconds
 * (when not NULL) for a message with that tail, else 0; fairgate_was_shed returns 1 for a message
 * with the shed one, else 0. Both take NULL (0). */
FAIRGATE_C_EXPORT int fairgate_retry_after(const char* message, double* seconds);
FAIRGATE_C_EXPORT int fairgate_was_shed(const char* message);

/* --- Options (fairgate/options.h, fairgate/rule_options.h). The structs are flat and versioned:
 * fill one with its _init macro, which sets `version` and every field's default, then change the
 * fields you mean. A later version adds fields at the end; a struct of an earlier version is
 * still read as it was. The macro passes the header's version to the library's _init_version
 * function, which writes the fields of that version and no others, so a program built with an
 * earlier header keeps working with a later library (FAIRGATE_INVALID_ARGUMENT, nothing written,
 * for a NULL struct or a version the library does not know). A binding that declares the structs
 * itself (through a foreign-function interface, which sees no macros) calls _init_version with
 * the version whose layout it declares. */
#define FAIRGATE_OPTIONS_VERSION 3
typedef struct fairgate_store fairgate_store;
/* A key's limits (fairgate/key_limits.h): fairgate_set_key_limits, and the options' default. */
typedef struct fairgate_key_limits {
  int max_running; /* 0: KeyLimits::kNoLimit */
  int min_running;
  double rate_per_second; /* 0: no limit */
  double rate_burst;      /* 0: 1 */
  int rate_per_weight;    /* 0 or 1 */
} fairgate_key_limits;

/* What a scheduler did (fairgate/observer.h, JobEvent), given to options.on_event. Valid during
 * the call only; the library fills it, so a later version may add fields at its end (read it
 * through the pointer, do not copy it by value into a struct of your own). */
typedef enum fairgate_event_kind {
  FAIRGATE_EVENT_ADMIT = 0,
  FAIRGATE_EVENT_COMPLETE = 1,
  FAIRGATE_EVENT_CANCEL = 2,
  FAIRGATE_EVENT_REJECT = 3,
  FAIRGATE_EVENT_PROMOTE = 4,
  FAIRGATE_EVENT_EVICT = 5, /* a key forgotten by the TTL sweep: only fairness_key is set */
  FAIRGATE_EVENT_EXPIRE = 6,
  FAIRGATE_EVENT_SHED = 7
} fairgate_event_kind;
typedef struct fairgate_event {
  fairgate_event_kind kind;
  double time; /* the scheduler's clock, seconds */
  const char* type;
  const char* id;
  const char* fairness_key;
  int tier;
  int effective_tier;
  double charge;
  double accumulated_cost;
  double wait;
  double run_time;
  fairgate_code code;  /* COMPLETE: the job's status; CANCEL, EXPIRE, REJECT, SHED: why */
  const char* message; /* with a retry-after tail where the C++ status carries one */
  const char* worker;  /* with workers: the one it runs on; else "" */
} fairgate_event;
/* Called on the scheduler's delivery thread, one event at a time, in the order of the decisions
 * (Observer::OnEvent's contract: quick; may call the scheduler but not shut it down or destroy
 * it). */
typedef void (*fairgate_event_fn)(void* user, const fairgate_event* event);
/* An admission's evidence as a line of JSON, valid during the call. */
typedef void (*fairgate_evidence_fn)(void* user, const char* line);
/* A warning (RuntimeOptions::warn), one sentence, on the thread of the call that gave it. */
typedef void (*fairgate_warn_fn)(void* user, const char* warning);
/* The group of a key the scheduler has not seen (RuntimeOptions::key_group): a string allocated
 * with malloc, which the library frees, or NULL for none. Called with the scheduler's lock held:
 * quick, thread-safe, never calling the scheduler. */
typedef char* (*fairgate_key_group_fn)(void* user, const char* fairness_key);
/* A reading for adaptive capacity (AdaptiveCapacity::stalled_seconds, PressureSignal::read):
 * FAIRGATE_OK and *value, or another code when it cannot be read (the interval's reading is
 * then missing, as the C++ one's error makes it). On the scheduler's timer thread: quick, never
 * calling the scheduler. */
typedef fairgate_code (*fairgate_reading_fn)(void* user, double* value);
/* A signal adaptive capacity follows besides CPU pressure (PressureSource, PressureSignal). */
typedef enum fairgate_pressure_source {
  FAIRGATE_PRESSURE_MEMORY_SOME = 0,
  FAIRGATE_PRESSURE_MEMORY_FULL = 1,
  FAIRGATE_PRESSURE_IO_SOME = 2,
  FAIRGATE_PRESSURE_IO_FULL = 3,
  FAIRGATE_PRESSURE_MEMORY_USE = 4
} fairgate_pressure_source;
typedef struct fairgate_pressure_signal {
  fairgate_pressure_source source;
  double high;
  double low;
  fairgate_reading_fn read; /* NULL: the kernel's */
  void* read_user;
} fairgate_pressure_signal;

typedef struct fairgate_options {
  uint32_t version;
  int seed_mode;          /* 1: SchedulerOptions::Seed() (the original rule), else Default() */
  int max_concurrency;    /* RuleOptions::max_concurrency */
  double alpha;           /* RuleOptions::alpha */
  int reconcile;          /* RuleOptions::reconcile: -1 the preset's (on, off in seed mode), 0, 1 */
  int idle_catch_up;      /* RuleOptions::idle_catch_up (0 or 1) */
  double key_ttl_seconds; /* RuleOptions::key_ttl */
  double estimate_ttl_seconds; /* RuleOptions::estimate_ttl */
  size_t max_pending_total;    /* RuleOptions::max_pending_total; 0: no limit */
  size_t max_pending_per_key;  /* RuleOptions::max_pending_per_key; 0: no limit */
  int latency_capacity_min;    /* RuleOptions::latency_capacity: 0 off, else its min */
  double rate_per_second;      /* RuleOptions::rate_limit.per_second; 0: no limit */
  double rate_burst;           /* RuleOptions::rate_limit.burst */
  int worker_threads;          /* RuntimeOptions::worker_threads; 0: max_concurrency */
  /* Version 2. What survives a restart (PersistenceOptions) and replicas (FleetOptions). */
  fairgate_store* store;         /* NULL: none (the durable calls are FAIRGATE_FAILED_PRECONDITION);
                                  * the scheduler keeps the store open while it lives */
  double state_flush_seconds;    /* PersistenceOptions::state_flush_interval */
  double lease_ttl_seconds;      /* FleetOptions::lease_ttl */
  double claim_interval_seconds; /* FleetOptions::claim_interval */
  int max_claimed;               /* FleetOptions::max_claimed; 0: as many as it can start soon */
  /* FleetOptions::conflict_groups: `fleet_conflict_group_count` names. */
  const char* const* fleet_conflict_groups;
  size_t fleet_conflict_group_count;
  /* FleetOptions::type_caps: `fleet_type_cap_count` types, each with its cap at the same index
   * of `fleet_type_caps`. */
  const char* const* fleet_capped_types;
  const int* fleet_type_caps;
  size_t fleet_type_cap_count;
  /* Version 3. The rest of the rule (RuleOptions), the runtime (RuntimeOptions) and the fleet. */
  int lending;              /* RuleOptions::lending: -1 the preset's (on, off in seed mode), 0, 1 */
  double lending_kept_back; /* TierLending::kept_back, with lending */
  int aging;                /* 0: none; 1: RuleOptions::aging, with the three below */
  double aging_grace_seconds;
  double aging_interval_seconds;
  int aging_ceiling;
  int shortest_first; /* RuleOptions::shortest_first (0 or 1) */
  double shortest_first_aging;
  fairgate_key_limits default_key_limits; /* RuleOptions::default_key_limits */
  int default_group_max_running;          /* RuleOptions::default_group_limits; 0: no limit */
  int default_group_min_running;
  /* LatencyCapacity's other fields, with latency_capacity_min above 0. */
  double latency_capacity_interval_seconds;
  int latency_capacity_remeasure_every;
  /* RuleOptions::adaptive_capacity: 0 off, else its min, with the fields below. */
  int adaptive_capacity_min;
  double adaptive_capacity_interval_seconds;
  double adaptive_capacity_high;
  double adaptive_capacity_low;
  double adaptive_capacity_decrease;
  fairgate_reading_fn adaptive_stalled_seconds; /* NULL: the kernel's CPU pressure */
  void* adaptive_stalled_seconds_user;
  const fairgate_pressure_signal* adaptive_signals; /* `adaptive_signal_count` of them */
  size_t adaptive_signal_count;
  double sole_worker_reserve_after_seconds; /* infinity: never */
  size_t sweep_batch;
  size_t fiber_stack_bytes;      /* RuntimeOptions */
  double sweep_interval_seconds; /* RuntimeOptions::sweep_interval */
  size_t observer_queue_limit;   /* RuntimeOptions */
  fairgate_event_fn on_event;    /* NULL: none; else an observer (RuntimeOptions::observers) */
  void* on_event_user;
  fairgate_warn_fn warn; /* NULL: to stderr; a function that does nothing silences them */
  void* warn_user;
  fairgate_key_group_fn key_group; /* NULL: no rule (RuntimeOptions::key_group) */
  void* key_group_user;
  double token_lease_seconds; /* FleetOptions::token_lease */
  /* RuntimeOptions::evidence (fairgate/evidence.h): every admission's reasons as one line of
   * JSON (ToJsonLine, no newline), given to on_evidence on the delivery thread, as events are,
   * or appended to the file evidence_path (OpenEvidenceFile); NULL: none. Not both. */
  fairgate_evidence_fn on_evidence;
  void* on_evidence_user;
  const char* evidence_path;
} fairgate_options;
FAIRGATE_C_EXPORT fairgate_code fairgate_options_init_version(fairgate_options* options,
                                                              uint32_t version);
#define fairgate_options_init(options) \
  fairgate_options_init_version((options), FAIRGATE_OPTIONS_VERSION)

/* Creates a scheduler (Scheduler::Create); NULL with *error (and the code in *code when not
 * NULL) on bad options. Options of version 1 (fields up to worker_threads) are still read, with
 * no store and the fleet's defaults, and of version 2 (up to fleet_type_cap_count) with the
 * preset's values of the rest. seed_mode chooses the preset, which fields of -1 (reconcile,
 * lending) follow. */
FAIRGATE_C_EXPORT fairgate_scheduler* fairgate_scheduler_create(const fairgate_options* options,
                                                                fairgate_code* code, char** error);
/* Shuts down (see the header comment), waiting at most `timeout_seconds` (< 0: for ever);
 * FAIRGATE_DEADLINE_EXCEEDED when jobs still ran then (they are cancelled; destroy waits for
 * them). */
FAIRGATE_C_EXPORT fairgate_code fairgate_scheduler_shutdown(fairgate_scheduler* scheduler,
                                                            double timeout_seconds, char** error);
/* Drains (Scheduler::Drain): refuses new calls but runs everything pending first (resuming what
 * is paused), then shuts down, waiting at most `timeout_seconds` in all (< 0: for ever);
 * FAIRGATE_DEADLINE_EXCEEDED when it was not done then (what was still pending is cancelled then,
 * as fairgate_scheduler_shutdown would). */
FAIRGATE_C_EXPORT fairgate_code fairgate_scheduler_drain(fairgate_scheduler* scheduler,
                                                         double timeout_seconds, char** error);
/* Shuts down if not yet, waits for every job and permit, and frees the scheduler. A permit still
 * held must be released by another thread meanwhile, or this never returns. */
FAIRGATE_C_EXPORT void fairgate_scheduler_destroy(fairgate_scheduler* scheduler);

/* --- Types (fairgate/job_type.h). */
#define FAIRGATE_TYPE_CONFIG_VERSION 1
typedef enum fairgate_coalesce {
  FAIRGATE_COALESCE_OFF = 0,
  FAIRGATE_COALESCE_JOIN = 1,
  FAIRGATE_COALESCE_SUPERSEDE = 2
} fairgate_coalesce;
typedef struct fairgate_type_config {
  uint32_t version;
  double default_cost;
  int max_concurrency;        /* 0: JobTypeConfig::kNoLimit */
  const char* conflict_group; /* NULL or "": none */
  int conflict_limit;
  int priority;
  int slots;
  int shortest_first;            /* 0 or 1 */
  double max_queue_wait_seconds; /* 0: no limit */
  fairgate_coalesce coalesce;
  const char* const* tags; /* `tag_count` strings */
  size_t tag_count;
  double rate_per_second; /* JobTypeConfig::rate_limit; 0: no limit */
  double rate_burst;
  int refuse_without_token; /* 0 or 1 */
  /* JobTypeConfig::shedding (fairgate/shedding.h): 0: none. */
  double shed_target_seconds;
  double shed_interval_seconds;
} fairgate_type_config;
FAIRGATE_C_EXPORT fairgate_code fairgate_type_config_init_version(fairgate_type_config* config,
                                                                  uint32_t version);
#define fairgate_type_config_init(config) \
  fairgate_type_config_init_version((config), FAIRGATE_TYPE_CONFIG_VERSION)
FAIRGATE_C_EXPORT fairgate_code fairgate_register_type(fairgate_scheduler* scheduler,
                                                       const char* name,
                                                       const fairgate_type_config* config,
                                                       char** error);

/* --- A job's name (fairgate/job_name.h), its cost hint (JobOptions::cost: a cost < 0 is none;
 * NaN or infinity is refused with FAIRGATE_INVALID_ARGUMENT) and JobOptions' switches as flags
 * (or-ed; 0, what an initializer of the first four fields leaves, is none; an unknown bit is
 * refused). Every job call takes them; fairgate_submit_every and the durable calls take neither
 * a cost hint nor flags. */
#define FAIRGATE_JOB_JOIN_RUNNING 1u           /* JobOptions::join_running (Submit) */
#define FAIRGATE_JOB_REQUEUE_ON_WORKER_LOSS 2u /* JobOptions::requeue_on_worker_loss (Submit) */
#define FAIRGATE_JOB_REFUSE_WITHOUT_TOKEN 4u   /* JobOptions::refuse_without_token */
typedef struct fairgate_job {
  const char* type;
  const char* id;
  const char* fairness_key;
  double cost;
  uint32_t flags;
} fairgate_job;

/* --- Acquire (Scheduler::Acquire): never blocks. `on_admitted` is called exactly once when the
 * call returned FAIRGATE_OK: with a permit (the job runs until fairgate_permit_release) and
 * FAIRGATE_OK, or with NULL and why it will not run (FAIRGATE_CANCELLED: cancelled or shut down;
 * FAIRGATE_DEADLINE_EXCEEDED: the type's max_queue_wait). When `pending` is not NULL, *pending is
 * a handle to cancel the wait with, freed by the caller with fairgate_pending_free (after or
 * before the callback: either order). */
typedef void (*fairgate_permit_callback)(void* user, fairgate_permit* permit, fairgate_code code,
                                         const char* message);
FAIRGATE_C_EXPORT fairgate_code fairgate_acquire(fairgate_scheduler* scheduler,
                                                 const fairgate_job* job,
                                                 fairgate_permit_callback on_admitted, void* user,
                                                 fairgate_pending** pending, char** error);
/* Cancels the wait if the job is still pending (its callback then gets FAIRGATE_CANCELLED);
 * nothing once it was admitted or refused (a permit that comes as the caller gives up: give it
 * back with fairgate_permit_release_unused). Idempotent. */
FAIRGATE_C_EXPORT void fairgate_pending_cancel(fairgate_pending* pending);
FAIRGATE_C_EXPORT void fairgate_pending_free(fairgate_pending* pending);
/* Admitted at once or not at all (Scheduler::TryAcquire): FAIRGATE_OK and *permit, or
 * FAIRGATE_RESOURCE_EXHAUSTED when the job would have to wait (it is not queued, not charged, and
 * nothing admits it later), or the refusal Acquire would return; FAIRGATE_FAILED_PRECONDITION for
 * a type that takes fleet-wide leases (use fairgate_acquire). */
FAIRGATE_C_EXPORT fairgate_code fairgate_try_acquire(fairgate_scheduler* scheduler,
                                                     const fairgate_job* job,
                                                     fairgate_permit** permit, char** error);
/* With workers (fairgate/worker.h): the worker the job was admitted onto, a copy the caller frees
 * with fairgate_free; "" without workers. */
FAIRGATE_C_EXPORT char* fairgate_permit_worker(const fairgate_permit* permit);
/* The fencing token of the fleet-wide lease the permit's job holds (Permit::FencingToken); 0
 * when it holds none. */
FAIRGATE_C_EXPORT uint64_t fairgate_permit_fencing_token(const fairgate_permit* permit);
/* The job's context (Permit::JobContext, fairgate/permit.h), for fairgate_context_done, _err,
 * _wait and _on_cancel: cancelled when the worker the job was admitted onto is removed while the
 * permit is held (fairgate_context_err: FAIRGATE_UNAVAILABLE; the job has ended), never by
 * shutdown; never cancelled without workers. Valid until the permit is released; NULL for NULL. */
FAIRGATE_C_EXPORT const fairgate_context* fairgate_permit_context(const fairgate_permit* permit);
/* Completes the permit's job with `code` (and `message`, NULL for none; ignored with
 * FAIRGATE_OK) and frees the permit. */
FAIRGATE_C_EXPORT void fairgate_permit_release(fairgate_permit* permit, fairgate_code code,
                                               const char* message);
/* Gives the permit's job back without having done any of its work (Permit::ReleaseUnused,
 * fairgate/permit.h: its estimate learns nothing, its key is charged back what the admission
 * charged it), completing it with `code` and `message` as fairgate_permit_release does, and frees
 * the permit. For a holder whose reason to run the job went away as it was admitted. */
FAIRGATE_C_EXPORT void fairgate_permit_release_unused(fairgate_permit* permit, fairgate_code code,
                                                      const char* message);

/* --- Submit (Scheduler::Submit): queues a background job whose body is `run`, called once on a
 * pool thread when the job is admitted; what it returns is the job's status (with *error, a
 * message it allocated with malloc, or left NULL). `done` (may be NULL) is called exactly once
 * with that status, FAIRGATE_CANCELLED (shutdown) or FAIRGATE_DEADLINE_EXCEEDED (max_queue_wait).
 * `ctx` is valid during `run`: fairgate_context_done says when the job should stop early. */
typedef fairgate_code (*fairgate_job_fn)(void* user, const fairgate_context* ctx, char** error);
typedef void (*fairgate_done_fn)(void* user, fairgate_code code, const char* message);
FAIRGATE_C_EXPORT fairgate_code fairgate_submit(fairgate_scheduler* scheduler,
                                                const fairgate_job* job, fairgate_job_fn run,
                                                fairgate_done_fn done, void* user, char** error);
/* 1 once the job's context is done (cancelled, shut down, its worker removed), else 0. */
FAIRGATE_C_EXPORT int fairgate_context_done(const fairgate_context* ctx);
/* Why it is done (Context::Err): FAIRGATE_OK while it is not; else FAIRGATE_CANCELLED,
 * FAIRGATE_DEADLINE_EXCEEDED, or FAIRGATE_UNAVAILABLE when its worker was removed, with *error
 * as every call's. */
FAIRGATE_C_EXPORT fairgate_code fairgate_context_err(const fairgate_context* ctx, char** error);
/* Waits until the context is done or `timeout_seconds` passed (< 0: no limit), without holding
 * the pool's thread (a job waits as a fiber: other jobs run on its thread meanwhile); 1 when it
 * is done, else 0. A job that must pause should wait here rather than sleep. */
FAIRGATE_C_EXPORT int fairgate_context_wait(const fairgate_context* ctx, double timeout_seconds);
/* With workers (fairgate/worker.h): the worker the job was admitted onto, a copy the caller
 * frees with fairgate_free; "" without workers. */
FAIRGATE_C_EXPORT char* fairgate_context_worker(const fairgate_context* ctx);
/* The fencing token of the fleet-wide lease the job holds (Context::FencingToken; options'
 * fleet_conflict_groups and fleet type caps); 0 when it holds none. */
FAIRGATE_C_EXPORT uint64_t fairgate_context_fencing_token(const fairgate_context* ctx);
/* Calls `fn(user)` once when the job's context is cancelled (the scheduler shuts down, the job's
 * worker is removed, the fairgate_cancel of a fairgate_run_sync is fired), on the thread that
 * cancels it, or at once on this thread if it already was; not when only a deadline passes
 * (OnCancel, fairgate/context.h). For a `run` that cannot poll or wait on the context (another
 * language's runtime, which tells its own code to stop). `fn` must be short and must not block:
 * it runs inside the canceller's call. The registration is the caller's: end it with
 * fairgate_cancel_callback_stop once `fn` is no longer wanted, at the latest when `run` returns
 * (for a permit's context, when it is released). NULL when ctx or fn is NULL. */
typedef struct fairgate_cancel_callback fairgate_cancel_callback;
typedef void (*fairgate_cancel_fn)(void* user);
FAIRGATE_C_EXPORT fairgate_cancel_callback* fairgate_context_on_cancel(const fairgate_context* ctx,
                                                                       fairgate_cancel_fn fn,
                                                                       void* user);
/* Ends the registration and frees it: once this returns, `fn` is not running and never will (a
 * run under way on another thread is waited for), so `user` may be freed. 1 if `fn` ran, else 0
 * (and 0 for NULL). Not from `fn` itself. */
FAIRGATE_C_EXPORT int fairgate_cancel_callback_stop(fairgate_cancel_callback* callback);

/* --- RunSync (Scheduler::RunSync): blocks the calling thread until the job is admitted, runs
 * `run` on that thread (`ctx` valid during the call) and returns what it returned (*error its
 * message), or returns why it did not run: FAIRGATE_CANCELLED once `cancel` (NULL: none) is
 * fired, FAIRGATE_DEADLINE_EXCEEDED once `timeout_seconds` (< 0: no limit) passed or at the
 * type's max_queue_wait, or the refusal. Of a coalescing type it joins a pending or running job
 * of its id (fairgate/scheduler.h, "Coalescing"): then `run` is not called, and the call returns
 * that job's status. For a server with a thread per request; an event loop uses
 * fairgate_acquire. */
typedef struct fairgate_cancel fairgate_cancel;
/* A cancellation that any thread fires (fairgate_cancel_fire, idempotent) to end the
 * fairgate_run_sync calls given it, waiting or running (their contexts are done); freed with
 * fairgate_cancel_free once no call uses it. */
FAIRGATE_C_EXPORT fairgate_cancel* fairgate_cancel_new(void);
FAIRGATE_C_EXPORT void fairgate_cancel_fire(fairgate_cancel* cancel);
FAIRGATE_C_EXPORT void fairgate_cancel_free(fairgate_cancel* cancel);
/* The context the cancellation ends: done once it is fired (fairgate_context_err then
 * FAIRGATE_CANCELLED), for fairgate_context_done, _err, _wait and _on_cancel; valid until the
 * cancellation is freed; NULL for NULL. A job that hands its work to a thread of its own waits
 * for it here without holding the pool's thread (fairgate_context_wait), the thread firing the
 * cancellation when the work is done; the job frees it only after fairgate_cancel_fire returned
 * (go/fairgate's job function does so, offload.c). */
FAIRGATE_C_EXPORT const fairgate_context* fairgate_cancel_context(const fairgate_cancel* cancel);
FAIRGATE_C_EXPORT fairgate_code fairgate_run_sync(fairgate_scheduler* scheduler,
                                                  const fairgate_job* job, fairgate_job_fn run,
                                                  void* user, const fairgate_cancel* cancel,
                                                  double timeout_seconds, char** error);
/* RunSync with nobody waiting (Scheduler::RunAsync): queues the job as fairgate_run_sync does,
 * joining what it would join, and returns at once. `run` is called on a pool thread if and when
 * this call runs the job, and `done` (may be NULL) exactly once with what fairgate_run_sync would
 * have returned (the message valid during the call): `run`'s status, on that thread; or, from the
 * thread that decided it (as `done` of a fairgate_submit that did not run: inside
 * fairgate_cancel_fire, say), the status of the run it joined, FAIRGATE_CANCELLED once `cancel`
 * (NULL: none) is fired before its job was admitted (the call leaves as a fairgate_run_sync caller
 * does: uncharged, the job staying for the others that joined it), FAIRGATE_DEADLINE_EXCEEDED at
 * the type's max_queue_wait, or FAIRGATE_CANCELLED at shutdown. A refusal is returned, and then
 * neither is called. The call keeps its own reference to what `cancel` ends: the cancellation may
 * be freed at any time. A time limit is the caller's to keep, by firing `cancel`. For a runtime
 * whose callers must not hold a thread while they wait: go/fairgate's RunSync of a coalescing type
 * waits in a goroutine. */
FAIRGATE_C_EXPORT fairgate_code fairgate_run_async(fairgate_scheduler* scheduler,
                                                   const fairgate_job* job, fairgate_job_fn run,
                                                   fairgate_done_fn done, void* user,
                                                   const fairgate_cancel* cancel, char** error);

/* --- Periodic jobs (Scheduler::SubmitEvery, fairgate/periodic.h): `run` as the background job
 * `job` again and again, each run `interval_seconds` after the previous one ended (times 1 + u,
 * u uniform in [-jitter, +jitter]), never two at once. `run` is called as a submitted job's body
 * is; `on_run` (may be NULL) after each run with its status, as `done` is (a run refused at the
 * door, by a full queue say, is reported there too, and the next one is scheduled as usual); both
 * with `user`, until fairgate_periodic_stop or shutdown (a run under way when it is stopped still
 * ends with its callbacks: every one has been called once the scheduler is shut down). A periodic
 * job takes no cost hint (job.cost must be < 0). When `periodic` is not NULL, *periodic is a
 * handle to stop it and count its runs, freed with fairgate_periodic_free, which stops nothing. */
#define FAIRGATE_PERIODIC_OPTIONS_VERSION 1
typedef struct fairgate_periodic_options { /* PeriodicOptions */
  uint32_t version;
  double jitter;         /* in [0, 1) */
  int first_run_at_once; /* 0: the first run after a random part of one interval; 1: at once */
} fairgate_periodic_options;
FAIRGATE_C_EXPORT fairgate_code
fairgate_periodic_options_init_version(fairgate_periodic_options* options, uint32_t version);
#define fairgate_periodic_options_init(options) \
  fairgate_periodic_options_init_version((options), FAIRGATE_PERIODIC_OPTIONS_VERSION)
typedef struct fairgate_periodic fairgate_periodic;
FAIRGATE_C_EXPORT fairgate_code fairgate_submit_every(
    fairgate_scheduler* scheduler, const fairgate_job* job, double interval_seconds,
    const fairgate_periodic_options* options, fairgate_job_fn run, fairgate_done_fn on_run,
    void* user, fairgate_periodic** periodic, char** error);
/* No further run is queued (PeriodicJob::Stop). Idempotent; does not wait for a run under way. */
FAIRGATE_C_EXPORT void fairgate_periodic_stop(fairgate_periodic* periodic);
/* The runs that have ended (reported to on_run) so far; 0 for NULL. */
FAIRGATE_C_EXPORT uint64_t fairgate_periodic_runs(const fairgate_periodic* periodic);
FAIRGATE_C_EXPORT void fairgate_periodic_free(fairgate_periodic* periodic);

/* --- Keys (Scheduler::Charge, SetKeyWeight, SetKeyLimits; fairgate/key_limits.h). */
FAIRGATE_C_EXPORT fairgate_code fairgate_charge(fairgate_scheduler* scheduler,
                                                const char* fairness_key, double cost,
                                                char** error);
FAIRGATE_C_EXPORT fairgate_code fairgate_set_key_weight(fairgate_scheduler* scheduler,
                                                        const char* fairness_key, double weight,
                                                        char** error);
FAIRGATE_C_EXPORT fairgate_code fairgate_set_key_limits(fairgate_scheduler* scheduler,
                                                        const char* fairness_key,
                                                        const fairgate_key_limits* limits,
                                                        char** error);
/* Groups of keys, tenants (Scheduler::SetKeyGroup, SetGroupWeight, SetGroupLimits;
 * fairgate/group_limits.h): "" as the group takes the key out of its group. A max_running of 0
 * is GroupLimits::kNoLimit. */
FAIRGATE_C_EXPORT fairgate_code fairgate_set_key_group(fairgate_scheduler* scheduler,
                                                       const char* fairness_key, const char* group,
                                                       char** error);
FAIRGATE_C_EXPORT fairgate_code fairgate_set_group_weight(fairgate_scheduler* scheduler,
                                                          const char* group, double weight,
                                                          char** error);
FAIRGATE_C_EXPORT fairgate_code fairgate_set_group_limits(fairgate_scheduler* scheduler,
                                                          const char* group, int max_running,
                                                          int min_running, char** error);
/* 1 and *cost when the key is tracked, else 0. */
FAIRGATE_C_EXPORT int fairgate_accumulated_cost(fairgate_scheduler* scheduler,
                                                const char* fairness_key, double* cost);
/* 1 and *cost when the group is tracked (Scheduler::GroupAccumulatedCost), else 0. */
FAIRGATE_C_EXPORT int fairgate_group_accumulated_cost(fairgate_scheduler* scheduler,
                                                      const char* group, double* cost);
/* 1 and *seconds, the learned cost of (type, id) (Scheduler::Estimate), when tracked, else 0. */
FAIRGATE_C_EXPORT int fairgate_estimate(fairgate_scheduler* scheduler, const char* type,
                                        const char* id, double* seconds);

/* --- Workers (fairgate/worker.h): Scheduler::AddWorker, UpdateWorker, RemoveWorker. */
FAIRGATE_C_EXPORT fairgate_code fairgate_add_worker(fairgate_scheduler* scheduler, const char* name,
                                                    int slots, const char* const* types,
                                                    size_t type_count, const char* const* tags,
                                                    size_t tag_count, char** error);
FAIRGATE_C_EXPORT fairgate_code fairgate_update_worker(fairgate_scheduler* scheduler,
                                                       const char* name, int slots,
                                                       const char* const* types, size_t type_count,
                                                       const char* const* tags, size_t tag_count,
                                                       char** error);
FAIRGATE_C_EXPORT fairgate_code fairgate_remove_worker(fairgate_scheduler* scheduler,
                                                       const char* name, char** error);

/* --- Pause and resume (Scheduler::PauseType, ResumeType, PauseKey, ResumeKey). */
FAIRGATE_C_EXPORT fairgate_code fairgate_pause_type(fairgate_scheduler* scheduler, const char* type,
                                                    char** error);
FAIRGATE_C_EXPORT fairgate_code fairgate_resume_type(fairgate_scheduler* scheduler,
                                                     const char* type, char** error);
FAIRGATE_C_EXPORT fairgate_code fairgate_pause_key(fairgate_scheduler* scheduler,
                                                   const char* fairness_key, char** error);
FAIRGATE_C_EXPORT fairgate_code fairgate_resume_key(fairgate_scheduler* scheduler,
                                                    const char* fairness_key, char** error);

/* --- Stores (fairgate/store.h): where durable jobs, learned estimates and keys' costs are kept
 * (fairgate_options.store). A store is opened once and given to one scheduler (two schedulers
 * do not work one store's jobs at once: fairgate_recover refuses the second); the caller frees
 * its handle with fairgate_store_free when it no longer needs it, at once if it likes: a
 * scheduler created with it keeps the store open until it is destroyed. */
#define FAIRGATE_SQLITE_OPTIONS_VERSION 1
typedef enum fairgate_sqlite_sync {
  FAIRGATE_SQLITE_SYNC_FULL = 0,  /* every commit waits for an fsync (the default) */
  FAIRGATE_SQLITE_SYNC_NORMAL = 1 /* survives kill -9, possibly not a power cut; faster */
} fairgate_sqlite_sync;
typedef struct fairgate_sqlite_options { /* fairgate/sqlite_store.h, SqliteStoreOptions */
  uint32_t version;
  int synchronous; /* a fairgate_sqlite_sync */
  double busy_timeout_seconds;
  size_t max_job_bytes;
} fairgate_sqlite_options;
FAIRGATE_C_EXPORT fairgate_code
fairgate_sqlite_options_init_version(fairgate_sqlite_options* options, uint32_t version);
#define fairgate_sqlite_options_init(options) \
  fairgate_sqlite_options_init_version((options), FAIRGATE_SQLITE_OPTIONS_VERSION)
/* Opens (creating if absent) a store in the SQLite file `path` (OpenSqliteStore), with `options`
 * (NULL: the defaults); NULL with *error (and *code) when it cannot. */
FAIRGATE_C_EXPORT fairgate_store* fairgate_sqlite_store_open(const char* path,
                                                             const fairgate_sqlite_options* options,
                                                             fairgate_code* code, char** error);
#define FAIRGATE_POSTGRES_OPTIONS_VERSION 1
typedef struct fairgate_postgres_options { /* fairgate/postgres_store.h, PostgresStoreOptions */
  uint32_t version;
  const char* replica; /* NULL or "": a name made from the host, the process and a random part */
  int connections;
  size_t max_job_bytes;
} fairgate_postgres_options;
FAIRGATE_C_EXPORT fairgate_code
fairgate_postgres_options_init_version(fairgate_postgres_options* options, uint32_t version);
#define fairgate_postgres_options_init(options) \
  fairgate_postgres_options_init_version((options), FAIRGATE_POSTGRES_OPTIONS_VERSION)
/* Connects to PostgreSQL with the libpq connection string `conninfo` (OpenPostgresStore), with
 * `options` (NULL: the defaults): the store replicas share, each replica opening its own on the
 * same database. NULL with *error (and *code) when it cannot. */
FAIRGATE_C_EXPORT fairgate_store* fairgate_postgres_store_open(
    const char* conninfo, const fairgate_postgres_options* options, fairgate_code* code,
    char** error);
FAIRGATE_C_EXPORT void fairgate_store_free(fairgate_store* store);

/* --- Durable jobs (fairgate/durable.h): background work stored before fairgate_submit_durable
 * returns and run, at least once, by the handler registered for its type, after a crash too.
 * Each call needs a scheduler with a store, else FAIRGATE_FAILED_PRECONDITION. */
#define FAIRGATE_RETRY_POLICY_VERSION 1
typedef struct fairgate_retry_policy { /* RetryPolicy */
  uint32_t version;
  uint32_t max_attempts;
  double initial_backoff_seconds;
  double max_backoff_seconds;
  double multiplier;
} fairgate_retry_policy;
FAIRGATE_C_EXPORT fairgate_code fairgate_retry_policy_init_version(fairgate_retry_policy* policy,
                                                                   uint32_t version);
#define fairgate_retry_policy_init(policy) \
  fairgate_retry_policy_init_version((policy), FAIRGATE_RETRY_POLICY_VERSION)
/* What a handler is given (DurableJob), valid during the call only. The names end at a NUL (a
 * name stored by a C++ caller with a NUL byte in it reads as cut there); the payload is
 * `payload_size` bytes, NUL included. */
typedef struct fairgate_durable_job {
  uint64_t sequence;
  const char* type;
  const char* id;
  const char* fairness_key;
  const void* payload;
  size_t payload_size;
  uint32_t attempt;     /* 1 for the first */
  uint64_t lease_token; /* with a shared store, the lease's fencing token; else 0 */
} fairgate_durable_job;
/* A durable job's handler: runs on a pool thread, as a submitted job's body does; what it returns
 * is the attempt's status (with *error, a message it allocated with malloc, or left NULL):
 * FAIRGATE_OK removes the job, anything else retries it by the policy until it is dead. `ctx` is
 * valid during the call (fairgate_context_done: a shutdown cancelled it). */
typedef fairgate_code (*fairgate_durable_fn)(void* user, const fairgate_durable_job* job,
                                             const fairgate_context* ctx, char** error);
/* Registers (Scheduler::RegisterDurable) the handler of the durable jobs of the registered type
 * `type`, called with `user`, and how their failures are retried (`retry`: NULL, the defaults). */
FAIRGATE_C_EXPORT fairgate_code fairgate_register_durable(fairgate_scheduler* scheduler,
                                                          const char* type,
                                                          fairgate_durable_fn handler, void* user,
                                                          const fairgate_retry_policy* retry,
                                                          char** error);
typedef struct fairgate_recovery_report { /* RecoveryReport */
  size_t queued;
  size_t deferred;
  size_t without_handler;
  size_t dead;
} fairgate_recovery_report;
/* Queues the stored jobs (Scheduler::Recover), once, after the handlers are registered; *report
 * (when not NULL) says what it found. */
FAIRGATE_C_EXPORT fairgate_code fairgate_recover(fairgate_scheduler* scheduler,
                                                 fairgate_recovery_report* report, char** error);
/* Stores the job (its cost must be < 0: a durable job takes no hint; its estimate is learned)
 * with `payload_size` bytes of `payload` (NULL only with a size of 0) and queues it; *sequence
 * (when not NULL) is its number in the store (0 in the one case Scheduler::SubmitDurable says).
 * Scheduler::SubmitDurable. */
FAIRGATE_C_EXPORT fairgate_code fairgate_submit_durable(fairgate_scheduler* scheduler,
                                                        const fairgate_job* job,
                                                        const void* payload, size_t payload_size,
                                                        uint64_t* sequence, char** error);
typedef struct fairgate_durable_submission {
  fairgate_job job;
  const void* payload;
  size_t payload_size;
} fairgate_durable_submission;
/* Stores `count` jobs in one commit, all or none (Scheduler::SubmitDurableBatch); `sequences`
 * (when not NULL) gets their numbers, `count` of them, in the order given (0 as there). */
FAIRGATE_C_EXPORT fairgate_code fairgate_submit_durable_batch(
    fairgate_scheduler* scheduler, const fairgate_durable_submission* jobs, size_t count,
    uint64_t* sequences, char** error);
/* A stored job (StoredJob), as fairgate_dead_jobs returns it: every string and the payload are
 * the caller's until fairgate_stored_jobs_free (each name ends at a NUL; the payload has one
 * after its `payload_size` bytes too). */
typedef struct fairgate_stored_job {
  uint64_t sequence;
  char* type;
  char* id;
  char* fairness_key;
  char* payload;
  size_t payload_size;
  double submitted_at; /* Unix seconds */
  uint32_t attempts;
  char* last_error;
} fairgate_stored_job;
/* A page of the dead jobs (Scheduler::DeadJobs): at most `limit` (>= 1) whose sequence is above
 * `after` (0 from the first), in stored order, into *jobs (an array the caller frees with
 * fairgate_stored_jobs_free, NULL when none) and *count. The next page is after the last one's
 * sequence. */
FAIRGATE_C_EXPORT fairgate_code fairgate_dead_jobs(fairgate_scheduler* scheduler, uint64_t after,
                                                   size_t limit, fairgate_stored_job** jobs,
                                                   size_t* count, char** error);
FAIRGATE_C_EXPORT void fairgate_stored_jobs_free(fairgate_stored_job* jobs, size_t count);
/* A dead job run again with its attempts counted from 0, or deleted (Scheduler::RetryDeadJob,
 * RemoveDeadJob): FAIRGATE_NOT_FOUND when no dead job has that number. */
FAIRGATE_C_EXPORT fairgate_code fairgate_retry_dead_job(fairgate_scheduler* scheduler,
                                                        uint64_t sequence, char** error);
FAIRGATE_C_EXPORT fairgate_code fairgate_remove_dead_job(fairgate_scheduler* scheduler,
                                                         uint64_t sequence, char** error);
/* Writes the learned estimates, keys' costs and schedules to the store now
 * (Scheduler::FlushState), as the scheduler does every state_flush_seconds and at shutdown. */
FAIRGATE_C_EXPORT fairgate_code fairgate_flush_state(fairgate_scheduler* scheduler, char** error);

/* --- What it is doing: the snapshot as JSON (fairgate/snapshot.h, ToJson) and the metrics in
 * Prometheus' text format (Scheduler::WriteMetrics). The caller frees either with fairgate_free. */
FAIRGATE_C_EXPORT char* fairgate_snapshot_json(fairgate_scheduler* scheduler);
/* The snapshot with the `heaviest_keys` keys of the highest accumulated cost listed in it
 * (Scheduler::Snapshot(heaviest_keys), O(keys)). */
FAIRGATE_C_EXPORT char* fairgate_snapshot_json_heaviest(fairgate_scheduler* scheduler,
                                                        size_t heaviest_keys);
FAIRGATE_C_EXPORT char* fairgate_metrics_text(fairgate_scheduler* scheduler);
/* With aging (options.aging), how long a pending job of `type` takes at most to reach the aging
 * ceiling (Scheduler::MaxWaitToCeiling), into *seconds; FAIRGATE_NOT_FOUND for an unknown type. */
FAIRGATE_C_EXPORT fairgate_code fairgate_max_wait_to_ceiling(fairgate_scheduler* scheduler,
                                                             const char* type, double* seconds,
                                                             char** error);

#ifdef __cplusplus
}
#endif

#endif /* FAIRGATE_C_H_ */
