#include "runtime/fiber_stack.h"

#include "boost/fiber/fss.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace fairgate::internal {
namespace {

void KeepBounds(StackBounds*) {}  // the bounds belong to the worker, not to this pointer

// Per fiber, not per thread: fibers of one thread interleave (a job waits, another runs), and each
// must find its own stack.
boost::fibers::fiber_specific_ptr<StackBounds> current_stack(&KeepBounds);

}  // namespace

CurrentFiberStack::CurrentFiberStack(StackBounds* bounds) : previous_(current_stack.get()) {
  current_stack.reset(bounds);
}

CurrentFiberStack::~CurrentFiberStack() { current_stack.reset(previous_); }

// Not inlined, so that its frame sits right below the caller's and its frame address bounds
// everything the unwinding left behind.
__attribute__((noinline)) void ForgetUnwoundFrames() {
#if defined(__SANITIZE_ADDRESS__)
  const StackBounds* bounds = current_stack.get();
  // Everything below the caller's stack pointer: this frame, its saved frame pointer and return
  // address (the two words above its frame address), and the unwound frames below. No live
  // variable of the caller is there.
  char* top = static_cast<char*>(__builtin_frame_address(0)) + 2 * sizeof(void*);
  if (bounds == nullptr || top <= bounds->low || top > bounds->high) return;
  ASAN_UNPOISON_MEMORY_REGION(bounds->low, static_cast<std::size_t>(top - bounds->low));
#endif
}

}  // namespace fairgate::internal
