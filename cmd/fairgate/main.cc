// fairgate: the command line. `fairgate sim TRACE... [--events OUT.jsonl]` replays traces in
// virtual time through the admission core (see DESIGN.md for the trace and event formats).
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "sim/sim_command.h"

int main(int argc, char** argv) {
  CLI::App app{"fairgate: fair admission control, simulated and explained"};
  app.require_subcommand(1);

  CLI::App* sim = app.add_subcommand("sim", "replay traces in virtual time through the core");
  std::vector<std::string> traces;
  std::string events;
  sim->add_option("traces", traces, "trace files (JSON)")->required();
  CLI::Option* events_option = sim->add_option("--events", events,
                                               "write the events of the trace as JSON lines here "
                                               "('-' for standard output)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  std::optional<std::string> events_path;
  if (*events_option) events_path = events;
  return fairgate::sim::RunSimCommand(traces, events_path, std::cout, std::cerr);
}
