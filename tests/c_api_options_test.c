/* fairgate/c.h's options from C: what each _init_version writes (and leaves alone), the presets
 * that reconcile and lending follow, every field of version 3 reaching the rule (each shown by
 * what the scheduler then does, or by its refusal naming the field), and the callbacks: events,
 * warnings, groups of keys, adaptive capacity's readings, evidence (or its file). Built as C99 with
 * -Wall -Werror; run by CTest (label "runtime": under ThreadSanitizer too) and under
 * AddressSanitizer. Waits are for the events checked, bounded (10 s), never for a time. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "c_check.h"
#include "fairgate/c.h"

static fairgate_job job_of(const char* type, const char* id, const char* key) {
  fairgate_job job;
  job.type = type;
  job.id = id;
  job.fairness_key = key;
  job.cost = -1;
  job.flags = 0;
  return job;
}

static void quiet(void* user, const char* warning) {
  (void)user;
  (void)warning;
}

/* A scheduler from `options` (warnings silenced unless options->warn is set), or NULL after a
 * failed CHECK. */
static fairgate_scheduler* create(fairgate_options* options) {
  char* error = NULL;
  fairgate_scheduler* scheduler;
  if (options->warn == NULL) options->warn = quiet;
  scheduler = fairgate_scheduler_create(options, NULL, &error);
  if (scheduler == NULL) fprintf(stderr, "create: %s\n", error);
  CHECK(scheduler != NULL);
  fairgate_free(error);
  return scheduler;
}

static void register_type(fairgate_scheduler* scheduler, const char* name, int priority) {
  fairgate_type_config config;
  fairgate_type_config_init(&config);
  config.priority = priority;
  CHECK(fairgate_register_type(scheduler, name, &config, NULL) == FAIRGATE_OK);
}

/* Whether try-acquiring (type, id, key) admits at once; an admitted permit is put in *held. */
static int admits(fairgate_scheduler* scheduler, const char* type, const char* id, const char* key,
                  fairgate_permit** held) {
  fairgate_job job = job_of(type, id, key);
  fairgate_permit* permit = NULL;
  const fairgate_code code = fairgate_try_acquire(scheduler, &job, &permit, NULL);
  CHECK(code == FAIRGATE_OK || code == FAIRGATE_RESOURCE_EXHAUSTED);
  if (code != FAIRGATE_OK) return 0;
  *held = permit;
  return 1;
}

static int all_bytes_are(const void* from, size_t size, unsigned char value) {
  const unsigned char* bytes = (const unsigned char*)from;
  size_t i;
  for (i = 0; i < size; ++i) {
    if (bytes[i] != value) return 0;
  }
  return 1;
}

/* An _init_version writes its version's fields and nothing past them, so a program built with an
 * earlier header keeps its struct whole; an unknown version or NULL writes nothing. */
static void test_init_writes_its_version_only(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  memset(&options, 0xab, sizeof options);
  CHECK(fairgate_options_init_version(&options, 1) == FAIRGATE_OK);
  CHECK(options.version == 1 && options.max_concurrency == 8 && options.reconcile == -1);
  CHECK(all_bytes_are((const char*)&options + offsetof(fairgate_options, store),
                      sizeof options - offsetof(fairgate_options, store), 0xab));
  /* A version-1 struct is read as one: the bytes after it (garbage here) are not looked at. */
  scheduler = fairgate_scheduler_create(&options, NULL, NULL);
  CHECK(scheduler != NULL);
  fairgate_scheduler_destroy(scheduler);

  memset(&options, 0xab, sizeof options);
  CHECK(fairgate_options_init_version(&options, 2) == FAIRGATE_OK);
  CHECK(options.version == 2 && options.store == NULL && options.fleet_type_cap_count == 0);
  CHECK(all_bytes_are((const char*)&options + offsetof(fairgate_options, lending),
                      sizeof options - offsetof(fairgate_options, lending), 0xab));

  memset(&options, 0xab, sizeof options);
  CHECK(fairgate_options_init_version(&options, 0) == FAIRGATE_INVALID_ARGUMENT);
  CHECK(fairgate_options_init_version(&options, FAIRGATE_OPTIONS_VERSION + 1) ==
        FAIRGATE_INVALID_ARGUMENT);
  CHECK(all_bytes_are(&options, sizeof options, 0xab));
  CHECK(fairgate_options_init_version(NULL, FAIRGATE_OPTIONS_VERSION) == FAIRGATE_INVALID_ARGUMENT);
  CHECK(fairgate_options_init(&options) == FAIRGATE_OK);
  CHECK(options.version == FAIRGATE_OPTIONS_VERSION && options.lending == -1 &&
        options.on_event == NULL && options.observer_queue_limit > 0);

  memset(&config, 0xab, sizeof config);
  CHECK(fairgate_type_config_init_version(&config, 2) == FAIRGATE_INVALID_ARGUMENT);
  CHECK(all_bytes_are(&config, sizeof config, 0xab));
  CHECK(fairgate_type_config_init(&config) == FAIRGATE_OK && config.priority == 1);
}

/* The key's accumulated cost after one job of default cost 5 that ran almost no time. */
static double cost_after_one_job(int seed_mode, int reconcile) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_permit* permit = NULL;
  double cost = -1;
  fairgate_options_init(&options);
  options.seed_mode = seed_mode;
  options.reconcile = reconcile;
  scheduler = create(&options);
  if (scheduler == NULL) return -1;
  fairgate_type_config_init(&config);
  config.default_cost = 5;
  CHECK(fairgate_register_type(scheduler, "fetch", &config, NULL) == FAIRGATE_OK);
  CHECK(admits(scheduler, "fetch", "git.git", "client", &permit));
  if (permit != NULL) fairgate_permit_release(permit, FAIRGATE_OK, NULL);
  CHECK(fairgate_accumulated_cost(scheduler, "client", &cost) == 1);
  fairgate_scheduler_destroy(scheduler);
  return cost;
}

/* Seed mode is the original rule: charged what was estimated, never reconciled, unless asked. */
static void test_seed_mode_follows_its_preset(void) {
  fairgate_options options;
  fairgate_code code = FAIRGATE_OK;
  char* error = NULL;
  CHECK(cost_after_one_job(1, -1) == 5);
  CHECK(cost_after_one_job(1, 0) == 5);
  CHECK(cost_after_one_job(1, 1) < 5); /* reconciled to the run's few microseconds */
  CHECK(cost_after_one_job(0, -1) < 5);
  CHECK(cost_after_one_job(0, 0) == 5);
  fairgate_options_init(&options);
  options.reconcile = 2;
  CHECK(fairgate_scheduler_create(&options, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && error != NULL && strstr(error, "reconcile") != NULL);
  fairgate_free(error);
}

/* How many jobs of one priority-1 type (a tier of one slot) start at once on 4 slots. */
static int jobs_at_once(int seed_mode, int lending) {
  fairgate_options options;
  fairgate_scheduler* scheduler;
  fairgate_permit* permits[4] = {NULL, NULL, NULL, NULL};
  char id[8];
  int started = 0;
  int i;
  fairgate_options_init(&options);
  options.seed_mode = seed_mode;
  options.lending = lending;
  options.max_concurrency = 4;
  scheduler = create(&options);
  if (scheduler == NULL) return -1;
  register_type(scheduler, "bulk", 1);
  for (i = 0; i < 4; ++i) {
    snprintf(id, sizeof id, "r%d", i);
    started += admits(scheduler, "bulk", id, id, &permits[started]);
  }
  for (i = 0; i < started; ++i) fairgate_permit_release(permits[i], FAIRGATE_OK, NULL);
  fairgate_scheduler_destroy(scheduler);
  return started;
}

/* Lending follows the preset (on, keeping back a quarter: 3 of 4 slots; off in seed mode) or
 * the field. */
static void test_lending(void) {
  fairgate_options options;
  fairgate_code code = FAIRGATE_OK;
  char* error = NULL;
  CHECK(jobs_at_once(0, -1) == 3);
  CHECK(jobs_at_once(0, 0) == 1);
  CHECK(jobs_at_once(1, -1) == 1);
  CHECK(jobs_at_once(1, 1) == 3);
  fairgate_options_init(&options);
  options.lending_kept_back = 1;
  CHECK(fairgate_scheduler_create(&options, &code, &error) == NULL);
  CHECK(code == FAIRGATE_INVALID_ARGUMENT && error != NULL && strstr(error, "kept_back") != NULL);
  fairgate_free(error);
}

/* Version 3's fields each refused by name when out of range. */
static void test_bad_fields_are_named(void) {
  enum { kCases = 13 };
  const char* names[kCases] = {"lending",     "aging",         "shortest_first_aging",
                               "default_key", "default_group", "remeasure_every",
                               "decrease",    "source",        "adaptive_signals",
                               "fiber_stack", "sweep_batch",   "observer_queue_limit",
                               "token_lease"};
  fairgate_pressure_signal signal;
  int i;
  signal.source = (fairgate_pressure_source)9;
  signal.high = 0.5;
  signal.low = 0.1;
  signal.read = NULL;
  signal.read_user = NULL;
  for (i = 0; i < kCases; ++i) {
    fairgate_options options;
    fairgate_code code = FAIRGATE_OK;
    char* error = NULL;
    fairgate_scheduler* scheduler;
    fairgate_options_init(&options);
    switch (i) {
      case 0:
        options.lending = 3;
        break;
      case 1:
        options.aging = 1;
        options.aging_interval_seconds = 0;
        break;
      case 2:
        options.shortest_first_aging = -1;
        break;
      case 3:
        options.default_key_limits.min_running = -1;
        break;
      case 4:
        options.default_group_min_running = -1;
        break;
      case 5:
        options.latency_capacity_min = 1;
        options.latency_capacity_remeasure_every = 1;
        break;
      case 6:
        options.adaptive_capacity_min = 1;
        options.adaptive_capacity_decrease = 1.5;
        break;
      case 7:
        options.adaptive_capacity_min = 1;
        options.adaptive_signals = &signal;
        options.adaptive_signal_count = 1;
        break;
      case 8:
        options.adaptive_signals = &signal;
        options.adaptive_signal_count = 1;
        break;
      case 9:
        options.fiber_stack_bytes = 1024;
        break;
      case 10:
        options.sweep_batch = 0;
        break;
      case 11:
        options.observer_queue_limit = 0;
        break;
      case 12:
        options.token_lease_seconds = 0;
        break;
    }
    scheduler = fairgate_scheduler_create(&options, &code, &error);
    CHECK(scheduler == NULL);
    CHECK(code == FAIRGATE_INVALID_ARGUMENT);
    if (error == NULL || strstr(error, names[i]) == NULL) {
      fprintf(stderr, "case %d (%s): %s\n", i, names[i], error == NULL ? "(none)" : error);
      ++failures;
    }
    fairgate_free(error);
    fairgate_scheduler_destroy(scheduler);
  }
}

/* Events, as an observer sees them. */
typedef struct Events {
  int count;
  fairgate_event_kind kinds[16];
  char keys[16][16];
  fairgate_code codes[16];
  char messages[16][64];
  double charges[16];
} Events;

static void on_event(void* user, const fairgate_event* event) {
  Events* events = (Events*)user;
  pthread_mutex_lock(&mutex);
  if (events->count < 16) {
    const int i = events->count;
    events->kinds[i] = event->kind;
    snprintf(events->keys[i], sizeof events->keys[i], "%s", event->fairness_key);
    events->codes[i] = event->code;
    snprintf(events->messages[i], sizeof events->messages[i], "%s", event->message);
    events->charges[i] = event->charge;
  }
  ++events->count;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
}

static void on_admitted(void* user, fairgate_permit* permit, fairgate_code code,
                        const char* message) {
  (void)user;
  (void)message;
  CHECK(permit == NULL && code == FAIRGATE_CANCELLED);
}

static void test_events(void) {
  fairgate_options options;
  fairgate_type_config config;
  fairgate_scheduler* scheduler;
  fairgate_permit* permit = NULL;
  fairgate_pending* pending = NULL;
  fairgate_job waiting = job_of("push", "b.git", "bob");
  Events events;
  memset(&events, 0, sizeof events);
  fairgate_options_init(&options);
  options.max_concurrency = 1;
  options.on_event = on_event;
  options.on_event_user = &events;
  scheduler = create(&options);
  if (scheduler == NULL) return;
  fairgate_type_config_init(&config);
  config.default_cost = 2;
  CHECK(fairgate_register_type(scheduler, "push", &config, NULL) == FAIRGATE_OK);
  CHECK(admits(scheduler, "push", "a.git", "alice", &permit));
  CHECK(fairgate_acquire(scheduler, &waiting, on_admitted, NULL, &pending, NULL) == FAIRGATE_OK);
  fairgate_pending_cancel(pending);
  fairgate_pending_free(pending);
  fairgate_permit_release(permit, FAIRGATE_ABORTED, "the push was refused");
  CHECK(wait_for(&events.count, 3));
  fairgate_scheduler_destroy(scheduler);
  CHECK(events.count == 3);
  CHECK(events.kinds[0] == FAIRGATE_EVENT_ADMIT && strcmp(events.keys[0], "alice") == 0);
  CHECK(events.charges[0] == 2);
  CHECK(events.kinds[1] == FAIRGATE_EVENT_CANCEL && strcmp(events.keys[1], "bob") == 0);
  CHECK(events.codes[1] == FAIRGATE_CANCELLED);
  CHECK(events.kinds[2] == FAIRGATE_EVENT_COMPLETE && events.codes[2] == FAIRGATE_ABORTED);
  CHECK(strcmp(events.messages[2], "the push was refused") == 0);
}

/* Warnings go to the callback, not stderr. */
typedef struct Warnings {
  int count;
  char first[256];
} Warnings;

static void on_warning(void* user, const char* warning) {
  Warnings* warnings = (Warnings*)user;
  if (warnings->count++ == 0) snprintf(warnings->first, sizeof warnings->first, "%s", warning);
}

static void test_warnings(void) {
  fairgate_options options;
  fairgate_scheduler* scheduler;
  Warnings warnings;
  memset(&warnings, 0, sizeof warnings);
  fairgate_options_init(&options);
  options.lending = 0;
  options.warn = on_warning;
  options.warn_user = &warnings;
  scheduler = create(&options);
  if (scheduler == NULL) return;
  register_type(scheduler, "clone", 1); /* one slot of 8, and the tiers do not lend */
  CHECK(warnings.count == 1 && strstr(warnings.first, "clone") != NULL);
  fairgate_scheduler_destroy(scheduler);
}

/* Groups of keys from a rule: "tenant-<first letter>", none for keys starting with 'z'; each
 * group runs one job at a time (default_group_max_running), each key one (default_key_limits). */
static int group_calls = 0;

static char* group_of(void* user, const char* key) {
  char* group;
  CHECK(user == &group_calls);
  ++group_calls; /* under the scheduler's lock */
  if (key[0] == 'z') return NULL;
  group = malloc(16);
  snprintf(group, 16, "tenant-%c", key[0]);
  return group;
}

static void test_groups_and_limits_by_default(void) {
  fairgate_options options;
  fairgate_scheduler* scheduler;
  fairgate_permit* held[5] = {NULL, NULL, NULL, NULL, NULL};
  double cost = 0;
  int i;
  fairgate_options_init(&options);
  options.key_group = group_of;
  options.key_group_user = &group_calls;
  options.default_group_max_running = 1;
  options.default_key_limits.max_running = 1;
  scheduler = create(&options);
  if (scheduler == NULL) return;
  register_type(scheduler, "fetch", 8);
  CHECK(admits(scheduler, "fetch", "1", "a1", &held[0]));
  CHECK(!admits(scheduler, "fetch", "2", "a2", &held[1])); /* tenant-a holds its one */
  CHECK(admits(scheduler, "fetch", "3", "b1", &held[1]));
  CHECK(admits(scheduler, "fetch", "4", "z1", &held[2]));  /* no group */
  CHECK(!admits(scheduler, "fetch", "5", "z1", &held[3])); /* z1 holds its one */
  CHECK(admits(scheduler, "fetch", "6", "z2", &held[3]));
  CHECK(group_calls >= 5);
  CHECK(fairgate_charge(scheduler, "a1", 3, NULL) == FAIRGATE_OK);
  CHECK(fairgate_group_accumulated_cost(scheduler, "tenant-a", &cost) == 1 && cost >= 3);
  CHECK(fairgate_group_accumulated_cost(scheduler, "tenant-z", &cost) == 0);
  for (i = 0; i < 4; ++i) fairgate_permit_release(held[i], FAIRGATE_OK, NULL);
  fairgate_scheduler_destroy(scheduler);
}

/* Aging's bound, and the heaviest keys in the snapshot. */
static void test_aging_and_heaviest_keys(void) {
  fairgate_options options;
  fairgate_scheduler* scheduler;
  double seconds = -1;
  char* error = NULL;
  char* json;
  fairgate_options_init(&options);
  options.aging = 1;
  options.aging_grace_seconds = 2;
  options.aging_interval_seconds = 3;
  options.aging_ceiling = 4;
  scheduler = create(&options);
  if (scheduler == NULL) return;
  register_type(scheduler, "gc", 1);
  register_type(scheduler, "fetch", 4);
  CHECK(fairgate_max_wait_to_ceiling(scheduler, "gc", &seconds, NULL) == FAIRGATE_OK);
  CHECK(seconds == 5); /* grace + one step, to the tier of priority 4 */
  CHECK(fairgate_max_wait_to_ceiling(scheduler, "fetch", &seconds, NULL) == FAIRGATE_OK);
  CHECK(seconds == 0);
  CHECK(fairgate_max_wait_to_ceiling(scheduler, "repack", &seconds, &error) == FAIRGATE_NOT_FOUND);
  CHECK(error != NULL && strstr(error, "repack") != NULL);
  fairgate_free(error);
  CHECK(fairgate_max_wait_to_ceiling(scheduler, "gc", NULL, NULL) == FAIRGATE_INVALID_ARGUMENT);

  CHECK(fairgate_charge(scheduler, "heavy", 5, NULL) == FAIRGATE_OK);
  CHECK(fairgate_charge(scheduler, "middle", 3, NULL) == FAIRGATE_OK);
  CHECK(fairgate_charge(scheduler, "light", 1, NULL) == FAIRGATE_OK);
  json = fairgate_snapshot_json_heaviest(scheduler, 2);
  CHECK(json != NULL && strstr(json, "\"key\":\"heavy\"") != NULL &&
        strstr(json, "\"key\":\"middle\"") != NULL && strstr(json, "light") == NULL);
  fairgate_free(json);
  json = fairgate_snapshot_json(scheduler);
  CHECK(json != NULL && strstr(json, "\"heaviest_keys\":[]") != NULL);
  fairgate_free(json);
  CHECK(fairgate_snapshot_json_heaviest(NULL, 2) == NULL);
  fairgate_scheduler_destroy(scheduler);
}

/* Adaptive capacity on readings from C: CPU never stalls, memory in use stays above its high, so
 * the cap falls from 8 to its min. */
typedef struct Readings {
  int cpu;
  int memory;
} Readings;

static fairgate_code read_cpu(void* user, double* value) {
  Readings* readings = (Readings*)user;
  pthread_mutex_lock(&mutex);
  ++readings->cpu;
  pthread_mutex_unlock(&mutex);
  *value = 0; /* a counter of stalled seconds that never grows */
  return FAIRGATE_OK;
}

static fairgate_code read_memory(void* user, double* value) {
  Readings* readings = (Readings*)user;
  pthread_mutex_lock(&mutex);
  ++readings->memory;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
  *value = 0.9;
  return FAIRGATE_OK;
}

static void test_adaptive_capacity_reads_from_c(void) {
  fairgate_options options;
  fairgate_scheduler* scheduler;
  fairgate_pressure_signal memory;
  Readings readings = {0, 0};
  char* json = NULL;
  int reached = 0;
  struct timespec start, now;
  fairgate_options_init(&options);
  options.adaptive_capacity_min = 2;
  options.adaptive_capacity_interval_seconds = 0.01;
  options.adaptive_stalled_seconds = read_cpu;
  options.adaptive_stalled_seconds_user = &readings;
  memory.source = FAIRGATE_PRESSURE_MEMORY_USE;
  memory.high = 0.5;
  memory.low = 0.1;
  memory.read = read_memory;
  memory.read_user = &readings;
  options.adaptive_signals = &memory;
  options.adaptive_signal_count = 1;
  scheduler = create(&options);
  if (scheduler == NULL) return;
  /* 8 -> 6 -> 4 -> 3 -> 2: four intervals at least; wait for the snapshot to say so. */
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    CHECK(wait_for(&readings.memory, read_locked(&readings.memory) + 1));
    json = fairgate_snapshot_json(scheduler);
    reached = json != NULL && strstr(json, "\"capacity\":2,") != NULL;
    fairgate_free(json);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (!reached && now.tv_sec - start.tv_sec < 10);
  CHECK(reached);
  CHECK(read_locked(&readings.cpu) >= 4);
  fairgate_scheduler_destroy(scheduler);
}

/* Evidence: a line of JSON per admission, to a callback or to a file; not both. */
typedef struct Evidence {
  int lines;
  char first[512];
} Evidence;

static void on_evidence(void* user, const char* line) {
  Evidence* evidence = (Evidence*)user;
  pthread_mutex_lock(&mutex);
  if (evidence->lines++ == 0) snprintf(evidence->first, sizeof evidence->first, "%s", line);
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mutex);
}

static void test_evidence(void) {
  fairgate_options options;
  fairgate_scheduler* scheduler;
  fairgate_permit* permit = NULL;
  Evidence evidence;
  char path[] = "/tmp/fairgate_c_evidence_XXXXXX";
  char line[512] = "";
  char* error = NULL;
  FILE* file;
  int fd;
  memset(&evidence, 0, sizeof evidence);
  fairgate_options_init(&options);
  options.on_evidence = on_evidence;
  options.on_evidence_user = &evidence;
  scheduler = create(&options);
  if (scheduler == NULL) return;
  register_type(scheduler, "fetch", 4);
  CHECK(admits(scheduler, "fetch", "git.git", "alice", &permit));
  fairgate_permit_release(permit, FAIRGATE_OK, NULL);
  CHECK(wait_for(&evidence.lines, 1));
  fairgate_scheduler_destroy(scheduler);
  CHECK(evidence.lines == 1);
  CHECK(strstr(evidence.first, "\"key\":\"alice\"") != NULL);
  CHECK(strstr(evidence.first, "\"estimate_source\":\"default\"") != NULL);

  fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  fairgate_options_init(&options);
  options.evidence_path = path;
  scheduler = create(&options);
  if (scheduler != NULL) {
    register_type(scheduler, "fetch", 4);
    CHECK(admits(scheduler, "fetch", "git.git", "bob", &permit));
    fairgate_permit_release(permit, FAIRGATE_OK, NULL);
    fairgate_scheduler_destroy(scheduler); /* every record delivered before it returns */
  }
  file = fdopen(fd, "r");
  CHECK(file != NULL && fgets(line, sizeof line, file) != NULL);
  CHECK(strstr(line, "\"key\":\"bob\"") != NULL);
  if (file != NULL) fclose(file);
  unlink(path);

  fairgate_options_init(&options);
  options.on_evidence = on_evidence;
  options.evidence_path = path;
  CHECK(fairgate_scheduler_create(&options, NULL, &error) == NULL);
  CHECK(error != NULL && strstr(error, "both") != NULL);
  fairgate_free(error);
  error = NULL;
  fairgate_options_init(&options);
  options.evidence_path = "/nonexistent/directory/evidence.jsonl";
  CHECK(fairgate_scheduler_create(&options, NULL, &error) == NULL);
  CHECK(error != NULL && strstr(error, "/nonexistent/directory/evidence.jsonl") != NULL);
  fairgate_free(error);
}

int main(void) {
  test_init_writes_its_version_only();
  test_seed_mode_follows_its_preset();
  test_lending();
  test_bad_fields_are_named();
  test_events();
  test_warnings();
  test_groups_and_limits_by_default();
  test_aging_and_heaviest_keys();
  test_adaptive_capacity_reads_from_c();
  test_evidence();
  if (failures > 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("fairgate_c_api_options_test: all checks passed\n");
  return 0;
}
