/* fairgate/c.h from C: every call's answer, the callbacks' promises (exactly once, on which
 * thread, with what), and shutdown. Built as C99 with -Wall -Werror; run by CTest (label
 * "runtime": under ThreadSanitizer too) and under AddressSanitizer. Waits are for the events
 * checked, bounded (10 s), never for a time. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "c_check.h"
#include "fairgate/c.h"

typedef struct Acquired {
  int calls;
  fairgate_permit* permit;
  fairgate_code code;
  char message[256];
  pthread_t thread;
} Acquired;

static void on_admitted(void* user, fairgate_permit* permit, fairgate_code code,
                        const char* message) {
  Acquired* acquired = (Acquired*)user;
  pthread_mutex_lock(&mutex);
  ++acquired->calls;
  acquired->permit = permit;
  acquired->code = code;
  snprintf(acquired->message, sizeof acquired->message, "%s", message);
  acquired->thread = pthread_self();
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
}

/* A submitted job: counts its runs; fails with its message when `fail` is set. */
typedef struct Submitted {
  int runs;
  int done;
  int fail;
  fairgate_code code;
  char message[256];
} Submitted;

static fairgate_code run_job(void* user, const fairgate_context* ctx, char** error) {
  Submitted* job = (Submitted*)user;
  CHECK(fairgate_context_done(ctx) == 0);
  pthread_mutex_lock(&mutex);
  ++job->runs;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  if (job->fail) {
    *error = malloc(32);
    strcpy(*error, "the repository is gone");
    return FAIRGATE_FAILED_PRECONDITION;
  }
  return FAIRGATE_OK;
}

static void on_done(void* user, fairgate_code code, const char* message) {
  Submitted* job = (Submitted*)user;
  pthread_mutex_lock(&mutex);
  ++job->done;
  job->code = code;
  snprintf(job->message, sizeof job->message, "%s", message);
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
}

static fairgate_job job_of(const char* type, const char* id, const char* key) {
  fairgate_job job;
  job.type = type;
  job.id = id;
  job.fairness_key = key;
  job.cost = -1;
  job.flags = 0;
  return job;
}

static void test_bad_options(void) {
  fairgate_options options;
  fairgate_code code = FAIRGATE_OK;
  char* error = NULL;
  fairgate_options_init(&options);
  options.max_concurrency = 0;
  CHECK(fairgate_scheduler_create(&options, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "max_concurrency") != NULL);
  fairgate_free(error);
  error = NULL;
  fairgate_options_init(&options);
  options.version = 99;
  CHECK(fairgate_scheduler_create(&options, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "fairgate_options_init") != NULL);
  fairgate_free(error);
}

static void test_scheduler(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_permit* first = NULL;
  fairgate_permit* second = NULL;
  fairgate_permit* third = NULL;
  fairgate_pending* pending = NULL;
  fairgate_job job;
  fairgate_code code = FAIRGATE_UNKNOWN;
  char* error = NULL;
  char* text;
  double cost = 0;
  Acquired cancelled, heavy, light;
  Submitted good, bad, late;
  const char* types[] = {"clone"};
  const char* tags[] = {"git"};

  memset(&cancelled, 0, sizeof cancelled);
  memset(&heavy, 0, sizeof heavy);
  memset(&light, 0, sizeof light);
  memset(&good, 0, sizeof good);
  memset(&bad, 0, sizeof bad);
  memset(&late, 0, sizeof late);
  bad.fail = 1;

  fairgate_options_init(&options);
  options.max_concurrency = 2;
  scheduler = fairgate_scheduler_create(&options, &code, &error);
  CHECK(scheduler != NULL);
  CHECK(code == FAIRGATE_OK);
  if (scheduler == NULL) return;

  /* Types: a clone tier of 2 slots; a second registration with another config is refused. */
  fairgate_type_config_init(&config);
  config.priority = 2;
  config.max_concurrency = 2;
  config.tags = tags;
  config.tag_count = 1;
  CHECK(fairgate_register_type(scheduler, "clone", &config, &error) == FAIRGATE_OK);
  config.priority = 3;
  CHECK(fairgate_register_type(scheduler, "clone", &config, &error) == FAIRGATE_ALREADY_EXISTS);
  CHECK(error != NULL && strstr(error, "clone") != NULL);
  fairgate_free(error);
  error = NULL;
  fairgate_type_config_init(&config);
  config.slots = 0;
  CHECK(fairgate_register_type(scheduler, "bad", &config, &error) == FAIRGATE_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "slots") != NULL);
  fairgate_free(error);
  error = NULL;
  fairgate_type_config_init(&config);
  config.shed_target_seconds = 2;
  config.shed_interval_seconds = 0;
  CHECK(fairgate_register_type(scheduler, "bad", &config, &error) == FAIRGATE_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "shedding.interval") != NULL);
  fairgate_free(error);
  error = NULL;
  fairgate_type_config_init(&config);
  config.coalesce = (fairgate_coalesce)7; /* no such value: refused, not loaded as one */
  CHECK(fairgate_register_type(scheduler, "bad", &config, &error) == FAIRGATE_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "coalesce") != NULL);
  fairgate_free(error);
  error = NULL;
  fairgate_type_config_init(&config);
  config.priority = 2;
  config.shed_target_seconds = 2; /* with the default interval, 1 s */
  CHECK(fairgate_register_type(scheduler, "build", &config, &error) == FAIRGATE_OK);

  /* try_acquire: two fit, the third would wait and is not queued. */
  job = job_of("clone", "linux", "alice");
  CHECK(fairgate_try_acquire(scheduler, &job, &first, &error) == FAIRGATE_OK);
  CHECK(fairgate_try_acquire(scheduler, &job, &second, &error) == FAIRGATE_OK);
  CHECK(fairgate_try_acquire(scheduler, &job, &third, &error) == FAIRGATE_RESOURCE_EXHAUSTED);
  CHECK(third == NULL);
  CHECK(error != NULL && strstr(error, "not admissible now") != NULL);
  fairgate_free(error);
  error = NULL;
  job = job_of("nope", "x", "alice");
  CHECK(fairgate_try_acquire(scheduler, &job, &third, &error) == FAIRGATE_NOT_FOUND);
  fairgate_free(error);
  error = NULL;

  /* acquire while both slots are held: pending until cancelled, then told so exactly once. */
  job = job_of("clone", "git", "alice");
  CHECK(fairgate_acquire(scheduler, &job, on_admitted, &cancelled, &pending, &error) ==
        FAIRGATE_OK);
  CHECK(read_locked(&cancelled.calls) == 0);
  fairgate_pending_cancel(pending);
  CHECK(wait_for(&cancelled.calls, 1));
  CHECK(cancelled.code == FAIRGATE_CANCELLED && cancelled.permit == NULL);
  fairgate_pending_cancel(pending); /* idempotent */
  fairgate_pending_free(pending);
  CHECK(read_locked(&cancelled.calls) == 1);

  /* Fairness: bob has been charged 100 and queues before carol; the slot a release frees goes
   * to carol, the lighter key, and the next to bob. */
  CHECK(fairgate_charge(scheduler, "bob", 100, &error) == FAIRGATE_OK);
  CHECK(fairgate_accumulated_cost(scheduler, "bob", &cost) == 1 && cost == 100);
  CHECK(fairgate_accumulated_cost(scheduler, "nobody", &cost) == 0);
  job = job_of("clone", "linux", "bob");
  CHECK(fairgate_acquire(scheduler, &job, on_admitted, &heavy, NULL, &error) == FAIRGATE_OK);
  job = job_of("clone", "linux", "carol");
  CHECK(fairgate_acquire(scheduler, &job, on_admitted, &light, NULL, &error) == FAIRGATE_OK);
  fairgate_permit_release(first, FAIRGATE_OK, NULL);
  /* Admitted inside the release, on this thread. */
  CHECK(read_locked(&light.calls) == 1 && light.code == FAIRGATE_OK && light.permit != NULL);
  CHECK(pthread_equal(light.thread, pthread_self()));
  CHECK(read_locked(&heavy.calls) == 0);
  text = fairgate_permit_worker(light.permit);
  CHECK(text != NULL && strcmp(text, "") == 0); /* no workers */
  fairgate_free(text);
  fairgate_permit_release(second, FAIRGATE_INTERNAL, "it failed");
  CHECK(wait_for(&heavy.calls, 1));
  CHECK(heavy.code == FAIRGATE_OK && heavy.permit != NULL);
  fairgate_permit_release(light.permit, FAIRGATE_OK, NULL);
  fairgate_permit_release(heavy.permit, FAIRGATE_OK, NULL);

  /* Keys: weights and limits, refused naming what is wrong. */
  CHECK(fairgate_set_key_weight(scheduler, "bob", 2, &error) == FAIRGATE_OK);
  CHECK(fairgate_set_key_weight(scheduler, "bob", -1, &error) == FAIRGATE_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "weight") != NULL);
  fairgate_free(error);
  error = NULL;
  {
    fairgate_key_limits limits;
    memset(&limits, 0, sizeof limits);
    limits.max_running = 1;
    CHECK(fairgate_set_key_limits(scheduler, "bob", &limits, &error) == FAIRGATE_OK);
    limits.min_running = 2;
    CHECK(fairgate_set_key_limits(scheduler, "bob", &limits, &error) == FAIRGATE_INVALID_ARGUMENT);
    fairgate_free(error);
    error = NULL;
  }

  /* Groups: a key joins a tenant; weights and limits refused naming what is wrong. */
  CHECK(fairgate_set_key_group(scheduler, "carol", "farm", &error) == FAIRGATE_OK);
  CHECK(fairgate_set_group_weight(scheduler, "farm", 2, &error) == FAIRGATE_OK);
  CHECK(fairgate_set_group_limits(scheduler, "farm", 1, 0, &error) == FAIRGATE_OK);
  CHECK(fairgate_set_group_limits(scheduler, "farm", 1, 2, &error) == FAIRGATE_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "min_running") != NULL);
  fairgate_free(error);
  error = NULL;
  CHECK(fairgate_set_group_weight(scheduler, "farm", 0, &error) == FAIRGATE_INVALID_ARGUMENT);
  fairgate_free(error);
  error = NULL;
  CHECK(fairgate_set_key_group(scheduler, "carol", "", &error) == FAIRGATE_OK);

  /* Pause: a paused type admits nothing; resumed, it does. */
  CHECK(fairgate_pause_type(scheduler, "clone", &error) == FAIRGATE_OK);
  job = job_of("clone", "linux", "dave");
  CHECK(fairgate_try_acquire(scheduler, &job, &first, &error) == FAIRGATE_RESOURCE_EXHAUSTED);
  fairgate_free(error);
  error = NULL;
  CHECK(fairgate_resume_type(scheduler, "clone", &error) == FAIRGATE_OK);
  CHECK(fairgate_try_acquire(scheduler, &job, &first, &error) == FAIRGATE_OK);
  fairgate_permit_release(first, FAIRGATE_OK, NULL);
  CHECK(fairgate_pause_key(scheduler, "dave", &error) == FAIRGATE_OK);
  CHECK(fairgate_resume_key(scheduler, "dave", &error) == FAIRGATE_OK);
  CHECK(fairgate_resume_type(scheduler, "nope", &error) == FAIRGATE_NOT_FOUND);
  fairgate_free(error);
  error = NULL;

  /* Submit: the body runs on a pool thread; done gets its status and message, once. */
  job = job_of("build", "a", "alice");
  CHECK(fairgate_submit(scheduler, &job, run_job, on_done, &good, &error) == FAIRGATE_OK);
  job = job_of("build", "b", "alice");
  CHECK(fairgate_submit(scheduler, &job, run_job, on_done, &bad, &error) == FAIRGATE_OK);
  CHECK(wait_for(&good.done, 1));
  CHECK(wait_for(&bad.done, 1));
  CHECK(good.code == FAIRGATE_OK && good.runs == 1);
  CHECK(bad.code == FAIRGATE_FAILED_PRECONDITION && bad.runs == 1);
  CHECK(strcmp(bad.message, "the repository is gone") == 0);
  CHECK(fairgate_submit(scheduler, &job, NULL, on_done, &bad, &error) == FAIRGATE_INVALID_ARGUMENT);
  fairgate_free(error);
  error = NULL;

  /* Workers: added with the types and tags it serves; an unknown one cannot be removed. */
  CHECK(fairgate_add_worker(scheduler, "w1", 2, types, 1, tags, 1, &error) == FAIRGATE_OK);
  CHECK(fairgate_remove_worker(scheduler, "w2", &error) == FAIRGATE_NOT_FOUND);
  fairgate_free(error);
  error = NULL;
  CHECK(fairgate_remove_worker(scheduler, "w1", &error) == FAIRGATE_OK);

  /* What it is doing. */
  text = fairgate_snapshot_json(scheduler);
  CHECK(text != NULL && strstr(text, "\"capacity\":2") != NULL);
  CHECK(text != NULL && strstr(text, "\"shedding\":{\"standing\":false,\"shed\":0}") != NULL);
  fairgate_free(text);
  text = fairgate_metrics_text(scheduler);
  CHECK(text != NULL && strstr(text, "fairgate_jobs_admitted_total") != NULL);
  fairgate_free(text);

  /* Shutdown: later calls are refused. */
  CHECK(fairgate_scheduler_shutdown(scheduler, -1, &error) == FAIRGATE_OK);
  job = job_of("build", "c", "alice");
  CHECK(fairgate_submit(scheduler, &job, run_job, on_done, &late, &error) == FAIRGATE_UNAVAILABLE);
  fairgate_free(error);
  fairgate_scheduler_destroy(scheduler);
  CHECK(late.done == 0 && late.runs == 0);
}

/* A pending acquire and a queued job at shutdown: each told Cancelled, exactly once, before
 * destroy returns. */
static void test_shutdown_tells_the_waiting(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_permit* held = NULL;
  fairgate_job job;
  char* error = NULL;
  Acquired waiting;
  Submitted queued;
  memset(&waiting, 0, sizeof waiting);
  memset(&queued, 0, sizeof queued);
  fairgate_options_init(&options);
  options.max_concurrency = 1;
  scheduler = fairgate_scheduler_create(&options, NULL, &error);
  CHECK(scheduler != NULL);
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  CHECK(fairgate_register_type(scheduler, "clone", &config, &error) == FAIRGATE_OK);
  job = job_of("clone", "linux", "alice");
  CHECK(fairgate_try_acquire(scheduler, &job, &held, &error) == FAIRGATE_OK);
  CHECK(fairgate_acquire(scheduler, &job, on_admitted, &waiting, NULL, &error) == FAIRGATE_OK);
  CHECK(fairgate_submit(scheduler, &job, run_job, on_done, &queued, &error) == FAIRGATE_OK);
  /* The held permit is released once shutdown has told the waiting (it waits for the permit). */
  CHECK(fairgate_scheduler_shutdown(scheduler, 0.05, &error) == FAIRGATE_DEADLINE_EXCEEDED);
  fairgate_free(error);
  CHECK(wait_for(&waiting.calls, 1));
  CHECK(wait_for(&queued.done, 1));
  CHECK(waiting.code == FAIRGATE_CANCELLED && waiting.permit == NULL);
  CHECK(queued.code == FAIRGATE_CANCELLED && queued.runs == 0);
  fairgate_permit_release(held, FAIRGATE_OK, NULL);
  fairgate_scheduler_destroy(scheduler);
  CHECK(waiting.calls == 1 && queued.done == 1);
}

/* Whether a call was refused as a bad argument with a message holding `names`; frees it. */
static int refused(fairgate_code code, char** error, const char* names) {
  int ok = code == FAIRGATE_INVALID_ARGUMENT && *error != NULL && strstr(*error, names) != NULL;
  if (!ok)
    fprintf(stderr, "expected a refusal naming '%s': code %d, '%s'\n", names, (int)code,
            *error != NULL ? *error : "(no message)");
  fairgate_free(*error);
  *error = NULL;
  return ok;
}

/* A NULL where a call needs a pointer is refused by name, and the refused call does nothing:
 * no type registered, no job queued (shutdown calls no callback of theirs). Calls with no code
 * to return do nothing for NULL. */
static void test_null_arguments_are_refused_by_name(void) {
  const char* one_null[] = {"git", NULL};
  double cost = -1;
  char* error = NULL;
  Acquired acquired;
  Submitted submitted;
  fairgate_key_limits limits;
  fairgate_options options;
  fairgate_type_config config;
  fairgate_job job;
  fairgate_permit* permit = NULL;
  fairgate_scheduler* scheduler;
  memset(&acquired, 0, sizeof acquired);
  memset(&submitted, 0, sizeof submitted);
  memset(&limits, 0, sizeof limits);
  fairgate_options_init(&options);
  fairgate_type_config_init(&config);
  job = job_of("clone", "linux", "alice");

  /* No scheduler. */
  CHECK(refused(fairgate_scheduler_shutdown(NULL, 1, &error), &error, "the scheduler is NULL"));
  CHECK(refused(fairgate_register_type(NULL, "clone", &config, &error), &error,
                "the scheduler is NULL"));
  CHECK(refused(fairgate_acquire(NULL, &job, on_admitted, &acquired, NULL, &error), &error,
                "the scheduler is NULL"));
  CHECK(
      refused(fairgate_try_acquire(NULL, &job, &permit, &error), &error, "the scheduler is NULL"));
  CHECK(refused(fairgate_submit(NULL, &job, run_job, on_done, &submitted, &error), &error,
                "the scheduler is NULL"));
  CHECK(refused(fairgate_charge(NULL, "alice", 1, &error), &error, "the scheduler is NULL"));
  CHECK(
      refused(fairgate_set_key_weight(NULL, "alice", 2, &error), &error, "the scheduler is NULL"));
  CHECK(refused(fairgate_set_key_limits(NULL, "alice", &limits, &error), &error,
                "the scheduler is NULL"));
  CHECK(refused(fairgate_set_key_group(NULL, "alice", "acme", &error), &error,
                "the scheduler is NULL"));
  CHECK(
      refused(fairgate_set_group_weight(NULL, "acme", 2, &error), &error, "the scheduler is NULL"));
  CHECK(refused(fairgate_set_group_limits(NULL, "acme", 2, 0, &error), &error,
                "the scheduler is NULL"));
  CHECK(refused(fairgate_add_worker(NULL, "w", 1, NULL, 0, NULL, 0, &error), &error,
                "the scheduler is NULL"));
  CHECK(refused(fairgate_remove_worker(NULL, "w", &error), &error, "the scheduler is NULL"));
  CHECK(refused(fairgate_pause_type(NULL, "clone", &error), &error, "the scheduler is NULL"));
  CHECK(refused(fairgate_resume_type(NULL, "clone", &error), &error, "the scheduler is NULL"));
  CHECK(refused(fairgate_pause_key(NULL, "alice", &error), &error, "the scheduler is NULL"));
  CHECK(refused(fairgate_resume_key(NULL, "alice", &error), &error, "the scheduler is NULL"));
  CHECK(fairgate_snapshot_json(NULL) == NULL);
  CHECK(fairgate_metrics_text(NULL) == NULL);
  CHECK(fairgate_accumulated_cost(NULL, "alice", &cost) == 0 && cost == -1);
  fairgate_scheduler_destroy(NULL);
  fairgate_options_init(NULL);
  fairgate_type_config_init(NULL);
  fairgate_pending_cancel(NULL);
  fairgate_pending_free(NULL);
  fairgate_permit_release(NULL, FAIRGATE_OK, NULL);
  CHECK(fairgate_context_done(NULL) == 0);

  options.max_concurrency = 1;
  scheduler = fairgate_scheduler_create(&options, NULL, &error);
  CHECK(scheduler != NULL);
  if (scheduler == NULL) return;

  /* A type's name and tags. */
  CHECK(refused(fairgate_register_type(scheduler, NULL, &config, &error), &error,
                "the type's name is NULL"));
  config.tag_count = 2;
  CHECK(refused(fairgate_register_type(scheduler, "clone", &config, &error), &error,
                "config.tags is NULL, with a count of 2"));
  config.tags = one_null;
  CHECK(refused(fairgate_register_type(scheduler, "clone", &config, &error), &error,
                "config.tags[1] is NULL"));
  config.tag_count = 1; /* "git" alone: the refused registrations registered nothing */
  CHECK(fairgate_register_type(scheduler, "clone", &config, &error) == FAIRGATE_OK);

  /* A job's names. */
  job = job_of("clone", "linux", "alice");
  job.type = NULL;
  CHECK(
      refused(fairgate_try_acquire(scheduler, &job, &permit, &error), &error, "job.type is NULL"));
  job = job_of("clone", NULL, "alice");
  CHECK(refused(fairgate_acquire(scheduler, &job, on_admitted, &acquired, NULL, &error), &error,
                "job.id is NULL"));
  job = job_of("clone", "linux", NULL);
  CHECK(refused(fairgate_submit(scheduler, &job, run_job, on_done, &submitted, &error), &error,
                "job.fairness_key is NULL"));
  CHECK(refused(fairgate_acquire(scheduler, NULL, on_admitted, &acquired, NULL, &error), &error,
                "the job is NULL"));
  job = job_of("clone", "linux", "alice");
  job.cost = NAN; /* not "< 0": not read as no cost */
  CHECK(refused(fairgate_try_acquire(scheduler, &job, &permit, &error), &error,
                "cost must be finite"));

  /* Keys, groups and workers. */
  CHECK(refused(fairgate_charge(scheduler, NULL, 1, &error), &error, "the fairness key is NULL"));
  CHECK(refused(fairgate_set_key_weight(scheduler, NULL, 2, &error), &error,
                "the fairness key is NULL"));
  CHECK(refused(fairgate_set_key_limits(scheduler, "alice", NULL, &error), &error,
                "the fairgate_key_limits is NULL"));
  CHECK(refused(fairgate_set_key_group(scheduler, "alice", NULL, &error), &error,
                "the group is NULL"));
  CHECK(
      refused(fairgate_set_group_weight(scheduler, NULL, 2, &error), &error, "the group is NULL"));
  CHECK(refused(fairgate_add_worker(scheduler, NULL, 1, NULL, 0, NULL, 0, &error), &error,
                "the worker's name is NULL"));
  CHECK(refused(fairgate_add_worker(scheduler, "w", 1, NULL, 1, NULL, 0, &error), &error,
                "types is NULL, with a count of 1"));
  CHECK(refused(fairgate_add_worker(scheduler, "w", 1, NULL, 0, one_null, 2, &error), &error,
                "tags[1] is NULL"));
  CHECK(refused(fairgate_pause_key(scheduler, NULL, &error), &error, "the fairness key is NULL"));
  CHECK(fairgate_accumulated_cost(scheduler, NULL, &cost) == 0 && cost == -1);

  /* The scheduler still works, and holds nothing of the refused calls. */
  job = job_of("clone", "linux", "alice");
  CHECK(fairgate_try_acquire(scheduler, &job, &permit, &error) == FAIRGATE_OK);
  fairgate_permit_release(permit, FAIRGATE_OK, NULL);
  CHECK(fairgate_scheduler_shutdown(scheduler, -1, &error) == FAIRGATE_OK);
  fairgate_scheduler_destroy(scheduler);
  CHECK(acquired.calls == 0 && submitted.runs == 0 && submitted.done == 0);
}

/* A refusal's message says when to retry, and whether the call was shed: a call of a type whose
 * one token is used (refused at once), a call while the type's queue stands (shed at its
 * arrival), and a queued job taken from that queue when a slot frees (its done callback). */
static void test_refusals_say_when_to_retry(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_permit* held = NULL;
  fairgate_pending* pending = NULL;
  fairgate_job job;
  char* error = NULL;
  char* snapshot = NULL;
  double seconds = -1;
  int standing = 0;
  int tries;
  fairgate_code second_code;
  Acquired refused;
  Submitted first, second;
  memset(&refused, 0, sizeof refused);
  memset(&first, 0, sizeof first);
  memset(&second, 0, sizeof second);
  CHECK(fairgate_retry_after(NULL, &seconds) == 0 && fairgate_was_shed(NULL) == 0);
  CHECK(fairgate_retry_after("no tail", &seconds) == 0);
  CHECK(fairgate_retry_after("x [fairgate: retry_after=2.5]", &seconds) == 1 && seconds == 2.5);
  CHECK(fairgate_was_shed("x [fairgate: retry_after=2.5]") == 0);
  CHECK(fairgate_was_shed("x [fairgate: shed; retry_after=1]") == 1);
  CHECK(fairgate_retry_after("x [fairgate: retry_after=soon]", &seconds) == 0);
  fairgate_options_init(&options);
  options.max_concurrency = 1;
  scheduler = fairgate_scheduler_create(&options, NULL, &error);
  CHECK(scheduler != NULL);
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  config.rate_per_second = 0.001; /* a token every 1,000 s */
  config.rate_burst = 1;
  config.refuse_without_token = 1;
  CHECK(fairgate_register_type(scheduler, "fetch", &config, &error) == FAIRGATE_OK);
  fairgate_type_config_init(&config);
  config.shed_target_seconds = 0.001;
  config.shed_interval_seconds = 0.001;
  CHECK(fairgate_register_type(scheduler, "build", &config, &error) == FAIRGATE_OK);

  job = job_of("fetch", "linux", "alice");
  CHECK(fairgate_try_acquire(scheduler, &job, &held, &error) == FAIRGATE_OK);
  job.id = "git";
  CHECK(fairgate_acquire(scheduler, &job, on_admitted, &refused, &pending, &error) ==
        FAIRGATE_RESOURCE_EXHAUSTED);
  CHECK(error != NULL && fairgate_retry_after(error, &seconds) == 1);
  CHECK(seconds > 0 && seconds <= 1000);
  CHECK(fairgate_was_shed(error) == 0);
  fairgate_free(error);
  error = NULL;

  /* The only slot held: two builds wait until the queue stands (the second may come when it
   * already does: it is shed at once then). */
  job = job_of("build", "a", "alice");
  CHECK(fairgate_submit(scheduler, &job, run_job, on_done, &first, &error) == FAIRGATE_OK);
  job.id = "b";
  second_code = fairgate_submit(scheduler, &job, run_job, on_done, &second, &error);
  CHECK(second_code == FAIRGATE_OK ||
        (second_code == FAIRGATE_RESOURCE_EXHAUSTED && fairgate_was_shed(error) == 1));
  fairgate_free(error);
  error = NULL;
  for (tries = 0; tries < 10000 && !standing; ++tries) {
    struct timespec pause = {0, 1000000};
    snapshot = fairgate_snapshot_json(scheduler);
    standing = snapshot != NULL && strstr(snapshot, "\"standing\":true") != NULL;
    fairgate_free(snapshot);
    if (!standing) nanosleep(&pause, NULL);
  }
  CHECK(standing);
  job.id = "c";
  CHECK(fairgate_acquire(scheduler, &job, on_admitted, &refused, &pending, &error) ==
        FAIRGATE_RESOURCE_EXHAUSTED);
  CHECK(error != NULL && fairgate_was_shed(error) == 1);
  CHECK(fairgate_retry_after(error, &seconds) == 1 && seconds == 0.001);
  fairgate_free(error);
  error = NULL;
  /* The slot freed: one build runs, the other is shed from the queue, told so. */
  fairgate_permit_release(held, FAIRGATE_OK, NULL);
  CHECK(wait_for(&first.done, 1));
  if (second_code == FAIRGATE_OK) {
    const Submitted* shed;
    CHECK(wait_for(&second.done, 1));
    CHECK(first.runs + second.runs == 1);
    shed = first.runs == 0 ? &first : &second;
    CHECK(shed->code == FAIRGATE_RESOURCE_EXHAUSTED);
    CHECK(fairgate_was_shed(shed->message) == 1);
  } else {
    CHECK(first.runs == 1 && first.code == FAIRGATE_OK);
  }
  CHECK(refused.calls == 0); /* refused at the call: no callback */
  fairgate_scheduler_destroy(scheduler);
}

/* A periodic job runs again and again, each run reported, until stopped; its refusals. */
static void test_periodic_jobs(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_periodic_options periodic_options;
  fairgate_scheduler* scheduler;
  fairgate_periodic* periodic = NULL;
  fairgate_job job = job_of("gc", "linux", "cron");
  Submitted runs;
  char* error = NULL;
  int ended;
  memset(&runs, 0, sizeof runs);
  fairgate_options_init(&options);
  scheduler = fairgate_scheduler_create(&options, NULL, NULL);
  CHECK(scheduler != NULL);
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  CHECK(fairgate_register_type(scheduler, "gc", &config, NULL) == FAIRGATE_OK);
  fairgate_periodic_options_init(&periodic_options);
  CHECK(periodic_options.version == FAIRGATE_PERIODIC_OPTIONS_VERSION);
  CHECK(periodic_options.jitter >= 0 && periodic_options.jitter < 1);
  CHECK(periodic_options.first_run_at_once == 0);

  /* Refused, with nothing scheduled. */
  CHECK(fairgate_submit_every(scheduler, &job, 0, NULL, run_job, on_done, &runs, &periodic,
                              &error) == FAIRGATE_INVALID_ARGUMENT);
  CHECK(error != NULL && strstr(error, "interval") != NULL);
  fairgate_free(error);
  error = NULL;
  CHECK(refused(
      fairgate_submit_every(scheduler, &job, 1, NULL, NULL, on_done, &runs, &periodic, &error),
      &error, "the job's function is NULL"));
  job.cost = 1;
  CHECK(refused(
      fairgate_submit_every(scheduler, &job, 1, NULL, run_job, on_done, &runs, &periodic, &error),
      &error, "job.cost must be < 0 for a periodic job"));
  job.cost = -1;
  job.flags = FAIRGATE_JOB_REFUSE_WITHOUT_TOKEN;
  CHECK(refused(
      fairgate_submit_every(scheduler, &job, 1, NULL, run_job, on_done, &runs, &periodic, &error),
      &error, "job.flags must be 0 for a periodic job"));
  job.flags = 0;
  periodic_options.version = 0;
  CHECK(refused(fairgate_submit_every(scheduler, &job, 1, &periodic_options, run_job, on_done,
                                      &runs, &periodic, &error),
                &error, "fairgate_periodic_options_init"));
  periodic_options.version = FAIRGATE_PERIODIC_OPTIONS_VERSION;
  periodic_options.jitter = 1;
  CHECK(refused(fairgate_submit_every(scheduler, &job, 1, &periodic_options, run_job, on_done,
                                      &runs, &periodic, &error),
                &error, "jitter"));
  job.type = "unknown";
  CHECK(fairgate_submit_every(scheduler, &job, 1, NULL, run_job, on_done, &runs, &periodic,
                              &error) == FAIRGATE_NOT_FOUND);
  fairgate_free(error);
  error = NULL;
  job.type = "gc";
  CHECK(periodic == NULL && read_locked(&runs.runs) == 0);

  /* Every 10 ms, the first at once: three runs, each reported, then stopped. */
  periodic_options.jitter = 0;
  periodic_options.first_run_at_once = 1;
  CHECK(fairgate_submit_every(scheduler, &job, 0.01, &periodic_options, run_job, on_done, &runs,
                              &periodic, NULL) == FAIRGATE_OK);
  CHECK(periodic != NULL);
  CHECK(wait_for(&runs.done, 3));
  CHECK(fairgate_periodic_runs(periodic) >= 3);
  CHECK(runs.code == FAIRGATE_OK);
  fairgate_periodic_stop(periodic);
  fairgate_periodic_stop(periodic); /* idempotent */
  fairgate_periodic_free(periodic);
  fairgate_periodic_stop(NULL);
  CHECK(fairgate_periodic_runs(NULL) == 0);
  fairgate_scheduler_destroy(scheduler);
  /* Every run that began was reported, and none after the scheduler was gone. */
  pthread_mutex_lock(&mutex);
  ended = runs.done;
  CHECK(runs.runs == ended);
  pthread_mutex_unlock(&mutex);
}

/* Drain runs what is pending (resuming what is paused) before it shuts down; one that cannot
 * finish in its time says so and cancels what is left. */
static void test_drain(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_permit* held = NULL;
  fairgate_job job = job_of("build", "a", "alice");
  Submitted first, second, stuck;
  char* error = NULL;
  memset(&first, 0, sizeof first);
  memset(&second, 0, sizeof second);
  memset(&stuck, 0, sizeof stuck);
  fairgate_options_init(&options);
  options.max_concurrency = 1;
  scheduler = fairgate_scheduler_create(&options, NULL, NULL);
  CHECK(scheduler != NULL);
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  CHECK(fairgate_register_type(scheduler, "build", &config, NULL) == FAIRGATE_OK);
  CHECK(fairgate_pause_type(scheduler, "build", NULL) == FAIRGATE_OK);
  CHECK(fairgate_submit(scheduler, &job, run_job, on_done, &first, NULL) == FAIRGATE_OK);
  job.id = "b";
  CHECK(fairgate_submit(scheduler, &job, run_job, on_done, &second, NULL) == FAIRGATE_OK);
  CHECK(read_locked(&first.runs) == 0 && read_locked(&second.runs) == 0);
  CHECK(fairgate_scheduler_drain(scheduler, 10, NULL) == FAIRGATE_OK);
  CHECK(first.runs == 1 && first.done == 1 && first.code == FAIRGATE_OK);
  CHECK(second.runs == 1 && second.done == 1 && second.code == FAIRGATE_OK);
  CHECK(fairgate_submit(scheduler, &job, run_job, on_done, &first, &error) == FAIRGATE_UNAVAILABLE);
  fairgate_free(error);
  error = NULL;
  fairgate_scheduler_destroy(scheduler);

  /* A held slot: the pending job cannot run before the drain's time is up. */
  scheduler = fairgate_scheduler_create(&options, NULL, NULL);
  CHECK(scheduler != NULL);
  if (scheduler == NULL) return;
  CHECK(fairgate_register_type(scheduler, "build", &config, NULL) == FAIRGATE_OK);
  CHECK(fairgate_try_acquire(scheduler, &job, &held, NULL) == FAIRGATE_OK);
  job.id = "c";
  CHECK(fairgate_submit(scheduler, &job, run_job, on_done, &stuck, NULL) == FAIRGATE_OK);
  CHECK(fairgate_scheduler_drain(scheduler, 0.05, &error) == FAIRGATE_DEADLINE_EXCEEDED);
  fairgate_free(error);
  error = NULL;
  CHECK(wait_for(&stuck.done, 1));
  CHECK(stuck.runs == 0 && stuck.code == FAIRGATE_CANCELLED);
  fairgate_permit_release(held, FAIRGATE_OK, NULL);
  fairgate_scheduler_destroy(scheduler);
  CHECK(fairgate_scheduler_drain(NULL, 0, &error) == FAIRGATE_INVALID_ARGUMENT);
  fairgate_free(error);
}

/* What the scheduler learned and charged: a (type, id)'s estimate, a group's cost; a changed
 * worker. */
static void test_estimates_groups_and_workers(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_job job = job_of("build", "linux", "alice");
  Submitted built;
  double value = -1;
  char* error = NULL;
  const char* types[] = {"build"};
  memset(&built, 0, sizeof built);
  fairgate_options_init(&options);
  scheduler = fairgate_scheduler_create(&options, NULL, NULL);
  CHECK(scheduler != NULL);
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  CHECK(fairgate_register_type(scheduler, "build", &config, NULL) == FAIRGATE_OK);
  CHECK(fairgate_estimate(scheduler, "build", "linux", &value) == 0 && value == -1);
  CHECK(fairgate_submit(scheduler, &job, run_job, on_done, &built, NULL) == FAIRGATE_OK);
  CHECK(wait_for(&built.done, 1));
  CHECK(fairgate_estimate(scheduler, "build", "linux", &value) == 1 && value >= 0);
  CHECK(fairgate_estimate(scheduler, "build", "git", &value) == 0);
  CHECK(fairgate_estimate(NULL, "build", "linux", &value) == 0);
  CHECK(fairgate_estimate(scheduler, NULL, "linux", &value) == 0);

  CHECK(fairgate_group_accumulated_cost(scheduler, "acme", &value) == 0);
  CHECK(fairgate_set_key_group(scheduler, "bob", "acme", NULL) == FAIRGATE_OK);
  CHECK(fairgate_charge(scheduler, "bob", 2.5, NULL) == FAIRGATE_OK);
  value = -1;
  CHECK(fairgate_group_accumulated_cost(scheduler, "acme", &value) == 1 && value > 0);
  CHECK(fairgate_group_accumulated_cost(scheduler, "other", &value) == 0);
  CHECK(fairgate_group_accumulated_cost(NULL, "acme", &value) == 0);

  CHECK(fairgate_add_worker(scheduler, "w1", 1, types, 1, NULL, 0, NULL) == FAIRGATE_OK);
  CHECK(fairgate_update_worker(scheduler, "w1", 2, types, 1, NULL, 0, NULL) == FAIRGATE_OK);
  CHECK(fairgate_update_worker(scheduler, "w2", 2, types, 1, NULL, 0, &error) ==
        FAIRGATE_NOT_FOUND);
  fairgate_free(error);
  error = NULL;
  CHECK(refused(fairgate_update_worker(scheduler, NULL, 2, types, 1, NULL, 0, &error), &error,
                "the worker's name is NULL"));
  fairgate_scheduler_destroy(scheduler);
}

int main(void) {
  test_bad_options();
  test_scheduler();
  test_shutdown_tells_the_waiting();
  test_refusals_say_when_to_retry();
  test_null_arguments_are_refused_by_name();
  test_periodic_jobs();
  test_drain();
  test_estimates_groups_and_workers();
  if (failures > 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("fairgate/c.h: every check passed\n");
  return 0;
}
