// JoinPoints: where requests of a coalescing type find the job of their id to join
// (JobTypeConfig::coalesce). Internal to src/core.
//
// Per id with a joinable job, a point holds the pending joinable job with the number of requests
// it stands for (at most one joinable job of an id is pending: a joinable request finds it and
// joins), and the joinable job admitted last while it runs. A point that names nothing is
// dropped, so a type that does not coalesce has none. The core tells its type's points of every
// change of a joinable job (Job::joinable): opened, joined, a caller gone, withdrawn, started,
// completed; nothing else reads or writes them.
#ifndef FAIRGATE_CORE_JOIN_POINTS_H_
#define FAIRGATE_CORE_JOIN_POINTS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "fairgate/job_type.h"
#include "fairgate/status.h"

namespace fairgate::core {

// Which of the calls that share an admitted coalescing job runs it, the calls given in the order
// they asked (the first queued the job; `calls` not empty): the first whose caller runs its own
// job and still waits (RunSync), else the first (Coalesce::kJoin) or the latest
// (Coalesce::kSupersede). The runtime and the simulator both choose by this; the core itself
// counts callers and does not choose. `runs_itself(call)`: whether that call's caller runs its
// own job.
template <typename Calls, typename RunsItself>
auto ChooseRunner(Calls& calls, Coalesce mode, RunsItself runs_itself) {
  const auto runner = std::find_if(calls.begin(), calls.end(), runs_itself);
  if (runner != calls.end()) return runner;
  return mode == Coalesce::kSupersede ? calls.end() - 1 : calls.begin();
}

struct Job;
struct TypeState;

class JoinPoints {
 public:
  // The job a request for `id` joins: the running one admitted last if `running_too` and it
  // still runs, else the pending one, which then stands for one more request; null if neither.
  Job* Join(absl::string_view id, bool running_too);
  // A new pending joinable job, standing for one request (its id has no pending joinable job).
  void Open(Job& job);
  // One request the pending joinable job stands for leaves it: whether it still stands for any.
  bool LeaveCaller(const Job& job);
  // How many requests the pending joinable job stands for.
  std::uint32_t Callers(const Job& job) const;
  // The pending joinable job leaves the queue without running.
  void Withdraw(const Job& job);
  // The pending joinable job starts running: requests that may join a running job join it.
  void Start(Job& job);
  // The running joinable job ends (a later job of its id may have replaced it at the point).
  void Complete(const Job& job);

  // Part of AdmissionCore::CheckInvariants: every point names live joinable jobs of `owner` (the
  // type these are the points of) and of its id, in the state it says. Returns how many pending
  // jobs the points name, for the caller to compare with the pending joinable jobs it counts.
  StatusOr<std::size_t> Check(const TypeState& owner) const;

 private:
  struct Point {
    Job* pending = nullptr;             // the pending joinable job, if any
    std::uint32_t pending_callers = 0;  // the requests it stands for: the last to leave cancels
    Job* running = nullptr;             // the joinable job admitted last, while it runs
  };
  Point& PointOf(const Job& job);  // the job's point, which exists while it is pending or named
  const Point& PointOf(const Job& job) const;

  absl::flat_hash_map<std::string, Point> points_;  // by id
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_JOIN_POINTS_H_
