// The admission order of core/order.h and the entries that copy it (core/queue_nodes.h): every
// comparison agrees with the declared AdmissionOrder, and a lane set (a lazy heap) keeps its lanes
// in that order through links, moves and unlinks, layout changes and slots reused or retired.
#include "core/order.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "core/queue_nodes.h"
#include "doctest/doctest.h"

namespace fairgate::core {
namespace {

TEST_CASE("Order.SortableBits.SortsLikeTheDoubles") {
  const std::vector<double> values{-std::numeric_limits<double>::infinity(),
                                   -1e300,
                                   -2.5,
                                   -1,
                                   -1e-300,
                                   -0.0,
                                   0.0,
                                   1e-300,
                                   0.5,
                                   1,
                                   3,
                                   1e300,
                                   std::numeric_limits<double>::infinity()};
  for (std::size_t i = 0; i < values.size(); ++i) {
    for (std::size_t j = 0; j < values.size(); ++j) {
      CAPTURE(values[i]);
      CAPTURE(values[j]);
      CHECK((SortableBits(values[i]) < SortableBits(values[j])) == (values[i] < values[j]));
    }
  }
  CHECK(SortableBits(-0.0) == SortableBits(0.0));
  CHECK(kNoSjf == SortableBits(0.0));
}

TEST_CASE("Order.Tuple.KeyPlaceFirstThenJobPlaceFieldByField") {
  const AdmissionOrder reserved_heavy{{0, SortableBits(100)}, {kNoSjf, SortableBits(9), 9}};
  const AdmissionOrder light{{kUnreservedRank, SortableBits(1)}, {kNoSjf, SortableBits(0), 0}};
  const AdmissionOrder heavy{{kUnreservedRank, SortableBits(2)}, {kNoSjf, SortableBits(0), 0}};
  const AdmissionOrder short_job{{kUnreservedRank, SortableBits(2)},
                                 {SortableBits(0.5), SortableBits(5), 5}};
  const AdmissionOrder long_job{{kUnreservedRank, SortableBits(2)},
                                {SortableBits(7), SortableBits(1), 1}};
  const AdmissionOrder earlier{{kUnreservedRank, SortableBits(2)},
                               {SortableBits(7), SortableBits(0), 8}};
  CHECK(reserved_heavy < light);  // a reservation goes before any cost
  CHECK(light < heavy);           // then the key's cost
  CHECK(heavy < short_job);       // then sjf (0 when not shortest-first)
  CHECK(short_job < long_job);
  CHECK(earlier < long_job);  // then arrival, then seq
  CHECK_FALSE(long_job < long_job);
}

TEST_CASE("Order.CompactEntries.CompareAsTheEntriesTheyStandFor") {
  std::mt19937_64 rng(3);
  std::vector<CompactLaneEntry> compact;
  for (int i = 0; i < 2000; ++i) {
    // Few distinct values, so that ties on the first fields are common.
    compact.push_back({SortableBits(static_cast<double>(rng() % 4)),
                       SortableBits(static_cast<double>(rng() % 3)), rng() % 5});
  }
  for (std::size_t i = 0; i + 1 < compact.size(); ++i) {
    const CompactLaneEntry& a = compact[i];
    const CompactLaneEntry& b = compact[i + 1];
    CHECK((a < b) == (a.Expand() < b.Expand()));
    CHECK((b < a) == (b.Expand() < a.Expand()));
    CHECK(CompactLaneEntry::Fits(a.Order()));
  }
}

// A random place; `plain` ones fit the compact layout. Few distinct values, so that ties on the
// first fields are common; the sequence keeps places unique, as a head's is.
AdmissionOrder RandomPlace(std::mt19937_64& rng, bool plain, std::uint64_t acc, std::uint64_t seq) {
  return {{plain || rng() % 2 ? kUnreservedRank : 0, acc},
          {plain ? kNoSjf : SortableBits(static_cast<double>(rng() % 3)),
           SortableBits(static_cast<double>(rng() % 4)), seq}};
}

// The set's lanes in its order, from its fronts (which drop stale entries) and ForEach.
std::vector<const Lane*> InOrder(const LaneSet& set) {
  std::vector<const Lane*> lanes;
  set.ForEach([&](Lane* lane) { lanes.push_back(lane); });
  return lanes;
}

TEST_CASE("Order.LaneSet.TakesTheFullLayoutWhenALaneNeedsItAndKeepsTheOrder") {
  LaneSlots slots;
  std::vector<Lane> lanes(200);
  std::mt19937_64 rng(5);
  LaneSet set(slots);
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    const bool plain = i < 150;  // the first 150 fit the compact layout
    lanes[i].slot = slots.Take(&lanes[i]);
    lanes[i].order = RandomPlace(rng, plain, SortableBits(static_cast<double>(rng() % 10)), i);
    set.insert(lanes[i]);
    if (i == 149) CHECK(set.compact());  // every lane so far fitted the compact layout
  }
  CHECK_FALSE(set.compact());
  CHECK(set.size() == lanes.size());
  CHECK(set.Problem() == nullptr);
  std::vector<Lane*> sorted;
  for (Lane& lane : lanes) sorted.push_back(&lane);
  std::sort(sorted.begin(), sorted.end(), [](Lane* a, Lane* b) { return a->order < b->order; });
  // Taking the fronts one by one gives the declared order.
  for (Lane* lane : sorted) {
    REQUIRE_FALSE(set.empty());
    CHECK(set.front() == lane);
    set.erase(*lane);
  }
  CHECK(set.empty());
  CHECK(set.entries() == 0);
}

TEST_CASE("Order.LaneSet.MatchesASortedModelThroughLinksMovesAndUnlinks") {
  // Random links, unlinks and moves (small and large, later and earlier, of the front and of
  // others), in sets of one lane to many, compact and then full, with lanes freed and their slots
  // taken by new lanes: after each step the set's front, size and order are the model's, its
  // stale entries are within the rebuild's bound, and its own checks pass.
  std::mt19937_64 rng(17);
  for (const std::size_t size : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{40}}) {
    CAPTURE(size);
    LaneSlots slots;
    std::vector<std::unique_ptr<Lane>> lanes;
    std::vector<Lane*> linked;
    LaneSet set(slots);
    std::uint64_t seq = 0;
    auto link = [&](bool plain) {
      lanes.push_back(std::make_unique<Lane>());
      Lane& lane = *lanes.back();
      lane.slot = slots.Take(&lane);
      lane.order = RandomPlace(rng, plain, rng() % 1000, seq++);
      set.insert(lane);
      linked.push_back(&lane);
    };
    for (std::size_t i = 0; i < size; ++i) link(true);
    for (int step = 0; step < 6000; ++step) {
      const bool plain = step < 4000;  // then places the compact layout cannot hold
      const auto op = rng() % 8;
      if (op == 0 && linked.size() > 1) {
        // Unlink a lane and free it, as the core does with an empty one: its slot goes to the
        // next lane made, while its stale entry may still lie in the set.
        const std::size_t i = rng() % linked.size();
        Lane* lane = linked[i];
        set.erase(*lane);
        linked.erase(linked.begin() + static_cast<std::ptrdiff_t>(i));
        slots.Give(lane->slot);
      } else if (op == 1 && linked.size() < 2 * size) {
        link(plain);
      } else {
        Lane& lane = rng() % 3 == 0 ? *set.front() : *linked[rng() % linked.size()];
        const std::uint64_t acc = lane.order.key.acc;
        const std::uint64_t step_size = rng() % 2 ? rng() % 3 : rng() % 1000;
        // Mostly later, as a charge moves a key; sometimes earlier, as a completion that cost
        // less than its charge does.
        const std::uint64_t to =
            rng() % 5 == 0 ? (acc > step_size ? acc - step_size : 0) : acc + step_size;
        lane.order = RandomPlace(rng, plain, to, seq++);
        set.Relink(lane);
      }
      std::vector<const Lane*> model(linked.begin(), linked.end());
      std::sort(model.begin(), model.end(),
                [](const Lane* a, const Lane* b) { return a->order < b->order; });
      REQUIRE(set.size() == model.size());
      const char* problem = set.Problem();
      REQUIRE_MESSAGE(problem == nullptr, problem);
      CHECK(set.entries() <= 3 * model.size() + 8);
      CHECK(InOrder(set) == model);
      CHECK(set.front() == model.front());
    }
    CHECK_FALSE(set.compact());
  }
}

TEST_CASE("Order.LaneSet.AStaleEntryIsNotTakenForTheLaneThatReusesItsSlot") {
  // A lane unlinked behind another leaves its entry in set A; freed, its slot goes to a new lane
  // linked into set B. A still has one lane, and B one.
  LaneSlots slots;
  LaneSet a(slots), b(slots);
  Lane first, freed, reuser;
  first.slot = slots.Take(&first);
  freed.slot = slots.Take(&freed);
  first.order = {{kUnreservedRank, 1}, {kNoSjf, 0, 1}};
  freed.order = {{kUnreservedRank, 5}, {kNoSjf, 0, 2}};
  a.insert(first);
  a.insert(freed);
  a.erase(freed);
  REQUIRE(a.entries() == 2);  // the stale entry is still there
  slots.Give(freed.slot);
  reuser.slot = slots.Take(&reuser);
  CHECK(reuser.slot == freed.slot);
  reuser.order = freed.order;  // even at the same place
  b.insert(reuser);
  CHECK(a.size() == 1);
  CHECK(InOrder(a) == std::vector<const Lane*>{&first});
  CHECK(a.Problem() == nullptr);
  a.erase(first);
  CHECK(a.empty());
  CHECK(b.front() == &reuser);
  CHECK(b.Problem() == nullptr);
}

TEST_CASE("Order.LaneSlots.ASpentSlotIsRetiredAndItsLaneTakesANewOne") {
  // With 4 generations to a slot, a lane that moves often goes through several slots; entries of
  // its old slots stay stale and the order stays right.
  LaneSlots slots(4);
  LaneSet set(slots);
  Lane mover, other;
  mover.slot = slots.Take(&mover);
  other.slot = slots.Take(&other);
  mover.order = {{kUnreservedRank, 0}, {kNoSjf, 0, 0}};
  other.order = {{kUnreservedRank, 50}, {kNoSjf, 0, 1}};
  set.insert(mover);
  set.insert(other);
  std::uint64_t seq = 2;
  for (std::uint64_t acc = 1; acc <= 100; ++acc) {
    mover.order = {{kUnreservedRank, acc}, {kNoSjf, 0, seq++}};
    set.Relink(mover);
    REQUIRE(set.Problem() == nullptr);
    CHECK(set.size() == 2);
    CHECK(set.front() == (acc < 50 ? &mover : &other));
  }
  CHECK(slots.retired() >= 20);
  CHECK(slots.lane(mover.slot) == &mover);
}

TEST_CASE("Order.LaneJobs.KeepsTheOrderThroughOneAndManyJobs") {
  // Random inserts and erases, the lane going from empty to one job (kept inline) to many (a
  // B-tree) and back, against a sorted vector: the front is always the least entry.
  std::vector<Job> jobs(64);
  std::mt19937_64 rng(11);
  LaneJobs lane;
  std::vector<ReadyEntry> model;
  auto entry = [&](std::size_t i) {
    return ReadyEntry{{SortableBits(static_cast<double>(rng() % 3)),
                       SortableBits(static_cast<double>(rng() % 5)), i},
                      &jobs[i]};
  };
  std::vector<bool> in(jobs.size(), false);
  for (int step = 0; step < 20000; ++step) {
    const std::size_t i = rng() % jobs.size();
    // Mostly small lanes, the case the inline job is for, with runs up to a full B-tree.
    const bool grow = model.size() < 2 ? rng() % 4 != 0 : rng() % 2 == 0;
    if (!in[i] && grow) {
      const ReadyEntry e = entry(i);
      lane.insert(e);
      model.insert(std::upper_bound(model.begin(), model.end(), e), e);
      in[i] = true;
    } else if (!model.empty()) {
      const ReadyEntry e = model[rng() % model.size()];
      CHECK(lane.contains(e));
      lane.erase(e);
      model.erase(std::find_if(model.begin(), model.end(),
                               [&](const ReadyEntry& m) { return m.job == e.job; }));
      in[static_cast<std::size_t>(e.job - jobs.data())] = false;
      CHECK_FALSE(lane.contains(e));
    }
    REQUIRE(lane.empty() == model.empty());
    if (!model.empty()) {
      CHECK(lane.front().job == model.front().job);
      CHECK(lane.front().place == model.front().place);
    }
  }
}

}  // namespace
}  // namespace fairgate::core
