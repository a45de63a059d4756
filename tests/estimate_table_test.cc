// EstimateTable: EWMA learning per (type, id), and least-recently-used eviction past a TTL.
#include "core/estimate_table.h"

#include "doctest/doctest.h"

namespace fairgate::core {
namespace {

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

}  // namespace
}  // namespace fairgate::core
