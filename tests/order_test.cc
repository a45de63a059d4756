// The admission order of core/order.h and the entries that copy it (core/queue_nodes.h): every
// comparison agrees with the declared AdmissionOrder, and a lane set that changes its layout keeps
// its lanes in the same order.
#include "core/order.h"

#include <algorithm>
#include <cmath>
#include <limits>
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
                       SortableBits(static_cast<double>(rng() % 3)), rng() % 5, nullptr});
  }
  for (std::size_t i = 0; i + 1 < compact.size(); ++i) {
    const CompactLaneEntry& a = compact[i];
    const CompactLaneEntry& b = compact[i + 1];
    CHECK((a < b) == (a.Expand() < b.Expand()));
    CHECK((b < a) == (b.Expand() < a.Expand()));
  }
}

TEST_CASE("Order.LaneSet.TakesTheFullLayoutWhenAnEntryNeedsItAndKeepsTheOrder") {
  std::vector<Lane> lanes(200);
  std::mt19937_64 rng(5);
  LaneSet set;
  std::vector<LaneEntry> inserted;
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    const bool plain = i < 150;  // the first 150 fit the compact layout
    LaneEntry e{{{plain || rng() % 2 ? kUnreservedRank : 0, SortableBits(rng() % 10)},
                 {plain ? kNoSjf : SortableBits(static_cast<double>(rng() % 4)),
                  SortableBits(static_cast<double>(rng() % 10)), i}},
                &lanes[i]};
    set.insert(e);
    inserted.push_back(e);
    CHECK(set.contains(e));
    if (i == 149) CHECK(set.compact());  // every entry so far fitted the compact layout
  }
  CHECK_FALSE(set.compact());
  CHECK(set.size() == inserted.size());
  std::sort(inserted.begin(), inserted.end());
  // Taking the fronts one by one gives the declared order.
  for (const LaneEntry& e : inserted) {
    REQUIRE_FALSE(set.empty());
    CHECK(set.front() == e.lane);
    set.erase(e);
  }
  CHECK(set.empty());
}

TEST_CASE("Order.LaneSet.MovesKeepTheOrderInPlaceOrAcross") {
  // Random moves of random entries, small moves (which stay between the entry's neighbours, and
  // are rewritten in place) and large ones, in sets of one lane to many, compact and then full,
  // against a sorted vector: after each, the set holds exactly the model's entries, in its order.
  std::vector<Lane> lanes(40);
  std::mt19937_64 rng(17);
  for (const std::size_t size : {std::size_t{1}, std::size_t{2}, std::size_t{3}, lanes.size()}) {
    CAPTURE(size);
    LaneSet set;
    std::vector<LaneEntry> model;
    std::uint64_t seq = 0;
    auto entry = [&](std::size_t i, bool plain, std::uint64_t acc) {
      return LaneEntry{{{plain || rng() % 2 ? kUnreservedRank : 0, acc},
                        {plain ? kNoSjf : SortableBits(static_cast<double>(rng() % 3)),
                         SortableBits(static_cast<double>(rng() % 4)), seq++}},
                       &lanes[i]};
    };
    for (std::size_t i = 0; i < size; ++i) {
      model.push_back(entry(i, true, rng() % 1000));
      set.insert(model.back());
    }
    for (int step = 0; step < 3000; ++step) {
      const bool plain = step < 2000;  // then entries the compact layout cannot hold
      LaneEntry& from = model[rng() % model.size()];
      const std::uint64_t acc = from.order.key.acc + (rng() % 2 ? rng() % 3 : rng() % 1000);
      const LaneEntry to = entry(static_cast<std::size_t>(from.lane - lanes.data()), plain, acc);
      set.Move(from, to);
      from = to;
      std::sort(model.begin(), model.end());
      REQUIRE(set.size() == model.size());
      std::size_t i = 0;
      set.ForEach([&](Lane* lane) { CHECK(lane == model[i++].lane); });
      for (const LaneEntry& e : model) CHECK(set.contains(e));
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

}  // namespace
}  // namespace fairgate::core
