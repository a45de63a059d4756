// Parker: how one worker thread of the pool sleeps until it is given work, and how another thread
// wakes it. Internal to fairgate.
//
// Why not a fiber condition variable: Boost.Fiber's wakes a fiber of another thread while it
// holds the variable's spinlock, and that wake is a futex call that lets the woken thread take
// the waker's core. The waker is then descheduled holding the spinlock, and every worker that
// parks or wakes meanwhile spins on it for the rest of its time slice. With 64 workers on 2 cores
// that spinning took 45 % of the CPU of a Submit burst (perf, bench/HISTORY.md), although the
// workers parked only a few hundred times per 100,000 jobs.
//
// So a worker parks below the fibers: the pool's worker threads run their fibers under
// `ParkingScheduler` (a Boost.Fiber scheduling algorithm, its documented extension point),
// round robin like Boost's own, except that the worker's main fiber, while parked, is held out
// of the ready queue. When no other fiber of the thread is ready, the thread sleeps on the
// Parker's own mutex and condition variable, until the first of: Unpark, a fiber of this thread
// woken from another thread (Boost tells the algorithm), or the earliest timed wait of one of
// its fibers. Unpark takes no spinlock and wakes the thread after releasing its mutex. Fibers of
// a parked worker's thread (jobs waiting on a RunSync, a sleep, a lock) keep running meanwhile.
//
// With FAIRGATE_RUNTIME_THREADS (runtime/waiting.h) a worker is a plain thread, and Park is a
// wait on the Parker's condition variable.
//
// Thread safety: Park is called only by the worker the Parker belongs to, from its thread's main
// fiber (the one WorkerMain runs on); Unpark from any thread or fiber. An Unpark before the Park
// it answers is kept: that Park returns at once.
#ifndef FAIRGATE_RUNTIME_PARKER_H_
#define FAIRGATE_RUNTIME_PARKER_H_

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace fairgate::internal {

class Parker {
 public:
  Parker() = default;
  Parker(const Parker&) = delete;
  Parker& operator=(const Parker&) = delete;

  // Fiber build: makes this thread's fibers run under ParkingScheduler, bound to this Parker.
  // Called once, by the worker's thread, before it starts any fiber. No-op in the thread build.
  void AdoptThisThread();

  // Returns once Unpark was called (since the last Park returned).
  void Park();
  void Unpark();

 private:
  friend class ParkingScheduler;

  std::mutex mutex_;
  std::condition_variable wake_;
  // Unpark was called. Written under mutex_ (for the condition variable); read without it by
  // the scheduling algorithm, on every fiber switch of a parked worker's thread.
  std::atomic<bool> unparked_{false};
  bool fiber_woken_ = false;  // a fiber of this thread was woken from elsewhere; by mutex_
  bool parking_ = false;      // the main fiber is in Park; touched only by the worker's thread
};

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_PARKER_H_
