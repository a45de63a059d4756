// EstimateTable: EWMA learning per (type, id), and least-recently-used eviction past a TTL.
#include "core/estimate_table.h"

#include "doctest/doctest.h"

namespace fairgate::core {
namespace {
namespace estimate_table_test {

TEST_CASE("EstimateTable.Use.StartsAtTheDefaultAndKeepsTypesApart") {
  EstimateTable table;
  CHECK(table.Use(0, "linux", 10, 0) == 10);
  CHECK(table.Use(1, "linux", 3, 0) == 3);
  table.Learn(0, "linux", 10, 20, 0.5, 1);
  CHECK(table.Find(0, "linux") == 15.0);
  CHECK(table.Find(1, "linux") == 3.0);
  CHECK(table.Find(2, "linux") == std::nullopt);
  CHECK(table.size() == 2);
}

TEST_CASE("EstimateTable.Learn.FromNothingStartsAtTheDefault") {
  EstimateTable table;
  table.Learn(0, "git", 4, 8, 0.25, 0);
  CHECK(table.Find(0, "git") == 5.0);  // 0.25 * 8 + 0.75 * 4
  table.Learn(0, "git", 4, 1, 1.0, 0);
  CHECK(table.Find(0, "git") == 1.0);  // alpha 1: only the last observation
}

TEST_CASE("EstimateTable.Evict.LeastRecentlyUsedFirstBoundedAndStopsAtAFreshOne") {
  EstimateTable table;
  table.Use(0, "a", 1, 0);
  table.Use(0, "b", 1, 1);
  table.Use(0, "c", 1, 2);
  table.Use(0, "a", 1, 3);             // a is now the most recently used
  CHECK(table.Evict(10, 10, 1) == 0);  // nothing unused for 10 s yet
  CHECK(table.Evict(12, 10, 1) == 1);  // b, and only one: the budget
  CHECK(table.Find(0, "b") == std::nullopt);
  CHECK(table.Evict(12, 10, 5) == 1);  // c; a (used at 3) is fresh and stops the sweep
  CHECK(table.Find(0, "a").has_value());
  CHECK(table.Evict(13, 10, 5) == 1);
  CHECK(table.size() == 0);
}

TEST_CASE("EstimateTable.Hold.LearnsThroughTheHoldAsLearnWould") {
  // Two tables, one used through holds and one through lookups, tell the same estimates and
  // evict the same entries in the same order.
  EstimateTable held, looked_up;
  bool learned = true;
  EstimateTable::Entry* linux_git = held.UseAndHold(0, "linux", 10, 0, &learned);
  CHECK_FALSE(learned);
  CHECK(looked_up.Use(0, "linux", 10, 0) == 10);
  EstimateTable::Entry* git_git = held.UseAndHold(0, "git", 2, 1, &learned);
  looked_up.Use(0, "git", 2, 1);
  CHECK(EstimateTable::Holds(linux_git, 0, "linux"));
  CHECK_FALSE(EstimateTable::Holds(linux_git, 0, "git"));
  held.LearnHeld(linux_git, 10, 30, 0.5, 2);  // linux is now the most recently used
  looked_up.Learn(0, "linux", 10, 30, 0.5, 2);
  CHECK_FALSE(EstimateTable::Holds(linux_git, 0, "linux"));  // given back
  CHECK(held.Find(0, "linux") == 20.0);
  CHECK(held.Find(0, "linux") == looked_up.Find(0, "linux"));
  CHECK(held.UseAndHold(0, "linux", 10, 3, &learned)->value == 20.0);
  CHECK(learned);
  // git (last used at 1) goes first, held or not; linux (used at 3) is fresh.
  CHECK(held.Evict(11.5, 10, 5) == 1);
  CHECK(looked_up.Evict(11.5, 10, 5) == 1);
  CHECK(held.Find(0, "git") == std::nullopt);
  CHECK(held.Find(0, "linux").has_value());
  held.LearnHeld(git_git, 2, 4, 0.5, 12);
  CHECK(held.Find(0, "git") == 3.0);  // a new entry: 0.5 * 4 + 0.5 * 2, as Learn starts one
}

TEST_CASE("EstimateTable.Hold.AnEntryEvictedWhileHeldIsForgottenAndItsHoldersLearnIntoTheNewOne") {
  EstimateTable table;
  bool learned = false;
  EstimateTable::Entry* first = table.UseAndHold(0, "linux", 10, 0, &learned);
  EstimateTable::Entry* second = table.UseAndHold(0, "linux", 10, 0, &learned);
  CHECK(first == second);              // two running jobs of one (type, id), one entry
  CHECK(table.Evict(60, 10, 5) == 1);  // unused for 60 s: forgotten, though held
  CHECK(table.size() == 0);
  CHECK(table.Find(0, "linux") == std::nullopt);
  CHECK(EstimateTable::Holds(first, 0, "linux"));  // still alive for its holders
  CHECK(table.Use(0, "linux", 10, 61) == 10);      // a later use starts from the default again
  table.LearnHeld(first, 10, 20, 0.5, 62);         // into the new entry: 0.5 * 20 + 0.5 * 10
  CHECK(table.Find(0, "linux") == 15.0);
  CHECK(EstimateTable::Holds(second, 0, "linux"));  // the other holder keeps it alive
  table.LearnHeld(second, 10, 35, 0.5, 63);         // 0.5 * 35 + 0.5 * 15
  CHECK(table.Find(0, "linux") == 25.0);
  CHECK(table.size() == 1);
}

}  // namespace estimate_table_test
}  // namespace
}  // namespace fairgate::core
