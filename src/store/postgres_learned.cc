// PostgresStore's learned state (estimates, keys' costs, periodic schedules), saved and loaded,
// and keys' costs summed over the replicas that charge them.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
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

// The statements of one kind of cost shared over the fleet: keys' or groups'. Each adds what a
// replica charged, in name order (so that replicas sharing at once lock the rows in one order),
// then sets a row the store did not have yet (or had forgotten) to what was added, then reads.
struct PostgresStore::CostStatements {
  const char* add;
  const char* floor;
  const char* read;
  const char* what;
};
const PostgresStore::CostStatements PostgresStore::kKeyCosts{
    "INSERT INTO fairgate_keys (key, accumulated_cost, idle_since) "
    "SELECT n, cost, idle FROM unnest($1::text[], $2::double precision[], "
    "$3::double precision[]) AS c(n, cost, idle) ORDER BY n "
    "ON CONFLICT (key) DO UPDATE SET accumulated_cost = greatest(0, "
    "fairgate_keys.accumulated_cost + EXCLUDED.accumulated_cost), "
    "idle_since = greatest(fairgate_keys.idle_since, EXCLUDED.idle_since)",
    "UPDATE fairgate_keys SET accumulated_cost = 0 "
    "WHERE accumulated_cost < 0 AND key = ANY($1::text[])",
    "SELECT key, accumulated_cost, idle_since FROM fairgate_keys WHERE key = ANY($1::text[])",
    "share keys' costs"};
const PostgresStore::CostStatements PostgresStore::kGroupCosts{
    "INSERT INTO fairgate_groups (name, accumulated_cost, idle_since) "
    "SELECT n, cost, idle FROM unnest($1::text[], $2::double precision[], "
    "$3::double precision[]) AS c(n, cost, idle) ORDER BY n "
    "ON CONFLICT (name) DO UPDATE SET accumulated_cost = greatest(0, "
    "fairgate_groups.accumulated_cost + EXCLUDED.accumulated_cost), "
    "idle_since = greatest(fairgate_groups.idle_since, EXCLUDED.idle_since)",
    "UPDATE fairgate_groups SET accumulated_cost = 0 "
    "WHERE accumulated_cost < 0 AND name = ANY($1::text[])",
    "SELECT name, accumulated_cost, idle_since FROM fairgate_groups WHERE name = ANY($1::text[])",
    "share groups' costs"};

// A name PostgreSQL's text cannot hold (TextCanHold) is neither shared nor saved: its cost, or its
// estimate or schedule, stays in the replica that has it. Passed to a statement, it would fail
// that statement, and with it every other name's, at every share or flush for as long as the
// replica kept it.
StatusOr<std::vector<SavedKey>> PostgresStore::ShareCosts(
    const CostStatements& sql, const std::vector<SavedKey>& charged,
    const std::vector<std::string>& names_read) {
  std::vector<std::string> names, costs, idle, read;
  for (const SavedKey& k : charged) {
    if (!TextCanHold(k.key)) continue;
    names.push_back(k.key);
    costs.push_back(Number(k.accumulated_cost));
    idle.push_back(Number(k.idle_since));
  }
  for (const std::string& name : names_read) {
    if (TextCanHold(name)) read.push_back(name);
  }
  Session session = pool_.Take();
  Link& link = *session;
  std::vector<SavedKey> totals;
  Status status = pool_.Transaction(link, sql.what, [&]() -> Status {
    totals.clear();
    if (!names.empty()) {
      Status added =
          Exec(link, sql.add, {{TextArray(names)}, {TextArray(costs)}, {TextArray(idle)}}, sql.what)
              .status();
      if (!added.ok()) return added;
      added = Exec(link, sql.floor, {{TextArray(names)}}, sql.what).status();
      if (!added.ok()) return added;
    }
    StatusOr<Result> r = Exec(link, sql.read, {{TextArray(read)}}, sql.what);
    if (!r.ok()) return r.status();
    for (int i = 0; i < PQntuples(r->get()); ++i) {
      totals.push_back({Text(*r, i, 0), Double(*r, i, 1), Double(*r, i, 2)});
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return totals;
}

StatusOr<std::vector<SavedKey>> PostgresStore::ShareKeyCosts(const std::vector<SavedKey>& charged,
                                                             const std::vector<std::string>& keys) {
  return ShareCosts(kKeyCosts, charged, keys);
}

StatusOr<std::vector<SavedKey>> PostgresStore::ShareGroupCosts(
    const std::vector<SavedKey>& charged, const std::vector<std::string>& groups) {
  return ShareCosts(kGroupCosts, charged, groups);
}

Status PostgresStore::SaveLearned(const LearnedState& changed, double forget_estimates_before,
                                  double forget_keys_before) {
  Session session = pool_.Take();
  Link& link = *session;
  return pool_.Transaction(link, "flush", [&]() -> Status {
    // Every estimate saved in one statement (the last value of one given twice), in (type, id)
    // order, so that flushes of several replicas update the rows they share in one order.
    std::map<std::pair<std::string, std::string>, const SavedEstimate*> estimates;
    for (const SavedEstimate& e : changed.estimates) {
      if (TextCanHold(e.type) && TextCanHold(e.id)) estimates[{e.type, e.id}] = &e;
    }
    if (!estimates.empty()) {
      std::vector<std::string> types, ids, seconds, used;
      for (const auto& [name, e] : estimates) {
        types.push_back(e->type);
        ids.push_back(e->id);
        seconds.push_back(Number(e->seconds));
        used.push_back(Number(e->last_used));
      }
      Status s =
          Exec(link,
               "INSERT INTO fairgate_estimates SELECT type, id, seconds, last_used "
               "FROM unnest($1::text[], $2::text[], $3::double precision[], "
               "$4::double precision[]) WITH ORDINALITY AS e(type, id, seconds, "
               "last_used, place) ORDER BY place "
               "ON CONFLICT (type, id) DO UPDATE SET seconds = EXCLUDED.seconds, "
               "last_used = EXCLUDED.last_used",
               {{TextArray(types)}, {TextArray(ids)}, {TextArray(seconds)}, {TextArray(used)}},
               "save estimates")
              .status();
      if (!s.ok()) return s;
    }
    // The keys this flush saves and the idle ones it forgets, locked first and together, in the
    // keys' one order (fairgate_lock_keys, postgres_statements.h), so that a flush and a claim
    // never each hold a key the other waits for, and a flush whose two sets are small apart and
    // large together does not hold some keys and then wait for every other transaction. Then
    // one statement for every key saved (the last value of a key given twice).
    absl::flat_hash_map<std::string, const SavedKey*> last;
    for (const SavedKey& k : changed.keys) {
      if (TextCanHold(k.key)) last[k.key] = &k;
    }
    std::vector<std::string> names, costs, idle;
    for (const auto& [name, k] : last) {
      names.push_back(name);
      costs.push_back(Number(k->accumulated_cost));
      idle.push_back(Number(k->idle_since));
    }
    if (Status s = Exec(link,
                        "SELECT fairgate_lock_keys($1::text[] || "
                        "ARRAY(SELECT key FROM fairgate_keys WHERE idle_since < $2))",
                        {{TextArray(names)}, {Number(forget_keys_before)}}, "lock the keys")
                       .status();
        !s.ok()) {
      return s;
    }
    if (!names.empty()) {
      Status s =
          Exec(link,
               "INSERT INTO fairgate_keys SELECT * FROM unnest($1::text[], "
               "$2::double precision[], $3::double precision[]) "
               "ON CONFLICT (key) DO UPDATE SET accumulated_cost = "
               "EXCLUDED.accumulated_cost, idle_since = EXCLUDED.idle_since",
               {{TextArray(names)}, {TextArray(costs)}, {TextArray(idle)}}, "save keys' costs")
              .status();
      if (!s.ok()) return s;
    }
    // The schedules as the estimates: one statement, in (type, id) order.
    std::map<std::pair<std::string, std::string>, const SavedSchedule*> schedules;
    for (const SavedSchedule& p : changed.schedules) {
      if (TextCanHold(p.type) && TextCanHold(p.id)) schedules[{p.type, p.id}] = &p;
    }
    if (!schedules.empty()) {
      std::vector<std::string> types, ids, ends;
      for (const auto& [name, p] : schedules) {
        types.push_back(p->type);
        ids.push_back(p->id);
        ends.push_back(Number(p->last_run_end));
      }
      Status s =
          Exec(link,
               "INSERT INTO fairgate_schedules SELECT type, id, last_run_end "
               "FROM unnest($1::text[], $2::text[], $3::double precision[]) "
               "WITH ORDINALITY AS p(type, id, last_run_end, place) ORDER BY place "
               "ON CONFLICT (type, id) DO UPDATE SET last_run_end = "
               "EXCLUDED.last_run_end",
               {{TextArray(types)}, {TextArray(ids)}, {TextArray(ends)}}, "save periodic schedules")
              .status();
      if (!s.ok()) return s;
    }
    if (Status s = Exec(link, "DELETE FROM fairgate_estimates WHERE last_used < $1",
                        {{Number(forget_estimates_before)}}, "forget old estimates")
                       .status();
        !s.ok()) {
      return s;
    }
    if (Status s = Exec(link, "DELETE FROM fairgate_keys WHERE idle_since < $1",
                        {{Number(forget_keys_before)}}, "forget idle keys")
                       .status();
        !s.ok()) {
      return s;
    }
    return Exec(link, "DELETE FROM fairgate_groups WHERE idle_since < $1",
                {{Number(forget_keys_before)}}, "forget idle groups")
        .status();
  });
}

StatusOr<LearnedState> PostgresStore::LoadLearned() {
  Session session = pool_.Take();
  Link& link = *session;
  LearnedState state;
  StatusOr<Result> e = pool_.RetryingExec(
      link, "SELECT type, id, seconds, last_used FROM fairgate_estimates", {}, "load estimates");
  if (!e.ok()) return e.status();
  for (int i = 0; i < PQntuples(e->get()); ++i) {
    state.estimates.push_back({Text(*e, i, 0), Text(*e, i, 1), Double(*e, i, 2), Double(*e, i, 3)});
  }
  StatusOr<Result> k = pool_.RetryingExec(
      link, "SELECT key, accumulated_cost, idle_since FROM fairgate_keys", {}, "load keys' costs");
  if (!k.ok()) return k.status();
  for (int i = 0; i < PQntuples(k->get()); ++i) {
    state.keys.push_back({Text(*k, i, 0), Double(*k, i, 1), Double(*k, i, 2)});
  }
  StatusOr<Result> p = pool_.RetryingExec(
      link, "SELECT type, id, last_run_end FROM fairgate_schedules", {}, "load periodic schedules");
  if (!p.ok()) return p.status();
  for (int i = 0; i < PQntuples(p->get()); ++i) {
    state.schedules.push_back({Text(*p, i, 0), Text(*p, i, 1), Double(*p, i, 2)});
  }
  return state;
}

}  // namespace fairgate::store::postgres
