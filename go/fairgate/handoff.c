/* handoff.c: the queue by which the C library's threads hand work to Go (handoff.h). */
#include "handoff.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The done handler of submit.go, for an item that could not be made. */
extern void fairgateGoSubmitDone(void* user, fairgate_code code, char* message);

static struct {
  pthread_mutex_t mu;
  pthread_cond_t put; /* signalled by a put that finds the taker waiting */
  fairgate_go_item* head;
  fairgate_go_item* tail;
  int waiting; /* the taker waits on `put` */
} queue = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0};

void fairgate_go_handoff_put(fairgate_go_item* item) {
  item->next = NULL;
  pthread_mutex_lock(&queue.mu);
  if (queue.tail == NULL) {
    queue.head = item;
  } else {
    queue.tail->next = item;
  }
  queue.tail = item;
  int wake = queue.waiting;
  queue.waiting = 0;
  pthread_mutex_unlock(&queue.mu);
  if (wake) pthread_cond_signal(&queue.put);
}

fairgate_go_item* fairgate_go_handoff_take(void) {
  pthread_mutex_lock(&queue.mu);
  while (queue.head == NULL) {
    queue.waiting = 1;
    pthread_cond_wait(&queue.put, &queue.mu);
  }
  fairgate_go_item* items = queue.head;
  queue.head = queue.tail = NULL;
  pthread_mutex_unlock(&queue.mu);
  return items;
}

void fairgate_go_submit_done(void* user, fairgate_code code, const char* message) {
  fairgate_go_item* item = (fairgate_go_item*)calloc(1, sizeof *item);
  char* copied = NULL;
  if (item != NULL && message != NULL) {
    size_t size = strlen(message) + 1;
    copied = (char*)malloc(size);
    if (copied != NULL) memcpy(copied, message, size);
  }
  if (item == NULL || (message != NULL && copied == NULL)) {
    free(item);
    fairgateGoSubmitDone(user, code, (char*)message);
    return;
  }
  item->kind = FAIRGATE_GO_SUBMIT_DONE;
  item->user = user;
  item->code = code;
  item->message = copied;
  fairgate_go_handoff_put(item);
}
