// JobTable: the slots of the core's live jobs. Internal to src/core.
//
// A job lives in one slot from its enqueue to its completion, cancellation or expiry. Slots live
// in a deque, which never relocates them (tickets, lane entries and hooks hold their addresses),
// and a freed slot is reused by the next job, its generation one higher, so that the ticket of a
// finished job names nothing even after its slot is reused.
#ifndef FAIRGATE_CORE_JOB_TABLE_H_
#define FAIRGATE_CORE_JOB_TABLE_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "core/queue_nodes.h"

namespace fairgate::core {

// Names one job for as long as it is pending or running. A ticket of a finished job names nothing.
struct JobTicket {
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;
  friend bool operator==(JobTicket, JobTicket) = default;
};

class JobTable {
 public:
  // A free slot for a new job: its fields are as the last Free left them (kFree, no key, type,
  // lane or resource), its slot and generation set. The caller fills it and sets its state.
  Job& Allocate() {
    if (!free_slots_.empty()) {
      Job& job = jobs_[free_slots_.back()];
      free_slots_.pop_back();
      return job;
    }
    Job& job = jobs_.emplace_back();
    job.slot = static_cast<std::uint32_t>(jobs_.size() - 1);
    return job;
  }
  // Gives a finished job's slot back: its ticket names nothing from now on.
  void Free(Job& job) {
    job.lane = nullptr;  // in no lane (running, the same memory held its estimate: given back)
    job.state = JobState::kFree;
    ++job.generation;
    job.key = nullptr;
    job.type = nullptr;
    job.resource = nullptr;
    job.joinable = false;
    job.worker = 0;
    free_slots_.push_back(job.slot);
  }
  // The pending or running job the ticket names, or null. Inlined: a completion's first step
  // (the compiler stopped inlining it when the core's units grew; bench/HISTORY.md).
  [[gnu::always_inline]] const Job* Find(JobTicket ticket) const {
    if (ticket.slot >= jobs_.size()) return nullptr;
    const Job& job = jobs_[ticket.slot];
    if (job.generation != ticket.generation || job.state == JobState::kFree) return nullptr;
    return &job;
  }
  [[gnu::always_inline]] Job* Find(JobTicket ticket) {
    return const_cast<Job*>(static_cast<const JobTable*>(this)->Find(ticket));
  }
  static JobTicket TicketOf(const Job& job) { return JobTicket{job.slot, job.generation}; }
  // The job in `slot`, which must be live (a worker's running jobs are kept by slot).
  Job& At(std::uint32_t slot) { return jobs_[slot]; }

  // Every slot, free ones included (state kFree), in slot order: for the rare operations that
  // scan the jobs (a pause with aging) and CheckInvariants.
  auto begin() { return jobs_.begin(); }
  auto end() { return jobs_.end(); }
  auto begin() const { return jobs_.begin(); }
  auto end() const { return jobs_.end(); }
  const std::vector<std::uint32_t>& free_slots() const { return free_slots_; }

 private:
  std::deque<Job> jobs_;
  std::vector<std::uint32_t> free_slots_;
};

}  // namespace fairgate::core

#endif  // FAIRGATE_CORE_JOB_TABLE_H_
