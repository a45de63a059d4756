// Drives AdmissionCore and the ReferenceModel with the same random operation sequences and
// requires the same answers, through the differential driver the fuzzer uses too
// (differential_driver.h): every status, every admission (which job, what charge), and after
// every operation every accumulated cost, estimate, count and aged job, and each type's
// MaxWaitToCeiling.
#include "differential_driver.h"
#include "doctest/doctest.h"

namespace fairgate {
namespace {
namespace core_differential_test {

using testing::DriverConfig;
using testing::DriverResult;
using testing::RandomChoices;
using testing::RunDifferential;

// Under the sanitizers (several times slower) a tenth of the sequences: they look for memory and
// undefined-behaviour errors, which a shorter run finds as well (the fuzzer drives the same driver
// under them for longer); the release build runs all.
#if FAIRGATE_SANITIZED
constexpr int kSequences = 1000;
#else
constexpr int kSequences = 10000;
#endif

void RunMode(const SchedulerOptions& options, std::uint64_t salt, bool extensions = false,
             bool workers = false, bool groups = false) {
  long admissions = 0, expiries = 0, joins = 0, capacity_changes = 0, lost = 0, reserved = 0,
       borrowed = 0, group_moves = 0, sheds = 0, shed_refusals = 0;
  DriverConfig config;
  config.base = options;
  config.extensions = extensions;
  config.workers = workers;
  config.groups = groups;
  for (int i = 0; i < kSequences; ++i) {
    CAPTURE(i);
    RandomChoices choices(salt * 1000003 + i);
    const DriverResult result = RunDifferential(choices, config);
    REQUIRE_MESSAGE(result.difference.empty(), result.difference);
    admissions += result.admissions;
    expiries += result.expiries;
    sheds += result.sheds;
    shed_refusals += result.shed_refusals;
    joins += result.joins;
    capacity_changes += result.capacity_changes;
    lost += result.lost;
    reserved += result.worker_reserved;
    borrowed += result.borrowed;
    group_moves += result.group_moves;
  }
  // With groups, keys must move between groups with their jobs.
  if (groups) CHECK(group_moves > kSequences / 2);
  // The sequences must exercise admission (and with the extensions, expiry and joins) for the
  // comparison to mean anything.
  CHECK(admissions > kSequences * 10);
  if (extensions) CHECK(expiries > kSequences / 10);
  // Shedding (drawn with the extensions): pending jobs shed and calls refused at arrival.
  if (extensions) CHECK(sheds > kSequences / 20);
  if (extensions) CHECK(shed_refusals > kSequences / 20);
  if (extensions) CHECK(joins > kSequences);
  if (extensions) CHECK(capacity_changes > kSequences / (groups ? 8 : 4));
  // With workers, running jobs must be lost with their workers and reservations must admit.
  if (workers) CHECK(lost > kSequences / 4);
  if (workers) CHECK(reserved > kSequences / 10);
  // Where tiers lend (the default rule, and drawn with the extensions), borrowers must run.
  if (options.rule.lending || extensions) CHECK(borrowed > kSequences / 4);
  MESSAGE("admissions ", admissions, ", lost ", lost, ", by reservation ", reserved, ", borrowed ",
          borrowed, ", shed ", sheds, ", refused by shedding ", shed_refusals);
}

TEST_CASE("CoreDifferential.SeedMode.MatchesReferenceModel") {
  RunMode(SchedulerOptions::Seed(), 1);
}

TEST_CASE("CoreDifferential.DefaultMode.MatchesReferenceModel") {
  RunMode(SchedulerOptions::Default(), 2);
}

TEST_CASE("CoreDifferential.IdleCatchUp.MatchesReferenceModel") {
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.idle_catch_up = true;
  RunMode(options, 3);
}

TEST_CASE("CoreDifferential.Extensions.MatchReferenceModel") {
  RunMode(SchedulerOptions::Default(), 5, true);
}

TEST_CASE("CoreDifferential.ExtensionsWithIdleCatchUp.MatchReferenceModel") {
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.idle_catch_up = true;
  RunMode(options, 6, true);
}

TEST_CASE("CoreDifferential.Workers.MatchReferenceModel") {
  RunMode(SchedulerOptions::Default(), 7, false, true);
}

TEST_CASE("CoreDifferential.WorkersWithExtensions.MatchReferenceModel") {
  RunMode(SchedulerOptions::Default(), 8, true, true);
}

TEST_CASE("CoreDifferential.Groups.MatchReferenceModel") {
  RunMode(SchedulerOptions::Default(), 9, false, false, true);
}

TEST_CASE("CoreDifferential.GroupsWithExtensionsAndWorkers.MatchReferenceModel") {
  RunMode(SchedulerOptions::Default(), 10, true, true, true);
}

// Idle catch-up among groups, then among a group's keys (docs/ordering.md, "Groups").
TEST_CASE("CoreDifferential.GroupsWithIdleCatchUpAndExtensions.MatchReferenceModel") {
  SchedulerOptions options = SchedulerOptions::Default();
  options.rule.idle_catch_up = true;
  RunMode(options, 11, true, false, true);
}

TEST_CASE("CoreDifferential.SeedModeWithIdleCatchUp.MatchesReferenceModel") {
  SchedulerOptions options = SchedulerOptions::Seed();
  options.rule.idle_catch_up = true;
  RunMode(options, 4);
}

}  // namespace core_differential_test
}  // namespace
}  // namespace fairgate
