// Prints the metrics of a scheduler that has seen every kind of decision, for `promtool check
// metrics` (the CTest Metrics.PromtoolAcceptsTheExposition).
#include <stdlib.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "fairgate/scheduler.h"
#include "fairgate/sqlite_store.h"

int main() {
  using namespace fairgate;
  SchedulerOptions options;
  options.rule.max_concurrency = 2;
  options.rule.aging = AgingConfig{Seconds(0), Seconds(0.001), 8};
  // A state file, so that the store's families are there too.
  std::string dir = (std::filesystem::temp_directory_path() / "fairgate-metrics-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return 1;
  options.persistence.store = *OpenSqliteStore(dir + "/state.db");
  auto scheduler = *Scheduler::Create(options);
  (void)scheduler->RegisterType("clone", {.default_cost = 1, .max_concurrency = 2, .priority = 8});
  (void)scheduler->RegisterType(
      "repack", {.default_cost = 5, .max_concurrency = 1, .conflict_group = "git", .priority = 1});
  auto ok = [](const Context&) { return absl::OkStatus(); };
  (void)scheduler->RunSync(Context::Background(),
                           {TypeName("clone"), JobId("linux.git"), FairnessKey("alice")}, ok);
  (void)scheduler->RunSync(Context::Background(),
                           {TypeName("clone"), JobId("git.git"), FairnessKey("bob")},
                           [](const Context&) { return absl::InternalError("failed"); });
  (void)scheduler->RunSync(Context::Background(),
                           {TypeName("unknown"), JobId("x"), FairnessKey("carol")}, ok);
  (void)scheduler->Submit({TypeName("repack"), JobId("linux.git")}, ok);
  (void)scheduler->RegisterDurable(
      "repack", [](const DurableJob&, const Context&) { return absl::OkStatus(); });
  (void)scheduler->Recover();
  (void)scheduler->SubmitDurable({TypeName("repack"), JobId("git.git")}, "");
  (void)scheduler->Drain(Context::Background());
  std::string out;
  scheduler->WriteMetrics(out);
  std::cout << out;
  scheduler.reset();
  std::filesystem::remove_all(dir);
  return out.find("fairgate_durable_jobs_total{outcome=\"succeeded\"} 1") == std::string::npos;
}
