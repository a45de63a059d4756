/* fairgate/c.h's per-job options and a job's context from C: fairgate_job.flags (refused without
 * a token, joining a running job, submitted again after its worker was lost, unknown bits
 * refused) and what a running job reads from its context (its worker, why it is done, a wait
 * that ends when it is, a callback called when it is cancelled), a permit's job context, RunSync
 * waiting and not (fairgate_run_async), and a job waiting on a cancellation's context for work
 * it handed to a thread of its own. Built as C99 with -Wall -Werror; run by CTest (label "runtime":
 * under ThreadSanitizer too) and under AddressSanitizer. Waits are for the events checked, bounded
 * (10 s), never for a time. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "c_check.h"
#include "fairgate/c.h"

static fairgate_job job_of(const char* type, const char* id, const char* key, uint32_t flags) {
  fairgate_job job;
  job.type = type;
  job.id = id;
  job.fairness_key = key;
  job.cost = -1;
  job.flags = flags;
  return job;
}

static void quiet(void* user, const char* warning) {
  (void)user;
  (void)warning;
}

static fairgate_scheduler* create(fairgate_options* options) {
  fairgate_scheduler* scheduler;
  options->warn = quiet;
  scheduler = fairgate_scheduler_create(options, NULL, NULL);
  CHECK(scheduler != NULL);
  return scheduler;
}

typedef struct Admission {
  int calls;
  fairgate_code code;
} Admission;

static void on_admitted(void* user, fairgate_permit* permit, fairgate_code code,
                        const char* message) {
  Admission* admission = (Admission*)user;
  (void)message;
  fairgate_permit_release(permit, FAIRGATE_OK, NULL);
  pthread_mutex_lock(&mutex);
  ++admission->calls;
  admission->code = code;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
}

/* One token a thousand seconds: the second call finds none. With the flag it is refused at once,
 * saying when to retry; without it, it waits. */
static void test_refused_without_a_token(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_permit* permit = NULL;
  fairgate_pending* pending = NULL;
  fairgate_job job = job_of("api", "list", "alice", 0);
  Admission refused, waiting;
  char* error = NULL;
  double seconds = 0;
  memset(&refused, 0, sizeof refused);
  memset(&waiting, 0, sizeof waiting);
  fairgate_options_init(&options);
  options.rate_per_second = 0.001;
  options.rate_burst = 1;
  scheduler = create(&options);
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  config.priority = 8;
  CHECK(fairgate_register_type(scheduler, "api", &config, NULL) == FAIRGATE_OK);
  CHECK(fairgate_try_acquire(scheduler, &job, &permit, NULL) == FAIRGATE_OK);
  fairgate_permit_release(permit, FAIRGATE_OK, NULL);

  job.flags = FAIRGATE_JOB_REFUSE_WITHOUT_TOKEN;
  CHECK(fairgate_acquire(scheduler, &job, on_admitted, &refused, NULL, &error) ==
        FAIRGATE_RESOURCE_EXHAUSTED);
  CHECK(fairgate_retry_after(error, &seconds) == 1 && seconds > 900);
  fairgate_free(error);
  error = NULL;

  job.flags = 8;
  CHECK(fairgate_acquire(scheduler, &job, on_admitted, &refused, NULL, &error) ==
        FAIRGATE_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "job.flags has bits no FAIRGATE_JOB_* names: 8") != NULL);
  fairgate_free(error);

  job.flags = 0;
  CHECK(fairgate_acquire(scheduler, &job, on_admitted, &waiting, &pending, NULL) == FAIRGATE_OK);
  CHECK(read_locked(&waiting.calls) == 0); /* queued for the next token */
  fairgate_pending_cancel(pending);
  CHECK(wait_for(&waiting.calls, 1) && waiting.code == FAIRGATE_CANCELLED);
  fairgate_pending_free(pending);
  fairgate_scheduler_destroy(scheduler);
  CHECK(refused.calls == 0);
}

/* A submitted job's body that runs until `gate` opens, and what it saw. */
typedef struct Body {
  int runs;
  int done;
  fairgate_code code;
  char workers[2][16];
  fairgate_code context_err; /* after a worker's loss woke its wait */
  int cancelled;             /* calls of its context's cancel callback */
} Body;

static int gate = 0;

static fairgate_code run_until_gate(void* user, const fairgate_context* ctx, char** error) {
  Body* body = (Body*)user;
  struct timespec deadline;
  (void)ctx;
  (void)error;
  pthread_mutex_lock(&mutex);
  ++body->runs;
  pthread_cond_broadcast(&changed);
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 10;
  while (!gate) {
    if (pthread_cond_timedwait(&changed, &mutex, &deadline) != 0) break;
  }
  pthread_mutex_unlock(&mutex);
  return FAIRGATE_OK;
}

static void on_done(void* user, fairgate_code code, const char* message) {
  Body* body = (Body*)user;
  (void)message;
  pthread_mutex_lock(&mutex);
  ++body->done;
  body->code = code;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
}

/* A scheduler with "mirror", a coalescing type (FAIRGATE_COALESCE_JOIN) of a tier of 4. */
static fairgate_scheduler* with_a_coalescing_type(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_options_init(&options);
  scheduler = create(&options);
  if (scheduler == NULL) return NULL;
  fairgate_type_config_init(&config);
  config.priority = 4;
  config.coalesce = FAIRGATE_COALESCE_JOIN;
  CHECK(fairgate_register_type(scheduler, "mirror", &config, NULL) == FAIRGATE_OK);
  return scheduler;
}

/* Registers "solo", a type of a tier of 4 whose cap is one job: a second one waits. */
static void register_solo(fairgate_scheduler* scheduler) {
  fairgate_type_config config;
  fairgate_type_config_init(&config);
  config.priority = 4;
  config.max_concurrency = 1;
  CHECK(fairgate_register_type(scheduler, "solo", &config, NULL) == FAIRGATE_OK);
}

/* Of a coalescing type, a Submit with FAIRGATE_JOB_JOIN_RUNNING joins the run under way; one
 * without it is queued to run after. */
static void test_join_running(void) {
  fairgate_scheduler* scheduler;
  fairgate_job job = job_of("mirror", "linux.git", "alice", 0);
  Body first, joined, later;
  memset(&first, 0, sizeof first);
  memset(&joined, 0, sizeof joined);
  memset(&later, 0, sizeof later);
  gate = 0;
  scheduler = with_a_coalescing_type();
  if (scheduler == NULL) return;
  CHECK(fairgate_submit(scheduler, &job, run_until_gate, on_done, &first, NULL) == FAIRGATE_OK);
  CHECK(wait_for(&first.runs, 1));
  job.flags = FAIRGATE_JOB_JOIN_RUNNING;
  CHECK(fairgate_submit(scheduler, &job, run_until_gate, on_done, &joined, NULL) == FAIRGATE_OK);
  job.flags = 0;
  CHECK(fairgate_submit(scheduler, &job, run_until_gate, on_done, &later, NULL) == FAIRGATE_OK);
  pthread_mutex_lock(&mutex);
  gate = 1;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  CHECK(wait_for(&first.done, 1) && wait_for(&joined.done, 1) && wait_for(&later.done, 1));
  fairgate_scheduler_destroy(scheduler);
  CHECK(first.runs == 1 && first.code == FAIRGATE_OK);
  CHECK(joined.runs == 0 && joined.code == FAIRGATE_OK); /* told the first run's status */
  CHECK(later.runs == 1 && later.code == FAIRGATE_OK);
}

/* A context's cancel callback: counts its calls. */
static void count_cancel(void* user) {
  Body* body = (Body*)user;
  pthread_mutex_lock(&mutex);
  ++body->cancelled;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
}

/* A body that records its worker, and on the first run waits on its context until the worker is
 * removed, and for the cancel callback it registered on it. */
static fairgate_code run_on_worker(void* user, const fairgate_context* ctx, char** error) {
  Body* body = (Body*)user;
  char* worker = fairgate_context_worker(ctx);
  fairgate_cancel_callback* callback = NULL;
  int run;
  (void)error;
  pthread_mutex_lock(&mutex);
  run = body->runs++;
  if (run < 2) snprintf(body->workers[run], sizeof body->workers[run], "%s", worker);
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  fairgate_free(worker);
  if (run == 0) {
    callback = fairgate_context_on_cancel(ctx, count_cancel, body);
    CHECK(callback != NULL);
    CHECK(fairgate_context_wait(ctx, 10) == 1); /* ends when the worker goes */
    CHECK(fairgate_context_done(ctx) == 1);
    body->context_err = fairgate_context_err(ctx, NULL);
    CHECK(wait_for(&body->cancelled, 1)); /* called by the removal, on its thread */
    CHECK(fairgate_cancel_callback_stop(callback) == 1);
  }
  return FAIRGATE_OK;
}

/* Two workers; the first run's worker is removed while it runs. With the flag the job runs again
 * on the other and its callback is told once, of that run; without it, of the loss. */
static void run_losing_a_worker(uint32_t flags, Body* body) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_job job = job_of("build", "a", "k", flags);
  const char* types[] = {"build"};
  char lost[16];
  fairgate_options_init(&options);
  scheduler = create(&options);
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  CHECK(fairgate_register_type(scheduler, "build", &config, NULL) == FAIRGATE_OK);
  CHECK(fairgate_add_worker(scheduler, "w1", 1, types, 1, NULL, 0, NULL) == FAIRGATE_OK);
  CHECK(fairgate_add_worker(scheduler, "w2", 1, types, 1, NULL, 0, NULL) == FAIRGATE_OK);
  CHECK(fairgate_submit(scheduler, &job, run_on_worker, on_done, body, NULL) == FAIRGATE_OK);
  CHECK(wait_for(&body->runs, 1));
  pthread_mutex_lock(&mutex);
  snprintf(lost, sizeof lost, "%s", body->workers[0]);
  pthread_mutex_unlock(&mutex);
  CHECK(fairgate_remove_worker(scheduler, lost, NULL) == FAIRGATE_OK);
  CHECK(wait_for(&body->done, 1));
  fairgate_scheduler_destroy(scheduler);
  CHECK(body->done == 1);
  CHECK(strcmp(lost, "w1") == 0 || strcmp(lost, "w2") == 0);
  CHECK(body->context_err == FAIRGATE_UNAVAILABLE);
  CHECK(body->cancelled == 1);
}

static void test_requeue_on_worker_loss(void) {
  Body requeued, lost;
  memset(&requeued, 0, sizeof requeued);
  memset(&lost, 0, sizeof lost);
  run_losing_a_worker(FAIRGATE_JOB_REQUEUE_ON_WORKER_LOSS, &requeued);
  CHECK(requeued.runs == 2 && requeued.code == FAIRGATE_OK);
  CHECK(requeued.workers[1][0] != '\0' && strcmp(requeued.workers[0], requeued.workers[1]) != 0);
  run_losing_a_worker(0, &lost);
  CHECK(lost.runs == 1 && lost.code == FAIRGATE_UNAVAILABLE);
}

/* A permit's job context: cancelled when the permit's worker is removed, calling what was
 * registered on it; never cancelled for a permit without a worker. */
static void test_permit_context(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_permit* permit = NULL;
  fairgate_cancel_callback* callback;
  fairgate_job job = job_of("render", "a", "k", 0);
  const char* types[] = {"render"};
  const fairgate_context* ctx;
  Body body;
  memset(&body, 0, sizeof body);
  CHECK(fairgate_permit_context(NULL) == NULL);
  fairgate_options_init(&options);
  scheduler = create(&options);
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  CHECK(fairgate_register_type(scheduler, "render", &config, NULL) == FAIRGATE_OK);
  CHECK(fairgate_try_acquire(scheduler, &job, &permit, NULL) == FAIRGATE_OK);
  ctx = fairgate_permit_context(permit);
  CHECK(ctx != NULL && fairgate_context_done(ctx) == 0);
  /* Never cancelled: the registration is a no-op one, stopped unrun. */
  callback = fairgate_context_on_cancel(ctx, count_cancel, &body);
  CHECK(fairgate_cancel_callback_stop(callback) == 0);
  fairgate_permit_release(permit, FAIRGATE_OK, NULL);
  CHECK(fairgate_add_worker(scheduler, "gpu-1", 1, types, 1, NULL, 0, NULL) == FAIRGATE_OK);
  permit = NULL;
  CHECK(fairgate_try_acquire(scheduler, &job, &permit, NULL) == FAIRGATE_OK);
  ctx = fairgate_permit_context(permit);
  callback = fairgate_context_on_cancel(ctx, count_cancel, &body);
  CHECK(callback != NULL && fairgate_context_done(ctx) == 0);
  CHECK(fairgate_remove_worker(scheduler, "gpu-1", NULL) == FAIRGATE_OK);
  CHECK(wait_for(&body.cancelled, 1));
  CHECK(fairgate_context_done(ctx) == 1);
  CHECK(fairgate_context_err(ctx, NULL) == FAIRGATE_UNAVAILABLE);
  CHECK(fairgate_cancel_callback_stop(callback) == 1);
  fairgate_permit_release(permit, FAIRGATE_OK, NULL); /* completes nothing */
  fairgate_scheduler_destroy(scheduler);
  CHECK(body.cancelled == 1);
}

/* A permit given back unused: the estimate and the key's cost are what they were before its
 * admission (a release would have taught the estimate its short hold), and the slot is free. */
static void test_release_unused(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_permit* permit = NULL;
  fairgate_job job = job_of("clone", "linux", "alice", 0);
  double estimate = 0, cost = 0, now = 0;
  fairgate_options_init(&options);
  scheduler = create(&options);
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  config.max_concurrency = 1;
  config.default_cost = 30;
  CHECK(fairgate_register_type(scheduler, "clone", &config, NULL) == FAIRGATE_OK);
  CHECK(fairgate_try_acquire(scheduler, &job, &permit, NULL) == FAIRGATE_OK);
  fairgate_permit_release(permit, FAIRGATE_OK, NULL);
  CHECK(fairgate_estimate(scheduler, "clone", "linux", &estimate) == 1 && estimate < 30);
  CHECK(fairgate_accumulated_cost(scheduler, "alice", &cost) == 1);
  permit = NULL;
  CHECK(fairgate_try_acquire(scheduler, &job, &permit, NULL) == FAIRGATE_OK);
  CHECK(fairgate_accumulated_cost(scheduler, "alice", &now) == 1 && now > cost);
  fairgate_permit_release_unused(permit, FAIRGATE_CANCELLED, "the client went away");
  fairgate_permit_release_unused(NULL, FAIRGATE_CANCELLED, NULL); /* does nothing */
  CHECK(fairgate_estimate(scheduler, "clone", "linux", &now) == 1 && now == estimate);
  CHECK(fairgate_accumulated_cost(scheduler, "alice", &now) == 1 && now == cost);
  permit = NULL;
  job = job_of("clone", "git", "bob", 0);
  CHECK(fairgate_try_acquire(scheduler, &job, &permit, NULL) == FAIRGATE_OK);
  fairgate_permit_release(permit, FAIRGATE_OK, NULL);
  fairgate_scheduler_destroy(scheduler);
}

/* Without workers, a context names none, holds no lease, and a wait with no time left returns
 * at once; NULL is answered as c.h says. */
static fairgate_code run_plain(void* user, const fairgate_context* ctx, char** error) {
  Body* body = (Body*)user;
  char* worker = fairgate_context_worker(ctx);
  (void)error;
  CHECK(worker != NULL && worker[0] == '\0');
  fairgate_free(worker);
  CHECK(fairgate_context_fencing_token(ctx) == 0);
  CHECK(fairgate_context_wait(ctx, 0) == 0);
  CHECK(fairgate_context_err(ctx, NULL) == FAIRGATE_OK);
  /* A cancel callback stopped before any cancellation never runs; the scheduler's end later
   * does not reach it. */
  CHECK(fairgate_cancel_callback_stop(fairgate_context_on_cancel(ctx, count_cancel, body)) == 0);
  CHECK(fairgate_context_on_cancel(ctx, NULL, body) == NULL);
  pthread_mutex_lock(&mutex);
  ++body->runs;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  return FAIRGATE_OK;
}

static void test_plain_context(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_permit* permit = NULL;
  fairgate_job job = job_of("gc", "a", "k", 0);
  Body body;
  char* worker = fairgate_context_worker(NULL);
  char* error = NULL;
  CHECK(worker != NULL && worker[0] == '\0');
  fairgate_free(worker);
  CHECK(fairgate_context_wait(NULL, -1) == 0 && fairgate_context_fencing_token(NULL) == 0);
  CHECK(fairgate_context_err(NULL, &error) == FAIRGATE_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "the context is NULL") != NULL);
  fairgate_free(error);
  CHECK(fairgate_permit_fencing_token(NULL) == 0);
  CHECK(fairgate_context_on_cancel(NULL, count_cancel, NULL) == NULL);
  CHECK(fairgate_cancel_callback_stop(NULL) == 0);
  memset(&body, 0, sizeof body);
  fairgate_options_init(&options);
  scheduler = create(&options);
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  CHECK(fairgate_register_type(scheduler, "gc", &config, NULL) == FAIRGATE_OK);
  CHECK(fairgate_submit(scheduler, &job, run_plain, NULL, &body, NULL) == FAIRGATE_OK);
  CHECK(wait_for(&body.runs, 1));
  CHECK(fairgate_try_acquire(scheduler, &job, &permit, NULL) == FAIRGATE_OK);
  CHECK(fairgate_permit_fencing_token(permit) == 0);
  fairgate_permit_release(permit, FAIRGATE_OK, NULL);
  fairgate_scheduler_destroy(scheduler);
  CHECK(body.cancelled == 0);
}

/* fairgate_run_sync on threads of the test's own. */
typedef struct Call {
  fairgate_scheduler* scheduler;
  fairgate_job job;
  Body body;
  const fairgate_cancel* cancel;
  double timeout_seconds;
  fairgate_code code;
  char message[128];
  int returned;
} Call;

static void* run_sync_thread(void* arg) {
  Call* call = (Call*)arg;
  char* error = NULL;
  const fairgate_code code =
      fairgate_run_sync(call->scheduler, &call->job, run_until_gate, &call->body, call->cancel,
                        call->timeout_seconds, &error);
  pthread_mutex_lock(&mutex);
  call->code = code;
  snprintf(call->message, sizeof call->message, "%s", error == NULL ? "" : error);
  ++call->returned;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  fairgate_free(error);
  return NULL;
}

static pthread_t caller;

static fairgate_code fail_job(void* user, const fairgate_context* ctx, char** error) {
  (void)user;
  CHECK(fairgate_context_done(ctx) == 0);
  CHECK(pthread_equal(pthread_self(), caller)); /* run on the calling thread */
  *error = malloc(32);
  strcpy(*error, "the repository is gone");
  return FAIRGATE_FAILED_PRECONDITION;
}

/* Whether `text` (fairgate_metrics_text, fairgate_snapshot_json) says `needle`, asked until it
 * does (at most 10 s). */
static int says(fairgate_scheduler* scheduler, char* (*text)(fairgate_scheduler*),
                const char* needle) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    char* said = text(scheduler);
    const int found = said != NULL && strstr(said, needle) != NULL;
    fairgate_free(said);
    if (found) return 1;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= 10) return 0;
    sched_yield();
  }
}

static void test_run_sync(void) {
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_job job = job_of("gc", "a", "k", 0);
  fairgate_permit* held = NULL;
  fairgate_cancel* cancel = fairgate_cancel_new();
  Call first, joiner, cancelled;
  pthread_t threads[3];
  char* error = NULL;
  memset(&first, 0, sizeof first);
  memset(&joiner, 0, sizeof joiner);
  memset(&cancelled, 0, sizeof cancelled);
  gate = 0;
  scheduler = with_a_coalescing_type();
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  config.priority = 4;
  CHECK(fairgate_register_type(scheduler, "gc", &config, NULL) == FAIRGATE_OK);
  register_solo(scheduler);

  /* Its function's answer, run on this thread. */
  caller = pthread_self();
  CHECK(fairgate_run_sync(scheduler, &job, fail_job, NULL, NULL, -1, &error) ==
        FAIRGATE_FAILED_PRECONDITION);
  CHECK(error != NULL && strcmp(error, "the repository is gone") == 0);
  fairgate_free(error);
  error = NULL;
  CHECK(fairgate_run_sync(scheduler, &job, NULL, NULL, NULL, -1, &error) ==
        FAIRGATE_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "function is NULL") != NULL);
  fairgate_free(error);

  /* A second call for a running job of a coalescing type joins it: told its end, never run. */
  first.scheduler = joiner.scheduler = cancelled.scheduler = scheduler;
  first.job = joiner.job = job_of("mirror", "linux.git", "alice", 0);
  joiner.job.fairness_key = "bob";
  first.timeout_seconds = joiner.timeout_seconds = cancelled.timeout_seconds = -1;
  CHECK(pthread_create(&threads[0], NULL, run_sync_thread, &first) == 0);
  CHECK(wait_for(&first.body.runs, 1));
  CHECK(pthread_create(&threads[1], NULL, run_sync_thread, &joiner) == 0);
  CHECK(says(scheduler, fairgate_metrics_text,
             "fairgate_jobs_joined_total{tier=\"4\",type=\"mirror\"} 1"));
  pthread_mutex_lock(&mutex);
  gate = 1;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  pthread_join(threads[0], NULL);
  pthread_join(threads[1], NULL);
  CHECK(first.code == FAIRGATE_OK && first.body.runs == 1);
  CHECK(joiner.code == FAIRGATE_OK && joiner.body.runs == 0);

  /* Waiting behind a full cap: ended by its cancel, or by its timeout. */
  job = job_of("solo", "x", "k", 0);
  CHECK(fairgate_try_acquire(scheduler, &job, &held, NULL) == FAIRGATE_OK);
  cancelled.job = job;
  cancelled.cancel = cancel;
  CHECK(pthread_create(&threads[2], NULL, run_sync_thread, &cancelled) == 0);
  CHECK(says(scheduler, fairgate_snapshot_json, "\"pending\":1,"));
  fairgate_cancel_fire(cancel);
  fairgate_cancel_fire(cancel); /* idempotent */
  pthread_join(threads[2], NULL);
  CHECK(cancelled.code == FAIRGATE_CANCELLED && cancelled.body.runs == 0);
  CHECK(fairgate_run_sync(scheduler, &job, run_until_gate, &cancelled.body, NULL, 0.01, NULL) ==
        FAIRGATE_DEADLINE_EXCEEDED);
  CHECK(cancelled.body.runs == 0);
  fairgate_permit_release(held, FAIRGATE_OK, NULL);
  fairgate_cancel_free(cancel);
  fairgate_scheduler_destroy(scheduler);
}

/* fairgate_run_async returns at once: its function runs on the pool and `done` is told once. Of a
 * coalescing type a second call joins the run under way and is told its status, its function
 * never run; a call waiting behind a full cap leaves when its cancellation fires
 * (FAIRGATE_CANCELLED), its function never run; a NULL function is refused, nothing called. */
static void test_run_async(void) {
  fairgate_scheduler* scheduler;
  fairgate_job job = job_of("mirror", "linux.git", "alice", 0);
  fairgate_permit* held = NULL;
  fairgate_cancel* cancel = fairgate_cancel_new();
  Body first, joiner, cancelled;
  char* error = NULL;
  memset(&first, 0, sizeof first);
  memset(&joiner, 0, sizeof joiner);
  memset(&cancelled, 0, sizeof cancelled);
  gate = 0;
  scheduler = with_a_coalescing_type();
  if (scheduler == NULL) return;
  register_solo(scheduler);

  CHECK(fairgate_run_async(scheduler, &job, NULL, on_done, &first, NULL, &error) ==
        FAIRGATE_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "function is NULL") != NULL);
  fairgate_free(error);

  CHECK(fairgate_run_async(scheduler, &job, run_until_gate, on_done, &first, NULL, NULL) ==
        FAIRGATE_OK);
  CHECK(wait_for(&first.runs, 1)); /* it runs while this thread goes on */
  job.fairness_key = "bob";
  CHECK(fairgate_run_async(scheduler, &job, run_until_gate, on_done, &joiner, NULL, NULL) ==
        FAIRGATE_OK);
  CHECK(says(scheduler, fairgate_metrics_text,
             "fairgate_jobs_joined_total{tier=\"4\",type=\"mirror\"} 1"));
  pthread_mutex_lock(&mutex);
  gate = 1;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  CHECK(wait_for(&first.done, 1) && wait_for(&joiner.done, 1));
  CHECK(first.runs == 1 && first.code == FAIRGATE_OK);
  CHECK(joiner.runs == 0 && joiner.code == FAIRGATE_OK); /* told the run's status */

  job = job_of("solo", "x", "k", 0);
  CHECK(fairgate_try_acquire(scheduler, &job, &held, NULL) == FAIRGATE_OK);
  CHECK(fairgate_run_async(scheduler, &job, run_until_gate, on_done, &cancelled, cancel, NULL) ==
        FAIRGATE_OK);
  CHECK(says(scheduler, fairgate_snapshot_json, "\"pending\":1,"));
  fairgate_cancel_fire(cancel);
  fairgate_cancel_free(cancel); /* the call keeps what it needs */
  CHECK(wait_for(&cancelled.done, 1));
  CHECK(cancelled.code == FAIRGATE_CANCELLED && cancelled.runs == 0);
  CHECK(says(scheduler, fairgate_snapshot_json, "\"pending\":0,"));
  fairgate_permit_release(held, FAIRGATE_OK, NULL);
  fairgate_scheduler_destroy(scheduler);
  CHECK(first.done == 1 && joiner.done == 1 && cancelled.done == 1); /* once each */
}

/* A job that hands its work to a thread of its own and waits for it on a fairgate_cancel's
 * context: the wait ends when that thread fires the cancellation, and, with fibers, it does not
 * hold the pool's only thread: a job submitted while it waits runs meanwhile. (The thread runtime,
 * the tsan build, runs a job on a thread of its own until it returns, so there the pool has a
 * thread a job.) */
typedef struct HandOff {
  fairgate_cancel* finished;
  Body* other;   /* the job that must run while this one waits */
  int waiting;   /* 1 once the job is about to wait */
  int returned;  /* 1 once it has returned */
  int other_ran; /* whether the other job had run when the thread fired */
  int waited;    /* fairgate_context_wait's answer */
  fairgate_code err;
} HandOff;

static void* hand_off_thread(void* arg) {
  HandOff* hand_off = (HandOff*)arg;
  hand_off->other_ran = wait_for(&hand_off->other->runs, 1);
  fairgate_cancel_fire(hand_off->finished);
  return NULL;
}

static fairgate_code run_hand_off(void* user, const fairgate_context* ctx, char** error) {
  HandOff* hand_off = (HandOff*)user;
  const fairgate_context* finished = fairgate_cancel_context(hand_off->finished);
  pthread_t thread;
  (void)ctx;
  (void)error;
  CHECK(fairgate_context_done(finished) == 0);
  CHECK(fairgate_context_err(finished, NULL) == FAIRGATE_OK);
  CHECK(pthread_create(&thread, NULL, hand_off_thread, hand_off) == 0);
  pthread_mutex_lock(&mutex);
  hand_off->waiting = 1;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  hand_off->waited = fairgate_context_wait(finished, 20);
  hand_off->err = fairgate_context_err(finished, NULL);
  pthread_join(thread, NULL); /* fairgate_cancel_fire returned: the cancellation may be freed */
  pthread_mutex_lock(&mutex);
  hand_off->returned = 1;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  return FAIRGATE_OK;
}

static fairgate_code count_run(void* user, const fairgate_context* ctx, char** error) {
  Body* body = (Body*)user;
  (void)ctx;
  (void)error;
  pthread_mutex_lock(&mutex);
  ++body->runs;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  return FAIRGATE_OK;
}

static void test_hand_off(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_job first = job_of("gc", "first", "k", 0);
  fairgate_job second = job_of("gc", "second", "k", 0);
  HandOff hand_off;
  Body other;
  CHECK(fairgate_cancel_context(NULL) == NULL);
  memset(&hand_off, 0, sizeof hand_off);
  memset(&other, 0, sizeof other);
  hand_off.finished = fairgate_cancel_new();
  hand_off.other = &other;
  fairgate_options_init(&options);
  options.max_concurrency = 2;
#if !defined(FAIRGATE_TEST_RUNTIME_THREADS)
  options.worker_threads = 1;
#endif
  scheduler = create(&options);
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  CHECK(fairgate_register_type(scheduler, "gc", &config, NULL) == FAIRGATE_OK);
  CHECK(fairgate_submit(scheduler, &first, run_hand_off, NULL, &hand_off, NULL) == FAIRGATE_OK);
  CHECK(wait_for(&hand_off.waiting, 1));
  CHECK(fairgate_submit(scheduler, &second, count_run, NULL, &other, NULL) == FAIRGATE_OK);
  CHECK(wait_for(&hand_off.returned, 1));
  CHECK(hand_off.other_ran == 1);
  CHECK(hand_off.waited == 1);
  CHECK(hand_off.err == FAIRGATE_CANCELLED);
  fairgate_scheduler_destroy(scheduler);
  fairgate_cancel_free(hand_off.finished);
}

int main(void) {
  test_refused_without_a_token();
  test_join_running();
  test_requeue_on_worker_loss();
  test_plain_context();
  test_permit_context();
  test_release_unused();
  test_run_sync();
  test_run_async();
  test_hand_off();
  if (failures > 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("fairgate_c_api_jobs_test: all checks passed\n");
  return 0;
}
