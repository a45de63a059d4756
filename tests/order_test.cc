// The admission order of core/order.h and the entries that copy it (core/queue_nodes.h): every
// comparison agrees with the declared AdmissionOrder, and a lane set (a heap whose lanes know
// their positions) keeps its lanes in that order through links, moves, unlinks and its change of
// layout.
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
namespace order_test {

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
                       SortableBits(static_cast<double>(rng() % 3)), rng() % 5, nullptr});
  }
  for (std::size_t i = 0; i + 1 < compact.size(); ++i) {
    const CompactLaneEntry& a = compact[i];
    const CompactLaneEntry& b = compact[i + 1];
    CHECK((a < b) == (a.Expand() < b.Expand()));
    CHECK((b < a) == (b.Expand() < a.Expand()));
    CHECK(CompactLaneEntry::Fits(a.Order()));
  }
  std::vector<CompactGroupedLaneEntry> grouped;
  for (int i = 0; i < 2000; ++i) {
    grouped.push_back({SortableBits(static_cast<double>(rng() % 3)),
                       SortableBits(static_cast<double>(rng() % 3)),
                       SortableBits(static_cast<double>(rng() % 3)), rng() % 5, nullptr});
  }
  for (std::size_t i = 0; i + 1 < grouped.size(); ++i) {
    const CompactGroupedLaneEntry& a = grouped[i];
    const CompactGroupedLaneEntry& b = grouped[i + 1];
    CHECK((a < b) == (a.Expand() < b.Expand()));
    CHECK((b < a) == (b.Expand() < a.Expand()));
    CHECK(CompactGroupedLaneEntry::Fits(a.Expand().group, a.Expand().order));
  }
  CHECK_FALSE(CompactGroupedLaneEntry::Fits({0, 0}, grouped[0].Expand().order));  // reserved
}

// A random place; `plain` ones fit the compact layout. Few distinct values, so that ties on the
// first fields are common; the sequence keeps places unique, as a head's is.
AdmissionOrder RandomPlace(std::mt19937_64& rng, bool plain, std::uint64_t acc, std::uint64_t seq) {
  return {{plain || rng() % 2 ? kUnreservedRank : 0, acc},
          {plain ? kNoSjf : SortableBits(static_cast<double>(rng() % 3)),
           SortableBits(static_cast<double>(rng() % 4)), seq}};
}

// A key for the lanes of these tests: a lane with no key is a stand-in or a proxy.
KeyState a_key;

std::vector<const Lane*> InOrder(const LaneSet& set) {
  std::vector<const Lane*> lanes;
  set.ForEach([&](Lane* lane) { lanes.push_back(lane); });
  return lanes;
}

TEST_CASE("Order.LaneSet.TakesTheFullLayoutWhenALaneNeedsItAndKeepsTheOrder") {
  std::vector<Lane> lanes(200);
  std::mt19937_64 rng(5);
  LaneSet set;
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    const bool plain = i < 150;  // the first 150 fit the compact layout
    lanes[i].key = &a_key;
    lanes[i].order = RandomPlace(rng, plain, SortableBits(static_cast<double>(rng() % 10)), i);
    set.insert(lanes[i]);
    CHECK(set.contains(lanes[i]));
    if (i == 149) CHECK(set.compact());  // every lane so far fitted the compact layout
  }
  CHECK_FALSE(set.compact());
  CHECK(set.size() == lanes.size());
  CHECK(set.valid());
  std::vector<Lane*> sorted;
  for (Lane& lane : lanes) sorted.push_back(&lane);
  std::sort(sorted.begin(), sorted.end(), [](Lane* a, Lane* b) { return a->order < b->order; });
  // Taking the fronts one by one gives the declared order.
  for (Lane* lane : sorted) {
    REQUIRE_FALSE(set.empty());
    CHECK(set.front() == lane);
    set.erase(*lane);
    CHECK_FALSE(set.contains(*lane));
  }
  CHECK(set.empty());
}

TEST_CASE("Order.LaneSet.TakesTheGroupedLayoutForAStandInAndOrdersByTheGroupFirst") {
  // Keys' own lanes (a group of their own: their group place is their key place) and groups'
  // stand-ins (their group's place, then their best lane's order), with few distinct values so
  // that ties on the group place are common: the set takes a grouped layout at the first
  // stand-in whose group place differs from its key place, and orders by (group, key, job).
  // With plain places (no reservation, no sjf) the compact grouped one, until a stand-in's group
  // is reserved; else the full one.
  for (const bool plain : {true, false}) {
    CAPTURE(plain);
    std::mt19937_64 rng(23);
    std::vector<std::unique_ptr<Lane>> lanes;
    std::vector<std::unique_ptr<GroupPresence>> stand_ins;
    LaneSet set;
    std::vector<Lane*> linked;
    std::uint64_t seq = 0;
    for (int i = 0; i < 300; ++i) {
      Lane* lane;
      if (i < 50 || rng() % 2 == 0) {
        lanes.push_back(std::make_unique<Lane>());
        lane = lanes.back().get();
        lane->key = &a_key;
      } else {
        stand_ins.push_back(std::make_unique<GroupPresence>());
        GroupPresence& stand_in = *stand_ins.back();
        stand_in.presence = true;
        stand_in.place = {kUnreservedRank, SortableBits(static_cast<double>(rng() % 4))};
        lane = &stand_in;
      }
      lane->order = RandomPlace(rng, plain, SortableBits(static_cast<double>(rng() % 4)), seq++);
      set.insert(*lane);
      linked.push_back(lane);
      if (i == 49) CHECK_FALSE(set.grouped());  // keys' own lanes only so far
      CHECK(set.contains(*lane));
    }
    CHECK(set.grouped());
    CHECK(set.compact_grouped() == plain);
    CHECK(set.valid());
    // Some move: a stand-in to another group place (from step 400, now and then a reserved one),
    // a key's lane to another order.
    for (int step = 0; step < 500; ++step) {
      Lane& lane = *linked[rng() % linked.size()];
      if (lane.presence) {
        const bool reserved = step >= 400 && rng() % 4 == 0;
        static_cast<GroupPresence&>(lane).place = {reserved ? 0 : kUnreservedRank,
                                                   SortableBits(static_cast<double>(rng() % 4))};
        set.RelinkStandIn(static_cast<GroupPresence&>(lane));
      } else {
        lane.order.key.acc = SortableBits(static_cast<double>(rng() % 4));
        set.Relink(lane);
      }
      if (step == 399) CHECK(set.compact_grouped() == plain);
      REQUIRE(set.valid());
      for (const Lane* l : linked) REQUIRE(set.contains(*l));
    }
    CHECK_FALSE(set.compact_grouped());  // a reserved group's stand-in: the full grouped layout
    CHECK(set.grouped());
    auto whole = [](const Lane* lane) { return std::make_pair(GroupPlaceOf(*lane), lane->order); };
    std::sort(linked.begin(), linked.end(),
              [&](const Lane* a, const Lane* b) { return whole(a) < whole(b); });
    CHECK(InOrder(set) == std::vector<const Lane*>(linked.begin(), linked.end()));
    for (Lane* lane : linked) {
      REQUIRE(set.front() == lane);
      CHECK(set.front_group() == GroupPlaceOf(*lane));
      set.erase(*lane);
    }
    CHECK(set.empty());
  }
}

TEST_CASE("Order.LaneSet.MatchesASortedModelThroughLinksMovesAndUnlinks") {
  // Random links, unlinks (of the front and of others) and moves (small and large, later and
  // earlier, of the front and of others), in sets of one lane to many, compact and then full:
  // after each step the set's front, size and order are the model's, each linked lane is in it
  // at its place, and its heap checks pass.
  std::mt19937_64 rng(17);
  for (const std::size_t size : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{40}}) {
    CAPTURE(size);
    std::vector<std::unique_ptr<Lane>> lanes;
    std::vector<Lane*> linked;
    LaneSet set;
    std::uint64_t seq = 0;
    auto link = [&](bool plain) {
      lanes.push_back(std::make_unique<Lane>());
      Lane& lane = *lanes.back();
      lane.key = &a_key;
      lane.order = RandomPlace(rng, plain, rng() % 1000, seq++);
      set.insert(lane);
      linked.push_back(&lane);
    };
    for (std::size_t i = 0; i < size; ++i) link(true);
    for (int step = 0; step < 6000; ++step) {
      const bool plain = step < 4000;  // then places the compact layout cannot hold
      const auto op = rng() % 8;
      if (op == 0 && linked.size() > 1) {
        const std::size_t i =
            rng() % 2 == 0
                ? static_cast<std::size_t>(std::find(linked.begin(), linked.end(), set.front()) -
                                           linked.begin())
                : rng() % linked.size();
        set.erase(*linked[i]);
        linked.erase(linked.begin() + static_cast<std::ptrdiff_t>(i));
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
      REQUIRE(set.valid());
      for (const Lane* lane : model) CHECK(set.contains(*lane));
      CHECK(InOrder(set) == model);
      CHECK(set.front() == model.front());
    }
    CHECK_FALSE(set.compact());
  }
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

}  // namespace order_test
}  // namespace
}  // namespace fairgate::core
