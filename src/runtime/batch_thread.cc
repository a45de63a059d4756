#include "runtime/batch_thread.h"

namespace fairgate::internal {

std::thread StartThread(void (*run)(void* arg), void* arg) {
  return std::thread([run, arg] { run(arg); });
}

}  // namespace fairgate::internal
