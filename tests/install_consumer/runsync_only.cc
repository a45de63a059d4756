// A program that only wants RunSync: it links fairgate::fairgate, and so neither SQLite nor libpq
// (check.cmake reads its dynamic dependencies).
#include <iostream>

#include "fairgate/context.h"
#include "fairgate/scheduler.h"

int main() {
  auto scheduler = fairgate::Scheduler::Create();
  if (!scheduler.ok()) return 1;
  if (!(*scheduler)->RegisterType("clone", {.max_concurrency = 2, .priority = 2}).ok()) return 1;
  bool ran = false;
  const fairgate::Status status =
      (*scheduler)
          ->RunSync(fairgate::Context::Background(),
                    {fairgate::TypeName("clone"), fairgate::JobId("linux.git"),
                     fairgate::FairnessKey("client")},
                    [&](const fairgate::Context&) {
                      ran = true;
                      return fairgate::Status();
                    });
  // Without a store, durable work is refused, not silently kept in memory.
  const bool refused = !(*scheduler)->Recover().ok();
  const bool ok = status.ok() && ran && refused;
  std::cout << (ok ? "ok" : "wrong") << "\n";
  return ok ? 0 : 1;
}
