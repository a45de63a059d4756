// ToJson of fairgate/snapshot.h.
#include "fairgate/snapshot.h"
#include "nlohmann/json.hpp"

namespace fairgate {

std::string ToJson(const Snapshot& s, int indent) {
  nlohmann::ordered_json tiers = nlohmann::ordered_json::array();
  for (const TierSnapshot& t : s.tiers) {
    tiers.push_back({{"priority", t.priority},
                     {"running", t.running},
                     {"pending", t.pending},
                     {"aged_in", t.aged_in},
                     {"slots_in_use", t.slots_in_use}});
  }
  // A rate limit's bucket. Only where one is set: a snapshot without keeps its shape.
  auto rate = [](const RateSnapshot& r) -> nlohmann::ordered_json {
    return {{"per_second", r.per_second},
            {"burst", r.burst},
            {"tokens", r.tokens},
            {"taken", r.taken},
            {"refused", r.refused}};
  };
  nlohmann::ordered_json types = nlohmann::ordered_json::array();
  for (const TypeSnapshot& t : s.types) {
    types.push_back({{"name", t.name},
                     {"priority", t.priority},
                     {"max_concurrency", t.max_concurrency},
                     {"running", t.running},
                     {"pending", t.pending},
                     {"enqueued", t.enqueued},
                     {"admitted", t.admitted},
                     {"completed", t.completed},
                     {"cancelled", t.cancelled},
                     {"expired", t.expired},
                     {"joined", t.joined},
                     {"borrowed", t.borrowed},
                     {"paused", t.paused},
                     {"wait_seconds_sum", t.wait_seconds_sum},
                     {"run_seconds_sum", t.run_seconds_sum}});
    if (t.rate_limit) types.back()["rate_limit"] = rate(*t.rate_limit);
    if (t.shedding) {
      types.back()["shedding"] = {{"standing", t.shedding->standing}, {"shed", t.shedding->shed}};
    }
  }
  nlohmann::ordered_json heaviest = nlohmann::ordered_json::array();
  for (const KeyCost& k : s.heaviest_keys) {
    heaviest.push_back({{"key", k.key}, {"accumulated_cost", k.accumulated_cost}});
  }
  nlohmann::ordered_json workers = nlohmann::ordered_json::array();
  for (const WorkerSnapshot& w : s.workers) {
    workers.push_back({{"name", w.name},
                       {"slots", w.slots},
                       {"slots_in_use", w.slots_in_use},
                       {"types", w.types}});
  }
  nlohmann::ordered_json json = {{"max_concurrency", s.max_concurrency},
                                 {"capacity", s.capacity},
                                 {"running", s.running},
                                 {"slots_in_use", s.slots_in_use},
                                 {"pending", s.pending},
                                 {"tiers", tiers},
                                 {"types", types},
                                 {"keys_tracked", s.keys_tracked},
                                 {"estimates_tracked", s.estimates_tracked},
                                 {"paused_keys", s.paused_keys},
                                 {"workers", workers},
                                 {"types_without_worker", s.types_without_worker},
                                 {"rejected", s.rejected},
                                 {"keys_evicted", s.keys_evicted},
                                 {"aging_promotions", s.aging_promotions},
                                 {"waited_on_conflict", s.waited_on_conflict},
                                 {"waited_on_capacity", s.waited_on_capacity},
                                 {"heaviest_keys", heaviest}};
  if (s.rate_limit) json["rate_limit"] = rate(*s.rate_limit);
  if (s.keys_held_by_rate) json["keys_held_by_rate"] = *s.keys_held_by_rate;
  // Key names come from callers: replace what is not UTF-8 rather than throw.
  return json.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace fairgate
