// fairgate/job_type.h: the configuration of one kind of job.
//
// A job type is registered once per scheduler, by name, before jobs of that type are enqueued.
// Registering the same name again with an equal configuration is a no-op; with a different one it
// fails with AlreadyExists, so two parts of a server cannot silently disagree about a type.
//
// A type registered with the defaults has no cap of its own (max_concurrency kNoLimit) and
// priority 1, the lowest tier, whose cap is 1 slot. In the default rule that tier lends: its jobs
// run on the slots no other tier's job wants, up to all but a quarter of the global cap
// (RuleOptions::lending), so a newcomer's type uses an idle server and yields to every higher
// tier. With lending off (seed mode) it runs ONE job at a time, and RegisterType warns
// (JobTypeWarnings). To run up to N at once whatever else runs, give it a tier that allows them:
// {.priority = N} (or a higher priority shared with other types of that tier), and
// .max_concurrency = N to cap the type itself.
//
// Thread safety: a plain value type.
#ifndef FAIRGATE_JOB_TYPE_H_
#define FAIRGATE_JOB_TYPE_H_

#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "fairgate/export.h"
#include "fairgate/rate_limit.h"
#include "fairgate/seconds.h"
#include "fairgate/shedding.h"
#include "fairgate/status.h"

namespace fairgate {

// What a request for a (type, id) that already has a job does (JobTypeConfig::coalesce).
enum class Coalesce {
  kOff,        // every request is a job of its own
  kJoin,       // it joins that job (see "Coalescing" in fairgate/scheduler.h)
  kSupersede,  // as kJoin, but a joining Submit's function replaces the one that would run
};

struct JobTypeConfig {
  // The charge, in seconds of slot time, of a (type, id) whose cost has not been learned yet.
  // Finite and >= 0.
  double default_cost = 1.0;
  // At most this many jobs of this type run at once (jobs, whatever their slots). >= 1.
  // kNoLimit (the default): no cap of its own; its tier's cap and the global cap bound it.
  static constexpr int kNoLimit = std::numeric_limits<int>::max();
  int max_concurrency = kNoLimit;
  // Jobs with the same job id and the same non-empty conflict group share a resource: at most
  // `conflict_limit` of them run at the same time (1: they exclude each other). Empty: this type
  // conflicts with nothing.
  std::string conflict_group;
  // How many jobs of the group may run on one id at once. >= 1; more than 1 only with a conflict
  // group; every type of a group must give the same value (RegisterType refuses another).
  int conflict_limit = 1;
  // The tier. Higher runs first; all types with the same value share one tier, and at most
  // `priority` slots of that tier are in use at once. >= 1.
  int priority = 1;
  // How many slots one running job of this type takes, of the global cap (max_concurrency of
  // SchedulerOptions) and of its tier's cap: a repack of a huge repository may count as 4. A job
  // is admitted only when all its slots are free; a narrower job behind it in the order may go
  // first meanwhile (no slot is held back for a wide job). >= 1, at most `priority` and at most
  // the scheduler's max_concurrency.
  int slots = 1;
  // Shortest-first within a key: a key's pending jobs of this type go in the order of their
  // estimated cost (the explicit cost if given, else the learned or default estimate, as known
  // when the job was enqueued), ties by arrival, instead of by arrival alone (Smith's rule:
  // it lowers the key's mean completion time). Other keys are not affected. With
  // RuleOptions::shortest_first_aging a, the place is estimate + a * arrival, so the key's
  // later short jobs cannot keep a long one waiting for ever.
  bool shortest_first = false;
  // Queue-wait limit: a job of this type still pending this long after it was
  // enqueued leaves the queue, uncharged, instead of being admitted (RunSync returns
  // DeadlineExceeded, a Submit callback and an Acquire callback get it). Work nobody waits for
  // any more does not run late. Finite and >= 0; 0: no limit.
  Seconds max_queue_wait{0};
  // Coalescing of requests for the same id ("Coalescing" in fairgate/scheduler.h): a Submit or
  // RunSync of an id whose job is pending joins that job instead of queueing another, and a
  // RunSync also joins one that is running; the job runs once and every caller gets its status.
  // A thousand clients asking at once for a repository that is not mirrored yet cause one clone.
  Coalesce coalesce = Coalesce::kOff;
  // Tags a worker may serve the type through (WorkerConfig::tags, fairgate/worker.h): a worker
  // serves the types it names and every type that carries one of its tags. Each not empty.
  std::vector<std::string> tags = {};

  // How often jobs of this type may start (fairgate/rate_limit.h): each admission takes a token
  // of the type's bucket; while it has none, the type's jobs are passed over until one is due.
  // Off by default.
  RateLimit rate_limit = {};
  // Every call of this type as JobOptions::refuse_without_token: refused at once, with when to
  // try again, when a rate limit it is under has no token at its arrival. Off by default.
  bool refuse_without_token = false;
  // Refusing the type's work, heaviest clients first, when its queue stands longer than a target
  // (fairgate/shedding.h). Off by default (target 0).
  Shedding shedding = {};

  friend bool operator==(const JobTypeConfig&, const JobTypeConfig&) = default;
};

// Returns OK when `name` and `config` describe a valid job type, else InvalidArgument naming the
// field that is wrong.
FAIRGATE_EXPORT Status ValidateJobType(std::string_view name, const JobTypeConfig& config);

// What is valid but probably not meant in a type registered under a global cap of
// `max_concurrency` (SchedulerOptions), one sentence each, empty when nothing is:
// - without `tiers_lend` (RuleOptions::lending), it is given nothing but (at most) its
//   default_cost, under a global cap above 1: it runs one job at a time (priority 1, the
//   default, is its tier's cap);
// - its tier's cap lets fewer of its jobs run at once than its max_concurrency (`priority` is
//   both the tier and that tier's cap in slots: a type at priority 1 runs one job at a time; with
//   `tiers_lend`, more only on slots no other tier's job wants);
// - the global cap does (neither of these two for a type without a max_concurrency of its own);
// - its tier's cap is above the global cap, so the tier can never fill it.
// Scheduler::RegisterType hands each to RuntimeOptions::warn.
FAIRGATE_EXPORT std::vector<std::string> JobTypeWarnings(std::string_view name,
                                                         const JobTypeConfig& config,
                                                         int max_concurrency,
                                                         bool tiers_lend = false);

}  // namespace fairgate

#endif  // FAIRGATE_JOB_TYPE_H_
