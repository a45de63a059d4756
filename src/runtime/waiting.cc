#include "runtime/waiting.h"

#include <cstdio>
#include <cstdlib>

namespace fairgate::internal {

void AbortSuspendUnderCoreLock(const char* what) {
  std::fprintf(stderr,
               "fairgate: %s while this thread holds the scheduler's core lock (CoreMutex, "
               "AdmissionTable::mutex_): a fiber suspended under it would stop the whole "
               "scheduler; nothing that may suspend a fiber is called under that lock "
               "(src/runtime/README.md)\n",
               what);
  std::abort();
}

}  // namespace fairgate::internal
