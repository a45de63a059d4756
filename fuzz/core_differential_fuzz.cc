// libFuzzer target: bytes become a scheduler configuration and a sequence of operations, run on
// AdmissionCore and on the ReferenceModel side by side; any difference in a status, an admission,
// a charge, an accumulated cost, an estimate or a count aborts with a description.
//
// Every extension is reachable: aging, shortest-first, weights, key limits, idle catch-up.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/admission_core.h"
#include "reference_model.h"

namespace {

using fairgate::AgingConfig;
using fairgate::JobTypeConfig;
using fairgate::KeyLimits;
using fairgate::SchedulerOptions;
using fairgate::Seconds;
using fairgate::core::AdmissionCore;
using fairgate::core::JobTicket;
using fairgate::testing::ReferenceModel;

[[noreturn]] void Differ(const char* what, int op) {
  std::fprintf(stderr, "core and reference model differ: %s (operation %d)\n", what, op);
  std::abort();
}

template <typename T>
T Pick(FuzzedDataProvider& in, std::initializer_list<T> values) {
  return *(values.begin() + in.ConsumeIntegralInRange<std::size_t>(0, values.size() - 1));
}

struct Tracked {
  JobTicket ticket;
  int model_job;
  bool running = false, gone = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  SchedulerOptions options =
      in.ConsumeBool() ? SchedulerOptions::Seed() : SchedulerOptions::Default();
  options.max_concurrency = in.ConsumeIntegralInRange(1, 5);
  options.alpha = Pick(in, {0.3, 0.5, 1.0});
  options.idle_catch_up = in.ConsumeBool();
  options.key_ttl = Seconds(Pick(in, {1.0, 4.0, 20.0}));
  options.estimate_ttl = Seconds(Pick(in, {1.0, 6.0, 30.0}));
  options.sweep_batch = in.ConsumeIntegralInRange<std::size_t>(1, 3);
  if (in.ConsumeBool()) options.max_pending_per_key = in.ConsumeIntegralInRange(1, 6);
  if (in.ConsumeBool()) {
    options.aging = AgingConfig{Seconds(Pick(in, {0.0, 1.0, 2.5})),
                                Seconds(Pick(in, {0.5, 1.0, 3.0})), Pick(in, {1, 2, 3, 5, 10})};
  }
  options.shortest_first = in.ConsumeBool() && in.ConsumeBool();
  if (in.ConsumeBool()) {
    const int max = in.ConsumeIntegralInRange(1, 3);
    options.default_key_limits = {max, in.ConsumeIntegralInRange(0, max)};
  }
  auto created = AdmissionCore::Create(options);
  if (!created.ok()) Differ("Create refused valid options", -1);
  AdmissionCore& core = **created;
  ReferenceModel model(options);

  const std::vector<std::string> type_names = {"t0", "t1", "t2", "t3"};
  const int type_count = in.ConsumeIntegralInRange(1, 4);
  for (int i = 0; i < type_count; ++i) {
    JobTypeConfig config;
    config.priority = Pick(in, {1, 2, 3, 5});
    config.max_concurrency = in.ConsumeIntegralInRange(1, 3);
    config.conflict_group = Pick<std::string>(in, {"", "git", "db"});
    config.default_cost = Pick(in, {0.0, 1.0, 2.5, 10.0});
    config.shortest_first = in.ConsumeBool();
    if (core.RegisterType(type_names[i], config).code() !=
        model.RegisterType(type_names[i], config).code()) {
      Differ("RegisterType", -1);
    }
  }
  const std::vector<std::string> keys = {"", "a", "b", "c"};
  const std::vector<std::string> ids = {"r0", "r1", "r2", ""};
  std::vector<Tracked> jobs;
  double now = 0;

  for (int op = 0; in.remaining_bytes() > 0 && op < 400; ++op) {
    switch (in.ConsumeIntegralInRange(0, 7)) {
      case 0:
        now += Pick(in, {0.0, 0.5, 1.0, 2.0, 4.75});
        break;
      case 1:
      case 2: {
        const std::string& type = type_names[in.ConsumeIntegralInRange(0, type_count) % 4];
        const std::string& id = ids[in.ConsumeIntegralInRange<std::size_t>(0, ids.size() - 1)];
        const std::string& key = keys[in.ConsumeIntegralInRange<std::size_t>(0, keys.size() - 1)];
        std::optional<double> cost;
        if (in.ConsumeBool()) cost = Pick(in, {0.0, 1.0, 3.5, 7.0, -1.0});
        auto got = core.Enqueue({type, id, key, cost}, now);
        auto want = model.Enqueue(type, id, key, cost, now);
        if (got.status().code() != want.status().code()) Differ("Enqueue status", op);
        if (got.ok()) jobs.push_back({*got, *want});
        break;
      }
      case 3: {
        auto got = core.NextAdmission(now);
        auto want = model.NextAdmission(now);
        if (got.has_value() != want.has_value()) Differ("whether a job is admitted", op);
        if (!got) break;
        Tracked* t = nullptr;
        for (Tracked& j : jobs) {
          if (!j.gone && !j.running && j.ticket == got->ticket) t = &j;
        }
        if (t == nullptr || t->model_job != want->job) Differ("which job is admitted", op);
        if (got->charge != want->charge) Differ("the charge", op);
        t->running = true;
        break;
      }
      case 4:
      case 5: {
        if (jobs.empty()) break;
        Tracked& t = jobs[in.ConsumeIntegralInRange<std::size_t>(0, jobs.size() - 1)];
        if (in.ConsumeBool()) {
          const double elapsed = Pick(in, {0.0, 1.0, 2.0, 4.25, 9.0});
          const auto got = core.Complete(t.ticket, elapsed, now);
          if (got.code() != model.Complete(t.model_job, elapsed, now).code()) {
            Differ("Complete status", op);
          }
          if (got.ok()) t.gone = true;
        } else {
          const auto got = core.Cancel(t.ticket, now);
          if (got.code() != model.Cancel(t.model_job, now).code()) Differ("Cancel status", op);
          if (got.ok()) t.gone = true;
        }
        break;
      }
      case 6: {
        const std::string& key = keys[in.ConsumeIntegralInRange<std::size_t>(0, keys.size() - 1)];
        if (in.ConsumeBool()) {
          const double w = Pick(in, {0.5, 1.0, 3.0, 0.0, -1.0});
          if (core.SetKeyWeight(key, w).code() != model.SetKeyWeight(key, w).code()) {
            Differ("SetKeyWeight status", op);
          }
        } else {
          const KeyLimits limits{in.ConsumeIntegralInRange(0, 3), in.ConsumeIntegralInRange(-1, 2)};
          if (core.SetKeyLimits(key, limits).code() != model.SetKeyLimits(key, limits).code()) {
            Differ("SetKeyLimits status", op);
          }
        }
        break;
      }
      case 7: {
        const auto got = core.Sweep(now);
        const auto [keys_evicted, estimates_evicted] = model.Sweep(now);
        if (got.keys_evicted != keys_evicted || got.estimates_evicted != estimates_evicted) {
          Differ("Sweep", op);
        }
        break;
      }
    }
    core.AdvanceTo(now);
    const auto snapshot = core.TakeSnapshot();
    if (snapshot.pending != model.pending() || snapshot.running != model.running()) {
      Differ("pending or running count", op);
    }
    const auto model_keys = model.Keys();
    if (snapshot.keys_tracked != model_keys.size()) Differ("keys tracked", op);
    for (const auto& [key, acc] : model_keys) {
      if (core.AccumulatedCost(key) != acc) Differ("an accumulated cost", op);
    }
    if (snapshot.estimates_tracked != model.estimates_tracked()) Differ("estimates tracked", op);
    const auto aged = model.AgedIn(now);
    for (const auto& tier : snapshot.tiers) {
      if (tier.aged_in != aged.at(tier.priority)) Differ("jobs aged into a tier", op);
    }
  }
  return 0;
}
