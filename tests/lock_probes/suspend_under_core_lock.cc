// A deliberate suspension under a scheduler's core lock (issue 46), which must abort naming the
// lock. CTest runs each mode and passes only on that message (tests/CMakeLists.txt):
//   context  a context's error read under the lock (the call that hung the scheduler): the
//            context's fiber mutex refuses to be taken
//   yield    a fiber of a pool thread (ParkingScheduler) that gives its thread up under the lock,
//            through Boost.Fiber directly: the scheduling algorithm refuses to switch
// Exits 0 (and the test fails) if nothing aborted.
#include <cstdio>
#include <cstring>
#include <thread>

#include "fairgate/context.h"
#include "runtime/waiting.h"

#if !FAIRGATE_RUNTIME_THREADS
#include "boost/fiber/fiber.hpp"
#include "boost/fiber/operations.hpp"
#include "runtime/parker.h"
#endif

namespace {

// Hidden from the thread-safety analysis, which would refuse to compile the probe.
void ErrUnderTheLock(fairgate::internal::CoreMutex& mutex,
                     const fairgate::Context& ctx) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  mutex.Lock();
  std::printf("read under the lock: %d\n", static_cast<int>(ctx.Err().code()));
  mutex.Unlock();
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  fairgate::internal::CoreMutex mutex;
  if (std::strcmp(mode, "context") == 0) {
    auto [ctx, cancel] = fairgate::WithCancel(fairgate::Context::Background());
    ErrUnderTheLock(mutex, ctx);
    cancel();
  } else if (std::strcmp(mode, "yield") == 0) {
#if FAIRGATE_RUNTIME_THREADS
    std::printf("the thread build has no fibers\n");
    return 2;
#else
    std::thread pool_thread([&mutex]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      fairgate::internal::Parker parker;
      parker.AdoptThisThread();
      boost::fibers::fiber other([] {});
      boost::fibers::fiber holder([&mutex]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        mutex.Lock();
        boost::this_fiber::yield();  // past the runtime's own checked wrappers
        mutex.Unlock();
      });
      holder.join();
      other.join();
    });
    pool_thread.join();
#endif
  } else {
    std::fprintf(stderr, "usage: %s context|yield\n", argv[0]);
    return 2;
  }
  std::printf("nothing aborted\n");
  return 0;
}
