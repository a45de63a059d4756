// fairgate: the command line. `fairgate sim TRACE... [--events OUT.jsonl] [--evidence OUT.jsonl]
// [--report DIR] [--policy fairgate|seed004] [--summary]` replays traces in virtual time through
// the admission core (docs/simulator.md for the formats).
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "fairgate/version.h"
#include "sim/sim_command.h"

int main(int argc, char** argv) {
  CLI::App app{"fairgate: fair admission control, simulated and explained"};
  app.set_version_flag("--version", std::string("fairgate ") + std::string(fairgate::Version()),
                       "print fairgate's version and exit");
  app.require_subcommand(1);

  CLI::App* sim = app.add_subcommand("sim", "replay traces in virtual time through the core");
  std::vector<std::string> traces;
  std::string events;
  sim->add_option("traces", traces, "trace files (JSON)")->required();
  CLI::Option* events_option = sim->add_option("--events", events,
                                               "write the events of the trace as JSON lines here "
                                               "('-' for standard output)");
  std::string evidence, report;
  CLI::Option* evidence_option =
      sim->add_option("--evidence", evidence,
                      "write the reason for every admission as JSON lines here ('-': standard "
                      "output)");
  CLI::Option* report_option = sim->add_option(
      "--report", report, "write an HTML report (tables, timeline, waits) into this directory");
  std::string policy = "fairgate";
  sim->add_option("--policy", policy,
                  "fairgate (the admission core) or seed004 (seed 004's scoring, to compare)");
  bool summary = false;
  sim->add_flag("--summary", summary,
                "also print the waits per type and of on-demand jobs, utilisation, key fairness "
                "and jobs lost");

  // CLI11 would say only that a subcommand is required: name what was given instead.
  if (argc > 1 && argv[1][0] != '-') {
    try {
      (void)app.get_subcommand(argv[1]);
    } catch (const CLI::OptionNotFound&) {
      std::cerr << "fairgate: unknown command '" << argv[1] << "' (the commands: sim; --help)\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  fairgate::sim::SimOutputs outputs;
  if (*events_option) outputs.events = events;
  if (*evidence_option) outputs.evidence = evidence;
  if (*report_option) outputs.report = report;
  outputs.policy = policy;
  outputs.summary = summary;
  return fairgate::sim::RunSimCommand(traces, outputs, std::cout, std::cerr);
}
