// A program that keeps its state in SQLite (fairgate::sqlite), could join replicas on PostgreSQL
// (fairgate::postgres), and waits in an Asio event loop (fairgate::asio).
#include <cstdlib>
#include <filesystem>
#include <future>
#include <iostream>
#include <string>

#include "boost/asio/use_future.hpp"
#include "fairgate/asio.h"
#include "fairgate/postgres_store.h"
#include "fairgate/scheduler.h"
#include "fairgate/sqlite_store.h"

int main() {
  std::string dir = (std::filesystem::temp_directory_path() / "fairgate-consumer-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return 1;
  fairgate::SchedulerOptions options;
  auto store = fairgate::OpenSqliteStore(dir + "/state.db");
  if (!store.ok()) return 1;
  options.persistence.store = *std::move(store);
  auto scheduler = fairgate::Scheduler::Create(options);
  bool ok = scheduler.ok() &&
            (*scheduler)->RegisterType("clone", {.max_concurrency = 2, .priority = 2}).ok() &&
            (*scheduler)->Recover().ok();
  if (ok) {
    std::future<fairgate::StatusOr<fairgate::Permit>> permit =
        fairgate::AsyncAcquire(**scheduler, fairgate::Context::Background(),
                               {fairgate::TypeName("clone"), fairgate::JobId("linux.git"),
                                fairgate::FairnessKey("client")},
                               boost::asio::use_future);
    ok = permit.get().ok();
  }
  // No server here: the PostgreSQL store refuses a connection string it cannot use, with a status.
  ok = ok && !fairgate::OpenPostgresStore("host=/nonexistent-fairgate-socket-dir dbname=x").ok();
  if (scheduler.ok()) scheduler->reset();  // shut down before the file goes
  std::filesystem::remove_all(dir);
  std::cout << (ok ? "ok" : "wrong") << "\n";
  return ok ? 0 : 1;
}
