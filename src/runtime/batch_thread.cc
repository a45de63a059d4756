#include "runtime/batch_thread.h"

#include "runtime/thread_name.h"

namespace fairgate::internal {

std::thread StartThread(const char* name, void (*run)(void* arg), void* arg) {
  return std::thread([name, run, arg] {
    NameThisThread(name);
    run(arg);
  });
}

}  // namespace fairgate::internal
