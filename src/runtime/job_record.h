// JobRecord: one accepted call (RunSync, Submit or Acquire) from its acceptance until it is
// reported, and the small functions that report to its caller. Internal to src/runtime: the
// admission table (admission_table.h) keeps the records of its pending and running jobs by ticket
// slot, and every change of a record's state is made under its lock (the table below).
#ifndef FAIRGATE_RUNTIME_JOB_RECORD_H_
#define FAIRGATE_RUNTIME_JOB_RECORD_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/admission_core.h"
#include "fairgate/context.h"
#include "fairgate/scheduler.h"
#include "runtime/alarms.h"
#include "runtime/detached_status.h"
#include "runtime/fiber_stack.h"
#include "runtime/record_job_name.h"
#include "runtime/waiting.h"
#include "runtime/worker_assignment.h"

namespace fairgate::internal {

// One accepted job, from its acceptance until it is reported.
struct JobRecord;
using RecordPtr = std::shared_ptr<JobRecord>;
// The jobs one decision admitted or refused: rarely more than a few, gathered under the lock,
// where a heap allocation per decision would lengthen the critical section.
using RecordList = absl::InlinedVector<RecordPtr, 4>;
// Acquire's waiting jobs by the deadline of their context, for the scheduler's timer.
using DeadlineMap = std::multimap<Context::Clock::time_point, RecordPtr>;

// What each kind of call holds besides what every call does (JobRecord::call).
//
// RunSync: the caller sleeps on `wake` until `signalled`; the truth is the record's state, which
// the caller may read without the scheduler's lock once `decided` (Signal). It returns what it is
// told.
//
// A RunSync no caller waits for (Scheduler::RunAsync) holds, in `detached`, what the caller would:
// its context, function and callback, and the continuation that does what the caller does after
// its wait, on the thread that signalled it (its run, if it runs the job, on a pool fiber). The
// continuation is taken, once, by whichever comes last of the first Signal and the end of
// RunAsync's own setup (`armed`): a Signal may come before RunAsync has registered its context's
// cancel callback and filed its deadline's alarm, and the continuation must find them both.
// The continuation is `resume(scheduler, record)`, `scheduler` the Scheduler::Impl (private to
// Scheduler, so untyped here) and the record its own (`self`), held by whoever took it: a
// function pointer and the two it is called with, so a RunAsync allocates no closure for it.
struct DetachedRunSync {
  Context ctx = Context::Background();
  Scheduler::JobFn fn;
  Scheduler::DoneCallback done;
  std::uint64_t ctx_callback = 0;   // ctx's cancel callback (0: none, or it ran inline)
  std::optional<Alarms::Id> alarm;  // its deadline's, with a deadline (Alarms)
  void (*resume)(void* scheduler, const RecordPtr& record) = nullptr;
  void* scheduler = nullptr;
  std::weak_ptr<JobRecord> self;
  bool armed = false;  // RunAsync's setup is done (under wake_mutex)
  bool taken = false;  // the continuation was taken (under wake_mutex)
};
struct RunSyncCall {
  WaitMutex wake_mutex;
  WaitCondition wake;
  bool signalled = false;
  bool decided = false;
  std::unique_ptr<DetachedRunSync> detached;  // RunAsync's: set before the call is queued
  // Whether the caller takes the continuation: once signalled and armed, and only the first
  // time. Under wake_mutex.
  bool TakeResume() {
    if (!detached || !detached->armed || !signalled || detached->taken) return false;
    detached->taken = true;
    return true;
  }
  // Runs the continuation taken by TakeResume (outside wake_mutex), if its record still lives.
  void Resume() {
    if (RecordPtr record = detached->self.lock()) detached->resume(detached->scheduler, record);
  }
};
// Submit: the job's function, and `done`, told the job's status once (may be empty).
// claimed_leases: the fencing token of the fleet-wide leases a claimed durable job's claim took
// (the store gives them back with the job), 0 for none. unmeasured: a service's flag, read once
// `fn` returned, saying that the run says nothing of its cost (Submission::ServiceJob).
struct SubmitCall {
  Scheduler::JobFn fn;
  Scheduler::DoneCallback done;
  std::uint64_t claimed_leases = 0;
  const bool* unmeasured = nullptr;
};
// Acquire: `on_admitted`, called once, with a permit or why there is none; the context it waits
// under and that context's cancel callback (0: none, or it ran inline); its entry in the deadline
// map while pending (under the scheduler's lock).
struct AcquireCall {
  Scheduler::PermitCallback on_admitted;
  Context ctx = Context::Background();
  std::uint64_t ctx_callback = 0;
  std::optional<DeadlineMap::iterator> deadline_entry;
};

// One accepted call, from its acceptance until it is reported. Calls that coalesced share one
// core job: the record in the scheduler's table for the job's slot (its lead; once admitted, the
// call that runs it) lists the others, which are told the status of the run.
struct JobRecord {
  // A call's states. Every transition is made under the scheduler's lock, in the function named:
  //
  //   kNew     -> kPending    EnqueueLocked: its job is queued, or it joined a pending job of its
  //                           id (coalescing)
  //   kNew     -> kJoined     EnqueueLocked: it joined a run of its id under way (RunSync)
  //   kNew     -> kCancelled  TakeIntakeLocked: a Submit the intake held when shutdown began
  //   kPending -> kRunning    TakeAdmissionLocked: its job is admitted and it runs it (also
  //                           within the EnqueueLocked that queued it, when that call admits it)
  //   kPending -> kJoined     TakeAdmissionLocked, through ChooseRunnerLocked: its job is admitted
  //                           and another of the job's calls runs it
  //   kPending -> kCancelled  ReapExpiredLocked (max_queue_wait, with the calls that joined it);
  //                           LeaveQueueLocked and CancelLocked (its context ended, an Acquire's
  //                           deadline passed, shutdown)
  //   kJoined  -> kFinished   Complete: the run it joined ended, with `result`
  //   kJoined  -> kCancelled  LeaveRunLocked: its context ended; the run goes on for the others
  //
  // kRunning, kFinished and kCancelled are final: whoever ran the job, or the call told of its
  // end or refusal, reports it once, outside the lock. An Acquire's context may end while it is
  // kNew (before the core queued it). MoveTo is the one way a state changes, and it holds the
  // change to this table.
  enum class State { kNew, kPending, kRunning, kJoined, kFinished, kCancelled };
  // Whether the table above has the transition `from` -> `to`.
  static constexpr bool MayMove(State from, State to) {
    switch (from) {
      case State::kNew:
        return to == State::kPending || to == State::kJoined || to == State::kCancelled;
      case State::kPending:
        return to == State::kRunning || to == State::kJoined || to == State::kCancelled;
      case State::kJoined:
        return to == State::kFinished || to == State::kCancelled;
      case State::kRunning:
      case State::kFinished:
      case State::kCancelled:
        return false;
    }
    return false;
  }
  // Moves the call to `to`; a transition the table does not have aborts, naming both states (a
  // call decided twice, and so reported twice, would begin with one).
  void MoveTo(State to) {
    if (!MayMove(state, to)) {
      static constexpr const char* kNames[] = {"kNew",    "kPending",  "kRunning",
                                               "kJoined", "kFinished", "kCancelled"};
      std::fprintf(stderr, "fairgate: a call moved from %s to %s\n",
                   kNames[static_cast<int>(state)], kNames[static_cast<int>(to)]);
      std::abort();
    }
    state = to;
  }

  // The kinds of call, in the order of Call's alternatives.
  enum class Kind : std::uint8_t { kRunSync, kSubmit, kAcquire };
  // A record of the kind `C` (RunSyncCall, SubmitCall or AcquireCall), for good.
  template <typename C>
  explicit JobRecord(std::in_place_type_t<C> kind) : kind_(KindOf<C>()), call(kind) {}
  // A record holds the caller's function, callback and context: destroying it runs their
  // destructors (user code, and a context's unlinking from its parent, which takes a fiber
  // mutex), so its last reference is never dropped under the core lock (waiting.h). Checked.
  ~JobRecord() { CheckMaySuspend("the destruction of a job record"); }
  JobRecord(const JobRecord&) = delete;
  JobRecord& operator=(const JobRecord&) = delete;

  Kind kind() const { return kind_; }
  // What the admission table asks of a call, answered here by its kind (the table never asks a
  // call's kind itself):
  // The time past which it stops waiting to be admitted: an Acquire's context's deadline, if any.
  std::optional<Context::Clock::time_point> QueueDeadline() const {
    if (kind_ != Kind::kAcquire) return std::nullopt;
    return std::get<AcquireCall>(call).ctx.Deadline();
  }
  // Whether its caller runs the job itself once admitted (RunSync): of the calls that share a
  // job, the first such caller still waiting runs it.
  bool CallerRunsJob() const { return kind_ == Kind::kRunSync; }
  // What its caller is told when the scheduler shuts down before its job was admitted.
  Status ShutDownRefusal() const {
    return absl::CancelledError(kind_ == Kind::kSubmit
                                    ? "the scheduler shut down before the job ran"
                                    : "the scheduler shut down before the job was admitted");
  }
  // Whether its run's time is its cost: false when a service said that its run says nothing of
  // it (SubmitCall::unmeasured). Read once the run has returned.
  bool RunMeasured() const {
    const SubmitCall* submit = std::get_if<SubmitCall>(&call);
    return submit == nullptr || submit->unmeasured == nullptr || !*submit->unmeasured;
  }
  // The call's own part; the record must be of that kind (std::get checks).
  RunSyncCall& run_sync() { return std::get<RunSyncCall>(call); }
  SubmitCall& submit() { return std::get<SubmitCall>(call); }
  AcquireCall& acquire() { return std::get<AcquireCall>(call); }

  // What an admission reads and writes comes first, together: with a large backlog the record is
  // long out of every cache when its job is admitted, and each line it touches is a miss.
  core::JobTicket ticket;
  // The call's kind: `call`'s index, kept here too because an admission reads it (to choose a
  // runner, to forget an Acquire's deadline) while the record is cold, and the variant's index
  // lies past its largest alternative, on another line: one more miss per job admitted from a
  // large backlog (the drain of 100k jobs ran 14 % slower with it there).
  const Kind kind_;
  // Whether its QueueDeadline is filed in the scheduler's deadline map (at
  // AcquireCall::deadline_entry): read at every admission, so kept on this line. Under the lock.
  bool deadline_filed = false;
  State state = State::kNew;  // guarded by the scheduler's lock
  double admitted_at = 0;  // when its job was admitted (an Acquire's: when the permit was granted)
  // The lead's: the other calls that share its job, in the order they joined. Under the lock.
  std::vector<std::shared_ptr<JobRecord>> joiners;
  // kCancelled: what its caller is told. Set under the lock, read by whoever reports it.
  Status refusal;
  // kFinished: the status of the run it joined. Set under the lock, read by whoever reports it.
  Status result;
  // With workers: the one its job was admitted onto (set under the lock at admission, before
  // its runner is told; runtime/worker_assignment.h).
  std::unique_ptr<WorkerAssignment> worker;

  // How the caller waits or is called back, and how it is told: one of the three.
  using Call = std::variant<RunSyncCall, SubmitCall, AcquireCall>;
  Call call;
  // The job's names, from acceptance while the record lives (runtime/record_job_name.h): a
  // Submit's or an Acquire's kept, a RunSync's its caller's. The intake queues the job by them,
  // its fleet-wide leases are taken by them, with no look-up under the scheduler's lock.
  RecordJobName name;
  // Whether its runner takes fleet-wide leases by `name` (fairgate/options.h, FleetOptions):
  // its type took them when it was accepted, and it is not a claimed durable job (which runs
  // under the leases its claim took).
  bool takes_fleet_leases = false;

 private:
  template <typename C>
  static constexpr Kind KindOf() {
    constexpr Kind kind = std::is_same_v<C, RunSyncCall>  ? Kind::kRunSync
                          : std::is_same_v<C, SubmitCall> ? Kind::kSubmit
                                                          : Kind::kAcquire;
    static_assert(
        std::is_same_v<std::variant_alternative_t<static_cast<std::size_t>(kind), Call>, C>,
        "Kind's order is Call's");
    return kind;
  }
};

// Wakes a RunSync caller, or starts a detached one's continuation (RunSyncCall). `decided`: its
// state was set (under the scheduler's lock) to one that nothing but the caller changes any more
// (kRunning, kCancelled, kFinished), so the caller may read it without taking that lock again.
inline void Signal(JobRecord& record, bool decided) ABSL_LOCKS_EXCLUDED(core_lock) {
  RunSyncCall& call = record.run_sync();
  bool resume = false;
  {
    std::unique_lock lock(call.wake_mutex);
    call.signalled = true;
    call.decided |= decided;
    resume = call.TakeResume();
  }
  if (call.detached) {
    if (resume) call.Resume();
    return;
  }
  call.wake.notify_all();
}

// Runs user code at the edge: an exception becomes a status. Nothing suspends inside a catch
// block (exception state is per thread in this Boost.Fiber).
inline Status Invoke(const Scheduler::JobFn& fn, const Context& ctx)
    ABSL_LOCKS_EXCLUDED(core_lock) {
  std::string error;
  try {
    return fn(ctx);
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "an exception that is not a std::exception";
  }
  ForgetUnwoundFrames();
  return absl::InternalError(absl::StrCat("job function threw: ", error));
}

inline void InvokeDone(const Scheduler::DoneCallback& done, const Status& status)
    ABSL_LOCKS_EXCLUDED(core_lock) {
  if (!done) return;
  try {
    done(status);
  } catch (...) {
    // Documented: nobody is left to receive it.
  }
}

// Calls an Acquire callback once, and lets go of what it holds.
inline void InvokeAdmitted(JobRecord& record, StatusOr<Permit> result)
    ABSL_LOCKS_EXCLUDED(core_lock) {
  AcquireCall& call = record.acquire();
  Scheduler::PermitCallback callback = std::move(call.on_admitted);
  call.on_admitted = nullptr;
  try {
    callback(std::move(result));
  } catch (...) {
    // As for a completion callback: nobody is left to receive it. A permit it held is released
    // by its destructor during the unwinding.
  }
}

}  // namespace fairgate::internal

#endif  // FAIRGATE_RUNTIME_JOB_RECORD_H_
