#include "runtime/thread_name.h"

#include <pthread.h>

namespace fairgate::internal {

void NameThisThread(const char* name) {
  // ERANGE for a name too long, the only failure: a name is a diagnostic, never a reason to fail.
  (void)pthread_setname_np(pthread_self(), name);
}

}  // namespace fairgate::internal
