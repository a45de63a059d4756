/* What the C tests of fairgate/c.h share: CHECK, which counts failures and goes on, and the lock
 * and condition under which callbacks report, with a bounded wait for a counter they raise.
 * Each test program includes it once (its definitions are the program's own). */
#ifndef FAIRGATE_TESTS_C_CHECK_H_
#define FAIRGATE_TESTS_C_CHECK_H_

#include <pthread.h>
#include <stdio.h>
#include <time.h>

static int failures = 0;

#define CHECK(condition)                                                            \
  do {                                                                              \
    if (!(condition)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #condition); \
      ++failures;                                                                   \
    }                                                                               \
  } while (0)

/* What callbacks saw, under one lock; `changed` is signalled on every change. */
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;

/* Waits until *counter >= target, at most 10 s; whether it got there. */
static int wait_for(const int* counter, int target) {
  struct timespec deadline;
  int reached;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 10;
  pthread_mutex_lock(&mutex);
  while (*counter < target) {
    if (pthread_cond_timedwait(&changed, &mutex, &deadline) != 0) break;
  }
  reached = *counter >= target;
  pthread_mutex_unlock(&mutex);
  return reached;
}

static int read_locked(const int* counter) {
  int value;
  pthread_mutex_lock(&mutex);
  value = *counter;
  pthread_mutex_unlock(&mutex);
  return value;
}

#endif /* FAIRGATE_TESTS_C_CHECK_H_ */
