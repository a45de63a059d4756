// Fiber stacks that know their bounds, so that AddressSanitizer builds can clean up after an
// exception unwinds frames on them. Internal to fairgate.
//
// Why: ASan tracks the thread's own stack, not the stacks Boost.Context switches to. When an
// exception unwinds frames on a fiber stack, ASan cannot unpoison those frames ("ASan is ignoring
// requested __asan_handle_no_return"), and later calls that reuse that memory are reported as
// stack-buffer-overflows that are not there. Boost.Context can tell ASan about switches only when
// built with BOOST_USE_ASAN, which Debian's package is not. So each pool fiber records its stack
// bounds, and after catching an exception at a job's edge fairgate unpoisons the part of the
// stack below the catching frame: memory that holds no live frame. Without ASan it does nothing.
#ifndef FAIRGATE_RUNTIME_FIBER_STACK_H_
#define FAIRGATE_RUNTIME_FIBER_STACK_H_

#include <cstddef>

namespace fairgate::internal {

#if FAIRGATE_RUNTIME_THREADS
// The thread runtime has no fiber stacks: jobs run on their threads' own, which ASan tracks.
inline void ForgetUnwoundFrames() {}
}  // namespace fairgate::internal
#else
}  // namespace fairgate::internal

#include "boost/context/stack_context.hpp"
#include "boost/fiber/fixedsize_stack.hpp"

namespace fairgate::internal {

struct StackBounds {
  char* low = nullptr;
  char* high = nullptr;
};

// A fixedsize_stack that writes the bounds of the stack it allocates to `*bounds`.
class BoundedStackAllocator {
 public:
  BoundedStackAllocator(std::size_t size, StackBounds* bounds) : inner_(size), bounds_(bounds) {}
  boost::context::stack_context allocate() {
    boost::context::stack_context sctx = inner_.allocate();
    bounds_->high = static_cast<char*>(sctx.sp);
    bounds_->low = bounds_->high - sctx.size;
    return sctx;
  }
  void deallocate(boost::context::stack_context& sctx) noexcept { inner_.deallocate(sctx); }

 private:
  boost::fibers::fixedsize_stack inner_;
  StackBounds* bounds_;
};

// Marks `bounds` as the stack of the calling fiber, for its lifetime.
class CurrentFiberStack {
 public:
  explicit CurrentFiberStack(StackBounds* bounds);
  ~CurrentFiberStack();
  CurrentFiberStack(const CurrentFiberStack&) = delete;
  CurrentFiberStack& operator=(const CurrentFiberStack&) = delete;

 private:
  StackBounds* previous_;
};

// After an exception was caught: under ASan, unpoisons the current pool fiber's stack below the
// caller's frame. Must be called outside the catch block. A no-op elsewhere.
void ForgetUnwoundFrames();

}  // namespace fairgate::internal
#endif  // FAIRGATE_RUNTIME_THREADS

#endif  // FAIRGATE_RUNTIME_FIBER_STACK_H_
