#include "sim/trace.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/arguments.h"
#include "nlohmann/json.hpp"

namespace fairgate::sim {
namespace {

using Json = nlohmann::json;

// Reads the fields of one JSON object; every error names the file, the object and the field.
class ObjectReader {
 public:
  ObjectReader(const Json& object, std::string where) : object_(object), where_(std::move(where)) {}

  Status Error(std::string_view field, std::string_view problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat(where_, ": field '", core::AsAbsl(field), "': ", core::AsAbsl(problem)));
  }

  Status OnlyFields(std::initializer_list<std::string_view> allowed) const {
    for (const auto& [name, value] : object_.items()) {
      bool known = false;
      for (std::string_view a : allowed) known = known || a == name;
      if (!known) return Error(name, "unknown field");
    }
    return absl::OkStatus();
  }

  const Json* Get(std::string_view field) const {
    auto it = object_.find(field);
    return it == object_.end() ? nullptr : &*it;
  }

  // A finite number >= `min`; `std::nullopt` when absent and not required.
  StatusOr<std::optional<double>> Number(std::string_view field, bool required,
                                         double min = 0) const {
    const Json* v = Get(field);
    if (v == nullptr) {
      if (required) return Error(field, "missing");
      return std::optional<double>();
    }
    if (!v->is_number()) return Error(field, "must be a number");
    const double d = v->get<double>();
    if (!std::isfinite(d)) return Error(field, "must be finite");
    if (d < min) return Error(field, absl::StrCat("must be >= ", min, ", got ", d));
    return std::optional<double>(d);
  }

  StatusOr<std::optional<int>> Integer(std::string_view field, bool required, int min) const {
    StatusOr<std::optional<double>> d = Number(field, required, min);
    if (!d.ok()) return d.status();
    if (!d->has_value()) return std::optional<int>();
    if (**d != std::floor(**d) || **d > 1e9) return Error(field, "must be a whole number");
    return std::optional<int>(static_cast<int>(**d));
  }

  StatusOr<std::optional<std::string>> String(std::string_view field, bool required) const {
    const Json* v = Get(field);
    if (v == nullptr) {
      if (required) return Error(field, "missing");
      return std::optional<std::string>();
    }
    if (!v->is_string()) return Error(field, "must be a string");
    return std::optional<std::string>(v->get<std::string>());
  }

  // An array of strings, each not empty; empty when absent.
  StatusOr<std::vector<std::string>> Strings(std::string_view field) const {
    std::vector<std::string> out;
    const Json* v = Get(field);
    if (v == nullptr) return out;
    if (!v->is_array()) return Error(field, "must be an array of strings");
    for (const Json& item : *v) {
      if (!item.is_string() || item.get<std::string>().empty()) {
        return Error(field, "must be an array of non-empty strings");
      }
      out.push_back(item.get<std::string>());
    }
    return out;
  }

  StatusOr<std::optional<bool>> Bool(std::string_view field) const {
    const Json* v = Get(field);
    if (v == nullptr) return std::optional<bool>();
    if (!v->is_boolean()) return Error(field, "must be true or false");
    return std::optional<bool>(v->get<bool>());
  }

 private:
  const Json& object_;
  std::string where_;
};

#define FAIRGATE_ASSIGN_OR_RETURN(lhs, expr)    \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

// {"per_second": r, "burst": b} (fairgate/rate_limit.h): `per_second` required, `burst` 1 when
// not given; the core validates the values.
StatusOr<RateLimit> ParseRateLimit(const Json& value, const std::string& where) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields({"per_second", "burst"}); !s.ok()) return s;
  FAIRGATE_ASSIGN_OR_RETURN(per_second, r.Number("per_second", true));
  FAIRGATE_ASSIGN_OR_RETURN(burst, r.Number("burst", false));
  return RateLimit{*per_second, burst.value_or(1)};
}

// {"target": t, "interval": i} (fairgate/shedding.h): `target` required, `interval` 1 when not
// given; the core validates the values.
StatusOr<Shedding> ParseShedding(const Json& value, const std::string& where) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields({"target", "interval"}); !s.ok()) return s;
  FAIRGATE_ASSIGN_OR_RETURN(target, r.Number("target", true));
  FAIRGATE_ASSIGN_OR_RETURN(interval, r.Number("interval", false));
  return Shedding{Seconds(*target), Seconds(interval.value_or(1))};
}

StatusOr<JobTypeConfig> ParseType(const Json& value, const std::string& where) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields({"priority", "max_concurrency", "conflict_group", "conflict_limit",
                               "default_cost", "shortest_first", "slots", "max_queue_wait",
                               "coalesce", "tags", "rate_limit", "memory", "shedding"});
      !s.ok()) {
    return s;
  }
  JobTypeConfig config;
  FAIRGATE_ASSIGN_OR_RETURN(priority, r.Integer("priority", true, 1));
  FAIRGATE_ASSIGN_OR_RETURN(max_concurrency, r.Integer("max_concurrency", true, 1));
  FAIRGATE_ASSIGN_OR_RETURN(group, r.String("conflict_group", false));
  FAIRGATE_ASSIGN_OR_RETURN(default_cost, r.Number("default_cost", false));
  config.priority = *priority;
  config.max_concurrency = *max_concurrency;
  config.conflict_group = group.value_or("");
  config.default_cost = default_cost.value_or(1.0);
  FAIRGATE_ASSIGN_OR_RETURN(shortest_first, r.Bool("shortest_first"));
  config.shortest_first = shortest_first.value_or(false);
  FAIRGATE_ASSIGN_OR_RETURN(conflict_limit, r.Integer("conflict_limit", false, 1));
  FAIRGATE_ASSIGN_OR_RETURN(slots, r.Integer("slots", false, 1));
  config.conflict_limit = conflict_limit.value_or(1);
  config.slots = slots.value_or(1);
  FAIRGATE_ASSIGN_OR_RETURN(max_queue_wait, r.Number("max_queue_wait", false));
  config.max_queue_wait = Seconds(max_queue_wait.value_or(0));
  FAIRGATE_ASSIGN_OR_RETURN(tags, r.Strings("tags"));
  config.tags = std::move(tags);
  if (const Json* rate = r.Get("rate_limit")) {
    FAIRGATE_ASSIGN_OR_RETURN(limit, ParseRateLimit(*rate, absl::StrCat(where, ": rate_limit")));
    config.rate_limit = limit;
  }
  if (const Json* shedding = r.Get("shedding")) {
    FAIRGATE_ASSIGN_OR_RETURN(parsed, ParseShedding(*shedding, absl::StrCat(where, ": shedding")));
    config.shedding = parsed;
  }
  FAIRGATE_ASSIGN_OR_RETURN(coalesce, r.String("coalesce", false));
  if (coalesce && *coalesce == "join") {
    config.coalesce = Coalesce::kJoin;
  } else if (coalesce && *coalesce == "supersede") {
    config.coalesce = Coalesce::kSupersede;
  } else if (coalesce && *coalesce != "off") {
    return r.Error("coalesce", absl::StrCat("must be \"off\", \"join\" or \"supersede\", got \"",
                                            *coalesce, "\""));
  }
  return config;
}

// {"max_running": N, "min_running": M, "rate_limit": {...}, "rate_per_weight": B}, each
// optional; nullopt when none is given. `where` names the object.
StatusOr<std::optional<KeyLimits>> ParseLimits(const ObjectReader& r, const std::string& where) {
  FAIRGATE_ASSIGN_OR_RETURN(max_running, r.Integer("max_running", false, 1));
  FAIRGATE_ASSIGN_OR_RETURN(min_running, r.Integer("min_running", false, 0));
  const Json* rate = r.Get("rate_limit");
  FAIRGATE_ASSIGN_OR_RETURN(per_weight, r.Bool("rate_per_weight"));
  if (!max_running && !min_running && rate == nullptr && !per_weight) {
    return std::optional<KeyLimits>();
  }
  KeyLimits limits;
  limits.rate_per_weight = per_weight.value_or(false);
  if (max_running) limits.max_running = *max_running;
  if (min_running) limits.min_running = *min_running;
  if (rate != nullptr) {
    FAIRGATE_ASSIGN_OR_RETURN(limit, ParseRateLimit(*rate, absl::StrCat(where, ": rate_limit")));
    limits.rate_limit = limit;
  }
  if (limits.min_running > limits.max_running) {
    return r.Error("min_running", absl::StrCat("must be <= max_running (", limits.max_running,
                                               "), got ", limits.min_running));
  }
  return std::optional<KeyLimits>(limits);
}

StatusOr<TraceKey> ParseKey(const Json& value, const std::string& where) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields(
          {"weight", "max_running", "min_running", "rate_limit", "rate_per_weight", "group"});
      !s.ok()) {
    return s;
  }
  TraceKey key;
  FAIRGATE_ASSIGN_OR_RETURN(weight, r.Number("weight", false));
  if (weight && *weight <= 0) return r.Error("weight", "must be > 0");
  key.weight = weight;
  FAIRGATE_ASSIGN_OR_RETURN(limits, ParseLimits(r, where));
  key.limits = limits;
  FAIRGATE_ASSIGN_OR_RETURN(group, r.String("group", false));
  if (group && group->empty()) return r.Error("group", "must not be empty");
  key.group = group;
  return key;
}

// {"max_running": N, "min_running": M} of a group, each optional; nullopt when none is given.
StatusOr<std::optional<GroupLimits>> ParseGroupLimits(const ObjectReader& r) {
  FAIRGATE_ASSIGN_OR_RETURN(max_running, r.Integer("max_running", false, 1));
  FAIRGATE_ASSIGN_OR_RETURN(min_running, r.Integer("min_running", false, 0));
  if (!max_running && !min_running) return std::optional<GroupLimits>();
  GroupLimits limits;
  if (max_running) limits.max_running = *max_running;
  if (min_running) limits.min_running = *min_running;
  if (limits.min_running > limits.max_running) {
    return r.Error("min_running", absl::StrCat("must be <= max_running (", limits.max_running,
                                               "), got ", limits.min_running));
  }
  return std::optional<GroupLimits>(limits);
}

StatusOr<TraceGroup> ParseGroup(const Json& value, const std::string& where) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields({"weight", "max_running", "min_running"}); !s.ok()) return s;
  TraceGroup group;
  FAIRGATE_ASSIGN_OR_RETURN(weight, r.Number("weight", false));
  if (weight && *weight <= 0) return r.Error("weight", "must be > 0");
  group.weight = weight;
  FAIRGATE_ASSIGN_OR_RETURN(limits, ParseGroupLimits(r));
  group.limits = limits;
  return group;
}

StatusOr<AgingConfig> ParseAging(const Json& value, const std::string& where) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields({"grace", "interval", "ceiling"}); !s.ok()) return s;
  FAIRGATE_ASSIGN_OR_RETURN(grace, r.Number("grace", true));
  FAIRGATE_ASSIGN_OR_RETURN(interval, r.Number("interval", true));
  FAIRGATE_ASSIGN_OR_RETURN(ceiling, r.Integer("ceiling", true, 1));
  if (*interval <= 0) return r.Error("interval", "must be > 0");
  return AgingConfig{Seconds(*grace), Seconds(*interval), *ceiling};
}

// false (no lending), true (the default share kept back) or {"kept_back": s}
// (RuleOptions::lending).
StatusOr<std::optional<TierLending>> ParseLending(const Json& value, const std::string& where) {
  if (value.is_boolean()) {
    return value.get<bool>() ? std::optional<TierLending>(TierLending{}) : std::nullopt;
  }
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": must be false, true or an object {\"kept_back\": s}"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields({"kept_back"}); !s.ok()) return s;
  FAIRGATE_ASSIGN_OR_RETURN(kept_back, r.Number("kept_back", false));
  TierLending lending;
  lending.kept_back = kept_back.value_or(lending.kept_back);
  if (!(lending.kept_back >= 0 && lending.kept_back < 1)) {
    return r.Error("kept_back", absl::StrCat("must be in [0, 1), got ", lending.kept_back));
  }
  return std::optional<TierLending>(lending);
}

// {"min": m, "interval": s, "high": h, "low": l, "decrease": d}, each optional (the defaults of
// AdaptiveCapacity); checked against the capacity by the scheduler's own validation.
// A signal of the machine model: memory's (io is not modelled).
StatusOr<PressureSignal> ParsePressureSignal(const Json& value, const std::string& where) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields({"source", "high", "low"}); !s.ok()) return s;
  FAIRGATE_ASSIGN_OR_RETURN(source, r.String("source", true));
  PressureSignal signal;
  if (*source == "memory some") {
    signal.source = PressureSource::kMemorySome;
  } else if (*source == "memory use") {
    signal.source = PressureSource::kMemoryUse;
  } else {
    return r.Error("source", absl::StrCat("'", *source,
                                          "' is not a signal of the machine model (\"memory some\" "
                                          "or \"memory use\")"));
  }
  FAIRGATE_ASSIGN_OR_RETURN(high, r.Number("high", false));
  FAIRGATE_ASSIGN_OR_RETURN(low, r.Number("low", false));
  signal.high = high.value_or(signal.high);
  signal.low = low.value_or(signal.low);
  return signal;
}

StatusOr<AdaptiveCapacity> ParseAdaptiveCapacity(const Json& value, const std::string& where,
                                                 int capacity, std::optional<double> memory) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields({"min", "interval", "high", "low", "decrease", "signals"}); !s.ok()) {
    return s;
  }
  AdaptiveCapacity rule;
  FAIRGATE_ASSIGN_OR_RETURN(min, r.Integer("min", false, 1));
  FAIRGATE_ASSIGN_OR_RETURN(interval, r.Number("interval", false));
  FAIRGATE_ASSIGN_OR_RETURN(high, r.Number("high", false));
  FAIRGATE_ASSIGN_OR_RETURN(low, r.Number("low", false));
  FAIRGATE_ASSIGN_OR_RETURN(decrease, r.Number("decrease", false));
  rule.min = min.value_or(rule.min);
  rule.interval = Seconds(interval.value_or(rule.interval.count()));
  rule.high = high.value_or(rule.high);
  rule.low = low.value_or(rule.low);
  rule.decrease = decrease.value_or(rule.decrease);
  if (const Json* signals = r.Get("signals")) {
    if (!signals->is_array()) return r.Error("signals", "must be an array of signals");
    if (!signals->empty() && !memory) return r.Error("signals", "need a machine with memory");
    for (std::size_t i = 0; i < signals->size(); ++i) {
      FAIRGATE_ASSIGN_OR_RETURN(
          signal, ParsePressureSignal((*signals)[i], absl::StrCat(where, ": signal ", i)));
      rule.signals.push_back(signal);
    }
  }
  if (Status s = ValidateAdaptiveCapacity(rule, capacity); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
  }
  return rule;
}

StatusOr<LatencyCapacity> ParseLatencyCapacity(const Json& value, const std::string& where,
                                               int capacity) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields({"min", "interval", "remeasure_every"}); !s.ok()) return s;
  LatencyCapacity rule;
  FAIRGATE_ASSIGN_OR_RETURN(min, r.Integer("min", false, 1));
  FAIRGATE_ASSIGN_OR_RETURN(interval, r.Number("interval", false));
  FAIRGATE_ASSIGN_OR_RETURN(remeasure_every, r.Integer("remeasure_every", false, 2));
  rule.min = min.value_or(rule.min);
  rule.interval = Seconds(interval.value_or(rule.interval.count()));
  rule.remeasure_every = remeasure_every.value_or(rule.remeasure_every);
  if (Status s = ValidateLatencyCapacity(rule, capacity); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
  }
  return rule;
}

// A job's type must be one of the trace's, and its id must not be empty.
Status CheckTypeAndId(const ObjectReader& r, const Trace& trace, const std::string& type,
                      const std::string& id) {
  bool known = false;
  for (const auto& [name, config] : trace.types) known = known || name == type;
  if (!known) return r.Error("type", absl::StrCat("unknown job type '", type, "'"));
  if (id.empty()) return r.Error("id", "must not be empty");
  return absl::OkStatus();
}

StatusOr<TracePeriodic> ParsePeriodic(const Json& value, const std::string& where,
                                      const Trace& trace) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s =
          r.OnlyFields({"type", "id", "key", "interval", "duration", "first", "runs", "cost"});
      !s.ok()) {
    return s;
  }
  TracePeriodic periodic;
  FAIRGATE_ASSIGN_OR_RETURN(type, r.String("type", true));
  FAIRGATE_ASSIGN_OR_RETURN(id, r.String("id", true));
  FAIRGATE_ASSIGN_OR_RETURN(key, r.String("key", false));
  FAIRGATE_ASSIGN_OR_RETURN(interval, r.Number("interval", true));
  FAIRGATE_ASSIGN_OR_RETURN(duration, r.Number("duration", true));
  FAIRGATE_ASSIGN_OR_RETURN(first, r.Number("first", false));
  FAIRGATE_ASSIGN_OR_RETURN(runs, r.Integer("runs", true, 1));
  FAIRGATE_ASSIGN_OR_RETURN(cost, r.Number("cost", false));
  if (Status s = CheckTypeAndId(r, trace, *type, *id); !s.ok()) return s;
  if (*interval <= 0) return r.Error("interval", "must be > 0");
  periodic.type = *std::move(type);
  periodic.id = *std::move(id);
  periodic.key = key.value_or("");
  periodic.interval = *interval;
  periodic.duration = *duration;
  periodic.first = first.value_or(0);
  periodic.runs = *runs;
  periodic.cost = cost;
  return periodic;
}

StatusOr<TracePause> ParsePause(const Json& value, const std::string& where, const Trace& trace) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields({"type", "key", "from", "until"}); !s.ok()) return s;
  TracePause pause;
  FAIRGATE_ASSIGN_OR_RETURN(type, r.String("type", false));
  FAIRGATE_ASSIGN_OR_RETURN(key, r.String("key", false));
  FAIRGATE_ASSIGN_OR_RETURN(from, r.Number("from", true));
  FAIRGATE_ASSIGN_OR_RETURN(until, r.Number("until", false));
  if (type.has_value() == key.has_value())
    return r.Error("type", "give exactly one of type and key");
  if (type) {
    bool known = false;
    for (const auto& [name, config] : trace.types) known = known || name == *type;
    if (!known) return r.Error("type", absl::StrCat("unknown job type '", *type, "'"));
  }
  if (until && *until < *from) return r.Error("until", "must be >= from");
  pause.type = type;
  pause.key = key;
  pause.from = *from;
  pause.until = until;
  return pause;
}

StatusOr<TraceWorker> ParseWorker(const Json& value, const std::string& where) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields({"name", "slots", "types", "tags", "from", "until"}); !s.ok()) {
    return s;
  }
  TraceWorker worker;
  FAIRGATE_ASSIGN_OR_RETURN(name, r.String("name", true));
  FAIRGATE_ASSIGN_OR_RETURN(slots, r.Integer("slots", false, 1));
  FAIRGATE_ASSIGN_OR_RETURN(types, r.Strings("types"));
  FAIRGATE_ASSIGN_OR_RETURN(tags, r.Strings("tags"));
  FAIRGATE_ASSIGN_OR_RETURN(from, r.Number("from", false));
  FAIRGATE_ASSIGN_OR_RETURN(until, r.Number("until", false));
  worker.name = *name;
  worker.config = {slots.value_or(1), std::move(types), std::move(tags)};
  worker.from = from.value_or(0);
  worker.until = until;
  if (Status s = ValidateWorker(worker.name, worker.config); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
  }
  if (until && *until <= worker.from) return r.Error("until", "must be > from");
  return worker;
}

StatusOr<TraceJob> ParseJob(const Json& value, const std::string& where, const Trace& trace) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  }
  ObjectReader r(value, where);
  if (Status s = r.OnlyFields({"type", "id", "key", "arrival", "duration", "cost", "sync"});
      !s.ok()) {
    return s;
  }
  TraceJob job;
  FAIRGATE_ASSIGN_OR_RETURN(type, r.String("type", true));
  FAIRGATE_ASSIGN_OR_RETURN(id, r.String("id", true));
  FAIRGATE_ASSIGN_OR_RETURN(key, r.String("key", false));
  FAIRGATE_ASSIGN_OR_RETURN(arrival, r.Number("arrival", true));
  FAIRGATE_ASSIGN_OR_RETURN(duration, r.Number("duration", true));
  FAIRGATE_ASSIGN_OR_RETURN(cost, r.Number("cost", false));
  FAIRGATE_ASSIGN_OR_RETURN(sync, r.Bool("sync"));
  if (Status s = CheckTypeAndId(r, trace, *type, *id); !s.ok()) return s;
  job.type = *std::move(type);
  job.id = *std::move(id);
  job.key = key.value_or("");
  job.arrival = *arrival;
  job.duration = *duration;
  job.cost = cost;
  job.sync = sync.value_or(false);
  return job;
}

// Parses the trace's JSON, refusing a field given twice in an object (JSON keeps the last
// silently) and naming where a value is not valid JSON (a number too large for a double, say) by
// job or type and field. `type_entries` gets every entry of "types", twice-given ones too, so
// that a type given twice with different configs is caught. The root must be an object.
StatusOr<Json> ParseTrackedJson(std::string_view text, const std::string& file,
                                std::vector<std::pair<std::string, Json>>& type_entries) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": empty file, expected a JSON object"));
  }
  // Where the parser is: the path of objects and arrays to the value being read.
  struct Level {
    bool array = false;
    std::string key;                // in an object: the current key
    std::vector<std::string> keys;  // in an object: the keys so far (objects have few)
    std::size_t done = 0;           // in an array: elements completed so far
  };
  std::vector<Level> path;
  // A field given twice, where (JSON keeps the last silently; a misspelt field is refused, and a
  // repeated one is as likely a mistake). The entries of "types" are checked as types below.
  std::string twice;
  auto object_named = [&] {
    std::string where = file;
    if (path.size() == 3 && path[1].array) {
      static const std::pair<const char*, const char*> kItems[] = {
          {"jobs", "job"}, {"workers", "worker"}, {"pauses", "pause"}, {"periodic", "periodic"}};
      for (const auto& [list, item] : kItems) {
        if (path[0].key == list) absl::StrAppend(&where, ": ", item, " ", path[1].done);
      }
    } else if (path.size() == 3 && path[0].key == "types") {
      absl::StrAppend(&where, ": type '", path[1].key, "'");
    } else if (path.size() == 2) {
      absl::StrAppend(&where, ": ", path[0].key);
    }
    return where;
  };
  auto value_done = [&path] {
    if (!path.empty() && path.back().array) ++path.back().done;
  };
  auto watch = [&](int, Json::parse_event_t event, Json& parsed) {
    using E = Json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        path.emplace_back().array = event == E::array_start;
        break;
      case E::key: {
        Level& level = path.back();
        level.key = parsed.get<std::string>();
        const bool type_entries_level = path.size() == 2 && path[0].key == "types";
        if (!type_entries_level && twice.empty()) {
          if (std::find(level.keys.begin(), level.keys.end(), level.key) != level.keys.end()) {
            twice = absl::StrCat(object_named(), ": field '", level.key, "': is given twice");
          }
          level.keys.push_back(level.key);
        }
        break;
      }
      case E::object_end:
      case E::array_end:
      case E::value:
        if (event != E::value) path.pop_back();
        if (path.size() == 2 && path[0].key == "types" && !path[1].array) {
          type_entries.emplace_back(path[1].key, parsed);
        }
        value_done();
        break;
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(text, watch);
  } catch (const Json::exception& e) {
    std::string where = file;
    if (path.size() >= 2 && path[0].key == "jobs" && path[1].array) {
      absl::StrAppend(&where, ": job ", path[1].done);
      if (path.size() == 3 && !path[2].key.empty()) {
        absl::StrAppend(&where, ": field '", path[2].key, "'");
      }
    } else if (path.size() >= 2 && path[0].key == "types" && !path[1].key.empty()) {
      absl::StrAppend(&where, ": type '", path[1].key, "'");
      if (path.size() == 3 && !path[2].key.empty()) {
        absl::StrAppend(&where, ": field '", path[2].key, "'");
      }
    } else if (!path.empty() && !path[0].key.empty()) {
      absl::StrAppend(&where, ": field '", path[0].key, "'");
    }
    return absl::InvalidArgumentError(absl::StrCat(where, ": not valid JSON: ", e.what()));
  }
  if (!twice.empty()) return absl::InvalidArgumentError(twice);
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": the trace must be a JSON object"));
  }

  return root;
}

// The rule's fields of the trace: mode and the options, the machine, the keys.
Status ParseRuleFields(const ObjectReader& r, const std::string& file, Trace& trace) {
  FAIRGATE_ASSIGN_OR_RETURN(mode, r.String("mode", false));
  trace.mode = mode.value_or("default");
  if (trace.mode == "seed") {
    trace.options = SchedulerOptions::Seed();
  } else if (trace.mode == "default") {
    trace.options = SchedulerOptions::Default();
  } else {
    return r.Error("mode",
                   absl::StrCat("must be \"seed\" or \"default\", got \"", trace.mode, "\""));
  }
  FAIRGATE_ASSIGN_OR_RETURN(reconcile, r.Bool("reconcile"));
  FAIRGATE_ASSIGN_OR_RETURN(idle_catch_up, r.Bool("idle_catch_up"));
  FAIRGATE_ASSIGN_OR_RETURN(capacity, r.Integer("capacity", true, 1));
  FAIRGATE_ASSIGN_OR_RETURN(alpha, r.Number("alpha", false));
  FAIRGATE_ASSIGN_OR_RETURN(until, r.Number("until", false));
  if (reconcile) trace.options.rule.reconcile = *reconcile;
  if (idle_catch_up) trace.options.rule.idle_catch_up = *idle_catch_up;
  trace.options.rule.max_concurrency = *capacity;
  if (alpha) {
    if (!(*alpha > 0 && *alpha <= 1)) {
      return r.Error("alpha", absl::StrCat("must be in (0, 1], got ", *alpha));
    }
    trace.options.rule.alpha = *alpha;
  }
  trace.until = until;
  if (const Json* aging = r.Get("aging")) {
    FAIRGATE_ASSIGN_OR_RETURN(config, ParseAging(*aging, absl::StrCat(file, ": aging")));
    trace.options.rule.aging = config;
  }
  if (const Json* machine = r.Get("machine")) {
    const std::string where = absl::StrCat(file, ": machine");
    if (!machine->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
    }
    ObjectReader mr(*machine, where);
    if (Status s = mr.OnlyFields({"cores", "memory"}); !s.ok()) return s;
    FAIRGATE_ASSIGN_OR_RETURN(cores, mr.Integer("cores", true, 1));
    trace.cores = *cores;
    FAIRGATE_ASSIGN_OR_RETURN(memory, mr.Number("memory", false));
    if (memory && *memory <= 0) return mr.Error("memory", "must be > 0");
    trace.memory = memory;
  }
  if (const Json* adaptive = r.Get("adaptive_capacity")) {
    const std::string where = absl::StrCat(file, ": adaptive_capacity");
    if (!trace.cores) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": needs a machine (its pressure is the signal)"));
    }
    FAIRGATE_ASSIGN_OR_RETURN(rule,
                              ParseAdaptiveCapacity(*adaptive, where, *capacity, trace.memory));
    trace.options.rule.adaptive_capacity = rule;
  }
  if (const Json* latency = r.Get("latency_capacity")) {
    const std::string where = absl::StrCat(file, ": latency_capacity");
    if (!trace.cores) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": needs a machine (its slowdown is the signal)"));
    }
    if (trace.options.rule.adaptive_capacity) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": not with adaptive_capacity (one rule moves the cap)"));
    }
    FAIRGATE_ASSIGN_OR_RETURN(rule, ParseLatencyCapacity(*latency, where, *capacity));
    trace.options.rule.latency_capacity = rule;
  }
  FAIRGATE_ASSIGN_OR_RETURN(shortest_first, r.Bool("shortest_first"));
  trace.options.rule.shortest_first = shortest_first.value_or(false);
  FAIRGATE_ASSIGN_OR_RETURN(sjf_aging, r.Number("shortest_first_aging", false));
  trace.options.rule.shortest_first_aging = sjf_aging.value_or(0);
  if (const Json* rate = r.Get("rate_limit")) {
    FAIRGATE_ASSIGN_OR_RETURN(limit, ParseRateLimit(*rate, absl::StrCat(file, ": rate_limit")));
    trace.options.rule.rate_limit = limit;
  }
  if (const Json* lending = r.Get("lending")) {
    FAIRGATE_ASSIGN_OR_RETURN(parsed, ParseLending(*lending, absl::StrCat(file, ": lending")));
    trace.options.rule.lending = parsed;
  }
  if (const Json* limits = r.Get("default_key_limits")) {
    const std::string where = absl::StrCat(file, ": default_key_limits");
    if (!limits->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
    }
    ObjectReader lr(*limits, where);
    if (Status s = lr.OnlyFields({"max_running", "min_running", "rate_limit", "rate_per_weight"});
        !s.ok()) {
      return s;
    }
    FAIRGATE_ASSIGN_OR_RETURN(parsed, ParseLimits(lr, where));
    if (parsed) trace.options.rule.default_key_limits = *parsed;
  }
  if (const Json* keys = r.Get("keys")) {
    if (!keys->is_object()) return r.Error("keys", "must be an object of fairness keys");
    for (const auto& [name, value] : keys->items()) {
      FAIRGATE_ASSIGN_OR_RETURN(key, ParseKey(value, absl::StrCat(file, ": key '", name, "'")));
      trace.keys.emplace_back(name, key);
    }
  }
  if (const Json* groups = r.Get("groups")) {
    if (!groups->is_object()) return r.Error("groups", "must be an object of groups of keys");
    for (const auto& [name, value] : groups->items()) {
      if (name.empty()) return r.Error("groups", "a group's name is empty");
      FAIRGATE_ASSIGN_OR_RETURN(group,
                                ParseGroup(value, absl::StrCat(file, ": group '", name, "'")));
      trace.groups.emplace_back(name, group);
    }
  }
  if (const Json* limits = r.Get("default_group_limits")) {
    const std::string where = absl::StrCat(file, ": default_group_limits");
    if (!limits->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
    }
    ObjectReader lr(*limits, where);
    if (Status s = lr.OnlyFields({"max_running", "min_running"}); !s.ok()) return s;
    FAIRGATE_ASSIGN_OR_RETURN(parsed, ParseGroupLimits(lr));
    if (parsed) trace.options.rule.default_group_limits = *parsed;
  }
  return absl::OkStatus();
}

// The types, from every entry of "types" as parsed (ParseTrackedJson): one given twice must be
// given alike.
Status ParseTypes(const ObjectReader& r, const std::string& file,
                  const std::vector<std::pair<std::string, Json>>& type_entries, Trace& trace) {
  const Json* types = r.Get("types");
  if (types == nullptr) return r.Error("types", "missing");
  if (!types->is_object()) return r.Error("types", "must be an object of job types");
  for (const auto& [name, value] : type_entries) {
    const std::string where = absl::StrCat(file, ": type '", name, "'");
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": types: a type name is empty"));
    }
    FAIRGATE_ASSIGN_OR_RETURN(config, ParseType(value, where));
    // The machine's, not the scheduler's: what a running job of the type holds.
    FAIRGATE_ASSIGN_OR_RETURN(memory, ObjectReader(value, where).Number("memory", false));
    if (memory) {
      if (!trace.memory) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": field 'memory': needs a machine with memory"));
      }
      trace.type_memory[name] = *memory;
    }
    if (Status s = ValidateJobType(name, config); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": ", s.message()));
    }
    bool seen = false;
    for (const auto& [other, other_config] : trace.types) {
      if (other != name) continue;
      seen = true;
      if (other_config != config) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": registered twice with different configs"));
      }
    }
    if (!seen) trace.types.emplace_back(name, config);
  }

  return absl::OkStatus();
}

// The workers: one name present twice at a time is refused, and so is a type that its workers
// name but none can hold.
Status ParseWorkers(const ObjectReader& r, const std::string& file, Trace& trace) {
  const Json* workers = r.Get("workers");
  if (workers == nullptr) return absl::OkStatus();
  if (!workers->is_array()) return r.Error("workers", "must be an array of workers");
  for (std::size_t i = 0; i < workers->size(); ++i) {
    FAIRGATE_ASSIGN_OR_RETURN(worker,
                              ParseWorker((*workers)[i], absl::StrCat(file, ": worker ", i)));
    for (const TraceWorker& other : trace.workers) {
      // Present at once under one name would be one worker added twice.
      const bool apart = (other.until && *other.until <= worker.from) ||
                         (worker.until && *worker.until <= other.from);
      if (other.name == worker.name && !apart) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ": worker ", i, ": field 'name': '", worker.name,
                         "' is present at the same time as an earlier worker of that name"));
      }
    }
    trace.workers.push_back(std::move(worker));
  }
  // A type its workers name but none can hold would wait for ever, and hold nothing back
  // (fairgate/worker.h, WorkerServes): a mistake in the trace, as slots above the priority is.
  for (const auto& [name, config] : trace.types) {
    int widest = 0;
    for (const TraceWorker& worker : trace.workers) {
      if (WorkerNames(worker.config, name, config)) {
        widest = std::max(widest, worker.config.slots);
      }
    }
    if (widest > 0 && widest < config.slots) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": type '", name, "': its jobs take ", config.slots,
          " slots, but no worker that names it has more than ", widest, ": none could ever run"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<Trace> ParseTrace(std::string_view text, std::string_view file_view) {
  const std::string file(file_view);
  std::vector<std::pair<std::string, Json>> type_entries;
  FAIRGATE_ASSIGN_OR_RETURN(root, ParseTrackedJson(text, file, type_entries));
  Trace trace;
  ObjectReader r(root, file);
  if (Status s = r.OnlyFields({"mode",
                               "reconcile",
                               "idle_catch_up",
                               "capacity",
                               "alpha",
                               "types",
                               "jobs",
                               "until",
                               "aging",
                               "shortest_first",
                               "default_key_limits",
                               "keys",
                               "groups",
                               "default_group_limits",
                               "pauses",
                               "machine",
                               "adaptive_capacity",
                               "latency_capacity",
                               "shortest_first_aging",
                               "periodic",
                               "workers",
                               "sole_worker_reserve_after",
                               "rate_limit",
                               "lending"});
      !s.ok()) {
    return s;
  }
  if (Status s = ParseRuleFields(r, file, trace); !s.ok()) return s;
  if (Status s = ParseTypes(r, file, type_entries, trace); !s.ok()) return s;
  const Json* jobs = r.Get("jobs");
  if (jobs == nullptr) return r.Error("jobs", "missing");
  if (!jobs->is_array()) return r.Error("jobs", "must be an array of jobs");
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    FAIRGATE_ASSIGN_OR_RETURN(job, ParseJob((*jobs)[i], absl::StrCat(file, ": job ", i), trace));
    trace.jobs.push_back(std::move(job));
  }
  if (const Json* pauses = r.Get("pauses")) {
    if (!pauses->is_array()) return r.Error("pauses", "must be an array of pauses");
    for (std::size_t i = 0; i < pauses->size(); ++i) {
      FAIRGATE_ASSIGN_OR_RETURN(pause,
                                ParsePause((*pauses)[i], absl::StrCat(file, ": pause ", i), trace));
      trace.pauses.push_back(std::move(pause));
    }
  }
  if (Status s = ParseWorkers(r, file, trace); !s.ok()) return s;
  // Read with no lower bound of its own: the bound is > 0, and the message must say so.
  FAIRGATE_ASSIGN_OR_RETURN(reserve_after, r.Number("sole_worker_reserve_after", false,
                                                    -std::numeric_limits<double>::infinity()));
  if (reserve_after) {
    if (*reserve_after <= 0) {
      return r.Error("sole_worker_reserve_after",
                     absl::StrCat("must be > 0, got ", *reserve_after));
    }
    trace.options.rule.sole_worker_reserve_after = Seconds(*reserve_after);
  }
  if (const Json* periodic = r.Get("periodic")) {
    if (!periodic->is_array()) return r.Error("periodic", "must be an array of periodic jobs");
    for (std::size_t i = 0; i < periodic->size(); ++i) {
      FAIRGATE_ASSIGN_OR_RETURN(
          job, ParsePeriodic((*periodic)[i], absl::StrCat(file, ": periodic ", i), trace));
      trace.periodic.push_back(std::move(job));
    }
  }
  return trace;
}

const std::string* GroupOf(const Trace& trace, std::string_view key) {
  // trace.keys is in name order (a JSON object's).
  auto it =
      std::lower_bound(trace.keys.begin(), trace.keys.end(), key,
                       [](const auto& entry, std::string_view name) { return entry.first < name; });
  if (it == trace.keys.end() || it->first != key || !it->second.group) return nullptr;
  return &*it->second.group;
}

std::vector<std::size_t> JobsByArrival(const Trace& trace) {
  std::vector<std::size_t> order(trace.jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return trace.jobs[a].arrival < trace.jobs[b].arrival;
  });
  return order;
}

StatusOr<Trace> LoadTrace(const std::string& path) {
  if (std::error_code error; std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a trace file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the file"));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseTrace(text.str(), path);
}

}  // namespace fairgate::sim
