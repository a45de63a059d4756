#include "runtime/fiber_stack.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace fairgate::internal {
namespace {
thread_local const StackBounds* current_stack = nullptr;
}  // namespace

CurrentFiberStack::CurrentFiberStack(const StackBounds* bounds) : previous_(current_stack) {
  current_stack = bounds;
}

CurrentFiberStack::~CurrentFiberStack() { current_stack = previous_; }

void ForgetUnwoundFrames() {
#if defined(__SANITIZE_ADDRESS__)
  const StackBounds* bounds = current_stack;
  // Below this function's own frame: nothing live is there.
  char* below = static_cast<char*>(__builtin_frame_address(0)) - 512;
  if (bounds == nullptr || below <= bounds->low || below > bounds->high) return;
  ASAN_UNPOISON_MEMORY_REGION(bounds->low, static_cast<std::size_t>(below - bounds->low));
#endif
}

}  // namespace fairgate::internal
