/* A C program on the installed C interface alone (fairgate/c.h, libfairgate_c.so.0): built with
 * find_package(fairgate COMPONENTS c) and with pkg-config's fairgate-c. */
#include <stdio.h>

#include "fairgate/c.h"

static fairgate_code clone_repository(void* user, const fairgate_context* ctx, char** error) {
  (void)ctx;
  (void)error;
  *(int*)user = 1;
  return FAIRGATE_OK;
}

int main(void) {
  fairgate_options options;
  fairgate_type_config clone;
  fairgate_scheduler* scheduler;
  fairgate_job job = {"clone", "linux.git", "client", -1};
  int ran = 0;
  int ok;
  fairgate_options_init(&options);
  scheduler = fairgate_scheduler_create(&options, NULL, NULL);
  if (scheduler == NULL) return 1;
  fairgate_type_config_init(&clone);
  clone.priority = 2;
  ok = fairgate_register_type(scheduler, "clone", &clone, NULL) == FAIRGATE_OK &&
       fairgate_run_sync(scheduler, &job, clone_repository, &ran, NULL, -1, NULL) == FAIRGATE_OK &&
       ran == 1 &&
       /* Without a store, durable work is refused, not silently kept in memory. */
       fairgate_recover(scheduler, NULL, NULL) == FAIRGATE_FAILED_PRECONDITION;
  fairgate_scheduler_destroy(scheduler);
  printf("%s\n", ok ? "ok" : "wrong");
  return ok ? 0 : 1;
}
