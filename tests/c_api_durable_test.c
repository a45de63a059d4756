/* fairgate/c.h's durable jobs from C: stores opened and refused, jobs stored and run with their
 * payloads' every byte, retried until dead, listed a page at a time, retried and removed, and run
 * again by the next process after one was cut short; on a SQLite file and, when the PostgreSQL
 * script is given (argv[1]: scripts/pg_temp.sh), on a throwaway PostgreSQL server as a replica
 * with the fleet's options. Built as C99 with -Wall -Werror; run by CTest (label "runtime": under
 * ThreadSanitizer too) and under AddressSanitizer. Waits are for the events checked, bounded
 * (10 s), never for a time. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "c_check.h"
#include "fairgate/c.h"

/* A call that must fail with `code` and a message containing `part`; frees the message. */
#define CHECK_REFUSED(call, code, part)                                    \
  do {                                                                     \
    char* refused_error = NULL;                                            \
    fairgate_code refused_code = (call);                                   \
    CHECK(refused_code == (code));                                         \
    CHECK(refused_error != NULL && strstr(refused_error, (part)) != NULL); \
    if (refused_error != NULL && strstr(refused_error, (part)) == NULL)    \
      fprintf(stderr, "  the message was: %s\n", refused_error);           \
    fairgate_free(refused_error);                                          \
  } while (0)

#define MAX_SEEN 32

/* The attempts a recording handler saw: each one's job, copied. */
typedef struct Seen {
  int runs;
  int fail; /* 1: every attempt fails */
  uint64_t sequence[MAX_SEEN];
  char id[MAX_SEEN][32];
  char key[MAX_SEEN][32];
  char payload[MAX_SEEN][32];
  size_t payload_size[MAX_SEEN];
  uint32_t attempt[MAX_SEEN];
  uint64_t lease_token[MAX_SEEN];
} Seen;

static fairgate_code record(void* user, const fairgate_durable_job* job,
                            const fairgate_context* ctx, char** error) {
  Seen* seen = (Seen*)user;
  int fail;
  CHECK(fairgate_context_done(ctx) == 0);
  pthread_mutex_lock(&mutex);
  if (seen->runs < MAX_SEEN) {
    const int i = seen->runs;
    seen->sequence[i] = job->sequence;
    snprintf(seen->id[i], sizeof seen->id[i], "%s", job->id);
    snprintf(seen->key[i], sizeof seen->key[i], "%s", job->fairness_key);
    seen->payload_size[i] = job->payload_size;
    if (job->payload_size <= sizeof seen->payload[i])
      memcpy(seen->payload[i], job->payload, job->payload_size);
    seen->attempt[i] = job->attempt;
    seen->lease_token[i] = job->lease_token;
  }
  ++seen->runs;
  fail = seen->fail;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  if (fail) {
    *error = malloc(32);
    strcpy(*error, "the mirror is gone");
    return FAIRGATE_FAILED_PRECONDITION;
  }
  return FAIRGATE_OK;
}

/* A handler that says it started, then runs until its context is done (a shutdown). */
static int holding = 0;
static fairgate_code hold(void* user, const fairgate_durable_job* job, const fairgate_context* ctx,
                          char** error) {
  int polls;
  (void)user;
  (void)job;
  (void)error;
  pthread_mutex_lock(&mutex);
  ++holding;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  for (polls = 0; polls < 10000 && !fairgate_context_done(ctx); ++polls) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  return FAIRGATE_CANCELLED;
}

static fairgate_job durable_job(const char* type, const char* id, const char* key) {
  fairgate_job job;
  job.type = type;
  job.id = id;
  job.fairness_key = key;
  job.cost = -1; /* a durable job takes no cost hint, nor flags */
  job.flags = 0;
  return job;
}

/* Polls the first page of dead jobs until it holds `count` (a death is written after its
 * handler returned), at most 10 s; that page, which the caller frees. */
static fairgate_stored_job* dead_jobs_once(fairgate_scheduler* scheduler, size_t count,
                                           size_t* found) {
  int polls;
  fairgate_stored_job* jobs = NULL;
  *found = 0;
  for (polls = 0; polls < 10000; ++polls) {
    struct timespec pause = {0, 1000000};
    char* error = NULL;
    CHECK(fairgate_dead_jobs(scheduler, 0, 100, &jobs, found, &error) == FAIRGATE_OK);
    fairgate_free(error);
    if (*found == count) return jobs;
    fairgate_stored_jobs_free(jobs, *found);
    jobs = NULL;
    nanosleep(&pause, NULL);
  }
  return NULL;
}

/* A scheduler of two slots on `store` with the types "repack" (recorded by `seen`, two attempts
 * at most, no backoff) and "gc" (held by `hold` unless `gc_seen` is given, then recorded). */
static fairgate_scheduler* durable_scheduler(fairgate_store* store, Seen* seen, Seen* gc_seen) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_retry_policy retry;
  fairgate_scheduler* scheduler;
  char* error = NULL;
  fairgate_options_init(&options);
  options.max_concurrency = 2;
  options.store = store;
  scheduler = fairgate_scheduler_create(&options, NULL, &error);
  CHECK(scheduler != NULL);
  if (scheduler == NULL) {
    fprintf(stderr, "  %s\n", error);
    fairgate_free(error);
    return NULL;
  }
  fairgate_type_config_init(&config);
  CHECK(fairgate_register_type(scheduler, "repack", &config, NULL) == FAIRGATE_OK);
  CHECK(fairgate_register_type(scheduler, "gc", &config, NULL) == FAIRGATE_OK);
  fairgate_retry_policy_init(&retry);
  retry.max_attempts = 2;
  retry.initial_backoff_seconds = 0;
  CHECK(fairgate_register_durable(scheduler, "repack", record, seen, &retry, NULL) == FAIRGATE_OK);
  CHECK(fairgate_register_durable(scheduler, "gc", gc_seen != NULL ? record : hold, gc_seen, NULL,
                                  NULL) == FAIRGATE_OK);
  return scheduler;
}

static void test_stores_and_options_refused_by_name(const char* dir) {
  fairgate_sqlite_options sqlite;
  fairgate_postgres_options postgres;
  fairgate_options options;
  fairgate_code code = FAIRGATE_OK;
  fairgate_scheduler* scheduler;
  fairgate_store* store;
  char path[512];
  char* error = NULL;
  const char* groups[] = {"repository"};
  const char* capped[] = {"repack"};
  const int caps[] = {1};
  const char* twice[] = {"repack", "repack"};
  const int two_caps[] = {1, 1};

  CHECK(fairgate_sqlite_store_open(NULL, NULL, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && strstr(error, "the path is NULL") != NULL);
  fairgate_free(error);
  error = NULL;
  CHECK(fairgate_sqlite_store_open("", NULL, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT);
  fairgate_free(error);
  error = NULL;
  CHECK(fairgate_sqlite_store_open(dir, NULL, &code, &error) == NULL); /* a directory */
  CHECK(code == FAIRGATE_FAILED_PRECONDITION);
  fairgate_free(error);
  error = NULL;
  snprintf(path, sizeof path, "%s/refused.db", dir);
  fairgate_sqlite_options_init(&sqlite);
  CHECK(sqlite.version == FAIRGATE_SQLITE_OPTIONS_VERSION);
  CHECK(sqlite.synchronous == FAIRGATE_SQLITE_SYNC_FULL && sqlite.max_job_bytes > 0);
  sqlite.version = 0;
  CHECK(fairgate_sqlite_store_open(path, &sqlite, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && strstr(error, "fairgate_sqlite_options_init"));
  fairgate_free(error);
  error = NULL;
  fairgate_sqlite_options_init(&sqlite);
  sqlite.max_job_bytes = 0;
  CHECK(fairgate_sqlite_store_open(path, &sqlite, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && strstr(error, "max_job_bytes") != NULL);
  fairgate_free(error);
  error = NULL;
  sqlite.max_job_bytes = 1000;
  sqlite.synchronous = 7;
  CHECK(fairgate_sqlite_store_open(path, &sqlite, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && strstr(error, "synchronous") != NULL);
  fairgate_free(error);
  error = NULL;
  CHECK(fairgate_postgres_store_open(NULL, NULL, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && strstr(error, "connection string") != NULL);
  fairgate_free(error);
  error = NULL;
  fairgate_postgres_options_init(&postgres);
  CHECK(postgres.replica == NULL && postgres.connections >= 1);
  CHECK(fairgate_postgres_store_open("host=", &postgres, &code, &error) == NULL ||
        code != FAIRGATE_OK);
  fairgate_free(error);
  error = NULL;
  CHECK(fairgate_postgres_store_open("no such = = thing", &postgres, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT);
  fairgate_free(error);
  error = NULL;
  fairgate_store_free(NULL); /* nothing */

  /* The options: version 1 still read, a later one refused; the fleet's lists checked. */
  fairgate_options_init(&options);
  CHECK(options.version == FAIRGATE_OPTIONS_VERSION && options.store == NULL);
  CHECK(options.state_flush_seconds > 0 && options.lease_ttl_seconds > 0);
  options.version = 1;
  scheduler = fairgate_scheduler_create(&options, &code, NULL);
  CHECK(scheduler != NULL && code == FAIRGATE_OK);
  fairgate_scheduler_destroy(scheduler);
  options.version = FAIRGATE_OPTIONS_VERSION + 1;
  CHECK(fairgate_scheduler_create(&options, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && strstr(error, "options.version") != NULL);
  fairgate_free(error);
  error = NULL;
  fairgate_options_init(&options);
  options.fleet_conflict_group_count = 1;
  CHECK(fairgate_scheduler_create(&options, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && strstr(error, "fleet_conflict_groups is NULL"));
  fairgate_free(error);
  error = NULL;
  options.fleet_conflict_groups = groups; /* a fleet's lists need a shared store */
  CHECK(fairgate_scheduler_create(&options, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && strstr(error, "shared store") != NULL);
  fairgate_free(error);
  error = NULL;
  fairgate_options_init(&options);
  options.fleet_capped_types = capped;
  options.fleet_type_cap_count = 1;
  CHECK(fairgate_scheduler_create(&options, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && strstr(error, "fleet_type_caps is NULL"));
  fairgate_free(error);
  error = NULL;
  options.fleet_type_caps = caps;
  CHECK(fairgate_scheduler_create(&options, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && strstr(error, "shared store") != NULL);
  fairgate_free(error);
  error = NULL;
  options.fleet_capped_types = twice;
  options.fleet_type_caps = two_caps;
  options.fleet_type_cap_count = 2;
  CHECK(fairgate_scheduler_create(&options, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && strstr(error, "\"repack\" twice") != NULL);
  fairgate_free(error);
  error = NULL;
  fairgate_options_init(&options);
  options.state_flush_seconds = 0;
  CHECK(fairgate_scheduler_create(&options, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && strstr(error, "state_flush_interval") != NULL);
  fairgate_free(error);
  error = NULL;

  /* Without a store the durable calls are refused. */
  fairgate_options_init(&options);
  scheduler = fairgate_scheduler_create(&options, NULL, NULL);
  CHECK(scheduler != NULL);
  if (scheduler != NULL) {
    fairgate_job job = durable_job("repack", "linux", "alice");
    fairgate_stored_job* jobs = NULL;
    size_t count = 0;
    CHECK_REFUSED(fairgate_submit_durable(scheduler, &job, "x", 1, NULL, &refused_error),
                  FAIRGATE_FAILED_PRECONDITION, "store");
    CHECK_REFUSED(fairgate_recover(scheduler, NULL, &refused_error), FAIRGATE_FAILED_PRECONDITION,
                  "store");
    CHECK_REFUSED(fairgate_dead_jobs(scheduler, 0, 10, &jobs, &count, &refused_error),
                  FAIRGATE_FAILED_PRECONDITION, "store");
    CHECK(jobs == NULL && count == 0);
    CHECK_REFUSED(fairgate_flush_state(scheduler, &refused_error), FAIRGATE_FAILED_PRECONDITION,
                  "store");
    fairgate_scheduler_destroy(scheduler);
  }
  /* A store handle freed at once: the scheduler keeps the store open. */
  snprintf(path, sizeof path, "%s/kept.db", dir);
  store = fairgate_sqlite_store_open(path, NULL, &code, NULL);
  CHECK(store != NULL && code == FAIRGATE_OK);
  fairgate_options_init(&options);
  options.store = store;
  scheduler = fairgate_scheduler_create(&options, NULL, NULL);
  fairgate_store_free(store);
  CHECK(scheduler != NULL);
  CHECK(fairgate_recover(scheduler, NULL, NULL) == FAIRGATE_OK);
  CHECK(fairgate_flush_state(scheduler, NULL) == FAIRGATE_OK);
  fairgate_scheduler_destroy(scheduler);
}

/* The calls on one scheduler: jobs stored and run, refusals, death, the dead jobs' pages, a
 * retry and a removal. `shared`: the store is PostgreSQL's (a lease token on every attempt). */
static void check_durable_calls(fairgate_scheduler* scheduler, Seen* seen, int shared) {
  fairgate_job job = durable_job("repack", "linux", "alice");
  fairgate_durable_submission batch[2];
  fairgate_recovery_report report;
  fairgate_retry_policy retry;
  fairgate_stored_job* jobs = NULL;
  uint64_t sequence = 0, sequences[2] = {0, 0}, broken = 0, doomed = 0;
  size_t count = 99;
  const char bytes[] = {'p', 0, 'k', (char)0xff}; /* a NUL and a byte that is no character */
  int i, runs;

  /* Bad handlers and policies, by name. */
  CHECK_REFUSED(fairgate_register_durable(scheduler, "repack", NULL, NULL, NULL, &refused_error),
                FAIRGATE_INVALID_ARGUMENT, "the handler is NULL");
  fairgate_retry_policy_init(&retry);
  retry.version = 9;
  CHECK_REFUSED(
      fairgate_register_durable(scheduler, "repack", record, seen, &retry, &refused_error),
      FAIRGATE_INVALID_ARGUMENT, "fairgate_retry_policy_init");
  fairgate_retry_policy_init(&retry);
  retry.max_attempts = 0;
  CHECK_REFUSED(fairgate_register_durable(scheduler, "fetch", record, seen, &retry, &refused_error),
                FAIRGATE_INVALID_ARGUMENT, "max_attempts");
  CHECK_REFUSED(fairgate_register_durable(scheduler, "repack", record, seen, NULL, &refused_error),
                FAIRGATE_ALREADY_EXISTS, "repack");
  CHECK_REFUSED(fairgate_submit_durable(scheduler, &job, "x", 1, NULL, &refused_error),
                FAIRGATE_FAILED_PRECONDITION, "Recover");

  memset(&report, 0xff, sizeof report);
  CHECK(fairgate_recover(scheduler, &report, NULL) == FAIRGATE_OK);
  CHECK(report.queued == 0 && report.deferred == 0 && report.without_handler == 0 &&
        report.dead == 0);

  /* Refused before anything is stored. */
  job.cost = 0;
  CHECK_REFUSED(fairgate_submit_durable(scheduler, &job, "x", 1, NULL, &refused_error),
                FAIRGATE_INVALID_ARGUMENT, "job.cost must be < 0");
  job.cost = -1;
  job.flags = FAIRGATE_JOB_REFUSE_WITHOUT_TOKEN;
  CHECK_REFUSED(fairgate_submit_durable(scheduler, &job, "x", 1, NULL, &refused_error),
                FAIRGATE_INVALID_ARGUMENT, "job.flags must be 0 for a durable job");
  job.flags = 16;
  CHECK_REFUSED(fairgate_submit_durable(scheduler, &job, "x", 1, NULL, &refused_error),
                FAIRGATE_INVALID_ARGUMENT, "job.flags has bits no FAIRGATE_JOB_* names: 16");
  job.flags = 0;
  CHECK_REFUSED(fairgate_submit_durable(scheduler, &job, NULL, 3, NULL, &refused_error),
                FAIRGATE_INVALID_ARGUMENT, "the payload is NULL, with a size of 3");
  job.type = "unknown";
  CHECK_REFUSED(fairgate_submit_durable(scheduler, &job, "x", 1, NULL, &refused_error),
                FAIRGATE_NOT_FOUND, "unknown");
  job.type = "repack";
  job.id = "";
  CHECK_REFUSED(fairgate_submit_durable(scheduler, &job, "x", 1, NULL, &refused_error),
                FAIRGATE_INVALID_ARGUMENT, "id");
  job.id = "linux";
  CHECK(read_locked(&seen->runs) == 0);

  /* Stored and run with the payload's every byte. */
  CHECK(fairgate_submit_durable(scheduler, &job, bytes, sizeof bytes, &sequence, NULL) ==
        FAIRGATE_OK);
  CHECK(sequence > 0);
  CHECK(wait_for(&seen->runs, 1));
  pthread_mutex_lock(&mutex);
  CHECK(seen->sequence[0] == sequence && strcmp(seen->id[0], "linux") == 0);
  CHECK(strcmp(seen->key[0], "alice") == 0 && seen->attempt[0] == 1);
  CHECK(seen->payload_size[0] == sizeof bytes &&
        memcmp(seen->payload[0], bytes, sizeof bytes) == 0);
  CHECK(shared ? seen->lease_token[0] > 0 : seen->lease_token[0] == 0);
  pthread_mutex_unlock(&mutex);

  /* A batch: all or none, numbered in the order given. */
  batch[0].job = durable_job("repack", "git", "bob");
  batch[0].payload = "one";
  batch[0].payload_size = 3;
  batch[1].job = durable_job("repack", "go", "carol");
  batch[1].payload = NULL;
  batch[1].payload_size = 0;
  batch[1].job.cost = 2;
  CHECK_REFUSED(fairgate_submit_durable_batch(scheduler, batch, 2, sequences, &refused_error),
                FAIRGATE_INVALID_ARGUMENT, "jobs[1].job.cost");
  batch[1].job.cost = -1;
  batch[1].job.id = NULL;
  CHECK_REFUSED(fairgate_submit_durable_batch(scheduler, batch, 2, sequences, &refused_error),
                FAIRGATE_INVALID_ARGUMENT, "jobs[1].job.id is NULL");
  batch[1].job.id = "go";
  CHECK_REFUSED(fairgate_submit_durable_batch(scheduler, NULL, 2, sequences, &refused_error),
                FAIRGATE_INVALID_ARGUMENT, "the jobs are NULL");
  CHECK(sequences[0] == 0 && sequences[1] == 0);
  CHECK(fairgate_submit_durable_batch(scheduler, batch, 0, NULL, NULL) == FAIRGATE_OK);
  CHECK(fairgate_submit_durable_batch(scheduler, batch, 2, sequences, NULL) == FAIRGATE_OK);
  CHECK(sequences[0] > sequence && sequences[1] > sequences[0]);
  CHECK(wait_for(&seen->runs, 3));
  pthread_mutex_lock(&mutex);
  for (i = 1; i < 3; ++i) {
    const int first = seen->sequence[i] == sequences[0];
    CHECK(seen->sequence[i] == sequences[first ? 0 : 1]);
    CHECK(strcmp(seen->id[i], first ? "git" : "go") == 0);
    CHECK(seen->payload_size[i] == (first ? 3u : 0u));
  }
  CHECK(seen->sequence[1] != seen->sequence[2]);
  pthread_mutex_unlock(&mutex);

  /* Failing: two attempts, then dead with its last error, listed a page at a time. */
  pthread_mutex_lock(&mutex);
  seen->fail = 1;
  pthread_mutex_unlock(&mutex);
  job.id = "broken";
  CHECK(fairgate_submit_durable(scheduler, &job, "b", 1, &broken, NULL) == FAIRGATE_OK);
  job.id = "doomed";
  CHECK(fairgate_submit_durable(scheduler, &job, "d", 1, &doomed, NULL) == FAIRGATE_OK);
  CHECK(wait_for(&seen->runs, 7));
  jobs = dead_jobs_once(scheduler, 2, &count);
  CHECK(jobs != NULL && count == 2);
  if (jobs != NULL && count == 2) {
    CHECK(jobs[0].sequence == broken && jobs[1].sequence == doomed);
    CHECK(strcmp(jobs[0].type, "repack") == 0 && strcmp(jobs[0].id, "broken") == 0);
    CHECK(strcmp(jobs[0].fairness_key, "alice") == 0 && jobs[0].attempts == 2);
    CHECK(jobs[0].payload_size == 1 && strcmp(jobs[0].payload, "b") == 0);
    CHECK(strstr(jobs[0].last_error, "the mirror is gone") != NULL);
    CHECK(jobs[0].submitted_at > 1.0e9);
  }
  fairgate_stored_jobs_free(jobs, count);
  CHECK(fairgate_dead_jobs(scheduler, 0, 1, &jobs, &count, NULL) == FAIRGATE_OK);
  CHECK(count == 1 && jobs != NULL && jobs[0].sequence == broken);
  fairgate_stored_jobs_free(jobs, count);
  CHECK(fairgate_dead_jobs(scheduler, broken, 1, &jobs, &count, NULL) == FAIRGATE_OK);
  CHECK(count == 1 && jobs != NULL && jobs[0].sequence == doomed);
  fairgate_stored_jobs_free(jobs, count);
  CHECK(fairgate_dead_jobs(scheduler, doomed, 1, &jobs, &count, NULL) == FAIRGATE_OK);
  CHECK(count == 0 && jobs == NULL);
  CHECK_REFUSED(fairgate_dead_jobs(scheduler, 0, 0, &jobs, &count, &refused_error),
                FAIRGATE_INVALID_ARGUMENT, "limit");
  CHECK_REFUSED(fairgate_dead_jobs(scheduler, 0, 1, NULL, &count, &refused_error),
                FAIRGATE_INVALID_ARGUMENT, "jobs is NULL");

  /* Retried: it runs again from attempt 1; removed: gone; unknown numbers: NOT_FOUND. */
  CHECK_REFUSED(fairgate_retry_dead_job(scheduler, doomed + 1000, &refused_error),
                FAIRGATE_NOT_FOUND, "");
  CHECK_REFUSED(fairgate_retry_dead_job(scheduler, sequence, &refused_error), FAIRGATE_NOT_FOUND,
                ""); /* done and removed long ago */
  pthread_mutex_lock(&mutex);
  seen->fail = 0;
  runs = seen->runs;
  pthread_mutex_unlock(&mutex);
  CHECK(fairgate_retry_dead_job(scheduler, broken, NULL) == FAIRGATE_OK);
  CHECK(wait_for(&seen->runs, runs + 1));
  pthread_mutex_lock(&mutex);
  CHECK(runs < MAX_SEEN && seen->sequence[runs] == broken && seen->attempt[runs] == 1);
  pthread_mutex_unlock(&mutex);
  CHECK(fairgate_remove_dead_job(scheduler, doomed, NULL) == FAIRGATE_OK);
  CHECK_REFUSED(fairgate_remove_dead_job(scheduler, doomed, &refused_error), FAIRGATE_NOT_FOUND,
                "");
  jobs = dead_jobs_once(scheduler, 0, &count);
  CHECK(count == 0);
  fairgate_stored_jobs_free(jobs, count);
  CHECK(fairgate_flush_state(scheduler, NULL) == FAIRGATE_OK);
}

static void test_sqlite(const char* dir) {
  Seen seen, gc_seen, again;
  fairgate_recovery_report report;
  fairgate_store *store, *second;
  fairgate_scheduler *scheduler, *other;
  fairgate_job job = durable_job("gc", "linux", "alice");
  char path[512];
  uint64_t sequence = 0;
  memset(&seen, 0, sizeof seen);
  memset(&gc_seen, 0, sizeof gc_seen);
  memset(&again, 0, sizeof again);
  snprintf(path, sizeof path, "%s/jobs.db", dir);
  store = fairgate_sqlite_store_open(path, NULL, NULL, NULL);
  CHECK(store != NULL);
  if (store == NULL) return;
  scheduler = durable_scheduler(store, &seen, NULL);
  if (scheduler == NULL) return;
  check_durable_calls(scheduler, &seen, 0);

  /* One scheduler at a time works a file's jobs: a second's Recover is refused. */
  second = fairgate_sqlite_store_open(path, NULL, NULL, NULL);
  CHECK(second != NULL);
  other = durable_scheduler(second, &again, NULL);
  if (other != NULL) {
    CHECK_REFUSED(fairgate_recover(other, NULL, &refused_error), FAIRGATE_FAILED_PRECONDITION, "");
    fairgate_scheduler_destroy(other);
  }
  fairgate_store_free(second);

  /* A job whose attempt a shutdown cut short stays stored and runs in the next process's
   * scheduler, with its next attempt. */
  CHECK(fairgate_submit_durable(scheduler, &job, "gc-payload", 10, &sequence, NULL) == FAIRGATE_OK);
  CHECK(wait_for(&holding, 1));
  fairgate_scheduler_destroy(scheduler);
  fairgate_store_free(store);

  store = fairgate_sqlite_store_open(path, NULL, NULL, NULL);
  CHECK(store != NULL);
  if (store == NULL) return;
  scheduler = durable_scheduler(store, &again, &gc_seen);
  fairgate_store_free(store);
  if (scheduler == NULL) return;
  memset(&report, 0, sizeof report);
  CHECK(fairgate_recover(scheduler, &report, NULL) == FAIRGATE_OK);
  CHECK(report.queued == 1 && report.dead == 0);
  CHECK(wait_for(&gc_seen.runs, 1));
  pthread_mutex_lock(&mutex);
  CHECK(gc_seen.sequence[0] == sequence && gc_seen.attempt[0] == 2);
  CHECK(gc_seen.payload_size[0] == 10 && memcmp(gc_seen.payload[0], "gc-payload", 10) == 0);
  pthread_mutex_unlock(&mutex);
  fairgate_scheduler_destroy(scheduler);
  CHECK(read_locked(&again.runs) == 0);
}

/* Runs `script command dir` (scripts/pg_temp.sh); its first line of output into `out`. */
static void run_script(const char* script, const char* command, const char* dir, char* out,
                       size_t size) {
  char line[1024];
  FILE* pipe;
  snprintf(line, sizeof line, "'%s' %s '%s'", script, command, dir);
  pipe = popen(line, "r");
  if (out != NULL) out[0] = '\0';
  if (pipe == NULL) return;
  if (out != NULL && fgets(out, (int)size, pipe) != NULL) out[strcspn(out, "\n")] = '\0';
  while (fgets(line, sizeof line, pipe) != NULL) {
  }
  pclose(pipe);
}

static void test_postgres(const char* script, const char* parent) {
  Seen seen;
  fairgate_postgres_options postgres;
  fairgate_options options;
  fairgate_type_config config;
  fairgate_retry_policy retry;
  fairgate_store* store;
  fairgate_scheduler* scheduler;
  fairgate_code code = FAIRGATE_OK;
  char dir[512], conninfo[1024], command[1100];
  char* error = NULL;
  const char* groups[] = {"repository"};
  const char* capped[] = {"repack"};
  const int caps[] = {1};
  memset(&seen, 0, sizeof seen);
  snprintf(dir, sizeof dir, "%s/pg-XXXXXX", parent);
  if (mkdtemp(dir) == NULL) {
    CHECK(!"mkdtemp");
    return;
  }
  chmod(dir, 0755); /* the server's user must reach its socket's directory */
  run_script(script, "start", dir, conninfo, sizeof conninfo);
  CHECK(strncmp(conninfo, "host=", 5) == 0);

  fairgate_postgres_options_init(&postgres);
  postgres.replica = "replica-from-c";
  postgres.connections = 0;
  CHECK(fairgate_postgres_store_open(conninfo, &postgres, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && error != NULL && strstr(error, "connections"));
  fairgate_free(error);
  error = NULL;
  postgres.connections = 2;
  store = fairgate_postgres_store_open(conninfo, &postgres, &code, &error);
  CHECK(store != NULL && code == FAIRGATE_OK);
  if (store == NULL) {
    fprintf(stderr, "  %s\n", error);
    fairgate_free(error);
  } else {
    fairgate_options_init(&options);
    options.max_concurrency = 2;
    options.store = store;
    options.lease_ttl_seconds = 5;
    options.claim_interval_seconds = 0.2;
    options.max_claimed = 2;
    options.fleet_conflict_groups = groups;
    options.fleet_conflict_group_count = 1;
    options.fleet_capped_types = capped;
    options.fleet_type_caps = caps;
    options.fleet_type_cap_count = 1;
    scheduler = fairgate_scheduler_create(&options, &code, &error);
    fairgate_store_free(store);
    CHECK(scheduler != NULL);
    if (scheduler == NULL) {
      fprintf(stderr, "  %s\n", error);
      fairgate_free(error);
    } else {
      fairgate_type_config_init(&config);
      config.conflict_group = "repository";
      CHECK(fairgate_register_type(scheduler, "repack", &config, NULL) == FAIRGATE_OK);
      fairgate_retry_policy_init(&retry);
      retry.max_attempts = 2;
      retry.initial_backoff_seconds = 0;
      CHECK(fairgate_register_durable(scheduler, "repack", record, &seen, &retry, NULL) ==
            FAIRGATE_OK);
      check_durable_calls(scheduler, &seen, 1);
      fairgate_scheduler_destroy(scheduler);
    }
  }
  run_script(script, "stop", dir, NULL, 0);
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  CHECK(system(command) == 0);
}

int main(int argc, char** argv) {
  char dir[] = "/tmp/fairgate-c-durable-XXXXXX";
  char command[128];
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  test_stores_and_options_refused_by_name(dir);
  test_sqlite(dir);
  if (argc > 1) {
    test_postgres(argv[1], access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : dir);
  } else {
    printf("no scripts/pg_temp.sh given: the PostgreSQL part is not run\n");
  }
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  CHECK(system(command) == 0);
  if (failures > 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("fairgate/c.h, durable jobs: every check passed\n");
  return 0;
}
