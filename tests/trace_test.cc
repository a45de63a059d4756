// ParseTrace accepts the format of DESIGN.md with its defaults, and refuses every bad input with
// one line naming the file, the job index (or type) and the field.
#include "sim/trace.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "doctest/doctest.h"

namespace fairgate::sim {
namespace {
namespace trace_test {

constexpr char kMinimal[] = R"({"capacity": 3,
  "types": {"clone": {"priority": 8, "max_concurrency": 2}},
  "jobs": [{"type": "clone", "id": "linux", "arrival": 0, "duration": 4}]})";

TEST_CASE("Trace.Defaults.OptionalFieldsTakeTheirDocumentedDefaults") {
  StatusOr<Trace> trace = ParseTrace(kMinimal, "t.json");
  REQUIRE(trace.ok());
  CHECK(trace->mode == "default");
  CHECK(trace->options.rule.reconcile);
  CHECK_FALSE(trace->options.rule.idle_catch_up);
  CHECK(trace->options.rule.alpha == 0.3);
  CHECK(trace->options.rule.max_concurrency == 3);
  CHECK_FALSE(trace->until.has_value());
  REQUIRE(trace->types.size() == 1);
  CHECK(trace->types[0].second.conflict_group.empty());
  CHECK(trace->types[0].second.default_cost == 1.0);
  REQUIRE(trace->jobs.size() == 1);
  CHECK(trace->jobs[0].key.empty());
  CHECK_FALSE(trace->jobs[0].cost.has_value());
}

TEST_CASE("Trace.Fields.EverySwitchAndOptionalFieldIsRead") {
  StatusOr<Trace> trace = ParseTrace(R"({"mode": "seed", "reconcile": true, "idle_catch_up": true,
    "capacity": 2, "alpha": 0.5, "until": 7.5,
    "types": {"fetch": {"priority": 4, "max_concurrency": 3, "conflict_group": "git",
                        "default_cost": 2.5}},
    "jobs": [{"type": "fetch", "id": "r", "key": "k", "arrival": 1.25, "duration": 2,
              "cost": 9}]})",
                                     "t.json");
  REQUIRE(trace.ok());
  CHECK(trace->mode == "seed");
  CHECK(trace->options.rule.reconcile);
  CHECK(trace->options.rule.idle_catch_up);
  CHECK(trace->options.rule.alpha == 0.5);
  CHECK(trace->until == 7.5);
  CHECK(trace->types[0].second ==
        JobTypeConfig{
            .default_cost = 2.5, .max_concurrency = 3, .conflict_group = "git", .priority = 4});
  CHECK(trace->jobs[0].key == "k");
  CHECK(trace->jobs[0].arrival == 1.25);
  CHECK(trace->jobs[0].cost == 9);
}

TEST_CASE("Trace.Extensions.AgingWeightsLimitsAndShortestFirstAreRead") {
  StatusOr<Trace> trace = ParseTrace(R"({"capacity": 2, "shortest_first": true,
    "aging": {"grace": 5, "interval": 2.5, "ceiling": 8},
    "default_key_limits": {"max_running": 3},
    "keys": {"prod": {"weight": 3}, "backup": {"max_running": 2, "min_running": 1}},
    "types": {"clone": {"priority": 8, "max_concurrency": 2, "shortest_first": true}},
    "jobs": []})",
                                     "t.json");
  REQUIRE(trace.ok());
  REQUIRE(trace->options.rule.aging.has_value());
  CHECK(*trace->options.rule.aging == AgingConfig{Seconds(5), Seconds(2.5), 8});
  CHECK(trace->options.rule.shortest_first);
  CHECK(trace->options.rule.default_key_limits == KeyLimits{.max_running = 3});
  CHECK(trace->types[0].second.shortest_first);
  REQUIRE(trace->keys.size() == 2);
  CHECK(trace->keys[0].first == "backup");
  CHECK_FALSE(trace->keys[0].second.weight.has_value());
  CHECK(trace->keys[0].second.limits == KeyLimits{.max_running = 2, .min_running = 1});
  CHECK(trace->keys[1].first == "prod");
  CHECK(trace->keys[1].second.weight == 3.0);
  CHECK_FALSE(trace->keys[1].second.limits.has_value());
}

TEST_CASE("Trace.Groups.KeysGroupsAndTheirWeightsAndLimitsAreRead") {
  StatusOr<Trace> trace =
      ParseTrace(R"({"capacity": 2, "types": {"t": {"priority": 2, "max_concurrency": 2}},
    "jobs": [],
    "keys": {"ci-1": {"group": "ci"}, "ci-2": {"group": "ci", "weight": 2}, "dev": {}},
    "groups": {"ci": {"weight": 0.5, "max_running": 1}},
    "default_group_limits": {"min_running": 1}})",
                 "t.json");
  REQUIRE_MESSAGE(trace.ok(), trace.status().message());
  REQUIRE(trace->keys.size() == 3);
  CHECK(trace->keys[0].second.group == "ci");
  CHECK(trace->keys[1].second.group == "ci");
  CHECK(trace->keys[1].second.weight == 2.0);
  CHECK_FALSE(trace->keys[2].second.group.has_value());
  REQUIRE(trace->groups.size() == 1);
  CHECK(trace->groups[0].first == "ci");
  CHECK(trace->groups[0].second.weight == 0.5);
  CHECK(trace->groups[0].second.limits == GroupLimits{.max_running = 1});
  CHECK(trace->options.rule.default_group_limits == GroupLimits{.min_running = 1});
  REQUIRE(GroupOf(*trace, "ci-2") != nullptr);
  CHECK(*GroupOf(*trace, "ci-2") == "ci");
  CHECK(GroupOf(*trace, "dev") == nullptr);
  CHECK(GroupOf(*trace, "unknown") == nullptr);
}

TEST_CASE("Trace.Types.ConflictLimitAndSlotsAreReadAndDefaultToOne") {
  StatusOr<Trace> trace = ParseTrace(R"({"capacity": 4,
    "types": {"clone": {"priority": 4, "max_concurrency": 4, "conflict_group": "git",
                        "conflict_limit": 2},
              "repack": {"priority": 4, "max_concurrency": 1, "slots": 3},
              "fetch": {"priority": 4, "max_concurrency": 1}},
    "jobs": []})",
                                     "t.json");
  REQUIRE(trace.ok());
  REQUIRE(trace->types.size() == 3);
  for (const auto& [name, config] : trace->types) {
    CHECK(config.conflict_limit == (name == "clone" ? 2 : 1));
    CHECK(config.slots == (name == "repack" ? 3 : 1));
  }
}

TEST_CASE("Trace.CoalescingAndSyncCallersAreRead") {
  StatusOr<Trace> trace = ParseTrace(R"({"capacity": 1,
    "types": {"a": {"priority": 1, "max_concurrency": 1, "coalesce": "join"},
              "b": {"priority": 1, "max_concurrency": 1, "coalesce": "supersede"},
              "c": {"priority": 1, "max_concurrency": 1, "coalesce": "off"},
              "d": {"priority": 1, "max_concurrency": 1}},
    "jobs": [{"type": "a", "id": "r", "arrival": 0, "duration": 1, "sync": true},
             {"type": "a", "id": "r", "arrival": 0, "duration": 1}]})",
                                     "t.json");
  REQUIRE_MESSAGE(trace.ok(), trace.status().message());
  CHECK(trace->types[0].second.coalesce == Coalesce::kJoin);
  CHECK(trace->types[1].second.coalesce == Coalesce::kSupersede);
  CHECK(trace->types[2].second.coalesce == Coalesce::kOff);
  CHECK(trace->types[3].second.coalesce == Coalesce::kOff);
  CHECK(trace->jobs[0].sync);
  CHECK_FALSE(trace->jobs[1].sync);
}

TEST_CASE("Trace.MachineAndAdaptiveCapacityAreRead") {
  StatusOr<Trace> trace = ParseTrace(R"({"capacity": 4, "machine": {"cores": 2},
    "adaptive_capacity": {"min": 2, "interval": 0.5, "high": 0.3, "low": 0.1, "decrease": 0.5},
    "types": {}, "jobs": []})",
                                     "t.json");
  REQUIRE_MESSAGE(trace.ok(), trace.status().message());
  CHECK(trace->cores == 2);
  CHECK(trace->options.rule.shortest_first_aging == 0);
  REQUIRE(trace->options.rule.adaptive_capacity.has_value());
  const AdaptiveCapacity& rule = *trace->options.rule.adaptive_capacity;
  CHECK(rule.min == 2);
  CHECK(rule.interval == Seconds(0.5));
  CHECK(rule.high == 0.3);
  CHECK(rule.low == 0.1);
  CHECK(rule.decrease == 0.5);
  // Unset fields take the defaults.
  trace = ParseTrace(R"({"capacity": 4, "machine": {"cores": 2}, "adaptive_capacity": {},
    "types": {}, "jobs": []})",
                     "t.json");
  REQUIRE(trace.ok());
  CHECK(trace->options.rule.adaptive_capacity->interval == AdaptiveCapacity{}.interval);
}

TEST_CASE("Trace.TheLatencyRuleIsRead") {
  StatusOr<Trace> trace = ParseTrace(R"({"capacity": 4, "machine": {"cores": 2},
    "latency_capacity": {"min": 2, "interval": 0.5, "remeasure_every": 30},
    "types": {}, "jobs": []})",
                                     "t.json");
  REQUIRE_MESSAGE(trace.ok(), trace.status().message());
  REQUIRE(trace->options.rule.latency_capacity.has_value());
  const LatencyCapacity& rule = *trace->options.rule.latency_capacity;
  CHECK(rule.min == 2);
  CHECK(rule.interval == Seconds(0.5));
  CHECK(rule.remeasure_every == 30);
  trace = ParseTrace(R"({"capacity": 4, "machine": {"cores": 2}, "latency_capacity": {},
    "types": {}, "jobs": []})",
                     "t.json");
  REQUIRE(trace.ok());
  CHECK(trace->options.rule.latency_capacity->remeasure_every == LatencyCapacity{}.remeasure_every);
  CHECK(trace->options.rule.latency_capacity->min == 1);
}

TEST_CASE("Trace.RateLimitsAreRead") {
  StatusOr<Trace> trace = ParseTrace(R"({"capacity": 1, "rate_limit": {"per_second": 0.5},
    "types": {"clone": {"priority": 1, "max_concurrency": 1,
                        "rate_limit": {"per_second": 3, "burst": 2.5}}},
    "jobs": []})",
                                     "t.json");
  REQUIRE_MESSAGE(trace.ok(), trace.status().message());
  CHECK(trace->options.rule.rate_limit == RateLimit{0.5, 1});
  CHECK(trace->types[0].second.rate_limit == RateLimit{3, 2.5});
  StatusOr<Trace> keyed = ParseTrace(R"({"capacity": 1,
    "default_key_limits": {"rate_limit": {"per_second": 2}},
    "keys": {"ci": {"weight": 2, "rate_limit": {"per_second": 0.5, "burst": 3}}},
    "types": {"clone": {"priority": 1, "max_concurrency": 1}}, "jobs": []})",
                                     "t.json");
  REQUIRE_MESSAGE(keyed.ok(), keyed.status().message());
  CHECK(keyed->options.rule.default_key_limits.rate_limit == RateLimit{2, 1});
  REQUIRE(keyed->keys.size() == 1);
  REQUIRE(keyed->keys[0].second.limits.has_value());
  CHECK(keyed->keys[0].second.limits->rate_limit == RateLimit{0.5, 3});
}

TEST_CASE("Trace.LendingIsRead") {
  auto lending = [](const char* field) {
    StatusOr<Trace> trace = ParseTrace(
        absl::StrCat(R"({"capacity": 4, "types": {}, "jobs": [])", field, "}"), "t.json");
    REQUIRE_MESSAGE(trace.ok(), trace.status().message());
    return trace->options.rule.lending;
  };
  CHECK(lending("") == TierLending{});  // the default mode's
  CHECK(lending(R"(, "mode": "seed")") == std::nullopt);
  CHECK(lending(R"(, "lending": false)") == std::nullopt);
  CHECK(lending(R"(, "mode": "seed", "lending": true)") == TierLending{});
  CHECK(lending(R"(, "lending": {"kept_back": 0.5})") == TierLending{0.5});
}

TEST_CASE("Trace.PausesAndQueueWaitLimitsAreRead") {
  StatusOr<Trace> trace = ParseTrace(R"({"capacity": 1,
    "types": {"clone": {"priority": 1, "max_concurrency": 1, "max_queue_wait": 2.5}},
    "jobs": [],
    "pauses": [{"type": "clone", "from": 1, "until": 3}, {"key": "a", "from": 0.5}]})",
                                     "t.json");
  REQUIRE_MESSAGE(trace.ok(), trace.status().message());
  CHECK(trace->types[0].second.max_queue_wait == Seconds(2.5));
  REQUIRE(trace->pauses.size() == 2);
  CHECK(trace->pauses[0].type == "clone");
  CHECK_FALSE(trace->pauses[0].key.has_value());
  CHECK(trace->pauses[0].from == 1);
  CHECK(trace->pauses[0].until == 3.0);
  CHECK(trace->pauses[1].key == "a");
  CHECK_FALSE(trace->pauses[1].until.has_value());
}

TEST_CASE("Trace.Types.SameTypeTwiceWithTheSameConfigIsAccepted") {
  StatusOr<Trace> trace = ParseTrace(R"({"capacity": 1,
    "types": {"a": {"priority": 1, "max_concurrency": 1},
              "a": {"priority": 1, "max_concurrency": 1}}, "jobs": []})",
                                     "t.json");
  REQUIRE(trace.ok());
  CHECK(trace->types.size() == 1);
}

struct BadCase {
  std::string what;
  std::string text;
  std::string message;
};

std::string Job(const std::string& fields) {
  return R"({"capacity": 2, "types": {"clone": {"priority": 1, "max_concurrency": 1}},
    "jobs": [{"type": "clone", "id": "a", "arrival": 0, "duration": 1}, {)" +
         fields + "}]}";
}

TEST_CASE("Trace.BadInput.OneLineNamingFileJobAndField") {
  const BadCase cases[] = {
      {"empty file", "", "bad.json: empty file, expected a JSON object"},
      {"blank file", " \n\t", "bad.json: empty file, expected a JSON object"},
      {"not JSON", "capacity = 3", "bad.json: not valid JSON: "},
      {"truncated JSON", R"({"capacity": 3, "types": {)",
       "bad.json: field 'types': not valid JSON"},
      {"not an object", "[1, 2]", "bad.json: the trace must be a JSON object"},
      {"missing capacity", R"({"types": {}, "jobs": []})", "bad.json: field 'capacity': missing"},
      {"capacity zero", R"({"capacity": 0, "types": {}, "jobs": []})",
       "bad.json: field 'capacity': must be >= 1, got 0"},
      {"capacity fractional", R"({"capacity": 2.5, "types": {}, "jobs": []})",
       "bad.json: field 'capacity': must be a whole number"},
      {"capacity a string", R"({"capacity": "8", "types": {}, "jobs": []})",
       "bad.json: field 'capacity': must be a number"},
      {"unknown mode", R"({"mode": "fast", "capacity": 1, "types": {}, "jobs": []})",
       "bad.json: field 'mode': must be \"seed\" or \"default\", got \"fast\""},
      {"switch not a bool", R"({"reconcile": 1, "capacity": 1, "types": {}, "jobs": []})",
       "bad.json: field 'reconcile': must be true or false"},
      {"alpha zero", R"({"alpha": 0, "capacity": 1, "types": {}, "jobs": []})",
       "bad.json: field 'alpha': must be in (0, 1], got 0"},
      {"alpha above one", R"({"alpha": 1.5, "capacity": 1, "types": {}, "jobs": []})",
       "bad.json: field 'alpha': must be in (0, 1], got 1.5"},
      {"negative until", R"({"until": -1, "capacity": 1, "types": {}, "jobs": []})",
       "bad.json: field 'until': must be >= 0, got -1"},
      {"unknown top field", R"({"capacty": 1, "capacity": 1, "types": {}, "jobs": []})",
       "bad.json: field 'capacty': unknown field"},
      {"missing types", R"({"capacity": 1, "jobs": []})", "bad.json: field 'types': missing"},
      {"types an array", R"({"capacity": 1, "types": [], "jobs": []})",
       "bad.json: field 'types': must be an object of job types"},
      {"missing jobs", R"({"capacity": 1, "types": {}})", "bad.json: field 'jobs': missing"},
      {"jobs an object", R"({"capacity": 1, "types": {}, "jobs": {}})",
       "bad.json: field 'jobs': must be an array of jobs"},
      {"type missing priority", R"({"capacity": 1, "types": {"t": {"max_concurrency": 1}},
        "jobs": []})",
       "bad.json: type 't': field 'priority': missing"},
      {"type priority zero", R"({"capacity": 1,
        "types": {"t": {"priority": 0, "max_concurrency": 1}}, "jobs": []})",
       "bad.json: type 't': field 'priority': must be >= 1, got 0"},
      {"type max_concurrency zero", R"({"capacity": 1,
        "types": {"t": {"priority": 1, "max_concurrency": 0}}, "jobs": []})",
       "bad.json: type 't': field 'max_concurrency': must be >= 1, got 0"},
      {"type negative default_cost", R"({"capacity": 1,
        "types": {"t": {"priority": 1, "max_concurrency": 1, "default_cost": -2}}, "jobs": []})",
       "bad.json: type 't': field 'default_cost': must be >= 0, got -2"},
      {"type group not a string", R"({"capacity": 1,
        "types": {"t": {"priority": 1, "max_concurrency": 1, "conflict_group": 3}}, "jobs": []})",
       "bad.json: type 't': field 'conflict_group': must be a string"},
      {"type unknown field", R"({"capacity": 1,
        "types": {"t": {"priority": 1, "max_concurrency": 1, "cap": 3}}, "jobs": []})",
       "bad.json: type 't': field 'cap': unknown field"},
      {"aging without interval", R"({"capacity": 1, "types": {}, "jobs": [],
        "aging": {"grace": 1, "ceiling": 8}})",
       "bad.json: aging: field 'interval': missing"},
      {"aging interval zero", R"({"capacity": 1, "types": {}, "jobs": [],
        "aging": {"grace": 1, "interval": 0, "ceiling": 8}})",
       "bad.json: aging: field 'interval': must be > 0"},
      {"aging negative grace", R"({"capacity": 1, "types": {}, "jobs": [],
        "aging": {"grace": -1, "interval": 1, "ceiling": 8}})",
       "bad.json: aging: field 'grace': must be >= 0, got -1"},
      {"aging ceiling zero", R"({"capacity": 1, "types": {}, "jobs": [],
        "aging": {"grace": 0, "interval": 1, "ceiling": 0}})",
       "bad.json: aging: field 'ceiling': must be >= 1, got 0"},
      {"aging unknown field", R"({"capacity": 1, "types": {}, "jobs": [],
        "aging": {"grace": 0, "interval": 1, "ceiling": 2, "step": 1}})",
       "bad.json: aging: field 'step': unknown field"},
      {"key weight zero", R"({"capacity": 1, "types": {}, "jobs": [],
        "keys": {"prod": {"weight": 0}}})",
       "bad.json: key 'prod': field 'weight': must be > 0"},
      {"key max_running zero", R"({"capacity": 1, "types": {}, "jobs": [],
        "keys": {"prod": {"max_running": 0}}})",
       "bad.json: key 'prod': field 'max_running': must be >= 1, got 0"},
      {"key min above max", R"({"capacity": 1, "types": {}, "jobs": [],
        "keys": {"prod": {"max_running": 1, "min_running": 2}}})",
       "bad.json: key 'prod': field 'min_running': must be <= max_running (1), got 2"},
      {"key unknown field", R"({"capacity": 1, "types": {}, "jobs": [],
        "keys": {"prod": {"share": 2}}})",
       "bad.json: key 'prod': field 'share': unknown field"},
      {"keys an array", R"({"capacity": 1, "types": {}, "jobs": [], "keys": []})",
       "bad.json: field 'keys': must be an object of fairness keys"},
      {"key group empty", R"({"capacity": 1, "types": {}, "jobs": [],
        "keys": {"prod": {"group": ""}}})",
       "bad.json: key 'prod': field 'group': must not be empty"},
      {"group weight zero", R"({"capacity": 1, "types": {}, "jobs": [],
        "groups": {"org": {"weight": 0}}})",
       "bad.json: group 'org': field 'weight': must be > 0"},
      {"group min above max", R"({"capacity": 1, "types": {}, "jobs": [],
        "groups": {"org": {"max_running": 1, "min_running": 2}}})",
       "bad.json: group 'org': field 'min_running': must be <= max_running (1), got 2"},
      {"group unknown field", R"({"capacity": 1, "types": {}, "jobs": [],
        "groups": {"org": {"rate_limit": {}}}})",
       "bad.json: group 'org': field 'rate_limit': unknown field"},
      {"groups an array", R"({"capacity": 1, "types": {}, "jobs": [], "groups": []})",
       "bad.json: field 'groups': must be an object of groups of keys"},
      {"default group limits max zero", R"({"capacity": 1, "types": {}, "jobs": [],
        "default_group_limits": {"max_running": 0}})",
       "bad.json: default_group_limits: field 'max_running': must be >= 1, got 0"},
      {"default limits min negative", R"({"capacity": 1, "types": {}, "jobs": [],
        "default_key_limits": {"min_running": -1}})",
       "bad.json: default_key_limits: field 'min_running': must be >= 0, got -1"},
      {"shortest_first not a bool", R"({"capacity": 1, "types": {}, "jobs": [],
        "shortest_first": "yes"})",
       "bad.json: field 'shortest_first': must be true or false"},
      {"type shortest_first not a bool", R"({"capacity": 1,
        "types": {"t": {"priority": 1, "max_concurrency": 1, "shortest_first": 1}}, "jobs": []})",
       "bad.json: type 't': field 'shortest_first': must be true or false"},
      {"slots above the priority", R"({"capacity": 4,
        "types": {"t": {"priority": 2, "max_concurrency": 1, "slots": 3}}, "jobs": []})",
       "bad.json: job type 't': slots must be >= 1 and at most its priority (2), got 3"},
      {"conflict_limit 0", R"({"capacity": 4,
        "types": {"t": {"priority": 2, "max_concurrency": 1, "conflict_group": "git",
                        "conflict_limit": 0}}, "jobs": []})",
       "bad.json: type 't': field 'conflict_limit': must be >= 1, got 0"},
      {"type not an object", R"({"capacity": 1, "types": {"t": 5}, "jobs": []})",
       "bad.json: type 't': must be an object"},
      {"empty type name", R"({"capacity": 1,
        "types": {"": {"priority": 1, "max_concurrency": 1}}, "jobs": []})",
       "bad.json: types: a type name is empty"},
      {"type twice, different configs", R"({"capacity": 1,
        "types": {"t": {"priority": 1, "max_concurrency": 1},
                  "t": {"priority": 2, "max_concurrency": 1}}, "jobs": []})",
       "bad.json: type 't': registered twice with different configs"},
      {"type number too large", R"({"capacity": 1,
        "types": {"t": {"priority": 1, "max_concurrency": 1, "default_cost": 1e999}}, "jobs": []})",
       "bad.json: type 't': field 'default_cost': not valid JSON"},
      {"job not an object",
       R"({"capacity": 1, "types": {"t": {"priority": 1, "max_concurrency": 1}}, "jobs": [7]})",
       "bad.json: job 0: must be an object"},
      {"job missing type", Job(R"("id": "b", "arrival": 0, "duration": 1)"),
       "bad.json: job 1: field 'type': missing"},
      {"job missing id", Job(R"("type": "clone", "arrival": 0, "duration": 1)"),
       "bad.json: job 1: field 'id': missing"},
      {"job missing arrival", Job(R"("type": "clone", "id": "b", "duration": 1)"),
       "bad.json: job 1: field 'arrival': missing"},
      {"job missing duration", Job(R"("type": "clone", "id": "b", "arrival": 0)"),
       "bad.json: job 1: field 'duration': missing"},
      {"job unknown type", Job(R"("type": "gc", "id": "b", "arrival": 0, "duration": 1)"),
       "bad.json: job 1: field 'type': unknown job type 'gc'"},
      {"job type not a string", Job(R"("type": 1, "id": "b", "arrival": 0, "duration": 1)"),
       "bad.json: job 1: field 'type': must be a string"},
      {"job empty id", Job(R"("type": "clone", "id": "", "arrival": 0, "duration": 1)"),
       "bad.json: job 1: field 'id': must not be empty"},
      {"job key not a string",
       Job(R"("type": "clone", "id": "b", "key": null, "arrival": 0, "duration": 1)"),
       "bad.json: job 1: field 'key': must be a string"},
      {"job arrival a string", Job(R"("type": "clone", "id": "b", "arrival": "0", "duration": 1)"),
       "bad.json: job 1: field 'arrival': must be a number"},
      {"job negative arrival", Job(R"("type": "clone", "id": "b", "arrival": -3, "duration": 1)"),
       "bad.json: job 1: field 'arrival': must be >= 0, got -3"},
      {"job negative duration", Job(R"("type": "clone", "id": "b", "arrival": 0, "duration": -1)"),
       "bad.json: job 1: field 'duration': must be >= 0, got -1"},
      {"job negative cost",
       Job(R"("type": "clone", "id": "b", "arrival": 0, "duration": 1, "cost": -0.5)"),
       "bad.json: job 1: field 'cost': must be >= 0, got -0.5"},
      {"job non-finite duration",
       Job(R"("type": "clone", "id": "b", "arrival": 0, "duration": 1e400)"),
       "bad.json: job 1: field 'duration': not valid JSON"},
      {"job unknown field",
       Job(R"("type": "clone", "id": "b", "arrival": 0, "duration": 1, "prio": 2)"),
       "bad.json: job 1: field 'prio': unknown field"},
      {"pause of both a type and a key",
       R"({"capacity": 1, "types": {"clone": {"priority": 1, "max_concurrency": 1}}, "jobs": [],
           "pauses": [{"type": "clone", "key": "a", "from": 0}]})",
       "bad.json: pause 0: field 'type': give exactly one of type and key"},
      {"pause of an unknown type",
       R"({"capacity": 1, "types": {}, "jobs": [], "pauses": [{"type": "x", "from": 0}]})",
       "bad.json: pause 0: field 'type': unknown job type 'x'"},
      {"pause ending before it starts",
       R"({"capacity": 1, "types": {}, "jobs": [], "pauses": [{"key": "a", "from": 2, "until": 1}]})",
       "bad.json: pause 0: field 'until': must be >= from"},
      {"pauses not an array", R"({"capacity": 1, "types": {}, "jobs": [], "pauses": {}})",
       "bad.json: field 'pauses': must be an array of pauses"},
      {"negative queue-wait limit",
       R"({"capacity": 1, "types": {"t": {"priority": 1, "max_concurrency": 1,
           "max_queue_wait": -2}}, "jobs": []})",
       "bad.json: type 't': field 'max_queue_wait': must be >= 0, got -2"},
      {"rate limit not an object",
       R"({"capacity": 1, "types": {"t": {"priority": 1, "max_concurrency": 1,
           "rate_limit": 5}}, "jobs": []})",
       "bad.json: type 't': rate_limit: must be an object"},
      {"rate limit without its rate",
       R"({"capacity": 1, "rate_limit": {"burst": 2}, "types": {}, "jobs": []})",
       "bad.json: rate_limit: field 'per_second'"},
      {"rate limit with an unknown field",
       R"({"capacity": 1, "rate_limit": {"per_second": 1, "per_minute": 2}, "types": {},
           "jobs": []})",
       "bad.json: rate_limit: field 'per_minute': unknown field"},
      {"lending of a bad kind", R"({"capacity": 1, "lending": 1, "types": {}, "jobs": []})",
       "bad.json: lending: must be false, true or an object {\"kept_back\": s}"},
      {"lending that keeps back every slot",
       R"({"capacity": 1, "lending": {"kept_back": 1}, "types": {}, "jobs": []})",
       "bad.json: lending: field 'kept_back': must be in [0, 1), got 1"},
      {"lending with an unknown field",
       R"({"capacity": 1, "lending": {"share": 0.5}, "types": {}, "jobs": []})",
       "bad.json: lending: field 'share': unknown field"},
      {"unknown coalescing",
       R"({"capacity": 1, "types": {"t": {"priority": 1, "max_concurrency": 1,
           "coalesce": "merge"}}, "jobs": []})",
       "bad.json: type 't': field 'coalesce': must be \"off\", \"join\" or \"supersede\", got "
       "\"merge\""},
      {"adaptive capacity without a machine",
       R"({"capacity": 2, "adaptive_capacity": {}, "types": {}, "jobs": []})",
       "bad.json: adaptive_capacity: needs a machine (its pressure is the signal)"},
      {"adaptive capacity out of range",
       R"({"capacity": 2, "machine": {"cores": 1}, "adaptive_capacity": {"min": 3},
           "types": {}, "jobs": []})",
       "bad.json: adaptive_capacity: adaptive_capacity.min must be in [1, max_concurrency 2], "
       "got 3"},
      {"the latency rule without a machine",
       R"({"capacity": 2, "latency_capacity": {}, "types": {}, "jobs": []})",
       "bad.json: latency_capacity: needs a machine (its slowdown is the signal)"},
      {"the latency rule with adaptive capacity",
       R"({"capacity": 2, "machine": {"cores": 1}, "adaptive_capacity": {},
           "latency_capacity": {}, "types": {}, "jobs": []})",
       "bad.json: latency_capacity: not with adaptive_capacity (one rule moves the cap)"},
      {"the latency rule out of range",
       R"({"capacity": 2, "machine": {"cores": 1}, "latency_capacity": {"interval": 0},
           "types": {}, "jobs": []})",
       "bad.json: latency_capacity: latency_capacity.interval must be finite and > 0, got 0"},
      {"the latency rule re-measuring too often",
       R"({"capacity": 2, "machine": {"cores": 1}, "latency_capacity": {"remeasure_every": 1},
           "types": {}, "jobs": []})",
       "bad.json: latency_capacity: field 'remeasure_every': must be >= 2, got 1"},
      {"the latency rule with an unknown field",
       R"({"capacity": 2, "machine": {"cores": 1}, "latency_capacity": {"tolerance": 2},
           "types": {}, "jobs": []})",
       "bad.json: latency_capacity: field 'tolerance': unknown field"},
      {"a machine without cores", R"({"capacity": 2, "machine": {}, "types": {}, "jobs": []})",
       "bad.json: machine: field 'cores': missing"},
      {"periodic without runs",
       R"({"capacity": 1, "types": {"t": {"priority": 1, "max_concurrency": 1}}, "jobs": [],
           "periodic": [{"type": "t", "id": "r", "interval": 5, "duration": 1}]})",
       "bad.json: periodic 0: field 'runs': missing"},
      {"periodic with a zero interval",
       R"({"capacity": 1, "types": {"t": {"priority": 1, "max_concurrency": 1}}, "jobs": [],
           "periodic": [{"type": "t", "id": "r", "interval": 0, "duration": 1, "runs": 2}]})",
       "bad.json: periodic 0: field 'interval': must be > 0"},
      {"periodic of an unknown type",
       R"({"capacity": 1, "types": {}, "jobs": [],
           "periodic": [{"type": "x", "id": "r", "interval": 1, "duration": 1, "runs": 2}]})",
       "bad.json: periodic 0: field 'type': unknown job type 'x'"},
      {"reserve-after negative",
       R"({"capacity": 1, "types": {}, "jobs": [], "sole_worker_reserve_after": -1})",
       "bad.json: field 'sole_worker_reserve_after': must be > 0, got -1"},
      {"reserve-after zero",
       R"({"capacity": 1, "types": {}, "jobs": [], "sole_worker_reserve_after": 0})",
       "bad.json: field 'sole_worker_reserve_after': must be > 0, got 0"},
      {"a type wider than every worker that names it",
       R"({"capacity": 4, "types": {"wide": {"priority": 2, "max_concurrency": 1, "slots": 2}},
           "jobs": [], "workers": [{"name": "v", "types": ["wide"]}]})",
       "bad.json: type 'wide': its jobs take 2 slots, but no worker that names it has more than "
       "1: none could ever run"},
      {"a field given twice", R"({"capacity": 1, "capacity": 2, "types": {}, "jobs": []})",
       "bad.json: field 'capacity': is given twice"},
      {"a job's field given twice",
       R"({"capacity": 1, "types": {"t": {"priority": 1, "max_concurrency": 1}},
           "jobs": [{"type": "t", "id": "r", "arrival": 0, "duration": 1},
                    {"type": "t", "id": "r", "arrival": 0, "arrival": 1, "duration": 1}]})",
       "bad.json: job 1: field 'arrival': is given twice"},
      {"a type's field given twice",
       R"({"capacity": 1, "types": {"t": {"priority": 1, "priority": 2, "max_concurrency": 1}},
           "jobs": []})",
       "bad.json: type 't': field 'priority': is given twice"},
      {"a machine's field given twice",
       R"({"capacity": 1, "machine": {"cores": 1, "cores": 2}, "types": {}, "jobs": []})",
       "bad.json: machine: field 'cores': is given twice"},
      {"sync not a boolean",
       R"({"capacity": 1, "types": {"t": {"priority": 1, "max_concurrency": 1}},
           "jobs": [{"type": "t", "id": "r", "arrival": 0, "duration": 1, "sync": 1}]})",
       "bad.json: job 0: field 'sync': must be true or false"},
  };
  for (const BadCase& c : cases) {
    CAPTURE(c.what);
    StatusOr<Trace> trace = ParseTrace(c.text, "bad.json");
    REQUIRE_FALSE(trace.ok());
    CHECK(trace.status().code() == absl::StatusCode::kInvalidArgument);
    const std::string message(trace.status().message());
    CAPTURE(message);
    CHECK(message.rfind(c.message, 0) == 0);  // starts with the expected text
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("Trace.Load.AMissingFileIsNamed") {
  StatusOr<Trace> trace = LoadTrace("/nonexistent/trace.json");
  REQUIRE_FALSE(trace.ok());
  CHECK(trace.status().message() == "/nonexistent/trace.json: cannot open the file");
  // A directory reads as an empty file: named as what it is instead.
  trace = LoadTrace("/tmp");
  REQUIRE_FALSE(trace.ok());
  CHECK(trace.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(trace.status().message() == "/tmp: is a directory, not a trace file");
}

}  // namespace trace_test
}  // namespace
}  // namespace fairgate::sim
