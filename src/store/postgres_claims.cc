// PostgresStore's claims and leases: claims in fair order (with the fleet-wide leases their
// types take, ClaimWithLeases in steps), resource leases, and the renewal of everything this
// replica holds.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "store/postgres_statements.h"
#include "store/postgres_store.h"

namespace fairgate::store::postgres {

StatusOr<std::uint64_t> PostgresStore::AcquireResource(std::string_view group, std::string_view id,
                                                       int limit, double lease_seconds) {
  for (const auto& [what, name] :
       {std::pair{"a fleet-wide lease's group", group}, {"a fleet-wide lease's id", id}}) {
    if (Status s = RequireText(absl::string_view(name.data(), name.size()), what); !s.ok()) {
      return s;
    }
  }
  Session session = pool_.Take();
  Link& link = *session;
  StatusOr<std::uint64_t> token = TakeSlot(link, {std::string(group), std::string(id), limit},
                                           lease_seconds, /*retrying=*/true);
  if (token.ok() && *token != 0) book_.AddResourceLease(*token);
  return token;
}

// Two replicas may pick the same free slot: the one that loses finds it taken (its insert waited
// for the other's commit), and tries the next free one, at most `limit` rounds, so that a claim
// that raced another for a resource of several slots does not come back empty while one is free.
//
// `retrying` (AcquireResource): on a new connection after a broken one, the take's slot is
// looked up by its mark (kSlotTakenBy) before it takes again: its reply may have been lost after
// the server committed it.
StatusOr<std::uint64_t> PostgresStore::TakeSlot(Link& link, const LeaseNeed& need,
                                                double lease_seconds, bool retrying) {
  const std::string mark = retrying ? std::to_string(NextMarks(1)) : std::string();
  const std::vector<Param> params = {{need.group},
                                     {need.id},
                                     {replica_},
                                     {std::to_string(need.limit)},
                                     {Number(lease_seconds)},
                                     retrying ? Param{mark} : Param{"", false, true}};
  auto take = [&] { return Exec(link, kTakeSlot, params, "take a resource's lease"); };
  auto taken = [&]() -> std::optional<StatusOr<Result>> {
    StatusOr<Result> r = Exec(link, kSlotTakenBy, {{need.group}, {need.id}, {mark}},
                              "take a resource's lease: look up what was taken");
    if (r.ok() && PQntuples(r->get()) == 0) return std::nullopt;
    return r;
  };
  for (int round = 0; round < std::max(need.limit, 1); ++round) {
    StatusOr<Result> r = retrying ? pool_.RetryingUnlessFound(link, take, taken) : take();
    if (!r.ok()) return r.status();
    if (PQntuples(r->get()) == 1) return std::strtoull(PQgetvalue(r->get(), 0, 0), nullptr, 10);
    if (need.limit <= 1) return 0;
    StatusOr<int> free = FreeSlots(link, need);
    if (!free.ok()) return free.status();
    if (*free == 0) return 0;
  }
  return 0;
}

StatusOr<int> PostgresStore::FreeSlots(Link& link, const LeaseNeed& need) {
  StatusOr<Result> free =
      Exec(link, kCountFreeSlots, {{need.group}, {need.id}, {std::to_string(need.limit)}},
           "count a resource's free slots");
  if (!free.ok()) return free.status();
  return std::atoi(PQgetvalue(free->get(), 0, 0));
}

Status PostgresStore::ReleaseResource(std::string_view group, std::string_view id,
                                      std::uint64_t token) {
  Session session = pool_.Take();
  Link& link = *session;
  book_.DropResourceLease(token);
  return pool_
      .RetryingExec(link,
                    "WITH freed AS (DELETE FROM fairgate_resource_leases WHERE grp = $1 AND id = "
                    "$2 AND token = $3 RETURNING 1) SELECT " FAIRGATE_PG_NOTIFY_IF_FREED,
                    {{std::string(group)}, {std::string(id)}, {std::to_string(token)}},
                    "release a resource's lease")
      .status();
}

StatusOr<std::vector<StoredJob>> PostgresStore::ClaimJobs(const std::vector<ClaimableType>& types,
                                                          std::size_t max_jobs,
                                                          double lease_seconds) {
  StatusOr<std::vector<StoredJob>> jobs = Claim(types, max_jobs, lease_seconds);
  if (jobs.ok() && max_jobs > 0) {
    waits_for_jobs_.store(jobs->size() < max_jobs, std::memory_order_relaxed);
  }
  return jobs;
}

StatusOr<std::vector<StoredJob>> PostgresStore::Claim(const std::vector<ClaimableType>& asked,
                                                      std::size_t max_jobs, double lease_seconds) {
  std::vector<StoredJob> jobs;
  // A type whose name PostgreSQL's text cannot hold has no stored jobs (Storable), and passed to
  // the statement it would fail the claim of every other type.
  std::vector<ClaimableType> types;
  for (const ClaimableType& t : asked) {
    if (TextCanHold(t.type)) types.push_back(t);
  }
  if (types.empty() || max_jobs == 0) return jobs;
  std::vector<std::string> names, tiers;
  bool leases = false;
  for (const ClaimableType& t : types) {
    names.push_back(t.type);
    tiers.push_back(std::to_string(t.priority));
    // A bound on a type's jobs is kept by the claim's plan too (PlanClaim).
    leases |= t.fleet_cap > 0 || !t.conflict_group.empty() || t.max_jobs > 0;
  }
  // One claim at a time: after a lost reply a claim adopts the jobs this replica holds and does
  // not know (ClaimUnleased), which must not be another claim's under way.
  std::lock_guard claiming(claim_mutex_);
  Session session = pool_.Take();
  Link& link = *session;
  const SteadyClock::time_point sure_until = SureUntil(lease_seconds);
  if (leases) {
    absl::flat_hash_map<std::uint64_t, std::vector<std::uint64_t>> taken;
    Status claimed = pool_.Transaction(link, "claim durable jobs", [&] {
      return ClaimWithLeases(link, types, names, tiers, max_jobs, lease_seconds, jobs, taken);
    });
    if (!claimed.ok()) return claimed;
    for (const StoredJob& job : jobs) {
      book_.Claimed(job.sequence, job.lease_token, std::move(taken[job.sequence]), job.attempts + 1,
                    sure_until);
      tokens_seen_ = std::max(tokens_seen_, job.lease_token);
    }
    return jobs;
  }
  // A claim of n jobs reads M candidates in claim order and takes the first n that no other claim
  // is locking. M is n once a claim came back whole: a replica claiming alone (the common case)
  // then reads no more keys than it may take from, where at 10,000 keys a claim's work is mostly
  // a step per key read. After a claim came back short, M is 2 n, candidates for replicas
  // claiming at once to share; and a claim at n that passed over candidates (locked by another
  // replica's claim under way) claims the rest at once at 2 n. If that second statement fails,
  // the jobs the first claimed are returned (they are this replica's) and the next claim meets
  // the failure again.
  bool wide = wide_claims_.load(std::memory_order_relaxed);
  std::size_t wanted = max_jobs;
  for (;;) {
    StatusOr<UnleasedClaim> got = ClaimUnleased(
        link, names, tiers, wanted, wide ? 2 * wanted : wanted, lease_seconds, sure_until, jobs);
    if (!got.ok()) {
      if (jobs.empty()) return got.status();
      break;
    }
    const bool whole = got->claimed == wanted;
    wide_claims_.store(!whole, std::memory_order_relaxed);
    if (whole || wide || !got->passed_over) break;
    wanted -= got->claimed;
    wide = true;
  }
  std::sort(jobs.begin(), jobs.end(),
            [](const StoredJob& a, const StoredJob& b) { return a.sequence < b.sequence; });
  return jobs;
}

StatusOr<PostgresStore::UnleasedClaim> PostgresStore::ClaimUnleased(
    Link& link, const std::vector<std::string>& names, const std::vector<std::string>& tiers,
    std::size_t max_jobs, std::size_t candidates, double lease_seconds,
    SteadyClock::time_point sure_until, std::vector<StoredJob>& jobs) {
  // When the connection breaks under the claim, it may have committed before the break lost its
  // reply: the jobs it claimed are this replica's, with tokens above any it was given before
  // (they come from one sequence), and are its claim (kClaimedUnknown) if there are any; else
  // it claims again. (A job a previous process of the same replica name holds, its lease not yet
  // lapsed, is adopted so too: it runs now rather than after that lease.)
  StatusOr<Result> r = pool_.RetryingUnlessFound(
      link,
      [&] {
        // Planned once a connection: a custom plan for each claim's arguments cost the server
        // 1-2 ms a claim, more than running a claim of 100 jobs, and the generic plan runs as
        // fast at 100 and 10,000 keys, the heads' statistics fresh or stale (bench/README.md, "How
        // a claim reads"), and reading by index it reads what it claims whatever the jobs' table
        // held when it was planned (OnGenericIndexPlans). The claim with leases too
        // (LockCandidates).
        return OnGenericIndexPlans(link, [&] {
          return Exec(link, kClaim,
                      {{TextArray(names)},
                       {TextArray(tiers)},
                       {std::to_string(max_jobs)},
                       {replica_},
                       {Number(lease_seconds)},
                       {Number(WallSeconds())},
                       {std::to_string(candidates)}},
                      "claim durable jobs");
        });
      },
      [&]() -> std::optional<StatusOr<Result>> {
        StatusOr<Result> unknown =
            Exec(link, kClaimedUnknown, {{replica_}, {std::to_string(tokens_seen_)}},
                 "claim durable jobs: look up what the claim whose reply was lost claimed");
        if (unknown.ok() && PQntuples(unknown->get()) == 0) return std::nullopt;
        return unknown;
      });
  if (!r.ok()) return r.status();
  const int rows = PQntuples(r->get());
  for (int i = 0; i < rows; ++i) {
    StatusOr<StoredJob> job = JobAt(*r, i);
    if (!job.ok()) return job.status();
    job->lease_token = std::strtoull(PQgetvalue(r->get(), i, 9), nullptr, 10);
    book_.Claimed(job->sequence, job->lease_token, {}, job->attempts + 1, sure_until);
    tokens_seen_ = std::max(tokens_seen_, job->lease_token);
    jobs.push_back(*std::move(job));
  }
  UnleasedClaim claim;
  claim.claimed = static_cast<std::size_t>(rows);
  claim.passed_over =
      rows == 0 || std::strtoull(PQgetvalue(r->get(), 0, 10), nullptr, 10) > claim.claimed;
  return claim;
}

StatusOr<std::size_t> PostgresStore::RenewLeases(double lease_seconds) {
  Session session = pool_.Take();
  Link& link = *session;
  const LeaseBook::Renewal renewal = book_.ToRenew();
  std::vector<std::string> renewed, resources;
  for (std::uint64_t token : renewal.jobs) renewed.push_back(std::to_string(token));
  for (std::uint64_t token : renewal.resources) resources.push_back(std::to_string(token));
  std::size_t held = 0;
  // `sql`: $1 the replica, $2 the lease's length, $3 the tokens; the jobs' renewal returns
  // their sequences.
  auto renew = [&](const char* sql, const std::vector<std::string>& tokens) -> StatusOr<Result> {
    if (tokens.empty()) return Result();
    StatusOr<Result> r = pool_.Retrying(link, [&] {
      // On plans that read by index, as the claims' (OnGenericIndexPlans): planned for each
      // call's arguments, over the few jobs a replica held at first, the jobs' renewal read them
      // by a bitmap scan of the holder index, which read again, each time, every entry the
      // replica's finished jobs had left there since the last vacuum.
      return OnGenericIndexPlans(link, [&] {
        return Exec(link, sql, {{replica_}, {Number(lease_seconds)}, {TextArray(tokens)}},
                    "renew leases");
      });
    });
    if (r.ok()) held += static_cast<std::size_t>(std::strtoull(PQcmdTuples(r->get()), nullptr, 10));
    return r;
  };
  const SteadyClock::time_point sure_until = SureUntil(lease_seconds);
  StatusOr<Result> jobs = renew(kRenewJobLeases, renewed);
  if (!jobs.ok()) return jobs.status();
  if (*jobs != nullptr) {
    for (int i = 0; i < PQntuples(jobs->get()); ++i) {
      book_.Renewed(std::strtoull(PQgetvalue(jobs->get(), i, 0), nullptr, 10), sure_until);
    }
  }
  if (StatusOr<Result> r =
          renew("UPDATE fairgate_resource_leases SET lease_until = " FAIRGATE_PG_NOW
                " + $2 WHERE holder = $1 AND token = ANY($3::bigint[])",
                resources);
      !r.ok()) {
    return r.status();
  }
  return held;
}

// Until when a lease of `lease_seconds` given by a statement sent now is surely this
// replica's (LeaseBook::BeginLocally).
PostgresStore::SteadyClock::time_point PostgresStore::SureUntil(double lease_seconds) {
  return SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                  std::chrono::duration<double>(lease_seconds * 0.9));
}

// Gives back the leases taken with this replica's claim of `sequence` (a failure leaves them
// to lapse: the book no longer renews them).
void PostgresStore::GiveBackClaimLeases(Link& link, std::uint64_t sequence,
                                        std::optional<std::uint64_t> of) {
  std::vector<std::string> resources;
  for (std::uint64_t token : book_.TakeClaimLeases(sequence, of)) {
    resources.push_back(std::to_string(token));
  }
  if (resources.empty()) return;
  (void)pool_.RetryingExec(link, kGiveBackLeasesByToken, {{TextArray(resources)}},
                           "release a claim's leases");
}

// The body of a claim whose types take leases, in the claim's transaction: waits for any other
// such claim under way (kLockLeasedClaims), locks the candidates in claim order
// (kClaimCandidates), chooses the first max_jobs whose leases have a free slot (counted once for
// all of them: store::PlanClaim), takes those leases in (group, id) order (so that it never
// waits in a cycle with another replica taking leases), drops a job whose lease another replica
// took meanwhile (with the leases it took), and claims the rest: `jobs`, and the tokens of each
// one's leases in `taken`.
Status PostgresStore::ClaimWithLeases(
    Link& link, const std::vector<ClaimableType>& types, const std::vector<std::string>& names,
    const std::vector<std::string>& tiers, std::size_t max_jobs, double lease_seconds,
    std::vector<StoredJob>& jobs,
    absl::flat_hash_map<std::uint64_t, std::vector<std::uint64_t>>& taken) {
  jobs.clear();
  taken.clear();
  // After any other replica's claim under way: its candidates are the ones this claim would read.
  if (Status s = Exec(link, kLockLeasedClaims, {}, "wait for the claims under way").status();
      !s.ok()) {
    return s;
  }
  // When every type is bounded (ClaimableType::max_jobs), the claim takes at most their sum: it
  // locks no more candidates than that needs.
  std::size_t most = 0;  // the bounds' sum, or max_jobs once a type has none
  for (const ClaimableType& t : types) {
    most = t.max_jobs == 0 ? max_jobs : std::min(max_jobs, most + t.max_jobs);
  }
  max_jobs = most;
  // A claim reads 2 n and locks n (narrow) after a claim that came back whole, else 8 n and 4 n,
  // or n when every type is Sure: its candidates are then jobs of resources with a free slot,
  // none after as many jobs of its resource as it has slots (the statement's `pool`), and the
  // plan takes them all but those that lose a slot to another replica, so more would be locked
  // for nothing. A narrow claim that passed over candidates other transactions were locking (a
  // claim without leases; a stalled replica's late write to a job whose lease lapsed) locks again
  // at once, wide, in the same transaction (the rows it locked stay its own).
  const bool wide = wide_leased_claims_.load(std::memory_order_relaxed);
  const bool all_sure = std::all_of(types.begin(), types.end(), Sure);
  const std::size_t wide_locked = (all_sure ? 1 : 4) * max_jobs;
  bool passed_over = false;
  StatusOr<std::vector<ClaimCandidate>> candidates =
      LockCandidates(link, types, names, tiers, wide ? wide_locked : max_jobs,
                     (wide ? 8 : 2) * max_jobs, passed_over);
  if (candidates.ok() && !wide && passed_over) {
    candidates = LockCandidates(link, types, names, tiers, wide_locked, 8 * max_jobs, passed_over);
  }
  if (!candidates.ok()) return candidates.status();
  StatusOr<HeldSlots> held = CountHeldSlots(link, *candidates);
  if (!held.ok()) return held.status();
  std::vector<std::size_t> type_max;
  for (const ClaimableType& t : types) type_max.push_back(t.max_jobs);
  const ClaimPlan plan = PlanClaim(*candidates, *std::move(held), max_jobs, type_max);
  // The tokens of each chosen job's leases, in the order of its needs; 0 where none was taken.
  std::vector<std::vector<std::uint64_t>> tokens(plan.chosen.size());
  for (std::size_t j = 0; j < plan.chosen.size(); ++j) {
    tokens[j].assign((*candidates)[plan.chosen[j]].needs.size(), 0);
  }
  StatusOr<std::vector<std::string>> claimed =
      TakePlannedLeases(link, *candidates, plan, lease_seconds, tokens);
  if (!claimed.ok()) return claimed.status();
  wide_leased_claims_.store(claimed->size() < max_jobs, std::memory_order_relaxed);
  if (claimed->empty()) return absl::OkStatus();
  StatusOr<Result> r =
      Exec(link,
           "UPDATE fairgate_durable_jobs j SET holder = $2, lease_until = " FAIRGATE_PG_NOW
           " + $3, token = nextval('fairgate_lease_tokens'), " FAIRGATE_PG_COUNT_ATTEMPT
           "WHERE sequence = ANY($1::bigint[]) "
           "RETURNING sequence, type, id, fairness_key, payload, submitted_at, attempts - 1, "
           "  not_before, last_error, token",
           {{TextArray(*claimed)}, {replica_}, {Number(lease_seconds)}}, "claim durable jobs");
  if (!r.ok()) return r.status();
  absl::flat_hash_map<std::uint64_t, std::size_t> index;
  for (std::size_t j = 0; j < plan.chosen.size(); ++j) {
    index[(*candidates)[plan.chosen[j]].sequence] = j;
  }
  for (int i = 0; i < PQntuples(r->get()); ++i) {
    StatusOr<StoredJob> job = JobAt(*r, i);
    if (!job.ok()) return job.status();
    job->lease_token = std::strtoull(PQgetvalue(r->get(), i, 9), nullptr, 10);
    const std::vector<std::uint64_t>& leases = tokens[index.at(job->sequence)];
    // The last lease taken is the resource's when it has one (taken after the cap's).
    job->resource_token = leases.empty() ? 0 : leases.back();
    taken[job->sequence] = leases;
    jobs.push_back(*std::move(job));
  }
  std::sort(jobs.begin(), jobs.end(),
            [](const StoredJob& a, const StoredJob& b) { return a.sequence < b.sequence; });
  return absl::OkStatus();
}

bool PostgresStore::Sure(const ClaimableType& type) {
  return type.fleet_cap == 0 && type.max_jobs == 0;
}

// ClaimWithLeases' first step: the candidates, locked, in claim order, each with the leases it
// needs (its type's fleet cap, then its resource).
StatusOr<std::vector<ClaimCandidate>> PostgresStore::LockCandidates(
    Link& link, const std::vector<ClaimableType>& types, const std::vector<std::string>& names,
    const std::vector<std::string>& tiers, std::size_t locked, std::size_t read,
    bool& passed_over) {
  absl::flat_hash_map<std::string, std::size_t> by_name;  // index in `types`
  std::vector<std::string> groups_of, limits_of, caps_of, sure_of;
  for (std::size_t i = 0; i < types.size(); ++i) {
    const ClaimableType& t = types[i];
    by_name[t.type] = i;
    groups_of.push_back(t.conflict_group);
    limits_of.push_back(std::to_string(t.conflict_limit));
    caps_of.push_back(std::to_string(t.fleet_cap));
    sure_of.push_back(Sure(t) ? "t" : "f");
  }
  // On one generic plan, as the claim without leases (ClaimUnleased): planning it for each
  // claim's arguments cost the server about 3 ms a claim, and the generic plan runs as fast at
  // 100 and 10,000 keys with the heads' statistics fresh, and 2.5-6 times faster than the custom
  // plans at 10,000 keys with them stale (bench/README.md, "How a claim reads"); by index, as
  // that one.
  StatusOr<Result> c = OnGenericIndexPlans(link, [&] {
    return Exec(link, kClaimCandidates,
                {{TextArray(names)},
                 {TextArray(tiers)},
                 {std::to_string(locked)},
                 {Number(WallSeconds())},
                 {TextArray(groups_of)},
                 {TextArray(limits_of)},
                 {TextArray(caps_of)},
                 {std::string(kFleetCapGroup)},
                 {std::to_string(read)},
                 {TextArray(sure_of)}},
                "claim durable jobs");
  });
  if (!c.ok()) return c.status();
  // Fewer locked than there were to read, short of `locked`: others were locking the rest.
  const int rows = PQntuples(c->get());
  passed_over = rows == 0 || (static_cast<std::size_t>(rows) < locked &&
                              std::strtoull(PQgetvalue(c->get(), 0, 3), nullptr, 10) >
                                  static_cast<std::size_t>(rows));
  std::vector<ClaimCandidate> candidates;
  for (int i = 0; i < rows; ++i) {
    const std::size_t type = by_name.at(Text(*c, i, 1));
    const ClaimableType& t = types[type];
    ClaimCandidate candidate{std::strtoull(PQgetvalue(c->get(), i, 0), nullptr, 10), {}, type};
    if (t.fleet_cap > 0)
      candidate.needs.push_back({std::string(kFleetCapGroup), t.type, t.fleet_cap});
    if (!t.conflict_group.empty()) {
      candidate.needs.push_back({t.conflict_group, Text(*c, i, 2), t.conflict_limit});
    }
    candidates.push_back(std::move(candidate));
  }
  return candidates;
}

// ClaimWithLeases' second step: the slots held now (unexpired leases) of every resource the
// candidates need.
StatusOr<HeldSlots> PostgresStore::CountHeldSlots(Link& link,
                                                  const std::vector<ClaimCandidate>& candidates) {
  std::vector<std::string> groups, ids;
  for (const ClaimCandidate& candidate : candidates) {
    for (const LeaseNeed& n : candidate.needs) {
      groups.push_back(n.group);
      ids.push_back(n.id);
    }
  }
  HeldSlots held;
  if (groups.empty()) return held;
  StatusOr<Result> h =
      Exec(link,
           "SELECT l.grp, l.id, count(*) FROM fairgate_resource_leases l "
           "JOIN (SELECT DISTINCT * FROM unnest($1::text[], $2::text[]) AS r(grp, id)) r "
           "ON l.grp = r.grp AND l.id = r.id WHERE l.lease_until >= " FAIRGATE_PG_NOW
           " GROUP BY l.grp, l.id",
           {{TextArray(groups)}, {TextArray(ids)}}, "count resources' leases");
  if (!h.ok()) return h.status();
  for (int i = 0; i < PQntuples(h->get()); ++i) {
    held[{Text(*h, i, 0), Text(*h, i, 1)}] = std::atoi(PQgetvalue(h->get(), i, 2));
  }
  return held;
}

// ClaimWithLeases' third step: takes the plan's leases in its order, into `tokens`. A job one
// of whose leases another replica took since the slots were counted is dropped, and the
// leases it took are given back. Returns the sequences of the jobs that have all theirs.
StatusOr<std::vector<std::string>> PostgresStore::TakePlannedLeases(
    Link& link, const std::vector<ClaimCandidate>& candidates, const ClaimPlan& plan,
    double lease_seconds, std::vector<std::vector<std::uint64_t>>& tokens) {
  auto need = [&](const ClaimPlan::Take& t) -> const LeaseNeed& {
    return candidates[plan.chosen[t.job]].needs[t.need];
  };
  std::vector<bool> lost(plan.chosen.size(), false);
  // The takes of each resource (adjacent: the plan's takes are in (group, id) order), taken a
  // batch of resources at a time, one statement each (kTakeSlots). A batch ends with a resource
  // of several slots, so that a slot of it lost to another replica is tried again before any
  // resource after it is taken: the takes stay in the plan's order.
  std::vector<std::vector<ClaimPlan::Take>> batch;
  auto take_batch = [&]() -> Status {
    std::vector<std::vector<ClaimPlan::Take>> waiting;  // each resource's takes still untaken
    for (std::vector<ClaimPlan::Take>& resource : batch) {
      // A job that lost a lease earlier takes no more (it is dropped).
      std::erase_if(resource, [&](const ClaimPlan::Take& t) { return lost[t.job]; });
      if (!resource.empty()) waiting.push_back(std::move(resource));
    }
    batch.clear();
    for (int round = 0; !waiting.empty(); ++round) {
      std::vector<std::string> groups, ids, limits, counts;
      for (const std::vector<ClaimPlan::Take>& resource : waiting) {
        const LeaseNeed& n = need(resource.front());
        groups.push_back(n.group);
        ids.push_back(n.id);
        limits.push_back(std::to_string(n.limit));
        counts.push_back(std::to_string(resource.size()));
      }
      StatusOr<Result> r = Exec(link, kTakeSlots,
                                {{TextArray(groups)},
                                 {TextArray(ids)},
                                 {TextArray(limits)},
                                 {TextArray(counts)},
                                 {replica_},
                                 {Number(lease_seconds)}},
                                "take a claim's leases");
      if (!r.ok()) return r.status();
      // Each resource's tokens go to its takes in claim order.
      std::vector<std::size_t> given(waiting.size(), 0);
      for (int i = 0; i < PQntuples(r->get()); ++i) {
        const std::size_t place = std::strtoull(PQgetvalue(r->get(), i, 0), nullptr, 10) - 1;
        const ClaimPlan::Take& t = waiting.at(place).at(given[place]++);
        tokens[t.job][t.need] = std::strtoull(PQgetvalue(r->get(), i, 1), nullptr, 10);
      }
      std::vector<ClaimPlan::Take> retry;
      for (std::size_t k = 0; k < waiting.size(); ++k) {
        for (std::size_t i = given[k]; i < waiting[k].size(); ++i) {
          // Another replica took the slot since it was counted (or every slot is held).
          if (need(waiting[k][i]).limit > 1 && k + 1 == waiting.size()) {
            retry.push_back(waiting[k][i]);
          } else {
            lost[waiting[k][i].job] = true;
          }
        }
      }
      waiting.clear();
      if (retry.empty()) break;
      // The batch's last resource, of several slots: again while it has a free slot, at most
      // its number of slots in rounds (a claim that raced another for one of its slots does not
      // come back without it while one is free).
      const LeaseNeed& n = need(retry.front());
      StatusOr<int> free = FreeSlots(link, n);
      if (!free.ok()) return free.status();
      if (*free == 0 || round + 1 >= n.limit) {
        for (const ClaimPlan::Take& t : retry) lost[t.job] = true;
        break;
      }
      waiting.push_back(std::move(retry));
    }
    return absl::OkStatus();
  };
  for (std::size_t i = 0; i < plan.takes.size();) {
    const LeaseNeed& n = need(plan.takes[i]);
    std::vector<ClaimPlan::Take> resource;
    for (; i < plan.takes.size() && need(plan.takes[i]).group == n.group &&
           need(plan.takes[i]).id == n.id;
         ++i) {
      resource.push_back(plan.takes[i]);
    }
    batch.push_back(std::move(resource));
    if (n.limit > 1 || i == plan.takes.size()) {
      if (Status s = take_batch(); !s.ok()) return s;
    }
  }
  std::vector<std::string> claimed, dropped;
  for (std::size_t j = 0; j < plan.chosen.size(); ++j) {
    if (!lost[j]) {
      claimed.push_back(std::to_string(candidates[plan.chosen[j]].sequence));
      continue;
    }
    for (std::uint64_t token : tokens[j]) {
      if (token != 0) dropped.push_back(std::to_string(token));
    }
  }
  if (!dropped.empty()) {
    Status s =
        Exec(link, kDropLeasesByToken, {{TextArray(dropped)}}, "release a claim's leases").status();
    if (!s.ok()) return s;
  }
  return claimed;
}

}  // namespace fairgate::store::postgres
